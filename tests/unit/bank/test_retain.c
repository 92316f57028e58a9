/* test_retain.c — the thinning rule's properties (on position lists and in the tree),
 * anchors and branch points protected, the RAM budget's eviction order, pins. */
#include <criterion/criterion.h>

#include "bank_test.h"

#define FP 0xabcdef0123456789ull
#define ROW 16
#define SNAP 64

static uint64_t rs = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(uint32_t k)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (uint32_t)(rs % k);
}

static struct bank *mk_bank(int cap, uint64_t budget)
{
    struct bank_opts o;
    bank_opts_default(&o);
    o.snap_cap = cap;
    o.ram_budget = budget;
    struct bank *b = bank_init(&o);
    cr_assert_eq(bank_space_add(b, FP, ROW, SNAP, NULL), HS_OK);
    return b;
}

/* ---- the rule on position lists ----------------------------------------------------- */

Test(bank_thin, worked_example_uniform_grid)
{
    int64_t pos[256];
    int n = 0;
    for (int64_t p = 2048; p <= 59904; p += 256)
        pos[n++] = p;
    bool keep[256];
    bank_thin_positions(pos, n, 8, keep);
    int64_t want[] = {2048, 26880, 43264, 51456, 55552, 57600, 59648, 59904};
    int k = 0;
    for (int i = 0; i < n; i++)
        if (keep[i]) {
            cr_assert_lt(k, 8);
            cr_assert_eq(pos[i], want[k], "kept[%d] = %lld, want %lld", k, (long long)pos[i],
                         (long long)want[k]);
            k++;
        }
    cr_assert_eq(k, 8);
}

Test(bank_thin, small_lists_and_cap_two)
{
    int64_t pos[] = {5, 9, 100, 101, 400};
    bool keep[5];
    bank_thin_positions(pos, 5, 8, keep);
    for (int i = 0; i < 5; i++)
        cr_assert(keep[i]);
    bank_thin_positions(pos, 5, 2, keep);
    cr_assert(keep[0] && keep[4] && !keep[1] && !keep[2] && !keep[3]);
    bank_thin_positions(pos, 5, 3, keep); /* one slot, bucket (0, 395]: nearest = 101 */
    cr_assert(keep[0] && keep[3] && keep[4] && !keep[1] && !keep[2]);
}

/* An independent statement of the rule: every non-empty bucket keeps exactly its record
 * nearest to the newest; nothing else in the interior. */
Test(bank_thin, random_lists_satisfy_the_specification)
{
    for (int trial = 0; trial < 3000; trial++) {
        int n = 1 + (int)rnd(70), cap = 2 + (int)rnd(11);
        int64_t pos[70];
        int64_t p = rnd(1000);
        for (int i = 0; i < n; i++) {
            p += 1 + rnd(trial % 2 ? 5000 : 50);
            pos[i] = p;
        }
        bool keep[70];
        bank_thin_positions(pos, n, cap, keep);
        int kept = 0;
        for (int i = 0; i < n; i++)
            kept += keep[i];
        if (n <= cap) {
            cr_assert_eq(kept, n);
            continue;
        }
        cr_assert_leq(kept, cap);
        cr_assert(keep[0] && keep[n - 1], "oldest and newest are kept");
        int slots = cap - 2;
        int64_t N = pos[n - 1], span = N - pos[0], base = 1;
        if (slots == 0) {
            cr_assert_eq(kept, 2);
            continue;
        }
        while (base * ((int64_t)1 << (slots - 1)) < span)
            base *= 2;
        for (int i = 1; i < n - 1; i++) {
            int64_t d = N - pos[i];
            /* bucket: (lo, hi] */
            int64_t hi = base, lo = 0;
            while (hi < d) {
                lo = hi;
                hi *= 2;
            }
            cr_assert_leq(hi, base * ((int64_t)1 << (slots - 1)));
            bool nearest = !(i + 1 < n - 1 && N - pos[i + 1] > lo);
            cr_assert_eq(keep[i], nearest, "trial %d cap %d i %d d %lld bucket (%lld, %lld]",
                         trial, cap, i, (long long)d, (long long)lo, (long long)hi);
        }
    }
}

/* On a uniform grid of step g <= b, any q has a kept record r <= q with
 * N - r <= max(2 (N - q), b) + g. */
