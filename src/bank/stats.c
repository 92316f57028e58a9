/*
 * stats.c — the bank's statistics as data: one field table per stats struct (struct
 * bank_stats, struct bank_disk_stats) naming every exported quantity once, with its JSON
 * key, Prometheus family, label, help text, counter or gauge, value type and offset; and
 * the writers that generate every output from those tables: the replay summary JSON, the
 * `headstart bank stats` JSON and text, and the /metrics lines.
 *
 * Invariants:
 *   1. A quantity's name, help and type live in its table row only; no output spells them.
 *   2. Each output is the table's rows flagged for it, in table order (JSON and text), or
 *      in the order of a metrics list for Prometheus (bank_disk_stats_metrics_order: the
 *      disk family order differs from the JSON key order, and both are fixed formats).
 *   3. The bytes are those of the hand-written serializers the tables replaced (same keys,
 *      order, number formats); tests/unit/bank/test_stats.c keeps those serializers as the
 *      reference and compares byte for byte.
 *   4. Rows of one JSON group (nested object) or one labelled Prometheus family are
 *      consecutive in their output's order; a family's HELP and TYPE precede its first row.
 */
#include "bank/bank.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define R BANK_STAT_REPLAY
#define C BANK_STAT_CMD
#define M BANK_STAT_METRICS
#define COUNTER BANK_STAT_COUNTER
#define GAUGE BANK_STAT_GAUGE
#define NONE ((size_t)-1)

static const char *snap_kind_name(int i) { return bank_snap_kind_name((enum bank_snap_kind)i); }
static const char *reason_name(int i) { return bank_reason_name((enum bank_reason)i); }
static const char *evict_name(int i) { return bank_evict_reason_name((enum bank_evict_reason)i); }

#define BS(f) offsetof(struct bank_stats, f)
/* key, metric, label value, help, kind, type, offset, n, names, group, text, if, outputs */
const struct bank_stat_field bank_stats_fields[] = {
    {"nodes", NULL, NULL, NULL, GAUGE, BANK_STAT_U64, BS(n_nodes), 0, NULL, NULL, NULL, NONE, R},
    {"tokens", NULL, NULL, NULL, GAUGE, BANK_STAT_U64, BS(n_tokens), 0, NULL, NULL, NULL, NONE, R},
    {"snapshots", "headstart_bank_entries", NULL, "Snapshots held by the session bank.", GAUGE,
     BANK_STAT_U64, BS(n_snaps), 0, NULL, NULL, NULL, NONE, R | M},
    {"snapshots_by_kind", NULL, NULL, NULL, GAUGE, BANK_STAT_U64, BS(snaps_by_kind),
     BANK_SNAP_KIND_COUNT, snap_kind_name, NULL, NULL, NONE, R},
    {"kv_bytes", NULL, NULL, NULL, GAUGE, BANK_STAT_U64, BS(kv_bytes), 0, NULL, NULL, NULL, NONE, R},
    {"snapshot_bytes", NULL, NULL, NULL, GAUGE, BANK_STAT_U64, BS(snap_bytes), 0, NULL, NULL, NULL, NONE, R},
    {"token_bytes", NULL, NULL, NULL, GAUGE, BANK_STAT_U64, BS(token_bytes), 0, NULL, NULL, NULL, NONE, R},
    {"total_bytes", "headstart_bank_bytes", NULL, "Bytes held by the session bank (KV, snapshots, tokens).",
     GAUGE, BANK_STAT_U64, BS(total_bytes), 0, NULL, NULL, NULL, NONE, R | M},
    {"budget", "headstart_bank_budget_bytes", NULL, "The bank's RAM budget (0: unlimited).", GAUGE,
     BANK_STAT_U64, BS(budget), 0, NULL, NULL, NULL, NONE, R | M},
    {"lookups", "headstart_bank_lookups_total", NULL, "Bank lookups.", COUNTER, BANK_STAT_U64,
     BS(lookups), 0, NULL, NULL, NULL, NONE, R | M},
    {"hits", "headstart_bank_hits_total", NULL, "Lookups that restored state.", COUNTER,
     BANK_STAT_U64, BS(hits), 0, NULL, NULL, NULL, NONE, R | M},
    {"restored_tokens", "headstart_bank_restored_tokens_total", NULL,
     "Prompt tokens restored from the bank.", COUNTER, BANK_STAT_U64, BS(restored_tokens), 0,
     NULL, NULL, NULL, NONE, R | M},
    {"misses", "headstart_bank_misses_total", NULL, "Lookups that restored nothing, by reason.",
     COUNTER, BANK_STAT_U64, BS(misses), BANK_REASON_COUNT, reason_name, NULL, NULL, NONE, R | M},
    {"evictions", "headstart_bank_evictions_total", NULL, "Bank evictions, by reason.", COUNTER,
     BANK_STAT_U64, BS(evictions), BANK_EVICT_COUNT, evict_name, NULL, NULL, NONE, R | M},
    {"evicted_bytes", "headstart_bank_evicted_bytes_total", NULL,
     "Bytes evicted from the bank, by reason.", COUNTER, BANK_STAT_U64, BS(evicted_bytes),
     BANK_EVICT_COUNT, evict_name, NULL, NULL, NONE, M},
    {"inserts", NULL, NULL, NULL, COUNTER, BANK_STAT_U64, BS(inserts), 0, NULL, NULL, NULL, NONE, R},
};
const int bank_stats_n_fields = (int)(sizeof bank_stats_fields / sizeof bank_stats_fields[0]);

