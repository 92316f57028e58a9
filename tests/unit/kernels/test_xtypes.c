/* Tests of the extra block types ([F12]: Q5_1 in q5_1*.c, IQ4_NL and IQ4_XS in iq4*.c): the row
 * dequantizers on blocks packed here from unpacked fields (the test's own reading of the
 * layouts) against the value formulas, bit for bit; the scalar matmul against kernels.h's
 * contract computed here from the unpacked fields (bit for bit) and against the dequantized
 * float dot; every SIMD table equal to the scalar reference bit for bit over token counts,
 * row lengths with block tails (blocks % 8 != 0), row ranges, strides, extreme and zero
 * blocks; batch and row-range invariance; quantize -> dequantize error bounds; and the NaN /
 * Inf scale finder. A variant the CPU lacks is skipped, with a message saying so. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "unit/cpu_level.h"

static uint64_t xt_rng;
static void xt_seed(uint64_t s) { xt_rng = s * 0x9E3779B97F4A7C15ull + 7; }
static uint64_t xt_next(void)
{
    uint64_t z = (xt_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static float xt_uniform(void) { return (float)((double)(xt_next() >> 11) / 9007199254740992.0) * 2.0f - 1.0f; }

static const int8_t kv[16] = { -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113 };

/* ---- one block, unpacked ----------------------------------------------------------------- */

struct xblk {
    uint16_t d, m;     /* f16; m is Q5_1's offset */
    uint8_t ls[8];     /* IQ4_XS 6-bit sub-block scales */
    uint8_t q[256];    /* Q5_1 quants 0..31, IQ4 indices 0..15 (32 used but for IQ4_XS) */
};

static int xt_vals(int wt) { return wt == KERN_X_IQ4_XS ? 256 : 32; }
static size_t xt_bytes(int wt)
{
    return wt == KERN_X_Q5_1 ? KERN_Q5_1_BYTES : wt == KERN_X_IQ4_NL ? KERN_IQ4NL_BYTES : KERN_IQ4XS_BYTES;
}

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

/* 32 4-bit values as a 16-byte run: value j < 16 low nibble of byte j, j + 16 its high nibble. */
static void pack_nibbles(uint8_t *qs, const uint8_t *v)
{
    for (int j = 0; j < 16; j++) qs[j] = (uint8_t)((v[j] & 15) | (v[j + 16] & 15) << 4);
}

static void xt_pack(uint8_t *blk, int wt, const struct xblk *u)
{
    memset(blk, 0, xt_bytes(wt));
    put16(blk, u->d);
    if (wt == KERN_X_Q5_1) {
        put16(blk + 2, u->m);
        uint32_t qh = 0;
        for (int j = 0; j < 32; j++) qh |= (uint32_t)(u->q[j] >> 4) << j;
        for (int i = 0; i < 4; i++) blk[4 + i] = (uint8_t)(qh >> 8 * i);
        pack_nibbles(blk + 8, u->q);
    } else if (wt == KERN_X_IQ4_NL) {
        pack_nibbles(blk + 2, u->q);
    } else {
        uint16_t sh = 0;
        for (int s = 0; s < 8; s++) {
            blk[4 + s / 2] = (uint8_t)(blk[4 + s / 2] | (u->ls[s] & 15) << 4 * (s % 2));
            sh = (uint16_t)(sh | (u->ls[s] >> 4) << 2 * s);
            pack_nibbles(blk + 8 + 16 * s, u->q + 32 * s);
        }
        put16(blk + 2, sh);
    }
}

/* The value formulas of kernels.h, from the unpacked fields. */
static float xt_value(int wt, const struct xblk *u, int i)
{
    float d = hs_f16_to_f32(u->d);
    if (wt == KERN_X_Q5_1) {
        float v = (float)u->q[i] * d;
        return v + hs_f16_to_f32(u->m);
    }
    if (wt == KERN_X_IQ4_NL) return d * (float)kv[u->q[i]];
    float dl = d * (float)(u->ls[i / 32] - 32);
    return dl * (float)kv[u->q[i]];
}

enum xt_fill { XT_RANDOM, XT_MAX, XT_NEGMAX, XT_ZERO, XT_LOW };

