/* test_sigbus.c — the SIGBUS guard of sys_file_map (file.c): a mapped file truncated under
 * its readers neither kills the process nor goes unnoticed (the mapping reads zeros, the
 * fault is marked and counted), on any thread of a pool; a SIGBUS outside every guarded
 * mapping still kills as before; the stat checks tell an in-place write from a rename. */
#include <criterion/criterion.h>

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sys/sys.h"

#define PAGES 64

static char path[64];
static long pg;

static void setup(void)
{
    pg = sysconf(_SC_PAGESIZE);
    snprintf(path, sizeof(path), "/tmp/hs-sigbus.XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    unsigned char *b = malloc((size_t)(pg * PAGES));
    memset(b, 0xab, (size_t)(pg * PAGES));
    cr_assert_eq(write(fd, b, (size_t)(pg * PAGES)), pg * PAGES);
    close(fd);
    free(b);
}

static void teardown(void) { unlink(path); }

TestSuite(sys_sigbus, .init = setup, .fini = teardown, .timeout = 60);

Test(sys_sigbus, truncated_mapping_reads_zero_and_is_marked)
{
    struct sys_map m;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(sys_file_map(path, &m, &err), HS_OK, "%s", err.msg);
    const volatile uint8_t *d = m.data;
    cr_assert_eq(d[(PAGES - 1) * pg], 0xab);
    cr_assert(!sys_file_map_faulted(&m));
    cr_assert(!sys_file_map_changed(&m));
    uint64_t f0 = sys_file_map_faults();
    cr_assert_eq(truncate(path, pg), 0);
    cr_assert(sys_file_map_changed(&m), "a truncation is a change");
    cr_assert_eq(d[(PAGES - 1) * pg], 0, "the faulting read completes, on zero pages");
    cr_assert(sys_file_map_faulted(&m));
    cr_assert_eq(sys_file_map_faults(), f0 + 1);
    cr_assert_eq(d[0], 0, "the whole mapping is zero from then on");
    sys_file_unmap(&m);
    cr_assert_eq(sys_file_map(path, &m, &err), HS_OK, "%s", err.msg);
    cr_assert(!sys_file_map_faulted(&m), "a new mapping starts clean");
    cr_assert_eq(m.data[0], 0xab);
    sys_file_unmap(&m);
}

struct reader {
    const volatile uint8_t *d;
    _Atomic uint64_t sum;
};

static void read_pages(void *ctx, int64_t b, int64_t e, int t)
{
    (void)t;
    struct reader *r = ctx;
    uint64_t s = 0;
    for (int64_t i = b; i < e; i++) s += r->d[i * pg + 17];
    r->sum += s;
}

Test(sys_sigbus, pool_threads_survive)
{
    struct sys_map m;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(sys_file_map(path, &m, &err), HS_OK, "%s", err.msg);
    struct sys_pool *p = sys_pool_new(4);
    struct reader r = { m.data, 0 };
    sys_pool_run(p, PAGES, read_pages, &r);
    cr_assert_eq(r.sum, (uint64_t)PAGES * 0xab);
    cr_assert_eq(truncate(path, 3 * pg), 0);
    r.sum = 0;
    sys_pool_run(p, PAGES, read_pages, &r); /* every thread past page 3 faults */
    cr_assert(sys_file_map_faulted(&m));
    cr_assert_leq(r.sum, (uint64_t)3 * 0xab, "reads past the end gave zeros");
    sys_pool_free(p);
    sys_file_unmap(&m);
}

Test(sys_sigbus, unguarded_fault_still_kills)
{
    struct sys_map m; /* installs the handler in this process */
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(sys_file_map(path, &m, &err), HS_OK, "%s", err.msg);
    pid_t c = fork();
    if (c == 0) {
        int fd = open(path, O_RDONLY);
        const volatile uint8_t *raw = mmap(NULL, (size_t)(pg * PAGES), PROT_READ, MAP_PRIVATE, fd, 0);
        if (ftruncate(open(path, O_WRONLY), pg) != 0) _exit(13);
        _exit(raw[(PAGES - 1) * pg] == 0 ? 11 : 12); /* not reached: SIGBUS */
    }
    int st = 0;
    cr_assert_eq(waitpid(c, &st, 0), c);
#if defined(__SANITIZE_ADDRESS__)
    /* the handler before ours is the sanitizer's: it reports the fault and exits */
    cr_assert(!WIFEXITED(st) || (WEXITSTATUS(st) != 0 && WEXITSTATUS(st) < 11), "status %d", st);
#else
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGBUS, "status %d", st);
#endif
    sys_file_unmap(&m);
}

Test(sys_sigbus, stat_change_rules)
{
    struct sys_map m;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(sys_file_map(path, &m, &err), HS_OK, "%s", err.msg);
    /* replaced by rename: the mapped inode loses its link (ctime moves), bytes unchanged */
    char other[80];
    snprintf(other, sizeof(other), "%s.new", path);
    FILE *f = fopen(other, "wb");
    fputs("other", f);
    fclose(f);
    usleep(20000);
    cr_assert_eq(rename(other, path), 0);
    cr_assert(!sys_file_map_changed(&m), "a rename over the file is not a change of the mapped bytes");
    sys_file_unmap(&m);
    /* written in place */
    cr_assert_eq(sys_file_map(path, &m, &err), HS_OK, "%s", err.msg);
    usleep(20000);
    f = fopen(path, "r+b");
    fputc('O', f);
    fclose(f);
    cr_assert(sys_file_map_changed(&m));
    sys_file_unmap(&m);
}
