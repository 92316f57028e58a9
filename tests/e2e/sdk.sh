#!/bin/sh
# sdk.sh — runs tests/e2e/sdk.test.mjs (node --test, the official openai and
# @anthropic-ai/sdk packages from node_modules) against `headstart serve` on a tiny random
# model at 127.0.0.1 (--port 0, the bank in RAM only), then stops the server. Ends with "RESULT: N passed, N failed"
# (node's own pass/fail counts).
set -u
build=${HEADSTART_BUILD:-build}
hs=$build/headstart
result() { echo "RESULT: $1 passed, $2 failed"; [ "$2" -eq 0 ]; exit $?; }
[ -x "$hs" ] || { echo "no $hs"; result 0 1; }
command -v node >/dev/null || { echo "no node"; result 0 1; }
[ -d node_modules/openai ] && [ -d node_modules/@anthropic-ai/sdk ] || { echo "no SDKs in node_modules (make deps)"; result 0 1; }

tmp=$(mktemp -d /tmp/hs-sdk.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM
"$hs" mkmodel --arch qwen35 --preset tiny --out "$tmp/m" >/dev/null 2>&1 || { echo "mkmodel failed"; result 0 1; }
key=sdk-key-$$
"$hs" serve -m "$tmp/m" --host 127.0.0.1 --port 0 --threads 1 --ctx 8192 --no-bank-disk --api-key "$key" >"$tmp/log" 2>&1 &
pid=$!
port= i=0
while [ $i -lt 100 ] && [ -z "$port" ]; do
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/log" 2>/dev/null)
    [ -n "$port" ] || sleep 0.1
    i=$((i + 1))
done
[ -n "$port" ] || { cat "$tmp/log"; result 0 1; }

# the head length (system + tools of tests/golden/data/bank/head.json) the bank tests expect
node -e 'const fs = require("fs"); const h = JSON.parse(fs.readFileSync("tests/golden/data/bank/head.json"));
fs.writeFileSync(process.argv[1], JSON.stringify({ model: "m", tools: h.tools,
  messages: [{ role: "system", content: h.system }, { role: "user", content: "x" }] }));' "$tmp/head.json"
head_len=$("$hs" render -m "$tmp/m" --request "$tmp/head.json" --head 2>/dev/null)
[ "${head_len:-0}" -gt 0 ] || { echo "render --head failed"; result 0 1; }

HEADSTART_URL=http://127.0.0.1:$port HEADSTART_KEY=$key HEADSTART_HEAD=$head_len timeout 120 \
    node --test --test-reporter=tap tests/e2e/sdk.test.mjs >"$tmp/tap" 2>&1
rc=$?
grep -E '^(not )?ok |^# (pass|fail)' "$tmp/tap"
[ $rc -eq 0 ] || cat "$tmp/tap" | head -80
p=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$tmp/tap")
f=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$tmp/tap")
[ -n "$p" ] || p=0
[ -n "$f" ] || f=1
[ $rc -eq 0 ] || [ "$f" -gt 0 ] || f=1
kill -TERM "$pid" 2>/dev/null
i=0
while [ $i -lt 50 ] && kill -0 "$pid" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
pid=
if grep -q -E 'Sanitizer|runtime error' "$tmp/log"; then grep -A30 -E 'Sanitizer|runtime error' "$tmp/log" | head -60; f=$((f + 1)); fi
result "$p" "$f"
