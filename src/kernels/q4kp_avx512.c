/*
 * q4kp_avx512.c — the Q4_K matmul over the row-group layout (q4kp.c) with AVX-512 VNNI: one
 * kernel for a decode token, a decode step of several sequences and a prefill, with the
 * weights packed once at engine start (kern_ops.matmul_kp of the "avx512" and "avx512vnni"
 * tables, through kp.c). Bit-identical to the scalar Q4_K matmul on the unpacked rows
 * (q4k.c). Compiled with the Makefile's AVX-512 flags.
 *
 * Design note:
 *   1. Lane i of every zmm is row 16g + i. A packed vector holds 4 qs bytes per row; masked
 *      (low nibbles) or shifted and masked (high) it is a vpdpbusd operand of 4 unsigned
 *      quants per row, against 4 of the token's int8 quants broadcast: 8 such steps make a
 *      sub-block's 32-product sum dot_s in every lane, exact in int32. isum = sum_s sc_s *
 *      dot_s takes one vpmulld per sub-block (the sums do not fit int16, so vpdpwssd with
 *      the scale cannot take them without the panel path's row interleave, q4k_avx512.c
 *      note 4). msum = sum_s m_s * (bsum_2s + bsum_2s+1) is one vpdpwssd per sub-block of
 *      (m_s, m_s) int16 lanes with the token's bsum dword s. All integer: exact in any order.
 *   2. The float steps are the Q4_K contract's (kernels.h; q4k.c): dw = d * dx and
 *      dm = dmin * dx rounded once each, acc = fma(dw, isum, acc), acc = fma(-dm, msum,
 *      acc) (vfnmadd: negating a factor is exact), super-blocks ascending, one accumulator
 *      per (row, token) that stays in a register for the whole row: lane-wise, so each
 *      output is the scalar code's.
 *   3. A tile is NG groups x NT tokens (constants after inlining), NG * NT <= 8: each
 *      weight vector is loaded and unpacked once per tile and used NT times. The low and
 *      the high sub-block of a chunk run one after the other (the chunk's 8 vectors are
 *      read twice, the second time from L1), so only one dot per (group, token) is live:
 *      with isum and acc that is 3 NG NT registers. A decode step (n_tok <= KP_TMAX) runs
 *      NG = 1, NT = n_tok: one sequential stream through the packed matrix with software
 *      prefetch into L2 (T1; q8p_avx512.c note 5). More tokens that do not take the
 *      rows' panel path (note 5: a step of 9-15 sequences, rows too long for it, the groups
 *      a thread split cuts) run row panels of about KP_PANEL_BYTES with tiles of KP_PNG
 *      groups x up to KP_PTOKS tokens inside, so a panel comes from L2 per token tile.
 *   4. Any r0, r1: a group only partly inside [r0, r1) is computed whole and stored with a
 *      mask (its other lanes are independent and thrown away), so a thread split that cuts
 *      a group cannot change a bit. Padding rows (zero blocks) compute zeros, never stored.
 *   5. A prefill (at least 16 tokens, rows of at most 49 super-blocks) takes the panel path
 *      of the Q4_K rows (q4k_avx512.c note 3) for the whole groups of [r0, r1): its blocks
 *      hold the quants unpacked, and unpacking a panel once per call costs little against
 *      hundreds of tokens, where the tiles above unpack per token tile and scale with
 *      vpmulld (measured 1.03-1.16x the rows' time at 512 tokens, one thread). The groups
 *      cut by [r0, r1), and 9 to 15 tokens, stay here. Same bits either way (note 2).
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kernels_int.h"

#define INLINE static inline __attribute__((always_inline))
#define KP_TMAX 8                    /* tokens per tile at most (registers: note 3), and of one stream */
#ifndef KP_PTOKS
#define KP_PTOKS 4                   /* tokens per tile of a several-token call */
#endif
#ifndef KP_PNG
#define KP_PNG 2                     /* groups per tile of a several-token call */
#endif
#define KP_PANEL_BYTES (256 * 1024)  /* packed weights per row panel of a several-token call */
#ifndef KP_PREFETCH
#define KP_PREFETCH 4096             /* bytes ahead a tile of 1 or 2 tokens prefetches (into L2) */
#endif
#ifndef KP_PREFETCH_N
#define KP_PREFETCH_N 8192           /* ... and a tile of 3 to KP_TMAX tokens */
#endif

INLINE __m512i bcast32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
}

/* Super-block b (sp[g]: its bytes in group g) of NG groups x NT tokens (xb[t]: token t's
 * activation block b) into acc (note 2). */
