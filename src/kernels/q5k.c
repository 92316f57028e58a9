/*
 * q5k.c — scalar reference of the Q5_K weight type (llama.cpp's block_q5_K, the 5-bit
 * K-quant of Q5_K_M files and of the "dynamic" mixes such as Q4_K_XL): the batched matmul
 * against kern_q8k_quantize activations, the row dequantizer and the row quantizer (round
 * to nearest, scales as Q4_K's: kern_kq_scales_from_f32). The accumulation order is
 * the Q5_K line of kernels.h's "K-quant weights" contract; this file is its definition and
 * q5k_avx2.c / q5k_avx512.c equal it bit for bit. kern_matmul_k and the variants'
 * kern_matmul_k_<variant> (q4k*.c) forward KERN_K_Q5_K here.
 *
 * Block layout (llama.cpp's ggml-common.h; little-endian, 256 values per super-block):
 *
 *   Q5_K, 176 bytes
 *   OFFSET SIZE  FIELD
 *        0    2  d     f16 scale of scales
 *        2    2  dmin  f16 scale of mins
 *        4   12  packed 6-bit sc[8], m[8]: exactly Q4_K's (kern_q4k_scales)
 *       16   32  qh: bit s of qh[l] is the 5th bit of value 32 s + l
 *       48  128  qs: two 4-bit quants a byte, as Q4_K's qs
 *
 *   Value i (sub-block s = i / 32 of 32 values; chunk j = i / 64, l = i % 32):
 *       lo = s even ? qs[32 j + l] & 15 : qs[32 j + l] >> 4
 *       q  = lo | ((qh[l] >> s) & 1) << 4                    in [0, 31]
 *       value = (d * sc_s) * q - dmin * m_s   (each product and the difference rounded once,
 *                                              llama.cpp's dequantize_row_q5_K)
 *
 * Design note:
 *   1. Only the float steps are ordered: per block dw * dx and dmin * dx rounded once each,
 *      then acc = fmaf(dw * dx, isum, acc); acc = fmaf(-(dmin * dx), msum, acc), blocks
 *      ascending, one accumulator per output (the same two steps as Q4_K). isum and msum
 *      are exact int32 sums (|isum| <= 256 * 31 * 127 * 63 < 2^27), so a variant may add
 *      them in any order.
 *   2. The result of an output depends on its row and token only, never on n_tok, r0, r1.
 */
#include <math.h>
#include <string.h>

#include "kernels/kernels_int.h"

#define Q5K_QH 16 /* offset of qh in a block */
#define Q5K_QS 48 /* offset of qs in a block */

/* The 5-bit quant (0..31) of value i of a Q5_K block. */
static int q5k_quant(const uint8_t *blk, int i)
{
    int s = i / 32, l = i % 32;
    uint8_t b = blk[Q5K_QS + 32 * (i / 64) + l];
    int lo = s % 2 ? b >> 4 : b & 15;
    return lo | ((blk[Q5K_QH + l] >> s) & 1) << 4;
}

/* One Q5_K super-block times one activation block: acc after the block (kernels.h order). */
static float q5k_block(const uint8_t *blk, const struct kern_q8k_block *xb, float acc)
{
    uint8_t sc[8], m[8];
    kern_q4k_scales(blk + 4, sc, m);
    int32_t isum = 0, msum = 0;
    for (int s = 0; s < 8; s++) {
        int32_t dot = 0;
        for (int i = 32 * s; i < 32 * s + 32; i++) dot += q5k_quant(blk, i) * (int32_t)xb->q[i];
        isum += (int32_t)sc[s] * dot;
    }
    for (int g = 0; g < 16; g++) msum += (int32_t)m[g / 2] * (int32_t)xb->bsum[g];
    float dw = hs_f16_to_f32(hs_rd_u16(blk)) * xb->d;
    float dm = hs_f16_to_f32(hs_rd_u16(blk + 2)) * xb->d;
    acc = fmaf(dw, (float)isum, acc);
    return fmaf(-dm, (float)msum, acc);
}

void kern_matmul_q5k(float *y, int64_t y_ld, const void *w, const struct kern_q8k_block *xq,
                     int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    int64_t nb = k / KERN_QK;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * (size_t)nb * KERN_Q5K_BYTES;
        for (int64_t t = 0; t < n_tok; t++) {
            const struct kern_q8k_block *xt = xq + t * nb;
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) acc = q5k_block(row + b * KERN_Q5K_BYTES, xt + b, acc);
            y[t * y_ld + r] = acc;
        }
    }
}

void kern_q5k_row_to_f32(float *out, const void *w, int64_t k, int64_t row)
{
    int64_t nb = k / KERN_QK;
    const uint8_t *p = (const uint8_t *)w + (size_t)row * (size_t)nb * KERN_Q5K_BYTES;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = p + b * KERN_Q5K_BYTES;
        float *o = out + b * KERN_QK;
        uint8_t sc[8], m[8];
        kern_q4k_scales(blk + 4, sc, m);
        float d = hs_f16_to_f32(hs_rd_u16(blk)), dmin = hs_f16_to_f32(hs_rd_u16(blk + 2));
        for (int i = 0; i < KERN_QK; i++) {
            float d1 = d * (float)sc[i / 32], m1 = dmin * (float)m[i / 32];
            o[i] = d1 * (float)q5k_quant(blk, i) - m1;
        }
    }
}

/* q in [0, 31]: the low nibbles as Q4_K's (at Q5K_QS), the 5th bit of value l of sub-block
 * s in bit s of qh[l]. */
void kern_q5k_row_from_f32(void *w, const float *x, int64_t k)
{
    for (int64_t b = 0; b < k / KERN_QK; b++) {
        uint8_t *blk = (uint8_t *)w + b * KERN_Q5K_BYTES, q[KERN_QK];
        memset(blk, 0, KERN_Q5K_BYTES);
        kern_kq_scales_from_f32(x + b * KERN_QK, 31.0f, blk, q);
        for (int i = 0; i < KERN_QK; i++) {
            int s = i / 32, l = i % 32;
            uint8_t *qs = blk + Q5K_QS + 32 * (i / 64) + l;
            *qs = (uint8_t)(*qs | (s % 2 ? (q[i] & 15) << 4 : (q[i] & 15)));
            blk[Q5K_QH + l] = (uint8_t)(blk[Q5K_QH + l] | (q[i] >> 4) << s);
        }
    }
}
