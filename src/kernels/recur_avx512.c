/*
 * recur_avx512.c — AVX-512 variants of the per-token sequence kernels: the gated delta rule
 * step (kern_gdn_step) and causal attention (kern_attn). Bit-identical to gdn.c / attn.c;
 * selected through kern_ops_for("avx512") (dispatch.c).
 *
 * Why the bits cannot move:
 *   1. GDN: every operation of kern_gdn_step on S[i][j], u[j], o[j] involves column j and
 *      per-row scalars only. The vectors here hold 16 neighbouring COLUMNS, never partial
 *      sums of one reduction, so each element sees exactly the scalar sequence of roundings
 *      (mul, then vfmadd = fmaf; the reductions over i stay sequential, i ascending).
 *   2. Attention: scores use kern_dot_avx512 (the 32-lane order, equal to kern_dot); max,
 *      expf and the sum stay scalar and ascending; the output o[d] = fmaf(e_t, v_t[d], o[d])
 *      runs over t ascending with 16 neighbouring d per vector (independent outputs), then
 *      one IEEE division per element, as the scalar o[d] / sum.
 *   3. Tails use masked loads and stores; the lanes outside the mask compute on zeros that
 *      are never stored.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>

#include "kernels/kernels_int.h"

#define INLINE static inline __attribute__((always_inline))
#define NV 8 /* column vectors per chunk: 128 columns, u / dl / o in 24 zmm */

static __mmask16 tail_mask(int64_t n) { return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1); }

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
            __m512 s = _mm512_mul_ps(_mm512_maskz_loadu_ps(m[c], Si + 16 * c), alv);
            _mm512_mask_storeu_ps(Si + 16 * c, m[c], s);
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
            __m512 s = _mm512_fmadd_ps(ki, u[c], _mm512_maskz_loadu_ps(m[c], Si + 16 * c));
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
            gdn_chunk(oh, Sh, kk, qq, vv, al, be, sc, dk, dv, j0, 1, tail_mask(dv - j0));
    }
}

/* o[d0 .. d0 + 16 nv) of one head: sum over t of e_t * v_t, then / sum. */
INLINE void attn_out_chunk(float *oj, const float *vc, int64_t kv_ld, const float *e, int64_t n_pos,
                           float sum, int64_t d0, int nv, __mmask16 ml)
{
    __m512 acc[NV];
    __mmask16 m[NV];
#pragma GCC unroll 8
    for (int c = 0; c < nv; c++) {
        acc[c] = _mm512_setzero_ps();
        m[c] = c == nv - 1 ? ml : (__mmask16)0xffff;
    }
    for (int64_t t = 0; t < n_pos; t++) {
        const float *vt = vc + t * kv_ld + d0;
        __m512 et = _mm512_set1_ps(e[t]);
#pragma GCC unroll 8
        for (int c = 0; c < nv; c++) acc[c] = _mm512_fmadd_ps(et, _mm512_maskz_loadu_ps(m[c], vt + 16 * c), acc[c]);
    }
    __m512 s = _mm512_set1_ps(sum);
#pragma GCC unroll 8
    for (int c = 0; c < nv; c++) _mm512_mask_storeu_ps(oj + d0 + 16 * c, m[c], _mm512_div_ps(acc[c], s));
}

void kern_attn_avx512(float *out, const float *q, const float *kc, const float *vc, int64_t kv_ld,
                      int64_t n_pos, int64_t hd, int64_t n_head, int64_t n_kv_head, float scale,
                      float *scratch, int64_t h0, int64_t h1)
{
    int64_t group = n_head / n_kv_head;
    for (int64_t j = h0; j < h1; j++) {
        const float *qj = q + j * hd;
        int64_t m = j / group;
        float sum = kern_attn_scores(scratch, qj, kc + m * hd, kv_ld, hd, n_pos, scale, kern_dot_avx512);
        float *oj = out + j * hd;
        const float *vm = vc + m * hd;
        int64_t d0 = 0;
        for (; d0 + 16 * NV <= hd; d0 += 16 * NV) attn_out_chunk(oj, vm, kv_ld, scratch, n_pos, sum, d0, NV, 0xffff);
        for (; d0 < hd; d0 += 16) attn_out_chunk(oj, vm, kv_ld, scratch, n_pos, sum, d0, 1, tail_mask(hd - d0));
    }
}

#else
typedef int kern_recur_avx512_unused; /* not x86: the variant does not exist */
#endif
