/*
 * q6k_avx512.c — AVX-512 (F, BW, VL, DQ, VNNI) variant of the Q6_K matmul (kern_matmul_q6k: Q6_K
 * weights x kern_q8k_quantize activations). Bit-identical to the scalar reference in q6k.c;
 * reached through the "avx512" / "avx512vnni" tables' matmul_k (q4k_avx512.c forwards
 * KERN_K_Q6_K here). Compiled with the Makefile's AVX-512 flags.
 *
 * How the scalar order maps onto registers (kernels.h, "K-quant weights"); q4k_avx512.c's
 * mapping, on Q6_K's 16-value groups:
 *   1. All the per-block work is integer and exact, so its order is free; only the float
 *      part is fixed: dw * dx rounded once, then one fmaf per block into the output's own
 *      accumulator, blocks ascending. Both paths below do exactly that.
 *   2. Per-row path (one token, few tokens, and rows past the last full group of 16): 64
 *      weights of one chunk sit in one zmm as unsigned bytes (the low nibbles of 64 ql bytes,
 *      or their high nibbles, with the qh bit pairs shifted in). vpmaddubsw with the int8
 *      activations gives pair sums (at most 2 * 63 * 128, no int16 saturation), vpdpwssd with
 *      the scales of each pair's 16-group widens to int32 and applies the scale in one step;
 *      the lanes are summed with one reduction per block. The -32 offset uses the activation
 *      bsums (vpmaddwd of 16 bsums with 16 scales), as the scalar formula writes it. A row's
 *      super-block is decoded once and applied to up to TOKS = 8 tokens, their sums reduced
 *      together and the float step run lane-wise (q6_apply; q4k_avx512.c
 *      note 2).
 *   3. Panel path (n_tok >= P_MIN_TOKS, the prefill): q4k_avx512.c's note 3 (16-row groups
 *      repacked once per call, P_PANEL_BYTES on the stack, so K <= P_NB6 super-blocks; lane i
 *      of a zmm belongs to row i; independent vpdpbusd chains, lane-wise float steps, no
 *      horizontal sums). Weight dwords are packed with vpgatherdd (measured faster here than
 *      plain loads). The row-group layout's prefill takes this path too
 *      (kern_q6kp_panels_avx512): its groups are fixed 16-row groups already, and a panel
 *      block is two vpermt2d per vector away from them (q6p_pack_group_kp).
 *   4. A group's sum (<= 16 * 63 * 127) does not fit int16, but with the -32 offset applied
 *      first a half of 8 values does: |sum (q - 32) x| <= 8 * 32 * 127 = 32512. So each
 *      accumulator starts at -32 times its half's activation sum (q6p_corr: one broadcast
 *      qword per token and group, from a vpdpbusd-with-ones prepass per token tile), steps
 *      u = 0, 1 add the 8 activations 16g + 8u .. +7 (halves interleaved by 4 as in
 *      q4k_avx512.c's note 4), and vpackssdw + vpdpwssd with (sc_g, sc_g) scale and add:
 *      isum = sum_g sc_g (dot_g - 32 bsum_g), the scalar's terms.
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

/* One decoded super-block of the row path (note 2): chunk c's 64 weights as unsigned bytes,
 * each int16 lane's group scale, the 16 scales as int16 (for the bsums) and dw as f32. */
struct q6_dec {
    __m512i wq[4], ws[4];
    __m256i sc16;
    float dw;
};

INLINE void q6_decode(struct q6_dec *d, const uint8_t *blk, const __m512i sidx[4], __m512i sh01, __m512i sh23)
{
    const __m512i m4 = _mm512_set1_epi8(15), m2 = _mm512_set1_epi8(3);
    d->sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 192)));
    _Pragma("GCC unroll 8")
    for (int h = 0; h < 2; h++) {
        __m512i ql = _mm512_loadu_si512(blk + 64 * h);
        __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h)));
        __m512i h01 = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, sh01), m2), 4);
        __m512i h23 = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, sh23), m2), 4);
        d->wq[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4), h01);
        d->wq[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), h23);
    }
    _Pragma("GCC unroll 8")
    for (int c = 0; c < 4; c++) d->ws[c] = _mm512_permutexvar_epi16(sidx[c], _mm512_castsi256_si512(d->sc16));
    d->dw = kq_f16_at(blk + 208);
}

