/* test_sched.c — the scheduler and the job object without sockets or a model: FIFO order,
 * the --max-queue bound (0: only when idle), cancel before run (503, never run), byte queue
 * order across emit/take, wait results, and stop draining every queued job. A job skipped
 * because it was cancelled counts in its server's metrics (stage queue). */
#include <criterion/criterion.h>

#include "server/server_int.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

/* A job function that records the order jobs ran in and can be held at a gate. */
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static bool gate_open;
static int ran[64], n_ran;

static void gate_set(bool open)
{
    pthread_mutex_lock(&gate_mu);
    gate_open = open;
    pthread_mutex_unlock(&gate_mu);
}

static void fn_record(struct server *srv, struct job *j)
{
    pthread_mutex_lock(&gate_mu);
    while (!gate_open && !job_cancelled(j)) { /* a cancel signals the job, not the gate: poll */
        pthread_mutex_unlock(&gate_mu);
        usleep(1000);
        pthread_mutex_lock(&gate_mu);
    }
    ran[n_ran++] = (int)j->req.max_tokens; /* the test's job number */
    pthread_mutex_unlock(&gate_mu);
    char b[16];
    int n = snprintf(b, sizeof(b), "job%d;", (int)j->req.max_tokens);
    job_emit(j, b, (size_t)n);
    job_done(j, 200);
}

/* The one-at-a-time ops: admission runs the job to its end. */
static enum sched_admit admit_record(void *ctx, struct job *j, int running)
{
    (void)ctx;
    (void)running;
    fn_record(NULL, j);
    return SCHED_ADMIT_DONE;
}

static int step_none(void *ctx, bool stopping)
{
    (void)ctx;
    (void)stopping;
    return 0;
}

static const struct sched_ops record_ops = { .admit = admit_record, .step = step_none };

static void reset(void)
{
    n_ran = 0;
    gate_set(false);
}

static struct job *numbered(int i)
{
    struct job *j = job_new();
    j->req.max_tokens = i;
    return j;
}

static void wait_running(struct sched *s)
{
    /* under the scheduler's lock: the engine thread writes both (make tsan) */
    for (int i = 0; i < 2000; i++) {
        pthread_mutex_lock(&s->mu);
        bool up = s->running && s->n == 0;
        pthread_mutex_unlock(&s->mu);
        if (up) break;
        usleep(1000);
    }
}

Test(sched_queue, fifo_and_bound)
{
    reset();
    struct sched s;
    cr_assert_eq(sched_start(&s, 2, 1, &record_ops, NULL, NULL, NULL), HS_OK);
    struct job *j[5];
    for (int i = 0; i < 5; i++) j[i] = numbered(i);
    cr_assert_eq(sched_submit(&s, j[0]), HS_OK);
    wait_running(&s); /* job 0 is held at the gate: 1 running + 2 waiting is the bound */
    cr_assert_eq(sched_submit(&s, j[1]), HS_OK);
    cr_assert_eq(sched_submit(&s, j[2]), HS_OK);
    cr_assert_eq(sched_depth(&s), 3);
    cr_assert_eq(sched_submit(&s, j[3]), API_ERR_QUEUE_FULL);
    gate_set(true);
    for (int i = 0; i < 3; i++) cr_assert_eq(job_wait(j[i], false, NULL), JOB_WAIT_READY);
    cr_assert_eq(sched_submit(&s, j[4]), HS_OK);
    cr_assert_eq(job_wait(j[4], false, NULL), JOB_WAIT_READY);
    sched_stop(&s);
    sched_free(&s);
    cr_assert_eq(n_ran, 4);
    cr_assert_eq(ran[0], 0); cr_assert_eq(ran[1], 1); cr_assert_eq(ran[2], 2); cr_assert_eq(ran[3], 4);
    cr_assert_not(j[3]->done, "a refused job must never run");
    for (int i = 0; i < 5; i++) job_release(j[i]);
}

