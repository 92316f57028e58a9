/*
 * builtins.c — the builtins of the Jinja interpreter, each copying the Python behaviour
 * transformers' jinja2 shows: string, dict and list methods, tests, filters and the global
 * functions (jinja.h has the design note).
 *
 * Invariants:
 *   1. BUILTINS (the table at the end) is the whole supported set: parse.c resolves filter
 *      and test names against it when it compiles (unknown ones are refused there, or
 *      fail when they run inside {% if %}), attribute lookup resolves methods against it,
 *      name lookup global functions, and every call goes through the row it found.
 *   2. One function may serve several rows; the row's variant says which behaviour
 *      (strip's side, a comparison's operator), so the name never steers the code.
 *   3. Builtins are pure functions of their arguments (strftime_now aside): they never
 *      keep state between calls.
 */
#include "jinja/jinja_int.h"

#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <wctype.h>

enum { MAX_RANGE = 1 << 20 };


/* ---- string helpers --------------------------------------------------------------------- */

static bool in_chars(uint32_t cp, const struct jv *chars)
{
    if (!chars || chars->kind == JV_NONE)
        return py_is_space(cp);
    const char *s = jv_str(chars);
    size_t n = jv_len(chars);
    for (size_t i = 0; i < n;)
        if (jinja_utf8_next(s, n, &i) == cp)
            return true;
    return false;
}

/* Python str.strip family; which: 1 left, 2 right, 3 both. */
static struct jv str_strip(const struct jv *v, const struct jv *chars, int which)
{
    const char *s = jv_str(v);
    size_t n = jv_len(v), a = 0, b = n;
    if (which & 1) {
        while (a < n) {
            size_t j = a;
            if (!in_chars(jinja_utf8_next(s, n, &j), chars))
                break;
            a = j;
        }
    }
    if (which & 2) {
        size_t i = a, keep = a;
        while (i < n) {
            size_t j = i;
            if (!in_chars(jinja_utf8_next(s, n, &j), chars))
                keep = j;
            i = j;
        }
        b = keep;
    }
    struct jv o = jv_strn(s + a, b - a);
    o.markup = v->markup;
    return o;
}

static json_t *str_split(const struct jv *v, const struct jv *sep, int64_t maxsplit)
{
    const char *s = jv_str(v);
    size_t n = jv_len(v);
    json_t *out = json_array();
    if (!sep || sep->kind == JV_NONE) {
        size_t i = 0;
        for (;;) {
            while (i < n) {
                size_t j = i;
                if (!py_is_space(jinja_utf8_next(s, n, &j)))
                    break;
                i = j;
            }
            if (i >= n)
                break;
            if (maxsplit == 0) {
                /* the rest, with trailing whitespace removed */
                size_t k = i, keep = i;
                while (k < n) {
                    size_t j = k;
                    if (!py_is_space(jinja_utf8_next(s, n, &j)))
                        keep = j;
                    k = j;
                }
                json_array_append_new(out, json_stringn_nocheck(s + i, keep - i));
                break;
            }
            size_t st = i;
            while (i < n) {
                size_t j = i;
                if (py_is_space(jinja_utf8_next(s, n, &j)))
                    break;
                i = j;
            }
            json_array_append_new(out, json_stringn_nocheck(s + st, i - st));
            if (maxsplit > 0)
                maxsplit--;
        }
        return out;
    }
    const char *p = jv_str(sep);
    size_t pn = jv_len(sep), st = 0;
    for (;;) {
        const char *hit = maxsplit != 0 ? memmem(s + st, n - st, p, pn) : NULL;
        if (!hit)
            break;
        json_array_append_new(out, json_stringn_nocheck(s + st, (size_t)(hit - (s + st))));
        st = (size_t)(hit - s) + pn;
        if (maxsplit > 0)
            maxsplit--;
    }
    json_array_append_new(out, json_stringn_nocheck(s + st, n - st));
    return out;
}

static struct jv str_replace(const struct jv *v, const struct jv *old, const struct jv *new_, int64_t count)
{
    const char *s = jv_str(v), *o = jv_str(old);
    size_t n = jv_len(v), on = jv_len(old);
    struct strbuf sb;
    strbuf_init(&sb);
    if (on == 0) {
        size_t i = 0;
        while (count != 0) {
            strbuf_append(&sb, jv_str(new_), jv_len(new_));
            if (count > 0)
                count--;
            if (i >= n)
                break;
            size_t j = i;
            jinja_utf8_next(s, n, &j);
            strbuf_append(&sb, s + i, j - i);
            i = j;
        }
        strbuf_append(&sb, s + i, n - i);
    } else {
        size_t st = 0;
        for (;;) {
            const char *hit = count != 0 ? memmem(s + st, n - st, o, on) : NULL;
            if (!hit)
                break;
            strbuf_append(&sb, s + st, (size_t)(hit - (s + st)));
            strbuf_append(&sb, jv_str(new_), jv_len(new_));
            st = (size_t)(hit - s) + on;
            if (count > 0)
                count--;
        }
        strbuf_append(&sb, s + st, n - st);
    }
    struct jv out = jv_str_take(&sb);
    if (out.kind == JV_STR && !jv_str(&out))
        out = jv_strn("", 0);
    return out;
}

/* Case mapping of one code point: ASCII by hand, the rest through the C.UTF-8 locale's
 * one-to-one tables (Python's special multi-character mappings such as "ß" -> "SS" are not
 * reproduced). */
static locale_t utf8_loc;
static pthread_once_t utf8_loc_once = PTHREAD_ONCE_INIT;

static void utf8_locale_init(void)
{
    utf8_loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0); /* kept for the process */
}

static locale_t utf8_locale(void)
{
    pthread_once(&utf8_loc_once, utf8_locale_init);
    return utf8_loc;
}

static uint32_t cp_case(uint32_t cp, bool up)
{
    if (cp < 0x80) {
        if (up && cp >= 'a' && cp <= 'z')
            return cp - 32;
        if (!up && cp >= 'A' && cp <= 'Z')
            return cp + 32;
        return cp;
    }
    locale_t loc = utf8_locale();
    if (!loc)
        return cp;
    return (uint32_t)(up ? towupper_l((wint_t)cp, loc) : towlower_l((wint_t)cp, loc));
}

static bool cp_cased(uint32_t cp)
{
    if (cp < 0x80)
        return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
    return cp_case(cp, true) != cp || cp_case(cp, false) != cp;
}

/* mode: 0 lower, 1 upper, 2 capitalize, 3 Python title, 4 Jinja's title filter. */
static struct jv str_case(const struct jv *v, int mode)
{
    const char *s = jv_str(v);
    size_t n = jv_len(v);
    struct strbuf sb;
    strbuf_init(&sb);
    bool prev_cased = false, word_start = true, first = true;
    for (size_t i = 0; i < n;) {
        uint32_t c = jinja_utf8_next(s, n, &i);
        bool up;
        switch (mode) {
        case 0: up = false; break;
        case 1: up = true; break;
        case 2: up = first; break;
        case 3: up = !prev_cased; break;
        default: up = word_start; break;
        }
        first = false;
        prev_cased = cp_cased(c);
        word_start = py_is_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
        jinja_utf8_put(&sb, cp_case(c, up));
    }
    struct jv o = jv_str_take(&sb);
    o.markup = v->markup;
    return o;
}

static bool str_affix(const struct jv *v, const struct jv *affix, bool start)
{
    size_t n = jv_len(v), an = jv_len(affix);
    if (an > n)
        return false;
    return memcmp(jv_str(v) + (start ? 0 : n - an), jv_str(affix), an) == 0;
}

static int64_t cp_index(const char *s, const char *at) { return (int64_t)jinja_utf8_count(s, (size_t)(at - s)); }

/* ---- methods ---------------------------------------------------------------------------- */

/* str.format with plain fields: {}, {0}, {name}, {{ and }}, optional !s / !r; format specs
 * are not supported (an error, never a guess). */