INLINE void q4kp_sb(__m512 acc[][KP_TMAX], const uint8_t *const *sp, const struct kern_q8k_block *const *xb,
                    int NG, int NT)
{
    const __m512i m4 = _mm512_set1_epi8(15);
    __m512i is[2][KP_TMAX];
    if (NG == 1) { /* one stream: its lines ahead into L2 (note 3) */
        const char *ahead = (const char *)sp[0] + (NT <= 2 ? KP_PREFETCH : KP_PREFETCH_N);
#pragma GCC unroll 37
        for (int c = 0; c < KERN_Q4KP_SB_BYTES / 64; c++) _mm_prefetch(ahead + 64 * c, _MM_HINT_T1);
    }
#pragma GCC unroll 8
    for (int s = 0; s < 8; s++) { /* sub-block s: chunk s / 2, low (even) or high nibbles */
        const int j = s / 2, hi = s % 2;
        __m512i d[2][KP_TMAX];
#pragma GCC unroll 2
        for (int g = 0; g < NG; g++)
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) d[g][t] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int u = 0; u < 8; u++) {
            __m512i wv[2];
#pragma GCC unroll 2
            for (int g = 0; g < NG; g++) {
                __m512i v = _mm512_load_si512(sp[g] + 64 * (8 * j + u));
                wv[g] = _mm512_and_si512(hi ? _mm512_srli_epi16(v, 4) : v, m4);
            }
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) {
                __m512i xv = bcast32(xb[t]->q + 64 * j + 32 * hi + 4 * u);
#pragma GCC unroll 2
                for (int g = 0; g < NG; g++) d[g][t] = _mm512_dpbusd_epi32(d[g][t], wv[g], xv);
            }
        }
#pragma GCC unroll 2
        for (int g = 0; g < NG; g++) {
            __m512i sc = _mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(sp[g] + 2048 + 16 * s)));
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) {
                __m512i p = _mm512_mullo_epi32(sc, d[g][t]);
                is[g][t] = s == 0 ? p : _mm512_add_epi32(is[g][t], p);
            }
        }
    }
#pragma GCC unroll 2
    for (int g = 0; g < NG; g++) {
        __m512i ms[KP_TMAX];
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) ms[t] = _mm512_setzero_si512();
#pragma GCC unroll 8
        for (int s = 0; s < 8; s++) {
            __m512i m = _mm512_cvtepu8_epi32(_mm_load_si128((const __m128i *)(sp[g] + 2176 + 16 * s)));
            m = _mm512_or_si512(m, _mm512_slli_epi32(m, 16)); /* (m_s, m_s) as int16 */
#pragma GCC unroll 8
            for (int t = 0; t < NT; t++) ms[t] = _mm512_dpwssd_epi32(ms[t], m, bcast32(xb[t]->bsum + 2 * s));
        }
        __m512 dw = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(sp[g] + 2304)));
        __m512 dmin = _mm512_cvtph_ps(_mm256_load_si256((const __m256i *)(sp[g] + 2336)));
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) {
            __m512 dx = _mm512_set1_ps(xb[t]->d);
            __m512 a = _mm512_fmadd_ps(_mm512_mul_ps(dw, dx), _mm512_cvtepi32_ps(is[g][t]), acc[g][t]);
            acc[g][t] = _mm512_fnmadd_ps(_mm512_mul_ps(dmin, dx), _mm512_cvtepi32_ps(ms[t]), a);
        }
    }
}

/* Groups g0 .. g0+NG-1 x tokens t0 .. t0+NT-1 (xq from token 0); rows outside [r0, r1) are
 * not stored (note 4). */
INLINE void q4kp_tile(float *y, int64_t y_ld, const uint8_t *wp, size_t gb, int64_t nb, int64_t g0,
                      const struct kern_q8k_block *xq, int64_t t0, int64_t r0, int64_t r1, int NG, int NT)
{
    __m512 acc[2][KP_TMAX];
#pragma GCC unroll 2
    for (int g = 0; g < NG; g++)
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) acc[g][t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *sp[2];
        const struct kern_q8k_block *xb[KP_TMAX];
#pragma GCC unroll 2
        for (int g = 0; g < NG; g++) sp[g] = wp + (size_t)(g0 + g) * gb + (size_t)b * KERN_Q4KP_SB_BYTES;
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) xb[t] = xq + (t0 + t) * nb + b;
        q4kp_sb(acc, sp, xb, NG, NT);
    }
#pragma GCC unroll 2
    for (int g = 0; g < NG; g++) {
        int64_t r = (g0 + g) * KERN_KP_ROWS;
        int64_t lo = HS_MAX(r0 - r, (int64_t)0), hi = HS_MIN(r1 - r, (int64_t)KERN_KP_ROWS);
        if (lo >= hi) continue;
        __mmask16 m = (__mmask16)((((uint32_t)1 << hi) - 1) & ~(((uint32_t)1 << lo) - 1));
#pragma GCC unroll 8
        for (int t = 0; t < NT; t++) _mm512_mask_storeu_ps(y + (t0 + t) * y_ld + r, m, acc[g][t]);
    }
}

