/* test_disk_share.c — shared prefixes on disk: snapshots on one path store their common
 * KV rows once (bytes on disk = one copy, asserted), a branch shares the stretch before the
 * branch point, a bad or missing shared stretch takes exactly the entries that need it
 * (the others restore, the rest fall back cold or to a shallower good entry), gc never
 * deletes a stretch another entry builds on, put copies only the rows past the stored
 * prefix, a write whose base vanished is skipped, and a format-1 directory is cleared. */
#include <criterion/criterion.h>
#include <sqlite3.h>
#include <xxhash.h>

#include "disk_test.h"

#define N 1600

/* Path A: ids; path B: the same first 1100 tokens, then its own. */
static void two_paths(int32_t *a, int32_t *b, int seed)
{
    dt_ids(a, N, seed);
    dt_ids(b, N, seed + 1000);
    memcpy(b, a, 1100 * 4);
}

static uint64_t one_copy(int64_t p, int n_snaps)
{
    return (uint64_t)p * (4 + ROW) + (uint64_t)n_snaps * (HDR + SNAP);
}

Test(bank_disk_share, one_path_stores_its_prefix_once)
{
    char *dir = dt_mkdtemp();
    int32_t a[N], b[N];
    two_paths(a, b, 21);
    struct bank_disk *d = dt_open(dir, NULL);
    /* a head end at 1000 and a turn end at 1200 on one path (the 10k/12k case) */
    cr_assert_eq(dt_put(d, FP1, a, 1000, BANK_SNAP_HEAD), BANK_DISK_QUEUED);
    cr_assert_eq(dt_put(d, FP1, a, 1200, BANK_SNAP_END), BANK_DISK_QUEUED);
    bank_disk_flush(d);
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.entries, 2);
    cr_assert_eq(st.bytes, dt_blob_bytes(0, 1000) + dt_blob_bytes(1000, 1200));
    /* one copy of 1200 rows and two snapshots; storing each whole would be 2200 rows */
    cr_assert_eq(st.bytes, one_copy(1200, 2));
    cr_assert_lt(st.bytes, dt_entry_bytes(1000) + dt_entry_bytes(1200) - 900 * (4 + ROW));
    cr_assert_eq(st.written_tokens, 1200);
    /* path B branches at 1100: it shares [0, 1000) and stores [1000, 1300) */
    cr_assert_eq(dt_put(d, FP1, b, 1300, BANK_SNAP_END), BANK_DISK_QUEUED);
    bank_disk_flush(d);
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.bytes, dt_blob_bytes(0, 1000) + dt_blob_bytes(1000, 1200) + dt_blob_bytes(1000, 1300));
    cr_assert_eq(st.written_tokens, 1500);
    dt_expect(d, FP1, a, N, N, 1200);
    dt_expect(d, FP1, b, N, N, 1300);
    dt_expect(d, FP1, b, 1250, N, 1000);
    dt_expect(d, FP1, a, 1100, N, 1000);
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.hit_blobs, 2 + 2 + 1 + 1);
    bank_disk_close(d);

    /* the chains survive a restart, and verify walks them whole */
    d = dt_open(dir, NULL);
    struct bank_disk_verify_result vr;
    cr_assert_eq(bank_disk_verify(d, &vr, NULL), HS_OK);
    cr_assert_eq(vr.checked, 3);
    cr_assert_eq(vr.good, 3);
    dt_expect(d, FP1, a, N, N, 1200);
    dt_expect(d, FP1, b, N, N, 1300);
    bank_disk_close(d);
    dt_rmrf(dir);
}

