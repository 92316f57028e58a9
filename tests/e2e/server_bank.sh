#!/bin/sh
# server_bank.sh — `headstart serve` through the session bank, end to end with curl on a tiny
# random model (headstart mkmodel; its chat template renders tools):
#   1. two OpenAI sessions then an Anthropic one share the ~1.4k-token head of
#      tests/golden/data/bank/head.json (system text + 5 tools) with different user turns:
#      the first restores nothing, the later ones report cached tokens
#      (usage.prompt_tokens_details.cached_tokens / cache_read_input_tokens) of at least the
#      head length that `headstart render --head` gives for the same body;
#   2. every answer (temperature 0) equals the same request's answer from a --no-bank
#      server, whole non-stream bodies compared except ids, timestamps and the cache split
#      of the usage (whose sum must match);
#   3. streaming through the bank (OpenAI with include_usage, Anthropic): the same text as
#      the non-stream answer, cached tokens in the stream's usage;
#   4. /metrics shows the bank (hits, misses by reason, restored tokens, bytes, evictions,
#      the disk tier); the --no-bank server reports 0 cached tokens and no bank metrics;
#   5. the disk tier (--bank-dir in the test's temp dir): after SIGTERM the blobs are on
#      disk, and a new server on the same directory restores the head for a new session.
# Servers listen on 127.0.0.1 --port 0; never the user's cache (always --bank-dir or
# --no-bank). Ends with "RESULT: N passed, N failed".
set -u
py=/usr/bin/python3
. "$(dirname "$0")/lib/server.sh"
e2e_setup server-bank curl

# stop_server PID — SIGTERM, wait (bounded: the disk tier flushes its queue); 0 when it exited 0
stop_server() { e2e_stop "$1" 10; }
# post PORT PATH BODYFILE OUT — POST, prints the HTTP status
post() { curl -s -o "$4" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "@$3" "http://127.0.0.1:$1$2"; }

# the bodies: one head (system + tools), different user turns
$py - "$tmp" <<'EOF' || { fail "bodies"; finish; }
import json, sys
d = sys.argv[1]
h = json.load(open("tests/golden/data/bank/head.json"))
def oa(u, **kw):
    b = {"model": "m", "max_tokens": 8, "temperature": 0, "tools": h["tools"],
         "messages": [{"role": "system", "content": h["system"]}, {"role": "user", "content": u}]}
    b.update(kw)
    return b
def an(u, **kw):
    b = {"model": "m", "max_tokens": 8, "temperature": 0, "system": h["system"],
         "tools": [{"name": t["function"]["name"], "description": t["function"]["description"],
                    "input_schema": t["function"]["parameters"]} for t in h["tools"]],
         "messages": [{"role": "user", "content": u}]}
    b.update(kw)
    return b
bodies = {
    "o1": oa("List the files in src."),
    "o2": oa("Explain the cache in two lines."),
    "a3": an("What does the bank keep?"),
    "o2s": oa("Explain the cache in two lines.", stream=True, stream_options={"include_usage": True}),
    "a3s": an("What does the bank keep?", stream=True),
    "o4": oa("Where is the server's entry point?"),
}
for k, v in bodies.items():
    json.dump(v, open(f"{d}/{k}.json", "w"))
EOF
head_o=$("$hs" render -m "$tmp/m" --request "$tmp/o2.json" --head 2>/dev/null)
head_a=$("$hs" render -m "$tmp/m" --request "$tmp/a3.json" --api anthropic --head 2>/dev/null)
[ "${head_o:-0}" -gt 256 ] && [ "${head_a:-0}" -gt 256 ] && pass "head lengths from render --head: openai $head_o, anthropic $head_a" \
    || { fail "render --head: '$head_o' '$head_a'"; finish; }

e2e_start "$tmp/bank.log" --bank-ram 256M --bank-dir "$tmp/bank"
pb=$port pidb=$pid
e2e_start "$tmp/nobank.log" --no-bank
pn=$port pidn=$pid
grep -q 'bank 256.*RAM, disk .*/bank' "$tmp/bank.log" && grep -q 'bank off' "$tmp/nobank.log" \
    && pass "start lines name the bank (budget, disk directory) and 'bank off'" \
    || fail "start lines: $(head -2 "$tmp/bank.log") / $(head -2 "$tmp/nobank.log")"