Test(sched_queue, max_queue_zero_only_when_idle)
{
    reset();
    struct sched s;
    cr_assert_eq(sched_start(&s, 0, 1, &record_ops, NULL, NULL, NULL), HS_OK);
    struct job *a = numbered(1), *b = numbered(2);
    cr_assert_eq(sched_submit(&s, a), HS_OK);
    cr_assert_eq(sched_submit(&s, b), API_ERR_QUEUE_FULL);
    gate_set(true);
    cr_assert_eq(job_wait(a, false, NULL), JOB_WAIT_READY);
    for (int i = 0; i < 2000 && sched_depth(&s); i++) usleep(1000);
    cr_assert_eq(sched_submit(&s, b), HS_OK);
    cr_assert_eq(job_wait(b, false, NULL), JOB_WAIT_READY);
    sched_stop(&s);
    struct job *late = numbered(3);
    cr_assert_eq(sched_submit(&s, late), API_ERR_OVERLOADED, "a stopped scheduler refuses work");
    job_release(late);
    sched_free(&s);
    job_release(a);
    job_release(b);
}

Test(sched_queue, cancelled_before_run_is_skipped)
{
    reset();
    struct sched s;
    /* a server of which the scheduler uses only the metrics (the skipped job counts there) */
    struct server *srv = hs_calloc(1, sizeof(*srv));
    pthread_mutex_init(&srv->metrics.mu, NULL);
    cr_assert_eq(sched_start(&s, 4, 1, &record_ops, NULL, srv, NULL), HS_OK);
    struct job *a = numbered(1), *b = numbered(2), *c = numbered(3);
    cr_assert_eq(sched_submit(&s, a), HS_OK);
    wait_running(&s);
    cr_assert_eq(sched_submit(&s, b), HS_OK);
    cr_assert_eq(sched_submit(&s, c), HS_OK);
    job_cancel(b);
    gate_set(true);
    cr_assert_eq(job_wait(c, false, NULL), JOB_WAIT_READY);
    sched_stop(&s);
    sched_free(&s);
    cr_assert_eq(n_ran, 2);
    cr_assert_eq(ran[0], 1);
    cr_assert_eq(ran[1], 3);
    cr_assert(b->done);
    cr_assert_eq(b->status, 503);
    cr_assert_eq(srv->metrics.cancelled[METRICS_CANCEL_QUEUE], 1);
    cr_assert_eq(srv->metrics.cancelled[METRICS_CANCEL_PREFILL] + srv->metrics.cancelled[METRICS_CANCEL_GENERATION], 0);
    pthread_mutex_destroy(&srv->metrics.mu);
    hs_free(srv);
    job_release(a);
    job_release(b);
    job_release(c);
}

Test(sched_queue, stop_drains_and_cancels)
{
    reset();
    struct sched s;
    cr_assert_eq(sched_start(&s, 8, 1, &record_ops, NULL, NULL, NULL), HS_OK);
    struct job *j[4];
    for (int i = 0; i < 4; i++) {
        j[i] = numbered(i);
        cr_assert_eq(sched_submit(&s, j[i]), HS_OK);
    }
    wait_running(&s);
    sched_stop(&s);
    sched_free(&s); /* the gate stays shut: the running job leaves through its cancel flag */
    for (int i = 0; i < 4; i++) {
        cr_assert(j[i]->done, "job %d not done after stop", i);
        cr_assert(job_cancelled(j[i]));
        job_release(j[i]);
    }
    cr_assert_eq(n_ran, 1);
}

Test(sched_job, bytes_in_order)
{
    struct job *j = job_new();
    job_retain(j);
    char all[4096];
    size_t n_all = 0;
    char buf[7];
    bool eof = false;
    for (int i = 0; i < 300; i++) {
        char piece[16];
        int k = snprintf(piece, sizeof(piece), "<%d>", i);
        job_emit(j, piece, (size_t)k);
        memcpy(all + n_all, piece, (size_t)k);
        n_all += (size_t)k;
        if (i % 3 == 0) { /* take some in small bites, interleaved with emits */
            size_t got = job_take(j, buf, sizeof(buf), &eof);
            cr_assert(got > 0);
            cr_assert_not(eof);
            static char seen[4096];
            static size_t n_seen;
            memcpy(seen + n_seen, buf, got);
            n_seen += got;
            cr_assert_eq(memcmp(seen, all, n_seen), 0);
            if (i == 297) { /* drain the rest, then the end */
                job_done(j, 200);
                size_t g;
                while ((g = job_take(j, buf, sizeof(buf), &eof)) > 0) {
                    memcpy(seen + n_seen, buf, g);
                    n_seen += g;
                }
                cr_assert(eof);
                cr_assert_eq(n_seen, n_all);
                cr_assert_eq(memcmp(seen, all, n_all), 0);
            }
        }
    }
    cr_assert(j->started);
    cr_assert_eq(j->status, 200);
    job_release(j);
    job_release(j);
}

