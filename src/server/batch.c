/*
 * batch.c — the server's engine thread: up to --parallel requests at once, run as the steps
 * of session.c, the engine work of all of them in one forward per step
 * (engine_forward_batch). The scheduler (sched.c) calls batch_ops.admit for each job at
 * its queue's head while there is room, and batch_ops.step while any run.
 *
 * Design note
 * -----------
 * Admission: the request's prompt step (render, tokenize, limits) and the state it may hold
 * at most (session_state_bytes: KV rows of prompt + output cap, GDN state, snapshots) against
 * --seq-ram: a request that does not fit waits at the queue's head until running ones end; one
 * that could never fit is refused (400). Then the restore step (the bank), and the response
 * opens (the start hook: prompt and cached token counts).
 *
 * A shared head is computed once: a new request whose head another running request is about
 * to compute (same head tokens, the head snapshot not yet captured) is parked before its
 * restore; once the other's head snapshot is captured, it is banked at once
 * (session_store_head) and the parked ones restore it (cached_tokens >= head). A parked
 * request whose leader ends without the snapshot restores whatever the bank has.
 *
 * A step: every generating request's previous token (each generating request gets one
 * token per step, so none starves another), then prefill chunks of the others, the least
 * left first, up to --step-tokens tokens in all (a long prompt goes in chunks, so the
 * others wait at most one chunk for their next token, and a short prompt arriving beside a
 * long one is computed first, in a step of its own: a step where some prompt ends carries no
 * chunk of a prompt that does not). One engine_forward_batch; each request takes its
 * logits row, samples, and its text goes out. Requests that ended (stop, cap, cancel, a
 * client gone, the server stopping) finish (the bank store) and leave between steps.
 *
 * Exactness: a request's logits and tokens do not depend on which others share its steps
 * (engine_forward_batch's invariant) nor on how its prompt was chunked (engine.h), and its
 * sampler is its own: alone or in a crowd, the same answer.
 *
 * Invariants:
 *   1. Engine thread only: the sessions, the engine, the bank.
 *   2. The reserved bytes of the running requests never exceed --seq-ram (admission waits).
 *   3. Every admitted job ends exactly once (end_run: job_done, its reference released).
 *   4. At most step_tokens tokens per forward (the engine's n_batch is step_tokens).
 */
#include "server/server_int.h"

#include "sys/sys.h"

#include <string.h>

/* ---- one request's response: the hooks of session_run, now called by the step loop ----- */

struct session_ctx {
    struct server *srv;
    struct job *j;
    struct api_response *r;       /* made by the start hook; NULL before */
    struct api_usage usage;
    struct strbuf out;
    double t_emit;                /* sys_time_sec() of the last bytes sent to a stream */
};

/* Stream out what the response appended (a no-op for a whole body). */
static void ctx_flush(struct session_ctx *c)
{
    if (c->j->req.stream && c->out.len) {
        job_emit(c->j, c->out.buf, c->out.len);
        c->t_emit = sys_time_sec();
    }
    if (c->j->req.stream) strbuf_reset(&c->out);
}

/* The response opens with the prompt and cached token counts and whether the generation
 * prompt opened <think>. */
static void ctx_start(struct session_ctx *c, const struct session_start *st)
{
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
    if (!job_cancelled(j)) ctx_flush(c);
}

/* A keep-alive once keepalive_s passed without bytes, for a started stream that is quiet: its
 * prompt is being computed, or it waits for a step, or its tokens have no text yet (held back
 * for a stop string or a tool call, or tokens whose text is empty). Without it the stream
 * looks dead: libmicrohttpd closes a connection with nothing moving for --idle-timeout, and
 * a client may give up sooner. */
static void ctx_keepalive(struct session_ctx *c)
{
    if (c->j->req.stream && c->r && sys_time_sec() - c->t_emit >= c->srv->opts.keepalive_s) {
        api_response_keepalive(c->r, &c->out);
        ctx_flush(c);
    }
}

static void ctx_text(struct session_ctx *c, const char *text, size_t len)
{
    if (len) api_response_feed(c->r, text, len, &c->out);
    ctx_flush(c);
}

/* ---- the running requests -------------------------------------------------------------- */

struct run {
    struct job *j;
    struct session *s;
    struct session_ctx c;
    double t_session;             /* when its session began (ttft counts the queue before it) */
    uint64_t reserved;            /* bytes of --seq-ram held */
    struct run *leader;           /* parked: the request computing this one's head */
    bool started;                 /* restored, the response open */
    bool generating;              /* the prompt is in: a token per step */
};

