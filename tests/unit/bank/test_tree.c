/* test_tree.c — the bank's radix tree: insert, split, lookup and copy-out against a
 * brute-force model, reasons, pins, fingerprint isolation, insert errors. */
#include <criterion/criterion.h>

#include "bank_test.h"

#define FP1 0x1111222233334444ull
#define FP2 0x5555666677778888ull
#define ROW 24
#define SNAP 40

static struct bank *mk_bank(int cap, uint64_t budget)
{
    struct bank_opts o;
    bank_opts_default(&o);
    o.snap_cap = cap;
    o.ram_budget = budget;
    struct bank *b = bank_init(&o);
    cr_assert_eq(bank_space_add(b, FP1, ROW, SNAP, NULL), HS_OK);
    return b;
}

static void expect_lookup(struct bank *b, const int32_t *ids, int64_t n, int64_t L, int64_t s,
                          enum bank_reason reason)
{
    struct bank_hit hit;
    bank_lookup(b, FP1, ids, n, &hit);
    cr_assert_eq(hit.match_len, L, "L %lld want %lld", (long long)hit.match_len, (long long)L);
    cr_assert_eq(hit.restore_pos, s, "s %lld want %lld", (long long)hit.restore_pos,
                 (long long)s);
    cr_assert_eq(hit.reason, reason, "reason %s want %s", bank_reason_name(hit.reason),
                 bank_reason_name(reason));
    if (s > 0)
        cr_assert_eq(bt_check_hit(b, &hit, ids, ROW, SNAP, FP1), 0);
    else
        cr_assert_null(hit.snapshot);
    bank_hit_release(b, &hit);
}

Test(bank_tree, split_and_exact_reasons)
{
    struct bank *b = mk_bank(8, 0);
    int32_t a[] = {1, 2, 3, 4, 5, 6, 7, 8};
    int64_t pa[] = {3, 8};
    cr_assert_eq(bt_insert(b, FP1, a, 8, pa, NULL, 2, ROW, SNAP, FP1), HS_OK);
    int32_t c[] = {1, 2, 3, 4, 9, 9};
    int64_t pc[] = {4, 6};
    cr_assert_eq(bt_insert(b, FP1, c, 6, pc, NULL, 2, ROW, SNAP, FP1), HS_OK);
    struct bank_stats st;
    bank_stats_get(b, &st);
    cr_assert_eq(st.n_nodes, 3);   /* [1 2 3 4] [5 6 7 8] [9 9] */
    cr_assert_eq(st.n_tokens, 10); /* shared prefix stored once */
    cr_assert_eq(st.kv_bytes, 10 * ROW);
    cr_assert_eq(st.n_snaps, 4);
    cr_assert_eq(st.snap_bytes, 4 * SNAP);

    int32_t q1[] = {1, 2, 3, 4, 5, 6, 7, 8, 10};
    expect_lookup(b, q1, 9, 8, 8, BANK_REASON_FULL);
    expect_lookup(b, q1, 8, 8, 4, BANK_REASON_NO_SNAPSHOT); /* s <= n-1 = 7: 8 not allowed */
    int32_t q2[] = {1, 2, 3, 4, 5, 0, 0};
    expect_lookup(b, q2, 7, 5, 4, BANK_REASON_NO_SNAPSHOT);
    int32_t q3[] = {1, 2, 3, 4, 0, 0};
    expect_lookup(b, q3, 6, 4, 4, BANK_REASON_DIVERGED);
    int32_t q4[] = {1, 2, 3, 0};
    expect_lookup(b, q4, 4, 3, 3, BANK_REASON_FULL); /* L 3 == n-1 */
    int32_t q5[] = {1, 2, 0};
    expect_lookup(b, q5, 3, 2, 0, BANK_REASON_NO_SNAPSHOT);
    int32_t q6[] = {7, 7};
    expect_lookup(b, q6, 2, 0, 0, BANK_REASON_NO_MATCH);
    expect_lookup(b, c, 6, 6, 4, BANK_REASON_NO_SNAPSHOT);
    expect_lookup(b, c, 1, 1, 0, BANK_REASON_NO_SNAPSHOT);

    bank_stats_get(b, &st);
    cr_assert_eq(st.lookups, 9);
    cr_assert_eq(st.hits, 6);
    cr_assert_eq(st.misses[BANK_REASON_NO_SNAPSHOT], 2);
    cr_assert_eq(st.misses[BANK_REASON_NO_MATCH], 1);
    cr_assert_eq(st.restored_tokens, 8 + 4 + 4 + 4 + 3 + 4);
    cr_assert_eq(st.stops[BANK_REASON_NO_SNAPSHOT], 5);
    bank_free(b);
}

