/*
 * q4k_avx2.c — AVX2 variant of the K-quant matmul kern_matmul_k: Q4_K weights here, and the
 * Q5_K panel path (note 7); the rest of Q5_K and Q6_K forwarded to q5k_avx2.c and q6k_avx2.c. Bit-identical to the scalar reference in q4k.c;
 * selected through kern_ops_for("avx2")->matmul_k (dispatch.c). Compiled with the Makefile's
 * AVX2 flags.
 *
 * The mapping is q4k_avx512.c's on 256-bit vectors: 32 weights of one sub-block per ymm as
 * unsigned bytes, vpmaddubsw with the int8 activations (pair sums at most 2 * 15 * 128: no
 * saturation), vpmaddwd with the scale of each pair's sub-block, int32 lanes summed once per
 * block (exact, so the order is free), then the scalar's float steps: dw * dx, dmin * dx
 * rounded once each and two fmaf per block into the output's own accumulator, blocks
 * ascending. Both paths below keep exactly that float part (fmaf(-(dmin * dx), msum, a) is
 * vfnmadd(dmin * dx, msum, a): negating a factor is exact, both round once), and every output
 * keeps its own accumulator with the blocks ascending, so tile shapes, panels, n_tok, r0 and
 * r1 cannot change a bit.
 *   1. Per-row path (2 to P_MIN_TOKS - 1 tokens, rows past the last whole group of 8, K past
 *      the panel): a row's block is decoded once per tile of up to TOKS tokens.
 *   2. Panel path (P_MIN_TOKS tokens or more: prefill, a decode step of several sequences):
 *      whole groups of 8 rows are repacked once per panel so that dword lane i of a ymm
 *      belongs to row i: per super-block the quants as bytes 0..15 (an 8 x 8 dword
 *      transpose of each 32-byte chunk of qs, nibbles split), the scales and mins as int16
 *      pairs, dw and dmin as f32. A step broadcasts 4 activation quants of a token to every
 *      lane; vpmaddubsw gives two pair sums per lane (at most 2 * 15 * 127), and the 8 steps
 *      of a sub-block are added in int16 (at most 30480 < 2^15: exact) before one vpmaddwd
 *      with (sc, sc) applies the scale and widens. msum: vpmaddwd of (m_2p, m_2p+1) with
 *      (B_2p, B_2p+1), B_p = bsum_2p + bsum_2p+1 the activation sum of sub-block p (at most
 *      4064: int16), formed once per token tile for all the panel's groups (q4p_bpairs):
 *      4 steps per block and token where the bsum pairs took 8 (1.03-1.08x on the kernel).
 *      No horizontal sums; the float steps are lane-wise. The scale words are unpacked
 *      with kq_scales_u32's bit moves on 8 rows at once. The row-group layout's prefill
 *      takes this path too (kern_q4kp_panels_avx2, q4kp_avx2.c note 5): a panel block is
 *      loads, shifts and masks away from one half of a 16-row group (q4p_pack_group_kp).
 *   3. One token (decode), q4k_rows1: a row at a time, one block at a time, every sub-block
 *      decoded, multiplied (vpmaddubsw) and scaled (vpmaddwd) straight into two int32
 *      vectors: no token loop, so nothing spills (the per-row path of note 1 kept 16 ymm of
 *      decoded quants and scales live across its token loop, and its accumulators in
 *      memory). The sub-block scales come from one in-lane pshufb each of the 8 scales
 *      broadcast to both lanes (1.27x against two vpbroadcastw of shifted words, measured
 *      here; round 7 saw the opposite in the note 1 loop). The float step runs in xmm lanes:
 *      [dw, dmin] from one vcvtph2ps of the block's first dword times dx (the scalar's two
 *      products, one rounding each), [isum, msum] by one vcvtdq2ps, then vfmadd231ss and
 *      vfnmadd231ss (fmaf(-a, b, c): negating a factor is exact), the scalar's two fmaf.
 *   4. kern_q8k_quantize_avx2 (kern_ops.q8k_quantize) is q4k.c's kern_q8k_quantize step by
 *      step: amax by vmaxps(|x|, acc), which keeps acc where |x| is NaN as the scalar's
 *      `a > amax` skips it, and max is exact so the lane order is free; mx = x at the first
 *      index whose |x| equals amax (vcmpeqps + movemask, vectors ascending, the lowest set
 *      bit), which is the element the scalar's strict `>` keeps; iscale = -127 / mx and
 *      d = 1 / iscale as scalar divisions; q = vroundps(iscale * x) (one rounded product,
 *      round half to even as nearbyintf in the default rounding mode), clamped by
 *      vmaxps(r, -127) (NaN -> -127, as the scalar's first test) then vminps(r, 127);
 *      bsum_g from vpsadbw of q ^ 0x80 (eight bytes q + 128 per sum) less 2048 per group.
 *   5. Built a second time with KERN_AVXVNNI (q4k_avxvnni.c, the "avxvnni" table), the entry
 *      points are kern_matmul_k_avxvnni and kern_q4kp_panels_avxvnni (KERN_AVX2_NAME) and
 *      the quantizer is not built (it has no integer dot; the table keeps the AVX2 one).
 *   6. The AVX-VNNI build differs in its integer steps only. The panel tile (note 2) sums a
 *      sub-block's 8 steps with vpdpbusd into int32 lanes (|dot| <= 32 * 15 * 127 = 60960,
 *      past int16, so the block keeps sc_s as int32 lanes and the tile scales with one
 *      vpmulld: at most 63 * 60960 per sub-block, exact); the mins, and the scales of the
 *      row paths (notes 1 and 3), take one vpdpwssd in place of vpmaddwd + vpaddd
 *      (vec_avx2_int.h's i16_dot_add). The same integers, so the same bits. Measured
 *      (kp_bench --variant avxvnni --base avx2, Zen 5, one thread): the row-group layout's
 *      prefill through these panels 1.40-1.45x at 64 and 512 tokens.
 *   7. Q5_K takes the panel path too (from P_MIN_TOKS tokens, whole 8-row groups; the rest
 *      of its rows, and fewer tokens, stay in q5k_avx2.c's per-row code). Its block has
 *      Q4_K's scales, mins, d and dmin at the same offsets; the packed quants are 0..31, the
 *      low nibbles or-ed with the 5th bit from qh (transposed like the quants; bit s of qh
 *      byte l is that of value 32 s + l). A vpmaddubsw pair sum is then at most 2 * 31 * 127
 *      = 7874, so the AVX2 tile adds 4 steps in int16 (31496 < 2^15) and applies the scale
 *      after each 4 (two vpmaddwd per sub-block); the AVX-VNNI build's int32 sums need no
 *      split. Same bits as q5k.c (its isum and msum are these integers). Measured (headstart
 *      run q5_k_m 0.8b, 512-token prompt, 2 threads, Zen 5 under a CI run): prefill 63-68
 *      -> 105-111 tok/s at avx2, 68 -> 137-139 at avxvnni.
 */
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kernels_int.h"
#include "kernels/kquant_x86_int.h"
#include "kernels/vec_avx2_int.h"

