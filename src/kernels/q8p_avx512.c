/*
 * q8p_avx512.c — the Q8_0 matmul over the panel layout (q8p.c) with AVX-512 VNNI: one kernel
 * for a decode token, a decode step of several sequences and a prefill, with the weights
 * packed once at engine start (kern_ops.matmul_q8p of the "avx512" and "avx512vnni" tables).
 * Bit-identical to the scalar Q8_0 matmul on the unpacked rows (matmul.c). Compiled with the
 * Makefile's AVX-512 flags.
 *
 * Design note:
 *   1. Lane i of every zmm is row 16g + i of a 16-row group. Per block and step s (0..7) one
 *      vpdpbusd of the packed weights (q + 128, unsigned) with the token's quants 4s..4s+3
 *      (signed, broadcast) adds four products to each row's int32 block sum; after 8 steps
 *      the lane holds sum (w + 128) x = sum w x + 128 sum x; the chain starts from the
 *      token's -128 * sum x for the block (kern_q8p_corr: the caller's cx, or computed here
 *      when cx is NULL), so it ends at the exact integer block sum, with no horizontal add.
 *   2. The float steps are the Q8_0 contract's (kernels.h; matmul_avx512.c note 4): dw * dx
 *      rounded once, one fma per block into the row's partial sum b % 8, blocks ascending,
 *      then the halving tree 4, 2, 1; lane-wise, so each row is the scalar code's row. The
 *      layout puts the blocks of one partial sum in consecutive slots (q8p.c note 4), so a
 *      tile runs partial sum 0 over all its blocks, then 1, ..., 7: one zmm per (group,
 *      token) held in a register through the whole run, stored once at its end (8 per
 *      pair, then the tree), while the weights are still read front to back.
 *   3. A tile is NG groups x NT tokens (constants after inlining): each weight vector is
 *      loaded once per tile and used NT times; its NG x NT block sums and partial sums are
 *      registers. A decode step (n_tok <= Q8P_TMAX) runs NG = 1, NT = n_tok: one
 *      sequential stream through the packed matrix with software prefetch (two groups at
 *      once, or four for one token, measured slower from memory: more streams). More
 *      tokens (a decode step of 9 and more sequences, a prefill) run row panels of about
 *      Q8P_PANEL_BYTES with 2-group x 6-token tiles inside (the tokens split evenly into
 *      tiles of 6 or 5 ...), so each panel comes from L2 per token tile (measured faster
 *      than two 8-token decode passes per group at 12 and 16 tokens).
 *   4. Any r0, r1: a group that is only partly inside [r0, r1) is computed whole and stored
 *      with a mask (its other lanes are independent and thrown away), so a thread split
 *      that cuts a group cannot change a bit. Padding rows compute zeros, never stored.
 *   5. The decode prefetch goes to L2 (T1), not L1: a step of 8 sequences broadcasts its
 *      activations (8 x 36 bytes per block, 32 KiB at k = 3584) from L1, and weight lines
 *      prefetched into L1 pushed them out. Three or more tokens per tile consume a group's
 *      bytes more slowly, so their prefetch runs further ahead (8 KiB; 2 KiB for 1-2).
 *      Measured on Zen 4 against T0 at 2 KiB for all (bench/ab_step.c, 2 threads, 3 runs):
 *      per step 1.29-1.36x at 8 sequences, 1.04-1.20x at 4, 0.95-1.02x at 3, 1.05-1.09x at
 *      2, 1.03-1.15x at 1 (bench/profile.md round 16).
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <string.h>

#include "kernels/kernels.h"

#define INLINE static inline __attribute__((always_inline))
#define Q8P_TMAX 8                   /* tokens per tile at most (registers: note 3), and of one stream */
#define Q8P_PTOKS 6                  /* tokens per tile of a prefill's 2-group tiles */
#define Q8P_PANEL_BYTES (256 * 1024) /* packed weights per row panel of a several-token call */
#define Q8P_PREFETCH 2048            /* bytes ahead a tile of 1 or 2 tokens prefetches (into L2) */
#define Q8P_PREFETCH_N 8192          /* ... and a tile of 3 to Q8P_TMAX tokens */
#define Q8P_CX_MAX 16384             /* offset shares one call with cx == NULL computes at once */

