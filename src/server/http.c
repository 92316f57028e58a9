/*
 * http.c — `headstart serve`'s HTTP side: libmicrohttpd (the only file that includes it),
 * the route table, authentication, limits, a parsed request into a job, and moving a job's
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
 *   connection ─ the guard: per-address and total limits, --request-timeout, the reserve
 *   request ─ headers: one Content-Length? (400 at once) Host? Origin? (403) preflight
 *             (204) route? method? reserve? (503) API key? JSON Content-Type? (415)
 *             Content-Length > max-body? (413 at once)
 *           ─ body: accumulated up to --max-body, the rest discarded (413 at the end)
 *           ─ cost pre-scan (400: elements, depth) ─ JSON parse (400 with line, column,
 *             byte) ─ conversation + fields (400, unsupported ones by name)
 *           ─ a body of >= 8 bytes per context token: rendered and tokenized here (the
 *             side path), 400 when it cannot fit the context
 *           ─ submit (429 + Retry-After when full; 503 while stopping)
 *           ─ wait: stream → first bytes → 200 text/event-stream fed from the job's queue
 *                   body   → done → the job's status and JSON body
 *
 * Routes (a table, `routes`): GET|HEAD /, GET|HEAD /health, GET /metrics, GET /v1/models
 * (Anthropic's shape when the request carries anthropic-version), POST
 * /v1/chat/completions, POST /v1/messages (query ignored: ?beta=true), POST
 * /v1/messages/count_tokens, POST /v1/responses (OpenAI Responses: Codex). Errors take the
 * Anthropic shape under /v1/messages, the OpenAI shape elsewhere. count_tokens never enters
 * the engine's queue: it is rendered and tokenized on its connection's thread (the side
 * path, SERVER_SIDE_MAX at once). A request head libmicrohttpd could not parse never
 * reaches it: the front (our own listening socket) checks every head first and answers a
 * broken one in the API's shape (libmicrohttpd's own answers are HTML pages, and 0.9.75 has
 * no hook to replace them).
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
 * A body is parsed once, here, into a complete request (api_request_parse: the
 * conversation, stops, tool_choice, sampling, the output cap, stream options, a 400 naming
 * a bad field before queueing); the job holds that request and nothing else of the body.
 * Extension fields: `ignore_eos` (as llama.cpp's) generates to max_tokens through stop ids.
 * Refused by name (400): `n` other than 1, `logprobs: true`, `top_logprobs` above 0,
 * `response_format` / Responses `text.format` other than {type: "text"} (structured output
 * is not implemented). `seed` is any integer, 0 included; without one each request gets its
 * own. Ignored fields: `model` (one model is served), `metadata`, and whatever else a
 * client sends that api/request.c and the codecs do not read. A tool call
 * the model makes to a name not in `tools` is passed through as a tool call, as OpenAI and
 * vLLM do (the client answers it with an error result); it is not refused or rewritten.
 *
 * Invariants:
 *   1. No request input can crash the server: every field is type-checked before use and
 *      a bad one is a 400 naming it.
 *   2. A connection thread holds its own reference to its job; the streaming response
 *      holds another; the engine a third. Whoever releases last frees it.
 *   3. The API key is compared in constant time; /, /health and /metrics need none.
 *   4. Host, Origin and Content-Type are checked before the key, on every route: a browser
 *      page cannot reach the API or read /metrics (the "who may ask" section below).
 *   5. No request body reaches jansson unless its element count and depth are bounded
 *      (api_body_prescan): the parse costs a bounded multiple of --max-body.
 *   6. A client that half-closes its socket (shutdown(SHUT_WR)) after its request is
 *      answered, generations included. A FIN from a half-close and from a close are the
 *      same bytes, so an EOF seen while waiting is probed: before the status line an
 *      HTTP/1.1 connection gets "102 Processing" (an interim response every HTTP/1.1
 *      client must skip), on a stream an SSE comment; a closed client answers either with
 *      a reset, and the job is cancelled at the next poll (50 ms). HTTP/1.0 has no interim
 *      responses: there an EOF before the answer cancels, as it always did.
 */
#include "server/server_int.h"

#include "model/model.h"
#include "sys/sys.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define STREAM_BLOCK 16384
#define JOB_SETTLE_S 5.0 /* how long a request the client left waits for its job to end, for its log line */

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

struct conn_slot;

struct conn_req {
    enum route_id route;
    enum api_kind kind;
    int err_code;              /* decided before the body ended; 0: none */
    char err_msg[256];         /* its message when set with one; "" otherwise */
    struct strbuf body;
    struct job *job;           /* this connection's reference */
    struct conn_slot *slot;    /* the connection guard's entry; NULL when it has none */
    const char *cors_origin;   /* a listed Origin to echo (MHD's header string), else NULL */
    bool close;                /* answer with Connection: close (a reserve connection) */
    bool http11;               /* HTTP/1.1: an interim 102 may precede the answer */
    bool keep_alive;           /* HTTP/1.1 without Connection: close: the connection stays */
    bool body_done;            /* the whole request was read (not answered at its headers) */
    /* for the request log (reqlog.c), written by on_completed */
    double t_start;            /* sys_time_sec() when the request line arrived */
    int status;                /* the HTTP status sent (499: the client went away); 0: none */
    char client[64];           /* "ADDR:PORT" */
    char log_err[256];         /* an error reply's message */
};

struct stream_ctx {
    struct job *job;           /* the response's reference */
    struct peer peer;
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

/* What every response carries: the CORS grant of a listed origin, the close of a reserve
 * connection, the keep-alive idle limit (clients that read it, as Node's, drop a pooled
 * connection before the server does). */
static void response_headers(struct server *srv, const struct conn_req *rq, struct MHD_Response *r)
{
    if (rq && rq->cors_origin) {
        MHD_add_response_header(r, "Access-Control-Allow-Origin", rq->cors_origin);
        MHD_add_response_header(r, "Vary", "Origin");
    }
    if (rq && rq->close) {
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    } else {
        char ka[32];
        snprintf(ka, sizeof(ka), "timeout=%d", srv->opts.idle_timeout_s);
        MHD_add_response_header(r, "Keep-Alive", ka);
    }
}

/* The status of rq's answer: counted in /metrics, kept for the request log. */
static void rq_status(struct server *srv, struct conn_req *rq, int status)
{
    metrics_request(&srv->metrics, rq ? (int)rq->route : ROUTE_OTHER, status);
    if (rq) rq->status = status;
}

static enum MHD_Result reply(struct server *srv, struct MHD_Connection *c, struct conn_req *rq,
                             int status, const char *ctype, const char *body, size_t len,
                             const char *hname, const char *hvalue)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)(body ? body : ""),
                                                             MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (hname) MHD_add_response_header(r, hname, hvalue);
    response_headers(srv, rq, r);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    rq_status(srv, rq, status);
    return ret;
}

