/* test_disk_crash.c — kill -9 in the middle of heavy writing, repeated: a child process
 * writes entries as fast as it can and is killed at a varying moment; the next open must
 * reconcile to a store where every index row verifies, no stray file remains, and every
 * lookup is exact or a miss. The store is carried over from round to round. */
#include <criterion/criterion.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "disk_test.h"

#define NIDS 300
#define ROUNDS 24

static void crash_opts(struct bank_disk_opts *o)
{
    bank_disk_opts_default(o);
    o->free_floor_bytes = 0;
    o->cap_bytes = 40 * dt_entry_bytes(NIDS); /* evictions happen too */
}

/* Writes forever; one byte on `ready` after the first batch is on disk. */
static void child_writes(const char *dir, const int32_t *ids, int round, int ready)
{
    struct bank_disk_opts o;
    crash_opts(&o);
    hs_log_set_level(HS_LOG_NONE);
    struct bank_disk *d = bank_disk_open(dir, &o, NULL);
    if (!d) _exit(3);
    for (int64_t k = 0;; k++) {
        int64_t p = 1 + (int64_t)(bt_mix((uint64_t)(round * 7919 + k)) % (NIDS - 1));
        uint8_t *kv = bt_kv_rows(ids, 0, p, ROW);
        uint8_t snap[SNAP];
        bt_snap_fill(snap, SNAP, ids, p, FP1);
        bank_disk_put(d, FP1, ROW, SNAP, ids, p, kv, snap, (enum bank_snap_kind)(k % 6));
        free(kv);
        if (k % 8 == 7) bank_disk_flush(d);
        if (k == 7 && write(ready, "x", 1) != 1) _exit(4);
    }
}

Test(bank_disk_crash, kill9_loop, .timeout = 60)
{
    char *dir = dt_mkdtemp();
    int32_t ids[NIDS];
    dt_ids(ids, NIDS, 13);
    uint64_t max_entries = 0, mid_write = 0;
    struct bank_disk_opts o;
    crash_opts(&o);
    for (int round = 0; round < ROUNDS; round++) {
        int pfd[2];
        cr_assert_eq(pipe(pfd), 0);
        pid_t pid = fork();
        cr_assert_neq(pid, -1);
        if (pid == 0) {
            close(pfd[0]);
            child_writes(dir, ids, round, pfd[1]);
        }
        close(pfd[1]);
        char c;
        cr_assert_eq(read(pfd[0], &c, 1), 1, "round %d: the writer died early", round);
        close(pfd[0]);
        struct timespec ts = {0, (long)(1 + (round * 37) % 40) * 1000000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int status;
        waitpid(pid, &status, 0);
        cr_assert(WIFSIGNALED(status), "the writer exited on its own (status %d)", status);

        struct bank_disk *d = dt_open(dir, &o);
        struct bank_disk_verify_result vr;
        cr_assert_eq(bank_disk_verify(d, &vr, NULL), HS_OK);
        cr_assert_eq(vr.removed, 0, "round %d: a row points at a bad blob", round);
        struct bank_disk_stats st;
        bank_disk_stats_get(d, &st);
        cr_assert_not(st.disabled);
        cr_assert_leq(st.bytes, o.cap_bytes);
        cr_assert_eq((uint64_t)dt_count_blobs(dir), st.entries, "round %d: stray files", round);
        mid_write += st.open_tmp_removed + st.open_adopted;
        for (int64_t n = 2; n <= NIDS; n += 37) {
            struct bank_disk_hit h;
            bank_disk_lookup(d, FP1, ROW, SNAP, ids, n, 0, NIDS, &h);
            if (h.pos) cr_assert_eq(dt_hit_bad(&h, FP1, ids), 0, "round %d: wrong bytes", round);
            bank_disk_hit_free(&h);
        }
        if (st.entries > max_entries) max_entries = st.entries;
        bank_disk_close(d);
    }
    cr_assert_gt(max_entries, 0, "no round ever persisted anything");
    cr_assert_gt(mid_write, 0, "no kill ever landed inside a write");
    dt_rmrf(dir);
}
