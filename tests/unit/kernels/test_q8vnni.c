/* Tests of the AVX512-VNNI Q8_0 paths of matmul_avx512.c (note 7 there), and of the AVX2
 * Q8_0 paths of matmul_avx2.c (notes 4 and 7 there: the per-row tiles with prefetch, the
 * 8-row panel path), with the same cases plus shapes around 8-row groups. The single-token
 * path (16-block groups + the per-block tail) and the panel path (16-row groups repacked,
 * 2 x 6 register tiles, leftover rows and tokens), each bit-identical to the scalar
 * reference, over row counts that give 0, 1, 2 and 3 full groups plus leftovers, token
 * counts across every tile remainder, K from one block to V_KMAX and past it (the old code
 * path), row ranges that start off a group boundary, extreme scales and quants (-128 in
 * the weights, +-127 activations, zero blocks, negative and subnormal f16 scales). */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "unit/cpu_level.h"

static uint64_t qv_rng;
static uint64_t qv_next(void)
{
    uint64_t z = (qv_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint8_t *qv_weights(int64_t rows, int64_t k)
{
    size_t rb = (size_t)(k / 32) * 34;
    uint8_t *w = hs_malloc((size_t)rows * rb);
    for (size_t i = 0; i < (size_t)rows * rb; i++) w[i] = (uint8_t)qv_next();
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < k / 32; b++) {
            uint64_t u = qv_next();
            /* mostly normal scales of both signs, some subnormal, some tiny/zero */
            uint16_t h = (uint16_t)(0x0c00 + u % 0x3000);
            if (u % 13 == 0) h = (uint16_t)(u % 0x0400);
            if (u % 7 == 0) h |= 0x8000;
            uint8_t *blk = w + r * rb + b * 34;
            blk[0] = (uint8_t)h;
            blk[1] = (uint8_t)(h >> 8);
            if (u % 11 == 0) memset(blk + 2, 0x80, 32); /* all -128 */
        }
    return w;
}

static float *qv_acts(int64_t n)
{
    float *x = hs_malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        uint64_t u = qv_next();
        x[i] = ldexpf((float)((double)(u >> 11) / 9007199254740992.0) * 2.0f - 1.0f, (int)(u % 9) - 4);
    }
    for (int64_t i = 0; i + 32 <= n; i += 32 * 5) memset(x + i, 0, 32 * sizeof(float)); /* zero blocks */
    return x;
}

static void qv_case(const struct kern_ops *v, int64_t rows, int64_t k, int64_t n_tok, int64_t r0, int64_t r1,
                    int *bad, int *calls)
{
    uint8_t *w = qv_weights(rows, k);
    float *x = qv_acts(n_tok * k);
    struct kern_q8_block *xq = hs_malloc((size_t)(n_tok * (k / 32)) * sizeof(*xq));
    kern_q8_quantize(xq, x, n_tok, k);
    int64_t y_ld = rows + 2;
    float *a = hs_malloc((size_t)(n_tok * y_ld) * sizeof(float));
    float *b = hs_malloc((size_t)(n_tok * y_ld) * sizeof(float));
    for (int64_t i = 0; i < n_tok * y_ld; i++) a[i] = b[i] = -7.25f; /* sentinels */
    kern_matmul(a, y_ld, w, KERN_W_Q8_0, x, xq, n_tok, k, r0, r1);
    v->matmul(b, y_ld, w, KERN_W_Q8_0, x, xq, n_tok, k, r0, r1);
    (*calls)++;
    if (memcmp(a, b, (size_t)(n_tok * y_ld) * sizeof(float))) {
        if (!*bad)
            for (int64_t i = 0; i < n_tok * y_ld; i++)
                if (memcmp(a + i, b + i, 4)) {
                    cr_log_error("rows %ld K %ld T %ld [%ld,%ld): first diff t=%ld r=%ld: %a vs %a", (long)rows,
                                 (long)k, (long)n_tok, (long)r0, (long)r1, (long)(i / y_ld), (long)(i % y_ld),
                                 a[i], b[i]);
                    break;
                }
        (*bad)++;
    }
    hs_free(w);
    hs_free(x);
    hs_free(xq);
    hs_free(a);
    hs_free(b);
}

Test(kern_q8vnni, single_token_groups_and_tails)
{
    const struct kern_ops *v = cpu_level_ops_or_skip("avx512");
    static const int64_t ks[] = {32, 256, 480, 512, 544, 1024, 3584, 8192, 8224};
    int bad = 0, calls = 0;
    qv_rng = 1;
    for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); i++) {
        qv_case(v, 5, ks[i], 1, 0, 5, &bad, &calls);
        qv_case(v, 40, ks[i], 1, 3, 37, &bad, &calls);
    }
    cr_assert_eq(bad, 0, "%d of %d single-token calls differ from scalar", bad, calls);
}

