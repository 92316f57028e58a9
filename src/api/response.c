/*
 * response — the lifecycle of a response (api.h's api_response_* calls): parser events and
 * usage numbers in, each API's exact JSON body or SSE stream out. The bytes belong to the
 * dialect writers (openai_chat.c, anthropic.c, responses.c), reached through one table of
 * api_writer_ops per API kind; what they share lives here: the guards, the begun / done
 * bookkeeping, the chat_parser, usage clamping, stop normalisation, request and tool-call
 * ids, and the block accumulator of OpenAI chat and Anthropic.
 *
 * Design note
 * -----------
 * One `struct api_response` (api_int.h) accumulates a request's output. It owns a
 * chat_parser (typed by the request's tools) so the engine can hand it raw generated text;
 * every call appends what is ready to the caller's strbuf, so the HTTP layer only moves
 * bytes.
 *
 *   new ──begin?──> streaming ──(feed | event)*──> finish ──> done
 *                        └──────────────────────────> fail ───┘
 *
 * The block accumulator keeps the output as a list of blocks in arrival order: consecutive
 * text deltas merge into one text block, consecutive reasoning deltas into one reasoning
 * block, every tool call is a block of its own. OpenAI chat and Anthropic render their
 * non-stream bodies from that list and stream from the same events, so the two always
 * agree. Responses keeps items of its own (ids per item, arguments as text).
 *
 * Stop reasons: each writer has its own names (a table in its file); here END with a tool
 * call becomes TOOL_CALLS and an unknown value END before any writer sees it.
 *
 * Invariants:
 *   1. Concatenating a stream's deltas reproduces the non-stream body: same text, reasoning,
 *      tool calls (ids included), stop reason and usage.
 *   2. Every string written is valid UTF-8: an invalid sequence in a delta becomes U+FFFD
 *      before it is stored or sent, so stream and body still agree.
 *   3. Ids are deterministic: request ids from (seed, counter), tool-call ids from the
 *      request id and the call's index, so tests and replays reproduce byte for byte.
 *   4. Nothing is appended after finish or fail; empty deltas are never sent.
 *   5. An error before the stream began is the API's error body with its HTTP status;
 *      after, the writer's in-stream error and 200 (the status already sent).
 */
#include "api/api_int.h"

#include <string.h>

/* The writer of each API kind; an unknown kind writes OpenAI chat (as it always did). */
static const struct api_writer_ops *const writers[] = {
    [API_KIND_OPENAI_CHAT] = &api_openai_chat_writer,
    [API_KIND_ANTHROPIC_MESSAGES] = &api_anthropic_writer,
    [API_KIND_OPENAI_RESPONSES] = &api_responses_writer,
};

static const struct api_writer_ops *writer_of(enum api_kind kind)
{
    if ((unsigned)kind < HS_ARRAY_LEN(writers) && writers[kind]) return writers[kind];
    return &api_openai_chat_writer;
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
    api_id_make(ids->seed, ids->counter++, writer_of(kind)->id_prefix, out);
}

/* ---- what the writers share ---------------------------------------------------------------- */

struct api_usage api_usage_clean(const struct api_usage *u)
{
    struct api_usage c = {0, 0, 0};
    if (u) c = *u;
    if (c.prompt_tokens < 0) c.prompt_tokens = 0;
    if (c.completion_tokens < 0) c.completion_tokens = 0;
    if (c.cached_tokens < 0) c.cached_tokens = 0;
    if (c.cached_tokens > c.prompt_tokens) c.cached_tokens = c.prompt_tokens;
    return c;
}

static struct api_block *block_push(struct api_response *r, enum chat_event_kind kind)
{
    if (r->n_blocks == r->cap_blocks) {
        r->cap_blocks = r->cap_blocks ? 2 * r->cap_blocks : 4;
        r->blocks = hs_realloc(r->blocks, (size_t)r->cap_blocks * sizeof *r->blocks);
    }
    struct api_block *b = &r->blocks[r->n_blocks++];
    memset(b, 0, sizeof *b);
    b->kind = kind;
    strbuf_init(&b->text);
    return b;
}

bool api_block_opens(const struct api_response *r, enum chat_event_kind kind)
{
    return r->n_blocks == 0 || r->blocks[r->n_blocks - 1].kind != kind;
}

