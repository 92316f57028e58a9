// sdk_tools.test.mjs — a tool round trip through each official SDK (openai 6.30.1,
// @anthropic-ai/sdk 1.14.0) against `headstart serve` in its TEST-ONLY scripted mode
// (HEADSTART_TEST_EMIT, src/server/test_emit.c): tests/e2e/sdk_tools.sh starts it with a
// script whose texts the tiny model "says" in order, one per request. The tests below run
// in file order (node --test runs one file's top-level tests one after another), so request
// k gets script text k: CALL (reasoning, then a get_weather call), then ANSWER (the final
// text), for each of openai non-stream, openai stream, anthropic non-stream, anthropic
// stream, then Responses non-stream and stream. The real output path runs on them: the
// tool-call parser, each API's bodies and SSE, and each SDK's own parsing of tool calls and
// usage.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import Anthropic from '@anthropic-ai/sdk';

const url = process.env.HEADSTART_URL;
const key = process.env.HEADSTART_KEY;
const openai = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0, timeout: 30000 });
const anthropic = new Anthropic({ baseURL: url, apiKey: key, maxRetries: 0, timeout: 30000 });

// what sdk_tools.sh scripts (keep in step with it)
const REASONING = 'The user wants the weather; call the tool.';
const ANSWER = 'It is sunny in Paris, 21 degrees.';
const system = 'You are a weather assistant. Use the tools.';
const question = 'What is the weather in Paris?';
const oaiTools = [{
  type: 'function',
  function: {
    name: 'get_weather', description: 'Current weather of a city.',
    parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } }, required: ['city'] },
  },
}];
const antTools = [{
  name: 'get_weather', description: 'Current weather of a city.',
  input_schema: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } }, required: ['city'] },
}];
const toolResult = '{"sky": "sunny", "celsius": 21}';

function checkOaiUsage(u) {
  assert.ok(u, 'usage present');
  assert.ok(u.prompt_tokens > 0);
  assert.ok(u.completion_tokens > 0);
  assert.equal(u.total_tokens, u.prompt_tokens + u.completion_tokens);
  const cached = u.prompt_tokens_details?.cached_tokens;
  assert.ok(Number.isInteger(cached) && cached >= 0 && cached <= u.prompt_tokens);
  return cached;
}

function checkAntUsage(u) {
  assert.ok(u.input_tokens > 0);
  assert.ok(u.output_tokens > 0);
  assert.ok(Number.isInteger(u.cache_read_input_tokens) && u.cache_read_input_tokens >= 0);
  return u.cache_read_input_tokens;
}

function checkOaiCall(msg) {
  assert.equal(msg.role, 'assistant');
  assert.equal(msg.tool_calls?.length, 1, JSON.stringify(msg));
  const tc = msg.tool_calls[0];
  assert.equal(tc.type, 'function');
  assert.ok(typeof tc.id === 'string' && tc.id.length > 0);
  assert.equal(tc.function.name, 'get_weather');
  assert.deepEqual(JSON.parse(tc.function.arguments), { city: 'Paris', days: 2 });
  assert.equal(msg.reasoning_content, REASONING);
  assert.ok(!msg.content, `no text besides the call: ${JSON.stringify(msg.content)}`);
  return tc;
}

function oaiSecondTurn(tc, reasoning) {
  return [
    { role: 'system', content: system },
    { role: 'user', content: question },
    { role: 'assistant', content: null, reasoning_content: reasoning, tool_calls: [tc] },
    { role: 'tool', tool_call_id: tc.id, content: toolResult },
  ];
}

test('openai: tool call, tool result, answer (non-stream)', async () => {
  const r = await openai.chat.completions.create({
    model: 'm', temperature: 0, max_tokens: 200, tools: oaiTools,
    messages: [{ role: 'system', content: system }, { role: 'user', content: question }],
  });
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  const tc = checkOaiCall(r.choices[0].message);
  checkOaiUsage(r.usage);
  const r2 = await openai.chat.completions.create({
    model: 'm', temperature: 0, max_tokens: 200, tools: oaiTools, messages: oaiSecondTurn(tc, REASONING),
  });
  assert.equal(r2.choices[0].finish_reason, 'stop');
  assert.equal(r2.choices[0].message.content, ANSWER);
  assert.ok(!r2.choices[0].message.tool_calls?.length);
  const cached = checkOaiUsage(r2.usage);
  // the first turn's prompt is a prefix of the second's: the bank restores part of it
  assert.ok(cached > 0, `cached_tokens ${cached}`);
  assert.ok(r2.usage.prompt_tokens > r.usage.prompt_tokens);
});

test('openai: tool call, tool result, answer (stream)', async () => {
  const s = openai.chat.completions.stream({
    model: 'm', temperature: 0, max_tokens: 200, tools: oaiTools, stream_options: { include_usage: true },
    messages: [{ role: 'system', content: system }, { role: 'user', content: question }],
  });
  let reasoning = '', finish = null;
  for await (const chunk of s) {
    for (const c of chunk.choices) {
      reasoning += c.delta.reasoning_content ?? '';
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  const r = await s.finalChatCompletion();
  assert.equal(finish, 'tool_calls');
  assert.equal(r.choices[0].finish_reason, 'tool_calls');
  assert.equal(reasoning, REASONING);
  // the SDK's accumulated message (reasoning_content is not one of its fields)
  const msg = { ...r.choices[0].message, reasoning_content: reasoning };
  const tc = checkOaiCall(msg);
  checkOaiUsage(r.usage);

  const s2 = await openai.chat.completions.create({
    model: 'm', temperature: 0, max_tokens: 200, tools: oaiTools, stream: true,
    stream_options: { include_usage: true }, messages: oaiSecondTurn(tc, REASONING),
  });
  let text = '', finish2 = null, usage = null;
  for await (const chunk of s2) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      text += c.delta.content ?? '';
      assert.ok(!c.delta.tool_calls);
      if (c.finish_reason) finish2 = c.finish_reason;
    }
  }
  assert.equal(text, ANSWER);
  assert.equal(finish2, 'stop');
  assert.ok(checkOaiUsage(usage) > 0);
});