/* Rows are copied past the deepest prefix already stored; a stored prefix is only touched. */
Test(bank_disk_share, put_copies_only_new_rows)
{
    char *dir = dt_mkdtemp();
    int32_t a[N], b[N];
    two_paths(a, b, 22);
    struct bank_disk_opts o;
    bank_disk_opts_default(&o);
    o.free_floor_bytes = 0;
    struct bank_disk *d = dt_open(dir, &o);
    dt_put(d, FP1, a, 1000, BANK_SNAP_HEAD);
    bank_disk_flush(d);
    bank_disk_close(d);
    dt_gate_install(); /* fsync waits for dt_gate_open */
    d = dt_open(dir, &o);
    cr_assert_eq(dt_put(d, FP1, b, 50, BANK_SNAP_GRID), BANK_DISK_QUEUED); /* holds the writer */
    dt_gate_wait_blocked();
    cr_assert_eq(dt_put(d, FP1, a, 1200, BANK_SNAP_END), BANK_DISK_QUEUED);
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.pending_bytes, 4 * 1200 + 200 * ROW + SNAP, "put copied %llu bytes",
                 (unsigned long long)st.pending_bytes);
    cr_assert_eq(dt_put(d, FP1, a, 1000, BANK_SNAP_HEAD), BANK_DISK_QUEUED); /* a touch */
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.pending_bytes, 4 * 1200 + 200 * ROW + SNAP);
    dt_gate_open();
    bank_disk_flush(d);
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.written, 2);
    cr_assert_eq(st.already_stored, 1);
    dt_expect(d, FP1, a, N, N, 1200);
    bank_disk_close(d);
    sys_io_set_ops(NULL);
    dt_rmrf(dir);
}

/* A queued write whose stored base is deleted before it runs is skipped (it holds no rows
 * before its base), never written dangling. */
Test(bank_disk_share, write_whose_base_vanished_is_skipped)
{
    char *dir = dt_mkdtemp();
    int32_t a[N], b[N];
    two_paths(a, b, 23);
    struct bank_disk_opts o;
    bank_disk_opts_default(&o);
    o.free_floor_bytes = 0;
    struct bank_disk *d = dt_open(dir, &o);
    dt_put(d, FP1, a, 1000, BANK_SNAP_HEAD);
    bank_disk_flush(d);
    bank_disk_close(d);
    dt_gate_install();
    d = dt_open(dir, &o);
    dt_put(d, FP1, b, 1500, BANK_SNAP_END); /* builds on 1000 too */
    dt_gate_wait_blocked();                 /* ... and is being written */
    dt_put(d, FP1, a, 1200, BANK_SNAP_END); /* queued, rows [1000, 1200) only */
    char *p = dt_blob_path(dir, FP1, a, 1000);
    dt_flip(p, HDR + 4 * 1000 + 5);
    dt_expect(d, FP1, a, 1001, N, 0); /* finds 1000 bad: deleted with its subtree */
    dt_gate_open();
    bank_disk_flush(d);
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.bad_checksum, 1);
    cr_assert_eq(st.skipped_base_gone, 2, "in flight and queued");
    cr_assert_eq(st.entries, 0);
    cr_assert_eq(st.bytes, 0);
    cr_assert_eq(dt_count_blobs(dir), 0);
    dt_expect(d, FP1, a, N, N, 0);
    dt_expect(d, FP1, b, N, N, 0);
    bank_disk_close(d);
    sys_io_set_ops(NULL);
    free(p);
    dt_rmrf(dir);
}

/* 1000 <- 1200 <- 1400 on A, 1000 <- 1300 on B. */
static struct bank_disk *shared_setup(char **dir, int32_t *a, int32_t *b, int seed)
{
    *dir = dt_mkdtemp();
    two_paths(a, b, seed);
    struct bank_disk *d = dt_open(*dir, NULL);
    dt_put(d, FP1, a, 1000, BANK_SNAP_HEAD);
    dt_put(d, FP1, a, 1200, BANK_SNAP_GENPROMPT);
    dt_put(d, FP1, a, 1400, BANK_SNAP_END);
    dt_put(d, FP1, b, 1300, BANK_SNAP_END);
    bank_disk_flush(d);
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.entries, 4);
    return d;
}

Test(bank_disk_share, bad_shared_root_sends_both_paths_cold)
{
    char *dir;
    int32_t a[N], b[N];
    struct bank_disk *d = shared_setup(&dir, a, b, 24);
    char *p = dt_blob_path(dir, FP1, a, 1000);
    dt_flip(p, HDR + 4 * 1000 + 999 * ROW); /* KV of the shared stretch */
    dt_expect(d, FP1, a, N, N, 0);
    dt_expect(d, FP1, b, N, N, 0);
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.bad_checksum, 1, "found once, its dependants went with it");
    cr_assert_eq(st.entries, 0);
    cr_assert_eq(st.bytes, 0);
    cr_assert_eq(dt_count_blobs(dir), 0);
    bank_disk_close(d);
    free(p);
    dt_rmrf(dir);
}

