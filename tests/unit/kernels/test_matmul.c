/* Tests of matmul.c: dequantization exact, matmul vs double precision, the documented
 * accumulation order reproduced independently (bit for bit), and batch / row-range
 * invariance (memcmp) for every weight type and odd shapes. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"

static uint64_t rng_state;
static void rng_seed(uint64_t s) { rng_state = s * 0x9E3779B97F4A7C15ull + 1; }
static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static float rng_unit(void) { return (float)((double)(rng_next() >> 11) / 9007199254740992.0) * 2.0f - 1.0f; }

static const enum kern_wtype all_types[] = {KERN_W_F32, KERN_W_F16, KERN_W_BF16, KERN_W_Q8_0};

static void put_u16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

/* A random [rows, k] matrix of type t. */
static uint8_t *rand_weights(enum kern_wtype t, int64_t rows, int64_t k)
{
    size_t rb = kern_row_bytes(t, k);
    uint8_t *w = hs_malloc(rb * (size_t)rows);
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *row = w + rb * (size_t)r;
        switch (t) {
        case KERN_W_F32:
            for (int64_t i = 0; i < k; i++) { float f = rng_unit(); memcpy(row + 4 * i, &f, 4); }
            break;
        case KERN_W_F16:
            for (int64_t i = 0; i < k; i++) put_u16(row + 2 * i, hs_f32_to_f16(rng_unit()));
            break;
        case KERN_W_BF16:
            for (int64_t i = 0; i < k; i++) put_u16(row + 2 * i, hs_f32_to_bf16(rng_unit()));
            break;
        case KERN_W_Q8_0:
            for (int64_t b = 0; b < k / 32; b++) {
                uint8_t *blk = row + 34 * b;
                put_u16(blk, hs_f32_to_f16(0.01f + 0.01f * fabsf(rng_unit())));
                for (int i = 0; i < 32; i++) blk[2 + i] = (uint8_t)(int8_t)((int)(rng_next() % 255) - 127);
            }
            break;
        }
    }
    return w;
}

static float *rand_vec(int64_t n)
{
    float *x = hs_malloc((size_t)n * sizeof(float));
    for (int64_t i = 0; i < n; i++) x[i] = rng_unit();
    return x;
}

Test(kern_matmul, row_bytes)
{
    cr_assert_eq(kern_row_bytes(KERN_W_F32, 7), 28);
    cr_assert_eq(kern_row_bytes(KERN_W_F16, 7), 14);
    cr_assert_eq(kern_row_bytes(KERN_W_BF16, 7), 14);
    cr_assert_eq(kern_row_bytes(KERN_W_Q8_0, 64), 68);
    cr_assert_eq(kern_row_bytes(KERN_W_Q8_0, 48), 0);
    cr_assert_eq(kern_row_bytes(KERN_W_F32, 0), 0);
    cr_assert_eq(kern_row_bytes((enum kern_wtype)9, 32), 0);
}

Test(kern_matmul, q8_0_dequant_hand_blocks)
{
    /* two blocks: d = 0.5 (f16 0x3800) and d = -2 (0xC000), q chosen by hand */
    uint8_t w[68] = {0};
    put_u16(w, 0x3800);
    put_u16(w + 34, 0xC000);
    int8_t q0[32], q1[32];
    for (int i = 0; i < 32; i++) { q0[i] = (int8_t)(i - 16); q1[i] = (int8_t)(i % 2 ? 127 : -127 + i); }
    memcpy(w + 2, q0, 32);
    memcpy(w + 36, q1, 32);
    float out[64];
    kern_row_to_f32(out, w, KERN_W_Q8_0, 64, 0);
    for (int i = 0; i < 32; i++) {
        cr_assert_eq(out[i], 0.5f * (float)(i - 16), "i=%d", i);
        cr_assert_eq(out[32 + i], -2.0f * (float)q1[i], "i=%d", i);
    }
    /* second row of a two-row matrix, value checks with a subnormal-free small scale */
    uint8_t w2[68];
    memcpy(w2, w, 34);
    memcpy(w2 + 34, w, 34);
    put_u16(w2 + 34, 0x2E66); /* f16 0x2E66 = 0.0999755859375 */
    kern_row_to_f32(out, w2, KERN_W_Q8_0, 32, 1);
    for (int i = 0; i < 32; i++) cr_assert_eq(out[i], 0.0999755859375f * (float)(i - 16));
}

