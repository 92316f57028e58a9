/* Tests of the SIMD kernel variants (matmul_avx2.c, matmul_avx512.c) and dispatch.c: every
 * variant equals the scalar reference bit for bit (memcmp of whole output buffers, stride
 * gaps included) for f32/f16/bf16/Q8_0 weights, batch sizes 1..67, row ranges, K with and
 * without a tail chunk, signed zeros, subnormals and infinities; the Q8_0 quantizer and
 * kern_dot likewise. A variant the CPU lacks is skipped, with a message saying so. */
#include <criterion/criterion.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "kernels/kernels.h"
#include "unit/cpu_level.h"

static uint64_t simd_rng;
static void simd_seed(uint64_t s) { simd_rng = s * 0x9E3779B97F4A7C15ull + 7; }
static uint64_t simd_next(void)
{
    uint64_t z = (simd_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
/* Uniform in [-1, 1) times 2^e, e in [-6, 6]: varied magnitudes, so a sum in another order
 * rounds differently (simd_order_sensitive checks that the data can tell orders apart). */
static float simd_val(void)
{
    float u = (float)((double)(simd_next() >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
    return ldexpf(u, (int)(simd_next() % 13) - 6);
}

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

/* ---- variants --------------------------------------------------------------------------- */

static const struct kern_ops *scalar_ops(void) { return kern_ops_for("scalar"); }

/* ---- data ------------------------------------------------------------------------------- */

/* A random [rows, k] matrix of type t. Q8_0 quants cover -128..127, scales are signed and
 * include f16 subnormals and zero. */
static uint8_t *simd_weights(enum kern_wtype t, int64_t rows, int64_t k)
{
    size_t rb = kern_row_bytes(t, k);
    uint8_t *w = hs_malloc(rb * (size_t)rows);
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *row = w + rb * (size_t)r;
        for (int64_t i = 0; t != KERN_W_Q8_0 && i < k; i++) {
            float f = simd_val();
            if (t == KERN_W_F32) memcpy(row + 4 * i, &f, 4);
            else if (t == KERN_W_F16) put16(row + 2 * i, hs_f32_to_f16(f));
            else put16(row + 2 * i, hs_f32_to_bf16(f));
        }
        for (int64_t b = 0; t == KERN_W_Q8_0 && b < k / 32; b++) {
            uint8_t *blk = row + 34 * b;
            uint64_t kind = simd_next() % 16;
            uint16_t d = hs_f32_to_f16(ldexpf(simd_val(), -4));
            if (kind == 0) d = (uint16_t)(simd_next() % 0x400) | (simd_next() % 2 ? 0x8000 : 0); /* subnormal */
            if (kind == 1) d = 0;
            put16(blk, d);
            for (int i = 0; i < 32; i++) blk[2 + i] = (uint8_t)simd_next();
        }
    }
    return w;
}

static float *simd_vec(int64_t n)
{
    float *x = hs_malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = simd_val();
    return x;
}

/* A y buffer of n_tok rows of y_ld floats, every float the same NaN sentinel. */
static float *simd_ybuf(int64_t n_tok, int64_t y_ld)
{
    float *y = hs_malloc((size_t)(n_tok * y_ld) * sizeof(float));
    uint32_t s = 0x7fc0dead;
    for (int64_t i = 0; i < n_tok * y_ld; i++) memcpy(y + i, &s, 4);
    return y;
}

/* Run matmul of scalar and `ops` on the same inputs and compare whole y buffers; returns
 * the number of mismatching calls (0 expected). */
static int simd_cmp_matmul(const struct kern_ops *ops, const uint8_t *w, enum kern_wtype wt,
                           const float *x, int64_t n_tok, int64_t k, int64_t rows, int64_t r0,
                           int64_t r1)
{
    struct kern_q8_block *xq = NULL;
    if (wt == KERN_W_Q8_0) {
        xq = hs_malloc((size_t)(n_tok * (k / 32)) * sizeof(*xq));
        kern_q8_quantize(xq, x, n_tok, k);
    }
    int64_t y_ld = rows + 3;
    float *ya = simd_ybuf(n_tok, y_ld), *yb = simd_ybuf(n_tok, y_ld);
    scalar_ops()->matmul(ya, y_ld, w, wt, x, xq, n_tok, k, r0, r1);
    ops->matmul(yb, y_ld, w, wt, x, xq, n_tok, k, r0, r1);
    int bad = memcmp(ya, yb, (size_t)(n_tok * y_ld) * sizeof(float)) != 0;
    if (bad) {
        for (int64_t i = 0; i < n_tok * y_ld; i++)
            if (memcmp(ya + i, yb + i, 4)) {
                cr_log_error("%s wt=%d T=%ld K=%ld rows [%ld,%ld): first diff at t=%ld r=%ld: %a vs %a",
                             ops->name, (int)wt, (long)n_tok, (long)k, (long)r0, (long)r1,
                             (long)(i / y_ld), (long)(i % y_ld), ya[i], yb[i]);
                break;
            }
    }
    free(ya);
    free(yb);
    free(xq);
    return bad;
}

/* The matmul sweep of one weight type: every T in 1..67 (K = 4128 / 4131: a few T), full and
 * partial row ranges, K with and without a tail chunk. The scalar runs once per K on all 67
 * tokens and rows; each variant call is compared with the slice it writes (the scalar's
 * batch and row-range invariance is test_matmul.c's), sentinels elsewhere, whole buffers. */
static void simd_matmul_sweep(const char *variant, enum kern_wtype wt)
{
    const struct kern_ops *ops = cpu_level_ops_or_skip(variant);
    static const int64_t ks_float[] = {1, 5, 31, 32, 33, 63, 64, 96, 100, 4128, 4131};
    static const int64_t ks_q8[] = {32, 64, 96, 224, 256, 288, 544, 4128};
    const int64_t *ks = wt == KERN_W_Q8_0 ? ks_q8 : ks_float;
    size_t n_k = wt == KERN_W_Q8_0 ? sizeof(ks_q8) / sizeof(ks_q8[0]) : sizeof(ks_float) / sizeof(ks_float[0]);
    const int64_t rows = 9, y_ld = rows + 3, n_tok = 67;
    int calls = 0, bad = 0;
    simd_seed(100 + (uint64_t)wt);
    for (size_t ki = 0; ki < n_k; ki++) {
        int64_t k = ks[ki];
        uint8_t *w = simd_weights(wt, rows, k);
        float *x = simd_vec(n_tok * k);
        struct kern_q8_block *xq = NULL;
        if (wt == KERN_W_Q8_0) {
            xq = hs_malloc((size_t)(n_tok * (k / 32)) * sizeof(*xq));
            kern_q8_quantize(xq, x, n_tok, k);
        }
        float *ref = simd_ybuf(n_tok, rows);
        scalar_ops()->matmul(ref, rows, w, wt, x, xq, n_tok, k, 0, rows);
        float *want = simd_ybuf(n_tok, y_ld), *got = simd_ybuf(n_tok, y_ld);
        for (int64_t t = 1; t <= n_tok; t++) {
            if (k > 1000 && t != 1 && t != 2 && t != 7 && t != 13 && t != n_tok) continue;
            for (int part = 0; part < 2; part++) {
                int64_t r0 = part ? 1 + t % 3 : 0, r1 = part ? rows - t % 2 : rows;
                float *fresh = simd_ybuf(n_tok, y_ld);
                memcpy(want, fresh, (size_t)(n_tok * y_ld) * sizeof(float));
                memcpy(got, fresh, (size_t)(n_tok * y_ld) * sizeof(float));
                free(fresh);
                for (int64_t i = 0; i < t; i++)
                    memcpy(want + i * y_ld + r0, ref + i * rows + r0, (size_t)(r1 - r0) * sizeof(float));
                ops->matmul(got, y_ld, w, wt, x, xq, t, k, r0, r1);
                calls++;
                if (memcmp(want, got, (size_t)(n_tok * y_ld) * sizeof(float)) == 0) continue;
                if (!bad)
                    for (int64_t i = 0; i < n_tok * y_ld; i++)
                        if (memcmp(want + i, got + i, 4)) {
                            cr_log_error("%s wt=%d T=%ld K=%ld rows [%ld,%ld): first diff at t=%ld r=%ld: %a vs %a",
                                         variant, (int)wt, (long)t, (long)k, (long)r0, (long)r1,
                                         (long)(i / y_ld), (long)(i % y_ld), want[i], got[i]);
                            break;
                        }
                bad++;
            }
        }
        free(ref);
        free(want);
        free(got);
        free(xq);
        free(w);
        free(x);
    }
    cr_assert_eq(bad, 0, "%s: %d of %d matmul calls differ from scalar", variant, bad, calls);
}

/* ---- dispatch --------------------------------------------------------------------------- */

Test(kern_simd_dispatch, table_names)
{
    const struct kern_ops *s = kern_ops_for("scalar");
    cr_assert_not_null(s);
    cr_assert_str_eq(s->name, "scalar");
    cr_assert(s->matmul == kern_matmul && s->q8_quantize == kern_q8_quantize && s->dot == kern_dot);
    cr_assert_null(kern_ops_for("avx3"));
    cr_assert_null(kern_ops_for(""));
    cr_assert_null(kern_ops_for(NULL));
    cr_assert_null(kern_ops_for("AVX2"));
#if defined(__x86_64__) || defined(__i386__)
    cr_assert_str_eq(kern_ops_for("avx2")->name, "avx2");
    cr_assert_str_eq(kern_ops_for("avx512")->name, "avx512");
    cr_assert(kern_ops_for("avx2")->matmul == kern_matmul_avx2);
    cr_assert(kern_ops_for("avx512")->dot == kern_dot_avx512);
#endif
}

/* dispatch.c fills the tables with designated initializers: a member added to struct kern_ops
 * and not to a table would be NULL there, so every member of every table must be set. */
Test(kern_simd_dispatch, every_member_set)
{
    static const char *const names[] = {"scalar", "avx2", "avxvnni", "avx512vnni", "avx512"};
    int n_tables = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const struct kern_ops *o = kern_ops_for(names[i]);
        if (!o) continue; /* an x86 table in a build for another CPU family */
        n_tables++;
        cr_assert_str_eq(o->name, names[i]);
        cr_assert(o->matmul && o->q8_quantize && o->dot && o->attn && o->gdn_step && o->matmul_k &&
                      o->bf16_round && o->bf16_matmul && o->swiglu && o->sigmoid_mul && o->gated_scale &&
                      o->conv1d_step && o->attn_tokens && o->matmul_x && o->q8k_quantize,
                  "table %s has a NULL member", names[i]);
    }
    cr_assert_geq(n_tables, 1);
}

Test(kern_simd_dispatch, best_variant)
{
#if defined(__x86_64__) || defined(__i386__)
    /* (avx2_fma_f16c, avx_vnni, avx512_vnni, avx512_bf16) */
    cr_assert_str_eq(kern_best_variant(false, false, false, false), "scalar");
    cr_assert_str_eq(kern_best_variant(true, false, false, false), "avx2");
    cr_assert_str_eq(kern_best_variant(true, true, false, false), "avxvnni");
    cr_assert_str_eq(kern_best_variant(true, false, true, false), "avx512vnni");
    cr_assert_str_eq(kern_best_variant(true, true, true, false), "avx512vnni");
    cr_assert_str_eq(kern_best_variant(true, false, true, true), "avx512");
    cr_assert_str_eq(kern_best_variant(true, true, true, true), "avx512");
    /* BF16 without the rest of the set does not make an AVX-512 variant, nor AVX-VNNI
     * without AVX2 an avxvnni one */
    cr_assert_str_eq(kern_best_variant(true, false, false, true), "avx2");
    cr_assert_str_eq(kern_best_variant(false, true, false, false), "scalar");
    /* the BF16-less table differs from "avx512" in the two bf16 entries only */
    const struct kern_ops *a = kern_ops_for("avx512"), *v = kern_ops_for("avx512vnni");
    cr_assert(v->matmul == a->matmul && v->q8_quantize == a->q8_quantize && v->matmul_k == a->matmul_k);
    cr_assert(v->bf16_matmul == kern_bf16_matmul_avx512f && v->bf16_round == kern_bf16_round_avx2);
    /* the AVX-VNNI table is the AVX2 one but for its Q8_0 and Q4_K matmuls */
    const struct kern_ops *t2 = kern_ops_for("avx2"), *tv = kern_ops_for("avxvnni");
    cr_assert(tv->matmul == kern_matmul_avxvnni && tv->matmul_q8p == kern_matmul_q8p_avxvnni);
    cr_assert(tv->matmul_k == kern_matmul_k_avxvnni && tv->matmul_kp == kern_matmul_kp_avxvnni);
    cr_assert(tv->q8k_quantize == t2->q8k_quantize && tv->attn == t2->attn &&
              tv->q8_quantize == t2->q8_quantize && tv->gdn_step == t2->gdn_step);
    /* who runs what: AVX-512 VNNI alone (Zen 4) does not run the VEX-encoded avxvnni table */
    cr_assert(kern_variant_runs("avxvnni", true, true, false, false));
    cr_assert(kern_variant_runs("avxvnni", true, true, true, true));
    cr_assert_not(kern_variant_runs("avxvnni", true, false, true, true));
    cr_assert(kern_variant_runs("avx2", true, false, true, true));
    cr_assert(kern_variant_runs("avx512vnni", true, false, true, true));
    cr_assert_not(kern_variant_runs("avx512vnni", true, true, false, false));
    cr_assert_not(kern_variant_runs("avx512", true, false, true, false));
    cr_assert(kern_variant_runs("scalar", false, false, false, false));
    cr_assert_not(kern_variant_runs("sse9", true, true, true, true));
    cr_assert_not(kern_variant_runs(NULL, true, true, true, true));
#else
    cr_assert_str_eq(kern_best_variant(true, true, true, true), "scalar");
    cr_assert_not(kern_variant_runs("avx2", true, true, true, true));
#endif
    /* every answer names a table */
    cr_assert_not_null(kern_ops_for(kern_best_variant(true, true, true, true)));
    cr_assert_not_null(kern_ops_for(kern_best_variant(true, false, true, false)));
    cr_assert_not_null(kern_ops_for(kern_best_variant(true, true, false, false)));
    cr_assert_not_null(kern_ops_for(kern_best_variant(true, false, false, false)));
}

/* The test data can tell accumulation orders apart: a plain sequential sum over k differs
 * from the 32-lane order in some output, so an order bug in a variant would show. */
Test(kern_simd_dispatch, order_sensitive)
{
    simd_seed(5);
    int64_t k = 4128, n_diff = 0;
    for (int r = 0; r < 16; r++) {
        float *a = simd_vec(k), *b = simd_vec(k);
        float seq = 0.0f;
        for (int64_t i = 0; i < k; i++) seq = fmaf(a[i], b[i], seq);
        float lanes = kern_dot(a, b, k);
        n_diff += memcmp(&seq, &lanes, 4) != 0;
        free(a);
        free(b);
    }
    cr_assert_gt(n_diff, 8, "only %ld of 16 dots tell the orders apart", (long)n_diff);
}

/* ---- per-variant tests ------------------------------------------------------------------ */

static void simd_dot(const char *variant)
{
    const struct kern_ops *ops = cpu_level_ops_or_skip(variant);
    simd_seed(11);
    int bad = 0, n_calls = 0;
    for (int64_t n = 1; n <= 4131; n = n < 130 ? n + 1 : n + 1000) {
        float *a = simd_vec(n), *b = simd_vec(n);
        float r0 = scalar_ops()->dot(a, b, n), r1 = ops->dot(a, b, n);
        bad += memcmp(&r0, &r1, 4) != 0;
        n_calls++;
        free(a);
        free(b);
    }
    cr_assert_eq(bad, 0, "%s: %d of %d dots differ", variant, bad, n_calls);
}

/* Quantizer inputs of every kind: random magnitudes, exact .5 ties (amax 127 gives d = 1),
 * an all-zero block, signed zeros, subnormals, NaN, +-inf. */
static void simd_quantize(const char *variant)
{
    const struct kern_ops *ops = cpu_level_ops_or_skip(variant);
    simd_seed(12);
    int bad = 0;
    for (int64_t k = 32; k <= 4128; k = k < 256 ? k + 32 : k + 3872) {
        for (int64_t n_tok = 1; n_tok <= 3; n_tok++) {
            int64_t n = n_tok * k, nb = n / 32;
            float *x = simd_vec(n);
            for (int64_t b = 0; b < nb; b++) {
                float *v = x + 32 * b;
                switch (b % 9) {
                case 1: v[0] = 127.0f; for (int i = 1; i < 32; i++) v[i] = (float)(i - 16) + 0.5f; break;
                case 2: for (int i = 0; i < 32; i++) v[i] = i % 2 ? -0.0f : 0.0f; break;
                case 3: for (int i = 0; i < 32; i++) v[i] = ldexpf(simd_val(), -130); break;
                case 4: v[b % 32] = NAN; break;
                case 5: v[(b + 3) % 32] = -INFINITY; break;
                case 6: v[5] = INFINITY; v[6] = -NAN; break;
                case 7: for (int i = 0; i < 32; i++) v[i] = NAN; break;
                case 8: v[31] = 254.0f; v[0] = 3.0f; v[1] = -1.0f; v[2] = 5.0f; break; /* d = 2 */
                default: break;
                }
            }
            struct kern_q8_block *qa = hs_malloc((size_t)nb * sizeof(*qa));
            struct kern_q8_block *qb = hs_malloc((size_t)nb * sizeof(*qb));
            memset(qa, 0x55, (size_t)nb * sizeof(*qa));
            memset(qb, 0x55, (size_t)nb * sizeof(*qb));
            scalar_ops()->q8_quantize(qa, x, n_tok, k);
            ops->q8_quantize(qb, x, n_tok, k);
            for (int64_t b = 0; b < nb; b++)
                if (memcmp(qa + b, qb + b, sizeof(*qa))) {
                    if (!bad) cr_log_error("%s: k=%ld block %ld differs (d %a vs %a)", variant, (long)k, (long)b, qa[b].d, qb[b].d);
                    bad++;
                }
            free(qa);
            free(qb);
            free(x);
        }
    }
    cr_assert_eq(bad, 0, "%s: %d quantized blocks differ", variant, bad);
}

/* A tail lane holding -0.0 must stay -0.0: every product underflows to -0 (k = 33, so lanes
 * 1..31 are outside the tail chunk), and the scalar result is -0.0. */
static void simd_negzero_tail(const char *variant)
{
    const struct kern_ops *ops = cpu_level_ops_or_skip(variant);
    static const enum kern_wtype types[] = {KERN_W_F32, KERN_W_F16, KERN_W_BF16};
    int bad = 0;
    for (size_t ti = 0; ti < 3; ti++) {
        enum kern_wtype wt = types[ti];
        for (int64_t k = 33; k <= 95; k += 31) {
            uint8_t *w = hs_malloc(kern_row_bytes(wt, k) * 2);
            float *x = hs_malloc((size_t)(3 * k) * sizeof(float));
            for (int64_t i = 0; i < 2 * k; i++) {
                float f = -0x1p-20f; /* exact in every type */
                if (wt == KERN_W_F32) memcpy(w + 4 * i, &f, 4);
                else put16(w + 2 * i, wt == KERN_W_F16 ? hs_f32_to_f16(f) : hs_f32_to_bf16(f));
            }
            for (int64_t i = 0; i < 3 * k; i++) x[i] = 0x1p-140f;
            float *y = simd_ybuf(3, 2);
            ops->matmul(y, 2, w, wt, x, NULL, 3, k, 0, 2);
            for (int i = 0; i < 6; i++) bad += !(y[i] == 0.0f && signbit(y[i]));
            float nx[96];
            for (int64_t i = 0; i < k; i++) nx[i] = -x[i];
            float d = ops->dot(nx, x, k);
            bad += !(d == 0.0f && signbit(d));
            bad += simd_cmp_matmul(ops, w, wt, x, 3, k, 2, 0, 2);
            free(y);
            free(w);
            free(x);
        }
    }
    cr_assert_eq(bad, 0, "%s: %d results lost the sign of zero", variant, bad);
}

/* Subnormal and infinite weights and inputs, signed zeros: the NaNs made on the way (inf *
 * 0, inf - inf) are the machine's default NaN in every variant, so memcmp still holds. */
static void simd_special(const char *variant)
{
    const struct kern_ops *ops = cpu_level_ops_or_skip(variant);
    static const enum kern_wtype types[] = {KERN_W_F32, KERN_W_F16, KERN_W_BF16};
    simd_seed(13);
    int bad = 0;
    for (size_t ti = 0; ti < 3; ti++) {
        enum kern_wtype wt = types[ti];
        int64_t k = 77, rows = 6;
        uint8_t *w = simd_weights(wt, rows, k);
        float *x = simd_vec(5 * k);
        size_t rb = kern_row_bytes(wt, k);
        for (int64_t i = 0; i < k; i++) {
            /* row 0: f16/bf16/f32 subnormals; row 1: one +inf; row 2: signed zeros */
            uint16_t sub = (uint16_t)(1 + simd_next() % 0x3ff) | (i % 2 ? 0x8000 : 0);
            if (wt == KERN_W_F32) { float f = ldexpf(simd_val(), -135); memcpy(w + 4 * i, &f, 4); }
            else put16(w + 2 * i, sub);
            if (wt == KERN_W_F32) memcpy(w + rb * 2 + 4 * i, &(float){i % 2 ? -0.0f : 0.0f}, 4);
            else put16(w + rb * 2 + 2 * i, i % 2 ? 0x8000 : 0);
        }
        if (wt == KERN_W_F32) memcpy(w + rb + 4 * 40, &(float){INFINITY}, 4);
        else put16(w + rb + 2 * 40, wt == KERN_W_F16 ? 0x7c00 : 0x7f80);
        for (int64_t t = 0; t < 5; t++) {
            x[t * k + 3] = -0.0f;
            x[t * k + 40] = t == 2 ? 0.0f : (t == 3 ? -INFINITY : x[t * k + 40]);
            x[t * k + 50] = ldexpf(1.0f, -149);
        }
        bad += simd_cmp_matmul(ops, w, wt, x, 5, k, rows, 0, rows);
        bad += simd_cmp_matmul(ops, w, wt, x, 1, k, rows, 0, rows);
        free(w);
        free(x);
    }
    cr_assert_eq(bad, 0, "%s: %d calls with special values differ", variant, bad);
}

/* Matrices wider than a row panel (PANEL_BYTES of weights, 256 KiB): several panels and a
 * partial last one, for each weight type, T = 1 and batched, full and partial row ranges. */
static void simd_panels(const char *variant)
{
    const struct kern_ops *ops = cpu_level_ops_or_skip(variant);
    static const struct { enum kern_wtype wt; int64_t k, rows; } cases[] = {
        {KERN_W_F32, 4128, 37}, {KERN_W_F16, 8224, 37}, {KERN_W_BF16, 8224, 33}, {KERN_W_Q8_0, 32000, 17},
    };
    simd_seed(14);
    int bad = 0;
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        enum kern_wtype wt = cases[c].wt;
        int64_t k = cases[c].k, rows = cases[c].rows;
        cr_assert_gt(kern_row_bytes(wt, k) * (size_t)rows, (size_t)2 * 256 * 1024);
        uint8_t *w = simd_weights(wt, rows, k);
        float *x = simd_vec(7 * k);
        bad += simd_cmp_matmul(ops, w, wt, x, 1, k, rows, 0, rows);
        bad += simd_cmp_matmul(ops, w, wt, x, 7, k, rows, 0, rows);
        bad += simd_cmp_matmul(ops, w, wt, x, 7, k, rows, 3, rows - 1);
        free(w);
        free(x);
    }
    cr_assert_eq(bad, 0, "%s: %d multi-panel calls differ", variant, bad);
}

/* The float tiles' block and tile edges (matmul_avx2.c notes 8 and 9: one-token tiles of 3
 * rows, 3 x 3 prefill tiles over blocks of 512 k with the partial sums parked): K just
 * under, at and over one and several blocks, with and without a tail chunk; rows that are
 * not a multiple of the tile; T = 1..9; full and partial row ranges; then the same calls
 * split over three threads (rows cut unevenly) against one call. */
struct simd_mm_job {
    const struct kern_ops *ops;
    float *y;
    const uint8_t *w;
    enum kern_wtype wt;
    const float *x;
    int64_t y_ld, n_tok, k, r0, r1;
};

static void *simd_mm_thread(void *p)
{
    struct simd_mm_job *j = p;
    j->ops->matmul(j->y, j->y_ld, j->w, j->wt, j->x, NULL, j->n_tok, j->k, j->r0, j->r1);
    return NULL;
}

/* Rows [0, rows) split at cut[1], cut[2] over three threads against one call, T = 1..9 in
 * steps of t_step: the threaded output must be memcmp-equal to the one call, which must
 * equal scalar; returns the calls that differ from scalar. */
static int simd_threaded_rows(const struct kern_ops *ops, const char *variant, const enum kern_wtype types[3],
                              int64_t rows, int64_t k, const int64_t cut[4], int64_t t_step)
{
    int bad = 0;
    for (size_t ti = 0; ti < 3; ti++) {
        uint8_t *w = simd_weights(types[ti], rows, k);
        float *x = simd_vec(9 * k);
        for (int64_t t = 1; t <= 9; t += t_step) {
            float *one = simd_ybuf(t, rows), *thr = simd_ybuf(t, rows);
            ops->matmul(one, rows, w, types[ti], x, NULL, t, k, 0, rows);
            pthread_t th[3];
            struct simd_mm_job jobs[3];
            for (int i = 0; i < 3; i++) {
                jobs[i] = (struct simd_mm_job){ops, thr, w, types[ti], x, rows, t, k, cut[i], cut[i + 1]};
                cr_assert_eq(pthread_create(&th[i], NULL, simd_mm_thread, &jobs[i]), 0);
            }
            for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
            cr_assert(memcmp(one, thr, (size_t)(t * rows) * sizeof(float)) == 0,
                      "%s wt=%d T=%ld: threaded rows differ", variant, (int)types[ti], (long)t);
            bad += simd_cmp_matmul(ops, w, types[ti], x, t, k, rows, 0, rows);
            free(one);
            free(thr);
        }
        free(w);
        free(x);
    }
    return bad;
}

static void simd_float_blocks(const char *variant)
{
    const struct kern_ops *ops = cpu_level_ops_or_skip(variant);
    static const enum kern_wtype types[] = {KERN_W_F32, KERN_W_F16, KERN_W_BF16};
    static const int64_t ks[] = {480, 511, 512, 513, 544, 1023, 1024, 1061, 1536, 1600, 2085};
    static const int64_t rows_set[] = {1, 2, 3, 4, 5, 7, 10};
    simd_seed(15);
    int bad = 0, calls = 0;
    for (size_t ti = 0; ti < 3; ti++)
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            int64_t k = ks[ki], rows = rows_set[(ki + ti) % (sizeof rows_set / sizeof rows_set[0])];
            uint8_t *w = simd_weights(types[ti], rows, k);
            float *x = simd_vec(9 * k);
            for (int64_t t = 1; t <= 9; t++) {
                bad += simd_cmp_matmul(ops, w, types[ti], x, t, k, rows, 0, rows);
                calls++;
                if (rows > 2) {
                    bad += simd_cmp_matmul(ops, w, types[ti], x, t, k, rows, 1, rows - (t % 2));
                    calls++;
                }
            }
            free(w);
            free(x);
        }
    cr_assert_eq(bad, 0, "%s: %d of %d calls differ from scalar", variant, bad, calls);

    /* threads: rows [0, 5), [5, 22), [22, 37) on three threads against one call, T = 1..9 */
    const int64_t cut[4] = {0, 5, 22, 37};
    bad = simd_threaded_rows(ops, variant, types, 37, 1061, cut, 1);
    cr_assert_eq(bad, 0, "%s: %d threaded-shape calls differ from scalar", variant, bad);
}

