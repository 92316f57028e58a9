/* conv.c — what every request parser shares (openai_chat.c, anthropic.c, responses.c): the
 * JSON path in error messages, the conversation being built (struct api_conv), media
 * placeholders, tool-call arguments, chat_template_kwargs, stop strings and tool_choice
 * checks, and chat_request_free (docs/API.md states the same rules for users).
 *
 * Every parser validates as it copies: every error is HS_ERR_INVALID with a message that
 * starts with the JSON path of the offending value ("messages[3].content[1]: ...").
 * On failure `out` is left zeroed (enable_thinking -1) and nothing leaks.
 *
 * Rules shared by the APIs (struct api_conv below):
 *   1. System text that comes before the first user/assistant/tool message (Anthropic's
 *      top-level `system`, OpenAI system/developer messages, leading role "system"
 *      messages, Responses' instructions) is merged into one system message at index 0,
 *      pieces joined with "\n\n"; empty pieces are skipped and an empty result is no
 *      system message. The Qwen templates render only messages[0] as system, so merging
 *      loses nothing.
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
 * Controls (checked while parsing, so a bad value is a 400 before the request queues):
 * stop strings (OpenAI `stop`: a string or an array; Anthropic `stop_sequences`: an array)
 * become `stop`, 1..CHAT_STOP_MAX non-empty strings of at most CHAT_STOP_LEN_MAX bytes;
 * `tool_choice` becomes enum chat_tool_choice, a named tool must be one of `tools`, and
 * required / named without tools is an error.
 */
#include "api/api_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- errors ------------------------------------------------------------------------------ */

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

json_t *api_call_new(const char *id, const char *name, json_t *arguments)
{
    json_t *f = json_object();
    json_object_set_new(f, "name", json_string(name));
    json_object_set_new(f, "arguments", arguments);
    json_t *call = json_object();
    json_object_set_new(call, "type", json_string("function"));
    if (id) json_object_set_new(call, "id", json_string(id));
    json_object_set_new(call, "function", f);
    return call;
}

json_t *api_tool_new(const char *name, const char *desc, size_t desc_len, const json_t *params)
{
    json_t *fn = json_object();
    json_object_set_new(fn, "name", json_string(name));
    if (desc) json_object_set_new(fn, "description", json_stringn(desc, desc_len));
    if (json_is_object(params)) json_object_set_new(fn, "parameters", json_deep_copy(params));
    json_t *tool = json_object();
    json_object_set_new(tool, "type", json_string("function"));
    json_object_set_new(tool, "function", fn);
    return tool;
}

int api_parts_text(const json_t *content, const char *path, const struct api_text_part *parts, size_t n_parts,
                   const char *forms, struct api_conv *media, struct strbuf *out, struct hs_err *err)
{
    if (!content || json_is_null(content)) return HS_OK;
    if (json_is_string(content)) {
        strbuf_append(out, json_string_value(content), json_string_length(content));
        return HS_OK;
    }
    if (!json_is_array(content)) return api_req_bad(err, path, "expected %s, not %s", forms, api_req_kind(content));
    size_t i;
    const json_t *part;
    json_array_foreach(content, i, part) {
        char p[API_PATH_LEN];
        api_req_path(p, "%s[%zu]", path, i);
        if (!json_is_object(part)) return api_req_bad(err, p, "expected a content part object, not %s", api_req_kind(part));
        const char *type = json_string_value(json_object_get(part, "type"));
        if (!type) return api_req_bad(err, p, "\"type\" must be a string");
        const char *field = NULL;
        for (size_t k = 0; k < n_parts && !field; k++)
            if (!strcmp(type, parts[k].type)) field = parts[k].field;
        if (!field && media && api_is_media(type)) {
            api_media_placeholder(media, part, type, out);
            continue;
        }
        if (!field && api_is_media(type)) return api_req_bad(err, p, "%s parts are not supported (text-only model)", type);
        if (!field) return api_req_bad(err, p, "unknown content part type '%.40s'", type);
        const json_t *t = json_object_get(part, field);
        if (!json_is_string(t)) return api_req_bad(err, p, "\"%s\" must be a string", field);
        strbuf_append(out, json_string_value(t), json_string_length(t));
    }
    return HS_OK;
}

int api_opt_string(const json_t *obj, const char *key, const char *path, const char **s, size_t *len,
                   struct hs_err *err)
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

/* ---- the conversation being built --------------------------------------------------------- */

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

/* ---- request controls: stop strings, tool_choice --------------------------------------- */

int api_stops_parse(const json_t *body, const char *key, bool allow_string, json_t **out, struct hs_err *err)
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
int api_tool_choice_set(struct chat_request *out, enum chat_tool_choice tc, const char *name, const char *path,
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


void api_chat_reset(struct chat_request *out)
{
    chat_request_free(out);
    memset(out, 0, sizeof *out);
    out->enable_thinking = -1;
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
