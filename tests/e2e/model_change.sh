#!/bin/sh
# model_change.sh — the bank never restores under the wrong model, and a model file changed
# under a running server is caught (issue [F15] items 1-2), on tiny random HF models
# (headstart mkmodel; $tmp/m and, with another seed, $tmp/m2: the same layout and sizes):
#   1. mid-file change, across restarts: a server banks a request on --bank-dir; a second
#      one on the same dir restores it from disk (the control); then the middle half of
#      m's safetensors (the first and last 64 KiB untouched) is overwritten with the same
#      bytes of m2, and a server on the same dir must restore nothing (cached_tokens 0) and
#      answer exactly as a --no-bank server on the new file; the same through `headstart
#      replay` (first logits row and output ids equal the cold run on the new file);
#   2. a model file truncated under a running server (what `cp` over it does first): the
#      request gets an error in the API's shape naming the truncation, /health answers 503
#      model_file_truncated, the server stays up and keeps answering (errors), /metrics counts
#      the fault;
#   3. a model file overwritten in place under a running server (same size, other
#      weights): the bank stops restoring (cached_tokens 0 where it restored before),
#      one log line, /health 503 model_file_changed, /metrics headstart_model_changed 1 and
#      the bank_off count;
#   4. a model replaced by rename (the documented way) under a running server: the old
#      inode stays mapped and the bank keeps restoring.
# Servers on 127.0.0.1 --port 0, banks in the temp dir. Ends with "RESULT: N passed, N failed".
set -u
py=/usr/bin/python3
. "$(dirname "$0")/lib/server.sh"
e2e_setup model-change curl
XDG_CACHE_HOME=$tmp/xdg
export XDG_CACHE_HOME
"$hs" mkmodel --arch qwen35 --preset tiny --seed 7 --out "$tmp/m2" >/dev/null 2>&1 || { fail "mkmodel m2"; finish; }
cp -r "$tmp/m" "$tmp/m.orig"

# replay's report text may hold invalid UTF-8 (random models): read it leniently
L='import json, sys
def L(f): return json.loads(open(f, "rb").read().decode("utf-8", "replace"))
'
post() { curl -s -o "$4" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "@$3" "http://127.0.0.1:$1$2"; }
cached() { $py -c 'import json,sys; print(json.load(open(sys.argv[1]))["usage"]["prompt_tokens_details"]["cached_tokens"])' "$1" 2>/dev/null || echo -1; }
# same_answer A B: equal bodies but ids, times and the cache split of the usage
same_answer() {
    $py -c 'import json,sys
def norm(j):
    j = dict(j)
    for k in ("id", "created"): j.pop(k, None)
    u = dict(j["usage"]); u.pop("prompt_tokens_details", None); j["usage"] = u
    return j
a, b = (norm(json.load(open(f))) for f in sys.argv[1:3])
sys.exit(0 if a == b else 1)' "$1" "$2"
}
# splice DST SRC: the middle half of DST's safetensors becomes SRC's bytes there, in place
splice() {
    $py - "$1/model.safetensors" "$2/model.safetensors" <<'EOF'
import os, sys
dst, src = sys.argv[1:3]
n = os.path.getsize(dst)
assert n == os.path.getsize(src) and n > 4 * 65536, n
a, b = n // 4, 3 * n // 4
with open(src, "rb") as f:
    f.seek(a); mid = f.read(b - a)
with open(dst, "r+b") as f:
    f.seek(a); f.write(mid)
EOF
}

$py - "$tmp" <<'EOF' || { fail "bodies"; finish; }
import json, sys
d = sys.argv[1]
h = json.load(open("tests/golden/data/bank/head.json"))
b = {"model": "m", "max_tokens": 8, "temperature": 0, "tools": h["tools"],
     "messages": [{"role": "system", "content": h["system"]}, {"role": "user", "content": "List the files in src."}]}
json.dump(b, open(f"{d}/r.json", "w"))
json.dump({"api": "openai", "body": b}, open(f"{d}/r.jsonl", "w"))
EOF

# ---- 1. a mid-file change across restarts ----
e2e_start "$tmp/s1.log" --bank-dir "$tmp/bank"
st=$(post "$port" /v1/chat/completions "$tmp/r.json" "$tmp/r1")
[ "$st" = 200 ] && [ "$(cached "$tmp/r1")" = 0 ] && pass "first server: the request is computed and banked" \
    || fail "first server: $st $(cat "$tmp/r1")"
e2e_stop "$pid" 10 || fail "first server's exit status"
e2e_start "$tmp/s2.log" --bank-dir "$tmp/bank"
post "$port" /v1/chat/completions "$tmp/r.json" "$tmp/r2" >/dev/null
c=$(cached "$tmp/r2")
[ "$c" -gt 0 ] && pass "control: a restart on the unchanged model restores $c tokens from disk" \
    || fail "control: the unchanged model restored nothing from disk: $(cat "$tmp/r2")"
e2e_stop "$pid" 10 || fail "second server's exit status"

