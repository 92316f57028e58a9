/* messages.c — OpenAI chat-completions and Anthropic messages requests → the neutral
 * conversation of api.h (docs/API.md states the same rules for users).
 *
 * Both codecs validate as they copy: every error is HS_ERR_INVALID with a message that
 * starts with the JSON path of the offending value ("messages[3].content[1]: ...").
 * On failure `out` is left zeroed (enable_thinking -1) and nothing leaks.
 *
 * Rules shared by both APIs (struct api_conv below):
 *   1. System text that comes before the first user/assistant/tool message (Anthropic's
 *      top-level `system`, OpenAI system/developer messages, leading role "system"
 *      messages) is merged into one system message at index 0, pieces joined with
 *      "\n\n"; empty pieces are skipped and an empty result is no system message. The
 *      Qwen templates render only messages[0] as system, so merging loses nothing.
 *   2. A system message after any other message becomes a user message with the same
 *      text at its place: the templates raise "System message must be at the beginning"
 *      on it, and this keeps the head (system text + tools) identical across sessions.
 *      An empty late system message is dropped.
 *   3. Text parts / text blocks of one message are joined with "" (what the Qwen3.5
 *      template does with a list of parts in transformers, vLLM and llama.cpp).
 *   4. Images, audio, files and documents are errors naming the part, never dropped —
 *      except inside tool results (Anthropic tool_result blocks, OpenAI role "tool"
 *      messages, Responses function_call_output): there each becomes a fixed placeholder,
 *      "[image omitted (image/png): this model reads text only]", counted in
 *      chat_request.n_media_placeholders. A client cannot declare a model text-only, and
 *      an image a tool returned (Claude Code's Read of a PNG, Codex's view_image) stays in
 *      the history, so refusing it would end the session for good. The bytes depend only
 *      on the kind and the media type (validated, lower-cased), never on the data, so the
 *      bank's prefix stays the same across turns.
 *   5. Tool-call arguments become objects; tools and arguments keep the client's key
 *      order (jansson objects keep insertion order, json_deep_copy copies in order).
 *
 * Anthropic specifics: a system block whose text starts with "x-anthropic-billing-header:"
 * loses its first line (Claude Code stamps a per-request hash there; keeping it would
 * make every head different); tool_result blocks become role "tool" messages in order,
 * with text blocks around them becoming user messages at their place; thinking blocks
 * become reasoning_content; redacted_thinking blocks are dropped (their text is
 * encrypted and means nothing to another model); server tools are errors.
 *
 * Controls (both APIs, checked here so a bad value is a 400 before the request queues):
 * stop strings (OpenAI `stop`: a string or an array; Anthropic `stop_sequences`: an array)
 * become `stop`, 1..CHAT_STOP_MAX non-empty strings of at most CHAT_STOP_LEN_MAX bytes;
 * `tool_choice` becomes enum chat_tool_choice, a named tool must be one of `tools`, and
 * required / named without tools is an error.
 */
#include "api/api.h"
#include "api/responses_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- errors (declared in responses_int.h: responses.c uses them too) ------------------ */

int api_req_bad(struct hs_err *err, const char *path, const char *fmt, ...)
{
    char msg[HS_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return hs_err_set(err, HS_ERR_INVALID, "%s: %s", path, msg);
}

void api_req_path(char *dst, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, API_PATH_LEN, fmt, ap);
    va_end(ap);
}

const char *api_req_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* Content types a text-only model cannot take, in either API; the message names them. */
static const char *const media_types[] = {
    "image_url", "input_audio", "file", "image", "document", "video", "audio", "input_image",
    "input_file", "video_url",
};

bool api_is_media(const char *type)
{
    for (size_t i = 0; i < HS_ARRAY_LEN(media_types); i++)
        if (strcmp(type, media_types[i]) == 0) return true;
    return false;
}

/* The kind a placeholder names, by part type. */
static const char *media_kind(const char *type)
{
    if (strstr(type, "image")) return "image";
    if (strstr(type, "audio")) return "audio";
    if (strstr(type, "video")) return "video";
    return strcmp(type, "document") == 0 ? "document" : "file";
}

/* A media type "type/subtype" of RFC 6838 token characters, at most 63 bytes, lower-cased
 * into dst (64 bytes); false when s is none. */
