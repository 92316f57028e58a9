/* test_disk_lock.c — one writer per bank directory, readers beside it, and a tier that
 * comes back by itself (issue [F15] item 5; bank/disk.c invariants 7 and 8): a reader
 * (what `bank ls|stats` and a held `bank verify` use) changes nothing while the writer
 * writes — the writer's temp file, a bad entry, the index all stay; a second writer is
 * refused naming the holder's pid, another process's refusal too; WRITER_OR_READER reads
 * while the lock is held and takes it over when it frees up; after a transient I/O error
 * the tier re-enables itself and writes land again. */
#include <criterion/criterion.h>
#include <signal.h>

#include "disk_test.h"

#define NIDS 40

static struct bank_disk *open_as(const char *dir, enum bank_disk_access a, bool take_over,
                                 uint32_t retry_ms, struct hs_err *err)
{
    struct bank_disk_opts o;
    bank_disk_opts_default(&o);
    o.free_floor_bytes = 0;
    o.access = a;
    o.take_over = take_over;
    o.retry_ms = retry_ms;
    hs_err_clear(err);
    return bank_disk_open(dir, &o, err);
}

static int tmp_n;
static int tmp_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb; (void)f;
    if (flag == FTW_F && strstr(p, ".hsb.tmp.")) tmp_n++;
    return 0;
}

static int count_tmp(const char *dir)
{
    char *b = dt_strcat(dir, "/blobs");
    tmp_n = 0;
    nftw(b, tmp_cb, 16, FTW_PHYS);
    free(b);
    return tmp_n;
}

Test(bank_disk_lock, reader_changes_nothing_while_the_writer_writes, .timeout = 30)
{
    char *dir = dt_mkdtemp();
    int32_t ids[NIDS], other[NIDS];
    dt_ids(ids, NIDS, 61);
    dt_ids(other, NIDS, 62);
    struct bank_disk *w = dt_open(dir, NULL);
    dt_put(w, FP1, other, 12, BANK_SNAP_HEAD);
    bank_disk_flush(w);
    char *bad = dt_blob_path(dir, FP1, other, 12);
    dt_flip(bad, HDR + 4 * 20); /* in the KV rows: verify finds it */
    dt_gate_install();
    cr_assert_eq(dt_put(w, FP1, ids, 20, BANK_SNAP_HEAD), BANK_DISK_QUEUED);
    dt_gate_wait_blocked();
    cr_assert_eq(count_tmp(dir), 1);

    struct hs_err err;
    struct bank_disk *r = open_as(dir, BANK_DISK_READER, false, 0, &err);
    cr_assert_not_null(r, "%s", err.msg);
    struct bank_disk_stats st;
    bank_disk_stats_get(r, &st);
    cr_assert(st.read_only);
    cr_assert_eq(st.lock_holder_pid, (long)getpid(), "the reader names the writer's pid");
    cr_assert_eq(st.entries, 1);
    cr_assert_eq(dt_ls_count(r), 1);
    cr_assert_eq(dt_put(r, FP1, ids, 8, BANK_SNAP_HEAD), BANK_DISK_OFF);
    struct bank_disk_verify_result vr;
    cr_assert_eq(bank_disk_verify(r, &vr, NULL), HS_OK);
    cr_assert(vr.read_only);
    cr_assert_eq(vr.bad, 1, "the reader's verify finds the bad entry");
    cr_assert_eq(vr.removed, 0, "a reader removed an entry");
    cr_assert(dt_exists(bad), "a reader deleted a blob");
    cr_assert_eq(bank_disk_gc(r, 0), 0);
    dt_expect(r, FP1, other, NIDS, 1000, 0); /* bad: skipped, not deleted */
    cr_assert(dt_exists(bad));
    bank_disk_close(r);
    /* verify's mode: a reader while the lock is held */
    r = open_as(dir, BANK_DISK_WRITER_OR_READER, false, 0, &err);
    cr_assert_not_null(r, "%s", err.msg);
    bank_disk_stats_get(r, &st);
    cr_assert(st.read_only);
    cr_assert_eq(st.lock_holder_pid, (long)getpid());
    bank_disk_close(r);
    cr_assert_eq(count_tmp(dir), 1, "a reader removed the writer's temp file");

    dt_gate_open();
    bank_disk_flush(w);
    sys_io_set_ops(NULL);
    bank_disk_stats_get(w, &st);
    cr_assert_not(st.disabled, "%s", st.disabled_reason);
    cr_assert_eq(st.written, 2);
    dt_expect(w, FP1, ids, NIDS, 1000, 20);
    bank_disk_close(w);
    /* the lock is free: verify's mode is the writer, and removes the bad entry */
    r = open_as(dir, BANK_DISK_WRITER_OR_READER, false, 0, &err);
    cr_assert_not_null(r, "%s", err.msg);
    bank_disk_stats_get(r, &st);
    cr_assert_not(st.read_only);
    cr_assert_eq(bank_disk_verify(r, &vr, NULL), HS_OK);
    cr_assert_eq(vr.bad, 1);
    cr_assert_eq(vr.removed, 1);
    cr_assert_not(dt_exists(bad));
    bank_disk_close(r);
    free(bad);
    dt_rmrf(dir);
}

