#!/bin/sh
# bank_cmd.sh — `headstart bank stats|ls|verify|gc` on a real bank directory (issue [F5]):
# one `headstart replay` of two sessions with the same ~1.4k-token head
# (tests/golden/data/bank/head.json) on a tiny qwen35 q8_0 model fills --bank-dir; then
#   1. stats/ls (--json and text): the counts agree with the replay's disk stats and with
#      each other, the bytes are the blob files' sizes counted once, session B's entries
#      build on the head entry (stored once: unshared_bytes > bytes), every chain is whole;
#   2. verify: a clean store verifies (exit 0); a flipped byte in a leaf blob is found
#      (exit 1, that entry removed, the rest good); a flipped byte in the shared head blob
#      takes every entry that builds on it;
#   3. gc --size X: bytes <= X, never a broken chain; down to the head entry's size only
#      the head remains, and a new process still restores exactly at the head from it
#      (output identical to --no-bank); gc without --size removes an orphan file only;
#   4. stats on a format-1 directory reports it and changes nothing; gc clears it with one
#      log line; bad arguments exit 2 with a message naming the problem; an unusable
#      directory exits 1.
# (tests/golden/bank_dir.sh runs these commands next to a live server.)
# Prints RESULT: N passed, N failed. Run from the repository root with HEADSTART_BUILD set.
set -u
build=${HEADSTART_BUILD:-build}
hs=$build/headstart
head_json=tests/golden/data/bank/head.json
passed=0 failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
pass() { echo "ok: $*"; passed=$((passed + 1)); }
finish() { echo "RESULT: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }
tmp=$(mktemp -d /tmp/hs-bank-cmd.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
XDG_CACHE_HOME=$tmp/xdg
export XDG_CACHE_HOME
command -v jq >/dev/null || { fail "jq is missing (make deps)"; finish; }
command -v od >/dev/null && command -v dd >/dev/null || { fail "od/dd missing"; finish; }

"$hs" mkmodel --arch qwen35 --seed 3 --dtype q8_0 --out "$tmp/m.gguf" >/dev/null 2>&1 || { fail "mkmodel"; finish; }
req() {
    jq -c --arg u "$1" '
      {api: "openai", body: {model: "any", max_tokens: 6, tools: .tools,
        messages: [{role: "system", content: .system}, {role: "user", content: $u}]}}' "$head_json"
}
req "Find every TODO in src/ and list them." > "$tmp/ab.jsonl"
req "Explain what the cache module does, briefly." > "$tmp/b.jsonl"
cat "$tmp/b.jsonl" >> "$tmp/ab.jsonl"
bank=$tmp/bank

# bank SUB ARGS...: stdout name-less into $tmp/o, stderr into $tmp/e, exit status in $rc
bank() { "$hs" bank "$@" > "$tmp/o" 2> "$tmp/e"; rc=$?; }
j() { jq -c "$1" "$tmp/o"; }
flip() { # file offset: xor one byte with 0xff
    b=$(od -An -tu1 -j"$2" -N1 "$1" | tr -d ' ')
    printf "$(printf '\\%03o' $((b ^ 255)))" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}
files_bytes() { # total size of the blob files under $1
    find "$1/blobs" -type f -name '*.hsb' -exec stat -c %s {} + | awk '{s += $1} END {print s + 0}'
}

t0=$(date +%s)
"$hs" replay -m "$tmp/m.gguf" --requests "$tmp/ab.jsonl" --threads 2 --bank-dir "$bank" \
    > "$tmp/r.out" 2> "$tmp/r.err" || { fail "replay"; cat "$tmp/r.err"; finish; }
written=$(tail -1 "$tmp/r.err" | jq .bank_disk_stats.written)
rbytes=$(tail -1 "$tmp/r.err" | jq .bank_disk_stats.bytes)
head_tok=$(head -1 "$tmp/r.out" | jq .head_tokens)
[ "${written:-0}" -gt 2 ] && [ "$head_tok" -gt 256 ] || { fail "replay banked $written entries, head $head_tok"; finish; }

# 1: stats and ls
bank stats --json --bank-dir "$bank"
if [ $rc = 0 ] && [ "$(j .entries)" = "$written" ] && [ "$(j .bytes)" = "$rbytes" ] &&
   [ "$(j .bytes)" = "$(files_bytes "$bank")" ] && [ "$(j .open.rows)" = "$written" ] &&
   [ "$(j '.open.rows_dropped + .open.orphans_removed + .open.tmp_removed')" = 0 ]; then
    pass "stats --json: $written entries, $rbytes bytes = the blob files' sizes, clean reconcile"
else fail "stats --json (rc $rc): $(cat "$tmp/o") vs written $written, bytes $rbytes, files $(files_bytes "$bank")"; fi
unshared=$(j .unshared_bytes)
bank stats --bank-dir "$bank"
if [ $rc = 0 ] && grep -q "^entries $written, .*($rbytes bytes; " "$tmp/o" && grep -q "^at open: index rows $written," "$tmp/o"; then
    pass "stats (text) says the same"
else fail "stats text (rc $rc): $(cat "$tmp/o")"; fi

bank ls --json --bank-dir "$bank"
cp "$tmp/o" "$tmp/ls.json"
n=$(j '.list | length'); sum=$(j '[.list[].bytes] | add')
head_key=$(jq -r --arg h "$head_tok" '[.list[] | select(.head and .tokens == ($h | tonumber))][0].key' "$tmp/o")
head_bytes=$(jq -r --arg k "$head_key" '.list[] | select(.key == $k) | .bytes' "$tmp/o")
kids=$(jq -r --arg k "$head_key" '[.list[] | select(.parent == $k)] | length' "$tmp/o")
if [ $rc = 0 ] && [ "$n" = "$written" ] && [ "$sum" = "$rbytes" ] && [ "$head_key" != null ] &&
   [ "$(jq -r --arg k "$head_key" '.list[] | select(.key == $k) | "\(.start) \(.children)"' "$tmp/o")" = "0 $kids" ] &&
   [ "$kids" -ge 2 ]; then
    pass "ls --json: $n entries, bytes add up; the head entry (0..$head_tok) is the parent of $kids entries (both sessions)"
else fail "ls --json (rc $rc): n $n, sum $sum, head $head_key, kids $kids: $(cat "$tmp/o")"; fi
# every chain is whole: chain_bytes = own bytes + the parent's chain_bytes; start = parent's tokens
bad_chains=$(jq '[.list as $l | $l[] | . as $e | select(.parent != "") |
    ($l[] | select(.key == $e.parent)) as $p |
    select($e.start != $p.tokens or $e.chain_bytes != $e.bytes + $p.chain_bytes or $e.tokens <= $e.start)] | length' "$tmp/o")
roots_ok=$(jq '[.list[] | select(.parent == "") | select(.start != 0 or .chain_bytes != .bytes)] | length' "$tmp/o")
orphans=$(jq '[.list as $l | $l[] | select(.parent != "") | .parent as $p | select([$l[] | select(.key == $p)] | length == 0)] | length' "$tmp/o")
if [ "$bad_chains" = 0 ] && [ "$roots_ok" = 0 ] && [ "$orphans" = 0 ] && [ "$unshared" -gt "$rbytes" ] &&
   [ "$unshared" = "$(j '[.list[].chain_bytes] | add')" ]; then
    pass "ls --json: chains whole; shared stretches stored once ($rbytes bytes on disk, $unshared if each entry stood alone)"
else fail "chains: bad $bad_chains, roots $roots_ok, orphans $orphans, unshared $unshared vs $rbytes"; fi
bank ls --bank-dir "$bank"
if [ $rc = 0 ] && [ "$(grep -c '^[0-9a-f]\{16\}  ' "$tmp/o")" = "$written" ] && grep -q "^key .*chain bytes" "$tmp/o" &&
   grep "^$(echo "$head_key" | cut -c1-16) " "$tmp/o" | grep -q " head  *yes "; then
    pass "ls (text): $written entry lines, the head marked"
else fail "ls text (rc $rc): $(cat "$tmp/o")"; fi

# 2: verify
bank verify --json --bank-dir "$bank"
if [ $rc = 0 ] && [ "$(j '[.verify.checked, .verify.good, .verify.removed]')" = "[$written,$written,0]" ]; then
    pass "verify --json: $written checked, all good, exit 0"
else fail "verify clean (rc $rc): $(cat "$tmp/o") $(cat "$tmp/e")"; fi
cp -r "$bank" "$tmp/bank2"
leaf=$(jq -r '[.list[] | select(.children == 0)][0] | "\(.key) \(.bytes)"' "$tmp/ls.json")
lk=${leaf% *}; lb=${leaf#* }
lf=$bank/blobs/$(echo "$lk" | cut -c1-2)/$lk.hsb
flip "$lf" $((lb - 3)) # inside its snapshot
bank verify --json --bank-dir "$bank"
if [ $rc = 1 ] && [ "$(j '[.verify.checked, .verify.good, .verify.removed, .verify.removed_bytes]')" = "[$written,$((written - 1)),1,$lb]" ] &&
   grep -q "removed" "$tmp/e" && [ ! -e "$lf" ]; then
    pass "verify finds a flipped byte in a leaf blob: exit 1, that entry removed, $((written - 1)) good"
else fail "verify after a flip (rc $rc): $(cat "$tmp/o") $(cat "$tmp/e")"; fi
bank verify --json --bank-dir "$bank"
[ $rc = 0 ] && [ "$(j .verify.removed)" = 0 ] && pass "verify again: clean, exit 0" || fail "verify again (rc $rc): $(cat "$tmp/o")"
hf=$tmp/bank2/blobs/$(echo "$head_key" | cut -c1-2)/$head_key.hsb
flip "$hf" $((160 + 4 * 100)) # in the shared head's KV rows
bank verify --json --bank-dir "$tmp/bank2"
deps=$(jq --arg k "$head_key" '[.list as $l | $l[] | select(.key == $k or .parent == $k or
        (.parent as $p | [$l[] | select(.key == $p and .parent == $k)] | length > 0))] | length' "$tmp/ls.json")
if [ $rc = 1 ] && [ "$(j .verify.removed)" -ge "$deps" ] && [ "$(j .verify.removed)" -ge 3 ] &&
   [ "$(j '.verify.good + .verify.removed')" = "$written" ]; then
    pass "a flipped byte in the shared head blob removes the $(j .verify.removed) entries that build on it"
else fail "verify shared head (rc $rc): $(cat "$tmp/o"), deps >= $deps"; fi

# 3: gc
before=$(files_bytes "$bank")
x=$((head_bytes + (before - head_bytes) / 2)) # room for the head and about half the rest
bank gc --size "$x" --json --bank-dir "$bank"
after=$(files_bytes "$bank")
if [ $rc = 0 ] && [ "$(j .gc.bytes)" -le "$x" ] && [ "$(j .gc.bytes)" = "$after" ] && [ "$after" -gt 0 ] &&
   [ "$(j .gc.freed_bytes)" = $((before - after)) ] && [ "$(j .gc.target_bytes)" = "$x" ]; then
    pass "gc --size $x: $before -> $after bytes"
else fail "gc --size $x (rc $rc): $(cat "$tmp/o"), files $after"; fi
bank ls --json --bank-dir "$bank"
broken=$(jq '[.list as $l | $l[] | select(.parent != "") | .parent as $p | select([$l[] | select(.key == $p)] | length == 0)] | length' "$tmp/o")
bank verify --json --bank-dir "$bank"
[ "$broken" = 0 ] && [ $rc = 0 ] && pass "after gc: no entry lost its parent, verify clean" || fail "after gc: broken $broken, verify rc $rc $(cat "$tmp/o")"
bank gc --size "$head_bytes" --json --bank-dir "$bank"
bank ls --json --bank-dir "$bank"
if [ "$(j '[.entries, .list[0].key]')" = "[1,\"$head_key\"]" ]; then
    pass "gc --size $head_bytes (the head blob's size): only the head entry remains"
else fail "gc to the head: $(cat "$tmp/o")"; fi
"$hs" replay -m "$tmp/m.gguf" --requests "$tmp/b.jsonl" --threads 2 --no-bank > "$tmp/ref.out" 2>/dev/null &&
"$hs" replay -m "$tmp/m.gguf" --requests "$tmp/b.jsonl" --threads 2 --bank-dir "$bank" > "$tmp/r2.out" 2>/dev/null
if [ "$(jq -c '[.cached_tokens, .cache_source]' "$tmp/r2.out")" = "[$head_tok,\"disk\"]" ] &&
   [ "$(jq -c '[.first_logits_sha256, .output_ids]' "$tmp/r2.out")" = "$(jq -c '[.first_logits_sha256, .output_ids]' "$tmp/ref.out")" ]; then
    pass "a new process restores $head_tok tokens from the gc'd store, output identical to --no-bank"
else fail "restore after gc: $(jq -c '[.cached_tokens, .cache_source]' "$tmp/r2.out")"; fi
mkdir -p "$bank/blobs/ab"
printf junk > "$bank/blobs/ab/ab$(printf '%062d' 0).hsb"
nbefore=$(files_bytes "$bank")
bank gc --json --bank-dir "$bank"
if [ $rc = 0 ] && [ "$(j '[.open.orphans_removed, .gc.target_bytes]')" = "[1,null]" ] &&
   [ "$(j .gc.bytes)" = "$(files_bytes "$bank")" ] && [ $((nbefore - 4)) = "$(files_bytes "$bank")" ]; then
    pass "gc without --size removes the orphan file only"
else fail "gc orphans (rc $rc): $(cat "$tmp/o")"; fi

# 4: an older format, bad arguments, an unusable directory
old=$tmp/old
mkdir -p "$old/blobs/cd"
printf 'HSBANKB1' > "$old/blobs/cd/cd$(printf '%062d' 1).blob"
sql="CREATE TABLE meta(k TEXT PRIMARY KEY, v TEXT); INSERT INTO meta VALUES('format', '1');
     CREATE TABLE entries(key TEXT PRIMARY KEY, fp INTEGER, pos INTEGER, kind INTEGER, kv_row_bytes INTEGER,
       snapshot_bytes INTEGER, bytes INTEGER, created_ms INTEGER, last_use_ms INTEGER, hits INTEGER);
     INSERT INTO entries VALUES('cd$(printf '%062d' 1)', 1, 10, 0, 24, 40, 8, 1, 1, 0);"
if command -v sqlite3 >/dev/null; then echo "$sql" | sqlite3 "$old/index.sqlite"
else python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.executescript(sys.argv[2]); c.commit()' "$old/index.sqlite" "$sql"; fi
bank stats --json --bank-dir "$old"
if [ $rc = 0 ] && [ "$(j '[.entries, .old_format, .read_only, .open.old_format_removed]')" = "[0,true,true,0]" ] &&
   [ -e "$old/blobs/cd/cd$(printf '%062d' 1).blob" ]; then
    pass "stats on a format-1 directory says so and changes nothing (it only reads)"
else fail "format 1 stats (rc $rc): $(cat "$tmp/o") / $(cat "$tmp/e")"; fi
bank gc --json --bank-dir "$old"
if [ $rc = 0 ] && [ "$(j '[.entries, .open.rows, .open.old_format_removed]')" = "[0,0,1]" ] &&
   [ "$(grep -c 'format 1' "$tmp/e")" = 1 ] && [ ! -e "$old/blobs/cd/cd$(printf '%062d' 1).blob" ]; then
    pass "gc clears a format-1 directory with one log line: $(grep 'format 1' "$tmp/e" | cut -c1-100)..."
else fail "format 1 gc (rc $rc): $(cat "$tmp/o") / $(cat "$tmp/e")"; fi
badarg() { # want-substring args...
    want=$1; shift
    bank "$@"
    if [ $rc = 2 ] && grep -q -- "$want" "$tmp/e" && [ ! -s "$tmp/o" ]; then pass "bank $*: exit 2, '$want'"
    else fail "bank $*: rc $rc, stderr $(cat "$tmp/e")"; fi
}
badarg "need one of stats, ls, verify, gc" --bank-dir "$bank"
badarg "unknown subcommand 'frob'" frob --bank-dir "$bank"
badarg "one subcommand only" ls gc --bank-dir "$bank"
badarg "unknown option '--frob'" stats --frob --bank-dir "$bank"
badarg "--bank-dir needs a value" ls --bank-dir
badarg "--size wants a size like 10G" gc --size banana --bank-dir "$bank"
badarg "--size is for gc" stats --size 1G --bank-dir "$bank"
printf x > "$tmp/afile"
bank stats --bank-dir "$tmp/afile"
if [ $rc = 1 ] && grep -q "afile" "$tmp/e"; then pass "a --bank-dir that is a file: exit 1 naming it"
else fail "bank dir is a file: rc $rc, $(cat "$tmp/e")"; fi
echo "total: $(($(date +%s) - t0)) s"
finish