INLINE void q6_prefetch(const uint8_t *blk)
{
    _Pragma("GCC unroll 4")
    for (int c = 0; c < 4; c++) _mm_prefetch((const char *)blk + PF_BYTES + 64 * c, _MM_HINT_T0);
}

/* The scaled dot (vpdpwssd chain) of a decoded block with one activation block, 8 lanes. */
INLINE __m256i q6_dot(const struct q6_dec *d, const struct kern_q8k_block *xb)
{
    __m512i s = _mm512_setzero_si512();
    _Pragma("GCC unroll 8")
    for (int c = 0; c < 4; c++)
        s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(d->wq[c], _mm512_loadu_si512(xb->q + 64 * c)), d->ws[c]);
    return _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
}

/* acc lanes t < nt (nt <= W, W = 4 or 8 tokens, activation blocks xb[t * nb]) after one
 * decoded block: isum = s1 - 32 s2 of the tokens as one integer vector (kq_reduce8 or
 * kq_reduce4 of both parts; exact), then the scalar's dw * dx rounded once and one fmaf,
 * lane-wise (lanes past nt see dx = 0 and are never stored). */
INLINE __m256 q6_apply(const struct q6_dec *d, const struct kern_q8k_block *xb, int64_t nb, int nt, __m256 acc,
                       int W)
{
    __m256i hs[8], hm[8];
    float xd[8] = {0};
    _Pragma("GCC unroll 8")
    for (int t = 0; t < W; t++) {
        if (t >= nt) {
            hs[t] = hm[t] = _mm256_setzero_si256();
            continue;
        }
        const struct kern_q8k_block *x = xb + t * nb;
        hs[t] = q6_dot(d, x);
        hm[t] = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)x->bsum), d->sc16);
        xd[t] = x->d;
    }
    __m256i s1 = W == 8 ? kq_reduce8(hs) : _mm256_zextsi128_si256(kq_reduce4(hs));
    __m256i s2 = W == 8 ? kq_reduce8(hm) : _mm256_zextsi128_si256(kq_reduce4(hm));
    __m256 dw = _mm256_mul_ps(_mm256_set1_ps(d->dw), _mm256_loadu_ps(xd));
    return _mm256_fmadd_ps(dw, _mm256_cvtepi32_ps(_mm256_sub_epi32(s1, _mm256_slli_epi32(s2, 5))), acc);
}

/* The row path (note 2) for rows [r0, r1). */
static void q6k_rows(float *y, int64_t y_ld, const uint8_t *w, const struct kern_q8k_block *xq,
                     int64_t n_tok, int64_t nb, int64_t r0, int64_t r1)
{
    /* qh shifts: chunk 2h takes bit pairs 0 (first 32 values) and 2, chunk 2h+1 pairs 4, 6 */
    int16_t sh[2][32];
    for (int i = 0; i < 32; i++) {
        sh[0][i] = (int16_t)(i < 16 ? 0 : 2);
        sh[1][i] = (int16_t)(i < 16 ? 4 : 6);
    }
    const __m512i sh01 = _mm512_loadu_si512(sh[0]), sh23 = _mm512_loadu_si512(sh[1]);
    __m512i sidx[4];
    _Pragma("GCC unroll 8")
    for (int c = 0; c < 4; c++) sidx[c] = kq_spread_idx(4 * c, 8);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + (size_t)r * (size_t)nb * KERN_Q6K_BYTES;
        if (n_tok == 1) {
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + b * KERN_Q6K_BYTES;
                q6_prefetch(blk);
                struct q6_dec d;
                q6_decode(&d, blk, sidx, sh01, sh23);
                int32_t s1 = kq_hsum256(q6_dot(&d, xq + b));
                int32_t s2 = kq_hsum256(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xq[b].bsum), d.sc16));
                acc = fmaf(d.dw * xq[b].d, (float)(s1 - 32 * s2), acc);
            }
            y[r] = acc;
            continue;
        }
        for (int64_t t0 = 0; t0 < n_tok; t0 += TOKS) {
            int nt = (int)(n_tok - t0 < TOKS ? n_tok - t0 : TOKS);
            __m256 acc = _mm256_setzero_ps();
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + b * KERN_Q6K_BYTES;
                if (t0 == 0) q6_prefetch(blk);
                struct q6_dec d;
                q6_decode(&d, blk, sidx, sh01, sh23);
                acc = nt > 4 ? q6_apply(&d, xq + t0 * nb + b, nb, nt, acc, 8)
                             : q6_apply(&d, xq + t0 * nb + b, nb, nt, acc, 4);
            }
            float out[TOKS];
            _mm256_storeu_ps(out, acc);
            for (int t = 0; t < nt; t++) y[(t0 + t) * y_ld + r] = out[t];
        }
    }
}

