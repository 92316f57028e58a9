/*
 * kquant_x86_int.h — private to src/kernels: small x86 helpers shared by the K-quant SIMD
 * files (q4k_*, q5k_*, q6k_* .c), so that each exists once. Included only by files compiled
 * with at least the AVX2 flags (F16C for vcvtph2ps); the second part only where the AVX-512
 * flags are on. Header-only and always inlined: every caller gets the code it had when the
 * helper was its own.
 *
 * Invariants:
 *   1. kq_f16_at is exact and equals hs_f16_to_f32 (vcvtph2ps; a NaN comes out quiet).
 *   2. kq_scales_u32 makes the same bit moves as kern_q4k_scales (q4k.c), on 32-bit words.
 *   3. Integer helpers (sums, broadcasts, lane moves, transposes) are exact, so they cannot
 *      change a bit of any order the float steps keep.
 *   4. The float helpers (kq_apply1, kq_apply) make exactly the scalar's float steps for one
 *      block (kernels.h, "K-quant weights"), lane-wise where they take several tokens.
 */
#ifndef HS_KERNELS_KQUANT_X86_INT_H
#define HS_KERNELS_KQUANT_X86_INT_H

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"

/* The f16 scale at p as f32. */
static inline __attribute__((always_inline)) float kq_f16_at(const uint8_t *p)
{
    return _cvtsh_ss(hs_rd_u16(p));
}

/* kern_q4k_scales on 32-bit words: sc[0..3] | sc[4..7] | m[0..3] | m[4..7] as four words
 * (byte j of a word is entry j of its group) of the 12 packed bytes at s12 (Q4_K and Q5_K
 * pack their 6-bit scales and mins the same way). */
static inline __attribute__((always_inline)) __m128i kq_scales_u32(const uint8_t *s12)
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

/* The sum of the 8 int32 lanes of v (exact; the order is free). */
static inline __attribute__((always_inline)) int32_t kq_hsum256(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* The 4 bytes at p in every dword lane of a ymm (the AVX2 panels' activation broadcast). */
static inline __attribute__((always_inline)) __m256i kq_dup32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* The 8 x 8 dword transpose of the AVX2 panels (q4k_avx2.c, q6k_avx2.c): on return v[d]
 * lane i = dword d of the input v[i]. */
static inline __attribute__((always_inline)) void kq_transpose8(__m256i v[8])
{
    __m256i t[8], u[8];
    _Pragma("GCC unroll 4")
    for (int m = 0; m < 4; m++) {
        t[2 * m] = _mm256_unpacklo_epi32(v[2 * m], v[2 * m + 1]);     /* dwords 0,1 | 4,5 */
        t[2 * m + 1] = _mm256_unpackhi_epi32(v[2 * m], v[2 * m + 1]); /* dwords 2,3 | 6,7 */
    }
    _Pragma("GCC unroll 2")
    for (int h = 0; h < 2; h++) {                                     /* rows 4h .. 4h+3 */
        u[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h + 0], t[4 * h + 2]);
        u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h + 0], t[4 * h + 2]);
        u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
        u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
    }
    _Pragma("GCC unroll 4")
    for (int d = 0; d < 4; d++) {
        v[d] = _mm256_permute2x128_si256(u[d], u[4 + d], 0x20);
        v[4 + d] = _mm256_permute2x128_si256(u[d], u[4 + d], 0x31);
    }
}

/* Lane t of the result = the sum of the 8 int32 lanes of h[t] (exact; the order is free).
 * hadd(a, b) per 128-bit half is [a01 a23 b01 b23]; twice gives the partial sums of each half
 * of h0..h3 (h4..h7), then the two halves of each are added. */
static inline __attribute__((always_inline)) __m256i kq_reduce8(const __m256i h[8])
{
    __m256i ab = _mm256_hadd_epi32(_mm256_hadd_epi32(h[0], h[1]), _mm256_hadd_epi32(h[2], h[3]));
    __m256i cd = _mm256_hadd_epi32(_mm256_hadd_epi32(h[4], h[5]), _mm256_hadd_epi32(h[6], h[7]));
    return _mm256_add_epi32(_mm256_permute2x128_si256(ab, cd, 0x20), _mm256_permute2x128_si256(ab, cd, 0x31));
}

/* Lane t of the result = the sum of the 8 int32 lanes of h[t], t < 4 (kq_reduce8's tree on
 * half as many vectors). */
