/*
 * xtype_x86_int.h — private to src/kernels: lane helpers shared by the SIMD files of the extra
 * block types (q5_1_avx2.c, q5_1_avx512.c, iq4_avx2.c, iq4_avx512.c). Included only by files
 * compiled with at least the AVX2 flags. Header-only, always inlined.
 *
 * Invariants:
 *   1. Integer moves and sums only (exact): they cannot change a bit of the float order the
 *      callers keep (kernels.h "extra block types": lane b % 8 of 8 partial sums per output).
 *   2. xt_hsum8(p)[j] is the sum of the 8 int32 lanes of p[j]: 8 blocks' integer dots land
 *      in lanes j = b % 8, so one vfmadd231ps updates the 8 partial sums exactly as 8 scalar
 *      fmaf calls would.
 */
#ifndef HS_KERNELS_XTYPE_X86_INT_H
#define HS_KERNELS_XTYPE_X86_INT_H

#include <immintrin.h>

#include "kernels/kernels.h"

#define XT_INLINE static inline __attribute__((always_inline))

/* matmul_avx512.c's Q8_0 matmul (VNNI): a type whose blocks decode exactly to Q8_0 blocks
 * with the same per-block float steps (IQ4_NL: int8 = codebook value, the same f16 scale)
 * reaches its panel path by decoding rows into Q8_0 rows first (iq4_avx512.c). The panel
 * path runs for n_tok >= XT_Q8V_PANEL_TOKS and K <= XT_Q8V_KMAX (its stack buffers). */
#define XT_Q8V_KMAX 8192
#define XT_Q8V_PANEL_TOKS 17
void kern_matmul_q8_0_vnni(float *y, int64_t y_ld, const uint8_t *w, const struct kern_q8_block *xq,
                           int64_t n_tok, int64_t k, int64_t r0, int64_t r1);

/* [sum p[0], sum p[1], ..., sum p[7]] (int32 lanes). */
XT_INLINE __m256i xt_hsum8(const __m256i p[8])
{
    __m256i ab = _mm256_hadd_epi32(_mm256_hadd_epi32(p[0], p[1]), _mm256_hadd_epi32(p[2], p[3]));
    __m256i cd = _mm256_hadd_epi32(_mm256_hadd_epi32(p[4], p[5]), _mm256_hadd_epi32(p[6], p[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(ab, cd, 0x20), _mm256_permute2x128_si256(ab, cd, 0x31));
}

/* The 8 f16 at base + j * stride (j < 8) as f32 lanes (vcvtph2ps: exact). */
XT_INLINE __m256 xt_f16x8(const uint8_t *base, size_t stride)
{
    return _mm256_cvtph_ps(_mm_set_epi16((short)hs_rd_u16(base + 7 * stride), (short)hs_rd_u16(base + 6 * stride),
                                         (short)hs_rd_u16(base + 5 * stride), (short)hs_rd_u16(base + 4 * stride),
                                         (short)hs_rd_u16(base + 3 * stride), (short)hs_rd_u16(base + 2 * stride),
                                         (short)hs_rd_u16(base + stride), (short)hs_rd_u16(base)));
}

/* The activation scales of 8 consecutive Q8_0 blocks. */
XT_INLINE __m256 xt_xd8(const struct kern_q8_block *xb)
{
    return _mm256_set_ps(xb[7].d, xb[6].d, xb[5].d, xb[4].d, xb[3].d, xb[2].d, xb[1].d, xb[0].d);
}

/* The 32 nibbles of a 16-byte run as bytes in value order (low nibbles, then high). */
XT_INLINE __m256i xt_nibbles(const uint8_t *qs)
{
    const __m128i m4 = _mm_set1_epi8(15);
    __m128i v = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(v, m4));
}

/* The halving tree 4, 2, 1 over 8 partial sums. */
XT_INLINE float xt_tree8(float *a)
{
    for (int h = 4; h >= 1; h /= 2)
        for (int l = 0; l < h; l++) a[l] = a[l] + a[l + h];
    return a[0];
}

#endif
