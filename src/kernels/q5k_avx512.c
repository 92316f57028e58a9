/*
 * q5k_avx512.c — AVX-512 (F, BW, VL, VNNI) variant of the Q5_K matmul (kern_matmul_q5k: Q5_K
 * weights x kern_q8k_quantize activations). Bit-identical to the scalar reference in q5k.c;
 * reached through the "avx512" / "avx512vnni" tables' matmul_k (dispatch.c). Compiled with
 * the Makefile's AVX-512 flags.
 *
 * Design note:
 *   1. The float part is the scalar's: dw * dx and dmin * dx rounded once each, then two fmaf
 *      per block into the output's own accumulator, blocks ascending. Everything else is
 *      integer and exact (kernels.h), so its order is free.
 *   2. Decode: chunk j of a block (values 64 j .. 64 j + 63 = sub-blocks 2j, 2j+1) is one
 *      zmm of unsigned bytes: the low nibbles of qs bytes 32 j .. 32 j + 31 in the low half,
 *      their high nibbles in the high half, and 16 added (vpaddb under a byte mask: bit 4 is
 *      clear, so add = or) where bit 2j (low half) or 2j+1 (high half) of qh[l] is set;
 *      the mask is one vptestmb of qh, broadcast to both halves, against a per-chunk bit.
 *   3. Multiply: vpmaddubsw with the 64 int8 activations of the chunk, in order (pair sums
 *      at most 2 * 31 * 127: no int16 saturation), then vpdpwssd with the sub-block's scale
 *      in each int16 lane widens to int32 and scales in one step. Mins: vpmaddwd of the 16
 *      bsums with the mins as pairs, reduced with isum in one horizontal sum.
 *   4. Decode path (one token): the block is decoded and used at once, with the weights
 *      prefetched PF_BYTES ahead along the row (the stream is the cost). Multi-token path:
 *      a block is decoded once per tile of up to TOKS = 8 tokens; the 8 tokens' isum (and
 *      msum) vectors are reduced together into one ymm (a transposing hadd tree, a third
 *      of the per-token horizontal sums' work) and the float steps run lane-wise, lane t
 *      being token t's own accumulator. Every output sees its blocks in ascending order
 *      with the scalar's roundings, so n_tok, r0 and r1 cannot change a bit.
 *   5. Panel path (n_tok >= P_MIN_TOKS, prefill; whole 16-row groups, the other rows take
 *      note 4): per group and block the 16 rows are decoded (note 2), transposed so that
 *      dword lane i of a zmm holds 4 consecutive quants of row i (struct q5_panel, on the
 *      stack: 4.5 KiB), and applied to every token, P_TOKS at a time: vpdpbusd (weights
 *      unsigned, activations broadcast 4 at a time) gives each row's sub-block sums
 *      (<= 32 * 31 * 127, no overflow), vpmulld by the row's sc_s, vpdpwssd of (m_p, m_p)
 *      with the bsum pair p gives msum; the float steps are lane-wise (one row per lane),
 *      with y holding each output's accumulator between blocks (stored and reloaded
 *      exactly), so the order is note 1's. No horizontal sums.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kquant_x86_int.h"

#define INLINE static inline __attribute__((always_inline))
#define TOKS 8 /* tokens per decoded block: one ymm of accumulators */
#ifndef P_MIN_TOKS
#define P_MIN_TOKS 16 /* the panel path from this many tokens on (measured: equal at 12-16) */
#endif
#ifndef P_TOKS
#define P_TOKS 2 /* tokens per panel tile (measured: 2 beat 4, 6, 8 by 10-20%) */
#endif
#ifndef PF_BYTES
#define PF_BYTES 2048 /* prefetch distance along a weight row (q4k_avx512.c's, measured there) */
#endif

