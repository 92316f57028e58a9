/*
 * responses.c — the OpenAI Responses API (POST /v1/responses, the only API Codex speaks):
 * the request's `instructions`, `input` items and `tools` → the neutral conversation of
 * api.h (chat_from_responses), and parser events → the response object or its SSE event
 * stream (the api_responses_writer ops that response.c drives for
 * API_KIND_OPENAI_RESPONSES); docs/API.md states the same rules for users.
 *
 * Design note
 * -----------
 * Request → conversation (chat_from_responses). The rules of conv.c hold (one merged
 * leading system message; a late system text becomes a user turn at its place; text parts
 * joined with ""; media parts are errors naming the item and part, except in a tool's
 * output, where each becomes conv.c's placeholder):
 *
 *   instructions (string)          the first piece of the system message
 *   input: a string                one user message
 *   input item (type, role)        becomes
 *   message system / developer     system text (merged while nothing else came, else a user turn)
 *   message user                   a user message (input_text parts)
 *   message assistant              an assistant message (output_text / refusal parts)
 *   function_call                  a tool call {id: call_id, name, arguments object} of the
 *                                  assistant message right before it, or of a new one
 *   custom_tool_call               the same, arguments {"input": input}
 *   function_call_output,          a role "tool" message {tool_call_id: call_id, content:
 *   custom_tool_call_output          the output string or its text parts joined}
 *   reasoning                      reasoning_content of the next assistant message that the
 *                                  following items open (its reasoning_text content joined,
 *                                  else its summary texts joined with "\n\n"; encrypted
 *                                  content is ignored); dropped when a user or tool turn
 *                                  comes first. What we generated comes back as what the
 *                                  model saw, so the bank's path for the turn still matches.
 *   item_reference, other types    400 naming the item (nothing is stored; no hosted tools)
 *
 *   tools: {type: "function", name, description?, parameters?} → {type: "function",
 *   function: {name, description, parameters}} in the client's order ("strict" dropped).
 *   Every other tool type (web_search, namespace, local_shell, custom, file_search, mcp,
 *   image_generation, ...) is skipped: the model cannot run hosted tools and custom
 *   (free-form grammar) tools have no JSON schema. Skipping depends only on the type, so
 *   equal tool lists still render to equal heads.
 *   reasoning.effort "none" turns the template's thinking off (as chat's reasoning_effort);
 *   chat_template_kwargs (enable_thinking and any template variable) and `stop` (a string or up to CHAT_STOP_MAX
 *   strings) work as in chat completions (extensions: the Responses API has neither).
 *   previous_response_id, conversation, prompt and background:true are 400: responses are
 *   not stored. store, include, prompt_cache_key, text, parallel_tool_calls, metadata,
 *   truncation, user, service_tier, safety_identifier, stream_options are accepted and
 *   ignored. tool_choice auto / none / required / {type: "function", name} maps to enum
 *   chat_tool_choice as in chat completions; other choice objects leave it auto.
 *
 * Conversation → response. The writer keeps its own output items (response.c runs the
 * parser and the lifecycle). Output items
 * in arrival order: consecutive reasoning deltas make one reasoning item ("rs_…", content
 * [{type: "reasoning_text"}], summary []), consecutive text deltas one message item
 * ("msg_…", content [{type: "output_text", annotations: []}]), each tool call one
 * function_call item ("fc_…", call_id "call_…", arguments the compact JSON text). The
 * stream (`event: NAME\ndata: {type: NAME, sequence_number, ...}\n\n`):
 *
 *   response.created, response.in_progress                       (status "in_progress")
 *   per reasoning item: output_item.added, content_part.added, reasoning_text.delta*,
 *     reasoning_text.done, content_part.done, output_item.done
 *   per message item:   output_item.added, content_part.added, output_text.delta*,
 *     output_text.done, content_part.done, output_item.done
 *   per function call:  output_item.added, function_call_arguments.delta (the whole text),
 *     function_call_arguments.done, output_item.done
 *   response.completed, or response.incomplete (max_output_tokens)
 *   an error after the stream began: `error` then response.failed
 *
 * The non-stream body is the final response object of response.completed/.incomplete.
 * Usage: input_tokens counts the whole prompt, input_tokens_details.cached_tokens the part
 * restored from the bank; output_tokens_details.reasoning_tokens counts the generated
 * tokens fed before the first visible output (text or tool call) when there was reasoning
 * (the `</think>` token and the blank line after it included).
 *
 * Invariants:
 *   1. sequence_number counts up from 0 without gaps over one stream.
 *   2. Every output_item.added has exactly one output_item.done with the same item before
 *      the next item is added or the response ends; a content part is likewise closed.
 *   3. The stream's items, concatenated, equal the final response's output (ids, text,
 *      arguments); the non-stream body is that same object.
 *   4. Every string written is valid UTF-8 (invalid bytes become U+FFFD when stored).
 *   5. Ids are deterministic: items from the response id and their output index.
 */