#define DS(f) offsetof(struct bank_disk_stats, f)
#define DISCARDED "headstart_bank_disk_discarded_total"
#define DISCARDED_HELP "Disk entries found bad, by cause (dropped; a read-only server skips them)."
/* Row numbers of the metrics order below (keep in step with the table). */
enum {
    D_ENTRIES, D_BYTES, D_CAP, D_FLOOR, D_PENDING, D_PUTS, D_WRITTEN, D_WRITTEN_BYTES,
    D_ALREADY, D_DROPPED, D_TOO_BIG, D_LOW_DISK, D_OFF, D_LOOKUPS, D_HITS, D_HIT_TOKENS,
    D_MISSES, D_BAD_CHECKSUM, D_BAD_HEADER, D_BAD_IDENTITY, D_BAD_TOKENS, D_BAD_SIZE,
    D_MISSING, D_EVICTED, D_EVICTED_BYTES, D_IO_ERRORS, D_DISABLED, D_DISABLED_REASON,
    D_OPEN_ROWS, D_OPEN_ADOPTED, D_OPEN_ORPHANS, D_OPEN_TMP, D_OPEN_DROPPED, D_OPEN_OLD,
    D_READ_ONLY, D_LOCK_PID, D_OLD_FORMAT, D_FOREIGN, D_BAD_ROWS, D_NOT_REGULAR, D_REENABLED,
    D_ENABLED, D_COUNT
};
const struct bank_stat_field bank_disk_stats_fields[] = {
    [D_ENTRIES] = {"entries", "headstart_bank_disk_entries", NULL, "Entries in the disk tier.",
                   GAUGE, BANK_STAT_U64, DS(entries), 0, NULL, NULL, NULL, NONE, R | C | M},
    [D_BYTES] = {"bytes", "headstart_bank_disk_bytes", NULL, "Bytes in the disk tier.", GAUGE,
                 BANK_STAT_U64, DS(bytes), 0, NULL, NULL, NULL, NONE, R | C | M},
    [D_CAP] = {"cap_bytes", NULL, NULL, NULL, GAUGE, BANK_STAT_U64, DS(cap_bytes), 0, NULL, NULL, NULL, NONE, R},
    [D_FLOOR] = {"free_floor_bytes", NULL, NULL, NULL, GAUGE, BANK_STAT_U64, DS(free_floor_bytes), 0,
                 NULL, NULL, NULL, NONE, R},
    [D_PENDING] = {"pending", "headstart_bank_disk_pending", NULL, "Writes queued for the disk tier.",
                   GAUGE, BANK_STAT_U64, DS(pending), 0, NULL, NULL, NULL, NONE, R | M},
    [D_PUTS] = {"puts", NULL, NULL, NULL, COUNTER, BANK_STAT_U64, DS(puts), 0, NULL, NULL, NULL, NONE, R},
    [D_WRITTEN] = {"written", "headstart_bank_disk_written_total", NULL, "Entries written to the disk tier.",
                   COUNTER, BANK_STAT_U64, DS(written), 0, NULL, NULL, NULL, NONE, R | M},
    [D_WRITTEN_BYTES] = {"written_bytes", NULL, NULL, NULL, COUNTER, BANK_STAT_U64, DS(written_bytes), 0,
                         NULL, NULL, NULL, NONE, R},
    [D_ALREADY] = {"already_stored", NULL, NULL, NULL, COUNTER, BANK_STAT_U64, DS(already_stored), 0,
                   NULL, NULL, NULL, NONE, R},
    [D_DROPPED] = {"dropped_queue_full", NULL, NULL, NULL, COUNTER, BANK_STAT_U64, DS(dropped_queue_full),
                   0, NULL, NULL, NULL, NONE, R},
    [D_TOO_BIG] = {"skipped_too_big", NULL, NULL, NULL, COUNTER, BANK_STAT_U64, DS(skipped_too_big), 0,
                   NULL, NULL, NULL, NONE, R},
    [D_LOW_DISK] = {"skipped_low_disk", NULL, NULL, NULL, COUNTER, BANK_STAT_U64, DS(skipped_low_disk), 0,
                    NULL, NULL, NULL, NONE, R},
    [D_OFF] = {"skipped_off", NULL, NULL, NULL, COUNTER, BANK_STAT_U64, DS(skipped_off), 0, NULL, NULL,
               NULL, NONE, R},
    [D_LOOKUPS] = {"lookups", NULL, NULL, NULL, COUNTER, BANK_STAT_U64, DS(lookups), 0, NULL, NULL, NULL, NONE, R},
    [D_HITS] = {"hits", "headstart_bank_disk_hits_total", NULL, "Disk lookups that restored state.",
                COUNTER, BANK_STAT_U64, DS(hits), 0, NULL, NULL, NULL, NONE, R | M},
    [D_HIT_TOKENS] = {"hit_tokens", NULL, NULL, NULL, COUNTER, BANK_STAT_U64, DS(hit_tokens), 0, NULL,
                      NULL, NULL, NONE, R},
    [D_MISSES] = {"misses", "headstart_bank_disk_misses_total", NULL,
                  "Disk lookups that found nothing deeper.", COUNTER, BANK_STAT_U64, DS(misses), 0,
                  NULL, NULL, NULL, NONE, R | M},
    [D_BAD_CHECKSUM] = {"bad_checksum", DISCARDED, "checksum", DISCARDED_HELP, COUNTER, BANK_STAT_U64,
                        DS(bad_checksum), 0, NULL, "discarded", NULL, NONE, R | M},
    [D_BAD_HEADER] = {"bad_header", DISCARDED, "header", DISCARDED_HELP, COUNTER, BANK_STAT_U64,
                      DS(bad_header), 0, NULL, "discarded", NULL, NONE, R | M},
    [D_BAD_IDENTITY] = {"bad_identity", DISCARDED, "identity", DISCARDED_HELP, COUNTER, BANK_STAT_U64,
                        DS(bad_identity), 0, NULL, "discarded", NULL, NONE, R | M},
    [D_BAD_TOKENS] = {"bad_tokens", DISCARDED, "tokens", DISCARDED_HELP, COUNTER, BANK_STAT_U64,
                      DS(bad_tokens), 0, NULL, "discarded", NULL, NONE, R | M},
    [D_BAD_SIZE] = {"bad_size", DISCARDED, "size", DISCARDED_HELP, COUNTER, BANK_STAT_U64, DS(bad_size),
                    0, NULL, "discarded", NULL, NONE, R | M},
    [D_MISSING] = {"missing_files", DISCARDED, "missing_file", DISCARDED_HELP, COUNTER, BANK_STAT_U64,
                   DS(missing_files), 0, NULL, "discarded", NULL, NONE, R | M},
    [D_EVICTED] = {"evicted", "headstart_bank_disk_evictions_total", NULL,
                   "Entries evicted from the disk tier.", COUNTER, BANK_STAT_U64, DS(evicted), 0, NULL,
                   NULL, NULL, NONE, R | M},
    [D_EVICTED_BYTES] = {"evicted_bytes", NULL, NULL, NULL, COUNTER, BANK_STAT_U64, DS(evicted_bytes), 0,
                         NULL, NULL, NULL, NONE, R},
    [D_IO_ERRORS] = {"io_errors", "headstart_bank_disk_io_errors_total", NULL,
                     "I/O errors met by the disk tier.", COUNTER, BANK_STAT_U64, DS(io_errors), 0, NULL,
                     NULL, NULL, NONE, R | M},
    [D_DISABLED] = {"disabled", NULL, NULL, NULL, GAUGE, BANK_STAT_BOOL, DS(disabled), 0, NULL, NULL, NULL,
                    NONE, R},
    [D_DISABLED_REASON] = {"disabled_reason", NULL, NULL, NULL, GAUGE, BANK_STAT_STR, DS(disabled_reason),
                           0, NULL, NULL, NULL, DS(disabled), R},
    [D_OPEN_ROWS] = {"rows", NULL, NULL, NULL, GAUGE, BANK_STAT_U64, DS(open_rows), 0, NULL, "open",
                     "index rows", NONE, C},
    [D_OPEN_ADOPTED] = {"adopted", NULL, NULL, NULL, GAUGE, BANK_STAT_U64, DS(open_adopted), 0, NULL, "open",
                        "adopted", NONE, C},
    [D_OPEN_ORPHANS] = {"orphans_removed", NULL, NULL, NULL, GAUGE, BANK_STAT_U64, DS(open_orphans_removed),
                        0, NULL, "open", "orphans removed", NONE, C},
    [D_OPEN_TMP] = {"tmp_removed", NULL, NULL, NULL, GAUGE, BANK_STAT_U64, DS(open_tmp_removed), 0, NULL,
                    "open", "temp files removed", NONE, C},
    [D_OPEN_DROPPED] = {"rows_dropped", NULL, NULL, NULL, GAUGE, BANK_STAT_U64, DS(open_rows_dropped), 0,
                        NULL, "open", "rows dropped", NONE, C},
    [D_OPEN_OLD] = {"old_format_removed", NULL, NULL, NULL, GAUGE, BANK_STAT_U64, DS(open_old_removed), 0,
                    NULL, "open", "old-format files removed", NONE, C},
    [D_READ_ONLY] = {"read_only", "headstart_bank_disk_read_only", NULL,
                     "1 while another process holds the bank directory's writer lock (this one only reads).",
                     GAUGE, BANK_STAT_BOOL, DS(read_only), 0, NULL, NULL, NULL, NONE, C | M},
    [D_LOCK_PID] = {"lock_holder_pid", "headstart_bank_disk_lock_holder_pid", NULL,
                    "The pid holding the writer lock while read-only (0 none or unknown).", GAUGE,
                    BANK_STAT_LONG, DS(lock_holder_pid), 0, NULL, NULL, NULL, NONE, C | M},
    [D_OLD_FORMAT] = {"old_format", NULL, NULL, NULL, GAUGE, BANK_STAT_BOOL, DS(old_format), 0, NULL, NULL,
                      NULL, NONE, C},
    [D_FOREIGN] = {"foreign", "headstart_bank_disk_foreign_files", NULL,
                   "Things under the bank's blobs/ that it did not make (left alone).", GAUGE,
                   BANK_STAT_U64, DS(foreign), 0, NULL, NULL, NULL, NONE, C | M},
    [D_BAD_ROWS] = {"bad_rows", DISCARDED, "bad_index_row", DISCARDED_HELP, COUNTER, BANK_STAT_U64,
                    DS(bad_rows), 0, NULL, NULL, NULL, NONE, C | M},
    [D_NOT_REGULAR] = {"bad_not_regular", DISCARDED, "not_regular", DISCARDED_HELP, COUNTER, BANK_STAT_U64,
                       DS(bad_not_regular), 0, NULL, NULL, NULL, NONE, M},
    [D_REENABLED] = {"reenabled", "headstart_bank_disk_reenabled_total", NULL,
                     "Times the disk tier re-enabled itself after an I/O error.", COUNTER, BANK_STAT_U64,
                     DS(reenabled), 0, NULL, NULL, NULL, NONE, M},
    [D_ENABLED] = {"enabled", "headstart_bank_disk_enabled", NULL,
                   "1 while the disk tier works, 0 while an I/O error has it off (it retries and comes"
                   " back by itself).", GAUGE, BANK_STAT_NOT_BOOL, DS(disabled), 0, NULL, NULL, NULL,
                   NONE, M},
};
const int bank_disk_stats_n_fields = (int)(sizeof bank_disk_stats_fields / sizeof bank_disk_stats_fields[0]);
_Static_assert(sizeof bank_disk_stats_fields / sizeof bank_disk_stats_fields[0] == D_COUNT,
               "every row of the disk stats table has its name in the enum");

