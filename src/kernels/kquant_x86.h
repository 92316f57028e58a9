/*
 * kquant_x86.h — small x86 helpers shared by the K-quant SIMD files (q4k_avx2.c,
 * q4k_avx512.c, q5k_avx2.c, q5k_avx512.c). Included only by files compiled with at least
 * the AVX2 flags (F16C for vcvtph2ps); header-only, static inline.
 *
 * Invariants:
 *   1. kq_f16_at is exact and equals hs_f16_to_f32 (vcvtph2ps; a NaN comes out quiet).
 *   2. kq_scales_u32 makes the same bit moves as kern_q4k_scales (q4k.c), on 32-bit words.
 */
#ifndef HS_KERNELS_KQUANT_X86_H
#define HS_KERNELS_KQUANT_X86_H

#include <immintrin.h>
#include <string.h>

#include "kernels/kernels.h"

/* The f16 scale at p as f32. */
static inline __attribute__((always_inline)) float kq_f16_at(const uint8_t *p)
{
    return _cvtsh_ss(hs_rd_u16(p));
}

/* kern_q4k_scales on 32-bit words: sc[0..3] | sc[4..7] | m[0..3] | m[4..7] as four words
 * (byte j of a word is entry j of its group) of the 12 packed bytes at s12 (Q4_K and Q5_K
 * pack their 6-bit scales and mins the same way). */
static inline __attribute__((always_inline)) __m128i kq_scales_u32(const uint8_t *s12)
{
    uint32_t u0, u1, u2;
    memcpy(&u0, s12, 4);
    memcpy(&u1, s12 + 4, 4);
    memcpy(&u2, s12 + 8, 4);
    uint32_t sc_lo = u0 & 0x3f3f3f3fu, m_lo = u1 & 0x3f3f3f3fu;
    uint32_t sc_hi = (u2 & 0x0f0f0f0fu) | ((u0 >> 6) & 0x03030303u) << 4;
    uint32_t m_hi = ((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 6) & 0x03030303u) << 4;
    return _mm_set_epi32((int)m_hi, (int)m_lo, (int)sc_hi, (int)sc_lo);
}

#endif
