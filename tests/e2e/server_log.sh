#!/bin/sh
# server_log.sh — the request log and the default output cap ([F11] items 5, 6) on a tiny
# random model: with --max-tokens-default 6 a request without max_tokens (and one asking for
# 100000) stops after 6 tokens with the length stop in each API's words; with --log-format
# json every line the server writes is one JSON object, and each API request (and each
# error) has one "request" line with its id, API, status, token counts, cache source, times,
# stop reason and client address — bodies only with --log-bodies; a request its client left
# (a cut stream, a closed connection) is logged when its job has ended, with its tokens so
# far and stop "cancelled". Ends with "RESULT: N
# passed, N failed".
set -u
py=/usr/bin/python3
. "$(dirname "$0")/lib/server.sh"
e2e_setup server-log curl

ct='Content-Type: application/json'
nothink='"chat_template_kwargs":{"enable_thinking":false}'
code() { p=$1; o=$2; shift 2; curl -s -H "$ct" -o "$o" -w '%{http_code}' "$@" "http://127.0.0.1:$port$p"; }

# ---- JSON log, the cap, no bodies -----------------------------------------------------------
e2e_start "$tmp/a.log" --no-bank-disk --max-tokens-default 6 --log-format json
st=$(code /v1/chat/completions "$tmp/c1" -d '{"model":"m","messages":[{"role":"user","content":"Hello"}],"ignore_eos":true,"temperature":0,'"$nothink"'}')
$py - "$tmp/c1" "$st" <<'EOF' && pass "no max_tokens: capped at --max-tokens-default, finish_reason length" || fail "cap (chat): $st $(cat "$tmp/c1")"
import json, sys
j = json.load(open(sys.argv[1]))
sys.exit(0 if sys.argv[2] == "200" and j["usage"]["completion_tokens"] == 6 and j["choices"][0]["finish_reason"] == "length" else 1)
EOF
st=$(code /v1/messages "$tmp/a1" -d '{"model":"m","max_tokens":100000,"ignore_eos":true,"messages":[{"role":"user","content":"Hi"}],"thinking":{"type":"disabled"}}')
$py - "$tmp/a1" "$st" <<'EOF' && pass "max_tokens 100000: capped, stop_reason max_tokens" || fail "cap (messages): $st $(cat "$tmp/a1")"
import json, sys
j = json.load(open(sys.argv[1]))
sys.exit(0 if sys.argv[2] == "200" and j["usage"]["output_tokens"] == 6 and j["stop_reason"] == "max_tokens" else 1)
EOF
st=$(code /v1/chat/completions "$tmp/c2" -d '{"model":"m","messages":[{"role":"user","content":"Hello"}],"max_tokens":3,"ignore_eos":true,'"$nothink"'}')
$py -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(0 if j["usage"]["completion_tokens"] == 3 else 1)' "$tmp/c2" \
    && pass "a smaller max_tokens is kept" || fail "max_tokens 3: $st $(cat "$tmp/c2")"
st=$(code /v1/chat/completions "$tmp/e1" -d '{"model":"m","messages":"secret-body-text"}')
[ "$st" = 400 ] && pass "a bad request (400)" || fail "400: $st"
st=$(code /v1/messages/count_tokens "$tmp/ct" -d '{"model":"m","messages":[{"role":"user","content":"Hi"}]}')
[ "$st" = 200 ] && pass "count_tokens" || fail "count_tokens: $st"
curl -s -o /dev/null "http://127.0.0.1:$port/health"
e2e_stop "$pid" > /dev/null
$py - "$tmp/a.log" "$tmp/c1" <<'EOF' && pass "JSON log: every line an object; one request line per API request and error, with its fields; no body" || { fail "JSON log"; cat "$tmp/a.log"; }
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().splitlines()
objs = [json.loads(l) for l in lines if l.strip()]          # every line must parse
assert all("time" in o and "level" in o for o in objs), "time/level"
reqs = [o for o in objs if o.get("event") == "request"]
assert [r["status"] for r in reqs] == [200, 200, 200, 400, 200], [r["status"] for r in reqs]
assert [r["api"] for r in reqs] == ["chat", "messages", "chat", "chat", "count_tokens"], [r["api"] for r in reqs]
c1 = json.load(open(sys.argv[2]))
r0 = reqs[0]
assert r0["id"] == c1["id"], (r0, c1["id"])
assert r0["model"] == "m" and r0["prompt_tokens"] == c1["usage"]["prompt_tokens"], r0
assert r0["generated_tokens"] == 6 and r0["stop_reason"] == "length" and r0["cache_source"] in ("none", "ram"), r0
assert r0["ttft_ms"] >= 0 and r0["total_ms"] >= r0["ttft_ms"] and r0["client"].startswith("127.0.0.1:"), r0
assert "error" in reqs[3] and "messages" in reqs[3]["error"] and "prompt_tokens" not in reqs[3], reqs[3]
assert not any("secret-body-text" in l for l in lines), "a body leaked into the log"
assert not any(o.get("event") == "request" and o.get("api") == "/health" for o in objs), "health probes are not logged"
EOF

