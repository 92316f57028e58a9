/*
 * q6kp_avx2.c — the Q6_K matmul over the row-group layout (q6kp.c) with AVX2: the same packed
 * matrix the AVX-512 tables read (q6kp_avx512.c), for a decode token, a decode step of
 * several sequences and a prefill. Bit-identical to the scalar kern_matmul_q6k on the
 * unpacked rows (q6k.c; the Q6_K line of kernels.h's K-quant contract). Compiled with the
 * Makefile's AVX2 flags.
 *
 * Design note:
 *   1. A 64-byte layout vector is two ymm: bytes 0..31 are rows 16g + 0..7 (half e = 0),
 *      bytes 32..63 rows 16g + 8..15 (e = 1); dword lane i of a ymm is row 16g + 8e + i.
 *      A kernel works on one half at a time (16 ymm, no VNNI). The scale pairs and d of a
 *      half are the 16 bytes at +16e of their 32-byte fields.
 *   2. Group g = 8h + 2kk + uh of a super-block (values 128h + 32kk + 16uh ..) is 4 ymm of
 *      6-bit quants (0..63, vpmaddubsw's unsigned operand), u4 = 0..3: the ql vector
 *      16h + 8(kk & 1) + 4uh + u4 (low nibbles for kk < 2, high for kk >= 2) with the bit
 *      pair kk of the qh vector 8h + 4uh + u4 moved to bits 4, 5 (q6kp.c note 2). The
 *      activation dword of u4 is q[16g + 4u4 ..], broadcast.
 *   3. The integer sum is the contract's isum = sum_g sc_g (dot_g - 32 bsum_g), exact in any
 *      order: vpmaddubsw pairs are at most 2 x 63 x 127 = 16002 (activations in [-127, 127],
 *      kern_q8k_quantize), so two of them are added in int16 (<= 32004 < 2^15), then
 *      vpmaddwd with (sc_g, sc_g) (a vpshufb of the layout's pair (sc_2p, sc_2p+1),
 *      sign-extended by vpmovsxbw) widens and scales; the
 *      offset share is one vpmaddwd per pair p of (-32 sc_2p, -32 sc_2p+1) (|.| <= 4096:
 *      int16) with the token's (bsum_2p, bsum_2p+1), added to the same int32 sum. No step
 *      wraps (|isum| < 2^29, kernels.h).
 *   4. The float steps are the contract's, lane-wise: dw * dx rounded once (vcvtph2ps of
 *      the half's d times the token's d), one fma per block into the output's accumulator,
 *      blocks ascending; so n_tok, r0, r1 and the tiling cannot change a bit.
 *   5. Decode (at most Q6KP2_STREAM tokens, and any call whose rows are too long for note
 *      6's panel): the matrix is streamed once. For each group, super-block by super-block,
 *      half 0 then half 1 (the second half reads the lines the first brought to L1), each
 *      half in token tiles of at most Q6KP2_TT tokens, split evenly (7 = 4 + 3); a tile
 *      decodes its group's quants once into registers and uses them for all its tokens;
 *      the accumulators of the group's 2 x 8 outputs live on the stack, one load and store
 *      per block and token. Software prefetch into L2 (T1) Q6KP2_PF bytes ahead along the
 *      packed stream, by the first tile of each half, 7 lines in each of its 4 steps (note
 *      9). More tokens than that with long rows: row panels of about Q6KP2_PANEL_BYTES of
 *      packed groups, each panel read from memory by its first token chunk and from L2 by
 *      the others.
 *   6. Prefill (more than Q6KP2_STREAM tokens, rows of at most Q6KP2_PANEL_BLKS
 *      super-blocks): panels of 8-row halves are decoded once into a stack buffer (about
 *      114 KiB: the quants a byte each, the (sc_g, sc_g) and offset scale vectors, d as f32)
 *      and every token tile of Q6KP2_PT tokens runs over the panel with no decoding, as the
 *      rows' panel path does (q6k_avx2.c note 3); the layout already has a row per lane, so
 *      the decode needs no transpose.
 *   7. Any r0, r1: a half with no row inside [r0, r1) is skipped, a half cut by them is
 *      computed whole and stored with vmaskmovps (its other lanes are independent and thrown
 *      away), so a thread split that cuts a group cannot change a bit. Padding rows (zero
 *      blocks) compute zeros and are never stored.
 *   8. Code shape: with a whole super-block unrolled into one body (16 groups x NT tokens),
 *      GCC deferred the int32 adds and spilled every vpmaddwd result (about 600 ymm stack
 *      moves in the streaming function; the prefill ran at 1.05-1.08x the rows' panel
 *      path). So the bodies are small (the streaming half loops over h and uh at run time,
 *      4 groups unrolled; a decoded tile 2 groups, Q6KP2_GU) and an empty asm pins each
 *      group's sum in a register (q6kp2_group). objdump: the decoded tiles' group loop has no
 *      stack traffic (a few ymm per block around it: float accumulators, offset sums); the
 *      3- and 4-token streaming bodies keep up to 3 ymm on the stack (a store and a load
 *      each per body of 4 groups, against its 48-64 vpmaddubsw).
 *   9. Measured (bench/kp_bench.c --variant avx2, Zen 4 forced to AVX2, one thread, weights
 *      rotated from memory; a shared machine, so ratios move by +-10%): against the rows
 *      kernel kern_ops_for("avx2")->matmul_k, new / old about 0.8-1.0 at 1 token (both at
 *      the memory's pace, ~20 GB/s), 0.55-0.65 at 2, 0.5-0.7 at 4, 0.35-0.55 at 8,
 *      0.6-0.85 at 16, 0.7-0.9 at 64 and 0.75-0.9 at 512 tokens (1024x3584, 3584x1024,
 *      248320x1024). Prefetch: a burst of the half's 27 lines at its start measured 5-20%
 *      slower on 1-token calls than 7 a step; T0 at 4-8 KiB and NTA about 2x slower; 16 and
 *      64 KiB within the noise of 32. No better: token tiles over a decoded panel of 6
 *      instead of 4; for 5-8 tokens, a half decoded once to L1 (note 6's form) for both
 *      token tiles instead of in registers by each.
 *  10. Built a second time with KERN_AVXVNNI (q6kp_avxvnni.c, the "avxvnni" table; entry
 *      kern_matmul_q6kp_avxvnni): a group's 16 products are four vpdpbusd into one int32
 *      lane sum (|dot| <= 16 * 63 * 127), scaled by one vpmulld with sc_g as an int32 lane
 *      (q6kp2_sc: the high int16 of the (sc_g, sc_g) pair, arithmetic-shifted down), and
 *      the offset shares added by vpdpwssd: 6 instructions per group and token where note
 *      3 takes 10. The same integers, so the same bits. Measured (kp_bench --wt q6k
 *      --variant avxvnni --base avx2, Zen 5, one thread): new / old 0.91 at 2 tokens,
 *      0.84-0.87 at 4 to 512; one token at the memory's pace either way. Keeping the int16
 *      pair sums and scaling them with vpdpwssd (8 instructions) measured 0.88-0.95.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kquant_x86_int.h"
#include "kernels/vec_avx2_int.h"

#define INLINE static inline __attribute__((always_inline))
#define Q6KP2_PRAGMA(x) _Pragma(#x)
#define Q6KP2_UNROLL(n) Q6KP2_PRAGMA(GCC unroll n)
#define Q6KP2_STREAM 8                 /* at most this many tokens: the streaming path (note 5) */
#define Q6KP2_TT 4                     /* tokens per streaming tile at most (registers) */
#ifndef Q6KP2_PT
#define Q6KP2_PT 4                     /* tokens per tile over a decoded panel (note 6) */
#endif
#ifndef Q6KP2_GU
#define Q6KP2_GU 2                     /* groups in a decoded tile's loop body (note 8) */
#endif
#define Q6KP2_PANEL_BLKS 40            /* decoded half super-blocks per prefill panel (stack) */
#define Q6KP2_PANEL_BYTES (256 * 1024) /* packed bytes per panel of a long-row several-token call */
#ifndef Q6KP2_PF
#define Q6KP2_PF 32768                 /* prefetch distance along the packed stream (note 5) */
#endif
#ifndef Q6KP2_HINT
#define Q6KP2_HINT _MM_HINT_T1
#endif
#define Q6KP2_LINES (KERN_Q6KP_SB_BYTES / 64)

