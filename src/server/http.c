/*
 * http.c — `headstart serve`'s HTTP side: libmicrohttpd (the only file that includes it),
 * the route table, authentication, limits, request fields into a job, and moving a job's
 * bytes to the client (a whole body, or an SSE stream). server_run lives here too: load,
 * start the engine thread and the daemon, print the start line, wait for a signal, stop.
 *
 * Design note
 * -----------
 * libmicrohttpd runs one thread per connection (MHD_USE_THREAD_PER_CONNECTION) rather than
 * suspend/resume: a connection thread parses and checks its request, submits a job to the
 * scheduler and then waits on that job only — never on the engine or another request —
 * polling its own socket for a hang-up every 50 ms, which cancels the job. The one engine
 * thread (sched.c) appends the response bytes and never waits for a reader. A stream's
 * status line goes out with its first bytes, so an error found before generation (a bad
 * template render, a prompt over the context) is still a plain error response.
 *
 *   request ─ headers: route? method? API key? Content-Length > max-body? (413 at once)
 *           ─ body: accumulated up to --max-body, the rest discarded (413 at the end)
 *           ─ JSON parse (400 with line, column, byte) ─ conversation + fields (400)
 *           ─ submit (429 + Retry-After when full; 503 while stopping)
 *           ─ wait: stream → first bytes → 200 text/event-stream fed from the job's queue
 *                   body   → done → the job's status and JSON body
 *
 * Routes (a table, `routes`): GET|HEAD /, GET|HEAD /health, GET /metrics, GET /v1/models
 * (Anthropic's shape when the request carries anthropic-version), POST
 * /v1/chat/completions, POST /v1/messages (query ignored: ?beta=true), POST
 * /v1/messages/count_tokens, POST /v1/responses (OpenAI Responses: Codex). Errors take the
 * Anthropic shape under /v1/messages, the OpenAI shape elsewhere.
 *
 * The session bank (RAM, and its disk tier unless --no-bank-disk) is made here before the
 * engine thread starts and is touched only by that thread afterwards (session_run); its
 * numbers reach /metrics as copies the engine thread takes after each job. Stop flushes the
 * disk tier's queue before exit.
 *
 * Stop (SIGINT/SIGTERM): stop accepting connections; the scheduler refuses new jobs (503)
 * and cancels queued and running ones, each of which still answers (503, or an in-stream
 * error then the stream's end); up to 3 s for those answers to leave; stop the daemon.
 *
 * Extension fields: `ignore_eos` (as llama.cpp's) generates to max_tokens through stop ids.
 * `stop` / `stop_sequences` and `tool_choice` are checked by the api codecs
 * (chat_from_openai / chat_from_anthropic, a 400 before queueing) and applied by
 * session_run. Ignored fields: `model` (one model is served), `metadata`, and whatever else
 * a client sends that is not listed in job_fields or the codecs.
 *
 * Invariants:
 *   1. No request input can crash the server: every field is type-checked before use and
 *      a bad one is a 400 naming it.
 *   2. A connection thread holds its own reference to its job; the streaming response
 *      holds another; the engine a third. Whoever releases last frees it.
 *   3. The API key is compared in constant time; /, /health and /metrics need none.
 */
#include "server/server_int.h"

#include "model/model.h"
#include "sys/sys.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define STREAM_BLOCK 16384

enum route_id {
    ROUTE_ROOT = 0, ROUTE_HEALTH, ROUTE_METRICS, ROUTE_MODELS, ROUTE_CHAT, ROUTE_MESSAGES,
    ROUTE_COUNT_TOKENS, ROUTE_RESPONSES, ROUTE_OTHER, ROUTE_N
};

struct conn_req;
typedef enum MHD_Result (*route_fn)(struct server *srv, struct MHD_Connection *c, struct conn_req *rq);

struct route {
    const char *path;
    const char *methods;       /* comma separated, for Allow */
    enum api_kind kind;        /* the error shape */
    bool auth;
    route_fn fn;
};

struct conn_req {
    enum route_id route;
    enum api_kind kind;
    int err_code;              /* decided before the body ended; 0: none */
    struct strbuf body;
    struct job *job;           /* this connection's reference */
};

struct stream_ctx {
    struct job *job;           /* the response's reference */
    int fd;
};