const int bank_disk_stats_metrics_order[] = {
    D_ENABLED, D_ENTRIES, D_BYTES, D_PENDING, D_HITS, D_MISSES, D_WRITTEN, D_EVICTED, D_READ_ONLY,
    D_LOCK_PID, D_IO_ERRORS, D_REENABLED, D_FOREIGN, D_BAD_CHECKSUM, D_BAD_HEADER, D_BAD_IDENTITY,
    D_BAD_TOKENS, D_BAD_SIZE, D_MISSING, D_NOT_REGULAR, D_BAD_ROWS,
};
const int bank_disk_stats_n_metrics =
    (int)(sizeof bank_disk_stats_metrics_order / sizeof bank_disk_stats_metrics_order[0]);

#define RS(f) offsetof(struct bank_remote_stats, f)
#define RDISC "headstart_bank_remote_discarded_total"
#define RDISC_HELP "Remote values that failed verification, by what failed (never restored)."
#define RERR "headstart_bank_remote_errors_total"
#define RERR_HELP "Failed Redis calls, by kind (the tier goes down and retries with backoff; oom: Redis full)."
/* table order = JSON order = metrics order */
const struct bank_stat_field bank_remote_stats_fields[] = {
    {"url", NULL, NULL, NULL, GAUGE, BANK_STAT_STR, RS(url), 0, NULL, NULL, NULL, NONE, C},
    {"prefix", NULL, NULL, NULL, GAUGE, BANK_STAT_STR, RS(prefix), 0, NULL, NULL, NULL, NONE, C},
    {"up", "headstart_bank_remote_up", NULL,
     "1 while the remote tier (Redis) answers; 0 while it is down (lookups miss, uploads wait).", GAUGE,
     BANK_STAT_BOOL, RS(up), 0, NULL, NULL, NULL, NONE, C | M},
    {"last_error", NULL, NULL, NULL, GAUGE, BANK_STAT_STR, RS(last_error), 0, NULL, NULL, NULL, NONE, C},
    {"lookups", "headstart_bank_remote_lookups_total", NULL,
     "Remote lookups (asked for a point deeper than RAM and disk).", COUNTER, BANK_STAT_U64, RS(lookups), 0,
     NULL, NULL, NULL, NONE, C | M},
    {"hits", "headstart_bank_remote_hits_total", NULL, "Remote lookups that restored state.", COUNTER,
     BANK_STAT_U64, RS(hits), 0, NULL, NULL, NULL, NONE, C | M},
    {"hit_tokens", "headstart_bank_remote_hit_tokens_total", NULL, "Tokens restored from the remote tier.",
     COUNTER, BANK_STAT_U64, RS(hit_tokens), 0, NULL, NULL, NULL, NONE, C | M},
    {"hit_bytes", "headstart_bank_remote_hit_bytes_total", NULL, "Bytes read from Redis by remote hits.",
     COUNTER, BANK_STAT_U64, RS(hit_bytes), 0, NULL, NULL, NULL, NONE, C | M},
    {"misses", "headstart_bank_remote_misses_total", NULL, "Remote lookups that found nothing deeper.",
     COUNTER, BANK_STAT_U64, RS(misses), 0, NULL, NULL, NULL, NONE, C | M},
    {"evicted", "headstart_bank_remote_evicted_total", NULL,
     "Remote entries found whose chunks or parent Redis had evicted (a miss).", COUNTER, BANK_STAT_U64,
     RS(evicted), 0, NULL, NULL, NULL, NONE, C | M},
    {"bad_manifest", RDISC, "manifest", RDISC_HELP, COUNTER, BANK_STAT_U64, RS(bad_manifest), 0, NULL,
     "discarded", NULL, NONE, C | M},
    {"bad_chunk", RDISC, "chunk", RDISC_HELP, COUNTER, BANK_STAT_U64, RS(bad_chunk), 0, NULL, "discarded",
     NULL, NONE, C | M},
    {"bad_blob", RDISC, "blob", RDISC_HELP, COUNTER, BANK_STAT_U64, RS(bad_blob), 0, NULL, "discarded", NULL,
     NONE, C | M},
    {"deleted_bad", NULL, NULL, NULL, COUNTER, BANK_STAT_U64, RS(deleted_bad), 0, NULL, NULL, NULL, NONE, C},
    {"uploads", "headstart_bank_remote_uploads_total", NULL, "Entries uploaded to the remote tier.", COUNTER,
     BANK_STAT_U64, RS(uploads), 0, NULL, NULL, NULL, NONE, C | M},
    {"upload_bytes", "headstart_bank_remote_upload_bytes_total", NULL, "Bytes uploaded to the remote tier.",
     COUNTER, BANK_STAT_U64, RS(upload_bytes), 0, NULL, NULL, NULL, NONE, C | M},
    {"upload_chunks", NULL, NULL, NULL, COUNTER, BANK_STAT_U64, RS(upload_chunks), 0, NULL, NULL, NULL, NONE, C},
    {"already_stored", NULL, NULL, NULL, COUNTER, BANK_STAT_U64, RS(already_stored), 0, NULL, NULL, NULL,
     NONE, C},
    {"upload_dropped", "headstart_bank_remote_upload_dropped_total", NULL,
     "Uploads dropped because the queue was full.", COUNTER, BANK_STAT_U64, RS(upload_dropped), 0, NULL,
     NULL, NULL, NONE, C | M},
    {"upload_skipped", NULL, NULL, NULL, COUNTER, BANK_STAT_U64, RS(upload_skipped), 0, NULL, NULL, NULL,
     NONE, C},
    {"pending", "headstart_bank_remote_pending", NULL, "Uploads waiting or running.", GAUGE, BANK_STAT_U64,
     RS(pending), 0, NULL, NULL, NULL, NONE, C | M},
    {"connect", RERR, "connect", RERR_HELP, COUNTER, BANK_STAT_U64, RS(err_connect), 0, NULL, "errors", NULL,
     NONE, C | M},
    {"timeout", RERR, "timeout", RERR_HELP, COUNTER, BANK_STAT_U64, RS(err_timeout), 0, NULL, "errors", NULL,
     NONE, C | M},
    {"io", RERR, "io", RERR_HELP, COUNTER, BANK_STAT_U64, RS(err_io), 0, NULL, "errors", NULL, NONE, C | M},
    {"oom", RERR, "oom", RERR_HELP, COUNTER, BANK_STAT_U64, RS(err_oom), 0, NULL, "errors", NULL, NONE, C | M},
    {"reply", RERR, "reply", RERR_HELP, COUNTER, BANK_STAT_U64, RS(err_reply), 0, NULL, "errors", NULL, NONE,
     C | M},
    {"reconnects", "headstart_bank_remote_reconnects_total", NULL,
     "Times the remote tier came back after being down.", COUNTER, BANK_STAT_U64, RS(reconnects), 0, NULL,
     NULL, NULL, NONE, C | M},
};
const int bank_remote_stats_n_fields =
    (int)(sizeof bank_remote_stats_fields / sizeof bank_remote_stats_fields[0]);

