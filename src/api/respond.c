/*
 * respond — the response side of the APIs: parser events and usage numbers in, each API's
 * exact JSON body or SSE stream out, plus the error shapes, /v1/models and count_tokens.
 *
 * Design note
 * -----------
 * One `struct api_response` accumulates a request's output. It owns a chat_parser (typed by
 * the request's tools) so the engine can hand it raw generated text; every call appends
 * what is ready to the caller's strbuf, so the HTTP layer only moves bytes.
 *
 *   new ──begin?──> streaming ──(feed | event)*──> finish ──> done
 *                        └──────────────────────────> fail ───┘
 *
 * The output is kept as a list of blocks in arrival order: consecutive text deltas merge
 * into one text block, consecutive reasoning deltas into one reasoning block, every tool
 * call is a block of its own. The non-stream bodies are rendered from that list; the
 * stream is emitted from the same events, so the two always agree.
 *
 *   OpenAI chat (non-stream): message.content = every text block joined (null when empty
 *     and a tool call exists, "" otherwise), reasoning_content = every reasoning block
 *     joined (absent when empty), tool_calls in order; arguments are the compact JSON text
 *     of the arguments object with keys in order and non-ASCII raw.
 *   OpenAI chat (stream): `data: {chunk}\n\n`; a role chunk first (delta {role, content:""}),
 *     one chunk per delta, one chunk per whole tool call, the finish_reason chunk, the usage
 *     chunk (choices [], only with stream_options.include_usage), then `data: [DONE]`.
 *   Anthropic messages: content blocks thinking (signature "hs1" + a hash of its text), text, tool_use in arrival
 *     order. Streamed as `event: NAME\ndata: {json}\n\n`: message_start (empty content,
 *     prompt usage), ping, per block content_block_start / _delta / _stop (a thinking block
 *     gets a signature_delta before its stop; a tool_use block is start, one input_json_delta
 *     with the whole arguments text, stop), message_delta (stop_reason, usage), message_stop.
 *   OpenAI Responses (API_KIND_OPENAI_RESPONSES): every lifecycle call is forwarded to the
 *     writer of responses.c (responses_int.h), which has its own items and event stream.
 *   Usage: Anthropic's input_tokens counts only the uncached part of the prompt
 *     (prompt_tokens − cached_tokens), cache_read_input_tokens the restored part and
 *     cache_creation_input_tokens is always 0 (the bank stores heads on its own, never on a
 *     client's request). OpenAI's prompt_tokens counts all, cached_tokens the restored part.
 *
 * Stop reasons (a table, `stop_names`):
 *
 *   api_stop                 OpenAI finish_reason    Anthropic stop_reason
 *   API_STOP_END             stop                    end_turn
 *   API_STOP_LENGTH          length                  max_tokens
 *   API_STOP_TOOL_CALLS      tool_calls              tool_use
 *   API_STOP_STOP_SEQUENCE   stop                    stop_sequence (+ stop_sequence string)
 *
 * Invariants:
 *   1. Concatenating a stream's deltas reproduces the non-stream body: same text, reasoning,
 *      tool calls (ids included), stop reason and usage.
 *   2. Anthropic block indices count up from 0 without gaps; every content_block_start has
 *      exactly one content_block_stop before the next start or message_delta.
 *   3. Every string written is valid UTF-8: an invalid sequence in a delta becomes U+FFFD
 *      before it is stored or sent, so stream and body still agree.
 *   4. Ids are deterministic: request ids from (seed, counter), tool-call ids from the
 *      request id and the call's index, so tests and replays reproduce byte for byte.
 *   5. Nothing is appended after finish or fail; empty deltas are never sent.
 */
#include "api/api.h"
#include "api/responses_int.h"
#include "base/base.h"

#include <string.h>
#include <time.h>

#define RESPOND_JSON_FLAGS (JSON_COMPACT | JSON_PRESERVE_ORDER)

/* ---- tables ------------------------------------------------------------------------------ */

static const struct {
    const char *openai;
    const char *anthropic;
} stop_names[] = {
    [API_STOP_END] = {"stop", "end_turn"},
    [API_STOP_LENGTH] = {"length", "max_tokens"},
    [API_STOP_TOOL_CALLS] = {"tool_calls", "tool_use"},
    [API_STOP_STOP_SEQUENCE] = {"stop", "stop_sequence"},
};