static int str_format(struct rctx *r, int line, const struct jv *self, const struct args *a, struct jv *out)
{
    const char *s = jv_str(self);
    size_t n = jv_len(self), auto_idx = 0;
    struct strbuf sb;
    strbuf_init(&sb);
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '}' ) {
            if (i + 1 < n && s[i + 1] == '}') {
                strbuf_putc(&sb, '}');
                i++;
                continue;
            }
            strbuf_free(&sb);
            return jinja_err(r, line, "Single '}' encountered in format string");
        }
        if (c != '{') {
            strbuf_putc(&sb, c);
            continue;
        }
        if (i + 1 < n && s[i + 1] == '{') {
            strbuf_putc(&sb, '{');
            i++;
            continue;
        }
        const char *close = memchr(s + i, '}', n - i);
        if (!close) {
            strbuf_free(&sb);
            return jinja_err(r, line, "Single '{' encountered in format string");
        }
        size_t fl = (size_t)(close - (s + i + 1));
        char field[128];
        if (fl >= sizeof(field)) {
            strbuf_free(&sb);
            return jinja_err(r, line, "format field too long");
        }
        memcpy(field, s + i + 1, fl);
        field[fl] = 0;
        char conv = 's';
        char *bang = strchr(field, '!');
        if (strchr(field, ':') || strchr(field, '.') || strchr(field, '[')) {
            strbuf_free(&sb);
            return jinja_err(r, line, "format specs and field lookups are not supported");
        }
        if (bang) {
            conv = bang[1];
            *bang = 0;
        }
        const struct jv *arg = NULL;
        if (field[0] == 0) {
            arg = jinja_arg(a, (int)auto_idx++, NULL);
        } else if (field[0] >= '0' && field[0] <= '9') {
            arg = jinja_arg(a, atoi(field), NULL);
        } else {
            for (int k = 0; k < a->n_kw; k++)
                if (!strcmp(a->kw_names[k], field))
                    arg = &a->kw[k];
        }
        if (!arg) {
            strbuf_free(&sb);
            return jinja_err(r, line, "format: no argument for field '{%s}'", field);
        }
        if (conv == 'r')
            jv_repr_append(arg, &sb);
        else
            jv_str_append(arg, &sb);
        i += fl + 1;
    }
    *out = jv_str_take(&sb);
    return HS_OK;
}

static int need_str(struct rctx *r, int line, const struct jv *v, const char *what)
{
    if (!v || v->kind != JV_STR)
        return jinja_err(r, line, "%s expects a string argument, got '%s'", what, v ? jv_type_name(v) : "nothing");
    return HS_OK;
}


/* Methods: c->v is the receiver (a str, dict or list as the row's kind says). */

static int m_strip(const struct jcall *c, struct jv *out)
{
    const struct jv *a0 = jinja_arg(c->a, 0, NULL);
    int rc;
    if (a0 && a0->kind != JV_NONE && (rc = need_str(c->r, c->line, a0, c->b->name)) != HS_OK)
        return rc;
    *out = str_strip(c->v, a0, c->b->variant);
    return HS_OK;
}

static int m_split(const struct jcall *c, struct jv *out)
{
    const struct jv *sep = jinja_arg(c->a, 0, "sep"), *mx = jinja_arg(c->a, 1, "maxsplit");
    int rc;
    if (sep && sep->kind != JV_NONE) {
        if ((rc = need_str(c->r, c->line, sep, c->b->name)) != HS_OK)
            return rc;
        if (jv_len(sep) == 0)
            return jinja_err(c->r, c->line, "empty separator");
    }
    json_t *l = str_split(c->v, sep, mx && mx->kind == JV_INT ? mx->u.i : -1);
    *out = jv_from_json(l);
    json_decref(l);
    return HS_OK;
}

/* startswith (variant 1) / endswith (0): a string or a tuple of strings */
static int m_affix(const struct jcall *c, struct jv *out)
{
    const struct jv *a0 = jinja_arg(c->a, 0, NULL);
    const char *name = c->b->name;
    int rc = HS_OK;
    if (!a0)
        return jinja_err(c->r, c->line, "%s() takes at least 1 argument", name);
    bool hit = false, start = c->b->variant;
    if (a0->kind == JV_LIST && a0->tuple) {
        for (size_t i = 0; i < json_array_size(a0->u.j) && rc == HS_OK; i++) {
            struct jv x = jv_from_json(json_array_get(a0->u.j, i));
            if ((rc = need_str(c->r, c->line, &x, name)) == HS_OK && str_affix(c->v, &x, start))
                hit = true;
            jv_free(&x);
        }
    } else if ((rc = need_str(c->r, c->line, a0, name)) == HS_OK) {
        hit = str_affix(c->v, a0, start);
    }
    *out = jv_bool(hit);
    return rc;
}

static int m_replace(const struct jcall *c, struct jv *out)
{
    const struct jv *a0 = jinja_arg(c->a, 0, NULL), *a1 = jinja_arg(c->a, 1, NULL);
    const struct jv *cnt = jinja_arg(c->a, 2, "count");
    int rc;
    if ((rc = need_str(c->r, c->line, a0, c->b->name)) != HS_OK ||
        (rc = need_str(c->r, c->line, a1, c->b->name)) != HS_OK)
        return rc;
    *out = str_replace(c->v, a0, a1, cnt && cnt->kind == JV_INT ? cnt->u.i : -1);
    return HS_OK;
}

/* upper, lower, title, capitalize: the variant is str_case's mode */
static int m_case(const struct jcall *c, struct jv *out)
{
    *out = str_case(c->v, c->b->variant);
    return HS_OK;
}

enum { FIND_COUNT, FIND_FIRST, FIND_LAST };

/* count, find, rfind */
static int m_find(const struct jcall *c, struct jv *out)
{
    const struct jv *a0 = jinja_arg(c->a, 0, NULL);
    int rc;
    if ((rc = need_str(c->r, c->line, a0, c->b->name)) != HS_OK)
        return rc;
    const char *s = jv_str(c->v), *p = jv_str(a0);
    size_t n = jv_len(c->v), pn = jv_len(a0);
    if (c->b->variant == FIND_COUNT) {
        int64_t k = 0;
        if (pn == 0) {
            k = (int64_t)jinja_utf8_count(s, n) + 1;
        } else {
            for (const char *h = s; (h = memmem(h, n - (size_t)(h - s), p, pn)) != NULL; h += pn)
                k++;
        }
        *out = jv_int(k);
    } else if (c->b->variant == FIND_FIRST) {
        const char *h = memmem(s, n, p, pn);
        *out = jv_int(h ? cp_index(s, h) : -1);
    } else {
        const char *last = NULL;
        for (const char *h = s; h <= s + n && (h = memmem(h, n - (size_t)(h - s), p, pn)) != NULL; h++)
            last = h;
        if (pn == 0)
            last = s + n;
        *out = jv_int(last ? cp_index(s, last) : -1);
    }
    return HS_OK;
}

static int m_join(const struct jcall *c, struct jv *out)
{
    const struct jv *a0 = jinja_arg(c->a, 0, NULL);
    json_t *items = NULL;
    int rc;
    if (!a0)
        return jinja_err(c->r, c->line, "join() takes exactly one argument");
    if ((rc = jinja_iter(c->r, c->line, a0, &items)) != HS_OK)
        return rc;
    struct strbuf sb;
    strbuf_init(&sb);
    for (size_t i = 0; i < json_array_size(items); i++) {
        json_t *it = json_array_get(items, i);
        if (!json_is_string(it)) {
            rc = jinja_err(c->r, c->line, "sequence item %zu: expected str instance", i);
            break;
        }
        if (i)
            strbuf_append(&sb, jv_str(c->v), jv_len(c->v));
        strbuf_append(&sb, json_string_value(it), json_string_length(it));
    }
    json_decref(items);
    if (rc != HS_OK) {
        strbuf_free(&sb);
        return rc;
    }
    *out = jv_str_take(&sb);
    return HS_OK;
}

