/*
 * matmul.c — scalar reference of the batched matmul, the Q8_0 activation quantizer, the
 * row dequantizer (embedding lookup) and its inverse (kern_row_from_f32, what mkmodel
 * writes) and the 32-lane dot product. The accumulation order
 * is the contract written in kernels.h; this file is its definition.
 *
 * The batch loop converts a chunk of KERN_LANES weights once and applies it to a tile of
 * up to TOK_TILE tokens, so a weight is read once per tile instead of once per token;
 * each token still owns its own 32 partial sums and sees k in ascending order, so the
 * tiling cannot change a bit of any output.
 */
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"

#define TOK_TILE 8

size_t kern_row_bytes(enum kern_wtype t, int64_t k)
{
    if (k < 1) return 0;
    if (kern_wtype_is_k((int)t)) return kern_k_row_bytes((int)t, k); /* q4k.c */
    if (kern_wtype_is_x((int)t)) return kern_x_row_bytes((int)t, k); /* iq4.c */
    switch (t) {
    case KERN_W_F32: return (size_t)k * 4;
    case KERN_W_F16:
    case KERN_W_BF16: return (size_t)k * 2;
    case KERN_W_Q8_0:
        if (k % KERN_Q8_BLOCK) return 0;
        return (size_t)(k / KERN_Q8_BLOCK) * KERN_Q8_BLOCK_BYTES;
    }
    return 0;
}

/* Weights k0 .. k0+n-1 of a float-typed row, exactly as f32. */
static void load_f32(float *dst, const uint8_t *row, enum kern_wtype wt, int64_t k0, int64_t n)
{
    switch (wt) {
    case KERN_W_F32:
        memcpy(dst, row + k0 * 4, (size_t)n * 4);
        break;
    case KERN_W_F16:
        for (int64_t i = 0; i < n; i++) dst[i] = hs_f16_to_f32(hs_rd_u16(row + (k0 + i) * 2));
        break;
    case KERN_W_BF16:
        for (int64_t i = 0; i < n; i++) dst[i] = hs_bf16_to_f32(hs_rd_u16(row + (k0 + i) * 2));
        break;
    case KERN_W_Q8_0:
        break; /* never reached: Q8_0 has its own path */
    }
}

/* The fixed halving tree over n (a power of two) partial sums. */
static float tree_sum(float *acc, int n)
{
    for (int h = n / 2; h >= 1; h /= 2)
        for (int l = 0; l < h; l++) acc[l] = acc[l] + acc[l + h];
    return acc[0];
}

float kern_dot(const float *a, const float *b, int64_t n)
{
    float acc[KERN_LANES] = {0};
    for (int64_t k = 0; k < n; k++) acc[k % KERN_LANES] = fmaf(a[k], b[k], acc[k % KERN_LANES]);
    return tree_sum(acc, KERN_LANES);
}

void kern_q8_quantize(struct kern_q8_block *xq, const float *x, int64_t n_tok, int64_t k)
{
    int64_t nb = k / KERN_Q8_BLOCK;
    for (int64_t t = 0; t < n_tok; t++) {
        for (int64_t b = 0; b < nb; b++) {
            const float *v = x + t * k + b * KERN_Q8_BLOCK;
            struct kern_q8_block *o = xq + t * nb + b;
            float amax = 0.0f;
            for (int i = 0; i < KERN_Q8_BLOCK; i++) {
                float a = fabsf(v[i]);
                if (a > amax) amax = a;
            }
            float d = amax / 127.0f;
            float id = d > 0.0f ? 1.0f / d : 0.0f;
            o->d = kern_q8_stored_scale(d);
            for (int i = 0; i < KERN_Q8_BLOCK; i++) {
                float r = nearbyintf(v[i] * id);
                /* the clamp also keeps a NaN or inf input away from an undefined cast */
                if (!(r >= -127.0f)) r = -127.0f;
                if (!(r <= 127.0f)) r = 127.0f;
                o->q[i] = (int8_t)r;
            }
        }
    }
}

static void matmul_float(float *y, int64_t y_ld, const uint8_t *w, enum kern_wtype wt,
                         const float *x, int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    size_t rb = kern_row_bytes(wt, k);
    float wl[KERN_LANES];
    float acc[TOK_TILE][KERN_LANES];
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + (size_t)r * rb;
        for (int64_t t0 = 0; t0 < n_tok; t0 += TOK_TILE) {
            int64_t nt = HS_MIN(TOK_TILE, n_tok - t0);
            memset(acc, 0, sizeof(acc));
            for (int64_t k0 = 0; k0 < k; k0 += KERN_LANES) {
                int64_t n = HS_MIN(KERN_LANES, k - k0);
                load_f32(wl, row, wt, k0, n);
                for (int64_t t = 0; t < nt; t++) {
                    const float *xt = x + (t0 + t) * k + k0;
                    for (int64_t l = 0; l < n; l++) acc[t][l] = fmaf(wl[l], xt[l], acc[t][l]);
                }
            }
            for (int64_t t = 0; t < nt; t++) y[(t0 + t) * y_ld + r] = tree_sum(acc[t], KERN_LANES);
        }
    }
}