static enum MHD_Result reply_error(struct server *srv, struct MHD_Connection *c, struct conn_req *rq,
                                   int code, const char *msg)
{
    struct strbuf b;
    strbuf_init(&b);
    int status = api_error_write(rq->kind, code, msg, &b);
    snprintf(rq->log_err, sizeof rq->log_err, "%s", msg ? msg : "");
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
    /* a model file truncated or written in place under the server: what it computes is no
     * longer the model it loaded (the bank is off for it, and a truncated one fails every
     * request), so a load balancer should stop sending here until it is restarted */
    struct hs_err merr;
    hs_err_clear(&merr);
    const char *status = !ready ? "loading" : "ok";
    if (ready && srv->model && model_mapping_check(srv->model, &merr) != HS_OK) status = "model_file_truncated";
    else if (ready && srv->model && model_files_check(srv->model, &merr) != HS_OK) status = "model_file_changed";
    bool ok = !strcmp(status, "ok");
    jsonw_obj_begin(&w);
    jsonw_key(&w, "status"); jsonw_str(&w, status);
    jsonw_key(&w, "model"); jsonw_str(&w, srv->model_name);
    jsonw_key(&w, "queue_depth"); jsonw_int(&w, sched_depth(&srv->sched));
    if (ready && !ok) { jsonw_key(&w, "error"); jsonw_str(&w, merr.msg); }
    jsonw_obj_end(&w);
    enum MHD_Result ret = reply(srv, c, rq, ok ? 200 : 503, "application/json", b.buf, b.len, NULL, NULL);
    strbuf_free(&b);
    return ret;
}

static enum MHD_Result route_metrics(struct server *srv, struct MHD_Connection *c, struct conn_req *rq)
{
    struct strbuf b;
    strbuf_init(&b);
    int running, waiting;
    sched_counts(&srv->sched, &running, &waiting);
    metrics_write(&srv->metrics, route_names, ROUTE_N, running, waiting, &b);
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
        enum job_wait_result w = job_wait(sc->job, true, &sc->peer);
        if (w == JOB_WAIT_GONE) return MHD_CONTENT_READER_END_WITH_ERROR;
        if (w == JOB_WAIT_PROBE) { /* an EOF: a comment every SSE client skips tells a close from a half-close */
            static const char probe[] = ": \n\n";
            if (max < sizeof probe - 1) continue;
            memcpy(buf, probe, sizeof probe - 1);
            return (ssize_t)(sizeof probe - 1);
        }
    }
}

static void stream_free(void *cls)
{
    struct stream_ctx *sc = cls;
    job_cancel(sc->job); /* no-op when done; stops the engine when the client went away */
    job_release(sc->job);
    hs_free(sc);
}

/* ---- the side path: render + tokenize on the connection's own thread ---------------------
 * count_tokens needs only the tokenizer, and a body too large to fit the context should be
 * refused without the engine: both run here, SERVER_SIDE_MAX at once (a semaphore: others
 * wait on their own threads), never in the engine's queue. The template and the tokenizer
 * are safe to share between threads. */

/* The prompt's token count into *n. stop_at > 0: a rendered prompt so long that it cannot
 * hold fewer than stop_at tokens (each token covers at most max_piece_len bytes) is not
 * tokenized: *n is that lower bound and *lower is set. */
static int side_tokens(struct server *srv, const struct chat_request *chat, int64_t stop_at, int64_t *n,
                       bool *lower, struct hs_err *err)
{
    *lower = false;
    if (!srv->text.tmpl)
        return hs_err_set(err, HS_ERR_UNSUPPORTED, "model '%s' has no chat template", srv->model_name);
    while (sem_wait(&srv->side) != 0) {}
    struct strbuf prompt;
    strbuf_init(&prompt);
    int rc = chat_template_render(srv->text.tmpl, chat, &prompt, err);
    if (rc == HS_OK && stop_at > 0 && srv->max_piece_len > 0 && (int64_t)(prompt.len / (size_t)srv->max_piece_len) >= stop_at) {
        *n = (int64_t)(prompt.len / (size_t)srv->max_piece_len);
        *lower = true;
    } else if (rc == HS_OK) {
        struct tokenizer_ids ids = { 0 };
        rc = tokenizer_encode(srv->text.tok, prompt.buf ? prompt.buf : "", prompt.len, 0, &ids, err);
        *n = (int64_t)ids.n;
        tokenizer_ids_free(&ids);
    }
    sem_post(&srv->side);
    strbuf_free(&prompt);
    return rc;
}

/* A body of at least this many bytes per context token is checked against the context on
 * the side path before it is queued: below it, the engine's own check (after its tokenize)
 * costs no more than a prompt that fills the context. */
#define SIDE_CHECK_BYTES_PER_TOKEN 8

/* The body as JSON, its parse cost bounded first (api_body_prescan); NULL after an error
 * reply (*ret set). */
static json_t *body_parse(struct server *srv, struct MHD_Connection *c, struct conn_req *rq, enum MHD_Result *ret)
{
    struct hs_err err;
    hs_err_clear(&err);
    const char *buf = rq->body.buf ? rq->body.buf : "";
    if (api_body_prescan(buf, rq->body.len, API_BODY_MAX_ELEMENTS, API_BODY_MAX_DEPTH, &err)) {
        *ret = reply_error(srv, c, rq, err.code, err.msg);
        return NULL;
    }
    json_error_t je;
    json_t *body = json_loadb(buf, rq->body.len, JSON_REJECT_DUPLICATES, &je);
    if (!body) {
        char msg[HS_ERR_MSG_MAX];
        snprintf(msg, sizeof(msg), "invalid JSON in the request body at line %d, column %d (byte %d): %s",
                 je.line, je.column, je.position, je.text);
        *ret = reply_error(srv, c, rq, HS_ERR_FORMAT, msg);
        return NULL;
    }
    if (!json_is_object(body)) {
        json_decref(body);
        *ret = reply_error(srv, c, rq, HS_ERR_FORMAT, "the request body must be a JSON object");
        return NULL;
    }
    return body;
}

static enum MHD_Result run_job(struct server *srv, struct MHD_Connection *c, struct conn_req *rq)
{
    enum MHD_Result ret = MHD_NO;
    json_t *body = body_parse(srv, c, rq, &ret);
    if (!body) return ret;
    char msg[HS_ERR_MSG_MAX];
    struct hs_err err;
    hs_err_clear(&err);
    struct job *j = job_new();
    rq->job = j;
    struct api_sampling defaults;
    session_sampling_defaults(&defaults);
    int rc = api_request_parse(rq->kind, body, &defaults, &j->req, &err);
    json_decref(body); /* the request holds what it needs */
    if (rc != HS_OK) return reply_error(srv, c, rq, rc, err.msg);
    const struct api_request *req = &j->req;
    if (req->chat.n_media_placeholders) metrics_media(&srv->metrics, req->chat.n_media_placeholders);
    if (rq->body.len >= (size_t)srv->n_ctx * SIDE_CHECK_BYTES_PER_TOKEN) {
        int64_t n = 0;
        bool lower;
        rc = side_tokens(srv, &req->chat, srv->n_ctx, &n, &lower, &err);
        if (rc != HS_OK) return reply_error(srv, c, rq, rc, err.msg);
        if (n >= srv->n_ctx) { /* n may be a lower bound (lower): still more than fits */
            api_context_error(req->kind, n, srv->n_ctx, msg, sizeof msg);
            return reply_error(srv, c, rq, API_ERR_CONTEXT, msg);
        }
    }
    if (!srv->opts.log_bodies) strbuf_free(&rq->body); /* else the request log shows it */
    pthread_mutex_lock(&srv->ids_mu);
    api_ids_next(&srv->ids, req->kind, j->id);
    j->seed = req->sampling.seed_given ? (uint64_t)req->sampling.seed : srv->ids.counter; /* 0 is a seed too */
    pthread_mutex_unlock(&srv->ids_mu);
    j->created = (int64_t)time(NULL);

