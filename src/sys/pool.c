/*
 * pool.c — a persistent thread pool for kernels: run fn over [0, n) split across threads.
 *
 * Design note
 * -----------
 * A forward pass calls sys_pool_run thousands of times per second with small jobs, so the
 * workers are created once and wait between jobs. A job is published by bumping a
 * generation counter; a worker that sees a new generation runs its slice and decrements
 * `pending`. Waiting is "spin briefly, then sleep on a condition variable": a short spin
 * catches back-to-back jobs without a syscall, the sleep keeps idle pools off the CPU.
 *
 *   caller (thread 0)                       worker t (1..n_threads-1)
 *   ---------------------------------       ---------------------------------------
 *   job = {fn, ctx, n}; pending = T-1       spin/sleep until gen != seen
 *   gen++; if sleepers: lock; broadcast ->  seen = gen; run slice t of job
 *   run slice 0                             if --pending == 0 and the caller sleeps:
 *   spin/sleep until pending == 0    <---     lock; signal; unlock
 *
 * Invariants:
 *   1. sys_pool_run's split of [0, n) is sys_pool_slice(n, T, t): a pure function of (n, T, t);
 *      slices are contiguous, in thread order, cover [0, n) exactly, and their sizes
 *      differ by at most one. Timing never changes which thread gets which indices.
 *   2. fn is never called with an empty slice.
 *   3. The job fields are written only while no worker reads them: before the generation
 *      bump (which publishes them) and after pending reached 0 (all workers done).
 *   4. Every sleep re-checks its condition under `mu`, so a wake-up sent under `mu` after
 *      the condition changed is never lost (invariant 7 says when one is sent).
 *   5. One caller at a time: sys_pool_run is not reentrant (fn must not call it on the
 *      same pool) and must not be called from two threads at once.
 *   6. sys_pool_run_chunks: the pieces are claimed with one atomic add on `next` each, so
 *      every piece runs exactly once; `next` and `chunk` are job fields (invariant 3).
 *      Every thread, the caller included, claims until the counter passes n, so a worker
 *      that wakes late finds nothing left and only checks in.
 *   7. Wake-ups only for sleepers: back-to-back jobs meet spinning threads, and a lock,
 *      broadcast and unlock per job (and per finish) cost futex calls on every job (about 50
 *      per decode token of the 0.8b model, half of them waking nobody). A sleeper announces
 *      itself under `mu` (sleepers + 1, caller_asleep = true) before re-checking its
 *      condition; the other side changes the condition, then reads the announcement, and
 *      takes `mu` to wake only when it is set. All sequentially consistent atomics: either
 *      the reader sees the announcement (and its lock waits until the sleeper is in
 *      pthread_cond_wait or has seen the change), or the announcement comes later in the
 *      single order of those operations, and so does the sleeper's re-check, which then sees
 *      the change and does not sleep.
 */
#include "sys/sys.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

/* About a few microseconds of polling before a thread goes to sleep. */
#define POOL_SPIN 2000
#define POOL_MAX_THREADS 1024

struct sys_pool {
    int n_threads;              /* including the caller */
    pthread_t *threads;         /* (n_threads - 1) workers */
    pthread_mutex_t mu;
    pthread_cond_t cv_work;     /* workers wait here for a new generation */
    pthread_cond_t cv_done;     /* the caller waits here for pending == 0 */
    _Atomic uint64_t gen;       /* bumped once per job (and once to stop) */
    _Atomic int pending;        /* workers that have not finished the current job */
    _Atomic bool stop;          /* set before the final generation bump */
    _Atomic int sleepers;       /* workers asleep on cv_work, or about to be (invariant 7) */
    _Atomic bool caller_asleep; /* the caller asleep on cv_done, or about to be */
    /* the current job (invariant 3) */
    sys_pool_fn fn;
    void *ctx;
    int64_t n;
    int64_t chunk;              /* 0: static slices; else pieces claimed from `next` */
    _Atomic int64_t next;
};