static bool media_type_copy(char *dst, const char *s, size_t n)
{
    if (!s || n == 0 || n > 63) return false;
    int slashes = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        bool tok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                   (ch && strchr("!#$&^_.+-", ch));
        if (ch == '/') slashes++;
        else if (!tok) return false;
        dst[i] = (ch >= 'A' && ch <= 'Z') ? (char)(ch - 'A' + 'a') : ch;
    }
    dst[n] = 0;
    return slashes == 1 && dst[0] != '/' && dst[n - 1] != '/';
}

/* The media type of a "data:TYPE[;...],..." URL. */
static bool media_type_of_data_url(char *dst, const json_t *url)
{
    const char *u = json_string_value(url);
    if (!u || strncmp(u, "data:", 5) != 0) return false;
    size_t n = strcspn(u + 5, ";,");
    return media_type_copy(dst, u + 5, n);
}

/* The media type a part declares: Anthropic source.media_type, an OpenAI image_url.url or
 * Responses image_url / file_data data URL, or input_audio.format ("wav" -> audio/wav). */
static bool media_type_of(char *dst, const json_t *part)
{
    const json_t *src = json_object_get(part, "source");
    const json_t *mt = json_object_get(src, "media_type");
    if (json_is_string(mt) && media_type_copy(dst, json_string_value(mt), json_string_length(mt))) return true;
    const json_t *iu = json_object_get(part, "image_url");
    if (json_is_object(iu)) iu = json_object_get(iu, "url");
    if (media_type_of_data_url(dst, iu) || media_type_of_data_url(dst, json_object_get(part, "file_data")))
        return true;
    const json_t *fmt = json_object_get(json_object_get(part, "input_audio"), "format");
    if (json_is_string(fmt) && json_string_length(fmt) < 40) {
        char t[64];
        snprintf(t, sizeof t, "audio/%s", json_string_value(fmt));
        return media_type_copy(dst, t, strlen(t));
    }
    return false;
}

void api_media_placeholder(struct api_conv *c, const json_t *part, const char *type, struct strbuf *out)
{
    char mt[64], text[160];
    int n = media_type_of(mt, part)
                ? snprintf(text, sizeof text, "[%s omitted (%s): this model reads text only]", media_kind(type), mt)
                : snprintf(text, sizeof text, "[%s omitted: this model reads text only]", media_kind(type));
    strbuf_append(out, text, (size_t)n);
    c->n_media++;
}

/* An optional string field: absent or null → *s = NULL; a string → *s; else an error. */
static int opt_string(const json_t *obj, const char *key, const char *path, const char **s,
                      size_t *len, struct hs_err *err)
{
    const json_t *v = json_object_get(obj, key);
    *s = NULL;
    if (len) *len = 0;
    if (!v || json_is_null(v)) return HS_OK;
    if (!json_is_string(v)) return api_req_bad(err, path, "\"%s\" must be a string, not %s", key, api_req_kind(v));
    *s = json_string_value(v);
    if (len) *len = json_string_length(v);
    return HS_OK;
}

static void sb_append_json_string(struct strbuf *sb, const json_t *s)
{
    strbuf_append(sb, json_string_value(s), json_string_length(s));
}

static json_t *sb_to_json(const struct strbuf *sb)
{
    return json_stringn(sb->len ? sb->buf : "", sb->len);
}

/* ---- the conversation being built ------------------------------------------------ */


void api_conv_init(struct api_conv *c)
{
    c->msgs = json_array();
    strbuf_init(&c->system);
    c->started = false;
    c->n_media = 0;
}

void api_conv_free(struct api_conv *c)
{
    json_decref(c->msgs);
    c->msgs = NULL;
    strbuf_free(&c->system);
}

json_t *api_msg_new(const char *role, const char *text, size_t len)
{
    json_t *m = json_object();
    json_object_set_new(m, "role", json_string(role));
    json_object_set_new(m, "content", json_stringn(text ? text : "", len));
    return m;
}

/* Add a message (ownership transferred). */
void api_conv_add(struct api_conv *c, json_t *msg)
{
    json_array_append_new(c->msgs, msg);
    c->started = true;
}

/* System text: merged into the head while no other message came, a user turn after. */
void api_conv_system(struct api_conv *c, const char *text, size_t len)
{
    if (len == 0) return;
    if (!c->started) {
        if (c->system.len) strbuf_append(&c->system, "\n\n", 2);
        strbuf_append(&c->system, text, len);
        return;
    }
    json_array_append_new(c->msgs, api_msg_new("user", text, len));
}

