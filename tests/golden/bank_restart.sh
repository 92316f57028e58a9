#!/bin/sh
# bank_restart.sh — the bank's disk tier on the request path across processes (issue [F5]):
# what one `headstart replay` banks, the next one restores from --bank-dir, exactly.
# Requests share the ~1.4k-token head of tests/golden/data/bank/head.json (as in
# bank_scenarios.sh) on a tiny qwen35 q8_0 GGUF model:
#   1. process 1 runs session A with --bank-dir; process 2 (a new process, same directory)
#      runs session B (same head, other question): it restores from disk at least up to the
#      head end (cache_source "disk"), and its first logits row and output ids equal B's
#      with --no-bank;
#      A's snapshots lie on one path, so the store is exactly one copy of its deepest chain;
#   2. every blob file gets one payload byte flipped; process 3 runs B again: nothing is
#      restored from the bad blobs (cold, or from a shallower good point), the discards are
#      reported (per request and in the tier's stats), the output still equals --no-bank;
#   3. a different model (other seed) with the same --bank-dir restores nothing and equals
#      its own --no-bank run; then the first model, again in a new process, restores from
#      the blobs process 3 rewrote.
# The replays run with XDG_CACHE_HOME inside the temp directory, so nothing here can write
# into the user's cache even by default.
# Prints RESULT: N passed, N failed. Run from the repository root with HEADSTART_BUILD set.
set -u
build=${HEADSTART_BUILD:-build}
hs=$build/headstart
head_json=tests/golden/data/bank/head.json
passed=0 failed=0
fail() { echo "FAIL: $*"; failed=$((failed + 1)); }
pass() { echo "ok: $*"; passed=$((passed + 1)); }
finish() { echo "RESULT: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; exit $?; }
tmp=$(mktemp -d /tmp/hs-bank-restart.XXXXXX)
trap 'rm -rf "$tmp"' EXIT INT TERM
XDG_CACHE_HOME=$tmp/xdg
export XDG_CACHE_HOME
command -v jq >/dev/null || { fail "jq is missing (make deps)"; finish; }
command -v od >/dev/null && command -v dd >/dev/null || { fail "od/dd missing"; finish; }

"$hs" mkmodel --arch qwen35 --seed 3 --dtype q8_0 --out "$tmp/m.gguf" >/dev/null 2>&1 &&
"$hs" mkmodel --arch qwen35 --seed 4 --dtype q8_0 --out "$tmp/m2.gguf" >/dev/null 2>&1 || { fail "mkmodel"; finish; }

# openai request: head + user message $1
req() {
    jq -c --arg u "$1" '
      {api: "openai", body: {model: "any", max_tokens: 6, tools: .tools,
        messages: [{role: "system", content: .system}, {role: "user", content: $u}]}}' "$head_json"
}
req "Find every TODO in src/ and list them." > "$tmp/a.jsonl"
req "Explain what the cache module does, briefly." > "$tmp/b.jsonl"
bank=$tmp/bank

field() { jq -c "$2" "$1"; }                      # field FILE JQ (one-line outputs)
dstat() { tail -1 "$1" | jq -c ".bank_disk_stats$2"; } # dstat STDERR-FILE JQ-PATH
same() { # got-file ref-file label
    a=$(field "$1" '[.first_logits_sha256, .output_ids]'); b=$(field "$2" '[.first_logits_sha256, .output_ids]')
    if [ -n "$a" ] && [ "$a" = "$b" ]; then pass "$3: first logits and output identical to --no-bank"
    else fail "$3: differs from --no-bank: $a vs $b"; fi
}
run() { # name model requests [args...]: replay, stdout name.out, stderr name.err
    rn=$1 rm_=$2 rr=$3
    shift 3
    "$hs" replay -m "$rm_" --requests "$rr" --threads 2 "$@" > "$tmp/$rn.out" 2> "$tmp/$rn.err" ||
        { fail "replay $rn"; cat "$tmp/$rn.err"; return 1; }
}

t0=$(date +%s)
run ref "$tmp/m.gguf" "$tmp/b.jsonl" --no-bank || finish

# 1: A in process 1, B in process 2
if run p1 "$tmp/m.gguf" "$tmp/a.jsonl" --bank-dir "$bank"; then
    w=$(dstat "$tmp/p1.err" .written); e=$(dstat "$tmp/p1.err" .entries); pd=$(dstat "$tmp/p1.err" .pending)
    pu=$(field "$tmp/p1.out" .disk_puts)
    if [ "${w:-0}" -gt 0 ] && [ "$e" = "$w" ] && [ "$pd" = 0 ] && [ "$pu" -ge "$w" ] &&
       [ "$(field "$tmp/p1.out" .cached_tokens)" = 0 ]; then
        pass "1: process 1 banked $w entries to disk ($(dstat "$tmp/p1.err" .bytes) bytes), queue drained at exit"
    else fail "1: process 1: written $w, entries $e, pending $pd, puts $pu"; fi
    # A's snapshots lie on one path: its KV rows are on disk once, so the store holds
    # exactly the chain of the deepest entry
    "$hs" bank ls --json --bank-dir "$bank" > "$tmp/ls.json" 2>/dev/null
    by=$(jq '.bytes' "$tmp/ls.json"); ch=$(jq '[.list[].chain_bytes] | max' "$tmp/ls.json")
    un=$(jq '.unshared_bytes' "$tmp/ls.json")
    if [ -n "$by" ] && [ "$by" = "$ch" ] && [ "$un" -gt "$by" ] && [ "$by" = "$(dstat "$tmp/p1.err" .bytes)" ]; then
        pass "1: session A's $w snapshots share one copy of its KV: $by bytes on disk ($un if stored whole)"
    else fail "1: sharing: bytes $by, deepest chain $ch, unshared $un"; fi
fi
if run p2 "$tmp/m.gguf" "$tmp/b.jsonl" --bank-dir "$bank"; then
    c=$(field "$tmp/p2.out" .cached_tokens); h=$(field "$tmp/p2.out" .head_tokens)
    src=$(field "$tmp/p2.out" .cache_source); n=$(field "$tmp/p2.out" .prompt_tokens)
    hits=$(dstat "$tmp/p2.err" .hits)
    if [ "$h" -gt 256 ] && [ "$c" -ge "$h" ] && [ "$c" -lt "$n" ] && [ "$src" = '"disk"' ] && [ "$hits" = 1 ]; then
        pass "1: process 2 restores $c of $n tokens from disk (head $h)"
    else fail "1: process 2: cached $c, head $h, source $src, disk hits $hits"; fi
    same "$tmp/p2.out" "$tmp/ref.out" "1: session B restored from disk"
    # the promoted hit is in RAM: the tier reports a RAM insert for it plus B's own path
    ins=$(tail -1 "$tmp/p2.err" | jq .bank_stats.inserts)
    if [ "$ins" = 2 ]; then pass "1: the disk hit was promoted into RAM (2 inserts)"
    else fail "1: RAM inserts $ins, want 2 (promotion + the request)"; fi
fi

# 2: flip one payload byte (offset 200; the header is 160 bytes) in every blob
nb=0
for f in "$bank"/blobs/*/*.hsb; do
    [ -f "$f" ] || continue
    b=$(od -An -tu1 -j200 -N1 "$f" | tr -d ' ')
    printf "$(printf '\\%03o' $((b ^ 255)))" | dd of="$f" bs=1 seek=200 conv=notrunc 2>/dev/null
    nb=$((nb + 1))
done
[ "$nb" -gt 0 ] && pass "2: corrupted $nb blob files" || fail "2: no blob files under $bank/blobs"
if run p3 "$tmp/m.gguf" "$tmp/b.jsonl" --bank-dir "$bank"; then
    c=$(field "$tmp/p3.out" .cached_tokens); src=$(field "$tmp/p3.out" .cache_source)
    dd_=$(field "$tmp/p3.out" .disk_discarded); bad=$(dstat "$tmp/p3.err" '.discarded.bad_checksum')
    hits=$(dstat "$tmp/p3.err" .hits)
    if [ "$c" = 0 ] && [ "$src" = '"none"' ] && [ "$hits" = 0 ] && [ "$dd_" -gt 0 ] && [ "$bad" = "$dd_" ]; then
        pass "3: process 3 restores nothing from corrupted blobs ($dd_ discarded, bad_checksum $bad)"
    else fail "3: process 3: cached $c, source $src, disk hits $hits, discarded $dd_, bad_checksum $bad"; fi
    same "$tmp/p3.out" "$tmp/ref.out" "2: session B after corruption"
fi

# 3: another model on the same directory; then the first model again
if run ref2 "$tmp/m2.gguf" "$tmp/b.jsonl" --no-bank && run p4 "$tmp/m2.gguf" "$tmp/b.jsonl" --bank-dir "$bank"; then
    c=$(field "$tmp/p4.out" .cached_tokens); src=$(field "$tmp/p4.out" .cache_source)
    dd_=$(field "$tmp/p4.out" .disk_discarded); e=$(dstat "$tmp/p4.err" .entries)
    if [ "$c" = 0 ] && [ "$src" = '"none"' ] && [ "$dd_" = 0 ] && [ "$(dstat "$tmp/p4.err" .hits)" = 0 ]; then
        pass "3: another model restores nothing from the shared directory ($e entries there now)"
    else fail "3: other model: cached $c, source $src, discarded $dd_"; fi
    same "$tmp/p4.out" "$tmp/ref2.out" "3: other model"
fi
if run p5 "$tmp/m.gguf" "$tmp/b.jsonl" --bank-dir "$bank"; then
    c=$(field "$tmp/p5.out" .cached_tokens); src=$(field "$tmp/p5.out" .cache_source)
    h=$(field "$tmp/p5.out" .head_tokens)
    if [ "$c" -ge "$h" ] && [ "$src" = '"disk"' ] && [ "$(field "$tmp/p5.out" .disk_discarded)" = 0 ]; then
        pass "3: the first model restores $c tokens from the blobs process 3 rewrote"
    else fail "3: first model again: cached $c (head $h), source $src"; fi
    same "$tmp/p5.out" "$tmp/ref.out" "3: session B, fifth process"
fi
# --no-bank-disk and the default directory (inside the temp XDG_CACHE_HOME here)
if run nd "$tmp/m.gguf" "$tmp/b.jsonl" --no-bank-disk; then
    if [ "$(field "$tmp/nd.out" .cache_source)" = '"none"' ] && [ ! -e "$XDG_CACHE_HOME/headstart/bank" ] &&
       [ "$(tail -1 "$tmp/nd.err" | jq 'has("bank_disk_stats")')" = false ]; then
        pass "--no-bank-disk opens no directory"
    else fail "--no-bank-disk: $(field "$tmp/nd.out" .cache_source), default dir exists: $(ls -d "$XDG_CACHE_HOME/headstart/bank" 2>&1)"; fi
fi
if run dflt "$tmp/m.gguf" "$tmp/a.jsonl" && [ -f "$XDG_CACHE_HOME/headstart/bank/index.sqlite" ] &&
   [ "$(dstat "$tmp/dflt.err" .written)" -gt 0 ]; then
    pass "without --bank-dir the tier lives under \$XDG_CACHE_HOME/headstart/bank"
else fail "default --bank-dir: $(tail -1 "$tmp/dflt.err" 2>/dev/null)"; fi
echo "total: $(($(date +%s) - t0)) s"
finish