static enum MHD_Result route_root(struct server *srv, struct MHD_Connection *c, struct conn_req *rq);
static enum MHD_Result route_health(struct server *srv, struct MHD_Connection *c, struct conn_req *rq);
static enum MHD_Result route_metrics(struct server *srv, struct MHD_Connection *c, struct conn_req *rq);
static enum MHD_Result route_models(struct server *srv, struct MHD_Connection *c, struct conn_req *rq);
static enum MHD_Result route_chat(struct server *srv, struct MHD_Connection *c, struct conn_req *rq);
static enum MHD_Result route_messages(struct server *srv, struct MHD_Connection *c, struct conn_req *rq);
static enum MHD_Result route_count(struct server *srv, struct MHD_Connection *c, struct conn_req *rq);
static enum MHD_Result route_responses(struct server *srv, struct MHD_Connection *c, struct conn_req *rq);

static const struct route routes[ROUTE_N] = {
    [ROUTE_ROOT] = { "/", "GET, HEAD", API_KIND_OPENAI_CHAT, false, route_root },
    [ROUTE_HEALTH] = { "/health", "GET, HEAD", API_KIND_OPENAI_CHAT, false, route_health },
    [ROUTE_METRICS] = { "/metrics", "GET", API_KIND_OPENAI_CHAT, false, route_metrics },
    [ROUTE_MODELS] = { "/v1/models", "GET", API_KIND_OPENAI_CHAT, true, route_models },
    [ROUTE_CHAT] = { "/v1/chat/completions", "POST", API_KIND_OPENAI_CHAT, true, route_chat },
    [ROUTE_MESSAGES] = { "/v1/messages", "POST", API_KIND_ANTHROPIC_MESSAGES, true, route_messages },
    [ROUTE_COUNT_TOKENS] = { "/v1/messages/count_tokens", "POST", API_KIND_ANTHROPIC_MESSAGES, true, route_count },
    [ROUTE_RESPONSES] = { "/v1/responses", "POST", API_KIND_OPENAI_RESPONSES, true, route_responses },
    [ROUTE_OTHER] = { NULL, NULL, API_KIND_OPENAI_CHAT, false, NULL },
};

static const char *const route_names[ROUTE_N] = {
    "/", "/health", "/metrics", "/v1/models", "/v1/chat/completions", "/v1/messages",
    "/v1/messages/count_tokens", "/v1/responses", "other",
};

static enum route_id route_find(const char *url)
{
    for (int i = 0; i < ROUTE_OTHER; i++)
        if (!strcmp(url, routes[i].path)) return (enum route_id)i;
    return ROUTE_OTHER;
}

static bool method_allowed(const struct route *r, const char *method)
{
    size_t n = strlen(method);
    for (const char *p = r->methods; (p = strstr(p, method)); p += n)
        if ((p == r->methods || p[-1] == ' ') && (p[n] == ',' || p[n] == 0)) return true;
    return false;
}

/* ---- replies ----------------------------------------------------------------------- */

static enum MHD_Result reply(struct server *srv, struct MHD_Connection *c, struct conn_req *rq,
                             int status, const char *ctype, const char *body, size_t len,
                             const char *hname, const char *hvalue)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)(body ? body : ""),
                                                             MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (hname) MHD_add_response_header(r, hname, hvalue);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    metrics_request(&srv->metrics, rq ? (int)rq->route : ROUTE_OTHER, status);
    return ret;
}

static enum MHD_Result reply_error(struct server *srv, struct MHD_Connection *c, struct conn_req *rq,
                                   int code, const char *msg)
{
    struct strbuf b;
    strbuf_init(&b);
    int status = api_error_write(rq->kind, code, msg, &b);
    const char *hn = NULL, *hv = NULL;
    if (code == API_ERR_QUEUE_FULL || code == API_ERR_OVERLOADED) { hn = "Retry-After"; hv = "1"; }
    else if (code == API_ERR_METHOD) { hn = "Allow"; hv = routes[rq->route].methods; }
    enum MHD_Result ret = reply(srv, c, rq, status, "application/json", b.buf, b.len, hn, hv);
    strbuf_free(&b);
    return ret;
}

/* ---- simple routes ----------------------------------------------------------------- */

