/*
 * matmul_avx2.c — AVX2 + FMA + F16C variant of the matmul, the Q8_0 activation quantizer and
 * the 32-lane dot product. Bit-identical to the scalar reference in matmul.c; selected
 * through kern_ops_for("avx2") (dispatch.c). Compiled with the Makefile's AVX2 flags.
 *
 * How the scalar order maps onto registers (kernels.h, "Matmul accumulation order"):
 *   1. Float weights: the 32 partial sums of one output are four ymm, lanes k%32 = 0..7,
 *      8..15, 16..23, 24..31; each chunk of 32 k is one _mm256_fmadd_ps per ymm (vfmadd
 *      rounds once, as fmaf). The halving tree adds ymm2 onto ymm0 and ymm3 onto ymm1
 *      (h = 16), ymm1 onto ymm0 (h = 8), then 128 bits (h = 4), 64 bits (h = 2) and lane 1
 *      onto lane 0 (h = 1): the same pairs as scalar.
 *   2. A tail chunk (k % 32 != 0) loads only lanes < n (maskload, or a zero-padded copy for
 *      16-bit weights) and blends the fma result into those lanes only: an fma(0, 0, acc)
 *      would turn an acc of -0.0 into +0.0.
 *   3. f16 -> f32 with vcvtph2ps (F16C) and bf16 -> f32 with a 16-bit shift: both exact.
 *   4. Q8_0: the 8 block partial sums are one ymm, lane b % 8; eight blocks at a time give
 *      eight exact int32 block sums (hadd tree; integer adds in any order are exact),
 *      converted to f32 (exact, |isum| < 2^24), scaled by dw * dx (one rounded product per
 *      lane) and added with one vfmadd; tree h = 4, 2, 1. The int8 dot is vpmaddubsw of |w|
 *      (unsigned, <= 128) with sign(x, w): exact with no int16 saturation because the
 *      activations come from kern_q8_quantize, so |x| <= 127 (pair sums <= 2 * 128 * 127).
 *      Compiled a second time for AVX-VNNI (matmul_avxvnni.c), the same step is one
 *      vpdpbusd of the same operands (q8_dot_add, vec_avx2_int.h): the same integers.
 *   5. The quantizer computes max |x| with NaN lanes dropped (as the scalar `a > amax`),
 *      d and id by the same scalar divisions, rounds to nearest even with vroundps (as
 *      nearbyintf in the default rounding mode) and clamps so that NaN becomes -127.
 *   6. Tiling (several rows or tokens per register block, row panels of KERN_PANEL_BYTES so a
 *      token tile stays in L1) only reuses loads; every output keeps its own accumulators
 *      and sees k in ascending order, so results do not depend on n_tok, r0, r1 or the
 *      tile shapes. The one- and two-token Q8_0 tiles (a decode step of one or two
 *      sequences: the weights come from memory) prefetch Q_PF_BYTES ahead along each row,
 *      into L2 (_MM_HINT_T1): the hardware prefetcher alone left a decode step at 7 GB/s per
 *      thread (bench/profile.md, round 7), and the same prefetch into L1 (_MM_HINT_T0) ran
 *      a 0.8b decode at 0.57x the L2 one on Zen 4 (round 14; as note 8 found for floats).
 *   7. Q8_0 panels (QP_MIN_TOKS tokens or more, K <= 8192): whole groups of 8 rows are
 *      repacked once per panel so that dword lane i of a ymm holds 4 quants of row i
 *      (an 8 x 8 dword transpose per block) and the 8 scales sit in one f32 vector. One
 *      step broadcasts 4 activation quants of a token to every lane: vpmaddubsw of |w| with
 *      sign(x, w) (note 4's bound), vpmaddwd with ones, added into the token's int32 block
 *      sums: after 8 steps lane i is row i's exact isum, with no horizontal sum. The float
 *      steps are lane-wise and as in note 4: dw * dx rounded once, one vfmadd into the
 *      partial sum b % 8 (eight per token, kept in memory: 16 ymm are too few), the tree
 *      h = 4, 2, 1 at the end. Rows past the last whole group take the per-row tiles.
 *      Long prefills over the Q8_0 panel layout run the same tiles (kern_q8p_panels_avx2,
 *      q8p_avx2.c note 5): their panel blocks come from the layout's 8-row halves with a
 *      load and an xor per vector instead of the transpose.
 *   8. Float weights, one token (decode, tile_f1): F_ROWS1 rows, each with its four ymm of
 *      note 1, the weights streamed once. Each tile prefetches (into L2, _MM_HINT_T1) the
 *      lines the next tile of rows will read at the same k: rows are back to back, so that
 *      is nr * row-bytes further on. A distance in tiles, not bytes, never lands on a row
 *      the tile is reading itself, whatever K is. Measured 2.0-2.3x the hardware prefetcher
 *      alone per CPU second (bench/profile.md, round 13; into L1 with _MM_HINT_T0 it gained
 *      nothing on Zen 4).
 *   9. Float weights, several tokens (prefill, tile_f3): 3 rows x 3 tokens. Twelve outputs
 *      x four ymm do not fit in sixteen registers, so the four partial sums of each output
 *      are parked in memory (an f32 stored and loaded back is the same value) and taken in
 *      one lane group q at a time: per block of F_KBLK values of k, for q = 0..3, the 3 x 3
 *      accumulators of group q run over the block's chunks (ascending), then go back. Every
 *      lane still sees its k in ascending order, and the groups are independent sums, so
 *      this is note 1's order; the block's weights and activations stay in L1 across the
 *      four passes. Six loads per nine FMAs, against sixteen per twelve in a 1 x 3 tile
 *      with all four groups live.
 *  10. Float weights, several tokens, K > F_GROUP_MINK (group_f3): note 9's order breaks
 *      down when a token tile's activations (3 x K x 4 bytes) no longer stay in L1 across
 *      the row tiles of a panel: each 3-row tile then reads them from L2 again, twice the
 *      bytes of its f16 weights (0.8b's ffn_down, K 3584: 68-75 GFLOP/s against 85-90 at
 *      K 1024). So the loop over k blocks moves outside the row tiles: a group of F_GROUP
 *      rows x F_GTOKS tokens keeps all its partial sums parked (24 x 4 x 4 ymm = 12 KiB),
 *      and per block every 3-row tile of the group (then single rows) runs note 9's four
 *      lane-group passes (block_f3) on its own parked sums, the block's activations staying
 *      in L1. Each output's operations are note 9's, in the same order (lane groups
 *      independent, k ascending within each, the tail chunk last, the same tree), so only
 *      the loop order around them changed. At K <= 1024 this order measured a few percent
 *      slower than note 9's (the row tiles' weights are read in shorter runs), so those K
 *      keep note 9's loop. bench/profile.md, round 15.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <string.h>

#include "kernels/kernels_int.h"
#include "kernels/tile_int.h"
#include "kernels/vec_avx2_int.h"

#define INLINE static inline __attribute__((always_inline))
/* Register tiles (rows x tokens per block of accumulators); measured, any shape gives the
 * same bits. Float: 4 ymm accumulators per output; Q8_0: 1 ymm. */
