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

/* ---- metrics ----------------------------------------------------------------------- */

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

/* The bank's numbers as of the last request (the engine thread copies them after each). */
static void metrics_write_bank(const struct bank_stats *b, struct strbuf *out)
{
    strbuf_printf(out,
                  "# HELP headstart_bank_entries Snapshots held by the session bank.\n"
                  "# TYPE headstart_bank_entries gauge\nheadstart_bank_entries %llu\n"
                  "# HELP headstart_bank_bytes Bytes held by the session bank (KV, snapshots, tokens).\n"
                  "# TYPE headstart_bank_bytes gauge\nheadstart_bank_bytes %llu\n"
                  "# HELP headstart_bank_budget_bytes The bank's RAM budget (0: unlimited).\n"
                  "# TYPE headstart_bank_budget_bytes gauge\nheadstart_bank_budget_bytes %llu\n"
                  "# HELP headstart_bank_lookups_total Bank lookups.\n"
                  "# TYPE headstart_bank_lookups_total counter\nheadstart_bank_lookups_total %llu\n"
                  "# HELP headstart_bank_hits_total Lookups that restored state.\n"
                  "# TYPE headstart_bank_hits_total counter\nheadstart_bank_hits_total %llu\n"
                  "# HELP headstart_bank_restored_tokens_total Prompt tokens restored from the bank.\n"
                  "# TYPE headstart_bank_restored_tokens_total counter\nheadstart_bank_restored_tokens_total %llu\n"
                  "# HELP headstart_bank_misses_total Lookups that restored nothing, by reason.\n"
                  "# TYPE headstart_bank_misses_total counter\n",
                  (unsigned long long)b->n_snaps, (unsigned long long)b->total_bytes, (unsigned long long)b->budget,
                  (unsigned long long)b->lookups, (unsigned long long)b->hits,
                  (unsigned long long)b->restored_tokens);
    for (int r = 0; r < BANK_REASON_COUNT; r++)
        strbuf_printf(out, "headstart_bank_misses_total{reason=\"%s\"} %llu\n", bank_reason_name((enum bank_reason)r),
                      (unsigned long long)b->misses[r]);
    strbuf_puts(out, "# HELP headstart_bank_evictions_total Bank evictions, by reason.\n"
                     "# TYPE headstart_bank_evictions_total counter\n");
    for (int r = 0; r < BANK_EVICT_COUNT; r++)
        strbuf_printf(out, "headstart_bank_evictions_total{reason=\"%s\"} %llu\n",
                      bank_evict_reason_name((enum bank_evict_reason)r), (unsigned long long)b->evictions[r]);
    strbuf_puts(out, "# HELP headstart_bank_evicted_bytes_total Bytes evicted from the bank, by reason.\n"
                     "# TYPE headstart_bank_evicted_bytes_total counter\n");
    for (int r = 0; r < BANK_EVICT_COUNT; r++)
        strbuf_printf(out, "headstart_bank_evicted_bytes_total{reason=\"%s\"} %llu\n",
                      bank_evict_reason_name((enum bank_evict_reason)r), (unsigned long long)b->evicted_bytes[r]);
}

