/*
 * server — `headstart serve`: HTTP with libmicrohttpd (only server/http.c touches it),
 * routes, auth, limits, SSE streaming, and the scheduler: one engine thread owning the
 * model and all sequences, running up to --parallel requests at once (one forward step
 * for all of them), a bounded FIFO queue, the bank between requests. A model's
 * tokenizer and chat template come from the text module (text/text.h).
 *
 * Design note (contract; docs/DESIGN.md §6):
 *   1. Nothing HTTP does ever blocks the engine thread: each connection thread waits only
 *      on its own request's byte queue (thread-per-connection; see http.c for why), and the
 *      engine thread only appends to those queues.
 *   2. Bad input gets an error in the API's own shape, never a crash.
 *
 * Status: `headstart serve` runs every generation as the steps of session.c, batched by
 * batch.c (the bank in RAM, optionally the disk tier), with stop strings, tool_choice and
 * keep-alives during long prefills; tests/e2e/server_load.sh is the bounded load test,
 * tests/e2e/concurrent.sh the exactness test under load.
 */
#ifndef HS_SERVER_H
#define HS_SERVER_H

#include "api/api.h"
#include "base/base.h"
#include "model/model.h"
#include "text/text.h"
#include "tokenizer/tokenizer.h"

#include <stdint.h>

/* ---- `headstart serve` (http.c, sched.c) ---------------------------------------------- */

#define SERVER_MAX_PARALLEL 256
#define SERVER_DEFAULT_PARALLEL 8
#define SERVER_DEFAULT_STEP_TOKENS 256

struct server_opts {
    const char *model_path;       /* borrowed */
    const char *host;             /* bind address; default "127.0.0.1" */
    int port;                     /* default 8080; 0: any free port (printed) */
    const char *api_key;          /* NULL: no authentication */
    int n_threads;                /* engine threads; default: online cores */
    int64_t n_ctx;                /* context per request; 0: min(model's, 32768) */
    int parallel;                 /* --parallel: requests computed at once (sequences per
                                     forward step); default SERVER_DEFAULT_PARALLEL */
    int64_t step_tokens;          /* --step-tokens: most tokens in one forward step; default
                                     SERVER_DEFAULT_STEP_TOKENS */
    int64_t seq_ram;              /* --seq-ram: bytes of sequence state (KV + GDN) the running
                                     requests may reserve; 0: a quarter of RAM */
    int max_queue;                /* requests that may wait while --parallel run; default 16 */
    const char *model_name;       /* served name; NULL: the model file's base name */
    int64_t max_body;             /* request body limit in bytes; default 4 MiB */
    int64_t bank_ram;             /* the bank's RAM budget in bytes; < 0: a quarter of RAM;
                                     0: unlimited */
    bool no_bank;                 /* --no-bank: every prompt computed (both tiers off) */
    bool no_head_anchor;          /* --no-head-anchor */
    const char *bank_dir;         /* the disk tier's directory; NULL: bank_disk_default_dir() */
    int64_t bank_disk;            /* the disk tier's cap in bytes; 0: 20% of the free space
                                     there, at most 64 GiB */
    bool no_bank_disk;            /* --no-bank-disk: RAM only */
    const char *bank_remote;      /* --bank-remote URL: the remote tier (Redis); NULL none */
    const char *bank_remote_prefix; /* --bank-remote-prefix: key namespace; NULL "headstart" */
    int bank_remote_timeout_ms;   /* --bank-remote-timeout: every Redis call; 0 = 1000 */
    double keepalive_s;           /* --keepalive: a stream quiet this long (a prefill, tokens
                                     with no text yet) gets a keep-alive; default 1.0 */
    /* Connections (http.c's "connection guard"): */
    int max_conns;                /* --max-connections: open connections served; default 256
                                     (a reserve of SERVER_CONN_RESERVE more answers only /,
                                     /health and /metrics) */
    int max_conns_per_ip;         /* --max-connections-per-ip: default 64 */
    int idle_timeout_s;           /* --idle-timeout: no byte moving this long closes a
                                     connection (keep-alive idle included); default 15 */
    int request_timeout_s;        /* --request-timeout: a request's headers and body must
                                     arrive within this many seconds of the connection's
                                     opening or of the previous response's end; default 30 */
    /* Who may talk to it (browsers, DNS rebinding): */
    const char *allow_hosts;      /* --allow-host: more Host names accepted, comma separated
                                     ("*": any); NULL: none */
    const char *cors_origins;     /* --cors-origin: browser origins allowed, comma separated
                                     ("*": any); NULL: none */
    bool insecure_no_key;         /* --insecure-no-key: serve a non-loopback address with no
                                     API key */
    int64_t max_tokens_default;   /* --max-tokens-default: the output cap of a request that
                                     sets none or more (0: none, up to the context); 1024 */
    bool log_json;                /* --log-format json: every log line one JSON object */
    bool log_bodies;              /* --log-bodies: request bodies in the request log (user data) */
};

