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
build=${HEADSTART_BUILD:-build}
hs=$build/headstart
py=/usr/bin/python3
libdir=$PWD/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
src=$build/llama-src
inc=$build/llama-include
eval_bin=$build/llama_eval
mk_bin=$build/llama_mkmodel
passed=0 failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
pass() { echo "ok: $*"; passed=$((passed + 1)); }
finish() { echo "RESULT: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }

[ -x "$hs" ] || { fail "no $hs"; finish; }
[ -f "$libdir/libllama.v0.5.0.so" ] || { fail "no llama.cpp library in $libdir (run make deps)"; finish; }
$py -c 'import numpy' 2>/dev/null || { fail "$py has no numpy (make deps)"; finish; }
if [ ! -d "$src/.git" ]; then
    sh tools/embed_template.sh "$build" "$build/gen/chat_template.c" >/dev/null 2>&1
fi
[ -d "$src/.git" ] || { fail "no llama.cpp source bundle in $src (run make deps)"; finish; }
if [ ! -f "$inc/include/llama.h" ] || [ ! -f "$inc/ggml/include/gguf.h" ]; then
    rm -rf "$inc" && mkdir -p "$inc"
    git -C "$src" archive HEAD include ggml/include | tar -x -C "$inc" || { fail "extracting llama.cpp headers"; finish; }
fi
tool() { # name: build tools/NAME.c into $build/NAME against the prebuilt libllama
    if [ ! -x "$build/$1" ] || [ "tools/$1.c" -nt "$build/$1" ]; then
        ${CC:-cc} -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes \
            -Wno-unused-parameter -Werror -ffp-contract=off -O1 -g \
            -isystem "$inc/include" -isystem "$inc/ggml/include" "tools/$1.c" -o "$build/$1" \
            -L"$libdir" -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so -l:libggml-base.so \
            -Wl,-rpath,"$libdir" -lm
    fi
}
tool llama_eval || { fail "building tools/llama_eval"; finish; }
tool llama_mkmodel || { fail "building tools/llama_mkmodel"; finish; }

tmp=$(mktemp -d /tmp/hs-llama-written.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM

ids=$($py -c 'import random; r = random.Random(5); print(",".join(str(r.randrange(600)) for _ in range(64)))')
ids_sp=$(echo "$ids" | tr ',' ' ')
kv_flag=
"$eval_bin" --help 2>&1 | grep -q -- '--kv-f32' && kv_flag=--kv-f32

# The vocabulary llama.cpp's models get: a headstart tiny tokenizer (704 entries).
tok=$tmp/tok.gguf
"$hs" mkmodel --arch qwen3next --seed 3 --dtype f32 --out "$tok" >"$tmp/log" 2>&1 ||
    { fail "mkmodel (tokenizer source)"; cat "$tmp/log"; finish; }

compare() { # A B TOL -> "OK|BAD rel=... argmax_equal=.."
    $py - "$1" "$2" "$3" <<'PY'
import sys, numpy as np
a = np.fromfile(sys.argv[1], dtype='<f4'); b = np.fromfile(sys.argv[2], dtype='<f4')
tol = float(sys.argv[3])
if a.size != b.size or a.size == 0 or a.size % 64:
    print(f"BAD sizes {a.size} vs {b.size}"); sys.exit()
a = a.reshape(64, -1).astype(np.float64); b = b.reshape(64, -1).astype(np.float64)
d = float(np.abs(a - b).max()); s = float(np.abs(b).max()); rel = d / s
am = int((a.argmax(1) == b.argmax(1)).sum())
print(("OK" if rel <= tol and np.isfinite(a).all() else "BAD") +
      f" rel={rel:.2e} max|diff|={d:.2e} scale={s:.2f} argmax_equal={am}/64")
PY
}

llama_greedy() { # gguf n ours -> "OK identical (n tokens)" or "BAD first difference ..."
    $py - "$eval_bin" "$libdir" "$1" "$ids" "$2" "$tmp/greedy.f32" "$3" "$kv_flag" <<'PY'
import subprocess, sys, numpy as np
ev, lib, gguf, ids, n, out, ours, kvf = sys.argv[1:9]
n = int(n)
ours = [int(x) for x in ours.split()] if ours.strip() else []
toks = [int(x) for x in ids.split(',')]
for i in range(n):
    cmd = [ev, '--lib-dir', lib, gguf, '--tokens', ','.join(map(str, toks)), '--logits-out', out, '--threads', '1']
    if kvf: cmd.append(kvf)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        print("BAD llama_eval:", r.stderr.strip()[-200:]); sys.exit()
    t = int(np.fromfile(out, dtype='<f4').reshape(len(toks), -1)[-1].argmax())
    if i >= len(ours) or ours[i] != t:
        print(f"BAD first difference at token {i}: ours {ours[i] if i < len(ours) else None}, llama.cpp {t}")
        sys.exit()
    toks.append(t)
print(f"OK identical ({n} tokens)")
PY
}

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
    v=$(compare "$tmp/$name.hs" "$tmp/$name.ll" 1e-3)
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
