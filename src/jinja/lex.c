/*
 * lex.c — the first stage of compiling a template: source text to tokens, with Jinja2's
 * whitespace rules applied as the text between tags is cut (jinja.h has the design note;
 * its invariant 2 is this file's contract).
 *
 * Invariants:
 *   1. Text tokens hold the text exactly as it renders: trim_blocks, lstrip_blocks and
 *      the -/+ signs are resolved here, so the parser and the evaluator never look at
 *      whitespace again.
 *   2. String literal tokens hold the decoded value (Python's escapes), never the source.
 *   3. Every token's strings live in the template's arena; the token array itself is the
 *      caller's and dies with the compile.
 */
#include "jinja/jinja_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct lexer {
    const char *src;
    size_t n, pos;
    int line;
    size_t line_start;
    struct jtoken *toks;
    size_t n_toks, cap_toks;
    void **arena;
    struct hs_err *err;
};

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* Python's \s (str.isspace) at s[i]: returns the byte length of the space there, or 0. */
static size_t space_at(const char *s, size_t n, size_t i)
{
    if (i >= n)
        return 0;
    size_t j = i;
    uint32_t cp = jinja_utf8_next(s, n, &j);
    return py_is_space(cp) ? j - i : 0;
}

/* Length of s[0..n) after Python's rstrip(). */
static size_t py_rstrip_len(const char *s, size_t n)
{
    size_t keep = 0, i = 0;
    while (i < n) {
        size_t j = i;
        uint32_t cp = jinja_utf8_next(s, n, &j);
        if (!py_is_space(cp))
            keep = j;
        i = j;
    }
    return keep;
}

static void lex_advance(struct lexer *lx, size_t to)
{
    for (size_t i = lx->pos; i < to; i++) {
        if (lx->src[i] == '\n') {
            lx->line++;
            lx->line_start = i + 1;
        }
    }
    lx->pos = to;
}

static struct jtoken *lex_push(struct lexer *lx, enum jtok_kind kind, size_t at)
{
    if (lx->n_toks == lx->cap_toks) {
        lx->cap_toks = lx->cap_toks ? lx->cap_toks * 2 : 256;
        lx->toks = hs_realloc(lx->toks, lx->cap_toks * sizeof(*lx->toks));
    }
    struct jtoken *t = &lx->toks[lx->n_toks++];
    memset(t, 0, sizeof(*t));
    t->kind = kind;
    /* line/col of `at` (at >= line_start of the current line, or an earlier position) */
    int line = 1;
    size_t ls = 0;
    if (at >= lx->line_start) {
        line = lx->line;
        ls = lx->line_start;
    } else {
        for (size_t i = 0; i < at; i++)
            if (lx->src[i] == '\n') {
                line++;
                ls = i + 1;
            }
    }
    t->line = line;
    t->col = (int)(at - ls) + 1;
    return t;
}

static int lex_error(struct lexer *lx, size_t at, const char *what)
{
    int line = 1;
    size_t ls = 0;
    for (size_t i = 0; i < at && i < lx->n; i++)
        if (lx->src[i] == '\n') {
            line++;
            ls = i + 1;
        }
    return hs_err_set(lx->err, HS_ERR_FORMAT, "template line %d column %d: %s", line,
                      (int)(at - ls) + 1, what);
}

static void lex_text(struct lexer *lx, size_t at, const char *s, size_t n)
{
    if (n == 0)
        return;
    struct jtoken *t = lex_push(lx, JTK_TEXT, at);
    t->s = jinja_arena_strndup(lx->arena, s, n);
    t->len = n;
}

/* Apply the whitespace rules to the text before a tag, as Jinja2's OptionalLStrip does.
 * sign: '-', '+' or 0; lstrip: the tag is a block or comment tag. */
static size_t text_before_tag(const char *text, size_t n, char sign, bool lstrip,
                              bool line_starting)
{
    if (sign == '-')
        return py_rstrip_len(text, n);
    if (sign == '+' || !lstrip)
        return n;
    size_t l_pos = 0;
    for (size_t i = n; i > 0; i--)
        if (text[i - 1] == '\n') {
            l_pos = i;
            break;
        }
    if (l_pos == 0 && !line_starting)
        return n;
    if (l_pos == n)
        return n;
    for (size_t i = l_pos; i < n;) {
        size_t k = space_at(text, n, i);
        if (!k)
            return n;
        i += k;
    }
    return l_pos;
}