Test(bank_thin, uniform_grid_loss_is_proportional)
{
    int64_t steps[] = {64, 256, 1000, 4096};
    for (unsigned si = 0; si < HS_ARRAY_LEN(steps); si++)
        for (int cap = 4; cap <= 10; cap += 2) {
            int64_t g = steps[si];
            int64_t pos[400];
            int n = 0;
            for (int i = 1; i <= 300; i++)
                pos[n++] = i * g;
            bool keep[400];
            bank_thin_positions(pos, n, cap, keep);
            int64_t N = pos[n - 1], span = N - pos[0], base = 1;
            while (base * ((int64_t)1 << (cap - 3)) < span)
                base *= 2;
            cr_assert_leq(g, base);
            for (int64_t q = pos[0]; q <= N; q += 1 + rnd((uint32_t)g)) {
                int64_t r = 0;
                for (int i = 0; i < n; i++)
                    if (keep[i] && pos[i] <= q)
                        r = pos[i];
                cr_assert_geq(r, pos[0]);
                cr_assert_leq(N - r, HS_MAX(2 * (N - q), base) + g, "g %lld cap %d q %lld r %lld",
                              (long long)g, cap, (long long)q, (long long)r);
            }
        }
}

/* ---- thinning inside the tree ------------------------------------------------------- */

#define PATH 12000

static int32_t path_a[PATH + 8], path_b[PATH + 8];

static void fill_paths(void)
{
    for (int i = 0; i < PATH + 8; i++) {
        path_a[i] = (int32_t)(1000 + (i * 7919) % 50000);
        path_b[i] = path_a[i];
    }
}

/* Which of pos[] are banked on ids: lookup ids[0, p+1) restores at p iff p is kept. */
static int kept_positions(struct bank *b, const int32_t *ids, const int64_t *pos, int n,
                          bool *kept)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        struct bank_hit hit;
        bank_lookup(b, FP, ids, pos[i] + 1, &hit);
        kept[i] = hit.restore_pos == pos[i];
        if (kept[i])
            cr_assert_eq(bt_check_hit(b, &hit, ids, ROW, SNAP, FP), 0);
        bank_hit_release(b, &hit);
        k += kept[i];
    }
    return k;
}

Test(bank_thin, one_insert_thins_like_the_rule_and_keeps_the_anchor)
{
    fill_paths();
    struct bank *b = mk_bank(8, 0);
    int64_t pos[41];
    enum bank_snap_kind kind[41];
    int n = 0;
    for (int i = 1; i <= 40; i++) {
        pos[n] = i * 256;
        kind[n++] = BANK_SNAP_GRID;
    }
    pos[n] = 3000;
    kind[n++] = BANK_SNAP_HEAD;
    cr_assert_eq(bt_insert(b, FP, path_a, 40 * 256, pos, kind, n, ROW, SNAP, FP), HS_OK);
    bool want[40], got[41];
    bank_thin_positions(pos, 40, 8, want);
    kept_positions(b, path_a, pos, n, got);
    for (int i = 0; i < 40; i++)
        cr_assert_eq(got[i], want[i], "position %lld", (long long)pos[i]);
    cr_assert(got[40], "the head anchor is kept");
    struct bank_hit hit;
    bank_lookup(b, FP, path_a, 513, &hit); /* 512 was thinned: restore at 256 */
    cr_assert(!want[1]);
    cr_assert_eq(hit.restore_pos, 256);
    cr_assert_eq(hit.reason, BANK_REASON_THINNED);
    bank_hit_release(b, &hit);
    struct bank_stats st;
    bank_stats_get(b, &st);
    cr_assert_eq(st.n_snaps, 9);
    cr_assert_eq(st.snaps_by_kind[BANK_SNAP_HEAD], 1);
    cr_assert_eq(st.snaps_by_kind[BANK_SNAP_GRID], 8);
    cr_assert_eq(st.evictions[BANK_EVICT_THIN], 32);
    bank_free(b);
}

Test(bank_thin, a_growing_path_stays_within_the_cap)
{
    fill_paths();
    struct bank *b = mk_bank(8, 0);
    int64_t all[200];
    int n_all = 0;
    int64_t head = 700;
    for (int64_t end = 1000; end <= PATH; end += 237) {
        int64_t p[3] = {head, end - 5, end};
        enum bank_snap_kind k[3] = {BANK_SNAP_HEAD, BANK_SNAP_GENPROMPT, BANK_SNAP_END};
        cr_assert_eq(bt_insert(b, FP, path_a, end, p, k, 3, ROW, SNAP, FP), HS_OK);
        all[n_all++] = end - 5;
        all[n_all++] = end;
        bool kept[200];
        int c = kept_positions(b, path_a, all, n_all, kept);
        cr_assert_leq(c, 8);
        cr_assert(kept[0], "the oldest stays");
        cr_assert(kept[n_all - 1], "the newest stays");
        bool hk;
        kept_positions(b, path_a, &head, 1, &hk);
        cr_assert(hk, "the anchor stays");
    }
    bank_free(b);
}