/* isspace (variant 1) / isdigit (0) */
static int m_is(const struct jcall *c, struct jv *out)
{
    const char *s = jv_str(c->v);
    size_t n = jv_len(c->v);
    bool ok = n > 0;
    for (size_t i = 0; i < n && ok;) {
        uint32_t cp = jinja_utf8_next(s, n, &i);
        ok = c->b->variant ? py_is_space(cp) : (cp >= '0' && cp <= '9');
    }
    *out = jv_bool(ok);
    return HS_OK;
}

static int m_format(const struct jcall *c, struct jv *out)
{
    return str_format(c->r, c->line, c->v, c->a, out);
}

static int m_get(const struct jcall *c, struct jv *out)
{
    const struct jv *a0 = jinja_arg(c->a, 0, NULL), *a1 = jinja_arg(c->a, 1, NULL);
    if (!a0)
        return jinja_err(c->r, c->line, "get expected at least 1 argument");
    json_t *j = a0->kind == JV_STR ? json_object_get(c->v->u.j, jv_str(a0)) : NULL;
    *out = j ? jv_from_json(j) : a1 ? jv_copy(a1) : jv_none();
    return HS_OK;
}

enum { VIEW_ITEMS, VIEW_KEYS, VIEW_VALUES };

/* dict.items() / keys() / values() as a new JSON array (items: [key, value] pairs). */
static json_t *dict_view(const json_t *d, int which)
{
    json_t *l = json_array();
    const char *k;
    json_t *val;
    json_object_foreach((json_t *)d, k, val) {
        if (which == VIEW_KEYS) {
            json_array_append_new(l, json_string_nocheck(k));
        } else if (which == VIEW_VALUES) {
            json_array_append(l, val);
        } else {
            json_t *pair = json_array();
            json_array_append_new(pair, json_string_nocheck(k));
            json_array_append(pair, val);
            json_array_append_new(l, pair);
        }
    }
    return l;
}

static int m_view(const struct jcall *c, struct jv *out)
{
    *out = jinja_seq(dict_view(c->v->u.j, c->b->variant), JV_SEQ_VIEW);
    return HS_OK;
}

/* list.count (variant 0) / list.index (1) */
static int m_list_find(const struct jcall *c, struct jv *out)
{
    const struct jv *a0 = jinja_arg(c->a, 0, NULL);
    if (!a0)
        return jinja_err(c->r, c->line, "%s() takes exactly one argument", c->b->name);
    int64_t k = 0, first = -1;
    for (size_t i = 0; i < json_array_size(c->v->u.j); i++) {
        struct jv x = jv_from_json(json_array_get(c->v->u.j, i));
        if (jv_equal(&x, a0)) {
            k++;
            if (first < 0)
                first = (int64_t)i;
        }
        jv_free(&x);
    }
    if (c->b->variant && first < 0)
        return jinja_err(c->r, c->line, "value is not in list");
    *out = jv_int(c->b->variant ? first : k);
    return HS_OK;
}


/* ---- tests ------------------------------------------------------------------------------ */

/* Tests set *out to a bool. */

#define KINDS(k) (1 << (k))
_Static_assert(JV_METHOD < 31, "a set of kinds fits the variant");

/* The type tests look only at the value's kind: the variant is the set of kinds that pass
 * (KINDS(JV_STR) | ..., or ~KINDS(JV_UNDEF) for "defined"). */
static int t_kind(const struct jcall *c, struct jv *out)
{
    *out = jv_bool(((unsigned)c->b->variant >> c->v->kind) & 1u);
    return HS_OK;
}

static int t_number(const struct jcall *c, struct jv *out) { *out = jv_bool(jv_is_number(c->v)); return HS_OK; }
static int t_escaped(const struct jcall *c, struct jv *out) { *out = jv_bool(c->v->kind == JV_STR && c->v->markup); return HS_OK; }

/* true (variant 1) / false (0): the bool itself, not truthiness */
static int t_bool_is(const struct jcall *c, struct jv *out)
{
    *out = jv_bool(c->v->kind == JV_BOOL && c->v->u.b == (bool)c->b->variant);
    return HS_OK;
}

static int t_sequence(const struct jcall *c, struct jv *out)
{
    enum jv_kind k = c->v->kind;
    *out = jv_bool(k == JV_STR || (k == JV_LIST && c->v->seq != JV_SEQ_GEN && c->v->seq != JV_SEQ_VIEW) ||
                   k == JV_DICT || k == JV_UNDEF);
    return HS_OK;
}

enum { PARITY_EVEN, PARITY_ODD, PARITY_DIVISIBLE };

/* odd, even, divisibleby */
static int t_parity(const struct jcall *c, struct jv *out)
{
    const struct jv *v = c->v, *a0 = jinja_arg(c->a, 0, NULL);
    enum jv_kind k = v->kind;
    if (k == JV_UNDEF)
        return jinja_undef_err(c->r, c->line, v);
    if (k != JV_INT && k != JV_BOOL)
        return jinja_err(c->r, c->line, "the '%s' test needs an integer", c->b->name);
    int64_t x = k == JV_INT ? v->u.i : v->u.b;
    if (c->b->variant == PARITY_DIVISIBLE) {
        if (!a0 || a0->kind != JV_INT || a0->u.i == 0)
            return jinja_err(c->r, c->line, "divisibleby needs a non-zero integer argument");
        *out = jv_bool(x % a0->u.i == 0);
    } else {
        *out = jv_bool(((x % 2 + 2) % 2 == 1) == (c->b->variant == PARITY_ODD));
    }
    return HS_OK;
}

/* lower (variant 1) / upper (0): ASCII letters only, as the tests have always looked */
static int t_case(const struct jcall *c, struct jv *out)
{
    const struct jv *v = c->v;
    if (v->kind != JV_STR) {
        *out = jv_bool(false);
        return HS_OK;
    }
    bool lo = c->b->variant, cased = false, ok = true;
    for (size_t i = 0; i < jv_len(v); i++) {
        char ch = jv_str(v)[i];
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'))
            cased = true;
        if (lo ? (ch >= 'A' && ch <= 'Z') : (ch >= 'a' && ch <= 'z'))
            ok = false;
    }
    *out = jv_bool(ok && cased);
    return HS_OK;
}

static int t_sameas(const struct jcall *c, struct jv *out)
{
    const struct jv *v = c->v, *a0 = jinja_arg(c->a, 0, NULL);
    enum jv_kind k = v->kind;
    if (!a0)
        return jinja_err(c->r, c->line, "sameas needs an argument");
    *out = jv_bool(a0->kind == k && (k == JV_NONE || k == JV_UNDEF || (k == JV_BOOL && a0->u.b == v->u.b) ||
                                     ((k == JV_LIST || k == JV_DICT || k == JV_STR || k == JV_NS) && a0->u.j == v->u.j)));
    return HS_OK;
}

/* eq, ne, lt, ..., in and their aliases: the variant is the comparison's enum jop */
static int t_compare(const struct jcall *c, struct jv *out)
{
    const struct jv *a0 = jinja_arg(c->a, 0, NULL);
    if (!a0)
        return jinja_err(c->r, c->line, "the '%s' test needs an argument", c->b->name);
    bool res = false;
    int rc = jinja_compare(c->r, c->line, c->b->variant, c->v, a0, &res);
    *out = jv_bool(res);
    return rc;
}

/* ---- filters ---------------------------------------------------------------------------- */

/* Attribute path lookup for map/selectattr: "a.b" -> item.a.b via getitem. */
static struct jv attr_path(const struct jv *item, const char *path)
{
    struct jv cur = jv_copy(item);
    const char *p = path;
    while (*p) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        struct jv key = jv_strn(p, len), next;
        if (cur.kind == JV_UNDEF)
            next = jv_undef(NULL);
        else
            next = jinja_getitem(&cur, &key);
        jv_free(&key);
        jv_free(&cur);
        cur = next;
        p += len + (dot ? 1 : 0);
        if (!dot)
            break;
    }
    return cur;
}

/* A sub-args view starting at positional index `from`. */
static struct args args_from(const struct args *a, int from)
{
    struct args s = *a;
    s.pos = a->pos + (from < a->n_pos ? from : a->n_pos);
    s.n_pos = a->n_pos > from ? a->n_pos - from : 0;
    return s;
}

