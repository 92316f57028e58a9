/*
 * kernels — the numeric kernels of the forward pass: matmul over f32/f16/bf16/Q8_0/Q4_K/Q5_K/
 * Q6_K/Q5_1/IQ4_NL/IQ4_XS weights, norms, RoPE, attention, the GDN recurrence, conv1d, MoE routing.
 * Depends on base only. Math: docs/MODELS.md §2-§5.
 *
 * Design note (the contract the implementation must keep; see docs/DESIGN.md §4):
 *   1. A scalar reference defines every kernel (this header + matmul.c, norm.c, rope.c,
 *      attn.c, gdn.c, ffn.c, bf16.c, q4k.c, q5k.c, q6k.c, q5_1.c, iq4.c); the SIMD variants of reference
 *      X.c are X_avx2.c and X_avx512.c (chosen at start-up from sys CPU detection by the
 *      engine, through dispatch.c's tables). They equal it bit for bit, or are a
 *      documented numerics variant that the bank fingerprint tells apart. To make "bit for
 *      bit" reachable, every reduction below has ONE written order, stated here. A NaN
 *      output is NaN in every variant, but its sign and payload are not part of the
 *      contract (IEEE 754 leaves NaN propagation open, and which operand of a commutative
 *      multiply a compiler puts first decides it).
 *   2. Batch invariance: each output element accumulates over K in one fixed order
 *      whether the batch holds 1 or 512 rows and whatever row range is asked for;
 *      threads split output rows (or heads / channels), never a sum. Every kernel that
 *      the engine may split takes a half-open range [r0, r1) of its independent outputs.
 *   3. No -ffast-math, -ffp-contract=off; FMA only where written explicitly: every
 *      "acc = fma(a, b, acc)" below is a C fmaf() call (one rounding), every other
 *      multiply and add rounds separately. exp is kern_expf (ours, written below, so
 *      that SIMD variants can compute the same bits); log1pf and sqrtf (correctly
 *      rounded) are libm's, and cos/sin/pow in double for RoPE angles.
 *   4. All activations, norms and states are f32 (a bf16 matmul reads a bf16-rounded
 *      copy, kern_bf16_round). Kernels never allocate; scratch is the caller's (sizes
 *      stated per function). Outputs may alias inputs only where a function says so.
 *   5. Sizes are int64_t and must be >= 1 unless stated; weight matrices are row-major
 *      [rows, K] (out x in), rows packed back to back with kern_row_bytes(type, K) bytes.
 *
 * Matmul accumulation order (the exact contract SIMD variants reproduce)
 * ----------------------------------------------------------------------
 * f32 / f16 / bf16 weights: for output y[t][r] keep KERN_LANES = 32 partial sums, all
 * starting at +0.0f. For k = 0, 1, ..., K-1 in ascending order:
 *     acc[k % 32] = fmaf(w(r, k), x[t][k], acc[k % 32])
 * where w(r, k) is the weight converted exactly to f32 (hs_f16_to_f32 / hs_bf16_to_f32).
 * Then a fixed halving tree: for h = 16, 8, 4, 2, 1: acc[l] = acc[l] + acc[l + h] for
 * l = 0..h-1; y[t][r] = acc[0]. (AVX-512: two zmm lane-vectors k%32 in 0..15 / 16..31;
 * AVX2: four ymm; the tree is then add hi/lo halves down to one lane.)
 *
 * Q8_0 weights (llama.cpp block: f16 scale d, then 32 int8 q; value = d * q; 34 bytes per
 * block; K % 32 == 0): the activations are quantized once per call site with
 * kern_q8_quantize, per block of 32 values of one token:
 *     amax = max_i |x_i|;  d = amax / 127.0f;  id = (d > 0) ? 1.0f / d : 0.0f;
 *     q_i  = nearbyintf(x_i * id)   (round half to even; clamped to [-127, 127])
 * and the stored scale is d rounded to f16 (kern_q8_stored_scale), as llama.cpp's block_q8_0
 * keeps it: the quants stay those of the f32 d, only the scale used in the dot changes. This
 * one rounding is the whole difference between a numpy model of our Q8_0 logits and one of
 * llama.cpp's (each reproduced to 2e-7); without it the two drift apart by ~5% of the
 * largest logit as the flips it causes compound. For output y[t][r], block b:
 *     isum_b = sum_{i<32} wq_i * xq_i         (exact int32; any order gives the same)
 *     acc[b % 8] = fmaf(dw_b * dx_b, (float)isum_b, acc[b % 8])
 * with 8 partial sums starting at +0.0f, blocks in ascending order, dw_b * dx_b one
 * rounded f32 product (dw_b = hs_f16_to_f32 of the stored scale), then the halving tree
 * for h = 4, 2, 1. (float)isum_b is exact: |isum| <= 32 * 127 * 127 < 2^24.
 *
 * K-quant weights, Q4_K, Q5_K and Q6_K (llama.cpp's super-blocks of 256 values; layouts in
 * q4k.c, q5k.c and q6k.c; K % 256 == 0). The activations are quantized once per call site
 * with kern_q8k_quantize, per block of 256 values of one token, as llama.cpp's
 * quantize_row_q8_K_ref does:
 *     amax = max_i |x_i|, mx = the first x_i (ascending i) with |x_i| == amax;
 *     amax == 0 (or NaN): d = 0, all q and bsum 0; else
 *     iscale = -127.0f / mx;  q_i = nearbyintf(iscale * x_i) (clamped to [-127, 127]);
 *     d = 1.0f / iscale;  bsum_g = sum_{i<16} q_{16g+i}   (g < 16)
 * For output y[t][r], one accumulator acc = +0.0f, super-blocks b in ascending order
 * (dw, dmin = hs_f16_to_f32 of the block's scales; dx = the activation block's d):
 *   Q4_K: sc_s, m_s the 6-bit scale and min of sub-block s (32 values), q_i in [0, 15]
 *     isum = sum_{s<8} sc_s * (sum_{i in s} q_i * xq_i);  msum = sum_{g<16} m_{g/2} * bsum_g
 *     acc = fmaf(dw * dx, (float)isum, acc);  acc = fmaf(-(dmin * dx), (float)msum, acc)
 *   Q5_K: sc_s, m_s as Q4_K (the same 12 packed bytes), q_i in [0, 31] = the low nibble
 *     | (the qh bit of value i) << 4; isum, msum and the two fmaf exactly as Q4_K.
 *     (llama.cpp's q5_K dot has the same integer terms and the same d * isum - dmin * msum
 *     per block, but sums the float terms in another order: not bit-equal to it.)
 *   Q6_K: sc_g the int8 scale of group g (16 values), q_i in [0, 63] as stored
 *     isum = sum_{g<16} sc_g * (sum_{i in g} q_i * xq_i - 32 * bsum_g)
 *     acc = fmaf(dw * dx, (float)isum, acc)
 * then y[t][r] = acc. isum and msum are exact int32 sums (|isum| < 2^29), so any order
 * of the integer work gives the same bits; dw * dx and dmin * dx are single rounded f32
 * products and (float)isum one round-to-nearest conversion.
 *
 * BF16 weights as the engine computes them (kern_bf16_matmul; bf16.c). The activations
 * are rounded once per call site with kern_bf16_round, per value (vcvtne2ps2bf16's rule):
 *     NaN -> its top 16 bits with the quiet bit set; +-inf -> +-inf; zero or subnormal
 *     -> a zero of its sign; else round to nearest even on the 16 dropped bits (a carry
 *     into the exponent, up to inf, is the right answer).
 * Two operators (vdpbf16ps's, Intel SDM: DAZ in, FTZ out, RNE, MXCSR not consulted):
 *     D(b) = the bf16 b as f32, or a zero of b's sign when b's exponent field is 0;
 *     F(v) = v, or a zero of v's sign when v is tiny AFTER rounding (|v| rounded to 24
 *            bits with an unbounded exponent is < FLT_MIN).
 * For output y[t][r] keep KERN_BF16_LANES = 16 partial sums, all +0.0f; pad K up to a
 * multiple of 32 with w = x = +0. For each chunk c = 0, 32, 64, ... ascending and each lane
 * l < 16, with k1 = c + 2l + 1 and k0 = c + 2l (the odd element first, as vdpbf16ps):
 *     acc[l] = F(fmaf(D(w(r, k1)), D(x[t][k1]), acc[l]))
 *     acc[l] = F(fmaf(D(w(r, k0)), D(x[t][k0]), acc[l]))
 * (each step is one fma, so one rounding, of the sum). Then the halving tree for
 * h = 8, 4, 2, 1: acc[l] = F(acc[l] + acc[l + h]); y[t][r] = acc[0]. A vdpbf16ps on a
 * zmm of 32 weights and a zmm of 32 activations is one chunk for one output; FMA
 * variants split odd / even elements and run under MXCSR.DAZ|FTZ (which is F and D:
 * measured equal to vdpbf16ps on 8 x 10^7 lanes, the FLT_MIN boundary included).
 * It is also the order of llama.cpp's bf16 GEMM on AVX512_BF16 CPUs (llamafile tinyBLAS:
 * one vdpbf16ps accumulator per output, then _mm512_reduce_add_ps's halving tree), so
 * most bf16 logits match llama.cpp's bit for bit (tests/golden/engine_parity.sh).
 * kern_matmul's BF16 path (f32 activations, the 32-lane order above) is not what the
 * engine uses for bf16 matrices.
 *
 * Other reductions (all in ascending index order unless a lane scheme is named):
 *   kern_dot:     the 32-lane scheme above on two f32 vectors (used by norms' sum of
 *                 squares and attention scores).
 *   attention:    softmax max by ascending key, sum of exp sequential ascending; output
 *                 o[d] = fmaf(e_t, v_t[d], o[d]) over t ascending, then o[d] / sum.
 *   GDN, conv:    sequential fmaf over the reduced index, stated at each function.
 */