static enum MHD_Result route_root(struct server *srv, struct MHD_Connection *c, struct conn_req *rq)
{
    static const char body[] = "headstart\n";
    return reply(srv, c, rq, 200, "text/plain; charset=utf-8", body, sizeof(body) - 1, NULL, NULL);
}

static enum MHD_Result route_health(struct server *srv, struct MHD_Connection *c, struct conn_req *rq)
{
    struct strbuf b;
    strbuf_init(&b);
    struct jsonw w;
    jsonw_init(&w, &b, 0);
    bool ready = atomic_load(&srv->ready);
    jsonw_obj_begin(&w);
    jsonw_key(&w, "status"); jsonw_str(&w, ready ? "ok" : "loading");
    jsonw_key(&w, "model"); jsonw_str(&w, srv->model_name);
    jsonw_key(&w, "queue_depth"); jsonw_int(&w, sched_depth(&srv->sched));
    jsonw_obj_end(&w);
    enum MHD_Result ret = reply(srv, c, rq, ready ? 200 : 503, "application/json", b.buf, b.len, NULL, NULL);
    strbuf_free(&b);
    return ret;
}

static enum MHD_Result route_metrics(struct server *srv, struct MHD_Connection *c, struct conn_req *rq)
{
    struct strbuf b;
    strbuf_init(&b);
    metrics_write(&srv->metrics, route_names, ROUTE_N, sched_depth(&srv->sched), &b);
    enum MHD_Result ret = reply(srv, c, rq, 200, "text/plain; version=0.0.4; charset=utf-8", b.buf, b.len, NULL, NULL);
    strbuf_free(&b);
    return ret;
}

static enum MHD_Result route_models(struct server *srv, struct MHD_Connection *c, struct conn_req *rq)
{
    bool anthropic = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "anthropic-version") != NULL;
    struct strbuf b;
    strbuf_init(&b);
    const char *names[1] = { srv->model_name };
    api_models_write(anthropic ? API_KIND_ANTHROPIC_MESSAGES : API_KIND_OPENAI_CHAT, names, 1,
                     srv->t_start, &b);
    enum MHD_Result ret = reply(srv, c, rq, 200, "application/json", b.buf, b.len, NULL, NULL);
    strbuf_free(&b);
    return ret;
}

/* ---- request fields ---------------------------------------------------------------- */

/* A number field: absent or null leaves *out; otherwise it must lie in [lo, hi]. */
static int field_num(const json_t *body, const char *key, double lo, double hi, double *out, struct hs_err *err)
{
    const json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v)) return HS_OK;
    if (!json_is_number(v)) return hs_err_set(err, HS_ERR_INVALID, "'%s' must be a number", key);
    double d = json_number_value(v);
    if (!(d >= lo && d <= hi)) return hs_err_set(err, HS_ERR_INVALID, "'%s' must be between %g and %g, got %g", key, lo, hi, d);
    *out = d;
    return HS_OK;
}

static int field_int(const json_t *body, const char *key, int64_t lo, int64_t hi, int64_t *out, struct hs_err *err)
{
    const json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v)) return HS_OK;
    if (!json_is_integer(v)) return hs_err_set(err, HS_ERR_INVALID, "'%s' must be an integer", key);
    json_int_t i = json_integer_value(v);
    if (i < lo || i > hi)
        return hs_err_set(err, HS_ERR_INVALID, "'%s' must be between %lld and %lld, got %lld", key,
                          (long long)lo, (long long)hi, (long long)i);
    *out = i;
    return HS_OK;
}

static int field_bool(const json_t *body, const char *key, bool *out, struct hs_err *err)
{
    const json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v)) return HS_OK;
    if (!json_is_boolean(v)) return hs_err_set(err, HS_ERR_INVALID, "'%s' must be true or false", key);
    *out = json_is_true(v);
    return HS_OK;
}