/* Lane i (of 32 int16) takes entry base + i / 16 of a 16-entry table. */
INLINE __m512i spread_idx(int base)
{
    int16_t ix[32];
    for (int i = 0; i < 32; i++) ix[i] = (int16_t)(base + i / 16);
    return _mm512_loadu_si512(ix);
}

INLINE void q5_decode(struct kq_dec *d, const uint8_t *blk, const __m512i sidx[4], const __m512i hbit[4])
{
    const __m256i m4 = _mm256_set1_epi8(15);
    const __m512i m16 = _mm512_set1_epi8(16);
    __m128i sm = kq_scales_u32(blk + 4);
    __m512i sc16 = _mm512_castsi128_si512(_mm_cvtepu8_epi16(sm));
    __m128i m8 = _mm_unpackhi_epi64(sm, sm);
    d->mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
    __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 16)));
    _Pragma("GCC unroll 8")
    for (int j = 0; j < 4; j++) {
        __m256i q = _mm256_loadu_si256((const __m256i *)(blk + 48 + 32 * j));
        __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        __m512i wv = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
        __mmask64 h = _mm512_test_epi8_mask(qh, hbit[j]);
        d->wq[j] = _mm512_mask_add_epi8(wv, h, wv, m16);
        d->ws[j] = _mm512_permutexvar_epi16(sidx[j], sc16);
    }
    d->dw = kq_f16_at(blk);
    d->dmin = kq_f16_at(blk + 2);
}

/* The row path (note 4) for rows [r0, r1). */
static void q5_rows(float *y, int64_t y_ld, const uint8_t *w, const struct kern_q8k_block *xq,
                    int64_t n_tok, int64_t nb, int64_t r0, int64_t r1, const __m512i sidx[4],
                    const __m512i hbit[4])
{
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + (size_t)r * (size_t)nb * KERN_Q5K_BYTES;
        if (n_tok == 1) {
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + b * KERN_Q5K_BYTES;
                _mm_prefetch((const char *)blk + PF_BYTES, _MM_HINT_T0);
                _mm_prefetch((const char *)blk + PF_BYTES + 64, _MM_HINT_T0);
                _mm_prefetch((const char *)blk + PF_BYTES + 128, _MM_HINT_T0);
                struct kq_dec d;
                q5_decode(&d, blk, sidx, hbit);
                acc = kq_apply1(&d, xq + b, acc);
            }
            y[r] = acc;
            continue;
        }
        for (int64_t t0 = 0; t0 < n_tok; t0 += TOKS) {
            int nt = (int)(n_tok - t0 < TOKS ? n_tok - t0 : TOKS);
            __m256 acc = _mm256_setzero_ps();
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + b * KERN_Q5K_BYTES;
                if (t0 == 0) {
                    _mm_prefetch((const char *)blk + PF_BYTES, _MM_HINT_T0);
                    _mm_prefetch((const char *)blk + PF_BYTES + 64, _MM_HINT_T0);
                    _mm_prefetch((const char *)blk + PF_BYTES + 128, _MM_HINT_T0);
                }
                struct kq_dec d;
                q5_decode(&d, blk, sidx, hbit);
                acc = kq_apply(&d, xq + t0 * nb + b, nb, nt, acc, 8);
            }
            float out[TOKS];
            _mm256_storeu_ps(out, acc);
            for (int t = 0; t < nt; t++) y[(t0 + t) * y_ld + r] = out[t];
        }
    }
}

/* One super-block of 16 rows with row i in lane i (note 5): wq[s][u] dword i = the quants
 * 32 s + 4 u .. + 3 of row i; sc[s] = sc_s, mp[p] = (m_p, m_p) as two int16, dw, dmin. */
struct q5_panel {
    uint32_t wq[8][8][16];
    int32_t sc[8][16], mp[8][16];
    float dw[16], dmin[16];
};

/* r[c] = column c of the 16 x 16 dword matrix with rows r[0..15] (unpack, unpack, two
 * 128-bit lane shuffles: per 128-bit lane L, u[4g + e] holds element 4 L + e of rows
 * 4g .. 4g + 3). */
