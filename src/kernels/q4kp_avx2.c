/*
 * q4kp_avx2.c — the Q4_K matmul over the row-group layout (q4kp.c) with AVX2: a decode token,
 * a decode step of several sequences and a prefill, over the weights packed once at engine
 * start (kern_ops.matmul_kp of the "avx2" table, through kp.c). Bit-identical to the scalar
 * Q4_K matmul on the unpacked rows (q4k.c). Compiled with the Makefile's AVX2 flags.
 *
 * Design note:
 *   1. A 64-byte vector of the layout is two ymm: bytes 0..31 hold rows 16g .. 16g+7 (half
 *      0), bytes 32..63 rows 16g+8 .. 16g+15 (half 1). A tile works on one half: dword lane i
 *      of every ymm is row 16g + 8h + i. Masked (low nibbles) or shifted and masked (high), a
 *      half vector is vpmaddubsw's unsigned operand (4 quants 0..15 per row) against 4 of the
 *      token's int8 quants broadcast: two pair sums per lane of at most 2 * 15 * 127, so the
 *      8 steps of a sub-block add in int16 (at most 30480 < 2^15: exact). One vpmaddwd with
 *      (sc_s, sc_s) int16 pairs then scales and widens: sc_s * dot_s per lane, exact in int32,
 *      summed over the sub-blocks into isum (q4k_avx2.c note 2 does the same on its per-call
 *      panels). msum = sum_s m_s * (bsum_2s + bsum_2s+1) is one vpmaddwd per sub-block of
 *      (m_s, m_s) with the token's bsum dword s. All integer: exact in any order.
 *   2. The float steps are the Q4_K contract's (kernels.h; q4k.c), lane-wise: dw = d * dx and
 *      dm = dmin * dx rounded once each, acc = fma(dw, isum, acc), acc = fma(-dm, msum, acc)
 *      (vfnmadd: negating a factor is exact), super-blocks ascending, one accumulator per
 *      (row, token) in a register for the whole row. Each output is the scalar code's.
 *   3. A tile is one half x NT <= KP2_TMAX tokens: NT dot sums (int16) and NT isums live
 *      across a super-block, 2 NT + 4 of the 16 ymm. A decode step of n_tok <= 2 KP2_TMAX
 *      sequences walks each group super-block by super-block: the block's 37 lines come
 *      from memory once (prefetched KP2_PREFETCH bytes ahead into L2, one sequential stream
 *      through the packed matrix), then both halves x one or two token tiles (8 = 4 + 4,
 *      5 = 3 + 2) run on it from L1, their accumulators kept in memory between blocks. The
 *      block step is out of line there: four inlined copies of its unrolled body made 8
 *      tokens 1.2-1.3x slower than the rows' path, one copy per token count 0.6-0.9x of it.
 *      Where the panel path of note 5 does not apply (rows of more than 48 super-blocks),
 *      more tokens run row panels of about KP2_PANEL_BYTES with the token tiles inside.
 *   4. Any r0, r1: a half only partly inside [r0, r1) is computed whole and stored with a
 *      lane mask (vmaskmovps; its other lanes are independent sums, thrown away), so a thread
 *      split that cuts a group cannot change a bit. Padding rows compute zeros, never stored.
 *   5. More than 2 KP2_TMAX tokens (a prefill, a step of 9 or more sequences) take the panel
 *      path of the Q4_K rows (q4k_avx2.c note 2) for the whole groups of [r0, r1): its panel
 *      blocks hold the quants unpacked and the mins as pairs, built from the layout with
 *      loads, shifts and masks (q4p_pack_group_kp), and its tiles of 4 tokens then read them
 *      per token tile without unpacking. Measured at parity with the rows at 64 and 512
 *      tokens (one thread, bench/kp_bench.c); the tiles above unpack per token tile. The cut
 *      groups at the ends of [r0, r1) stay here. Same bits either way (note 2).
 *   6. Built a second time with KERN_AVXVNNI (q4kp_avxvnni.c, the "avxvnni" table; entry
 *      kern_matmul_q4kp_avxvnni, its panels kern_q4kp_panels_avxvnni): a sub-block's 8
 *      steps are vpdpbusd into int32 lanes (|dot| <= 32 * 15 * 127, past int16), scaled by
 *      one vpmulld with sc_s as int32 lanes, and the mins added by vpdpwssd: per sub-block
 *      and token 10 instructions where note 1 takes 18. The same integers, so the same
 *      bits. Measured (kp_bench --wt q4k --variant avxvnni --base avx2, Zen 5, one thread,
 *      weights from memory): new / old 0.99-1.0 at 1 token (memory-bound), 0.97 at 2,
 *      0.75-0.86 at 4, 0.77-0.81 at 8.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kernels_int.h"
#include "kernels/vec_avx2_int.h"

#define INLINE static inline __attribute__((always_inline))
#define KP2_TMAX 4                   /* tokens per tile at most (registers: note 3) */
#ifndef KP2_PANEL_BYTES
#define KP2_PANEL_BYTES (192 * 1024) /* packed weights per row panel of a several-token call */
#endif
#ifndef KP2_PREFETCH
#define KP2_PREFETCH 4096            /* bytes ahead the first tile of a decode group prefetches */
#endif

