/*
 * q4k_avx512.c — AVX-512 (F, BW, VL) variant of the K-quant matmul (Q4_K and Q6_K weights x
 * kern_q8k_quantize activations). Bit-identical to the scalar reference in q4k.c; selected
 * through kern_ops_for("avx512")->matmul_k (dispatch.c). Compiled with the Makefile's
 * AVX-512 flags.
 *
 * How the scalar order maps onto registers (kernels.h, "K-quant weights"):
 *   1. All the per-block work is integer and exact, so its order is free: 64 weights of one
 *      chunk sit in one zmm as unsigned bytes (Q4_K: the low nibbles of 32 qs bytes, then
 *      their high nibbles = sub-blocks 2j and 2j+1, which are activations 64j..64j+63 in
 *      order; Q6_K: low nibbles of 64 ql bytes (or high nibbles) with the qh bit pairs
 *      shifted in). vpmaddubsw with the int8 activations gives pair sums (at most
 *      2 * 63 * 128, no int16 saturation), vpmaddwd with the scales of each pair's sub-block
 *      (or 16-group) widens to int32 and applies the scale in one step; the lanes are summed
 *      with one reduction per block. Q4_K's mins and Q6_K's -32 offset use the activation
 *      bsums (vpmaddwd of 16 bsums with 16 scales), as the scalar formula writes them.
 *   2. The float part is the scalar's: dw * dx and dmin * dx rounded once each, then one or
 *      two fmaf per block into the output's own accumulator, blocks ascending.
 *   3. A row's super-block is decoded once and applied to a tile of up to TOKS tokens; every
 *      token keeps its own accumulator, so the tile shape cannot change a bit. VNNI
 *      (vpdpbusd) is not used: it would need a separate int32 multiply by the scale, while
 *      vpmaddwd folds the scale into the widening step.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"

#define INLINE static inline __attribute__((always_inline))
#define TOKS 4
#ifndef PF_BYTES
#define PF_BYTES 2048
#endif

INLINE int32_t hsum256(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

INLINE int32_t hsum512(__m512i v)
{
    return hsum256(_mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1)));
}

/* Lane i (of 32 int16) takes entry base + i / per of a 16-entry table. */
INLINE __m512i spread_idx(int base, int per)
{
    int16_t ix[32];
    for (int i = 0; i < 32; i++) ix[i] = (int16_t)(base + i / per);
    return _mm512_loadu_si512(ix);
}

/* The f16 scale at p as f32: vcvtph2ps, exact and equal to hs_f16_to_f32 (NaN quieted). */
INLINE float f16_at(const uint8_t *p) { return _cvtsh_ss(hs_rd_u16(p)); }

/* kern_q4k_scales on 32-bit words: sc[0..3] | sc[4..7] | m[0..3] | m[4..7] as four words
 * (byte j of a word is entry j of its group), the same bit moves as the scalar formula. */
INLINE __m128i q4k_scales_u32(const uint8_t *s12)
{
    uint32_t u0, u1, u2;
    memcpy(&u0, s12, 4);
    memcpy(&u1, s12 + 4, 4);
    memcpy(&u2, s12 + 8, 4);
    uint32_t sc_lo = u0 & 0x3f3f3f3fu, m_lo = u1 & 0x3f3f3f3fu;
    uint32_t sc_hi = (u2 & 0x0f0f0f0fu) | ((u0 >> 6) & 0x03030303u) << 4;
    uint32_t m_hi = ((u2 >> 4) & 0x0f0f0f0fu) | ((u1 >> 6) & 0x03030303u) << 4;
    return _mm_set_epi32((int)m_hi, (int)m_lo, (int)sc_hi, (int)sc_lo);
}

