/* Tests of the Q5_K kernels (q5k.c, q5k_avx2.c, q5k_avx512.c): the row dequantizer on
 * hand-packed blocks against the layout's formula, the scalar matmul against the contract
 * computed here from the unpacked quants (bit for bit) and against the dequantized float dot,
 * and every SIMD table equal to the scalar reference bit for bit over token counts 1..20,
 * row ranges, strides, extreme scales and zero blocks. A variant the CPU lacks is skipped,
 * with a message saying so. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "unit/cpu_level.h"

static uint64_t q5_rng;
static void q5_seed(uint64_t s) { q5_rng = s * 0x9E3779B97F4A7C15ull + 5; }
static uint64_t q5_next(void)
{
    uint64_t z = (q5_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static float q5_uniform(void) { return (float)((double)(q5_next() >> 11) / 9007199254740992.0) * 2.0f - 1.0f; }

/* ---- one block, unpacked: the test's own inverse of the layout in q5k.c ------------------- */

struct q5_blk {
    uint16_t d, dmin;
    uint8_t sc[8], m[8]; /* 6-bit */
    uint8_t q[256];      /* 5-bit */
};

static void q5_pack(uint8_t *blk, const struct q5_blk *u)
{
    memset(blk, 0, KERN_Q5K_BYTES);
    blk[0] = (uint8_t)u->d;
    blk[1] = (uint8_t)(u->d >> 8);
    blk[2] = (uint8_t)u->dmin;
    blk[3] = (uint8_t)(u->dmin >> 8);
    for (int j = 0; j < 4; j++) {
        blk[4 + j] = (uint8_t)(u->sc[j] | (u->sc[j + 4] >> 4) << 6);
        blk[8 + j] = (uint8_t)(u->m[j] | (u->m[j + 4] >> 4) << 6);
        blk[12 + j] = (uint8_t)((u->sc[j + 4] & 15) | (u->m[j + 4] & 15) << 4);
    }
    for (int i = 0; i < 256; i++) {
        int s = i / 32, l = i % 32;
        uint8_t *qs = blk + 48 + 32 * (i / 64) + l;
        *qs = (uint8_t)(*qs | (s % 2 ? (u->q[i] & 15) << 4 : (u->q[i] & 15)));
        blk[16 + l] = (uint8_t)(blk[16 + l] | (u->q[i] >> 4) << s);
    }
}

enum q5_fill { Q5_RANDOM, Q5_MAX, Q5_QMIN, Q5_ZERO, Q5_HIGHBIT };

/* A block of a fill mode: random (finite f16 scales of assorted exponents), every field at
 * its largest (q 31, sc m 63, d dmin 65504), the same with q 0, all zero, or random with
 * every 5th bit set (q 16..31). */
static void q5_make(struct q5_blk *u, enum q5_fill mode)
{
    memset(u, 0, sizeof *u);
    if (mode == Q5_ZERO) return;
    if (mode == Q5_MAX || mode == Q5_QMIN) {
        u->d = u->dmin = 0x7bff;
        memset(u->sc, 63, 8);
        memset(u->m, 63, 8);
        memset(u->q, mode == Q5_MAX ? 31 : 0, 256);
        return;
    }
    u->d = hs_f32_to_f16(ldexpf(0.5f + 0.5f * fabsf(q5_uniform()), -(int)(q5_next() % 12)));
    u->dmin = hs_f32_to_f16(ldexpf(0.5f + 0.5f * fabsf(q5_uniform()), -(int)(q5_next() % 12)));
    for (int j = 0; j < 8; j++) {
        u->sc[j] = (uint8_t)(q5_next() % 64);
        u->m[j] = (uint8_t)(q5_next() % 64);
    }
    for (int i = 0; i < 256; i++) u->q[i] = (uint8_t)(q5_next() % 32 | (mode == Q5_HIGHBIT ? 16 : 0));
}

/* rows x (k / 256) blocks; mode Q5_RANDOM mixes in zero and extreme blocks now and then. */
static struct q5_blk *q5_fill(uint8_t *w, int64_t rows, int64_t k, enum q5_fill mode)
{
    int64_t n = rows * (k / 256);
    struct q5_blk *u = malloc(sizeof *u * (size_t)n);
    for (int64_t b = 0; b < n; b++) {
        enum q5_fill m = mode;
        if (mode == Q5_RANDOM) {
            uint64_t r = q5_next() % 16;
            m = r == 0 ? Q5_ZERO : r == 1 ? Q5_MAX : r == 2 ? Q5_HIGHBIT : Q5_RANDOM;
        }
        q5_make(&u[b], m);
        q5_pack(w + b * KERN_Q5K_BYTES, &u[b]);
    }
    return u;
}