#define INLINE static inline __attribute__((always_inline))
#define TOKS 4
#ifndef P_TOKS
#define P_TOKS 4       /* tokens per tile of the panel path (note 2; measured) */
#endif
#define P_TMAX 4       /* the largest P_TOKS the tile is written for */
#ifndef P_MIN_TOKS
#define P_MIN_TOKS 3   /* fewer tokens: the per-row path (packing would not pay) */
#endif
#define P_PANEL_BLKS 48 /* packed super-blocks per panel: 126 KiB on the stack (L2); K <= 12288 */
#ifndef PF_BYTES
#define PF_BYTES 2048 /* software prefetch distance along the weight rows (measured) */
#endif
#ifndef PF1_BYTES
#define PF1_BYTES 2048 /* the same for the one-token path (note 3; PF_BYTES kept, not re-tuned) */
#endif

static void q4k_rows(float *y, int64_t y_ld, const uint8_t *w, const struct kern_q8k_block *xq,
                     int64_t n_tok, int64_t nb, int64_t r0, int64_t r1)
{
    const __m256i m4 = _mm256_set1_epi8(15);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + (size_t)r * (size_t)nb * KERN_Q4K_BYTES;
        for (int64_t t0 = 0; t0 < n_tok; t0 += TOKS) {
            int nt = (int)(n_tok - t0 < TOKS ? n_tok - t0 : TOKS);
            float acc[TOKS] = {0};
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + b * KERN_Q4K_BYTES;
                _mm_prefetch((const char *)blk + PF_BYTES, _MM_HINT_T0);
                _mm_prefetch((const char *)blk + PF_BYTES + 64, _MM_HINT_T0);
                _mm_prefetch((const char *)blk + PF_BYTES + 128, _MM_HINT_T0);
                __m128i sm = kq_scales_u32(blk + 4);
                /* scale of sub-block j as int16 in every lane of ws[j]; mins as pairs */
                __m256i sc16 = _mm256_cvtepu8_epi16(sm);
                __m128i m8 = _mm_unpackhi_epi64(sm, sm);
                __m256i mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
                __m256i ws[8];
                __m128i sc_lo = _mm256_castsi256_si128(sc16);
                ws[0] = _mm256_broadcastw_epi16(sc_lo);
                ws[1] = _mm256_broadcastw_epi16(_mm_srli_si128(sc_lo, 2));
                ws[2] = _mm256_broadcastw_epi16(_mm_srli_si128(sc_lo, 4));
                ws[3] = _mm256_broadcastw_epi16(_mm_srli_si128(sc_lo, 6));
                ws[4] = _mm256_broadcastw_epi16(_mm_srli_si128(sc_lo, 8));
                ws[5] = _mm256_broadcastw_epi16(_mm_srli_si128(sc_lo, 10));
                ws[6] = _mm256_broadcastw_epi16(_mm_srli_si128(sc_lo, 12));
                ws[7] = _mm256_broadcastw_epi16(_mm_srli_si128(sc_lo, 14));
                __m256i wq[8];
                _Pragma("GCC unroll 8")
                for (int j = 0; j < 4; j++) {
                    __m256i q = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * j));
                    wq[2 * j] = _mm256_and_si256(q, m4);
                    wq[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
                }
                float dw = kq_f16_at(blk), dmin = kq_f16_at(blk + 2);
                for (int t = 0; t < nt; t++) {
                    const struct kern_q8k_block *xb = xq + (t0 + t) * nb + b;
                    __m256i s = _mm256_setzero_si256();
                    _Pragma("GCC unroll 8")
                    for (int j = 0; j < 8; j++) {
                        __m256i x = _mm256_loadu_si256((const __m256i *)(xb->q + 32 * j));
                        s = i16_dot_add(s, _mm256_maddubs_epi16(wq[j], x), ws[j]);
                    }
                    /* isum and msum reduced together: lanes [isum, msum, isum, msum] */
                    __m256i m8s = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb->bsum), mins);
                    __m256i h = _mm256_hadd_epi32(s, m8s);
                    h = _mm256_hadd_epi32(h, h);
                    __m128i h2 = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
                    int32_t isum = _mm_cvtsi128_si32(h2), msum = _mm_extract_epi32(h2, 1);
                    float a = fmaf(dw * xb->d, (float)isum, acc[t]);
                    acc[t] = fmaf(-(dmin * xb->d), (float)msum, a);
                }
            }
            for (int t = 0; t < nt; t++) y[(t0 + t) * y_ld + r] = acc[t];
        }
    }
}

