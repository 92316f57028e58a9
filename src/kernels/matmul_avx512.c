/*
 * matmul_avx512.c — AVX-512 (F, BW, VL) variant of the matmul, the Q8_0 activation quantizer
 * and the 32-lane dot product. Bit-identical to the scalar reference in matmul.c; selected
 * through kern_ops_for("avx512") (dispatch.c). Compiled with the Makefile's AVX-512 flags.
 *
 * How the scalar order maps onto registers (kernels.h, "Matmul accumulation order"):
 *   1. Float weights: the 32 partial sums of one output are two zmm, lanes k%32 = 0..15 and
 *      16..31; each chunk of 32 k is one _mm512_fmadd_ps per zmm (vfmadd rounds once, as
 *      fmaf). The halving tree is zmm0 + zmm1 (h = 16), then low + high 256 bits (h = 8),
 *      128 bits (h = 4), 64 bits (h = 2), lane 0 + lane 1 (h = 1): the same pairs as scalar.
 *   2. A tail chunk (k % 32 != 0) loads with masks and updates only lanes < n with a masked
 *      fma: an unmasked fma(0, 0, acc) would turn an acc of -0.0 into +0.0.
 *   3. f16 -> f32 with vcvtph2ps and bf16 -> f32 with a 16-bit shift: both exact, and a f16
 *      NaN comes out quiet as hs_f16_to_f32 makes it.
 *   4. Q8_0: the 8 block partial sums are one ymm, lane b % 8; eight blocks at a time give
 *      eight exact int32 block sums (any order of integer adds is exact), converted to f32
 *      (exact, |isum| < 2^24), scaled by dw * dx (one rounded product per lane) and added
 *      with one vfmadd; tree h = 4, 2, 1 as above. The int8 dot is vpmaddubsw of |w|
 *      (unsigned, <= 128) with sign(x, w): exact with no int16 saturation because the
 *      activations come from kern_q8_quantize, so |x| <= 127 (pair sums <= 2 * 128 * 127).
 *      It runs on 256-bit vectors (one 32-byte block each, AVX-512VL's 32 registers): the
 *      blocks sit 34 / 36 bytes apart, and pairing two per zmm cost more shuffles than it
 *      saved (measured) — this is the path for K > V_KMAX; note 7 is the usual one.
 *   5. The quantizer computes max |x| with NaN lanes dropped (as the scalar `a > amax`),
 *      d and id by the same scalar divisions, rounds with roundscale to nearest even (as
 *      nearbyintf in the default rounding mode) and clamps so that NaN becomes -127.
 *   6. Tiling (several rows and tokens per register block, row panels of KERN_PANEL_BYTES so a
 *      token tile stays in L1) only reuses loads; every output keeps its own accumulators
 *      and sees k in ascending order, so results do not depend on n_tok, r0, r1 or the
 *      tile shapes.
 *   7. Q8_0 with AVX512-VNNI (the variant requires it; every AVX512-BF16 CPU has it): the
 *      block sums come from vpdpbusd (unsigned x signed bytes, 4 products per int32 lane).
 *      One operand is offset to unsigned by xor 0x80 (q + 128) and the offset's share,
 *      128 * sum of the other operand's quants, is subtracted: all int32, exact, so the
 *      float steps (dw * dx rounded once, one fma per block into lane b % 8, the tree)
 *      are note 4's and the bits are the scalar's.
 *      - One token (decode): weights are used in place; two blocks per zmm (two 32-byte
 *        loads), the token's quants copied contiguous once per call; 16 blocks' partial
 *        sums are reduced to one zmm of block sums by unpack/shuffle adds (sums16).
 *      - Several tokens (prefill): a panel of 16-row groups is repacked once per call
 *        into a stack buffer (V_PANEL_BLKS blocks): per group and block, 8 zmm whose lane
 *        i holds 4 consecutive quants of row i, the 16 row scales and 128 * sum(w) per
 *        row. A tile of 2 groups x 6 tokens then runs 12 independent vpdpbusd chains
 *        with the token's 4 quants (xor 0x80) broadcast: no horizontal sums at all, and
 *        the 8 partial sums of a row sit in lane i of 8 zmm, so the tree is lane-wise.
 *      Rows past the last full group of 16, and blocks past the last full group of 16
 *      in the decode path, take note 4's code on the same accumulators.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <string.h>

#include "kernels/tile_int.h"
#include "kernels/vec_avx512_int.h"
#include "kernels/xtype_x86_int.h"

#define INLINE static inline __attribute__((always_inline))
/* Register tiles (rows x tokens per block of accumulators); measured, any shape gives the
 * same bits. Float: 2 zmm accumulators per output; Q8_0: 1 ymm. */
