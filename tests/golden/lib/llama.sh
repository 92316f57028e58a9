# tests/golden/lib/llama.sh — sourced by the golden scripts that hold headstart against
# llama.cpp (the prebuilt library of the node-llama-cpp npm package); never run by itself
# (it lies outside the tests/golden/*.sh glob that tools/run_tests.sh runs).
#
#   pass MSG / fail MSG / finish   count checks; finish prints "RESULT: N passed, N failed"
#                                  and exits, 0 when nothing failed
#   llama_setup [TOOL...]          the checks every such script needs ($hs built, the
#                                  library in node_modules, numpy, the llama.cpp source
#                                  bundle and its headers), then tools/llama_eval.c and each
#                                  tools/TOOL.c built into $build (rebuilt when the source is
#                                  newer); a failed check and finish when any is missing
#   llama_ids                      $ids (64 fixed pseudo-random ids below 600, inside every
#                                  tiny vocabulary, comma separated), $ids_sp (the same,
#                                  space separated) and $kv_flag (llama_eval's --kv-f32 when
#                                  it has one: an f32 KV cache, no flash attention)
#   llama_compare A B TOL [ROWS]   two logits files of 64 rows (the first ROWS compared, all
#                                  by default): prints "OK|BAD rel=... max|diff|=...
#                                  scale=... argmax_equal=N/ROWS", rel = max |a-b| over the
#                                  largest |b|
#   llama_greedy GGUF N OURS [TOL] llama.cpp's greedy continuation of $ids (re-evaluating the
#                                  growing list, the last row's argmax) against OURS (space
#                                  separated ids): "OK identical (N tokens)", else "BAD ...";
#                                  with TOL > 1e-3 (activation-quantized types) a first
#                                  difference at a near-tie is OK: llama.cpp's own top-2 margin
#                                  at most TOL times the scale, and our token among its top two
#
# Sets build, hs, py, libdir, src, inc, eval_bin; uses $tmp (the caller's temp dir) for the
# greedy logits.

build=${HEADSTART_BUILD:-build}
hs=$build/headstart
py=/usr/bin/python3
libdir=$PWD/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
src=$build/llama-src
inc=$build/llama-include
eval_bin=$build/llama_eval
passed=0 failed=0

fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
pass() { echo "ok: $*"; passed=$((passed + 1)); }
finish() { echo "RESULT: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }

llama_tool() { # NAME: build tools/NAME.c into $build/NAME against the prebuilt libllama
    [ -x "$build/$1" ] && [ ! "tools/$1.c" -nt "$build/$1" ] && return 0
    ${CC:-cc} -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes \
        -Wno-unused-parameter -Werror -ffp-contract=off -O1 -g \
        -isystem "$inc/include" -isystem "$inc/ggml/include" "tools/$1.c" -o "$build/$1" \
        -L"$libdir" -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so -l:libggml-base.so \
        -Wl,-rpath,"$libdir" -lm
}

llama_setup() {
    [ -x "$hs" ] || { fail "$hs is not built"; finish; }
    [ -f "$libdir/libllama.v0.5.0.so" ] || { fail "no llama.cpp library in $libdir (run make deps)"; finish; }
    $py -c 'import numpy' 2>/dev/null || { fail "$py has no numpy (make deps)"; finish; }
    [ -d "$src/.git" ] || sh tools/embed_template.sh "$build" "$build/gen/chat_template.c" >/dev/null 2>&1
    [ -d "$src/.git" ] || { fail "no llama.cpp source bundle in $src (run make deps)"; finish; }
    # headers of the exact llama.cpp version the library was built from
    if [ ! -f "$inc/include/llama.h" ] || [ ! -f "$inc/ggml/include/ggml-backend.h" ] ||
        [ ! -f "$inc/ggml/include/gguf.h" ]; then
        rm -rf "$inc" && mkdir -p "$inc"
        git -C "$src" archive HEAD include ggml/include | tar -x -C "$inc" || { fail "extracting llama.cpp headers"; finish; }
    fi
    for llama_t in llama_eval "$@"; do
        llama_tool "$llama_t" || { fail "building tools/$llama_t"; finish; }
    done
}

llama_ids() {
    ids=$($py -c 'import random; r = random.Random(5); print(",".join(str(r.randrange(600)) for _ in range(64)))')
    ids_sp=$(echo "$ids" | tr ',' ' ')
    kv_flag=
    "$eval_bin" --help 2>&1 | grep -q -- '--kv-f32' && kv_flag=--kv-f32
}

llama_compare() {
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

llama_greedy() {
    $py - "$eval_bin" "$libdir" "$1" "$ids" "$2" "$tmp/greedy.f32" "$3" "${4:-0}" "$kv_flag" <<'PY'
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
        print(("OK" if near and tol > 1e-3 else "BAD") + f" first difference at token {i}: ours {ours[i]}, llama.cpp {t}, "
              f"llama.cpp's top-2 margin {margin:.2e} (scale {scale:.2f})")
        sys.exit()
    toks.append(t)
print(("OK identical" if len(ours) == n else f"BAD ours has {len(ours)} tokens") + f" ({n} tokens)")
PY
}