#ifndef HS_KERNELS_H
#define HS_KERNELS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/base.h"

#define KERN_LANES 32      /* partial sums over k of the float matmul and kern_dot */
#define KERN_Q8_LANES 8    /* partial sums over blocks of the Q8_0 matmul */
#define KERN_Q8_BLOCK 32   /* values per Q8_0 block */
#define KERN_Q8_BLOCK_BYTES 34
#define KERN_BF16_LANES 16 /* partial sums of the bf16 x bf16 matmul */

/* Weight types the kernels compute with. The values equal format's enum dtype
 * (DTYPE_F32 = 0, DTYPE_F16 = 1, DTYPE_BF16 = 2, DTYPE_Q8_0 = 3), so the engine may cast;
 * kernels may not include format/ (docs/DESIGN.md §2), so engine_int.h asserts the equality. */
enum kern_wtype {
    KERN_W_F32 = 0,
    KERN_W_F16 = 1,
    KERN_W_BF16 = 2,
    KERN_W_Q8_0 = 3,
};

/* The activation scale a Q8_0 block stores for the f32 scale d: d rounded to f16, or d itself
 * where that is not finite (|x| past f16's range, ~8e6). */
static inline float kern_q8_stored_scale(float d)
{
    float r = hs_f16_to_f32(hs_f32_to_f16(d));
    return __builtin_isfinite(r) ? r : d;
}

/* One block of quantized activations (see the Q8_0 order above). */
struct kern_q8_block {
    float d;                    /* scale: value = d * q */
    int8_t q[KERN_Q8_BLOCK];
};

/* K-quant weight types (q4k.c, q5k.c, q6k.c). Not members of enum kern_wtype, so switches
 * over that enum stay complete; the values equal format's DTYPE_Q4_K, DTYPE_Q5_K and
 * DTYPE_Q6_K (asserted in engine_int.h), so the engine may cast a dtype to int and test it
 * with kern_wtype_is_k. kern_row_bytes and
 * kern_row_to_f32 accept them (cast to enum kern_wtype); kern_matmul does not: use
 * kern_ops.matmul_k. */
#define KERN_K_Q4_K 17
#define KERN_K_Q5_K 18
#define KERN_K_Q6_K 19
#define KERN_QK 256        /* values per K-quant super-block and per kern_q8k_block */
#define KERN_Q4K_BYTES 144
#define KERN_Q5K_BYTES 176
#define KERN_Q6K_BYTES 210

/* One block of activations for K-quant weights (llama.cpp's block_q8_K). */
struct kern_q8k_block {
    float d;                    /* scale: value = d * q */
    int8_t q[KERN_QK];
    int16_t bsum[KERN_QK / 16]; /* bsum[g] = sum of q[16 g .. 16 g + 15] */
};

bool kern_wtype_is_k(int t);
/* Bytes of one row of k values of K-quant type t; 0 when k < 1 or k % 256 != 0. */
size_t kern_k_row_bytes(int t, int64_t k);
/* The 8 six-bit scales and mins of a Q4_K block from its 12 packed bytes (bytes 4..15). */
void kern_q4k_scales(const uint8_t *s12, uint8_t sc[8], uint8_t m[8]);
/* Its inverse: the 12 packed bytes at s12 from 8 scales and 8 mins (6-bit values; higher
 * bits are dropped). */
void kern_q4k_scales_pack(uint8_t *s12, const uint8_t sc[8], const uint8_t m[8]);
/* Quantize x [n_tok, k] (k % 256 == 0) into xq [n_tok, k / 256] (the order above). */
void kern_q8k_quantize(struct kern_q8k_block *xq, const float *x, int64_t n_tok, int64_t k);
/* y[t * y_ld + r] for r in [r0, r1) with K-quant weights wt (KERN_K_Q4_K / _Q5_K / _Q6_K),
 * xq = kern_q8k_quantize(x). Order: the K-quant contract above, so the result is
 * independent of n_tok, r0, r1. The scalar reference; variants through kern_ops. */
