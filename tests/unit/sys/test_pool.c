/* test_pool.c — the thread pool: the split is a pure, balanced, covering function; runs
 * (static or chunked) see every index exactly once on the right thread; many tiny runs do
 * not deadlock; a stalled thread's remaining pieces go to the others. */
#include <criterion/criterion.h>

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "sys/sys.h"

static void check_split(int64_t n, int n_threads)
{
    int64_t prev_end = 0, min_size = INT64_MAX, max_size = 0, prev_size = INT64_MAX;
    for (int t = 0; t < n_threads; t++) {
        int64_t b, e, b2, e2;
        sys_pool_slice(n, n_threads, t, &b, &e);
        sys_pool_slice(n, n_threads, t, &b2, &e2);
        cr_assert(b == b2 && e == e2, "deterministic");
        cr_assert_eq(b, prev_end, "n=%lld T=%d t=%d: begins at %lld, previous ended at %lld",
                     (long long)n, n_threads, t, (long long)b, (long long)prev_end);
        cr_assert_geq(e, b);
        int64_t size = e - b;
        cr_assert_leq(size, prev_size, "earlier threads never get less");
        prev_size = size;
        if (size < min_size) min_size = size;
        if (size > max_size) max_size = size;
        prev_end = e;
    }
    cr_assert_eq(prev_end, n, "n=%lld T=%d: covers up to %lld", (long long)n, n_threads,
                 (long long)prev_end);
    cr_assert_leq(max_size - min_size, 1, "n=%lld T=%d: balanced", (long long)n, n_threads);
}

Test(sys_pool, slices_cover_exactly)
{
    for (int64_t n = 0; n <= 300; n++)
        for (int t = 1; t <= 17; t++) check_split(n, t);
    static const int64_t big[] = { 1000003, 1ll << 40, INT64_MAX / 2, INT64_MAX };
    for (size_t i = 0; i < HS_ARRAY_LEN(big); i++) {
        check_split(big[i], 1);
        check_split(big[i], 7);
        check_split(big[i], 64);
        check_split(big[i], 1024);
    }
}

Test(sys_pool, slice_known_values_and_odd_arguments)
{
    int64_t b, e;
    sys_pool_slice(10, 4, 0, &b, &e);
    cr_assert(b == 0 && e == 3);
    sys_pool_slice(10, 4, 1, &b, &e);
    cr_assert(b == 3 && e == 6);
    sys_pool_slice(10, 4, 2, &b, &e);
    cr_assert(b == 6 && e == 8);
    sys_pool_slice(10, 4, 3, &b, &e);
    cr_assert(b == 8 && e == 10);
    sys_pool_slice(2, 4, 3, &b, &e);
    cr_assert_eq(b, e, "n < threads: the last threads get nothing");
    sys_pool_slice(-5, 4, 0, &b, &e);
    cr_assert_eq(b, e, "negative n is empty");
    sys_pool_slice(10, 4, 4, &b, &e);
    cr_assert_eq(b, e, "t out of range is empty");
    sys_pool_slice(10, 4, -1, &b, &e);
    cr_assert_eq(b, e);
}

Test(sys_pool, new_free_threads)
{
    struct sys_pool *p = sys_pool_new(3);
    cr_assert_eq(sys_pool_threads(p), 3);
    sys_pool_free(p);
    p = sys_pool_new(0);
    cr_assert_eq(sys_pool_threads(p), 1, "at least the caller");
    sys_pool_free(p);
    sys_pool_free(NULL);
}

enum { MAX_N = 1000, MAX_T = 8 };

struct sum_ctx {
    int n_threads;
    int64_t n;
    int64_t sum[MAX_T];          /* per thread: no sharing, no atomics needed */
    int calls[MAX_T];
    int visits[MAX_N];           /* each index written by exactly one thread */
    pthread_t caller, who[MAX_T];
    _Atomic int bad_slice;
};

static void sum_fn(void *vctx, int64_t begin, int64_t end, int t)
{
    struct sum_ctx *c = vctx;
    int64_t b, e;
    sys_pool_slice(c->n, c->n_threads, t, &b, &e);
    if (t < 0 || t >= c->n_threads || b != begin || e != end || begin >= end)
        atomic_fetch_add(&c->bad_slice, 1);
    if (t < 0 || t >= MAX_T) return;
    c->calls[t]++;
    c->who[t] = pthread_self();
    for (int64_t i = begin; i < end; i++) {
        c->sum[t] += i;
        if (i >= 0 && i < MAX_N) c->visits[i]++;
    }
}

