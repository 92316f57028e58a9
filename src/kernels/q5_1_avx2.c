/*
 * q5_1_avx2.c — AVX2 variant of the Q5_1 matmul (kern_matmul_q5_1: Q5_1 weights x
 * kern_q8_quantize activations). Bit-identical to the scalar reference in q5_1.c; reached
 * through kern_ops_for("avx2")->matmul_x (iq4_avx2.c forwards KERN_X_Q5_1 here). Compiled
 * with the Makefile's AVX2 flags.
 *
 * Design note:
 *   1. A block's 32 quants become one ymm of unsigned bytes 0..31 (nibbles split, the 32
 *      qh bits spread to bytes by a shuffle, an and with each byte's bit and a compare);
 *      vpmaddubsw with the int8 activations (pair sums at most 2 * 31 * 127: no saturation)
 *      and vpmaddwd with ones give int32 lanes; the activation sum takes the same two steps
 *      with a vector of ones. Both are summed across lanes exactly.
 *   2. Then the scalar's float steps: dw * dx and mw * dx rounded once each, two fmaf into
 *      the lane b % 8 of the token's own 8 sums, and the halving tree 4, 2, 1. Eight blocks
 *      at a time those 8 sums are one ymm: the 8 blocks' integer dots are gathered into its
 *      lanes (xtype_x86_int.h) and two vfmadd231ps do the 16 fmaf; the last nb % 8 blocks
 *      go one at a time into their lanes, which is the same order per lane.
 *   3. A block is decoded once per tile of up to TOKS tokens; each token keeps its own
 *      sums, so n_tok, r0 and r1 cannot change a bit.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>

#include "kernels/kernels.h"
#include "kernels/kquant_x86_int.h"
#include "kernels/xtype_x86_int.h"

#define TOKS 4

/* Byte j of the result is 0x10 when bit j of qh is set, else 0. */
static inline __attribute__((always_inline)) __m256i q5_1_high_bits(uint32_t qh)
{
    const __m256i pick = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2,
                                          2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), pick);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* The 32 quants of a block as unsigned bytes 0..31. */
static inline __attribute__((always_inline)) __m256i q5_1_quants(const uint8_t *blk)
{
    return _mm256_or_si256(xt_nibbles(blk + 8), q5_1_high_bits(hs_rd_u32(blk + 4)));
}

void kern_matmul_q5_1_avx2(float *y, int64_t y_ld, const void *w, const struct kern_q8_block *xq,
                           int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    const int64_t nb = k / KERN_Q8_BLOCK, nb8 = nb - nb % KERN_Q8_LANES;
    const __m256i one8 = _mm256_set1_epi8(1), one16 = _mm256_set1_epi16(1);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * (size_t)nb * KERN_Q5_1_BYTES;
        for (int64_t t0 = 0; t0 < n_tok; t0 += TOKS) {
            int nt = (int)(n_tok - t0 < TOKS ? n_tok - t0 : TOKS);
            __m256 av[TOKS];
            for (int t = 0; t < TOKS; t++) av[t] = _mm256_setzero_ps();
            /* groups of 8 blocks: block b0 + j in lane j = its b % 8 */
            for (int64_t b0 = 0; b0 < nb8; b0 += KERN_Q8_LANES) {
                const uint8_t *g = row + b0 * KERN_Q5_1_BYTES;
                __m256i q[8];
                for (int j = 0; j < 8; j++) q[j] = q5_1_quants(g + j * KERN_Q5_1_BYTES);
                __m256 dw = xt_f16x8(g, KERN_Q5_1_BYTES), mw = xt_f16x8(g + 2, KERN_Q5_1_BYTES);
                for (int t = 0; t < nt; t++) {
                    const struct kern_q8_block *xb = xq + (t0 + t) * nb + b0;
                    __m256i p[8], s[8];
                    for (int j = 0; j < 8; j++) {
                        __m256i xv = _mm256_loadu_si256((const __m256i *)xb[j].q);
                        p[j] = _mm256_madd_epi16(_mm256_maddubs_epi16(q[j], xv), one16);
                        s[j] = _mm256_madd_epi16(_mm256_maddubs_epi16(one8, xv), one16);
                    }
                    __m256 dx = xt_xd8(xb);
                    av[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(xt_hsum8(p)), av[t]);
                    av[t] = _mm256_fmadd_ps(_mm256_mul_ps(mw, dx), _mm256_cvtepi32_ps(xt_hsum8(s)), av[t]);
                }
            }
            float acc[TOKS][KERN_Q8_LANES];
            for (int t = 0; t < nt; t++) _mm256_storeu_ps(acc[t], av[t]);
            /* the last nb % 8 blocks, one lane each */
            for (int64_t b = nb8; b < nb; b++) {
                const uint8_t *blk = row + b * KERN_Q5_1_BYTES;
                __m256i q = q5_1_quants(blk);
                float dw = kq_f16_at(blk), mw = kq_f16_at(blk + 2);
                for (int t = 0; t < nt; t++) {
                    const struct kern_q8_block *xb = xq + (t0 + t) * nb + b;
                    __m256i xv = _mm256_loadu_si256((const __m256i *)xb->q);
                    __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(q, xv), one16);
                    __m256i s = _mm256_madd_epi16(_mm256_maddubs_epi16(one8, xv), one16);
                    __m256i h = _mm256_hadd_epi32(p, s); /* p01 p23 s01 s23 | p45 p67 s45 s67 */
                    __m128i v = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
                    v = _mm_hadd_epi32(v, v); /* isum, xsum, .. */
                    float *a = &acc[t][b % KERN_Q8_LANES];
                    *a = fmaf(dw * xb->d, (float)_mm_cvtsi128_si32(v), *a);
                    *a = fmaf(mw * xb->d, (float)_mm_extract_epi32(v, 1), *a);
                }
            }
            for (int t = 0; t < nt; t++) y[(t0 + t) * y_ld + r] = xt_tree8(acc[t]);
        }
    }
}
#endif
