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
build=${HEADSTART_BUILD:-build}
hs=$build/headstart
py=/usr/bin/python3
libdir=$PWD/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
eval_bin=$build/llama_eval
[ -x "$eval_bin" ] || eval_bin=build/llama_eval
passed=0 failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
pass() { echo "ok: $*"; passed=$((passed + 1)); }
finish() { echo "RESULT: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }

[ -x "$hs" ] || { fail "no $hs"; finish; }
[ -f "$build/libheadstart.a" ] || { fail "$build/libheadstart.a is not built"; finish; }
[ -x "$eval_bin" ] || HEADSTART_BUILD=$build sh tests/golden/llama_load.sh >/dev/null 2>&1
[ -x "$eval_bin" ] || eval_bin=$build/llama_eval
[ -x "$eval_bin" ] || { fail "no llama_eval (tests/golden/llama_load.sh builds it)"; finish; }
$py -c 'import numpy' 2>/dev/null || { fail "$py has no numpy (make deps)"; finish; }

tmp=$(mktemp -d /tmp/hs-q4k-parity.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM

deq=$tmp/q4k_dequant
if ${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -Isrc tests/golden/q4k_dequant.c "$build/libheadstart.a" \
    -ljansson -lpcre2-8 -lutf8proc -lm -lpthread -o "$deq" 2> "$tmp/cc.log"; then
    pass "dequantizing driver builds"
else
    cat "$tmp/cc.log"; fail "dequantizing driver does not build"; finish
fi

ids=$($py -c 'import random; r = random.Random(5); print(",".join(str(r.randrange(600)) for _ in range(64)))')
ids_sp=$(echo "$ids" | tr ',' ' ')
kv_flag=
"$eval_bin" --help 2>&1 | grep -q -- '--kv-f32' && kv_flag=--kv-f32

# compare A B TOL [ROWS]: logits files of 64 rows, the first ROWS (default all) compared;
# prints "OK|BAD rel=... max|diff|=... scale=..."
compare() {
    $py - "$1" "$2" "$3" "${4:-64}" <<'PY'
import sys, numpy as np
a = np.fromfile(sys.argv[1], dtype='<f4'); b = np.fromfile(sys.argv[2], dtype='<f4')
tol = float(sys.argv[3]); rows = int(sys.argv[4])
if a.size != b.size or a.size == 0 or a.size % 64:
    print(f"BAD sizes {a.size} vs {b.size}"); sys.exit()
a = a.reshape(64, -1)[:rows].astype(np.float64); b = b.reshape(64, -1)[:rows].astype(np.float64)
d = float(np.abs(a - b).max()); s = float(np.abs(b).max()); rel = d / s
am = int((a.argmax(1) == b.argmax(1)).sum())
print(("OK" if rel <= tol and np.isfinite(a).all() else "BAD") +
      f" rel={rel:.2e} max|diff|={d:.2e} scale={s:.2f} argmax_equal={am}/{rows}")
PY
}

# llama.cpp greedy continuation (as engine_parity.sh): re-evaluate the growing list, take the
# last row's argmax; OK when equal to ours, or when the first difference is at a near-tie.
llama_greedy() { # gguf n ours tol
    $py - "$eval_bin" "$libdir" "$1" "$ids" "$2" "$tmp/greedy.f32" "$3" "$4" "$kv_flag" <<'PY'
import subprocess, sys, numpy as np
ev, lib, gguf, ids, n, out, ours, tol, kvf = sys.argv[1:10]
n = int(n); tol = float(tol)
ours = [int(x) for x in ours.split()] if ours.strip() else []
toks = [int(x) for x in ids.split(',')]
for i in range(n):
    cmd = [ev, '--lib-dir', lib, gguf, '--tokens', ','.join(map(str, toks)), '--logits-out', out, '--threads', '1']
    if kvf: cmd.append(kvf)
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        print("BAD llama_eval:", r.stderr.strip()[-200:]); sys.exit()
    l = np.fromfile(out, dtype='<f4').reshape(len(toks), -1)[-1]
    t = int(l.argmax())
    if i < len(ours) and ours[i] != t:
        s = np.sort(l)[::-1]; margin = float(s[0] - s[1]); scale = float(np.abs(l).max())
        near = margin <= tol * scale and float(l[ours[i]]) >= float(s[1])
        print(("OK" if near else "BAD") + f" first difference at token {i}: ours {ours[i]}, llama.cpp {t}, "
              f"llama.cpp's top-2 margin {margin:.2e} (scale {scale:.2f})")
        sys.exit()
    toks.append(t)
print(("OK identical" if len(ours) == n else f"BAD ours has {len(ours)} tokens") + f" ({n} tokens)")
PY
}

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
    check "f32 dequantization, ours vs llama.cpp, $spec (tol 1e-4)" "$(compare "$f.hs" "$f.ll" 1e-4)"
    check "$dt first position, ours vs llama.cpp, $spec (tol 1e-4)" "$(compare "$g.hs" "$g.ll" 1e-4 1)"
    check "$dt all positions, ours vs llama.cpp, $spec (tol 4e-2)" "$(compare "$g.hs" "$g.ll" 4e-2)"
    echo "info: llama.cpp $dt vs its own f32 dequantization, $spec: $(compare "$g.ll" "$f.ll" 1)"
    ours=$("$hs" run -m "$g" --ids "$ids_sp" -n 32 --temp 0 2>"$tmp/log" | head -1)
    check "greedy 32 tokens, $spec $dt" "$(llama_greedy "$g" 32 "$ours" 4e-2)"
done
done
finish