#define F_ROWS 3   /* batched float: 3 x 3 outputs, one lane group at a time (note 9) */
#define F_TOKS 3
#define F_GTOKS 4  /* the same, K > F_GROUP_MINK: 3 x 4 outputs in groups of rows (note 10) */
#define F_MAXT 4
#define F_ROWS1 3  /* single-token float: 3 rows, 12 accumulators */
#define F_MAXR 3
#ifndef F_GROUP
#define F_GROUP 24 /* rows per group of the k-block-major order (note 10; measured) */
#endif
#ifndef F_GROUP_MINK
#define F_GROUP_MINK 1024 /* K above this takes the groups (note 10; measured) */
#endif
#ifndef F_KBLK
#define F_KBLK 512 /* k per block of the batched float tile (note 9; a multiple of 32) */
#endif
#ifndef F_PF_TILES
#define F_PF_TILES 1 /* decode prefetch distance in row tiles (note 8; measured) */
#endif
#ifndef F_PF_HINT
#define F_PF_HINT _MM_HINT_T1
#endif
#define Q_ROWS 2   /* batched Q8_0: 2 x 2 */
#define Q_TOKS 2
#ifndef Q_ROWS1
#define Q_ROWS1 4  /* single-token Q8_0 (measured: 2 -> 4 rows, ~15%) */
#endif
#define Q_MAXR 4
#ifndef QP_TOKS
#define QP_TOKS 4        /* tokens per tile of the Q8_0 panel path (note 7; measured) */
#endif
#define QP_TMAX 6        /* the largest QP_TOKS the tile is written for */
#ifndef QP_MIN_TOKS
#define QP_MIN_TOKS 3    /* fewer tokens: the per-row tiles (packing would not pay) */
#endif
#define QP_NBMAX 256     /* blocks per row the panel path takes (K <= 8192) */
#define QP_PANEL_BLKS 512 /* packed blocks per panel: 144 KiB on the stack (L2) */
#ifndef Q_PF_BYTES
#define Q_PF_BYTES 8192
#endif

/* ---- float weights ------------------------------------------------------------------ */

/* 8 weights of a row starting at k0, as f32. */
INLINE __m256 load_w8(const uint8_t *row, enum kern_wtype wt, int64_t k0)
{
    switch (wt) {
    case KERN_W_F16:
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(row + k0 * 2)));
    case KERN_W_BF16:
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(row + k0 * 2))), 16));
    default:
        return _mm256_loadu_ps((const float *)(row + k0 * 4));
    }
}


/* Lane masks (all ones where lane < n) for the four ymm of a tail chunk of n < 32. */
INLINE void tail_masks(__m256i m[4], int64_t n)
{
    __m256i nv = _mm256_set1_epi32((int)n);
    for (int q = 0; q < 4; q++)
        m[q] = _mm256_cmpgt_epi32(nv, _mm256_setr_epi32(8 * q, 8 * q + 1, 8 * q + 2, 8 * q + 3,
                                                        8 * q + 4, 8 * q + 5, 8 * q + 6, 8 * q + 7));
}

/* The tail chunk (k % 32 != 0, note 2) of outputs acc[i][j][q] for rows row[i], tokens xt +
 * j * k, i < nr, j < nt. */
INLINE void tail_f(__m256 acc[F_MAXR][F_MAXT][4], const uint8_t *const *row, enum kern_wtype wt,
                   const float *xt, int64_t k, int nr, int nt)
{
    int64_t kf = k & ~(int64_t)(KERN_LANES - 1), n = k - kf;
    __m256i m[4];
    tail_masks(m, n);
    __m256 wv[F_MAXR][4];
#pragma GCC unroll 8
    for (int i = 0; i < nr; i++) {
        if (wt == KERN_W_F32) {
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) wv[i][q] = _mm256_maskload_ps((const float *)row[i] + kf + 8 * q, m[q]);
        } else {
            uint16_t pad[KERN_LANES] = {0};
            memcpy(pad, row[i] + kf * 2, (size_t)n * 2);
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) wv[i][q] = load_w8((const uint8_t *)pad, wt, 8 * q);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < nt; j++)
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) {
            __m256 xv = _mm256_maskload_ps(xt + j * k + kf + 8 * q, m[q]);
#pragma GCC unroll 8
            for (int i = 0; i < nr; i++)
                acc[i][j][q] = _mm256_blendv_ps(acc[i][j][q], _mm256_fmadd_ps(wv[i][q], xv, acc[i][j][q]),
                                                _mm256_castsi256_ps(m[q]));
        }
}

