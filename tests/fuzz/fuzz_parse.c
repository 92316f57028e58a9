/* libFuzzer harness for the incremental parser of generated text (src/api/parse.c).
 *
 * Input: byte 0 = flags (bit 0: the output starts inside <think>; bit 1: make the text
 * valid UTF-8 by replacing bytes that are not with '?'; bit 2: type parameters with a
 * fixed tools array), byte 1 = seed of a random split, the rest = the generated text.
 *
 * Checked on every input (abort on failure):
 *   1. The same events come out fed whole, byte by byte and in a random split (TEXT /
 *      REASONING deltas compared merged; tool calls by name and compact JSON arguments).
 *   2. No empty delta; tool_index counts 0, 1, ...; arguments are objects; names are
 *      non-empty UTF-8. When the text is valid UTF-8, every delta is too (none splits a
 *      sequence).
 *   3. Nothing is lost: when no call parsed, TEXT and REASONING equal a plain whole-input
 *      tag scan written here independently (`<tool_call>` literal, streams trimmed like
 *      Python's str.strip()); with calls, there are no more calls than `<tool_call>` tags.
 */
#include "api/api.h"
#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "fuzz_parse: check failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

/* Length of the valid UTF-8 sequence at s (1..4) and its code point; 0 if invalid/cut. */
static size_t dec(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned c = s[0];
    size_t len;
    unsigned lo = 0x80, hi = 0xBF;
    if (c < 0x80) { *cp = c; return 1; }
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) { len = 3; lo = c == 0xE0 ? 0xA0 : 0x80; hi = c == 0xED ? 0x9F : 0xBF; }
    else if (c >= 0xF0 && c <= 0xF4) { len = 4; lo = c == 0xF0 ? 0x90 : 0x80; hi = c == 0xF4 ? 0x8F : 0xBF; }
    else return 0;
    if (n < len || s[1] < lo || s[1] > hi) return 0;
    uint32_t v = c & (0x3Fu >> (len - 1));
    for (size_t k = 1; k < len; k++) {
        if ((s[k] & 0xC0) != 0x80) return 0;
        v = v << 6 | (s[k] & 0x3F);
    }
    *cp = v;
    return len;
}

static bool valid_utf8(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t l = dec((const unsigned char *)s + i, n - i, &cp);
        if (!l) return false;
        i += l;
    }
    return true;
}

/* Python 3 str.isspace() code points. */
static bool py_space(uint32_t c)
{
    static const uint32_t sp[] = {0x9, 0xa, 0xb, 0xc, 0xd, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85,
                                  0xa0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005,
                                  0x2006, 0x2007, 0x2008, 0x2009, 0x200a, 0x2028, 0x2029,
                                  0x202f, 0x205f, 0x3000};
    for (size_t i = 0; i < sizeof(sp) / sizeof(sp[0]); i++)
        if (sp[i] == c) return true;
    return false;
}

/* ---- recording ---------------------------------------------------------------------------- */

struct item { int kind; struct strbuf s; char *args; };
struct rec {
    struct item *it;
    int n, cap, n_calls;
    bool check_utf8;
};

static void on_event(void *ctx, const struct chat_event *ev)
{
    struct rec *r = ctx;
    if (ev->kind == CHAT_EVENT_TOOL_CALL) {
        CHECK(ev->tool_index == r->n_calls);
        CHECK(json_is_object(ev->tool_args));
        CHECK(ev->tool_name && ev->tool_name[0] && valid_utf8(ev->tool_name, strlen(ev->tool_name)));
        r->n_calls++;
    } else {
        CHECK(ev->kind == CHAT_EVENT_TEXT || ev->kind == CHAT_EVENT_REASONING);
        CHECK(ev->text_len > 0);
        CHECK(!r->check_utf8 || valid_utf8(ev->text, ev->text_len));
        if (r->n > 0 && r->it[r->n - 1].kind == (int)ev->kind) {
            strbuf_append(&r->it[r->n - 1].s, ev->text, ev->text_len);
            return;
        }
    }
    if (r->n == r->cap) {
        r->cap = r->cap ? 2 * r->cap : 8;
        r->it = hs_realloc(r->it, (size_t)r->cap * sizeof(*r->it));
    }
    struct item *it = &r->it[r->n++];
    it->kind = (int)ev->kind;
    strbuf_init(&it->s);
    it->args = NULL;
    if (ev->kind == CHAT_EVENT_TOOL_CALL) {
        strbuf_puts(&it->s, ev->tool_name);
        it->args = json_dumps(ev->tool_args, JSON_COMPACT | JSON_ENCODE_ANY);
        CHECK(it->args != NULL);
    } else {
        strbuf_append(&it->s, ev->text, ev->text_len);
    }
}

