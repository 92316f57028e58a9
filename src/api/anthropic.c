/*
 * anthropic.c — the Anthropic messages API (POST /v1/messages), both sides: the request's
 * system, messages and tools → the neutral conversation of api.h (chat_from_anthropic,
 * conv.c's rules), and parser events → the message body or its event stream (the
 * api_anthropic_writer ops that response.c drives).
 *
 * Design note
 * -----------
 * Request: a system block whose text starts with "x-anthropic-billing-header:" loses its
 * first line (Claude Code stamps a per-request hash there; keeping it would make every head
 * different); tool_result blocks become role "tool" messages in order, with text blocks
 * around them becoming user messages at their place; thinking blocks become
 * reasoning_content; redacted_thinking blocks are dropped (their text is encrypted and
 * means nothing to another model); server tools are errors. thinking {type: enabled |
 * adaptive | disabled} wins over chat_template_kwargs.enable_thinking (an extension);
 * `stop_sequences` is an array; tool_choice {type: auto | any | none | tool (+ name)}.
 *
 * Response: content blocks thinking (signature "hs1" + FNV-1a 64 of its text), text,
 * tool_use in arrival order. Streamed as `event: NAME\ndata: {json}\n\n`: message_start
 * (empty content, prompt usage), ping, per block content_block_start / _delta / _stop (a
 * thinking block gets a signature_delta before its stop; a tool_use block is start, one
 * input_json_delta with the whole arguments text, stop), message_delta (stop_reason,
 * usage), message_stop. A keep-alive after message_start is a ping (before it, an SSE
 * comment); an error after the stream began is `event: error`.
 * Usage: input_tokens counts only the uncached part of the prompt (prompt_tokens −
 * cached_tokens), cache_read_input_tokens the restored part and cache_creation_input_tokens
 * is always 0 (the bank stores heads on its own, never on a client's request).
 *
 * Invariants:
 *   1. Block indices count up from 0 without gaps; every content_block_start has exactly
 *      one content_block_stop before the next start or message_delta.
 *   2. Concatenating the stream's deltas reproduces the non-stream body (response.c 1).
 *   3. Tool-use ids are "toolu_" + api_id_make(hash of the request id, call index).
 */
#include "api/api_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ==== request: system, messages, tools → the neutral conversation ========================= */

static int ant_block_error(const char *type, const char *path, const char *where, struct hs_err *err)
{
    if (api_is_media(type)) return api_req_bad(err, path, "%s blocks are not supported (text-only model)", type);
    if (strcmp(type, "tool_use") == 0 || strcmp(type, "thinking") == 0 ||
        strcmp(type, "redacted_thinking") == 0)
        return api_req_bad(err, path, "%s blocks belong in assistant messages, not in %s", type, where);
    if (strcmp(type, "tool_result") == 0)
        return api_req_bad(err, path, "tool_result blocks belong in user messages, not in %s", where);
    return api_req_bad(err, path, "unsupported content block type '%.40s' in %s", type, where);
}

/* A block's type, or an error naming the block. */
static int ant_block_type(const json_t *b, const char *path, const char **type, struct hs_err *err)
{
    if (!json_is_object(b)) return api_req_bad(err, path, "expected a content block object, not %s", api_req_kind(b));
    *type = json_string_value(json_object_get(b, "type"));
    if (!*type) return api_req_bad(err, path, "\"type\" must be a string");
    return HS_OK;
}

static int ant_block_text(const json_t *b, const char *path, const char *field, const char **s,
                          size_t *len, struct hs_err *err)
{
    const json_t *t = json_object_get(b, field);
    *s = NULL;
    *len = 0;
    if (!json_is_string(t)) return api_req_bad(err, path, "\"%s\" must be a string", field);
    *s = json_string_value(t);
    *len = json_string_length(t);
    return HS_OK;
}

/* Calls fn for each block of the array `content`, in order, with the block's path
 * ("<path>[i]") and type; a block that is not an object with a string type, or fn's first
 * error, ends the walk. */