# ---- requests their clients left: the line has the numbers so far ---------------------------
# a stream cut after its first tokens keeps the 200 it began with; a plain request left
# before its answer is a 499; both say stop "cancelled" and how far they got
e2e_start "$tmp/d.log" --no-bank-disk --log-format json --ctx 32768 --max-tokens-default 0
long='{"model":"m","messages":[{"role":"user","content":"go"}],"max_tokens":30000,"ignore_eos":true,'"$nothink"
curl -s -N -o "$tmp/s1" -H "$ct" -d "$long,\"stream\":true}" "http://127.0.0.1:$port/v1/chat/completions" &
c1=$!
i=0
while [ $i -lt 200 ] && [ "$(cat "$tmp/s1" 2>/dev/null | grep -c '"content"')" -lt 3 ]; do sleep 0.05; i=$((i + 1)); done
kill "$c1" 2>/dev/null; wait "$c1" 2>/dev/null
curl -s -o /dev/null -H "$ct" -d "$long}" "http://127.0.0.1:$port/v1/chat/completions" &
c2=$!
sleep 1
kill "$c2" 2>/dev/null; wait "$c2" 2>/dev/null
st=$(code /v1/chat/completions "$tmp/c4" -d '{"model":"m","messages":[{"role":"user","content":"Hello"}],"max_tokens":2,'"$nothink"'}')
e2e_stop "$pid" > /dev/null
$py - "$tmp/d.log" <<'EOF' && pass "a cut stream (200) and a left request (499) are logged with stop cancelled and their tokens so far" || { fail "left requests' log lines"; cat "$tmp/d.log"; }
import json, sys
reqs = [o for o in map(json.loads, open(sys.argv[1]).read().splitlines()) if o.get("event") == "request"]
# a left request's line comes when its job has ended: the order is not the sending order
cut = [r for r in reqs if r["status"] == 200 and r.get("stop_reason") == "cancelled"]
left = [r for r in reqs if r["status"] == 499]
done = [r for r in reqs if r.get("stop_reason") == "length"]
assert len(reqs) == 3 and len(cut) == 1 and len(left) == 1 and len(done) == 1, reqs
for r in cut + left:
    assert r["stop_reason"] == "cancelled" and r["prompt_tokens"] > 0, r
    assert 1 <= r["generated_tokens"] < 30000 and r["ttft_ms"] >= 0, r
assert cut[0]["generated_tokens"] >= 3, cut
assert done[0]["status"] == 200 and done[0]["generated_tokens"] == 2, done
EOF

# ---- text log with --log-bodies -----------------------------------------------------------
e2e_start "$tmp/b.log" --no-bank-disk --log-bodies
st=$(code /v1/chat/completions "$tmp/c3" -d '{"model":"m","messages":[{"role":"user","content":"visible-body-text"}],"max_tokens":2,'"$nothink"'}')
e2e_stop "$pid" > /dev/null
grep -q 'info  request chatcmpl-[^ ]* api=chat model=m status=200 prompt=[0-9]* cached=[0-9]* (none) generated=[12] ttft=[0-9]* ms total=[0-9]* ms stop=[a-z_]* client=127.0.0.1:[0-9]* body=.*visible-body-text' "$tmp/b.log" \
    && pass "text log line, with the body under --log-bodies" || { fail "text log"; cat "$tmp/b.log"; }
finish
