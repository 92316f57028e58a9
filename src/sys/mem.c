/*
 * mem.c — advice to the kernel about memory the process owns or maps (madvise), for large
 * read-mostly buffers such as the engine's packed weight copies.
 *
 * Design note:
 *   1. Advice only: every call may fail or do nothing (another OS, a kernel without
 *      transparent huge pages) and the memory's contents never change because of it, so
 *      nothing here returns an error. Ranges are shrunk to the whole pages inside them.
 *   2. sys_mem_huge: MADV_HUGEPAGE on an anonymous buffer about to be filled (a kernel in
 *      "madvise" THP mode then backs it with 2 MiB pages: fewer TLB misses when a matmul
 *      streams it, fewer page faults while it is filled). Best with a 2 MiB-aligned buffer.
 *   3. sys_mem_cold: MADV_DONTNEED on pages of a read-only MAP_PRIVATE file mapping that the
 *      process will rarely read again: they leave its resident set (the page cache keeps or
 *      drops them as the kernel likes) and a later read faults them in from the file, with
 *      the same bytes the file holds then. Never on anonymous or written memory (whose
 *      contents DONTNEED would discard).
 */
#include "sys/sys.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

static void mem_advise(const void *p, size_t n, int advice)
{
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0 || !p || n == 0) return;
    uintptr_t a = ((uintptr_t)p + (uintptr_t)pg - 1) / (uintptr_t)pg * (uintptr_t)pg;
    uintptr_t b = ((uintptr_t)p + n) / (uintptr_t)pg * (uintptr_t)pg;
    if (b > a) (void)madvise((void *)a, b - a, advice);
}

void sys_mem_huge(void *p, size_t n)
{
#ifdef MADV_HUGEPAGE
    mem_advise(p, n, MADV_HUGEPAGE);
#else
    (void)p;
    (void)n;
#endif
}

void sys_mem_cold(const void *p, size_t n)
{
    mem_advise(p, n, MADV_DONTNEED);
}
