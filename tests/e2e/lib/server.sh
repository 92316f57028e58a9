# tests/e2e/lib/server.sh — sourced by the end-to-end scripts, never run by itself (it lies
# outside the tests/e2e/*.sh glob that tools/run_tests.sh runs as tests): the temp dir, the
# servers and their end, which every script needs the same way.
#
#   e2e_setup NAME CMD...    the start every server script makes: $hs executable and each
#                            CMD on the PATH (else a failed check and finish), e2e_tmp NAME,
#                            and a tiny random model at $tmp/m (mkmodel --preset tiny).
#   pass MSG / fail MSG      count a check in $passed / $failed, printing "ok: MSG" or
#                            "FAIL: MSG"; finish prints "RESULT: N passed, N failed" and
#                            exits, 0 when nothing failed. result P F does the same for
#                            counts the script has (node's, say).
#   e2e_tmp NAME             tmp=$(mktemp -d /tmp/hs-NAME.XXXXXX); from now on the shell's
#                            exit runs e2e_cleanup (INT and TERM exit 1 through it).
#   e2e_cleanup              kills every server e2e_serve started and removes the dir
#                            e2e_tmp made (if any). A script with more to do at exit sets
#                            its own EXIT trap and calls this from it.
#   e2e_serve LOG ARGS...    "$hs" serve --host 127.0.0.1 --port 0 ARGS in the background,
#                            output in LOG; sets $pid and $port (the kernel's free port, read
#                            from the start line). The start line comes once the server is
#                            ready (/health answers 200), so there is nothing else to wait
#                            for. Status 1 when no start line came within E2E_START_S seconds
#                            (default 10; LOG says why). Environment set for the call (as in
#                            `VAR=x e2e_serve ...`) reaches the server.
#   e2e_start LOG ARGS...    e2e_serve LOG -m "$tmp/m" --threads 1 ARGS: the model of
#                            e2e_setup on one thread; if it does not start, a failed check
#                            with the log, and finish.
#   e2e_stop PID [SECONDS]   SIGTERM, then wait at most SECONDS (default 5) for it to end;
#                            the server's exit status, or 124 when it was still running
#                            (then killed).
#   e2e_sanitizer FILES...   status 0 and the reports printed when a sanitizer (ASan, UBSan)
#                            wrote into any of the logs.
#   check FILE PYTHON-EXPR   status 0 when the expression holds; it sees j (FILE parsed as
#                            JSON, None when it is not) and t (the raw text), with the
#                            modules json and re (python3 at /usr/bin)
#   e2e_tap FILE RC          for `node --test --test-reporter=tap` output in FILE with exit
#                            status RC: prints the test lines (the head of FILE too when RC
#                            is not 0) and sets $p and $f to node's pass and fail counts
#                            (f is at least 1 when RC is not 0 or no counts were printed).
#
# $hs is the headstart binary: ${HEADSTART_BUILD:-build}/headstart (tools/run_tests.sh sets
# HEADSTART_BUILD), unless the script set hs before sourcing this. Every wait is a bounded loop; helper variables start
# with e2e_ so that a script's own (i, pid, port...) are only set where documented.

hs=${hs:-${HEADSTART_BUILD:-build}/headstart}
e2e_pids=""
e2e_dir=""
passed=0 failed=0

fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
pass() { echo "ok: $*"; passed=$((passed + 1)); }
result() { echo "RESULT: $1 passed, $2 failed"; [ "$2" -eq 0 ]; exit $?; }
finish() { result "$passed" "$failed"; }

check() {
    /usr/bin/python3 - "$1" "$2" <<'EOF'
import json, re, sys
t = open(sys.argv[1], encoding="utf-8").read()
try:
    j = json.loads(t)
except Exception:
    j = None
ok = eval("(" + sys.argv[2] + ")")
sys.exit(0 if ok else 1)
EOF
}

e2e_cleanup() {
    for e2e_p in $e2e_pids; do kill "$e2e_p" 2>/dev/null; done
    e2e_pids=""
    [ -n "$e2e_dir" ] && rm -rf "$e2e_dir"
    e2e_dir=""
}

e2e_tmp() {
    tmp=$(mktemp -d "/tmp/hs-$1.XXXXXX") || { echo "mktemp failed" >&2; exit 1; }
    e2e_dir=$tmp
    trap e2e_cleanup EXIT
    trap 'exit 1' INT TERM
}

e2e_setup() {
    e2e_name=$1; shift
    [ -x "$hs" ] || { fail "no $hs"; finish; }
    for e2e_c in "$@"; do command -v "$e2e_c" >/dev/null || { fail "no $e2e_c"; finish; }; done
    e2e_tmp "$e2e_name"
    "$hs" mkmodel --arch qwen35 --preset tiny --out "$tmp/m" >/dev/null 2>&1 || { fail "mkmodel"; finish; }
}

e2e_serve() {
    e2e_log=$1; shift
    "$hs" serve --host 127.0.0.1 --port 0 "$@" >"$e2e_log" 2>&1 &
    pid=$!
    e2e_pids="$e2e_pids $pid"
    port=
    e2e_i=0
    while [ $e2e_i -lt $((${E2E_START_S:-10} * 10)) ] && [ -z "$port" ]; do
        port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$e2e_log" 2>/dev/null)
        [ -n "$port" ] || { kill -0 "$pid" 2>/dev/null || break; sleep 0.1; }
        e2e_i=$((e2e_i + 1))
    done
    [ -n "$port" ]
}

e2e_start() {
    e2e_slog=$1; shift
    e2e_serve "$e2e_slog" -m "$tmp/m" --threads 1 "$@" || { fail "server did not start: $(cat "$e2e_slog")"; finish; }
}

e2e_stop() {
    kill -TERM "$1" 2>/dev/null
    e2e_i=0
    while [ $e2e_i -lt $((${2:-5} * 10)) ] && kill -0 "$1" 2>/dev/null; do sleep 0.1; e2e_i=$((e2e_i + 1)); done
    if kill -0 "$1" 2>/dev/null; then
        kill -KILL "$1" 2>/dev/null
        wait "$1" 2>/dev/null
        e2e_rc=124
    else
        wait "$1"
        e2e_rc=$?
    fi
    e2e_rest=""
    for e2e_p in $e2e_pids; do [ "$e2e_p" = "$1" ] || e2e_rest="$e2e_rest $e2e_p"; done
    e2e_pids=$e2e_rest
    return $e2e_rc
}

e2e_sanitizer() {
    grep -q -E 'Sanitizer|runtime error' "$@" 2>/dev/null || return 1
    grep -h -A20 -E 'Sanitizer|runtime error' "$@" | head -60
    return 0
}

e2e_tap() {
    grep -E '^(not )?ok |^# (pass|fail)' "$1"
    [ "$2" -eq 0 ] || head -120 "$1"
    p=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$1")
    f=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$1")
    [ -n "$p" ] || p=0
    [ -n "$f" ] || f=1
    [ "$2" -eq 0 ] || [ "$f" -gt 0 ] || f=1
}
