#!/bin/sh
# bank_remote_cmd.sh — `headstart bank --remote URL stats|ls|verify|gc` on a real Redis
# (issue [F13]; tests/golden/bank_cmd.sh is the same for a directory). The test starts its
# own redis-server on a unix socket in its temp dir (no TCP, no persistence) and stops it.
# One `headstart replay --bank-dir D --bank-remote unix://SOCK` of two sessions with the same
# ~1.4k-token head (tests/golden/data/bank/head.json) on a tiny qwen35 q8_0 model uploads
# the disk's entries (replay drains the uploads at exit); then
#   1. stats/ls (--json and text) agree with the disk: as many manifests as entries, the
#      same keys, the chunk bytes = the disk's blob bytes, one position per entry; session
#      B's entries build on the head's manifest; every chain whole, sorted by position;
#   2. verify: clean (exit 0); a chunk altered in place (SETRANGE), another truncated (SET
#      to its first 1000 bytes), one deleted: each found (exit 1) and removed with the
#      entries building on it (--dry-run first: found, nothing removed); then clean again;
#   3. gc: an orphan chunk made by hand, the orphan verify left, a manifest that does not
#      decode, a stale position and a missing one: --dry-run counts them and changes
#      nothing; gc keeps orphans younger than --min-idle (60 s), removes them with
#      --min-idle 0, fixes the positions; under allkeys-lfu an orphan is kept (no idle
#      time) and said so; the eviction-policy warning follows CONFIG SET; a new process
#      restores from what is left exactly as --no-bank computes; deleting the head's
#      manifest breaks every chain and gc empties the namespace;
#   4. --bank-dir with --remote reports both; another --remote-prefix sees nothing; bad
#      arguments exit 2 naming the problem; an unreachable Redis exits 1 naming the URL.
# Prints RESULT: N passed, N failed. Run from the repository root with HEADSTART_BUILD set.
set -u
build=${HEADSTART_BUILD:-build}
hs=$build/headstart
head_json=tests/golden/data/bank/head.json
passed=0 failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
pass() { echo "ok: $*"; passed=$((passed + 1)); }
finish() { echo "RESULT: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }
tmp=$(mktemp -d /tmp/hs-bank-remote.XXXXXX)
redis_pid=
cleanup() {
    if [ -n "$redis_pid" ]; then kill "$redis_pid" 2>/dev/null; wait "$redis_pid" 2>/dev/null; fi
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
XDG_CACHE_HOME=$tmp/xdg
export XDG_CACHE_HOME
command -v jq >/dev/null || { fail "jq is missing (make deps)"; finish; }
command -v redis-server >/dev/null && command -v redis-cli >/dev/null || { fail "redis-server/redis-cli missing (make deps)"; finish; }

sock=$tmp/r.sock
url=unix://$sock
redis-server --port 0 --unixsocket "$sock" --save '' --appendonly no --dir "$tmp" --logfile "$tmp/redis.log" &
redis_pid=$!
rc() { redis-cli -s "$sock" "$@"; }
i=0
until rc ping >/dev/null 2>&1; do
    i=$((i + 1)); [ $i -gt 100 ] && { fail "redis-server did not start: $(cat "$tmp/redis.log")"; finish; }
    sleep 0.05
done

"$hs" mkmodel --arch qwen35 --seed 3 --dtype q8_0 --out "$tmp/m.gguf" >/dev/null 2>&1 || { fail "mkmodel"; finish; }
req() {
    jq -c --arg u "$1" '
      {api: "openai", body: {model: "any", max_tokens: 6, tools: .tools,
        messages: [{role: "system", content: .system}, {role: "user", content: $u}]}}' "$head_json"
}
req "Find every TODO in src/ and list them." > "$tmp/a.jsonl"
req "Explain what the cache module does, briefly." > "$tmp/b.jsonl"
cat "$tmp/a.jsonl" "$tmp/b.jsonl" > "$tmp/ab.jsonl"
bank=$tmp/bank

# bank ARGS...: stdout into $tmp/o, stderr into $tmp/e, exit status in $rc
bank() { "$hs" bank "$@" > "$tmp/o" 2> "$tmp/e"; rc=$?; }
j() { jq -c "$1" "$tmp/o"; }
chunk_of() { # ls.json key-filter -> the name of that entry's first chunk
    echo "headstart:hsb2:c:$(jq -r "[.remote.list[] | select($1)][0].chunk_ids[0]" "$tmp/ls.json")"
}

t0=$(date +%s)
"$hs" replay -m "$tmp/m.gguf" --requests "$tmp/ab.jsonl" --threads 2 --bank-dir "$bank" --bank-remote "$url" \
    > "$tmp/r.out" 2> "$tmp/r.err" || { fail "replay"; cat "$tmp/r.err"; finish; }
written=$(tail -1 "$tmp/r.err" | jq .bank_disk_stats.written)
rbytes=$(tail -1 "$tmp/r.err" | jq .bank_disk_stats.bytes)
head_tok=$(head -1 "$tmp/r.out" | jq .head_tokens)
[ "${written:-0}" -gt 3 ] && [ "$head_tok" -gt 256 ] || { fail "replay banked $written entries, head $head_tok"; finish; }

# 1: stats and ls
bank stats --json --remote "$url"
if [ $rc = 0 ] && [ "$(j '[.remote.manifests, .remote.bytes, .remote.position_sets, .remote.positions]')" = "[$written,$rbytes,1,$written]" ] &&
   [ "$(j '.remote | [.bad_manifests, .orphan_chunks, .missing_chunks, .broken_chains, .unfindable, .stale_positions, .foreign_keys]')" = "[0,0,0,0,0,0,0]" ] &&
   [ "$(j .remote.chunks)" -le "$written" ] && [ "$(j .remote.url)" = "\"$url\"" ] && [ "$(j .entries)" = null ]; then
    pass "stats --json: $written manifests, $rbytes chunk bytes (= the disk's blob bytes), one position each, nothing orphaned or missing"
else fail "stats --json (rc $rc): $(cat "$tmp/o") vs written $written, bytes $rbytes"; fi
if [ "$(j .remote.redis.maxmemory_policy)" = '"noeviction"' ] && [ "$(j .remote.redis.maxmemory)" = 0 ] &&
   [ "$(j .remote.redis.used_memory)" -gt "$rbytes" ] && j .remote.warning | grep -q "noeviction" &&
   grep -q "warning: .*noeviction" "$tmp/e"; then
    pass "stats --json: Redis's maxmemory 0, policy noeviction, used_memory; a warning that uploads will get OOM"
else fail "stats redis settings: $(j .remote.redis) $(j .remote.warning)"; fi
unshared=$(j .remote.unshared_bytes)
bank stats --remote "$url"
if [ $rc = 0 ] && grep -q "^manifests $written, chunks [0-9]*, .*($rbytes bytes; .*position sets 1 ($written positions)" "$tmp/o" &&
   grep -q "^redis: maxmemory 0 (no limit), maxmemory-policy noeviction" "$tmp/o" && grep -q "^warning: " "$tmp/o"; then
    pass "stats (text) says the same"
else fail "stats text (rc $rc): $(cat "$tmp/o")"; fi

bank ls --json --remote "$url"
cp "$tmp/o" "$tmp/ls.json"
"$hs" bank ls --json --bank-dir "$bank" > "$tmp/dls.json" 2>/dev/null
n=$(j '.remote.list | length')
head_key=$(jq -r --arg h "$head_tok" '[.remote.list[] | select(.head and .tokens == ($h | tonumber))][0].key' "$tmp/ls.json")
kids=$(jq -r --arg k "$head_key" '[.remote.list[] | select(.parent == $k)] | length' "$tmp/ls.json")
if [ $rc = 0 ] && [ "$n" = "$written" ] && [ "$(j '[.remote.list[].bytes] | add')" = "$rbytes" ] &&
   [ "$(j '[.remote.list[].key] | sort')" = "$(jq -c '[.list[].key] | sort' "$tmp/dls.json")" ] &&
   [ "$(j '[.remote.list[] | [.key, .parent, .start, .tokens, .bytes]] | sort')" = "$(jq -c '[.list[] | [.key, .parent, .start, .tokens, .bytes]] | sort' "$tmp/dls.json")" ] &&
   [ "$head_key" != null ] && [ "$kids" -ge 2 ] &&
   [ "$(jq -r --arg k "$head_key" '.remote.list[] | select(.key == $k) | "\(.start) \(.children)"' "$tmp/ls.json")" = "0 $kids" ]; then
    pass "ls --json: the disk's $n entries (keys, parents, stretches, bytes); the head's manifest (0..$head_tok) is the parent of $kids (both sessions)"
else fail "ls --json (rc $rc): n $n, head $head_key, kids $kids: $(cat "$tmp/o")"; fi
bad_chains=$(jq '[.remote.list as $l | $l[] | . as $e | select(.parent != "") |
    ($l[] | select(.key == $e.parent)) as $p |
    select($e.start != $p.tokens or $e.chain_bytes != $e.bytes + $p.chain_bytes or $e.chain_blobs != $p.chain_blobs + 1)] | length' "$tmp/ls.json")
if [ "$bad_chains" = 0 ] && [ "$(j '[.remote.list[] | select(.chain_broken)] | length')" = 0 ] &&
   [ "$(j '[.remote.list[] | select(.parent == "") | select(.start != 0 or .chain_bytes != .bytes)] | length')" = 0 ] &&
   [ "$(j '[.remote.list[] | [.fingerprint, .tokens]]')" = "$(j '[.remote.list[] | [.fingerprint, .tokens]] | sort')" ] &&
   [ "$unshared" = "$(j '[.remote.list[].chain_bytes] | add')" ] && [ "$unshared" -gt "$rbytes" ]; then
    pass "ls --json: every chain whole, sorted by fingerprint and position; shared stretches stored once ($rbytes bytes, $unshared if unshared)"
else fail "ls chains: bad $bad_chains: $(cat "$tmp/o")"; fi
bank ls --remote "$url"
if [ $rc = 0 ] && [ "$(grep -c '^[0-9a-f]\{16\}  ' "$tmp/o")" = "$written" ] && grep -q "^key .*chain bytes" "$tmp/o" &&
   grep "^$(echo "$head_key" | cut -c1-16) " "$tmp/o" | grep -q " head  *yes .* whole$"; then
    pass "ls (text): $written manifest lines, the head marked"
else fail "ls text (rc $rc): $(cat "$tmp/o")"; fi

# 2: verify
bank verify --json --remote "$url"
if [ $rc = 0 ] && [ "$(j '.remote.verify | [.checked, .good, .bad, .removed]')" = "[$written,$written,0,0]" ]; then
    pass "verify --json: $written entries, every chunk, blob and key good, exit 0"
else fail "verify clean (rc $rc): $(cat "$tmp/o") $(cat "$tmp/e")"; fi
# the two leaves: session A's (3 blobs deep) and session B's (4: it hangs below the diverge point)
leaf_a=$(jq -r '[.remote.list[] | select(.children == 0 and .chain_blobs == 3)][0].key' "$tmp/ls.json")
leaf_b=$(jq -r '[.remote.list[] | select(.children == 0 and .chain_blobs == 4)][0].key' "$tmp/ls.json")
div=$(jq -r '[.remote.list[] | select(.kind == "diverge")][0].key' "$tmp/ls.json")
[ "$leaf_a" != null ] && [ "$leaf_b" != null ] && [ "$div" != null ] || { fail "unexpected tree: $(cat "$tmp/ls.json")"; finish; }
ca=$(chunk_of ".key == \"$leaf_a\"")
len=$(rc strlen "$ca")
rc setrange "$ca" $((len - 3)) xyz > /dev/null   # inside its snapshot: same length, other bytes
bank verify --json --dry-run --remote "$url"
if [ $rc = 1 ] && [ "$(j '.remote.verify | [.checked, .good, .bad, .bad_chunks, .removed, .removed_chunks, .dry_run]')" = "[$written,$((written - 1)),1,1,0,0,true]" ] &&
   [ "$(rc exists "headstart:hsb2:m:$leaf_a")" = 1 ] && grep -q "$leaf_a.*bytes do not match its id" "$tmp/e"; then
    pass "verify --dry-run finds a chunk altered in place (SETRANGE): exit 1, nothing removed"
else fail "verify --dry-run (rc $rc): $(cat "$tmp/o") $(cat "$tmp/e")"; fi
bank verify --json --remote "$url"
if [ $rc = 1 ] && [ "$(j '.remote.verify | [.bad, .bad_chunks, .removed, .removed_chunks, .positions_removed]')" = "[1,1,1,1,1]" ] &&
   [ "$(rc exists "headstart:hsb2:m:$leaf_a" "$ca")" = 0 ] && grep -q "removed" "$tmp/e"; then
    pass "verify removes that entry's manifest, the altered chunk and its position: exit 1"
else fail "verify altered (rc $rc): $(cat "$tmp/o") $(cat "$tmp/e")"; fi
cb=$(chunk_of ".key == \"$leaf_b\"")
rc --raw get "$cb" | head -c 1000 > "$tmp/short"
rc -x set "$cb" < "$tmp/short" > /dev/null
bank verify --json --remote "$url"
if [ $rc = 1 ] && [ "$(j '.remote.verify | [.checked, .bad, .bad_chunks, .removed, .removed_chunks]')" = "[$((written - 1)),1,1,1,1]" ] &&
   grep -q "$leaf_b.*wrong length" "$tmp/e" && [ "$(rc exists "headstart:hsb2:m:$leaf_b")" = 0 ]; then
    pass "verify finds a truncated chunk (its first 1000 bytes): exit 1, removed"
else fail "verify truncated (rc $rc): $(cat "$tmp/o") $(cat "$tmp/e")"; fi
cd_=$(chunk_of ".key == \"$div\"")
rc del "$cd_" > /dev/null
bank verify --json --remote "$url"
if [ $rc = 1 ] && [ "$(j '.remote.verify | [.checked, .bad, .missing_chunks, .bad_chunks, .removed, .removed_chunks]')" = "[$((written - 2)),2,1,0,2,0]" ] &&
   grep -q "$div.*chunk 1 of 1: missing" "$tmp/e"; then
    pass "verify finds a deleted chunk: that entry and the one building on it removed, exit 1"
else fail "verify deleted chunk (rc $rc): $(cat "$tmp/o") $(cat "$tmp/e")"; fi
left=$((written - 4))
bank verify --json --remote "$url"
if [ $rc = 0 ] && [ "$(j '.remote.verify | [.checked, .good, .bad]')" = "[$left,$left,0]" ]; then
    pass "verify again: $left entries, clean, exit 0"
else fail "verify again (rc $rc): $(cat "$tmp/o")"; fi
bank stats --json --remote "$url"
if [ "$(j '.remote | [.manifests, .positions, .stale_positions, .unfindable, .missing_chunks, .orphan_chunks]')" = "[$left,$left,0,0,0,1]" ]; then
    pass "after verify: $left manifests, their $left positions only; one orphan chunk (of the entry removed below the deleted one)"
else fail "stats after verify: $(cat "$tmp/o")"; fi

# 3: gc
fp=$(jq -r '.remote.list[0].fingerprint' "$tmp/ls.json")
orphan=headstart:hsb2:c:$(printf '%032d' 7)
rc set "$orphan" "a chunk no manifest names" > /dev/null
rc set "headstart:hsb2:m:$(printf 'ab%.0s' $(seq 32))" "not a manifest" > /dev/null
rc zadd "headstart:hsb2:p:$fp" 99999 99999 > /dev/null
rc zrem "headstart:hsb2:p:$fp" "$head_tok" > /dev/null
bank stats --json --remote "$url"
before=$(j 'del(.remote.redis.used_memory)')
if [ "$(j '.remote | [.manifests, .bad_manifests, .orphan_chunks, .stale_positions, .unfindable]')" = "[$left,1,2,1,1]" ]; then
    pass "stats sees 2 orphan chunks, 1 undecodable manifest, 1 stale position, 1 manifest missing from its set"
else fail "stats before gc: $(cat "$tmp/o")"; fi
bank gc --json --dry-run --min-idle 0 --remote "$url"
if [ $rc = 0 ] && [ "$(j '.remote.gc | [.orphan_chunks, .removed_chunks, .removed_manifests, .bad_manifests, .positions_added, .positions_removed, .dry_run]')" = "[2,2,1,1,1,1,true]" ]; then
    bank stats --json --remote "$url"
    [ "$(j 'del(.remote.redis.used_memory)')" = "$before" ] && pass "gc --dry-run counts it all and changes nothing" || fail "gc --dry-run changed: $(cat "$tmp/o")"
else fail "gc --dry-run (rc $rc): $(cat "$tmp/o") $(cat "$tmp/e")"; fi
bank gc --json --remote "$url"
if [ $rc = 0 ] && [ "$(j '.remote.gc | [.min_idle_s, .orphan_chunks, .removed_chunks, .young_chunks, .removed_manifests, .positions_added, .positions_removed]')" = "[60,2,0,2,1,1,1]" ] &&
   [ "$(rc exists "$orphan")" = 1 ]; then
    pass "gc keeps orphans idle < 60 s (perhaps an upload in progress); removes the undecodable manifest, fixes the positions"
else fail "gc default (rc $rc): $(cat "$tmp/o") $(cat "$tmp/e")"; fi
bank gc --json --min-idle 0 --remote "$url"
if [ $rc = 0 ] && [ "$(j '.remote.gc | [.orphan_chunks, .removed_chunks, .young_chunks, .removed_manifests, .positions_added, .positions_removed]')" = "[2,2,0,0,0,0]" ] &&
   [ "$(rc exists "$orphan")" = 0 ]; then
    "$hs" bank ls --json --remote "$url" > "$tmp/ls2.json" 2>/dev/null
    bank stats --json --remote "$url"
    if [ "$(j '.remote | [.manifests, .bad_manifests, .orphan_chunks, .stale_positions, .unfindable, .positions]')" = "[$left,0,0,0,0,$left]" ] &&
       [ "$(j .remote.bytes)" = "$(jq '[.remote.list[].bytes] | add' "$tmp/ls2.json")" ]; then
        pass "gc --min-idle 0 removes both orphans; the store is clean (its bytes are its manifests' blobs)"
    else fail "stats after gc: $(cat "$tmp/o")"; fi
else fail "gc --min-idle 0 (rc $rc): $(cat "$tmp/o") $(cat "$tmp/e")"; fi
rc config set maxmemory-policy allkeys-lfu > /dev/null
rc set "$orphan" "another orphan" > /dev/null
bank gc --json --min-idle 0 --remote "$url"
if [ $rc = 0 ] && [ "$(j '.remote.gc | [.orphan_chunks, .removed_chunks, .untimed_chunks]')" = "[1,0,1]" ] &&
   grep -q "kept: Redis keeps no idle time" "$tmp/e" && [ "$(rc exists "$orphan")" = 1 ]; then
    pass "under allkeys-lfu (no idle time) gc keeps an orphan and says why"
else fail "gc under lfu (rc $rc): $(cat "$tmp/o") $(cat "$tmp/e")"; fi
if j .remote.warning | grep -q "no limit"; then pass "allkeys-lfu with maxmemory 0: a warning that nothing bounds Redis"
else fail "lfu warning: $(j .remote.warning)"; fi
rc config set maxmemory 100mb > /dev/null
bank stats --json --remote "$url"
[ "$(j '[.remote.warning, .remote.redis.maxmemory, .remote.redis.maxmemory_policy]')" = '[null,104857600,"allkeys-lfu"]' ] &&
    ! [ -s "$tmp/e" ] && pass "allkeys-lfu with a maxmemory: no warning" || fail "no warning expected: $(cat "$tmp/o") $(cat "$tmp/e")"
rc config set maxmemory-policy volatile-lru > /dev/null
bank stats --json --remote "$url"
j .remote.warning | grep -q "volatile" && pass "volatile-lru: a warning (the bank sets no TTL)" || fail "volatile warning: $(j .remote.warning)"
rc config set maxmemory-policy allkeys-lru > /dev/null
bank gc --json --min-idle 0 --remote "$url"
[ "$(j '.remote.gc.removed_chunks')" = 1 ] && pass "back to allkeys-lru: gc removes it" || fail "gc after lru: $(cat "$tmp/o")"

# a new replica restores exactly from what verify and gc left
"$hs" replay -m "$tmp/m.gguf" --requests "$tmp/a.jsonl" --threads 2 --no-bank > "$tmp/ref.out" 2>/dev/null &&
"$hs" replay -m "$tmp/m.gguf" --requests "$tmp/a.jsonl" --threads 2 --bank-dir "$tmp/bank2" --bank-remote "$url" > "$tmp/r2.out" 2>/dev/null
deepest=$(jq '[.remote.list[] | select(.key != $a and .key != $b and .key != $d and .chain_blobs <= 2) | .tokens] | max' \
    --arg a "$leaf_a" --arg b "$leaf_b" --arg d "$div" "$tmp/ls.json")
if [ "$(jq -c '[.cached_tokens, .cache_source]' "$tmp/r2.out")" = "[$deepest,\"remote\"]" ] &&
   [ "$(jq -c '[.first_logits_sha256, .output_ids]' "$tmp/r2.out")" = "$(jq -c '[.first_logits_sha256, .output_ids]' "$tmp/ref.out")" ]; then
    pass "a new process with an empty --bank-dir restores $deepest tokens from Redis, output identical to --no-bank"
else fail "restore after gc: $(jq -c '[.cached_tokens, .cache_source]' "$tmp/r2.out"), want $deepest"; fi

# a broken chain: without the head's manifest nothing below it can restore
rc del "headstart:hsb2:m:$head_key" > /dev/null
bank ls --json --remote "$url"
m=$(j '.remote.list | length')
if [ "$m" -ge 1 ] && [ "$(j '[.remote.list[] | select(.chain_broken | not)] | length')" = 0 ]; then
    pass "ls: with the head's manifest gone, all $m others are chain_broken"
else fail "ls broken (rc $rc): $(cat "$tmp/o")"; fi
bank gc --json --min-idle 0 --remote "$url"
if [ $rc = 0 ] && [ "$(j '.remote.gc | [.broken_chain_manifests, .removed_manifests]')" = "[$m,$m]" ]; then
    bank stats --json --remote "$url"
    [ "$(j '.remote | [.manifests, .chunks, .bytes, .positions, .position_sets]')" = "[0,0,0,0,0]" ] &&
        pass "gc removes the $m broken manifests, then their chunks and positions: the namespace is empty" ||
        fail "stats after broken gc: $(cat "$tmp/o")"
else fail "gc broken (rc $rc): $(cat "$tmp/o") $(cat "$tmp/e")"; fi

# 4: both tiers, another prefix, bad arguments, an unreachable Redis
bank stats --json --bank-dir "$bank" --remote "$url"
if [ $rc = 0 ] && [ "$(j '[.entries, .remote.manifests]')" = "[$written,0]" ]; then
    pass "--bank-dir with --remote: both tiers in one object"
else fail "both (rc $rc): $(cat "$tmp/o")"; fi
rc set "other:hsb2:c:$(printf '%032d' 1)" x > /dev/null
rc rpush "other:hsb2:c:$(printf '%032d' 2)" x > /dev/null
rc set "other:hsb2:p:$(printf '%016d' 3)" x > /dev/null
rc set "other:hsb2:x" x > /dev/null
bank stats --json --remote "$url" --remote-prefix other
[ $rc = 0 ] && [ "$(j '[.remote.prefix, .remote.chunks, .remote.orphan_chunks, .remote.foreign_keys, .remote.position_sets]')" = '["other",1,1,2,0]' ] &&
    pass "--remote-prefix other: its own namespace; a list and a string where a chunk and a positions set belong are foreign" ||
    fail "prefix (rc $rc): $(cat "$tmp/o") $(cat "$tmp/e")"
badarg() { # want-substring args...
    want=$1; shift
    bank "$@"
    if [ $rc = 2 ] && grep -q -- "$want" "$tmp/e" && [ ! -s "$tmp/o" ]; then pass "bank $*: exit 2, '$want'"
    else fail "bank $*: rc $rc, stderr $(cat "$tmp/e")"; fi
}
badarg "--min-idle is for --remote" gc --min-idle 5 --bank-dir "$bank"
badarg "--dry-run is for --remote" verify --dry-run --bank-dir "$bank"
badarg "--min-idle is for gc" stats --min-idle 5 --remote "$url"
badarg "--dry-run is for verify and gc" ls --dry-run --remote "$url"
badarg "--size is for a --bank-dir" gc --size 1G --remote "$url"
badarg "--min-idle wants" gc --min-idle -1 --remote "$url"
badarg "--remote needs a value" stats --remote
badarg "expected redis://" stats --remote http://localhost
badarg "at most 48 characters" stats --remote "$url" --remote-prefix "a b"
bank stats --remote "unix://$tmp/none.sock"
if [ $rc = 1 ] && grep -q "unix://$tmp/none.sock: Redis is unreachable" "$tmp/e" && [ ! -s "$tmp/o" ]; then
    pass "an absent socket: exit 1, '$(head -1 "$tmp/e" | cut -c1-90)...'"
else fail "unreachable (rc $rc): $(cat "$tmp/e")"; fi
bank verify --json --remote "redis://:secret@127.0.0.1:1"
if [ $rc = 1 ] && grep -q "redis://:\*\*\*@127.0.0.1:1: Redis is unreachable" "$tmp/e" && ! grep -q secret "$tmp/e"; then
    pass "a refused port: exit 1, the password hidden"
else fail "refused (rc $rc): $(cat "$tmp/e")"; fi
echo "total: $(($(date +%s) - t0)) s"
finish