/* Another process holds the directory: a writer's open is refused naming that pid, a
 * reader reads, and a take_over reader becomes the writer once the holder exits. */
Test(bank_disk_lock, another_process_holds_it_then_lets_go, .timeout = 30)
{
    char *dir = dt_mkdtemp();
    int32_t ids[NIDS];
    dt_ids(ids, NIDS, 63);
    int go[2], ready[2];
    cr_assert_eq(pipe(go), 0);
    cr_assert_eq(pipe(ready), 0);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) { /* the holder: writes one entry, then waits to be told to exit */
        close(go[1]);
        close(ready[0]);
        struct bank_disk *d = dt_open(dir, NULL);
        dt_put(d, FP1, ids, 10, BANK_SNAP_HEAD);
        bank_disk_flush(d);
        if (write(ready[1], "x", 1) != 1) _exit(3);
        char c;
        if (read(go[0], &c, 1) != 1) _exit(4);
        bank_disk_close(d);
        _exit(0);
    }
    close(go[0]);
    close(ready[1]);
    char c;
    cr_assert_eq(read(ready[0], &c, 1), 1);

    struct hs_err err;
    struct bank_disk *w = open_as(dir, BANK_DISK_WRITER, false, 0, &err);
    cr_assert_null(w, "a second writer opened");
    char want[64];
    snprintf(want, sizeof want, "in use by process %ld", (long)pid);
    cr_assert(strstr(err.msg, want) != NULL, "%s", err.msg);

    struct bank_disk *t = open_as(dir, BANK_DISK_WRITER_OR_READER, true, 50, &err);
    cr_assert_not_null(t, "%s", err.msg);
    struct bank_disk_stats st;
    bank_disk_stats_get(t, &st);
    cr_assert(st.read_only);
    cr_assert_eq(st.lock_holder_pid, (long)pid);
    dt_expect(t, FP1, ids, NIDS, 1000, 10); /* it reads the holder's entries */
    cr_assert_eq(dt_put(t, FP1, ids, 20, BANK_SNAP_GRID), BANK_DISK_OFF);

    cr_assert_eq(write(go[1], "x", 1), 1);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    for (int i = 0; i < 400; i++) {
        bank_disk_stats_get(t, &st);
        if (!st.read_only) break;
        usleep(10000);
    }
    cr_assert_not(st.read_only, "the reader never took the lock over");
    cr_assert_eq(st.lock_holder_pid, 0);
    cr_assert_eq(dt_put(t, FP1, ids, 20, BANK_SNAP_GRID), BANK_DISK_QUEUED);
    bank_disk_flush(t);
    dt_expect(t, FP1, ids, NIDS, 1000, 20);
    bank_disk_close(t);
    close(go[1]);
    close(ready[0]);
    dt_rmrf(dir);
}

/* A transient I/O error (ENOSPC on fsync, EIO on rename) turns the tier off, and it turns
 * itself back on: the retry reconciles and the next write lands. A fault that persists
 * keeps it off, retrying ever later. */