# usage PATH FILE API — prints "prompt cached" from a non-stream body
usage() {
    $py -c 'import json,sys
j = json.load(open(sys.argv[1])); u = j["usage"]
if sys.argv[2] == "openai": print(u["prompt_tokens"], u["prompt_tokens_details"]["cached_tokens"])
else: print(u["input_tokens"] + u["cache_read_input_tokens"], u["cache_read_input_tokens"])' "$1" "$2"
}
for r in o1 o2 a3; do
    case $r in a*) path=/v1/messages api=anthropic ;; *) path=/v1/chat/completions api=openai ;; esac
    sb=$(post "$pb" "$path" "$tmp/$r.json" "$tmp/$r.bank")
    sn=$(post "$pn" "$path" "$tmp/$r.json" "$tmp/$r.nobank")
    [ "$sb" = 200 ] && [ "$sn" = 200 ] || { fail "$r: status $sb / $sn: $(cat "$tmp/$r.bank") $(cat "$tmp/$r.nobank")"; continue; }
    set -- $(usage "$tmp/$r.bank" $api)
    prompt=$1 cached=$2
    set -- $(usage "$tmp/$r.nobank" $api)
    [ "$2" = 0 ] && [ "$1" = "$prompt" ] || fail "$r: the --no-bank server reports prompt $1, cached $2"
    case $r in
    o1) [ "$cached" = 0 ] && pass "first session: nothing cached ($prompt prompt tokens)" || fail "o1 cached $cached" ;;
    o2) [ "$cached" -ge "$head_o" ] && [ "$cached" -lt "$prompt" ] \
            && pass "second session (OpenAI): cached_tokens $cached >= head $head_o (prompt $prompt)" \
            || fail "o2: cached $cached, head $head_o, prompt $prompt" ;;
    a3) [ "$cached" -ge "$head_a" ] && [ "$cached" -lt "$prompt" ] \
            && pass "third session (Anthropic): cache_read_input_tokens $cached >= head $head_a (prompt $prompt)" \
            || fail "a3: cached $cached, head $head_a, prompt $prompt" ;;
    esac
    $py -c 'import json,sys
def norm(j):
    j = dict(j)
    for k in ("id", "created"): j.pop(k, None)
    u = dict(j["usage"])
    if "prompt_tokens_details" in u: u.pop("prompt_tokens_details")
    if "cache_read_input_tokens" in u:
        u["input_tokens"] += u.pop("cache_read_input_tokens"); u.pop("cache_creation_input_tokens", None)
    j["usage"] = u
    return j
a, b = (norm(json.load(open(f))) for f in sys.argv[1:3])
sys.exit(0 if a == b else 1)' "$tmp/$r.bank" "$tmp/$r.nobank" \
        && pass "$r: the answer equals the --no-bank server's (whole body but ids, times, cache split)" \
        || fail "$r: answers differ: $(cat "$tmp/$r.bank") // $(cat "$tmp/$r.nobank")"
done

# streaming through the bank: same text as non-stream, cached tokens in the stream's usage
curl -s -N -o "$tmp/o2s.sse" -H 'Content-Type: application/json' --data-binary "@$tmp/o2s.json" "http://127.0.0.1:$pb/v1/chat/completions"
$py -c 'import json,sys
text, usage, done = "", None, False
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith("data: "): continue
    if line == "data: [DONE]": done = True; continue
    c = json.loads(line[6:])
    if c.get("usage"): usage = c["usage"]
    for ch in c["choices"]: text += (ch["delta"].get("content") or "") + (ch["delta"].get("reasoning_content") or "")
m = json.load(open(sys.argv[2]))["choices"][0]["message"]
want = (m.get("content") or "") + (m.get("reasoning_content") or "")
ok = done and usage and usage["prompt_tokens_details"]["cached_tokens"] >= int(sys.argv[3]) and text == want
print(usage and usage["prompt_tokens_details"]["cached_tokens"])
sys.exit(0 if ok else 1)' "$tmp/o2s.sse" "$tmp/o2.nobank" "$head_o" >"$tmp/o2s.n" \
    && pass "OpenAI stream through the bank: same text, cached_tokens $(cat "$tmp/o2s.n") in the usage chunk" \
    || fail "OpenAI stream: $(head -c 800 "$tmp/o2s.sse")"
