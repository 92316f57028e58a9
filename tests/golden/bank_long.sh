#!/bin/sh
# bank_long.sh — the two [F4] bank scenarios at (close to) full size, exact against --no-bank
# (every compared request's first logits row, first_logits_sha256, and its output ids equal
# those of the same request computed with no bank). tests/golden/bank_scenarios.sh runs the
# scaled-down versions together with the other scenarios.
# Requests share the ~1.4k-token head of tests/golden/data/bank/head.json (system text +
# five tool schemas) on a tiny qwen35 q8_0 GGUF model; --max-tokens 4 keeps generation short.
#   2. one agent conversation grown over LONG_TURNS turns (default 13) to ~50k tokens: each
#      turn (request) is the previous conversation + a fixed assistant tool call + a long tool result
#      (LONG_LINES lines, default 100, ~3.7k tokens), so the growth is deterministic; default
#      snapshot cap and grid, so the bank thins. Each turn restores at least up to the
#      previous turn's generation-prompt start. Then a NEW session with the same head and a
#      different first question restores exactly at the head end (not "thinned"), and it and
#      the second turn equal --no-bank runs of those requests.
#   3. an agent loop of ten turns (short tool call + tool result each): each turn restores at
#      least up to the previous turn's generation-prompt start, and all ten equal --no-bank.
# Cost: attention makes the grown conversation's prefill quadratic (~10 ms a token at 40k
# context on the tiny model): the default run took 177 s of CPU with --threads 2 (327 s of
# wall time on a shared 2-core machine at load ~6). LONG_TURNS=3 gives a quick ~15k-token
# variant (~25 s of CPU).
# The conversation is generated here at run time (no committed request data). Every replay
# runs with --no-bank-disk (RAM tier only; a test never writes into the user's cache).
# Prints RESULT: N passed, N failed. Run from the repository root with HEADSTART_BUILD set.
set -u
build=${HEADSTART_BUILD:-build}
hs=$build/headstart
head_json=tests/golden/data/bank/head.json
turns=${LONG_TURNS:-13}
lines=${LONG_LINES:-100}
passed=0 failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
pass() { echo "ok: $*"; passed=$((passed + 1)); }
finish() { echo "RESULT: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }
tmp=$(mktemp -d /tmp/hs-banklong.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
command -v jq >/dev/null || { fail "jq is missing (make deps)"; finish; }
"$hs" mkmodel --arch qwen35 --seed 3 --dtype q8_0 --out "$tmp/m.gguf" >/dev/null 2>&1 || { fail "mkmodel"; finish; }

# openai request: head + user message $1 + $2 tool-call rounds whose results have $3 lines
# each (deterministic text: file, line number, case and module vary per line and round)
req() {
    jq -c --arg u "$1" --argjson t "$2" --argjson L "$3" '
      {api: "openai", body: {model: "any", max_tokens: 4, tools: .tools,
        messages: ([{role: "system", content: .system}, {role: "user", content: $u}] +
          [range(1; $t + 1) as $k |
            {role: "assistant", content: "",
             tool_calls: [{id: "call_\($k)", type: "function",
               function: {name: "grep", arguments: "{\"pattern\": \"TODO\", \"path\": \"src/m\($k)\"}"}}]},
            {role: "tool", tool_call_id: "call_\($k)",
             content: ([range(0; $L) as $j |
               "src/m\($k)/f\($j % 13).c:\($j * 7 + $k): TODO handle case \($j) of module \($k)"] | join("\n"))}])}}' "$head_json"
}
# a long first user message: the task, then a pasted build log of $1 lines
long_user() {
    jq -rn --argjson n "$1" '"Fix every TODO in src/, one module at a time, and keep the build green. The last build log:\n" +
      ([range(0; $n) as $i | "cc -c src/m\($i % 17)/f\($i % 13).c -o build/obj/m\($i % 17)/f\($i % 13).o  [warning \($i): unused variable]"] | join("\n"))'
}

# field FILE LINE JQ-EXPR
field() { sed -n "$2p" "$1" | jq -c "$3"; }
same() { # got-file line ref-file ref-line label
    a=$(field "$1" "$2" '[.first_logits_sha256, .output_ids]'); b=$(field "$3" "$4" '[.first_logits_sha256, .output_ids]')
    if [ -n "$a" ] && [ "$a" != '[null,null]' ] && [ "$a" = "$b" ]; then pass "$5: first logits and output identical to --no-bank"
    else fail "$5: differs from --no-bank: $a vs $b"; fi
}
# each request of an out-file (lines 2..N) restores at least up to the previous generation prompt
restores_prev() { # out-file count label
    i=2
    while [ "$i" -le "$2" ]; do
        prev=$(field "$1" $((i - 1)) .genprompt_start); c=$(field "$1" "$i" .cached_tokens)
        n=$(field "$1" "$i" .prompt_tokens)
        if [ -n "$prev" ] && [ -n "$c" ] && [ "$c" -ge "$prev" ] && [ "$c" -lt "$n" ]; then
            pass "$3: request $i restores $c of $n (previous generation prompt at $prev)"
        else fail "$3: request $i restored $c of $n, previous generation prompt at $prev"; fi
        i=$((i + 1))
    done
}
t0=$(date +%s)

# 3: the ten-turn agent loop (short tool results), then --no-bank for every turn
for t in 0 1 2 3 4 5 6 7 8 9; do req "Fix the TODOs one directory at a time." $t 2; done > "$tmp/s3.jsonl"
if "$hs" replay --no-bank-disk -m "$tmp/m.gguf" --requests "$tmp/s3.jsonl" --threads 2 --max-tokens 4 > "$tmp/s3.out" 2> "$tmp/s3.err" &&
   "$hs" replay --no-bank-disk -m "$tmp/m.gguf" --requests "$tmp/s3.jsonl" --threads 2 --max-tokens 4 --no-bank > "$tmp/s3ref.out" 2> "$tmp/s3ref.err"; then
    echo "3: cached tokens: $(jq -r '"\(.cached_tokens)/\(.prompt_tokens)"' "$tmp/s3.out" | tr '\n' ' ')"
    restores_prev "$tmp/s3.out" 10 "3"
    for i in 1 2 3 4 5 6 7 8 9 10; do same "$tmp/s3.out" $i "$tmp/s3ref.out" $i "3: request $i"; done
else fail "3: replay"; cat "$tmp/s3.err" "$tmp/s3ref.err"; fi
echo "3: $(($(date +%s) - t0)) s"

# 2: the grown conversation (turns 0..turns), then a new session with the same head
t1=$(date +%s)
u=$(long_user 40)
t=0
while [ "$t" -le "$turns" ]; do req "$u" $t "$lines"; t=$((t + 1)); done > "$tmp/s2.jsonl"
new=$(req "Explain what the cache module does, briefly." 0 0)
printf '%s\n' "$new" >> "$tmp/s2.jsonl"
nreq=$((turns + 2))
{ sed -n 2p "$tmp/s2.jsonl"; printf '%s\n' "$new"; } > "$tmp/s2ref.jsonl"
if "$hs" replay --no-bank-disk -m "$tmp/m.gguf" --requests "$tmp/s2.jsonl" --threads 2 --max-tokens 4 > "$tmp/s2.out" 2> "$tmp/s2.err" &&
   "$hs" replay --no-bank-disk -m "$tmp/m.gguf" --requests "$tmp/s2ref.jsonl" --threads 2 --max-tokens 4 --no-bank > "$tmp/s2ref.out" 2> "$tmp/s2ref.err"; then
    echo "2: cached tokens: $(jq -r '"\(.cached_tokens)/\(.prompt_tokens)"' "$tmp/s2.out" | tr '\n' ' ')"
    last=$(field "$tmp/s2.out" $((nreq - 1)) .prompt_tokens)
    # each tool-result line is ~37 tokens: the default (13 turns of 100 lines) reaches ~52k
    if [ "$last" -ge $((turns * lines * 35)) ]; then pass "2: the conversation grew to $last tokens over $turns turns"
    else fail "2: the conversation reached only $last tokens (LONG_TURNS=$turns LONG_LINES=$lines)"; fi
    restores_prev "$tmp/s2.out" $((nreq - 1)) "2"
    th=$(tail -1 "$tmp/s2.err" | jq '.bank_stats.evictions.thinned')
    if [ "$th" -gt 0 ]; then pass "2: the default snapshot cap thinned $th snapshots"
    else fail "2: no snapshot was thinned ($th)"; fi
    c=$(field "$tmp/s2.out" "$nreq" .cached_tokens); h=$(field "$tmp/s2.out" "$nreq" .head_tokens)
    r=$(field "$tmp/s2.out" "$nreq" .restore_reason)
    if [ "$c" = "$h" ] && [ "$h" -gt 256 ] && [ "$r" != '"thinned"' ]; then
        pass "2: the new session restores exactly at the head end ($c, reason $r)"
    else fail "2: new session restored $c, head $h, reason $r"; fi
    same "$tmp/s2.out" 2 "$tmp/s2ref.out" 1 "2: request 2 (one tool round)"
    same "$tmp/s2.out" "$nreq" "$tmp/s2ref.out" 2 "2: new session"
else fail "2: replay"; cat "$tmp/s2.err" "$tmp/s2ref.err"; fi
echo "2: $(($(date +%s) - t1)) s"
echo "total: $(($(date +%s) - t0)) s"
finish
