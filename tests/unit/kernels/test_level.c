/* test_level.c — the kernel table a run uses is the one it should (cpu_level.h): the CPU's
 * best read from cpuid, lowered by HEADSTART_CPU; exactly the variants at or below it run,
 * every one of them has a table, and the others are skipped. make test runs the unit suites
 * natively and with HEADSTART_CPU=avx2 and =scalar, so a level that sys or the engine
 * ignored, or a table the tests would silently leave out, fails here (HS_TEST_CPU_LEVELS
 * can add avxvnni and avx512vnni). */
#include <criterion/criterion.h>
#include <stdlib.h>

#include "kernels/kernels.h"
#include "unit/cpu_level.h"

Test(cpu_level, the_expected_table_and_only_the_variants_below_it)
{
    const char *want = cpu_level_expected(), *force = getenv("HEADSTART_CPU");
    cr_assert_str_eq(engine_best_variant(), want, "HEADSTART_CPU=%s, natural %s", force ? force : "(unset)",
                     cpu_level_natural());
    static const char *const all[] = { "scalar", "avx2", "avxvnni", "avx512vnni", "avx512" };
    int n_run = 0;
    for (int i = 0; i < (int)HS_ARRAY_LEN(all); i++) {
        int r = kern_variant_rank(all[i]);
        cr_assert(r == -1 || r == i, "%s has rank %d", all[i], r);
        bool should = cpu_level_should_run(all[i]);
        cr_assert_eq(cpu_level_runs(all[i]), should, "%s under %s", all[i], want);
        if (should) cr_assert_not_null(kern_ops_for(all[i]));
        n_run += should;
    }
    /* every variant up to the expected one, less avxvnni on an AVX-512 CPU without AVX-VNNI */
    int below = kern_variant_rank(want) + 1;
    bool skip_vnni = kern_variant_rank(want) > kern_variant_rank("avxvnni") && !cpu_level_flags(true).avx_vnni;
    cr_assert_eq(n_run, below - (skip_vnni ? 1 : 0));
    cr_assert(cpu_level_runs(want), "the expected table %s runs", want);
    cr_assert_eq(kern_variant_rank("sse9"), -1);
    cr_assert_eq(kern_variant_rank(NULL), -1);
    cr_log_info("kernel table: %s (%d variant%s tested)", want, n_run, n_run == 1 ? "" : "s");
}
