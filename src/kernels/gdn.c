/*
 * gdn.c — the Gated DeltaNet pieces that run per token: the causal conv1d step, the
 * decay/beta gates and the gated delta rule recurrence (docs/MODELS.md
 * §4.2). The recurrence runs token by token only (docs/DESIGN.md §4): the chunked form rounds
 * differently.
 *
 * Columns j of a head's state are independent (every operation on S[.][j] involves only
 * column j and per-row scalars), so the step works on column chunks of COLS with two
 * passes over the rows each; the order per element is the one kernels.h states.
 */
#include <math.h>

#include "kernels/kernels.h"

#define COLS 64

void kern_conv1d_step(float *out, float *state, const float *x, const float *w, int64_t n_ch,
                      int64_t k_conv, int64_t c0, int64_t c1)
{
    for (int64_t c = c0; c < c1; c++) {
        float xc = x[c];
        float acc = 0.0f;
        for (int64_t j = 0; j < k_conv - 1; j++) acc = fmaf(w[c * k_conv + j], state[j * n_ch + c], acc);
        acc = fmaf(w[c * k_conv + k_conv - 1], xc, acc);
        for (int64_t j = 0; j + 1 < k_conv - 1; j++) state[j * n_ch + c] = state[(j + 1) * n_ch + c];
        if (k_conv > 1) state[(k_conv - 2) * n_ch + c] = xc;
        out[c] = kern_silu(acc);
    }
}

void kern_gdn_gates(float *alpha, float *beta, const float *a, const float *b,
                    const float *ssm_a, const float *dt_bias, int64_t h0, int64_t h1)
{
    for (int64_t h = h0; h < h1; h++) {
        float g = ssm_a[h] * kern_softplus(a[h] + dt_bias[h]);
        float bh = b[h];
        alpha[h] = kern_expf(g);
        beta[h] = kern_sigmoid(bh);
    }
}

void kern_gdn_step(float *o, float *S, const float *q, const float *k, const float *v,
                   const float *alpha, const float *beta, int64_t n_kh, int64_t n_vh,
                   int64_t dk, int64_t dv, int64_t h0, int64_t h1)
{
    float sc = 1.0f / sqrtf((float)dk);
    float u[COLS];
    (void)n_vh;
    for (int64_t h = h0; h < h1; h++) {
        int64_t kh = h % n_kh;
        const float *kk = k + kh * dk, *qq = q + kh * dk, *vv = v + h * dv;
        float *Sh = S + h * dk * dv, *oh = o + h * dv;
        float al = alpha[h], be = beta[h];
        for (int64_t j0 = 0; j0 < dv; j0 += COLS) {
            int64_t nj = HS_MIN(COLS, dv - j0);
            for (int64_t j = 0; j < nj; j++) u[j] = 0.0f;
            for (int64_t i = 0; i < dk; i++) {
                float *Si = Sh + i * dv + j0;
                for (int64_t j = 0; j < nj; j++) {
                    Si[j] = Si[j] * al;
                    u[j] = fmaf(Si[j], kk[i], u[j]);
                }
            }
            /* u becomes the delta; o's chunk accumulates the read-out */
            for (int64_t j = 0; j < nj; j++) {
                u[j] = be * (vv[j0 + j] - u[j]);
                oh[j0 + j] = 0.0f;
            }
            for (int64_t i = 0; i < dk; i++) {
                float *Si = Sh + i * dv + j0;
                float qi = qq[i] * sc;
                for (int64_t j = 0; j < nj; j++) {
                    Si[j] = fmaf(kk[i], u[j], Si[j]);
                    oh[j0 + j] = fmaf(Si[j], qi, oh[j0 + j]);
                }
            }
        }
    }
}