/* One token (decode): note 3. Each sub-block is decoded, multiplied and scaled straight into
 * one int32 vector (nothing spills); the float steps are the scalar's, in registers. */
static void q4k_rows1(float *y, const uint8_t *w, const struct kern_q8k_block *xq, int64_t nb,
                      int64_t r0, int64_t r1)
{
    const __m256i m4 = _mm256_set1_epi8(15);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + (size_t)r * (size_t)nb * KERN_Q4K_BYTES;
        __m128 accv = _mm_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = row + b * KERN_Q4K_BYTES;
            const struct kern_q8k_block *xb = xq + b;
            _mm_prefetch((const char *)blk + PF1_BYTES, _MM_HINT_T0);
            _mm_prefetch((const char *)blk + PF1_BYTES + 64, _MM_HINT_T0);
            _mm_prefetch((const char *)blk + PF1_BYTES + 128, _MM_HINT_T0);
            __m128i sm = kq_scales_u32(blk + 4);
            __m128i m8 = _mm_unpackhi_epi64(sm, sm);
            __m256i mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(m8, m8));
            __m256i m8s = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xb->bsum), mins);
            __m128i sc_lo = _mm_cvtepu8_epi16(sm);
            __m256i shb = _mm256_broadcastsi128_si256(sc_lo);
            __m256i s = _mm256_setzero_si256(), t = _mm256_setzero_si256();
            _Pragma("GCC unroll 4")
            for (int c = 0; c < 4; c++) {
                __m256i q = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * c));
                __m256i x0 = _mm256_loadu_si256((const __m256i *)(xb->q + 64 * c));
                __m256i x1 = _mm256_loadu_si256((const __m256i *)(xb->q + 64 * c + 32));
                __m256i s0 =
                    _mm256_shuffle_epi8(shb, _mm256_set1_epi16((short)(0x0100 + 0x0202 * (2 * c))));
                __m256i s1 = _mm256_shuffle_epi8(
                    shb, _mm256_set1_epi16((short)(0x0100 + 0x0202 * (2 * c + 1))));
                s = i16_dot_add(s, _mm256_maddubs_epi16(_mm256_and_si256(q, m4), x0), s0);
                t = i16_dot_add(t, _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), x1), s1);
            }
            /* isum and msum reduced together: lanes [isum, msum, isum, msum] */
            __m256i h = _mm256_hadd_epi32(_mm256_add_epi32(s, t), m8s);
            h = _mm256_hadd_epi32(h, h);
            __m128i h2 = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
            /* lanes [dw * dx, dmin * dx] and [isum, msum] as f32: the scalar's products and
             * conversions, one rounding each; then its two fmaf (vfnmadd = fmaf(-a, b, c)) */
            uint32_t dd;
            memcpy(&dd, blk, 4);
            __m128 f = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)dd)), _mm_set1_ps(xb->d));
            __m128 v = _mm_cvtepi32_ps(h2);
            accv = _mm_fmadd_ss(f, v, accv);
            accv = _mm_fnmadd_ss(_mm_movehdup_ps(f), _mm_movehdup_ps(v), accv);
        }
        y[r] = _mm_cvtss_f32(accv);
    }
}

