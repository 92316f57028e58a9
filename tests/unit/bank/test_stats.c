/* test_stats.c — the stats field tables (stats.c) generate every output byte for byte as
 * the hand-written serializers they replace did. Those serializers are kept below, verbatim,
 * as the reference: /metrics' bank families (server/sched.c), the replay summary line
 * (cmd_replay.c) and `headstart bank stats --json`'s reconcile members (cmd_bank.c). Every
 * field gets a distinct value, so a swapped offset or a misplaced row shows. */
#include <criterion/criterion.h>

#include "bank_test.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* ---- the reference serializers (verbatim, as they were) ---- */

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

static void disk_stats_json(struct jsonw *w, const struct bank_disk_stats *d)
{
    jsonw_key(w, "bank_disk_stats");
    jsonw_obj_begin(w);
    jsonw_key(w, "entries"); jsonw_uint(w, d->entries);
    jsonw_key(w, "bytes"); jsonw_uint(w, d->bytes);
    jsonw_key(w, "cap_bytes"); jsonw_uint(w, d->cap_bytes);
    jsonw_key(w, "free_floor_bytes"); jsonw_uint(w, d->free_floor_bytes);
    jsonw_key(w, "pending"); jsonw_uint(w, d->pending);
    jsonw_key(w, "puts"); jsonw_uint(w, d->puts);
    jsonw_key(w, "written"); jsonw_uint(w, d->written);
    jsonw_key(w, "written_bytes"); jsonw_uint(w, d->written_bytes);
    jsonw_key(w, "already_stored"); jsonw_uint(w, d->already_stored);
    jsonw_key(w, "dropped_queue_full"); jsonw_uint(w, d->dropped_queue_full);
    jsonw_key(w, "skipped_too_big"); jsonw_uint(w, d->skipped_too_big);
    jsonw_key(w, "skipped_low_disk"); jsonw_uint(w, d->skipped_low_disk);
    jsonw_key(w, "skipped_off"); jsonw_uint(w, d->skipped_off);
    jsonw_key(w, "lookups"); jsonw_uint(w, d->lookups);
    jsonw_key(w, "hits"); jsonw_uint(w, d->hits);
    jsonw_key(w, "hit_tokens"); jsonw_uint(w, d->hit_tokens);
    jsonw_key(w, "misses"); jsonw_uint(w, d->misses);
    jsonw_key(w, "discarded");
    jsonw_obj_begin(w);
    jsonw_key(w, "bad_checksum"); jsonw_uint(w, d->bad_checksum);
    jsonw_key(w, "bad_header"); jsonw_uint(w, d->bad_header);
    jsonw_key(w, "bad_identity"); jsonw_uint(w, d->bad_identity);
    jsonw_key(w, "bad_tokens"); jsonw_uint(w, d->bad_tokens);
    jsonw_key(w, "bad_size"); jsonw_uint(w, d->bad_size);
    jsonw_key(w, "missing_files"); jsonw_uint(w, d->missing_files);
    jsonw_obj_end(w);
    jsonw_key(w, "evicted"); jsonw_uint(w, d->evicted);
    jsonw_key(w, "evicted_bytes"); jsonw_uint(w, d->evicted_bytes);
    jsonw_key(w, "io_errors"); jsonw_uint(w, d->io_errors);
    jsonw_key(w, "disabled"); jsonw_bool(w, d->disabled);
    if (d->disabled) { jsonw_key(w, "disabled_reason"); jsonw_str(w, d->disabled_reason); }
    jsonw_obj_end(w);
}

/* One line: {"bank_stats":{...}} plus "bank_disk_stats" when the disk tier was open (one
 * line, so `tail -1` of stderr is always the whole summary). */
