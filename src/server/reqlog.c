/*
 * reqlog.c — one log line per finished request ([F11] item 6): what an operator needs to see
 * what the server did, without reading request bodies.
 *
 * Design note
 * -----------
 * The HTTP side fills a struct reqlog when a request's response is complete (its status is
 * known then, whether the request ran, was refused at parse time or was cancelled) and calls
 * reqlog_write. The numbers of a request that ran come from its session report, copied into
 * the job by the engine thread before it finished the job.
 *
 * Text line (default log format):
 *   HH:MM:SS.mmm info  request ID api=chat model=M status=200 prompt=P cached=C (ram)
 *     generated=G ttft=T ms total=T ms stop=length client=127.0.0.1:53422
 * JSON line (--log-format json), one object:
 *   {"time","level":"info","event":"request","id","api","model","status","prompt_tokens",
 *    "cached_tokens","cache_source","generated_tokens","ttft_ms","total_ms","stop_reason",
 *    "first_logits_sha256", "client", and "error" (a failed request's message) / "body" (only with --log-bodies)}
 * Fields a request does not have (a 400 never ran: no tokens, no stop) are left out of both.
 *
 * Invariants:
 *   1. Request bodies are user data: they appear only when the operator asked
 *      (--log-bodies), never in an error's message.
 *   2. One call, one line: the line is built whole and written by hs_log_record.
 */
#include "server/server_int.h"

#include <stdio.h>
#include <string.h>

void reqlog_format(const struct reqlog *r, struct strbuf *text, struct strbuf *json)
{
    struct jsonw w;
    jsonw_init(&w, json, 0);
    jsonw_key(&w, "event");
    jsonw_str(&w, "request");
    strbuf_printf(text, "request %s api=%s model=%s status=%d", r->id && *r->id ? r->id : "-", r->api,
                  r->model ? r->model : "-", r->status);
    if (r->id && *r->id) { jsonw_key(&w, "id"); jsonw_str(&w, r->id); }
    jsonw_key(&w, "api");
    jsonw_str(&w, r->api);
    if (r->model) { jsonw_key(&w, "model"); jsonw_str(&w, r->model); }
    jsonw_key(&w, "status");
    jsonw_int(&w, r->status);
    if (r->ran) {
        strbuf_printf(text, " prompt=%lld cached=%lld (%s) generated=%lld", (long long)r->prompt_tokens,
                      (long long)r->cached_tokens, r->cache_source ? r->cache_source : "none",
                      (long long)r->generated_tokens);
        jsonw_key(&w, "prompt_tokens"); jsonw_int(&w, r->prompt_tokens);
        jsonw_key(&w, "cached_tokens"); jsonw_int(&w, r->cached_tokens);
        jsonw_key(&w, "cache_source"); jsonw_str(&w, r->cache_source ? r->cache_source : "none");
        jsonw_key(&w, "generated_tokens"); jsonw_int(&w, r->generated_tokens);
        if (r->ttft_ms >= 0) {
            strbuf_printf(text, " ttft=%.0f ms", r->ttft_ms);
            jsonw_key(&w, "ttft_ms"); jsonw_double(&w, r->ttft_ms);
        }
    }
    strbuf_printf(text, " total=%.0f ms", r->total_ms);
    jsonw_key(&w, "total_ms");
    jsonw_double(&w, r->total_ms);
    if (r->stop_reason) {
        strbuf_printf(text, " stop=%s", r->stop_reason);
        jsonw_key(&w, "stop_reason"); jsonw_str(&w, r->stop_reason);
    }
    if (r->first_logits && *r->first_logits) {
        /* JSON only: the exactness fingerprint (the same request gives the same row alone
         * or in a crowd), for tests and audits rather than operators */
        jsonw_key(&w, "first_logits_sha256"); jsonw_str(&w, r->first_logits);
    }
    strbuf_printf(text, " client=%s", r->client && *r->client ? r->client : "-");
    if (r->client && *r->client) { jsonw_key(&w, "client"); jsonw_str(&w, r->client); }
    if (r->error && *r->error) {
        strbuf_printf(text, " error=\"%s\"", r->error);
        jsonw_key(&w, "error"); jsonw_str(&w, r->error);
    }
    if (r->body) {
        strbuf_puts(text, " body=");
        strbuf_append(text, r->body, r->body_len);
        jsonw_key(&w, "body"); jsonw_strn(&w, r->body, r->body_len);
    }
}

void reqlog_write(const struct reqlog *r)
{
    struct strbuf text, json;
    strbuf_init(&text);
    strbuf_init(&json);
    reqlog_format(r, &text, &json);
    hs_log_record(HS_LOG_INFO, text.buf, json.buf);
    strbuf_free(&text);
    strbuf_free(&json);
}
