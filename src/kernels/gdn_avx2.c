/*
 * gdn_avx2.c — AVX2 (+FMA) variants of gdn.c: the gated delta rule step (kern_gdn_step) and the
 * causal conv1d step with SiLU (kern_conv1d_step). Bit-identical to gdn.c; selected through
 * kern_ops_for("avx2") (dispatch.c).
 *
 * Why the bits cannot move:
 *   1. GDN step: every operation of kern_gdn_step on S[i][j], u[j], o[j] involves column j
 *      and per-row scalars only. The vectors here hold 8 neighbouring COLUMNS, never partial
 *      sums of one reduction, so each element sees exactly the scalar sequence of roundings
 *      (mul, then vfmadd = fmaf; the reductions over i stay sequential, i ascending).
 *   2. Tails use masked loads and stores; the lanes outside the mask compute on zeros that
 *      are never stored.
 *   3. The conv step keeps, per channel, fmaf over taps in ascending order (vfmadd is fmaf)
 *      and the SiLU of vec_avx2_int.h; channels are independent, so 8 channels share a
 *      vector. Leftover channels (range not a multiple of 8) and k_conv != 4 take the
 *      scalar reference per channel. The taps of 8 channels (stored channel-major) come in
 *      by 4 loads and a 4 x 8 transpose (unpacks, then one permute per tap), not 4 gathers.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>

#include "kernels/vec_avx2_int.h"

#define INLINE static inline __attribute__((always_inline))
#define NV 4 /* column vectors per chunk: 32 columns, u / o in 8 ymm */

/* One chunk of nv vectors of columns j0 .. j0 + 8 nv - 1 (the last one masked by ml) of
 * head state Sh [dk, dv]. nv is a constant after inlining. */
/* Lane-complete vectors (every one of a full chunk, all but the last of a tail chunk) use
 * plain loads and stores: the same values as vmaskmov with an all-ones mask, without its
 * cost (a masked store is microcoded on Zen). */
#define GLD(c, p) (full || (c) < nv - 1 ? _mm256_loadu_ps(p) : v8_load(m[c], (p)))
#define GST(c, p, v) (full || (c) < nv - 1 ? _mm256_storeu_ps((p), (v)) : v8_store((p), m[c], (v)))
INLINE void gdn_chunk(float *oh, float *Sh, const float *kk, const float *qq, const float *vv,
                      float al, float be, float sc, int64_t dk, int64_t dv, int64_t j0, int nv,
                      v8_mask ml, bool full)
{
    __m256 u[NV], o[NV];
    v8_mask m[NV];
#pragma GCC unroll 8
    for (int c = 0; c < nv; c++) {
        u[c] = _mm256_setzero_ps();
        m[c] = c == nv - 1 ? ml : V8_ALL;
    }
    const __m256 alv = _mm256_set1_ps(al);
    for (int64_t i = 0; i < dk; i++) {
        float *Si = Sh + i * dv + j0;
        __m256 ki = _mm256_set1_ps(kk[i]);
#pragma GCC unroll 8
        for (int c = 0; c < nv; c++) {
            /* S * alpha is formed again in the second pass (same bits): fewer stores */
            __m256 s = _mm256_mul_ps(GLD(c, Si + 8 * c), alv);
            u[c] = _mm256_fmadd_ps(s, ki, u[c]);
        }
    }
    const __m256 bev = _mm256_set1_ps(be);
#pragma GCC unroll 8
    for (int c = 0; c < nv; c++) {
        u[c] = _mm256_mul_ps(bev, _mm256_sub_ps(GLD(c, vv + j0 + 8 * c), u[c]));
        o[c] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < dk; i++) {
        float *Si = Sh + i * dv + j0;
        __m256 ki = _mm256_set1_ps(kk[i]);
        __m256 qi = _mm256_set1_ps(qq[i] * sc);
#pragma GCC unroll 8
        for (int c = 0; c < nv; c++) {
            __m256 s = _mm256_fmadd_ps(ki, u[c], _mm256_mul_ps(GLD(c, Si + 8 * c), alv));
            GST(c, Si + 8 * c, s);
            o[c] = _mm256_fmadd_ps(s, qi, o[c]);
        }
    }
#pragma GCC unroll 8
    for (int c = 0; c < nv; c++) GST(c, oh + j0 + 8 * c, o[c]);
}
#undef GLD
#undef GST

void kern_gdn_step_avx2(float *o, float *S, const float *q, const float *k, const float *v,
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
        for (; j0 + 8 * NV <= dv; j0 += 8 * NV)
            gdn_chunk(oh, Sh, kk, qq, vv, al, be, sc, dk, dv, j0, NV, V8_ALL, true);
        for (; j0 < dv; j0 += 8)
            gdn_chunk(oh, Sh, kk, qq, vv, al, be, sc, dk, dv, j0, 1, v8_tail_mask(dv - j0),
                      dv - j0 >= 8);
    }
}

void kern_conv1d_step_avx2(float *out, float *state, const float *x, const float *w, int64_t n_ch,
                           int64_t k_conv, int64_t c0, int64_t c1)
{
    int64_t c = c0;
    if (k_conv == 4) {
        const __m256i ord = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        for (; c + 8 <= c1; c += 8) {
            const float *wc = w + c * 4;
            /* the 8 x 4 taps (channel-major) as 4 vectors of 8 channels: unpacks give channel
             * order 0 2 4 6 | 1 3 5 7, one dword permute per tap restores it (no gathers:
             * ~20 micro-ops each on Zen) */
            __m256 v0 = _mm256_loadu_ps(wc), v1 = _mm256_loadu_ps(wc + 8);
            __m256 v2 = _mm256_loadu_ps(wc + 16), v3 = _mm256_loadu_ps(wc + 24);
            __m256 l01 = _mm256_unpacklo_ps(v0, v1), h01 = _mm256_unpackhi_ps(v0, v1);
            __m256 l23 = _mm256_unpacklo_ps(v2, v3), h23 = _mm256_unpackhi_ps(v2, v3);
            __m256 w0 =
                _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(l01), _mm256_castps_pd(l23)));
            __m256 w1 =
                _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(l01), _mm256_castps_pd(l23)));
            __m256 w2 =
                _mm256_castpd_ps(_mm256_unpacklo_pd(_mm256_castps_pd(h01), _mm256_castps_pd(h23)));
            __m256 w3 =
                _mm256_castpd_ps(_mm256_unpackhi_pd(_mm256_castps_pd(h01), _mm256_castps_pd(h23)));
            __m256 xc = _mm256_loadu_ps(x + c);
            __m256 s0 = _mm256_loadu_ps(state + c), s1 = _mm256_loadu_ps(state + n_ch + c);
            __m256 s2 = _mm256_loadu_ps(state + 2 * n_ch + c);
            __m256 acc =
                _mm256_fmadd_ps(_mm256_permutevar8x32_ps(w0, ord), s0, _mm256_setzero_ps());
            acc = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(w1, ord), s1, acc);
            acc = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(w2, ord), s2, acc);
            acc = _mm256_fmadd_ps(_mm256_permutevar8x32_ps(w3, ord), xc, acc);
            _mm256_storeu_ps(state + c, s1);
            _mm256_storeu_ps(state + n_ch + c, s2);
            _mm256_storeu_ps(state + 2 * n_ch + c, xc);
            _mm256_storeu_ps(out + c, silu8(acc));
        }
    }
    if (c < c1) kern_conv1d_step(out, state, x, w, n_ch, k_conv, c, c1);
}

#else
typedef int kern_gdn_avx2_unused; /* not x86: the variant does not exist */
#endif