/* Move the conversation into out (messages, with the merged system message first). */
static void conv_finish(struct api_conv *c, struct chat_request *out)
{
    if (c->system.len)
        json_array_insert_new(c->msgs, 0, api_msg_new("system", c->system.buf, c->system.len));
    out->messages = c->msgs;
    c->msgs = NULL;
    strbuf_free(&c->system);
}

/* Hand the built conversation, the tools and the thinking flag to the caller (both APIs). */
void api_conv_deliver(struct api_conv *c, struct chat_request *out, json_t *tools, int thinking)
{
    conv_finish(c, out);
    out->tools = tools;
    out->enable_thinking = thinking;
    out->add_generation_prompt = true;
    out->n_media_placeholders = c->n_media;
}

/* Parse a tool call's arguments: a JSON string holding an object (OpenAI), an object
 * (some clients), or nothing ("", null, absent: no arguments). Returns a new object. */
int api_args_parse(const json_t *v, const char *path, json_t **out, struct hs_err *err)
{
    *out = NULL;
    if (!v || json_is_null(v)) {
        *out = json_object();
        return HS_OK;
    }
    if (json_is_object(v)) {
        *out = json_deep_copy(v);
        return HS_OK;
    }
    if (!json_is_string(v))
        return api_req_bad(err, path, "expected a JSON string holding an object, not %s", api_req_kind(v));
    const char *s = json_string_value(v);
    size_t n = json_string_length(v), k = 0;
    while (k < n && (s[k] == ' ' || s[k] == '\t' || s[k] == '\n' || s[k] == '\r')) k++;
    if (k == n) {
        *out = json_object();
        return HS_OK;
    }
    json_error_t je;
    json_t *a = json_loadb(s, n, JSON_DECODE_ANY, &je);
    if (!a) return api_req_bad(err, path, "not valid JSON (%s at character %d)", je.text, je.position);
    if (!json_is_object(a)) {
        int rc = api_req_bad(err, path, "must encode a JSON object, not %s", api_req_kind(a));
        json_decref(a);
        return rc;
    }
    *out = a;
    return HS_OK;
}

/* Template variables the render context sets from the request itself (chat.c). */
static const char *const reserved_template_vars[] = { "messages", "tools", "add_generation_prompt", "bos_token",
                                                      "eos_token" };

int api_template_kwargs(const json_t *body, int *thinking, json_t **extra, struct hs_err *err)
{
    *extra = NULL;
    const json_t *kw = json_object_get(body, "chat_template_kwargs");
    if (!kw || json_is_null(kw)) return HS_OK;
    if (!json_is_object(kw)) return api_req_bad(err, "chat_template_kwargs", "expected an object, not %s", api_req_kind(kw));
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)kw, key, v) {
        char p[API_PATH_LEN];
        api_req_path(p, "chat_template_kwargs.%.60s", key);
        if (strcmp(key, "enable_thinking") == 0) {
            if (json_is_null(v)) continue;
            if (!json_is_boolean(v)) return api_req_bad(err, p, "expected a boolean, not %s", api_req_kind(v));
            *thinking = json_is_true(v);
            continue;
        }
        for (size_t i = 0; i < HS_ARRAY_LEN(reserved_template_vars); i++)
            if (strcmp(key, reserved_template_vars[i]) == 0) {
                json_decref(*extra);
                *extra = NULL;
                return api_req_bad(err, p, "is set from the request itself, not a template argument");
            }
        if (!*extra) *extra = json_object();
        json_object_set_new(*extra, key, json_deep_copy(v));
    }
    return HS_OK;
}

/* ---- OpenAI ------------------------------------------------------------------------ */

/* Append the text of an OpenAI `content`: a string, null/absent, or text parts joined
 * with "" (rule 3). `refusal` parts (assistant) count as text. media: the conversation
 * that counts placeholders for media parts (a tool message, rule 4), or NULL (an error). */
