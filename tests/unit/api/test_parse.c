/* The incremental parser of generated text (src/api/parse.c): hand-written model outputs,
 * each fed whole, split at every byte boundary, byte by byte and in random multi-splits,
 * compared with the expected text / reasoning / tool-call events. */
#include "api/api.h"
#include "base/base.h"

#include <criterion/criterion.h>
#include <string.h>

/* ---- recording events ------------------------------------------------------------------ */

struct rec_item {
    int kind;
    struct strbuf text;   /* TEXT / REASONING: the merged deltas */
    char *name;           /* TOOL_CALL */
    char *args;           /* TOOL_CALL: compact JSON */
};

struct rec {
    struct rec_item *items;
    int n, cap;
    int n_deltas;
    bool bad_utf8;        /* a delta was not valid UTF-8 */
    bool empty_delta;
    bool bad_index;
};

/* Strict UTF-8 validity (no overlongs, surrogates or code points past U+10FFFF). */
static bool valid_utf8(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        unsigned c = u[i];
        size_t len;
        unsigned lo = 0x80, hi = 0xBF;
        if (c < 0x80) { i++; continue; }
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c >= 0xE0 && c <= 0xEF) { len = 3; lo = c == 0xE0 ? 0xA0 : 0x80; hi = c == 0xED ? 0x9F : 0xBF; }
        else if (c >= 0xF0 && c <= 0xF4) { len = 4; lo = c == 0xF0 ? 0x90 : 0x80; hi = c == 0xF4 ? 0x8F : 0xBF; }
        else return false;
        if (i + len > n) return false;
        if (u[i + 1] < lo || u[i + 1] > hi) return false;
        for (size_t k = 2; k < len; k++)
            if ((u[i + k] & 0xC0) != 0x80) return false;
        i += len;
    }
    return true;
}

static void rec_on_event(void *ctx, const struct chat_event *ev)
{
    struct rec *r = ctx;
    if (ev->kind == CHAT_EVENT_TOOL_CALL) {
        int n_calls = 0;
        for (int i = 0; i < r->n; i++) n_calls += r->items[i].kind == CHAT_EVENT_TOOL_CALL;
        if (ev->tool_index != n_calls || !json_is_object(ev->tool_args)) r->bad_index = true;
    } else {
        r->n_deltas++;
        if (ev->text_len == 0) r->empty_delta = true;
        if (!valid_utf8(ev->text, ev->text_len)) r->bad_utf8 = true;
        if (r->n > 0 && r->items[r->n - 1].kind == (int)ev->kind) {
            strbuf_append(&r->items[r->n - 1].text, ev->text, ev->text_len);
            return;
        }
    }
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 8;
        r->items = hs_realloc(r->items, (size_t)r->cap * sizeof(*r->items));
    }
    struct rec_item *it = &r->items[r->n++];
    memset(it, 0, sizeof(*it));
    it->kind = (int)ev->kind;
    strbuf_init(&it->text);
    if (ev->kind == CHAT_EVENT_TOOL_CALL) {
        it->name = hs_strdup(ev->tool_name);
        it->args = json_dumps(ev->tool_args, JSON_COMPACT);
    } else {
        strbuf_append(&it->text, ev->text, ev->text_len);
    }
}

static void rec_free(struct rec *r)
{
    for (int i = 0; i < r->n; i++) {
        strbuf_free(&r->items[i].text);
        hs_free(r->items[i].name);
        free(r->items[i].args); /* jansson's allocation */
    }
    hs_free(r->items);
    memset(r, 0, sizeof(*r));
}

/* ---- expectations and the split driver ----------------------------------------------------- */

#define T(s) {CHAT_EVENT_TEXT, s, NULL, NULL}
#define R(s) {CHAT_EVENT_REASONING, s, NULL, NULL}
#define CALL(name, args) {CHAT_EVENT_TOOL_CALL, NULL, name, args}
#define END {-1, NULL, NULL, NULL}

struct expect {
    int kind;
    const char *text;
    const char *name;
    const char *args;
};

/* Feed `in` cut at the given points (sorted offsets inside (0, n)) and return the events. */
static void run_cuts(const json_t *tools, bool sir, const char *in, size_t n, const size_t *cuts,
                     int n_cuts, struct rec *r)
{
    memset(r, 0, sizeof(*r));
    struct chat_parser *p = chat_parser_new(tools, sir, rec_on_event, r);
    size_t at = 0;
    for (int i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : n;
        chat_parser_feed(p, in + at, end - at);
        at = end;
    }
    chat_parser_finish(p);
    chat_parser_feed(p, "ignored", 7); /* after finish: no effect */
    chat_parser_finish(p);
    chat_parser_free(p);
}

