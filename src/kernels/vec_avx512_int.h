/*
 * vec_avx512_int.h — private to src/kernels: the lane helpers the AVX-512 files share
 * (ffn_avx512.c, attn_avx512.c, gdn_avx512.c, matmul_avx512.c), so that each written sequence
 * exists once. Included only by files compiled with the AVX-512 flags; header-only, always
 * inlined, so every caller gets the code it had when the helpers were its own.
 *
 * Invariants:
 *   1. exp16 is kern_expf (kernels.h) on 16 lanes, bit for bit: the 16 floats are widened to
 *      two vectors of 8 doubles (exact), the same double multiplies and adds in the same
 *      order (no fma), 2^n from n's bits, one rounding back to f32. Inputs are first clamped
 *      to [-104, 89] so no lane sees inf or NaN inside the polynomial; the three special
 *      cases (NaN -> x + x, > 89 -> inf, < -104 -> 0) are blended in afterwards from the
 *      unclamped x, as the scalar tests them.
 *   2. silu16 / sigmoid16 are kern_silu / kern_sigmoid lane-wise: IEEE add, multiply and
 *      divide round the same in a vector lane as in scalar code.
 *   3. v16_tail_mask(n) selects lanes < n (all 16 from n >= 16) for masked loads and stores.
 *   4. v16_tree32 is the 32-lane halving tree of kernels.h, pair for pair.
 */
#ifndef HS_KERNELS_VEC_AVX512_INT_H
#define HS_KERNELS_VEC_AVX512_INT_H

#include <immintrin.h>

#include "kernels/kernels_int.h"

static inline __attribute__((always_inline)) __m512d exp_pd8(__m512d x)
{
    __m512d t = _mm512_mul_pd(x, _mm512_set1_pd(0x1.71547652b82fep0));
    __m512d m = _mm512_add_pd(t, _mm512_set1_pd(0x1.8p52));
    __m512d n = _mm512_sub_pd(m, _mm512_set1_pd(0x1.8p52));
    __m512d g = _mm512_mul_pd(_mm512_sub_pd(t, n), _mm512_set1_pd(0x1.62e42fefa39efp-1));
    __m512d p = _mm512_set1_pd(1.0 / 40320.0);
    p = _mm512_add_pd(_mm512_mul_pd(p, g), _mm512_set1_pd(1.0 / 5040.0));
    p = _mm512_add_pd(_mm512_mul_pd(p, g), _mm512_set1_pd(1.0 / 720.0));
    p = _mm512_add_pd(_mm512_mul_pd(p, g), _mm512_set1_pd(1.0 / 120.0));
    p = _mm512_add_pd(_mm512_mul_pd(p, g), _mm512_set1_pd(1.0 / 24.0));
    p = _mm512_add_pd(_mm512_mul_pd(p, g), _mm512_set1_pd(1.0 / 6.0));
    p = _mm512_add_pd(_mm512_mul_pd(p, g), _mm512_set1_pd(0.5));
    p = _mm512_add_pd(_mm512_mul_pd(p, g), _mm512_set1_pd(1.0));
    p = _mm512_add_pd(_mm512_mul_pd(p, g), _mm512_set1_pd(1.0));
    __m512i bits = _mm512_slli_epi64(_mm512_add_epi64(_mm512_castpd_si512(m), _mm512_set1_epi64(1023)), 52);
    return _mm512_mul_pd(p, _mm512_castsi512_pd(bits));
}

/* kern_expf on 16 lanes (invariant 1). */
static inline __attribute__((always_inline)) __m512 exp16(__m512 x)
{
    __m512 xc = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(89.0f));
    __m256 lo = _mm512_cvtpd_ps(exp_pd8(_mm512_cvtps_pd(_mm512_castps512_ps256(xc))));
    __m256 hi = _mm512_cvtpd_ps(exp_pd8(_mm512_cvtps_pd(_mm512_extractf32x8_ps(xc, 1))));
    __m512 r = _mm512_insertf32x8(_mm512_castps256_ps512(lo), hi, 1);
    r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(89.0f), _CMP_GT_OQ), r,
                             _mm512_set1_ps(__builtin_inff()));
    r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_set1_ps(-104.0f), _CMP_LT_OQ), r, _mm512_setzero_ps());
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), r, _mm512_add_ps(x, x));
}

static inline __attribute__((always_inline)) __m512 neg16(__m512 x) { return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN))); }
static inline __attribute__((always_inline)) __m512 silu16(__m512 x) { return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), exp16(neg16(x)))); }
static inline __attribute__((always_inline)) __m512 sigmoid16(__m512 x) { return _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), exp16(neg16(x)))); }

static inline __mmask16 v16_tail_mask(int64_t n) { return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1); }

/* The halving tree of kernels.h over lanes 0..15 of a and 16..31 of b: zmm a + b (h = 16),
 * then low + high 256 bits (h = 8), 128 bits (h = 4), 64 bits (h = 2), lane 0 + lane 1
 * (h = 1); the same pairs as the scalar tree. kern_dot_avx512's and the float matmul's. */
static inline __attribute__((always_inline)) float v16_tree32(__m512 a, __m512 b)
{
    __m512 s16 = _mm512_add_ps(a, b);
    __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(s16),
                              _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(s16), 1)));
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    __m128 s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
    return _mm_cvtss_f32(s1);
}

#endif