#define SERVER_CONN_RESERVE 16
#define SERVER_DEFAULT_MAX_BODY (4 << 20)
/* --max-tokens-default: the output cap when a request sets none or a larger one. A model
 * stuck in a loop then stops within about a minute on a small CPU (0.8B decodes 8-25
 * tokens/s on 2 cores) instead of holding the engine to the end of the context. */
#define SERVER_DEFAULT_MAX_TOKENS 1024

void server_opts_default(struct server_opts *o);
/* Load the model, start the engine thread and the HTTP server, print one start line and
 * serve until SIGINT or SIGTERM. Returns a process exit status (0 on a clean stop). */
int server_run(const struct server_opts *o);

/* ---- the request path (session.c) ------------------------------------------------------
 * One request as named steps, each small (session.c's design note): prompt (render,
 * tokenize, anchors, limits) -> restore (bank_restore over RAM and disk) -> prefill (in
 * chunks of any size, captures at planned positions) -> generate (one token per step, text
 * out) -> finish (bank_store of prompt + generated). The engine work of a step is an item
 * (session_work) that a scheduler batches with other requests' (server/batch.c); session_run
 * drives the steps for one request with callbacks (`headstart replay`). */
#include "bank/bank.h"
#include "engine/engine.h"

#define SESSION_DEFAULT_MAX_TOKENS 256

/* Why generation ended (session_stop_name gives the report's and the log's names). */
enum session_stop {
    SESSION_STOP_LENGTH = 0,       /* "length": the output cap */
    SESSION_STOP_END,              /* "stop": a stop id (included in output_ids), or a
                                      blocked tool call under tool_choice none */
    SESSION_STOP_SEQUENCE,         /* "stop_sequence": a request stop string (the text ends
                                      before it; the token that completed it is in output_ids) */
    SESSION_STOP_CANCELLED,        /* "cancelled": a callback returned false / session_cancel */
    SESSION_STOP_COUNT
};
const char *session_stop_name(enum session_stop s);

/* Why a request ran without the bank although the server has one. */
enum session_bank_off {
    SESSION_BANK_ON = 0,
    SESSION_BANK_OFF_MODEL_CHANGED,    /* "model_changed": a model file changed in place: no tier */
    SESSION_BANK_OFF_IDENTITY_UNKNOWN, /* "model_identity_unknown": the engine has no
                                          persistent fingerprint yet: no disk tier */
    SESSION_BANK_OFF_COUNT
};
const char *session_bank_off_name(enum session_bank_off o); /* NULL for SESSION_BANK_ON */

/* What a request looks like once the bank lookup and restore are done, before the prefill
 * (the start hook's argument). */
struct session_start {
    int64_t prompt_tokens;
    int64_t cached_tokens;         /* restored from the bank (0 = computed from scratch) */
    bool thinking;                 /* the generation prompt ends in an open <think> */
    const char *forced_text;       /* text appended to the generation prompt that belongs
                                      to the answer (a forced tool call's start, see
                                      session.c); "" when none. Feed it to the response's
                                      parser before any generated text */
    size_t forced_len;
};

/* Called once per request before the prefill; false = stop (cancelled: no prefill, no
 * generation, nothing banked). */
typedef bool (*session_start_fn)(void *ctx, const struct session_start *st);
/* Called after every generated token with the complete UTF-8 text it finished (len may be
 * 0: a stop id, a partial character), and once more with any text left at the end; false =
 * stop now (cancelled: what was generated so far is still banked). */
typedef bool (*session_text_fn)(void *ctx, const char *text, size_t len);
/* Called between prefill chunks (done of total prompt tokens computed, restored ones
 * included); false = stop (cancelled: no generation, nothing banked). */
typedef bool (*session_prefill_fn)(void *ctx, int64_t done, int64_t total);