Test(bank_tree, path_ending_inside_an_edge_and_snapshot_mid_stretch)
{
    struct bank *b = mk_bank(8, 0);
    int32_t a[] = {5, 6, 7, 8, 9, 10};
    cr_assert_eq(bt_insert(b, FP1, a, 6, NULL, NULL, 0, ROW, SNAP, FP1), HS_OK);
    int64_t p[] = {2, 4};
    cr_assert_eq(bt_insert(b, FP1, a, 4, p, NULL, 2, ROW, SNAP, FP1), HS_OK);
    struct bank_stats st;
    bank_stats_get(b, &st);
    cr_assert_eq(st.n_nodes, 1);
    cr_assert_eq(st.n_tokens, 6);
    expect_lookup(b, a, 6, 6, 4, BANK_REASON_NO_SNAPSHOT);
    expect_lookup(b, a, 3, 3, 2, BANK_REASON_FULL);
    /* a split below a snapshot that sits mid-stretch keeps it on the upper part */
    int32_t c[] = {5, 6, 7, 8, 9, 11, 12};
    int64_t pc[] = {6};
    cr_assert_eq(bt_insert(b, FP1, c, 6, pc, NULL, 1, ROW, SNAP, FP1), HS_OK);
    expect_lookup(b, a, 6, 6, 4, BANK_REASON_NO_SNAPSHOT);
    expect_lookup(b, c, 7, 6, 6, BANK_REASON_FULL);
    bank_free(b);
}

Test(bank_tree, insert_errors_change_nothing)
{
    struct bank *b = mk_bank(8, 0);
    int32_t a[] = {1, 2, 3, 4};
    uint8_t kv[4 * ROW] = {0}, sb[SNAP] = {0};
    struct bank_snap_in sn = {.pos = 5, .kind = BANK_SNAP_END, .bytes = sb};
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(bank_insert(b, FP2, a, 4, 0, kv, NULL, 0, &err), HS_ERR_NOT_FOUND);
    hs_err_clear(&err);
    cr_assert_eq(bank_insert(b, FP1, a, 4, 1, kv, NULL, 0, &err), HS_ERR_INVALID);
    cr_assert(strstr(err.msg, "KV rows from 1") != NULL, "%s", err.msg);
    hs_err_clear(&err);
    cr_assert_eq(bank_insert(b, FP1, a, 4, 0, kv, &sn, 1, &err), HS_ERR_INVALID);
    cr_assert(strstr(err.msg, "position 5") != NULL, "%s", err.msg);
    sn.pos = 0;
    cr_assert_eq(bank_insert(b, FP1, a, 4, 0, kv, &sn, 1, NULL), HS_ERR_INVALID);
    cr_assert_eq(bank_space_add(b, FP1, ROW + 1, SNAP, NULL), HS_ERR_INVALID);
    cr_assert_eq(bank_space_add(b, FP1, ROW, SNAP, NULL), HS_OK);
    struct bank_stats st;
    bank_stats_get(b, &st);
    cr_assert_eq(st.n_nodes, 0);
    cr_assert_eq(st.total_bytes, 0);
    cr_assert_eq(st.n_spaces, 1);
    bank_free(b);
    bank_free(NULL);
}