static void check_rec(const struct rec *r, const struct expect *ex, const char *how)
{
    int n_ex = 0;
    while (ex[n_ex].kind >= 0) n_ex++;
    cr_assert(!r->empty_delta, "%s: an empty delta", how);
    cr_assert(!r->bad_index, "%s: tool_index out of order or args not an object", how);
    cr_assert_eq(r->n, n_ex, "%s: %d event groups, expected %d", how, r->n, n_ex);
    for (int i = 0; i < n_ex; i++) {
        const struct rec_item *it = &r->items[i];
        cr_assert_eq(it->kind, ex[i].kind, "%s: event %d is kind %d, expected %d", how, i,
                     it->kind, ex[i].kind);
        if (ex[i].kind == CHAT_EVENT_TOOL_CALL) {
            cr_assert_str_eq(it->name, ex[i].name, "%s: call %d name", how, i);
            cr_assert_str_eq(it->args, ex[i].args, "%s: call %d args", how, i);
        } else {
            size_t len = strlen(ex[i].text);
            cr_assert(it->text.len == len && memcmp(it->text.buf, ex[i].text, len) == 0,
                      "%s: event %d text\n got: [%.*s]\nwant: [%s]", how, i, (int)it->text.len,
                      it->text.buf, ex[i].text);
        }
    }
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int n_runs_total;

/* Every way the brief asks for: whole, each single cut, byte by byte, random multi-cuts. */
static void check_all_splits(const json_t *tools, bool sir, const char *in, const struct expect *ex)
{
    size_t n = strlen(in);
    bool in_valid = valid_utf8(in, n);
    struct rec r;
    char how[96];
    size_t *cuts = hs_calloc(n + 1, sizeof(size_t));

    run_cuts(tools, sir, in, n, NULL, 0, &r);
    check_rec(&r, ex, "whole");
    cr_assert(!in_valid || !r.bad_utf8, "whole: a delta splits a UTF-8 sequence");
    rec_free(&r);
    n_runs_total++;

    for (size_t k = 1; k < n; k++) {
        cuts[0] = k;
        run_cuts(tools, sir, in, n, cuts, 1, &r);
        snprintf(how, sizeof(how), "cut at %zu", k);
        check_rec(&r, ex, how);
        cr_assert(!in_valid || !r.bad_utf8, "%s: a delta splits a UTF-8 sequence", how);
        rec_free(&r);
        n_runs_total++;
    }

    for (size_t k = 1; k < n; k++) cuts[k - 1] = k;
    run_cuts(tools, sir, in, n, cuts, n > 0 ? (int)n - 1 : 0, &r);
    check_rec(&r, ex, "byte by byte");
    cr_assert(!in_valid || !r.bad_utf8, "byte by byte: a delta splits a UTF-8 sequence");
    rec_free(&r);
    n_runs_total++;

    uint64_t seed = 0x9E3779B97F4A7C15ull ^ n;
    for (int trial = 0; trial < 30 && n > 1; trial++) {
        int n_cuts = 0;
        for (size_t k = 1; k < n; k++)
            if (rng_next(&seed) % 5 == 0) cuts[n_cuts++] = k;
        run_cuts(tools, sir, in, n, cuts, n_cuts, &r);
        snprintf(how, sizeof(how), "random split %d (%d cuts)", trial, n_cuts);
        check_rec(&r, ex, how);
        cr_assert(!in_valid || !r.bad_utf8, "%s: a delta splits a UTF-8 sequence", how);
        rec_free(&r);
        n_runs_total++;
    }
    hs_free(cuts);
}

static json_t *load_json(const char *s)
{
    json_error_t e;
    json_t *v = json_loads(s, 0, &e);
    cr_assert_not_null(v, "bad test JSON: %s", e.text);
    return v;
}

/* Tools in the neutral (OpenAI) shape, with one parameter of every schema type. */
static const char *tools_json =
    "[{\"type\": \"function\", \"function\": {\"name\": \"edit\", \"parameters\": {"
    "  \"type\": \"object\", \"properties\": {"
    "    \"path\": {\"type\": \"string\"}, \"content\": {\"type\": \"string\"},"
    "    \"line\": {\"type\": \"integer\"}, \"scale\": {\"type\": \"number\"},"
    "    \"force\": {\"type\": \"boolean\"}, \"opts\": {\"type\": \"object\"},"
    "    \"tags\": {\"type\": \"array\"}, \"nothing\": {\"type\": \"null\"},"
    "    \"maybe\": {\"type\": [\"integer\", \"null\"]},"
    "    \"either\": {\"anyOf\": [{\"type\": \"boolean\"}, {\"type\": \"string\"}]},"
    "    \"num_or_bool\": {\"anyOf\": [{\"type\": \"number\"}, {\"type\": \"boolean\"}]}}}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"parameters\": {"
    "  \"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"},"
    "    \"days\": {\"type\": \"integer\"}}}}},"
    " {\"name\": \"anthropic_style\", \"input_schema\": {\"type\": \"object\","
    "  \"properties\": {\"n\": {\"type\": \"integer\"}}}}]";

