/*
 * errors.c — the error table (an error code → HTTP status and each API's error type) and
 * the error shapes: the body a failed request gets, and the object a stream carries when
 * it fails after it began (response.c and the writers use api_error_object for that).
 *
 * Invariants:
 *   1. Every code maps to one row; an unknown code gets the internal-error row (500).
 *   2. OpenAI chat and Responses share OpenAI's shape, {"error":{"message","type","param":
 *      null,"code"}}; Anthropic's is {"type":"error","error":{"type","message"}}.
 *   3. The context-overflow message keeps the wording each API's clients parse.
 */
#include "api/api_int.h"

#include <stdio.h>

/* Error code → HTTP status and each API's error type. OpenAI's 429 uses its own rate-limit
 * shape (type "requests", code "rate_limit_exceeded"); SDKs pick the exception class from
 * the status, the types are for humans and logs. */
static const struct api_error_info error_table[] = {
    /* code               http  OpenAI type              OpenAI code            Anthropic type */
    {HS_ERR_FORMAT,       400, "invalid_request_error", NULL,                  "invalid_request_error"},
    {HS_ERR_UNSUPPORTED,  400, "invalid_request_error", NULL,                  "invalid_request_error"},
    {HS_ERR_INVALID,      400, "invalid_request_error", NULL,                  "invalid_request_error"},
    {HS_ERR_LIMIT,        400, "invalid_request_error", NULL,                  "invalid_request_error"},
    {HS_ERR_NOT_FOUND,    404, "invalid_request_error", NULL,                  "not_found_error"},
    {HS_ERR_IO,           500, "server_error",          NULL,                  "api_error"},
    {HS_ERR_NOMEM,        503, "server_error",          NULL,                  "overloaded_error"},
    {API_ERR_AUTH,        401, "invalid_request_error", "invalid_api_key",     "authentication_error"},
    {API_ERR_ROUTE,       404, "invalid_request_error", NULL,                  "not_found_error"},
    {API_ERR_METHOD,      405, "invalid_request_error", NULL,                  "invalid_request_error"},
    {API_ERR_TOO_LARGE,   413, "invalid_request_error", NULL,                  "request_too_large"},
    {API_ERR_QUEUE_FULL,  429, "requests",              "rate_limit_exceeded", "rate_limit_error"},
    {API_ERR_OVERLOADED,  503, "server_error",          NULL,                  "overloaded_error"},
    {API_ERR_FORBIDDEN,   403, "invalid_request_error", NULL,                  "permission_error"},
    {API_ERR_MEDIA_TYPE,  415, "invalid_request_error", NULL,                  "invalid_request_error"},
    {API_ERR_HEADERS_TOO_LARGE, 431, "invalid_request_error", NULL,            "request_too_large"},
    {API_ERR_HTTP_VERSION, 505, "invalid_request_error", NULL,                 "invalid_request_error"},
    {API_ERR_CONTEXT,     400, "invalid_request_error", "context_length_exceeded", "invalid_request_error"},
    {API_ERR_INTERNAL,    500, "server_error",          NULL,                  "api_error"},
};

const struct api_error_info *api_error_info(int code)
{
    size_t n = sizeof error_table / sizeof error_table[0];
    for (size_t i = 0; i < n; i++)
        if (error_table[i].code == code) return &error_table[i];
    return &error_table[n - 1]; /* API_ERR_INTERNAL */
}

void api_context_error(enum api_kind kind, int64_t n_prompt, int64_t n_ctx, char *buf, size_t size)
{
    if (kind == API_KIND_ANTHROPIC_MESSAGES)
        snprintf(buf, size, "prompt is too long: %lld tokens > %lld maximum (headstart: the context holds %lld "
                 "tokens, prompt and output)", (long long)n_prompt, (long long)n_ctx, (long long)n_ctx);
    else
        snprintf(buf, size, "This model's maximum context length is %lld tokens. However, your messages resulted "
                 "in %lld tokens. Please reduce the length of the messages. (headstart: the context holds "
                 "prompt and output)", (long long)n_ctx, (long long)n_prompt);
}

json_t *api_error_object(enum api_kind kind, const struct api_error_info *e, const char *message)
{
    json_t *err = json_object();
    if (kind == API_KIND_ANTHROPIC_MESSAGES) {
        json_object_set_new(err, "type", json_string(e->anthropic_type));
        json_object_set_new(err, "message", api_jstr(message));
        json_t *root = json_object();
        json_object_set_new(root, "type", json_string("error"));
        json_object_set_new(root, "error", err);
        return root;
    }
    json_object_set_new(err, "message", api_jstr(message));
    json_object_set_new(err, "type", json_string(e->openai_type));
    json_object_set_new(err, "param", json_null());
    json_object_set_new(err, "code", e->openai_code ? json_string(e->openai_code) : json_null());
    json_t *root = json_object();
    json_object_set_new(root, "error", err);
    return root;
}

int api_error_write(enum api_kind kind, int code, const char *message, struct strbuf *out)
{
    const struct api_error_info *e = api_error_info(code);
    api_json_steal(out, api_error_object(kind, e, message));
    return e->http_status;
}