void kern_matmul_k(float *y, int64_t y_ld, const void *w, int wt, const struct kern_q8k_block *xq,
                   int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
void kern_q8k_quantize_avx2(struct kern_q8k_block *xq, const float *x, int64_t n_tok, int64_t k);
void kern_matmul_k_avx2(float *y, int64_t y_ld, const void *w, int wt,
                        const struct kern_q8k_block *xq, int64_t n_tok, int64_t k, int64_t r0,
                        int64_t r1);
void kern_matmul_k_avx512(float *y, int64_t y_ld, const void *w, int wt,
                          const struct kern_q8k_block *xq, int64_t n_tok, int64_t k, int64_t r0,
                          int64_t r1);
/* out[0..k) = row `row` of a K-quant matrix as f32: Q4_K / Q5_K (d * sc) * q - dmin * m, Q6_K
 * (d * sc) * (q - 32), each product and the difference rounded separately (llama.cpp's
 * dequantize_row_q4_K / _q5_K / _q6_K expressions). */
void kern_k_row_to_f32(float *out, const void *w, int wt, int64_t k, int64_t row);
/* The inverse: x[0..k) (k % 256 == 0) as one row of K-quant type wt at w, rounded to
 * nearest (q4k.c's and q5k.c's quantizer notes); not llama.cpp's error-minimising search,
 * so a valid row, not the bits llama-quantize would write. */
void kern_k_row_from_f32(void *w, int wt, const float *x, int64_t k);
/* Q5_K (q5k.c): kern_matmul_k and kern_k_row_to_f32 for wt == KERN_K_Q5_K (they forward
 * here; so do the variants' kern_matmul_k_<variant>). Same arguments, same contract. */
void kern_matmul_q5k(float *y, int64_t y_ld, const void *w, const struct kern_q8k_block *xq,
                     int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
void kern_matmul_q5k_avx2(float *y, int64_t y_ld, const void *w, const struct kern_q8k_block *xq,
                          int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
void kern_matmul_q5k_avx512(float *y, int64_t y_ld, const void *w,
                            const struct kern_q8k_block *xq, int64_t n_tok, int64_t k, int64_t r0,
                            int64_t r1);
void kern_q5k_row_to_f32(float *out, const void *w, int64_t k, int64_t row);
void kern_q5k_row_from_f32(void *w, const float *x, int64_t k);
/* Q6_K (q6k.c): kern_matmul_k and kern_k_row_to_f32 for wt == KERN_K_Q6_K, forwarded as Q5_K's. */
void kern_matmul_q6k(float *y, int64_t y_ld, const void *w, const struct kern_q8k_block *xq,
                     int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
void kern_matmul_q6k_avx2(float *y, int64_t y_ld, const void *w, const struct kern_q8k_block *xq,
                          int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
void kern_matmul_q6k_avx512(float *y, int64_t y_ld, const void *w,
                            const struct kern_q8k_block *xq, int64_t n_tok, int64_t k, int64_t r0,
                            int64_t r1);
void kern_q6k_row_to_f32(float *out, const void *w, int64_t k, int64_t row);
void kern_q6k_row_from_f32(void *w, const float *x, int64_t k);

/* ---- the extra block types (q5_1.c, iq4.c): Q5_1, IQ4_NL, IQ4_XS ---------------------
 * Weight types of community GGUF files (experts, PLE tables, whole files). Like the
 * K-quants they are not members of enum kern_wtype (switches over it stay complete); the
 * values equal format's DTYPE_Q5_1, DTYPE_IQ4_NL and DTYPE_IQ4_XS (asserted in
 * engine_int.h). kern_row_bytes, kern_row_to_f32 and kern_row_from_f32 accept them (cast to
 * enum kern_wtype); the matmul is kern_ops.matmul_x. Layouts (llama.cpp's ggml-common.h):
 *   Q5_1, 24 bytes per 32 values: f16 d, f16 m, u32 qh (bit j = 5th bit of value j), 16 B
 *     qs (value j < 16 the low nibble of qs[j], value j + 16 its high nibble);
 *     value = (float)q * d + m with q in [0, 31] (product and sum rounded separately).
 *   IQ4_NL, 18 bytes per 32 values: f16 d, 16 B of 4-bit indices (nibbles as Q5_1's)
 *     into the signed codebook KERN_IQ4_VALUES; value = d * (float)kv[idx].
 *   IQ4_XS, 136 bytes per 256 values: f16 d, u16 scales_h, 4 B scales_l, 128 B indices;
 *     sub-block s (32 values) has ls_s = (scales_l[s / 2] >> 4 (s % 2)) & 15 |
 *     ((scales_h >> 2 s) & 3) << 4 and indices at 16 s as IQ4_NL's block;
 *     value = (d * (float)(ls_s - 32)) * (float)kv[idx] (two roundings, in that order).
 *
 * Matmul order. Q5_1 and IQ4_NL read the Q8_0 activations (kern_q8_quantize: K % 32 == 0,
 * xq.d the stored scale) in the Q8_0 lane scheme: for output y[t][r], block b ascending,
 * dw = hs_f16_to_f32(d), dx = xq[b].d,
 *     Q5_1:   isum_b = sum_{i<32} q_i * xq_i,  xsum_b = sum_{i<32} xq_i,  mw = f16 m
 *             acc[b % 8] = fmaf(dw * dx, (float)isum_b, acc[b % 8])
 *             acc[b % 8] = fmaf(mw * dx, (float)xsum_b, acc[b % 8])
 *     IQ4_NL: isum_b = sum_{i<32} kv[idx_i] * xq_i
 *             acc[b % 8] = fmaf(dw * dx, (float)isum_b, acc[b % 8])
 * 8 partial sums from +0.0f, then the halving tree h = 4, 2, 1 (as Q8_0). IQ4_XS reads the
 * K-quant activations (kern_q8k_quantize, K % 256 == 0) in the K-quant scheme:
 *     isum = sum_{s<8} (ls_s - 32) * (sum_{i in s} kv[idx_i] * xq_i)
 *     acc = fmaf(dw * dx, (float)isum, acc)  (one accumulator, super-blocks ascending)
 * The integer sums are exact (|isum| < 2^28), so a variant may add them in any order;
 * dw * dx and mw * dx are single rounded products. (llama.cpp computes Q5_1 against
 * block_q8_1, whose f16 s = d * sum(q) rounds once more, and sums blocks in one
 * accumulator: the same integer terms, other float steps.) */
#define KERN_X_Q5_1 13
#define KERN_X_IQ4_NL 21
#define KERN_X_IQ4_XS 22
#define KERN_Q5_1_BYTES 24
#define KERN_IQ4NL_BYTES 18
#define KERN_IQ4XS_BYTES 136

/* The IQ4_NL / IQ4_XS codebook (llama.cpp's kvalues_iq4nl): index 0..7 negative, 8..15
 * positive, ascending. */
extern const int8_t kern_iq4_values[16];

/* True for KERN_X_Q5_1, KERN_X_IQ4_NL, KERN_X_IQ4_XS. */
bool kern_wtype_is_x(int t);
/* True when type t reads kern_q8k_quantize activations (IQ4_XS), false when it reads
 * kern_q8_quantize's (Q5_1, IQ4_NL). */
bool kern_x_uses_q8k(int t);
/* Bytes of one row of k values of extra type t; 0 when k < 1 or k is not whole blocks. */
size_t kern_x_row_bytes(int t, int64_t k);
/* y[t * y_ld + r] for r in [r0, r1) with weights of extra type wt: xq from
 * kern_q8_quantize(x) for Q5_1 / IQ4_NL (xk unused, may be NULL), xk from
 * kern_q8k_quantize(x) for IQ4_XS (xq unused). The order above; independent of n_tok, r0,
 * r1. The scalar reference; variants through kern_ops.matmul_x. */
void kern_matmul_x(float *y, int64_t y_ld, const void *w, int wt, const struct kern_q8_block *xq,
                   const struct kern_q8k_block *xk, int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
void kern_matmul_x_avx2(float *y, int64_t y_ld, const void *w, int wt, const struct kern_q8_block *xq,
                        const struct kern_q8k_block *xk, int64_t n_tok, int64_t k, int64_t r0,
                        int64_t r1);
void kern_matmul_x_avx512(float *y, int64_t y_ld, const void *w, int wt,
                          const struct kern_q8_block *xq, const struct kern_q8k_block *xk,
                          int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
/* out[0..k) = row `row` as f32 (the value formulas above; llama.cpp's dequantize_row_*). */
void kern_x_row_to_f32(float *out, const void *w, int wt, int64_t k, int64_t row);
/* The inverse, rounding to nearest (q5_1.c's and iq4.c's quantizer notes): a valid row,
 * not the bits llama-quantize's searches would write. */
void kern_x_row_from_f32(void *w, int wt, const float *x, int64_t k);
/* The first block of rows [0, rows) of k values whose f16 scale (Q5_1: d or m) is NaN or
 * infinite, as row * (blocks per row) + block; -1 when all are finite. The loader's
 * hostile-file check: the matmuls assume finite scales no more than the others do, but a
 * NaN scale would poison every logit silently. */
int64_t kern_x_bad_scale(const void *w, int wt, int64_t rows, int64_t k);
/* The per-type pieces (q5_1*.c; iq4*.c), same arguments and contracts. */
void kern_matmul_q5_1(float *y, int64_t y_ld, const void *w, const struct kern_q8_block *xq,
                      int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
void kern_matmul_q5_1_avx2(float *y, int64_t y_ld, const void *w, const struct kern_q8_block *xq,
                           int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
void kern_matmul_q5_1_avx512(float *y, int64_t y_ld, const void *w, const struct kern_q8_block *xq,
                             int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
void kern_q5_1_row_to_f32(float *out, const void *w, int64_t k, int64_t row);
void kern_q5_1_row_from_f32(void *w, const float *x, int64_t k);
void kern_matmul_iq4nl(float *y, int64_t y_ld, const void *w, const struct kern_q8_block *xq,
                       int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
void kern_matmul_iq4nl_avx2(float *y, int64_t y_ld, const void *w, const struct kern_q8_block *xq,
                            int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
void kern_matmul_iq4nl_avx512(float *y, int64_t y_ld, const void *w, const struct kern_q8_block *xq,
                              int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
void kern_matmul_iq4xs(float *y, int64_t y_ld, const void *w, const struct kern_q8k_block *xq,
                       int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
void kern_matmul_iq4xs_avx2(float *y, int64_t y_ld, const void *w, const struct kern_q8k_block *xq,
                            int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
void kern_matmul_iq4xs_avx512(float *y, int64_t y_ld, const void *w,
                              const struct kern_q8k_block *xq, int64_t n_tok, int64_t k, int64_t r0,
                              int64_t r1);

/* ---- matmul and embeddings (matmul.c) -------------------------------------------- */

/* Bytes of one weight row of k values; 0 when the type is unknown or k is not valid for
 * it (k < 1, or k % 32 != 0 for Q8_0). */
size_t kern_row_bytes(enum kern_wtype t, int64_t k);

/* Quantize x [n_tok, k] (k % 32 == 0) into xq [n_tok, k / 32] blocks, for Q8_0 weights.
 * Done once per input, shared by every matmul reading that input. */
void kern_q8_quantize(struct kern_q8_block *xq, const float *x, int64_t n_tok, int64_t k);

/* y[t * y_ld + r] = sum_{i<k} W[r][i] * x[t * k + i] for t < n_tok and r in [r0, r1).
 * w points at row 0 of the matrix (rows of kern_row_bytes(wt, k) bytes); x is [n_tok, k]
 * f32, contiguous; xq is kern_q8_quantize(x) for KERN_W_Q8_0 (ignored, may be NULL,
 * otherwise). y must not alias x. Order: the header's matmul contract, so the result is
 * independent of n_tok, r0, r1. */
void kern_matmul(float *y, int64_t y_ld, const void *w, enum kern_wtype wt, const float *x,
                 const struct kern_q8_block *xq, int64_t n_tok, int64_t k, int64_t r0,
                 int64_t r1);

/* out[0..k) = row `row` of w, converted to f32 (Q8_0: hs_f16_to_f32(d) * (float)q, one
 * rounded product). The embedding lookup; also the dequantizer the tests check. */
void kern_row_to_f32(float *out, const void *w, enum kern_wtype wt, int64_t k, int64_t row);
/* The inverse: x[0..k) stored as one row of wt at w (kern_row_bytes(wt, k) bytes,
 * little-endian): f16 / bf16 rounded to nearest even, Q8_0 llama.cpp's block (d = max|x| /
 * 127 stored as f16, q = round(x / d)), K-quants through kern_k_row_from_f32. */
void kern_row_from_f32(void *w, enum kern_wtype wt, const float *x, int64_t k);

/* The 32-lane dot product of the header (the float matmul's order with x as weights). */
float kern_dot(const float *a, const float *b, int64_t n);

/* ---- Q8_0 in the panel layout (q8p.c; matmul q8p_avx512.c, q8p_avx2.c) ------------------
 * Q8_0 weights rearranged once (at engine start) so that a VNNI kernel serves any number of
 * tokens without repacking and without horizontal sums (an AVX2 one too, from the two 8-row
 * halves of each vector); the layout is q8p.c's design note.
 * A matmul over it keeps the Q8_0 order above to the bit: same results as kern_matmul on
 * the Q8_0 rows. Same size as the Q8_0 matrix (rows padded to groups of KERN_Q8P_ROWS). */
#define KERN_Q8P_ROWS 16
#define KERN_Q8P_KMAX 65536 /* matmul_q8p takes k <= this (its stack buffers); longer rows stay Q8_0 */
#define KERN_Q8P_PAIR_BYTES 1088 /* two blocks of 16 rows: 2 x 512 quant bytes, 2 x 32 scale bytes */
/* The slot block b of nb sits in inside a group: blocks in the order of the Q8_0 matmul's
 * partial sums, b % 8 major and b ascending inside (0, 8, 16, ..., 1, 9, 17, ...), so a
 * kernel runs one partial sum at a time over consecutive slots (q8p.c note 4). */
static inline int64_t kern_q8p_slot(int64_t b, int64_t nb)
{
    int64_t l = b % KERN_Q8_LANES, q = nb / KERN_Q8_LANES, m = nb % KERN_Q8_LANES;
    return l * q + (l < m ? l : m) + b / KERN_Q8_LANES;
}
/* Byte offsets, inside a group, of slot s's 512 quant bytes and of its 16 f16 scales. */
static inline size_t kern_q8p_quants_at(int64_t s) { return (size_t)(s >> 1) * KERN_Q8P_PAIR_BYTES + (size_t)(s & 1) * 512; }
static inline size_t kern_q8p_scales_at(int64_t s) { return (size_t)(s >> 1) * KERN_Q8P_PAIR_BYTES + 1024 + (size_t)(s & 1) * 32; }
/* Bytes of one group of KERN_Q8P_ROWS rows of k values (a multiple of 64). */
size_t kern_q8p_group_bytes(int64_t k);
/* Bytes of a packed matrix; 0 when rows < 1 or k is not a positive multiple of 32. */
size_t kern_q8p_bytes(int64_t rows, int64_t k);
/* Row groups [g0, g1) of dst (kern_q8p_bytes(rows, k) bytes, 64-byte aligned for the
 * kernels) = the panel layout of the Q8_0 matrix w [rows, k]; g1 <= ceil(rows / 16). Groups
 * are independent: threads may pack disjoint ranges. */
void kern_q8p_pack(void *dst, const void *w, int64_t rows, int64_t k, int64_t g0, int64_t g1);
/* out (kern_row_bytes(KERN_W_Q8_0, k) bytes) = row `row` of the packed matrix wp, the Q8_0
 * row that was packed, byte for byte. */
void kern_q8p_row(void *out, const void *wp, int64_t k, int64_t row);
/* cx[i] = -128 * (the sum of xq[i]'s 32 quants), i < n: the activation's share of the
 * layout's offset (q8p.c note 3), to add to a block sum; exact in int32. A matmul_q8p caller that multiplies one
 * quantized activation by several matrices computes it once and passes it to each. */
void kern_q8p_corr(int32_t *cx, const struct kern_q8_block *xq, int64_t n);

/* ---- Q4_K / Q6_K in the row-group layout (q4kp.c, q6kp.c; matmul q4kp_avx512.c,
 * q6kp_avx512.c) ------------------------------------------------------------------------
 * K-quant weights rearranged once (at engine start) as the Q8_0 panel layout is, so that a
 * VNNI kernel reads 16 rows' integer sums out of vpdpbusd chains (lane i = row 16 g + i)
 * for any number of tokens, with no per-call repacking and no horizontal sums. A pure
 * rearrangement of each block's bits (kern_kp_row gives the rows back byte for byte), about
 * the size of the matrix (q4kp.c, q6kp.c notes); a matmul over it keeps the K-quant
 * contract above to the bit: kern_matmul_k's results on the unpacked rows. */
#define KERN_KP_ROWS 16
#define KERN_Q4KP_SB_BYTES 2368 /* one super-block of 16 rows (q4kp.c) */
#define KERN_Q6KP_SB_BYTES 3392 /* one super-block of 16 rows (q6kp.c) */
/* Bytes of one group of KERN_KP_ROWS rows of k values (k % 256 == 0) of type wt
 * (KERN_K_Q4_K or KERN_K_Q6_K; a multiple of 64); 0 for another type or k. */
size_t kern_kp_group_bytes(int wt, int64_t k);
/* Bytes of a packed matrix; 0 when rows < 1, k is not a positive multiple of 256 or wt is
 * neither type. */
size_t kern_kp_bytes(int wt, int64_t rows, int64_t k);
/* Row groups [g0, g1) of dst (kern_kp_bytes(wt, rows, k) bytes, 64-byte aligned) = the
 * row-group layout of the matrix w [rows, k] of type wt; g1 <= ceil(rows / 16). Groups are
 * independent: threads may pack disjoint ranges. Padding rows are zero blocks. */
void kern_kp_pack(void *dst, const void *w, int wt, int64_t rows, int64_t k, int64_t g0, int64_t g1);
/* out (kern_k_row_bytes(wt, k) bytes) = row `row` of the packed matrix wp, the row that was
 * packed, byte for byte. */
void kern_kp_row(void *out, const void *wp, int wt, int64_t k, int64_t row);
/* The same for one type (kern_kp_* forward here). */
size_t kern_q4kp_group_bytes(int64_t k);
void kern_q4kp_pack(void *dst, const void *w, int64_t rows, int64_t k, int64_t g0, int64_t g1);
void kern_q4kp_row(void *out, const void *wp, int64_t k, int64_t row);
size_t kern_q6kp_group_bytes(int64_t k);
void kern_q6kp_pack(void *dst, const void *w, int64_t rows, int64_t k, int64_t g0, int64_t g1);
void kern_q6kp_row(void *out, const void *wp, int64_t k, int64_t row);

/* ---- bf16 x bf16 matmul (bf16.c; the "BF16 weights" contract above) ----------------- */

/* xb[i] = x[i] rounded to bf16 for i < n (the contract's rule). Done once per input, shared
 * by every bf16 matmul reading it. */
void kern_bf16_round(uint16_t *xb, const float *x, int64_t n);

/* y[t * y_ld + r] = sum_{i<k} W[r][i] * xb[t * k + i] for t < n_tok, r in [r0, r1), with w
 * bf16 rows of 2 k bytes (any alignment) and xb [n_tok, k] bf16 (normally from
 * kern_bf16_round; other bits are allowed, D applies). Any k >= 1. The scalar reference;
 * variants through kern_ops. Independent of n_tok, r0, r1. y must not alias xb. */
void kern_bf16_matmul(float *y, int64_t y_ld, const void *w, const uint16_t *xb, int64_t n_tok,
                      int64_t k, int64_t r0, int64_t r1);
void kern_bf16_round_avx2(uint16_t *xb, const float *x, int64_t n);
void kern_bf16_matmul_avx2(float *y, int64_t y_ld, const void *w, const uint16_t *xb,
                           int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
void kern_bf16_round_avx512(uint16_t *xb, const float *x, int64_t n);
/* vdpbf16ps (needs AVX512_BF16); _avx512f: the same bits with FMAs, for AVX-512 CPUs
 * without BF16 (Skylake-X .. Ice Lake). */
void kern_bf16_matmul_avx512(float *y, int64_t y_ld, const void *w, const uint16_t *xb,
                             int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
void kern_bf16_matmul_avx512f(float *y, int64_t y_ld, const void *w, const uint16_t *xb,
                              int64_t n_tok, int64_t k, int64_t r0, int64_t r1);

/* ---- norms (norm.c) ---------------------------------------------------------------- */

/* RMSNorm with a folded weight (GGUF form, or HF's 1 + w already added by the loader):
 *     ss = kern_dot(x, x, n);  r = 1.0f / sqrtf(ss / (float)n + eps);
 *     y[i] = (x[i] * r) * w[i]
 * y may equal x. */
void kern_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps);

/* kern_rmsnorm on n_head vectors of hd values, vector j at x + j * ld, in place; one
 * weight w[hd] for all heads (q_norm / k_norm). Heads [h0, h1) only. */
void kern_rmsnorm_heads(float *x, int64_t ld, int64_t hd, const float *w, float eps,
                        int64_t h0, int64_t h1);

/* The GDN output norm for heads [h0, h1) of n values each (o, z, y at + h * n):
 *     r as kern_rmsnorm;  y[i] = ((o[i] * r) * w[i]) * kern_silu(z[i])
 * w[n] is used as stored (never 1 + w). y may equal o or z. */
void kern_rmsnorm_gated(float *y, const float *o, const float *z, const float *w, int64_t n,
                        float eps, int64_t h0, int64_t h1);

/* L2 norm of heads [h0, h1) of n values (vector h at x + h * n), in place:
 *     r = 1.0f / sqrtf(kern_dot(x, x, n) + eps);  x[i] = x[i] * r     (eps = 1e-6) */
void kern_l2norm_heads(float *x, int64_t n, float eps, int64_t h0, int64_t h1);

/* ---- elementwise (ffn.c) ------------------------------------------------------------ */

/* exp(x) in f32, within one ulp, the same bits in every variant (the SIMD ones run this
 * sequence on 8 doubles per vector). NaN -> x + x; x > 89 -> +inf; x < -104 -> +0; else
 *     t = (double)x * 0x1.71547652b82fep0 (1/ln 2);  m = t + 0x1.8p52;  n = m - 0x1.8p52
 *     (n = t rounded to nearest, ties to even);  g = (t - n) * 0x1.62e42fefa39efp-1 (ln 2)
 *     p = 1/8!; then p = p * g + 1/i! for i = 7 .. 0 (each product and sum rounded)
 *     result = (float)(p * 2^n)   (2^n built from n's bits; one rounding to f32)
 * |g| <= 0.347, so the truncated series errs by < 2e-10 relative, and the only rounding
 * that matters is the last. */
static inline float kern_expf(float x)
{
    if (x != x) return x + x;
    if (x > 89.0f) return __builtin_inff();
    if (x < -104.0f) return 0.0f;
    double t = (double)x * 0x1.71547652b82fep0;
    double m = t + 0x1.8p52;
    double n = m - 0x1.8p52;
    double g = (t - n) * 0x1.62e42fefa39efp-1;
    double p = 1.0 / 40320.0;
    p = p * g + 1.0 / 5040.0;
    p = p * g + 1.0 / 720.0;
    p = p * g + 1.0 / 120.0;
    p = p * g + 1.0 / 24.0;
    p = p * g + 1.0 / 6.0;
    p = p * g + 0.5;
    p = p * g + 1.0;
    p = p * g + 1.0;
    uint64_t bits;
    __builtin_memcpy(&bits, &m, sizeof bits);
    bits = (bits + 1023u) << 52; /* m's low bits hold n (two's complement) */
    double s;
    __builtin_memcpy(&s, &bits, sizeof s);
    return (float)(p * s);
}

/* silu(x) = x / (1.0f + kern_expf(-x));  sigmoid(x) = 1.0f / (1.0f + kern_expf(-x)). */
float kern_silu(float x);
float kern_sigmoid(float x);
/* softplus(x) = x > 20 ? x : log1pf(kern_expf(x))  (torch's threshold). */
float kern_softplus(float x);

/* y[i] = kern_silu(gate[i]) * up[i] for i in [i0, i1). y may equal gate or up. */
void kern_swiglu(float *y, const float *gate, const float *up, int64_t i0, int64_t i1);
/* y[i] = x[i] * kern_sigmoid(g[i]) (attention output gate). y may equal x or g. */
void kern_sigmoid_mul(float *y, const float *x, const float *g, int64_t n);
/* y[i] = ((y[i] * r) * w[i]) * kern_silu(z[i]): the tail of the GDN gated norm. */
void kern_gated_scale(float *y, const float *z, const float *w, float r, int64_t n);
/* y[i] = y[i] + x[i] (residual). */
void kern_add(float *y, const float *x, int64_t n);
/* y[i] = fmaf(a, x[i], y[i]) (weighted expert sum). */
void kern_axpy(float *y, float a, const float *x, int64_t n);

/* y = softmax(x) over n: m = max (ascending scan); e_i = kern_expf(x_i - m); s = sum e_i
 * ascending; y_i = e_i / s. y may equal x. */
void kern_softmax(float *y, const float *x, int64_t n);

/* MoE routing: probs = kern_softmax(logits[n_exp]); pick n_sel experts by descending
 * probability, ties to the lower index; ids[j], weights[j] in pick order. With renorm
 * weights[j] = p_j / s where s = sum of the picked p in pick order; else p_j.
 * probs [n_exp] is written (caller's scratch); 1 <= n_sel <= n_exp. */
void kern_moe_route(int32_t *ids, float *weights, float *probs, const float *logits,
                    int64_t n_exp, int64_t n_sel, bool renorm);

/* ---- RoPE (rope.c) ------------------------------------------------------------------ */

/* Partial NeoX rotary embedding at position pos over the first n_rot dims of a head
 * (n_rot even). cs[2 * i] = cos, cs[2 * i + 1] = sin of phi_i = pos * theta^(-2i/n_rot),
 * i < n_rot / 2, each computed in double and rounded once to f32. cs holds n_rot floats. */
void kern_rope_table(float *cs, int64_t n_rot, double theta, int64_t pos);

/* Rotate heads [h0, h1) (head j at x + j * ld) with a table from kern_rope_table:
 * for i < n_rot / 2, a = x[i], b = x[i + n_rot / 2]:
 *     x[i] = a * c - b * s;   x[i + n_rot / 2] = b * c + a * s   (products rounded, no fma)
 * dims n_rot.. are untouched. */
void kern_rope_apply(float *x, int64_t ld, int64_t n_rot, const float *cs, int64_t h0,
                     int64_t h1);

/* ---- attention (attn.c) ------------------------------------------------------------- */

/* Causal GQA attention of one query position over keys 0 .. n_pos - 1 (the query's own
 * position is n_pos - 1), for query heads [h0, h1).
 *   q:  [n_head, hd], head j at q + j * hd (post-norm, post-RoPE)
 *   kc, vc: key/value cache, key of position t, kv-head m at kc + t * kv_ld + m * hd
 *   out: [n_head, hd], head j at out + j * hd
 *   query head j reads kv head j / (n_head / n_kv_head)   (n_head % n_kv_head == 0)
 *   scratch: KERN_ATTN_HEADS * n_pos floats (a variant may score up to that many heads of
 *   one kv head together, sharing each key and value row's loads).
 * Per head: s_t = kern_dot(q, k_t, hd) * scale; m = max s_t (ascending);
 * e_t = kern_expf(s_t - m); sum = sum e_t ascending; o[d] = 0, then o[d] = fmaf(e_t, v_t[d], o[d])
 * for t ascending; out[d] = o[d] / sum. The sigmoid output gate is kern_sigmoid_mul. */
#define KERN_ATTN_HEADS 4
void kern_attn(float *out, const float *q, const float *kc, const float *vc, int64_t kv_ld,
               int64_t n_pos, int64_t hd, int64_t n_head, int64_t n_kv_head, float scale,
               float *scratch, int64_t h0, int64_t h1);

/* kern_attn for n_tok consecutive query positions: query i (0 <= i < n_tok) at
 * q + i * q_ld attends over keys 0 .. n_pos0 + i - 1 into out + i * out_ld. The result is
 * exactly that of n_tok kern_attn calls (every (query, head) keeps its own order); a
 * variant may load each key and value row once for several queries. scratch:
 * KERN_ATTN_TOKS * KERN_ATTN_HEADS * (n_pos0 + n_tok - 1) floats; n_tok <= KERN_ATTN_TOKS. */
#define KERN_ATTN_TOKS 3
void kern_attn_tokens(float *out, int64_t out_ld, const float *q, int64_t q_ld, const float *kc,
                      const float *vc, int64_t kv_ld, int64_t n_pos0, int64_t n_tok, int64_t hd,
                      int64_t n_head, int64_t n_kv_head, float scale, float *scratch, int64_t h0,
                      int64_t h1);

/* ---- Gated DeltaNet (gdn.c) --------------------------------------------------------- */

/* Depthwise causal conv1d step with SiLU for channels [c0, c1) of n_ch.
 *   state: [k_conv - 1, n_ch], row 0 the oldest pre-conv input (zeros at sequence start)
 *   w:     [n_ch, k_conv] (tap k_conv - 1 multiplies the current input)
 *   acc = 0; for j = 0..k_conv-1: acc = fmaf(w[c][j], win_j[c], acc), win = state rows
 *   then x; out[c] = kern_silu(acc). The state then shifts one row up and its last row
 *   becomes x[c]. out may equal x. */
void kern_conv1d_step(float *out, float *state, const float *x, const float *w, int64_t n_ch,
                      int64_t k_conv, int64_t c0, int64_t c1);

/* GDN gates for v-heads [h0, h1): g = ssm_a[h] * kern_softplus(a[h] + dt_bias[h]);
 * alpha[h] = kern_expf(g) (decay, in (0, 1] for ssm_a < 0); beta[h] = kern_sigmoid(b[h]).
 * ssm_a is the GGUF form -exp(A_log). alpha/beta may equal a/b. */
void kern_gdn_gates(float *alpha, float *beta, const float *a, const float *b,
                    const float *ssm_a, const float *dt_bias, int64_t h0, int64_t h1);

/* One token of the gated delta rule for v-heads [h0, h1).
 *   S: [n_vh, dk, dv] f32 state, updated in place; q, k: [n_kh, dk], L2-normed (q not yet
 *   scaled); v: [n_vh, dv]; o: [n_vh, dv] out. v-head h uses k-head kh = h % n_kh (tiled).
 * Per head h and column j (columns are independent), with sc = 1.0f / sqrtf((float)dk),
 * i ascending:
 *   pass 1: S[i][j] = S[i][j] * alpha[h];  u = fmaf(S[i][j], k[kh][i], u)   (u from 0)
 *           dl = beta[h] * (v[h][j] - u)
 *   pass 2: S[i][j] = fmaf(k[kh][i], dl, S[i][j]);
 *           o = fmaf(S[i][j], q[kh][i] * sc, o)                             (o from 0)
 * so the read-out uses the updated state. o must not alias q, k, v. */
void kern_gdn_step(float *o, float *S, const float *q, const float *k, const float *v,
                   const float *alpha, const float *beta, int64_t n_kh, int64_t n_vh,
                   int64_t dk, int64_t dv, int64_t h0, int64_t h1);

/* ==== SIMD variants and dispatch (dispatch.c; X_avx2.c, X_avx512.c beside each X.c, and
 * X_avxvnni.c where an AVX2 file is built again for AVX-VNNI) ============================== */

/* The hot kernels of one code path. Every variant equals the scalar reference above bit for
 * bit (the same accumulation orders; tests/unit/kernels/test_simd.c), so the choice changes
 * speed only, never a numerics fingerprint. Signatures and contracts are those of
 * kern_matmul, kern_q8_quantize and kern_dot; for Q8_0 the AVX2 and AVX-512 matmuls rely on
 * xq coming from kern_q8_quantize (any variant), i.e. activation quants in [-127, 127]. */
struct kern_ops {
    const char *name; /* "scalar", "avx2", "avxvnni", "avx512vnni", "avx512" */
    void (*matmul)(float *y, int64_t y_ld, const void *w, enum kern_wtype wt, const float *x,
                   const struct kern_q8_block *xq, int64_t n_tok, int64_t k, int64_t r0,
                   int64_t r1);
    void (*q8_quantize)(struct kern_q8_block *xq, const float *x, int64_t n_tok, int64_t k);
    float (*dot)(const float *a, const float *b, int64_t n);
    /* appended ([F7]): kern_attn and kern_gdn_step of the variant (attn_*.c, gdn_*.c) */
    void (*attn)(float *out, const float *q, const float *kc, const float *vc, int64_t kv_ld,
                 int64_t n_pos, int64_t hd, int64_t n_head, int64_t n_kv_head, float scale,
                 float *scratch, int64_t h0, int64_t h1);
    void (*gdn_step)(float *o, float *S, const float *q, const float *k, const float *v,
                     const float *alpha, const float *beta, int64_t n_kh, int64_t n_vh,
                     int64_t dk, int64_t dv, int64_t h0, int64_t h1);
    /* appended ([F7], K-quants): kern_matmul_k of the variant (q4k_*.c, forwarding Q5_K and
     * Q6_K to q5k_*.c and q6k_*.c) */
    void (*matmul_k)(float *y, int64_t y_ld, const void *w, int wt, const struct kern_q8k_block *xq,
                     int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
    /* appended ([F7], bf16): kern_bf16_round and kern_bf16_matmul of the variant (bf16*.c) */
    void (*bf16_round)(uint16_t *xb, const float *x, int64_t n);
    void (*bf16_matmul)(float *y, int64_t y_ld, const void *w, const uint16_t *xb, int64_t n_tok,
                        int64_t k, int64_t r0, int64_t r1);
    /* appended ([F7], elementwise): kern_swiglu, kern_sigmoid_mul, kern_gated_scale and
     * kern_conv1d_step of the variant (ffn_*.c; the conv step gdn_*.c) */
    void (*swiglu)(float *y, const float *gate, const float *up, int64_t i0, int64_t i1);
    void (*sigmoid_mul)(float *y, const float *x, const float *g, int64_t n);
    void (*gated_scale)(float *y, const float *z, const float *w, float r, int64_t n);
    void (*conv1d_step)(float *out, float *state, const float *x, const float *w, int64_t n_ch,
                        int64_t k_conv, int64_t c0, int64_t c1);
    /* appended ([F7], long prompts): kern_attn_tokens of the variant */
    void (*attn_tokens)(float *out, int64_t out_ld, const float *q, int64_t q_ld, const float *kc,
                        const float *vc, int64_t kv_ld, int64_t n_pos0, int64_t n_tok, int64_t hd,
                        int64_t n_head, int64_t n_kv_head, float scale, float *scratch, int64_t h0,
                        int64_t h1);
    /* appended ([F12], extra block types): kern_matmul_x of the variant (q5_1_*.c, iq4_*.c) */
    void (*matmul_x)(float *y, int64_t y_ld, const void *w, int wt, const struct kern_q8_block *xq,
                     const struct kern_q8k_block *xk, int64_t n_tok, int64_t k, int64_t r0,
                     int64_t r1);
    /* appended ([F14]): kern_q8k_quantize of the variant (q4k_avx2.c; the AVX-512 tables
     * take the AVX2 one) */
    void (*q8k_quantize)(struct kern_q8k_block *xq, const float *x, int64_t n_tok, int64_t k);
    /* appended ([F10], many streams): y[t * y_ld + r] for r in [r0, r1) (any rows, any
     * split) with Q8_0 weights in the panel layout (kern_q8p_pack), xq = kern_q8_quantize(x),
     * cx = kern_q8p_corr(xq, n_tok * k / 32) or NULL (then the call computes it):
     * kern_matmul's bits on the unpacked rows. NULL in a table without it: the engine then
     * keeps the Q8_0 rows and never packs (q8p_avx512.c, q8p_avx2.c; the AVX2 one ignores cx) */
    void (*matmul_q8p)(float *y, int64_t y_ld, const void *wp, const struct kern_q8_block *xq,
                       const int32_t *cx, int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
    /* appended ([F10], many streams): kern_matmul_k's results for rows [r0, r1) (any rows,
     * any split) with Q4_K or Q6_K weights (wt KERN_K_Q4_K / KERN_K_Q6_K) in the row-group
     * layout (kern_kp_pack), xq = kern_q8k_quantize(x). NULL in a table without it: the
     * engine then keeps the K-quant rows and never packs them (q4kp_avx512.c) */
    void (*matmul_kp)(float *y, int64_t y_ld, const void *wp, int wt, const struct kern_q8k_block *xq,
                      int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
};

/* The table of variant `variant` ("scalar", "avx2", "avxvnni", "avx512vnni", "avx512"); NULL
 * for an unknown name or NULL, and for the x86 ones in a build for another CPU family. The
 * caller must know the CPU has the variant's instructions: kern_best_variant,
 * kern_variant_runs. Static storage, never freed. */
const struct kern_ops *kern_ops_for(const char *variant);

/* The rank of a variant in the order scalar < avx2 < avxvnni < avx512vnni < avx512 (0 .. 4),
 * fastest last. A CPU that runs one runs every lower one except "avxvnni", which needs
 * AVX-VNNI (kern_variant_runs). -1 for a name this build has no table for. */
int kern_variant_rank(const char *variant);

/* True when a CPU with these features (as kern_best_variant's) has every one the table of
 * `variant` needs (dispatch.c note 4). False for unknown names and NULL. */
bool kern_variant_runs(const char *variant, bool avx2_fma_f16c, bool avx_vnni, bool avx512_vnni, bool avx512_bf16);

/* The fastest variant this build has for a CPU with the given features (from sys CPU
 * detection; kernels may not include sys): avx2_fma_f16c = AVX2, FMA and F16C all present;
 * avx_vnni = AVX-VNNI (vpdpbusd on ymm, VEX: Alder Lake and later Intel cores, Sapphire
 * Rapids, Zen 5); avx512_vnni = AVX-512 F, BW, VL, DQ and VNNI all present (Cascade Lake,
 * Ice Lake and later, Zen 4 and later); avx512_bf16 = those and AVX512_BF16 too (Cooper
 * Lake, Sapphire Rapids and later, Zen 4 and later). Returns "avx512" (all of them),
 * "avx512vnni" (the same kernels, except that bf16 weights multiply with FMAs in place of
 * vdpbf16ps: same bits, kernels.h "BF16 weights"), "avxvnni" (the AVX2 table with VNNI
 * Q8_0, Q4_K and Q6_K matmuls), "avx2" or "scalar" (a static string). */
const char *kern_best_variant(bool avx2_fma_f16c, bool avx_vnni, bool avx512_vnni, bool avx512_bf16);

/* The variants' entry points (x86 builds only); use them through kern_ops_for. */
void kern_swiglu_avx2(float *y, const float *gate, const float *up, int64_t i0, int64_t i1);
void kern_sigmoid_mul_avx2(float *y, const float *x, const float *g, int64_t n);
void kern_gated_scale_avx2(float *y, const float *z, const float *w, float r, int64_t n);
void kern_conv1d_step_avx2(float *out, float *state, const float *x, const float *w, int64_t n_ch,
                           int64_t k_conv, int64_t c0, int64_t c1);
void kern_swiglu_avx512(float *y, const float *gate, const float *up, int64_t i0, int64_t i1);
void kern_sigmoid_mul_avx512(float *y, const float *x, const float *g, int64_t n);
void kern_gated_scale_avx512(float *y, const float *z, const float *w, float r, int64_t n);
void kern_conv1d_step_avx512(float *out, float *state, const float *x, const float *w, int64_t n_ch,
                             int64_t k_conv, int64_t c0, int64_t c1);
void kern_matmul_avx2(float *y, int64_t y_ld, const void *w, enum kern_wtype wt, const float *x,
                      const struct kern_q8_block *xq, int64_t n_tok, int64_t k, int64_t r0,
                      int64_t r1);
void kern_q8_quantize_avx2(struct kern_q8_block *xq, const float *x, int64_t n_tok, int64_t k);
float kern_dot_avx2(const float *a, const float *b, int64_t n);
void kern_matmul_kp_avx2(float *y, int64_t y_ld, const void *wp, int wt, const struct kern_q8k_block *xq,
                         int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
void kern_matmul_q4kp_avx2(float *y, int64_t y_ld, const void *wp, const struct kern_q8k_block *xq,
                           int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
void kern_matmul_q6kp_avx2(float *y, int64_t y_ld, const void *wp, const struct kern_q8k_block *xq,
                           int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
void kern_matmul_avx512(float *y, int64_t y_ld, const void *w, enum kern_wtype wt,
                        const float *x, const struct kern_q8_block *xq, int64_t n_tok, int64_t k,
                        int64_t r0, int64_t r1);
void kern_q8_quantize_avx512(struct kern_q8_block *xq, const float *x, int64_t n_tok, int64_t k);
void kern_matmul_q8p_avx512(float *y, int64_t y_ld, const void *wp, const struct kern_q8_block *xq,
                            const int32_t *cx, int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
void kern_matmul_q8p_avx2(float *y, int64_t y_ld, const void *wp, const struct kern_q8_block *xq,
                          const int32_t *cx, int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
/* The "avxvnni" table's own entries (AVX2 + AVX-VNNI): matmul_avxvnni.c, q8p_avxvnni.c,
 * q4k_avxvnni.c, q4kp_avxvnni.c, q6kp_avxvnni.c; kern_matmul_kp_avxvnni in kp.c. */
void kern_matmul_k_avxvnni(float *y, int64_t y_ld, const void *w, int wt, const struct kern_q8k_block *xq,
                           int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
void kern_matmul_kp_avxvnni(float *y, int64_t y_ld, const void *wp, int wt, const struct kern_q8k_block *xq,
                            int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
void kern_matmul_q4kp_avxvnni(float *y, int64_t y_ld, const void *wp, const struct kern_q8k_block *xq,
                              int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
void kern_matmul_q6kp_avxvnni(float *y, int64_t y_ld, const void *wp, const struct kern_q8k_block *xq,
                              int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
void kern_matmul_avxvnni(float *y, int64_t y_ld, const void *w, enum kern_wtype wt, const float *x,
                         const struct kern_q8_block *xq, int64_t n_tok, int64_t k, int64_t r0,
                         int64_t r1);
void kern_matmul_q8p_avxvnni(float *y, int64_t y_ld, const void *wp, const struct kern_q8_block *xq,
                             const int32_t *cx, int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
void kern_matmul_kp_avx512(float *y, int64_t y_ld, const void *wp, int wt, const struct kern_q8k_block *xq,
                           int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
void kern_matmul_q4kp_avx512(float *y, int64_t y_ld, const void *wp, const struct kern_q8k_block *xq,
                             int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
void kern_matmul_q6kp_avx512(float *y, int64_t y_ld, const void *wp, const struct kern_q8k_block *xq,
                             int64_t n_tok, int64_t k, int64_t r0, int64_t r1);
float kern_dot_avx512(const float *a, const float *b, int64_t n);

/* ---- SIMD sequence kernels ([F7]; attn_avx2.c, attn_avx512.c, gdn_avx2.c, gdn_avx512.c)
 * Variants of kern_attn and kern_gdn_step, same contracts and bits: vectors hold
 * independent outputs (GDN state columns, attention output dims), never partial sums of one
 * reduction, and attention scores use the variant's kern_dot. Use them through kern_ops. */
void kern_attn_avx2(float *out, const float *q, const float *kc, const float *vc, int64_t kv_ld,
                    int64_t n_pos, int64_t hd, int64_t n_head, int64_t n_kv_head, float scale,
                    float *scratch, int64_t h0, int64_t h1);
void kern_attn_tokens_avx2(float *out, int64_t out_ld, const float *q, int64_t q_ld, const float *kc,
                           const float *vc, int64_t kv_ld, int64_t n_pos0, int64_t n_tok, int64_t hd,
                           int64_t n_head, int64_t n_kv_head, float scale, float *scratch, int64_t h0,
                           int64_t h1);
void kern_gdn_step_avx2(float *o, float *S, const float *q, const float *k, const float *v,
                        const float *alpha, const float *beta, int64_t n_kh, int64_t n_vh,
                        int64_t dk, int64_t dv, int64_t h0, int64_t h1);
void kern_attn_avx512(float *out, const float *q, const float *kc, const float *vc, int64_t kv_ld,
                      int64_t n_pos, int64_t hd, int64_t n_head, int64_t n_kv_head, float scale,
                      float *scratch, int64_t h0, int64_t h1);
void kern_attn_tokens_avx512(float *out, int64_t out_ld, const float *q, int64_t q_ld, const float *kc,
                             const float *vc, int64_t kv_ld, int64_t n_pos0, int64_t n_tok, int64_t hd,
                             int64_t n_head, int64_t n_kv_head, float scale, float *scratch, int64_t h0,
                             int64_t h1);
void kern_gdn_step_avx512(float *o, float *S, const float *q, const float *k, const float *v,
                          const float *alpha, const float *beta, int64_t n_kh, int64_t n_vh,
                          int64_t dk, int64_t dv, int64_t h0, int64_t h1);

#endif
