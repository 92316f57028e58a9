/* tree.c — the bank's radix tree over token ids: key spaces, insert (with edge splits),
 * lookup, pinned copy-out, and the accounting every other file relies on. The design
 * note and invariants are in bank.h. */
#include "bank/bank_int.h"

#include <string.h>

/* ---- options, names ----------------------------------------------------------------- */

void bank_opts_default(struct bank_opts *o)
{
    memset(o, 0, sizeof *o);
    o->ram_budget = 0;
    o->snap_cap = BANK_DEFAULT_SNAP_CAP;
    o->min_head = BANK_DEFAULT_MIN_HEAD;
    o->grid = BANK_DEFAULT_GRID;
    o->head_anchor = true;
}

static const char *const kind_names[BANK_SNAP_KIND_COUNT] = {
    "head", "user", "genprompt", "diverge", "grid", "end",
};
static const char *const reason_names[BANK_REASON_COUNT] = {
    "full", "divergence", "no_snapshot_deeper", "evicted", "thinned", "no_match", "no_space",
};
static const char *const evict_names[BANK_EVICT_COUNT] = {
    "dead_kv", "lru_snapshot", "protected_snapshot", "thinned",
};

const char *bank_snap_kind_name(enum bank_snap_kind k)
{
    return (unsigned)k < BANK_SNAP_KIND_COUNT ? kind_names[k] : "?";
}
const char *bank_reason_name(enum bank_reason r)
{
    return (unsigned)r < BANK_REASON_COUNT ? reason_names[r] : "?";
}
const char *bank_evict_reason_name(enum bank_evict_reason r)
{
    return (unsigned)r < BANK_EVICT_COUNT ? evict_names[r] : "?";
}

/* ---- bank and spaces ---------------------------------------------------------------- */

struct bank *bank_init(const struct bank_opts *opts)
{
    struct bank *b = hs_calloc(1, sizeof *b);
    if (opts)
        b->opts = *opts;
    else
        bank_opts_default(&b->opts);
    if (b->opts.snap_cap < 2)
        b->opts.snap_cap = 2;
    return b;
}

static void node_free_rec(struct bank_node *nd, bool self)
{
    for (int i = 0; i < nd->n_kids; i++)
        node_free_rec(nd->kids[i], true);
    hs_free(nd->kids);
    for (struct bank_snap *s = nd->snaps, *nx; s; s = nx) {
        nx = s->next;
        hs_free(s->bytes);
        hs_free(s);
    }
    hs_free(nd->ids);
    hs_free(nd->kv);
    if (self)
        hs_free(nd);
}

void bank_free(struct bank *b)
{
    if (!b)
        return;
    for (int i = 0; i < b->n_spaces; i++) {
        node_free_rec(&b->spaces[i]->root, false);
        hs_free(b->spaces[i]);
    }
    hs_free(b->spaces);
    hs_free(b);
}

struct bank_space *bank_space_find(const struct bank *b, uint64_t fp)
{
    if (!b)
        return NULL;
    for (int i = 0; i < b->n_spaces; i++)
        if (b->spaces[i]->fp == fp)
            return b->spaces[i];
    return NULL;
}

int bank_space_add(struct bank *b, uint64_t fp, size_t kv_row_bytes, size_t snapshot_bytes,
                   struct hs_err *err)
{
    struct bank_space *sp = bank_space_find(b, fp);
    if (sp) {
        if (sp->kv_row_bytes != kv_row_bytes || sp->snap_bytes != snapshot_bytes)
            return hs_err_set(err, HS_ERR_INVALID,
                              "bank: space %016llx: redeclared with kv_row_bytes %zu, "
                              "snapshot_bytes %zu (was %zu, %zu)",
                              (unsigned long long)fp, kv_row_bytes, snapshot_bytes,
                              sp->kv_row_bytes, sp->snap_bytes);
        return HS_OK;
    }
    if (snapshot_bytes == 0)
        return hs_err_set(err, HS_ERR_INVALID, "bank: space %016llx: snapshot_bytes is 0",
                          (unsigned long long)fp);
    sp = hs_calloc(1, sizeof *sp);
    sp->fp = fp;
    sp->kv_row_bytes = kv_row_bytes;
    sp->snap_bytes = snapshot_bytes;
    b->spaces = hs_realloc(b->spaces, (size_t)(b->n_spaces + 1) * sizeof *b->spaces);
    b->spaces[b->n_spaces++] = sp;
    b->st.n_spaces++;
    return HS_OK;
}