#include "api/api_int.h"

#include <string.h>

/* ==== request: input items → the neutral conversation ===================================== */

/* Content part types and the field that holds their text; media types are errors. */
static const struct api_text_part rs_text_parts[] = {
    { "input_text", "text" }, { "output_text", "text" }, { "text", "text" },
    { "refusal", "refusal" }, { "summary_text", "text" }, { "reasoning_text", "text" },
};

struct rconv {
    struct api_conv b;       /* the conversation, as conv.c builds it */
    struct strbuf reasoning; /* a reasoning item's text waiting for its assistant message */
    bool have_reasoning;
};

/* The assistant message a tool call attaches to: the last message when it is an assistant
 * turn with no pending reasoning for a new one, else a new empty assistant message. */
static json_t *rconv_assistant(struct rconv *c, bool for_call)
{
    size_t n = json_array_size(c->b.msgs);
    json_t *last = n ? json_array_get(c->b.msgs, n - 1) : NULL;
    const char *role = last ? json_string_value(json_object_get(last, "role")) : NULL;
    if (for_call && role && !strcmp(role, "assistant") && !c->have_reasoning) return last;
    json_t *m = api_msg_new("assistant", "", 0);
    if (c->have_reasoning)
        json_object_set_new(m, "reasoning_content", json_stringn(c->reasoning.buf ? c->reasoning.buf : "", c->reasoning.len));
    strbuf_reset(&c->reasoning);
    c->have_reasoning = false;
    api_conv_add(&c->b, m);
    return m;
}

/* A user or tool turn ends the assistant turn: reasoning that opened nothing is dropped. */
static void rconv_turn_break(struct rconv *c)
{
    strbuf_reset(&c->reasoning);
    c->have_reasoning = false;
}

/* Append the text of `content` (api_parts_text). media: the conversation that counts
 * placeholders for media parts (a tool's output, conv.c rule 4), or NULL (an error). */
static int rs_text(const json_t *content, const char *path, struct api_conv *media, struct strbuf *out,
                   struct hs_err *err)
{
    return api_parts_text(content, path, rs_text_parts, HS_ARRAY_LEN(rs_text_parts),
                          "a string or an array of content parts", media, out, err);
}

/* A required non-empty string field. */
static int rs_req_string(const json_t *obj, const char *key, const char *path, const char **s, struct hs_err *err)
{
    const json_t *v = json_object_get(obj, key);
    *s = json_string_value(v);
    if (!*s || !**s) return api_req_bad(err, path, "\"%s\" must be a non-empty string", key);
    return HS_OK;
}

static int rs_item_message(struct rconv *c, const json_t *it, const char *p, struct hs_err *err)
{
    char pf[API_PATH_LEN];
    api_req_path(pf, "%s.role", p);
    const char *role = json_string_value(json_object_get(it, "role"));
    if (!role) return api_req_bad(err, pf, "must be a string");
    bool sys = !strcmp(role, "system") || !strcmp(role, "developer");
    if (!sys && strcmp(role, "user") && strcmp(role, "assistant"))
        return api_req_bad(err, pf, "unknown role '%.40s' (expected system, developer, user or assistant)", role);
    struct strbuf text;
    strbuf_init(&text);
    api_req_path(pf, "%s.content", p);
    int rc = rs_text(json_object_get(it, "content"), pf, NULL, &text, err);
    if (rc == HS_OK) {
        if (sys) {
            api_conv_system(&c->b, text.buf, text.len);
        } else if (!strcmp(role, "user")) {
            rconv_turn_break(c);
            api_conv_add(&c->b, api_msg_new("user", text.buf, text.len));
        } else {
            json_t *m = rconv_assistant(c, false);
            json_object_set_new(m, "content", json_stringn(text.buf ? text.buf : "", text.len));
        }
    }
    strbuf_free(&text);
    return rc;
}

static int rs_item_call(struct rconv *c, const json_t *it, const char *p, bool custom, struct hs_err *err)
{
    const char *call_id, *name;
    int rc = rs_req_string(it, "call_id", p, &call_id, err);
    if (!rc) rc = rs_req_string(it, "name", p, &name, err);
    if (rc) return rc;
    json_t *args;
    char pa[API_PATH_LEN];
    if (custom) {
        const json_t *in = json_object_get(it, "input");
        if (in && !json_is_null(in) && !json_is_string(in)) return api_req_bad(err, p, "\"input\" must be a string");
        args = json_object();
        json_object_set_new(args, "input", json_string(json_is_string(in) ? json_string_value(in) : ""));
    } else {
        api_req_path(pa, "%s.arguments", p);
        if ((rc = api_args_parse(json_object_get(it, "arguments"), pa, &args, err))) return rc;
    }
    json_t *call = api_call_new(call_id, name, args);
    json_t *m = rconv_assistant(c, true);
    json_t *calls = json_object_get(m, "tool_calls");
    if (!calls) {
        calls = json_array();
        json_object_set_new(m, "tool_calls", calls);
    }
    json_array_append_new(calls, call);
    return HS_OK;
}

