/*
 * api_int.h — private to src/api: what the three dialect files (openai_chat.c, anthropic.c,
 * responses.c) share. Each dialect file holds both sides of its API: the request parser
 * (chat_from_*) and the response writer (an api_writer_ops table).
 *
 * Design note
 * -----------
 * Dependencies inside the module point one way:
 *
 *   openai_chat.c  anthropic.c  responses.c      (dialects: parse + write)
 *         │             │            │
 *         ├── conv.c   (request helpers: paths in errors, the conversation being built,
 *         │             media placeholders, arguments, template kwargs, stops, tool_choice)
 *         └── response.c ── errors.c ── emit.c   (lifecycle, error table, JSON/SSE output)
 *
 * response.c owns the lifecycle of api.h's api_response_* calls (guards, begin/done
 * bookkeeping, the parser, usage clamping, stop normalisation) and reaches a dialect only
 * through its api_writer_ops. No dialect calls another, and nothing below a dialect calls
 * up into one except through that table.
 *
 * Invariants:
 *   1. The lifecycle decides when a writer op runs (never after done, never for an empty
 *      delta) and keeps begun / kept_alive / done; a writer keeps the blocks, block_open,
 *      n_tools and its own r->state. (Responses' fail marks begun itself when only a
 *      keep-alive went out: its stream must open with response.created first.)
 *   2. Every writer gets usage already clamped (api_usage_clean) and a stop already
 *      normalised (a tool call turns END into TOOL_CALLS; stop_sequence only with
 *      STOP_SEQUENCE).
 */
#ifndef HS_API_INT_H
#define HS_API_INT_H

#include "api/api.h"

/* ==== request helpers (conv.c) ============================================================ */

