/* strbuf.c — a growable byte string, always NUL-terminated after the first append. */
#include "base/base.h"

#include <stdio.h>
#include <string.h>

void strbuf_init(struct strbuf *sb) { sb->buf = NULL; sb->len = sb->cap = 0; }

void strbuf_free(struct strbuf *sb)
{
    hs_free(sb->buf);
    strbuf_init(sb);
}

void strbuf_reset(struct strbuf *sb)
{
    sb->len = 0;
    if (sb->buf) sb->buf[0] = '\0';
}

static void reserve(struct strbuf *sb, size_t extra)
{
    size_t need = sb->len + extra + 1;
    if (need <= sb->cap) return;
    size_t cap = sb->cap ? sb->cap : 64;
    while (cap < need) cap *= 2;
    sb->buf = hs_realloc(sb->buf, cap);
    sb->cap = cap;
}

void strbuf_append(struct strbuf *sb, const void *data, size_t n)
{
    reserve(sb, n);
    if (n) memcpy(sb->buf + sb->len, data, n);
    sb->len += n;
    sb->buf[sb->len] = '\0';
}

void strbuf_puts(struct strbuf *sb, const char *s) { strbuf_append(sb, s, strlen(s)); }
void strbuf_putc(struct strbuf *sb, char c) { strbuf_append(sb, &c, 1); }

void strbuf_printf(struct strbuf *sb, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n > 0) {
        reserve(sb, (size_t)n);
        vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap2);
        sb->len += (size_t)n;
    }
    va_end(ap2);
}

char *strbuf_detach(struct strbuf *sb, size_t *len_out)
{
    if (!sb->buf) strbuf_append(sb, "", 0);
    char *b = sb->buf;
    if (len_out) *len_out = sb->len;
    strbuf_init(sb);
    return b;
}
