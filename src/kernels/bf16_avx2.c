/*
 * bf16_avx2.c — AVX2 + FMA variants of kern_bf16_round and kern_bf16_matmul (bf16.c): the
 * "BF16 weights" contract of kernels.h, bit for bit, for CPUs without AVX512_BF16.
 *
 * How the contract maps onto registers:
 *   1. A ymm holds 8 of the 16 partial sums: lanes 0..7 (elements 0..15 of each 32-chunk)
 *      or lanes 8..15 (elements 16..31). The lanes are independent sums, so the call runs
 *      all chunks for lanes 0..7, then all chunks for lanes 8..15, each output keeping its
 *      chunk order; the tree starts with (lanes 0..7) + (lanes 8..15), which is h = 8.
 *   2. 16 bf16 of a half-chunk, widened as 32-bit pairs, give the odd elements as
 *      v & 0xffff0000 and the even ones as v << 16, exact f32 in the lane of their pair;
 *      two vfmadd per half-chunk (odd first) under MXCSR.DAZ|FTZ are the contract's two
 *      F(fmaf(D, D, acc)) steps (DAZ = D on a widened bf16; x86 FTZ flushes results tiny
 *      after rounding = F; measured equal to vdpbf16ps, the FLT_MIN boundary included).
 *   3. The whole call, tree included, runs under DAZ|FTZ, restored on return; memory
 *      clobbers keep the loads and stores between the switch and the restore.
 *   4. A chunk that runs past k is read through a zero-filled 16-value copy: the contract
 *      pads with +0 and the zero steps still run (they turn an acc of -0 into +0).
 *   5. Tiles (rows x tokens) only reuse loads; the bits do not depend on n_tok, r0, r1.
 *   6. One token (decode: the weights stream from memory once per step): one pass over each
 *      row, both halves of a chunk side by side in their own accumulators (lanes 0..7 and
 *      8..15 are independent sums, so each still sees its chunks in ascending order), not
 *      the two passes of note 1, which read every weight line twice; and a software
 *      prefetch into L2 of the lines the next tile of rows reads at the same k (nr rows
 *      further on: a distance in tiles never lands on a row the tile reads itself). 2.2-2.5x
 *      the two-pass tile per CPU second (bench/profile.md, round 13).
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <string.h>

#include "kernels/tile_int.h"

#define INLINE static inline __attribute__((always_inline))
#define B_ROWS 2  /* batched: 2 x 4 outputs, 8 ymm accumulators per half (2 x 3: 0.73x; measured) */
#define B_TOKS 4
#define ROWS1 4   /* one token: 4 rows */
#define MAXR 4
#define MAXT 4
#define CSR_DAZ_FTZ 0x8040u
#ifndef PF_TILES
#define PF_TILES 1 /* decode prefetch distance in row tiles (note 6; measured) */
#endif
#ifndef PF_HINT
#define PF_HINT _MM_HINT_T1
#endif

static unsigned csr_enter(void)
{
    unsigned old = _mm_getcsr();
    _mm_setcsr(old | CSR_DAZ_FTZ);
    __asm__ __volatile__("" ::: "memory");
    return old;
}

static void csr_leave(unsigned old)
{
    __asm__ __volatile__("" ::: "memory");
    _mm_setcsr(old);
}

/* 16 bf16 at p, or the first n of them and zeros when n < 16 (n may be <= 0). */
INLINE __m256i load16(const void *p, int64_t n)
{
    if (n >= 16) return _mm256_loadu_si256((const __m256i *)p);
    uint16_t buf[16] = { 0 };
    if (n > 0) memcpy(buf, p, (size_t)n * 2);
    return _mm256_loadu_si256((const __m256i *)(const void *)buf);
}