struct batch {
    struct server *srv;
    struct run **runs;            /* admission order */
    int n_runs;
    struct session *next;         /* the queue head's prompt step, kept while it waits */
    struct job *next_job;         /* ... its job, and the job's id: a job cancelled while it
                                     waited is freed, and another may reuse its address */
    char next_id[API_ID_MAX];
    uint64_t budget, reserved;    /* --seq-ram and what the running requests hold */
    int64_t step_tokens;
    struct engine_item *items;    /* [parallel] */
    struct run **item_run;        /* [parallel] */
    float *logits;                /* [parallel, n_vocab]: the step's rows */
    int64_t V;
    struct strbuf piece;
};

/* --seq-ram accounting, published for /metrics. */
static void reserve(struct batch *b, int64_t delta)
{
    b->reserved = (uint64_t)((int64_t)b->reserved + delta);
    pthread_mutex_lock(&b->srv->metrics.mu);
    b->srv->metrics.seq_bytes = b->reserved;
    pthread_mutex_unlock(&b->srv->metrics.mu);
}

/* The output cap: the request's own, at most --max-tokens-default, which also applies when
 * the request sets none (cline, Continue); 0 there: up to the context. */
static int64_t max_tokens_for(struct server *srv, struct job *j)
{
    int64_t cap = srv->opts.max_tokens_default, want = j->req.max_tokens;
    if (cap > 0 && (want <= 0 || want > cap)) {
        j->capped = true;
        return cap;
    }
    return want > 0 ? want : srv->n_ctx;
}

/* Bank numbers for /metrics, read on the engine thread (the bank's one owner). */
static void bank_stats_publish(struct server *srv)
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

/* The request is over (invariant 3): the bank store, the response's end or error, the job's
 * numbers for the request log, metrics; then it leaves the running set. rc/err: an engine
 * error that ended it. */
static void end_run(struct batch *b, int i, int rc, struct hs_err *err)
{
    struct run *r = b->runs[i];
    struct server *srv = b->srv;
    struct job *j = r->j;
    struct session_ctx *c = &r->c;
    if (rc == HS_OK) rc = session_finish(r->s, err);
    if (rc != HS_OK) {
        /* an error once the response exists is the engine's (500); before, the request's */
        job_fail(j, c->r, c->r ? API_ERR_INTERNAL : rc, err->msg);
        watch_report(srv, NULL);
    } else {
        struct session_report rep;
        session_take_report(r->s, &rep);
        watch_report(srv, &rep);
        /* for the request log, before job_done lets the connection thread read them */
        pthread_mutex_lock(&j->mu);
        j->ran = true;
        j->n_prompt = rep.prompt_tokens;
        j->n_cached = rep.cached_tokens;
        j->n_generated = rep.n_output;
        j->cache_source = rep.cache_source;
        j->stop_reason = rep.stop_reason;
        j->ttft_ms = rep.n_output ? (r->t_session - j->t_submit) * 1e3 + rep.ttft_ms : -1;
        memcpy(j->first_logits, rep.first_logits_sha256, sizeof j->first_logits);
        pthread_mutex_unlock(&j->mu);
        if (rep.stop_reason == SESSION_STOP_CANCELLED || !c->r) {
            metrics_cancel(&srv->metrics, &rep);
            job_fail(j, c->r, API_ERR_OVERLOADED, job_cancelled_msg);
        } else {
            c->usage.completion_tokens = rep.n_output;
            static const enum api_stop api_stops[SESSION_STOP_COUNT] = {
                [SESSION_STOP_LENGTH] = API_STOP_LENGTH, [SESSION_STOP_END] = API_STOP_END,
                [SESSION_STOP_SEQUENCE] = API_STOP_STOP_SEQUENCE,
            };
            enum api_stop stop = api_stops[rep.stop_reason];
            if (stop == API_STOP_END && api_response_n_tool_calls(c->r) > 0) stop = API_STOP_TOOL_CALLS;
            api_response_finish(c->r, stop, rep.stop_sequence, &c->usage, &c->out);
            if (j->req.stream) job_emit(j, c->out.buf, c->out.len);
            else job_body(j, &c->out);
            job_done(j, 200);
        }
        /* ttft: queue wait + the request's own (render, restore, prefill, 1st token) */
        metrics_tokens(&srv->metrics, rep.prompt_tokens, rep.cached_tokens, rep.n_output, rep.prefill_ms / 1e3,
                       (rep.total_ms - rep.prefill_ms) / 1e3,
                       rep.n_output ? r->t_session - j->t_submit + rep.ttft_ms / 1e3 : -1);
        session_report_free(&rep);
    }
    bank_stats_publish(srv);
    /* requests parked behind this one restore whatever the bank has now */
    for (int k = 0; k < b->n_runs; k++)
        if (b->runs[k]->leader == r) b->runs[k]->leader = NULL;
    api_response_free(c->r);
    strbuf_free(&c->out);
    session_free(r->s);
    reserve(b, -(int64_t)r->reserved);
    job_release(j);
    hs_free(r);
    memmove(b->runs + i, b->runs + i + 1, (size_t)(b->n_runs - i - 1) * sizeof(*b->runs));
    b->n_runs--;
}

