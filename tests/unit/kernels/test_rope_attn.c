/* Tests of rope.c and attn.c against double precision; head ranges and causality exact. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"

static uint64_t ra_rng = 9;
static float ra_rand(void)
{
    ra_rng = ra_rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(ra_rng >> 40) / 16777216.0) * 2.0f - 1.0f;
}

Test(kern_rope, table_vs_double)
{
    const int64_t pos[] = {0, 1, 17, 4095, 262143};
    float cs[64];
    for (size_t p = 0; p < 5; p++) {
        kern_rope_table(cs, 64, 1e7, pos[p]);
        for (int i = 0; i < 32; i++) {
            double phi = (double)pos[p] / pow(1e7, (2.0 * i) / 64.0);
            cr_assert(fabs(cs[2 * i] - cos(phi)) <= 1e-7, "pos %ld i %d cos", (long)pos[p], i);
            cr_assert(fabs(cs[2 * i + 1] - sin(phi)) <= 1e-7, "pos %ld i %d sin", (long)pos[p], i);
        }
    }
    kern_rope_table(cs, 64, 1e7, 0);
    for (int i = 0; i < 32; i++) cr_assert(cs[2 * i] == 1.0f && cs[2 * i + 1] == 0.0f);
}

Test(kern_rope, apply_partial_neox)
{
    /* 3 heads of hd 256 at stride 512, n_rot 64: dims 64.. and the gap untouched */
    static float x[1536], x0[1536], x2[1536];
    for (int i = 0; i < 1536; i++) x0[i] = x[i] = x2[i] = ra_rand();
    float cs[64];
    int64_t pos = 1234;
    kern_rope_table(cs, 64, 1e7, pos);
    kern_rope_apply(x, 512, 64, cs, 0, 3);
    for (int h = 0; h < 3; h++) {
        const float *a = x0 + 512 * h;
        for (int i = 0; i < 32; i++) {
            double phi = (double)pos / pow(1e7, (2.0 * i) / 64.0);
            double r0 = a[i] * cos(phi) - a[i + 32] * sin(phi), r1 = a[i + 32] * cos(phi) + a[i] * sin(phi);
            cr_assert(fabs(x[512 * h + i] - r0) <= 1e-6, "h %d i %d", h, i);
            cr_assert(fabs(x[512 * h + i + 32] - r1) <= 1e-6, "h %d i %d", h, i + 32);
        }
        cr_assert_eq(memcmp(x + 512 * h + 64, a + 64, (512 - 64) * 4), 0, "head %d tail touched", h);
    }
    kern_rope_apply(x2, 512, 64, cs, 1, 3);
    kern_rope_apply(x2, 512, 64, cs, 0, 1);
    cr_assert_eq(memcmp(x, x2, sizeof(x)), 0);
    /* position 0 is the identity */
    memcpy(x2, x0, sizeof(x0));
    kern_rope_table(cs, 64, 1e7, 0);
    kern_rope_apply(x2, 512, 64, cs, 0, 3);
    cr_assert_eq(memcmp(x2, x0, sizeof(x0)), 0);
}

/* double reference of one query head */
static void attn_ref(double *o, const float *q, const float *kc, const float *vc, int64_t ld,
                     int64_t n_pos, int64_t hd, int64_t m, double scale)
{
    double s[64], mx = -1e300, sum = 0;
    for (int64_t t = 0; t < n_pos; t++) {
        double d = 0;
        for (int64_t i = 0; i < hd; i++) d += (double)q[i] * kc[t * ld + m * hd + i];
        s[t] = d * scale;
        mx = fmax(mx, s[t]);
    }
    for (int64_t t = 0; t < n_pos; t++) { s[t] = exp(s[t] - mx); sum += s[t]; }
    for (int64_t i = 0; i < hd; i++) {
        double a = 0;
        for (int64_t t = 0; t < n_pos; t++) a += s[t] * vc[t * ld + m * hd + i];
        o[i] = a / sum;
    }
}

