/* utf8.c — the one UTF-8 rule for text we emit: strict validation (RFC 3629: no overlong
 * forms, no surrogates, nothing past U+10FFFF) and its repair, each byte that does not
 * belong to a valid sequence replaced by U+FFFD. Every JSON string headstart writes goes
 * through it (json_escape_append, the HTTP responses in api/), so a token that ends inside
 * a multi-byte sequence can never make a line that a strict parser rejects.
 */
#include "base/base.h"

size_t hs_utf8_seq_len(const void *p, size_t n)
{
    const unsigned char *s = p;
    if (n == 0) return 0;
    unsigned c = s[0], lo = 0x80, hi = 0xBF;
    size_t len;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;   /* overlong */
        if (c == 0xED) hi = 0x9F;   /* surrogates */
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;   /* overlong */
        if (c == 0xF4) hi = 0x8F;   /* past U+10FFFF */
    } else {
        return 0;
    }
    if (len > n || s[1] < lo || s[1] > hi) return 0;
    for (size_t k = 2; k < len; k++)
        if ((s[k] & 0xC0) != 0x80) return 0;
    return len;
}

bool hs_utf8_valid(const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n;) {
        size_t len = hs_utf8_seq_len(s + i, n - i);
        if (len == 0) return false;
        i += len;
    }
    return true;
}

void hs_utf8_clean_append(struct strbuf *out, const void *p, size_t n)
{
    const char *s = p;
    for (size_t i = 0; i < n;) {
        size_t len = hs_utf8_seq_len(s + i, n - i);
        if (len) strbuf_append(out, s + i, len);
        else strbuf_append(out, HS_UTF8_REPLACEMENT, 3);
        i += len ? len : 1;
    }
}
