/*
 * q6kp_avx512.c — the Q6_K matmul over the row-group layout (q6kp.c) with AVX-512 VNNI: one
 * kernel for a decode token, a decode step of several sequences and a prefill, with the
 * weights packed once at engine start (kern_ops.matmul_kp of the "avx512" and "avx512vnni"
 * tables, through kp.c). Bit-identical to the scalar kern_matmul_q6k on the unpacked rows
 * (q6k.c; the Q6_K line of kernels.h's K-quant contract). Compiled with the Makefile's
 * AVX-512 flags.
 *
 * Design note:
 *   1. Lane i of every zmm is row 16g + i of a 16-row group. A super-block is read in 8
 *      steps (h, c, uh; the ql vectors in order): 4 ql vectors (v = 16h + 8c + 4uh + u4)
 *      and their 4 qh vectors give 8 vectors of 6-bit quants (q6kp.c note 2; 0..63,
 *      unsigned): the low nibbles with the qh bit pair kk = c shifted up, and the high
 *      nibbles with pair kk = c + 2 (one vpternlogd bit select each). Each is unpacked once
 *      per tile and used for all its tokens; group g = 8h + 2kk + uh's dot is a chain of 4
 *      vpdpbusd with the token's quant dwords q[128h + 32kk + 16uh + 4u4 ..] (broadcast).
 *   2. The integer sum is the contract's isum = sum_g sc_g (dot_g - 32 bsum_g), exact, term
 *      by term: group g's vpdpbusd chain starts from the token's -32 bsum_g (a table of 16
 *      int32 per token and block on the stack, 64 KiB, made once per call for up to
 *      Q6KP_OFF_MAX / 16 token blocks at a time, broadcast from memory) and ends at
 *      dot_g - 32 bsum_g; a vpmulld by sc_g (int32 lanes out of the layout's scale pairs by
 *      shifts) and a vpaddd add the term. No step wraps (|term| <= 128 x 16 x 32 x 127, 16
 *      terms). Measured slower, on prefill: the share as 8 vpdpwssd per token of the scale
 *      pairs times -32 with the token's bsum pairs (a few %), and half sums of 8 values
 *      within int16 scaled by vpdpwssd with (sc_g, 0) (one more VNNI instruction per group
 *      and token; 1.3-1.5x).
 *   3. The float steps are the contract's: dw * dx rounded once (vcvtph2ps of the rows' d,
 *      times the token's d), then one fma per block into the output's accumulator, blocks
 *      ascending; lane-wise, so each row is the scalar code's row.
 *   4. A tile is one group x NT <= Q6KP_TMAX tokens (a constant after inlining), its NT
 *      accumulators and NT integer sums in registers. A decode step (n_tok <= Q6KP_TMAX)
 *      runs NT = n_tok: one sequential stream through the packed matrix with software
 *      prefetch into L2 (q8p_avx512.c note 5). More tokens that do not take the rows'
 *      panel path (note 7: 9-15 tokens, rows too long for it, the groups a thread split
 *      cuts) run row panels of about Q6KP_PANEL_BYTES, each panel read from memory by the
 *      first token tile and from L2 by the others (the tokens split evenly into tiles of at
 *      most Q6KP_TMAX).
 *   5. Any r0, r1: a group that is only partly inside [r0, r1) is computed whole and stored
 *      with a mask (its other lanes are independent and thrown away), so a thread split
 *      that cuts a group cannot change a bit. Padding rows compute zeros, never stored.
 *   6. The prefetch is software, into L2 (T1, as q8p_avx512.c note 5), 32 KiB ahead, 7
 *      lines per step: with none a decode call ran at about 0.6x the speed (the steps read
 *      a super-block out of order: ql, qh, scales; the steps (h, c, uh), which read ql in
 *      order, measured better than (h, uh, c), which read it 0-3, 8-11, 4-7, ...); with
 *      2-16 KiB the 1- and 2-token calls lagged the 4-token ones, most on the 248320-row
 *      lm_head; 64 KiB was no better, and T0 (into L1) slower at every distance
 *      (bench/kp_bench.c, Zen 4, one thread).
 *   7. A prefill (at least 16 tokens, rows of at most 50 super-blocks) takes the panel path
 *      of the Q6_K rows (q6k_avx512.c note 3) for the whole groups of [r0, r1): its blocks
 *      hold the quants unpacked and interleave rows so that a group's two half sums share a
 *      dword, scaled by vpdpwssd instead of vpmulld, and unpacking a panel once per call
 *      costs little against hundreds of tokens. The tiles above measured about 10% slower
 *      on a q4_k_m 0.8b prefill of 512 tokens (two threads); the groups cut by [r0, r1)
 *      stay here. Same bits either way (the contract's order, note 3).
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kernels_int.h"

#define INLINE static inline __attribute__((always_inline))
#define Q6KP_TMAX 8                   /* tokens per tile at most (registers: note 4) */
#define Q6KP_PANEL_BYTES (256 * 1024) /* packed weights per row panel of a several-token call */
#ifndef Q6KP_PREFETCH
#define Q6KP_PREFETCH 32768           /* bytes ahead a streaming tile prefetches into L2 (note 6) */
#endif
#define Q6KP_OFF_MAX 16384            /* offsets (16 per token and block) one call computes at once */
#define Q6KP_LINES (KERN_Q6KP_SB_BYTES / 64)

