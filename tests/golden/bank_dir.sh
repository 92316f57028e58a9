#!/bin/sh
# bank_dir.sh — one bank directory, several processes, hostile contents (issue [F15] items
# 5 and 7), with real `headstart serve` processes on a tiny random model (--bank-ram 1: no
# RAM tier, so every request reads the disk tier) and curl:
#   1. while server S1 writes: `bank ls|stats|verify` only read (they name S1's pid, change
#      nothing, exit 0); `bank gc` refuses, naming S1's pid; a second server S2 on the same
#      directory starts read-only, says so naming S1's pid, restores S1's entries from
#      disk, and writes nothing; S1's tier stays on and its later writes land (every entry
#      it counts is on disk);
#   2. when S1 exits, S2 takes the writer lock over and writes;
#   3. under server S3: a corrupt blob is discarded with a log line naming it and counted
#      in /metrics; a FIFO planted at a blob's name neither hangs the request nor /health
#      (discarded, counted, the FIFO left alone); a transient failure (blobs/ replaced by a
#      file) shows in /metrics at once as the tier disabled, and once blobs/ is back the
#      tier re-enables itself and writes again;
#   4. offline: index rows with keys "../x" and a 66-character key delete nothing outside
#      the directory and nothing of the entry they imitate; `bank verify` removes them,
#      reports them and the FIFO (foreign) with exit 1, and exits 0 once the FIFO is gone.
# Servers listen on 127.0.0.1 --port 0. Ends with "RESULT: N passed, N failed".
set -u
hs=${HEADSTART_BUILD:-build}/headstart
. "$(dirname "$0")/../e2e/lib/server.sh"
e2e_setup bank-dir curl jq python3
bank=$tmp/bank
head_json=tests/golden/data/bank/head.json

mk() { # NAME USER-TEXT [SYSTEM-SUFFIX]
    jq -c --arg u "$2" --arg s "${3:-}" '{model: "m", max_tokens: 4, temperature: 0, tools: .tools,
        messages: [{role: "system", content: (.system + $s)}, {role: "user", content: $u}]}' "$head_json" > "$tmp/$1.json"
}
mk r1 "List the files in src."
mk r2 "Explain the cache in two lines."
mk r3 "Where is the entry point?"
mk r4 "What does the bank keep?"
mk r5 "Name one test."
mk f1 "Hello." " Another project entirely."
mk f2 "Hello again." " Yet another project."
# post PORT NAME — prints the HTTP status; the body lands in $tmp/NAME.out
post() { curl -s --max-time 30 -o "$tmp/$2.out" -w '%{http_code}' -H 'Content-Type: application/json' \
         --data-binary "@$tmp/$2.json" "http://127.0.0.1:$1/v1/chat/completions"; }
cached() { jq -r '.usage.prompt_tokens_details.cached_tokens' "$tmp/$1.out" 2>/dev/null; }
# metric PORT NAME — the value of one sample ("" when absent)
metric() { curl -s --max-time 5 "http://127.0.0.1:$1/metrics" | awk -v n="$2" '$1 == n {print $2}'; }
# settle PORT — wait (bounded) until the disk tier has nothing pending
settle() {
    i=0
    while [ $i -lt 100 ] && [ "$(metric "$1" headstart_bank_disk_pending)" != 0 ]; do sleep 0.1; i=$((i + 1)); done
}
# wait_metric PORT NAME VALUE SECONDS — 0 once the sample equals VALUE
wait_metric() {
    i=0
    while [ $i -lt $(($4 * 10)) ]; do
        [ "$(metric "$1" "$2")" = "$3" ] && return 0
        sleep 0.1; i=$((i + 1))
    done
    return 1
}
bank() { "$hs" bank "$@" > "$tmp/o" 2> "$tmp/e"; rc=$?; }
j() { jq -c "$1" "$tmp/o"; }
tmp_count() { find "$bank/blobs" -name '*.hsb.tmp.*' 2>/dev/null | wc -l; }
files_bytes() { find "$bank/blobs" -type f -name '*.hsb' -exec stat -c %s {} + | awk '{s += $1} END {print s + 0}'; }
flip() { # file offset: xor one byte with 0xff
    b=$(od -An -tu1 -j"$2" -N1 "$1" | tr -d ' ')
    printf "$(printf '\\%03o' $((b ^ 255)))" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}
