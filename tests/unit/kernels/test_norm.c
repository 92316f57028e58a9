/* Tests of norm.c against double precision, and of head ranges (exact). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"

static uint64_t nrm_rng = 1;
static float nrm_rand(void)
{
    nrm_rng = nrm_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(nrm_rng >> 40) / 16777216.0) * 2.0f - 1.0f;
}

static void close_rel(double got, double want, double tol, const char *what, int i)
{
    cr_assert(fabs(got - want) <= tol * fmax(fabs(want), 1e-3), "%s[%d]: %.9g vs %.9g", what, i, got, want);
}

Test(kern_norm, rmsnorm_vs_double)
{
    const int64_t ns[] = {1, 7, 64, 1024, 1000};
    for (size_t c = 0; c < 5; c++) {
        int64_t n = ns[c];
        float *x = hs_malloc(n * 4), *w = hs_malloc(n * 4), *y = hs_malloc(n * 4);
        for (int64_t i = 0; i < n; i++) { x[i] = 3.0f * nrm_rand(); w[i] = 1.0f + nrm_rand(); }
        kern_rmsnorm(y, x, w, n, 1e-6f);
        double ss = 0;
        for (int64_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
        double r = 1.0 / sqrt(ss / n + 1e-6);
        for (int64_t i = 0; i < n; i++) close_rel(y[i], x[i] * r * w[i], 1e-5, "rmsnorm", (int)i);
        /* in place gives the same bits */
        float *y2 = hs_malloc(n * 4);
        memcpy(y2, x, n * 4);
        kern_rmsnorm(y2, y2, w, n, 1e-6f);
        cr_assert_eq(memcmp(y, y2, n * 4), 0);
        hs_free(x); hs_free(w); hs_free(y); hs_free(y2);
    }
}

Test(kern_norm, rmsnorm_eps_matters)
{
    float x[4] = {0}, w[4] = {1, 1, 1, 1}, y[4];
    x[0] = 1e-4f;
    kern_rmsnorm(y, x, w, 4, 1e-6f);
    double want = 1e-4 / sqrt(1e-8 / 4 + 1e-6);
    close_rel(y[0], want, 1e-5, "eps", 0);
}

Test(kern_norm, heads_strided_and_ranges)
{
    /* 4 heads of 16 with a stride of 32 (q interleaved with its gate): gates untouched */
    float x[128], ref[128], w[16];
    for (int i = 0; i < 128; i++) x[i] = nrm_rand();
    for (int i = 0; i < 16; i++) w[i] = 1.0f + 0.5f * nrm_rand();
    memcpy(ref, x, sizeof(x));
    float a[128];
    memcpy(a, x, sizeof(x));
    kern_rmsnorm_heads(a, 32, 16, w, 1e-6f, 0, 4);
    for (int h = 0; h < 4; h++) {
        float want[16];
        kern_rmsnorm(want, ref + 32 * h, w, 16, 1e-6f);
        cr_assert_eq(memcmp(a + 32 * h, want, sizeof(want)), 0, "head %d", h);
        cr_assert_eq(memcmp(a + 32 * h + 16, ref + 32 * h + 16, 64), 0, "gate %d touched", h);
    }
    float b[128];
    memcpy(b, x, sizeof(x));
    kern_rmsnorm_heads(b, 32, 16, w, 1e-6f, 0, 1);
    kern_rmsnorm_heads(b, 32, 16, w, 1e-6f, 1, 4);
    cr_assert_eq(memcmp(a, b, sizeof(a)), 0);
}

