/* Tests of the Q4_K row-group layout (q4kp.c, kp.c) and its matmuls, AVX-512 VNNI
 * (q4kp_avx512.c), AVX2 (q4kp_avx2.c; the tests named avx2_*) and AVX2 + AVX-VNNI (the same
 * source built as q4kp_avxvnni.c; the tests named avxvnni_*), each the table's
 * kern_ops.matmul_kp: the pack is a lossless rearrangement (every row comes back byte for byte
 * through kern_kp_row, padding rows are zero blocks, every byte of the copy is written),
 * packing in group ranges equals one pack, and matmul_kp over the packed matrix is
 * bit-identical to the scalar kern_matmul_k over the Q4_K rows, for token counts 1..20 and
 * 64 (the decode tiles 1..8, the several-token tiles of 2 groups and their remainders), row
 * counts around 16-row groups, K from one super-block to a 27B FFN row (several row panels,
 * a group larger than a panel), row ranges that cut groups and splits of one call into
 * pieces (threads), extreme quants, scales, mins and f16 factors. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kp_case.h"

/* A finite f16: normal, sometimes subnormal or zero, either sign. */
static uint16_t kp_f16(void)
{
    uint64_t u = kp_next();
    uint16_t h = (uint16_t)(0x1000 + u % 0x3000);
    if (u % 13 == 0) h = (uint16_t)(u % 0x0400);
    if (u % 7 == 0) h |= 0x8000;
    return h;
}

static uint8_t *kp_weights(int64_t rows, int64_t k)
{
    size_t rb = (size_t)(k / 256) * KERN_Q4K_BYTES;
    uint8_t *w = hs_malloc((size_t)rows * rb);
    for (size_t i = 0; i < (size_t)rows * rb; i++) w[i] = (uint8_t)kp_next();
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < k / 256; b++) {
            uint8_t *blk = w + r * rb + b * KERN_Q4K_BYTES;
            uint16_t d = kp_f16(), dm = kp_f16();
            memcpy(blk, &d, 2);
            memcpy(blk + 2, &dm, 2);
            uint64_t u = kp_next();
            if (u % 11 == 0) memset(blk + 16, 0xff, 128); /* every quant 15 */
            if (u % 17 == 0) memset(blk + 16, 0x00, 128); /* every quant 0 */
            if (u % 19 == 0) memset(blk + 4, 0xff, 12);   /* every scale and min 63 */
        }
    return w;
}

/* One call over [r0, r1) in `pieces` (kp_check) on fresh weights. */
static void kp_case(kp_matmul_fn v, int64_t rows, int64_t k, int64_t n_tok, int64_t r0, int64_t r1,
                    int pieces, int *bad, int *calls)
{
    kp_check(v, KERN_K_Q4_K, kp_weights(rows, k), rows, k, n_tok, r0, r1, pieces, bad, calls);
}

Test(kern_q4kp, pack_is_lossless_and_pads_with_zero_rows)
{
    static const int64_t rows[] = {1, 15, 16, 17, 40};
    static const int64_t ks[] = {256, 512, 1024, 3584};
    kp_rng = 1;
    for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            int64_t n = rows[ri], k = ks[ki];
            uint8_t *w = kp_weights(n, k);
            uint8_t *wp = kp_check_pack(w, KERN_K_Q4_K, n, k, KERN_Q4KP_SB_BYTES);
            hs_free(w);
            hs_free(wp);
        }
    cr_assert_eq(kern_kp_bytes(KERN_K_Q4_K, 0, 256), 0);
    cr_assert_eq(kern_kp_bytes(KERN_K_Q4_K, 4, 384), 0);
    cr_assert_eq(kern_kp_bytes(KERN_K_Q5_K, 4, 256), 0, "Q5_K has no row-group layout");
}

Test(kern_q4kp, tables_with_and_without) { kp_tables_with_and_without(); }

static void decode_token_counts_rows_and_tails(const char *variant)
{
    kp_matmul_fn v = kp_variant(variant);
    static const int64_t rows[] = {1, 15, 16, 17, 33, 64};
    static const int64_t ks[] = {256, 768, 1024};
    int bad = 0, calls = 0;
    kp_rng = 2;
    for (int64_t t = 1; t <= 8; t++)
        for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
            for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
                int64_t n = rows[ri];
                kp_case(v, n, ks[ki], t, 0, n, 1, &bad, &calls);
                if (n > 20) kp_case(v, n, ks[ki], t, 3, n - 1, 3, &bad, &calls);
            }
    cr_assert_eq(bad, 0, "%d of %d decode calls differ from scalar", bad, calls);
}

static void prefill_tiles_and_remainders(const char *variant)
{
    kp_matmul_fn v = kp_variant(variant);
    static const int64_t rows[] = {15, 32, 50, 64};
    static const int64_t toks[] = {9, 10, 11, 12, 13, 17, 20, 64};
    static const int64_t ks[] = {256, 1280};
    int bad = 0, calls = 0;
    kp_rng = 3;
    for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
        for (size_t ti = 0; ti < sizeof toks / sizeof toks[0]; ti++)
            for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
                int64_t n = rows[ri];
                kp_case(v, n, ks[ki], toks[ti], 0, n, 1, &bad, &calls);
                if (n > 20) kp_case(v, n, ks[ki], toks[ti], 5, n - 2, 2, &bad, &calls);
            }
    cr_assert_eq(bad, 0, "%d of %d prefill calls differ from scalar", bad, calls);
}

static void panels_large_k_and_splits(const char *variant)
{
    kp_matmul_fn v = kp_variant(variant);
    int bad = 0, calls = 0;
    kp_rng = 4;
    kp_case(v, 300, 1024, 7, 5, 299, 7, &bad, &calls);   /* decode, cut in 7 pieces */
    kp_case(v, 300, 1024, 19, 0, 300, 4, &bad, &calls);  /* several row panels */
    kp_case(v, 20, 17408, 2, 0, 20, 1, &bad, &calls);    /* a 27B FFN row */
    kp_case(v, 20, 28672, 18, 0, 20, 2, &bad, &calls);   /* a group larger than a panel */
    kp_case(v, 48, 3584, 16, 0, 48, 5, &bad, &calls);
    cr_assert_eq(bad, 0, "%d of %d calls differ from scalar", bad, calls);
}

Test(kern_q4kp, decode_token_counts_rows_and_tails) { decode_token_counts_rows_and_tails("avx512vnni"); }
Test(kern_q4kp, prefill_tiles_and_remainders) { prefill_tiles_and_remainders("avx512vnni"); }
Test(kern_q4kp, panels_large_k_and_splits) { panels_large_k_and_splits("avx512vnni"); }
Test(kern_q4kp, avx2_decode_token_counts_rows_and_tails) { decode_token_counts_rows_and_tails("avx2"); }
Test(kern_q4kp, avxvnni_decode_token_counts_rows_and_tails) { decode_token_counts_rows_and_tails("avxvnni"); }
Test(kern_q4kp, avx2_prefill_tiles_and_remainders) { prefill_tiles_and_remainders("avx2"); }
Test(kern_q4kp, avxvnni_prefill_tiles_and_remainders) { prefill_tiles_and_remainders("avxvnni"); }
Test(kern_q4kp, avx2_panels_large_k_and_splits) { panels_large_k_and_splits("avx2"); }
Test(kern_q4kp, avxvnni_panels_large_k_and_splits) { panels_large_k_and_splits("avxvnni"); }
