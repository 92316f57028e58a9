/*
 * sched.c — the scheduler: a bounded FIFO of jobs consumed by the one engine thread that
 * owns the model and every sequence; the job object shared with the connection threads;
 * and the request path around session_run (session.c: the session bank around the
 * prefill), which the engine thread runs for every job. The numbers go to metrics.c.
 *
 * Design note
 * -----------
 * A job is shared by two threads: the connection thread that parsed it (and later streams
 * its bytes) and the engine thread that runs it. Each holds a reference; the HTTP response
 * object holds a third while it streams. The engine side only appends bytes and signals; it
 * never waits for a reader, so a slow or dead client cannot stall other requests. A client
 * that goes away is noticed by its connection thread (socket hang-up) which sets
 * `cancelled`; the engine checks it before every token and between prefill chunks and stops
 * there. /metrics counts each cancel once, by where it stopped (metrics_cancel: in the queue,
 * in the prefill, with the prompt tokens it left, or in generation), so a test can see that a
 * prefill was cut rather than infer it from timing.
 *
 * Invariants:
 *   1. Exactly one thread ever touches the engine, its sequences and the tokenizer.
 *   2. Jobs run in submit order. At most max_queue + 1 jobs are in the scheduler (waiting
 *      or running); a submit beyond that fails at once with API_ERR_QUEUE_FULL.
 *   3. Every job that was submitted ends with job_done exactly once, even when cancelled or
 *      when the server stops, so no connection thread waits forever.
 *   4. A job's byte queue only grows at the end; job_take hands bytes out in order, once.
 */
#include "server/server_int.h"

#include "sys/sys.h"

#include <errno.h>
#include <poll.h>
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

/* The peer closed or reset the connection. A request body is complete before we wait, so
 * any readable data now is either EOF or a pipelined request; only EOF/errors count. */
static bool peer_gone(int fd)
{
    if (fd < 0) return false;
    struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };
    if (poll(&p, 1, 0) <= 0) return false;
    return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

