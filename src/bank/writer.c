/*
 * writer.c — the disk tier's write side: bank_disk_put (copy what is not stored yet and
 * queue it), the writer thread that writes one blob at a time, the writer lock that makes
 * one process the directory's only writer, and the retry that re-enables the tier after
 * an I/O error (or lets a take_over reader become the writer).
 *
 * Invariants (in parentheses: the number of disk.c's invariant each one serves):
 *   1. put never waits on disk I/O: it consults the mirror under mu, hashes and copies
 *      outside it, and queues (6). The queue is bounded by count and bytes; when full the
 *      least valuable write (highest kind, then oldest) is dropped; a lone write always
 *      fits (6).
 *   2. A blob is written to a temp file, fsynced and renamed before its row is inserted
 *      (2); its parent stays pinned against eviction while it waits and while it is
 *      written (3); eviction runs before the write, so the cap holds during it (5).
 *   3. The writer thread holds db_mu only around SQLite statements, never during file
 *      I/O (9), and runs at nice 19 in the idle I/O class where the kernel allows it.
 *   4. Only the holder of flock(DIR/lock) writes; its pid is in the file for the others'
 *      messages (8). A retry reopens the index and reconciles before the tier is on (7).
 *
 * Lifecycle of a write:
 *
 *   bank_disk_put ─┬─ bad arguments, tier off, larger than the cap, a queued duplicate: refused
 *                  ├─ already stored: QUEUED as a touch (its recency only)
 *                  └─▶ QUEUED ──(queue full, least valuable)──▶ DROPPED
 *                        │ the writer takes the oldest
 *                        ▼
 *                     IN FLIGHT ──(base gone, foreign path, cannot fit, low disk)──▶ SKIPPED
 *                        │ temp file, fsync, rename
 *                        ▼
 *                      FILE ──(row inserted)──▶ STORED ──(LRU leaf evicted, or found bad)──▶ DELETED
 */
#include "bank/disk_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct bank_hitbuf *hitbuf_new(size_t bytes)
{
    struct bank_hitbuf *hb = hs_malloc(sizeof *hb);
    atomic_init(&hb->refs, 1);
    hb->mem = hs_malloc(bytes ? bytes : 1);
    return hb;
}

void hitbuf_unref(struct bank_hitbuf *hb)
{
    if (!hb || atomic_fetch_sub(&hb->refs, 1) != 1) return;
    hs_free(hb->mem);
    hs_free(hb);
}

void disk_pending_free(struct pending *p)
{
    if (!p) return;
    if (p->share) {
        hitbuf_unref(p->share);
    } else {
        hs_free((void *)p->ids);
        hs_free((void *)p->kv);
        hs_free((void *)p->snapb);
    }
    hs_free(p);
}

/* The deepest stored entry of p's key space at a position in [p->from, p->pos] whose key
 * is a prefix key of p->ids; *base_pos 0 when none. Caller holds db_mu. */
static void choose_base(struct bank_disk *d, const struct pending *p, int64_t *base_pos, uint8_t base[32])
{
    *base_pos = 0;
    memset(base, 0, 32);
    sqlite3_stmt *s = index_prep(d, "SELECT key, pos FROM entries WHERE fp = ? AND kv_row_bytes = ?"
                                 " AND snapshot_bytes = ? AND pos >= ? AND pos <= ? ORDER BY pos");
    if (!s) return;
    sqlite3_bind_int64(s, 1, (sqlite3_int64)p->fp);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)p->row);
    sqlite3_bind_int64(s, 3, (sqlite3_int64)p->snap);
    sqlite3_bind_int64(s, 4, p->from > 0 ? p->from : 1);
    sqlite3_bind_int64(s, 5, p->pos);
    struct blob_keys ph;
    blob_keys_init(&ph, p->fp, p->ids);
    int64_t at = -1;
    uint8_t k[32];
    while (sqlite3_step(s) == SQLITE_ROW) {
        uint8_t rk[32];
        int64_t pos = sqlite3_column_int64(s, 1);
        if (!blob_key_unhex((const char *)sqlite3_column_text(s, 0), rk)) continue;
        if (pos != at) { blob_keys_at(&ph, pos, k); at = pos; }
        if (memcmp(k, rk, 32) == 0) { *base_pos = pos; memcpy(base, rk, 32); }
    }
    blob_keys_free(&ph);
    sqlite3_finalize(s);
}

