/* Tests of the Q6_K row-group layout (q6kp.c) and its matmuls, AVX-512 VNNI (q6kp_avx512.c,
 * kern_ops.matmul_kp with KERN_K_Q6_K) and AVX2 (q6kp_avx2.c, the avx2 table's matmul_kp;
 * the tests named avx2_*), through the kern_kp_* entry points: the pack is lossless (every row
 * comes back byte for byte, padding rows are zero blocks), packing in group ranges equals
 * one pack and writes every byte, and each matmul over the packed matrix is bit-identical
 * to the scalar kern_matmul_k over the Q6_K rows, for token counts 1..20 and 64 (the decode
 * tiles 1..8, the prefill's token tiles and their remainders), row counts
 * around 16-row groups (padding), K from one super-block to 33024, row ranges that cut
 * groups (thread splits), splits of one call into pieces, several row panels, the call's
 * offset table in pieces of tokens, and extreme blocks: all quants 0 or all 63, scales all
 * -128 or 127, d subnormal, zero or negative, activation blocks at +-127. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kp_case.h"

/* Random Q6_K rows; `extreme` in 0..100: the percentage of blocks with extreme quants or
 * scales. d is finite: normal, subnormal or zero, either sign. */
static uint8_t *kq_weights(int64_t rows, int64_t k, int extreme)
{
    size_t rb = (size_t)(k / 256) * 210;
    uint8_t *w = hs_malloc((size_t)rows * rb);
    for (size_t i = 0; i < (size_t)rows * rb; i++) w[i] = (uint8_t)kp_next();
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < k / 256; b++) {
            uint8_t *blk = w + r * rb + b * 210;
            uint64_t u = kp_next();
            uint16_t h = (uint16_t)(0x0c00 + u % 0x3000);
            if (u % 13 == 0) h = (uint16_t)(u % 0x0400); /* subnormal / zero */
            if (u % 7 == 0) h |= 0x8000;
            blk[208] = (uint8_t)h;
            blk[209] = (uint8_t)(h >> 8);
            if ((int)(kp_next() % 100) >= extreme) continue;
            u = kp_next();
            if (u % 3 == 0) memset(blk, 0, 192);    /* all quants 0 (value -32) */
            if (u % 3 == 1) memset(blk, 0xff, 192); /* all quants 63 (value 31) */
            if (u % 5 == 0) memset(blk + 192, 0x80, 16); /* scales all -128 */
            if (u % 5 == 1) memset(blk + 192, 0x7f, 16); /* scales all 127 */
            if (u % 7 == 0) blk[208] = blk[209] = 0;     /* d = +0 */
            if (u % 7 == 1) { /* the negative subnormal of least magnitude */
                blk[208] = 1;
                blk[209] = 0x80;
            }
        }
    return w;
}

/* One call over [r0, r1) in `pieces` (kp_check) on fresh weights. */
static void kq_case(kp_matmul_fn v, int64_t rows, int64_t k, int64_t n_tok, int64_t r0, int64_t r1,
                    int pieces, int extreme, int *bad, int *calls)
{
    kp_check(v, KERN_K_Q6_K, kq_weights(rows, k, extreme), rows, k, n_tok, r0, r1, pieces, bad, calls);
}

Test(kern_q6kp, pack_is_lossless_and_pads_with_zero_blocks)
{
    static const int64_t rows[] = {1, 15, 16, 17, 40};
    static const int64_t ks[] = {256, 512, 1024, 3584};
    kp_rng = 1;
    for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            int64_t n = rows[ri], k = ks[ki], nb = k / 256, ng = (n + 15) / 16;
            cr_assert_eq(kern_q6kp_group_bytes(k), (size_t)nb * KERN_Q6KP_SB_BYTES);
            uint8_t *w = kq_weights(n, k, 20);
            uint8_t *wp = kp_check_pack(w, KERN_K_Q6_K, n, k, KERN_Q6KP_SB_BYTES);
            /* the tail of every super-block is zero */
            for (int64_t s = 0; s < ng * nb; s++)
                for (int i = 3360; i < KERN_Q6KP_SB_BYTES; i++)
                    cr_assert_eq(wp[s * KERN_Q6KP_SB_BYTES + i], 0, "rows %ld K %ld: tail byte %d",
                                 (long)n, (long)k, i);
            hs_free(w);
            hs_free(wp);
        }
    cr_assert_eq(kern_kp_bytes(KERN_K_Q6_K, 0, 256), 0);
    cr_assert_eq(kern_kp_bytes(KERN_K_Q6_K, 4, 384), 0);
    cr_assert_eq(kern_kp_bytes(KERN_K_Q5_K, 4, 256), 0);
}

