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
 *      accumulator, so n_tok, r0 and r1 cannot change a bit.
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

static void q6k_rows(float *y, int64_t y_ld, const uint8_t *w, const struct kern_q8k_block *xq,
                     int64_t n_tok, int64_t nb, int64_t r0, int64_t r1)
{
    const __m256i m4 = _mm256_set1_epi8(15), m2 = _mm256_set1_epi8(3);
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
                const int8_t *sc = (const int8_t *)(blk + 192);
                __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc));
                __m256i wq[8], ws[8];
                _Pragma("GCC unroll 8")
                for (int h = 0; h < 2; h++) {
                    __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h));
                    _Pragma("GCC unroll 8")
                    for (int k = 0; k < 4; k++) {
                        __m256i ql = _mm256_loadu_si256((const __m256i *)(blk + 64 * h + 32 * (k & 1)));
                        __m256i lo = k < 2 ? _mm256_and_si256(ql, m4) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4);
                        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), m2);
                        wq[4 * h + k] = _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
                        int g = 8 * h + 2 * k; /* the chunk's two 16-groups */
                        ws[4 * h + k] = _mm256_set_m128i(_mm_set1_epi16(sc[g + 1]), _mm_set1_epi16(sc[g]));
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
                    int32_t s1 = kq_hsum256(s);
                    int32_t s2 = kq_hsum256(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb->bsum), sc16));
                    acc[t] = fmaf(dw * xb->d, (float)(s1 - 32 * s2), acc[t]);
                }
            }
            for (int t = 0; t < nt; t++) y[(t0 + t) * y_ld + r] = acc[t];
        }
    }
}

void kern_matmul_q6k_avx2(float *y, int64_t y_ld, const void *w, const struct kern_q8k_block *xq,
                          int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    q6k_rows(y, y_ld, w, xq, n_tok, k / KERN_QK, r0, r1);
}

#else
typedef int kern_q6k_avx2_unused; /* not x86: the variant does not exist */
#endif
