/*
 * api — what agents send and what the model sees: the OpenAI (/v1/chat/completions) and
 * Anthropic (/v1/messages) request codecs, the neutral conversation they become, chat
 * rendering through the model's own Jinja template, head detection on token ids, and the
 * incremental parser that turns generated text into text, reasoning and tool calls.
 * Depends on base and tokenizer; the only module besides format/ that uses jansson.
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
 *   3. The Jinja interpreter renders the Qwen3 / Qwen3.5 / Qwen3.6 templates byte-identically
 *      to Python jinja2 with transformers' settings (trim_blocks, lstrip_blocks,
 *      loopcontrols, tojson = json.dumps(ensure_ascii=False)).
 */
#ifndef HS_API_H
#define HS_API_H

#include "base/base.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

/* ---- the neutral conversation --------------------------------------------------------- */

struct chat_request {
    json_t *messages;          /* array, owned (see the design note for its shape) */
    json_t *tools;             /* array or NULL, owned */
    int enable_thinking;       /* -1: the template's default; 0 off; 1 on */
    bool add_generation_prompt;
};

/* Parse the conversation part of an OpenAI chat-completions request body (messages, tools;
 * roles system/developer/user/assistant/tool; content as a string or text parts;
 * tool_calls; reasoning_content; chat_template_kwargs.enable_thinking). */
int chat_from_openai(const json_t *body, struct chat_request *out, struct hs_err *err);
/* Parse the conversation part of an Anthropic messages request body (system as string or
 * blocks; text / tool_use / tool_result / thinking blocks; role "system" messages inside
 * messages; tools with input_schema; thinking {type: enabled|adaptive|disabled}). */
int chat_from_anthropic(const json_t *body, struct chat_request *out, struct hs_err *err);
void chat_request_free(struct chat_request *c); /* safe on a zeroed struct */

/* ---- Jinja (the subset chat templates use) ---------------------------------------------- */

struct jinja_template;

/* Compile template source; syntax errors name the line and column. */
int jinja_compile(const char *source, size_t len, struct jinja_template **out, struct hs_err *err);
/* Render with `ctx` (a JSON object of top-level variables) appended to out. Runtime errors
 * (raise_exception, undefined operations) name the template line. */
int jinja_render(const struct jinja_template *t, const json_t *ctx, struct strbuf *out,
                 struct hs_err *err);
void jinja_free(struct jinja_template *t);
/* Python json.dumps(v, ensure_ascii=False) with indent as given (-1: none), appended. */
void jinja_tojson(const json_t *v, int indent, struct strbuf *out);

/* ---- chat rendering ------------------------------------------------------------------- */

struct chat_template;

/* Compile a model's chat template; `bos` / `eos` are the special-token strings the template
 * may reference (NULL: undefined). */
int chat_template_new(const char *source, const char *bos, const char *eos,
                      struct chat_template **out, struct hs_err *err);
int chat_template_render(const struct chat_template *t, const struct chat_request *c,
                         struct strbuf *out, struct hs_err *err);
void chat_template_free(struct chat_template *t);

/* ---- head detection ------------------------------------------------------------------- */

/* The head of a prompt (DESIGN.md §5): the position of the first `im_start` token that is
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

#endif