/* Error code → HTTP status and each API's error type. OpenAI's 429 uses its own rate-limit
 * shape (type "requests", code "rate_limit_exceeded"); SDKs pick the exception class from
 * the status, the types are for humans and logs. */
static const struct api_error_info error_table[] = {
    /* code               http  OpenAI type              OpenAI code            Anthropic type */
    {HS_ERR_FORMAT,       400, "invalid_request_error", NULL,                  "invalid_request_error"},
    {HS_ERR_UNSUPPORTED,  400, "invalid_request_error", NULL,                  "invalid_request_error"},
    {HS_ERR_INVALID,      400, "invalid_request_error", NULL,                  "invalid_request_error"},
    {HS_ERR_LIMIT,        400, "invalid_request_error", NULL,                  "invalid_request_error"},
    {HS_ERR_NOT_FOUND,    404, "invalid_request_error", NULL,                  "not_found_error"},
    {HS_ERR_IO,           500, "server_error",          NULL,                  "api_error"},
    {HS_ERR_NOMEM,        503, "server_error",          NULL,                  "overloaded_error"},
    {API_ERR_AUTH,        401, "invalid_request_error", "invalid_api_key",     "authentication_error"},
    {API_ERR_ROUTE,       404, "invalid_request_error", NULL,                  "not_found_error"},
    {API_ERR_METHOD,      405, "invalid_request_error", NULL,                  "invalid_request_error"},
    {API_ERR_TOO_LARGE,   413, "invalid_request_error", NULL,                  "request_too_large"},
    {API_ERR_QUEUE_FULL,  429, "requests",              "rate_limit_exceeded", "rate_limit_error"},
    {API_ERR_OVERLOADED,  503, "server_error",          NULL,                  "overloaded_error"},
    {API_ERR_FORBIDDEN,   403, "invalid_request_error", NULL,                  "permission_error"},
    {API_ERR_MEDIA_TYPE,  415, "invalid_request_error", NULL,                  "invalid_request_error"},
    {API_ERR_CONTEXT,     400, "invalid_request_error", "context_length_exceeded", "invalid_request_error"},
    {API_ERR_INTERNAL,    500, "server_error",          NULL,                  "api_error"},
};

const struct api_error_info *api_error_info(int code)
{
    size_t n = sizeof error_table / sizeof error_table[0];
    for (size_t i = 0; i < n; i++)
        if (error_table[i].code == code) return &error_table[i];
    return &error_table[n - 1]; /* API_ERR_INTERNAL */
}

void api_context_error(enum api_kind kind, int64_t n_prompt, int64_t n_ctx, char *buf, size_t size)
{
    if (kind == API_KIND_ANTHROPIC_MESSAGES)
        snprintf(buf, size, "prompt is too long: %lld tokens > %lld maximum (headstart: the context holds %lld "
                 "tokens, prompt and output)", (long long)n_prompt, (long long)n_ctx, (long long)n_ctx);
    else
        snprintf(buf, size, "This model's maximum context length is %lld tokens. However, your messages resulted "
                 "in %lld tokens. Please reduce the length of the messages. (headstart: the context holds "
                 "prompt and output)", (long long)n_ctx, (long long)n_prompt);
}

/* ---- JSON helpers ------------------------------------------------------------------------ */

static int dump_cb(const char *buf, size_t size, void *data)
{
    strbuf_append(data, buf, size);
    return 0;
}

/* Append j's compact text and drop the reference (steals j). */
static void dump_steal(struct strbuf *out, json_t *j)
{
    json_dump_callback(j, dump_cb, out, RESPOND_JSON_FLAGS);
    json_decref(j);
}

/* A JSON string of s[0..n), cleaned when it is not valid UTF-8 (base's one rule). */
static json_t *jstr_n(const char *s, size_t n)
{
    if (!s) return json_string("");
    if (hs_utf8_valid(s, n)) return json_stringn(s, n);
    struct strbuf sb;
    strbuf_init(&sb);
    hs_utf8_clean_append(&sb, s, n);
    json_t *j = json_stringn(sb.buf ? sb.buf : "", sb.len);
    strbuf_free(&sb);
    return j;
}

static json_t *jstr(const char *s) { return jstr_n(s, s ? strlen(s) : 0); }

static void sse_data(struct strbuf *out, json_t *j)
{
    strbuf_puts(out, "data: ");
    dump_steal(out, j);
    strbuf_puts(out, "\n\n");
}