static int rs_item_output(struct rconv *c, const json_t *it, const char *p, struct hs_err *err)
{
    const char *call_id;
    int rc = rs_req_string(it, "call_id", p, &call_id, err);
    if (rc) return rc;
    struct strbuf text;
    strbuf_init(&text);
    char pf[API_PATH_LEN];
    api_req_path(pf, "%s.output", p);
    rc = rs_text(json_object_get(it, "output"), pf, &c->b, &text, err);
    if (rc == HS_OK) {
        rconv_turn_break(c);
        json_t *m = api_msg_new("tool", text.buf, text.len);
        json_object_set_new(m, "tool_call_id", json_string(call_id));
        api_conv_add(&c->b, m);
    }
    strbuf_free(&text);
    return rc;
}

static int rs_item_reasoning(struct rconv *c, const json_t *it, const char *p, struct hs_err *err)
{
    struct strbuf text;
    strbuf_init(&text);
    char pf[API_PATH_LEN];
    api_req_path(pf, "%s.content", p);
    int rc = rs_text(json_object_get(it, "content"), pf, NULL, &text, err);
    const json_t *summary = json_object_get(it, "summary");
    if (rc == HS_OK && text.len == 0 && summary && !json_is_null(summary)) {
        api_req_path(pf, "%s.summary", p);
        if (!json_is_array(summary)) rc = api_req_bad(err, pf, "expected an array, not %s", api_req_kind(summary));
        size_t i;
        const json_t *s;
        json_array_foreach(summary, i, s) {
            if (rc) break;
            char ps[API_PATH_LEN];
            api_req_path(ps, "%s[%zu]", pf, i);
            const json_t *t = json_object_get(s, "text");
            if (!json_is_string(t)) {
                rc = api_req_bad(err, ps, "expected a summary_text part with a string \"text\"");
                break;
            }
            if (text.len) strbuf_append(&text, "\n\n", 2);
            strbuf_append(&text, json_string_value(t), json_string_length(t));
        }
    }
    if (rc == HS_OK && text.len) {
        strbuf_append(&c->reasoning, text.buf, text.len);
        c->have_reasoning = true;
    }
    strbuf_free(&text);
    return rc;
}

static int rs_item(struct rconv *c, const json_t *it, size_t i, struct hs_err *err)
{
    char p[API_PATH_LEN];
    api_req_path(p, "input[%zu]", i);
    if (!json_is_object(it)) return api_req_bad(err, p, "expected an input item object, not %s", api_req_kind(it));
    const json_t *tv = json_object_get(it, "type");
    if (tv && !json_is_null(tv) && !json_is_string(tv)) return api_req_bad(err, p, "\"type\" must be a string");
    const char *type = json_string_value(tv);
    if (!type || !strcmp(type, "message")) return rs_item_message(c, it, p, err);
    if (!strcmp(type, "function_call")) return rs_item_call(c, it, p, false, err);
    if (!strcmp(type, "custom_tool_call")) return rs_item_call(c, it, p, true, err);
    if (!strcmp(type, "function_call_output") || !strcmp(type, "custom_tool_call_output"))
        return rs_item_output(c, it, p, err);
    if (!strcmp(type, "reasoning")) return rs_item_reasoning(c, it, p, err);
    if (!strcmp(type, "item_reference"))
        return api_req_bad(err, p, "item_reference is not supported: headstart does not store responses; send the items");
    return api_req_bad(err, p, "input item type '%.40s' is not supported (message, function_call, function_call_output, "
                          "custom_tool_call, custom_tool_call_output, reasoning)", type);
}

/* Function tools in the neutral shape; every other type skipped (see the design note). */
static int rs_tools(const json_t *tools, json_t **out, struct hs_err *err)
{
    *out = NULL;
    if (!tools || json_is_null(tools)) return HS_OK;
    if (!json_is_array(tools)) return api_req_bad(err, "tools", "expected an array, not %s", api_req_kind(tools));
    json_t *arr = json_array();
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t) {
        char p[API_PATH_LEN];
        api_req_path(p, "tools[%zu]", i);
        int rc = HS_OK;
        const char *type = json_string_value(json_object_get(t, "type"));
        if (!json_is_object(t)) rc = api_req_bad(err, p, "expected a tool object, not %s", api_req_kind(t));
        else if (!type) rc = api_req_bad(err, p, "\"type\" must be a string");
        if (rc) {
            json_decref(arr);
            return rc;
        }
        if (strcmp(type, "function")) continue;
        const char *name = json_string_value(json_object_get(t, "name"));
        const json_t *desc = json_object_get(t, "description");
        const json_t *params = json_object_get(t, "parameters");
        if (!name || !*name) rc = api_req_bad(err, p, "\"name\" must be a non-empty string");
        else if (desc && !json_is_null(desc) && !json_is_string(desc)) rc = api_req_bad(err, p, "\"description\" must be a string");
        else if (params && !json_is_null(params) && !json_is_object(params))
            rc = api_req_bad(err, p, "\"parameters\" must be a JSON schema object, not %s", api_req_kind(params));
        if (rc) {
            json_decref(arr);
            return rc;
        }
        json_array_append_new(arr, api_tool_new(name, json_string_value(desc), json_string_length(desc), params));
    }
    if (json_array_size(arr)) *out = arr;
    else json_decref(arr);
    return HS_OK;
}