#define F_ROWS 2   /* batched float: 2 x 6 outputs, 24 accumulators */
#define F_TOKS 6
#define F_ROWS1 6  /* single-token float: 6 rows, 12 accumulators */
#define F_MAXR 6
#define Q_ROWS 2   /* batched Q8_0: 2 x 4 */
#define Q_TOKS 4
#define Q_ROWS1 4  /* single-token Q8_0 */
#define Q_MAXR 4

/* ---- float weights ------------------------------------------------------------------ */

/* 16 weights k0 .. k0+15 of a row as f32; lanes outside m read as 0 and touch no memory. */
INLINE __m512 load_w16(const uint8_t *row, enum kern_wtype wt, int64_t k0, __mmask16 m)
{
    switch (wt) {
    case KERN_W_F16:
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, row + k0 * 2));
    case KERN_W_BF16:
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, row + k0 * 2)), 16));
    default:
        return _mm512_maskz_loadu_ps(m, row + k0 * 4);
    }
}

/* Outputs y[t][r] for rows r .. r+nr-1 and tokens t .. t+nt-1 (nr, nt constants after
 * inlining, so acc lives in registers). */
INLINE void tile_f(float *y, int64_t y_ld, const uint8_t *w, size_t rb, enum kern_wtype wt,
                   const float *x, int64_t k, int64_t r, int64_t t, int nr, int nt)
{
    __m512 acc[F_MAXR][F_TOKS][2];
    const uint8_t *row[F_MAXR];
#pragma GCC unroll 8
    for (int i = 0; i < nr; i++) {
        row[i] = w + (size_t)(r + i) * rb;
#pragma GCC unroll 8
        for (int j = 0; j < nt; j++) acc[i][j][0] = acc[i][j][1] = _mm512_setzero_ps();
    }
    const float *xt = x + t * k;
    int64_t kf = k & ~(int64_t)(KERN_LANES - 1);
    for (int64_t k0 = 0; k0 < kf; k0 += KERN_LANES) {
        __m512 wv[F_MAXR][2];
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++) {
            wv[i][0] = load_w16(row[i], wt, k0, 0xffff);
            wv[i][1] = load_w16(row[i], wt, k0 + 16, 0xffff);
        }
#pragma GCC unroll 8
        for (int j = 0; j < nt; j++) {
            __m512 x0 = _mm512_loadu_ps(xt + j * k + k0);
            __m512 x1 = _mm512_loadu_ps(xt + j * k + k0 + 16);
#pragma GCC unroll 8
            for (int i = 0; i < nr; i++) {
                acc[i][j][0] = _mm512_fmadd_ps(wv[i][0], x0, acc[i][j][0]);
                acc[i][j][1] = _mm512_fmadd_ps(wv[i][1], x1, acc[i][j][1]);
            }
        }
    }
    if (kf < k) {
        uint32_t bits = (uint32_t)(((uint64_t)1 << (k - kf)) - 1);
        __mmask16 m0 = (__mmask16)bits, m1 = (__mmask16)(bits >> 16);
        __m512 wv[F_MAXR][2];
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++) {
            wv[i][0] = load_w16(row[i], wt, kf, m0);
            wv[i][1] = load_w16(row[i], wt, kf + 16, m1);
        }
#pragma GCC unroll 8
        for (int j = 0; j < nt; j++) {
            __m512 x0 = _mm512_maskz_loadu_ps(m0, xt + j * k + kf);
            __m512 x1 = _mm512_maskz_loadu_ps(m1, xt + j * k + kf + 16);
#pragma GCC unroll 8
            for (int i = 0; i < nr; i++) {
                acc[i][j][0] = _mm512_mask3_fmadd_ps(wv[i][0], x0, acc[i][j][0], m0);
                acc[i][j][1] = _mm512_mask3_fmadd_ps(wv[i][1], x1, acc[i][j][1], m1);
            }
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < nt; j++)
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++) y[(t + j) * y_ld + r + i] = v16_tree32(acc[i][j][0], acc[i][j][1]);
}

/* One weight type, with wt a constant inside so load_w16's switch folds away. */
INLINE void matmul_float_t(float *y, int64_t y_ld, const uint8_t *w, enum kern_wtype wt,
                           const float *x, int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    size_t rb = kern_row_bytes(wt, k);
    int64_t r = r0;
#define TILE(r, t, nr, nt) tile_f(y, y_ld, w, rb, wt, x, k, r, t, nr, nt)
    if (n_tok == 1) {
        KERN_TILES_ONE_TOKEN(r, r0, r1, F_ROWS1, TILE);
        return;
    }
    KERN_TILES_PANELS(r, r0, r1, n_tok, rb, F_ROWS, F_TOKS, TILE);
#undef TILE
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

float kern_dot_avx512(const float *a, const float *b, int64_t n)
{
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    int64_t kf = n & ~(int64_t)(KERN_LANES - 1), k0 = 0;
    for (; k0 < kf; k0 += KERN_LANES) {
        acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k0), _mm512_loadu_ps(b + k0), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + k0 + 16), _mm512_loadu_ps(b + k0 + 16), acc1);
    }
    if (kf < n) {
        uint32_t bits = (uint32_t)(((uint64_t)1 << (n - kf)) - 1);
        __mmask16 m0 = (__mmask16)bits, m1 = (__mmask16)(bits >> 16);
        acc0 = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(m0, a + kf), _mm512_maskz_loadu_ps(m0, b + kf),
                                     acc0, m0);
        acc1 = _mm512_mask3_fmadd_ps(_mm512_maskz_loadu_ps(m1, a + kf + 16),
                                     _mm512_maskz_loadu_ps(m1, b + kf + 16), acc1, m1);
    }
    return v16_tree32(acc0, acc1);
}