/* ---- reading a row ------------------------------------------------------------------- */

static const void *at(const void *st, size_t off) { return (const char *)st + off; }

static uint64_t u64_at(const struct bank_stat_field *f, const void *st, int i)
{
    uint64_t v;
    memcpy(&v, at(st, f->offset + (size_t)i * sizeof v), sizeof v);
    return v;
}

static bool bool_at(const void *st, size_t off)
{
    bool v;
    memcpy(&v, at(st, off), sizeof v);
    return v;
}

static bool shown(const struct bank_stat_field *f, const void *st)
{
    return f->only_if == (size_t)-1 || bool_at(st, f->only_if);
}

/* ---- JSON ---------------------------------------------------------------------------- */

void bank_stat_json(struct jsonw *w, const struct bank_stat_field *f, const void *st,
                    const char **group)
{
    if (!shown(f, st))
        return;
    if (*group && (!f->group || strcmp(*group, f->group) != 0)) {
        jsonw_obj_end(w);
        *group = NULL;
    }
    if (f->group && !*group) {
        jsonw_key(w, f->group);
        jsonw_obj_begin(w);
        *group = f->group;
    }
    jsonw_key(w, f->key);
    if (f->n) {
        jsonw_obj_begin(w);
        for (int i = 0; i < f->n; i++) {
            jsonw_key(w, f->name_of(i));
            jsonw_uint(w, u64_at(f, st, i));
        }
        jsonw_obj_end(w);
        return;
    }
    switch (f->type) {
    case BANK_STAT_U64: jsonw_uint(w, u64_at(f, st, 0)); break;
    case BANK_STAT_BOOL: jsonw_bool(w, bool_at(st, f->offset)); break;
    case BANK_STAT_NOT_BOOL: jsonw_bool(w, !bool_at(st, f->offset)); break;
    case BANK_STAT_LONG: {
        long v;
        memcpy(&v, at(st, f->offset), sizeof v);
        jsonw_int(w, v);
        break;
    }
    case BANK_STAT_STR: jsonw_str(w, (const char *)at(st, f->offset)); break;
    }
}

