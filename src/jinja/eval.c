/*
 * eval.c — rendering, the last stage: scopes, expression evaluation with Jinja2's
 * attribute and Undefined rules, Python arithmetic and comparisons, calls, macros and
 * statements. The builtins (methods, tests, filters, globals) are in builtins.c; jinja.h
 * has the design note.
 *
 * Invariants:
 *   1. A render reads the tree and the context and never writes either; all it owns is
 *      its scopes and values, freed before it returns.
 *   2. The output is appended only when the whole render succeeds: a failed render leaves
 *      `out` as it was.
 *   3. Recursion is bounded (MAX_EVAL_DEPTH, MAX_CALL_DEPTH): deep expressions and
 *      recursive macros end in an error naming the line, never a crash.
 */
#include "jinja/jinja_int.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { CTL_BREAK = 1, CTL_CONTINUE = 2 };
enum { MAX_CALL_DEPTH = 64, MAX_EVAL_DEPTH = 400 };

struct scope {
    struct scope *parent;
    const char **names;
    struct jv *vals;
    int n, cap;
};

int jinja_err(struct rctx *r, int line, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return hs_err_set(r->err, HS_ERR_INVALID, "template line %d: %s", line, msg);
}

int jinja_undef_err(struct rctx *r, int line, const struct jv *v)
{
    if (v->u.name)
        return jinja_err(r, line, "'%s' is undefined", v->u.name);
    return jinja_err(r, line, "operation on an undefined value");
}

/* ---- scopes ----------------------------------------------------------------------------- */

static void scope_set(struct scope *s, const char *name, struct jv v)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->names[i], name)) {
            jv_free(&s->vals[i]);
            s->vals[i] = v;
            return;
        }
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 8;
        s->names = hs_realloc(s->names, (size_t)s->cap * sizeof(*s->names));
        s->vals = hs_realloc(s->vals, (size_t)s->cap * sizeof(*s->vals));
    }
    s->names[s->n] = name;
    s->vals[s->n++] = v;
}

static void scope_free(struct scope *s)
{
    for (int i = 0; i < s->n; i++)
        jv_free(&s->vals[i]);
    hs_free(s->names);
    hs_free(s->vals);
}

static bool lookup_name(struct rctx *r, struct scope *s, const char *name, struct jv *out)
{
    for (; s; s = s->parent)
        for (int i = 0; i < s->n; i++)
            if (!strcmp(s->names[i], name)) {
                *out = jv_copy(&s->vals[i]);
                return true;
            }
    json_t *j = r->ctx ? json_object_get(r->ctx, name) : NULL;
    if (j) {
        *out = jv_from_json(j);
        return true;
    }
    int id = jinja_func_find(name);
    if (id >= 0) {
        struct jv f = {0};
        f.kind = JV_FUNC;
        f.id = id;
        *out = f;
        return true;
    }
    return false;
}

/* ---- attribute and item access ---------------------------------------------------------- */

static struct jv loop_attr(const struct jloop *lp, const char *name)
{
    size_t n = json_array_size(lp->items), i = lp->index;
    if (!strcmp(name, "index0")) return jv_int((int64_t)i);
    if (!strcmp(name, "index")) return jv_int((int64_t)i + 1);
    if (!strcmp(name, "revindex0")) return jv_int((int64_t)(n - i - 1));
    if (!strcmp(name, "revindex")) return jv_int((int64_t)(n - i));
    if (!strcmp(name, "first")) return jv_bool(i == 0);
    if (!strcmp(name, "last")) return jv_bool(i + 1 == n);
    if (!strcmp(name, "length")) return jv_int((int64_t)n);
    if (!strcmp(name, "depth")) return jv_int(lp->depth);
    if (!strcmp(name, "depth0")) return jv_int(lp->depth - 1);
    if (!strcmp(name, "previtem"))
        return i > 0 ? jv_from_json(json_array_get(lp->items, i - 1)) : jv_undef("previtem");
    if (!strcmp(name, "nextitem"))
        return i + 1 < n ? jv_from_json(json_array_get(lp->items, i + 1)) : jv_undef("nextitem");
    return jv_undef(name);
}

/* obj.name (Jinja's getattr: Python attribute first, then item). obj is not undefined. */
struct jv jinja_getattr(const struct jv *obj, const char *name)
{
    if (name[0] == '_')
        return jv_undef(name); /* the sandbox hides private attributes */
    int m = obj->kind == JV_DICT || obj->kind == JV_STR || obj->kind == JV_LIST
                ? jinja_method_find(obj->kind, name) : -1;
    if (m >= 0)
        return jinja_method_value(obj, m);
    switch (obj->kind) {
    case JV_DICT: case JV_NS: {
        json_t *j = json_object_get(obj->u.j, name);
        return j ? jv_from_json(j) : jv_undef(name);
    }
    case JV_LOOP:
        return loop_attr(obj->u.loop, name);
    default:
        return jv_undef(name);
    }
}

bool jinja_index(const struct jv *key, int64_t *out)
{
    if (key->kind == JV_INT) {
        *out = key->u.i;
        return true;
    }
    if (key->kind == JV_BOOL) {
        *out = key->u.b;
        return true;
    }
    return false;
}