static int oai_text(const json_t *content, const char *path, struct api_conv *media, struct strbuf *out,
                    struct hs_err *err)
{
    if (!content || json_is_null(content)) return HS_OK;
    if (json_is_string(content)) {
        sb_append_json_string(out, content);
        return HS_OK;
    }
    if (!json_is_array(content))
        return api_req_bad(err, path, "expected a string, null or an array of content parts, not %s",
                   api_req_kind(content));
    size_t i;
    const json_t *part;
    json_array_foreach(content, i, part) {
        char p[API_PATH_LEN];
        api_req_path(p, "%s[%zu]", path, i);
        if (!json_is_object(part)) return api_req_bad(err, p, "expected a content part object, not %s", api_req_kind(part));
        const char *type = json_string_value(json_object_get(part, "type"));
        if (!type) return api_req_bad(err, p, "\"type\" must be a string");
        const char *field;
        if (strcmp(type, "text") == 0) field = "text";
        else if (strcmp(type, "refusal") == 0) field = "refusal";
        else if (api_is_media(type) && media) {
            api_media_placeholder(media, part, type, out);
            continue;
        } else if (api_is_media(type)) return api_req_bad(err, p, "%s parts are not supported (text-only model)", type);
        else return api_req_bad(err, p, "unknown content part type '%.40s'", type);
        const json_t *t = json_object_get(part, field);
        if (!json_is_string(t)) return api_req_bad(err, p, "\"%s\" must be a string", field);
        sb_append_json_string(out, t);
    }
    return HS_OK;
}

/* One OpenAI tool call → {type: "function", id?, function: {name, arguments: object}}. */
static int oai_tool_call(const json_t *tc, const char *path, json_t **out, struct hs_err *err)
{
    *out = NULL;
    if (!json_is_object(tc)) return api_req_bad(err, path, "expected a tool call object, not %s", api_req_kind(tc));
    const char *type, *id, *name;
    int rc = opt_string(tc, "type", path, &type, NULL, err);
    if (rc) return rc;
    if (type && strcmp(type, "function") != 0)
        return api_req_bad(err, path, "tool call type '%.40s' is not supported (only \"function\")", type);
    if ((rc = opt_string(tc, "id", path, &id, NULL, err))) return rc;
    char p[API_PATH_LEN];
    api_req_path(p, "%s.function", path);
    const json_t *fn = json_object_get(tc, "function");
    if (!json_is_object(fn)) return api_req_bad(err, p, "expected an object with \"name\" and \"arguments\"");
    if ((rc = opt_string(fn, "name", p, &name, NULL, err))) return rc;
    if (!name || !*name) return api_req_bad(err, p, "\"name\" must be a non-empty string");
    char pa[API_PATH_LEN];
    api_req_path(pa, "%s.arguments", p);
    json_t *args;
    if ((rc = api_args_parse(json_object_get(fn, "arguments"), pa, &args, err))) return rc;

    json_t *f = json_object();
    json_object_set_new(f, "name", json_string(name));
    json_object_set_new(f, "arguments", args);
    json_t *call = json_object();
    json_object_set_new(call, "type", json_string("function"));
    if (id) json_object_set_new(call, "id", json_string(id));
    json_object_set_new(call, "function", f);
    *out = call;
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
        if ((rc = opt_string(m, "reasoning_content", p, &s, &len, err))) goto fail;
        if (!s && (rc = opt_string(m, "reasoning", p, &s, &len, err))) goto fail;
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
        if ((rc = opt_string(m, "tool_call_id", p, &s, &len, err))) goto fail;
        if (s) json_object_set_new(msg, "tool_call_id", json_stringn(s, len));
    }
    if ((rc = opt_string(m, "name", p, &s, &len, err))) goto fail;
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
        int rc = opt_string(fn, "name", pf, &name, NULL, err);
        if (rc) return rc;
        if (!name || !*name) return api_req_bad(err, pf, "\"name\" must be a non-empty string");
        if ((rc = opt_string(fn, "description", pf, &desc, NULL, err))) return rc;
        const json_t *params = json_object_get(fn, "parameters");
        if (params && !json_is_null(params) && !json_is_object(params))
            return api_req_bad(err, pf, "\"parameters\" must be a JSON schema object, not %s", api_req_kind(params));
    }
    if (json_array_size(tools)) *out = json_deep_copy(tools);
    return HS_OK;
}

/* ---- request controls shared by both APIs: stop strings, tool_choice ------------------ */

/* `key`: absent or null (none), an array of strings, or (OpenAI) one string. Each string is
 * non-empty and at most CHAT_STOP_LEN_MAX bytes; at most CHAT_STOP_MAX of them. */