static void sse_event(struct strbuf *out, const char *name, json_t *j)
{
    strbuf_printf(out, "event: %s\ndata: ", name);
    dump_steal(out, j);
    strbuf_puts(out, "\n\n");
}

/* ---- errors ------------------------------------------------------------------------------ */

static json_t *error_object(enum api_kind kind, const struct api_error_info *e, const char *message)
{
    json_t *err = json_object();
    if (kind == API_KIND_ANTHROPIC_MESSAGES) {
        json_object_set_new(err, "type", json_string(e->anthropic_type));
        json_object_set_new(err, "message", jstr(message));
        json_t *root = json_object();
        json_object_set_new(root, "type", json_string("error"));
        json_object_set_new(root, "error", err);
        return root;
    }
    json_object_set_new(err, "message", jstr(message));
    json_object_set_new(err, "type", json_string(e->openai_type));
    json_object_set_new(err, "param", json_null());
    json_object_set_new(err, "code", e->openai_code ? json_string(e->openai_code) : json_null());
    json_t *root = json_object();
    json_object_set_new(root, "error", err);
    return root;
}

int api_error_write(enum api_kind kind, int code, const char *message, struct strbuf *out)
{
    const struct api_error_info *e = api_error_info(code);
    dump_steal(out, error_object(kind, e, message));
    return e->http_status;
}

/* ---- ids --------------------------------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void api_id_make(uint64_t seed, uint64_t counter, const char *prefix, char out[API_ID_MAX])
{
    static const char alphabet[] =
        "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    size_t plen = strlen(prefix);
    if (plen > API_ID_MAX - 25) plen = API_ID_MAX - 25;
    memcpy(out, prefix, plen);
    /* Multiplying by an odd constant is a bijection: distinct counters, distinct states. */
    uint64_t state = seed ^ (counter * 0xD1B54A32D192ED03ull);
    uint64_t v = 0;
    for (int i = 0; i < 24; i++) {
        if (i % 8 == 0) v = splitmix64(&state); /* 62^8 < 2^64: 8 digits per draw */
        out[plen + (size_t)i] = alphabet[v % 62];
        v /= 62;
    }
    out[plen + 24] = '\0';
}

void api_ids_next(struct api_ids *ids, enum api_kind kind, char out[API_ID_MAX])
{
    api_id_make(ids->seed, ids->counter++,
                kind == API_KIND_ANTHROPIC_MESSAGES   ? "msg_"
                : kind == API_KIND_OPENAI_RESPONSES ? "resp_"
                                                    : "chatcmpl-", out);
}

static uint64_t fnv1a64(const char *s)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001B3ull;
    return h;
}

/* ---- the accumulator --------------------------------------------------------------------- */

struct resp_block {
    enum chat_event_kind kind;
    struct strbuf text;            /* TEXT / REASONING: the merged deltas (valid UTF-8) */
    char *name;                    /* TOOL_CALL, owned */
    json_t *args;                  /* TOOL_CALL: arguments object, owned */
    char id[API_ID_MAX];           /* TOOL_CALL: "call_…" / "toolu_…" */
};

struct api_response {
    enum api_kind kind;
    bool stream, include_usage;
    char *model, *id;
    int64_t created;
    uint64_t tool_seed;            /* fnv1a64(id): tool-call ids derive from the request id */
    struct chat_parser *parser;
    struct resp_block *blocks;
    int n_blocks, cap_blocks;
    int n_tools;
    bool begun;                    /* begin done (explicitly or by the first output) */
    bool kept_alive;               /* a keep-alive went out: the stream's headers are sent */
    bool block_open;               /* Anthropic stream: the last block is started, not stopped */
    bool done;                     /* finish or fail done */
    struct strbuf *sink;           /* during feed: where parser events append */
    struct responses_writer *rsp;  /* API_KIND_OPENAI_RESPONSES: every call goes there */
};

static void on_parser_event(void *ctx, const struct chat_event *ev)
{
    struct api_response *r = ctx;
    api_response_event(r, ev, r->sink);
}

