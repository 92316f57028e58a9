/* test_half.c — binary16 and bfloat16 conversions.
 *
 * f16 is checked against two references: the compiler's own _Float16 conversions (GCC on
 * x86-64 does them in libgcc's soft-float, round to nearest even, quieting NaNs) and the
 * F16C instructions the SIMD kernels will use (vcvtph2ps / vcvtps2ph), over every f16
 * value, every rounding boundary between neighbouring f16 values and random floats.
 * bf16 is checked against a reference written here from the definition. */
#include <criterion/criterion.h>

#include <math.h>
#include <string.h>

#include "base/base.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>
#define HAVE_F16C_REF 1
#endif

static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

typedef uint16_t (*to_f16_fn)(float);
typedef float (*to_f32_fn)(uint16_t);

#ifdef __FLT16_MAX__
/* __extension__: _Float16 is a compiler extension to ISO C */
__extension__ typedef _Float16 ref_half;

static uint16_t compiler_to_f16(float f)
{
    ref_half h = (ref_half)f;
    uint16_t b;
    memcpy(&b, &h, 2);
    return b;
}

static float compiler_to_f32(uint16_t b)
{
    ref_half h;
    memcpy(&h, &b, 2);
    return (float)h;
}
#define SKIP_WITHOUT_COMPILER_REF() ((void)0)
#else
#define compiler_to_f16 NULL
#define compiler_to_f32 NULL
#define SKIP_WITHOUT_COMPILER_REF() cr_skip_test("this compiler has no _Float16")
#endif

#ifdef HAVE_F16C_REF
__attribute__((target("f16c"))) static uint16_t f16c_to_f16(float f)
{
    return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}
__attribute__((target("f16c"))) static float f16c_to_f32(uint16_t h) { return _cvtsh_ss(h); }
/* F16C is VEX-encoded: it needs the CPU bit and the OS saving YMM state (XCR0 bits 1-2) */
static bool have_f16c(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    if (!(c & (1u << 29)) || !(c & (1u << 27))) return false;
    unsigned lo, hi;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (lo & 6) == 6;
}
#define SKIP_WITHOUT_F16C() \
    do { if (!have_f16c()) cr_skip_test("no F16C on this CPU"); } while (0)
#else
#define f16c_to_f16 NULL
#define f16c_to_f32 NULL
#define SKIP_WITHOUT_F16C() cr_skip_test("not x86")
#endif

static bool f16_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }

static uint64_t rng_state = 0x243f6a8885a308d3ull;
static uint32_t rnd32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}

static void check_f32_to_f16(to_f16_fn ref, float f)
{
    uint16_t got = hs_f32_to_f16(f), want = ref(f);
    cr_assert_eq(got, want, "f32 0x%08x (%.9g): got f16 0x%04x, want 0x%04x", f2u(f), (double)f,
                 got, want);
}

/* Every f16 bit pattern widens to the reference's float, NaN payloads included. */
static void all_f16_to_f32(to_f32_fn ref)
{
    for (uint32_t i = 0; i < 65536; i++) {
        uint32_t got = f2u(hs_f16_to_f32((uint16_t)i)), want = f2u(ref((uint16_t)i));
        cr_assert_eq(got, want, "f16 0x%04x: got 0x%08x, want 0x%08x", i, got, want);
    }
}

/* For each pair of neighbouring finite f16 values of the same sign: both values' floats,
 * the exact midpoint (a float: it needs 12 significant bits) and the floats one ulp either
 * side of those. */
static void every_rounding_boundary(to_f16_fn ref)
{
    for (uint32_t i = 0; i < 0x7c00; i++) {
        for (uint32_t sign = 0; sign <= 0x8000; sign += 0x8000) {
            float a = hs_f16_to_f32((uint16_t)(sign | i));
            float b = hs_f16_to_f32((uint16_t)(sign | (i + 1))); /* 0x7c00 = inf at the top */
            float mid;
            if (i + 1 == 0x7c00) {
                mid = sign ? -65520.0f : 65520.0f; /* from here on the value rounds to inf */
            } else {
                mid = (a + b) / 2;
                cr_assert_eq((double)mid, ((double)a + (double)b) / 2, "0x%04x: midpoint exact", i);
            }
            check_f32_to_f16(ref, a);
            check_f32_to_f16(ref, mid);
            check_f32_to_f16(ref, nextafterf(mid, 0.0f));
            check_f32_to_f16(ref, nextafterf(mid, sign ? -INFINITY : INFINITY));
            check_f32_to_f16(ref, nextafterf(a, 0.0f));
            check_f32_to_f16(ref, nextafterf(a, sign ? -INFINITY : INFINITY));
        }
    }
}