/* ---- several tokens: 16-row panels and VNNI ------------------------------------------------
 * Notes 3, 4. Panel blocks are per (16-row group, super-block); the token side is read in place.
 */
#define P_PANEL_BYTES (256 * 1024) /* repacked weights per panel (L2, on the stack) */
#ifndef P_MIN_TOKS
#define P_MIN_TOKS 16 /* fewer tokens: the per-row code (packing does not pay: a decode step of several sequences streams the weights from memory once; measured) */
#endif

struct q6p_blk {
    __m512i w[16][4]; /* [g][2 * ab + u]: lane L = row 4(L/4) + (L/2)%2 + 2ab, values
                       * 16g + 8u + 4(L%2) .. +3 (0..63; note 4) */
    __m512i sc[16];   /* lane i: (sc_g, sc_g) as int16 of row i */
    __m512 dw;
};
/* The activation side of note 4 for one token and block: qword g = (-32 S(g, 0), -32 S(g, 1)),
 * S(g, h) = the sum of q over 16g + 8u + 4h .. +3 for u = 0, 1 (the half that dword parity h
 * of the A / B accumulators sums). */
struct q6p_corr {
    int32_t c[16][2];
};
/* Super-blocks per row that fit one group in a panel (50: K <= 12800). */
#define P_NB6 ((int64_t)(P_PANEL_BYTES / sizeof(struct q6p_blk)))

/* Gather offsets of the same interleave by dword lane: lane 4l + 2m + h reads row
 * 4l + m + 2ab at + 4h (15 rb < 2^31: nb <= P_NB6). */
INLINE __m512i rows_idx(size_t rb, int ab)
{
    int32_t ix[16];
    for (int L = 0; L < 16; L++) ix[L] = (int32_t)((size_t)(4 * (L / 4) + (L / 2) % 2 + 2 * ab) * rb) + 4 * (L % 2);
    return _mm512_loadu_si512(ix);
}

static void q6p_pack_group(struct q6p_blk *dst, const uint8_t *w, size_t rb, int64_t r, int64_t nb)
{
    const __m512i m4 = _mm512_set1_epi8(15), m2 = _mm512_set1_epi8(3);
    const __m512i idx0 = rows_idx(rb, 0), idx1 = rows_idx(rb, 1);
    const uint8_t *base = w + (size_t)r * rb;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = base + b * KERN_Q6K_BYTES;
        struct q6p_blk *d = dst + b;
        /* value 128h + 32k + l: low nibble (k < 2) or high nibble of ql[64h + 32(k%2) + l],
         * bits 2k, 2k+1 of qh[32h + l] as bits 4, 5 */
        for (int h = 0; h < 2; h++)
            for (int l = 0; l < 32; l += 8)
                for (int ab = 0; ab < 2; ab++) {
                    __m512i ix = ab ? idx1 : idx0;
                    __m512i ql0 = _mm512_i32gather_epi32(ix, blk + 64 * h + l, 1);
                    __m512i ql1 = _mm512_i32gather_epi32(ix, blk + 64 * h + 32 + l, 1);
                    __m512i qh = _mm512_i32gather_epi32(ix, blk + 128 + 32 * h + l, 1);
                    for (int k = 0; k < 4; k++) {
                        __m512i ql = k % 2 ? ql1 : ql0;
                        __m512i lo = _mm512_and_si512(k < 2 ? ql : _mm512_srli_epi32(ql, 4), m4);
                        __m512i hi = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(qh, 2 * k), m2), 4);
                        int v = 128 * h + 32 * k + l;
                        _mm512_store_si512(&d->w[v / 16][2 * ab + (v % 16) / 8], _mm512_or_si512(lo, hi));
                    }
                }
        for (int j = 0; j < 4; j++) {
            __m512i s4 = kq_col_u32(blk + 192 + 4 * j, rb);
            for (int g = 0; g < 4; g++) _mm512_store_si512(&d->sc[4 * j + g], kq_byte_pair(s4, g, true));
        }
        d->dw = kq_rows_f16(blk + 208, rb);
    }
}

