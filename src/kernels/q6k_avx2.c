/*
 * q6k_avx2.c — AVX2 variant of the Q6_K matmul (kern_matmul_q6k: Q6_K weights x
 * kern_q8k_quantize activations). Bit-identical to the scalar reference in q6k.c; reached
 * through kern_ops_for("avx2")->matmul_k (q4k_avx2.c forwards KERN_K_Q6_K here). Compiled
 * with the Makefile's AVX2 flags.
 *
 * Design note:
 *   1. 32 weights of two 16-groups per ymm as unsigned bytes 0..63 (the ql nibble with the qh
 *      bit pair shifted in), vpmaddubsw with the int8 activations (pair sums at most
 *      2 * 63 * 128: no saturation), vpmaddwd with the scale of each pair's group, int32 lanes
 *      summed once per block (exact, so the order is free); the -32 offset is applied through
 *      the activation bsums, as the scalar formula writes it. Then the scalar's float step:
 *      dw * dx rounded once and one fmaf per block into the output's own accumulator, blocks
 *      ascending.
 *   2. A row's block is decoded once per tile of up to TOKS tokens; each token keeps its own
 *      accumulator, so n_tok, r0 and r1 cannot change a bit. The scales of a chunk's two
 *      groups come from one in-lane pshufb, and isum = s1 - 32 * s2 is formed lane by lane
 *      before the one horizontal sum.
 *   3. Panel path (P_MIN_TOKS tokens or more, K <= P_PANEL_BLKS super-blocks): whole groups
 *      of 8 rows are repacked once per panel so that dword lane i of a ymm belongs to row i
 *      (the quants of each 32-value chunk, decoded as in note 1, through an 8 x 8 dword
 *      transpose; the scales as int16 pairs (sc_g, sc_g) and (sc_2p, sc_2p+1); d as f32).
 *      A step broadcasts 4 activation quants of a token to every lane; two vpmaddubsw
 *      results are added in int16 (at most 2 * 2 * 63 * 127 = 32004 < 2^15: exact), then
 *      vpmaddwd with (sc_g, sc_g) widens and scales; the offset term 32 * sum_g sc_g *
 *      bsum_g by vpmaddwd of (sc_2p, sc_2p+1) with the bsum pair. No horizontal sums; the
 *      float step is lane-wise and as in note 1; every output keeps its own accumulator with
 *      the blocks ascending. Rows past the last whole group take the per-row path.
 *   4. One token (decode, and the LM head of every generated token), q6k_rows1: a row at a
 *      time, each 32-value chunk decoded, multiplied and scaled straight into two int32
 *      vectors (no token loop, nothing spills: note 2's loop keeps 16 ymm of decoded quants
 *      and scales live across tokens and its accumulators in memory), the -32 offset taken
 *      off lane by lane before one horizontal sum as in note 2, and the float step in an xmm
 *      lane (dw from vcvtph2ps, times dx: one rounding; vcvtdq2ps; vfmadd231ss).
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kquant_x86_int.h"

#define INLINE static inline __attribute__((always_inline))
#define TOKS 4
#ifndef P_TOKS
#define P_TOKS 4       /* tokens per tile of the panel path (note 3; measured) */
#endif
#define P_TMAX 4       /* the largest P_TOKS the tile is written for */
#ifndef P_MIN_TOKS
#define P_MIN_TOKS 6   /* fewer tokens: the per-row path (packing would not pay) */
#endif
#define P_PANEL_BLKS 40 /* packed super-blocks per panel: 111 KiB on the stack (L2); K <= 10240 */
#ifndef PF_BYTES
#define PF_BYTES 2048 /* software prefetch distance along the weight rows (q4k_avx2.c's) */
#endif
#ifndef PF1_BYTES
#define PF1_BYTES 2048 /* the one-token path (note 4): 1024, 4096, 8192 no better (noisy) */
#endif

/* pshufb controls: int16 entry 2k of a 128-bit lane in every int16 of the low lane, entry
 * 2k + 1 in every int16 of the high lane (both lanes hold the same 8 entries). */
INLINE __m256i pair_ctrl(int k)
{
    const char a0 = (char)(4 * k), a1 = (char)(4 * k + 1), b0 = (char)(4 * k + 2), b1 = (char)(4 * k + 3);
    return _mm256_setr_epi8(a0, a1, a0, a1, a0, a1, a0, a1, a0, a1, a0, a1, a0, a1, a0, a1,
                            b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, b0, b1);
}

