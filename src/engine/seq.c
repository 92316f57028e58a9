/*
 * seq.c — sequences: one conversation's state at a position. KV cache (f32, per attention
 * layer, kv_cap positions, grown in ENGINE_KV_BLOCK-position blocks up to n_ctx) and the
 * GDN state of every GDN layer in one buffer laid out as a snapshot (conv [K-1, C], then
 * recurrent [Hv, Dk, Dv], per GDN layer in layer order; Flash-Next's n-gram state after
 * them), so a capture is one memcpy per
 * layer and a snapshot restore one memcpy.
 *
 * KV layout. A layer's K (and V) buffer is nkv planes [kv_cap, hd], one per kv head, then,
 * with an indexer, a plane [kv_cap, kv_row_floats - nkv * hd] of the row tails
 * (seq_kv_plane). The attention of a kv head then streams one contiguous block: its rows
 * interleaved with the other heads' (1 KiB of every 2 KiB for the 0.8B geometry) read at
 * about half the memory bandwidth of one stream on the dev EPYC, prefetched or not
 * (bench/profile.md round 19). Blobs and the bank keep the logical row (kv heads in order,
 * then the tail), gathered and scattered by seq_kv_get / seq_kv_put.
 *
 * Invariants:
 *   1. Rows [0, pos) of each KV cache and the GDN buffer are the whole state; rows past pos
 *      are never read (a restore or reset does not need to clear them).
 *   2. kv_cap only grows, never past n_ctx; growing keeps rows [0, pos) of every plane.
 */
#include "engine/engine_int.h"

#include <string.h>

struct seq *seq_new(struct engine *e, int64_t n_ctx)
{
    struct seq *s = hs_calloc(1, sizeof(*s));
    s->e = e;
    s->n_ctx = HS_MAX(n_ctx, 1);
    int64_t na = HS_MAX(e->g.n_attn, 1);
    s->kc = hs_calloc((size_t)na, sizeof(float *));
    s->vc = hs_calloc((size_t)na, sizeof(float *));
    s->gdn = hs_calloc((size_t)HS_MAX(engine_snapshot_bytes(e), 1), 1);
    return s;
}

void seq_free(struct seq *s)
{
    if (!s) return;
    for (int64_t a = 0; a < s->e->g.n_attn; a++) {
        hs_free(s->kc[a]);
        hs_free(s->vc[a]);
    }
    hs_free(s->kc);
    hs_free(s->vc);
    hs_free(s->gdn);
    hs_free(s);
}

int64_t seq_pos(const struct seq *s) { return s->pos; }
int64_t seq_n_ctx(const struct seq *s) { return s->n_ctx; }
float *seq_gdn_state(struct seq *s) { return s->gdn; }

void seq_reset(struct seq *s)
{
    s->pos = 0;
    memset(s->gdn, 0, (size_t)HS_MAX(engine_snapshot_bytes(s->e), 1));
}

/* Floats of a row's tail (the indexer's, kv_row_floats - nkv * hd; 0 without one). */
static int64_t kv_tail_floats(const struct engine_geom *g) { return (int64_t)g->kv_row_floats - g->nkv * g->hd; }

/* Where part m of row p lies in a K or V buffer (floats from its start; the planes of the
 * note), and its width w: hd for a kv head (m < nkv), the tail's for m == nkv. */
static int64_t kv_part(const struct seq *s, int64_t m, int64_t p, int64_t *w)
{
    const struct engine_geom *g = &s->e->g;
    *w = m < g->nkv ? g->hd : kv_tail_floats(g);
    return m * s->kv_cap * g->hd + p * *w;
}