/* ---- plain text and reasoning ------------------------------------------------------------ */

Test(parse_text, plain_text)
{
    static const struct expect ex[] = {T("Hello, world! 1 < 2 and a <b>tag</b>."), END};
    check_all_splits(NULL, false, "Hello, world! 1 < 2 and a <b>tag</b>.", ex);
}

Test(parse_text, empty_and_whitespace_only)
{
    static const struct expect none[] = {END};
    check_all_splits(NULL, false, "", none);
    check_all_splits(NULL, false, " \n\t\r\n  ", none);
    check_all_splits(NULL, true, "\n\n", none);
    check_all_splits(NULL, true, "\n</think>\n\n", none);
}

Test(parse_text, trim_is_pythons_strip)
{
    /* U+3000, U+00A0, U+2028 and \x1c are Python whitespace; U+200B is not */
    static const struct expect ex[] = {T("a \xe3\x80\x80 b"), END};
    check_all_splits(NULL, false, "\xe3\x80\x80\xc2\xa0 a \xe3\x80\x80 b\xe2\x80\xa8\x1c\n", ex);
    static const struct expect ex2[] = {T("\xe2\x80\x8b" "x\xe2\x80\x8b"), END};
    check_all_splits(NULL, false, " \xe2\x80\x8bx\xe2\x80\x8b ", ex2);
}

Test(parse_text, not_quite_tags)
{
    static const struct expect ex[] = {
        T("<thinking> <tool_calls> </tool_call> </think> <think <tool_call <"), END};
    check_all_splits(NULL, false, "<thinking> <tool_calls> </tool_call> </think> <think <tool_call <", ex);
}

Test(parse_reasoning, think_then_text)
{
    static const struct expect ex[] = {R("Let me think.\nTwo lines."), T("The answer is 4."), END};
    check_all_splits(NULL, false, "<think>\nLet me think.\nTwo lines.\n</think>\n\nThe answer is 4.", ex);
}

Test(parse_reasoning, starts_in_reasoning)
{
    static const struct expect ex[] = {R("The user wants 2+2.\n\nIt is 4."), T("4"), END};
    check_all_splits(NULL, true, "The user wants 2+2.\n\nIt is 4.\n</think>\n\n4", ex);
    /* a model that repeats the <think> the prompt opened */
    check_all_splits(NULL, true, "<think>\nThe user wants 2+2.\n\nIt is 4.\n</think>\n\n4", ex);
    check_all_splits(NULL, true, "\n <think>The user wants 2+2.\n\nIt is 4.</think>4", ex);
}

Test(parse_reasoning, empty_think_block_non_thinking_prompt)
{
    static const struct expect ex[] = {T("Just the answer."), END};
    check_all_splits(NULL, false, "<think>\n\n</think>\n\nJust the answer.", ex);
    check_all_splits(NULL, false, "Just the answer.\n", ex);
}

Test(parse_reasoning, reopened_and_literal_tags)
{
    /* a later <think> opens reasoning again; inside reasoning, <think> and <tool_call> are
     * text; the reasoning stream is trimmed as a whole, so the blocks join with their
     * inner whitespace */
    static const struct expect ex[] = {
        R("first <tool_call> is not a call"), T("visible"),
        R("\n\nsecond <think> nested"), T("\n\nend"), END};
    check_all_splits(NULL, false,
                     "<think>\nfirst <tool_call> is not a call\n</think>\n\nvisible<think>\n"
                     "second <think> nested\n</think>\n\nend", ex);
}

