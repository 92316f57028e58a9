/* test_disk_dir.c — the bank directory as hostile input, and shared with another handle
 * (issue [F15] items 5 and 7): a second open while a write is in flight never costs the
 * writer its write; a FIFO at a blob's name never hangs a lookup; an index key is never
 * used as a path unless it is 64 hex digits (a key "../x" deletes nothing outside the
 * directory, an over-long key is removed without taking the entry it prefixes); a
 * symlinked shard directory is never followed; every discarded entry is logged and
 * counted. */
#include <criterion/criterion.h>
#include <sqlite3.h>

#include "disk_test.h"

#define NIDS 40

/* The parent of dir (the mkdtemp directory): outside the bank. Owned string. */
static char *outside(const char *dir, const char *name)
{
    char *up = strdup(dir);
    *strrchr(up, '/') = 0;
    char *p = malloc(strlen(up) + strlen(name) + 2);
    sprintf(p, "%s/%s", up, name);
    free(up);
    return p;
}

static void sql(const char *dir, const char *stmt)
{
    char *ip = dt_strcat(dir, "/index.sqlite");
    sqlite3 *db = NULL;
    cr_assert_eq(sqlite3_open(ip, &db), SQLITE_OK);
    char *msg = NULL;
    cr_assert_eq(sqlite3_exec(db, stmt, NULL, NULL, &msg), SQLITE_OK, "%s: %s", stmt, msg ? msg : "");
    sqlite3_close(db);
    free(ip);
}

static int64_t sql_count(const char *dir, const char *query)
{
    char *ip = dt_strcat(dir, "/index.sqlite");
    sqlite3 *db = NULL;
    sqlite3_stmt *s = NULL;
    cr_assert_eq(sqlite3_open(ip, &db), SQLITE_OK);
    cr_assert_eq(sqlite3_prepare_v2(db, query, -1, &s, NULL), SQLITE_OK, "%s", query);
    cr_assert_eq(sqlite3_step(s), SQLITE_ROW);
    int64_t n = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    sqlite3_close(db);
    free(ip);
    return n;
}

/* The hex key in a blob path (its file name without .hsb). */
static void key_of(const char *path, char out[65])
{
    const char *b = strrchr(path, '/') + 1;
    memcpy(out, b, 64);
    out[64] = 0;
}

static int count_tmp_cb_n;
static int count_tmp_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb; (void)f;
    if (flag == FTW_F && strstr(p, ".hsb.tmp.")) count_tmp_cb_n++;
    return 0;
}

static int count_tmp(const char *dir)
{
    char *b = dt_strcat(dir, "/blobs");
    count_tmp_cb_n = 0;
    nftw(b, count_tmp_cb, 16, FTW_PHYS);
    free(b);
    return count_tmp_cb_n;
}

/* A second open of the directory while the first handle's writer is inside a write: it
 * must neither remove the write's temp file nor run a second writer beside it. */
Test(bank_disk_dir, second_open_never_costs_the_writer_its_write, .timeout = 30)
{
    char *dir = dt_mkdtemp();
    int32_t ids[NIDS];
    dt_ids(ids, NIDS, 51);
    struct bank_disk *d1 = dt_open(dir, NULL);
    dt_gate_install();
    cr_assert_eq(dt_put(d1, FP1, ids, 20, BANK_SNAP_HEAD), BANK_DISK_QUEUED);
    dt_gate_wait_blocked(); /* the temp file exists; the writer waits in fsync */
    cr_assert_eq(count_tmp(dir), 1);

    struct bank_disk_opts o;
    bank_disk_opts_default(&o);
    o.free_floor_bytes = 0;
    struct hs_err err;
    hs_err_clear(&err);
    struct bank_disk *d2 = bank_disk_open(dir, &o, &err);
    bool refused = d2 == NULL;
    if (d2) bank_disk_close(d2);
    cr_assert_eq(count_tmp(dir), 1, "the second open removed the writer's temp file");
    cr_assert(refused, "a second writer opened beside the first");
    char want[64];
    snprintf(want, sizeof want, "in use by process %ld", (long)getpid());
    cr_assert(strstr(err.msg, want) != NULL, "the refusal names the holder: %s", err.msg);

    dt_gate_open();
    bank_disk_flush(d1);
    sys_io_set_ops(NULL);
    struct bank_disk_stats st;
    bank_disk_stats_get(d1, &st);
    cr_assert_not(st.disabled, "the writer's tier went off: %s", st.disabled_reason);
    cr_assert_eq(st.written, 1);
    dt_expect(d1, FP1, ids, NIDS, 1000, 20);
    bank_disk_close(d1);
    /* released: the next writer opens, and finds the entry */
    struct bank_disk *d3 = dt_open(dir, NULL);
    dt_expect(d3, FP1, ids, NIDS, 1000, 20);
    bank_disk_close(d3);
    dt_rmrf(dir);
}

/* A FIFO planted at a blob's name: a lookup must not block on it (it would hold the engine
 * forever); the entry is discarded, the shallower good one restores, the FIFO is left. */
