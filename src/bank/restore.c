/*
 * restore.c — the bank as a request sees it: restore the deepest state a prompt can resume
 * from, over both tiers, and store what a request computed into both. The request path
 * (server/session.c) calls these two around its prefill; they know tokens, byte sizes and
 * blobs, never an engine, so tests drive them with made-up rows.
 *
 *   bank_restore:  RAM lookup ─▶ disk lookup for a deeper point only (min_pos = RAM's)
 *                  ─▶ remote lookup for a point deeper than both (min_pos = the deeper)
 *                  ─▶ remote deepest: promote into RAM, queue it for disk sharing the
 *                     hit's buffer, no copy (the writer then offers it back to the remote
 *                     tier: already stored there)
 *                  ─▶ disk deeper: promote its path, rows and snapshot into RAM; hand out
 *                     the disk hit's buffers
 *                  ─▶ else RAM hit: copy its rows and snapshot out, release the pin
 *   bank_store:    RAM insert of the whole path (rows RAM lacks, every snapshot)
 *                  ─▶ the same snapshots queued for the disk tier (each with the rows past
 *                     the prefix the tier holds or has queued: the caller reads only rows
 *                     from bank_store_rows_from out of its sequence)
 *
 * Invariants:
 *   1. What a restore hands out is a copy (or the disk hit's own buffer): nothing the
 *      caller writes can reach the bank's memory, and no pin outlives bank_restore. A hit
 *      buffer is read-only to everyone once its lookup returns (the disk write queued
 *      from a remote hit reads it on the writer thread, holding a reference).
 *   2. The disk tier is asked only for a point deeper than RAM's, the remote tier only for
 *      one deeper than both; what they return was verified by the tier (checksums,
 *      identity, the exact token prefix). A discarded entry leaves the restore at the
 *      shallower point (or cold) and is counted in disk_discarded / remote_discarded.
 *   3. Two key spaces: `fp` for RAM (the process fingerprint), `disk_fp` for the disk and
 *      remote tiers (the persistent model identity). A disk or remote hit is promoted into
 *      RAM under fp.
 *   4. A failed promotion or insert only loses reuse: restore still answers, store reports
 *      the error for the caller to log and goes on without the disk puts.
 *   5. bank_restore_lazy leaves the promotion to bank_restored_promote, which the caller
 *      runs once it has copied the state out and answered its first token (the RAM copy of
 *      ~300 MB for a 10k-token head is then off the time to first token). Until then RAM
 *      does not hold the hit: a lookup in between finds the disk tier (once its write is
 *      done) or goes to the remote tier again; nothing else differs.
 */
#include "bank/bank.h"

#include <string.h>

/* Entries the disk tier has discarded so far (every verification failure it counts). */
static uint64_t disk_bad_count(struct bank_disk *d)
{
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    return st.bad_checksum + st.bad_header + st.bad_identity + st.bad_tokens + st.bad_size + st.missing_files;
}

/* Values the remote tier has found bad so far. */
static uint64_t remote_bad_count(struct bank_remote *rt)
{
    struct bank_remote_stats st;
    bank_remote_stats_get(rt, &st);
    return st.bad_manifest + st.bad_chunk + st.bad_blob;
}

/* Promote a verified disk hit into RAM: its path ids[0, p) with the KV rows the tree lacks
 * and the snapshot, so the next request finds it there (invariant 4). */
static void disk_promote(struct bank *b, const struct bank_keys *k, const struct bank_disk_hit *dh)
{
    struct hs_err e;
    hs_err_clear(&e);
    int64_t kv_from = bank_match_len(b, k->fp, dh->ids, dh->pos);
    struct bank_snap_in sn = { dh->pos, dh->kind, dh->snapshot };
    if (bank_insert(b, k->fp, dh->ids, dh->pos, kv_from, (const uint8_t *)dh->kv + (size_t)kv_from * k->kv_row_bytes,
                    &sn, 1, &e) != HS_OK)
        hs_log_write(HS_LOG_WARN, "session: disk hit at %lld not promoted: %s", (long long)dh->pos, e.msg);
}

