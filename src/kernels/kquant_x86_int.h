/*
 * kquant_x86_int.h — private to src/kernels: small x86 helpers shared by the K-quant SIMD
 * files (q4k_*, q5k_*, q6k_* .c), so that each exists once. Included only by files compiled
 * with at least the AVX2 flags (F16C for vcvtph2ps); the second part only where the AVX-512
 * flags are on. Header-only and always inlined: every caller gets the code it had when the
 * helper was its own.
 *
 * Invariants:
 *   1. kq_f16_at is exact and equals hs_f16_to_f32 (vcvtph2ps; a NaN comes out quiet).
 *   2. kq_scales_u32 makes the same bit moves as kern_q4k_scales (q4k.c), on 32-bit words.
 *   3. Integer helpers only (sums, broadcasts, lane moves, transposes): exact, so they cannot
 *      change a bit of any order the float steps keep.
 */
#ifndef HS_KERNELS_KQUANT_X86_INT_H
#define HS_KERNELS_KQUANT_X86_INT_H

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

/* The sum of the 8 int32 lanes of v (exact; the order is free). */
static inline __attribute__((always_inline)) int32_t kq_hsum256(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* The 4 bytes at p in every dword lane of a ymm (the AVX2 panels' activation broadcast). */
static inline __attribute__((always_inline)) __m256i kq_dup32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* The 8 x 8 dword transpose of the AVX2 panels (q4k_avx2.c, q6k_avx2.c): on return v[d]
 * lane i = dword d of the input v[i]. */
static inline __attribute__((always_inline)) void kq_transpose8(__m256i v[8])
{
    __m256i t[8], u[8];
    _Pragma("GCC unroll 4")
    for (int m = 0; m < 4; m++) {
        t[2 * m] = _mm256_unpacklo_epi32(v[2 * m], v[2 * m + 1]);     /* dwords 0,1 | 4,5 */
        t[2 * m + 1] = _mm256_unpackhi_epi32(v[2 * m], v[2 * m + 1]); /* dwords 2,3 | 6,7 */
    }
    _Pragma("GCC unroll 2")
    for (int h = 0; h < 2; h++) {                                     /* rows 4h .. 4h+3 */
        u[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h + 0], t[4 * h + 2]);
        u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h + 0], t[4 * h + 2]);
        u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
        u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
    }
    _Pragma("GCC unroll 4")
    for (int d = 0; d < 4; d++) {
        v[d] = _mm256_permute2x128_si256(u[d], u[4 + d], 0x20);
        v[4 + d] = _mm256_permute2x128_si256(u[d], u[4 + d], 0x31);
    }
}

#ifdef __AVX512F__
/* ---- AVX-512 only (q4k_avx512.c, q5k_avx512.c, q6k_avx512.c) ------------------------------ */

/* Lane i (of 32 int16) takes entry base + i / per of a 16-entry table. */
static inline __attribute__((always_inline)) __m512i kq_spread_idx(int base, int per)
{
    int16_t ix[32];
    for (int i = 0; i < 32; i++) ix[i] = (int16_t)(base + i / per);
    return _mm512_loadu_si512(ix);
}

/* The dword at p of rows 0..15 (lane i = row i). */
static inline __attribute__((always_inline)) __m512i kq_col_u32(const uint8_t *p, size_t rb)
{
    int32_t v[16];
    for (int i = 0; i < 16; i++) memcpy(&v[i], p + (size_t)i * rb, 4);
    return _mm512_loadu_si512(v);
}

/* Byte j (0..3) of each dword lane, zero-extended (sx: sign-extended) to int16 and doubled
 * into both halves of the lane: the (v, v) pairs vpdpwssd takes. */
static inline __attribute__((always_inline)) __m512i kq_byte_pair(__m512i v, int j, bool sx)
{
    __m512i x = _mm512_slli_epi32(v, 24 - 8 * j);
    x = sx ? _mm512_srai_epi32(x, 24) : _mm512_srli_epi32(x, 24);
    return _mm512_or_si512(_mm512_and_si512(x, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(x, 16));
}

/* The f16 at p of rows 0..15 as f32 lanes (reads 2 bytes per row: Q6_K's d ends the block). */
static inline __attribute__((always_inline)) __m512 kq_rows_f16(const uint8_t *p, size_t rb)
{
    uint16_t v[16];
    for (int i = 0; i < 16; i++) v[i] = hs_rd_u16(p + (size_t)i * rb);
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)v));
}

/* The 4 (8) bytes at p in every dword (qword) lane. */
static inline __attribute__((always_inline)) __m512i kq_bcast32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

static inline __attribute__((always_inline)) __m512i kq_bcast64(const void *p)
{
    long long v;
    memcpy(&v, p, 8);
    return _mm512_set1_epi64(v);
}

/* The panel tiles' switch from a run-time token count nt (1..6) to a constant one: expands
 * to fn(y, y_ld, pk, nb, r, <extra args>, t0, ng, NT) with the caller's names. */
#define KQ_TILE_CASES(fn, ng, ...)                                                  \
    switch (nt) {                                                                   \
    case 6: fn(y, y_ld, pk, nb, r, __VA_ARGS__, t0, ng, 6); break;                  \
    case 5: fn(y, y_ld, pk, nb, r, __VA_ARGS__, t0, ng, 5); break;                  \
    case 4: fn(y, y_ld, pk, nb, r, __VA_ARGS__, t0, ng, 4); break;                  \
    case 3: fn(y, y_ld, pk, nb, r, __VA_ARGS__, t0, ng, 3); break;                  \
    case 2: fn(y, y_ld, pk, nb, r, __VA_ARGS__, t0, ng, 2); break;                  \
    default: fn(y, y_ld, pk, nb, r, __VA_ARGS__, t0, ng, 1); break;                 \
    }
#endif /* __AVX512F__ */

#endif
