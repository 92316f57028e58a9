#!/bin/sh
# q4k_parity.sh — Q4_K_M and Q5_K_M GGUF files (`headstart mkmodel --dtype q4_k_m` / q5_k_m:
# Q4_K or Q5_K, and Q6_K matrices, Q8_0 where a row is not whole 256-value super-blocks) against
# llama.cpp (the npm
# package's prebuilt library through build/llama_eval), on 256-wide tiny models of each
# architecture (qwen3next with Hk == Hv: see the note at its spec):
#   1. our reading of the blocks: tests/golden/q4k_dequant.c rewrites the file with every
#      quantized tensor as f32 from our row dequantizer; llama.cpp's logits on that file and
#      ours agree within 1e-4 of the largest |logit| (measured ~1e-6: pure f32 maths), and
#      on the Q4_K_M file itself the first position (before any quantization flip can
#      propagate through the KV cache and GDN state) within 1e-4 (measured ~1e-7). A wrong
#      scale, nibble or bit pair in either reader moves those by whole quantization steps.
#   2. the Q4_K_M file: all 64 positions within 4e-2 of the scale (measured with seed 31:
#      7e-4 qwen35, 2.8e-2 qwen35moe where a flipped quant can also flip an expert choice,
#      1.2e-2 qwen3next), and the greedy
#      continuation of 32 tokens equal to llama.cpp's, or differing first at a near-tie of
#      llama.cpp's own top-2 logits. Activation quantization (per 256 values, as llama.cpp's
#      Q8_K) is discontinuous: a 1-ulp difference upstream (llama.cpp's summation orders,
#      chunked GDN) can flip a quant by one step, and later positions compound it — the
#      Q8_0 story of docs/notes/q8_0_parity.md. The script prints llama.cpp's own distance
#      between the Q4_K_M file and its f32 dequantization for scale.
# Prints every measured error and ends with "RESULT: N passed, N failed". Run from the
# repository root with HEADSTART_BUILD set; needs make deps (numpy, node-llama-cpp).
set -u
. "$(dirname "$0")/lib/llama.sh"
llama_setup
[ -f "$build/libheadstart.a" ] || { fail "$build/libheadstart.a is not built"; finish; }

tmp=$(mktemp -d /tmp/hs-q4k-parity.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM

deq=$tmp/q4k_dequant
if ${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -Isrc tests/golden/q4k_dequant.c "$build/libheadstart.a" \
    -ljansson -lpcre2-8 -lutf8proc -lm -lpthread -o "$deq" 2> "$tmp/cc.log"; then
    pass "dequantizing driver builds"
else
    cat "$tmp/cc.log"; fail "dequantizing driver does not build"; finish
fi

llama_ids

check() { # label verdict
    case $2 in OK*) pass "$1: $2" ;; *) fail "$1: $2" ;; esac
}

geom="--hidden 256 --head-dim 64 --gdn-head-dim 64"
# qwen3next keeps Hk == Hv: its GGUF groups value heads, and reordering ssm_out's columns in
# Dv blocks is impossible inside 256-value K-quant super-blocks (the loader refuses it).
# q4_k_m (Q4_K + Q6_K) and q5_k_m (Q5_K + Q6_K): the same checks and tolerances.
for dt in q4_k_m q5_k_m; do
kq=$(echo "$dt" | cut -c1-4) # the base K-quant's name in `headstart inspect`: q4_k, q5_k
for spec in "qwen35 --ffn 512" "qwen35moe --expert-ffn 256" "qwen3next --gdn-k-heads 2 --gdn-v-heads 2"; do
    set -- $spec
    arch=$1; shift
    name=$(echo "$dt $spec" | tr -c 'a-z0-9\n' '_')
    g=$tmp/$name.gguf f=$tmp/$name.f32.gguf
    if ! "$hs" mkmodel --arch "$arch" $geom "$@" --seed 31 --dtype "$dt" --out "$g" >"$tmp/log" 2>&1; then
        fail "$spec: mkmodel $dt"; cat "$tmp/log"; continue
    fi
    "$hs" inspect "$g" > "$tmp/inspect" 2>&1
    if grep -q " $kq " "$tmp/inspect" && grep -q ' q6_k ' "$tmp/inspect"; then
        pass "$spec: the $dt file holds $kq and q6_k tensors"
    else
        fail "$spec: no $kq / q6_k tensors in the $dt file"; cat "$tmp/inspect"; continue
    fi
    if ! "$deq" "$g" "$f" 2>"$tmp/log"; then fail "$spec: q4k_dequant"; cat "$tmp/log"; continue; fi
    ok=1
    for m in "$g" "$f"; do
        "$hs" logits -m "$m" --ids "$ids_sp" --all --threads 2 -o "$m.hs" 2>"$tmp/log" || { ok=0; cat "$tmp/log"; }
        timeout 300 "$eval_bin" --lib-dir "$libdir" "$m" --tokens "$ids" --logits-out "$m.ll" --threads 1 $kv_flag \
            >"$tmp/log" 2>&1 || { ok=0; tail -5 "$tmp/log"; }
    done
    [ $ok = 1 ] || { fail "$spec: evaluating"; continue; }
    check "f32 dequantization, ours vs llama.cpp, $spec (tol 1e-4)" "$(llama_compare "$f.hs" "$f.ll" 1e-4)"
    check "$dt first position, ours vs llama.cpp, $spec (tol 1e-4)" "$(llama_compare "$g.hs" "$g.ll" 1e-4 1)"
    check "$dt all positions, ours vs llama.cpp, $spec (tol 4e-2)" "$(llama_compare "$g.hs" "$g.ll" 4e-2)"
    echo "info: llama.cpp $dt vs its own f32 dequantization, $spec: $(llama_compare "$g.ll" "$f.ll" 1)"
    ours=$("$hs" run -m "$g" --ids "$ids_sp" -n 32 --temp 0 2>"$tmp/log" | head -1)
    check "greedy 32 tokens, $spec $dt" "$(llama_greedy "$g" 32 "$ours" 4e-2)"
done
done
finish
