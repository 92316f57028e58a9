/* test_size.c — byte sizes, overflow checks, allocation, little-endian loads. */
#include <criterion/criterion.h>

#include <signal.h>
#include <string.h>

#include "base/base.h"

Test(base_size, parse_accepts_units)
{
    static const struct { const char *s; int64_t v; } ok[] = {
        { "0", 0 }, { "4096", 4096 }, { "10b", 10 }, { "10B", 10 }, { "1k", 1024 },
        { "1K", 1024 }, { "2kb", 2048 }, { "3KiB", 3072 }, { "512M", 512ll << 20 },
        { "512mib", 512ll << 20 }, { "2 MB", 2ll << 20 }, { "8G", 8ll << 30 },
        { "8g", 8ll << 30 }, { "1.5GiB", 1610612736ll }, { "0.5k", 512 }, { "1T", 1ll << 40 },
        { "2TiB", 2ll << 40 }, { "1e3", 1000 }, { " 7", 7 }, { "4096 ", 4096 },
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(ok); i++)
        cr_assert_eq(hs_parse_size(ok[i].s), ok[i].v, "'%s' -> %lld, want %lld", ok[i].s,
                     (long long)hs_parse_size(ok[i].s), (long long)ok[i].v);
}

Test(base_size, parse_rejects_garbage)
{
    static const char *const bad[] = {
        "", "abc", "-1", "-1G", "5X", "8GiBx", "G", "nan", "inf", "1e30", "9000000T", "1 2",
        "8 G B",
    };
    cr_assert_eq(hs_parse_size(NULL), -1);
    for (size_t i = 0; i < HS_ARRAY_LEN(bad); i++)
        cr_assert_eq(hs_parse_size(bad[i]), -1, "'%s' must be rejected, got %lld", bad[i],
                     (long long)hs_parse_size(bad[i]));
}

Test(base_size, format_picks_binary_units)
{
    static const struct { uint64_t b; const char *s; } cases[] = {
        { 0, "0 B" }, { 1, "1 B" }, { 1023, "1023 B" }, { 1024, "1.00 KiB" },
        { 1536, "1.50 KiB" }, { 1048576, "1.00 MiB" }, { 1610612736ull, "1.50 GiB" },
        { 1ull << 40, "1.00 TiB" }, { 1ull << 50, "1024.00 TiB" },
        { UINT64_MAX, "16777216.00 TiB" },
    };
    char buf[64];
    for (size_t i = 0; i < HS_ARRAY_LEN(cases); i++) {
        const char *r = hs_format_size(cases[i].b, buf, sizeof buf);
        cr_assert_eq(r, buf);
        cr_assert_str_eq(buf, cases[i].s);
    }
    char small[5];
    hs_format_size(1610612736ull, small, sizeof small);
    cr_assert_str_eq(small, "1.50", "truncated, still terminated");
}

Test(base_size, mul_and_add_overflow)
{
    uint64_t r = 0;
    cr_assert_not(hs_mul_overflow(0, UINT64_MAX, &r));
    cr_assert_eq(r, 0);
    cr_assert_not(hs_mul_overflow(UINT64_MAX, 1, &r));
    cr_assert_eq(r, UINT64_MAX);
    cr_assert(hs_mul_overflow(UINT64_MAX, 2, &r));
    cr_assert(hs_mul_overflow(1ull << 32, 1ull << 32, &r));
    cr_assert_not(hs_mul_overflow(1ull << 32, (1ull << 32) - 1, &r));
    cr_assert_eq(r, (1ull << 63) + (1ull << 63) - (1ull << 32));
    cr_assert_not(hs_mul_overflow(3037000499ull, 3037000499ull, &r)); /* floor(sqrt(2^64)) */
    cr_assert(hs_mul_overflow(4294967296ull, 4294967297ull, &r));
    cr_assert_not(hs_add_overflow(UINT64_MAX - 1, 1, &r));
    cr_assert_eq(r, UINT64_MAX);
    cr_assert(hs_add_overflow(UINT64_MAX, 1, &r));
    cr_assert(hs_add_overflow(1ull << 63, 1ull << 63, &r));
}

Test(base_alloc, allocators_behave)
{
    void *z = hs_malloc(0);
    cr_assert_not_null(z);
    hs_free(z);
    hs_free(NULL);
    unsigned char *c = hs_calloc(100, 3);
    for (int i = 0; i < 300; i++) cr_assert_eq(c[i], 0);
    c = hs_realloc(c, 5000);
    for (int i = 0; i < 300; i++) cr_assert_eq(c[i], 0, "realloc keeps the contents");
    hs_free(c);
    static const size_t aligns[] = { 1, 8, 16, 64, 4096 };
    for (size_t i = 0; i < HS_ARRAY_LEN(aligns); i++) {
        void *p = hs_aligned_alloc(aligns[i], 100);
        cr_assert_eq((uintptr_t)p % aligns[i], 0);
        memset(p, 1, 100);
        hs_free(p);
    }
    char *s = hs_strndup("abcdef", 3);
    cr_assert_str_eq(s, "abc");
    hs_free(s);
    s = hs_strdup("");
    cr_assert_str_empty(s);
    hs_free(s);
}

Test(base_alloc, calloc_overflow_aborts, .signal = SIGABRT)
{
    void *p = hs_calloc(SIZE_MAX / 2, 3);
    hs_free(p);
}

Test(base_alloc, little_endian_loads)
{
    const uint8_t b[] = { 0xff, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09 };
    cr_assert_eq(hs_rd_u16(b + 1), 0x0201);
    cr_assert_eq(hs_rd_u32(b + 1), 0x04030201u);
    cr_assert_eq(hs_rd_u64(b + 1), 0x0807060504030201ull);
    cr_assert_eq(hs_rd_u64(b + 2), 0x0908070605040302ull);
    cr_assert_eq(hs_rd_u32(b), 0x030201ffu);
}