Test(parse_reasoning, unterminated_think_at_finish)
{
    static const struct expect ex[] = {T("a"), R("thinking forever </thi"), END};
    check_all_splits(NULL, false, "a <think>\nthinking forever </thi", ex);
}

Test(parse_text, whitespace_held_until_visible)
{
    /* inner whitespace is kept and comes out before the next visible character */
    static const struct expect ex[] = {R("r1 \n r2"), T("a\n\n b"), END};
    check_all_splits(NULL, false, "\n<think> r1 \n r2 \n</think>\n\n a\n\n b \n", ex);
}

Test(parse_text, unicode)
{
    static const struct expect ex[] = {
        R("思考中… 🤔 ok"), T("答案：𝄞 naïve café — 😀👍🏽 и русский"), END};
    check_all_splits(NULL, false,
                     "<think>\n思考中… 🤔 ok\n</think>\n\n答案：𝄞 naïve café — 😀👍🏽 и русский", ex);
}

Test(parse_text, invalid_utf8_passes_through)
{
    /* bytes that are not UTF-8 are not dropped (and a truncated sequence at the end too) */
    static const char in[] = "a\xff\xc3<b\xe2\x82 \xed\xa0\x80 \xf0\x9f\x98";
    struct rec r;
    for (size_t k = 0; k <= sizeof(in) - 1; k++) {
        size_t cut = k;
        run_cuts(NULL, false, in, sizeof(in) - 1, &cut, k > 0 && k < sizeof(in) - 1 ? 1 : 0, &r);
        cr_assert_eq(r.n, 1);
        cr_assert_eq(r.items[0].text.len, sizeof(in) - 1);
        cr_assert(memcmp(r.items[0].text.buf, in, sizeof(in) - 1) == 0, "cut %zu", k);
        rec_free(&r);
    }
}

/* ---- Qwen3.5 XML tool calls ---------------------------------------------------------------- */

Test(parse_xml, typed_parameters)
{
    json_t *tools = load_json(tools_json);
    static const struct expect ex[] = {
        CALL("edit",
             "{\"path\":\"src/a.c\",\"content\":\"int main(void)\\n{\\n    return 0;\\n}\\n\","
             "\"line\":42,\"scale\":1.5,\"force\":true,\"opts\":{\"a\":[1,{\"b\":null}],\"c\":\"d\"},"
             "\"tags\":[\"x\",\"y\"],\"nothing\":null,\"maybe\":null,\"either\":\"true\","
             "\"num_or_bool\":false}"),
        END};
    check_all_splits(tools, false,
                     "<tool_call>\n<function=edit>\n"
                     "<parameter=path>\nsrc/a.c\n</parameter>\n"
                     "<parameter=content>\nint main(void)\n{\n    return 0;\n}\n\n</parameter>\n"
                     "<parameter=line>\n42\n</parameter>\n"
                     "<parameter=scale>\n1.5\n</parameter>\n"
                     "<parameter=force>\nTrue\n</parameter>\n"
                     "<parameter=opts>\n{\"a\": [1, {\"b\": null}], \"c\": \"d\"}\n</parameter>\n"
                     "<parameter=tags>\n[\"x\", \"y\"]\n</parameter>\n"
                     "<parameter=nothing>\nNone\n</parameter>\n"
                     "<parameter=maybe>\nnull\n</parameter>\n"
                     "<parameter=either>\ntrue\n</parameter>\n"
                     "<parameter=num_or_bool>\nFalse\n</parameter>\n"
                     "</function>\n</tool_call>", ex);
    json_decref(tools);
}

Test(parse_xml, typing_fallbacks)
{
    json_t *tools = load_json(tools_json);
    /* numbers that do not parse stay strings; a string-typed number stays a string;
     * unknown parameters and unknown tools are strings; no tools at all: strings */
    static const struct expect ex[] = {
        CALL("edit", "{\"line\":\"forty-two\",\"path\":\"42\",\"force\":\"yes\",\"extra\":\"7\","
                     "\"opts\":\"{not json\"}"),
        CALL("unknown", "{\"x\":\"1\"}"),
        CALL("anthropic_style", "{\"n\":3}"),
        END};
    const char *in = "<tool_call>\n<function=edit>\n"
                     "<parameter=line>\nforty-two\n</parameter>\n"
                     "<parameter=path>\n42\n</parameter>\n"
                     "<parameter=force>\nyes\n</parameter>\n"
                     "<parameter=extra>\n7\n</parameter>\n"
                     "<parameter=opts>\n{not json\n</parameter>\n"
                     "</function>\n</tool_call>\n"
                     "<tool_call>\n<function=unknown>\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>\n"
                     "<tool_call>\n<function=anthropic_style>\n<parameter=n>\n3\n</parameter>\n</function>\n</tool_call>";
    check_all_splits(tools, false, in, ex);
    static const struct expect ex_untyped[] = {
        CALL("edit", "{\"line\":\"forty-two\",\"path\":\"42\",\"force\":\"yes\",\"extra\":\"7\","
                     "\"opts\":\"{not json\"}"),
        CALL("unknown", "{\"x\":\"1\"}"),
        CALL("anthropic_style", "{\"n\":\"3\"}"),
        END};
    check_all_splits(NULL, false, in, ex_untyped);
    json_decref(tools);
}