/* obj[key] (Jinja's getitem: item first, then attribute for string keys). */
struct jv jinja_getitem(const struct jv *obj, const struct jv *key)
{
    int64_t idx;
    switch (obj->kind) {
    case JV_DICT:
        if (key->kind == JV_STR) {
            json_t *j = json_object_get(obj->u.j, jv_str(key));
            if (j)
                return jv_from_json(j);
        }
        break;
    case JV_LIST:
        if (obj->seq == JV_SEQ_GEN || obj->seq == JV_SEQ_VIEW)
            break;
        if (jinja_index(key, &idx)) {
            int64_t n = (int64_t)json_array_size(obj->u.j);
            if (idx < 0)
                idx += n;
            if (idx >= 0 && idx < n)
                return jv_from_json(json_array_get(obj->u.j, (size_t)idx));
            return jv_undef(NULL);
        }
        break;
    case JV_STR:
        if (jinja_index(key, &idx)) {
            const char *s = jv_str(obj);
            size_t len = jv_len(obj);
            int64_t n = (int64_t)jinja_utf8_count(s, len);
            if (idx < 0)
                idx += n;
            if (idx >= 0 && idx < n) {
                size_t a = jinja_utf8_offset(s, len, (size_t)idx), b = a;
                jinja_utf8_next(s, len, &b);
                return jv_strn(s + a, b - a);
            }
            return jv_undef(NULL);
        }
        break;
    default:
        break;
    }
    if (key->kind == JV_STR)
        return jinja_getattr(obj, jv_str(key));
    return jv_undef(NULL);
}

/* Python slice index normalisation (PySlice_AdjustIndices). */
static void slice_adjust(int64_t len, bool has_start, int64_t start, bool has_stop, int64_t stop,
                         int64_t step, int64_t *o_start, int64_t *o_stop)
{
    if (!has_start) {
        start = step < 0 ? len - 1 : 0;
    } else if (start < 0) {
        start += len;
        if (start < 0)
            start = step < 0 ? -1 : 0;
    } else if (start >= len) {
        start = step < 0 ? len - 1 : len;
    }
    if (!has_stop) {
        stop = step < 0 ? -1 : len;
    } else if (stop < 0) {
        stop += len;
        if (stop < 0)
            stop = step < 0 ? -1 : 0;
    } else if (stop >= len) {
        stop = step < 0 ? len - 1 : len;
    }
    *o_start = start;
    *o_stop = stop;
}

/* ---- evaluation ------------------------------------------------------------------------- */

static int eval(struct rctx *r, struct scope *s, const struct jnode *n, struct jv *out);
static int exec_body(struct rctx *r, struct scope *s, struct jnode *const *body, int n_body,
                     struct strbuf *out);

static void args_free(struct args *a)
{
    for (int i = 0; i < a->n_pos; i++)
        jv_free(&a->pos[i]);
    for (int i = 0; i < a->n_kw; i++)
        jv_free(&a->kw[i]);
    hs_free(a->pos);
    hs_free(a->kw);
    memset(a, 0, sizeof(*a));
}

static int eval_args(struct rctx *r, struct scope *s, const struct jnode *n, struct args *a)
{
    memset(a, 0, sizeof(*a));
    a->pos = hs_calloc((size_t)n->n_args + 1, sizeof(*a->pos));
    a->kw = hs_calloc((size_t)n->n_kw + 1, sizeof(*a->kw));
    a->kw_names = n->kw_names;
    for (int i = 0; i < n->n_args; i++) {
        int rc = eval(r, s, n->args[i], &a->pos[i]);
        a->n_pos = i + 1;
        if (rc != HS_OK)
            return rc;
    }
    for (int i = 0; i < n->n_kw; i++) {
        int rc = eval(r, s, n->kw_vals[i], &a->kw[i]);
        a->n_kw = i + 1;
        if (rc != HS_OK)
            return rc;
    }
    return HS_OK;
}

/* Argument `name` at position `pos` (or by keyword); NULL when absent. */
const struct jv *jinja_arg(const struct args *a, int pos, const char *name)
{
    if (pos >= 0 && pos < a->n_pos)
        return &a->pos[pos];
    for (int i = 0; name && i < a->n_kw; i++)
        if (!strcmp(a->kw_names[i], name))
            return &a->kw[i];
    return NULL;
}

/* Turn an iterable into a JSON array (new reference) as Python's iter() would walk it:
 * lists as they are, dicts by key, strings by character, undefined as empty. */
int jinja_iter(struct rctx *r, int line, const struct jv *v, json_t **out)
{
    switch (v->kind) {
    case JV_LIST:
        *out = json_incref(v->u.j);
        return HS_OK;
    case JV_DICT: {
        json_t *a = json_array();
        const char *k;
        json_t *val;
        json_object_foreach(v->u.j, k, val)
            json_array_append_new(a, json_string_nocheck(k));
        *out = a;
        return HS_OK;
    }
    case JV_STR: {
        json_t *a = json_array();
        const char *s = jv_str(v);
        size_t n = jv_len(v);
        for (size_t i = 0; i < n;) {
            size_t st = i;
            jinja_utf8_next(s, n, &i);
            json_array_append_new(a, json_stringn_nocheck(s + st, i - st));
        }
        *out = a;
        return HS_OK;
    }
    case JV_UNDEF:
        *out = json_array();
        return HS_OK;
    default:
        return jinja_err(r, line, "'%s' object is not iterable", jv_type_name(v));
    }
}

