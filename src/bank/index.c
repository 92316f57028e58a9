/*
 * index.c — the disk tier's SQLite index: one row per entry, the in-memory mirror of it
 * that bank_disk_put consults without touching SQLite, subtree deletion and LRU eviction
 * of leaves. disk.c's note states the tier's invariants; the ones kept here:
 *   1. Rows are deleted before their files, a subtree in one savepoint (disk.c inv. 2, 3).
 *   2. Only leaves are evicted, never a key pinned by a queued or in-flight write (inv. 3).
 *   3. total_bytes and n_entries follow every insert and delete made here (inv. 5).
 *   4. A key or parent that is not 64 lower-case hex digits is never used as a path; such
 *      rows are deleted by rowid and counted (inv. 10).
 *   5. A reader's index is opened read-only and never created, converted or changed.
 * Locks: every function here runs with db_mu held; the mirror is guarded by mu.
 *
 * Schema:
 *   meta(k TEXT PRIMARY KEY, v TEXT)            -- ('format', '2')
 *   entries(key TEXT PRIMARY KEY, fp INTEGER, start INTEGER, pos INTEGER, parent TEXT
 *           ('' for a root), kind INTEGER, kv_row_bytes INTEGER, snapshot_bytes INTEGER,
 *           bytes INTEGER, created_ms INTEGER, last_use_ms INTEGER, hits INTEGER)
 *   entries_fp_pos ON entries(fp, pos); entries_parent ON entries(parent)
 * fp is stored as the signed 64-bit reinterpretation of the u64. An index whose format is
 * not '2' is emptied and its blobs removed (one warning), never read as format 2.
 *
 */
#include "bank/disk_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the mirror (under mu) ---------------------------------------------------------- */

static void index_known_add(struct bank_disk *d, uint64_t fp, int64_t pos, uint64_t row,
                            uint64_t snap, const uint8_t *key)
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

static void index_known_del(struct bank_disk *d, const uint8_t *key)
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

