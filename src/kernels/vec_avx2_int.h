/*
 * vec_avx2_int.h — private to src/kernels: the lane helpers the AVX2 files share (ffn_avx2.c,
 * attn_avx2.c, gdn_avx2.c, the integer matmuls), so that each written sequence exists once.
 * Included only by files compiled with the AVX2 flags; header-only, always inlined, so every
 * caller gets the code it had when the helpers were its own.
 *
 * Invariants:
 *   1. exp8 is kern_expf (kernels.h) on 8 lanes, bit for bit: the 8 floats are widened to two
 *      vectors of 4 doubles (exact), the same double multiplies and adds in the same order
 *      (no fma), 2^n from n's bits, one rounding back to f32. Inputs are first clamped to
 *      [-104, 89] so no lane sees inf or NaN inside the polynomial; the three special cases
 *      (NaN -> x + x, > 89 -> inf, < -104 -> 0) are blended in afterwards from the
 *      unclamped x, as the scalar tests them.
 *   2. silu8 / sigmoid8 are kern_silu / kern_sigmoid lane-wise: IEEE add, multiply and
 *      divide round the same in a vector lane as in scalar code.
 *   3. v8_load / v8_store under v8_tail_mask(n) touch lanes < n only (vmaskmov); the other
 *      lanes read as zero and are never stored.
 *   4. v8_tree32 is the 32-lane halving tree of kernels.h over four ymm of lanes k % 32 =
 *      0..7, 8..15, 16..23, 24..31, pair for pair.
 *   5. q8_dot_add(is, wa, xs) adds to each int32 lane of is the 4 products of its unsigned
 *      bytes of wa (|w| <= 128) and signed bytes of xs (|x| <= 127: kern_q8_quantize). With
 *      AVX2 alone it is vpmaddubsw (pair sums <= 2 * 128 * 127 < 2^15: no saturation),
 *      vpmaddwd with ones and vpaddd; in a file compiled for AVX-VNNI (KERN_AVXVNNI, the
 *      "avxvnni" table: matmul_avxvnni.c, q8p_avxvnni.c) it is one vpdpbusd. Both are the
 *      exact integer sum, so the two tables give the same bits.
 *   6. KERN_AVX2_NAME(f) is f_avx2, or f_avxvnni in those files: the files that compile an
 *      AVX2 source a second time with AVX-VNNI name its entry points this way.
 *   7. i16_dot_add(is, a, b) adds to each int32 lane of is the two products of its int16
 *      pairs of a and b: vpmaddwd and vpaddd, or one vpdpwssd for AVX-VNNI (no saturation
 *      in either: the sum wraps as vpaddd's does, and the callers' sums fit int32). The
 *      K-quant files built again (q4k_avxvnni.c, q4kp_avxvnni.c) use it where a scale or
 *      a min is applied.
 */
#ifndef HS_KERNELS_VEC_AVX2_INT_H
#define HS_KERNELS_VEC_AVX2_INT_H

#include <immintrin.h>

#include "kernels/kernels_int.h"

static inline __attribute__((always_inline)) __m256d exp_pd4(__m256d x)
{
    __m256d t = _mm256_mul_pd(x, _mm256_set1_pd(0x1.71547652b82fep0));
    __m256d m = _mm256_add_pd(t, _mm256_set1_pd(0x1.8p52));
    __m256d n = _mm256_sub_pd(m, _mm256_set1_pd(0x1.8p52));
    __m256d g = _mm256_mul_pd(_mm256_sub_pd(t, n), _mm256_set1_pd(0x1.62e42fefa39efp-1));
    __m256d p = _mm256_set1_pd(1.0 / 40320.0);
    p = _mm256_add_pd(_mm256_mul_pd(p, g), _mm256_set1_pd(1.0 / 5040.0));
    p = _mm256_add_pd(_mm256_mul_pd(p, g), _mm256_set1_pd(1.0 / 720.0));
    p = _mm256_add_pd(_mm256_mul_pd(p, g), _mm256_set1_pd(1.0 / 120.0));
    p = _mm256_add_pd(_mm256_mul_pd(p, g), _mm256_set1_pd(1.0 / 24.0));
    p = _mm256_add_pd(_mm256_mul_pd(p, g), _mm256_set1_pd(1.0 / 6.0));
    p = _mm256_add_pd(_mm256_mul_pd(p, g), _mm256_set1_pd(0.5));
    p = _mm256_add_pd(_mm256_mul_pd(p, g), _mm256_set1_pd(1.0));
    p = _mm256_add_pd(_mm256_mul_pd(p, g), _mm256_set1_pd(1.0));
    __m256i bits = _mm256_slli_epi64(_mm256_add_epi64(_mm256_castpd_si256(m), _mm256_set1_epi64x(1023)), 52);
    return _mm256_mul_pd(p, _mm256_castsi256_pd(bits));
}

