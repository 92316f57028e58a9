/*
 * jinja_int.h — private to src/jinja/: the tokens (lex.c -> parse.c), the syntax tree
 * (parse.c -> eval.c), the runtime values and Python-compatible formatting (value.c) and
 * the evaluator's interface to the builtins (eval.c <-> builtins.c).
 */
#ifndef HS_JINJA_INT_H
#define HS_JINJA_INT_H

#include "jinja/jinja.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- values ---------------------------------------------------------------------------- */

/* A runtime value. STR / LIST / DICT / NS hold one jansson reference in u.j (lists and
 * dicts are JSON arrays / objects, so context data is shared, never copied); LOOP holds one
 * reference to its loop record; MACRO points into the template; FUNC and METHOD name a
 * builtin (METHOD with its receiver in u.j). UNDEF carries the name it was looked up by. */
enum jv_kind {
    JV_UNDEF = 0, JV_NONE, JV_BOOL, JV_INT, JV_FLOAT, JV_STR, JV_LIST, JV_DICT,
    JV_NS, JV_MACRO, JV_LOOP, JV_FUNC, JV_METHOD,
};

/* What a LIST value is in Python. Filters such as map, select and items return
 * generators, dict.items() returns a view, range() a range: they iterate like lists but
 * differ in truthiness (a generator is always true), len() and json.dumps (both fail). */
enum jv_seq { JV_SEQ_LIST = 0, JV_SEQ_GEN, JV_SEQ_VIEW, JV_SEQ_RANGE };

struct jnode;
struct jloop;

struct jv {
    enum jv_kind kind;
    bool markup;   /* STR: a Markup string (from |safe or |e): `+` escapes the other side */
    bool tuple;    /* LIST: a Python tuple (prints as one, never equals a list) */
    uint8_t seq;   /* LIST: enum jv_seq, what Python object the items stand for */
    int id;        /* FUNC / METHOD: which builtin */
    union {
        bool b;
        int64_t i;
        double f;
        json_t *j;
        const struct jnode *macro;
        struct jloop *loop;
        const char *name;  /* UNDEF: for messages; may be NULL */
    } u;
};

struct jloop {
    int refs;
    json_t *items;   /* array, owned: the (filtered) sequence being iterated */
    size_t index;    /* 0-based position of the current item */
    int depth;       /* 1 for an outermost loop */
};

static inline struct jv jv_undef(const char *name) { struct jv v = {0}; v.kind = JV_UNDEF; v.u.name = name; return v; }
static inline struct jv jv_none(void) { struct jv v = {0}; v.kind = JV_NONE; return v; }
static inline struct jv jv_bool(bool b) { struct jv v = {0}; v.kind = JV_BOOL; v.u.b = b; return v; }
static inline struct jv jv_int(int64_t i) { struct jv v = {0}; v.kind = JV_INT; v.u.i = i; return v; }
static inline struct jv jv_float(double f) { struct jv v = {0}; v.kind = JV_FLOAT; v.u.f = f; return v; }

/* The JSON stand-in for an Undefined stored inside a list or dict (Python keeps the
 * Undefined object there): one process-wide sentinel that reads back as JV_UNDEF. */
json_t *jv_undef_json(void);

/* New STR value from bytes (copied). */
struct jv jv_strn(const char *s, size_t n);
/* STR value taking ownership of a strbuf's bytes; sb is left empty. */
struct jv jv_str_take(struct strbuf *sb);
/* Wrap a JSON value (borrowed; containers gain a reference). */
struct jv jv_from_json(json_t *j);
/* A new JSON reference for v, or NULL when v has no JSON form (undefined, macro, loop, ...). */
json_t *jv_to_json(const struct jv *v);
struct jv jv_copy(const struct jv *v);
void jv_free(struct jv *v);  /* leaves v undefined */

static inline const char *jv_str(const struct jv *v) { return json_string_value(v->u.j); }
static inline size_t jv_len(const struct jv *v) { return json_string_length(v->u.j); }

bool jv_truthy(const struct jv *v);
bool jv_is_number(const struct jv *v);   /* bool, int or float (Python's numbers.Number) */
double jv_as_double(const struct jv *v); /* for numbers */
/* Python ==. */
bool jv_equal(const struct jv *a, const struct jv *b);
/* Python <, >, ... as a three-way compare; -2 when the types do not order (TypeError). */
int jv_compare(const struct jv *a, const struct jv *b);
/* Python str(v) appended (undefined prints nothing). */
void jv_str_append(const struct jv *v, struct strbuf *out);
/* Python repr(v) appended. */
void jv_repr_append(const struct jv *v, struct strbuf *out);
/* The Python type name for messages ("str", "int", "dict", ...). */
const char *jv_type_name(const struct jv *v);

/* ---- Python text helpers --------------------------------------------------------------- */

