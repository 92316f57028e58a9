/*
 * openai_chat.c — the OpenAI chat-completions API (POST /v1/chat/completions), both sides:
 * the request's messages and tools → the neutral conversation of api.h (chat_from_openai,
 * conv.c's rules), and parser events → the chat.completion body or its chunk stream (the
 * api_openai_chat_writer ops that response.c drives).
 *
 * Design note
 * -----------
 * Request: roles system / developer (merged system text), user, assistant (content,
 * reasoning_content or `reasoning`, tool_calls with JSON-string arguments), tool
 * (tool_call_id; media in its content become placeholders); function tools only; the
 * deprecated function_call is an error. Thinking: chat_template_kwargs.enable_thinking wins
 * over the top-level enable_thinking, which wins over reasoning_effort "none". `stop` is a
 * string or an array; tool_choice "auto" | "none" | "required" | {type: function,
 * function: {name}}.
 *
 * Response (non-stream): message.content = every text block joined (null when empty and a
 * tool call exists, "" otherwise), reasoning_content = every reasoning block joined (absent
 * when empty), tool_calls in order; arguments are the compact JSON text of the arguments
 * object with keys in order and non-ASCII raw.
 * Response (stream): `data: {chunk}\n\n`; a role chunk first (delta {role, content:""}),
 * one chunk per delta, one chunk per whole tool call, the finish_reason chunk, the usage
 * chunk (choices [], only with stream_options.include_usage), then `data: [DONE]`.
 * An error after the stream began: `data: {"error":…}` then [DONE] (the SDKs raise APIError
 * on a chunk with an "error" member).
 * Usage: prompt_tokens counts the whole prompt, prompt_tokens_details.cached_tokens the part
 * restored from the bank.
 *
 * Invariants:
 *   1. Concatenating the stream's deltas reproduces the non-stream body (response.c 1).
 *   2. Tool-call ids are "call_" + api_id_make(hash of the request id, call index).
 */
#include "api/api_int.h"

#include <stdlib.h>
#include <string.h>

/* ==== request: messages → the neutral conversation ======================================== */

/* Content parts whose text an OpenAI message reads: `refusal` parts (assistant) count as
 * text. */
static const struct api_text_part oai_text_parts[] = { { "text", "text" }, { "refusal", "refusal" } };

/* Append the text of an OpenAI `content` (api_parts_text). media: the conversation that
 * counts placeholders for media parts (a tool message, rule 4), or NULL (an error). */
static int oai_text(const json_t *content, const char *path, struct api_conv *media, struct strbuf *out,
                    struct hs_err *err)
{
    return api_parts_text(content, path, oai_text_parts, HS_ARRAY_LEN(oai_text_parts),
                          "a string, null or an array of content parts", media, out, err);
}

/* One OpenAI tool call → {type: "function", id?, function: {name, arguments: object}}. */
static int oai_tool_call(const json_t *tc, const char *path, json_t **out, struct hs_err *err)
{
    *out = NULL;
    if (!json_is_object(tc)) return api_req_bad(err, path, "expected a tool call object, not %s", api_req_kind(tc));
    const char *type, *id, *name;
    int rc = api_opt_string(tc, "type", path, &type, NULL, err);
    if (rc) return rc;
    if (type && strcmp(type, "function") != 0)
        return api_req_bad(err, path, "tool call type '%.40s' is not supported (only \"function\")", type);
    if ((rc = api_opt_string(tc, "id", path, &id, NULL, err))) return rc;
    char p[API_PATH_LEN];
    api_req_path(p, "%s.function", path);
    const json_t *fn = json_object_get(tc, "function");
    if (!json_is_object(fn)) return api_req_bad(err, p, "expected an object with \"name\" and \"arguments\"");
    if ((rc = api_opt_string(fn, "name", p, &name, NULL, err))) return rc;
    if (!name || !*name) return api_req_bad(err, p, "\"name\" must be a non-empty string");
    char pa[API_PATH_LEN];
    api_req_path(pa, "%s.arguments", p);
    json_t *args;
    if ((rc = api_args_parse(json_object_get(fn, "arguments"), pa, &args, err))) return rc;

    *out = api_call_new(id, name, args);
    return HS_OK;
}

static const struct {
    const char *api_role;
    const char *role; /* in the neutral conversation */
} oai_roles[] = {
    { "system", "system" },
    { "developer", "system" }, /* the newer name of the same thing (Codex sends it) */
    { "user", "user" },
    { "assistant", "assistant" },
    { "tool", "tool" },
};

