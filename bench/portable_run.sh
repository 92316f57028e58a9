#!/bin/sh
# run.sh of a bench/portable.sh pack, on the machine it was taken to: this CPU's facts, the
# kernel tests at every level it runs, the memory probe, headstart against llama.cpp at the
# avx2 / avxvnni / native levels (the 0.8b preset, q4_k_m and q8_0, a 512-token prompt and 128
# tokens, 2 threads, alternating, PORTABLE_REPS reps [2]), and the AVX-VNNI K-quant kernels
# against AVX2. Everything goes to stdout and OUTDIR/portable.log. Models are written here by
# headstart mkmodel (the same bytes as anywhere). Takes about 5-8 minutes on 2 threads.
#
#   sh /tmp/hsdev/run.sh [OUTDIR]      (OUTDIR: the current directory)
set -u
B=/tmp/hsdev/bin
outdir=${1:-.}
mkdir -p "$outdir" /tmp/hsdev/m
log=$outdir/portable.log
: >"$log"
say() { echo "$@" | tee -a "$log"; }
run() { "$@" 2>&1 | tee -a "$log"; }
say "== cpu"
run sh -c "lscpu | grep -E 'Model name|Socket|Core|Thread|L1d|L2|L3'"
say "flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' |
    grep -E '^(avx2|fma|f16c|avx_vnni|avx512f|avx512_vnni|avx512_bf16|amx_int8)$' | tr '\n' ' ')"
for dt in q8_0 q4_k_m; do
    [ -f /tmp/hsdev/m/$dt.gguf ] ||
        $B/headstart mkmodel --arch qwen35 --preset 0.8b --dtype $dt --seed 1 --out /tmp/hsdev/m/$dt.gguf >/dev/null ||
        say "mkmodel $dt failed"
done
say "== unit_kernels (native, then forced levels)"
for lv in native avxvnni avx2 scalar; do
    if [ $lv = native ]; then r=$($B/unit_kernels -j4 2>&1 | tail -1); else r=$(HEADSTART_CPU=$lv $B/unit_kernels -j4 2>&1 | tail -1); fi
    say "$lv: $r"
done
say "== bwprobe, 2 threads"
run $B/bwprobe --threads 2 --reps 5
say "== headstart against llama.cpp"
PORTABLE_REPS=${PORTABLE_REPS:-2} python3 -u - <<'PY' 2>&1 | tee -a "$log"
import json, os, random, subprocess
B = "/tmp/hsdev/bin"
ids = "/tmp/hsdev/ids512"
r = random.Random(1)
open(ids, "w").write(" ".join(str(r.randrange(150000)) for _ in range(512)))
flags = open("/proc/cpuinfo").read().split("\nflags")[1].split("\n")[0].split()
levels = [("avx2", "libggml-cpu-haswell.so")]
if "avx_vnni" in flags:
    levels.append(("avxvnni", "libggml-cpu-alderlake.so"))
levels.append(("native", None))
have_llama = os.path.exists(B + "/llama_bench")

def last_json(text):
    j = None
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                j = json.loads(line)
            except ValueError:
                pass
    return j or {}

def hs(lv, m):
    env = dict(os.environ)
    if lv != "native":
        env["HEADSTART_CPU"] = lv
    p = subprocess.run([B + "/headstart", "run", "-m", m, "--ids-file", ids, "-n", "129", "--temp", "0",
                        "--threads", "2", "--json"], capture_output=True, text=True, env=env)
    j = last_json(p.stdout)
    return j.get("prefill_tok_s"), j.get("decode_tok_s"), j.get("kernels")

def ll(lib, m):
    if not have_llama:
        return None, None, None
    p = subprocess.run([B + "/llama_bench", "--lib-dir", "/tmp/hsdev/llama", m, "--prompt-ids", ids, "-n", "129",
                        "--threads", "2"] + (["--cpu-lib", lib] if lib else []), capture_output=True, text=True)
    j = last_json(p.stdout)
    return j.get("prefill_tok_s"), j.get("decode_tok_s"), j.get("cpu_features")

best = {}
for rep in range(int(os.environ["PORTABLE_REPS"])):
    for dt in ("q4_k_m", "q8_0"):
        m = f"/tmp/hsdev/m/{dt}.gguf"
        for lv, lib in levels:
            a, b = (hs(lv, m), ll(lib, m)) if rep % 2 == 0 else (None, ll(lib, m))
            a = a or hs(lv, m)
            print(f"rep {rep} {dt} {lv}: headstart ({a[2]}) {a[0]} / {a[1]} tok/s, llama.cpp {b[0]} / {b[1]} ({b[2]})")
            o = best.setdefault((dt, lv), [0.0] * 4)
            for i, v in enumerate((a[0], a[1], b[0], b[1])):
                o[i] = max(o[i], v or 0.0)
print("best: dtype level | headstart prefill decode | llama.cpp prefill decode | ratios")
for (dt, lv), o in best.items():
    rp = f"{o[0] / o[2]:.2f}" if o[2] else "-"
    rd = f"{o[1] / o[3]:.2f}" if o[3] else "-"
    print(f"{dt} {lv} | {o[0]:.1f} {o[1]:.1f} | {o[2]:.1f} {o[3]:.1f} | prefill {rp} decode {rd}")
PY
if grep -qw avx_vnni /proc/cpuinfo; then
    say "== kp_bench: the avxvnni table's K-quant kernels against avx2's (new / old)"
    for wt in q4k q6k; do run sh -c "$B/kp_bench --wt $wt --variant avxvnni --base avx2 --reps 7 1024x3584:1,4,8,64,512 2>&1 | grep -v '^{'"; done
fi
say "== done"