Test(sys_pool, run_sums_for_1_to_4_threads, .timeout = 60)
{
    static struct sum_ctx c;
    for (int T = 1; T <= 4; T++) {
        struct sys_pool *p = sys_pool_new(T);
        cr_assert_eq(sys_pool_threads(p), T);
        for (int64_t n = 0; n <= MAX_N; n++) {
            memset(&c, 0, sizeof c);
            c.n_threads = T;
            c.n = n;
            c.caller = pthread_self();
            sys_pool_run(p, n, sum_fn, &c);
            cr_assert_eq(atomic_load(&c.bad_slice), 0, "T=%d n=%lld: wrong slice", T, (long long)n);
            int64_t total = 0;
            for (int t = 0; t < T; t++) {
                total += c.sum[t];
                int64_t b, e;
                sys_pool_slice(n, T, t, &b, &e);
                cr_assert_eq(c.calls[t], b < e ? 1 : 0, "T=%d n=%lld t=%d: %d calls", T,
                             (long long)n, t, c.calls[t]);
            }
            cr_assert_eq(total, n * (n - 1) / 2, "T=%d n=%lld", T, (long long)n);
            for (int64_t i = 0; i < n; i++) cr_assert_eq(c.visits[i], 1, "index %lld", (long long)i);
            if (n > 0) cr_assert(pthread_equal(c.who[0], c.caller), "thread 0 is the caller");
            for (int t = 1; t < T; t++)
                if (c.calls[t]) cr_assert_not(pthread_equal(c.who[t], c.caller), "t=%d ran on the caller", t);
        }
        sys_pool_free(p);
    }
}

static void tiny_fn(void *vctx, int64_t begin, int64_t end, int t)
{
    atomic_fetch_add((_Atomic int64_t *)vctx, end - begin);
}

Test(sys_pool, ten_thousand_tiny_runs, .timeout = 60)
{
    _Atomic int64_t count = 0;
    struct sys_pool *p = sys_pool_new(4);
    int64_t want = 0;
    for (int i = 0; i < 10000; i++) {
        int64_t n = 1 + i % 9; /* 1..9: some threads idle, some busy */
        sys_pool_run(p, n, tiny_fn, &count);
        want += n;
        cr_assert_eq(atomic_load(&count), want, "run %d lost work", i);
        if (i % 2500 == 0) { /* let the workers fall asleep, then wake them */
            struct timespec ts = { 0, 5 * 1000 * 1000 };
            nanosleep(&ts, NULL);
        }
    }
    sys_pool_free(p);
}

Test(sys_pool, more_threads_than_cores, .timeout = 60)
{
    _Atomic int64_t count = 0;
    struct sys_pool *p = sys_pool_new(8);
    for (int i = 0; i < 2000; i++) sys_pool_run(p, 1000, tiny_fn, &count);
    cr_assert_eq(atomic_load(&count), 2000 * 1000);
    sys_pool_free(p);
}

Test(sys_pool, free_right_after_new_and_after_sleep, .timeout = 30)
{
    for (int i = 0; i < 50; i++) sys_pool_free(sys_pool_new(1 + i % 5));
    struct sys_pool *p = sys_pool_new(3);
    struct timespec ts = { 0, 20 * 1000 * 1000 };
    nanosleep(&ts, NULL); /* workers are asleep on the condition variable now */
    sys_pool_free(p);
}

/* Two pools used from two threads at once do not interfere. */
struct pool_thread_arg {
    struct sys_pool *p;
    _Atomic int64_t count;
};

static void *drive_pool(void *varg)
{
    struct pool_thread_arg *a = varg;
    for (int i = 0; i < 1000; i++) sys_pool_run(a->p, 37, tiny_fn, &a->count);
    return NULL;
}