static int oai_message(struct api_conv *c, const json_t *m, size_t i, struct hs_err *err)
{
    char p[API_PATH_LEN], pf[API_PATH_LEN];
    api_req_path(p, "messages[%zu]", i);
    if (!json_is_object(m)) return api_req_bad(err, p, "expected a message object, not %s", api_req_kind(m));
    const char *api_role = json_string_value(json_object_get(m, "role"));
    const char *role = NULL;
    api_req_path(pf, "%s.role", p);
    if (!api_role) return api_req_bad(err, pf, "must be a string");
    for (size_t k = 0; k < HS_ARRAY_LEN(oai_roles); k++)
        if (strcmp(api_role, oai_roles[k].api_role) == 0) role = oai_roles[k].role;
    if (!role)
        return api_req_bad(err, pf, "unknown role '%.40s' (expected system, developer, user, assistant or tool)",
                   api_role);
    const json_t *fc = json_object_get(m, "function_call");
    if (fc && !json_is_null(fc)) {
        api_req_path(pf, "%s.function_call", p);
        return api_req_bad(err, pf, "the deprecated function_call is not supported; send tool_calls");
    }
    const json_t *tcs = json_object_get(m, "tool_calls");
    bool has_calls = tcs && !json_is_null(tcs);
    api_req_path(pf, "%s.tool_calls", p);
    if (has_calls && strcmp(role, "assistant") != 0)
        return api_req_bad(err, pf, "only assistant messages carry tool calls");
    if (has_calls && !json_is_array(tcs)) return api_req_bad(err, pf, "expected an array, not %s", api_req_kind(tcs));

    json_t *msg = NULL;
    struct strbuf text;
    strbuf_init(&text);
    api_req_path(pf, "%s.content", p);
    int rc = oai_text(json_object_get(m, "content"), pf, strcmp(role, "tool") == 0 ? c : NULL, &text, err);
    if (rc) goto out;
    if (strcmp(role, "system") == 0) {
        api_conv_system(c, text.buf, text.len);
        goto out;
    }

    msg = api_msg_new(role, text.buf, text.len);
    const char *s;
    size_t len;
    if (strcmp(role, "assistant") == 0) {
        /* `reasoning` is the name some servers (and their clients) use for the same field */
        if ((rc = api_opt_string(m, "reasoning_content", p, &s, &len, err))) goto fail;
        if (!s && (rc = api_opt_string(m, "reasoning", p, &s, &len, err))) goto fail;
        if (s) json_object_set_new(msg, "reasoning_content", json_stringn(s, len));
        if (has_calls && json_array_size(tcs)) {
            json_t *calls = json_array();
            json_object_set_new(msg, "tool_calls", calls);
            size_t k;
            const json_t *tc;
            json_array_foreach(tcs, k, tc) {
                json_t *call;
                api_req_path(pf, "%s.tool_calls[%zu]", p, k);
                if ((rc = oai_tool_call(tc, pf, &call, err))) goto fail;
                json_array_append_new(calls, call);
            }
        }
    }
    if (strcmp(role, "tool") == 0) {
        if ((rc = api_opt_string(m, "tool_call_id", p, &s, &len, err))) goto fail;
        if (s) json_object_set_new(msg, "tool_call_id", json_stringn(s, len));
    }
    if ((rc = api_opt_string(m, "name", p, &s, &len, err))) goto fail;
    if (s) json_object_set_new(msg, "name", json_stringn(s, len));
    api_conv_add(c, msg);
    goto out;
fail:
    json_decref(msg);
out:
    strbuf_free(&text);
    return rc;
}

/* OpenAI tools: function tools copied as sent (key order kept); other types are errors. */
static int oai_tools(const json_t *tools, json_t **out, struct hs_err *err)
{
    *out = NULL;
    if (!tools || json_is_null(tools)) return HS_OK;
    if (!json_is_array(tools)) return api_req_bad(err, "tools", "expected an array, not %s", api_req_kind(tools));
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t) {
        char p[API_PATH_LEN], pf[API_PATH_LEN];
        api_req_path(p, "tools[%zu]", i);
        if (!json_is_object(t)) return api_req_bad(err, p, "expected a tool object, not %s", api_req_kind(t));
        const char *type = json_string_value(json_object_get(t, "type"));
        if (!type) return api_req_bad(err, p, "\"type\" must be a string (\"function\")");
        if (strcmp(type, "function") != 0)
            return api_req_bad(err, p, "tool type '%.40s' is not supported (only \"function\" tools)", type);
        api_req_path(pf, "%s.function", p);
        const json_t *fn = json_object_get(t, "function");
        if (!json_is_object(fn)) return api_req_bad(err, pf, "expected an object with \"name\"");
        const char *name, *desc;
        int rc = api_opt_string(fn, "name", pf, &name, NULL, err);
        if (rc) return rc;
        if (!name || !*name) return api_req_bad(err, pf, "\"name\" must be a non-empty string");
        if ((rc = api_opt_string(fn, "description", pf, &desc, NULL, err))) return rc;
        const json_t *params = json_object_get(fn, "parameters");
        if (params && !json_is_null(params) && !json_is_object(params))
            return api_req_bad(err, pf, "\"parameters\" must be a JSON schema object, not %s", api_req_kind(params));
    }
    if (json_array_size(tools)) *out = json_deep_copy(tools);
    return HS_OK;
}