Test(bank_disk_share, bad_middle_stretch_falls_back_to_a_shallower_entry)
{
    char *dir;
    int32_t a[N], b[N];
    struct bank_disk *d = shared_setup(&dir, a, b, 25);
    char *p = dt_blob_path(dir, FP1, a, 1200); /* [1000, 1200), under 1400 */
    dt_flip(p, HDR + 7);                       /* its ids */
    dt_expect(d, FP1, a, N, N, 1000);          /* 1400 and 1200 need it: the head restores */
    dt_expect(d, FP1, b, N, N, 1300);          /* the other branch is untouched */
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.bad_checksum, 1);
    cr_assert_eq(st.entries, 2);
    cr_assert_eq(st.bytes, dt_blob_bytes(0, 1000) + dt_blob_bytes(1000, 1300));
    cr_assert_eq(dt_count_blobs(dir), 2);
    free(p);
    /* a shared stretch whose file disappeared: a miss for both, counted once */
    p = dt_blob_path(dir, FP1, a, 1000);
    cr_assert_eq(unlink(p), 0);
    dt_expect(d, FP1, b, N, N, 0);
    dt_expect(d, FP1, a, N, N, 0);
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.missing_files, 1);
    cr_assert_eq(st.entries, 0);
    cr_assert_eq(dt_count_blobs(dir), 0);
    bank_disk_close(d);
    free(p);
    dt_rmrf(dir);
}

Test(bank_disk_share, missing_shared_stretch_found_at_reopen)
{
    char *dir;
    int32_t a[N], b[N];
    struct bank_disk *d = shared_setup(&dir, a, b, 26);
    bank_disk_close(d);
    char *p = dt_blob_path(dir, FP1, a, 1200);
    cr_assert_eq(unlink(p), 0);
    d = dt_open(dir, NULL);
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.open_rows_dropped, 2); /* 1200 and 1400 above it */
    cr_assert_eq(st.entries, 2);
    cr_assert_eq(dt_count_blobs(dir), 2);
    dt_expect(d, FP1, a, N, N, 1000);
    dt_expect(d, FP1, b, N, N, 1300);
    bank_disk_close(d);
    /* the index deleted: rebuilt from the headers, parent links included */
    dt_rm_index(dir);
    d = dt_open(dir, NULL);
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.open_adopted, 2);
    dt_expect(d, FP1, b, N, N, 1300);
    bank_disk_close(d);
    free(p);
    dt_rmrf(dir);
}

Test(bank_disk_share, verify_takes_a_bad_stretch_with_its_dependants)
{
    char *dir;
    int32_t a[N], b[N];
    struct bank_disk *d = shared_setup(&dir, a, b, 27);
    char *p = dt_blob_path(dir, FP1, a, 1000);
    dt_flip(p, HDR + 4 * 500); /* ids of the shared root */
    struct bank_disk_verify_result vr;
    cr_assert_eq(bank_disk_verify(d, &vr, NULL), HS_OK);
    cr_assert_eq(vr.checked, 4);
    cr_assert_eq(vr.good, 0);
    cr_assert_eq(vr.removed, 4);
    cr_assert_eq(vr.removed_bytes, dt_blob_bytes(0, 1000) + dt_blob_bytes(1000, 1200) +
                                       dt_blob_bytes(1200, 1400) + dt_blob_bytes(1000, 1300));
    cr_assert_eq(dt_count_blobs(dir), 0);
    bank_disk_close(d);
    free(p);
    dt_rmrf(dir);
}

static bool all_chains_whole(void *ctx, const struct bank_disk_entry *e)
{
    int *broken = ctx;
    *broken += e->chain_broken;
    return true;
}