/* q6p_corr of nb blocks of one token: the sums of 4 quants by vpdpbusd with ones, then per
 * 16-group (one 128-bit lane: dwords 2u + h) dword h + dword 2 + h. */
static void q6p_prep(struct q6p_corr *dst, const struct kern_q8k_block *xb, int64_t nb)
{
    const __m512i ones = _mm512_set1_epi8(1);
    const __m512i pick = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
    for (int64_t b = 0; b < nb; b++) {
        __m512i s[4];
        for (int c = 0; c < 4; c++) {
            __m512i d4 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ones, _mm512_loadu_si512(xb[b].q + 64 * c));
            __m512i pair = _mm512_add_epi32(d4, _mm512_shuffle_epi32(d4, _MM_PERM_BADC));
            s[c] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(pair, 5));
        }
        _mm512_storeu_si512(&dst[b].c[0][0], _mm512_permutex2var_epi64(s[0], pick, s[1]));
        _mm512_storeu_si512(&dst[b].c[8][0], _mm512_permutex2var_epi64(s[2], pick, s[3]));
    }
}

INLINE void q6p_tile(float *y, int64_t y_ld, const struct q6p_blk *pk, int64_t nb, int64_t r,
                     const struct kern_q8k_block *xq, const struct q6p_corr *cr, int64_t t0, int NG, int NT)
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
        __m512i is[2][P_TMAX];
        _Pragma("GCC unroll 16")
        for (int g = 0; g < NG; g++)
            _Pragma("GCC unroll 16")
            for (int t = 0; t < NT; t++) is[g][t] = _mm512_setzero_si512();
        _Pragma("GCC unroll 16")
        for (int q = 0; q < 16; q++) {
            __m512i A[2][P_TMAX], B[2][P_TMAX];
            _Pragma("GCC unroll 16")
            for (int t = 0; t < NT; t++) {
                __m512i c = kq_bcast64(cr[t * nb + b].c[q]); /* -32 times the half's quant sum */
                _Pragma("GCC unroll 16")
                for (int g = 0; g < NG; g++) A[g][t] = B[g][t] = c;
            }
            _Pragma("GCC unroll 16")
            for (int u = 0; u < 2; u++) {
                __m512i xv[P_TMAX];
                _Pragma("GCC unroll 16")
                for (int t = 0; t < NT; t++) xv[t] = kq_bcast64(xb[t]->q + 16 * q + 8 * u);
                _Pragma("GCC unroll 16")
                for (int g = 0; g < NG; g++) {
                    __m512i wa = _mm512_load_si512(&pk[g * nb + b].w[q][u]);
                    __m512i wb = _mm512_load_si512(&pk[g * nb + b].w[q][2 + u]);
                    _Pragma("GCC unroll 16")
                    for (int t = 0; t < NT; t++) {
                        A[g][t] = _mm512_dpbusd_epi32(A[g][t], wa, xv[t]);
                        B[g][t] = _mm512_dpbusd_epi32(B[g][t], wb, xv[t]);
                    }
                }
            }
            _Pragma("GCC unroll 16")
            for (int g = 0; g < NG; g++) {
                __m512i sc = _mm512_load_si512(&pk[g * nb + b].sc[q]);
                _Pragma("GCC unroll 16")
                for (int t = 0; t < NT; t++)
                    is[g][t] = _mm512_dpwssd_epi32(is[g][t], _mm512_packs_epi32(A[g][t], B[g][t]), sc);
            }
        }
        _Pragma("GCC unroll 16")
        for (int g = 0; g < NG; g++) {
            const struct q6p_blk *pb = &pk[g * nb + b];
            _Pragma("GCC unroll 16")
            for (int t = 0; t < NT; t++) {
                __m512 dx = _mm512_set1_ps(xb[t]->d);
                acc[g][t] = _mm512_fmadd_ps(_mm512_mul_ps(pb->dw, dx), _mm512_cvtepi32_ps(is[g][t]), acc[g][t]);
            }
        }
    }
    _Pragma("GCC unroll 16")
    for (int g = 0; g < NG; g++)
        _Pragma("GCC unroll 16")
        for (int t = 0; t < NT; t++) _mm512_storeu_ps(y + (t0 + t) * y_ld + r + 16 * g, acc[g][t]);
}

