/* Tests of the Q8_0 panel layout (q8p.c) and its matmuls, AVX-512 VNNI (q8p_avx512.c) and
 * AVX2 (q8p_avx2.c; every matmul test runs for both tables, the avx2_ ones for AVX2):
 * the pack is a lossless permutation (every row comes back byte for byte, padding rows are
 * zero), packing in group ranges equals one pack, and matmul_q8p over the packed matrix is
 * bit-identical to the scalar kern_matmul over the Q8_0 rows, for token counts 1..20, 64
 * and 128-130 (the decode tiles 1..8, the 2-group x 6-token prefill tiles and their
 * remainders; AVX2's long-prefill path), row counts around 16-row groups (padding), K from one block to a few thousand (odd block
 * counts: half-used pairs), row ranges that cut groups (thread splits), several row
 * panels, extreme quants (whole blocks of -128 and of +127) and scales, and thread-like
 * splits of one call into pieces; the slot order (kern_q8p_slot) is the partial sums' order, kern_q8p_corr is the plain sum,
 * and a call given the offset shares (cx) writes the same bytes as one that computes them. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "unit/cpu_level.h"

static uint64_t pq_rng;
static uint64_t pq_next(void)
{
    uint64_t z = (pq_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint8_t *pq_weights(int64_t rows, int64_t k)
{
    size_t rb = (size_t)(k / 32) * 34;
    uint8_t *w = hs_malloc((size_t)rows * rb);
    for (size_t i = 0; i < (size_t)rows * rb; i++) w[i] = (uint8_t)pq_next();
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < k / 32; b++) {
            uint64_t u = pq_next();
            uint16_t h = (uint16_t)(0x0c00 + u % 0x3000);
            if (u % 13 == 0) h = (uint16_t)(u % 0x0400); /* subnormal / zero */
            if (u % 7 == 0) h |= 0x8000;
            uint8_t *blk = w + r * rb + b * 34;
            blk[0] = (uint8_t)h;
            blk[1] = (uint8_t)(h >> 8);
            if (u % 11 == 0) memset(blk + 2, 0x80, 32); /* all -128 */
            if (u % 17 == 0) memset(blk + 2, 0x7f, 32); /* all +127 */
        }
    return w;
}

static float *pq_acts(int64_t n)
{
    float *x = hs_malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) {
        uint64_t u = pq_next();
        x[i] = ldexpf((float)((double)(u >> 11) / 9007199254740992.0) * 2.0f - 1.0f, (int)(u % 9) - 4);
    }
    for (int64_t i = 0; i + 32 <= n; i += 32 * 5) memset(x + i, 0, 32 * sizeof(float)); /* zero blocks */
    return x;
}

static void *pq_pack(const uint8_t *w, int64_t rows, int64_t k)
{
    size_t n = kern_q8p_bytes(rows, k);
    void *p = hs_aligned_alloc(64, n);
    memset(p, 0xa5, n); /* the pack must write every byte */
    kern_q8p_pack(p, w, rows, k, 0, (rows + KERN_Q8P_ROWS - 1) / KERN_Q8P_ROWS);
    return p;
}

/* One call over [r0, r1) split into `pieces` consecutive ranges (as threads would), with
 * the offset shares computed by the call (cx NULL) or given (kern_q8p_corr, as the engine). */
