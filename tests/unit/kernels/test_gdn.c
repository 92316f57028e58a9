/* Tests of gdn.c: conv1d step and gates vs double, the gated delta rule vs a double
 * recurrence over N tokens, determinism and head-range invariance (memcmp). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"

static uint64_t gd_rng = 77;
static float gd_rand(void)
{
    gd_rng = gd_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(gd_rng >> 40) / 16777216.0) * 2.0f - 1.0f;
}

Test(kern_gdn, conv1d_vs_double_and_state)
{
    enum { C = 10, K = 4, N = 7 };
    float w[C * K], xs[N][C], state[(K - 1) * C] = {0}, st2[(K - 1) * C] = {0}, out[C], out2[C];
    for (int i = 0; i < C * K; i++) w[i] = gd_rand();
    for (int t = 0; t < N; t++)
        for (int c = 0; c < C; c++) xs[t][c] = 3.0f * gd_rand();
    for (int t = 0; t < N; t++) {
        kern_conv1d_step(out, state, xs[t], w, C, K, 0, C);
        /* channels split in two ranges, and out aliasing x */
        float xa[C];
        memcpy(xa, xs[t], sizeof(xa));
        kern_conv1d_step(xa, st2, xa, w, C, K, 6, C);
        kern_conv1d_step(xa, st2, xa, w, C, K, 0, 6);
        memcpy(out2, xa, sizeof(out2));
        cr_assert_eq(memcmp(out, out2, sizeof(out)), 0, "t %d", t);
        cr_assert_eq(memcmp(state, st2, sizeof(state)), 0, "t %d", t);
        for (int c = 0; c < C; c++) {
            double acc = 0;
            for (int j = 0; j < K; j++) {
                int src = t - (K - 1) + j;
                if (src >= 0) acc += (double)w[c * K + j] * xs[src][c];
            }
            double want = acc / (1.0 + exp(-acc));
            cr_assert(fabs(out[c] - want) <= 1e-5 * fmax(1.0, fabs(want)), "t %d c %d: %.9g vs %.9g", t, c, out[c], want);
        }
        /* the state holds the last K-1 inputs, oldest first, exactly */
        for (int j = 0; j < K - 1; j++) {
            int src = t - (K - 2) + j;
            for (int c = 0; c < C; c++) cr_assert_eq(state[j * C + c], src >= 0 ? xs[src][c] : 0.0f);
        }
    }
}

Test(kern_gdn, gates_vs_double_decay_range)
{
    enum { H = 64 };
    float a[H], b[H], sa[H], dt[H], al[H], be[H];
    for (int h = 0; h < H; h++) {
        a[h] = 8.0f * gd_rand();
        b[h] = 6.0f * gd_rand();
        sa[h] = -expf(1.5f * gd_rand()); /* -exp(A_log) */
        dt[h] = gd_rand();
    }
    a[0] = -40.0f; /* softplus ~ 0: decay 1 */
    a[1] = 30.0f;  /* softplus linear branch */
    kern_gdn_gates(al, be, a, b, sa, dt, 0, H);
    for (int h = 0; h < H; h++) {
        double sp = log1p(exp((double)a[h] + dt[h]));
        double g = sa[h] * sp;
        cr_assert(al[h] > 0.0f && al[h] <= 1.0f, "h %d alpha %.9g", h, al[h]);
        cr_assert(fabs(al[h] - exp(g)) <= 1e-5 * exp(g) + 1e-30, "h %d: %.9g vs %.9g", h, al[h], exp(g));
        cr_assert(fabs(be[h] - 1.0 / (1.0 + exp(-(double)b[h]))) <= 1e-6);
    }
    cr_assert_eq(al[0], 1.0f);
}

/* a token's inputs: q, k (L2-normed), v, alpha, beta */
struct tok {
    float q[2 * 16], k[2 * 16], v[4 * 72], al[4], be[4];
};

static void make_tokens(struct tok *tk, int n)
{
    for (int t = 0; t < n; t++) {
        for (int i = 0; i < 32; i++) { tk[t].q[i] = gd_rand(); tk[t].k[i] = gd_rand(); }
        for (int i = 0; i < 4 * 72; i++) tk[t].v[i] = gd_rand();
        kern_l2norm_heads(tk[t].q, 16, 1e-6f, 0, 2);
        kern_l2norm_heads(tk[t].k, 16, 1e-6f, 0, 2);
        for (int h = 0; h < 4; h++) {
            tk[t].al[h] = 0.8f + 0.2f * fabsf(gd_rand());
            tk[t].be[h] = 0.5f + 0.5f * gd_rand();
        }
    }
}

enum { HK = 2, HV = 4, DK = 16, DV = 72, NTOK = 24 };

Test(kern_gdn, step_vs_double_recurrence)
{
    static struct tok tk[NTOK];
    make_tokens(tk, NTOK);
    static float S[HV * DK * DV];
    static double Sd[HV * DK * DV];
    for (int i = 0; i < HV * DK * DV; i++) Sd[i] = S[i] = 0.1f * gd_rand();
    float o[HV * DV];
    double sc = 1.0 / sqrt((double)DK);
    for (int t = 0; t < NTOK; t++) {
        kern_gdn_step(o, S, tk[t].q, tk[t].k, tk[t].v, tk[t].al, tk[t].be, HK, HV, DK, DV, 0, HV);
        for (int h = 0; h < HV; h++) {
            int kh = h % HK; /* tiled head mapping */
            double *Sh = Sd + h * DK * DV;
            const float *k = tk[t].k + kh * DK, *q = tk[t].q + kh * DK, *v = tk[t].v + h * DV;
            for (int i = 0; i < DK * DV; i++) Sh[i] *= tk[t].al[h];
            for (int j = 0; j < DV; j++) {
                double u = 0;
                for (int i = 0; i < DK; i++) u += Sh[i * DV + j] * k[i];
                double d = tk[t].be[h] * (v[j] - u);
                for (int i = 0; i < DK; i++) Sh[i * DV + j] += k[i] * d;
                double oo = 0;
                for (int i = 0; i < DK; i++) oo += Sh[i * DV + j] * q[i] * sc;
                cr_assert(fabs(o[h * DV + j] - oo) <= 1e-5, "t %d h %d j %d: %.9g vs %.9g", t, h, j, o[h * DV + j], oo);
            }
        }
    }
    for (int i = 0; i < HV * DK * DV; i++)
        cr_assert(fabs(S[i] - Sd[i]) <= 1e-5 * fmax(1.0, fabs(Sd[i])), "S[%d]: %.9g vs %.9g", i, S[i], Sd[i]);
}

