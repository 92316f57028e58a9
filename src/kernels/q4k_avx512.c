/*
 * q4k_avx512.c — AVX-512 (F, BW, VL, DQ, VNNI) variant of the K-quant matmul kern_matmul_k:
 * Q4_K weights here, Q5_K and Q6_K forwarded to q5k_avx512.c and q6k_avx512.c. Bit-identical
 * to the scalar reference in q4k.c; selected through kern_ops_for("avx512" /
 * "avx512vnni")->matmul_k (dispatch.c; both require VNNI). Compiled with the Makefile's
 * AVX-512 flags.
 *
 * How the scalar order maps onto registers (kernels.h, "K-quant weights"):
 *   1. All the per-block work is integer and exact, so its order is free; only the float
 *      part is fixed: dw * dx and dmin * dx rounded once each, then two fmaf per block into
 *      the output's own accumulator, blocks ascending. Both paths below do exactly that
 *      (fmaf(-(dmin * dx), msum, a) is vfnmadd(dmin * dx, msum, a): negating a factor is
 *      exact, and both round -(p * m) + a once).
 *   2. Per-row path (fewer than P_MIN_TOKS tokens, and rows past the last full group of 16):
 *      64 weights of one chunk sit in one zmm as unsigned bytes (the low nibbles of 32 qs
 *      bytes, then their high nibbles = sub-blocks 2j and 2j+1, which are activations
 *      64j..64j+63 in order). vpmaddubsw with the int8 activations gives pair sums (at most
 *      2 * 15 * 128, no int16 saturation), vpdpwssd with the scales of each pair's sub-block
 *      widens to int32 and applies the scale in one step; the lanes are summed with one
 *      reduction per block. The mins use the activation bsums (vpmaddwd of 16 bsums with 16
 *      mins), as the scalar formula writes them. A row's super-block is decoded once and
 *      applied to up to TOKS = 8 tokens: their isum (and msum) vectors are reduced together
 *      (kq_reduce8) and the float steps run lane-wise, lane t being token t's accumulator
 *      (kq_apply; 2-4 tokens reduce 4 at a time; one token kq_apply1). The per-token
 *      horizontal sums and scalar float steps were most of a decode step of 8 sequences
 *      (bench/profile.md round 16).
 *   3. Panel path (n_tok >= P_MIN_TOKS, the prefill): a panel of 16-row groups is repacked
 *      once per call (P_PANEL_BYTES on the stack, so K <= P_NB4 super-blocks; longer rows take
 *      note 2) so that lane i of a zmm belongs to row i: per group and super-block the weights
 *      as bytes (0..15), the scales and mins as int16 lanes and dw, dmin as f32 lanes. A tile
 *      of P_NG groups x P_TOKS tokens then runs independent vpdpbusd chains (weights
 *      unsigned, activations signed: vpdpbusd's operand order) with the token's quants
 *      broadcast from kern_q8k_block.q in place, and every float step is lane-wise: no
 *      horizontal sums. Shapes measured (bench/profile.md, round 4). q6k_avx512.c runs the
 *      same panel scheme on Q6_K. The row-group layout's prefill takes this path too
 *      (kern_q4kp_panels_avx512): a panel block is one vpermt2d per vector away from its
 *      fixed 16-row groups (q4p_pack_group_kp).
 *   4. Scales without an int32 multiply: a sub-block's 32 products are split in two halves
 *      of 16, each |sum| <= 16 * 15 * 127 = 30480 < 2^15, so the two halves of a row fit the
 *      two int16 of one dword and vpdpwssd with (sc, sc) applies the scale and adds into the
 *      int32 isum in one step. The halves are interleaved by 4: step u (0..3) of sub-block s
 *      broadcasts the 8 activations 32s + 8u .. +7 as one qword, the even dword lanes
 *      (half 0) take the first 4 and the odd lanes (half 1) the last 4. Two accumulators A
 *      (rows 4l, 4l+1) and B (rows 4l+2, 4l+3), dword lane L = row 4(L/4) + (L/2)%2 (+2 for
 *      B), half L%2, are chosen so that vpackssdw(A, B), which works per 128-bit lane, puts
 *      both halves of row i in dword i (no saturation: both fit).
 *      msum = sum_p m_p * (bsum_2p + bsum_2p+1) is vpdpwssd of (m_p, m_p) with bsum dword p.
 *   5. Every output keeps its own accumulator and sees the blocks in ascending order in both
 *      paths, so tile shapes, panels, n_tok, r0 and r1 cannot change a bit.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kernels_int.h"
#include "kernels/kquant_x86_int.h"

#define INLINE static inline __attribute__((always_inline))
#define TOKS 8 /* tokens per decoded block in the row path: one ymm of accumulators */
#ifndef P_TOKS
#define P_TOKS 6 /* tokens per register tile of the panel path (measured) */
#endif
#define P_TMAX 6 /* largest P_TOKS the tile code is written for */
#ifndef P_NG
#define P_NG 1   /* 16-row groups per register tile of the panel path (measured) */
#endif
#ifndef PF_BYTES
#define PF_BYTES 2048
#endif

