/*
 * disk.c — the bank's disk tier: banked snapshots survive a restart, a prefix shared by
 * many snapshots is stored once, and nothing read back from disk is ever used unless it is
 * provably the state of the exact token prefix, model and kernel variant asked for.
 *
 * Design note
 * -----------
 * An entry is one snapshot position p of one key space (fingerprint fp). Its KV rows are
 * stored as a chain of stretches: the entry's own blob holds the token ids and KV rows of
 * [a, p) plus the GDN snapshot at p, and names its parent, the entry at a (a = 0: none).
 * Restoring p reads the chain root → ... → parent → entry: KV rows [0, p) once, plus the
 * snapshot of the last blob only. Two snapshots on one path (a head end at 10k, a turn end
 * at 12k) therefore store the head's KV once: the 12k entry holds [10k, 12k) and points at
 * the 10k entry. The writer picks the parent when it writes: the deepest stored entry of
 * the same key space whose prefix is a prefix of the new one.
 * Cost of one file per entry: an inner entry's snapshot stays while anything builds on it
 * (only leaves are evicted). Where GDN states are large (0.8b preset: ~20 MB, the KV of
 * ~800 tokens) a chain of short stretches is mostly snapshots; dropping inner snapshots
 * (rewriting a stretch without its snapshot) is not done.
 *
 * Keys: key(p) = SHA-256(fp as 8 bytes LE ‖ ids[0, p) as int32 LE), the "prefix key"; it
 * names the blob, and an entry's parent is named by key(a). A prefix is stored at most once
 * (a put of a stored key only refreshes its recency), so (fp, ids[0, p)) identify an entry.
 *
 *   DIR/index.sqlite                 SQLite, WAL mode: one row per entry (index.c)
 *   DIR/lock                         the writer lock (flock); holds the writer's pid
 *   DIR/blobs/<key[0:2]>/<key>.hsb   header + payload (format 2; blob.c has the layout)
 *   DIR/blobs/..../<key>.hsb.tmp.<pid>.<seq>  a write in progress (sys_wfile); removed by
 *                                    the next writer once process <pid> is gone
 *   DIR/blobs/..../<key>.blob[.tmp.*] format 1 (one whole-prefix blob per entry): an older
 *                                    build's store, removed at open with one log line
 *
 * The tier's files, one layer each (disk_int.h is their shared state):
 *   blob.c       the blob format and its pure checks (bytes in, verdict out; fuzzed)
 *   index.c      the SQLite index, the in-memory mirror put consults, LRU eviction
 *   reconcile.c  index against files at open and gc (adopt, drop, clean up)
 *   writer.c     the write queue, the writer thread, the writer lock and the retry
 *   tools.c      the offline views: ls, verify, gc (`headstart bank`)
 *   disk.c       this file: open / close, lookup (restoring a chain), reading blob files,
 *                the disabled state and the counters, the default directory and the cap
 *                policy (bank_disk_cap_for: serve and replay size the tier the same way)
 *
 * Invariants:
 *   1. A lookup hands out bytes only after, for every blob of the chain: header checksum,
 *      magic, version, fp, a, p, row sizes, key and parent equal to what the chain asks
 *      (keys recomputed from the request's ids); file size = 160 + payload_len; stretch
 *      checksum; ids[a, p) equal to the request byte for byte; and for the last blob the
 *      snapshot checksum. A blob that fails is deleted with every entry that depends on it
 *      (its subtree) and counted; the search goes on with shallower entries.
 *   2. A blob becomes visible only by rename of a complete, fsynced file (sys_wfile), and
 *      its index row is inserted after the rename; rows are deleted before their files. A
 *      crash leaves at worst a complete file without a row (adopted at the next open when
 *      its header verifies and its parent exists) or a temp file (removed by the next
 *      writer's open, its process being gone).
 *   3. Referenced stretches are never deleted: only leaves (entries no row names as parent)
 *      are evicted, and a deletion for any other reason takes the whole subtree in one
 *      SQLite transaction (savepoint). Parents of queued or in-flight writes are pinned
 *      against eviction. Reconcile (open, gc) drops rows whose parent row is missing.
 *   4. The index and the files are reconciled at open and by gc: files without rows are
 *      adopted when their header verifies, else removed; rows without files (or with a
 *      file of the wrong size) are dropped with their subtrees. Deleting index.sqlite
 *      rebuilds the index from the blob headers; payloads are still verified on every read.
 *   5. bytes = the sum of the blob files' sizes, each counted once however many entries
 *      share it; bytes <= cap after every write and at open (LRU of leaves by last use).
 *      The writer evicts before writing, so the cap also holds while a write is in flight;
 *      a write that cannot fit (everything left is pinned or needed) is skipped.
 *   6. Writes happen only on the writer thread; put copies (only the KV rows past the
 *      deepest prefix already stored, by the in-memory mirror of the index; put_hit copies
 *      nothing: the write holds a reference to the verified hit's read-only buffer) and
 *      never waits on disk. The queue is bounded (count, bytes); when full the least valuable pending
 *      write (highest kind value, then oldest) is dropped and counted. A write alone in the
 *      queue is always accepted (no per-entry limit below the cap). A write whose stored
 *      base vanished before it ran (evicted, or deleted as bad) is skipped and counted.
 *   7. Any I/O error (or SQLite error) disables the tier: puts are refused, lookups miss;
 *      stats say why. The writer thread retries after retry_ms (doubling to 60 s on each
 *      failure, back to retry_ms after a good write): it reopens the index, reconciles,
 *      and the tier is on again (counted in reenabled).
 *   8. One writer per directory: a writer holds flock(DIR/lock, LOCK_EX) for the life of
 *      the handle and writes its pid there; only the holder writes, reconciles, evicts or
 *      deletes anything. A second writer's open fails naming the pid; a reader
 *      (BANK_DISK_READER, or WRITER_OR_READER when the lock is held) takes no lock, opens
 *      the index read-only and changes nothing on disk: bad entries it meets are counted
 *      and skipped, never deleted. With take_over a reader retries the lock every
 *      retry_ms and becomes the writer (reopen, reconcile) once it is free. Temp files
 *      carry their writer's pid; a writer removes only those whose process is gone (or
 *      its own, outside the write in flight).
 *      Threads: db_mu guards SQLite, the files and the byte totals; mu guards the queue,
 *      the counters and the mirror. Order: db_mu before mu.
 *   9. The writer thread runs at nice 19 and in the idle I/O class where the kernel allows
 *      it (both need no privilege on Linux); it never holds db_mu during file I/O, so a
 *      starved writer cannot hold up a lookup for longer than one SQLite statement.
 *  10. The directory is hostile input. A path is only ever derived from a key that is 64
 *      lower-case hex digits (rows with any other key or parent are deleted by the writer
 *      by rowid, counted in bad_rows, and never used as a path). Blobs are opened with
 *      O_NOFOLLOW | O_NONBLOCK and must be regular files in a shard directory that is a
 *      real directory (lstat), so a FIFO, a device or a symlink can neither hang nor
 *      redirect a read. Anything under blobs/ that the tier did not make (another name,
 *      a non-regular file, a symlinked shard directory) is "foreign": never followed,
 *      opened or deleted, only counted (stats foreign) and reported by verify; a write
 *      whose path is held by one is skipped. Every entry discarded as bad is logged (one
 *      line: key, cause) and counted by cause.
 */