blob_of() { echo "$bank/blobs/$(echo "$1" | cut -c1-2)/$1.hsb"; }
t0=$(date +%s)

# ---- 1: a writer and everything else beside it
e2e_start "$tmp/s1.log" --bank-ram 1 --bank-dir "$bank"
p1=$port pid1=$pid
[ "$(post "$p1" r1)" = 200 ] || { fail "S1 r1: $(cat "$tmp/r1.out")"; finish; }
settle "$p1"
w1=$(metric "$p1" headstart_bank_disk_written_total)
[ "${w1:-0}" -ge 2 ] && pass "S1 wrote $w1 entries" || { fail "S1 wrote '${w1}'"; finish; }

bank ls --json --bank-dir "$bank"
if [ $rc = 0 ] && [ "$(j '[.read_only, .lock_holder_pid, .entries, (.list | length)]')" = "[true,$pid1,$w1,$w1]" ]; then
    pass "bank ls beside S1: read-only, names pid $pid1, lists its $w1 entries"
else fail "bank ls beside S1 (rc $rc): $(cat "$tmp/o") $(cat "$tmp/e")"; fi
bank stats --bank-dir "$bank"
[ $rc = 0 ] && grep -q "in use by process $pid1" "$tmp/o" && pass "bank stats says who holds the directory" \
    || fail "bank stats (rc $rc): $(cat "$tmp/o")"
bank verify --json --bank-dir "$bank"
if [ $rc = 0 ] && [ "$(j '[.verify.read_only, .verify.checked, .verify.removed, .verify.bad]')" = "[true,$w1,0,0]" ]; then
    pass "bank verify beside S1: read-only, $w1 checked, exit 0"
else fail "bank verify beside S1 (rc $rc): $(cat "$tmp/o") $(cat "$tmp/e")"; fi
bank gc --size 0 --bank-dir "$bank"
if [ $rc = 1 ] && grep -q "in use by process $pid1" "$tmp/e" && [ ! -s "$tmp/o" ]; then
    pass "bank gc beside S1 refuses: $(cut -c1-110 "$tmp/e")..."
else fail "bank gc beside S1 (rc $rc): $(cat "$tmp/o") $(cat "$tmp/e")"; fi

e2e_start "$tmp/s2.log" --bank-ram 1 --bank-dir "$bank"
p2=$port pid2=$pid
if grep -q "in use by process $pid1: this process only reads it" "$tmp/s2.log" &&
   [ "$(metric "$p2" headstart_bank_disk_read_only)" = 1 ] &&
   [ "$(metric "$p2" headstart_bank_disk_lock_holder_pid)" = "$pid1" ]; then
    pass "a second server on the directory starts read-only and says so (holder $pid1)"
else fail "S2 start: $(grep 'bank disk' "$tmp/s2.log") / read_only $(metric "$p2" headstart_bank_disk_read_only)"; fi
s=$(post "$p2" r2)
c2=$(cached r2)
if [ "$s" = 200 ] && [ "${c2:-0}" -gt 256 ] && [ "$(metric "$p2" headstart_bank_disk_written_total)" = 0 ] &&
   [ "$(metric "$p2" headstart_bank_disk_hits_total)" -ge 1 ]; then
    pass "S2 restores $c2 tokens from S1's entries and writes nothing"
else fail "S2 r2: status $s, cached '$c2', written $(metric "$p2" headstart_bank_disk_written_total)"; fi

[ "$(post "$p1" r2)" = 200 ] || fail "S1 r2"
[ "$(post "$p1" r3)" = 200 ] || fail "S1 r3"
settle "$p1"
w2=$(metric "$p1" headstart_bank_disk_written_total)
e1=$(metric "$p1" headstart_bank_disk_entries)
bank stats --json --bank-dir "$bank"
if [ "$(metric "$p1" headstart_bank_disk_enabled)" = 1 ] && [ "$(metric "$p1" headstart_bank_disk_io_errors_total)" = 0 ] &&
   [ "$w2" -gt "$w1" ] && [ "$(j .entries)" = "$e1" ] && [ "$(j .bytes)" = "$(files_bytes)" ] && [ "$(tmp_count)" = 0 ]; then
    pass "S1's tier stayed on through all that: $w2 written, its $e1 entries all on disk"
