/*
 * server_int.h — private to src/server: the server object, jobs (one parsed request shared
 * by its connection thread and the engine thread), the scheduler and the metrics.
 *
 * A job's life (sched.c's design note has the invariants):
 *
 *   new (connection thread: body parsed and checked)
 *    └─submit─> queued ──pop──> running ──job_done──> done ──both sides released──> freed
 *        │          └─ cancelled before it ran: skipped (done, 503 body)
 *        └─ queue full: 429, never queued
 *
 * The engine thread only appends to a job's byte queue and never waits on a connection;
 * a connection thread waits on the job's condition variable and polls its own socket for a
 * hang-up, which cancels the job (the engine stops at its next token).
 */
#ifndef HS_SERVER_INT_H
#define HS_SERVER_INT_H

#include "api/api.h"
#include "base/base.h"
#include "engine/engine.h"
#include "server/server.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct server;

struct job {
    /* Set by the connection thread before submit; read-only afterwards. */
    struct api_request req;       /* the parsed request, owned (the only copy of it) */
    uint64_t seed;                /* the sampling seed: the request's, else one per request */
    char id[API_ID_MAX];
    int64_t created;              /* unix seconds */
    double t_submit;              /* sys_time_sec() at submit */

    /* Shared; under mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct strbuf out;            /* bytes for the client; out_off of them already taken */
    size_t out_off;
    bool started;                 /* output has begun: a stream's status is 200 from now */
    bool done;
    int status;                   /* HTTP status of a non-stream body or an early error */
    int refs;
    atomic_bool cancelled;        /* the client went away or the server is stopping */
    /* what the engine did, for the request log (set before job_done) */
    bool ran;
    int64_t n_prompt, n_cached, n_generated;
    enum bank_source cache_source;
    enum session_stop stop_reason;
    double ttft_ms;               /* < 0: no token */
    char first_logits[65];        /* the report's first_logits_sha256 ("" none) */
    bool capped;                  /* max_tokens came from --max-tokens-default */
};

/* ---- jobs (sched.c) ---- */

struct job *job_new(void);                        /* refs = 1 */
void job_retain(struct job *j);
void job_release(struct job *j);                  /* frees at zero; NULL is a no-op */
/* Engine side: append bytes for the client (started = true) and wake the reader. */
void job_emit(struct job *j, const char *data, size_t len);
/* Engine side: the request is over; `status` is the HTTP status when nothing was sent yet. */
void job_done(struct job *j, int status);
bool job_cancelled(struct job *j);
void job_cancel(struct job *j);

/* The client's socket, as a connection thread waiting on its job watches it. An EOF is
 * a close or a half-close (shutdown(SHUT_WR) after the request: the same FIN on the wire);
 * `probe` says how to tell them apart: write something a reading client skips, and a
 * closed one answers with a reset. */
enum peer_probe {
    PEER_PROBE_NONE = 0,      /* EOF is gone (HTTP/1.0: no interim responses) */
    PEER_PROBE_INTERIM,       /* no status line yet: write a 102 Processing (HTTP/1.1) */
    PEER_PROBE_SSE,           /* an SSE stream: the caller writes a comment (JOB_WAIT_PROBE) */
};
struct peer {
    int fd;                   /* < 0: not watched */
    enum peer_probe probe;
    bool half_closed;         /* EOF seen and probed: only a reset or an error is gone now */
};

enum job_wait_result { JOB_WAIT_READY = 0, JOB_WAIT_GONE, JOB_WAIT_PROBE };
/* Connection side: wait until the job has output not yet taken (want_output) or is done,
 * polling p's socket every 50 ms (p NULL: no polling). GONE (the client hung up) cancels the
 * job; a job cancelled otherwise is waited for, as it always ends done. PROBE: EOF on an
 * SSE stream; the caller sends an SSE comment (p->half_closed is set) and waits again. */
enum job_wait_result job_wait(struct job *j, bool want_output, struct peer *p);
/* Connection side: move up to max pending bytes into buf; *eof when done and drained. */
size_t job_take(struct job *j, char *buf, size_t max, bool *eof);
/* Connection side: wait up to max_s seconds for a submitted job to be done (a cancelled one
 * leaves the batch at the next step); false when it was never submitted or is not done. */