struct jv jinja_seq(json_t *l, enum jv_seq kind)
{
    struct jv v = jv_from_json(l);
    v.seq = (uint8_t)kind;
    json_decref(l);
    return v;
}

int jinja_to_json(struct rctx *r, int line, const struct jv *v, json_t **out)
{
    *out = jv_to_json(v);
    if (!*out)
        return jinja_err(r, line, "a value of type '%s' cannot be stored in a list or dict here",
                      jv_type_name(v));
    return HS_OK;
}

int jinja_len(struct rctx *r, int line, const struct jv *v, int64_t *out)
{
    switch (v->kind) {
    case JV_STR: *out = (int64_t)jinja_utf8_count(jv_str(v), jv_len(v)); return HS_OK;
    case JV_LIST:
        if (v->seq == JV_SEQ_GEN)
            break;
        *out = (int64_t)json_array_size(v->u.j);
        return HS_OK;
    case JV_DICT: case JV_NS: *out = (int64_t)json_object_size(v->u.j); return HS_OK;
    case JV_UNDEF: *out = 0; return HS_OK;
    case JV_LOOP: *out = (int64_t)json_array_size(v->u.loop->items); return HS_OK;
    default: break;
    }
    return jinja_err(r, line, "object of type '%s' has no len()", jv_type_name(v));
}

void jinja_html_escape(const char *s, size_t n, struct strbuf *out)
{
    for (size_t i = 0; i < n; i++) {
        switch (s[i]) {
        case '&': strbuf_puts(out, "&amp;"); break;
        case '<': strbuf_puts(out, "&lt;"); break;
        case '>': strbuf_puts(out, "&gt;"); break;
        case '"': strbuf_puts(out, "&#34;"); break;
        case '\'': strbuf_puts(out, "&#39;"); break;
        default: strbuf_putc(out, s[i]);
        }
    }
}

struct jv jinja_to_str(const struct jv *v)
{
    if (v->kind == JV_STR)
        return jv_copy(v);
    struct strbuf sb;
    strbuf_init(&sb);
    jv_str_append(v, &sb);
    return jv_str_take(&sb);
}

/* ---- arithmetic ------------------------------------------------------------------------- */

static double py_fmod(double a, double b)
{
    double m = fmod(a, b);
    if (m != 0 && ((b < 0) != (m < 0)))
        m += b;
    else if (m == 0)
        m = copysign(0.0, b);
    return m;
}

