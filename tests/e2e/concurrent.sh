#!/bin/sh
# concurrent.sh — exactness under load ([F10]'s tests) on a tiny random model: every request
# answered beside others equals the same request answered alone. The alone runs come first,
# one at a time on a server with --parallel 1 --no-bank; each answer's output (reasoning,
# text, tool calls, stop reason, token counts) and its first_logits_sha256 (the request line
# of --log-format json, matched by the response id) is the reference. The clients are Python
# stdlib threads (tests/e2e/lib/concurrent_clients.py, whose note says how a wave is sent so
# that it cannot pass vacuously). The checks, each counted on its own:
#   1. 16 requests of mixed prompt lengths (~15 to ~1.5k tokens), APIs (OpenAI chat, Anthropic
#      messages, OpenAI Responses; streaming or not), sampling (greedy; temperature 0.7 with a
#      seed, with top_p, with top_k / min_p / presence_penalty), thinking on or off, 8-24
#      tokens out, ignore_eos on half, sent at once to --parallel 4 --step-tokens 7 and to
#      --parallel 16 --step-tokens 256 (both --no-bank), and twice to --parallel 16
#      --step-tokens 64 with the bank in RAM (the second time in reverse order, restoring):
#      the same output and first logits as alone.
#      On --parallel 16 the wave also took fewer forward steps (headstart_steps_total) than
#      any one-at-a-time schedule needs: one per generated token after the first, plus the
#      prompts' chunks.
#   2. Disconnects: the 16 again with 4 long streams (3500 tokens, ignore_eos) whose clients
#      hang up after 3 events: the 16 still equal their alone runs, /metrics counts exactly 4
#      more cancelled requests, and each hang-up has a log line that does not claim all the
#      tokens it asked for.
#   3. Shared head: 4 new OpenAI sessions with one ~1.4k-token head (system + 5 tools of
#      tests/golden/data/bank/head.json; the head anchor needs >= 256 tokens, bank_plan's
#      BANK_DEFAULT_MIN_HEAD) and different last user messages, sent together (within 100 ms)
#      to a server with the bank on: the answers equal their alone runs; three report
#      cached tokens >= the head (render --head); /metrics: prompt tokens computed
#      (headstart_prefill_tokens_total) = the prompts less their cached tokens, which is at
#      most the prompts less 3 heads (the head computed once), headstart_head_shared_total
#      +3, headstart_head_shared_tokens_total >= 3 heads.
#   4. Memory: --seq-ram sized from the model's geometry to hold the state of two of a dozen
#      like requests (prompt + 128 tokens out) but not three: per token the attention KV
#      (attention layers x 2 x kv heads x head_dim x 4 B, engine_kv_row_bytes) and per
#      request one GDN state (conv window + recurrent state, engine_snapshot_bytes), read
#      from config.json (concurrent_clients.py memsize; the size is 2 x the biggest + half
#      the smallest). With --max-queue 64 (and a 2M bank, which restores) all 12 sent at once
#      get 200 and equal their alone runs, /metrics reports the budget, and polled during the
#      wave never more than 2 running while some wait; with --max-queue 2 the excess get 429 with
#      Retry-After and the API's error shape, the answered equal their alone runs; a request
#      whose prompt + output cap could never fit gets 400 in the API's error shape (each
#      API, one streaming), where a server without the small budget answers it with 200.
#   5. At the end every server is healthy (/health ok, queue empty), exits 0 on SIGTERM, and
#      no sanitizer wrote a report.
#   The wave of 1 also runs on a Q8_0 GGUF and a Q4_K_M one packed at start (CPUs whose table
#   packs), against their alone runs on the weights unpacked, and restoring from the bank.
# Checks 3 and 4 (and the step count of 1) need the batching scheduler: before it they fail
# on the metrics it adds and on the 400. Bounded: every client socket has a 60 s timeout;
# the whole script takes seconds on the tiny model. Ends with "RESULT: N passed, N failed".
set -u
py=/usr/bin/python3
. "$(dirname "$0")/lib/server.sh"
e2e_setup concurrent curl "$py"
CC_LIB=$(cd "$(dirname "$0")/lib" && pwd); export CC_LIB PYTHONDONTWRITEBYTECODE=1
cc() { $py "$CC_LIB/concurrent_clients.py" "$@"; }
t0=$(date +%s)

