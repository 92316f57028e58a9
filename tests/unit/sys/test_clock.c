/* test_clock.c — clocks, memory size, free disk space (against independent sources). */
#include <criterion/criterion.h>

#include <stdio.h>
#include <string.h>
#include <sys/vfs.h>
#include <time.h>

#include "sys/sys.h"

Test(sys_clock, monotonic_seconds)
{
    double prev = sys_time_sec();
    for (int i = 0; i < 100000; i++) {
        double t = sys_time_sec();
        cr_assert_geq(t, prev, "went backwards at %d", i);
        prev = t;
    }
    double t0 = sys_time_sec();
    struct timespec ts = { 0, 30 * 1000 * 1000 };
    nanosleep(&ts, NULL);
    double dt = sys_time_sec() - t0;
    cr_assert_geq(dt, 0.029, "slept 30 ms, measured %.6f s", dt);
    cr_assert_lt(dt, 10.0, "measured %.6f s", dt);
}

static int64_t realtime_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

Test(sys_clock, unix_milliseconds)
{
    /* bracketed by CLOCK_REALTIME read here, not by time(): glibc's time() reads the
     * kernel's coarse seconds, which lag CLOCK_REALTIME by up to a tick and were seen to
     * disagree with it across a second boundary on a VM */
    int64_t before = realtime_ms();
    int64_t ms = sys_time_unix_ms();
    int64_t after = realtime_ms();
    cr_assert_geq(ms, before);
    cr_assert_leq(ms, after);
    cr_assert_gt(ms, 1600000000000ll, "after September 2020");
    cr_assert_lt(ms, 4102444800000ll, "before 2100: milliseconds, not microseconds");
}

Test(sys_clock, memory_total_matches_meminfo)
{
    uint64_t total = sys_mem_total_bytes();
    FILE *f = fopen("/proc/meminfo", "r");
    cr_assert_not_null(f);
    unsigned long long kb = 0;
    char line[256];
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemTotal: %llu kB", &kb) == 1) break;
    fclose(f);
    cr_assert_gt(kb, 0);
    uint64_t want = (uint64_t)kb * 1024;
    uint64_t diff = total > want ? total - want : want - total;
    cr_assert_lt(diff, 1u << 20, "sysconf says %llu, meminfo %llu", (unsigned long long)total,
                 (unsigned long long)want);
}

Test(sys_clock, disk_free)
{
    uint64_t got = sys_disk_free_bytes("/tmp");
    struct statfs sf; /* another system call than the one under test */
    cr_assert_eq(statfs("/tmp", &sf), 0);
    uint64_t want = (uint64_t)sf.f_bavail * (uint64_t)sf.f_bsize;
    uint64_t diff = got > want ? got - want : want - got;
    cr_assert_lt(diff, 256ull << 20, "got %llu, statfs %llu", (unsigned long long)got,
                 (unsigned long long)want);
    cr_assert_eq(sys_disk_free_bytes("/no/such/path/at/all"), 0);
    cr_assert_eq(sys_disk_free_bytes(NULL), 0);
}