typedef int (*ant_block_fn)(void *ctx, const json_t *b, const char *type, const char *path, struct hs_err *err);

static int ant_blocks(const json_t *content, const char *path, ant_block_fn fn, void *ctx, struct hs_err *err)
{
    size_t i;
    const json_t *b;
    json_array_foreach(content, i, b) {
        char p[API_PATH_LEN];
        const char *type;
        api_req_path(p, "%s[%zu]", path, i);
        int rc = ant_block_type(b, p, &type, err);
        if (!rc) rc = fn(ctx, b, type, p, err);
        if (rc) return rc;
    }
    return HS_OK;
}

/* Where ant_text puts the text it reads, piece by piece. */
typedef void (*ant_piece_fn)(void *ctx, const char *s, size_t len);

static void ant_piece_append(void *ctx, const char *s, size_t len) { strbuf_append(ctx, s, len); }

struct ant_text_walk {
    const char *where;
    struct api_conv *media;
    ant_piece_fn piece;
    void *ctx;
};

static int ant_text_block(void *ctx, const json_t *b, const char *type, const char *path, struct hs_err *err)
{
    const struct ant_text_walk *w = ctx;
    if (w->media && api_is_media(type)) {
        struct strbuf ph;
        strbuf_init(&ph);
        api_media_placeholder(w->media, b, type, &ph);
        w->piece(w->ctx, ph.buf, ph.len);
        strbuf_free(&ph);
        return HS_OK;
    }
    if (strcmp(type, "text") != 0) return ant_block_error(type, path, w->where, err);
    const char *s;
    size_t len;
    int rc = ant_block_text(b, path, "text", &s, &len, err);
    if (!rc) w->piece(w->ctx, s, len);
    return rc;
}

/* Text of a string or an array of text blocks, given to piece(ctx) a string or a block at a
 * time; `where` names the container in errors. media: the conversation that counts
 * placeholders for image / document blocks (a tool result, rule 4), or NULL (an error). */
static int ant_text(const json_t *content, const char *path, const char *where, struct api_conv *media,
                    ant_piece_fn piece, void *ctx, struct hs_err *err)
{
    if (!content || json_is_null(content)) return HS_OK;
    if (json_is_string(content)) {
        piece(ctx, json_string_value(content), json_string_length(content));
        return HS_OK;
    }
    if (!json_is_array(content))
        return api_req_bad(err, path, "expected a string or an array of text blocks, not %s", api_req_kind(content));
    struct ant_text_walk w = { where, media, piece, ctx };
    return ant_blocks(content, path, ant_text_block, &w, err);
}

#define BILLING_PREFIX "x-anthropic-billing-header:"

/* One piece of the top-level system (a string, or one text block): the billing line
 * removed, then merged "\n\n"-joined (rule 1). */
static void ant_system_piece(void *ctx, const char *s, size_t len)
{
    size_t pl = strlen(BILLING_PREFIX);
    if (len >= pl && memcmp(s, BILLING_PREFIX, pl) == 0) {
        const char *nl = memchr(s, '\n', len);
        size_t skip = nl ? (size_t)(nl - s) + 1 : len;
        s += skip;
        len -= skip;
    }
    api_conv_system(ctx, s, len);
}

/* A tool_result block → a role "tool" message. is_error has no place in the templates;
 * the result text itself says what went wrong (Claude Code wraps it in <tool_use_error>). */