/* The batched float path's row groups (matmul_avx2.c note 10: K above 1024, groups of 24
 * rows in panels, 3-row tiles then single rows, 4-token tiles then single tokens): row
 * counts over several groups and panels with leftovers, partial row ranges that start and
 * end inside a tile and a group, K around the 512-k block and the 32-lane tail, T 1..9;
 * then the rows split over three threads at cuts inside groups against one call. */
static void simd_float_groups(const char *variant)
{
    const struct kern_ops *ops = cpu_level_ops_or_skip(variant);
    static const enum kern_wtype types[] = {KERN_W_F32, KERN_W_F16, KERN_W_BF16};
    static const int64_t ks[] = {1025, 1056, 2048, 2085, 3584, 3615};
    static const int64_t rows_set[] = {50, 77, 100};
    simd_seed(16);
    int bad = 0, calls = 0;
    for (size_t ti = 0; ti < 3; ti++)
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            int64_t k = ks[ki], rows = rows_set[(ki + ti) % 3];
            uint8_t *w = simd_weights(types[ti], rows, k);
            float *x = simd_vec(9 * k);
            for (int64_t t = 1; t <= 9; t++) {
                if (t == 2 || t == 6) continue; /* (time) */
                bad += simd_cmp_matmul(ops, w, types[ti], x, t, k, rows, 0, rows);
                bad += simd_cmp_matmul(ops, w, types[ti], x, t, k, rows, 1 + t % 3, rows - 1 - t % 4);
                bad += simd_cmp_matmul(ops, w, types[ti], x, t, k, rows, 25, 49);
                calls += 3;
            }
            free(w);
            free(x);
        }
    cr_assert_eq(bad, 0, "%s: %d of %d calls differ from scalar", variant, bad, calls);

    const int64_t cut[4] = {0, 13, 62, 101};
    bad = simd_threaded_rows(ops, variant, types, 101, 2085, cut, 2);
    cr_assert_eq(bad, 0, "%s: %d threaded-shape calls differ from scalar", variant, bad);
}