static inline __attribute__((always_inline)) __m128i kq_reduce4(const __m256i h[4])
{
    __m256i ab = _mm256_hadd_epi32(_mm256_hadd_epi32(h[0], h[1]), _mm256_hadd_epi32(h[2], h[3]));
    return _mm_add_epi32(_mm256_castsi256_si128(ab), _mm256_extracti128_si256(ab, 1));
}

#ifdef __AVX512F__
/* ---- AVX-512 only (q4k_avx512.c, q5k_avx512.c, q6k_avx512.c) ------------------------------ */

/* Lane i (of 32 int16) takes entry base + i / per of a 16-entry table. */
static inline __attribute__((always_inline)) __m512i kq_spread_idx(int base, int per)
{
    int16_t ix[32];
    for (int i = 0; i < 32; i++) ix[i] = (int16_t)(base + i / per);
    return _mm512_loadu_si512(ix);
}

/* The vpermt2d index that gathers a panel block's dword lanes from two vectors of the
 * K-quant row-group layout (q4k_avx512.c's and q6k_avx512.c's q?p_pack_group_kp): lane L
 * takes dword 4(L/4) + (L/2)%2 + 2ab of the first vector (L even) or the second (L odd). */
static inline __attribute__((always_inline)) __m512i kq_kp_gather_idx(int ab)
{
    int32_t ix[16];
    for (int L = 0; L < 16; L++) ix[L] = 4 * (L / 4) + (L / 2) % 2 + 2 * ab + 16 * (L % 2);
    return _mm512_loadu_si512(ix);
}

/* The dword at p of rows 0..15 (lane i = row i). */
static inline __attribute__((always_inline)) __m512i kq_col_u32(const uint8_t *p, size_t rb)
{
    int32_t v[16];
    for (int i = 0; i < 16; i++) memcpy(&v[i], p + (size_t)i * rb, 4);
    return _mm512_loadu_si512(v);
}

/* Byte j (0..3) of each dword lane, zero-extended (sx: sign-extended) to int16 and doubled
 * into both halves of the lane: the (v, v) pairs vpdpwssd takes. */
static inline __attribute__((always_inline)) __m512i kq_byte_pair(__m512i v, int j, bool sx)
{
    __m512i x = _mm512_slli_epi32(v, 24 - 8 * j);
    x = sx ? _mm512_srai_epi32(x, 24) : _mm512_srli_epi32(x, 24);
    return _mm512_or_si512(_mm512_and_si512(x, _mm512_set1_epi32(0xffff)), _mm512_slli_epi32(x, 16));
}

/* The f16 at p of rows 0..15 as f32 lanes (reads 2 bytes per row: Q6_K's d ends the block). */
static inline __attribute__((always_inline)) __m512 kq_rows_f16(const uint8_t *p, size_t rb)
{
    uint16_t v[16];
    for (int i = 0; i < 16; i++) v[i] = hs_rd_u16(p + (size_t)i * rb);
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)v));
}

/* The 4 (8) bytes at p in every dword (qword) lane. */
static inline __attribute__((always_inline)) __m512i kq_bcast32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

static inline __attribute__((always_inline)) __m512i kq_bcast64(const void *p)
{
    long long v;
    memcpy(&v, p, 8);
    return _mm512_set1_epi64(v);
}

/* One decoded Q4_K / Q5_K super-block for the per-row paths (q4k_avx512.c note 2,
 * q5k_avx512.c note 4): chunk j's 64 weights as unsigned bytes (values 64 j .. 64 j + 63),
 * each int16 lane's sub-block scale, the mins as int16 pairs [m0 m0 m1 m1 ...] and the two
 * f16 scales as f32. */
struct kq_dec {
    __m512i wq[4], ws[4];
    __m256i mins;
    float dw, dmin;
};

/* acc after one decoded block times one activation block, the scalar's float steps: isum and
 * msum reduced together (lanes [isum, msum, isum, msum]), then dw * dx and dmin * dx rounded
 * once each and two fmaf. */
