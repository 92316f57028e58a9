/*
 * sched.c — the scheduler: a bounded FIFO of jobs consumed by the one engine thread that
 * owns the model and every sequence, and the job object shared with the connection threads.
 * What the engine thread does with a job is the caller's (struct sched_ops): the server's is
 * batch.c, which admits up to --parallel jobs and runs them together, one forward step at a
 * time.
 *
 * Design note
 * -----------
 * A job is shared by two threads: the connection thread that parsed it (and later streams
 * its bytes) and the engine thread that runs it. Each holds a reference; the HTTP response
 * object holds a third while it streams. The engine side only appends bytes and signals; it
 * never waits for a reader, so a slow or dead client cannot stall other requests. A client
 * that goes away is noticed by its connection thread (socket hang-up) which sets
 * `cancelled`; the engine checks it before every step and stops there. /metrics counts each
 * cancel once, by where it stopped (metrics_cancel: in the queue, in the prefill, with the
 * prompt tokens it left, or in generation), so a test can see that a prefill was cut rather
 * than infer it from timing.
 *
 * The engine thread loops: admit jobs from the queue's head while fewer than `parallel`
 * run (ops.admit may start one, finish it at once, or leave it at the head until running
 * ones make room: SCHED_ADMIT_WAIT, only while others run), then one ops.step over all the
 * running ones; it sleeps only when nothing runs or waits.
 *
 * Invariants:
 *   1. Exactly one thread ever touches the engine, its sequences and the tokenizer.
 *   2. Jobs are admitted in submit order. At most max_queue jobs wait beyond the free
 *      slots (parallel - running, none while the head waits for room: WAIT), so at most
 *      max_queue + parallel are in the scheduler; a submit beyond that fails at once with
 *      API_ERR_QUEUE_FULL.
 *   3. Every job that was submitted ends with job_done exactly once, even when cancelled or
 *      when the server stops, so no connection thread waits forever.
 *   4. A job's byte queue only grows at the end; job_take hands bytes out in order, once.
 */
#include "server/server_int.h"

#include "sys/sys.h"

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <string.h>
#include <time.h>

/* ---- jobs ---------------------------------------------------------------------------- */

struct job *job_new(void)
{
    struct job *j = hs_calloc(1, sizeof(*j));
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    strbuf_init(&j->out);
    j->refs = 1;
    j->status = 200;
    atomic_init(&j->cancelled, false);
    return j;
}

void job_retain(struct job *j)
{
    pthread_mutex_lock(&j->mu);
    j->refs++;
    pthread_mutex_unlock(&j->mu);
}

void job_release(struct job *j)
{
    if (!j) return;
    pthread_mutex_lock(&j->mu);
    int left = --j->refs;
    pthread_mutex_unlock(&j->mu);
    if (left > 0) return;
    api_request_free(&j->req);
    strbuf_free(&j->out);
    pthread_cond_destroy(&j->cv);
    pthread_mutex_destroy(&j->mu);
    hs_free(j);
}

