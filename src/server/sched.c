/*
 * sched.c — the scheduler: a bounded FIFO of jobs consumed by the one engine thread that
 * owns the model and every sequence; the job object shared with the connection threads;
 * the metrics; and the direct request path (render, tokenize, prefill, sample; no bank)
 * that serves until the bank-aware session path replaces it.
 *
 * Design note
 * -----------
 * A job is shared by two threads: the connection thread that parsed it (and later streams
 * its bytes) and the engine thread that runs it. Each holds a reference; the HTTP response
 * object holds a third while it streams. The engine side only appends bytes and signals; it
 * never waits for a reader, so a slow or dead client cannot stall other requests. A client
 * that goes away is noticed by its connection thread (socket hang-up) which sets
 * `cancelled`; the engine checks it before every token and stops there.
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
    sampler_opts_default(&j->sampling);
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
    chat_request_free(&j->chat);
    json_decref(j->body);
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
    int status = r ? api_response_fail(r, code, msg, &out) : api_error_write(j->kind, code, msg, &out);
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
        if (job_cancelled(j)) job_fail(j, NULL, API_ERR_OVERLOADED, cancelled_msg);
        else s->fn(s->srv, j);
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
    if (pthread_create(&s->thread, NULL, sched_main, s)) {
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

/* ---- metrics ----------------------------------------------------------------------- */

/* TTFT bucket bounds in seconds (Prometheus `le`); the last bucket is +Inf. */
static const double ttft_bounds[METRICS_TTFT_BUCKETS] = { 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60 };

void metrics_request(struct metrics *m, int route, int status)
{
    if (route < 0 || route >= 16) return;
    int cls = status >= 100 && status < 600 ? status / 100 : 0;
    pthread_mutex_lock(&m->mu);
    m->requests[route][cls]++;
    pthread_mutex_unlock(&m->mu);
}

void metrics_tokens(struct metrics *m, int64_t prompt, int64_t cached, int64_t generated,
                    double prefill_s, double decode_s, double ttft_s)
{
    pthread_mutex_lock(&m->mu);
    m->prompt_tokens += prompt;
    m->cached_tokens += cached;
    m->generated_tokens += generated;
    m->prefill_seconds += prefill_s;
    m->decode_seconds += decode_s;
    if (ttft_s >= 0) {
        int b = 0;
        while (b < METRICS_TTFT_BUCKETS && ttft_s > ttft_bounds[b]) b++;
        m->ttft_counts[b]++;
        m->ttft_sum += ttft_s;
        m->ttft_n++;
    }
    pthread_mutex_unlock(&m->mu);
}