/* The dword at p (4 activation quants) in every lane. */
INLINE __m512i q6kp_bcast(const void *p)
{
    int32_t four;
    memcpy(&four, p, 4);
    return _mm512_set1_epi32(four);
}

/* Super-block sb of one group for NT tokens (xb: token 0's activation block for it, token j
 * at xb[j * nb]; ob: its 16 offsets -32 bsum_g, token j's at ob + 16 j): acc[j] after the
 * block (notes 1-3). pf: bytes ahead to prefetch, or 0. */
INLINE void q6kp_sb(__m512 acc[Q6KP_TMAX], const uint8_t *sb, const struct kern_q8k_block *xb,
                    const int32_t *ob, int64_t nb, int pf, int NT)
{
    const __m512i m0f = _mm512_set1_epi8(0x0f), m33 = _mm512_set1_epi8(0x33);
    __m512i isum[Q6KP_TMAX];
#pragma GCC unroll 8
    for (int j = 0; j < NT; j++) isum[j] = _mm512_setzero_si512();
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++)
#pragma GCC unroll 2
        for (int c = 0; c < 2; c++)
#pragma GCC unroll 2
            for (int uh = 0; uh < 2; uh++) {
                if (pf) {
                    /* the super-block's 53 lines, pf bytes ahead, 7 per step */
                    const char *ahead = (const char *)sb + pf;
                    int s = 4 * h + 2 * c + uh;
#pragma GCC unroll 7
                    for (int l = 0; l < 7; l++)
                        if (7 * s + l < Q6KP_LINES) _mm_prefetch(ahead + 64 * (7 * s + l), _MM_HINT_T1);
                }
                /* scales of g = 8h + 2c + uh (kk = c) and g + 4 (kk = c + 2) as int32 lanes:
                 * element uh of the pairs 4h + c and 4h + c + 2 */
                const uint8_t *sp = sb + 3072 + 32 * (4 * h + c);
                __m512i s0 = _mm512_cvtepi8_epi16(_mm256_load_si256((const __m256i *)sp));
                __m512i s1 = _mm512_cvtepi8_epi16(_mm256_load_si256((const __m256i *)(sp + 64)));
                if (uh) {
                    s0 = _mm512_srai_epi32(s0, 16);
                    s1 = _mm512_srai_epi32(s1, 16);
                } else {
                    s0 = _mm512_srai_epi32(_mm512_slli_epi32(s0, 16), 16);
                    s1 = _mm512_srai_epi32(_mm512_slli_epi32(s1, 16), 16);
                }
                /* the quants of values 128h + 32kk + 16uh + 4u4 .. +3 (note 1) */
                __m512i wlo[4], whi[4];
#pragma GCC unroll 4
                for (int u4 = 0; u4 < 4; u4++) {
                    int u = 4 * uh + u4;
                    __m512i qh = _mm512_load_si512(sb + 2048 + 64 * (8 * h + u));
                    __m512i ql = _mm512_load_si512(sb + 64 * (16 * h + 8 * c + u));
                    __m512i qm = _mm512_and_si512(c ? _mm512_srli_epi32(qh, 2) : qh, m33);
                    /* bit select 0xca: the low nibble from the first operand, the rest from the second */
                    wlo[u4] = _mm512_ternarylogic_epi32(m0f, ql, _mm512_slli_epi32(qm, 4), 0xca);
                    whi[u4] = _mm512_ternarylogic_epi32(m0f, _mm512_srli_epi32(ql, 4), qm, 0xca);
                }
#pragma GCC unroll 8
                for (int j = 0; j < NT; j++) {
                    const int8_t *xqj = xb[j * nb].q + 128 * h + 32 * c + 16 * uh;
                    /* dot_g - 32 bsum_g: the chains start from the offsets (note 2) */
                    const int32_t *oj = ob + 16 * j + 8 * h + 2 * c + uh;
                    __m512i d0 = _mm512_set1_epi32(oj[0]), d1 = _mm512_set1_epi32(oj[4]);
#pragma GCC unroll 4
                    for (int u4 = 0; u4 < 4; u4++) {
                        d0 = _mm512_dpbusd_epi32(d0, wlo[u4], q6kp_bcast(xqj + 4 * u4));
                        d1 = _mm512_dpbusd_epi32(d1, whi[u4], q6kp_bcast(xqj + 64 + 4 * u4));
                    }
                    isum[j] = _mm512_add_epi32(isum[j], _mm512_mullo_epi32(d0, s0));
                    isum[j] = _mm512_add_epi32(isum[j], _mm512_mullo_epi32(d1, s1));
                }
            }
    const __m512 dv = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(sb + 3328)));