static int stops_parse(const json_t *body, const char *key, bool allow_string, json_t **out, struct hs_err *err)
{
    *out = NULL;
    const json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v)) return HS_OK;
    json_t *arr = json_array();
    if (allow_string && json_is_string(v)) {
        json_array_append(arr, (json_t *)v);
    } else if (json_is_array(v)) {
        if (json_array_size(v) > CHAT_STOP_MAX) {
            json_decref(arr);
            return api_req_bad(err, key, "at most %d stop strings, got %zu", CHAT_STOP_MAX, json_array_size(v));
        }
        size_t i;
        const json_t *s;
        json_array_foreach(v, i, s) {
            char path[API_PATH_LEN];
            api_req_path(path, "%s[%zu]", key, i);
            if (!json_is_string(s)) {
                json_decref(arr);
                return api_req_bad(err, path, "expected a string, not %s", api_req_kind(s));
            }
            json_array_append(arr, (json_t *)s);
        }
    } else {
        json_decref(arr);
        return api_req_bad(err, key, allow_string ? "expected a string or an array of strings, not %s"
                                          : "expected an array of strings, not %s", api_req_kind(v));
    }
    size_t i;
    const json_t *s;
    json_array_foreach(arr, i, s) {
        size_t n = json_string_length(s);
        if (n == 0 || n > CHAT_STOP_LEN_MAX) {
            json_decref(arr);
            char path[API_PATH_LEN];
            if (json_is_array(v)) api_req_path(path, "%s[%zu]", key, i);
            else api_req_path(path, "%s", key);
            return n ? api_req_bad(err, path, "a stop string is at most %d bytes, got %zu", CHAT_STOP_LEN_MAX, n)
                     : api_req_bad(err, path, "a stop string must not be empty");
        }
    }
    if (json_array_size(arr)) *out = arr;
    else json_decref(arr);
    return HS_OK;
}

/* Set out->tool_choice (and tool_name) from a choice and a name; out->tools is set. */
static int tool_choice_set(struct chat_request *out, enum chat_tool_choice tc, const char *name, const char *path,
                           struct hs_err *err)
{
    size_t n_tools = json_array_size(out->tools);
    if ((tc == CHAT_TOOL_REQUIRED || tc == CHAT_TOOL_NAMED) && n_tools == 0)
        return api_req_bad(err, path, "asks for a tool call but the request has no tools");
    if (tc == CHAT_TOOL_NAMED) {
        bool found = false;
        for (size_t i = 0; i < n_tools && !found; i++) {
            const char *tn = json_string_value(json_object_get(json_object_get(json_array_get(out->tools, i), "function"), "name"));
            found = tn && strcmp(tn, name) == 0;
        }
        if (!found) return api_req_bad(err, path, "no tool named '%.100s' in tools", name);
        out->tool_name = hs_strdup(name);
    }
    out->tool_choice = tc;
    return HS_OK;
}

/* OpenAI: "auto" | "none" | "required" | {"type":"function","function":{"name":NAME}}. */
static int oai_tool_choice(const json_t *v, struct chat_request *out, struct hs_err *err)
{
    if (!v || json_is_null(v)) return HS_OK;
    if (json_is_string(v)) {
        const char *s = json_string_value(v);
        if (!strcmp(s, "auto")) return HS_OK;
        if (!strcmp(s, "none")) return tool_choice_set(out, CHAT_TOOL_NONE, NULL, "tool_choice", err);
        if (!strcmp(s, "required")) return tool_choice_set(out, CHAT_TOOL_REQUIRED, NULL, "tool_choice", err);
        return api_req_bad(err, "tool_choice", "unknown value '%.40s' (expected auto, none, required or a function)", s);
    }
    const char *type = json_string_value(json_object_get(v, "type"));
    const char *name = json_string_value(json_object_get(json_object_get(v, "function"), "name"));
    if (!json_is_object(v) || !type || strcmp(type, "function") || !name)
        return api_req_bad(err, "tool_choice", "expected \"auto\", \"none\", \"required\" or "
                                       "{\"type\": \"function\", \"function\": {\"name\": NAME}}");
    return tool_choice_set(out, CHAT_TOOL_NAMED, name, "tool_choice.function.name", err);
}

