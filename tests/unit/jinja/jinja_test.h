/*
 * jinja_test.h — what the jinja suites share: one render context, a render helper and a
 * runner for tables of cases. Every expected string was produced by Python jinja2 with
 * transformers' settings (tools/ref/render.py) and is compared byte for byte; error cases
 * must fail with a message that names the line.
 */
#ifndef HS_TEST_JINJA_TEST_H
#define HS_TEST_JINJA_TEST_H

#include "jinja/jinja.h"

#include <stddef.h>

/* The context every case renders with. */
extern const char *const JINJA_TEST_CTX;

struct jcase {
    const char *name;
    const char *tpl;
    const char *expected; /* NULL: jinja2 raises */
};

/* Render `tpl` with the JSON context; returns HS_OK and the text in *out (caller frees),
 * or the error code with the message in err. */
int jinja_test_render(const char *tpl, const char *ctx_json, char **out, struct hs_err *err);
/* Each case renders to its expected bytes, or fails with a message naming a line. */
void jinja_test_cases(const struct jcase *cases, size_t n);
/* tpl fails (to compile or render) with a message containing want1 and want2 (may be NULL). */
void jinja_test_error(const char *tpl, const char *want1, const char *want2);

#endif