#include "bank/disk_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- paths and blob files ----------------------------------------------------------- */

/* DIR/blobs/<key[0:2]>/<key>.hsb, or NULL when hexkey is not a valid key (invariant 10). */
char *disk_blob_path(const struct bank_disk *d, const char *hexkey)
{
    if (!blob_key_text_ok(hexkey)) return NULL;
    char name[80];
    snprintf(name, sizeof name, "%.2s/%s" EXT, hexkey, hexkey);
    return sys_path_join(d->blobs, name);
}

/* 0: the shard directory of hexkey is a real directory; ENOENT: it does not exist;
 * ENOTDIR: something foreign is there (a symlink, a file); -1 (errno set): lstat failed. */
int disk_shard_state(const struct bank_disk *d, const char *hexkey)
{
    char sub[3] = {hexkey[0], hexkey[1], 0};
    char *p = sys_path_join(d->blobs, sub);
    struct stat sb;
    int r = lstat(p, &sb) != 0 ? (errno == ENOENT ? ENOENT : -1) : S_ISDIR(sb.st_mode) ? 0 : ENOTDIR;
    int e = errno;
    hs_free(p);
    errno = e;
    return r;
}

/* Remove the blob of hexkey when it is a regular file in a real shard directory; anything
 * else at that name is foreign and left alone (invariant 10). 0 when nothing of ours is
 * left there; -1 with errno when the unlink failed. */
int disk_blob_unlink(struct bank_disk *d, const char *hexkey)
{
    char *p = disk_blob_path(d, hexkey);
    if (!p) return 0;
    struct stat sb;
    int rc = 0;
    if (disk_shard_state(d, hexkey) == 0 && lstat(p, &sb) == 0 && S_ISREG(sb.st_mode)) {
        rc = sys_io_unlink(p);
        if (rc != 0 && errno == ENOENT) rc = 0;
    }
    hs_free(p);
    return rc;
}

int64_t disk_next_tick(struct bank_disk *d)
{
    int64_t now = sys_time_unix_ms();
    d->tick = now > d->tick ? now : d->tick + 1; /* strictly increasing: LRU order is exact */
    return d->tick;
}

