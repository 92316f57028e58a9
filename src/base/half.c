/* half.c — IEEE binary16 and bfloat16 conversions (round to nearest even). */
#include "base/base.h"

#include <string.h>

static inline uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static inline float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

float hs_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    /* inf / NaN; a NaN comes out quiet, as F16C's vcvtph2ps makes it, so SIMD kernels
     * can equal this function bit for bit */
    if (exp == 0x1f) return u2f(sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0));
    if (exp == 0) {
        if (man == 0) return u2f(sign);
        /* subnormal: value = man * 2^-24 */
        float v = (float)man * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    return u2f(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t hs_f32_to_f16(float f)
{
    uint32_t u = f2u(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    uint32_t abs = u & 0x7fffffffu;
    if (abs >= 0x7f800000u) /* inf, or NaN: quiet, top payload bits kept (as vcvtps2ph) */
        return (uint16_t)(sign | 0x7c00 | (abs > 0x7f800000u ? 0x200 | ((abs >> 13) & 0x3ff) : 0));
    if (abs >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds past 65504 */
    if (abs < 0x38800000u) { /* result is subnormal or zero */
        if (abs < 0x33000000u) return sign; /* below half the smallest subnormal */
        uint32_t exp = abs >> 23, man = (abs & 0x7fffff) | 0x800000;
        uint32_t shift = 126 - exp; /* 14..24 */
        uint32_t q = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = abs + 0xfff + ((abs >> 13) & 1); /* round to nearest even at bit 13 */
    return (uint16_t)(sign | (((r >> 13) - (112u << 10)) & 0x7fff));
}

float hs_bf16_to_f32(uint16_t h) { return u2f((uint32_t)h << 16); }

uint16_t hs_f32_to_bf16(float f)
{
    uint32_t u = f2u(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}