/* stream, max tokens, sampling and the extensions of one generate request. */
static int job_fields(const json_t *body, struct job *j, struct hs_err *err)
{
    const int64_t big = INT64_C(1) << 40;
    struct sampler_opts *so = &j->sampling;
    double temp = so->temperature, top_p = so->top_p, min_p = so->min_p;
    double pres = so->presence_penalty, freq = so->frequency_penalty;
    int64_t top_k = so->top_k, seed = -1, max_tokens = 0;
    int rc = HS_OK;
    if (!rc) rc = field_bool(body, "stream", &j->stream, err);
    if (!rc) rc = field_bool(body, "ignore_eos", &j->ignore_eos, err);
    if (!rc) rc = field_int(body, "max_tokens", 1, big, &max_tokens, err);
    if (!rc && j->kind == API_KIND_OPENAI_CHAT) rc = field_int(body, "max_completion_tokens", 1, big, &max_tokens, err);
    if (!rc && j->kind == API_KIND_OPENAI_RESPONSES) rc = field_int(body, "max_output_tokens", 1, big, &max_tokens, err);
    if (!rc) rc = field_num(body, "temperature", 0, 100, &temp, err);
    if (!rc) rc = field_num(body, "top_p", 0, 1, &top_p, err);
    if (!rc) rc = field_int(body, "top_k", 0, INT32_MAX, &top_k, err);
    if (!rc) rc = field_num(body, "min_p", 0, 1, &min_p, err);
    if (!rc) rc = field_num(body, "presence_penalty", -2, 2, &pres, err);
    if (!rc) rc = field_num(body, "frequency_penalty", -2, 2, &freq, err);
    if (!rc) rc = field_int(body, "seed", INT64_MIN, INT64_MAX, &seed, err);
    if (!rc && j->kind == API_KIND_OPENAI_CHAT) {
        const json_t *so_obj = json_object_get(body, "stream_options");
        if (so_obj && !json_is_null(so_obj)) {
            if (!json_is_object(so_obj)) rc = hs_err_set(err, HS_ERR_INVALID, "'stream_options' must be an object");
            else rc = field_bool(so_obj, "include_usage", &j->include_usage, err);
        }
    }
    if (rc) return rc;
    if (top_p <= 0) return hs_err_set(err, HS_ERR_INVALID, "'top_p' must be above 0");
    so->temperature = (float)temp;
    so->top_p = (float)top_p;
    so->top_k = (int)top_k;
    so->min_p = (float)min_p;
    so->presence_penalty = (float)pres;
    so->frequency_penalty = (float)freq;
    if (seed != -1) so->seed = (uint64_t)seed;
    j->max_tokens = max_tokens;
    return HS_OK;
}

/* ---- the generate routes ------------------------------------------------------------- */

