/*
 * api — what agents send and what the model sees: the OpenAI (/v1/chat/completions) and
 * Anthropic (/v1/messages) request codecs, the neutral conversation they become, chat
 * rendering through the model's own Jinja template, head detection on token ids, and the
 * incremental parser that turns generated text into text, reasoning and tool calls.
 * Depends on base, tokenizer and jinja (the template interpreter, jinja/jinja.h); with
 * format/ and jinja/, the only modules that use jansson.
 *
 * Design note
 * -----------
 * The neutral conversation is a JSON tree in the shape Hugging Face chat templates expect
 * (OpenAI chat style), so the template sees exactly what it would see in transformers:
 *
 *   messages: [ {role: "system"|"user"|"assistant"|"tool",
 *                content: string,                         (parts joined; "" when none)
 *                reasoning_content?: string,              (assistant thinking)
 *                tool_calls?: [ {type: "function", id?: string,
 *                                function: {name: string, arguments: object}} ],
 *                tool_call_id?: string, name?: string} ]   (role tool)
 *   tools:    [ {type: "function", function: {name, description?, parameters?}} ] or absent
 *
 * Tool-call arguments are objects (parsed from OpenAI's JSON strings) because the Qwen
 * templates iterate over them. Key order is kept everywhere (jansson objects keep
 * insertion order), so `tojson` reproduces the client's bytes.
 *
 * Invariants:
 *   1. Rendering is a pure function of (template, conversation, flags): identical requests
 *      render to identical bytes, and the head (top-level system text + tools) renders
 *      byte-identically across sessions that share it.
 *   2. Requests from real clients never fail to render; content that cannot be rendered
 *      (images, documents, unknown blocks) is an error naming the message and block, never
 *      a silent drop.
 *   3. Templates render through the jinja module, byte-identically to Python jinja2 with
 *      transformers' settings (jinja.h, invariant 1).
 */
#ifndef HS_API_H
#define HS_API_H

#include "base/base.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* ---- the neutral conversation --------------------------------------------------------- */

/* tool_choice (OpenAI auto/none/required/{function}; Anthropic auto/none/any/tool). */
enum chat_tool_choice {
    CHAT_TOOL_AUTO = 0,        /* the model decides (also: absent, or no tools) */
    CHAT_TOOL_NONE,            /* no tool call: generation ends where one would start */
    CHAT_TOOL_REQUIRED,        /* some tool call (OpenAI "required", Anthropic "any") */
    CHAT_TOOL_NAMED,           /* a call of tool_name */
};

#define CHAT_STOP_MAX 4        /* stop strings per request (OpenAI's limit, both APIs) */
#define CHAT_STOP_LEN_MAX 256  /* bytes per stop string */

struct chat_request {
    json_t *messages;          /* array, owned (see the design note for its shape) */
    json_t *tools;             /* array or NULL, owned */
    int enable_thinking;       /* -1: the template's default; 0 off; 1 on */
    bool add_generation_prompt;
    json_t *stop;              /* array of 1..CHAT_STOP_MAX non-empty strings, or NULL; owned
                                  (OpenAI `stop`, Anthropic `stop_sequences`) */
    enum chat_tool_choice tool_choice;
    char *tool_name;           /* CHAT_TOOL_NAMED: a name in tools; owned */
    json_t *template_kwargs;   /* chat_template_kwargs other than enable_thinking: an object
                                  of extra template variables, or NULL; owned */
    int n_media_placeholders;  /* images / documents / files inside tool results that were
                                  replaced by a text placeholder (conv.c rule 4) */
};

/* Parse the conversation part of an OpenAI chat-completions request body (messages, tools;
 * roles system/developer/user/assistant/tool; content as a string or text parts;
 * tool_calls; reasoning_content; chat_template_kwargs.enable_thinking). */