static const uint32_t g_edge_bits[] = {
    0x00000000, 0x80000000, 0x00000001, 0x007fffff, 0x00800000, /* f32 zero, subnormals */
    0x33000000, 0x33000001, 0x32ffffff, /* 2^-25: half the smallest f16 subnormal */
    0x33400000, 0x33800000, 0x33c00000, /* 1.5*2^-25, 2^-24, 1.5*2^-24 (tie to even: 2) */
    0x387fc000, 0x387fe000, 0x387ff000, 0x38800000, /* around the largest subnormal */
    0x477fe000, 0x477fefff, 0x477ff000, 0x477ff001, 0x47800000, /* 65504 .. 65536 */
    0x7f7fffff, 0x7f800000, 0xff800000, /* max float, infinities */
    0x7f800001, 0x7fc00000, 0x7fffffff, 0xffc00001, 0x7f802000, 0x7fa00000, /* NaNs */
    0x3f800000, 0x3f801000, 0x3f803000, 0x3f802fff, /* ties at 1.0: even down, odd up */
};

static void edges(to_f16_fn ref)
{
    for (size_t i = 0; i < HS_ARRAY_LEN(g_edge_bits); i++) {
        check_f32_to_f16(ref, u2f(g_edge_bits[i]));
        check_f32_to_f16(ref, u2f(g_edge_bits[i] ^ 0x80000000u));
    }
}

static void random_f32(to_f16_fn ref, int n)
{
    for (int i = 0; i < n; i++) {
        uint32_t u = rnd32();
        check_f32_to_f16(ref, u2f(u));
        /* and one in the f16 range, where the rounding is interesting */
        uint32_t e = 100 + rnd32() % 46; /* 2^-27 .. 2^18 */
        check_f32_to_f16(ref, u2f((u & 0x807fffffu) | e << 23));
    }
}

Test(base_half, f16_to_f32_matches_compiler_for_all_65536)
{
    SKIP_WITHOUT_COMPILER_REF();
    all_f16_to_f32(compiler_to_f32);
}

Test(base_half, f32_to_f16_matches_compiler_at_every_boundary)
{
    SKIP_WITHOUT_COMPILER_REF();
    every_rounding_boundary(compiler_to_f16);
    edges(compiler_to_f16);
}

Test(base_half, f32_to_f16_matches_compiler_random)
{
    SKIP_WITHOUT_COMPILER_REF();
    random_f32(compiler_to_f16, 1000000);
}

Test(base_half, matches_f16c_hardware)
{
    SKIP_WITHOUT_F16C();
    all_f16_to_f32(f16c_to_f32);
    every_rounding_boundary(f16c_to_f16);
    edges(f16c_to_f16);
    random_f32(f16c_to_f16, 300000);
}

Test(base_half, f16_round_trip_all_65536)
{
    int n_nan = 0;
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        float f = hs_f16_to_f32(h);
        uint16_t back = hs_f32_to_f16(f);
        if (f16_is_nan(h)) {
            n_nan++;
            cr_assert(isnan(f), "0x%04x must widen to NaN", h);
            cr_assert(f16_is_nan(back), "0x%04x: NaN came back as 0x%04x", h, back);
            cr_assert_eq(back & 0x8000, h & 0x8000, "NaN sign kept");
            /* quiet NaNs come back bit for bit; signalling ones come back quieted */
            cr_assert_eq(back, h | 0x200, "0x%04x came back as 0x%04x", h, back);
        } else {
            cr_assert_eq(back, h, "0x%04x -> %.9g -> 0x%04x", h, (double)f, back);
        }
    }
    cr_assert_eq(n_nan, 2 * 1023);
}

Test(base_half, f32_to_f16_known_values)
{
    cr_assert_eq(hs_f32_to_f16(1.0f), 0x3c00);
    cr_assert_eq(hs_f32_to_f16(-2.0f), 0xc000);
    cr_assert_eq(hs_f32_to_f16(65504.0f), 0x7bff);
    cr_assert_eq(hs_f32_to_f16(65519.996f), 0x7bff);
    cr_assert_eq(hs_f32_to_f16(65520.0f), 0x7c00);
    cr_assert_eq(hs_f32_to_f16(-65520.0f), 0xfc00);
    cr_assert_eq(hs_f32_to_f16(1e10f), 0x7c00);
    cr_assert_eq(hs_f32_to_f16(u2f(0x33000000)), 0x0000, "2^-25 ties to even zero");
    cr_assert_eq(hs_f32_to_f16(u2f(0x33000001)), 0x0001);
    cr_assert_eq(hs_f32_to_f16(u2f(0x33c00000)), 0x0002, "1.5*2^-24 ties to even 2");
    cr_assert_eq(hs_f32_to_f16(u2f(0x387fc000)), 0x03ff, "largest subnormal");
    cr_assert_eq(hs_f32_to_f16(u2f(0x387fe000)), 0x0400, "tie, odd: up into the smallest normal");
    cr_assert_eq(hs_f32_to_f16(u2f(0x387fdfff)), 0x03ff);
    cr_assert_eq(hs_f32_to_f16(u2f(0x3f801000)), 0x3c00, "tie at 1.0 stays even");
    cr_assert_eq(hs_f32_to_f16(u2f(0x3f803000)), 0x3c02, "tie above odd rounds up");
    cr_assert_eq(hs_f32_to_f16(-0.0f), 0x8000);
    cr_assert_eq(hs_f32_to_f16(INFINITY), 0x7c00);
    cr_assert_eq(hs_f32_to_f16(u2f(0x7f800001)), 0x7e00, "a payload below f16 stays NaN");
    cr_assert_eq(hs_f32_to_f16(u2f(0xffc00001)), 0xfe00);
    cr_assert_eq(hs_f32_to_f16(u2f(0x7f802000)), 0x7e01, "top payload bits kept, quieted");
    cr_assert_eq(f2u(hs_f16_to_f32(0x7c01)), 0x7fc02000u, "widening quiets a NaN");
    cr_assert_eq(f2u(hs_f16_to_f32(0x0001)), 0x33800000u, "smallest subnormal is 2^-24");
}

