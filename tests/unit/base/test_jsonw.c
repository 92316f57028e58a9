/* test_jsonw.c — the JSON writer: structure, indentation, escaping, number formats.
 * jansson (linked into every test binary) serves as an independent reader. */
#include <criterion/criterion.h>

#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/base.h"

static void write_doc(struct jsonw *w)
{
    jsonw_obj_begin(w);
    jsonw_key(w, "a");
    jsonw_int(w, 1);
    jsonw_key(w, "b");
    jsonw_arr_begin(w);
    jsonw_int(w, 1);
    jsonw_int(w, 2);
    jsonw_obj_begin(w);
    jsonw_key(w, "c");
    jsonw_null(w);
    jsonw_obj_end(w);
    jsonw_arr_end(w);
    jsonw_key(w, "d");
    jsonw_obj_begin(w);
    jsonw_obj_end(w);
    jsonw_key(w, "e");
    jsonw_arr_begin(w);
    jsonw_arr_end(w);
    jsonw_key(w, "f");
    jsonw_double(w, 1.0);
    jsonw_key(w, "g");
    jsonw_bool(w, true);
    jsonw_key(w, "h");
    jsonw_str(w, "x");
    jsonw_key(w, "i");
    jsonw_arr_begin(w);
    jsonw_arr_begin(w);
    jsonw_bool(w, false);
    jsonw_arr_end(w);
    jsonw_arr_end(w);
    jsonw_obj_end(w);
}

Test(base_jsonw, compact_nested)
{
    struct strbuf sb;
    struct jsonw w;
    strbuf_init(&sb);
    jsonw_init(&w, &sb, 0);
    write_doc(&w);
    cr_assert_str_eq(sb.buf, "{\"a\":1,\"b\":[1,2,{\"c\":null}],\"d\":{},\"e\":[],\"f\":1.0,"
                             "\"g\":true,\"h\":\"x\",\"i\":[[false]]}");
    cr_assert_eq(w.depth, 0);
    strbuf_free(&sb);
}

Test(base_jsonw, indented_nested)
{
    struct strbuf sb;
    struct jsonw w;
    strbuf_init(&sb);
    jsonw_init(&w, &sb, 2);
    write_doc(&w);
    cr_assert_str_eq(sb.buf,
                     "{\n"
                     "  \"a\": 1,\n"
                     "  \"b\": [\n"
                     "    1,\n"
                     "    2,\n"
                     "    {\n"
                     "      \"c\": null\n"
                     "    }\n"
                     "  ],\n"
                     "  \"d\": {},\n"
                     "  \"e\": [],\n"
                     "  \"f\": 1.0,\n"
                     "  \"g\": true,\n"
                     "  \"h\": \"x\",\n"
                     "  \"i\": [\n"
                     "    [\n"
                     "      false\n"
                     "    ]\n"
                     "  ]\n"
                     "}");

    /* an independent reader agrees on the structure */
    json_error_t jerr;
    json_t *root = json_loads(sb.buf, 0, &jerr);
    cr_assert_not_null(root, "jansson: %s (line %d)", jerr.text, jerr.line);
    cr_assert_eq(json_object_size(root), 8);
    cr_assert_eq(json_integer_value(json_object_get(root, "a")), 1);
    json_t *b = json_object_get(root, "b");
    cr_assert_eq(json_array_size(b), 3);
    cr_assert(json_is_null(json_object_get(json_array_get(b, 2), "c")));
    cr_assert(json_is_real(json_object_get(root, "f")), "1.0 must read back as a real");
    cr_assert(json_is_true(json_object_get(root, "g")));
    cr_assert_str_eq(json_string_value(json_object_get(root, "h")), "x");
    json_decref(root);
    strbuf_free(&sb);
}

Test(base_jsonw, integers_at_the_limits)
{
    struct strbuf sb;
    struct jsonw w;
    strbuf_init(&sb);
    jsonw_init(&w, &sb, 0);
    jsonw_arr_begin(&w);
    jsonw_int(&w, INT64_MIN);
    jsonw_int(&w, INT64_MAX);
    jsonw_uint(&w, UINT64_MAX);
    jsonw_int(&w, 0);
    jsonw_arr_end(&w);
    cr_assert_str_eq(sb.buf, "[-9223372036854775808,9223372036854775807,18446744073709551615,0]");
    strbuf_free(&sb);
}

