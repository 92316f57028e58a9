#!/bin/sh
# demo.sh BUILD — what headstart does, on a tiny random model: make it in both file formats,
# inspect it, render a real-shaped agent request through its chat template, generate, then
# run the server and send two agent sessions that share a head through the official OpenAI
# SDK (prompt tokens, cached tokens, TTFT for each): the second restores the head from the
# session bank instead of recomputing it.
set -eu
build=${1:-build}
hs=$build/headstart
out=$build/demo
rm -rf "$out"
mkdir -p "$out"
echo "== headstart mkmodel: a tiny Qwen3.5-style hybrid model (3 GDN layers + 1 attention layer)"
$hs mkmodel --arch qwen35 --preset tiny --seed 1 --out "$out/tiny-hf"
$hs mkmodel --arch qwen35 --preset tiny --seed 1 --dtype q8_0 --out "$out/tiny-q8_0.gguf"
ls -l "$out/tiny-hf" "$out/tiny-q8_0.gguf"
echo
echo "== headstart inspect $out/tiny-hf (Hugging Face directory)"
$hs inspect "$out/tiny-hf"
echo
echo "== headstart inspect $out/tiny-q8_0.gguf (GGUF, as llama.cpp writes it)"
$hs inspect "$out/tiny-q8_0.gguf"
echo
req=tests/golden/data/requests/anthropic_claude_code.json
echo "== headstart render: a Claude-Code-shaped /v1/messages request through the model's chat template"
$hs render -m "$out/tiny-q8_0.gguf" --request "$req" --api anthropic | head -c 600
echo "..."
echo "prompt tokens: $($hs render -m "$out/tiny-q8_0.gguf" --request "$req" --api anthropic --ids | wc -w)," \
     "head (system + tools, shared by sessions): $($hs render -m "$out/tiny-q8_0.gguf" --request "$req" --api anthropic --head) tokens"
echo
echo "== headstart run --chat (random weights, so the words are noise; the timings are real)"
$hs run -m "$out/tiny-q8_0.gguf" --chat "What does a session bank keep?" -n 24 --temp 0 --ignore-eos

# ---- the server and the bank: two agent sessions sharing one head ------------------------
echo
echo "== headstart serve: two agent sessions with the same system text + tools, different questions"
log=$out/serve.log
$hs serve -m "$out/tiny-q8_0.gguf" --host 127.0.0.1 --port 0 --threads 2 --bank-dir "$out/bank" >"$log" 2>&1 &
srv=$!
trap 'kill $srv 2>/dev/null || true' EXIT INT TERM
port=
i=0
while [ $i -lt 100 ] && [ -z "$port" ]; do
    port=$(sed -n 's/.*listening on http:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log")
    [ -n "$port" ] || sleep 0.1
    i=$((i + 1))
done
[ -n "$port" ] || { echo "demo: the server did not start:"; cat "$log"; exit 1; }
grep "listening on" "$log"
# two sessions through the official OpenAI SDK (node_modules/openai), streamed: the same
# system text + tools (the head), different questions; TTFT is measured by the client, from
# sending the request to the first streamed token
HEADSTART_URL=http://127.0.0.1:$port node --input-type=module - tests/golden/data/requests/openai_agent.json <<'JS'
import OpenAI from 'openai';
import { readFileSync } from 'node:fs';
const base = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const client = new OpenAI({ baseURL: `${process.env.HEADSTART_URL}/v1`, apiKey: 'none', maxRetries: 0 });
for (const q of ['Fix the second one.', 'Explain the first one instead.']) {
  const messages = [base.messages[0], { role: 'user', content: q }];
  const t0 = performance.now();
  let ttft = null, usage = null;
  const stream = await client.chat.completions.create({
    model: base.model, messages, tools: base.tools, max_tokens: 16, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  for await (const chunk of stream) {
    const d = chunk.choices[0]?.delta;
    if (ttft === null && d && (d.content || d.reasoning_content || d.tool_calls)) ttft = performance.now() - t0;
    if (chunk.usage) usage = chunk.usage;
  }
  const cached = usage.prompt_tokens_details?.cached_tokens ?? 0;
  console.log(`session "${q}": prompt ${usage.prompt_tokens} tokens, cached ${cached} (from the bank), ` +
              `computed ${usage.prompt_tokens - cached}, TTFT ${ttft === null ? '-' : ttft.toFixed(1) + ' ms'}`);
}
JS
kill $srv 2>/dev/null
wait $srv 2>/dev/null || true
echo "the second session restored the whole head (system text + tools) from the bank instead of"
echo "recomputing it; its answer is bit-identical to computing it cold (tests/e2e/server_bank.sh)"