/* ---- accounting --------------------------------------------------------------------- */

static void acct_tokens(struct bank *b, const struct bank_space *sp, int64_t d)
{
    b->st.n_tokens += (uint64_t)d;
    b->st.token_bytes += (uint64_t)d * sizeof(int32_t);
    b->st.kv_bytes += (uint64_t)d * sp->kv_row_bytes;
}

/* ---- structure helpers -------------------------------------------------------------- */

static struct bank_node *node_kid(const struct bank_node *nd, int32_t tok)
{
    for (int i = 0; i < nd->n_kids; i++)
        if (nd->kids[i]->ids[0] == tok)
            return nd->kids[i];
    return NULL;
}

static void node_add_kid(struct bank_node *nd, struct bank_node *kid)
{
    if (nd->n_kids == nd->cap_kids) {
        nd->cap_kids = nd->cap_kids ? nd->cap_kids * 2 : 2;
        nd->kids = hs_realloc(nd->kids, (size_t)nd->cap_kids * sizeof *nd->kids);
    }
    nd->kids[nd->n_kids++] = kid;
    kid->parent = nd;
}

static struct bank_node *node_new_leaf(struct bank *b, struct bank_space *sp,
                                       struct bank_node *parent, int64_t start,
                                       const int32_t *ids, int64_t len, const uint8_t *kv)
{
    struct bank_node *nd = hs_calloc(1, sizeof *nd);
    nd->start = start;
    nd->len = len;
    nd->ids = hs_malloc((size_t)len * sizeof(int32_t));
    memcpy(nd->ids, ids, (size_t)len * sizeof(int32_t));
    nd->kv = hs_malloc((size_t)len * sp->kv_row_bytes);
    if (sp->kv_row_bytes) /* a space may hold no attention KV at all */
        memcpy(nd->kv, kv, (size_t)len * sp->kv_row_bytes);
    node_add_kid(parent, nd);
    b->st.n_nodes++;
    acct_tokens(b, sp, len);
    return nd;
}

/* Split nd after k tokens (0 < k < len): a new upper node takes [start, start+k) with its
 * KV and snapshots and replaces nd under the parent; nd keeps the rest as its only
 * child. Pointers to nd and to every snapshot stay valid (pinned hits survive splits). */
static struct bank_node *node_split(struct bank *b, struct bank_space *sp,
                                    struct bank_node *nd, int64_t k)
{
    size_t row = sp->kv_row_bytes;
    struct bank_node *up = hs_calloc(1, sizeof *up);
    struct bank_node *par = nd->parent;
    up->start = nd->start;
    up->len = k;
    up->ids = hs_malloc((size_t)k * sizeof(int32_t));
    memcpy(up->ids, nd->ids, (size_t)k * sizeof(int32_t));
    up->kv = hs_malloc((size_t)k * row);
    memcpy(up->kv, nd->kv, (size_t)k * row);
    up->last_used = nd->last_used;
    /* the explanation ranges of dropped snapshots split with the stretch */
    for (int c = 0; c < 2; c++) {
        int64_t lo = nd->dropped.lo[c], hi = nd->dropped.hi[c], cut = up->start + k;
        if (hi > 0 && lo <= cut) {
            up->dropped.lo[c] = lo;
            up->dropped.hi[c] = HS_MIN(hi, cut);
        }
        if (hi > cut)
            nd->dropped.lo[c] = HS_MAX(lo, cut + 1);
        else
            nd->dropped.lo[c] = nd->dropped.hi[c] = 0;
    }

