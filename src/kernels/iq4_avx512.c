/*
 * iq4_avx512.c — AVX-512 variants of the IQ4_NL and IQ4_XS matmuls (iq4.c) and the AVX-512
 * front door of the extra block types (kern_matmul_x_avx512, forwarding Q5_1 to
 * q5_1_avx512.c). Bit-identical to the scalar references; reached through
 * kern_ops_for("avx512" / "avx512vnni")->matmul_x. Compiled with the Makefile's AVX-512
 * flags (F, BW, VL, VNNI).
 *
 * Design note:
 *   1. The codebook lookup is a vpshufb by the 4-bit indices into |kv| (exact); the sign
 *      of kv (negative exactly for indices 0..7) moves onto the activation (x in
 *      [-127, 127]: negation cannot overflow) under a byte mask, and vpdpbusd multiplies
 *      unsigned |kv| by the signed result into int32 lanes. IQ4_XS takes two sub-blocks
 *      per zmm (64 values; lanes 0..7 the first, 8..15 the second), multiplies the lanes by
 *      their sub-block's ls - 32 and adds them up per super-block. All integer and exact.
 *   2. The float steps are the scalar's: one rounded dw * dx, one fmaf per block into lane
 *      b % 8 (IQ4_NL, then the tree 4, 2, 1) or per super-block into the one accumulator
 *      (IQ4_XS). IQ4_NL does 8 blocks at a time with the 8 sums in one ymm (q5_1_avx2.c's
 *      scheme), the last nb % 8 one at a time.
 *   3. A block is decoded once per tile of up to TOKS tokens; each token keeps its own
 *      sums, so n_tok, r0 and r1 cannot change a bit.
 *   4. Prefill (n_tok >= XT_Q8V_PANEL_TOKS, K <= XT_Q8V_KMAX): an IQ4_NL block is a Q8_0 block
 *      in disguise — its int8 values kv[nibble] and its f16 scale give the same integer dot
 *      and the same dw * dx, fmaf into lane b % 8 and tree as Q8_0's reference. So rows are
 *      decoded (vpshufb by the signed codebook) into Q8_0 rows on the stack, a chunk at a
 *      time, and go through matmul_avx512.c's Q8_0 panel path: same bits, the panel's speed,
 *      the decode paid once per chunk for all the tokens.
 *   5. IQ4_XS prefill (same thresholds) has a panel path of its own: 16 rows are decoded
 *      and transposed once per call so that lane i of a zmm is row i (4 bytes of one
 *      32-value sub-block per lane); a token's quants, offset by 128 to unsigned and
 *      broadcast 4 at a time, advance 16 rows' sub-block dots with one vpdpbusd; 128 times
 *      the sub-block's weight sum comes off (exact), each dot times its ls - 32 joins the
 *      super-block's integer sum, and one dw * dx fmadd per super-block follows: the
 *      reference's steps, for 16 rows at once.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kquant_x86_int.h"
#include "kernels/xtype_x86_int.h"

#define TOKS 8

/* |kv| of the codebook, for vpshufb. */
static inline __attribute__((always_inline)) __m128i iq4_abs_table(void)
{
    return _mm_abs_epi8(_mm_loadu_si128((const __m128i *)kern_iq4_values));
}

/* Rows [r, r + n) of IQ4_NL as Q8_0 rows into dst (design note 4). */
static void iq4nl_to_q8_0(uint8_t *dst, const uint8_t *w, int64_t nb, int64_t r, int64_t n)
{
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kern_iq4_values));
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *src = w + (size_t)(r + i) * (size_t)nb * KERN_IQ4NL_BYTES;
        uint8_t *out = dst + (size_t)i * (size_t)nb * KERN_Q8_BLOCK_BYTES;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = src + b * KERN_IQ4NL_BYTES;
            uint8_t *q = out + b * KERN_Q8_BLOCK_BYTES;
            memcpy(q, blk, 2); /* the f16 scale */
            _mm256_storeu_si256((__m256i *)(q + 2), _mm256_shuffle_epi8(table, xt_nibbles(blk + 2)));
        }
    }
}

/* Rows decoded per chunk: as many as the stack buffer holds for this K, whole groups of 16
 * (the panel path's row group) when it holds at least 16. */
#define IQ4_DEC_BYTES (16 * (XT_Q8V_KMAX / KERN_Q8_BLOCK) * KERN_Q8_BLOCK_BYTES)