cc specs "$tmp" || { fail "request sets"; finish; }
$py -c 'import json, sys; json.dump(json.load(open(sys.argv[1])) + json.load(open(sys.argv[2])), open(sys.argv[3], "w"))' \
    "$tmp/main.json" "$tmp/hang.json" "$tmp/mainhang.json"

# every server logs JSON lines (the request line carries first_logits_sha256); a queue big
# enough that one-at-a-time never refuses a wave; --max-tokens-default 0 lets the hang-up
# streams run long (it changes no request that sets max_tokens below 1024)
common="--log-format json --max-tokens-default 0"
# print the output of a subcommand indented under a FAIL line
show() { sed 's/^/    /' "$1"; }
servers=""   # "name:pid:port ..." for check 5
# start NAME ARGS... — a server of $model (default $tmp/m) logging to $tmp/NAME.log; sets $pid and $port. One that
# does not start is a failed check, and port 0 fails the checks that use it (not the rest)
start() {
    n=$1; shift
    if e2e_serve "$tmp/$n.log" -m "${model:-$tmp/m}" --threads 1 $common "$@"; then
        servers="$servers $n:$pid:$port"
    else
        fail "server $n ($*) did not start"; show "$tmp/$n.log"; port=0; return 1
    fi
}

# ---- the alone runs ------------------------------------------------------------------------
start alone --parallel 1 --no-bank || finish
pa=$port
alone_ok=1
for s in main head mem never; do
    cc run "$pa" "$tmp/$s.json" "$tmp/alone.$s.json" alone > "$tmp/o" 2>&1 || { alone_ok=0; cat "$tmp/o"; }
done
$py - "$tmp" <<'EOF' > "$tmp/o" 2>&1 && [ $alone_ok = 1 ] \
    && pass "alone runs: every request answered 200 with an id, and its log line has a first_logits_sha256 ($(cat "$tmp/o"))" \
    || { fail "alone runs"; show "$tmp/o"; }
import json, re, sys
import os; sys.path.insert(0, os.environ["CC_LIB"])
from concurrent_clients import log_lines
d = sys.argv[1]
log = log_lines(d + "/alone.log")
n, bad, hashes = 0, [], set()
for s in ("main", "head", "mem", "never"):
    for r in json.load(open("%s/alone.%s.json" % (d, s)))["results"]:
        l = log.get(r.get("id"))
        if r["status"] != 200 or r.get("error") or not l or not re.match("^[0-9a-f]{64}$", l.get("first_logits_sha256", "")):
            bad.append("%s: %s %s %s" % (r["name"], r["status"], r.get("error"), l))
        else:
            n += 1
            hashes.add(l["first_logits_sha256"])
for b in bad: print(b)
# different prompts give different first logits: a constant hash would compare nothing
if len(hashes) < n // 2: print("only %d distinct first-logits hashes for %d requests" % (len(hashes), n)); bad.append(1)
print("%d requests, %d distinct first logits" % (n, len(hashes)))
sys.exit(1 if bad else 0)
EOF