/* Slot sl (block b) of NG groups x NT tokens into acc, the running partial sum b % 8. */
INLINE void q8p_slot(__m512 acc[][Q8P_TMAX], const uint8_t *const *gp, int64_t sl, int64_t nb, int64_t b,
                     const struct kern_q8_block *xq, const int32_t *cx, int NG, int NT)
{
    __m512i is[2][Q8P_TMAX];
    /* a decode tile streams one group: the slot's lines Q8P_PREFETCH(_N) ahead into L2
     * (the second of a pair also takes the scales' line; the stream runs on into the next
     * group; note 5). A prefill's 2-group tiles read a panel that the first token tile
     * brought into L2. */
    if (NG == 1) {
        const char *ahead = (const char *)gp[0] + kern_q8p_quants_at(sl) + (NT <= 2 ? Q8P_PREFETCH : Q8P_PREFETCH_N);
#pragma GCC unroll 9
        for (int c = 0; c < 8 + (sl & 1); c++) _mm_prefetch(ahead + 64 * c, _MM_HINT_T1);
    }
    /* each block sum starts from the token's share, -128 * sum x (note 1) */
#pragma GCC unroll 8
    for (int j = 0; j < NT; j++)
#pragma GCC unroll 4
        for (int g = 0; g < NG; g++) is[g][j] = _mm512_set1_epi32(cx[j * nb + b]);
#pragma GCC unroll 8
    for (int s = 0; s < 8; s++) {
        __m512i wv[2];
#pragma GCC unroll 4
        for (int g = 0; g < NG; g++) wv[g] = _mm512_load_si512(gp[g] + kern_q8p_quants_at(sl) + 64 * s);
#pragma GCC unroll 8
        for (int j = 0; j < NT; j++) {
            int32_t four;
            memcpy(&four, xq[j * nb + b].q + 4 * s, 4);
            __m512i xv = _mm512_set1_epi32(four);
#pragma GCC unroll 4
            for (int g = 0; g < NG; g++) is[g][j] = _mm512_dpbusd_epi32(is[g][j], wv[g], xv);
        }
    }
#pragma GCC unroll 4
    for (int g = 0; g < NG; g++) {
        __m512 dw = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(gp[g] + kern_q8p_scales_at(sl))));
#pragma GCC unroll 8
        for (int j = 0; j < NT; j++) {
            __m512 f = _mm512_cvtepi32_ps(is[g][j]);
            __m512 sc = _mm512_mul_ps(dw, _mm512_set1_ps(xq[j * nb + b].d));
            acc[g][j] = _mm512_fmadd_ps(sc, f, acc[g][j]);
        }
    }
}

/* Groups g0 .. g0+NG-1 (rows 16 g0 ..) x tokens t0 .. t0+NT-1; rows outside [r0, r1) are
 * not stored (note 4). xq and cx start at token t0. */
INLINE void q8p_tile(float *y, int64_t y_ld, const uint8_t *wp, size_t gb, int64_t nb, int64_t g0,
                     const struct kern_q8_block *xq, const int32_t *cx, int64_t t0, int64_t r0, int64_t r1,
                     int NG, int NT)
{
    __m512 part[2][Q8P_TMAX][KERN_Q8_LANES];
    const uint8_t *gp[2];
#pragma GCC unroll 4
    for (int g = 0; g < NG; g++) gp[g] = wp + (size_t)(g0 + g) * gb;
    /* partial sum l over its blocks l, l + 8, ... in slots sl0 .. (note 2) */
    int64_t sl = 0;
    for (int l = 0; l < KERN_Q8_LANES; l++) {
        __m512 acc[2][Q8P_TMAX];
#pragma GCC unroll 4
        for (int g = 0; g < NG; g++)
#pragma GCC unroll 8
            for (int j = 0; j < NT; j++) acc[g][j] = _mm512_setzero_ps();
        for (int64_t b = l; b < nb; b += KERN_Q8_LANES, sl++) q8p_slot(acc, gp, sl, nb, b, xq, cx, NG, NT);
#pragma GCC unroll 4
        for (int g = 0; g < NG; g++)
#pragma GCC unroll 8
            for (int j = 0; j < NT; j++) part[g][j][l] = acc[g][j];
    }
#pragma GCC unroll 4
    for (int g = 0; g < NG; g++) {
        int64_t r = (g0 + g) * KERN_Q8P_ROWS;
        int64_t lo = HS_MAX(r0 - r, (int64_t)0), hi = HS_MIN(r1 - r, (int64_t)KERN_Q8P_ROWS);
        if (lo >= hi) continue;
        __mmask16 m = (__mmask16)((((uint32_t)1 << hi) - 1) & ~(((uint32_t)1 << lo) - 1));
#pragma GCC unroll 8
        for (int j = 0; j < NT; j++) {
            __m512 *a = part[g][j];
            for (int h = 4; h >= 1; h /= 2)
                for (int l = 0; l < h; l++) a[l] = _mm512_add_ps(a[l], a[l + h]);
            _mm512_mask_storeu_ps(y + (t0 + j) * y_ld + r, m, a[0]);
        }
    }
}

