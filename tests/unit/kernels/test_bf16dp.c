/* Tests of the bf16 x bf16 matmul (bf16.c, bf16_avx2.c, bf16_avx512.c; kernels.h "BF16
 * weights"): the rounding rule on hand values, the flush-to-zero boundary against a rule
 * written here from the contract (exact double arithmetic), every variant bit-identical to
 * the scalar reference on random shapes with subnormals, zeros of both signs, values near
 * FLT_MIN and infinities, and batch / row-range / thread invariance. A variant the CPU
 * lacks is skipped with a message. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "kernels/kernels.h"
#include "unit/cpu_level.h"

static uint64_t dp_rng;
static void dp_seed(uint64_t s) { dp_rng = s * 0x9E3779B97F4A7C15ull + 3; }
static uint64_t dp_next(void)
{
    uint64_t z = (dp_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint16_t bf(float f) { return (uint16_t)(f2u(f) >> 16); } /* exact for the values used */

typedef void (*bf16_mm_fn)(float *, int64_t, const void *, const uint16_t *, int64_t, int64_t, int64_t,
                           int64_t);
typedef void (*bf16_round_fn)(uint16_t *, const float *, int64_t);

struct dp_variant {
    const char *name;
    bf16_mm_fn mm;
    bf16_round_fn round;
};

/* The variants: the bf16 entries of every dispatch table (avx512vnni's matmul is the FMA
 * form of the contract inside the AVX-512 file, kern_bf16_matmul_avx512f). One test per
 * variant through Criterion's parameters, a skip naming it where it does not run
 * (cpu_level.h). */
static const char *const dp_names[] = { "scalar", "avx2", "avx512vnni", "avx512" };

static struct dp_variant dp_variant_or_skip(int i)
{
    const struct kern_ops *o = cpu_level_ops_or_skip(dp_names[i]);
    return (struct dp_variant){ o->name, o->bf16_matmul, o->bf16_round };
}

/* every variant, scalar included */
#define DP_EVERY_VARIANT(test)                                                                   \
    ParameterizedTestParameters(bf16dp, test)                                                    \
    {                                                                                            \
        static int idx[] = { 0, 1, 2, 3 };                                                       \
        return cr_make_param_array(int, idx, 4);                                                 \
    }
/* the SIMD variants, each against the scalar reference */
#define DP_SIMD_VARIANTS(test)                                                                   \
    ParameterizedTestParameters(bf16dp, test)                                                    \
    {                                                                                            \
        static int idx[] = { 1, 2, 3 };                                                          \
        return cr_make_param_array(int, idx, 3);                                                 \
    }

/* Equal bits, or both NaN (inf - inf makes NaN; NaN payloads are not part of the contract). */
static bool same(float a, float b) { return f2u(a) == f2u(b) || (isnan(a) && isnan(b)); }

/* ---- rounding ----------------------------------------------------------------------------- */

DP_EVERY_VARIANT(round_hand_values)
ParameterizedTest(int *vi, bf16dp, round_hand_values)
{
    static const struct { uint32_t in; uint16_t out; } cases[] = {
        { 0x3f800000u, 0x3f80 }, /* 1.0 */
        { 0x3f808000u, 0x3f80 }, /* tie, even below */
        { 0x3f818000u, 0x3f82 }, /* tie, odd below: up */
        { 0x3f808001u, 0x3f81 }, /* above the tie */
        { 0xbf817fffu, 0xbf81 }, /* below the tie, negative */
        { 0x7f7fffffu, 0x7f80 }, /* FLT_MAX rounds to inf */
        { 0x7f800000u, 0x7f80 }, { 0xff800000u, 0xff80 },   /* infinities */
        { 0x7fa00000u, 0x7fe0 }, /* signalling NaN comes out quiet */
        { 0xffc00001u, 0xffc0 }, /* quiet NaN keeps its top bits */
        { 0x7f800001u, 0x7fc0 }, /* NaN whose payload is all in the dropped bits */
        { 0x00000001u, 0x0000 }, { 0x807fffffu, 0x8000 }, /* subnormals flush, sign kept */
        { 0x00800000u, 0x0080 }, /* FLT_MIN */
        { 0x80000000u, 0x8000 }, { 0x00000000u, 0x0000 },
    };
    struct dp_variant v = dp_variant_or_skip(*vi);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        float x[40];
        uint16_t y[40];
        for (int j = 0; j < 40; j++) x[j] = u2f(cases[(i + (size_t)j) % (sizeof cases / sizeof cases[0])].in);
        v.round(y, x, 40);
        for (int j = 0; j < 40; j++)
            cr_assert_eq(y[j], cases[(i + (size_t)j) % (sizeof cases / sizeof cases[0])].out,
                         "%s: round(0x%08x) = 0x%04x", v.name, f2u(x[j]), y[j]);
    }
}

