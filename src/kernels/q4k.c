/*
 * q4k.c — scalar reference of the Q4_K weight type (llama.cpp's block_q4_K, the bulk of Q4_K_M
 * files) and of what the K-quant types share: row sizes, the Q8_K-like activation quantizer,
 * the 6-bit scale unpacking (Q5_K's too), and kern_matmul_k / kern_k_row_to_f32 /
 * kern_k_row_from_f32 (the row quantizer: round to nearest, what mkmodel writes), which run
 * Q4_K here and forward Q5_K to q5k.c and Q6_K to q6k.c. The accumulation order is the
 * contract written in kernels.h ("K-quant weights"); this file is its definition for Q4_K and
 * q4k_avx2.c / q4k_avx512.c equal it bit for bit.
 *
 * Block layout (llama.cpp's ggml-common.h; little-endian, 256 values per super-block):
 *
 *   Q4_K, 144 bytes
 *   OFFSET SIZE  FIELD
 *        0    2  d     f16 scale of scales
 *        2    2  dmin  f16 scale of mins
 *        4   12  packed 6-bit sc[8], m[8]
 *       16  128  qs: two 4-bit quants a byte
 *
 *   Q4_K value i (sub-block s = i / 32 of 32 values; chunk j = i / 64, l = i % 32):
 *       q = s even ? qs[32 j + l] & 15 : qs[32 j + l] >> 4
 *       sc, m of sub-block s: s < 4: sc = S[s] & 63, m = S[s + 4] & 63;
 *                             else:  sc = (S[s + 4] & 15) | (S[s - 4] >> 6) << 4,
 *                                    m  = (S[s + 4] >> 4) | (S[s] >> 6) << 4     (S = bytes 4..15)
 *       value = (d * sc) * q - dmin * m
 */
#include <math.h>
#include <string.h>

#include "kernels/kernels_int.h"

bool kern_wtype_is_k(int t) { return t == KERN_K_Q4_K || t == KERN_K_Q5_K || t == KERN_K_Q6_K; }

size_t kern_k_row_bytes(int t, int64_t k)
{
    if (k < 1 || k % KERN_QK) return 0;
    if (t == KERN_K_Q4_K) return (size_t)(k / KERN_QK) * KERN_Q4K_BYTES;
    if (t == KERN_K_Q5_K) return (size_t)(k / KERN_QK) * KERN_Q5K_BYTES;
    if (t == KERN_K_Q6_K) return (size_t)(k / KERN_QK) * KERN_Q6K_BYTES;
    return 0;
}

void kern_q4k_scales(const uint8_t *s12, uint8_t sc[8], uint8_t m[8])
{
    for (int j = 0; j < 4; j++) {
        sc[j] = s12[j] & 63;
        m[j] = s12[j + 4] & 63;
    }
    for (int j = 4; j < 8; j++) {
        sc[j] = (uint8_t)((s12[j + 4] & 15) | (s12[j - 4] >> 6) << 4);
        m[j] = (uint8_t)((s12[j + 4] >> 4) | (s12[j] >> 6) << 4);
    }
}

void kern_q4k_scales_pack(uint8_t *s12, const uint8_t sc[8], const uint8_t m[8])
{
    for (int j = 0; j < 4; j++) {
        s12[j] = (uint8_t)((sc[j] & 63) | (sc[j + 4] >> 4) << 6);
        s12[j + 4] = (uint8_t)((m[j] & 63) | (m[j + 4] >> 4) << 6);
        s12[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
    }
}

/* The 4-bit quant of value i of a Q4_K block's qs. */
static int q4k_quant(const uint8_t *qs, int i)
{
    uint8_t b = qs[32 * (i / 64) + i % 32];
    return (i / 32) % 2 ? b >> 4 : b & 15;
}

void kern_q8k_quantize(struct kern_q8k_block *xq, const float *x, int64_t n_tok, int64_t k)
{
    int64_t nb = k / KERN_QK;
    for (int64_t t = 0; t < n_tok; t++) {
        for (int64_t b = 0; b < nb; b++) {
            const float *v = x + t * k + b * KERN_QK;
            struct kern_q8k_block *o = xq + t * nb + b;
            float amax = 0.0f, mx = 0.0f;
            for (int i = 0; i < KERN_QK; i++) {
                float a = fabsf(v[i]);
                if (a > amax) {
                    amax = a;
                    mx = v[i];
                }
            }
            if (!(amax > 0.0f)) {
                memset(o, 0, sizeof(*o));
                continue;
            }
            float iscale = -127.0f / mx;
            for (int i = 0; i < KERN_QK; i++) {
                float r = nearbyintf(iscale * v[i]);
                /* the clamp also keeps a NaN or inf input away from an undefined cast */
                if (!(r >= -127.0f)) r = -127.0f;
                if (!(r <= 127.0f)) r = 127.0f;
                o->q[i] = (int8_t)r;
            }
            for (int g = 0; g < KERN_QK / 16; g++) {
                int s = 0;
                for (int i = 0; i < 16; i++) s += o->q[16 * g + i];
                o->bsum[g] = (int16_t)s;
            }
            o->d = 1.0f / iscale;
        }
    }
}

/* One Q4_K super-block times one activation block: acc after the block (kernels.h order). */
static float q4k_block(const uint8_t *blk, const struct kern_q8k_block *xb, float acc)
{
    uint8_t sc[8], m[8];
    kern_q4k_scales(blk + 4, sc, m);
    int32_t isum = 0, msum = 0;
    for (int s = 0; s < 8; s++) {
        int32_t dot = 0;
        for (int i = 32 * s; i < 32 * s + 32; i++) dot += q4k_quant(blk + 16, i) * (int32_t)xb->q[i];
        isum += (int32_t)sc[s] * dot;
    }
    for (int g = 0; g < 16; g++) msum += (int32_t)m[g / 2] * (int32_t)xb->bsum[g];
    float dw = hs_f16_to_f32(hs_rd_u16(blk)) * xb->d;
    float dm = hs_f16_to_f32(hs_rd_u16(blk + 2)) * xb->d;
    acc = fmaf(dw, (float)isum, acc);
    return fmaf(-dm, (float)msum, acc);
}

void kern_matmul_k(float *y, int64_t y_ld, const void *w, int wt, const struct kern_q8k_block *xq,
                   int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    if (wt == KERN_K_Q5_K) { kern_matmul_q5k(y, y_ld, w, xq, n_tok, k, r0, r1); return; }
    if (wt != KERN_K_Q4_K) { kern_matmul_q6k(y, y_ld, w, xq, n_tok, k, r0, r1); return; } /* Q6_K */
    int64_t nb = k / KERN_QK;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = (const uint8_t *)w + (size_t)r * (size_t)nb * KERN_Q4K_BYTES;
        for (int64_t t = 0; t < n_tok; t++) {
            const struct kern_q8k_block *xt = xq + t * nb;
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) acc = q4k_block(row + b * KERN_Q4K_BYTES, xt + b, acc);
            y[t * y_ld + r] = acc;
        }
    }
}

