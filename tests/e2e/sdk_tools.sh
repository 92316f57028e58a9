#!/bin/sh
# sdk_tools.sh — a tool round trip through the official openai and @anthropic-ai/sdk packages
# (tests/e2e/sdk_tools.test.mjs, node --test) against `headstart serve` on a tiny random
# model in the TEST-ONLY scripted mode: HEADSTART_TEST_EMIT names a JSON array of texts the
# model emits in order instead of sampling (src/server/test_emit.c). Also checks that the
# mode announces itself at start and that a bad script stops serve. Ends with
# "RESULT: N passed, N failed".
set -u
build=${HEADSTART_BUILD:-build}
hs=$build/headstart
result() { echo "RESULT: $1 passed, $2 failed"; [ "$2" -eq 0 ]; exit $?; }
[ -x "$hs" ] || { echo "no $hs"; result 0 1; }
command -v node >/dev/null || { echo "no node"; result 0 1; }
[ -d node_modules/openai ] && [ -d node_modules/@anthropic-ai/sdk ] || { echo "no SDKs in node_modules (make deps)"; result 0 1; }

tmp=$(mktemp -d /tmp/hs-sdktools.XXXXXX)
pid=
trap '[ -n "$pid" ] && kill $pid 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM
"$hs" mkmodel --arch qwen35 --preset tiny --out "$tmp/m" >/dev/null 2>&1 || { echo "mkmodel failed"; result 0 1; }
pass=0 fail=0
ok() { echo "ok - $1"; pass=$((pass + 1)); }
no() { echo "not ok - $1"; fail=$((fail + 1)); }

# a bad script is refused at start (the server does not come up in a half-scripted state)
echo '{"not": "an array"}' > "$tmp/bad.json"
if HEADSTART_TEST_EMIT=$tmp/bad.json timeout 20 "$hs" serve -m "$tmp/m" --host 127.0.0.1 --port 0 \
       --threads 1 --no-bank-disk >"$tmp/badlog" 2>&1; then
    no "a bad HEADSTART_TEST_EMIT file stops serve"
elif grep -q 'HEADSTART_TEST_EMIT' "$tmp/badlog"; then
    ok "a bad HEADSTART_TEST_EMIT file stops serve, naming the variable"
else
    no "a bad HEADSTART_TEST_EMIT file stops serve, naming the variable"; cat "$tmp/badlog"
fi

# the script: per API and mode, the call turn, then the answer turn (sdk_tools.test.mjs)
call='The user wants the weather; call the tool.\n</think>\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>'
answer='</think>\n\nIt is sunny in Paris, 21 degrees.'
printf '["%s", "%s", "%s", "%s", "%s", "%s", "%s", "%s", "%s", "%s", "%s", "%s"]\n' "$call" "$answer" \
    "$call" "$answer" "$call" "$answer" "$call" "$answer" "$call" "$answer" "$call" "$answer" > "$tmp/script.json"

key=sdk-key-$$
HEADSTART_TEST_EMIT=$tmp/script.json "$hs" serve -m "$tmp/m" --host 127.0.0.1 --port 0 --threads 1 \
    --ctx 8192 --no-bank-disk --api-key "$key" >"$tmp/log" 2>&1 &
pid=$!
port= i=0
while [ $i -lt 100 ] && [ -z "$port" ]; do
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$tmp/log" 2>/dev/null)
    [ -n "$port" ] || sleep 0.1
    i=$((i + 1))
done
[ -n "$port" ] || { cat "$tmp/log"; result "$pass" $((fail + 1)); }
if grep -q 'TEST MODE (HEADSTART_TEST_EMIT=' "$tmp/log"; then ok "scripted mode warns at start"
else no "scripted mode warns at start"; cat "$tmp/log"; fi

HEADSTART_URL=http://127.0.0.1:$port HEADSTART_KEY=$key timeout 120 \
    node --test --test-reporter=tap tests/e2e/sdk_tools.test.mjs >"$tmp/tap" 2>&1
rc=$?
grep -E '^(not )?ok |^# (pass|fail)' "$tmp/tap"
[ $rc -eq 0 ] || head -120 "$tmp/tap"
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
result $((pass + p)) $((fail + f))
