/*
 * reqhead.c — a request head checked as it sits in the socket, before libmicrohttpd reads
 * it: the connection front (http.c) peeks at the bytes and asks here whether they are a
 * complete head, an incomplete one, or one that is broken. A broken head gets the API's
 * JSON error from the front; libmicrohttpd would answer it with its own HTML page, which
 * version 0.9.75 has no hook to replace.
 *
 * Design note
 * -----------
 * The checks are the ones libmicrohttpd refuses a head for (RFC 9112's grammar, where it
 * is strict), so a head that passes here is one it accepts, and one refused here is one
 * it would have refused: a request line of method (token characters), target and
 * version; HTTP/1.0 and 1.1 only (another HTTP/x.y: 505); header lines `name: value` with
 * a token name and no space before the colon (a folded line, starting with a space or a
 * tab, continues the previous one); a Host in every HTTP/1.1 request, and at most one;
 * Content-Length values of digits; no NUL and no bare CR; and the whole head within
 * `limit` bytes (431). Empty lines before the request line are skipped (RFC 9112 2.2).
 * The request line is judged as soon as it is complete, and its method as soon as its
 * bytes arrive, so a client speaking something else (a TLS handshake on this plain port)
 * is answered at once rather than at --request-timeout.
 *
 * Invariants:
 *   1. MORE only while the bytes so far can still begin a valid head within `limit`.
 *   2. OK's `len` covers the request line, the header lines and the empty line.
 *   3. The message names what is wrong, with at most 40 bytes of the client's text,
 *      non-printable bytes as \xNN.
 */
#include "server/server_int.h"

#include <stdio.h>
#include <string.h>

static bool tchar(unsigned char c)
{
    if (c >= 'a' && c <= 'z') return true;
    if (c >= 'A' && c <= 'Z') return true;
    if (c >= '0' && c <= '9') return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* At most 40 bytes of s, printable, into out. */
static void quote(const char *s, size_t n, char *out, size_t size)
{
    size_t o = 0;
    for (size_t i = 0; i < n && i < 40 && o + 5 < size; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') out[o++] = (char)c;
        else o += (size_t)snprintf(out + o, size - o, "\\x%02x", c);
    }
    out[o] = 0;
}

static void bad(struct reqhead *h, int code, const char *what, const char *s, size_t n)
{
    char q[200];
    h->verdict = REQHEAD_BAD;
    h->code = code;
    if (s) {
        quote(s, n, q, sizeof q);
        snprintf(h->msg, sizeof h->msg, "malformed HTTP request: %s: \"%s\"", what, q);
    } else {
        snprintf(h->msg, sizeof h->msg, "malformed HTTP request: %s", what);
    }
}

static bool digits(const char *s, size_t n) /* 1..19 digits */
{
    if (n == 0 || n > 19) return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] < '0' || s[i] > '9') return false;
    return true;
}

/* One line [s, s + n) without its CR LF: no NUL, no bare CR. */
static bool line_clean(const char *s, size_t n)
{
    return !memchr(s, 0, n) && !memchr(s, '\r', n);
}

static void request_line(const char *s, size_t n, struct reqhead *h)
{
    size_t m = 0;
    while (m < n && tchar((unsigned char)s[m])) m++;
    if (m == 0 || m == n || s[m] != ' ') { bad(h, HS_ERR_FORMAT, "not a request line", s, n); return; }
    const char *last = memrchr(s, ' ', n);
    if (last == s + m) { bad(h, HS_ERR_FORMAT, "a request line without an HTTP version", s, n); return; }
    const char *target = s + m + 1;
    size_t tn = (size_t)(last - target);
    const char *v = last + 1;
    size_t vn = n - (size_t)(v - s);
    if (tn == 0 || target[0] == ' ') { bad(h, HS_ERR_FORMAT, "no request target", s, n); return; }
    h->anthropic = tn >= 12 && !memcmp(target, "/v1/messages", 12);
    if (vn != 8 || memcmp(v, "HTTP/", 5) || v[5] < '0' || v[5] > '9' || v[6] != '.' || v[7] < '0' || v[7] > '9') {
        bad(h, HS_ERR_FORMAT, "not an HTTP version", v, vn);
        return;
    }
    if (v[5] != '1' || (v[7] != '0' && v[7] != '1')) {
        bad(h, API_ERR_HTTP_VERSION, "only HTTP/1.0 and HTTP/1.1 are served", v, vn);
        return;
    }
    h->http11 = v[7] == '1';
}

