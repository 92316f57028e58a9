/*
 * q5k_avx2.c — AVX2 variant of the Q5_K matmul (kern_matmul_q5k: Q5_K weights x
 * kern_q8k_quantize activations). Bit-identical to the scalar reference in q5k.c; reached
 * through kern_ops_for("avx2")->matmul_k: q4k_avx2.c runs the whole 8-row groups of a call
 * of 3 tokens or more through its panel path (its note 7) and forwards the rest here.
 * Compiled with the Makefile's AVX2 flags.
 *
 * Design note:
 *   1. q4k_avx2.c's Q4_K mapping with the 5th bit or-ed in: 32 weights of one sub-block per
 *      ymm as unsigned bytes 0..31, vpmaddubsw with the int8 activations (pair sums at most
 *      2 * 31 * 127: no saturation), vpmaddwd with the sub-block's scale, int32 lanes summed
 *      once per block (exact, so the order is free). Then the scalar's float steps: dw * dx
 *      and dmin * dx rounded once each, two fmaf per block into the output's own
 *      accumulator, blocks ascending.
 *   2. A row's block is decoded once per tile of up to TOKS tokens; each token keeps its
 *      own accumulator, so n_tok, r0 and r1 cannot change a bit.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kquant_x86_int.h"

#define INLINE static inline __attribute__((always_inline))
#define TOKS 4
#define PF_BYTES 2048 /* software prefetch distance along the weight rows (q4k_avx2.c's) */

void kern_matmul_q5k_avx2(float *y, int64_t y_ld, const void *w, const struct kern_q8k_block *xq,
                          int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    const int64_t nb = k / KERN_QK;
    const __m256i m4 = _mm256_set1_epi8(15), m16 = _mm256_set1_epi8(16);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * (size_t)nb * KERN_Q5K_BYTES;
        for (int64_t t0 = 0; t0 < n_tok; t0 += TOKS) {
            int nt = (int)(n_tok - t0 < TOKS ? n_tok - t0 : TOKS);
            float acc[TOKS] = {0};
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + b * KERN_Q5K_BYTES;
                _mm_prefetch((const char *)blk + PF_BYTES, _MM_HINT_T0);
                _mm_prefetch((const char *)blk + PF_BYTES + 64, _MM_HINT_T0);
                _mm_prefetch((const char *)blk + PF_BYTES + 128, _MM_HINT_T0);
                __m128i sm = kq_scales_u32(blk + 4);
                __m256i sc16 = _mm256_cvtepu8_epi16(sm);
                __m128i m8 = _mm_unpackhi_epi64(sm, sm);
                __m256i mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
                __m128i sc_lo = _mm256_castsi256_si128(sc16);
                __m256i ws[8];
                ws[0] = _mm256_broadcastw_epi16(sc_lo);
                ws[1] = _mm256_broadcastw_epi16(_mm_srli_si128(sc_lo, 2));
                ws[2] = _mm256_broadcastw_epi16(_mm_srli_si128(sc_lo, 4));
                ws[3] = _mm256_broadcastw_epi16(_mm_srli_si128(sc_lo, 6));
                ws[4] = _mm256_broadcastw_epi16(_mm_srli_si128(sc_lo, 8));
                ws[5] = _mm256_broadcastw_epi16(_mm_srli_si128(sc_lo, 10));
                ws[6] = _mm256_broadcastw_epi16(_mm_srli_si128(sc_lo, 12));
                ws[7] = _mm256_broadcastw_epi16(_mm_srli_si128(sc_lo, 14));
                /* qh shifted right by s puts the 5th bit of sub-block s at bit 0 of each byte
                 * (bits crossing from the next byte land above bit 0 and are masked off) */
                __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 16));
                __m256i wq[8];
                _Pragma("GCC unroll 8")
                for (int j = 0; j < 4; j++) {
                    __m256i q = _mm256_loadu_si256((const __m256i *)(blk + 48 + 32 * j));
                    __m256i h0 = _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(qh, 2 * j), 4), m16);
                    __m256i h1 = _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(qh, 2 * j + 1), 4), m16);
                    wq[2 * j] = _mm256_or_si256(_mm256_and_si256(q, m4), h0);
                    wq[2 * j + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), h1);
                }
                float dw = kq_f16_at(blk), dmin = kq_f16_at(blk + 2);
                for (int t = 0; t < nt; t++) {
                    const struct kern_q8k_block *xb = xq + (t0 + t) * nb + b;
                    __m256i s = _mm256_setzero_si256();
                    _Pragma("GCC unroll 8")
                    for (int j = 0; j < 8; j++) {
                        __m256i x = _mm256_loadu_si256((const __m256i *)(xb->q + 32 * j));
                        s = _mm256_add_epi32(s, _mm256_madd_epi16(_mm256_maddubs_epi16(wq[j], x), ws[j]));
                    }
                    /* isum and msum reduced together: lanes [isum, msum, isum, msum] */
                    __m256i m8s = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb->bsum), mins);
                    __m256i h = _mm256_hadd_epi32(s, m8s);
                    h = _mm256_hadd_epi32(h, h);
                    __m128i h2 = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
                    int32_t isum = _mm_cvtsi128_si32(h2), msum = _mm_extract_epi32(h2, 1);
                    float a = fmaf(dw * xb->d, (float)isum, acc[t]);
                    acc[t] = fmaf(-(dmin * xb->d), (float)msum, a);
                }
            }
            for (int t = 0; t < nt; t++) y[(t0 + t) * y_ld + r] = acc[t];
        }
    }
}

#else
typedef int kern_q5k_avx2_unused; /* not x86: the variant does not exist */
#endif