/* OpenAI: "auto" | "none" | "required" | {"type":"function","function":{"name":NAME}}. */
static int oai_tool_choice(const json_t *v, struct chat_request *out, struct hs_err *err)
{
    if (!v || json_is_null(v)) return HS_OK;
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (!strcmp(s, "auto")) return HS_OK;
        if (!strcmp(s, "none")) return api_tool_choice_set(out, CHAT_TOOL_NONE, NULL, "tool_choice", err);
        if (!strcmp(s, "required")) return api_tool_choice_set(out, CHAT_TOOL_REQUIRED, NULL, "tool_choice", err);
        return api_req_bad(err, "tool_choice", "unknown value '%.40s' (expected auto, none, required or a function)", s);
    }
    const char *type = json_string_value(json_object_get(v, "type"));
    const char *name = json_string_value(json_object_get(json_object_get(v, "function"), "name"));
    if (!json_is_object(v) || !type || strcmp(type, "function") || !name)
        return api_req_bad(err, "tool_choice", "expected \"auto\", \"none\", \"required\" or "
                                       "{\"type\": \"function\", \"function\": {\"name\": NAME}}");
    return api_tool_choice_set(out, CHAT_TOOL_NAMED, name, "tool_choice.function.name", err);
}

int chat_from_openai(const json_t *body, struct chat_request *out, struct hs_err *err)
{
    memset(out, 0, sizeof *out);
    out->enable_thinking = -1;
    if (!json_is_object(body)) return api_req_bad(err, "request", "expected a JSON object");
    const json_t *msgs = json_object_get(body, "messages");
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return api_req_bad(err, "messages", "expected a non-empty array");

    int thinking = -1;
    const json_t *et = json_object_get(body, "enable_thinking");
    const json_t *effort = json_object_get(body, "reasoning_effort");
    if (et && !json_is_null(et)) {
        if (!json_is_boolean(et)) return api_req_bad(err, "enable_thinking", "expected a boolean, not %s", api_req_kind(et));
        if (thinking < 0) thinking = json_is_true(et);
    }
    if (effort && !json_is_null(effort)) {
        if (!json_is_string(effort))
            return api_req_bad(err, "reasoning_effort", "expected a string, not %s", api_req_kind(effort));
        /* "none" asks for no reasoning; other efforts leave the template's default (on) */
        if (thinking < 0 && strcmp(json_string_value(effort), "none") == 0) thinking = 0;
    }

    /* the kwargs' enable_thinking wins over the top-level flag and reasoning_effort */
    int kw_thinking = -1;
    json_t *kwargs;
    int rc = api_template_kwargs(body, &kw_thinking, &kwargs, err);
    if (rc) return rc;
    if (kw_thinking >= 0) thinking = kw_thinking;

    struct api_conv c;
    api_conv_init(&c);
    json_t *tools = NULL;
    size_t i;
    const json_t *m;
    json_array_foreach(msgs, i, m)
        if ((rc = oai_message(&c, m, i, err))) goto fail;
    if ((rc = oai_tools(json_object_get(body, "tools"), &tools, err))) goto fail;
    api_conv_deliver(&c, out, tools, thinking);
    out->template_kwargs = kwargs;
    rc = api_stops_parse(body, "stop", true, &out->stop, err);
    if (rc == HS_OK) rc = oai_tool_choice(json_object_get(body, "tool_choice"), out, err);
    if (rc != HS_OK) api_chat_reset(out);
    return rc;
fail:
    api_conv_free(&c);
    json_decref(kwargs);
    return rc;
}

/* ==== response: parser events → chat.completion / its chunks =============================== */

static const char *const finish_reasons[] = {
    [API_STOP_END] = "stop",
    [API_STOP_LENGTH] = "length",
    [API_STOP_TOOL_CALLS] = "tool_calls",
    [API_STOP_STOP_SEQUENCE] = "stop",
};

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

/* Append one chunk with choice 0 carrying `delta` (stolen) and finish_reason (NULL: null). */
/* {id, object, created, model, choices: [{index: 0, <key>: value (stolen), finish_reason}]}:
 * the envelope of a chat.completion and of its chunks. */
