/*
 * request.c — one API request body into one complete request (api.h's struct api_request):
 * the conversation through its dialect's codec (chat_from_openai / chat_from_anthropic /
 * chat_from_responses), then every other field the server acts on — stream and its options,
 * the output cap, sampling, the extensions — checked once, here. The server's connection
 * thread calls it before a job is queued (a 400 naming the field), `headstart replay` for
 * each logged request; nothing downstream looks at the body again.
 *
 * Invariants:
 *   1. Every field is type- and range-checked before use; a bad one is HS_ERR_INVALID
 *      naming it, a field whose meaning is not implemented HS_ERR_UNSUPPORTED naming it
 *      (n other than 1, logprobs true, top_logprobs above 0, structured output): refused,
 *      never silently ignored, because the client would misread the answer.
 *   2. Absent or null leaves a field at its default: sampling fields keep the caller's
 *      defaults (api_request_parse's `sampling` argument) and say so in `given`.
 *   3. The output cap follows each API's own name: max_tokens in all three, then
 *      max_completion_tokens (OpenAI chat) or max_output_tokens (Responses), the later one
 *      winning when a body sets both; 0 when none is set (the server's default applies).
 *   4. On error *out holds nothing to free.
 */
#include "api/api.h"

#include <string.h>

/* A number field: absent or null leaves *out; otherwise it must lie in [lo, hi]. */
static int field_num(const json_t *body, const char *key, double lo, double hi, double *out, bool *given,
                     struct hs_err *err)
{
    const json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v)) return HS_OK;
    if (!json_is_number(v)) return hs_err_set(err, HS_ERR_INVALID, "'%s' must be a number", key);
    double d = json_number_value(v);
    if (!(d >= lo && d <= hi)) return hs_err_set(err, HS_ERR_INVALID, "'%s' must be between %g and %g, got %g", key, lo, hi, d);
    *out = d;
    if (given) *given = true;
    return HS_OK;
}

