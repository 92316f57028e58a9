#!/bin/sh
# bank_scenarios.sh — the session bank on the request path (`headstart replay`, issue [F4]),
# exact against --no-bank: every request's first logits row (first_logits_sha256) and its
# output ids must equal those of the same request computed with no bank.
# Requests share a ~1.4k-token head (system text + five tool schemas,
# tests/golden/data/bank/head.json) on a tiny qwen35 q8_0 GGUF model:
#   1. two sessions, same head, different first user messages: the second restores exactly
#      at the head end;
#   2. (scaled down from the 50k seed scenario) an agent conversation grown over five turns
#      with a 256-token grid and a snapshot cap of 2, then a new session with the same head:
#      it restores at the head end, not at an old snapshot;
#   3. an agent loop of five turns with tool calls and results: each turn restores at least
#      up to the previous turn's generation-prompt start;
#   4. interleaved, divergent sessions with a tiny --bank-ram forcing evictions: outputs
#      unchanged, only less reuse;
#   5. scenario 1 on a qwen35moe model; --no-head-anchor banks no head snapshot;
#   6. every request above on a qwen4exp (Qwen3.8-Flash-Next) model whose QSA budget is
#      64 tokens, so the head is attended sparsely: restores exactly at the head, outputs
#      unchanged. (No reuse across models is a unit test:
#      tests/unit/server/test_session.c — the CLI runs one model per process.)
# Every replay here runs with --no-bank-disk: these scenarios are about the RAM tier within
# one process, and a test never writes into the user's cache directory (the disk tier across
# processes is tests/golden/bank_restart.sh).
# Prints RESULT: N passed, N failed. Run from the repository root with HEADSTART_BUILD set.
set -u
build=${HEADSTART_BUILD:-build}
hs=$build/headstart
head_json=tests/golden/data/bank/head.json
passed=0 failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
pass() { echo "ok: $*"; passed=$((passed + 1)); }
finish() { echo "RESULT: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }
tmp=$(mktemp -d /tmp/hs-bank.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
command -v jq >/dev/null || { fail "jq is missing (make deps)"; finish; }

"$hs" mkmodel --arch qwen35 --seed 3 --dtype q8_0 --out "$tmp/m.gguf" >/dev/null 2>&1 &&
"$hs" mkmodel --arch qwen35moe --seed 5 --dtype q8_0 --out "$tmp/moe.gguf" >/dev/null 2>&1 &&
"$hs" mkmodel --arch qwen4exp --seed 7 --dtype q8_0 --qsa-budget 64 --out "$tmp/q4x.gguf" >/dev/null 2>&1 ||
    { fail "mkmodel"; finish; }

# openai request: head + user message $1 + $2 earlier tool-call rounds (the agent loop)
req() {
    jq -c --arg u "$1" --argjson t "$2" '
      {api: "openai", body: {model: "any", max_tokens: 6, tools: .tools,
        messages: ([{role: "system", content: .system}, {role: "user", content: $u}] +
          [range(1; $t + 1) as $k |
            {role: "assistant", content: "",
             tool_calls: [{id: "call_\($k)", type: "function",
               function: {name: "grep", arguments: "{\"pattern\": \"TODO\", \"path\": \"src/m\($k)\"}"}}]},
            {role: "tool", tool_call_id: "call_\($k)",
             content: "src/m\($k)/main.c:\($k * 7): TODO handle case \($k)\nsrc/m\($k)/cache.c:88: TODO evict by size"}])}}' "$head_json"
}
# anthropic request: head + user message $1
areq() {
    jq -c --arg u "$1" '
      {api: "anthropic", body: {model: "any", max_tokens: 6, system: .system,
        tools: [.tools[].function | {name, description, input_schema: .parameters}],
        messages: [{role: "user", content: $u}]}}' "$head_json"
}
A=$(req "Find every TODO in src/ and list them." 0)
B=$(req "Explain what the cache module does, briefly." 0)
C=$(areq "Which tests cover the tokenizer?")
printf '%s\n' "$A" "$B" > "$tmp/s1.jsonl"
for t in 0 1 2 3 4; do req "Fix the TODOs one directory at a time." $t; done > "$tmp/loop.jsonl"
cat "$tmp/s1.jsonl" "$tmp/loop.jsonl" > "$tmp/main.jsonl"
printf '%s\n' "$C" >> "$tmp/main.jsonl"

# field FILE LINE JQ-EXPR
field() { sed -n "$2p" "$1" | jq -c "$3"; }
same_as_ref() { # got-file line ref-line label
    a=$(field "$1" "$2" '[.first_logits_sha256, .output_ids]'); b=$(field "$tmp/ref.out" "$3" '[.first_logits_sha256, .output_ids]')
    if [ -n "$a" ] && [ "$a" = "$b" ]; then pass "$4: first logits and output identical to --no-bank"
    else fail "$4: differs from --no-bank: $a vs $b"; fi
}

t0=$(date +%s)
"$hs" replay --no-bank-disk -m "$tmp/m.gguf" --requests "$tmp/main.jsonl" --no-bank --threads 2 > "$tmp/ref.out" 2> "$tmp/ref.err" ||
    { fail "replay --no-bank"; cat "$tmp/ref.err"; finish; }
[ "$(wc -l < "$tmp/ref.out")" -eq 8 ] || { fail "replay --no-bank printed $(wc -l < "$tmp/ref.out") lines"; finish; }
"$hs" replay --no-bank-disk -m "$tmp/m.gguf" --requests "$tmp/main.jsonl" --threads 2 > "$tmp/main.out" 2> "$tmp/main.err" ||
    { fail "replay"; cat "$tmp/main.err"; finish; }
echo "replay with and without the bank: $(($(date +%s) - t0)) s"
echo "cached tokens (main run): $(jq -r '"\(.cached_tokens)/\(.prompt_tokens)"' "$tmp/main.out" | tr '\n' ' ')"

# 1: sessions A and B
h=$(field "$tmp/main.out" 2 .head_tokens); c=$(field "$tmp/main.out" 2 .cached_tokens)
c1=$(field "$tmp/main.out" 1 .cached_tokens)
if [ "$c1" = 0 ] && [ "$h" -gt 256 ] && [ "$c" = "$h" ] && [ "$(field "$tmp/main.out" 2 .cache_source)" = '"ram"' ]; then
    pass "1: second session restores exactly at the head end ($c of $(field "$tmp/main.out" 2 .prompt_tokens) tokens)"
else fail "1: first cached $c1, second cached $c, head $h"; fi
same_as_ref "$tmp/main.out" 1 1 "1: session A"
same_as_ref "$tmp/main.out" 2 2 "1: session B"
# the anthropic session with the same system text and tools shares the head
# (at the head, or deeper where an earlier session's anchor lies inside the shared prefix)
h8=$(field "$tmp/main.out" 8 .head_tokens); c8=$(field "$tmp/main.out" 8 .cached_tokens)
l8=$(field "$tmp/main.out" 8 .match_len)
if [ "$h8" = "$h" ] && [ "$c8" -ge "$h" ] && [ "$c8" -le "$l8" ]; then
    pass "1: an anthropic session with the same head restores at $c8 (head $h8, shared prefix $l8)"
else fail "1: anthropic session: head $h8 (openai $h), cached $c8, shared prefix $l8"; fi
same_as_ref "$tmp/main.out" 8 8 "1: anthropic session"

# --no-head-anchor: no head snapshot is planned; outputs unchanged
if "$hs" replay --no-bank-disk -m "$tmp/m.gguf" --requests "$tmp/s1.jsonl" --threads 2 --no-head-anchor > "$tmp/nh.out" 2> "$tmp/nh.err"; then
    nh=$(tail -1 "$tmp/nh.err" | jq '.bank_stats.snapshots_by_kind.head')
    hm=$(tail -1 "$tmp/main.err" | jq '.bank_stats.snapshots_by_kind.head')
    if [ "$nh" = 0 ] && [ "$hm" -gt 0 ]; then pass "1: --no-head-anchor banks no head snapshot (default run: $hm)"
    else fail "1: head snapshots with --no-head-anchor $nh, default $hm"; fi
    same_as_ref "$tmp/nh.out" 2 2 "1: session B with --no-head-anchor"
else fail "1: replay --no-head-anchor"; cat "$tmp/nh.err"; fi

# 3: the agent loop (lines 3..7)
for i in 4 5 6 7; do
    prev=$(field "$tmp/main.out" $((i - 1)) .genprompt_start); c=$(field "$tmp/main.out" $i .cached_tokens)
    n=$(field "$tmp/main.out" $i .prompt_tokens)
    if [ "$c" -ge "$prev" ] && [ "$c" -lt "$n" ]; then pass "3: turn $((i - 2)) restores $c of $n (previous generation prompt at $prev)"
    else fail "3: turn $((i - 2)) restored $c, previous generation prompt at $prev"; fi
done
for i in 3 4 5 6 7; do same_as_ref "$tmp/main.out" $i $i "3: turn $((i - 2))"; done

# 2 (scaled down): grown conversation, grid 256, cap 2, then a new session
cat "$tmp/loop.jsonl" > "$tmp/s2.jsonl"; printf '%s\n' "$B" >> "$tmp/s2.jsonl"
if "$hs" replay --no-bank-disk -m "$tmp/m.gguf" --requests "$tmp/s2.jsonl" --threads 2 --grid 256 --snap-cap 2 > "$tmp/s2.out" 2> "$tmp/s2.err"; then
    c=$(field "$tmp/s2.out" 6 .cached_tokens); h=$(field "$tmp/s2.out" 6 .head_tokens)
    grid=$(tail -1 "$tmp/s2.err" | jq '.bank_stats.snapshots_by_kind.grid + .bank_stats.evictions.thinned')
    if [ "$c" = "$h" ] && [ "$grid" -gt 0 ]; then pass "2: after a grown, thinned conversation a new session restores at the head end ($c)"
    else fail "2: new session restored $c, head $h (grid+thinned $grid)"; fi
    same_as_ref "$tmp/s2.out" 6 2 "2: new session"
else fail "2: replay"; cat "$tmp/s2.err"; fi

# 4: interleaved and divergent sessions with a tiny budget (line numbers of main.jsonl)
order="1 3 2 4 1 5 8 6 2 7"
for i in $order; do sed -n "${i}p" "$tmp/main.jsonl"; done > "$tmp/s4.jsonl"
if "$hs" replay --no-bank-disk -m "$tmp/m.gguf" --requests "$tmp/s4.jsonl" --threads 2 --bank-ram 900K > "$tmp/s4.out" 2> "$tmp/s4.err"; then
    k=0
    for i in $order; do k=$((k + 1)); same_as_ref "$tmp/s4.out" $k $i "4: request $k (main $i)"; done
    ev=$(tail -1 "$tmp/s4.err" | jq '[.bank_stats.evictions[]] | add')
    tot=$(tail -1 "$tmp/s4.err" | jq '.bank_stats.total_bytes'); bud=$(tail -1 "$tmp/s4.err" | jq '.bank_stats.budget')
    if [ "$ev" -gt 0 ] && [ "$tot" -le "$bud" ]; then pass "4: $ev evictions, $tot bytes within the $bud budget"
    else fail "4: evictions $ev, bytes $tot, budget $bud"; fi
    echo "cached tokens (interleaved, 900K bank): $(jq -r '"\(.cached_tokens)/\(.prompt_tokens)"' "$tmp/s4.out" | tr '\n' ' ')"
else fail "4: replay"; cat "$tmp/s4.err"; fi

# 5: scenario 1 on qwen35moe
if "$hs" replay --no-bank-disk -m "$tmp/moe.gguf" --requests "$tmp/s1.jsonl" --threads 2 > "$tmp/moe.out" 2>/dev/null &&
   sed -n 2p "$tmp/s1.jsonl" > "$tmp/moe1.jsonl" &&
   "$hs" replay --no-bank-disk -m "$tmp/moe.gguf" --requests "$tmp/moe1.jsonl" --threads 2 --no-bank > "$tmp/moeref.out" 2>/dev/null; then
    c=$(field "$tmp/moe.out" 2 .cached_tokens); h=$(field "$tmp/moe.out" 2 .head_tokens)
    a=$(field "$tmp/moe.out" 2 '[.first_logits_sha256, .output_ids]'); b=$(field "$tmp/moeref.out" 1 '[.first_logits_sha256, .output_ids]')
    if [ "$c" = "$h" ] && [ "$a" = "$b" ]; then pass "5: qwen35moe: second session restores at the head ($c), identical to --no-bank"
    else fail "5: qwen35moe: cached $c head $h; $a vs $b"; fi
else fail "5: qwen35moe replay"; fi

# 6: scenario 1 and the agent loop on qwen4exp (Qwen3.8-Flash-Next) with a 64-token QSA budget,
# so the head itself is attended sparsely and the restores land inside 4-token blocks
if "$hs" replay --no-bank-disk -m "$tmp/q4x.gguf" --requests "$tmp/main.jsonl" --threads 2 > "$tmp/q4x.out" 2>/dev/null &&
   "$hs" replay --no-bank-disk -m "$tmp/q4x.gguf" --requests "$tmp/main.jsonl" --threads 2 --no-bank > "$tmp/q4xref.out" 2>/dev/null; then
    c=$(field "$tmp/q4x.out" 2 .cached_tokens); h=$(field "$tmp/q4x.out" 2 .head_tokens)
    if [ "$c" = "$h" ] && [ "$h" -gt 256 ]; then pass "6: qwen4exp: second session restores exactly at the head ($c, = $((c % 4)) mod 4)"
    else fail "6: qwen4exp: cached $c head $h"; fi
    bad=0
    for i in 1 2 3 4 5 6 7 8; do
        a=$(field "$tmp/q4x.out" $i '[.first_logits_sha256, .output_ids]'); b=$(field "$tmp/q4xref.out" $i '[.first_logits_sha256, .output_ids]')
        [ -n "$a" ] && [ "$a" = "$b" ] || bad=$((bad + 1))
    done
    restored=$(jq -r 'select(.cached_tokens > 0) | .cached_tokens' "$tmp/q4x.out" | tr '\n' ' ')
    if [ "$bad" = 0 ]; then pass "6: qwen4exp: all 8 requests identical to --no-bank (restored at: $restored)"
    else fail "6: qwen4exp: $bad of 8 requests differ from --no-bank"; fi
else fail "6: qwen4exp replay"; fi
echo "total: $(($(date +%s) - t0)) s"
finish