function checkAntCall(msg) {
  assert.equal(msg.stop_reason, 'tool_use');
  const kinds = msg.content.map((b) => b.type);
  assert.deepEqual(kinds, ['thinking', 'tool_use'], JSON.stringify(msg.content));
  assert.equal(msg.content[0].thinking, REASONING);
  const tu = msg.content[1];
  assert.match(tu.id, /^toolu_/);
  assert.equal(tu.name, 'get_weather');
  assert.deepEqual(tu.input, { city: 'Paris', days: 2 });
  return tu;
}

function antSecondTurn(msg, tu) {
  return [
    { role: 'user', content: question },
    { role: 'assistant', content: msg.content },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: tu.id, content: toolResult }] },
  ];
}

test('anthropic: tool_use, tool_result, answer (non-stream)', async () => {
  const msg = await anthropic.messages.create({
    model: 'm', max_tokens: 200, temperature: 0, system, tools: antTools,
    messages: [{ role: 'user', content: question }],
  });
  const tu = checkAntCall(msg);
  checkAntUsage(msg.usage);
  const m2 = await anthropic.messages.create({
    model: 'm', max_tokens: 200, temperature: 0, system, tools: antTools, messages: antSecondTurn(msg, tu),
  });
  assert.equal(m2.stop_reason, 'end_turn');
  assert.deepEqual(m2.content.map((b) => b.type), ['text']);
  assert.equal(m2.content[0].text, ANSWER);
  assert.ok(checkAntUsage(m2.usage) > 0);
});

test('anthropic: tool_use, tool_result, answer (stream)', async () => {
  const s = anthropic.messages.stream({
    model: 'm', max_tokens: 200, temperature: 0, system, tools: antTools,
    messages: [{ role: 'user', content: question }],
  });
  let json = '';
  s.on('inputJson', (delta) => { json += delta; });
  const msg = await s.finalMessage();
  const tu = checkAntCall(msg);
  assert.deepEqual(JSON.parse(json), tu.input);
  checkAntUsage(msg.usage);

  const s2 = anthropic.messages.stream({
    model: 'm', max_tokens: 200, temperature: 0, system, tools: antTools, messages: antSecondTurn(msg, tu),
  });
  let text = '';
  s2.on('text', (d) => { text += d; });
  const m2 = await s2.finalMessage();
  assert.equal(text, ANSWER);
  assert.equal(m2.stop_reason, 'end_turn');
  assert.deepEqual(m2.content.map((b) => b.type), ['text']);
  assert.ok(checkAntUsage(m2.usage) > 0);
});

const rsTools = [{ type: 'function', name: 'get_weather', description: 'Current weather of a city.', parameters: oaiTools[0].function.parameters }];

function checkRsCall(r) {
  assert.equal(r.status, 'completed');
  const calls = r.output.filter((it) => it.type === 'function_call');
  assert.equal(calls.length, 1, JSON.stringify(r.output));
  assert.equal(calls[0].name, 'get_weather');
  assert.deepEqual(JSON.parse(calls[0].arguments), { city: 'Paris', days: 2 });
  assert.ok(calls[0].call_id);
  assert.ok(!r.output_text, `no text besides the call: ${JSON.stringify(r.output_text)}`);
  assert.ok(r.usage.input_tokens > 0 && r.usage.output_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
  return calls[0];
}

function rsSecondTurn(r, call) {
  return [
    { role: 'user', content: question },
    ...r.output,
    { type: 'function_call_output', call_id: call.call_id, output: toolResult },
  ];
}

test('responses: function_call, function_call_output, answer (non-stream, then stream)', async () => {
  const r = await openai.responses.create({
    model: 'm', instructions: system, input: question, tools: rsTools, max_output_tokens: 200, store: false,
  });
  const call = checkRsCall(r);
  const r2 = await openai.responses.create({
    model: 'm', instructions: system, input: rsSecondTurn(r, call), tools: rsTools, max_output_tokens: 200, store: false,
  });
  assert.equal(r2.output_text, ANSWER);
  assert.equal(r2.output.filter((it) => it.type === 'function_call').length, 0);
  assert.ok(r2.usage.input_tokens_details.cached_tokens > 0);

  const s = openai.responses.stream({
    model: 'm', instructions: system, input: question, tools: rsTools, max_output_tokens: 200, store: false,
  });
  let args = '';
  s.on('response.function_call_arguments.delta', (ev) => { args += ev.delta; });
  const f = await s.finalResponse();
  const fcall = checkRsCall(f);
  assert.deepEqual(JSON.parse(args), JSON.parse(fcall.arguments));
  const s2 = openai.responses.stream({
    model: 'm', instructions: system, input: rsSecondTurn(f, fcall), tools: rsTools, max_output_tokens: 200, store: false,
  });
  let text = '';
  s2.on('response.output_text.delta', (ev) => { text += ev.delta; });
  const f2 = await s2.finalResponse();
  assert.equal(text, ANSWER);
  // (the stream helper's final response has no output_text convenience field: read the items)
  const msgs = f2.output.filter((it) => it.type === 'message');
  assert.equal(msgs.length, 1);
  assert.equal(msgs[0].content.map((c) => c.text).join(''), ANSWER);
  assert.ok(f2.usage.input_tokens_details.cached_tokens > 0);
});