/* One token (decode; note 8): outputs y[r .. r+nr-1], four accumulators each, the weights
 * streamed once with a prefetch of the next tile's lines into L2. */
INLINE void tile_f1(float *y, const uint8_t *w, size_t rb, enum kern_wtype wt, const float *xt,
                    int64_t k, int64_t r, int nr)
{
    __m256 acc[F_MAXR][F_MAXT][4];
    const uint8_t *row[F_MAXR];
    const int64_t es = wt == KERN_W_F32 ? 4 : 2; /* bytes per weight */
    const size_t pf = (size_t)F_PF_TILES * (size_t)nr * rb; /* the same place F_PF_TILES tiles on */
#pragma GCC unroll 8
    for (int i = 0; i < nr; i++) {
        row[i] = w + (size_t)(r + i) * rb;
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) acc[i][0][q] = _mm256_setzero_ps();
    }
    int64_t kf = k & ~(int64_t)(KERN_LANES - 1);
    for (int64_t k0 = 0; k0 < kf; k0 += KERN_LANES) {
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++)
#pragma GCC unroll 2
            for (int l = 0; l < (int)es / 2; l++)
                _mm_prefetch((const char *)row[i] + pf + k0 * es + 64 * l, F_PF_HINT);
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) {
            __m256 xv = _mm256_loadu_ps(xt + k0 + 8 * q);
#pragma GCC unroll 8
            for (int i = 0; i < nr; i++)
                acc[i][0][q] = _mm256_fmadd_ps(load_w8(row[i], wt, k0 + 8 * q), xv, acc[i][0][q]);
        }
    }
    if (kf < k) tail_f(acc, row, wt, xt, k, nr, 1);
#pragma GCC unroll 8
    for (int i = 0; i < nr; i++) y[r + i] = v8_tree32(acc[i][0][0], acc[i][0][1], acc[i][0][2], acc[i][0][3]);
}

/* Several tokens (notes 9, 10): one block [b0, b1) of k (whole chunks) for the outputs of
 * rows row[i], i < nr, and tokens xt + j * k, j < nt, whose partial sums live in
 * park[i][j][q]: one lane group q at a time is taken into nr x nt registers, runs over the
 * block's chunks, and goes back. */
INLINE void block_f3(__m256 park[][F_MAXT][4], const uint8_t *const *row, enum kern_wtype wt,
                     const float *xt, int64_t k, int64_t b0, int64_t b1, int nr, int nt)
{
    for (int q = 0; q < 4; q++) {
        __m256 acc[F_MAXR][F_MAXT];
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++)
#pragma GCC unroll 8
            for (int j = 0; j < nt; j++) acc[i][j] = park[i][j][q];
        for (int64_t k0 = b0 + 8 * q; k0 < b1; k0 += KERN_LANES) {
            __m256 wv[F_MAXR];
#pragma GCC unroll 8
            for (int i = 0; i < nr; i++) wv[i] = load_w8(row[i], wt, k0);
#pragma GCC unroll 8
            for (int j = 0; j < nt; j++) {
                __m256 xv = _mm256_loadu_ps(xt + j * k + k0);
#pragma GCC unroll 8
                for (int i = 0; i < nr; i++) acc[i][j] = _mm256_fmadd_ps(wv[i], xv, acc[i][j]);
            }
        }
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++)
#pragma GCC unroll 8
            for (int j = 0; j < nt; j++) park[i][j][q] = acc[i][j];
    }
}

/* Several tokens (prefill; note 9): outputs y[t + j][r + i], i < nr, j < nt (nr, nt <= 3,
 * constants after inlining). The 4 x nr x nt partial sums live in `park`; per block of
 * F_KBLK values of k, one lane group q at a time is taken into nr x nt registers, runs over
 * the block's chunks, and goes back. */
INLINE void tile_f3(float *y, int64_t y_ld, const uint8_t *w, size_t rb, enum kern_wtype wt,
                    const float *x, int64_t k, int64_t r, int64_t t, int nr, int nt)
{
    __m256 park[F_MAXR][F_MAXT][4];
    const uint8_t *row[F_MAXR];
#pragma GCC unroll 8
    for (int i = 0; i < nr; i++) {
        row[i] = w + (size_t)(r + i) * rb;
#pragma GCC unroll 8
        for (int j = 0; j < nt; j++)
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) park[i][j][q] = _mm256_setzero_ps();
    }
    const float *xt = x + t * k;
    int64_t kf = k & ~(int64_t)(KERN_LANES - 1);
    for (int64_t b0 = 0; b0 < kf; b0 += F_KBLK)
        block_f3(park, row, wt, xt, k, b0, HS_MIN(b0 + F_KBLK, kf), nr, nt);
    if (kf < k) tail_f(park, row, wt, xt, k, nr, nt);
#pragma GCC unroll 8
    for (int j = 0; j < nt; j++)
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++)
            y[(t + j) * y_ld + r + i] = v8_tree32(park[i][j][0], park[i][j][1], park[i][j][2], park[i][j][3]);
}

/* Rows [g0, g1) (at most F_GROUP) x tokens t .. t+nt-1 (note 10): per block of F_KBLK values
 * of k, every row tile of the group (F_ROWS rows, then single rows) runs block_f3 on its
 * parked sums, so the block's activations stay in L1 across the group whatever K is; then
 * the tails, the trees and the stores, as tile_f3. */