int jinja_binop(struct rctx *r, int line, int op, const struct jv *a, const struct jv *b, struct jv *out)
{
    if (a->kind == JV_UNDEF)
        return jinja_undef_err(r, line, a);
    if (b->kind == JV_UNDEF)
        return jinja_undef_err(r, line, b);
    static const char *const sym[] = {"+", "-", "*", "/", "//", "%", "**"};
    if (jv_is_number(a) && jv_is_number(b)) {
        bool fl = a->kind == JV_FLOAT || b->kind == JV_FLOAT;
        if (!fl) {
            int64_t x = a->kind == JV_INT ? a->u.i : a->u.b, y = b->kind == JV_INT ? b->u.i : b->u.b, z;
            switch (op) {
            case JOP_ADD: if (__builtin_add_overflow(x, y, &z)) goto ovf; *out = jv_int(z); return HS_OK;
            case JOP_SUB: if (__builtin_sub_overflow(x, y, &z)) goto ovf; *out = jv_int(z); return HS_OK;
            case JOP_MUL: if (__builtin_mul_overflow(x, y, &z)) goto ovf; *out = jv_int(z); return HS_OK;
            case JOP_DIV:
                if (y == 0) return jinja_err(r, line, "division by zero");
                *out = jv_float((double)x / (double)y);
                return HS_OK;
            case JOP_FLOORDIV: case JOP_MOD: {
                if (y == 0) return jinja_err(r, line, "integer division or modulo by zero");
                if (x == INT64_MIN && y == -1) goto ovf;
                int64_t q = x / y, m = x % y;
                if (m != 0 && ((m < 0) != (y < 0))) {
                    q--;
                    m += y;
                }
                *out = jv_int(op == JOP_MOD ? m : q);
                return HS_OK;
            }
            case JOP_POW:
                if (y < 0) {
                    if (x == 0) return jinja_err(r, line, "0.0 cannot be raised to a negative power");
                    *out = jv_float(pow((double)x, (double)y));
                    return HS_OK;
                }
                z = 1;
                for (int64_t k = 0; k < y; k++)
                    if (__builtin_mul_overflow(z, x, &z)) goto ovf;
                *out = jv_int(z);
                return HS_OK;
            }
        }
        double x = jv_as_double(a), y = jv_as_double(b);
        switch (op) {
        case JOP_ADD: *out = jv_float(x + y); return HS_OK;
        case JOP_SUB: *out = jv_float(x - y); return HS_OK;
        case JOP_MUL: *out = jv_float(x * y); return HS_OK;
        case JOP_DIV:
            if (y == 0) return jinja_err(r, line, "float division by zero");
            *out = jv_float(x / y);
            return HS_OK;
        case JOP_FLOORDIV:
            if (y == 0) return jinja_err(r, line, "float floor division by zero");
            *out = jv_float(floor((x - py_fmod(x, y)) / y + 0.0));
            return HS_OK;
        case JOP_MOD:
            if (y == 0) return jinja_err(r, line, "float modulo");
            *out = jv_float(py_fmod(x, y));
            return HS_OK;
        case JOP_POW: *out = jv_float(pow(x, y)); return HS_OK;
        }
    }
    if (op == JOP_ADD && a->kind == JV_STR && b->kind == JV_STR) {
        struct strbuf sb;
        strbuf_init(&sb);
        /* Markup + str escapes the plain side (markupsafe) */
        if (b->markup && !a->markup)
            jinja_html_escape(jv_str(a), jv_len(a), &sb);
        else
            strbuf_append(&sb, jv_str(a), jv_len(a));
        if (a->markup && !b->markup)
            jinja_html_escape(jv_str(b), jv_len(b), &sb);
        else
            strbuf_append(&sb, jv_str(b), jv_len(b));
        *out = jv_str_take(&sb);
        out->markup = a->markup || b->markup;
        return HS_OK;
    }
    if (op == JOP_ADD && a->kind == JV_LIST && b->kind == JV_LIST && a->tuple == b->tuple &&
        a->seq == JV_SEQ_LIST && b->seq == JV_SEQ_LIST) {
        json_t *l = json_array();
        json_array_extend(l, a->u.j);
        json_array_extend(l, b->u.j);
        *out = jv_from_json(l);
        out->tuple = a->tuple;
        json_decref(l);
        return HS_OK;
    }
    bool a_seq = a->kind == JV_STR || (a->kind == JV_LIST && a->seq == JV_SEQ_LIST);
    bool b_seq = b->kind == JV_STR || (b->kind == JV_LIST && b->seq == JV_SEQ_LIST);
    bool a_int = a->kind == JV_INT || a->kind == JV_BOOL, b_int = b->kind == JV_INT || b->kind == JV_BOOL;
    if (op == JOP_MUL && ((a_seq && b_int) || (b_seq && a_int))) {
        const struct jv *seq = a->kind == JV_STR || a->kind == JV_LIST ? a : b;
        const struct jv *cnt = seq == a ? b : a;
        int64_t k = cnt->kind == JV_INT ? cnt->u.i : cnt->u.b;
        if (k > 1000000)
            return jinja_err(r, line, "repetition count too large");
        if (seq->kind == JV_STR) {
            struct strbuf sb;
            strbuf_init(&sb);
            for (int64_t i = 0; i < k; i++)
                strbuf_append(&sb, jv_str(seq), jv_len(seq));
            *out = jv_str_take(&sb);
            out->markup = seq->markup;
        } else {
            json_t *l = json_array();
            for (int64_t i = 0; i < k; i++)
                json_array_extend(l, seq->u.j);
            *out = jv_from_json(l);
            json_decref(l);
        }
        return HS_OK;
    }
    if (op == JOP_MOD && a->kind == JV_STR)
        return jinja_err(r, line, "printf-style string formatting is not supported");
    return jinja_err(r, line, "unsupported operand type(s) for %s: '%s' and '%s'", sym[op],
                  jv_type_name(a), jv_type_name(b));
ovf:
    return jinja_err(r, line, "integer overflow (values beyond 64 bits are not supported)");
}

/* `a in b` */
static int contains(struct rctx *r, int line, const struct jv *needle, const struct jv *hay, bool *out)
{
    switch (hay->kind) {
    case JV_STR:
        if (needle->kind != JV_STR)
            return jinja_err(r, line, "'in <string>' requires string as left operand, not %s", jv_type_name(needle));
        *out = jv_len(needle) == 0 || memmem(jv_str(hay), jv_len(hay), jv_str(needle), jv_len(needle)) != NULL;
        return HS_OK;
    case JV_LIST:
        *out = false;
        for (size_t i = 0; i < json_array_size(hay->u.j) && !*out; i++) {
            struct jv x = jv_from_json(json_array_get(hay->u.j, i));
            *out = jv_equal(&x, needle);
            jv_free(&x);
        }
        return HS_OK;
    case JV_DICT:
        *out = needle->kind == JV_STR && json_object_get(hay->u.j, jv_str(needle)) != NULL;
        return HS_OK;
    case JV_UNDEF:
        *out = false;
        return HS_OK;
    default:
        return jinja_err(r, line, "argument of type '%s' is not iterable", jv_type_name(hay));
    }
}

