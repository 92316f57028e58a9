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
 *      the lane b % 8 of the token's own 8 sums, and the halving tree 4, 2, 1.
 *   3. A block is decoded once per tile of up to TOKS tokens; each token keeps its own
 *      sums, so n_tok, r0 and r1 cannot change a bit.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>

#include "kernels/kernels.h"
#include "kernels/kquant_x86_int.h"

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

void kern_matmul_q5_1_avx2(float *y, int64_t y_ld, const void *w, const struct kern_q8_block *xq,
                           int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    const int64_t nb = k / KERN_Q8_BLOCK;
    const __m128i m4 = _mm_set1_epi8(15);
    const __m256i one8 = _mm256_set1_epi8(1), one16 = _mm256_set1_epi16(1);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * (size_t)nb * KERN_Q5_1_BYTES;
        for (int64_t t0 = 0; t0 < n_tok; t0 += TOKS) {
            int nt = (int)(n_tok - t0 < TOKS ? n_tok - t0 : TOKS);
            float acc[TOKS][KERN_Q8_LANES] = { { 0 } };
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + b * KERN_Q5_1_BYTES;
                __m128i qs = _mm_loadu_si128((const __m128i *)(blk + 8));
                __m256i q = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(qs, 4), m4), _mm_and_si128(qs, m4));
                q = _mm256_or_si256(q, q5_1_high_bits(hs_rd_u32(blk + 4)));
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