/* Anthropic: {"type": "auto" | "any" | "none" | "tool" (+ "name")}; disable_parallel_tool_use
 * is accepted and has no effect (one call is what a forced call produces anyway). */
static int ant_tool_choice(const json_t *v, struct chat_request *out, struct hs_err *err)
{
    if (!v || json_is_null(v)) return HS_OK;
    const char *type = json_string_value(json_object_get(v, "type"));
    if (!json_is_object(v) || !type) return api_req_bad(err, "tool_choice", "expected an object with a string \"type\"");
    if (!strcmp(type, "auto")) return HS_OK;
    if (!strcmp(type, "none")) return tool_choice_set(out, CHAT_TOOL_NONE, NULL, "tool_choice", err);
    if (!strcmp(type, "any")) return tool_choice_set(out, CHAT_TOOL_REQUIRED, NULL, "tool_choice", err);
    if (!strcmp(type, "tool")) {
        const char *name = json_string_value(json_object_get(v, "name"));
        if (!name) return api_req_bad(err, "tool_choice.name", "expected a string (the tool to call)");
        return tool_choice_set(out, CHAT_TOOL_NAMED, name, "tool_choice.name", err);
    }
    return api_req_bad(err, "tool_choice.type", "unknown value '%.40s' (expected auto, any, tool or none)", type);
}

/* Parse the controls into a delivered request; on failure free it (out zeroed again). */
static int controls_parse(const json_t *body, bool openai, struct chat_request *out, struct hs_err *err)
{
    int rc = stops_parse(body, openai ? "stop" : "stop_sequences", openai, &out->stop, err);
    if (rc == HS_OK)
        rc = openai ? oai_tool_choice(json_object_get(body, "tool_choice"), out, err)
                    : ant_tool_choice(json_object_get(body, "tool_choice"), out, err);
    if (rc != HS_OK) {
        chat_request_free(out);
        memset(out, 0, sizeof *out);
        out->enable_thinking = -1;
    }
    return rc;
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
    return controls_parse(body, true, out, err);
fail:
    api_conv_free(&c);
    json_decref(kwargs);
    return rc;
}

/* ---- Anthropic --------------------------------------------------------------------- */

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

/* Text of a string or an array of text blocks (joined with ""), appended to out; `where`
 * names the container in errors. media: the conversation that counts placeholders for
 * image / document blocks (a tool result, rule 4), or NULL (an error). */
static int ant_text(const json_t *content, const char *path, const char *where, struct api_conv *media,
                    struct strbuf *out, struct hs_err *err)
{
    if (!content || json_is_null(content)) return HS_OK;
    if (json_is_string(content)) {
        sb_append_json_string(out, content);
        return HS_OK;
    }
    if (!json_is_array(content))
        return api_req_bad(err, path, "expected a string or an array of text blocks, not %s", api_req_kind(content));
    size_t i;
    const json_t *b;
    json_array_foreach(content, i, b) {
        char p[API_PATH_LEN];
        const char *type, *s;
        size_t len;
        api_req_path(p, "%s[%zu]", path, i);
        int rc = ant_block_type(b, p, &type, err);
        if (rc) return rc;
        if (media && api_is_media(type)) {
            api_media_placeholder(media, b, type, out);
            continue;
        }
        if (strcmp(type, "text") != 0) return ant_block_error(type, p, where, err);
        if ((rc = ant_block_text(b, p, "text", &s, &len, err))) return rc;
        strbuf_append(out, s, len);
    }
    return HS_OK;
}

#define BILLING_PREFIX "x-anthropic-billing-header:"

/* One piece of the top-level system: the billing line removed, then merged (rule 1). */
static void ant_system_piece(struct api_conv *c, const char *s, size_t len)
{
    size_t pl = strlen(BILLING_PREFIX);
    if (len >= pl && memcmp(s, BILLING_PREFIX, pl) == 0) {
        const char *nl = memchr(s, '\n', len);
        size_t skip = nl ? (size_t)(nl - s) + 1 : len;
        s += skip;
        len -= skip;
    }
    api_conv_system(c, s, len);
}