static void stats_json(const struct bank_stats *st, const struct bank_disk_stats *dst, struct strbuf *sb)
{
    struct jsonw w;
    jsonw_init(&w, sb, 0);
    jsonw_obj_begin(&w);
    jsonw_key(&w, "bank_stats");
    jsonw_obj_begin(&w);
    jsonw_key(&w, "nodes"); jsonw_uint(&w, st->n_nodes);
    jsonw_key(&w, "tokens"); jsonw_uint(&w, st->n_tokens);
    jsonw_key(&w, "snapshots"); jsonw_uint(&w, st->n_snaps);
    jsonw_key(&w, "snapshots_by_kind");
    jsonw_obj_begin(&w);
    for (int k = 0; k < BANK_SNAP_KIND_COUNT; k++) {
        jsonw_key(&w, bank_snap_kind_name((enum bank_snap_kind)k));
        jsonw_uint(&w, st->snaps_by_kind[k]);
    }
    jsonw_obj_end(&w);
    jsonw_key(&w, "kv_bytes"); jsonw_uint(&w, st->kv_bytes);
    jsonw_key(&w, "snapshot_bytes"); jsonw_uint(&w, st->snap_bytes);
    jsonw_key(&w, "token_bytes"); jsonw_uint(&w, st->token_bytes);
    jsonw_key(&w, "total_bytes"); jsonw_uint(&w, st->total_bytes);
    jsonw_key(&w, "budget"); jsonw_uint(&w, st->budget);
    jsonw_key(&w, "lookups"); jsonw_uint(&w, st->lookups);
    jsonw_key(&w, "hits"); jsonw_uint(&w, st->hits);
    jsonw_key(&w, "restored_tokens"); jsonw_uint(&w, st->restored_tokens);
    jsonw_key(&w, "misses");
    jsonw_obj_begin(&w);
    for (int r = 0; r < BANK_REASON_COUNT; r++) {
        jsonw_key(&w, bank_reason_name((enum bank_reason)r));
        jsonw_uint(&w, st->misses[r]);
    }
    jsonw_obj_end(&w);
    jsonw_key(&w, "evictions");
    jsonw_obj_begin(&w);
    for (int r = 0; r < BANK_EVICT_COUNT; r++) {
        jsonw_key(&w, bank_evict_reason_name((enum bank_evict_reason)r));
        jsonw_uint(&w, st->evictions[r]);
    }
    jsonw_obj_end(&w);
    jsonw_key(&w, "inserts"); jsonw_uint(&w, st->inserts);
    jsonw_obj_end(&w);
    if (dst) disk_stats_json(&w, dst);
    jsonw_obj_end(&w);
}

static void open_json(struct jsonw *w, const struct bank_disk_stats *st)
{
    jsonw_key(w, "open");
    jsonw_obj_begin(w);
    jsonw_key(w, "rows"); jsonw_uint(w, st->open_rows);
    jsonw_key(w, "adopted"); jsonw_uint(w, st->open_adopted);
    jsonw_key(w, "orphans_removed"); jsonw_uint(w, st->open_orphans_removed);
    jsonw_key(w, "tmp_removed"); jsonw_uint(w, st->open_tmp_removed);
    jsonw_key(w, "rows_dropped"); jsonw_uint(w, st->open_rows_dropped);
    jsonw_key(w, "old_format_removed"); jsonw_uint(w, st->open_old_removed);
    jsonw_obj_end(w);
    jsonw_key(w, "read_only"); jsonw_bool(w, st->read_only);
    jsonw_key(w, "lock_holder_pid"); jsonw_int(w, st->lock_holder_pid);
    jsonw_key(w, "old_format"); jsonw_bool(w, st->old_format);
    jsonw_key(w, "foreign"); jsonw_uint(w, st->foreign);
    jsonw_key(w, "bad_rows"); jsonw_uint(w, st->bad_rows);
}

/* ---- the tables' outputs ---- */

static void table_stats_json(const struct bank_stats *st, const struct bank_disk_stats *dst,
                             struct strbuf *sb)
{
    struct jsonw w;
    jsonw_init(&w, sb, 0);
    jsonw_obj_begin(&w);
    bank_stats_json(st, &w);
    if (dst) bank_disk_stats_json(dst, &w);
    jsonw_obj_end(&w);
}

static void table_open_json(struct jsonw *w, const struct bank_disk_stats *st)
{
    const char *group = NULL;
    bool on = false;
    for (int i = 0; i < bank_disk_stats_n_fields; i++) {
        const struct bank_stat_field *f = &bank_disk_stats_fields[i];
        if (!(f->outputs & BANK_STAT_CMD)) continue;
        on |= f->group != NULL; /* the reference starts at "open" */
        if (on) bank_stat_json(w, f, st, &group);
    }
    bank_stat_json_end(w, &group);
}

/* The uint64_t fields in [0, len) of a stats struct get distinct values: 1000 + offset. */
static void fill(void *st, size_t len)
{
    for (size_t off = 0; off + 8 <= len; off += 8) {
        uint64_t v = 1000 + off;
        memcpy((char *)st + off, &v, 8);
    }
}

static void fill_bank(struct bank_stats *st) { fill(st, sizeof *st); }

static void fill_disk(struct bank_disk_stats *d, bool flags)
{
    memset(d, 0, sizeof *d);
    fill(d, offsetof(struct bank_disk_stats, foreign_example));
    uint64_t *tail[] = {&d->evicted, &d->evicted_bytes, &d->io_errors, &d->reenabled,
                        &d->skipped_foreign, &d->open_rows, &d->open_adopted,
                        &d->open_orphans_removed, &d->open_tmp_removed, &d->open_rows_dropped,
                        &d->open_old_removed};
    for (size_t i = 0; i < sizeof tail / sizeof tail[0]; i++) *tail[i] = 5000 + i;
    snprintf(d->foreign_example, sizeof d->foreign_example, "blobs/zz");
    d->writer_nice = 19;
    d->disabled = flags;
    d->retry_in_ms = 77;
    snprintf(d->disabled_reason, sizeof d->disabled_reason, "write: \"x\" failed");
    d->read_only = !flags;
    d->lock_holder_pid = flags ? 4242 : 0;
    d->old_format = flags;
}