/* After a block/comment end: "-%}" eats all whitespace, "%}" one newline (trim_blocks). */
static size_t after_tag_end(const char *s, size_t n, size_t p, char sign, bool trim)
{
    if (sign == '-') {
        size_t k;
        while ((k = space_at(s, n, p)) != 0)
            p += k;
    } else if (sign != '+' && trim && p < n && s[p] == '\n') {
        p++;
    }
    return p;
}

/* Decode a Jinja string literal body the way Python's unicode-escape codec does. */
static int lex_unescape(struct lexer *lx, const char *s, size_t n, size_t at, struct strbuf *out)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c != '\\' || i + 1 >= n) {
            strbuf_putc(out, c);
            continue;
        }
        char e = s[++i];
        switch (e) {
        case '\n': break;
        case '\\': strbuf_putc(out, '\\'); break;
        case '\'': strbuf_putc(out, '\''); break;
        case '"': strbuf_putc(out, '"'); break;
        case 'a': strbuf_putc(out, '\a'); break;
        case 'b': strbuf_putc(out, '\b'); break;
        case 'f': strbuf_putc(out, '\f'); break;
        case 'n': strbuf_putc(out, '\n'); break;
        case 'r': strbuf_putc(out, '\r'); break;
        case 't': strbuf_putc(out, '\t'); break;
        case 'v': strbuf_putc(out, '\v'); break;
        case 'x': case 'u': case 'U': {
            int nd = e == 'x' ? 2 : e == 'u' ? 4 : 8;
            uint32_t cp = 0;
            for (int k = 0; k < nd; k++) {
                char h = i + 1 + (size_t)k < n ? s[i + 1 + (size_t)k] : 0;
                int d = h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                      : h >= 'A' && h <= 'F' ? h - 'A' + 10 : -1;
                if (d < 0)
                    return lex_error(lx, at, "truncated \\x/\\u escape in a string literal");
                cp = cp * 16 + (uint32_t)d;
            }
            if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
                return lex_error(lx, at, "bad code point escape in a string literal");
            i += (size_t)nd;
            jinja_utf8_put(out, cp);
            break;
        }
        default:
            if (e >= '0' && e <= '7') {
                uint32_t cp = (uint32_t)(e - '0');
                for (int k = 0; k < 2 && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '7'; k++)
                    cp = cp * 8 + (uint32_t)(s[++i] - '0');
                jinja_utf8_put(out, cp);
            } else if (e == 'N') {
                return lex_error(lx, at, "\\N{...} escapes are not supported");
            } else {
                strbuf_putc(out, '\\');
                strbuf_putc(out, e);
            }
        }
    }
    return HS_OK;
}

static const char *const OPS2[] = {"//", "**", "==", "!=", ">=", "<="};
static const char OPS1[] = "+-/*%~[](){}><=.:|,;";