/* Super-block blk decoded for the row path (note 2). */
INLINE void q4_decode(struct kq_dec *d, const uint8_t *blk, const __m512i sidx[4])
{
    const __m512i m4 = _mm512_set1_epi8(15);
    __m128i sm = kq_scales_u32(blk + 4);
    /* 8 scales as int16 (lanes 0..7), 16 mins as int16 pairs [m0 m0 m1 m1 ...] */
    __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(sm));
    __m128i m8 = _mm_unpackhi_epi64(sm, sm);
    d->mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
    /* chunk j = bytes 32j..32j+31 of qs: low nibbles are values 64j.., high 64j+32.. */
    _Pragma("GCC unroll 8")
    for (int h = 0; h < 2; h++) {
        __m512i q = _mm512_loadu_si512(blk + 16 + 64 * h);
        __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
        d->wq[2 * h] = _mm512_shuffle_i64x2(lo, hi, 0x44);     /* lo lanes 0,1 | hi lanes 0,1 */
        d->wq[2 * h + 1] = _mm512_shuffle_i64x2(lo, hi, 0xee); /* lo lanes 2,3 | hi lanes 2,3 */
    }
    _Pragma("GCC unroll 8")
    for (int j = 0; j < 4; j++) d->ws[j] = _mm512_permutexvar_epi16(sidx[j], sc16);
    d->dw = kq_f16_at(blk);
    d->dmin = kq_f16_at(blk + 2);
}

INLINE void q4_prefetch(const uint8_t *blk)
{
    _mm_prefetch((const char *)blk + PF_BYTES, _MM_HINT_T0);
    _mm_prefetch((const char *)blk + PF_BYTES + 64, _MM_HINT_T0);
    _mm_prefetch((const char *)blk + PF_BYTES + 128, _MM_HINT_T0);
}

/* The row path (note 2) for rows [r0, r1). */
static void q4k_rows(float *y, int64_t y_ld, const uint8_t *w, const struct kern_q8k_block *xq,
                     int64_t n_tok, int64_t nb, int64_t r0, int64_t r1)
{
    __m512i sidx[4];
    _Pragma("GCC unroll 8")
    for (int j = 0; j < 4; j++) sidx[j] = kq_spread_idx(2 * j, 16);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + (size_t)r * (size_t)nb * KERN_Q4K_BYTES;
        if (n_tok == 1) {
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + b * KERN_Q4K_BYTES;
                q4_prefetch(blk);
                struct kq_dec d;
                q4_decode(&d, blk, sidx);
                acc = kq_apply1(&d, xq + b, acc);
            }
            y[r] = acc;
            continue;
        }
        for (int64_t t0 = 0; t0 < n_tok; t0 += TOKS) {
            int nt = (int)(n_tok - t0 < TOKS ? n_tok - t0 : TOKS);
            __m256 acc = _mm256_setzero_ps();
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + b * KERN_Q4K_BYTES;
                if (t0 == 0) q4_prefetch(blk);
                struct kq_dec d;
                q4_decode(&d, blk, sidx);
                acc = nt > 4 ? kq_apply(&d, xq + t0 * nb + b, nb, nt, acc, 8)
                             : kq_apply(&d, xq + t0 * nb + b, nb, nt, acc, 4);
            }
            float out[TOKS];
            _mm256_storeu_ps(out, acc);
            for (int t = 0; t < nt; t++) y[(t0 + t) * y_ld + r] = out[t];
        }
    }
}

/* ---- several tokens: 16-row panels and VNNI ------------------------------------------------
 * Notes 3-5. Panel blocks are per (16-row group, super-block); the token side is read in place.
 */
#define P_PANEL_BYTES (256 * 1024) /* repacked weights per panel (L2, on the stack) */
#ifndef P_MIN_TOKS
#define P_MIN_TOKS 16 /* fewer tokens: the per-row code (packing does not pay: a decode step of several sequences streams the weights from memory once; measured) */
#endif