static int restore(struct bank *b, struct bank_disk *d, struct bank_remote *rt, const struct bank_keys *k,
                   const int32_t *ids, int64_t n, bool promote, struct bank_restored *out, struct hs_err *err)
{
    memset(out, 0, sizeof(*out));
    out->reason = BANK_REASON_NO_SPACE;
    int rc = bank_space_add(b, k->fp, k->kv_row_bytes, k->snapshot_bytes, err);
    if (rc != HS_OK) return rc;
    struct bank_hit hit;
    bank_lookup(b, k->fp, ids, n, &hit);
    out->match_len = hit.match_len;
    out->reason = hit.reason;
    if (d) {
        uint64_t bad0 = disk_bad_count(d);
        bank_disk_lookup(d, k->disk_fp, k->kv_row_bytes, k->snapshot_bytes, ids, n, hit.restore_pos, n - 1,
                         &out->disk_);
        out->disk_discarded = (int64_t)(disk_bad_count(d) - bad0);
    }
    if (rt) {
        uint64_t bad0 = remote_bad_count(rt);
        bank_remote_lookup(rt, k->disk_fp, k->kv_row_bytes, k->snapshot_bytes, ids, n,
                           HS_MAX(hit.restore_pos, out->disk_.pos), n - 1, &out->remote_);
        out->remote_discarded = (int64_t)(remote_bad_count(rt) - bad0);
        if (out->remote_.pos > 0) {
            /* the deepest: the disk hit is not needed, the remote one goes to disk too */
            bank_disk_hit_free(&out->disk_);
            out->disk_ = out->remote_;
            memset(&out->remote_, 0, sizeof out->remote_);
            /* the write shares the hit's buffer: no copy on this thread */
            if (d) (void)bank_disk_put_hit(d, k->disk_fp, k->kv_row_bytes, k->snapshot_bytes, &out->disk_);
            out->source = BANK_SOURCE_REMOTE;
        }
    }
    const struct bank_disk_hit *dh = &out->disk_;
    if (dh->pos > hit.restore_pos) {
        bank_hit_release(b, &hit);
        if (promote) disk_promote(b, k, dh);
        else out->promote_ = true;
        out->pos = dh->pos;
        if (out->source != BANK_SOURCE_REMOTE) out->source = BANK_SOURCE_DISK;
        out->kv = dh->kv;
        out->snapshot = dh->snapshot;
        /* after a promotion RAM matches the hit's path too: L >= pos either way */
        int64_t L = HS_MAX(HS_MAX(out->match_len, dh->pos), bank_match_len(b, k->fp, ids, n));
        out->match_len = L;
        out->reason = out->pos == n - 1 ? BANK_REASON_FULL : out->pos == L ? BANK_REASON_DIVERGED : BANK_REASON_NO_SNAPSHOT;
        return HS_OK;
    }
    bank_disk_hit_free(&out->disk_);
    if (hit.restore_pos > 0) {
        out->ram_kv_ = hs_malloc((size_t)hit.restore_pos * k->kv_row_bytes);
        out->ram_snap_ = hs_malloc(HS_MAX(k->snapshot_bytes, (size_t)1));
        bank_copy_kv(b, &hit, out->ram_kv_);
        bank_copy_snapshot(b, &hit, out->ram_snap_);
        bank_hit_release(b, &hit);
        out->pos = hit.restore_pos;
        out->source = BANK_SOURCE_RAM;
        out->kv = out->ram_kv_;
        out->snapshot = out->ram_snap_;
    }
    return HS_OK;
}

int bank_restore(struct bank *b, struct bank_disk *d, struct bank_remote *rt, const struct bank_keys *k,
                 const int32_t *ids, int64_t n, struct bank_restored *out, struct hs_err *err)
{
    return restore(b, d, rt, k, ids, n, true, out, err);
}