INLINE void group_f3(float *y, int64_t y_ld, const uint8_t *w, size_t rb, enum kern_wtype wt,
                     const float *x, int64_t k, int64_t g0, int64_t g1, int64_t t, int nt)
{
    __m256 park[F_GROUP][F_MAXT][4];
    const float *xt = x + t * k;
    const int64_t n = g1 - g0, nf = n / F_ROWS * F_ROWS;
    for (int64_t i = 0; i < n; i++)
#pragma GCC unroll 8
        for (int j = 0; j < nt; j++)
#pragma GCC unroll 4
            for (int q = 0; q < 4; q++) park[i][j][q] = _mm256_setzero_ps();
    const int64_t kf = k & ~(int64_t)(KERN_LANES - 1);
    for (int64_t b0 = 0; b0 < kf; b0 += F_KBLK) {
        const int64_t b1 = HS_MIN(b0 + F_KBLK, kf);
        for (int64_t i = 0; i < nf; i += F_ROWS) {
            const uint8_t *row[F_MAXR];
#pragma GCC unroll 8
            for (int l = 0; l < F_ROWS; l++) row[l] = w + (size_t)(g0 + i + l) * rb;
            block_f3(park + i, row, wt, xt, k, b0, b1, F_ROWS, nt);
        }
        for (int64_t i = nf; i < n; i++) {
            const uint8_t *row[F_MAXR] = { w + (size_t)(g0 + i) * rb };
            block_f3(park + i, row, wt, xt, k, b0, b1, 1, nt);
        }
    }
    if (kf < k) {
        for (int64_t i = 0; i < nf; i += F_ROWS) {
            const uint8_t *row[F_MAXR];
#pragma GCC unroll 8
            for (int l = 0; l < F_ROWS; l++) row[l] = w + (size_t)(g0 + i + l) * rb;
            tail_f(park + i, row, wt, xt, k, F_ROWS, nt);
        }
        for (int64_t i = nf; i < n; i++) {
            const uint8_t *row[F_MAXR] = { w + (size_t)(g0 + i) * rb };
            tail_f(park + i, row, wt, xt, k, 1, nt);
        }
    }
    for (int64_t i = 0; i < n; i++)
#pragma GCC unroll 8
        for (int j = 0; j < nt; j++)
            y[(t + j) * y_ld + g0 + i] = v8_tree32(park[i][j][0], park[i][j][1], park[i][j][2], park[i][j][3]);
}

/* One weight type, with wt a constant inside so load_w8's switch folds away. */
INLINE void matmul_float_t(float *y, int64_t y_ld, const uint8_t *w, enum kern_wtype wt,
                           const float *x, int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    size_t rb = kern_row_bytes(wt, k);
    int64_t r = r0;
#define TILE1(r, t, nr, nt) tile_f1(y, w, rb, wt, x, k, r, nr)
    if (n_tok == 1) {
        KERN_TILES_ONE_TOKEN(r, r0, r1, F_ROWS1, TILE1);
        return;
    }
#undef TILE1
#define TILE(r, t, nr, nt) tile_f3(y, y_ld, w, rb, wt, x, k, r, t, nr, nt)
    if (k <= F_GROUP_MINK) {
        KERN_TILES_PANELS(r, r0, r1, n_tok, rb, F_ROWS, F_TOKS, TILE);
        return;
    }
#undef TILE
    /* note 10: panels as tile_int.h's (invariant 3), token tiles of F_GTOKS (then one by
     * one), each over the panel's groups of F_GROUP rows */
    const int64_t panel = HS_MAX((int64_t)(KERN_PANEL_BYTES / rb) / F_GROUP * F_GROUP, (int64_t)F_GROUP);
    for (int64_t p0 = r0; p0 < r1; p0 += panel) {
        int64_t p1 = HS_MIN(p0 + panel, r1), t = 0;
        for (; t + F_GTOKS <= n_tok; t += F_GTOKS)
            for (int64_t g0 = p0; g0 < p1; g0 += F_GROUP)
                group_f3(y, y_ld, w, rb, wt, x, k, g0, HS_MIN(g0 + F_GROUP, p1), t, F_GTOKS);
        for (; t < n_tok; t++)
            for (int64_t g0 = p0; g0 < p1; g0 += F_GROUP)
                group_f3(y, y_ld, w, rb, wt, x, k, g0, HS_MIN(g0 + F_GROUP, p1), t, 1);
    }
}

static void matmul_f32(float *y, int64_t y_ld, const uint8_t *w, const float *x, int64_t n_tok,
                       int64_t k, int64_t r0, int64_t r1)
{
    matmul_float_t(y, y_ld, w, KERN_W_F32, x, n_tok, k, r0, r1);
}

static void matmul_f16(float *y, int64_t y_ld, const uint8_t *w, const float *x, int64_t n_tok,
                       int64_t k, int64_t r0, int64_t r1)
{
    matmul_float_t(y, y_ld, w, KERN_W_F16, x, n_tok, k, r0, r1);
}

static void matmul_bf16(float *y, int64_t y_ld, const uint8_t *w, const float *x, int64_t n_tok,
                        int64_t k, int64_t r0, int64_t r1)
{
    matmul_float_t(y, y_ld, w, KERN_W_BF16, x, n_tok, k, r0, r1);
}