/* ---- Q8_0 ----------------------------------------------------------------------------- */

void kern_q8_quantize_avx512(struct kern_q8_block *xq, const float *x, int64_t n_tok, int64_t k)
{
    int64_t nb = k / KERN_Q8_BLOCK;
    const __m512 zero = _mm512_setzero_ps();
    const __m512 lo = _mm512_set1_ps(-127.0f), hi = _mm512_set1_ps(127.0f);
    for (int64_t t = 0; t < n_tok; t++) {
        for (int64_t b = 0; b < nb; b++) {
            const float *v = x + t * k + b * KERN_Q8_BLOCK;
            struct kern_q8_block *o = xq + t * nb + b;
            __m512 v0 = _mm512_loadu_ps(v), v1 = _mm512_loadu_ps(v + 16);
            /* max(a, 0) returns its second operand for a NaN lane: NaNs drop out */
            __m512 a = _mm512_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), zero),
                                     _mm512_max_ps(_mm512_abs_ps(v1), zero));
            float amax = _mm512_reduce_max_ps(a);
            float d = amax / 127.0f;
            float id = d > 0.0f ? 1.0f / d : 0.0f;
            o->d = kern_q8_stored_scale(d);
            __m512 s = _mm512_set1_ps(id);
            __m512 q0 = _mm512_roundscale_ps(_mm512_mul_ps(v0, s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            __m512 q1 = _mm512_roundscale_ps(_mm512_mul_ps(v1, s), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            /* max(q, -127) maps NaN to -127, as the scalar's !(r >= -127) */
            q0 = _mm512_min_ps(_mm512_max_ps(q0, lo), hi);
            q1 = _mm512_min_ps(_mm512_max_ps(q1, lo), hi);
            _mm_storeu_si128((__m128i *)o->q, _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(q0)));
            _mm_storeu_si128((__m128i *)(o->q + 16), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(q1)));
        }
    }
}

/* The 8-lane tree h = 4, 2, 1. */
INLINE float tree8(__m256 a)
{
    __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    return _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)));
}

/* Scales of blocks b .. b+n-1 (n <= 8) of a weight row as f32, 0 beyond n. A full group
 * gathers 32 bits at each block start (the scale and the block's first two quants) and
 * keeps the low 16. */
INLINE __m256 load_dw8(const uint8_t *row, int64_t b, int n)
{
    if (n == 8) {
        const __m256i off = _mm256_setr_epi32(0, 34, 68, 102, 136, 170, 204, 238);
        __m256i g = _mm256_i32gather_epi32((const int *)(row + b * KERN_Q8_BLOCK_BYTES), off, 1);
        g = _mm256_and_si256(g, _mm256_set1_epi32(0xffff));
        __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(g, g), 0x08);
        return _mm256_cvtph_ps(_mm256_castsi256_si128(p));
    }
    uint16_t h[8] = {0};
    for (int i = 0; i < n; i++) h[i] = hs_rd_u16(row + (b + i) * KERN_Q8_BLOCK_BYTES);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h));
}

/* Activation scales of blocks xb[0 .. n-1], 0 beyond n. */
INLINE __m256 load_dx8(const struct kern_q8_block *xb, int n)
{
    if (n == 8) {
        const __m256i off = _mm256_setr_epi32(0, 9, 18, 27, 36, 45, 54, 63); /* 36-byte blocks */
        return _mm256_i32gather_ps(&xb[0].d, off, 4);
    }
    float d[8] = {0};
    for (int i = 0; i < n; i++) d[i] = xb[i].d;
    return _mm256_loadu_ps(d);
}

INLINE __m256i dot1(const uint8_t *wq, const int8_t *xq)
{
    __m256i wv = _mm256_loadu_si256((const __m256i *)wq);
    __m256i xv = _mm256_loadu_si256((const __m256i *)xq);
    __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(wv), _mm256_sign_epi8(xv, wv));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}