static void expect_same(const struct strbuf *want, const struct strbuf *got, const char *what)
{
    cr_assert_eq(want->len, got->len, "%s: %zu bytes, want %zu:\n%.*s\nwant:\n%.*s", what,
                 got->len, want->len, (int)got->len, got->buf, (int)want->len, want->buf);
    cr_assert(memcmp(want->buf, got->buf, want->len) == 0, "%s differs:\n%.*s\nwant:\n%.*s",
              what, (int)got->len, got->buf, (int)want->len, want->buf);
}

Test(bank_stats, metrics_as_before)
{
    struct bank_stats st;
    fill_bank(&st);
    for (int flags = 0; flags < 2; flags++) {
        struct bank_disk_stats d;
        fill_disk(&d, flags);
        struct strbuf want, got;
        strbuf_init(&want);
        strbuf_init(&got);
        metrics_write_bank(&st, &want);
        metrics_write_disk(&d, &want);
        bank_stats_metrics(&st, &got);
        bank_disk_stats_metrics(&d, &got);
        expect_same(&want, &got, "metrics");
        strbuf_free(&want);
        strbuf_free(&got);
    }
}

Test(bank_stats, replay_json_as_before)
{
    struct bank_stats st;
    fill_bank(&st);
    for (int flags = 0; flags < 3; flags++) {
        struct bank_disk_stats d;
        fill_disk(&d, flags == 1);
        struct strbuf want, got;
        strbuf_init(&want);
        strbuf_init(&got);
        stats_json(&st, flags == 2 ? NULL : &d, &want);
        table_stats_json(&st, flags == 2 ? NULL : &d, &got);
        expect_same(&want, &got, "replay json");
        strbuf_free(&want);
        strbuf_free(&got);
    }
}

Test(bank_stats, bank_cmd_json_and_text_as_before)
{
    for (int flags = 0; flags < 2; flags++) {
        struct bank_disk_stats d;
        fill_disk(&d, flags);
        struct strbuf want, got;
        strbuf_init(&want);
        strbuf_init(&got);
        struct jsonw w1, w2;
        jsonw_init(&w1, &want, 0);
        jsonw_init(&w2, &got, 0);
        jsonw_obj_begin(&w1);
        open_json(&w1, &d);
        jsonw_obj_end(&w1);
        jsonw_obj_begin(&w2);
        table_open_json(&w2, &d);
        jsonw_obj_end(&w2);
        expect_same(&want, &got, "bank stats json");
        strbuf_free(&want);
        strbuf_free(&got);
        strbuf_init(&want);
        strbuf_init(&got);
        strbuf_printf(&want, "index rows %" PRIu64 ", adopted %" PRIu64 ", orphans removed %" PRIu64
                      ", temp files removed %" PRIu64 ", rows dropped %" PRIu64
                      ", old-format files removed %" PRIu64, d.open_rows, d.open_adopted,
                      d.open_orphans_removed, d.open_tmp_removed, d.open_rows_dropped,
                      d.open_old_removed);
        bank_stats_text(bank_disk_stats_fields, bank_disk_stats_n_fields, "open", &d, &got);
        expect_same(&want, &got, "bank stats text");
        strbuf_free(&want);
        strbuf_free(&got);
    }
}

Test(bank_stats, every_field_is_exported)
{
    /* each u64 of struct bank_stats appears in some row (offsets cover the struct) */
    for (size_t off = 0; off < sizeof(struct bank_stats); off += 8) {
        bool found = false;
        for (int i = 0; i < bank_stats_n_fields && !found; i++) {
            const struct bank_stat_field *f = &bank_stats_fields[i];
            size_t n = f->n ? (size_t)f->n : 1;
            found = off >= f->offset && off < f->offset + 8 * n;
        }
        bool exempt = off == offsetof(struct bank_stats, n_spaces) ||
                      (off >= offsetof(struct bank_stats, stops) &&
                       off < offsetof(struct bank_stats, stops) + sizeof((struct bank_stats *)0)->stops) ||
                      off == offsetof(struct bank_stats, inserted_tokens) ||
                      off == offsetof(struct bank_stats, inserted_snaps);
        cr_assert(found || exempt, "struct bank_stats offset %zu is in no row", off);
    }
    for (int i = 0; i < bank_disk_stats_n_metrics; i++) {
        const struct bank_stat_field *f = &bank_disk_stats_fields[bank_disk_stats_metrics_order[i]];
        cr_assert(f->metric && (f->outputs & BANK_STAT_METRICS), "row %s is no metric", f->key);
    }
}