static void q6k_rows(float *y, int64_t y_ld, const uint8_t *w, const struct kern_q8k_block *xq,
                     int64_t n_tok, int64_t nb, int64_t r0, int64_t r1)
{
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
    __m256i ctrl[4];
    _Pragma("GCC unroll 4")
    for (int k = 0; k < 4; k++) ctrl[k] = pair_ctrl(k);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + (size_t)r * (size_t)nb * KERN_Q6K_BYTES;
        for (int64_t t0 = 0; t0 < n_tok; t0 += TOKS) {
            int nt = (int)(n_tok - t0 < TOKS ? n_tok - t0 : TOKS);
            float acc[TOKS] = {0};
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + b * KERN_Q6K_BYTES;
                _mm_prefetch((const char *)blk + PF_BYTES, _MM_HINT_T0);
                _mm_prefetch((const char *)blk + PF_BYTES + 64, _MM_HINT_T0);
                _mm_prefetch((const char *)blk + PF_BYTES + 128, _MM_HINT_T0);
                _mm_prefetch((const char *)blk + PF_BYTES + 192, _MM_HINT_T0);
                __m128i sc8 = _mm_loadu_si128((const __m128i *)(blk + 192));
                __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
                __m256i wq[8], ws[8];
                _Pragma("GCC unroll 8")
                for (int h = 0; h < 2; h++) {
                    /* the 8 scales of this half in both 128-bit lanes; chunk k takes groups
                     * 8h + 2k (low lane) and 8h + 2k + 1 (high lane) */
                    __m256i sh = _mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(h ? _mm_unpackhi_epi64(sc8, sc8) : sc8));
                    __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h));
                    _Pragma("GCC unroll 8")
                    for (int k = 0; k < 4; k++) {
                        __m256i ql = _mm256_loadu_si256((const __m256i *)(blk + 64 * h + 32 * (k & 1)));
                        __m256i lo = k < 2 ? _mm256_and_si256(ql, m4) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4);
                        /* bits 2k, 2k+1 of each qh byte to bits 4, 5 (16-bit shifts by < 8
                         * under the mask keep every byte's own bits) */
                        __m256i hi = k == 0 ? _mm256_slli_epi16(qh, 4) : k == 1 ? _mm256_slli_epi16(qh, 2)
                                   : k == 2 ? qh : _mm256_srli_epi16(qh, 2);
                        wq[4 * h + k] = _mm256_or_si256(lo, _mm256_and_si256(hi, m30));
                        ws[4 * h + k] = _mm256_shuffle_epi8(sh, ctrl[k]);
                    }
                }
                float dw = kq_f16_at(blk + 208);
                for (int t = 0; t < nt; t++) {
                    const struct kern_q8k_block *xb = xq + (t0 + t) * nb + b;
                    __m256i s = _mm256_setzero_si256();
                    _Pragma("GCC unroll 8")
                    for (int c = 0; c < 8; c++) {
                        __m256i x = _mm256_loadu_si256((const __m256i *)(xb->q + 32 * c));
                        s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(wq[c], x), ws[c]));
                    }
                    /* isum = s1 - 32 * s2 lane by lane, then one horizontal sum (exact) */
                    __m256i s2 = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb->bsum), sc16);
                    int32_t isum = kq_hsum256(_mm256_sub_epi32(s, _mm256_slli_epi32(s2, 5)));
                    acc[t] = fmaf(dw * xb->d, (float)isum, acc[t]);
                }
            }
            for (int t = 0; t < nt; t++) y[(t0 + t) * y_ld + r] = acc[t];
        }
    }
}

/* One token (decode; the LM head): note 4. The block's chunks are decoded, multiplied and
 * scaled one at a time, straight into one int32 vector, so nothing spills; the float step is
 * the scalar's, in a register. */