    rc = sched_submit(&srv->sched, j);
    if (rc == API_ERR_QUEUE_FULL) return reply_error(srv, c, rq, rc, "the request queue is full; retry later");
    if (rc != HS_OK) return reply_error(srv, c, rq, rc, "the server is shutting down");

    /* a half-closed client is answered; until a status line went out, a 102 tells it from
     * a closed one (HTTP/1.0 has no interim responses: its EOF is a close) */
    struct peer peer = { .fd = conn_fd(c), .probe = rq->http11 ? PEER_PROBE_INTERIM : PEER_PROBE_NONE };
    if (job_wait(j, req->stream, &peer) == JOB_WAIT_GONE) {
        rq_status(srv, rq, 499);
        return MHD_NO; /* the client is gone: close without a response */
    }
    pthread_mutex_lock(&j->mu);
    bool started = j->started;
    pthread_mutex_unlock(&j->mu);
    if (req->stream && started) {
        struct stream_ctx *sc = hs_calloc(1, sizeof(*sc));
        job_retain(j);
        sc->job = j;
        sc->peer = (struct peer){ .fd = peer.fd, .probe = PEER_PROBE_SSE, .half_closed = peer.half_closed };
        struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK,
                                                                   stream_read, sc, stream_free);
        if (!r) { stream_free(sc); return MHD_NO; }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        MHD_add_response_header(r, "X-Accel-Buffering", "no");
        response_headers(srv, rq, r);
        ret = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        rq_status(srv, rq, 200);
        return ret;
    }
    /* a whole body: wait for the end (an error before a stream began is one too) */
    if (job_wait(j, false, &peer) == JOB_WAIT_GONE) {
        rq_status(srv, rq, 499);
        return MHD_NO;
    }
    pthread_mutex_lock(&j->mu);
    int status = j->status;
    struct strbuf out = j->out;
    size_t off = j->out_off;
    strbuf_init(&j->out);
    j->out_off = 0;
    pthread_mutex_unlock(&j->mu);
    /* refused after the submit (the queue shed it, the server stopping): retry later */
    bool retry = status == 429 || status == 503;
    ret = reply(srv, c, rq, status, "application/json", out.buf ? out.buf + off : "", out.len - off,
                retry ? "Retry-After" : NULL, retry ? "1" : NULL);
    strbuf_free(&out);
    return ret;
}

static enum MHD_Result route_chat(struct server *srv, struct MHD_Connection *c, struct conn_req *rq)
{
    return run_job(srv, c, rq);
}

static enum MHD_Result route_messages(struct server *srv, struct MHD_Connection *c, struct conn_req *rq)
{
    return run_job(srv, c, rq);
}

/* Answered on this thread (the side path), never queued behind generations. */
static enum MHD_Result route_count(struct server *srv, struct MHD_Connection *c, struct conn_req *rq)
{
    enum MHD_Result ret = MHD_NO;
    json_t *body = body_parse(srv, c, rq, &ret);
    if (!body) return ret;
    struct hs_err err;
    hs_err_clear(&err);
    struct chat_request chat;
    memset(&chat, 0, sizeof(chat));
    int rc = chat_from_anthropic(body, &chat, &err);
    int64_t n = 0;
    bool lower;
    if (rc == HS_OK) rc = side_tokens(srv, &chat, 0, &n, &lower, &err);
    chat_request_free(&chat);
    json_decref(body);
    if (rc != HS_OK) return reply_error(srv, c, rq, rc, err.msg);
    struct strbuf b;
    strbuf_init(&b);
    api_count_tokens_write(n, &b);
    ret = reply(srv, c, rq, 200, "application/json", b.buf, b.len, NULL, NULL);
    strbuf_free(&b);
    return ret;
}

static enum MHD_Result route_responses(struct server *srv, struct MHD_Connection *c, struct conn_req *rq)
{
    return run_job(srv, c, rq);
}

/* ---- the connection guard -------------------------------------------------------------
 * One local client must not make the server unreachable. libmicrohttpd counts connections
 * but cannot tell a slow request from a busy one, so the guard keeps its own table of open
 * connections (the front admits each one it accepts, libmicrohttpd's notify-connection
 * callback takes the slot over, and its close frees it) and the state of each:
 *
 *   opened ─> WAITING ──headers──> BODY ──body ended──> HANDLING ──answered──> WAITING ...
 *   (a keep-alive connection waits for its next request in WAITING)
 *
 *   1. A WAITING or BODY connection older than --request-timeout is shut down (a watchdog
 *      thread): a header or body trickled one byte at a time never holds a slot longer.
 *      Silence for --idle-timeout closes any connection (the front's, then libmicrohttpd's).
 *   2. A new connection over --max-connections-per-ip from one address, or over
 *      --max-connections in all, shuts down the oldest WAITING or BODY connection (of that
 *      address first): a fresh request always finds a slot while any slot only waits.
 *   3. When every slot is HANDLING, a new connection is admitted into a reserve of
 *      SERVER_CONN_RESERVE slots that answers only /, /health and /metrics (others 503)
 *      and closes after each answer: /health answers while the pool is full.
 *   4. A slot is freed in the CLOSED notification, which libmicrohttpd sends before it
 *      closes the socket, or by the front before it closes a socket it never handed over;
 *      shutdown() is called only under the table's lock on a slot still in use and not
 *      being handed over, so it never reaches a reused descriptor. */

enum conn_state { CONN_WAITING = 0, CONN_BODY, CONN_HANDLING };

struct conn_slot {
    bool used;
    bool shut;                    /* shutdown() sent: closing, no longer counted */
    bool reserve;                 /* admitted over --max-connections (invariant 3) */
    bool handoff;                 /* being handed to libmicrohttpd: not evicted (guard_handoff) */
    int fd;
    uint8_t ip[16];
    uint8_t ip_len;
    enum conn_state state;
    double t_state;               /* sys_time_sec() when the state began */
};

struct conn_guard {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct conn_slot *slots;
    int cap;                      /* max + SERVER_CONN_RESERVE: libmicrohttpd's limit too */
    int max, per_ip;
    double request_s;
    bool stop;
    pthread_t thread;
    bool started;
    int64_t n_evicted, n_timed_out;
};

static void guard_shut(struct conn_guard *g, struct conn_slot *s)
{
    s->shut = true;
    shutdown(s->fd, SHUT_RDWR); /* the connection's thread sees the end and closes it */
}

static bool guard_evictable(const struct conn_slot *s)
{
    return s->used && !s->shut && !s->handoff && s->state != CONN_HANDLING;
}

/* The oldest WAITING or BODY slot other than self (of self's address when same_ip). */
static struct conn_slot *guard_oldest(struct conn_guard *g, const struct conn_slot *self, bool same_ip)
{
    struct conn_slot *best = NULL;
    for (int i = 0; i < g->cap; i++) {
        struct conn_slot *s = &g->slots[i];
        if (s == self || !guard_evictable(s)) continue;
        if (same_ip && (s->ip_len != self->ip_len || memcmp(s->ip, self->ip, s->ip_len))) continue;
        if (!best || s->t_state < best->t_state) best = s;
    }
    return best;
}

static void *guard_main(void *arg)
{
    struct conn_guard *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        double now = sys_time_sec();
        for (int i = 0; i < g->cap; i++) {
            struct conn_slot *s = &g->slots[i];
            if (guard_evictable(s) && now - s->t_state > g->request_s) {
                g->n_timed_out++;
                guard_shut(g, s);
            }
        }
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    }
    pthread_mutex_unlock(&g->mu);
    return NULL;
}

