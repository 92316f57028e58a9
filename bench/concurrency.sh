#!/bin/sh
# concurrency.sh — the [F10] benchmarks (issue 15): many sessions at once against one
# `headstart serve`, side by side with llama.cpp decoding the same number of sequences in one
# batch (bench/llama_batch.c on the npm package's libllama), same GGUF, same threads. Writes
# bench/results/concurrency.md (the tables), concurrency.json (every sample) and
# concurrency.png (aggregate tok/s against streams); concurrency-avx2.* with BENCH_ISA=avx2 (and
# concurrency-avxvnni.* with BENCH_ISA=avxvnni).
# Never part of make test: measurements, not pass/fail; the goals are printed beside the
# numbers.
#
#   sh bench/concurrency.sh [BUILD]      (BUILD defaults to build)
#
# Three parts per dtype, each against a fresh `headstart serve` (RAM bank only):
#   streams  aggregate decode tok/s at N = 1, 2, 4, 8 concurrent streaming clients (distinct
#            BENCH_PROMPT-token prompts, ignore_eos, max_tokens BENCH_GEN), and llama_batch at
#            the same N on the same prompt ids; ratios headstart N / headstart 1 and
#            headstart / llama.cpp.
#   ttft     TTFT of a BENCH_SHORT-token request sent while a BENCH_LONG-token prefill runs,
#            against the same-size request alone, and the time of one --step-tokens chunk.
#   head     BENCH_HEAD_SESSIONS new sessions sharing one BENCH_HEAD-token head (system text),
#            sent within BENCH_HEAD_SPREAD_MS: head tokens prefilled in total, from /metrics.
#
# Definitions (the same for both engines; bench/README.md repeats them):
#   1. A stream generates G = BENCH_GEN tokens (ignore_eos). Its decode interval is
#      [f, e]: f = the client's send time + the server's TTFT (submit to first generated
#      token, from the request's JSON log line: the text of a token can be empty, such as the
#      padding rows of the 0.8b preset's vocabulary, so text deltas cannot time tokens);
#      e = arrival of the stream's final message_delta (after the last token). G - 1 tokens
#      are decoded inside it. The server's finish step (feeding the last token, the bank
#      store) lies inside too: a bias against headstart of about one step in G.
#   2. Aggregate decode tok/s = sum over streams of (G - 1) / |union of the decode
#      intervals| (total length of the time in which at least one stream decodes; gaps with
#      no stream decoding, such as a one-at-a-time server prefilling its next request, do
#      not count, so such a server shows its single-stream rate, flat).
#   3. The prompts are sent once before the measured runs (max_tokens 1, BENCH_WARM=1), so
#      the measured requests restore their prompt from the session bank and start decoding
#      within a step of each other: the union is then the time in which all N decode, not
#      other streams' prefill chunks. The table shows the cached share and the start skew.
#   4. llama.cpp: llama_batch prefills the N prompts one by one (not timed), then runs G - 1
#      steps of one llama_batch holding the next token of every sequence: tok/s =
#      N x (G - 1) / those steps' seconds — the same quantity, as there every interval is the
#      same window.
#   5. Chunk time = the server's seconds per prefill token x --step-tokens: from /metrics
#      (headstart_step_seconds_total / headstart_step_tokens_total over the lone long
#      prefill) when the server has them, else the lone long request's TTFT / its prompt
#      tokens. The TTFT goal: short during <= short alone + one chunk.
#   6. Head tokens prefilled = prompt tokens computed during the head run
#      (headstart_prefill_tokens_total, or prompt - cached from the usage of the responses
#      when the server has no such counter) - what the sessions computed past the head (each
#      session's prompt - max(head, its cached tokens)); the goal is 1 x head.
#
# Environment (defaults in brackets):
#   BENCH_MODEL    [0.8b]        mkmodel --preset (qwen35, seed 1); tiny for a quick check
#   BENCH_DTYPES   ["q8_0 q4_k_m"]
#   BENCH_STREAMS  ["1 2 4 8"]   BENCH_GEN [128]   BENCH_PROMPT [512]   BENCH_THREADS [2]
#   BENCH_REPS     [1]           runs of each engine per stream count (best kept; alternating)
#   BENCH_PARTS    ["streams ttft head"]
#   BENCH_LLAMA    [1]           0: the streams part runs headstart only (llama.cpp columns "-")
#   BENCH_ISA      [native]      avx2: both engines on their AVX2 code, whatever the CPU has
#                  ([F14], as run.sh): the servers with HEADSTART_CPU=avx2 (checked: the start
#                  line must say kernels avx2), llama_batch with llama.cpp's haswell CPU library
#                  (checked: its backend must report AVX2 and no AVX512). avxvnni: the same at
#                  the AVX-VNNI level (HEADSTART_CPU=avxvnni, llama.cpp's alderlake library,
#                  which must report AVX_VNNI), on a CPU that has it
#   BENCH_B_ENV    [""]          "NAME=VALUE ...": the streams part compares headstart with a second
#                  headstart server started with these variables added (e.g. HEADSTART_NO_PACK=1),
#                  in place of llama.cpp, alternating the two within each stream count as it
#                  alternates with llama.cpp (a loaded machine's swings then hit both alike);
#                  the llama.cpp columns hold B and say so
#   BENCH_B_HS     [""]          a headstart binary for B (another build; with or without BENCH_B_ENV)
#   BENCH_SHORT    [64]          BENCH_LONG [4096]   BENCH_TTFT_AT [0.3]: the short request is
#                  sent at this fraction of the lone long request's TTFT after the long one
#   BENCH_HEAD     [8192]        BENCH_HEAD_SESSIONS [4]   BENCH_HEAD_SPREAD_MS [100]
#   BENCH_HEAD_GEN [8]           max_tokens of the head sessions
#   BENCH_STEP_TOKENS [256]      --step-tokens of the server
#   BENCH_PARALLEL [the server's default]   BENCH_CTX [the server's default]
#   BENCH_WARM     [1]           0: the stream prompts are not sent beforehand (definition 3)
#   BENCH_MODEL_DIR [build/bench-models] (shared with run.sh)   BENCH_REFRESH [0]
#   BENCH_OUT      [bench/results]
#
# A quick check of the script (seconds; not a measurement): BENCH_MODEL=tiny
# BENCH_DTYPES=q8_0 BENCH_STREAMS="1 2" BENCH_GEN=8 BENCH_PROMPT=64 BENCH_LONG=512
# BENCH_SHORT=16 BENCH_HEAD=512 BENCH_OUT=/tmp/cc sh bench/concurrency.sh
set -u
build=${1:-${HEADSTART_BUILD:-build}}
hs=$build/headstart
libdir=$PWD/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64