/* The restore step and the response's start; false when it failed (the run ended). */
static bool run_start(struct batch *b, int i)
{
    struct run *r = b->runs[i];
    struct hs_err err;
    hs_err_clear(&err);
    int rc = session_restore(r->s, &err);
    if (rc != HS_OK) {
        end_run(b, i, rc, &err);
        return false;
    }
    ctx_start(&r->c, session_start_info(r->s));
    r->started = true;
    return true;
}

/* A running request computing the same head that has not captured it yet, or NULL. */
static struct run *head_leader(struct batch *b, struct session *s)
{
    int64_t head;
    if (!b->srv->bank || !session_head_pending(s, &head) || head <= 0) return NULL;
    const int32_t *ids = session_prompt_ids(s);
    for (int k = 0; k < b->n_runs; k++) {
        struct run *o = b->runs[k];
        int64_t oh;
        if (o->leader || !o->started || !session_head_pending(o->s, &oh) || oh != head) continue;
        if (session_prefill_pos(o->s) >= head) continue;
        if (!memcmp(session_prompt_ids(o->s), ids, (size_t)head * sizeof(int32_t))) return o;
    }
    return NULL;
}

static enum sched_admit batch_admit(void *ctx, struct job *j, int running)
{
    struct batch *b = ctx;
    struct server *srv = b->srv;
    watch_poll(srv); /* an identity hashed in the background opens the disk tier */
    struct hs_err err;
    hs_err_clear(&err);
    struct session *s = NULL;
    if (b->next && (b->next_job != j || strcmp(b->next_id, j->id))) { /* its job left the queue */
        session_free(b->next);
        b->next = NULL;
    }
    if (b->next) { /* waited at the head: its prompt step is done */
        s = b->next;
        b->next = NULL;
    } else {
        struct session_opts so = {
            .max_tokens = max_tokens_for(srv, j),
            .disk = srv->disk,
            .remote = srv->remote,
            .n_ctx = srv->n_ctx,
            .ignore_eos = j->req.ignore_eos,
        };
        session_sampling_opts(&j->req.sampling, j->seed, &so.sampling);
        int rc = session_new(srv->engine, &srv->text, srv->bank, &j->req, &so, &s, &err);
        if (rc != HS_OK) {
            job_fail(j, NULL, rc, err.msg);
            return SCHED_ADMIT_DONE;
        }
    }
    uint64_t need = session_state_bytes(s);
    if (need > b->budget) {
        char msg[HS_ERR_MSG_MAX];
        snprintf(msg, sizeof msg,
                 "the request needs %.1f MiB of sequence state (prompt %lld tokens + output cap %lld); the server's "
                 "--seq-ram is %.1f MiB: lower max_tokens or shorten the prompt",
                 (double)need / (1 << 20), (long long)session_prompt_tokens(s), (long long)session_output_cap(s),
                 (double)b->budget / (1 << 20));
        session_free(s);
        job_fail(j, NULL, HS_ERR_INVALID, msg);
        return SCHED_ADMIT_DONE;
    }
    if (running > 0 && b->reserved + need > b->budget) {
        b->next = s;
        b->next_job = j;
        snprintf(b->next_id, sizeof b->next_id, "%s", j->id);
        return SCHED_ADMIT_WAIT;
    }
    struct run *r = hs_calloc(1, sizeof(*r));
    r->j = j;
    r->s = s;
    r->c.srv = srv;
    r->c.j = j;
    strbuf_init(&r->c.out);
    r->t_session = session_started(s); /* a session that waited at the head began before now */
    r->reserved = need;
    reserve(b, (int64_t)need);
    r->leader = head_leader(b, s);
    b->runs[b->n_runs++] = r;
    if (r->leader) {
        pthread_mutex_lock(&srv->metrics.mu);
        srv->metrics.head_parked++;
        pthread_mutex_unlock(&srv->metrics.mu);
    } else {
        run_start(b, b->n_runs - 1);
    }
    return SCHED_ADMIT_RUNNING;
}

