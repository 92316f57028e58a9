/* test_metrics.c — /metrics' cancel counters without a model or sockets: metrics_cancel puts
 * a cancelled request at the stage its report shows (queue, prefill with the tokens it left,
 * generation), ignores reports that were not cancelled, and metrics_write prints every stage
 * (zeros too) and the token count in Prometheus text. */
#include <criterion/criterion.h>

#include "server/server_int.h"

#include <stdlib.h>
#include <string.h>

static void mx_init(struct metrics *m)
{
    memset(m, 0, sizeof(*m));
    pthread_mutex_init(&m->mu, NULL);
}

/* The value of the sample line NAME (labels included) in text, or -1 when absent. */
static long long mx_value(const char *text, const char *name)
{
    size_t k = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (!strncmp(p, name, k) && p[k] == ' ') return atoll(p + k + 1);
    }
    return -1;
}

static struct session_report mx_report(enum session_stop stop, int64_t prompt, int64_t cached, int64_t prefilled,
                                       int64_t n_output)
{
    struct session_report r = { 0 };
    r.stop_reason = stop;
    r.prompt_tokens = prompt;
    r.cached_tokens = cached;
    r.prefilled_tokens = prefilled;
    r.n_output = n_output;
    return r;
}

/* Write m's exposition and check the cancel families against the expected numbers (the
 * other families stay: the queue depth given, an empty TTFT histogram). */
static void mx_check(struct metrics *m, long long queue, long long prefill, long long generation, long long tokens)
{
    static const char *const routes[] = { "/", "/v1/chat/completions" };
    struct strbuf out;
    strbuf_init(&out);
    metrics_write(m, routes, 2, 0, 0, &out);
    strbuf_putc(&out, '\0');
    const char *t = out.buf;
    cr_assert_eq(mx_value(t, "headstart_cancelled_requests_total{stage=\"queue\"}"), queue, "%s", t);
    cr_assert_eq(mx_value(t, "headstart_cancelled_requests_total{stage=\"prefill\"}"), prefill, "%s", t);
    cr_assert_eq(mx_value(t, "headstart_cancelled_requests_total{stage=\"generation\"}"), generation, "%s", t);
    cr_assert_eq(mx_value(t, "headstart_cancelled_prefill_tokens_total"), tokens, "%s", t);
    cr_assert(strstr(t, "# TYPE headstart_cancelled_requests_total counter\n"));
    cr_assert(strstr(t, "# TYPE headstart_cancelled_prefill_tokens_total counter\n"));
    cr_assert_eq(mx_value(t, "headstart_queue_depth"), 0);
    cr_assert(strstr(t, "headstart_ttft_seconds_count 0\n"));
    strbuf_free(&out);
}

Test(server_metrics, zero_stages_are_printed)
{
    struct metrics m;
    mx_init(&m);
    mx_check(&m, 0, 0, 0, 0);
    pthread_mutex_destroy(&m.mu);
}

Test(server_metrics, cancel_stages)
{
    struct metrics m;
    mx_init(&m);
    /* skipped in the queue (no report), and cancelled from the start hook: queue */
    metrics_cancel(&m, NULL);
    struct session_report r = mx_report(SESSION_STOP_CANCELLED, 900, 100, 0, 0);
    metrics_cancel(&m, &r);
    /* cut after 300 of the 800 tokens to compute: prefill, 500 left */
    r = mx_report(SESSION_STOP_CANCELLED, 900, 100, 300, 0);
    metrics_cancel(&m, &r);
    /* cut after 1 token with nothing restored: 41 left */
    r = mx_report(SESSION_STOP_CANCELLED, 42, 0, 1, 0);
    metrics_cancel(&m, &r);
    /* the prefill ran to the end; the cancel came with (or after) the first token */
    r = mx_report(SESSION_STOP_CANCELLED, 900, 100, 800, 1);
    metrics_cancel(&m, &r);
    r = mx_report(SESSION_STOP_CANCELLED, 900, 100, 800, 0);
    metrics_cancel(&m, &r);
    /* requests that ended otherwise are not cancels */
    static const enum session_stop other[] = { SESSION_STOP_END, SESSION_STOP_LENGTH, SESSION_STOP_SEQUENCE };
    for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++) {
        r = mx_report(other[i], 900, 0, 300, 0);
        metrics_cancel(&m, &r);
    }
    cr_assert_eq(m.cancelled[METRICS_CANCEL_QUEUE], 2);
    cr_assert_eq(m.cancelled[METRICS_CANCEL_PREFILL], 2);
    cr_assert_eq(m.cancelled[METRICS_CANCEL_GENERATION], 2);
    cr_assert_eq(m.cancelled_prefill_tokens, 500 + 41);
    mx_check(&m, 2, 2, 2, 541);
    pthread_mutex_destroy(&m.mu);
}