#pragma GCC unroll 8
    for (int j = 0; j < NT; j++) {
        __m512 dw = _mm512_mul_ps(dv, _mm512_set1_ps(xb[j * nb].d));
        acc[j] = _mm512_fmadd_ps(dw, _mm512_cvtepi32_ps(isum[j]), acc[j]);
    }
}

/* Group g (rows 16 g ..) x tokens t0 .. t0+NT-1 (xq and off from token t0; off's blocks
 * ostride apart); rows outside [r0, r1) are not stored (note 5). */
INLINE void q6kp_tile(float *y, int64_t y_ld, const uint8_t *wp, size_t gb, int64_t nb, int64_t g,
                      const struct kern_q8k_block *xq, const int32_t *off, int64_t ostride, int64_t t0,
                      int64_t r0, int64_t r1, int pf, int NT)
{
    __m512 acc[Q6KP_TMAX];
    const uint8_t *gp = wp + (size_t)g * gb;
#pragma GCC unroll 8
    for (int j = 0; j < NT; j++) acc[j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++)
        q6kp_sb(acc, gp + (size_t)b * KERN_Q6KP_SB_BYTES, xq + b, off + ostride * b, nb, pf, NT);
    int64_t r = g * KERN_KP_ROWS;
    int64_t lo = HS_MAX(r0 - r, (int64_t)0), hi = HS_MIN(r1 - r, (int64_t)KERN_KP_ROWS);
    __mmask16 m = (__mmask16)((((uint32_t)1 << hi) - 1) & ~(((uint32_t)1 << lo) - 1));
#pragma GCC unroll 8
    for (int j = 0; j < NT; j++) _mm512_mask_storeu_ps(y + (t0 + j) * y_ld + r, m, acc[j]);
}

static void q6kp_tile_n(float *y, int64_t y_ld, const uint8_t *wp, size_t gb, int64_t nb, int64_t g,
                        const struct kern_q8k_block *xq, const int32_t *off, int64_t ostride, int64_t t0,
                        int64_t r0, int64_t r1, int pf, int nt)
{
    switch (nt) {
    case 8: q6kp_tile(y, y_ld, wp, gb, nb, g, xq, off, ostride, t0, r0, r1, pf, 8); break;
    case 7: q6kp_tile(y, y_ld, wp, gb, nb, g, xq, off, ostride, t0, r0, r1, pf, 7); break;
    case 6: q6kp_tile(y, y_ld, wp, gb, nb, g, xq, off, ostride, t0, r0, r1, pf, 6); break;
    case 5: q6kp_tile(y, y_ld, wp, gb, nb, g, xq, off, ostride, t0, r0, r1, pf, 5); break;
    case 4: q6kp_tile(y, y_ld, wp, gb, nb, g, xq, off, ostride, t0, r0, r1, pf, 4); break;
    case 3: q6kp_tile(y, y_ld, wp, gb, nb, g, xq, off, ostride, t0, r0, r1, pf, 3); break;
    case 2: q6kp_tile(y, y_ld, wp, gb, nb, g, xq, off, ostride, t0, r0, r1, pf, 2); break;
    default: q6kp_tile(y, y_ld, wp, gb, nb, g, xq, off, ostride, t0, r0, r1, pf, 1); break;
    }
}