static int ant_tool_result(struct api_conv *c, const json_t *b, const char *path, json_t **out, struct hs_err *err)
{
    *out = NULL;
    const char *id;
    int rc = api_opt_string(b, "tool_use_id", path, &id, NULL, err);
    if (rc) return rc;
    const json_t *ie = json_object_get(b, "is_error");
    if (ie && !json_is_null(ie) && !json_is_boolean(ie))
        return api_req_bad(err, path, "\"is_error\" must be a boolean, not %s", api_req_kind(ie));
    char p[API_PATH_LEN];
    api_req_path(p, "%s.content", path);
    struct strbuf text;
    strbuf_init(&text);
    if ((rc = ant_text(json_object_get(b, "content"), p, "a tool result", c, ant_piece_append, &text, err))) {
        strbuf_free(&text);
        return rc;
    }
    json_t *msg = api_msg_new("tool", text.buf, text.len);
    strbuf_free(&text);
    if (id) json_object_set_new(msg, "tool_call_id", json_string(id));
    *out = msg;
    return HS_OK;
}

/* A user message's blocks: runs of text blocks become user messages, each tool_result a
 * tool message, in the order they came. */
struct ant_user_walk {
    struct api_conv *c;
    struct strbuf text;
    bool in_text, any_result;
};

static int ant_user_block(void *ctx, const json_t *b, const char *type, const char *path, struct hs_err *err)
{
    struct ant_user_walk *w = ctx;
    int rc;
    if (strcmp(type, "text") == 0) {
        const char *s;
        size_t len;
        if ((rc = ant_block_text(b, path, "text", &s, &len, err))) return rc;
        strbuf_append(&w->text, s, len);
        w->in_text = true;
    } else if (strcmp(type, "tool_result") == 0) {
        json_t *msg;
        if ((rc = ant_tool_result(w->c, b, path, &msg, err))) return rc;
        if (w->in_text) api_conv_add(w->c, api_msg_new("user", w->text.buf, w->text.len));
        strbuf_reset(&w->text);
        w->in_text = false;
        api_conv_add(w->c, msg);
        w->any_result = true;
    } else {
        return ant_block_error(type, path, "user messages", err);
    }
    return HS_OK;
}

static int ant_user_blocks(struct api_conv *c, const json_t *content, const char *path, struct hs_err *err)
{
    struct ant_user_walk w = { .c = c };
    strbuf_init(&w.text);
    int rc = ant_blocks(content, path, ant_user_block, &w, err);
    /* a message of text only (even none: []) is one user message */
    if (!rc && (w.in_text || !w.any_result)) api_conv_add(c, api_msg_new("user", w.text.buf, w.text.len));
    strbuf_free(&w.text);
    return rc;
}

/* A tool_use block → {type: "function", id?, function: {name, arguments: input}}. */
static int ant_tool_use(const json_t *b, const char *path, json_t **out, struct hs_err *err)
{
    *out = NULL;
    const char *id, *name;
    int rc = api_opt_string(b, "id", path, &id, NULL, err);
    if (rc) return rc;
    if ((rc = api_opt_string(b, "name", path, &name, NULL, err))) return rc;
    if (!name || !*name) return api_req_bad(err, path, "\"name\" must be a non-empty string");
    const json_t *input = json_object_get(b, "input");
    if (input && !json_is_null(input) && !json_is_object(input))
        return api_req_bad(err, path, "\"input\" must be an object, not %s", api_req_kind(input));
    *out = api_call_new(id, name, json_is_object(input) ? json_deep_copy(input) : json_object());
    return HS_OK;
}

/* An assistant message's blocks → one assistant message. */
struct ant_assistant_walk {
    struct strbuf text, reasoning;
    bool has_reasoning;
    json_t *calls;
};

static int ant_assistant_block(void *ctx, const json_t *b, const char *type, const char *path,
                               struct hs_err *err)
{
    struct ant_assistant_walk *w = ctx;
    const char *s;
    size_t len;
    int rc;
    if (strcmp(type, "text") == 0) {
        if ((rc = ant_block_text(b, path, "text", &s, &len, err))) return rc;
        strbuf_append(&w->text, s, len);
    } else if (strcmp(type, "thinking") == 0) {
        if ((rc = ant_block_text(b, path, "thinking", &s, &len, err))) return rc;
        strbuf_append(&w->reasoning, s, len);
        w->has_reasoning = true;
    } else if (strcmp(type, "redacted_thinking") == 0) {
        return HS_OK; /* encrypted; nothing another model could read */
    } else if (strcmp(type, "tool_use") == 0) {
        json_t *call;
        if ((rc = ant_tool_use(b, path, &call, err))) return rc;
        json_array_append_new(w->calls, call);
    } else {
        return ant_block_error(type, path, "assistant messages", err);
    }
    return HS_OK;
}