static int field_int(const json_t *body, const char *key, int64_t lo, int64_t hi, int64_t *out, bool *given,
                     struct hs_err *err)
{
    const json_t *v = json_object_get(body, key);
    if (!v || json_is_null(v)) return HS_OK;
    if (!json_is_integer(v)) return hs_err_set(err, HS_ERR_INVALID, "'%s' must be an integer", key);
    json_int_t i = json_integer_value(v);
    if (i < lo || i > hi)
        return hs_err_set(err, HS_ERR_INVALID, "'%s' must be between %lld and %lld, got %lld", key,
                          (long long)lo, (long long)hi, (long long)i);
    *out = i;
    if (given) *given = true;
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

/* A format object ({"type": ...}) that must ask for plain text: response_format (chat) and
 * text.format (Responses). Structured output (json_object, json_schema) is not implemented,
 * and answering a schema request with free text would break the client silently. */
static int field_text_format(const json_t *v, const char *name, struct hs_err *err)
{
    if (!v || json_is_null(v)) return HS_OK;
    if (!json_is_object(v)) return hs_err_set(err, HS_ERR_INVALID, "'%s' must be an object", name);
    const char *t = json_string_value(json_object_get(v, "type"));
    if (!t) return hs_err_set(err, HS_ERR_INVALID, "'%s.type' must be a string", name);
    if (strcmp(t, "text"))
        return hs_err_set(err, HS_ERR_UNSUPPORTED, "'%s' of type '%.64s' is not supported: headstart answers in "
                          "free text only (type 'text')", name, t);
    return HS_OK;
}

/* Fields that would change the answer's shape and are not implemented (invariant 1;
 * n: 1, logprobs: false and top_logprobs: 0 stay accepted). */
static int unsupported_fields(const json_t *body, enum api_kind kind, struct hs_err *err)
{
    if (kind == API_KIND_ANTHROPIC_MESSAGES) return HS_OK;
    const json_t *v;
    if (kind == API_KIND_OPENAI_CHAT) {
        int64_t n = 1;
        int rc = field_int(body, "n", 1, INT64_MAX, &n, NULL, err);
        if (rc) return rc;
        if (n != 1) return hs_err_set(err, HS_ERR_UNSUPPORTED, "'n' must be 1: headstart generates one choice per request, got %lld", (long long)n);
        bool lp = false;
        if ((rc = field_bool(body, "logprobs", &lp, err))) return rc;
        if (lp) return hs_err_set(err, HS_ERR_UNSUPPORTED, "'logprobs' is not supported (send false or leave it out)");
        if ((rc = field_text_format(json_object_get(body, "response_format"), "response_format", err))) return rc;
    }
    int64_t top = 0;
    int rc = field_int(body, "top_logprobs", 0, 20, &top, NULL, err);
    if (rc) return rc;
    if (top) return hs_err_set(err, HS_ERR_UNSUPPORTED, "'top_logprobs' is not supported (send 0 or leave it out)");
    if (kind == API_KIND_OPENAI_RESPONSES && (v = json_object_get(body, "text")) && !json_is_null(v)) {
        if (!json_is_object(v)) return hs_err_set(err, HS_ERR_INVALID, "'text' must be an object");
        return field_text_format(json_object_get(v, "format"), "text.format", err);
    }
    return HS_OK;
}

/* stream, the output cap, sampling and the extensions (invariants 2 and 3). */
static int request_fields(const json_t *body, struct api_request *r, struct hs_err *err)
{
    const int64_t big = INT64_C(1) << 40;
    struct api_sampling *s = &r->sampling;
    int rc = HS_OK;
    if (!rc) rc = field_bool(body, "stream", &r->stream, err);
    if (!rc) rc = field_bool(body, "ignore_eos", &r->ignore_eos, err);
    if (!rc) rc = field_int(body, "max_tokens", 1, big, &r->max_tokens, NULL, err);
    if (!rc && r->kind == API_KIND_OPENAI_CHAT) rc = field_int(body, "max_completion_tokens", 1, big, &r->max_tokens, NULL, err);
    if (!rc && r->kind == API_KIND_OPENAI_RESPONSES) rc = field_int(body, "max_output_tokens", 1, big, &r->max_tokens, NULL, err);
    if (!rc) rc = field_num(body, "temperature", 0, 100, &s->temperature, NULL, err);
    if (!rc) rc = field_num(body, "top_p", 0, 1, &s->top_p, NULL, err);
    if (!rc) rc = field_int(body, "top_k", 0, INT32_MAX, &s->top_k, NULL, err);
    if (!rc) rc = field_num(body, "min_p", 0, 1, &s->min_p, NULL, err);
    if (!rc) rc = field_num(body, "presence_penalty", -2, 2, &s->presence_penalty, NULL, err);
    if (!rc) rc = field_num(body, "frequency_penalty", -2, 2, &s->frequency_penalty, NULL, err);
    if (!rc) rc = field_int(body, "seed", INT64_MIN, INT64_MAX, &s->seed, &s->seed_given, err);
    if (!rc) rc = unsupported_fields(body, r->kind, err);
    if (!rc && r->kind == API_KIND_OPENAI_CHAT) {
        const json_t *so = json_object_get(body, "stream_options");
        if (so && !json_is_null(so)) {
            if (!json_is_object(so)) rc = hs_err_set(err, HS_ERR_INVALID, "'stream_options' must be an object");
            else rc = field_bool(so, "include_usage", &r->include_usage, err);
        }
    }
    if (rc) return rc;
    if (s->top_p <= 0) return hs_err_set(err, HS_ERR_INVALID, "'top_p' must be above 0");
    return HS_OK;
}

int api_request_parse(enum api_kind kind, const json_t *body, const struct api_sampling *sampling,
                      struct api_request *out, struct hs_err *err)
{
    memset(out, 0, sizeof(*out));
    out->kind = kind;
    out->sampling = *sampling;
    out->sampling.seed_given = false;
    int rc = kind == API_KIND_OPENAI_CHAT        ? chat_from_openai(body, &out->chat, err)
             : kind == API_KIND_OPENAI_RESPONSES ? chat_from_responses(body, &out->chat, err)
                                                 : chat_from_anthropic(body, &out->chat, err);
    if (rc == HS_OK) rc = request_fields(body, out, err);
    if (rc != HS_OK) api_request_free(out);
    return rc;
}

void api_request_free(struct api_request *r)
{
    if (!r) return;
    chat_request_free(&r->chat);
    memset(r, 0, sizeof(*r));
}
