/* test_disk_faults.c — the disk tier under a failing disk: for every operation of the I/O
 * seam and N = 1..8, the Nth call fails (once, or from then on) during a write+lookup
 * scenario and again during a reopen+lookup. Every lookup must give the exact bytes or a
 * miss; after a clean reopen every index row must verify and no stray file may remain. */
#include <criterion/criterion.h>

#include "disk_test.h"

#define NIDS 40
static const int64_t k_pos[] = {8, 16, 24, 12};

/* A lookup that may miss but never lies. Returns the hit position. */
static int64_t lookup_ok(struct bank_disk *d, const int32_t *ids, int64_t n)
{
    struct bank_disk_hit h;
    bank_disk_lookup(d, FP1, ROW, SNAP, ids, n, 0, 1000, &h);
    int64_t pos = h.pos;
    if (pos) {
        bool known = false;
        for (size_t i = 0; i < HS_ARRAY_LEN(k_pos); i++) known |= k_pos[i] == pos;
        cr_assert(known && pos < n, "hit at an unbanked position %lld", (long long)pos);
        cr_assert_eq(dt_hit_bad(&h, FP1, ids), 0, "a lookup returned wrong bytes");
    }
    bank_disk_hit_free(&h);
    return pos;
}

/* After the faults: a clean reopen finds a consistent store. Returns the entry count. */
static uint64_t check_consistent(const char *dir, const int32_t *ids)
{
    sys_io_fault_clear_all();
    struct bank_disk *d = dt_open(dir, NULL);
    struct bank_disk_verify_result vr;
    cr_assert_eq(bank_disk_verify(d, &vr, NULL), HS_OK);
    cr_assert_eq(vr.removed, 0, "an index row points at a bad blob");
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_not(st.disabled);
    /* the index never named a file that was not complete, and no write left debris;
     * (a failed unlink may leave a good file without a row: it is adopted) */
    cr_assert_eq(st.open_rows_dropped, 0, "an index row outlived or preceded its file");
    cr_assert_eq(st.open_tmp_removed + st.open_orphans_removed, 0, "a write left debris");
    cr_assert_eq(st.entries, vr.good);
    cr_assert_eq((uint64_t)dt_count_blobs(dir), st.entries, "stray files after reconcile");
    lookup_ok(d, ids, NIDS);
    lookup_ok(d, ids, 17);
    bank_disk_close(d);
    return st.entries;
}

static void scenario(enum sys_io_op op, uint64_t nth, bool persistent)
{
    char *dir = dt_mkdtemp();
    int32_t ids[NIDS];
    dt_ids(ids, NIDS, 11);

    /* 1: writes and lookups under the fault */
    struct bank_disk *d = dt_open(dir, NULL);
    sys_io_fault_clear_all();
    sys_io_fault_set(op, nth, EIO, persistent);
    for (int i = 0; i < 3; i++) dt_put(d, FP1, ids, k_pos[i], BANK_SNAP_GRID);
    bank_disk_flush(d);
    int64_t a = lookup_ok(d, ids, NIDS);
    lookup_ok(d, ids, 17);
    dt_put(d, FP1, ids, k_pos[3], BANK_SNAP_HEAD);
    bank_disk_flush(d);
    lookup_ok(d, ids, 13);
    bool fired = sys_io_calls(op) >= nth;
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    if (!fired) {
        cr_assert_eq(a, 24, "no fault, yet no hit (%s nth %llu)", sys_io_op_name(op),
                     (unsigned long long)nth);
        cr_assert_not(st.disabled);
    }
    if (st.disabled) cr_assert_neq(st.disabled_reason[0], 0);
    bank_disk_close(d);
    uint64_t n_entries = check_consistent(dir, ids);
    if (!fired) cr_assert_eq(n_entries, 4);

    /* 2: the same fault during a reopen and its lookups */
    sys_io_fault_clear_all();
    sys_io_fault_set(op, nth, EIO, persistent);
    struct hs_err err;
    hs_err_clear(&err);
    struct bank_disk_opts o;
    bank_disk_opts_default(&o);
    o.free_floor_bytes = 0;
    d = bank_disk_open(dir, &o, &err);
    if (d) {
        lookup_ok(d, ids, NIDS);
        lookup_ok(d, ids, 17);
        lookup_ok(d, ids, 9);
        bank_disk_close(d);
    } else {
        cr_assert_neq(err.msg[0], 0, "a failed open says why");
    }
    check_consistent(dir, ids);
    sys_io_fault_clear_all();
    dt_rmrf(dir);
}

static void sweep(enum sys_io_op op)
{
    for (uint64_t nth = 1; nth <= 8; nth++) {
        scenario(op, nth, false);
        scenario(op, nth, true);
    }
}

Test(bank_disk_faults, open) { sweep(SYS_IO_OPEN); }
Test(bank_disk_faults, pwrite) { sweep(SYS_IO_PWRITE); }
Test(bank_disk_faults, fsync) { sweep(SYS_IO_FSYNC); }
Test(bank_disk_faults, rename) { sweep(SYS_IO_RENAME); }
Test(bank_disk_faults, pread) { sweep(SYS_IO_PREAD); }
Test(bank_disk_faults, close) { sweep(SYS_IO_CLOSE); }
Test(bank_disk_faults, unlink) { sweep(SYS_IO_UNLINK); }

/* An I/O error turns the tier off: puts are refused, stats say why (and when it retries),
 * and a reopen turns it back on. (The retry itself: test_disk_lock.c; here it is set far
 * off so that nothing races the checks.) */
Test(bank_disk_faults, error_disables_until_reopen)
{
    char *dir = dt_mkdtemp();
    int32_t ids[NIDS];
    dt_ids(ids, NIDS, 12);
    struct bank_disk_opts o;
    bank_disk_opts_default(&o);
    o.free_floor_bytes = 0;
    o.retry_ms = 600000;
    struct bank_disk *d = dt_open(dir, &o);
    sys_io_fault_clear_all();
    sys_io_fault_set(SYS_IO_FSYNC, 1, ENOSPC, false);
    cr_assert_eq(dt_put(d, FP1, ids, 8, BANK_SNAP_HEAD), BANK_DISK_QUEUED);
    bank_disk_flush(d);
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert(st.disabled);
    cr_assert(strstr(st.disabled_reason, "fsync") != NULL, "%s", st.disabled_reason);
    cr_assert_eq(st.io_errors, 1);
    cr_assert(st.retry_in_ms > 0 && st.retry_in_ms <= 600000, "retry in %lld ms", (long long)st.retry_in_ms);
    cr_assert_eq(dt_put(d, FP1, ids, 16, BANK_SNAP_HEAD), BANK_DISK_OFF);
    dt_expect(d, FP1, ids, NIDS, 1000, 0);
    bank_disk_close(d);
    cr_assert_eq(dt_count_blobs(dir), 0, "the failed write left a file");
    d = dt_open(dir, NULL);
    cr_assert_eq(dt_put(d, FP1, ids, 16, BANK_SNAP_HEAD), BANK_DISK_QUEUED);
    bank_disk_flush(d);
    dt_expect(d, FP1, ids, NIDS, 1000, 16);
    bank_disk_close(d);
    sys_io_fault_clear_all();
    dt_rmrf(dir);
}