#ifndef KERN_AVXVNNI /* the quantizer has no integer dot: built once (q4k_avxvnni.c) */
/* ---- the Q8_K activation quantizer (note 4) ---------------------------------------------- */

void kern_q8k_quantize_avx2(struct kern_q8k_block *xq, const float *x, int64_t n_tok, int64_t k)
{
    const int64_t nb = k / KERN_QK;
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t t = 0; t < n_tok; t++) {
        for (int64_t b = 0; b < nb; b++) {
            const float *v = x + t * k + b * KERN_QK;
            struct kern_q8k_block *o = xq + t * nb + b;
            __m256 m0 = _mm256_setzero_ps(), m1 = _mm256_setzero_ps();
            for (int i = 0; i < KERN_QK; i += 16) {
                m0 = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(v + i), absm), m0);
                m1 = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(v + i + 8), absm), m1);
            }
            __m256 m = _mm256_max_ps(m0, m1); /* no NaN lanes: exact, any order */
            __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
            h = _mm_max_ps(h, _mm_movehl_ps(h, h));
            h = _mm_max_ss(h, _mm_movehdup_ps(h));
            const float amax = _mm_cvtss_f32(h);
            if (!(amax > 0.0f)) {
                memset(o, 0, sizeof(*o));
                continue;
            }
            const __m256 am = _mm256_set1_ps(amax);
            int first = 0;
            for (int i = 0; i < KERN_QK; i += 8) {
                int bits = _mm256_movemask_ps(
                    _mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(v + i), absm), am, _CMP_EQ_OQ));
                if (bits) { first = i + __builtin_ctz((unsigned)bits); break; }
            }
            const float iscale = -127.0f / v[first];
            const __m256 is = _mm256_set1_ps(iscale), lo = _mm256_set1_ps(-127.0f),
                         hi = _mm256_set1_ps(127.0f);
            const __m256i k80 = _mm256_set1_epi8((char)0x80);
            for (int i = 0; i < KERN_QK; i += 32) {
                __m256i q32[4];
                _Pragma("GCC unroll 4")
                for (int j = 0; j < 4; j++) {
                    __m256 r = _mm256_round_ps(_mm256_mul_ps(is, _mm256_loadu_ps(v + i + 8 * j)),
                                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
                    q32[j] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(r, lo), hi));
                }
                /* int32 -> int8 (in range, so the saturating packs are exact); the packs work
                 * per 128-bit lane, the dword permute puts the 32 bytes back in order */
                __m256i p16a = _mm256_packs_epi32(q32[0], q32[1]),
                        p16b = _mm256_packs_epi32(q32[2], q32[3]);
                __m256i p8 = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(p16a, p16b),
                                                         _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
                _mm256_storeu_si256((__m256i *)(o->q + i), p8);
                /* four sums of eight (q + 128): groups i / 16 and i / 16 + 1 */
                __m256i sad = _mm256_sad_epu8(_mm256_xor_si256(p8, k80), _mm256_setzero_si256());
                __m128i s2 = _mm_add_epi64(
                    _mm256_castsi256_si128(sad),
                    _mm_unpackhi_epi64(_mm256_castsi256_si128(sad), _mm256_castsi256_si128(sad)));
                __m128i s3 = _mm256_extracti128_si256(sad, 1);
                s3 = _mm_add_epi64(s3, _mm_unpackhi_epi64(s3, s3));
                o->bsum[i / 16] = (int16_t)(_mm_cvtsi128_si32(s2) - 2048);
                o->bsum[i / 16 + 1] = (int16_t)(_mm_cvtsi128_si32(s3) - 2048);
            }
            o->d = 1.0f / iscale;
        }
    }
}
#endif

