/*
 * q5_1_avx512.c — AVX-512 variant of the Q5_1 matmul (kern_matmul_q5_1). Bit-identical to
 * the scalar reference in q5_1.c; reached through kern_ops_for("avx512" / "avx512vnni")->
 * matmul_x (iq4_avx512.c forwards KERN_X_Q5_1 here). Compiled with the Makefile's AVX-512
 * flags (F, BW, VL, VNNI).
 *
 * Design note:
 *   1. A block of 32 values is one ymm: the qh word is a byte mask (vmovdqu8 of 0x10 under
 *      it sets the 5th bits), vpdpbusd multiplies the unsigned quants 0..31 by the int8
 *      activations into int32 lanes, and a second vpdpbusd with ones gives the activation
 *      sum. Integer, exact; summed across lanes in any order.
 *   2. The float steps are the scalar's: dw * dx and mw * dx rounded once each, two fmaf
 *      into lane b % 8 of the token's own 8 sums, the halving tree 4, 2, 1; 8 blocks at a
 *      time as one ymm of sums (q5_1_avx2.c's scheme), the last nb % 8 one at a time.
 *   3. A block is decoded once per tile of up to TOKS tokens; each token keeps its own
 *      sums, so n_tok, r0 and r1 cannot change a bit.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>

#include "kernels/kernels.h"
#include "kernels/kquant_x86_int.h"
#include "kernels/xtype_x86_int.h"

#define TOKS 8

/* The 32 quants of a block as unsigned bytes 0..31 (the qh word is the byte mask of the 5th bits). */
static inline __attribute__((always_inline)) __m256i q5_1_quants(const uint8_t *blk)
{
    return _mm256_or_si256(xt_nibbles(blk + 8), _mm256_maskz_mov_epi8((__mmask32)hs_rd_u32(blk + 4),
                                                                      _mm256_set1_epi8(0x10)));
}

void kern_matmul_q5_1_avx512(float *y, int64_t y_ld, const void *w, const struct kern_q8_block *xq,
                             int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    const int64_t nb = k / KERN_Q8_BLOCK, nb8 = nb - nb % KERN_Q8_LANES;
    const __m256i one8 = _mm256_set1_epi8(1);
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
                        p[j] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), q[j], xv);
                        s[j] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), one8, xv);
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
                    __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), q, xv);
                    __m256i s = _mm256_dpbusd_epi32(_mm256_setzero_si256(), one8, xv);
                    __m256i h = _mm256_hadd_epi32(p, s);
                    __m128i v = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
                    v = _mm_hadd_epi32(v, v);
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