static int ant_assistant_blocks(struct api_conv *c, const json_t *content, const char *path, struct hs_err *err)
{
    struct ant_assistant_walk w = { .calls = json_array() };
    strbuf_init(&w.text);
    strbuf_init(&w.reasoning);
    int rc = ant_blocks(content, path, ant_assistant_block, &w, err);
    if (!rc) {
        json_t *msg = api_msg_new("assistant", w.text.buf, w.text.len);
        if (w.has_reasoning)
            json_object_set_new(msg, "reasoning_content",
                                json_stringn(w.reasoning.len ? w.reasoning.buf : "", w.reasoning.len));
        if (json_array_size(w.calls)) json_object_set(msg, "tool_calls", w.calls);
        api_conv_add(c, msg);
    }
    json_decref(w.calls);
    strbuf_free(&w.text);
    strbuf_free(&w.reasoning);
    return rc;
}

static int ant_message(struct api_conv *c, const json_t *m, size_t i, struct hs_err *err)
{
    char p[API_PATH_LEN], pf[API_PATH_LEN];
    api_req_path(p, "messages[%zu]", i);
    if (!json_is_object(m)) return api_req_bad(err, p, "expected a message object, not %s", api_req_kind(m));
    const char *role = json_string_value(json_object_get(m, "role"));
    api_req_path(pf, "%s.role", p);
    if (!role) return api_req_bad(err, pf, "must be a string");
    if (strcmp(role, "user") != 0 && strcmp(role, "assistant") != 0 && strcmp(role, "system") != 0)
        return api_req_bad(err, pf, "unknown role '%.40s' (expected user, assistant or system)", role);
    const json_t *content = json_object_get(m, "content");
    api_req_path(pf, "%s.content", p);
    bool is_user = strcmp(role, "user") == 0;
    if (strcmp(role, "system") == 0) {
        /* Claude Code's environment note after the user turn: rule 2 */
        struct strbuf text;
        strbuf_init(&text);
        int rc = ant_text(content, pf, "system messages", NULL, ant_piece_append, &text, err);
        if (!rc) api_conv_system(c, text.buf, text.len);
        strbuf_free(&text);
        return rc;
    }
    if (!content || json_is_null(content)) {
        api_conv_add(c, api_msg_new(role, "", 0));
        return HS_OK;
    }
    if (json_is_string(content)) {
        api_conv_add(c, api_msg_new(role, json_string_value(content), json_string_length(content)));
        return HS_OK;
    }
    if (!json_is_array(content))
        return api_req_bad(err, pf, "expected a string or an array of content blocks, not %s", api_req_kind(content));
    return is_user ? ant_user_blocks(c, content, pf, err) : ant_assistant_blocks(c, content, pf, err);
}

/* Anthropic tools: custom tools become function tools (name, description, parameters in
 * that order); server tools (a `type` other than "custom") are errors. */
