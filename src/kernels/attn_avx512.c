/*
 * attn_avx512.c — AVX-512 variants of attn.c: causal attention (kern_attn, kern_attn_tokens)
 * and the exp pass of its softmax (kern_expsub). Bit-identical to attn.c; selected through
 * kern_ops_for("avx512") (dispatch.c).
 *
 * Why the bits cannot move:
 *   1. Scores use kern_dot_avx512 (the 32-lane order, equal to kern_dot); the max and the sum
 *      stay scalar and ascending, kern_expf runs lane-wise (vec_avx512_int.h); the output
 *      o[d] = fmaf(e_t, v_t[d], o[d]) runs over t ascending with 16 neighbouring d per vector
 *      (independent outputs), then one IEEE division per element, as the scalar o[d] / sum.
 *      Query heads that share a kv head (up to KERN_ATTN_HEADS in one call) are scored
 *      together (each key row loaded once, each head's dot the 32-lane one) and their outputs
 *      accumulated together 64 dims at a time (each value row chunk loaded once); every head
 *      keeps its own accumulators, max, sum and t order, so the bits are the per-head ones.
 *   2. Tails use masked loads and stores; the lanes outside the mask compute on zeros that
 *      are never stored.
 *   3. kern_attn_tokens: two or three consecutive queries (each up to 4 heads of one kv
 *      head) share every key and value row load, which long prompts need (the KV rows of
 *      thousands of positions come from L3 or memory, once per query otherwise). Each
 *      (query, head) keeps its own accumulators, dot order, max/exp/sum and key order, so
 *      the bits are those of one kern_attn call per query; the keys only later queries
 *      see are scored with kern_dot_avx512 and accumulated after the shared ones.
 *   5. The output passes go by blocks of ATT_VB keys: for each block, every dims chunk in
 *      turn, its accumulators loaded from out (raw f32 partial sums: a float stored and
 *      loaded back is the same float, so the fma chain over t is the one of a single pass)
 *      and stored back, divided by the sum after the last key. One pass per chunk over all
 *      keys read 256 (one query) or 128 bytes (several) of every value row, one row apart,
 *      at about a third of the memory bandwidth of a sequential read; a block's rows stay
 *      in L1/L2 for its chunks, and the first chunk's pass prefetches the next block's. With
 *      the engine's KV planes (engine/seq.c) a one-token attention over 8192 keys, 6
 *      layers, two threads, took about 0.45x the time of the interleaved rows' single
 *      passes (bench/profile.md round 19).
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>

#include "kernels/vec_avx512_int.h"

#define INLINE static inline __attribute__((always_inline))
#define NV 8 /* output vectors per chunk: 128 dims in 8 zmm */
#ifndef ATT_VB
#define ATT_VB 48 /* keys per block of the output passes (note 5) */
#endif

/* kern_expsub: the lane-wise exp pass of kern_attn_scores. */
void kern_expsub_avx512(float *x, int64_t n, float m)
{
    int64_t i = 0;
    const __m512 mv = _mm512_set1_ps(m);
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), mv)));
    if (i < n) kern_expsub(x + i, n - i, m);
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

/* o[d0 .. d0 + 64) of ng heads of one kv head over keys [t0, t1) (e of head i at
 * e + i * n_pos): each value row chunk is loaded once for all of them; every head keeps its
 * own accumulators and order. The accumulators start from zero at key 0 and otherwise from
 * what the previous block left in out (raw f32: the same fma chain), and are divided by the
 * sum after the last key (note 5). The pass over d0 = 0 prefetches the rows one block
 * ahead, all hd of them. */
