/*
 * bf16_avx512.c — AVX-512 variants of kern_bf16_round and kern_bf16_matmul (bf16.c): the
 * "BF16 weights" contract of kernels.h, bit for bit. Compiled with the Makefile's AVX-512
 * flags (which include AVX512_BF16); kern_bf16_matmul_avx512f uses AVX-512F/BW only.
 *
 * How the contract maps onto registers:
 *   1. One zmm accumulator per output holds the 16 partial sums, lane l. A chunk of 32
 *      weights and 32 activations is one vdpbf16ps: per lane, odd element then even, each
 *      an exact product added with DAZ/FTZ/RNE, i.e. the contract's two F(fmaf(D, D, acc))
 *      steps (Intel SDM pseudo-code; measured equal on this CPU, edge values included).
 *   2. kern_bf16_matmul_avx512f does the same with two vfmadd per chunk on the odd
 *      (w & 0xffff0000) and even (w << 16) elements under MXCSR.DAZ|FTZ: DAZ is D on a bf16
 *      widened to f32, and x86 FTZ flushes results tiny after rounding, which is F.
 *   3. Every variant runs the whole call, tree included, under MXCSR.DAZ|FTZ (vdpbf16ps
 *      ignores MXCSR; the tree adds need FTZ), restored on return. The compiler does not
 *      model MXCSR, so a memory clobber after the switch and before the restore keeps the
 *      loads and stores of the arithmetic between the two.
 *   4. A tail chunk (k % 32 != 0) loads with zero masks: the contract pads with +0, so a
 *      step on the padding is an ordinary fma(0, 0, acc) (it turns an acc of -0 into +0,
 *      as the scalar reference does).
 *   5. Tiles (rows x tokens per block of accumulators, row panels of KERN_PANEL_BYTES so a token
 *      tile stays in L1 while the panel passes from L2) only reuse loads: each output has
 *      its own accumulator and sees the chunks in ascending order, so the bits do not
 *      depend on n_tok, r0, r1 or the tile shapes.
 *   6. The rounding is vcvtne2ps2bf16, whose rule (DAZ, RNE, quiet NaN) is the contract's.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "kernels/tile_int.h"

#define INLINE static inline __attribute__((always_inline))
#define N_ROWS 4   /* batched, vdpbf16ps: 4 x 6 outputs, 24 zmm accumulators */
#define N_TOKS 6
#define E_ROWS 4   /* batched, FMA emulation: 4 x 4 (odd / even weights take 8 zmm) */
#define E_TOKS 4
#define ROWS1 8    /* one token: 8 rows */
#define MAXR 8
#define MAXT 6
#define CSR_DAZ_FTZ 0x8040u

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

/* The contract's tree h = 8, 4, 2, 1 (under FTZ): low + high halves at each width. */
INLINE float tree16(__m512 a)
{
    __m256 s8 = _mm256_add_ps(_mm512_castps512_ps256(a), _mm512_extractf32x8_ps(a, 1));
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

INLINE __m512i load32(const void *p, __mmask32 m, bool full)
{
    return full ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi16(m, p);
}

/* One chunk of nr rows x nt tokens at k0. */
INLINE void chunk(__m512 acc[MAXR][MAXT], const uint8_t *const *row, const uint16_t *xt, int64_t k,
                  int64_t k0, __mmask32 m, bool full, int nr, int nt, bool native, int64_t pf)
{
    const __m512i hi = _mm512_set1_epi32((int)0xffff0000u);
    __m512i wv[MAXR];
    __m512 wo[MAXR], we[MAXR];
#pragma GCC unroll 8
    for (int i = 0; i < nr; i++) {
        /* decode streams the matrix from memory: fetch the same line of the next tile's
         * row now (a prefetch never faults, also past the end), into L2: on Zen 4 the L1
         * hint ran a 0.8b bf16 decode at 0.78x (bench/profile.md, round 14) */
        if (pf) _mm_prefetch((const char *)row[i] + k0 * 2 + pf, _MM_HINT_T1);
        wv[i] = load32(row[i] + k0 * 2, m, full);
        if (!native) {
            wo[i] = _mm512_castsi512_ps(_mm512_and_si512(wv[i], hi));
            we[i] = _mm512_castsi512_ps(_mm512_slli_epi32(wv[i], 16));
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < nt; j++) {
        __m512i xv = load32(xt + j * k + k0, m, full);
        if (native) {
#pragma GCC unroll 8
            for (int i = 0; i < nr; i++) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], (__m512bh)wv[i], (__m512bh)xv);
        } else {
            __m512 xo = _mm512_castsi512_ps(_mm512_and_si512(xv, hi));
            __m512 xe = _mm512_castsi512_ps(_mm512_slli_epi32(xv, 16));
#pragma GCC unroll 8
            for (int i = 0; i < nr; i++) {
                acc[i][j] = _mm512_fmadd_ps(wo[i], xo, acc[i][j]);
                acc[i][j] = _mm512_fmadd_ps(we[i], xe, acc[i][j]);
            }
        }
    }
}