static int ant_tools(const json_t *tools, json_t **out, struct hs_err *err)
{
    *out = NULL;
    if (!tools || json_is_null(tools)) return HS_OK;
    if (!json_is_array(tools)) return api_req_bad(err, "tools", "expected an array, not %s", api_req_kind(tools));
    if (json_array_size(tools) == 0) return HS_OK;
    json_t *arr = json_array();
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t) {
        char p[API_PATH_LEN];
        api_req_path(p, "tools[%zu]", i);
        if (!json_is_object(t)) {
            json_decref(arr);
            return api_req_bad(err, p, "expected a tool object, not %s", api_req_kind(t));
        }
        const char *type, *name, *desc;
        int rc = api_opt_string(t, "type", p, &type, NULL, err);
        if (!rc) rc = api_opt_string(t, "name", p, &name, NULL, err);
        if (!rc && type && strcmp(type, "custom") != 0)
            rc = api_req_bad(err, p, "server tool '%.60s' (type '%.60s') is not supported; only custom tools "
                     "with an input_schema", name ? name : "?", type);
        if (!rc && (!name || !*name)) rc = api_req_bad(err, p, "\"name\" must be a non-empty string");
        if (!rc) rc = api_opt_string(t, "description", p, &desc, NULL, err);
        const json_t *schema = json_object_get(t, "input_schema");
        if (!rc && schema && !json_is_null(schema) && !json_is_object(schema))
            rc = api_req_bad(err, p, "\"input_schema\" must be a JSON schema object, not %s", api_req_kind(schema));
        if (rc) {
            json_decref(arr);
            return rc;
        }
        json_array_append_new(arr, api_tool_new(name, desc, desc ? strlen(desc) : 0, schema));
    }
    *out = arr;
    return HS_OK;
}

static const struct {
    const char *type;
    int enable;
} ant_thinking_types[] = {
    { "enabled", 1 },
    { "adaptive", 1 }, /* the model decides how much; the template can only say on */
    { "disabled", 0 },
};

/* Anthropic: {"type": "auto" | "any" | "none" | "tool" (+ "name")}; disable_parallel_tool_use
 * is accepted and has no effect (one call is what a forced call produces anyway). */
static int ant_tool_choice(const json_t *v, struct chat_request *out, struct hs_err *err)
{
    if (!v || json_is_null(v)) return HS_OK;
    const char *type = json_string_value(json_object_get(v, "type"));
    if (!json_is_object(v) || !type) return api_req_bad(err, "tool_choice", "expected an object with a string \"type\"");
    if (!strcmp(type, "auto")) return HS_OK;
    if (!strcmp(type, "none")) return api_tool_choice_set(out, CHAT_TOOL_NONE, NULL, "tool_choice", err);
    if (!strcmp(type, "any")) return api_tool_choice_set(out, CHAT_TOOL_REQUIRED, NULL, "tool_choice", err);
    if (!strcmp(type, "tool")) {
        const char *name = json_string_value(json_object_get(v, "name"));
        if (!name) return api_req_bad(err, "tool_choice.name", "expected a string (the tool to call)");
        return api_tool_choice_set(out, CHAT_TOOL_NAMED, name, "tool_choice.name", err);
    }
    return api_req_bad(err, "tool_choice.type", "unknown value '%.40s' (expected auto, any, tool or none)", type);
}

int chat_from_anthropic(const json_t *body, struct chat_request *out, struct hs_err *err)
{
    memset(out, 0, sizeof *out);
    out->enable_thinking = -1;
    if (!json_is_object(body)) return api_req_bad(err, "request", "expected a JSON object");
    const json_t *msgs = json_object_get(body, "messages");
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return api_req_bad(err, "messages", "expected a non-empty array");

    int thinking = -1;
    const json_t *th = json_object_get(body, "thinking");
    if (th && !json_is_null(th)) {
        const char *type = json_string_value(json_object_get(th, "type"));
        if (!json_is_object(th) || !type)
            return api_req_bad(err, "thinking", "expected an object with a string \"type\"");
        for (size_t k = 0; k < HS_ARRAY_LEN(ant_thinking_types); k++)
            if (strcmp(type, ant_thinking_types[k].type) == 0) thinking = ant_thinking_types[k].enable;
        if (thinking < 0)
            return api_req_bad(err, "thinking.type", "unknown value '%.40s' (expected enabled, adaptive or disabled)", type);
    }

    /* an extension (Anthropic has no such field): `thinking` decides when both are sent */
    int kw_thinking = -1;
    json_t *kwargs;
    int rc = api_template_kwargs(body, &kw_thinking, &kwargs, err);
    if (rc) return rc;
    if (thinking < 0) thinking = kw_thinking;

    struct api_conv c;
    api_conv_init(&c);
    json_t *tools = NULL;
    if ((rc = ant_text(json_object_get(body, "system"), "system", "the system prompt", NULL, ant_system_piece, &c,
                       err)))
        goto fail;
    size_t i;
    const json_t *m;
    json_array_foreach(msgs, i, m)
        if ((rc = ant_message(&c, m, i, err))) goto fail;
    if ((rc = ant_tools(json_object_get(body, "tools"), &tools, err))) goto fail;
    api_conv_deliver(&c, out, tools, thinking);
    out->template_kwargs = kwargs;
    rc = api_stops_parse(body, "stop_sequences", false, &out->stop, err);
    if (rc == HS_OK) rc = ant_tool_choice(json_object_get(body, "tool_choice"), out, err);
    if (rc != HS_OK) api_chat_reset(out);
    return rc;
fail:
    api_conv_free(&c);
    json_decref(kwargs);
    return rc;
}

