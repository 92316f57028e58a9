#!/bin/sh
# mkmodel_bytes.sh — `headstart mkmodel` writes the same bytes as before: every architecture,
# both formats, every --dtype and the geometries the other tests use (tiled and grouped value
# heads, fused and per-expert MoE, K-quant type mixes), each file's SHA-256 against
# tests/golden/data/mkmodel_bytes.sha256. A refactor of the tensor list (its order, names,
# shapes, routes, transforms or types) shows here as a changed digest, naming the file.
#
# Invariants:
#   1. The outputs depend on the options alone (mkmodel.c's design note, invariant 1); the
#      chat template is given (a fixed one-liner) so that the npm bundle's template does not
#      enter the digests.
#   2. A digest changes only on purpose: a change that means to alter what mkmodel writes
#      regenerates the list (HS_MKMODEL_BYTES_UPDATE=1 writes it) and says why in its commit.
#
# HS_MKMODEL_REF=/path/to/headstart also writes every case with that binary and compares the
# files byte for byte (cmp): the check of a refactor against the binary before it.
# Prints RESULT: N passed, N failed. Run from the repository root with HEADSTART_BUILD set.
set -u
build=${HEADSTART_BUILD:-build}
hs=$build/headstart
want=tests/golden/data/mkmodel_bytes.sha256
passed=0 failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
pass() { echo "ok: $*"; passed=$((passed + 1)); }
finish() { echo "RESULT: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }
tmp=$(mktemp -d /tmp/hs-mkmodel-bytes.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
[ -x "$hs" ] || { fail "$hs is not built"; finish; }

printf '%s\n' '{% for m in messages %}<|im_start|>{{ m.role }}' '{{ m.content }}<|im_end|>' \
    '{% endfor %}' > "$tmp/t.jinja"

# name | arch and options (the seed and template are added). A name ending in .gguf is a
# GGUF file, any other an HF directory.
cases() {
    for arch in qwen35 qwen35moe qwen3next; do
        for dt in f32 f16 bf16; do echo "$arch-$dt-hf|--arch $arch --dtype $dt"; done
        for dt in f32 f16 bf16 q8_0 q4_k_m q5_k_m; do echo "$arch-$dt.gguf|--arch $arch --dtype $dt"; done
    done
    kq="--hidden 256 --head-dim 64 --gdn-head-dim 64"
    for dt in q4_k_m q5_k_m; do
        echo "kq-qwen35-$dt.gguf|--arch qwen35 $kq --ffn 512 --layers 8 --dtype $dt"
        echo "kq-qwen35moe-$dt.gguf|--arch qwen35moe $kq --expert-ffn 256 --dtype $dt"
        echo "kq-qwen3next-$dt.gguf|--arch qwen3next $kq --gdn-k-heads 2 --gdn-v-heads 2 --dtype $dt"
    done
    # [F12] block types and the mix: our round-to-nearest quantizers' bytes pinned
    echo "x-qwen35-q5_1.gguf|--arch qwen35 $kq --ffn 512 --dtype q5_1"
    echo "x-qwen35moe-iq4_nl.gguf|--arch qwen35moe --gdn-k-heads 1 --gdn-v-heads 2 --dtype iq4_nl"
    echo "x-qwen3next-iq4_xs.gguf|--arch qwen3next $kq --gdn-k-heads 2 --gdn-v-heads 2 --dtype iq4_xs"
    echo "x-qwen35moe-ud_q4_k_xl.gguf|--arch qwen35moe $kq --expert-ffn 256 --dtype ud_q4_k_xl"
    for f in -hf .gguf; do
        echo "tile-qwen35$f|--arch qwen35 --gdn-k-heads 1 --gdn-v-heads 3"
        echo "tile-qwen35moe$f|--arch qwen35moe --gdn-k-heads 1 --gdn-v-heads 4 --experts 5 --experts-used 3 --expert-ffn 64"
        echo "group-qwen3next$f|--arch qwen3next --gdn-k-heads 1 --gdn-v-heads 2 --experts 3 --experts-used 2"
    done
    echo "odd-qwen35-f16.gguf|--arch qwen35 --layers 8 --heads 8 --kv-heads 2 --gdn-k-heads 1 --gdn-v-heads 4 --dtype f16"
    echo "odd-qwen35moe-q8_0.gguf|--arch qwen35moe --layers 6 --gdn-k-heads 1 --gdn-v-heads 2 --dtype q8_0"
}

# write BIN DIR NAME OPTS: the case's files under DIR, one line "NAME/FILE" per file
write() {
    out=$2/$3
    case $3 in *.gguf) ;; *) out=$2/$3.d ;; esac
    # shellcheck disable=SC2086 # OPTS are words
    "$1" mkmodel $4 --seed 7 --chat-template "$tmp/t.jinja" --out "$out" > "$tmp/log" 2>&1 ||
        { cat "$tmp/log"; return 1; }
}

digests() { # DIR: "sha256  name" of every file, sorted, names relative to DIR
    (cd "$1" && find . -type f | sed 's|^\./||' | LC_ALL=C sort | xargs sha256sum)
}

mkdir -p "$tmp/new" "$tmp/ref"
cases > "$tmp/cases"
while IFS='|' read -r name opts; do
    if write "$hs" "$tmp/new" "$name" "$opts"; then pass "$name: written"
    else fail "$name: mkmodel $opts"; fi
    if [ -n "${HS_MKMODEL_REF:-}" ]; then
        write "$HS_MKMODEL_REF" "$tmp/ref" "$name" "$opts" || fail "$name: the reference binary failed"
    fi
done < "$tmp/cases"

digests "$tmp/new" > "$tmp/got"
if [ "${HS_MKMODEL_BYTES_UPDATE:-0}" = 1 ]; then
    cp "$tmp/got" "$want"
    echo "wrote $want ($(wc -l < "$want") files)"
fi
if [ -n "${HS_MKMODEL_REF:-}" ]; then
    n=0 bad=0
    for f in $(cd "$tmp/ref" && find . -type f | sed 's|^\./||'); do
        n=$((n + 1))
        cmp -s "$tmp/ref/$f" "$tmp/new/$f" || { bad=$((bad + 1)); fail "$f differs from $HS_MKMODEL_REF's"; }
    done
    [ "$(cd "$tmp/ref" && find . -type f | wc -l)" -eq "$(cd "$tmp/new" && find . -type f | wc -l)" ] ||
        { bad=$((bad + 1)); fail "the two binaries wrote different sets of files"; }
    [ "$bad" -eq 0 ] && pass "$n files byte-identical to $HS_MKMODEL_REF's"
fi
if [ ! -f "$want" ]; then
    fail "$want is missing (HS_MKMODEL_BYTES_UPDATE=1 writes it)"
elif diff "$want" "$tmp/got" > "$tmp/diff"; then
    pass "$(wc -l < "$want") files match their digests in $want"
else
    fail "digests differ from $want (< expected, > written):"
    cat "$tmp/diff"
fi
finish