/* tool_choice: "auto" | "none" | "required" | {"type": "function", "name": NAME} (a name in
 * the function tools). Not conv.c's api_tool_choice_set: its errors say "function tools"
 * and name tool_choice.name, words clients already see. Other objects (allowed_tools, a
 * hosted tool type) leave the model to decide: the hosted tools are skipped, so they cannot be forced. */
static int rs_tool_choice(const json_t *v, const json_t *tools, struct chat_request *out, struct hs_err *err)
{
    if (!v || json_is_null(v)) return HS_OK;
    enum chat_tool_choice tc = CHAT_TOOL_AUTO;
    const char *name = NULL;
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (!strcmp(s, "none")) tc = CHAT_TOOL_NONE;
        else if (!strcmp(s, "required")) tc = CHAT_TOOL_REQUIRED;
        else if (strcmp(s, "auto"))
            return api_req_bad(err, "tool_choice", "unknown value '%.40s' (expected auto, none, required or an object)", s);
    } else if (json_is_object(v)) {
        const char *type = json_string_value(json_object_get(v, "type"));
        if (!type) return api_req_bad(err, "tool_choice", "\"type\" must be a string");
        if (!strcmp(type, "function")) {
            name = json_string_value(json_object_get(v, "name"));
            if (!name) return api_req_bad(err, "tool_choice.name", "expected a string (the function to call)");
            tc = CHAT_TOOL_NAMED;
        }
    } else {
        return api_req_bad(err, "tool_choice", "expected a string or an object, not %s", api_req_kind(v));
    }
    size_t n_tools = json_array_size(tools);
    if ((tc == CHAT_TOOL_REQUIRED || tc == CHAT_TOOL_NAMED) && n_tools == 0)
        return api_req_bad(err, "tool_choice", "asks for a tool call but the request has no function tools");
    if (tc == CHAT_TOOL_NAMED) {
        bool found = false;
        for (size_t i = 0; i < n_tools && !found; i++) {
            const char *tn = json_string_value(json_object_get(json_object_get(json_array_get(tools, i), "function"), "name"));
            found = tn && !strcmp(tn, name);
        }
        if (!found) return api_req_bad(err, "tool_choice.name", "no function tool named '%.100s' in tools", name);
        out->tool_name = hs_strdup(name);
    }
    out->tool_choice = tc;
    return HS_OK;
}

/* Extension (as in chat completions; the Responses API has none): `stop`, a string or an
 * array of 1..CHAT_STOP_MAX non-empty strings of at most CHAT_STOP_LEN_MAX bytes. Its own
 * parser, not api_stops_parse: the error messages differ ("stop: item N: ..."). */
static int rs_stop(const json_t *v, json_t **out, struct hs_err *err)
{
    *out = NULL;
    if (!v || json_is_null(v)) return HS_OK;
    json_t *arr = json_array();
    if (json_is_string(v)) json_array_append(arr, (json_t *)v);
    else if (json_is_array(v)) json_array_extend(arr, (json_t *)v);
    int rc = HS_OK;
    if (!json_is_string(v) && !json_is_array(v))
        rc = api_req_bad(err, "stop", "expected a string or an array of strings, not %s", api_req_kind(v));
    else if (json_array_size(arr) > CHAT_STOP_MAX)
        rc = api_req_bad(err, "stop", "at most %d stop strings, got %zu", CHAT_STOP_MAX, json_array_size(arr));
    size_t i;
    const json_t *s;
    json_array_foreach(arr, i, s) {
        if (rc) break;
        if (!json_is_string(s)) rc = api_req_bad(err, "stop", "item %zu: expected a string, not %s", i, api_req_kind(s));
        else if (json_string_length(s) == 0) rc = api_req_bad(err, "stop", "item %zu: a stop string must not be empty", i);
        else if (json_string_length(s) > CHAT_STOP_LEN_MAX)
            rc = api_req_bad(err, "stop", "item %zu: a stop string is at most %d bytes", i, CHAT_STOP_LEN_MAX);
    }
    if (rc || json_array_size(arr) == 0) json_decref(arr);
    else *out = arr;
    return rc;
}

