/* test_hash_utf8.c — FNV-1a against published vectors; the UTF-8 decoder's code points,
 * partial prefixes and open tails. */
#include <criterion/criterion.h>
#include <string.h>

#include "base/base.h"

Test(base_hash, fnv1a_vectors)
{
    /* the FNV authors' test values for "", "a" and "foobar" */
    cr_assert_eq(hs_fnv1a64_str(""), 0xcbf29ce484222325ull);
    cr_assert_eq(hs_fnv1a64_str("a"), 0xaf63dc4c8601ec8cull);
    cr_assert_eq(hs_fnv1a64_str("foobar"), 0x85944171f73967e8ull);
    cr_assert_eq(hs_fnv1a32(HS_FNV1A32_INIT, "", 0), 0x811c9dc5u);
    cr_assert_eq(hs_fnv1a32(HS_FNV1A32_INIT, "a", 1), 0xe40c292cu);
    cr_assert_eq(hs_fnv1a32(HS_FNV1A32_INIT, "foobar", 6), 0xbf9cf968u);
    /* continuing a hash equals hashing the concatenation */
    cr_assert_eq(hs_fnv1a64(hs_fnv1a64(HS_FNV1A64_INIT, "foo", 3), "bar", 3), hs_fnv1a64_str("foobar"));
}

Test(base_utf8, decode_code_points)
{
    static const struct { const char *s; size_t len; uint32_t cp; } ok[] = {
        { "A", 1, 0x41 }, { "\xC2\xA0", 2, 0xA0 }, { "\xE2\x82\xAC", 3, 0x20AC },
        { "\xF0\x9F\x98\x80", 4, 0x1F600 }, { "\xF4\x8F\xBF\xBF", 4, 0x10FFFF },
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        uint32_t cp = 0;
        bool partial = true;
        cr_assert_eq(hs_utf8_decode(ok[i].s, strlen(ok[i].s), &cp, &partial), ok[i].len);
        cr_assert_eq(cp, ok[i].cp);
        cr_assert(!partial);
    }
    static const char *const bad[] = { "\x80", "\xC0\x80", "\xE0\x80\x80", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\xF5\x80\x80\x80" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        bool partial = true;
        cr_assert_eq(hs_utf8_decode(bad[i], strlen(bad[i]), NULL, &partial), 0, "bad[%zu]", i);
        cr_assert(!partial, "bad[%zu]", i);
    }
    bool partial = false;
    cr_assert_eq(hs_utf8_decode("\xF0\x9F\x98", 3, NULL, &partial), 0);
    cr_assert(partial);
    partial = false;
    cr_assert_eq(hs_utf8_decode("\xE0\x80", 2, NULL, &partial), 0); /* overlong already */
    cr_assert(!partial);
}

Test(base_utf8, open_tail)
{
    cr_assert_eq(hs_utf8_open_tail("ab", 2), 0);
    cr_assert_eq(hs_utf8_open_tail("a\xE2\x82", 3), 2);
    cr_assert_eq(hs_utf8_open_tail("a\xE2", 2), 1);
    cr_assert_eq(hs_utf8_open_tail("a\xE2\x82\xAC", 4), 0); /* complete */
    cr_assert_eq(hs_utf8_open_tail("a\xF0\x9F\x98", 4), 3);
    cr_assert_eq(hs_utf8_open_tail("a\xED\xA0", 3), 0);     /* a surrogate never completes */
    cr_assert_eq(hs_utf8_open_tail("\x80\x80\x80", 3), 0);
}