Test(bank_disk_share, gc_never_deletes_a_stretch_in_use)
{
    char *dir;
    int32_t a[N], b[N];
    struct bank_disk *d = shared_setup(&dir, a, b, 28);
    dt_expect(d, FP1, b, N, N, 1300); /* B is the most recently used */
    struct bank_disk_stats st;
    uint64_t target = dt_blob_bytes(0, 1000) + dt_blob_bytes(1000, 1300) + 1;
    bank_disk_gc(d, target); /* LRU leaves: 1400, then 1200 (now a leaf) */
    bank_disk_stats_get(d, &st);
    cr_assert_leq(st.bytes, target);
    cr_assert_eq(st.entries, 2);
    cr_assert_eq(st.evicted, 2);
    int broken = 0;
    cr_assert_eq(bank_disk_ls(d, all_chains_whole, &broken), 2);
    cr_assert_eq(broken, 0);
    dt_expect(d, FP1, b, N, N, 1300);
    dt_expect(d, FP1, a, N, N, 1000);
    struct bank_disk_verify_result vr;
    cr_assert_eq(bank_disk_verify(d, &vr, NULL), HS_OK);
    cr_assert_eq(vr.removed, 0);
    /* smaller than the shared root plus anything: leaves first, the root last */
    bank_disk_gc(d, dt_blob_bytes(0, 1000));
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.entries, 1);
    dt_expect(d, FP1, b, N, N, 1000);
    bank_disk_gc(d, 0);
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.entries, 0);
    cr_assert_eq(st.bytes, 0);
    cr_assert_eq(dt_count_blobs(dir), 0);
    bank_disk_close(d);
    dt_rmrf(dir);
}

/* The cap counts each blob once and the writer evicts leaves only: under a cap that holds
 * the shared root and a little more, new branches keep replacing each other. */
Test(bank_disk_share, cap_with_shared_root)
{
    char *dir = dt_mkdtemp();
    int32_t a[N];
    dt_ids(a, N, 29);
    struct bank_disk_opts o;
    bank_disk_opts_default(&o);
    o.free_floor_bytes = 0;
    o.cap_bytes = dt_blob_bytes(0, 1000) + 2 * dt_blob_bytes(1000, 1100);
    struct bank_disk *d = dt_open(dir, &o);
    dt_put(d, FP1, a, 1000, BANK_SNAP_HEAD);
    bank_disk_flush(d);
    for (int i = 0; i < 6; i++) {
        int32_t br[N];
        memcpy(br, a, sizeof br);
        br[1000] = 200000 + i; /* branch i leaves right after the head */
        dt_put(d, FP1, br, 1100, BANK_SNAP_END);
        bank_disk_flush(d);
        struct bank_disk_stats st;
        bank_disk_stats_get(d, &st);
        cr_assert_leq(st.bytes, o.cap_bytes);
        cr_assert_eq(st.written, (uint64_t)i + 2);
        dt_expect(d, FP1, br, N, N, 1100);
        dt_expect(d, FP1, a, N, N, 1000);
    }
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.evicted, 4);
    cr_assert_eq(st.entries, 3);
    bank_disk_close(d);
    dt_rmrf(dir);
}