#define API_PATH_LEN 160 /* a JSON path in an error message, e.g. "messages[3].content[0]" */
/* hs_err_set(err, HS_ERR_INVALID, "PATH: FMT ...") */
int api_req_bad(struct hs_err *err, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A JSON path into an API_PATH_LEN buffer (a long path is cut, never overrun). */
void api_req_path(char *dst, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "an object", "a string", ... for error messages. */
const char *api_req_kind(const json_t *v);
/* An optional string field: absent or null → *s = NULL; a string → *s (and *len when len
 * is not NULL); anything else an error naming `key` at `path`. */
int api_opt_string(const json_t *obj, const char *key, const char *path, const char **s, size_t *len,
                   struct hs_err *err);

/* The conversation every request parser builds (conv.c's rules 1-2): system pieces merge
 * into one leading system message until another message comes, a user turn after that. */
struct api_conv {
    json_t *msgs;          /* everything but the leading system message */
    struct strbuf system;  /* leading system text, pieces joined with "\n\n" */
    bool started;          /* a non-system message has been added */
    int n_media;           /* media parts of tool results replaced by their placeholder */
};
void api_conv_init(struct api_conv *c);
void api_conv_free(struct api_conv *c);
json_t *api_msg_new(const char *role, const char *text, size_t len); /* {role, content} */
void api_conv_add(struct api_conv *c, json_t *msg);                   /* takes msg */
void api_conv_system(struct api_conv *c, const char *text, size_t len);
/* Content types a text-only model cannot take (images, audio, video, files, documents). */
bool api_is_media(const char *type);
/* A media part inside a tool result: append its placeholder (fixed bytes for a given kind
 * and media type, so the prefix of a conversation stays stable) to out, count it in c. */
void api_media_placeholder(struct api_conv *c, const json_t *part, const char *type, struct strbuf *out);
/* {type: "function", id (when not NULL), function: {name, arguments}}: a tool call of the
 * neutral conversation; takes arguments. */
json_t *api_call_new(const char *id, const char *name, json_t *arguments);
/* {type: "function", function: {name, description (when not NULL), parameters (copied,
 * when an object)}}: a tool of the neutral conversation. */
json_t *api_tool_new(const char *name, const char *desc, size_t desc_len, const json_t *params);
/* A content part type whose text a dialect reads, and the field that holds the text. */
struct api_text_part {
    const char *type;
    const char *field;
};
/* Append the text of `content`: null/absent (nothing), a string, or an array of parts of
 * the types in parts[n_parts], their text joined with "" (rule 3); anything else is an
 * error saying it expected `forms`. media: the conversation that counts placeholders for
 * media parts (a tool result, rule 4), or NULL (media parts are errors). */
int api_parts_text(const json_t *content, const char *path, const struct api_text_part *parts, size_t n_parts,
                   const char *forms, struct api_conv *media, struct strbuf *out, struct hs_err *err);
/* Move the conversation (system message first), tools and thinking flag into out. */
void api_conv_deliver(struct api_conv *c, struct chat_request *out, json_t *tools, int thinking);
/* `chat_template_kwargs` (an object, or absent / null): enable_thinking (a boolean) sets
 * *thinking; every other entry goes to the template as a variable of its own JSON type
 * (*extra, a new object, NULL when there is none). Names the request sets itself
 * (messages, tools, add_generation_prompt, bos_token, eos_token) are errors. */
int api_template_kwargs(const json_t *body, int *thinking, json_t **extra, struct hs_err *err);
/* A tool call's arguments: a JSON string holding an object, an object, or nothing ("", null,
 * absent: no arguments). *out is a new object. */
int api_args_parse(const json_t *v, const char *path, json_t **out, struct hs_err *err);
/* body[key]: absent or null (none), an array of strings, or (allow_string) one string; each
 * non-empty and at most CHAT_STOP_LEN_MAX bytes, at most CHAT_STOP_MAX. *out: a new array
 * or NULL. */
int api_stops_parse(const json_t *body, const char *key, bool allow_string, json_t **out, struct hs_err *err);
/* Set out->tool_choice (and tool_name) from a choice and a name, checked against
 * out->tools (already set); errors name `path`. */
int api_tool_choice_set(struct chat_request *out, enum chat_tool_choice tc, const char *name, const char *path,
                        struct hs_err *err);
/* A failed parse's way out: free what out holds, leave it zeroed (enable_thinking -1). */
void api_chat_reset(struct chat_request *out);

/* ==== output helpers (emit.c) ============================================================= */

#define API_JSON_FLAGS (JSON_COMPACT | JSON_PRESERVE_ORDER) /* every JSON byte we write */

void api_json_append(struct strbuf *out, const json_t *j); /* j's compact text */
void api_json_steal(struct strbuf *out, json_t *j);        /* the same, then drops j */
/* A JSON string of s[0..n) (NULL: ""), cleaned to valid UTF-8 (base's one rule). */
json_t *api_jstr_n(const char *s, size_t n);
json_t *api_jstr(const char *s);
/* The compact text of a tool call's arguments object, malloc'd ("{}" if it cannot dump). */
char *api_args_text(const json_t *args);
void api_sse_data(struct strbuf *out, json_t *j);                     /* `data: J\n\n`, steals j */
void api_sse_event(struct strbuf *out, const char *name, json_t *j); /* `event: NAME\ndata: J\n\n` */

/* ==== errors (errors.c) =================================================================== */

/* The API's error object for (e, message): what api_error_write appends, and what a
 * stream carries once it has begun. A new reference. */
json_t *api_error_object(enum api_kind kind, const struct api_error_info *e, const char *message);

/* ==== the response lifecycle and its writers (response.c) ================================= */

/* One piece of output, as OpenAI chat and Anthropic accumulate them (response.c's note). */
struct api_block {
    enum chat_event_kind kind;
    struct strbuf text;            /* TEXT / REASONING: the merged deltas (valid UTF-8) */
    char *name;                    /* TOOL_CALL, owned */
    json_t *args;                  /* TOOL_CALL: arguments object, owned */
    char id[API_ID_MAX];           /* TOOL_CALL: "call_…" / "toolu_…" */
};

/* One dialect's writer. The lifecycle (response.c) calls an op only when output is due:
 * begin when streaming and not yet begun; event for a non-empty event once begun;
 * finish once; fail once, when the stream has begun (before that the lifecycle writes the
 * error body itself). */
struct api_writer_ops {
    const char *id_prefix;         /* request ids: api_ids_next */
    void (*init)(struct api_response *r, const struct api_response_opts *o); /* optional */
    void (*free)(struct api_response *r);                                    /* optional */
    void (*begin)(struct api_response *r, const struct api_usage *u, struct strbuf *out);
    void (*keepalive)(struct api_response *r, struct strbuf *out); /* NULL: an SSE comment */
    void (*event)(struct api_response *r, const struct chat_event *ev, struct strbuf *out);
    void (*finish)(struct api_response *r, enum api_stop stop, const char *stop_sequence,
                   const struct api_usage *u, struct strbuf *out);
    void (*fail)(struct api_response *r, const struct api_error_info *e, const char *message,
                 struct strbuf *out);
};

extern const struct api_writer_ops api_openai_chat_writer; /* openai_chat.c */
extern const struct api_writer_ops api_anthropic_writer;   /* anthropic.c */
extern const struct api_writer_ops api_responses_writer;   /* responses.c */

/* What every writer shares; the lifecycle keeps the flags, writers read them. */
struct api_response {
    const struct api_writer_ops *ops;
    enum api_kind kind;
    bool stream, include_usage;
    char *model, *id;
    int64_t created;
    uint64_t id_hash;              /* hs_fnv1a64_str(id): tool-call and item ids derive from it */
    struct chat_parser *parser;
    struct strbuf *sink;           /* during feed / finish: where parser events append */
    int64_t n_feeds;               /* feed calls (one per generated token with text) */
    bool begun;                    /* begin done (explicitly or by the first output) */
    bool kept_alive;               /* a keep-alive went out: the stream's headers are sent */
    bool done;                     /* finish or fail done */
    bool block_open;               /* stream: the last block / item is started, not stopped */
    int n_tools;                   /* tool calls so far (the writers count them) */
    struct api_block *blocks;      /* the block accumulator (OpenAI chat, Anthropic) */
    int n_blocks, cap_blocks;
    void *state;                   /* a writer's own state (init / free) */
};

/* Usage numbers made consistent: nothing negative, cached within the prompt (u may be NULL). */
struct api_usage api_usage_clean(const struct api_usage *u);
/* Whether a delta of `kind` opens a new block (the last block has another kind). */
bool api_block_opens(const struct api_response *r, enum chat_event_kind kind);
/* Append a text / reasoning delta, cleaned to valid UTF-8, to the last block or to a new
 * one when api_block_opens. The delta's bytes are b->text.buf + *at .. b->text.len. */
struct api_block *api_block_delta(struct api_response *r, enum chat_event_kind kind, const char *text,
                                  size_t len, size_t *at);
/* A tool call as a new block: its name, a copy of its arguments object ({} if it has
 * none) and its id (prefix + api_id_make(id_hash, call index)); counts r->n_tools. */
struct api_block *api_block_tool_call(struct api_response *r, const struct chat_event *ev, const char *prefix);

#endif