Test(bank_disk_lock, tier_reenables_itself_after_a_transient_error, .timeout = 30)
{
    static const struct { enum sys_io_op op; int err; } faults[] = {
        { SYS_IO_FSYNC, ENOSPC }, { SYS_IO_RENAME, EIO }, { SYS_IO_PWRITE, EIO },
    };
    for (size_t f = 0; f < HS_ARRAY_LEN(faults); f++) {
        char *dir = dt_mkdtemp();
        int32_t ids[NIDS];
        dt_ids(ids, NIDS, 64 + (int)f);
        struct hs_err err;
        struct bank_disk *d = open_as(dir, BANK_DISK_WRITER, false, 50, &err);
        cr_assert_not_null(d, "%s", err.msg);
        sys_io_fault_clear_all();
        sys_io_fault_set(faults[f].op, 1, faults[f].err, false);
        cr_assert_eq(dt_put(d, FP1, ids, 10, BANK_SNAP_HEAD), BANK_DISK_QUEUED);
        bank_disk_flush(d);
        struct bank_disk_stats st;
        bank_disk_stats_get(d, &st);
        cr_assert(st.disabled, "%s: no error seen", sys_io_op_name(faults[f].op));
        cr_assert_eq(st.io_errors, 1);
        for (int i = 0; i < 300; i++) {
            bank_disk_stats_get(d, &st);
            if (!st.disabled) break;
            usleep(10000);
        }
        cr_assert_not(st.disabled, "%s: the tier stayed off: %s", sys_io_op_name(faults[f].op), st.disabled_reason);
        cr_assert_eq(st.reenabled, 1);
        cr_assert_eq(st.open_tmp_removed, 0, "the failed write left a temp file");
        cr_assert_eq(dt_put(d, FP1, ids, 20, BANK_SNAP_HEAD), BANK_DISK_QUEUED);
        bank_disk_flush(d);
        dt_expect(d, FP1, ids, NIDS, 1000, 20);
        bank_disk_stats_get(d, &st);
        cr_assert_eq(st.written, 1);
        cr_assert_not(st.disabled);
        bank_disk_close(d);
        sys_io_fault_clear_all();
        dt_rmrf(dir);
    }

    /* persistent: off, retried with a growing wait, on again once the disk heals */
    char *dir = dt_mkdtemp();
    int32_t ids[NIDS];
    dt_ids(ids, NIDS, 70);
    struct hs_err err;
    struct bank_disk *d = open_as(dir, BANK_DISK_WRITER, false, 50, &err);
    cr_assert_not_null(d, "%s", err.msg);
    sys_io_fault_clear_all();
    sys_io_fault_set(SYS_IO_FSYNC, 1, EIO, true);
    struct bank_disk_stats st;
    int64_t last_wait = 0;
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 300; i++) { /* wait for the retry to turn it on, then fail again */
            bank_disk_stats_get(d, &st);
            if (!st.disabled) break;
            usleep(5000);
        }
        dt_put(d, FP1, ids, 10 + k, BANK_SNAP_HEAD);
        bank_disk_flush(d);
        bank_disk_stats_get(d, &st);
        cr_assert(st.disabled);
        cr_assert_geq(st.retry_in_ms, last_wait, "the wait does not grow: %lld after %lld",
                      (long long)st.retry_in_ms, (long long)last_wait);
        last_wait = st.retry_in_ms;
    }
    cr_assert_eq(st.written, 0);
    sys_io_fault_clear_all();
    for (int i = 0; i < 500; i++) {
        bank_disk_stats_get(d, &st);
        if (!st.disabled) break;
        usleep(10000);
    }
    cr_assert_not(st.disabled);
    cr_assert_eq(dt_put(d, FP1, ids, 30, BANK_SNAP_HEAD), BANK_DISK_QUEUED);
    bank_disk_flush(d);
    dt_expect(d, FP1, ids, NIDS, 1000, 30);
    bank_disk_close(d);
    dt_rmrf(dir);
}
