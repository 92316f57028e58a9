/* sha256.c — SHA-256 through the system's libcrypto (OpenSSL), the one implementation in the
 * tree: the fingerprint of a logits row in request reports (`first_logits_sha256`, so two
 * runs compare bit for bit without shipping rows) and the bank's blob checksums use the same
 * library.
 *
 * Invariants:
 *   1. The digest is big-endian, as the standard writes it; the hex form is 64 lowercase
 *      digits and a NUL.
 *   2. A libcrypto failure (it cannot fail for an in-memory digest short of an allocation
 *      failure) aborts like any other allocation failure: a wrong digest is never returned.
 */
#include "sys/sys.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>

void sys_sha256(const void *data, size_t len, uint8_t out[32])
{
    unsigned int n = 0;
    if (!EVP_Digest(data, len, out, &n, EVP_sha256(), NULL) || n != 32) {
        fprintf(stderr, "headstart: SHA-256 failed in libcrypto\n");
        abort();
    }
}

void sys_sha256_hex(const void *data, size_t len, char out[65])
{
    static const char hex[] = "0123456789abcdef";
    uint8_t d[32];
    sys_sha256(data, len, d);
    for (int i = 0; i < 32; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[64] = 0;
}