DP_SIMD_VARIANTS(round_variants_match_scalar_on_random_bits)
ParameterizedTest(int *vi, bf16dp, round_variants_match_scalar_on_random_bits)
{
    struct dp_variant v = dp_variant_or_skip(*vi);
    enum { N = 4099 };
    static float x[N];
    static uint16_t ref[N], got[N];
    dp_seed(11);
    for (int it = 0; it < 20; it++) {
        for (int i = 0; i < N; i++) x[i] = u2f((uint32_t)dp_next());
        int64_t n = 1 + (int64_t)(dp_next() % N);
        kern_bf16_round(ref, x, n);
        memset(got, 0xAB, sizeof got);
        v.round(got, x, n);
        cr_assert(memcmp(ref, got, (size_t)n * 2) == 0, "%s differs from scalar (n = %lld)", v.name, (long long)n);
        cr_assert_eq(got[n < N ? n : N - 1], n < N ? 0xABAB : got[N - 1], "%s wrote past n", v.name);
    }
}

/* ---- data --------------------------------------------------------------------------------- */

/* A bf16 value: mostly moderate, or (edge) subnormal, zero of either sign, near FLT_MIN, large,
 * or infinite; never NaN. */
static uint16_t dp_val(bool edge)
{
    uint16_t sign = (uint16_t)((dp_next() & 1) << 15), mant = (uint16_t)(dp_next() & 0x7f);
    unsigned e;
    unsigned pick = (unsigned)(dp_next() % 1000);
    if (!edge || pick < 700) e = 120 + (unsigned)(dp_next() % 14);
    else if (pick < 800) e = 0;                                  /* subnormal or zero */
    else if (pick < 950) e = 1 + (unsigned)(dp_next() % 4);      /* products underflow */
    else if (pick < 998) e = 60 + (unsigned)(dp_next() % 8);     /* ~2^-64: sums of products near FLT_MIN */
    else return (uint16_t)(sign | 0x7f80);                       /* infinity */
    return (uint16_t)(sign | (e << 7) | mant);
}

static void dp_fill(uint16_t *p, int64_t n, bool edge)
{
    for (int64_t i = 0; i < n; i++) p[i] = dp_val(edge);
}

/* Variant v against the scalar reference on [rows, k] x [n_tok, k], over row range
 * [r0, r1), output stride y_ld (gaps must stay untouched). */
static void check_shape(const struct dp_variant *v, int64_t rows, int64_t k, int64_t n_tok, bool edge)
{
    uint16_t *w = malloc((size_t)(rows * k) * 2), *x = malloc((size_t)(n_tok * k) * 2);
    int64_t y_ld = rows + 3;
    float *ref = malloc((size_t)(n_tok * y_ld) * 4), *got = malloc((size_t)(n_tok * y_ld) * 4);
    cr_assert(w && x && ref && got);
    dp_fill(w, rows * k, edge);
    dp_fill(x, n_tok * k, edge);
    int64_t r0 = rows > 2 ? (int64_t)(dp_next() % 2) : 0, r1 = rows - (rows > 3 ? (int64_t)(dp_next() % 2) : 0);
    for (int64_t i = 0; i < n_tok * y_ld; i++) ref[i] = got[i] = -7.25f;
    kern_bf16_matmul(ref, y_ld, w, x, n_tok, k, r0, r1);
    v->mm(got, y_ld, w, x, n_tok, k, r0, r1);
    for (int64_t i = 0; i < n_tok * y_ld; i++)
        cr_assert(same(ref[i], got[i]), "%s rows %lld k %lld n_tok %lld [%lld, %lld) edge %d: y[%lld] %a vs scalar %a",
                  v->name, (long long)rows, (long long)k, (long long)n_tok, (long long)r0, (long long)r1, (int)edge,
                  (long long)i, got[i], ref[i]);
    free(w);
    free(x);
    free(ref);
    free(got);
}

DP_SIMD_VARIANTS(variants_match_scalar_random_shapes)
ParameterizedTest(int *vi, bf16dp, variants_match_scalar_random_shapes, .timeout = 120)
{
    struct dp_variant v = dp_variant_or_skip(*vi);
    static const int64_t ks[] = { 1, 2, 3, 15, 16, 17, 31, 32, 33, 63, 64, 96, 100, 257, 1024 };
    dp_seed(5);
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
        for (int rep = 0; rep < 6; rep++) {
            int64_t rows = 1 + (int64_t)(dp_next() % 13), n_tok = 1 + (int64_t)(dp_next() % 14);
            check_shape(&v, rows, ks[ki], n_tok, rep % 2 == 1);
        }
}