int chat_from_openai(const json_t *body, struct chat_request *out, struct hs_err *err);
/* Parse the conversation part of an Anthropic messages request body (system as string or
 * blocks; text / tool_use / tool_result / thinking blocks; role "system" messages inside
 * messages; tools with input_schema; thinking {type: enabled|adaptive|disabled}). */
int chat_from_anthropic(const json_t *body, struct chat_request *out, struct hs_err *err);
/* Parse the conversation part of an OpenAI Responses request body (instructions; input as a
 * string or items: messages, function_call / function_call_output, reasoning; function
 * tools, other tool types skipped). previous_response_id and other stored-state fields are
 * errors (src/api/responses.c has the rules). */
int chat_from_responses(const json_t *body, struct chat_request *out, struct hs_err *err);
void chat_request_free(struct chat_request *c); /* safe on a zeroed struct */

/* ---- one complete request (request.c) ------------------------------------------------------
 * A body becomes a request once, on arrival: the conversation and every field the server acts
 * on. Nothing downstream reads the body. */

/* The API a request came in on (its route). */
enum api_kind {
    API_KIND_OPENAI_CHAT = 0,    /* POST /v1/chat/completions */
    API_KIND_ANTHROPIC_MESSAGES, /* POST /v1/messages */
    API_KIND_OPENAI_RESPONSES,   /* POST /v1/responses (src/api/responses.c) */
};

/* Sampling as the request states it; the engine's sampler options are made from it. */
struct api_sampling {
    double temperature;          /* [0, 100]; 0 = greedy */
    double top_p;                /* (0, 1] */
    int64_t top_k;               /* [0, INT32_MAX]; 0 = off */
    double min_p;                /* [0, 1] */
    double presence_penalty;     /* [-2, 2] */
    double frequency_penalty;    /* [-2, 2] */
    int64_t seed;                /* any integer, 0 included, when seed_given */
    bool seed_given;
};

struct api_request {
    enum api_kind kind;
    struct chat_request chat;    /* the conversation, stops, tool_choice; owned */
    bool stream;
    bool include_usage;          /* OpenAI chat stream_options.include_usage */
    bool ignore_eos;             /* extension (as llama.cpp's): generate to the cap */
    int64_t max_tokens;          /* the request's output cap; 0 = none given */
    struct api_sampling sampling;
};

/* Parse and check a whole request body of API `kind` (request.c has the rules). `sampling`
 * holds the defaults for fields the body leaves out. Errors: HS_ERR_INVALID or
 * HS_ERR_UNSUPPORTED naming the field; *out then holds nothing to free. */
int api_request_parse(enum api_kind kind, const json_t *body, const struct api_sampling *sampling,
                      struct api_request *out, struct hs_err *err);
void api_request_free(struct api_request *r); /* safe on a zeroed struct */

/* ---- chat rendering ------------------------------------------------------------------- */

struct chat_template;

/* Compile a model's chat template; `bos` / `eos` are the special-token strings the template
 * may reference (NULL: undefined). */
int chat_template_new(const char *source, const char *bos, const char *eos,
                      struct chat_template **out, struct hs_err *err);
int chat_template_render(const struct chat_template *t, const struct chat_request *c,
                         struct strbuf *out, struct hs_err *err);
void chat_template_free(struct chat_template *t);

/* How the template writes a tool call inside <tool_call>: Qwen3.5's XML (<function=NAME>
 * with <parameter=...> blocks) or Qwen3's JSON ({"name": ..., "arguments": ...}). Decided
 * once, when the template is compiled, from what its source writes. */
enum chat_tool_dialect { CHAT_TOOL_DIALECT_JSON = 0, CHAT_TOOL_DIALECT_XML };
enum chat_tool_dialect chat_template_tool_dialect(const struct chat_template *t);
/* The text a forced tool call (tool_choice required / named) appends to the generation
 * prompt, so the model can only continue a call: an open <think> closed empty first
 * (thinking), `<tool_call>\n`, then for a named tool the start of its call in the
 * template's dialect. Appended to out. */
void chat_forced_call_text(const struct chat_template *t, bool thinking, const char *name, struct strbuf *out);