/* What JSON requires for byte c inside a string, written independently of jsonw.c. */
static void expected_escape(struct strbuf *sb, unsigned char c)
{
    static const char *const named[0x20] = {
        ['\b'] = "\\b", ['\t'] = "\\t", ['\n'] = "\\n", ['\f'] = "\\f", ['\r'] = "\\r",
    };
    if (c == '"') strbuf_puts(sb, "\\\"");
    else if (c == '\\') strbuf_puts(sb, "\\\\");
    else if (c < 0x20 && named[c]) strbuf_puts(sb, named[c]);
    else if (c < 0x20) strbuf_printf(sb, "\\u00%c%c", "0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 15]);
    else if (c >= 0x80) strbuf_puts(sb, HS_UTF8_REPLACEMENT);
    else strbuf_putc(sb, (char)c);
}

Test(base_jsonw, escapes_every_byte)
{
    /* every byte value once, NUL included; bytes >= 0x80 alone are no valid UTF-8 and
     * each becomes U+FFFD (the output must be valid JSON, which is UTF-8) */
    unsigned char in[256];
    for (int i = 0; i < 256; i++) in[i] = (unsigned char)i;
    struct strbuf got, want;
    strbuf_init(&got);
    strbuf_init(&want);
    json_escape_append(&got, (const char *)in, sizeof in);
    strbuf_putc(&want, '"');
    for (int i = 0; i < 256; i++) expected_escape(&want, in[i]);
    strbuf_putc(&want, '"');
    cr_assert_eq(got.len, want.len);
    cr_assert_eq(memcmp(got.buf, want.buf, got.len), 0);
    strbuf_free(&got);
    strbuf_free(&want);
}

Test(base_jsonw, escaped_strings_read_back)
{
    const char in[] = "a\"b\\c/d\x01\x1f\n\r\t\b\f \xc3\xa9\xe2\x82\xac end\0tail";
    size_t n = sizeof in - 1; /* keeps the embedded NUL */
    struct strbuf sb;
    struct jsonw w;
    strbuf_init(&sb);
    jsonw_init(&w, &sb, 0);
    jsonw_obj_begin(&w);
    jsonw_key(&w, "k\"\n");
    jsonw_strn(&w, in, n);
    jsonw_obj_end(&w);
    json_error_t jerr;
    json_t *root = json_loads(sb.buf, JSON_ALLOW_NUL, &jerr);
    cr_assert_not_null(root, "jansson: %s", jerr.text);
    json_t *v = json_object_get(root, "k\"\n");
    cr_assert_not_null(v, "escaped key reads back");
    cr_assert_eq(json_string_length(v), n);
    cr_assert_eq(memcmp(json_string_value(v), in, n), 0);
    json_decref(root);
    strbuf_free(&sb);
}

static char *double_text(double v)
{
    struct strbuf sb;
    struct jsonw w;
    strbuf_init(&sb);
    jsonw_init(&w, &sb, 0);
    jsonw_double(&w, v);
    return strbuf_detach(&sb, NULL);
}

/* Significant digits in a %g-style number (a ".0" jsonw appended does not count). */
static int sig_digits(const char *s)
{
    int n = 0;
    bool leading = true;
    size_t len = strlen(s);
    if (len > 2 && strcmp(s + len - 2, ".0") == 0) len -= 2;
    for (const char *p = s; p < s + len && *p != 'e' && *p != 'E'; p++) {
        if (*p < '0' || *p > '9') continue;
        if (leading && *p == '0') continue;
        leading = false;
        n++;
    }
    return n;
}

static void check_double(double v)
{
    char *s = double_text(v);
    double back = strtod(s, NULL);
    cr_assert_eq(memcmp(&back, &v, sizeof v), 0, "%.17g wrote as %s, read back as %.17g", v, s, back);
    cr_assert(strpbrk(s, ".eE") != NULL, "%s: needs a fraction or exponent", s);
    /* shortest: one digit fewer does not read back the same (integer-valued doubles
     * below 1e16 are written in full instead, like Python) */
    int d = sig_digits(s);
    bool full_integer = v == floor(v) && fabs(v) < 1e16;
    if (full_integer) {
        char want[64];
        snprintf(want, sizeof want, "%.0f.0", v);
        cr_assert_str_eq(s, want);
    } else if (d > 1) {
        char shorter[400];
        snprintf(shorter, sizeof shorter, "%.*g", d - 1, v);
        cr_assert_neq(strtod(shorter, NULL), v, "%s is not the shortest (%s also reads back)", s, shorter);
    }
    hs_free(s);
}

Test(base_jsonw, doubles_round_trip_shortest)
{
    static const double edge[] = {
        0.0, -0.0, 1.0, -1.0, 0.1, 0.5, 1.5, 100.0, 1e21, 1e22, 123456789.0, 1.0 / 3.0,
        2.0 / 3.0, 1e-7, 1e-300, 5e-324, DBL_MIN, DBL_MAX, -DBL_MAX, 9007199254740993.0,
        4503599627370496.5, 3.141592653589793, 1e6, 65504.0, 1e-5,
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(edge); i++) check_double(edge[i]);
    uint64_t x = 0x9e3779b97f4a7c15ull;
    int done = 0;
    while (done < 20000) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        double v;
        memcpy(&v, &x, sizeof v);
        if (!isfinite(v)) continue;
        check_double(v);
        check_double((double)(int64_t)(x >> 20) / 1000.0); /* "nice" decimal values */
        check_double((double)(int32_t)x);                  /* integer-valued */
        done++;
    }
}