    int64_t rest = nd->len - k;
    memmove(nd->ids, nd->ids + k, (size_t)rest * sizeof(int32_t));
    memmove(nd->kv, nd->kv + (size_t)k * row, (size_t)rest * row);
    nd->ids = hs_realloc(nd->ids, (size_t)rest * sizeof(int32_t));
    nd->kv = hs_realloc(nd->kv, (size_t)rest * row);
    nd->start += k;
    nd->len = rest;

    /* snapshots at positions <= the split point move up (they are a prefix of the list) */
    struct bank_snap **tail = &up->snaps;
    while (nd->snaps && nd->snaps->pos <= up->start + k) {
        struct bank_snap *s = nd->snaps;
        nd->snaps = s->next;
        s->next = NULL;
        s->node = up;
        *tail = s;
        tail = &s->next;
    }

    for (int i = 0; i < par->n_kids; i++)
        if (par->kids[i] == nd)
            par->kids[i] = up;
    up->parent = par;
    node_add_kid(up, nd);
    b->st.n_nodes++;
    return up;
}

bool bank_snap_protected(const struct bank_snap *s)
{
    if (s->kind == BANK_SNAP_HEAD)
        return true;
    const struct bank_node *nd = s->node;
    return s->pos == bnode_end(nd) && nd->n_kids >= 2;
}

void bank_snap_unlink_free(struct bank *b, struct bank_space *sp, struct bank_snap *s,
                           unsigned why_flag)
{
    struct bank_node *nd = s->node;
    struct bank_snap **pp = &nd->snaps;
    while (*pp != s)
        pp = &(*pp)->next;
    *pp = s->next;
    int c = why_flag == BNODE_SNAP_EVICTED ? 0 : 1;
    if (nd->dropped.hi[c] == 0) {
        nd->dropped.lo[c] = nd->dropped.hi[c] = s->pos;
    } else {
        nd->dropped.lo[c] = HS_MIN(nd->dropped.lo[c], s->pos);
        nd->dropped.hi[c] = HS_MAX(nd->dropped.hi[c], s->pos);
    }
    b->st.n_snaps--;
    b->st.snaps_by_kind[s->kind]--;
    b->st.snap_bytes -= sp->snap_bytes;
    hs_free(s->bytes);
    hs_free(s);
}

/* Drop the last tokens of a leaf (no snapshot may lie beyond the new end). */
void bank_node_truncate(struct bank *b, struct bank_space *sp, struct bank_node *nd,
                        int64_t new_len)
{
    int64_t d = nd->len - new_len;
    nd->len = new_len;
    nd->ids = hs_realloc(nd->ids, (size_t)new_len * sizeof(int32_t));
    nd->kv = hs_realloc(nd->kv, (size_t)new_len * sp->kv_row_bytes);
    nd->flags |= BNODE_TAIL_TRIMMED;
    acct_tokens(b, sp, -d);
}

/* Remove a leaf that holds no snapshot. */
void bank_node_remove_leaf(struct bank *b, struct bank_space *sp, struct bank_node *nd)
{
    struct bank_node *par = nd->parent;
    for (int i = 0; i < par->n_kids; i++)
        if (par->kids[i] == nd) {
            par->kids[i] = par->kids[--par->n_kids];
            break;
        }
    par->flags |= BNODE_TAIL_TRIMMED;
    acct_tokens(b, sp, -nd->len);
    b->st.n_nodes--;
    node_free_rec(nd, true);
}

/* ---- matching ----------------------------------------------------------------------- */