Test(kern_norm, gated_vs_double)
{
    const int64_t n = 128, nh = 3;
    float o[384], z[384], w[128], y[384], y2[384];
    for (int i = 0; i < 384; i++) { o[i] = 2.0f * nrm_rand(); z[i] = 4.0f * nrm_rand(); }
    for (int i = 0; i < 128; i++) w[i] = 1.0f + 0.3f * nrm_rand();
    kern_rmsnorm_gated(y, o, z, w, n, 1e-6f, 0, nh);
    for (int h = 0; h < nh; h++) {
        double ss = 0;
        for (int i = 0; i < n; i++) ss += (double)o[h * n + i] * o[h * n + i];
        double r = 1.0 / sqrt(ss / n + 1e-6);
        for (int i = 0; i < n; i++) {
            double zz = z[h * n + i];
            double want = o[h * n + i] * r * w[i] * (zz / (1.0 + exp(-zz)));
            cr_assert(fabs(y[h * n + i] - want) <= 1e-5 * fmax(fabs(want), 1e-2), "%d %d: %.9g vs %.9g",
                      h, i, y[h * n + i], want);
        }
    }
    kern_rmsnorm_gated(y2, o, z, w, n, 1e-6f, 2, 3);
    kern_rmsnorm_gated(y2, o, z, w, n, 1e-6f, 0, 2);
    cr_assert_eq(memcmp(y, y2, sizeof(y)), 0);
    memcpy(y2, o, sizeof(o));
    kern_rmsnorm_gated(y2, y2, z, w, n, 1e-6f, 0, nh); /* y == o allowed */
    cr_assert_eq(memcmp(y, y2, sizeof(y)), 0);
}

Test(kern_norm, l2_vs_double)
{
    float x[256], x0[256];
    for (int i = 0; i < 256; i++) x0[i] = x[i] = 5.0f * nrm_rand();
    x[128] = 0; x0[128] = 0; /* a head of small values feels the eps */
    for (int i = 129; i < 256; i++) x0[i] = x[i] = 1e-5f * nrm_rand();
    kern_l2norm_heads(x, 128, 1e-6f, 0, 2);
    for (int h = 0; h < 2; h++) {
        double ss = 0;
        for (int i = 0; i < 128; i++) ss += (double)x0[h * 128 + i] * x0[h * 128 + i];
        double r = 1.0 / sqrt(ss + 1e-6);
        for (int i = 0; i < 128; i++) close_rel(x[h * 128 + i], x0[h * 128 + i] * r, 1e-5, "l2", i);
    }
    double n0 = 0;
    for (int i = 0; i < 128; i++) n0 += (double)x[i] * x[i];
    cr_assert(fabs(n0 - 1.0) < 1e-5, "unit norm: %.9g", n0);
}

/* The documented order, restated: equal bits pin the contract for SIMD variants. */
Test(kern_norm, equals_documented_order)
{
    float x[77], w[77], y[77], g[77];
    for (int i = 0; i < 77; i++) { x[i] = nrm_rand(); w[i] = nrm_rand(); g[i] = 4.0f * nrm_rand(); }
    float acc[32] = {0};
    for (int i = 0; i < 77; i++) acc[i % 32] = fmaf(x[i], x[i], acc[i % 32]);
    for (int h = 16; h >= 1; h >>= 1)
        for (int l = 0; l < h; l++) acc[l] = acc[l] + acc[l + h];
    cr_assert_eq(kern_dot(x, x, 77), acc[0]);
    float r = 1.0f / sqrtf(acc[0] / 77.0f + 1e-6f);
    kern_rmsnorm(y, x, w, 77, 1e-6f);
    for (int i = 0; i < 77; i++) cr_assert_eq(y[i], (x[i] * r) * w[i], "i %d", i);
    kern_rmsnorm_gated(y, x, g, w, 77, 1e-6f, 0, 1);
    for (int i = 0; i < 77; i++)
        cr_assert_eq(y[i], ((x[i] * r) * w[i]) * (g[i] / (1.0f + expf(-g[i]))), "i %d", i);
    float r2 = 1.0f / sqrtf(acc[0] + 1e-6f);
    memcpy(y, x, sizeof(x));
    kern_l2norm_heads(y, 77, 1e-6f, 0, 1);
    for (int i = 0; i < 77; i++) cr_assert_eq(y[i], x[i] * r2, "i %d", i);
}