/* Fields that need state headstart does not keep: present and not null/false → 400. */
static const struct {
    const char *key;
    const char *why;
} rs_stateful[] = {
    { "previous_response_id", "headstart does not store responses; send the whole conversation in 'input'" },
    { "conversation", "headstart does not store conversations; send the whole conversation in 'input'" },
    { "prompt", "stored prompt templates are not supported; send 'instructions' and 'input'" },
    { "background", "background responses are not supported (nothing is stored); omit it or send false" },
};

static int rs_options(const json_t *body, int *thinking, struct hs_err *err)
{
    for (size_t k = 0; k < HS_ARRAY_LEN(rs_stateful); k++) {
        const json_t *v = json_object_get(body, rs_stateful[k].key);
        if (v && !json_is_null(v) && !json_is_false(v)) return api_req_bad(err, rs_stateful[k].key, "%s", rs_stateful[k].why);
    }
    const json_t *r = json_object_get(body, "reasoning");
    if (r && !json_is_null(r)) {
        if (!json_is_object(r)) return api_req_bad(err, "reasoning", "expected an object, not %s", api_req_kind(r));
        const json_t *effort = json_object_get(r, "effort");
        if (effort && !json_is_null(effort) && !json_is_string(effort))
            return api_req_bad(err, "reasoning.effort", "expected a string, not %s", api_req_kind(effort));
        if (json_is_string(effort) && !strcmp(json_string_value(effort), "none")) *thinking = 0;
    }
    return HS_OK;
}

int chat_from_responses(const json_t *body, struct chat_request *out, struct hs_err *err)
{
    memset(out, 0, sizeof *out);
    out->enable_thinking = -1;
    if (!json_is_object(body)) return api_req_bad(err, "request", "expected a JSON object");
    int thinking = -1;
    int rc = rs_options(body, &thinking, err);
    if (rc) return rc;
    const json_t *input = json_object_get(body, "input");
    if (!(json_is_string(input) || (json_is_array(input) && json_array_size(input) > 0)))
        return api_req_bad(err, "input", "expected a string or a non-empty array of input items");
    const json_t *instr = json_object_get(body, "instructions");
    if (instr && !json_is_null(instr) && !json_is_string(instr))
        return api_req_bad(err, "instructions", "expected a string, not %s", api_req_kind(instr));

    struct rconv c = { .have_reasoning = false };
    api_conv_init(&c.b);
    strbuf_init(&c.reasoning);
    json_t *tools = NULL;
    if (json_is_string(instr)) api_conv_system(&c.b, json_string_value(instr), json_string_length(instr));
    if (json_is_string(input)) {
        api_conv_add(&c.b, api_msg_new("user", json_string_value(input), json_string_length(input)));
    } else {
        size_t i;
        const json_t *it;
        json_array_foreach(input, i, it)
            if ((rc = rs_item(&c, it, i, err))) break;
    }
    if (!rc) rc = rs_tools(json_object_get(body, "tools"), &tools, err);
    if (!rc) rc = rs_tool_choice(json_object_get(body, "tool_choice"), tools, out, err);
    if (!rc) rc = rs_stop(json_object_get(body, "stop"), &out->stop, err);
    json_t *kwargs = NULL;
    if (!rc) rc = api_template_kwargs(body, &thinking, &kwargs, err);
    strbuf_free(&c.reasoning);
    if (rc) {
        api_conv_free(&c.b);
        json_decref(tools);
        hs_free(out->tool_name);
        json_decref(out->stop);
        memset(out, 0, sizeof *out);
        out->enable_thinking = -1;
        return rc;
    }
    api_conv_deliver(&c.b, out, tools, thinking);
    out->template_kwargs = kwargs;
    return HS_OK;
}

/* ==== response: parser events → the response object / its event stream ==================== */

static const char *const item_prefix[] = {
    [CHAT_EVENT_TEXT] = "msg_", [CHAT_EVENT_REASONING] = "rs_", [CHAT_EVENT_TOOL_CALL] = "fc_",
};

struct rs_item {
    enum chat_event_kind kind;  /* TEXT: message, REASONING: reasoning, TOOL_CALL: function_call */
    char id[API_ID_MAX];        /* msg_… / rs_… / fc_… */
    char call_id[API_ID_MAX];   /* function_call: call_… */
    struct strbuf text;         /* message / reasoning text (valid UTF-8); function_call: arguments */
    char *name;                 /* function_call, owned, valid UTF-8 */
    bool incomplete;            /* closed by max_output_tokens */
};

/* The writer's own state (r->state); r->block_open says the last item is added, not done. */
struct rs_writer {
    int64_t seq;                /* next sequence_number */
    struct rs_item *items;
    int n_items, cap_items;
    bool reasoned;              /* a reasoning event came, or the prompt opened <think> */
    bool visible;               /* a text or tool-call event came */
    int64_t feeds_before_visible;
};