static void q4k_rows(float *y, int64_t y_ld, const uint8_t *w, const struct kern_q8k_block *xq,
                     int64_t n_tok, int64_t nb, int64_t r0, int64_t r1)
{
    const __m512i m4 = _mm512_set1_epi8(15);
    __m512i sidx[4];
    _Pragma("GCC unroll 8")
    for (int j = 0; j < 4; j++) sidx[j] = spread_idx(2 * j, 16);
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
                __m128i sm = q4k_scales_u32(blk + 4);
                /* 8 scales as int16 (lanes 0..7), 16 mins as int16 pairs [m0 m0 m1 m1 ...] */
                __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(sm));
                __m128i m8 = _mm_unpackhi_epi64(sm, sm);
                __m256i mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
                /* chunk j = bytes 32j..32j+31 of qs: low nibbles are values 64j.., high 64j+32.. */
                __m512i wq[4];
                _Pragma("GCC unroll 8")
                for (int h = 0; h < 2; h++) {
                    __m512i q = _mm512_loadu_si512(blk + 16 + 64 * h);
                    __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
                    wq[2 * h] = _mm512_shuffle_i64x2(lo, hi, 0x44);     /* lo lanes 0,1 | hi lanes 0,1 */
                    wq[2 * h + 1] = _mm512_shuffle_i64x2(lo, hi, 0xee); /* lo lanes 2,3 | hi lanes 2,3 */
                }
                __m512i ws[4];
                _Pragma("GCC unroll 8")
                for (int j = 0; j < 4; j++) ws[j] = _mm512_permutexvar_epi16(sidx[j], sc16);
                float dw = f16_at(blk), dmin = f16_at(blk + 2);
                for (int t = 0; t < nt; t++) {
                    const struct kern_q8k_block *xb = xq + (t0 + t) * nb + b;
                    __m512i s = _mm512_setzero_si512();
                    _Pragma("GCC unroll 8")
                    for (int j = 0; j < 4; j++) {
                        __m512i x = _mm512_loadu_si512(xb->q + 64 * j);
                        s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(wq[j], x), ws[j]);
                    }
                    /* isum and msum reduced together: lanes [isum, msum, isum, msum] */
                    __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
                    __m256i m8s = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb->bsum), mins);
                    __m256i h = _mm256_hadd_epi32(s8, m8s);
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

static void q6k_rows(float *y, int64_t y_ld, const uint8_t *w, const struct kern_q8k_block *xq,
                     int64_t n_tok, int64_t nb, int64_t r0, int64_t r1)
{
    const __m512i m4 = _mm512_set1_epi8(15), m2 = _mm512_set1_epi8(3);
    /* qh shifts: chunk 2h takes bit pairs 0 (first 32 values) and 2, chunk 2h+1 pairs 4, 6 */
    int16_t sh[2][32];
    for (int i = 0; i < 32; i++) {
        sh[0][i] = (int16_t)(i < 16 ? 0 : 2);
        sh[1][i] = (int16_t)(i < 16 ? 4 : 6);
    }
    const __m512i sh01 = _mm512_loadu_si512(sh[0]), sh23 = _mm512_loadu_si512(sh[1]);
    __m512i sidx[4];
    _Pragma("GCC unroll 8")
    for (int c = 0; c < 4; c++) sidx[c] = spread_idx(4 * c, 8);
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
                __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 192)));
                __m512i wq[4], ws[4];
                _Pragma("GCC unroll 8")
                for (int h = 0; h < 2; h++) {
                    __m512i ql = _mm512_loadu_si512(blk + 64 * h);
                    __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h)));
                    __m512i h01 = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, sh01), m2), 4);
                    __m512i h23 = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, sh23), m2), 4);
                    wq[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4), h01);
                    wq[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4), h23);
                }
                _Pragma("GCC unroll 8")
                for (int c = 0; c < 4; c++) ws[c] = _mm512_permutexvar_epi16(sidx[c], _mm512_castsi256_si512(sc16));
                float dw = f16_at(blk + 208);
                for (int t = 0; t < nt; t++) {
                    const struct kern_q8k_block *xb = xq + (t0 + t) * nb + b;
                    __m512i s = _mm512_setzero_si512();
                    _Pragma("GCC unroll 8")
                    for (int c = 0; c < 4; c++) {
                        __m512i x = _mm512_loadu_si512(xb->q + 64 * c);
                        s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(wq[c], x), ws[c]);
                    }
                    int32_t s1 = hsum512(s);
                    int32_t s2 = hsum256(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb->bsum), sc16));
                    acc[t] = fmaf(dw * xb->d, (float)(s1 - 32 * s2), acc[t]);
                }
            }
            for (int t = 0; t < nt; t++) y[(t0 + t) * y_ld + r] = acc[t];
        }
    }
}

void kern_matmul_k_avx512(float *y, int64_t y_ld, const void *w, int wt,
                          const struct kern_q8k_block *xq, int64_t n_tok, int64_t k, int64_t r0,
                          int64_t r1)
{
    if (wt == KERN_K_Q4_K) q4k_rows(y, y_ld, w, xq, n_tok, k / KERN_QK, r0, r1);
    else q6k_rows(y, y_ld, w, xq, n_tok, k / KERN_QK, r0, r1);
}

#else
typedef int kern_q4k_avx512_unused; /* not x86: the variant does not exist */
#endif
