/* plan.c — where a prefill must capture GDN snapshots.
 *
 * Rule (bank_plan), for a prompt ids[0, n) under fingerprint fp:
 *   restore point s = the deepest banked snapshot with s <= min(L, n-1), where L is the
 *   longest common prefix with the tree (s = 0 with no bank or no space). Candidates:
 *     HEAD       head_len, when opts.head_anchor and head_len >= max(1, opts.min_head)
 *                (default 256 tokens: below that a cold recompute costs less than a
 *                snapshot is worth keeping);
 *     USER       user_start, when >= 1;
 *     GENPROMPT  genprompt_start, when >= 1;
 *     DIVERGE    L, when L > s and L < n (no snapshot sits at L: otherwise s == L). This
 *                anchors a branch point even without a chat template;
 *     GRID       every multiple of opts.grid in [grid, n] (grid 0 = none). If more than
 *                BANK_PLAN_MAX - 4 multiples would lie above s, the grid spacing doubles
 *                until they fit.
 *   Kept: s < pos <= n. Sorted ascending, one entry per position, tagged with the kind
 *   of highest priority (lowest enum value: HEAD > USER > GENPROMPT > DIVERGE > GRID).
 * The planner reads the tree only; it pins nothing and counts no lookup.
 */
#include "bank/bank_int.h"

#include <string.h>

static void plan_add(struct bank_plan_pos *out, int *n_out, int64_t s, int64_t n,
                     int64_t pos, enum bank_snap_kind kind)
{
    if (pos <= s || pos > n)
        return;
    for (int i = 0; i < *n_out; i++)
        if (out[i].pos == pos) {
            if (kind < out[i].kind)
                out[i].kind = kind;
            return;
        }
    if (*n_out >= BANK_PLAN_MAX)
        return; /* unreachable: the grid is sized to leave room */
    int i = *n_out;
    while (i > 0 && out[i - 1].pos > pos) {
        out[i] = out[i - 1];
        i--;
    }
    out[i].pos = pos;
    out[i].kind = kind;
    (*n_out)++;
}

int bank_plan(const struct bank *b, uint64_t fp, const struct bank_opts *opts,
              const struct bank_plan_in *in, struct bank_plan_pos *out,
              int64_t *restore_pos_out)
{
    struct bank_opts o;
    if (opts)
        o = *opts;
    else if (b)
        o = b->opts;
    else
        bank_opts_default(&o);
    int64_t n = in->n, L = 0, s = 0;
    const struct bank_space *sp = bank_space_find(b, fp);
    if (sp && n > 0) {
        struct bank_snap *best = NULL;
        L = bank_tree_match(sp, in->ids, n, n - 1, &best, NULL);
        s = best ? best->pos : 0;
    }
    if (restore_pos_out)
        *restore_pos_out = s;
    int cnt = 0;
    if (o.head_anchor && in->head_len >= HS_MAX((int64_t)1, o.min_head))
        plan_add(out, &cnt, s, n, in->head_len, BANK_SNAP_HEAD);
    if (in->user_start >= 1)
        plan_add(out, &cnt, s, n, in->user_start, BANK_SNAP_USER);
    if (in->genprompt_start >= 1)
        plan_add(out, &cnt, s, n, in->genprompt_start, BANK_SNAP_GENPROMPT);
    if (sp && L > s && L < n)
        plan_add(out, &cnt, s, n, L, BANK_SNAP_DIVERGE);
    if (o.grid > 0) {
        int64_t g = o.grid;
        while (n / g - s / g > BANK_PLAN_MAX - 4)
            g *= 2;
        for (int64_t p = (s / g + 1) * g; p <= n; p += g)
            plan_add(out, &cnt, s, n, p, BANK_SNAP_GRID);
    }
    return cnt;
}