struct session_opts {
    int64_t max_tokens;            /* > 0: generate at most this many; 0: the request's
                                      max_tokens, else SESSION_DEFAULT_MAX_TOKENS */
    struct sampler_opts sampling;  /* temperature 0 = greedy */
    struct bank_disk *disk;        /* the bank's disk tier; NULL = none. Used only with a
                                      RAM bank: lookup falls through RAM -> disk (a disk hit
                                      is promoted into RAM), banked snapshots are also put
                                      to disk (queued, never blocking); only once the
                                      engine has its persistent fingerprint (the model
                                      identity, engine.h), else skipped (bank_off). Both
                                      tiers are skipped while model_files_check fails */
    struct bank_remote *remote;    /* the remote tier (Redis); NULL = none. Asked after RAM
                                      and disk, for a deeper point only; fed by the disk
                                      tier's writer, so it needs the persistent fingerprint
                                      as disk does */
    int64_t n_ctx;                 /* > 0: the context: a prompt of n_ctx tokens or more is
                                      API_ERR_CONTEXT, output is cut at n_ctx - prompt */
    bool ignore_eos;               /* stop ids do not end generation (to max_tokens) */
    unsigned text_flags;           /* the generated text's tokenizer decode flags (0: all) */
    session_start_fn on_start;     /* session_run: NULL = none; called with its ctx */
    session_prefill_fn on_prefill; /* session_run: NULL = the prefill is one step; otherwise
                                      it runs in chunks of about SESSION_PREFILL_CHUNK_S
                                      seconds each (sized from the measured rate; the
                                      logits are the same, docs/DESIGN.md §4), the
                                      hook called after each but the last */
};

#define SESSION_PREFILL_CHUNK_S 0.5

/* What one request did (session_report_json writes it as one JSON object). */
struct session_report {
    int64_t prompt_tokens;
    int64_t cached_tokens;         /* restored from the bank (s); 0 = computed from scratch */
    int64_t match_len;             /* longest common prefix with the bank's tree */
    int64_t head_tokens;           /* chat_head_length of the prompt (0 = none) */
    int64_t user_start;            /* position of the last <|im_start|>user; -1 = none */
    int64_t genprompt_start;       /* position of the last <|im_start|>; -1 = none */
    int n_captures;                /* snapshots taken during the prefill */
    int64_t prefilled_tokens;      /* prompt tokens the prefill computed, from cached_tokens
                                      on: prompt - cached when it ran to the end, fewer when
                                      a cancel stopped it between chunks, 0 when it never
                                      began (an error or a cancel from the start hook) */
    bool banked;                   /* the path went into the bank (a failed insert is
                                      logged, never fails the request) */
    bool bank_used;                /* the bank was looked up (restore_reason is its answer;
                                      "no_bank" in the JSON otherwise) */
    enum bank_source cache_source; /* where cached_tokens came from */
    enum bank_reason restore_reason;
    enum session_stop stop_reason;
    char *stop_sequence;           /* owned: the stop string that matched, else NULL */
    char *forced_text;             /* owned: session_start's forced_text, NULL when none */
    int32_t *output_ids;           /* owned */
    int64_t n_output;
    char *text;                    /* owned: the generated text (stop ids not included) */
    size_t text_len;
    char first_logits_sha256[65];  /* of the n_vocab f32 LE logits row of the first token */
    double prefill_ms;             /* bank lookup + restore + prefill */
    double ttft_ms;                /* from the start of the prompt step (render, tokenize
                                      included) to the first token */
    double total_ms;
    int64_t remote_discarded;      /* remote values that failed verification in this lookup */
    int64_t disk_discarded;        /* disk entries that failed verification in this lookup
                                      (deleted by the tier; the request went on cold or from
                                      a shallower point) */
    int n_disk_puts;               /* snapshots queued for the disk tier after the request */
    enum session_bank_off bank_off;/* why the bank was not used, SESSION_BANK_ON when it was */
};

/* The engine's sampler defaults as api_request_parse's defaults for absent fields, and
 * the sampler options of a parsed request (its fields over the defaults, the given seed). */
void session_sampling_defaults(struct api_sampling *out);
void session_sampling_opts(const struct api_sampling *a, uint64_t seed, struct sampler_opts *so);

struct session;

/* The prompt step: render the request through the model's template (a forced tool call's
 * start appended), tokenize, find the head / last user turn / generation prompt, check the
 * context, set up the sequence and sampler. bank NULL = no bank (everything computed).
 * Errors: no chat template (HS_ERR_UNSUPPORTED), an empty prompt (HS_ERR_INVALID), a prompt
 * of n_ctx tokens or more (API_ERR_CONTEXT, in the API's own overflow wording), invalid
 * sampling options; *out is then NULL. rq and o are copied from (rq's strings and JSON are
 * borrowed until session_free). */
int session_new(struct engine *e, const struct model_text *mt, struct bank *bank, const struct api_request *rq,
                const struct session_opts *o, struct session **out, struct hs_err *err);
/* The prompt step for a prompt given as token ids (`headstart run`): no template, no stop
 * strings, no context wording. mt (borrowed) may be NULL: then no stop ids and no text.
 * Errors: an empty prompt, one of n_ctx tokens or more (HS_ERR_LIMIT), invalid sampling. */
int session_new_ids(struct engine *e, const struct model_text *mt, struct bank *bank, const int32_t *ids, int64_t n,
                    const struct session_opts *o, struct session **out, struct hs_err *err);
/* The restore step: the model files checked, then bank_restore (RAM, then disk for a deeper
 * point) into the sequence. An error is the engine's or the bank's key space. */
