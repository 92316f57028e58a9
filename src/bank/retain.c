/* retain.c — what the bank keeps: per-path thinning of ordinary snapshots and the RAM
 * budget's eviction order.
 *
 * Thinning rule (bank_thin_positions), for ordinary snapshot positions p_0 < ... < p_{m-1}
 * on one root-to-leaf path and a cap C >= 2:
 *   1. m <= C: keep all.
 *   2. Keep the oldest p_0 and the newest N = p_{m-1}. Let S = C - 2 interior slots and
 *      span = N - p_0. Let b be the smallest power of two >= 1 with b * 2^(S-1) >= span
 *      (S = 0: nothing more is kept).
 *   3. Distance buckets from the newest: B_0 = (0, b], B_k = (b*2^(k-1), b*2^k] for
 *      k = 1..S-1. They partition (0, span], so every interior record is in exactly one.
 *   4. In each bucket keep the record nearest to the newest (smallest distance).
 * Properties (tests/unit/bank/test_retain.c): at most C kept; oldest and newest kept;
 * every non-empty bucket keeps exactly its newest record; on a uniform grid of step
 * g <= b, any position q in [p_0, N] has a kept record r <= q with
 * N - r <= max(2 (N - q), b) + g — the loss grows with the distance from the newest, so
 * there is no hole in the middle (MTPLX's "2048 cliff").
 *
 * Protected: a head anchor (kind HEAD) and a snapshot at a branch point (the end of a
 * node with >= 2 children). They are kept and do not count toward C. Pinned snapshots
 * count but are never removed (the cap may then be exceeded while the pin lasts).
 * Thinning runs on every leaf path under the shallowest node that received a new
 * snapshot (other paths only lose snapshots, so their counts stay <= C), and on every
 * path of a space after an eviction round removed nodes (a dissolved branch point turns
 * its snapshot ordinary).
 *
 * Eviction order under the RAM budget (bank_retain_evict), repeated until under target:
 *   1. Dead KV: the tail of a leaf beyond its deepest snapshot (a leaf without any
 *      snapshot goes whole, then its parent may become such a leaf). Least recently used
 *      leaf first. Worth nothing to a hybrid model: nothing can restore there.
 *   2. A snapshot, unpinned, minimising (protected?, last_used, leaves sharing it,
 *      -position): ordinary before anchors and branch points; least recently used; least
 *      shared; deeper first (it frees the KV under it at step 1 of the next round).
 *   3. Nothing unpinned left: stop (over budget only by pinned state).
 * KV is only ever removed at leaf tails below the deepest snapshot, so invariant 2 of
 * bank.h (a snapshot at p has rows [0, p)) holds throughout.
 */
#include "bank/bank_int.h"

#include <string.h>

void bank_thin_positions(const int64_t *pos, int n, int cap, bool *keep)
{
    if (cap < 2)
        cap = 2;
    if (n <= cap) {
        for (int i = 0; i < n; i++)
            keep[i] = true;
        return;
    }
    for (int i = 0; i < n; i++)
        keep[i] = false;
    keep[0] = keep[n - 1] = true;
    int slots = cap - 2;
    if (slots == 0)
        return;
    int64_t newest = pos[n - 1], span = newest - pos[0];
    int sh = slots - 1 > 61 ? 61 : slots - 1; /* huge caps: buckets of 1 token suffice */
    int64_t base = 1;
    while ((base << sh) < span)
        base *= 2;
    uint64_t taken = 0; /* bit k: bucket k has its record; slots <= 62 by the cap check */
    for (int i = n - 2; i >= 1; i--) {
        int64_t d = newest - pos[i];
        int k = 0;
        int64_t hi = base;
        while (hi < d) {
            hi *= 2;
            k++;
        }
        if (k < 63 && !(taken & (1ull << k))) {
            taken |= 1ull << k;
            keep[i] = true;
        }
    }
}

/* ---- thinning ----------------------------------------------------------------------- */

static void thin_path(struct bank *b, struct bank_space *sp, struct bank_node *leaf)
{
    int depth = 0;
    for (struct bank_node *nd = leaf; nd->parent; nd = nd->parent)
        depth++;
    struct bank_node **path = hs_malloc((size_t)(depth ? depth : 1) * sizeof *path);
    int i = depth;
    for (struct bank_node *nd = leaf; nd->parent; nd = nd->parent)
        path[--i] = nd;
    int m = 0, cap = 0;
    struct bank_snap **ord = NULL;
    for (i = 0; i < depth; i++)
        for (struct bank_snap *s = path[i]->snaps; s; s = s->next) {
            if (bank_snap_protected(s))
                continue;
            if (m == cap) {
                cap = cap ? 2 * cap : 16;
                ord = hs_realloc(ord, (size_t)cap * sizeof *ord);
            }
            ord[m++] = s;
        }
    if (m > b->opts.snap_cap) {
        int64_t *pos = hs_malloc((size_t)m * sizeof *pos);
        bool *keep = hs_malloc((size_t)m * sizeof *keep);
        for (i = 0; i < m; i++)
            pos[i] = ord[i]->pos;
        bank_thin_positions(pos, m, b->opts.snap_cap, keep);
        for (i = 0; i < m; i++)
            if (!keep[i] && ord[i]->pins == 0) {
                b->st.evictions[BANK_EVICT_THIN]++;
                b->st.evicted_bytes[BANK_EVICT_THIN] += sp->snap_bytes;
                bank_snap_unlink_free(b, sp, ord[i], BNODE_SNAP_THINNED);
            }
        hs_free(pos);
        hs_free(keep);
    }
    hs_free(ord);
    hs_free(path);
}

