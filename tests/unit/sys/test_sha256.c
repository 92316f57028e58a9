/* test_sha256.c — sys_sha256 against the FIPS 180-4 vectors and the padding boundaries. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "sys/sys.h"

static void hex_of(const char *s, size_t n, char out[65]) { sys_sha256_hex(s, n, out); }

Test(sys_sha256, fips_vectors)
{
    char h[65];
    hex_of("", 0, h);
    cr_assert_str_eq(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    hex_of("abc", 3, h);
    cr_assert_str_eq(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *m448 = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    hex_of(m448, strlen(m448), h);
    cr_assert_str_eq(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    char *mil = malloc(1000000);
    memset(mil, 'a', 1000000);
    hex_of(mil, 1000000, h);
    cr_assert_str_eq(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(mil);
    uint8_t d[32];
    sys_sha256("abc", 3, d);
    cr_assert_eq(d[0], 0xba);
    cr_assert_eq(d[31], 0xad);
}

Test(sys_sha256, padding_boundaries)
{
    /* expected digests computed with an independent implementation (Python hashlib) of
     * bytes (i * 7 + 1) & 255 */
    static const struct { size_t n; const char *hex; } v[] = {
        { 55, "16fa57a0a3423a715d594516339f36189d6b5f93754a9714fef202616a9fabfe" },
        { 56, "c37b44e5f1b18554b36966f4f8e08bfbf3164c4b6c10374d12d89850892073c5" },
        { 63, "bbba992d2c85af960fb2987a1fd05e0aa82a3db3c740dd8982a9e273b75e36a3" },
        { 64, "66bd4633ed6f71c4ecfa4763bf7ba1c8ec7612de9aa6c0578a7b675207c71e0b" },
        { 119, "a3ed307b730fa77c07531300c6e4a282330011d4d4caf6bb7b63ae05950f4b66" },
        { 120, "8e3b15d9fea7472655aa069620b7f8c2e55ee1499f763200a7515fe826e99d20" },
        { 1000, "095ecb62e30793ab4b954cd6a0586d0cc91f7ea5b1332694d8da780e98676d78" },
    };
    char buf[1000], h[65];
    for (int i = 0; i < 1000; i++) buf[i] = (char)((i * 7 + 1) & 255);
    for (size_t k = 0; k < sizeof(v) / sizeof(v[0]); k++) {
        sys_sha256_hex(buf, v[k].n, h);
        cr_assert_str_eq(h, v[k].hex, "length %zu", v[k].n);
    }
}