die() { echo "concurrency: $*" >&2; exit 1; }
[ -x "$hs" ] || die "no $hs (make BUILD=$build)"
[ -f "$libdir/libllama.v0.5.0.so" ] || die "no llama.cpp library in $libdir (make deps)"

# llama.cpp headers of the exact version of the library (as run.sh)
inc=$build/llama-include
[ -f "$inc/include/llama.h" ] || [ ! -f build/llama-include/include/llama.h ] || inc=build/llama-include
if [ ! -f "$inc/include/llama.h" ] || [ ! -f "$inc/ggml/include/ggml-backend.h" ]; then
    src=$build/llama-src
    [ -d "$src/.git" ] || sh tools/embed_template.sh "$build" "$build/gen/chat_template.c" >/dev/null 2>&1
    [ -d "$src/.git" ] || die "no llama.cpp source bundle in $src (make deps)"
    rm -rf "$inc" && mkdir -p "$inc"
    git -C "$src" archive HEAD include ggml/include | tar -x -C "$inc" || die "extracting llama.cpp headers"
fi
if [ ! -x "$build/llama_batch" ] || [ bench/llama_batch.c -nt "$build/llama_batch" ]; then
    ${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes -Werror \
        -isystem "$inc/include" -isystem "$inc/ggml/include" \
        bench/llama_batch.c -o "$build/llama_batch" -L"$libdir" -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so \
        -l:libggml-base.so -Wl,-rpath,"$libdir" -lm || die "building llama_batch failed"
fi
command -v gnuplot >/dev/null 2>&1 || echo "concurrency: no gnuplot (make deps installs gnuplot-nox); no chart" >&2

exec /usr/bin/python3 - "$build" "$libdir" <<'PY'
import datetime, http.client, json, os, platform, random, re, shutil, subprocess, sys, tempfile, threading, time

build, libdir = sys.argv[1], sys.argv[2]
hs = os.path.join(build, "headstart")
env = os.environ.get
preset = env("BENCH_MODEL", "0.8b")
dtypes = env("BENCH_DTYPES", "q8_0 q4_k_m").split()
streams = [int(s) for s in env("BENCH_STREAMS", "1 2 4 8").split()]
gen = int(env("BENCH_GEN", "128"))
prompt_len = int(env("BENCH_PROMPT", "512"))
threads = int(env("BENCH_THREADS", "2"))
reps = int(env("BENCH_REPS", "1"))
with_llama = env("BENCH_LLAMA", "1") != "0"
isa = env("BENCH_ISA", "native")
# per ISA: headstart's HEADSTART_CPU level, llama.cpp's CPU library (None: the best for the CPU)
isa_table = {"native": (None, None), "avx2": ("avx2", "libggml-cpu-haswell.so"),
             "avxvnni": ("avxvnni", "libggml-cpu-alderlake.so")}
if isa not in isa_table:
    sys.exit(f"concurrency: BENCH_ISA is one of {' '.join(isa_table)}")
hs_level, llama_cpu_lib = isa_table[isa]
if hs_level:
    os.environ["HEADSTART_CPU"] = hs_level   # every server this script starts
else:
    os.environ.pop("HEADSTART_CPU", None)
b_env = dict(kv.split("=", 1) for kv in env("BENCH_B_ENV", "").split() if "=" in kv)
b_hs = env("BENCH_B_HS", "")
b_label = " ".join([f"headstart {b_hs}" if b_hs else "headstart"] + [f"{k}={v}" for k, v in b_env.items()])
parts = env("BENCH_PARTS", "streams ttft head").split()
short_len, long_len = int(env("BENCH_SHORT", "64")), int(env("BENCH_LONG", "4096"))
ttft_at = float(env("BENCH_TTFT_AT", "0.3"))
head_len, head_n = int(env("BENCH_HEAD", "8192")), int(env("BENCH_HEAD_SESSIONS", "4"))
head_spread_ms, head_gen = float(env("BENCH_HEAD_SPREAD_MS", "100")), int(env("BENCH_HEAD_GEN", "8"))
step_tokens = int(env("BENCH_STEP_TOKENS", "256"))
parallel, ctx = env("BENCH_PARALLEL", ""), env("BENCH_CTX", "")
warm = env("BENCH_WARM", "1") != "0"
model_dir, out_dir = env("BENCH_MODEL_DIR", "build/bench-models"), env("BENCH_OUT", "bench/results")
refresh = env("BENCH_REFRESH", "0") == "1"
for p in parts:
    if p not in ("streams", "ttft", "head"):
        sys.exit(f"concurrency: unknown part {p!r} (streams, ttft, head)")
if gen < 2 or reps < 1 or not streams or min(streams) < 1:
    sys.exit("concurrency: BENCH_GEN >= 2, BENCH_REPS >= 1 and BENCH_STREAMS >= 1 each")

def log(*a):
    print("concurrency:", *a, file=sys.stderr, flush=True)

def loadavg():
    return float(open("/proc/loadavg").read().split()[0])

def git(*a):
    r = subprocess.run(["git", *a], capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else ""

cpu_model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
commit = git("rev-parse", "HEAD")
dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
started = datetime.datetime.now()
loads = [loadavg()]
tmp = tempfile.mkdtemp(prefix="hs-concurrency.")


# ---- models and prompts ---------------------------------------------------------------------
def model_path(dt):
    """run.sh's cache and names, so both benchmarks share the generated files."""
    name = f"qwen35-{preset}-{dt}-s1.gguf"
    path = os.path.join(model_dir, name)
    if refresh or not os.path.exists(path):
        os.makedirs(model_dir, exist_ok=True)
        log(f"writing {path}")
        part = os.path.join(model_dir, ".part-" + name)   # mkmodel wants the .gguf suffix
        subprocess.run([hs, "mkmodel", "--arch", "qwen35", "--preset", preset, "--dtype", dt, "--seed", "1",
                        "--out", part], check=True, stdout=subprocess.DEVNULL)
        os.replace(part, path)
    return path

SYL = ["ka", "lo", "mi", "ren", "to", "sa", "vel", "dor", "pi", "nu", "gar", "es", "tim", "bo", "ly", "qua",
       "zen", "fi", "ho", "mar", "ut", "se", "win", "dra", "ko", "pel", "ri", "an", "jo", "cus"]

def words(label, n):
    """n pseudo-words from a stream named by label: prompts of different labels differ from
    their first word, so no two share more than the template's first tokens."""
    r = random.Random(label)
    return ["".join(r.choice(SYL) for _ in range(r.randint(1, 3))) for _ in range(n)]

def body(user, system=None, max_tokens=1, stream=True):
    b = {"model": "bench", "max_tokens": max_tokens, "stream": stream, "ignore_eos": True,
         "messages": [{"role": "user", "content": user}]}
    if system is not None:
        b["system"] = system
    return b

render_calls = [0, 0.0]   # calls of headstart render, their seconds (logged: prompt sizing cost)

def render(path, b, what):
    t0 = time.time()
    render_calls[0] += 1
    f = os.path.join(tmp, "req.json")
    with open(f, "w") as fh:
        json.dump(b, fh)
    r = subprocess.run([hs, "render", "-m", path, "--request", f, "--api", "anthropic", what],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"concurrency: headstart render failed: {r.stderr.strip()[-500:]}")
    render_calls[1] += time.time() - t0
    return r.stdout.split()

def fit(count, make, label, target):
    """The text of label's words whose count() is target (or the nearest below it when no
    padding reaches it): the most words that fit, then one-letter words to fill."""
    ws = words(label, max(16, target))
    while count(make(" ".join(ws))) <= target:
        ws += words(label + "+", len(ws))
    lo, hi = 0, len(ws)               # count(lo words) <= target < count(hi words)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if count(make(" ".join(ws[:mid]))) <= target: lo = mid
        else: hi = mid
    text, n = " ".join(ws[:lo]), count(make(" ".join(ws[:lo])))
    for _ in range(16):
        if n == target:
            break
        for c in "aeiou.,;":
            m = count(make(text + " " + c))
            if m <= target and m > n:
                text, n = text + " " + c, m
                break
        else:
            break
    return text, n

sized = {}   # (kind, label, target) -> a prompt sized on an earlier model (the dtypes share a tokenizer)

class Prompts:
    """The requests of one model, sized in tokens by the model's own template and tokenizer
    (`headstart render --ids` / `--head` over the Anthropic body that is sent). A prompt
    sized on another model is kept when this model renders it to the same token count."""
    def __init__(self, path):
        self.path = path
    def user(self, label, target):
        ids = lambda b: len(render(self.path, b, "--ids"))
        old = sized.get(("user", label, target))
        if old:
            got = render(self.path, body(old["text"]), "--ids")
            if len(got) == old["tokens"]:
                return dict(old, ids=got)
        text, n = fit(ids, lambda t: body(t), label, target)
        sized[("user", label, target)] = r = {"label": label, "text": text, "tokens": n,
                                              "ids": render(self.path, body(text), "--ids")}
        return r
    def head(self, label, target):
        head = lambda b: int(render(self.path, b, "--head")[0])
        old = sized.get(("head", label, target))
        if old and head(body("x", system=old["system"])) == old["head_tokens"]:
            return old
        text, n = fit(head, lambda t: body("x", system=t), label, target)
        sized[("head", label, target)] = r = {"label": label, "system": text, "head_tokens": n}
        return r


# ---- the server -----------------------------------------------------------------------------
class Server:
    def __init__(self, path, tag, extra_env=None, binary=None):
        cmd = [binary or hs, "serve", "-m", path, "--port", "0", "--threads", str(threads), "--no-bank-disk",
               "--step-tokens", str(step_tokens)]
        if parallel: cmd += ["--parallel", parallel]
        if ctx: cmd += ["--ctx", ctx]
        self.err_path = os.path.join(tmp, f"serve-{tag}.err")
        # --log-format json: the start line and one line per request (its TTFT) on stderr
        self.p = subprocess.Popen(cmd + ["--log-format", "json"], stdout=subprocess.DEVNULL,
                                  stderr=open(self.err_path, "w"),
                                  env=dict(os.environ, **extra_env) if extra_env else None)
        self.start_line, self.seen = "", 0
        deadline = time.time() + 600
        while time.time() < deadline and not self.start_line and self.p.poll() is None:
            time.sleep(0.1)
            for rec in self.log_records():
                m = rec.get("msg", "")
                if m.startswith("headstart serve:") and "listening on" in m:
                    self.start_line = m
        if not self.start_line:
            self.stop()
            sys.exit(f"concurrency: headstart serve did not start: {open(self.err_path).read()[-1500:]}")
        self.port = int(re.search(r":(\d+)$", self.start_line).group(1))
        m = re.search(r"kernels ([^,]+),", self.start_line)
        self.kernels = m.group(1) if m else "?"
        if hs_level and self.kernels.split()[0] != hs_level:  # "avx2 (weights packed: N MiB)"
            self.stop()
            sys.exit(f"concurrency: BENCH_ISA={isa} but headstart runs the {self.kernels!r} kernels")
        self.requests = {}     # request id -> its log record
        log(self.start_line)

    def log_records(self):
        out = []
        with open(self.err_path, errors="replace") as fh:
            for line in fh:
                if line.startswith("{"):
                    try: out.append(json.loads(line))
                    except ValueError: pass
        return out

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()

    def metrics(self):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
        c.close()
        m = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                k, _, v = line.rpartition(" ")
                try: m[k] = float(v)
                except ValueError: pass
        return m

    def request_log(self, msg_id):
        """The server's log record of a request, which the connection thread writes as the
        stream ends: waited for up to 30 s (2 s were too short on a machine loaded 3x over,
        where the line came later and the run died)."""
        for _ in range(1500):
            if msg_id in self.requests:
                return self.requests[msg_id]
            for rec in self.log_records():
                if rec.get("event") == "request" and "id" in rec:
                    self.requests[rec["id"]] = rec
            if msg_id in self.requests:
                return self.requests[msg_id]
            time.sleep(0.02)
        return None

    def stream(self, b):
        """Send one streaming /v1/messages request: its send time, the server's TTFT, the
        arrival of its final message_delta, the usage, and (a diagnostic) the content deltas
        (not signature deltas: those come with the block's end)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=3600)
        payload = json.dumps(b)
        t_send = time.perf_counter()
        c.request("POST", "/v1/messages", body=payload, headers={"Content-Type": "application/json"})
        resp = c.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {resp.read()[:500]!r}")
        deltas, usage, msg_id, t_end = [], {}, None, None
        for raw in resp:
            if not raw.startswith(b"data: "):
                continue
            d = json.loads(raw[6:])
            t = d.get("type")
            if t == "content_block_delta" and d["delta"].get("type") != "signature_delta":
                deltas.append(time.perf_counter())
            elif t == "message_start":
                msg_id = d["message"]["id"]
            elif t == "message_delta":
                usage = d.get("usage", {})
                t_end = time.perf_counter()
            elif t == "error":
                raise RuntimeError(f"stream error: {d}")
        c.close()
        cached = usage.get("cache_read_input_tokens", 0)
        rec = self.request_log(msg_id) if msg_id else None
        if not rec or rec.get("ttft_ms") is None or t_end is None:
            raise RuntimeError(f"no request log line with a TTFT, or no message_delta, for {msg_id}")
        ttft = rec["ttft_ms"] / 1000
        return {"send": t_send, "first": t_send + ttft, "last": t_end, "ttft_s": ttft,
                "client_ttft_s": deltas[0] - t_send if deltas else None, "deltas": len(deltas),
                "generated": usage.get("output_tokens", 0), "prompt": usage.get("input_tokens", 0) + cached,
                "cached": cached}

def run_together(fns, delays=None):
    """Run the callables in threads released together (each after its delay, seconds)."""
    out, errs = [None] * len(fns), []
    gate = threading.Barrier(len(fns))
    def go(i):
        try:
            gate.wait()
            if delays: time.sleep(delays[i])
            out[i] = fns[i]()
        except Exception as e:      # reported after the join
            errs.append(e)
    ts = [threading.Thread(target=go, args=(i,)) for i in range(len(fns))]
    for t in ts: t.start()
    for t in ts: t.join()
    if errs:
        raise errs[0]
    return out

def union_length(iv):
    total, end = 0.0, None
    for a, b in sorted(iv):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


# ---- the parts ------------------------------------------------------------------------------
llama_batch = os.path.join(build, "llama_batch")

def part_streams(srv, path, pr):
    n_max = max(streams)
    sp = [pr.user(f"stream-{i}", prompt_len) for i in range(n_max)]
    ids_path = os.path.join(tmp, "stream-ids")
    with open(ids_path, "w") as f:
        for p in sp: f.write(" ".join(p["ids"]) + "\n")
    srv_b = Server(path, "streams-b", b_env, b_hs) if b_env or b_hs else None
    if srv_b: log(f"B ({b_label}): {srv_b.start_line}")
    if warm:
        log(f"sending the {n_max} stream prompts once (max_tokens 1) so the measured requests restore them")
        for p in sp:
            srv.stream(body(p["text"]))
            if srv_b: srv_b.stream(body(p["text"]))
    try:
        return streams_rows(srv, srv_b, path, sp, ids_path)
    finally:
        if srv_b: srv_b.stop()


def streams_rows(srv, srv_b, path, sp, ids_path):
    rows = []
    for n in streams:
        hs_samples, ll_samples, hs_runs, ll_runs = [], [], [], []
        for rep in range(reps):
            engines = ["headstart", "llama.cpp"] if with_llama or srv_b else ["headstart"]
            for eng in (engines if rep % 2 == 0 else engines[::-1]):
                loads.append(loadavg())
                if eng == "headstart" or srv_b:
                    s_ = srv_b if eng != "headstart" else srv
                    samples, runs, label = ((hs_samples, hs_runs, "headstart") if eng == "headstart"
                                            else (ll_samples, ll_runs, "headstart B"))
                    try:
                        rs = run_together([lambda p=p: s_.stream(body(p["text"], max_tokens=gen)) for p in sp[:n]])
                    except RuntimeError as ex:
                        # seen only on a machine loaded 3x over: a request's log line never
                        # came; the run counts as no sample (the other reps still do)
                        log(f"warning: {label}, {n} streams, rep {rep}: {ex}; no sample")
                        samples.append(None)
                        runs.append(None)
                        continue
                    tok = sum(r["generated"] - 1 for r in rs)
                    span = union_length([(r["first"], r["last"]) for r in rs])
                    rate = tok / span if span > 0 else None
                    short = [r["generated"] for r in rs if r["generated"] != gen]
                    if short: log(f"warning: streams generated {short} tokens, not {gen}")
                    samples.append(rate)
                    runs.append({"rate": rate, "decode_tokens": tok, "union_s": span,
                                    "start_skew_s": max(r["first"] for r in rs) - min(r["first"] for r in rs),
                                    "ttft_s": [r["ttft_s"] for r in rs], "prompt": [r["prompt"] for r in rs],
                                    "cached": [r["cached"] for r in rs], "generated": [r["generated"] for r in rs],
                                    "deltas": [r["deltas"] for r in rs]})
                    log(f"{n} streams: {label} {rate or 0:.2f} tok/s ({tok} tokens in {span:.2f} s)")
                else:
                    p = subprocess.run([llama_batch, "--lib-dir", libdir, path, "--prompt-ids", ids_path,
                                        "--streams", str(n), "-n", str(gen), "--threads", str(threads)]
                                       + (["--cpu-lib", llama_cpu_lib] if llama_cpu_lib else []),
                                       capture_output=True, text=True, stdin=subprocess.DEVNULL)
                    if p.returncode != 0:
                        sys.exit(f"concurrency: llama_batch failed: {p.stderr.strip()[-1500:]}")
                    j = json.loads([l for l in p.stdout.splitlines() if l.startswith("{")][-1])
                    feats = j.get("cpu_features", "").split()
                    if isa != "native" and ("AVX2" not in feats or any(f.startswith("AVX512") for f in feats)
                                            or (isa == "avxvnni") != ("AVX_VNNI" in feats)):
                        sys.exit(f"concurrency: BENCH_ISA={isa} but llama.cpp's CPU backend reports {j.get('cpu_features')!r}")
                    ll_samples.append(j["aggregate_tok_s"])
                    ll_runs.append(j)
                    log(f"{n} streams: llama.cpp {j['aggregate_tok_s']:.2f} tok/s "
                        f"({j['decode_tokens']} tokens in {j['decode_seconds']:.2f} s)")
        best = max(range(len(hs_samples)), key=lambda i: hs_samples[i] or 0)
        rows.append({"streams": n, "headstart_tok_s": hs_samples[best], "llama_tok_s": max((x for x in ll_samples if x), default=None),
                     "headstart_samples": hs_samples, "llama_samples": ll_samples, "headstart_run": hs_runs[best],
                     "headstart_runs": hs_runs, "llama_runs": ll_runs})
    one = next((r["headstart_tok_s"] for r in rows if r["streams"] == 1), None)
    for r in rows:
        r["vs_one"] = r["headstart_tok_s"] / one if one and r["headstart_tok_s"] else None
        r["vs_llama"] = r["headstart_tok_s"] / r["llama_tok_s"] if r["headstart_tok_s"] and r["llama_tok_s"] else None
    return {"prompt_tokens": [p["tokens"] for p in sp], "rows": rows}

def step_rate(m0, m1):
    """Seconds per prefill token over the steps between two /metrics readings, if counted."""
    k_s, k_t = "headstart_step_seconds_total", "headstart_step_tokens_total"
    if k_s in m1 and k_t in m1 and m1[k_t] > m0.get(k_t, 0):
        return (m1[k_s] - m0.get(k_s, 0)) / (m1[k_t] - m0.get(k_t, 0))
    return None

def part_ttft(srv, pr):
    long_a, long_b = pr.user("long-alone", long_len), pr.user("long-during", long_len)
    short_a, short_b = pr.user("short-alone", short_len), pr.user("short-during", short_len)
    m0 = srv.metrics()
    la = srv.stream(body(long_a["text"]))
    m1 = srv.metrics()
    sa = srv.stream(body(short_a["text"]))
    per_tok = step_rate(m0, m1)
    src = "metrics"
    if per_tok is None:
        per_tok, src = la["ttft_s"] / long_a["tokens"], "lone long TTFT"
    delay = ttft_at * la["ttft_s"]
    lb, sb = run_together([lambda: srv.stream(body(long_b["text"])), lambda: srv.stream(body(short_b["text"]))],
                          delays=[0, delay])
    chunk = per_tok * step_tokens
    r = {"short_tokens": short_a["tokens"], "long_tokens": long_a["tokens"], "short_alone_ttft_s": sa["ttft_s"],
         "short_during_ttft_s": sb["ttft_s"], "long_alone_ttft_s": la["ttft_s"], "long_during_ttft_s": lb["ttft_s"],
         "sent_after_s": sb["send"] - lb["send"], "step_tokens": step_tokens, "chunk_s": chunk, "chunk_source": src,
         "bound_s": sa["ttft_s"] + chunk, "within": sb["ttft_s"] <= sa["ttft_s"] + chunk,
         "long_during_cached": lb["cached"], "short_during_cached": sb["cached"]}
    log(f"TTFT: short alone {sa['ttft_s']:.3f} s, during the long prefill {sb['ttft_s']:.3f} s "
        f"(sent {r['sent_after_s']:.2f} s after it; chunk {chunk:.3f} s)")
    return r

def part_head(srv, pr):
    h = pr.head("head", head_len)
    tails = [pr.user(f"head-user-{i}", 24)["text"] for i in range(head_n)]
    bodies = [body(t, system=h["system"], max_tokens=head_gen) for t in tails]
    m0 = srv.metrics()
    # evenly inside the spread, the last one a step before its end: a thread that wakes a
    # few ms late still sends within it (the goal's "within 100 ms")
    delays = [head_spread_ms / 1000 * i / head_n for i in range(head_n)]
    rs = run_together([lambda b=b: srv.stream(b) for b in bodies], delays=delays)
    m1 = srv.metrics()
    d = lambda k: m1[k] - m0.get(k, 0) if k in m1 else None
    # what each session computed past the head: its prompt beyond the head or beyond what it
    # restored, whichever is deeper (a later session may restore more than the head)
    tail_tokens = sum(r["prompt"] - max(h["head_tokens"], r["cached"]) for r in rs)
    computed_usage = sum(r["prompt"] - r["cached"] for r in rs)
    prefill_metric = d("headstart_prefill_tokens_total")
    computed = prefill_metric if prefill_metric is not None else computed_usage
    r = {"sessions": head_n, "head_tokens": h["head_tokens"], "spread_ms": head_spread_ms,
         "sent_within_ms": 1000 * (max(x["send"] for x in rs) - min(x["send"] for x in rs)),
         "prompt": [x["prompt"] for x in rs], "cached": [x["cached"] for x in rs],
         "prefill_tokens_metric": prefill_metric, "head_shared_metric": d("headstart_head_shared_total"),
         "head_shared_tokens_metric": d("headstart_head_shared_tokens_total"),
         "computed_usage": computed_usage, "computed_source": "metrics" if prefill_metric is not None else "usage",
         "head_prefilled": computed - tail_tokens, "x_head": (computed - tail_tokens) / h["head_tokens"],
         "ttft_s": [x["ttft_s"] for x in rs]}
    log(f"head: {r['head_prefilled']:.0f} head tokens prefilled = {r['x_head']:.2f} x head ({h['head_tokens']})")
    return r


# ---- run ------------------------------------------------------------------------------------
results, kernels, start_lines = [], None, []
try:
    for dt in dtypes:
        path = model_path(dt)
        pr = Prompts(path)
        res = {"model": preset, "dtype": dt, "file": path}
        for part in [p for p in ("streams", "ttft", "head") if p in parts]:
            srv = Server(path, f"{dt}-{part}")      # a fresh server (and bank) per part
            try:
                kernels = srv.kernels
                start_lines.append(srv.start_line)
                srv.stream(body("warm up", max_tokens=2))   # page the weights in before timing
                log(f"{preset} {dt}: {part}")
                res[part] = {"streams": lambda: part_streams(srv, path, pr), "ttft": lambda: part_ttft(srv, pr),
                             "head": lambda: part_head(srv, pr)}[part]()
            finally:
                srv.stop()
            loads.append(loadavg())
        results.append(res)
finally:
    shutil.rmtree(tmp, ignore_errors=True)

log(f"prompts sized with {render_calls[0]} headstart render calls, {render_calls[1]:.1f} s")
elapsed = (datetime.datetime.now() - started).total_seconds()
out = {"date": started.isoformat(timespec="seconds"), "elapsed_s": round(elapsed, 1),
       "machine": {"cpu_model": cpu_model, "logical_cpus": os.cpu_count(), "kernel": platform.release(),
                   "load_avg_1m": {"min": min(loads), "max": max(loads), "mean": sum(loads) / len(loads)}},
       "headstart": {"git_commit": commit, "dirty": dirty, "kernels": kernels, "start_line": start_lines[0] if start_lines else None},
       "settings": {"model": preset, "dtypes": dtypes, "streams": streams, "gen": gen, "prompt": prompt_len,
                    "threads": threads, "reps": reps, "isa": isa, "llama_cpu_lib": llama_cpu_lib or "best", "warm": warm, "short": short_len, "long": long_len,
                    "ttft_at": ttft_at, "head": head_len, "head_sessions": head_n, "head_spread_ms": head_spread_ms,
                    "step_tokens": step_tokens, "parallel": parallel or "server default", "ctx": ctx or "server default"},
       "results": results}
os.makedirs(out_dir, exist_ok=True)
stem = "concurrency" if isa == "native" else f"concurrency-{isa}"  # BENCH_ISA=avx2: its own files
json.dump(out, open(os.path.join(out_dir, f"{stem}.json"), "w"), indent=1)


# ---- report ---------------------------------------------------------------------------------
def f(v, spec):
    return "-" if v is None else format(v, spec)

ver = f"{commit[:10]}{'+dirty' if dirty else ''}"
la = out["machine"]["load_avg_1m"]
md = [f"# headstart concurrency benchmark ([F10])", "",
      f"{out['date']}, commit {ver}; {cpu_model}, {os.cpu_count()} logical CPUs, Linux {platform.release()}; "
      f"headstart kernels **{kernels}** (serve start line); llama.cpp CPU library "
      f"{llama_cpu_lib or 'the best for this CPU'} (BENCH_ISA {isa}); {threads} threads for both engines; "
      f"load average (1 min) {la['min']:.2f}-{la['max']:.2f}; {elapsed / 60:.1f} min.", "",
      f"Model `mkmodel --arch qwen35 --preset {preset} --seed 1`, same GGUF for both engines; "
      f"bench/concurrency.sh's design note defines every number.", ""]
if start_lines:
    md += [f"Start line: `{start_lines[0]}`", ""]
if "streams" in parts:
    other = f"B = {b_label}" if b_env or b_hs else "llama.cpp"
    md += [f"## Aggregate decode tokens/s ({prompt_len}-token prompts, {gen} tokens per stream, best of {reps})", "",
           f"| dtype | streams | headstart tok/s | headstart N / 1 (goal) | {other} tok/s | headstart / {other}"
           f"{'' if b_env or b_hs else ' (goal >= 1.3)'} | cached / prompt | start skew s |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for res in results:
        for r in res["streams"]["rows"]:
            goal = {4: " (>= 3)", 8: " (>= 5)"}.get(r["streams"], "")
            hr = r["headstart_run"]
            md.append(f"| {res['dtype']} | {r['streams']} | {f(r['headstart_tok_s'], '.2f')} | {f(r['vs_one'], '.2f')}{goal} "
                      f"| {f(r['llama_tok_s'], '.2f')} | {f(r['vs_llama'], '.2f')} "
                      + (f"| {sum(hr['cached'])}/{sum(hr['prompt'])} | {hr['start_skew_s']:.2f} |" if hr else "| - | - |"))
    md.append("")
if "ttft" in parts:
    md += [f"## TTFT of a short request during a long prefill (--step-tokens {step_tokens})", "",
           "| dtype | short tokens | TTFT alone s | TTFT during s | sent after long s | long tokens | long TTFT alone s "
           "| chunk s (source) | goal: alone + chunk s | met |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for res in results:
        t = res["ttft"]
        md.append(f"| {res['dtype']} | {t['short_tokens']} | {t['short_alone_ttft_s']:.3f} | {t['short_during_ttft_s']:.3f} "
                  f"| {t['sent_after_s']:.2f} | {t['long_tokens']} | {t['long_alone_ttft_s']:.2f} "
                  f"| {t['chunk_s']:.3f} ({t['chunk_source']}) | {t['bound_s']:.3f} | {'yes' if t['within'] else 'no'} |")
    md.append("")
if "head" in parts:
    md += [f"## {head_n} new sessions sharing one head, sent within {head_spread_ms:.0f} ms", "",
           "| dtype | head tokens | sent within ms | prefill_tokens_total | head_shared_total | head tokens prefilled "
           "| x head (goal 1) | cached per session | prompt - cached (usage) |",
           "|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    for res in results:
        h = res["head"]
        md.append(f"| {res['dtype']} | {h['head_tokens']} | {h['sent_within_ms']:.0f} | {f(h['prefill_tokens_metric'], '.0f')} "
                  f"| {f(h['head_shared_metric'], '.0f')} | {h['head_prefilled']:.0f} ({h['computed_source']}) "
                  f"| {h['x_head']:.2f} | {' '.join(str(c) for c in h['cached'])} | {h['computed_usage']} |")
    md.append("")
mpath = os.path.join(out_dir, f"{stem}.md")
open(mpath, "w").write("\n".join(md))
print("\n".join(md))
print(f"wrote {mpath} and {os.path.join(out_dir, stem + '.json')}")

# ---- chart ----------------------------------------------------------------------------------
if "streams" in parts and results and shutil.which("gnuplot"):
    ppath = os.path.join(out_dir, f"{stem}.png")
    dpath = os.path.join(out_dir, ".concurrency.dat")
    with open(dpath, "w") as fh:
        for k, res in enumerate(results):
            if k: fh.write("\n\n")        # one gnuplot data block per dtype
            for r in res["streams"]["rows"]:
                fh.write(f"{r['streams']} {r['headstart_tok_s'] or 0:.4f} {r['llama_tok_s'] or 0:.4f} "
                         f"{r['vs_one'] or 0:.4f} {r['vs_llama'] or 0:.4f}\n")
    colors = ["#3a78b5", "#2ca02c", "#9467bd", "#8c564b"]
    chart_b = "B (headstart, " + " ".join(([os.path.basename(b_hs)] if b_hs else []) + [f"{k}={v}" for k, v in b_env.items()]) + ")" if b_env or b_hs else "llama.cpp"
    speed = ", ".join(
        f"'{dpath}' index {k} using 1:2 with linespoints lw 2 pt 7 lc rgb '{colors[k % 4]}' title 'headstart {res['dtype']}', "
        f"'' index {k} using 1:3 with linespoints lw 2 dt 2 pt 5 lc rgb '{colors[k % 4]}' title '{chart_b} {res['dtype']}'"
        for k, res in enumerate(results))
    ratio = ", ".join(
        f"'{dpath}' index {k} using 1:4 with linespoints lw 2 pt 7 lc rgb '{colors[k % 4]}' title 'headstart N / 1, {res['dtype']}', "
        f"'' index {k} using 1:5 with linespoints lw 2 dt 2 pt 5 lc rgb '{colors[k % 4]}' title 'headstart / {chart_b}, {res['dtype']}'"
        for k, res in enumerate(results))
    title = (f"aggregate decode, {preset} qwen35, {prompt_len}-token prompts, {gen} tokens per stream, {threads} threads, "
             f"kernels {kernels}, commit {ver}\\n{cpu_model}; load average {la['min']:.1f}-{la['max']:.1f}; {out['date']}")
    gp = f"""
set terminal pngcairo noenhanced size 900,900 font 'sans,10'
set output '{ppath}'
set multiplot layout 2,1 title "{title}" font ',10'
set logscale x 2
set xtics ({', '.join(str(n) for n in streams)})
set xrange [{min(streams) / 1.3}:{max(streams) * 1.3}]
set grid
set key top left
set xlabel 'concurrent streams'
set title 'aggregate decode tokens/s'
set ylabel 'tokens / s'
set yrange [0:*]
plot {speed}
set title 'ratios; goals: N / 1 >= 3 at 4 and >= 5 at 8, headstart / llama.cpp >= 1.3 (red)'
set ylabel 'ratio'
set label 1 '' at 4,3 point pt 9 ps 2 lc rgb '#d62728'
set label 2 '' at 8,5 point pt 9 ps 2 lc rgb '#d62728'
plot {ratio}, 1.3 with lines dt 3 lc rgb '#d62728' title 'headstart / llama.cpp goal'
unset multiplot
"""
    g = subprocess.run(["gnuplot"], input=gp, text=True, capture_output=True)
    os.remove(dpath)
    if g.returncode != 0:
        log("gnuplot failed:", g.stderr.strip()[-500:])
    else:
        print(f"wrote {ppath}")
PY