static struct conn_guard *guard_new(const struct server_opts *o)
{
    struct conn_guard *g = hs_calloc(1, sizeof(*g));
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
    g->max = o->max_conns;
    g->per_ip = o->max_conns_per_ip;
    g->request_s = o->request_timeout_s;
    g->cap = o->max_conns + SERVER_CONN_RESERVE;
    g->slots = hs_calloc((size_t)g->cap, sizeof(*g->slots));
    g->started = pthread_create(&g->thread, NULL, guard_main, g) == 0;
    return g;
}

static void guard_free(struct conn_guard *g)
{
    if (!g) return;
    pthread_mutex_lock(&g->mu);
    g->stop = true;
    pthread_cond_signal(&g->cv);
    pthread_mutex_unlock(&g->mu);
    if (g->started) pthread_join(g->thread, NULL);
    log_debug("serve: connection guard: %lld evicted, %lld past --request-timeout",
              (long long)g->n_evicted, (long long)g->n_timed_out);
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
    hs_free(g->slots);
    hs_free(g);
}

/* A connection accepted (invariants 2 and 3), before its head is checked (the front):
 * its slot, or NULL when the table is full (the caller closes it). */
static struct conn_slot *guard_admit(struct conn_guard *g, int fd, const struct sockaddr *sa)
{
    pthread_mutex_lock(&g->mu);
    struct conn_slot *self = NULL;
    for (int i = 0; i < g->cap && !self; i++)
        if (!g->slots[i].used) self = &g->slots[i];
    if (!self) {
        pthread_mutex_unlock(&g->mu);
        return NULL;
    }
    memset(self, 0, sizeof(*self));
    self->used = true;
    self->fd = fd;
    self->state = CONN_WAITING;
    self->t_state = sys_time_sec();
    if (sa && sa->sa_family == AF_INET) {
        self->ip_len = 4;
        memcpy(self->ip, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
    } else if (sa && sa->sa_family == AF_INET6) {
        self->ip_len = 16;
        memcpy(self->ip, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
    }
    int n_live = 0, n_ip = 0;
    for (int i = 0; i < g->cap; i++) {
        const struct conn_slot *s = &g->slots[i];
        if (!s->used || s->shut) continue;
        n_live++;
        if (s->ip_len == self->ip_len && !memcmp(s->ip, self->ip, s->ip_len)) n_ip++;
    }
    for (; n_ip > g->per_ip; n_ip--, n_live--) {
        struct conn_slot *v = guard_oldest(g, self, true);
        if (!v) { guard_shut(g, self); break; } /* its address holds only busy ones */
        g->n_evicted++;
        guard_shut(g, v);
    }
    for (; !self->shut && n_live > g->max; n_live--) {
        struct conn_slot *v = guard_oldest(g, self, false);
        if (!v) { self->reserve = true; break; }
        g->n_evicted++;
        guard_shut(g, v);
    }
    pthread_mutex_unlock(&g->mu);
    return self;
}

/* The front hands fd's connection to libmicrohttpd: until its STARTED notification takes
 * the slot (guard_attach), the guard leaves it alone (libmicrohttpd closes the socket when
 * it cannot take it, and the descriptor may be reused before the front frees the slot). */
static void guard_handoff(struct conn_guard *g, struct conn_slot *s, bool on)
{
    pthread_mutex_lock(&g->mu);
    s->handoff = on;
    pthread_mutex_unlock(&g->mu);
}

static void guard_attach(struct conn_guard *g, struct MHD_Connection *c, void **socket_context)
{
    const union MHD_ConnectionInfo *fi = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    *socket_context = NULL;
    if (!fi) return;
    pthread_mutex_lock(&g->mu);
    for (int i = 0; i < g->cap; i++) {
        struct conn_slot *s = &g->slots[i];
        if (s->used && s->handoff && s->fd == fi->connect_fd) {
            s->handoff = false;
            *socket_context = s;
            break;
        }
    }
    pthread_mutex_unlock(&g->mu);
}

static void guard_close(struct conn_guard *g, struct conn_slot *s)
{
    pthread_mutex_lock(&g->mu);
    s->used = false;
    pthread_mutex_unlock(&g->mu);
}

/* BODY keeps WAITING's start: --request-timeout covers the headers and the body together. */
static void guard_state(struct conn_guard *g, struct conn_slot *s, enum conn_state st)
{
    if (!s) return;
    pthread_mutex_lock(&g->mu);
    if (st != CONN_BODY) s->t_state = sys_time_sec();
    s->state = st;
    pthread_mutex_unlock(&g->mu);
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    struct server *srv = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) guard_attach(srv->guard, c, socket_context);
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED && *socket_context) guard_close(srv->guard, *socket_context);
}

static struct conn_slot *conn_slot_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* ---- the front: our listening socket, and each request head checked before libmicrohttpd
 * reads it ----------------------------------------------------------------------------------
 * libmicrohttpd answers a head it cannot parse with its own HTML page, and 0.9.75 has no
 * hook to replace it. So the server listens itself: a thread accepts, the connection guard
 * admits the socket (limits, deadlines), and a short-lived gate thread peeks at the head
 * as it arrives (MSG_PEEK: nothing is consumed; SO_RCVLOWAT wakes it only when more bytes
 * came) and has reqhead.c judge it. A valid head goes to libmicrohttpd with
 * MHD_add_connection and is read there as if it had accepted the socket; a broken one gets
 * the API's JSON error (Anthropic's shape under /v1/messages) and the connection closes.
 * A keep-alive connection's next head is checked the same way, on its own thread, in the
 * completed notification, before libmicrohttpd reads again.
 *
 *   1. The gate only peeks: libmicrohttpd reads exactly the bytes it would have read.
 *   2. A silent connection closes after --idle-timeout; a head still incomplete at
 *      --request-timeout is the guard's (it shuts the socket; the gate sees the end).
 *   3. A refused head's answer is written, the write side shut, and the rest of what the
 *      client sent drained (up to 1 s) before the close, so the client reads the answer
 *      rather than a reset.
 *   4. Stop: no new accepts; every gate sees the flag within 200 ms; libmicrohttpd stops
 *      only when no gate is left to hand it a connection. */

#define HEAD_LIMIT (64 << 10)     /* the largest request head accepted (431 beyond) */

struct front {
    struct server *srv;
    struct MHD_Daemon *d;
    int lfd;
    int port;                     /* the bound port (--port 0: the kernel's choice) */
    pthread_t thread;
    bool started;
    atomic_bool stop;
    atomic_int n_gates;           /* gate threads alive */
    atomic_llong n_refused;       /* heads answered with an error here */
};

enum gate_result { GATE_PASS = 0, GATE_CLOSE, GATE_REFUSED };