/* A block of a fill mode: random (finite f16 scales of assorted exponents and signs), every
 * field at its extreme (d, m = +-65504, q 31 / index 0 / ls 0), all zero, or the smallest
 * quants (q 0, index 8, ls 32 +- 1). */
static void xt_make(struct xblk *u, int wt, enum xt_fill mode)
{
    memset(u, 0, sizeof *u);
    int n = xt_vals(wt);
    if (mode == XT_ZERO) return;
    if (mode == XT_MAX || mode == XT_NEGMAX) {
        u->d = u->m = mode == XT_MAX ? 0x7bff : 0xfbff;
        memset(u->ls, 0, 8);
        memset(u->q, wt == KERN_X_Q5_1 ? 31 : 0, (size_t)n);
        return;
    }
    float sgn = xt_next() % 2 ? -1.0f : 1.0f;
    u->d = hs_f32_to_f16(sgn * ldexpf(0.5f + 0.5f * fabsf(xt_uniform()), -(int)(xt_next() % 14)));
    u->m = hs_f32_to_f16(xt_uniform() * ldexpf(1.0f, -(int)(xt_next() % 8)));
    for (int s = 0; s < 8; s++) u->ls[s] = (uint8_t)(mode == XT_LOW ? 31 + xt_next() % 3 : xt_next() % 64);
    for (int i = 0; i < n; i++)
        u->q[i] = (uint8_t)(mode == XT_LOW ? (wt == KERN_X_Q5_1 ? 0 : 8) : xt_next() % (wt == KERN_X_Q5_1 ? 32 : 16));
}

/* rows x (k / vals) blocks; XT_RANDOM mixes in zero and extreme blocks now and then. */
static struct xblk *xt_fill(uint8_t *w, int wt, int64_t rows, int64_t k, enum xt_fill mode)
{
    int64_t n = rows * (k / xt_vals(wt));
    struct xblk *u = malloc(sizeof *u * (size_t)n);
    for (int64_t b = 0; b < n; b++) {
        enum xt_fill m = mode;
        if (mode == XT_RANDOM) {
            uint64_t r = xt_next() % 16;
            m = r == 0 ? XT_ZERO : r == 1 ? XT_MAX : r == 2 ? XT_NEGMAX : r == 3 ? XT_LOW : XT_RANDOM;
        }
        xt_make(&u[b], wt, m);
        xt_pack(w + (size_t)b * xt_bytes(wt), wt, &u[b]);
    }
    return u;
}

static void xt_fill_x(float *x, int64_t n, enum xt_fill mode)
{
    for (int64_t i = 0; i < n; i++) {
        switch (mode) {
        case XT_MAX: x[i] = -1.0f; break;                         /* every quant -127 */
        case XT_NEGMAX: x[i] = (i / 3) % 2 ? 1.0f : -1.0f; break;
        case XT_ZERO: x[i] = 0.0f; break;                          /* d = 0 */
        default: x[i] = ldexpf(xt_uniform(), (int)(xt_next() % 9) - 4); break;
        }
    }
}

static const int xt_types[3] = { KERN_X_Q5_1, KERN_X_IQ4_NL, KERN_X_IQ4_XS };
static const char *xt_name(int wt) { return wt == KERN_X_Q5_1 ? "q5_1" : wt == KERN_X_IQ4_NL ? "iq4_nl" : "iq4_xs"; }

/* ---- sizes, the codebook, the dequantizer ------------------------------------------------- */