INLINE __m256i q6k_chunk_dot(__m256i ql, __m256i qh, int k, __m256i x, __m256i sc)
{
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
    __m256i lo = k < 2 ? _mm256_and_si256(ql, m4) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4);
    __m256i hi = k == 0 ? _mm256_slli_epi16(qh, 4) : k == 1 ? _mm256_slli_epi16(qh, 2)
               : k == 2 ? qh : _mm256_srli_epi16(qh, 2);
    __m256i q = _mm256_or_si256(lo, _mm256_and_si256(hi, m30));
    return _mm256_madd_epi16(_mm256_maddubs_epi16(q, x), sc);
}

static void q6k_rows1(float *y, const uint8_t *w, const struct kern_q8k_block *xq, int64_t nb,
                      int64_t r0, int64_t r1)
{
    const __m256i c0 = pair_ctrl(0), c1 = pair_ctrl(1), c2 = pair_ctrl(2), c3 = pair_ctrl(3);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + (size_t)r * (size_t)nb * KERN_Q6K_BYTES;
        __m128 accv = _mm_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = row + b * KERN_Q6K_BYTES;
            const struct kern_q8k_block *xb = xq + b;
            _mm_prefetch((const char *)blk + PF1_BYTES, _MM_HINT_T0);
            _mm_prefetch((const char *)blk + PF1_BYTES + 64, _MM_HINT_T0);
            _mm_prefetch((const char *)blk + PF1_BYTES + 128, _MM_HINT_T0);
            _mm_prefetch((const char *)blk + PF1_BYTES + 192, _MM_HINT_T0);
            __m128i sc8 = _mm_loadu_si128((const __m128i *)(blk + 192));
            /* the -32 offset: 32 * sum_g sc_g * bsum_g, taken off lane by lane below */
            __m256i s2 = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb->bsum),
                                           _mm256_cvtepi8_epi16(sc8));
            __m256i s = _mm256_setzero_si256(), t = _mm256_setzero_si256();
            _Pragma("GCC unroll 2")
            for (int h = 0; h < 2; h++) {
                __m256i sh = _mm256_broadcastsi128_si256(
                    _mm_cvtepi8_epi16(h ? _mm_unpackhi_epi64(sc8, sc8) : sc8));
                __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h));
                __m256i ql0 = _mm256_loadu_si256((const __m256i *)(blk + 64 * h));
                __m256i ql1 = _mm256_loadu_si256((const __m256i *)(blk + 64 * h + 32));
                const int8_t *xh = xb->q + 128 * h;
                s = _mm256_add_epi32(s, q6k_chunk_dot(ql0, qh, 0,
                                                      _mm256_loadu_si256((const __m256i *)xh),
                                                      _mm256_shuffle_epi8(sh, c0)));
                t = _mm256_add_epi32(
                    t, q6k_chunk_dot(ql1, qh, 1, _mm256_loadu_si256((const __m256i *)(xh + 32)),
                                     _mm256_shuffle_epi8(sh, c1)));
                s = _mm256_add_epi32(
                    s, q6k_chunk_dot(ql0, qh, 2, _mm256_loadu_si256((const __m256i *)(xh + 64)),
                                     _mm256_shuffle_epi8(sh, c2)));
                t = _mm256_add_epi32(
                    t, q6k_chunk_dot(ql1, qh, 3, _mm256_loadu_si256((const __m256i *)(xh + 96)),
                                     _mm256_shuffle_epi8(sh, c3)));
            }
            s = _mm256_sub_epi32(_mm256_add_epi32(s, t), _mm256_slli_epi32(s2, 5));
            __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
            s4 = _mm_add_epi32(s4, _mm_unpackhi_epi64(s4, s4));
            s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 1));
            __m128 f = _mm_mul_ss(_mm_cvtph_ps(_mm_cvtsi32_si128(hs_rd_u16(blk + 208))),
                                  _mm_set_ss(xb->d));
            accv = _mm_fmadd_ss(f, _mm_cvtepi32_ps(s4), accv);
        }
        y[r] = _mm_cvtss_f32(accv);
    }
}

/* ---- several tokens: 8-row panels (note 3) ------------------------------------------------ */

/* One super-block of an 8-row group: dword lane i of every vector belongs to row i. */
struct q6p_blk {
    __m256i w[16][4]; /* [g][u] lane i = quants 16g + 4u .. +3 of row i, one byte each (0..63) */
    __m256i sc[16];   /* [g] lane i = (sc_g, sc_g) of row i as two int16 */
    __m256i scp[8];   /* [p] lane i = (sc_2p, sc_2p+1) of row i, paired with bsum 2p, 2p+1 */
    __m256 dw;        /* lane i = row i's f16 scale as f32 */
};