DP_SIMD_VARIANTS(variants_match_scalar_edge_values_dense)
ParameterizedTest(int *vi, bf16dp, variants_match_scalar_edge_values_dense, .timeout = 120)
{
    /* many outputs, every one with subnormals / underflowing products / infinities */
    struct dp_variant v = dp_variant_or_skip(*vi);
    dp_seed(6);
    for (int rep = 0; rep < 8; rep++) check_shape(&v, 9, 64 + rep * 37, 13, true);
}

/* The one-token tiles (bf16_avx2.c note 6: 4 rows, both halves of a chunk in one pass, the
 * last chunk partial; bf16_avx512.c's own): every row count from 1 to 9 (whole tiles and
 * leftover rows), K under one chunk, at and around the half and whole chunk, and long rows
 * with a tail, edge values on every other shape; then T = 1..9 on one shape. */
DP_SIMD_VARIANTS(variants_match_scalar_one_token_tiles)
ParameterizedTest(int *vi, bf16dp, variants_match_scalar_one_token_tiles, .timeout = 120)
{
    struct dp_variant v = dp_variant_or_skip(*vi);
    static const int64_t ks[] = { 8, 16, 17, 31, 32, 33, 47, 48, 49, 64, 65, 1024, 1040, 1055, 3584 };
    dp_seed(7);
    for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++)
        for (int64_t rows = 1; rows <= 9; rows++) check_shape(&v, rows, ks[ki], 1, (rows + (int64_t)ki) % 2 == 1);
    for (int64_t t = 1; t <= 9; t++) check_shape(&v, 11, 1055, t, t % 2 == 0);
}

/* ---- the flush boundary ------------------------------------------------------------------- */

/* y = w1 * x1 + w0 * x0 with k = 2 (one lane; the odd element first): w1 * x1 = +-FLT_MIN *
 * (1 + a/128), w0 * x0 of the opposite sign ~ 2^-152 .. 2^-148, so the exact sum v lands
 * near FLT_MIN. The contract: v is flushed iff |v| rounded to 24 bits with an unbounded
 * exponent is < FLT_MIN, i.e. iff |v| < FLT_MIN - 2^-151; then the tree adds +0s, so a
 * flushed v gives +0 and any other (float)v. Both outcomes must occur. */
DP_EVERY_VARIANT(ftz_after_rounding_boundary)
ParameterizedTest(int *vi, bf16dp, ftz_after_rounding_boundary)
{
    struct dp_variant v = dp_variant_or_skip(*vi);
    int flushed = 0, kept_below = 0;
    dp_seed(9);
    for (int it = 0; it < 4000; it++) {
        float s = (dp_next() & 1) ? -1.0f : 1.0f;
        int a = (int)(dp_next() % 3), e = -152 + (int)(dp_next() % 4);
        float w1 = s * ldexpf(1.0f + (float)a / 128.0f, -126), x1 = 1.0f;
        float w0 = -s * ldexpf(1.0f + (float)(dp_next() % 128) / 128.0f, e + 26);
        float x0 = ldexpf(1.0f + (float)(dp_next() % 128) / 128.0f, -26);
        double vx = (double)w1 * x1 + (double)w0 * x0; /* exact: 30 bits of span */
        double lim = (double)FLT_MIN - 0x1p-151;
        float expect = fabs(vx) < lim ? 0.0f : (float)vx;
        if (fabs(vx) < lim && fabs(vx) >= (double)FLT_MIN - 0x1p-150) flushed++;
        if (fabs(vx) >= lim && fabs(vx) < (double)FLT_MIN) kept_below++;
        uint16_t w[2] = { bf(w0), bf(w1) }, x[2] = { bf(x0), bf(x1) };
        float y = 99.0f;
        v.mm(&y, 1, w, x, 1, 2, 0, 1);
        cr_assert_eq(f2u(y), f2u(expect), "%s: v = %a: got %a, want %a", v.name, vx, y, expect);
    }
    cr_assert(flushed > 0 && kept_below > 0, "the data missed a side of the boundary (%d, %d)", flushed, kept_below);
}

/* The odd-first order is visible in the data (else the bit comparisons above could not tell
 * the contract from another order): swapping the elements of every pair (an even-first
 * evaluation) changes some outputs once the lanes carry a sum from an earlier chunk. And
 * the value stays the dot product within f32 rounding. */