INLINE __m256i isum8(const uint8_t *row, const struct kern_q8_block *xb, int64_t b, int n)
{
    const uint8_t *q = row + b * KERN_Q8_BLOCK_BYTES + 2;
    __m256i v[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; i++)
        v[i] = i < n ? dot1(q + i * KERN_Q8_BLOCK_BYTES, xb[i].q) : _mm256_setzero_si256();
    __m256i h01 = _mm256_hadd_epi32(v[0], v[1]), h23 = _mm256_hadd_epi32(v[2], v[3]);
    __m256i h45 = _mm256_hadd_epi32(v[4], v[5]), h67 = _mm256_hadd_epi32(v[6], v[7]);
    __m256i q0 = _mm256_hadd_epi32(h01, h23), q1 = _mm256_hadd_epi32(h45, h67);
    return _mm256_add_epi32(_mm256_permute2x128_si256(q0, q1, 0x20), _mm256_permute2x128_si256(q0, q1, 0x31));
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
        __m256 dw[Q_MAXR], dx[Q_TOKS];
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++) dw[i] = load_dw8(row[i], b, 8);
#pragma GCC unroll 8
        for (int j = 0; j < nt; j++) dx[j] = load_dx8(xq + (t + j) * nb + b, 8);
#pragma GCC unroll 8
        for (int j = 0; j < nt; j++)
#pragma GCC unroll 8
            for (int i = 0; i < nr; i++) {
                __m256 f = _mm256_cvtepi32_ps(isum8(row[i], xq + (t + j) * nb + b, b, 8));
                acc[i][j] = _mm256_fmadd_ps(_mm256_mul_ps(dw[i], dx[j]), f, acc[i][j]);
            }
    }
    if (bf < nb) {
        int n = (int)(nb - bf);
        __mmask8 m = (__mmask8)((1u << n) - 1);
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++) {
            __m256 dw = load_dw8(row[i], bf, n);
#pragma GCC unroll 8
            for (int j = 0; j < nt; j++) {
                __m256 dx = load_dx8(xq + (t + j) * nb + bf, n);
                __m256 f = _mm256_cvtepi32_ps(isum8(row[i], xq + (t + j) * nb + bf, bf, n));
                acc[i][j] = _mm256_mask3_fmadd_ps(_mm256_mul_ps(dw, dx), f, acc[i][j], m);
            }
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < nt; j++)
#pragma GCC unroll 8
        for (int i = 0; i < nr; i++) y[(t + j) * y_ld + r + i] = tree8(acc[i][j]);
}

static void matmul_q8_0(float *y, int64_t y_ld, const uint8_t *w, const struct kern_q8_block *xq,
                        int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    int64_t nb = k / KERN_Q8_BLOCK;
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

/* ---- Q8_0 with VNNI (vpdpbusd) ------------------------------------------------------------
 * Same bits as matmul_q8_0 above (note 7): only the way the exact int32 block sums are formed
 * changes. vpdpbusd multiplies unsigned by signed bytes, so one side is offset by 128
 * (q ^ 0x80 reads as q + 128 unsigned) and the offset's share is subtracted exactly.
 */
#define V_KMAX 8192                 /* the VNNI paths take K <= this (stack buffers) */
#define V_NBMAX (V_KMAX / KERN_Q8_BLOCK)
#define V_TOKS 6                    /* tokens per register tile of the panel path */
#define V_PANEL_BLKS V_NBMAX        /* repacked blocks per panel: 160 KiB, one group at K = V_KMAX */
#define V_GROUP 16                  /* blocks per group of the single-token path */
#define V_PREFETCH 2048             /* bytes ahead the single-token path prefetches */

/* Rows handled by the old per-block code for blocks [b0, nb) (b0 % 8 == 0), continuing acc. */
INLINE __m256 q8_tail(__m256 acc, const uint8_t *row, const struct kern_q8_block *xb, int64_t b0, int64_t nb)
{
    for (int64_t b = b0; b < nb; b += KERN_Q8_LANES) {
        int n = (int)HS_MIN((int64_t)KERN_Q8_LANES, nb - b);
        __m256 sc = _mm256_mul_ps(load_dw8(row, b, n), load_dx8(xb + b, n));
        __m256 f = _mm256_cvtepi32_ps(isum8(row, xb + b, b, n));
        acc = _mm256_mask3_fmadd_ps(sc, f, acc, (__mmask8)((1u << n) - 1));
    }
    return acc;
}

/* Group reduction: v[p] holds the 8 int32 partial sums of block 2p (lanes 0..7) and of
 * block 2p+1 (lanes 8..15); returns the 16 block sums in block order. Integer adds: exact. */
INLINE __m512i sums16(const __m512i v[8])
{
    __m512i s[4], t[2];
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++)
        s[i] = _mm512_add_epi32(_mm512_unpacklo_epi32(v[2 * i], v[2 * i + 1]),
                                _mm512_unpackhi_epi32(v[2 * i], v[2 * i + 1]));
#pragma GCC unroll 2
    for (int i = 0; i < 2; i++)
        t[i] = _mm512_add_epi32(_mm512_unpacklo_epi64(s[2 * i], s[2 * i + 1]),
                                _mm512_unpackhi_epi64(s[2 * i], s[2 * i + 1]));
    /* t[0] chunk c = chunk-c totals of v0..v3, t[1] of v4..v7; block 2p = chunks 0+1 of
     * v[p], block 2p+1 = chunks 2+3 */
    __m512i x = _mm512_shuffle_i32x4(t[0], t[1], _MM_SHUFFLE(2, 0, 2, 0));
    __m512i y = _mm512_shuffle_i32x4(t[0], t[1], _MM_SHUFFLE(3, 1, 3, 1));
    const __m512i order = _mm512_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7, 8, 12, 9, 13, 10, 14, 11, 15);
    return _mm512_permutexvar_epi32(order, _mm512_add_epi32(x, y));
}

