/*
 * tools.c — the disk tier's offline views, behind `headstart bank ls|verify|gc` (and gc
 * for tests): list entries with their chains, verify every blob fully, evict down to a
 * size. They hold db_mu for their whole run: a lookup waits, which is fine offline.
 *
 * Invariants:
 *   1. ls reads only the index (the files are verify's business); a chain whose ancestor
 *      row is missing is listed as broken, never followed past it.
 *   2. verify reads every blob with the lookup's checks (blob.c) and recomputes each key
 *      over the whole chain's ids (parents first, one SHA-256 state per entry); a bad
 *      entry is deleted with everything below it by a writer, only counted by a reader.
 *   3. gc changes nothing for a reader; for the writer it reconciles, then evicts LRU
 *      leaves (never an entry another one builds on) down to the target.
 */
#include "bank/disk_int.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    struct disk_row *v = index_rows_all(d, &n, "key");
    /* the chain of each entry, from the rows (the files are verify's business) */
    sqlite3_stmt *s = index_prep(d, "SELECT " ROW_COLS ", created_ms, last_use_ms, hits,"
                                 " (SELECT COUNT(*) FROM entries c WHERE c.parent = e.key)"
                                 " FROM entries e ORDER BY last_use_ms DESC");
    while (s && sqlite3_step(s) == SQLITE_ROW) {
        struct disk_row r;
        if (!index_row_read(s, 0, &r)) continue;
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
        const struct disk_row *c = &r;
        for (int64_t guard = 0; c->start > 0 && guard < r.pos; guard++) {
            const struct disk_row *par = index_row_find(v, n, c->parent);
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
    const struct disk_row *x = a, *y = b;
    return x->pos < y->pos ? -1 : x->pos > y->pos ? 1 : strcmp(x->key, y->key);
}

/* An entry that is "missing" only because its parent was found bad in this verify (it
 * goes with its parent's subtree, without a log line of its own). */
static bool par_bad_missing(const struct disk_row *byk, size_t n, const uint8_t *state, const struct disk_row *r)
{
    const struct disk_row *par = r->start > 0 ? index_row_find(byk, n, r->parent) : NULL;
    return par && state[par - byk] == 2;
}

int bank_disk_verify(struct bank_disk *d, struct bank_disk_verify_result *out,
                     struct hs_err *err)
{
    memset(out, 0, sizeof *out);
    pthread_mutex_lock(&d->db_mu);
    disk_reconcile(d, true); /* foreign things now, and the rows that cannot be paths */
    size_t n = 0;
    struct disk_row *byk = index_rows_all(d, &n, "key");
    /* parents come before children in position order (a parent ends where a child starts) */
    struct disk_row *byp = n ? hs_malloc(n * sizeof *byp) : NULL;
    if (n) memcpy(byp, byk, n * sizeof *byp);
    if (n) qsort(byp, n, sizeof *byp, row_pos_cmp);
    /* per entry (index in byk): 1 good, 2 bad; and the SHA-256 state after its ids */
    uint8_t *state = n ? hs_calloc(n, 1) : NULL;
    EVP_MD_CTX **ctx = n ? hs_calloc(n, sizeof *ctx) : NULL;
    bool crypto_failed = false;
    for (size_t j = 0; j < n && !crypto_failed && !disk_is_disabled(d); j++) {
        const struct disk_row *r = &byp[j];
        size_t i = (size_t)(index_row_find(byk, n, r->key) - byk);
        enum rd rr = RD_OK;
        EVP_MD_CTX *c = EVP_MD_CTX_new();
        struct blob_hdr exp = {0};
        exp.fp = r->fp;
        exp.start = (uint64_t)r->start;
        exp.pos = (uint64_t)r->pos;
        exp.row = r->row;
        exp.snap = r->snap;
        if (!c) {
            crypto_failed = true;
        } else if (r->start < 0 || r->pos <= r->start || !blob_key_unhex(r->key, exp.key) ||
            !blob_key_unhex(r->parent, exp.parent) || (r->start == 0) != (r->parent[0] == 0)) {
            rr = RD_HEADER;
        } else if (r->start == 0) {
            uint8_t f[8];
            put_u64(f, r->fp);
            crypto_failed = !EVP_DigestInit_ex(c, EVP_sha256(), NULL) || !EVP_DigestUpdate(c, f, 8);
        } else {
            const struct disk_row *par = index_row_find(byk, n, r->parent);
            size_t pi = par ? (size_t)(par - byk) : 0;
            if (!par || state[pi] != 1 || par->pos != r->start || par->fp != r->fp ||
                par->row != r->row || par->snap != r->snap)
                rr = RD_MISSING; /* it hangs below a bad or missing entry */
            else
                crypto_failed = !EVP_MD_CTX_copy_ex(c, ctx[pi]);
        }
        uint64_t plen = 0;
        if (rr == RD_OK && !blob_payload_len(r->start, r->pos, r->row, r->snap, &plen)) rr = RD_HEADER;
        if (rr == RD_OK) {
            size_t nrow = (size_t)(r->pos - r->start);
            int32_t *ids = hs_malloc(nrow * 4);
            uint8_t *kv = hs_malloc(nrow * r->row + 1), *sn = hs_malloc(r->snap + 1);
            rr = disk_blob_read(d, r->key, &exp, ids, kv, sn, NULL, NULL);
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
        if (rr != RD_MISSING || !par_bad_missing(byk, n, state, r)) disk_discard(d, r->key, rr, "verify");
        else index_subtree_delete(d, r->key);
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
    if (disk_is_disabled(d))
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
    disk_reconcile(d, false);
    index_evict_to(d, target_bytes, 0, NULL);
    index_known_reload(d);
    uint64_t after = d->total_bytes;
    pthread_mutex_unlock(&d->db_mu);
    return before > after ? before - after : 0;
}