Test(bank_thin, branch_points_are_protected_until_the_branch_goes)
{
    fill_paths();
    struct bank *b = mk_bank(4, 0);
    /* trunk to 1000 shared; b diverges at 1000 and carries no snapshot (all dead KV) */
    path_b[1000] = -1;
    int64_t pb = 1000;
    enum bank_snap_kind kd = BANK_SNAP_DIVERGE;
    cr_assert_eq(bt_insert(b, FP, path_b, 1500, &pb, &kd, 1, ROW, SNAP, FP), HS_OK);
    cr_assert_eq(bt_insert(b, FP, path_a, 1500, NULL, NULL, 0, ROW, SNAP, FP), HS_OK);
    int64_t all[64];
    int n_all = 0;
    for (int64_t p = 100; p <= 900; p += 100) /* above the branch point */
        all[n_all++] = p;
    for (int64_t p = 1100; p <= 1500; p += 100)
        all[n_all++] = p;
    cr_assert_eq(bt_insert(b, FP, path_a, 1500, all, NULL, n_all, ROW, SNAP, FP), HS_OK);
    bool kept[64], k1000;
    cr_assert_leq(kept_positions(b, path_a, all, n_all, kept), 4);
    kept_positions(b, path_a, &pb, 1, &k1000);
    cr_assert(k1000, "the branch point survives thinning");

    /* the dead branch goes first under pressure; the branch point dissolves and its
     * snapshot becomes ordinary: the path is re-thinned to 4 ordinary snapshots */
    int64_t with[65];
    memcpy(with, all, sizeof(int64_t) * (size_t)n_all);
    with[n_all] = 1000;
    bool kw[65];
    int before = kept_positions(b, path_a, with, n_all + 1, kw);
    cr_assert_eq(before, 5);
    bt_shrink_to(b, bt_total(b) - 1);
    struct bank_stats st;
    bank_stats_get(b, &st);
    cr_assert_eq(st.evictions[BANK_EVICT_DEAD_KV], 1);
    cr_assert_eq(st.evictions[BANK_EVICT_SNAP], 0);
    cr_assert_eq(kept_positions(b, path_a, with, n_all + 1, kw), 4);
    bank_free(b);
}

/* ---- eviction order ----------------------------------------------------------------- */

Test(bank_evict, dead_kv_goes_before_any_snapshot)
{
    fill_paths();
    struct bank *b = mk_bank(8, 0);
    int64_t p1 = 100, p2 = 200;
    cr_assert_eq(bt_insert(b, FP, path_a, 1000, &p1, NULL, 1, ROW, SNAP, FP), HS_OK);
    path_b[0] = 7; /* an unrelated path */
    cr_assert_eq(bt_insert(b, FP, path_b, 200, &p2, NULL, 1, ROW, SNAP, FP), HS_OK);
    uint64_t t = bt_total(b);
    uint64_t freed = bt_shrink_to(b, t - 10);
    cr_assert_eq(freed, 900 * (ROW + 4)); /* rows 100..999 of path a and their ids */
    struct bank_stats st;
    bank_stats_get(b, &st);
    cr_assert_eq(st.evictions[BANK_EVICT_DEAD_KV], 1);
    cr_assert_eq(st.evicted_bytes[BANK_EVICT_DEAD_KV], 900 * (ROW + 4));
    cr_assert_eq(st.n_snaps, 2);
    struct bank_hit hit;
    bank_lookup(b, FP, path_a, 1000, &hit);
    cr_assert_eq(hit.restore_pos, 100);
    cr_assert_eq(hit.match_len, 100);
    cr_assert_eq(hit.reason, BANK_REASON_EVICTED);
    cr_assert_eq(bt_check_hit(b, &hit, path_a, ROW, SNAP, FP), 0);
    bank_hit_release(b, &hit);
    bank_free(b);
}