struct api_response *api_response_new(const struct api_response_opts *o)
{
    struct api_response *r = hs_calloc(1, sizeof *r);
    r->kind = o->kind;
    r->stream = o->stream;
    r->include_usage = o->include_usage;
    r->model = hs_strdup(o->model ? o->model : "");
    r->id = hs_strdup(o->id ? o->id : "");
    r->created = o->created;
    r->tool_seed = fnv1a64(r->id);
    r->parser = chat_parser_new(o->tools, o->starts_in_reasoning, on_parser_event, r);
    if (o->kind == API_KIND_OPENAI_RESPONSES) r->rsp = responses_writer_new(o);
    return r;
}

void api_response_free(struct api_response *r)
{
    if (!r) return;
    responses_writer_free(r->rsp);
    for (int i = 0; i < r->n_blocks; i++) {
        strbuf_free(&r->blocks[i].text);
        hs_free(r->blocks[i].name);
        json_decref(r->blocks[i].args);
    }
    hs_free(r->blocks);
    chat_parser_free(r->parser);
    hs_free(r->model);
    hs_free(r->id);
    hs_free(r);
}

bool api_response_started(const struct api_response *r)
{
    if (r->rsp) return responses_writer_started(r->rsp);
    return r->stream && (r->begun || r->kept_alive);
}
int api_response_n_tool_calls(const struct api_response *r)
{
    return r->rsp ? responses_writer_n_tool_calls(r->rsp) : r->n_tools;
}

static struct resp_block *block_push(struct api_response *r, enum chat_event_kind kind)
{
    if (r->n_blocks == r->cap_blocks) {
        r->cap_blocks = r->cap_blocks ? 2 * r->cap_blocks : 4;
        r->blocks = hs_realloc(r->blocks, (size_t)r->cap_blocks * sizeof *r->blocks);
    }
    struct resp_block *b = &r->blocks[r->n_blocks++];
    memset(b, 0, sizeof *b);
    b->kind = kind;
    strbuf_init(&b->text);
    return b;
}

/* Usage numbers made consistent: nothing negative, cached within the prompt. */
static struct api_usage usage_clean(const struct api_usage *u)
{
    struct api_usage c = {0, 0, 0};
    if (u) c = *u;
    if (c.prompt_tokens < 0) c.prompt_tokens = 0;
    if (c.completion_tokens < 0) c.completion_tokens = 0;
    if (c.cached_tokens < 0) c.cached_tokens = 0;
    if (c.cached_tokens > c.prompt_tokens) c.cached_tokens = c.prompt_tokens;
    return c;
}

static json_t *openai_usage(const struct api_usage *u)
{
    json_t *details = json_object();
    json_object_set_new(details, "cached_tokens", json_integer(u->cached_tokens));
    json_t *j = json_object();
    json_object_set_new(j, "prompt_tokens", json_integer(u->prompt_tokens));
    json_object_set_new(j, "completion_tokens", json_integer(u->completion_tokens));
    json_object_set_new(j, "total_tokens", json_integer(u->prompt_tokens + u->completion_tokens));
    json_object_set_new(j, "prompt_tokens_details", details);
    return j;
}

static json_t *anthropic_usage(const struct api_usage *u)
{
    json_t *j = json_object();
    json_object_set_new(j, "input_tokens", json_integer(u->prompt_tokens - u->cached_tokens));
    json_object_set_new(j, "cache_creation_input_tokens", json_integer(0));
    json_object_set_new(j, "cache_read_input_tokens", json_integer(u->cached_tokens));
    json_object_set_new(j, "output_tokens", json_integer(u->completion_tokens));
    return j;
}

static char *args_text(const json_t *args)
{
    char *s = json_dumps(args, RESPOND_JSON_FLAGS);
    return s ? s : strdup("{}");
}

/* ---- OpenAI chat ------------------------------------------------------------------------- */

/* Append one chunk with choice 0 carrying `delta` (stolen) and finish_reason (NULL: null). */
static void openai_chunk(struct api_response *r, json_t *delta, const char *finish,
                         struct strbuf *out)
{
    json_t *choice = json_object();
    json_object_set_new(choice, "index", json_integer(0));
    json_object_set_new(choice, "delta", delta);
    json_object_set_new(choice, "finish_reason", finish ? json_string(finish) : json_null());
    json_t *choices = json_array();
    json_array_append_new(choices, choice);
    json_t *c = json_object();
    json_object_set_new(c, "id", json_string(r->id));
    json_object_set_new(c, "object", json_string("chat.completion.chunk"));
    json_object_set_new(c, "created", json_integer(r->created));
    json_object_set_new(c, "model", jstr(r->model));
    json_object_set_new(c, "choices", choices);
    sse_data(out, c);
}

