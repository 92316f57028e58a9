#!/bin/sh
# remote.sh — the bank's remote tier ([F13]) end to end: two `headstart serve` replicas with
# their own --bank-dir share one Redis (a redis-server this script starts on a unix socket
# in its temp dir, and stops), on a tiny random model with the ~1.4k-token head of
# tests/golden/data/bank/head.json. Every answer's first logits (the request log's
# first_logits_sha256) must equal the same request's on a --no-bank server: 0 wrong
# restores; every request must answer 200: 0 failed requests.
#   1. A computes session 1 and uploads its entries (unix socket); B (another dir, loopback
#      TCP) restores the head for session 2 from Redis (cached >= the head, cache_source
#      remote); /metrics of both.
#   2. Both restart: B on its own dir restores from disk; a replica on a fresh dir restores
#      from Redis again.
#   3. Faults: Redis absent at start (the server starts, says so once, serves, and comes up
#      when Redis does); Redis stopped mid-run (served from the local tiers) and back (the
#      tier reconnects and uploads the head again); slow (DEBUG SLEEP longer than
#      --bank-remote-timeout: the request does not wait it out); full (maxmemory tiny,
#      noeviction: uploads get OOM, counted, nothing fails); values altered (a chunk's
#      bytes, a chunk cut short, a manifest byte, a chunk deleted as if evicted): each is
#      found (discarded or evicted counted), never restored, and the answer is exact.
#   4. AUTH: the right password in the URL works and is never printed; a wrong one leaves
#      the tier down (counted) and the replica serving.
# Ends with "RESULT: N passed, N failed".
set -u
py=/usr/bin/python3
. "$(dirname "$0")/lib/server.sh"
e2e_setup remote curl redis-server redis-cli

