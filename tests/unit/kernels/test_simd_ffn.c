/* Tests of kern_expf (kernels.h) and the lane-wise activation variants: swiglu / sigmoid_mul /
 * gated_scale of ffn_avx2.c / ffn_avx512.c and conv1d_step of gdn_avx2.c / gdn_avx512.c:
 *   - kern_expf is within one ulp of exp computed in double and correctly rounded on all
 *     but a tiny fraction of a sweep over every 61st float in [-104, 89], and its special
 *     cases (NaN, +-inf, overflow, underflow, -0) are as written;
 *   - each variant's swiglu / sigmoid_mul / gated_scale / conv1d_step equals the scalar
 *     reference bit for bit (memcmp) on random data salted with NaN, +-inf, +-0, huge,
 *     tiny and subnormal values, lengths with and without a vector tail, offset ranges,
 *     and a conv width other than 4 (the scalar fallback). A NaN result must be NaN in
 *     both; its sign and payload are not part of the contract (kernels.h invariant 1:
 *     which operand's NaN a commutative multiply passes on is the compiler's choice). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "unit/cpu_level.h"

static uint64_t act_rng;
static uint64_t act_next(void)
{
    uint64_t z = (act_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static float act_val(void)
{
    uint64_t u = act_next();
    switch (u % 64) {
    case 0: return NAN;
    case 1: return INFINITY;
    case 2: return -INFINITY;
    case 3: return 0.0f;
    case 4: return -0.0f;
    case 5: return 1e-41f;  /* subnormal */
    case 6: return -95.0f;
    case 7: return 88.9f;
    case 8: return 120.0f;
    case 9: return -120.0f;
    default: break;
    }
    float m = (float)((double)(u >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
    return ldexpf(m, (int)((u >> 5) % 12) - 3);
}

static float *act_vec(int64_t n)
{
    float *v = hs_malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) v[i] = act_val();
    return v;
}

/* Same bits, or NaN in both. */
static bool act_same(const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (memcmp(a + i, b + i, 4) && !(isnan(a[i]) && isnan(b[i]))) return false;
    return true;
}

static float ulp_of(float x) { return nextafterf(fabsf(x), INFINITY) - fabsf(x); }

Test(kern_expf, accuracy_sweep)
{
    long n = 0, off_cr = 0;
    double worst = 0.0;
    for (uint32_t bits = 0; bits < 0xffffffffu - 61; bits += 61) {
        float x;
        memcpy(&x, &bits, 4);
        if (!(x >= -104.0f && x <= 89.0f)) continue;
        float got = kern_expf(x);
        float cr = (float)exp((double)x);
        n++;
        if (got != cr) off_cr++;
        if (isinf(cr) || cr == 0.0f) {
            cr_assert(got == cr || fabsf(got - cr) <= ulp_of(cr), "x=%a: %a vs %a", x, got, cr);
            continue;
        }
        double e = fabs((double)got - exp((double)x)) / ulp_of(cr);
        if (e > worst) worst = e;
    }
    cr_assert_gt(n, 30000000, "sweep too small: %ld", n);
    cr_assert_leq(worst, 1.0, "worst error %.3f ulp", worst);
    cr_assert_lt((double)off_cr / (double)n, 1e-4, "%ld of %ld not correctly rounded", off_cr, n);
}

Test(kern_expf, special_values)
{
    cr_assert(isnan(kern_expf(NAN)));
    cr_assert(isinf(kern_expf(INFINITY)) && kern_expf(INFINITY) > 0);
    cr_assert(kern_expf(-INFINITY) == 0.0f && !signbit(kern_expf(-INFINITY)));
    cr_assert(kern_expf(0.0f) == 1.0f && kern_expf(-0.0f) == 1.0f);
    cr_assert(isinf(kern_expf(88.8f)), "past FLT_MAX");
    cr_assert(isinf(kern_expf(89.5f)));
    cr_assert(kern_expf(-103.5f) == 0.0f || kern_expf(-103.5f) < 1e-44f);
    cr_assert(kern_expf(-104.5f) == 0.0f);
    cr_assert(kern_expf(-87.0f) > 0.0f && kern_expf(-87.0f) < 2e-38f);
    cr_assert(kern_expf(1.0f) == 0x1.5bf0a8p+1f, "e: %a", kern_expf(1.0f));
}

