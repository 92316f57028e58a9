/*
 * disk.c — the bank's disk tier: banked snapshots survive a restart, and nothing read back
 * from disk is ever used unless it is provably the state of the exact token prefix, model
 * and kernel variant asked for.
 *
 * Design note
 * -----------
 * One entry = one snapshot position p of one key space (fingerprint fp): the token ids
 * [0, p), the attention KV rows [0, p) and the GDN snapshot at p. It is stored as one blob
 * file (simplest correct form; shared prefixes are not yet deduplicated across entries),
 * named by its key: key = SHA-256(fp as 8 bytes LE ‖ ids[0, p) as int32 LE), so the same
 * prefix of the same model is stored once however often it is banked.
 *
 *   DIR/index.sqlite                 SQLite, WAL mode: one row per entry (schema below)
 *   DIR/blobs/<key[0:2]>/<key>.blob  header + payload
 *   DIR/blobs/..../<key>.blob.tmp.*  a write in progress (sys_wfile); removed at open
 *
 * Blob header (128 bytes, little-endian):
 *   OFFSET SIZE FIELD
 *   0      8    magic "HSBANKB1"
 *   8      4    format version (1)
 *   12     4    kind (enum bank_snap_kind)
 *   16     8    fingerprint (model identity + numerics)
 *   24     8    pos: token count p (>= 1)
 *   32     8    kv_row_bytes
 *   40     8    snapshot_bytes
 *   48     8    payload_len = 4p + p*kv_row_bytes + snapshot_bytes
 *   56     32   key (SHA-256 above; equals the file name)
 *   88     8    payload checksum: XXH3-64 of the payload
 *   96     24   zero
 *   120    8    header checksum: XXH3-64 of bytes [0, 120)
 * Payload at 128: ids (p × int32) ‖ KV rows (p × kv_row_bytes) ‖ snapshot.
 *
 * Index schema:
 *   meta(k TEXT PRIMARY KEY, v TEXT)            -- ('format', '1')
 *   entries(key TEXT PRIMARY KEY, fp INTEGER, pos INTEGER, kind INTEGER,
 *           kv_row_bytes INTEGER, snapshot_bytes INTEGER, bytes INTEGER,
 *           created_ms INTEGER, last_use_ms INTEGER, hits INTEGER)
 *   entries_fp_pos ON entries(fp, pos)
 * fp is stored as the signed 64-bit reinterpretation of the u64.
 *
 * Invariants:
 *   1. A lookup hands out bytes only after: header checksum, magic, version, fp, pos, row
 *      sizes and key equal to what was asked; file size = 128 + payload_len; payload
 *      checksum; ids[0, p) equal to the request byte for byte. Anything else is a miss for
 *      that entry, which is deleted (row and file) and counted, and the search goes on.
 *   2. A blob becomes visible only by rename of a complete, fsynced file (sys_wfile), and
 *      its index row is inserted after the rename: a crash leaves at worst a complete
 *      file without a row (adopted at the next open after its header verifies) or a temp
 *      file (removed at open).
 *   3. The index and the files are reconciled at open and by gc: files without rows are
 *      adopted when their header verifies, else removed; rows without files (or with a
 *      file of the wrong size) are dropped. Deleting index.sqlite therefore rebuilds the
 *      index from the blob headers; payloads are still verified on every read.
 *   4. Sum of rows' bytes <= cap after every write and at open (LRU by last use). The
 *      writer evicts before writing, so the cap also holds while a write is in flight.
 *   5. Writes happen only on the writer thread; put copies and never waits on disk. The
 *      queue is bounded (count, bytes); when full the least valuable pending write (the
 *      highest kind value, then the oldest) is dropped and counted. A write alone in the
 *      queue is always accepted (no per-entry limit below the cap).
 *   6. Any I/O error (or SQLite error) disables the tier for the life of this handle:
 *      puts are refused, lookups miss; stats say why. Reopening tries again.
 *   7. Locks: db_mu guards SQLite, the files and the byte totals; mu guards the queue and
 *      the counters. Order: db_mu before mu. One process per directory (not enforced).
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
#include <sys/stat.h>

#include <openssl/evp.h>
#include <sqlite3.h>
#include <xxhash.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the bank's disk format is little-endian; add byte swapping for this host"
#endif

#define HDR_SIZE 128
#define FORMAT_VERSION 1
static const char k_magic[8] = {'H', 'S', 'B', 'A', 'N', 'K', 'B', '1'};

struct pending {
    uint64_t fp;
    size_t kv_row_bytes, snapshot_bytes;
    int64_t pos;
    enum bank_snap_kind kind;
    uint8_t key[32];
    uint64_t seq;
    uint64_t bytes;   /* file size it will have */
    int32_t *ids;     /* owned copies */
    uint8_t *kv, *snap;
};