/* The layout is the one q6kp.c's table states: spot checks of each field of one row. */
Test(kern_q6kp, layout_offsets)
{
    kp_rng = 7;
    uint8_t *w = kq_weights(20, 512, 0);
    uint8_t *wp = kp_pack(w, KERN_K_Q6_K, 20, 512);
    const int64_t r = 19, i = r % 16;
    const uint8_t *blk = w + r * 2 * 210 + 210; /* super-block 1 of row 19: group 1 */
    const uint8_t *sb = wp + 2 * KERN_Q6KP_SB_BYTES + KERN_Q6KP_SB_BYTES;
    for (int v = 0; v < 32; v++)
        for (int c = 0; c < 4; c++) cr_assert_eq(sb[64 * v + 4 * i + c], blk[4 * v + c]);
    for (int x = 0; x < 16; x++)
        for (int c = 0; c < 4; c++) cr_assert_eq(sb[2048 + 64 * x + 4 * i + c], blk[128 + 4 * x + c]);
    for (int p = 0; p < 8; p++) {
        cr_assert_eq(sb[3072 + 32 * p + 2 * i], blk[192 + 2 * p]);
        cr_assert_eq(sb[3072 + 32 * p + 2 * i + 1], blk[192 + 2 * p + 1]);
    }
    cr_assert_eq(sb[3328 + 2 * i], blk[208]);
    cr_assert_eq(sb[3328 + 2 * i + 1], blk[209]);
    hs_free(w);
    hs_free(wp);
}

Test(kern_q6kp, tables_with_and_without) { kp_tables_with_and_without(); }

static void decode_token_counts_rows_and_cuts(const char *variant)
{
    kp_matmul_fn v = kp_variant(variant);
    static const int64_t rows[] = {1, 15, 16, 17, 33, 50};
    static const int64_t ks[] = {256, 512, 1024};
    int bad = 0, calls = 0;
    kp_rng = 2;
    for (int64_t t = 1; t <= 8; t++)
        for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
            for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
                int64_t n = rows[ri];
                kq_case(v, n, ks[ki], t, 0, n, 1, 10, &bad, &calls);
                if (n > 20) kq_case(v, n, ks[ki], t, 3, n - 1, 3, 10, &bad, &calls);
                if (n > 20) kq_case(v, n, ks[ki], t, 17, 31, 2, 10, &bad, &calls); /* inside one group */
            }
    cr_assert_eq(bad, 0, "%d of %d decode calls differ from scalar", bad, calls);
}

static void prefill_tiles_and_remainders(const char *variant)
{
    kp_matmul_fn v = kp_variant(variant);
    static const int64_t rows[] = {15, 33, 50};
    static const int64_t ks[] = {256, 1024};
    int bad = 0, calls = 0;
    kp_rng = 3;
    for (int64_t t = 9; t <= 20; t++)
        for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
            for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
                int64_t n = rows[ri];
                kq_case(v, n, ks[ki], t, 0, n, 1, 10, &bad, &calls);
                if (n > 20) kq_case(v, n, ks[ki], t, 5, n - 2, 2, 10, &bad, &calls);
            }
    kq_case(v, 50, 512, 64, 0, 50, 1, 10, &bad, &calls);
    kq_case(v, 33, 1024, 64, 1, 33, 3, 10, &bad, &calls);
    cr_assert_eq(bad, 0, "%d of %d prefill calls differ from scalar", bad, calls);
}