static json_t *openai_tool_call(const struct resp_block *b, int index, bool with_index)
{
    char *args = args_text(b->args);
    json_t *fn = json_object();
    json_object_set_new(fn, "name", jstr(b->name));
    json_object_set_new(fn, "arguments", jstr(args));
    free(args);
    json_t *tc = json_object();
    if (with_index) json_object_set_new(tc, "index", json_integer(index));
    json_object_set_new(tc, "id", json_string(b->id));
    json_object_set_new(tc, "type", json_string("function"));
    json_object_set_new(tc, "function", fn);
    return tc;
}

static void openai_body(struct api_response *r, const char *finish, const struct api_usage *u,
                        struct strbuf *out)
{
    struct strbuf text, reasoning;
    strbuf_init(&text);
    strbuf_init(&reasoning);
    json_t *calls = json_array();
    int ti = 0;
    for (int i = 0; i < r->n_blocks; i++) {
        const struct resp_block *b = &r->blocks[i];
        if (b->kind == CHAT_EVENT_TEXT) strbuf_append(&text, b->text.buf, b->text.len);
        else if (b->kind == CHAT_EVENT_REASONING) strbuf_append(&reasoning, b->text.buf, b->text.len);
        else json_array_append_new(calls, openai_tool_call(b, ti++, false));
    }
    json_t *msg = json_object();
    json_object_set_new(msg, "role", json_string("assistant"));
    if (text.len == 0 && r->n_tools > 0) json_object_set_new(msg, "content", json_null());
    else json_object_set_new(msg, "content", json_stringn(text.buf ? text.buf : "", text.len));
    if (reasoning.len > 0)
        json_object_set_new(msg, "reasoning_content", json_stringn(reasoning.buf, reasoning.len));
    if (r->n_tools > 0) json_object_set_new(msg, "tool_calls", calls);
    else json_decref(calls);
    strbuf_free(&text);
    strbuf_free(&reasoning);

    json_t *choice = json_object();
    json_object_set_new(choice, "index", json_integer(0));
    json_object_set_new(choice, "message", msg);
    json_object_set_new(choice, "finish_reason", json_string(finish));
    json_t *choices = json_array();
    json_array_append_new(choices, choice);
    json_t *root = json_object();
    json_object_set_new(root, "id", json_string(r->id));
    json_object_set_new(root, "object", json_string("chat.completion"));
    json_object_set_new(root, "created", json_integer(r->created));
    json_object_set_new(root, "model", jstr(r->model));
    json_object_set_new(root, "choices", choices);
    json_object_set_new(root, "usage", openai_usage(u));
    dump_steal(out, root);
}

/* ---- Anthropic messages ------------------------------------------------------------------ */

static json_t *anthropic_message(struct api_response *r, json_t *content, const char *stop,
                                 const char *stop_sequence, const struct api_usage *u)
{
    json_t *m = json_object();
    json_object_set_new(m, "id", json_string(r->id));
    json_object_set_new(m, "type", json_string("message"));
    json_object_set_new(m, "role", json_string("assistant"));
    json_object_set_new(m, "model", jstr(r->model));
    json_object_set_new(m, "content", content);
    json_object_set_new(m, "stop_reason", stop ? json_string(stop) : json_null());
    json_object_set_new(m, "stop_sequence", stop_sequence ? jstr(stop_sequence) : json_null());
    json_object_set_new(m, "usage", anthropic_usage(u));
    return m;
}

/* The signature of a thinking block: "hs1" and 16 hex digits of the FNV-1a 64 hash of its
 * text. Anthropic's signatures are opaque to clients, but some treat an empty one as "not
 * signed" and replay the reasoning as plain text (pi), which changes the prompt and the
 * bank's path; a stable non-empty value keeps the replayed turn as the model saw it. We
 * accept any signature back and never check it (messages.c). */
static json_t *thinking_signature(const struct resp_block *b)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < b->text.len; i++) h = (h ^ (uint8_t)b->text.buf[i]) * 0x100000001b3ull;
    char sig[24];
    snprintf(sig, sizeof sig, "hs1%016llx", (unsigned long long)h);
    return json_string(sig);
}

/* A content block as it appears in a body (full) or in content_block_start (empty: the
 * signature comes in a signature_delta before the block stops, as Anthropic streams it). */