uint32_t disk_retry_min_ms(const struct bank_disk *d) { return d->o.retry_ms ? d->o.retry_ms : 1000u; }

/* Disable the tier until the retry (invariant 7). Caller holds mu. */
void disk_disable_locked(struct bank_disk *d, const char *fmt, const char *a, const char *b)
{
    d->st.io_errors++;
    if (d->st.disabled) return;
    d->st.disabled = true;
    snprintf(d->st.disabled_reason, sizeof d->st.disabled_reason, fmt, a, b);
    uint32_t wait = d->backoff_ms ? d->backoff_ms : disk_retry_min_ms(d);
    d->retry_at_ms = disk_mono_ms() + wait;
    d->backoff_ms = wait >= BACKOFF_MAX_MS / 2 ? BACKOFF_MAX_MS : 2 * wait;
    log_warn("bank disk: tier disabled: %s (retrying in %u ms)", d->st.disabled_reason, (unsigned)wait);
    pthread_cond_broadcast(&d->cv_work); /* the writer thread schedules the retry */
}

void disk_disable(struct bank_disk *d, const char *fmt, const char *a, const char *b)
{
    pthread_mutex_lock(&d->mu);
    disk_disable_locked(d, fmt, a, b);
    pthread_mutex_unlock(&d->mu);
}

bool disk_is_disabled(struct bank_disk *d)
{
    pthread_mutex_lock(&d->mu);
    bool off = d->st.disabled;
    pthread_mutex_unlock(&d->mu);
    return off;
}

void disk_count(struct bank_disk *d, uint64_t *field, uint64_t v)
{
    pthread_mutex_lock(&d->mu);
    *field += v;
    pthread_mutex_unlock(&d->mu);
}

/* Open the blob of hexkey for reading (invariant 10): O_NOFOLLOW | O_NONBLOCK, a regular
 * file in a real shard directory. Returns the fd, or -1 with *r = RD_MISSING (nothing
 * there), RD_NOT_REGULAR (something foreign or unreadable there) or RD_IO (errno). */
int disk_blob_open(struct bank_disk *d, const char *path, const char *hexkey, struct stat *stb, enum rd *r)
{
    int sh = disk_shard_state(d, hexkey);
    if (sh != 0) {
        *r = sh == ENOENT ? RD_MISSING : sh == ENOTDIR ? RD_NOT_REGULAR : RD_IO;
        return -1;
    }
    int fd = sys_io_open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0);
    if (fd < 0) {
        int e = errno;
        *r = e == ENOENT || e == ENOTDIR ? RD_MISSING
           : e == ELOOP || e == EACCES || e == EPERM || e == ENXIO || e == EISDIR ? RD_NOT_REGULAR
           : RD_IO;
        errno = e;
        return -1;
    }
    if (fstat(fd, stb) != 0) {
        *r = RD_IO;
        int e = errno;
        sys_io_close(fd);
        errno = e;
        return -1;
    }
    if (!S_ISREG(stb->st_mode)) {
        sys_io_close(fd);
        *r = RD_NOT_REGULAR;
        return -1;
    }
    *r = RD_OK;
    return fd;
}

/* Read and verify the blob of hexkey with blob.c's checks, in their order (blob.c,
 * invariant 2). exp: the identity it must have (fp, start, pos, row, snap, key, parent).
 * ids_dst: room for pos-start ids; kv_dst: (pos-start) rows; snap_dst: the snapshot, or
 * NULL to leave it unread (and unchecked); want_ids: the request's ids [start, pos) to
 * compare with, or NULL. The parts are read straight into the caller's buffers. */
enum rd disk_blob_read(struct bank_disk *d, const char *hexkey, const struct blob_hdr *exp,
                       int32_t *ids_dst, uint8_t *kv_dst, uint8_t *snap_dst,
                       const int32_t *want_ids, uint32_t *kind_out)
{
    char *path = disk_blob_path(d, hexkey);
    if (!path) return RD_HEADER; /* not a key (callers pass computed keys) */
    enum rd r = RD_OK;
    struct stat stb;
    int fd = disk_blob_open(d, path, hexkey, &stb, &r);
    if (fd < 0) {
        if (r == RD_IO) disk_disable(d, "%s: open failed: %s", path, strerror(errno));
        hs_free(path);
        return r;
    }
    uint8_t hb[HDR_SIZE];
    struct blob_hdr h;
    size_t ids_b = 0, kv_b = 0;
    const uint64_t file_len = (uint64_t)stb.st_size;
    if (file_len >= HDR_SIZE && sys_io_pread_full(fd, hb, HDR_SIZE, 0) != HDR_SIZE) {
        disk_disable(d, "%s: read failed: %s", path, strerror(errno));
        r = RD_IO;
        goto out;
    }
    r = blob_check_header(hb, file_len, exp, &h);
    if (r != RD_OK) goto out;
    ids_b = (size_t)(h.pos - h.start) * 4;
    kv_b = (size_t)(h.pos - h.start) * h.row;
    if ((ids_b && sys_io_pread_full(fd, ids_dst, ids_b, HDR_SIZE) != (ssize_t)ids_b) ||
        (kv_b && sys_io_pread_full(fd, kv_dst, kv_b, HDR_SIZE + ids_b) != (ssize_t)kv_b) ||
        (snap_dst && h.snap &&
         sys_io_pread_full(fd, snap_dst, h.snap, HDR_SIZE + ids_b + kv_b) != (ssize_t)h.snap)) {
        disk_disable(d, "%s: read failed: %s", path, strerror(errno));
        r = RD_IO;
        goto out;
    }
    r = blob_check_payload(&h, ids_dst, kv_dst, snap_dst, want_ids);
    if (kind_out && (r == RD_OK || r == RD_TOKENS)) *kind_out = h.kind;
out:
    sys_io_close(fd); /* read-only: a failing close loses nothing */
    hs_free(path);
    return r;
}