Test(kern_gdn, step_deterministic_and_head_ranges)
{
    static struct tok tk[NTOK];
    make_tokens(tk, NTOK);
    static float S0[HV * DK * DV], A[HV * DK * DV], B[HV * DK * DV], C[HV * DK * DV];
    for (int i = 0; i < HV * DK * DV; i++) S0[i] = 0.1f * gd_rand();
    memcpy(A, S0, sizeof(S0));
    memcpy(B, S0, sizeof(S0));
    memcpy(C, S0, sizeof(S0));
    float oa[HV * DV], ob[HV * DV], oc[HV * DV];
    for (int t = 0; t < NTOK; t++) {
        kern_gdn_step(oa, A, tk[t].q, tk[t].k, tk[t].v, tk[t].al, tk[t].be, HK, HV, DK, DV, 0, HV);
        kern_gdn_step(ob, B, tk[t].q, tk[t].k, tk[t].v, tk[t].al, tk[t].be, HK, HV, DK, DV, 0, HV);
        kern_gdn_step(oc, C, tk[t].q, tk[t].k, tk[t].v, tk[t].al, tk[t].be, HK, HV, DK, DV, 3, HV);
        kern_gdn_step(oc, C, tk[t].q, tk[t].k, tk[t].v, tk[t].al, tk[t].be, HK, HV, DK, DV, 0, 1);
        kern_gdn_step(oc, C, tk[t].q, tk[t].k, tk[t].v, tk[t].al, tk[t].be, HK, HV, DK, DV, 1, 3);
        cr_assert_eq(memcmp(oa, ob, sizeof(oa)), 0, "t %d", t);
        cr_assert_eq(memcmp(oa, oc, sizeof(oa)), 0, "t %d", t);
    }
    cr_assert_eq(memcmp(A, B, sizeof(A)), 0);
    cr_assert_eq(memcmp(A, C, sizeof(A)), 0);
    cr_assert_neq(memcmp(A, S0, sizeof(A)), 0);
}

/* The order kernels.h documents, restated column by column (the kernel works on column
 * chunks with row passes): equal bits pin the contract SIMD variants must keep. */
Test(kern_gdn, step_equals_documented_order)
{
    static struct tok tk[4];
    make_tokens(tk, 4);
    static float S[HV * DK * DV], R[HV * DK * DV];
    for (int i = 0; i < HV * DK * DV; i++) R[i] = S[i] = 0.1f * gd_rand();
    float o[HV * DV], ro[HV * DV];
    float sc = 1.0f / sqrtf((float)DK);
    for (int t = 0; t < 4; t++) {
        kern_gdn_step(o, S, tk[t].q, tk[t].k, tk[t].v, tk[t].al, tk[t].be, HK, HV, DK, DV, 0, HV);
        for (int h = 0; h < HV; h++) {
            const float *k = tk[t].k + (h % HK) * DK, *q = tk[t].q + (h % HK) * DK;
            float *Sh = R + h * DK * DV;
            for (int j = 0; j < DV; j++) {
                float u = 0.0f, oo = 0.0f;
                for (int i = 0; i < DK; i++) {
                    Sh[i * DV + j] = Sh[i * DV + j] * tk[t].al[h];
                    u = fmaf(Sh[i * DV + j], k[i], u);
                }
                float d = tk[t].be[h] * (tk[t].v[h * DV + j] - u);
                for (int i = 0; i < DK; i++) {
                    Sh[i * DV + j] = fmaf(k[i], d, Sh[i * DV + j]);
                    oo = fmaf(Sh[i * DV + j], q[i] * sc, oo);
                }
                ro[h * DV + j] = oo;
            }
        }
        cr_assert_eq(memcmp(o, ro, sizeof(o)), 0, "t %d", t);
    }
    cr_assert_eq(memcmp(S, R, sizeof(S)), 0);
}

Test(kern_gdn, conv1d_equals_documented_order)
{
    enum { C = 5, K = 4 };
    float w[C * K], st[(K - 1) * C], x[C], out[C];
    for (int i = 0; i < C * K; i++) w[i] = gd_rand();
    for (int i = 0; i < (K - 1) * C; i++) st[i] = gd_rand();
    for (int i = 0; i < C; i++) x[i] = gd_rand();
    float want[C];
    for (int c = 0; c < C; c++) {
        float acc = 0.0f;
        for (int j = 0; j < K - 1; j++) acc = fmaf(w[c * K + j], st[j * C + c], acc);
        acc = fmaf(w[c * K + K - 1], x[c], acc);
        want[c] = acc / (1.0f + expf(-acc));
    }
    kern_conv1d_step(out, st, x, w, C, K, 0, C);
    cr_assert_eq(memcmp(out, want, sizeof(out)), 0);
}