static void pq_case_cx(const struct kern_ops *v, int64_t rows, int64_t k, int64_t n_tok, int64_t r0, int64_t r1,
                       int pieces, bool given_cx, int *bad, int *calls)
{
    uint8_t *w = pq_weights(rows, k);
    void *wp = pq_pack(w, rows, k);
    float *x = pq_acts(n_tok * k);
    struct kern_q8_block *xq = hs_malloc((size_t)(n_tok * (k / 32)) * sizeof(*xq));
    kern_q8_quantize(xq, x, n_tok, k);
    int32_t *cx = NULL;
    if (given_cx) {
        cx = hs_malloc((size_t)(n_tok * (k / 32)) * sizeof(int32_t));
        kern_q8p_corr(cx, xq, n_tok * (k / 32));
    }
    int64_t y_ld = rows + 2;
    float *a = hs_malloc((size_t)(n_tok * y_ld) * sizeof(float));
    float *b = hs_malloc((size_t)(n_tok * y_ld) * sizeof(float));
    for (int64_t i = 0; i < n_tok * y_ld; i++) a[i] = b[i] = -7.25f; /* sentinels: rows outside stay */
    kern_matmul(a, y_ld, w, KERN_W_Q8_0, x, xq, n_tok, k, r0, r1);
    for (int p = 0; p < pieces; p++) {
        int64_t lo = r0 + (r1 - r0) * p / pieces, hi = r0 + (r1 - r0) * (p + 1) / pieces;
        v->matmul_q8p(b, y_ld, wp, xq, cx, n_tok, k, lo, hi);
    }
    (*calls)++;
    if (memcmp(a, b, (size_t)(n_tok * y_ld) * sizeof(float))) {
        if (!*bad)
            for (int64_t i = 0; i < n_tok * y_ld; i++)
                if (memcmp(a + i, b + i, 4)) {
                    cr_log_error("rows %ld K %ld T %ld [%ld,%ld) /%d cx %d: first diff t=%ld r=%ld: %a vs %a",
                                 (long)rows, (long)k, (long)n_tok, (long)r0, (long)r1, pieces, (int)given_cx,
                                 (long)(i / y_ld), (long)(i % y_ld), a[i], b[i]);
                    break;
                }
        (*bad)++;
    }
    hs_free(w);
    hs_free(wp);
    hs_free(x);
    hs_free(xq);
    hs_free(cx);
    hs_free(a);
    hs_free(b);
}

static void pq_case(const struct kern_ops *v, int64_t rows, int64_t k, int64_t n_tok, int64_t r0, int64_t r1,
                    int pieces, int *bad, int *calls)
{
    pq_case_cx(v, rows, k, n_tok, r0, r1, pieces, false, bad, calls);
}

Test(kern_q8p, pack_is_lossless_and_pads_with_zero_rows)
{
    static const int64_t rows[] = {1, 15, 16, 17, 40};
    static const int64_t ks[] = {32, 64, 96, 1056};
    pq_rng = 1;
    for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            int64_t n = rows[ri], k = ks[ki], nb = k / 32;
            size_t rb = (size_t)nb * 34;
            cr_assert_eq(kern_q8p_bytes(n, k), (size_t)((n + 15) / 16) * kern_q8p_group_bytes(k));
            cr_assert_eq(kern_q8p_group_bytes(k) % 64, 0);
            cr_assert_geq(kern_q8p_group_bytes(k), 16 * rb, "a group holds its 16 rows");
            uint8_t *w = pq_weights(n, k);
            void *wp = pq_pack(w, n, k);
            uint8_t *row = hs_malloc(rb);
            for (int64_t r = 0; r < (n + 15) / 16 * 16; r++) {
                kern_q8p_row(row, wp, k, r);
                if (r < n) {
                    cr_assert(!memcmp(row, w + (size_t)r * rb, rb), "rows %ld K %ld: row %ld differs", (long)n,
                              (long)k, (long)r);
                } else {
                    for (size_t i = 0; i < rb; i++)
                        cr_assert_eq(row[i], 0, "rows %ld K %ld: padding row %ld byte %zu", (long)n, (long)k,
                                     (long)r, i);
                }
            }
            /* packing group by group gives the same bytes as one pack */
            void *wq = hs_aligned_alloc(64, kern_q8p_bytes(n, k));
            for (int64_t g = (n + 15) / 16 - 1; g >= 0; g--) kern_q8p_pack(wq, w, n, k, g, g + 1);
            cr_assert(!memcmp(wp, wq, kern_q8p_bytes(n, k)), "rows %ld K %ld: ranged pack differs", (long)n, (long)k);
            hs_free(w);
            hs_free(wp);
            hs_free(wq);
            hs_free(row);
        }
    cr_assert_eq(kern_q8p_bytes(0, 32), 0);
    cr_assert_eq(kern_q8p_bytes(4, 48), 0);
}

Test(kern_q8p, tables_with_and_without)
{
    cr_assert_null(kern_ops_for("scalar")->matmul_q8p, "scalar has no panel layout: the engine must not pack");
    if (kern_ops_for("avx2")) cr_assert_not_null(kern_ops_for("avx2")->matmul_q8p, "avx2 has q8p_avx2.c");
    if (kern_ops_for("avxvnni")) cr_assert_not_null(kern_ops_for("avxvnni")->matmul_q8p, "avxvnni has q8p_avxvnni.c");
    if (kern_ops_for("avx512vnni")) cr_assert_not_null(kern_ops_for("avx512vnni")->matmul_q8p);
    if (kern_ops_for("avx512")) cr_assert_not_null(kern_ops_for("avx512")->matmul_q8p);
}