/* Outputs y[(t + j) * y_ld + r + i] for i < nr, j < nt. */
INLINE void tile(float *y, int64_t y_ld, const uint8_t *w, const uint16_t *xb, int64_t k, int64_t r,
                 int64_t t, int nr, int nt, bool native, int64_t pf)
{
    __m512 acc[MAXR][MAXT];
    const uint8_t *row[MAXR];
#pragma GCC unroll 8
    for (int i = 0; i < nr; i++) {
        row[i] = w + (size_t)(r + i) * (size_t)k * 2;
#pragma GCC unroll 8
        for (int j = 0; j < nt; j++) acc[i][j] = _mm512_setzero_ps();
    }
    const uint16_t *xt = xb + t * k;
    int64_t k0 = 0;
    for (; k0 + 32 <= k; k0 += 32) chunk(acc, row, xt, k, k0, 0, true, nr, nt, native, pf);
    if (k0 < k) {
        __mmask32 m = (__mmask32)(((uint64_t)1 << (k - k0)) - 1);
        chunk(acc, row, xt, k, k0, m, false, nr, nt, native, pf);
    }
#pragma GCC unroll 8
    for (int j = 0; j < nt; j++)
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++) y[(t + j) * y_ld + r + i] = tree16(acc[i][j]);
}

INLINE void matmul_t(float *y, int64_t y_ld, const void *wp, const uint16_t *xb, int64_t n_tok,
                     int64_t k, int64_t r0, int64_t r1, bool native)
{
    const uint8_t *w = wp;
    const int rows = native ? N_ROWS : E_ROWS, toks = native ? N_TOKS : E_TOKS;
    unsigned csr = csr_enter();
    int64_t r = r0;
    /* decode prefetches the next tile's rows (a full tile's worth ahead); the last single
     * rows and the batched tiles do not */
#define TILE1(r, t, nr, nt) tile(y, y_ld, w, xb, k, r, t, nr, nt, native, (nr) == ROWS1 ? ROWS1 * k * 2 : 0)
#define TILE(r, t, nr, nt) tile(y, y_ld, w, xb, k, r, t, nr, nt, native, 0)
    if (n_tok == 1) {
        KERN_TILES_ONE_TOKEN(r, r0, r1, ROWS1, TILE1);
        csr_leave(csr);
        return;
    }
    KERN_TILES_PANELS(r, r0, r1, n_tok, k * 2, rows, toks, TILE);
#undef TILE
#undef TILE1
    csr_leave(csr);
}

void kern_bf16_matmul_avx512(float *y, int64_t y_ld, const void *w, const uint16_t *xb,
                             int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    matmul_t(y, y_ld, w, xb, n_tok, k, r0, r1, true);
}

void kern_bf16_matmul_avx512f(float *y, int64_t y_ld, const void *w, const uint16_t *xb,
                              int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    matmul_t(y, y_ld, w, xb, n_tok, k, r0, r1, false);
}

void kern_bf16_round_avx512(uint16_t *xb, const float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i));
        _mm512_storeu_si512(xb + i, (__m512i)v);
    }
    for (; i < n; i += 16) {
        __mmask16 m = (__mmask16)(n - i >= 16 ? 0xffff : ((1u << (n - i)) - 1));
        __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, x + i));
        _mm256_mask_storeu_epi16(xb + i, m, (__m256i)v);
    }
}

#else
typedef int kern_bf16_avx512_unused; /* not x86: the variant does not exist */
#endif
