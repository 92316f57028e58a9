#!/bin/sh
# check_docs.sh — fail when a file under src/ is not named in docs/ARCHITECTURE.md, or the
# include table the build enforces is missing from docs/DESIGN.md. Run by `make test`
# (tools/run_tests.sh); prints "RESULT: N passed, N failed" (one test per file).
#
# A file src/MOD/NAME is named when the tour's table row for MOD (first cell `MOD`) has
# `NAME` in backquotes, or anywhere in the tour `src/MOD/NAME` is in backquotes. A
# backquoted name may be a shell pattern (`matmul_*`, `src/cmd_*.c`), which names every
# file it matches. A file directly in src/ needs its path (`src/main.c`).
set -u -f
doc=${HS_ARCH_DOC:-docs/ARCHITECTURE.md}
[ -f "$doc" ] || { echo "check_docs: $doc not found"; echo "RESULT: 0 passed, 1 failed"; exit 1; }

# backquoted words of one table row ("| mod | ...") or of the whole document
row_words() { # module
    grep -E "^\| *$1 *\|" "$doc" | grep -o '`[^`]*`' | tr -d '`'
}
all_words() {
    grep -o '`[^`]*`' "$doc" | tr -d '`' | grep '^src/'
}
paths=$(all_words)

passed=0 failed=0 missing=""
for f in $(find src -type f | LC_ALL=C sort); do
    rel=${f#src/}
    mod=${rel%%/*}
    name=${rel#*/}
    found=0
    for p in $paths; do
        case $f in $p) found=1; break ;; esac
    done
    if [ $found -eq 0 ] && [ "$mod" != "$rel" ]; then
        for p in $(row_words "$mod"); do
            case $name in $p) found=1; break ;; esac
        done
    fi
    if [ $found -eq 1 ]; then passed=$((passed + 1))
    else failed=$((failed + 1)); missing="$missing $f"
    fi
done
for f in $missing; do echo "check_docs: $f is not named in $doc"; done

# the include table: the parse check_includes.sh uses must find a row for every module
if sh tools/check_includes.sh --table > /dev/null 2>&1; then passed=$((passed + 1))
else
    failed=$((failed + 1))
    echo "check_docs: the include table of docs/DESIGN.md does not parse:"
    sh tools/check_includes.sh --table 2>&1 | sed 's/^/    /'
fi
echo "RESULT: $passed passed, $failed failed"
[ $failed -eq 0 ]
