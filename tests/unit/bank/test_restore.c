/* test_restore.c — a request's view of the bank (restore.c) without an engine: bank_store
 * puts a path into RAM and queues it for the disk tier; bank_restore finds the deepest
 * point over both tiers, hands out exact copies, promotes a disk hit into RAM, and reports
 * where the state came from and why it stopped there. */
#include "disk_test.h"

#define SALT 7 /* snapshot bytes depend on the path only, the same in both tiers */

static const struct bank_keys rt_keys = { .fp = FP1, .disk_fp = FP2, .kv_row_bytes = ROW, .snapshot_bytes = SNAP };

/* Store ids[0, n) with snapshots at each of pos[0..np) (the last one n). */
static void rt_store(struct bank *b, struct bank_disk *d, const int32_t *ids, int64_t n, const int64_t *pos, int np)
{
    struct bank_snap_in snaps[8];
    uint8_t bytes[8][SNAP];
    for (int i = 0; i < np; i++) {
        bt_snap_fill(bytes[i], SNAP, ids, pos[i], SALT);
        snaps[i] = (struct bank_snap_in){ pos[i], i + 1 == np ? BANK_SNAP_END : BANK_SNAP_HEAD, bytes[i] };
    }
    int64_t from = bank_store_rows_from(b, d, &rt_keys, ids, n, snaps, np);
    uint8_t *kv = bt_kv_rows(ids, from, n, ROW);
    int puts = -1;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(bank_store(b, d, &rt_keys, ids, n, from, kv, snaps, np, &puts, &err), HS_OK, "%s", err.msg);
    bt_check(b);
    cr_assert_eq(puts, d ? np : 0);
    free(kv);
}

/* Restore ids[0, n) and check the bytes handed out against the path's own. */
static void rt_restore(struct bank *b, struct bank_disk *d, const int32_t *ids, int64_t n, int64_t want_pos,
                       enum bank_source want_src, enum bank_reason want_reason, struct bank_restored *r)
{
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(bank_restore(b, d, NULL, &rt_keys, ids, n, r, &err), HS_OK, "%s", err.msg);
    bt_check(b); /* a disk hit was promoted: an insert */
    cr_assert_eq(r->pos, want_pos, "pos %lld, want %lld", (long long)r->pos, (long long)want_pos);
    cr_assert_eq(r->source, want_src, "source %s", bank_source_name(r->source));
    cr_assert_eq(r->reason, want_reason, "reason %s", bank_reason_name(r->reason));
    if (want_pos > 0) {
        uint8_t *kv = bt_kv_rows(ids, 0, want_pos, ROW);
        cr_assert(!memcmp(r->kv, kv, (size_t)want_pos * ROW), "KV rows differ");
        free(kv);
        uint8_t snap[SNAP];
        bt_snap_fill(snap, SNAP, ids, want_pos, SALT);
        cr_assert(!memcmp(r->snapshot, snap, SNAP), "snapshot differs");
    } else {
        cr_assert_null(r->kv);
    }
}

Test(bank_restore, ram_only_finds_the_deepest_point_and_copies)
{
    struct bank *b = bank_init(NULL);
    int32_t path[300], prompt[301];
    dt_ids(path, 300, 1);
    rt_store(b, NULL, path, 300, (int64_t[]){ 100, 300 }, 2);
    struct bank_restored r;
    /* the whole path plus one new token: everything but the last token */
    memcpy(prompt, path, sizeof path);
    prompt[300] = 5;
    rt_restore(b, NULL, prompt, 301, 300, BANK_SOURCE_RAM, BANK_REASON_FULL, &r);
    cr_assert_eq(r.match_len, 300);
    /* a copy: writing into it leaves the bank's bytes alone */
    memset((void *)r.kv, 0xAB, 300 * ROW);
    bank_restored_free(&r);
    rt_restore(b, NULL, prompt, 301, 300, BANK_SOURCE_RAM, BANK_REASON_FULL, &r);
    bank_restored_free(&r);
    /* diverging at 200: the snapshot below it */
    prompt[200] = path[200] + 1;
    rt_restore(b, NULL, prompt, 250, 100, BANK_SOURCE_RAM, BANK_REASON_NO_SNAPSHOT, &r);
    cr_assert_eq(r.match_len, 200);
    bank_restored_free(&r);
    /* nothing shared */
    prompt[0] = path[0] + 1;
    rt_restore(b, NULL, prompt, 250, 0, BANK_SOURCE_NONE, BANK_REASON_NO_MATCH, &r);
    bank_restored_free(&r);
    bank_restored_free(NULL);
    struct bank_stats st;
    bank_stats_get(b, &st);
    cr_assert_eq(st.lookups, 4);
    cr_assert_eq(st.hits, 3);
    bank_free(b);
}