bool job_wait_done(struct job *j, double max_s);

/* ---- request heads (reqhead.c) ---- */

enum reqhead_verdict { REQHEAD_MORE = 0, REQHEAD_OK, REQHEAD_BAD };
struct reqhead {
    enum reqhead_verdict verdict;
    int code;                     /* BAD: HS_ERR_FORMAT (400), API_ERR_HEADERS_TOO_LARGE (431),
                                     API_ERR_HTTP_VERSION (505) */
    char msg[256];                /* BAD: what is wrong, for the error body */
    bool anthropic;               /* the target is under /v1/messages: Anthropic's error shape */
    bool http11;                  /* the request line said HTTP/1.1 */
    size_t len;                   /* OK: the head's bytes, empty line included */
};
/* Judge the first n bytes of a connection's next request (n may end anywhere): a complete
 * valid head (OK), not yet complete but valid so far (MORE), or broken (BAD), as
 * libmicrohttpd would judge it. limit: the most bytes a head may take. */
void reqhead_check(const char *buf, size_t n, size_t limit, struct reqhead *h);

/* ---- scheduler (sched.c): a bounded FIFO and the one engine thread ---- */

/* A job finished with an error in the API's shape: a whole body with its status, or an
 * in-stream error once the response r has started. Ends with job_done. */
void job_fail(struct job *j, struct api_response *r, int code, const char *msg);
/* A whole body that goes out with its status (non-stream answers and early errors). */
void job_body(struct job *j, const struct strbuf *b);
extern const char job_cancelled_msg[];

enum sched_admit {
    SCHED_ADMIT_RUNNING = 0,  /* it runs now: the ops own the scheduler's job reference */
    SCHED_ADMIT_DONE,         /* it ended at once (job_done was called) */
    SCHED_ADMIT_WAIT,         /* no room yet: leave it at the queue's head (only while
                                 others run) */
};

/* What the engine thread does with jobs (batch.c for the server). */
struct sched_ops {
    /* Admit j (engine thread); `running` others run. */
    enum sched_admit (*admit)(void *ctx, struct job *j, int running);
    /* One step over the running jobs (every one of them once `stopping`: cancel them);
     * returns how many still run. Each job that ends gets job_done and its reference
     * released. */
    int (*step)(void *ctx, bool stopping);
};

struct sched {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct job **ring;            /* capacity cap = max_queue + parallel */
    int cap, head, n;
    int parallel;                 /* jobs running at once at most */
    int max_queue;                /* jobs that may wait beyond the free slots */
    bool blocked;                 /* the head waits for room (SCHED_ADMIT_WAIT) */
    int running;                  /* admitted and not ended (an admission in progress too) */
    struct job *admitting;        /* the job in ops.admit now (sched_stop cancels it) */
    bool stopping;
    pthread_t thread;
    bool started;
    struct sched_ops ops;
    void *ctx;
    struct server *srv;           /* NULL in tests: no metrics, no model watch */
};

/* --max-queue N: at most N requests wait while `parallel` run (N = 0: a request is accepted
 * only when a slot is free). */
int sched_start(struct sched *s, int max_queue, int parallel, const struct sched_ops *ops, void *ctx,
                struct server *srv, struct hs_err *err);
/* Takes a reference on success. API_ERR_QUEUE_FULL, or API_ERR_OVERLOADED when stopping. */
int sched_submit(struct sched *s, struct job *j);
int sched_depth(struct sched *s);                 /* waiting + running */
void sched_counts(struct sched *s, int *running, int *waiting);
/* Stop: refuse new jobs (API_ERR_OVERLOADED from now on), cancel every queued and running
 * one, join the engine thread. */
void sched_stop(struct sched *s);
/* After sched_stop, once no thread can submit any more. Safe on a zeroed struct. */
void sched_free(struct sched *s);

/* ---- the server's engine thread (batch.c): --parallel requests, one forward step at a time */

struct batch;
/* The server's sched_ops and their state (engine, bank, --parallel, --step-tokens,
 * --seq-ram from srv). Engine thread only, after creation. */