INLINE __m256i bcast32(const void *p)
{
    int32_t v;
    memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
}

/* 8 bytes at p (one per row of a half) as (v, v) int16 pairs, lane i = byte i. */
INLINE __m256i pairs8(const uint8_t *p)
{
    __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)p));
    return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
}

/* Super-block sb (its bytes in the group), half h, tokens xb[0 .. NT) into acc (note 1, 2). */
INLINE void q4kp2_sb(__m256 *acc, const uint8_t *sb, int h, const struct kern_q8k_block *const *xb, int NT)
{
    const __m256i m4 = _mm256_set1_epi8(15);
    const uint8_t *qs = sb + 32 * h;
    __m256i is[KP2_TMAX], ms[KP2_TMAX];
#pragma GCC unroll 8
    for (int s = 0; s < 8; s++) { /* sub-block s: chunk s / 2, low (even) or high nibbles */
        const int j = s / 2, hi = s % 2;
        __m256i d[KP2_TMAX];
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) d[t] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int u = 0; u < 8; u++) {
            __m256i v = _mm256_load_si256((const __m256i *)(const void *)(qs + 64 * (8 * j + u)));
            __m256i wv = _mm256_and_si256(hi ? _mm256_srli_epi16(v, 4) : v, m4);
#pragma GCC unroll 4
            for (int t = 0; t < NT; t++) {
                __m256i xv = bcast32(xb[t]->q + 64 * j + 32 * hi + 4 * u);
#ifdef KERN_AVXVNNI
                d[t] = _mm256_dpbusd_avx_epi32(d[t], wv, xv); /* note 6 */
#else
                d[t] = _mm256_add_epi16(d[t], _mm256_maddubs_epi16(wv, xv));
#endif
            }
        }
#ifdef KERN_AVXVNNI
        __m256i sc = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(sb + 2048 + 16 * s + 8 * h)));
#else
        __m256i sc = pairs8(sb + 2048 + 16 * s + 8 * h);
#endif
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
#ifdef KERN_AVXVNNI
            __m256i p = _mm256_mullo_epi32(d[t], sc);
#else
            __m256i p = _mm256_madd_epi16(d[t], sc);
#endif
            is[t] = s == 0 ? p : _mm256_add_epi32(is[t], p);
        }
    }
#pragma GCC unroll 8
    for (int s = 0; s < 8; s++) {
        __m256i m = pairs8(sb + 2176 + 16 * s + 8 * h);
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) {
            __m256i xs = bcast32(xb[t]->bsum + 2 * s);
            ms[t] = s == 0 ? _mm256_madd_epi16(m, xs) : i16_dot_add(ms[t], m, xs);
        }
    }
    __m256 dw = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(const void *)(sb + 2304 + 16 * h)));
    __m256 dmin = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(const void *)(sb + 2336 + 16 * h)));
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) {
        __m256 dx = _mm256_set1_ps(xb[t]->d);
        __m256 a = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(is[t]), acc[t]);
        acc[t] = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, dx), _mm256_cvtepi32_ps(ms[t]), a);
    }
}

/* Stores the NT accumulators of half h of group g, tokens t0 .. t0+NT-1; rows outside
 * [r0, r1) are not stored (note 4). */
INLINE void q4kp2_store(float *y, int64_t y_ld, const __m256 *acc, int64_t g, int h, int64_t t0, int64_t r0,
                        int64_t r1, int NT)
{
    const int64_t r = g * KERN_KP_ROWS + 8 * h;
    const int64_t lo = HS_MAX(r0 - r, (int64_t)0), hi = HS_MIN(r1 - r, (int64_t)8);
    if (lo >= hi) return;
    if (lo == 0 && hi == 8) {
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) _mm256_storeu_ps(y + (t0 + t) * y_ld + r, acc[t]);
        return;
    }
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i m = _mm256_and_si256(_mm256_cmpgt_epi32(lane, _mm256_set1_epi32((int)lo - 1)),
                                       _mm256_cmpgt_epi32(_mm256_set1_epi32((int)hi), lane));
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) _mm256_maskstore_ps(y + (t0 + t) * y_ld + r, m, acc[t]);
}