static void q6p_pack_group(struct q6p_blk *dst, const uint8_t *w, size_t rb, int64_t r, int64_t nb)
{
    const __m256i m4 = _mm256_set1_epi8(15), m30 = _mm256_set1_epi8(0x30);
    const uint8_t *base = w + (size_t)r * rb;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = base + b * KERN_Q6K_BYTES;
        struct q6p_blk *d = dst + b;
        /* chunk c = 4h + k (values 32c .. 32c+31 in order) of each row, as q6k_rows decodes it */
        for (int c = 0; c < 8; c++) {
            const int h = c / 4, k = c % 4;
            __m256i v[8];
            _Pragma("GCC unroll 8")
            for (int i = 0; i < 8; i++) {
                const uint8_t *bi = blk + (size_t)i * rb;
                __m256i ql = _mm256_loadu_si256((const __m256i *)(bi + 64 * h + 32 * (k & 1)));
                __m256i qh = _mm256_loadu_si256((const __m256i *)(bi + 128 + 32 * h));
                __m256i lo = _mm256_and_si256(k < 2 ? ql : _mm256_srli_epi16(ql, 4), m4);
                __m256i hi = _mm256_srli_epi16(_mm256_slli_epi16(qh, 6 - 2 * k), 2);
                v[i] = _mm256_or_si256(lo, _mm256_and_si256(hi, m30));
            }
            kq_transpose8(v);
            _Pragma("GCC unroll 8")
            for (int e = 0; e < 8; e++) _mm256_store_si256(&d->w[2 * c + e / 4][e % 4], v[e]);
        }
        int32_t sc[16][8] __attribute__((aligned(32))), scp[8][8] __attribute__((aligned(32)));
        uint16_t dh[8];
        for (int i = 0; i < 8; i++) {
            const uint8_t *bi = blk + (size_t)i * rb;
            const int8_t *s8 = (const int8_t *)(bi + 192);
            for (int g = 0; g < 16; g++) sc[g][i] = (int32_t)((uint32_t)(uint16_t)s8[g] * 0x10001u);
            for (int p = 0; p < 8; p++) scp[p][i] = (int32_t)((uint32_t)(uint16_t)s8[2 * p] | (uint32_t)(uint16_t)s8[2 * p + 1] << 16);
            dh[i] = hs_rd_u16(bi + 208);
        }
        for (int g = 0; g < 16; g++) _mm256_store_si256(&d->sc[g], _mm256_load_si256((const __m256i *)sc[g]));
        for (int p = 0; p < 8; p++) _mm256_store_si256(&d->scp[p], _mm256_load_si256((const __m256i *)scp[p]));
        d->dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dh));
    }
}