static int conn_fd(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct stream_ctx *sc = cls;
    for (;;) {
        bool eof;
        size_t n = job_take(sc->job, buf, max, &eof);
        if (n) return (ssize_t)n;
        if (eof) return MHD_CONTENT_READER_END_OF_STREAM;
        if (job_wait(sc->job, true, sc->fd) == JOB_WAIT_GONE) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
}

static void stream_free(void *cls)
{
    struct stream_ctx *sc = cls;
    job_cancel(sc->job); /* no-op when done; stops the engine when the client went away */
    job_release(sc->job);
    hs_free(sc);
}

static enum MHD_Result run_job(struct server *srv, struct MHD_Connection *c, struct conn_req *rq,
                               enum job_type type)
{
    json_error_t je;
    json_t *body = json_loadb(rq->body.buf ? rq->body.buf : "", rq->body.len, JSON_REJECT_DUPLICATES, &je);
    char msg[HS_ERR_MSG_MAX];
    if (!body) {
        snprintf(msg, sizeof(msg), "invalid JSON in the request body at line %d, column %d (byte %d): %s",
                 je.line, je.column, je.position, je.text);
        return reply_error(srv, c, rq, HS_ERR_FORMAT, msg);
    }
    if (!json_is_object(body)) {
        json_decref(body);
        return reply_error(srv, c, rq, HS_ERR_FORMAT, "the request body must be a JSON object");
    }
    struct hs_err err;
    hs_err_clear(&err);
    struct job *j = job_new();
    rq->job = j;
    j->type = type;
    j->kind = rq->kind;
    int rc = rq->kind == API_KIND_OPENAI_CHAT        ? chat_from_openai(body, &j->chat, &err)
             : rq->kind == API_KIND_OPENAI_RESPONSES ? chat_from_responses(body, &j->chat, &err)
                                                     : chat_from_anthropic(body, &j->chat, &err);
    if (rc == HS_OK && type == JOB_TYPE_GENERATE) rc = job_fields(body, j, &err);
    j->body = body; /* the job owns it now */
    if (rc != HS_OK) return reply_error(srv, c, rq, rc, err.msg);
    pthread_mutex_lock(&srv->ids_mu);
    api_ids_next(&srv->ids, j->kind, j->id);
    if (j->sampling.seed == 0) j->sampling.seed = srv->ids.counter;
    pthread_mutex_unlock(&srv->ids_mu);
    j->created = (int64_t)time(NULL);

    rc = sched_submit(&srv->sched, j);
    if (rc == API_ERR_QUEUE_FULL) return reply_error(srv, c, rq, rc, "the request queue is full; retry later");
    if (rc != HS_OK) return reply_error(srv, c, rq, rc, "the server is shutting down");

    int fd = conn_fd(c);
    if (job_wait(j, j->stream, fd) == JOB_WAIT_GONE) {
        metrics_request(&srv->metrics, (int)rq->route, 499);
        return MHD_NO; /* the client is gone: close without a response */
    }
    pthread_mutex_lock(&j->mu);
    bool started = j->started;
    pthread_mutex_unlock(&j->mu);
    if (j->stream && started) {
        struct stream_ctx *sc = hs_calloc(1, sizeof(*sc));
        job_retain(j);
        sc->job = j;
        sc->fd = fd;
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK,
                                                                   stream_read, sc, stream_free);
        if (!r) { stream_free(sc); return MHD_NO; }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        MHD_add_response_header(r, "X-Accel-Buffering", "no");
        enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        metrics_request(&srv->metrics, (int)rq->route, 200);
        return ret;
    }
    /* a whole body: wait for the end (an error before a stream began is one too) */
    if (job_wait(j, false, fd) == JOB_WAIT_GONE) {
        metrics_request(&srv->metrics, (int)rq->route, 499);
        return MHD_NO;
    }
    pthread_mutex_lock(&j->mu);
    int status = j->status;
    struct strbuf out = j->out;
    size_t off = j->out_off;
    strbuf_init(&j->out);
    j->out_off = 0;
    pthread_mutex_unlock(&j->mu);
    enum MHD_Result ret = reply(srv, c, rq, status, "application/json", out.buf ? out.buf + off : "", out.len - off, NULL, NULL);
    strbuf_free(&out);
    return ret;
}

static enum MHD_Result route_chat(struct server *srv, struct MHD_Connection *c, struct conn_req *rq)
{
    return run_job(srv, c, rq, JOB_TYPE_GENERATE);
}

static enum MHD_Result route_messages(struct server *srv, struct MHD_Connection *c, struct conn_req *rq)
{
    return run_job(srv, c, rq, JOB_TYPE_GENERATE);
}

static enum MHD_Result route_count(struct server *srv, struct MHD_Connection *c, struct conn_req *rq)
{
    return run_job(srv, c, rq, JOB_TYPE_COUNT_TOKENS);
}

static enum MHD_Result route_responses(struct server *srv, struct MHD_Connection *c, struct conn_req *rq)
{
    return run_job(srv, c, rq, JOB_TYPE_GENERATE);
}

/* ---- the access handler -------------------------------------------------------------- */

static bool key_equal(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char d = la != lb;
    for (size_t i = 0; i < lb; i++) d |= (unsigned char)(a[i % (la ? la : 1)] ^ b[i]);
    return d == 0;
}

