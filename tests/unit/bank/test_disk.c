/* test_disk.c — the bank's disk tier: exact round trips in one process and across a
 * reopen, deepest-prefix choice, identity isolation, exact token verification, corruption
 * of every kind (detected, deleted, counted, never restored), the cap and gc, the write
 * queue's drops, the free-disk floor, and reconcile at open. Fault injection through the
 * sys_io seam lives in test_disk_faults.c. */
#include <criterion/criterion.h>

#include "disk_test.h"

Test(bank_disk, roundtrip_and_restart)
{
    char *dir = dt_mkdtemp();
    int32_t ids[64];
    dt_ids(ids, 64, 1);
    struct bank_disk *d = dt_open(dir, NULL);
    cr_assert_eq(dt_put(d, FP1, ids, 10, BANK_SNAP_HEAD), BANK_DISK_QUEUED);
    cr_assert_eq(dt_put(d, FP1, ids, 30, BANK_SNAP_END), BANK_DISK_QUEUED);
    bank_disk_flush(d);
    dt_expect(d, FP1, ids, 64, 1000, 30);
    dt_expect(d, FP1, ids, 31, 1000, 30);
    dt_expect(d, FP1, ids, 30, 1000, 10); /* n-1 = 29: at least one token is computed */
    dt_expect(d, FP1, ids, 10, 1000, 0);
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.entries, 2);
    cr_assert_eq(st.written, 2);
    cr_assert_eq(st.hits, 3);
    cr_assert_eq(st.misses, 1);
    /* 30 stores only [10, 30) and points at 10: the shared rows are on disk once */
    cr_assert_eq(st.bytes, dt_entry_bytes(10) + dt_blob_bytes(10, 30));
    bank_disk_close(d);

    d = dt_open(dir, NULL); /* restart */
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.entries, 2);
    cr_assert_eq(st.open_rows, 2);
    cr_assert_eq(st.open_adopted + st.open_orphans_removed + st.open_rows_dropped, 0);
    dt_expect(d, FP1, ids, 64, 1000, 30);
    dt_expect(d, FP1, ids, 20, 1000, 10);
    struct bank_disk_verify_result vr;
    cr_assert_eq(bank_disk_verify(d, &vr, NULL), HS_OK);
    cr_assert_eq(vr.checked, 2);
    cr_assert_eq(vr.good, 2);
    cr_assert_eq(dt_ls_count(d), 2);
    bank_disk_close(d);
    dt_rmrf(dir);
}

Test(bank_disk, deepest_prefix_and_divergence)
{
    char *dir = dt_mkdtemp();
    int32_t ids[64], other[64];
    dt_ids(ids, 64, 2);
    memcpy(other, ids, sizeof ids);
    other[15] ^= 0x100; /* leaves ids at token 15 */
    struct bank_disk *d = dt_open(dir, NULL);
    const int64_t at[] = {5, 10, 20, 40};
    for (int i = 0; i < 4; i++) dt_put(d, FP1, ids, at[i], BANK_SNAP_GRID);
    bank_disk_flush(d);
    dt_expect(d, FP1, ids, 64, 1000, 40);
    dt_expect(d, FP1, ids, 41, 1000, 40);
    dt_expect(d, FP1, ids, 40, 1000, 20);
    dt_expect(d, FP1, ids, 64, 39, 20); /* max_pos caps it (RAM already has better) */
    dt_expect(d, FP1, ids, 64, 5, 5);
    dt_expect(d, FP1, ids, 6, 1000, 5);
    dt_expect(d, FP1, other, 64, 1000, 10); /* 20 and 40 hold another prefix */
    dt_expect(d, FP1, other, 16, 1000, 10);
    /* min_pos: only better than what RAM restores; a blob at or below it is never read */
    struct bank_disk_hit h;
    bank_disk_lookup(d, FP1, ROW, SNAP, ids, 64, 20, 1000, &h);
    cr_assert_eq(h.pos, 40);
    cr_assert_eq(dt_hit_bad(&h, FP1, ids), 0);
    bank_disk_hit_free(&h);
    char *p10 = dt_blob_path(dir, FP1, ids, 10);
    dt_flip(p10, HDR + 3);
    bank_disk_lookup(d, FP1, ROW, SNAP, ids, 64, 10, 15, &h);
    cr_assert_eq(h.pos, 0);
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.bad_checksum, 0, "a blob below min_pos was read");
    bank_disk_lookup(d, FP1, ROW, SNAP, ids, 64, 9, 15, &h);
    cr_assert_eq(h.pos, 0);
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.bad_checksum, 1);
    free(p10);
    bank_disk_close(d);
    dt_rmrf(dir);
}