int64_t bank_tree_match(const struct bank_space *sp, const int32_t *ids, int64_t n,
                        int64_t limit, struct bank_snap **best, struct bank_node **stop_node)
{
    const struct bank_node *nd = &sp->root;
    const struct bank_node *stop = nd;
    struct bank_snap *bs = NULL;
    int64_t pos = 0;
    if (limit < 0)
        limit = n;
    while (pos < n) {
        struct bank_node *kid = node_kid(nd, ids[pos]);
        if (!kid)
            break;
        int64_t k = 1, kmax = HS_MIN(kid->len, n - pos);
        while (k < kmax && kid->ids[k] == ids[pos + k])
            k++;
        for (struct bank_snap *s = kid->snaps; s && s->pos <= pos + k; s = s->next)
            if (s->pos <= limit)
                bs = s;
        pos += k;
        stop = kid;
        if (k < kid->len)
            break;
        nd = kid;
    }
    if (best)
        *best = bs;
    if (stop_node)
        *stop_node = (struct bank_node *)stop;
    return pos;
}

int64_t bank_match_len(const struct bank *b, uint64_t fp, const int32_t *ids, int64_t n)
{
    const struct bank_space *sp = bank_space_find(b, fp);
    return sp ? bank_tree_match(sp, ids, n, 0, NULL, NULL) : 0;
}

/* ---- lookup and copy-out ------------------------------------------------------------ */

/* Did eviction (or thinning) drop something that would have let this lookup go deeper?
 * Returns BNODE_SNAP_EVICTED / _THINNED / _TAIL_TRIMMED bits from sticky node flags, so
 * a positive answer means "may have"; 0 when nothing on (s, limit] was ever dropped. */
static unsigned lost_deeper(const struct bank_node *stop, int64_t s, int64_t limit, int64_t L,
                            int64_t n)
{
    unsigned f = 0;
    if ((stop->flags & BNODE_TAIL_TRIMMED) && L == bnode_end(stop) && L < n)
        f |= BNODE_TAIL_TRIMMED;
    if (s >= limit)
        return f; /* nothing deeper was possible */
    for (const struct bank_node *nd = stop; nd && nd->parent; nd = nd->parent) {
        if (bnode_end(nd) <= s)
            break;
        for (int c = 0; c < 2; c++) {
            const int64_t lo = nd->dropped.lo[c], hi = nd->dropped.hi[c];
            if (hi > s && lo <= limit)
                f |= c == 0 ? BNODE_SNAP_EVICTED : BNODE_SNAP_THINNED;
        }
    }
    return f;
}

void bank_lookup(struct bank *b, uint64_t fp, const int32_t *ids, int64_t n,
                 struct bank_hit *hit)
{
    memset(hit, 0, sizeof *hit);
    hit->n_prompt = n;
    hit->kind = BANK_SNAP_KIND_COUNT;
    b->st.lookups++;
    struct bank_space *sp = bank_space_find(b, fp);
    if (!sp || n <= 0) {
        hit->reason = BANK_REASON_NO_SPACE;
        if (sp)
            hit->reason = BANK_REASON_NO_MATCH;
        b->st.misses[hit->reason]++;
        b->st.stops[hit->reason]++;
        return;
    }
    struct bank_snap *best = NULL;
    struct bank_node *stop = NULL;
    int64_t L = bank_tree_match(sp, ids, n, n - 1, &best, &stop);
    int64_t limit = HS_MIN(L, n - 1);
    int64_t s = best ? best->pos : 0;
    hit->match_len = L;
    hit->kv_row_bytes = sp->kv_row_bytes;
    unsigned lost = lost_deeper(stop, s, limit, L, n);
    if (s > 0 && s == n - 1)
        hit->reason = BANK_REASON_FULL;
    else if (lost & (BNODE_SNAP_EVICTED | BNODE_TAIL_TRIMMED))
        hit->reason = BANK_REASON_EVICTED;
    else if (lost)
        hit->reason = BANK_REASON_THINNED;
    else if (s > 0 && s == limit)
        hit->reason = BANK_REASON_DIVERGED;
    else if (L == 0)
        hit->reason = BANK_REASON_NO_MATCH;
    else
        hit->reason = BANK_REASON_NO_SNAPSHOT;
    b->st.stops[hit->reason]++;
    if (!best) {
        b->st.misses[hit->reason]++;
        return;
    }
    b->clock++;
    best->pins++;
    best->last_used = b->clock;
    for (struct bank_node *nd = best->node; nd; nd = nd->parent)
        nd->last_used = b->clock;
    hit->restore_pos = s;
    hit->kind = best->kind;
    hit->snapshot = best->bytes;
    hit->snapshot_len = sp->snap_bytes;
    hit->snap_ = best;
    b->st.hits++;
    b->st.restored_tokens += (uint64_t)s;
}

