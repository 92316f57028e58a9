/*
 * act_avx512.c — AVX2 (+FMA) variants of the elementwise activations: kern_expf on 8 lanes,
 * SwiGLU, the attention output gate, the GDN gated-norm tail and the conv1d step with SiLU.
 * Selected through kern_ops_for("avx2") (dispatch.c).
 *
 * Design note:
 *   1. Every lane runs kern_expf's exact sequence (kernels.h): the 8 floats are widened
 *      to two vectors of 4 doubles (exact), the same double multiplies and adds in the
 *      same order (no fma), 2^n from n's bits, one rounding back to f32. Inputs are first
 *      clamped to [-104, 89] so no lane sees inf or NaN inside the polynomial; the three
 *      special cases (NaN -> x + x, > 89 -> inf, < -104 -> 0) are blended in afterwards
 *      from the unclamped x, as the scalar tests them.
 *   2. silu / sigmoid / the gated tail are the scalar expressions lane-wise: IEEE add,
 *      multiply and divide round the same in a vector lane as in scalar code.
 *   3. The conv step keeps, per channel, fmaf over taps in ascending order (vfmadd is
 *      fmaf); channels are independent, so 8 channels share a vector. Leftover channels
 *      (range not a multiple of 8) and k_conv != 4 take the scalar reference per channel.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "kernels/kernels_int.h"

#define INLINE static inline __attribute__((always_inline))

INLINE __m256d exp_pd4(__m256d x)
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

/* kern_expf on 8 lanes (note 1). */
INLINE __m256 exp8(__m256 x)
{
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-104.0f)), _mm256_set1_ps(89.0f));
    __m128 lo = _mm256_cvtpd_ps(exp_pd4(_mm256_cvtps_pd(_mm256_castps256_ps128(xc))));
    __m128 hi = _mm256_cvtpd_ps(exp_pd4(_mm256_cvtps_pd(_mm256_extractf128_ps(xc, 1))));
    __m256 r = _mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1);
    r = _mm256_blendv_ps(r, _mm256_set1_ps(__builtin_inff()), _mm256_cmp_ps(x, _mm256_set1_ps(89.0f), _CMP_GT_OQ));
    r = _mm256_blendv_ps(r, _mm256_setzero_ps(), _mm256_cmp_ps(x, _mm256_set1_ps(-104.0f), _CMP_LT_OQ));
    return _mm256_blendv_ps(r, _mm256_add_ps(x, x), _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

INLINE __m256 neg8(__m256 x) { return _mm256_xor_ps(x, _mm256_set1_ps(-0.0f)); }
INLINE __m256 silu8(__m256 x) { return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(neg8(x)))); }
INLINE __m256 sigmoid8(__m256 x) { return _mm256_div_ps(_mm256_set1_ps(1.0f), _mm256_add_ps(_mm256_set1_ps(1.0f), exp8(neg8(x)))); }

void kern_expsub_avx2(float *x, int64_t n, float m)
{
    int64_t i = 0;
    const __m256 mv = _mm256_set1_ps(m);
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv)));
    if (i < n) kern_expsub(x + i, n - i, m);
}

void kern_swiglu_avx2(float *y, const float *gate, const float *up, int64_t i0, int64_t i1)
{
    int64_t i = i0;
    for (; i + 8 <= i1; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(silu8(_mm256_loadu_ps(gate + i)), _mm256_loadu_ps(up + i)));
    if (i < i1) kern_swiglu(y, gate, up, i, i1);
}

void kern_sigmoid_mul_avx2(float *y, const float *x, const float *g, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), sigmoid8(_mm256_loadu_ps(g + i))));
    if (i < n) kern_sigmoid_mul(y + i, x + i, g + i, n - i);
}

void kern_gated_scale_avx2(float *y, const float *z, const float *w, float r, int64_t n)
{
    int64_t i = 0;
    const __m256 rv = _mm256_set1_ps(r);
    for (; i + 8 <= n; i += 8) {
        __m256 a = _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(y + i), rv), _mm256_loadu_ps(w + i));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(a, silu8(_mm256_loadu_ps(z + i))));
    }
    if (i < n) kern_gated_scale(y + i, z + i, w + i, r, n - i);
}

void kern_conv1d_step_avx2(float *out, float *state, const float *x, const float *w, int64_t n_ch,
                           int64_t k_conv, int64_t c0, int64_t c1)
{
    int64_t c = c0;
    if (k_conv == 4) {
        const __m256i tap = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
        for (; c + 8 <= c1; c += 8) {
            const float *wc = w + c * 4;
            __m256 xc = _mm256_loadu_ps(x + c);
            __m256 s0 = _mm256_loadu_ps(state + c), s1 = _mm256_loadu_ps(state + n_ch + c);
            __m256 s2 = _mm256_loadu_ps(state + 2 * n_ch + c);
            __m256 acc = _mm256_fmadd_ps(_mm256_i32gather_ps(wc, tap, 4), s0, _mm256_setzero_ps());
            acc = _mm256_fmadd_ps(_mm256_i32gather_ps(wc + 1, tap, 4), s1, acc);
            acc = _mm256_fmadd_ps(_mm256_i32gather_ps(wc + 2, tap, 4), s2, acc);
            acc = _mm256_fmadd_ps(_mm256_i32gather_ps(wc + 3, tap, 4), xc, acc);
            _mm256_storeu_ps(state + c, s1);
            _mm256_storeu_ps(state + n_ch + c, s2);
            _mm256_storeu_ps(state + 2 * n_ch + c, xc);
            _mm256_storeu_ps(out + c, silu8(acc));
        }
    }
    if (c < c1) kern_conv1d_step(out, state, x, w, n_ch, k_conv, c, c1);
}

#else
typedef int kern_act_avx2_unused; /* not x86: the variant does not exist */
#endif
