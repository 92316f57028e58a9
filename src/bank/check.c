/*
 * check.c — bank_check: walk every key space's tree and test the invariants bank.h
 * documents, so that tests can call it after every insert and every eviction and learn
 * which invariant broke, where. It reads only; the cost is one pass over every node,
 * snapshot and root-to-leaf path (paths: O(depth) each), fine for tests and debugging,
 * never called on the request path.
 *
 * What it checks (bank.h's numbering; "structure" are the facts the invariants rest on):
 *   structure  children point back at their parent; a child starts where its parent ends;
 *              ids and KV are allocated for every stored token; a snapshot's node is the
 *              node it hangs on; kinds are in range; pins are >= 0.
 *   1.         a node's stretch holds exactly len ids and len KV rows (allocated).
 *   2.         every snapshot lies on its node's stretch, start < p <= start + len, in
 *              ascending order without duplicates (rows [0, p) then exist by 1 and the
 *              structure).
 *   3.         children of a node start with pairwise different tokens; no node but the
 *              root has len 0; the root holds no tokens and no snapshots.
 *   5.         on each root-to-leaf path, the ordinary (unprotected) unpinned snapshots
 *              number at most snap_cap.
 *   6.         over the RAM budget only when nothing more can go: every snapshot pinned
 *              and no leaf with a tail past its deepest snapshot (dead KV).
 *   counters   the incrementally kept stats equal a recount: nodes, tokens, snapshots
 *              (by kind), KV, snapshot and token bytes, spaces.
 * Invariants 4 (pinned state is never freed) and 7 (one thread) are about time, not a
 * state: they show as use-after-free under ASan, not here.
 */
#include "bank/bank_int.h"

#include <inttypes.h>

struct check_count {
    uint64_t nodes, tokens, snaps, kv_bytes, snap_bytes;
    uint64_t by_kind[BANK_SNAP_KIND_COUNT];
};

/* Structure, invariants 1-3 and the counts, for nd and everything below it. */
static int check_node(const struct bank *b, const struct bank_space *sp,
                      const struct bank_node *nd, struct check_count *c, struct hs_err *err)
{
    const bool root = nd->parent == NULL;
    const uint64_t fp = sp->fp;
    if (root && (nd->len != 0 || nd->snaps))
        return hs_err_set(err, HS_ERR_INVALID, "bank_check: space %016" PRIx64 ": the root holds"
                          " tokens or snapshots (invariant 3)", fp);
    if (!root) {
        if (nd->len <= 0)
            return hs_err_set(err, HS_ERR_INVALID, "bank_check: space %016" PRIx64 ": node at %"
                              PRId64 " has len %" PRId64 " (invariant 3)", fp, nd->start, nd->len);
        if (nd->start != bnode_end(nd->parent))
            return hs_err_set(err, HS_ERR_INVALID, "bank_check: space %016" PRIx64 ": node at %"
                              PRId64 " does not start where its parent ends (%" PRId64 ")", fp,
                              nd->start, bnode_end(nd->parent));
        if (!nd->ids || (!nd->kv && sp->kv_row_bytes))
            return hs_err_set(err, HS_ERR_INVALID, "bank_check: space %016" PRIx64 ": node at %"
                              PRId64 " lacks its ids or KV rows (invariant 1)", fp, nd->start);
        c->nodes++;
        c->tokens += (uint64_t)nd->len;
        c->kv_bytes += (uint64_t)nd->len * sp->kv_row_bytes;
    }
    int64_t last = nd->start;
    for (const struct bank_snap *s = nd->snaps; s; s = s->next) {
        if (s->node != nd || s->pos <= last || s->pos > bnode_end(nd))
            return hs_err_set(err, HS_ERR_INVALID, "bank_check: space %016" PRIx64 ": snapshot at %"
                              PRId64 " is not in order on its stretch [%" PRId64 ", %" PRId64
                              "] (invariant 2)", fp, s->pos, nd->start, bnode_end(nd));
        if ((unsigned)s->kind >= BANK_SNAP_KIND_COUNT || s->pins < 0 || !s->bytes ||
            s->last_used > b->clock)
            return hs_err_set(err, HS_ERR_INVALID, "bank_check: space %016" PRIx64 ": snapshot at %"
                              PRId64 " has kind %d, pins %d, last use %" PRIu64 " (clock %" PRIu64 ")",
                              fp, s->pos, (int)s->kind, s->pins, s->last_used, b->clock);
        last = s->pos;
        c->snaps++;
        c->snap_bytes += sp->snap_bytes;
        c->by_kind[s->kind]++;
    }
    for (int i = 0; i < nd->n_kids; i++) {
        const struct bank_node *k = nd->kids[i];
        if (!k || k->parent != nd || k->len <= 0 || !k->ids)
            return hs_err_set(err, HS_ERR_INVALID, "bank_check: space %016" PRIx64 ": child %d of"
                              " the node at %" PRId64 " is malformed", fp, i, nd->start);
        for (int j = 0; j < i; j++)
            if (nd->kids[j]->ids[0] == k->ids[0])
                return hs_err_set(err, HS_ERR_INVALID, "bank_check: space %016" PRIx64 ": two"
                                  " children at %" PRId64 " start with token %" PRId32
                                  " (invariant 3)", fp, k->start, k->ids[0]);
        int rc = check_node(b, sp, k, c, err);
        if (rc != HS_OK)
            return rc;
    }
    return HS_OK;
}

