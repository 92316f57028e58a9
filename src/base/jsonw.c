/* jsonw.c — a minimal streaming JSON writer for what we emit (configs, tokenizers, the
 * --json lines of the commands). Strings are repaired to valid UTF-8 (base/utf8.c). */
#include "base/base.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void jsonw_init(struct jsonw *w, struct strbuf *out, int indent)
{
    w->out = out;
    w->depth = 0;
    w->indent = indent;
    w->need_comma[0] = false;
    w->after_key = false;
}

static void newline(struct jsonw *w)
{
    if (!w->indent) return;
    strbuf_putc(w->out, '\n');
    for (int i = 0; i < w->depth * w->indent; i++) strbuf_putc(w->out, ' ');
}

/* Before any value or key: a comma if needed and the indentation. */
static void before_item(struct jsonw *w)
{
    if (w->after_key) {
        w->after_key = false;
        return;
    }
    if (w->need_comma[w->depth]) strbuf_putc(w->out, ',');
    if (w->depth > 0) newline(w);
    w->need_comma[w->depth] = true;
}

static void container_open(struct jsonw *w, char c)
{
    before_item(w);
    strbuf_putc(w->out, c);
    assert(w->depth + 1 < (int)HS_ARRAY_LEN(w->need_comma));
    w->depth++;
    w->need_comma[w->depth] = false;
}

static void container_close(struct jsonw *w, char c)
{
    bool had_items = w->need_comma[w->depth];
    w->depth--;
    if (had_items) newline(w);
    strbuf_putc(w->out, c);
}

void jsonw_obj_begin(struct jsonw *w) { container_open(w, '{'); }
void jsonw_obj_end(struct jsonw *w) { container_close(w, '}'); }
void jsonw_arr_begin(struct jsonw *w) { container_open(w, '['); }
void jsonw_arr_end(struct jsonw *w) { container_close(w, ']'); }

void jsonw_key(struct jsonw *w, const char *key)
{
    before_item(w);
    json_escape_append(w->out, key, strlen(key));
    strbuf_puts(w->out, w->indent ? ": " : ":");
    w->after_key = true;
}

void jsonw_str(struct jsonw *w, const char *s) { jsonw_strn(w, s, strlen(s)); }

void jsonw_strn(struct jsonw *w, const char *s, size_t n)
{
    before_item(w);
    json_escape_append(w->out, s, n);
}

void jsonw_int(struct jsonw *w, int64_t v)
{
    before_item(w);
    strbuf_printf(w->out, "%lld", (long long)v);
}

void jsonw_uint(struct jsonw *w, uint64_t v)
{
    before_item(w);
    strbuf_printf(w->out, "%llu", (unsigned long long)v);
}

void jsonw_double(struct jsonw *w, double v)
{
    before_item(w);
    if (!isfinite(v)) { strbuf_puts(w->out, "null"); return; }
    char buf[40];
    if (v == floor(v) && fabs(v) < 1e16) {
        /* integer-valued: plain digits plus ".0" so readers keep it a float (Python's
         * repr does the same below 1e16); %.0f is exact here */
        snprintf(buf, sizeof buf, "%.0f.0", v);
        strbuf_puts(w->out, buf);
        return;
    }
    for (int prec = 1; prec <= 17; prec++) { /* shortest round-tripping form */
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    strbuf_puts(w->out, buf);
    /* keep it a float literal: a large integer-valued double needs a fraction too */
    if (!strpbrk(buf, ".e")) strbuf_puts(w->out, ".0");
}

void jsonw_bool(struct jsonw *w, bool v)
{
    before_item(w);
    strbuf_puts(w->out, v ? "true" : "false");
}

void jsonw_null(struct jsonw *w)
{
    before_item(w);
    strbuf_puts(w->out, "null");
}

void json_escape_append(struct strbuf *sb, const char *s, size_t n)
{
    strbuf_putc(sb, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '"': strbuf_puts(sb, "\\\""); break;
        case '\\': strbuf_puts(sb, "\\\\"); break;
        case '\n': strbuf_puts(sb, "\\n"); break;
        case '\r': strbuf_puts(sb, "\\r"); break;
        case '\t': strbuf_puts(sb, "\\t"); break;
        case '\b': strbuf_puts(sb, "\\b"); break;
        case '\f': strbuf_puts(sb, "\\f"); break;
        default:
            if (c < 0x20) {
                strbuf_printf(sb, "\\u%04x", c);
            } else if (c < 0x80) {
                strbuf_putc(sb, (char)c);
            } else {
                size_t len = hs_utf8_seq_len(s + i, n - i);
                if (len) strbuf_append(sb, s + i, len);
                else strbuf_append(sb, HS_UTF8_REPLACEMENT, 3);
                if (len) i += len - 1;
            }
        }
    }
    strbuf_putc(sb, '"');
}
