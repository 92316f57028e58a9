/*
 * act_avx512.c — AVX-512 variants of the elementwise activations: kern_expf on 16 lanes,
 * SwiGLU, the attention output gate, the GDN gated-norm tail and the conv1d step with SiLU.
 * Selected through kern_ops_for("avx512") (dispatch.c).
 *
 * Design note:
 *   1. Every lane runs kern_expf's exact sequence (kernels.h): the 16 floats are widened
 *      to two vectors of 8 doubles (exact), the same double multiplies and adds in the
 *      same order (no fma), 2^n from n's bits, one rounding back to f32. Inputs are first
 *      clamped to [-104, 89] so no lane sees inf or NaN inside the polynomial; the three
 *      special cases (NaN -> x + x, > 89 -> inf, < -104 -> 0) are blended in afterwards
 *      from the unclamped x, as the scalar tests them.
 *   2. silu / sigmoid / the gated tail are the scalar expressions lane-wise: IEEE add,
 *      multiply and divide round the same in a vector lane as in scalar code.
 *   3. The conv step keeps, per channel, fmaf over taps in ascending order (vfmadd is
 *      fmaf); channels are independent, so 16 channels share a vector. Leftover channels
 *      (range not a multiple of 16) and k_conv != 4 take the scalar reference per channel.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "kernels/kernels_int.h"

#define INLINE static inline __attribute__((always_inline))

INLINE __m512d exp_pd8(__m512d x)
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

/* kern_expf on 16 lanes (note 1). */
INLINE __m512 exp16(__m512 x)
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

INLINE __m512 neg16(__m512 x) { return _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN))); }
INLINE __m512 silu16(__m512 x) { return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), exp16(neg16(x)))); }
INLINE __m512 sigmoid16(__m512 x) { return _mm512_div_ps(_mm512_set1_ps(1.0f), _mm512_add_ps(_mm512_set1_ps(1.0f), exp16(neg16(x)))); }

void kern_expsub_avx512(float *x, int64_t n, float m)
{
    int64_t i = 0;
    const __m512 mv = _mm512_set1_ps(m);
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), mv)));
    if (i < n) kern_expsub(x + i, n - i, m);
}

void kern_swiglu_avx512(float *y, const float *gate, const float *up, int64_t i0, int64_t i1)
{
    int64_t i = i0;
    for (; i + 16 <= i1; i += 16)
        _mm512_storeu_ps(y + i, _mm512_mul_ps(silu16(_mm512_loadu_ps(gate + i)), _mm512_loadu_ps(up + i)));
    if (i < i1) kern_swiglu(y, gate, up, i, i1);
}

void kern_sigmoid_mul_avx512(float *y, const float *x, const float *g, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), sigmoid16(_mm512_loadu_ps(g + i))));
    if (i < n) kern_sigmoid_mul(y + i, x + i, g + i, n - i);
}

void kern_gated_scale_avx512(float *y, const float *z, const float *w, float r, int64_t n)
{
    int64_t i = 0;
    const __m512 rv = _mm512_set1_ps(r);
    for (; i + 16 <= n; i += 16) {
        __m512 a = _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(y + i), rv), _mm512_loadu_ps(w + i));
        _mm512_storeu_ps(y + i, _mm512_mul_ps(a, silu16(_mm512_loadu_ps(z + i))));
    }
    if (i < n) kern_gated_scale(y + i, z + i, w + i, r, n - i);
}

void kern_conv1d_step_avx512(float *out, float *state, const float *x, const float *w, int64_t n_ch,
                             int64_t k_conv, int64_t c0, int64_t c1)
{
    int64_t c = c0;
    if (k_conv == 4) {
        /* tap j of 8 channels from two 16-float rows of [channel][4 taps]: lanes 0..7 */
        const __m512i t0 = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0);
        const __m512i one = _mm512_set1_epi32(1);
        const __m512i t1 = _mm512_add_epi32(t0, one), t2 = _mm512_add_epi32(t1, one), t3 = _mm512_add_epi32(t2, one);
        for (; c + 16 <= c1; c += 16) {
            const float *wc = w + c * 4;
            __m512 w0 = _mm512_loadu_ps(wc), w1 = _mm512_loadu_ps(wc + 16);
            __m512 w2 = _mm512_loadu_ps(wc + 32), w3 = _mm512_loadu_ps(wc + 48);
#define CONV_TAP(ix) _mm512_insertf32x8(_mm512_permutex2var_ps(w0, ix, w1), \
                                        _mm512_castps512_ps256(_mm512_permutex2var_ps(w2, ix, w3)), 1)
            __m512 xc = _mm512_loadu_ps(x + c);
            __m512 s0 = _mm512_loadu_ps(state + c), s1 = _mm512_loadu_ps(state + n_ch + c);
            __m512 s2 = _mm512_loadu_ps(state + 2 * n_ch + c);
            __m512 acc = _mm512_fmadd_ps(CONV_TAP(t0), s0, _mm512_setzero_ps());
            acc = _mm512_fmadd_ps(CONV_TAP(t1), s1, acc);
            acc = _mm512_fmadd_ps(CONV_TAP(t2), s2, acc);
            acc = _mm512_fmadd_ps(CONV_TAP(t3), xc, acc);
#undef CONV_TAP
            _mm512_storeu_ps(state + c, s1);
            _mm512_storeu_ps(state + n_ch + c, s2);
            _mm512_storeu_ps(state + 2 * n_ch + c, xc);
            _mm512_storeu_ps(out + c, silu16(acc));
        }
    }
    if (c < c1) kern_conv1d_step(out, state, x, w, n_ch, k_conv, c, c1);
}

#else
typedef int kern_act_avx512_unused; /* not x86: the variant does not exist */
#endif