static json_t *anthropic_block(const struct resp_block *b, bool full)
{
    json_t *j = json_object();
    const char *data = b->text.buf ? b->text.buf : "";
    size_t len = full ? b->text.len : 0;
    switch (b->kind) {
    case CHAT_EVENT_TEXT:
        json_object_set_new(j, "type", json_string("text"));
        json_object_set_new(j, "text", json_stringn(data, len));
        break;
    case CHAT_EVENT_REASONING:
        json_object_set_new(j, "type", json_string("thinking"));
        json_object_set_new(j, "thinking", json_stringn(data, len));
        json_object_set_new(j, "signature", full ? thinking_signature(b) : json_string(""));
        break;
    case CHAT_EVENT_TOOL_CALL:
        json_object_set_new(j, "type", json_string("tool_use"));
        json_object_set_new(j, "id", json_string(b->id));
        json_object_set_new(j, "name", jstr(b->name));
        json_object_set_new(j, "input", full ? json_deep_copy(b->args) : json_object());
        break;
    }
    return j;
}

static void anthropic_block_event(struct strbuf *out, const char *name, int index, const char *key,
                                  json_t *value)
{
    json_t *e = json_object();
    json_object_set_new(e, "type", json_string(name));
    json_object_set_new(e, "index", json_integer(index));
    if (key) json_object_set_new(e, key, value);
    sse_event(out, name, e);
}

static json_t *anthropic_delta(const char *type, const char *key, json_t *value)
{
    json_t *d = json_object();
    json_object_set_new(d, "type", json_string(type));
    json_object_set_new(d, key, value);
    return d;
}

static void anthropic_block_start(struct api_response *r, struct strbuf *out)
{
    int index = r->n_blocks - 1;
    anthropic_block_event(out, "content_block_start", index, "content_block",
                          anthropic_block(&r->blocks[index], false));
    r->block_open = true;
}

static void anthropic_block_stop(struct api_response *r, struct strbuf *out)
{
    if (!r->block_open) return;
    int index = r->n_blocks - 1;
    if (r->blocks[index].kind == CHAT_EVENT_REASONING)
        anthropic_block_event(out, "content_block_delta", index, "delta",
                              anthropic_delta("signature_delta", "signature", thinking_signature(&r->blocks[index])));
    anthropic_block_event(out, "content_block_stop", index, NULL, NULL);
    r->block_open = false;
}

static void anthropic_ping(struct strbuf *out)
{
    json_t *p = json_object();
    json_object_set_new(p, "type", json_string("ping"));
    sse_event(out, "ping", p);
}

/* ---- the lifecycle ----------------------------------------------------------------------- */

void api_response_begin(struct api_response *r, const struct api_usage *u, struct strbuf *out)
{
    if (r->rsp) { responses_writer_begin(r->rsp, u, out); return; }
    if (r->begun || r->done) return;
    r->begun = true;
    if (!r->stream) return;
    struct api_usage c = usage_clean(u);
    c.completion_tokens = 0;
    if (r->kind == API_KIND_OPENAI_CHAT) {
        json_t *delta = json_object();
        json_object_set_new(delta, "role", json_string("assistant"));
        json_object_set_new(delta, "content", json_string(""));
        openai_chunk(r, delta, NULL, out);
        return;
    }
    json_t *e = json_object();
    json_object_set_new(e, "type", json_string("message_start"));
    json_object_set_new(e, "message", anthropic_message(r, json_array(), NULL, NULL, &c));
    sse_event(out, "message_start", e);
    anthropic_ping(out);
}

void api_response_keepalive(struct api_response *r, struct strbuf *out)
{
    if (r->rsp) { responses_writer_keepalive(r->rsp, out); return; }
    if (!r->stream || r->done) return;
    r->kept_alive = true;
    if (r->kind == API_KIND_ANTHROPIC_MESSAGES && r->begun) anthropic_ping(out);
    else strbuf_puts(out, ": keepalive\n\n"); /* an SSE comment: every client skips it */
}