struct q4p_blk {
    __m512i w[8][8]; /* [s][4 * ab + u]: lane L = row 4(L/4) + (L/2)%2 + 2ab, bytes of values
                      * 32s + 8u + 4(L%2) .. +3 (note 4) */
    __m512i sc[8];   /* lane i: (sc_s, sc_s) as int16 of row i */
    __m512i mn[8];   /* lane i: (m_p, m_p) as int16, paired with the bsum dword p */
    __m512 dw, dmin; /* lane i: row i's f16 scales as f32 */
};
/* Super-blocks per row that fit one group in a panel (49: K <= 12544). */
#define P_NB4 ((int64_t)(P_PANEL_BYTES / sizeof(struct q4p_blk)))

/* Packing: Q4_K's qs qwords and every scale are moved with plain loads (measured faster
 * than vpgatherdq / vpgatherdd, which made packing the larger part of a call at 6 tokens). */

/* The qword at byte off of the interleaved rows of note 4: qword 2l + m = row 4l + m + 2ab
 * (its two dwords are the lanes 4l + 2m + h, h = 0, 1). */
INLINE __m512i col_q64(const uint8_t *p, size_t rb, int ab)
{
    long long q[8];
    for (int j = 0; j < 8; j++) memcpy(&q[j], p + (size_t)(4 * (j / 2) + j % 2 + 2 * ab) * rb, 8);
    return _mm512_set_epi64(q[7], q[6], q[5], q[4], q[3], q[2], q[1], q[0]);
}

static void q4p_pack_group(struct q4p_blk *dst, const uint8_t *w, size_t rb, int64_t r, int64_t nb)
{
    const __m512i m4 = _mm512_set1_epi8(15), k3f = _mm512_set1_epi32(0x3f3f3f3f);
    const __m512i k0f = _mm512_set1_epi32(0x0f0f0f0f), k03 = _mm512_set1_epi32(0x03030303);
    const uint8_t *base = w + (size_t)r * rb;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = base + b * KERN_Q4K_BYTES;
        struct q4p_blk *d = dst + b;
        /* qs qword 4c + u holds values 64c + 8u .. +7 (low nibbles, sub-block 2c) and
         * 64c + 32 + 8u .. +7 (high nibbles, sub-block 2c + 1) */
        for (int c = 0; c < 4; c++)
            for (int u = 0; u < 4; u++)
                for (int ab = 0; ab < 2; ab++) {
                    __m512i q = col_q64(blk + 16 + 32 * c + 8 * u, rb, ab);
                    _mm512_store_si512(&d->w[2 * c][4 * ab + u], _mm512_and_si512(q, m4));
                    _mm512_store_si512(&d->w[2 * c + 1][4 * ab + u], _mm512_and_si512(_mm512_srli_epi32(q, 4), m4));
                }
        /* kern_q4k_scales lane-wise (kq_scales_u32's bit moves on 16 rows) */
        __m512i u0 = kq_col_u32(blk + 4, rb), u1 = kq_col_u32(blk + 8, rb), u2 = kq_col_u32(blk + 12, rb);
        __m512i w4[4];
        w4[0] = _mm512_and_si512(u0, k3f);
        w4[1] = _mm512_or_si512(_mm512_and_si512(u2, k0f), _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u0, 6), k03), 4));
        w4[2] = _mm512_and_si512(u1, k3f);
        w4[3] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi32(u2, 4), k0f),
                                _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(u1, 6), k03), 4));
        for (int s = 0; s < 8; s++) {
            _mm512_store_si512(&d->sc[s], kq_byte_pair(w4[s / 4], s % 4, false));
            _mm512_store_si512(&d->mn[s], kq_byte_pair(w4[2 + s / 4], s % 4, false));
        }
        d->dw = kq_rows_f16(blk, rb);
        d->dmin = kq_rows_f16(blk + 2, rb);
    }
}

