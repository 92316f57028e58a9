/* alloc.c — allocation that aborts on out-of-memory, and overflow-checked arithmetic. */
#include "base/base.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void oom(size_t n)
{
    fprintf(stderr, "headstart: out of memory allocating %zu bytes\n", n);
    abort();
}

void *hs_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) oom(n);
    return p;
}

void *hs_calloc(size_t n, size_t size)
{
    uint64_t total;
    if (hs_mul_overflow(n, size, &total) || total > SIZE_MAX) oom(SIZE_MAX);
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) oom((size_t)total);
    return p;
}

void *hs_realloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) oom(n);
    return q;
}

void *hs_aligned_alloc(size_t align, size_t n)
{
    void *p = NULL;
    if (align < sizeof(void *)) align = sizeof(void *);
    if (posix_memalign(&p, align, n ? n : 1) != 0) oom(n);
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
