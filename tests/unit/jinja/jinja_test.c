/*
 * jinja_test.c — the helpers of jinja_test.h.
 */
#include "jinja_test.h"

#include <criterion/criterion.h>
#include <string.h>

const char *const JINJA_TEST_CTX =
    "{\"xs\": [1, 2, 3], \"d\": {\"a\": 1, \"b\": [1, \"x\"]}, \"s\": \"h\\u00e9llo\", \"n\": null, "
    "\"f\": 1.5, \"e\": [], \"m\": [{\"role\": \"user\", \"content\": \"hi\"}, "
    "{\"role\": \"tool\", \"content\": \"r1\"}, {\"role\": \"tool\", \"content\": \"r2\"}]}";

int jinja_test_render(const char *tpl, const char *ctx_json, char **out, struct hs_err *err)
{
    json_error_t jerr;
    json_t *ctx = json_loads(ctx_json, 0, &jerr);
    cr_assert(ctx, "bad test context: %s", jerr.text);
    struct jinja_template *t = NULL;
    struct strbuf sb;
    strbuf_init(&sb);
    hs_err_clear(err);
    int rc = jinja_compile(tpl, strlen(tpl), &t, err);
    if (rc == HS_OK)
        rc = jinja_render(t, ctx, &sb, err);
    jinja_free(t);
    json_decref(ctx);
    *out = rc == HS_OK ? strbuf_detach(&sb, NULL) : NULL;
    if (rc == HS_OK && !*out)
        *out = hs_strdup("");
    strbuf_free(&sb);
    return rc;
}

void jinja_test_cases(const struct jcase *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct jcase *c = &cases[i];
        char *got = NULL;
        struct hs_err err = {0};
        int rc = jinja_test_render(c->tpl, JINJA_TEST_CTX, &got, &err);
        if (c->expected) {
            cr_expect_eq(rc, HS_OK, "%s: failed: %s", c->name, err.msg);
            if (rc == HS_OK)
                cr_expect_str_eq(got, c->expected, "%s: rendered differently", c->name);
        } else {
            cr_expect_neq(rc, HS_OK, "%s: rendered '%s' where jinja2 raises", c->name, got ? got : "");
            cr_expect(strstr(err.msg, "line ") != NULL, "%s: message names no line: %s", c->name, err.msg);
        }
        hs_free(got);
    }
}

void jinja_test_error(const char *tpl, const char *want1, const char *want2)
{
    char *got = NULL;
    struct hs_err err = {0};
    int rc = jinja_test_render(tpl, JINJA_TEST_CTX, &got, &err);
    cr_assert_neq(rc, HS_OK, "'%s' rendered '%s'", tpl, got ? got : "");
    cr_expect(strstr(err.msg, want1) != NULL, "'%s' not in '%s'", want1, err.msg);
    if (want2)
        cr_expect(strstr(err.msg, want2) != NULL, "'%s' not in '%s'", want2, err.msg);
    hs_free(got);
}