/* NG groups (16 rows each, panel blocks pk[g * nb + b]) x NT tokens from t0. */
INLINE void q4p_tile(float *y, int64_t y_ld, const struct q4p_blk *pk, int64_t nb, int64_t r,
                     const struct kern_q8k_block *xq, int64_t t0, int NG, int NT)
{
    __m512 acc[2][P_TMAX];
    _Pragma("GCC unroll 16")
    for (int g = 0; g < NG; g++)
        _Pragma("GCC unroll 16")
        for (int t = 0; t < NT; t++) acc[g][t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const struct kern_q8k_block *xb[P_TMAX];
        _Pragma("GCC unroll 16")
        for (int t = 0; t < NT; t++) xb[t] = xq + (t0 + t) * nb + b;
        __m512i is[2][P_TMAX], ms[2][P_TMAX];
        _Pragma("GCC unroll 16")
        for (int g = 0; g < NG; g++)
            _Pragma("GCC unroll 16")
            for (int t = 0; t < NT; t++) is[g][t] = ms[g][t] = _mm512_setzero_si512();
        _Pragma("GCC unroll 16")
        for (int s = 0; s < 8; s++) {
            __m512i A[2][P_TMAX], B[2][P_TMAX];
            _Pragma("GCC unroll 16")
            for (int g = 0; g < NG; g++)
                _Pragma("GCC unroll 16")
                for (int t = 0; t < NT; t++) A[g][t] = B[g][t] = _mm512_setzero_si512();
            _Pragma("GCC unroll 16")
            for (int u = 0; u < 4; u++) {
                __m512i xv[P_TMAX];
                _Pragma("GCC unroll 16")
                for (int t = 0; t < NT; t++) xv[t] = kq_bcast64(xb[t]->q + 32 * s + 8 * u);
                _Pragma("GCC unroll 16")
                for (int g = 0; g < NG; g++) {
                    __m512i wa = _mm512_load_si512(&pk[g * nb + b].w[s][u]);
                    __m512i wb = _mm512_load_si512(&pk[g * nb + b].w[s][4 + u]);
                    _Pragma("GCC unroll 16")
                    for (int t = 0; t < NT; t++) {
                        A[g][t] = _mm512_dpbusd_epi32(A[g][t], wa, xv[t]);
                        B[g][t] = _mm512_dpbusd_epi32(B[g][t], wb, xv[t]);
                    }
                }
            }
            _Pragma("GCC unroll 16")
            for (int g = 0; g < NG; g++) {
                __m512i sc = _mm512_load_si512(&pk[g * nb + b].sc[s]);
                _Pragma("GCC unroll 16")
                for (int t = 0; t < NT; t++)
                    is[g][t] = _mm512_dpwssd_epi32(is[g][t], _mm512_packs_epi32(A[g][t], B[g][t]), sc);
            }
        }
        _Pragma("GCC unroll 16")
        for (int g = 0; g < NG; g++) {
            const struct q4p_blk *pb = &pk[g * nb + b];
            _Pragma("GCC unroll 16")
            for (int t = 0; t < NT; t++) {
                _Pragma("GCC unroll 16")
                for (int p = 0; p < 8; p++)
                    ms[g][t] = _mm512_dpwssd_epi32(ms[g][t], pb->mn[p], kq_bcast32(xb[t]->bsum + 2 * p));
                __m512 dx = _mm512_set1_ps(xb[t]->d);
                __m512 a = _mm512_fmadd_ps(_mm512_mul_ps(pb->dw, dx), _mm512_cvtepi32_ps(is[g][t]), acc[g][t]);
                acc[g][t] = _mm512_fnmadd_ps(_mm512_mul_ps(pb->dmin, dx), _mm512_cvtepi32_ps(ms[g][t]), a);
            }
        }
    }
    _Pragma("GCC unroll 16")
    for (int g = 0; g < NG; g++)
        _Pragma("GCC unroll 16")
        for (int t = 0; t < NT; t++) _mm512_storeu_ps(y + (t0 + t) * y_ld + r + 16 * g, acc[g][t]);
}

static void q4p_tiles(float *y, int64_t y_ld, const struct q4p_blk *pk, int64_t nb, int64_t r,
                      const struct kern_q8k_block *xq, int64_t t0, int ng, int nt)
{
    if (ng == 2) { KQ_TILE_CASES(q4p_tile, 2, xq) } else { KQ_TILE_CASES(q4p_tile, 1, xq) }
}

/* The panel block of 16 rows from the row-group layout (q4kp.c): super-blocks 0..nb-1 of the
 * group at gp. Lane L of w[s][4ab + u] is dword R(L) = 4(L/4) + (L/2)%2 + 2ab of the layout's
 * vector for values 32s + 8u + 4(L%2) .. (chunk s / 2, u' = 2u + L%2, nibble s % 2), so one
 * vpermt2d of the vectors u' = 2u and 2u + 1 gathers it; the layout's scales and mins are
 * already one byte per row. */
