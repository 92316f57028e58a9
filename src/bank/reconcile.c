/*
 * reconcile.c — the disk tier's index against its files, at open, at a retry and in gc
 * (disk.c, invariant 4): files without rows are adopted when their header verifies, else
 * removed; rows without a file (or with a file of another size) are dropped with their
 * subtrees, and rows whose parent is missing or does not fit follow them.
 *
 * Invariants:
 *   1. Only the writer changes anything; a reader (or a scan for verify) only counts what
 *      is foreign and which rows are malformed (disk.c, invariant 8).
 *   2. Nothing foreign under blobs/ is followed, opened or deleted: only a real shard
 *      directory with a two-hex-digit name, holding regular files named
 *      <key>.hsb, <key>.hsb.tmp.<pid>.<seq> or a format-1 <key>.blob[.tmp.*], is ours.
 *   3. A temp file is removed only when its writer process is gone (or is this process,
 *      outside the write in flight); the entry being written is never dropped or adopted.
 *   4. A directory that cannot be listed is never read as "no files": nothing is dropped.
 */
#include "bank/disk_int.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    int fd = disk_blob_open(d, path, hexkey, &stb, &r);
    if (fd < 0) return false;
    uint8_t hb[HDR_SIZE];
    struct blob_hdr h;
    /* any self-consistent header of the right size (no identity to expect here) */
    bool ok = size >= HDR_SIZE && (uint64_t)stb.st_size == size &&
              sys_io_pread_full(fd, hb, HDR_SIZE, 0) == HDR_SIZE &&
              blob_check_header(hb, size, NULL, &h) == RD_OK;
    sys_io_close(fd);
    char hk[65], hp[65] = "";
    if (ok) {
        blob_key_hex(h.key, hk);
        ok = strcmp(hk, hexkey) == 0;
        if (h.start) blob_key_hex(h.parent, hp);
    }
    /* last use 0: adopted entries are the first to go under the cap */
    if (ok && index_insert(d, hexkey, hp, h.fp, (int64_t)h.start, (int64_t)h.pos, (int)h.kind,
                           h.row, h.snap, size, disk_next_tick(d), 0) != 0)
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
    if (len < 64 + sl || !blob_is_hex64(nm) || strncmp(nm + 64, suffix, sl) != 0) return false;
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

/* Walk blobs/, match files with rows, drop rows whose parent is gone (invariant 4).
 * A reader (or scan_only) only counts what is foreign and what rows are malformed and
 * changes nothing. db_mu held. Counts into st.open_*, st.foreign, st.bad_rows. */
void disk_reconcile(struct bank_disk *d, bool scan_only)
{
    const bool ro = scan_only || d->read_only;
    struct rowkey *rows = NULL;
    size_t n = 0, cap = 0;
    char bad_example[100];
    uint64_t bad_rows = 0;
    if (!ro) {
        index_exec(d, "BEGIN");
        bad_rows = index_bad_rows_pass(d, bad_example, sizeof bad_example);
        sqlite3_stmt *s = index_prep(d, "SELECT key, bytes FROM entries");
        while (s && sqlite3_step(s) == SQLITE_ROW) {
            if (n == cap) { cap = cap ? 2 * cap : 256; rows = hs_realloc(rows, cap * sizeof *rows); }
            index_col_key(s, 0, rows[n].key, false);
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
        bad_rows = index_bad_rows_pass(d, bad_example, sizeof bad_example);
    }

    struct cand { char *path; char key[65]; uint64_t size; } *adopt_v = NULL;
    size_t na = 0, ca = 0;
    uint64_t adopted = 0, orphans = 0, tmps = 0, dropped = 0, old = 0, foreign = 0;
    char foreign_ex[256] = "";
    DIR *top = opendir(d->blobs);
    struct dirent *e1;
    bool scan_failed = !top && errno != ENOENT;
    if (scan_failed && !ro) disk_disable(d, "%s: opendir failed: %s", d->blobs, strerror(errno));
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
            if (!ro) disk_disable(d, "%s: opendir failed: %s", sub, strerror(errno));
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
        if (!ro) index_exec(d, "COMMIT");
        return;
    }
    /* rows without a good file go first (with what hangs below them), then adoption */
    for (size_t i = 0; i < n; i++) {
        if (!rows[i].key[0] || (rows[i].seen && !rows[i].bad) || strcmp(rows[i].key, d->inflight) == 0) continue;
        dropped += index_subtree_delete(d, rows[i].key);
    }
    for (size_t i = 0; i < na; i++) {
        if (adopt(d, adopt_v[i].path, adopt_v[i].key, adopt_v[i].size)) adopted++;
        else if (sys_io_unlink(adopt_v[i].path) == 0) orphans++;
        hs_free(adopt_v[i].path);
    }
    hs_free(adopt_v);
    /* rows whose parent is missing or does not fit can never be restored */
    for (int guard = 0; guard < 1000000 && !disk_is_disabled(d); guard++) {
        sqlite3_stmt *q = index_prep(d,
            "SELECT e.key FROM entries e WHERE e.start > 0 AND NOT EXISTS (SELECT 1 FROM entries p"
            " WHERE p.key = e.parent AND p.pos = e.start AND p.fp = e.fp AND"
            " p.kv_row_bytes = e.kv_row_bytes AND p.snapshot_bytes = e.snapshot_bytes) LIMIT 1");
        if (!q) break;
        char key[65] = "";
        if (sqlite3_step(q) == SQLITE_ROW) index_col_key(q, 0, key, false);
        sqlite3_finalize(q);
        if (!key[0] || strcmp(key, d->inflight) == 0) break;
        uint64_t g = index_subtree_delete(d, key);
        if (!g) break;
        dropped += g;
    }
    index_exec(d, "COMMIT");
    hs_free(rows);
    pthread_mutex_lock(&d->mu);
    d->st.open_adopted += adopted;
    d->st.open_orphans_removed += orphans;
    d->st.open_tmp_removed += tmps;
    d->st.open_rows_dropped += dropped;
    d->st.open_old_removed += old;
    pthread_mutex_unlock(&d->mu);
}