Test(bank_evict, least_recently_used_then_least_shared_and_anchors_last)
{
    fill_paths();
    struct bank *b = mk_bank(8, 0);
    int64_t pa[2] = {50, 300};
    enum bank_snap_kind ka[2] = {BANK_SNAP_HEAD, BANK_SNAP_END};
    cr_assert_eq(bt_insert(b, FP, path_a, 300, pa, ka, 2, ROW, SNAP, FP), HS_OK);
    path_b[0] = 7;
    int64_t pb = 300;
    cr_assert_eq(bt_insert(b, FP, path_b, 300, &pb, NULL, 1, ROW, SNAP, FP), HS_OK);
    /* touch path a: b's snapshot is now the least recently used */
    struct bank_hit hit;
    bank_lookup(b, FP, path_a, 301, &hit);
    cr_assert_eq(hit.restore_pos, 300);
    bank_hit_release(b, &hit);
    bt_shrink_to(b, bt_total(b) - 1);
    struct bank_stats st;
    bank_stats_get(b, &st);
    cr_assert_eq(st.evictions[BANK_EVICT_SNAP], 1);
    cr_assert_eq(st.n_snaps, 2);
    bank_lookup(b, FP, path_b, 301, &hit);
    cr_assert_eq(hit.restore_pos, 0);
    cr_assert_eq(hit.reason, BANK_REASON_EVICTED);
    /* next: b's KV is dead (goes first), then a's ordinary end snapshot, though the
     * anchor at 50 was used less recently */
    bt_shrink_to(b, bt_total(b) - 1);
    bank_stats_get(b, &st);
    cr_assert_eq(st.evictions[BANK_EVICT_DEAD_KV], 1);
    cr_assert_eq(st.evictions[BANK_EVICT_SNAP], 1);
    cr_assert_eq(st.n_tokens, 300);
    bt_shrink_to(b, bt_total(b) - 1);
    bank_stats_get(b, &st);
    cr_assert_eq(st.evictions[BANK_EVICT_SNAP], 2);
    cr_assert_eq(st.evictions[BANK_EVICT_PROTECTED], 0);
    bank_lookup(b, FP, path_a, 301, &hit);
    cr_assert_eq(hit.restore_pos, 50);
    cr_assert_eq(hit.kind, BANK_SNAP_HEAD);
    bank_hit_release(b, &hit);
    bt_shrink_to(b, 0);
    bank_stats_get(b, &st);
    cr_assert_eq(st.evictions[BANK_EVICT_PROTECTED], 1);
    cr_assert_eq(st.total_bytes, 0);
    bank_free(b);
}

Test(bank_evict, shared_state_outlives_unshared_state_of_the_same_age)
{
    fill_paths();
    struct bank *b = mk_bank(8, 0);
    /* b: 200 tokens ending in a snapshot; a leaves b at 120 and brings a trunk snapshot
     * at 100 (shared by both leaves) and a leaf snapshot at 150, of the same age */
    int64_t p[2] = {100, 150}, pb = 200;
    path_b[120] = -5;
    cr_assert_eq(bt_insert(b, FP, path_b, 200, &pb, NULL, 1, ROW, SNAP, FP), HS_OK);
    cr_assert_eq(bt_insert(b, FP, path_a, 150, p, NULL, 2, ROW, SNAP, FP), HS_OK);
    struct bank_hit hit;
    bank_lookup(b, FP, path_b, 201, &hit); /* b's snapshot is the most recent now */
    cr_assert_eq(hit.restore_pos, 200);
    bank_hit_release(b, &hit);
    bt_shrink_to(b, bt_total(b) - 1);
    struct bank_stats st;
    bank_stats_get(b, &st);
    cr_assert_eq(st.evictions[BANK_EVICT_SNAP], 1);
    cr_assert_eq(st.evictions[BANK_EVICT_DEAD_KV], 0);
    cr_assert_eq(st.n_snaps, 2);
    bank_lookup(b, FP, path_a, 151, &hit);
    cr_assert_eq(hit.restore_pos, 100, "the unshared 150 went first");
    bank_hit_release(b, &hit);
    bank_lookup(b, FP, path_b, 201, &hit);
    cr_assert_eq(hit.restore_pos, 200);
    bank_hit_release(b, &hit);
    bank_free(b);
}

/* Random inserts under a budget: always under budget after an insert, lookups stay
 * exact (only shorter than without a budget), pinned hits are never touched. */
#define RSEQ 250
#define RLEN 400

