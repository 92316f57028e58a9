/* utf8.c — the one UTF-8 rule for text we emit: strict validation (RFC 3629: no overlong
 * forms, no surrogates, nothing past U+10FFFF) and its repair, each byte that does not
 * belong to a valid sequence replaced by U+FFFD. Every JSON string headstart writes goes
 * through it (json_escape_append, the HTTP responses in api/), so a token that ends inside
 * a multi-byte sequence can never make a line that a strict parser rejects. The same
 * decoder serves every reader of UTF-8 in the tree (request text, the tokenizer's stream,
 * the template interpreter), so there is one definition of a valid sequence.
 */
#include "base/base.h"

size_t hs_utf8_decode(const void *p, size_t n, uint32_t *cp, bool *partial)
{
    const unsigned char *s = p;
    if (partial) *partial = false;
    if (n == 0) return 0;
    unsigned c = s[0], lo = 0x80, hi = 0xBF; /* the allowed range of the second byte */
    size_t len;
    if (c < 0x80) {
        if (cp) *cp = c;
        return 1;
    }
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
    uint32_t v = c & (0x3Fu >> (len - 1));
    for (size_t k = 1; k < len; k++) {
        if (k >= n) {
            if (partial) *partial = true;
            return 0;
        }
        unsigned b = s[k];
        if (k == 1 ? (b < lo || b > hi) : (b & 0xC0) != 0x80) return 0;
        v = v << 6 | (b & 0x3F);
    }
    if (cp) *cp = v;
    return len;
}

size_t hs_utf8_seq_len(const void *p, size_t n)
{
    return hs_utf8_decode(p, n, NULL, NULL);
}

size_t hs_utf8_open_tail(const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t k = 1; k <= 3 && k <= n; k++) {
        if ((s[n - k] & 0xC0) == 0x80) continue; /* a continuation byte: look further back */
        bool partial;
        hs_utf8_decode(s + n - k, k, NULL, &partial);
        return partial ? k : 0;
    }
    return 0;
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
