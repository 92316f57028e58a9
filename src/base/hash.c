/* hash.c — FNV-1a, the one small non-cryptographic hash of the tree: open-addressing name
 * tables (tensor sets, the GGUF key index, the test tokenizer's vocabulary) and ids derived
 * from a string (tool-call ids from a request id, thinking signatures, mkmodel's per-tensor
 * seeds). Checksums of files use XXH3 or SHA-256 instead.
 *
 * Invariants:
 *   1. Byte at a time, xor then multiply (FNV-1a, not FNV-1), with the standard offset
 *      bases and primes; the values are part of derived ids and seeds, so never change.
 */
#include "base/base.h"

#include <string.h>

#define FNV64_PRIME 0x100000001b3ull
#define FNV32_PRIME 16777619u

uint64_t hs_fnv1a64(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * FNV64_PRIME;
    return h;
}

uint64_t hs_fnv1a64_str(const char *s)
{
    return hs_fnv1a64(HS_FNV1A64_INIT, s, strlen(s));
}

uint32_t hs_fnv1a32(uint32_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * FNV32_PRIME;
    return h;
}