/* Half-chunk at element e (= chunk + 0 or 16) for nr x nt outputs; n valid elements. */
INLINE void step(__m256 acc[MAXR][MAXT], const uint8_t *const *row, const uint16_t *xt, int64_t k,
                 int64_t e, int64_t n, int nr, int nt)
{
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
    __m256 wo[MAXR], we[MAXR];
#pragma GCC unroll 8
    for (int i = 0; i < nr; i++) {
        __m256i v = load16(row[i] + e * 2, n);
        wo[i] = _mm256_castsi256_ps(_mm256_and_si256(v, hi));
        we[i] = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
    }
#pragma GCC unroll 8
    for (int j = 0; j < nt; j++) {
        __m256i v = load16(xt + j * k + e, n);
        __m256 xo = _mm256_castsi256_ps(_mm256_and_si256(v, hi));
        __m256 xe = _mm256_castsi256_ps(_mm256_slli_epi32(v, 16));
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++) {
            acc[i][j] = _mm256_fmadd_ps(wo[i], xo, acc[i][j]);
            acc[i][j] = _mm256_fmadd_ps(we[i], xe, acc[i][j]);
        }
    }
}

/* All chunks of lanes 8h .. 8h+7. */
INLINE void half(__m256 acc[MAXR][MAXT], const uint8_t *const *row, const uint16_t *xt, int64_t k,
                 int h, int nr, int nt)
{
#pragma GCC unroll 8
    for (int i = 0; i < nr; i++)
#pragma GCC unroll 8
        for (int j = 0; j < nt; j++) acc[i][j] = _mm256_setzero_ps();
    int64_t c = 0;
    for (; c + 32 <= k; c += 32) step(acc, row, xt, k, c + 16 * h, 16, nr, nt);
    if (c < k) step(acc, row, xt, k, c + 16 * h, k - c - 16 * h, nr, nt);
}

INLINE float tree(__m256 lo, __m256 hi8)
{
    __m256 s8 = _mm256_add_ps(lo, hi8);
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

INLINE void tile(float *y, int64_t y_ld, const uint8_t *w, const uint16_t *xb, int64_t k, int64_t r,
                 int64_t t, int nr, int nt)
{
    __m256 a0[MAXR][MAXT], a1[MAXR][MAXT];
    const uint8_t *row[MAXR];
#pragma GCC unroll 8
    for (int i = 0; i < nr; i++) row[i] = w + (size_t)(r + i) * (size_t)k * 2;
    const uint16_t *xt = xb + t * k;
    half(a0, row, xt, k, 0, nr, nt);
    half(a1, row, xt, k, 1, nr, nt);
#pragma GCC unroll 8
    for (int j = 0; j < nt; j++)
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++) y[(t + j) * y_ld + r + i] = tree(a0[i][j], a1[i][j]);
}

/* One token, rows r .. r+nr-1, one pass (note 6). */
INLINE void tile1(float *y, const uint8_t *w, const uint16_t *xt, int64_t k, int64_t r, int nr)
{
    const __m256i hi = _mm256_set1_epi32((int)0xffff0000u);
    __m256 a0[MAXR], a1[MAXR];
    const uint8_t *row[MAXR];
#pragma GCC unroll 8
    for (int i = 0; i < nr; i++) {
        row[i] = w + (size_t)(r + i) * (size_t)k * 2;
        a0[i] = _mm256_setzero_ps();
        a1[i] = _mm256_setzero_ps();
    }
    const size_t pf = (size_t)PF_TILES * (size_t)nr * (size_t)k * 2; /* the same place PF_TILES tiles on */
    int64_t c = 0;
    for (; c + 32 <= k; c += 32) {
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++) _mm_prefetch((const char *)row[i] + pf + c * 2, PF_HINT);
        __m256i v0 = _mm256_loadu_si256((const __m256i *)(const void *)(xt + c));
        __m256i v1 = _mm256_loadu_si256((const __m256i *)(const void *)(xt + c + 16));
        __m256 xo0 = _mm256_castsi256_ps(_mm256_and_si256(v0, hi));
        __m256 xe0 = _mm256_castsi256_ps(_mm256_slli_epi32(v0, 16));
        __m256 xo1 = _mm256_castsi256_ps(_mm256_and_si256(v1, hi));
        __m256 xe1 = _mm256_castsi256_ps(_mm256_slli_epi32(v1, 16));
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++) {
            __m256i u0 = _mm256_loadu_si256((const __m256i *)(const void *)(row[i] + c * 2));
            __m256i u1 = _mm256_loadu_si256((const __m256i *)(const void *)(row[i] + c * 2 + 32));
            a0[i] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(u0, hi)), xo0, a0[i]);
            a0[i] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(u0, 16)), xe0, a0[i]);
            a1[i] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_and_si256(u1, hi)), xo1, a1[i]);
            a1[i] = _mm256_fmadd_ps(_mm256_castsi256_ps(_mm256_slli_epi32(u1, 16)), xe1, a1[i]);
        }
    }
    if (c < k) {
        /* the last, partial chunk through the zero-filled copies of note 4 */
        __m256 acc0[MAXR][MAXT], acc1[MAXR][MAXT];
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++) acc0[i][0] = a0[i], acc1[i][0] = a1[i];
        step(acc0, row, xt, k, c, k - c, nr, 1);
        step(acc1, row, xt, k, c + 16, k - c - 16, nr, 1);
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++) a0[i] = acc0[i][0], a1[i] = acc1[i][0];
    }
