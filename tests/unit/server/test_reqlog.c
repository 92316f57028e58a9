/* test_reqlog.c — the per-request log line (reqlog.c) without a server: the text and JSON
 * forms carry every field of a request that ran, leave out what a refused one does not have,
 * and the JSON line (hs_log_record in JSON mode, read back from stderr) parses as one object
 * with time and level; a body appears only when given. */
#include <criterion/criterion.h>

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "server/server_int.h"

static json_t *members(const char *json_fields)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "{%s}", json_fields);
    json_error_t e;
    json_t *j = json_loads(buf, 0, &e);
    cr_assert_not_null(j, "not JSON: %s (%s)", buf, e.text);
    return j;
}

Test(reqlog, a_request_that_ran)
{
    struct reqlog r = { .id = "chatcmpl-1", .api = "chat", .model = "m", .status = 200, .ran = true,
                        .prompt_tokens = 1234, .cached_tokens = 1200, .generated_tokens = 40,
                        .cache_source = "ram", .ttft_ms = 120.4, .total_ms = 2301.7, .stop_reason = "length",
                        .first_logits = "ab12", .client = "127.0.0.1:53422" };
    struct strbuf t, j;
    strbuf_init(&t);
    strbuf_init(&j);
    reqlog_format(&r, &t, &j);
    cr_assert_str_eq(t.buf, "request chatcmpl-1 api=chat model=m status=200 prompt=1234 cached=1200 (ram) "
                            "generated=40 ttft=120 ms total=2302 ms stop=length client=127.0.0.1:53422");
    json_t *o = members(j.buf);
    cr_assert_str_eq(json_string_value(json_object_get(o, "event")), "request");
    cr_assert_str_eq(json_string_value(json_object_get(o, "id")), "chatcmpl-1");
    cr_assert_eq(json_integer_value(json_object_get(o, "status")), 200);
    cr_assert_eq(json_integer_value(json_object_get(o, "prompt_tokens")), 1234);
    cr_assert_eq(json_integer_value(json_object_get(o, "cached_tokens")), 1200);
    cr_assert_eq(json_integer_value(json_object_get(o, "generated_tokens")), 40);
    cr_assert_str_eq(json_string_value(json_object_get(o, "cache_source")), "ram");
    cr_assert_float_eq(json_number_value(json_object_get(o, "ttft_ms")), 120.4, 1e-9);
    cr_assert_str_eq(json_string_value(json_object_get(o, "stop_reason")), "length");
    cr_assert_str_eq(json_string_value(json_object_get(o, "first_logits_sha256")), "ab12");
    cr_assert_str_eq(json_string_value(json_object_get(o, "client")), "127.0.0.1:53422");
    cr_assert_null(json_object_get(o, "body"), "no body unless asked");
    json_decref(o);
    strbuf_free(&t);
    strbuf_free(&j);
}

Test(reqlog, a_refused_request_and_a_body)
{
    const char body[] = "{\"messages\":\"\\u00e9\"}";
    struct reqlog r = { .api = "messages", .model = "m", .status = 400, .ran = false, .total_ms = 0.4,
                        .client = "127.0.0.1:1", .error = "messages: expected a non-empty array",
                        .body = body, .body_len = sizeof body - 1 };
    struct strbuf t, j;
    strbuf_init(&t);
    strbuf_init(&j);
    reqlog_format(&r, &t, &j);
    cr_assert_str_eq(t.buf, "request - api=messages model=m status=400 total=0 ms client=127.0.0.1:1 "
                            "error=\"messages: expected a non-empty array\" body={\"messages\":\"\\u00e9\"}");
    json_t *o = members(j.buf);
    cr_assert_null(json_object_get(o, "prompt_tokens"), "a refused request has no token numbers");
    cr_assert_null(json_object_get(o, "stop_reason"));
    cr_assert_null(json_object_get(o, "id"));
    cr_assert_str_eq(json_string_value(json_object_get(o, "body")), body);
    json_decref(o);
    strbuf_free(&t);
    strbuf_free(&j);
}

/* The JSON log format: each line one object with time (ISO 8601 UTC) and level, for a
 * record and for an ordinary message alike. */
Test(reqlog, json_lines_parse)
{
    char path[] = "/tmp/hs-reqlog.XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    fflush(stderr);
    int saved = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    hs_log_set_format(HS_LOG_FORMAT_JSON);
    struct reqlog r = { .id = "msg_1", .api = "messages", .status = 200, .ran = true, .cache_source = "disk",
                        .ttft_ms = -1, .total_ms = 5 };
    reqlog_write(&r);
    log_info("plain \"quoted\" message");
    hs_log_set_format(HS_LOG_FORMAT_TEXT);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    FILE *f = fdopen(fd, "r");
    rewind(f);
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        json_error_t e;
        json_t *o = json_loads(line, 0, &e);
        cr_assert_not_null(o, "line %d is not JSON: %s", n, line);
        const char *time = json_string_value(json_object_get(o, "time"));
        cr_assert(time && strlen(time) == 24 && time[10] == 'T' && time[23] == 'Z', "time %s", time ? time : "-");
        cr_assert_str_eq(json_string_value(json_object_get(o, "level")), "info");
        if (n == 0) {
            cr_assert_str_eq(json_string_value(json_object_get(o, "event")), "request");
            cr_assert_null(json_object_get(o, "ttft_ms"), "no token: no ttft");
        } else {
            cr_assert_str_eq(json_string_value(json_object_get(o, "msg")), "plain \"quoted\" message");
        }
        json_decref(o);
        n++;
    }
    fclose(f);
    unlink(path);
    cr_assert_eq(n, 2);
}