static void event_delta(struct api_response *r, enum chat_event_kind kind, const char *text,
                        size_t len, struct strbuf *out)
{
    struct resp_block *last = r->n_blocks ? &r->blocks[r->n_blocks - 1] : NULL;
    bool opened = false;
    if (!last || last->kind != kind) {
        if (r->stream && r->kind == API_KIND_ANTHROPIC_MESSAGES) anthropic_block_stop(r, out);
        last = block_push(r, kind);
        opened = true;
    }
    size_t at = last->text.len;
    hs_utf8_clean_append(&last->text, text, len);
    const char *d = last->text.buf + at;
    size_t dlen = last->text.len - at;
    if (!r->stream) return;
    if (r->kind == API_KIND_OPENAI_CHAT) {
        json_t *delta = json_object();
        json_object_set_new(delta, kind == CHAT_EVENT_TEXT ? "content" : "reasoning_content",
                            json_stringn(d, dlen));
        openai_chunk(r, delta, NULL, out);
        return;
    }
    if (opened) anthropic_block_start(r, out);
    json_t *delta = kind == CHAT_EVENT_TEXT
                        ? anthropic_delta("text_delta", "text", json_stringn(d, dlen))
                        : anthropic_delta("thinking_delta", "thinking", json_stringn(d, dlen));
    anthropic_block_event(out, "content_block_delta", r->n_blocks - 1, "delta", delta);
}

static void event_tool_call(struct api_response *r, const struct chat_event *ev, struct strbuf *out)
{
    if (r->stream && r->kind == API_KIND_ANTHROPIC_MESSAGES) anthropic_block_stop(r, out);
    struct resp_block *b = block_push(r, CHAT_EVENT_TOOL_CALL);
    b->name = hs_strdup(ev->tool_name ? ev->tool_name : "");
    /* Both APIs need an object; the parser's contract gives one, anything else becomes {}. */
    b->args = json_is_object(ev->tool_args) ? json_deep_copy(ev->tool_args) : json_object();
    api_id_make(r->tool_seed, (uint64_t)r->n_tools,
                r->kind == API_KIND_ANTHROPIC_MESSAGES ? "toolu_" : "call_", b->id);
    int index = r->n_tools++;
    if (!r->stream) return;
    if (r->kind == API_KIND_OPENAI_CHAT) {
        json_t *calls = json_array();
        json_array_append_new(calls, openai_tool_call(b, index, true));
        json_t *delta = json_object();
        json_object_set_new(delta, "tool_calls", calls);
        openai_chunk(r, delta, NULL, out);
        return;
    }
    anthropic_block_start(r, out);
    char *args = args_text(b->args);
    anthropic_block_event(out, "content_block_delta", r->n_blocks - 1, "delta",
                          anthropic_delta("input_json_delta", "partial_json", jstr(args)));
    free(args);
    anthropic_block_stop(r, out);
}

void api_response_event(struct api_response *r, const struct chat_event *ev, struct strbuf *out)
{
    if (r->rsp) { responses_writer_event(r->rsp, ev, out); return; }
    if (r->done) return;
    if (ev->kind != CHAT_EVENT_TOOL_CALL && (ev->text_len == 0 || !ev->text)) return;
    if (!r->begun) api_response_begin(r, NULL, out);
    if (ev->kind == CHAT_EVENT_TOOL_CALL) event_tool_call(r, ev, out);
    else event_delta(r, ev->kind, ev->text, ev->text_len, out);
}

void api_response_feed(struct api_response *r, const char *text, size_t len, struct strbuf *out)
{
    if (r->rsp) { responses_writer_feed(r->rsp, text, len, out); return; }
    if (r->done || len == 0) return;
    r->sink = out;
    chat_parser_feed(r->parser, text, len);
    r->sink = NULL;
}

