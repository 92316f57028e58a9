/* alloc.c — allocation that aborts on out-of-memory, and overflow-checked arithmetic.
 *
 * Large blocks (HS_HUGE_MIN and up: KV caches, bank stretches, restored state) are advised
 * as transparent huge pages (MADV_HUGEPAGE on the 2 MiB-aligned part of the block; the
 * kernel's default "madvise" mode gives them to no one else). The first write into fresh
 * memory then takes one fault per 2 MiB instead of one per 4 KiB: on the dev VM (a PVM
 * guest, where a fault costs ~17 us) a first copy into a fresh 300 MB block took 1.2-1.6 s
 * with 4 KiB pages and 0.06-0.25 s with the advice. Advice only: where the kernel has THP
 * off, or refuses, nothing changes. HEADSTART_NO_HUGEPAGES=1 turns it off (to compare).
 * hs_huge_alloc is for a block that will be streamed over and over (the engine's packed
 * weights): aligned to 2 MiB and advised from one huge page up, under the same switch.
 */
#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <stdatomic.h>

#define HS_HUGE_PAGE ((uintptr_t)2 << 20)
#define HS_HUGE_MIN ((size_t)8 << 20)

static _Atomic int huge_off = -1; /* -1: not read yet */

static void advise_huge_from(void *p, size_t n, size_t min)
{
#ifdef MADV_HUGEPAGE
    if (n < min) return;
    if (huge_off < 0) {
        const char *e = getenv("HEADSTART_NO_HUGEPAGES");
        huge_off = e && *e && strcmp(e, "0") != 0;
    }
    if (huge_off) return;
    uintptr_t a = ((uintptr_t)p + HS_HUGE_PAGE - 1) & ~(HS_HUGE_PAGE - 1);
    uintptr_t e = ((uintptr_t)p + n) & ~(HS_HUGE_PAGE - 1);
    if (e > a) (void)madvise((void *)a, e - a, MADV_HUGEPAGE);
#else
    (void)p;
    (void)n;
    (void)min;
#endif
}

static void advise_huge(void *p, size_t n) { advise_huge_from(p, n, HS_HUGE_MIN); }

static void oom(size_t n)
{
    fprintf(stderr, "headstart: out of memory allocating %zu bytes\n", n);
    abort();
}

void *hs_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) oom(n);
    advise_huge(p, n);
    return p;
}

void *hs_calloc(size_t n, size_t size)
{
    uint64_t total;
    if (hs_mul_overflow(n, size, &total) || total > SIZE_MAX) oom(SIZE_MAX);
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) oom((size_t)total);
    advise_huge(p, (size_t)total);
    return p;
}

void *hs_realloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) oom(n);
    advise_huge(q, n);
    return q;
}

void *hs_aligned_alloc(size_t align, size_t n)
{
    void *p = NULL;
    if (align < sizeof(void *)) align = sizeof(void *);
    if (posix_memalign(&p, align, n ? n : 1) != 0) oom(n);
    advise_huge(p, n);
    return p;
}

char *hs_strdup(const char *s) { return hs_strndup(s, strlen(s)); }

char *hs_strndup(const char *s, size_t n)
{
    char *d = hs_malloc(n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

void hs_free(void *p) { free(p); }

bool hs_mul_overflow(uint64_t a, uint64_t b, uint64_t *out)
{
    return __builtin_mul_overflow(a, b, out);
}

bool hs_add_overflow(uint64_t a, uint64_t b, uint64_t *out)
{
    return __builtin_add_overflow(a, b, out);
}

void *hs_huge_alloc(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, n >= HS_HUGE_PAGE ? HS_HUGE_PAGE : 64, n ? n : 1) != 0) oom(n);
    advise_huge_from(p, n, HS_HUGE_PAGE);
    return p;
}