/* ---- head detection ------------------------------------------------------------------- */

/* The head of a prompt (docs/DESIGN.md §5): the position of the first `im_start` token that is
 * not followed by the ids of "system" (system_ids, n_system); consecutive system turns all
 * belong to the head. 0 when there is no head: im_start_id < 0, the prompt does not open
 * with a system turn, or no later turn follows. */
int64_t chat_head_length(const int32_t *ids, int64_t n, int32_t im_start_id,
                         const int32_t *system_ids, int n_system);

/* ---- parsing generated text ----------------------------------------------------------- */

enum chat_event_kind {
    CHAT_EVENT_TEXT = 0,       /* visible text delta */
    CHAT_EVENT_REASONING,      /* thinking delta */
    CHAT_EVENT_TOOL_CALL,      /* one complete tool call */
};

struct chat_event {
    enum chat_event_kind kind;
    const char *text;          /* TEXT / REASONING: the delta (not NUL-terminated) */
    size_t text_len;
    const char *tool_name;     /* TOOL_CALL: NUL-terminated */
    const json_t *tool_args;   /* TOOL_CALL: arguments object (borrowed for the callback) */
    int tool_index;            /* TOOL_CALL: 0, 1, ... within this response */
};

typedef void (*chat_event_fn)(void *ctx, const struct chat_event *ev);

struct chat_parser;

/* A streaming parser of model output. `tools` (borrowed, may be NULL) types the values of
 * Qwen3.5-style <parameter=...> blocks by their JSON schema; `starts_in_reasoning` is true
 * when the generation prompt already opened <think>. */
struct chat_parser *chat_parser_new(const json_t *tools, bool starts_in_reasoning,
                                    chat_event_fn fn, void *ctx);
/* Feed generated text (any split, even inside a UTF-8 sequence or a tag). */
void chat_parser_feed(struct chat_parser *p, const char *text, size_t len);
/* End of generation: flush what is held back; a truncated tool call comes out as text. */
void chat_parser_finish(struct chat_parser *p);
void chat_parser_free(struct chat_parser *p);

/* ---- stop strings (parse.c) ------------------------------------------------------------- */

/* Where generated text starts: after the generation prompt, inside an open <think>, or
 * inside a tool call the prompt already opened (a forced tool call). */
enum chat_stop_state { CHAT_STOP_IN_TEXT = 0, CHAT_STOP_IN_REASONING, CHAT_STOP_IN_CALL };

/* chat_stop_feed results besides a stop string's index (0..n-1). */
#define CHAT_STOP_NONE (-1)         /* no match yet */
#define CHAT_STOP_TOOL_CALL (-2)    /* "<tool_call>" in text while tool calls are blocked */

struct chat_stop;

/* A matcher of stop strings on generated text (parse.c's design note has the rules).
 * `stops` (borrowed, may be NULL): an array of strings; `block_tool_calls`: end at a
 * `<tool_call>` in text (tool_choice none). Returns NULL when there is nothing to match
 * (no strings, not blocking): the caller passes text through unchanged. */
struct chat_stop *chat_stop_new(const json_t *stops, bool block_tool_calls, enum chat_stop_state start);
/* Feed text (any split); appends to `out` the text now known to precede any match and
 * returns CHAT_STOP_NONE, or the index of the stop string that matched (its bytes and all
 * that follows are dropped), or CHAT_STOP_TOOL_CALL. After a match feed appends nothing. */
int chat_stop_feed(struct chat_stop *m, const char *text, size_t len, struct strbuf *out);
/* End of generation: what was held back can no longer grow, so a stop string inside it
 * still matches (the same result as feed) and the rest is appended. Feed and finish append
 * nothing after this. */
int chat_stop_finish(struct chat_stop *m, struct strbuf *out);
void chat_stop_free(struct chat_stop *m);

