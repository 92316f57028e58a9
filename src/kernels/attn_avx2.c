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
 *   3. Query heads that share a kv head (up to KERN_ATTN_HEADS), and for kern_attn_tokens
 *      up to KERN_ATTN_TOKS consecutive queries, are scored and accumulated together: each
 *      key and value row is loaded once for all the (query, head) pairs (hd % 32 == 0).
 *      A pair's dot is kern_dot_avx2's: four 8-lane accumulators (lanes k % 32) over k
 *      ascending, then v8_tree32. The four accumulators are independent, so they are
 *      formed one after the other (16 ymm hold one of them for every pair, not all four):
 *      same operations per lane, same bits. The keys only later queries see are scored
 *      with kern_dot_avx2 and accumulated after the shared ones; every pair keeps its own
 *      max, exp, sum and t order, so the bits are those of one kern_attn call per query.
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

#define NP (KERN_ATTN_TOKS * KERN_ATTN_HEADS) /* (query, head) pairs of one call at most */
#define ATT_TB 64 /* keys per block of the output accumulation (tok_acc) */
#ifndef ATT_PF
#define ATT_PF 4  /* key / value rows prefetched ahead (chosen when a kv head's rows were 1 KiB of
                   * every 2 KiB; with the engine's KV planes, engine/seq.c, 0 to 16 measured alike) */
#endif

/* Scores of nt queries x ng heads of one kv head against keys [0, np0) (note 3): pair
 * (i, h) (query i at q + i * q_ld, head h at + h * hd) to e + (i * ng + h) * ld. */
INLINE void tok_scores(float *e, int64_t ld, const float *q, int64_t q_ld, const float *km, int64_t kv_ld,
                       int64_t hd, int64_t np0, float scale, int nt, int ng)
{
    for (int64_t t = 0; t < np0; t++) {
        const float *kt = km + t * kv_ld;
        if (t + ATT_PF < np0)
            for (int64_t l = 0; l < hd; l += 16) _mm_prefetch((const char *)(kt + ATT_PF * kv_ld + l), _MM_HINT_T0);
        __m256 part[4][NP];
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++) {
            __m256 a[NP];
#pragma GCC unroll 12
            for (int p = 0; p < nt * ng; p++) a[p] = _mm256_setzero_ps();
            for (int64_t k0 = 8 * c; k0 < hd; k0 += 32) {
                __m256 kv = _mm256_loadu_ps(kt + k0);
#pragma GCC unroll 4
                for (int i = 0; i < nt; i++)
#pragma GCC unroll 4
                    for (int h = 0; h < ng; h++)
                        a[i * ng + h] = _mm256_fmadd_ps(_mm256_loadu_ps(q + i * q_ld + h * hd + k0), kv, a[i * ng + h]);
            }
#pragma GCC unroll 12
            for (int p = 0; p < nt * ng; p++) part[c][p] = a[p];
        }
#pragma GCC unroll 12
        for (int p = 0; p < nt * ng; p++) e[p * ld + t] = v8_tree32(part[0][p], part[1][p], part[2][p], part[3][p]) * scale;
    }
}

/* Keys [t0, t1) into the outputs of pairs pbeg .. nt * ng - 1 (pair (i, h) at out + i * out_ld
 * + h * hd), which hold the partial sums of the keys before t0 (first: none yet, start from
 * 0): o[d] = fmaf(e_t, v_t[d], o[d]), t ascending, 8 dims at a time. A partial sum stored as
 * f32 and loaded back is the same value, so cutting t into blocks keeps every bit; a block of
 * value rows is then read from L3 once and reused for all hd / 8 passes (one pass over every
 * key per 8 dims streamed the whole V of a long context 32 times). */