INLINE void attn_out_chunk_heads(float *out, int64_t hd, const float *vc, int64_t kv_ld, const float *e,
                                 int64_t n_pos, const float *sum, int64_t d0, int64_t t0, int64_t t1, int ng)
{
    __m512 acc[KERN_ATTN_HEADS][4];
#pragma GCC unroll 4
    for (int i = 0; i < ng; i++)
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++)
            acc[i][c] = t0 == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(out + i * hd + d0 + 16 * c);
    for (int64_t t = t0; t < t1; t++) {
        const float *vt = vc + t * kv_ld + d0;
        if (d0 == 0 && t + ATT_VB < n_pos)
            for (int64_t c = 0; c < hd; c += 16) _mm_prefetch((const char *)(vt + ATT_VB * kv_ld + c), _MM_HINT_T0);
        __m512 v0 = _mm512_loadu_ps(vt), v1 = _mm512_loadu_ps(vt + 16);
        __m512 v2 = _mm512_loadu_ps(vt + 32), v3 = _mm512_loadu_ps(vt + 48);
#pragma GCC unroll 4
        for (int i = 0; i < ng; i++) {
            __m512 et = _mm512_set1_ps(e[i * n_pos + t]);
            acc[i][0] = _mm512_fmadd_ps(et, v0, acc[i][0]);
            acc[i][1] = _mm512_fmadd_ps(et, v1, acc[i][1]);
            acc[i][2] = _mm512_fmadd_ps(et, v2, acc[i][2]);
            acc[i][3] = _mm512_fmadd_ps(et, v3, acc[i][3]);
        }
    }
#pragma GCC unroll 4
    for (int i = 0; i < ng; i++) {
        __m512 s = _mm512_set1_ps(sum[i]);
#pragma GCC unroll 4
        for (int c = 0; c < 4; c++)
            _mm512_storeu_ps(out + i * hd + d0 + 16 * c, t1 == n_pos ? _mm512_div_ps(acc[i][c], s) : acc[i][c]);
    }
}

/* kern_attn_scores for ng heads of one kv head at once (hd % 32 == 0): each key row is
 * loaded once for all heads; per head the dot is kern_dot_avx512's (two 16-lane
 * accumulators over k ascending, then its tree), the max, exp and sum as kern_attn_scores. */
INLINE void attn_scores_heads(float *scratch, float *sum, const float *q, const float *km, int64_t kv_ld,
                              int64_t hd, int64_t n_pos, float scale, int ng)
{
    float mx[KERN_ATTN_HEADS] = {0};
    for (int64_t t = 0; t < n_pos; t++) {
        const float *kt = km + t * kv_ld;
        __m512 a0[KERN_ATTN_HEADS], a1[KERN_ATTN_HEADS];
#pragma GCC unroll 4
        for (int i = 0; i < ng; i++) a0[i] = a1[i] = _mm512_setzero_ps();
        for (int64_t k0 = 0; k0 < hd; k0 += 32) {
            __m512 k_lo = _mm512_loadu_ps(kt + k0), k_hi = _mm512_loadu_ps(kt + k0 + 16);
#pragma GCC unroll 4
            for (int i = 0; i < ng; i++) {
                a0[i] = _mm512_fmadd_ps(_mm512_loadu_ps(q + i * hd + k0), k_lo, a0[i]);
                a1[i] = _mm512_fmadd_ps(_mm512_loadu_ps(q + i * hd + k0 + 16), k_hi, a1[i]);
            }
        }
#pragma GCC unroll 4
        for (int i = 0; i < ng; i++) {
            float st = v16_tree32(a0[i], a1[i]) * scale;
            scratch[i * n_pos + t] = st;
            if (t == 0 || st > mx[i]) mx[i] = st;
        }
    }
    for (int i = 0; i < ng; i++) {
        float *e = scratch + i * n_pos;
        kern_expsub_avx512(e, n_pos, mx[i]);
        float s = 0.0f;
        for (int64_t t = 0; t < n_pos; t++) s = s + e[t];
        sum[i] = s;
    }
}

