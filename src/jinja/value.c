/*
 * value.c — runtime values of the Jinja interpreter and the Python behaviour they must
 * copy: truthiness, ==, ordering, str(), repr(), float repr, and json.dumps for the
 * `tojson` filter (jinja.h has the design note).
 *
 * Invariants:
 *   1. A value owns exactly one reference to its JSON (or loop record) when it has one;
 *      jv_copy adds one and jv_free drops it, so values can be passed by struct copy.
 *   2. Formatting is Python's, byte for byte, for every value a template can print or
 *      serialise (repr of floats: the shortest digits that read back).
 */
#include "jinja/jinja_int.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- UTF-8 ------------------------------------------------------------------------------ */

uint32_t jinja_utf8_next(const char *s, size_t n, size_t *i)
{
    uint32_t cp;
    size_t len = hs_utf8_decode(s + *i, n - *i, &cp, NULL);
    if (len == 0) {
        /* Python could not have decoded such text at all; one byte keeps the walk going */
        cp = (unsigned char)s[*i];
        len = 1;
    }
    *i += len;
    return cp;
}

size_t jinja_utf8_count(const char *s, size_t n)
{
    size_t c = 0;
    for (size_t i = 0; i < n; c++)
        jinja_utf8_next(s, n, &i);
    return c;
}

size_t jinja_utf8_offset(const char *s, size_t n, size_t cp)
{
    size_t i = 0;
    while (cp > 0 && i < n) {
        jinja_utf8_next(s, n, &i);
        cp--;
    }
    return i;
}

void jinja_utf8_put(struct strbuf *sb, uint32_t cp)
{
    char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xC0 | cp >> 6);
        b[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xE0 | cp >> 12);
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        b[0] = (char)(0xF0 | cp >> 18);
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    strbuf_append(sb, b, n);
}