struct worker_arg {
    struct sys_pool *pool;
    int t;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

void sys_pool_slice(int64_t n, int n_threads, int t, int64_t *begin, int64_t *end)
{
    if (n < 0) n = 0;
    if (n_threads < 1) n_threads = 1;
    if (t < 0 || t >= n_threads) { *begin = *end = n; return; }
    int64_t base = n / n_threads, rem = n % n_threads;
    /* the first `rem` threads take one extra index */
    *begin = (int64_t)t * base + (t < rem ? t : rem);
    *end = *begin + base + (t < rem ? 1 : 0);
}

static void run_slice(struct sys_pool *p, int t)
{
    if (p->chunk) {
        for (;;) {
            int64_t b = atomic_fetch_add(&p->next, p->chunk);
            if (b >= p->n) return;
            p->fn(p->ctx, b, b + p->chunk < p->n ? b + p->chunk : p->n, t);
        }
    }
    int64_t b, e;
    sys_pool_slice(p->n, p->n_threads, t, &b, &e);
    if (b < e) p->fn(p->ctx, b, e, t);
}

static void *worker_main(void *arg)
{
    struct worker_arg wa = *(struct worker_arg *)arg;
    hs_free(arg);
    struct sys_pool *p = wa.pool;
    uint64_t seen = 0; /* the pool starts at generation 0 */
    for (;;) {
        uint64_t g = atomic_load(&p->gen);
        for (int i = 0; i < POOL_SPIN && g == seen; i++) {
            cpu_relax();
            g = atomic_load(&p->gen);
        }
        if (g == seen) {
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while ((g = atomic_load(&p->gen)) == seen) pthread_cond_wait(&p->cv_work, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) break;
        seen = g;
        run_slice(p, wa.t);
        if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->caller_asleep)) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->cv_done);
            pthread_mutex_unlock(&p->mu);
        }
    }
    return NULL;
}

struct sys_pool *sys_pool_new(int n_threads)
{
    if (n_threads < 1) n_threads = 1;
    if (n_threads > POOL_MAX_THREADS) n_threads = POOL_MAX_THREADS;
    struct sys_pool *p = hs_calloc(1, sizeof *p);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    atomic_init(&p->gen, 0);
    atomic_init(&p->pending, 0);
    atomic_init(&p->next, 0);
    atomic_init(&p->stop, false);
    atomic_init(&p->sleepers, 0);
    atomic_init(&p->caller_asleep, false);
    p->threads = hs_calloc((size_t)n_threads, sizeof *p->threads);
    p->n_threads = 1;
    for (int t = 1; t < n_threads; t++) {
        struct worker_arg *wa = hs_malloc(sizeof *wa);
        wa->pool = p;
        wa->t = t;
        int rc = pthread_create(&p->threads[t - 1], NULL, worker_main, wa);
        if (rc != 0) {
            /* a smaller pool still computes the same results (kernels are thread-count
             * invariant); say so and carry on */
            hs_free(wa);
            log_warn("thread pool: could not start thread %d of %d: %s; using %d", t,
                     n_threads, strerror(rc), t);
            break;
        }
        p->n_threads = t + 1;
    }
    return p;
}

void sys_pool_free(struct sys_pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, true);
    atomic_fetch_add(&p->gen, 1);
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    for (int t = 1; t < p->n_threads; t++) pthread_join(p->threads[t - 1], NULL);
    pthread_cond_destroy(&p->cv_done);
    pthread_cond_destroy(&p->cv_work);
    pthread_mutex_destroy(&p->mu);
    hs_free(p->threads);
    hs_free(p);
}

int sys_pool_threads(const struct sys_pool *p) { return p ? p->n_threads : 1; }

static void run_job(struct sys_pool *p, int64_t n, int64_t chunk, sys_pool_fn fn, void *ctx)
{
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->chunk = chunk;
    atomic_store(&p->next, 0);
    atomic_store(&p->pending, p->n_threads - 1);
    atomic_fetch_add(&p->gen, 1);
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv_work);
        pthread_mutex_unlock(&p->mu);
    }

    run_slice(p, 0);

    for (int i = 0; i < POOL_SPIN && atomic_load(&p->pending) != 0; i++) cpu_relax();
    if (atomic_load(&p->pending) != 0) {
        pthread_mutex_lock(&p->mu);
        atomic_store(&p->caller_asleep, true);
        while (atomic_load(&p->pending) != 0) pthread_cond_wait(&p->cv_done, &p->mu);
        atomic_store(&p->caller_asleep, false);
        pthread_mutex_unlock(&p->mu);
    }
}

void sys_pool_run(struct sys_pool *p, int64_t n, sys_pool_fn fn, void *ctx)
{
    if (n <= 0) return;
    /* one thread, or a job so small that only slice 0 is non-empty: run inline */
    if (!p || p->n_threads == 1 || n == 1) {
        fn(ctx, 0, n, 0);
        return;
    }
    run_job(p, n, 0, fn, ctx);
}

void sys_pool_run_chunks(struct sys_pool *p, int64_t n, int64_t chunk, sys_pool_fn fn, void *ctx)
{
    if (n <= 0) return;
    if (chunk < 1) chunk = 1;
    if (!p || p->n_threads == 1 || n <= chunk) {
        for (int64_t b = 0; b < n; b += chunk) fn(ctx, b, b + chunk < n ? b + chunk : n, 0);
        return;
    }
    run_job(p, n, chunk, fn, ctx);
}