enum { SELECT_ATTR = 1, SELECT_REJECT = 2 };

/* select, reject, selectattr, rejectattr (the variant's SELECT_ bits) */
static int filter_select(const struct jcall *c, struct jv *out)
{
    struct rctx *r = c->r;
    const struct args *a = c->a;
    const char *name = c->b->name;
    int line = c->line, first = c->first;
    bool by_attr = c->b->variant & SELECT_ATTR, reject = c->b->variant & SELECT_REJECT;
    int ti = first;
    const char *attr = NULL;
    if (by_attr) {
        const struct jv *at = jinja_arg(a, first, NULL);
        if (!at || at->kind != JV_STR)
            return jinja_err(r, line, "%s needs an attribute name", name);
        attr = jv_str(at);
        ti++;
    }
    const struct jv *test = jinja_arg(a, ti, NULL);
    if (test && test->kind != JV_STR)
        return jinja_err(r, line, "%s: the test name must be a string", name);
    const struct jbuiltin *tb = test ? jinja_builtin_find(JB_TEST, jv_str(test)) : NULL;
    json_t *items;
    int rc = jinja_iter(r, line, c->v, &items);
    if (rc != HS_OK)
        return rc;
    struct args targs = args_from(a, ti + 1);
    targs.n_kw = 0;
    json_t *res = json_array();
    for (size_t i = 0; i < json_array_size(items) && rc == HS_OK; i++) {
        struct jv item = jv_from_json(json_array_get(items, i));
        struct jv x = attr ? attr_path(&item, attr) : jv_copy(&item);
        bool ok;
        if (test)
            rc = jinja_test(r, line, tb, jv_str(test), &x, &targs, &ok);
        else
            ok = jv_truthy(&x);
        if (rc == HS_OK && ok != reject)
            json_array_append(res, json_array_get(items, i));
        jv_free(&x);
        jv_free(&item);
    }
    json_decref(items);
    if (rc == HS_OK)
        *out = jinja_seq(res, JV_SEQ_GEN);
    else
        json_decref(res);
    return rc;
}

static int filter_int(const struct jv *v, const struct jv *def, struct jv *out)
{
    if (v->kind == JV_INT || v->kind == JV_BOOL) {
        *out = jv_int(v->kind == JV_INT ? v->u.i : v->u.b);
        return HS_OK;
    }
    if (v->kind == JV_FLOAT && isfinite(v->u.f) && fabs(v->u.f) < 9.2e18) {
        *out = jv_int((int64_t)v->u.f);
        return HS_OK;
    }
    if (v->kind == JV_STR) {
        char buf[128];
        size_t n = jv_len(v), k = 0;
        const char *s = jv_str(v);
        size_t a = 0, b = n;
        while (a < b && (s[a] == ' ' || (s[a] >= 9 && s[a] <= 13)))
            a++;
        while (b > a && (s[b - 1] == ' ' || (s[b - 1] >= 9 && s[b - 1] <= 13)))
            b--;
        for (size_t i = a; i < b && k + 1 < sizeof(buf); i++)
            if (s[i] != '_')
                buf[k++] = s[i];
        buf[k] = 0;
        if (k > 0 && b - a < sizeof(buf)) {
            char *end;
            long long x = strtoll(buf, &end, 10);
            if (*end == 0 && (buf[0] == '-' || buf[0] == '+' || (buf[0] >= '0' && buf[0] <= '9'))) {
                *out = jv_int(x);
                return HS_OK;
            }
            double d = strtod(buf, &end);
            if (*end == 0 && isfinite(d) && fabs(d) < 9.2e18) {
                *out = jv_int((int64_t)d);
                return HS_OK;
            }
        }
    }
    *out = def ? jv_copy(def) : jv_int(0);
    return HS_OK;
}


/* Sort keys for sort / dictsort / min / max: the item (or its attribute, or the pair's key
 * or value), lower-cased when it is a string and the comparison ignores case. */
struct sort_item {
    struct jv key;
    size_t index;
};

struct sort_ctx {
    struct rctx *r;
    int line;
    int rc;
    bool reverse;
};

static int sort_cmp(struct sort_ctx *sc, const struct sort_item *a, const struct sort_item *b)
{
    if (sc->rc != HS_OK)
        return 0;
    if (jv_equal(&a->key, &b->key))
        return 0;
    int c = jv_compare(&a->key, &b->key);
    if (c == -2) {
        sc->rc = jinja_err(sc->r, sc->line, "'<' not supported between instances of '%s' and '%s'",
                        jv_type_name(&a->key), jv_type_name(&b->key));
        return 0;
    }
    if (c == 2)
        return 0;
    return sc->reverse ? -c : c;
}

/* Stable merge sort (Python's sort is stable; qsort is not). */
static void sort_items(struct sort_ctx *sc, struct sort_item *v, size_t n, struct sort_item *tmp)
{
    if (n < 2)
        return;
    size_t h = n / 2;
    sort_items(sc, v, h, tmp);
    sort_items(sc, v + h, n - h, tmp);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n)
        tmp[k++] = sort_cmp(sc, &v[j], &v[i]) < 0 ? v[j++] : v[i++];
    while (i < h)
        tmp[k++] = v[i++];
    while (j < n)
        tmp[k++] = v[j++];
    memcpy(v, tmp, n * sizeof(*v));
}

static struct jv sort_key(const struct jv *item, const char *attr, int pair_part, bool case_sensitive)
{
    struct jv k;
    if (pair_part >= 0)
        k = jv_from_json(json_array_get(item->u.j, (size_t)pair_part));
    else if (attr)
        k = attr_path(item, attr);
    else
        k = jv_copy(item);
    if (!case_sensitive && k.kind == JV_STR) {
        struct jv l = str_case(&k, 0);
        jv_free(&k);
        k = l;
    }
    return k;
}

/* Sort `items` (a JSON array) into a new array; pair_part 0/1 sorts pairs by key/value. */
static int sort_array(struct rctx *r, int line, json_t *items, const char *attr, int pair_part,
                      bool case_sensitive, bool reverse, json_t **out)
{
    size_t n = json_array_size(items);
    struct sort_item *v = hs_calloc(n + 1, sizeof(*v)), *tmp = hs_calloc(n + 1, sizeof(*tmp));
    for (size_t i = 0; i < n; i++) {
        struct jv it = jv_from_json(json_array_get(items, i));
        v[i].key = sort_key(&it, attr, pair_part, case_sensitive);
        v[i].index = i;
        jv_free(&it);
    }
    struct sort_ctx sc = {r, line, HS_OK, reverse};
    sort_items(&sc, v, n, tmp);
    *out = NULL;
    if (sc.rc == HS_OK) {
        *out = json_array();
        for (size_t i = 0; i < n; i++)
            json_array_append(*out, json_array_get(items, v[i].index));
    }
    for (size_t i = 0; i < n; i++)
        jv_free(&v[i].key);
    hs_free(v);
    hs_free(tmp);
    return sc.rc;
}

/* Jinja's indent filter: every line but the first (and blank ones unless `blank`) gets
 * the indentation; lines split as Python's str.splitlines does. */