/* Invariant 3. */
static void gate_refuse(struct front *f, int fd, const struct reqhead *h)
{
    struct strbuf body, out;
    strbuf_init(&body);
    strbuf_init(&out);
    int status = api_error_write(h->anthropic ? API_KIND_ANTHROPIC_MESSAGES : API_KIND_OPENAI_CHAT, h->code, h->msg,
                                 &body);
    const char *reason = MHD_get_reason_phrase_for((unsigned)status);
    strbuf_printf(&out, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                  "Connection: close\r\n\r\n", status, reason && *reason ? reason : "Error", body.len);
    strbuf_append(&out, body.buf, body.len);
    metrics_request(&f->srv->metrics, ROUTE_OTHER, status);
    atomic_fetch_add(&f->n_refused, 1);
    log_debug("serve: refused a request head (%d): %s", status, h->msg);
    double t_end = sys_time_sec() + 1.0;
    size_t off = 0;
    while (off < out.len && sys_time_sec() < t_end) {
        ssize_t n = send(fd, out.buf + off, out.len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) { off += (size_t)n; continue; }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) break;
        struct pollfd p = { .fd = fd, .events = POLLOUT };
        poll(&p, 1, 100);
    }
    shutdown(fd, SHUT_WR);
    char sink[4096];
    while (sys_time_sec() < t_end) {
        struct pollfd p = { .fd = fd, .events = POLLIN };
        if (poll(&p, 1, 100) <= 0) continue;
        ssize_t n = recv(fd, sink, sizeof sink, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) break;
    }
    strbuf_free(&out);
    strbuf_free(&body);
}

/* Wait for fd's next request head and judge it (invariants 1 and 2). */
static enum gate_result gate_head(struct front *f, int fd)
{
    char *buf = NULL;
    size_t have = 0, cap = 0;
    int lowat = 1;
    double t_byte = sys_time_sec();
    enum gate_result res = GATE_CLOSE;
    while (!atomic_load(&f->stop)) {
        struct pollfd p = { .fd = fd, .events = POLLIN | POLLRDHUP };
        int r = poll(&p, 1, 200);
        if (r < 0 && errno != EINTR) break;
        if (r <= 0) {
            if (sys_time_sec() - t_byte >= f->srv->opts.idle_timeout_s) break; /* silence */
            continue;
        }
        if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) break;
        int avail = 0;
        if (ioctl(fd, FIONREAD, &avail) < 0) break;
        size_t want = HS_MIN((size_t)avail, (size_t)HEAD_LIMIT + 1);
        if (want <= have) {
            if (p.revents & POLLRDHUP) break; /* the client ended with a partial head */
            continue;
        }
        if (want > cap) {
            cap = HS_MAX(want, 2 * cap);
            buf = hs_realloc(buf, cap);
        }
        ssize_t n = recv(fd, buf, want, MSG_PEEK | MSG_DONTWAIT);
        if (n <= 0) {
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            break;
        }
        have = (size_t)n;
        t_byte = sys_time_sec();
        struct reqhead h;
        reqhead_check(buf, have, HEAD_LIMIT, &h);
        if (h.verdict == REQHEAD_OK) { res = GATE_PASS; break; }
        if (h.verdict == REQHEAD_BAD) { gate_refuse(f, fd, &h); res = GATE_REFUSED; break; }
        lowat = (int)have + 1; /* wake when more than this arrived */
        setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat);
    }
    if (lowat != 1) {
        lowat = 1;
        setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &lowat, sizeof lowat);
    }
    hs_free(buf);
    return res;
}

struct gate_arg {
    struct front *f;
    int fd;
    struct conn_slot *slot;
    struct sockaddr_storage sa;
    socklen_t sa_len;
};

static void *gate_main(void *arg)
{
    struct gate_arg *a = arg;
    struct front *f = a->f;
    struct conn_guard *g = f->srv->guard;
    if (gate_head(f, a->fd) == GATE_PASS && !atomic_load(&f->stop)) {
        guard_handoff(g, a->slot, true);
        /* libmicrohttpd closes the socket when it cannot take it */
        if (MHD_add_connection(f->d, a->fd, (const struct sockaddr *)&a->sa, a->sa_len) != MHD_YES) guard_close(g, a->slot);
    } else {
        guard_close(g, a->slot); /* before the close: the guard never shuts a reused descriptor */
        close(a->fd);
    }
    atomic_fetch_sub(&f->n_gates, 1);
    hs_free(a);
    return NULL;
}

static void *front_main(void *arg)
{
    struct front *f = arg;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 << 10);
    while (!atomic_load(&f->stop)) {
        struct pollfd p = { .fd = f->lfd, .events = POLLIN };
        if (poll(&p, 1, 200) <= 0) continue;
        struct gate_arg *a = hs_calloc(1, sizeof(*a));
        a->sa_len = sizeof a->sa;
        a->fd = accept4(f->lfd, (struct sockaddr *)&a->sa, &a->sa_len, SOCK_CLOEXEC);
        if (a->fd < 0) {
            hs_free(a);
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                struct timespec ts = { 0, 100 * 1000000L }; /* out of descriptors: let some close */
                nanosleep(&ts, NULL);
            }
            continue;
        }
        a->f = f;
        a->slot = guard_admit(f->srv->guard, a->fd, (const struct sockaddr *)&a->sa);
        pthread_t t;
        atomic_fetch_add(&f->n_gates, 1);
        if (!a->slot || pthread_create(&t, &attr, gate_main, a) != 0) {
            if (a->slot) guard_close(f->srv->guard, a->slot);
            close(a->fd);
            hs_free(a);
            atomic_fetch_sub(&f->n_gates, 1);
        }
    }
    pthread_attr_destroy(&attr);
    return NULL;
}

/* Listen on sa; NULL with err set when the address cannot be bound. */
static struct front *front_new(struct server *srv, const struct sockaddr *sa, socklen_t len, struct hs_err *err)
{
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd >= 0 && sa->sa_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (fd < 0 || bind(fd, sa, len) != 0 || listen(fd, SOMAXCONN) != 0) {
        hs_err_set(err, HS_ERR_IO, "cannot listen on %s port %d (%s)", srv->opts.host, srv->opts.port, strerror(errno));
        if (fd >= 0) close(fd);
        return NULL;
    }
    struct front *f = hs_calloc(1, sizeof(*f));
    f->srv = srv;
    f->lfd = fd;
    f->port = srv->opts.port;
    struct sockaddr_storage b;
    socklen_t bl = sizeof b;
    if (getsockname(fd, (struct sockaddr *)&b, &bl) == 0)
        f->port = ntohs(b.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&b)->sin6_port
                                                : ((struct sockaddr_in *)&b)->sin_port);
    return f;
}

static bool front_start(struct front *f, struct MHD_Daemon *d)
{
    f->d = d;
    f->started = pthread_create(&f->thread, NULL, front_main, f) == 0;
    return f->started;
}

/* Invariant 4, first half: no new connections, no gate left. */
static void front_quiesce(struct front *f)
{
    if (!f) return;
    atomic_store(&f->stop, true);
    if (f->started) pthread_join(f->thread, NULL);
    f->started = false;
    if (f->lfd >= 0) close(f->lfd);
    f->lfd = -1;
    while (atomic_load(&f->n_gates) > 0) {
        struct timespec ts = { 0, 10 * 1000000L };
        nanosleep(&ts, NULL);
    }
}

static void front_free(struct front *f)
{
    if (!f) return;
    front_quiesce(f);
    log_debug("serve: front: %lld request heads refused", (long long)atomic_load(&f->n_refused));
    hs_free(f);
}

/* ---- who may ask: Host, Origin, Content-Type ----------------------------------------------
 * With no API key (the default on loopback) the network boundary is the only protection,
 * and a browser crosses it: any page can POST to 127.0.0.1, and a DNS-rebinding page (its
 * own name, resolved to 127.0.0.1) can read the answers. So:
 *   Host: an IP literal that is the bound address (any IP literal on a wildcard bind;
 *     any loopback literal on a loopback bind), "localhost", or a name from --allow-host;
 *     a rebinding page's Host is its own name and is refused (403).
 *   Origin: absent (not a browser), the request's own origin, or listed by --cors-origin
 *     (whose responses and OPTIONS preflights then carry the CORS grant); else 403.
 *   POST bodies: Content-Type application/json (any parameters; a charset must be utf-8),
 *     which a page cannot send cross-origin without a preflight; else 415. */