void api_response_finish(struct api_response *r, enum api_stop stop, const char *stop_sequence,
                         const struct api_usage *u, struct strbuf *out)
{
    if (r->rsp) { responses_writer_finish(r->rsp, stop, u, out); return; }
    if (r->done) return;
    r->sink = out;
    chat_parser_finish(r->parser);
    r->sink = NULL;
    struct api_usage c = usage_clean(u);
    if ((unsigned)stop > API_STOP_STOP_SEQUENCE) stop = API_STOP_END;
    if (stop == API_STOP_END && r->n_tools > 0) stop = API_STOP_TOOL_CALLS;
    if (stop != API_STOP_STOP_SEQUENCE) stop_sequence = NULL;
    if (!r->begun) api_response_begin(r, &c, out);
    r->done = true;

    if (r->kind == API_KIND_OPENAI_CHAT) {
        if (!r->stream) {
            openai_body(r, stop_names[stop].openai, &c, out);
            return;
        }
        openai_chunk(r, json_object(), stop_names[stop].openai, out);
        if (r->include_usage) {
            json_t *k = json_object();
            json_object_set_new(k, "id", json_string(r->id));
            json_object_set_new(k, "object", json_string("chat.completion.chunk"));
            json_object_set_new(k, "created", json_integer(r->created));
            json_object_set_new(k, "model", jstr(r->model));
            json_object_set_new(k, "choices", json_array());
            json_object_set_new(k, "usage", openai_usage(&c));
            sse_data(out, k);
        }
        strbuf_puts(out, "data: [DONE]\n\n");
        return;
    }
    if (!r->stream) {
        json_t *content = json_array();
        for (int i = 0; i < r->n_blocks; i++)
            json_array_append_new(content, anthropic_block(&r->blocks[i], true));
        dump_steal(out, anthropic_message(r, content, stop_names[stop].anthropic, stop_sequence, &c));
        return;
    }
    anthropic_block_stop(r, out);
    json_t *delta = json_object();
    json_object_set_new(delta, "stop_reason", json_string(stop_names[stop].anthropic));
    json_object_set_new(delta, "stop_sequence", stop_sequence ? jstr(stop_sequence) : json_null());
    json_t *e = json_object();
    json_object_set_new(e, "type", json_string("message_delta"));
    json_object_set_new(e, "delta", delta);
    json_object_set_new(e, "usage", anthropic_usage(&c));
    sse_event(out, "message_delta", e);
    json_t *s = json_object();
    json_object_set_new(s, "type", json_string("message_stop"));
    sse_event(out, "message_stop", s);
}

int api_response_fail(struct api_response *r, int code, const char *message, struct strbuf *out)
{
    if (r->rsp) return responses_writer_fail(r->rsp, code, message, out);
    const struct api_error_info *e = api_error_info(code);
    if (r->done) return api_response_started(r) ? 200 : e->http_status;
    r->done = true;
    if (!api_response_started(r)) return api_error_write(r->kind, code, message, out);
    if (r->kind == API_KIND_OPENAI_CHAT) {
        /* The OpenAI SDKs raise APIError on a chunk with an "error" member. */
        sse_data(out, error_object(r->kind, e, message));
        strbuf_puts(out, "data: [DONE]\n\n");
    } else {
        sse_event(out, "error", error_object(r->kind, e, message));
    }
    return 200;
}

/* ---- models and count_tokens ------------------------------------------------------------- */

void api_models_write(enum api_kind kind, const char *const *names, int n_names, int64_t created,
                      struct strbuf *out)
{
    json_t *data = json_array();
    char stamp[32] = "1970-01-01T00:00:00Z";
    time_t t = (time_t)created;
    struct tm tm;
    if (gmtime_r(&t, &tm)) strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    for (int i = 0; i < n_names; i++) {
        json_t *m = json_object();
        if (kind == API_KIND_ANTHROPIC_MESSAGES) {
            json_object_set_new(m, "type", json_string("model"));
            json_object_set_new(m, "id", jstr(names[i]));
            json_object_set_new(m, "display_name", jstr(names[i]));
            json_object_set_new(m, "created_at", json_string(stamp));
        } else {
            json_object_set_new(m, "id", jstr(names[i]));
            json_object_set_new(m, "object", json_string("model"));
            json_object_set_new(m, "created", json_integer(created));
            json_object_set_new(m, "owned_by", json_string("headstart"));
        }
        json_array_append_new(data, m);
    }
    json_t *root = json_object();
    if (kind == API_KIND_ANTHROPIC_MESSAGES) {
        json_object_set_new(root, "data", data);
        json_object_set_new(root, "has_more", json_false());
        json_object_set_new(root, "first_id", n_names > 0 ? jstr(names[0]) : json_null());
        json_object_set_new(root, "last_id", n_names > 0 ? jstr(names[n_names - 1]) : json_null());
    } else {
        json_object_set_new(root, "object", json_string("list"));
        json_object_set_new(root, "data", data);
    }
    dump_steal(out, root);
}

void api_count_tokens_write(int64_t input_tokens, struct strbuf *out)
{
    strbuf_printf(out, "{\"input_tokens\":%lld}", (long long)(input_tokens < 0 ? 0 : input_tokens));
}
