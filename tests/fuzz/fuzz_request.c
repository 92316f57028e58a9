/*
 * fuzz_request.c — libFuzzer harness for the request parsers: arbitrary bytes as a request
 * body, parsed as the server parses it (json_loadb with JSON_REJECT_DUPLICATES, then
 * chat_from_openai, chat_from_anthropic and chat_from_responses, each on the same body),
 * and every result rendered through the Qwen3.5 chat template embedded at build time
 * (build/gen/chat_template.c; skipped when the build has none) and every error through each
 * API's error writer. Built and run by tools/run_fuzz.sh (`make fuzz`); seeds in
 * tests/fuzz/corpus/request/ (the golden requests of tests/golden/data/requests/ and small
 * hand-written ones for each API).
 *
 * Checked for every input (besides no crash, leak or sanitizer report):
 *   1. A parser fails only through hs_err: a negative code equal to err.code and a
 *      non-empty message, which api_error_write turns into a JSON body that parses back
 *      with the same message; a failed parse leaves the request empty (nothing owned).
 *   2. A parse that succeeds gives the neutral conversation of api.h's design note:
 *      messages an array of objects with role system/user/assistant/tool (system only
 *      first) and string content; tool_calls non-empty arrays of
 *      {type: "function", function: {name: non-empty string, arguments: object}}; tools
 *      NULL or an array of {type: "function", function: {name: string}}; stop NULL or
 *      1..CHAT_STOP_MAX strings of 1..CHAT_STOP_LEN_MAX bytes; tool_choice in range,
 *      tool_name set exactly for a named choice and naming one of tools, a forced choice
 *      only with tools; enable_thinking -1, 0 or 1; add_generation_prompt set.
 *   3. Parsing is a pure function: a second parse of the same body gives equal JSON,
 *      equal scalars, or the same error message.
 *   4. Rendering is a pure function: a successful request renders to the same bytes twice,
 *      or fails both times with a message.
 */
#include "api/api.h"
#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "fuzz_request: check failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

extern const char *const hs_chat_template_qwen35; /* build/gen/chat_template.c; NULL: none */

typedef int (*parse_fn)(const json_t *, struct chat_request *, struct hs_err *);

static bool is_str(const json_t *v, bool nonempty)
{
    return json_is_string(v) && (!nonempty || json_string_length(v) > 0);
}

static void check_empty(const struct chat_request *c)
{
    CHECK(c->messages == NULL && c->tools == NULL && c->stop == NULL && c->tool_name == NULL);
}

static void check_error(int rc, const struct hs_err *e)
{
    CHECK(rc < 0 && e->code == rc);
    size_t n = strnlen(e->msg, sizeof(e->msg));
    CHECK(n > 0 && n < sizeof(e->msg));
    static const enum api_kind kinds[] = { API_KIND_OPENAI_CHAT, API_KIND_ANTHROPIC_MESSAGES, API_KIND_OPENAI_RESPONSES };
    for (size_t k = 0; k < HS_ARRAY_LEN(kinds); k++) {
        struct strbuf out;
        strbuf_init(&out);
        int status = api_error_write(kinds[k], rc, e->msg, &out);
        CHECK(status >= 400 && status < 600);
        json_t *body = json_loadb(out.buf ? out.buf : "", out.len, 0, NULL);
        CHECK(json_is_object(body));
        const char *m = json_string_value(json_object_get(json_object_get(body, "error"), "message"));
        CHECK(m != NULL);
        /* the message may be cleaned up for JSON (invalid UTF-8 replaced), never lost */
        CHECK(strlen(m) > 0);
        json_decref(body);
        strbuf_free(&out);
    }
}

static bool tools_has(const json_t *tools, const char *name)
{
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t) {
        const char *tn = json_string_value(json_object_get(json_object_get(t, "function"), "name"));
        if (tn && !strcmp(tn, name)) return true;
    }
    return false;
}

