/*
 * recur_avx2.c — AVX2 (+FMA) variants of the per-token sequence kernels: the gated delta rule
 * step (kern_gdn_step) and causal attention (kern_attn). Bit-identical to gdn.c / attn.c;
 * selected through kern_ops_for("avx2") (dispatch.c).
 *
 * Why the bits cannot move:
 *   1. GDN: every operation of kern_gdn_step on S[i][j], u[j], o[j] involves column j and
 *      per-row scalars only. The vectors here hold 8 neighbouring COLUMNS, never partial
 *      sums of one reduction, so each element sees exactly the scalar sequence of roundings
 *      (mul, then vfmadd = fmaf; the reductions over i stay sequential, i ascending).
 *   2. Attention: scores use kern_dot_avx2 (the 32-lane order, equal to kern_dot); max,
 *      the sum stay scalar and ascending, kern_expf runs lane-wise (act_*.c); the output o[d] = fmaf(e_t, v_t[d], o[d])
 *      runs over t ascending with 8 neighbouring d per vector (independent outputs), then
 *      one IEEE division per element, as the scalar o[d] / sum.
 *   3. Tails use vmaskmov loads and stores; the lanes outside the mask compute on zeros that
 *      are never stored.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>

#include "kernels/kernels_int.h"

#define INLINE static inline __attribute__((always_inline))
#define NV 4 /* column vectors per chunk: 32 columns, u / o in 8 ymm */

typedef __m256i vmask;
static vmask tail_mask(int64_t n)
{
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)HS_MIN(n, 8)), idx);
}
#define FULL _mm256_set1_epi32(-1)
INLINE __m256 ld(vmask m, const float *p) { return _mm256_maskload_ps(p, m); }
INLINE void st(float *p, vmask m, __m256 v) { _mm256_maskstore_ps(p, m, v); }

/* One chunk of nv vectors of columns j0 .. j0 + 8 nv - 1 (the last one masked by ml) of
 * head state Sh [dk, dv]. nv is a constant after inlining. */
INLINE void gdn_chunk(float *oh, float *Sh, const float *kk, const float *qq, const float *vv,
                      float al, float be, float sc, int64_t dk, int64_t dv, int64_t j0, int nv,
                      vmask ml)
{
    __m256 u[NV], o[NV];
    vmask m[NV];
#pragma GCC unroll 8
    for (int c = 0; c < nv; c++) {
        u[c] = _mm256_setzero_ps();
        m[c] = c == nv - 1 ? ml : FULL;
    }
    const __m256 alv = _mm256_set1_ps(al);
    for (int64_t i = 0; i < dk; i++) {
        float *Si = Sh + i * dv + j0;
        __m256 ki = _mm256_set1_ps(kk[i]);
#pragma GCC unroll 8
        for (int c = 0; c < nv; c++) {
            /* S * alpha is formed again in the second pass (same bits): fewer stores */
            __m256 s = _mm256_mul_ps(ld(m[c], Si + 8 * c), alv);
            u[c] = _mm256_fmadd_ps(s, ki, u[c]);
        }
    }
    const __m256 bev = _mm256_set1_ps(be);
#pragma GCC unroll 8
    for (int c = 0; c < nv; c++) {
        u[c] = _mm256_mul_ps(bev, _mm256_sub_ps(ld(m[c], vv + j0 + 8 * c), u[c]));
        o[c] = _mm256_setzero_ps();
    }
    for (int64_t i = 0; i < dk; i++) {
        float *Si = Sh + i * dv + j0;
        __m256 ki = _mm256_set1_ps(kk[i]);
        __m256 qi = _mm256_set1_ps(qq[i] * sc);
#pragma GCC unroll 8
        for (int c = 0; c < nv; c++) {
            __m256 s = _mm256_fmadd_ps(ki, u[c], _mm256_mul_ps(ld(m[c], Si + 8 * c), alv));
            st(Si + 8 * c, m[c], s);
            o[c] = _mm256_fmadd_ps(s, qi, o[c]);
        }
    }
#pragma GCC unroll 8
    for (int c = 0; c < nv; c++) st(oh + j0 + 8 * c, m[c], o[c]);
}

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
            gdn_chunk(oh, Sh, kk, qq, vv, al, be, sc, dk, dv, j0, NV, FULL);
        for (; j0 < dv; j0 += 8)
            gdn_chunk(oh, Sh, kk, qq, vv, al, be, sc, dk, dv, j0, 1, tail_mask(dv - j0));
    }
}

/* o[d0 .. d0 + 8 nv) of one head: sum over t of e_t * v_t, then / sum. */
INLINE void attn_out_chunk(float *oj, const float *vc, int64_t kv_ld, const float *e, int64_t n_pos,
                           float sum, int64_t d0, int nv, vmask ml)
{
    __m256 acc[NV];
    vmask m[NV];
#pragma GCC unroll 8
    for (int c = 0; c < nv; c++) {
        acc[c] = _mm256_setzero_ps();
        m[c] = c == nv - 1 ? ml : FULL;
    }
    for (int64_t t = 0; t < n_pos; t++) {
        const float *vt = vc + t * kv_ld + d0;
        __m256 et = _mm256_set1_ps(e[t]);
#pragma GCC unroll 8
        for (int c = 0; c < nv; c++) acc[c] = _mm256_fmadd_ps(et, ld(m[c], vt + 8 * c), acc[c]);
    }
    __m256 s = _mm256_set1_ps(sum);
#pragma GCC unroll 8
    for (int c = 0; c < nv; c++) st(oj + d0 + 8 * c, m[c], _mm256_div_ps(acc[c], s));
}

void kern_attn_avx2(float *out, const float *q, const float *kc, const float *vc, int64_t kv_ld,
                      int64_t n_pos, int64_t hd, int64_t n_head, int64_t n_kv_head, float scale,
                      float *scratch, int64_t h0, int64_t h1)
{
    int64_t group = n_head / n_kv_head;
    for (int64_t j = h0; j < h1; j++) {
        const float *qj = q + j * hd;
        int64_t m = j / group;
        float sum = kern_attn_scores(scratch, qj, kc + m * hd, kv_ld, hd, n_pos, scale, kern_dot_avx2, kern_expsub_avx2);
        float *oj = out + j * hd;
        const float *vm = vc + m * hd;
        int64_t d0 = 0;
        for (; d0 + 8 * NV <= hd; d0 += 8 * NV) attn_out_chunk(oj, vm, kv_ld, scratch, n_pos, sum, d0, NV, FULL);
        for (; d0 < hd; d0 += 8) attn_out_chunk(oj, vm, kv_ld, scratch, n_pos, sum, d0, 1, tail_mask(hd - d0));
    }
}

void kern_attn_tokens_avx2(float *out, int64_t out_ld, const float *q, int64_t q_ld, const float *kc,
                           const float *vc, int64_t kv_ld, int64_t n_pos0, int64_t n_tok, int64_t hd,
                           int64_t n_head, int64_t n_kv_head, float scale, float *scratch, int64_t h0,
                           int64_t h1)
{
    for (int64_t i = 0; i < n_tok; i++)
        kern_attn_avx2(out + i * out_ld, q + i * q_ld, kc, vc, kv_ld, n_pos0 + i, hd, n_head, n_kv_head, scale,
                       scratch, h0, h1);
}

#else
typedef int kern_recur_avx2_unused; /* not x86: the variant does not exist */
#endif