#ifndef KERN_AVXVNNI /* the AVX-VNNI table uses these two as they are (vec_avx2_int.h 6) */
float kern_dot_avx2(const float *a, const float *b, int64_t n)
{
    __m256 acc[4];
    for (int q = 0; q < 4; q++) acc[q] = _mm256_setzero_ps();
    int64_t kf = n & ~(int64_t)(KERN_LANES - 1);
    for (int64_t k0 = 0; k0 < kf; k0 += KERN_LANES)
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++)
            acc[q] = _mm256_fmadd_ps(_mm256_loadu_ps(a + k0 + 8 * q), _mm256_loadu_ps(b + k0 + 8 * q), acc[q]);
    if (kf < n) {
        __m256i m[4];
        tail_masks(m, n - kf);
#pragma GCC unroll 4
        for (int q = 0; q < 4; q++) {
            __m256 f = _mm256_fmadd_ps(_mm256_maskload_ps(a + kf + 8 * q, m[q]),
                                       _mm256_maskload_ps(b + kf + 8 * q, m[q]), acc[q]);
            acc[q] = _mm256_blendv_ps(acc[q], f, _mm256_castsi256_ps(m[q]));
        }
    }
    return v8_tree32(acc[0], acc[1], acc[2], acc[3]);
}
#endif

/* ---- Q8_0 ----------------------------------------------------------------------------- */

#ifndef KERN_AVXVNNI
void kern_q8_quantize_avx2(struct kern_q8_block *xq, const float *x, int64_t n_tok, int64_t k)
{
    int64_t nb = k / KERN_Q8_BLOCK;
    const __m256 zero = _mm256_setzero_ps(), absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
    const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t t = 0; t < n_tok; t++) {
        for (int64_t b = 0; b < nb; b++) {
            const float *v = x + t * k + b * KERN_Q8_BLOCK;
            struct kern_q8_block *o = xq + t * nb + b;
            __m256 xv[4], a = zero;
            for (int q = 0; q < 4; q++) {
                xv[q] = _mm256_loadu_ps(v + 8 * q);
                /* max(|x|, a) returns its second operand for a NaN lane: NaNs drop out */
                a = _mm256_max_ps(_mm256_and_ps(xv[q], absm), a);
            }
            __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
            __m128 m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
            float amax = _mm_cvtss_f32(_mm_max_ss(m2, _mm_movehdup_ps(m2)));
            float d = amax / 127.0f;
            float id = d > 0.0f ? 1.0f / d : 0.0f;
            o->d = kern_q8_stored_scale(d);
            __m256 s = _mm256_set1_ps(id);
            __m256i qi[4];
            for (int q = 0; q < 4; q++) {
                __m256 r = _mm256_round_ps(_mm256_mul_ps(xv[q], s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                /* max(r, -127) maps NaN to -127, as the scalar's !(r >= -127) */
                qi[q] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi));
            }
            /* values are in [-127, 127], so the saturating packs are exact; the packs
             * interleave 128-bit lanes, the permute puts the dwords back in order */
            __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(qi[0], qi[1]), _mm256_packs_epi32(qi[2], qi[3]));
            _mm256_storeu_si256((__m256i *)o->q, _mm256_permutevar8x32_epi32(p, perm));
        }
    }
}
#endif

/* The int8 dot of one block as 8 int32 partials. */
INLINE __m256i dot1(const uint8_t *wq, const int8_t *xq)
{
    __m256i wv = _mm256_loadu_si256((const __m256i *)wq);
    __m256i xv = _mm256_loadu_si256((const __m256i *)xq);
    return q8_dot_add(_mm256_setzero_si256(), _mm256_abs_epi8(wv), _mm256_sign_epi8(xv, wv));
}

/* Eight block sums (lane b) from the partials of blocks 0..7. */
INLINE __m256i reduce8(const __m256i v[8])
{
    __m256i h01 = _mm256_hadd_epi32(v[0], v[1]), h23 = _mm256_hadd_epi32(v[2], v[3]);
    __m256i h45 = _mm256_hadd_epi32(v[4], v[5]), h67 = _mm256_hadd_epi32(v[6], v[7]);
    /* per 128-bit half: [b0, b1, b2, b3] (low half: partials 0..3, high: 4..7) */
    __m256i q0 = _mm256_hadd_epi32(h01, h23), q1 = _mm256_hadd_epi32(h45, h67);
    return _mm256_add_epi32(_mm256_permute2x128_si256(q0, q1, 0x20), _mm256_permute2x128_si256(q0, q1, 0x31));
}