/* vpshufb control: int16 entry `odd` (0 or 1) of each dword in both of its int16s (bytes
 * 4k + 2 odd, 4k + 2 odd + 1 of the 16-byte lane, for dword k). */
INLINE __m256i q6kp2_dup_ctrl(int odd)
{
    const int o = 0x01000100 + 0x02020202 * odd;
    return _mm256_add_epi32(_mm256_set1_epi32(o), _mm256_setr_epi32(0, 0x04040404, 0x08080808, 0x0c0c0c0c, 0,
                                                                     0x04040404, 0x08080808, 0x0c0c0c0c));
}

/* The 6-bit quants of group (h, kk, uh) step u4 of half e (note 2). */
INLINE __m256i q6kp2_quants(const uint8_t *sb, int e, int h, int kk, int uh, int u4)
{
    const __m256i m0f = _mm256_set1_epi8(0x0f), m30 = _mm256_set1_epi8(0x30);
    const int u = 4 * uh + u4;
    __m256i ql = _mm256_load_si256((const __m256i *)(sb + 64 * (16 * h + 8 * (kk & 1) + u) + 32 * e));
    __m256i qh = _mm256_load_si256((const __m256i *)(sb + 2048 + 64 * (8 * h + u) + 32 * e));
    __m256i lo = _mm256_and_si256(kk < 2 ? ql : _mm256_srli_epi16(ql, 4), m0f);
    /* bits 2kk, 2kk+1 of each byte to bits 4, 5 (16-bit shifts by < 8 under the mask keep
     * every byte's own bits) */
    __m256i hi = kk == 0 ? _mm256_slli_epi16(qh, 4) : kk == 1 ? _mm256_slli_epi16(qh, 2)
               : kk == 2 ? qh : _mm256_srli_epi16(qh, 2);
    return _mm256_or_si256(lo, _mm256_and_si256(hi, m30));
}

