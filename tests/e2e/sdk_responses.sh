#!/bin/sh
# sdk_responses.sh — POST /v1/responses through the official `openai` SDK (node_modules,
# 6.30.1: client.responses.create and client.responses.stream) against `headstart serve` on a
# tiny random model at 127.0.0.1 (--port 0, the bank in RAM only): the response object and
# the SDK's output_text, the event stream as the SDK's ResponseStream accumulates it
# (sequence numbers, official order, the final response equal to the non-stream one at
# temperature 0), a Codex-shaped input (developer / user / reasoning / assistant /
# function_call / function_call_output items, function + hosted tools), the incomplete
# ending at max_output_tokens, two sessions sharing a head (the second's cached_tokens at
# least the head `headstart render --api responses --head` gives), and the errors
# (previous_response_id, media parts, the API key) as the SDK's typed exceptions. The node
# test is written to the temp dir and imports the SDK from this checkout's node_modules.
# Ends with "RESULT: N passed, N failed" (node's own counts).
set -u
repo=$(pwd)
. "$(dirname "$0")/lib/server.sh"
[ -f node_modules/openai/index.mjs ] || { fail "no openai SDK in node_modules (make deps)"; finish; }
e2e_setup sdk-resp node
key=sdk-key-$$
e2e_start "$tmp/log" --ctx 8192 --no-bank-disk --api-key "$key"

# the head (instructions + the function tools of tests/golden/data/bank/head.json, flat as the
# Responses API sends them) in a Responses body, and its length in tokens
node -e 'const fs = require("fs"); const h = JSON.parse(fs.readFileSync("tests/golden/data/bank/head.json"));
const tools = h.tools.map((t) => ({ type: "function", name: t.function.name, description: t.function.description,
  parameters: t.function.parameters }));
fs.writeFileSync(process.argv[1], JSON.stringify({ instructions: h.system, tools, input: "x" }));' "$tmp/head.json"
head_len=$("$hs" render -m "$tmp/m" --api responses --request "$tmp/head.json" --head 2>/dev/null)
[ "${head_len:-0}" -gt 0 ] || { fail "render --head failed"; finish; }

cat > "$tmp/responses.test.mjs" <<'EOF'
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

const { default: OpenAI } = await import(`${process.env.REPO}/node_modules/openai/index.mjs`);
const url = process.env.HEADSTART_URL;
const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: process.env.HEADSTART_KEY, maxRetries: 0, timeout: 60000 });
const head = JSON.parse(readFileSync(process.env.HEAD_BODY));
const headLen = Number(process.env.HEADSTART_HEAD);
// test controls (extensions): answer text only, ended by a stop string; see docs/API.md
const quick = { stop: [' ', 'e', 'a', '.'], chat_template_kwargs: { enable_thinking: false } };

function checkUsage(r, maxOut) {
  const u = r.usage;
  assert.ok(u.input_tokens > 0);
  assert.equal(typeof u.input_tokens_details.cached_tokens, 'number');
  assert.ok(u.input_tokens_details.cached_tokens <= u.input_tokens);
  assert.ok(u.output_tokens > 0 && u.output_tokens <= maxOut, `output_tokens ${u.output_tokens}`);
  assert.ok(u.output_tokens_details.reasoning_tokens <= u.output_tokens);
  assert.equal(u.total_tokens, u.input_tokens + u.output_tokens);
}

function messageText(r) {
  return r.output.filter((o) => o.type === 'message').flatMap((o) => o.content).map((c) => c.text).join('');
}

test('responses.create: the response object', async () => {
  const r = await openai.responses.create({ model: 'm', instructions: 'Be terse.', input: 'Say hello.',
    max_output_tokens: 12, temperature: 0, store: false, include: ['reasoning.encrypted_content'],
    reasoning: { summary: 'auto' }, text: { format: { type: 'text' } }, prompt_cache_key: 'k', parallel_tool_calls: true });
  assert.equal(r.object, 'response');
  assert.match(r.id, /^resp_[0-9A-Za-z]{24}$/);
  assert.ok(['completed', 'incomplete'].includes(r.status));
  if (r.status === 'incomplete') assert.equal(r.incomplete_details.reason, 'max_output_tokens');
  assert.ok(r.output.length > 0);
  for (const o of r.output) {
    assert.ok(['reasoning', 'message', 'function_call'].includes(o.type), o.type);
    if (o.type === 'reasoning') assert.match(o.id, /^rs_/);
    if (o.type === 'message') { assert.match(o.id, /^msg_/); assert.equal(o.role, 'assistant'); }
  }
  assert.equal(r.output_text, messageText(r), 'the SDK output_text is the message text');
  checkUsage(r, 12);
});

test('responses.create: max_output_tokens ends incomplete', async () => {
  const r = await openai.responses.create({ model: 'm', input: 'Say hello.', max_output_tokens: 3, temperature: 0 });
  assert.equal(r.status, 'incomplete');
  assert.equal(r.incomplete_details.reason, 'max_output_tokens');
  assert.equal(r.usage.output_tokens, 3);
});

test('responses.create: a stop string ends completed with answer text', async () => {
  const r = await openai.responses.create({ model: 'm', input: 'Say hello.', max_output_tokens: 64, temperature: 0, ...quick });
  assert.equal(r.status, 'completed');
  assert.equal(r.incomplete_details, null);
  assert.ok(r.output.every((o) => o.type !== 'reasoning'), 'thinking off: no reasoning item');
});