static void q6p_tiles(float *y, int64_t y_ld, const struct q6p_blk *pk, int64_t nb, int64_t r,
                      const struct kern_q8k_block *xq, const struct q6p_corr *cr, int64_t t0, int ng, int nt)
{
    if (ng == 2) { KQ_TILE_CASES(q6p_tile, 2, xq, cr) } else { KQ_TILE_CASES(q6p_tile, 1, xq, cr) }
}

/* The panel block of 16 rows from the row-group layout (q6kp.c): super-blocks 0..nb-1 of the
 * group at gp. Lane L of w[g][2ab + u] is dword R(L) = 4(L/4) + (L/2)%2 + 2ab of the layout's
 * vector for quants 16g + 8u + 4(L%2) .. (u4 = 2u + L%2), so one vpermt2d of the vectors u4 =
 * 2u and 2u + 1 gathers it (for ql and for qh); then the same nibble and bit-pair moves as
 * from the rows. Scales: the layout's pairs (sc_2p, sc_2p+1) per row, each duplicated. */
static void q6p_pack_group_kp(struct q6p_blk *dst, const uint8_t *gp, int64_t nb)
{
    const __m512i m4 = _mm512_set1_epi8(15), m2 = _mm512_set1_epi8(3);
    const __m512i lo16 = _mm512_set1_epi32(0xffff), hi16 = _mm512_set1_epi32((int32_t)0xffff0000u);
    const __m512i idx[2] = { kq_kp_gather_idx(0), kq_kp_gather_idx(1) };
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *sb = gp + (size_t)b * KERN_Q6KP_SB_BYTES;
        struct q6p_blk *d = dst + b;
        for (int h = 0; h < 2; h++)
            for (int uh = 0; uh < 2; uh++)
                for (int u = 0; u < 2; u++) {
                    int ua = 4 * uh + 2 * u; /* u of the vectors u4 = 2u (even lanes) and 2u + 1 */
                    __m512i qha = _mm512_load_si512(sb + 2048 + 64 * (8 * h + ua));
                    __m512i qhb = _mm512_load_si512(sb + 2048 + 64 * (8 * h + ua + 1));
                    for (int c = 0; c < 2; c++) {
                        __m512i qla = _mm512_load_si512(sb + 64 * (16 * h + 8 * c + ua));
                        __m512i qlb = _mm512_load_si512(sb + 64 * (16 * h + 8 * c + ua + 1));
                        for (int ab = 0; ab < 2; ab++) {
                            __m512i ql = _mm512_permutex2var_epi32(qla, idx[ab], qlb);
                            __m512i qh = _mm512_permutex2var_epi32(qha, idx[ab], qhb);
                            for (int k = c; k < 4; k += 2) { /* kk = c (low nibbles), c + 2 (high) */
                                __m512i lo = _mm512_and_si512(k < 2 ? ql : _mm512_srli_epi32(ql, 4), m4);
                                __m512i hi = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(qh, 2 * k), m2), 4);
                                _mm512_store_si512(&d->w[8 * h + 2 * k + uh][2 * ab + u], _mm512_or_si512(lo, hi));
                            }
                        }
                    }
                }
        for (int p = 0; p < 8; p++) {
            __m512i pr = _mm512_cvtepi8_epi16(_mm256_load_si256((const __m256i *)(sb + 3072 + 32 * p)));
            _mm512_store_si512(&d->sc[2 * p], _mm512_or_si512(_mm512_and_si512(pr, lo16), _mm512_slli_epi32(pr, 16)));
            _mm512_store_si512(&d->sc[2 * p + 1], _mm512_or_si512(_mm512_and_si512(pr, hi16), _mm512_srli_epi32(pr, 16)));
        }
        d->dw = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(sb + 3328)));
    }
}