/* Top-level `system`: a string or text blocks, each block a separate "\n\n"-joined piece. */
static int ant_system(struct api_conv *c, const json_t *sys, struct hs_err *err)
{
    if (!sys || json_is_null(sys)) return HS_OK;
    if (json_is_string(sys)) {
        ant_system_piece(c, json_string_value(sys), json_string_length(sys));
        return HS_OK;
    }
    if (!json_is_array(sys))
        return api_req_bad(err, "system", "expected a string or an array of text blocks, not %s", api_req_kind(sys));
    size_t i;
    const json_t *b;
    json_array_foreach(sys, i, b) {
        char p[API_PATH_LEN];
        const char *type, *s;
        size_t len;
        api_req_path(p, "system[%zu]", i);
        int rc = ant_block_type(b, p, &type, err);
        if (rc) return rc;
        if (strcmp(type, "text") != 0) return ant_block_error(type, p, "the system prompt", err);
        if ((rc = ant_block_text(b, p, "text", &s, &len, err))) return rc;
        ant_system_piece(c, s, len);
    }
    return HS_OK;
}

/* A tool_result block → a role "tool" message. is_error has no place in the templates;
 * the result text itself says what went wrong (Claude Code wraps it in <tool_use_error>). */
static int ant_tool_result(struct api_conv *c, const json_t *b, const char *path, json_t **out, struct hs_err *err)
{
    *out = NULL;
    const char *id;
    int rc = opt_string(b, "tool_use_id", path, &id, NULL, err);
    if (rc) return rc;
    const json_t *ie = json_object_get(b, "is_error");
    if (ie && !json_is_null(ie) && !json_is_boolean(ie))
        return api_req_bad(err, path, "\"is_error\" must be a boolean, not %s", api_req_kind(ie));
    char p[API_PATH_LEN];
    api_req_path(p, "%s.content", path);
    struct strbuf text;
    strbuf_init(&text);
    if ((rc = ant_text(json_object_get(b, "content"), p, "a tool result", c, &text, err))) {
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
static int ant_user_blocks(struct api_conv *c, const json_t *content, const char *path, struct hs_err *err)
{
    struct strbuf text;
    strbuf_init(&text);
    bool in_text = false, any_result = false;
    int rc = HS_OK;
    size_t i;
    const json_t *b;
    json_array_foreach(content, i, b) {
        char p[API_PATH_LEN];
        const char *type, *s;
        size_t len;
        api_req_path(p, "%s[%zu]", path, i);
        if ((rc = ant_block_type(b, p, &type, err))) goto out;
        if (strcmp(type, "text") == 0) {
            if ((rc = ant_block_text(b, p, "text", &s, &len, err))) goto out;
            strbuf_append(&text, s, len);
            in_text = true;
        } else if (strcmp(type, "tool_result") == 0) {
            json_t *msg;
            if ((rc = ant_tool_result(c, b, p, &msg, err))) goto out;
            if (in_text) api_conv_add(c, api_msg_new("user", text.buf, text.len));
            strbuf_reset(&text);
            in_text = false;
            api_conv_add(c, msg);
            any_result = true;
        } else {
            rc = ant_block_error(type, p, "user messages", err);
            goto out;
        }
    }
    /* a message of text only (even none: []) is one user message */
    if (in_text || !any_result) api_conv_add(c, api_msg_new("user", text.buf, text.len));
out:
    strbuf_free(&text);
    return rc;
}

/* A tool_use block → {type: "function", id?, function: {name, arguments: input}}. */
static int ant_tool_use(const json_t *b, const char *path, json_t **out, struct hs_err *err)
{
    *out = NULL;
    const char *id, *name;
    int rc = opt_string(b, "id", path, &id, NULL, err);
    if (rc) return rc;
    if ((rc = opt_string(b, "name", path, &name, NULL, err))) return rc;
    if (!name || !*name) return api_req_bad(err, path, "\"name\" must be a non-empty string");
    const json_t *input = json_object_get(b, "input");
    if (input && !json_is_null(input) && !json_is_object(input))
        return api_req_bad(err, path, "\"input\" must be an object, not %s", api_req_kind(input));
    json_t *f = json_object();
    json_object_set_new(f, "name", json_string(name));
    json_object_set_new(f, "arguments", json_is_object(input) ? json_deep_copy(input) : json_object());
    json_t *call = json_object();
    json_object_set_new(call, "type", json_string("function"));
    if (id) json_object_set_new(call, "id", json_string(id));
    json_object_set_new(call, "function", f);
    *out = call;
    return HS_OK;
}

/* An assistant message's blocks → one assistant message. */
static int ant_assistant_blocks(struct api_conv *c, const json_t *content, const char *path, struct hs_err *err)
{
    struct strbuf text, reasoning;
    strbuf_init(&text);
    strbuf_init(&reasoning);
    bool has_reasoning = false;
    json_t *calls = json_array();
    int rc = HS_OK;
    size_t i;
    const json_t *b;
    json_array_foreach(content, i, b) {
        char p[API_PATH_LEN];
        const char *type, *s;
        size_t len;
        api_req_path(p, "%s[%zu]", path, i);
        if ((rc = ant_block_type(b, p, &type, err))) goto out;
        if (strcmp(type, "text") == 0) {
            if ((rc = ant_block_text(b, p, "text", &s, &len, err))) goto out;
            strbuf_append(&text, s, len);
        } else if (strcmp(type, "thinking") == 0) {
            if ((rc = ant_block_text(b, p, "thinking", &s, &len, err))) goto out;
            strbuf_append(&reasoning, s, len);
            has_reasoning = true;
        } else if (strcmp(type, "redacted_thinking") == 0) {
            continue; /* encrypted; nothing another model could read */
        } else if (strcmp(type, "tool_use") == 0) {
            json_t *call;
            if ((rc = ant_tool_use(b, p, &call, err))) goto out;
            json_array_append_new(calls, call);
        } else {
            rc = ant_block_error(type, p, "assistant messages", err);
            goto out;
        }
    }
    json_t *msg = api_msg_new("assistant", text.buf, text.len);
    if (has_reasoning) json_object_set_new(msg, "reasoning_content", sb_to_json(&reasoning));
    if (json_array_size(calls)) json_object_set(msg, "tool_calls", calls);
    api_conv_add(c, msg);
out:
    json_decref(calls);
    strbuf_free(&text);
    strbuf_free(&reasoning);
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
        int rc = ant_text(content, pf, "system messages", NULL, &text, err);
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
        int rc = opt_string(t, "type", p, &type, NULL, err);
        if (!rc) rc = opt_string(t, "name", p, &name, NULL, err);
        if (!rc && type && strcmp(type, "custom") != 0)
            rc = api_req_bad(err, p, "server tool '%.60s' (type '%.60s') is not supported; only custom tools "
                     "with an input_schema", name ? name : "?", type);
        if (!rc && (!name || !*name)) rc = api_req_bad(err, p, "\"name\" must be a non-empty string");
        if (!rc) rc = opt_string(t, "description", p, &desc, NULL, err);
        const json_t *schema = json_object_get(t, "input_schema");
        if (!rc && schema && !json_is_null(schema) && !json_is_object(schema))
            rc = api_req_bad(err, p, "\"input_schema\" must be a JSON schema object, not %s", api_req_kind(schema));
        if (rc) {
            json_decref(arr);
            return rc;
        }
        json_t *fn = json_object();
        json_object_set_new(fn, "name", json_string(name));
        if (desc) json_object_set_new(fn, "description", json_string(desc));
        if (json_is_object(schema)) json_object_set_new(fn, "parameters", json_deep_copy(schema));
        json_t *tool = json_object();
        json_object_set_new(tool, "type", json_string("function"));
        json_object_set_new(tool, "function", fn);
        json_array_append_new(arr, tool);
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
    if ((rc = ant_system(&c, json_object_get(body, "system"), err))) goto fail;
    size_t i;
    const json_t *m;
    json_array_foreach(msgs, i, m)
        if ((rc = ant_message(&c, m, i, err))) goto fail;
    if ((rc = ant_tools(json_object_get(body, "tools"), &tools, err))) goto fail;
    api_conv_deliver(&c, out, tools, thinking);
    out->template_kwargs = kwargs;
    return controls_parse(body, false, out, err);
fail:
    api_conv_free(&c);
    json_decref(kwargs);
    return rc;
}

void chat_request_free(struct chat_request *c)
{
    if (!c) return;
    json_decref(c->messages);
    json_decref(c->tools);
    json_decref(c->stop);
    json_decref(c->template_kwargs);
    hs_free(c->tool_name);
    c->messages = NULL;
    c->tools = NULL;
    c->stop = NULL;
    c->template_kwargs = NULL;
    c->tool_name = NULL;
    c->tool_choice = CHAT_TOOL_AUTO;
}