/* The tile for NG groups and nt <= Q8P_TMAX tokens (note 3). */
#define Q8P_NT_CASES(NG)                                                                              \
    switch (nt) {                                                                                     \
    case 8: q8p_tile(y, y_ld, wp, gb, nb, g0, xq, cx, t0, r0, r1, NG, 8); break;                       \
    case 7: q8p_tile(y, y_ld, wp, gb, nb, g0, xq, cx, t0, r0, r1, NG, 7); break;                       \
    case 6: q8p_tile(y, y_ld, wp, gb, nb, g0, xq, cx, t0, r0, r1, NG, 6); break;                       \
    case 5: q8p_tile(y, y_ld, wp, gb, nb, g0, xq, cx, t0, r0, r1, NG, 5); break;                       \
    case 4: q8p_tile(y, y_ld, wp, gb, nb, g0, xq, cx, t0, r0, r1, NG, 4); break;                       \
    case 3: q8p_tile(y, y_ld, wp, gb, nb, g0, xq, cx, t0, r0, r1, NG, 3); break;                       \
    case 2: q8p_tile(y, y_ld, wp, gb, nb, g0, xq, cx, t0, r0, r1, NG, 2); break;                       \
    default: q8p_tile(y, y_ld, wp, gb, nb, g0, xq, cx, t0, r0, r1, NG, 1); break;                      \
    }

static void q8p_tile_1(float *y, int64_t y_ld, const uint8_t *wp, size_t gb, int64_t nb, int64_t g0,
                       const struct kern_q8_block *xq, const int32_t *cx, int64_t t0, int64_t r0, int64_t r1, int nt)
{
    Q8P_NT_CASES(1)
}

static void q8p_tile_2(float *y, int64_t y_ld, const uint8_t *wp, size_t gb, int64_t nb, int64_t g0,
                       const struct kern_q8_block *xq, const int32_t *cx, int64_t t0, int64_t r0, int64_t r1, int nt)
{
    Q8P_NT_CASES(2)
}

/* The matmul with the offset shares cx at hand (xq and cx from token 0). */
static void q8p_rows(float *y, int64_t y_ld, const uint8_t *wp, const struct kern_q8_block *xq, const int32_t *cx,
                     int64_t n_tok, int64_t nb, int64_t r0, int64_t r1)
{
    const size_t gb = kern_q8p_group_bytes(nb * KERN_Q8_BLOCK);
    const int64_t ga = r0 / KERN_Q8P_ROWS, gz = (r1 + KERN_Q8P_ROWS - 1) / KERN_Q8P_ROWS;
    if (n_tok <= Q8P_TMAX) { /* a decode step: one stream, each group read once */
        for (int64_t g = ga; g < gz; g++) q8p_tile_1(y, y_ld, wp, gb, nb, g, xq, cx, 0, r0, r1, (int)n_tok);
        return;
    }
    /* token tiles of Q8P_PTOKS or one fewer (9 tokens: 4 + 5, not 6 + 3) */
    const int64_t n_tt = (n_tok + Q8P_PTOKS - 1) / Q8P_PTOKS;
    const int64_t panel = HS_MAX((int64_t)(Q8P_PANEL_BYTES / gb), (int64_t)1);
    for (int64_t p0 = ga; p0 < gz; p0 += panel) {
        int64_t p1 = HS_MIN(p0 + panel, gz);
        for (int64_t tt = 0; tt < n_tt; tt++) {
            int64_t t = n_tok * tt / n_tt;
            int nt = (int)(n_tok * (tt + 1) / n_tt - t);
            int64_t g = p0;
            for (; g + 2 <= p1; g += 2) q8p_tile_2(y, y_ld, wp, gb, nb, g, xq + t * nb, cx + t * nb, t, r0, r1, nt);
            if (g < p1) q8p_tile_1(y, y_ld, wp, gb, nb, g, xq + t * nb, cx + t * nb, t, r0, r1, nt);
        }
    }
}

void kern_matmul_q8p_avx512(float *y, int64_t y_ld, const void *wp, const struct kern_q8_block *xq,
                            const int32_t *cx, int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    const int64_t nb = k / KERN_Q8_BLOCK;
    if (r0 >= r1 || n_tok < 1) return;
    if (cx) {
        q8p_rows(y, y_ld, wp, xq, cx, n_tok, nb, r0, r1);
        return;
    }
    /* no shares given: compute them for as many tokens at a time as the buffer holds (at
     * least a decode step's; tokens are independent, so the pieces change no bit) */
    int32_t buf[Q8P_CX_MAX] __attribute__((aligned(64)));
    _Static_assert(Q8P_CX_MAX >= Q8P_TMAX * (KERN_Q8P_KMAX / KERN_Q8_BLOCK), "a decode tile's shares fit");
    const int64_t step = HS_MAX(Q8P_CX_MAX / nb, (int64_t)Q8P_TMAX);
    for (int64_t t = 0; t < n_tok; t += step) {
        int64_t nt = HS_MIN(step, n_tok - t);
        kern_q8p_corr(buf, xq + t * nb, nt * nb);
        q8p_rows(y + t * y_ld, y_ld, wp, xq + t * nb, buf, nt, nb, r0, r1);
    }
}

#else
typedef int kern_q8p_avx512_unused; /* not x86: the variant does not exist */
#endif