void seq_kv_reserve(struct seq *s, int64_t n_pos)
{
    const struct engine_geom *g = &s->e->g;
    if (n_pos <= s->kv_cap || g->n_attn == 0) return;
    int64_t cap = (n_pos + ENGINE_KV_BLOCK - 1) / ENGINE_KV_BLOCK * ENGINE_KV_BLOCK;
    /* double while small so long prompts grow in few steps, never past n_ctx */
    cap = HS_MAX(cap, HS_MIN(2 * s->kv_cap, s->n_ctx));
    cap = HS_MIN(cap, s->n_ctx);
    size_t bytes = (size_t)cap * (size_t)g->kv_row_floats * sizeof(float);
    for (int64_t a = 0; a < g->n_attn; a++) {
        float *buf[2] = { s->kc[a], s->vc[a] };
        for (int c = 0; c < 2; c++) {
            float *nb = hs_malloc(bytes);
            /* the planes move: each one's rows [0, pos) to its place at the new capacity */
            for (int64_t m = 0; m <= g->nkv && buf[c] && s->pos > 0; m++) {
                int64_t w, at = kv_part(s, m, 0, &w);
                if (w) memcpy(nb + m * cap * g->hd, buf[c] + at, (size_t)(s->pos * w) * sizeof(float));
            }
            hs_free(buf[c]);
            buf[c] = nb;
        }
        s->kc[a] = buf[0];
        s->vc[a] = buf[1];
    }
    s->kv_cap = cap;
}

void seq_kv_get(const struct seq *s, const float *buf, int64_t p, void *row)
{
    const struct engine_geom *g = &s->e->g;
    for (int64_t m = 0; m <= g->nkv; m++) {
        int64_t w, at = kv_part(s, m, p, &w);
        if (w) memcpy((uint8_t *)row + (size_t)(m * g->hd) * sizeof(float), buf + at, (size_t)w * sizeof(float));
    }
}

void seq_kv_put(const struct seq *s, float *buf, int64_t p, const void *row)
{
    const struct engine_geom *g = &s->e->g;
    for (int64_t m = 0; m <= g->nkv; m++) {
        int64_t w, at = kv_part(s, m, p, &w);
        if (w) memcpy(buf + at, (const uint8_t *)row + (size_t)(m * g->hd) * sizeof(float), (size_t)w * sizeof(float));
    }
}

/* ---- parts for the session bank --------------------------------------------------------- */

uint64_t engine_kv_row_bytes(const struct engine *e)
{
    return (uint64_t)e->g.n_attn * 2 * e->g.kv_row_floats * sizeof(float);
}

int seq_kv_read(const struct seq *s, int64_t from, int64_t to, void *dst)
{
    const struct engine_geom *g = &s->e->g;
    if (from < 0 || to < from || to > s->pos) return HS_ERR_INVALID;
    size_t rb = (size_t)g->kv_row_floats * sizeof(float);
    uint8_t *d = dst;
    for (int64_t p = from; p < to; p++) {
        for (int64_t a = 0; a < g->n_attn; a++) {
            seq_kv_get(s, s->kc[a], p, d);
            d += rb;
            seq_kv_get(s, s->vc[a], p, d);
            d += rb;
        }
    }
    return HS_OK;
}

int seq_restore_parts(struct seq *s, int64_t pos, const void *kv_rows, const void *snapshot,
                      struct hs_err *err)
{
    const struct engine_geom *g = &s->e->g;
    if (pos < 0 || pos > s->n_ctx)
        return hs_err_set(err, HS_ERR_LIMIT, "restore: position %lld outside the sequence's n_ctx %lld",
                          (long long)pos, (long long)s->n_ctx);
    if ((pos > 0 && g->n_attn > 0 && !kv_rows) || (!snapshot && engine_snapshot_bytes(s->e)))
        return hs_err_set(err, HS_ERR_INVALID, "restore: missing KV rows or snapshot");
    seq_kv_reserve(s, pos);
    size_t rb = (size_t)g->kv_row_floats * sizeof(float);
    const uint8_t *p8 = kv_rows;
    for (int64_t p = 0; p < pos && g->n_attn > 0; p++) {
        for (int64_t a = 0; a < g->n_attn; a++) {
            seq_kv_put(s, s->kc[a], p, p8);
            p8 += rb;
            seq_kv_put(s, s->vc[a], p, p8);
            p8 += rb;
        }
    }
    if (engine_snapshot_bytes(s->e)) memcpy(s->gdn, snapshot, (size_t)engine_snapshot_bytes(s->e));
    s->pos = pos;
    return HS_OK;
}

void seq_snapshot(const struct seq *s, void *buf)
{
    if (engine_snapshot_bytes(s->e)) memcpy(buf, s->gdn, (size_t)engine_snapshot_bytes(s->e));
}
