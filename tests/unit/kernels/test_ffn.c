/* Tests of ffn.c: activations, SwiGLU, softmax and MoE routing vs double precision;
 * routing ties and renormalisation exact. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"

static uint64_t ffn_rng = 5;
static float ffn_rand(void)
{
    ffn_rng = ffn_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(ffn_rng >> 40) / 16777216.0) * 2.0f - 1.0f;
}

static bool near(double got, double want, double tol) { return fabs(got - want) <= tol * fmax(fabs(want), 1e-6); }

Test(kern_ffn, activations_vs_double)
{
    for (int i = 0; i < 2000; i++) {
        float x = 30.0f * ffn_rand();
        double xd = x;
        cr_assert(near(kern_sigmoid(x), 1.0 / (1.0 + exp(-xd)), 1e-6), "sigmoid(%g)", x);
        cr_assert(near(kern_silu(x), xd / (1.0 + exp(-xd)), 1e-6), "silu(%g)", x);
        cr_assert(near(kern_softplus(x), log1p(exp(xd)), 1e-6), "softplus(%g)", x);
    }
    cr_assert_eq(kern_softplus(50.0f), 50.0f);
    cr_assert(kern_softplus(-100.0f) > 0.0f);
    cr_assert_eq(kern_sigmoid(0.0f), 0.5f);
}

Test(kern_ffn, swiglu_gate_add_axpy)
{
    float g[50], u[50], y[50], y2[50];
    for (int i = 0; i < 50; i++) { g[i] = 8.0f * ffn_rand(); u[i] = ffn_rand(); }
    kern_swiglu(y, g, u, 0, 50);
    for (int i = 0; i < 50; i++) cr_assert(near(y[i], g[i] / (1.0 + exp(-(double)g[i])) * u[i], 1e-6));
    kern_swiglu(y2, g, u, 20, 50);
    kern_swiglu(y2, g, u, 0, 20);
    cr_assert_eq(memcmp(y, y2, sizeof(y)), 0);
    kern_sigmoid_mul(y, u, g, 50);
    for (int i = 0; i < 50; i++) cr_assert(near(y[i], u[i] / (1.0 + exp(-(double)g[i])), 1e-6));
    memcpy(y, u, sizeof(u));
    kern_add(y, g, 50);
    for (int i = 0; i < 50; i++) cr_assert_eq(y[i], u[i] + g[i]);
    memcpy(y, u, sizeof(u));
    kern_axpy(y, 0.25f, g, 50);
    for (int i = 0; i < 50; i++) cr_assert_eq(y[i], fmaf(0.25f, g[i], u[i]));
}

Test(kern_ffn, softmax_vs_double)
{
    float x[300], y[300];
    for (int i = 0; i < 300; i++) x[i] = 20.0f * ffn_rand() + 500.0f; /* needs the max shift */
    kern_softmax(y, x, 300);
    double m = x[0], s = 0;
    for (int i = 1; i < 300; i++) m = fmax(m, x[i]);
    for (int i = 0; i < 300; i++) s += exp(x[i] - m);
    double tot = 0;
    for (int i = 0; i < 300; i++) {
        cr_assert(near(y[i], exp(x[i] - m) / s, 1e-5), "%d: %.9g", i, y[i]);
        tot += y[i];
    }
    cr_assert(fabs(tot - 1.0) < 1e-5);
    float one = 3.0f;
    kern_softmax(&one, &one, 1);
    cr_assert_eq(one, 1.0f);
}

Test(kern_ffn, moe_route_topk_renorm)
{
    float logits[64], probs[64], wts[8], wn[8];
    int32_t ids[8], idn[8];
    for (int i = 0; i < 64; i++) logits[i] = 3.0f * ffn_rand();
    kern_moe_route(ids, wts, probs, logits, 64, 8, false);
    kern_moe_route(idn, wn, probs, logits, 64, 8, true);
    cr_assert_eq(memcmp(ids, idn, sizeof(ids)), 0);
    float ref[64];
    kern_softmax(ref, logits, 64);
    cr_assert_eq(memcmp(ref, probs, sizeof(ref)), 0);
    double s = 0;
    for (int j = 0; j < 8; j++) {
        cr_assert_eq(wts[j], probs[ids[j]]);
        if (j) cr_assert(wts[j] <= wts[j - 1]);
        for (int e = 0; e < 64; e++) {
            bool picked = false;
            for (int i = 0; i < 8; i++) picked = picked || ids[i] == e;
            if (!picked) cr_assert(probs[e] <= wts[7], "unpicked %d beats the 8th", e);
        }
        s += wts[j];
    }
    double tot = 0;
    for (int j = 0; j < 8; j++) {
        cr_assert(near(wn[j], wts[j] / s, 1e-6));
        tot += wn[j];
    }
    cr_assert(fabs(tot - 1.0) < 1e-6);
}

Test(kern_ffn, moe_route_ties_lower_index)
{
    float logits[6] = {1, 2, 2, 0, 2, 1}, probs[6], w[4];
    int32_t ids[4];
    kern_moe_route(ids, w, probs, logits, 6, 4, true);
    cr_assert_eq(ids[0], 1);
    cr_assert_eq(ids[1], 2);
    cr_assert_eq(ids[2], 4);
    cr_assert_eq(ids[3], 0);
    cr_assert_eq(w[0], w[1]);
    cr_assert_eq(w[1], w[2]);
    float all[3] = {5, 5, 5}, pa[3], wa[3];
    int32_t ia[3];
    kern_moe_route(ia, wa, pa, all, 3, 3, false);
    for (int j = 0; j < 3; j++) cr_assert_eq(ia[j], j);
}