Test(bank_disk, identity_isolation)
{
    char *dir = dt_mkdtemp();
    int32_t ids[40], b[40];
    dt_ids(ids, 40, 3);
    memcpy(b, ids, sizeof ids);
    b[3]++; /* same p, different ids */
    struct bank_disk *d = dt_open(dir, NULL);
    dt_put(d, FP1, ids, 20, BANK_SNAP_HEAD);
    bank_disk_flush(d);
    dt_expect(d, FP2, ids, 40, 1000, 0);
    dt_expect(d, FP1, b, 40, 1000, 0);
    struct bank_disk_hit hit;
    bank_disk_lookup(d, FP1, ROW + 1, SNAP, ids, 40, 0, 1000, &hit); /* other row size */
    cr_assert_eq(hit.pos, 0);
    bank_disk_lookup(d, FP1, ROW, SNAP - 1, ids, 40, 0, 1000, &hit);
    cr_assert_eq(hit.pos, 0);
    dt_expect(d, FP1, ids, 40, 1000, 20);
    /* the same prefix under FP2 is its own entry */
    dt_put(d, FP2, ids, 20, BANK_SNAP_HEAD);
    bank_disk_flush(d);
    dt_expect(d, FP2, ids, 40, 1000, 20);
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.entries, 2);
    cr_assert_eq(st.bad_identity + st.bad_tokens + st.bad_checksum, 0);
    bank_disk_close(d);
    dt_rmrf(dir);
}

Test(bank_disk, reput_is_stored_once)
{
    char *dir = dt_mkdtemp();
    int32_t ids[40];
    dt_ids(ids, 40, 4);
    struct bank_disk *d = dt_open(dir, NULL);
    dt_put(d, FP1, ids, 20, BANK_SNAP_HEAD);
    bank_disk_flush(d);
    dt_put(d, FP1, ids, 20, BANK_SNAP_HEAD);
    bank_disk_flush(d);
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.entries, 1);
    cr_assert_eq(st.written, 1);
    cr_assert_eq(st.already_stored, 1);
    bank_disk_close(d);
    dt_rmrf(dir);
}

Test(bank_disk, large_entry_has_no_limit_below_the_cap)
{
    char *dir = dt_mkdtemp();
    int64_t n = 20001;
    int32_t *ids = malloc((size_t)n * 4);
    dt_ids(ids, n, 5);
    struct bank_disk_opts o;
    bank_disk_opts_default(&o);
    o.free_floor_bytes = 0;
    o.queue_bytes = 1000; /* smaller than the entry: a lone write is still taken */
    struct bank_disk *d = dt_open(dir, &o);
    cr_assert_eq(dt_put(d, FP1, ids, n - 1, BANK_SNAP_HEAD), BANK_DISK_QUEUED);
    bank_disk_close(d); /* close drains */
    d = dt_open(dir, &o);
    dt_expect(d, FP1, ids, n, n, n - 1);
    bank_disk_close(d);
    free(ids);
    dt_rmrf(dir);
}

/* ---- corruption ------------------------------------------------------------------- */

static void corrupt_setup(char **dir, struct bank_disk **d, int32_t *ids, int n)
{
    *dir = dt_mkdtemp();
    dt_ids(ids, n, 6);
    *d = dt_open(*dir, NULL);
    dt_put(*d, FP1, ids, 10, BANK_SNAP_HEAD);
    dt_put(*d, FP1, ids, 20, BANK_SNAP_END);
    bank_disk_flush(*d);
}

