/*
 * parse.c — the second stage of compiling a template: tokens (lex.c) to the syntax tree
 * that eval.c walks, plus the arena the tree lives in (jinja.h has the design note).
 *
 * The grammar is Jinja2's parser, level by level: statements (if, for, set, macro,
 * break/continue) and expressions from conditional expressions down through or, and, not,
 * comparisons, + -, ~, * / // %, **, unary signs, filters and tests, postfix access and
 * primaries.
 *
 * Invariants:
 *   1. Every node and string of a tree is in its template's arena, and every constant is
 *      held by the template's constant pool: one jinja_free releases all of it.
 *   2. Recursion is bounded (MAX_PARSE_DEPTH): a hostile template fails with an error,
 *      never by exhausting the stack.
 *   3. Filter and test names are checked here, outside {% if %} conditions, as Jinja2 checks
 *      them when it compiles; inside them an unknown name fails only when it runs.
 */
#include "jinja/jinja_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena ------------------------------------------------------------------------------ */

struct arena_block {
    struct arena_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void *jinja_arena_alloc(void **arena, size_t n)
{
    struct arena_block *b = *arena;
    n = (n + 15) & ~(size_t)15;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 16384 ? n : 16384;
        struct arena_block *nb = hs_malloc(sizeof(*nb) + cap);
        nb->next = b;
        nb->used = 0;
        nb->cap = cap;
        *arena = b = nb;
    }
    void *p = b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

void jinja_arena_free(void *arena)
{
    struct arena_block *b = arena;
    while (b) {
        struct arena_block *next = b->next;
        hs_free(b);
        b = next;
    }
}

char *jinja_arena_strndup(void **arena, const char *s, size_t n)
{
    char *p = jinja_arena_alloc(arena, n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

/* ---- parser ----------------------------------------------------------------------------- */

enum { MAX_PARSE_DEPTH = 200 };

struct parser {
    struct jtoken *t;
    size_t n, i;
    void **arena;
    json_t *consts;
    struct hs_err *err;
    int loop_depth;
    int depth;  /* recursion guard: hostile templates must not exhaust the stack */
    bool soft;  /* inside an {% if %} (not in a nested for/macro/set body): Jinja2 reports
                 * unknown filters and tests there only when they run */
};

static struct jtoken *cur(struct parser *p) { return &p->t[p->i]; }
static struct jtoken *peek(struct parser *p, size_t k) { return &p->t[p->i + k < p->n ? p->i + k : p->n - 1]; }

static int perr(struct parser *p, const char *fmt, const char *arg)
{
    struct jtoken *t = cur(p);
    char msg[256];
    snprintf(msg, sizeof(msg), fmt, arg ? arg : "");
    return hs_err_set(p->err, HS_ERR_FORMAT, "template line %d column %d: %s", t->line, t->col, msg);
}

static bool is_op(struct jtoken *t, const char *op) { return t->kind == JTK_OP && strcmp(t->s, op) == 0; }
static bool is_name(struct jtoken *t, const char *nm) { return t->kind == JTK_NAME && strcmp(t->s, nm) == 0; }

static bool skip_op(struct parser *p, const char *op)
{
    if (is_op(cur(p), op)) {
        p->i++;
        return true;
    }
    return false;
}

static bool skip_name(struct parser *p, const char *nm)
{
    if (is_name(cur(p), nm)) {
        p->i++;
        return true;
    }
    return false;
}

static int expect_op(struct parser *p, const char *op)
{
    if (skip_op(p, op))
        return HS_OK;
    return perr(p, "expected '%s'", op);
}

static struct jnode *node_new(struct parser *p, enum jnode_kind kind, int line)
{
    struct jnode *nd = jinja_arena_alloc(p->arena, sizeof(*nd));
    nd->kind = kind;
    nd->line = line;
    return nd;
}

/* A growable list of node pointers, copied into the arena when complete. */
struct nvec {
    struct jnode **v;
    const char **names;
    int n, cap;
};

static void nvec_push(struct nvec *nv, struct jnode *nd, const char *name)
{
    if (nv->n == nv->cap) {
        nv->cap = nv->cap ? nv->cap * 2 : 8;
        nv->v = hs_realloc(nv->v, (size_t)nv->cap * sizeof(*nv->v));
        nv->names = hs_realloc(nv->names, (size_t)nv->cap * sizeof(*nv->names));
    }
    nv->v[nv->n] = nd;
    nv->names[nv->n++] = name;
}

static struct jnode **nvec_nodes(struct parser *p, struct nvec *nv)
{
    struct jnode **out = jinja_arena_alloc(p->arena, (size_t)(nv->n ? nv->n : 1) * sizeof(*out));
    if (nv->n)
        memcpy(out, nv->v, (size_t)nv->n * sizeof(*out));
    return out;
}

static const char **nvec_names(struct parser *p, struct nvec *nv)
{
    const char **out = jinja_arena_alloc(p->arena, (size_t)(nv->n ? nv->n : 1) * sizeof(*out));
    if (nv->n)
        memcpy(out, nv->names, (size_t)nv->n * sizeof(*out));
    return out;
}

static void nvec_free(struct nvec *nv)
{
    hs_free(nv->v);
    hs_free(nv->names);
    nv->v = NULL;
    nv->names = NULL;
    nv->n = nv->cap = 0;
}

static struct jnode *const_node(struct parser *p, int line, json_t *v)
{
    struct jnode *nd = node_new(p, JN_CONST, line);
    nd->cval = v;
    json_array_append_new(p->consts, v);
    return nd;
}

static int parse_expr(struct parser *p, bool with_condexpr, struct jnode **out);
static int parse_or(struct parser *p, struct jnode **out);
static int parse_unary(struct parser *p, bool with_filter, struct jnode **out);
static int parse_primary(struct parser *p, struct jnode **out);
static int parse_postfix(struct parser *p, struct jnode **node);

/* Comma-separated expressions up to an end token; a single one without a comma is itself,
 * otherwise a tuple (Jinja's parse_tuple). */
static bool tuple_end(struct parser *p, const char *extra_end)
{
    struct jtoken *t = cur(p);
    if (t->kind == JTK_VAR_END || t->kind == JTK_BLOCK_END || t->kind == JTK_EOF || is_op(t, ")"))
        return true;
    return extra_end && is_name(t, extra_end);
}

static int parse_tuple(struct parser *p, bool with_condexpr, const char *extra_end,
                       bool explicit_parens, struct jnode **out)
{
    int line = cur(p)->line;
    struct nvec items = {0};
    bool comma = false;
    for (;;) {
        if (items.n && !skip_op(p, ","))
            break;
        if (items.n)
            comma = true;
        if (tuple_end(p, extra_end))
            break;
        struct jnode *e;
        int rc = parse_expr(p, with_condexpr, &e);
        if (rc != HS_OK) {
            nvec_free(&items);
            return rc;
        }
        nvec_push(&items, e, NULL);
    }
    if (items.n == 1 && !comma) {
        *out = items.v[0];
        nvec_free(&items);
        return HS_OK;
    }
    if (items.n == 0 && !explicit_parens) {
        nvec_free(&items);
        return perr(p, "expected an expression", NULL);
    }
    struct jnode *nd = node_new(p, JN_TUPLE, line);
    nd->args = nvec_nodes(p, &items);
    nd->n_args = items.n;
    nvec_free(&items);
    *out = nd;
    return HS_OK;
}

/* Call arguments after '(' : positional, then name=value. */
static int parse_call_args(struct parser *p, struct jnode *nd)
{
    struct nvec args = {0}, kws = {0};
    int rc = HS_OK;
    while (!is_op(cur(p), ")")) {
        if (args.n + kws.n && (rc = expect_op(p, ",")) != HS_OK)
            goto done;
        if (is_op(cur(p), ")"))
            break;
        if (is_op(cur(p), "*") || is_op(cur(p), "**")) {
            rc = perr(p, "*args / **kwargs in calls are not supported", NULL);
            goto done;
        }
        if (cur(p)->kind == JTK_NAME && is_op(peek(p, 1), "=")) {
            const char *kn = cur(p)->s;
            p->i += 2;
            struct jnode *v;
            if ((rc = parse_expr(p, true, &v)) != HS_OK)
                goto done;
            nvec_push(&kws, v, kn);
        } else {
            if (kws.n) {
                rc = perr(p, "a positional argument follows keyword arguments", NULL);
                goto done;
            }
            struct jnode *v;
            if ((rc = parse_expr(p, true, &v)) != HS_OK)
                goto done;
            nvec_push(&args, v, NULL);
        }
    }
    p->i++; /* ')' */
    nd->args = nvec_nodes(p, &args);
    nd->n_args = args.n;
    nd->kw_vals = nvec_nodes(p, &kws);
    nd->kw_names = nvec_names(p, &kws);
    nd->n_kw = kws.n;
done:
    nvec_free(&args);
    nvec_free(&kws);
    return rc;
}

/* `(args)` after an expression: *node becomes a call of it (the current token is "("). */
static int parse_call_postfix(struct parser *p, struct jnode **node)
{
    struct jtoken *t = cur(p);
    p->i++;
    struct jnode *nd = node_new(p, JN_CALL, t->line);
    nd->a = *node;
    int rc = parse_call_args(p, nd);
    if (rc == HS_OK) *node = nd;
    return rc;
}

/* A dotted name for filters and tests ("a" or "a.b"). */
static int parse_dotted(struct parser *p, const char **out)
{
    if (cur(p)->kind != JTK_NAME)
        return perr(p, "expected a name", NULL);
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_puts(&sb, cur(p)->s);
    p->i++;
    while (is_op(cur(p), ".") && peek(p, 1)->kind == JTK_NAME) {
        strbuf_putc(&sb, '.');
        strbuf_puts(&sb, peek(p, 1)->s);
        p->i += 2;
    }
    *out = jinja_arena_strndup(p->arena, sb.buf, sb.len);
    strbuf_free(&sb);
    return HS_OK;
}

static int parse_filter_expr(struct parser *p, struct jnode **node)
{
    for (;;) {
        struct jtoken *t = cur(p);
        int rc = HS_OK;
        if (is_op(t, "|")) {
            p->i++;
            struct jnode *nd = node_new(p, JN_FILTER, t->line);
            if ((rc = parse_dotted(p, &nd->name)) != HS_OK)
                return rc;
            nd->builtin = jinja_builtin_find(JB_FILTER, nd->name);
            if (!p->soft && !nd->builtin) {
                p->i--;
                return perr(p, "no filter named '%s'", nd->name);
            }
            nd->a = *node;
            if (skip_op(p, "(") && (rc = parse_call_args(p, nd)) != HS_OK)
                return rc;
            *node = nd;
        } else if (is_name(t, "is")) {
            p->i++;
            struct jnode *nd = node_new(p, JN_TEST, t->line);
            nd->op = skip_name(p, "not");
            if ((rc = parse_dotted(p, &nd->name)) != HS_OK)
                return rc;
            nd->builtin = jinja_builtin_find(JB_TEST, nd->name);
            if (!p->soft && !nd->builtin) {
                p->i--;
                return perr(p, "no test named '%s'", nd->name);
            }
            nd->a = *node;
            struct jtoken *c = cur(p);
            if (skip_op(p, "(")) {
                if ((rc = parse_call_args(p, nd)) != HS_OK)
                    return rc;
            } else if ((c->kind == JTK_NAME || c->kind == JTK_STRING || c->kind == JTK_INT ||
                        c->kind == JTK_FLOAT || is_op(c, "(") || is_op(c, "[") || is_op(c, "{")) &&
                       !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
                if (is_name(c, "is"))
                    return perr(p, "you cannot chain multiple tests with is", NULL);
                struct jnode *arg;
                if ((rc = parse_primary(p, &arg)) != HS_OK || (rc = parse_postfix(p, &arg)) != HS_OK)
                    return rc;
                nd->args = jinja_arena_alloc(p->arena, sizeof(*nd->args));
                nd->args[0] = arg;
                nd->n_args = 1;
            }
            *node = nd;
        } else if (is_op(t, "(")) {
            if ((rc = parse_call_postfix(p, node)) != HS_OK)
                return rc;
        } else {
            return HS_OK;
        }
    }
}

/* One subscript inside [...]: an expression or a slice a:b:c. */
static int parse_subscribed(struct parser *p, struct jnode **out)
{
    int line = cur(p)->line, rc;
    struct jnode *parts[3] = {NULL, NULL, NULL};
    if (!is_op(cur(p), ":")) {
        if ((rc = parse_expr(p, true, &parts[0])) != HS_OK)
            return rc;
        if (!is_op(cur(p), ":")) {
            *out = parts[0];
            return HS_OK;
        }
    }
    p->i++; /* ':' */
    if (!is_op(cur(p), "]") && !is_op(cur(p), ",") && !is_op(cur(p), ":") &&
        (rc = parse_expr(p, true, &parts[1])) != HS_OK)
        return rc;
    if (skip_op(p, ":") && !is_op(cur(p), "]") && !is_op(cur(p), ",") &&
        (rc = parse_expr(p, true, &parts[2])) != HS_OK)
        return rc;
    struct jnode *nd = node_new(p, JN_SLICE, line);
    nd->b = parts[0];
    nd->c = parts[1];
    nd->d = parts[2];
    *out = nd;
    return HS_OK;
}

static int parse_postfix(struct parser *p, struct jnode **node)
{
    for (;;) {
        struct jtoken *t = cur(p);
        int rc = HS_OK;
        if (is_op(t, ".")) {
            p->i++;
            struct jtoken *a = cur(p);
            if (a->kind == JTK_NAME) {
                struct jnode *nd = node_new(p, JN_GETATTR, t->line);
                nd->a = *node;
                nd->name = a->s;
                p->i++;
                *node = nd;
            } else if (a->kind == JTK_INT) {
                struct jnode *nd = node_new(p, JN_GETITEM, t->line);
                nd->a = *node;
                nd->b = const_node(p, a->line, json_integer(a->ival));
                p->i++;
                *node = nd;
            } else {
                return perr(p, "expected a name after '.'", NULL);
            }
        } else if (is_op(t, "[")) {
            p->i++;
            struct nvec subs = {0};
            while (!is_op(cur(p), "]")) {
                if (subs.n && (rc = expect_op(p, ",")) != HS_OK) {
                    nvec_free(&subs);
                    return rc;
                }
                if (is_op(cur(p), "]"))
                    break;
                struct jnode *s;
                if ((rc = parse_subscribed(p, &s)) != HS_OK) {
                    nvec_free(&subs);
                    return rc;
                }
                nvec_push(&subs, s, NULL);
            }
            p->i++;
            if (subs.n != 1) {
                nvec_free(&subs);
                return perr(p, "tuple subscripts are not supported", NULL);
            }
            struct jnode *nd = node_new(p, JN_GETITEM, t->line);
            nd->a = *node;
            nd->b = subs.v[0];
            nvec_free(&subs);
            *node = nd;
        } else if (is_op(t, "(")) {
            if ((rc = parse_call_postfix(p, node)) != HS_OK)
                return rc;
        } else {
            return HS_OK;
        }
    }
}

static int parse_primary(struct parser *p, struct jnode **out)
{
    struct jtoken *t = cur(p);
    int rc = HS_OK;
    switch (t->kind) {
    case JTK_NAME:
        p->i++;
        if (!strcmp(t->s, "true") || !strcmp(t->s, "True"))
            *out = const_node(p, t->line, json_true());
        else if (!strcmp(t->s, "false") || !strcmp(t->s, "False"))
            *out = const_node(p, t->line, json_false());
        else if (!strcmp(t->s, "none") || !strcmp(t->s, "None"))
            *out = const_node(p, t->line, json_null());
        else {
            struct jnode *nd = node_new(p, JN_NAME, t->line);
            nd->name = t->s;
            *out = nd;
        }
        return HS_OK;
    case JTK_STRING: {
        struct strbuf sb;
        strbuf_init(&sb);
        while (cur(p)->kind == JTK_STRING) {
            strbuf_append(&sb, cur(p)->s, cur(p)->len);
            p->i++;
        }
        *out = const_node(p, t->line, json_stringn(sb.buf ? sb.buf : "", sb.len));
        strbuf_free(&sb);
        if (!(*out)->cval)
            return hs_err_set(p->err, HS_ERR_FORMAT, "template line %d: string literal is not valid UTF-8", t->line);
        return HS_OK;
    }
    case JTK_INT:
        p->i++;
        *out = const_node(p, t->line, json_integer(t->ival));
        return HS_OK;
    case JTK_FLOAT:
        p->i++;
        *out = const_node(p, t->line, json_real(t->fval));
        return HS_OK;
    case JTK_OP:
        if (is_op(t, "(")) {
            p->i++;
            if ((rc = parse_tuple(p, true, NULL, true, out)) != HS_OK)
                return rc;
            return expect_op(p, ")");
        }
        if (is_op(t, "[") || is_op(t, "{")) {
            bool dict = is_op(t, "{");
            const char *close = dict ? "}" : "]";
            p->i++;
            struct nvec items = {0}, keys = {0};
            while (!is_op(cur(p), close)) {
                if (items.n && (rc = expect_op(p, ",")) != HS_OK)
                    goto fail;
                if (is_op(cur(p), close))
                    break;
                struct jnode *k = NULL, *v;
                if (dict) {
                    if ((rc = parse_expr(p, true, &k)) != HS_OK || (rc = expect_op(p, ":")) != HS_OK)
                        goto fail;
                }
                if ((rc = parse_expr(p, true, &v)) != HS_OK)
                    goto fail;
                nvec_push(&items, v, NULL);
                if (dict)
                    nvec_push(&keys, k, NULL);
            }
            p->i++;
            struct jnode *nd = node_new(p, dict ? JN_DICT : JN_LIST, t->line);
            nd->args = nvec_nodes(p, &items);
            nd->n_args = items.n;
            if (dict) {
                nd->kw_vals = nvec_nodes(p, &keys);
                nd->n_kw = keys.n;
            }
            nvec_free(&items);
            nvec_free(&keys);
            *out = nd;
            return HS_OK;
        fail:
            nvec_free(&items);
            nvec_free(&keys);
            return rc;
        }
        return perr(p, "unexpected '%s'", t->s);
    case JTK_VAR_END: case JTK_BLOCK_END: case JTK_EOF:
        return perr(p, "unexpected end of expression", NULL);
    default:
        return perr(p, "unexpected token", NULL);
    }
}

/* Enter one level of recursive parsing (the caller decrements p->depth when done);
 * hostile templates must fail cleanly, not exhaust the stack. */
static int depth_enter(struct parser *p)
{
    if (p->depth >= MAX_PARSE_DEPTH) return perr(p, "expressions or blocks nested too deeply", NULL);
    p->depth++;
    return HS_OK;
}

static int parse_unary_inner(struct parser *p, bool with_filter, struct jnode **out);
static int parse_unary(struct parser *p, bool with_filter, struct jnode **out)
{
    int rc = depth_enter(p);
    if (rc == HS_OK) rc = parse_unary_inner(p, with_filter, out), p->depth--;
    return rc;
}

static int parse_unary_inner(struct parser *p, bool with_filter, struct jnode **out)
{
    struct jtoken *t = cur(p);
    int rc = HS_OK;
    if (is_op(t, "-") || is_op(t, "+")) {
        p->i++;
        struct jnode *nd = node_new(p, is_op(t, "-") ? JN_NEG : JN_POS, t->line);
        if ((rc = parse_unary(p, false, &nd->a)) != HS_OK)
            return rc;
        *out = nd;
    } else if ((rc = parse_primary(p, out)) != HS_OK) {
        return rc;
    }
    if ((rc = parse_postfix(p, out)) != HS_OK)
        return rc;
    return with_filter ? parse_filter_expr(p, out) : HS_OK;
}

static int parse_binary_level(struct parser *p, int level, struct jnode **out);

/* Levels: 0 math1 (+ -), 1 concat (~), 2 math2 (* / // %), 3 pow (**). */
static int parse_binary_level(struct parser *p, int level, struct jnode **out)
{
    int rc = HS_OK;
    if (level == 4)
        return parse_unary(p, true, out);
    if ((rc = parse_binary_level(p, level + 1, out)) != HS_OK)
        return rc;
    if (level == 1) {
        if (!is_op(cur(p), "~"))
            return HS_OK;
        struct nvec parts = {0};
        nvec_push(&parts, *out, NULL);
        int line = cur(p)->line;
        while (skip_op(p, "~")) {
            struct jnode *r;
            if ((rc = parse_binary_level(p, 2, &r)) != HS_OK) {
                nvec_free(&parts);
                return rc;
            }
            nvec_push(&parts, r, NULL);
        }
        struct jnode *nd = node_new(p, JN_CONCAT, line);
        nd->args = nvec_nodes(p, &parts);
        nd->n_args = parts.n;
        nvec_free(&parts);
        *out = nd;
        return HS_OK;
    }
    static const struct { const char *s; int level; enum jop op; } bops[] = {
        {"+", 0, JOP_ADD}, {"-", 0, JOP_SUB}, {"*", 2, JOP_MUL}, {"/", 2, JOP_DIV},
        {"//", 2, JOP_FLOORDIV}, {"%", 2, JOP_MOD}, {"**", 3, JOP_POW},
    };
    for (;;) {
        int found = -1;
        for (size_t k = 0; k < HS_ARRAY_LEN(bops); k++)
            if (bops[k].level == level && is_op(cur(p), bops[k].s))
                found = (int)k;
        if (found < 0)
            return HS_OK;
        int line = cur(p)->line;
        p->i++;
        struct jnode *nd = node_new(p, JN_BINOP, line);
        nd->op = (int)bops[found].op;
        nd->a = *out;
        if ((rc = parse_binary_level(p, level + 1, &nd->b)) != HS_OK)
            return rc;
        *out = nd;
    }
}

static int parse_compare(struct parser *p, struct jnode **out)
{
    int rc = HS_OK;
    if ((rc = parse_binary_level(p, 0, out)) != HS_OK)
        return rc;
    static const struct { const char *s; enum jop op; } cops[] = {
        {"==", JOP_EQ}, {"!=", JOP_NE}, {"<", JOP_LT}, {"<=", JOP_LE}, {">", JOP_GT}, {">=", JOP_GE},
    };
    struct nvec rhs = {0};
    int ops[64], n_ops = 0, line = cur(p)->line;
    for (;;) {
        int op = -1;
        for (size_t k = 0; k < HS_ARRAY_LEN(cops); k++)
            if (is_op(cur(p), cops[k].s))
                op = (int)cops[k].op;
        if (op >= 0) {
            p->i++;
        } else if (is_name(cur(p), "in")) {
            p->i++;
            op = JOP_IN;
        } else if (is_name(cur(p), "not") && is_name(peek(p, 1), "in")) {
            p->i += 2;
            op = JOP_NOTIN;
        } else {
            break;
        }
        if (n_ops == (int)HS_ARRAY_LEN(ops)) {
            nvec_free(&rhs);
            return perr(p, "comparison chain too long", NULL);
        }
        struct jnode *r;
        if ((rc = parse_binary_level(p, 0, &r)) != HS_OK) {
            nvec_free(&rhs);
            return rc;
        }
        ops[n_ops++] = op;
        nvec_push(&rhs, r, NULL);
    }
    if (n_ops) {
        struct jnode *nd = node_new(p, JN_COMPARE, line);
        nd->a = *out;
        nd->body2 = nvec_nodes(p, &rhs);
        nd->n_body2 = rhs.n;
        nd->ops = jinja_arena_alloc(p->arena, (size_t)n_ops * sizeof(int));
        memcpy(nd->ops, ops, (size_t)n_ops * sizeof(int));
        *out = nd;
    }
    nvec_free(&rhs);
    return HS_OK;
}

static int parse_not_inner(struct parser *p, struct jnode **out);
static int parse_not(struct parser *p, struct jnode **out)
{
    int rc = depth_enter(p);
    if (rc == HS_OK) rc = parse_not_inner(p, out), p->depth--;
    return rc;
}

static int parse_not_inner(struct parser *p, struct jnode **out)
{
    if (is_name(cur(p), "not")) {
        struct jnode *nd = node_new(p, JN_NOT, cur(p)->line);
        p->i++;
        int rc = parse_not(p, &nd->a);
        *out = nd;
        return rc;
    }
    return parse_compare(p, out);
}

static int parse_and(struct parser *p, struct jnode **out)
{
    int rc = parse_not(p, out);
    while (rc == HS_OK && is_name(cur(p), "and")) {
        struct jnode *nd = node_new(p, JN_AND, cur(p)->line);
        p->i++;
        nd->a = *out;
        rc = parse_not(p, &nd->b);
        *out = nd;
    }
    return rc;
}

static int parse_or(struct parser *p, struct jnode **out)
{
    int rc = parse_and(p, out);
    while (rc == HS_OK && is_name(cur(p), "or")) {
        struct jnode *nd = node_new(p, JN_OR, cur(p)->line);
        p->i++;
        nd->a = *out;
        rc = parse_and(p, &nd->b);
        *out = nd;
    }
    return rc;
}

static int parse_expr_inner(struct parser *p, bool with_condexpr, struct jnode **out);
static int parse_expr(struct parser *p, bool with_condexpr, struct jnode **out)
{
    int rc = depth_enter(p);
    if (rc == HS_OK) rc = parse_expr_inner(p, with_condexpr, out), p->depth--;
    return rc;
}

static int parse_expr_inner(struct parser *p, bool with_condexpr, struct jnode **out)
{
    int rc = parse_or(p, out);
    if (!with_condexpr)
        return rc;
    while (rc == HS_OK && is_name(cur(p), "if")) {
        struct jnode *nd = node_new(p, JN_CONDEXPR, cur(p)->line);
        p->i++;
        nd->b = *out;                        /* value when true */
        if ((rc = parse_or(p, &nd->a)) != HS_OK)  /* condition */
            return rc;
        if (skip_name(p, "else"))
            rc = parse_expr(p, true, &nd->c);
        *out = nd;
    }
    return rc;
}

/* Assignment target: a name, ns.attr (when with_ns), or a comma list of names. */
static int parse_target(struct parser *p, bool with_ns, const char *extra_end, struct jnode *nd)
{
    struct nvec names = {0};
    for (;;) {
        if (cur(p)->kind != JTK_NAME) {
            nvec_free(&names);
            return perr(p, "expected a variable name", NULL);
        }
        const char *nm = cur(p)->s;
        p->i++;
        if (with_ns && names.n == 0 && is_op(cur(p), ".") && peek(p, 1)->kind == JTK_NAME) {
            nd->name = nm;
            nd->name2 = peek(p, 1)->s;
            p->i += 2;
            nvec_free(&names);
            return HS_OK;
        }
        nvec_push(&names, NULL, nm);
        if (!skip_op(p, ","))
            break;
        if (cur(p)->kind == JTK_BLOCK_END || is_op(cur(p), "=") || (extra_end && is_name(cur(p), extra_end)))
            break;
    }
    nd->kw_names = nvec_names(p, &names);
    nd->n_kw = names.n;
    nd->name = names.n == 1 ? names.names[0] : NULL;
    nvec_free(&names);
    return HS_OK;
}

static int parse_body(struct parser *p, const char *const *ends, struct nvec *out, const char **ended);

static int expect_block_end(struct parser *p)
{
    if (cur(p)->kind == JTK_BLOCK_END) {
        p->i++;
        return HS_OK;
    }
    return perr(p, "expected the end of the tag ('%%}')", NULL);
}

static void set_body(struct parser *p, struct nvec *nv, struct jnode ***dst, int *n)
{
    *dst = nvec_nodes(p, nv);
    *n = nv->n;
    nvec_free(nv);
}

static int parse_for_rest(struct parser *p, struct jnode *nd)
{
    int rc = HS_OK;
    if (skip_name(p, "if") && (rc = parse_expr(p, true, &nd->b)) != HS_OK)
        return rc;
    if (is_name(cur(p), "recursive"))
        return perr(p, "recursive loops are not supported", NULL);
    if ((rc = expect_block_end(p)) != HS_OK)
        return rc;
    static const char *const ends[] = {"else", "endfor", NULL};
    struct nvec body = {0};
    const char *ended;
    p->loop_depth++;
    rc = parse_body(p, ends, &body, &ended);
    p->loop_depth--;
    if (rc != HS_OK)
        return rc;
    set_body(p, &body, &nd->args, &nd->n_args);
    if ((rc = expect_block_end(p)) != HS_OK)
        return rc;
    if (!strcmp(ended, "else")) {
        static const char *const ends2[] = {"endfor", NULL};
        struct nvec eb = {0};
        if ((rc = parse_body(p, ends2, &eb, &ended)) != HS_OK)
            return rc;
        set_body(p, &eb, &nd->body2, &nd->n_body2);
        if ((rc = expect_block_end(p)) != HS_OK)
            return rc;
    }
    return HS_OK;
}

static int parse_if(struct parser *p, struct jtoken *t, struct jnode **out)
{
    int rc = HS_OK;
    struct jnode *top = node_new(p, JN_IF, t->line), *nd = top;
    for (;;) {
        if ((rc = parse_tuple(p, false, NULL, false, &nd->a)) != HS_OK || (rc = expect_block_end(p)) != HS_OK)
            return rc;
        static const char *const ends[] = {"elif", "else", "endif", NULL};
        struct nvec body = {0};
        const char *ended;
        if ((rc = parse_body(p, ends, &body, &ended)) != HS_OK)
            return rc;
        set_body(p, &body, &nd->args, &nd->n_args);
        if (!strcmp(ended, "elif")) {
            struct jnode *el = node_new(p, JN_IF, cur(p)->line);
            nd->body2 = jinja_arena_alloc(p->arena, sizeof(*nd->body2));
            nd->body2[0] = el;
            nd->n_body2 = 1;
            nd = el;
            continue;
        }
        if ((rc = expect_block_end(p)) != HS_OK)
            return rc;
        if (!strcmp(ended, "else")) {
            static const char *const ends2[] = {"endif", NULL};
            struct nvec eb = {0};
            if ((rc = parse_body(p, ends2, &eb, &ended)) != HS_OK)
                return rc;
            set_body(p, &eb, &nd->body2, &nd->n_body2);
            if ((rc = expect_block_end(p)) != HS_OK)
                return rc;
        }
        *out = top;
        return HS_OK;
    }
}

static int parse_statement_inner(struct parser *p, struct jnode **out);
static int parse_statement(struct parser *p, struct jnode **out)
{
    int rc = depth_enter(p);
    if (rc == HS_OK) rc = parse_statement_inner(p, out), p->depth--;
    return rc;
}

static int parse_statement_inner(struct parser *p, struct jnode **out)
{
    struct jtoken *t = cur(p);
    int rc = HS_OK;
    if (t->kind != JTK_NAME)
        return perr(p, "expected a tag name", NULL);
    const char *tag = t->s;
    p->i++;
    if (!strcmp(tag, "if")) {
        bool saved_soft = p->soft;
        p->soft = true;
        rc = parse_if(p, t, out);
        p->soft = saved_soft;
        return rc;
    }
    if (!strcmp(tag, "for")) {
        struct jnode *nd = node_new(p, JN_FOR, t->line);
        if ((rc = parse_target(p, false, "in", nd)) != HS_OK)
            return rc;
        if (!skip_name(p, "in"))
            return perr(p, "expected 'in' in a for loop", NULL);
        if ((rc = parse_tuple(p, false, "recursive", false, &nd->a)) != HS_OK)
            return rc;
        bool saved_soft = p->soft;
        p->soft = false; /* the loop body is a new frame in Jinja2 */
        rc = parse_for_rest(p, nd);
        p->soft = saved_soft;
        if (rc != HS_OK)
            return rc;
        *out = nd;
        return HS_OK;
    }
    if (!strcmp(tag, "set")) {
        struct jnode *nd = node_new(p, JN_SET, t->line);
        if ((rc = parse_target(p, true, NULL, nd)) != HS_OK)
            return rc;
        if (skip_op(p, "=")) {
            if ((rc = parse_tuple(p, true, NULL, false, &nd->a)) != HS_OK)
                return rc;
            *out = nd;
            return expect_block_end(p);
        }
        if (nd->name2 || nd->n_kw != 1)
            return perr(p, "a block set needs a single variable name", NULL);
        if ((rc = expect_block_end(p)) != HS_OK)
            return rc;
        nd->kind = JN_SET_BLOCK;
        static const char *const ends[] = {"endset", NULL};
        struct nvec body = {0};
        const char *ended;
        bool saved_soft = p->soft;
        p->soft = false;
        rc = parse_body(p, ends, &body, &ended);
        p->soft = saved_soft;
        if (rc != HS_OK)
            return rc;
        set_body(p, &body, &nd->args, &nd->n_args);
        *out = nd;
        return expect_block_end(p);
    }
    if (!strcmp(tag, "macro")) {
        struct jnode *nd = node_new(p, JN_MACRO, t->line);
        if (cur(p)->kind != JTK_NAME)
            return perr(p, "expected a macro name", NULL);
        nd->name = cur(p)->s;
        p->i++;
        if ((rc = expect_op(p, "(")) != HS_OK)
            return rc;
        struct nvec params = {0};
        while (!is_op(cur(p), ")")) {
            if (params.n && (rc = expect_op(p, ",")) != HS_OK)
                goto macro_fail;
            if (cur(p)->kind != JTK_NAME) {
                rc = perr(p, "expected a parameter name", NULL);
                goto macro_fail;
            }
            const char *pn = cur(p)->s;
            p->i++;
            struct jnode *def = NULL;
            if (skip_op(p, "=") && (rc = parse_expr(p, true, &def)) != HS_OK)
                goto macro_fail;
            nvec_push(&params, def, pn);
        }
        p->i++;
        nd->kw_names = nvec_names(p, &params);
        nd->kw_vals = nvec_nodes(p, &params);
        nd->n_kw = params.n;
        nvec_free(&params);
        if ((rc = expect_block_end(p)) != HS_OK)
            return rc;
        static const char *const ends[] = {"endmacro", NULL};
        struct nvec body = {0};
        const char *ended;
        int saved = p->loop_depth;
        bool saved_soft = p->soft;
        p->loop_depth = 0;
        p->soft = false;
        rc = parse_body(p, ends, &body, &ended);
        p->loop_depth = saved;
        p->soft = saved_soft;
        if (rc != HS_OK)
            return rc;
        set_body(p, &body, &nd->args, &nd->n_args);
        if (cur(p)->kind == JTK_NAME)
            p->i++; /* {% endmacro name %} */
        *out = nd;
        return expect_block_end(p);
    macro_fail:
        nvec_free(&params);
        return rc;
    }
    if (!strcmp(tag, "break") || !strcmp(tag, "continue")) {
        if (p->loop_depth == 0) {
            p->i--;
            return perr(p, "'%s' outside of a loop", tag);
        }
        *out = node_new(p, tag[0] == 'b' ? JN_BREAK : JN_CONTINUE, t->line);
        return expect_block_end(p);
    }
    p->i--;
    return perr(p, "unknown or unsupported tag '%s'", tag);
}

/* Parse statements until a {% name %} in `ends` (its name consumed, *ended set) or, when
 * ends is NULL, the end of the template. */
static int parse_body(struct parser *p, const char *const *ends, struct nvec *out, const char **ended)
{
    for (;;) {
        struct jtoken *t = cur(p);
        int rc = HS_OK;
        if (t->kind == JTK_EOF) {
            if (ends) {
                int k = 0;
                while (ends[k + 1])
                    k++;
                nvec_free(out);
                return perr(p, "unexpected end of template: missing {%% %s %%}", ends[k]);
            }
            return HS_OK;
        }
        if (t->kind == JTK_TEXT) {
            struct jnode *nd = node_new(p, JN_TEXT, t->line);
            nd->text = t->s;
            nd->text_len = t->len;
            nvec_push(out, nd, NULL);
            p->i++;
        } else if (t->kind == JTK_VAR_BEGIN) {
            p->i++;
            struct jnode *nd = node_new(p, JN_OUTPUT, t->line);
            if ((rc = parse_tuple(p, true, NULL, false, &nd->a)) != HS_OK) {
                nvec_free(out);
                return rc;
            }
            if (cur(p)->kind != JTK_VAR_END) {
                nvec_free(out);
                return perr(p, "expected the end of the print tag ('}}')", NULL);
            }
            p->i++;
            nvec_push(out, nd, NULL);
        } else if (t->kind == JTK_BLOCK_BEGIN) {
            struct jtoken *nm = peek(p, 1);
            if (ends && nm->kind == JTK_NAME) {
                for (int k = 0; ends[k]; k++)
                    if (!strcmp(nm->s, ends[k])) {
                        p->i += 2;
                        *ended = ends[k];
                        return HS_OK;
                    }
            }
            if (nm->kind == JTK_NAME && (!strcmp(nm->s, "endif") || !strcmp(nm->s, "endfor") ||
                                        !strcmp(nm->s, "endmacro") || !strcmp(nm->s, "endset") ||
                                        !strcmp(nm->s, "elif") || !strcmp(nm->s, "else"))) {
                p->i++;
                nvec_free(out);
                return perr(p, "unexpected {%% %s %%}", nm->s);
            }
            p->i++;
            struct jnode *nd = NULL;
            if ((rc = parse_statement(p, &nd)) != HS_OK) {
                nvec_free(out);
                return rc;
            }
            nvec_push(out, nd, NULL);
        } else {
            nvec_free(out);
            return perr(p, "unexpected token", NULL);
        }
    }
}

/* ---- public API ------------------------------------------------------------------------- */

int jinja_compile(const char *source, size_t len, struct jinja_template **out, struct hs_err *err)
{
    *out = NULL;
    struct jinja_template *t = hs_calloc(1, sizeof(*t));
    t->consts = json_array();
    struct jtoken *toks = NULL;
    size_t n_toks = 0;
    int rc = jinja_lex(source, len, &t->arena, &toks, &n_toks, err);
    if (rc == HS_OK) {
        struct parser p = {.t = toks, .n = n_toks, .arena = &t->arena, .consts = t->consts, .err = err};
        struct nvec body = {0};
        rc = parse_body(&p, NULL, &body, NULL);
        if (rc == HS_OK) {
            t->body = nvec_nodes(&p, &body);
            t->n_body = body.n;
            nvec_free(&body);
        }
    }
    hs_free(toks);
    if (rc != HS_OK) {
        jinja_free(t);
        return rc;
    }
    *out = t;
    return HS_OK;
}

void jinja_free(struct jinja_template *t)
{
    if (!t)
        return;
    json_decref(t->consts);
    jinja_arena_free(t->arena);
    hs_free(t);
}
