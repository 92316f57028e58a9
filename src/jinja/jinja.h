/*
 * jinja — a small, exact Jinja2 interpreter for chat templates. A leaf module: it knows
 * nothing of requests, models or the server, only template text, a JSON context and the
 * bytes they render to. Depends on base (and jansson, whose values it computes with).
 *
 * Design note
 * -----------
 * Chat templates are Python programs in disguise: what the model sees depends on Jinja2's
 * whitespace rules and on how Python prints values. The interpreter therefore copies
 * Jinja2's behaviour as transformers configures it (trim_blocks, lstrip_blocks,
 * loopcontrols, default Undefined, no autoescape, tojson = json.dumps(ensure_ascii=False))
 * rather than a cleaner idea of it.
 *
 * Files, by stage:
 *
 *   source ──lex.c──> tokens ──parse.c──> tree (struct jinja_template, immutable)
 *                                            │
 *                     context (JSON) ──eval.c──> text
 *                                            │
 *             value.c: runtime values, Python str/repr/==/<, json.dumps
 *             builtins.c: filters, tests, methods and global functions, one table
 *
 * Supported: {{ }}, {% if/elif/else %}, {% for x in xs [if c] %} (+ else, tuple targets,
 * loop.*), {% set %} (names, tuples, ns.attr, block set), {% macro %} and calls,
 * {% break/continue %}, {% raw %}, {# #}, whitespace control (- and +); expressions with
 * Python operators, comparisons, tests, filters, slices, literals and the string / dict /
 * list methods templates call (the table in builtins.c is the whole set). Values are
 * jansson trees, so context data is shared, not copied.
 *
 * Not supported, each an error rather than a different rendering: extends, include,
 * import, call blocks, filter blocks, with, recursive loops, loop.cycle, dict literals with
 * non-string keys, format specs in str.format, printf-style `%` on strings, filters outside
 * the table (a compile error, or a runtime one inside {% if %} as in Jinja2). Known
 * differences that only show when a template prints such values: tuples nested inside
 * lists print as lists, generators print as "<generator object>" and can be iterated more
 * than once, upper/lower use one-to-one case mappings ("ß".upper() stays "ß"), repr()
 * escapes only the non-printable characters in its table, integers are 64-bit.
 *
 * Invariants:
 *   1. The Qwen3 / Qwen3.5 / Qwen3.6 templates render byte-identically to Python jinja2
 *      with transformers' settings (tests/golden/template_parity.sh checks it).
 *   2. Lexing follows Jinja2's lexer: newlines normalised to "\n", one trailing newline
 *      dropped, "{%-" / "-%}" strip all whitespace, trim_blocks removes the newline after
 *      a block or comment tag, lstrip_blocks removes spaces before a block or comment tag
 *      that starts its line (not before {{ }}), and "{%+" disables that.
 *   3. The tree is immutable after compilation; a template renders from any number of
 *      threads at once (constants are shared jansson values, refcounted atomically).
 *   4. Every error names the template line; compile errors also the column.
 *   5. Scoping is Jinja2's: each loop iteration and each macro call gets a fresh scope whose
 *      assignments vanish at its end; macros see the top-level scope as it is at call time.
 *   6. A filter, test, method or function name means what its row in the one builtin table
 *      says, both when the template is compiled (unknown filters and tests are refused)
 *      and when it runs.
 */
#ifndef HS_JINJA_H
#define HS_JINJA_H

#include "base/base.h"

#include <jansson.h>

struct jinja_template;

/* Compile template source; syntax errors name the line and column. */
int jinja_compile(const char *source, size_t len, struct jinja_template **out, struct hs_err *err);
/* Render with `ctx` (a JSON object of top-level variables) appended to out. Runtime errors
 * (raise_exception, undefined operations) name the template line. */
int jinja_render(const struct jinja_template *t, const json_t *ctx, struct strbuf *out,
                 struct hs_err *err);
void jinja_free(struct jinja_template *t);
/* Python json.dumps(v, ensure_ascii=False) with indent as given (-1: none), appended. */
void jinja_tojson(const json_t *v, int indent, struct strbuf *out);

#endif