"$hs" replay -m "$tmp/m" --requests "$tmp/r.jsonl" --no-bank >"$tmp/cold_old.json" 2>/dev/null
"$hs" replay -m "$tmp/m" --requests "$tmp/r.jsonl" --bank-dir "$tmp/rbank" >/dev/null 2>&1
"$hs" replay -m "$tmp/m" --requests "$tmp/r.jsonl" --bank-dir "$tmp/rbank" >"$tmp/rep_ctl.json" 2>/dev/null
$py -c "$L"'r = L(sys.argv[1]); sys.exit(0 if r["cached_tokens"] > 0 and r["cache_source"] == "disk" else 1)' \
    "$tmp/rep_ctl.json" && pass "control: replay restores the unchanged model from its --bank-dir" \
    || fail "replay control: $(cat "$tmp/rep_ctl.json")"

splice "$tmp/m" "$tmp/m2" || { fail "splice"; finish; }
cmp -s -n 65536 "$tmp/m/model.safetensors" "$tmp/m.orig/model.safetensors" &&
    [ "$(tail -c 65536 "$tmp/m/model.safetensors" | cksum)" = "$(tail -c 65536 "$tmp/m.orig/model.safetensors" | cksum)" ] &&
    ! cmp -s "$tmp/m/model.safetensors" "$tmp/m.orig/model.safetensors" \
    && pass "the middle of the weights changed, the first and last 64 KiB did not" || fail "splice: ends differ"
"$hs" replay -m "$tmp/m" --requests "$tmp/r.jsonl" --no-bank >"$tmp/cold_new.json" 2>/dev/null
$py -c "$L"'a, b = (L(f) for f in sys.argv[1:3])
sys.exit(0 if a["first_logits_sha256"] != b["first_logits_sha256"] else 1)' "$tmp/cold_old.json" "$tmp/cold_new.json" \
    && pass "the change matters: the cold first logits differ" || fail "the spliced model computes the same logits"

e2e_start "$tmp/s3.log" --no-bank
post "$port" /v1/chat/completions "$tmp/r.json" "$tmp/r3n" >/dev/null
e2e_stop "$pid" 10 || fail "no-bank server's exit status"
e2e_start "$tmp/s3b.log" --bank-dir "$tmp/bank"
st=$(post "$port" /v1/chat/completions "$tmp/r.json" "$tmp/r3")
c=$(cached "$tmp/r3")
[ "$st" = 200 ] && [ "$c" = 0 ] && pass "changed mid-file: the server restores nothing from the shared --bank-dir" \
    || fail "changed mid-file: restored $c tokens of the old model's state: $(cat "$tmp/r3")"
same_answer "$tmp/r3" "$tmp/r3n" && pass "changed mid-file: the answer equals a cold --no-bank run on the new file" \
    || fail "changed mid-file: answers differ: $(cat "$tmp/r3") // $(cat "$tmp/r3n")"
e2e_stop "$pid" 10 || fail "third server's exit status"

"$hs" replay -m "$tmp/m" --requests "$tmp/r.jsonl" --bank-dir "$tmp/rbank" >"$tmp/rep_new.json" 2>"$tmp/rep_new.err"
$py -c "$L"'r, c = (L(f) for f in sys.argv[1:3])
ok = r["cached_tokens"] == 0 and r["first_logits_sha256"] == c["first_logits_sha256"] and r["output_ids"] == c["output_ids"]
sys.exit(0 if ok else 1)' "$tmp/rep_new.json" "$tmp/cold_new.json" \
    && pass "changed mid-file: replay restores nothing, same logits and tokens as cold on the new file" \
    || fail "replay after the change: $(cat "$tmp/rep_new.json") $(cat "$tmp/rep_new.err")"

# ---- 2. truncated under a running server ----
rm -rf "$tmp/m"; cp -r "$tmp/m.orig" "$tmp/m"
e2e_start "$tmp/t.log" --bank-dir "$tmp/tbank"
pt=$port pidt=$pid
st=$(post "$pt" /v1/chat/completions "$tmp/r.json" "$tmp/t1")
[ "$st" = 200 ] || fail "before the truncation: $st $(cat "$tmp/t1")"
$py -c 'import os,sys; p = sys.argv[1]; os.truncate(p, os.path.getsize(p) // 3)' "$tmp/m/model.safetensors"
st=$(post "$pt" /v1/chat/completions "$tmp/r.json" "$tmp/t2")
$py -c 'import json,sys
j = json.load(open(sys.argv[1])); m = j["error"]["message"]
sys.exit(0 if "truncated" in m and "model.safetensors" in m else 1)' "$tmp/t2" \
    && [ "$st" -ge 500 ] && pass "truncated under the server: the request fails with the API's error ($st): $(head -c 160 "$tmp/t2")" \
    || fail "truncated: $st $(cat "$tmp/t2")"
kill -0 "$pidt" 2>/dev/null && pass "the server survived the SIGBUS" || fail "the server died: $(tail -5 "$tmp/t.log")"
hst=$(curl -s -o "$tmp/t.health" -w '%{http_code}' "http://127.0.0.1:$pt/health")
[ "$hst" = 503 ] && grep -q '"status":"model_file_truncated"' "$tmp/t.health" && grep -q 'model.safetensors' "$tmp/t.health" \
    && pass "/health answers after the fault, 503 model_file_truncated naming the file" \
    || fail "/health: $hst $(cat "$tmp/t.health" 2>/dev/null)"