void bank_stat_json_end(struct jsonw *w, const char **group)
{
    if (*group)
        jsonw_obj_end(w);
    *group = NULL;
}

void bank_stats_json_fields(const struct bank_stat_field *t, int n, unsigned output,
                            const void *st, struct jsonw *w)
{
    const char *group = NULL;
    for (int i = 0; i < n; i++)
        if (t[i].outputs & output)
            bank_stat_json(w, &t[i], st, &group);
    bank_stat_json_end(w, &group);
}

/* ---- Prometheus ---------------------------------------------------------------------- */

void bank_stat_metric(struct strbuf *out, const struct bank_stat_field *f, const void *st,
                      const struct bank_stat_field *prev)
{
    if (!prev || strcmp(prev->metric, f->metric) != 0)
        strbuf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", f->metric, f->help, f->metric,
                      f->kind == BANK_STAT_COUNTER ? "counter" : "gauge");
    if (f->n) {
        for (int i = 0; i < f->n; i++)
            strbuf_printf(out, "%s{reason=\"%s\"} %llu\n", f->metric, f->name_of(i),
                          (unsigned long long)u64_at(f, st, i));
        return;
    }
    char lab[96] = "";
    if (f->label)
        snprintf(lab, sizeof lab, "{reason=\"%s\"}", f->label);
    switch (f->type) {
    case BANK_STAT_U64:
        strbuf_printf(out, "%s%s %llu\n", f->metric, lab, (unsigned long long)u64_at(f, st, 0));
        break;
    case BANK_STAT_BOOL:
    case BANK_STAT_NOT_BOOL:
        strbuf_printf(out, "%s%s %d\n", f->metric, lab,
                      bool_at(st, f->offset) != (f->type == BANK_STAT_NOT_BOOL) ? 1 : 0);
        break;
    case BANK_STAT_LONG: {
        long v;
        memcpy(&v, at(st, f->offset), sizeof v);
        strbuf_printf(out, "%s%s %ld\n", f->metric, lab, v);
        break;
    }
    case BANK_STAT_STR:
        break; /* text is no metric */
    }
}