/* ---- responses ------------------------------------------------------------------------ */
/* What goes back to the client (src/api/response.c, the dialect files): each API's JSON
 * body or SSE stream built from parser events and usage numbers, the error shapes and the HTTP status table,
 * /v1/models and count_tokens bodies. Pure functions of their inputs: no sockets, no clock,
 * no randomness (ids come from the caller's seed and counter). All output is appended to a
 * caller's strbuf as UTF-8 JSON (compact, keys in a fixed order, non-ASCII raw). */

/* Why generation ended. END with at least one tool call is reported as TOOL_CALLS. */
enum api_stop {
    API_STOP_END = 0,            /* end of turn: OpenAI "stop", Anthropic "end_turn" */
    API_STOP_LENGTH,             /* max_tokens: "length" / "max_tokens" */
    API_STOP_TOOL_CALLS,         /* "tool_calls" / "tool_use" */
    API_STOP_STOP_SEQUENCE,      /* a client stop string: "stop" / "stop_sequence" */
};

/* Server-side error codes beyond enum hs_status (same int space, all below -99). */
enum api_error_code {
    API_ERR_AUTH = -100,         /* missing or wrong API key: 401 */
    API_ERR_ROUTE = -101,        /* unknown route: 404 */
    API_ERR_METHOD = -102,       /* wrong method for a known route: 405 */
    API_ERR_TOO_LARGE = -103,    /* body over --max-body: 413 */
    API_ERR_QUEUE_FULL = -104,   /* request queue full: 429 (send Retry-After) */
    API_ERR_OVERLOADED = -105,   /* not ready (loading, shutting down): 503 */
    API_ERR_INTERNAL = -106,     /* a bug or an engine failure: 500 */
    API_ERR_FORBIDDEN = -107,    /* a Host or Origin this server does not answer: 403 */
    API_ERR_MEDIA_TYPE = -108,   /* a POST body that is not application/json: 415 */
    API_ERR_HEADERS_TOO_LARGE = -109, /* a request head over the server's limit: 431 */
    API_ERR_HTTP_VERSION = -110, /* an HTTP version other than 1.0 and 1.1: 505 */
    API_ERR_CONTEXT = -120,      /* the prompt does not fit the context: 400, in each API's
                                    own overflow wording (api_context_error) */
};

/* One row of the error table: a code's HTTP status and each API's error type. */
struct api_error_info {
    int code;                    /* enum hs_status or enum api_error_code */
    int http_status;
    const char *openai_type;     /* error.type */
    const char *openai_code;     /* error.code, NULL: null */
    const char *anthropic_type;  /* error.type */
};

/* The row for `code`; an unknown code (or HS_OK) gets the internal-error row. Never NULL. */
const struct api_error_info *api_error_info(int code);
/* The message of an API_ERR_CONTEXT error, in the wording each API's clients detect to
 * compact their history: OpenAI (chat, Responses) "This model's maximum context length is
 * N tokens. ..." with code context_length_exceeded; Anthropic "prompt is too long: P tokens
 * > N maximum" (Claude Code parses both numbers out of it). Then headstart's own detail. */
void api_context_error(enum api_kind kind, int64_t n_prompt, int64_t n_ctx, char *buf, size_t size);
/* Append the API's error body for (code, message) and return the HTTP status to send.
 * OpenAI: {"error":{"message","type","param":null,"code"}};
 * Anthropic: {"type":"error","error":{"type","message"}}. */
int api_error_write(enum api_kind kind, int code, const char *message, struct strbuf *out);

/* Deterministic ids: prefix + 24 base-62 characters from (seed, counter). */
#define API_ID_MAX 48
struct api_ids {
    uint64_t seed;
    uint64_t counter;            /* next counter value; api_ids_next increments it */
};
void api_id_make(uint64_t seed, uint64_t counter, const char *prefix, char out[API_ID_MAX]);
/* Request ids: "chatcmpl-…" for OpenAI chat, "resp_…" for Responses, "msg_…" for Anthropic. */
void api_ids_next(struct api_ids *ids, enum api_kind kind, char out[API_ID_MAX]);