/* kern_expf on 8 lanes (invariant 1). */
static inline __attribute__((always_inline)) __m256 exp8(__m256 x)
{
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(89.0f));
    __m128 lo = _mm256_cvtpd_ps(exp_pd4(_mm256_cvtps_pd(_mm256_castps256_ps128(xc))));
    __m128 hi = _mm256_cvtpd_ps(exp_pd4(_mm256_cvtps_pd(_mm256_extractf128_ps(xc, 1))));
    __m256 r = _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
    r = _mm256_blendv_ps(r, _mm256_set1_ps(__builtin_inff()), _mm256_cmp_ps(x, _mm256_set1_ps(89.0f), _CMP_GT_OQ));
    r = _mm256_blendv_ps(r, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(-104.0f), _CMP_LT_OQ));
    return _mm256_blendv_ps(r, _mm256_add_ps(x, x), _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

static inline __attribute__((always_inline)) __m256 neg8(__m256 x) { return _mm256_xor_ps(x, _mm256_set1_ps(-0.0f)); }
static inline __attribute__((always_inline)) __m256 silu8(__m256 x) { return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(neg8(x)))); }
static inline __attribute__((always_inline)) __m256 sigmoid8(__m256 x) { return _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(neg8(x)))); }

/* The halving tree of kernels.h over the four lane groups a (0..7) .. d (24..31): h = 16
 * adds c onto a and d onto b, h = 8 those two, then 128 bits, 64 bits and lane 1 onto 0. */
static inline __attribute__((always_inline)) float v8_tree32(__m256 a, __m256 b, __m256 c, __m256 d)
{
    __m256 s8 = _mm256_add_ps(_mm256_add_ps(a, c), _mm256_add_ps(b, d));
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

typedef __m256i v8_mask;
static inline v8_mask v8_tail_mask(int64_t n)
{
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)HS_MIN(n, 8)), idx);
}
#define V8_ALL _mm256_set1_epi32(-1)

#ifdef KERN_AVXVNNI
#define KERN_AVX2_NAME(f) f##_avxvnni
static inline __attribute__((always_inline)) __m256i q8_dot_add(__m256i is, __m256i wa, __m256i xs)
{
    return _mm256_dpbusd_avx_epi32(is, wa, xs);
}
static inline __attribute__((always_inline)) __m256i i16_dot_add(__m256i is, __m256i a, __m256i b)
{
    return _mm256_dpwssd_avx_epi32(is, a, b);
}
#else
#define KERN_AVX2_NAME(f) f##_avx2
static inline __attribute__((always_inline)) __m256i q8_dot_add(__m256i is, __m256i wa, __m256i xs)
{
    return _mm256_add_epi32(is, _mm256_madd_epi16(_mm256_maddubs_epi16(wa, xs), _mm256_set1_epi16(1)));
}
static inline __attribute__((always_inline)) __m256i i16_dot_add(__m256i is, __m256i a, __m256i b)
{
    return _mm256_add_epi32(is, _mm256_madd_epi16(a, b));
}
#endif
static inline __attribute__((always_inline)) __m256 v8_load(v8_mask m, const float *p) { return _mm256_maskload_ps(p, m); }
static inline __attribute__((always_inline)) void v8_store(float *p, v8_mask m, __m256 v) { _mm256_maskstore_ps(p, m, v); }

#endif