static void rec_free(struct rec *r)
{
    for (int i = 0; i < r->n; i++) {
        strbuf_free(&r->it[i].s);
        free(r->it[i].args);
    }
    hs_free(r->it);
}

static void rec_same(const struct rec *a, const struct rec *b)
{
    CHECK(a->n == b->n);
    for (int i = 0; i < a->n; i++) {
        CHECK(a->it[i].kind == b->it[i].kind);
        CHECK(a->it[i].s.len == b->it[i].s.len);
        CHECK(memcmp(a->it[i].s.buf, b->it[i].s.buf, a->it[i].s.len) == 0);
        CHECK((a->it[i].args == NULL) == (b->it[i].args == NULL));
        CHECK(!a->it[i].args || strcmp(a->it[i].args, b->it[i].args) == 0);
    }
}

static void run(const json_t *tools, bool sir, const char *s, size_t n, const size_t *cuts,
                size_t n_cuts, bool check_utf8, struct rec *r)
{
    memset(r, 0, sizeof(*r));
    r->check_utf8 = check_utf8;
    struct chat_parser *p = chat_parser_new(tools, sir, on_event, r);
    size_t at = 0;
    for (size_t i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : n;
        chat_parser_feed(p, s + at, end - at);
        at = end;
    }
    chat_parser_finish(p);
    chat_parser_free(p);
}

/* ---- the reference: a whole-input tag scan ------------------------------------------------ */

/* A stream trimmed like Python's str.strip(), built from segments that are each decoded on
 * their own (a tag between two segments ends any UTF-8 sequence). */
struct ref_stream { struct strbuf out, held; bool started; };

static void ref_put(struct ref_stream *st, const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        uint32_t cp = 0;
        size_t l = dec((const unsigned char *)s + i, n - i, &cp);
        bool space = l > 0 && py_space(cp);
        if (!l) l = 1;
        if (!space) {
            strbuf_append(&st->out, st->held.buf, st->held.len);
            strbuf_reset(&st->held);
            strbuf_append(&st->out, s + i, l);
            st->started = true;
        } else if (st->started) {
            strbuf_append(&st->held, s + i, l);
        }
        i += l;
    }
}

static bool starts(const char *s, size_t n, const char *lit)
{
    size_t l = strlen(lit);
    return n >= l && memcmp(s, lit, l) == 0;
}

static void reference(bool sir, const char *s, size_t n, struct ref_stream *text,
                      struct ref_stream *reasoning)
{
    bool in_r = sir;
    size_t seg = 0, i = 0;
    while (i < n) {
        struct ref_stream *cur = in_r ? reasoning : text;
        const char *tag = NULL;
        if (in_r && starts(s + i, n - i, "</think>")) tag = "</think>";
        else if (starts(s + i, n - i, "<think>")) {
            /* in reasoning, only a <think> before any visible reasoning is a tag (dropped) */
            if (!in_r) tag = "<think>";
            else {
                bool vis = cur->started; /* is the reasoning so far visible? */
                for (size_t k = seg; k < i && !vis;) {
                    uint32_t cp = 0;
                    size_t l = dec((const unsigned char *)s + k, i - k, &cp);
                    vis = !(l > 0 && py_space(cp));
                    k += l ? l : 1;
                }
                if (!vis) tag = "<think>";
            }
        }
        if (!tag) { i++; continue; }
        ref_put(cur, s + seg, i - seg);
        i += strlen(tag);
        seg = i;
        in_r = strcmp(tag, "</think>") != 0;
    }
    ref_put(in_r ? reasoning : text, s + seg, n - seg);
}