static void q4p_pack_group_kp(struct q4p_blk *dst, const uint8_t *gp, int64_t nb)
{
    const __m512i m4 = _mm512_set1_epi8(15);
    const __m512i idx[2] = { kq_kp_gather_idx(0), kq_kp_gather_idx(1) };
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *sb = gp + (size_t)b * KERN_Q4KP_SB_BYTES;
        struct q4p_blk *d = dst + b;
        for (int j = 0; j < 4; j++)
            for (int u = 0; u < 4; u++) {
                __m512i va = _mm512_load_si512(sb + 64 * (8 * j + 2 * u));
                __m512i vb = _mm512_load_si512(sb + 64 * (8 * j + 2 * u + 1));
                for (int ab = 0; ab < 2; ab++) {
                    __m512i q = _mm512_permutex2var_epi32(va, idx[ab], vb);
                    _mm512_store_si512(&d->w[2 * j][4 * ab + u], _mm512_and_si512(q, m4));
                    _mm512_store_si512(&d->w[2 * j + 1][4 * ab + u], _mm512_and_si512(_mm512_srli_epi32(q, 4), m4));
                }
            }
        for (int s = 0; s < 8; s++) {
            __m512i sc = _mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(sb + 2048 + 16 * s)));
            __m512i mn = _mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(sb + 2176 + 16 * s)));
            _mm512_store_si512(&d->sc[s], _mm512_or_si512(sc, _mm512_slli_epi32(sc, 16)));
            _mm512_store_si512(&d->mn[s], _mm512_or_si512(mn, _mm512_slli_epi32(mn, 16)));
        }
        d->dw = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(sb + 2304)));
        d->dmin = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(sb + 2336)));
    }
}

/* Rows [r0, r1g) in panels of whole 16-row groups; each panel is packed once and every token
 * tile runs over all its groups (the tile's activations stay in L1). With kp set, w is the
 * row-group layout and the groups are r0 / 16 .. r1g / 16 of it. */
static void q4p_rows(float *y, int64_t y_ld, const uint8_t *w, bool kp, const struct kern_q8k_block *xq,
                     int64_t n_tok, int64_t nb, int64_t r0, int64_t r1g)
{
    struct q4p_blk pk[P_NB4];
    const int64_t gmax = (int64_t)(sizeof pk / sizeof pk[0]) / nb;
    const size_t rb = (size_t)nb * KERN_Q4K_BYTES, gb = (size_t)nb * KERN_Q4KP_SB_BYTES;
    for (int64_t p0 = r0; p0 < r1g; p0 += gmax * 16) {
        int64_t groups = HS_MIN(gmax, (r1g - p0) / 16);
        for (int64_t g = 0; g < groups; g++) {
            if (kp) q4p_pack_group_kp(pk + g * nb, w + (size_t)(p0 / 16 + g) * gb, nb);
            else q4p_pack_group(pk + g * nb, w, rb, p0 + 16 * g, nb);
        }
        for (int64_t t = 0; t < n_tok; t += P_TOKS) {
            int nt = (int)HS_MIN((int64_t)P_TOKS, n_tok - t);
            int64_t g = 0;
            for (; g + P_NG <= groups; g += P_NG) q4p_tiles(y, y_ld, pk + g * nb, nb, p0 + 16 * g, xq, t, P_NG, nt);
            for (; g < groups; g++) q4p_tiles(y, y_ld, pk + g * nb, nb, p0 + 16 * g, xq, t, 1, nt);
        }
    }
}

bool kern_q4kp_panels_avx512(float *y, int64_t y_ld, const void *wp, const struct kern_q8k_block *xq,
                             int64_t n_tok, int64_t k, int64_t g0, int64_t g1)
{
    int64_t nb = k / KERN_QK;
    if (n_tok < P_MIN_TOKS || nb > P_NB4) return false;
    if (g0 < g1) q4p_rows(y, y_ld, wp, true, xq, n_tok, nb, 16 * g0, 16 * g1);
    return true;
}

void kern_matmul_k_avx512(float *y, int64_t y_ld, const void *w, int wt,
                          const struct kern_q8k_block *xq, int64_t n_tok, int64_t k, int64_t r0,
                          int64_t r1)
{
    if (wt == KERN_K_Q5_K) { /* q5k_avx512.c */
        kern_matmul_q5k_avx512(y, y_ld, w, xq, n_tok, k, r0, r1);
        return;
    }
    if (wt != KERN_K_Q4_K) { /* Q6_K: q6k_avx512.c */
        kern_matmul_q6k_avx512(y, y_ld, w, xq, n_tok, k, r0, r1);
        return;
    }
    int64_t nb = k / KERN_QK;
    int64_t r1g = r0;
    if (n_tok >= P_MIN_TOKS && nb <= P_NB4) {
        r1g = r0 + (r1 - r0) / 16 * 16;
        q4p_rows(y, y_ld, w, false, xq, n_tok, nb, r0, r1g);
    }
    q4k_rows(y, y_ld, w, xq, n_tok, nb, r1g, r1);
}

#else
typedef int kern_q4k_avx512_unused; /* not x86: the variant does not exist */
#endif