/* Half h of group g (at gp) x tokens t0 .. t0+NT-1 (xq from token 0), every super-block. */
INLINE void q4kp2_tile(float *y, int64_t y_ld, const uint8_t *gp, int64_t nb, int64_t g, int h,
                       const struct kern_q8k_block *xq, int64_t t0, int64_t r0, int64_t r1, int NT)
{
    __m256 acc[KP2_TMAX];
    const struct kern_q8k_block *xb[KP2_TMAX];
#pragma GCC unroll 4
    for (int t = 0; t < NT; t++) acc[t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++) xb[t] = xq + (t0 + t) * nb + b;
        q4kp2_sb(acc, gp + (size_t)b * KERN_Q4KP_SB_BYTES, h, xb, NT);
    }
    q4kp2_store(y, y_ld, acc, g, h, t0, r0, r1, NT);
}

static void q4kp2_tiles(float *y, int64_t y_ld, const uint8_t *gp, int64_t nb, int64_t g, int h,
                        const struct kern_q8k_block *xq, int64_t t0, int64_t r0, int64_t r1, int nt)
{
    switch (nt) {
    case 4: q4kp2_tile(y, y_ld, gp, nb, g, h, xq, t0, r0, r1, 4); break;
    case 3: q4kp2_tile(y, y_ld, gp, nb, g, h, xq, t0, r0, r1, 3); break;
    case 2: q4kp2_tile(y, y_ld, gp, nb, g, h, xq, t0, r0, r1, 2); break;
    default: q4kp2_tile(y, y_ld, gp, nb, g, h, xq, t0, r0, r1, 1); break;
    }
}

/* q4kp2_sb for nt tokens, out of line: a decode group calls it for two halves and up to two
 * token tiles per super-block, and four inlined copies of the unrolled step would crowd the
 * instruction caches. */
static __attribute__((noinline)) void q4kp2_sb_n(__m256 *acc, const uint8_t *sb, int h,
                                                  const struct kern_q8k_block *const *xb, int nt)
{
    switch (nt) {
    case 4: q4kp2_sb(acc, sb, h, xb, 4); break;
    case 3: q4kp2_sb(acc, sb, h, xb, 3); break;
    case 2: q4kp2_sb(acc, sb, h, xb, 2); break;
    default: q4kp2_sb(acc, sb, h, xb, 1); break;
    }
}

/* A decode step (note 3): group g, tokens [0, n_tok) with n_tok <= 2 KP2_TMAX, super-block
 * by super-block: each is prefetched KP2_PREFETCH ahead and read from memory once, then both
 * halves x one or two token tiles (balanced: 5 = 3 + 2) run on it; the accumulators of the
 * tiles live in memory between super-blocks (an f32 stored and loaded back is the same value). */
INLINE void q4kp2_dec(float *y, int64_t y_ld, const uint8_t *gp, int64_t nb, int64_t g,
                      const struct kern_q8k_block *xq, int64_t r0, int64_t r1, int NA, int NZ)
{
    __m256 acc[2][2][KP2_TMAX];
    const int h0 = g * KERN_KP_ROWS + 8 <= r0 ? 1 : 0, h1 = g * KERN_KP_ROWS + 8 >= r1 ? 1 : 2;
    for (int h = h0; h < h1; h++)
        for (int t = 0; t < KP2_TMAX; t++) acc[h][0][t] = acc[h][1][t] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *sb = gp + (size_t)b * KERN_Q4KP_SB_BYTES;
#pragma GCC unroll 37
        for (int c = 0; c < KERN_Q4KP_SB_BYTES / 64; c++)
            _mm_prefetch((const char *)sb + KP2_PREFETCH + 64 * c, _MM_HINT_T1);
        const struct kern_q8k_block *xb[2 * KP2_TMAX];
#pragma GCC unroll 8
        for (int t = 0; t < NA + NZ; t++) xb[t] = xq + t * nb + b;
        for (int h = h0; h < h1; h++) {
            q4kp2_sb_n(acc[h][0], sb, h, xb, NA);
            if (NZ) q4kp2_sb_n(acc[h][1], sb, h, xb + NA, NZ);
        }
    }
    for (int h = h0; h < h1; h++) {
        q4kp2_store(y, y_ld, acc[h][0], g, h, 0, r0, r1, NA);
        if (NZ) q4kp2_store(y, y_ld, acc[h][1], g, h, NA, r0, r1, NZ);
    }
}