void metrics_write(struct metrics *m, const char *const *route_names, int n_routes,
                   int queue_depth, struct strbuf *out)
{
    static const char *const cls_names[6] = { "other", "1xx", "2xx", "3xx", "4xx", "5xx" };
    pthread_mutex_lock(&m->mu);
    strbuf_puts(out, "# HELP headstart_requests_total HTTP requests by route and status class.\n"
                     "# TYPE headstart_requests_total counter\n");
    for (int r = 0; r < n_routes && r < 16; r++)
        for (int c = 0; c < 6; c++)
            if (m->requests[r][c])
                strbuf_printf(out, "headstart_requests_total{route=\"%s\",status=\"%s\"} %lld\n",
                              route_names[r], cls_names[c], (long long)m->requests[r][c]);
    strbuf_printf(out,
                  "# HELP headstart_queue_depth Requests waiting or running.\n"
                  "# TYPE headstart_queue_depth gauge\nheadstart_queue_depth %d\n"
                  "# HELP headstart_prompt_tokens_total Prompt tokens, cached included.\n"
                  "# TYPE headstart_prompt_tokens_total counter\nheadstart_prompt_tokens_total %lld\n"
                  "# HELP headstart_cached_tokens_total Prompt tokens restored instead of computed.\n"
                  "# TYPE headstart_cached_tokens_total counter\nheadstart_cached_tokens_total %lld\n"
                  "# HELP headstart_generated_tokens_total Generated tokens.\n"
                  "# TYPE headstart_generated_tokens_total counter\nheadstart_generated_tokens_total %lld\n"
                  "# HELP headstart_prefill_seconds_total Seconds spent in prefill.\n"
                  "# TYPE headstart_prefill_seconds_total counter\nheadstart_prefill_seconds_total %.6f\n"
                  "# HELP headstart_decode_seconds_total Seconds spent in decode.\n"
                  "# TYPE headstart_decode_seconds_total counter\nheadstart_decode_seconds_total %.6f\n"
                  "# HELP headstart_ttft_seconds Time from submit to the first generated token.\n"
                  "# TYPE headstart_ttft_seconds histogram\n",
                  queue_depth, (long long)m->prompt_tokens, (long long)m->cached_tokens,
                  (long long)m->generated_tokens, m->prefill_seconds, m->decode_seconds);
    int64_t cum = 0;
    for (int b = 0; b < METRICS_TTFT_BUCKETS; b++) {
        cum += m->ttft_counts[b];
        strbuf_printf(out, "headstart_ttft_seconds_bucket{le=\"%g\"} %lld\n", ttft_bounds[b], (long long)cum);
    }
    cum += m->ttft_counts[METRICS_TTFT_BUCKETS];
    strbuf_printf(out, "headstart_ttft_seconds_bucket{le=\"+Inf\"} %lld\nheadstart_ttft_seconds_sum %.6f\n"
                       "headstart_ttft_seconds_count %lld\n",
                  (long long)cum, m->ttft_sum, (long long)m->ttft_n);
    pthread_mutex_unlock(&m->mu);
}

/* ---- the direct request path --------------------------------------------------------- */

/* Render and tokenize a job's conversation; appends the ids. Sets *thinking when the
 * generation prompt opened <think>. */
static int job_prompt(struct server *srv, struct job *j, struct tokenizer_ids *ids, bool *thinking,
                      struct hs_err *err)
{
    if (!srv->text.tmpl)
        return hs_err_set(err, HS_ERR_UNSUPPORTED, "model '%s' has no chat template", srv->model_name);
    struct strbuf prompt;
    strbuf_init(&prompt);
    int rc = chat_template_render(srv->text.tmpl, &j->chat, &prompt, err);
    if (rc == HS_OK) {
        static const char open_think[] = "<think>\n";
        size_t k = sizeof(open_think) - 1;
        *thinking = prompt.len >= k && !memcmp(prompt.buf + prompt.len - k, open_think, k);
        rc = tokenizer_encode(srv->text.tok, prompt.buf ? prompt.buf : "", prompt.len, 0, ids, err);
    }
    strbuf_free(&prompt);
    return rc;
}

static bool is_stop(const struct model_text *t, int32_t tok)
{
    for (int i = 0; i < t->n_stop_ids; i++)
        if (t->stop_ids[i] == tok) return true;
    return false;
}

static void job_count_tokens(struct server *srv, struct job *j)
{
    struct hs_err err;
    hs_err_clear(&err);
    struct tokenizer_ids ids = { 0 };
    bool thinking;
    int rc = job_prompt(srv, j, &ids, &thinking, &err);
    if (rc != HS_OK) { job_fail(j, NULL, rc, err.msg); tokenizer_ids_free(&ids); return; }
    struct strbuf out;
    strbuf_init(&out);
    api_count_tokens_write((int64_t)ids.n, &out);
    job_body(j, &out);
    job_done(j, 200);
    strbuf_free(&out);
    tokenizer_ids_free(&ids);
}

