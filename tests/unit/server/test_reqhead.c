/* reqhead.c: complete, incomplete and broken request heads, as libmicrohttpd judges them. */
#include <criterion/criterion.h>
#include "server/server_int.h"

#include <string.h>

static struct reqhead check(const char *s)
{
    struct reqhead h;
    reqhead_check(s, strlen(s), 1024, &h);
    return h;
}

Test(reqhead, complete_heads_pass)
{
    static const char head[] = "POST /v1/messages?beta=true HTTP/1.1\r\nHost: 127.0.0.1:8080\r\n"
                               "Content-Length: 12\r\nX-Folded: a\r\n\tb\r\n\r\n{\"x\": 1}";
    struct reqhead h = check(head);
    cr_assert_eq(h.verdict, REQHEAD_OK, "%s", h.msg);
    cr_assert_eq(h.len, strlen(head) - strlen("{\"x\": 1}"));
    cr_assert(h.anthropic);
    cr_assert(h.http11);
    h = check("\r\n\r\nGET /health HTTP/1.0\n\n"); /* empty lines first, bare LF, 1.0 without Host */
    cr_assert_eq(h.verdict, REQHEAD_OK, "%s", h.msg);
    cr_assert_not(h.http11);
    cr_assert_not(h.anthropic);
}

Test(reqhead, incomplete_heads_wait)
{
    static const char *const more[] = { "", "\r\n", "G", "GET", "GET ", "GET /hea", "GET /health HTTP/1.1",
                                        "GET /health HTTP/1.1\r\n", "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ab" };
    for (size_t i = 0; i < sizeof more / sizeof more[0]; i++) {
        struct reqhead h = check(more[i]);
        cr_assert_eq(h.verdict, REQHEAD_MORE, "'%s': %d %s", more[i], h.verdict, h.msg);
    }
}

Test(reqhead, broken_heads_are_named)
{
    static const struct { const char *head; int code; const char *what; } cases[] = {
        { "\x16\x03\x01\x02\x00\x01", HS_ERR_FORMAT, "not a request line" },   /* a TLS hello */
        { "GARBAGE\r\n\r\n", HS_ERR_FORMAT, "not a request line" },
        { "GET /\r\n\r\n", HS_ERR_FORMAT, "without an HTTP version" },
        { "GET / HTTX/1.1\r\n\r\n", HS_ERR_FORMAT, "not an HTTP version" },
        { "GET / HTTP/2.0\r\nHost: x\r\n\r\n", API_ERR_HTTP_VERSION, "only HTTP/1.0 and HTTP/1.1" },
        { "GET /health HTTP/1.1\r\n\r\n", HS_ERR_FORMAT, "without a Host header" },
        { "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", HS_ERR_FORMAT, "more than one Host" },
        { "GET / HTTP/1.1\r\nHost: a\r\nno colon here\r\n\r\n", HS_ERR_FORMAT, "not a header line" },
        { "GET / HTTP/1.1\r\nHost : a\r\n\r\n", HS_ERR_FORMAT, "not a header line" },
        { "GET / HTTP/1.1\r\n folded first\r\nHost: a\r\n\r\n", HS_ERR_FORMAT, "continuation line" },
        { "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 12a\r\n\r\n", HS_ERR_FORMAT, "Content-Length is not" },
        { "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", HS_ERR_FORMAT, "Content-Length is not" },
        { "GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n", HS_ERR_FORMAT, "bare CR" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct reqhead h = check(cases[i].head);
        cr_assert_eq(h.verdict, REQHEAD_BAD, "case %zu", i);
        cr_assert_eq(h.code, cases[i].code, "case %zu: %d", i, h.code);
        cr_assert(strstr(h.msg, cases[i].what), "case %zu: %s", i, h.msg);
    }
    struct reqhead h = check("POST /v1/messages HTTP/1.1\r\nbroken\r\n\r\n");
    cr_assert(h.anthropic); /* the error takes the route's shape */
}

Test(reqhead, the_limit)
{
    char big[2048];
    snprintf(big, sizeof big, "GET / HTTP/1.1\r\nHost: a\r\nX-Big: %01100d", 0);
    struct reqhead h = check(big);
    cr_assert_eq(h.verdict, REQHEAD_BAD);
    cr_assert_eq(h.code, API_ERR_HEADERS_TOO_LARGE);
    cr_assert_eq(api_error_info(h.code)->http_status, 431);
    snprintf(big, sizeof big, "GET /%01100d", 0);
    h = check(big);
    cr_assert_eq(h.code, API_ERR_HEADERS_TOO_LARGE, "%s", h.msg);
    h = check("GET / HTTP/2.0\r\nHost: x\r\n\r\n");
    cr_assert_eq(api_error_info(h.code)->http_status, 505);
}