curl -s -N -o "$tmp/a3s.sse" -H 'Content-Type: application/json' --data-binary "@$tmp/a3s.json" "http://127.0.0.1:$pb/v1/messages"
$py -c 'import json,sys
text, start, stop = "", None, False
for line in open(sys.argv[1]):
    line = line.strip()
    if not line.startswith("data: "): continue
    e = json.loads(line[6:])
    if e["type"] == "message_start": start = e["message"]["usage"]
    if e["type"] == "content_block_delta":
        d = e["delta"]; text += d.get("text", "") + d.get("thinking", "")
    if e["type"] == "message_stop": stop = True
m = json.load(open(sys.argv[2]))
want = "".join(b.get("text", "") + b.get("thinking", "") for b in m["content"])
ok = stop and start and start["cache_read_input_tokens"] >= int(sys.argv[3]) and text == want
print(start and start["cache_read_input_tokens"])
sys.exit(0 if ok else 1)' "$tmp/a3s.sse" "$tmp/a3.nobank" "$head_a" >"$tmp/a3s.n" \
    && pass "Anthropic stream through the bank: same text, message_start cache_read_input_tokens $(cat "$tmp/a3s.n")" \
    || fail "Anthropic stream: $(head -c 800 "$tmp/a3s.sse")"

# /metrics
curl -s -o "$tmp/metrics" "http://127.0.0.1:$pb/metrics"
$py -c 'import sys
m = {}
for line in open(sys.argv[1]):
    if line.startswith("#") or not line.strip(): continue
    k, v = line.rsplit(" ", 1); m[k] = float(v)
ok = (m.get("headstart_bank_hits_total", 0) >= 4 and m.get("headstart_bank_lookups_total", 0) >= 5
      and m.get("headstart_bank_restored_tokens_total", 0) >= 4 * int(sys.argv[2])
      and m.get("headstart_bank_misses_total{reason=\"no_space\"}", 0) + m.get("headstart_bank_misses_total{reason=\"no_match\"}", 0) >= 1
      and m.get("headstart_bank_bytes", 0) > 0 and m.get("headstart_bank_entries", 0) > 0
      and "headstart_bank_evictions_total{reason=\"lru_snapshot\"}" in m
      and m.get("headstart_cached_tokens_total", 0) == m["headstart_bank_restored_tokens_total"]
      and m.get("headstart_bank_disk_enabled") == 1)
sys.exit(0 if ok else 1)' "$tmp/metrics" "$head_o" \
    && pass "/metrics: bank hits, misses by reason, restored tokens, bytes, evictions, disk tier" \
    || fail "/metrics: $(grep bank "$tmp/metrics")"
curl -s -o "$tmp/metrics.n" "http://127.0.0.1:$pn/metrics"
grep -q '^headstart_requests_total' "$tmp/metrics.n" && ! grep -q '^headstart_bank' "$tmp/metrics.n" \
    && pass "--no-bank: no bank metrics" || fail "--no-bank metrics: $(grep bank "$tmp/metrics.n")"

# the disk tier: written by exit, read by the next server on the same directory
stop_server "$pidb" && pass "SIGTERM: exit 0 (disk queue flushed)" || fail "bank server exit status"
n_blobs=$(find "$tmp/bank" -type f | wc -l)
[ "$n_blobs" -gt 1 ] && pass "the disk tier holds $n_blobs files" || fail "disk tier: $(find "$tmp/bank")"
e2e_start "$tmp/bank2.log" --bank-ram 256M --bank-dir "$tmp/bank"
pb2=$port pidb2=$pid
st=$(post "$pb2" /v1/chat/completions "$tmp/o4.json" "$tmp/o4.bank")
set -- $(usage "$tmp/o4.bank" openai 2>/dev/null) 0 0
[ "$st" = 200 ] && [ "$2" -ge "$head_o" ] && pass "a new server on the same --bank-dir restores the head from disk ($2 cached)" \
    || fail "restart: $st $(cat "$tmp/o4.bank")"
curl -s -o "$tmp/metrics2" "http://127.0.0.1:$pb2/metrics"
grep -q '^headstart_bank_disk_hits_total [1-9]' "$tmp/metrics2" && pass "/metrics counts the disk hit" \
    || fail "disk hit metrics: $(grep disk "$tmp/metrics2")"
stop_server "$pidb2" || fail "second bank server exit status"
stop_server "$pidn" || fail "no-bank server exit status"

if r=$(e2e_sanitizer "$tmp"/*.log); then
    fail "sanitizer report: $r"
else
    pass "no sanitizer report in the server logs"
fi
finish
