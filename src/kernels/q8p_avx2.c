/*
 * q8p_avx2.c — the Q8_0 matmul over the panel layout (q8p.c) with AVX2: a decode token, a
 * decode step of several sequences and a prefill, over the weights packed once at engine
 * start (kern_ops.matmul_q8p of the "avx2" table). Bit-identical to the scalar Q8_0 matmul
 * on the unpacked rows (matmul.c). Compiled with the Makefile's AVX2 flags.
 *
 * Design note:
 *   1. A 64-byte vector of the layout is two ymm: bytes 0..31 hold rows 16g .. 16g+7 (half
 *      0), bytes 32..63 rows 16g+8 .. 16g+15 (half 1). A tile works on one half: dword lane
 *      i of every ymm is row 16g + 8h + i, so a block sum needs no horizontal add.
 *   2. The int8 dot: vpmaddubsw needs one unsigned operand, and the layout's q + 128 (up to
 *      255) times a signed quant would saturate int16 in a pair sum. So the xor is undone
 *      (one vpxor per half vector, shared by all tokens) and matmul_avx2.c note 4's trick
 *      applies: vpmaddubsw of |w| (<= 128, also for a -128 quant) with sign(x, w), exact
 *      because kern_q8_quantize gives |x| <= 127 (pair sums <= 2 * 128 * 127), then
 *      vpmaddwd with ones and an int32 add per step; after 8 steps lane i holds row i's
 *      exact block sum sum w x. The layout's offset is gone with the xor, so the offset
 *      shares cx (q8p.c note 3) are not needed: this build ignores them (cx may be NULL).
 *   3. The float steps are the Q8_0 contract's (kernels.h; matmul_avx2.c note 4), lane-wise:
 *      dw * dx rounded once, one vfmadd per block into the row's partial sum b % 8, blocks
 *      ascending, then the halving tree 4, 2, 1. The layout puts the blocks of one partial
 *      sum in consecutive slots (q8p.c note 4): walking the slots in order runs partial sum
 *      0 over its blocks ascending, then 1, ..., so one accumulator per (half, token) serves
 *      a whole run and is parked in part[l] at its end. Each row is the scalar code's row.
 *   4. A decode step (n_tok <= Q8P2_TMAX) streams the packed matrix once, front to back:
 *      per slot, both halves x all NT tokens run on the slot's 512 quant bytes while they
 *      are in L1, in passes of at most Q8P2_PASS tokens: a pass's int32 sums are registers
 *      (4 + 6 of the 16 ymm, no spills; passes of 8 spilled three sums and measured within
 *      noise of 4 here, 0.98-1.06x). The 2 NT float accumulators live in memory between
 *      slots (a load and a store per block against 32 integer ops). Software prefetch
 *      Q8P2_PREFETCH bytes ahead into L2 (_MM_HINT_T1: the activations of 8 tokens are read
 *      from L1 for every slot), the stream running on into the next group. Measured on a
 *      71 MB matrix (16384 x 4096, one thread, Zen 4): 8 KiB ahead against 2 KiB 1.0-1.1x
 *      at 1 token and 1.7-1.9x at 2; against 4 KiB and 16 KiB 1.0-1.25x at 1..8 tokens.
 *      The step loop is unrolled by 2, not 8 (matmul_avx2.c q8p_tile's finding: fully
 *      unrolled, GCC re-associates the integer adds and spills the vpmaddwd results).
 *      More tokens than a decode step run these tiles in row panels of about
 *      Q8P2_PANEL_BYTES, the tokens split evenly into tiles of at most 8 inside, so a panel
 *      comes from L2 for every token tile but the first.
 *   5. From Q8P2_PANEL_MIN tokens (a long prefill) the whole halves inside [r0, r1) take
 *      matmul_avx2.c's Q8_0 panel path (its note 7) instead: kern_q8p_panels_avx2 builds
 *      its panel blocks from the layout with a load and an xor per vector (no transpose:
 *      the layout is already row-per-lane) and runs the rows' own 4-token tiles from L2, so
 *      a long prefill costs what it cost on the rows. Measured one thread (3584 x 1024 and
 *      1024 x 3584): note 4's tiles 1.1-1.3x the panel path at 12 to 64 tokens, within
 *      noise of it (0.94-1.03x) at 128 and 512. The halves cut by r0 or r1, and rows too
 *      long for that panel (K > 8192), take note 4's tiles. Same bits either way.
 *   6. Any r0, r1: a half only partly inside [r0, r1) is computed whole and stored with a
 *      lane mask (vmaskmovps; its other lanes are independent sums, thrown away), so a
 *      thread split that cuts a group cannot change a bit; a half wholly outside is skipped.
 *      Padding rows compute zeros, never stored.
 *   7. Built for AVX-VNNI (q8p_avxvnni.c, KERN_AVXVNNI) the tiles of note 4 take the
 *      layout as q8p_avx512.c does: vpdpbusd of the stored q + 128 (unsigned) with the
 *      token's quants, the chain started from the token's offset share -128 sum x of the
 *      block (cx; computed per block here when the caller passes NULL), ends at the exact
 *      sum w x. One instruction per token and step instead of four, and no xor or abs per
 *      vector. The long prefills of note 5 run matmul_avxvnni.c's panel tiles (|w| and
 *      sign(x, w) into one vpdpbusd). Same integers, same bits.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kernels_int.h"
#include "kernels/vec_avx2_int.h"

#define INLINE static inline __attribute__((always_inline))
#define Q8P2_TMAX 8 /* tokens per decode tile (registers: note 4) */
#ifndef Q8P2_PASS
#define Q8P2_PASS 4 /* tokens per pass over a half's slot (registers: note 4) */
#endif
#ifndef Q8P2_PREFETCH
#define Q8P2_PREFETCH 8192 /* bytes ahead a decode tile prefetches (into L2; note 4, measured) */
#endif
#ifndef Q8P2_PANEL_BYTES
#define Q8P2_PANEL_BYTES (192 * 1024) /* packed weights per row panel of a several-token call */
#endif
#ifndef Q8P2_PANEL_MIN
#define Q8P2_PANEL_MIN 128 /* tokens from which the rows' panel path runs (note 5; measured) */
#endif