/* Lex the inside of a {{ }} or {% %} tag, up to and including its end. */
static int lex_tag(struct lexer *lx, bool block, bool *line_starting)
{
    const char *s = lx->src;
    size_t n = lx->n;
    int depth = 0;
    for (;;) {
        size_t p = lx->pos;
        while (p < n && is_ws(s[p]))
            p++;
        lex_advance(lx, p);
        if (p >= n)
            return lex_error(lx, p, block ? "unexpected end of template in a {% %} tag"
                                          : "unexpected end of template in a {{ }} tag");
        if (depth == 0) {
            char sign = (s[p] == '-' || s[p] == '+') ? s[p] : 0;
            size_t q = p + (sign ? 1 : 0);
            const char *end = block ? "%}" : "}}";
            if (q + 1 < n && s[q] == end[0] && s[q + 1] == end[1] && (block || sign != '+')) {
                lex_push(lx, block ? JTK_BLOCK_END : JTK_VAR_END, p);
                size_t after = after_tag_end(s, n, q + 2, sign, block);
                *line_starting = after > 0 && s[after - 1] == '\n';
                lex_advance(lx, after);
                return HS_OK;
            }
        }
        char c = s[p];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_') {
            size_t q = p;
            while (q < n && ((s[q] >= 'a' && s[q] <= 'z') || (s[q] >= 'A' && s[q] <= 'Z') ||
                             (s[q] >= '0' && s[q] <= '9') || s[q] == '_'))
                q++;
            struct jtoken *t = lex_push(lx, JTK_NAME, p);
            t->s = jinja_arena_strndup(lx->arena, s + p, q - p);
            t->len = q - p;
            lex_advance(lx, q);
        } else if (c >= '0' && c <= '9') {
            size_t q = p;
            bool is_float = false;
            while (q < n && ((s[q] >= '0' && s[q] <= '9') || (s[q] == '_' && q + 1 < n && s[q + 1] >= '0' && s[q + 1] <= '9')))
                q++;
            if (q + 1 < n && s[q] == '.' && s[q + 1] >= '0' && s[q + 1] <= '9') {
                is_float = true;
                q++;
                while (q < n && ((s[q] >= '0' && s[q] <= '9') || (s[q] == '_' && q + 1 < n && s[q + 1] >= '0' && s[q + 1] <= '9')))
                    q++;
            }
            if (q < n && (s[q] == 'e' || s[q] == 'E')) {
                size_t r = q + 1;
                if (r < n && (s[r] == '+' || s[r] == '-'))
                    r++;
                if (r < n && s[r] >= '0' && s[r] <= '9') {
                    while (r < n && ((s[r] >= '0' && s[r] <= '9') || s[r] == '_'))
                        r++;
                    is_float = true;
                    q = r;
                }
            }
            char buf[128];
            size_t k = 0;
            for (size_t i = p; i < q && k + 1 < sizeof(buf); i++)
                if (s[i] != '_')
                    buf[k++] = s[i];
            buf[k] = 0;
            struct jtoken *t = lex_push(lx, is_float ? JTK_FLOAT : JTK_INT, p);
            errno = 0;
            if (is_float) {
                t->fval = strtod(buf, NULL);
            } else {
                t->ival = strtoll(buf, NULL, 10);
                if (errno == ERANGE)
                    return lex_error(lx, p, "integer literal out of range");
            }
            lex_advance(lx, q);
        } else if (c == '\'' || c == '"') {
            size_t q = p + 1;
            while (q < n && s[q] != c) {
                if (s[q] == '\\' && q + 1 < n)
                    q++;
                q++;
            }
            if (q >= n)
                return lex_error(lx, p, "unterminated string literal");
            struct strbuf sb;
            strbuf_init(&sb);
            int rc = lex_unescape(lx, s + p + 1, q - p - 1, p, &sb);
            if (rc != HS_OK) {
                strbuf_free(&sb);
                return rc;
            }
            struct jtoken *t = lex_push(lx, JTK_STRING, p);
            t->s = jinja_arena_strndup(lx->arena, sb.buf ? sb.buf : "", sb.len);
            t->len = sb.len;
            strbuf_free(&sb);
            lex_advance(lx, q + 1);
        } else {
            size_t len = 0;
            for (size_t k = 0; k < HS_ARRAY_LEN(OPS2); k++)
                if (p + 1 < n && s[p] == OPS2[k][0] && s[p + 1] == OPS2[k][1])
                    len = 2;
            if (!len && strchr(OPS1, c) && c)
                len = 1;
            if (!len)
                return lex_error(lx, p, "unexpected character in a tag");
            if (c == '(' || c == '[' || c == '{')
                depth++;
            else if ((c == ')' || c == ']' || c == '}') && len == 1 && depth > 0)
                depth--;
            struct jtoken *t = lex_push(lx, JTK_OP, p);
            t->s = jinja_arena_strndup(lx->arena, s + p, len);
            t->len = len;
            lex_advance(lx, p + len);
        }
    }
}

/* Is there "{%[-+]? raw [-+]?%}" at p? Sets *end to past the tag (with "-%}" whitespace). */
static bool lex_raw_tag(const char *s, size_t n, size_t p, const char *word, char *sign_out,
                        size_t *inner_end, char *end_sign)
{
    if (p + 1 >= n || s[p] != '{' || s[p + 1] != '%')
        return false;
    size_t q = p + 2;
    char sign = 0;
    if (q < n && (s[q] == '-' || s[q] == '+'))
        sign = s[q++];
    while (q < n && is_ws(s[q]))
        q++;
    size_t wl = strlen(word);
    if (q + wl > n || memcmp(s + q, word, wl) != 0)
        return false;
    q += wl;
    while (q < n && is_ws(s[q]))
        q++;
    char es = 0;
    if (q < n && (s[q] == '-' || s[q] == '+'))
        es = s[q++];
    if (q + 1 >= n || s[q] != '%' || s[q + 1] != '}')
        return false;
    *sign_out = sign;
    *end_sign = es;
    *inner_end = q + 2;
    return true;
}