struct bank_disk {
    char *dir, *blobs, *index_path;
    struct bank_disk_opts o;
    sqlite3 *db;
    pthread_mutex_t db_mu, mu;
    pthread_cond_t cv_work, cv_idle;
    pthread_t writer;
    bool writer_started, closing;
    struct pending **q;
    int nq;
    uint64_t q_bytes, seq;
    bool busy;                /* the writer holds an item */
    char inflight[65];        /* key being written ("" none): gc never removes it */
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

/* payload_len with overflow checks; false when it does not fit */
static bool payload_len_of(int64_t pos, uint64_t row, uint64_t snap, uint64_t *out)
{
    if (pos < 1 || (uint64_t)pos > (UINT64_MAX >> 8)) return false;
    uint64_t p = (uint64_t)pos;
    if (row && p > (UINT64_MAX / 4) / row) return false;
    uint64_t kv = p * row, ids = 4 * p;
    if (kv > UINT64_MAX - ids - HDR_SIZE) return false;
    uint64_t t = kv + ids;
    if (snap > UINT64_MAX - t - HDR_SIZE) return false;
    *out = t + snap;
    return true;
}

/* key = SHA-256(fp LE ‖ ids[0, pos) as int32 LE) */
static void key_of(uint64_t fp, const int32_t *ids, int64_t pos, uint8_t out[32])
{
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    uint8_t f[8];
    put_u64(f, fp);
    unsigned len = 32;
    if (!c || !EVP_DigestInit_ex(c, EVP_sha256(), NULL) || !EVP_DigestUpdate(c, f, 8) ||
        !EVP_DigestUpdate(c, ids, (size_t)pos * 4) || !EVP_DigestFinal_ex(c, out, &len)) {
        /* cannot happen with a working libcrypto; an all-zero key never matches a file */
        memset(out, 0, 32);
    }
    EVP_MD_CTX_free(c);
}

static char *blob_path(const struct bank_disk *d, const char *hexkey)
{
    char sub[3] = {hexkey[0], hexkey[1], 0};
    char name[80];
    snprintf(name, sizeof name, "%s/%s.blob", sub, hexkey);
    return sys_path_join(d->blobs, name);
}

static int64_t next_tick(struct bank_disk *d)
{
    int64_t now = sys_time_unix_ms();
    d->tick = now > d->tick ? now : d->tick + 1; /* strictly increasing: LRU order is exact */
    return d->tick;
}

/* Disable the tier (invariant 6). Caller holds mu or nothing else racing on st. */
static void disable_locked(struct bank_disk *d, const char *fmt, const char *a, const char *b)
{
    d->st.io_errors++;
    if (d->st.disabled) return;
    d->st.disabled = true;
    snprintf(d->st.disabled_reason, sizeof d->st.disabled_reason, fmt, a, b);
    log_warn("bank disk: tier disabled: %s", d->st.disabled_reason);
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

/* Delete the row of key and its file; subtract its bytes. Caller holds db_mu. */
static void entry_delete(struct bank_disk *d, const char *hexkey, uint64_t bytes)
{
    sqlite3_stmt *s = db_prep(d, "DELETE FROM entries WHERE key = ?");
    if (s) {
        sqlite3_bind_text(s, 1, hexkey, -1, SQLITE_STATIC);
        int rc = sqlite3_step(s);
        bool gone = sqlite3_changes(d->db) > 0;
        sqlite3_finalize(s);
        if (rc != SQLITE_DONE) disable(d, "index: delete %s: %s", hexkey, sqlite3_errmsg(d->db));
        else if (gone) {
            d->total_bytes = d->total_bytes > bytes ? d->total_bytes - bytes : 0;
            if (d->n_entries) d->n_entries--;
        }
    }
    char *p = blob_path(d, hexkey);
    if (sys_io_unlink(p) != 0 && errno != ENOENT) disable(d, "%s: unlink failed: %s", p, strerror(errno));
    hs_free(p);
}

/* Evict least recently used entries until total + incoming <= limit. Caller holds db_mu. */
static void evict_to(struct bank_disk *d, uint64_t limit, uint64_t incoming)
{
    while (d->total_bytes + incoming > limit && d->n_entries > 0) {
        sqlite3_stmt *s = db_prep(d, "SELECT key, bytes FROM entries ORDER BY last_use_ms ASC LIMIT 1");
        if (!s) return;
        if (sqlite3_step(s) != SQLITE_ROW) { sqlite3_finalize(s); return; }
        char key[65];
        snprintf(key, sizeof key, "%s", (const char *)sqlite3_column_text(s, 0));
        uint64_t bytes = (uint64_t)sqlite3_column_int64(s, 1);
        sqlite3_finalize(s);
        uint64_t before = d->total_bytes;
        entry_delete(d, key, bytes);
        count(d, &d->st.evicted, 1);
        count(d, &d->st.evicted_bytes, bytes);
        if (d->total_bytes == before) return; /* the delete failed: stop, tier is off */
    }
}

static int db_insert(struct bank_disk *d, const char *hexkey, uint64_t fp, int64_t pos, int kind,
                     uint64_t row, uint64_t snap, uint64_t bytes, int64_t created, int64_t used)
{
    sqlite3_stmt *s = db_prep(d,
        "INSERT OR REPLACE INTO entries(key, fp, pos, kind, kv_row_bytes, snapshot_bytes, bytes,"
        " created_ms, last_use_ms, hits) VALUES(?,?,?,?,?,?,?,?,?,0)");
    if (!s) return -1;
    sqlite3_bind_text(s, 1, hexkey, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 2, (sqlite3_int64)fp);
    sqlite3_bind_int64(s, 3, pos);
    sqlite3_bind_int(s, 4, kind);
    sqlite3_bind_int64(s, 5, (sqlite3_int64)row);
    sqlite3_bind_int64(s, 6, (sqlite3_int64)snap);
    sqlite3_bind_int64(s, 7, (sqlite3_int64)bytes);
    sqlite3_bind_int64(s, 8, created);
    sqlite3_bind_int64(s, 9, used);
    int rc = sqlite3_step(s);
    sqlite3_finalize(s);
    if (rc != SQLITE_DONE) {
        disable(d, "index: insert %s: %s", hexkey, sqlite3_errmsg(d->db));
        return -1;
    }
    return 0;
}

/* ---- blob header -------------------------------------------------------------------- */

struct hdr {
    uint32_t version, kind;
    uint64_t fp, pos, row, snap, payload_len, payload_sum;
    uint8_t key[32];
};

static void hdr_encode(const struct hdr *h, uint8_t *b)
{
    memset(b, 0, HDR_SIZE);
    memcpy(b, k_magic, 8);
    put_u32(b + 8, h->version);
    put_u32(b + 12, h->kind);
    put_u64(b + 16, h->fp);
    put_u64(b + 24, h->pos);
    put_u64(b + 32, h->row);
    put_u64(b + 40, h->snap);
    put_u64(b + 48, h->payload_len);
    memcpy(b + 56, h->key, 32);
    put_u64(b + 88, h->payload_sum);
    put_u64(b + 120, XXH3_64bits(b, 120));
}

/* Decode and check self-consistency; false when the header cannot be trusted. */
static bool hdr_decode(const uint8_t *b, struct hdr *h)
{
    if (memcmp(b, k_magic, 8) != 0) return false;
    if (get_u64(b + 120) != XXH3_64bits(b, 120)) return false;
    h->version = get_u32(b + 8);
    h->kind = get_u32(b + 12);
    h->fp = get_u64(b + 16);
    h->pos = get_u64(b + 24);
    h->row = get_u64(b + 32);
    h->snap = get_u64(b + 40);
    h->payload_len = get_u64(b + 48);
    memcpy(h->key, b + 56, 32);
    h->payload_sum = get_u64(b + 88);
    uint64_t want;
    if (h->version != FORMAT_VERSION || h->kind >= BANK_SNAP_KIND_COUNT ||
        h->pos > (uint64_t)INT64_MAX || !payload_len_of((int64_t)h->pos, h->row, h->snap, &want) ||
        want != h->payload_len)
        return false;
    return true;
}

/* ---- reading a blob ----------------------------------------------------------------- */

enum rd {
    RD_OK = 0, RD_MISSING, RD_IO, RD_HEADER, RD_IDENTITY, RD_SIZE, RD_CHECKSUM, RD_TOKENS
};

/* Read and verify the blob of hexkey. exp: the identity it must have (fp, pos, row, snap,
 * key); ids: the request's prefix (NULL = check the key against the payload's ids
 * instead). On RD_OK *buf_out owns the payload. */
static enum rd blob_read(struct bank_disk *d, const char *hexkey, const struct hdr *exp,
                         const int32_t *ids, uint8_t **buf_out, struct hdr *h_out)
{
    *buf_out = NULL;
    char *path = blob_path(d, hexkey);
    int fd = sys_io_open(path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) {
        enum rd r = errno == ENOENT ? RD_MISSING : RD_IO;
        if (r == RD_IO) disable(d, "%s: open failed: %s", path, strerror(errno));
        hs_free(path);
        return r;
    }
    enum rd r = RD_OK;
    uint8_t hb[HDR_SIZE];
    struct hdr h;
    struct stat stb;
    uint8_t *buf = NULL;
    if (fstat(fd, &stb) != 0) { disable(d, "%s: fstat failed: %s", path, strerror(errno)); r = RD_IO; goto out; }
    if ((uint64_t)stb.st_size < HDR_SIZE) { r = RD_SIZE; goto out; }
    if (sys_io_pread_full(fd, hb, HDR_SIZE, 0) != HDR_SIZE) {
        disable(d, "%s: read failed: %s", path, strerror(errno));
        r = RD_IO;
        goto out;
    }
    if (!hdr_decode(hb, &h)) { r = RD_HEADER; goto out; }
    if (h.fp != exp->fp || memcmp(h.key, exp->key, 32) != 0 ||
        (exp->pos && (h.pos != exp->pos || h.row != exp->row || h.snap != exp->snap))) {
        r = RD_IDENTITY;
        goto out;
    }
    if ((uint64_t)stb.st_size != HDR_SIZE + h.payload_len) { r = RD_SIZE; goto out; }
    if (h.payload_len > SIZE_MAX - 1) { r = RD_SIZE; goto out; }
    buf = hs_malloc((size_t)h.payload_len);
    if (h.payload_len && sys_io_pread_full(fd, buf, (size_t)h.payload_len, HDR_SIZE) != (ssize_t)h.payload_len) {
        disable(d, "%s: read failed: %s", path, strerror(errno));
        r = RD_IO;
        goto out;
    }
    if (XXH3_64bits(buf, (size_t)h.payload_len) != h.payload_sum) { r = RD_CHECKSUM; goto out; }
    if (ids) {
        if (memcmp(buf, ids, (size_t)h.pos * 4) != 0) r = RD_TOKENS;
    } else {
        uint8_t k[32];
        key_of(h.fp, (const int32_t *)(const void *)buf, (int64_t)h.pos, k);
        if (memcmp(k, h.key, 32) != 0) r = RD_TOKENS;
    }
out:
    sys_io_close(fd); /* read-only: a failing close loses nothing */
    hs_free(path);
    if (r == RD_OK) {
        *buf_out = buf;
        if (h_out) *h_out = h;
    } else {
        hs_free(buf);
    }
    return r;
}

/* Count a failed verification (not I/O, not missing). */
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
    default: break;
    }
    pthread_mutex_unlock(&d->mu);
}