/* Lane i = (sc_2p, sc_2p+1) of row 8e + i as int16 (note 3). */
INLINE __m256i q6kp2_pair(const uint8_t *sb, int e, int p)
{
    return _mm256_cvtepi8_epi16(_mm_load_si128((const __m128i *)(sb + 3072 + 32 * p + 16 * e)));
}

/* -32 times a scale pair vector (|.| <= 4096: exact in int16). */
INLINE __m256i q6kp2_off(__m256i pair) { return _mm256_sub_epi16(_mm256_setzero_si256(), _mm256_slli_epi16(pair, 5)); }

/* A group's scale lanes from its (sc_g, sc_g) int16 pairs: as they are, or sc_g as int32
 * for the AVX-VNNI build (note 10). */
INLINE __m256i q6kp2_sc(__m256i dup)
{
#ifdef KERN_AVXVNNI
    return _mm256_srai_epi32(dup, 16);
#else
    return dup;
#endif
}

/* isum += sc_g (dot of the 16 values of w with the activation quants at xg), w as 4 ymm,
 * sc from q6kp2_sc. */
INLINE __m256i q6kp2_group(__m256i isum, const __m256i w[4], __m256i sc, const int8_t *xg)
{
#ifdef KERN_AVXVNNI /* note 10 */
    __m256i d = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), w[0], kq_dup32(xg));
    d = _mm256_dpbusd_avx_epi32(d, w[1], kq_dup32(xg + 4));
    d = _mm256_dpbusd_avx_epi32(d, w[2], kq_dup32(xg + 8));
    d = _mm256_dpbusd_avx_epi32(d, w[3], kq_dup32(xg + 12));
    isum = _mm256_add_epi32(isum, _mm256_mullo_epi32(d, sc));