/* ---- for the remote tier -------------------------------------------------------------- */

bool disk_entry_row(struct bank_disk *d, const char *hexkey, struct disk_row *row)
{
    pthread_mutex_lock(&d->db_mu);
    bool ok = d->db && !disk_is_disabled(d) && index_row_get(d, hexkey, row);
    pthread_mutex_unlock(&d->db_mu);
    return ok;
}

/* Read without db_mu: the file is opened once and read through its descriptor, so an
 * eviction meanwhile (unlink) cannot change what is read; a rename over it cannot happen
 * (a stored key is never rewritten). */
enum rd disk_entry_read(struct bank_disk *d, const char *hexkey, struct disk_row *row,
                        uint8_t **buf, size_t *len)
{
    *buf = NULL;
    *len = 0;
    if (!disk_entry_row(d, hexkey, row)) return RD_MISSING;
    char *path = disk_blob_path(d, hexkey);
    if (!path) return RD_HEADER;
    enum rd r = RD_OK;
    struct stat stb;
    int fd = disk_blob_open(d, path, hexkey, &stb, &r);
    hs_free(path);
    if (fd < 0) return r;
    if ((uint64_t)stb.st_size != row->bytes || stb.st_size < HDR_SIZE) {
        sys_io_close(fd);
        return RD_SIZE;
    }
    uint8_t *b = hs_malloc((size_t)stb.st_size);
    if (sys_io_pread_full(fd, b, (size_t)stb.st_size, 0) != (ssize_t)stb.st_size) {
        sys_io_close(fd);
        hs_free(b);
        return RD_IO;
    }
    sys_io_close(fd);
    struct blob_hdr exp = {0};
    exp.fp = row->fp;
    exp.start = (uint64_t)row->start;
    exp.pos = (uint64_t)row->pos;
    exp.row = row->row;
    exp.snap = row->snap;
    if (!blob_key_unhex(row->key, exp.key) || !blob_key_unhex(row->parent, exp.parent)) {
        hs_free(b);
        return RD_HEADER;
    }
    r = blob_check(b, (size_t)stb.st_size, &exp, NULL, NULL);
    if (r != RD_OK) {
        hs_free(b);
        return r;
    }
    *buf = b;
    *len = (size_t)stb.st_size;
    return RD_OK;
}

char (*disk_head_keys(struct bank_disk *d, int max, int *n))[65]
{
    *n = 0;
    char (*keys)[65] = hs_calloc((size_t)HS_MAX(max, 1), 65);
    pthread_mutex_lock(&d->db_mu);
    sqlite3_stmt *s = d->db && !disk_is_disabled(d)
        ? index_prep(d, "SELECT key FROM entries WHERE kind = 0 ORDER BY last_use_ms DESC LIMIT ?")
        : NULL;
    if (s) {
        sqlite3_bind_int(s, 1, max);
        while (*n < max && sqlite3_step(s) == SQLITE_ROW)
            if (index_col_key(s, 0, keys[*n], false)) (*n)++;
        sqlite3_finalize(s);
    }
    pthread_mutex_unlock(&d->db_mu);
    return keys;
}

/* Count a failed verification (not I/O). */
static void count_bad(struct bank_disk *d, enum rd r)
{
    pthread_mutex_lock(&d->mu);
    switch (r) {
    case RD_MISSING: d->st.missing_files++; break;
    case RD_HEADER: d->st.bad_header++; break;
    case RD_IDENTITY: d->st.bad_identity++; break;
    case RD_SIZE: d->st.bad_size++; break;
    case RD_CHECKSUM: d->st.bad_checksum++; break;
    case RD_TOKENS: d->st.bad_tokens++; break;
    case RD_NOT_REGULAR: d->st.bad_not_regular++; break;
    default: break;
    }
    pthread_mutex_unlock(&d->mu);
}

