/*
 * emit.c — the bytes every API writes: compact JSON appended to a strbuf, strings cleaned
 * to valid UTF-8, and the two SSE framings (OpenAI's bare `data:` lines, Anthropic's and
 * Responses' named events). Errors, the lifecycle and the dialect writers all go through
 * these, so one JSON spelling holds everywhere.
 *
 * Invariants:
 *   1. JSON is dumped with API_JSON_FLAGS only: compact, keys in insertion order,
 *      non-ASCII raw.
 *   2. A string that may not be valid UTF-8 (model names, tool names, messages) goes
 *      through api_jstr / api_jstr_n, which replace invalid bytes with U+FFFD.
 */
#include "api/api_int.h"

#include <stdlib.h>
#include <string.h>

static int dump_cb(const char *buf, size_t size, void *data)
{
    strbuf_append(data, buf, size);
    return 0;
}

void api_json_append(struct strbuf *out, const json_t *j)
{
    json_dump_callback(j, dump_cb, out, API_JSON_FLAGS);
}

void api_json_steal(struct strbuf *out, json_t *j)
{
    api_json_append(out, j);
    json_decref(j);
}

json_t *api_jstr_n(const char *s, size_t n)
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

json_t *api_jstr(const char *s) { return api_jstr_n(s, s ? strlen(s) : 0); }

char *api_args_text(const json_t *args)
{
    char *s = json_dumps(args, API_JSON_FLAGS);
    return s ? s : strdup("{}");
}

void api_sse_data(struct strbuf *out, json_t *j)
{
    strbuf_puts(out, "data: ");
    api_json_steal(out, j);
    strbuf_puts(out, "\n\n");
}

void api_sse_event(struct strbuf *out, const char *name, json_t *j)
{
    strbuf_printf(out, "event: %s\ndata: ", name);
    api_json_steal(out, j);
    strbuf_puts(out, "\n\n");
}