/* Slot quants q (one half: rows at dword lanes) and its 8 f16 scales sc, tokens xb[0 .. NT)
 * (each token's block b, its offset share at cs[j]): acc[j] += dw * dx_j * (block sum)
 * (notes 2, 3, 7). */
INLINE void q8p2_half(__m256 *acc, const uint8_t *q, const uint8_t *sc, const struct kern_q8_block *const *xb,
                      const int32_t *cs, int NT)
{
    __m256i is[Q8P2_TMAX];
#ifdef KERN_AVXVNNI /* note 7: the layout's unsigned bytes as they are, the sums from the shares */
#pragma GCC unroll 8
    for (int j = 0; j < NT; j++) is[j] = _mm256_set1_epi32(cs[j]);
#pragma GCC unroll 2
    for (int s = 0; s < 8; s++) {
        __m256i w = _mm256_load_si256((const __m256i *)(const void *)(q + 64 * s));
#pragma GCC unroll 8
        for (int j = 0; j < NT; j++) {
            int32_t four;
            memcpy(&four, xb[j]->q + 4 * s, 4);
            is[j] = _mm256_dpbusd_avx_epi32(is[j], w, _mm256_set1_epi32(four));
        }
    }
#else
    (void)cs;
    const __m256i off = _mm256_set1_epi8((char)0x80);
#pragma GCC unroll 8
    for (int j = 0; j < NT; j++) is[j] = _mm256_setzero_si256();
#pragma GCC unroll 2
    for (int s = 0; s < 8; s++) {
        __m256i w = _mm256_xor_si256(_mm256_load_si256((const __m256i *)(const void *)(q + 64 * s)), off);
        __m256i wa = _mm256_abs_epi8(w);
#pragma GCC unroll 8
        for (int j = 0; j < NT; j++) {
            int32_t four;
            memcpy(&four, xb[j]->q + 4 * s, 4);
            is[j] = q8_dot_add(is[j], wa, _mm256_sign_epi8(_mm256_set1_epi32(four), w));
        }
    }
#endif
    __m256 dw = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(const void *)sc));
#pragma GCC unroll 8
    for (int j = 0; j < NT; j++)
        acc[j] = _mm256_fmadd_ps(_mm256_mul_ps(dw, _mm256_set1_ps(xb[j]->d)), _mm256_cvtepi32_ps(is[j]), acc[j]);
}