/* ---- the step ---------------------------------------------------------------------------- */

/* Cancelled, stopping, or parked ones whose head is ready: between steps. */
static void step_prepare(struct batch *b, bool stopping)
{
    for (int i = 0; i < b->n_runs;) {
        struct run *r = b->runs[i];
        if (stopping || job_cancelled(r->j)) {
            session_cancel(r->s);
            struct hs_err err;
            hs_err_clear(&err);
            end_run(b, i, HS_OK, &err);
            continue;
        }
        i++;
    }
    for (int i = 0; i < b->n_runs;) {
        struct run *r = b->runs[i];
        int64_t head;
        if (r->started || (r->leader && session_head_pending(r->leader->s, &head))) {
            i++;
            continue;
        }
        r->leader = NULL;
        if (run_start(b, i)) {
            int64_t cached = session_start_info(r->s)->cached_tokens;
            (void)session_head_pending(r->s, &head);
            pthread_mutex_lock(&b->srv->metrics.mu);
            if (cached >= head && head > 0) {
                b->srv->metrics.head_shared++;
                b->srv->metrics.head_shared_tokens += head;
            }
            pthread_mutex_unlock(&b->srv->metrics.mu);
            i++;
        }
    }
}

/* After the forward: heads captured for parked requests go to the bank, logits rows are
 * taken, one token sampled for each generating request, finished ones end. */
static void step_finish(struct batch *b, int n_items)
{
    for (int k = 0, row = 0; k < n_items; k++) {
        struct run *r = b->item_run[k];
        session_work_done(r->s, b->items[k].n_rows ? b->logits + (int64_t)row * b->V : NULL);
        row += b->items[k].n_rows;
    }
    for (int i = 0; i < b->n_runs; i++) {
        struct run *r = b->runs[i];
        bool waited_on = false;
        for (int k = 0; k < b->n_runs; k++) waited_on |= b->runs[k]->leader == r;
        if (waited_on) {
            struct hs_err err;
            hs_err_clear(&err);
            if (session_store_head(r->s, &err) != HS_OK) hs_log_write(HS_LOG_WARN, "head not banked: %s", err.msg);
        }
    }
    for (int i = 0; i < b->n_runs;) {
        struct run *r = b->runs[i];
        if (!r->started || !session_ready_to_sample(r->s)) {
            if (r->started) ctx_keepalive(&r->c);
            i++;
            continue;
        }
        struct hs_err err;
        hs_err_clear(&err);
        bool emit, done;
        strbuf_reset(&b->piece);
        int rc = session_generate(r->s, &b->piece, &emit, &done, &err);
        if (rc == HS_OK && emit) ctx_text(&r->c, b->piece.len ? b->piece.buf : "", b->piece.len);
        if (rc == HS_OK && !done) ctx_keepalive(&r->c); /* a token with no bytes out yet */
        if (rc == HS_OK && done) {
            strbuf_reset(&b->piece);
            session_generate_end(r->s, &b->piece);
            if (b->piece.len) ctx_text(&r->c, b->piece.buf, b->piece.len);
        }
        if (rc != HS_OK) {
            end_run(b, i, rc, &err);
            continue;
        }
        i++;
    }
    /* ended ones finish once nothing is left to feed (the bank's last token rides in the
     * next step with the others' work) */
    for (int i = 0; i < b->n_runs;) {
        struct run *r = b->runs[i];
        struct engine_item it;
        if (r->started && session_generation_over(r->s) && session_work(r->s, 1, &it) == 0) {
            struct hs_err err;
            hs_err_clear(&err);
            end_run(b, i, HS_OK, &err);
            continue;
        }
        i++;
    }
}