int bank_restore_lazy(struct bank *b, struct bank_disk *d, struct bank_remote *rt, const struct bank_keys *k,
                      const int32_t *ids, int64_t n, struct bank_restored *out, struct hs_err *err)
{
    return restore(b, d, rt, k, ids, n, false, out, err);
}

void bank_restored_promote(struct bank *b, const struct bank_keys *k, struct bank_restored *r)
{
    if (!r || !r->promote_) return;
    r->promote_ = false;
    disk_promote(b, k, &r->disk_);
}

void bank_restored_free(struct bank_restored *r)
{
    if (!r) return;
    bank_disk_hit_free(&r->disk_);
    bank_disk_hit_free(&r->remote_);
    hs_free(r->ram_kv_);
    hs_free(r->ram_snap_);
    memset(r, 0, sizeof(*r));
}

int64_t bank_store_rows_from(const struct bank *b, struct bank_disk *d, const struct bank_keys *k,
                             const int32_t *path, int64_t n, const struct bank_snap_in *snaps, int n_snaps)
{
    int64_t from = bank_match_len(b, k->fp, path, n);
    if (!d || from == 0 || n_snaps == 0) return from;
    /* a disk put copies the rows past the prefix the tier holds or has queued: the
     * shallowest and the most valuable snapshot see the least of it */
    int64_t first = n;
    enum bank_snap_kind kind = BANK_SNAP_KIND_COUNT - 1;
    for (int i = 0; i < n_snaps; i++) {
        first = HS_MIN(first, snaps[i].pos);
        if (snaps[i].kind < kind) kind = snaps[i].kind;
    }
    if (first < 1) return 0;
    return HS_MIN(from, bank_disk_known_prefix(d, k->disk_fp, k->kv_row_bytes, k->snapshot_bytes, path, first, kind));
}

int bank_store(struct bank *b, struct bank_disk *d, const struct bank_keys *k, const int32_t *path, int64_t n,
               int64_t rows_from, const void *kv_rows, const struct bank_snap_in *snaps, int n_snaps,
               int *n_disk_puts, struct hs_err *err)
{
    *n_disk_puts = 0;
    int rc = bank_space_add(b, k->fp, k->kv_row_bytes, k->snapshot_bytes, err);
    if (rc != HS_OK) return rc;
    int64_t kv_from = bank_match_len(b, k->fp, path, n);
    if (kv_from < rows_from)
        return hs_err_set(err, HS_ERR_INVALID, "bank_store: rows from %lld handed, %lld needed",
                          (long long)rows_from, (long long)kv_from);
    rc = bank_insert(b, k->fp, path, n, kv_from,
                         (const uint8_t *)kv_rows + (size_t)(kv_from - rows_from) * k->kv_row_bytes, snaps, n_snaps, err);
    if (rc != HS_OK) return rc;
    /* put copies and queues; the writer thread does the I/O, and a refused put (queue full,
     * tier off, too big, its stored prefix gone since bank_store_rows_from) only loses
     * reuse later */
    for (int i = 0; d && i < n_snaps; i++) {
        enum bank_disk_put_result pr = bank_disk_put_rows(d, k->disk_fp, k->kv_row_bytes, k->snapshot_bytes, path,
                                                          snaps[i].pos, rows_from, kv_rows, snaps[i].bytes,
                                                          snaps[i].kind);
        if (pr == BANK_DISK_QUEUED || pr == BANK_DISK_DUPLICATE) (*n_disk_puts)++;
    }
    return HS_OK;
}

const char *bank_source_name(enum bank_source s)
{
    static const char *const names[BANK_SOURCE_COUNT] = { "none", "ram", "disk", "remote" };
    return (unsigned)s < BANK_SOURCE_COUNT ? names[s] : "none";
}