/* ==== response: parser events → the message / its event stream ============================ */

static const char *const stop_reasons[] = {
    [API_STOP_END] = "end_turn",
    [API_STOP_LENGTH] = "max_tokens",
    [API_STOP_TOOL_CALLS] = "tool_use",
    [API_STOP_STOP_SEQUENCE] = "stop_sequence",
};

static json_t *anthropic_usage(const struct api_usage *u)
{
    json_t *j = json_object();
    json_object_set_new(j, "input_tokens", json_integer(u->prompt_tokens - u->cached_tokens));
    json_object_set_new(j, "cache_creation_input_tokens", json_integer(0));
    json_object_set_new(j, "cache_read_input_tokens", json_integer(u->cached_tokens));
    json_object_set_new(j, "output_tokens", json_integer(u->completion_tokens));
    return j;
}

static json_t *anthropic_message(struct api_response *r, json_t *content, const char *stop,
                                 const char *stop_sequence, const struct api_usage *u)
{
    json_t *m = json_object();
    json_object_set_new(m, "id", json_string(r->id));
    json_object_set_new(m, "type", json_string("message"));
    json_object_set_new(m, "role", json_string("assistant"));
    json_object_set_new(m, "model", api_jstr(r->model));
    json_object_set_new(m, "content", content);
    json_object_set_new(m, "stop_reason", stop ? json_string(stop) : json_null());
    json_object_set_new(m, "stop_sequence", stop_sequence ? api_jstr(stop_sequence) : json_null());
    json_object_set_new(m, "usage", anthropic_usage(u));
    return m;
}

/* The signature of a thinking block: "hs1" and 16 hex digits of the FNV-1a 64 hash of its
 * text. Anthropic's signatures are opaque to clients, but some treat an empty one as "not
 * signed" and replay the reasoning as plain text (pi), which changes the prompt and the
 * bank's path; a stable non-empty value keeps the replayed turn as the model saw it. We
 * accept any signature back and never check it (the request side above). */
static json_t *thinking_signature(const struct api_block *b)
{
    uint64_t h = hs_fnv1a64(HS_FNV1A64_INIT, b->text.buf, b->text.len);
    char sig[24];
    snprintf(sig, sizeof sig, "hs1%016llx", (unsigned long long)h);
    return json_string(sig);
}

/* A content block as it appears in a body (full) or in content_block_start (empty: the
 * signature comes in a signature_delta before the block stops, as Anthropic streams it). */
static json_t *anthropic_block(const struct api_block *b, bool full)
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
        json_object_set_new(j, "name", api_jstr(b->name));
        json_object_set_new(j, "input", full ? json_deep_copy(b->args) : json_object());
        break;
    }
    return j;
}

