/*
 * norm.c — RMSNorm (folded weight), per-head RMSNorm, the GDN gated RMSNorm and the L2
 * norm. Every sum of squares is kern_dot(x, x, n), so SIMD variants reuse one dot.
 */
#include <math.h>

#include "kernels/kernels.h"

static float rms_scale(const float *x, int64_t n, float eps)
{
    float ss = kern_dot(x, x, n);
    return 1.0f / sqrtf(ss / (float)n + eps);
}

void kern_rmsnorm(float *y, const float *x, const float *w, int64_t n, float eps)
{
    float r = rms_scale(x, n, eps);
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] * r) * w[i];
}

void kern_rmsnorm_heads(float *x, int64_t ld, int64_t hd, const float *w, float eps,
                        int64_t h0, int64_t h1)
{
    for (int64_t h = h0; h < h1; h++) kern_rmsnorm(x + h * ld, x + h * ld, w, hd, eps);
}

void kern_rmsnorm_gated(float *y, const float *o, const float *z, const float *w, int64_t n,
                        float eps, int64_t h0, int64_t h1)
{
    for (int64_t h = h0; h < h1; h++) {
        const float *oh = o + h * n, *zh = z + h * n;
        float *yh = y + h * n;
        float r = rms_scale(oh, n, eps);
        for (int64_t i = 0; i < n; i++) yh[i] = ((oh[i] * r) * w[i]) * kern_silu(zh[i]);
    }
}

void kern_l2norm_heads(float *x, int64_t n, float eps, int64_t h0, int64_t h1)
{
    for (int64_t h = h0; h < h1; h++) {
        float *xh = x + h * n;
        float r = 1.0f / sqrtf(kern_dot(xh, xh, n) + eps);
        for (int64_t i = 0; i < n; i++) xh[i] = xh[i] * r;
    }
}