sock=$tmp/r.sock
rport=$($py -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
redis_pid=
redis_start() {
    redis-server --port "$rport" --bind 127.0.0.1 --unixsocket "$sock" --unixsocketperm 700 --save '' --appendonly no \
        --enable-debug-command yes --dir "$tmp" --daemonize no >>"$tmp/redis.log" 2>&1 &
    redis_pid=$!
    e2e_i=0
    while [ $e2e_i -lt 50 ] && ! redis-cli -s "$sock" ping >/dev/null 2>&1; do sleep 0.1; e2e_i=$((e2e_i + 1)); done
    redis-cli -s "$sock" ping >/dev/null 2>&1
}
redis_stop() {
    redis-cli -s "$sock" shutdown nosave >/dev/null 2>&1 || redis-cli -s "$sock" -a 's3c@ret' --no-auth-warning shutdown nosave >/dev/null 2>&1
    [ -n "$redis_pid" ] && wait "$redis_pid" 2>/dev/null
    redis_pid=
}
rcli() { redis-cli -s "$sock" "$@"; }
trap 'redis_stop; e2e_cleanup' EXIT

# post PORT BODYFILE OUT: prints the HTTP status
post() { curl -s -o "$3" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "@$2" "http://127.0.0.1:$1/v1/chat/completions"; }
# metric PORT NAME: the value of one sample line (0 when absent)
metric() { curl -s "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n { print $2; f = 1 } END { if (!f) print 0 }'; }
# lastreq LOG FIELD: that field of the log's last request line (JSON log format)
lastreq() {
    $py - "$1" "$2" <<'EOF'
import json, sys
v = ""
for line in open(sys.argv[1], encoding="utf-8", errors="replace"):
    try:
        j = json.loads(line)
    except Exception:
        continue
    if j.get("event") == "request":
        v = j.get(sys.argv[2], "")
print(v)
EOF
}
# settle PORT: wait (bounded) until the disk and remote queues of that server are empty
settle() {
    e2e_k=0
    while [ $e2e_k -lt 100 ]; do
        [ "$(metric "$1" headstart_bank_disk_pending)" = 0 ] && [ "$(metric "$1" headstart_bank_remote_pending)" = 0 ] && break
        sleep 0.1; e2e_k=$((e2e_k + 1))
    done
    sleep 0.2
}

$py - "$tmp" <<'EOF' || { fail "bodies"; finish; }
import json, sys
d = sys.argv[1]
h = json.load(open("tests/golden/data/bank/head.json"))
turns = ["List the files in src.", "Explain the cache in two lines.", "What does the bank keep?",
         "Where is the entry point?", "Name three tools.", "Summarise the head.", "Count to five.",
         "Which tool edits files?", "Say hello.", "What is a snapshot?"]
for i, u in enumerate(turns, 1):
    json.dump({"model": "m", "max_tokens": 6, "temperature": 0, "tools": h["tools"],
               "messages": [{"role": "system", "content": h["system"]}, {"role": "user", "content": u}]},
              open(f"{d}/s{i}.json", "w"))
EOF
head_len=$("$hs" render -m "$tmp/m" --request "$tmp/s1.json" --head 2>/dev/null)
[ "${head_len:-0}" -gt 256 ] || { fail "render --head gave '$head_len'"; finish; }

# the reference: every session's first logits and answer without any bank
e2e_start "$tmp/ref.log" --no-bank --log-format json
ref_port=$port
for i in 1 2 3 4 5 6 7 8 9 10; do
    st=$(post $ref_port "$tmp/s$i.json" "$tmp/ref$i.out")
    [ "$st" = 200 ] || fail "reference s$i: status $st"
    lastreq "$tmp/ref.log" first_logits_sha256 >"$tmp/ref$i.sha"
done
[ -s "$tmp/ref1.sha" ] && pass "reference: 10 sessions computed without a bank" || fail "no first_logits_sha256 in the log"

# ask PORT LOG i WHAT [SOURCE]: session i on that server: 200, exact, and (when SOURCE is
# given) that cache source with at least the head restored. Counts wrong/failed.
wrong=0 failed_req=0
ask() {
    st=$(post "$1" "$tmp/s$3.json" "$tmp/out")
    if [ "$st" != 200 ]; then
        failed_req=$((failed_req + 1)); fail "$4: session $3 status $st: $(head -c 300 "$tmp/out")"; return 1
    fi
    sha=$(lastreq "$2" first_logits_sha256)
    if [ "$sha" != "$(cat "$tmp/ref$3.sha")" ]; then
        wrong=$((wrong + 1)); fail "$4: session $3 first logits differ from --no-bank"; return 1
    fi
    $py - "$tmp/out" "$tmp/ref$3.out" <<'EOF' || { wrong=$((wrong + 1)); fail "$4: session $3 answer differs from --no-bank"; return 1; }
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
sys.exit(0 if a["choices"] == b["choices"] else 1)
EOF
    if [ -n "${5:-}" ]; then
        src=$(lastreq "$2" cache_source) cached=$(lastreq "$2" cached_tokens)
        if [ "$src" != "$5" ] || [ "${cached:-0}" -lt "$head_len" ]; then
            fail "$4: session $3 restored $cached tokens from '$src' (want >= $head_len from $5)"; return 1
        fi
    fi
    pass "$4: session $3 exact${5:+, $cached tokens from $5}"
}

redis_start || { fail "redis-server did not start: $(tail -3 "$tmp/redis.log")"; finish; }
url=unix://$sock

# ---- 1. A computes, B restores from Redis ----
e2e_start "$tmp/a.log" --bank-dir "$tmp/da" --bank-remote "$url" --log-format json
a_pid=$pid a_port=$port
grep -q "remote $url" "$tmp/a.log" && pass "start line names the remote tier" || fail "start line: $(grep listening "$tmp/a.log")"
ask $a_port "$tmp/a.log" 1 "A cold"
settle $a_port
up=$(metric $a_port headstart_bank_remote_uploads_total)
[ "$up" -ge 2 ] && pass "A uploaded $up entries" || fail "A uploaded $up entries"
n_m=$(rcli --scan --pattern 'headstart:hsb2:m:*' | wc -l)
[ "$n_m" -ge 2 ] && pass "Redis holds $n_m manifests" || fail "Redis holds $n_m manifests"
# B reaches the same Redis over loopback TCP
e2e_start "$tmp/b.log" --bank-dir "$tmp/db" --bank-remote "redis://127.0.0.1:$rport/0" --log-format json
b_pid=$pid b_port=$port
ask $b_port "$tmp/b.log" 2 "B" remote
[ "$(metric $b_port headstart_bank_remote_hits_total)" = 1 ] && pass "B: remote hits 1" || fail "B: remote hits $(metric $b_port headstart_bank_remote_hits_total)"
settle $b_port

# ---- 2. restarts ----
e2e_stop $a_pid 10; e2e_stop $b_pid 10
e2e_start "$tmp/b2.log" --bank-dir "$tmp/db" --bank-remote "$url" --log-format json
ask $port "$tmp/b2.log" 3 "B restarted on its dir" disk
e2e_stop $pid 10
e2e_start "$tmp/c.log" --bank-dir "$tmp/dc" --bank-remote "$url" --log-format json
ask $port "$tmp/c.log" 4 "C on a fresh dir after the restarts" remote
e2e_stop $pid 10

# ---- 3a. Redis absent at start, then there ----
redis_stop
e2e_start "$tmp/e.log" --bank-dir "$tmp/de" --bank-remote "$url" --log-format json
e_pid=$pid e_port=$port
grep -q 'unreachable' "$tmp/e.log" && pass "absent: the start line says unreachable" || fail "absent: $(grep listening "$tmp/e.log")"
ask $e_port "$tmp/e.log" 5 "absent at start"
[ "$(metric $e_port headstart_bank_remote_up)" = 0 ] && [ "$(metric $e_port 'headstart_bank_remote_errors_total{reason="connect"}')" -ge 1 ] \
    && pass "absent: up 0, connect errors counted" || fail "absent: metrics $(curl -s http://127.0.0.1:$e_port/metrics | grep remote_)"
n_warn=$(grep -c 'bank remote.*serving from the local tiers' "$tmp/e.log")
[ "$n_warn" = 1 ] && pass "absent: logged once" || fail "absent: logged $n_warn times"
redis_start || fail "redis restart"
e2e_k=0
while [ $e2e_k -lt 80 ] && [ "$(metric $e_port headstart_bank_remote_up)" != 1 ]; do sleep 0.1; e2e_k=$((e2e_k + 1)); done
[ "$(metric $e_port headstart_bank_remote_up)" = 1 ] && pass "absent: up once Redis is there" || fail "absent: never came up"
settle $e_port
# the head E computed while Redis was away is uploaded when it comes up
e2e_start "$tmp/f.log" --bank-dir "$tmp/df" --bank-remote "$url" --log-format json
f_pid=$pid f_port=$port
ask $f_port "$tmp/f.log" 6 "F after Redis came up (E's head uploaded late)" remote

# ---- 3b. Redis going away mid-run, and back ----
redis_stop
ask $e_port "$tmp/e.log" 7 "Redis stopped mid-run"
[ "$(metric $e_port headstart_bank_remote_up)" = 0 ] && pass "stopped: up 0" || fail "stopped: up $(metric $e_port headstart_bank_remote_up)"
e2e_start "$tmp/g.log" --bank-dir "$tmp/dg" --bank-remote "$url" --log-format json --bank-remote-timeout 200
g_pid=$pid g_port=$port
ask $g_port "$tmp/g.log" 8 "a fresh replica while Redis is away"
redis_start || fail "redis restart"
e2e_k=0
while [ $e2e_k -lt 80 ] && [ "$(metric $e_port headstart_bank_remote_up)" != 1 ]; do sleep 0.1; e2e_k=$((e2e_k + 1)); done
[ "$(metric $e_port headstart_bank_remote_up)" = 1 ] && [ "$(metric $e_port headstart_bank_remote_reconnects_total)" -ge 1 ] \
    && pass "back: up again, reconnects counted" || fail "back: up $(metric $e_port headstart_bank_remote_up)"
grep -q 'reachable again' "$tmp/e.log" && pass "back: logged" || fail "back: no 'reachable again' line"
settle $e_port
e2e_stop $f_pid 10

# ---- 3c. slow: every call times out while Redis sleeps ----
e2e_k=0
while [ $e2e_k -lt 80 ] && [ "$(metric $g_port headstart_bank_remote_up)" != 1 ]; do sleep 0.1; e2e_k=$((e2e_k + 1)); done
(rcli debug sleep 3 >/dev/null 2>&1 &)
sleep 0.2
t0=$($py -c 'import time; print(time.time())')
ask $g_port "$tmp/g.log" 9 "Redis sleeping (DEBUG SLEEP 3, timeout 200 ms)"
dt=$($py -c "import time; print(round(time.time() - $t0, 2))")
$py -c "import sys; sys.exit(0 if $dt < 2.5 else 1)" && pass "slow: answered in $dt s, not after the sleep" || fail "slow: took $dt s"
[ "$(metric $g_port 'headstart_bank_remote_errors_total{reason="timeout"}')" -ge 1 ] && pass "slow: timeout counted" \
    || fail "slow: $(curl -s http://127.0.0.1:$g_port/metrics | grep remote_errors)"
sleep 3
e2e_stop $g_pid 10

# ---- 3d. full: noeviction and a tiny maxmemory ----
rcli flushall >/dev/null
rcli config set maxmemory-policy noeviction >/dev/null
rcli config set maxmemory 1200000 >/dev/null
e2e_start "$tmp/h.log" --bank-dir "$tmp/dh" --bank-remote "$url" --log-format json
h_pid=$pid h_port=$port
ask $h_port "$tmp/h.log" 1 "Redis full"
settle $h_port
[ "$(metric $h_port 'headstart_bank_remote_errors_total{reason="oom"}')" -ge 1 ] && pass "full: OOM counted" \
    || fail "full: $(curl -s http://127.0.0.1:$h_port/metrics | grep -E 'remote_(errors|uploads)')"
e2e_start "$tmp/i.log" --bank-dir "$tmp/di" --bank-remote "$url" --log-format json
ask $port "$tmp/i.log" 2 "a replica reading the full Redis"
e2e_stop $pid 10; e2e_stop $h_pid 10
rcli config set maxmemory 0 >/dev/null

# ---- 3e. values altered in Redis ----
# corrupt KIND: one manifest or chunk of the store made by a fresh upload of session 1, then
# a replica on a fresh dir asks session 2 (same head): never restored, exact, counted
corrupt_case() {
    rcli flushall >/dev/null
    rm -rf "$tmp/dj"
    e2e_start "$tmp/j.log" --bank-dir "$tmp/dj" --bank-remote "$url" --log-format json
    ask $port "$tmp/j.log" 1 "$1: upload" >/dev/null
    settle $port
    e2e_stop $pid 10
    case $1 in
    chunk-bytes)
        for k in $(rcli --scan --pattern 'headstart:hsb2:c:*'); do
            n=$(rcli strlen "$k"); head -c "$n" /dev/urandom >"$tmp/junk"; rcli -x set "$k" <"$tmp/junk" >/dev/null
        done ;;
    chunk-short)
        for k in $(rcli --scan --pattern 'headstart:hsb2:c:*'); do rcli setrange "$k" 0 x >/dev/null; rcli set "$k" short >/dev/null; done ;;
    manifest-byte)
        for k in $(rcli --scan --pattern 'headstart:hsb2:m:*'); do rcli setrange "$k" 40 Z >/dev/null; done ;;
    chunk-evicted)
        for k in $(rcli --scan --pattern 'headstart:hsb2:c:*'); do rcli del "$k" >/dev/null; done ;;
    esac
    rm -rf "$tmp/dk"
    e2e_start "$tmp/k.log" --bank-dir "$tmp/dk" --bank-remote "$url" --log-format json
    ask $port "$tmp/k.log" 2 "$1"
    src=$(lastreq "$tmp/k.log" cache_source)
    [ "$src" != remote ] && pass "$1: not restored from Redis ($src)" || fail "$1: restored from Redis"
    bad=$(( $(metric $port 'headstart_bank_remote_discarded_total{reason="manifest"}') + \
            $(metric $port 'headstart_bank_remote_discarded_total{reason="chunk"}') + \
            $(metric $port 'headstart_bank_remote_discarded_total{reason="blob"}') + \
            $(metric $port headstart_bank_remote_evicted_total) ))
    [ "$bad" -ge 1 ] && pass "$1: counted ($bad)" || fail "$1: nothing counted: $(curl -s http://127.0.0.1:$port/metrics | grep -E 'remote_(discarded|evicted|hits|misses)')"
    e2e_stop $pid 10
}
for c in chunk-bytes chunk-short manifest-byte chunk-evicted; do corrupt_case $c; done