static int filter_indent(const struct jcall *c, struct jv *out)
{
    struct rctx *r = c->r;
    const struct jv *v = c->v;
    const struct args *a = c->a;
    int line = c->line, f = c->first;
    const struct jv *w = jinja_arg(a, f, "width"), *first = jinja_arg(a, f + 1, "first");
    const struct jv *blank = jinja_arg(a, f + 2, "blank");
    struct strbuf ind, sb;
    strbuf_init(&ind);
    strbuf_init(&sb);
    if (w && w->kind == JV_STR) {
        strbuf_append(&ind, jv_str(w), jv_len(w));
    } else {
        int64_t n = w ? (w->kind == JV_INT ? w->u.i : -1) : 4;
        if (n < 0 || n > 1024) {
            strbuf_free(&ind);
            return jinja_err(r, line, "indent: bad width");
        }
        for (int64_t i = 0; i < n; i++)
            strbuf_putc(&ind, ' ');
    }
    struct jv s = jinja_to_str(v);
    const char *p = jv_str(&s);
    size_t n = jv_len(&s), i = 0, n_lines = 0;
    if (first && jv_truthy(first))
        strbuf_append(&sb, ind.buf ? ind.buf : "", ind.len);
    /* (s + "\n").splitlines(): a line after every boundary, even an empty last one */
    for (bool more = true; more;) {
        size_t st = i, end = n;
        more = false;
        while (i < n) {
            size_t j = i;
            uint32_t cp = jinja_utf8_next(p, n, &j);
            if (cp == '\n' || cp == '\r' || cp == 0x0B || cp == 0x0C || (cp >= 0x1C && cp <= 0x1E) ||
                cp == 0x85 || cp == 0x2028 || cp == 0x2029) {
                end = i;
                i = j;
                if (cp == '\r' && i < n && p[i] == '\n')
                    i++;
                more = true;
                break;
            }
            i = j;
        }
        if (!more)
            end = n;
        if (n_lines > 0) {
            strbuf_putc(&sb, '\n');
            if (end > st || (blank && jv_truthy(blank)))
                strbuf_append(&sb, ind.buf ? ind.buf : "", ind.len);
        }
        strbuf_append(&sb, p + st, end - st);
        n_lines++;
    }
    jv_free(&s);
    strbuf_free(&ind);
    *out = jv_str_take(&sb);
    return HS_OK;
}


static int f_dictsort(const struct jcall *c, struct jv *out)
{
    struct rctx *r = c->r;
    const struct jv *v = c->v;
    int f = c->first, line = c->line;
    const struct jv *cs = jinja_arg(c->a, f, "case_sensitive"), *by = jinja_arg(c->a, f + 1, "by");
    const struct jv *rev = jinja_arg(c->a, f + 2, "reverse");
    if (v->kind != JV_DICT)
        return jinja_err(r, line, "dictsort needs a mapping");
    int part = 0;
    if (by && by->kind == JV_STR && !strcmp(jv_str(by), "value"))
        part = 1;
    else if (by && !(by->kind == JV_STR && !strcmp(jv_str(by), "key")))
        return jinja_err(r, line, "You can only sort by either \"key\" or \"value\"");
    json_t *pairs = dict_view(v->u.j, VIEW_ITEMS), *sorted = NULL;
    int rc = sort_array(r, line, pairs, NULL, part, cs && jv_truthy(cs), rev && jv_truthy(rev), &sorted);
    json_decref(pairs);
    if (rc == HS_OK)
        *out = jinja_seq(sorted, JV_SEQ_LIST);
    return rc;
}

static int f_sort(const struct jcall *c, struct jv *out)
{
    int f = c->first;
    const struct jv *rev = jinja_arg(c->a, f, "reverse"), *cs = jinja_arg(c->a, f + 1, "case_sensitive");
    const struct jv *attr = jinja_arg(c->a, f + 2, "attribute");
    json_t *items = NULL, *sorted = NULL;
    int rc;
    if ((rc = jinja_iter(c->r, c->line, c->v, &items)) != HS_OK)
        return rc;
    rc = sort_array(c->r, c->line, items, attr && attr->kind == JV_STR ? jv_str(attr) : NULL, -1,
                    cs && jv_truthy(cs), rev && jv_truthy(rev), &sorted);
    if (rc == HS_OK)
        *out = jinja_seq(sorted, JV_SEQ_LIST);
    json_decref(items);
    return rc;
}

/* min (variant 0) / max (1) */
static int f_minmax(const struct jcall *c, struct jv *out)
{
    const struct jv *cs = jinja_arg(c->a, c->first, "case_sensitive"), *attr = jinja_arg(c->a, c->first + 1, "attribute");
    json_t *items = NULL, *sorted = NULL;
    int rc;
    if ((rc = jinja_iter(c->r, c->line, c->v, &items)) != HS_OK)
        return rc;
    rc = sort_array(c->r, c->line, items, attr && attr->kind == JV_STR ? jv_str(attr) : NULL, -1,
                    cs && jv_truthy(cs), c->b->variant, &sorted);
    if (rc == HS_OK) {
        /* Python's min/max keep the first of equal items, as a stable sort does */
        *out = json_array_size(sorted) ? jv_from_json(json_array_get(sorted, 0)) : jv_undef(NULL);
        json_decref(sorted);
    }
    json_decref(items);
    return rc;
}

static int f_sum(const struct jcall *c, struct jv *out)
{
    const struct jv *attr = jinja_arg(c->a, c->first, "attribute"), *start = jinja_arg(c->a, c->first + 1, "start");
    json_t *items = NULL;
    int rc;
    if ((rc = jinja_iter(c->r, c->line, c->v, &items)) != HS_OK)
        return rc;
    if (start && start->kind == JV_STR) {
        json_decref(items);
        return jinja_err(c->r, c->line, "sum() can't sum strings [use ''.join(seq) instead]");
    }
    struct jv acc = start ? jv_copy(start) : jv_int(0);
    for (size_t i = 0; i < json_array_size(items) && rc == HS_OK; i++) {
        struct jv it = jv_from_json(json_array_get(items, i)), x, nx;
        x = attr && attr->kind == JV_STR ? attr_path(&it, jv_str(attr)) : jv_copy(&it);
        if ((rc = jinja_binop(c->r, c->line, JOP_ADD, &acc, &x, &nx)) == HS_OK) {
            jv_free(&acc);
            acc = nx;
        }
        jv_free(&x);
        jv_free(&it);
    }
    if (rc == HS_OK)
        *out = acc;
    else
        jv_free(&acc);
    json_decref(items);
    return rc;
}


/* Filters: c->v is the filtered value; positional arguments start at c->first (map passes
 * its own arguments on, after the filter's name). */

static int f_default(const struct jcall *c, struct jv *out)
{
    const struct jv *v = c->v;
    const struct jv *def = jinja_arg(c->a, c->first, "default_value"), *boolean = jinja_arg(c->a, c->first + 1, "boolean");
    bool use_def = v->kind == JV_UNDEF || (boolean && jv_truthy(boolean) && !jv_truthy(v));
    *out = use_def ? (def ? jv_copy(def) : jv_strn("", 0)) : jv_copy(v);
    return HS_OK;
}

static int f_tojson(const struct jcall *c, struct jv *out)
{
    struct rctx *r = c->r;
    const struct jv *v = c->v;
    int f = c->first, line = c->line;
    const struct jv *ea = jinja_arg(c->a, f, "ensure_ascii"), *ind = jinja_arg(c->a, f + 1, "indent");
    const struct jv *sep = jinja_arg(c->a, f + 2, "separators"), *sk = jinja_arg(c->a, f + 3, "sort_keys");
    int indent = -1;
    if (ind && ind->kind != JV_NONE) {
        if (ind->kind != JV_INT)
            return jinja_err(r, line, "tojson: indent must be an integer");
        indent = ind->u.i < 0 ? 0 : ind->u.i > 64 ? 64 : (int)ind->u.i;
    }
    const char *item_sep = NULL, *key_sep = NULL;
    if (sep && sep->kind != JV_NONE) {
        if (sep->kind != JV_LIST || json_array_size(sep->u.j) != 2 ||
            !json_is_string(json_array_get(sep->u.j, 0)) || !json_is_string(json_array_get(sep->u.j, 1)))
            return jinja_err(r, line, "tojson: separators must be a pair of strings");
        item_sep = json_string_value(json_array_get(sep->u.j, 0));
        key_sep = json_string_value(json_array_get(sep->u.j, 1));
    }
    json_t *j;
    if (v->kind == JV_UNDEF || (v->kind == JV_LIST && v->seq != JV_SEQ_LIST) || !(j = jv_to_json(v)))
        return jinja_err(r, line, "Object of type %s is not JSON serializable", jv_type_name(v));
    struct strbuf sb;
    strbuf_init(&sb);
    int drc = jinja_dumps(j, indent, ea && jv_truthy(ea), sk && jv_truthy(sk), item_sep, key_sep, &sb);
    json_decref(j);
    if (drc < 0) {
        strbuf_free(&sb);
        return jinja_err(r, line, "Object of type Undefined is not JSON serializable");
    }
    *out = jv_str_take(&sb);
    return HS_OK;
}

