#!/bin/sh
# run.sh — `make bench` ([F7]): headstart against llama.cpp on the same GGUF files, same
# thread count, alternating runs in one invocation; decode against the memory roofline,
# prefill against the matmul kernel's peak, and the cost of snapshot capture. Prints a table,
# writes bench/results/bench-<date>.json and bench/results/bench-<date>.png. Never part of
# make test. bench/README.md says what the columns mean.
#
#   sh bench/run.sh [BUILD]        (BUILD defaults to build; make bench passes $(BUILD))
#
# Environment (defaults in brackets):
#   BENCH_MODELS   ["0.8b 2b"]  mkmodel --preset values (qwen35, seed 1); "qwen4exp" is
#                  mkmodel's tiny Qwen3.8-Flash-Next
#   (BENCH_DTYPES takes any mkmodel --dtype: iq4_xs, iq4_nl and q5_1 rows too)
#   BENCH_DTYPES   ["bf16 q8_0 q4_k_m"]  q4_k_m is kept only when `headstart mkmodel`
#                  accepts it (detected from its --help)
#   BENCH_PHASES   ["prefill512 prefill4096 decode128"]  decode128 = 128 greedy tokens after
#                  the 512-token prompt (the same run as prefill512 when both are asked for);
#                  also prefill8192 and decode8k (64 tokens after an 8192-token prompt, one run:
#                  an agent's context, where attention reads as much as the weights)
#   BENCH_REPS     [3]          runs of each engine per phase, alternating headstart /
#                  llama.cpp (the order flips every rep)
#   BENCH_STAT     [best]       best (highest tok/s of the reps) or median, for the table
#   BENCH_THREADS  [2]
#   BENCH_CAPTURE  [1]          0 skips the capture-cost runs
#   BENCH_CAPTURE_TOKENS [4096]  BENCH_CAPTURE_N [8]  BENCH_CAPTURE_REPS [2]
#                  (on the first model with q8_0, or the first dtype without q8_0)
#   BENCH_MODEL_DIR [build/bench-models]  generated GGUFs are cached here (BENCH_REFRESH=1
#                  writes them again)
#   BENCH_OUT      [bench/results]
#   BENCH_IDMAX    [150000]     prompt ids are uniform below this (seeded, fixed)
#   BENCH_ISA      [native]     avx2: both engines on their AVX2 code, whatever the CPU has
#                  ([F14]): headstart with HEADSTART_CPU=avx2 (checked: `kernels` must read
#                  avx2), llama.cpp with its haswell CPU library (AVX2 + FMA + F16C) loaded by
#                  name instead of the best one (checked: its reported features must have
#                  AVX2 and no AVX512). avxvnni: the same with AVX-VNNI (an Intel client
#                  core's level: Alder Lake and later), on a CPU that has it: headstart's
#                  avxvnni table, llama.cpp's alderlake library (checked: AVX_VNNI, no AVX512)
#   BENCH_REPLOT=FILE.json      no runs: print the table of an earlier result and redraw its
#                  chart (FILE.png)
#
# Full default run: see bench/README.md for how long it takes (hours on 2 vCPUs).
set -u
build=${1:-${HEADSTART_BUILD:-build}}
hs=$build/headstart
libdir=$PWD/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64
LIBS="-ljansson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -lpthread -lsqlite3 -lxxhash -lcrypto"
CFLAGS_B="-std=c11 -D_GNU_SOURCE -O2 -ffp-contract=off -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Werror -Isrc"