static void act_check(const char *variant)
{
    const struct kern_ops *v = cpu_level_ops_or_skip(variant), *s = kern_ops_for("scalar");
    act_rng = 99;
    static const int64_t ns[] = {1, 7, 8, 15, 16, 17, 33, 100, 4096};
    int bad = 0;
    for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++) {
        int64_t n = ns[ni];
        float *g = act_vec(n), *u = act_vec(n), *w = act_vec(n);
        float *a = hs_malloc((size_t)n * 4), *b = hs_malloc((size_t)n * 4);
        /* swiglu over [i0, n) in place on a copy of gate */
        int64_t i0 = n > 3 ? 3 : 0;
        memcpy(a, g, (size_t)n * 4);
        memcpy(b, g, (size_t)n * 4);
        s->swiglu(a, a, u, i0, n);
        v->swiglu(b, b, u, i0, n);
        if (!act_same(a, b, n)) { bad++; cr_log_error("%s swiglu n=%ld", variant, (long)n); }
        s->sigmoid_mul(a, u, g, n);
        v->sigmoid_mul(b, u, g, n);
        if (!act_same(a, b, n)) { bad++; cr_log_error("%s sigmoid_mul n=%ld", variant, (long)n); }
        memcpy(a, u, (size_t)n * 4);
        memcpy(b, u, (size_t)n * 4);
        s->gated_scale(a, g, w, 0.37f, n);
        v->gated_scale(b, g, w, 0.37f, n);
        if (!act_same(a, b, n)) { bad++; cr_log_error("%s gated_scale n=%ld", variant, (long)n); }
        hs_free(g); hs_free(u); hs_free(w); hs_free(a); hs_free(b);
    }
    /* conv step: several tokens through the state, widths 4 (vector) and 3 (fallback) */
    for (int64_t kc = 3; kc <= 4; kc++) {
        const int64_t n_ch = 45, c0 = 2, c1 = 43, T = 5;
        float *w = act_vec(n_ch * kc), *x = act_vec(n_ch * T);
        float *sa = hs_calloc((size_t)((kc - 1) * n_ch), 4), *sb = hs_calloc((size_t)((kc - 1) * n_ch), 4);
        float *xa = hs_malloc((size_t)(n_ch * T) * 4), *xb = hs_malloc((size_t)(n_ch * T) * 4);
        memcpy(xa, x, (size_t)(n_ch * T) * 4);
        memcpy(xb, x, (size_t)(n_ch * T) * 4);
        for (int64_t t = 0; t < T; t++) {
            s->conv1d_step(xa + t * n_ch, sa, xa + t * n_ch, w, n_ch, kc, c0, c1);
            v->conv1d_step(xb + t * n_ch, sb, xb + t * n_ch, w, n_ch, kc, c0, c1);
        }
        if (!act_same(xa, xb, n_ch * T) || !act_same(sa, sb, (kc - 1) * n_ch)) {
            bad++;
            cr_log_error("%s conv1d_step k_conv=%ld", variant, (long)kc);
        }
        hs_free(w); hs_free(x); hs_free(sa); hs_free(sb); hs_free(xa); hs_free(xb);
    }
    cr_assert_eq(bad, 0, "%s: %d elementwise kernels differ from scalar", variant, bad);
}

Test(kern_simd_ffn, avx2_equals_scalar) { act_check("avx2"); }
Test(kern_simd_ffn, avx512_equals_scalar) { act_check("avx512"); }

Test(kern_simd_ffn, scalar_table_uses_the_references)
{
    const struct kern_ops *s = kern_ops_for("scalar");
    cr_assert(s->swiglu == kern_swiglu && s->sigmoid_mul == kern_sigmoid_mul && s->gated_scale == kern_gated_scale &&
              s->conv1d_step == kern_conv1d_step);
}