/* The matmul with the offsets at hand (xq and off from token 0; off[(b n_tok + t) 16 + g] =
 * -32 bsum_g of token t's block b, so a tile's tokens are 64 bytes apart; note 2). */
static void q6kp_rows(float *y, int64_t y_ld, const uint8_t *wp, const struct kern_q8k_block *xq,
                      const int32_t *off, int64_t n_tok, int64_t nb, int64_t r0, int64_t r1)
{
    const size_t gb = kern_q6kp_group_bytes(nb * KERN_QK);
    const int64_t ga = r0 / KERN_KP_ROWS, gz = (r1 + KERN_KP_ROWS - 1) / KERN_KP_ROWS;
    if (n_tok <= Q6KP_TMAX) { /* a decode step: one stream, each group read once */
        for (int64_t g = ga; g < gz; g++)
            q6kp_tile_n(y, y_ld, wp, gb, nb, g, xq, off, 16 * n_tok, 0, r0, r1, Q6KP_PREFETCH, (int)n_tok);
        return;
    }
    /* token tiles of at most Q6KP_TMAX, as even as can be (9 tokens: 4 + 5) */
    const int64_t n_tt = (n_tok + Q6KP_TMAX - 1) / Q6KP_TMAX;
    const int64_t panel = HS_MAX((int64_t)(Q6KP_PANEL_BYTES / gb), (int64_t)1);
    for (int64_t p0 = ga; p0 < gz; p0 += panel) {
        int64_t p1 = HS_MIN(p0 + panel, gz);
        for (int64_t tt = 0; tt < n_tt; tt++) {
            int64_t t = n_tok * tt / n_tt;
            int nt = (int)(n_tok * (tt + 1) / n_tt - t);
            for (int64_t g = p0; g < p1; g++)
                q6kp_tile_n(y, y_ld, wp, gb, nb, g, xq + t * nb, off + 16 * t, 16 * n_tok, t, r0, r1,
                            tt == 0 ? Q6KP_PREFETCH : 0, nt);
        }
    }
}

void kern_matmul_q6kp_avx512(float *y, int64_t y_ld, const void *wp, const struct kern_q8k_block *xq,
                             int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    const int64_t nb = k / KERN_QK;
    if (r0 >= r1 || n_tok < 1) return;
    /* a prefill: the whole groups inside [r0, r1) through q6k_avx512.c's panel path, the
     * cut groups at the ends here (note 7) */
    const int64_t ga = (r0 + KERN_KP_ROWS - 1) / KERN_KP_ROWS, gz = r1 / KERN_KP_ROWS;
    if (n_tok > Q6KP_TMAX && ga < gz && kern_q6kp_panels_avx512(y, y_ld, wp, xq, n_tok, k, ga, gz)) {
        if (r0 < ga * KERN_KP_ROWS) kern_matmul_q6kp_avx512(y, y_ld, wp, xq, n_tok, k, r0, ga * KERN_KP_ROWS);
        if (gz * KERN_KP_ROWS < r1) kern_matmul_q6kp_avx512(y, y_ld, wp, xq, n_tok, k, gz * KERN_KP_ROWS, r1);
        return;
    }
    /* the offsets -32 bsum_g of as many tokens at a time as the buffer holds (a decode step's
     * up to K = 32768; tokens are independent, so the pieces change no bit) */
    int32_t buf[Q6KP_OFF_MAX] __attribute__((aligned(64)));
    const int64_t step = HS_MAX(Q6KP_OFF_MAX / (16 * nb), (int64_t)1);
    for (int64_t t = 0; t < n_tok; t += step) {
        int64_t nt = HS_MIN(step, n_tok - t);
        for (int64_t j = 0; j < nt; j++)
            for (int64_t b = 0; b < nb; b++)
                for (int g = 0; g < 16; g++) buf[16 * (b * nt + j) + g] = -32 * (int32_t)xq[(t + j) * nb + b].bsum[g];
        q6kp_rows(y + t * y_ld, y_ld, (const uint8_t *)wp, xq + t * nb, buf, nt, nb, r0, r1);
    }
}

#else
typedef int kern_q6kp_avx512_unused; /* not x86: the variant does not exist */
#endif