Test(bank_disk_dir, fifo_at_a_blob_name_never_hangs, .timeout = 20)
{
    char *dir = dt_mkdtemp();
    int32_t ids[NIDS];
    dt_ids(ids, NIDS, 52);
    struct bank_disk *d = dt_open(dir, NULL);
    dt_put(d, FP1, ids, 10, BANK_SNAP_HEAD);
    dt_put(d, FP1, ids, 20, BANK_SNAP_GRID); /* builds on 10 */
    bank_disk_flush(d);
    char *p20 = dt_blob_path(dir, FP1, ids, 20);
    cr_assert_eq(unlink(p20), 0);
    cr_assert_eq(mkfifo(p20, 0644), 0);
    dt_expect(d, FP1, ids, NIDS, 1000, 10);
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_not(st.disabled, "%s", st.disabled_reason);
    cr_assert_eq(st.bad_not_regular, 1);
    cr_assert_eq(st.discarded, 1);
    struct stat sb;
    cr_assert(lstat(p20, &sb) == 0 && S_ISFIFO(sb.st_mode), "the FIFO is not ours to remove");
    /* a symlink at a blob's name (to a good copy outside) is not followed either */
    char *p10 = dt_blob_path(dir, FP1, ids, 10), *copy = outside(dir, "copy.hsb");
    cr_assert_eq(rename(p10, copy), 0);
    cr_assert_eq(symlink(copy, p10), 0);
    dt_expect(d, FP1, ids, NIDS, 1000, 0);
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.bad_not_regular, 2);
    cr_assert(dt_exists(copy), "the symlink's target was removed");
    bank_disk_close(d);
    /* both are foreign now: reported at open and by verify, never touched */
    d = dt_open(dir, NULL);
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.foreign, 2);
    struct bank_disk_verify_result vr;
    cr_assert_eq(bank_disk_verify(d, &vr, NULL), HS_OK);
    cr_assert_eq(vr.foreign, 2);
    bank_disk_close(d);
    cr_assert(lstat(p20, &sb) == 0 && S_ISFIFO(sb.st_mode));
    cr_assert(lstat(p10, &sb) == 0 && S_ISLNK(sb.st_mode));
    unlink(copy);
    free(copy);
    free(p10);
    free(p20);
    dt_rmrf(dir);
}

/* An index row whose key is "../x" names a file outside the directory: opening the bank
 * (which drops rows without files) must not delete it. */
Test(bank_disk_dir, index_key_is_never_a_path)
{
    char *dir = dt_mkdtemp();
    int32_t ids[NIDS];
    dt_ids(ids, NIDS, 53);
    struct bank_disk *d = dt_open(dir, NULL);
    dt_put(d, FP1, ids, 10, BANK_SNAP_HEAD);
    bank_disk_flush(d);
    bank_disk_close(d);
    /* blobs/<key[0:2]>/<key>.hsb with key "../x" is DIR/blobs/../../x.hsb: beside DIR */
    char *victim = outside(dir, "x.hsb");
    dt_write_file(victim, "precious", 8);
    sql(dir, "INSERT INTO entries VALUES('../x', '', 1, 0, 10, 0, 24, 40, 8, 1, 1, 0);"
             "INSERT INTO entries VALUES('../y', '../x', 1, 10, 20, 0, 24, 40, 8, 1, 1, 0);");
    d = dt_open(dir, NULL);
    cr_assert(dt_exists(victim), "opening the bank deleted a file outside it");
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.bad_rows, 2);
    cr_assert_eq(st.entries, 1);
    dt_expect(d, FP1, ids, NIDS, 1000, 10);
    struct bank_disk_verify_result vr;
    cr_assert_eq(bank_disk_verify(d, &vr, NULL), HS_OK);
    cr_assert_eq(vr.bad_rows, 2, "verify accounts for the malformed rows");
    bank_disk_close(d);
    cr_assert_eq(sql_count(dir, "SELECT COUNT(*) FROM entries WHERE length(key) != 64"), 0);
    unlink(victim);
    free(victim);
    dt_rmrf(dir);
}

/* A row whose key is a real entry's key with more characters after it: removed (it is no
 * key), without taking the real entry's row or file. */