/* acc (lanes b % 8) += scales * sums for 16 blocks, lower 8 blocks first (ascending b). */
INLINE __m256 fma16(__m256 acc, __m512 sc, __m512i isum)
{
    __m512 f = _mm512_cvtepi32_ps(isum);
    acc = _mm256_fmadd_ps(_mm512_castps512_ps256(sc), _mm512_castps512_ps256(f), acc);
    return _mm256_fmadd_ps(_mm512_extractf32x8_ps(sc, 1), _mm512_extractf32x8_ps(f, 1), acc);
}

/* One token's activation as the streaming paths read it: its quants packed contiguously,
 * 128 * sum(quants) per block (the offset's share) and the block scales. */
INLINE void q8v_prep(int8_t *qx, int32_t *cx, float *dx, const struct kern_q8_block *xq, int64_t nb)
{
    for (int64_t b = 0; b < nb; b++) {
        memcpy(qx + b * KERN_Q8_BLOCK, xq[b].q, KERN_Q8_BLOCK);
        int32_t sum = 0;
        for (int i = 0; i < KERN_Q8_BLOCK; i++) sum += xq[b].q[i];
        cx[b] = 128 * sum;
        dx[b] = xq[b].d;
    }
}

/* Single token: weights ^ 0x80 (unsigned) times the token's quants packed contiguously
 * (signed); isum = that - 128 * sum(xq) per block. */
static void q8v_single(float *y, const uint8_t *w, size_t rb, const struct kern_q8_block *xq,
                       int64_t nb, int64_t r0, int64_t r1)
{
    int8_t qx[V_KMAX] __attribute__((aligned(64)));
    int32_t cx[V_NBMAX] __attribute__((aligned(64)));
    float dx[V_NBMAX] __attribute__((aligned(64)));
    const int64_t ng = nb / V_GROUP;
    q8v_prep(qx, cx, dx, xq, nb);
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    const __m512i off = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(KERN_Q8_BLOCK_BYTES));
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + (size_t)r * rb;
        __m256 acc = _mm256_setzero_ps();
        for (int64_t g = 0; g < ng; g++) {
            const uint8_t *wg = row + (size_t)g * V_GROUP * KERN_Q8_BLOCK_BYTES;
            const int8_t *xg = qx + g * V_GROUP * KERN_Q8_BLOCK;
            /* rows are back to back: one stream; software prefetch V_PREFETCH bytes ahead
             * (the group's 544 bytes = 9 lines) keeps more misses in flight than the
             * hardware prefetcher alone when the matrix comes from memory */
#pragma GCC unroll 9
            for (int l = 0; l < 9; l++) _mm_prefetch((const char *)wg + V_PREFETCH + 64 * l, _MM_HINT_T0);
            __m512i v[8];
#pragma GCC unroll 8
            for (int p = 0; p < 8; p++) {
                const uint8_t *q = wg + 2 * p * KERN_Q8_BLOCK_BYTES + 2;
                __m512i wv = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)q)),
                                                _mm256_loadu_si256((const __m256i *)(q + KERN_Q8_BLOCK_BYTES)), 1);
                v[p] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_xor_si512(wv, flip),
                                           _mm512_load_si512(xg + 64 * p));
            }
            __m512i isum = _mm512_sub_epi32(sums16(v), _mm512_load_si512(cx + g * V_GROUP));
            /* the scale is the low 16 bits of the 32 read at each block start */
            __m512i raw = _mm512_i32gather_epi32(off, wg, 1);
            __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(raw));
            acc = fma16(acc, _mm512_mul_ps(dw, _mm512_load_ps(dx + g * V_GROUP)), isum);
        }
        acc = q8_tail(acc, row, xq, ng * V_GROUP, nb);
        y[r] = tree8(acc);
    }
}

/* A few tokens (2 .. V_FEW, a decode step of several sequences): q8v_single's stream, each
 * weight group loaded once for all of them; per token the same operations in the same order
 * as q8v_single (so the same bits as one call per token), only the loads are shared. The
 * matrix is read once per V_FEW tokens instead of once per token (the panel path would
 * repack it first: one more pass over memory a decode step cannot amortize). */
#define V_FEW 8