int batch_new(struct server *srv, struct batch **out, struct hs_err *err);
void batch_free(struct batch *b);
uint64_t batch_budget(const struct batch *b);     /* --seq-ram in bytes */
extern const struct sched_ops batch_ops;

/* ---- metrics (metrics.c) ---- */

#define METRICS_TTFT_BUCKETS 10

/* Where a cancelled request stopped (its client went away, or the server was stopping). */
enum metrics_cancel_stage {
    METRICS_CANCEL_QUEUE = 0,     /* before its prefill began: waiting, or while rendered / restored */
    METRICS_CANCEL_PREFILL,       /* between prefill chunks: the prefill was cut part-way */
    METRICS_CANCEL_GENERATION,    /* after the prefill: during generation */
    METRICS_CANCEL_COUNT
};

struct metrics {
    pthread_mutex_t mu;
    int64_t requests[16][6];      /* [route][status class 0..5: 1xx..5xx, 0 other] */
    int64_t prompt_tokens, cached_tokens, generated_tokens;
    double prefill_seconds, decode_seconds;
    int64_t ttft_counts[METRICS_TTFT_BUCKETS + 1];
    double ttft_sum;
    int64_t ttft_n;
    int64_t cancelled[METRICS_CANCEL_COUNT];
    int64_t cancelled_prefill_tokens; /* prompt tokens the cut prefills left uncomputed */
    int64_t media_placeholders;   /* tool-result images/documents replaced by text (api rule 4) */
    /* the step loop (batch.c) */
    int64_t steps, step_tokens, prefill_tokens, decode_tokens;
    double step_seconds;
    int64_t head_parked;          /* requests that waited for another's head */
    int64_t head_shared, head_shared_tokens; /* ... and restored it: head tokens not computed */
    uint64_t seq_bytes, seq_budget; /* --seq-ram: reserved by the running requests, the budget */
    /* the model's identity and files (watch.c) */
    const atomic_int *identity_state; /* enum watch_state; NULL: none (tests) */
    bool model_changed;           /* a model file changed in place under the server */
    int64_t bank_off[2];          /* requests served without the bank: [0] model_changed,
                                     [1] model_identity_unknown (no disk tier yet) */
    /* the bank's numbers, copied by the engine thread (the bank's owner) after each job */
    bool have_bank, have_disk;
    struct bank_stats bank;
    struct bank_disk_stats disk;
    struct bank_disk *disk_live; /* borrowed: metrics_write reads its stats at each scrape
                                  * (its writer thread changes them between jobs) */
    struct bank_remote *remote_live; /* borrowed, the same for the remote tier; NULL none */
};

void metrics_request(struct metrics *m, int route, int status);
/* n media parts of an accepted request's tool results were replaced by placeholders. */
void metrics_media(struct metrics *m, int n);
void metrics_tokens(struct metrics *m, int64_t prompt, int64_t cached, int64_t generated,
                    double prefill_s, double decode_s, double ttft_s);
/* Count a cancelled request: r NULL, one skipped before it ran; otherwise its session's
 * report, counted only when its stop_reason is cancelled, at the stage its numbers show
 * (tokens generated: generation; a prefill cut short: prefill, with the tokens it left;
 * no prefill: queue). */
void metrics_cancel(struct metrics *m, const struct session_report *r);
/* Prometheus text exposition; route_names has n_routes entries. */
void metrics_write(struct metrics *m, const char *const *route_names, int n_routes,
                   int running, int waiting, struct strbuf *out);

/* ---- the request log (reqlog.c) ---- */

/* One finished request. Strings are borrowed; NULL (or ran false) leaves a field out. */
struct reqlog {
    const char *id;                /* "chatcmpl-…", "msg_…", "resp_…"; NULL before one was given */
    const char *api;               /* "chat", "messages", "responses", "count_tokens", or the route */
    const char *model;
    int status;                    /* the HTTP status sent */
    bool ran;                      /* the engine ran it: the token fields are set */
    int64_t prompt_tokens, cached_tokens, generated_tokens;
    const char *cache_source;      /* "ram", "disk", "none" */
    double ttft_ms;                /* < 0: no token was generated */
    double total_ms;               /* from the request's arrival to its last byte */
    const char *stop_reason;       /* "stop", "length", "stop_sequence", "cancelled", NULL */
    const char *first_logits;      /* sha256 of the first token's logits row; NULL: none */
    const char *client;            /* "ADDR:PORT" */
    const char *error;             /* a failed request's message */
    const char *body;              /* only with --log-bodies: the request body (user data) */
    size_t body_len;
};

