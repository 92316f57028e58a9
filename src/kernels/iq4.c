/*
 * iq4.c — scalar reference of the IQ4_NL and IQ4_XS weight types (llama.cpp's block_iq4_nl
 * and block_iq4_xs: 4-bit indices into one fixed non-linear signed codebook, with an f16
 * scale per 32 values, or an f16 scale per 256 values and 6-bit sub-scales per 32), and the
 * front door of the extra block types (kernels.h): type tests, row sizes, the scale check
 * and kern_matmul_x, which forwards Q5_1 to q5_1.c. The orders are kernels.h's "extra block
 * types" contract; iq4_avx2.c and iq4_avx512.c equal this file bit for bit.
 *
 * Block layouts (little-endian):
 *   IQ4_NL, 18 bytes per 32 values: f16 d at 0; 16 bytes qs at 2. Value j < 16 is the low
 *     nibble of qs[j], value j + 16 its high nibble; value = d * (float)kv[nibble].
 *   IQ4_XS, 136 bytes per 256 values: f16 d at 0; u16 scales_h at 2; scales_l[4] at 4; qs
 *     [128] at 8. Sub-block s < 8 (values 32 s ..): ls_s = ((scales_l[s / 2] >> 4 (s % 2))
 *     & 15) | ((scales_h >> 2 s) & 3) << 4, indices qs[16 s ..] laid out as IQ4_NL's;
 *     value = (d * (float)(ls_s - 32)) * (float)kv[nibble].
 *
 * Design note:
 *   1. Only the float steps are ordered (kernels.h); the integer dot of a block or super-block
 *      is exact, |isum| <= 8 * 32 * 32 * 127 * 127 < 2^28, so a variant may add it in any
 *      order and look the codebook up any way (a byte shuffle is exact).
 *   2. The quantizers round to nearest and search nothing (llama.cpp's quantize_iq4_nl and
 *      _xs try several scales with importance weights): IQ4_NL d = the block's value of
 *      largest magnitude / -127 (that value lands on kv[0] = -127); IQ4_XS the same scale per
 *      sub-block, d = the largest of them in magnitude / -31 and ls = round(scale / d) + 32
 *      (in [1, 63]: a sub-block scale of either sign fits without clamping; d moves one f16
 *      step away from zero while its rounding would still clamp one); each value then takes the nearest codebook entry times the stored
 *      scale (ties to the lower index). A valid file, not llama-quantize's bits.
 *   3. The result of an output depends on its row and token only, never on n_tok, r0, r1.
 */
#include <math.h>
#include <string.h>

#include "kernels/kernels_int.h"

const int8_t kern_iq4_values[16] = { -127, -104, -83, -65, -49, -35, -22, -10,
                                     1,    13,   25,  38,  53,  69,  89,  113 };

bool kern_wtype_is_x(int t) { return t == KERN_X_Q5_1 || t == KERN_X_IQ4_NL || t == KERN_X_IQ4_XS; }

bool kern_x_uses_q8k(int t) { return t == KERN_X_IQ4_XS; }

size_t kern_x_row_bytes(int t, int64_t k)
{
    if (k < 1) return 0;
    if (t == KERN_X_IQ4_XS) return k % KERN_QK ? 0 : (size_t)(k / KERN_QK) * KERN_IQ4XS_BYTES;
    if (k % KERN_Q8_BLOCK) return 0;
    if (t == KERN_X_Q5_1) return (size_t)(k / KERN_Q8_BLOCK) * KERN_Q5_1_BYTES;
    if (t == KERN_X_IQ4_NL) return (size_t)(k / KERN_Q8_BLOCK) * KERN_IQ4NL_BYTES;
    return 0;
}

/* The nibble of value j (< 32) of a 16-byte run of indices. */
static int iq4_nibble(const uint8_t *qs, int j) { return j < 16 ? qs[j] & 15 : qs[j - 16] >> 4; }

/* The 6-bit scale of sub-block s of an IQ4_XS super-block. */
static int iq4xs_ls(const uint8_t *blk, int s)
{
    return ((blk[4 + s / 2] >> 4 * (s % 2)) & 15) | ((hs_rd_u16(blk + 2) >> 2 * s) & 3) << 4;
}