#else
    __m256i a = _mm256_add_epi16(_mm256_maddubs_epi16(w[0], kq_dup32(xg)), _mm256_maddubs_epi16(w[1], kq_dup32(xg + 4)));
    __m256i b = _mm256_add_epi16(_mm256_maddubs_epi16(w[2], kq_dup32(xg + 8)), _mm256_maddubs_epi16(w[3], kq_dup32(xg + 12)));
    isum = _mm256_add_epi32(isum, _mm256_madd_epi16(a, sc));
    isum = _mm256_add_epi32(isum, _mm256_madd_epi16(b, sc));
#endif
#ifndef Q6KP2_NO_PIN
    __asm__("" : "+x"(isum)); /* the sum here, in a register: else GCC defers the adds and spills */
#endif
    return isum;
}

/* acc[j] = fma(dw * dx_j, isum[j], acc[j]) for the tile's tokens (note 4). */
INLINE void q6kp2_apply(__m256 *acc, __m256 dv, const __m256i *isum, const struct kern_q8k_block *xb, int64_t nb,
                        int NT)
{
    _Pragma("GCC unroll 4")
    for (int j = 0; j < NT; j++) {
        __m256 dw = _mm256_mul_ps(dv, _mm256_set1_ps(xb[j * nb].d));
        acc[j] = _mm256_fmadd_ps(dw, _mm256_cvtepi32_ps(isum[j]), acc[j]);
    }
}

/* ---- streaming: the quants decoded in registers (note 5) ------------------------------ */

/* Half e of super-block sb for NT tokens (xb: token 0's activation block, token j at
 * xb[j nb]): acc[j] after the block. pf: prefetch the half's share of the lines pf bytes
 * ahead, or 0. */
INLINE void q6kp2_half(__m256 *acc, const uint8_t *sb, int e, const struct kern_q8k_block *xb, int64_t nb, int pf,
                       int NT)
{
    __m256i isum[Q6KP2_TT];
    _Pragma("GCC unroll 4")
    for (int j = 0; j < NT; j++) isum[j] = _mm256_setzero_si256();
    /* the offset shares first (note 3) */
    _Pragma("GCC unroll 1")
    for (int p = 0; p < 8; p++) {
        __m256i off = q6kp2_off(q6kp2_pair(sb, e, p));
        _Pragma("GCC unroll 4")
        for (int j = 0; j < NT; j++) isum[j] = i16_dot_add(isum[j], off, kq_dup32(xb[j * nb].bsum + 2 * p));
    }
    /* runtime loops over h and uh keep the body to 4 groups (unrolled, the compiler's
     * schedule spilled) */
    _Pragma("GCC unroll 1")
    for (int h = 0; h < 2; h++)
        _Pragma("GCC unroll 1")
        for (int uh = 0; uh < 2; uh++) {
            const __m256i ctrl = q6kp2_dup_ctrl(uh);
            if (pf) { /* the half's share of the super-block's lines pf bytes ahead, 7 a step */
                const char *ahead = (const char *)sb + pf + 64 * (27 * e + 7 * (2 * h + uh));
                _Pragma("GCC unroll 7")
                for (int l = 0; l < 7; l++)
                    if (7 * (2 * h + uh) + l < 27 && 27 * e + 7 * (2 * h + uh) + l < Q6KP2_LINES)
                        _mm_prefetch(ahead + 64 * l, Q6KP2_HINT);
            }
            _Pragma("GCC unroll 4")
            for (int kk = 0; kk < 4; kk++) {
                __m256i sc = q6kp2_sc(_mm256_shuffle_epi8(q6kp2_pair(sb, e, 4 * h + kk), ctrl)), w[4];
                _Pragma("GCC unroll 4")
                for (int u4 = 0; u4 < 4; u4++) w[u4] = q6kp2_quants(sb, e, h, kk, uh, u4);
                _Pragma("GCC unroll 4")
                for (int j = 0; j < NT; j++)
                    isum[j] = q6kp2_group(isum[j], w, sc, xb[j * nb].q + 128 * h + 32 * kk + 16 * uh);
            }
        }
    const __m256 dv = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(sb + 3328 + 16 * e)));
    q6kp2_apply(acc, dv, isum, xb, nb, NT);
}