enum job_wait_result job_wait(struct job *j, bool want_output, int fd)
{
    pthread_mutex_lock(&j->mu);
    for (;;) {
        if (j->done || (want_output && j->out.len > j->out_off)) break;
        /* only the client's hang-up ends the wait: a job the server cancelled still gets
         * job_done (invariant 3), and its answer (503, an in-stream error) goes out */
        if (peer_gone(fd)) {
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

/* A cancelled job still ends with an answer: nobody reads it when the client is gone, and
 * a client waiting while the server stops gets a 503 it can retry. */

static const char cancelled_msg[] = "the request was cancelled: the client went away or the server is stopping";

/* A whole body that goes out with its status (non-stream answers and early errors). */
static void job_body(struct job *j, const struct strbuf *b)
{
    pthread_mutex_lock(&j->mu);
    strbuf_append(&j->out, b->buf ? b->buf : "", b->len);
    pthread_mutex_unlock(&j->mu);
}

static void job_fail(struct job *j, struct api_response *r, int code, const char *msg)
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

static void *sched_main(void *arg)
{
    struct sched *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->n && !s->stopping) pthread_cond_wait(&s->cv, &s->mu);
        if (!s->n && s->stopping) break;
        struct job *j = s->ring[s->head];
        s->head = (s->head + 1) % s->cap;
        s->n--;
        s->running = 1;
        s->current = j;
        pthread_mutex_unlock(&s->mu);
        if (job_cancelled(j)) {
            if (s->srv) metrics_cancel(&s->srv->metrics, NULL);
            job_fail(j, NULL, API_ERR_OVERLOADED, cancelled_msg);
        } else {
            s->fn(s->srv, j);
        }
        pthread_mutex_lock(&s->mu);
        s->running = 0;
        s->current = NULL;
        job_release(j); /* under s->mu: sched_stop may be cancelling `current` */
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int sched_start(struct sched *s, int max_queue, job_fn fn, struct server *srv, struct hs_err *err)
{
    memset(s, 0, sizeof(*s));
    if (max_queue < 0 || max_queue > 1 << 20)
        return hs_err_set(err, HS_ERR_INVALID, "--max-queue %d is outside 0..%d", max_queue, 1 << 20);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->cap = max_queue + 1;
    s->ring = hs_calloc((size_t)s->cap, sizeof(*s->ring));
    s->fn = fn;
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
    else if (s->n + s->running >= s->cap) rc = API_ERR_QUEUE_FULL;
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

void sched_stop(struct sched *s)
{
    if (!s->started) return;
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    for (int i = 0; i < s->n; i++) job_cancel(s->ring[(s->head + i) % s->cap]);
    if (s->current) job_cancel(s->current);
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL); /* the engine drains the queue: every job gets job_done */
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

/* ---- the request path: session_run (session.c) -------------------------------------------
 * session_run does render -> tokenize -> bank restore -> prefill -> generate -> bank insert;
 * its start hook (before the prefill) opens the response with the prompt and cached token
 * counts and whether the generation prompt opened <think>; its text callback turns text into
 * the API's bytes; its prefill hook (between prefill chunks) sends a keep-alive to a stream
 * that has been quiet for --keepalive seconds (server_opts.keepalive_s, checked between
 * prefill chunks of about SESSION_PREFILL_CHUNK_S). All three return false once the job is
 * cancelled, so a client that goes away stops its generation within one token, its prefill
 * within one chunk (and before the prefill when it left while queued). */

struct session_ctx {
    struct server *srv;
    struct job *j;
    struct api_response *r;       /* made by the start hook; NULL when session_run failed before */
    struct api_usage usage;
    struct strbuf out;
    double t_emit;                /* sys_time_sec() of the last bytes sent to a stream */
};

/* Stream out what the response appended (a no-op for a whole body). */
static void session_flush(struct session_ctx *c)
{
    if (c->j->req.stream && c->out.len) {
        job_emit(c->j, c->out.buf, c->out.len);
        c->t_emit = sys_time_sec();
    }
    if (c->j->req.stream) strbuf_reset(&c->out);
}

static bool session_on_start(void *ctx, const struct session_start *st)
{
    struct session_ctx *c = ctx;
    struct job *j = c->j;
    const struct api_request *req = &j->req;
    struct api_response_opts ro = {
        .kind = req->kind, .stream = req->stream, .include_usage = req->include_usage,
        .model = c->srv->model_name, .id = j->id, .created = j->created, .tools = req->chat.tools,
        .starts_in_reasoning = st->thinking,
    };
    c->r = api_response_new(&ro);
    c->usage.prompt_tokens = st->prompt_tokens;
    c->usage.cached_tokens = st->cached_tokens;
    if (j->req.stream && !job_cancelled(j)) api_response_begin(c->r, &c->usage, &c->out);
    /* a forced tool call's start is the answer's first text (the parser enters the call) */
    if (st->forced_len) api_response_feed(c->r, st->forced_text, st->forced_len, &c->out);
    if (!job_cancelled(j)) session_flush(c);
    return !job_cancelled(j);
}

/* Between prefill chunks: a keep-alive once keepalive_s passed without bytes, so a
 * long prompt does not look like a dead connection to the client; false once cancelled. */
static bool session_on_prefill(void *ctx, int64_t done, int64_t total)
{
    struct session_ctx *c = ctx;
    (void)done; (void)total;
    if (job_cancelled(c->j)) return false;
    if (c->j->req.stream && c->r && sys_time_sec() - c->t_emit >= c->srv->opts.keepalive_s) {
        api_response_keepalive(c->r, &c->out);
        session_flush(c);
    }
    return true;
}

static bool session_on_text(void *ctx, const char *text, size_t len)
{
    struct session_ctx *c = ctx;
    if (len) api_response_feed(c->r, text, len, &c->out);
    session_flush(c);
    return !job_cancelled(c->j);
}

/* Bank numbers for /metrics, read on the engine thread (the bank's one owner). */
static void session_bank_stats(struct server *srv)
{
    if (!srv->bank) return;
    struct bank_stats st;
    bank_stats_get(srv->bank, &st);
    struct bank_disk_stats ds;
    if (srv->disk) bank_disk_stats_get(srv->disk, &ds);
    pthread_mutex_lock(&srv->metrics.mu);
    srv->metrics.bank = st;
    srv->metrics.have_bank = true;
    if (srv->disk) {
        srv->metrics.disk = ds;
        srv->metrics.have_disk = true;
    }
    pthread_mutex_unlock(&srv->metrics.mu);
}

/* The output cap: the request's own, at most --max-tokens-default, which also applies when
 * the request sets none (cline, Continue); 0 there: up to the context. */
static int64_t session_max_tokens(struct server *srv, struct job *j)
{
    int64_t cap = srv->opts.max_tokens_default, want = j->req.max_tokens;
    if (cap > 0 && (want <= 0 || want > cap)) {
        j->capped = true;
        return cap;
    }
    return want > 0 ? want : srv->n_ctx;
}

void sched_job_session(struct server *srv, struct job *j)
{
    watch_poll(srv); /* an identity hashed in the background opens the disk tier */
    double t_run = sys_time_sec();
    struct hs_err err;
    hs_err_clear(&err);
    struct session_ctx c = { .srv = srv, .j = j };
    strbuf_init(&c.out);
    struct session_opts so = {
        .max_tokens = session_max_tokens(srv, j),
        .disk = srv->disk,
        .n_ctx = srv->n_ctx,
        .ignore_eos = j->req.ignore_eos,
        .on_start = session_on_start,
        .on_prefill = session_on_prefill,
    };
    session_sampling_opts(&j->req.sampling, j->seed, &so.sampling);
    struct session_report rep;
    int rc = session_run(srv->engine, &srv->text, srv->bank, &j->req, &so, session_on_text, &c, &rep, &err);
    if (rc != HS_OK) {
        /* an error once the response exists is the engine's (500); before, the request's */
        job_fail(j, c.r, c.r ? API_ERR_INTERNAL : rc, err.msg);
        watch_report(srv, NULL);
    } else {
        watch_report(srv, &rep);
        /* for the request log, before job_done lets the connection thread read them */
        pthread_mutex_lock(&j->mu);
        j->ran = true;
        j->n_prompt = rep.prompt_tokens;
        j->n_cached = rep.cached_tokens;
        j->n_generated = rep.n_output;
        j->cache_source = rep.cache_source;
        j->stop_reason = rep.stop_reason;
        j->ttft_ms = rep.n_output ? (t_run - j->t_submit) * 1e3 + rep.ttft_ms : -1;
        memcpy(j->first_logits, rep.first_logits_sha256, sizeof j->first_logits);
        pthread_mutex_unlock(&j->mu);
        if (rep.stop_reason == SESSION_STOP_CANCELLED) {
            metrics_cancel(&srv->metrics, &rep);
            job_fail(j, c.r, API_ERR_OVERLOADED, cancelled_msg);
        } else {
            c.usage.completion_tokens = rep.n_output;
            static const enum api_stop api_stops[SESSION_STOP_COUNT] = {
                [SESSION_STOP_LENGTH] = API_STOP_LENGTH, [SESSION_STOP_END] = API_STOP_END,
                [SESSION_STOP_SEQUENCE] = API_STOP_STOP_SEQUENCE,
            };
            enum api_stop stop = api_stops[rep.stop_reason];
            if (stop == API_STOP_END && api_response_n_tool_calls(c.r) > 0) stop = API_STOP_TOOL_CALLS;
            api_response_finish(c.r, stop, rep.stop_sequence, &c.usage, &c.out);
            if (j->req.stream) job_emit(j, c.out.buf, c.out.len);
            else job_body(j, &c.out);
            job_done(j, 200);
        }
        /* ttft: queue wait + session_run's own (render, restore, prefill, 1st token) */
        metrics_tokens(&srv->metrics, rep.prompt_tokens, rep.cached_tokens, rep.n_output, rep.prefill_ms / 1e3,
                       (rep.total_ms - rep.prefill_ms) / 1e3,
                       rep.n_output ? t_run - j->t_submit + rep.ttft_ms / 1e3 : -1);
        session_report_free(&rep);
    }
    session_bank_stats(srv);
    api_response_free(c.r);
    strbuf_free(&c.out);
}