void kern_matmul_iq4nl(float *y, int64_t y_ld, const void *w, const struct kern_q8_block *xq,
                       int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    int64_t nb = k / KERN_Q8_BLOCK;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * (size_t)nb * KERN_IQ4NL_BYTES;
        for (int64_t t = 0; t < n_tok; t++) {
            const struct kern_q8_block *xt = xq + t * nb;
            float acc[KERN_Q8_LANES] = {0};
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + b * KERN_IQ4NL_BYTES;
                int32_t isum = 0;
                for (int j = 0; j < KERN_Q8_BLOCK; j++)
                    isum += kern_iq4_values[iq4_nibble(blk + 2, j)] * (int32_t)xt[b].q[j];
                float dd = hs_f16_to_f32(hs_rd_u16(blk)) * xt[b].d;
                acc[b % KERN_Q8_LANES] = fmaf(dd, (float)isum, acc[b % KERN_Q8_LANES]);
            }
            for (int h = KERN_Q8_LANES / 2; h >= 1; h /= 2)
                for (int l = 0; l < h; l++) acc[l] = acc[l] + acc[l + h];
            y[t * y_ld + r] = acc[0];
        }
    }
}

void kern_matmul_iq4xs(float *y, int64_t y_ld, const void *w, const struct kern_q8k_block *xq,
                       int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    int64_t nb = k / KERN_QK;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * (size_t)nb * KERN_IQ4XS_BYTES;
        for (int64_t t = 0; t < n_tok; t++) {
            const struct kern_q8k_block *xt = xq + t * nb;
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + b * KERN_IQ4XS_BYTES;
                int32_t isum = 0;
                for (int s = 0; s < 8; s++) {
                    int32_t dot = 0;
                    for (int j = 0; j < 32; j++)
                        dot += kern_iq4_values[iq4_nibble(blk + 8 + 16 * s, j)] * (int32_t)xt[b].q[32 * s + j];
                    isum += (iq4xs_ls(blk, s) - 32) * dot;
                }
                acc = fmaf(hs_f16_to_f32(hs_rd_u16(blk)) * xt[b].d, (float)isum, acc);
            }
            y[t * y_ld + r] = acc;
        }
    }
}

void kern_matmul_x(float *y, int64_t y_ld, const void *w, int wt, const struct kern_q8_block *xq,
                   const struct kern_q8k_block *xk, int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    if (wt == KERN_X_Q5_1) kern_matmul_q5_1(y, y_ld, w, xq, n_tok, k, r0, r1);
    else if (wt == KERN_X_IQ4_NL) kern_matmul_iq4nl(y, y_ld, w, xq, n_tok, k, r0, r1);
    else if (wt == KERN_X_IQ4_XS) kern_matmul_iq4xs(y, y_ld, w, xk, n_tok, k, r0, r1);
}

void kern_x_row_to_f32(float *out, const void *w, int wt, int64_t k, int64_t row)
{
    if (wt == KERN_X_Q5_1) {
        kern_q5_1_row_to_f32(out, w, k, row);
        return;
    }
    const uint8_t *p = (const uint8_t *)w + (size_t)row * kern_x_row_bytes(wt, k);
    if (wt == KERN_X_IQ4_NL) {
        for (int64_t b = 0; b < k / KERN_Q8_BLOCK; b++) {
            const uint8_t *blk = p + b * KERN_IQ4NL_BYTES;
            float d = hs_f16_to_f32(hs_rd_u16(blk));
            for (int j = 0; j < 32; j++) out[32 * b + j] = d * (float)kern_iq4_values[iq4_nibble(blk + 2, j)];
        }
    } else if (wt == KERN_X_IQ4_XS) {
        for (int64_t b = 0; b < k / KERN_QK; b++) {
            const uint8_t *blk = p + b * KERN_IQ4XS_BYTES;
            float d = hs_f16_to_f32(hs_rd_u16(blk));
            for (int s = 0; s < 8; s++) {
                float dl = d * (float)(iq4xs_ls(blk, s) - 32);
                for (int j = 0; j < 32; j++)
                    out[256 * b + 32 * s + j] = dl * (float)kern_iq4_values[iq4_nibble(blk + 8 + 16 * s, j)];
            }
        }
    }
}