static void iq4nl_panels(float *y, int64_t y_ld, const uint8_t *w, const struct kern_q8_block *xq, int64_t n_tok,
                         int64_t k, int64_t r0, int64_t r1)
{
    uint8_t dec[IQ4_DEC_BYTES];
    const int64_t nb = k / KERN_Q8_BLOCK, per = IQ4_DEC_BYTES / (nb * KERN_Q8_BLOCK_BYTES) / 16 * 16;
    for (int64_t r = r0; r < r1; r += per) {
        int64_t n = r1 - r < per ? r1 - r : per;
        iq4nl_to_q8_0(dec, w, nb, r, n);
        kern_matmul_q8_0_vnni(y + r, y_ld, dec, xq, n_tok, k, 0, n);
    }
}

void kern_matmul_iq4nl_avx512(float *y, int64_t y_ld, const void *w, const struct kern_q8_block *xq,
                              int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    if (n_tok >= XT_Q8V_PANEL_TOKS && k <= XT_Q8V_KMAX) {
        iq4nl_panels(y, y_ld, w, xq, n_tok, k, r0, r1);
        return;
    }
    const int64_t nb = k / KERN_Q8_BLOCK, nb8 = nb - nb % KERN_Q8_LANES;
    const __m256i table = _mm256_broadcastsi128_si256(iq4_abs_table());
    const __m256i eight = _mm256_set1_epi8(8);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * (size_t)nb * KERN_IQ4NL_BYTES;
        for (int64_t t0 = 0; t0 < n_tok; t0 += TOKS) {
            int nt = (int)(n_tok - t0 < TOKS ? n_tok - t0 : TOKS);
            __m256 av[TOKS];
            for (int t = 0; t < TOKS; t++) av[t] = _mm256_setzero_ps();
            /* groups of 8 blocks: block b0 + j in lane j = its b % 8 */
            for (int64_t b0 = 0; b0 < nb8; b0 += KERN_Q8_LANES) {
                const uint8_t *g = row + b0 * KERN_IQ4NL_BYTES;
                __m256i aw[8];
                __mmask32 neg[8];
                for (int j = 0; j < 8; j++) {
                    __m256i idx = xt_nibbles(g + j * KERN_IQ4NL_BYTES + 2);
                    aw[j] = _mm256_shuffle_epi8(table, idx);
                    neg[j] = _mm256_cmplt_epu8_mask(idx, eight);
                }
                __m256 dw = xt_f16x8(g, KERN_IQ4NL_BYTES);
                for (int t = 0; t < nt; t++) {
                    const struct kern_q8_block *xb = xq + (t0 + t) * nb + b0;
                    __m256i p[8];
                    for (int j = 0; j < 8; j++) {
                        __m256i xv = _mm256_loadu_si256((const __m256i *)xb[j].q);
                        xv = _mm256_mask_sub_epi8(xv, neg[j], _mm256_setzero_si256(), xv);
                        p[j] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), aw[j], xv);
                    }
                    av[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, xt_xd8(xb)), _mm256_cvtepi32_ps(xt_hsum8(p)), av[t]);
                }
            }
            float acc[TOKS][KERN_Q8_LANES];
            for (int t = 0; t < nt; t++) _mm256_storeu_ps(acc[t], av[t]);
            /* the last nb % 8 blocks, one lane each */
            for (int64_t b = nb8; b < nb; b++) {
                const uint8_t *blk = row + b * KERN_IQ4NL_BYTES;
                __m256i idx = xt_nibbles(blk + 2);
                __m256i aw = _mm256_shuffle_epi8(table, idx);
                __mmask32 neg = _mm256_cmplt_epu8_mask(idx, eight);
                float dw = kq_f16_at(blk);
                for (int t = 0; t < nt; t++) {
                    const struct kern_q8_block *xb = xq + (t0 + t) * nb + b;
                    __m256i xv = _mm256_loadu_si256((const __m256i *)xb->q);
                    xv = _mm256_mask_sub_epi8(xv, neg, _mm256_setzero_si256(), xv);
                    __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), aw, xv);
                    __m128i v = _mm_add_epi32(_mm256_castsi256_si128(p), _mm256_extracti128_si256(p, 1));
                    v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0x4e));
                    v = _mm_add_epi32(v, _mm_shuffle_epi32(v, 0xb1));
                    float *a = &acc[t][b % KERN_Q8_LANES];
                    *a = fmaf(dw * xb->d, (float)_mm_cvtsi128_si32(v), *a);
                }
            }
            for (int t = 0; t < nt; t++) y[(t0 + t) * y_ld + r] = xt_tree8(acc[t]);
        }
    }
}