static void decode_token_counts_rows_and_tails(const char *variant)
{
    const struct kern_ops *v = cpu_level_ops_or_skip(variant);
    static const int64_t rows[] = {1, 15, 16, 17, 33, 64};
    static const int64_t ks[] = {32, 96, 256, 288, 1024};
    int bad = 0, calls = 0;
    pq_rng = 2;
    for (int64_t t = 1; t <= 8; t++)
        for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
            for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
                int64_t n = rows[ri];
                pq_case(v, n, ks[ki], t, 0, n, 1, &bad, &calls);
                if (n > 20) pq_case(v, n, ks[ki], t, 3, n - 1, 3, &bad, &calls);
            }
    cr_assert_eq(bad, 0, "%d of %d decode calls differ from scalar", bad, calls);
}
Test(kern_q8p, decode_token_counts_rows_and_tails) { decode_token_counts_rows_and_tails("avx512vnni"); }
Test(kern_q8p, avx2_decode_token_counts_rows_and_tails) { decode_token_counts_rows_and_tails("avx2"); }
Test(kern_q8p, avxvnni_decode_token_counts_rows_and_tails) { decode_token_counts_rows_and_tails("avxvnni"); }

static void prefill_tiles_and_remainders(const char *variant)
{
    const struct kern_ops *v = cpu_level_ops_or_skip(variant);
    static const int64_t rows[] = {15, 32, 50, 64};
    static const int64_t toks[] = {9, 11, 12, 13, 17, 20, 64};
    static const int64_t ks[] = {32, 160, 1056};
    int bad = 0, calls = 0;
    pq_rng = 3;
    for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
        for (size_t ti = 0; ti < sizeof toks / sizeof toks[0]; ti++)
            for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
                int64_t n = rows[ri];
                pq_case(v, n, ks[ki], toks[ti], 0, n, 1, &bad, &calls);
                if (n > 20) pq_case(v, n, ks[ki], toks[ti], 5, n - 2, 2, &bad, &calls);
            }
    cr_assert_eq(bad, 0, "%d of %d prefill calls differ from scalar", bad, calls);
}
Test(kern_q8p, prefill_tiles_and_remainders) { prefill_tiles_and_remainders("avx512vnni"); }
Test(kern_q8p, avx2_prefill_tiles_and_remainders) { prefill_tiles_and_remainders("avx2"); }
Test(kern_q8p, avxvnni_prefill_tiles_and_remainders) { prefill_tiles_and_remainders("avxvnni"); }

static void panels_large_k_and_splits(const char *variant)
{
    const struct kern_ops *v = cpu_level_ops_or_skip(variant);
    int bad = 0, calls = 0;
    pq_rng = 4;
    pq_case(v, 300, 1024, 7, 5, 299, 7, &bad, &calls);  /* decode, cut in 7 pieces */
    pq_case(v, 300, 1024, 19, 0, 300, 4, &bad, &calls); /* several row panels */
    pq_case(v, 40, 8224, 3, 0, 40, 1, &bad, &calls);    /* past the old path's V_KMAX */
    pq_case(v, 20, 17408, 2, 0, 20, 1, &bad, &calls);   /* a 27B FFN row: > 1 panel per group */
    pq_case(v, 48, 3584, 16, 0, 48, 5, &bad, &calls);
    pq_case(v, 20, 17408, 40, 0, 20, 2, &bad, &calls); /* cx NULL: shares for 30 tokens at a time */
    /* a long prefill (q8p_avx2.c note 5: the rows' panel path from 128 tokens), several
     * of its panels, cut halves at both ends of each piece, odd block counts */
    pq_case(v, 300, 1024, 130, 5, 299, 3, &bad, &calls);
    pq_case(v, 45, 1056, 128, 0, 45, 1, &bad, &calls);
    pq_case(v, 24, 8224, 129, 1, 23, 1, &bad, &calls); /* past that panel's K */
    cr_assert_eq(bad, 0, "%d of %d calls differ from scalar", bad, calls);
}
Test(kern_q8p, panels_large_k_and_splits) { panels_large_k_and_splits("avx512vnni"); }
Test(kern_q8p, avx2_panels_large_k_and_splits) { panels_large_k_and_splits("avx2"); }
Test(kern_q8p, avxvnni_panels_large_k_and_splits) { panels_large_k_and_splits("avxvnni"); }