static int lex_all(struct lexer *lx)
{
    const char *s = lx->src;
    size_t n = lx->n;
    bool line_starting = true;
    while (lx->pos < n) {
        size_t p = lx->pos, tag = n;
        for (size_t i = p; i + 1 < n; i++)
            if (s[i] == '{' && (s[i + 1] == '{' || s[i + 1] == '%' || s[i + 1] == '#')) {
                tag = i;
                break;
            }
        if (tag == n) {
            lex_text(lx, p, s + p, n - p);
            lex_advance(lx, n);
            break;
        }
        char kind = s[tag + 1];
        char sign = tag + 2 < n && (s[tag + 2] == '-' || s[tag + 2] == '+') ? s[tag + 2] : 0;
        char rs, res;
        size_t rend;
        if (kind == '%' && lex_raw_tag(s, n, tag, "raw", &rs, &rend, &res)) {
            lex_text(lx, p, s + p, text_before_tag(s + p, tag - p, rs, true, line_starting));
            size_t body = after_tag_end(s, n, rend, res, false);
            /* find {% endraw %} */
            size_t q = body, eend = 0;
            char es = 0, ees = 0;
            for (; q + 1 < n; q++)
                if (lex_raw_tag(s, n, q, "endraw", &es, &eend, &ees))
                    break;
            if (q + 1 >= n)
                return lex_error(lx, tag, "missing {% endraw %}");
            bool ls = body > 0 && s[body - 1] == '\n';
            lex_text(lx, body, s + body, text_before_tag(s + body, q - body, es, true, ls));
            size_t after = after_tag_end(s, n, eend, ees, true);
            line_starting = after > 0 && s[after - 1] == '\n';
            lex_advance(lx, after);
            continue;
        }
        lex_text(lx, p, s + p, text_before_tag(s + p, tag - p, sign, kind != '{', line_starting));
        if (kind == '#') {
            size_t q = tag + 2;
            while (q + 1 < n && !(s[q] == '#' && s[q + 1] == '}'))
                q++;
            if (q + 1 >= n)
                return lex_error(lx, tag, "unterminated comment");
            char es = q > tag + 2 && (s[q - 1] == '-' || s[q - 1] == '+') ? s[q - 1] : 0;
            size_t after = after_tag_end(s, n, q + 2, es, true);
            line_starting = after > 0 && s[after - 1] == '\n';
            lex_advance(lx, after);
            continue;
        }
        bool block = kind == '%';
        lex_push(lx, block ? JTK_BLOCK_BEGIN : JTK_VAR_BEGIN, tag);
        lex_advance(lx, tag + 2 + (sign ? 1 : 0));
        int rc = lex_tag(lx, block, &line_starting);
        if (rc != HS_OK)
            return rc;
    }
    lex_push(lx, JTK_EOF, n);
    return HS_OK;
}

int jinja_lex(const char *source, size_t len, void **arena, struct jtoken **toks, size_t *n_toks,
              struct hs_err *err)
{
    /* Jinja2 normalises \r\n and \r to \n and drops one trailing newline. */
    char *src = hs_malloc(len + 1);
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        if (source[i] == '\r') {
            src[n++] = '\n';
            if (i + 1 < len && source[i + 1] == '\n')
                i++;
        } else {
            src[n++] = source[i];
        }
    }
    if (n > 0 && src[n - 1] == '\n')
        n--;
    src[n] = 0;
    struct lexer lx = {.src = src, .n = n, .line = 1, .arena = arena, .err = err};
    int rc = lex_all(&lx);
    hs_free(src);
    if (rc != HS_OK) {
        hs_free(lx.toks);
        lx.toks = NULL;
        lx.n_toks = 0;
    }
    *toks = lx.toks;
    *n_toks = lx.n_toks;
    return rc;
}