die() { echo "bench: $*" >&2; exit 1; }
prepare() {
    [ -x "$hs" ] || die "no $hs (make BUILD=$build)"
    [ -f "$build/libheadstart.a" ] || die "no $build/libheadstart.a (make BUILD=$build)"
    [ -f "$libdir/libllama.v0.5.0.so" ] || die "no llama.cpp library in $libdir (make deps)"

    # llama.cpp headers of the exact version of the library (as tests/golden/llama_load.sh)
    inc=$build/llama-include
    [ -f "$inc/include/llama.h" ] || [ ! -f build/llama-include/include/llama.h ] || inc=build/llama-include
    if [ ! -f "$inc/include/llama.h" ] || [ ! -f "$inc/ggml/include/ggml-backend.h" ]; then
        src=$build/llama-src
        [ -d "$src/.git" ] || sh tools/embed_template.sh "$build" "$build/gen/chat_template.c" >/dev/null 2>&1
        [ -d "$src/.git" ] || die "no llama.cpp source bundle in $src (make deps)"
        rm -rf "$inc" && mkdir -p "$inc"
        git -C "$src" archive HEAD include ggml/include | tar -x -C "$inc" || die "extracting llama.cpp headers"
    fi

    # helper binaries, rebuilt when their source or the library is newer
    need() { [ ! -x "$1" ] || [ "$2" -nt "$1" ] || [ "$build/libheadstart.a" -nt "$1" ]; }
    if need "$build/llama_bench" bench/llama_bench.c; then
        ${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -isystem "$inc/include" -isystem "$inc/ggml/include" \
            bench/llama_bench.c -o "$build/llama_bench" -L"$libdir" -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so \
            -l:libggml-base.so -Wl,-rpath,"$libdir" -lm || die "building llama_bench failed"
    fi
    if need "$build/bwprobe" bench/bwprobe.c; then
        ${CC:-cc} $CFLAGS_B bench/bwprobe.c "$build/libheadstart.a" $LIBS -o "$build/bwprobe" || die "building bwprobe failed"
    fi
    # the bf16 x bf16 matmul (kern_ops.bf16_matmul) is measured too where the kernels have it
    kb_def=""
    grep -q '(\*bf16_matmul)' src/kernels/kernels.h && kb_def=-DBENCH_HAVE_BF16_MATMUL
    if need "$build/kernels_bench" bench/kernels_bench.c || [ src/kernels/kernels.h -nt "$build/kernels_bench" ]; then
        ${CC:-cc} $CFLAGS_B $kb_def bench/kernels_bench.c "$build/libheadstart.a" $LIBS -o "$build/kernels_bench" ||
            die "building kernels_bench failed"
    fi
    # not run by the table: the decode kernel's GB/s on its own (bench/README.md)
    if need "$build/decode_bench" bench/decode_bench.c; then
        ${CC:-cc} $CFLAGS_B bench/decode_bench.c "$build/libheadstart.a" $LIBS -o "$build/decode_bench" ||
            die "building decode_bench failed"
    fi
    if need "$build/capture_bench" bench/capture_bench.c; then
        ${CC:-cc} $CFLAGS_B bench/capture_bench.c "$build/libheadstart.a" $LIBS -o "$build/capture_bench" ||
            die "building capture_bench failed"
    fi

    command -v gnuplot >/dev/null 2>&1 || echo "bench: no gnuplot (make deps installs gnuplot-nox); no chart" >&2
}
[ -n "${BENCH_REPLOT:-}" ] || prepare

exec /usr/bin/python3 - "$build" "$libdir" <<'PY'
import atexit, datetime, json, math, os, platform, random, resource, shutil, statistics, subprocess, sys, tempfile, time

build, libdir = sys.argv[1], sys.argv[2]
hs = os.path.join(build, "headstart")
env = os.environ.get
models = env("BENCH_MODELS", "0.8b 2b").split()
dtypes = env("BENCH_DTYPES", "bf16 q8_0 q4_k_m").split()
phases = env("BENCH_PHASES", "prefill512 prefill4096 decode128").split()
reps = int(env("BENCH_REPS", "3"))
stat = env("BENCH_STAT", "best")
threads = int(env("BENCH_THREADS", "2"))
do_capture = env("BENCH_CAPTURE", "1") != "0"
cap_tokens = int(env("BENCH_CAPTURE_TOKENS", "4096"))
cap_n = int(env("BENCH_CAPTURE_N", "8"))
cap_reps = int(env("BENCH_CAPTURE_REPS", "2"))
model_dir = env("BENCH_MODEL_DIR", "build/bench-models")
out_dir = env("BENCH_OUT", "bench/results")
idmax = int(env("BENCH_IDMAX", "150000"))
refresh = env("BENCH_REFRESH", "0") == "1"
isa = env("BENCH_ISA", "native")
# per ISA: headstart's HEADSTART_CPU level, llama.cpp's CPU library (None: the best for the CPU)
isa_table = {"native": (None, None), "avx2": ("avx2", "libggml-cpu-haswell.so"),
             "avxvnni": ("avxvnni", "libggml-cpu-alderlake.so")}
if isa not in isa_table:
    sys.exit(f"bench: BENCH_ISA is one of {' '.join(isa_table)}")
hs_level, llama_cpu_lib = isa_table[isa]
if hs_level:
    os.environ["HEADSTART_CPU"] = hs_level   # every headstart-side process: run, capture_bench
else:
    os.environ.pop("HEADSTART_CPU", None)
llama_features = None                        # what the loaded CPU library reports (llama_bench)
known_phases = {"prefill512", "prefill4096", "decode128", "prefill8192", "decode8k"}
# decode phase -> (its prompt, tokens decoded)
decode_runs = {"decode128": (512, 128), "decode8k": (8192, 64)}
for p in phases:
    if p not in known_phases:
        sys.exit(f"bench: unknown phase {p!r} (known: {' '.join(sorted(known_phases))})")
if stat not in ("best", "median"):
    sys.exit("bench: BENCH_STAT is best or median")
if reps < 1:
    sys.exit("bench: BENCH_REPS must be >= 1")

def log(*a):
    print("bench:", *a, file=sys.stderr, flush=True)

def loadavg():
    return float(open("/proc/loadavg").read().split()[0])


# ---- machine ----------------------------------------------------------------------------
def cpu_info():
    model, flags = "", []
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name") and not model:
            model = line.split(":", 1)[1].strip()
        if line.startswith("flags") and not flags:
            flags = line.split(":", 1)[1].split()
    return model, flags

def git(*a):
    r = subprocess.run(["git", *a], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""

cpu_model, cpu_flags = cpu_info()
interesting = ["avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "avx512_vnni",
               "avx_vnni", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8"]
commit = git("rev-parse", "HEAD")
dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
started = datetime.datetime.now()
stamp = started.strftime("%Y%m%d-%H%M%S")
loads = [loadavg()]

def run_json(cmd, label):
    """Run cmd, return (last JSON line of stdout as dict, CPU seconds of the child)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    loads.append(loadavg())
    if p.returncode != 0:
        sys.stderr.write(p.stderr[-2000:])
        sys.exit(f"bench: {label} failed (exit {p.returncode}): {' '.join(cmd)}")
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if not lines:
        sys.exit(f"bench: {label} printed no JSON")
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return [json.loads(l) for l in lines], cpu

def measure():
    """Run everything; write the JSON; return (result, its path)."""
    global kernel_variant, dtypes, tmp, llama_features
    mk_help = subprocess.run([hs, "mkmodel", "--help"], capture_output=True, text=True).stdout
    if "q4_k_m" in dtypes and "q4_k_m" not in mk_help:
        log("headstart mkmodel has no --dtype q4_k_m yet; leaving it out")
        dtypes = [d for d in dtypes if d != "q4_k_m"]
    tmp = tempfile.mkdtemp(prefix="hs-bench.")
    atexit.register(shutil.rmtree, tmp, True)   # also when a run fails (sys.exit)
    # ---- models -----------------------------------------------------------------------------
    os.makedirs(model_dir, exist_ok=True)
    written = set()

    def model_path(preset, dt):
        # "qwen4exp": mkmodel's tiny Qwen3.8-Flash-Next geometry ([F12]); else a qwen35 preset
        arch = "qwen4exp" if preset == "qwen4exp" else "qwen35"
        name = f"{arch}-{'tiny' if arch == 'qwen4exp' else preset}-{dt}-s1.gguf"
        path = os.path.join(model_dir, name)
        if (refresh and path not in written) or not os.path.exists(path):
            log(f"writing {path}")
            written.add(path)
            part = os.path.join(model_dir, ".part-" + name)  # mkmodel wants the .gguf suffix
            shape = [] if arch == "qwen4exp" else ["--preset", preset]
            subprocess.run([hs, "mkmodel", "--arch", arch] + shape + ["--dtype", dt, "--seed", "1",
                            "--out", part], check=True, stdout=subprocess.DEVNULL)
            os.replace(part, path)
        return path

    def model_costs(path):
        """Bytes read per decoded token (weights) and FLOPs of a prefill, from inspect --json."""
        d = json.loads(subprocess.run([hs, "inspect", path, "--json"], check=True, capture_output=True, text=True).stdout)
        hp, kinds = d["hparams"], d["layers"]["kinds"]
        used = [t for t in d["tensors"] if t.get("used", True)]
        emb = next(t for t in used if t["name"] == "token_embd.weight")
        out = next((t for t in used if t["name"] == "output.weight"), None)
        head = emb if out is None else out   # tied embeddings: the LM head reads token_embd
        V, H = hp["n_vocab"], hp["n_embd"]
        # decode: every used tensor once, except the embedding matrix, of which one row is read
        # (plus the whole matrix again when it doubles as the LM head)
        w_bytes = sum(t["bytes"] for t in used if t is not emb) + emb["bytes"] // emb["shape"][0]
        if head is emb:
            w_bytes += emb["bytes"]
        n_attn = sum(1 for k in kinds if k == "ATTN")
        n_gdn = sum(1 for k in kinds if k == "GDN")
        kv_bytes_per_pos = n_attn * 2 * hp["n_head_kv"] * hp["head_dim"] * 4          # f32 K and V rows
        conv_ch = 2 * hp["gdn_k_heads"] * hp["gdn_k_dim"] + hp["gdn_v_heads"] * hp["gdn_v_dim"]
        state_bytes = n_gdn * (hp["gdn_v_heads"] * hp["gdn_k_dim"] * hp["gdn_v_dim"] + (hp["conv_kernel"] - 1) * conv_ch) * 4
        # prefill: 2 flops per weight element of every matrix (not the embedding lookup) per
        # token, the LM head once (last position only), causal attention QK^T and AV, and the
        # GDN recurrence (~7 flops per state element per token: decay, S^T k, rank-1 update, S^T q)
        mat_params = sum(math.prod(t["shape"]) for t in used if len(t["shape"]) >= 2 and t is not emb and t is not out)
        gdn_flops_tok = n_gdn * 7 * hp["gdn_v_heads"] * hp["gdn_k_dim"] * hp["gdn_v_dim"]
        def prefill_flops(T):
            return (2 * mat_params * T + 2 * V * H + n_attn * 4 * hp["n_head"] * hp["head_dim"] * T * (T + 1) / 2
                    + gdn_flops_tok * T)
        return {"weight_bytes_per_token": w_bytes, "kv_bytes_per_position": kv_bytes_per_pos,
                "gdn_state_bytes": state_bytes, "matrix_params": mat_params, "params_main": d["params"]["main"],
                "file_bytes": d["file_bytes"], "prefill_flops": prefill_flops}

    vocabs = {}
    def vocab_of(path):
        if path not in vocabs:
            d = json.loads(subprocess.run([hs, "inspect", path, "--json"], check=True, capture_output=True,
                                          text=True).stdout)
            vocabs[path] = d["hparams"]["n_vocab"]
        return vocabs[path]

    def ids_file(n, vocab):
        lim = min(idmax, vocab)   # a tiny model's vocabulary is smaller than idmax
        path = os.path.join(tmp, f"ids{n}-{lim}")
        if not os.path.exists(path):
            r = random.Random(1)
            open(path, "w").write(" ".join(str(r.randrange(lim)) for _ in range(n)))
        return path

    llama_bench = os.path.join(build, "llama_bench")
    def engine_cmd(engine, path, n_prompt, n_gen):
        if engine == "headstart":
            return [hs, "run", "-m", path, "--ids-file", ids_file(n_prompt, vocab_of(path)), "-n", str(n_gen + 1), "--temp", "0",
                    "--threads", str(threads), "--json"]
        return [llama_bench, "--lib-dir", libdir, path, "--prompt-ids", ids_file(n_prompt, vocab_of(path)), "-n", str(n_gen + 1),
                "--threads", str(threads)] + (["--cpu-lib", llama_cpu_lib] if llama_cpu_lib else [])

    # the runs: a 512-token prompt (serves prefill512 and decode128), a 4096-token prompt
    runs = []
    if "prefill512" in phases or "decode128" in phases:
        runs.append((512, 128 if "decode128" in phases else 0))
    if "prefill4096" in phases:
        runs.append((4096, 0))
    if "prefill8192" in phases or "decode8k" in phases:
        runs.append((8192, 64 if "decode8k" in phases else 0))

    # ---- roofline denominators -------------------------------------------------------------
    t_start = time.time()
    kernel_variant = None
    if models and dtypes:
        # the kernel variant the engine picks on this CPU, so the peak is that variant's
        j = run_json([hs, "run", "-m", model_path(models[0], dtypes[0]), "--ids", "1 2 3", "-n", "1", "--temp", "0",
                      "--threads", str(threads), "--json"], "headstart run (variant)")[0][-1]
        kernel_variant = j.get("kernels")
        if hs_level and kernel_variant != hs_level:
            sys.exit(f"bench: BENCH_ISA={isa} but headstart runs the {kernel_variant!r} kernels")
    # Probed before every model/dtype group and once at the end; the denominators are the
    # best seen (the least disturbed by other work), as the engines' tok/s are best-of too.
    bw_samples, peak_samples = [], {}
    def probe():
        rec = run_json([os.path.join(build, "bwprobe"), "--threads", str(threads), "--reps", "5"], "bwprobe")[0][0]
        bw_samples.append(rec)
        log(f"bandwidth probe, {threads} threads: stream {rec['stream_gb_s']:.2f} GB/s, "
            f"matrix-sized pieces {rec['pieces_gb_s']:.2f} GB/s")
        for rec in run_json([os.path.join(build, "kernels_bench"), "--peak", "--threads", str(threads)]
                            + (["--variant", kernel_variant] if kernel_variant else []), "kernels_bench")[0]:
            peak_samples.setdefault(rec["wtype"], []).append(rec)
            log(f"  matmul peak {rec['wtype']}: {rec['gflops']:.2f} GFLOP/s ({rec['variant']}, {threads} threads)")

    def peak_gflops(dt):
        """The best kernel this build has for the dtype's weights (bf16: either bf16 path)."""
        keys = {"bf16": ["bf16", "bf16_dp"], "q8_0": ["q8_0"], "q4_k_m": ["q4_k"]}.get(dt, [])
        vals = [r["gflops"] for k in keys for r in peak_samples.get(k, [])]
        return max(vals) if vals else None

    groups = []
    for preset in models:
        for dt in dtypes:
            path = model_path(preset, dt)
            cost = model_costs(path)
            probe()
            samples = {}   # (phase, engine) -> tok/s of each rep; ("cpu", run, engine) -> CPU s
            for rep in range(reps):
                order = ["headstart", "llama.cpp"] if rep % 2 == 0 else ["llama.cpp", "headstart"]
                for n_prompt, n_gen in runs:
                    for eng in order:
                        log(f"{preset} {dt} rep {rep + 1}/{reps}: {eng} prompt {n_prompt}, decode {n_gen} (load {loads[-1]:.2f})")
                        recs, cpu = run_json(engine_cmd(eng, path, n_prompt, n_gen), eng)
                        j = recs[-1]
                        if eng == "headstart":
                            kernel_variant = j.get("kernels", kernel_variant)
                        else:
                            llama_features = j.get("cpu_features", llama_features)
                            feats = (llama_features or "").split()
                            if isa != "native" and ("AVX2" not in feats or any(f.startswith("AVX512") for f in feats)
                                                    or (isa == "avxvnni") != ("AVX_VNNI" in feats)):
                                sys.exit(f"bench: BENCH_ISA={isa} but llama.cpp's CPU backend reports {llama_features!r}")
                        pf = f"prefill{n_prompt}"
                        if pf in phases:
                            samples.setdefault((pf, eng), []).append(j["prefill_tok_s"])
                        if n_gen:
                            dp = next(k for k, v in decode_runs.items() if v[0] == n_prompt)
                            samples.setdefault((dp, eng), []).append(j["decode_tok_s"])
                        samples.setdefault(("cpu", pf, eng), []).append(cpu)
                        log(f"  prefill {j['prefill_tok_s']:.2f} tok/s" + (f", decode {j['decode_tok_s']:.2f} tok/s" if n_gen else "")
                            + f", {cpu:.1f} CPU s")
            groups.append((preset, dt, cost, samples))
    if groups:
        probe()

    bw_best = max(bw_samples, key=lambda r: max(r["stream_gb_s"], r["pieces_gb_s"])) if bw_samples else None
    bw_gb_s = max(bw_best["stream_gb_s"], bw_best["pieces_gb_s"]) if bw_best else None
    rows = []
    for preset, dt, cost, samples in groups:
        for phase in [p for p in ["prefill512", "prefill4096", "prefill8192", "decode128", "decode8k"] if p in phases]:
            h, l = samples[(phase, "headstart")], samples[(phase, "llama.cpp")]
            pick = max if stat == "best" else statistics.median
            hv, lv = pick(h), pick(l)
            row = {"model": preset, "dtype": dt, "phase": phase, "headstart_tok_s": hv, "llama_tok_s": lv,
                   "ratio": hv / lv if lv else None, "headstart_samples": h, "llama_samples": l,
                   "file_bytes": cost["file_bytes"], "params_main": cost["params_main"]}
            if phase in decode_runs:
                n_p, n_g = decode_runs[phase]
                ctx = n_p + n_g // 2      # mean context over the decoded tokens
                b = cost["weight_bytes_per_token"] + cost["kv_bytes_per_position"] * ctx + cost["gdn_state_bytes"]
                row.update({"bytes_per_token": b, "weight_bytes_per_token": cost["weight_bytes_per_token"],
                            "roofline_basis": "read bandwidth", "bandwidth_gb_s": bw_gb_s,
                            "achieved_gb_s": hv * b * 1e-9,
                            "roofline_pct": 100 * hv * b * 1e-9 / bw_gb_s,
                            "llama_roofline_pct": 100 * lv * b * 1e-9 / bw_gb_s})
            else:
                T = int(phase[len("prefill"):])
                fl = cost["prefill_flops"](T)
                pk = peak_gflops(dt)
                achieved = hv * fl / T * 1e-9
                row.update({"flops_per_token": fl / T, "achieved_gflops": achieved,
                            "llama_achieved_gflops": lv * fl / T * 1e-9,
                            "roofline_basis": "matmul peak", "peak_gflops": pk,
                            "roofline_pct": 100 * achieved / pk if pk else None,
                            "llama_roofline_pct": 100 * lv * fl / T * 1e-9 / pk if pk else None})
            for eng, key in (("headstart", "headstart_cpu_s"), ("llama.cpp", "llama_cpu_s")):
                c = samples.get(("cpu", f"prefill{decode_runs[phase][0]}" if phase in decode_runs else phase, eng))
                if c:
                    row[key] = min(c)
            rows.append(row)

    # ---- capture cost --------------------------------------------------------------------------
    capture = None
    if do_capture and models and dtypes:
        cdt = "q8_0" if "q8_0" in dtypes else dtypes[0]
        path = model_path(models[0], cdt)
        log(f"capture cost: {models[0]} {cdt}, {cap_tokens} tokens, {cap_n} captures vs none, {cap_reps} reps each")
        recs, _ = run_json([os.path.join(build, "capture_bench"), "-m", path, "--ids-file", ids_file(cap_tokens, vocab_of(path)),
                            "--captures", str(cap_n), "--threads", str(threads), "--reps", str(cap_reps)], "capture_bench")
        capture = dict(recs[-1], model=models[0], dtype=cdt)

    elapsed = time.time() - t_start
    shutil.rmtree(tmp, ignore_errors=True)

    # ---- result ------------------------------------------------------------------------------
    result = {
        "date": started.isoformat(timespec="seconds"), "elapsed_s": round(elapsed, 1),
        "machine": {"cpu_model": cpu_model, "cpu_flags": [f for f in interesting if f in cpu_flags],
                    "logical_cpus": os.cpu_count(), "kernel": platform.release(),
                    "load_avg_1m": {"min": min(loads), "max": max(loads), "mean": sum(loads) / len(loads),
                                    "samples": loads}},
        "headstart": {"git_commit": commit, "dirty": dirty, "kernel_variant": kernel_variant, "build": build},
        "llama_cpp": {"library": "node-llama-cpp prebuilt libllama v0.5.0", "lib_dir": libdir,
                      "cpu_library": llama_cpu_lib or "best for this CPU", "cpu_features": llama_features},
        "settings": {"isa": isa, "threads": threads, "reps": reps, "stat": stat, "models": models, "dtypes": dtypes,
                     "phases": phases, "prompt_ids": f"uniform below {idmax}, seed 1", "mkmodel": "qwen35 seed 1"},
        "bandwidth": {"gb_s": bw_gb_s, "best": bw_best, "samples": bw_samples},
        "matmul_peak": {k: {"gflops": max(r["gflops"] for r in v), "samples": v} for k, v in peak_samples.items()},
        "rows": rows, "capture": capture,
    }
    os.makedirs(out_dir, exist_ok=True)
    jpath = os.path.join(out_dir, f"bench-{stamp}.json")
    json.dump(result, open(jpath, "w"), indent=1)

    return result, jpath

def fmt(v, f):
    return "-" if v is None else format(v, f)

def report(res, jpath):
    """Print the table of a result and draw its chart next to the JSON file."""
    st, mach, hsi = res["settings"], res["machine"], res["headstart"]
    rows, capture, la = res["rows"], res["capture"], mach["load_avg_1m"]
    ver = f"{hsi['git_commit'][:10]}{'+dirty' if hsi['dirty'] else ''}"
    hdr = f"{'model':5} {'dtype':6} {'phase':11} {'headstart':>10} {'llama.cpp':>10} {'ratio':>6} {'%roof':>6}  roofline basis"
    lc = res.get("llama_cpp", {})
    print(f"\nheadstart vs llama.cpp, {st['threads']} threads, {st['stat']} of {st['reps']} alternating runs (tok/s); "
          f"kernels {hsi['kernel_variant']}; commit {ver}; ISA {st.get('isa', 'native')}")
    print(f"llama.cpp CPU library: {lc.get('cpu_library', 'best for this CPU')} ({lc.get('cpu_features') or '?'})")
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        basis = (f"{r['achieved_gb_s']:.1f} of {r['bandwidth_gb_s']:.1f} GB/s read" if r["phase"].startswith("decode")
                 else f"{r['achieved_gflops']:.1f} of {fmt(r['peak_gflops'], '.1f')} GFLOP/s matmul peak")
        print(f"{r['model']:5} {r['dtype']:6} {r['phase']:11} {r['headstart_tok_s']:10.2f} {r['llama_tok_s']:10.2f} "
              f"{fmt(r['ratio'], '6.2f')} {fmt(r['roofline_pct'], '6.1f')}  {basis}")
    if capture:
        print(f"capture cost: {capture['model']} {capture['dtype']} prefill {capture['tokens']} tokens, "
              f"{capture['captures']} captures vs none: {capture['cost_best_pct']:+.2f}% (best wall), "
              f"{capture['cost_median_pct']:+.2f}% (median wall), {capture['cost_cpu_pct']:+.2f}% (CPU s), "
              f"{capture['cost_copy_pct']:.3f}% (the copies alone, {capture['copy_s'] * 1e3:.1f} ms); "
              f"none {capture['none']['best_s']:.2f} s, with {capture['caps']['best_s']:.2f} s")
    print(f"load average (1 min) during the runs: min {la['min']:.2f}, mean {la['mean']:.2f}, max {la['max']:.2f} "
          f"on {mach['logical_cpus']} CPUs; elapsed {res['elapsed_s'] / 60:.1f} min")
    print(f"wrote {jpath}")
    if not rows:
        return
    if not shutil.which("gnuplot"):
        log("no gnuplot (make deps installs gnuplot-nox): no chart")
        return
    base = os.path.splitext(jpath)[0]
    ppath, dpath = base + ".png", os.path.join(os.path.dirname(jpath), "." + os.path.basename(base) + ".dat")
    with open(dpath, "w") as f:
        for r in rows:
            target = 1.15 if r["phase"].startswith("decode") else 2.0
            label = f"{r['model']} {r['dtype']}\\n{r['phase'].replace('prefill', 'prefill ').replace('decode', 'decode ')}"
            f.write(f"\"{label}\" {r['ratio'] or 0:.4f} {r['roofline_pct'] or 0:.2f} {target} "
                    f"{r['headstart_tok_s']:.4f} {r['llama_tok_s']:.4f}\n")
    n = len(rows)
    title = (f"headstart vs llama.cpp: {st['threads']} threads, {st['stat']} of {st['reps']} alternating runs, "
             f"kernels {hsi['kernel_variant']} vs llama.cpp {res.get('llama_cpp', {}).get('cpu_library', 'best')}, commit {ver}\\n"
             f"{mach['cpu_model']}, {mach['logical_cpus']} CPUs; load average {la['min']:.1f}-{la['max']:.1f}; {res['date']}")
    gp = f"""
set terminal pngcairo noenhanced size {max(900, 120 * n + 220)},1180 font 'sans,10'
set output '{ppath}'
set multiplot layout 3,1 title "{title}" font ',11'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set grid ytics
set xtics nomirror font ',9'
set xrange [-0.6:{n - 0.4}]
set bmargin 4
set key top left
set key top right
set title 'Speed (tok/s, log scale)'
set ylabel 'tokens / s'
set logscale y
set yrange [*:*]
plot '{dpath}' using 5:xtic(1) title 'headstart' lc rgb '#3a78b5', \\
     '' using 6 title 'llama.cpp' lc rgb '#ff7f0e'
unset logscale y
set key top left
set title 'Speed ratio headstart / llama.cpp (bars); issue targets: prefill >= 2.0, decode >= 1.15 (red marks)'
set ylabel 'ratio'
set yrange [0:*]
set offsets 0,0,0.3,0
plot '{dpath}' using 2:xtic(1) title 'ratio' lc rgb '#3a78b5', \\
     '' using 0:4 with points pt 7 ps 1.4 lc rgb '#d62728' title 'target', \\
     '' using 0:2:(sprintf('%.2f', $2)) with labels offset 0,0.8 notitle, \\
     1 with lines dt 2 lc rgb '#555555' title 'parity'
set title 'headstart against this machine: decode = bytes/token x tok/s / probe GB/s; prefill = GFLOP/s / matmul kernel peak'
set ylabel '% of roofline'
set yrange [0:120]
set offsets 0,0,0,0
plot '{dpath}' using 3:xtic(1) title '% roofline' lc rgb '#2ca02c', \\
     '' using 0:3:(sprintf('%.0f%%', $3)) with labels offset 0,0.8 notitle, \\
     100 with lines dt 2 lc rgb '#555555' notitle
unset multiplot
"""
    g = subprocess.run(["gnuplot"], input=gp, text=True, capture_output=True)
    os.remove(dpath)
    if g.returncode != 0:
        log("gnuplot failed:", g.stderr.strip()[-500:])
    else:
        print(f"wrote {ppath}")

replot = env("BENCH_REPLOT", "")
if replot:
    report(json.load(open(replot)), replot)
else:
    report(*measure())
PY