/* Block sums of 8 blocks (n < 8: blocks beyond n give 0 and read nothing). */
INLINE __m256i isum8(const uint8_t *row, const struct kern_q8_block *xb, int64_t b, int n)
{
    const uint8_t *q = row + b * KERN_Q8_BLOCK_BYTES + 2;
    __m256i v[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        v[i] = i < n ? dot1(q + i * KERN_Q8_BLOCK_BYTES, xb[i].q) : _mm256_setzero_si256();
    return reduce8(v);
}

/* The 8-lane tree h = 4, 2, 1. */
INLINE float tree8(__m256 a)
{
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

/* Scales of blocks b .. b+n-1 (n <= 8) of a weight row as f32, 0 beyond n. Eight 16-bit
 * loads into one xmm, not vpgatherdd: a gather costs ~20 micro-ops on Zen 1-3 (the CPUs
 * this variant is for), and the scale loads were the largest cost of the Q8_0 path there
 * (kernel 1.2x prefill, 1.5x decode alone; bench/profile.md). */
INLINE __m256 load_dw8(const uint8_t *row, int64_t b, int n)
{
    const uint8_t *p = row + b * KERN_Q8_BLOCK_BYTES;
    if (n == 8) {
        __m128i h = _mm_cvtsi32_si128(hs_rd_u16(p));
        h = _mm_insert_epi16(h, hs_rd_u16(p + 1 * KERN_Q8_BLOCK_BYTES), 1);
        h = _mm_insert_epi16(h, hs_rd_u16(p + 2 * KERN_Q8_BLOCK_BYTES), 2);
        h = _mm_insert_epi16(h, hs_rd_u16(p + 3 * KERN_Q8_BLOCK_BYTES), 3);
        h = _mm_insert_epi16(h, hs_rd_u16(p + 4 * KERN_Q8_BLOCK_BYTES), 4);
        h = _mm_insert_epi16(h, hs_rd_u16(p + 5 * KERN_Q8_BLOCK_BYTES), 5);
        h = _mm_insert_epi16(h, hs_rd_u16(p + 6 * KERN_Q8_BLOCK_BYTES), 6);
        h = _mm_insert_epi16(h, hs_rd_u16(p + 7 * KERN_Q8_BLOCK_BYTES), 7);
        return _mm256_cvtph_ps(h);
    }
    uint16_t h[8] = {0};
    for (int i = 0; i < n; i++) h[i] = hs_rd_u16(p + i * KERN_Q8_BLOCK_BYTES);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
}

/* Activation scales of blocks xb[0 .. n-1], 0 beyond n (scalar loads, for the reason above). */
INLINE __m256 load_dx8(const struct kern_q8_block *xb, int n)
{
    if (n == 8) return _mm256_setr_ps(xb[0].d, xb[1].d, xb[2].d, xb[3].d, xb[4].d, xb[5].d, xb[6].d, xb[7].d);
    float d[8] = {0};
    for (int i = 0; i < n; i++) d[i] = xb[i].d;
    return _mm256_loadu_ps(d);
}

INLINE void tile_q(float *y, int64_t y_ld, const uint8_t *w, size_t rb,
                   const struct kern_q8_block *xq, int64_t nb, int64_t r, int64_t t, int nr, int nt)
{
    __m256 acc[Q_MAXR][Q_TOKS];
    const uint8_t *row[Q_MAXR];
#pragma GCC unroll 8
    for (int i = 0; i < nr; i++) {
        row[i] = w + (size_t)(r + i) * rb;
#pragma GCC unroll 8
        for (int j = 0; j < nt; j++) acc[i][j] = _mm256_setzero_ps();
    }
    int64_t bf = nb & ~(int64_t)(KERN_Q8_LANES - 1);
    for (int64_t b = 0; b < bf; b += KERN_Q8_LANES) {
        if (nt <= 2)
#pragma GCC unroll 8
            for (int i = 0; i < nr; i++)
#pragma GCC unroll 5
                for (int l = 0; l < 5; l++)
                    _mm_prefetch((const char *)row[i] + b * KERN_Q8_BLOCK_BYTES + Q_PF_BYTES + 64 * l, _MM_HINT_T1);
        __m256 dx[Q_TOKS];
#pragma GCC unroll 8
        for (int j = 0; j < nt; j++) dx[j] = load_dx8(xq + (t + j) * nb + b, 8);
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++) {
            __m256 dw = load_dw8(row[i], b, 8);
#pragma GCC unroll 8
            for (int j = 0; j < nt; j++) {
                __m256 f = _mm256_cvtepi32_ps(isum8(row[i], xq + (t + j) * nb + b, b, 8));
                acc[i][j] = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx[j]), f, acc[i][j]);
            }
        }
    }
    if (bf < nb) {
        int n = (int)(nb - bf);
        __m256 m = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++) {
            __m256 dw = load_dw8(row[i], bf, n);
#pragma GCC unroll 8
            for (int j = 0; j < nt; j++) {
                __m256 dx = load_dx8(xq + (t + j) * nb + bf, n);
                __m256 f = _mm256_cvtepi32_ps(isum8(row[i], xq + (t + j) * nb + bf, bf, n));
                acc[i][j] = _mm256_blendv_ps(acc[i][j], _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), f, acc[i][j]), m);
            }
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < nt; j++)
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++) y[(t + j) * y_ld + r + i] = tree8(acc[i][j]);
}

/* Rows [r0, r1) by the per-row tiles above (note 4). */
static void q8_rows(float *y, int64_t y_ld, const uint8_t *w, const struct kern_q8_block *xq,
                    int64_t n_tok, int64_t nb, int64_t r0, int64_t r1)
{
    size_t rb = (size_t)nb * KERN_Q8_BLOCK_BYTES;
    int64_t r = r0;
#define TILE(r, t, nr, nt) tile_q(y, y_ld, w, rb, xq, nb, r, t, nr, nt)
    if (n_tok == 1) {
        KERN_TILES_ONE_TOKEN(r, r0, r1, Q_ROWS1, TILE);
        return;
    }
    KERN_TILES_PANELS(r, r0, r1, n_tok, rb, Q_ROWS, Q_TOKS, TILE);
#undef TILE
}

/* ---- Q8_0 panels (several tokens; note 7) ----------------------------------------------- */

/* One block of an 8-row group: lane i of every vector belongs to row i. */
struct q8p_blk {
    __m256i wt[8]; /* wt[s] lane i = quants 4s .. 4s+3 of row i's block */
    __m256 dw;     /* lane i = row i's block scale */
};

/* Repacks rows r .. r+7, blocks 0 .. nb-1, into dst[0 .. nb): an 8 x 8 dword transpose of
 * the quants per block, and the eight scales. */