Test(sched_job, early_error_keeps_status)
{
    struct job *j = job_new();
    job_done(j, 429);
    cr_assert_eq(job_wait(j, true, NULL), JOB_WAIT_READY);
    cr_assert_eq(j->status, 429);
    struct job *k = job_new();
    job_emit(k, "x", 1);
    job_done(k, 500); /* after output began the status is the stream's 200 */
    cr_assert_eq(k->status, 200);
    job_release(j);
    job_release(k);
}

Test(sched_job, wait_sees_a_closed_socket)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct job *j = job_new();
    close(sv[1]);
    struct peer p = { .fd = sv[0], .probe = PEER_PROBE_INTERIM };
    cr_assert_eq(job_wait(j, true, &p), JOB_WAIT_GONE);
    cr_assert(job_cancelled(j));
    close(sv[0]);
    job_release(j);
}

/* A TCP connection over loopback: *srv is the server's end, *cli the client's. A reset
 * only exists on TCP, so the close / half-close cases need one. */
static void tcp_pair(int *srv, int *cli)
{
    int l = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t n = sizeof a;
    cr_assert_eq(bind(l, (struct sockaddr *)&a, sizeof a), 0);
    cr_assert_eq(listen(l, 1), 0);
    cr_assert_eq(getsockname(l, (struct sockaddr *)&a, &n), 0);
    *cli = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_eq(connect(*cli, (struct sockaddr *)&a, sizeof a), 0);
    *srv = accept(l, NULL, NULL);
    cr_assert_geq(*srv, 0);
    close(l);
}

static void *finish_later(void *arg)
{
    usleep(300 * 1000);
    job_done(arg, 200);
    return NULL;
}

/* A client that shut only its sending side gets its answer: the 102 is read, not reset. */
Test(sched_job, half_closed_client_is_waited_for)
{
    int s, c;
    tcp_pair(&s, &c);
    shutdown(c, SHUT_WR);
    struct job *j = job_new();
    pthread_t t;
    pthread_create(&t, NULL, finish_later, j);
    struct peer p = { .fd = s, .probe = PEER_PROBE_INTERIM };
    cr_assert_eq(job_wait(j, false, &p), JOB_WAIT_READY);
    cr_assert(p.half_closed);
    cr_assert_not(job_cancelled(j));
    pthread_join(t, NULL);
    char buf[64] = { 0 };
    cr_assert_eq(recv(c, buf, sizeof buf - 1, 0), 27);
    cr_assert_str_eq(buf, "HTTP/1.1 102 Processing\r\n\r\n");
    close(s);
    close(c);
    job_release(j);
}

/* A client that closed resets the 102: the wait ends GONE and cancels the job. */
Test(sched_job, closed_client_resets_the_probe)
{
    int s, c;
    tcp_pair(&s, &c);
    close(c);
    struct job *j = job_new();
    struct peer p = { .fd = s, .probe = PEER_PROBE_INTERIM };
    cr_assert_eq(job_wait(j, false, &p), JOB_WAIT_GONE);
    cr_assert(p.half_closed); /* it was probed, then reset */
    cr_assert(job_cancelled(j));
    close(s);
    job_release(j);
}

/* HTTP/1.0 (no interim responses): an EOF is a close. A stream: the caller probes. */
Test(sched_job, eof_without_interim_or_on_a_stream)
{
    int s, c;
    tcp_pair(&s, &c);
    shutdown(c, SHUT_WR);
    struct job *j = job_new();
    struct peer p = { .fd = s, .probe = PEER_PROBE_NONE };
    cr_assert_eq(job_wait(j, false, &p), JOB_WAIT_GONE);
    job_release(j);
    j = job_new();
    p = (struct peer){ .fd = s, .probe = PEER_PROBE_SSE };
    cr_assert_eq(job_wait(j, true, &p), JOB_WAIT_PROBE);
    cr_assert(p.half_closed);
    cr_assert_not(job_cancelled(j));
    job_emit(j, "x", 1);
    cr_assert_eq(job_wait(j, true, &p), JOB_WAIT_READY); /* probed: the EOF no longer counts */
    close(s);
    close(c);
    job_release(j);
}