struct rmodel {
    int n;
    int32_t ids[RSEQ][RLEN];
    int64_t len[RSEQ];
    int64_t pos[RSEQ][6];
    int n_pos[RSEQ];
};

static int64_t lcp(const int32_t *a, int64_t na, const int32_t *c, int64_t nc)
{
    int64_t i = 0;
    while (i < na && i < nc && a[i] == c[i])
        i++;
    return i;
}

static void rquery(const struct rmodel *m, int32_t *q, int64_t *n)
{
    int64_t keep = 0;
    if (m->n && rnd(6)) {
        int src = (int)rnd((uint32_t)m->n);
        keep = rnd((uint32_t)m->len[src] + 1);
        memcpy(q, m->ids[src], (size_t)keep * sizeof *q);
    }
    *n = keep + 1 + rnd((uint32_t)(RLEN - keep - 1));
    for (int64_t i = keep; i < *n; i++)
        q[i] = (int32_t)rnd(3);
}

Test(bank_evict, random_inserts_under_a_budget_stay_exact)
{
    const uint64_t budget = 64 * 1024;
    struct bank *b = mk_bank(4, budget);
    static struct rmodel m;
    memset(&m, 0, sizeof m);
    int32_t q[RLEN];
    int64_t n;
    struct bank_hit pinned[3];
    int32_t pin_ids[3][RLEN];
    int n_pinned = 0;
    for (int it = 0; it < RSEQ; it++) {
        rquery(&m, q, &n);
        int np = (int)rnd(7);
        int64_t pos[6];
        for (int k = 0; k < np; k++)
            pos[k] = 1 + rnd((uint32_t)n);
        cr_assert_eq(bt_insert(b, FP, q, n, pos, NULL, np, ROW, SNAP, FP), HS_OK);
        memcpy(m.ids[m.n], q, (size_t)n * sizeof *q);
        m.len[m.n] = n;
        memcpy(m.pos[m.n], pos, sizeof pos);
        m.n_pos[m.n] = np;
        m.n++;
        uint64_t pinned_bytes = 0;
        for (int i = 0; i < n_pinned; i++)
            pinned_bytes += (uint64_t)pinned[i].restore_pos * (ROW + 4) + SNAP;
        cr_assert_leq(bt_total(b), HS_MAX(budget, pinned_bytes), "over budget after insert %d",
                      it);

        /* pinned hits stay intact; rotate them */
        for (int i = 0; i < n_pinned; i++)
            cr_assert_eq(bt_check_hit(b, &pinned[i], pin_ids[i], ROW, SNAP, FP), 0);
        if (it % 20 == 19) {
            for (int i = 0; i < n_pinned; i++)
                bank_hit_release(b, &pinned[i]);
            n_pinned = 0;
        }
        if (n_pinned < 3) {
            struct bank_hit h;
            bank_lookup(b, FP, q, n, &h);
            if (h.restore_pos > 0) {
                memcpy(pin_ids[n_pinned], q, (size_t)n * sizeof *q);
                pinned[n_pinned++] = h;
            }
        }
        for (int t = 0; t < 8; t++) {
            int32_t qq[RLEN];
            int64_t nn;
            rquery(&m, qq, &nn);
            struct bank_hit hit;
            bank_lookup(b, FP, qq, nn, &hit);
            int64_t s = hit.restore_pos;
            cr_assert_leq(s, nn - 1);
            if (s > 0) {
                bool found = false;
                for (int i = 0; i < m.n && !found; i++) {
                    if (lcp(qq, nn, m.ids[i], m.len[i]) < s)
                        continue;
                    for (int k = 0; k < m.n_pos[i]; k++)
                        found |= m.pos[i][k] == s;
                }
                cr_assert(found, "restore at %lld, never banked on that prefix", (long long)s);
                cr_assert_eq(bt_check_hit(b, &hit, qq, ROW, SNAP, FP), 0);
            }
            bank_hit_release(b, &hit);
        }
    }
    for (int i = 0; i < n_pinned; i++)
        bank_hit_release(b, &pinned[i]);
    struct bank_stats st;
    bank_stats_get(b, &st);
    cr_assert_gt(st.evictions[BANK_EVICT_DEAD_KV], 0);
    cr_assert_gt(st.evictions[BANK_EVICT_SNAP], 0);
    cr_assert_gt(st.evictions[BANK_EVICT_THIN], 0);
    bank_free(b);
}