void kern_attn_avx512(float *out, const float *q, const float *kc, const float *vc, int64_t kv_ld,
                      int64_t n_pos, int64_t hd, int64_t n_head, int64_t n_kv_head, float scale,
                      float *scratch, int64_t h0, int64_t h1)
{
    int64_t group = n_head / n_kv_head;
    for (int64_t j = h0; j < h1;) {
        /* a run of heads [j, jr) sharing kv head m, at most KERN_ATTN_HEADS */
        int64_t m = j / group, jr = j + 1;
        while (jr < h1 && jr / group == m && jr - j < KERN_ATTN_HEADS) jr++;
        int ng = (int)(jr - j);
        float sum[KERN_ATTN_HEADS];
        if (ng > 1 && hd % 32 == 0) {
            switch (ng) {
            case 2: attn_scores_heads(scratch, sum, q + j * hd, kc + m * hd, kv_ld, hd, n_pos, scale, 2); break;
            case 3: attn_scores_heads(scratch, sum, q + j * hd, kc + m * hd, kv_ld, hd, n_pos, scale, 3); break;
            default: attn_scores_heads(scratch, sum, q + j * hd, kc + m * hd, kv_ld, hd, n_pos, scale, 4); break;
            }
        } else {
            for (int i = 0; i < ng; i++)
                sum[i] = kern_attn_scores(scratch + i * n_pos, q + (j + i) * hd, kc + m * hd, kv_ld, hd, n_pos,
                                          scale, kern_dot_avx512, kern_expsub_avx512);
        }
        const float *vm = vc + m * hd;
        int64_t d0 = 0;
        if (ng > 1) { /* blocks of ATT_VB keys, all 64-dim chunks of a block in turn (note 5) */
            int64_t dz = hd / 64 * 64;
            for (int64_t t0 = 0; t0 < n_pos; t0 += ATT_VB) {
                int64_t t1 = HS_MIN(t0 + ATT_VB, n_pos);
                for (d0 = 0; d0 < dz; d0 += 64) {
                    switch (ng) {
                    case 2: attn_out_chunk_heads(out + j * hd, hd, vm, kv_ld, scratch, n_pos, sum, d0, t0, t1, 2); break;
                    case 3: attn_out_chunk_heads(out + j * hd, hd, vm, kv_ld, scratch, n_pos, sum, d0, t0, t1, 3); break;
                    default: attn_out_chunk_heads(out + j * hd, hd, vm, kv_ld, scratch, n_pos, sum, d0, t0, t1, 4); break;
                    }
                }
            }
            d0 = dz;
        }
        for (int i = 0; i < ng; i++) {
            float *oj = out + (j + i) * hd;
            const float *ei = scratch + i * n_pos;
            int64_t d = d0;
            for (; d + 16 * NV <= hd; d += 16 * NV) attn_out_chunk(oj, vm, kv_ld, ei, n_pos, sum[i], d, NV, 0xffff);
            for (; d < hd; d += 16) attn_out_chunk(oj, vm, kv_ld, ei, n_pos, sum[i], d, 1, v16_tail_mask(hd - d));
        }
        j = jr;
    }
}

/* ---- several query positions (kern_attn_tokens) ---------------------------------------- */

/* Scores of nt queries x ng heads of one kv head against keys [0, np0), each key row loaded
 * once for all of them: pair (i, h) (query i at q + i * q_ld, head h at + h * hd) goes to
 * e + (i * ng + h) * ld. Per pair the dot is attn_scores_heads's (kern_dot_avx512's two
 * 16-lane accumulators over k ascending, then its tree) times scale. */
INLINE void tok_scores(float *e, int64_t ld, const float *q, int64_t q_ld, const float *km, int64_t kv_ld,
                       int64_t hd, int64_t np0, float scale, int nt, int ng)
{
    for (int64_t t = 0; t < np0; t++) {
        const float *kt = km + t * kv_ld;
        __m512 a0[KERN_ATTN_TOKS][KERN_ATTN_HEADS], a1[KERN_ATTN_TOKS][KERN_ATTN_HEADS];
#pragma GCC unroll 4
        for (int i = 0; i < nt; i++)
#pragma GCC unroll 4
            for (int h = 0; h < ng; h++) a0[i][h] = a1[i][h] = _mm512_setzero_ps();
        for (int64_t k0 = 0; k0 < hd; k0 += 32) {
            __m512 k_lo = _mm512_loadu_ps(kt + k0), k_hi = _mm512_loadu_ps(kt + k0 + 16);
#pragma GCC unroll 4
            for (int i = 0; i < nt; i++)
#pragma GCC unroll 4
                for (int h = 0; h < ng; h++) {
                    const float *qq = q + i * q_ld + h * hd + k0;
                    a0[i][h] = _mm512_fmadd_ps(_mm512_loadu_ps(qq), k_lo, a0[i][h]);
                    a1[i][h] = _mm512_fmadd_ps(_mm512_loadu_ps(qq + 16), k_hi, a1[i][h]);
                }
        }
#pragma GCC unroll 4
        for (int i = 0; i < nt; i++)
#pragma GCC unroll 4
            for (int h = 0; h < ng; h++) e[(i * ng + h) * ld + t] = v16_tree32(a0[i][h], a1[i][h]) * scale;
    }
}