Test(kernels_xtypes, row_bytes_and_types)
{
    cr_assert_eq(KERN_X_Q5_1, 13);   /* format's DTYPE_Q5_1 */
    cr_assert_eq(KERN_X_IQ4_NL, 21); /* DTYPE_IQ4_NL */
    cr_assert_eq(KERN_X_IQ4_XS, 22); /* DTYPE_IQ4_XS */
    for (int i = 0; i < 3; i++) {
        cr_assert(kern_wtype_is_x(xt_types[i]));
        cr_assert(!kern_wtype_is_k(xt_types[i]));
    }
    cr_assert(!kern_wtype_is_x(KERN_K_Q4_K) && !kern_wtype_is_x(KERN_W_Q8_0) && !kern_wtype_is_x(12));
    cr_assert(kern_x_uses_q8k(KERN_X_IQ4_XS) && !kern_x_uses_q8k(KERN_X_Q5_1) && !kern_x_uses_q8k(KERN_X_IQ4_NL));
    cr_assert_eq(kern_row_bytes((enum kern_wtype)KERN_X_Q5_1, 96), 3 * 24);
    cr_assert_eq(kern_row_bytes((enum kern_wtype)KERN_X_IQ4_NL, 96), 3 * 18);
    cr_assert_eq(kern_row_bytes((enum kern_wtype)KERN_X_IQ4_XS, 512), 2 * 136);
    cr_assert_eq(kern_row_bytes((enum kern_wtype)KERN_X_IQ4_XS, 96), 0);
    cr_assert_eq(kern_row_bytes((enum kern_wtype)KERN_X_Q5_1, 40), 0);
    cr_assert_eq(kern_x_row_bytes(KERN_X_IQ4_NL, 0), 0);
    for (int i = 0; i < 16; i++) cr_assert_eq(kern_iq4_values[i], kv[i]);
}

Test(kernels_xtypes, dequant_equals_formula)
{
    xt_seed(1);
    const enum xt_fill modes[5] = { XT_RANDOM, XT_MAX, XT_NEGMAX, XT_ZERO, XT_LOW };
    for (int ti = 0; ti < 3; ti++)
        for (int mi = 0; mi < 5; mi++) {
            int wt = xt_types[ti];
            int64_t rows = 3, k = 768, nv = xt_vals(wt);
            uint8_t *w = malloc((size_t)(rows * k / nv) * xt_bytes(wt));
            struct xblk *u = xt_fill(w, wt, rows, k, modes[mi]);
            float out[768];
            for (int64_t r = 0; r < rows; r++) {
                kern_row_to_f32(out, w, (enum kern_wtype)wt, k, r);
                for (int64_t i = 0; i < k; i++) {
                    float want = xt_value(wt, &u[(r * k + i) / nv], (int)(i % nv));
                    cr_assert(memcmp(&want, &out[i], 4) == 0, "%s mode %d row %lld i %lld: %a vs %a", xt_name(wt),
                              mi, (long long)r, (long long)i, (double)out[i], (double)want);
                }
            }
            free(u);
            free(w);
        }
}

/* Known blocks by hand. */
Test(kernels_xtypes, dequant_known_values)
{
    struct xblk u;
    uint8_t blk[136];
    float out[256];
    memset(&u, 0, sizeof u);
    u.d = 0x3c00; /* 1 */
    u.m = 0xc000; /* -2 */
    for (int j = 0; j < 32; j++) u.q[j] = (uint8_t)j;
    xt_pack(blk, KERN_X_Q5_1, &u);
    cr_assert_eq(hs_rd_u32(blk + 4), 0xffff0000u); /* values 16..31 have the 5th bit */
    kern_row_to_f32(out, blk, (enum kern_wtype)KERN_X_Q5_1, 32, 0);
    for (int j = 0; j < 32; j++) cr_assert_eq(out[j], (float)j - 2.0f);

    memset(&u, 0, sizeof u);
    u.d = 0x3800; /* 0.5 */
    for (int j = 0; j < 32; j++) u.q[j] = (uint8_t)(j % 16);
    xt_pack(blk, KERN_X_IQ4_NL, &u);
    kern_row_to_f32(out, blk, (enum kern_wtype)KERN_X_IQ4_NL, 32, 0);
    cr_assert_eq(out[0], -63.5f);
    cr_assert_eq(out[15], 56.5f);
    cr_assert_eq(out[16 + 8], 0.5f);

    memset(&u, 0, sizeof u);
    u.d = 0x4000; /* 2 */
    for (int s = 0; s < 8; s++) u.ls[s] = (uint8_t)(s * 9);          /* 0, 9, .., 63 */
    for (int i = 0; i < 256; i++) u.q[i] = (uint8_t)(i % 16);
    xt_pack(blk, KERN_X_IQ4_XS, &u);
    cr_assert_eq(blk[4], 0x90);           /* ls 0 and 9: low nibbles 0 and 9 */
    kern_row_to_f32(out, blk, (enum kern_wtype)KERN_X_IQ4_XS, 256, 0);
    cr_assert_eq(out[0], (2.0f * -32.0f) * -127.0f);
    cr_assert_eq(out[32 * 7 + 31], (2.0f * 31.0f) * 113.0f);
    cr_assert_eq(out[32 * 4 + 8], (2.0f * 4.0f) * 1.0f);
}

