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
 *      into lane b % 8 of the token's own 8 sums, the halving tree 4, 2, 1.
 *   3. A block is decoded once per tile of up to TOKS tokens; each token keeps its own
 *      sums, so n_tok, r0 and r1 cannot change a bit.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>

#include "kernels/kernels.h"
#include "kernels/kquant_x86_int.h"

#define TOKS 8

void kern_matmul_q5_1_avx512(float *y, int64_t y_ld, const void *w, const struct kern_q8_block *xq,
                             int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    const int64_t nb = k / KERN_Q8_BLOCK;
    const __m128i m4 = _mm_set1_epi8(15);
    const __m256i one8 = _mm256_set1_epi8(1), b16 = _mm256_set1_epi8(0x10);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * (size_t)nb * KERN_Q5_1_BYTES;
        for (int64_t t0 = 0; t0 < n_tok; t0 += TOKS) {
            int nt = (int)(n_tok - t0 < TOKS ? n_tok - t0 : TOKS);
            float acc[TOKS][KERN_Q8_LANES] = { { 0 } };
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + b * KERN_Q5_1_BYTES;
                __m128i qs = _mm_loadu_si128((const __m128i *)(blk + 8));
                __m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(qs, 4), m4), _mm_and_si128(qs, m4));
                q = _mm256_or_si256(q, _mm256_maskz_mov_epi8((__mmask32)hs_rd_u32(blk + 4), b16));
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
            for (int t = 0; t < nt; t++) {
                float *a = acc[t];
                for (int h = KERN_Q8_LANES / 2; h >= 1; h /= 2)
                    for (int l = 0; l < h; l++) a[l] = a[l] + a[l + h];
                y[(t0 + t) * y_ld + r] = a[0];
            }
        }
    }
}
#endif