static void matmul_q8_0(float *y, int64_t y_ld, const uint8_t *w, const struct kern_q8_block *xq,
                        int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    int64_t nb = k / KERN_Q8_BLOCK;
    size_t rb = (size_t)nb * KERN_Q8_BLOCK_BYTES;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + (size_t)r * rb;
        for (int64_t t = 0; t < n_tok; t++) {
            const struct kern_q8_block *xt = xq + t * nb;
            float acc[KERN_Q8_LANES] = {0};
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = row + b * KERN_Q8_BLOCK_BYTES;
                const int8_t *wq = (const int8_t *)(blk + 2);
                int32_t isum = 0;
                for (int i = 0; i < KERN_Q8_BLOCK; i++) isum += (int32_t)wq[i] * (int32_t)xt[b].q[i];
                float s = hs_f16_to_f32(hs_rd_u16(blk)) * xt[b].d;
                acc[b % KERN_Q8_LANES] = fmaf(s, (float)isum, acc[b % KERN_Q8_LANES]);
            }
            y[t * y_ld + r] = tree_sum(acc, KERN_Q8_LANES);
        }
    }
}

void kern_matmul(float *y, int64_t y_ld, const void *w, enum kern_wtype wt, const float *x,
                 const struct kern_q8_block *xq, int64_t n_tok, int64_t k, int64_t r0,
                 int64_t r1)
{
    if (wt == KERN_W_Q8_0)
        matmul_q8_0(y, y_ld, w, xq, n_tok, k, r0, r1);
    else
        matmul_float(y, y_ld, w, wt, x, n_tok, k, r0, r1);
}

void kern_row_to_f32(float *out, const void *w, enum kern_wtype wt, int64_t k, int64_t row)
{
    if (kern_wtype_is_k((int)wt)) {
        kern_k_row_to_f32(out, w, (int)wt, k, row); /* q4k.c */
        return;
    }
    if (kern_wtype_is_x((int)wt)) {
        kern_x_row_to_f32(out, w, (int)wt, k, row); /* iq4.c */
        return;
    }
    const uint8_t *p = (const uint8_t *)w + (size_t)row * kern_row_bytes(wt, k);
    if (wt != KERN_W_Q8_0) {
        load_f32(out, p, wt, 0, k);
        return;
    }
    for (int64_t b = 0; b < k / KERN_Q8_BLOCK; b++) {
        const uint8_t *blk = p + b * KERN_Q8_BLOCK_BYTES;
        float d = hs_f16_to_f32(hs_rd_u16(blk));
        for (int i = 0; i < KERN_Q8_BLOCK; i++)
            out[b * KERN_Q8_BLOCK + i] = d * (float)(int8_t)blk[2 + i];
    }
}

void kern_row_from_f32(void *w, enum kern_wtype wt, const float *x, int64_t k)
{
    if (kern_wtype_is_k((int)wt)) {
        kern_k_row_from_f32(w, (int)wt, x, k); /* q4k.c */
        return;
    }
    if (kern_wtype_is_x((int)wt)) {
        kern_x_row_from_f32(w, (int)wt, x, k); /* iq4.c */
        return;
    }
    uint8_t *p = w;
    switch (wt) {
    case KERN_W_F32:
        for (int64_t i = 0; i < k; i++) {
            uint32_t u;
            memcpy(&u, &x[i], 4);
            for (int b = 0; b < 4; b++) p[4 * i + b] = (uint8_t)(u >> 8 * b);
        }
        break;
    case KERN_W_F16:
    case KERN_W_BF16:
        for (int64_t i = 0; i < k; i++) {
            uint16_t h = wt == KERN_W_F16 ? hs_f32_to_f16(x[i]) : hs_f32_to_bf16(x[i]);
            p[2 * i] = (uint8_t)h;
            p[2 * i + 1] = (uint8_t)(h >> 8);
        }
        break;
    case KERN_W_Q8_0: /* llama.cpp's block: d = max|x| / 127 (stored f16), q = round(x / d) */
        for (int64_t b0 = 0; b0 < k; b0 += KERN_Q8_BLOCK, p += KERN_Q8_BLOCK_BYTES) {
            float amax = 0.0f;
            for (int i = 0; i < KERN_Q8_BLOCK; i++) amax = HS_MAX(amax, fabsf(x[b0 + i]));
            float d = amax / 127.0f;
            uint16_t dh = hs_f32_to_f16(d);
            p[0] = (uint8_t)dh;
            p[1] = (uint8_t)(dh >> 8);
            for (int i = 0; i < KERN_Q8_BLOCK; i++) {
                float q = d > 0.0f ? roundf(x[b0 + i] / d) : 0.0f;
                q = HS_MAX(-127.0f, HS_MIN(127.0f, q));
                p[2 + i] = (uint8_t)(int8_t)q;
            }
        }
        break;
    }
}