/* An entry found bad (invariants 1, 10): counted by cause and logged; a writer deletes it
 * with every entry that builds on it, a reader leaves it to the writer. Caller holds
 * db_mu. */
void disk_discard(struct bank_disk *d, const char *hexkey, enum rd why, const char *during)
{
    count_bad(d, why);
    if (d->read_only) {
        log_warn("bank disk: %s: skipped entry %s: %s (read-only here: left for the writer)",
                 during, hexkey, blob_rd_name(why));
        return;
    }
    uint64_t n = index_subtree_delete(d, hexkey);
    disk_count(d, &d->st.discarded, n);
    log_warn("bank disk: %s: discarded entry %s: %s (%" PRIu64 " index rows removed with what"
             " builds on it)", during, hexkey, blob_rd_name(why), n);
}

/* ---- restoring a chain -------------------------------------------------------------- */

/* Restore the entry of tail (the row of key(p) for ids) into hit: walk the parent links
 * in the index, recompute every key from ids, read and verify every blob from the tail
 * to the root (invariant 1). On failure *bad names the entry to delete with its subtree.
 * Caller holds db_mu. */
static enum rd chain_restore(struct bank_disk *d, const struct disk_row *tail, const int32_t *ids,
                             struct bank_disk_hit *hit, char bad[65])
{
    const uint64_t fp = tail->fp, rowb = tail->row, snapb = tail->snap;
    const int64_t p = tail->pos;
    struct disk_row *ch = NULL;
    size_t n = 0, cap = 0;
    enum rd r = RD_OK;
    snprintf(bad, 65, "%s", tail->key);
    /* 1: the links, tail first */
    struct disk_row cur = *tail;
    for (;;) {
        if (n == cap) { cap = cap ? 2 * cap : 8; ch = hs_realloc(ch, cap * sizeof *ch); }
        ch[n++] = cur;
        if (cur.start == 0) {
            if (cur.parent[0]) { snprintf(bad, 65, "%s", cur.key); r = RD_IDENTITY; }
            break;
        }
        struct disk_row par;
        if (!index_row_get(d, cur.parent, &par)) {
            snprintf(bad, 65, "%s", cur.key); /* its parent is gone: it cannot be restored */
            r = disk_is_disabled(d) ? RD_IO : RD_MISSING;
            break;
        }
        if (par.fp != fp || par.row != rowb || par.snap != snapb || par.pos != cur.start ||
            par.start >= par.pos || par.start < 0) {
            snprintf(bad, 65, "%s", cur.key); /* the link lies, not necessarily the parent */
            r = RD_IDENTITY;
            break;
        }
        cur = par;
    }
    if (r != RD_OK) goto out;
    /* 2: the keys every blob must carry, from the request's ids */
    uint8_t (*keys)[32] = hs_malloc(n * 32);
    struct blob_keys ph;
    blob_keys_init(&ph, fp, ids);
    for (size_t i = n; i-- > 0;) blob_keys_at(&ph, ch[i].pos, keys[i]);
    blob_keys_free(&ph);
    /* 3: the blobs, tail first (a bad tail never costs its ancestors a read) */
    size_t ids_b = (size_t)p * 4, kv_b = (size_t)p * rowb;
    struct bank_hitbuf *hb = hitbuf_new(ids_b + kv_b + snapb + 1);
    uint8_t *buf = hb->mem;
    int32_t *dst_ids = (int32_t *)(void *)buf;
    uint8_t *dst_kv = buf + ids_b, *dst_snap = buf + ids_b + kv_b;
    uint32_t kind = BANK_SNAP_END;
    for (size_t i = 0; i < n && r == RD_OK; i++) {
        char want[65];
        blob_key_hex(keys[i], want);
        if (strcmp(want, ch[i].key) != 0) { /* the index names another prefix here */
            snprintf(bad, 65, "%s", i ? ch[i - 1].key : ch[i].key);
            r = RD_IDENTITY;
            break;
        }
        struct blob_hdr exp = {0};
        exp.fp = fp;
        exp.start = (uint64_t)ch[i].start;
        exp.pos = (uint64_t)ch[i].pos;
        exp.row = rowb;
        exp.snap = snapb;
        memcpy(exp.key, keys[i], 32);
        if (i + 1 < n) memcpy(exp.parent, keys[i + 1], 32);
        r = disk_blob_read(d, ch[i].key, &exp, dst_ids + ch[i].start, dst_kv + (size_t)ch[i].start * rowb,
                      i == 0 ? dst_snap : NULL, ids + ch[i].start, i == 0 ? &kind : NULL);
        if (r != RD_OK) snprintf(bad, 65, "%s", ch[i].key);
    }
    hs_free(keys);
    if (r != RD_OK) {
        hitbuf_unref(hb);
        goto out;
    }
    hit->pos = p;
    hit->kind = (enum bank_snap_kind)kind;
    hit->buf_ = hb;
    hit->ids = dst_ids;
    hit->kv = dst_kv;
    hit->kv_bytes = kv_b;
    hit->snapshot = dst_snap;
    hit->snapshot_bytes = snapb;
    hit->n_blobs = (int64_t)n;
out:
    hs_free(ch);
    return r;
}