/* ---- several tokens: 8-row panels (note 2) ------------------------------------------------ */

/* One super-block of an 8-row group: dword lane i of every vector belongs to row i. */
struct q4p_blk {
    __m256i w[8][8]; /* [s][u] lane i = quants 32s + 4u .. +3 of row i, one byte each (0..15) */
    __m256i sc[8];   /* [s] lane i = (sc_s, sc_s) of row i as two int16; sc_s as int32 for AVX-VNNI */
    __m256i
        mn[4]; /* [p] lane i = (m_2p, m_2p+1) of row i as two int16, paired with (B_2p, B_2p+1) */
    __m256 dw, dmin; /* lane i = row i's f16 scales as f32 */
};

/* A block's scale lanes from sc_s as int32 (the form each build's tile multiplies by). */
INLINE __m256i sc_lanes(__m256i v)
{
#ifdef KERN_AVXVNNI
    return v;
#else
    return _mm256_or_si256(v, _mm256_slli_epi32(v, 16));
#endif
}

/* The dword at p of rows 0..7 (lane i = row i). */
INLINE __m256i col_u32(const uint8_t *p, size_t rb)
{
    int32_t v[8];
    for (int i = 0; i < 8; i++) memcpy(&v[i], p + (size_t)i * rb, 4);
    return _mm256_setr_epi32(v[0], v[1], v[2], v[3], v[4], v[5], v[6], v[7]);
}

/* Q5 = 0: rows r .. r+7 of Q4_K blocks; Q5 = 1: of Q5_K blocks (note 7), whose quants take
 * their 5th bit from qh. The scales, mins, d and dmin are at the same offsets in both. */
INLINE void qkp_pack_group(struct q4p_blk *dst, const uint8_t *w, size_t rb, int64_t r, int64_t nb, int Q5)
{
    const __m256i m4 = _mm256_set1_epi8(15), m16 = _mm256_set1_epi8(16);
    const uint8_t *base = w + (size_t)r * rb;
    const size_t bb = Q5 ? KERN_Q5K_BYTES : KERN_Q4K_BYTES, qs = Q5 ? 48 : 16;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = base + b * bb;
        struct q4p_blk *d = dst + b;
        __m256i hb[8]; /* Q5_K: qh transposed like the quants, lane i = bytes 4u .. 4u+3 of row i */
        if (Q5) {
            _Pragma("GCC unroll 8")
            for (int i = 0; i < 8; i++) hb[i] = _mm256_loadu_si256((const __m256i *)(blk + (size_t)i * rb + 16));
            kq_transpose8(hb);
        }
        /* qs bytes 32c .. 32c+31: low nibbles are sub-block 2c, high nibbles 2c + 1 */
        for (int c = 0; c < 4; c++) {
            __m256i v[8];
            _Pragma("GCC unroll 8")
            for (int i = 0; i < 8; i++) v[i] = _mm256_loadu_si256((const __m256i *)(blk + (size_t)i * rb + qs + 32 * c));
            kq_transpose8(v);
            _Pragma("GCC unroll 8")
            for (int u = 0; u < 8; u++) {
                __m256i lo = _mm256_and_si256(v[u], m4), hi = _mm256_and_si256(_mm256_srli_epi16(v[u], 4), m4);
                if (Q5) { /* bit s of each qh byte to bit 4 (q5k_avx2.c's shifts) */
                    lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(hb[u], 2 * c), 4), m16));
                    hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(hb[u], 2 * c + 1), 4), m16));
                }
                _mm256_store_si256(&d->w[2 * c][u], lo);
                _mm256_store_si256(&d->w[2 * c + 1][u], hi);
            }
        }
        /* kern_q4k_scales lane-wise: kq_scales_u32's bit moves on the 8 rows' words */
        const __m256i k3f = _mm256_set1_epi32(0x3f3f3f3f), k0f = _mm256_set1_epi32(0x0f0f0f0f);
        const __m256i k03 = _mm256_set1_epi32(0x03030303), kff = _mm256_set1_epi32(0xff);
        __m256i u0 = col_u32(blk + 4, rb), u1 = col_u32(blk + 8, rb), u2 = col_u32(blk + 12, rb);
        __m256i w4[4]; /* sc 0..3 | sc 4..7 | m 0..3 | m 4..7, byte j of lane i = entry j of row i */
        w4[0] = _mm256_and_si256(u0, k3f);
        w4[1] = _mm256_or_si256(_mm256_and_si256(u2, k0f), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u0, 6), k03), 4));
        w4[2] = _mm256_and_si256(u1, k3f);
        w4[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi32(u2, 4), k0f),
                                _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(u1, 6), k03), 4));
        _Pragma("GCC unroll 8")
        for (int s = 0; s < 8; s++) {
            __m256i sv = _mm256_and_si256(_mm256_srli_epi32(w4[s / 4], 8 * (s % 4)), kff);
            _mm256_store_si256(&d->sc[s], sc_lanes(sv));
        }
        _Pragma("GCC unroll 4")
        for (int p = 0; p < 4; p++) {
            __m256i m0 = _mm256_and_si256(_mm256_srli_epi32(w4[2 + p / 2], 16 * (p % 2)), kff);
            __m256i m1 = _mm256_and_si256(_mm256_srli_epi32(w4[2 + p / 2], 16 * (p % 2) + 8), kff);
            _mm256_store_si256(&d->mn[p], _mm256_or_si256(m0, _mm256_slli_epi32(m1, 16)));
        }
        uint16_t dh[8], mh[8];
        for (int i = 0; i < 8; i++) {
            dh[i] = hs_rd_u16(blk + (size_t)i * rb);
            mh[i] = hs_rd_u16(blk + (size_t)i * rb + 2);
        }
        d->dw = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dh));
        d->dmin = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)mh));
    }
}

