#!/bin/sh
# portable.sh — pack headstart's measuring binaries with their shared libraries, to run on
# another x86-64 Linux machine that has none of the build's packages (a lent machine of a
# different CPU, say): `headstart`, `unit_kernels`, `kp_bench`, `kernels_bench`, `bwprobe`,
# `llama_bench` when built (make bench builds it) and the npm package's llama.cpp libraries,
# each binary's interpreter and run path set to /tmp/hsdev (patchelf) and a wrapper that puts
# the packed libraries first, so the other machine's own libc and libraries play no part.
# bench/portable_run.sh goes in as run.sh: what to run there (bench/README.md).
#
#   sh bench/portable.sh [BUILD] [OUT]     (BUILD: build; OUT: BUILD/portable.tar.xz)
#   there:  tar -xJf portable.tar.xz -C /tmp && sh /tmp/hsdev/run.sh OUTDIR
set -eu
build=${1:-build}
out=${2:-$build/portable.tar.xz}
root=/tmp/hsdev   # fixed: the interpreter path is written into each binary
libdir=node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
LIBS="-ljansson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -lpthread -lsqlite3 -lxxhash -lcrypto -lhiredis"
CF="-std=c11 -D_GNU_SOURCE -O2 -ffp-contract=off -Isrc"

die() { echo "portable: $*" >&2; exit 1; }
command -v patchelf >/dev/null || die "needs patchelf (make deps installs it)"
[ -x "$build/headstart" ] && [ -f "$build/libheadstart.a" ] || die "no $build/headstart (make BUILD=$build)"
[ -x "$build/tests/unit_kernels" ] || make BUILD="$build" "$build/tests/unit_kernels" >/dev/null || die "building unit_kernels"
cc $CF bench/kp_bench.c "$build/libheadstart.a" -lm -lpthread -o "$build/kp_bench" || die "building kp_bench"
cc $CF -DBENCH_HAVE_BF16_MATMUL bench/kernels_bench.c "$build/libheadstart.a" $LIBS -o "$build/kernels_bench" ||
    die "building kernels_bench"
cc $CF bench/bwprobe.c "$build/libheadstart.a" $LIBS -o "$build/bwprobe" || die "building bwprobe"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/hsdev/real" "$stage/hsdev/bin" "$stage/hsdev/lib" "$stage/hsdev/llama"
bins="$build/headstart $build/tests/unit_kernels $build/kp_bench $build/kernels_bench $build/bwprobe"
[ -x "$build/llama_bench" ] && [ -f "$libdir/libllama.v0.5.0.so" ] && bins="$bins $build/llama_bench"
for b in $bins; do cp "$b" "$stage/hsdev/real/"; done
# every library the binaries load (the llama.cpp ones come from the package's folder)
for b in $bins; do ldd "$b"; done | awk '/=>/ { print $3 } /ld-linux/ { print $1 }' | sort -u |
    while read -r l; do
        case $l in *node_modules*) ;; /*) cp -L "$l" "$stage/hsdev/lib/" ;; esac
    done
if [ -x "$build/llama_bench" ]; then
    cp "$libdir"/libllama.v0.5.0.so "$libdir"/libggml.v0.5.0.so "$libdir"/libggml-base.so "$libdir"/libggml-cpu-*.so \
        "$stage/hsdev/llama/"
    ldd "$libdir/libllama.v0.5.0.so" | awk '/=>/ { print $3 }' | grep -v node_modules | sort -u |
        while read -r l; do cp -nL "$l" "$stage/hsdev/lib/"; done
fi
interp=$(basename "$(ls "$stage"/hsdev/lib/ld-linux-*.so.*)")
for b in "$stage"/hsdev/real/*; do
    n=$(basename "$b")
    strip "$b"
    patchelf --set-interpreter "$root/lib/$interp" --set-rpath "$root/lib:$root/llama" "$b"
    # a library's own needs are not searched on the binary's run path: the wrapper's
    # LD_LIBRARY_PATH covers them, for this binary only (the machine's programs keep theirs)
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s/lib:%s/llama exec %s/real/%s "$@"\n' "$root" "$root" "$root" "$n" \
        >"$stage/hsdev/bin/$n"
    chmod +x "$stage/hsdev/bin/$n"
done
cp bench/portable_run.sh "$stage/hsdev/run.sh"
tar -cJf "$out" -C "$stage" hsdev
echo "portable: $out ($(du -h "$out" | cut -f1)); there: tar -xJf $(basename "$out") -C /tmp && sh $root/run.sh OUTDIR"