struct api_usage {
    int64_t prompt_tokens;       /* all prompt tokens, cached included */
    int64_t completion_tokens;
    int64_t cached_tokens;       /* prompt tokens restored from the bank (<= prompt_tokens) */
};

struct api_response_opts {
    enum api_kind kind;
    bool stream;
    bool include_usage;          /* OpenAI stream_options.include_usage */
    const char *model;           /* copied */
    const char *id;              /* copied; from api_ids_next; tool-call ids derive from it */
    int64_t created;             /* unix seconds (OpenAI "created") */
    const json_t *tools;         /* borrowed for the response's life; types parsed tool args */
    bool starts_in_reasoning;    /* the generation prompt opened <think> */
};

struct api_response;

/* A per-request accumulator. Lifecycle: new → [begin] → (feed | event)* → finish | fail →
 * free. Each call appends what is ready to `out`: SSE bytes when streaming (nothing but the
 * final body otherwise). Calls after finish/fail append nothing. */
struct api_response *api_response_new(const struct api_response_opts *o);
/* Stream head: OpenAI's role chunk, Anthropic's message_start (with the prompt usage known
 * now) and a ping. Optional: the first output does it with zero usage when not called. */
void api_response_begin(struct api_response *r, const struct api_usage *u, struct strbuf *out);
/* Generated text through the response's own chat_parser (any split). */
void api_response_feed(struct api_response *r, const char *text, size_t len, struct strbuf *out);
/* One parser event, for callers that run their own parser. */
void api_response_event(struct api_response *r, const struct chat_event *ev, struct strbuf *out);
/* A keep-alive while the prompt is being processed: OpenAI ": keepalive" comment line,
 * Anthropic ping event. Nothing when not streaming. */
void api_response_keepalive(struct api_response *r, struct strbuf *out);
/* Flush the parser, close open blocks and append the end: OpenAI final chunk, usage chunk
 * (include_usage) and [DONE]; Anthropic message_delta + message_stop; or the whole body
 * when not streaming. `stop_sequence` (may be NULL) is the matched string for
 * API_STOP_STOP_SEQUENCE. */
void api_response_finish(struct api_response *r, enum api_stop stop, const char *stop_sequence,
                         const struct api_usage *u, struct strbuf *out);
/* End with an error. Once stream output has begun: an in-stream error (OpenAI
 * `data: {"error":…}` then [DONE]; Anthropic `event: error`) and returns 200, the status
 * already sent; otherwise the API's error body and returns its HTTP status. */
int api_response_fail(struct api_response *r, int code, const char *message, struct strbuf *out);
/* True once stream output has begun: begin, an event or a keep-alive (the stream's
 * headers go out with the first bytes). */
bool api_response_started(const struct api_response *r);
int api_response_n_tool_calls(const struct api_response *r);
void api_response_free(struct api_response *r);

/* GET /v1/models for one or more served names. OpenAI: {"object":"list","data":[{"id",
 * "object":"model","created","owned_by":"headstart"}]}; Anthropic: {"data":[{"type":"model",
 * "id","display_name","created_at":RFC 3339}],"has_more":false,"first_id","last_id"}. */
void api_models_write(enum api_kind kind, const char *const *names, int n_names,
                      int64_t created, struct strbuf *out);
/* POST /v1/messages/count_tokens: {"input_tokens":N}. */
void api_count_tokens_write(int64_t input_tokens, struct strbuf *out);

/* The parse cost of a request body (body.c), judged on its raw bytes before jansson sees
 * them: HS_ERR_LIMIT when it has more than max_elements JSON elements (containers plus
 * commas, outside strings) or nests deeper than max_depth. Syntax is not checked. */
#define API_BODY_MAX_ELEMENTS (1 << 19)
#define API_BODY_MAX_DEPTH 64
int api_body_prescan(const char *buf, size_t len, int64_t max_elements, int max_depth, struct hs_err *err);

#endif
