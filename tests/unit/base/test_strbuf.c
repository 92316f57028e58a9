/* test_strbuf.c — growable strings: growth, printf, reset, detach. */
#include <criterion/criterion.h>

#include <string.h>

#include "base/base.h"

static void check_invariants(const struct strbuf *sb)
{
    cr_assert_not_null(sb->buf);
    cr_assert_lt(sb->len, sb->cap, "room for the NUL");
    cr_assert_eq(sb->buf[sb->len], '\0');
}

Test(base_strbuf, init_is_empty_and_free_twice_is_fine)
{
    struct strbuf sb;
    strbuf_init(&sb);
    cr_assert_null(sb.buf);
    cr_assert_eq(sb.len, 0);
    cr_assert_eq(sb.cap, 0);
    strbuf_free(&sb);
    strbuf_free(&sb);
    cr_assert_null(sb.buf);
}

Test(base_strbuf, byte_by_byte_growth_matches_reference)
{
    enum { N = 10000 };
    static char want[N];
    struct strbuf sb;
    strbuf_init(&sb);
    for (int i = 0; i < N; i++) {
        want[i] = (char)('a' + i % 26);
        strbuf_putc(&sb, want[i]);
        cr_assert_eq(sb.len, (size_t)i + 1);
        check_invariants(&sb);
    }
    cr_assert_eq(memcmp(sb.buf, want, N), 0);
    strbuf_free(&sb);
}

Test(base_strbuf, append_keeps_embedded_nuls_and_chunks)
{
    struct strbuf sb;
    strbuf_init(&sb);
    static const char chunk[5] = { 'a', '\0', 'b', '\0', 'c' };
    size_t total = 0;
    for (size_t k = 0; k < 300; k++) {
        strbuf_append(&sb, chunk, k % 6); /* lengths 0..5, including empty appends */
        total += k % 6;
        cr_assert_eq(sb.len, total);
        check_invariants(&sb);
    }
    size_t off = 0;
    for (size_t k = 0; k < 300; k++) {
        cr_assert_eq(memcmp(sb.buf + off, chunk, k % 6), 0);
        off += k % 6;
    }
    strbuf_append(&sb, NULL, 0);
    cr_assert_eq(sb.len, total);
    strbuf_free(&sb);
}

Test(base_strbuf, puts_and_printf_append)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_puts(&sb, "n=");
    strbuf_printf(&sb, "%d,%s,%.2f", -12, "xy", 1.5);
    strbuf_printf(&sb, "%s", "");
    cr_assert_str_eq(sb.buf, "n=-12,xy,1.50");
    cr_assert_eq(sb.len, strlen("n=-12,xy,1.50"));

    /* a printf far larger than the first allocation */
    char big[5000];
    memset(big, 'q', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    strbuf_printf(&sb, "[%s]", big);
    cr_assert_eq(sb.len, 13 + 1 + 4999 + 1);
    cr_assert_eq(memcmp(sb.buf, "n=-12,xy,1.50[", 14), 0);
    cr_assert_eq(sb.buf[13 + 1 + 4999], ']');
    cr_assert_eq(memcmp(sb.buf + 14, big, 4999), 0);
    check_invariants(&sb);
    strbuf_free(&sb);
}

Test(base_strbuf, reset_keeps_memory)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_puts(&sb, "hello world, a longer string than before");
    size_t cap = sb.cap;
    char *mem = sb.buf;
    strbuf_reset(&sb);
    cr_assert_eq(sb.len, 0);
    cr_assert_eq(sb.cap, cap);
    cr_assert_eq(sb.buf, mem);
    cr_assert_str_empty(sb.buf);
    strbuf_puts(&sb, "ok");
    cr_assert_str_eq(sb.buf, "ok");
    strbuf_free(&sb);
    strbuf_reset(&sb); /* on an empty buffer */
    cr_assert_eq(sb.len, 0);
}

Test(base_strbuf, detach_hands_over_and_empties)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_puts(&sb, "abc");
    size_t len = 99;
    char *s = strbuf_detach(&sb, &len);
    cr_assert_str_eq(s, "abc");
    cr_assert_eq(len, 3);
    cr_assert_null(sb.buf);
    cr_assert_eq(sb.len, 0);
    cr_assert_eq(sb.cap, 0);
    hs_free(s);

    char *e = strbuf_detach(&sb, &len); /* an empty buffer detaches as "" */
    cr_assert_not_null(e);
    cr_assert_str_empty(e);
    cr_assert_eq(len, 0);
    hs_free(e);
    e = strbuf_detach(&sb, NULL);
    cr_assert_str_empty(e);
    hs_free(e);
}