int session_restore(struct session *s, struct hs_err *err);
/* The numbers the start hook gets (valid after session_restore, while s lives). */
const struct session_start *session_start_info(const struct session *s);
/* The prefill step: compute up to max_tokens more prompt tokens (<= 0: all that are left),
 * capturing planned snapshots on the way; the first call plans them. *done = true once the
 * whole prompt is in and the first logits are ready. */
int session_prefill(struct session *s, int64_t max_tokens, bool *done, struct hs_err *err);
/* The engine work the next step needs, as one item of engine_forward_batch (a scheduler
 * batches the items of several sessions into one forward): a prefill chunk of at most
 * max_tokens (<= 0: the rest; the first call plans the captures), the previous generated
 * token (its logits row asked for), or, once generation ended by itself, the last token fed
 * for the bank (no row; session_finish then skips its own feed). Returns the item's tokens;
 * 0: the next step needs no forward (session_generate samples from the logits it has, or
 * session_finish may run). */
int64_t session_work(struct session *s, int64_t max_tokens, struct engine_item *it);
/* The item of the last session_work went through the engine; row: its logits row (NULL:
 * engine_forward already wrote it in place). Advances the prefill or clears the pending token. */
void session_work_done(struct session *s, const float *row);
/* Generation can sample now (the prompt is in and the last token fed). */
bool session_ready_to_sample(const struct session *s);
/* The session will still compute the snapshot at the end of its head (*head: the head's
 * tokens): another session with the same head may wait for it instead of computing it too. */
bool session_head_pending(const struct session *s, int64_t *head);
const int32_t *session_prompt_ids(const struct session *s);
/* Generation ended by itself (a stop, the cap): what is left is session_finish. */
bool session_generation_over(const struct session *s);
/* The whole prompt is in (restored + computed). */
bool session_prefill_done(const struct session *s);
/* The output cap (max_tokens as the session applies it). */
int64_t session_output_cap(const struct session *s);
/* sys_time_sec() when session_new began: the start the report's ttft_ms and total_ms count from. */
double session_started(const struct session *s);
/* Bank the prompt head now (its KV rows and the head snapshot, once captured), for sessions
 * waiting for it; session_finish stores the rest of the path later. A no-op before the head
 * capture, after a first call, or without a bank. */
int session_store_head(struct session *s, struct hs_err *err);
/* Bytes of state the session may hold at most: KV rows of prompt + output cap, GDN state,
 * planned snapshots, logits (what a scheduler reserves at admission). */
uint64_t session_state_bytes(const struct session *s);
/* Prompt tokens computed or restored so far, of session_prompt_tokens. */
int64_t session_prefill_pos(const struct session *s);
int64_t session_prompt_tokens(const struct session *s);
/* The generate step: one token (the previous one is fed first). Its finished text is
 * appended to `piece` (maybe nothing) and *emit says whether the caller hands the piece on
 * (not for a stop id); *done once generation has ended (stop id, stop string, the cap).
 * After *done, session_generate_end. */
int session_generate(struct session *s, struct strbuf *piece, bool *emit, bool *done, struct hs_err *err);
/* Generation ended by itself (not cancelled): the text still held back (a partial
 * character, a possible stop string) is appended to `piece`. */
void session_generate_end(struct session *s, struct strbuf *piece);
/* Stop the request where it is (stop reason "cancelled"). A cancel before the prefill
 * completed banks nothing; one during generation still banks what was computed. */
void session_cancel(struct session *s);
/* The finish step: the last token fed, then bank_store of prompt + generated with the
 * captured snapshots and one at the end (RAM, then queued for disk). A failed store is
 * logged and only loses reuse. */
int session_finish(struct session *s, struct hs_err *err);
/* The report so far (owned by s). */
const struct session_report *session_report(const struct session *s);
/* The ids generated so far, session_report's n_output of them (owned by s). */
const int32_t *session_output_ids(const struct session *s);
/* Move the report out (the caller frees it with session_report_free). */
void session_take_report(struct session *s, struct session_report *out);
void session_free(struct session *s); /* NULL is a no-op */

/* Run one request through every step (the callbacks as session_opts says). Errors: those
 * of the steps; on error *out holds nothing to free. A cancel (a callback returned false)
 * is HS_OK with stop_reason cancelled. on_text and ctx may be NULL. */
int session_run(struct engine *e, const struct model_text *mt, struct bank *bank, const struct api_request *rq,
                const struct session_opts *o, session_text_fn on_text, void *ctx,
                struct session_report *out, struct hs_err *err);
void session_report_free(struct session_report *r); /* safe on a zeroed struct */
/* Append the report as one compact JSON object (no newline). */
void session_report_json(const struct session_report *r, struct strbuf *out);

#endif