static void q5_fill_x(float *x, int64_t n, enum q5_fill mode)
{
    for (int64_t i = 0; i < n; i++) {
        switch (mode) {
        case Q5_MAX: x[i] = -1.0f; break;                       /* every quant -127 */
        case Q5_HIGHBIT: x[i] = (i / 4) % 2 ? 1.0f : -1.0f; break;
        case Q5_ZERO: case Q5_QMIN: x[i] = 0.0f; break;         /* d = 0 */
        default: x[i] = ldexpf(q5_uniform(), (int)(q5_next() % 9) - 4); break;
        }
    }
}

/* ---- row sizes and the dequantizer ------------------------------------------------------- */

Test(kernels_q5k, row_bytes_and_type)
{
    cr_assert(kern_wtype_is_k(KERN_K_Q5_K));
    cr_assert_eq(KERN_K_Q5_K, 18); /* format's DTYPE_Q5_K */
    cr_assert_eq(kern_k_row_bytes(KERN_K_Q5_K, 512), 352);
    cr_assert_eq(kern_row_bytes((enum kern_wtype)KERN_K_Q5_K, 4096), 16 * 176);
    cr_assert_eq(kern_row_bytes((enum kern_wtype)KERN_K_Q5_K, 300), 0);
    cr_assert_eq(kern_k_row_bytes(KERN_K_Q5_K, 0), 0);
}

Test(kernels_q5k, dequant_equals_formula)
{
    q5_seed(1);
    const enum q5_fill modes[4] = { Q5_RANDOM, Q5_MAX, Q5_HIGHBIT, Q5_ZERO };
    for (int mi = 0; mi < 4; mi++) {
        int64_t rows = 3, k = 768;
        uint8_t *w = malloc((size_t)(rows * k / 256) * KERN_Q5K_BYTES);
        struct q5_blk *u = q5_fill(w, rows, k, modes[mi]);
        float out[768], out2[768];
        for (int64_t r = 0; r < rows; r++) {
            kern_row_to_f32(out, w, (enum kern_wtype)KERN_K_Q5_K, k, r);
            kern_k_row_to_f32(out2, w, KERN_K_Q5_K, k, r);
            cr_assert(memcmp(out, out2, sizeof out) == 0);
            for (int64_t i = 0; i < k; i++) {
                const struct q5_blk *b = &u[r * (k / 256) + i / 256];
                int j = (int)(i % 256);
                float d1 = hs_f16_to_f32(b->d) * (float)b->sc[j / 32];
                float m1 = hs_f16_to_f32(b->dmin) * (float)b->m[j / 32];
                float want = d1 * (float)b->q[j] - m1;
                cr_assert(memcmp(&want, &out[i], 4) == 0, "mode %d row %lld i %lld: %g vs %g", mi,
                          (long long)r, (long long)i, (double)out[i], (double)want);
            }
        }
        free(u);
        free(w);
    }
}

/* A known block by hand: d 1, dmin 0.5, sc_s = s + 1, m_s = 2, q_i = i % 32. */
Test(kernels_q5k, dequant_known_value)
{
    struct q5_blk u = { .d = 0x3c00, .dmin = 0x3800 };
    for (int s = 0; s < 8; s++) { u.sc[s] = (uint8_t)(s + 1); u.m[s] = 2; }
    for (int i = 0; i < 256; i++) u.q[i] = (uint8_t)(i % 32);
    uint8_t blk[KERN_Q5K_BYTES];
    q5_pack(blk, &u);
    cr_assert_eq(blk[16], 0);    /* q of values 0, 32, 64, .. are 0: no 5th bits at l = 0 */
    cr_assert_eq(blk[16 + 31], 0xff); /* q 31 everywhere at l = 31 */
    float out[256];
    kern_row_to_f32(out, blk, (enum kern_wtype)KERN_K_Q5_K, 256, 0);
    cr_assert_eq(out[0], -1.0f);                 /* 1 * 0 - 0.5 * 2 */
    cr_assert_eq(out[31], 31.0f - 1.0f);
    cr_assert_eq(out[32 * 7 + 17], 8.0f * 17.0f - 1.0f);
    cr_assert_eq(out[255], 8.0f * 31.0f - 1.0f);
}