/* ---- the matmul ------------------------------------------------------------------------ */

/* kernels.h's contract from the unpacked blocks of one row (nb blocks). */
static float xt_contract(int wt, const struct xblk *u, const struct kern_q8_block *xq,
                         const struct kern_q8k_block *xk, int64_t nb)
{
    if (wt == KERN_X_IQ4_XS) {
        float acc = 0.0f;
        for (int64_t b = 0; b < nb; b++) {
            int32_t isum = 0;
            for (int s = 0; s < 8; s++) {
                int32_t dot = 0;
                for (int i = 32 * s; i < 32 * s + 32; i++) dot += kv[u[b].q[i]] * (int32_t)xk[b].q[i];
                isum += (u[b].ls[s] - 32) * dot;
            }
            acc = fmaf(hs_f16_to_f32(u[b].d) * xk[b].d, (float)isum, acc);
        }
        return acc;
    }
    float acc[8] = { 0 };
    for (int64_t b = 0; b < nb; b++) {
        int32_t isum = 0, xsum = 0;
        for (int i = 0; i < 32; i++) {
            int wq = wt == KERN_X_Q5_1 ? u[b].q[i] : kv[u[b].q[i]];
            isum += wq * (int32_t)xq[b].q[i];
            xsum += xq[b].q[i];
        }
        acc[b % 8] = fmaf(hs_f16_to_f32(u[b].d) * xq[b].d, (float)isum, acc[b % 8]);
        if (wt == KERN_X_Q5_1) acc[b % 8] = fmaf(hs_f16_to_f32(u[b].m) * xq[b].d, (float)xsum, acc[b % 8]);
    }
    for (int h = 4; h >= 1; h /= 2)
        for (int l = 0; l < h; l++) acc[l] = acc[l] + acc[l + h];
    return acc[0];
}

Test(kernels_xtypes, scalar_equals_contract_and_float_dot)
{
    xt_seed(3);
    for (int ti = 0; ti < 3; ti++) {
        int wt = xt_types[ti];
        int64_t k = wt == KERN_X_IQ4_XS ? 1024 : 352, rows = 7, n_tok = 3, nv = xt_vals(wt), nb = k / nv;
        uint8_t *w = malloc((size_t)(rows * nb) * xt_bytes(wt));
        struct xblk *u = xt_fill(w, wt, rows, k, XT_RANDOM);
        float *x = malloc(sizeof(float) * (size_t)(n_tok * k)), wr[1024], y[3 * 7];
        struct kern_q8_block xq[3 * 1024 / 32];
        struct kern_q8k_block xk[3 * 4];
        xt_fill_x(x, n_tok * k, XT_RANDOM);
        kern_q8_quantize(xq, x, n_tok, k);
        if (wt == KERN_X_IQ4_XS) kern_q8k_quantize(xk, x, n_tok, k);
        kern_matmul_x(y, rows, w, wt, xq, xk, n_tok, k, 0, rows);
        for (int64_t t = 0; t < n_tok; t++)
            for (int64_t r = 0; r < rows; r++) {
                float want = xt_contract(wt, u + r * nb, xq + t * (k / 32), xk + t * (k / 256), nb);
                cr_assert(memcmp(&want, &y[t * rows + r], 4) == 0, "%s t %lld r %lld: %a vs %a", xt_name(wt),
                          (long long)t, (long long)r, (double)y[t * rows + r], (double)want);
                kern_row_to_f32(wr, w, (enum kern_wtype)wt, k, r);
                double s = 0, mag = 0;
                for (int64_t i = 0; i < k; i++) {
                    double xv = wt == KERN_X_IQ4_XS ? (double)xk[t * (k / 256) + i / 256].d * xk[t * (k / 256) + i / 256].q[i % 256]
                                                    : (double)xq[t * (k / 32) + i / 32].d * xq[t * (k / 32) + i / 32].q[i % 32];
                    s += (double)wr[i] * xv;
                    mag += fabs((double)wr[i] * xv);
                }
                cr_assert(fabs((double)y[t * rows + r] - s) <= 1e-5 * mag + 1e-30, "%s t %lld r %lld: %g vs %g",
                          xt_name(wt), (long long)t, (long long)r, (double)y[t * rows + r], s);
            }
        free(u);
        free(w);
        free(x);
    }
}