Test(bank_tree, fingerprints_are_isolated)
{
    struct bank *b = mk_bank(8, 0);
    cr_assert_eq(bank_space_add(b, FP2, ROW * 2, SNAP / 2, NULL), HS_OK);
    int32_t a[] = {1, 2, 3, 4, 5, 6};
    int64_t p1[] = {5}, p2[] = {3};
    cr_assert_eq(bt_insert(b, FP1, a, 6, p1, NULL, 1, ROW, SNAP, FP1), HS_OK);
    struct bank_hit hit;
    bank_lookup(b, FP2, a, 6, &hit);
    cr_assert_eq(hit.restore_pos, 0);
    cr_assert_eq(hit.match_len, 0);
    cr_assert_eq(bank_match_len(b, FP2, a, 6), 0);
    cr_assert_eq(bt_insert(b, FP2, a, 6, p2, NULL, 1, ROW * 2, SNAP / 2, FP2), HS_OK);
    bank_lookup(b, FP2, a, 6, &hit);
    cr_assert_eq(hit.restore_pos, 3);
    cr_assert_eq(hit.kv_row_bytes, ROW * 2);
    cr_assert_eq(bt_check_hit(b, &hit, a, ROW * 2, SNAP / 2, FP2), 0);
    bank_hit_release(b, &hit);
    bank_lookup(b, FP1, a, 6, &hit);
    cr_assert_eq(hit.restore_pos, 5);
    cr_assert_eq(bt_check_hit(b, &hit, a, ROW, SNAP, FP1), 0);
    bank_hit_release(b, &hit);
    bank_lookup(b, 0x42, a, 6, &hit);
    cr_assert_eq(hit.reason, BANK_REASON_NO_SPACE);
    cr_assert_eq(hit.restore_pos, 0);
    struct bank_stats st;
    bank_stats_get(b, &st);
    cr_assert_eq(st.misses[BANK_REASON_NO_SPACE], 1);
    cr_assert_eq(st.n_tokens, 12);
    cr_assert_eq(st.kv_bytes, 6 * ROW + 6 * ROW * 2);
    bank_free(b);
}

Test(bank_tree, a_pinned_hit_survives_splits_and_shrinking)
{
    struct bank *b = mk_bank(8, 0);
    int32_t a[40];
    for (int i = 0; i < 40; i++)
        a[i] = 100 + i;
    int64_t p[] = {30};
    cr_assert_eq(bt_insert(b, FP1, a, 40, p, NULL, 1, ROW, SNAP, FP1), HS_OK);
    struct bank_hit hit;
    bank_lookup(b, FP1, a, 40, &hit);
    cr_assert_eq(hit.restore_pos, 30);
    /* split the stretch above and below the pinned snapshot */
    int32_t c[40];
    memcpy(c, a, sizeof c);
    c[10] = 7;
    cr_assert_eq(bt_insert(b, FP1, c, 40, NULL, NULL, 0, ROW, SNAP, FP1), HS_OK);
    memcpy(c, a, sizeof c);
    c[35] = 7;
    cr_assert_eq(bt_insert(b, FP1, c, 40, NULL, NULL, 0, ROW, SNAP, FP1), HS_OK);
    cr_assert_eq(bt_check_hit(b, &hit, a, ROW, SNAP, FP1), 0);
    /* everything unpinned goes; the pinned snapshot and its KV rows stay */
    bt_shrink_to(b, 0);
    struct bank_stats st;
    bank_stats_get(b, &st);
    cr_assert_eq(st.n_snaps, 1);
    cr_assert_eq(st.n_tokens, 30);
    cr_assert_eq(bt_check_hit(b, &hit, a, ROW, SNAP, FP1), 0);
    bank_hit_release(b, &hit);
    bank_hit_release(b, &hit); /* second release is a no-op */
    bt_shrink_to(b, 0);
    bank_stats_get(b, &st);
    cr_assert_eq(st.total_bytes, 0);
    cr_assert_eq(st.n_nodes, 0);
    bank_lookup(b, FP1, a, 40, &hit);
    cr_assert_eq(hit.restore_pos, 0);
    cr_assert_eq(hit.reason, BANK_REASON_EVICTED);
    bank_free(b);
}