static int f_length(const struct jcall *c, struct jv *out)
{
    int64_t n = 0;
    int rc;
    if ((rc = jinja_len(c->r, c->line, c->v, &n)) != HS_OK)
        return rc;
    *out = jv_int(n);
    return HS_OK;
}

static int f_string(const struct jcall *c, struct jv *out)
{
    *out = jinja_to_str(c->v);
    return HS_OK;
}

static int f_safe(const struct jcall *c, struct jv *out)
{
    *out = jinja_to_str(c->v);
    out->markup = true;
    return HS_OK;
}

static int f_escape(const struct jcall *c, struct jv *out)
{
    const struct jv *v = c->v;
    if (v->kind == JV_STR && v->markup) {
        *out = jv_copy(v);
        return HS_OK;
    }
    struct jv s = jinja_to_str(v);
    struct strbuf sb;
    strbuf_init(&sb);
    jinja_html_escape(jv_str(&s), jv_len(&s), &sb);
    jv_free(&s);
    *out = jv_str_take(&sb);
    out->markup = true;
    return HS_OK;
}

static int f_items(const struct jcall *c, struct jv *out)
{
    if (c->v->kind == JV_UNDEF) {
        *out = jinja_seq(json_array(), JV_SEQ_GEN);
        return HS_OK;
    }
    if (c->v->kind != JV_DICT)
        return jinja_err(c->r, c->line, "can only get item pairs from a mapping");
    *out = jinja_seq(dict_view(c->v->u.j, VIEW_ITEMS), JV_SEQ_GEN);
    return HS_OK;
}

static int f_trim(const struct jcall *c, struct jv *out)
{
    const struct jv *a0 = jinja_arg(c->a, c->first, NULL);
    struct jv s = jinja_to_str(c->v);
    if (a0 && a0->kind != JV_NONE && a0->kind != JV_STR) {
        jv_free(&s);
        return jinja_err(c->r, c->line, "trim: chars must be a string");
    }
    *out = str_strip(&s, a0, 3);
    jv_free(&s);
    return HS_OK;
}

/* lower, upper, capitalize, title: the variant is str_case's mode */
static int f_case(const struct jcall *c, struct jv *out)
{
    struct jv s = jinja_to_str(c->v);
    *out = str_case(&s, c->b->variant);
    jv_free(&s);
    return HS_OK;
}

static int f_replace(const struct jcall *c, struct jv *out)
{
    int f = c->first, rc = HS_OK;
    const struct jv *old = jinja_arg(c->a, f, "old"), *nw = jinja_arg(c->a, f + 1, "new"), *cnt = jinja_arg(c->a, f + 2, "count");
    struct jv s = jinja_to_str(c->v);
    struct jv os = old ? jinja_to_str(old) : jv_strn("", 0), ns = nw ? jinja_to_str(nw) : jv_strn("", 0);
    if (!old || !nw)
        rc = jinja_err(c->r, c->line, "replace needs two arguments");
    else
        *out = str_replace(&s, &os, &ns, cnt && cnt->kind == JV_INT ? cnt->u.i : -1);
    jv_free(&os);
    jv_free(&ns);
    jv_free(&s);
    return rc;
}

static int f_join(const struct jcall *c, struct jv *out)
{
    const struct jv *sep = jinja_arg(c->a, c->first, "d"), *attr = jinja_arg(c->a, c->first + 1, "attribute");
    json_t *items;
    int rc;
    if ((rc = jinja_iter(c->r, c->line, c->v, &items)) != HS_OK)
        return rc;
    struct strbuf sb;
    strbuf_init(&sb);
    for (size_t i = 0; i < json_array_size(items); i++) {
        if (i && sep)
            jv_str_append(sep, &sb);
        struct jv it = jv_from_json(json_array_get(items, i));
        if (attr && attr->kind == JV_STR) {
            struct jv x = attr_path(&it, jv_str(attr));
            jv_free(&it);
            it = x;
        }
        jv_str_append(&it, &sb);
        jv_free(&it);
    }
    json_decref(items);
    *out = jv_str_take(&sb);
    return HS_OK;
}

/* first (variant 0) / last (1); last reverses, so it refuses what Python cannot reverse */
static int f_end(const struct jcall *c, struct jv *out)
{
    const struct jv *v = c->v;
    const bool last = c->b->variant;
    json_t *items;
    int rc;
    if (last && v->kind == JV_UNDEF)
        return jinja_undef_err(c->r, c->line, v);
    if (last && v->kind == JV_LIST && v->seq == JV_SEQ_GEN)
        return jinja_err(c->r, c->line, "'generator' object is not reversible");
    if ((rc = jinja_iter(c->r, c->line, v, &items)) != HS_OK)
        return rc;
    size_t n = json_array_size(items);
    *out = n ? jv_from_json(json_array_get(items, last ? n - 1 : 0)) : jv_undef(NULL);
    json_decref(items);
    return HS_OK;
}

static int f_list(const struct jcall *c, struct jv *out)
{
    json_t *items;
    int rc;
    if ((rc = jinja_iter(c->r, c->line, c->v, &items)) != HS_OK)
        return rc;
    json_t *l = json_array();
    json_array_extend(l, items);
    *out = jv_from_json(l);
    json_decref(l);
    json_decref(items);
    return HS_OK;
}

static int f_reverse(const struct jcall *c, struct jv *out)
{
    const struct jv *v = c->v;
    if (v->kind == JV_STR) {
        const char *s = jv_str(v);
        size_t n = jv_len(v);
        struct strbuf sb;
        strbuf_init(&sb);
        /* characters as jinja_utf8_next steps them, last first */
        size_t *starts = hs_malloc((n + 1) * sizeof(*starts)), k = 0;
        for (size_t i = 0; i < n;) {
            starts[k++] = i;
            jinja_utf8_next(s, n, &i);
        }
        for (size_t end = n; k > 0; k--) {
            strbuf_append(&sb, s + starts[k - 1], end - starts[k - 1]);
            end = starts[k - 1];
        }
        hs_free(starts);
        *out = jv_str_take(&sb);
        return HS_OK;
    }
    json_t *items;
    int rc;
    if ((rc = jinja_iter(c->r, c->line, v, &items)) != HS_OK)
        return rc;
    /* reversed() of a list is an iterator; a generator is listed first */
    json_t *l = json_array();
    for (size_t i = json_array_size(items); i > 0; i--)
        json_array_append(l, json_array_get(items, i - 1));
    bool iter = !(v->kind == JV_LIST && v->seq == JV_SEQ_GEN);
    *out = jinja_seq(l, iter ? JV_SEQ_GEN : JV_SEQ_LIST);
    json_decref(items);
    return HS_OK;
}

/* unique: first occurrence wins; strings compare case-insensitively */
static int f_unique(const struct jcall *c, struct jv *out)
{
    json_t *items;
    int rc;
    if ((rc = jinja_iter(c->r, c->line, c->v, &items)) != HS_OK)
        return rc;
    size_t n = json_array_size(items);
    json_t *l = json_array();
    for (size_t i = 0; i < n; i++) {
        struct jv x = jv_from_json(json_array_get(items, i));
        struct jv xl = x.kind == JV_STR ? str_case(&x, 0) : jv_copy(&x);
        bool dup = false;
        for (size_t k = 0; k < json_array_size(l) && !dup; k++) {
            struct jv y = jv_from_json(json_array_get(l, k));
            struct jv yl = y.kind == JV_STR ? str_case(&y, 0) : jv_copy(&y);
            dup = jv_equal(&xl, &yl);
            jv_free(&y);
            jv_free(&yl);
        }
        if (!dup)
            json_array_append(l, json_array_get(items, i));
        jv_free(&x);
        jv_free(&xl);
    }
    *out = jinja_seq(l, JV_SEQ_GEN);
    json_decref(items);
    return HS_OK;
}

static int f_int(const struct jcall *c, struct jv *out)
{
    return filter_int(c->v, jinja_arg(c->a, c->first, "default"), out);
}