void bank_copy_kv(const struct bank *b, const struct bank_hit *hit, void *dst)
{
    if (!hit->snap_ || !hit->kv_row_bytes)
        return;
    /* walk up from the snapshot's node; each node's rows go to their absolute offset */
    uint8_t *out = dst;
    size_t row = hit->kv_row_bytes;
    int64_t s = hit->restore_pos;
    for (const struct bank_node *nd = hit->snap_->node; nd && nd->parent; nd = nd->parent) {
        int64_t take = HS_MIN(nd->len, s - nd->start);
        if (take > 0)
            memcpy(out + (size_t)nd->start * row, nd->kv, (size_t)take * row);
    }
}

void bank_copy_snapshot(const struct bank *b, const struct bank_hit *hit, void *dst)
{
    if (hit->snap_)
        memcpy(dst, hit->snap_->bytes, hit->snapshot_len);
}

void bank_hit_release(struct bank *b, struct bank_hit *hit)
{
    if (!hit->snap_)
        return;
    hit->snap_->pins--;
    hit->snap_ = NULL;
    hit->snapshot = NULL;
}

/* ---- insert ------------------------------------------------------------------------- */

static struct bank_snap *node_snap_at(struct bank_node *nd, int64_t pos)
{
    for (struct bank_snap *s = nd->snaps; s && s->pos <= pos; s = s->next)
        if (s->pos == pos)
            return s;
    return NULL;
}

static void node_snap_insert(struct bank_node *nd, struct bank_snap *s)
{
    struct bank_snap **pp = &nd->snaps;
    while (*pp && (*pp)->pos < s->pos)
        pp = &(*pp)->next;
    s->next = *pp;
    *pp = s;
    s->node = nd;
}

int bank_insert(struct bank *b, uint64_t fp, const int32_t *ids, int64_t n, int64_t kv_from,
                const void *kv_rows, const struct bank_snap_in *snaps, int n_snaps,
                struct hs_err *err)
{
    struct bank_space *sp = bank_space_find(b, fp);
    if (!sp)
        return hs_err_set(err, HS_ERR_NOT_FOUND, "bank: insert: unknown fingerprint %016llx",
                          (unsigned long long)fp);
    if (n <= 0 || n_snaps < 0 || (n_snaps > 0 && !snaps) || !ids)
        return hs_err_set(err, HS_ERR_INVALID, "bank: insert: empty path (n %lld) or "
                          "snapshot list (%d)", (long long)n, n_snaps);
    int64_t M = bank_tree_match(sp, ids, n, 0, NULL, NULL);
    if (kv_from < 0 || kv_from > M || kv_from > n)
        return hs_err_set(err, HS_ERR_INVALID,
                          "bank: insert: KV rows from %lld, but the tree holds only [0, %lld) "
                          "of this path (n %lld)",
                          (long long)kv_from, (long long)M, (long long)n);
    if (kv_from < n && !kv_rows && sp->kv_row_bytes)
        return hs_err_set(err, HS_ERR_INVALID, "bank: insert: KV rows missing");
    for (int i = 0; i < n_snaps; i++) {
        if (snaps[i].pos < 1 || snaps[i].pos > n)
            return hs_err_set(err, HS_ERR_INVALID,
                              "bank: insert: snapshot %d at position %lld outside [1, %lld]",
                              i, (long long)snaps[i].pos, (long long)n);
        if ((unsigned)snaps[i].kind >= BANK_SNAP_KIND_COUNT || !snaps[i].bytes)
            return hs_err_set(err, HS_ERR_INVALID, "bank: insert: snapshot %d: bad kind or "
                              "no bytes", i);
    }