/* Tokens t0 .. t0+NT-1 against one packed 8-row group pk[0 .. nb) (rows r .. r+7). */
INLINE void q6p_tile(float *y, int64_t y_ld, const struct q6p_blk *pk, int64_t nb, int64_t r,
                     const struct kern_q8k_block *xq, int64_t t0, int NT)
{
    __m256 acc[P_TMAX];
    const struct kern_q8k_block *xt[P_TMAX];
    _Pragma("GCC unroll 8")
    for (int t = 0; t < NT; t++) {
        acc[t] = _mm256_setzero_ps();
        xt[t] = xq + (t0 + t) * nb;
    }
    for (int64_t b = 0; b < nb; b++) {
        const struct q6p_blk *pb = pk + b;
        __m256i is[P_TMAX], ms[P_TMAX];
        _Pragma("GCC unroll 8")
        for (int t = 0; t < NT; t++) is[t] = ms[t] = _mm256_setzero_si256();
        _Pragma("GCC unroll 16")
        for (int g = 0; g < 16; g++) {
            __m256i sc = _mm256_load_si256(&pb->sc[g]);
            /* two steps per int16 sum: 2 * (2 * 63 * 127) = 32004 < 2^15, exact */
            _Pragma("GCC unroll 2")
            for (int u = 0; u < 4; u += 2) {
                __m256i w0 = _mm256_load_si256(&pb->w[g][u]), w1 = _mm256_load_si256(&pb->w[g][u + 1]);
                _Pragma("GCC unroll 8")
                for (int t = 0; t < NT; t++) {
                    const int8_t *xg = xt[t][b].q + 16 * g + 4 * u;
                    __m256i a16 = _mm256_add_epi16(_mm256_maddubs_epi16(w0, kq_dup32(xg)),
                                                   _mm256_maddubs_epi16(w1, kq_dup32(xg + 4)));
                    is[t] = _mm256_add_epi32(is[t], _mm256_madd_epi16(a16, sc));
                }
            }
        }
        _Pragma("GCC unroll 8")
        for (int p = 0; p < 8; p++) {
            __m256i sp = _mm256_load_si256(&pb->scp[p]);
            _Pragma("GCC unroll 8")
            for (int t = 0; t < NT; t++) ms[t] = _mm256_add_epi32(ms[t], _mm256_madd_epi16(sp, kq_dup32(xt[t][b].bsum + 2 * p)));
        }
        _Pragma("GCC unroll 8")
        for (int t = 0; t < NT; t++) {
            __m256i isum = _mm256_sub_epi32(is[t], _mm256_slli_epi32(ms[t], 5));
            __m256 dwx = _mm256_mul_ps(pb->dw, _mm256_set1_ps(xt[t][b].d));
            acc[t] = _mm256_fmadd_ps(dwx, _mm256_cvtepi32_ps(isum), acc[t]);
        }
    }
    _Pragma("GCC unroll 8")
    for (int t = 0; t < NT; t++) _mm256_storeu_ps(y + (t0 + t) * y_ld + r, acc[t]);
}

static void q6p_tiles(float *y, int64_t y_ld, const struct q6p_blk *pk, int64_t nb, int64_t r,
                      const struct kern_q8k_block *xq, int64_t t0, int nt)
{
    switch (nt) {
    case 4: q6p_tile(y, y_ld, pk, nb, r, xq, t0, 4); break;
    case 3: q6p_tile(y, y_ld, pk, nb, r, xq, t0, 3); break;
    case 2: q6p_tile(y, y_ld, pk, nb, r, xq, t0, 2); break;
    default: q6p_tile(y, y_ld, pk, nb, r, xq, t0, 1); break;
    }
}

/* Rows [r0, r1g) (whole 8-row groups) in panels of P_PANEL_BLKS packed blocks, each packed
 * once; every token tile runs over all the panel's groups (its activations stay in L1). */
static void q6p_rows(float *y, int64_t y_ld, const uint8_t *w, const struct kern_q8k_block *xq,
                     int64_t n_tok, int64_t nb, int64_t r0, int64_t r1g)
{
    struct q6p_blk pk[P_PANEL_BLKS];
    const int64_t gmax = P_PANEL_BLKS / nb; /* >= 1: nb <= P_PANEL_BLKS */
    const size_t rb = (size_t)nb * KERN_Q6K_BYTES;
    for (int64_t p0 = r0; p0 < r1g; p0 += gmax * 8) {
        int64_t groups = HS_MIN(gmax, (r1g - p0) / 8);
        for (int64_t g = 0; g < groups; g++) q6p_pack_group(pk + g * nb, w, rb, p0 + 8 * g, nb);
        for (int64_t t = 0; t < n_tok; t += P_TOKS) {
            int nt = (int)HS_MIN((int64_t)P_TOKS, n_tok - t);
            for (int64_t g = 0; g < groups; g++) q6p_tiles(y, y_ld, pk + g * nb, nb, p0 + 8 * g, xq, t, nt);
        }
    }
}

void kern_matmul_q6k_avx2(float *y, int64_t y_ld, const void *w, const struct kern_q8k_block *xq,
                          int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    int64_t nb = k / KERN_QK, r1g = r0;
    if (n_tok >= P_MIN_TOKS && nb <= P_PANEL_BLKS) {
        r1g = r0 + (r1 - r0) / 8 * 8;
        q6p_rows(y, y_ld, w, xq, n_tok, nb, r0, r1g);
    }
    if (n_tok == 1) { q6k_rows1(y, w, xq, nb, r1g, r1); return; }
    q6k_rows(y, y_ld, w, xq, n_tok, nb, r1g, r1);
}

#else
typedef int kern_q6k_avx2_unused; /* not x86: the variant does not exist */
#endif