static void check_valid(const struct chat_request *c)
{
    CHECK(json_is_array(c->messages));
    size_t i;
    const json_t *m;
    json_array_foreach(c->messages, i, m) {
        CHECK(json_is_object(m));
        const char *role = json_string_value(json_object_get(m, "role"));
        CHECK(role != NULL);
        CHECK(!strcmp(role, "user") || !strcmp(role, "assistant") || !strcmp(role, "tool") ||
              (!strcmp(role, "system") && i == 0));
        CHECK(is_str(json_object_get(m, "content"), false));
        const json_t *rc = json_object_get(m, "reasoning_content");
        CHECK(!rc || json_is_string(rc));
        const json_t *tcs = json_object_get(m, "tool_calls");
        if (tcs) {
            CHECK(!strcmp(role, "assistant"));
            CHECK(json_is_array(tcs) && json_array_size(tcs) > 0);
            size_t k;
            const json_t *tc;
            json_array_foreach(tcs, k, tc) {
                const char *type = json_string_value(json_object_get(tc, "type"));
                CHECK(type && !strcmp(type, "function"));
                const json_t *f = json_object_get(tc, "function");
                CHECK(is_str(json_object_get(f, "name"), true));
                CHECK(json_is_object(json_object_get(f, "arguments")));
            }
        }
    }
    if (c->tools) {
        CHECK(json_is_array(c->tools));
        const json_t *t;
        json_array_foreach(c->tools, i, t) {
            const char *type = json_string_value(json_object_get(t, "type"));
            CHECK(type && !strcmp(type, "function"));
            CHECK(is_str(json_object_get(json_object_get(t, "function"), "name"), false));
        }
    }
    if (c->stop) {
        CHECK(json_is_array(c->stop));
        CHECK(json_array_size(c->stop) >= 1 && json_array_size(c->stop) <= CHAT_STOP_MAX);
        const json_t *s;
        json_array_foreach(c->stop, i, s) {
            CHECK(json_is_string(s));
            CHECK(json_string_length(s) >= 1 && json_string_length(s) <= CHAT_STOP_LEN_MAX);
        }
    }
    CHECK(c->tool_choice >= CHAT_TOOL_AUTO && c->tool_choice <= CHAT_TOOL_NAMED);
    CHECK((c->tool_choice == CHAT_TOOL_NAMED) == (c->tool_name != NULL));
    if (c->tool_choice == CHAT_TOOL_REQUIRED || c->tool_choice == CHAT_TOOL_NAMED)
        CHECK(json_array_size(c->tools) > 0);
    if (c->tool_name) CHECK(tools_has(c->tools, c->tool_name));
    CHECK(c->enable_thinking >= -1 && c->enable_thinking <= 1);
    CHECK(c->add_generation_prompt);
}

static bool json_same(const json_t *a, const json_t *b)
{
    return (a == NULL && b == NULL) || (a && b && json_equal(a, b));
}

static void check_same(const struct chat_request *a, const struct chat_request *b)
{
    CHECK(json_same(a->messages, b->messages));
    CHECK(json_same(a->tools, b->tools));
    CHECK(json_same(a->stop, b->stop));
    CHECK(a->tool_choice == b->tool_choice && a->enable_thinking == b->enable_thinking &&
          a->add_generation_prompt == b->add_generation_prompt);
    CHECK((a->tool_name == NULL) == (b->tool_name == NULL));
    CHECK(!a->tool_name || !strcmp(a->tool_name, b->tool_name));
}

static struct chat_template *g_tmpl;
static bool g_tmpl_tried;

static const struct chat_template *tmpl(void)
{
    if (!g_tmpl_tried) {
        g_tmpl_tried = true;
        struct hs_err e;
        hs_err_clear(&e);
        if (hs_chat_template_qwen35 &&
            chat_template_new(hs_chat_template_qwen35, NULL, "<|endoftext|>", &g_tmpl, &e) != HS_OK) {
            fprintf(stderr, "fuzz_request: the embedded template does not compile: %s\n", e.msg);
            abort();
        }
    }
    return g_tmpl;
}

static void check_render(const struct chat_request *c)
{
    const struct chat_template *t = tmpl();
    if (!t) return;
    struct strbuf a, b;
    strbuf_init(&a);
    strbuf_init(&b);
    struct hs_err ea, eb;
    hs_err_clear(&ea);
    hs_err_clear(&eb);
    int ra = chat_template_render(t, c, &a, &ea);
    int rb = chat_template_render(t, c, &b, &eb);
    CHECK(ra == rb);
    if (ra == HS_OK) {
        CHECK(a.len == b.len && (a.len == 0 || !memcmp(a.buf, b.buf, a.len)));
    } else {
        CHECK(ra < 0 && ea.code == ra && ea.msg[0] != 0);
        CHECK(!strcmp(ea.msg, eb.msg));
    }
    strbuf_free(&a);
    strbuf_free(&b);
}

static void one(parse_fn parse, const json_t *body)
{
    struct chat_request a, b;
    struct hs_err ea, eb;
    hs_err_clear(&ea);
    hs_err_clear(&eb);
    memset(&a, 0x5a, sizeof(a)); /* the parser must set every field itself */
    memset(&b, 0xa5, sizeof(b));
    int ra = parse(body, &a, &ea);
    int rb = parse(body, &b, &eb);
    CHECK(ra == rb);
    if (ra != HS_OK) {
        check_error(ra, &ea);
        CHECK(!strcmp(ea.msg, eb.msg));
        check_empty(&a);
        check_empty(&b);
        return;
    }
    CHECK(ea.code == HS_OK && eb.code == HS_OK);
    check_valid(&a);
    check_same(&a, &b);
    check_render(&a);
    chat_request_free(&a);
    chat_request_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 16)) return 0; /* bodies this size say nothing new, only slowly */
    json_t *body = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);
    if (!body) return 0;
    one(chat_from_openai, body);
    one(chat_from_anthropic, body);
    one(chat_from_responses, body);
    json_decref(body);
    return 0;
}