static void rs_init(struct api_response *r, const struct api_response_opts *o)
{
    struct rs_writer *w = hs_calloc(1, sizeof *w);
    w->reasoned = o->starts_in_reasoning;
    r->state = w;
}

static void rs_free(struct api_response *r)
{
    struct rs_writer *w = r->state;
    if (!w) return;
    for (int i = 0; i < w->n_items; i++) {
        strbuf_free(&w->items[i].text);
        hs_free(w->items[i].name);
    }
    hs_free(w->items);
    hs_free(w);
}

/* One SSE event: `type` and `sequence_number` first, then body's members (stolen). */
static void rs_emit(struct api_response *r, struct strbuf *out, const char *type, json_t *body)
{
    struct rs_writer *w = r->state;
    json_t *e = json_object();
    json_object_set_new(e, "type", json_string(type));
    json_object_set_new(e, "sequence_number", json_integer(w->seq++));
    json_object_update(e, body);
    json_decref(body);
    api_sse_event(out, type, e);
}

static json_t *rs_text_part(const char *type, const struct strbuf *text, bool full)
{
    json_t *p = json_object();
    json_object_set_new(p, "type", json_string(type));
    if (!strcmp(type, "output_text")) {
        json_object_set_new(p, "annotations", json_array());
        json_object_set_new(p, "logprobs", json_array());
    }
    json_object_set_new(p, "text", json_stringn(full && text->buf ? text->buf : "", full ? text->len : 0));
    return p;
}

/* An output item as output_item.added shows it (full = false) or as it ends. */
static json_t *rs_item_json(const struct rs_item *it, bool full)
{
    json_t *j = json_object();
    json_object_set_new(j, "id", json_string(it->id));
    const char *status = !full ? "in_progress" : it->incomplete ? "incomplete" : "completed";
    switch (it->kind) {
    case CHAT_EVENT_TEXT:
        json_object_set_new(j, "type", json_string("message"));
        json_object_set_new(j, "status", json_string(status));
        json_object_set_new(j, "role", json_string("assistant"));
        json_t *content = json_array();
        if (full) json_array_append_new(content, rs_text_part("output_text", &it->text, true));
        json_object_set_new(j, "content", content);
        break;
    case CHAT_EVENT_REASONING:
        json_object_set_new(j, "type", json_string("reasoning"));
        json_object_set_new(j, "summary", json_array());
        if (full) {
            json_t *rc = json_array();
            json_array_append_new(rc, rs_text_part("reasoning_text", &it->text, true));
            json_object_set_new(j, "content", rc);
        }
        break;
    case CHAT_EVENT_TOOL_CALL:
        json_object_set_new(j, "type", json_string("function_call"));
        json_object_set_new(j, "status", json_string(status));
        json_object_set_new(j, "arguments", json_stringn(full && it->text.buf ? it->text.buf : "", full ? it->text.len : 0));
        json_object_set_new(j, "call_id", json_string(it->call_id));
        json_object_set_new(j, "name", json_string(it->name));
        break;
    }
    return j;
}

/* The members every item event carries. */
static json_t *rs_item_ref(const struct rs_writer *w, int index, bool with_content)
{
    json_t *j = json_object();
    json_object_set_new(j, "item_id", json_string(w->items[index].id));
    json_object_set_new(j, "output_index", json_integer(index));
    if (with_content) json_object_set_new(j, "content_index", json_integer(0));
    return j;
}

static void rs_item_event(struct api_response *r, struct strbuf *out, const char *type, int index, bool full)
{
    struct rs_writer *w = r->state;
    json_t *b = json_object();
    json_object_set_new(b, "output_index", json_integer(index));
    json_object_set_new(b, "item", rs_item_json(&w->items[index], full));
    rs_emit(r, out, type, b);
}

static json_t *rs_usage(const struct api_usage *u, int64_t reasoning)
{
    json_t *in = json_object();
    json_object_set_new(in, "cached_tokens", json_integer(u->cached_tokens));
    json_t *od = json_object();
    json_object_set_new(od, "reasoning_tokens", json_integer(reasoning));
    json_t *j = json_object();
    json_object_set_new(j, "input_tokens", json_integer(u->prompt_tokens));
    json_object_set_new(j, "input_tokens_details", in);
    json_object_set_new(j, "output_tokens", json_integer(u->completion_tokens));
    json_object_set_new(j, "output_tokens_details", od);
    json_object_set_new(j, "total_tokens", json_integer(u->prompt_tokens + u->completion_tokens));
    return j;
}