Test(bank_disk_corrupt, payload_byte_flip)
{
    char *dir;
    struct bank_disk *d;
    int32_t ids[40];
    corrupt_setup(&dir, &d, ids, 40);
    char *p = dt_blob_path(dir, FP1, ids, 20);
    dt_flip(p, HDR + 4 * 20 + 7); /* inside the KV rows */
    dt_expect(d, FP1, ids, 40, 1000, 10); /* falls back to the next good entry */
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.bad_checksum, 1);
    cr_assert_eq(st.entries, 1);
    cr_assert_not(dt_exists(p), "a bad blob is deleted");
    free(p);
    /* the token ids are payload too */
    p = dt_blob_path(dir, FP1, ids, 10);
    dt_flip(p, HDR + 1);
    dt_expect(d, FP1, ids, 40, 1000, 0);
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.bad_checksum, 2);
    cr_assert_eq(st.entries, 0);
    free(p);
    bank_disk_close(d);
    dt_rmrf(dir);
}

Test(bank_disk_corrupt, header_byte_flip_and_truncation)
{
    char *dir;
    struct bank_disk *d;
    int32_t ids[40];
    corrupt_setup(&dir, &d, ids, 40);
    char *p20 = dt_blob_path(dir, FP1, ids, 20), *p10 = dt_blob_path(dir, FP1, ids, 10);
    dt_flip(p20, 30); /* pos field */
    cr_assert_eq(truncate(p10, (off_t)dt_entry_bytes(10) - 1), 0);
    dt_expect(d, FP1, ids, 40, 1000, 0);
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.bad_header, 1);
    cr_assert_eq(st.bad_size, 1);
    cr_assert_eq(st.entries, 0);
    cr_assert_eq(st.bytes, 0);
    cr_assert_not(dt_exists(p10));
    cr_assert_not(dt_exists(p20));
    free(p10);
    free(p20);
    bank_disk_close(d);
    dt_rmrf(dir);
}

Test(bank_disk_corrupt, truncation_found_at_reopen)
{
    char *dir;
    struct bank_disk *d;
    int32_t ids[40];
    corrupt_setup(&dir, &d, ids, 40);
    bank_disk_close(d);
    char *p20 = dt_blob_path(dir, FP1, ids, 20);
    cr_assert_eq(truncate(p20, HDR), 0);
    d = dt_open(dir, NULL);
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.open_rows_dropped, 1);
    cr_assert_eq(st.entries, 1);
    cr_assert_not(dt_exists(p20));
    dt_expect(d, FP1, ids, 40, 1000, 10);
    free(p20);
    bank_disk_close(d);
    dt_rmrf(dir);
}

Test(bank_disk_corrupt, swapped_blobs)
{
    char *dir;
    struct bank_disk *d;
    int32_t ids[40];
    corrupt_setup(&dir, &d, ids, 40);
    char *p20 = dt_blob_path(dir, FP1, ids, 20), *p10 = dt_blob_path(dir, FP1, ids, 10);
    char *tmp = dt_strcat(dir, "/swap");
    cr_assert_eq(rename(p10, tmp), 0);
    cr_assert_eq(rename(p20, p10), 0);
    cr_assert_eq(rename(tmp, p20), 0);
    dt_expect(d, FP1, ids, 40, 1000, 0);
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.bad_identity, 2);
    cr_assert_eq(st.entries, 0);
    free(p10);
    free(p20);
    free(tmp);
    bank_disk_close(d);
    dt_rmrf(dir);
}

Test(bank_disk_corrupt, blob_of_another_model)
{
    char *dir;
    struct bank_disk *d;
    int32_t ids[40];
    corrupt_setup(&dir, &d, ids, 40);
    dt_put(d, FP2, ids, 20, BANK_SNAP_END);
    bank_disk_flush(d);
    char *p1 = dt_blob_path(dir, FP1, ids, 20), *p2 = dt_blob_path(dir, FP2, ids, 20);
    cr_assert_eq(rename(p2, p1), 0); /* FP2's state where FP1's should be */
    dt_expect(d, FP1, ids, 40, 1000, 10);
    dt_expect(d, FP2, ids, 40, 1000, 0); /* its own file is gone: dropped as missing */
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.bad_identity, 1);
    cr_assert_eq(st.missing_files, 1);
    cr_assert_eq(st.entries, 1);
    free(p1);
    free(p2);
    bank_disk_close(d);
    dt_rmrf(dir);
}