int jinja_compare(struct rctx *r, int line, int op, const struct jv *a, const struct jv *b, bool *out)
{
    switch (op) {
    case JOP_EQ: *out = jv_equal(a, b); return HS_OK;
    case JOP_NE: *out = !jv_equal(a, b); return HS_OK;
    case JOP_IN: return contains(r, line, a, b, out);
    case JOP_NOTIN: {
        int rc = contains(r, line, a, b, out);
        *out = !*out;
        return rc;
    }
    default: break;
    }
    if (a->kind == JV_UNDEF)
        return jinja_undef_err(r, line, a);
    if (b->kind == JV_UNDEF)
        return jinja_undef_err(r, line, b);
    int c = jv_compare(a, b);
    if (c == -2)
        return jinja_err(r, line, "'%s' not supported between instances of '%s' and '%s'",
                      op == JOP_LT ? "<" : op == JOP_LE ? "<=" : op == JOP_GT ? ">" : ">=",
                      jv_type_name(a), jv_type_name(b));
    if (c == 2) {
        *out = false;
        return HS_OK;
    }
    *out = op == JOP_LT ? c < 0 : op == JOP_LE ? c <= 0 : op == JOP_GT ? c > 0 : c >= 0;
    return HS_OK;
}

/* ---- calls ------------------------------------------------------------------------------ */

static int call_macro(struct rctx *r, int line, const struct jnode *m, const struct args *a, struct jv *out)
{
    if (a->n_pos > m->n_kw)
        return jinja_err(r, line, "macro '%s' takes not more than %d argument(s)", m->name, m->n_kw);
    for (int k = 0; k < a->n_kw; k++) {
        bool found = false;
        for (int i = 0; i < m->n_kw; i++)
            if (!strcmp(m->kw_names[i], a->kw_names[k])) {
                if (i < a->n_pos)
                    return jinja_err(r, line, "macro '%s' got multiple values for argument '%s'", m->name, m->kw_names[i]);
                found = true;
            }
        if (!found)
            return jinja_err(r, line, "macro '%s' takes no keyword argument '%s'", m->name, a->kw_names[k]);
    }
    if (r->call_depth >= MAX_CALL_DEPTH)
        return jinja_err(r, line, "macro calls nested too deeply");
    struct scope s = {.parent = r->root};
    int rc = HS_OK;
    for (int i = 0; i < m->n_kw && rc == HS_OK; i++) {
        const struct jv *given = jinja_arg(a, i, m->kw_names[i]);
        struct jv v;
        if (given)
            v = jv_copy(given);
        else if (m->kw_vals[i])
            rc = eval(r, &s, m->kw_vals[i], &v);
        else
            v = jv_undef(m->kw_names[i]);
        if (rc == HS_OK)
            scope_set(&s, m->kw_names[i], v);
    }
    struct strbuf sb;
    strbuf_init(&sb);
    if (rc == HS_OK) {
        int saved = r->loop_depth;
        r->call_depth++;
        r->loop_depth = 0;
        rc = exec_body(r, &s, m->args, m->n_args, &sb);
        r->call_depth--;
        r->loop_depth = saved;
    }
    scope_free(&s);
    if (rc < 0) {
        strbuf_free(&sb);
        return rc;
    }
    *out = jv_str_take(&sb);
    return HS_OK;
}

static int call_value(struct rctx *r, int line, const struct jv *f, const struct args *a, struct jv *out)
{
    switch (f->kind) {
    case JV_MACRO: return call_macro(r, line, f->u.macro, a, out);
    case JV_FUNC: return jinja_call_func(r, line, f->id, a, out);
    case JV_METHOD: return jinja_call_method(r, line, f, a, out);
    case JV_UNDEF: return jinja_undef_err(r, line, f);
    default: return jinja_err(r, line, "'%s' object is not callable", jv_type_name(f));
    }
}

/* ---- expressions ------------------------------------------------------------------------ */

static int eval_slice(struct rctx *r, struct scope *s, const struct jnode *n, const struct jv *obj, struct jv *out)
{
    struct jv parts[3] = {jv_none(), jv_none(), jv_none()};
    const struct jnode *pn[3] = {n->b, n->c, n->d};
    int64_t pv[3] = {0, 0, 1};
    bool has[3] = {false, false, false};
    int rc = HS_OK;
    for (int k = 0; k < 3 && rc == HS_OK; k++) {
        if (!pn[k])
            continue;
        rc = eval(r, s, pn[k], &parts[k]);
        if (rc != HS_OK)
            break;
        if (parts[k].kind == JV_NONE)
            continue;
        if (!jinja_index(&parts[k], &pv[k]))
            rc = jinja_err(r, n->line, "slice indices must be integers or None");
        has[k] = true;
    }
    for (int k = 0; k < 3; k++)
        jv_free(&parts[k]);
    if (rc != HS_OK)
        return rc;
    if (obj->kind == JV_UNDEF)
        return jinja_undef_err(r, n->line, obj);
    if (pv[2] == 0)
        return jinja_err(r, n->line, "slice step cannot be zero");
    if (obj->kind == JV_LIST && obj->seq != JV_SEQ_GEN && obj->seq != JV_SEQ_VIEW) {
        int64_t len = (int64_t)json_array_size(obj->u.j), st, sp;
        slice_adjust(len, has[0], pv[0], has[1], pv[1], pv[2], &st, &sp);
        json_t *l = json_array();
        for (int64_t i = st; pv[2] > 0 ? i < sp : i > sp; i += pv[2])
            json_array_append(l, json_array_get(obj->u.j, (size_t)i));
        *out = jv_from_json(l);
        out->tuple = obj->tuple;
        out->seq = obj->seq;
        json_decref(l);
        return HS_OK;
    }
    if (obj->kind == JV_STR) {
        const char *str = jv_str(obj);
        size_t n_b = jv_len(obj);
        int64_t len = (int64_t)jinja_utf8_count(str, n_b), st, sp;
        size_t *offs = hs_malloc(((size_t)len + 1) * sizeof(*offs));
        for (size_t i = 0, k = 0; k <= (size_t)len; k++) {
            offs[k] = i;
            if (i < n_b)
                jinja_utf8_next(str, n_b, &i);
        }
        slice_adjust(len, has[0], pv[0], has[1], pv[1], pv[2], &st, &sp);
        struct strbuf sb;
        strbuf_init(&sb);
        if (pv[2] == 1) {
            if (sp > st)
                strbuf_append(&sb, str + offs[st], offs[sp] - offs[st]);
        } else {
            for (int64_t i = st; pv[2] > 0 ? i < sp : i > sp; i += pv[2])
                strbuf_append(&sb, str + offs[i], offs[i + 1] - offs[i]);
        }
        hs_free(offs);
        *out = jv_str_take(&sb);
        return HS_OK;
    }
    *out = jv_undef(NULL);
    return HS_OK;
}