Test(bank_tree, reinserting_a_position_refreshes_and_upgrades_to_head)
{
    struct bank *b = mk_bank(8, 0);
    int32_t a[] = {3, 1, 4, 1, 5, 9, 2, 6};
    int64_t p[2] = {4, 8};
    enum bank_snap_kind k1[2] = {BANK_SNAP_USER, BANK_SNAP_END};
    cr_assert_eq(bt_insert(b, FP1, a, 8, p, k1, 2, ROW, SNAP, FP1), HS_OK);
    enum bank_snap_kind k2[2] = {BANK_SNAP_HEAD, BANK_SNAP_GRID};
    cr_assert_eq(bt_insert(b, FP1, a, 8, p, k2, 2, ROW, SNAP, FP1), HS_OK);
    struct bank_stats st;
    bank_stats_get(b, &st);
    cr_assert_eq(st.n_snaps, 2);
    cr_assert_eq(st.snaps_by_kind[BANK_SNAP_HEAD], 1);
    cr_assert_eq(st.snaps_by_kind[BANK_SNAP_USER], 0);
    cr_assert_eq(st.snaps_by_kind[BANK_SNAP_END], 1, "only HEAD replaces a kind");
    cr_assert_eq(st.inserts, 2);
    cr_assert_eq(st.inserted_tokens, 8);
    cr_assert_eq(st.inserted_snaps, 2);
    cr_assert_eq(st.total_bytes, 8 * (ROW + 4) + 2 * SNAP);
    struct bank_hit hit;
    bank_lookup(b, FP1, a, 5, &hit);
    cr_assert_eq(hit.restore_pos, 4);
    cr_assert_eq(hit.kind, BANK_SNAP_HEAD);
    bank_hit_release(b, &hit);
    cr_assert_eq(bank_insert(b, FP1, a, 8, 8, NULL, NULL, 1, NULL), HS_ERR_INVALID);
    bank_free(b);
}

Test(bank_tree, a_space_without_attention_kv)
{
    struct bank *b = bank_init(NULL);
    cr_assert_eq(bank_space_add(b, FP2, 0, SNAP, NULL), HS_OK);
    cr_assert_eq(bank_space_add(b, FP1, 0, 0, NULL), HS_ERR_INVALID);
    int32_t a[] = {1, 2, 3, 4, 5};
    uint8_t sb[SNAP];
    bt_snap_fill(sb, SNAP, a, 3, FP2);
    struct bank_snap_in sn = {.pos = 3, .kind = BANK_SNAP_END, .bytes = sb};
    cr_assert_eq(bank_insert(b, FP2, a, 4, 0, NULL, &sn, 1, NULL), HS_OK);
    bt_check(b);
    struct bank_hit hit;
    bank_lookup(b, FP2, a, 5, &hit);
    cr_assert_eq(hit.restore_pos, 3);
    bank_copy_kv(b, &hit, NULL);
    cr_assert_eq(bt_check_hit(b, &hit, a, 0, SNAP, FP2), 0);
    bank_hit_release(b, &hit);
    struct bank_stats st;
    bank_stats_get(b, &st);
    cr_assert_eq(st.total_bytes, 4 * 4 + SNAP);
    bank_free(b);
}

/* ---- brute force -------------------------------------------------------------------- */

#define MAXSEQ 300
#define MAXLEN 64

struct model {
    int n;
    int32_t ids[MAXSEQ][MAXLEN];
    int64_t len[MAXSEQ];
    int64_t pos[MAXSEQ][8];
    int n_pos[MAXSEQ];
};

static int64_t lcp(const int32_t *a, int64_t na, const int32_t *c, int64_t nc)
{
    int64_t i = 0;
    while (i < na && i < nc && a[i] == c[i])
        i++;
    return i;
}

/* L and the deepest snapshot <= min(L, n-1) on any inserted path sharing that prefix */
static void model_lookup(const struct model *m, const int32_t *q, int64_t n, int64_t *L,
                         int64_t *s)
{
    *L = 0;
    for (int i = 0; i < m->n; i++)
        *L = HS_MAX(*L, lcp(q, n, m->ids[i], m->len[i]));
    int64_t lim = HS_MIN(*L, n - 1);
    *s = 0;
    for (int i = 0; i < m->n; i++) {
        int64_t c = lcp(q, n, m->ids[i], m->len[i]);
        for (int k = 0; k < m->n_pos[i]; k++)
            if (m->pos[i][k] <= c && m->pos[i][k] <= lim)
                *s = HS_MAX(*s, m->pos[i][k]);
    }
}

static uint64_t rng_state = 88172645463325252ull;
static uint32_t rnd(uint32_t k)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state % k);
}