Test(bank_restore, disk_tier_restores_into_a_fresh_bank_and_promotes)
{
    char *dir = dt_mkdtemp();
    struct bank_disk *d = dt_open(dir, NULL);
    struct bank *b = bank_init(NULL);
    int32_t path[300], prompt[301];
    dt_ids(path, 300, 2);
    struct bank_snap_in end300 = { 300, BANK_SNAP_END, NULL };
    cr_assert_eq(bank_store_rows_from(b, d, &rt_keys, path, 300, &end300, 1), 0); /* nothing banked */
    rt_store(b, d, path, 300, (int64_t[]){ 120, 300 }, 2);
    bank_disk_flush(d);
    bank_free(b);

    /* a new process: RAM is empty, the disk has both entries */
    b = bank_init(NULL);
    memcpy(prompt, path, sizeof path);
    prompt[300] = 9;
    struct bank_restored r;
    rt_restore(b, d, prompt, 301, 300, BANK_SOURCE_DISK, BANK_REASON_FULL, &r);
    cr_assert_eq(r.match_len, 300);
    cr_assert_eq(r.disk_discarded, 0);
    bank_restored_free(&r);
    /* promoted: the same prompt now restores from RAM */
    rt_restore(b, d, prompt, 301, 300, BANK_SOURCE_RAM, BANK_REASON_FULL, &r);
    bank_restored_free(&r);
    bank_free(b);

    /* RAM shallower than disk: RAM holds the head at 120 only, the disk goes deeper */
    b = bank_init(NULL);
    rt_store(b, NULL, path, 120, (int64_t[]){ 120 }, 1);
    rt_restore(b, d, prompt, 301, 300, BANK_SOURCE_DISK, BANK_REASON_FULL, &r);
    bank_restored_free(&r);
    /* diverging at 200 with a disk tier: RAM's 120 (the disk has nothing deeper below 200) */
    prompt[200] = path[200] + 1;
    rt_restore(b, d, prompt, 260, 120, BANK_SOURCE_RAM, BANK_REASON_NO_SNAPSHOT, &r);
    bank_restored_free(&r);
    bank_free(b);
    bank_disk_close(d);
    dt_rmrf(dir);
}

Test(bank_restore, store_takes_only_the_rows_ram_lacks)
{
    struct bank *b = bank_init(NULL);
    int32_t path[400];
    dt_ids(path, 400, 3);
    rt_store(b, NULL, path, 250, (int64_t[]){ 250 }, 1);
    /* the longer path shares 250 tokens: only rows [250, 400) are needed */
    struct bank_snap_in end400 = { 400, BANK_SNAP_END, NULL };
    cr_assert_eq(bank_store_rows_from(b, NULL, &rt_keys, path, 400, &end400, 1), 250);
    rt_store(b, NULL, path, 400, (int64_t[]){ 250, 400 }, 2);
    struct bank_restored r;
    rt_restore(b, NULL, path, 400, 250, BANK_SOURCE_RAM, BANK_REASON_NO_SNAPSHOT, &r);
    bank_restored_free(&r);
    /* rows handed from a point past where the tree stops matching: refused, nothing stored */
    int32_t other[300];
    dt_ids(other, 300, 4);
    uint8_t *kv = bt_kv_rows(other, 100, 300, ROW);
    uint8_t snap[SNAP];
    bt_snap_fill(snap, SNAP, other, 300, SALT);
    struct bank_snap_in sn = { 300, BANK_SNAP_END, snap };
    int puts = -1;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_neq(bank_store(b, NULL, &rt_keys, other, 300, 100, kv, &sn, 1, &puts, &err), HS_OK);
    cr_assert_eq(puts, 0);
    free(kv);
    cr_assert_eq(bank_match_len(b, FP1, other, 300), 0);
    bank_free(b);
}

/* With a disk tier a store hands only the rows past what both tiers hold: RAM's match and
 * the prefix the disk holds, or has queued or in flight (a remote hit queued by
 * bank_restore is the usual case); the disk entry is still whole when read back. */