/* Tell the listener (the remote tier) that hk is stored; called with no other lock held. */
static void stored(struct bank_disk *d, const char *hk, enum bank_snap_kind kind)
{
    pthread_mutex_lock(&d->listen_mu);
    if (d->on_stored) d->on_stored(d->on_stored_ctx, hk, kind);
    pthread_mutex_unlock(&d->listen_mu);
}

/* Under listen_mu: once this returns, no call of the old listener is running. */
void bank_disk_set_listener(struct bank_disk *d, bank_disk_stored_fn fn, void *ctx)
{
    if (!d) return;
    pthread_mutex_lock(&d->listen_mu);
    d->on_stored = fn;
    d->on_stored_ctx = ctx;
    pthread_mutex_unlock(&d->listen_mu);
}

static void write_one(struct bank_disk *d, struct pending *p)
{
    char hk[65];
    blob_key_hex(p->key, hk);
    if (disk_is_disabled(d)) { disk_count(d, &d->st.skipped_off, 1); return; }

    pthread_mutex_lock(&d->db_mu);
    if (p->touch) {
        bool have = false;
        index_touch(d, hk, false, &have);
        pthread_mutex_unlock(&d->db_mu);
        disk_count(d, have ? &d->st.already_stored : &d->st.skipped_base_gone, 1);
        if (have) stored(d, hk, p->kind);
        return;
    }
    int64_t b;
    uint8_t base[32];
    choose_base(d, p, &b, base);
    if (disk_is_disabled(d)) {
        pthread_mutex_unlock(&d->db_mu);
        disk_count(d, &d->st.skipped_off, 1);
        return;
    }
    if (b == p->pos) { /* stored meanwhile (the same prefix banked again) */
        index_touch(d, hk, false, NULL);
        pthread_mutex_unlock(&d->db_mu);
        disk_count(d, &d->st.already_stored, 1);
        stored(d, hk, p->kind);
        return;
    }
    if (p->from > 0 && b == 0) { /* the base it copied past is gone: it has no rows before */
        pthread_mutex_unlock(&d->db_mu);
        disk_count(d, &d->st.skipped_base_gone, 1);
        return;
    }
    uint64_t plen;
    blob_payload_len(b, p->pos, p->row, p->snap, &plen); /* fits: put checked [from, pos) */
    uint64_t bytes = HDR_SIZE + plen;
    uint64_t free_b = sys_disk_free_bytes(d->dir);
    if (free_b && free_b < d->o.free_floor_bytes + bytes) {
        pthread_mutex_unlock(&d->db_mu);
        disk_count(d, &d->st.skipped_low_disk, 1);
        return;
    }
    if (d->o.cap_bytes) {
        index_evict_to(d, d->o.cap_bytes, bytes, b ? base : NULL);
        if (d->total_bytes + bytes > d->o.cap_bytes) {
            pthread_mutex_unlock(&d->db_mu);
            disk_count(d, &d->st.skipped_too_big, 1);
            return;
        }
    }
    pthread_mutex_lock(&d->mu);
    snprintf(d->inflight, sizeof d->inflight, "%s", hk);
    memcpy(d->inflight_base, base, 32);
    pthread_mutex_unlock(&d->mu);
    pthread_mutex_unlock(&d->db_mu);

    struct blob_hdr h = {0};
    h.version = FORMAT_VERSION;
    h.kind = (uint32_t)p->kind;
    h.fp = p->fp;
    h.start = (uint64_t)b;
    h.pos = (uint64_t)p->pos;
    h.row = p->row;
    h.snap = p->snap;
    h.payload_len = plen;
    memcpy(h.key, p->key, 32);
    memcpy(h.parent, base, 32);
    size_t ids_b = (size_t)(p->pos - b) * 4, kv_b = (size_t)(p->pos - b) * p->row;
    const uint8_t *kv = p->kv + (size_t)(b - p->from) * p->row;
    h.kv_sum = blob_stretch_sum(p->ids + b, ids_b, kv, kv_b);
    h.snap_sum = blob_snapshot_sum(p->snapb, p->snap);
    uint8_t hb[HDR_SIZE];
    blob_hdr_encode(&h, hb);

    char *path = disk_blob_path(d, hk);
    char sub[3] = {hk[0], hk[1], 0};
    char *subdir = sys_path_join(d->blobs, sub);
    struct hs_err err;
    hs_err_clear(&err);
    /* never write through something foreign (invariant 10): a symlinked shard directory
     * or a non-regular file at the blob's name */
    struct stat sb;
    int sh = disk_shard_state(d, hk);
    bool ok = sh != ENOTDIR && sys_mkdir_p(subdir, &err) == HS_OK;
    if (sh == ENOTDIR || (ok && lstat(path, &sb) == 0 && !S_ISREG(sb.st_mode))) {
        pthread_mutex_lock(&d->db_mu);
        pthread_mutex_lock(&d->mu);
        d->inflight[0] = 0;
        memset(d->inflight_base, 0, 32);
        d->st.skipped_foreign++;
        pthread_mutex_unlock(&d->mu);
        pthread_mutex_unlock(&d->db_mu);
        if (sh == ENOTDIR) log_warn("bank disk: %s is not a directory the tier made: entry %s not written", subdir, hk);
        else log_warn("bank disk: %s is not a regular file: entry not written", path);
        hs_free(subdir);
        hs_free(path);
        return;
    }
    struct sys_wfile w;
    if (ok) ok = sys_wfile_open(&w, path, &err) == HS_OK;
    if (ok) {
        sys_wfile_pwrite(&w, hb, HDR_SIZE, 0);
        sys_wfile_pwrite(&w, p->ids + b, ids_b, HDR_SIZE);
        sys_wfile_pwrite(&w, kv, kv_b, HDR_SIZE + ids_b);
        sys_wfile_pwrite(&w, p->snapb, p->snap, HDR_SIZE + ids_b + kv_b);
        ok = sys_wfile_commit(&w, &err) == HS_OK;
    }
    hs_free(subdir);
    pthread_mutex_lock(&d->db_mu);
    char hp[65] = "";
    if (b) blob_key_hex(base, hp);
    struct disk_row par;
    if (!ok) {
        disk_disable(d, "write: %s%s", err.msg, "");
    } else if (b && (!index_row_get(d, hp, &par) || par.pos != b)) {
        /* the base was deleted as bad while this was written: the new blob is useless */
        (void)sys_io_unlink(path);
        disk_count(d, &d->st.skipped_base_gone, 1);
    } else if (index_insert(d, hk, hp, p->fp, b, p->pos, (int)p->kind, p->row, p->snap, bytes,
                         disk_next_tick(d), d->tick) != 0) {
        (void)sys_io_unlink(path); /* no row: an orphan; the next open removes it if this fails */
    } else {
        d->total_bytes += bytes;
        d->n_entries++;
        pthread_mutex_lock(&d->mu);
        d->st.written++;
        d->st.written_bytes += bytes;
        d->st.written_tokens += (uint64_t)(p->pos - b);
        d->backoff_ms = 0; /* a good write: the next failure waits retry_ms again */
        pthread_mutex_unlock(&d->mu);
    }
    pthread_mutex_lock(&d->mu);
    d->inflight[0] = 0;
    memset(d->inflight_base, 0, 32);
    pthread_mutex_unlock(&d->mu);
    bool have = ok && index_row_get(d, hk, &par);
    pthread_mutex_unlock(&d->db_mu);
    hs_free(path);
    if (have) stored(d, hk, p->kind);
}

