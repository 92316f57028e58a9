/*
 * attn_avx2.c — AVX2 (+FMA) variants of attn.c: causal attention (kern_attn, kern_attn_tokens)
 * and the exp pass of its softmax (kern_expsub). Bit-identical to attn.c; selected through
 * kern_ops_for("avx2") (dispatch.c).
 *
 * Why the bits cannot move:
 *   1. Scores use kern_dot_avx2 (the 32-lane order, equal to kern_dot); the max and the sum
 *      stay scalar and ascending (kern_attn_scores, shared with attn.c); kern_expf runs
 *      lane-wise (vec_avx2_int.h). The output o[d] = fmaf(e_t, v_t[d], o[d]) runs over t
 *      ascending with 8 neighbouring d per vector (independent outputs), then one IEEE
 *      division per element, as the scalar o[d] / sum.
 *   2. Tails use vmaskmov loads and stores; the lanes outside the mask compute on zeros that
 *      are never stored.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>

#include "kernels/vec_avx2_int.h"

#define INLINE static inline __attribute__((always_inline))
#define NV 4 /* output vectors per chunk: 32 dims in 4 ymm */

/* kern_expsub: the lane-wise exp pass of kern_attn_scores. */
void kern_expsub_avx2(float *x, int64_t n, float m)
{
    int64_t i = 0;
    const __m256 mv = _mm256_set1_ps(m);
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv)));
    if (i < n) kern_expsub(x + i, n - i, m);
}

/* o[d0 .. d0 + 8 nv) of one head: sum over t of e_t * v_t, then / sum. */
INLINE void attn_out_chunk(float *oj, const float *vc, int64_t kv_ld, const float *e, int64_t n_pos,
                           float sum, int64_t d0, int nv, v8_mask ml)
{
    __m256 acc[NV];
    v8_mask m[NV];
#pragma GCC unroll 8
    for (int c = 0; c < nv; c++) {
        acc[c] = _mm256_setzero_ps();
        m[c] = c == nv - 1 ? ml : V8_ALL;
    }
    for (int64_t t = 0; t < n_pos; t++) {
        const float *vt = vc + t * kv_ld + d0;
        __m256 et = _mm256_set1_ps(e[t]);
#pragma GCC unroll 8
        for (int c = 0; c < nv; c++) acc[c] = _mm256_fmadd_ps(et, v8_load(m[c], vt + 8 * c), acc[c]);
    }
    __m256 s = _mm256_set1_ps(sum);
#pragma GCC unroll 8
    for (int c = 0; c < nv; c++) v8_store(oj + d0 + 8 * c, m[c], _mm256_div_ps(acc[c], s));
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
        for (; d0 + 8 * NV <= hd; d0 += 8 * NV) attn_out_chunk(oj, vm, kv_ld, scratch, n_pos, sum, d0, NV, V8_ALL);
        for (; d0 < hd; d0 += 8) attn_out_chunk(oj, vm, kv_ld, scratch, n_pos, sum, d0, 1, v8_tail_mask(hd - d0));
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
typedef int kern_attn_avx2_unused; /* not x86: the variant does not exist */
#endif