Test(bank_restore, store_with_disk_reads_only_rows_past_the_known_prefix)
{
    char *dir = dt_mkdtemp();
    struct bank_disk *d = dt_open(dir, NULL);
    struct bank *b = bank_init(NULL);
    int32_t path[400];
    dt_ids(path, 400, 5);
    rt_store(b, d, path, 300, (int64_t[]){ 120, 300 }, 2);
    bank_disk_flush(d);
    /* RAM and disk hold [0, 300): a longer path needs rows from 300 on */
    struct bank_snap_in at[2] = { { 400, BANK_SNAP_END, NULL }, { 200, BANK_SNAP_USER, NULL } };
    cr_assert_eq(bank_store_rows_from(b, d, &rt_keys, path, 400, at, 1), 300);
    cr_assert_eq(bank_store_rows_from(b, d, &rt_keys, path, 400, at, 2), 120); /* a snapshot at 200 */
    rt_store(b, d, path, 400, (int64_t[]){ 400 }, 1);
    bank_disk_flush(d);
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.written, 3);
    cr_assert_eq(st.bytes, dt_entry_bytes(120) + dt_blob_bytes(120, 300) + dt_blob_bytes(300, 400));
    struct bank *b2 = bank_init(NULL); /* a new process restores it whole */
    int32_t prompt[401];
    memcpy(prompt, path, sizeof path);
    prompt[400] = 9;
    struct bank_restored r;
    rt_restore(b2, d, prompt, 401, 400, BANK_SOURCE_DISK, BANK_REASON_FULL, &r);
    bank_restored_free(&r);
    bank_free(b2);

    /* a prefix still queued or in flight counts: the writer stores it first */
    int32_t q[300];
    dt_ids(q, 300, 6);
    dt_gate_install(); /* fsync waits for dt_gate_open */
    cr_assert_eq(dt_put(d, FP2, q, 100, BANK_SNAP_GRID), BANK_DISK_QUEUED);
    dt_gate_wait_blocked(); /* 100 is in flight */
    cr_assert_eq(dt_put(d, FP2, q, 150, BANK_SNAP_GRID), BANK_DISK_QUEUED); /* queued behind it */
    cr_assert_eq(bank_disk_known_prefix(d, FP2, ROW, SNAP, q, 140, BANK_SNAP_END), 100);
    cr_assert_eq(bank_disk_known_prefix(d, FP2, ROW, SNAP, q, 299, BANK_SNAP_END), 150);
    /* a queued write no more valuable may be dropped first (a full queue): not a base */
    cr_assert_eq(bank_disk_known_prefix(d, FP2, ROW, SNAP, q, 299, BANK_SNAP_GRID), 100);
    cr_assert_eq(bank_disk_known_prefix(d, FP1, ROW, SNAP, q, 299, BANK_SNAP_END), 0); /* another key space */
    uint8_t *kv = bt_kv_rows(q, 150, 299, ROW);
    uint8_t snap[SNAP];
    bt_snap_fill(snap, SNAP, q, 299, FP2);
    cr_assert_eq(bank_disk_put_rows(d, FP2, ROW, SNAP, q, 299, 150, kv, snap, BANK_SNAP_END), BANK_DISK_QUEUED);
    free(kv);
    /* rows from past the known prefix: refused, never read out of bounds */
    int32_t r2[300];
    dt_ids(r2, 300, 7);
    kv = bt_kv_rows(r2, 50, 200, ROW);
    bt_snap_fill(snap, SNAP, r2, 200, FP2);
    cr_assert_eq(bank_disk_put_rows(d, FP2, ROW, SNAP, r2, 200, 50, kv, snap, BANK_SNAP_END), BANK_DISK_ROWS_MISSING);
    free(kv);
    dt_gate_open();
    bank_disk_flush(d);
    sys_io_set_ops(NULL);
    dt_expect(d, FP2, q, 300, 1000, 299);
    dt_expect(d, FP2, q, 299, 1000, 150);
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.skipped_base_gone, 1);
    cr_assert_eq(st.bytes, dt_entry_bytes(120) + dt_blob_bytes(120, 300) + dt_blob_bytes(300, 400) +
                               dt_entry_bytes(100) + dt_blob_bytes(100, 150) + dt_blob_bytes(150, 299));
    bank_free(b);
    bank_disk_close(d);
    dt_rmrf(dir);
}

/* bank_restore_lazy hands out the same bytes but leaves the promotion into RAM to
 * bank_restored_promote (after the caller's first token); freed without it, only the reuse
 * is lost. */
Test(bank_restore, lazy_restore_promotes_only_when_asked)
{
    char *dir = dt_mkdtemp();
    struct bank_disk *d = dt_open(dir, NULL);
    struct bank *b = bank_init(NULL);
    int32_t path[300], prompt[301];
    dt_ids(path, 300, 8);
    rt_store(b, d, path, 300, (int64_t[]){ 120, 300 }, 2);
    bank_disk_flush(d);
    bank_free(b);
    b = bank_init(NULL);
    memcpy(prompt, path, sizeof path);
    prompt[300] = 9;
    struct hs_err err;
    hs_err_clear(&err);
    struct bank_restored r;
    for (int round = 0; round < 2; round++) {
        cr_assert_eq(bank_restore_lazy(b, d, NULL, &rt_keys, prompt, 301, &r, &err), HS_OK, "%s", err.msg);
        cr_assert_eq(r.pos, 300);
        cr_assert_eq(r.source, BANK_SOURCE_DISK, "round %d: %s", round, bank_source_name(r.source));
        cr_assert_eq(r.reason, BANK_REASON_FULL);
        uint8_t *kv = bt_kv_rows(prompt, 0, 300, ROW);
        cr_assert(!memcmp(r.kv, kv, 300 * ROW), "KV rows differ");
        free(kv);
        cr_assert_eq(bank_match_len(b, FP1, prompt, 301), 0, "promoted before it was asked");
        if (round == 1) bank_restored_promote(b, &rt_keys, &r);
        bank_restored_free(&r); /* round 0: dropped unpromoted */
        bt_check(b);
    }
    cr_assert_eq(bank_match_len(b, FP1, prompt, 301), 300);
    rt_restore(b, d, prompt, 301, 300, BANK_SOURCE_RAM, BANK_REASON_FULL, &r);
    bank_restored_free(&r);
    bank_free(b);
    bank_disk_close(d);
    dt_rmrf(dir);
}