static int f_float(const struct jcall *c, struct jv *out)
{
    const struct jv *v = c->v, *def = jinja_arg(c->a, c->first, "default");
    if (jv_is_number(v)) {
        *out = jv_float(jv_as_double(v));
    } else if (v->kind == JV_STR) {
        char *end;
        struct jv t = str_strip(v, NULL, 3);
        char *buf = hs_strndup(jv_str(&t), jv_len(&t));
        double d = strtod(buf, &end);
        bool ok = *buf && *end == 0 && !strchr(buf, 'x') && !strchr(buf, 'X');
        hs_free(buf);
        jv_free(&t);
        *out = ok ? jv_float(d) : def ? jv_copy(def) : jv_float(0.0);
    } else {
        *out = def ? jv_copy(def) : jv_float(0.0);
    }
    return HS_OK;
}

static int f_abs(const struct jcall *c, struct jv *out)
{
    const struct jv *v = c->v;
    if (v->kind == JV_INT || v->kind == JV_BOOL) {
        int64_t x = v->kind == JV_INT ? v->u.i : v->u.b;
        if (x == INT64_MIN)
            return jinja_err(c->r, c->line, "integer overflow");
        *out = jv_int(x < 0 ? -x : x);
    } else if (v->kind == JV_FLOAT) {
        *out = jv_float(fabs(v->u.f));
    } else {
        return jinja_err(c->r, c->line, "bad operand type for abs(): '%s'", jv_type_name(v));
    }
    return HS_OK;
}

static int f_map(const struct jcall *c, struct jv *out)
{
    struct rctx *r = c->r;
    int line = c->line, f = c->first, rc = HS_OK;
    const struct jv *a0 = jinja_arg(c->a, f, NULL);
    const struct jv *attr = jinja_arg(c->a, -1, "attribute"), *def = jinja_arg(c->a, -1, "default");
    json_t *items;
    if (!attr && (!a0 || a0->kind != JV_STR))
        return jinja_err(r, line, "map needs a filter name or attribute=");
    if ((rc = jinja_iter(r, line, c->v, &items)) != HS_OK)
        return rc;
    json_t *res = json_array();
    for (size_t i = 0; i < json_array_size(items) && rc == HS_OK; i++) {
        struct jv it = jv_from_json(json_array_get(items, i)), x;
        if (attr) {
            x = attr_path(&it, attr->kind == JV_STR ? jv_str(attr) : "");
            if (x.kind == JV_UNDEF && def) {
                jv_free(&x);
                x = jv_copy(def);
            }
        } else {
            struct args sub = args_from(c->a, f + 1);
            rc = jinja_filter(r, line, jinja_builtin_find(JB_FILTER, jv_str(a0)), jv_str(a0), &it, &sub, 0, &x);
        }
        if (rc == HS_OK) {
            json_t *j;
            rc = jinja_to_json(r, line, &x, &j);
            if (rc == HS_OK)
                json_array_append_new(res, j);
            jv_free(&x);
        }
        jv_free(&it);
    }
    json_decref(items);
    if (rc == HS_OK)
        *out = jinja_seq(res, JV_SEQ_GEN);
    else
        json_decref(res);
    return rc;
}


/* ---- global functions ------------------------------------------------------------------- */

static int g_range(const struct jcall *c, struct jv *out)
{
    const struct args *a = c->a;
    int64_t p[3] = {0, 0, 1};
    if (a->n_pos < 1 || a->n_pos > 3 || a->n_kw)
        return jinja_err(c->r, c->line, "range expected 1 to 3 integer arguments");
    for (int i = 0; i < a->n_pos; i++)
        if (!jinja_index(&a->pos[i], &p[a->n_pos == 1 ? 1 : i]))
            return jinja_err(c->r, c->line, "range: '%s' object cannot be interpreted as an integer", jv_type_name(&a->pos[i]));
    if (p[2] == 0)
        return jinja_err(c->r, c->line, "range() arg 3 must not be zero");
    json_t *l = json_array();
    for (int64_t x = p[0]; p[2] > 0 ? x < p[1] : x > p[1]; x += p[2]) {
        if (json_array_size(l) >= MAX_RANGE) {
            json_decref(l);
            return jinja_err(c->r, c->line, "range too large");
        }
        json_array_append_new(l, json_integer(x));
    }
    *out = jinja_seq(l, JV_SEQ_RANGE);
    return HS_OK;
}

/* namespace (variant 1) / dict (0): a mapping from one mapping argument and keywords */
static int g_mapping(const struct jcall *c, struct jv *out)
{
    const struct args *a = c->a;
    bool ns = c->b->variant;
    json_t *o = json_object();
    int rc = HS_OK;
    if (a->n_pos > 1 || (a->n_pos == 1 && a->pos[0].kind != JV_DICT)) {
        json_decref(o);
        return jinja_err(c->r, c->line, "%s() takes at most one mapping argument", c->b->name);
    }
    if (a->n_pos == 1)
        json_object_update(o, a->pos[0].u.j);
    for (int k = 0; k < a->n_kw && rc == HS_OK; k++) {
        if (a->kw[k].kind == JV_UNDEF && ns)
            continue; /* reads back as undefined either way */
        json_t *j;
        rc = jinja_to_json(c->r, c->line, &a->kw[k], &j);
        if (rc == HS_OK)
            json_object_set_new(o, a->kw_names[k], j);
    }
    if (rc != HS_OK) {
        json_decref(o);
        return rc;
    }
    out->kind = ns ? JV_NS : JV_DICT;
    out->markup = out->tuple = false;
    out->u.j = o;
    return HS_OK;
}

static int g_raise(const struct jcall *c, struct jv *out)
{
    struct strbuf sb;
    strbuf_init(&sb);
    if (c->a->n_pos > 0)
        jv_str_append(&c->a->pos[0], &sb);
    int rc = jinja_err(c->r, c->line, "raise_exception: %s", sb.buf ? sb.buf : "");
    strbuf_free(&sb);
    return rc;
}

static int g_strftime(const struct jcall *c, struct jv *out)
{
    const struct jv *fmt = jinja_arg(c->a, 0, "format");
    if (!fmt || fmt->kind != JV_STR)
        return jinja_err(c->r, c->line, "strftime_now needs a format string");
    time_t now = time(NULL);
    struct tm tm;
    localtime_r(&now, &tm);
    char buf[512];
    size_t n = strftime(buf, sizeof(buf), jv_str(fmt), &tm);
    *out = jv_strn(buf, n);
    return HS_OK;
}

/* ---- the table -------------------------------------------------------------------------- */

/* Every builtin a template can name. The compiler refuses filter and test names that are
 * not here (parse.c) and the evaluator calls exactly the row it found, so the set that
 * compiles and the set that runs cannot drift apart. A name may appear once per kind. */