void py_float_repr(double d, struct strbuf *out); /* repr(float): 1.0, 1e-07, 1e+16 */
void py_str_repr(const char *s, size_t n, struct strbuf *out);
bool py_is_space(uint32_t cp);                    /* str.isspace() for one code point */
/* The code point at s[*i] (i < n), advancing *i past it: base's strict decoder, and a
 * byte that starts no valid sequence reads as one character, the code point of its value.
 * Every walk over a string's characters (len, indexing, slicing, iteration, reverse) takes
 * these steps, so they agree on any bytes. */
uint32_t jinja_utf8_next(const char *s, size_t n, size_t *i);
size_t jinja_utf8_count(const char *s, size_t n);       /* characters, as jinja_utf8_next steps */
/* Byte offset of code point index cp (clamped to n). */
size_t jinja_utf8_offset(const char *s, size_t n, size_t cp);
void jinja_utf8_put(struct strbuf *sb, uint32_t cp);
/* json.dumps(v, indent (-1: None), ensure_ascii, sort_keys, separators (NULL: Python's
 * defaults for the indent)) appended to out; -1 (out partly written) when v holds an
 * Undefined, which Python cannot serialise. */
int jinja_dumps(const json_t *v, int indent, bool ensure_ascii, bool sort_keys,
                const char *item_sep, const char *key_sep, struct strbuf *out);

/* ---- compile-time memory (parse.c) ---------------------------------------------------- */

/* Zeroed, 16-byte aligned memory that lives until jinja_arena_free(*arena). */
void *jinja_arena_alloc(void **arena, size_t n);
char *jinja_arena_strndup(void **arena, const char *s, size_t n);  /* NUL-terminated copy */
void jinja_arena_free(void *arena);

/* ---- tokens (lex.c) -------------------------------------------------------------------- */

enum jtok_kind {
    JTK_TEXT, JTK_VAR_BEGIN, JTK_VAR_END, JTK_BLOCK_BEGIN, JTK_BLOCK_END,
    JTK_NAME, JTK_STRING, JTK_INT, JTK_FLOAT, JTK_OP, JTK_EOF,
};

struct jtoken {
    enum jtok_kind kind;
    int line, col;
    const char *s;   /* TEXT / NAME / STRING (decoded) / OP; arena-owned, NUL-terminated */
    size_t len;
    int64_t ival;
    double fval;
};

/* Lex a whole template: newlines normalised, whitespace control applied (jinja.h,
 * invariant 2), ending with one JTK_EOF. Token strings go to *arena; *toks (NULL on error)
 * is the caller's to hs_free. Errors name the line and column. */
int jinja_lex(const char *source, size_t len, void **arena, struct jtoken **toks, size_t *n_toks,
              struct hs_err *err);

/* ---- syntax tree ----------------------------------------------------------------------- */

enum jnode_kind {
    /* expressions */
    JN_CONST, JN_NAME, JN_GETATTR, JN_GETITEM, JN_SLICE, JN_CALL, JN_FILTER, JN_TEST,
    JN_BINOP, JN_NEG, JN_POS, JN_NOT, JN_AND, JN_OR, JN_COMPARE, JN_CONDEXPR, JN_CONCAT,
    JN_LIST, JN_TUPLE, JN_DICT,
    /* statements */
    JN_TEXT, JN_OUTPUT, JN_IF, JN_FOR, JN_SET, JN_SET_BLOCK, JN_MACRO, JN_BREAK, JN_CONTINUE,
};

enum jop {
    JOP_ADD, JOP_SUB, JOP_MUL, JOP_DIV, JOP_FLOORDIV, JOP_MOD, JOP_POW,
    JOP_EQ, JOP_NE, JOP_LT, JOP_LE, JOP_GT, JOP_GE, JOP_IN, JOP_NOTIN,
};

/* One node shape for all kinds; each field's comment says which kinds use it. Nodes live
 * in the template's arena and are immutable after compilation. */
struct jnode {
    enum jnode_kind kind;
    int line;
    int op;                       /* BINOP: enum jop; TEST: negated */
    const char *name;             /* NAME / GETATTR / FILTER / TEST / MACRO / SET target */
    const char *name2;            /* SET ns.attr: the attribute */
    json_t *cval;                 /* CONST (owned by the template's constant pool) */
    const char *text;             /* TEXT */
    size_t text_len;
    struct jnode *a, *b, *c, *d;  /* operands, conditions, slice parts */
    struct jnode **args;          /* call/filter/test positional args, list items, body */
    int n_args;
    const char **kw_names;        /* keyword names / macro params / for and set targets */
    struct jnode **kw_vals;       /* keyword values / macro defaults (NULL: none) */
    int n_kw;
    struct jnode **body2;         /* IF / FOR: else body; COMPARE: operands after the first */
    int n_body2;
    int *ops;                     /* COMPARE: enum jop per operand in body2 */
    const struct jbuiltin *builtin; /* FILTER / TEST: its row, NULL when the name is unknown
                                       (allowed inside {% if %}; an error if it runs) */
};