struct api_block *api_block_delta(struct api_response *r, enum chat_event_kind kind, const char *text,
                                  size_t len, size_t *at)
{
    struct api_block *b = api_block_opens(r, kind) ? block_push(r, kind) : &r->blocks[r->n_blocks - 1];
    *at = b->text.len;
    hs_utf8_clean_append(&b->text, text, len);
    return b;
}

struct api_block *api_block_tool_call(struct api_response *r, const struct chat_event *ev, const char *prefix)
{
    struct api_block *b = block_push(r, CHAT_EVENT_TOOL_CALL);
    b->name = hs_strdup(ev->tool_name ? ev->tool_name : "");
    /* Every API needs an object; the parser's contract gives one, anything else becomes {}. */
    b->args = json_is_object(ev->tool_args) ? json_deep_copy(ev->tool_args) : json_object();
    api_id_make(r->id_hash, (uint64_t)r->n_tools++, prefix, b->id);
    return b;
}

/* ---- the lifecycle ----------------------------------------------------------------------- */

static void on_parser_event(void *ctx, const struct chat_event *ev)
{
    struct api_response *r = ctx;
    api_response_event(r, ev, r->sink);
}

struct api_response *api_response_new(const struct api_response_opts *o)
{
    struct api_response *r = hs_calloc(1, sizeof *r);
    r->ops = writer_of(o->kind);
    r->kind = o->kind;
    r->stream = o->stream;
    r->include_usage = o->include_usage;
    r->model = hs_strdup(o->model ? o->model : "");
    r->id = hs_strdup(o->id ? o->id : "");
    r->created = o->created;
    r->id_hash = hs_fnv1a64_str(r->id);
    r->parser = chat_parser_new(o->tools, o->starts_in_reasoning, on_parser_event, r);
    if (r->ops->init) r->ops->init(r, o);
    return r;
}

void api_response_free(struct api_response *r)
{
    if (!r) return;
    if (r->ops->free) r->ops->free(r);
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

bool api_response_started(const struct api_response *r) { return r->stream && (r->begun || r->kept_alive); }

int api_response_n_tool_calls(const struct api_response *r) { return r->n_tools; }

void api_response_begin(struct api_response *r, const struct api_usage *u, struct strbuf *out)
{
    if (r->begun || r->done) return;
    r->begun = true;
    if (!r->stream) return;
    struct api_usage c = api_usage_clean(u);
    c.completion_tokens = 0;
    r->ops->begin(r, &c, out);
}

void api_response_keepalive(struct api_response *r, struct strbuf *out)
{
    if (!r->stream || r->done) return;
    r->kept_alive = true;
    if (r->ops->keepalive) r->ops->keepalive(r, out);
    else strbuf_puts(out, ": keepalive\n\n"); /* an SSE comment: every client skips it */
}

void api_response_event(struct api_response *r, const struct chat_event *ev, struct strbuf *out)
{
    if (r->done) return;
    if (ev->kind != CHAT_EVENT_TOOL_CALL && (ev->text_len == 0 || !ev->text)) return;
    if (!r->begun) api_response_begin(r, NULL, out);
    r->ops->event(r, ev, out);
}

void api_response_feed(struct api_response *r, const char *text, size_t len, struct strbuf *out)
{
    if (r->done || len == 0) return;
    r->n_feeds++;
    r->sink = out;
    chat_parser_feed(r->parser, text, len);
    r->sink = NULL;
}

void api_response_finish(struct api_response *r, enum api_stop stop, const char *stop_sequence,
                         const struct api_usage *u, struct strbuf *out)
{
    if (r->done) return;
    r->sink = out;
    chat_parser_finish(r->parser);
    r->sink = NULL;
    struct api_usage c = api_usage_clean(u);
    if ((unsigned)stop > API_STOP_STOP_SEQUENCE) stop = API_STOP_END;
    if (stop == API_STOP_END && r->n_tools > 0) stop = API_STOP_TOOL_CALLS;
    if (stop != API_STOP_STOP_SEQUENCE) stop_sequence = NULL;
    if (!r->begun) api_response_begin(r, &c, out);
    r->done = true;
    r->ops->finish(r, stop, stop_sequence, &c, out);
}

int api_response_fail(struct api_response *r, int code, const char *message, struct strbuf *out)
{
    const struct api_error_info *e = api_error_info(code);
    if (r->done) return api_response_started(r) ? 200 : e->http_status;
    r->done = true;
    if (!api_response_started(r)) return api_error_write(r->kind, code, message, out);
    r->ops->fail(r, e, message, out);
    return 200;
}