static void q8p_pack_group(struct q8p_blk *dst, const uint8_t *w, size_t rb, int64_t r, int64_t nb)
{
    const uint8_t *base = w + (size_t)r * rb;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = base + b * KERN_Q8_BLOCK_BYTES;
        __m256i z[8], t[8], u[8];
#pragma GCC unroll 8
        for (int i = 0; i < 8; i++) z[i] = _mm256_loadu_si256((const __m256i *)(blk + (size_t)i * rb + 2));
        /* t[2m] = dwords (0,1 | 4,5) of rows 2m, 2m+1 interleaved; t[2m+1] = (2,3 | 6,7) */
#pragma GCC unroll 4
        for (int m = 0; m < 4; m++) {
            t[2 * m] = _mm256_unpacklo_epi32(z[2 * m], z[2 * m + 1]);
            t[2 * m + 1] = _mm256_unpackhi_epi32(z[2 * m], z[2 * m + 1]);
        }
        /* u[4h + d] = dword d (| d + 4) of rows 4h .. 4h+3 */
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            u[4 * h + 0] = _mm256_unpacklo_epi64(t[4 * h + 0], t[4 * h + 2]);
            u[4 * h + 1] = _mm256_unpackhi_epi64(t[4 * h + 0], t[4 * h + 2]);
            u[4 * h + 2] = _mm256_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
            u[4 * h + 3] = _mm256_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
        }
#pragma GCC unroll 4
        for (int d = 0; d < 4; d++) {
            _mm256_store_si256(&dst[b].wt[d], _mm256_permute2x128_si256(u[d], u[4 + d], 0x20));
            _mm256_store_si256(&dst[b].wt[4 + d], _mm256_permute2x128_si256(u[d], u[4 + d], 0x31));
        }
        __m128i h = _mm_cvtsi32_si128(hs_rd_u16(blk));
        h = _mm_insert_epi16(h, hs_rd_u16(blk + 1 * rb), 1);
        h = _mm_insert_epi16(h, hs_rd_u16(blk + 2 * rb), 2);
        h = _mm_insert_epi16(h, hs_rd_u16(blk + 3 * rb), 3);
        h = _mm_insert_epi16(h, hs_rd_u16(blk + 4 * rb), 4);
        h = _mm_insert_epi16(h, hs_rd_u16(blk + 5 * rb), 5);
        h = _mm_insert_epi16(h, hs_rd_u16(blk + 6 * rb), 6);
        h = _mm_insert_epi16(h, hs_rd_u16(blk + 7 * rb), 7);
        _mm256_store_ps((float *)&dst[b].dw, _mm256_cvtph_ps(h));
    }
}

/* Tokens t0 .. t0+NT-1 against one packed 8-row group pk[0 .. nb) (rows r .. r+7). Per token
 * the eight partial sums acc[b % 8] of all 8 rows (lane i = row i) live in memory: sixteen
 * ymm registers hold only the tile's integer sums. */
INLINE void q8p_tile(float *y, int64_t y_ld, const struct q8p_blk *pk, int64_t nb, int64_t r,
                     const struct kern_q8_block *xq, int64_t t0, int NT)
{
    __m256 acc[QP_TMAX][KERN_Q8_LANES];
    const struct kern_q8_block *xt[QP_TMAX];
#pragma GCC unroll 8
    for (int j = 0; j < NT; j++) {
        xt[j] = xq + (t0 + j) * nb;
#pragma GCC unroll 8
        for (int l = 0; l < KERN_Q8_LANES; l++) acc[j][l] = _mm256_setzero_ps();
    }
    for (int64_t b = 0; b < nb; b++) {
        __m256i is[QP_TMAX];
#pragma GCC unroll 8
        for (int j = 0; j < NT; j++) is[j] = _mm256_setzero_si256();
        /* unrolled by 2, not 8: fully unrolled, GCC re-associates the integer sums into a
         * tree and spills every vpmaddwd result to the stack; 1.05-1.1x, bench/profile.md
         * round 10) */
#pragma GCC unroll 2
        for (int s = 0; s < 8; s++) {
            __m256i wv = _mm256_load_si256(&pk[b].wt[s]);
            __m256i wa = _mm256_abs_epi8(wv);
#pragma GCC unroll 8
            for (int j = 0; j < NT; j++) {
                int32_t four;
                memcpy(&four, xt[j][b].q + 4 * s, 4);
                is[j] = q8_dot_add(is[j], wa, _mm256_sign_epi8(_mm256_set1_epi32(four), wv));
            }
        }
        __m256 dw = _mm256_load_ps((const float *)&pk[b].dw);
#pragma GCC unroll 8
        for (int j = 0; j < NT; j++) {
            __m256 sc = _mm256_mul_ps(dw, _mm256_set1_ps(xt[j][b].d));
            acc[j][b % KERN_Q8_LANES] = _mm256_fmadd_ps(sc, _mm256_cvtepi32_ps(is[j]), acc[j][b % KERN_Q8_LANES]);
        }
    }
    /* the tree h = 4, 2, 1 lane-wise (lane i = row i) */
#pragma GCC unroll 8
    for (int j = 0; j < NT; j++) {
        __m256 *a = acc[j];
        for (int h = 4; h >= 1; h /= 2)
            for (int l = 0; l < h; l++) a[l] = _mm256_add_ps(a[l], a[l + h]);
        _mm256_storeu_ps(y + (t0 + j) * y_ld + r, a[0]);
    }
}

static void q8p_tiles(float *y, int64_t y_ld, const struct q8p_blk *pk, int64_t nb, int64_t r,
                      const struct kern_q8_block *xq, int64_t t0, int nt)
{
    switch (nt) {
    case 6: q8p_tile(y, y_ld, pk, nb, r, xq, t0, 6); break;
    case 5: q8p_tile(y, y_ld, pk, nb, r, xq, t0, 5); break;
    case 4: q8p_tile(y, y_ld, pk, nb, r, xq, t0, 4); break;
    case 3: q8p_tile(y, y_ld, pk, nb, r, xq, t0, 3); break;
    case 2: q8p_tile(y, y_ld, pk, nb, r, xq, t0, 2); break;
    default: q8p_tile(y, y_ld, pk, nb, r, xq, t0, 1); break;
    }
}