static bool authorized(struct server *srv, struct MHD_Connection *c)
{
    const char *key = srv->opts.api_key;
    if (!key || !*key) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key");
    if (h && key_equal(h, key)) return true;
    h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (h && !strncasecmp(h, "Bearer ", 7)) {
        h += 7;
        while (*h == ' ') h++;
        if (key_equal(h, key)) return true;
    }
    return false;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                 const char *version, const char *upload_data, size_t *upload_data_size,
                                 void **req_cls)
{
    struct server *srv = cls;
    struct conn_req *rq = *req_cls;
    if (!rq) {
        rq = hs_calloc(1, sizeof(*rq));
        strbuf_init(&rq->body);
        *req_cls = rq;
        atomic_fetch_add(&srv->n_inflight, 1);
        rq->route = route_find(url);
        rq->kind = rq->route == ROUTE_OTHER && !strncmp(url, "/v1/messages", 12) ? API_KIND_ANTHROPIC_MESSAGES
                                                                                  : routes[rq->route].kind;
        const struct route *r = &routes[rq->route];
        if (rq->route == ROUTE_OTHER) rq->err_code = API_ERR_ROUTE;
        else if (!method_allowed(r, method)) rq->err_code = API_ERR_METHOD;
        else if (r->auth && !authorized(srv, c)) rq->err_code = API_ERR_AUTH;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > (unsigned long long)srv->opts.max_body && !rq->err_code) {
            /* answered before the body is read: a client waiting on 100-continue sends none */
            char msg[128];
            snprintf(msg, sizeof(msg), "the request body is larger than %lld bytes", (long long)srv->opts.max_body);
            return reply_error(srv, c, rq, API_ERR_TOO_LARGE, msg);
        }
        return MHD_YES;
    }
    if (*upload_data_size) {
        if (!rq->err_code) {
            if (rq->body.len + *upload_data_size > (uint64_t)srv->opts.max_body) {
                rq->err_code = API_ERR_TOO_LARGE;
                strbuf_free(&rq->body);
            } else {
                strbuf_append(&rq->body, upload_data, *upload_data_size);
            }
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (rq->err_code) {
        char msg[256];
        switch (rq->err_code) {
        case API_ERR_ROUTE: snprintf(msg, sizeof(msg), "no route %s %.128s", method, url); break;
        case API_ERR_METHOD: snprintf(msg, sizeof(msg), "%s is not allowed on %s (allowed: %s)", method,
                                      routes[rq->route].path, routes[rq->route].methods); break;
        case API_ERR_AUTH: snprintf(msg, sizeof(msg), "missing or invalid API key (send Authorization: Bearer KEY or x-api-key: KEY)"); break;
        default: snprintf(msg, sizeof(msg), "the request body is larger than %lld bytes", (long long)srv->opts.max_body); break;
        }
        return reply_error(srv, c, rq, rq->err_code, msg);
    }
    return routes[rq->route].fn(srv, c, rq);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **req_cls, enum MHD_RequestTerminationCode toe)
{
    struct server *srv = cls;
    struct conn_req *rq = *req_cls;
    if (!rq) return;
    atomic_fetch_sub(&srv->n_inflight, 1);
    if (rq->job) {
        job_cancel(rq->job); /* no-op when done */
        job_release(rq->job);
    }
    strbuf_free(&rq->body);
    hs_free(rq);
    *req_cls = NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    char buf[512];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    size_t n = strlen(buf);
    while (n && buf[n - 1] == '\n') buf[--n] = 0;
    log_debug("http: %s", buf);
}

/* ---- server_run -------------------------------------------------------------------- */

void server_opts_default(struct server_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->host = "127.0.0.1";
    o->port = 8080;
    o->n_threads = sys_cpu_get()->n_cores > 0 ? sys_cpu_get()->n_cores : 1;
    o->max_queue = 16;
    o->max_body = 32 << 20;
    o->bank_ram = -1;
    o->keepalive_s = 1.0;
}

/* Free space where the disk tier lives (its nearest existing ancestor while it does not
 * exist yet); 0 when unknown. */
static uint64_t free_bytes_at(const char *path)
{
    char *p = hs_strdup(path);
    uint64_t free_b = sys_disk_free_bytes(p);
    while (!free_b) {
        char *slash = strrchr(p, '/');
        if (!slash) { free_b = sys_disk_free_bytes("."); break; }
        if (slash == p) { free_b = sys_disk_free_bytes("/"); break; }
        *slash = '\0';
        free_b = sys_disk_free_bytes(p);
    }
    hs_free(p);
    return free_b;
}

/* The session bank (RAM) and its disk tier, owned by the engine thread from here on. A disk
 * tier that cannot be opened is only turned off (warned). Describes both in `desc` for the
 * start line. */
static void bank_start(struct server *srv, char *desc, size_t desc_len)
{
    const struct server_opts *o = &srv->opts;
    if (o->no_bank) { snprintf(desc, desc_len, "bank off"); return; }
    struct bank_opts bo;
    bank_opts_default(&bo);
    bo.ram_budget = o->bank_ram >= 0 ? (uint64_t)o->bank_ram : sys_mem_total_bytes() / 4;
    bo.head_anchor = !o->no_head_anchor;
    srv->bank = bank_init(&bo);
    /* /metrics shows the bank from the start; the engine thread refreshes this after each job */
    bank_stats_get(srv->bank, &srv->metrics.bank);
    srv->metrics.have_bank = true;
    char ram[32], cap[32];
    if (bo.ram_budget) hs_format_size(bo.ram_budget, ram, sizeof(ram));
    else snprintf(ram, sizeof(ram), "unlimited");
    if (o->no_bank_disk) {
        snprintf(desc, desc_len, "bank %s RAM%s, disk off", ram, bo.head_anchor ? "" : " (no head anchor)");
        return;
    }
    char *dir = o->bank_dir ? hs_strdup(o->bank_dir) : bank_disk_default_dir();
    if (!dir) {
        log_warn("serve: no --bank-dir and no HOME or XDG_CACHE_HOME: the bank's disk tier is off");
        snprintf(desc, desc_len, "bank %s RAM, disk off", ram);
        return;
    }
    struct bank_disk_opts dopts;
    bank_disk_opts_default(&dopts);
    dopts.access = BANK_DISK_WRITER_OR_READER; /* a second server on the dir reads it */
    dopts.take_over = true;                    /* and writes once the first lets go */
    if (o->bank_disk > 0) {
        dopts.cap_bytes = (uint64_t)o->bank_disk;
    } else {
        uint64_t free_b = free_bytes_at(dir);
        dopts.cap_bytes = free_b ? HS_MIN(free_b / 5, 64ull << 30) : 64ull << 30;
    }
    struct hs_err err;
    hs_err_clear(&err);
    srv->disk = bank_disk_open(dir, &dopts, &err);
    if (!srv->disk) {
        log_warn("serve: the bank's disk tier is off: %s", err.msg);
        snprintf(desc, desc_len, "bank %s RAM%s, disk off", ram, bo.head_anchor ? "" : " (no head anchor)");
    } else {
        bank_disk_stats_get(srv->disk, &srv->metrics.disk);
        srv->metrics.have_disk = true;
        srv->metrics.disk_live = srv->disk;
        snprintf(desc, desc_len, "bank %s RAM%s, disk %s (cap %s)", ram, bo.head_anchor ? "" : " (no head anchor)",
                 dir, hs_format_size(dopts.cap_bytes, cap, sizeof(cap)));
    }
    hs_free(dir);
}

static char *default_name(const char *path)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    size_t b = n;
    while (b > 0 && path[b - 1] != '/') b--;
    return hs_strndup(path + b, n - b);
}