static void collect(const struct rec *r, int kind, struct strbuf *out)
{
    for (int i = 0; i < r->n; i++)
        if (r->it[i].kind == kind) strbuf_append(out, r->it[i].s.buf, r->it[i].s.len);
}

static bool sb_eq(const struct strbuf *a, const struct strbuf *b)
{
    return a->len == b->len && (a->len == 0 || memcmp(a->buf, b->buf, a->len) == 0);
}

static const char *tools_json =
    "[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"parameters\": {\"type\": \"object\","
    " \"properties\": {\"s\": {\"type\": \"string\"}, \"i\": {\"type\": \"integer\"},"
    " \"n\": {\"type\": \"number\"}, \"b\": {\"type\": \"boolean\"}, \"o\": {\"type\": \"object\"},"
    " \"a\": {\"type\": \"array\"}, \"z\": {\"type\": [\"null\", \"integer\"]}}}}}]";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    unsigned flags = data[0];
    uint64_t seed = data[1] * 0x9E3779B97F4A7C15ull + size + 1;
    size_t n = size - 2;
    char *s = hs_malloc(n + 1);
    memcpy(s, data + 2, n);
    if (flags & 2) { /* make it valid UTF-8 */
        for (size_t i = 0; i < n;) {
            uint32_t cp;
            size_t l = dec((unsigned char *)s + i, n - i, &cp);
            if (!l) { s[i] = '?'; l = 1; }
            i += l;
        }
    }
    bool sir = flags & 1;
    bool valid = valid_utf8(s, n);
    json_t *tools = (flags & 4) ? json_loads(tools_json, 0, NULL) : NULL;

    struct rec whole, other;
    run(tools, sir, s, n, NULL, 0, valid, &whole);

    size_t *cuts = hs_malloc((n + 1) * sizeof(size_t));
    for (size_t k = 1; k < n; k++) cuts[k - 1] = k;
    run(tools, sir, s, n, cuts, n > 1 ? n - 1 : 0, valid, &other);
    rec_same(&whole, &other);
    rec_free(&other);

    size_t n_cuts = 0;
    for (size_t k = 1; k < n; k++) {
        seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17;
        if (seed % 7 == 0) cuts[n_cuts++] = k;
    }
    run(tools, sir, s, n, cuts, n_cuts, valid, &other);
    rec_same(&whole, &other);
    rec_free(&other);
    hs_free(cuts);

    size_t n_tags = 0;
    for (const char *q = s; (q = memmem(q, n - (size_t)(q - s), "<tool_call>", 11)) != NULL; q += 11)
        n_tags++;
    CHECK((size_t)whole.n_calls <= n_tags);
    if (whole.n_calls == 0) {
        struct ref_stream rt, rr;
        memset(&rt, 0, sizeof(rt));
        memset(&rr, 0, sizeof(rr));
        reference(sir, s, n, &rt, &rr);
        struct strbuf t, r;
        strbuf_init(&t);
        strbuf_init(&r);
        collect(&whole, CHAT_EVENT_TEXT, &t);
        collect(&whole, CHAT_EVENT_REASONING, &r);
        CHECK(sb_eq(&t, &rt.out));
        CHECK(sb_eq(&r, &rr.out));
        strbuf_free(&t);
        strbuf_free(&r);
        strbuf_free(&rt.out);
        strbuf_free(&rt.held);
        strbuf_free(&rr.out);
        strbuf_free(&rr.held);
    }
    rec_free(&whole);
    json_decref(tools);
    hs_free(s);
    return 0;
}