async function streamCheck(params, want) {
  const stream = openai.responses.stream(params);
  const types = [];
  let seq = 0, deltas = '', reasoning = '', final = null;
  for await (const e of stream) {
    assert.equal(e.sequence_number, seq++, `sequence_number at ${e.type}`);
    types.push(e.type);
    if (e.type === 'response.output_text.delta') deltas += e.delta;
    if (e.type === 'response.reasoning_text.delta') reasoning += e.delta;
    if (e.type === 'response.completed' || e.type === 'response.incomplete') final = e.response;
  }
  // the SDK's snapshot takes response.completed's object (it leaves .incomplete to the events)
  if (final.status === 'completed') {
    const f = await stream.finalResponse();
    assert.equal(f.id, final.id);
    assert.equal(messageText(f), messageText(final));
    assert.deepEqual(f.usage, final.usage);
  }
  assert.equal(types[0], 'response.created');
  assert.equal(types[1], 'response.in_progress');
  const last = types[types.length - 1];
  assert.ok(['response.completed', 'response.incomplete'].includes(last), last);
  assert.equal(types.filter((t) => t === 'response.output_item.added').length, final.output.length);
  assert.equal(types.filter((t) => t === 'response.output_item.done').length, final.output.length);
  assert.equal(messageText(final), deltas);
  const rs = final.output.filter((o) => o.type === 'reasoning').flatMap((o) => o.content ?? []).map((c) => c.text).join('');
  assert.equal(rs, reasoning);
  checkUsage(final, 16);
  const body = await openai.responses.create(params);
  assert.deepEqual(body.output.map((o) => o.type), final.output.map((o) => o.type));
  assert.equal(messageText(body), messageText(final));
  assert.equal(body.status, final.status);
  assert.equal(body.usage.output_tokens, final.usage.output_tokens);
  assert.equal(final.status, want);
}

test('responses.stream: events in order, the final response equals the non-stream one', async () => {
  await streamCheck({ model: 'm', instructions: 'Be terse.', input: 'Say hello.', max_output_tokens: 16, temperature: 0 },
    'incomplete');
  await streamCheck({ model: 'm', instructions: 'Be terse.', input: 'Say hello.', max_output_tokens: 64, temperature: 0,
    ...quick }, 'completed');
});

test('responses: a Codex-shaped agent turn (items, function and hosted tools)', async () => {
  const r = await openai.responses.create({
    model: 'm', instructions: head.instructions, max_output_tokens: 8, temperature: 0, tool_choice: 'auto',
    tools: [...head.tools, { type: 'web_search' }, { type: 'custom', name: 'apply_patch', format: { type: 'text' } }],
    input: [
      { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'Sandbox: read-only.' }] },
      { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'List the files.' }] },
      { type: 'reasoning', id: 'rs_1', summary: [{ type: 'summary_text', text: 'Use a tool.' }] },
      { type: 'function_call', call_id: 'call_1', name: head.tools[0].name, arguments: '{}' },
      { type: 'function_call_output', call_id: 'call_1', output: 'a.c b.c' },
      { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'Two files.' }] },
      { role: 'user', content: 'Thanks.' },
    ],
  });
  assert.equal(r.object, 'response');
  checkUsage(r, 8);
});

test('responses: two sessions with one head, the second restores it', async () => {
  assert.ok(headLen > 256, `HEADSTART_HEAD=${process.env.HEADSTART_HEAD}`);
  const ask = (q) => openai.responses.create({ model: 'm', instructions: head.instructions, tools: head.tools,
    input: q, max_output_tokens: 4, temperature: 0 });
  await ask('First session: list the files.');
  const r = await ask('Second session: read the README.');
  const cached = r.usage.input_tokens_details.cached_tokens;
  assert.ok(cached >= headLen && cached < r.usage.input_tokens, `cached ${cached}, head ${headLen}`);
});

test('responses: errors are typed', async () => {
  await assert.rejects(openai.responses.create({ model: 'm', input: 'x', previous_response_id: 'resp_1' }),
    (e) => e instanceof OpenAI.BadRequestError && /previous_response_id: headstart does not store responses/.test(e.message));
  await assert.rejects(openai.responses.create({ model: 'm', input: [{ role: 'user', content: [
    { type: 'input_image', image_url: 'data:image/png;base64,AAAA' }] }] }),
  (e) => e instanceof OpenAI.BadRequestError && /input\[0\]\.content\[0\]: input_image/.test(e.message));
  await assert.rejects(openai.responses.create({ model: 'm', input: 'x', max_output_tokens: 0 }),
    (e) => e instanceof OpenAI.BadRequestError && /max_output_tokens/.test(e.message));
  const bad = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.responses.create({ model: 'm', input: 'x' }),
    (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
});
EOF

REPO=$repo HEADSTART_URL=http://127.0.0.1:$port HEADSTART_KEY=$key HEADSTART_HEAD=$head_len HEAD_BODY=$tmp/head.json \
    timeout 150 node --test --test-reporter=tap "$tmp/responses.test.mjs" >"$tmp/tap" 2>&1
e2e_tap "$tmp/tap" $?
e2e_stop "$pid"
e2e_sanitizer "$tmp/log" && f=$((f + 1))
result "$p" "$f"
