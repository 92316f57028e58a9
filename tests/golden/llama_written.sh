#!/bin/sh
# llama_written.sh — headstart on GGUF files that llama.cpp's own writer produced, against
# llama.cpp on the same files. engine_parity.sh compares on files `headstart mkmodel`
# writes; a reader that only understands its own writer's spelling (key types, optional
# tensors, value-head order, which keys mean something) passes there and fails on real
# llama.cpp output. tools/llama_mkmodel.c builds random-weight models in memory with the
# prebuilt libllama (llama_model_init_from_user) and saves them with
# llama_model_save_to_file, so every key and tensor here is llama.cpp's writer's choice
# (e.g. attention.recurrent_layers as an array of uint32, no full_attention_interval,
# expert_weights_norm written as false although both MoE graphs renormalise).
#
# Cases (all f32): each architecture with Hk < Hv and Hk = Hv, MoE with an untied output,
# tied outputs, fused ffn_gate_up_exps, qwen3next's legacy fused ssm_in, odd head dims.
# Each: `headstart logits --all` on 64 tokens within 1e-3 of llama.cpp's logits relative to
# the largest |logit| (engine_parity.sh's f32 tolerance; measured here 2e-6 .. 3e-5), and the
# greedy continuation of 32 tokens identical (llama_eval re-run on the growing list).
# Also: a file with attention biases (which llama.cpp adds) must be refused, naming the
# tensor, not silently computed without them; and a headstart mkmodel GGUF re-saved by
# llama.cpp must give bit-identical logits to the original.
#
# Run from the repository root with HEADSTART_BUILD set; needs make deps (numpy,
# node-llama-cpp and the llama.cpp source bundle for the headers). Prints every measured
# error and ends with "RESULT: N passed, N failed".
set -u
. "$(dirname "$0")/lib/llama.sh"
mk_bin=$build/llama_mkmodel
llama_setup llama_mkmodel

tmp=$(mktemp -d /tmp/hs-llama-written.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM

llama_ids

# The vocabulary llama.cpp's models get: a headstart tiny tokenizer (704 entries).
tok=$tmp/tok.gguf
"$hs" mkmodel --arch qwen3next --seed 3 --dtype f32 --out "$tok" >"$tmp/log" 2>&1 ||
    { fail "mkmodel (tokenizer source)"; cat "$tmp/log"; finish; }

for spec in \
    "qwen35" \
    "qwen35 --gdn-k-heads 2 --gdn-v-heads 2" \
    "qwen35 --tied --layers 5 --interval 2 --embd 48 --heads 3 --kv-heads 1 --head-dim 24 --gdn-k-heads 1 --gdn-v-heads 3 --gdn-dim 20" \
    "qwen35moe" \
    "qwen35moe --gdn-k-heads 1 --gdn-v-heads 4 --fused-gate-up" \
    "qwen35moe --gdn-k-heads 2 --gdn-v-heads 2 --tied" \
    "qwen3next" \
    "qwen3next --gdn-k-heads 2 --gdn-v-heads 2" \
    "qwen3next --legacy-ssm-in --fused-gate-up --tied" \
    "qwen3next --embd 56 --heads 6 --kv-heads 2 --head-dim 40 --gdn-k-heads 2 --gdn-v-heads 6 --gdn-dim 12 --experts 5 --experts-used 3 --ff-exp 24 --ff-shexp 40"
do
    set -- $spec
    arch=$1; shift
    name=$(echo "$spec" | tr -c 'a-z0-9\n' '_' | cut -c1-80)
    g=$tmp/$name.gguf
    if ! "$mk_bin" --lib-dir "$libdir" --arch "$arch" "$@" --seed 11 --tokenizer-from "$tok" --out "$g" >"$tmp/log" 2>&1; then
        fail "$spec: llama_mkmodel"; cat "$tmp/log"; continue
    fi
    if ! "$hs" logits -m "$g" --ids "$ids_sp" --all --threads 2 -o "$tmp/$name.hs" 2>"$tmp/log"; then
        fail "$spec: headstart logits on llama.cpp's file"; cat "$tmp/log"; continue
    fi
    if ! timeout 300 "$eval_bin" --lib-dir "$libdir" "$g" --tokens "$ids" --logits-out "$tmp/$name.ll" \
            --threads 1 $kv_flag >"$tmp/log" 2>&1; then
        fail "$spec: llama.cpp"; tail -5 "$tmp/log"; continue
    fi
    v=$(llama_compare "$tmp/$name.hs" "$tmp/$name.ll" 1e-3)
    case $v in OK*) pass "llama.cpp-written $spec: logits $v" ;; *) fail "llama.cpp-written $spec: logits $v" ;; esac
    ours=$("$hs" run -m "$g" --ids "$ids_sp" -n 32 --temp 0 2>"$tmp/log" | head -1)
    v=$(llama_greedy "$g" 32 "$ours")
    case $v in OK*) pass "llama.cpp-written $spec: greedy $v" ;; *) fail "llama.cpp-written $spec: greedy $v" ;; esac
done

# Attention biases: llama.cpp adds them; headstart must refuse, naming the tensor.
g=$tmp/bias.gguf
if "$mk_bin" --lib-dir "$libdir" --arch qwen35 --attn-bias --seed 11 --tokenizer-from "$tok" --out "$g" >"$tmp/log" 2>&1; then
    if "$hs" logits -m "$g" --ids "$ids_sp" -o "$tmp/bias.hs" >"$tmp/log" 2>&1; then
        fail "qwen35 with attn_q/k/v.bias: headstart computed logits without the biases"
    elif grep -q "blk.3.attn_q.bias" "$tmp/log"; then
        pass "qwen35 with attn_q/k/v.bias refused: $(grep -m1 'attn_q.bias' "$tmp/log" | sed 's/^ *//' | cut -c1-90)"
    else
        fail "qwen35 with attn_q/k/v.bias: refused without naming the tensor: $(head -3 "$tmp/log")"
    fi
else
    fail "llama_mkmodel --attn-bias"; cat "$tmp/log"
fi

# Our own files re-saved by llama.cpp: the same tensors under llama.cpp's metadata spelling
# must give the same logits, bit for bit.
for spec in "qwen35 --gdn-k-heads 1 --gdn-v-heads 3" "qwen35moe" "qwen3next"; do
    set -- $spec
    arch=$1; shift
    name=resave_$(echo "$spec" | tr -c 'a-z0-9\n' '_')
    if ! "$hs" mkmodel --arch "$arch" "$@" --seed 13 --dtype f32 --out "$tmp/$name.gguf" >"$tmp/log" 2>&1 ||
       ! "$mk_bin" --lib-dir "$libdir" --resave "$tmp/$name.gguf" --out "$tmp/$name.ll.gguf" >"$tmp/log" 2>&1; then
        fail "$spec: mkmodel + llama.cpp re-save"; cat "$tmp/log"; continue
    fi
    if "$hs" logits -m "$tmp/$name.gguf" --ids "$ids_sp" --all -o "$tmp/$name.a" 2>"$tmp/log" &&
       "$hs" logits -m "$tmp/$name.ll.gguf" --ids "$ids_sp" --all -o "$tmp/$name.b" 2>>"$tmp/log" &&
       cmp -s "$tmp/$name.a" "$tmp/$name.b"; then
        pass "$spec: mkmodel GGUF re-saved by llama.cpp gives bit-identical logits"
    else
        fail "$spec: mkmodel GGUF re-saved by llama.cpp: $(head -3 "$tmp/log")"
    fi
done
finish