/* The response object; `u` NULL while in progress (usage null, output as far as done). */
static json_t *rs_response(const struct api_response *r, const char *status, const struct api_usage *u,
                           const char *error_message)
{
    const struct rs_writer *w = r->state;
    json_t *output = json_array();
    for (int i = 0; u && i < w->n_items; i++) json_array_append_new(output, rs_item_json(&w->items[i], true));
    json_t *j = json_object();
    json_object_set_new(j, "id", json_string(r->id));
    json_object_set_new(j, "object", json_string("response"));
    json_object_set_new(j, "created_at", json_integer(r->created));
    json_object_set_new(j, "status", json_string(status));
    if (error_message) {
        json_t *e = json_object();
        json_object_set_new(e, "code", json_string("server_error"));
        json_object_set_new(e, "message", api_jstr(error_message));
        json_object_set_new(j, "error", e);
    } else {
        json_object_set_new(j, "error", json_null());
    }
    if (!strcmp(status, "incomplete")) {
        json_t *d = json_object();
        json_object_set_new(d, "reason", json_string("max_output_tokens"));
        json_object_set_new(j, "incomplete_details", d);
    } else {
        json_object_set_new(j, "incomplete_details", json_null());
    }
    json_object_set_new(j, "model", api_jstr(r->model));
    json_object_set_new(j, "output", output);
    json_object_set_new(j, "parallel_tool_calls", json_true());
    json_object_set_new(j, "store", json_false());
    if (u) {
        int64_t reasoning = w->reasoned ? (w->visible ? w->feeds_before_visible : r->n_feeds) : 0;
        if (reasoning > u->completion_tokens) reasoning = u->completion_tokens;
        json_object_set_new(j, "usage", rs_usage(u, reasoning));
    } else {
        json_object_set_new(j, "usage", json_null());
    }
    return j;
}

static void rs_response_event(struct api_response *r, struct strbuf *out, const char *type, json_t *response)
{
    json_t *b = json_object();
    json_object_set_new(b, "response", response);
    rs_emit(r, out, type, b);
}

static void rs_begin(struct api_response *r, const struct api_usage *u, struct strbuf *out)
{
    (void)u; /* usage comes with response.completed; the in-progress object has none */
    rs_response_event(r, out, "response.created", rs_response(r, "in_progress", NULL, NULL));
    rs_response_event(r, out, "response.in_progress", rs_response(r, "in_progress", NULL, NULL));
}

/* Close the open item (stream): its .done events. */
static void rs_close(struct api_response *r, struct strbuf *out)
{
    struct rs_writer *w = r->state;
    if (!r->block_open) return;
    r->block_open = false;
    int index = w->n_items - 1;
    struct rs_item *it = &w->items[index];
    if (it->kind != CHAT_EVENT_TOOL_CALL) {
        bool msg = it->kind == CHAT_EVENT_TEXT;
        const char *part = msg ? "output_text" : "reasoning_text";
        json_t *b = rs_item_ref(w, index, true);
        json_object_set_new(b, "text", json_stringn(it->text.buf ? it->text.buf : "", it->text.len));
        if (msg) json_object_set_new(b, "logprobs", json_array());
        rs_emit(r, out, msg ? "response.output_text.done" : "response.reasoning_text.done", b);
        b = rs_item_ref(w, index, true);
        json_object_set_new(b, "part", rs_text_part(part, &it->text, true));
        rs_emit(r, out, "response.content_part.done", b);
    }
    rs_item_event(r, out, "response.output_item.done", index, true);
}

static struct rs_item *rs_push(struct api_response *r, enum chat_event_kind kind, struct strbuf *out)
{
    struct rs_writer *w = r->state;
    if (r->stream) rs_close(r, out);
    if (w->n_items == w->cap_items) {
        w->cap_items = w->cap_items ? 2 * w->cap_items : 4;
        w->items = hs_realloc(w->items, (size_t)w->cap_items * sizeof *w->items);
    }
    int index = w->n_items++;
    struct rs_item *it = &w->items[index];
    memset(it, 0, sizeof *it);
    it->kind = kind;
    strbuf_init(&it->text);
    api_id_make(r->id_hash, (uint64_t)index, item_prefix[kind], it->id);
    return it;
}

static void rs_delta(struct api_response *r, enum chat_event_kind kind, const char *text, size_t len,
                     struct strbuf *out)
{
    struct rs_writer *w = r->state;
    struct rs_item *it = w->n_items ? &w->items[w->n_items - 1] : NULL;
    bool msg = kind == CHAT_EVENT_TEXT;
    if (!it || it->kind != kind || (r->stream && !r->block_open)) {
        it = rs_push(r, kind, out);
        if (r->stream) {
            int index = w->n_items - 1;
            rs_item_event(r, out, "response.output_item.added", index, false);
            json_t *b = rs_item_ref(w, index, true);
            json_object_set_new(b, "part", rs_text_part(msg ? "output_text" : "reasoning_text", &it->text, false));
            rs_emit(r, out, "response.content_part.added", b);
            r->block_open = true;
        }
    }
    size_t at = it->text.len;
    hs_utf8_clean_append(&it->text, text, len);
    if (!r->stream) return;
    json_t *b = rs_item_ref(w, w->n_items - 1, true);
    json_object_set_new(b, "delta", json_stringn(it->text.buf + at, it->text.len - at));
    if (msg) json_object_set_new(b, "logprobs", json_array());
    rs_emit(r, out, msg ? "response.output_text.delta" : "response.reasoning_text.delta", b);
}