INLINE void transpose16(__m512i r[16])
{
    __m512i t[16], u[16];
    _Pragma("GCC unroll 16")
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
    }
    _Pragma("GCC unroll 16")
    for (int g = 0; g < 4; g++) {
        u[4 * g] = _mm512_unpacklo_epi64(t[4 * g], t[4 * g + 2]);
        u[4 * g + 1] = _mm512_unpackhi_epi64(t[4 * g], t[4 * g + 2]);
        u[4 * g + 2] = _mm512_unpacklo_epi64(t[4 * g + 1], t[4 * g + 3]);
        u[4 * g + 3] = _mm512_unpackhi_epi64(t[4 * g + 1], t[4 * g + 3]);
    }
    _Pragma("GCC unroll 16")
    for (int e = 0; e < 4; e++) {
        __m512i v0 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0x88), v4 = _mm512_shuffle_i32x4(u[e], u[4 + e], 0xdd);
        __m512i v8 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0x88), v12 = _mm512_shuffle_i32x4(u[8 + e], u[12 + e], 0xdd);
        r[e] = _mm512_shuffle_i32x4(v0, v8, 0x88);
        r[8 + e] = _mm512_shuffle_i32x4(v0, v8, 0xdd);
        r[4 + e] = _mm512_shuffle_i32x4(v4, v12, 0x88);
        r[12 + e] = _mm512_shuffle_i32x4(v4, v12, 0xdd);
    }
}

static void q5p_pack(struct q5_panel *pk, const uint8_t *w, size_t rb, int64_t r, int64_t b,
                     const __m512i sidx[4], const __m512i hbit[4])
{
    __m512i q[4][16]; /* q[j][i]: quants 64 j .. 64 j + 63 of row i, in order, as 16 dwords */
    for (int i = 0; i < 16; i++) {
        const uint8_t *blk = w + (size_t)(r + i) * rb + (size_t)b * KERN_Q5K_BYTES;
        struct kq_dec d;
        q5_decode(&d, blk, sidx, hbit);
        for (int j = 0; j < 4; j++) q[j][i] = d.wq[j];
        uint8_t sc[8], m[8];
        kern_q4k_scales(blk + 4, sc, m);
        for (int s = 0; s < 8; s++) {
            pk->sc[s][i] = sc[s];
            pk->mp[s][i] = (int32_t)((uint32_t)m[s] | (uint32_t)m[s] << 16);
        }
        pk->dw[i] = d.dw;
        pk->dmin[i] = d.dmin;
    }
    for (int j = 0; j < 4; j++) {
        transpose16(q[j]);
        for (int c = 0; c < 16; c++) { /* dword v = 16 j + c: quants 4 v .. 4 v + 3 */
            int v = 16 * j + c;
            _mm512_storeu_si512(pk->wq[v / 8][v % 8], q[j][c]);
        }
    }
}

/* Tokens t0 .. t0 + nt - 1 (nt <= P_TOKS) of one packed block: each weight vector is
 * loaded once for the tile; every token keeps its own int32 sums and float accumulator. */