/* Does comma-separated `list` hold `item` (case-insensitive; "*" holds anything)? */
static bool list_has(const char *list, const char *item, size_t item_len)
{
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        while (n && *p == ' ') { p++; n--; }
        while (n && p[n - 1] == ' ') n--;
        if ((n == 1 && *p == '*') || (n == item_len && !strncasecmp(p, item, n))) return true;
        p = e ? e + 1 : p + n;
    }
    return false;
}

static bool ip_loopback(int af, const void *a)
{
    if (af == AF_INET) return ((const uint8_t *)a)[0] == 127;
    static const uint8_t one[16] = { [15] = 1 };
    return !memcmp(a, one, 16);
}

static bool host_allowed(struct server *srv, const char *h)
{
    if (!h) return true; /* HTTP/1.0 without Host: not a browser */
    char name[256];
    size_t n;
    if (*h == '[') {
        const char *e = strchr(h, ']');
        if (!e || (e[1] && e[1] != ':')) return false;
        n = (size_t)(e - h - 1);
        h++;
    } else {
        const char *colon = strchr(h, ':');
        if (colon && strchr(colon + 1, ':')) return false;
        n = colon ? (size_t)(colon - h) : strlen(h);
    }
    if (n == 0 || n >= sizeof(name)) return false;
    memcpy(name, h, n);
    name[n] = 0;
    if (!strcasecmp(name, "localhost")) return true;
    if (srv->opts.allow_hosts && list_has(srv->opts.allow_hosts, name, n)) return true;
    uint8_t a[16], b[16];
    int af = inet_pton(AF_INET, name, a) == 1 ? AF_INET : inet_pton(AF_INET6, name, a) == 1 ? AF_INET6 : 0;
    if (!af) return false;
    const char *bound = srv->opts.host;
    if (!strcmp(bound, "localhost")) bound = "127.0.0.1";
    int baf = inet_pton(AF_INET, bound, b) == 1 ? AF_INET : inet_pton(AF_INET6, bound, b) == 1 ? AF_INET6 : 0;
    if (!baf) return false;
    static const uint8_t zero[16];
    if (!memcmp(b, zero, baf == AF_INET ? 4 : 16)) return true; /* 0.0.0.0 or :: */
    if (af == baf && !memcmp(a, b, af == AF_INET ? 4 : 16)) return true;
    return ip_loopback(baf, b) && ip_loopback(af, a);
}

/* An Origin is allowed when listed, or when it is the request's own ("http://" + Host). */
static bool origin_listed(struct server *srv, const char *origin)
{
    return srv->opts.cors_origins && list_has(srv->opts.cors_origins, origin, strlen(origin));
}

static bool origin_same(const char *origin, const char *host)
{
    return host && !strncasecmp(origin, "http://", 7) && !strcasecmp(origin + 7, host);
}

static bool ctype_json(const char *ct)
{
    if (!ct) return false;
    while (*ct == ' ' || *ct == '\t') ct++;
    if (strncasecmp(ct, "application/json", 16)) return false;
    const char *p = ct + 16;
    while (*p == ' ' || *p == '\t') p++;
    if (!*p) return true;
    if (*p != ';') return false;
    for (const char *q = p; (q = strchr(q, ';'));) {
        q++;
        while (*q == ' ' || *q == '\t') q++;
        if (strncasecmp(q, "charset=", 8)) continue;
        q += 8;
        if (*q == '"') q++;
        if (strncasecmp(q, "utf-8", 5) || (q[5] && q[5] != '"' && q[5] != ';' && q[5] != ' ')) return false;
    }
    return true;
}

/* How many Content-Length headers the request has, and whether it has Transfer-Encoding. */
struct framing { int n_length; bool chunked; };

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    struct framing *f = cls;
    if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) f->n_length++;
    else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) f->chunked = true;
    return MHD_YES;
}

/* An OPTIONS preflight from a listed origin: the grant, nothing else (no key needed:
 * browsers send none on a preflight). */
static enum MHD_Result reply_preflight(struct server *srv, struct MHD_Connection *c, struct conn_req *rq)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    const char *req_h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Headers");
    MHD_add_response_header(r, "Access-Control-Allow-Methods", routes[rq->route].methods);
    MHD_add_response_header(r, "Access-Control-Allow-Headers",
                            req_h ? req_h : "authorization, content-type, x-api-key, anthropic-version");
    MHD_add_response_header(r, "Access-Control-Max-Age", "600");
    response_headers(srv, rq, r);
    enum MHD_Result ret = MHD_queue_response(c, 204, r);
    MHD_destroy_response(r);
    rq_status(srv, rq, 204);
    return ret;
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

/* "ADDR:PORT" of the connection's peer ("-" when unknown). */
static void client_address(struct MHD_Connection *c, char *buf, size_t n)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    char host[INET6_ADDRSTRLEN] = "-";
    unsigned port = 0;
    if (sa && sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        port = ntohs(in->sin_port);
    } else if (sa && sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        port = ntohs(in6->sin6_port);
    }
    snprintf(buf, n, sa && sa->sa_family == AF_INET6 ? "[%s]:%u" : "%s:%u", host, port);
}

/* The API a route serves, as the request log names it. */
static const char *route_api(const struct conn_req *rq)
{
    switch (rq->route) {
    case ROUTE_CHAT: return "chat";
    case ROUTE_MESSAGES: return "messages";
    case ROUTE_RESPONSES: return "responses";
    case ROUTE_COUNT_TOKENS: return "count_tokens";
    default: return route_names[rq->route];
    }
}

/* One line for every finished API request, and for any request answered with an error
 * (health probes and scrapes that succeed would only drown the rest). */