Test(kern_q8p, slot_order_is_the_partial_sums_order)
{
    for (int64_t nb = 1; nb <= 70; nb++) {
        int64_t *at = hs_calloc((size_t)nb, sizeof(int64_t));
        for (int64_t i = 0; i < nb; i++) at[i] = -1;
        for (int64_t b = 0; b < nb; b++) {
            int64_t sl = kern_q8p_slot(b, nb);
            cr_assert(sl >= 0 && sl < nb, "nb %ld: block %ld in slot %ld", (long)nb, (long)b, (long)sl);
            cr_assert_eq(at[sl], -1, "nb %ld: slot %ld taken twice", (long)nb, (long)sl);
            at[sl] = b;
        }
        /* slot by slot: sum 0's blocks ascending, then sum 1's, ... (a kernel's run order) */
        int64_t sl = 0;
        for (int64_t l = 0; l < 8; l++)
            for (int64_t b = l; b < nb; b += 8, sl++)
                cr_assert_eq(at[sl], b, "nb %ld: slot %ld holds block %ld, not %ld", (long)nb, (long)sl, (long)at[sl],
                             (long)b);
        cr_assert_eq(sl, nb);
        hs_free(at);
    }
}

Test(kern_q8p, corr_is_the_scaled_quant_sum)
{
    enum { N = 40 };
    struct kern_q8_block xq[N];
    int32_t cx[N + 1];
    pq_rng = 5;
    for (int i = 0; i < N; i++) {
        xq[i].d = (float)i;
        for (int c = 0; c < 32; c++) {
            int v = (int)(pq_next() % 255) - 127;
            if (i == 0) v = 127; /* the extremes of kern_q8_quantize's range */
            if (i == 1) v = -127;
            if (i == 2) v = 0;
            xq[i].q[c] = (int8_t)v;
        }
    }
    cx[N] = 12345; /* n bounds the write */
    kern_q8p_corr(cx, xq, N);
    for (int i = 0; i < N; i++) {
        int64_t sum = 0;
        for (int c = 0; c < 32; c++) sum += xq[i].q[c];
        cr_assert_eq(cx[i], (int32_t)(-128 * sum), "block %d: %d, want %ld", i, cx[i], (long)(-128 * sum));
    }
    cr_assert_eq(cx[0], -128 * 32 * 127);
    cr_assert_eq(cx[1], 128 * 32 * 127);
    cr_assert_eq(cx[2], 0);
    cr_assert_eq(cx[N], 12345);
}

/* A caller's cx (the engine's, once per activation) against the call's own: both equal the
 * scalar matmul, so each other, at every token count of a decode step and past it, odd
 * row counts, odd block counts and nb < 8 (partial sums that get no block). */
static void given_offset_shares_equal_computed_ones(const char *variant)
{
    const struct kern_ops *v = cpu_level_ops_or_skip(variant);
    static const int64_t rows[] = {1, 7, 23, 50};
    static const int64_t ks[] = {32, 160, 288, 1056};
    int bad = 0, calls = 0;
    pq_rng = 6;
    for (int64_t t = 1; t <= 17; t++)
        for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
            for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
                int64_t n = rows[ri];
                uint64_t seed = pq_rng;
                pq_case_cx(v, n, ks[ki], t, 0, n, 1, true, &bad, &calls);
                pq_rng = seed; /* the same weights and activations, cx computed by the call */
                pq_case_cx(v, n, ks[ki], t, 0, n, 1, false, &bad, &calls);
                if (n > 20) pq_case_cx(v, n, ks[ki], t, 2, n - 3, 3, true, &bad, &calls);
            }
    cr_assert_eq(bad, 0, "%d of %d calls differ from scalar", bad, calls);
}
Test(kern_q8p, given_offset_shares_equal_computed_ones) { given_offset_shares_equal_computed_ones("avx512vnni"); }
Test(kern_q8p, avx2_given_offset_shares_equal_computed_ones) { given_offset_shares_equal_computed_ones("avx2"); }
Test(kern_q8p, avxvnni_given_offset_shares_equal_computed_ones) { given_offset_shares_equal_computed_ones("avxvnni"); }
