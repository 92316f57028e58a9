/* clock.c — clocks, and the machine's memory and disk sizes (for budgets and floors). */
#include "sys/sys.h"

#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

double sys_time_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts); /* never jumps with the wall clock */
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int64_t sys_time_unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* "MemTotal:  24576000 kB" from /proc/meminfo, for systems where sysconf does not know. */
static uint64_t meminfo_total(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    uint64_t bytes = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long kb;
        if (sscanf(line, "MemTotal: %llu kB", &kb) == 1) {
            if (hs_mul_overflow(kb, 1024, &bytes)) bytes = 0;
            break;
        }
    }
    fclose(f);
    return bytes;
}

uint64_t sys_mem_total_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    uint64_t total;
    if (pages > 0 && page > 0 && !hs_mul_overflow((uint64_t)pages, (uint64_t)page, &total))
        return total;
    return meminfo_total();
}

uint64_t sys_disk_free_bytes(const char *path)
{
    struct statvfs sv;
    if (!path || statvfs(path, &sv) != 0) return 0;
    uint64_t free_bytes;
    /* f_bavail: what an unprivileged writer may still use (the reserve is not ours) */
    if (hs_mul_overflow((uint64_t)sv.f_bavail, (uint64_t)(sv.f_frsize ? sv.f_frsize : sv.f_bsize),
                        &free_bytes))
        return UINT64_MAX;
    return free_bytes;
}