/* Python's str.isspace(): Unicode White_Space minus a few, plus the ASCII separators. */
bool py_is_space(uint32_t cp)
{
    if (cp <= 0x20)
        return cp == ' ' || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* str.isprintable() for one code point: a table of the non-printable ranges that chat
 * content can plausibly hold (controls, format characters, separators); unassigned code
 * points are not tracked (they print raw where Python would escape them). */
static bool py_is_printable(uint32_t cp)
{
    if (cp < 0x20 || (cp >= 0x7F && cp <= 0xA0) || cp == 0xAD)
        return false;
    if (cp < 0x600)
        return true;
    static const uint32_t ranges[][2] = {
        {0x600, 0x605}, {0x61C, 0x61C}, {0x6DD, 0x6DD}, {0x70F, 0x70F}, {0x1680, 0x1680},
        {0x180E, 0x180E}, {0x2000, 0x200F}, {0x2028, 0x202F}, {0x205F, 0x206F},
        {0x3000, 0x3000}, {0xD800, 0xF8FF}, {0xFEFF, 0xFEFF}, {0xFFF9, 0xFFFB},
        {0x110BD, 0x110BD}, {0x1D173, 0x1D17A}, {0xE0001, 0xE007F}, {0xF0000, 0x10FFFF},
    };
    for (size_t k = 0; k < HS_ARRAY_LEN(ranges); k++)
        if (cp >= ranges[k][0] && cp <= ranges[k][1])
            return false;
    return true;
}

/* ---- values ----------------------------------------------------------------------------- */

static json_t *undef_sentinel;
static pthread_once_t undef_once = PTHREAD_ONCE_INIT;

static void undef_init(void)
{
    undef_sentinel = json_object(); /* never freed: one per process, reachable */
}

json_t *jv_undef_json(void)
{
    pthread_once(&undef_once, undef_init);
    return undef_sentinel;
}

struct jv jv_strn(const char *s, size_t n)
{
    struct jv v = {0};
    v.kind = JV_STR;
    v.u.j = json_stringn_nocheck(s ? s : "", n);
    return v;
}

struct jv jv_str_take(struct strbuf *sb)
{
    struct jv v = jv_strn(sb->buf, sb->len);
    strbuf_free(sb);
    return v;
}

struct jv jv_from_json(json_t *j)
{
    struct jv v = {0};
    switch (json_typeof(j)) {
    case JSON_NULL: v.kind = JV_NONE; break;
    case JSON_TRUE: v.kind = JV_BOOL; v.u.b = true; break;
    case JSON_FALSE: v.kind = JV_BOOL; v.u.b = false; break;
    case JSON_INTEGER: v.kind = JV_INT; v.u.i = json_integer_value(j); break;
    case JSON_REAL: v.kind = JV_FLOAT; v.u.f = json_real_value(j); break;
    case JSON_STRING: v.kind = JV_STR; v.u.j = json_incref(j); break;
    case JSON_ARRAY: v.kind = JV_LIST; v.u.j = json_incref(j); break;
    case JSON_OBJECT:
        if (j == jv_undef_json())
            return jv_undef(NULL);
        v.kind = JV_DICT;
        v.u.j = json_incref(j);
        break;
    }
    return v;
}

json_t *jv_to_json(const struct jv *v)
{
    switch (v->kind) {
    case JV_NONE: return json_null();
    case JV_BOOL: return json_boolean(v->u.b);
    case JV_INT: return json_integer(v->u.i);
    case JV_FLOAT: return json_real(v->u.f);
    case JV_STR: case JV_LIST: case JV_DICT: return json_incref(v->u.j);
    case JV_UNDEF: return json_incref(jv_undef_json());
    default: return NULL;
    }
}

struct jv jv_copy(const struct jv *v)
{
    struct jv c = *v;
    switch (v->kind) {
    case JV_STR: case JV_LIST: case JV_DICT: case JV_NS: case JV_METHOD:
        json_incref(c.u.j);
        break;
    case JV_LOOP:
        c.u.loop->refs++;
        break;
    default:
        break;
    }
    return c;
}

void jv_free(struct jv *v)
{
    switch (v->kind) {
    case JV_STR: case JV_LIST: case JV_DICT: case JV_NS: case JV_METHOD:
        json_decref(v->u.j);
        break;
    case JV_LOOP:
        if (--v->u.loop->refs == 0) {
            json_decref(v->u.loop->items);
            hs_free(v->u.loop);
        }
        break;
    default:
        break;
    }
    *v = jv_undef(NULL);
}

bool jv_truthy(const struct jv *v)
{
    switch (v->kind) {
    case JV_UNDEF: case JV_NONE: return false;
    case JV_BOOL: return v->u.b;
    case JV_INT: return v->u.i != 0;
    case JV_FLOAT: return v->u.f != 0.0;
    case JV_STR: return jv_len(v) > 0;
    case JV_LIST: return v->seq == JV_SEQ_GEN || json_array_size(v->u.j) > 0;
    case JV_DICT: return json_object_size(v->u.j) > 0;
    default: return true;
    }
}

bool jv_is_number(const struct jv *v)
{
    return v->kind == JV_BOOL || v->kind == JV_INT || v->kind == JV_FLOAT;
}

double jv_as_double(const struct jv *v)
{
    return v->kind == JV_FLOAT ? v->u.f : v->kind == JV_INT ? (double)v->u.i : v->u.b ? 1.0 : 0.0;
}

static int64_t as_int(const struct jv *v) { return v->kind == JV_INT ? v->u.i : v->u.b ? 1 : 0; }

/* Python compares int with float exactly; doubles hold ints up to 2^53 exactly, which
 * covers what templates compare. */
static int num_cmp(const struct jv *a, const struct jv *b)
{
    if (a->kind != JV_FLOAT && b->kind != JV_FLOAT) {
        int64_t x = as_int(a), y = as_int(b);
        return x < y ? -1 : x > y;
    }
    double x = jv_as_double(a), y = jv_as_double(b);
    if (isnan(x) || isnan(y))
        return 2; /* unordered */
    return x < y ? -1 : x > y;
}

/* jv_equal of two items of a list or dict, as the template sees them. */
static bool json_equal_as_jv(json_t *a, json_t *b)
{
    struct jv x = jv_from_json(a), y = jv_from_json(b);
    bool eq = jv_equal(&x, &y);
    jv_free(&x);
    jv_free(&y);
    return eq;
}

bool jv_equal(const struct jv *a, const struct jv *b)
{
    if (jv_is_number(a) && jv_is_number(b))
        return num_cmp(a, b) == 0;
    if (a->kind != b->kind)
        return false;
    if (a->kind == JV_LIST && (a->tuple != b->tuple || a->seq != b->seq || a->seq == JV_SEQ_GEN))
        return a->seq == JV_SEQ_GEN && a->u.j == b->u.j;
    switch (a->kind) {
    case JV_UNDEF: case JV_NONE: return true;
    case JV_STR: return jv_len(a) == jv_len(b) && memcmp(jv_str(a), jv_str(b), jv_len(a)) == 0;
    case JV_LIST: {
        size_t n = json_array_size(a->u.j);
        if (n != json_array_size(b->u.j))
            return false;
        for (size_t i = 0; i < n; i++)
            if (!json_equal_as_jv(json_array_get(a->u.j, i), json_array_get(b->u.j, i)))
                return false;
        return true;
    }
    case JV_DICT: {
        if (json_object_size(a->u.j) != json_object_size(b->u.j))
            return false;
        const char *k;
        json_t *val;
        json_object_foreach(a->u.j, k, val) {
            json_t *o = json_object_get(b->u.j, k);
            if (!o || !json_equal_as_jv(val, o))
                return false;
        }
        return true;
    }
    case JV_NS: case JV_METHOD: return a->u.j == b->u.j && a->id == b->id;
    case JV_MACRO: return a->u.macro == b->u.macro;
    case JV_LOOP: return a->u.loop == b->u.loop;
    case JV_FUNC: return a->id == b->id;
    default: return false;
    }
}

int jv_compare(const struct jv *a, const struct jv *b)
{
    if (jv_is_number(a) && jv_is_number(b))
        return num_cmp(a, b);
    if (a->kind == JV_STR && b->kind == JV_STR) {
        size_t la = jv_len(a), lb = jv_len(b);
        int c = memcmp(jv_str(a), jv_str(b), la < lb ? la : lb);
        if (c)
            return c < 0 ? -1 : 1;
        return la < lb ? -1 : la > lb;
    }
    if (a->kind == JV_LIST && b->kind == JV_LIST) {
        size_t na = json_array_size(a->u.j), nb = json_array_size(b->u.j);
        for (size_t i = 0; i < na && i < nb; i++) {
            struct jv x = jv_from_json(json_array_get(a->u.j, i));
            struct jv y = jv_from_json(json_array_get(b->u.j, i));
            int c = jv_equal(&x, &y) ? 0 : jv_compare(&x, &y);
            jv_free(&x);
            jv_free(&y);
            if (c)
                return c;
        }
        return na < nb ? -1 : na > nb;
    }
    return -2;
}

const char *jv_type_name(const struct jv *v)
{
    static const char *const names[] = {
        [JV_UNDEF] = "Undefined", [JV_NONE] = "NoneType", [JV_BOOL] = "bool", [JV_INT] = "int",
        [JV_FLOAT] = "float", [JV_STR] = "str", [JV_LIST] = "list", [JV_DICT] = "dict",
        [JV_NS] = "Namespace", [JV_MACRO] = "Macro", [JV_LOOP] = "LoopContext",
        [JV_FUNC] = "function", [JV_METHOD] = "method",
    };
    if (v->kind == JV_LIST && v->seq != JV_SEQ_LIST)
        return v->seq == JV_SEQ_GEN ? "generator" : v->seq == JV_SEQ_VIEW ? "dict_items" : "range";
    if (v->kind == JV_LIST && v->tuple)
        return "tuple";
    return names[v->kind];
}

/* ---- Python formatting ------------------------------------------------------------------ */

void py_float_repr(double d, struct strbuf *out)
{
    if (isnan(d)) {
        strbuf_puts(out, "nan");
        return;
    }
    if (isinf(d)) {
        strbuf_puts(out, d < 0 ? "-inf" : "inf");
        return;
    }
    if (d == 0) {
        strbuf_puts(out, signbit(d) ? "-0.0" : "0.0");
        return;
    }
    /* shortest digits that read back exactly (what repr() prints) */
    char buf[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof(buf), "%.*e", prec - 1, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    /* buf = [-]d[.ddd]e[+-]XX */
    const char *s = buf;
    bool neg = *s == '-';
    if (neg)
        s++;
    char digits[24];
    int nd = 0;
    const char *e = strchr(s, 'e');
    for (const char *q = s; q < e; q++)
        if (*q != '.')
            digits[nd++] = *q;
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    int exp10 = atoi(e + 1);
    if (neg)
        strbuf_putc(out, '-');
    if (exp10 >= -5 + 1 && exp10 < 16) {
        /* fixed notation: repr uses it for 1e-4 <= |d| < 1e16 */
        if (exp10 < 0) {
            strbuf_puts(out, "0.");
            for (int k = 0; k < -exp10 - 1; k++)
                strbuf_putc(out, '0');
            strbuf_append(out, digits, (size_t)nd);
        } else {
            for (int k = 0; k <= exp10; k++)
                strbuf_putc(out, k < nd ? digits[k] : '0');
            strbuf_putc(out, '.');
            if (nd > exp10 + 1)
                strbuf_append(out, digits + exp10 + 1, (size_t)(nd - exp10 - 1));
            else
                strbuf_putc(out, '0');
        }
    } else {
        strbuf_putc(out, digits[0]);
        if (nd > 1) {
            strbuf_putc(out, '.');
            strbuf_append(out, digits + 1, (size_t)(nd - 1));
        }
        strbuf_printf(out, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    }
}

void py_str_repr(const char *s, size_t n, struct strbuf *out)
{
    bool has_sq = memchr(s, '\'', n) != NULL, has_dq = memchr(s, '"', n) != NULL;
    char q = has_sq && !has_dq ? '"' : '\'';
    strbuf_putc(out, q);
    for (size_t i = 0; i < n;) {
        size_t start = i;
        uint32_t cp = jinja_utf8_next(s, n, &i);
        if (cp == (uint32_t)q || cp == '\\') {
            strbuf_putc(out, '\\');
            strbuf_putc(out, (char)cp);
        } else if (cp == '\n') {
            strbuf_puts(out, "\\n");
        } else if (cp == '\r') {
            strbuf_puts(out, "\\r");
        } else if (cp == '\t') {
            strbuf_puts(out, "\\t");
        } else if (!py_is_printable(cp)) {
            if (cp < 0x100)
                strbuf_printf(out, "\\x%02x", cp);
            else if (cp < 0x10000)
                strbuf_printf(out, "\\u%04x", cp);
            else
                strbuf_printf(out, "\\U%08x", cp);
        } else {
            strbuf_append(out, s + start, i - start);
        }
    }
    strbuf_putc(out, q);
}

static void repr_json(json_t *j, struct strbuf *out)
{
    struct jv v = jv_from_json(j);
    jv_repr_append(&v, out);
    jv_free(&v);
}

void jv_repr_append(const struct jv *v, struct strbuf *out)
{
    switch (v->kind) {
    case JV_STR:
        py_str_repr(jv_str(v), jv_len(v), out);
        return;
    case JV_LIST: {
        size_t n = json_array_size(v->u.j);
        strbuf_putc(out, v->tuple ? '(' : '[');
        for (size_t i = 0; i < n; i++) {
            if (i)
                strbuf_puts(out, ", ");
            repr_json(json_array_get(v->u.j, i), out);
        }
        if (v->tuple && n == 1)
            strbuf_putc(out, ',');
        strbuf_putc(out, v->tuple ? ')' : ']');
        return;
    }
    case JV_DICT: {
        const char *k;
        json_t *val;
        bool first = true;
        strbuf_putc(out, '{');
        json_object_foreach(v->u.j, k, val) {
            if (!first)
                strbuf_puts(out, ", ");
            first = false;
            py_str_repr(k, strlen(k), out);
            strbuf_puts(out, ": ");
            repr_json(val, out);
        }
        strbuf_putc(out, '}');
        return;
    }
    case JV_UNDEF:
        strbuf_puts(out, "Undefined");
        return;
    default:
        jv_str_append(v, out);
    }
}

void jv_str_append(const struct jv *v, struct strbuf *out)
{
    switch (v->kind) {
    case JV_UNDEF: return;
    case JV_NONE: strbuf_puts(out, "None"); return;
    case JV_BOOL: strbuf_puts(out, v->u.b ? "True" : "False"); return;
    case JV_INT: strbuf_printf(out, "%lld", (long long)v->u.i); return;
    case JV_FLOAT: py_float_repr(v->u.f, out); return;
    case JV_STR: strbuf_append(out, jv_str(v), jv_len(v)); return;
    case JV_LIST:
        if (v->seq == JV_SEQ_GEN) {
            strbuf_puts(out, "<generator object>");
            return;
        }
        jv_repr_append(v, out);
        return;
    case JV_DICT: jv_repr_append(v, out); return;
    case JV_NS: {
        struct jv d = {0};
        d.kind = JV_DICT;
        d.u.j = v->u.j;
        strbuf_puts(out, "<Namespace ");
        jv_repr_append(&d, out);
        strbuf_putc(out, '>');
        return;
    }
    case JV_MACRO: strbuf_printf(out, "<Macro '%s'>", v->u.macro->name); return;
    case JV_LOOP: strbuf_puts(out, "<LoopContext>"); return;
    case JV_FUNC: case JV_METHOD: strbuf_puts(out, "<function>"); return;
    }
}

/* ---- json.dumps ------------------------------------------------------------------------- */

struct dumps {
    struct strbuf *out;
    int indent;        /* -1: none */
    bool ascii;        /* ensure_ascii */
    bool sort_keys;
    const char *item_sep, *key_sep;
};

static void dumps_str(struct dumps *d, const char *s, size_t n)
{
    struct strbuf *out = d->out;
    strbuf_putc(out, '"');
    for (size_t i = 0; i < n;) {
        size_t start = i;
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            strbuf_putc(out, '\\');
            strbuf_putc(out, (char)c);
            i++;
        } else if (c < 0x20) {
            switch (c) {
            case '\n': strbuf_puts(out, "\\n"); break;
            case '\r': strbuf_puts(out, "\\r"); break;
            case '\t': strbuf_puts(out, "\\t"); break;
            case '\b': strbuf_puts(out, "\\b"); break;
            case '\f': strbuf_puts(out, "\\f"); break;
            default: strbuf_printf(out, "\\u%04x", c);
            }
            i++;
        } else if (c < 0x80 || !d->ascii) {
            size_t j = i + 1;
            while (j < n && (unsigned char)s[j] >= 0x20 && s[j] != '"' && s[j] != '\\' &&
                   ((unsigned char)s[j] < 0x80 || !d->ascii))
                j++;
            strbuf_append(out, s + start, j - start);
            i = j;
        } else {
            uint32_t cp = jinja_utf8_next(s, n, &i);
            if (cp >= 0x10000) {
                cp -= 0x10000;
                strbuf_printf(out, "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
            } else {
                strbuf_printf(out, "\\u%04x", cp);
            }
        }
    }
    strbuf_putc(out, '"');
}

static void dumps_newline(struct dumps *d, int level)
{
    strbuf_putc(d->out, '\n');
    for (int k = 0; k < level * d->indent; k++)
        strbuf_putc(d->out, ' ');
}

static int key_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int dumps_value(struct dumps *d, const json_t *v, int level)
{
    struct strbuf *out = d->out;
    switch (json_typeof(v)) {
    case JSON_NULL: strbuf_puts(out, "null"); return 0;
    case JSON_TRUE: strbuf_puts(out, "true"); return 0;
    case JSON_FALSE: strbuf_puts(out, "false"); return 0;
    case JSON_INTEGER: strbuf_printf(out, "%lld", (long long)json_integer_value(v)); return 0;
    case JSON_REAL: {
        double f = json_real_value(v);
        if (isnan(f))
            strbuf_puts(out, "NaN");
        else if (isinf(f))
            strbuf_puts(out, f < 0 ? "-Infinity" : "Infinity");
        else
            py_float_repr(f, out);
        return 0;
    }
    case JSON_STRING: dumps_str(d, json_string_value(v), json_string_length(v)); return 0;
    case JSON_ARRAY: {
        size_t n = json_array_size(v);
        if (n == 0) {
            strbuf_puts(out, "[]");
            return 0;
        }
        strbuf_putc(out, '[');
        for (size_t i = 0; i < n; i++) {
            if (i)
                strbuf_puts(out, d->item_sep);
            if (d->indent >= 0)
                dumps_newline(d, level + 1);
            if (dumps_value(d, json_array_get(v, i), level + 1) < 0)
                return -1;
        }
        if (d->indent >= 0)
            dumps_newline(d, level);
        strbuf_putc(out, ']');
        return 0;
    }
    case JSON_OBJECT: {
        size_t n = json_object_size(v);
        if (v == jv_undef_json())
            return -1;
        if (n == 0) {
            strbuf_puts(out, "{}");
            return 0;
        }
        const char **keys = hs_malloc(n * sizeof(*keys));
        size_t k = 0;
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)v, key, val)
            keys[k++] = key;
        if (d->sort_keys)
            qsort(keys, n, sizeof(*keys), key_cmp);
        strbuf_putc(out, '{');
        for (size_t i = 0; i < n; i++) {
            if (i)
                strbuf_puts(out, d->item_sep);
            if (d->indent >= 0)
                dumps_newline(d, level + 1);
            dumps_str(d, keys[i], strlen(keys[i]));
            strbuf_puts(out, d->key_sep);
            if (dumps_value(d, json_object_get(v, keys[i]), level + 1) < 0) {
                hs_free(keys);
                return -1;
            }
        }
        hs_free(keys);
        if (d->indent >= 0)
            dumps_newline(d, level);
        strbuf_putc(out, '}');
        return 0;
    }
    }
    return 0;
}

int jinja_dumps(const json_t *v, int indent, bool ensure_ascii, bool sort_keys,
                const char *item_sep, const char *key_sep, struct strbuf *out)
{
    struct dumps d = {out, indent, ensure_ascii, sort_keys, item_sep, key_sep};
    if (!d.item_sep)
        d.item_sep = indent >= 0 ? "," : ", ";
    if (!d.key_sep)
        d.key_sep = ": ";
    return dumps_value(&d, v, 0);
}

void jinja_tojson(const json_t *v, int indent, struct strbuf *out)
{
    jinja_dumps(v, indent, false, false, NULL, NULL, out);
}