/* The value of largest magnitude among v[0..n) (the first such), or 0. */
static float iq4_signed_max(const float *v, int n)
{
    float mx = 0.0f;
    for (int i = 0; i < n; i++)
        if (fabsf(v[i]) > fabsf(mx)) mx = v[i];
    return mx;
}

/* 32 values as indices (nibbles as the layout says) into qs[16], scale d as stored. */
static void iq4_indices(uint8_t *qs, const float *v, float d)
{
    memset(qs, 0, 16);
    for (int j = 0; j < 32; j++) {
        int best = 0;
        float err = fabsf(v[j] - d * (float)kern_iq4_values[0]);
        for (int i = 1; i < 16; i++) {
            float e = fabsf(v[j] - d * (float)kern_iq4_values[i]);
            if (e < err) {
                err = e;
                best = i;
            }
        }
        qs[j % 16] = (uint8_t)(qs[j % 16] | best << (j < 16 ? 0 : 4));
    }
}

void kern_x_row_from_f32(void *w, int wt, const float *x, int64_t k)
{
    uint8_t *p = w;
    if (wt == KERN_X_Q5_1) {
        kern_q5_1_row_from_f32(w, x, k);
    } else if (wt == KERN_X_IQ4_NL) {
        for (int64_t b = 0; b < k / 32; b++, p += KERN_IQ4NL_BYTES) {
            uint16_t dh = hs_f32_to_f16(iq4_signed_max(x + 32 * b, 32) / -127.0f);
            kern_put_u16(p, dh);
            iq4_indices(p + 2, x + 32 * b, hs_f16_to_f32(dh));
        }
    } else if (wt == KERN_X_IQ4_XS) {
        for (int64_t b = 0; b < k / KERN_QK; b++, p += KERN_IQ4XS_BYTES) {
            const float *v = x + KERN_QK * b;
            float sd[8], dmax = 0.0f;
            for (int s = 0; s < 8; s++) {
                sd[s] = iq4_signed_max(v + 32 * s, 32) / -127.0f;
                if (fabsf(sd[s]) > fabsf(dmax)) dmax = sd[s];
            }
            uint16_t dh = hs_f32_to_f16(dmax / -31.0f);
            /* d is often an f16 subnormal (weights of ~0.02 give ~5e-6): where its rounding
             * left the largest sub-block scale past 31.5 steps, take the next f16 away from
             * zero, so that no ls clamps */
            if (dmax != 0.0f && (dh & 0x7fff) == 0) dh = (uint16_t)(dh | 1);
            while (dmax != 0.0f && (dh & 0x7fff) < 0x7bff && fabsf(dmax / hs_f16_to_f32(dh)) > 31.5f) dh++;
            float d = hs_f16_to_f32(dh);
            memset(p, 0, KERN_IQ4XS_BYTES);
            kern_put_u16(p, dh);
            uint16_t sh = 0;
            for (int s = 0; s < 8; s++) {
                float l = d != 0.0f ? kern_clampf(roundf(sd[s] / d) + 32.0f, 0.0f, 63.0f) : 32.0f;
                int ls = l == l ? (int)l : 32;
                p[4 + s / 2] = (uint8_t)(p[4 + s / 2] | (ls & 15) << 4 * (s % 2));
                sh = (uint16_t)(sh | (ls >> 4) << 2 * s);
                iq4_indices(p + 8 + 16 * s, v + 32 * s, d * (float)(ls - 32));
            }
            kern_put_u16(p + 2, sh);
        }
    }
}

int64_t kern_x_bad_scale(const void *w, int wt, int64_t rows, int64_t k)
{
    size_t bb = wt == KERN_X_Q5_1 ? KERN_Q5_1_BYTES : wt == KERN_X_IQ4_NL ? KERN_IQ4NL_BYTES : KERN_IQ4XS_BYTES;
    int64_t n = rows * (int64_t)(kern_x_row_bytes(wt, k) / bb);
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *blk = (const uint8_t *)w + (size_t)i * bb;
        /* an f16 is NaN or infinite exactly when its exponent field is all ones */
        if ((hs_rd_u16(blk) & 0x7c00) == 0x7c00) return i;
        if (wt == KERN_X_Q5_1 && (hs_rd_u16(blk + 2) & 0x7c00) == 0x7c00) return i;
    }
    return -1;
}