/* A directory of format 1 (one whole-prefix blob per entry) is cleared, never misread. */
Test(bank_disk_share, format_1_directory_is_cleared)
{
    char *dir = dt_mkdtemp();
    cr_assert_eq(mkdir(dir, 0755), 0);
    char *ip = dt_strcat(dir, "/index.sqlite"), *bl = dt_strcat(dir, "/blobs"),
         *sub = dt_strcat(dir, "/blobs/ab"),
         *old = dt_strcat(dir, "/blobs/ab/ab00000000000000000000000000000000000000000000000000000000000000.blob");
    sqlite3 *db;
    cr_assert_eq(sqlite3_open(ip, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_exec(db,
        "CREATE TABLE meta(k TEXT PRIMARY KEY, v TEXT); INSERT INTO meta VALUES('format', '1');"
        "CREATE TABLE entries(key TEXT PRIMARY KEY, fp INTEGER, pos INTEGER, kind INTEGER,"
        " kv_row_bytes INTEGER, snapshot_bytes INTEGER, bytes INTEGER, created_ms INTEGER,"
        " last_use_ms INTEGER, hits INTEGER);"
        "INSERT INTO entries VALUES('ab00000000000000000000000000000000000000000000000000000000000000',"
        " 1, 10, 0, 24, 40, 500, 1, 1, 0);", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    mkdir(bl, 0755);
    mkdir(sub, 0755);
    uint8_t junk[500] = {'H', 'S', 'B', 'A', 'N', 'K', 'B', '1'};
    dt_write_file(old, junk, sizeof junk);
    struct bank_disk *d = dt_open(dir, NULL);
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.entries, 0);
    cr_assert_eq(st.open_rows, 0, "the format-1 rows were read");
    cr_assert_eq(st.open_old_removed, 1);
    cr_assert_not(dt_exists(old));
    int32_t ids[40];
    dt_ids(ids, 40, 30);
    dt_put(d, FP1, ids, 20, BANK_SNAP_HEAD);
    bank_disk_flush(d);
    dt_expect(d, FP1, ids, 40, 1000, 20);
    bank_disk_close(d);
    cr_assert_eq(sqlite3_open(ip, &db), SQLITE_OK);
    sqlite3_stmt *s;
    cr_assert_eq(sqlite3_prepare_v2(db, "SELECT v FROM meta WHERE k = 'format'", -1, &s, NULL), SQLITE_OK);
    cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
    cr_assert_str_eq((const char *)sqlite3_column_text(s, 0), "2");
    sqlite3_finalize(s);
    sqlite3_close(db);
    free(ip);
    free(bl);
    free(sub);
    free(old);
    dt_rmrf(dir);
}

/* A blob whose ids were changed and whose checksums were recomputed (so only the exact
 * token comparison can tell): never restored, whether it is the tail or a shared root. */
static void forge_id(const char *path, int64_t idx)
{
    FILE *f = fopen(path, "r+b");
    cr_assert_not_null(f);
    uint8_t h[HDR];
    cr_assert_eq(fread(h, 1, HDR, f), HDR);
    uint64_t start, pos;
    memcpy(&start, h + 24, 8);
    memcpy(&pos, h + 32, 8);
    size_t n = (size_t)(pos - start), len = n * (4 + ROW);
    uint8_t *pl = malloc(len);
    cr_assert_eq(fread(pl, 1, len, f), len);
    pl[4 * idx] ^= 1;
    uint64_t sum = XXH3_64bits(pl, len);
    memcpy(h + 128, &sum, 8);
    sum = XXH3_64bits(h, 152);
    memcpy(h + 152, &sum, 8);
    cr_assert_eq(fseek(f, 0, SEEK_SET), 0);
    cr_assert_eq(fwrite(h, 1, HDR, f), HDR);
    cr_assert_eq(fwrite(pl, 1, len, f), len);
    fclose(f);
    free(pl);
}

Test(bank_disk_share, forged_ids_with_valid_checksums)
{
    char *dir;
    int32_t a[N], b[N];
    struct bank_disk *d = shared_setup(&dir, a, b, 31);
    char *p = dt_blob_path(dir, FP1, a, 1400); /* [1200, 1400) */
    forge_id(p, 5);
    dt_expect(d, FP1, a, N, N, 1200);
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.bad_tokens, 1);
    cr_assert_eq(st.bad_checksum, 0, "the forgery kept the checksums valid");
    free(p);
    p = dt_blob_path(dir, FP1, a, 1000); /* the shared root */
    forge_id(p, 999);
    struct bank_disk_verify_result vr;
    cr_assert_eq(bank_disk_verify(d, &vr, NULL), HS_OK);
    cr_assert_eq(vr.removed, 3, "verify recomputes the key over the whole prefix");
    bank_disk_close(d);
    free(p);
    dt_rmrf(dir);
    /* the same forgery of a root met by a lookup (not verify) */
    d = shared_setup(&dir, a, b, 32);
    p = dt_blob_path(dir, FP1, a, 1000);
    forge_id(p, 0);
    dt_expect(d, FP1, b, N, N, 0);
    dt_expect(d, FP1, a, N, N, 0);
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.bad_tokens, 1);
    cr_assert_eq(st.entries, 0);
    bank_disk_close(d);
    free(p);
    dt_rmrf(dir);
}
