/*
 * metrics.c — the server's numbers and their Prometheus text (/metrics): requests by route
 * and status class, tokens, prefill and decode time, time to first token, cancels by where
 * they stopped, the model's identity and files, and the bank's and its disk tier's
 * statistics (copies the engine thread takes after each job, plus the disk tier read live).
 *
 * Invariants:
 *   1. Every counter is updated and read under metrics.mu; a scrape never touches the bank
 *      itself (the engine thread owns it), only the copies, and the disk tier's own
 *      thread-safe stats call.
 *   2. Counter names and HELP texts are part of the interface (dashboards, tests): they
 *      change only with a documented reason.
 */
#include "server/server_int.h"

#include "sys/sys.h"

#include <string.h>

/* TTFT bucket bounds in seconds (Prometheus `le`); the last bucket is +Inf. */
static const double ttft_bounds[METRICS_TTFT_BUCKETS] = { 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60 };

void metrics_request(struct metrics *m, int route, int status)
{
    if (route < 0 || route >= 16) return;
    int cls = status >= 100 && status < 600 ? status / 100 : 0;
    pthread_mutex_lock(&m->mu);
    m->requests[route][cls]++;
    pthread_mutex_unlock(&m->mu);
}

void metrics_media(struct metrics *m, int n)
{
    pthread_mutex_lock(&m->mu);
    m->media_placeholders += n;
    pthread_mutex_unlock(&m->mu);
}

void metrics_tokens(struct metrics *m, int64_t prompt, int64_t cached, int64_t generated,
                    double prefill_s, double decode_s, double ttft_s)
{
    pthread_mutex_lock(&m->mu);
    m->prompt_tokens += prompt;
    m->cached_tokens += cached;
    m->generated_tokens += generated;
    m->prefill_seconds += prefill_s;
    m->decode_seconds += decode_s;
    if (ttft_s >= 0) {
        int b = 0;
        while (b < METRICS_TTFT_BUCKETS && ttft_s > ttft_bounds[b]) b++;
        m->ttft_counts[b]++;
        m->ttft_sum += ttft_s;
        m->ttft_n++;
    }
    pthread_mutex_unlock(&m->mu);
}

void metrics_cancel(struct metrics *m, const struct session_report *r)
{
    if (r && r->stop_reason != SESSION_STOP_CANCELLED) return;
    enum metrics_cancel_stage stage = METRICS_CANCEL_QUEUE;
    int64_t left = 0;
    if (r) {
        /* the prefill computes [cached, prompt); a cut one stopped between its chunks */
        int64_t want = r->prompt_tokens - r->cached_tokens;
        if (r->n_output > 0 || (want > 0 && r->prefilled_tokens >= want)) {
            stage = METRICS_CANCEL_GENERATION;
        } else if (r->prefilled_tokens > 0) {
            stage = METRICS_CANCEL_PREFILL;
            left = want - r->prefilled_tokens;
        }
    }
    pthread_mutex_lock(&m->mu);
    m->cancelled[stage]++;
    m->cancelled_prefill_tokens += left;
    pthread_mutex_unlock(&m->mu);
}