/* Lower this thread's CPU and I/O priority (invariant 9). Linux: nice is per thread
 * (setpriority on the tid), and raising one's own nice value needs no privilege; the
 * idle I/O class needs none since Linux 2.6.25 and takes effect under the bfq and
 * mq-deadline schedulers (none: no effect, no harm). Failures only cost priority. */
static void writer_lower_priority(struct bank_disk *d)
{
    if (!d->o.writer_low_priority) return;
    long tid = syscall(SYS_gettid);
    bool cpu = setpriority(PRIO_PROCESS, (id_t)tid, 19) == 0;
    bool io = false;
#ifdef SYS_ioprio_set
    /* IOPRIO_WHO_PROCESS = 1 (a thread id), class IDLE = 3 in bits 13..15 */
    io = syscall(SYS_ioprio_set, 1, (int)tid, 3 << 13) == 0;
#endif
    pthread_mutex_lock(&d->mu);
    d->st.writer_nice = cpu ? 19 : 0;
    d->st.writer_io_idle = io;
    pthread_mutex_unlock(&d->mu);
}

/* ---- the writer lock (invariant 8) ---------------------------------------------------- */

/* The pid DIR/lock names when that process is alive; 0 when none or unknown. */
long disk_lock_file_pid(const char *lock_path)
{
    int fd = sys_io_open(lock_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0);
    if (fd < 0) return 0;
    struct stat sb;
    char buf[32];
    long pid = 0;
    if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode)) {
        ssize_t n = sys_io_pread_full(fd, buf, sizeof buf - 1, 0);
        if (n > 0) {
            buf[n] = 0;
            char *end;
            long v = strtol(buf, &end, 10);
            if (end != buf && v > 0) pid = v;
        }
    }
    sys_io_close(fd);
    if (pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH) pid = 0;
    return pid;
}

