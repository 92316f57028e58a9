#!/bin/sh
# engine_bench.sh — first engine benchmark ([F3]): prefill tok/s over a 512-token prompt and
# decode tok/s over 128 greedy single-token forwards, for a `--preset 0.8b` qwen35 model in
# bf16, q8_0 and q4_k_m (llama.cpp's Q4_K_M mix of Q4_K and Q6_K), with 2 threads;
# headstart (`headstart run --json`) and llama.cpp
# (bench/llama_bench.c on the npm package's prebuilt library) run alternately on the same
# GGUF, REPS times each, best of each kept. Prints one JSON object, then a human summary.
# The machine is shared: each run's CPU seconds (user + system, all threads, from getrusage)
# are kept too (least of the reps), a steadier number than tok/s when other work competes
# for the cores (llama.cpp's threads spin while waiting, so its CPU time is about wall time
# x threads). Not part of make test (minutes, GiBs of model files).
#
#   sh bench/engine_bench.sh [BUILD]     env: THREADS (2), PROMPT (512), GEN (128), REPS (3),
#                                        DTYPES ("bf16 q8_0 q4_k_m"), KEEP=1 keeps the models,
#                                        PRESET (0.8b), IDMAX (150000: prompt ids below it)
set -u
build=${1:-${HEADSTART_BUILD:-build}}
hs=$build/headstart
threads=${THREADS:-2} n_prompt=${PROMPT:-512} n_gen=${GEN:-128} reps=${REPS:-3}
dtypes=${DTYPES:-"bf16 q8_0 q4_k_m"} preset=${PRESET:-0.8b} idmax=${IDMAX:-150000}
libdir=$PWD/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
inc=$build/llama-include
[ -d "$inc/include" ] || inc=build/llama-include
py=/usr/bin/python3
[ -x "$hs" ] || { echo "engine_bench: no $hs (make BUILD=$build)" >&2; exit 1; }
[ -d "$inc/include" ] || { echo "engine_bench: no llama.cpp headers in $inc (sh tests/golden/llama_load.sh)" >&2; exit 1; }

bench_bin=$build/llama_bench
if [ ! -x "$bench_bin" ] || [ bench/llama_bench.c -nt "$bench_bin" ]; then
    ${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -isystem "$inc/include" -isystem "$inc/ggml/include" \
        bench/llama_bench.c -o "$bench_bin" -L"$libdir" -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so \
        -l:libggml-base.so -Wl,-rpath,"$libdir" -lm || { echo "engine_bench: building llama_bench failed" >&2; exit 1; }
fi

tmp=$(mktemp -d /tmp/hs-engine-bench.XXXXXX)
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$tmp"' EXIT INT TERM
$py -c "import random; r = random.Random(1); print(' '.join(str(r.randrange($idmax)) for _ in range($n_prompt)))" > "$tmp/ids"

# best (max) of a field over the JSON lines in a file
best() { $py -c "import json,sys; print(max(json.loads(l)['$2'] for l in open('$1') if l.startswith('{')))"; }
# run a command; append its CPU seconds (user + system of it and its threads) to file $1
cpu_run() {
    f=$1; shift
    $py -c "import resource, subprocess, sys
rc = subprocess.run(sys.argv[2:]).returncode
r = resource.getrusage(resource.RUSAGE_CHILDREN)
open(sys.argv[1], 'a').write('%.3f\\n' % (r.ru_utime + r.ru_stime))
sys.exit(rc)" "$f" "$@"
}
least() { $py -c "print(min(float(l) for l in open('$1') if l.strip()))"; }

echo "{" > "$tmp/out.json"
first=1
for dt in $dtypes; do
    g=$tmp/qwen35-$preset-$dt.gguf
    echo "engine_bench: writing $g" >&2
    "$hs" mkmodel --arch qwen35 --preset "$preset" --dtype "$dt" --seed 1 --out "$g" >/dev/null || exit 1
    : > "$tmp/hs-$dt"; : > "$tmp/ll-$dt"; : > "$tmp/hs-cpu-$dt"; : > "$tmp/ll-cpu-$dt"
    r=0
    while [ $r -lt "$reps" ]; do
        echo "engine_bench: $dt rep $((r + 1))/$reps: headstart" >&2
        cpu_run "$tmp/hs-cpu-$dt" "$hs" run -m "$g" --ids-file "$tmp/ids" -n $((n_gen + 1)) --temp 0 --threads "$threads" --json \
            >> "$tmp/hs-$dt" || exit 1
        echo "engine_bench: $dt rep $((r + 1))/$reps: llama.cpp" >&2
        cpu_run "$tmp/ll-cpu-$dt" "$bench_bin" --lib-dir "$libdir" "$g" --prompt-ids "$tmp/ids" -n $((n_gen + 1)) --threads "$threads" \
            >> "$tmp/ll-$dt" || exit 1
        r=$((r + 1))
    done
    hp=$(best "$tmp/hs-$dt" prefill_tok_s); hd=$(best "$tmp/hs-$dt" decode_tok_s)
    hc=$(least "$tmp/hs-cpu-$dt"); lc=$(least "$tmp/ll-cpu-$dt")
    lp=$(best "$tmp/ll-$dt" prefill_tok_s); ld=$(best "$tmp/ll-$dt" decode_tok_s)
    [ $first = 1 ] || echo "," >> "$tmp/out.json"
    first=0
    $py - "$dt" "$hp" "$hd" "$lp" "$ld" "$threads" "$n_prompt" "$n_gen" "$reps" "$hc" "$lc" >> "$tmp/out.json" <<'PY'
import sys
dt, hp, hd, lp, ld = sys.argv[1], *map(float, sys.argv[2:6])
t, npr, ng, reps = sys.argv[6:10]
hc, lc = map(float, sys.argv[10:12])
print(f' "{dt}": {{"threads": {t}, "prompt_tokens": {npr}, "decode_tokens": {ng}, "reps": {reps},'
      f' "headstart": {{"prefill_tok_s": {hp:.3f}, "decode_tok_s": {hd:.3f}, "cpu_s": {hc:.2f}}},'
      f' "llama_cpp": {{"prefill_tok_s": {lp:.3f}, "decode_tok_s": {ld:.3f}, "cpu_s": {lc:.2f}}},'
      f' "ratio": {{"prefill": {hp / lp:.4f}, "decode": {hd / ld:.4f}}}}}', end='')
PY
done
echo "" >> "$tmp/out.json"
echo "}" >> "$tmp/out.json"
cat "$tmp/out.json"
$py - "$tmp/out.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for dt, r in d.items():
    h, l, q = r['headstart'], r['llama_cpp'], r['ratio']
    print(f"{dt:5s} {r['threads']} threads: prefill {r['prompt_tokens']} tok  headstart {h['prefill_tok_s']:8.2f} tok/s"
          f"  llama.cpp {l['prefill_tok_s']:8.2f} tok/s  ratio {q['prefill']:.3f}")
    print(f"{'':5s}            decode  {r['decode_tokens']} tok  headstart {h['decode_tok_s']:8.2f} tok/s"
          f"  llama.cpp {l['decode_tok_s']:8.2f} tok/s  ratio {q['decode']:.3f}")
    print(f"{'':5s}            CPU s per run (least)  headstart {h['cpu_s']:8.2f}  llama.cpp {l['cpu_s']:8.2f}")
PY