/* One IQ4_XS super-block of a 16-row group, transposed (design note 5). */
struct xs_panel_sb {
    __m512i wt[8][8]; /* [sub-block][dword d] lane i = values 4d..4d+3 of row i's sub-block */
    __m512i corr[8];  /* lane i = 128 * the sum of row i's sub-block values */
    __m512i sc[8];    /* lane i = ls - 32 of row i's sub-block */
    __m512 dw;        /* lane i = row i's super-block scale */
};

#define XS_TOKS 4
#define XS_KMAX XT_Q8V_KMAX
#define XS_NSB (XS_KMAX / KERN_QK)

static void xs_pack_group(struct xs_panel_sb *dst, const uint8_t *w, size_t rb, int64_t r, int64_t nsb)
{
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kern_iq4_values));
    const __m512i k80 = _mm512_set1_epi8((char)0x80);
    const __m512i rows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                            _mm512_set1_epi32(32));
    int8_t vals[16][32] __attribute__((aligned(64)));
    int32_t ls[16];
    uint16_t dh[16];
    for (int64_t b = 0; b < nsb; b++) {
        struct xs_panel_sb *o = &dst[b];
        for (int i = 0; i < 16; i++) dh[i] = hs_rd_u16(w + (size_t)(r + i) * rb + (size_t)b * KERN_IQ4XS_BYTES);
        o->dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)dh));
        for (int sb = 0; sb < 8; sb++) {
            for (int i = 0; i < 16; i++) {
                const uint8_t *blk = w + (size_t)(r + i) * rb + (size_t)b * KERN_IQ4XS_BYTES;
                _mm256_store_si256((__m256i *)vals[i], _mm256_shuffle_epi8(table, xt_nibbles(blk + 8 + 16 * sb)));
                ls[i] = (((blk[4 + sb / 2] >> 4 * (sb % 2)) & 15) | ((hs_rd_u16(blk + 2) >> 2 * sb) & 3) << 4) - 32;
            }
            __m512i corr = _mm512_setzero_si512();
            for (int d = 0; d < 8; d++) {
                __m512i v = _mm512_i32gather_epi32(_mm512_add_epi32(rows, _mm512_set1_epi32(4 * d)), vals, 1);
                _mm512_store_si512(&o->wt[sb][d], v);
                corr = _mm512_dpbusd_epi32(corr, k80, v);
            }
            _mm512_store_si512(&o->corr[sb], corr);
            _mm512_store_si512(&o->sc[sb], _mm512_loadu_si512((const void *)ls));
        }
    }
}

/* Tokens t0 .. t0+nt-1 (nt <= XS_TOKS) against ng (1 or 2) packed groups: rows r .. r+16 ng - 1;
 * each broadcast of a token's 4 quants feeds both groups. */
static inline __attribute__((always_inline)) void xs_tile(float *y, int64_t y_ld, const struct xs_panel_sb *pk,
                                                          int64_t nsb, int64_t r, const uint8_t *xp,
                                                          const struct kern_q8k_block *xq, int64_t t0, int ng, int nt)
{
    __m512 acc[2][XS_TOKS];
    for (int g = 0; g < ng; g++)
        for (int j = 0; j < nt; j++) acc[g][j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nsb; b++) {
        __m512i isum[2][XS_TOKS];
        for (int g = 0; g < ng; g++)
            for (int j = 0; j < nt; j++) isum[g][j] = _mm512_setzero_si512();
        for (int sb = 0; sb < 8; sb++) {
            __m512i dot[2][XS_TOKS];
            for (int g = 0; g < ng; g++)
                for (int j = 0; j < nt; j++) dot[g][j] = _mm512_setzero_si512();
            for (int d = 0; d < 8; d++) {
                __m512i wv[2];
                for (int g = 0; g < ng; g++) wv[g] = _mm512_load_si512(&pk[g * nsb + b].wt[sb][d]);
                for (int j = 0; j < nt; j++) {
                    int32_t four;
                    memcpy(&four, xp + (size_t)j * (size_t)nsb * KERN_QK + (size_t)b * KERN_QK + 32 * sb + 4 * d, 4);
                    __m512i xv = _mm512_set1_epi32(four);
                    for (int g = 0; g < ng; g++) dot[g][j] = _mm512_dpbusd_epi32(dot[g][j], xv, wv[g]);
                }
            }
            for (int g = 0; g < ng; g++) {
                const struct xs_panel_sb *pb = &pk[g * nsb + b];
                for (int j = 0; j < nt; j++)
                    isum[g][j] = _mm512_add_epi32(isum[g][j],
                                                  _mm512_mullo_epi32(_mm512_sub_epi32(dot[g][j], pb->corr[sb]), pb->sc[sb]));
            }
        }
        for (int g = 0; g < ng; g++)
            for (int j = 0; j < nt; j++)
                acc[g][j] = _mm512_fmadd_ps(_mm512_mul_ps(pk[g * nsb + b].dw, _mm512_set1_ps(xq[(t0 + j) * nsb + b].d)),
                                            _mm512_cvtepi32_ps(isum[g][j]), acc[g][j]);
    }
    for (int g = 0; g < ng; g++)
        for (int j = 0; j < nt; j++) _mm512_storeu_ps(y + (t0 + j) * y_ld + r + 16 * g, acc[g][j]);
}