INLINE void tok_acc(float *out, int64_t out_ld, int64_t hd, const float *vm, int64_t kv_ld, const float *e,
                    int64_t ld, int64_t t0, int64_t t1, bool first, int pbeg, int nt, int ng)
{
    for (int64_t d0 = 0; d0 < hd; d0 += 8) {
        __m256 acc[NP];
#pragma GCC unroll 12
        for (int p = 0; p < nt * ng; p++)
            if (p >= pbeg)
                acc[p] = first ? _mm256_setzero_ps() : _mm256_loadu_ps(out + p / ng * out_ld + p % ng * hd + d0);
        for (int64_t t = t0; t < t1; t++) {
            if (d0 == 0 && t + ATT_PF < t1)
                for (int64_t l = 0; l < hd; l += 16) _mm_prefetch((const char *)(vm + (t + ATT_PF) * kv_ld + l), _MM_HINT_T0);
            __m256 v = _mm256_loadu_ps(vm + t * kv_ld + d0);
#pragma GCC unroll 12
            for (int p = 0; p < nt * ng; p++)
                if (p >= pbeg) acc[p] = _mm256_fmadd_ps(_mm256_set1_ps(e[p * ld + t]), v, acc[p]);
        }
#pragma GCC unroll 12
        for (int p = 0; p < nt * ng; p++)
            if (p >= pbeg) _mm256_storeu_ps(out + p / ng * out_ld + p % ng * hd + d0, acc[p]);
    }
}

/* nt queries x ng heads of one kv head (hd % 32 == 0; scratch e: nt * ng rows of ld): scores,
 * the keys past np0 that only the later queries see, then per pair the max, exp and sum of
 * kern_attn_scores, then the outputs by blocks of ATT_TB keys. */
INLINE void tok_heads(float *out, int64_t out_ld, const float *q, int64_t q_ld, const float *km, const float *vm,
                      int64_t kv_ld, int64_t np0, int64_t hd, float scale, float *e, int64_t ld, int nt, int ng)
{
    float sum[NP];
    tok_scores(e, ld, q, q_ld, km, kv_ld, hd, np0, scale, nt, ng);
    for (int i = 1; i < nt; i++)
        for (int64_t t = np0; t < np0 + i; t++)
            for (int h = 0; h < ng; h++)
                e[(i * ng + h) * ld + t] = kern_dot_avx2(q + i * q_ld + h * hd, km + t * kv_ld, hd) * scale;
    for (int i = 0; i < nt; i++)
        for (int h = 0; h < ng; h++) {
            float *r = e + (i * ng + h) * ld, mx = 0.0f;
            int64_t n = np0 + i;
            for (int64_t t = 0; t < n; t++)
                if (t == 0 || r[t] > mx) mx = r[t];
            kern_expsub_avx2(r, n, mx);
            float s = 0.0f;
            for (int64_t t = 0; t < n; t++) s = s + r[t];
            sum[i * ng + h] = s;
        }
    /* keys [0, np0) belong to every query, key np0 + u to queries i > u */
    for (int64_t t0 = 0; t0 < np0; t0 += ATT_TB)
        tok_acc(out, out_ld, hd, vm, kv_ld, e, ld, t0, HS_MIN(np0, t0 + ATT_TB), t0 == 0, 0, nt, ng);
    for (int u = 0; u + 1 < nt; u++)
        tok_acc(out, out_ld, hd, vm, kv_ld, e, ld, np0 + u, np0 + u + 1, false, (u + 1) * ng, nt, ng);
    for (int i = 0; i < nt; i++)
        for (int h = 0; h < ng; h++) {
            float *o = out + i * out_ld + h * hd;
            __m256 sv = _mm256_set1_ps(sum[i * ng + h]);
            for (int64_t d0 = 0; d0 < hd; d0 += 8) _mm256_storeu_ps(o + d0, _mm256_div_ps(_mm256_loadu_ps(o + d0), sv));
        }
}

/* tok_heads with the tile shape (nt, ng) as constants (nt <= KERN_ATTN_TOKS, ng <= KERN_ATTN_HEADS). */
static void tok_heads_n(float *out, int64_t out_ld, const float *q, int64_t q_ld, const float *km, const float *vm,
                        int64_t kv_ld, int64_t np0, int64_t hd, float scale, float *e, int64_t ld, int nt, int ng)
{
#define TH(NT, NG) tok_heads(out, out_ld, q, q_ld, km, vm, kv_ld, np0, hd, scale, e, ld, NT, NG)
    switch ((nt - 1) * KERN_ATTN_HEADS + ng - 1) {
    case 0: TH(1, 1); break;
    case 1: TH(1, 2); break;
    case 2: TH(1, 3); break;
    case 3: TH(1, 4); break;
    case 4: TH(2, 1); break;
    case 5: TH(2, 2); break;
    case 6: TH(2, 3); break;
    case 7: TH(2, 4); break;
    case 8: TH(3, 1); break;
    case 9: TH(3, 2); break;
    case 10: TH(3, 3); break;
    default: TH(3, 4); break;
    }
#undef TH
}
_Static_assert(KERN_ATTN_TOKS == 3 && KERN_ATTN_HEADS == 4, "tok_heads_n lists the tile shapes");

