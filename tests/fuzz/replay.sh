#!/bin/sh
# replay.sh — every committed fuzz input, run once through its harness with the normal
# compiler (no libFuzzer, no sanitizers): part of `make test` (tools/run_tests.sh).
#
# Harnesses are found by name: tests/fuzz/fuzz_NAME.c replays tests/fuzz/corpus/NAME/*
# through $HEADSTART_BUILD/tests/replay_NAME (the Makefile links each harness with
# tests/fuzz/replay_main.c and libheadstart.a). Each input is one test, in its own process
# under a time limit, so a crash names its input and the rest still run. A harness with no
# binary or no corpus is one failed test. Ends with "RESULT: N passed, N failed".
set -u
build=${HEADSTART_BUILD:-build}
limit=${HS_REPLAY_TIMEOUT:-30}
passed=0 failed=0
for h in tests/fuzz/fuzz_*.c; do
    [ -f "$h" ] || continue
    name=$(basename "$h" .c)
    name=${name#fuzz_}
    bin=$build/tests/replay_$name
    dir=tests/fuzz/corpus/$name
    if [ ! -x "$bin" ]; then
        echo "FAIL $name: $bin not built (make $bin)"; failed=$((failed + 1)); continue
    fi
    n=0 bad=$failed
    for f in "$dir"/* "$dir"/.[!.]*; do
        [ -f "$f" ] || continue
        n=$((n + 1))
        if out=$(timeout "$limit" "$bin" "$f" 2>&1); then
            passed=$((passed + 1))
        else
            rc=$?
            failed=$((failed + 1))
            [ $rc -eq 124 ] && why="timed out after ${limit}s" || why="exit $rc"
            echo "FAIL $name: $f ($why)"
            echo "$out" | tail -15 | sed 's/^/    /'
        fi
    done
    if [ $n -eq 0 ]; then
        echo "FAIL $name: no inputs in $dir/"; failed=$((failed + 1))
    elif [ $failed -eq $bad ]; then
        echo "ok   $name: $n input(s)"
    else
        echo "FAIL $name: $((failed - bad)) of $n input(s)"
    fi
done
echo "RESULT: $passed passed, $failed failed"
[ $failed -eq 0 ]