static bool name_is(const char *s, size_t n, const char *name)
{
    return strlen(name) == n && !strncasecmp(s, name, n);
}

void reqhead_check(const char *buf, size_t n, size_t limit, struct reqhead *h)
{
    memset(h, 0, sizeof *h);
    size_t p = 0;
    while (p < n && (buf[p] == '\r' || buf[p] == '\n')) p++; /* empty lines first */
    size_t start = p;
    /* the request line, or as much of it as came */
    const char *lf = memchr(buf + p, '\n', n - p);
    if (!lf) {
        size_t m = p;
        while (m < n && tchar((unsigned char)buf[m])) m++;
        if (m < n && (buf[m] != ' ' || m == p)) { bad(h, HS_ERR_FORMAT, "not a request line", buf + p, n - p); return; }
        if (n - start > limit) bad(h, API_ERR_HEADERS_TOO_LARGE, "the request line is longer than the head limit", NULL, 0);
        return; /* MORE */
    }
    size_t ln = (size_t)(lf - (buf + p));
    if (ln && buf[p + ln - 1] == '\r') ln--;
    if (!line_clean(buf + p, ln)) { bad(h, HS_ERR_FORMAT, "a NUL or a bare CR in the request line", buf + p, ln); return; }
    request_line(buf + p, ln, h);
    if (h->verdict == REQHEAD_BAD) return;
    p = (size_t)(lf - buf) + 1;
    int n_host = 0;
    bool any = false;
    for (;;) {
        lf = memchr(buf + p, '\n', n - p);
        if (!lf) {
            if (n - start > limit) bad(h, API_ERR_HEADERS_TOO_LARGE, "the request head is larger than the limit", NULL, 0);
            else h->verdict = REQHEAD_MORE;
            return;
        }
        ln = (size_t)(lf - (buf + p));
        if (ln && buf[p + ln - 1] == '\r') ln--;
        const char *s = buf + p;
        p = (size_t)(lf - buf) + 1;
        if (p - start > limit) { bad(h, API_ERR_HEADERS_TOO_LARGE, "the request head is larger than the limit", NULL, 0); return; }
        if (ln == 0) break; /* the end of the head */
        if (!line_clean(s, ln)) { bad(h, HS_ERR_FORMAT, "a NUL or a bare CR in a header line", s, ln); return; }
        if (s[0] == ' ' || s[0] == '\t') { /* a folded line continues the previous one */
            if (!any) { bad(h, HS_ERR_FORMAT, "a continuation line before any header", s, ln); return; }
            continue;
        }
        size_t m = 0;
        while (m < ln && tchar((unsigned char)s[m])) m++;
        if (m == 0 || m == ln || s[m] != ':') { bad(h, HS_ERR_FORMAT, "not a header line", s, ln); return; }
        any = true;
        const char *v = s + m + 1;
        size_t vn = ln - m - 1;
        while (vn && (*v == ' ' || *v == '\t')) { v++; vn--; }
        while (vn && (v[vn - 1] == ' ' || v[vn - 1] == '\t')) vn--;
        if (name_is(s, m, "Host")) n_host++;
        else if (name_is(s, m, "Content-Length") && !digits(v, vn)) {
            bad(h, HS_ERR_FORMAT, "Content-Length is not a number", s, ln);
            return;
        }
    }
    if (n_host > 1) { bad(h, HS_ERR_FORMAT, "more than one Host header", NULL, 0); return; }
    if (h->http11 && n_host == 0) { bad(h, HS_ERR_FORMAT, "an HTTP/1.1 request without a Host header", NULL, 0); return; }
    h->verdict = REQHEAD_OK;
    h->len = p;
}