static int eval_seq(struct rctx *r, struct scope *s, const struct jnode *n, struct jv *out)
{
    json_t *l = n->kind == JN_DICT ? json_object() : json_array();
    int rc = HS_OK;
    for (int i = 0; i < n->n_args && rc == HS_OK; i++) {
        struct jv v, k = jv_undef(NULL);
        if (n->kind == JN_DICT) {
            if ((rc = eval(r, s, n->kw_vals[i], &k)) != HS_OK)
                break;
            if (k.kind != JV_STR) {
                rc = jinja_err(r, n->line, "dict literal keys must be strings here");
                jv_free(&k);
                break;
            }
        }
        if ((rc = eval(r, s, n->args[i], &v)) == HS_OK) {
            json_t *j;
            if ((rc = jinja_to_json(r, n->line, &v, &j)) == HS_OK) {
                if (n->kind == JN_DICT)
                    json_object_set_new(l, jv_str(&k), j);
                else
                    json_array_append_new(l, j);
            }
            jv_free(&v);
        }
        jv_free(&k);
    }
    if (rc == HS_OK) {
        *out = jv_from_json(l);
        out->tuple = n->kind == JN_TUPLE;
    }
    json_decref(l);
    return rc;
}

static int eval_node(struct rctx *r, struct scope *s, const struct jnode *n, struct jv *out);

static int eval(struct rctx *r, struct scope *s, const struct jnode *n, struct jv *out)
{
    if (r->eval_depth >= MAX_EVAL_DEPTH) {
        *out = jv_undef(NULL);
        return jinja_err(r, n->line, "expression nested too deeply");
    }
    r->eval_depth++;
    int rc = eval_node(r, s, n, out);
    r->eval_depth--;
    return rc;
}