static void q4p_pack_group(struct q4p_blk *dst, const uint8_t *w, size_t rb, int64_t r, int64_t nb)
{
    qkp_pack_group(dst, w, rb, r, nb, 0);
}

static void q5p_pack_group(struct q4p_blk *dst, const uint8_t *w, size_t rb, int64_t r, int64_t nb)
{
    qkp_pack_group(dst, w, rb, r, nb, 1);
}

/* The same block from the row-group layout (q4kp.c): rows r .. r+7 are half (r / 8) % 2 of
 * group r / 16, every field a load and at most a shift and a mask away (the layout keeps a
 * row's bits, so the block is the one q4p_pack_group builds from the rows). */
static void q4p_pack_group_kp(struct q4p_blk *dst, const uint8_t *wp, int64_t r, int64_t nb)
{
    const __m256i m4 = _mm256_set1_epi8(15);
    const int h = (int)((r / 8) % 2);
    const uint8_t *gp = wp + (size_t)(r / 16) * (size_t)nb * KERN_Q4KP_SB_BYTES;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *sb = gp + (size_t)b * KERN_Q4KP_SB_BYTES;
        struct q4p_blk *d = dst + b;
        _Pragma("GCC unroll 4")
        for (int j = 0; j < 4; j++)
            _Pragma("GCC unroll 8")
            for (int u = 0; u < 8; u++) {
                __m256i v = _mm256_load_si256((const __m256i *)(const void *)(sb + 64 * (8 * j + u) + 32 * h));
                _mm256_store_si256(&d->w[2 * j][u], _mm256_and_si256(v, m4));
                _mm256_store_si256(&d->w[2 * j + 1][u], _mm256_and_si256(_mm256_srli_epi16(v, 4), m4));
            }
        _Pragma("GCC unroll 8")
        for (int s = 0; s < 8; s++) {
            __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(sb + 2048 + 16 * s + 8 * h)));
            _mm256_store_si256(&d->sc[s], sc_lanes(v));
        }
        _Pragma("GCC unroll 4")
        for (int q = 0; q < 4; q++) {
            __m256i m0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(sb + 2176 + 32 * q + 8 * h)));
            __m256i m1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(sb + 2192 + 32 * q + 8 * h)));
            _mm256_store_si256(&d->mn[q], _mm256_or_si256(m0, _mm256_slli_epi32(m1, 16)));
        }
        d->dw = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(const void *)(sb + 2304 + 16 * h)));
        d->dmin = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)(const void *)(sb + 2336 + 16 * h)));
    }
}

/* B_p = bsum_2p + bsum_2p+1 (the activation sum of sub-block p, |B_p| <= 2 * 16 * 127: an
 * int16) of blocks [0, nb) of tokens t0 .. t0+nt-1, as bp[(t - t0) * nb + b][p]: computed once
 * per token tile for every group of the panel. */
static void q4p_bpairs(int16_t (*bp)[8], const struct kern_q8k_block *xq, int64_t t0, int nt,
                       int64_t nb)
{
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t i = 0; i < nt * nb; i++) {
        __m256i s =
            _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)xq[t0 * nb + i].bsum), ones);
        __m128i p = _mm_packs_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        _mm_storeu_si128((__m128i *)bp[i], p);
    }
}

/* Tokens t0 .. t0+NT-1 against one packed 8-row group pk[0 .. nb) (rows r .. r+7); Q5: the
 * block's quants are Q5_K's (0..31, note 7). */