/* ops->matmul_x over rows [r0, r1) vs the scalar reference, memcmp on the whole output (rows
 * outside the range must stay untouched). */
static void xt_case(const struct kern_ops *ops, int wt, int64_t rows, int64_t k, int64_t n_tok, int64_t r0,
                    int64_t r1, enum xt_fill wmode, enum xt_fill xmode, bool outlier)
{
    const struct kern_ops *ref = kern_ops_for("scalar");
    int64_t y_ld = rows + 3, nb = k / xt_vals(wt);
    uint8_t *w = malloc((size_t)(rows * nb) * xt_bytes(wt));
    float *x = malloc(sizeof(float) * (size_t)(n_tok * k));
    struct kern_q8_block *xq = NULL;
    struct kern_q8k_block *xk = NULL;
    float *ya = malloc(sizeof(float) * (size_t)(n_tok * y_ld)), *yb = malloc(sizeof(float) * (size_t)(n_tok * y_ld));
    free(xt_fill(w, wt, rows, k, wmode));
    xt_fill_x(x, n_tok * k, xmode);
    if (outlier) x[(n_tok - 1) * k + 7] = -1e6f; /* most quants of that block become 0 */
    if (kern_x_uses_q8k(wt)) {
        xk = malloc(sizeof(*xk) * (size_t)(n_tok * (k / 256)));
        kern_q8k_quantize(xk, x, n_tok, k);
    } else {
        xq = malloc(sizeof(*xq) * (size_t)(n_tok * (k / 32)));
        kern_q8_quantize(xq, x, n_tok, k);
    }
    for (int64_t i = 0; i < n_tok * y_ld; i++) ya[i] = yb[i] = -7.5f;
    ref->matmul_x(ya, y_ld, w, wt, xq, xk, n_tok, k, r0, r1);
    ops->matmul_x(yb, y_ld, w, wt, xq, xk, n_tok, k, r0, r1);
    cr_assert(memcmp(ya, yb, sizeof(float) * (size_t)(n_tok * y_ld)) == 0,
              "%s %s k %lld rows [%lld, %lld) of %lld n_tok %lld modes %d/%d differs from scalar", ops->name,
              xt_name(wt), (long long)k, (long long)r0, (long long)r1, (long long)rows, (long long)n_tok, wmode, xmode);
    free(w); free(x); free(xq); free(xk); free(ya); free(yb);
}

