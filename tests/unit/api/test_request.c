/* test_request.c — api_request_parse: one body into one complete request, every field
 * checked once (types, ranges, refused features by name), defaults kept for absent fields. */
#include <criterion/criterion.h>
#include <string.h>

#include "api/api.h"

static const struct api_sampling rq_defaults = { .temperature = 0.7, .top_p = 0.9, .top_k = 20, .min_p = 0.05 };

static int rq_parse(enum api_kind kind, const char *js, struct api_request *out, struct hs_err *err)
{
    json_error_t je;
    json_t *body = json_loads(js, 0, &je);
    cr_assert_not_null(body, "bad test JSON: %s", je.text);
    hs_err_clear(err);
    int rc = api_request_parse(kind, body, &rq_defaults, out, err);
    json_decref(body);
    return rc;
}

Test(api_request, fields_and_defaults)
{
    struct api_request r;
    struct hs_err err;
    cr_assert_eq(rq_parse(API_KIND_OPENAI_CHAT,
                          "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream\":true,"
                          "\"stream_options\":{\"include_usage\":true},\"max_tokens\":50,\"max_completion_tokens\":70,"
                          "\"temperature\":0,\"seed\":0,\"stop\":[\"x\"],\"ignore_eos\":true}",
                          &r, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(r.kind, API_KIND_OPENAI_CHAT);
    cr_assert(r.stream && r.include_usage && r.ignore_eos);
    cr_assert_eq(r.max_tokens, 70); /* max_completion_tokens wins over max_tokens */
    cr_assert_eq(r.sampling.temperature, 0.0);
    cr_assert_eq(r.sampling.top_p, 0.9); /* the default, untouched */
    cr_assert_eq(r.sampling.top_k, 20);
    cr_assert(r.sampling.seed_given);
    cr_assert_eq(r.sampling.seed, 0);
    cr_assert_eq(json_array_size(r.chat.stop), 1);
    api_request_free(&r);
    api_request_free(&r); /* zeroed: a no-op */

    cr_assert_eq(rq_parse(API_KIND_ANTHROPIC_MESSAGES,
                          "{\"max_tokens\":9,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}", &r, &err), HS_OK,
                 "%s", err.msg);
    cr_assert_eq(r.max_tokens, 9);
    cr_assert(!r.stream && !r.sampling.seed_given);
    api_request_free(&r);

    cr_assert_eq(rq_parse(API_KIND_OPENAI_RESPONSES, "{\"input\":\"hi\",\"max_output_tokens\":12}", &r, &err), HS_OK,
                 "%s", err.msg);
    cr_assert_eq(r.max_tokens, 12);
    api_request_free(&r);
}

Test(api_request, bad_fields_are_named)
{
    static const struct { enum api_kind kind; const char *body; int code; const char *name; } cases[] = {
        { API_KIND_OPENAI_CHAT, "{\"messages\":3}", HS_ERR_INVALID, "messages" },
        { API_KIND_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"temperature\":\"hot\"}", HS_ERR_INVALID, "temperature" },
        { API_KIND_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"top_p\":0}", HS_ERR_INVALID, "top_p" },
        { API_KIND_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":0}", HS_ERR_INVALID, "max_tokens" },
        { API_KIND_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"n\":2}", HS_ERR_UNSUPPORTED, "'n'" },
        { API_KIND_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"logprobs\":true}", HS_ERR_UNSUPPORTED, "logprobs" },
        { API_KIND_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"response_format\":{\"type\":\"json_object\"}}", HS_ERR_UNSUPPORTED,
          "response_format" },
        { API_KIND_OPENAI_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"stream_options\":1}", HS_ERR_INVALID, "stream_options" },
        { API_KIND_OPENAI_RESPONSES, "{\"input\":\"x\",\"text\":{\"format\":{\"type\":\"json_schema\"}}}",
          HS_ERR_UNSUPPORTED, "text.format" },
        { API_KIND_ANTHROPIC_MESSAGES, "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"top_k\":-1}", HS_ERR_INVALID, "top_k" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct api_request r;
        struct hs_err err;
        int rc = rq_parse(cases[i].kind, cases[i].body, &r, &err);
        cr_assert_eq(rc, cases[i].code, "case %zu: rc %d (%s)", i, rc, err.msg);
        cr_assert_not_null(strstr(err.msg, cases[i].name), "case %zu: '%s' does not name %s", i, err.msg, cases[i].name);
        cr_assert_null(r.chat.messages, "case %zu: nothing to free after an error", i);
    }
}