Test(parse_xml, value_newlines_stripped_once)
{
    static const struct expect ex[] = {
        CALL("f", "{\"a\":\"\",\"b\":\"\\n x \\n\",\"c\":\"no newlines\",\"d\":\"\",\"e\":\"\\n\"}"), END};
    check_all_splits(NULL, false,
                     "<tool_call><function=f><parameter=a>\n\n</parameter>"
                     "<parameter=b>\n\n x \n\n</parameter>  <parameter=c>no newlines</parameter>\n"
                     "<parameter=d></parameter><parameter=e>\n\n\n</parameter></function></tool_call>",
                     ex);
}

Test(parse_xml, closing_tags_inside_values)
{
    /* a value that contains </parameter> (not followed by a parameter or </function>) and
     * </tool_call> is kept whole */
    static const struct expect ex[] = {
        T("Writing the docs."),
        CALL("write", "{\"text\":\"use </parameter> then </tool_call>\\n</parameter> x\","
                      "\"n\":\"1\"}"),
        END};
    check_all_splits(NULL, false,
                     "Writing the docs.\n\n<tool_call>\n<function=write>\n<parameter=text>\n"
                     "use </parameter> then </tool_call>\n</parameter> x\n</parameter>\n"
                     "<parameter=n>\n1\n</parameter>\n</function>\n</tool_call>", ex);
}

Test(parse_xml, two_calls_with_text_around)
{
    json_t *tools = load_json(tools_json);
    static const struct expect ex[] = {
        R("Two cities."), T("Let me check both."),
        CALL("get_weather", "{\"city\":\"Paris\",\"days\":3}"),
        CALL("get_weather", "{\"city\":\"東京\",\"days\":1}"),
        T("\n\n\n\n\nDone."), END}; /* the text stream keeps inner whitespace */
    check_all_splits(tools, true,
                     "Two cities.\n</think>\n\nLet me check both.\n\n"
                     "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
                     "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>\n"
                     "<tool_call>\n<function=get_weather>\n<parameter=city>\n東京\n</parameter>\n"
                     "<parameter=days>\n1\n</parameter>\n</function>\n</tool_call>\n\nDone.\n", ex);
    json_decref(tools);
}

Test(parse_xml, call_without_parameters_and_unicode_name)
{
    static const struct expect ex[] = {CALL("list_files", "{}"), CALL("tëst_ü", "{\"ключ\":\"значение 🙂\"}"), END};
    check_all_splits(NULL, false,
                     "<tool_call>\n<function=list_files>\n</function>\n</tool_call>"
                     "<tool_call>\n<function=tëst_ü>\n<parameter=ключ>\nзначение 🙂\n</parameter>\n"
                     "</function>\n</tool_call>", ex);
}

Test(parse_xml, truncated_at_finish_is_text)
{
    static const char *outs[] = {
        "<tool_call>",
        "<tool_call>\n<funct",
        "<tool_call>\n<function=f>\n<parameter=a>\nhalf a val",
        "<tool_call>\n<function=f>\n<parameter=a>\nv\n</parameter>\n</function>\n</tool_ca",
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"}\"",
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(outs); i++) {
        /* "Before." and the call's bytes are one TEXT group, with the space between them */
        char in[256];
        snprintf(in, sizeof(in), "Before. %s", outs[i]);
        struct expect ex[] = {T(in), END};
        check_all_splits(NULL, false, in, ex);
    }
}