Test(bank_disk_dir, over_long_key_is_removed_alone)
{
    char *dir = dt_mkdtemp();
    int32_t ids[NIDS];
    dt_ids(ids, NIDS, 54);
    struct bank_disk *d = dt_open(dir, NULL);
    dt_put(d, FP1, ids, 10, BANK_SNAP_HEAD);
    bank_disk_flush(d);
    bank_disk_close(d);
    char *p10 = dt_blob_path(dir, FP1, ids, 10);
    char k[65], stmt[512];
    key_of(p10, k);
    snprintf(stmt, sizeof stmt, "INSERT INTO entries SELECT key || 'ab', parent, fp, start, pos, kind,"
             " kv_row_bytes, snapshot_bytes, bytes, created_ms, last_use_ms, hits FROM entries WHERE key = '%s'", k);
    sql(dir, stmt);
    cr_assert_eq(sql_count(dir, "SELECT COUNT(*) FROM entries"), 2);
    d = dt_open(dir, NULL);
    cr_assert(dt_exists(p10), "the real entry's blob was deleted");
    dt_expect(d, FP1, ids, NIDS, 1000, 10);
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.bad_rows, 1);
    cr_assert_eq(st.entries, 1);
    bank_disk_close(d);
    cr_assert_eq(sql_count(dir, "SELECT COUNT(*) FROM entries WHERE length(key) != 64"), 0,
                 "the over-long key is still in the index");
    cr_assert_eq(sql_count(dir, "SELECT COUNT(*) FROM entries"), 1);
    free(p10);
    dt_rmrf(dir);
}

/* A shard directory that is a symlink to a directory elsewhere: never followed, so the
 * files there (named like blobs or not) survive every open and gc, and no write goes
 * through it. */
Test(bank_disk_dir, symlinked_shard_dir_is_not_followed)
{
    char *dir = dt_mkdtemp();
    int32_t ids[NIDS];
    dt_ids(ids, NIDS, 55);
    struct bank_disk *d = dt_open(dir, NULL);
    bank_disk_close(d);
    char *p10 = dt_blob_path(dir, FP1, ids, 10);
    char k[65];
    key_of(p10, k);
    /* the shard of the entry about to be written is a symlink to a user's directory */
    char *elsewhere = outside(dir, "elsewhere");
    cr_assert_eq(mkdir(elsewhere, 0755), 0);
    char fname[128];
    snprintf(fname, sizeof fname, "/%.2s%062d.hsb", k, 7);
    char *userf = dt_strcat(elsewhere, fname), *userf2 = dt_strcat(elsewhere, "/notes.txt");
    dt_write_file(userf, "mine", 4);
    dt_write_file(userf2, "mine", 4);
    char shard[16];
    snprintf(shard, sizeof shard, "/blobs/%.2s", k);
    char *sp = dt_strcat(dir, shard);
    cr_assert_eq(symlink(elsewhere, sp), 0);
    d = dt_open(dir, NULL);
    cr_assert(dt_exists(userf) && dt_exists(userf2), "the open followed the symlink and deleted a file");
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.foreign, 1);
    cr_assert_eq(dt_put(d, FP1, ids, 10, BANK_SNAP_HEAD), BANK_DISK_QUEUED);
    bank_disk_flush(d);
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.skipped_foreign, 1);
    cr_assert_eq(st.written, 0);
    cr_assert_not(st.disabled, "%s", st.disabled_reason);
    bank_disk_gc(d, 0);
    bank_disk_close(d);
    cr_assert(dt_exists(userf) && dt_exists(userf2), "gc followed the symlink");
    char key_file[128];
    snprintf(key_file, sizeof key_file, "/%s.hsb", k);
    char *through = dt_strcat(elsewhere, key_file);
    cr_assert_not(dt_exists(through), "a blob was written through the symlink");
    struct stat sb;
    cr_assert(lstat(sp, &sb) == 0 && S_ISLNK(sb.st_mode));
    unlink(sp);
    unlink(userf);
    unlink(userf2);
    rmdir(elsewhere);
    free(through);
    free(sp);
    free(userf);
    free(userf2);
    free(elsewhere);
    free(p10);
    dt_rmrf(dir);
}

/* A corrupt blob met by a lookup: discarded with one log line naming the entry and the
 * cause, and counted. */
Test(bank_disk_dir, discard_is_logged_and_counted)
{
    char *dir = dt_mkdtemp();
    int32_t ids[NIDS];
    dt_ids(ids, NIDS, 56);
    struct bank_disk *d = dt_open(dir, NULL);
    dt_put(d, FP1, ids, 10, BANK_SNAP_HEAD);
    bank_disk_flush(d);
    char *p10 = dt_blob_path(dir, FP1, ids, 10);
    char k[65];
    key_of(p10, k);
    dt_flip(p10, HDR + 4 * 3); /* an id in the stretch */
    char *logf = outside(dir, "log.txt");
    fflush(stderr);
    int saved = dup(2);
    int fd = open(logf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    close(fd);
    hs_log_set_level(HS_LOG_WARN);
    dt_expect(d, FP1, ids, NIDS, 1000, 0);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    hs_log_set_level(HS_LOG_ERROR);
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    cr_assert_eq(st.bad_checksum, 1);
    cr_assert_eq(st.discarded, 1);
    cr_assert_not(st.disabled);
    bank_disk_close(d);
    char buf[4096] = {0};
    FILE *f = fopen(logf, "rb");
    cr_assert_not_null(f);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char want[128];
    snprintf(want, sizeof want, "discarded entry %s: bad checksum", k);
    cr_assert(strstr(buf, want) != NULL, "no log line for the discard; the log was: %s", buf);
    unlink(logf);
    free(logf);
    free(p10);
    dt_rmrf(dir);
}