static void q6kp2_half_n(__m256 *acc, const uint8_t *sb, int e, const struct kern_q8k_block *xb, int64_t nb, int pf,
                         int nt)
{
    switch (nt) {
    case 4: q6kp2_half(acc, sb, e, xb, nb, pf, 4); break;
    case 3: q6kp2_half(acc, sb, e, xb, nb, pf, 3); break;
    case 2: q6kp2_half(acc, sb, e, xb, nb, pf, 2); break;
    default: q6kp2_half(acc, sb, e, xb, nb, pf, 1); break;
    }
}

/* Stores lanes lo .. hi-1 of v at p (p + lane), the others untouched (note 7). */
INLINE void q6kp2_store(float *p, __m256 v, int lo, int hi)
{
    if (lo == 0 && hi == 8) {
        _mm256_storeu_ps(p, v);
        return;
    }
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i m = _mm256_and_si256(_mm256_cmpgt_epi32(_mm256_set1_epi32(hi), lane),
                                 _mm256_cmpgt_epi32(lane, _mm256_set1_epi32(lo - 1)));
    _mm256_maskstore_ps(p, m, v);
}

/* Groups [g0, g1) x tokens 0 .. n_tok-1 (n_tok <= Q6KP2_STREAM; xq and y from the chunk's
 * first token), rows outside [r0, r1) not stored. */
static void q6kp2_stream(float *y, int64_t y_ld, const uint8_t *wp, const struct kern_q8k_block *xq, int n_tok,
                         int64_t nb, int64_t g0, int64_t g1, int64_t r0, int64_t r1, int pf)
{
    const size_t gb = (size_t)nb * KERN_Q6KP_SB_BYTES;
    const int n_tt = (n_tok + Q6KP2_TT - 1) / Q6KP2_TT;
    for (int64_t g = g0; g < g1; g++) {
        __m256 acc[2][Q6KP2_STREAM];
        int lo[2], hi[2];
        for (int e = 0; e < 2; e++) {
            int64_t r = g * KERN_KP_ROWS + 8 * e;
            lo[e] = (int)HS_MAX(r0 - r, (int64_t)0);
            hi[e] = (int)HS_MIN(r1 - r, (int64_t)8);
            for (int j = 0; j < n_tok; j++) acc[e][j] = _mm256_setzero_ps();
        }
        const uint8_t *gp = wp + (size_t)g * gb;
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *sb = gp + (size_t)b * KERN_Q6KP_SB_BYTES;
            for (int e = 0; e < 2; e++) {
                if (lo[e] >= hi[e]) continue;
                for (int tt = 0; tt < n_tt; tt++) {
                    int t = n_tok * tt / n_tt, nt = n_tok * (tt + 1) / n_tt - t;
                    q6kp2_half_n(acc[e] + t, sb, e, xq + (int64_t)t * nb + b, nb, tt == 0 ? pf : 0, nt);
                }
            }
        }
        for (int e = 0; e < 2; e++)
            if (lo[e] < hi[e])
                for (int j = 0; j < n_tok; j++)
                    q6kp2_store(y + j * y_ld + g * KERN_KP_ROWS + 8 * e, acc[e][j], lo[e], hi[e]);
    }
}

/* ---- prefill: panels of decoded halves (note 6) --------------------------------------- */

/* Half e of one super-block, decoded. */
struct q6kp2_dec {
    __m256i w[16][4]; /* [g][u4] lane i = quants 16g + 4u4 .. +3 of row 8e + i (0..63) */
    __m256i sc[16];   /* [g] lane i = q6kp2_sc of (sc_g, sc_g) */
    __m256i off[8];   /* [p] lane i = (-32 sc_2p, -32 sc_2p+1) as int16 */
    __m256 dv;        /* lane i = d as f32 */
};