void kern_k_row_to_f32(float *out, const void *w, int wt, int64_t k, int64_t row)
{
    if (wt == KERN_K_Q5_K) { kern_q5k_row_to_f32(out, w, k, row); return; }
    if (wt != KERN_K_Q4_K) { kern_q6k_row_to_f32(out, w, k, row); return; } /* Q6_K */
    int64_t nb = k / KERN_QK;
    const uint8_t *p = (const uint8_t *)w + (size_t)row * kern_k_row_bytes(wt, k);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = p + b * KERN_Q4K_BYTES;
        float *o = out + b * KERN_QK;
        uint8_t sc[8], m[8];
        kern_q4k_scales(blk + 4, sc, m);
        float d = hs_f16_to_f32(hs_rd_u16(blk)), dmin = hs_f16_to_f32(hs_rd_u16(blk + 2));
        for (int i = 0; i < KERN_QK; i++) {
            float d1 = d * (float)sc[i / 32], m1 = dmin * (float)m[i / 32];
            o[i] = d1 * (float)q4k_quant(blk + 16, i) - m1;
        }
    }
}

/* ---- quantizers (f32 -> blocks), round to nearest ------------------------------------ */



/* Per sub-block of 32 the range [min(0, lo), hi] in qmax steps (x = s * q - o, o = -min >=
 * 0); d = max s / 63 and dmin = max o / 63 as f16; 6-bit sc = round(s / d), m = round(o /
 * dmin); then q = round((x + dmin * m) / (d * sc)) in [0, qmax] with the stored (rounded)
 * scales. */
void kern_kq_scales_from_f32(const float *x, float qmax, uint8_t *blk, uint8_t q[KERN_QK])
{
    float s[8], o[8], smax = 0.0f, omax = 0.0f;
    for (int j = 0; j < 8; j++) {
        float lo = 0.0f, hi = 0.0f;
        for (int i = 0; i < 32; i++) {
            lo = HS_MIN(lo, x[32 * j + i]);
            hi = HS_MAX(hi, x[32 * j + i]);
        }
        s[j] = (hi - lo) / qmax;
        o[j] = -lo;
        smax = HS_MAX(smax, s[j]);
        omax = HS_MAX(omax, o[j]);
    }
    uint16_t dh = hs_f32_to_f16(smax / 63.0f), mh = hs_f32_to_f16(omax / 63.0f);
    float d = hs_f16_to_f32(dh), dmin = hs_f16_to_f32(mh);
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; j++) {
        sc[j] = (uint8_t)(d > 0.0f ? kern_clampf(roundf(s[j] / d), 0.0f, 63.0f) : 0.0f);
        m[j] = (uint8_t)(dmin > 0.0f ? kern_clampf(roundf(o[j] / dmin), 0.0f, 63.0f) : 0.0f);
    }
    kern_put_u16(blk, dh);
    kern_put_u16(blk + 2, mh);
    kern_q4k_scales_pack(blk + 4, sc, m);
    for (int i = 0; i < KERN_QK; i++) {
        float step = d * (float)sc[i / 32], off = dmin * (float)m[i / 32];
        q[i] = (uint8_t)(step > 0.0f ? kern_clampf(roundf((x[i] + off) / step), 0.0f, qmax) : 0.0f);
    }
}

/* One Q4_K super-block: q in [0, 15], two sub-blocks per 32 bytes of nibbles. */
static void q4k_block_from_f32(const float *x, uint8_t *blk)
{
    uint8_t q[KERN_QK];
    kern_kq_scales_from_f32(x, 15.0f, blk, q);
    for (int j = 0; j < 4; j++)
        for (int l = 0; l < 32; l++) blk[16 + 32 * j + l] = (uint8_t)(q[64 * j + l] | q[64 * j + 32 + l] << 4);
}

void kern_k_row_from_f32(void *w, int wt, const float *x, int64_t k)
{
    if (wt == KERN_K_Q5_K) { kern_q5k_row_from_f32(w, x, k); return; }
    if (wt != KERN_K_Q4_K) { kern_q6k_row_from_f32(w, x, k); return; } /* Q6_K */
    uint8_t *p = w;
    for (int64_t b = 0; b < k / KERN_QK; b++) q4k_block_from_f32(x + b * KERN_QK, p + b * KERN_Q4K_BYTES);
}