/* bf16 from its definition: the nearer of the two bf16 values around f, ties to even. */
static uint16_t ref_f32_to_bf16(float f)
{
    uint32_t u = f2u(f);
    if (isnan(f)) return 0xffff; /* only NaN-ness is compared */
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    if ((u & 0xffff) == 0) return lo;
    double dl = fabs((double)f - (double)hs_bf16_to_f32(lo));
    /* hi past the largest finite value rounds to infinity: compare with 2^128 */
    double vh = (hi & 0x7fff) == 0x7f80 ? ldexp(signbit(f) ? -1.0 : 1.0, 128) : (double)hs_bf16_to_f32(hi);
    double dh = fabs(vh - (double)f);
    if (dl < dh) return lo;
    if (dh < dl) return hi;
    return (lo & 1) ? hi : lo;
}

static void check_bf16(float f)
{
    uint16_t got = hs_f32_to_bf16(f), want = ref_f32_to_bf16(f);
    if (isnan(f)) {
        cr_assert((got & 0x7f80) == 0x7f80 && (got & 0x7f), "NaN 0x%08x became 0x%04x", f2u(f), got);
        cr_assert_eq(got & 0x8000, (f2u(f) >> 16) & 0x8000, "NaN sign kept");
        cr_assert(got & 0x40, "NaN made quiet");
        return;
    }
    cr_assert_eq(got, want, "f32 0x%08x: got bf16 0x%04x, want 0x%04x", f2u(f), got, want);
}

Test(base_half, bf16_to_f32_all_65536_exact)
{
    for (uint32_t i = 0; i < 65536; i++) {
        cr_assert_eq(f2u(hs_bf16_to_f32((uint16_t)i)), i << 16);
        if ((i & 0x7f80) == 0x7f80 && (i & 0x7f)) continue; /* NaN */
        cr_assert_eq(hs_f32_to_bf16(hs_bf16_to_f32((uint16_t)i)), i, "0x%04x round trip", i);
    }
}

Test(base_half, bf16_halfway_cases)
{
    cr_assert_eq(hs_f32_to_bf16(u2f(0x3f808000)), 0x3f80, "tie, even below");
    cr_assert_eq(hs_f32_to_bf16(u2f(0x3f818000)), 0x3f82, "tie, odd below rounds up");
    cr_assert_eq(hs_f32_to_bf16(u2f(0x3f808001)), 0x3f81);
    cr_assert_eq(hs_f32_to_bf16(u2f(0x3f807fff)), 0x3f80);
    cr_assert_eq(hs_f32_to_bf16(u2f(0xbf818000)), 0xbf82, "negative tie");
    cr_assert_eq(hs_f32_to_bf16(u2f(0x7f7fffff)), 0x7f80, "max float rounds to inf");
    cr_assert_eq(hs_f32_to_bf16(u2f(0x7f7f7fff)), 0x7f7f);
    cr_assert_eq(hs_f32_to_bf16(u2f(0x7f7f8000)), 0x7f80, "tie at the top, odd: to inf");
    cr_assert_eq(hs_f32_to_bf16(INFINITY), 0x7f80);
    cr_assert_eq(hs_f32_to_bf16(-INFINITY), 0xff80);
    cr_assert_eq(hs_f32_to_bf16(u2f(0x00008000)), 0x0000, "subnormal tie to even zero");
    cr_assert_eq(hs_f32_to_bf16(u2f(0x00018000)), 0x0002);
    /* NaNs whose payload sits only in the low half must not turn into infinity */
    static const uint32_t nans[] = { 0x7f800001, 0xff800001, 0x7fc00000, 0x7fffffff, 0x7f80ffff };
    for (size_t i = 0; i < HS_ARRAY_LEN(nans); i++) check_bf16(u2f(nans[i]));
    for (uint32_t i = 0; i < 65536; i++) {
        /* every tie and its neighbours */
        uint32_t tie = i << 16 | 0x8000;
        check_bf16(u2f(tie));
        check_bf16(u2f(tie - 1));
        check_bf16(u2f(tie + 1));
    }
}

Test(base_half, bf16_random)
{
    for (int i = 0; i < 1000000; i++) check_bf16(u2f(rnd32()));
}