/* The text line and the JSON members of r (appended to both; the design note has them). */
void reqlog_format(const struct reqlog *r, struct strbuf *text, struct strbuf *json);
/* reqlog_format, then hs_log_record at level info. */
void reqlog_write(const struct reqlog *r);

/* ---- the model's identity and files (watch.c) ---- */

enum watch_state { WATCH_OFF = 0, WATCH_PENDING, WATCH_KNOWN, WATCH_FAILED };

struct model_watch {
    pthread_t thread;
    bool thread_started;
    atomic_bool stop;
    atomic_int state;             /* enum watch_state */
    struct model_identity id;     /* written before state becomes KNOWN */
    char error[HS_ERR_MSG_MAX];   /* written before state becomes FAILED */
    char *cache_dir;              /* BANK_DIR/model-ids, owned */
    uint64_t sync_max;            /* hashed at start when at most this many bytes are left
                                     after the cache; 0: WATCH_SYNC_BYTES (256 MiB). Set
                                     before sched_start (tests) */
    bool applied;                 /* engine thread: the engine has the identity */
    bool changed_logged;          /* engine thread */
};

struct server;
/* Before the engine thread starts (sched_start): the identity from the cache or a short
 * hash, else a hashing thread. Nothing to do without an engine, a model or a disk tier. */
void watch_start(struct server *srv);
/* Engine thread, before each job: give the engine an identity the thread finished. */
void watch_poll(struct server *srv);
/* Engine thread, after each request (r NULL when it failed): log a model file changed
 * in place once, set the gauge, count r's bank_off. */
void watch_report(struct server *srv, const struct session_report *r);
/* Stop and join the hashing thread (sched_stop); safe when none was started. */
void watch_stop(struct server *srv);

/* ---- TEST ONLY: scripted generation (test_emit.c) ---- */

/* The environment variable naming the script file (a JSON array of strings). */
#define TEST_EMIT_ENV "HEADSTART_TEST_EMIT"
/* Read TEST_EMIT_ENV once (serve's start): unset, nothing happens; set, each generation
 * emits the next scripted text and an end of turn instead of sampling (and a warning is
 * logged). Errors: the file unreadable or not a non-empty array of strings. */
int test_emit_load(const struct model_text *mt, struct hs_err *err);
/* The next script's ids (owned by the caller, *n of them), NULL when off. */
int32_t *test_emit_take(int64_t *n);
void test_emit_free(void);

/* ---- the server ---- */

struct server {
    struct server_opts opts;      /* strings borrowed from the caller of server_run */
    struct model *model;
    struct engine *engine;
    struct model_text text;
    struct bank *bank;            /* NULL: --no-bank (everything computed); engine thread only */
    struct bank_disk *disk;       /* the bank's disk tier; NULL: none */
    struct bank_remote *remote;   /* its remote tier behind disk; NULL: none */
    int64_t n_ctx;
    const char *model_name;
    int64_t t_start;              /* unix seconds at start ("created" of /v1/models) */
    struct sched sched;
    struct batch *batch;          /* the engine thread's running requests (batch.c) */
    struct model_watch watch;     /* the model's identity (watch.c) */
    struct metrics metrics;
    pthread_mutex_t ids_mu;
    struct api_ids ids;
    atomic_bool ready;
    atomic_int n_inflight;        /* requests between their first byte and their end */
    struct conn_guard *guard;     /* http.c: open connections, their deadlines and limits */
    struct front *front;          /* http.c: the listening socket and the request-head check */
    int64_t max_piece_len;        /* the longest token's bytes: tokens >= bytes / this */
    sem_t side;                   /* render + tokenize on connection threads (count_tokens, a
                                     large prompt's context check): SERVER_SIDE_MAX at once */
};

#define SERVER_SIDE_MAX 2

#endif