static void xs_tiles(float *y, int64_t y_ld, const struct xs_panel_sb *pk, int64_t nsb, int64_t r,
                     const uint8_t *xp, const struct kern_q8k_block *xq, int64_t t0, int ng, int nt)
{
    if (ng == 2) {
        switch (nt) {
        case 4: xs_tile(y, y_ld, pk, nsb, r, xp, xq, t0, 2, 4); break;
        case 3: xs_tile(y, y_ld, pk, nsb, r, xp, xq, t0, 2, 3); break;
        case 2: xs_tile(y, y_ld, pk, nsb, r, xp, xq, t0, 2, 2); break;
        default: xs_tile(y, y_ld, pk, nsb, r, xp, xq, t0, 2, 1); break;
        }
    } else {
        switch (nt) {
        case 4: xs_tile(y, y_ld, pk, nsb, r, xp, xq, t0, 1, 4); break;
        case 3: xs_tile(y, y_ld, pk, nsb, r, xp, xq, t0, 1, 3); break;
        case 2: xs_tile(y, y_ld, pk, nsb, r, xp, xq, t0, 1, 2); break;
        default: xs_tile(y, y_ld, pk, nsb, r, xp, xq, t0, 1, 1); break;
        }
    }
}

static void iq4xs_rows(float *y, int64_t y_ld, const void *w, const struct kern_q8k_block *xq, int64_t n_tok,
                       int64_t k, int64_t r0, int64_t r1);

static void iq4xs_panels(float *y, int64_t y_ld, const uint8_t *w, const struct kern_q8k_block *xq, int64_t n_tok,
                         int64_t k, int64_t r0, int64_t r1)
{
    struct xs_panel_sb pk[2 * XS_NSB];
    uint8_t xp[XS_TOKS * XS_KMAX] __attribute__((aligned(64)));
    const int64_t nsb = k / KERN_QK;
    const size_t rb = (size_t)nsb * KERN_IQ4XS_BYTES;
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    int64_t r1g = r0 + (r1 - r0) / 16 * 16;
    for (int64_t r = r0; r < r1g; r += 32) {
        int ng = r + 32 <= r1g ? 2 : 1;
        for (int g = 0; g < ng; g++) xs_pack_group(pk + g * nsb, w, rb, r + 16 * g, nsb);
        for (int64_t t = 0; t < n_tok; t += XS_TOKS) {
            int nt = (int)(n_tok - t < XS_TOKS ? n_tok - t : XS_TOKS);
            for (int j = 0; j < nt; j++) /* the tile's quants, contiguous and offset by 128 */
                for (int64_t b = 0; b < nsb; b++)
                    for (int c = 0; c < KERN_QK; c += 32)
                        _mm256_store_si256((__m256i *)(xp + ((size_t)j * nsb + b) * KERN_QK + c),
                                           _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(xq[(t + j) * nsb + b].q + c)),
                                                            flip));
            xs_tiles(y, y_ld, pk, nsb, r, xp, xq, t, ng, nt);
        }
    }
    if (r1g < r1) iq4xs_rows(y, y_ld, w, xq, n_tok, k, r1g, r1);
}