static void q8v_few(float *y, int64_t y_ld, const uint8_t *w, size_t rb, const struct kern_q8_block *xq,
                    int64_t nt, int64_t nb, int64_t r0, int64_t r1)
{
    int8_t qx[V_FEW][V_KMAX] __attribute__((aligned(64)));
    int32_t cx[V_FEW][V_NBMAX] __attribute__((aligned(64)));
    float dx[V_FEW][V_NBMAX] __attribute__((aligned(64)));
    const int64_t ng = nb / V_GROUP;
    for (int64_t j = 0; j < nt; j++) q8v_prep(qx[j], cx[j], dx[j], xq + j * nb, nb);
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    const __m512i off = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32(KERN_Q8_BLOCK_BYTES));
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + (size_t)r * rb;
        __m256 acc[V_FEW];
        for (int j = 0; j < V_FEW; j++) acc[j] = _mm256_setzero_ps();
        for (int64_t g = 0; g < ng; g++) {
            const uint8_t *wg = row + (size_t)g * V_GROUP * KERN_Q8_BLOCK_BYTES;
#pragma GCC unroll 9
            for (int l = 0; l < 9; l++) _mm_prefetch((const char *)wg + V_PREFETCH + 64 * l, _MM_HINT_T0);
            __m512i wx[8];
#pragma GCC unroll 8
            for (int p = 0; p < 8; p++) {
                const uint8_t *q = wg + 2 * p * KERN_Q8_BLOCK_BYTES + 2;
                __m512i wv = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)q)),
                                                _mm256_loadu_si256((const __m256i *)(q + KERN_Q8_BLOCK_BYTES)), 1);
                wx[p] = _mm512_xor_si512(wv, flip);
            }
            __m512i raw = _mm512_i32gather_epi32(off, wg, 1);
            __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(raw));
            for (int64_t j = 0; j < nt; j++) {
                const int8_t *xg = qx[j] + g * V_GROUP * KERN_Q8_BLOCK;
                __m512i v[8];
#pragma GCC unroll 8
                for (int p = 0; p < 8; p++)
                    v[p] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), wx[p], _mm512_load_si512(xg + 64 * p));
                __m512i isum = _mm512_sub_epi32(sums16(v), _mm512_load_si512(cx[j] + g * V_GROUP));
                acc[j] = fma16(acc[j], _mm512_mul_ps(dw, _mm512_load_ps(dx[j] + g * V_GROUP)), isum);
            }
        }
        for (int64_t j = 0; j < nt; j++) {
            __m256 a = q8_tail(acc[j], row, xq + j * nb, ng * V_GROUP, nb);
            y[j * y_ld + r] = tree8(a);
        }
    }
}

/* Panel path (several tokens): 16 rows at a time are transposed so that lane i of a zmm is
 * row i, and 4 consecutive bytes of one block k-range sit in each lane: then one vpdpbusd
 * with the token's 4 quants (offset to unsigned, broadcast) advances 16 rows' block sums,
 * and no horizontal reduction is needed. Per 16-row group and block the panel holds the 8
 * transposed vectors, 128 * sum(w) per row (the offset's share) and the 16 scales. */
struct q8v_panel_blk {
    __m512i wt[8];  /* wt[s] lane i = bytes 4s..4s+3 of row i's block */
    __m512i corr;   /* lane i = 128 * sum of row i's 32 quants */
    __m512 dw;      /* lane i = row i's block scale */
};

static void q8v_pack_group(struct q8v_panel_blk *dst, const uint8_t *w, size_t rb, int64_t r, int64_t nb)
{
    const __m512i q0 = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
    const __m512i q1 = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    const __m512i k80 = _mm512_set1_epi8((char)0x80);
    const __m512i off = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)rb));
    const uint8_t *base = w + (size_t)r * rb;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = base + b * KERN_Q8_BLOCK_BYTES;
        __m512i z[8], t[8], u[8];
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++)   /* z[k] = row k (lanes 0..7) | row k+8 (lanes 8..15) */
            z[k] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(blk + (size_t)k * rb + 2))),
                                      _mm256_loadu_si256((const __m256i *)(blk + (size_t)(k + 8) * rb + 2)), 1);
#pragma GCC unroll 4
        for (int k = 0; k < 8; k += 2) {
            t[k] = _mm512_unpacklo_epi32(z[k], z[k + 1]);
            t[k + 1] = _mm512_unpackhi_epi32(z[k], z[k + 1]);
        }
        /* u[m] (m < 4) chunk c: dword m (+4 in odd chunks) of rows 0..3 / 8..11; u[4+m] of rows
         * 4..7 / 12..15 */
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            u[4 * h + 0] = _mm512_unpacklo_epi64(t[4 * h + 0], t[4 * h + 2]);
            u[4 * h + 1] = _mm512_unpackhi_epi64(t[4 * h + 0], t[4 * h + 2]);
            u[4 * h + 2] = _mm512_unpacklo_epi64(t[4 * h + 1], t[4 * h + 3]);
            u[4 * h + 3] = _mm512_unpackhi_epi64(t[4 * h + 1], t[4 * h + 3]);
        }
        __m512i corr = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int m = 0; m < 4; m++) {
            __m512i a = _mm512_permutex2var_epi64(u[m], q0, u[4 + m]);
            __m512i c = _mm512_permutex2var_epi64(u[m], q1, u[4 + m]);
            _mm512_store_si512(&dst[b].wt[m], a);
            _mm512_store_si512(&dst[b].wt[4 + m], c);
            corr = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(corr, k80, a), k80, c);
        }
        _mm512_store_si512(&dst[b].corr, corr);
        __m512i raw = _mm512_i32gather_epi32(off, blk, 1);
        _mm512_store_ps(&dst[b].dw, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(raw)));
    }
}

