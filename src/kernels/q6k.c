/*
 * q6k.c — scalar reference of the Q6_K weight type (llama.cpp's block_q6_K, the 6-bit K-quant
 * that Q4_K_M and Q5_K_M files use for their output and some value matrices): the batched
 * matmul against kern_q8k_quantize activations, the row dequantizer and its inverse (the
 * row quantizer). The accumulation order
 * is the Q6_K line of kernels.h's "K-quant weights" contract; this file is its definition and
 * q6k_avx2.c / q6k_avx512.c equal it bit for bit. kern_matmul_k and the variants'
 * kern_matmul_k_<variant> (q4k*.c) forward KERN_K_Q6_K here.
 *
 * Block layout (llama.cpp's ggml-common.h; little-endian, 256 values per super-block):
 *
 *   Q6_K, 210 bytes
 *   OFFSET SIZE  FIELD
 *        0  128  ql  low 4 bits of the 6-bit quants
 *      128   64  qh  high 2 bits, four per byte
 *      192   16  sc  int8 scale of each 16 values
 *      208    2  d   f16 super-block scale
 *
 *   Value i (half h = i / 128, k = (i % 128) / 32, l = i % 32; group g = i / 16):
 *       b = ql[64 h + 32 (k & 1) + l];  lo = k < 2 ? b & 15 : b >> 4
 *       hi = (qh[32 h + l] >> 2 k) & 3;  q = (lo | hi << 4) - 32 in [-32, 31]
 *       value = (d * sc[g]) * q   (the product and the scale rounded separately, llama.cpp's
 *                                  dequantize_row_q6_K)
 *
 * Design note:
 *   1. Only the float steps are ordered: per block dw * dx rounded once, then
 *      acc = fmaf(dw * dx, isum, acc), blocks ascending, one accumulator per output. isum =
 *      sum_g sc_g * (dot_g - 32 * bsum_g) is an exact int32 sum (|isum| < 2^29), so a variant
 *      may add it in any order.
 *   2. The result of an output depends on its row and token only, never on n_tok, r0, r1.
 */
#include <math.h>

#include "kernels/kernels.h"
#include "kernels/kernels_int.h"

#include <string.h>

/* The 6-bit quant of value i of a Q6_K block, as stored (0..63; the value uses q - 32). */
static int q6k_quant(const uint8_t *blk, int i)
{
    int h = i / 128, k = (i % 128) / 32, l = i % 32;
    uint8_t b = blk[64 * h + 32 * (k & 1) + l];
    int lo = k < 2 ? b & 15 : b >> 4;
    int hi = (blk[128 + 32 * h + l] >> (2 * k)) & 3;
    return lo | hi << 4;
}

/* One Q6_K super-block times one activation block: acc after the block (kernels.h order). */
static float q6k_block(const uint8_t *blk, const struct kern_q8k_block *xb, float acc)
{
    const int8_t *sc = (const int8_t *)(blk + 192);
    int32_t isum = 0;
    for (int g = 0; g < 16; g++) {
        int32_t dot = 0;
        for (int i = 16 * g; i < 16 * g + 16; i++) dot += q6k_quant(blk, i) * (int32_t)xb->q[i];
        isum += (int32_t)sc[g] * (dot - 32 * (int32_t)xb->bsum[g]);
    }
    float dw = hs_f16_to_f32(hs_rd_u16(blk + 208)) * xb->d;
    return fmaf(dw, (float)isum, acc);
}

void kern_matmul_q6k(float *y, int64_t y_ld, const void *w, const struct kern_q8k_block *xq,
                     int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    int64_t nb = k / KERN_QK;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * (size_t)nb * KERN_Q6K_BYTES;
        for (int64_t t = 0; t < n_tok; t++) {
            const struct kern_q8k_block *xt = xq + t * nb;
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) acc = q6k_block(row + b * KERN_Q6K_BYTES, xt + b, acc);
            y[t * y_ld + r] = acc;
        }
    }
}

void kern_q6k_row_to_f32(float *out, const void *w, int64_t k, int64_t row)
{
    int64_t nb = k / KERN_QK;
    const uint8_t *p = (const uint8_t *)w + (size_t)row * kern_k_row_bytes(KERN_K_Q6_K, k);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = p + b * KERN_Q6K_BYTES;
        float *o = out + b * KERN_QK;
        const int8_t *sc = (const int8_t *)(blk + 192);
        float d = hs_f16_to_f32(hs_rd_u16(blk + 208));
        for (int i = 0; i < KERN_QK; i++)
            o[i] = (d * (float)sc[i / 16]) * (float)(q6k_quant(blk, i) - 32);
    }
}

/* One Q6_K super-block: per group of 16 the step s = max|x| / 31; d = max s / 127 as f16;
 * int8 sc = round(s / d); q = round(x / (d * sc)) in [-32, 31], stored + 32. */
static void q6k_block_from_f32(const float *x, uint8_t *blk)
{
    float s[16], smax = 0.0f;
    for (int g = 0; g < 16; g++) {
        float a = 0.0f;
        for (int i = 0; i < 16; i++) a = HS_MAX(a, fabsf(x[16 * g + i]));
        s[g] = a / 31.0f;
        smax = HS_MAX(smax, s[g]);
    }
    uint16_t dh = hs_f32_to_f16(smax / 127.0f);
    float d = hs_f16_to_f32(dh);
    memset(blk, 0, KERN_Q6K_BYTES);
    int8_t *sc = (int8_t *)(blk + 192);
    for (int g = 0; g < 16; g++) sc[g] = (int8_t)(d > 0.0f ? kern_clampf(roundf(s[g] / d), 0.0f, 127.0f) : 0.0f);
    for (int i = 0; i < KERN_QK; i++) {
        float step = d * (float)sc[i / 16];
        int q = (int)(step > 0.0f ? kern_clampf(roundf(x[i] / step), -32.0f, 31.0f) : 0.0f) + 32;
        int h = i / 128, k = (i % 128) / 32, l = i % 32;
        uint8_t *lo = blk + 64 * h + 32 * (k & 1) + l;
        *lo = (uint8_t)(*lo | (k < 2 ? (q & 15) : (q & 15) << 4));
        blk[128 + 32 * h + l] = (uint8_t)(blk[128 + 32 * h + l] | (q >> 4) << (2 * k));
    }
    kern_put_u16(blk + 208, dh);
}

void kern_q6k_row_from_f32(void *w, const float *x, int64_t k)
{
    uint8_t *p = w;
    for (int64_t b = 0; b < k / KERN_QK; b++) q6k_block_from_f32(x + b * KERN_QK, p + b * KERN_Q6K_BYTES);
}
