#!/bin/sh
# sdk.sh — runs tests/e2e/sdk.test.mjs (node --test, the official openai and
# @anthropic-ai/sdk packages from node_modules) against `headstart serve` on a tiny random
# model at 127.0.0.1 (--port 0, the bank in RAM only), then stops the server. Ends with "RESULT: N passed, N failed"
# (node's own pass/fail counts).
set -u
. "$(dirname "$0")/lib/server.sh"
[ -d node_modules/openai ] && [ -d node_modules/@anthropic-ai/sdk ] || { fail "no SDKs in node_modules (make deps)"; finish; }
e2e_setup sdk node
key=sdk-key-$$
e2e_start "$tmp/log" --ctx 8192 --no-bank-disk --api-key "$key"

# the head length (system + tools of tests/golden/data/bank/head.json) the bank tests expect
node -e 'const fs = require("fs"); const h = JSON.parse(fs.readFileSync("tests/golden/data/bank/head.json"));
fs.writeFileSync(process.argv[1], JSON.stringify({ model: "m", tools: h.tools,
  messages: [{ role: "system", content: h.system }, { role: "user", content: "x" }] }));' "$tmp/head.json"
head_len=$("$hs" render -m "$tmp/m" --request "$tmp/head.json" --head 2>/dev/null)
[ "${head_len:-0}" -gt 0 ] || { fail "render --head failed"; finish; }

HEADSTART_URL=http://127.0.0.1:$port HEADSTART_KEY=$key HEADSTART_HEAD=$head_len timeout 120 \
    node --test --test-reporter=tap tests/e2e/sdk.test.mjs >"$tmp/tap" 2>&1
e2e_tap "$tmp/tap" $?
e2e_stop "$pid"
e2e_sanitizer "$tmp/log" && f=$((f + 1))
result "$p" "$f"