Test(bf16dp, order_is_observable)
{
    enum { K = 64 };
    int diff_even_first = 0;
    dp_seed(13);
    for (int it = 0; it < 500; it++) {
        uint16_t w[K], x[K], ws[K], xs[K];
        dp_fill(w, K, false);
        dp_fill(x, K, false);
        for (int i = 0; i < K; i += 2) {
            ws[i] = w[i + 1], ws[i + 1] = w[i];
            xs[i] = x[i + 1], xs[i + 1] = x[i];
        }
        float y = 0.0f, yswap = 0.0f;
        kern_bf16_matmul(&y, 1, w, x, 1, K, 0, 1);
        kern_bf16_matmul(&yswap, 1, ws, xs, 1, K, 0, 1);
        if (f2u(y) != f2u(yswap)) diff_even_first++;
        double exact = 0.0, mag = 0.0;
        for (int i = 0; i < K; i++) {
            double p = (double)u2f((uint32_t)w[i] << 16) * u2f((uint32_t)x[i] << 16);
            exact += p;
            mag += fabs(p);
        }
        cr_assert(fabs((double)y - exact) <= 1e-6 * mag, "y %a exact %a", y, exact);
    }
    cr_assert(diff_even_first > 0, "the odd-first order is not observable in this data");
}

/* ---- invariance ---------------------------------------------------------------------------- */

struct dp_thread_job {
    bf16_mm_fn mm;
    float *y;
    int64_t y_ld, n_tok, k, r0, r1;
    const uint16_t *w, *x;
};

static void *dp_thread(void *p)
{
    struct dp_thread_job *j = p;
    j->mm(j->y, j->y_ld, j->w, j->x, j->n_tok, j->k, j->r0, j->r1);
    return NULL;
}

DP_EVERY_VARIANT(batch_row_and_thread_invariance)
ParameterizedTest(int *vi, bf16dp, batch_row_and_thread_invariance, .timeout = 120)
{
    struct dp_variant v = dp_variant_or_skip(*vi);
    enum { ROWS = 37, K = 200, T = 29 };
    static uint16_t w[ROWS * K], x[T * K];
    static float full[T * ROWS], one[T * ROWS], split[T * ROWS], thr[T * ROWS], ref[T * ROWS];
    dp_seed(21);
    dp_fill(w, ROWS * K, false);
    dp_fill(x, T * K, false);
    kern_bf16_matmul(ref, ROWS, w, x, T, K, 0, ROWS);
    v.mm(full, ROWS, w, x, T, K, 0, ROWS);
    for (int64_t t = 0; t < T; t++) v.mm(one + t * ROWS, ROWS, w, x + t * K, 1, K, 0, ROWS);
    /* uneven row ranges and token batches */
    for (int64_t t0 = 0; t0 < T;) {
        int64_t nt = (int64_t)(1 + dp_next() % 9); /* HS_MIN evaluates twice */
        nt = HS_MIN(nt, T - t0);
        for (int64_t r0 = 0; r0 < ROWS;) {
            int64_t r1 = r0 + (int64_t)(1 + dp_next() % 11);
            r1 = HS_MIN(r1, (int64_t)ROWS);
            v.mm(split + t0 * ROWS, ROWS, w, x + t0 * K, nt, K, r0, r1);
            r0 = r1;
        }
        t0 += nt;
    }
    /* three threads, rows split unevenly (each thread has its own MXCSR) */
    pthread_t th[3];
    struct dp_thread_job jobs[3];
    int64_t cut[4] = { 0, 5, 22, ROWS };
    for (int i = 0; i < 3; i++) {
        jobs[i] = (struct dp_thread_job){ v.mm, thr, ROWS, T, K, cut[i], cut[i + 1], w, x };
        cr_assert_eq(pthread_create(&th[i], NULL, dp_thread, &jobs[i]), 0);
    }
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    cr_assert(memcmp(full, ref, sizeof full) == 0, "%s: batch differs from scalar", v.name);
    cr_assert(memcmp(full, one, sizeof full) == 0, "%s: batch of 1 differs", v.name);
    cr_assert(memcmp(full, split, sizeof full) == 0, "%s: split batches / rows differ", v.name);
    cr_assert(memcmp(full, thr, sizeof full) == 0, "%s: threaded rows differ", v.name);
}

/* The SIMD variants restore the caller's MXCSR (DAZ / FTZ are switched on inside only):
 * a subnormal computed after a call is still a subnormal. */
DP_EVERY_VARIANT(floating_point_state_restored)
ParameterizedTest(int *vi, bf16dp, floating_point_state_restored)
{
    struct dp_variant v = dp_variant_or_skip(*vi);
    uint16_t w[32], x[32];
    dp_seed(3);
    dp_fill(w, 32, true);
    dp_fill(x, 32, true);
    float y;
    v.mm(&y, 1, w, x, 1, 32, 0, 1);
    volatile float a = FLT_MIN, b = 0.5f;
    float sub = a * b;
    cr_assert(sub != 0.0f && sub < FLT_MIN, "%s left flush-to-zero on", v.name);
    volatile float d = 0x1p-140f;
    cr_assert(d * 2.0f != 0.0f, "%s left denormals-are-zero on", v.name);
}
