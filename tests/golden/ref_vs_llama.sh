#!/bin/sh
# ref_vs_llama.sh — the same random model, written by `headstart mkmodel` once as a Hugging
# Face directory and once as a GGUF (same seed), must give the same logits in two
# independent implementations: the numpy reference (tools/ref/forward.py, HF conventions)
# and llama.cpp (prebuilt, GGUF conventions). This checks that mkmodel's GGUF conversion
# (folded norms, -exp(A_log), tiled value heads, split/stacked experts) means the same model
# as its HF files, for every architecture, including Hk != Hv.
#
# Tolerance: max |diff| <= 1e-2 over all positions and the whole vocabulary (f32 llama.cpp
# against a float64 reference on logits of size ~1..5), and the same argmax at every
# position. Run from the repository root with HEADSTART_BUILD set; needs make deps.
set -u
build=${HEADSTART_BUILD:-build}
hs=$build/headstart
py=/usr/bin/python3
libdir=$PWD/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
eval_bin=$build/llama_eval
passed=0 failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
pass() { echo "ok: $*"; passed=$((passed + 1)); }
finish() { echo "RESULT: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }

# llama_load.sh builds llama_eval; build it here too when run alone.
[ -x "$eval_bin" ] || HEADSTART_BUILD=$build sh tests/golden/llama_load.sh >/dev/null 2>&1
[ -x "$eval_bin" ] || { fail "no $eval_bin (tests/golden/llama_load.sh builds it)"; finish; }
$py -c 'import numpy' 2>/dev/null || { fail "$py has no numpy (make deps)"; finish; }

tmp=$(mktemp -d /tmp/hs-ref-llama.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
tokens=3,50,200,17,99,260,5,120,33,7,250,64,12,180,90,41

# arch and geometry overrides: the tiny presets (Hk=2, Hv=4) and a ratio-3 variant
for spec in "qwen35" "qwen35moe" "qwen3next" "qwen35 --gdn-k-heads 1 --gdn-v-heads 3"; do
    set -- $spec
    arch=$1; shift
    name=$(echo "$spec" | tr -c 'a-z0-9\n' '_')
    if ! "$hs" mkmodel --arch "$arch" "$@" --seed 11 --dtype f32 --out "$tmp/$name.hf" >"$tmp/log" 2>&1 ||
       ! "$hs" mkmodel --arch "$arch" "$@" --seed 11 --dtype f32 --out "$tmp/$name.gguf" >>"$tmp/log" 2>&1; then
        fail "$spec: mkmodel"; cat "$tmp/log"; continue
    fi
    if ! $py tools/ref/forward.py "$tmp/$name.hf" "$tokens" "$tmp/$name.ref" >"$tmp/log" 2>&1; then
        fail "$spec: numpy reference"; cat "$tmp/log"; continue
    fi
    if ! timeout 300 "$eval_bin" --lib-dir "$libdir" "$tmp/$name.gguf" --tokens "$tokens" \
            --logits-out "$tmp/$name.llama" --threads 1 >"$tmp/log" 2>&1; then
        fail "$spec: llama.cpp"; tail -5 "$tmp/log"; continue
    fi
    verdict=$($py - "$tmp/$name.ref" "$tmp/$name.llama" <<'PY'
import sys, numpy as np
a = np.fromfile(sys.argv[1], dtype='<f4'); b = np.fromfile(sys.argv[2], dtype='<f4')
if a.size != b.size or a.size == 0:
    print(f"BAD sizes {a.size} vs {b.size}"); sys.exit()
T = 16; a = a.reshape(T, -1); b = b.reshape(T, -1)
d = float(np.abs(a - b).max()); same = bool((a.argmax(1) == b.argmax(1)).all())
print(("OK" if d <= 1e-2 and same else "BAD") + f" max|diff|={d:.2e} argmax_equal={same} scale={float(np.abs(a).max()):.2f}")
PY
)
    case $verdict in OK*) pass "$spec: $verdict" ;; *) fail "$spec: $verdict" ;; esac
done
finish