static int eval_node(struct rctx *r, struct scope *s, const struct jnode *n, struct jv *out)
{
    int rc = HS_OK;
    struct jv a = jv_undef(NULL), b = jv_undef(NULL);
    *out = jv_undef(NULL);
    switch (n->kind) {
    case JN_CONST:
        *out = jv_from_json(n->cval);
        return HS_OK;
    case JN_NAME:
        if (!lookup_name(r, s, n->name, out))
            *out = jv_undef(n->name);
        return HS_OK;
    case JN_GETATTR:
        if ((rc = eval(r, s, n->a, &a)) != HS_OK)
            return rc;
        if (a.kind == JV_UNDEF)
            rc = jinja_undef_err(r, n->line, &a);
        else
            *out = jinja_getattr(&a, n->name);
        jv_free(&a);
        return rc;
    case JN_GETITEM:
        if ((rc = eval(r, s, n->a, &a)) != HS_OK)
            return rc;
        if (n->b->kind == JN_SLICE) {
            rc = eval_slice(r, s, n->b, &a, out);
        } else if ((rc = eval(r, s, n->b, &b)) == HS_OK) {
            if (a.kind == JV_UNDEF)
                rc = jinja_undef_err(r, n->line, &a);
            else
                *out = jinja_getitem(&a, &b);
        }
        jv_free(&a);
        jv_free(&b);
        return rc;
    case JN_CALL: case JN_FILTER: case JN_TEST: {
        if ((rc = eval(r, s, n->a, &a)) != HS_OK)
            return rc;
        struct args args;
        bool res = false;
        if ((rc = eval_args(r, s, n, &args)) == HS_OK) {
            if (n->kind == JN_CALL)
                rc = call_value(r, n->line, &a, &args, out);
            else if (n->kind == JN_FILTER)
                rc = jinja_filter(r, n->line, n->builtin, n->name, &a, &args, 0, out);
            else
                rc = jinja_test(r, n->line, n->builtin, n->name, &a, &args, &res);
        }
        args_free(&args);
        jv_free(&a);
        if (n->kind == JN_TEST)
            *out = jv_bool(n->op ? !res : res);
        return rc;
    }
    case JN_BINOP:
        if ((rc = eval(r, s, n->a, &a)) == HS_OK && (rc = eval(r, s, n->b, &b)) == HS_OK)
            rc = jinja_binop(r, n->line, n->op, &a, &b, out);
        jv_free(&a);
        jv_free(&b);
        return rc;
    case JN_NEG: case JN_POS:
        if ((rc = eval(r, s, n->a, &a)) != HS_OK)
            return rc;
        if (a.kind == JV_UNDEF) {
            rc = jinja_undef_err(r, n->line, &a);
        } else if (!jv_is_number(&a)) {
            rc = jinja_err(r, n->line, "bad operand type for unary %c: '%s'", n->kind == JN_NEG ? '-' : '+', jv_type_name(&a));
        } else if (a.kind == JV_FLOAT) {
            *out = jv_float(n->kind == JN_NEG ? -a.u.f : a.u.f);
        } else {
            int64_t x = a.kind == JV_INT ? a.u.i : a.u.b;
            if (n->kind == JN_NEG && x == INT64_MIN)
                rc = jinja_err(r, n->line, "integer overflow");
            else
                *out = jv_int(n->kind == JN_NEG ? -x : x);
        }
        jv_free(&a);
        return rc;
    case JN_NOT:
        if ((rc = eval(r, s, n->a, &a)) != HS_OK)
            return rc;
        *out = jv_bool(!jv_truthy(&a));
        jv_free(&a);
        return HS_OK;
    case JN_AND: case JN_OR:
        if ((rc = eval(r, s, n->a, &a)) != HS_OK)
            return rc;
        if (jv_truthy(&a) == (n->kind == JN_OR)) {
            *out = a;
            return HS_OK;
        }
        jv_free(&a);
        return eval(r, s, n->b, out);
    case JN_COMPARE: {
        if ((rc = eval(r, s, n->a, &a)) != HS_OK)
            return rc;
        bool res = true;
        for (int i = 0; i < n->n_body2 && res; i++) {
            if ((rc = eval(r, s, n->body2[i], &b)) != HS_OK ||
                (rc = jinja_compare(r, n->line, n->ops[i], &a, &b, &res)) != HS_OK) {
                jv_free(&a);
                jv_free(&b);
                return rc;
            }
            jv_free(&a);
            a = b;
            b = jv_undef(NULL);
        }
        jv_free(&a);
        *out = jv_bool(res);
        return HS_OK;
    }
    case JN_CONDEXPR:
        if ((rc = eval(r, s, n->a, &a)) != HS_OK)
            return rc;
        {
            bool c = jv_truthy(&a);
            jv_free(&a);
            if (c)
                return eval(r, s, n->b, out);
            if (n->c)
                return eval(r, s, n->c, out);
            return HS_OK;
        }
    case JN_CONCAT: {
        struct strbuf sb;
        strbuf_init(&sb);
        for (int i = 0; i < n->n_args; i++) {
            if ((rc = eval(r, s, n->args[i], &a)) != HS_OK) {
                strbuf_free(&sb);
                return rc;
            }
            jv_str_append(&a, &sb);
            jv_free(&a);
        }
        *out = jv_str_take(&sb);
        return HS_OK;
    }
    case JN_LIST: case JN_TUPLE: case JN_DICT:
        return eval_seq(r, s, n, out);
    case JN_SLICE:
        return jinja_err(r, n->line, "a slice outside of a subscript");
    default:
        return jinja_err(r, n->line, "not an expression");
    }
}

/* ---- statements ------------------------------------------------------------------------- */

/* Bind a for/set target (one name or a tuple of names) to v in scope s. */
static int assign_target(struct rctx *r, int line, struct scope *s, const struct jnode *n, const struct jv *v)
{
    if (n->n_kw == 1 && n->name) {
        scope_set(s, n->name, jv_copy(v));
        return HS_OK;
    }
    json_t *items;
    int rc = HS_OK;
    if (v->kind == JV_UNDEF)
        return jinja_undef_err(r, line, v);
    if ((rc = jinja_iter(r, line, v, &items)) != HS_OK)
        return rc;
    if ((int)json_array_size(items) != n->n_kw) {
        json_decref(items);
        return jinja_err(r, line, "cannot unpack %zu values into %d names", json_array_size(items), n->n_kw);
    }
    for (int i = 0; i < n->n_kw; i++)
        scope_set(s, n->kw_names[i], jv_from_json(json_array_get(items, (size_t)i)));
    json_decref(items);
    return HS_OK;
}

