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
 *   DIR/index.sqlite                 SQLite, WAL mode: one row per entry (schema below)
 *   DIR/lock                         the writer lock (flock); holds the writer's pid
 *   DIR/blobs/<key[0:2]>/<key>.hsb   header + payload (format 2)
 *   DIR/blobs/..../<key>.hsb.tmp.<pid>.<seq>  a write in progress (sys_wfile); removed by
 *                                    the next writer once process <pid> is gone
 *   DIR/blobs/..../<key>.blob[.tmp.*] format 1 (one whole-prefix blob per entry): an older
 *                                    build's store, removed at open with one log line
 *
 * Blob header (160 bytes, little-endian):
 *   OFFSET SIZE FIELD
 *   0      8    magic "HSBANKE2"
 *   8      4    format version (2)
 *   12     4    kind (enum bank_snap_kind)
 *   16     8    fingerprint (model identity + numerics)
 *   24     8    start a: first token of the stretch (0 = a root; a < p)
 *   32     8    pos p: token count after this entry (the snapshot position)
 *   40     8    kv_row_bytes
 *   48     8    snapshot_bytes
 *   56     8    payload_len = 4(p-a) + (p-a)*kv_row_bytes + snapshot_bytes
 *   64     32   key: key(p), equals the file name
 *   96     32   parent: key(a) of the entry holding [.., a); all zero when a = 0
 *   128    8    stretch checksum: XXH3-64 of ids ‖ KV rows (payload [0, 4(p-a) + (p-a)*row))
 *   136    8    snapshot checksum: XXH3-64 of the snapshot bytes
 *   144    8    zero
 *   152    8    header checksum: XXH3-64 of bytes [0, 152)
 * Payload at 160: ids[a, p) (int32) ‖ KV rows [a, p) ‖ snapshot at p.
 *
 * Index schema:
 *   meta(k TEXT PRIMARY KEY, v TEXT)            -- ('format', '2')
 *   entries(key TEXT PRIMARY KEY, fp INTEGER, start INTEGER, pos INTEGER, parent TEXT
 *           ('' for a root), kind INTEGER, kv_row_bytes INTEGER, snapshot_bytes INTEGER,
 *           bytes INTEGER, created_ms INTEGER, last_use_ms INTEGER, hits INTEGER)
 *   entries_fp_pos ON entries(fp, pos); entries_parent ON entries(parent)
 * fp is stored as the signed 64-bit reinterpretation of the u64. An index whose format is
 * not '2' is emptied and its blobs removed (one warning), never read as format 2.
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
 *      deepest prefix already stored, by the in-memory mirror of the index) and never waits
 *      on disk. The queue is bounded (count, bytes); when full the least valuable pending
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
#include "bank/bank.h"
#include "sys/sys.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <sqlite3.h>
#include <xxhash.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the bank's disk format is little-endian; add byte swapping for this host"
#endif

#define HDR_SIZE 160
#define FORMAT_VERSION 2
#define FORMAT_STR "2"
#define EXT ".hsb"
static const char k_magic[8] = {'H', 'S', 'B', 'A', 'N', 'K', 'E', '2'};
static const uint8_t k_zero_key[32];

struct pending {
    uint64_t fp;
    size_t row, snap;         /* kv_row_bytes, snapshot_bytes */
    int64_t pos;
    int64_t from;             /* KV rows held: [from, pos); from > 0: base = key(from) */
    enum bank_snap_kind kind;
    bool touch;               /* stored at put time: refresh its recency only, no data */
    uint8_t key[32], base[32];
    uint64_t seq;
    uint64_t bytes;           /* bytes held (queue_bytes accounting) */
    int32_t *ids;             /* pos ids, owned */
    uint8_t *kv, *snapb;      /* (pos - from) rows, the snapshot; owned */
};

/* The mirror of the index that put consults without touching SQLite (invariant 6). */
struct known {
    uint64_t fp;
    int64_t pos;
    uint64_t row, snap;
    uint8_t key[32];
};

struct bank_disk {
    char *dir, *blobs, *index_path, *lock_path;
    struct bank_disk_opts o;
    int lock_fd;              /* the writer lock; -1 for a reader */
    bool read_only;           /* a reader (invariant 8); changes only under db_mu + mu */
    int64_t retry_at_ms;      /* monotonic ms of the next retry (disabled, or take_over) */
    uint32_t backoff_ms;      /* the wait after the next failure */
    bool recovering;          /* a retry is running: reported as disabled until it is done */
    bool taking_over;         /* ... and it took the lock: reported read-only until done */
    sqlite3 *db;
    pthread_mutex_t db_mu, mu;
    pthread_cond_t cv_work, cv_idle;
    pthread_t writer;
    bool writer_started, closing;
    struct pending **q;
    int nq;
    uint64_t q_bytes, seq;
    bool busy;                /* the writer holds an item */
    char inflight[65];        /* key being written ("" none): reconcile never removes it */
    uint8_t inflight_base[32];/* its parent (pinned); zero when none */
    struct known *kn;         /* under mu */
    size_t nkn, ckn;
    char old_format[32];      /* the format an older index declared ("" none) */
    /* written under db_mu only; atomic so that stats never wait for a lookup's read */
    _Atomic uint64_t total_bytes, n_entries;
    int64_t tick;
    struct bank_disk_stats st;
};

/* ---- small helpers ------------------------------------------------------------------ */

static void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get_u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get_u64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

static void hex32(const uint8_t *k, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = digits[k[i] >> 4];
        out[2 * i + 1] = digits[k[i] & 15];
    }
    out[64] = 0;
}

static bool is_hex64(const char *s)
{
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
    return true;
}