void sched_job_direct(struct server *srv, struct job *j)
{
    if (j->type == JOB_TYPE_COUNT_TOKENS) { job_count_tokens(srv, j); return; }
    struct hs_err err;
    hs_err_clear(&err);
    struct tokenizer_ids ids = { 0 };
    bool thinking = false;
    int rc = job_prompt(srv, j, &ids, &thinking, &err);
    if (rc != HS_OK) { job_fail(j, NULL, rc, err.msg); tokenizer_ids_free(&ids); return; }
    int64_t n = (int64_t)ids.n;
    if (n == 0 || n >= srv->n_ctx) {
        char msg[256];
        snprintf(msg, sizeof(msg), "the prompt has %lld tokens; the context holds %lld (prompt and output)",
                 (long long)n, (long long)srv->n_ctx);
        job_fail(j, NULL, HS_ERR_LIMIT, msg);
        tokenizer_ids_free(&ids);
        return;
    }
    int64_t max_gen = srv->n_ctx - n;
    if (j->max_tokens > 0 && j->max_tokens < max_gen) max_gen = j->max_tokens;

    struct api_response_opts ro = {
        .kind = j->kind, .stream = j->stream, .include_usage = j->include_usage,
        .model = srv->model_name, .id = j->id, .created = j->created, .tools = j->chat.tools,
        .starts_in_reasoning = thinking,
    };
    struct api_response *r = api_response_new(&ro);
    struct api_usage usage = { .prompt_tokens = n };
    struct strbuf out, text;
    strbuf_init(&out);
    strbuf_init(&text);
    if (j->stream) {
        api_response_begin(r, &usage, &out);
        job_emit(j, out.buf, out.len);
        strbuf_reset(&out);
    }

    int64_t V = model_hparams(srv->model)->n_vocab;
    int64_t n_tok_vocab = HS_MIN(V, (int64_t)tokenizer_n_vocab(srv->text.tok));
    struct sampler *smp = sampler_new(&j->sampling, V);
    if (!smp) {
        job_fail(j, r, HS_ERR_INVALID, "invalid sampling parameters");
        api_response_free(r);
        strbuf_free(&out);
        strbuf_free(&text);
        tokenizer_ids_free(&ids);
        return;
    }
    float *logits = hs_malloc((size_t)V * sizeof(float));
    struct tokenizer_stream ts;
    tokenizer_stream_init(&ts, srv->text.tok, 0);
    seq_reset(srv->seq);
    for (int64_t i = 0; i < n; i++) sampler_accept(smp, ids.v[i]);

    double t0 = sys_time_sec();
    int64_t last = n - 1;
    rc = engine_forward(srv->engine, srv->seq, ids.v, n, NULL, 0, &last, 1, logits, &err);
    double t1 = sys_time_sec(), ttft = t1 - j->t_submit;
    enum api_stop stop = API_STOP_LENGTH;
    int64_t n_gen = 0;
    while (rc == HS_OK && n_gen < max_gen && !job_cancelled(j)) {
        /* rows past the tokenizer's vocabulary (padding) have no text: never pick them */
        for (int64_t v = n_tok_vocab; v < V; v++) logits[v] = -1e30f;
        int32_t tok = sampler_sample(smp, logits);
        if (!j->ignore_eos && is_stop(&srv->text, tok)) { stop = API_STOP_END; break; }
        n_gen++;
        sampler_accept(smp, tok);
        strbuf_reset(&text);
        rc = tokenizer_stream_push(&ts, tok, &text, &err);
        if (rc != HS_OK) break;
        if (text.len) {
            api_response_feed(r, text.buf, text.len, &out);
            if (out.len) { job_emit(j, out.buf, out.len); strbuf_reset(&out); }
        }
        if (n_gen == max_gen) break;
        int64_t row = 0;
        rc = engine_forward(srv->engine, srv->seq, &tok, 1, NULL, 0, &row, 1, logits, &err);
    }
    double t2 = sys_time_sec();
    usage.completion_tokens = n_gen;
    if (rc != HS_OK) {
        job_fail(j, r, API_ERR_INTERNAL, err.msg);
    } else if (job_cancelled(j)) {
        job_fail(j, r, API_ERR_OVERLOADED, cancelled_msg);
    } else {
        strbuf_reset(&text);
        tokenizer_stream_flush(&ts, &text);
        if (text.len) api_response_feed(r, text.buf, text.len, &out);
        if (stop == API_STOP_END && api_response_n_tool_calls(r) > 0) stop = API_STOP_TOOL_CALLS;
        api_response_finish(r, stop, NULL, &usage, &out);
        if (j->stream) job_emit(j, out.buf, out.len);
        else job_body(j, &out);
        job_done(j, 200);
    }
    metrics_tokens(&srv->metrics, n, 0, n_gen, t1 - t0, t2 - t1, ttft);
    hs_free(logits);
    sampler_free(smp);
    api_response_free(r);
    strbuf_free(&out);
    strbuf_free(&text);
    tokenizer_ids_free(&ids);
}