Test(parse_xml, malformed_is_text_and_scanning_resumes)
{
    json_t *tools = load_json(tools_json);
    static const char *bad[] = {
        "<tool_call>\nplain words\n</tool_call>",
        "<tool_call>\n<function=f>\n<param=a>\n1\n</param>\n</function>\n</tool_call>",
        "<tool_call>\n<function=>\n</function>\n</tool_call>",
        "<tool_call>\n<function=f\n>\n</function>\n</tool_call>",
        "<tool_call>\n<function=f>\n</function>\ntrailing\n</tool_call>",
        "<tool_call>\n<function=f>\n<parameter=>\n1\n</parameter>\n</function>\n</tool_call>",
        "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\njunk</function>\n</tool_call>",
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }}\n</tool_call>",
        "<tool_call>\n{\"arguments\": {}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>",
        "<tool_call>\n{\"name\": \"f\", \"arguments\": \"[1]\"}\n</tool_call>",
        "<tool_call>\n{\"name\": \"\", \"arguments\": {}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"f\"} extra\n</tool_call>",
        "<tool_call>\n<function=f>\n<parameter=a>\nbad \xff utf8\n</parameter>\n</function>\n</tool_call>",
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(bad); i++) {
        char in[512];
        snprintf(in, sizeof(in), "Text %s then<tool_call>\n<function=get_weather>\n"
                 "</function>\n</tool_call>", bad[i]);
        char text[512];
        snprintf(text, sizeof(text), "Text %s then", bad[i]);
        struct expect ex[] = {T(text), CALL("get_weather", "{}"), END};
        check_all_splits(tools, false, in, ex);
    }
    json_decref(tools);
}

Test(parse_xml, malformed_call_body_is_rescanned)
{
    /* the body of a failed call is ordinary text again: tags in it count */
    static const struct expect ex[] = {
        T("<tool_call> oops"), R("hidden"), T(" x"),
        CALL("g", "{}"), END};
    check_all_splits(NULL, false,
                     "<tool_call> oops <think>hidden</think>x<tool_call><function=g></function></tool_call>",
                     ex);
    static const struct expect ex2[] = {T("<tool_call>"), CALL("g", "{}"), END};
    check_all_splits(NULL, false, "<tool_call>\n<tool_call>\n<function=g>\n</function>\n</tool_call>", ex2);
}

/* ---- Qwen3 JSON tool calls ------------------------------------------------------------------ */

Test(parse_json, qwen3_calls)
{
    static const struct expect ex[] = {
        R("Need weather."), T("Checking."),
        CALL("get_weather", "{\"city\":\"Paris\",\"units\":{\"t\":\"C\"},\"days\":[1,2]}"),
        CALL("search", "{\"q\":\"a } b </tool_call> \\\" {\"}"),
        CALL("noargs", "{}"),
        CALL("params_key", "{\"k\":1}"),
        END};
    check_all_splits(NULL, false,
                     "<think>\nNeed weather.\n</think>\n\nChecking.\n"
                     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
                     "\"units\": {\"t\": \"C\"}, \"days\": [1, 2]}}\n</tool_call>\n"
                     "<tool_call>\n{\"name\": \"search\", \"arguments\": \"{\\\"q\\\": \\\"a } b "
                     "</tool_call> \\\\\\\" {\\\"}\"}\n</tool_call>\n"
                     "<tool_call>{\"name\": \"noargs\"}</tool_call>"
                     "<tool_call>\n{\"name\": \"params_key\", \"parameters\": {\"k\": 1}}\n</tool_call>",
                     ex);
}

/* ---- the template round trip ---------------------------------------------------------------- */

struct rt_call { const char *name; const char *args; };

/* The Qwen3.5 template's rendering of the latest assistant turn (docs/MODELS.md §9.3 item 5),
 * without <|im_start|>assistant\n and <|im_end|>: string arguments raw, others as tojson. */
static void render_qwen35(const char *reasoning, const char *content, const struct rec *r,
                          struct strbuf *out)
{
    strbuf_printf(out, "<think>\n%s\n</think>\n\n%s", reasoning, content);
    int k = 0;
    for (int i = 0; i < r->n; i++) {
        if (r->items[i].kind != CHAT_EVENT_TOOL_CALL) continue;
        strbuf_puts(out, k == 0 ? (content[0] ? "\n\n" : "") : "\n");
        strbuf_printf(out, "<tool_call>\n<function=%s>\n", r->items[i].name);
        json_t *args = load_json(r->items[i].args);
        const char *key;
        json_t *v;
        json_object_foreach(args, key, v) {
            strbuf_printf(out, "<parameter=%s>\n", key);
            if (json_is_string(v)) {
                strbuf_puts(out, json_string_value(v));
            } else {
                char *s = json_dumps(v, JSON_INDENT(0) | JSON_ENCODE_ANY); /* ", " and ": " */
                /* JSON_INDENT(0) still breaks lines; Python's separators have none */
                for (char *c = s; *c; c++) if (*c != '\n') strbuf_putc(out, *c);
                free(s);
            }
            strbuf_puts(out, "\n</parameter>\n");
        }
        strbuf_puts(out, "</function>\n</tool_call>");
        json_decref(args);
        k++;
    }
}