void bank_stats_metrics(const struct bank_stats *st, struct strbuf *out)
{
    const struct bank_stat_field *prev = NULL;
    for (int i = 0; i < bank_stats_n_fields; i++) {
        const struct bank_stat_field *f = &bank_stats_fields[i];
        if (!(f->outputs & BANK_STAT_METRICS))
            continue;
        bank_stat_metric(out, f, st, prev);
        prev = f;
    }
}

void bank_disk_stats_metrics(const struct bank_disk_stats *st, struct strbuf *out)
{
    const struct bank_stat_field *prev = NULL;
    for (int i = 0; i < bank_disk_stats_n_metrics; i++) {
        const struct bank_stat_field *f = &bank_disk_stats_fields[bank_disk_stats_metrics_order[i]];
        bank_stat_metric(out, f, st, prev);
        prev = f;
    }
}

void bank_remote_stats_metrics(const struct bank_remote_stats *st, struct strbuf *out)
{
    const struct bank_stat_field *prev = NULL;
    for (int i = 0; i < bank_remote_stats_n_fields; i++) {
        const struct bank_stat_field *f = &bank_remote_stats_fields[i];
        if (!(f->outputs & BANK_STAT_METRICS)) continue;
        bank_stat_metric(out, f, st, prev);
        prev = f;
    }
}