Test(bank_disk_corrupt, deleted_index_is_rebuilt_from_blob_headers)
{
    char *dir;
    struct bank_disk *d;
    int32_t ids[40];
    corrupt_setup(&dir, &d, ids, 40);
    bank_disk_close(d);
    dt_rm_index(dir);
    /* and one blob corrupted while no index watched: adopted by header, caught on read */
    char *p20 = dt_blob_path(dir, FP1, ids, 20);
    dt_flip(p20, HDR + 100);
    d = dt_open(dir, NULL);
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.open_rows, 0);
    cr_assert_eq(st.open_adopted, 2);
    dt_expect(d, FP1, ids, 40, 1000, 10);
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.bad_checksum, 1);
    bank_disk_close(d);
    /* garbage in place of the index: rebuilt too */
    char *ip = dt_strcat(dir, "/index.sqlite");
    dt_rm_index(dir);
    FILE *f = fopen(ip, "wb");
    cr_assert_not_null(f);
    for (int i = 0; i < 4096; i++) fputc(i * 7 + 1, f);
    fclose(f);
    d = dt_open(dir, NULL);
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.open_adopted, 1);
    dt_expect(d, FP1, ids, 40, 1000, 10);
    free(ip);
    free(p20);
    bank_disk_close(d);
    dt_rmrf(dir);
}

Test(bank_disk_corrupt, verify_finds_everything)
{
    char *dir;
    struct bank_disk *d;
    int32_t ids[40];
    corrupt_setup(&dir, &d, ids, 40);
    dt_put(d, FP1, ids, 30, BANK_SNAP_GRID);
    bank_disk_flush(d);
    char *p = dt_blob_path(dir, FP1, ids, 30);
    dt_flip(p, HDR + 4 * 10 + 10 * ROW + 3); /* inside the snapshot of [20, 30) */
    struct bank_disk_verify_result vr;
    cr_assert_eq(bank_disk_verify(d, &vr, NULL), HS_OK);
    cr_assert_eq(vr.checked, 3);
    cr_assert_eq(vr.good, 2);
    cr_assert_eq(vr.removed, 1);
    cr_assert_eq(vr.removed_bytes, dt_blob_bytes(20, 30));
    cr_assert_eq(dt_ls_count(d), 2);
    free(p);
    bank_disk_close(d);
    dt_rmrf(dir);
}

/* ---- cap, gc, queue, floor, reconcile ---------------------------------------------- */

