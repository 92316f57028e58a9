/* kp_case.h — what the tests of the K-quant row-group layouts (test_q4kp.c, test_q6kp.c)
 * share: a seeded generator, activations with zero and saturated blocks, the pack (checking
 * that it writes every byte), and one matmul_kp call split into pieces compared with the
 * scalar kern_matmul_k on the rows. Each file makes its own type's weights. */
#ifndef HS_TEST_KP_CASE_H
#define HS_TEST_KP_CASE_H

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "unit/cpu_level.h"

static uint64_t kp_rng;
static inline uint64_t kp_next(void)
{
    uint64_t z = (kp_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* n activations of mixed magnitude; every third 256-block zero, and some blocks whose quants
 * are all -127, or all +127 but the first. */
static inline float *kp_acts(int64_t n)
{
    float *x = hs_malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        uint64_t u = kp_next();
        x[i] = ldexpf((float)((double)(u >> 11) / 9007199254740992.0) * 2.0f - 1.0f, (int)(u % 9) - 4);
    }
    for (int64_t i = 0; i + 256 <= n; i += 256 * 3) memset(x + i, 0, 256 * sizeof(float));
    for (int64_t i = 256; i + 256 <= n; i += 256 * 5)
        for (int j = 0; j < 256; j++) x[i + j] = (i / 256) % 2 ? 0.75f : j ? -1.0f : 1.0f;
    return x;
}

/* The row-group layout of w [rows, k] of type wt, in a buffer first filled with 0xa5. */
static inline void *kp_pack(const uint8_t *w, int wt, int64_t rows, int64_t k)
{
    size_t n = kern_kp_bytes(wt, rows, k);
    void *p = hs_aligned_alloc(64, n);
    memset(p, 0xa5, n);
    kern_kp_pack(p, w, wt, rows, k, 0, (rows + KERN_KP_ROWS - 1) / KERN_KP_ROWS);
    return p;
}

/* The pack of the rows w [rows, k] of type wt (sb_bytes per super-block of 16 rows): the
 * sizes agree, every row comes back byte for byte and padding rows as zero blocks, and
 * packing group by group (backwards, over other bytes) gives the same bytes as one pack (so
 * both write every byte). Returns the pack (the caller frees it and w). */
static inline uint8_t *kp_check_pack(const uint8_t *w, int wt, int64_t rows, int64_t k, size_t sb_bytes)
{
    int64_t nb = k / 256, ng = (rows + 15) / 16;
    size_t rb = kern_k_row_bytes(wt, k), gb = kern_kp_group_bytes(wt, k), bytes = kern_kp_bytes(wt, rows, k);
    cr_assert_eq(gb, (size_t)nb * sb_bytes);
    cr_assert_eq(bytes, (size_t)ng * gb);
    cr_assert_eq(sb_bytes % 64, 0);
    cr_assert_geq(gb, 16 * rb, "a group holds its 16 rows");
    uint8_t *wp = kp_pack(w, wt, rows, k);
    uint8_t *row = hs_malloc(rb);
    for (int64_t r = 0; r < ng * 16; r++) {
        memset(row, 0x5a, rb);
        kern_kp_row(row, wp, wt, k, r);
        if (r < rows) {
            cr_assert(!memcmp(row, w + (size_t)r * rb, rb), "type %d rows %ld K %ld: row %ld differs", wt,
                      (long)rows, (long)k, (long)r);
        } else {
            for (size_t i = 0; i < rb; i++)
                cr_assert_eq(row[i], 0, "type %d rows %ld K %ld: padding row %ld byte %zu", wt, (long)rows, (long)k,
                             (long)r, i);
        }
    }
    uint8_t *wq = hs_aligned_alloc(64, bytes);
    memset(wq, 0x5a, bytes);
    for (int64_t g = ng - 1; g >= 0; g--) kern_kp_pack(wq, w, wt, rows, k, g, g + 1);
    cr_assert(!memcmp(wp, wq, bytes), "type %d rows %ld K %ld: ranged pack differs", wt, (long)rows, (long)k);
    hs_free(wq);
    hs_free(row);
    return wp;
}

/* A matmul over the row-group layout: a table's kern_ops.matmul_kp. */
typedef void (*kp_matmul_fn)(float *y, int64_t y_ld, const void *wp, int wt, const struct kern_q8k_block *xq,
                             int64_t n_tok, int64_t k, int64_t r0, int64_t r1);

/* The matmul_kp of variant `variant` (both types: the AVX2 one is q4kp_avx2.c / q6kp_avx2.c,
 * the AVX-512 one q4kp_avx512.c / q6kp_avx512.c); skips the test where the CPU (or
 * HEADSTART_CPU) is below the variant. */
static inline kp_matmul_fn kp_variant(const char *variant)
{
    const struct kern_ops *v = cpu_level_ops_or_skip(variant);
    cr_assert_not_null(v->matmul_kp, "variant %s has no matmul_kp", variant);
    return v->matmul_kp;
}

/* One call of mm over [r0, r1) of the rows w (type wt) split into `pieces` consecutive
 * ranges (as threads would), against kern_matmul_k; counts the call, and a difference in bad
 * (logging the first one). Frees w. */
static inline void kp_check(kp_matmul_fn mm, int wt, uint8_t *w, int64_t rows, int64_t k, int64_t n_tok,
                            int64_t r0, int64_t r1, int pieces, int *bad, int *calls)
{
    void *wp = kp_pack(w, wt, rows, k);
    float *x = kp_acts(n_tok * k);
    struct kern_q8k_block *xq = hs_malloc((size_t)(n_tok * (k / 256)) * sizeof(*xq));
    kern_q8k_quantize(xq, x, n_tok, k);
    int64_t y_ld = rows + 2;
    float *a = hs_malloc((size_t)(n_tok * y_ld) * sizeof(float));
    float *b = hs_malloc((size_t)(n_tok * y_ld) * sizeof(float));
    for (int64_t i = 0; i < n_tok * y_ld; i++) a[i] = b[i] = -7.25f; /* sentinels: rows outside stay */
    kern_matmul_k(a, y_ld, w, wt, xq, n_tok, k, r0, r1);
    for (int p = 0; p < pieces; p++) {
        int64_t lo = r0 + (r1 - r0) * p / pieces, hi = r0 + (r1 - r0) * (p + 1) / pieces;
        mm(b, y_ld, wp, wt, xq, n_tok, k, lo, hi);
    }
    (*calls)++;
    if (memcmp(a, b, (size_t)(n_tok * y_ld) * sizeof(float))) {
        if (!*bad)
            for (int64_t i = 0; i < n_tok * y_ld; i++)
                if (memcmp(a + i, b + i, 4)) {
                    cr_log_error("type %d rows %ld K %ld T %ld [%ld,%ld) /%d: first diff t=%ld r=%ld: %a vs %a", wt,
                                 (long)rows, (long)k, (long)n_tok, (long)r0, (long)r1, pieces, (long)(i / y_ld),
                                 (long)(i % y_ld), a[i], b[i]);
                    break;
                }
        (*bad)++;
    }
    hs_free(w);
    hs_free(wp);
    hs_free(x);
    hs_free(xq);
    hs_free(a);
    hs_free(b);
}

/* Row groups of matmul_kp: the variant tables that have it (AVX2 and AVX-512) and not. */
static inline void kp_tables_with_and_without(void)
{
    cr_assert_null(kern_ops_for("scalar")->matmul_kp, "scalar has no row-group layout: the engine must not pack");
    if (kern_ops_for("avx2")) cr_assert_not_null(kern_ops_for("avx2")->matmul_kp);
    if (kern_ops_for("avx512vnni")) cr_assert_not_null(kern_ops_for("avx512vnni")->matmul_kp);
    if (kern_ops_for("avx512")) cr_assert_not_null(kern_ops_for("avx512")->matmul_kp);
}

#endif
