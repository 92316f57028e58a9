/*
 * ffn.c — elementwise activations (SiLU, sigmoid, softplus), SwiGLU, the attention output
 * gate, residual and weighted sums, softmax and MoE routing.
 */
#include <math.h>

#include "kernels/kernels.h"

float kern_silu(float x) { return x / (1.0f + kern_expf(-x)); }

float kern_sigmoid(float x) { return 1.0f / (1.0f + kern_expf(-x)); }

/* log1p(exp(x)) overflows for large x, where it equals x to f32 precision anyway */
float kern_softplus(float x) { return x > 20.0f ? x : log1pf(kern_expf(x)); }

void kern_swiglu(float *y, const float *gate, const float *up, int64_t i0, int64_t i1)
{
    for (int64_t i = i0; i < i1; i++) y[i] = kern_silu(gate[i]) * up[i];
}

void kern_sigmoid_mul(float *y, const float *x, const float *g, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = x[i] * kern_sigmoid(g[i]);
}

void kern_gated_scale(float *y, const float *z, const float *w, float r, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = ((y[i] * r) * w[i]) * kern_silu(z[i]);
}

void kern_add(float *y, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = y[i] + x[i];
}

void kern_axpy(float *y, float a, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = fmaf(a, x[i], y[i]);
}

void kern_softmax(float *y, const float *x, int64_t n)
{
    float m = x[0];
    for (int64_t i = 1; i < n; i++)
        if (x[i] > m) m = x[i];
    float s = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        y[i] = kern_expf(x[i] - m);
        s = s + y[i];
    }
    for (int64_t i = 0; i < n; i++) y[i] = y[i] / s;
}

void kern_moe_route(int32_t *ids, float *weights, float *probs, const float *logits,
                    int64_t n_exp, int64_t n_sel, bool renorm)
{
    kern_softmax(probs, logits, n_exp);
    /* n_sel passes of a strict '>' scan: the first (lowest) index wins a tie, and picked
     * experts are skipped by their id, so the result depends on probs alone */
    for (int64_t j = 0; j < n_sel; j++) {
        int64_t best = -1;
        for (int64_t e = 0; e < n_exp; e++) {
            bool taken = false;
            for (int64_t i = 0; i < j; i++) taken = taken || ids[i] == e;
            if (taken) continue;
            if (best < 0 || probs[e] > probs[best]) best = e;
        }
        ids[j] = (int32_t)best;
        weights[j] = probs[best];
    }
    if (!renorm) return;
    float s = 0.0f;
    for (int64_t j = 0; j < n_sel; j++) s = s + weights[j];
    for (int64_t j = 0; j < n_sel; j++) weights[j] = weights[j] / s;
}