static void q4kp2_decode(float *y, int64_t y_ld, const uint8_t *gp, int64_t nb, int64_t g,
                         const struct kern_q8k_block *xq, int64_t r0, int64_t r1, int n_tok)
{
    switch (n_tok) {
    case 8: q4kp2_dec(y, y_ld, gp, nb, g, xq, r0, r1, 4, 4); break;
    case 7: q4kp2_dec(y, y_ld, gp, nb, g, xq, r0, r1, 4, 3); break;
    case 6: q4kp2_dec(y, y_ld, gp, nb, g, xq, r0, r1, 3, 3); break;
    case 5: q4kp2_dec(y, y_ld, gp, nb, g, xq, r0, r1, 3, 2); break;
    case 4: q4kp2_dec(y, y_ld, gp, nb, g, xq, r0, r1, 4, 0); break;
    case 3: q4kp2_dec(y, y_ld, gp, nb, g, xq, r0, r1, 3, 0); break;
    case 2: q4kp2_dec(y, y_ld, gp, nb, g, xq, r0, r1, 2, 0); break;
    default: q4kp2_dec(y, y_ld, gp, nb, g, xq, r0, r1, 1, 0); break;
    }
}

/* Group g's halves that meet [r0, r1), tokens [t0, t0 + nt) in tiles of at most KP2_TMAX
 * (balanced: 5 = 3 + 2), each over every super-block (a panel of a several-token call). */
static void q4kp2_group(float *y, int64_t y_ld, const uint8_t *wp, size_t gb, int64_t nb, int64_t g,
                        const struct kern_q8k_block *xq, int64_t t0, int64_t nt, int64_t r0, int64_t r1)
{
    const uint8_t *gp = wp + (size_t)g * gb;
    const int64_t n_tt = (nt + KP2_TMAX - 1) / KP2_TMAX;
    for (int h = 0; h < 2; h++) {
        int64_t r = g * KERN_KP_ROWS + 8 * h;
        if (r + 8 <= r0 || r >= r1) continue;
        for (int64_t tt = 0; tt < n_tt; tt++) {
            int64_t a = nt * tt / n_tt, z = nt * (tt + 1) / n_tt;
            q4kp2_tiles(y, y_ld, gp, nb, g, h, xq, t0 + a, r0, r1, (int)(z - a));
        }
    }
}

void KERN_AVX2_NAME(kern_matmul_q4kp)(float *y, int64_t y_ld, const void *wp, const struct kern_q8k_block *xq,
                                     int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    if (r0 >= r1 || n_tok < 1) return;
    const int64_t nb = k / KERN_QK;
    const size_t gb = kern_q4kp_group_bytes(k);
    /* a prefill: the whole groups inside [r0, r1) through q4k_avx2.c's panel path, the cut
     * groups at the ends here (note 5) */
    const int64_t gi = (r0 + KERN_KP_ROWS - 1) / KERN_KP_ROWS, go = r1 / KERN_KP_ROWS;
    if (n_tok > 2 * KP2_TMAX && gi < go && KERN_AVX2_NAME(kern_q4kp_panels)(y, y_ld, wp, xq, n_tok, k, gi, go)) {
        if (r0 < gi * KERN_KP_ROWS) KERN_AVX2_NAME(kern_matmul_q4kp)(y, y_ld, wp, xq, n_tok, k, r0, gi * KERN_KP_ROWS);
        if (go * KERN_KP_ROWS < r1) KERN_AVX2_NAME(kern_matmul_q4kp)(y, y_ld, wp, xq, n_tok, k, go * KERN_KP_ROWS, r1);
        return;
    }
    const int64_t ga = r0 / KERN_KP_ROWS, gz = (r1 + KERN_KP_ROWS - 1) / KERN_KP_ROWS;
    if (n_tok <= 2 * KP2_TMAX) { /* a decode step: one stream, each group from memory once */
        for (int64_t g = ga; g < gz; g++)
            q4kp2_decode(y, y_ld, (const uint8_t *)wp + (size_t)g * gb, nb, g, xq, r0, r1, (int)n_tok);
        return;
    }
    /* row panels, token tiles inside (note 3) */
    const int64_t panel = HS_MAX((int64_t)(KP2_PANEL_BYTES / gb), (int64_t)1);
    for (int64_t p0 = ga; p0 < gz; p0 += panel) {
        int64_t p1 = HS_MIN(p0 + panel, gz);
        for (int64_t t = 0; t < n_tok; t += 2 * KP2_TMAX) {
            int64_t nt = HS_MIN((int64_t)(2 * KP2_TMAX), n_tok - t);
            for (int64_t g = p0; g < p1; g++) q4kp2_group(y, y_ld, (const uint8_t *)wp, gb, nb, g, xq, t, nt, r0, r1);
        }
    }
}

#else
typedef int kern_q4kp_avx2_unused; /* not x86: the variant does not exist */
#endif