static void metrics_write_disk(const struct bank_disk_stats *d, struct strbuf *out)
{
    strbuf_printf(out,
                  "# HELP headstart_bank_disk_enabled 1 while the disk tier works, 0 while an I/O error has it off (it retries and comes back by itself).\n"
                  "# TYPE headstart_bank_disk_enabled gauge\nheadstart_bank_disk_enabled %d\n"
                  "# HELP headstart_bank_disk_entries Entries in the disk tier.\n"
                  "# TYPE headstart_bank_disk_entries gauge\nheadstart_bank_disk_entries %llu\n"
                  "# HELP headstart_bank_disk_bytes Bytes in the disk tier.\n"
                  "# TYPE headstart_bank_disk_bytes gauge\nheadstart_bank_disk_bytes %llu\n"
                  "# HELP headstart_bank_disk_pending Writes queued for the disk tier.\n"
                  "# TYPE headstart_bank_disk_pending gauge\nheadstart_bank_disk_pending %llu\n"
                  "# HELP headstart_bank_disk_hits_total Disk lookups that restored state.\n"
                  "# TYPE headstart_bank_disk_hits_total counter\nheadstart_bank_disk_hits_total %llu\n"
                  "# HELP headstart_bank_disk_misses_total Disk lookups that found nothing deeper.\n"
                  "# TYPE headstart_bank_disk_misses_total counter\nheadstart_bank_disk_misses_total %llu\n"
                  "# HELP headstart_bank_disk_written_total Entries written to the disk tier.\n"
                  "# TYPE headstart_bank_disk_written_total counter\nheadstart_bank_disk_written_total %llu\n"
                  "# HELP headstart_bank_disk_evictions_total Entries evicted from the disk tier.\n"
                  "# TYPE headstart_bank_disk_evictions_total counter\nheadstart_bank_disk_evictions_total %llu\n",
                  d->disabled ? 0 : 1, (unsigned long long)d->entries, (unsigned long long)d->bytes,
                  (unsigned long long)d->pending, (unsigned long long)d->hits, (unsigned long long)d->misses,
                  (unsigned long long)d->written, (unsigned long long)d->evicted);
    strbuf_printf(out,
                  "# HELP headstart_bank_disk_read_only 1 while another process holds the bank directory's writer lock (this one only reads).\n"
                  "# TYPE headstart_bank_disk_read_only gauge\nheadstart_bank_disk_read_only %d\n"
                  "# HELP headstart_bank_disk_lock_holder_pid The pid holding the writer lock while read-only (0 none or unknown).\n"
                  "# TYPE headstart_bank_disk_lock_holder_pid gauge\nheadstart_bank_disk_lock_holder_pid %ld\n"
                  "# HELP headstart_bank_disk_io_errors_total I/O errors met by the disk tier.\n"
                  "# TYPE headstart_bank_disk_io_errors_total counter\nheadstart_bank_disk_io_errors_total %llu\n"
                  "# HELP headstart_bank_disk_reenabled_total Times the disk tier re-enabled itself after an I/O error.\n"
                  "# TYPE headstart_bank_disk_reenabled_total counter\nheadstart_bank_disk_reenabled_total %llu\n"
                  "# HELP headstart_bank_disk_foreign_files Things under the bank's blobs/ that it did not make (left alone).\n"
                  "# TYPE headstart_bank_disk_foreign_files gauge\nheadstart_bank_disk_foreign_files %llu\n"
                  "# HELP headstart_bank_disk_discarded_total Disk entries found bad, by cause (dropped; a read-only server skips them).\n"
                  "# TYPE headstart_bank_disk_discarded_total counter\n",
                  d->read_only ? 1 : 0, d->lock_holder_pid, (unsigned long long)d->io_errors,
                  (unsigned long long)d->reenabled, (unsigned long long)d->foreign);
    const struct { const char *name; uint64_t v; } bad[] = {
        { "checksum", d->bad_checksum }, { "header", d->bad_header }, { "identity", d->bad_identity },
        { "tokens", d->bad_tokens }, { "size", d->bad_size }, { "missing_file", d->missing_files },
        { "not_regular", d->bad_not_regular }, { "bad_index_row", d->bad_rows },
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        strbuf_printf(out, "headstart_bank_disk_discarded_total{reason=\"%s\"} %llu\n", bad[i].name,
                      (unsigned long long)bad[i].v);
}

void metrics_write(struct metrics *m, const char *const *route_names, int n_routes,
                   int queue_depth, struct strbuf *out)
{
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
    if (m->have_bank) metrics_write_bank(&m->bank, out);
    if (m->have_disk && m->disk_live) bank_disk_stats_get(m->disk_live, &m->disk); /* the state now */
    if (m->have_disk) metrics_write_disk(&m->disk, out);
    pthread_mutex_unlock(&m->mu);
}

/* ---- count_tokens ------------------------------------------------------------------- */