    b->clock++;
    b->st.inserts++;
    const uint8_t *kv = kv_rows;
    size_t row = sp->kv_row_bytes;
    struct bank_node *nd = &sp->root;
    int64_t pos = 0;
    while (pos < n) {
        struct bank_node *kid = node_kid(nd, ids[pos]);
        if (!kid) {
            /* pos == M >= kv_from here: the caller's rows cover it */
            nd = node_new_leaf(b, sp, nd, pos, ids + pos, n - pos,
                               row ? kv + (size_t)(pos - kv_from) * row : NULL);
            b->st.inserted_tokens += (uint64_t)(n - pos);
            nd->last_used = b->clock;
            pos = n;
            break;
        }
        int64_t k = 1, kmax = HS_MIN(kid->len, n - pos);
        while (k < kmax && kid->ids[k] == ids[pos + k])
            k++;
        /* split only where the path leaves the edge; a path that ends inside an
         * edge needs no node boundary (its snapshots may hang mid-stretch) */
        if (k < kid->len && pos + k < n)
            kid = node_split(b, sp, kid, k);
        kid->last_used = b->clock;
        nd = kid;
        pos += k;
    }

    /* snapshots: find each one's node by walking up from the end of the path */
    struct bank_node *top = NULL;
    for (int i = 0; i < n_snaps; i++) {
        int64_t p = snaps[i].pos;
        struct bank_node *at = nd;
        while (at->start >= p)
            at = at->parent;
        struct bank_snap *s = node_snap_at(at, p);
        if (s) {
            s->last_used = b->clock;
            if (snaps[i].kind == BANK_SNAP_HEAD && s->kind != BANK_SNAP_HEAD) {
                b->st.snaps_by_kind[s->kind]--;
                s->kind = BANK_SNAP_HEAD;
                b->st.snaps_by_kind[s->kind]++;
            }
            continue;
        }
        s = hs_calloc(1, sizeof *s);
        s->pos = p;
        s->kind = snaps[i].kind;
        s->last_used = b->clock;
        s->bytes = hs_malloc(sp->snap_bytes);
        memcpy(s->bytes, snaps[i].bytes, sp->snap_bytes);
        node_snap_insert(at, s);
        b->st.n_snaps++;
        b->st.snaps_by_kind[s->kind]++;
        b->st.snap_bytes += sp->snap_bytes;
        b->st.inserted_snaps++;
        if (!top || at->start < top->start)
            top = at;
    }
    if (top)
        bank_retain_thin_under(b, sp, top);
    if (b->opts.ram_budget)
        bank_retain_evict(b, b->opts.ram_budget);
    return HS_OK;
}

/* ---- stats -------------------------------------------------------------------------- */

void bank_stats_get(const struct bank *b, struct bank_stats *out)
{
    *out = b->st;
    out->total_bytes = out->kv_bytes + out->snap_bytes + out->token_bytes;
    out->budget = b->opts.ram_budget;
}

void bank_set_budget(struct bank *b, uint64_t ram_budget)
{
    b->opts.ram_budget = ram_budget;
    if (ram_budget)
        bank_retain_evict(b, ram_budget);
}

uint64_t bank_shrink_to(struct bank *b, uint64_t target)
{
    return bank_retain_evict(b, target);
}