static void q6kp2_decode(struct q6kp2_dec *d, const uint8_t *sb, int e)
{
    _Pragma("GCC unroll 2")
    for (int h = 0; h < 2; h++)
        _Pragma("GCC unroll 4")
        for (int kk = 0; kk < 4; kk++) {
            const int p = 4 * h + kk;
            __m256i pair = q6kp2_pair(sb, e, p);
            d->off[p] = q6kp2_off(pair);
            _Pragma("GCC unroll 2")
            for (int uh = 0; uh < 2; uh++) {
                d->sc[2 * p + uh] = q6kp2_sc(_mm256_shuffle_epi8(pair, q6kp2_dup_ctrl(uh)));
                _Pragma("GCC unroll 4")
                for (int u4 = 0; u4 < 4; u4++) d->w[2 * p + uh][u4] = q6kp2_quants(sb, e, h, kk, uh, u4);
            }
        }
    d->dv = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(sb + 3328 + 16 * e)));
}

/* Tokens t0 .. t0+NT-1 against one decoded half pk[0 .. nb) (rows r ..; lanes lo .. hi-1
 * stored). */
INLINE void q6kp2_dtile(float *y, int64_t y_ld, const struct q6kp2_dec *pk, int64_t nb, int64_t r, int lo, int hi,
                        const struct kern_q8k_block *xq, int64_t t0, int NT)
{
    __m256 acc[Q6KP2_PT];
    _Pragma("GCC unroll 8")
    for (int j = 0; j < NT; j++) acc[j] = _mm256_setzero_ps();
    const struct kern_q8k_block *xt = xq + t0 * nb;
    for (int64_t b = 0; b < nb; b++) {
        const struct q6kp2_dec *d = pk + b;
        const struct kern_q8k_block *xb = xt + b;
        __m256i isum[Q6KP2_PT];
        _Pragma("GCC unroll 8")
        for (int j = 0; j < NT; j++) isum[j] = _mm256_setzero_si256();
        _Pragma("GCC unroll 8")
        for (int p = 0; p < 8; p++) {
            __m256i off = _mm256_load_si256(&d->off[p]);
            _Pragma("GCC unroll 8")
            for (int j = 0; j < NT; j++) isum[j] = i16_dot_add(isum[j], off, kq_dup32(xb[j * nb].bsum + 2 * p));
        }
        Q6KP2_UNROLL(Q6KP2_GU)
        for (int g = 0; g < 16; g++) {
            __m256i sc = _mm256_load_si256(&d->sc[g]), w[4];
            _Pragma("GCC unroll 4")
            for (int u4 = 0; u4 < 4; u4++) w[u4] = _mm256_load_si256(&d->w[g][u4]);
            _Pragma("GCC unroll 8")
            for (int j = 0; j < NT; j++) isum[j] = q6kp2_group(isum[j], w, sc, xb[j * nb].q + 16 * g);
        }
        q6kp2_apply(acc, d->dv, isum, xb, nb, NT);
    }
    _Pragma("GCC unroll 8")
    for (int j = 0; j < NT; j++) q6kp2_store(y + (t0 + j) * y_ld + r, acc[j], lo, hi);
}

static void q6kp2_dtile_n(float *y, int64_t y_ld, const struct q6kp2_dec *pk, int64_t nb, int64_t r, int lo, int hi,
                          const struct kern_q8k_block *xq, int64_t t0, int nt)
{
    switch (nt) {
#if Q6KP2_PT >= 6
    case 6: q6kp2_dtile(y, y_ld, pk, nb, r, lo, hi, xq, t0, 6); break;
    case 5: q6kp2_dtile(y, y_ld, pk, nb, r, lo, hi, xq, t0, 5); break;
#endif
#if Q6KP2_PT >= 4
    case 4: q6kp2_dtile(y, y_ld, pk, nb, r, lo, hi, xq, t0, 4); break;
#endif
    case 3: q6kp2_dtile(y, y_ld, pk, nb, r, lo, hi, xq, t0, 3); break;
    case 2: q6kp2_dtile(y, y_ld, pk, nb, r, lo, hi, xq, t0, 2); break;
    default: q6kp2_dtile(y, y_ld, pk, nb, r, lo, hi, xq, t0, 1); break;
    }
}

