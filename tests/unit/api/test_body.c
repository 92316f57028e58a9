/*
 * test_body.c — api_body_prescan: elements (containers and commas) and depth are counted
 * outside strings only, escapes inside strings do not end them, the first byte over a limit
 * is named, and bytes that are not JSON are scanned without error (syntax is jansson's).
 */
#include "api/api.h"

#include <criterion/criterion.h>
#include <string.h>

static int scan(const char *s, int64_t max_elements, int max_depth, struct hs_err *err)
{
    hs_err_clear(err);
    return api_body_prescan(s, strlen(s), max_elements, max_depth, err);
}

Test(body, counts_containers_and_commas)
{
    struct hs_err err;
    /* { [ , , ] } : 2 containers + 2 commas = 4 elements */
    cr_assert_eq(scan("{\"a\":[1,2,3]}", 4, 8, &err), HS_OK);
    cr_assert_eq(scan("{\"a\":[1,2,3]}", 3, 8, &err), HS_ERR_LIMIT);
    cr_assert(strstr(err.msg, "more than 3 JSON elements"), "%s", err.msg);
    cr_assert(strstr(err.msg, "byte 9"), "%s", err.msg);
}

Test(body, strings_are_not_counted)
{
    struct hs_err err;
    /* brackets, commas and escaped quotes inside a string are text */
    cr_assert_eq(scan("{\"k\":\"[[[,,,{{{ \\\" ]]] \\\\\"}", 1, 1, &err), HS_OK, "%s", err.msg);
    /* a backslash escapes one byte only: the string ends at the next quote */
    cr_assert_eq(scan("[\"\\\\\",[]]", 3, 8, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(scan("[\"\\\\\",[]]", 3, 1, &err), HS_ERR_LIMIT);
}

Test(body, depth)
{
    struct hs_err err;
    char deep[200];
    memset(deep, '[', 65);
    memset(deep + 65, ']', 65);
    deep[130] = 0;
    cr_assert_eq(scan(deep, 1000, 65, &err), HS_OK);
    cr_assert_eq(scan(deep, 1000, 64, &err), HS_ERR_LIMIT);
    cr_assert(strstr(err.msg, "deeper than 64 levels (byte 64)"), "%s", err.msg);
    /* depth falls back after a close: many shallow siblings are fine */
    cr_assert_eq(scan("[[],[],[],[]]", 100, 2, &err), HS_OK);
}

Test(body, hostile_bytes_scan_cleanly)
{
    struct hs_err err;
    static const char junk[] = { ']', ']', '}', '"', '\\', 0, '"', ',', 0x7f, (char)0xff };
    hs_err_clear(&err);
    cr_assert_eq(api_body_prescan(junk, sizeof(junk), 1, 1, &err), HS_OK, "%s", err.msg);
    /* a string left open at the end (a trailing backslash too) reads nothing past len */
    cr_assert_eq(scan("[\"abc\\", 10, 10, &err), HS_OK);
    cr_assert_eq(api_body_prescan("", 0, 0, 0, &err), HS_OK);
}

Test(body, the_default_limits_hold_a_large_agent_body)
{
    /* an agent-sized body: 2000 messages of 40 parts each, well under the defaults */
    struct strbuf b;
    strbuf_init(&b);
    strbuf_puts(&b, "{\"messages\":[");
    for (int i = 0; i < 2000; i++) {
        strbuf_puts(&b, i ? ",{\"role\":\"user\",\"content\":[" : "{\"role\":\"user\",\"content\":[");
        for (int k = 0; k < 40; k++) strbuf_puts(&b, k ? ",{\"type\":\"text\",\"text\":\"a, [b]\"}" : "{\"type\":\"text\",\"text\":\"x\"}");
        strbuf_puts(&b, "]}");
    }
    strbuf_puts(&b, "]}");
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(api_body_prescan(b.buf, b.len, API_BODY_MAX_ELEMENTS, API_BODY_MAX_DEPTH, &err), HS_OK, "%s", err.msg);
    strbuf_free(&b);
}