INLINE void q4p_tile(float *y, int64_t y_ld, const struct q4p_blk *pk, int64_t nb, int64_t r,
                     const struct kern_q8k_block *xq, const int16_t (*bp)[8], int64_t t0, int NT, int Q5)
{
    __m256 acc[P_TMAX];
    const struct kern_q8k_block *xt[P_TMAX];
    _Pragma("GCC unroll 8")
    for (int t = 0; t < NT; t++) {
        acc[t] = _mm256_setzero_ps();
        xt[t] = xq + (t0 + t) * nb;
    }
    for (int64_t b = 0; b < nb; b++) {
        const struct q4p_blk *pb = pk + b;
        __m256i is[P_TMAX], ms[P_TMAX];
        _Pragma("GCC unroll 8")
        for (int t = 0; t < NT; t++) is[t] = ms[t] = _mm256_setzero_si256();
        _Pragma("GCC unroll 8")
        for (int s = 0; s < 8; s++) {
            __m256i dot[P_TMAX];
            _Pragma("GCC unroll 8")
            for (int t = 0; t < NT; t++) dot[t] = _mm256_setzero_si256();
            /* eight int16 pair sums of at most 2 * 15 * 127 each: |sum| <= 30480, no overflow
             * (Q5_K: four of at most 2 * 31 * 127, note 7); with AVX-VNNI one int32 sum per
             * lane (note 6) */
            __m256i sc = _mm256_load_si256(&pb->sc[s]);
            _Pragma("GCC unroll 8")
            for (int u = 0; u < 8; u++) {
#ifndef KERN_AVXVNNI
                if (Q5 && u == 4) {
                    _Pragma("GCC unroll 8")
                    for (int t = 0; t < NT; t++) {
                        is[t] = i16_dot_add(is[t], dot[t], sc);
                        dot[t] = _mm256_setzero_si256();
                    }
                }
#endif
                __m256i wv = _mm256_load_si256(&pb->w[s][u]);
                _Pragma("GCC unroll 8")
                for (int t = 0; t < NT; t++) {
                    __m256i xv = kq_dup32(xt[t][b].q + 32 * s + 4 * u);
#ifdef KERN_AVXVNNI
                    dot[t] = _mm256_dpbusd_avx_epi32(dot[t], wv, xv);
#else
                    dot[t] = _mm256_add_epi16(dot[t], _mm256_maddubs_epi16(wv, xv));
#endif
                }
            }
            _Pragma("GCC unroll 8")
            for (int t = 0; t < NT; t++) {
#ifdef KERN_AVXVNNI
                is[t] = _mm256_add_epi32(is[t], _mm256_mullo_epi32(dot[t], sc));
#else
                is[t] = i16_dot_add(is[t], dot[t], sc);
#endif
            }
        }
        _Pragma("GCC unroll 4")
        for (int p = 0; p < 4; p++) {
            __m256i mn = _mm256_load_si256(&pb->mn[p]);
            _Pragma("GCC unroll 8") for (int t = 0; t < NT; t++) ms[t] = i16_dot_add(ms[t], mn, kq_dup32(bp[t * nb + b] + 2 * p));
        }
        _Pragma("GCC unroll 8")
        for (int t = 0; t < NT; t++) {
            __m256 dx = _mm256_set1_ps(xt[t][b].d);
            __m256 a = _mm256_fmadd_ps(_mm256_mul_ps(pb->dw, dx), _mm256_cvtepi32_ps(is[t]), acc[t]);
            acc[t] = _mm256_fnmadd_ps(_mm256_mul_ps(pb->dmin, dx), _mm256_cvtepi32_ps(ms[t]), a);
        }
    }
    _Pragma("GCC unroll 8")
    for (int t = 0; t < NT; t++) _mm256_storeu_ps(y + (t0 + t) * y_ld + r, acc[t]);
}

/* The tile for nt <= P_TMAX tokens of Q4_K (q5 = 0) or Q5_K (q5 = 1) blocks. */
static void q4p_tiles(float *y, int64_t y_ld, const struct q4p_blk *pk, int64_t nb, int64_t r,
                      const struct kern_q8k_block *xq, const int16_t (*bp)[8], int64_t t0, int nt, int q5)
{
    switch (4 * q5 + nt) {
    case 8: q4p_tile(y, y_ld, pk, nb, r, xq, bp, t0, 4, 1); break;
    case 7: q4p_tile(y, y_ld, pk, nb, r, xq, bp, t0, 3, 1); break;
    case 6: q4p_tile(y, y_ld, pk, nb, r, xq, bp, t0, 2, 1); break;
    case 5: q4p_tile(y, y_ld, pk, nb, r, xq, bp, t0, 1, 1); break;
    case 4: q4p_tile(y, y_ld, pk, nb, r, xq, bp, t0, 4, 0); break;
    case 3: q4p_tile(y, y_ld, pk, nb, r, xq, bp, t0, 3, 0); break;
    case 2: q4p_tile(y, y_ld, pk, nb, r, xq, bp, t0, 2, 0); break;
    default: q4p_tile(y, y_ld, pk, nb, r, xq, bp, t0, 1, 0); break;
    }
}