INLINE void q5p_tile(float *y, int64_t y_ld, const struct q5_panel *pk, __m512 dw, __m512 dmin,
                     const struct kern_q8k_block *xq, int64_t nb, int64_t b, int64_t r, int64_t t0, int nt)
{
    __m512i isum[P_TOKS], msum[P_TOKS];
    const struct kern_q8k_block *x[P_TOKS];
    for (int t = 0; t < P_TOKS; t++) {
        isum[t] = msum[t] = _mm512_setzero_si512();
        x[t] = xq + (t0 + (t < nt ? t : 0)) * nb + b;
    }
    _Pragma("GCC unroll 8")
    for (int s = 0; s < 8; s++) {
        __m512i wv[8];
        _Pragma("GCC unroll 8")
        for (int u = 0; u < 8; u++) wv[u] = _mm512_loadu_si512(pk->wq[s][u]);
        const __m512i sc = _mm512_loadu_si512(pk->sc[s]), mp = _mm512_loadu_si512(pk->mp[s]);
        _Pragma("GCC unroll 8")
        for (int t = 0; t < P_TOKS; t++) {
            __m512i a = _mm512_setzero_si512();
            _Pragma("GCC unroll 8")
            for (int u = 0; u < 8; u++) a = _mm512_dpbusd_epi32(a, wv[u], kq_bcast32(x[t]->q + 32 * s + 4 * u));
            isum[t] = _mm512_add_epi32(isum[t], _mm512_mullo_epi32(a, sc));
            msum[t] = _mm512_dpwssd_epi32(msum[t], mp, kq_bcast32(x[t]->bsum + 2 * s));
        }
    }
    for (int t = 0; t < nt; t++) {
        float *yo = y + (t0 + t) * y_ld + r;
        __m512 acc = b ? _mm512_loadu_ps(yo) : _mm512_setzero_ps();
        __m512 vx = _mm512_set1_ps(x[t]->d);
        acc = _mm512_fmadd_ps(_mm512_mul_ps(dw, vx), _mm512_cvtepi32_ps(isum[t]), acc);
        acc = _mm512_fnmadd_ps(_mm512_mul_ps(dmin, vx), _mm512_cvtepi32_ps(msum[t]), acc);
        _mm512_storeu_ps(yo, acc);
    }
}

/* The panel path for the 16-row groups starting at r, r + 16, .. < r1 (r1 - r a multiple of
 * 16): per group and block, the block is repacked once and applied to every token; y holds
 * each output's running accumulator between blocks (stored and reloaded exactly). */
static void q5p_rows(float *y, int64_t y_ld, const uint8_t *w, const struct kern_q8k_block *xq,
                     int64_t n_tok, int64_t nb, int64_t r0, int64_t r1, const __m512i sidx[4],
                     const __m512i hbit[4])
{
    struct q5_panel pk;
    const size_t rb = (size_t)nb * KERN_Q5K_BYTES;
    for (int64_t r = r0; r < r1; r += 16) {
        for (int64_t b = 0; b < nb; b++) {
            q5p_pack(&pk, w, rb, r, b, sidx, hbit);
            const __m512 dw = _mm512_loadu_ps(pk.dw), dmin = _mm512_loadu_ps(pk.dmin);
            int64_t t = 0;
            for (; t + P_TOKS <= n_tok; t += P_TOKS) q5p_tile(y, y_ld, &pk, dw, dmin, xq, nb, b, r, t, P_TOKS);
            if (t < n_tok) q5p_tile(y, y_ld, &pk, dw, dmin, xq, nb, b, r, t, (int)(n_tok - t));
        }
    }
}

void kern_matmul_q5k_avx512(float *y, int64_t y_ld, const void *w,
                            const struct kern_q8k_block *xq, int64_t n_tok, int64_t k, int64_t r0,
                            int64_t r1)
{
    const int64_t nb = k / KERN_QK;
    __m512i sidx[4], hbit[4];
    for (int j = 0; j < 4; j++) {
        sidx[j] = spread_idx(2 * j);
        hbit[j] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set1_epi8((char)(1 << 2 * j))),
                                     _mm256_set1_epi8((char)(1 << (2 * j + 1))), 1);
    }
    int64_t rp = r0;
    if (n_tok >= P_MIN_TOKS) {
        rp = r0 + (r1 - r0) / 16 * 16;
        q5p_rows(y, y_ld, (const uint8_t *)w, xq, n_tok, nb, r0, rp, sidx, hbit);
    }
    q5_rows(y, y_ld, (const uint8_t *)w, xq, n_tok, nb, rp, r1, sidx, hbit);
}

#else
typedef int kern_q5k_avx512_unused; /* not x86: the variant does not exist */
#endif