Test(bank_disk_cap, lru_cap_and_gc)
{
    char *dir = dt_mkdtemp();
    int32_t ids[64];
    dt_ids(ids, 64, 7);
    struct bank_disk_opts o;
    bank_disk_opts_default(&o);
    o.free_floor_bytes = 0;
    /* one chain 10 <- 20 <- 30 fills the cap exactly */
    o.cap_bytes = dt_blob_bytes(0, 10) + dt_blob_bytes(10, 20) + dt_blob_bytes(20, 30);
    struct bank_disk *d = dt_open(dir, &o);
    dt_put(d, FP1, ids, 10, BANK_SNAP_HEAD);
    dt_put(d, FP1, ids, 20, BANK_SNAP_GRID);
    dt_put(d, FP1, ids, 30, BANK_SNAP_GRID);
    bank_disk_flush(d);
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.bytes, o.cap_bytes);
    dt_expect(d, FP1, ids, 64, 10, 10); /* touch 10: the least recently used is 20, but 30
                                          * builds on it; the only leaf is 30 */
    dt_put(d, FP1, ids, 15, BANK_SNAP_GRID); /* [10, 15) on 10 */
    bank_disk_flush(d);
    bank_disk_stats_get(d, &st);
    cr_assert_leq(st.bytes, o.cap_bytes);
    cr_assert_eq(st.evicted, 1);
    cr_assert_eq(st.entries, 3);
    cr_assert_eq(st.bytes, dt_blob_bytes(0, 10) + dt_blob_bytes(10, 20) + dt_blob_bytes(10, 15));
    dt_expect(d, FP1, ids, 64, 1000, 20); /* 30 went, never a stretch another entry needs */
    dt_expect(d, FP1, ids, 64, 19, 15);
    uint8_t *kv = bt_kv_rows(ids, 0, 1, ROW), *big = calloc(o.cap_bytes, 1);
    cr_assert_eq(bank_disk_put(d, FP1, ROW, o.cap_bytes, ids, 1, kv, big, BANK_SNAP_GRID),
                 BANK_DISK_TOO_BIG);
    free(kv);
    free(big);
    /* LRU of leaves now: 20 (hit before 15), 15; 10 becomes a leaf only after both went */
    uint64_t freed = bank_disk_gc(d, dt_blob_bytes(0, 10) + dt_blob_bytes(10, 15));
    bank_disk_stats_get(d, &st);
    cr_assert_eq(freed, dt_blob_bytes(10, 20));
    dt_expect(d, FP1, ids, 64, 1000, 15);
    freed = bank_disk_gc(d, dt_blob_bytes(0, 10));
    cr_assert_eq(freed, dt_blob_bytes(10, 15));
    dt_expect(d, FP1, ids, 64, 1000, 10); /* the root stays */
    bank_disk_close(d);
    /* a smaller cap at open is enforced there */
    o.cap_bytes = dt_entry_bytes(10) - 1;
    d = dt_open(dir, &o);
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.entries, 0);
    cr_assert_eq(st.evicted, 1);
    cr_assert_eq(dt_count_blobs(dir), 0);
    bank_disk_close(d);
    dt_rmrf(dir);
}

Test(bank_disk_cap, free_disk_floor)
{
    char *dir = dt_mkdtemp();
    int32_t ids[40];
    dt_ids(ids, 40, 8);
    struct bank_disk_opts o;
    bank_disk_opts_default(&o);
    o.free_floor_bytes = UINT64_MAX / 4;
    struct bank_disk *d = dt_open(dir, &o);
    dt_put(d, FP1, ids, 20, BANK_SNAP_HEAD);
    bank_disk_flush(d);
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.skipped_low_disk, 1);
    cr_assert_eq(st.entries, 0);
    cr_assert_eq(dt_count_blobs(dir), 0);
    bank_disk_close(d);
    dt_rmrf(dir);
}

Test(bank_disk_cap, queue_full_drops_the_least_valuable)
{
    char *dir = dt_mkdtemp();
    int32_t ids[64];
    dt_ids(ids, 64, 9);
    struct bank_disk_opts o;
    bank_disk_opts_default(&o);
    o.free_floor_bytes = 0;
    o.queue_len = 2;
    dt_gate_install(); /* fsync waits for dt_gate_open */
    struct bank_disk *d = dt_open(dir, &o);
    cr_assert_eq(dt_put(d, FP1, ids, 5, BANK_SNAP_GRID), BANK_DISK_QUEUED);
    dt_gate_wait_blocked(); /* the writer holds entry 5 */
    cr_assert_eq(dt_put(d, FP1, ids, 10, BANK_SNAP_GRID), BANK_DISK_QUEUED);
    cr_assert_eq(dt_put(d, FP1, ids, 10, BANK_SNAP_GRID), BANK_DISK_DUPLICATE);
    cr_assert_eq(dt_put(d, FP1, ids, 20, BANK_SNAP_END), BANK_DISK_QUEUED);  /* [10 20] */
    cr_assert_eq(dt_put(d, FP1, ids, 30, BANK_SNAP_END), BANK_DISK_QUEUED);  /* drops 20 */
    cr_assert_eq(dt_put(d, FP1, ids, 40, BANK_SNAP_HEAD), BANK_DISK_QUEUED); /* drops 30 */
    cr_assert_eq(dt_put(d, FP1, ids, 50, BANK_SNAP_END), BANK_DISK_DROPPED); /* itself */
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.dropped_queue_full, 3);
    cr_assert_eq(st.pending, 3);
    dt_gate_open();
    bank_disk_flush(d);
    dt_expect(d, FP1, ids, 64, 1000, 40);
    dt_expect(d, FP1, ids, 64, 39, 10);
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.entries, 3);
    cr_assert_eq(st.written, 3);
    bank_disk_close(d);
    sys_io_set_ops(NULL);
    dt_rmrf(dir);
}