static const struct jbuiltin BUILTINS[] = {
    /* str methods */
    {"strip", JB_STR_METHOD, 3, m_strip},
    {"lstrip", JB_STR_METHOD, 1, m_strip},
    {"rstrip", JB_STR_METHOD, 2, m_strip},
    {"split", JB_STR_METHOD, 0, m_split},
    {"startswith", JB_STR_METHOD, 1, m_affix},
    {"endswith", JB_STR_METHOD, 0, m_affix},
    {"replace", JB_STR_METHOD, 0, m_replace},
    {"upper", JB_STR_METHOD, 1, m_case},
    {"lower", JB_STR_METHOD, 0, m_case},
    {"title", JB_STR_METHOD, 3, m_case},
    {"capitalize", JB_STR_METHOD, 2, m_case},
    {"count", JB_STR_METHOD, FIND_COUNT, m_find},
    {"find", JB_STR_METHOD, FIND_FIRST, m_find},
    {"rfind", JB_STR_METHOD, FIND_LAST, m_find},
    {"join", JB_STR_METHOD, 0, m_join},
    {"isspace", JB_STR_METHOD, 1, m_is},
    {"isdigit", JB_STR_METHOD, 0, m_is},
    {"format", JB_STR_METHOD, 0, m_format},
    /* dict methods */
    {"get", JB_DICT_METHOD, 0, m_get},
    {"items", JB_DICT_METHOD, VIEW_ITEMS, m_view},
    {"keys", JB_DICT_METHOD, VIEW_KEYS, m_view},
    {"values", JB_DICT_METHOD, VIEW_VALUES, m_view},
    /* list methods */
    {"count", JB_LIST_METHOD, 0, m_list_find},
    {"index", JB_LIST_METHOD, 1, m_list_find},
    /* tests */
    {"defined", JB_TEST, ~KINDS(JV_UNDEF), t_kind},
    {"undefined", JB_TEST, KINDS(JV_UNDEF), t_kind},
    {"none", JB_TEST, KINDS(JV_NONE), t_kind},
    {"string", JB_TEST, KINDS(JV_STR), t_kind},
    {"mapping", JB_TEST, KINDS(JV_DICT), t_kind},
    {"iterable", JB_TEST, KINDS(JV_STR) | KINDS(JV_LIST) | KINDS(JV_DICT) | KINDS(JV_UNDEF) | KINDS(JV_LOOP), t_kind},
    {"sequence", JB_TEST, 0, t_sequence},
    {"number", JB_TEST, 0, t_number},
    {"integer", JB_TEST, KINDS(JV_INT), t_kind},
    {"float", JB_TEST, KINDS(JV_FLOAT), t_kind},
    {"boolean", JB_TEST, KINDS(JV_BOOL), t_kind},
    {"true", JB_TEST, 1, t_bool_is},
    {"false", JB_TEST, 0, t_bool_is},
    {"callable", JB_TEST, KINDS(JV_MACRO) | KINDS(JV_FUNC) | KINDS(JV_METHOD), t_kind},
    {"odd", JB_TEST, PARITY_ODD, t_parity},
    {"even", JB_TEST, PARITY_EVEN, t_parity},
    {"divisibleby", JB_TEST, PARITY_DIVISIBLE, t_parity},
    {"eq", JB_TEST, JOP_EQ, t_compare},
    {"equalto", JB_TEST, JOP_EQ, t_compare},
    {"==", JB_TEST, JOP_EQ, t_compare},
    {"ne", JB_TEST, JOP_NE, t_compare},
    {"!=", JB_TEST, JOP_NE, t_compare},
    {"lt", JB_TEST, JOP_LT, t_compare},
    {"lessthan", JB_TEST, JOP_LT, t_compare},
    {"<", JB_TEST, JOP_LT, t_compare},
    {"le", JB_TEST, JOP_LE, t_compare},
    {"<=", JB_TEST, JOP_LE, t_compare},
    {"gt", JB_TEST, JOP_GT, t_compare},
    {"greaterthan", JB_TEST, JOP_GT, t_compare},
    {">", JB_TEST, JOP_GT, t_compare},
    {"ge", JB_TEST, JOP_GE, t_compare},
    {">=", JB_TEST, JOP_GE, t_compare},
    {"in", JB_TEST, JOP_IN, t_compare},
    {"lower", JB_TEST, 1, t_case},
    {"upper", JB_TEST, 0, t_case},
    {"sameas", JB_TEST, 0, t_sameas},
    {"escaped", JB_TEST, 0, t_escaped},
    /* filters */
    {"tojson", JB_FILTER, 0, f_tojson},
    {"trim", JB_FILTER, 0, f_trim},
    {"length", JB_FILTER, 0, f_length},
    {"count", JB_FILTER, 0, f_length},
    {"string", JB_FILTER, 0, f_string},
    {"items", JB_FILTER, 0, f_items},
    {"default", JB_FILTER, 0, f_default},
    {"d", JB_FILTER, 0, f_default},
    {"join", JB_FILTER, 0, f_join},
    {"lower", JB_FILTER, 0, f_case},
    {"upper", JB_FILTER, 1, f_case},
    {"capitalize", JB_FILTER, 2, f_case},
    {"title", JB_FILTER, 4, f_case},
    {"first", JB_FILTER, 0, f_end},
    {"last", JB_FILTER, 1, f_end},
    {"list", JB_FILTER, 0, f_list},
    {"replace", JB_FILTER, 0, f_replace},
    {"int", JB_FILTER, 0, f_int},
    {"float", JB_FILTER, 0, f_float},
    {"safe", JB_FILTER, 0, f_safe},
    {"e", JB_FILTER, 0, f_escape},
    {"escape", JB_FILTER, 0, f_escape},
    {"map", JB_FILTER, 0, f_map},
    {"selectattr", JB_FILTER, SELECT_ATTR, filter_select},
    {"rejectattr", JB_FILTER, SELECT_ATTR | SELECT_REJECT, filter_select},
    {"select", JB_FILTER, 0, filter_select},
    {"reject", JB_FILTER, SELECT_REJECT, filter_select},
    {"reverse", JB_FILTER, 0, f_reverse},
    {"unique", JB_FILTER, 0, f_unique},
    {"abs", JB_FILTER, 0, f_abs},
    {"sort", JB_FILTER, 0, f_sort},
    {"dictsort", JB_FILTER, 0, f_dictsort},
    {"min", JB_FILTER, 0, f_minmax},
    {"max", JB_FILTER, 1, f_minmax},
    {"sum", JB_FILTER, 0, f_sum},
    {"indent", JB_FILTER, 0, filter_indent},
    /* global functions */
    {"range", JB_FUNC, 0, g_range},
    {"namespace", JB_FUNC, 1, g_mapping},
    {"dict", JB_FUNC, 0, g_mapping},
    {"raise_exception", JB_FUNC, 0, g_raise},
    {"strftime_now", JB_FUNC, 0, g_strftime},
};

static int builtin_index(enum jb_kind kind, const char *name)
{
    for (size_t k = 0; k < HS_ARRAY_LEN(BUILTINS); k++)
        if (BUILTINS[k].kind == kind && !strcmp(BUILTINS[k].name, name))
            return (int)k;
    return -1;
}

const struct jbuiltin *jinja_builtin_find(enum jb_kind kind, const char *name)
{
    int k = builtin_index(kind, name);
    return k < 0 ? NULL : &BUILTINS[k];
}

int jinja_method_find(enum jv_kind kind, const char *name)
{
    switch (kind) {
    case JV_STR: return builtin_index(JB_STR_METHOD, name);
    case JV_DICT: return builtin_index(JB_DICT_METHOD, name);
    case JV_LIST: return builtin_index(JB_LIST_METHOD, name);
    default: return -1;
    }
}

int jinja_func_find(const char *name)
{
    return builtin_index(JB_FUNC, name);
}

struct jv jinja_method_value(const struct jv *recv, int id)
{
    struct jv m = {0};
    m.kind = JV_METHOD;
    m.id = id;
    m.u.j = json_incref(recv->u.j);
    return m;
}

int jinja_call_method(struct rctx *r, int line, const struct jv *m, const struct args *a, struct jv *out)
{
    struct jv self = jv_from_json(m->u.j);
    struct jcall c = {r, line, &BUILTINS[m->id], &self, a, 0};
    int rc = c.b->fn(&c, out);
    jv_free(&self);
    return rc;
}

int jinja_call_func(struct rctx *r, int line, int id, const struct args *a, struct jv *out)
{
    struct jcall c = {r, line, &BUILTINS[id], NULL, a, 0};
    return c.b->fn(&c, out);
}

int jinja_filter(struct rctx *r, int line, const struct jbuiltin *b, const char *name, const struct jv *v,
                 const struct args *a, int first, struct jv *out)
{
    if (!b)
        return jinja_err(r, line, "no filter named '%s'", name);
    struct jcall c = {r, line, b, v, a, first};
    return b->fn(&c, out);
}

int jinja_test(struct rctx *r, int line, const struct jbuiltin *b, const char *name, const struct jv *v,
               const struct args *a, bool *out)
{
    if (!b)
        return jinja_err(r, line, "no test named '%s'", name);
    struct jcall c = {r, line, b, v, a, 0};
    struct jv res = jv_bool(false);
    int rc = b->fn(&c, &res);
    *out = res.u.b;
    return rc;
}