static void request_log(struct server *srv, struct conn_req *rq)
{
    bool api = rq->route == ROUTE_CHAT || rq->route == ROUTE_MESSAGES || rq->route == ROUTE_RESPONSES ||
               rq->route == ROUTE_COUNT_TOKENS;
    if (!api && rq->status < 400) return;
    struct reqlog l = { .api = route_api(rq), .model = srv->model_name, .status = rq->status,
                        .total_ms = (sys_time_sec() - rq->t_start) * 1e3, .client = rq->client,
                        .error = rq->log_err, .ttft_ms = -1 };
    struct job *j = rq->job;
    if (j) {
        pthread_mutex_lock(&j->mu);
        l.id = j->id;
        l.ran = j->ran;
        l.prompt_tokens = j->n_prompt;
        l.cached_tokens = j->n_cached;
        l.generated_tokens = j->n_generated;
        if (j->ran) { /* names only where the line is written */
            l.cache_source = bank_source_name(j->cache_source);
            l.stop_reason = session_stop_name(j->stop_reason);
            l.first_logits = j->first_logits;
        }
        l.ttft_ms = j->ttft_ms;
        pthread_mutex_unlock(&j->mu);
    }
    if (srv->opts.log_bodies && rq->body.len) {
        l.body = rq->body.buf;
        l.body_len = rq->body.len;
    }
    reqlog_write(&l);
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
        rq->t_start = sys_time_sec();
        client_address(c, rq->client, sizeof rq->client);
        atomic_fetch_add(&srv->n_inflight, 1);
        rq->slot = conn_slot_of(c);
        guard_state(srv->guard, rq->slot, CONN_BODY);
        rq->close = rq->slot && rq->slot->reserve;
        rq->http11 = version && !strcmp(version, MHD_HTTP_VERSION_1_1);
        const char *conn = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONNECTION);
        rq->keep_alive = rq->http11 && !(conn && strcasestr(conn, "close"));
        rq->route = route_find(url);
        rq->kind = rq->route == ROUTE_OTHER && !strncmp(url, "/v1/messages", 12) ? API_KIND_ANTHROPIC_MESSAGES
                                                                                  : routes[rq->route].kind;
        const struct route *r = &routes[rq->route];
        const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
        const char *origin = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Origin");
        struct framing fr = { 0, false };
        MHD_get_connection_values(c, MHD_HEADER_KIND, count_framing, &fr);
        if (fr.n_length > 1 || (fr.n_length && fr.chunked)) {
            /* the body's end is ambiguous: answer now, and the connection closes */
            rq->close = true;
            return reply_error(srv, c, rq, HS_ERR_FORMAT, fr.chunked ? "the request has both Content-Length and "
                               "Transfer-Encoding" : "the request has more than one Content-Length header");
        }
        if (origin && origin_listed(srv, origin)) rq->cors_origin = origin;
        if (!host_allowed(srv, host)) {
            rq->err_code = API_ERR_FORBIDDEN;
            snprintf(rq->err_msg, sizeof(rq->err_msg), "Host '%.64s' is not an address of this server (add the "
                     "name with --allow-host)", host);
        } else if (origin && !rq->cors_origin && !origin_same(origin, host)) {
            rq->err_code = API_ERR_FORBIDDEN;
            snprintf(rq->err_msg, sizeof(rq->err_msg), "cross-origin request from '%.64s' refused (allow the "
                     "origin with --cors-origin)", origin);
        } else if (rq->route != ROUTE_OTHER && !strcmp(method, "OPTIONS") && origin &&
                   MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Access-Control-Request-Method")) {
            return reply_preflight(srv, c, rq);
        } else if (rq->route == ROUTE_OTHER) {
            rq->err_code = API_ERR_ROUTE;
        } else if (!method_allowed(r, method)) {
            rq->err_code = API_ERR_METHOD;
        } else if (rq->close && r->auth) {
            rq->err_code = API_ERR_OVERLOADED;
            snprintf(rq->err_msg, sizeof(rq->err_msg), "the server has %d connections open (--max-connections); "
                     "retry later", srv->opts.max_conns);
        } else if (r->auth && !authorized(srv, c)) {
            rq->err_code = API_ERR_AUTH;
        } else if (!strcmp(method, "POST") &&
                   !ctype_json(MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE))) {
            rq->err_code = API_ERR_MEDIA_TYPE;
            snprintf(rq->err_msg, sizeof(rq->err_msg), "the request body must be sent as Content-Type: "
                     "application/json (got '%.64s')",
                     MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE)
                         ? MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE) : "none");
        }
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
    guard_state(srv->guard, rq->slot, CONN_HANDLING);
    rq->body_done = true;
    if (rq->err_code) {
        char msg[256];
        switch (rq->err_code) {
        case API_ERR_ROUTE: snprintf(msg, sizeof(msg), "no route %s %.128s", method, url); break;
        case API_ERR_METHOD: snprintf(msg, sizeof(msg), "%s is not allowed on %s (allowed: %s)", method,
                                      routes[rq->route].path, routes[rq->route].methods); break;
        case API_ERR_AUTH: snprintf(msg, sizeof(msg), "missing or invalid API key (send Authorization: Bearer KEY or x-api-key: KEY)"); break;
        case API_ERR_TOO_LARGE: snprintf(msg, sizeof(msg), "the request body is larger than %lld bytes", (long long)srv->opts.max_body); break;
        default: snprintf(msg, sizeof(msg), "%s", rq->err_msg); break;
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
    guard_state(srv->guard, rq->slot, CONN_WAITING); /* a keep-alive connection's next request */
    if (rq->status == 0 && toe != MHD_REQUEST_TERMINATED_COMPLETED_OK) rq->status = 499;
    if (rq->job) {
        /* a client that left early (a cut stream): its job leaves the batch at the next
         * step; wait for that, bounded, so the log line has its numbers so far */
        job_cancel(rq->job); /* no-op when done */
        job_wait_done(rq->job, JOB_SETTLE_S);
    }
    request_log(srv, rq);
    job_release(rq->job);
    /* only after a request read to its end: one answered at its headers may leave its body
     * unread in the socket, which is no head */
    bool next = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK && rq->keep_alive && rq->body_done && !rq->close;
    strbuf_free(&rq->body);
    hs_free(rq);
    *req_cls = NULL;
    if (next && srv->front) { /* the front checks the next head before libmicrohttpd reads it */
        int fd = conn_fd(c);
        if (fd >= 0 && gate_head(srv->front, fd) != GATE_PASS) shutdown(fd, SHUT_RDWR);
    }
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
    o->parallel = SERVER_DEFAULT_PARALLEL;
    o->step_tokens = SERVER_DEFAULT_STEP_TOKENS;
    o->max_queue = 16;
    o->max_body = SERVER_DEFAULT_MAX_BODY;
    o->bank_ram = -1;
    o->keepalive_s = 1.0;
    o->max_conns = 256;
    o->max_conns_per_ip = 64;
    o->idle_timeout_s = 15;
    o->request_timeout_s = 30;
    o->max_tokens_default = SERVER_DEFAULT_MAX_TOKENS;
}

/* The remote tier behind the disk tier (only with one: it copies what disk stores). An
 * unreachable Redis is no reason not to start: the tier retries by itself. */
static void remote_start(struct server *srv, char *desc, size_t desc_len)
{
    const struct server_opts *o = &srv->opts;
    struct bank_remote_opts ro;
    bank_remote_opts_default(&ro);
    ro.url = o->bank_remote;
    if (o->bank_remote_prefix) ro.prefix = o->bank_remote_prefix;
    if (o->bank_remote_timeout_ms > 0) ro.timeout_ms = (uint32_t)o->bank_remote_timeout_ms;
    struct hs_err err;
    hs_err_clear(&err);
    srv->remote = bank_remote_open(&ro, srv->disk, &err);
    if (!srv->remote) { /* only a malformed URL: refused before this point */
        log_warn("serve: the bank's remote tier is off: %s", err.msg);
        return;
    }
    srv->metrics.remote_live = srv->remote;
    struct bank_remote_stats st;
    bank_remote_stats_get(srv->remote, &st);
    size_t n = strlen(desc);
    snprintf(desc + n, desc_len - n, ", remote %s (%s%s)", st.url, st.prefix,
             st.up ? "" : ", unreachable: retrying");
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
    dopts.cap_bytes = bank_disk_cap_for(dir, o->bank_disk);
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
        if (o->bank_remote) remote_start(srv, desc, desc_len);
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

/* 127.0.0.0/8, ::1 or "localhost". */
static bool host_loopback(const char *host)
{
    uint8_t a[16];
    if (!strcmp(host, "localhost")) return true;
    if (inet_pton(AF_INET, host, a) == 1) return ip_loopback(AF_INET, a);
    return inet_pton(AF_INET6, host, a) == 1 && ip_loopback(AF_INET6, a);
}

static struct MHD_Daemon *http_start(struct server *srv, struct hs_err *err)
{
    const char *host = srv->opts.host;
    if (!strcmp(host, "localhost")) host = "127.0.0.1";
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    const struct sockaddr *sa;
    socklen_t sa_len;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC |
                     MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET;
    memset(&a4, 0, sizeof(a4));
    memset(&a6, 0, sizeof(a6));
    if (inet_pton(AF_INET, host, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)srv->opts.port);
        sa = (const struct sockaddr *)&a4;
        sa_len = sizeof a4;
    } else if (inet_pton(AF_INET6, host, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)srv->opts.port);
        sa = (const struct sockaddr *)&a6;
        sa_len = sizeof a6;
        flags |= MHD_USE_IPv6;
    } else {
        hs_err_set(err, HS_ERR_INVALID, "--host '%s' is not a numeric IPv4 or IPv6 address", srv->opts.host);
        return NULL;
    }
    srv->front = front_new(srv, sa, sa_len, err);
    if (!srv->front) return NULL;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_access, srv,
        MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, srv,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)srv->opts.idle_timeout_s,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)(srv->opts.max_conns + SERVER_CONN_RESERVE),
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(256 << 10),
        MHD_OPTION_END);
    if (!d || !front_start(srv->front, d)) {
        hs_err_set(err, HS_ERR_IO, "cannot start the HTTP server on %s port %d", srv->opts.host, srv->opts.port);
        if (d) MHD_stop_daemon(d);
        front_free(srv->front);
        srv->front = NULL;
        return NULL;
    }
    return d;
}