static int hexval(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

/* hex (64 lowercase digits, or "" for none) to bytes; false when malformed */
static bool unhex32(const char *s, uint8_t *out)
{
    if (!s || !*s) { memset(out, 0, 32); return true; }
    if (strlen(s) != 64 || !is_hex64(s)) return false;
    for (int i = 0; i < 32; i++) out[i] = (uint8_t)(hexval(s[2 * i]) << 4 | hexval(s[2 * i + 1]));
    return true;
}

static bool key_is_zero(const uint8_t *k) { return memcmp(k, k_zero_key, 32) == 0; }

/* A key as the index or a file name holds it: exactly 64 lower-case hex digits (invariant
 * 10); anything else is never turned into a path. */
static bool key_text_ok(const char *s) { return s && strlen(s) == 64 && is_hex64(s); }

static int64_t mono_ms(void) { return (int64_t)(sys_time_sec() * 1000.0); }

/* Size of the payload of [a, p) with overflow checks; false when it does not fit. */
static bool payload_len_of(int64_t a, int64_t p, uint64_t row, uint64_t snap, uint64_t *out)
{
    if (a < 0 || p <= a || (uint64_t)p > (UINT64_MAX >> 8)) return false;
    uint64_t n = (uint64_t)(p - a);
    if (row && n > (UINT64_MAX / 4) / row) return false;
    uint64_t kv = n * row, ids = 4 * n;
    if (kv > UINT64_MAX - ids - HDR_SIZE) return false;
    uint64_t t = kv + ids;
    if (snap > UINT64_MAX - t - HDR_SIZE) return false;
    *out = t + snap;
    return true;
}

/* Prefix keys of one id array at ascending positions, in one pass over the ids. */
struct prefix_hasher {
    EVP_MD_CTX *c, *t;
    const int32_t *ids;
    int64_t at;
    bool ok;
};

static void ph_init(struct prefix_hasher *h, uint64_t fp, const int32_t *ids)
{
    h->c = EVP_MD_CTX_new();
    h->t = EVP_MD_CTX_new();
    h->ids = ids;
    h->at = 0;
    uint8_t f[8];
    put_u64(f, fp);
    h->ok = h->c && h->t && EVP_DigestInit_ex(h->c, EVP_sha256(), NULL) && EVP_DigestUpdate(h->c, f, 8);
}

/* key(pos) for pos >= every pos asked before; false (key zeroed) when libcrypto fails,
 * and an all-zero key never matches a stored one. */
static bool ph_key(struct prefix_hasher *h, int64_t pos, uint8_t out[32])
{
    unsigned len = 32;
    if (h->ok && pos > h->at) {
        h->ok = EVP_DigestUpdate(h->c, h->ids + h->at, (size_t)(pos - h->at) * 4);
        h->at = pos;
    }
    if (h->ok && pos == h->at && EVP_MD_CTX_copy_ex(h->t, h->c) && EVP_DigestFinal_ex(h->t, out, &len))
        return true;
    memset(out, 0, 32);
    return false;
}

static void ph_free(struct prefix_hasher *h)
{
    EVP_MD_CTX_free(h->c);
    EVP_MD_CTX_free(h->t);
}

/* DIR/blobs/<key[0:2]>/<key>.hsb, or NULL when hexkey is not a valid key (invariant 10). */
static char *blob_path(const struct bank_disk *d, const char *hexkey)
{
    if (!key_text_ok(hexkey)) return NULL;
    char name[80];
    snprintf(name, sizeof name, "%.2s/%s" EXT, hexkey, hexkey);
    return sys_path_join(d->blobs, name);
}

/* 0: the shard directory of hexkey is a real directory; ENOENT: it does not exist;
 * ENOTDIR: something foreign is there (a symlink, a file); -1 (errno set): lstat failed. */
static int shard_state(const struct bank_disk *d, const char *hexkey)
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
static int blob_unlink(struct bank_disk *d, const char *hexkey)
{
    char *p = blob_path(d, hexkey);
    if (!p) return 0;
    struct stat sb;
    int rc = 0;
    if (shard_state(d, hexkey) == 0 && lstat(p, &sb) == 0 && S_ISREG(sb.st_mode)) {
        rc = sys_io_unlink(p);
        if (rc != 0 && errno == ENOENT) rc = 0;
    }
    hs_free(p);
    return rc;
}

static int64_t next_tick(struct bank_disk *d)
{
    int64_t now = sys_time_unix_ms();
    d->tick = now > d->tick ? now : d->tick + 1; /* strictly increasing: LRU order is exact */
    return d->tick;
}

#define BACKOFF_MAX_MS 60000u

static uint32_t retry_min_ms(const struct bank_disk *d) { return d->o.retry_ms ? d->o.retry_ms : 1000u; }

/* Disable the tier until the retry (invariant 7). Caller holds mu. */
static void disable_locked(struct bank_disk *d, const char *fmt, const char *a, const char *b)
{
    d->st.io_errors++;
    if (d->st.disabled) return;
    d->st.disabled = true;
    snprintf(d->st.disabled_reason, sizeof d->st.disabled_reason, fmt, a, b);
    uint32_t wait = d->backoff_ms ? d->backoff_ms : retry_min_ms(d);
    d->retry_at_ms = mono_ms() + wait;
    d->backoff_ms = wait >= BACKOFF_MAX_MS / 2 ? BACKOFF_MAX_MS : 2 * wait;
    log_warn("bank disk: tier disabled: %s (retrying in %u ms)", d->st.disabled_reason, (unsigned)wait);
    pthread_cond_broadcast(&d->cv_work); /* the writer thread schedules the retry */
}

static void disable(struct bank_disk *d, const char *fmt, const char *a, const char *b)
{
    pthread_mutex_lock(&d->mu);
    disable_locked(d, fmt, a, b);
    pthread_mutex_unlock(&d->mu);
}

static bool is_disabled(struct bank_disk *d)
{
    pthread_mutex_lock(&d->mu);
    bool off = d->st.disabled;
    pthread_mutex_unlock(&d->mu);
    return off;
}

static void count(struct bank_disk *d, uint64_t *field, uint64_t v)
{
    pthread_mutex_lock(&d->mu);
    *field += v;
    pthread_mutex_unlock(&d->mu);
}

/* ---- the mirror (under mu) ---------------------------------------------------------- */

static void known_add(struct bank_disk *d, uint64_t fp, int64_t pos, uint64_t row, uint64_t snap,
                      const uint8_t *key)
{
    pthread_mutex_lock(&d->mu);
    for (size_t i = 0; i < d->nkn; i++) {
        if (memcmp(d->kn[i].key, key, 32) == 0) { /* a replaced row: one mirror entry */
            d->kn[i].pos = pos;
            pthread_mutex_unlock(&d->mu);
            return;
        }
    }
    if (d->nkn == d->ckn) {
        d->ckn = d->ckn ? 2 * d->ckn : 64;
        d->kn = hs_realloc(d->kn, d->ckn * sizeof *d->kn);
    }
    struct known *k = &d->kn[d->nkn++];
    k->fp = fp;
    k->pos = pos;
    k->row = row;
    k->snap = snap;
    memcpy(k->key, key, 32);
    pthread_mutex_unlock(&d->mu);
}

static void known_del(struct bank_disk *d, const uint8_t *key)
{
    pthread_mutex_lock(&d->mu);
    for (size_t i = 0; i < d->nkn; i++) {
        if (memcmp(d->kn[i].key, key, 32) == 0) {
            d->kn[i] = d->kn[--d->nkn];
            break;
        }
    }
    pthread_mutex_unlock(&d->mu);
}

/* ---- SQLite ------------------------------------------------------------------------- */

static int db_exec(struct bank_disk *d, const char *sql)
{
    char *msg = NULL;
    int rc = sqlite3_exec(d->db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        disable(d, "index: %s: %s", sql, msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

static sqlite3_stmt *db_prep(struct bank_disk *d, const char *sql)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(d->db, sql, -1, &s, NULL) != SQLITE_OK) {
        disable(d, "index: %s: %s", sql, sqlite3_errmsg(d->db));
        return NULL;
    }
    return s;
}

/* Column col of s as a key: out gets it when it is 64 lower-case hex digits (true), or ""
 * when it is empty and empty_ok (true); anything else (longer, shorter, NUL inside, other
 * characters) leaves out "" and returns false: it is never used as a path. */
static bool col_key(sqlite3_stmt *s, int col, char out[65], bool empty_ok)
{
    const char *t = (const char *)sqlite3_column_text(s, col);
    int nb = sqlite3_column_bytes(s, col);
    out[0] = 0;
    if (t && nb == 0 && empty_ok) return true;
    if (!t || nb != 64 || !key_text_ok(t)) return false;
    memcpy(out, t, 65);
    return true;
}

/* Rebuild the mirror from the index. Caller holds db_mu. */
static void known_reload(struct bank_disk *d)
{
    pthread_mutex_lock(&d->mu);
    d->nkn = 0;
    pthread_mutex_unlock(&d->mu);
    sqlite3_stmt *s = db_prep(d, "SELECT key, fp, pos, kv_row_bytes, snapshot_bytes FROM entries");
    while (s && sqlite3_step(s) == SQLITE_ROW) {
        uint8_t k[32];
        char hk[65];
        if (!col_key(s, 0, hk, false) || !unhex32(hk, k)) continue;
        known_add(d, (uint64_t)sqlite3_column_int64(s, 1), sqlite3_column_int64(s, 2),
                  (uint64_t)sqlite3_column_int64(s, 3), (uint64_t)sqlite3_column_int64(s, 4), k);
    }
    sqlite3_finalize(s);
}

struct keybytes {
    char key[65];             /* "" when the row's key is malformed */
    uint64_t bytes;
    int64_t rowid;
};

/* Delete the entry of hexkey and every entry below it (rows in one savepoint, then the
 * files); subtract their bytes. Returns the rows deleted. Caller holds db_mu. */
static uint64_t subtree_delete(struct bank_disk *d, const char *hexkey)
{
    if (d->read_only) return 0; /* a reader changes nothing (invariant 8) */
    struct keybytes *v = NULL;
    size_t n = 0, cap = 0;
    sqlite3_stmt *s = db_prep(d,
        "WITH RECURSIVE sub(k) AS (SELECT ?1 UNION SELECT e.key FROM entries e JOIN sub ON e.parent = sub.k)"
        " SELECT entries.key, entries.bytes, entries.rowid FROM entries JOIN sub ON entries.key = sub.k");
    if (!s) return 0;
    sqlite3_bind_text(s, 1, hexkey, -1, SQLITE_STATIC);
    while (sqlite3_step(s) == SQLITE_ROW) {
        if (n == cap) { cap = cap ? 2 * cap : 8; v = hs_realloc(v, cap * sizeof *v); }
        col_key(s, 0, v[n].key, false); /* "" when malformed: the row goes, no file is touched */
        v[n].bytes = (uint64_t)sqlite3_column_int64(s, 1);
        v[n].rowid = sqlite3_column_int64(s, 2);
        n++;
    }
    sqlite3_finalize(s);
    /* the file of a row-less key is removed too (a row dropped earlier, a failed unlink) */
    bool self = false;
    for (size_t i = 0; i < n; i++) self |= strcmp(v[i].key, hexkey) == 0;
    uint64_t gone = 0;
    if (n && db_exec(d, "SAVEPOINT subtree") == 0) {
        sqlite3_stmt *del = db_prep(d, "DELETE FROM entries WHERE rowid = ?");
        bool ok = del != NULL;
        for (size_t i = 0; ok && i < n; i++) {
            sqlite3_reset(del);
            sqlite3_bind_int64(del, 1, v[i].rowid);
            ok = sqlite3_step(del) == SQLITE_DONE;
        }
        if (!ok) disable(d, "index: delete %s: %s", hexkey, sqlite3_errmsg(d->db));
        sqlite3_finalize(del);
        if (ok && db_exec(d, "RELEASE subtree") == 0) {
            gone = n;
            for (size_t i = 0; i < n; i++) {
                d->total_bytes = d->total_bytes > v[i].bytes ? d->total_bytes - v[i].bytes : 0;
                if (d->n_entries) d->n_entries--;
                uint8_t k[32];
                if (unhex32(v[i].key, k)) known_del(d, k);
            }
        } else {
            sqlite3_exec(d->db, "ROLLBACK TO subtree; RELEASE subtree", NULL, NULL, NULL);
        }
    }
    /* files only after their rows are gone (invariant 2); a row-less key's file too */
    for (size_t i = 0; i < (gone ? n : 0) + (!self && (gone || n == 0) ? 1 : 0); i++) {
        const char *k = i < (gone ? n : 0) ? v[i].key : hexkey;
        if (blob_unlink(d, k) != 0) disable(d, "%s: unlink failed: %s", k, strerror(errno));
    }
    hs_free(v);
    return gone;
}

/* Keys that must not be evicted now: the base of the write in flight, of every queued
 * write, and `also`. Caller holds db_mu; returns an owned array of 32-byte keys. */
static uint8_t (*pins_get(struct bank_disk *d, const uint8_t *also, size_t *n_out))[32]
{
    pthread_mutex_lock(&d->mu);
    size_t n = 0;
    uint8_t (*v)[32] = hs_malloc(((size_t)d->nq + 2) * 32);
    if (!key_is_zero(d->inflight_base)) memcpy(v[n++], d->inflight_base, 32);
    for (int i = 0; i < d->nq; i++)
        if (d->q[i]->from > 0) memcpy(v[n++], d->q[i]->base, 32);
    if (also && !key_is_zero(also)) memcpy(v[n++], also, 32);
    pthread_mutex_unlock(&d->mu);
    *n_out = n;
    return v;
}

/* Evict least recently used leaves until total + incoming <= limit (invariant 3, 5);
 * `protect` (may be NULL) is pinned too. Caller holds db_mu. */
static void evict_to(struct bank_disk *d, uint64_t limit, uint64_t incoming, const uint8_t *protect)
{
    if (d->read_only || d->total_bytes + incoming <= limit) return;
    size_t npin;
    uint8_t (*pins)[32] = pins_get(d, protect, &npin);
    while (d->total_bytes + incoming > limit && d->n_entries > 0 && !is_disabled(d)) {
        sqlite3_stmt *s = db_prep(d, "SELECT key, bytes FROM entries e WHERE NOT EXISTS"
                                     " (SELECT 1 FROM entries c WHERE c.parent = e.key)"
                                     " ORDER BY last_use_ms ASC, pos DESC LIMIT 64");
        if (!s) break;
        char key[65] = "";
        uint64_t bytes = 0;
        while (!key[0] && sqlite3_step(s) == SQLITE_ROW) {
            char k[65];
            uint8_t kb[32];
            if (!col_key(s, 0, k, false) || !unhex32(k, kb)) continue;
            bool pinned = false;
            for (size_t i = 0; i < npin && !pinned; i++) pinned = memcmp(pins[i], kb, 32) == 0;
            if (pinned) continue;
            snprintf(key, sizeof key, "%s", k);
            bytes = (uint64_t)sqlite3_column_int64(s, 1);
        }
        sqlite3_finalize(s);
        if (!key[0]) break; /* everything left is needed or pinned */
        if (subtree_delete(d, key) == 0) break; /* the delete failed: the tier is off */
        count(d, &d->st.evicted, 1);
        count(d, &d->st.evicted_bytes, bytes);
    }
    hs_free(pins);
}

struct row {
    char key[65], parent[65];
    uint64_t fp, row, snap, bytes;
    int64_t start, pos;
    int kind;
};

/* false when the row's key or parent is malformed (invariant 10): skip such a row */
static bool row_read(sqlite3_stmt *s, int col0, struct row *r)
{
    bool ok = col_key(s, col0, r->key, false);
    ok &= col_key(s, col0 + 1, r->parent, true);
    r->fp = (uint64_t)sqlite3_column_int64(s, col0 + 2);
    r->start = sqlite3_column_int64(s, col0 + 3);
    r->pos = sqlite3_column_int64(s, col0 + 4);
    r->kind = sqlite3_column_int(s, col0 + 5);
    r->row = (uint64_t)sqlite3_column_int64(s, col0 + 6);
    r->snap = (uint64_t)sqlite3_column_int64(s, col0 + 7);
    r->bytes = (uint64_t)sqlite3_column_int64(s, col0 + 8);
    return ok;
}
#define ROW_COLS "key, parent, fp, start, pos, kind, kv_row_bytes, snapshot_bytes, bytes"

/* The row of hexkey; false when there is none. Caller holds db_mu. */
static bool row_get(struct bank_disk *d, const char *hexkey, struct row *r)
{
    sqlite3_stmt *s = db_prep(d, "SELECT " ROW_COLS " FROM entries WHERE key = ?");
    if (!s) return false;
    sqlite3_bind_text(s, 1, hexkey, -1, SQLITE_STATIC);
    bool found = sqlite3_step(s) == SQLITE_ROW && row_read(s, 0, r);
    sqlite3_finalize(s);
    return found;
}

static int db_insert(struct bank_disk *d, const char *hexkey, const char *parent, uint64_t fp,
                     int64_t start, int64_t pos, int kind, uint64_t row, uint64_t snap,
                     uint64_t bytes, int64_t created, int64_t used)
{
    if (d->read_only) return -1;
    sqlite3_stmt *s = db_prep(d,
        "INSERT OR REPLACE INTO entries(key, parent, fp, start, pos, kind, kv_row_bytes,"
        " snapshot_bytes, bytes, created_ms, last_use_ms, hits) VALUES(?,?,?,?,?,?,?,?,?,?,?,0)");
    if (!s) return -1;
    sqlite3_bind_text(s, 1, hexkey, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, parent, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, (sqlite3_int64)fp);
    sqlite3_bind_int64(s, 4, start);
    sqlite3_bind_int64(s, 5, pos);
    sqlite3_bind_int(s, 6, kind);
    sqlite3_bind_int64(s, 7, (sqlite3_int64)row);
    sqlite3_bind_int64(s, 8, (sqlite3_int64)snap);
    sqlite3_bind_int64(s, 9, (sqlite3_int64)bytes);
    sqlite3_bind_int64(s, 10, created);
    sqlite3_bind_int64(s, 11, used);
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) {
        disable(d, "index: insert %s: %s", hexkey, sqlite3_errmsg(d->db));
        return -1;
    }
    uint8_t k[32];
    if (unhex32(hexkey, k)) known_add(d, fp, pos, row, snap, k);
    return 0;
}

static void touch_row(struct bank_disk *d, const char *hexkey, bool hit, bool *found)
{
    if (d->read_only) return;
    sqlite3_stmt *u = db_prep(d, hit ? "UPDATE entries SET last_use_ms = ?, hits = hits + 1 WHERE key = ?"
                                     : "UPDATE entries SET last_use_ms = ? WHERE key = ?");
    if (!u) return;
    sqlite3_bind_int64(u, 1, next_tick(d));
    sqlite3_bind_text(u, 2, hexkey, -1, SQLITE_STATIC);
    if (sqlite3_step(u) != SQLITE_DONE) disable(d, "index: touch %s: %s", hexkey, sqlite3_errmsg(d->db));
    if (found) *found = sqlite3_changes(d->db) > 0;
    sqlite3_finalize(u);
}

/* ---- blob header -------------------------------------------------------------------- */

struct hdr {
    uint32_t version, kind;
    uint64_t fp, start, pos, row, snap, payload_len, kv_sum, snap_sum;
    uint8_t key[32], parent[32];
};

static void hdr_encode(const struct hdr *h, uint8_t *b)
{
    memset(b, 0, HDR_SIZE);
    memcpy(b, k_magic, 8);
    put_u32(b + 8, h->version);
    put_u32(b + 12, h->kind);
    put_u64(b + 16, h->fp);
    put_u64(b + 24, h->start);
    put_u64(b + 32, h->pos);
    put_u64(b + 40, h->row);
    put_u64(b + 48, h->snap);
    put_u64(b + 56, h->payload_len);
    memcpy(b + 64, h->key, 32);
    memcpy(b + 96, h->parent, 32);
    put_u64(b + 128, h->kv_sum);
    put_u64(b + 136, h->snap_sum);
    put_u64(b + 152, XXH3_64bits(b, 152));
}

/* Decode and check self-consistency; false when the header cannot be trusted. */
static bool hdr_decode(const uint8_t *b, struct hdr *h)
{
    if (memcmp(b, k_magic, 8) != 0) return false;
    if (get_u64(b + 152) != XXH3_64bits(b, 152)) return false;
    h->version = get_u32(b + 8);
    h->kind = get_u32(b + 12);
    h->fp = get_u64(b + 16);
    h->start = get_u64(b + 24);
    h->pos = get_u64(b + 32);
    h->row = get_u64(b + 40);
    h->snap = get_u64(b + 48);
    h->payload_len = get_u64(b + 56);
    memcpy(h->key, b + 64, 32);
    memcpy(h->parent, b + 96, 32);
    h->kv_sum = get_u64(b + 128);
    h->snap_sum = get_u64(b + 136);
    uint64_t want;
    if (h->version != FORMAT_VERSION || h->kind >= BANK_SNAP_KIND_COUNT ||
        h->pos > (uint64_t)INT64_MAX || h->start >= h->pos ||
        !payload_len_of((int64_t)h->start, (int64_t)h->pos, h->row, h->snap, &want) ||
        want != h->payload_len || (h->start == 0) != key_is_zero(h->parent))
        return false;
    return true;
}

/* ---- reading a blob ----------------------------------------------------------------- */

enum rd {
    RD_OK = 0, RD_MISSING, RD_IO, RD_HEADER, RD_IDENTITY, RD_SIZE, RD_CHECKSUM, RD_TOKENS,
    RD_NOT_REGULAR, RD_COUNT
};

static const char *rd_name(enum rd r)
{
    static const char *const names[RD_COUNT] = {"ok", "missing file", "I/O error", "bad header",
                                                "wrong identity", "wrong size", "bad checksum",
                                                "wrong tokens", "not a regular file"};
    return (unsigned)r < RD_COUNT ? names[r] : "?";
}

/* Open the blob of hexkey for reading (invariant 10): O_NOFOLLOW | O_NONBLOCK, a regular
 * file in a real shard directory. Returns the fd, or -1 with *r = RD_MISSING (nothing
 * there), RD_NOT_REGULAR (something foreign or unreadable there) or RD_IO (errno). */
static int blob_open(struct bank_disk *d, const char *path, const char *hexkey, struct stat *stb, enum rd *r)
{
    int sh = shard_state(d, hexkey);
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

/* Read and verify the blob of hexkey. exp: the identity it must have (fp, start, pos, row,
 * snap, key, parent). ids_dst: room for pos-start ids; kv_dst: (pos-start) rows; snap_dst:
 * the snapshot, or NULL to leave it unread (and unchecked); want_ids: the request's ids
 * [start, pos) to compare with, or NULL. */
static enum rd blob_read(struct bank_disk *d, const char *hexkey, const struct hdr *exp,
                         int32_t *ids_dst, uint8_t *kv_dst, uint8_t *snap_dst,
                         const int32_t *want_ids, uint32_t *kind_out)
{
    char *path = blob_path(d, hexkey);
    if (!path) return RD_HEADER; /* not a key (callers pass computed keys) */
    enum rd r = RD_OK;
    struct stat stb;
    int fd = blob_open(d, path, hexkey, &stb, &r);
    if (fd < 0) {
        if (r == RD_IO) disable(d, "%s: open failed: %s", path, strerror(errno));
        hs_free(path);
        return r;
    }
    uint8_t hb[HDR_SIZE];
    struct hdr h;
    size_t ids_b = 0, kv_b = 0;
    if ((uint64_t)stb.st_size < HDR_SIZE) { r = RD_SIZE; goto out; }
    if (sys_io_pread_full(fd, hb, HDR_SIZE, 0) != HDR_SIZE) {
        disable(d, "%s: read failed: %s", path, strerror(errno));
        r = RD_IO;
        goto out;
    }
    if (!hdr_decode(hb, &h)) { r = RD_HEADER; goto out; }
    if (h.fp != exp->fp || memcmp(h.key, exp->key, 32) != 0 || h.start != exp->start ||
        h.pos != exp->pos || h.row != exp->row || h.snap != exp->snap ||
        memcmp(h.parent, exp->parent, 32) != 0) {
        r = RD_IDENTITY;
        goto out;
    }
    if ((uint64_t)stb.st_size != HDR_SIZE + h.payload_len) { r = RD_SIZE; goto out; }
    ids_b = (size_t)(h.pos - h.start) * 4;
    kv_b = (size_t)(h.pos - h.start) * h.row;
    if ((ids_b && sys_io_pread_full(fd, ids_dst, ids_b, HDR_SIZE) != (ssize_t)ids_b) ||
        (kv_b && sys_io_pread_full(fd, kv_dst, kv_b, HDR_SIZE + ids_b) != (ssize_t)kv_b) ||
        (snap_dst && h.snap &&
         sys_io_pread_full(fd, snap_dst, h.snap, HDR_SIZE + ids_b + kv_b) != (ssize_t)h.snap)) {
        disable(d, "%s: read failed: %s", path, strerror(errno));
        r = RD_IO;
        goto out;
    }
    XXH3_state_t *xs = XXH3_createState();
    XXH3_64bits_reset(xs);
    XXH3_64bits_update(xs, ids_dst, ids_b);
    XXH3_64bits_update(xs, kv_dst, kv_b);
    bool sum_ok = XXH3_64bits_digest(xs) == h.kv_sum;
    XXH3_freeState(xs);
    if (!sum_ok || (snap_dst && XXH3_64bits(snap_dst, h.snap) != h.snap_sum)) { r = RD_CHECKSUM; goto out; }
    if (want_ids && memcmp(ids_dst, want_ids, ids_b) != 0) r = RD_TOKENS;
    if (kind_out) *kind_out = h.kind;
out:
    sys_io_close(fd); /* read-only: a failing close loses nothing */
    hs_free(path);
    return r;
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
static void discard(struct bank_disk *d, const char *hexkey, enum rd why, const char *during)
{
    count_bad(d, why);
    if (d->read_only) {
        log_warn("bank disk: %s: skipped entry %s: %s (read-only here: left for the writer)",
                 during, hexkey, rd_name(why));
        return;
    }
    uint64_t n = subtree_delete(d, hexkey);
    count(d, &d->st.discarded, n);
    log_warn("bank disk: %s: discarded entry %s: %s (%" PRIu64 " index rows removed with what"
             " builds on it)", during, hexkey, rd_name(why), n);
}

/* ---- restoring a chain -------------------------------------------------------------- */

/* Restore the entry of tail (the row of key(p) for ids) into hit: walk the parent links
 * in the index, recompute every key from ids, read and verify every blob from the tail
 * to the root (invariant 1). On failure *bad names the entry to delete with its subtree.
 * Caller holds db_mu. */
static enum rd chain_restore(struct bank_disk *d, const struct row *tail, const int32_t *ids,
                             struct bank_disk_hit *hit, char bad[65])
{
    const uint64_t fp = tail->fp, rowb = tail->row, snapb = tail->snap;
    const int64_t p = tail->pos;
    struct row *ch = NULL;
    size_t n = 0, cap = 0;
    enum rd r = RD_OK;
    snprintf(bad, 65, "%s", tail->key);
    /* 1: the links, tail first */
    struct row cur = *tail;
    for (;;) {
        if (n == cap) { cap = cap ? 2 * cap : 8; ch = hs_realloc(ch, cap * sizeof *ch); }
        ch[n++] = cur;
        if (cur.start == 0) {
            if (cur.parent[0]) { snprintf(bad, 65, "%s", cur.key); r = RD_IDENTITY; }
            break;
        }
        struct row par;
        if (!row_get(d, cur.parent, &par)) {
            snprintf(bad, 65, "%s", cur.key); /* its parent is gone: it cannot be restored */
            r = is_disabled(d) ? RD_IO : RD_MISSING;
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
    struct prefix_hasher ph;
    ph_init(&ph, fp, ids);
    for (size_t i = n; i-- > 0;) ph_key(&ph, ch[i].pos, keys[i]);
    ph_free(&ph);
    /* 3: the blobs, tail first (a bad tail never costs its ancestors a read) */
    size_t ids_b = (size_t)p * 4, kv_b = (size_t)p * rowb;
    uint8_t *buf = hs_malloc(ids_b + kv_b + snapb + 1);
    int32_t *dst_ids = (int32_t *)(void *)buf;
    uint8_t *dst_kv = buf + ids_b, *dst_snap = buf + ids_b + kv_b;
    uint32_t kind = BANK_SNAP_END;
    for (size_t i = 0; i < n && r == RD_OK; i++) {
        char want[65];
        hex32(keys[i], want);
        if (strcmp(want, ch[i].key) != 0) { /* the index names another prefix here */
            snprintf(bad, 65, "%s", i ? ch[i - 1].key : ch[i].key);
            r = RD_IDENTITY;
            break;
        }
        struct hdr exp = {0};
        exp.fp = fp;
        exp.start = (uint64_t)ch[i].start;
        exp.pos = (uint64_t)ch[i].pos;
        exp.row = rowb;
        exp.snap = snapb;
        memcpy(exp.key, keys[i], 32);
        if (i + 1 < n) memcpy(exp.parent, keys[i + 1], 32);
        r = blob_read(d, ch[i].key, &exp, dst_ids + ch[i].start, dst_kv + (size_t)ch[i].start * rowb,
                      i == 0 ? dst_snap : NULL, ids + ch[i].start, i == 0 ? &kind : NULL);
        if (r != RD_OK) snprintf(bad, 65, "%s", ch[i].key);
    }
    hs_free(keys);
    if (r != RD_OK) {
        hs_free(buf);
        goto out;
    }
    hit->pos = p;
    hit->kind = (enum bank_snap_kind)kind;
    hit->buf_ = buf;
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

/* ---- reconcile ---------------------------------------------------------------------- */

struct rowkey {
    char key[65];
    uint64_t bytes;
    bool seen, bad;
};

static int rowkey_cmp(const void *a, const void *b)
{
    return strcmp(((const struct rowkey *)a)->key, ((const struct rowkey *)b)->key);
}

/* Adopt a file without a row when its header verifies (invariant 4); its parent is
 * checked by the dangling pass. db_mu held. */
static bool adopt(struct bank_disk *d, const char *path, const char *hexkey, uint64_t size)
{
    struct stat stb;
    enum rd r;
    int fd = blob_open(d, path, hexkey, &stb, &r);
    if (fd < 0) return false;
    uint8_t hb[HDR_SIZE];
    struct hdr h;
    bool ok = size >= HDR_SIZE && (uint64_t)stb.st_size == size &&
              sys_io_pread_full(fd, hb, HDR_SIZE, 0) == HDR_SIZE &&
              hdr_decode(hb, &h) && size == HDR_SIZE + h.payload_len;
    sys_io_close(fd);
    char hk[65], hp[65] = "";
    if (ok) {
        hex32(h.key, hk);
        ok = strcmp(hk, hexkey) == 0;
        if (h.start) hex32(h.parent, hp);
    }
    /* last use 0: adopted entries are the first to go under the cap */
    if (ok && db_insert(d, hexkey, hp, h.fp, (int64_t)h.start, (int64_t)h.pos, (int)h.kind, h.row,
                        h.snap, size, next_tick(d), 0) != 0)
        ok = false;
    if (ok) {
        d->total_bytes += size;
        d->n_entries++;
    }
    return ok;
}

static bool name_is(const char *nm, const char *suffix, bool prefix_only)
{
    size_t len = strlen(nm), sl = strlen(suffix);
    if (len < 64 + sl || !is_hex64(nm) || strncmp(nm + 64, suffix, sl) != 0) return false;
    return prefix_only ? len > 64 + sl : len == 64 + sl;
}

/* A temp file "<key>.hsb.tmp.<pid>.<seq>" whose writer is gone (or is this process):
 * only those are removed (invariant 8). A name without a pid is an older build's. */
static bool tmp_owner_gone(const char *nm)
{
    const char *p = nm + 64 + strlen(EXT ".tmp.");
    char *end;
    errno = 0;
    long pid = strtol(p, &end, 10);
    if (end == p || *end != '.' || errno || pid <= 0) return true;
    if (pid == (long)getpid()) return true; /* ours, and not the write in flight */
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

static bool is_hexc(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

static void note_foreign(uint64_t *n, char *example, size_t cap, const char *path)
{
    if (!*n) snprintf(example, cap, "%s", path);
    (*n)++;
}

/* Rows with a malformed key or parent (invariant 10): a writer deletes them by rowid;
 * both count them. Returns the count; *example gets the first key (printable bytes only).
 * db_mu held. */
static uint64_t bad_rows_pass(struct bank_disk *d, char *example, size_t cap)
{
    sqlite3_stmt *s = db_prep(d, "SELECT rowid, key, parent FROM entries");
    if (!s) return 0;
    int64_t *ids = NULL;
    size_t n = 0, c = 0;
    example[0] = 0;
    while (sqlite3_step(s) == SQLITE_ROW) {
        char k[65], pk[65];
        if (col_key(s, 1, k, false) && col_key(s, 2, pk, true)) continue;
        if (!n) {
            const unsigned char *t = sqlite3_column_text(s, 1);
            size_t j = 0;
            for (; t && t[j] && j + 1 < cap && j < 96; j++) example[j] = t[j] >= 32 && t[j] < 127 ? (char)t[j] : '?';
            example[j] = 0;
        }
        if (n == c) { c = c ? 2 * c : 16; ids = hs_realloc(ids, c * sizeof *ids); }
        ids[n++] = sqlite3_column_int64(s, 0);
    }
    sqlite3_finalize(s);
    if (n && !d->read_only) {
        sqlite3_stmt *del = db_prep(d, "DELETE FROM entries WHERE rowid = ?");
        for (size_t i = 0; del && i < n; i++) {
            sqlite3_reset(del);
            sqlite3_bind_int64(del, 1, ids[i]);
            if (sqlite3_step(del) != SQLITE_DONE) {
                disable(d, "index: delete a malformed row: %s%s", sqlite3_errmsg(d->db), "");
                break;
            }
        }
        sqlite3_finalize(del);
    }
    hs_free(ids);
    return n;
}

/* Walk blobs/, match files with rows, drop rows whose parent is gone (invariant 4).
 * A reader (or scan_only) only counts what is foreign and what rows are malformed and
 * changes nothing. db_mu held. Counts into st.open_*, st.foreign, st.bad_rows. */
static void reconcile(struct bank_disk *d, bool scan_only)
{
    const bool ro = scan_only || d->read_only;
    struct rowkey *rows = NULL;
    size_t n = 0, cap = 0;
    char bad_example[100];
    uint64_t bad_rows = 0;
    if (!ro) {
        db_exec(d, "BEGIN");
        bad_rows = bad_rows_pass(d, bad_example, sizeof bad_example);
        sqlite3_stmt *s = db_prep(d, "SELECT key, bytes FROM entries");
        while (s && sqlite3_step(s) == SQLITE_ROW) {
            if (n == cap) { cap = cap ? 2 * cap : 256; rows = hs_realloc(rows, cap * sizeof *rows); }
            col_key(s, 0, rows[n].key, false);
            rows[n].bytes = (uint64_t)sqlite3_column_int64(s, 1);
            rows[n].seen = rows[n].bad = false;
            n++;
        }
        sqlite3_finalize(s);
        if (n) qsort(rows, n, sizeof *rows, rowkey_cmp);
        d->total_bytes = 0;
        d->n_entries = 0;
        for (size_t i = 0; i < n; i++) { d->total_bytes += rows[i].bytes; d->n_entries++; }
    } else if (d->db) {
        bad_rows = bad_rows_pass(d, bad_example, sizeof bad_example);
    }

    struct cand { char *path; char key[65]; uint64_t size; } *adopt_v = NULL;
    size_t na = 0, ca = 0;
    uint64_t adopted = 0, orphans = 0, tmps = 0, dropped = 0, old = 0, foreign = 0;
    char foreign_ex[256] = "";
    DIR *top = opendir(d->blobs);
    struct dirent *e1;
    bool scan_failed = !top && errno != ENOENT;
    if (scan_failed && !ro) disable(d, "%s: opendir failed: %s", d->blobs, strerror(errno));
    while (top && (e1 = readdir(top))) {
        const char *dn = e1->d_name;
        if (!strcmp(dn, ".") || !strcmp(dn, "..")) continue;
        char *sub = sys_path_join(d->blobs, dn);
        struct stat sb;
        /* only a real directory with a shard name is ours; a symlink is never followed */
        if (strlen(dn) != 2 || !is_hexc(dn[0]) || !is_hexc(dn[1]) || lstat(sub, &sb) != 0 ||
            !S_ISDIR(sb.st_mode)) {
            note_foreign(&foreign, foreign_ex, sizeof foreign_ex, sub);
            hs_free(sub);
            continue;
        }
        DIR *dd = opendir(sub);
        if (!dd) {
            scan_failed = true; /* never read as "no files": that would drop their rows */
            if (!ro) disable(d, "%s: opendir failed: %s", sub, strerror(errno));
        }
        struct dirent *e2;
        while (dd && (e2 = readdir(dd))) {
            const char *nm = e2->d_name;
            if (!strcmp(nm, ".") || !strcmp(nm, "..")) continue;
            char *path = sys_path_join(sub, nm);
            struct stat stb;
            bool is_file = lstat(path, &stb) == 0 && S_ISREG(stb.st_mode);
            bool is_tmp = name_is(nm, EXT ".tmp.", true), is_blob = name_is(nm, EXT, false);
            bool is_old = name_is(nm, ".blob", false) || name_is(nm, ".blob.tmp.", true);
            if (!is_file || !(is_tmp || is_blob || is_old) || nm[0] != dn[0] || nm[1] != dn[1]) {
                note_foreign(&foreign, foreign_ex, sizeof foreign_ex, path);
            } else if (ro) {
                /* a reader touches nothing */
            } else if (is_tmp) {
                if (strncmp(nm, d->inflight, 64) != 0 && tmp_owner_gone(nm) && sys_io_unlink(path) == 0) tmps++;
            } else if (is_old) {
                if (sys_io_unlink(path) == 0) old++; /* format 1 */
            } else {
                struct rowkey probe;
                memcpy(probe.key, nm, 64);
                probe.key[64] = 0;
                struct rowkey *r = n ? bsearch(&probe, rows, n, sizeof *rows, rowkey_cmp) : NULL;
                if (r) {
                    r->seen = true;
                    /* the row promises another size: truncated or replaced */
                    r->bad = r->bytes != (uint64_t)stb.st_size;
                } else if (strcmp(probe.key, d->inflight) != 0) {
                    if (na == ca) { ca = ca ? 2 * ca : 16; adopt_v = hs_realloc(adopt_v, ca * sizeof *adopt_v); }
                    adopt_v[na].path = path;
                    path = NULL;
                    memcpy(adopt_v[na].key, probe.key, 65);
                    adopt_v[na].size = (uint64_t)stb.st_size;
                    na++;
                }
            }
            hs_free(path);
        }
        if (dd) closedir(dd);
        hs_free(sub);
    }
    if (top) closedir(top);
    pthread_mutex_lock(&d->mu);
    d->st.foreign = foreign;
    snprintf(d->st.foreign_example, sizeof d->st.foreign_example, "%s", foreign_ex);
    d->st.bad_rows += ro && scan_only ? 0 : bad_rows;
    pthread_mutex_unlock(&d->mu);
    if (bad_rows && !(ro && scan_only))
        log_warn("bank disk: %s: %" PRIu64 " index rows with a malformed key or parent (e.g. '%s')%s",
                 d->dir, bad_rows, bad_example, ro ? ": read-only, left in place" : ": removed, never used as paths");
    if (ro || scan_failed) {
        for (size_t i = 0; i < na; i++) hs_free(adopt_v[i].path);
        hs_free(adopt_v);
        hs_free(rows);
        if (!ro) db_exec(d, "COMMIT");
        return;
    }
    /* rows without a good file go first (with what hangs below them), then adoption */
    for (size_t i = 0; i < n; i++) {
        if (!rows[i].key[0] || (rows[i].seen && !rows[i].bad) || strcmp(rows[i].key, d->inflight) == 0) continue;
        dropped += subtree_delete(d, rows[i].key);
    }
    for (size_t i = 0; i < na; i++) {
        if (adopt(d, adopt_v[i].path, adopt_v[i].key, adopt_v[i].size)) adopted++;
        else if (sys_io_unlink(adopt_v[i].path) == 0) orphans++;
        hs_free(adopt_v[i].path);
    }
    hs_free(adopt_v);
    /* rows whose parent is missing or does not fit can never be restored */
    for (int guard = 0; guard < 1000000 && !is_disabled(d); guard++) {
        sqlite3_stmt *q = db_prep(d,
            "SELECT e.key FROM entries e WHERE e.start > 0 AND NOT EXISTS (SELECT 1 FROM entries p"
            " WHERE p.key = e.parent AND p.pos = e.start AND p.fp = e.fp AND"
            " p.kv_row_bytes = e.kv_row_bytes AND p.snapshot_bytes = e.snapshot_bytes) LIMIT 1");
        if (!q) break;
        char key[65] = "";
        if (sqlite3_step(q) == SQLITE_ROW) col_key(q, 0, key, false);
        sqlite3_finalize(q);
        if (!key[0] || strcmp(key, d->inflight) == 0) break;
        uint64_t g = subtree_delete(d, key);
        if (!g) break;
        dropped += g;
    }
    db_exec(d, "COMMIT");
    hs_free(rows);
    pthread_mutex_lock(&d->mu);
    d->st.open_adopted += adopted;
    d->st.open_orphans_removed += orphans;
    d->st.open_tmp_removed += tmps;
    d->st.open_rows_dropped += dropped;
    d->st.open_old_removed += old;
    pthread_mutex_unlock(&d->mu);
}

/* ---- the writer --------------------------------------------------------------------- */

static void pending_free(struct pending *p)
{
    if (!p) return;
    hs_free(p->ids);
    hs_free(p->kv);
    hs_free(p->snapb);
    hs_free(p);
}

/* The deepest stored entry of p's key space at a position in [p->from, p->pos] whose key
 * is a prefix key of p->ids; *base_pos 0 when none. Caller holds db_mu. */
static void choose_base(struct bank_disk *d, const struct pending *p, int64_t *base_pos, uint8_t base[32])
{
    *base_pos = 0;
    memset(base, 0, 32);
    sqlite3_stmt *s = db_prep(d, "SELECT key, pos FROM entries WHERE fp = ? AND kv_row_bytes = ?"
                                 " AND snapshot_bytes = ? AND pos >= ? AND pos <= ? ORDER BY pos");
    if (!s) return;
    sqlite3_bind_int64(s, 1, (sqlite3_int64)p->fp);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)p->row);
    sqlite3_bind_int64(s, 3, (sqlite3_int64)p->snap);
    sqlite3_bind_int64(s, 4, p->from > 0 ? p->from : 1);
    sqlite3_bind_int64(s, 5, p->pos);
    struct prefix_hasher ph;
    ph_init(&ph, p->fp, p->ids);
    int64_t at = -1;
    uint8_t k[32];
    while (sqlite3_step(s) == SQLITE_ROW) {
        uint8_t rk[32];
        int64_t pos = sqlite3_column_int64(s, 1);
        if (!unhex32((const char *)sqlite3_column_text(s, 0), rk)) continue;
        if (pos != at) { ph_key(&ph, pos, k); at = pos; }
        if (memcmp(k, rk, 32) == 0) { *base_pos = pos; memcpy(base, rk, 32); }
    }
    ph_free(&ph);
    sqlite3_finalize(s);
}

static void write_one(struct bank_disk *d, struct pending *p)
{
    char hk[65];
    hex32(p->key, hk);
    if (is_disabled(d)) { count(d, &d->st.skipped_off, 1); return; }

    pthread_mutex_lock(&d->db_mu);
    if (p->touch) {
        bool have = false;
        touch_row(d, hk, false, &have);
        pthread_mutex_unlock(&d->db_mu);
        count(d, have ? &d->st.already_stored : &d->st.skipped_base_gone, 1);
        return;
    }
    int64_t b;
    uint8_t base[32];
    choose_base(d, p, &b, base);
    if (is_disabled(d)) {
        pthread_mutex_unlock(&d->db_mu);
        count(d, &d->st.skipped_off, 1);
        return;
    }
    if (b == p->pos) { /* stored meanwhile (the same prefix banked again) */
        touch_row(d, hk, false, NULL);
        pthread_mutex_unlock(&d->db_mu);
        count(d, &d->st.already_stored, 1);
        return;
    }
    if (p->from > 0 && b == 0) { /* the base it copied past is gone: it has no rows before */
        pthread_mutex_unlock(&d->db_mu);
        count(d, &d->st.skipped_base_gone, 1);
        return;
    }
    uint64_t plen;
    payload_len_of(b, p->pos, p->row, p->snap, &plen); /* fits: put checked [from, pos) */
    uint64_t bytes = HDR_SIZE + plen;
    uint64_t free_b = sys_disk_free_bytes(d->dir);
    if (free_b && free_b < d->o.free_floor_bytes + bytes) {
        pthread_mutex_unlock(&d->db_mu);
        count(d, &d->st.skipped_low_disk, 1);
        return;
    }
    if (d->o.cap_bytes) {
        evict_to(d, d->o.cap_bytes, bytes, b ? base : NULL);
        if (d->total_bytes + bytes > d->o.cap_bytes) {
            pthread_mutex_unlock(&d->db_mu);
            count(d, &d->st.skipped_too_big, 1);
            return;
        }
    }
    pthread_mutex_lock(&d->mu);
    snprintf(d->inflight, sizeof d->inflight, "%s", hk);
    memcpy(d->inflight_base, base, 32);
    pthread_mutex_unlock(&d->mu);
    pthread_mutex_unlock(&d->db_mu);

    struct hdr h = {0};
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
    XXH3_state_t *xs = XXH3_createState();
    XXH3_64bits_reset(xs);
    XXH3_64bits_update(xs, p->ids + b, ids_b);
    XXH3_64bits_update(xs, kv, kv_b);
    h.kv_sum = XXH3_64bits_digest(xs);
    XXH3_freeState(xs);
    h.snap_sum = XXH3_64bits(p->snapb, p->snap);
    uint8_t hb[HDR_SIZE];
    hdr_encode(&h, hb);

    char *path = blob_path(d, hk);
    char sub[3] = {hk[0], hk[1], 0};
    char *subdir = sys_path_join(d->blobs, sub);
    struct hs_err err;
    hs_err_clear(&err);
    /* never write through something foreign (invariant 10): a symlinked shard directory
     * or a non-regular file at the blob's name */
    struct stat sb;
    int sh = shard_state(d, hk);
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
    if (b) hex32(base, hp);
    struct row par;
    if (!ok) {
        disable(d, "write: %s%s", err.msg, "");
    } else if (b && (!row_get(d, hp, &par) || par.pos != b)) {
        /* the base was deleted as bad while this was written: the new blob is useless */
        (void)sys_io_unlink(path);
        count(d, &d->st.skipped_base_gone, 1);
    } else if (db_insert(d, hk, hp, p->fp, b, p->pos, (int)p->kind, p->row, p->snap, bytes,
                         next_tick(d), d->tick) != 0) {
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
    pthread_mutex_unlock(&d->db_mu);
    hs_free(path);
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
static long lock_file_pid(const char *lock_path)
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
static int lock_take(struct bank_disk *d, long *holder, struct hs_err *err)
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
            *holder = lock_file_pid(d->lock_path);
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

static void lock_release(struct bank_disk *d)
{
    if (d->lock_fd < 0) return;
    (void)sys_io_ftruncate(d->lock_fd, 0); /* names no pid once released */
    sys_io_close(d->lock_fd);             /* releases the flock */
    d->lock_fd = -1;
}

static int open_db(struct bank_disk *d, struct hs_err *err);

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
        int lr = lock_take(d, &holder, &e);
        if (lr != 0) {
            pthread_mutex_lock(&d->mu);
            d->st.lock_holder_pid = holder;
            d->retry_at_ms = mono_ms() + retry_min_ms(d);
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
    if (sys_mkdir_p(d->blobs, &e) != HS_OK || open_db(d, &e) != 0) {
        if (d->db) sqlite3_close(d->db);
        d->db = NULL;
        disable(d, "reopen: %s%s", e.msg, "");
    } else {
        reconcile(d, false);
        if (d->o.cap_bytes) evict_to(d, d->o.cap_bytes, 0, NULL);
        known_reload(d);
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

static void *writer_main(void *arg)
{
    struct bank_disk *d = arg;
    writer_lower_priority(d);
    pthread_mutex_lock(&d->mu);
    for (;;) {
        if (d->nq == 0 && d->closing) break;
        if (retry_wanted(d) && mono_ms() >= d->retry_at_ms && d->nq == 0) {
            pthread_mutex_unlock(&d->mu);
            recover(d);
            pthread_mutex_lock(&d->mu);
            continue;
        }
        if (d->nq == 0) {
            if (retry_wanted(d)) {
                int64_t at = d->retry_at_ms, now = mono_ms();
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
        /* its base stays pinned while it is written (evict_to reads inflight_base) */
        if (p->from > 0) memcpy(d->inflight_base, p->base, 32);
        pthread_mutex_unlock(&d->mu);
        write_one(d, p);
        pending_free(p);
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

const char *bank_disk_put_result_name(enum bank_disk_put_result r)
{
    static const char *const names[] = {"queued", "duplicate", "dropped", "off", "too_big",
                                        "bad_args"};
    return (unsigned)r < HS_ARRAY_LEN(names) ? names[r] : "?";
}

/* A reader's index (invariant 8): read-only, never created or converted. No index, or
 * one of another format, is an empty store (d->db NULL; stats say old_format). */
static int open_db_reader(struct bank_disk *d, struct hs_err *err)
{
    struct stat sb;
    if (lstat(d->index_path, &sb) != 0) return 0; /* nothing written yet */
    if (!S_ISREG(sb.st_mode)) return hs_err_set(err, HS_ERR_IO, "%s: not a regular file", d->index_path), -1;
    if (sqlite3_open_v2(d->index_path, &d->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_FULLMUTEX, NULL) != SQLITE_OK) {
        hs_err_set(err, HS_ERR_IO, "%s: cannot open the bank index: %s", d->index_path,
                   d->db ? sqlite3_errmsg(d->db) : "out of memory");
        return -1;
    }
    sqlite3_busy_timeout(d->db, 5000);
    sqlite3_stmt *s = NULL;
    bool fmt_ok = false;
    if (sqlite3_prepare_v2(d->db, "SELECT v FROM meta WHERE k = 'format'", -1, &s, NULL) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(s, 0);
        fmt_ok = v && strcmp(v, FORMAT_STR) == 0;
        if (!fmt_ok) snprintf(d->old_format, sizeof d->old_format, "%s", v ? v : "?");
    }
    sqlite3_finalize(s);
    s = NULL;
    if (fmt_ok && sqlite3_prepare_v2(d->db, "SELECT COUNT(*) FROM entries", -1, &s, NULL) != SQLITE_OK) fmt_ok = false;
    sqlite3_finalize(s);
    if (!fmt_ok) {
        if (!d->old_format[0]) snprintf(d->old_format, sizeof d->old_format, "?");
        d->st.old_format = true;
        sqlite3_close(d->db);
        d->db = NULL;
    }
    return 0;
}

static int open_db(struct bank_disk *d, struct hs_err *err)
{
    if (sqlite3_open_v2(d->index_path, &d->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                        SQLITE_OPEN_FULLMUTEX, NULL) != SQLITE_OK) {
        hs_err_set(err, HS_ERR_IO, "%s: cannot open the bank index: %s", d->index_path,
                   d->db ? sqlite3_errmsg(d->db) : "out of memory");
        return -1;
    }
    sqlite3_busy_timeout(d->db, 5000);
    char *msg = NULL;
    if (sqlite3_exec(d->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                            "CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v TEXT);",
                     NULL, NULL, &msg) != SQLITE_OK) {
        hs_err_set(err, HS_ERR_FORMAT, "%s: bank index unusable: %s", d->index_path, msg ? msg : "?");
        sqlite3_free(msg);
        return -1;
    }
    /* another format: its table is dropped (never read as this one); reconcile removes its
     * blobs, and the open reports both in one line */
    sqlite3_stmt *s = NULL;
    d->old_format[0] = 0;
    if (sqlite3_prepare_v2(d->db, "SELECT v FROM meta WHERE k = 'format'", -1, &s, NULL) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(s, 0);
        if (!v || strcmp(v, FORMAT_STR) != 0) snprintf(d->old_format, sizeof d->old_format, "%s", v ? v : "?");
    }
    sqlite3_finalize(s);
    if (d->old_format[0] && sqlite3_exec(d->db, "DROP TABLE IF EXISTS entries; DELETE FROM meta;",
                                         NULL, NULL, &msg) != SQLITE_OK) {
        hs_err_set(err, HS_ERR_FORMAT, "%s: cannot reset the bank index: %s", d->index_path, msg ? msg : "?");
        sqlite3_free(msg);
        return -1;
    }
    const char *schema =
        "CREATE TABLE IF NOT EXISTS entries(key TEXT PRIMARY KEY, parent TEXT NOT NULL,"
        " fp INTEGER NOT NULL, start INTEGER NOT NULL, pos INTEGER NOT NULL, kind INTEGER NOT NULL,"
        " kv_row_bytes INTEGER NOT NULL, snapshot_bytes INTEGER NOT NULL, bytes INTEGER NOT NULL,"
        " created_ms INTEGER NOT NULL, last_use_ms INTEGER NOT NULL, hits INTEGER NOT NULL);"
        "CREATE INDEX IF NOT EXISTS entries_fp_pos ON entries(fp, pos);"
        "CREATE INDEX IF NOT EXISTS entries_parent ON entries(parent);"
        "INSERT OR IGNORE INTO meta(k, v) VALUES('format', '" FORMAT_STR "');";
    if (sqlite3_exec(d->db, schema, NULL, NULL, &msg) != SQLITE_OK) {
        hs_err_set(err, HS_ERR_FORMAT, "%s: bank index unusable: %s", d->index_path, msg ? msg : "?");
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

static void remove_index_files(const char *index_path)
{
    const char *sfx[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s%s", index_path, sfx[i]);
        (void)sys_io_unlink(p);
    }
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
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* the retry waits on mono_ms */
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
        d->st.lock_holder_pid = lock_file_pid(d->lock_path); /* to say who writes, if anyone */
    } else {
        if (sys_mkdir_p(dir, err) != HS_OK) goto fail;
        long holder = 0;
        int lr = lock_take(d, &holder, err);
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
            d->retry_at_ms = mono_ms() + retry_min_ms(d);
        }
    }
    d->st.read_only = d->read_only;
    if (d->read_only) {
        if (open_db_reader(d, err) != 0) goto fail;
    } else {
        if (sys_mkdir_p(d->blobs, err) != HS_OK) goto fail;
        if (open_db(d, NULL) != 0) {
            /* an unreadable index is rebuilt from the blob headers (invariant 4) */
            log_warn("bank disk: %s unusable, rebuilding it from the blobs", d->index_path);
            sqlite3_close(d->db);
            d->db = NULL;
            remove_index_files(d->index_path);
            if (open_db(d, err) != 0) goto fail;
        }
    }
    pthread_mutex_lock(&d->db_mu);
    if (d->db) {
        sqlite3_stmt *s = db_prep(d, "SELECT COUNT(*) FROM entries");
        if (s && sqlite3_step(s) == SQLITE_ROW) d->st.open_rows = (uint64_t)sqlite3_column_int64(s, 0);
        sqlite3_finalize(s);
    }
    if (d->read_only) {
        /* the sizes as the index states them; nothing is reconciled */
        sqlite3_stmt *s = d->db ? db_prep(d, "SELECT COUNT(*), COALESCE(SUM(bytes), 0) FROM entries") : NULL;
        if (s && sqlite3_step(s) == SQLITE_ROW) {
            d->n_entries = (uint64_t)sqlite3_column_int64(s, 0);
            d->total_bytes = (uint64_t)sqlite3_column_int64(s, 1);
        }
        sqlite3_finalize(s);
    }
    reconcile(d, false);
    if (d->o.cap_bytes) evict_to(d, d->o.cap_bytes, 0, NULL);
    if (d->db) known_reload(d);
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
        if (pthread_create(&d->writer, NULL, writer_main, d) != 0) {
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
    for (int i = 0; i < d->nq; i++) pending_free(d->q[i]);
    if (d->db) sqlite3_close(d->db);
    lock_release(d); /* after the index is closed: the next writer finds it quiet */
    pthread_mutex_destroy(&d->db_mu);
    pthread_mutex_destroy(&d->mu);
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

enum bank_disk_put_result bank_disk_put(struct bank_disk *d, uint64_t fp,
                                        size_t kv_row_bytes, size_t snapshot_bytes,
                                        const int32_t *ids, int64_t pos,
                                        const void *kv_rows, const void *snapshot,
                                        enum bank_snap_kind kind)
{
    uint64_t plen;
    if (!d || !ids || pos < 1 || (unsigned)kind >= BANK_SNAP_KIND_COUNT ||
        !payload_len_of(0, pos, kv_row_bytes, snapshot_bytes, &plen) ||
        (kv_row_bytes && !kv_rows) || (snapshot_bytes && !snapshot) ||
        plen + HDR_SIZE > SIZE_MAX / 2)
        return BANK_DISK_BAD_ARGS;
    /* the stored entries of this key space at or before pos (from the mirror) */
    struct kcand *kc = NULL;
    size_t nk = 0;
    pthread_mutex_lock(&d->mu);
    d->st.puts++;
    if (d->st.disabled || d->recovering || d->closing || d->read_only) {
        d->st.skipped_off++;
        pthread_mutex_unlock(&d->mu);
        return BANK_DISK_OFF;
    }
    for (size_t i = 0; i < d->nkn; i++) {
        const struct known *k = &d->kn[i];
        if (k->fp != fp || k->pos > pos || k->row != kv_row_bytes || k->snap != snapshot_bytes) continue;
        if (!kc) kc = hs_malloc((d->nkn - i) * sizeof *kc);
        kc[nk].pos = k->pos;
        memcpy(kc[nk].key, k->key, 32);
        nk++;
    }
    pthread_mutex_unlock(&d->mu);

    /* hash outside the lock: the deepest stored prefix of ids is the base; only the rows
     * past it are copied (the writer re-checks it against the index) */
    if (nk) qsort(kc, nk, sizeof *kc, kcand_cmp);
    struct prefix_hasher ph;
    ph_init(&ph, fp, ids);
    int64_t from = 0, at = -1;
    uint8_t base[32] = {0}, k[32], key[32];
    for (size_t i = 0; i < nk; i++) {
        if (kc[i].pos != at) { ph_key(&ph, kc[i].pos, k); at = kc[i].pos; }
        if (memcmp(k, kc[i].key, 32) == 0) { from = kc[i].pos; memcpy(base, k, 32); }
    }
    ph_key(&ph, pos, key);
    ph_free(&ph);
    hs_free(kc);
    const bool touch = from == pos;
    uint64_t new_bytes = 0;
    if (!touch) {
        payload_len_of(from, pos, kv_row_bytes, snapshot_bytes, &new_bytes);
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
     * memory */
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
    if (!touch) {
        size_t nrow = (size_t)(pos - from);
        p->ids = hs_malloc((size_t)pos * 4);
        memcpy(p->ids, ids, (size_t)pos * 4);
        p->kv = hs_malloc(nrow * kv_row_bytes + 1);
        if (kv_row_bytes) memcpy(p->kv, (const uint8_t *)kv_rows + (size_t)from * kv_row_bytes, nrow * kv_row_bytes);
        p->snapb = hs_malloc(snapshot_bytes + 1);
        if (snapshot_bytes) memcpy(p->snapb, snapshot, snapshot_bytes);
        p->bytes = (uint64_t)pos * 4 + nrow * kv_row_bytes + snapshot_bytes;
    }

    pthread_mutex_lock(&d->mu);
    p->seq = ++d->seq;
    for (int i = 0; i < d->nq; i++) {
        if (memcmp(d->q[i]->key, p->key, 32) == 0) {
            pthread_mutex_unlock(&d->mu);
            pending_free(p);
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
            pending_free(p);
            return BANK_DISK_DROPPED;
        }
        struct pending *w = d->q[worst];
        memmove(d->q + worst, d->q + worst + 1, (size_t)(d->nq - worst - 1) * sizeof *d->q);
        d->nq--;
        d->q_bytes -= w->bytes;
        pending_free(w);
    }
    d->q[d->nq++] = p;
    d->q_bytes += p->bytes;
    pthread_cond_signal(&d->cv_work);
    pthread_mutex_unlock(&d->mu);
    return BANK_DISK_QUEUED;
}

void bank_disk_hit_free(struct bank_disk_hit *hit)
{
    if (!hit) return;
    hs_free(hit->buf_);
    memset(hit, 0, sizeof *hit);
}

void bank_disk_lookup(struct bank_disk *d, uint64_t fp, size_t kv_row_bytes,
                      size_t snapshot_bytes, const int32_t *ids, int64_t n, int64_t min_pos,
                      int64_t max_pos, struct bank_disk_hit *hit)
{
    memset(hit, 0, sizeof *hit);
    if (!d) return;
    count(d, &d->st.lookups, 1);
    int64_t limit = HS_MIN(n - 1, max_pos);
    if (!ids || limit < 1 || limit <= min_pos || is_disabled(d)) {
        count(d, &d->st.misses, 1);
        return;
    }

    pthread_mutex_lock(&d->db_mu);
    if (!d->db) { /* a reader of a directory with no index (yet) */
        pthread_mutex_unlock(&d->db_mu);
        count(d, &d->st.misses, 1);
        return;
    }
    /* candidate positions of this key space, ascending */
    int64_t *cand = NULL;
    size_t nc = 0, cc = 0;
    sqlite3_stmt *s = db_prep(d, "SELECT DISTINCT pos FROM entries WHERE fp = ? AND pos <= ?"
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
    struct prefix_hasher ph;
    ph_init(&ph, fp, ids);
    for (size_t i = 0; i < nc; i++) ph_key(&ph, cand[i], keys[i]);
    ph_free(&ph);
    for (size_t i = nc; i-- > 0 && !hit->pos && !is_disabled(d);) {
        char hk[65];
        hex32(keys[i], hk);
        struct row r;
        if (!row_get(d, hk, &r)) continue;
        if (r.fp != fp || r.pos != cand[i] || r.row != kv_row_bytes || r.snap != snapshot_bytes) {
            discard(d, hk, RD_IDENTITY, "lookup");
            continue;
        }
        char bad[65];
        enum rd rr = chain_restore(d, &r, ids, hit, bad);
        if (rr == RD_IO) break;
        if (rr != RD_OK) {
            discard(d, bad, rr, "lookup");
            continue;
        }
        touch_row(d, hk, true, NULL);
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
    int64_t left = d->retry_at_ms - mono_ms();
    out->retry_in_ms = d->st.disabled ? (left > 0 ? left : 0) : 0;
    pthread_mutex_unlock(&d->mu);
}

/* All rows, sorted by key, for ls and verify. Caller holds db_mu. */
static struct row *rows_all(struct bank_disk *d, size_t *n_out, const char *order)
{
    struct row *v = NULL;
    size_t n = 0, cap = 0;
    *n_out = 0;
    if (!d->db) return NULL;
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT " ROW_COLS ", created_ms, last_use_ms, hits FROM entries ORDER BY %s", order);
    sqlite3_stmt *s = db_prep(d, sql);
    while (s && sqlite3_step(s) == SQLITE_ROW) {
        if (n == cap) { cap = cap ? 2 * cap : 64; v = hs_realloc(v, cap * sizeof *v); }
        if (row_read(s, 0, &v[n])) n++; /* a malformed row is counted by reconcile, never used */
    }
    sqlite3_finalize(s);
    *n_out = n;
    return v;
}

static int row_key_cmp(const void *a, const void *b)
{
    return strcmp(((const struct row *)a)->key, ((const struct row *)b)->key);
}

static const struct row *row_find(const struct row *sorted, size_t n, const char *key)
{
    struct row probe;
    snprintf(probe.key, sizeof probe.key, "%s", key);
    return n ? bsearch(&probe, sorted, n, sizeof *sorted, row_key_cmp) : NULL;
}

int64_t bank_disk_ls(struct bank_disk *d,
                     bool (*fn)(void *ctx, const struct bank_disk_entry *e), void *ctx)
{
    int64_t n_listed = 0;
    pthread_mutex_lock(&d->db_mu);
    if (!d->db) {
        pthread_mutex_unlock(&d->db_mu);
        return 0;
    }
    size_t n = 0;
    struct row *v = rows_all(d, &n, "key");
    /* the chain of each entry, from the rows (the files are verify's business) */
    sqlite3_stmt *s = db_prep(d, "SELECT " ROW_COLS ", created_ms, last_use_ms, hits,"
                                 " (SELECT COUNT(*) FROM entries c WHERE c.parent = e.key)"
                                 " FROM entries e ORDER BY last_use_ms DESC");
    while (s && sqlite3_step(s) == SQLITE_ROW) {
        struct row r;
        if (!row_read(s, 0, &r)) continue;
        struct bank_disk_entry e;
        memset(&e, 0, sizeof e);
        snprintf(e.key, sizeof e.key, "%s", r.key);
        snprintf(e.parent, sizeof e.parent, "%s", r.parent);
        e.fp = r.fp;
        e.start = r.start;
        e.pos = r.pos;
        e.kind = r.kind >= 0 && r.kind < BANK_SNAP_KIND_COUNT ? (enum bank_snap_kind)r.kind : BANK_SNAP_END;
        e.bytes = r.bytes;
        e.created_ms = sqlite3_column_int64(s, 9);
        e.last_use_ms = sqlite3_column_int64(s, 10);
        e.hits = (uint64_t)sqlite3_column_int64(s, 11);
        e.children = sqlite3_column_int64(s, 12);
        e.chain_bytes = r.bytes;
        e.chain_blobs = 1;
        const struct row *c = &r;
        for (int64_t guard = 0; c->start > 0 && guard < r.pos; guard++) {
            const struct row *par = row_find(v, n, c->parent);
            if (!par || par->pos != c->start) { e.chain_broken = true; break; }
            e.chain_bytes += par->bytes;
            e.chain_blobs++;
            c = par;
        }
        n_listed++;
        if (fn && !fn(ctx, &e)) break;
    }
    sqlite3_finalize(s);
    hs_free(v);
    pthread_mutex_unlock(&d->db_mu);
    return n_listed;
}

static int row_pos_cmp(const void *a, const void *b)
{
    const struct row *x = a, *y = b;
    return x->pos < y->pos ? -1 : x->pos > y->pos ? 1 : strcmp(x->key, y->key);
}

/* An entry that is "missing" only because its parent was found bad in this verify (it
 * goes with its parent's subtree, without a log line of its own). */
static bool par_bad_missing(const struct row *byk, size_t n, const uint8_t *state, const struct row *r)
{
    const struct row *par = r->start > 0 ? row_find(byk, n, r->parent) : NULL;
    return par && state[par - byk] == 2;
}

int bank_disk_verify(struct bank_disk *d, struct bank_disk_verify_result *out,
                     struct hs_err *err)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&d->db_mu);
    reconcile(d, true); /* foreign things now, and the rows that cannot be paths */
    size_t n = 0;
    struct row *byk = rows_all(d, &n, "key");
    /* parents come before children in position order (a parent ends where a child starts) */
    struct row *byp = n ? hs_malloc(n * sizeof *byp) : NULL;
    if (n) memcpy(byp, byk, n * sizeof *byp);
    if (n) qsort(byp, n, sizeof *byp, row_pos_cmp);
    /* per entry (index in byk): 1 good, 2 bad; and the SHA-256 state after its ids */
    uint8_t *state = n ? hs_calloc(n, 1) : NULL;
    EVP_MD_CTX **ctx = n ? hs_calloc(n, sizeof *ctx) : NULL;
    bool crypto_failed = false;
    for (size_t j = 0; j < n && !crypto_failed && !is_disabled(d); j++) {
        const struct row *r = &byp[j];
        size_t i = (size_t)(row_find(byk, n, r->key) - byk);
        enum rd rr = RD_OK;
        EVP_MD_CTX *c = EVP_MD_CTX_new();
        struct hdr exp = {0};
        exp.fp = r->fp;
        exp.start = (uint64_t)r->start;
        exp.pos = (uint64_t)r->pos;
        exp.row = r->row;
        exp.snap = r->snap;
        if (!c) {
            crypto_failed = true;
        } else if (r->start < 0 || r->pos <= r->start || !unhex32(r->key, exp.key) ||
            !unhex32(r->parent, exp.parent) || (r->start == 0) != (r->parent[0] == 0)) {
            rr = RD_HEADER;
        } else if (r->start == 0) {
            uint8_t f[8];
            put_u64(f, r->fp);
            crypto_failed = !EVP_DigestInit_ex(c, EVP_sha256(), NULL) || !EVP_DigestUpdate(c, f, 8);
        } else {
            const struct row *par = row_find(byk, n, r->parent);
            size_t pi = par ? (size_t)(par - byk) : 0;
            if (!par || state[pi] != 1 || par->pos != r->start || par->fp != r->fp ||
                par->row != r->row || par->snap != r->snap)
                rr = RD_MISSING; /* it hangs below a bad or missing entry */
            else
                crypto_failed = !EVP_MD_CTX_copy_ex(c, ctx[pi]);
        }
        uint64_t plen = 0;
        if (rr == RD_OK && !payload_len_of(r->start, r->pos, r->row, r->snap, &plen)) rr = RD_HEADER;
        if (rr == RD_OK) {
            size_t nrow = (size_t)(r->pos - r->start);
            int32_t *ids = hs_malloc(nrow * 4);
            uint8_t *kv = hs_malloc(nrow * r->row + 1), *sn = hs_malloc(r->snap + 1);
            rr = blob_read(d, r->key, &exp, ids, kv, sn, NULL, NULL);
            /* the key is the hash of the whole prefix: the parent's state plus these ids */
            uint8_t k[32];
            unsigned len = 32;
            EVP_MD_CTX *t = EVP_MD_CTX_new();
            if (rr == RD_OK && (!t || !EVP_DigestUpdate(c, ids, nrow * 4) || !EVP_MD_CTX_copy_ex(t, c) ||
                                !EVP_DigestFinal_ex(t, k, &len)))
                crypto_failed = true;
            else if (rr == RD_OK && memcmp(k, exp.key, 32) != 0)
                rr = RD_TOKENS;
            EVP_MD_CTX_free(t);
            hs_free(ids);
            hs_free(kv);
            hs_free(sn);
        }
        if (crypto_failed) { EVP_MD_CTX_free(c); break; }
        if (rr == RD_IO) { EVP_MD_CTX_free(c); break; }
        out->checked++;
        if (rr == RD_OK) {
            state[i] = 1;
            ctx[i] = c;
            out->good++;
            continue;
        }
        EVP_MD_CTX_free(c);
        state[i] = 2;
        out->bad++;
        uint64_t rows_before = d->n_entries, bytes_before = d->total_bytes;
        if (rr != RD_MISSING || !par_bad_missing(byk, n, state, r)) discard(d, r->key, rr, "verify");
        else subtree_delete(d, r->key);
        out->removed += rows_before - d->n_entries;
        out->removed_bytes += bytes_before - d->total_bytes;
    }
    for (size_t i = 0; i < n; i++) EVP_MD_CTX_free(ctx ? ctx[i] : NULL);
    hs_free(ctx);
    hs_free(state);
    hs_free(byp);
    hs_free(byk);
    pthread_mutex_lock(&d->mu);
    out->bad_rows = d->st.bad_rows;
    out->foreign = d->st.foreign;
    out->read_only = d->read_only;
    pthread_mutex_unlock(&d->mu);
    pthread_mutex_unlock(&d->db_mu);
    if (is_disabled(d))
        return hs_err_set(err, HS_ERR_IO, "%s: %s", d->dir, d->st.disabled_reason);
    if (crypto_failed)
        return hs_err_set(err, HS_ERR_IO, "%s: verify: SHA-256 (libcrypto) failed", d->dir);
    return HS_OK;
}

uint64_t bank_disk_gc(struct bank_disk *d, uint64_t target_bytes)
{
    pthread_mutex_lock(&d->db_mu);
    if (d->read_only) { /* only the writer deletes (invariant 8) */
        pthread_mutex_unlock(&d->db_mu);
        return 0;
    }
    uint64_t before = d->total_bytes;
    reconcile(d, false);
    evict_to(d, target_bytes, 0, NULL);
    known_reload(d);
    uint64_t after = d->total_bytes;
    pthread_mutex_unlock(&d->db_mu);
    return before > after ? before - after : 0;
}