/* Rows [r0, r0 + 8 * (whole groups)) in panels of QP_PANEL_BLKS packed blocks, each packed
 * once; every token tile then runs over all the panel's groups (its activations stay in L1).
 * The rows past the last whole group take q8_rows. */
static void q8p_rows(float *y, int64_t y_ld, const uint8_t *w, const struct kern_q8_block *xq,
                     int64_t n_tok, int64_t nb, int64_t r0, int64_t r1)
{
    struct q8p_blk pk[QP_PANEL_BLKS];
    const int64_t gmax = QP_PANEL_BLKS / nb; /* >= 1: nb <= QP_NBMAX */
    const size_t rb = (size_t)nb * KERN_Q8_BLOCK_BYTES;
    const int64_t r1g = r0 + (r1 - r0) / 8 * 8;
    for (int64_t p0 = r0; p0 < r1g; p0 += gmax * 8) {
        int64_t groups = HS_MIN(gmax, (r1g - p0) / 8);
        for (int64_t g = 0; g < groups; g++) q8p_pack_group(pk + g * nb, w, rb, p0 + 8 * g, nb);
        for (int64_t t = 0; t < n_tok; t += QP_TOKS) {
            int nt = (int)HS_MIN((int64_t)QP_TOKS, n_tok - t);
            for (int64_t g = 0; g < groups; g++) q8p_tiles(y, y_ld, pk + g * nb, nb, p0 + 8 * g, xq, t, nt);
        }
    }
    if (r1g < r1) q8_rows(y, y_ld, w, xq, n_tok, nb, r1g, r1);
}

/* Half hv (rows 8 hv .. 8 hv + 7) of the Q8_0 panel layout wp (q8p.c), blocks 0 .. nb-1, as
 * panel blocks: each layout vector's half is already row-per-lane, so a load and the xor
 * that undoes the layout's offset per vector, blocks taken in b order from their slots. */
static void q8p_load_half(struct q8p_blk *dst, const uint8_t *wp, size_t gb, int64_t hv, int64_t nb)
{
    const uint8_t *gp = wp + (size_t)(hv / 2) * gb;
    const size_t h = (size_t)(hv & 1);
    const __m256i off = _mm256_set1_epi8((char)0x80);
    for (int64_t b = 0; b < nb; b++) {
        int64_t sl = kern_q8p_slot(b, nb);
        const uint8_t *q = gp + kern_q8p_quants_at(sl) + 32 * h;
#pragma GCC unroll 8
        for (int s = 0; s < 8; s++)
            _mm256_store_si256(&dst[b].wt[s], _mm256_xor_si256(_mm256_load_si256((const __m256i *)(const void *)(q + 64 * s)), off));
        __m256 dw = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(const void *)(gp + kern_q8p_scales_at(sl) + 16 * h)));
        _mm256_store_ps((float *)&dst[b].dw, dw);
    }
}

bool KERN_AVX2_NAME(kern_q8p_panels)(float *y, int64_t y_ld, const void *wp, const struct kern_q8_block *xq,
                                     int64_t n_tok, int64_t k, int64_t h0, int64_t h1)
{
    const int64_t nb = k / KERN_Q8_BLOCK;
    if (nb > QP_NBMAX || n_tok < 1) return false;
    struct q8p_blk pk[QP_PANEL_BLKS];
    const int64_t gmax = QP_PANEL_BLKS / nb;
    const size_t gb = kern_q8p_group_bytes(k);
    for (int64_t p0 = h0; p0 < h1; p0 += gmax) {
        int64_t halves = HS_MIN(gmax, h1 - p0);
        for (int64_t g = 0; g < halves; g++) q8p_load_half(pk + g * nb, wp, gb, p0 + g, nb);
        for (int64_t t = 0; t < n_tok; t += QP_TOKS) {
            int nt = (int)HS_MIN((int64_t)QP_TOKS, n_tok - t);
            for (int64_t g = 0; g < halves; g++) q8p_tiles(y, y_ld, pk + g * nb, nb, 8 * (p0 + g), xq, t, nt);
        }
    }
    return true;
}

static void matmul_q8_0(float *y, int64_t y_ld, const uint8_t *w, const struct kern_q8_block *xq,
                        int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    int64_t nb = k / KERN_Q8_BLOCK;
    if (n_tok >= QP_MIN_TOKS && nb <= QP_NBMAX && r1 - r0 >= 8) q8p_rows(y, y_ld, w, xq, n_tok, nb, r0, r1);
    else q8_rows(y, y_ld, w, xq, n_tok, nb, r0, r1);
}

void KERN_AVX2_NAME(kern_matmul)(float *y, int64_t y_ld, const void *w, enum kern_wtype wt, const float *x,
                                 const struct kern_q8_block *xq, int64_t n_tok, int64_t k, int64_t r0,
                                 int64_t r1)
{
    switch (wt) {
    case KERN_W_F32: matmul_f32(y, y_ld, w, x, n_tok, k, r0, r1); break;
    case KERN_W_F16: matmul_f16(y, y_ld, w, x, n_tok, k, r0, r1); break;
    case KERN_W_BF16: matmul_bf16(y, y_ld, w, x, n_tok, k, r0, r1); break;
    case KERN_W_Q8_0: matmul_q8_0(y, y_ld, w, xq, n_tok, k, r0, r1); break;
    }
}

#else
typedef int kern_matmul_avx2_unused; /* not x86: the variant does not exist */
#endif