struct jinja_template {
    struct jnode **body;
    int n_body;
    json_t *consts;   /* keeps every CONST value alive */
    void *arena;      /* every node and string of the tree */
};

/* ---- evaluator internals (eval.c <-> builtins.c) ---------------------------------------- */

struct scope;

/* The state of one render. */
struct rctx {
    const json_t *ctx;
    struct scope *root;
    struct hs_err *err;
    int call_depth;
    int loop_depth;
    int eval_depth;  /* guards the C stack against deep expression trees */
};

/* Evaluated call arguments: positional, then keyword (names borrowed from the tree). */
struct args {
    struct jv *pos;
    int n_pos;
    struct jv *kw;
    const char *const *kw_names;
    int n_kw;
};

/* A runtime error "template line N: ..." in r->err; returns the (negative) code. */
int jinja_err(struct rctx *r, int line, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int jinja_undef_err(struct rctx *r, int line, const struct jv *v);
/* Argument at position `pos` or named `name` (either may be -1 / NULL); NULL if absent. */
const struct jv *jinja_arg(const struct args *a, int pos, const char *name);
/* obj.name and obj[key] with Jinja2's fallbacks; obj must not be undefined. */
struct jv jinja_getattr(const struct jv *obj, const char *name);
struct jv jinja_getitem(const struct jv *obj, const struct jv *key);
bool jinja_index(const struct jv *key, int64_t *out);  /* an int (or bool) index */
/* The items Python's iter() walks (list, dict keys, characters; undefined: none) as a new
 * JSON array reference. */
int jinja_iter(struct rctx *r, int line, const struct jv *v, json_t **out);
int jinja_len(struct rctx *r, int line, const struct jv *v, int64_t *out);
/* A LIST value of kind `kind` taking over the reference l. */
struct jv jinja_seq(json_t *l, enum jv_seq kind);
/* A new JSON reference for storing v in a container; an error for macros, loops, ... */
int jinja_to_json(struct rctx *r, int line, const struct jv *v, json_t **out);
struct jv jinja_to_str(const struct jv *v);  /* Python str(v) as a STR value */
void jinja_html_escape(const char *s, size_t n, struct strbuf *out);
int jinja_binop(struct rctx *r, int line, int op, const struct jv *a, const struct jv *b, struct jv *out);
int jinja_compare(struct rctx *r, int line, int op, const struct jv *a, const struct jv *b, bool *out);

/* ---- builtins (builtins.c) ------------------------------------------------------------ */

/* What a builtin is called on; a name means one thing per kind ("lower" is a filter, a
 * test and a str method). */
enum jb_kind { JB_FILTER, JB_TEST, JB_STR_METHOD, JB_DICT_METHOD, JB_LIST_METHOD, JB_FUNC };

struct jbuiltin;

/* One call of a builtin: v is a filter's or test's input or a method's receiver (NULL for
 * a global function); positional arguments count from `first` (map hands its own on after
 * the filter's name). */
struct jcall {
    struct rctx *r;
    int line;
    const struct jbuiltin *b;
    const struct jv *v;
    const struct args *a;
    int first;
};

/* Sets *out (a test: a BOOL) or returns an error from jinja_err. */
typedef int (*jbuiltin_fn)(const struct jcall *c, struct jv *out);

/* A row of the one builtin table. */
struct jbuiltin {
    const char *name;
    enum jb_kind kind;
    int variant;      /* which behaviour of fn this name selects (see each function) */
    jbuiltin_fn fn;
};

/* The row for (kind, name), or NULL: the compile-time check and every dispatch use it. */
const struct jbuiltin *jinja_builtin_find(enum jb_kind kind, const char *name);
/* Methods and functions as values: ids are rows of the table. */
int jinja_method_find(enum jv_kind kind, const char *name);  /* method id, or -1 */
int jinja_func_find(const char *name);                       /* global function id, or -1 */
struct jv jinja_method_value(const struct jv *recv, int id);
int jinja_call_method(struct rctx *r, int line, const struct jv *m, const struct args *a, struct jv *out);
int jinja_call_func(struct rctx *r, int line, int id, const struct args *a, struct jv *out);
/* Apply filter / test row b (NULL: the name is unknown, an error naming it) to v with
 * arguments a (a filter's positional ones from index first). */
int jinja_filter(struct rctx *r, int line, const struct jbuiltin *b, const char *name,
                 const struct jv *v, const struct args *a, int first, struct jv *out);
int jinja_test(struct rctx *r, int line, const struct jbuiltin *b, const char *name,
               const struct jv *v, const struct args *a, bool *out);

#endif