Test(kern_matmul, f16_bf16_rows_use_base_conversions)
{
    rng_seed(3);
    for (int ti = 1; ti <= 2; ti++) {
        enum kern_wtype t = all_types[ti];
        uint8_t *w = rand_weights(t, 3, 40);
        float out[40];
        kern_row_to_f32(out, w, t, 40, 2);
        for (int i = 0; i < 40; i++) {
            uint16_t h = hs_rd_u16(w + 2 * 40 * 2 + 2 * i);
            float e = t == KERN_W_F16 ? hs_f16_to_f32(h) : hs_bf16_to_f32(h);
            cr_assert_eq(memcmp(&out[i], &e, 4), 0, "type %d i=%d", t, i);
        }
        hs_free(w);
    }
    float f[5] = {1, -2, 3.5f, 0, -0.25f}, out[5];
    kern_row_to_f32(out, f, KERN_W_F32, 5, 0);
    cr_assert_eq(memcmp(out, f, sizeof(f)), 0);
}

Test(kern_matmul, q8_quantize_hand_block)
{
    float x[32];
    for (int i = 0; i < 32; i++) x[i] = 0.0f;
    x[0] = 127.0f; x[1] = -63.5f; x[2] = 0.5f; x[3] = 1.5f; x[4] = -2.5f; x[5] = 100.4f;
    struct kern_q8_block b;
    kern_q8_quantize(&b, x, 1, 32);
    cr_assert_eq(b.d, 1.0f);
    /* round half to even: -63.5 -> -64, 0.5 -> 0, 1.5 -> 2, -2.5 -> -2 */
    int8_t want[6] = {127, -64, 0, 2, -2, 100};
    for (int i = 0; i < 6; i++) cr_assert_eq(b.q[i], want[i], "i=%d q=%d", i, b.q[i]);
    for (int i = 6; i < 32; i++) cr_assert_eq(b.q[i], 0);
    /* an all-zero block has d = 0 and q = 0; x = -254 gives d = 2, q = -127 */
    float z[64] = {0};
    z[40] = -254.0f; z[41] = 3.0f;
    struct kern_q8_block bz[2];
    kern_q8_quantize(bz, z, 1, 64);
    cr_assert_eq(bz[0].d, 0.0f);
    for (int i = 0; i < 32; i++) cr_assert_eq(bz[0].q[i], 0);
    cr_assert_eq(bz[1].d, 2.0f);
    cr_assert_eq(bz[1].q[8], -127);
    cr_assert_eq(bz[1].q[9], 2); /* 3 / 2 = 1.5 -> 2 */
}

Test(kern_matmul, dot_order_and_value)
{
    /* the lane order shows: +-1e8 cancel inside lane 0 while lanes 1..31 keep their +1s
     * (62 in all); a sequential sum would drop every +1 added onto 1e8 and give 31 */
    float a[64], b[64];
    for (int i = 0; i < 64; i++) { a[i] = 1.0f; b[i] = 1.0f; }
    b[0] = 1e8f;
    b[32] = -1e8f;
    float got = kern_dot(a, b, 64);
    cr_assert_eq(got, 62.0f, "got %.9g", got);
}