Test(bank_disk_cap, reconcile_orphans_and_missing_files)
{
    char *dir = dt_mkdtemp();
    int32_t ids[40], ids2[40];
    dt_ids(ids, 40, 10);
    dt_ids(ids2, 40, 110);
    struct bank_disk *d = dt_open(dir, NULL);
    dt_put(d, FP1, ids, 10, BANK_SNAP_HEAD);
    dt_put(d, FP1, ids, 20, BANK_SNAP_GRID);  /* builds on 10 */
    dt_put(d, FP2, ids, 20, BANK_SNAP_GRID);
    dt_put(d, FP1, ids2, 20, BANK_SNAP_GRID); /* another path */
    bank_disk_flush(d);
    bank_disk_close(d);
    char *p10 = dt_blob_path(dir, FP1, ids, 10), *p20 = dt_blob_path(dir, FP1, ids, 20);
    char *p2 = dt_blob_path(dir, FP2, ids, 20);
    cr_assert_eq(unlink(p10), 0); /* missing file: 20 above it can never be restored */
    /* FP2's valid blob under a name that is not its key: an orphan, not adoptable */
    char *bogus = dt_strcat(dir, "/blobs/ab/ab00000000000000000000000000000000000000000000000000000000000000.hsb");
    /* a temp file of a writer that is gone (a child that exited), and one of a live
     * process (pid 1): only the first is removed */
    char tname[160];
    snprintf(tname, sizeof tname, "/blobs/ab/ab00000000000000000000000000000000000000000000000000000000000001.hsb.tmp.%ld.2",
             (long)dt_dead_pid());
    char *tmpf = dt_strcat(dir, tname);
    char *tmp_live = dt_strcat(dir, "/blobs/ab/ab00000000000000000000000000000000000000000000000000000000000003.hsb.tmp.1.2");
    char *old = dt_strcat(dir, "/blobs/ab/ab00000000000000000000000000000000000000000000000000000000000002.blob");
    char *abdir = dt_strcat(dir, "/blobs/ab");
    mkdir(abdir, 0755);
    cr_assert_eq(rename(p2, bogus), 0);
    dt_write_file(tmpf, "half", 4);
    dt_write_file(tmp_live, "half", 4);
    dt_write_file(old, "HSBANKB1", 8); /* a format-1 blob */
    d = dt_open(dir, NULL);
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.open_rows, 4);
    cr_assert_eq(st.open_rows_dropped, 3); /* 10 with 20 above it, and FP2's row */
    cr_assert_eq(st.open_orphans_removed, 1);
    cr_assert_eq(st.open_tmp_removed, 1);
    cr_assert_eq(st.open_old_removed, 1);
    cr_assert_eq(st.entries, 1);
    cr_assert_not(dt_exists(bogus));
    cr_assert_not(dt_exists(tmpf));
    cr_assert(dt_exists(tmp_live), "a live process's temp file was removed");
    cr_assert_not(dt_exists(old));
    cr_assert_not(dt_exists(p20));
    cr_assert_eq(unlink(tmp_live), 0);
    free(tmp_live);
    cr_assert_eq(dt_count_blobs(dir), 1);
    dt_expect(d, FP1, ids, 40, 1000, 0);
    dt_expect(d, FP2, ids, 40, 1000, 0);
    dt_expect(d, FP1, ids2, 40, 1000, 20);
    /* gc finds an orphan that appeared while open */
    dt_write_file(bogus, "junk", 4);
    bank_disk_gc(d, UINT64_MAX);
    cr_assert_not(dt_exists(bogus));
    dt_expect(d, FP1, ids2, 40, 1000, 20);
    bank_disk_close(d);
    free(p10);
    free(p20);
    free(p2);
    free(bogus);
    free(tmpf);
    free(old);
    free(abdir);
    dt_rmrf(dir);
}