Test(kern_attn, gqa_vs_double_ranges_causal)
{
    const int64_t nh = 6, nkv = 2, hd = 64, ld = nkv * hd + 5, maxpos = 40;
    float *q = hs_malloc(nh * hd * 4), *kc = hs_malloc(maxpos * ld * 4), *vc = hs_malloc(maxpos * ld * 4);
    float *out = hs_malloc(nh * hd * 4), *out2 = hs_malloc(nh * hd * 4), scratch[64];
    for (int64_t i = 0; i < nh * hd; i++) q[i] = 2.0f * ra_rand();
    for (int64_t i = 0; i < maxpos * ld; i++) { kc[i] = 2.0f * ra_rand(); vc[i] = ra_rand(); }
    float scale = 1.0f / 8.0f;
    const int64_t npos[] = {1, 2, 13, 39};
    for (size_t c = 0; c < 4; c++) {
        int64_t n = npos[c];
        kern_attn(out, q, kc, vc, ld, n, hd, nh, nkv, scale, scratch, 0, nh);
        for (int64_t j = 0; j < nh; j++) {
            double ref[64];
            attn_ref(ref, q + j * hd, kc, vc, ld, n, hd, j / (nh / nkv), scale);
            for (int64_t i = 0; i < hd; i++)
                cr_assert(fabs(out[j * hd + i] - ref[i]) <= 1e-5, "n %ld head %ld i %ld: %.9g vs %.9g",
                          (long)n, (long)j, (long)i, out[j * hd + i], ref[i]);
        }
        /* heads split over "threads" give the same bits */
        kern_attn(out2, q, kc, vc, ld, n, hd, nh, nkv, scale, scratch, 4, nh);
        kern_attn(out2, q, kc, vc, ld, n, hd, nh, nkv, scale, scratch, 0, 4);
        cr_assert_eq(memcmp(out, out2, nh * hd * 4), 0);
        /* positions at or after n_pos are never read: poison them */
        float *kp = hs_malloc(maxpos * ld * 4), *vp = hs_malloc(maxpos * ld * 4);
        memcpy(kp, kc, maxpos * ld * 4);
        memcpy(vp, vc, maxpos * ld * 4);
        for (int64_t i = n * ld; i < maxpos * ld; i++) kp[i] = vp[i] = NAN;
        kern_attn(out2, q, kp, vp, ld, n, hd, nh, nkv, scale, scratch, 0, nh);
        cr_assert_eq(memcmp(out, out2, nh * hd * 4), 0);
        hs_free(kp); hs_free(vp);
    }
    /* one key: the output is that key's value exactly */
    kern_attn(out, q, kc, vc, ld, 1, hd, nh, nkv, scale, scratch, 0, nh);
    for (int64_t j = 0; j < nh; j++) cr_assert_eq(memcmp(out + j * hd, vc + (j / 3) * hd, hd * 4), 0);
    hs_free(q); hs_free(kc); hs_free(vc); hs_free(out); hs_free(out2);
}

/* The documented order, restated: equal bits pin the contract for SIMD variants. */
Test(kern_attn, equals_documented_order)
{
    const int64_t nh = 2, nkv = 1, hd = 40, n = 9;
    float q[80], kc[360], vc[360], out[80], sc[16];
    for (int i = 0; i < 80; i++) q[i] = ra_rand();
    for (int i = 0; i < 360; i++) { kc[i] = ra_rand(); vc[i] = ra_rand(); }
    kern_attn(out, q, kc, vc, hd, n, hd, nh, nkv, 0.3f, sc, 0, nh);
    for (int64_t j = 0; j < nh; j++) {
        float s[9], m = 0.0f, sum = 0.0f, o[40];
        for (int64_t t = 0; t < n; t++) {
            s[t] = kern_dot(q + j * hd, kc + t * hd, hd) * 0.3f;
            if (t == 0 || s[t] > m) m = s[t];
        }
        for (int64_t t = 0; t < n; t++) { s[t] = expf(s[t] - m); sum = sum + s[t]; }
        for (int64_t d = 0; d < hd; d++) {
            o[d] = 0.0f;
            for (int64_t t = 0; t < n; t++) o[d] = fmaf(s[t], vc[t * hd + d], o[d]);
            o[d] = o[d] / sum;
        }
        cr_assert_eq(memcmp(out + j * hd, o, sizeof(o)), 0, "head %ld", (long)j);
    }
}