/* The same for NT tokens in passes of at most Q8P2_PASS (note 4). */
INLINE void q8p2_half_n(__m256 *acc, const uint8_t *q, const uint8_t *sc, const struct kern_q8_block *const *xb,
                        const int32_t *cs, int NT)
{
    if (NT <= Q8P2_PASS) {
        q8p2_half(acc, q, sc, xb, cs, NT);
        return;
    }
    const int n0 = (NT + 1) / 2;
    q8p2_half(acc, q, sc, xb, cs, n0);
    q8p2_half(acc + n0, q, sc, xb + n0, cs + n0, NT - n0);
}

/* Lane mask of rows [lo, hi) of a half (0 <= lo < hi <= 8). */
INLINE __m256i q8p2_mask(int64_t lo, int64_t hi)
{
    __m256i i = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_and_si256(_mm256_cmpgt_epi32(i, _mm256_set1_epi32((int)lo - 1)),
                            _mm256_cmpgt_epi32(_mm256_set1_epi32((int)hi), i));
}

/* Group g (rows 16 g ..) x tokens t0 .. t0+NT-1, the rows of [r0, r1) stored (note 6). xq
 * and cx (the offset shares, or NULL) start at token 0. */
INLINE void q8p2_group(float *y, int64_t y_ld, const uint8_t *gp, int64_t nb, int64_t g,
                       const struct kern_q8_block *xq, const int32_t *cx, int64_t t0, int64_t r0, int64_t r1,
                       int NT)
{
    __m256 part[2][Q8P2_TMAX][KERN_Q8_LANES];
    int64_t lo[2], hi[2];
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        int64_t r = g * KERN_Q8P_ROWS + 8 * h;
        lo[h] = HS_MAX(r0 - r, (int64_t)0);
        hi[h] = HS_MIN(r1 - r, (int64_t)8);
    }
    const bool on0 = lo[0] < hi[0], on1 = lo[1] < hi[1];
    int64_t sl = 0;
    for (int l = 0; l < KERN_Q8_LANES; l++) {
        __m256 acc[2][Q8P2_TMAX];
#pragma GCC unroll 8
        for (int j = 0; j < NT; j++) acc[0][j] = acc[1][j] = _mm256_setzero_ps();
        for (int64_t b = l; b < nb; b += KERN_Q8_LANES, sl++) {
            const uint8_t *q = gp + kern_q8p_quants_at(sl), *sc = gp + kern_q8p_scales_at(sl);
            /* the slot's lines (and the scales' with the second of a pair) Q8P2_PREFETCH on: one
             * stream through the matrix, running on into the next group (note 4) */
#pragma GCC unroll 9
            for (int c = 0; c < 8 + (int)(sl & 1); c++) _mm_prefetch((const char *)q + Q8P2_PREFETCH + 64 * c, _MM_HINT_T1);
            const struct kern_q8_block *xb[Q8P2_TMAX];
            int32_t cs[Q8P2_TMAX]; /* the shares, read by the AVX-VNNI build only (note 7) */
#pragma GCC unroll 8
            for (int j = 0; j < NT; j++) xb[j] = xq + (t0 + j) * nb + b;
#ifdef KERN_AVXVNNI
            for (int j = 0; j < NT; j++) { /* the shares: the caller's, or one block's each (note 7) */
                if (cx) cs[j] = cx[(t0 + j) * nb + b];
                else kern_q8p_corr(cs + j, xb[j], 1);
            }
#endif
            if (on0) q8p2_half_n(acc[0], q, sc, xb, cs, NT);
            if (on1) q8p2_half_n(acc[1], q + 32, sc + 16, xb, cs, NT);
        }
#pragma GCC unroll 8
        for (int j = 0; j < NT; j++) {
            part[0][j][l] = acc[0][j];
            part[1][j][l] = acc[1][j];
        }
    }
#pragma GCC unroll 2
    for (int h = 0; h < 2; h++) {
        if (lo[h] >= hi[h]) continue;
        float *yr = y + g * KERN_Q8P_ROWS + 8 * h;
        __m256i m = q8p2_mask(lo[h], hi[h]);
        const bool whole = lo[h] == 0 && hi[h] == 8;
#pragma GCC unroll 8
        for (int j = 0; j < NT; j++) {
            __m256 *a = part[h][j];
            for (int w = 4; w >= 1; w /= 2)
                for (int i = 0; i < w; i++) a[i] = _mm256_add_ps(a[i], a[i + w]);
            if (whole) _mm256_storeu_ps(yr + (t0 + j) * y_ld, a[0]);
            else _mm256_maskstore_ps(yr + (t0 + j) * y_ld, m, a[0]);
        }
    }
}