/* The head-at-a-time path (any hd; a vector tail when hd % 8 != 0). */
static void attn_one(float *out, const float *q, const float *kc, const float *vc, int64_t kv_ld, int64_t n_pos,
                     int64_t hd, int64_t group, float scale, float *scratch, int64_t j)
{
    const float *qj = q + j * hd;
    int64_t m = j / group;
    float sum = kern_attn_scores(scratch, qj, kc + m * hd, kv_ld, hd, n_pos, scale, kern_dot_avx2, kern_expsub_avx2);
    float *oj = out + j * hd;
    const float *vm = vc + m * hd;
    int64_t d0 = 0;
    for (; d0 + 8 * NV <= hd; d0 += 8 * NV) attn_out_chunk(oj, vm, kv_ld, scratch, n_pos, sum, d0, NV, V8_ALL);
    for (; d0 < hd; d0 += 8) attn_out_chunk(oj, vm, kv_ld, scratch, n_pos, sum, d0, 1, v8_tail_mask(hd - d0));
}

void kern_attn_avx2(float *out, const float *q, const float *kc, const float *vc, int64_t kv_ld,
                      int64_t n_pos, int64_t hd, int64_t n_head, int64_t n_kv_head, float scale,
                      float *scratch, int64_t h0, int64_t h1)
{
    int64_t group = n_head / n_kv_head;
    for (int64_t j = h0; j < h1;) {
        /* a run of heads [j, jr) sharing kv head m, at most KERN_ATTN_HEADS */
        int64_t m = j / group, jr = j + 1;
        while (jr < h1 && jr / group == m && jr - j < KERN_ATTN_HEADS) jr++;
        if (hd % 32 == 0)
            tok_heads_n(out + j * hd, 0, q + j * hd, 0, kc + m * hd, vc + m * hd, kv_ld, n_pos, hd, scale, scratch,
                        n_pos, 1, (int)(jr - j));
        else
            for (int64_t i = j; i < jr; i++) attn_one(out, q, kc, vc, kv_ld, n_pos, hd, group, scale, scratch, i);
        j = jr;
    }
}

void kern_attn_tokens_avx2(float *out, int64_t out_ld, const float *q, int64_t q_ld, const float *kc,
                           const float *vc, int64_t kv_ld, int64_t n_pos0, int64_t n_tok, int64_t hd,
                           int64_t n_head, int64_t n_kv_head, float scale, float *scratch, int64_t h0,
                           int64_t h1)
{
    if (n_tok < 2 || n_tok > KERN_ATTN_TOKS || hd % 32 != 0 || n_pos0 < 1) {
        for (int64_t i = 0; i < n_tok; i++)
            kern_attn_avx2(out + i * out_ld, q + i * q_ld, kc, vc, kv_ld, n_pos0 + i, hd, n_head, n_kv_head, scale,
                           scratch, h0, h1);
        return;
    }
    int64_t group = n_head / n_kv_head, ld = n_pos0 + n_tok - 1;
    for (int64_t j = h0; j < h1;) {
        int64_t m = j / group, jr = j + 1;
        while (jr < h1 && jr / group == m && jr - j < KERN_ATTN_HEADS) jr++;
        tok_heads_n(out + j * hd, out_ld, q + j * hd, q_ld, kc + m * hd, vc + m * hd, kv_ld, n_pos0, hd, scale,
                    scratch, ld, (int)n_tok, (int)(jr - j));
        j = jr;
    }
}

#else
typedef int kern_attn_avx2_unused; /* not x86: the variant does not exist */
#endif
