/* cpu_level.h — which kernel variants a unit test runs on this machine, for every suite.
 *
 * 1. A variant runs when the engine says this machine runs it (engine_variant_runs): its
 *    rank (scalar < avx2 < avxvnni < avx512vnni < avx512) is at most that of
 *    engine_best_variant(), the CPU's own level lowered by HEADSTART_CPU, and "avxvnni"
 *    also needs AVX-VNNI, which some AVX-512 CPUs lack (Zen 4). So `HEADSTART_CPU=avx2` on
 *    an AVX-512 machine tests exactly what an AVX2-only CPU would run, and `=scalar` only
 *    the references.
 * 2. A variant that does not run is a Criterion skip that names it (counted and listed by
 *    tools/run_tests.sh), never a failure and never a warning: Criterion 2.4 exits non-zero
 *    after a cr_log_warn, which turned every AVX2-only CPU's `make test` red.
 * 3. cpu_level_natural() reads the CPU with the compiler's own cpuid builtins (and cpuid
 *    leaf 7.1 for AVX-VNNI, which GCC 12's builtin does not report), not through sys, so
 *    the level tests (test_level.c in kernels and engine) can check that sys and the
 *    engine honour HEADSTART_CPU instead of trusting them: cpu_level_expected and
 *    cpu_level_should_run lower those flags by HEADSTART_CPU on their own.
 * make test runs every unit suite natively, then with HEADSTART_CPU=avx2 and =scalar. */
#ifndef HS_TEST_CPU_LEVEL_H
#define HS_TEST_CPU_LEVEL_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "engine/engine.h"
#include "kernels/kernels.h"

static inline bool cpu_level_runs(const char *variant) { return engine_variant_runs(variant); }

/* The table of `variant`, or a skip naming it (and why) when it does not run here. */
static inline const struct kern_ops *cpu_level_ops_or_skip(const char *variant)
{
    if (!cpu_level_runs(variant)) {
        const char *force = getenv("HEADSTART_CPU");
        if (kern_variant_rank(variant) < 0) cr_skip_test("variant %s: not in this build, not tested", variant);
        if (force && *force) cr_skip_test("variant %s: above HEADSTART_CPU=%s, not tested", variant, force);
        cr_skip_test("variant %s: this CPU lacks its instructions, not tested", variant);
    }
    const struct kern_ops *ops = kern_ops_for(variant);
    cr_assert_not_null(ops, "variant %s has no table", variant);
    return ops;
}

/* This CPU's features as kern_best_variant takes them, from cpuid directly; `lowered`
 * applies HEADSTART_CPU (a level at or below which every flag above it is off). */
struct cpu_level_flags {
    bool avx2, avx_vnni, vnni, bf16;
};

static inline struct cpu_level_flags cpu_level_flags(bool lowered)
{
    struct cpu_level_flags f = { false, false, false, false };
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    f.avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    f.vnni = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
    f.bf16 = f.vnni && __builtin_cpu_supports("avx512bf16");
    unsigned a, b, c, d;
    f.avx_vnni = f.avx2 && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4));
#endif
    const char *force = getenv("HEADSTART_CPU");
    if (lowered && force && *force) {
        int rf = kern_variant_rank(force);
        cr_assert_geq(rf, 0, "HEADSTART_CPU=%s names no variant of this build", force);
        if (rf < kern_variant_rank("avx512")) f.bf16 = false;
        if (rf < kern_variant_rank("avx512vnni")) f.vnni = false;
        if (rf < kern_variant_rank("avxvnni")) f.avx_vnni = false;
        if (rf < kern_variant_rank("avx2")) f.avx2 = false;
    }
    return f;
}

/* The best variant of this CPU before any HEADSTART_CPU, from cpuid directly. */
static inline const char *cpu_level_natural(void)
{
    struct cpu_level_flags f = cpu_level_flags(false);
    return kern_best_variant(f.avx2, f.avx_vnni, f.vnni, f.bf16);
}

/* The variant the engine must use here: the natural one, lowered by HEADSTART_CPU (never
 * raised: HEADSTART_CPU=avxvnni on a CPU without AVX-VNNI expects avx2). */
static inline const char *cpu_level_expected(void)
{
    struct cpu_level_flags f = cpu_level_flags(true);
    return kern_best_variant(f.avx2, f.avx_vnni, f.vnni, f.bf16);
}

/* Whether `variant` should run here, worked out without sys or the engine: at or below the
 * expected table's rank, and "avxvnni" only with AVX-VNNI. */
static inline bool cpu_level_should_run(const char *variant)
{
    int r = kern_variant_rank(variant);
    if (r < 0 || r > kern_variant_rank(cpu_level_expected())) return false;
    return strcmp(variant, "avxvnni") != 0 || cpu_level_flags(true).avx_vnni;
}

#endif