int server_run(const struct server_opts *o)
{
    struct server *srv = hs_calloc(1, sizeof(*srv));
    srv->opts = *o;
    if (srv->opts.max_body <= 0) srv->opts.max_body = SERVER_DEFAULT_MAX_BODY;
    if (srv->opts.n_threads < 1) srv->opts.n_threads = 1;
    if (srv->opts.max_conns < 1) srv->opts.max_conns = 256;
    if (srv->opts.max_conns_per_ip < 1) srv->opts.max_conns_per_ip = srv->opts.max_conns;
    if (srv->opts.idle_timeout_s < 1) srv->opts.idle_timeout_s = 15;
    if (srv->opts.request_timeout_s < 1) srv->opts.request_timeout_s = 30;
    sem_init(&srv->side, 0, SERVER_SIDE_MAX);
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

    if (!o->api_key && !o->insecure_no_key && !host_loopback(srv->opts.host)) {
        hs_err_set(&err, HS_ERR_INVALID, "--host %s without --api-key would let anyone who can reach it use the "
                   "model; set a key (--api-key or HEADSTART_API_KEY), or pass --insecure-no-key to mean it",
                   srv->opts.host);
        goto out;
    }
    if (o->bank_remote && (o->no_bank || o->no_bank_disk)) {
        hs_err_set(&err, HS_ERR_INVALID, "--bank-remote needs the disk tier (the remote tier holds copies of what it "
                   "stores): drop %s", o->no_bank ? "--no-bank" : "--no-bank-disk");
        goto out;
    }
    if (o->bank_remote && bank_remote_url_check(o->bank_remote, &err) != HS_OK) goto out;
    if (model_load(o->model_path, &srv->model, &err) || model_text_load(srv->model, &srv->text, &err)) goto out;
    for (int32_t id = 0; id < tokenizer_n_vocab(srv->text.tok); id++) {
        size_t len = 0;
        if (tokenizer_piece(srv->text.tok, id, &len) && (int64_t)len > srv->max_piece_len) srv->max_piece_len = (int64_t)len;
    }
    if (test_emit_load(&srv->text, &err)) goto out; /* TEST ONLY; off unless HEADSTART_TEST_EMIT */
    struct engine_opts eo;
    engine_opts_default(&eo);
    eo.n_threads = srv->opts.n_threads;
    eo.n_batch = o->step_tokens > 0 ? o->step_tokens : SERVER_DEFAULT_STEP_TOKENS; /* one step's tokens */
    if (engine_new(srv->model, &eo, &srv->engine, &err)) goto out;
    int64_t train = model_hparams(srv->model)->n_ctx_train;
    srv->n_ctx = o->n_ctx > 0 ? o->n_ctx : HS_MIN(train > 0 ? train : 32768, 32768);
    char bank_desc[4352];
    bank_start(srv, bank_desc, sizeof(bank_desc));
    if (batch_new(srv, &srv->batch, &err) ||
        sched_start(&srv->sched, o->max_queue, o->parallel, &batch_ops, srv->batch, srv, &err))
        goto out;
    atomic_store(&srv->ready, true);
    srv->guard = guard_new(&srv->opts);
    d = http_start(srv, &err);
    if (!d) goto out;
    int port = srv->front->port;
    bool v6 = strchr(srv->opts.host, ':') != NULL;
    char start[8192], packed[64] = "";
    uint64_t pb = engine_packed_bytes(srv->engine);
    char pbs[32];
    if (pb) snprintf(packed, sizeof packed, " (weights packed: %s)", hs_format_size(pb, pbs, sizeof pbs));
    snprintf(start, sizeof start, "headstart serve: model %s (%s, %s), context %lld, threads %d, kernels %s%s, "
             "parallel %d (steps of %lld tokens, sequence state %.1f GiB), max queue %d, %s, listening on http://%s%s%s:%d",
             srv->model_name, model_arch_name(model_hparams(srv->model)->arch), o->model_path,
             (long long)srv->n_ctx, srv->opts.n_threads, engine_kernel_variant(srv->engine), packed, o->parallel,
             (long long)engine_n_batch(srv->engine), (double)batch_budget(srv->batch) / (1 << 30), o->max_queue,
             bank_desc, v6 ? "[" : "", srv->opts.host, v6 ? "]" : "", port);
    /* the start line: on stdout, or with --log-format json one log object like every line */
    if (hs_log_get_format() == HS_LOG_FORMAT_JSON) log_info("%s", start);
    else printf("%s\n", start);
    fflush(stdout);
    if (!o->api_key && !host_loopback(srv->opts.host))
        log_warn("serve: listening on %s without --api-key (--insecure-no-key): anyone who can reach it can use "
                 "the model", srv->opts.host);

    int sig = 0;
    sigwait(&sigs, &sig);
    log_info("serve: signal %d, stopping", sig);
    front_quiesce(srv->front); /* no new connections */
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
    front_quiesce(srv->front); /* no gate left to hand libmicrohttpd a connection */
    if (d) MHD_stop_daemon(d);
    front_free(srv->front);
    guard_free(srv->guard);
    sched_free(&srv->sched);
    batch_free(srv->batch);
    log_debug("serve: engine stopped in %.3f s, http in %.3f s", t1 - t0, sys_time_sec() - t1);
    if (srv->disk) {
        bank_disk_flush(srv->disk); /* every queued write reaches the disk before exit */
        bank_remote_flush(srv->remote); /* and Redis, while it answers */
        bank_remote_close(srv->remote);
        bank_disk_close(srv->disk);
    }
    bank_free(srv->bank);
    engine_free(srv->engine);
    test_emit_free();
    model_text_free(&srv->text);
    model_free(srv->model);
    pthread_mutex_destroy(&srv->ids_mu);
    pthread_mutex_destroy(&srv->metrics.mu);
    sem_destroy(&srv->side);
    log_debug("serve: freed in %.3f s", sys_time_sec() - t0);
    hs_free(name);
    hs_free(srv);
    return status;
}
