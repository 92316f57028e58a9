#!/bin/sh
# sdk_tools.sh — a tool round trip through the official openai and @anthropic-ai/sdk packages
# (tests/e2e/sdk_tools.test.mjs, node --test) against `headstart serve` on a tiny random
# model in the TEST-ONLY scripted mode: HEADSTART_TEST_EMIT names a JSON array of texts the
# model emits in order instead of sampling (src/server/test_emit.c). Also checks that the
# mode announces itself at start and that a bad script stops serve. Ends with
# "RESULT: N passed, N failed".
set -u
. "$(dirname "$0")/lib/server.sh"
[ -d node_modules/openai ] && [ -d node_modules/@anthropic-ai/sdk ] || { fail "no SDKs in node_modules (make deps)"; finish; }
e2e_setup sdktools node

# a bad script is refused at start (the server does not come up in a half-scripted state)
echo '{"not": "an array"}' > "$tmp/bad.json"
if HEADSTART_TEST_EMIT=$tmp/bad.json timeout 20 "$hs" serve -m "$tmp/m" --host 127.0.0.1 --port 0 \
       --threads 1 --no-bank-disk >"$tmp/badlog" 2>&1; then
    fail "a bad HEADSTART_TEST_EMIT file stops serve"
elif grep -q 'HEADSTART_TEST_EMIT' "$tmp/badlog"; then
    pass "a bad HEADSTART_TEST_EMIT file stops serve, naming the variable"
else
    fail "a bad HEADSTART_TEST_EMIT file stops serve, naming the variable"; cat "$tmp/badlog"
fi

# the script: per API and mode, the call turn, then the answer turn (sdk_tools.test.mjs)
call='The user wants the weather; call the tool.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>'
answer='</think>\n\nIt is sunny in Paris, 21 degrees.'
printf '["%s", "%s", "%s", "%s", "%s", "%s", "%s", "%s", "%s", "%s", "%s", "%s"]\n' "$call" "$answer" \
    "$call" "$answer" "$call" "$answer" "$call" "$answer" "$call" "$answer" "$call" "$answer" > "$tmp/script.json"

key=sdk-key-$$
HEADSTART_TEST_EMIT=$tmp/script.json e2e_start "$tmp/log" --ctx 8192 --no-bank-disk --api-key "$key"
if grep -q 'TEST MODE (HEADSTART_TEST_EMIT=' "$tmp/log"; then pass "scripted mode warns at start"
else fail "scripted mode warns at start"; cat "$tmp/log"; fi

HEADSTART_URL=http://127.0.0.1:$port HEADSTART_KEY=$key timeout 120 \
    node --test --test-reporter=tap tests/e2e/sdk_tools.test.mjs >"$tmp/tap" 2>&1
e2e_tap "$tmp/tap" $?
e2e_stop "$pid"
e2e_sanitizer "$tmp/log" && f=$((f + 1))
result $((passed + p)) $((failed + f))