int index_exec(struct bank_disk *d, const char *sql)
{
    char *msg = NULL;
    int rc = sqlite3_exec(d->db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        disk_disable(d, "index: %s: %s", sql, msg ? msg : sqlite3_errstr(rc));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

sqlite3_stmt *index_prep(struct bank_disk *d, const char *sql)
{
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(d->db, sql, -1, &s, NULL) != SQLITE_OK) {
        disk_disable(d, "index: %s: %s", sql, sqlite3_errmsg(d->db));
        return NULL;
    }
    return s;
}

/* Column col of s as a key: out gets it when it is 64 lower-case hex digits (true), or ""
 * when it is empty and empty_ok (true); anything else (longer, shorter, NUL inside, other
 * characters) leaves out "" and returns false: it is never used as a path. */
bool index_col_key(sqlite3_stmt *s, int col, char out[65], bool empty_ok)
{
    const char *t = (const char *)sqlite3_column_text(s, col);
    int nb = sqlite3_column_bytes(s, col);
    out[0] = 0;
    if (t && nb == 0 && empty_ok) return true;
    if (!t || nb != 64 || !blob_key_text_ok(t)) return false;
    memcpy(out, t, 65);
    return true;
}

/* Rebuild the mirror from the index. Caller holds db_mu. */
void index_known_reload(struct bank_disk *d)
{
    pthread_mutex_lock(&d->mu);
    d->nkn = 0;
    pthread_mutex_unlock(&d->mu);
    sqlite3_stmt *s = index_prep(d, "SELECT key, fp, pos, kv_row_bytes, snapshot_bytes FROM entries");
    while (s && sqlite3_step(s) == SQLITE_ROW) {
        uint8_t k[32];
        char hk[65];
        if (!index_col_key(s, 0, hk, false) || !blob_key_unhex(hk, k)) continue;
        index_known_add(d, (uint64_t)sqlite3_column_int64(s, 1), sqlite3_column_int64(s, 2),
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
uint64_t index_subtree_delete(struct bank_disk *d, const char *hexkey)
{
    if (d->read_only) return 0; /* a reader changes nothing (invariant 8) */
    struct keybytes *v = NULL;
    size_t n = 0, cap = 0;
    sqlite3_stmt *s = index_prep(d,
        "WITH RECURSIVE sub(k) AS (SELECT ?1 UNION SELECT e.key FROM entries e JOIN sub ON e.parent = sub.k)"
        " SELECT entries.key, entries.bytes, entries.rowid FROM entries JOIN sub ON entries.key = sub.k");
    if (!s) return 0;
    sqlite3_bind_text(s, 1, hexkey, -1, SQLITE_STATIC);
    while (sqlite3_step(s) == SQLITE_ROW) {
        if (n == cap) { cap = cap ? 2 * cap : 8; v = hs_realloc(v, cap * sizeof *v); }
        index_col_key(s, 0, v[n].key, false); /* "" when malformed: the row goes, no file is touched */
        v[n].bytes = (uint64_t)sqlite3_column_int64(s, 1);
        v[n].rowid = sqlite3_column_int64(s, 2);
        n++;
    }
    sqlite3_finalize(s);
    /* the file of a row-less key is removed too (a row dropped earlier, a failed unlink) */
    bool self = false;
    for (size_t i = 0; i < n; i++) self |= strcmp(v[i].key, hexkey) == 0;
    uint64_t gone = 0;
    if (n && index_exec(d, "SAVEPOINT subtree") == 0) {
        sqlite3_stmt *del = index_prep(d, "DELETE FROM entries WHERE rowid = ?");
        bool ok = del != NULL;
        for (size_t i = 0; ok && i < n; i++) {
            sqlite3_reset(del);
            sqlite3_bind_int64(del, 1, v[i].rowid);
            ok = sqlite3_step(del) == SQLITE_DONE;
        }
        if (!ok) disk_disable(d, "index: delete %s: %s", hexkey, sqlite3_errmsg(d->db));
        sqlite3_finalize(del);
        if (ok && index_exec(d, "RELEASE subtree") == 0) {
            gone = n;
            for (size_t i = 0; i < n; i++) {
                d->total_bytes = d->total_bytes > v[i].bytes ? d->total_bytes - v[i].bytes : 0;
                if (d->n_entries) d->n_entries--;
                uint8_t k[32];
                if (blob_key_unhex(v[i].key, k)) index_known_del(d, k);
            }
        } else {
            sqlite3_exec(d->db, "ROLLBACK TO subtree; RELEASE subtree", NULL, NULL, NULL);
        }
    }
    /* files only after their rows are gone (invariant 2); a row-less key's file too */
    for (size_t i = 0; i < (gone ? n : 0) + (!self && (gone || n == 0) ? 1 : 0); i++) {
        const char *k = i < (gone ? n : 0) ? v[i].key : hexkey;
        if (disk_blob_unlink(d, k) != 0) disk_disable(d, "%s: unlink failed: %s", k, strerror(errno));
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
    if (!blob_key_is_zero(d->inflight_base)) memcpy(v[n++], d->inflight_base, 32);
    for (int i = 0; i < d->nq; i++)
        if (d->q[i]->from > 0) memcpy(v[n++], d->q[i]->base, 32);
    if (also && !blob_key_is_zero(also)) memcpy(v[n++], also, 32);
    pthread_mutex_unlock(&d->mu);
    *n_out = n;
    return v;
}

/* Evict least recently used leaves until total + incoming <= limit (invariant 3, 5);
 * `protect` (may be NULL) is pinned too. Caller holds db_mu. */
void index_evict_to(struct bank_disk *d, uint64_t limit, uint64_t incoming, const uint8_t *protect)
{
    if (d->read_only || d->total_bytes + incoming <= limit) return;
    size_t npin;
    uint8_t (*pins)[32] = pins_get(d, protect, &npin);
    while (d->total_bytes + incoming > limit && d->n_entries > 0 && !disk_is_disabled(d)) {
        sqlite3_stmt *s = index_prep(d, "SELECT key, bytes FROM entries e WHERE NOT EXISTS"
                                     " (SELECT 1 FROM entries c WHERE c.parent = e.key)"
                                     " ORDER BY last_use_ms ASC, pos DESC LIMIT 64");
        if (!s) break;
        char key[65] = "";
        uint64_t bytes = 0;
        while (!key[0] && sqlite3_step(s) == SQLITE_ROW) {
            char k[65];
            uint8_t kb[32];
            if (!index_col_key(s, 0, k, false) || !blob_key_unhex(k, kb)) continue;
            bool pinned = false;
            for (size_t i = 0; i < npin && !pinned; i++) pinned = memcmp(pins[i], kb, 32) == 0;
            if (pinned) continue;
            snprintf(key, sizeof key, "%s", k);
            bytes = (uint64_t)sqlite3_column_int64(s, 1);
        }
        sqlite3_finalize(s);
        if (!key[0]) break; /* everything left is needed or pinned */
        if (index_subtree_delete(d, key) == 0) break; /* the delete failed: the tier is off */
        disk_count(d, &d->st.evicted, 1);
        disk_count(d, &d->st.evicted_bytes, bytes);
    }
    hs_free(pins);
}

/* false when the row's key or parent is malformed (invariant 10): skip such a row */
bool index_row_read(sqlite3_stmt *s, int col0, struct disk_row *r)
{
    bool ok = index_col_key(s, col0, r->key, false);
    ok &= index_col_key(s, col0 + 1, r->parent, true);
    r->fp = (uint64_t)sqlite3_column_int64(s, col0 + 2);
    r->start = sqlite3_column_int64(s, col0 + 3);
    r->pos = sqlite3_column_int64(s, col0 + 4);
    r->kind = sqlite3_column_int(s, col0 + 5);
    r->row = (uint64_t)sqlite3_column_int64(s, col0 + 6);
    r->snap = (uint64_t)sqlite3_column_int64(s, col0 + 7);
    r->bytes = (uint64_t)sqlite3_column_int64(s, col0 + 8);
    return ok;
}

/* The row of hexkey; false when there is none. Caller holds db_mu. */
bool index_row_get(struct bank_disk *d, const char *hexkey, struct disk_row *r)
{
    sqlite3_stmt *s = index_prep(d, "SELECT " ROW_COLS " FROM entries WHERE key = ?");
    if (!s) return false;
    sqlite3_bind_text(s, 1, hexkey, -1, SQLITE_STATIC);
    bool found = sqlite3_step(s) == SQLITE_ROW && index_row_read(s, 0, r);
    sqlite3_finalize(s);
    return found;
}

int index_insert(struct bank_disk *d, const char *hexkey, const char *parent, uint64_t fp,
                 int64_t start, int64_t pos, int kind, uint64_t row, uint64_t snap,
                 uint64_t bytes, int64_t created, int64_t used)
{
    if (d->read_only) return -1;
    sqlite3_stmt *s = index_prep(d,
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
        disk_disable(d, "index: insert %s: %s", hexkey, sqlite3_errmsg(d->db));
        return -1;
    }
    uint8_t k[32];
    if (blob_key_unhex(hexkey, k)) index_known_add(d, fp, pos, row, snap, k);
    return 0;
}

void index_touch(struct bank_disk *d, const char *hexkey, bool hit, bool *found)
{
    if (d->read_only) return;
    sqlite3_stmt *u = index_prep(d, hit ? "UPDATE entries SET last_use_ms = ?, hits = hits + 1 WHERE key = ?"
                                     : "UPDATE entries SET last_use_ms = ? WHERE key = ?");
    if (!u) return;
    sqlite3_bind_int64(u, 1, disk_next_tick(d));
    sqlite3_bind_text(u, 2, hexkey, -1, SQLITE_STATIC);
    if (sqlite3_step(u) != SQLITE_DONE) disk_disable(d, "index: touch %s: %s", hexkey, sqlite3_errmsg(d->db));
    if (found) *found = sqlite3_changes(d->db) > 0;
    sqlite3_finalize(u);
}

/* Rows with a malformed key or parent (invariant 10): a writer deletes them by rowid;
 * both count them. Returns the count; *example gets the first key (printable bytes only).
 * db_mu held. */
uint64_t index_bad_rows_pass(struct bank_disk *d, char *example, size_t cap)
{
    sqlite3_stmt *s = index_prep(d, "SELECT rowid, key, parent FROM entries");
    if (!s) return 0;
    int64_t *ids = NULL;
    size_t n = 0, c = 0;
    example[0] = 0;
    while (sqlite3_step(s) == SQLITE_ROW) {
        char k[65], pk[65];
        if (index_col_key(s, 1, k, false) && index_col_key(s, 2, pk, true)) continue;
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
        sqlite3_stmt *del = index_prep(d, "DELETE FROM entries WHERE rowid = ?");
        for (size_t i = 0; del && i < n; i++) {
            sqlite3_reset(del);
            sqlite3_bind_int64(del, 1, ids[i]);
            if (sqlite3_step(del) != SQLITE_DONE) {
                disk_disable(d, "index: delete a malformed row: %s%s", sqlite3_errmsg(d->db), "");
                break;
            }
        }
        sqlite3_finalize(del);
    }
    hs_free(ids);
    return n;
}

/* A reader's index (invariant 8): read-only, never created or converted. No index, or
 * one of another format, is an empty store (d->db NULL; stats say old_format). */
int index_open_reader(struct bank_disk *d, struct hs_err *err)
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

int index_open(struct bank_disk *d, struct hs_err *err)
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

void index_remove_files(const char *index_path)
{
    const char *sfx[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s%s", index_path, sfx[i]);
        (void)sys_io_unlink(p);
    }
}

/* All rows, sorted by key, for ls and verify. Caller holds db_mu. */
struct disk_row *index_rows_all(struct bank_disk *d, size_t *n_out, const char *order)
{
    struct disk_row *v = NULL;
    size_t n = 0, cap = 0;
    *n_out = 0;
    if (!d->db) return NULL;
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT " ROW_COLS ", created_ms, last_use_ms, hits FROM entries ORDER BY %s", order);
    sqlite3_stmt *s = index_prep(d, sql);
    while (s && sqlite3_step(s) == SQLITE_ROW) {
        if (n == cap) { cap = cap ? 2 * cap : 64; v = hs_realloc(v, cap * sizeof *v); }
        if (index_row_read(s, 0, &v[n])) n++; /* a malformed row is counted by reconcile, never used */
    }
    sqlite3_finalize(s);
    *n_out = n;
    return v;
}

static int row_key_cmp(const void *a, const void *b)
{
    return strcmp(((const struct disk_row *)a)->key, ((const struct disk_row *)b)->key);
}

const struct disk_row *index_row_find(const struct disk_row *sorted, size_t n, const char *key)
{
    struct disk_row probe;
    snprintf(probe.key, sizeof probe.key, "%s", key);
    return n ? bsearch(&probe, sorted, n, sizeof *sorted, row_key_cmp) : NULL;
}