Test(bank_disk, cap_policy)
{
    cr_assert_eq(bank_disk_cap_for("/nonexistent/x", 12345), 12345);
    /* a directory that does not exist yet: its nearest parent's free space decides. Other
     * processes write to /tmp meanwhile, so the free space is read before and after each
     * call and the cap must be the policy's value for some reading between the two. */
    for (int k = 0; k < 2; k++) {
        uint64_t f0 = sys_disk_free_bytes("/tmp");
        uint64_t cap = k == 0 ? bank_disk_cap_for("/tmp/hs-no-such-dir/a/b", 0) : bank_disk_cap_for("/tmp", -1);
        uint64_t f1 = sys_disk_free_bytes("/tmp");
        uint64_t w0 = f0 ? HS_MIN(f0 / 5, BANK_DISK_CAP_MAX) : BANK_DISK_CAP_MAX;
        uint64_t w1 = f1 ? HS_MIN(f1 / 5, BANK_DISK_CAP_MAX) : BANK_DISK_CAP_MAX;
        uint64_t lo = w0 < w1 ? w0 : w1, hi = w0 < w1 ? w1 : w0;
        cr_assert(cap >= lo && cap <= hi, "cap %llu, want %llu..%llu", (unsigned long long)cap,
                  (unsigned long long)lo, (unsigned long long)hi);
    }
}

/* bank_disk_put_hit: the queued write shares the hit's buffer instead of copying it, so it
 * must hold its own reference: the hit is freed while the write still waits behind another
 * one (freed memory would be reused and the entry written wrong or not at all), and it
 * stores only the rows past what the directory already has. */
Test(bank_disk, put_hit_outlives_the_hit)
{
    char *da = dt_mkdtemp(), *db = dt_mkdtemp();
    int32_t ids[40];
    dt_ids(ids, 40, 12);
    struct bank_disk *a = dt_open(da, NULL), *b = dt_open(db, NULL);
    dt_put(a, FP1, ids, 30, BANK_SNAP_HEAD);
    bank_disk_flush(a);
    dt_put(b, FP1, ids, 10, BANK_SNAP_GRID);
    bank_disk_flush(b);
    struct bank_disk_hit h;
    bank_disk_lookup(a, FP1, ROW, SNAP, ids, 40, 0, 1000, &h);
    cr_assert_eq(h.pos, 30);
    int32_t other[40];
    dt_ids(other, 40, 13);
    dt_gate_install(); /* fsync waits for dt_gate_open */
    cr_assert_eq(dt_put(b, FP2, other, 20, BANK_SNAP_GRID), BANK_DISK_QUEUED);
    dt_gate_wait_blocked(); /* b's writer holds FP2's entry: the hit's write waits */
    cr_assert_eq(bank_disk_put_hit(b, FP1, ROW, SNAP, &h), BANK_DISK_QUEUED);
    cr_assert_eq(bank_disk_put_hit(b, FP1, ROW + 1, SNAP, &h), BANK_DISK_BAD_ARGS);
    bank_disk_hit_free(&h);
    /* churn the allocator: what the hit's buffer would have been reused for */
    const size_t hit_bytes = 30 * 4 + 30 * ROW + SNAP + 1;
    for (int i = 0; i < 16; i++) {
        uint8_t *junk = malloc(hit_bytes);
        memset(junk, 0xa5, hit_bytes);
        free(junk);
    }
    dt_gate_open();
    bank_disk_flush(b);
    sys_io_set_ops(NULL);
    dt_expect(b, FP1, ids, 40, 1000, 30);
    struct bank_disk_stats st;
    bank_disk_stats_get(b, &st);
    cr_assert_eq(st.written, 3);
    /* 30 stores [10, 30) on top of 10, like any put */
    cr_assert_eq(st.bytes, dt_entry_bytes(10) + dt_blob_bytes(10, 30) + dt_entry_bytes(20));
    bank_disk_close(a);
    bank_disk_close(b);
    dt_rmrf(da);
    dt_rmrf(db);
}
