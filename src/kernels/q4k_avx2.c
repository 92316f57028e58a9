/*
 * q4k_avx2.c — AVX2 variant of the K-quant matmul kern_matmul_k: Q4_K weights here, Q5_K and
 * Q6_K forwarded to q5k_avx2.c and q6k_avx2.c. Bit-identical to the scalar reference in q4k.c;
 * selected through kern_ops_for("avx2")->matmul_k (dispatch.c). Compiled with the Makefile's
 * AVX2 flags.
 *
 * The mapping is q4k_avx512.c's on 256-bit vectors: 32 weights of one sub-block per ymm as
 * unsigned bytes, vpmaddubsw with the int8 activations (pair sums at most 2 * 15 * 128: no
 * saturation), vpmaddwd with the scale of each pair's sub-block, int32 lanes summed once per
 * block (exact, so the order is free), then the scalar's float steps: dw * dx, dmin * dx
 * rounded once each and two fmaf per block into the output's own accumulator, blocks
 * ascending. A row's block is decoded once per tile of up to TOKS tokens; each token keeps
 * its own accumulator.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kquant_x86_int.h"

#define INLINE static inline __attribute__((always_inline))
#define TOKS 4
#ifndef PF_BYTES
#define PF_BYTES 2048 /* software prefetch distance along the weight rows (measured) */
#endif

static void q4k_rows(float *y, int64_t y_ld, const uint8_t *w, const struct kern_q8k_block *xq,
                     int64_t n_tok, int64_t nb, int64_t r0, int64_t r1)
{
    const __m256i m4 = _mm256_set1_epi8(15);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + (size_t)r * (size_t)nb * KERN_Q4K_BYTES;
        for (int64_t t0 = 0; t0 < n_tok; t0 += TOKS) {
            int nt = (int)(n_tok - t0 < TOKS ? n_tok - t0 : TOKS);
            float acc[TOKS] = {0};
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + b * KERN_Q4K_BYTES;
                _mm_prefetch((const char *)blk + PF_BYTES, _MM_HINT_T0);
                _mm_prefetch((const char *)blk + PF_BYTES + 64, _MM_HINT_T0);
                _mm_prefetch((const char *)blk + PF_BYTES + 128, _MM_HINT_T0);
                __m128i sm = kq_scales_u32(blk + 4);
                /* scale of sub-block j as int16 in every lane of ws[j]; mins as pairs */
                __m256i sc16 = _mm256_cvtepu8_epi16(sm);
                __m128i m8 = _mm_unpackhi_epi64(sm, sm);
                __m256i mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
                __m256i ws[8];
                __m128i sc_lo = _mm256_castsi256_si128(sc16);
                ws[0] = _mm256_broadcastw_epi16(sc_lo);
                ws[1] = _mm256_broadcastw_epi16(_mm_srli_si128(sc_lo, 2));
                ws[2] = _mm256_broadcastw_epi16(_mm_srli_si128(sc_lo, 4));
                ws[3] = _mm256_broadcastw_epi16(_mm_srli_si128(sc_lo, 6));
                ws[4] = _mm256_broadcastw_epi16(_mm_srli_si128(sc_lo, 8));
                ws[5] = _mm256_broadcastw_epi16(_mm_srli_si128(sc_lo, 10));
                ws[6] = _mm256_broadcastw_epi16(_mm_srli_si128(sc_lo, 12));
                ws[7] = _mm256_broadcastw_epi16(_mm_srli_si128(sc_lo, 14));
                __m256i wq[8];
                _Pragma("GCC unroll 8")
                for (int j = 0; j < 4; j++) {
                    __m256i q = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * j));
                    wq[2 * j] = _mm256_and_si256(q, m4);
                    wq[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                }
                float dw = kq_f16_at(blk), dmin = kq_f16_at(blk + 2);
                for (int t = 0; t < nt; t++) {
                    const struct kern_q8k_block *xb = xq + (t0 + t) * nb + b;
                    __m256i s = _mm256_setzero_si256();
                    _Pragma("GCC unroll 8")
                    for (int j = 0; j < 8; j++) {
                        __m256i x = _mm256_loadu_si256((const __m256i *)(xb->q + 32 * j));
                        __m256i p = _mm256_maddubs_epi16(wq[j], x);
                        s = _mm256_add_epi32(s, _mm256_madd_epi16(p, ws[j]));
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

void kern_matmul_k_avx2(float *y, int64_t y_ld, const void *w, int wt,
                        const struct kern_q8k_block *xq, int64_t n_tok, int64_t k, int64_t r0,
                        int64_t r1)
{
    if (wt == KERN_K_Q5_K) { kern_matmul_q5k_avx2(y, y_ld, w, xq, n_tok, k, r0, r1); return; }
    if (wt == KERN_K_Q4_K) q4k_rows(y, y_ld, w, xq, n_tok, k / KERN_QK, r0, r1);
    else kern_matmul_q6k_avx2(y, y_ld, w, xq, n_tok, k, r0, r1); /* q6k_avx2.c */
}

#else
typedef int kern_q4k_avx2_unused; /* not x86: the variant does not exist */
#endif