void kern_matmul_iq4xs_avx512(float *y, int64_t y_ld, const void *w,
                              const struct kern_q8k_block *xq, int64_t n_tok, int64_t k, int64_t r0,
                              int64_t r1)
{
    if (n_tok >= XT_Q8V_PANEL_TOKS && k <= XS_KMAX && r1 - r0 >= 16)
        iq4xs_panels(y, y_ld, w, xq, n_tok, k, r0, r1);
    else
        iq4xs_rows(y, y_ld, w, xq, n_tok, k, r0, r1);
}

/* Row by row (one token tile of TOKS at a time): the one- and few-token path. */
static void iq4xs_rows(float *y, int64_t y_ld, const void *w, const struct kern_q8k_block *xq, int64_t n_tok,
                       int64_t k, int64_t r0, int64_t r1)
{
    const int64_t nb = k / KERN_QK;
    const __m512i table = _mm512_broadcast_i32x4(iq4_abs_table());
    const __m512i m4 = _mm512_set1_epi8(15), eight = _mm512_set1_epi8(8);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * (size_t)nb * KERN_IQ4XS_BYTES;
        for (int64_t t0 = 0; t0 < n_tok; t0 += TOKS) {
            int nt = (int)(n_tok - t0 < TOKS ? n_tok - t0 : TOKS);
            float acc[TOKS] = { 0 };
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + b * KERN_IQ4XS_BYTES;
                __m512i is[TOKS];
                for (int t = 0; t < TOKS; t++) is[t] = _mm512_setzero_si512();
                uint16_t sh = hs_rd_u16(blk + 2);
                for (int c = 0; c < 4; c++) { /* sub-blocks 2c and 2c + 1 */
                    int ls0 = ((blk[4 + c] >> 0) & 15) | ((sh >> 4 * c) & 3) << 4;
                    int ls1 = ((blk[4 + c] >> 4) & 15) | ((sh >> (4 * c + 2)) & 3) << 4;
                    __m512i sc = _mm512_mask_blend_epi32((__mmask16)0xff00, _mm512_set1_epi32(ls0 - 32),
                                                         _mm512_set1_epi32(ls1 - 32));
                    /* 128-bit lanes: run 2c, run 2c, run 2c + 1, run 2c + 1; low nibbles in lanes
                     * 0 and 2, high nibbles in 1 and 3 (value order) */
                    __m512i raw = _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(blk + 8 + 32 * c)));
                    raw = _mm512_shuffle_i64x2(raw, raw, 0x50);
                    __m512i idx = _mm512_mask_blend_epi64((__mmask8)0xcc, _mm512_and_si512(raw, m4),
                                                          _mm512_and_si512(_mm512_srli_epi16(raw, 4), m4));
                    __m512i aw = _mm512_shuffle_epi8(table, idx);
                    __mmask64 neg = _mm512_cmplt_epu8_mask(idx, eight);
                    for (int t = 0; t < nt; t++) {
                        const int8_t *xs = xq[(t0 + t) * nb + b].q + 64 * c;
                        __m512i xv = _mm512_loadu_si512((const void *)xs);
                        xv = _mm512_mask_sub_epi8(xv, neg, _mm512_setzero_si512(), xv);
                        __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), aw, xv);
                        is[t] = _mm512_add_epi32(is[t], _mm512_mullo_epi32(p, sc));
                    }
                }
                float dw = kq_f16_at(blk);
                for (int t = 0; t < nt; t++)
                    acc[t] = fmaf(dw * xq[(t0 + t) * nb + b].d, (float)_mm512_reduce_add_epi32(is[t]), acc[t]);
            }
            for (int t = 0; t < nt; t++) y[(t0 + t) * y_ld + r] = acc[t];
        }
    }
}

void kern_matmul_x_avx512(float *y, int64_t y_ld, const void *w, int wt,
                          const struct kern_q8_block *xq, const struct kern_q8k_block *xk,
                          int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    if (wt == KERN_X_Q5_1) kern_matmul_q5_1_avx512(y, y_ld, w, xq, n_tok, k, r0, r1);
    else if (wt == KERN_X_IQ4_NL) kern_matmul_iq4nl_avx512(y, y_ld, w, xq, n_tok, k, r0, r1);
    else if (wt == KERN_X_IQ4_XS) kern_matmul_iq4xs_avx512(y, y_ld, w, xk, n_tok, k, r0, r1);
}
#endif