Test(sys_pool, independent_pools_in_parallel, .timeout = 60)
{
    struct pool_thread_arg a = { sys_pool_new(2), 0 }, b = { sys_pool_new(3), 0 };
    pthread_t ta, tb;
    cr_assert_eq(pthread_create(&ta, NULL, drive_pool, &a), 0);
    cr_assert_eq(pthread_create(&tb, NULL, drive_pool, &b), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    cr_assert_eq(atomic_load(&a.count), 37000);
    cr_assert_eq(atomic_load(&b.count), 37000);
    sys_pool_free(a.p);
    sys_pool_free(b.p);
}

/* ---- sys_pool_run_chunks ------------------------------------------------------------- */

struct chunk_ctx {
    int64_t n, chunk;
    int n_threads;
    _Atomic int visits[MAX_N];
    _Atomic int bad_piece, pieces;
    _Atomic int64_t per_thread[MAX_T];
};

static void chunk_fn(void *vctx, int64_t begin, int64_t end, int t)
{
    struct chunk_ctx *c = vctx;
    int64_t want_end = begin + c->chunk < c->n ? begin + c->chunk : c->n;
    if (t < 0 || t >= c->n_threads || begin % c->chunk || end != want_end || begin >= end || end > c->n)
        atomic_fetch_add(&c->bad_piece, 1);
    atomic_fetch_add(&c->pieces, 1);
    if (t >= 0 && t < MAX_T) atomic_fetch_add(&c->per_thread[t], end - begin);
    for (int64_t i = begin; i < end; i++)
        if (i >= 0 && i < MAX_N) atomic_fetch_add(&c->visits[i], 1);
}

static void check_chunks(struct sys_pool *p, int T, int64_t n, int64_t chunk)
{
    static struct chunk_ctx c;
    memset(&c, 0, sizeof c);
    c.n = n;
    c.chunk = chunk < 1 ? 1 : chunk;
    c.n_threads = T;
    sys_pool_run_chunks(p, n, chunk, chunk_fn, &c);
    cr_assert_eq(atomic_load(&c.bad_piece), 0, "T=%d n=%lld chunk=%lld: a piece of the wrong shape", T,
                 (long long)n, (long long)chunk);
    int64_t want_pieces = n > 0 ? (n + c.chunk - 1) / c.chunk : 0;
    cr_assert_eq(atomic_load(&c.pieces), want_pieces, "T=%d n=%lld chunk=%lld: %d pieces", T, (long long)n,
                 (long long)chunk, atomic_load(&c.pieces));
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(atomic_load(&c.visits[i]), 1, "T=%d n=%lld chunk=%lld: index %lld ran %d times", T,
                     (long long)n, (long long)chunk, (long long)i, atomic_load(&c.visits[i]));
    int64_t total = 0;
    for (int t = 0; t < T; t++) total += atomic_load(&c.per_thread[t]);
    cr_assert_eq(total, n);
}

Test(sys_pool_chunks, run_every_index_once, .timeout = 120)
{
    static const int64_t chunks[] = { 0, 1, 3, 16, 64, 999, 5000 };
    for (int T = 1; T <= 4; T++) {
        struct sys_pool *p = sys_pool_new(T);
        for (int64_t n = 0; n <= MAX_N; n += (n < 70 ? 1 : 37))
            for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) check_chunks(p, T, n, chunks[k]);
        check_chunks(p, T, MAX_N, 7);
        sys_pool_free(p);
    }
}

/* Static and chunked jobs interleave on one pool, with pauses that put the workers to
 * sleep in between: no piece is lost or run twice, and the static split is unchanged. */
Test(sys_pool_chunks, interleave_with_slices, .timeout = 60)
{
    static struct sum_ctx s;
    struct sys_pool *p = sys_pool_new(3);
    for (int i = 0; i < 3000; i++) {
        check_chunks(p, 3, 1 + i % MAX_N, 1 + i % 40);
        memset(&s, 0, sizeof s);
        s.n_threads = 3;
        s.n = 1 + i % 50;
        s.caller = pthread_self();
        sys_pool_run(p, s.n, sum_fn, &s);
        cr_assert_eq(atomic_load(&s.bad_slice), 0, "run %d: a static slice moved", i);
        if (i % 1000 == 0) {
            struct timespec ts = { 0, 5 * 1000 * 1000 };
            nanosleep(&ts, NULL);
        }
    }
    sys_pool_free(p);
}

/* A thread that is held up leaves its share to the others: a worker's first piece stalls
 * for 200 ms while a piece takes 1 ms, so the caller runs nearly all the rest (a static
 * split would give each thread half). Timing decides who runs what, so the check is
 * that this happens in one of several tries. */
struct slow_ctx {
    _Atomic int caller_pieces, worker_pieces;
    _Atomic int64_t done;
};

static void slow_fn(void *vctx, int64_t begin, int64_t end, int t)
{
    struct slow_ctx *c = vctx;
    struct timespec piece = { 0, 1000 * 1000 }, stall = { 0, 200 * 1000 * 1000 };
    if (t != 0 && atomic_fetch_add(&c->worker_pieces, 1) == 0) nanosleep(&stall, NULL);
    if (t == 0) atomic_fetch_add(&c->caller_pieces, 1);
    nanosleep(&piece, NULL);
    atomic_fetch_add(&c->done, end - begin);
}

Test(sys_pool_chunks, go_to_the_free_thread, .timeout = 60)
{
    struct sys_pool *p = sys_pool_new(2);
    int seen = 0;
    for (int i = 0; i < 10 && !seen; i++) {
        struct slow_ctx c;
        atomic_init(&c.caller_pieces, 0);
        atomic_init(&c.worker_pieces, 0);
        atomic_init(&c.done, 0);
        sys_pool_run_chunks(p, 100, 1, slow_fn, &c);
        cr_assert_eq(atomic_load(&c.done), 100);
        cr_assert_eq(atomic_load(&c.caller_pieces) + atomic_load(&c.worker_pieces), 100);
        if (atomic_load(&c.worker_pieces) >= 1 && atomic_load(&c.caller_pieces) >= 90) seen = 1;
    }
    cr_assert(seen, "the caller never took over the pieces of a stalled worker");
    sys_pool_free(p);
}