Test(base_jsonw, doubles_exact_text)
{
    static const struct { double v; const char *text; } cases[] = {
        { 1.0, "1.0" }, { -0.0, "-0.0" }, { 0.0, "0.0" }, { 100.0, "100.0" }, { 0.1, "0.1" },
        { 1.0 / 3.0, "0.3333333333333333" }, { 1e21, "1e+21" }, { 1e-7, "1e-07" },
        { 2.5e-5, "2.5e-05" }, { 123456.0, "123456.0" }, { -7.0, "-7.0" },
        { 1e15, "1000000000000000.0" }, { 1e16, "1e+16" }, { 10000000.0, "10000000.0" },
        { 1.5e300, "1.5e+300" }, { 0.25, "0.25" },
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(cases); i++) {
        char *s = double_text(cases[i].v);
        cr_assert_str_eq(s, cases[i].text);
        hs_free(s);
    }
}

Test(base_jsonw, non_finite_doubles_are_null)
{
    struct strbuf sb;
    struct jsonw w;
    strbuf_init(&sb);
    jsonw_init(&w, &sb, 0);
    jsonw_arr_begin(&w);
    jsonw_double(&w, NAN);
    jsonw_double(&w, INFINITY);
    jsonw_double(&w, -INFINITY);
    jsonw_double(&w, 2.5);
    jsonw_arr_end(&w);
    cr_assert_str_eq(sb.buf, "[null,null,null,2.5]");
    strbuf_free(&sb);
}

/* The one UTF-8 rule: valid sequences pass, every other byte becomes U+FFFD, in JSON strings
 * (keys too) as in hs_utf8_clean_append. */
Test(base_jsonw, invalid_utf8_becomes_replacement)
{
    static const struct { const char *in, *want; } cases[] = {
        { "\xe3\x89igaret", "\xef\xbf\xbd\xef\xbf\xbdigaret" },  /* a token cut inside a sequence */
        { "ok \xc3\xa9 \xf0\x9f\x98\x80", "ok \xc3\xa9 \xf0\x9f\x98\x80" },
        { "\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd" },                 /* overlong '/' */
        { "\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" }, /* a UTF-16 surrogate */
        { "\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" }, /* > U+10FFFF */
        { "\xf0\x9f\x98", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" }, /* truncated at the end */
        { "\xff\xfe", "\xef\xbf\xbd\xef\xbf\xbd" },
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *in = cases[k].in;
        struct strbuf a, b, j;
        strbuf_init(&a);
        strbuf_init(&b);
        strbuf_init(&j);
        hs_utf8_clean_append(&a, in, strlen(in));
        cr_assert(a.len == strlen(cases[k].want) && memcmp(a.buf, cases[k].want, a.len) == 0, "case %zu", k);
        cr_assert(hs_utf8_valid(a.buf, a.len));
        cr_assert_eq(hs_utf8_valid(in, strlen(in)), strcmp(in, cases[k].want) == 0, "case %zu", k);
        json_escape_append(&b, in, strlen(in));
        strbuf_putc(&j, '"');
        strbuf_append(&j, cases[k].want, strlen(cases[k].want));
        strbuf_putc(&j, '"');
        cr_assert(b.len == j.len && memcmp(b.buf, j.buf, b.len) == 0, "json case %zu", k);
        /* jansson rejects invalid UTF-8: a whole object with the string as key and value */
        struct jsonw w;
        strbuf_reset(&b);
        jsonw_init(&w, &b, 0);
        jsonw_obj_begin(&w);
        jsonw_key(&w, in);
        jsonw_str(&w, in);
        jsonw_obj_end(&w);
        json_error_t jerr;
        json_t *root = json_loadb(b.buf, b.len, 0, &jerr);
        cr_assert_not_null(root, "case %zu: jansson: %s", k, jerr.text);
        json_decref(root);
        strbuf_free(&a);
        strbuf_free(&b);
        strbuf_free(&j);
    }
}

/* Random bytes: the JSON is always valid UTF-8 and valid bytes survive unchanged. */
Test(base_jsonw, random_bytes_give_valid_json)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int round = 0; round < 2000; round++) {
        unsigned char in[64];
        size_t n = 1 + round % 64;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            in[i] = (unsigned char)(x % 4 == 0 ? 0x80 | (x >> 8 & 0x7f) : x >> 16);
        }
        struct strbuf b;
        strbuf_init(&b);
        json_escape_append(&b, (const char *)in, n);
        cr_assert(hs_utf8_valid(b.buf, b.len), "round %d: JSON is not UTF-8", round);
        json_error_t jerr;
        json_t *v = json_loadb(b.buf, b.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
        cr_assert_not_null(v, "round %d: jansson: %s", round, jerr.text);
        if (hs_utf8_valid(in, n))
            cr_assert(json_string_length(v) == n && memcmp(json_string_value(v), in, n) == 0);
        json_decref(v);
        strbuf_free(&b);
    }
}