static void variant_equal(const char *variant)
{
    const struct kern_ops *ops = cpu_level_ops_or_skip(variant);
    cr_assert_not_null(ops->matmul_x);
    xt_seed(17);
    for (int ti = 0; ti < 3; ti++) {
        int wt = xt_types[ti];
        /* 32-value types: 1, 3, 8, 9 (a tail past the 8 lanes), 25 and 128 blocks */
        const int64_t ks32[6] = { 32, 96, 256, 288, 800, 4096 }, ks256[6] = { 256, 512, 768, 1280, 2304, 4096 };
        const int64_t *ks = wt == KERN_X_IQ4_XS ? ks256 : ks32;
        for (int64_t n_tok = 1; n_tok <= 20; n_tok++)
            for (int ki = 0; ki < 6; ki++) {
                int64_t rows = 1 + (int64_t)(xt_next() % 37);
                int64_t r0 = (int64_t)(xt_next() % (uint64_t)rows), r1 = r0 + 1 + (int64_t)(xt_next() % (uint64_t)(rows - r0));
                xt_case(ops, wt, rows, ks[ki], n_tok, r0, r1, XT_RANDOM, XT_RANDOM, (n_tok + ki) % 5 == 4);
            }
        const enum xt_fill modes[5] = { XT_RANDOM, XT_MAX, XT_NEGMAX, XT_ZERO, XT_LOW };
        for (int wm = 0; wm < 5; wm++)
            for (int xm = 0; xm < 5; xm++)
                for (int64_t n_tok = 1; n_tok <= 17; n_tok += 8)
                    xt_case(ops, wt, 21, 512, n_tok, 0, 21, modes[wm], modes[xm], false);
        for (int64_t n_tok = 15; n_tok <= 35; n_tok += 5)
            xt_case(ops, wt, 53, 2048, n_tok, 3, 3 + 16 * (n_tok % 3) + 7, XT_RANDOM, XT_RANDOM, n_tok == 25);
        /* prefill shapes: IQ4_NL's panel route (iq4_avx512.c, decoded chunks of whole 16-row
         * groups, a remainder, K at the panel limit and past it) */
        xt_case(ops, wt, 150, 1024, 40, 5, 149, XT_RANDOM, XT_RANDOM, false);
        xt_case(ops, wt, 37, 8192, 17, 0, 37, XT_RANDOM, XT_RANDOM, true);
        xt_case(ops, wt, 9, wt == KERN_X_IQ4_XS ? 8448 : 8224, 18, 1, 9, XT_RANDOM, XT_RANDOM, false);
    }
}

Test(kernels_xtypes, scalar_table_is_reference) { variant_equal("scalar"); }
Test(kernels_xtypes, avx2_equals_scalar) { variant_equal("avx2"); }
Test(kernels_xtypes, avx512vnni_equals_scalar) { variant_equal("avx512vnni"); }
Test(kernels_xtypes, avx512_equals_scalar) { variant_equal("avx512"); }

/* Every available variant: T tokens at once equal T single-token calls, and rows split in
 * pieces equal one call over all rows. */
Test(kernels_xtypes, batch_and_range_invariance)
{
    static const char *variants[4] = { "scalar", "avx2", "avx512vnni", "avx512" };
    xt_seed(29);
    for (int ti = 0; ti < 3; ti++) {
        int wt = xt_types[ti];
        int64_t rows = 13, k = 768, T = 11, nb = k / xt_vals(wt);
        uint8_t *w = malloc((size_t)(rows * nb) * xt_bytes(wt));
        free(xt_fill(w, wt, rows, k, XT_RANDOM));
        float *x = malloc(sizeof(float) * (size_t)(T * k));
        struct kern_q8_block xq[11 * 24];
        struct kern_q8k_block xk[11 * 3];
        xt_fill_x(x, T * k, XT_RANDOM);
        kern_q8_quantize(xq, x, T, k);
        kern_q8k_quantize(xk, x, T, k);
        for (int v = 0; v < 4; v++) {
            if (!cpu_level_runs(variants[v])) continue;
            const struct kern_ops *ops = kern_ops_for(variants[v]);
            float ya[11 * 13], yb[11 * 13];
            ops->matmul_x(ya, rows, w, wt, xq, xk, T, k, 0, rows);
            for (int64_t t = 0; t < T; t++) {
                ops->matmul_x(yb + t * rows, rows, w, wt, xq + t * 24, xk + t * 3, 1, k, 0, 6);
                ops->matmul_x(yb + t * rows, rows, w, wt, xq + t * 24, xk + t * 3, 1, k, 6, rows);
            }
            cr_assert(memcmp(ya, yb, sizeof ya) == 0, "%s %s: batch/range changed bits", variants[v], xt_name(wt));
        }
        free(x);
        free(w);
    }
}

/* ---- the quantizers: round trip bounds ------------------------------------------------------ */

/* x -> row -> f32 for rows of assorted scales: Q5_1 within 0.55 steps d (plus the f16 rounding of
 * the offset), IQ4_NL within 14.5 |d| (the codebook's widest half-gap is 12 steps, and values
 * beyond its positive end 113 lose up to 14), IQ4_XS within 14.5 |dl| + 64 |d| of the
 * sub-block's stored scale (the 6-bit scale grid of d adds at most half a step of d per index
 * unit, 127 units); and the mean squared error small against the signal (measured: ~0.8% Q5_1,
 * ~5% IQ4). A row of zeros stays zeros. */