static void q8p2_group_n(float *y, int64_t y_ld, const uint8_t *gp, int64_t nb, int64_t g,
                         const struct kern_q8_block *xq, const int32_t *cx, int64_t t0, int64_t r0, int64_t r1,
                         int nt)
{
    switch (nt) {
    case 8: q8p2_group(y, y_ld, gp, nb, g, xq, cx, t0, r0, r1, 8); break;
    case 7: q8p2_group(y, y_ld, gp, nb, g, xq, cx, t0, r0, r1, 7); break;
    case 6: q8p2_group(y, y_ld, gp, nb, g, xq, cx, t0, r0, r1, 6); break;
    case 5: q8p2_group(y, y_ld, gp, nb, g, xq, cx, t0, r0, r1, 5); break;
    case 4: q8p2_group(y, y_ld, gp, nb, g, xq, cx, t0, r0, r1, 4); break;
    case 3: q8p2_group(y, y_ld, gp, nb, g, xq, cx, t0, r0, r1, 3); break;
    case 2: q8p2_group(y, y_ld, gp, nb, g, xq, cx, t0, r0, r1, 2); break;
    default: q8p2_group(y, y_ld, gp, nb, g, xq, cx, t0, r0, r1, 1); break;
    }
}

/* Rows [r0, r1) x all tokens by the decode tiles (notes 4, 6): one stream for a decode step;
 * more tokens in row panels of about Q8P2_PANEL_BYTES, the tokens split evenly into tiles of
 * at most Q8P2_TMAX inside, so a panel comes from L2 for every token tile but the first. */
static void q8p2_rows(float *y, int64_t y_ld, const uint8_t *wp, const struct kern_q8_block *xq, const int32_t *cx,
                      int64_t n_tok, int64_t nb, int64_t r0, int64_t r1)
{
    const size_t gb = kern_q8p_group_bytes(nb * KERN_Q8_BLOCK);
    const int64_t ga = r0 / KERN_Q8P_ROWS, gz = (r1 + KERN_Q8P_ROWS - 1) / KERN_Q8P_ROWS;
    const int64_t n_tt = (n_tok + Q8P2_TMAX - 1) / Q8P2_TMAX;
    const int64_t panel = n_tt == 1 ? gz - ga : HS_MAX((int64_t)(Q8P2_PANEL_BYTES / gb), (int64_t)1);
    for (int64_t p0 = ga; p0 < gz; p0 += panel) {
        int64_t p1 = HS_MIN(p0 + panel, gz);
        for (int64_t tt = 0; tt < n_tt; tt++) {
            int64_t t = n_tok * tt / n_tt;
            int nt = (int)(n_tok * (tt + 1) / n_tt - t);
            for (int64_t g = p0; g < p1; g++) q8p2_group_n(y, y_ld, wp + (size_t)g * gb, nb, g, xq, cx, t, r0, r1, nt);
        }
    }
}

void KERN_AVX2_NAME(kern_matmul_q8p)(float *y, int64_t y_ld, const void *wp, const struct kern_q8_block *xq,
                                     const int32_t *cx, int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    const int64_t nb = k / KERN_Q8_BLOCK;
    if (r0 >= r1 || n_tok < 1) return;
    if (n_tok >= Q8P2_PANEL_MIN) {
        /* the whole halves inside [r0, r1) through the rows' panel path (note 5) */
        int64_t h0 = (r0 + 7) / 8, h1 = r1 / 8;
        if (h0 < h1 && KERN_AVX2_NAME(kern_q8p_panels)(y, y_ld, wp, xq, n_tok, k, h0, h1)) {
            if (r0 < 8 * h0) q8p2_rows(y, y_ld, wp, xq, cx, n_tok, nb, r0, 8 * h0);
            if (8 * h1 < r1) q8p2_rows(y, y_ld, wp, xq, cx, n_tok, nb, 8 * h1, r1);
            return;
        }
    }
    q8p2_rows(y, y_ld, wp, xq, cx, n_tok, nb, r0, r1);
}

#else
typedef int kern_q8p_avx2_unused; /* not x86: the variant does not exist */
#endif