static json_t *openai_envelope(struct api_response *r, const char *object, const char *key, json_t *value,
                               const char *finish)
{
    json_t *choice = json_object();
    json_object_set_new(choice, "index", json_integer(0));
    json_object_set_new(choice, key, value);
    json_object_set_new(choice, "finish_reason", finish ? json_string(finish) : json_null());
    json_t *choices = json_array();
    json_array_append_new(choices, choice);
    json_t *root = json_object();
    json_object_set_new(root, "id", json_string(r->id));
    json_object_set_new(root, "object", json_string(object));
    json_object_set_new(root, "created", json_integer(r->created));
    json_object_set_new(root, "model", api_jstr(r->model));
    json_object_set_new(root, "choices", choices);
    return root;
}

static void openai_chunk(struct api_response *r, json_t *delta, const char *finish, struct strbuf *out)
{
    api_sse_data(out, openai_envelope(r, "chat.completion.chunk", "delta", delta, finish));
}

static json_t *openai_tool_call(const struct api_block *b, int index, bool with_index)
{
    char *args = api_args_text(b->args);
    json_t *fn = json_object();
    json_object_set_new(fn, "name", api_jstr(b->name));
    json_object_set_new(fn, "arguments", api_jstr(args));
    free(args);
    json_t *tc = json_object();
    if (with_index) json_object_set_new(tc, "index", json_integer(index));
    json_object_set_new(tc, "id", json_string(b->id));
    json_object_set_new(tc, "type", json_string("function"));
    json_object_set_new(tc, "function", fn);
    return tc;
}

static void openai_body(struct api_response *r, const char *finish, const struct api_usage *u, struct strbuf *out)
{
    struct strbuf text, reasoning;
    strbuf_init(&text);
    strbuf_init(&reasoning);
    json_t *calls = json_array();
    int ti = 0;
    for (int i = 0; i < r->n_blocks; i++) {
        const struct api_block *b = &r->blocks[i];
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

    json_t *root = openai_envelope(r, "chat.completion", "message", msg, finish);
    json_object_set_new(root, "usage", openai_usage(u));
    api_json_steal(out, root);
}

static void openai_begin(struct api_response *r, const struct api_usage *u, struct strbuf *out)
{
    (void)u; /* usage comes in the last chunk */
    json_t *delta = json_object();
    json_object_set_new(delta, "role", json_string("assistant"));
    json_object_set_new(delta, "content", json_string(""));
    openai_chunk(r, delta, NULL, out);
}

static void openai_event(struct api_response *r, const struct chat_event *ev, struct strbuf *out)
{
    if (ev->kind == CHAT_EVENT_TOOL_CALL) {
        struct api_block *b = api_block_tool_call(r, ev, "call_");
        if (!r->stream) return;
        json_t *calls = json_array();
        json_array_append_new(calls, openai_tool_call(b, r->n_tools - 1, true));
        json_t *delta = json_object();
        json_object_set_new(delta, "tool_calls", calls);
        openai_chunk(r, delta, NULL, out);
        return;
    }
    size_t at;
    struct api_block *b = api_block_delta(r, ev->kind, ev->text, ev->text_len, &at);
    if (!r->stream) return;
    json_t *delta = json_object();
    json_object_set_new(delta, ev->kind == CHAT_EVENT_TEXT ? "content" : "reasoning_content",
                        json_stringn(b->text.buf + at, b->text.len - at));
    openai_chunk(r, delta, NULL, out);
}

static void openai_finish(struct api_response *r, enum api_stop stop, const char *stop_sequence,
                          const struct api_usage *u, struct strbuf *out)
{
    (void)stop_sequence; /* OpenAI does not name the matched string */
    if (!r->stream) {
        openai_body(r, finish_reasons[stop], u, out);
        return;
    }
    openai_chunk(r, json_object(), finish_reasons[stop], out);
    if (r->include_usage) {
        json_t *k = json_object();
        json_object_set_new(k, "id", json_string(r->id));
        json_object_set_new(k, "object", json_string("chat.completion.chunk"));
        json_object_set_new(k, "created", json_integer(r->created));
        json_object_set_new(k, "model", api_jstr(r->model));
        json_object_set_new(k, "choices", json_array());
        json_object_set_new(k, "usage", openai_usage(u));
        api_sse_data(out, k);
    }
    strbuf_puts(out, "data: [DONE]\n\n");
}

static void openai_fail(struct api_response *r, const struct api_error_info *e, const char *message,
                        struct strbuf *out)
{
    api_sse_data(out, api_error_object(r->kind, e, message));
    strbuf_puts(out, "data: [DONE]\n\n");
}

const struct api_writer_ops api_openai_chat_writer = {
    .id_prefix = "chatcmpl-",
    .begin = openai_begin,
    .event = openai_event,
    .finish = openai_finish,
    .fail = openai_fail,
};