# ---- 1. the wave on several --parallel / --step-tokens --------------------------------------
# wave_cmp NAME SET TAG [some] [noretry] [sample] [reverse] — sends SET at once to server NAME
# (its port in $p; /metrics before it in $tmp/NAME.TAG.m0) and compares every answer with
# the alone runs of server $ref (default alone) (those of "main" for "mainhang", whose hang-ups are not compared); all must
# be 200 unless "some". A wave that did not overlap proved nothing: it is sent once more
# (unless "noretry": the shared head's second wave would find the head banked)
wave_cmp() {
    wn=$1 ws=$2 wt=$3; shift 3
    wall=all wretry=1
    [ "${1:-}" = some ] && { wall=; shift; }
    [ "${1:-}" = noretry ] && { wretry=0; shift; }
    for wi in 1 2; do
        cc metrics "$p" "$tmp/$wn.$wt.m0" > /dev/null
        cc run "$p" "$tmp/$ws.json" "$tmp/$wn.$wt.json" wave "$@" > "$tmp/o" 2>&1
        cc compare "$tmp/${ref:-alone}.${ws%hang}.json" "$tmp/${ref:-alone}.log" "$tmp/$wn.$wt.json" "$tmp/$wn.log" $wall >> "$tmp/o" 2>&1
        wrc=$?
        [ $wrc = 3 ] && [ $wi = 1 ] && [ $wretry = 1 ] || break
        echo "($wn $wt: the wave did not overlap, sent once more)"
    done
    return $wrc
}
# restored NAME TAG — status 0 when some answer of that wave reports cached tokens
restored() {
    $py -c 'import json, sys; sys.exit(0 if sum(r.get("out", {}).get("cached", 0) for r in json.load(open(sys.argv[1]))["results"]) > 0 else 1)' "$tmp/$1.$2.json" \
        || { echo "no answer of the wave reports cached tokens: nothing was restored" >> "$tmp/o"; return 1; }
}

start p4 --parallel 4 --step-tokens 7 --no-bank --max-queue 64
p=$port
wave_cmp p4 main w1 && pass "[1] --parallel 4 --step-tokens 7: $(tail -1 "$tmp/o")" \
    || { fail "[1] --parallel 4 --step-tokens 7"; show "$tmp/o"; }

start p16 --parallel 16 --step-tokens 256 --no-bank --max-queue 64
p=$port p16=$port
wave_cmp p16 main w1 && pass "[1] --parallel 16 --step-tokens 256: $(tail -1 "$tmp/o")" \
    || { fail "[1] --parallel 16 --step-tokens 256"; show "$tmp/o"; }
cc metrics "$p" "$tmp/p16.m1"
$py - "$tmp/p16.w1.m0" "$tmp/p16.m1" "$tmp/p16.w1.json" 256 <<'EOF' > "$tmp/o" 2>&1 \
    && pass "[1] --parallel 16 batched the wave: $(cat "$tmp/o")" || { fail "[1] --parallel 16 batching"; show "$tmp/o"; }