Test(kernels_xtypes, quantize_round_trip_bounds)
{
    xt_seed(41);
    for (int ti = 0; ti < 3; ti++) {
        int wt = xt_types[ti];
        int64_t k = 2048;
        float *x = malloc(sizeof(float) * (size_t)k), *back = malloc(sizeof(float) * (size_t)k);
        uint8_t *w = malloc(kern_x_row_bytes(wt, k));
        for (int rep = 0; rep < 20; rep++) {
            float scale = ldexpf(1.0f, (int)(xt_next() % 20) - 10);
            for (int64_t i = 0; i < k; i++) x[i] = scale * (xt_uniform() + (rep % 3 == 0 ? 0.7f : 0.0f));
            if (rep == 19) memset(x, 0, sizeof(float) * (size_t)k);
            kern_row_from_f32(w, (enum kern_wtype)wt, x, k);
            kern_row_to_f32(back, w, (enum kern_wtype)wt, k, 0);
            double se = 0, sx = 0;
            for (int64_t i = 0; i < k; i++) {
                double e = fabs((double)back[i] - x[i]);
                se += e * e;
                sx += (double)x[i] * x[i];
                const uint8_t *blk = w + (size_t)(i / xt_vals(wt)) * xt_bytes(wt);
                double d = fabs((double)hs_f16_to_f32(hs_rd_u16(blk))), bound;
                if (wt == KERN_X_Q5_1) {
                    bound = 0.55 * d + fabs((double)hs_f16_to_f32(hs_rd_u16(blk + 2))) * 0x1p-10;
                } else if (wt == KERN_X_IQ4_NL) {
                    bound = 14.5 * d;
                } else {
                    int s = (int)(i % 256) / 32;
                    int ls = ((blk[4 + s / 2] >> 4 * (s % 2)) & 15) | ((hs_rd_u16(blk + 2) >> 2 * s) & 3) << 4;
                    bound = 14.5 * d * abs(ls - 32) + 64.0 * d;
                }
                cr_assert(e <= bound * (1 + 1e-6) + 1e-30, "%s rep %d i %lld: %a -> %a (bound %g)", xt_name(wt), rep,
                          (long long)i, (double)x[i], (double)back[i], bound);
            }
            if (rep == 19) cr_assert_eq(se, 0.0);
            else cr_assert(se <= (wt == KERN_X_Q5_1 ? 1e-3 : 1e-2) * sx, "%s rep %d: relative mse %g", xt_name(wt), rep, se / sx);
        }
        free(x);
        free(back);
        free(w);
    }
}

/* ---- hostile scales ------------------------------------------------------------------------ */

Test(kernels_xtypes, bad_scale_found)
{
    xt_seed(53);
    for (int ti = 0; ti < 3; ti++) {
        int wt = xt_types[ti];
        int64_t rows = 4, k = 512, nb = k / xt_vals(wt);
        uint8_t *w = malloc((size_t)(rows * nb) * xt_bytes(wt));
        free(xt_fill(w, wt, rows, k, XT_RANDOM));
        cr_assert_eq(kern_x_bad_scale(w, wt, rows, k), -1, "%s: finite scales flagged", xt_name(wt));
        const uint16_t bad[3] = { 0x7c00, 0xfc00, 0x7e01 }; /* +inf, -inf, NaN */
        for (int j = 0; j < 3; j++) {
            int64_t at = 2 * nb + 1;
            uint8_t *blk = w + (size_t)at * xt_bytes(wt), keep[4];
            memcpy(keep, blk, 4);
            int off = wt == KERN_X_Q5_1 && j == 2 ? 2 : 0; /* Q5_1's offset m is checked too */
            put16(blk + off, bad[j]);
            cr_assert_eq(kern_x_bad_scale(w, wt, rows, k), at, "%s: scale %04x not found", xt_name(wt), bad[j]);
            memcpy(blk, keep, 4);
        }
        free(w);
    }
}