/* ---- the session path ------------------------------------------------------------------ */
/* session_run (session.c) does render → tokenize → bank restore → prefill → generate → bank
 * insert and hands generated text to a callback; this turns that text into the API's bytes.
 * What session_run does not offer yet, and why this is not the default path:
 *   - no cancel: a client that goes away is noticed only when its generation ends;
 *   - no context bound: the prompt length is not checked against --ctx;
 *   - no start hook: the stream's first event carries zero prompt usage, and whether the
 *     generation prompt opened <think> is found by rendering once more here. */

struct session_ctx {
    struct job *j;
    struct api_response *r;
    struct strbuf out;
};

static void session_on_text(void *ctx, const char *text, size_t len)
{
    struct session_ctx *c = ctx;
    api_response_feed(c->r, text, len, &c->out);
    if (c->j->stream && c->out.len) {
        job_emit(c->j, c->out.buf, c->out.len);
        strbuf_reset(&c->out);
    }
}

void sched_job_session(struct server *srv, struct job *j)
{
    if (j->type == JOB_TYPE_COUNT_TOKENS) { job_count_tokens(srv, j); return; }
    double t_run = sys_time_sec();
    struct hs_err err;
    hs_err_clear(&err);
    bool thinking = false;
    if (srv->text.tmpl) {
        struct strbuf prompt;
        strbuf_init(&prompt);
        if (chat_template_render(srv->text.tmpl, &j->chat, &prompt, NULL) == HS_OK) {
            static const char open_think[] = "<think>\n";
            size_t k = sizeof(open_think) - 1;
            thinking = prompt.len >= k && !memcmp(prompt.buf + prompt.len - k, open_think, k);
        }
        strbuf_free(&prompt);
    }
    struct api_response_opts ro = {
        .kind = j->kind, .stream = j->stream, .include_usage = j->include_usage,
        .model = srv->model_name, .id = j->id, .created = j->created, .tools = j->chat.tools,
        .starts_in_reasoning = thinking,
    };
    struct session_ctx c = { .j = j, .r = api_response_new(&ro) };
    strbuf_init(&c.out);
    struct session_opts so = { .max_tokens = j->max_tokens, .sampling = j->sampling };
    struct session_report rep;
    int rc = session_run(srv->engine, &srv->text, srv->bank, j->kind, j->body, &so, session_on_text, &c, &rep, &err);
    if (rc != HS_OK) {
        job_fail(j, c.r, rc, err.msg);
    } else {
        struct api_usage u = { .prompt_tokens = rep.prompt_tokens, .cached_tokens = rep.cached_tokens,
                               .completion_tokens = rep.n_output };
        enum api_stop stop = strcmp(rep.stop_reason, "stop") ? API_STOP_LENGTH : API_STOP_END;
        if (stop == API_STOP_END && api_response_n_tool_calls(c.r) > 0) stop = API_STOP_TOOL_CALLS;
        api_response_finish(c.r, stop, NULL, &u, &c.out);
        if (j->stream) job_emit(j, c.out.buf, c.out.len);
        else job_body(j, &c.out);
        job_done(j, 200);
        metrics_tokens(&srv->metrics, rep.prompt_tokens, rep.cached_tokens, rep.n_output, rep.prefill_ms / 1e3,
                       (rep.total_ms - rep.prefill_ms) / 1e3, t_run - j->t_submit + rep.ttft_ms / 1e3);
        session_report_free(&rep);
    }
    api_response_free(c.r);
    strbuf_free(&c.out);
}