/* ---- the matmul ------------------------------------------------------------------------ */

/* The contract computed from the unpacked blocks: per block isum, msum, two fmaf. */
static float q5_contract(const struct q5_blk *u, const struct kern_q8k_block *xq, int64_t nb)
{
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int32_t isum = 0, msum = 0;
        for (int s = 0; s < 8; s++) {
            int32_t dot = 0;
            for (int i = 32 * s; i < 32 * s + 32; i++) dot += (int32_t)u[b].q[i] * xq[b].q[i];
            isum += u[b].sc[s] * dot;
        }
        for (int g = 0; g < 16; g++) msum += u[b].m[g / 2] * (int32_t)xq[b].bsum[g];
        acc = fmaf(hs_f16_to_f32(u[b].d) * xq[b].d, (float)isum, acc);
        acc = fmaf(-(hs_f16_to_f32(u[b].dmin) * xq[b].d), (float)msum, acc);
    }
    return acc;
}

Test(kernels_q5k, scalar_equals_contract_and_float_dot)
{
    q5_seed(3);
    int64_t k = 1024, rows = 7, nb = k / 256, n_tok = 3;
    uint8_t *w = malloc((size_t)(rows * nb) * KERN_Q5K_BYTES);
    struct q5_blk *u = q5_fill(w, rows, k, Q5_RANDOM);
    float x[3 * 1024], wr[1024], y[3 * 7];
    struct kern_q8k_block xq[3 * 4];
    q5_fill_x(x, n_tok * k, Q5_RANDOM);
    kern_q8k_quantize(xq, x, n_tok, k);
    kern_matmul_k(y, rows, w, KERN_K_Q5_K, xq, n_tok, k, 0, rows);
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t r = 0; r < rows; r++) {
            float want = q5_contract(u + r * nb, xq + t * nb, nb);
            cr_assert(memcmp(&want, &y[t * rows + r], 4) == 0, "t %lld r %lld: %a vs %a", (long long)t,
                      (long long)r, (double)y[t * rows + r], (double)want);
            kern_row_to_f32(wr, w, (enum kern_wtype)KERN_K_Q5_K, k, r);
            double s = 0, mag = 0;
            for (int64_t i = 0; i < k; i++) {
                double xv = (double)xq[t * nb + i / 256].d * xq[t * nb + i / 256].q[i % 256];
                s += (double)wr[i] * xv;
                mag += fabs((double)wr[i] * xv);
            }
            cr_assert(fabs((double)y[t * rows + r] - s) <= 1e-5 * mag + 1e-30, "t %lld r %lld: %g vs %g",
                      (long long)t, (long long)r, (double)y[t * rows + r], s);
        }
    free(u);
    free(w);
}

/* ops->matmul_k over rows [r0, r1) vs the scalar reference, memcmp on the whole output
 * (rows outside the range must stay untouched). */
static void q5_case(const struct kern_ops *ops, int64_t rows, int64_t k, int64_t n_tok, int64_t r0,
                    int64_t r1, enum q5_fill wmode, enum q5_fill xmode, bool outlier)
{
    const struct kern_ops *ref = kern_ops_for("scalar");
    int64_t y_ld = rows + 3, nb = k / 256;
    uint8_t *w = malloc((size_t)(rows * nb) * KERN_Q5K_BYTES);
    float *x = malloc(sizeof(float) * (size_t)(n_tok * k));
    struct kern_q8k_block *xq = malloc(sizeof(*xq) * (size_t)(n_tok * nb));
    float *ya = malloc(sizeof(float) * (size_t)(n_tok * y_ld)), *yb = malloc(sizeof(float) * (size_t)(n_tok * y_ld));
    free(q5_fill(w, rows, k, wmode));
    q5_fill_x(x, n_tok * k, xmode);
    if (outlier) x[(n_tok - 1) * k + 7] = -1e6f; /* most quants of that block become 0 */
    kern_q8k_quantize(xq, x, n_tok, k);
    for (int64_t i = 0; i < n_tok * y_ld; i++) ya[i] = yb[i] = -7.5f;
    ref->matmul_k(ya, y_ld, w, KERN_K_Q5_K, xq, n_tok, k, r0, r1);
    ops->matmul_k(yb, y_ld, w, KERN_K_Q5_K, xq, n_tok, k, r0, r1);
    cr_assert(memcmp(ya, yb, sizeof(float) * (size_t)(n_tok * y_ld)) == 0,
              "%s k %lld rows [%lld, %lld) of %lld n_tok %lld modes %d/%d differs from scalar", ops->name,
              (long long)k, (long long)r0, (long long)r1, (long long)rows, (long long)n_tok, wmode, xmode);
    free(w); free(x); free(xq); free(ya); free(yb);
}