/* Several at once: jobs stay running across steps until the gate opens; an admission that
 * says WAIT (no room in a budget) keeps the job at the head, admitted first once one ends;
 * while it waits no slot counts as free, so max_queue bounds the waiting (429 beyond). */
struct pool_ctx {
    pthread_mutex_t mu;
    struct job *run[8];
    int n_run, max_seen, admitted[16], n_admitted, budget; /* budget: jobs that fit */
};

static enum sched_admit admit_pool(void *ctx, struct job *j, int running)
{
    struct pool_ctx *p = ctx;
    pthread_mutex_lock(&p->mu);
    if (running > 0 && p->n_run >= p->budget) {
        pthread_mutex_unlock(&p->mu);
        return SCHED_ADMIT_WAIT;
    }
    p->run[p->n_run++] = j;
    if (p->n_run > p->max_seen) p->max_seen = p->n_run;
    p->admitted[p->n_admitted++] = (int)j->req.max_tokens;
    pthread_mutex_unlock(&p->mu);
    return SCHED_ADMIT_RUNNING;
}

static int step_pool(void *ctx, bool stopping)
{
    struct pool_ctx *p = ctx;
    pthread_mutex_lock(&gate_mu);
    bool open = gate_open;
    pthread_mutex_unlock(&gate_mu);
    pthread_mutex_lock(&p->mu);
    if ((open || stopping) && p->n_run > 0) { /* the oldest ends */
        struct job *j = p->run[0];
        memmove(p->run, p->run + 1, (size_t)(p->n_run - 1) * sizeof(*p->run));
        p->n_run--;
        job_done(j, stopping ? 503 : 200);
        job_release(j);
    }
    int left = p->n_run;
    pthread_mutex_unlock(&p->mu);
    if (!open) usleep(1000);
    return left;
}

static const struct sched_ops pool_ops = { .admit = admit_pool, .step = step_pool };

Test(sched_queue, parallel_slots_and_wait)
{
    reset();
    struct pool_ctx p = { .budget = 2 };
    pthread_mutex_init(&p.mu, NULL);
    struct sched s;
    cr_assert_eq(sched_start(&s, 2, 3, &pool_ops, &p, NULL, NULL), HS_OK);
    struct job *j[6];
    for (int i = 0; i < 6; i++) j[i] = numbered(i);
    /* budget 2 of 3 slots: two run, the third waits at the head (WAIT), one more queues */
    for (int i = 0; i < 4; i++) cr_assert_eq(sched_submit(&s, j[i]), HS_OK, "job %d", i);
    for (int i = 0; i < 200; i++) {
        pthread_mutex_lock(&s.mu);
        bool blocked = s.blocked;
        pthread_mutex_unlock(&s.mu);
        if (blocked) break;
        usleep(1000);
    }
    pthread_mutex_lock(&p.mu);
    cr_assert_eq(p.n_admitted, 2, "only what fits the budget runs");
    pthread_mutex_unlock(&p.mu);
    cr_assert_eq(sched_depth(&s), 4);
    /* the head waits for room: no slot counts as free, max_queue (2) are waiting */
    cr_assert_eq(sched_submit(&s, j[4]), API_ERR_QUEUE_FULL);
    gate_set(true);
    for (int i = 0; i < 4; i++) cr_assert_eq(job_wait(j[i], false, NULL), JOB_WAIT_READY);
    cr_assert_eq(sched_submit(&s, j[5]), HS_OK, "room again once they ended");
    cr_assert_eq(job_wait(j[5], false, NULL), JOB_WAIT_READY);
    sched_stop(&s);
    sched_free(&s);
    cr_assert_eq(p.n_admitted, 5);
    for (int i = 0; i < 4; i++) cr_assert_eq(p.admitted[i], i, "admission in submit order");
    cr_assert_eq(p.admitted[4], 5);
    cr_assert_leq(p.max_seen, 2);
    for (int i = 0; i < 6; i++) job_release(j[i]);
    pthread_mutex_destroy(&p.mu);
}