# ---- 4. a password (AUTH): right, and wrong (the replica serves, the tier stays down) ----
rcli flushall >/dev/null
rcli config set requirepass 's3c@ret' >/dev/null
e2e_start "$tmp/p.log" --bank-dir "$tmp/dp" --bank-remote "redis://:s3c@ret@127.0.0.1:$rport" --log-format json
ask $port "$tmp/p.log" 1 "with the password: upload" >/dev/null
settle $port
[ "$(metric $port headstart_bank_remote_uploads_total)" -ge 1 ] && pass "password: uploads" || fail "password: no uploads"
grep -q 's3c@ret' "$tmp/p.log" && fail "password: printed in the log" || pass "password: never printed"
e2e_stop $pid 10
e2e_start "$tmp/q.log" --bank-dir "$tmp/dq" --bank-remote "redis://:wrong@127.0.0.1:$rport" --log-format json
ask $port "$tmp/q.log" 2 "a wrong password"
[ "$(metric $port headstart_bank_remote_up)" = 0 ] && [ "$(metric $port 'headstart_bank_remote_errors_total{reason="reply"}')" -ge 1 ] \
    && pass "wrong password: down, counted" || fail "wrong password: $(curl -s http://127.0.0.1:$port/metrics | grep remote_)"
e2e_stop $pid 10
rcli -a 's3c@ret' --no-auth-warning config set requirepass '' >/dev/null

e2e_stop $e_pid 10
[ $wrong = 0 ] && pass "0 wrong restores" || fail "$wrong wrong restores"
[ $failed_req = 0 ] && pass "0 failed requests" || fail "$failed_req failed requests"
finish
