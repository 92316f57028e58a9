/* test_check.c — bank_check itself: it passes on a tree the bank built, and each kind of
 * damage (made by hand through the private structures) fails it naming the invariant, so
 * the checks the other bank tests run after every insert and eviction can fail. */
#include <criterion/criterion.h>

#include "bank_test.h"
#include "bank/bank_int.h"

#include <string.h>

#define FP 0x0123456789abcdefull
#define ROW 16
#define SNAP 24

/* Two paths sharing [0, 6): a branch point at 6, snapshots at 3, 6, 9 and 10. */
static struct bank *mk_tree(int cap, uint64_t budget)
{
    struct bank_opts o;
    bank_opts_default(&o);
    o.snap_cap = cap;
    o.ram_budget = budget;
    struct bank *b = bank_init(&o);
    cr_assert_eq(bank_space_add(b, FP, ROW, SNAP, NULL), HS_OK);
    int32_t a[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, c[] = {1, 2, 3, 4, 5, 6, 70, 80, 90};
    int64_t pa[] = {3, 6, 10}, pc[] = {9};
    cr_assert_eq(bt_insert(b, FP, a, 10, pa, NULL, 3, ROW, SNAP, FP), HS_OK);
    cr_assert_eq(bt_insert(b, FP, c, 9, pc, NULL, 1, ROW, SNAP, FP), HS_OK);
    return b;
}

/* bank_check fails, and its message names `what`. */
static void expect_broken(const struct bank *b, const char *what)
{
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(bank_check(b, &err), HS_ERR_INVALID, "damage not found (%s)", what);
    cr_assert(strstr(err.msg, what) != NULL, "'%s' does not name '%s'", err.msg, what);
}

static struct bank_node *upper(struct bank *b) { return b->spaces[0]->root.kids[0]; }

Test(bank_check, a_built_tree_passes)
{
    struct bank *b = mk_tree(8, 0);
    bt_check(b);
    cr_assert_eq(upper(b)->n_kids, 2);
    bank_free(b);
}

Test(bank_check, counters_that_drift)
{
    struct bank *b = mk_tree(8, 0);
    b->st.n_tokens++;
    expect_broken(b, "counters drifted");
    b->st.n_tokens--;
    b->st.snaps_by_kind[BANK_SNAP_GRID]--;
    b->st.snaps_by_kind[BANK_SNAP_HEAD]++;
    expect_broken(b, "by kind differs");
    b->st.snaps_by_kind[BANK_SNAP_GRID]++;
    b->st.snaps_by_kind[BANK_SNAP_HEAD]--;
    bt_check(b);
    bank_free(b);
}

Test(bank_check, snapshots_out_of_place)
{
    struct bank *b = mk_tree(8, 0);
    struct bank_snap *s = upper(b)->snaps; /* at 3, then 6 */
    cr_assert_eq(s->pos, 3);
    s->pos = 7; /* past the stretch [0, 6] and after the next one */
    expect_broken(b, "invariant 2");
    s->pos = 3;
    s->pins = -1;
    expect_broken(b, "pins -1");
    s->pins = 0;
    bt_check(b);
    bank_free(b);
}

Test(bank_check, structure_of_nodes)
{
    struct bank *b = mk_tree(8, 0);
    struct bank_node *up = upper(b), *k0 = up->kids[0], *k1 = up->kids[1];
    int32_t t = k1->ids[0];
    k1->ids[0] = k0->ids[0];
    expect_broken(b, "invariant 3");
    k1->ids[0] = t;
    k0->start++;
    expect_broken(b, "does not start where its parent ends");
    k0->start--;
    b->spaces[0]->root.len = 1;
    expect_broken(b, "the root holds");
    b->spaces[0]->root.len = 0;
    bt_check(b);
    bank_free(b);
}

Test(bank_check, the_path_cap)
{
    struct bank *b = mk_tree(8, 0);
    b->opts.snap_cap = 2; /* [0, 10) holds 3 and 10 ordinary, 6 is a branch point: fine */
    bt_check(b);
    b->opts.snap_cap = 1; /* set by hand: nothing was thinned */
    expect_broken(b, "invariant 5");
    struct hs_err err;
    hs_err_clear(&err);
    bank_check(b, &err);
    cr_assert(strstr(err.msg, "carries 2 ordinary") != NULL, "%s", err.msg);
    b->opts.snap_cap = 8;
    bt_check(b);
    bank_free(b);
}

Test(bank_check, over_the_budget)
{
    struct bank *b = mk_tree(8, 0);
    b->opts.ram_budget = bt_total(b) - 1; /* set by hand: nothing was evicted */
    expect_broken(b, "invariant 6");
    b->opts.ram_budget = 0;
    bt_check(b);
    bt_shrink_to(b, 0); /* the real eviction leaves a valid (empty) tree */
    cr_assert_eq(bt_total(b), 0);
    bank_free(b);
}