#define SIMD_TESTS(V)                                                                 \
    Test(kern_simd_##V, matmul_f32) { simd_matmul_sweep(#V, KERN_W_F32); }            \
    Test(kern_simd_##V, matmul_f16) { simd_matmul_sweep(#V, KERN_W_F16); }            \
    Test(kern_simd_##V, matmul_bf16) { simd_matmul_sweep(#V, KERN_W_BF16); }          \
    Test(kern_simd_##V, matmul_q8_0) { simd_matmul_sweep(#V, KERN_W_Q8_0); }          \
    Test(kern_simd_##V, dot) { simd_dot(#V); }                                        \
    Test(kern_simd_##V, q8_quantize) { simd_quantize(#V); }                           \
    Test(kern_simd_##V, negzero_tail) { simd_negzero_tail(#V); }                      \
    Test(kern_simd_##V, special_values) { simd_special(#V); }                         \
    Test(kern_simd_##V, matmul_panels) { simd_panels(#V); }                           \
    Test(kern_simd_##V, matmul_float_blocks) { simd_float_blocks(#V); }               \
    Test(kern_simd_##V, matmul_float_groups) { simd_float_groups(#V); }

SIMD_TESTS(avx2)
SIMD_TESTS(avxvnni)
SIMD_TESTS(avx512)