void metrics_write(struct metrics *m, const char *const *route_names, int n_routes,
                   int running, int waiting, struct strbuf *out)
{
    int queue_depth = running + waiting;
    static const char *const cls_names[6] = { "other", "1xx", "2xx", "3xx", "4xx", "5xx" };
    pthread_mutex_lock(&m->mu);
    strbuf_puts(out, "# HELP headstart_requests_total HTTP requests by route and status class.\n"
                     "# TYPE headstart_requests_total counter\n");
    for (int r = 0; r < n_routes && r < 16; r++)
        for (int c = 0; c < 6; c++)
            if (m->requests[r][c])
                strbuf_printf(out, "headstart_requests_total{route=\"%s\",status=\"%s\"} %lld\n",
                              route_names[r], cls_names[c], (long long)m->requests[r][c]);
    strbuf_printf(out,
                  "# HELP headstart_queue_depth Requests waiting or running.\n"
                  "# TYPE headstart_queue_depth gauge\nheadstart_queue_depth %d\n"
                  "# HELP headstart_prompt_tokens_total Prompt tokens, cached included.\n"
                  "# TYPE headstart_prompt_tokens_total counter\nheadstart_prompt_tokens_total %lld\n"
                  "# HELP headstart_cached_tokens_total Prompt tokens restored instead of computed.\n"
                  "# TYPE headstart_cached_tokens_total counter\nheadstart_cached_tokens_total %lld\n"
                  "# HELP headstart_generated_tokens_total Generated tokens.\n"
                  "# TYPE headstart_generated_tokens_total counter\nheadstart_generated_tokens_total %lld\n"
                  "# HELP headstart_prefill_seconds_total Seconds spent in prefill.\n"
                  "# TYPE headstart_prefill_seconds_total counter\nheadstart_prefill_seconds_total %.6f\n"
                  "# HELP headstart_decode_seconds_total Seconds spent in decode.\n"
                  "# TYPE headstart_decode_seconds_total counter\nheadstart_decode_seconds_total %.6f\n"
                  "# HELP headstart_ttft_seconds Time from submit to the first generated token.\n"
                  "# TYPE headstart_ttft_seconds histogram\n",
                  queue_depth, (long long)m->prompt_tokens, (long long)m->cached_tokens,
                  (long long)m->generated_tokens, m->prefill_seconds, m->decode_seconds);
    int64_t cum = 0;
    for (int b = 0; b < METRICS_TTFT_BUCKETS; b++) {
        cum += m->ttft_counts[b];
        strbuf_printf(out, "headstart_ttft_seconds_bucket{le=\"%g\"} %lld\n", ttft_bounds[b], (long long)cum);
    }
    cum += m->ttft_counts[METRICS_TTFT_BUCKETS];
    strbuf_printf(out, "headstart_ttft_seconds_bucket{le=\"+Inf\"} %lld\nheadstart_ttft_seconds_sum %.6f\n"
                       "headstart_ttft_seconds_count %lld\n",
                  (long long)cum, m->ttft_sum, (long long)m->ttft_n);
    static const char *const stage_names[METRICS_CANCEL_COUNT] = { "queue", "prefill", "generation" };
    strbuf_printf(out,
                  "# HELP headstart_running_sequences Requests admitted and not ended (computing, or parked "
                  "waiting for another's head).\n# TYPE headstart_running_sequences gauge\n"
                  "headstart_running_sequences %d\n"
                  "# HELP headstart_waiting_requests Requests queued for admission.\n"
                  "# TYPE headstart_waiting_requests gauge\nheadstart_waiting_requests %d\n"
                  "# HELP headstart_steps_total Forward steps (each carries every running request's work).\n"
                  "# TYPE headstart_steps_total counter\nheadstart_steps_total %lld\n"
                  "# HELP headstart_step_tokens_total Tokens computed in forward steps (prefill + decode).\n"
                  "# TYPE headstart_step_tokens_total counter\nheadstart_step_tokens_total %lld\n"
                  "# HELP headstart_step_seconds_total Seconds spent in forward steps.\n"
                  "# TYPE headstart_step_seconds_total counter\nheadstart_step_seconds_total %.6f\n"
                  "# HELP headstart_prefill_tokens_total Prompt tokens computed (not restored).\n"
                  "# TYPE headstart_prefill_tokens_total counter\nheadstart_prefill_tokens_total %lld\n"
                  "# HELP headstart_decode_tokens_total Generated tokens fed back through a forward step.\n"
                  "# TYPE headstart_decode_tokens_total counter\nheadstart_decode_tokens_total %lld\n"
                  "# HELP headstart_head_parked_total Requests that waited for another running request to "
                  "compute their head.\n# TYPE headstart_head_parked_total counter\nheadstart_head_parked_total %lld\n"
                  "# HELP headstart_head_shared_total Requests that restored a head another running request "
                  "computed for them.\n# TYPE headstart_head_shared_total counter\nheadstart_head_shared_total %lld\n"
                  "# HELP headstart_head_shared_tokens_total Head tokens those requests did not compute.\n"
                  "# TYPE headstart_head_shared_tokens_total counter\nheadstart_head_shared_tokens_total %lld\n"
                  "# HELP headstart_seq_bytes Sequence state reserved by the running requests (--seq-ram).\n"
                  "# TYPE headstart_seq_bytes gauge\nheadstart_seq_bytes %llu\n"
                  "# HELP headstart_seq_budget_bytes The --seq-ram budget.\n"
                  "# TYPE headstart_seq_budget_bytes gauge\nheadstart_seq_budget_bytes %llu\n",
                  running, waiting, (long long)m->steps, (long long)m->step_tokens, m->step_seconds,
                  (long long)m->prefill_tokens, (long long)m->decode_tokens, (long long)m->head_parked,
                  (long long)m->head_shared, (long long)m->head_shared_tokens, (unsigned long long)m->seq_bytes,
                  (unsigned long long)m->seq_budget);
    strbuf_puts(out, "# HELP headstart_cancelled_requests_total Requests cancelled (the client went away or the "
                     "server was stopping), by where they stopped.\n"
                     "# TYPE headstart_cancelled_requests_total counter\n");
    for (int st = 0; st < METRICS_CANCEL_COUNT; st++)
        strbuf_printf(out, "headstart_cancelled_requests_total{stage=\"%s\"} %lld\n", stage_names[st],
                      (long long)m->cancelled[st]);
    strbuf_printf(out,
                  "# HELP headstart_cancelled_prefill_tokens_total Prompt tokens left uncomputed by prefills a "
                  "cancel cut part-way.\n"
                  "# TYPE headstart_cancelled_prefill_tokens_total counter\n"
                  "headstart_cancelled_prefill_tokens_total %lld\n"
                  "# HELP headstart_tool_media_placeholders_total Images, documents and files inside tool "
                  "results that were replaced by a text placeholder (the model reads text only).\n"
                  "# TYPE headstart_tool_media_placeholders_total counter\n"
                  "headstart_tool_media_placeholders_total %lld\n",
                  (long long)m->cancelled_prefill_tokens, (long long)m->media_placeholders);
    if (m->identity_state) {
        static const char *const names[] = { "off", "pending", "known", "failed" };
        int st = atomic_load(m->identity_state);
        strbuf_puts(out, "# HELP headstart_model_identity The model identity's state (1 for the current one): "
                         "pending while the model is hashed (the disk tier waits), failed (the disk tier stays "
                         "off), off without a disk tier.\n# TYPE headstart_model_identity gauge\n");
        for (int i = 0; i < 4; i++)
            strbuf_printf(out, "headstart_model_identity{state=\"%s\"} %d\n", names[i], st == i);
    }
    strbuf_printf(out,
                  "# HELP headstart_model_changed 1 once a model file changed in place under the server (the "
                  "bank is off for it).\n# TYPE headstart_model_changed gauge\nheadstart_model_changed %d\n"
                  "# HELP headstart_model_faults_total SIGBUS faults on the model's mapping (its file was "
                  "truncated; the requests failed).\n# TYPE headstart_model_faults_total counter\n"
                  "headstart_model_faults_total %llu\n"
                  "# HELP headstart_requests_bank_off_total Requests served without the bank (model_changed) "
                  "or without its disk tier (model_identity_unknown).\n"
                  "# TYPE headstart_requests_bank_off_total counter\n"
                  "headstart_requests_bank_off_total{reason=\"model_changed\"} %lld\n"
                  "headstart_requests_bank_off_total{reason=\"model_identity_unknown\"} %lld\n",
                  m->model_changed ? 1 : 0, (unsigned long long)sys_file_map_faults(), (long long)m->bank_off[0],
                  (long long)m->bank_off[1]);
    if (m->have_bank) bank_stats_metrics(&m->bank, out);
    if (m->have_disk && m->disk_live) bank_disk_stats_get(m->disk_live, &m->disk); /* the state now */
    if (m->have_disk) bank_disk_stats_metrics(&m->disk, out);
    if (m->remote_live) {
        struct bank_remote_stats rs;
        bank_remote_stats_get(m->remote_live, &rs);
        bank_remote_stats_metrics(&rs, out);
    }
    pthread_mutex_unlock(&m->mu);
}