static inline __attribute__((always_inline)) float kq_apply1(const struct kq_dec *d, const struct kern_q8k_block *xb,
                                                             float acc)
{
    __m512i s = _mm512_setzero_si512();
    _Pragma("GCC unroll 8")
    for (int j = 0; j < 4; j++) {
        __m512i x = _mm512_loadu_si512(xb->q + 64 * j);
        s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(d->wq[j], x), d->ws[j]);
    }
    __m256i s8 = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
    __m256i m8s = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb->bsum), d->mins);
    __m256i h = _mm256_hadd_epi32(s8, m8s);
    h = _mm256_hadd_epi32(h, h);
    __m128i h2 = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    int32_t isum = _mm_cvtsi128_si32(h2), msum = _mm_extract_epi32(h2, 1);
    float a = fmaf(d->dw * xb->d, (float)isum, acc);
    return fmaf(-(d->dmin * xb->d), (float)msum, a);
}

/* The int32 sums of a decoded block with token t's activation block x: hs the scaled dot
 * (8 lanes), hm the mins' (8 lanes); both still to be summed across lanes. */
static inline __attribute__((always_inline)) void kq_sums(const struct kq_dec *d, const struct kern_q8k_block *x,
                                                          __m256i *hs, __m256i *hm)
{
    __m512i s = _mm512_setzero_si512();
    _Pragma("GCC unroll 8")
    for (int j = 0; j < 4; j++)
        s = _mm512_dpwssd_epi32(s, _mm512_maddubs_epi16(d->wq[j], _mm512_loadu_si512(x->q + 64 * j)), d->ws[j]);
    *hs = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));
    *hm = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)x->bsum), d->mins);
}

/* acc lanes t < nt (nt <= W, W = 4 or 8 tokens, activation blocks xb[t * nb]) after one
 * decoded block: the tokens' isum (and msum) vectors reduced together (kq_reduce8, or
 * kq_reduce4 for W = 4, its upper lanes 0: a third of the per-token horizontal sums' work),
 * then the scalar's float steps lane-wise, lane t being token t's own accumulator (vmulps
 * rounds dw * dx as the scalar product does, vcvtdq2ps is (float), vfmadd and vfnmadd round
 * once as fmaf; lanes past nt see dx = 0 and stay 0, and are never stored). */
static inline __attribute__((always_inline)) __m256 kq_apply(const struct kq_dec *d, const struct kern_q8k_block *xb,
                                                             int64_t nb, int nt, __m256 acc, int W)
{
    __m256i hs[8], hm[8];
    float xd[8] = {0};
    _Pragma("GCC unroll 8")
    for (int t = 0; t < W; t++) {
        if (t >= nt) {
            hs[t] = hm[t] = _mm256_setzero_si256();
            continue;
        }
        kq_sums(d, xb + t * nb, &hs[t], &hm[t]);
        xd[t] = xb[t * nb].d;
    }
    __m256i is = W == 8 ? kq_reduce8(hs) : _mm256_zextsi128_si256(kq_reduce4(hs));
    __m256i ms = W == 8 ? kq_reduce8(hm) : _mm256_zextsi128_si256(kq_reduce4(hm));
    __m256 vx = _mm256_loadu_ps(xd);
    __m256 dw = _mm256_mul_ps(_mm256_set1_ps(d->dw), vx), dm = _mm256_mul_ps(_mm256_set1_ps(d->dmin), vx);
    acc = _mm256_fmadd_ps(dw, _mm256_cvtepi32_ps(is), acc);
    return _mm256_fnmadd_ps(dm, _mm256_cvtepi32_ps(ms), acc);
}

/* The panel tiles' switch from a run-time token count nt (1..6) to a constant one: expands
 * to fn(y, y_ld, pk, nb, r, <extra args>, t0, ng, NT) with the caller's names. */
#define KQ_TILE_CASES(fn, ng, ...)                                                  \
    switch (nt) {                                                                   \
    case 6: fn(y, y_ld, pk, nb, r, __VA_ARGS__, t0, ng, 6); break;                  \
    case 5: fn(y, y_ld, pk, nb, r, __VA_ARGS__, t0, ng, 5); break;                  \
    case 4: fn(y, y_ld, pk, nb, r, __VA_ARGS__, t0, ng, 4); break;                  \
    case 3: fn(y, y_ld, pk, nb, r, __VA_ARGS__, t0, ng, 3); break;                  \
    case 2: fn(y, y_ld, pk, nb, r, __VA_ARGS__, t0, ng, 2); break;                  \
    default: fn(y, y_ld, pk, nb, r, __VA_ARGS__, t0, ng, 1); break;                 \
    }
#endif /* __AVX512F__ */

#endif