static void random_query(const struct model *m, int32_t *q, int64_t *n)
{
    if (m->n == 0 || rnd(8) == 0) {
        *n = 1 + rnd(MAXLEN - 1);
        for (int64_t i = 0; i < *n; i++)
            q[i] = (int32_t)rnd(4);
        return;
    }
    int src = (int)rnd((uint32_t)m->n);
    int64_t keep = rnd((uint32_t)m->len[src] + 1);
    memcpy(q, m->ids[src], (size_t)keep * sizeof *q);
    *n = keep + rnd((uint32_t)(MAXLEN - keep));
    if (*n == 0)
        *n = 1;
    for (int64_t i = keep; i < *n; i++)
        q[i] = (int32_t)rnd(4);
}

Test(bank_tree, random_paths_match_brute_force)
{
    struct bank *b = mk_bank(1000, 0); /* no thinning, no budget: the model is exact */
    static struct model m;
    memset(&m, 0, sizeof m);
    int32_t q[MAXLEN];
    int64_t n;
    for (int it = 0; it < MAXSEQ; it++) {
        random_query(&m, q, &n);
        int np = (int)rnd(5);
        int64_t pos[8];
        for (int k = 0; k < np; k++)
            pos[k] = 1 + rnd((uint32_t)n);
        /* occasionally supply more KV than needed (kv_from below the match) */
        int64_t M = bank_match_len(b, FP1, q, n);
        int64_t from = rnd(3) == 0 ? rnd((uint32_t)M + 1) : M;
        uint8_t *kv = bt_kv_rows(q, from, n, ROW);
        struct bank_snap_in sn[8];
        uint8_t sb[8][SNAP];
        for (int k = 0; k < np; k++) {
            bt_snap_fill(sb[k], SNAP, q, pos[k], FP1);
            sn[k] = (struct bank_snap_in){.pos = pos[k], .kind = BANK_SNAP_GRID, .bytes = sb[k]};
        }
        if (M < n)
            cr_assert_eq(bank_insert(b, FP1, q, n, M + 1, kv, sn, np, NULL), HS_ERR_INVALID);
        cr_assert_eq(bank_insert(b, FP1, q, n, from, kv, sn, np, NULL), HS_OK);
        bt_check(b);
        free(kv);
        memcpy(m.ids[m.n], q, (size_t)n * sizeof *q);
        m.len[m.n] = n;
        memcpy(m.pos[m.n], pos, sizeof pos);
        m.n_pos[m.n] = np;
        m.n++;

        /* stored once: tokens = sum of what each path adds beyond all earlier ones */
        if (it % 25 == 24 || it == MAXSEQ - 1) {
            uint64_t tokens = 0, snaps = 0;
            for (int i = 0; i < m.n; i++) {
                int64_t best = 0;
                for (int j = 0; j < i; j++)
                    best = HS_MAX(best, lcp(m.ids[i], m.len[i], m.ids[j], m.len[j]));
                tokens += (uint64_t)(m.len[i] - best);
                for (int k = 0; k < m.n_pos[i]; k++) {
                    bool dup = false;
                    for (int j = 0; j <= i && !dup; j++)
                        for (int l = 0; l < m.n_pos[j] && !dup; l++) {
                            if (j == i && l >= k)
                                break;
                            dup = m.pos[j][l] == m.pos[i][k] &&
                                  lcp(m.ids[i], m.len[i], m.ids[j], m.len[j]) >= m.pos[i][k];
                        }
                    snaps += !dup;
                }
            }
            struct bank_stats st;
            bank_stats_get(b, &st);
            cr_assert_eq(st.n_tokens, tokens);
            cr_assert_eq(st.kv_bytes, tokens * ROW);
            cr_assert_eq(st.n_snaps, snaps);
        }
    }
    for (int it = 0; it < 2000; it++) {
        random_query(&m, q, &n);
        int64_t L, s;
        model_lookup(&m, q, n, &L, &s);
        struct bank_hit hit;
        bank_lookup(b, FP1, q, n, &hit);
        cr_assert_eq(hit.match_len, L);
        cr_assert_eq(hit.restore_pos, s);
        cr_assert_leq(hit.restore_pos, n - 1);
        if (s > 0)
            cr_assert_eq(bt_check_hit(b, &hit, q, ROW, SNAP, FP1), 0);
        bank_hit_release(b, &hit);
    }
    bank_free(b);
}