/* ---- public ------------------------------------------------------------------------- */

void bank_disk_opts_default(struct bank_disk_opts *o)
{
    o->cap_bytes = 0;
    o->free_floor_bytes = 1ull << 30;
    o->queue_len = 32;
    o->queue_bytes = 4ull << 30;
    /* HEADSTART_BANK_WRITER_PRIORITY=normal keeps the writer at the caller's priority
     * (bench/disk_bench.sh compares the two) */
    const char *e = getenv("HEADSTART_BANK_WRITER_PRIORITY");
    o->writer_low_priority = !(e && strcmp(e, "normal") == 0);
    o->access = BANK_DISK_WRITER;
    o->take_over = false;
    o->retry_ms = 1000;
}

char *bank_disk_default_dir(void)
{
    const char *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    char *base = x && *x ? hs_strdup(x) : h && *h ? sys_path_join(h, ".cache") : NULL;
    if (!base) return NULL;
    char *dir = sys_path_join(base, "headstart/bank");
    hs_free(base);
    return dir;
}

/* Free space where dir lives (its nearest existing ancestor while it does not exist yet);
 * 0 when unknown. */
static uint64_t free_bytes_at(const char *path)
{
    char *p = hs_strdup(path);
    uint64_t free_b = sys_disk_free_bytes(p);
    while (!free_b) {
        char *slash = strrchr(p, '/');
        if (!slash) { free_b = sys_disk_free_bytes("."); break; }
        if (slash == p) { free_b = sys_disk_free_bytes("/"); break; }
        *slash = '\0';
        free_b = sys_disk_free_bytes(p);
    }
    hs_free(p);
    return free_b;
}

uint64_t bank_disk_cap_for(const char *dir, int64_t requested)
{
    if (requested > 0)
        return (uint64_t)requested;
    uint64_t free_b = free_bytes_at(dir);
    return free_b ? HS_MIN(free_b / 5, BANK_DISK_CAP_MAX) : BANK_DISK_CAP_MAX;
}

const char *bank_disk_put_result_name(enum bank_disk_put_result r)
{
    static const char *const names[] = {"queued", "duplicate", "dropped", "off", "too_big",
                                        "bad_args", "rows_missing"};
    return (unsigned)r < HS_ARRAY_LEN(names) ? names[r] : "?";
}