static void collect(const struct rec *r, int kind, struct strbuf *out)
{
    for (int i = 0; i < r->n; i++)
        if (r->items[i].kind == kind) strbuf_append(out, r->items[i].text.buf, r->items[i].text.len);
    strbuf_putc(out, '\0');
}

Test(parse_roundtrip, qwen35_template_reproduces_generation)
{
    json_t *tools = load_json(tools_json);
    static const struct { const char *prompt_tail, *gen; } cases[] = {
        {"<think>\n", "I should answer.\n</think>\n\nThe answer."},
        {"<think>\n\n</think>\n\n", "No thinking here.\nTwo lines."},
        {"<think>\n", "Call it.\n</think>\n\nI will edit.\n\n<tool_call>\n<function=edit>\n"
                      "<parameter=path>\na.c\n</parameter>\n<parameter=line>\n7\n</parameter>\n"
                      "<parameter=opts>\n{\"a\": [1, 2], \"b\": {\"c\": \"d\"}}\n</parameter>\n"
                      "<parameter=content>\nline 1\n\nline 3\n</parameter>\n</function>\n</tool_call>\n"
                      "<tool_call>\n<function=get_weather>\n<parameter=city>\n東京\n</parameter>\n"
                      "</function>\n</tool_call>"},
        {"<think>\n\n</think>\n\n", "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n"
                                    "</parameter>\n</function>\n</tool_call>"},
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(cases); i++) {
        size_t n = strlen(cases[i].gen);
        struct rec r;
        bool sir = strcmp(cases[i].prompt_tail, "<think>\n") == 0;
        run_cuts(tools, sir, cases[i].gen, n, NULL, 0, &r);
        struct strbuf reasoning, content, want, got;
        strbuf_init(&reasoning); strbuf_init(&content); strbuf_init(&want); strbuf_init(&got);
        collect(&r, CHAT_EVENT_REASONING, &reasoning);
        collect(&r, CHAT_EVENT_TEXT, &content);
        render_qwen35(reasoning.buf, content.buf, &r, &got);
        strbuf_printf(&want, "%s%s", cases[i].prompt_tail, cases[i].gen);
        cr_assert_str_eq(got.buf, want.buf, "case %zu", i);
        strbuf_free(&reasoning); strbuf_free(&content); strbuf_free(&want); strbuf_free(&got);
        rec_free(&r);
    }
    json_decref(tools);
}

Test(parse_roundtrip, qwen3_template_reproduces_generation)
{
    /* Qwen3: <think>\n R.strip('\n') \n</think>\n\n C.lstrip('\n'), then "\n" before every
     * call after content, each <tool_call>\n{"name": N, "arguments": tojson}\n</tool_call> */
    const char *gen = "<think>\nPlan.\n</think>\n\nSure.\n<tool_call>\n{\"name\": \"f\", "
                      "\"arguments\": {\"a\": 1, \"b\": \"x\"}}\n</tool_call>";
    struct rec r;
    run_cuts(NULL, false, gen, strlen(gen), NULL, 0, &r);
    struct strbuf reasoning, content, got;
    strbuf_init(&reasoning); strbuf_init(&content); strbuf_init(&got);
    collect(&r, CHAT_EVENT_REASONING, &reasoning);
    collect(&r, CHAT_EVENT_TEXT, &content);
    strbuf_printf(&got, "<think>\n%s\n</think>\n\n%s", reasoning.buf, content.buf);
    for (int i = 0; i < r.n; i++) {
        if (r.items[i].kind != CHAT_EVENT_TOOL_CALL) continue;
        json_t *args = load_json(r.items[i].args);
        char *s = json_dumps(args, JSON_INDENT(0));
        strbuf_printf(&got, "\n<tool_call>\n{\"name\": \"%s\", \"arguments\": ", r.items[i].name);
        for (char *c = s; *c; c++) if (*c != '\n') strbuf_putc(&got, *c);
        strbuf_puts(&got, "}\n</tool_call>");
        free(s);
        json_decref(args);
    }
    cr_assert_str_eq(got.buf, gen);
    strbuf_free(&reasoning); strbuf_free(&content); strbuf_free(&got);
    rec_free(&r);
}

