// sdk.test.mjs — the official clients (openai 6.30.1, @anthropic-ai/sdk 1.14.0) against a
// running `headstart serve` at HEADSTART_URL (tests/e2e/sdk.sh starts one on a tiny random
// model with --api-key HEADSTART_KEY). The model's text is noise; what is checked is that each
// SDK accepts every response shape, stream and error the server sends.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';
import { readFileSync } from 'node:fs';

const url = process.env.HEADSTART_URL;
const key = process.env.HEADSTART_KEY;
const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0, timeout: 30000 });
const anthropic = new Anthropic({ baseURL: url, apiKey: key, maxRetries: 0, timeout: 30000 });
const messages = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Say hello.' },
];

test('openai: models.list', async () => {
  const page = await openai.models.list();
  assert.equal(page.data.length, 1);
  assert.equal(page.data[0].object, 'model');
});

test('openai: chat.completions.create', async () => {
  const r = await openai.chat.completions.create({ model: 'm', messages, max_tokens: 8, temperature: 0 });
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.ok(['stop', 'length', 'tool_calls'].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 0);
  assert.ok(r.usage.completion_tokens > 0 && r.usage.completion_tokens <= 8);
  const text = (r.choices[0].message.content ?? '') + (r.choices[0].message.reasoning_content ?? '');
  assert.ok(text.length > 0);
});

test('openai: chat.completions.create stream with usage', async () => {
  const stream = await openai.chat.completions.create({
    model: 'm', messages, max_tokens: 8, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let text = '', usage = null, finish = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += (c.delta.content ?? '') + (c.delta.reasoning_content ?? '');
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.ok(text.length > 0);
  assert.ok(finish);
  assert.ok(usage && usage.completion_tokens > 0);
  // same seedless greedy request, non-stream: the same text
  const r = await openai.chat.completions.create({ model: 'm', messages, max_tokens: 8, temperature: 0 });
  assert.equal((r.choices[0].message.content ?? '') + (r.choices[0].message.reasoning_content ?? ''), text);
});

test('openai: errors are typed', async () => {
  const bad = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.chat.completions.create({ model: 'm', messages, max_tokens: 4 }),
    (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
  await assert.rejects(openai.chat.completions.create({ model: 'm', messages, max_tokens: 4, top_p: 7 }),
    (e) => e instanceof OpenAI.BadRequestError && /top_p/.test(e.message));
});

test('anthropic: models.list and countTokens', async () => {
  const page = await anthropic.models.list();
  assert.equal(page.data[0].type, 'model');
  const c = await anthropic.messages.countTokens({ model: 'm', system: 'You are terse.', messages: [{ role: 'user', content: 'Say hello.' }] });
  assert.ok(c.input_tokens > 0);
});

test('anthropic: messages.create', async () => {
  const r = await anthropic.messages.create({
    model: 'm', max_tokens: 8, temperature: 0, system: 'You are terse.',
    messages: [{ role: 'user', content: 'Say hello.' }],
  });
  assert.match(r.id, /^msg_/);
  assert.equal(r.type, 'message');
  assert.ok(['end_turn', 'max_tokens', 'tool_use'].includes(r.stop_reason));
  assert.ok(r.content.every((b) => ['text', 'thinking', 'tool_use'].includes(b.type)));
  assert.ok(r.usage.input_tokens > 0 && r.usage.output_tokens > 0);
});

test('anthropic: messages.stream', async () => {
  const stream = anthropic.messages.stream({
    model: 'm', max_tokens: 8, temperature: 0, system: 'You are terse.',
    messages: [{ role: 'user', content: 'Say hello.' }],
  });
  const types = [];
  stream.on('streamEvent', (ev) => types.push(ev.type));
  const msg = await stream.finalMessage();
  assert.equal(types[0], 'message_start');
  assert.equal(types[types.length - 1], 'message_stop');
  assert.ok(msg.usage.output_tokens > 0);
  assert.ok(msg.content.length > 0);
});

test('anthropic: errors are typed', async () => {
  const bad = new Anthropic({ baseURL: url, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.messages.create({ model: 'm', max_tokens: 4, messages: [{ role: 'user', content: 'x' }] }),
    (e) => e instanceof Anthropic.AuthenticationError && e.status === 401);
});

// Sessions that share a head (system text + tools): the second restores at least the head
// (HEADSTART_HEAD, from `headstart render --head`) from the server's bank, through each API.
const head = JSON.parse(readFileSync(new URL('../golden/data/bank/head.json', import.meta.url)));
const headLen = Number(process.env.HEADSTART_HEAD);

test('bank: two sessions with one head (openai, then anthropic)', async () => {
  assert.ok(headLen > 256, `HEADSTART_HEAD=${process.env.HEADSTART_HEAD}`);
  const ask = (u) => openai.chat.completions.create({
    model: 'm', max_tokens: 4, temperature: 0, tools: head.tools,
    messages: [{ role: 'system', content: head.system }, { role: 'user', content: u }],
  });
  await ask('sdk session one: list the files.');
  const r = await ask('sdk session two: explain the cache.');
  const cached = r.usage.prompt_tokens_details.cached_tokens;
  assert.ok(cached >= headLen && cached < r.usage.prompt_tokens, `cached ${cached}, head ${headLen}`);
  const a = await anthropic.messages.create({
    model: 'm', max_tokens: 4, temperature: 0, system: head.system,
    tools: head.tools.map((t) => ({ name: t.function.name, description: t.function.description,
      input_schema: t.function.parameters })),
    messages: [{ role: 'user', content: 'sdk session three: what is banked?' }],
  });
  assert.ok(a.usage.cache_read_input_tokens >= headLen, `cache_read ${a.usage.cache_read_input_tokens}`);
  assert.ok(a.usage.input_tokens > 0 && a.usage.input_tokens < headLen, `input ${a.usage.input_tokens}`);
});

async function metric(re) {
  const t = await (await fetch(`${url}/metrics`)).text();
  return Number(re.exec(t)[1]);
}
const generatedTotal = () => metric(/^headstart_generated_tokens_total (\d+)$/m);
const cancelledInGeneration = () => metric(/^headstart_cancelled_requests_total\{stage="generation"\} (\d+)$/m);

// The server's side is what is checked: the aborted request is cancelled during its
// generation and stops far short of max_tokens. (How many chunks the SDK still yields after
// abort() is its own buffering: a tiny model can have streamed 100 chunks by then.)
test('abort mid-stream: the generation stops, the server still answers', async () => {
  const before = await generatedTotal();
  const cancelled0 = await cancelledInGeneration();
  const ac = new AbortController();
  const stream = await openai.chat.completions.create(
    { model: 'm', messages, max_tokens: 6000, stream: true, ignore_eos: true }, { signal: ac.signal });
  let n = 0;
  try {
    for await (const chunk of stream) { if (chunk.choices.length && ++n === 3) ac.abort(); }
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIUserAbortError || e.name === 'AbortError', String(e));
  }
  assert.ok(n >= 3, `${n} chunks before the abort`);
  const r = await openai.chat.completions.create({ model: 'm', messages, max_tokens: 4 });
  assert.ok(r.usage.completion_tokens > 0);
  let cancelled = await cancelledInGeneration();
  for (let i = 0; i < 100 && cancelled === cancelled0; i++) {
    await new Promise((res) => setTimeout(res, 50));
    cancelled = await cancelledInGeneration();
  }
  assert.equal(cancelled, cancelled0 + 1, 'the aborted request was not counted as cancelled in generation');
  const spent = (await generatedTotal()) - before;
  assert.ok(spent < 3000, `${spent} tokens generated: the aborted request was not cancelled`);
});