static int batch_step(void *ctx, bool stopping)
{
    struct batch *b = ctx;
    struct server *srv = b->srv;
    step_prepare(b, stopping);
    if (!b->n_runs) return 0;
    /* decode tokens first (one each), then prefill chunks from the round-robin start */
    int n = 0;
    int64_t left = b->step_tokens;
    struct engine_item it;
    for (int i = 0; i < b->n_runs && left > 0; i++) {
        struct run *r = b->runs[i];
        if (!r->started || !session_prefill_done(r->s)) continue; /* decode, or the last token's feed */
        int64_t k = session_work(r->s, left, &it);
        if (!k) continue;
        b->items[n] = it;
        b->item_run[n++] = r;
        left -= k;
    }
    /* prefills, the least left first (a short request's first token does not wait for a
     * long prompt; the long one takes what the short ones leave), admission order on ties */
    int order[SERVER_MAX_PARALLEL], n_pre = 0;
    for (int i = 0; i < b->n_runs; i++) {
        struct run *r = b->runs[i];
        if (!r->started || session_prefill_done(r->s)) continue;
        int64_t rest = session_prompt_tokens(r->s) - session_prefill_pos(r->s);
        int at = n_pre++;
        while (at > 0) {
            const struct session *o = b->runs[order[at - 1]]->s;
            if (session_prompt_tokens(o) - session_prefill_pos(o) <= rest) break;
            order[at] = order[at - 1];
            at--;
        }
        order[at] = i;
    }
    int64_t prefill = 0;
    bool completes = false; /* a prompt ends in this step: its first token is due */
    for (int q = 0; q < n_pre && left > 0; q++) {
        struct run *r = b->runs[order[q]];
        int64_t rest = session_prompt_tokens(r->s) - session_prefill_pos(r->s);
        /* a chunk that will not end its prompt would only make that first token wait for
         * more work in the same step: it waits for the next step instead */
        if (completes && rest > left) break;
        int64_t k = session_work(r->s, left, &it);
        if (!k) continue;
        completes |= k == rest;
        b->items[n] = it;
        b->item_run[n++] = r;
        left -= k;
        prefill += k;
    }
    if (n > 0) {
        struct hs_err err;
        hs_err_clear(&err);
        double t = sys_time_sec();
        int rc = engine_forward_batch(srv->engine, b->items, n, b->logits, &err);
        double dt = sys_time_sec() - t;
        if (rc != HS_OK) {
            /* the model's mapping failed (its file was truncated): every request in the
             * step has undefined state; each ends with the error */
            for (int k = 0; k < n; k++)
                for (int i = 0; i < b->n_runs; i++)
                    if (b->runs[i] == b->item_run[k]) {
                        end_run(b, i, rc, &err);
                        break;
                    }
            return b->n_runs;
        }
        pthread_mutex_lock(&srv->metrics.mu);
        srv->metrics.steps++;
        srv->metrics.step_tokens += b->step_tokens - left;
        srv->metrics.step_seconds += dt;
        srv->metrics.prefill_tokens += prefill;
        srv->metrics.decode_tokens += b->step_tokens - left - prefill;
        pthread_mutex_unlock(&srv->metrics.mu);
    }
    step_finish(b, n);
    return b->n_runs;
}

const struct sched_ops batch_ops = { .admit = batch_admit, .step = batch_step };

int batch_new(struct server *srv, struct batch **out, struct hs_err *err)
{
    struct batch *b = hs_calloc(1, sizeof(*b));
    int p = srv->opts.parallel > 0 ? srv->opts.parallel : SERVER_DEFAULT_PARALLEL;
    b->srv = srv;
    b->runs = hs_calloc((size_t)p, sizeof(*b->runs));
    b->items = hs_calloc((size_t)p, sizeof(*b->items));
    b->item_run = hs_calloc((size_t)p, sizeof(*b->item_run));
    b->V = model_hparams(srv->model)->n_vocab;
    b->logits = hs_malloc((size_t)p * (size_t)b->V * sizeof(float));
    b->step_tokens = engine_n_batch(srv->engine);
    b->budget = srv->opts.seq_ram > 0 ? (uint64_t)srv->opts.seq_ram : sys_mem_total_bytes() / 4;
    strbuf_init(&b->piece);
    pthread_mutex_lock(&srv->metrics.mu);
    srv->metrics.seq_budget = b->budget;
    pthread_mutex_unlock(&srv->metrics.mu);
    (void)err;
    *out = b;
    return HS_OK;
}

uint64_t batch_budget(const struct batch *b) { return b->budget; }

void batch_free(struct batch *b)
{
    if (!b) return;
    session_free(b->next);
    hs_free(b->runs);
    hs_free(b->items);
    hs_free(b->item_run);
    hs_free(b->logits);
    strbuf_free(&b->piece);
    hs_free(b);
}