/* Tokens t0 .. t0+nt-1 (nt <= V_TOKS) against ng packed 16-row groups (ng <= 2); the token
 * quants are in xp (offset to unsigned), scales read from xq. */
INLINE void q8v_tile(float *y, int64_t y_ld, const struct q8v_panel_blk *pk, int64_t nb, int64_t r,
                     const uint8_t *xp, const struct kern_q8_block *xq, int64_t t0, int ng, int nt)
{
    __m512 acc[2][V_TOKS][KERN_Q8_LANES];
#pragma GCC unroll 2
    for (int g = 0; g < ng; g++)
#pragma GCC unroll 6
        for (int j = 0; j < nt; j++)
#pragma GCC unroll 8
            for (int l = 0; l < KERN_Q8_LANES; l++) acc[g][j][l] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m512i is[2][V_TOKS];
#pragma GCC unroll 2
        for (int g = 0; g < ng; g++)
#pragma GCC unroll 6
            for (int j = 0; j < nt; j++) is[g][j] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int s = 0; s < 8; s++) {
            __m512i wv[2];
#pragma GCC unroll 2
            for (int g = 0; g < ng; g++) wv[g] = _mm512_load_si512(&pk[g * nb + b].wt[s]);
#pragma GCC unroll 6
            for (int j = 0; j < nt; j++) {
                int32_t four;
                memcpy(&four, xp + (size_t)j * (size_t)nb * KERN_Q8_BLOCK + (size_t)b * KERN_Q8_BLOCK + 4 * s, 4);
                __m512i xv = _mm512_set1_epi32(four);
#pragma GCC unroll 2
                for (int g = 0; g < ng; g++) is[g][j] = _mm512_dpbusd_epi32(is[g][j], xv, wv[g]);
            }
        }
#pragma GCC unroll 2
        for (int g = 0; g < ng; g++) {
            const struct q8v_panel_blk *pb = &pk[g * nb + b];
#pragma GCC unroll 6
            for (int j = 0; j < nt; j++) {
                __m512 f = _mm512_cvtepi32_ps(_mm512_sub_epi32(is[g][j], pb->corr));
                __m512 sc = _mm512_mul_ps(pb->dw, _mm512_set1_ps(xq[(t0 + j) * nb + b].d));
                acc[g][j][b % KERN_Q8_LANES] = _mm512_fmadd_ps(sc, f, acc[g][j][b % KERN_Q8_LANES]);
            }
        }
    }
    /* the halving tree h = 4, 2, 1 lane-wise over the 8 partial sums (one row per lane) */
#pragma GCC unroll 2
    for (int g = 0; g < ng; g++)
#pragma GCC unroll 6
        for (int j = 0; j < nt; j++) {
            __m512 *a = acc[g][j];
            for (int h = 4; h >= 1; h /= 2)
                for (int l = 0; l < h; l++) a[l] = _mm512_add_ps(a[l], a[l + h]);
            _mm512_storeu_ps(y + (t0 + j) * y_ld + r + 16 * g, a[0]);
        }
}

INLINE void q8v_tiles(float *y, int64_t y_ld, const struct q8v_panel_blk *pk, int64_t nb, int64_t r,
                      const uint8_t *xp, const struct kern_q8_block *xq, int64_t t0, int ng, int nt)
{
    if (ng == 2) {
        switch (nt) {
        case 6: q8v_tile(y, y_ld, pk, nb, r, xp, xq, t0, 2, 6); break;
        case 5: q8v_tile(y, y_ld, pk, nb, r, xp, xq, t0, 2, 5); break;
        case 4: q8v_tile(y, y_ld, pk, nb, r, xp, xq, t0, 2, 4); break;
        case 3: q8v_tile(y, y_ld, pk, nb, r, xp, xq, t0, 2, 3); break;
        case 2: q8v_tile(y, y_ld, pk, nb, r, xp, xq, t0, 2, 2); break;
        default: q8v_tile(y, y_ld, pk, nb, r, xp, xq, t0, 2, 1); break;
        }
    } else {
        switch (nt) {
        case 6: q8v_tile(y, y_ld, pk, nb, r, xp, xq, t0, 1, 6); break;
        case 5: q8v_tile(y, y_ld, pk, nb, r, xp, xq, t0, 1, 5); break;
        case 4: q8v_tile(y, y_ld, pk, nb, r, xp, xq, t0, 1, 4); break;
        case 3: q8v_tile(y, y_ld, pk, nb, r, xp, xq, t0, 1, 3); break;
        case 2: q8v_tile(y, y_ld, pk, nb, r, xp, xq, t0, 1, 2); break;
        default: q8v_tile(y, y_ld, pk, nb, r, xp, xq, t0, 1, 1); break;
        }
    }
}