/* Panels of whole 16-row groups: rows [r0, r1g) of the Q6_K rows w (r1g - r0 a multiple of
 * 16), or, with kp set, groups r0 / 16 .. r1g / 16 of the row-group layout at w. */
static void q6p_rows(float *y, int64_t y_ld, const uint8_t *w, bool kp, const struct kern_q8k_block *xq,
                     int64_t n_tok, int64_t nb, int64_t r0, int64_t r1g)
{
    struct q6p_blk pk[P_NB6];
    struct q6p_corr cr[P_TMAX * P_NB6];
    const int64_t gmax = (int64_t)(sizeof pk / sizeof pk[0]) / nb;
    const size_t rb = (size_t)nb * KERN_Q6K_BYTES, gb = (size_t)nb * KERN_Q6KP_SB_BYTES;
    for (int64_t p0 = r0; p0 < r1g; p0 += gmax * 16) {
        int64_t groups = HS_MIN(gmax, (r1g - p0) / 16);
        for (int64_t g = 0; g < groups; g++) {
            if (kp) q6p_pack_group_kp(pk + g * nb, w + (size_t)(p0 / 16 + g) * gb, nb);
            else q6p_pack_group(pk + g * nb, w, rb, p0 + 16 * g, nb);
        }
        for (int64_t t = 0; t < n_tok; t += P_TOKS) {
            int nt = (int)HS_MIN((int64_t)P_TOKS, n_tok - t);
            for (int j = 0; j < nt; j++) q6p_prep(cr + j * nb, xq + (t + j) * nb, nb);
            int64_t g = 0;
            for (; g + P_NG <= groups; g += P_NG) q6p_tiles(y, y_ld, pk + g * nb, nb, p0 + 16 * g, xq, cr, t, P_NG, nt);
            for (; g < groups; g++) q6p_tiles(y, y_ld, pk + g * nb, nb, p0 + 16 * g, xq, cr, t, 1, nt);
        }
    }
}

bool kern_q6kp_panels_avx512(float *y, int64_t y_ld, const void *wp, const struct kern_q8k_block *xq,
                             int64_t n_tok, int64_t k, int64_t g0, int64_t g1)
{
    int64_t nb = k / KERN_QK;
    if (n_tok < P_MIN_TOKS || nb > P_NB6) return false;
    if (g0 < g1) q6p_rows(y, y_ld, wp, true, xq, n_tok, nb, 16 * g0, 16 * g1);
    return true;
}

void kern_matmul_q6k_avx512(float *y, int64_t y_ld, const void *w,
                            const struct kern_q8k_block *xq, int64_t n_tok, int64_t k, int64_t r0,
                            int64_t r1)
{
    int64_t nb = k / KERN_QK;
    int64_t r1g = r0;
    if (n_tok >= P_MIN_TOKS && nb <= P_NB6) {
        r1g = r0 + (r1 - r0) / 16 * 16;
        q6p_rows(y, y_ld, w, false, xq, n_tok, nb, r0, r1g);
    }
    q6k_rows(y, y_ld, w, xq, n_tok, nb, r1g, r1);
}

#else
typedef int kern_q6k_avx512_unused; /* not x86: the variant does not exist */
#endif