static void variant_equal(const char *variant)
{
    const struct kern_ops *ops = cpu_level_ops_or_skip(variant);
    q5_seed(17);
    const int64_t ks[4] = { 256, 512, 1280, 4096 };
    for (int64_t n_tok = 1; n_tok <= 20; n_tok++)
        for (int ki = 0; ki < 4; ki++) {
            int64_t rows = 1 + (int64_t)(q5_next() % 37);
            int64_t r0 = (int64_t)(q5_next() % (uint64_t)rows), r1 = r0 + 1 + (int64_t)(q5_next() % (uint64_t)(rows - r0));
            q5_case(ops, rows, ks[ki], n_tok, r0, r1, Q5_RANDOM, Q5_RANDOM, (n_tok + ki) % 5 == 4);
        }
    const enum q5_fill modes[5] = { Q5_RANDOM, Q5_MAX, Q5_QMIN, Q5_ZERO, Q5_HIGHBIT };
    for (int wm = 0; wm < 5; wm++)
        for (int xm = 0; xm < 5; xm++)
            for (int64_t n_tok = 1; n_tok <= 17; n_tok += 8) /* 17: the AVX-512 panel (16 rows) */
                q5_case(ops, 21, 512, n_tok, 0, 21, modes[wm], modes[xm], false);
    /* long rows, several 16-row groups, ranges not on a group boundary, panel tails */
    for (int64_t n_tok = 15; n_tok <= 35; n_tok += 5)
        q5_case(ops, 53, 2048, n_tok, 3, 3 + 16 * (n_tok % 3) + 7, Q5_RANDOM, Q5_RANDOM, n_tok == 25);
}

Test(kernels_q5k, scalar_table_is_reference) { variant_equal("scalar"); }
Test(kernels_q5k, avx2_equals_scalar) { variant_equal("avx2"); }
Test(kernels_q5k, avxvnni_equals_scalar) { variant_equal("avxvnni"); }
Test(kernels_q5k, avx512vnni_equals_scalar) { variant_equal("avx512vnni"); }
Test(kernels_q5k, avx512_equals_scalar) { variant_equal("avx512"); }

/* Every available variant: T tokens at once equal T single-token calls, and rows split in
 * pieces equal one call over all rows. */
Test(kernels_q5k, batch_and_range_invariance)
{
    static const char *variants[5] = { "scalar", "avx2", "avxvnni", "avx512vnni", "avx512" };
    q5_seed(29);
    int64_t rows = 13, k = 768, nb = 3, T = 11;
    uint8_t *w = malloc((size_t)(rows * nb) * KERN_Q5K_BYTES);
    free(q5_fill(w, rows, k, Q5_RANDOM));
    float *x = malloc(sizeof(float) * (size_t)(T * k));
    struct kern_q8k_block xq[11 * 3];
    q5_fill_x(x, T * k, Q5_RANDOM);
    kern_q8k_quantize(xq, x, T, k);
    for (int v = 0; v < 5; v++) {
        if (!cpu_level_runs(variants[v])) continue;
        const struct kern_ops *ops = kern_ops_for(variants[v]);
        float ya[11 * 13], yb[11 * 13];
        ops->matmul_k(ya, rows, w, KERN_K_Q5_K, xq, T, k, 0, rows);
        for (int64_t t = 0; t < T; t++) {
            ops->matmul_k(yb + t * rows, rows, w, KERN_K_Q5_K, xq + t * nb, 1, k, 0, 6);
            ops->matmul_k(yb + t * rows, rows, w, KERN_K_Q5_K, xq + t * nb, 1, k, 6, rows);
        }
        cr_assert(memcmp(ya, yb, sizeof ya) == 0, "%s: batch/range changed bits", variants[v]);
    }
    free(x);
    free(w);
}
