/*
 * bf16.c — scalar reference of the bf16 x bf16 matmul (kern_bf16_matmul) and of the
 * activation rounding it reads (kern_bf16_round). The order is kernels.h's "BF16 weights"
 * contract; this file is its definition, and bf16_avx512.c (vdpbf16ps) / bf16_avx2.c (FMAs
 * under MXCSR.DAZ|FTZ) equal it bit for bit.
 *
 * Invariants:
 *   1. Every step is one IEEE fmaf (products of two bf16 are exact in f32, so the only
 *      rounding is that of the sum) followed by F, the flush-to-zero of vdpbf16ps: a result
 *      that is tiny AFTER rounding becomes a zero of its sign. Measured on this CPU family
 *      (Sapphire Rapids): exact sums in [FLT_MIN - 2^-151, FLT_MIN) come out as FLT_MIN,
 *      those below FLT_MIN - 2^-151 as 0. fmaf rounds into the subnormal range, so it
 *      cannot tell those two apart when it returns exactly FLT_MIN; step() then decides
 *      with an exact double computation (see there).
 *   2. Inputs are D-flushed (bf16 with a zero exponent field = a zero of its sign), as
 *      vdpbf16ps's DAZ does; the accumulator is never subnormal because every step
 *      flushed it.
 *   3. The tree adds are F(a + b): a tiny sum of two floats is exact, so before/after
 *      rounding cannot differ there.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"

static uint16_t round1(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7f800000u) == 0x7f800000u) {
        if (u & 0x007fffffu) return (uint16_t)((u >> 16) | 0x0040u); /* NaN, made quiet */
        return (uint16_t)(u >> 16);                                   /* infinity */
    }
    if ((u & 0x7f800000u) == 0) return (uint16_t)((u >> 16) & 0x8000u); /* zero, subnormal */
    u += 0x7fffu + ((u >> 16) & 1u); /* nearest even; a carry into the exponent is right */
    return (uint16_t)(u >> 16);
}

void kern_bf16_round(uint16_t *xb, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) xb[i] = round1(x[i]);
}

/* A bf16 as f32 with D applied (invariant 2). */
static float bf_d(uint16_t b)
{
    if ((b & 0x7f80u) == 0) return (b & 0x8000u) ? -0.0f : 0.0f;
    return hs_bf16_to_f32(b);
}

/* F(fmaf(a, b, c)) for D-flushed a, b and a normal or zero c (invariant 1). When fmaf
 * returns +-FLT_MIN the exact value v = a * b + c lies within 2^-150 of it, and it must be
 * flushed iff |v| < FLT_MIN - 2^-151. Then |c| < 2^-100 (a larger c has an ulp that the
 * bf16 product cannot cancel down to FLT_MIN), so c -+ (FLT_MIN - 2^-151) is exact in
 * double, a * b is exact in double, and the one rounded double sum of the two has the
 * sign of v -+ (FLT_MIN - 2^-151): rounding to nearest never changes a sign. */
static float step(float c, float a, float b)
{
    float r = fmaf(a, b, c);
    float m = fabsf(r);
    if (m < FLT_MIN) return copysignf(0.0f, r);
    if (m == FLT_MIN) {
        double lim = (double)FLT_MIN - 0x1p-151;
        double d = (double)a * (double)b + ((double)c - copysign(lim, (double)r));
        if (r > 0.0f ? d < 0.0 : d > 0.0) return copysignf(0.0f, r);
    }
    return r;
}

static float add_f(float a, float b)
{
    float r = a + b;
    return fabsf(r) < FLT_MIN ? copysignf(0.0f, r) : r;
}

static float tree16(float *acc)
{
    for (int h = KERN_BF16_LANES / 2; h >= 1; h /= 2)
        for (int l = 0; l < h; l++) acc[l] = add_f(acc[l], acc[l + h]);
    return acc[0];
}

void kern_bf16_matmul(float *y, int64_t y_ld, const void *w, const uint16_t *xb, int64_t n_tok,
                      int64_t k, int64_t r0, int64_t r1)
{
    const uint8_t *wb = w;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = wb + (size_t)r * (size_t)k * 2;
        for (int64_t t = 0; t < n_tok; t++) {
            const uint16_t *xt = xb + t * k;
            float acc[KERN_BF16_LANES] = { 0 };
            for (int64_t c = 0; c < k; c += 2 * KERN_BF16_LANES) {
                for (int l = 0; l < KERN_BF16_LANES; l++) {
                    int64_t k0 = c + 2 * l, k1 = k0 + 1; /* the odd element first */
                    float w1 = k1 < k ? bf_d(hs_rd_u16(row + k1 * 2)) : 0.0f;
                    float x1 = k1 < k ? bf_d(xt[k1]) : 0.0f;
                    float w0 = k0 < k ? bf_d(hs_rd_u16(row + k0 * 2)) : 0.0f;
                    float x0 = k0 < k ? bf_d(xt[k0]) : 0.0f;
                    acc[l] = step(step(acc[l], w1, x1), w0, x0);
                }
            }
            y[t * y_ld + r] = tree16(acc);
        }
    }
}