/* Where a panel's blocks come from: Q4_K rows, Q5_K rows (note 7), the Q4_K row-group layout. */
enum qkp_src { QKP_Q4K, QKP_Q5K, QKP_Q4K_KP };

/* Rows [r0, r1g) (whole 8-row groups) in panels of P_PANEL_BLKS packed blocks, each packed
 * once; every token tile runs over all the panel's groups (its activations stay in L1). */
static void q4p_rows(float *y, int64_t y_ld, const uint8_t *w, enum qkp_src src, const struct kern_q8k_block *xq,
                     int64_t n_tok, int64_t nb, int64_t r0, int64_t r1g)
{
    struct q4p_blk pk[P_PANEL_BLKS];
    int16_t bp[P_TMAX * P_PANEL_BLKS][8];
    const int64_t gmax = P_PANEL_BLKS / nb; /* >= 1: nb <= P_PANEL_BLKS */
    const size_t rb = (size_t)nb * (src == QKP_Q5K ? KERN_Q5K_BYTES : KERN_Q4K_BYTES);
    for (int64_t p0 = r0; p0 < r1g; p0 += gmax * 8) {
        int64_t groups = HS_MIN(gmax, (r1g - p0) / 8);
        for (int64_t g = 0; g < groups; g++) {
            if (src == QKP_Q4K_KP) q4p_pack_group_kp(pk + g * nb, w, p0 + 8 * g, nb);
            else if (src == QKP_Q5K) q5p_pack_group(pk + g * nb, w, rb, p0 + 8 * g, nb);
            else q4p_pack_group(pk + g * nb, w, rb, p0 + 8 * g, nb);
        }
        for (int64_t t = 0; t < n_tok; t += P_TOKS) {
            int nt = (int)HS_MIN((int64_t)P_TOKS, n_tok - t);
            q4p_bpairs(bp, xq, t, nt, nb);
            for (int64_t g = 0; g < groups; g++)
                q4p_tiles(y, y_ld, pk + g * nb, nb, p0 + 8 * g, xq, (const int16_t(*)[8])bp, t, nt, src == QKP_Q5K);
        }
    }
}

bool KERN_AVX2_NAME(kern_q4kp_panels)(float *y, int64_t y_ld, const void *wp, const struct kern_q8k_block *xq,
                                      int64_t n_tok, int64_t k, int64_t g0, int64_t g1)
{
    int64_t nb = k / KERN_QK;
    if (n_tok < P_MIN_TOKS || nb > P_PANEL_BLKS) return false;
    if (g0 < g1) q4p_rows(y, y_ld, wp, QKP_Q4K_KP, xq, n_tok, nb, 16 * g0, 16 * g1);
    return true;
}

void KERN_AVX2_NAME(kern_matmul_k)(float *y, int64_t y_ld, const void *w, int wt,
                                   const struct kern_q8k_block *xq, int64_t n_tok, int64_t k, int64_t r0,
                                   int64_t r1)
{
    if (wt != KERN_K_Q4_K && wt != KERN_K_Q5_K) { kern_matmul_q6k_avx2(y, y_ld, w, xq, n_tok, k, r0, r1); return; } /* q6k_avx2.c */
    int64_t nb = k / KERN_QK, r1g = r0;
    if (n_tok >= P_MIN_TOKS && nb <= P_PANEL_BLKS) {
        r1g = r0 + (r1 - r0) / 8 * 8;
        q4p_rows(y, y_ld, w, wt == KERN_K_Q5_K ? QKP_Q5K : QKP_Q4K, xq, n_tok, nb, r0, r1g);
    }
    if (wt == KERN_K_Q5_K) { kern_matmul_q5k_avx2(y, y_ld, w, xq, n_tok, k, r1g, r1); return; } /* the rest: q5k_avx2.c */
    if (n_tok == 1) { q4k_rows1(y, w, xq, nb, r1g, r1); return; }
    q4k_rows(y, y_ld, w, xq, n_tok, nb, r1g, r1);
}

#else
typedef int kern_q4k_avx2_unused; /* not x86: the variant does not exist */
#endif