/* Independent re-statement of the documented float order for one output. */
static float spec_float(const float *wrow, const float *x, int64_t k)
{
    float acc[32];
    for (int l = 0; l < 32; l++) acc[l] = 0.0f;
    for (int64_t i = 0; i < k; i++) acc[i % 32] = fmaf(wrow[i], x[i], acc[i % 32]);
    for (int h = 16; h >= 1; h >>= 1)
        for (int l = 0; l < h; l++) acc[l] += acc[l + h];
    return acc[0];
}

static float spec_q8(const uint8_t *row, const struct kern_q8_block *xq, int64_t k)
{
    float acc[8] = {0};
    for (int64_t b = 0; b < k / 32; b++) {
        int32_t s = 0;
        for (int i = 0; i < 32; i++) s += (int8_t)row[34 * b + 2 + i] * xq[b].q[i];
        float d = hs_f16_to_f32(hs_rd_u16(row + 34 * b)) * xq[b].d;
        acc[b % 8] = fmaf(d, (float)s, acc[b % 8]);
    }
    for (int h = 4; h >= 1; h >>= 1)
        for (int l = 0; l < h; l++) acc[l] += acc[l + h];
    return acc[0];
}

Test(kern_matmul, matches_spec_order_and_double)
{
    rng_seed(11);
    const int64_t ks[] = {32, 96, 1000 - 8, 4128};
    for (size_t ti = 0; ti < 4; ti++) {
        enum kern_wtype t = all_types[ti];
        for (size_t ki = 0; ki < 4; ki++) {
            int64_t k = ks[ki], rows = 5, nt = 3;
            if (t == KERN_W_Q8_0 && k % 32) continue;
            uint8_t *w = rand_weights(t, rows, k);
            float *x = rand_vec(nt * k), *wr = hs_malloc((size_t)k * 4);
            struct kern_q8_block *xq = hs_malloc((size_t)(nt * k / 32 + 1) * sizeof(*xq));
            float y[15];
            if (t == KERN_W_Q8_0) kern_q8_quantize(xq, x, nt, k);
            kern_matmul(y, rows, w, t, x, xq, nt, k, 0, rows);
            for (int64_t tt = 0; tt < nt; tt++) {
                for (int64_t r = 0; r < rows; r++) {
                    kern_row_to_f32(wr, w, t, k, r);
                    float s = t == KERN_W_Q8_0 ? spec_q8(w + kern_row_bytes(t, k) * (size_t)r, xq + tt * (k / 32), k)
                                               : spec_float(wr, x + tt * k, k);
                    float g = y[tt * rows + r];
                    cr_assert_eq(memcmp(&g, &s, 4), 0, "type %d k %ld r %ld: %.9g vs spec %.9g",
                                 t, (long)k, (long)r, g, s);
                    /* double reference: against the unquantized x for float types (1e-5 of
                     * the absolute sum), against the dequantized activations for Q8_0 */
                    double ref = 0, mag = 0;
                    for (int64_t i = 0; i < k; i++) {
                        double xv = x[tt * k + i];
                        if (t == KERN_W_Q8_0) {
                            const struct kern_q8_block *bq = xq + tt * (k / 32) + i / 32;
                            xv = (double)bq->d * bq->q[i % 32];
                        }
                        ref += (double)wr[i] * xv;
                        mag += fabs((double)wr[i] * xv);
                    }
                    cr_assert(fabs(g - ref) <= 1e-5 * mag + 1e-30, "type %d k %ld: %.9g vs %.9g",
                              t, (long)k, g, ref);
                    if (t == KERN_W_Q8_0) {
                        /* the activation quantization error is at most d/2 per value */
                        double ref_x = 0, bound = 0;
                        for (int64_t i = 0; i < k; i++) {
                            ref_x += (double)wr[i] * x[tt * k + i];
                            bound += fabs(wr[i]) * xq[tt * (k / 32) + i / 32].d * 0.5000001;
                        }
                        cr_assert(fabs(g - ref_x) <= bound + 1e-5 * mag);
                    }
                }
            }
            hs_free(w); hs_free(x); hs_free(wr); hs_free(xq);
        }
    }
}