st=$(post "$pt" /v1/chat/completions "$tmp/r.json" "$tmp/t3")
[ "$st" -ge 500 ] && grep -q truncated "$tmp/t3" && kill -0 "$pidt" 2>/dev/null \
    && pass "a later request gets the same clear error, the server still runs" || fail "later request: $st $(cat "$tmp/t3")"
curl -s -o "$tmp/t.metrics" "http://127.0.0.1:$pt/metrics"
grep -q '^headstart_model_faults_total [1-9]' "$tmp/t.metrics" && grep -q '^headstart_model_changed 1' "$tmp/t.metrics" \
    && pass "/metrics: the fault and the change are counted" || fail "metrics: $(grep model_ "$tmp/t.metrics")"
e2e_stop "$pidt" 10 || fail "truncated server's exit status"

# ---- 3. overwritten in place under a running server ----
rm -rf "$tmp/m"; cp -r "$tmp/m.orig" "$tmp/m"
e2e_start "$tmp/w.log" --bank-dir "$tmp/wbank"
post "$port" /v1/chat/completions "$tmp/r.json" "$tmp/w1" >/dev/null
post "$port" /v1/chat/completions "$tmp/r.json" "$tmp/w2" >/dev/null
c=$(cached "$tmp/w2")
[ "$c" -gt 0 ] && pass "control: the running server restores the repeated request ($c tokens)" || fail "control w2: $(cat "$tmp/w2")"
$py -c 'import sys
src, dst = sys.argv[1:3]
data = open(src, "rb").read()
with open(dst, "r+b") as f: f.write(data)' "$tmp/m2/model.safetensors" "$tmp/m/model.safetensors"
st=$(post "$port" /v1/chat/completions "$tmp/r.json" "$tmp/w3")
c=$(cached "$tmp/w3")
[ "$st" = 200 ] && [ "$c" = 0 ] && pass "overwritten in place: the bank stops restoring (cached 0, answered $st)" \
    || fail "overwritten in place: $st, restored $c tokens computed with the old weights"
post "$port" /v1/chat/completions "$tmp/r.json" "$tmp/w4" >/dev/null
[ "$(cached "$tmp/w4")" = 0 ] && pass "and it stays off" || fail "w4 restored: $(cat "$tmp/w4")"
hst=$(curl -s -o "$tmp/w.health" -w '%{http_code}' "http://127.0.0.1:$port/health")
[ "$hst" = 503 ] && grep -q '"status":"model_file_changed"' "$tmp/w.health" \
    && pass "/health: 503 model_file_changed (restart needed)" || fail "/health after the overwrite: $hst $(cat "$tmp/w.health")"
n=$(grep -c "changed on disk since it was loaded" "$tmp/w.log")
[ "$n" = 1 ] && pass "one log line names the change" || fail "$n log lines: $(tail -5 "$tmp/w.log")"
curl -s -o "$tmp/w.metrics" "http://127.0.0.1:$port/metrics"
grep -q '^headstart_model_changed 1' "$tmp/w.metrics" &&
    grep -q '^headstart_requests_bank_off_total{reason="model_changed"} [2-9]' "$tmp/w.metrics" \
    && pass "/metrics: headstart_model_changed 1, bank_off requests counted" || fail "metrics: $(grep -E 'model_|bank_off' "$tmp/w.metrics")"
e2e_stop "$pid" 10 || fail "overwritten server's exit status"

# ---- 4. replaced by rename: the old inode stays mapped, the bank stays valid ----
rm -rf "$tmp/m"; cp -r "$tmp/m.orig" "$tmp/m"
e2e_start "$tmp/n.log" --bank-dir "$tmp/nbank"
post "$port" /v1/chat/completions "$tmp/r.json" "$tmp/n1" >/dev/null
cp "$tmp/m2/model.safetensors" "$tmp/m/model.safetensors.new" && mv "$tmp/m/model.safetensors.new" "$tmp/m/model.safetensors"
post "$port" /v1/chat/completions "$tmp/r.json" "$tmp/n2" >/dev/null
c=$(cached "$tmp/n2")
[ "$c" -gt 0 ] && ! grep -q "changed on disk" "$tmp/n.log" \
    && pass "replaced by rename: the served model is unchanged, the bank keeps restoring ($c tokens)" \
    || fail "rename: cached $c $(tail -3 "$tmp/n.log")"
hst=$(curl -s -o "$tmp/n.health" -w '%{http_code}' "http://127.0.0.1:$port/health")
[ "$hst" = 200 ] && grep -q '"status":"ok"' "$tmp/n.health" && pass "/health: ok after a replace by rename" \
    || fail "/health after the rename: $hst $(cat "$tmp/n.health")"
e2e_stop "$pid" 10 || fail "rename server's exit status"

if r=$(e2e_sanitizer "$tmp"/*.log); then fail "sanitizer report: $r"; else pass "no sanitizer report in the server logs"; fi
finish