/* Invariants 5 and 6 on every leaf under nd: *n_ord counts the ordinary unpinned
 * snapshots from the root down to nd's parent. */
static int check_paths(const struct bank *b, const struct bank_space *sp,
                       const struct bank_node *nd, int n_ord, bool over, struct hs_err *err)
{
    for (const struct bank_snap *s = nd->snaps; s; s = s->next) {
        if (!bank_snap_protected(s) && s->pins == 0)
            n_ord++;
        if (over && s->pins == 0)
            return hs_err_set(err, HS_ERR_INVALID, "bank_check: space %016" PRIx64 ": over the RAM"
                              " budget with an unpinned snapshot at %" PRId64 " (invariant 6)",
                              sp->fp, s->pos);
    }
    if (nd->n_kids == 0 && nd->parent) {
        if (n_ord > b->opts.snap_cap)
            return hs_err_set(err, HS_ERR_INVALID, "bank_check: space %016" PRIx64 ": the path to %"
                              PRId64 " carries %d ordinary unpinned snapshots, cap %d (invariant 5)",
                              sp->fp, bnode_end(nd), n_ord, b->opts.snap_cap);
        const struct bank_snap *deepest = nd->snaps;
        while (deepest && deepest->next)
            deepest = deepest->next;
        if (over && (!deepest || deepest->pos != bnode_end(nd)))
            return hs_err_set(err, HS_ERR_INVALID, "bank_check: space %016" PRIx64 ": over the RAM"
                              " budget with dead KV at the leaf ending at %" PRId64 " (invariant 6)",
                              sp->fp, bnode_end(nd));
    }
    for (int i = 0; i < nd->n_kids; i++) {
        int rc = check_paths(b, sp, nd->kids[i], n_ord, over, err);
        if (rc != HS_OK)
            return rc;
    }
    return HS_OK;
}

int bank_check(const struct bank *b, struct hs_err *err)
{
    struct check_count c = {0};
    if (b->st.n_spaces != (uint64_t)b->n_spaces)
        return hs_err_set(err, HS_ERR_INVALID, "bank_check: %d spaces, stats say %" PRIu64,
                          b->n_spaces, b->st.n_spaces);
    const uint64_t total = b->st.kv_bytes + b->st.snap_bytes + b->st.token_bytes;
    const bool over = b->opts.ram_budget && total > b->opts.ram_budget;
    for (int i = 0; i < b->n_spaces; i++) {
        const struct bank_space *sp = b->spaces[i];
        for (int j = 0; j < i; j++)
            if (b->spaces[j]->fp == sp->fp)
                return hs_err_set(err, HS_ERR_INVALID, "bank_check: space %016" PRIx64 " twice", sp->fp);
        int rc = check_node(b, sp, &sp->root, &c, err);
        if (rc == HS_OK)
            rc = check_paths(b, sp, &sp->root, 0, over, err);
        if (rc != HS_OK)
            return rc;
    }
    const struct bank_stats *st = &b->st;
    bool kinds_ok = true;
    for (int k = 0; k < BANK_SNAP_KIND_COUNT; k++)
        kinds_ok &= st->snaps_by_kind[k] == c.by_kind[k];
    if (st->n_nodes != c.nodes || st->n_tokens != c.tokens || st->n_snaps != c.snaps ||
        st->kv_bytes != c.kv_bytes || st->snap_bytes != c.snap_bytes ||
        st->token_bytes != c.tokens * sizeof(int32_t) || !kinds_ok)
        return hs_err_set(err, HS_ERR_INVALID, "bank_check: counters drifted: nodes %" PRIu64 "/%"
                          PRIu64 ", tokens %" PRIu64 "/%" PRIu64 ", snapshots %" PRIu64 "/%" PRIu64
                          ", kv bytes %" PRIu64 "/%" PRIu64 ", snapshot bytes %" PRIu64 "/%" PRIu64
                          " (kept/recounted)%s", st->n_nodes, c.nodes, st->n_tokens, c.tokens,
                          st->n_snaps, c.snaps, st->kv_bytes, c.kv_bytes, st->snap_bytes,
                          c.snap_bytes, kinds_ok ? "" : "; by kind differs");
    return HS_OK;
}