/* ---- reconcile ---------------------------------------------------------------------- */

struct rowkey {
    char key[65];
    uint64_t bytes;
    bool seen;
};

static int rowkey_cmp(const void *a, const void *b)
{
    return strcmp(((const struct rowkey *)a)->key, ((const struct rowkey *)b)->key);
}

/* Adopt a file without a row when its header verifies (invariant 3). db_mu held. */
static bool adopt(struct bank_disk *d, const char *path, const char *hexkey, uint64_t size)
{
    int fd = sys_io_open(path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return false;
    uint8_t hb[HDR_SIZE];
    struct hdr h;
    bool ok = size >= HDR_SIZE && sys_io_pread_full(fd, hb, HDR_SIZE, 0) == HDR_SIZE &&
              hdr_decode(hb, &h) && size == HDR_SIZE + h.payload_len;
    sys_io_close(fd);
    if (ok) {
        char hk[65];
        hex32(h.key, hk);
        ok = strcmp(hk, hexkey) == 0;
    }
    /* last use 0: adopted entries are the first to go under the cap */
    if (ok && db_insert(d, hexkey, h.fp, (int64_t)h.pos, (int)h.kind, h.row, h.snap, size,
                        next_tick(d), 0) != 0)
        ok = false;
    if (ok) {
        d->total_bytes += size;
        d->n_entries++;
    }
    return ok;
}

/* Walk blobs/, match files with rows (invariant 3). db_mu held. Counts into st.open_*. */
static void reconcile(struct bank_disk *d)
{
    struct rowkey *rows = NULL;
    size_t n = 0, cap = 0;
    sqlite3_stmt *s = db_prep(d, "SELECT key, bytes FROM entries");
    if (!s) return;
    while (sqlite3_step(s) == SQLITE_ROW) {
        if (n == cap) { cap = cap ? 2 * cap : 256; rows = hs_realloc(rows, cap * sizeof *rows); }
        const char *k = (const char *)sqlite3_column_text(s, 0);
        snprintf(rows[n].key, sizeof rows[n].key, "%s", k ? k : "");
        rows[n].bytes = (uint64_t)sqlite3_column_int64(s, 1);
        rows[n].seen = false;
        n++;
    }
    sqlite3_finalize(s);
    if (n) qsort(rows, n, sizeof *rows, rowkey_cmp);
    d->total_bytes = 0;
    d->n_entries = 0;
    for (size_t i = 0; i < n; i++) { d->total_bytes += rows[i].bytes; d->n_entries++; }

    uint64_t adopted = 0, orphans = 0, tmps = 0, dropped = 0;
    db_exec(d, "BEGIN");
    DIR *top = opendir(d->blobs);
    struct dirent *e1;
    while (top && (e1 = readdir(top))) {
        const char *dn = e1->d_name;
        if (strlen(dn) != 2 || !strchr("0123456789abcdef", dn[0]) ||
            !strchr("0123456789abcdef", dn[1]))
            continue;
        char *sub = sys_path_join(d->blobs, e1->d_name);
        DIR *dd = opendir(sub);
        struct dirent *e2;
        while (dd && (e2 = readdir(dd))) {
            const char *nm = e2->d_name;
            if (nm[0] == '.') continue;
            char *path = sys_path_join(sub, nm);
            struct stat stb;
            bool is_file = stat(path, &stb) == 0 && S_ISREG(stb.st_mode);
            size_t len = strlen(nm);
            if (is_file && len > 69 && is_hex64(nm) && strncmp(nm + 64, ".blob.tmp.", 10) == 0) {
                if (strncmp(nm, d->inflight, 64) != 0 && sys_io_unlink(path) == 0) tmps++;
            } else if (is_file && len == 69 && is_hex64(nm) && strcmp(nm + 64, ".blob") == 0) {
                struct rowkey probe;
                memcpy(probe.key, nm, 64);
                probe.key[64] = 0;
                struct rowkey *r = n ? bsearch(&probe, rows, n, sizeof *rows, rowkey_cmp) : NULL;
                if (r && r->bytes == (uint64_t)stb.st_size) {
                    r->seen = true;
                } else if (r) {
                    /* the row promises another size: truncated or replaced; drop both */
                    r->seen = true;
                    entry_delete(d, r->key, r->bytes);
                    dropped++;
                } else if (strcmp(probe.key, d->inflight) == 0) {
                    /* being indexed by the writer right now */
                } else if (adopt(d, path, probe.key, (uint64_t)stb.st_size)) {
                    adopted++;
                } else if (sys_io_unlink(path) == 0) {
                    orphans++;
                }
            }
            hs_free(path);
        }
        if (dd) closedir(dd);
        hs_free(sub);
    }
    if (top) closedir(top);
    for (size_t i = 0; i < n; i++) {
        if (rows[i].seen || strcmp(rows[i].key, d->inflight) == 0) continue;
        entry_delete(d, rows[i].key, rows[i].bytes);
        dropped++;
    }
    db_exec(d, "COMMIT");
    hs_free(rows);
    pthread_mutex_lock(&d->mu);
    d->st.open_adopted += adopted;
    d->st.open_orphans_removed += orphans;
    d->st.open_tmp_removed += tmps;
    d->st.open_rows_dropped += dropped;
    pthread_mutex_unlock(&d->mu);
}

/* ---- the writer --------------------------------------------------------------------- */

static void pending_free(struct pending *p)
{
    if (!p) return;
    hs_free(p->ids);
    hs_free(p->kv);
    hs_free(p->snap);
    hs_free(p);
}

static void write_one(struct bank_disk *d, struct pending *p)
{
    char hk[65];
    hex32(p->key, hk);
    if (is_disabled(d)) { count(d, &d->st.skipped_off, 1); return; }

    pthread_mutex_lock(&d->db_mu);
    /* stored already (the same prefix banked again): refresh its recency only */
    sqlite3_stmt *s = db_prep(d, "UPDATE entries SET last_use_ms = ? WHERE key = ?");
    bool have = false;
    if (s) {
        sqlite3_bind_int64(s, 1, next_tick(d));
        sqlite3_bind_text(s, 2, hk, -1, SQLITE_STATIC);
        if (sqlite3_step(s) != SQLITE_DONE) disable(d, "index: update %s: %s", hk, sqlite3_errmsg(d->db));
        have = sqlite3_changes(d->db) > 0;
        sqlite3_finalize(s);
    }
    if (have || !s || is_disabled(d)) {
        pthread_mutex_unlock(&d->db_mu);
        count(d, have ? &d->st.already_stored : &d->st.skipped_off, 1);
        return;
    }
    uint64_t free_b = sys_disk_free_bytes(d->dir);
    if (free_b && free_b < d->o.free_floor_bytes + p->bytes) {
        pthread_mutex_unlock(&d->db_mu);
        count(d, &d->st.skipped_low_disk, 1);
        return;
    }
    if (d->o.cap_bytes) evict_to(d, d->o.cap_bytes, p->bytes);
    snprintf(d->inflight, sizeof d->inflight, "%s", hk);
    pthread_mutex_unlock(&d->db_mu);

    struct hdr h = {FORMAT_VERSION, (uint32_t)p->kind, p->fp, (uint64_t)p->pos, p->kv_row_bytes,
                    p->snapshot_bytes, p->bytes - HDR_SIZE, 0, {0}};
    memcpy(h.key, p->key, 32);
    size_t ids_b = (size_t)p->pos * 4, kv_b = (size_t)p->pos * p->kv_row_bytes;
    XXH3_state_t *xs = XXH3_createState();
    XXH3_64bits_reset(xs);
    XXH3_64bits_update(xs, p->ids, ids_b);
    XXH3_64bits_update(xs, p->kv, kv_b);
    XXH3_64bits_update(xs, p->snap, p->snapshot_bytes);
    h.payload_sum = XXH3_64bits_digest(xs);
    XXH3_freeState(xs);
    uint8_t hb[HDR_SIZE];
    hdr_encode(&h, hb);

    char *path = blob_path(d, hk);
    char sub[3] = {hk[0], hk[1], 0};
    char *subdir = sys_path_join(d->blobs, sub);
    struct hs_err err;
    hs_err_clear(&err);
    bool ok = sys_mkdir_p(subdir, &err) == HS_OK;
    struct sys_wfile w;
    if (ok) ok = sys_wfile_open(&w, path, &err) == HS_OK;
    if (ok) {
        sys_wfile_pwrite(&w, hb, HDR_SIZE, 0);
        sys_wfile_pwrite(&w, p->ids, ids_b, HDR_SIZE);
        sys_wfile_pwrite(&w, p->kv, kv_b, HDR_SIZE + ids_b);
        sys_wfile_pwrite(&w, p->snap, p->snapshot_bytes, HDR_SIZE + ids_b + kv_b);
        ok = sys_wfile_commit(&w, &err) == HS_OK;
    }
    hs_free(subdir);
    pthread_mutex_lock(&d->db_mu);
    if (!ok) {
        disable(d, "write: %s%s", err.msg, "");
    } else if (db_insert(d, hk, p->fp, p->pos, (int)p->kind, p->kv_row_bytes, p->snapshot_bytes,
                         p->bytes, next_tick(d), d->tick) != 0) {
        (void)sys_io_unlink(path); /* no row: an orphan; the next open removes it if this fails */
    } else {
        d->total_bytes += p->bytes;
        d->n_entries++;
        pthread_mutex_lock(&d->mu);
        d->st.written++;
        d->st.written_bytes += p->bytes;
        pthread_mutex_unlock(&d->mu);
    }
    d->inflight[0] = 0;
    pthread_mutex_unlock(&d->db_mu);
    hs_free(path);
}

static void *writer_main(void *arg)
{
    struct bank_disk *d = arg;
    pthread_mutex_lock(&d->mu);
    for (;;) {
        while (d->nq == 0 && !d->closing) pthread_cond_wait(&d->cv_work, &d->mu);
        if (d->nq == 0 && d->closing) break;
        struct pending *p = d->q[0];
        memmove(d->q, d->q + 1, (size_t)(d->nq - 1) * sizeof *d->q);
        d->nq--;
        d->q_bytes -= p->bytes;
        d->busy = true;
        pthread_mutex_unlock(&d->mu);
        write_one(d, p);
        pending_free(p);
        pthread_mutex_lock(&d->mu);
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

static int open_db(struct bank_disk *d, struct hs_err *err)
{
    if (sqlite3_open_v2(d->index_path, &d->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                        SQLITE_OPEN_FULLMUTEX, NULL) != SQLITE_OK) {
        hs_err_set(err, HS_ERR_IO, "%s: cannot open the bank index: %s", d->index_path,
                   d->db ? sqlite3_errmsg(d->db) : "out of memory");
        return -1;
    }
    sqlite3_busy_timeout(d->db, 5000);
    const char *schema =
        "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
        "CREATE TABLE IF NOT EXISTS meta(k TEXT PRIMARY KEY, v TEXT);"
        "CREATE TABLE IF NOT EXISTS entries(key TEXT PRIMARY KEY, fp INTEGER NOT NULL,"
        " pos INTEGER NOT NULL, kind INTEGER NOT NULL, kv_row_bytes INTEGER NOT NULL,"
        " snapshot_bytes INTEGER NOT NULL, bytes INTEGER NOT NULL, created_ms INTEGER NOT NULL,"
        " last_use_ms INTEGER NOT NULL, hits INTEGER NOT NULL);"
        "CREATE INDEX IF NOT EXISTS entries_fp_pos ON entries(fp, pos);"
        "INSERT OR IGNORE INTO meta(k, v) VALUES('format', '1');";
    char *msg = NULL;
    if (sqlite3_exec(d->db, schema, NULL, NULL, &msg) != SQLITE_OK) {
        hs_err_set(err, HS_ERR_FORMAT, "%s: bank index unusable: %s", d->index_path,
                   msg ? msg : "?");
        sqlite3_free(msg);
        return -1;
    }
    /* another format: start the index over; the blobs' own headers decide what is adopted */
    sqlite3_stmt *s = NULL;
    bool same = false;
    if (sqlite3_prepare_v2(d->db, "SELECT v FROM meta WHERE k = 'format'", -1, &s, NULL) == SQLITE_OK &&
        sqlite3_step(s) == SQLITE_ROW) {
        const char *v = (const char *)sqlite3_column_text(s, 0);
        same = v && strcmp(v, "1") == 0;
    }
    sqlite3_finalize(s);
    if (!same && sqlite3_exec(d->db, "DELETE FROM entries; UPDATE meta SET v = '1' WHERE k = 'format';",
                              NULL, NULL, NULL) != SQLITE_OK) {
        hs_err_set(err, HS_ERR_FORMAT, "%s: cannot reset the bank index", d->index_path);
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
    d->dir = hs_strdup(dir);
    d->blobs = sys_path_join(dir, "blobs");
    d->index_path = sys_path_join(dir, "index.sqlite");
    pthread_mutex_init(&d->db_mu, NULL);
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv_work, NULL);
    pthread_cond_init(&d->cv_idle, NULL);
    d->q = hs_calloc((size_t)d->o.queue_len, sizeof *d->q);
    if (sys_mkdir_p(d->blobs, err) != HS_OK) goto fail;
    if (open_db(d, NULL) != 0) {
        /* an unreadable index is rebuilt from the blob headers (invariant 3) */
        log_warn("bank disk: %s unusable, rebuilding it from the blobs", d->index_path);
        sqlite3_close(d->db);
        d->db = NULL;
        remove_index_files(d->index_path);
        if (open_db(d, err) != 0) goto fail;
    }
    pthread_mutex_lock(&d->db_mu);
    sqlite3_stmt *s = db_prep(d, "SELECT COUNT(*) FROM entries");
    if (s && sqlite3_step(s) == SQLITE_ROW) d->st.open_rows = (uint64_t)sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    reconcile(d);
    if (d->o.cap_bytes) evict_to(d, d->o.cap_bytes, 0);
    pthread_mutex_unlock(&d->db_mu);
    if (d->st.disabled) {
        hs_err_set(err, HS_ERR_IO, "%s: %s", dir, d->st.disabled_reason);
        goto fail;
    }
    log_info("bank disk: %s: %" PRIu64 " entries, %" PRIu64 " bytes (index had %" PRIu64
             " rows; adopted %" PRIu64 ", orphans removed %" PRIu64 ", temp files removed %" PRIu64
             ", rows dropped %" PRIu64 ", evicted %" PRIu64 ")",
             dir, d->n_entries, d->total_bytes, d->st.open_rows, d->st.open_adopted,
             d->st.open_orphans_removed, d->st.open_tmp_removed, d->st.open_rows_dropped,
             d->st.evicted);
    if (pthread_create(&d->writer, NULL, writer_main, d) != 0) {
        hs_err_set(err, HS_ERR_IO, "%s: cannot start the bank writer thread", dir);
        goto fail;
    }
    d->writer_started = true;
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
    pthread_mutex_destroy(&d->db_mu);
    pthread_mutex_destroy(&d->mu);
    pthread_cond_destroy(&d->cv_work);
    pthread_cond_destroy(&d->cv_idle);
    hs_free(d->q);
    hs_free(d->dir);
    hs_free(d->blobs);
    hs_free(d->index_path);
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

enum bank_disk_put_result bank_disk_put(struct bank_disk *d, uint64_t fp,
                                        size_t kv_row_bytes, size_t snapshot_bytes,
                                        const int32_t *ids, int64_t pos,
                                        const void *kv_rows, const void *snapshot,
                                        enum bank_snap_kind kind)
{
    uint64_t plen;
    if (!d || !ids || pos < 1 || (unsigned)kind >= BANK_SNAP_KIND_COUNT ||
        !payload_len_of(pos, kv_row_bytes, snapshot_bytes, &plen) ||
        (kv_row_bytes && !kv_rows) || (snapshot_bytes && !snapshot) ||
        plen + HDR_SIZE > SIZE_MAX / 2)
        return BANK_DISK_BAD_ARGS;
    uint64_t bytes = plen + HDR_SIZE;
    pthread_mutex_lock(&d->mu);
    d->st.puts++;
    if (d->st.disabled || d->closing) {
        d->st.skipped_off++;
        pthread_mutex_unlock(&d->mu);
        return BANK_DISK_OFF;
    }
    if (d->o.cap_bytes && bytes > d->o.cap_bytes) {
        d->st.skipped_too_big++;
        pthread_mutex_unlock(&d->mu);
        return BANK_DISK_TOO_BIG;
    }
    pthread_mutex_unlock(&d->mu);

    /* copy and hash outside the lock: the caller's thread pays, the writer never touches
     * caller memory */
    struct pending *p = hs_calloc(1, sizeof *p);
    p->fp = fp;
    p->kv_row_bytes = kv_row_bytes;
    p->snapshot_bytes = snapshot_bytes;
    p->pos = pos;
    p->kind = kind;
    p->bytes = bytes;
    p->ids = hs_malloc((size_t)pos * 4);
    memcpy(p->ids, ids, (size_t)pos * 4);
    p->kv = hs_malloc((size_t)pos * kv_row_bytes);
    if (kv_row_bytes) memcpy(p->kv, kv_rows, (size_t)pos * kv_row_bytes);
    p->snap = hs_malloc(snapshot_bytes);
    if (snapshot_bytes) memcpy(p->snap, snapshot, snapshot_bytes);
    key_of(fp, ids, pos, p->key);

    pthread_mutex_lock(&d->mu);
    p->seq = ++d->seq;
    for (int i = 0; i < d->nq; i++) {
        if (memcmp(d->q[i]->key, p->key, 32) == 0) {
            pthread_mutex_unlock(&d->mu);
            pending_free(p);
            return BANK_DISK_DUPLICATE;
        }
    }
    /* make room: count first, then bytes; a lone write always fits (invariant 5) */
    while (d->nq > 0 && (d->nq >= d->o.queue_len ||
                         (d->o.queue_bytes && d->q_bytes + bytes > d->o.queue_bytes))) {
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
    d->q_bytes += bytes;
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
    if (nc) {
        EVP_MD_CTX *c = EVP_MD_CTX_new(), *t = EVP_MD_CTX_new();
        uint8_t f[8];
        put_u64(f, fp);
        bool ok = c && t && EVP_DigestInit_ex(c, EVP_sha256(), NULL) && EVP_DigestUpdate(c, f, 8);
        int64_t at = 0;
        for (size_t i = 0; i < nc && ok; i++) {
            unsigned len = 32;
            ok = EVP_DigestUpdate(c, ids + at, (size_t)(cand[i] - at) * 4) &&
                 EVP_MD_CTX_copy_ex(t, c) && EVP_DigestFinal_ex(t, keys[i], &len);
            at = cand[i];
        }
        if (!ok) nc = 0;
        EVP_MD_CTX_free(c);
        EVP_MD_CTX_free(t);
    }
    for (size_t i = nc; i-- > 0 && !hit->pos && !is_disabled(d);) {
        char hk[65];
        hex32(keys[i], hk);
        sqlite3_stmt *q = db_prep(d, "SELECT bytes, kind FROM entries WHERE key = ? AND fp = ?");
        if (!q) break;
        sqlite3_bind_text(q, 1, hk, -1, SQLITE_STATIC);
        sqlite3_bind_int64(q, 2, (sqlite3_int64)fp);
        bool found = sqlite3_step(q) == SQLITE_ROW;
        uint64_t bytes = found ? (uint64_t)sqlite3_column_int64(q, 0) : 0;
        sqlite3_finalize(q);
        if (!found) continue;
        struct hdr exp = {0};
        exp.fp = fp;
        exp.pos = (uint64_t)cand[i];
        exp.row = kv_row_bytes;
        exp.snap = snapshot_bytes;
        memcpy(exp.key, keys[i], 32);
        uint8_t *buf = NULL;
        struct hdr h;
        enum rd r = blob_read(d, hk, &exp, ids, &buf, &h);
        if (r == RD_IO) break;
        if (r != RD_OK) {
            count_bad(d, r);
            entry_delete(d, hk, bytes);
            continue;
        }
        hit->pos = cand[i];
        hit->kind = (enum bank_snap_kind)h.kind;
        hit->buf_ = buf;
        hit->ids = (const int32_t *)(const void *)buf;
        hit->kv = buf + (size_t)hit->pos * 4;
        hit->kv_bytes = (size_t)hit->pos * kv_row_bytes;
        hit->snapshot = buf + (size_t)hit->pos * 4 + hit->kv_bytes;
        hit->snapshot_bytes = snapshot_bytes;
        sqlite3_stmt *u = db_prep(d, "UPDATE entries SET last_use_ms = ?, hits = hits + 1 WHERE key = ?");
        if (u) {
            sqlite3_bind_int64(u, 1, next_tick(d));
            sqlite3_bind_text(u, 2, hk, -1, SQLITE_STATIC);
            if (sqlite3_step(u) != SQLITE_DONE) disable(d, "index: touch %s: %s", hk, sqlite3_errmsg(d->db));
            sqlite3_finalize(u);
        }
    }
    pthread_mutex_unlock(&d->db_mu);
    hs_free(cand);
    hs_free(keys);
    pthread_mutex_lock(&d->mu);
    if (hit->pos) { d->st.hits++; d->st.hit_tokens += (uint64_t)hit->pos; }
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
    pthread_mutex_unlock(&d->mu);
}

int64_t bank_disk_ls(struct bank_disk *d,
                     bool (*fn)(void *ctx, const struct bank_disk_entry *e), void *ctx)
{
    int64_t n = 0;
    pthread_mutex_lock(&d->db_mu);
    sqlite3_stmt *s = db_prep(d, "SELECT key, fp, pos, kind, bytes, created_ms, last_use_ms, hits"
                                 " FROM entries ORDER BY last_use_ms DESC");
    while (s && sqlite3_step(s) == SQLITE_ROW) {
        struct bank_disk_entry e;
        memset(&e, 0, sizeof e);
        const char *k = (const char *)sqlite3_column_text(s, 0);
        snprintf(e.key, sizeof e.key, "%s", k ? k : "");
        e.fp = (uint64_t)sqlite3_column_int64(s, 1);
        e.pos = sqlite3_column_int64(s, 2);
        int kind = sqlite3_column_int(s, 3);
        e.kind = kind >= 0 && kind < BANK_SNAP_KIND_COUNT ? (enum bank_snap_kind)kind : BANK_SNAP_END;
        e.bytes = (uint64_t)sqlite3_column_int64(s, 4);
        e.created_ms = sqlite3_column_int64(s, 5);
        e.last_use_ms = sqlite3_column_int64(s, 6);
        e.hits = (uint64_t)sqlite3_column_int64(s, 7);
        n++;
        if (fn && !fn(ctx, &e)) break;
    }
    sqlite3_finalize(s);
    pthread_mutex_unlock(&d->db_mu);
    return n;
}

int bank_disk_verify(struct bank_disk *d, struct bank_disk_verify_result *out,
                     struct hs_err *err)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&d->db_mu);
    struct vrow { char key[65]; uint64_t fp, bytes; } *rows = NULL;
    size_t n = 0, cap = 0;
    sqlite3_stmt *s = db_prep(d, "SELECT key, fp, bytes FROM entries");
    while (s && sqlite3_step(s) == SQLITE_ROW) {
        if (n == cap) { cap = cap ? 2 * cap : 64; rows = hs_realloc(rows, cap * sizeof *rows); }
        const char *k = (const char *)sqlite3_column_text(s, 0);
        snprintf(rows[n].key, sizeof rows[n].key, "%s", k ? k : "");
        rows[n].fp = (uint64_t)sqlite3_column_int64(s, 1);
        rows[n].bytes = (uint64_t)sqlite3_column_int64(s, 2);
        n++;
    }
    sqlite3_finalize(s);
    for (size_t i = 0; i < n && !is_disabled(d); i++) {
        struct hdr exp = {0};
        exp.fp = rows[i].fp;
        bool keyok = strlen(rows[i].key) == 64 && is_hex64(rows[i].key);
        for (int j = 0; keyok && j < 32; j++) {
            unsigned v;
            sscanf(rows[i].key + 2 * j, "%2x", &v);
            exp.key[j] = (uint8_t)v;
        }
        uint8_t *buf = NULL;
        enum rd r = keyok ? blob_read(d, rows[i].key, &exp, NULL, &buf, NULL) : RD_HEADER;
        hs_free(buf);
        if (r == RD_IO) break;
        out->checked++;
        if (r == RD_OK) { out->good++; continue; }
        count_bad(d, r);
        entry_delete(d, rows[i].key, rows[i].bytes);
        out->removed++;
        out->removed_bytes += rows[i].bytes;
    }
    hs_free(rows);
    pthread_mutex_unlock(&d->db_mu);
    if (is_disabled(d))
        return hs_err_set(err, HS_ERR_IO, "%s: %s", d->dir, d->st.disabled_reason);
    return HS_OK;
}

uint64_t bank_disk_gc(struct bank_disk *d, uint64_t target_bytes)
{
    pthread_mutex_lock(&d->db_mu);
    uint64_t before = d->total_bytes;
    reconcile(d);
    evict_to(d, target_bytes, 0);
    uint64_t after = d->total_bytes;
    pthread_mutex_unlock(&d->db_mu);
    return before > after ? before - after : 0;
}
