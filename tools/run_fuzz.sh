#!/bin/sh
# run_fuzz.sh BUILD SECONDS — short libFuzzer runs of every tests/fuzz/fuzz_*.c (`make fuzz`).
#
# For each harness fuzz_NAME.c: the sources of src/base, src/sys and src/format are compiled
# once into BUILD/fuzz/obj (coverage + ASan + UBSan; a harness's own extra sources and
# libraries, see extra_srcs and extra_libs, for it alone), the harness is linked with
# -fsanitize=fuzzer into BUILD/fuzz/fuzz_NAME and run for SECONDS on a scratch copy of
# tests/fuzz/corpus/NAME/ (libFuzzer adds what it finds to the scratch copy only). The
# committed corpus changes only when a run finds a crash, leak, timeout or out-of-memory
# input: that input is copied there as crash-<sha1> (so it is replayed by every later run)
# and the script exits non-zero naming it. Logs: BUILD/fuzz/fuzz_NAME.log.
set -u
build=${1:-build}
secs=${2:-20}
cc=${FUZZ_CC:-clang}
out=$build/fuzz
objdir=$out/obj

command -v "$cc" > /dev/null 2>&1 || { echo "run_fuzz: $cc not found (apt-get install clang)"; exit 1; }
mkdir -p "$objdir"

san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
cflags="-std=c11 -D_GNU_SOURCE -g -O1 -ffp-contract=off -fno-fast-math -Isrc"

# Library objects, rebuilt when their source or any header of these modules is newer.
objs=""
for c in src/base/*.c src/sys/*.c src/format/*.c; do
    [ -f "$c" ] || continue
    o=$objdir/$(echo "$c" | tr '/' '_' | sed 's/\.c$/.o/')
    if [ ! -f "$o" ] || [ "$c" -nt "$o" ] || \
       [ -n "$(find src/base src/sys src/format -name '*.h' -newer "$o" 2>/dev/null | head -1)" ]; then
        if ! $cc $cflags $san -fsanitize=fuzzer-no-link -c "$c" -o "$o" 2> "$o.log"; then
            echo "run_fuzz: warning: $c does not compile (harnesses that need it will not link):"
            head -5 "$o.log"
            rm -f "$o"
            continue
        fi
    fi
    objs="$objs $o"
done

# Sources a harness needs beyond base/sys/format (compiled for it alone, every run).
# request: the jinja and api modules and the template embedded at build time (`make fuzz`
# generates $build/gen/chat_template.c first). blob: the bank's pure blob format; manifest: the
# remote tier's manifest and URL (it needs blob.c's size rules).
extra_srcs() {
    case $1 in
        blob) echo src/bank/blob.c ;;
        manifest) echo src/bank/blob.c src/bank/remote_fmt.c ;;
        parse) echo src/api/parse.c ;;
        request) echo src/jinja/*.c src/api/*.c "$build/gen/chat_template.c" ;;
        tokenizer) echo src/tokenizer/*.c ;;
    esac
}
extra_libs() {
    case $1 in
        blob|manifest) echo -lxxhash -lcrypto ;;
        tokenizer) echo -lpcre2-8 -lutf8proc ;;
    esac
}

failed=""
n_run=0
for h in tests/fuzz/fuzz_*.c; do
    [ -f "$h" ] || continue
    base=$(basename "$h" .c)
    name=${base#fuzz_}
    bin=$out/$base
    log=$out/$base.log
    seeds=tests/fuzz/corpus/$name
    scratch=$out/corpus-$name
    art=$out/artifacts-$name

    : > "$log"
    extra=""
    for c in $(extra_srcs "$name"); do
        o=$objdir/$(echo "$c" | tr '/' '_' | sed 's/\.c$/.o/')
        $cc $cflags $san -fsanitize=fuzzer-no-link -c "$c" -o "$o" >> "$log" 2>&1 && extra="$extra $o"
    done
    if ! $cc $cflags $san -fsanitize=fuzzer "$h" $objs $extra $(extra_libs "$name") -ljansson -lm -lpthread -lcrypto -o "$bin" >> "$log" 2>&1; then
        echo "== $base: BUILD FAILED"
        head -20 "$log"
        failed="$failed $base(build)"
        continue
    fi
    rm -rf "$scratch" "$art"
    mkdir -p "$scratch" "$art"
    if [ -d "$seeds" ]; then
        for s in "$seeds"/*; do [ -f "$s" ] && cp "$s" "$scratch/"; done
    fi
    n_seeds=$(ls "$scratch" | wc -l)

    ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} \
    UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
        "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$art/" "$scratch" >> "$log" 2>&1
    rc=$?
    n_run=$((n_run + 1))

    found=""
    for a in "$art"/crash-* "$art"/leak-* "$art"/timeout-* "$art"/oom-* "$art"/slow-unit-*; do
        [ -f "$a" ] || continue
        case $(basename "$a") in slow-unit-*) continue ;; esac # slow is not wrong
        sha=$(sha1sum "$a" | cut -d' ' -f1)
        mkdir -p "$seeds"
        cp "$a" "$seeds/crash-$sha"
        found="$found $seeds/crash-$sha"
    done
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    if [ -n "$found" ] || [ $rc -ne 0 ]; then
        echo "== $base: FAILED (exit $rc) after ${execs:-?} runs"
        grep -a -E 'ERROR|SUMMARY|runtime error|==[0-9]+==|#[0-9]+ 0x' "$log" | head -30
        [ -n "$found" ] && echo "   new input(s) kept:$found"
        failed="$failed $base"
    else
        echo "== $base: ok, ${execs:-?} runs in ${secs}s from $n_seeds seeds"
    fi
done

if [ -n "$failed" ]; then
    echo "run_fuzz: FAILED:$failed (logs in $out/)"
    exit 1
fi
echo "run_fuzz: $n_run harness(es) ok"