import json, sys
m0, m1, w = (json.load(open(f)) for f in sys.argv[1:4])
step = int(sys.argv[4])
k = "headstart_steps_total"
if k not in m1: print("no %s in /metrics" % k); sys.exit(1)
res = [r for r in w["results"] if r["status"] == 200 and "out" in r]
# one at a time: a step per generated token after the first (the prompt's last chunk gives
# the first) plus a step per chunk of the prompt not restored
serial = sum(r["out"]["out_tokens"] - 1 + -(-(r["out"]["prompt_tokens"] - r["out"]["cached"]) // step) for r in res)
steps = m1[k] - m0.get(k, 0)
print("%d steps for %d requests, one at a time needs >= %d" % (steps, len(res), serial))
sys.exit(0 if len(res) == 16 and 0 < steps < serial else 1)
EOF

start bank --parallel 16 --step-tokens 64 --bank-ram 64M --no-bank-disk --max-queue 64
p=$port
wave_cmp bank main w1 && pass "[1] --parallel 16 --step-tokens 64, bank in RAM (first wave): $(tail -1 "$tmp/o")" \
    || { fail "[1] bank, first wave"; show "$tmp/o"; }
wave_cmp bank main w2 reverse && restored bank w2 && pass "[1] the bank's second wave, sent in reverse order (restores beside prefills): $(tail -1 "$tmp/o")" \
    || { fail "[1] bank, second wave"; show "$tmp/o"; }

# Weights packed at start (where the kernel table packs: AVX-512 VNNI): the same wave on a
# Q8_0 GGUF and on a Q4_K_M one (Q4_K and Q6_K matrices: hidden 256, rows of whole
# super-blocks), alone on the unpacked weights (HEADSTART_NO_PACK=1), then in a crowd
# packed, twice (the second restoring): packing changes no bit, alone or beside others
packed_wave() { # name dtype [mkmodel options]
    pw=$1 pt=$2; shift 2
    "$hs" mkmodel --preset tiny --dtype "$pt" "$@" --out "$tmp/$pw.gguf" > "$tmp/o" 2>&1 || { fail "mkmodel $pt"; show "$tmp/o"; return; }
    model=$tmp/$pw.gguf
    export HEADSTART_NO_PACK=1
    start "${pw}alone" --parallel 1 --no-bank
    unset HEADSTART_NO_PACK
    cc run "$port" "$tmp/main.json" "$tmp/${pw}alone.main.json" alone > "$tmp/o" 2>&1 || { fail "[1] $pt alone runs"; show "$tmp/o"; }
    start "${pw}packed" --parallel 16 --step-tokens 64 --bank-ram 64M --no-bank-disk --max-queue 64
    p=$port ref=${pw}alone
    if grep -q 'weights packed' "$tmp/${pw}alone.log"; then fail "[1] $pt: HEADSTART_NO_PACK=1 still packed"
    elif ! grep -q 'weights packed' "$tmp/${pw}packed.log"; then echo "skip: [1] $pt packed: this CPU's kernel table does not pack"
    else
        wave_cmp "${pw}packed" main w1 && wave_cmp "${pw}packed" main w2 reverse && restored "${pw}packed" w2 \
            && pass "[1] $pt packed at start, in a crowd and restored (two waves): the unpacked alone answers, $(tail -1 "$tmp/o")" \
            || { fail "[1] $pt packed"; show "$tmp/o"; }
    fi
    model= ref=
}
packed_wave q8 q8_0
packed_wave q4 q4_k_m --hidden 256 --ffn 512 --head-dim 64 --gdn-head-dim 64

# ---- 2. disconnects -----------------------------------------------------------------------
p=$p16
wave_cmp p16 mainhang w2 && pass "[2] 4 streams hung up mid-wave: the other 16 $(tail -1 "$tmp/o" | sed 's/^[0-9]* requests //')" \
    || { fail "[2] disconnects: the others' outputs"; show "$tmp/o"; }
$py - "$tmp/p16.w2.m0" "$p" "$tmp/p16.w2.json" "$tmp/p16.log" <<'EOF' > "$tmp/o" 2>&1 \
    && pass "[2] $(cat "$tmp/o")" || { fail "[2] disconnects counted"; show "$tmp/o"; }
import json, os, sys, time
sys.path.insert(0, os.environ["CC_LIB"])
from concurrent_clients import log_lines, metrics
m0, w = json.load(open(sys.argv[1])), json.load(open(sys.argv[3]))
k = lambda m: sum(v for n, v in m.items() if n.startswith("headstart_cancelled_requests_total{"))
# a hang-up is seen within one poll (50 ms) and leaves the batch at the next step: wait for
# the count (5 s at most), then a little longer for one too many
end = time.time() + 5
while k(metrics(sys.argv[2])) - k(m0) < 4 and time.time() < end:
    time.sleep(0.05)
time.sleep(0.2)
m1 = metrics(sys.argv[2])
log = log_lines(sys.argv[4])
hung = [r for r in w["results"] if r.get("events_read")]
ok = len(hung) == 4
lines = [log.get(r["id"]) for r in hung]
for r, l in zip(hung, lines):
    if not l or l.get("generated_tokens", 0) >= 3500:
        print("%s (%s): log line %s" % (r["name"], r["id"], l)); ok = False
d = k(m1) - k(m0)
print("/metrics counts %d cancelled (4 hung up, each with a log line, none with all 3500 tokens)" % d)
sys.exit(0 if ok and d == 4 else 1)
EOF

# ---- 3. shared head -----------------------------------------------------------------------
$py -c 'import json,sys; json.dump(json.load(open(sys.argv[1]))[0]["body"], open(sys.argv[2], "w"))' "$tmp/head.json" "$tmp/s0.json"
head=$("$hs" render -m "$tmp/m" --request "$tmp/s0.json" --head 2>/dev/null)
start head --parallel 8 --bank-ram 64M --no-bank-disk
p=$port
wave_cmp head head w1 noretry && pass "[3] shared head: the 4 answers equal their alone runs" \
    || { fail "[3] shared head: outputs"; show "$tmp/o"; }
cc metrics "$p" "$tmp/head.m1"
$py - "$tmp/head.w1.json" "${head:-0}" <<'EOF' > "$tmp/o" 2>&1 \
    && pass "[3] shared head: $(cat "$tmp/o")" || { fail "[3] shared head: cached tokens"; show "$tmp/o"; }
import json, sys
w, head = json.load(open(sys.argv[1]))["results"], int(sys.argv[2])
ok = head >= 256 and all(r["status"] == 200 and "out" in r for r in w)
spread = max(r["t_start"] for r in w) - min(r["t_start"] for r in w)
cached = [r.get("out", {}).get("cached", -1) for r in w]
print("head %d tokens, sent within %.1f ms, cached tokens %s" % (head, spread * 1000, cached))
sys.exit(0 if ok and spread < 0.1 and sum(c >= head for c in cached) == 3 else 1)
EOF
$py - "$tmp/head.w1.m0" "$tmp/head.m1" "$tmp/head.w1.json" "${head:-0}" <<'EOF' > "$tmp/o" 2>&1 \
    && pass "[3] shared head in /metrics: $(cat "$tmp/o")" || { fail "[3] shared head: /metrics"; show "$tmp/o"; }
import json, sys
m0, m1, w = (json.load(open(f)) for f in sys.argv[1:4])
head = int(sys.argv[4])
res = [r["out"] for r in w["results"] if "out" in r]
d = lambda k: m1[k] - m0.get(k, 0) if k in m1 else None
pre, shared, stok = d("headstart_prefill_tokens_total"), d("headstart_head_shared_total"), d("headstart_head_shared_tokens_total")
prompts = sum(o["prompt_tokens"] for o in res)
computed = sum(o["prompt_tokens"] - o["cached"] for o in res)
print("prefill tokens +%s (prompts %d, less cached %d, at most %d), head_shared +%s, head_shared_tokens +%s"
      % (pre, prompts, computed, prompts - 3 * head, shared, stok))
ok = (len(res) == 4 and pre is not None and pre == computed and pre <= prompts - 3 * head
      and shared == 3 and stok is not None and stok >= 3 * head)
sys.exit(0 if ok else 1)
EOF

# ---- 4. memory ----------------------------------------------------------------------------
if cc memsize "$tmp/m" "$tmp/alone.mem.json" "$tmp/alone.log" "$tmp/mem.json" "$tmp/seqram" > "$tmp/o" 2>&1; then
    seqram=$(cat "$tmp/seqram")
    echo "seq-ram for the memory checks: $(cat "$tmp/o")"
    start mem --parallel 16 --seq-ram "$seqram" --max-queue 64 --bank-ram 2M --no-bank-disk
    p=$port
    wave_cmp mem mem w1 sample && restored mem w1 && pass "[4] --seq-ram $seqram, --max-queue 64: all 12 answered 200, $(tail -1 "$tmp/o")" \
        || { fail "[4] small --seq-ram, big queue"; show "$tmp/o"; }
    cc metrics "$p" "$tmp/mem.m1"
    $py - "$tmp/mem.m1" "$tmp/mem.w1.json" "$seqram" <<'EOF' > "$tmp/o" 2>&1 \
        && pass "[4] the budget acted: $(cat "$tmp/o")" || { fail "[4] the budget in /metrics"; show "$tmp/o"; }
import json, sys
m, w, size = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), int(sys.argv[3])
s = [x for x in w["samples"] if x[0] is not None and x[1] is not None]
run, wait = max((x[0] for x in s), default=None), max((x[1] for x in s), default=None)
print("headstart_seq_budget_bytes %s (want %d); %d samples: at most %s running, %s waiting"
      % (m.get("headstart_seq_budget_bytes"), size, len(s), run, wait))
sys.exit(0 if m.get("headstart_seq_budget_bytes") == size and s and 1 <= run <= 2 and wait >= 1 else 1)
EOF

    start memq --parallel 16 --seq-ram "$seqram" --max-queue 2 --no-bank
    p=$port
    wave_cmp memq mem w1 some && $py - "$tmp/memq.w1.json" <<'EOF' >> "$tmp/o" 2>&1 \
        && pass "[4] --max-queue 2: $(tail -1 "$tmp/o")" || { fail "[4] small --seq-ram, small queue"; show "$tmp/o"; }
import json, sys
import os; sys.path.insert(0, os.environ["CC_LIB"])
from concurrent_clients import error_shape_ok
w = json.load(open(sys.argv[1]))["results"]
n200 = sum(r["status"] == 200 for r in w)
r429 = [r for r in w if r["status"] == 429]
bad = [r for r in r429 if not r.get("retry_after") or not error_shape_ok(r["api"], 429, r.get("error"))]
for r in bad: print("%s: 429 without Retry-After or the error shape: %s" % (r["name"], r.get("error")))
other = [r for r in w if r["status"] not in (200, 429)]
for r in other: print("%s: status %s %s" % (r["name"], r["status"], r.get("error")))
print("%d answered (equal alone), %d refused with 429 and the API's error shape" % (n200, len(r429)))
sys.exit(0 if n200 >= 2 and len(r429) >= 4 and not bad and not other else 1)
EOF

    cc never_size "$tmp/m" "$tmp/alone.never.json" "$tmp/never.json" "$seqram" > "$tmp/o" 2>&1 \
        && cc run "$p" "$tmp/never.json" "$tmp/never.json.out" alone >> "$tmp/o" 2>&1
    $py - "$tmp/never.json.out" <<'EOF' >> "$tmp/o" 2>&1 \
        && pass "[4] state that could never fit: $(tail -1 "$tmp/o")" || { fail "[4] a request that could never fit"; show "$tmp/o"; }
import json, sys
import os; sys.path.insert(0, os.environ["CC_LIB"])
from concurrent_clients import error_shape_ok
w = json.load(open(sys.argv[1]))["results"]
bad = [r for r in w if r["status"] != 400 or not error_shape_ok(r["api"], 400, r.get("error"))]
for r in bad: print("%s (%s%s): status %s %s" % (r["name"], r["api"], " stream" if r["stream"] else "", r["status"],
                                                 str(r.get("error") or r.get("out"))[:300]))
if not bad: print("400 in each API's error shape (%s), where --seq-ram's default answers 200" % ", ".join(r["api"] for r in w))
sys.exit(0 if len(w) == 3 and not bad else 1)
EOF
else
    fail "[4] sizing --seq-ram"; show "$tmp/o"
fi

# ---- 5. healthy at the end ----------------------------------------------------------------
sick="" stopped=""
for s in $servers; do
    n=${s%%:*} rest=${s#*:}
    spid=${rest%%:*} sport=${rest#*:}
    h=$(curl -s --max-time 10 "http://127.0.0.1:$sport/health")
    echo "$h" | grep -q '"status":"ok"' && echo "$h" | grep -q '"queue_depth":0' || sick="$sick $n: $h;"
    e2e_stop "$spid" 10 || stopped="$stopped $n: exit $?;"
done
[ -z "$sick" ] && pass "[5] every server ($(echo $servers | sed 's/:[0-9]*:[0-9]*//g')) healthy at the end: /health ok, queue empty" \
    || fail "[5] health:$sick"
[ -z "$stopped" ] && pass "[5] every server exits 0 on SIGTERM" || fail "[5] SIGTERM:$stopped"
if r=$(e2e_sanitizer "$tmp"/*.log); then fail "[5] sanitizer report: $r"
else pass "[5] no sanitizer report in the server logs"; fi
echo "concurrent: $(( $(date +%s) - t0 )) s"
finish