/* ---- the replay summary -------------------------------------------------------------- */

void bank_stats_json(const struct bank_stats *st, struct jsonw *w)
{
    jsonw_key(w, "bank_stats");
    jsonw_obj_begin(w);
    bank_stats_json_fields(bank_stats_fields, bank_stats_n_fields, BANK_STAT_REPLAY, st, w);
    jsonw_obj_end(w);
}

void bank_disk_stats_json(const struct bank_disk_stats *st, struct jsonw *w)
{
    jsonw_key(w, "bank_disk_stats");
    jsonw_obj_begin(w);
    bank_stats_json_fields(bank_disk_stats_fields, bank_disk_stats_n_fields, BANK_STAT_REPLAY, st, w);
    jsonw_obj_end(w);
}

/* ---- text ---------------------------------------------------------------------------- */

void bank_stats_text(const struct bank_stat_field *t, int n, const char *group, const void *st,
                     struct strbuf *out)
{
    const char *sep = "";
    for (int i = 0; i < n; i++) {
        const struct bank_stat_field *f = &t[i];
        if (!f->text || !f->group || strcmp(f->group, group) != 0 || f->type != BANK_STAT_U64)
            continue;
        strbuf_printf(out, "%s%s %llu", sep, f->text, (unsigned long long)u64_at(f, st, 0));
        sep = ", ";
    }
}
