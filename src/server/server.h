/*
 * server — `headstart serve`: HTTP with libmicrohttpd (only server/http.c touches it),
 * routes, auth, limits, SSE streaming, and the scheduler: one engine thread owning the
 * model and all sequences, a bounded FIFO queue, the bank between requests. It is also
 * the one module that may see every other one, so the glue that joins a model's files to
 * the tokenizer and the chat template lives here (model_text.c).
 *
 * Design note (contract; docs/DESIGN.md §6):
 *   1. Nothing HTTP does ever blocks the engine thread: each connection thread waits only
 *      on its own request's byte queue (thread-per-connection; see http.c for why), and the
 *      engine thread only appends to those queues.
 *   2. Bad input gets an error in the API's own shape, never a crash.
 *
 * Status: `headstart serve` runs every generation through session_run (the bank in RAM,
 * optionally the disk tier), with stop strings, tool_choice and keep-alives during long
 * prefills; tests/e2e/server_load.sh is the bounded load test. The real-client and demo
 * parts of [F6] are open.
 */
#ifndef HS_SERVER_H
#define HS_SERVER_H

#include "api/api.h"
#include "base/base.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

#include <stdint.h>

/* A model's text side: tokenizer, chat template and the token ids the bank and the
 * scheduler care about. Built from tokenizer.json + tokenizer_config.json (or
 * chat_template.jinja) for a Hugging Face directory, from tokenizer.ggml.* and
 * tokenizer.chat_template for a GGUF file. */
struct model_text {
    struct tokenizer *tok;
    struct chat_template *tmpl;   /* NULL when the model has no chat template */
    char *tmpl_source;            /* its source, NULL when none */
    int32_t im_start_id;          /* -1 when the vocabulary has no <|im_start|> */
    int32_t im_end_id;            /* -1 when absent */
    int32_t eos_id;               /* <|endoftext|> (or the declared eos), -1 when absent */
    int32_t system_ids[8];        /* the ids of "system" (head detection) */
    int n_system_ids;
    int32_t stop_ids[4];          /* generation stops at any of these */
    int n_stop_ids;
    char nfc;                     /* 1 when NFC normalisation is applied */
};

/* Load the tokenizer and template of a loaded model. Errors name the file and field. */
int model_text_load(const struct model *m, struct model_text *out, struct hs_err *err);
void model_text_free(struct model_text *t); /* safe on a zeroed struct */

/* ---- `headstart serve` (http.c, sched.c) ---------------------------------------------- */

struct server_opts {
    const char *model_path;       /* borrowed */
    const char *host;             /* bind address; default "127.0.0.1" */
    int port;                     /* default 8080; 0: any free port (printed) */
    const char *api_key;          /* NULL: no authentication */
    int n_threads;                /* engine threads; default: online cores */
    int64_t n_ctx;                /* context per request; 0: min(model's, 32768) */
    int max_queue;                /* requests that may wait while one runs; default 16 */
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
    double keepalive_s;           /* --keepalive: a stream quiet this long during a prefill
                                     gets a keep-alive; default 1.0 */
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
 * One request, start to end, as `headstart replay` runs it now and the HTTP scheduler will:
 * body -> chat_request -> render -> ids -> head / last user turn / generation-prompt start ->
 * bank lookup and restore -> snapshot plan -> prefill with captures -> generation (text
 * streamed through a callback) -> bank insert of prompt + generated tokens. */
#include "bank/bank.h"
#include "engine/engine.h"

#define SESSION_DEFAULT_MAX_TOKENS 256

/* What a request looks like once the bank lookup and restore are done, before the prefill
 * (the server's stream starts with these numbers). */
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
    int64_t max_tokens;            /* > 0: generate at most this many; 0: the body's
                                      max_tokens / max_completion_tokens, else the default */
    struct sampler_opts sampling;  /* temperature 0 = greedy */
    struct bank_disk *disk;        /* the bank's disk tier; NULL = none. Used only with a
                                      RAM bank: lookup falls through RAM -> disk (a disk hit
                                      is promoted into RAM), banked snapshots are also put
                                      to disk (queued, never blocking); only once the
                                      engine has its persistent fingerprint (the model
                                      identity, engine.h), else skipped (bank_off). Both
                                      tiers are skipped while model_files_check fails */
    int64_t n_ctx;                 /* > 0: the context: a prompt of n_ctx tokens or more is
                                      HS_ERR_LIMIT, output is cut at n_ctx - prompt */
    bool ignore_eos;               /* stop ids do not end generation (to max_tokens) */
    session_start_fn on_start;     /* NULL = none; called with session_run's ctx */
    session_prefill_fn on_prefill; /* NULL = the prefill is one engine_forward; otherwise it
                                      runs in chunks of about SESSION_PREFILL_CHUNK_S
                                      seconds each (sized from the measured rate; the
                                      logits are the same, docs/DESIGN.md §4), the hook called
                                      after each but the last */
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
    const char *cache_source;      /* "ram", "disk" or "none" (static string) */
    const char *restore_reason;    /* bank_reason_name, or "no_bank" (static string) */
    const char *stop_reason;       /* "stop" (a stop id, included in output_ids, or a
                                      blocked tool call under tool_choice none),
                                      "stop_sequence" (a request stop string: the text ends
                                      before it, the token that completed it is in
                                      output_ids), "length" or "cancelled" (a callback
                                      returned false) */
    char *stop_sequence;           /* owned: the stop string that matched, else NULL */
    char *forced_text;             /* owned: session_start's forced_text, NULL when none */
    int32_t *output_ids;           /* owned */
    int64_t n_output;
    char *text;                    /* owned: the generated text (stop ids not included) */
    size_t text_len;
    char first_logits_sha256[65];  /* of the n_vocab f32 LE logits row of the first token */
    double prefill_ms;             /* bank lookup + restore + prefill */
    double ttft_ms;                /* from the start of session_run (parse, render,
                                      tokenize included) to the first token */
    double total_ms;
    int64_t disk_discarded;        /* disk entries that failed verification in this lookup
                                      (deleted by the tier; the request went on cold or from
                                      a shallower point) */
    int n_disk_puts;               /* snapshots queued for the disk tier after the request */
    const char *bank_off;          /* NULL, or why the bank was not used (static string):
                                      "model_changed" (a model file changed in place: no
                                      tier), "model_identity_unknown" (the engine has no
                                      persistent fingerprint yet: no disk tier) */
};


/* Run one request. bank NULL = no bank (everything computed). Errors: the body
 * (HS_ERR_INVALID, from the api parsers), no chat template (HS_ERR_UNSUPPORTED), a prompt
 * over o->n_ctx (HS_ERR_LIMIT, naming both numbers), the engine's. On error *out holds
 * nothing to free. A cancel (a callback returned false) is HS_OK with stop_reason
 * "cancelled". on_text and ctx may be NULL. */
int session_run(struct engine *e, const struct model_text *mt, struct bank *bank, enum api_kind kind,
                const json_t *body, const struct session_opts *o, session_text_fn on_text, void *ctx,
                struct session_report *out, struct hs_err *err);
void session_report_free(struct session_report *r); /* safe on a zeroed struct */
/* Append the report as one compact JSON object (no newline). */
void session_report_json(const struct session_report *r, struct strbuf *out);

/* SHA-256 (sha256.c, FIPS 180-4): digest of data, and as 64 lowercase hex digits + NUL. */
void sha256_sum(const void *data, size_t len, uint8_t out[32]);
void sha256_hex(const void *data, size_t len, char out[65]);

#endif