else fail "S1 after the neighbours: enabled $(metric "$p1" headstart_bank_disk_enabled), io errors $(metric "$p1" headstart_bank_disk_io_errors_total), written $w1 -> $w2, entries $e1 vs $(cat "$tmp/o"), files $(files_bytes)"; fi

# ---- 2: the writer goes, the reader takes over
e2e_stop "$pid1" 10 || fail "S1 exit status $?"
if wait_metric "$p2" headstart_bank_disk_read_only 0 10; then
    [ "$(post "$p2" r3)" = 200 ] || fail "S2 r3"
    [ "$(post "$p2" f1)" = 200 ] || fail "S2 f1"
    settle "$p2"
    w=$(metric "$p2" headstart_bank_disk_written_total)
    [ "${w:-0}" -ge 1 ] && grep -q "took the writer lock over" "$tmp/s2.log" \
        && pass "S1 gone: S2 took the writer lock over and wrote $w entries" || fail "S2 after take-over wrote '$w'"
else fail "S2 never took the lock over: $(grep 'bank disk' "$tmp/s2.log")"; fi
e2e_stop "$pid2" 10 || fail "S2 exit status $?"

# ---- 3: hostile contents under a running server
e2e_start "$tmp/s3.log" --bank-ram 1 --bank-dir "$bank"
p3=$port pid3=$pid
head_tok=$("$hs" render -m "$tmp/m" --request "$tmp/r4.json" --head 2>/dev/null)
bank ls --json --bank-dir "$bank"
hk=$(jq -r --argjson t "$head_tok" '[.list[] | select(.head and .tokens == $t)][0].key' "$tmp/o")
hbytes=$(j "[.list[] | select(.key == \"$hk\")][0].bytes")
[ -n "$hk" ] && [ "$hk" != null ] || { fail "no head entry: $(cat "$tmp/o")"; finish; }
flip "$(blob_of "$hk")" $((hbytes - 3)) # in its snapshot
s=$(post "$p3" r4)
if [ "$s" = 200 ] && grep -q "discarded entry $hk: bad checksum" "$tmp/s3.log" &&
   [ "$(metric "$p3" 'headstart_bank_disk_discarded_total{reason="checksum"}')" = 1 ]; then
    pass "a corrupt blob under serve: discarded with a log line naming it, counted in /metrics"
else fail "corrupt blob: status $s, log $(grep 'bank disk' "$tmp/s3.log" | tail -2), metric $(metric "$p3" 'headstart_bank_disk_discarded_total{reason="checksum"}')"; fi
settle "$p3"
bank ls --json --bank-dir "$bank"
hk=$(jq -r --argjson t "$head_tok" '[.list[] | select(.head and .tokens == $t)][0].key' "$tmp/o")
[ -n "$hk" ] && [ "$hk" != null ] || { fail "no head entry after r4: $(cat "$tmp/o")"; finish; }
fifo=$(blob_of "$hk")
rm -f "$fifo" && mkfifo "$fifo"
s=$(post "$p3" r5)
h=$(curl -s --max-time 5 -o /dev/null -w '%{http_code}' "http://127.0.0.1:$p3/health")
if [ "$s" = 200 ] && [ "$h" = 200 ] && [ -p "$fifo" ] && grep -q "discarded entry $hk: not a regular file" "$tmp/s3.log" &&
   [ "$(metric "$p3" 'headstart_bank_disk_discarded_total{reason="not_regular"}')" = 1 ]; then
    pass "a FIFO at a blob's name: the request answers (no hang), discarded and counted, the FIFO left alone"