static void panels_large_k_and_splits(const char *variant)
{
    kp_matmul_fn v = kp_variant(variant);
    int bad = 0, calls = 0;
    kp_rng = 4;
    kq_case(v, 300, 1024, 7, 5, 299, 7, 10, &bad, &calls);  /* decode, cut in 7 pieces */
    kq_case(v, 300, 1024, 19, 0, 300, 4, 10, &bad, &calls); /* several row panels */
    kq_case(v, 50, 3584, 1, 0, 50, 1, 10, &bad, &calls);    /* an ffn_down row (0.8B) */
    kq_case(v, 50, 3584, 4, 0, 50, 3, 10, &bad, &calls);
    kq_case(v, 50, 3584, 8, 1, 49, 2, 10, &bad, &calls);
    kq_case(v, 48, 3584, 16, 0, 48, 5, 10, &bad, &calls);
    kq_case(v, 33, 3584, 64, 0, 33, 2, 10, &bad, &calls);
    /* the call's offset table in pieces of tokens (Q6KP_OFF_MAX / (16 nb) at a time) */
    kq_case(v, 33, 3584, 80, 0, 33, 1, 10, &bad, &calls);  /* 73 + 7 */
    kq_case(v, 20, 17408, 20, 0, 20, 2, 10, &bad, &calls); /* a 27B FFN row: 15 + 5 */
    kq_case(v, 17, 33024, 8, 0, 17, 1, 10, &bad, &calls);  /* past K = 32768: a decode step as 7 + 1 */
    cr_assert_eq(bad, 0, "%d of %d calls differ from scalar", bad, calls);
}

static void extreme_blocks(const char *variant)
{
    kp_matmul_fn v = kp_variant(variant);
    static const int64_t toks[] = {1, 2, 5, 8, 13, 64};
    int bad = 0, calls = 0;
    kp_rng = 5;
    for (size_t ti = 0; ti < sizeof toks / sizeof toks[0]; ti++) {
        kq_case(v, 33, 512, toks[ti], 0, 33, 1, 100, &bad, &calls); /* every block extreme */
        kq_case(v, 17, 1024, toks[ti], 2, 17, 2, 60, &bad, &calls);
    }
    cr_assert_eq(bad, 0, "%d of %d calls differ from scalar", bad, calls);
}

Test(kern_q6kp, decode_token_counts_rows_and_cuts) { decode_token_counts_rows_and_cuts("avx512vnni"); }
Test(kern_q6kp, prefill_tiles_and_remainders) { prefill_tiles_and_remainders("avx512vnni"); }
Test(kern_q6kp, panels_large_k_and_splits) { panels_large_k_and_splits("avx512vnni"); }
Test(kern_q6kp, extreme_blocks) { extreme_blocks("avx512vnni"); }
Test(kern_q6kp, avx2_decode_token_counts_rows_and_cuts) { decode_token_counts_rows_and_cuts("avx2"); }
Test(kern_q6kp, avxvnni_decode_token_counts_rows_and_cuts) { decode_token_counts_rows_and_cuts("avxvnni"); }
Test(kern_q6kp, avx2_prefill_tiles_and_remainders) { prefill_tiles_and_remainders("avx2"); }
Test(kern_q6kp, avxvnni_prefill_tiles_and_remainders) { prefill_tiles_and_remainders("avxvnni"); }
Test(kern_q6kp, avx2_panels_large_k_and_splits) { panels_large_k_and_splits("avx2"); }
Test(kern_q6kp, avxvnni_panels_large_k_and_splits) { panels_large_k_and_splits("avxvnni"); }
Test(kern_q6kp, avx2_extreme_blocks) { extreme_blocks("avx2"); }
Test(kern_q6kp, avxvnni_extreme_blocks) { extreme_blocks("avxvnni"); }