/* ---- streaming behaviour ---------------------------------------------------------------- */

struct prompt_rec { struct strbuf text; int n_events; };

static void prompt_on_event(void *ctx, const struct chat_event *ev)
{
    struct prompt_rec *pr = ctx;
    pr->n_events++;
    if (ev->kind != CHAT_EVENT_TOOL_CALL) strbuf_append(&pr->text, ev->text, ev->text_len);
}

Test(parse_stream, emits_promptly_and_holds_only_tag_prefixes)
{
    struct prompt_rec pr;
    strbuf_init(&pr.text);
    pr.n_events = 0;
    struct chat_parser *p = chat_parser_new(NULL, false, prompt_on_event, &pr);
    chat_parser_feed(p, "Hello <", 7);
    cr_assert_eq(pr.text.len, 5, "the space is held (could be trailing), '<' may be a tag");
    chat_parser_feed(p, "b", 1);
    cr_assert_eq(pr.text.len, 8);
    cr_assert(memcmp(pr.text.buf, "Hello <b", 8) == 0);
    chat_parser_feed(p, "> <tool_c", 9);
    cr_assert_eq(pr.text.len, 9);
    chat_parser_feed(p, "x", 1);
    cr_assert_eq(pr.text.len, 18);
    cr_assert(memcmp(pr.text.buf, "Hello <b> <tool_cx", 18) == 0);
    chat_parser_feed(p, "\xe4\xb8", 2); /* half of 中 */
    cr_assert_eq(pr.text.len, 18);
    chat_parser_feed(p, "\xad", 1);
    cr_assert_eq(pr.text.len, 21);
    chat_parser_feed(p, "<tool_call>\n<function=f>\n", 25); /* an open call is held */
    cr_assert_eq(pr.text.len, 21);
    int before = pr.n_events;
    chat_parser_feed(p, "</function></tool_call>", 23);
    cr_assert_eq(pr.n_events, before + 1, "the call comes out as soon as it closes");
    chat_parser_finish(p);
    chat_parser_free(p);
    strbuf_free(&pr.text);
}

Test(parse_stream, long_value_fed_token_by_token)
{
    /* a 200 KB parameter value in 4-byte feeds: one call, exact value */
    struct strbuf in, value;
    strbuf_init(&in);
    strbuf_init(&value);
    for (int i = 0; i < 20000; i++) strbuf_printf(&value, "line %05d\n", i);
    strbuf_puts(&in, "<tool_call>\n<function=write>\n<parameter=text>\n");
    strbuf_append(&in, value.buf, value.len);
    strbuf_puts(&in, "\n</parameter>\n</function>\n</tool_call>");
    struct rec r;
    size_t n_cuts = in.len / 4;
    size_t *cuts = hs_calloc(n_cuts + 1, sizeof(size_t));
    for (size_t k = 0; k < n_cuts; k++) cuts[k] = 4 * (k + 1);
    while (n_cuts > 0 && cuts[n_cuts - 1] >= in.len) n_cuts--;
    run_cuts(NULL, false, in.buf, in.len, cuts, (int)n_cuts, &r);
    cr_assert_eq(r.n, 1);
    json_t *args = load_json(r.items[0].args);
    const json_t *text = json_object_get(args, "text");
    cr_assert(json_string_length(text) == value.len &&
              memcmp(json_string_value(text), value.buf, value.len) == 0);
    json_decref(args);
    rec_free(&r);
    hs_free(cuts);
    strbuf_free(&in);
    strbuf_free(&value);
}

Test(parse_stream, null_and_no_callback)
{
    chat_parser_free(NULL);
    chat_parser_feed(NULL, "x", 1);
    chat_parser_finish(NULL);
    struct chat_parser *p = chat_parser_new(NULL, false, NULL, NULL);
    chat_parser_feed(p, "text <tool_call><function=f></function></tool_call>", 51);
    chat_parser_finish(p);
    chat_parser_free(p);
}

Test(parse_stream, split_runs_counted)
{
    /* guards against the split driver silently doing nothing */
    n_runs_total = 0;
    static const struct expect ex[] = {T("abc"), END};
    check_all_splits(NULL, false, "abc", ex);
    cr_assert_eq(n_runs_total, 1 + 2 + 1 + 30);
}