static void thin_rec(struct bank *b, struct bank_space *sp, struct bank_node *nd)
{
    if (nd->n_kids == 0) {
        if (nd->parent)
            thin_path(b, sp, nd);
        return;
    }
    for (int i = 0; i < nd->n_kids; i++)
        thin_rec(b, sp, nd->kids[i]);
}

void bank_retain_thin_under(struct bank *b, struct bank_space *sp, struct bank_node *nd)
{
    thin_rec(b, sp, nd);
}

/* ---- eviction ----------------------------------------------------------------------- */

static uint64_t total_bytes(const struct bank *b)
{
    return b->st.kv_bytes + b->st.snap_bytes + b->st.token_bytes;
}

static struct bank_snap *last_snap(const struct bank_node *nd)
{
    struct bank_snap *s = nd->snaps;
    while (s && s->next)
        s = s->next;
    return s;
}

/* The least recently used leaf with a dead tail, over the tree under nd. */
static void find_dead_leaf(struct bank_node *nd, struct bank_node **best)
{
    if (nd->n_kids == 0) {
        if (!nd->parent)
            return;
        struct bank_snap *s = last_snap(nd);
        if (s && s->pos == bnode_end(nd))
            return;
        if (!*best || nd->last_used < (*best)->last_used)
            *best = nd;
        return;
    }
    for (int i = 0; i < nd->n_kids; i++)
        find_dead_leaf(nd->kids[i], best);
}

static int64_t count_leaves(struct bank_node *nd)
{
    if (nd->n_kids == 0)
        return nd->n_leaves = 1;
    int64_t t = 0;
    for (int i = 0; i < nd->n_kids; i++)
        t += count_leaves(nd->kids[i]);
    return nd->n_leaves = t;
}

/* true when a should be evicted before b */
static bool victim_before(const struct bank_snap *a, bool pa, const struct bank_snap *c,
                          bool pc)
{
    if (pa != pc)
        return !pa;
    if (a->last_used != c->last_used)
        return a->last_used < c->last_used;
    if (a->node->n_leaves != c->node->n_leaves)
        return a->node->n_leaves < c->node->n_leaves;
    return a->pos > c->pos;
}

static void find_victim(struct bank_node *nd, struct bank_snap **best, bool *best_prot)
{
    for (struct bank_snap *s = nd->snaps; s; s = s->next) {
        if (s->pins)
            continue;
        bool p = bank_snap_protected(s);
        if (!*best || victim_before(s, p, *best, *best_prot)) {
            *best = s;
            *best_prot = p;
        }
    }
    for (int i = 0; i < nd->n_kids; i++)
        find_victim(nd->kids[i], best, best_prot);
}

uint64_t bank_retain_evict(struct bank *b, uint64_t target)
{
    uint64_t before = total_bytes(b);
    bool *removed = hs_calloc((size_t)(b->n_spaces ? b->n_spaces : 1), sizeof *removed);
    while (total_bytes(b) > target) {
        /* 1. dead KV, least recently used leaf first */
        struct bank_node *leaf = NULL;
        int leaf_sp = -1;
        for (int i = 0; i < b->n_spaces; i++) {
            struct bank_node *cand = NULL;
            find_dead_leaf(&b->spaces[i]->root, &cand);
            if (cand && (!leaf || cand->last_used < leaf->last_used)) {
                leaf = cand;
                leaf_sp = i;
            }
        }
        if (leaf) {
            struct bank_space *sp = b->spaces[leaf_sp];
            struct bank_snap *s = last_snap(leaf);
            int64_t keep = s ? s->pos - leaf->start : 0;
            uint64_t t0 = total_bytes(b);
            if (keep > 0) {
                bank_node_truncate(b, sp, leaf, keep);
            } else {
                bank_node_remove_leaf(b, sp, leaf);
                removed[leaf_sp] = true;
            }
            b->st.evictions[BANK_EVICT_DEAD_KV]++;
            b->st.evicted_bytes[BANK_EVICT_DEAD_KV] += t0 - total_bytes(b);
            continue;
        }
        /* 2. a snapshot: ordinary, LRU, least shared, deepest */
        struct bank_snap *victim = NULL;
        bool vprot = false;
        int vsp = -1;
        for (int i = 0; i < b->n_spaces; i++) {
            struct bank_snap *cand = NULL;
            bool cprot = false;
            count_leaves(&b->spaces[i]->root);
            find_victim(&b->spaces[i]->root, &cand, &cprot);
            if (cand && (!victim || victim_before(cand, cprot, victim, vprot))) {
                victim = cand;
                vprot = cprot;
                vsp = i;
            }
        }
        if (!victim)
            break; /* 3. only pinned state is left */
        enum bank_evict_reason r = vprot ? BANK_EVICT_PROTECTED : BANK_EVICT_SNAP;
        b->st.evictions[r]++;
        b->st.evicted_bytes[r] += b->spaces[vsp]->snap_bytes;
        bank_snap_unlink_free(b, b->spaces[vsp], victim, BNODE_SNAP_EVICTED);
    }
    /* a removed leaf may have dissolved a branch point: its snapshot is ordinary now */
    for (int i = 0; i < b->n_spaces; i++)
        if (removed[i])
            bank_retain_thin_under(b, b->spaces[i], &b->spaces[i]->root);
    hs_free(removed);
    return before - total_bytes(b);
}
