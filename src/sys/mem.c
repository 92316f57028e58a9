/*
 * mem.c — advice to the kernel about a file mapping's pages (madvise): map them all in
 * before the first read (the weights at engine start), and drop from the resident set the
 * pages of read-only weights the engine no longer reads (their packed copies serve
 * instead). Huge-page advice for owned blocks is base's (alloc.c).
 *
 * Design note:
 *   1. Advice only: a call may fail or do nothing (another OS) and the memory's contents
 *      never change because of it, so nothing here returns an error. The range is shrunk to
 *      the whole pages inside it.
 *   2. sys_mem_cold: MADV_DONTNEED on pages of a read-only MAP_PRIVATE file mapping that the
 *      process will rarely read again: they leave its resident set (the page cache keeps or
 *      drops them as the kernel likes) and a later read faults them in from the file, with
 *      the same bytes the file holds then. Never on anonymous or written memory (whose
 *      contents DONTNEED would discard).
 *   3. sys_mem_warm: MADV_POPULATE_READ (Linux 5.14) reads the pages of [p, p+n) in and maps
 *      them, as faults on every page would, in one call: the range is grown to whole pages.
 *      A page past a truncated file's end ends the call with EFAULT, never a SIGBUS; an
 *      older kernel answers EINVAL and the pages fault in when read, as before.
 */
#include "sys/sys.h"

#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

void sys_mem_cold(const void *p, size_t n)
{
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0 || !p || n == 0) return;
    uintptr_t a = ((uintptr_t)p + (uintptr_t)pg - 1) / (uintptr_t)pg * (uintptr_t)pg;
    uintptr_t b = ((uintptr_t)p + n) / (uintptr_t)pg * (uintptr_t)pg;
    if (b > a) (void)madvise((void *)a, b - a, MADV_DONTNEED);
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14; older kernels answer EINVAL: advice only */
#endif

void sys_mem_warm(const void *p, size_t n)
{
    long pg = sysconf(_SC_PAGESIZE);
    if (pg <= 0 || !p || n == 0) return;
    uintptr_t a = (uintptr_t)p / (uintptr_t)pg * (uintptr_t)pg;
    uintptr_t b = ((uintptr_t)p + n + (uintptr_t)pg - 1) / (uintptr_t)pg * (uintptr_t)pg;
    (void)madvise((void *)a, b - a, MADV_POPULATE_READ);
}
