/*
 * responses_int.h — private to src/api: the request-parsing helpers messages.c shares with
 * responses.c, and the Responses API writer (responses.c) behind the api_response_* calls. respond.c makes one for API_KIND_OPENAI_RESPONSES and forwards
 * every lifecycle call to it; the semantics are those of the api_response_* functions of
 * the same name (api.h).
 */
#ifndef HS_API_RESPONSES_INT_H
#define HS_API_RESPONSES_INT_H

#include "api/api.h"

/* Request-parsing helpers shared with messages.c (defined there). */
#define API_PATH_LEN 160 /* a JSON path in an error message, e.g. "messages[3].content[0]" */
/* hs_err_set(err, HS_ERR_INVALID, "PATH: FMT ...") */
int api_req_bad(struct hs_err *err, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A JSON path into an API_PATH_LEN buffer (a long path is cut, never overrun). */
void api_req_path(char *dst, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "an object", "a string", ... for error messages. */
const char *api_req_kind(const json_t *v);

/* The conversation both request parsers build (messages.c): system pieces merge into one
 * leading system message until another message comes, a user turn after that. */
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

struct responses_writer;

struct responses_writer *responses_writer_new(const struct api_response_opts *o);
void responses_writer_free(struct responses_writer *w); /* NULL: no-op */
void responses_writer_begin(struct responses_writer *w, const struct api_usage *u, struct strbuf *out);
void responses_writer_keepalive(struct responses_writer *w, struct strbuf *out);
void responses_writer_event(struct responses_writer *w, const struct chat_event *ev, struct strbuf *out);
void responses_writer_feed(struct responses_writer *w, const char *text, size_t len, struct strbuf *out);
void responses_writer_finish(struct responses_writer *w, enum api_stop stop, const struct api_usage *u,
                             struct strbuf *out);
int responses_writer_fail(struct responses_writer *w, int code, const char *message, struct strbuf *out);
bool responses_writer_started(const struct responses_writer *w);
int responses_writer_n_tool_calls(const struct responses_writer *w);

#endif