else fail "FIFO: status $s, health $h, log $(grep 'bank disk' "$tmp/s3.log" | tail -2)"; fi
# a transient failure: blobs/ is briefly not a directory
settle "$p3"
mv "$bank/blobs" "$bank/blobs.away" && printf x > "$bank/blobs"
[ "$(post "$p3" f2)" = 200 ] || fail "S3 f2"
settle "$p3"
if [ "$(metric "$p3" headstart_bank_disk_enabled)" = 0 ]; then
    pass "/metrics shows the tier disabled right after the failure"
else fail "/metrics after the failure: enabled $(metric "$p3" headstart_bank_disk_enabled), log $(grep 'bank disk' "$tmp/s3.log" | tail -1)"; fi
rm -f "$bank/blobs" && mv "$bank/blobs.away" "$bank/blobs"
w0=$(metric "$p3" headstart_bank_disk_written_total)
if wait_metric "$p3" headstart_bank_disk_enabled 1 15 && [ "$(metric "$p3" headstart_bank_disk_reenabled_total)" = 1 ]; then
    mk f3 "And once more." " A third project."
    [ "$(post "$p3" f3)" = 200 ] || fail "S3 f3"
    settle "$p3"
    w=$(metric "$p3" headstart_bank_disk_written_total)
    [ "$w" -gt "$w0" ] && pass "the tier re-enabled itself ($(grep -c 're-enabled' "$tmp/s3.log") log line) and writes again ($w0 -> $w)" \
        || fail "after re-enabling: written $w0 -> $w"
else fail "the tier stayed off: $(grep 'bank disk' "$tmp/s3.log" | tail -2)"; fi
e2e_stop "$pid3" 10 || fail "S3 exit status $?"

# ---- 4: malformed index rows, offline
bank ls --json --bank-dir "$bank"
k1=$(jq -r '.list[0].key' "$tmp/o")
n_before=$(j .entries)
printf precious > "$tmp/x.hsb" # DIR/blobs/../../x.hsb, where the key "../x" points
python3 - "$bank/index.sqlite" "$k1" <<'EOF' || fail "sqlite insert"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("INSERT INTO entries VALUES('../x', '', 1, 0, 10, 0, 24, 40, 8, 1, 1, 0)")
c.execute("INSERT INTO entries SELECT key || 'ab', parent, fp, start, pos, kind, kv_row_bytes,"
          " snapshot_bytes, bytes, created_ms, last_use_ms, hits FROM entries WHERE key = ?", (sys.argv[2],))
c.commit()
EOF
bank stats --json --bank-dir "$bank"
[ $rc = 0 ] && [ "$(j '[.bad_rows, .entries]')" = "[2,$((n_before + 2))]" ] && [ -p "$fifo" ] \
    && pass "bank stats (read-only) counts the 2 malformed rows and touches nothing" || fail "stats with bad rows: $(cat "$tmp/o")"
bank verify --json --bank-dir "$bank"
if [ $rc = 1 ] && [ -e "$tmp/x.hsb" ] && [ -e "$(blob_of "$k1")" ] && [ "$(j '[.verify.bad_rows, .verify.foreign, .verify.read_only]')" = "[2,1,false]" ] &&
   [ "$(j .entries)" = "$n_before" ] && grep -q "malformed" "$tmp/e" && grep -q "did not make" "$tmp/e"; then
    pass "verify: the rows '../x' and a 66-character key removed (nothing outside or of the real entry deleted), they and the FIFO reported, exit 1"
else fail "verify with bad rows (rc $rc): $(cat "$tmp/o") $(cat "$tmp/e"); x.hsb $(ls "$tmp/x.hsb" 2>&1)"; fi
rm -f "$fifo"
bank verify --json --bank-dir "$bank"
[ $rc = 0 ] && [ "$(j '[.verify.bad, .verify.bad_rows, .verify.foreign]')" = "[0,0,0]" ] \
    && pass "verify after the FIFO is gone: clean, exit 0" || fail "verify at the end (rc $rc): $(cat "$tmp/o") $(cat "$tmp/e")"
e2e_sanitizer "$tmp"/s*.log && fail "sanitizer reports"
echo "total: $(($(date +%s) - t0)) s"
finish