/* Keys [t0, t1) into out[d0 .. d0 + 32) of pairs pbeg .. nt * ng - 1 (pair (i, h) at
 * out + i * out_ld + h * hd), which hold the raw partial sums of the keys before t0 (first:
 * none yet, start from 0): o[d] = fmaf(e_t, v_t[d], o[d]), t ascending; each value row chunk
 * is loaded once for every pair that reads it (note 5: blocks of keys, all chunks of a block
 * in turn; the pass over d0 = 0 prefetches the rows one block ahead). */
INLINE void tok_acc(float *out, int64_t out_ld, int64_t hd, const float *vm, int64_t kv_ld, const float *e,
                    int64_t ld, int64_t t0, int64_t t1, int64_t tz, bool first, int pbeg, int64_t d0, int nt, int ng)
{
    __m512 acc[KERN_ATTN_TOKS * KERN_ATTN_HEADS][2];
#pragma GCC unroll 12
    for (int p = 0; p < nt * ng; p++) { /* p from 0 with a test: constant register indices */
        if (p < pbeg) continue;
        const float *o = out + p / ng * out_ld + p % ng * hd + d0;
        acc[p][0] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(o);
        acc[p][1] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(o + 16);
    }
    for (int64_t t = t0; t < t1; t++) {
        const float *vt = vm + t * kv_ld + d0;
        if (d0 == 0 && t + ATT_VB < tz)
            for (int64_t c = 0; c < hd; c += 16) _mm_prefetch((const char *)(vt + ATT_VB * kv_ld + c), _MM_HINT_T0);
        __m512 v0 = _mm512_loadu_ps(vt), v1 = _mm512_loadu_ps(vt + 16);
#pragma GCC unroll 12
        for (int p = 0; p < nt * ng; p++) {
            if (p < pbeg) continue;
            __m512 et = _mm512_set1_ps(e[p * ld + t]);
            acc[p][0] = _mm512_fmadd_ps(et, v0, acc[p][0]);
            acc[p][1] = _mm512_fmadd_ps(et, v1, acc[p][1]);
        }
    }
#pragma GCC unroll 12
    for (int p = 0; p < nt * ng; p++) {
        if (p < pbeg) continue;
        float *o = out + p / ng * out_ld + p % ng * hd + d0;
        _mm512_storeu_ps(o, acc[p][0]);
        _mm512_storeu_ps(o + 16, acc[p][1]);
    }
}

/* nt queries x ng heads of one kv head (hd % 32 == 0): scores, the keys past np0 that only
 * the later queries see (kern_dot_avx512, the same bits as tok_scores), then per pair the
 * max, exp and sum of kern_attn_scores, then the outputs 32 dims at a time. */
