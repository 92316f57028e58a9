/*
 * iq4_avx2.c — AVX2 variants of the IQ4_NL and IQ4_XS matmuls (iq4.c) and the AVX2 front
 * door of the extra block types (kern_matmul_x_avx2, forwarding Q5_1 to q5_1_avx2.c).
 * Bit-identical to the scalar references; reached through kern_ops_for("avx2")->matmul_x.
 * Compiled with the Makefile's AVX2 flags.
 *
 * Design note:
 *   1. The codebook lookup is a vpshufb of the 16 signed entries by the 4-bit indices
 *      (exact). The signed x signed byte products go through vpmaddubsw as |w| (unsigned)
 *      times x with w's sign moved onto it (vpsignb: x in [-127, 127], so negation cannot
 *      overflow, and w == 0 never occurs in the codebook); pair sums at most 2 * 127 * 127
 *      fit int16. IQ4_XS multiplies the pair sums by the sub-block's ls - 32 in vpmaddwd
 *      (at most 2 * 32258 * 32 in int32). All integer: any order gives the same sums.
 *   2. The float steps are the scalar's: one rounded dw * dx, one fmaf per block into lane
 *      b % 8 (IQ4_NL, then the tree 4, 2, 1) or per super-block into the one accumulator
 *      (IQ4_XS). IQ4_NL does 8 blocks at a time with the 8 sums in one ymm (q5_1_avx2.c's
 *      scheme, xtype_x86_int.h), the last nb % 8 blocks one at a time into their lanes.
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

/* The 32 indices of a 16-byte run as bytes in value order (low nibbles, then high). */
static inline __attribute__((always_inline)) __m256i iq4_idx(const uint8_t *qs)
{
    const __m128i m4 = _mm_set1_epi8(15);
    __m128i v = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(v, 4), m4), _mm_and_si128(v, m4));
}

/* The sum of the 8 int32 lanes of v. */
static inline __attribute__((always_inline)) int32_t iq4_hsum(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

void kern_matmul_iq4nl_avx2(float *y, int64_t y_ld, const void *w, const struct kern_q8_block *xq,
                            int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    const int64_t nb = k / KERN_Q8_BLOCK, nb8 = nb - nb % KERN_Q8_LANES;
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kern_iq4_values));
    const __m256i one16 = _mm256_set1_epi16(1);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * (size_t)nb * KERN_IQ4NL_BYTES;
        for (int64_t t0 = 0; t0 < n_tok; t0 += TOKS) {
            int nt = (int)(n_tok - t0 < TOKS ? n_tok - t0 : TOKS);
            __m256 av[TOKS];
            for (int t = 0; t < TOKS; t++) av[t] = _mm256_setzero_ps();
            /* groups of 8 blocks: block b0 + j in lane j = its b % 8 */
            for (int64_t b0 = 0; b0 < nb8; b0 += KERN_Q8_LANES) {
                const uint8_t *g = row + b0 * KERN_IQ4NL_BYTES;
                __m256i wv[8], aw[8];
                for (int j = 0; j < 8; j++) {
                    wv[j] = _mm256_shuffle_epi8(table, xt_nibbles(g + j * KERN_IQ4NL_BYTES + 2));
                    aw[j] = _mm256_abs_epi8(wv[j]);
                }
                __m256 dw = xt_f16x8(g, KERN_IQ4NL_BYTES);
                for (int t = 0; t < nt; t++) {
                    const struct kern_q8_block *xb = xq + (t0 + t) * nb + b0;
                    __m256i p[8];
                    for (int j = 0; j < 8; j++) {
                        __m256i xv = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)xb[j].q), wv[j]);
                        p[j] = _mm256_madd_epi16(_mm256_maddubs_epi16(aw[j], xv), one16);
                    }
                    av[t] = _mm256_fmadd_ps(_mm256_mul_ps(dw, xt_xd8(xb)), _mm256_cvtepi32_ps(xt_hsum8(p)), av[t]);
                }
            }
            float acc[TOKS][KERN_Q8_LANES];
            for (int t = 0; t < nt; t++) _mm256_storeu_ps(acc[t], av[t]);
            /* the last nb % 8 blocks, one lane each */
            for (int64_t b = nb8; b < nb; b++) {
                const uint8_t *blk = row + b * KERN_IQ4NL_BYTES;
                __m256i wv = _mm256_shuffle_epi8(table, xt_nibbles(blk + 2));
                __m256i aw = _mm256_abs_epi8(wv);
                float dw = kq_f16_at(blk);
                for (int t = 0; t < nt; t++) {
                    const struct kern_q8_block *xb = xq + (t0 + t) * nb + b;
                    __m256i xv = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)xb->q), wv);
                    int32_t isum = iq4_hsum(_mm256_madd_epi16(_mm256_maddubs_epi16(aw, xv), one16));
                    float *a = &acc[t][b % KERN_Q8_LANES];
                    *a = fmaf(dw * xb->d, (float)isum, *a);
                }
            }
            for (int t = 0; t < nt; t++) y[(t0 + t) * y_ld + r] = xt_tree8(acc[t]);
        }
    }
}