struct bank_disk *bank_disk_open(const char *dir, const struct bank_disk_opts *o,
                                 struct hs_err *err)
{
    struct bank_disk *d = hs_calloc(1, sizeof *d);
    if (o) d->o = *o;
    else bank_disk_opts_default(&d->o);
    if (d->o.queue_len < 1) d->o.queue_len = 1;
    d->lock_fd = -1;
    d->dir = hs_strdup(dir);
    d->blobs = sys_path_join(dir, "blobs");
    d->index_path = sys_path_join(dir, "index.sqlite");
    d->lock_path = sys_path_join(dir, "lock");
    pthread_mutex_init(&d->db_mu, NULL);
    pthread_mutex_init(&d->mu, NULL);
    pthread_mutex_init(&d->listen_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the retry waits on disk_mono_ms */
    pthread_cond_init(&d->cv_work, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&d->cv_idle, NULL);
    d->q = hs_calloc((size_t)d->o.queue_len, sizeof *d->q);
    struct stat sb;
    if (d->o.access == BANK_DISK_READER) {
        /* a reader creates nothing: a missing directory is an empty store */
        if (stat(dir, &sb) == 0 && !S_ISDIR(sb.st_mode)) {
            hs_err_set(err, HS_ERR_IO, "%s: not a directory", dir);
            goto fail;
        }
        d->read_only = true;
        d->st.lock_holder_pid = disk_lock_file_pid(d->lock_path); /* to say who writes, if anyone */
    } else {
        if (sys_mkdir_p(dir, err) != HS_OK) goto fail;
        long holder = 0;
        int lr = disk_lock_take(d, &holder, err);
        if (lr < 0) goto fail;
        if (lr == 1 && d->o.access == BANK_DISK_WRITER) {
            if (holder)
                hs_err_set(err, HS_ERR_IO, "%s is in use by process %ld (it holds %s); one writer"
                           " per bank directory", dir, holder, d->lock_path);
            else
                hs_err_set(err, HS_ERR_IO, "%s is in use by another process (it holds %s); one"
                           " writer per bank directory", dir, d->lock_path);
            goto fail;
        }
        if (lr == 1) {
            d->read_only = true;
            d->st.lock_holder_pid = holder;
            d->retry_at_ms = disk_mono_ms() + disk_retry_min_ms(d);
        }
    }
    d->st.read_only = d->read_only;
    if (d->read_only) {
        if (index_open_reader(d, err) != 0) goto fail;
    } else {
        if (sys_mkdir_p(d->blobs, err) != HS_OK) goto fail;
        if (index_open(d, NULL) != 0) {
            /* an unreadable index is rebuilt from the blob headers (invariant 4) */
            log_warn("bank disk: %s unusable, rebuilding it from the blobs", d->index_path);
            sqlite3_close(d->db);
            d->db = NULL;
            index_remove_files(d->index_path);
            if (index_open(d, err) != 0) goto fail;
        }
    }
    pthread_mutex_lock(&d->db_mu);
    if (d->db) {
        sqlite3_stmt *s = index_prep(d, "SELECT COUNT(*) FROM entries");
        if (s && sqlite3_step(s) == SQLITE_ROW) d->st.open_rows = (uint64_t)sqlite3_column_int64(s, 0);
        sqlite3_finalize(s);
    }
    if (d->read_only) {
        /* the sizes as the index states them; nothing is reconciled */
        sqlite3_stmt *s = d->db ? index_prep(d, "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM entries") : NULL;
        if (s && sqlite3_step(s) == SQLITE_ROW) {
            d->n_entries = (uint64_t)sqlite3_column_int64(s, 0);
            d->total_bytes = (uint64_t)sqlite3_column_int64(s, 1);
        }
        sqlite3_finalize(s);
    }
    disk_reconcile(d, false);
    if (d->o.cap_bytes) index_evict_to(d, d->o.cap_bytes, 0, NULL);
    if (d->db) index_known_reload(d);
    pthread_mutex_unlock(&d->db_mu);
    if (d->st.disabled) {
        hs_err_set(err, HS_ERR_IO, "%s: %s", dir, d->st.disabled_reason);
        goto fail;
    }
    if (!d->read_only && (d->old_format[0] || d->st.open_old_removed))
        log_warn("bank disk: %s held a store of format %s, which this build does not read:"
                 " cleared it (%" PRIu64 " files removed)", dir,
                 d->old_format[0] ? d->old_format : "1", d->st.open_old_removed);
    if (d->st.foreign)
        log_warn("bank disk: %s: %" PRIu64 " things under blobs/ the tier did not make (e.g. %s):"
                 " never followed or deleted; `headstart bank verify` reports them",
                 dir, d->st.foreign, d->st.foreign_example);
    if (d->read_only && d->o.access != BANK_DISK_READER)
        log_warn("bank disk: %s is in use by %s%ld: this process only reads it (no writes)%s",
                 dir, d->st.lock_holder_pid ? "process " : "another process", d->st.lock_holder_pid,
                 d->o.take_over ? " until that process lets go of it" : "");
    else if (!d->read_only)
        log_info("bank disk: %s: %" PRIu64 " entries, %" PRIu64 " bytes (index had %" PRIu64
                 " rows; adopted %" PRIu64 ", orphans removed %" PRIu64 ", temp files removed %" PRIu64
                 ", rows dropped %" PRIu64 ", evicted %" PRIu64 ")",
                 dir, d->n_entries, d->total_bytes, d->st.open_rows, d->st.open_adopted,
                 d->st.open_orphans_removed, d->st.open_tmp_removed, d->st.open_rows_dropped,
                 d->st.evicted);
    if (!d->read_only || d->o.take_over) {
        if (pthread_create(&d->writer, NULL, disk_writer_main, d) != 0) {
            hs_err_set(err, HS_ERR_IO, "%s: cannot start the bank writer thread", dir);
            goto fail;
        }
        d->writer_started = true;
    }
    return d;
fail:
    bank_disk_close(d);
    return NULL;
}

void bank_disk_close(struct bank_disk *d)
{
    if (!d) return;
    pthread_mutex_lock(&d->mu);
    d->closing = true;
    pthread_cond_broadcast(&d->cv_work);
    pthread_mutex_unlock(&d->mu);
    if (d->writer_started) pthread_join(d->writer, NULL);
    for (int i = 0; i < d->nq; i++) disk_pending_free(d->q[i]);
    if (d->db) sqlite3_close(d->db);
    disk_lock_release(d); /* after the index is closed: the next writer finds it quiet */
    pthread_mutex_destroy(&d->db_mu);
    pthread_mutex_destroy(&d->mu);
    pthread_mutex_destroy(&d->listen_mu);
    pthread_cond_destroy(&d->cv_work);
    pthread_cond_destroy(&d->cv_idle);
    hs_free(d->q);
    hs_free(d->kn);
    hs_free(d->dir);
    hs_free(d->blobs);
    hs_free(d->index_path);
    hs_free(d->lock_path);
    hs_free(d);
}

void bank_disk_hit_free(struct bank_disk_hit *hit)
{
    if (!hit) return;
    hitbuf_unref(hit->buf_);
    memset(hit, 0, sizeof *hit);
}

void bank_disk_lookup(struct bank_disk *d, uint64_t fp, size_t kv_row_bytes,
                      size_t snapshot_bytes, const int32_t *ids, int64_t n, int64_t min_pos,
                      int64_t max_pos, struct bank_disk_hit *hit)
{
    memset(hit, 0, sizeof *hit);
    if (!d) return;
    disk_count(d, &d->st.lookups, 1);
    int64_t limit = HS_MIN(n - 1, max_pos);
    if (!ids || limit < 1 || limit <= min_pos || disk_is_disabled(d)) {
        disk_count(d, &d->st.misses, 1);
        return;
    }

    pthread_mutex_lock(&d->db_mu);
    if (!d->db) { /* a reader of a directory with no index (yet) */
        pthread_mutex_unlock(&d->db_mu);
        disk_count(d, &d->st.misses, 1);
        return;
    }
    /* candidate positions of this key space, ascending */
    int64_t *cand = NULL;
    size_t nc = 0, cc = 0;
    sqlite3_stmt *s = index_prep(d, "SELECT DISTINCT pos FROM entries WHERE fp = ? AND pos <= ?"
                                 " AND pos > ? AND kv_row_bytes = ? AND snapshot_bytes = ?"
                                 " ORDER BY pos");
    if (s) {
        sqlite3_bind_int64(s, 1, (sqlite3_int64)fp);
        sqlite3_bind_int64(s, 2, limit);
        sqlite3_bind_int64(s, 3, min_pos > 0 ? min_pos : 0);
        sqlite3_bind_int64(s, 4, (sqlite3_int64)kv_row_bytes);
        sqlite3_bind_int64(s, 5, (sqlite3_int64)snapshot_bytes);
        while (sqlite3_step(s) == SQLITE_ROW) {
            if (nc == cc) { cc = cc ? 2 * cc : 16; cand = hs_realloc(cand, cc * sizeof *cand); }
            cand[nc++] = sqlite3_column_int64(s, 0);
        }
        sqlite3_finalize(s);
    }
    /* keys of every candidate prefix in one pass over the ids */
    uint8_t (*keys)[32] = nc ? hs_malloc(nc * 32) : NULL;
    struct blob_keys ph;
    blob_keys_init(&ph, fp, ids);
    for (size_t i = 0; i < nc; i++) blob_keys_at(&ph, cand[i], keys[i]);
    blob_keys_free(&ph);
    for (size_t i = nc; i-- > 0 && !hit->pos && !disk_is_disabled(d);) {
        char hk[65];
        blob_key_hex(keys[i], hk);
        struct disk_row r;
        if (!index_row_get(d, hk, &r)) continue;
        if (r.fp != fp || r.pos != cand[i] || r.row != kv_row_bytes || r.snap != snapshot_bytes) {
            disk_discard(d, hk, RD_IDENTITY, "lookup");
            continue;
        }
        char bad[65];
        enum rd rr = chain_restore(d, &r, ids, hit, bad);
        if (rr == RD_IO) break;
        if (rr != RD_OK) {
            disk_discard(d, bad, rr, "lookup");
            continue;
        }
        index_touch(d, hk, true, NULL);
    }
    pthread_mutex_unlock(&d->db_mu);
    hs_free(cand);
    hs_free(keys);
    pthread_mutex_lock(&d->mu);
    if (hit->pos) { d->st.hits++; d->st.hit_tokens += (uint64_t)hit->pos; d->st.hit_blobs += (uint64_t)hit->n_blobs; }
    else d->st.misses++;
    pthread_mutex_unlock(&d->mu);
}

void bank_disk_stats_get(struct bank_disk *d, struct bank_disk_stats *out)
{
    pthread_mutex_lock(&d->mu);
    *out = d->st;
    out->entries = d->n_entries;
    out->bytes = d->total_bytes;
    out->cap_bytes = d->o.cap_bytes;
    out->free_floor_bytes = d->o.free_floor_bytes;
    out->pending = (uint64_t)d->nq + (d->busy ? 1 : 0);
    out->pending_bytes = d->q_bytes;
    out->read_only = d->read_only;
    if (d->taking_over) out->read_only = true;
    else if (d->recovering) out->disabled = true;
    int64_t left = d->retry_at_ms - disk_mono_ms();
    out->retry_in_ms = d->st.disabled ? (left > 0 ? left : 0) : 0;
    pthread_mutex_unlock(&d->mu);
}
