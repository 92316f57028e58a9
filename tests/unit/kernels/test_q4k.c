/* Tests of the K-quant kernels (q4k.c, q6k.c and their _avx2 / _avx512 variants): the Q4_K /
 * Q6_K row dequantizer on hand-packed blocks of known values, the Q8_K activation quantizer on
 * known inputs, the integer matmul against the dequantized float dot, every SIMD variant equal
 * to the scalar reference bit for bit (random blocks, shapes, row ranges, strides), and batch /
 * row-range invariance. A variant the CPU lacks is skipped, with a message saying so. */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "kernels/kernels.h"
#include "unit/cpu_level.h"

static uint64_t qk_rng;
static void qk_seed(uint64_t s) { qk_rng = s * 0x9E3779B97F4A7C15ull + 11; }
static uint64_t qk_next(void)
{
    uint64_t z = (qk_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static float qk_uniform(void) { return (float)((double)(qk_next() >> 11) / 9007199254740992.0) * 2.0f - 1.0f; }
static void qk_put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

/* ---- packing (the test's own inverse of the layouts in q4k.c and q6k.c) -------------------- */

/* Pack 6-bit sc[8], m[8] into the 12 scale bytes of a Q4_K block. */
static void pack_q4k_scales(uint8_t *s12, const uint8_t *sc, const uint8_t *m)
{
    memset(s12, 0, 12);
    for (int j = 0; j < 4; j++) {
        s12[j] = (uint8_t)((sc[j] & 63) | (sc[j + 4] >> 4) << 6);
        s12[j + 4] = (uint8_t)((m[j] & 63) | (m[j + 4] >> 4) << 6);
        s12[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
    }
}

static void pack_q4k(uint8_t *blk, uint16_t d, uint16_t dmin, const uint8_t *sc, const uint8_t *m,
                     const uint8_t *q)
{
    qk_put16(blk, d);
    qk_put16(blk + 2, dmin);
    pack_q4k_scales(blk + 4, sc, m);
    for (int j = 0; j < 4; j++)
        for (int l = 0; l < 32; l++)
            blk[16 + 32 * j + l] = (uint8_t)(q[64 * j + l] | q[64 * j + 32 + l] << 4);
}

static void pack_q6k(uint8_t *blk, uint16_t d, const int8_t *sc, const uint8_t *q)
{
    memset(blk, 0, KERN_Q6K_BYTES);
    for (int i = 0; i < 256; i++) {
        int h = i / 128, k = (i % 128) / 32, l = i % 32;
        uint8_t *lo = blk + 64 * h + 32 * (k & 1) + l;
        *lo = (uint8_t)(*lo | (k < 2 ? (q[i] & 15) : (q[i] & 15) << 4));
        blk[128 + 32 * h + l] = (uint8_t)(blk[128 + 32 * h + l] | (q[i] >> 4) << (2 * k));
    }
    memcpy(blk + 192, sc, 16);
    qk_put16(blk + 208, d);
}

/* ---- dequantization ----------------------------------------------------------------------- */

Test(kernels_q4k, row_bytes)
{
    cr_assert_eq(kern_row_bytes((enum kern_wtype)KERN_K_Q4_K, 512), 288);
    cr_assert_eq(kern_row_bytes((enum kern_wtype)KERN_K_Q6_K, 768), 630);
    cr_assert_eq(kern_row_bytes((enum kern_wtype)KERN_K_Q4_K, 100), 0);
    cr_assert_eq(kern_row_bytes((enum kern_wtype)KERN_K_Q6_K, 0), 0);
    cr_assert(kern_wtype_is_k(KERN_K_Q4_K) && kern_wtype_is_k(KERN_K_Q6_K));
    cr_assert(!kern_wtype_is_k(KERN_W_Q8_0) && !kern_wtype_is_k(16) && !kern_wtype_is_k(20)); /* 18 is Q5_K */
}

Test(kernels_q4k, scales_unpack_fixed_bytes)
{
    /* bytes 0..11 = 0x41, 0x82, 0xC3, 0x04, 0x05, 0x46, 0x87, 0xC8, 0x9A, 0xBC, 0xDE, 0xF1 */
    static const uint8_t s12[12] = { 0x41, 0x82, 0xC3, 0x04, 0x05, 0x46, 0x87, 0xC8, 0x9A, 0xBC, 0xDE, 0xF1 };
    uint8_t sc[8], m[8];
    kern_q4k_scales(s12, sc, m);
    /* j < 4: low 6 bits; j >= 4: low nibble of byte j+4 | top 2 bits of byte j-4 (sc) or j (m) */
    static const uint8_t want_sc[8] = { 0x01, 0x02, 0x03, 0x04, 0x1A, 0x2C, 0x3E, 0x01 };
    static const uint8_t want_m[8] = { 0x05, 0x06, 0x07, 0x08, 0x09, 0x1B, 0x2D, 0x3F };
    cr_assert_arr_eq(sc, want_sc, 8);
    cr_assert_arr_eq(m, want_m, 8);
}

Test(kernels_q4k, dequant_q4k_known_values)
{
    uint8_t sc[8], m[8], q[256], blk[KERN_Q4K_BYTES];
    for (int s = 0; s < 8; s++) {
        sc[s] = (uint8_t)(7 * s + 5);  /* up to 54: high bits in use */
        m[s] = (uint8_t)(63 - 5 * s);
    }
    for (int i = 0; i < 256; i++) q[i] = (uint8_t)((i * 7 + 3) % 16);
    pack_q4k(blk, 0x3800 /* 0.5 */, 0x2C00 /* 0.0625 */, sc, m, q);
    float out[256];
    kern_row_to_f32(out, blk, (enum kern_wtype)KERN_K_Q4_K, 256, 0);
    for (int i = 0; i < 256; i++) {
        float want = (0.5f * (float)sc[i / 32]) * (float)q[i] - 0.0625f * (float)m[i / 32];
        cr_assert_eq(out[i], want, "value %d: %g, expected %g", i, (double)out[i], (double)want);
    }
    /* one value spelled out: i = 70 is sub-block 2 (sc 19, m 53), q = (70*7+3)%16 = 13 */
    cr_assert_eq(out[70], 0.5f * 19.0f * 13.0f - 0.0625f * 53.0f);
}

Test(kernels_q4k, dequant_q6k_known_values)
{
    int8_t sc[16];
    uint8_t q[256], blk[2 * KERN_Q6K_BYTES];
    for (int g = 0; g < 16; g++) sc[g] = (int8_t)(g % 2 ? -9 * g - 1 : 8 * g + 1);
    sc[15] = -128;
    for (int i = 0; i < 256; i++) q[i] = (uint8_t)((i * 37 + 11) % 64);
    memset(blk, 0xA5, sizeof blk);                       /* row 0: garbage; row 1 is checked */
    pack_q6k(blk + KERN_Q6K_BYTES, 0x3400 /* 0.25 */, sc, q);
    float out[256];
    kern_row_to_f32(out, blk, (enum kern_wtype)KERN_K_Q6_K, 256, 1);
    for (int i = 0; i < 256; i++) {
        float want = (0.25f * (float)sc[i / 16]) * (float)((int)q[i] - 32);
        cr_assert_eq(out[i], want, "value %d: %g, expected %g", i, (double)out[i], (double)want);
    }
    cr_assert_eq(out[255], 0.25f * -128.0f * (float)((255 * 37 + 11) % 64 - 32));
}

/* ---- activation quantizer ----------------------------------------------------------------- */

Test(kernels_q4k, q8k_quantize_known)
{
    float x[512];
    for (int i = 0; i < 256; i++) x[i] = (float)(i - 100) * 0.5f; /* max |x| = 77.5 at i = 255 */
    for (int i = 0; i < 256; i++) x[256 + i] = 0.0f;
    x[256 + 3] = -2.0f; x[256 + 4] = 1.0f;                         /* max |x| is negative */
    struct kern_q8k_block b[2];
    kern_q8k_quantize(b, x, 1, 512);
    float is0 = -127.0f / 77.5f;
    cr_assert_eq(b[0].d, 1.0f / is0);
    cr_assert_eq(b[0].q[255], -127);
    cr_assert_eq(b[0].q[100], 0);
    for (int i = 0; i < 256; i++) cr_assert_eq(b[0].q[i], (int8_t)nearbyintf(is0 * x[i]));
    for (int g = 0; g < 16; g++) {
        int s = 0;
        for (int i = 0; i < 16; i++) s += b[0].q[16 * g + i];
        cr_assert_eq(b[0].bsum[g], s);
    }
    cr_assert_eq(b[1].d, 1.0f / 63.5f);   /* iscale = -127 / -2 */
    cr_assert_eq(b[1].q[3], -127);
    cr_assert_eq(b[1].q[4], 64);          /* 63.5 rounds to even */
    cr_assert_eq(b[1].bsum[0], -63);
    float z[256] = {0};
    kern_q8k_quantize(b, z, 1, 256);
    cr_assert_eq(b[0].d, 0.0f);
    cr_assert_eq(b[0].bsum[5], 0);
}

/* Every variant's q8k_quantize equals kern_q8k_quantize byte for byte (the whole block: d, q,
 * bsum): random blocks of many magnitudes; the largest |x| at both signs, twice, first / last
 * in the block (the first one sets the sign of iscale); exact ties (x * iscale = n + 0.5);
 * NaN (skipped by the max, then -127) and +-inf (iscale -0); all zero, -0, subnormal only;
 * several tokens, K of 1 to 14 blocks. */
static void q8k_quantize_cases(const char *variant)
{
    const struct kern_ops *ops = cpu_level_ops_or_skip(variant);
    qk_seed(505);
    for (int it = 0; it < 60; it++) {
        int64_t n_tok = 1 + (int64_t)(qk_next() % 3), nb = 1 + (int64_t)(qk_next() % 14),
                k = nb * 256;
        float *x = malloc(sizeof(float) * (size_t)(n_tok * k));
        struct kern_q8k_block *a = malloc(sizeof(*a) * (size_t)(n_tok * nb)),
                              *b = malloc(sizeof(*b) * (size_t)(n_tok * nb));
        cr_assert(x && a && b);
        for (int64_t i = 0; i < n_tok * k; i++)
            x[i] = ldexpf(qk_uniform(), (int)(qk_next() % 41) - 20);
        for (int64_t blk = 0; blk < n_tok * nb; blk++) {
            float *v = x + blk * 256;
            int i0 = (int)(qk_next() % 256), i1 = (int)(qk_next() % 256);
            switch ((it + blk) % 12) {
            case 0: v[i0] = 3.0f; v[i1] = -3.0f; break;          /* the same |x| at both signs */
            case 1: v[0] = -7.0f; v[255] = 7.0f; break;
            case 2: v[255] = -1e3f; break;
            case 3: v[i0] = NAN; v[i1] = -NAN; break;
            case 4: v[i0] = INFINITY; break;
            case 5: v[i0] = -INFINITY; v[i1] = NAN; break;
            case 6: for (int i = 0; i < 256; i++) v[i] = i % 3 ? 0.0f : -0.0f; break;
            case 7:
                for (int i = 0; i < 256; i++) v[i] = ldexpf((float)(i % 7) - 3.0f, -140);
                break; /* subnormal */
            case 8: /* ties: max 127 so iscale = -1, and halves */
                for (int i = 0; i < 256; i++) v[i] = (float)((int)(qk_next() % 253) - 126) + 0.5f;
                v[i0] = 127.0f;
                break;
            case 9: for (int i = 0; i < 256; i++) v[i] = NAN; break;
            case 10: for (int i = 0; i < 256; i++) v[i] = (i % 2) ? 1e-3f : -1e-3f; break;
            default: break;
            }
        }
        memset(a, 0x5a, sizeof(*a) * (size_t)(n_tok * nb));
        memset(b, 0xa5, sizeof(*b) * (size_t)(n_tok * nb));
        kern_q8k_quantize(a, x, n_tok, k);
        ops->q8k_quantize(b, x, n_tok, k);
        for (int64_t blk = 0; blk < n_tok * nb; blk++) {
            cr_assert(memcmp(&a[blk].d, &b[blk].d, sizeof(float)) == 0 &&
                          memcmp(a[blk].q, b[blk].q, 256) == 0 &&
                          memcmp(a[blk].bsum, b[blk].bsum, sizeof a[blk].bsum) == 0,
                      "%s it %d block %lld (case %lld) differs from scalar", variant, it,
                      (long long)blk, (long long)((it + blk) % 12));
        }
        free(x); free(a); free(b);
    }
}
Test(kernels_q4k, q8k_quantize_scalar_table) { q8k_quantize_cases("scalar"); }
Test(kernels_q4k, q8k_quantize_avx2_equals_scalar) { q8k_quantize_cases("avx2"); }
Test(kernels_q4k, q8k_quantize_avx512_equals_scalar) { q8k_quantize_cases("avx512"); }

/* ---- matmul ------------------------------------------------------------------------------- */

/* A random [rows, k] K-quant matrix; scales of both signs for Q6_K, finite f16 d / dmin. */
static void fill_k(uint8_t *w, int wt, int64_t rows, int64_t k)
{
    size_t n = kern_row_bytes((enum kern_wtype)wt, k) * (size_t)rows;
    for (size_t i = 0; i < n; i++) w[i] = (uint8_t)qk_next();
    size_t bb = wt == KERN_K_Q4_K ? KERN_Q4K_BYTES : KERN_Q6K_BYTES;
    for (size_t b = 0; b < n / bb; b++) {
        uint8_t *blk = w + b * bb;
        float d = ldexpf(qk_uniform(), -(int)(qk_next() % 10));
        if (wt == KERN_K_Q4_K) {
            qk_put16(blk, hs_f32_to_f16(fabsf(d)));
            qk_put16(blk + 2, hs_f32_to_f16(fabsf(d) * 0.5f));
        } else {
            qk_put16(blk + 208, hs_f32_to_f16(d));
        }
    }
}

static void fill_x(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) x[i] = ldexpf(qk_uniform(), (int)(qk_next() % 9) - 4);
}

Test(kernels_q4k, matmul_matches_dequantized_dot)
{
    qk_seed(3);
    const int types[2] = { KERN_K_Q4_K, KERN_K_Q6_K };
    for (int ti = 0; ti < 2; ti++) {
        int64_t k = 768, rows = 5;
        uint8_t *w = malloc(kern_row_bytes((enum kern_wtype)types[ti], k) * (size_t)rows);
        float x[768], wr[768], y[5];
        struct kern_q8k_block xq[3];
        fill_k(w, types[ti], rows, k);
        fill_x(x, k);
        kern_q8k_quantize(xq, x, 1, k);
        kern_matmul_k(y, 5, w, types[ti], xq, 1, k, 0, rows);
        for (int64_t r = 0; r < rows; r++) {
            kern_row_to_f32(wr, w, (enum kern_wtype)types[ti], k, r);
            double s = 0, mag = 0;
            for (int64_t i = 0; i < k; i++) {
                double xv = (double)xq[i / 256].d * xq[i / 256].q[i % 256];
                s += (double)wr[i] * xv;
                mag += fabs((double)wr[i] * xv);
            }
            cr_assert(fabs((double)y[r] - s) <= 1e-5 * mag, "type %d row %lld: %g vs %g (mag %g)",
                      types[ti], (long long)r, (double)y[r], s, mag);
        }
        free(w);
    }
}

static void variant_equal(const char *variant)
{
    const struct kern_ops *ops = cpu_level_ops_or_skip(variant), *ref = kern_ops_for("scalar");
    qk_seed(17);
    const int types[2] = { KERN_K_Q4_K, KERN_K_Q6_K };
    const int64_t ks[3] = { 256, 512, 1280 };
    for (int it = 0; it < 24; it++) {
        int wt = types[it % 2];
        int64_t k = ks[(it / 2) % 3], rows = 1 + (int64_t)(qk_next() % 19), n_tok = 1 + (int64_t)(qk_next() % 11);
        int64_t r0 = (int64_t)(qk_next() % (uint64_t)rows), r1 = r0 + 1 + (int64_t)(qk_next() % (uint64_t)(rows - r0));
        int64_t y_ld = rows + 3;
        uint8_t *w = malloc(kern_row_bytes((enum kern_wtype)wt, k) * (size_t)rows);
        float *x = malloc(sizeof(float) * (size_t)(n_tok * k));
        struct kern_q8k_block *xq = malloc(sizeof(*xq) * (size_t)(n_tok * k / 256));
        float *ya = malloc(sizeof(float) * (size_t)(n_tok * y_ld)), *yb = malloc(sizeof(float) * (size_t)(n_tok * y_ld));
        fill_k(w, wt, rows, k);
        fill_x(x, n_tok * k);
        if (it % 5 == 4) x[7] = -x[7] * 1e6f; /* one outlier: most quants of its block become 0 */
        kern_q8k_quantize(xq, x, n_tok, k);
        for (int64_t i = 0; i < n_tok * y_ld; i++) ya[i] = yb[i] = -7.5f;
        ref->matmul_k(ya, y_ld, w, wt, xq, n_tok, k, r0, r1);
        ops->matmul_k(yb, y_ld, w, wt, xq, n_tok, k, r0, r1);
        cr_assert(memcmp(ya, yb, sizeof(float) * (size_t)(n_tok * y_ld)) == 0,
                  "%s type %d k %lld rows [%lld, %lld) n_tok %lld differs from scalar", variant, wt,
                  (long long)k, (long long)r0, (long long)r1, (long long)n_tok);
        free(w); free(x); free(xq); free(ya); free(yb);
    }
}

Test(kernels_q4k, scalar_table_is_reference) { variant_equal("scalar"); }
Test(kernels_q4k, avx2_equals_scalar) { variant_equal("avx2"); }
Test(kernels_q4k, avxvnni_equals_scalar) { variant_equal("avxvnni"); }
Test(kernels_q4k, avx512_equals_scalar) { variant_equal("avx512"); }

/* Batch and row-range invariance for every available variant: T tokens at once equal T
 * single-token calls, and rows split in pieces equal one call over all rows. */
Test(kernels_q4k, batch_and_range_invariance)
{
    static const char *variants[3] = { "scalar", "avx2", "avx512" };
    qk_seed(29);
    for (int v = 0; v < 3; v++) {
        if (!cpu_level_runs(variants[v])) continue;
        const struct kern_ops *ops = kern_ops_for(variants[v]);
        for (int ti = 0; ti < 2; ti++) {
            int wt = ti ? KERN_K_Q6_K : KERN_K_Q4_K;
            int64_t k = 512, rows = 13, T = 9;
            uint8_t *w = malloc(kern_row_bytes((enum kern_wtype)wt, k) * (size_t)rows);
            float x[9 * 512], ya[9 * 13], yb[9 * 13];
            struct kern_q8k_block xq[9 * 2], x1[2];
            fill_k(w, wt, rows, k);
            fill_x(x, T * k);
            kern_q8k_quantize(xq, x, T, k);
            ops->matmul_k(ya, rows, w, wt, xq, T, k, 0, rows);
            for (int64_t t = 0; t < T; t++) {
                kern_q8k_quantize(x1, x + t * k, 1, k);
                cr_assert(memcmp(x1, xq + t * 2, sizeof x1) == 0);
                ops->matmul_k(yb + t * rows, rows, w, wt, x1, 1, k, 0, 5);
                ops->matmul_k(yb + t * rows, rows, w, wt, x1, 1, k, 5, 6);
                ops->matmul_k(yb + t * rows, rows, w, wt, x1, 1, k, 6, rows);
            }
            cr_assert(memcmp(ya, yb, sizeof ya) == 0, "%s type %d: batch/range changed bits", variants[v], wt);
            free(w);
        }
    }
}

/* ---- the AVX-512 panel path (several tokens, 16-row groups, VNNI) ---------------------------
 * q4k_avx512.c and q6k_avx512.c repack whole 16-row groups when n_tok >= 4 and leave the rows
 * past the last full group, single tokens and very long K to the per-row code: these tests
 * cross every one of those borders and compare with the scalar reference bit for bit. */

enum qk_fill { QK_RANDOM, QK_MAX, QK_MAX_ALT, QK_ZERO, QK_QMIN };

/* Weights of a fill mode: random (fill_k), every value and scale at its largest (Q4_K q 15, sc
 * and m 63; Q6_K q 63, sc -128 in even groups and 127 in odd; d = dmin = 65504), the same
 * with every q 0 (QK_QMIN: Q6_K's q - 32 at its most negative), or all zero. */
static void fill_mode(uint8_t *w, int wt, int64_t rows, int64_t k, enum qk_fill mode)
{
    size_t n = kern_row_bytes((enum kern_wtype)wt, k) * (size_t)rows;
    if (mode == QK_RANDOM) { fill_k(w, wt, rows, k); return; }
    memset(w, 0, n);
    if (mode == QK_ZERO) return;
    size_t bb = wt == KERN_K_Q4_K ? KERN_Q4K_BYTES : KERN_Q6K_BYTES;
    for (size_t b = 0; b < n / bb; b++) {
        uint8_t *blk = w + b * bb;
        if (wt == KERN_K_Q4_K) {
            uint8_t sc[8], m[8], q[256];
            memset(sc, 63, 8);
            memset(m, 63, 8);
            memset(q, mode == QK_QMIN ? 0 : 15, 256);
            pack_q4k(blk, 0x7bff, 0x7bff, sc, m, q);
        } else {
            int8_t sc[16];
            uint8_t q[256];
            for (int g = 0; g < 16; g++) sc[g] = (int8_t)(g % 2 ? 127 : -128);
            memset(q, mode == QK_QMIN ? 0 : 63, 256);
            pack_q6k(blk, 0x7bff, sc, q);
        }
    }
}

/* Activations of a fill mode: random (fill_x), all -1 (every quant -127: the largest integer
 * sums, 16 * 15 * 127 per half sub-block in the Q4_K panel), +-1 alternating in runs of 4, or
 * all zero (d = 0). */
static void fill_x_mode(float *x, int64_t n, enum qk_fill mode)
{
    for (int64_t i = 0; i < n; i++) {
        switch (mode) {
        case QK_RANDOM: x[i] = ldexpf(qk_uniform(), (int)(qk_next() % 9) - 4); break;
        case QK_MAX: x[i] = -1.0f; break;
        case QK_MAX_ALT: x[i] = (i / 4) % 2 ? 1.0f : -1.0f; break;
        case QK_ZERO: case QK_QMIN: x[i] = 0.0f; break;
        }
    }
}

/* ops->matmul_k over rows [r0, r1) of a fresh matrix vs the scalar reference, memcmp on the
 * whole output (rows outside the range must stay untouched). */
static void panel_case(const struct kern_ops *ops, int wt, int64_t rows, int64_t k, int64_t n_tok,
                       int64_t r0, int64_t r1, enum qk_fill wmode, enum qk_fill xmode)
{
    int64_t y_ld = rows + 5;
    uint8_t *w = malloc(kern_row_bytes((enum kern_wtype)wt, k) * (size_t)rows);
    float *x = malloc(sizeof(float) * (size_t)(n_tok * k));
    struct kern_q8k_block *xq = malloc(sizeof(*xq) * (size_t)(n_tok * k / 256));
    float *ya = malloc(sizeof(float) * (size_t)(n_tok * y_ld)), *yb = malloc(sizeof(float) * (size_t)(n_tok * y_ld));
    cr_assert(w && x && xq && ya && yb);
    fill_mode(w, wt, rows, k, wmode);
    fill_x_mode(x, n_tok * k, xmode);
    kern_q8k_quantize(xq, x, n_tok, k);
    for (int64_t i = 0; i < n_tok * y_ld; i++) ya[i] = yb[i] = -7.5f;
    kern_matmul_k(ya, y_ld, w, wt, xq, n_tok, k, r0, r1);
    ops->matmul_k(yb, y_ld, w, wt, xq, n_tok, k, r0, r1);
    for (int64_t i = 0; i < n_tok * y_ld; i++)
        cr_assert(memcmp(&ya[i], &yb[i], sizeof(float)) == 0,
                  "type %d k %lld rows [%lld, %lld) n_tok %lld modes %d/%d: y[%lld][%lld] = %a, scalar %a", wt,
                  (long long)k, (long long)r0, (long long)r1, (long long)n_tok, (int)wmode, (int)xmode,
                  (long long)(i / y_ld), (long long)(i % y_ld), (double)yb[i], (double)ya[i]);
    free(w); free(x); free(xq); free(ya); free(yb);
}

/* The panel tests run on both panel paths: q4k_avx512.c's 16-row groups and q4k_avx2.c's
 * 8-row groups (Q6_K: q6k_avx512.c's panels; the AVX2 per-row code). */

/* Every n_tok 1..20 (the tile's token counts and remainders, and the per-row code below 4) on
 * row counts around multiples of 16 (and of 8) and ranges that start inside a group. */
static void panel_shapes(const struct kern_ops *ops)
{
    qk_seed(101);
    static const int64_t shapes[][3] = { /* rows, r0, r1 */
        { 16, 0, 16 }, { 17, 0, 17 }, { 31, 0, 31 }, { 32, 0, 32 }, { 50, 3, 50 }, { 70, 5, 69 }, { 40, 0, 15 },
    };
    for (int ti = 0; ti < 2; ti++) {
        int wt = ti ? KERN_K_Q6_K : KERN_K_Q4_K;
        for (int64_t n_tok = 1; n_tok <= 20; n_tok++) {
            const int64_t *s = shapes[n_tok % 7];
            int64_t k = 256 * (1 + n_tok % 3);
            panel_case(ops, wt, s[0], k, n_tok, s[1], s[2], QK_RANDOM, QK_RANDOM);
        }
    }
}
Test(kernels_q4k_panel, shapes_equal_scalar) { panel_shapes(cpu_level_ops_or_skip("avx512")); }
Test(kernels_q4k_panel, avx2_shapes_equal_scalar) { panel_shapes(cpu_level_ops_or_skip("avx2")); }
Test(kernels_q4k_panel, avxvnni_shapes_equal_scalar) { panel_shapes(cpu_level_ops_or_skip("avxvnni")); }

/* Random row ranges and K, including K past the panel's capacity (the per-row fallback) and
 * K where one group fills the panel. */
static void panel_ranges(const struct kern_ops *ops)
{
    qk_seed(202);
    /* AVX-512: 49, 50 super-blocks fill a panel; AVX2: 48 does, 49 is past it */
    static const int64_t ks[] = { 256, 1024, 3584, 256 * 48, 256 * 49, 256 * 50, 256 * 52 };
    for (int it = 0; it < 28; it++) {
        int wt = it % 2 ? KERN_K_Q6_K : KERN_K_Q4_K;
        int64_t k = ks[(it / 2) % 7];
        int64_t rows = 16 + (int64_t)(qk_next() % (k > 4096 ? 20 : 60)), n_tok = 4 + (int64_t)(qk_next() % 9);
        int64_t r0 = (int64_t)(qk_next() % (uint64_t)(rows / 2)), r1 = r0 + 1 + (int64_t)(qk_next() % (uint64_t)(rows - r0));
        if (it % 3 == 0) { r0 = 0; r1 = rows; }
        panel_case(ops, wt, rows, k, n_tok, r0, r1, QK_RANDOM, QK_RANDOM);
    }
}
Test(kernels_q4k_panel, ranges_and_long_k_equal_scalar) { panel_ranges(cpu_level_ops_or_skip("avx512")); }
Test(kernels_q4k_panel, avx2_ranges_and_long_k_equal_scalar) { panel_ranges(cpu_level_ops_or_skip("avx2")); }
Test(kernels_q4k_panel, avxvnni_ranges_and_long_k_equal_scalar) { panel_ranges(cpu_level_ops_or_skip("avxvnni")); }

/* The largest values everywhere (the int16 half-sums of the Q4_K panel at their bound, Q6_K
 * scales -128 and 127 with q 63), q 0 (Q6_K's offset half-sums at 8 * 32 * 127), the
 * mixed-sign versions, and all-zero weights / activations. */
static void panel_extremes(const struct kern_ops *ops)
{
    qk_seed(303);
    static const enum qk_fill modes[][2] = {
        { QK_MAX, QK_MAX }, { QK_MAX, QK_MAX_ALT }, { QK_MAX, QK_RANDOM }, { QK_RANDOM, QK_MAX },
        { QK_ZERO, QK_RANDOM }, { QK_RANDOM, QK_ZERO }, { QK_ZERO, QK_ZERO }, { QK_QMIN, QK_MAX },
        { QK_QMIN, QK_MAX_ALT },
    };
    for (int ti = 0; ti < 2; ti++)
        for (int mi = 0; mi < 9; mi++)
            panel_case(ops, ti ? KERN_K_Q6_K : KERN_K_Q4_K, 37, 512, 6, 0, 37, modes[mi][0], modes[mi][1]);
}
Test(kernels_q4k_panel, extremes_equal_scalar) { panel_extremes(cpu_level_ops_or_skip("avx512")); }
Test(kernels_q4k_panel, avx2_extremes_equal_scalar) { panel_extremes(cpu_level_ops_or_skip("avx2")); }
Test(kernels_q4k_panel, avxvnni_extremes_equal_scalar) { panel_extremes(cpu_level_ops_or_skip("avxvnni")); }

/* One token (a decode step, the LM head): q4k_avx2.c's q4k_rows1 and q6k_avx2.c's q6k_rows1
 * take every row of a single-token call. Every fill mode (the integer sums at their bounds,
 * q 0, zeros), then random K (one block to past the panels' capacity, the model's 3584) and
 * row ranges that start and end anywhere. */
static void one_token_cases(const struct kern_ops *ops)
{
    qk_seed(404);
    static const enum qk_fill modes[][2] = {
        { QK_MAX, QK_MAX }, { QK_MAX, QK_MAX_ALT }, { QK_MAX, QK_RANDOM }, { QK_RANDOM, QK_MAX },
        { QK_ZERO, QK_RANDOM }, { QK_RANDOM, QK_ZERO }, { QK_ZERO, QK_ZERO }, { QK_QMIN, QK_MAX },
        { QK_QMIN, QK_MAX_ALT }, { QK_RANDOM, QK_RANDOM },
    };
    for (int ti = 0; ti < 2; ti++)
        for (int mi = 0; mi < 10; mi++)
            panel_case(ops, ti ? KERN_K_Q6_K : KERN_K_Q4_K, 11, 1024, 1, 0, 11, modes[mi][0],
                       modes[mi][1]);
    static const int64_t ks[] = { 256, 512, 1024, 2048, 3584, 256 * 52 };
    for (int it = 0; it < 36; it++) {
        int wt = it % 2 ? KERN_K_Q6_K : KERN_K_Q4_K;
        int64_t k = ks[(it / 2) % 6], rows = 1 + (int64_t)(qk_next() % 40);
        int64_t r0 = (int64_t)(qk_next() % (uint64_t)rows),
                r1 = r0 + 1 + (int64_t)(qk_next() % (uint64_t)(rows - r0));
        panel_case(ops, wt, rows, k, 1, r0, r1, QK_RANDOM, QK_RANDOM);
    }
}
Test(kernels_q4k, one_token_equal_scalar) { one_token_cases(cpu_level_ops_or_skip("avx512")); }
Test(kernels_q4k, avx2_one_token_equal_scalar) { one_token_cases(cpu_level_ops_or_skip("avx2")); }
Test(kernels_q4k, avxvnni_one_token_equal_scalar) { one_token_cases(cpu_level_ops_or_skip("avxvnni")); }

/* A hand-checked value through the panel: 16 rows, one block of Q4_K with q 15, sc 63, m 0,
 * d = 1, and activations all -1 (quants -127, d = 1/127 rounded): isum = 256 * 15 * 63 * -127. */
static void panel_known(const struct kern_ops *ops)
{
    uint8_t w[16 * KERN_Q4K_BYTES], sc[8], m[8], q[256];
    memset(sc, 63, 8);
    memset(m, 0, 8);
    memset(q, 15, 256);
    for (int r = 0; r < 16; r++) pack_q4k(w + r * KERN_Q4K_BYTES, 0x3c00 /* 1.0 */, 0x3c00, sc, m, q);
    float x[4 * 256], y[4 * 16];
    for (int i = 0; i < 4 * 256; i++) x[i] = -1.0f;
    struct kern_q8k_block xq[4];
    kern_q8k_quantize(xq, x, 4, 256);
    ops->matmul_k(y, 16, w, KERN_K_Q4_K, xq, 4, 256, 0, 16);
    float want = fmaf(-(1.0f * xq[0].d), 0.0f, fmaf(1.0f * xq[0].d, (float)(256 * 15 * 63 * -127), 0.0f));
    for (int i = 0; i < 4 * 16; i++) cr_assert_eq(y[i], want, "y[%d] = %a, expected %a", i, (double)y[i], (double)want);
}
Test(kernels_q4k_panel, known_value) { panel_known(cpu_level_ops_or_skip("avx512")); }
Test(kernels_q4k_panel, avx2_known_value) { panel_known(cpu_level_ops_or_skip("avx2")); }
Test(kernels_q4k_panel, avxvnni_known_value) { panel_known(cpu_level_ops_or_skip("avxvnni")); }