/* Take DIR/lock exclusively: 0 taken (d->lock_fd), 1 another handle holds it (*holder:
 * its pid, 0 unknown), -1 the lock file is unusable (err names it). */
int disk_lock_take(struct bank_disk *d, long *holder, struct hs_err *err)
{
    *holder = 0;
    int fd = sys_io_open(d->lock_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
    if (fd < 0) {
        hs_err_set(err, HS_ERR_IO, "%s: cannot open the lock file: %s", d->lock_path, strerror(errno));
        return -1;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        sys_io_close(fd);
        hs_err_set(err, HS_ERR_IO, "%s: the lock file is not a regular file", d->lock_path);
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        sys_io_close(fd);
        if (e == EWOULDBLOCK || e == EAGAIN) {
            *holder = disk_lock_file_pid(d->lock_path);
            return 1;
        }
        hs_err_set(err, HS_ERR_IO, "%s: flock failed: %s", d->lock_path, strerror(e));
        return -1;
    }
    /* the holder's pid, for the messages of the others (best effort) */
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (sys_io_ftruncate(fd, 0) == 0) (void)sys_io_pwrite_full(fd, pid, (size_t)n, 0);
    d->lock_fd = fd;
    return 0;
}

void disk_lock_release(struct bank_disk *d)
{
    if (d->lock_fd < 0) return;
    (void)sys_io_ftruncate(d->lock_fd, 0); /* names no pid once released */
    sys_io_close(d->lock_fd);             /* releases the flock */
    d->lock_fd = -1;
}

int index_open(struct bank_disk *d, struct hs_err *err);

/* The writer thread's retry (invariant 7, 8): a take_over reader tries the lock; a
 * writer (or the reader that just became one) reopens the index and reconciles, and the
 * tier is on again unless that failed too (then the next retry waits longer). */
static void recover(struct bank_disk *d)
{
    struct hs_err e;
    hs_err_clear(&e);
    pthread_mutex_lock(&d->db_mu);
    bool took = false;
    if (d->read_only) {
        long holder = 0;
        int lr = disk_lock_take(d, &holder, &e);
        if (lr != 0) {
            pthread_mutex_lock(&d->mu);
            d->st.lock_holder_pid = holder;
            d->retry_at_ms = disk_mono_ms() + disk_retry_min_ms(d);
            pthread_mutex_unlock(&d->mu);
            pthread_mutex_unlock(&d->db_mu);
            return;
        }
        took = true;
    }
    char was[256];
    pthread_mutex_lock(&d->mu);
    snprintf(was, sizeof was, "%s", d->st.disabled_reason);
    bool was_disabled = d->st.disabled;
    d->read_only = false;
    d->st.read_only = false;
    d->st.lock_holder_pid = 0;
    d->st.old_format = false;
    d->st.disabled = false;
    d->st.disabled_reason[0] = 0;
    d->recovering = true;
    d->taking_over = took;
    pthread_mutex_unlock(&d->mu);
    if (d->db) sqlite3_close(d->db);
    d->db = NULL;
    if (sys_mkdir_p(d->blobs, &e) != HS_OK || index_open(d, &e) != 0) {
        if (d->db) sqlite3_close(d->db);
        d->db = NULL;
        disk_disable(d, "reopen: %s%s", e.msg, "");
    } else {
        disk_reconcile(d, false);
        if (d->o.cap_bytes) index_evict_to(d, d->o.cap_bytes, 0, NULL);
        index_known_reload(d);
    }
    pthread_mutex_lock(&d->mu);
    bool ok = !d->st.disabled;
    if (ok && was_disabled) d->st.reenabled++;
    d->recovering = false;
    d->taking_over = false;
    pthread_mutex_unlock(&d->mu);
    pthread_mutex_unlock(&d->db_mu);
    if (ok && took)
        log_info("bank disk: %s: took the writer lock over; the tier writes again", d->dir);
    if (ok && was_disabled)
        log_info("bank disk: %s: tier re-enabled (it was off: %s)", d->dir, was);
}

/* A retry is due: disabled, or a take_over reader. Caller holds mu. */
static bool retry_wanted(const struct bank_disk *d)
{
    return !d->closing && (d->st.disabled || (d->read_only && d->o.take_over));
}

void *disk_writer_main(void *arg)
{
    struct bank_disk *d = arg;
    writer_lower_priority(d);
    pthread_mutex_lock(&d->mu);
    for (;;) {
        if (d->nq == 0 && d->closing) break;
        if (retry_wanted(d) && disk_mono_ms() >= d->retry_at_ms && d->nq == 0) {
            pthread_mutex_unlock(&d->mu);
            recover(d);
            pthread_mutex_lock(&d->mu);
            continue;
        }
        if (d->nq == 0) {
            if (retry_wanted(d)) {
                int64_t at = d->retry_at_ms, now = disk_mono_ms();
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                int64_t wait = at > now ? at - now : 0;
                ts.tv_sec += (time_t)(wait / 1000);
                ts.tv_nsec += (long)(wait % 1000) * 1000000L;
                if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
                pthread_cond_timedwait(&d->cv_work, &d->mu, &ts);
            } else {
                pthread_cond_wait(&d->cv_work, &d->mu);
            }
            continue;
        }
        struct pending *p = d->q[0];
        memmove(d->q, d->q + 1, (size_t)(d->nq - 1) * sizeof *d->q);
        d->nq--;
        d->q_bytes -= p->bytes;
        d->busy = true;
        d->cur = p;
        /* its base stays pinned while it is written (index_evict_to reads inflight_base) */
        if (p->from > 0) memcpy(d->inflight_base, p->base, 32);
        pthread_mutex_unlock(&d->mu);
        write_one(d, p);
        pthread_mutex_lock(&d->mu);
        d->cur = NULL; /* stored by now (in the mirror), or not at all */
        pthread_mutex_unlock(&d->mu);
        disk_pending_free(p);
        pthread_mutex_lock(&d->mu);
        memset(d->inflight_base, 0, 32);
        d->busy = false;
        if (d->nq == 0) pthread_cond_broadcast(&d->cv_idle);
    }
    d->busy = false;
    pthread_cond_broadcast(&d->cv_idle);
    pthread_mutex_unlock(&d->mu);
    return NULL;
}

void bank_disk_flush(struct bank_disk *d)
{
    if (!d) return;
    pthread_mutex_lock(&d->mu);
    while (d->nq > 0 || d->busy) pthread_cond_wait(&d->cv_idle, &d->mu);
    pthread_mutex_unlock(&d->mu);
}

/* The least valuable of the queue plus a candidate: highest kind, then the oldest. */
static bool less_valuable(const struct pending *a, const struct pending *b)
{
    if (a->kind != b->kind) return a->kind > b->kind;
    return a->seq < b->seq;
}

struct kcand {
    int64_t pos;
    uint8_t key[32];
};

static int kcand_cmp(const void *a, const void *b)
{
    int64_t x = ((const struct kcand *)a)->pos, y = ((const struct kcand *)b)->pos;
    return x < y ? -1 : x > y;
}

/* Candidate bases of a write of kind at pos (caller holds mu): the stored entries of its
 * key space at or before pos (the mirror), the write in flight, and the queued writes more
 * valuable than it (a lower kind): FIFO, they are stored before it runs, and a full queue
 * drops it before any of them (less_valuable). One that fails meanwhile only makes it
 * skip (base gone). Their keys still have to be checked against ids. */
static size_t base_candidates(const struct bank_disk *d, uint64_t fp, size_t row, size_t snap, int64_t pos,
                              enum bank_snap_kind kind, struct kcand **out)
{
    struct kcand *kc = NULL;
    size_t nk = 0;
    for (size_t i = 0; i < d->nkn; i++) {
        const struct known *k = &d->kn[i];
        if (k->fp != fp || k->pos > pos || k->row != row || k->snap != snap) continue;
        if (!kc) kc = hs_malloc((d->nkn - i + (size_t)d->nq + 1) * sizeof *kc);
        kc[nk].pos = k->pos;
        memcpy(kc[nk].key, k->key, 32);
        nk++;
    }
    for (int i = -1; i < d->nq; i++) {
        const struct pending *q = i < 0 ? d->cur : d->q[i];
        if (!q || q->touch || q->fp != fp || q->pos > pos || q->row != row || q->snap != snap) continue;
        if (i >= 0 && q->kind >= kind) continue;
        if (!kc) kc = hs_malloc(((size_t)d->nq + 1) * sizeof *kc);
        kc[nk].pos = q->pos;
        memcpy(kc[nk].key, q->key, 32);
        nk++;
    }
    *out = kc;
    return nk;
}

/* The deepest candidate (base_candidates, kc[0, nk), consumed) that is a prefix of ids:
 * its position (0 none) and key; key_pos gets the key of ids[0, pos). Hashes: call it
 * outside the locks. */
static int64_t deepest_base(struct kcand *kc, size_t nk, uint64_t fp, const int32_t *ids, int64_t pos,
                            uint8_t base[32], uint8_t key_pos[32])
{
    if (nk) qsort(kc, nk, sizeof *kc, kcand_cmp);
    struct blob_keys ph;
    blob_keys_init(&ph, fp, ids);
    int64_t from = 0, at = -1;
    uint8_t k[32];
    memset(base, 0, 32);
    for (size_t i = 0; i < nk; i++) {
        if (kc[i].pos != at) { blob_keys_at(&ph, kc[i].pos, k); at = kc[i].pos; }
        if (memcmp(k, kc[i].key, 32) == 0) { from = kc[i].pos; memcpy(base, k, 32); }
    }
    if (key_pos) blob_keys_at(&ph, pos, key_pos);
    blob_keys_free(&ph);
    hs_free(kc);
    return from;
}

int64_t bank_disk_known_prefix(struct bank_disk *d, uint64_t fp, size_t kv_row_bytes, size_t snapshot_bytes,
                               const int32_t *ids, int64_t pos, enum bank_snap_kind kind)
{
    if (!d || !ids || pos < 1) return 0;
    struct kcand *kc;
    pthread_mutex_lock(&d->mu);
    size_t nk = base_candidates(d, fp, kv_row_bytes, snapshot_bytes, pos, kind, &kc);
    pthread_mutex_unlock(&d->mu);
    uint8_t base[32];
    return deepest_base(kc, nk, fp, ids, pos, base, NULL);
}

/* bank_disk_put (rows_from 0), bank_disk_put_rows (kv_rows = row rows_from), and
 * bank_disk_put_hit with share = the hit's buffer (ids, kv_rows and snapshot point into it,
 * rows_from 0): the write then holds a reference instead of copies. */
static enum bank_disk_put_result put(struct bank_disk *d, uint64_t fp, size_t kv_row_bytes, size_t snapshot_bytes,
                                     const int32_t *ids, int64_t pos, int64_t rows_from, const void *kv_rows,
                                     const void *snapshot, enum bank_snap_kind kind, struct bank_hitbuf *share)
{
    uint64_t plen;
    if (!d || !ids || pos < 1 || (unsigned)kind >= BANK_SNAP_KIND_COUNT ||
        !blob_payload_len(0, pos, kv_row_bytes, snapshot_bytes, &plen) ||
        (kv_row_bytes && !kv_rows) || (snapshot_bytes && !snapshot) ||
        plen + HDR_SIZE > SIZE_MAX / 2)
        return BANK_DISK_BAD_ARGS;
    /* the stored (or queued) entries of this key space at or before pos */
    struct kcand *kc;
    pthread_mutex_lock(&d->mu);
    d->st.puts++;
    if (d->st.disabled || d->recovering || d->closing || d->read_only) {
        d->st.skipped_off++;
        pthread_mutex_unlock(&d->mu);
        return BANK_DISK_OFF;
    }
    size_t nk = base_candidates(d, fp, kv_row_bytes, snapshot_bytes, pos, kind, &kc);
    pthread_mutex_unlock(&d->mu);

    /* hash outside the lock: the deepest stored prefix of ids is the base; only the rows
     * past it are copied (the writer re-checks it against the index) */
    uint8_t base[32], key[32];
    int64_t from = deepest_base(kc, nk, fp, ids, pos, base, key);
    const bool touch = from == pos;
    if (!touch && from < rows_from) { /* the rows it needs were not handed */
        pthread_mutex_lock(&d->mu);
        d->st.skipped_base_gone++;
        pthread_mutex_unlock(&d->mu);
        return BANK_DISK_ROWS_MISSING;
    }
    uint64_t new_bytes = 0;
    if (!touch) {
        blob_payload_len(from, pos, kv_row_bytes, snapshot_bytes, &new_bytes);
        new_bytes += HDR_SIZE;
    }
    pthread_mutex_lock(&d->mu);
    if (d->o.cap_bytes && new_bytes > d->o.cap_bytes) {
        d->st.skipped_too_big++;
        pthread_mutex_unlock(&d->mu);
        return BANK_DISK_TOO_BIG;
    }
    pthread_mutex_unlock(&d->mu);

    /* copy outside the lock: the caller's thread pays, the writer never touches caller
     * memory (a shared hit buffer is nobody's to write: the write holds a reference) */
    struct pending *p = hs_calloc(1, sizeof *p);
    p->fp = fp;
    p->row = kv_row_bytes;
    p->snap = snapshot_bytes;
    p->pos = pos;
    p->from = from;
    p->kind = kind;
    p->touch = touch;
    memcpy(p->key, key, 32);
    memcpy(p->base, base, 32);
    if (!touch && share) {
        size_t nrow = (size_t)(pos - from);
        atomic_fetch_add(&share->refs, 1);
        p->share = share;
        p->ids = ids;
        p->kv = (const uint8_t *)kv_rows + (size_t)from * kv_row_bytes;
        p->snapb = snapshot;
        p->bytes = (uint64_t)pos * 4 + nrow * kv_row_bytes + snapshot_bytes;
    } else if (!touch) {
        size_t nrow = (size_t)(pos - from);
        int32_t *ids_c = hs_malloc((size_t)pos * 4);
        memcpy(ids_c, ids, (size_t)pos * 4);
        uint8_t *kv_c = hs_malloc(nrow * kv_row_bytes + 1);
        if (kv_row_bytes)
            memcpy(kv_c, (const uint8_t *)kv_rows + (size_t)(from - rows_from) * kv_row_bytes, nrow * kv_row_bytes);
        uint8_t *snap_c = hs_malloc(snapshot_bytes + 1);
        if (snapshot_bytes) memcpy(snap_c, snapshot, snapshot_bytes);
        p->ids = ids_c;
        p->kv = kv_c;
        p->snapb = snap_c;
        p->bytes = (uint64_t)pos * 4 + nrow * kv_row_bytes + snapshot_bytes;
    }

    pthread_mutex_lock(&d->mu);
    p->seq = ++d->seq;
    for (int i = 0; i < d->nq; i++) {
        if (memcmp(d->q[i]->key, p->key, 32) == 0) {
            pthread_mutex_unlock(&d->mu);
            disk_pending_free(p);
            return BANK_DISK_DUPLICATE;
        }
    }
    /* make room: count first, then bytes; a lone write always fits (invariant 6) */
    while (d->nq > 0 && (d->nq >= d->o.queue_len ||
                         (d->o.queue_bytes && d->q_bytes + p->bytes > d->o.queue_bytes))) {
        int worst = 0;
        for (int i = 1; i < d->nq; i++)
            if (less_valuable(d->q[i], d->q[worst])) worst = i;
        d->st.dropped_queue_full++;
        if (less_valuable(p, d->q[worst])) {
            pthread_mutex_unlock(&d->mu);
            disk_pending_free(p);
            return BANK_DISK_DROPPED;
        }
        struct pending *w = d->q[worst];
        memmove(d->q + worst, d->q + worst + 1, (size_t)(d->nq - worst - 1) * sizeof *d->q);
        d->nq--;
        d->q_bytes -= w->bytes;
        disk_pending_free(w);
    }
    d->q[d->nq++] = p;
    d->q_bytes += p->bytes;
    pthread_cond_signal(&d->cv_work);
    pthread_mutex_unlock(&d->mu);
    return BANK_DISK_QUEUED;
}

enum bank_disk_put_result bank_disk_put(struct bank_disk *d, uint64_t fp, size_t kv_row_bytes, size_t snapshot_bytes,
                                        const int32_t *ids, int64_t pos, const void *kv_rows, const void *snapshot,
                                        enum bank_snap_kind kind)
{
    return put(d, fp, kv_row_bytes, snapshot_bytes, ids, pos, 0, kv_rows, snapshot, kind, NULL);
}

enum bank_disk_put_result bank_disk_put_rows(struct bank_disk *d, uint64_t fp, size_t kv_row_bytes,
                                             size_t snapshot_bytes, const int32_t *ids, int64_t pos,
                                             int64_t rows_from, const void *kv_rows, const void *snapshot,
                                             enum bank_snap_kind kind)
{
    if (rows_from < 0 || rows_from > pos) return BANK_DISK_BAD_ARGS;
    return put(d, fp, kv_row_bytes, snapshot_bytes, ids, pos, rows_from, kv_rows, snapshot, kind, NULL);
}

enum bank_disk_put_result bank_disk_put_hit(struct bank_disk *d, uint64_t fp, size_t kv_row_bytes,
                                            size_t snapshot_bytes, const struct bank_disk_hit *hit)
{
    if (!hit || hit->pos < 1 || !hit->buf_ || hit->kv_bytes != (size_t)hit->pos * kv_row_bytes ||
        hit->snapshot_bytes != snapshot_bytes)
        return BANK_DISK_BAD_ARGS;
    return put(d, fp, kv_row_bytes, snapshot_bytes, hit->ids, hit->pos, 0, hit->kv, hit->snapshot, hit->kind, hit->buf_);
}