void job_emit(struct job *j, const char *data, size_t len)
{
    if (!len) return;
    pthread_mutex_lock(&j->mu);
    /* drop what the reader has taken so the queue does not grow with the whole answer */
    if (j->out_off && j->out_off == j->out.len) { strbuf_reset(&j->out); j->out_off = 0; }
    strbuf_append(&j->out, data, len);
    j->started = true;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void job_done(struct job *j, int status)
{
    pthread_mutex_lock(&j->mu);
    if (!j->started) j->status = status;
    j->done = true;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

bool job_cancelled(struct job *j) { return atomic_load(&j->cancelled); }

void job_cancel(struct job *j)
{
    atomic_store(&j->cancelled, true);
    pthread_mutex_lock(&j->mu);
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

/* What the client's socket says: nothing new; EOF (the client shut its sending side:
 * closed, or only half-closed: the bytes on the wire are the same); or gone (reset, or an
 * error). A request body is complete before we wait, so readable data now is either EOF or
 * a pipelined request; only EOF and errors count. */
enum peer_state { PEER_OPEN = 0, PEER_EOF, PEER_GONE };

static enum peer_state peer_poll(int fd)
{
    struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };
    if (poll(&p, 1, 0) <= 0) return PEER_OPEN;
    if (p.revents & (POLLHUP | POLLERR | POLLNVAL)) return PEER_GONE;
    return (p.revents & POLLRDHUP) ? PEER_EOF : PEER_OPEN;
}

/* An interim response a client that reads on ignores (RFC 9110 15.2: an HTTP/1.1 client
 * parses any 1xx before the final answer); a client that closed answers it with a reset. */
static bool peer_interim(int fd)
{
    static const char msg[] = "HTTP/1.1 102 Processing\r\n\r\n";
    ssize_t n = send(fd, msg, sizeof msg - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    return n == (ssize_t)(sizeof msg - 1);
}

enum job_wait_result job_wait(struct job *j, bool want_output, struct peer *p)
{
    pthread_mutex_lock(&j->mu);
    for (;;) {
        if (j->done || (want_output && j->out.len > j->out_off)) break;
        /* only the client's hang-up ends the wait: a job the server cancelled still gets
         * job_done (invariant 3), and its answer (503, an in-stream error) goes out */
        enum peer_state ps = p && p->fd >= 0 ? peer_poll(p->fd) : PEER_OPEN;
        if (ps == PEER_EOF && !p->half_closed) {
            /* closed or half-closed? write something: a closed client resets (GONE at a
             * later poll), a half-closed one reads on */
            if (p->probe == PEER_PROBE_SSE) {
                p->half_closed = true;
                pthread_mutex_unlock(&j->mu);
                return JOB_WAIT_PROBE;
            }
            if (p->probe == PEER_PROBE_INTERIM && peer_interim(p->fd)) p->half_closed = true;
            else ps = PEER_GONE;
        }
        if (ps == PEER_GONE) {
            pthread_mutex_unlock(&j->mu);
            atomic_store(&j->cancelled, true);
            return JOB_WAIT_GONE;
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&j->cv, &j->mu, &ts);
    }
    pthread_mutex_unlock(&j->mu);
    return JOB_WAIT_READY;
}

size_t job_take(struct job *j, char *buf, size_t max, bool *eof)
{
    pthread_mutex_lock(&j->mu);
    size_t n = HS_MIN(max, j->out.len - j->out_off);
    if (n) memcpy(buf, j->out.buf + j->out_off, n);
    j->out_off += n;
    *eof = j->done && j->out_off == j->out.len;
    pthread_mutex_unlock(&j->mu);
    return n;
}

bool job_wait_done(struct job *j, double max_s)
{
    if (j->t_submit <= 0) return false; /* never submitted: nothing will end it */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    double ns = until.tv_nsec + max_s * 1e9;
    until.tv_sec += (time_t)(ns / 1e9);
    until.tv_nsec = (long)(ns - (double)(time_t)(ns / 1e9) * 1e9);
    pthread_mutex_lock(&j->mu);
    while (!j->done && pthread_cond_timedwait(&j->cv, &j->mu, &until) != ETIMEDOUT) {}
    bool done = j->done;
    pthread_mutex_unlock(&j->mu);
    return done;
}

/* A cancelled job still ends with an answer: nobody reads it when the client is gone, and
 * a client waiting while the server stops gets a 503 it can retry. */

const char job_cancelled_msg[] = "the request was cancelled: the client went away or the server is stopping";

void job_body(struct job *j, const struct strbuf *b)
{
    pthread_mutex_lock(&j->mu);
    strbuf_append(&j->out, b->buf ? b->buf : "", b->len);
    pthread_mutex_unlock(&j->mu);
}

void job_fail(struct job *j, struct api_response *r, int code, const char *msg)
{
    struct strbuf out;
    strbuf_init(&out);
    int status = r ? api_response_fail(r, code, msg, &out) : api_error_write(j->req.kind, code, msg, &out);
    if (r && api_response_started(r)) job_emit(j, out.buf, out.len); /* in-stream error */
    else job_body(j, &out);
    strbuf_free(&out);
    job_done(j, status);
}

/* ---- the scheduler ----------------------------------------------------------------- */

/* Admit from the queue's head while there is room (invariant 2), then one step of the
 * running jobs; sleep only when nothing runs or waits. */
static void *sched_main(void *arg)
{
    struct sched *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->n && !s->running && !s->stopping) pthread_cond_wait(&s->cv, &s->mu);
        if (!s->n && !s->running && s->stopping) break;
        while (s->n && s->running < s->parallel) {
            struct job *j = s->ring[s->head];
            s->head = (s->head + 1) % s->cap;
            s->n--;
            s->running++; /* the admission holds its slot: depth stays n + running */
            s->admitting = j;
            pthread_mutex_unlock(&s->mu);
            enum sched_admit a = SCHED_ADMIT_DONE;
            if (job_cancelled(j)) {
                if (s->srv) metrics_cancel(&s->srv->metrics, NULL);
                job_fail(j, NULL, API_ERR_OVERLOADED, job_cancelled_msg);
            } else {
                a = s->ops.admit(s->ctx, j, s->running - 1);
            }
            pthread_mutex_lock(&s->mu);
            s->admitting = NULL;
            if (a == SCHED_ADMIT_RUNNING) continue; /* the ops hold the job's reference now */
            s->running--;
            s->blocked = a == SCHED_ADMIT_WAIT;
            if (a == SCHED_ADMIT_WAIT) { /* back to the head: it goes first once there is room */
                s->head = (s->head + s->cap - 1) % s->cap;
                s->ring[s->head] = j;
                s->n++;
                /* no free slot after all: the youngest beyond max_queue are refused, as a
                 * submit now would be (invariant 2) */
                while (s->n > HS_MAX(s->max_queue, 1)) {
                    struct job *y = s->ring[(s->head + s->n - 1) % s->cap];
                    s->n--;
                    job_fail(y, NULL, API_ERR_QUEUE_FULL, "the request queue is full; retry later");
                    job_release(y);
                }
                break;
            }
            job_release(j); /* under s->mu: sched_stop may be cancelling it */
        }
        if (!s->running) continue;
        bool stopping = s->stopping;
        pthread_mutex_unlock(&s->mu);
        int left = s->ops.step(s->ctx, stopping);
        pthread_mutex_lock(&s->mu);
        if (left < s->running) s->blocked = false; /* room again: the head is tried next */
        s->running = left;
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int sched_start(struct sched *s, int max_queue, int parallel, const struct sched_ops *ops, void *ctx,
                struct server *srv, struct hs_err *err)
{
    memset(s, 0, sizeof(*s));
    if (max_queue < 0 || max_queue > 1 << 20)
        return hs_err_set(err, HS_ERR_INVALID, "--max-queue %d is outside 0..%d", max_queue, 1 << 20);
    if (parallel < 1 || parallel > SERVER_MAX_PARALLEL)
        return hs_err_set(err, HS_ERR_INVALID, "--parallel %d is outside 1..%d", parallel, SERVER_MAX_PARALLEL);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->cap = max_queue + parallel;
    s->max_queue = max_queue;
    s->parallel = parallel;
    s->ring = hs_calloc((size_t)s->cap, sizeof(*s->ring));
    s->ops = *ops;
    s->ctx = ctx;
    s->srv = srv;
    if (srv) watch_start(srv); /* before the engine thread: it may set the engine's identity */
    if (pthread_create(&s->thread, NULL, sched_main, s)) {
        if (srv) watch_stop(srv);
        hs_free(s->ring);
        s->ring = NULL;
        return hs_err_set(err, HS_ERR_IO, "cannot start the engine thread: %s", strerror(errno));
    }
    s->started = true;
    return HS_OK;
}

int sched_submit(struct sched *s, struct job *j)
{
    pthread_mutex_lock(&s->mu);
    int rc = HS_OK;
    if (s->stopping) rc = API_ERR_OVERLOADED;
    else if (s->n >= s->max_queue + (s->blocked ? 0 : s->parallel - s->running)) rc = API_ERR_QUEUE_FULL;
    else {
        job_retain(j);
        j->t_submit = sys_time_sec();
        s->ring[(s->head + s->n) % s->cap] = j;
        s->n++;
        pthread_cond_signal(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int sched_depth(struct sched *s)
{
    pthread_mutex_lock(&s->mu);
    int d = s->n + s->running;
    pthread_mutex_unlock(&s->mu);
    return d;
}

void sched_counts(struct sched *s, int *running, int *waiting)
{
    pthread_mutex_lock(&s->mu);
    *running = s->running;
    *waiting = s->n;
    pthread_mutex_unlock(&s->mu);
}

void sched_stop(struct sched *s)
{
    if (!s->started) return;
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    for (int i = 0; i < s->n; i++) job_cancel(s->ring[(s->head + i) % s->cap]);
    if (s->admitting) job_cancel(s->admitting);
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    /* the engine drains the queue and its next step cancels every running job: each gets
     * job_done (invariant 3) */
    pthread_join(s->thread, NULL);
    if (s->srv) watch_stop(s->srv); /* before the model can be freed */
    s->started = false;
}

void sched_free(struct sched *s)
{
    if (!s->ring) return;
    hs_free(s->ring);
    s->ring = NULL;
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
}