#pragma GCC unroll 8
    for (int i = 0; i < nr; i++) y[r + i] = tree(a0[i], a1[i]);
}

void kern_bf16_matmul_avx2(float *y, int64_t y_ld, const void *wp, const uint16_t *xb,
                           int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    const uint8_t *w = wp;
    unsigned csr = csr_enter();
    int64_t r = r0;
#define TILE(r, t, nr, nt) tile(y, y_ld, w, xb, k, r, t, nr, nt)
    if (n_tok == 1) {
#define TILE1(r, t, nr, nt) tile1(y, w, xb, k, r, nr)
        KERN_TILES_ONE_TOKEN(r, r0, r1, ROWS1, TILE1);
#undef TILE1
        csr_leave(csr);
        return;
    }
    KERN_TILES_PANELS(r, r0, r1, n_tok, k * 2, B_ROWS, B_TOKS, TILE);
#undef TILE
    csr_leave(csr);
}

/* The contract's rounding on 8 floats, as 32-bit lanes holding the bf16 bits. */
INLINE __m256i round8(const float *x)
{
    __m256i u = _mm256_castps_si256(_mm256_loadu_ps(x));
    __m256i top = _mm256_srli_epi32(u, 16);
    __m256i ex = _mm256_and_si256(u, _mm256_set1_epi32(0x7f800000));
    __m256i bias = _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(top, _mm256_set1_epi32(1)));
    __m256i rn = _mm256_srli_epi32(_mm256_add_epi32(u, bias), 16);
    __m256i special = _mm256_cmpeq_epi32(ex, _mm256_set1_epi32(0x7f800000));
    __m256i mant0 = _mm256_cmpeq_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x007fffff)), _mm256_setzero_si256());
    __m256i quiet = _mm256_andnot_si256(mant0, _mm256_set1_epi32(0x40));
    rn = _mm256_blendv_epi8(rn, _mm256_or_si256(top, quiet), special);
    __m256i tiny = _mm256_cmpeq_epi32(ex, _mm256_setzero_si256());
    return _mm256_blendv_epi8(rn, _mm256_and_si256(top, _mm256_set1_epi32(0x8000)), tiny);
}

void kern_bf16_round_avx2(uint16_t *xb, const float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        /* packus interleaves 128-bit halves; the permute puts them back in order */
        __m256i p = _mm256_packus_epi32(round8(x + i), round8(x + i + 8));
        _mm256_storeu_si256((__m256i *)(void *)(xb + i), _mm256_permute4x64_epi64(p, 0xd8));
    }
    if (i < n) kern_bf16_round(xb + i, x + i, n - i);
}

#else
typedef int kern_bf16_avx2_unused; /* not x86: the variant does not exist */
#endif