/* T = 1 reference for every token, then every batch size and row split must match it. */
static void check_invariance(enum kern_wtype t, int64_t k, int64_t rows, const int *tlist, int n_t)
{
    const int64_t tmax = 67;
    uint8_t *w = rand_weights(t, rows, k);
    float *x = rand_vec(tmax * k);
    int64_t nb = k / 32;
    struct kern_q8_block *xq = hs_malloc((size_t)(tmax * nb + 1) * sizeof(*xq));
    if (t == KERN_W_Q8_0) kern_q8_quantize(xq, x, tmax, k);
    float *one = hs_malloc((size_t)(tmax * rows) * 4), *y = hs_malloc((size_t)(tmax * rows) * 4);
    for (int64_t tt = 0; tt < tmax; tt++)
        kern_matmul(one + tt * rows, rows, w, t, x + tt * k, xq + tt * nb, 1, k, 0, rows);
    for (int i = 0; i < n_t; i++) {
        int64_t nt = tlist[i];
        for (int pieces = 1; pieces <= 3; pieces++) {
            memset(y, 0xff, (size_t)(tmax * rows) * 4); /* NaN: a row left unwritten shows */
            for (int p = 0; p < pieces; p++) {
                int64_t r0 = rows * p / pieces, r1 = rows * (p + 1) / pieces;
                kern_matmul(y, rows, w, t, x, xq, nt, k, r0, r1);
            }
            cr_assert_eq(memcmp(y, one, (size_t)(nt * rows) * 4), 0,
                         "type %d k %ld rows %ld T %ld pieces %d", t, (long)k, (long)rows, (long)nt, pieces);
        }
    }
    /* a wider y_ld: same bits, and the gap columns untouched */
    int64_t ld = rows + 3;
    float *yw = hs_malloc((size_t)(tmax * ld) * 4);
    memset(yw, 0x7f, (size_t)(tmax * ld) * 4);
    kern_matmul(yw, ld, w, t, x, xq, tmax, k, 0, rows);
    for (int64_t tt = 0; tt < tmax; tt++) {
        cr_assert_eq(memcmp(yw + tt * ld, one + tt * rows, (size_t)rows * 4), 0);
        for (int64_t g = rows; g < ld; g++) cr_assert_eq(hs_rd_u32(yw + tt * ld + g), 0x7f7f7f7fu);
    }
    hs_free(yw); hs_free(w); hs_free(x); hs_free(xq); hs_free(one); hs_free(y);
}

Test(kern_matmul, batch_and_row_split_invariance_small_k, .timeout = 120)
{
    rng_seed(29);
    int tl[67];
    for (int i = 0; i < 67; i++) tl[i] = i + 1;
    const int64_t ks[] = {32, 64, 96}, rs[] = {1, 7, 33};
    for (size_t ti = 0; ti < 4; ti++)
        for (size_t ki = 0; ki < 3; ki++)
            for (size_t ri = 0; ri < 3; ri++) check_invariance(all_types[ti], ks[ki], rs[ri], tl, 67);
}

Test(kern_matmul, batch_and_row_split_invariance_large_k, .timeout = 120)
{
    rng_seed(31);
    const int tl[] = {1, 2, 3, 7, 8, 9, 16, 17, 31, 67};
    const int64_t rs[] = {1, 7, 33};
    for (size_t ti = 0; ti < 4; ti++)
        for (size_t ri = 0; ri < 3; ri++) check_invariance(all_types[ti], 4096 + 32, rs[ri], tl, 10);
}

Test(kern_matmul, odd_k_float_invariance)
{
    rng_seed(37);
    int tl[] = {1, 5, 9, 67};
    const int64_t ks[] = {1, 31, 33, 95};
    for (size_t ti = 0; ti < 3; ti++)
        for (size_t ki = 0; ki < 4; ki++) check_invariance(all_types[ti], ks[ki], 7, tl, 4);
}