static void q8v_panels(float *y, int64_t y_ld, const uint8_t *w, size_t rb, const struct kern_q8_block *xq,
                       int64_t n_tok, int64_t nb, int64_t r0, int64_t r1)
{
    _Static_assert(sizeof(struct q8v_panel_blk) == 640, "panel block layout");
    struct q8v_panel_blk pk[V_PANEL_BLKS];
    uint8_t xp[V_TOKS * V_KMAX] __attribute__((aligned(64)));
    const int64_t gmax = V_PANEL_BLKS / nb; /* >= 1: nb <= V_NBMAX */
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    int64_t r1g = r0 + (r1 - r0) / 16 * 16;
    for (int64_t p0 = r0; p0 < r1g; p0 += gmax * 16) {
        int64_t groups = HS_MIN(gmax, (r1g - p0) / 16);
        for (int64_t g = 0; g < groups; g++) q8v_pack_group(pk + g * nb, w, rb, p0 + 16 * g, nb);
        for (int64_t t = 0; t < n_tok; t += V_TOKS) {
            int nt = (int)HS_MIN((int64_t)V_TOKS, n_tok - t);
            for (int j = 0; j < nt; j++)  /* the tile's quants, contiguous and offset by 128 */
                for (int64_t b = 0; b < nb; b++) {
                    __m256i q = _mm256_loadu_si256((const __m256i *)xq[(t + j) * nb + b].q);
                    _mm256_storeu_si256((__m256i *)(xp + ((size_t)j * nb + b) * KERN_Q8_BLOCK),
                                        _mm256_xor_si256(q, _mm512_castsi512_si256(flip)));
                }
            int64_t g = 0;
            for (; g + 2 <= groups; g += 2) q8v_tiles(y, y_ld, pk + g * nb, nb, p0 + 16 * g, xp, xq, t, 2, nt);
            if (g < groups) q8v_tiles(y, y_ld, pk + g * nb, nb, p0 + 16 * g, xp, xq, t, 1, nt);
        }
    }
    /* rows beyond the last full group of 16: the per-block code */
    for (int64_t r = r1g; r < r1; r++)
        for (int64_t t = 0; t < n_tok; t++) tile_q(y, y_ld, w, rb, xq, nb, r, t, 1, 1);
}

void kern_matmul_q8_0_vnni(float *y, int64_t y_ld, const uint8_t *w, const struct kern_q8_block *xq,
                           int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    _Static_assert(XT_Q8V_KMAX == V_KMAX && XT_Q8V_PANEL_TOKS == 2 * V_FEW + 1, "xtype_x86_int.h's copy");
    int64_t nb = k / KERN_Q8_BLOCK;
    size_t rb = (size_t)nb * KERN_Q8_BLOCK_BYTES;
    if (k > V_KMAX) {
        matmul_q8_0(y, y_ld, w, xq, n_tok, k, r0, r1);
    } else if (n_tok == 1) {
        q8v_single(y, w, rb, xq, nb, r0, r1);
    } else if (n_tok <= 2 * V_FEW) {
        for (int64_t t = 0; t < n_tok; t += V_FEW)
            q8v_few(y + t * y_ld, y_ld, w, rb, xq + t * nb, HS_MIN((int64_t)V_FEW, n_tok - t), nb, r0, r1);
    } else {
        q8v_panels(y, y_ld, w, rb, xq, n_tok, nb, r0, r1);
    }
}

void kern_matmul_avx512(float *y, int64_t y_ld, const void *w, enum kern_wtype wt, const float *x,
                        const struct kern_q8_block *xq, int64_t n_tok, int64_t k, int64_t r0,
                        int64_t r1)
{
    switch (wt) {
    case KERN_W_F32: matmul_f32(y, y_ld, w, x, n_tok, k, r0, r1); break;
    case KERN_W_F16: matmul_f16(y, y_ld, w, x, n_tok, k, r0, r1); break;
    case KERN_W_BF16: matmul_bf16(y, y_ld, w, x, n_tok, k, r0, r1); break;
    case KERN_W_Q8_0: kern_matmul_q8_0_vnni(y, y_ld, w, xq, n_tok, k, r0, r1); break;
    }
}

#else
typedef int kern_matmul_avx512_unused; /* not x86: the variant does not exist */
#endif