static int exec_for(struct rctx *r, struct scope *s, const struct jnode *n, struct strbuf *out)
{
    struct jv seq;
    int rc = eval(r, s, n->a, &seq);
    if (rc != HS_OK)
        return rc;
    json_t *items = NULL;
    rc = jinja_iter(r, n->line, &seq, &items);
    jv_free(&seq);
    if (rc != HS_OK)
        return rc;
    if (n->b) {
        /* `for x in xs if cond`: loop.* counts only the items that pass */
        json_t *kept = json_array();
        for (size_t i = 0; i < json_array_size(items) && rc == HS_OK; i++) {
            struct scope it = {.parent = s};
            struct jv item = jv_from_json(json_array_get(items, i)), c = jv_undef(NULL);
            if ((rc = assign_target(r, n->line, &it, n, &item)) == HS_OK &&
                (rc = eval(r, &it, n->b, &c)) == HS_OK && jv_truthy(&c))
                json_array_append(kept, json_array_get(items, i));
            jv_free(&c);
            jv_free(&item);
            scope_free(&it);
        }
        json_decref(items);
        items = kept;
        if (rc != HS_OK) {
            json_decref(items);
            return rc;
        }
    }
    size_t count = json_array_size(items);
    struct jloop *lp = hs_calloc(1, sizeof(*lp));
    lp->refs = 1;
    lp->items = items;
    lp->depth = ++r->loop_depth;
    struct jv loopv = {0};
    loopv.kind = JV_LOOP;
    loopv.u.loop = lp;
    for (size_t i = 0; i < count; i++) {
        lp->index = i;
        struct scope it = {.parent = s};
        struct jv item = jv_from_json(json_array_get(items, i));
        rc = assign_target(r, n->line, &it, n, &item);
        jv_free(&item);
        if (rc == HS_OK) {
            scope_set(&it, "loop", jv_copy(&loopv));
            rc = exec_body(r, &it, n->args, n->n_args, out);
        }
        scope_free(&it);
        if (rc == CTL_CONTINUE)
            rc = HS_OK;
        if (rc != HS_OK)
            break;
    }
    r->loop_depth--;
    jv_free(&loopv);
    if (rc == CTL_BREAK)
        rc = HS_OK;
    if (rc == HS_OK && count == 0 && n->n_body2)
        rc = exec_body(r, s, n->body2, n->n_body2, out);
    return rc;
}

static int exec_body(struct rctx *r, struct scope *s, struct jnode *const *body, int n_body,
                     struct strbuf *out)
{
    for (int i = 0; i < n_body; i++) {
        const struct jnode *n = body[i];
        struct jv v;
        int rc = HS_OK;
        switch (n->kind) {
        case JN_TEXT:
            strbuf_append(out, n->text, n->text_len);
            break;
        case JN_OUTPUT:
            if ((rc = eval(r, s, n->a, &v)) == HS_OK) {
                jv_str_append(&v, out);
                jv_free(&v);
            }
            break;
        case JN_IF:
            if ((rc = eval(r, s, n->a, &v)) != HS_OK)
                break;
            {
                bool c = jv_truthy(&v);
                jv_free(&v);
                if (c)
                    rc = exec_body(r, s, n->args, n->n_args, out);
                else
                    rc = exec_body(r, s, n->body2, n->n_body2, out);
            }
            break;
        case JN_FOR:
            rc = exec_for(r, s, n, out);
            break;
        case JN_SET:
            if ((rc = eval(r, s, n->a, &v)) != HS_OK)
                break;
            if (n->name2) {
                struct jv ns;
                if (!lookup_name(r, s, n->name, &ns) || ns.kind != JV_NS) {
                    if (lookup_name(r, s, n->name, &ns))
                        jv_free(&ns);
                    rc = jinja_err(r, n->line, "cannot assign attribute on non-namespace object");
                } else {
                    if (v.kind == JV_UNDEF) {
                        json_object_del(ns.u.j, n->name2);
                    } else {
                        json_t *j;
                        if ((rc = jinja_to_json(r, n->line, &v, &j)) == HS_OK)
                            json_object_set_new(ns.u.j, n->name2, j);
                    }
                    jv_free(&ns);
                }
            } else {
                rc = assign_target(r, n->line, s, n, &v);
            }
            jv_free(&v);
            break;
        case JN_SET_BLOCK: {
            struct strbuf sb;
            strbuf_init(&sb);
            rc = exec_body(r, s, n->args, n->n_args, &sb);
            if (rc == HS_OK)
                scope_set(s, n->name, sb.len ? jv_str_take(&sb) : jv_strn("", 0));
            strbuf_free(&sb);
            break;
        }
        case JN_MACRO: {
            struct jv m = {0};
            m.kind = JV_MACRO;
            m.u.macro = n;
            scope_set(s, n->name, m);
            break;
        }
        case JN_BREAK:
            return CTL_BREAK;
        case JN_CONTINUE:
            return CTL_CONTINUE;
        default:
            rc = jinja_err(r, n->line, "not a statement");
        }
        if (rc != HS_OK)
            return rc;
    }
    return HS_OK;
}

int jinja_render(const struct jinja_template *t, const json_t *ctx, struct strbuf *out,
                 struct hs_err *err)
{
    if (ctx && !json_is_object(ctx))
        return hs_err_set(err, HS_ERR_INVALID, "jinja: the render context must be a JSON object");
    struct scope root = {0};
    struct rctx r = {.ctx = ctx, .root = &root, .err = err};
    struct strbuf sb;
    strbuf_init(&sb);
    int rc = exec_body(&r, &root, t->body, t->n_body, &sb);
    scope_free(&root);
    if (rc != HS_OK) {
        strbuf_free(&sb);
        return rc < 0 ? rc : hs_err_set(err, HS_ERR_INVALID, "template: break/continue outside a loop");
    }
    strbuf_append(out, sb.buf ? sb.buf : "", sb.len);
    strbuf_free(&sb);
    return HS_OK;
}