/* The halves of groups [ga, gz) that hold rows of [r0, r1), in panels of at most
 * Q6KP2_PANEL_BLKS decoded half super-blocks (nb <= Q6KP2_PANEL_BLKS). */
static void q6kp2_panels(float *y, int64_t y_ld, const uint8_t *wp, const struct kern_q8k_block *xq, int64_t n_tok,
                         int64_t nb, int64_t r0, int64_t r1)
{
    struct q6kp2_dec pk[Q6KP2_PANEL_BLKS];
    const size_t gb = (size_t)nb * KERN_Q6KP_SB_BYTES;
    const int64_t per = Q6KP2_PANEL_BLKS / nb; /* halves per panel, >= 1 */
    const int64_t h0 = r0 / 8, h1 = (r1 + 7) / 8; /* 8-row halves, half s = rows 8s .. 8s+7 */
    const int64_t n_tt = (n_tok + Q6KP2_PT - 1) / Q6KP2_PT;
    for (int64_t s0 = h0; s0 < h1; s0 += per) {
        int64_t s1 = HS_MIN(s0 + per, h1);
        for (int64_t s = s0; s < s1; s++) {
            const uint8_t *gp = wp + (size_t)(s / 2) * gb;
            for (int64_t b = 0; b < nb; b++)
                q6kp2_decode(pk + (s - s0) * nb + b, gp + (size_t)b * KERN_Q6KP_SB_BYTES, (int)(s % 2));
        }
        for (int64_t tt = 0; tt < n_tt; tt++) {
            int64_t t = n_tok * tt / n_tt;
            int nt = (int)(n_tok * (tt + 1) / n_tt - t);
            for (int64_t s = s0; s < s1; s++) {
                int lo = (int)HS_MAX(r0 - 8 * s, (int64_t)0), hi = (int)HS_MIN(r1 - 8 * s, (int64_t)8);
                q6kp2_dtile_n(y, y_ld, pk + (s - s0) * nb, nb, 8 * s, lo, hi, xq, t, nt);
            }
        }
    }
}

void KERN_AVX2_NAME(kern_matmul_q6kp)(float *y, int64_t y_ld, const void *wp, const struct kern_q8k_block *xq,
                           int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    const int64_t nb = k / KERN_QK;
    if (r0 >= r1 || n_tok < 1) return;
    if (n_tok > Q6KP2_STREAM && nb <= Q6KP2_PANEL_BLKS) {
        q6kp2_panels(y, y_ld, (const uint8_t *)wp, xq, n_tok, nb, r0, r1);
        return;
    }
    const int64_t ga = r0 / KERN_KP_ROWS, gz = (r1 + KERN_KP_ROWS - 1) / KERN_KP_ROWS;
    if (n_tok <= Q6KP2_STREAM) { /* a decode step: one stream, each group read once */
        q6kp2_stream(y, y_ld, (const uint8_t *)wp, xq, (int)n_tok, nb, ga, gz, r0, r1, Q6KP2_PF);
        return;
    }
    /* long rows, many tokens: panels of groups, token chunks of at most Q6KP2_STREAM, as
     * even as can be (note 5) */
    const size_t gb = (size_t)nb * KERN_Q6KP_SB_BYTES;
    const int64_t panel = HS_MAX((int64_t)(Q6KP2_PANEL_BYTES / gb), (int64_t)1);
    const int64_t n_tc = (n_tok + Q6KP2_STREAM - 1) / Q6KP2_STREAM;
    for (int64_t p0 = ga; p0 < gz; p0 += panel) {
        int64_t p1 = HS_MIN(p0 + panel, gz);
        for (int64_t tc = 0; tc < n_tc; tc++) {
            int64_t t = n_tok * tc / n_tc;
            int nt = (int)(n_tok * (tc + 1) / n_tc - t);
            q6kp2_stream(y + t * y_ld, y_ld, (const uint8_t *)wp, xq + t * nb, nt, nb, p0, p1, r0, r1,
                         tc == 0 ? Q6KP2_PF : 0);
        }
    }
}

#else
typedef int kern_q6kp_avx2_unused; /* not x86: the variant does not exist */
#endif
