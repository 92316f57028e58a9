/*
 * gdn_avx512.c — AVX-512 variants of gdn.c: the gated delta rule step (kern_gdn_step) and the
 * causal conv1d step with SiLU (kern_conv1d_step). Bit-identical to gdn.c; selected through
 * kern_ops_for("avx512") (dispatch.c).
 *
 * Why the bits cannot move:
 *   1. GDN step: every operation of kern_gdn_step on S[i][j], u[j], o[j] involves column j
 *      and per-row scalars only. The vectors here hold 16 neighbouring COLUMNS, never partial
 *      sums of one reduction, so each element sees exactly the scalar sequence of roundings
 *      (mul, then vfmadd = fmaf; the reductions over i stay sequential, i ascending).
 *   2. Tails use masked loads and stores; the lanes outside the mask compute on zeros that
 *      are never stored.
 *   3. The conv step keeps, per channel, fmaf over taps in ascending order (vfmadd is fmaf)
 *      and the SiLU of vec_avx512_int.h; channels are independent, so 16 channels share a
 *      vector. Leftover channels (range not a multiple of 16) and k_conv != 4 take the
 *      scalar reference per channel.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>

#include "kernels/vec_avx512_int.h"

#define INLINE static inline __attribute__((always_inline))
#define NV 8 /* column vectors per chunk: 128 columns, u / dl / o in 24 zmm */

/* One chunk of nv vectors of columns j0 .. j0 + 16 nv - 1 (the last one masked by ml) of
 * head state Sh [dk, dv]. nv is a constant after inlining. */
INLINE void gdn_chunk(float *oh, float *Sh, const float *kk, const float *qq, const float *vv,
                      float al, float be, float sc, int64_t dk, int64_t dv, int64_t j0, int nv,
                      __mmask16 ml)
{
    __m512 u[NV], o[NV];
    __mmask16 m[NV];
#pragma GCC unroll 8
    for (int c = 0; c < nv; c++) {
        u[c] = _mm512_setzero_ps();
        m[c] = c == nv - 1 ? ml : (__mmask16)0xffff;
    }
    const __m512 alv = _mm512_set1_ps(al);
    for (int64_t i = 0; i < dk; i++) {
        float *Si = Sh + i * dv + j0;
        __m512 ki = _mm512_set1_ps(kk[i]);
#pragma GCC unroll 8
        for (int c = 0; c < nv; c++) {
            /* S * alpha is not stored here: the second pass forms the same product again
             * (same bits), which halves the stores of a store-bound step */
            __m512 s = _mm512_mul_ps(_mm512_maskz_loadu_ps(m[c], Si + 16 * c), alv);
            u[c] = _mm512_fmadd_ps(s, ki, u[c]);
        }
    }
    const __m512 bev = _mm512_set1_ps(be);
#pragma GCC unroll 8
    for (int c = 0; c < nv; c++) {
        u[c] = _mm512_mul_ps(bev, _mm512_sub_ps(_mm512_maskz_loadu_ps(m[c], vv + j0 + 16 * c), u[c]));
        o[c] = _mm512_setzero_ps();
    }
    for (int64_t i = 0; i < dk; i++) {
        float *Si = Sh + i * dv + j0;
        __m512 ki = _mm512_set1_ps(kk[i]);
        __m512 qi = _mm512_set1_ps(qq[i] * sc);
#pragma GCC unroll 8
        for (int c = 0; c < nv; c++) {
            __m512 sa = _mm512_mul_ps(_mm512_maskz_loadu_ps(m[c], Si + 16 * c), alv);
            __m512 s = _mm512_fmadd_ps(ki, u[c], sa);
            _mm512_mask_storeu_ps(Si + 16 * c, m[c], s);
            o[c] = _mm512_fmadd_ps(s, qi, o[c]);
        }
    }
#pragma GCC unroll 8
    for (int c = 0; c < nv; c++) _mm512_mask_storeu_ps(oh + j0 + 16 * c, m[c], o[c]);
}

void kern_gdn_step_avx512(float *o, float *S, const float *q, const float *k, const float *v,
                          const float *alpha, const float *beta, int64_t n_kh, int64_t n_vh,
                          int64_t dk, int64_t dv, int64_t h0, int64_t h1)
{
    float sc = 1.0f / sqrtf((float)dk);
    (void)n_vh;
    for (int64_t h = h0; h < h1; h++) {
        int64_t kh = h % n_kh;
        const float *kk = k + kh * dk, *qq = q + kh * dk, *vv = v + h * dv;
        float *Sh = S + h * dk * dv, *oh = o + h * dv;
        float al = alpha[h], be = beta[h];
        int64_t j0 = 0;
        for (; j0 + 16 * NV <= dv; j0 += 16 * NV)
            gdn_chunk(oh, Sh, kk, qq, vv, al, be, sc, dk, dv, j0, NV, 0xffff);
        for (; j0 < dv; j0 += 16)
            gdn_chunk(oh, Sh, kk, qq, vv, al, be, sc, dk, dv, j0, 1, v16_tail_mask(dv - j0));
    }
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
typedef int kern_gdn_avx512_unused; /* not x86: the variant does not exist */
#endif
