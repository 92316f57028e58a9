/* cpu_level.h — which kernel variants a unit test runs on this machine, for every suite.
 *
 * 1. A variant runs when its rank (kern_variant_rank: scalar < avx2 < avx512vnni < avx512)
 *    is at most that of engine_best_variant(): the CPU's own level, lowered by
 *    HEADSTART_CPU. So `HEADSTART_CPU=avx2` on an AVX-512 machine tests exactly what an
 *    AVX2-only CPU would run, and `=scalar` only the references.
 * 2. A variant that does not run is a Criterion skip that names it (counted and listed by
 *    tools/run_tests.sh), never a failure and never a warning: Criterion 2.4 exits non-zero
 *    after a cr_log_warn, which turned every AVX2-only CPU's `make test` red.
 * 3. cpu_level_natural() reads the CPU with the compiler's own cpuid builtins, not through
 *    sys, so the level tests (test_level.c in kernels and engine) can check that sys and
 *    the engine honour HEADSTART_CPU instead of trusting them.
 * make test runs every unit suite natively, then with HEADSTART_CPU=avx2 and =scalar. */
#ifndef HS_TEST_CPU_LEVEL_H
#define HS_TEST_CPU_LEVEL_H

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "kernels/kernels.h"

static inline bool cpu_level_runs(const char *variant)
{
    int r = kern_variant_rank(variant);
    return r >= 0 && r <= kern_variant_rank(engine_best_variant());
}

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

/* The best variant of this CPU before any HEADSTART_CPU, from cpuid directly. */
static inline const char *cpu_level_natural(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    bool vnni = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
    return kern_best_variant(avx2, vnni, vnni && __builtin_cpu_supports("avx512bf16"));
#else
    return kern_best_variant(false, false, false);
#endif
}

/* The variant the engine must use here: the natural one, or HEADSTART_CPU's when lower. */
static inline const char *cpu_level_expected(void)
{
    const char *natural = cpu_level_natural(), *force = getenv("HEADSTART_CPU");
    if (!force || !*force) return natural;
    int rf = kern_variant_rank(force);
    cr_assert_geq(rf, 0, "HEADSTART_CPU=%s names no variant of this build", force);
    return rf < kern_variant_rank(natural) ? kern_ops_for(force)->name : natural;
}

#endif
