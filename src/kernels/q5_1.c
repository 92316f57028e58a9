/*
 * q5_1.c — scalar reference of the Q5_1 weight type (llama.cpp's block_q5_1: 32 values of 5
 * bits with an f16 scale and an f16 offset; community files use it for MoE experts): the
 * batched matmul against kern_q8_quantize activations, the row dequantizer and the row
 * quantizer. The order is kernels.h's "extra block types" contract (Q5_1 line); this file
 * defines it and q5_1_avx2.c / q5_1_avx512.c equal it bit for bit. kern_matmul_x and its
 * variants (iq4*.c) forward KERN_X_Q5_1 here.
 *
 * Block layout (24 bytes, little-endian):
 *   OFFSET SIZE  FIELD
 *        0    2  d   f16 scale
 *        2    2  m   f16 offset (the block's minimum)
 *        4    4  qh  u32: bit j is the 5th bit of value j
 *        8   16  qs  value j < 16: low nibble of qs[j]; value j + 16: its high nibble
 *   value j = (float)q_j * d + m, q_j in [0, 31] (product, then sum, each rounded)
 *
 * Design note:
 *   1. Per block the matmul adds two fmaf into the lane b % 8 of its output: the weights'
 *      scale times the exact integer dot, and the offset times the exact sum of the
 *      activation quants (sum (q d + m) x = d sum q x + m sum x). Both integer sums are
 *      exact (|isum| <= 32 * 31 * 127), so a variant may form them in any order.
 *   2. The quantizer rounds to nearest: m = the block's minimum and d = (max - min) / 31,
 *      both stored as f16, then q = round((x - m) / d) with the stored values, clamped to
 *      [0, 31]. llama.cpp's reference quantizer is the same idea with the f32 d and m; no
 *      error-minimising search.
 *   3. The result of an output depends on its row and token only, never on n_tok, r0, r1.
 */
#include <math.h>
#include <string.h>

#include "kernels/kernels_int.h"

/* The 5-bit quant of value j of a block. */
static int q5_1_quant(const uint8_t *blk, int j)
{
    uint32_t qh = hs_rd_u32(blk + 4);
    int lo = j < 16 ? blk[8 + j] & 15 : blk[8 + j - 16] >> 4;
    return lo | (int)((qh >> j) & 1) << 4;
}

void kern_matmul_q5_1(float *y, int64_t y_ld, const void *w, const struct kern_q8_block *xq,
                      int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    int64_t nb = k / KERN_Q8_BLOCK;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * (size_t)nb * KERN_Q5_1_BYTES;
        for (int64_t t = 0; t < n_tok; t++) {
            const struct kern_q8_block *xt = xq + t * nb;
            float acc[KERN_Q8_LANES] = {0};
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + b * KERN_Q5_1_BYTES;
                int32_t isum = 0, xsum = 0;
                for (int j = 0; j < KERN_Q8_BLOCK; j++) {
                    isum += q5_1_quant(blk, j) * (int32_t)xt[b].q[j];
                    xsum += xt[b].q[j];
                }
                float dd = hs_f16_to_f32(hs_rd_u16(blk)) * xt[b].d;
                float md = hs_f16_to_f32(hs_rd_u16(blk + 2)) * xt[b].d;
                float *a = &acc[b % KERN_Q8_LANES];
                *a = fmaf(dd, (float)isum, *a);
                *a = fmaf(md, (float)xsum, *a);
            }
            for (int h = KERN_Q8_LANES / 2; h >= 1; h /= 2)
                for (int l = 0; l < h; l++) acc[l] = acc[l] + acc[l + h];
            y[t * y_ld + r] = acc[0];
        }
    }
}

void kern_q5_1_row_to_f32(float *out, const void *w, int64_t k, int64_t row)
{
    int64_t nb = k / KERN_Q8_BLOCK;
    const uint8_t *p = (const uint8_t *)w + (size_t)row * (size_t)nb * KERN_Q5_1_BYTES;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = p + b * KERN_Q5_1_BYTES;
        float d = hs_f16_to_f32(hs_rd_u16(blk)), m = hs_f16_to_f32(hs_rd_u16(blk + 2));
        for (int j = 0; j < KERN_Q8_BLOCK; j++) {
            float v = (float)q5_1_quant(blk, j) * d;
            out[b * KERN_Q8_BLOCK + j] = v + m;
        }
    }
}

void kern_q5_1_row_from_f32(void *w, const float *x, int64_t k)
{
    for (int64_t b = 0; b < k / KERN_Q8_BLOCK; b++) {
        const float *v = x + b * KERN_Q8_BLOCK;
        uint8_t *blk = (uint8_t *)w + b * KERN_Q5_1_BYTES;
        float lo = v[0], hi = v[0];
        for (int j = 1; j < KERN_Q8_BLOCK; j++) {
            lo = HS_MIN(lo, v[j]);
            hi = HS_MAX(hi, v[j]);
        }
        uint16_t dh = hs_f32_to_f16((hi - lo) / 31.0f), mh = hs_f32_to_f16(lo);
        float d = hs_f16_to_f32(dh), m = hs_f16_to_f32(mh);
        float id = d > 0.0f ? 1.0f / d : 0.0f;
        uint32_t qh = 0;
        memset(blk, 0, KERN_Q5_1_BYTES);
        kern_put_u16(blk, dh);
        kern_put_u16(blk + 2, mh);
        for (int j = 0; j < KERN_Q8_BLOCK; j++) {
            float q = kern_clampf(roundf((v[j] - m) * id), 0.0f, 31.0f);
            int qi = q == q ? (int)q : 0;
            qh |= (uint32_t)(qi >> 4) << j;
            blk[8 + j % 16] = (uint8_t)(blk[8 + j % 16] | (qi & 15) << (j < 16 ? 0 : 4));
        }
        for (int i = 0; i < 4; i++) blk[4 + i] = (uint8_t)(qh >> 8 * i);
    }
}