/* The tile for NG groups and nt <= KP_TMAX / NG tokens (note 3). */
#define KP_NT_CASES(NG)                                                                   \
    switch (nt) {                                                                         \
    case 8: q4kp_tile(y, y_ld, wp, gb, nb, g0, xq, t0, r0, r1, NG, 8); break;              \
    case 7: q4kp_tile(y, y_ld, wp, gb, nb, g0, xq, t0, r0, r1, NG, 7); break;              \
    case 6: q4kp_tile(y, y_ld, wp, gb, nb, g0, xq, t0, r0, r1, NG, 6); break;              \
    case 5: q4kp_tile(y, y_ld, wp, gb, nb, g0, xq, t0, r0, r1, NG, 5); break;              \
    case 4: q4kp_tile(y, y_ld, wp, gb, nb, g0, xq, t0, r0, r1, NG, 4); break;              \
    case 3: q4kp_tile(y, y_ld, wp, gb, nb, g0, xq, t0, r0, r1, NG, 3); break;              \
    case 2: q4kp_tile(y, y_ld, wp, gb, nb, g0, xq, t0, r0, r1, NG, 2); break;              \
    default: q4kp_tile(y, y_ld, wp, gb, nb, g0, xq, t0, r0, r1, NG, 1); break;             \
    }

static void q4kp_tile_1(float *y, int64_t y_ld, const uint8_t *wp, size_t gb, int64_t nb, int64_t g0,
                        const struct kern_q8k_block *xq, int64_t t0, int64_t r0, int64_t r1, int nt)
{
    KP_NT_CASES(1)
}

static void q4kp_tile_2(float *y, int64_t y_ld, const uint8_t *wp, size_t gb, int64_t nb, int64_t g0,
                        const struct kern_q8k_block *xq, int64_t t0, int64_t r0, int64_t r1, int nt)
{
    switch (nt) { /* NG * NT <= 8 */
    case 4: q4kp_tile(y, y_ld, wp, gb, nb, g0, xq, t0, r0, r1, 2, 4); break;
    case 3: q4kp_tile(y, y_ld, wp, gb, nb, g0, xq, t0, r0, r1, 2, 3); break;
    case 2: q4kp_tile(y, y_ld, wp, gb, nb, g0, xq, t0, r0, r1, 2, 2); break;
    default: q4kp_tile(y, y_ld, wp, gb, nb, g0, xq, t0, r0, r1, 2, 1); break;
    }
}

void kern_matmul_q4kp_avx512(float *y, int64_t y_ld, const void *wp, const struct kern_q8k_block *xq,
                             int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    if (r0 >= r1 || n_tok < 1) return;
    const int64_t nb = k / KERN_QK;
    const size_t gb = kern_q4kp_group_bytes(k);
    /* a prefill: the whole groups inside [r0, r1) through q4k_avx512.c's panel path, the
     * cut groups at the ends here (note 5) */
    const int64_t gi = (r0 + KERN_KP_ROWS - 1) / KERN_KP_ROWS, go = r1 / KERN_KP_ROWS;
    if (n_tok > KP_TMAX && gi < go && kern_q4kp_panels_avx512(y, y_ld, wp, xq, n_tok, k, gi, go)) {
        if (r0 < gi * KERN_KP_ROWS) kern_matmul_q4kp_avx512(y, y_ld, wp, xq, n_tok, k, r0, gi * KERN_KP_ROWS);
        if (go * KERN_KP_ROWS < r1) kern_matmul_q4kp_avx512(y, y_ld, wp, xq, n_tok, k, go * KERN_KP_ROWS, r1);
        return;
    }
    const int64_t ga = r0 / KERN_KP_ROWS, gz = (r1 + KERN_KP_ROWS - 1) / KERN_KP_ROWS;
    if (n_tok <= KP_TMAX) { /* a decode step: one stream, each group read once */
        for (int64_t g = ga; g < gz; g++) q4kp_tile_1(y, y_ld, wp, gb, nb, g, xq, 0, r0, r1, (int)n_tok);
        return;
    }
    /* token tiles of KP_PTOKS or one fewer (9 tokens at 4: 3 + 3 + 3) */
    const int64_t n_tt = (n_tok + KP_PTOKS - 1) / KP_PTOKS;
    const int64_t panel = HS_MAX((int64_t)(KP_PANEL_BYTES / gb), (int64_t)1);
    for (int64_t p0 = ga; p0 < gz; p0 += panel) {
        int64_t p1 = HS_MIN(p0 + panel, gz);
        for (int64_t tt = 0; tt < n_tt; tt++) {
            int64_t t = n_tok * tt / n_tt;
            int nt = (int)(n_tok * (tt + 1) / n_tt - t);
            int64_t g = p0;
            if (KP_PNG == 2)
                for (; g + 2 <= p1; g += 2) q4kp_tile_2(y, y_ld, wp, gb, nb, g, xq, t, r0, r1, nt);
            for (; g < p1; g++) q4kp_tile_1(y, y_ld, wp, gb, nb, g, xq, t, r0, r1, nt);
        }
    }
}

#else
typedef int kern_q4kp_avx512_unused; /* not x86: the variant does not exist */
#endif