void kern_matmul_iq4xs_avx2(float *y, int64_t y_ld, const void *w, const struct kern_q8k_block *xq,
                            int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    const int64_t nb = k / KERN_QK;
    const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kern_iq4_values));
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * (size_t)nb * KERN_IQ4XS_BYTES;
        for (int64_t t0 = 0; t0 < n_tok; t0 += TOKS) {
            int nt = (int)(n_tok - t0 < TOKS ? n_tok - t0 : TOKS);
            float acc[TOKS] = { 0 };
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + b * KERN_IQ4XS_BYTES;
                __m256i is[TOKS];
                for (int t = 0; t < TOKS; t++) is[t] = _mm256_setzero_si256();
                uint16_t sh = hs_rd_u16(blk + 2);
                for (int s = 0; s < 8; s++) {
                    int ls = ((blk[4 + s / 2] >> 4 * (s % 2)) & 15) | ((sh >> 2 * s) & 3) << 4;
                    __m256i sc = _mm256_set1_epi16((short)(ls - 32));
                    __m256i wv = _mm256_shuffle_epi8(table, iq4_idx(blk + 8 + 16 * s));
                    __m256i aw = _mm256_abs_epi8(wv);
                    for (int t = 0; t < nt; t++) {
                        const int8_t *xs = xq[(t0 + t) * nb + b].q + 32 * s;
                        __m256i xv = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)xs), wv);
                        is[t] = _mm256_add_epi32(is[t], _mm256_madd_epi16(_mm256_maddubs_epi16(aw, xv), sc));
                    }
                }
                float dw = kq_f16_at(blk);
                for (int t = 0; t < nt; t++)
                    acc[t] = fmaf(dw * xq[(t0 + t) * nb + b].d, (float)iq4_hsum(is[t]), acc[t]);
            }
            for (int t = 0; t < nt; t++) y[(t0 + t) * y_ld + r] = acc[t];
        }
    }
}

void kern_matmul_x_avx2(float *y, int64_t y_ld, const void *w, int wt, const struct kern_q8_block *xq,
                        const struct kern_q8k_block *xk, int64_t n_tok, int64_t k, int64_t r0,
                        int64_t r1)
{
    if (wt == KERN_X_Q5_1) kern_matmul_q5_1_avx2(y, y_ld, w, xq, n_tok, k, r0, r1);
    else if (wt == KERN_X_IQ4_NL) kern_matmul_iq4nl_avx2(y, y_ld, w, xq, n_tok, k, r0, r1);
    else if (wt == KERN_X_IQ4_XS) kern_matmul_iq4xs_avx2(y, y_ld, w, xk, n_tok, k, r0, r1);
}
#endif