static void rs_tool_call(struct api_response *r, const struct chat_event *ev, struct strbuf *out)
{
    struct rs_writer *w = r->state;
    struct rs_item *it = rs_push(r, CHAT_EVENT_TOOL_CALL, out);
    struct strbuf name;
    strbuf_init(&name);
    hs_utf8_clean_append(&name, ev->tool_name ? ev->tool_name : "", ev->tool_name ? strlen(ev->tool_name) : 0);
    it->name = strbuf_detach(&name, NULL);
    if (!it->name) it->name = hs_strdup("");
    /* the parser's contract gives an object; anything else becomes {} */
    if (json_is_object(ev->tool_args)) api_json_append(&it->text, ev->tool_args);
    else strbuf_puts(&it->text, "{}");
    /* call ids use their own stream of the id hash, apart from the item ids */
    api_id_make(r->id_hash ^ 0x5DEECE66Dull, (uint64_t)r->n_tools++, "call_", it->call_id);
    if (!r->stream) return;
    int index = w->n_items - 1;
    rs_item_event(r, out, "response.output_item.added", index, false);
    json_t *b = rs_item_ref(w, index, false);
    json_object_set_new(b, "delta", json_stringn(it->text.buf, it->text.len));
    rs_emit(r, out, "response.function_call_arguments.delta", b);
    b = rs_item_ref(w, index, false);
    json_object_set_new(b, "name", json_string(it->name));
    json_object_set_new(b, "arguments", json_stringn(it->text.buf, it->text.len));
    rs_emit(r, out, "response.function_call_arguments.done", b);
    rs_item_event(r, out, "response.output_item.done", index, true);
}

static void rs_event(struct api_response *r, const struct chat_event *ev, struct strbuf *out)
{
    struct rs_writer *w = r->state;
    if (ev->kind == CHAT_EVENT_REASONING) {
        w->reasoned = true;
    } else if (!w->visible) {
        w->visible = true;
        /* the feed in progress made it visible: the tokens before it were the reasoning */
        w->feeds_before_visible = r->sink ? r->n_feeds - 1 : r->n_feeds;
    }
    if (ev->kind == CHAT_EVENT_TOOL_CALL) rs_tool_call(r, ev, out);
    else rs_delta(r, ev->kind, ev->text, ev->text_len, out);
}

static void rs_finish(struct api_response *r, enum api_stop stop, const char *stop_sequence,
                      const struct api_usage *u, struct strbuf *out)
{
    (void)stop_sequence; /* the Responses API does not name the matched string */
    struct rs_writer *w = r->state;
    bool incomplete = stop == API_STOP_LENGTH;
    /* the item cut by the limit is incomplete (a tool call is only made whole) */
    if (incomplete && w->n_items && w->items[w->n_items - 1].kind != CHAT_EVENT_TOOL_CALL)
        w->items[w->n_items - 1].incomplete = true;
    const char *status = incomplete ? "incomplete" : "completed";
    if (!r->stream) {
        api_json_steal(out, rs_response(r, status, u, NULL));
        return;
    }
    rs_close(r, out);
    rs_response_event(r, out, incomplete ? "response.incomplete" : "response.completed", rs_response(r, status, u, NULL));
}

static void rs_fail(struct api_response *r, const struct api_error_info *e, const char *message, struct strbuf *out)
{
    if (!r->begun) { /* only a keep-alive went out: the stream still needs its first event */
        r->begun = true;
        rs_response_event(r, out, "response.created", rs_response(r, "in_progress", NULL, NULL));
    }
    json_t *b = json_object();
    json_object_set_new(b, "code", e->openai_code ? json_string(e->openai_code) : json_string(e->openai_type));
    json_object_set_new(b, "message", api_jstr(message));
    json_object_set_new(b, "param", json_null());
    rs_emit(r, out, "error", b);
    struct api_usage none = { 0, 0, 0 };
    json_t *j = rs_response(r, "failed", &none, message ? message : "");
    json_object_set(j, "usage", json_null());
    rs_response_event(r, out, "response.failed", j);
}

const struct api_writer_ops api_responses_writer = {
    .id_prefix = "resp_",
    .init = rs_init,
    .free = rs_free,
    .begin = rs_begin,
    .event = rs_event,
    .finish = rs_finish,
    .fail = rs_fail,
};