INLINE void tok_heads(float *out, int64_t out_ld, const float *q, int64_t q_ld, const float *km, const float *vm,
                      int64_t kv_ld, int64_t np0, int64_t hd, float scale, float *e, int64_t ld, int nt, int ng)
{
    float sum[KERN_ATTN_TOKS * KERN_ATTN_HEADS];
    tok_scores(e, ld, q, q_ld, km, kv_ld, hd, np0, scale, nt, ng);
    for (int i = 1; i < nt; i++)
        for (int64_t t = np0; t < np0 + i; t++)
            for (int h = 0; h < ng; h++)
                e[(i * ng + h) * ld + t] = kern_dot_avx512(q + i * q_ld + h * hd, km + t * kv_ld, hd) * scale;
    for (int i = 0; i < nt; i++)
        for (int h = 0; h < ng; h++) {
            float *r = e + (i * ng + h) * ld, mx = 0.0f;
            int64_t n = np0 + i;
            for (int64_t t = 0; t < n; t++)
                if (t == 0 || r[t] > mx) mx = r[t];
            kern_expsub_avx512(r, n, mx);
            float s = 0.0f;
            for (int64_t t = 0; t < n; t++) s = s + r[t];
            sum[i * ng + h] = s;
        }
    /* keys [0, np0) belong to every query, key np0 + u to queries i > u */
    for (int64_t t0 = 0; t0 < np0; t0 += ATT_VB)
        for (int64_t d0 = 0; d0 < hd; d0 += 32)
            tok_acc(out, out_ld, hd, vm, kv_ld, e, ld, t0, HS_MIN(np0, t0 + ATT_VB), np0, t0 == 0, 0, d0, nt, ng);
    for (int u = 0; u + 1 < nt; u++)
        for (int64_t d0 = 0; d0 < hd; d0 += 32)
            tok_acc(out, out_ld, hd, vm, kv_ld, e, ld, np0 + u, np0 + u + 1, np0 + u + 1, false, (u + 1) * ng, d0, nt, ng);
    for (int i = 0; i < nt; i++)
        for (int h = 0; h < ng; h++) {
            float *o = out + i * out_ld + h * hd;
            __m512 sv = _mm512_set1_ps(sum[i * ng + h]);
            for (int64_t d0 = 0; d0 < hd; d0 += 16) _mm512_storeu_ps(o + d0, _mm512_div_ps(_mm512_loadu_ps(o + d0), sv));
        }
}

void kern_attn_tokens_avx512(float *out, int64_t out_ld, const float *q, int64_t q_ld, const float *kc,
                             const float *vc, int64_t kv_ld, int64_t n_pos0, int64_t n_tok, int64_t hd,
                             int64_t n_head, int64_t n_kv_head, float scale, float *scratch, int64_t h0,
                             int64_t h1)
{
    if (n_tok < 2 || n_tok > KERN_ATTN_TOKS || hd % 32 != 0 || n_pos0 < 1) {
        for (int64_t i = 0; i < n_tok; i++)
            kern_attn_avx512(out + i * out_ld, q + i * q_ld, kc, vc, kv_ld, n_pos0 + i, hd, n_head, n_kv_head,
                             scale, scratch, h0, h1);
        return;
    }
    int64_t group = n_head / n_kv_head, ld = n_pos0 + n_tok - 1;
    for (int64_t j = h0; j < h1;) {
        int64_t m = j / group, jr = j + 1;
        while (jr < h1 && jr / group == m && jr - j < KERN_ATTN_HEADS) jr++;
        const float *qj = q + j * hd, *km = kc + m * hd, *vm = vc + m * hd;
        float *oj = out + j * hd;
        /* constant shapes for the register tiles: (queries, heads) */
        switch ((n_tok == 3 ? 4 : 0) + (int)(jr - j) - 1) {
        case 0: tok_heads(oj, out_ld, qj, q_ld, km, vm, kv_ld, n_pos0, hd, scale, scratch, ld, 2, 1); break;
        case 1: tok_heads(oj, out_ld, qj, q_ld, km, vm, kv_ld, n_pos0, hd, scale, scratch, ld, 2, 2); break;
        case 2: tok_heads(oj, out_ld, qj, q_ld, km, vm, kv_ld, n_pos0, hd, scale, scratch, ld, 2, 3); break;
        case 3: tok_heads(oj, out_ld, qj, q_ld, km, vm, kv_ld, n_pos0, hd, scale, scratch, ld, 2, 4); break;
        case 4: tok_heads(oj, out_ld, qj, q_ld, km, vm, kv_ld, n_pos0, hd, scale, scratch, ld, 3, 1); break;
        case 5: tok_heads(oj, out_ld, qj, q_ld, km, vm, kv_ld, n_pos0, hd, scale, scratch, ld, 3, 2); break;
        case 6: tok_heads(oj, out_ld, qj, q_ld, km, vm, kv_ld, n_pos0, hd, scale, scratch, ld, 3, 3); break;
        default: tok_heads(oj, out_ld, qj, q_ld, km, vm, kv_ld, n_pos0, hd, scale, scratch, ld, 3, 4); break;
        }
        j = jr;
    }
}

#else
typedef int kern_attn_avx512_unused; /* not x86: the variant does not exist */
#endif