static void anthropic_block_event(struct strbuf *out, const char *name, int index, const char *key, json_t *value)
{
    json_t *e = json_object();
    json_object_set_new(e, "type", json_string(name));
    json_object_set_new(e, "index", json_integer(index));
    if (key) json_object_set_new(e, key, value);
    api_sse_event(out, name, e);
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
    anthropic_block_event(out, "content_block_start", index, "content_block", anthropic_block(&r->blocks[index], false));
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
    api_sse_event(out, "ping", p);
}

static void anthropic_begin(struct api_response *r, const struct api_usage *u, struct strbuf *out)
{
    json_t *e = json_object();
    json_object_set_new(e, "type", json_string("message_start"));
    json_object_set_new(e, "message", anthropic_message(r, json_array(), NULL, NULL, u));
    api_sse_event(out, "message_start", e);
    anthropic_ping(out);
}

static void anthropic_keepalive(struct api_response *r, struct strbuf *out)
{
    if (r->begun) anthropic_ping(out);
    else strbuf_puts(out, ": keepalive\n\n"); /* before message_start: an SSE comment */
}

static void anthropic_event(struct api_response *r, const struct chat_event *ev, struct strbuf *out)
{
    if (ev->kind == CHAT_EVENT_TOOL_CALL) {
        if (r->stream) anthropic_block_stop(r, out);
        struct api_block *b = api_block_tool_call(r, ev, "toolu_");
        if (!r->stream) return;
        anthropic_block_start(r, out);
        char *args = api_args_text(b->args);
        anthropic_block_event(out, "content_block_delta", r->n_blocks - 1, "delta",
                              anthropic_delta("input_json_delta", "partial_json", api_jstr(args)));
        free(args);
        anthropic_block_stop(r, out);
        return;
    }
    bool opens = api_block_opens(r, ev->kind);
    if (opens && r->stream) anthropic_block_stop(r, out);
    size_t at;
    struct api_block *b = api_block_delta(r, ev->kind, ev->text, ev->text_len, &at);
    if (!r->stream) return;
    if (opens) anthropic_block_start(r, out);
    json_t *d = json_stringn(b->text.buf + at, b->text.len - at);
    anthropic_block_event(out, "content_block_delta", r->n_blocks - 1, "delta",
                          ev->kind == CHAT_EVENT_TEXT ? anthropic_delta("text_delta", "text", d)
                                                      : anthropic_delta("thinking_delta", "thinking", d));
}

static void anthropic_finish(struct api_response *r, enum api_stop stop, const char *stop_sequence,
                             const struct api_usage *u, struct strbuf *out)
{
    if (!r->stream) {
        json_t *content = json_array();
        for (int i = 0; i < r->n_blocks; i++) json_array_append_new(content, anthropic_block(&r->blocks[i], true));
        api_json_steal(out, anthropic_message(r, content, stop_reasons[stop], stop_sequence, u));
        return;
    }
    anthropic_block_stop(r, out);
    json_t *delta = json_object();
    json_object_set_new(delta, "stop_reason", json_string(stop_reasons[stop]));
    json_object_set_new(delta, "stop_sequence", stop_sequence ? api_jstr(stop_sequence) : json_null());
    json_t *e = json_object();
    json_object_set_new(e, "type", json_string("message_delta"));
    json_object_set_new(e, "delta", delta);
    json_object_set_new(e, "usage", anthropic_usage(u));
    api_sse_event(out, "message_delta", e);
    json_t *s = json_object();
    json_object_set_new(s, "type", json_string("message_stop"));
    api_sse_event(out, "message_stop", s);
}

static void anthropic_fail(struct api_response *r, const struct api_error_info *e, const char *message,
                           struct strbuf *out)
{
    api_sse_event(out, "error", api_error_object(r->kind, e, message));
}

const struct api_writer_ops api_anthropic_writer = {
    .id_prefix = "msg_",
    .begin = anthropic_begin,
    .keepalive = anthropic_keepalive,
    .event = anthropic_event,
    .finish = anthropic_finish,
    .fail = anthropic_fail,
};
