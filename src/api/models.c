/*
 * models.c — the two bodies that are not a model's response: GET /v1/models (OpenAI's list
 * or Anthropic's page, by the route's API) and POST /v1/messages/count_tokens.
 *
 * Invariants:
 *   1. Pure functions of their arguments (the caller gives `created`; no clock read here).
 *   2. Anthropic's created_at is RFC 3339 UTC of the same instant; Responses clients get
 *      OpenAI's shape.
 */
#include "api/api_int.h"

#include <time.h>

void api_models_write(enum api_kind kind, const char *const *names, int n_names, int64_t created,
                      struct strbuf *out)
{
    json_t *data = json_array();
    char stamp[32] = "1970-01-01T00:00:00Z";
    time_t t = (time_t)created;
    struct tm tm;
    if (gmtime_r(&t, &tm)) strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &tm);
    for (int i = 0; i < n_names; i++) {
        json_t *m = json_object();
        if (kind == API_KIND_ANTHROPIC_MESSAGES) {
            json_object_set_new(m, "type", json_string("model"));
            json_object_set_new(m, "id", api_jstr(names[i]));
            json_object_set_new(m, "display_name", api_jstr(names[i]));
            json_object_set_new(m, "created_at", json_string(stamp));
        } else {
            json_object_set_new(m, "id", api_jstr(names[i]));
            json_object_set_new(m, "object", json_string("model"));
            json_object_set_new(m, "created", json_integer(created));
            json_object_set_new(m, "owned_by", json_string("headstart"));
        }
        json_array_append_new(data, m);
    }
    json_t *root = json_object();
    if (kind == API_KIND_ANTHROPIC_MESSAGES) {
        json_object_set_new(root, "data", data);
        json_object_set_new(root, "has_more", json_false());
        json_object_set_new(root, "first_id", n_names > 0 ? api_jstr(names[0]) : json_null());
        json_object_set_new(root, "last_id", n_names > 0 ? api_jstr(names[n_names - 1]) : json_null());
    } else {
        json_object_set_new(root, "object", json_string("list"));
        json_object_set_new(root, "data", data);
    }
    api_json_steal(out, root);
}

void api_count_tokens_write(int64_t input_tokens, struct strbuf *out)
{
    strbuf_printf(out, "{\"input_tokens\":%lld}", (long long)(input_tokens < 0 ? 0 : input_tokens));
}