Test(kern_q8vnni, panel_rows_tokens_and_ranges)
{
    const struct kern_ops *v = cpu_level_ops_or_skip("avx512");
    static const int64_t rows[] = {15, 16, 33, 50, 64};
    static const int64_t toks[] = {2, 5, 6, 7, 12, 13, 19};
    static const int64_t ks[] = {32, 96, 512, 1056};
    int bad = 0, calls = 0;
    qv_rng = 2;
    for (size_t ri = 0; ri < sizeof(rows) / sizeof(rows[0]); ri++)
        for (size_t ti = 0; ti < sizeof(toks) / sizeof(toks[0]); ti++)
            for (size_t ki = 0; ki < sizeof(ks) / sizeof(ks[0]); ki++) {
                int64_t n = rows[ri];
                qv_case(v, n, ks[ki], toks[ti], 0, n, &bad, &calls);
                if (n > 20) qv_case(v, n, ks[ki], toks[ti], 3, n - 1, &bad, &calls);
            }
    cr_assert_eq(bad, 0, "%d of %d panel calls differ from scalar", bad, calls);
}

Test(kern_q8vnni, panel_large_k_and_many_groups)
{
    const struct kern_ops *v = cpu_level_ops_or_skip("avx512");
    int bad = 0, calls = 0;
    qv_rng = 3;
    qv_case(v, 20, 8192, 3, 0, 20, &bad, &calls);   /* one group fills the panel */
    qv_case(v, 20, 8224, 3, 0, 20, &bad, &calls);   /* past V_KMAX: the per-block code */
    qv_case(v, 300, 1024, 7, 5, 299, &bad, &calls); /* several panels */
    qv_case(v, 48, 3584, 9, 0, 48, &bad, &calls);
    cr_assert_eq(bad, 0, "%d of %d calls differ from scalar", bad, calls);
}

/* ---- AVX2 (and the same source built for AVX-VNNI, matmul_avxvnni.c): per-row tiles below
 * QP_MIN_TOKS (3) tokens, 8-row panels from there ---------------------------------------- */

static void q8avx2_few_tokens_rows_and_tails(const char *variant)
{
    const struct kern_ops *v = cpu_level_ops_or_skip(variant);
    static const int64_t ks[] = {32, 256, 480, 544, 1024, 3584, 8192, 8224};
    int bad = 0, calls = 0;
    qv_rng = 11;
    for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); i++)
        for (int64_t t = 1; t <= 3; t++) {
            qv_case(v, 5, ks[i], t, 0, 5, &bad, &calls);
            qv_case(v, 40, ks[i], t, 3, 37, &bad, &calls);
        }
    cr_assert_eq(bad, 0, "%d of %d few-token calls differ from scalar", bad, calls);
}
Test(kern_q8avx2, few_tokens_rows_and_tails) { q8avx2_few_tokens_rows_and_tails("avx2"); }
Test(kern_q8avx2, avxvnni_few_tokens_rows_and_tails) { q8avx2_few_tokens_rows_and_tails("avxvnni"); }

static void q8avx2_panel_rows_tokens_and_ranges(const char *variant)
{
    const struct kern_ops *v = cpu_level_ops_or_skip(variant);
    static const int64_t rows[] = {7, 8, 9, 15, 16, 17, 33, 64};
    static const int64_t toks[] = {3, 4, 5, 6, 7, 8, 9, 13, 19};
    static const int64_t ks[] = {32, 96, 288, 1056};
    int bad = 0, calls = 0;
    qv_rng = 12;
    for (size_t ri = 0; ri < sizeof(rows) / sizeof(rows[0]); ri++)
        for (size_t ti = 0; ti < sizeof(toks) / sizeof(toks[0]); ti++)
            for (size_t ki = 0; ki < sizeof(ks) / sizeof(ks[0]); ki++) {
                int64_t n = rows[ri];
                qv_case(v, n, ks[ki], toks[ti], 0, n, &bad, &calls);
                if (n > 12) qv_case(v, n, ks[ki], toks[ti], 3, n - 1, &bad, &calls);
            }
    cr_assert_eq(bad, 0, "%d of %d panel calls differ from scalar", bad, calls);
}
Test(kern_q8avx2, panel_rows_tokens_and_ranges) { q8avx2_panel_rows_tokens_and_ranges("avx2"); }
Test(kern_q8avx2, avxvnni_panel_rows_tokens_and_ranges) { q8avx2_panel_rows_tokens_and_ranges("avxvnni"); }

static void q8avx2_panel_large_k_and_many_groups(const char *variant)
{
    const struct kern_ops *v = cpu_level_ops_or_skip(variant);
    int bad = 0, calls = 0;
    qv_rng = 13;
    qv_case(v, 20, 8192, 5, 0, 20, &bad, &calls);   /* two groups, two panels (one group each) */
    qv_case(v, 20, 8224, 5, 0, 20, &bad, &calls);   /* past the panel's K: the per-row tiles */
    qv_case(v, 300, 1024, 7, 5, 299, &bad, &calls); /* several panels */
    qv_case(v, 48, 3584, 9, 0, 48, &bad, &calls);
    cr_assert_eq(bad, 0, "%d of %d calls differ from scalar", bad, calls);
}
Test(kern_q8avx2, panel_large_k_and_many_groups) { q8avx2_panel_large_k_and_many_groups("avx2"); }
Test(kern_q8avx2, avxvnni_panel_large_k_and_many_groups) { q8avx2_panel_large_k_and_many_groups("avxvnni"); }