static struct MHD_Daemon *http_start(struct server *srv, struct hs_err *err)
{
    const char *host = srv->opts.host;
    if (!strcmp(host, "localhost")) host = "127.0.0.1";
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    const struct sockaddr *sa;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC | MHD_USE_ERROR_LOG;
    memset(&a4, 0, sizeof(a4));
    memset(&a6, 0, sizeof(a6));
    if (inet_pton(AF_INET, host, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)srv->opts.port);
        sa = (const struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, host, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)srv->opts.port);
        sa = (const struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    } else {
        hs_err_set(err, HS_ERR_INVALID, "--host '%s' is not a numeric IPv4 or IPv6 address", srv->opts.host);
        return NULL;
    }
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)srv->opts.port, NULL, NULL, on_access, srv,
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, srv,
        MHD_OPTION_SOCK_ADDR, sa,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)600,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)512,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(256 << 10),
        MHD_OPTION_END);
    if (!d) hs_err_set(err, HS_ERR_IO, "cannot listen on %s port %d (in use, or not an address of this machine)",
                       srv->opts.host, srv->opts.port);
    return d;
}

int server_run(const struct server_opts *o)
{
    struct server *srv = hs_calloc(1, sizeof(*srv));
    srv->opts = *o;
    if (srv->opts.max_body <= 0) srv->opts.max_body = 32 << 20;
    if (srv->opts.n_threads < 1) srv->opts.n_threads = 1;
    pthread_mutex_init(&srv->metrics.mu, NULL);
    pthread_mutex_init(&srv->ids_mu, NULL);
    atomic_init(&srv->ready, false);
    atomic_init(&srv->n_inflight, 0);
    srv->ids.seed = (uint64_t)sys_time_unix_ms();
    srv->t_start = (int64_t)time(NULL);
    struct hs_err err;
    hs_err_clear(&err);
    char *name = o->model_name ? hs_strdup(o->model_name) : default_name(o->model_path);
    srv->model_name = name;
    int status = 1;
    struct MHD_Daemon *d = NULL;

    /* the signals are taken by sigwait below; every thread started from here inherits the mask */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (model_load(o->model_path, &srv->model, &err) || model_text_load(srv->model, &srv->text, &err)) goto out;
    if (test_emit_load(&srv->text, &err)) goto out; /* TEST ONLY; off unless HEADSTART_TEST_EMIT */
    struct engine_opts eo;
    engine_opts_default(&eo);
    eo.n_threads = srv->opts.n_threads;
    if (engine_new(srv->model, &eo, &srv->engine, &err)) goto out;
    int64_t train = model_hparams(srv->model)->n_ctx_train;
    srv->n_ctx = o->n_ctx > 0 ? o->n_ctx : HS_MIN(train > 0 ? train : 32768, 32768);
    char bank_desc[4352];
    bank_start(srv, bank_desc, sizeof(bank_desc));
    if (sched_start(&srv->sched, o->max_queue, sched_job_session, srv, &err)) goto out;
    atomic_store(&srv->ready, true);
    d = http_start(srv, &err);
    if (!d) goto out;
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    int port = di ? di->port : o->port;
    bool v6 = strchr(srv->opts.host, ':') != NULL;
    printf("headstart serve: model %s (%s, %s), context %lld, threads %d, kernels %s, max queue %d, %s, "
           "listening on http://%s%s%s:%d\n",
           srv->model_name, model_arch_name(model_hparams(srv->model)->arch), o->model_path,
           (long long)srv->n_ctx, srv->opts.n_threads, engine_kernel_variant(srv->engine), o->max_queue,
           bank_desc, v6 ? "[" : "", srv->opts.host, v6 ? "]" : "", port);
    fflush(stdout);
    if (!o->api_key && strcmp(srv->opts.host, "127.0.0.1") && strcmp(srv->opts.host, "::1") &&
        strcmp(srv->opts.host, "localhost"))
        log_warn("serve: listening on %s without --api-key: anyone who can reach it can use the model", srv->opts.host);

    int sig = 0;
    sigwait(&sigs, &sig);
    log_info("serve: signal %d, stopping", sig);
    MHD_socket lfd = MHD_quiesce_daemon(d); /* no new connections; the socket is ours now */
    if (lfd != MHD_INVALID_SOCKET) close(lfd);
    status = 0;
out:
    if (status) fprintf(stderr, "headstart serve: %s\n", err.msg);
    atomic_store(&srv->ready, false);
    double t0 = sys_time_sec();
    sched_stop(&srv->sched);      /* every waiting connection gets its answer or its cancel */
    /* let the answers the engine just gave (503s, in-stream errors) reach their clients */
    for (int i = 0; i < 300 && atomic_load(&srv->n_inflight) > 0; i++) {
        struct timespec ts = { 0, 10 * 1000000L };
        nanosleep(&ts, NULL);
    }
    double t1 = sys_time_sec();
    if (d) MHD_stop_daemon(d);
    sched_free(&srv->sched);
    log_debug("serve: engine stopped in %.3f s, http in %.3f s", t1 - t0, sys_time_sec() - t1);
    if (srv->disk) {
        bank_disk_flush(srv->disk); /* every queued write reaches the disk before exit */
        bank_disk_close(srv->disk);
    }
    bank_free(srv->bank);
    engine_free(srv->engine);
    test_emit_free();
    model_text_free(&srv->text);
    model_free(srv->model);
    pthread_mutex_destroy(&srv->ids_mu);
    pthread_mutex_destroy(&srv->metrics.mu);
    log_debug("serve: freed in %.3f s", sys_time_sec() - t0);
    hs_free(name);
    hs_free(srv);
    return status;
}
