/* test_plan.c — the snapshot planner on ChatML-shaped id sequences (exact position
 * lists), and the seed scenario in miniature: a long conversation thinned to the cap,
 * then a new session with the same head restores at the head end. */
#include <criterion/criterion.h>

#include "bank_test.h"

#define FP 0x77aa77aa77aa77aaull
#define ROW 8
#define SNAP 32

enum {
    T_IM_START = 151644, T_IM_END = 151645, T_NL = 198, T_SYSTEM = 8948, T_USER = 872,
    T_ASSISTANT = 77091, T_THINK = 151667, T_END_THINK = 151668,
};

struct seq {
    int32_t *ids;
    int64_t n, cap;
};

static void put(struct seq *s, int32_t t)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 1024;
        s->ids = realloc(s->ids, (size_t)s->cap * sizeof *s->ids);
    }
    s->ids[s->n++] = t;
}

static void content(struct seq *s, int64_t len, uint32_t seed)
{
    for (int64_t i = 0; i < len; i++)
        put(s, (int32_t)(1000 + bt_mix(seed * 1000003ull + (uint64_t)i) % 60000));
}

/* <|im_start|>role\n content <|im_end|>\n ; returns the turn's start */
static int64_t turn(struct seq *s, int32_t role, int64_t len, uint32_t seed)
{
    int64_t at = s->n;
    put(s, T_IM_START);
    put(s, role);
    put(s, T_NL);
    content(s, len, seed);
    put(s, T_IM_END);
    put(s, T_NL);
    return at;
}

static int64_t genprompt(struct seq *s)
{
    int64_t at = s->n;
    put(s, T_IM_START);
    put(s, T_ASSISTANT);
    put(s, T_NL);
    return at;
}

/* What the api does: head = the first <|im_start|> not followed by `system` (0 = none),
 * the last user turn's start, the last <|im_start|>. */
static void plan_in(const struct seq *s, struct bank_plan_in *in)
{
    in->ids = s->ids;
    in->n = s->n;
    in->head_len = 0;
    in->user_start = -1;
    in->genprompt_start = -1;
    bool head_done = false;
    for (int64_t i = 0; i + 1 < s->n; i++) {
        if (s->ids[i] != T_IM_START)
            continue;
        if (!head_done && s->ids[i + 1] != T_SYSTEM) {
            in->head_len = i;
            head_done = true;
        }
        if (s->ids[i + 1] == T_USER)
            in->user_start = i;
        in->genprompt_start = i;
    }
}

static void expect_plan(const struct bank *b, const struct bank_opts *o, const struct seq *s,
                        const struct bank_plan_pos *want, int n_want, int64_t want_restore)
{
    struct bank_plan_in in;
    plan_in(s, &in);
    struct bank_plan_pos out[BANK_PLAN_MAX];
    int64_t r = -1;
    int n = bank_plan(b, FP, o, &in, out, &r);
    cr_assert_eq(r, want_restore, "restore %lld, want %lld", (long long)r,
                 (long long)want_restore);
    for (int i = 0; i < n && i < n_want; i++)
        cr_assert(out[i].pos == want[i].pos && out[i].kind == want[i].kind,
                  "plan[%d] = (%lld, %s), want (%lld, %s)", i, (long long)out[i].pos,
                  bank_snap_kind_name(out[i].kind), (long long)want[i].pos,
                  bank_snap_kind_name(want[i].kind));
    cr_assert_eq(n, n_want, "plan has %d positions, want %d", n, n_want);
}

static struct bank_opts opts(bool anchor)
{
    struct bank_opts o;
    bank_opts_default(&o);
    o.head_anchor = anchor;
    return o;
}

Test(bank_plan, cold_single_turn_head_merges_with_the_user_turn)
{
    struct seq s = {0};
    turn(&s, T_SYSTEM, 2997, 1);          /* [0, 3002) */
    cr_assert_eq(turn(&s, T_USER, 500, 2), 3002);
    cr_assert_eq(genprompt(&s), 3507);
    struct bank_opts o = opts(true);
    struct bank_plan_pos w[] = {{3002, BANK_SNAP_HEAD}, {3507, BANK_SNAP_GENPROMPT}};
    expect_plan(NULL, &o, &s, w, 2, 0);
    o = opts(false); /* --no-head-anchor */
    struct bank_plan_pos w2[] = {{3002, BANK_SNAP_USER}, {3507, BANK_SNAP_GENPROMPT}};
    expect_plan(NULL, &o, &s, w2, 2, 0);
    free(s.ids);
}

Test(bank_plan, short_head_and_no_head)
{
    struct seq s = {0};
    turn(&s, T_SYSTEM, 97, 1);            /* head 102 < 256 */
    turn(&s, T_USER, 500, 2);
    genprompt(&s);
    struct bank_opts o = opts(true);
    struct bank_plan_pos w[] = {{102, BANK_SNAP_USER}, {607, BANK_SNAP_GENPROMPT}};
    expect_plan(NULL, &o, &s, w, 2, 0);
    o.min_head = 100;
    struct bank_plan_pos w1[] = {{102, BANK_SNAP_HEAD}, {607, BANK_SNAP_GENPROMPT}};
    expect_plan(NULL, &o, &s, w1, 2, 0);
    struct seq u = {0};                   /* user-first prompt: no head */
    turn(&u, T_USER, 700, 3);
    genprompt(&u);
    o = opts(true);
    struct bank_plan_pos w2[] = {{705, BANK_SNAP_GENPROMPT}};
    expect_plan(NULL, &o, &u, w2, 1, 0);
    free(s.ids);
    free(u.ids);
}

Test(bank_plan, long_agent_prompt_gets_a_grid)
{
    struct seq s = {0};
    turn(&s, T_SYSTEM, 2997, 1);          /* [0, 3002) */
    turn(&s, T_USER, 1000, 2);            /* [3002, 4007) */
    turn(&s, T_ASSISTANT, 2000, 3);       /* [4007, 6012) */
    cr_assert_eq(turn(&s, T_USER, 3000, 4), 6012); /* tool result [6012, 9017) */
    cr_assert_eq(genprompt(&s), 9017);
    struct bank_opts o = opts(true);
    struct bank_plan_pos w[] = {
        {3002, BANK_SNAP_HEAD}, {4096, BANK_SNAP_GRID}, {6012, BANK_SNAP_USER},
        {8192, BANK_SNAP_GRID}, {9017, BANK_SNAP_GENPROMPT},
    };
    expect_plan(NULL, &o, &s, w, 5, 0);
    o.grid = 0;
    struct bank_plan_pos w0[] = {
        {3002, BANK_SNAP_HEAD}, {6012, BANK_SNAP_USER}, {9017, BANK_SNAP_GENPROMPT},
    };
    expect_plan(NULL, &o, &s, w0, 3, 0);
    free(s.ids);
}

Test(bank_plan, warm_turn_plans_the_divergence_and_only_above_the_restore_point)
{
    struct bank *b = bank_init(NULL);
    cr_assert_eq(bank_space_add(b, FP, ROW, SNAP, NULL), HS_OK);
    struct seq p1 = {0};
    turn(&p1, T_SYSTEM, 2997, 1);
    turn(&p1, T_USER, 500, 2);
    genprompt(&p1);                       /* n 3510 */
    struct bank_plan_in in;
    plan_in(&p1, &in);
    struct bank_plan_pos out[BANK_PLAN_MAX];
    int np = bank_plan(b, FP, NULL, &in, out, NULL);
    cr_assert_eq(np, 2);
    /* the model generated thinking, then the answer */
    struct seq path = {0};
    for (int64_t i = 0; i < p1.n; i++)
        put(&path, p1.ids[i]);
    put(&path, T_THINK);
    content(&path, 50, 9);
    put(&path, T_END_THINK);
    put(&path, T_NL);
    content(&path, 200, 10);
    put(&path, T_IM_END);                 /* n 3764 */
    cr_assert_eq(path.n, 3764);
    int64_t pos[3] = {out[0].pos, out[1].pos, path.n};
    enum bank_snap_kind kind[3] = {out[0].kind, out[1].kind, BANK_SNAP_END};
    cr_assert_eq(bt_insert(b, FP, path.ids, path.n, pos, kind, 3, ROW, SNAP, FP), HS_OK);

    /* next turn: the template re-renders the answer without the thinking */
    struct seq p2 = {0};
    for (int64_t i = 0; i < p1.n; i++)
        put(&p2, p1.ids[i]);
    content(&p2, 200, 10);
    put(&p2, T_IM_END);
    put(&p2, T_NL);                       /* [3510, 3712) */
    cr_assert_eq(turn(&p2, T_USER, 300, 11), 3712);
    cr_assert_eq(genprompt(&p2), 4017);
    struct bank_plan_pos w[] = {
        {3510, BANK_SNAP_DIVERGE}, {3712, BANK_SNAP_USER}, {4017, BANK_SNAP_GENPROMPT},
    };
    expect_plan(b, NULL, &p2, w, 3, 3507);
    struct bank_hit hit;
    bank_lookup(b, FP, p2.ids, p2.n, &hit);
    cr_assert_eq(hit.restore_pos, 3507);
    cr_assert_eq(hit.match_len, 3510);
    cr_assert_eq(hit.reason, BANK_REASON_NO_SNAPSHOT);
    bank_hit_release(b, &hit);

    /* bank turn 2 with its plan: the divergence becomes a protected branch point and the
     * same prompt again restores at its generation prompt with nothing left to plan */
    int64_t pos2[3] = {3510, 3712, 4017};
    cr_assert_eq(bt_insert(b, FP, p2.ids, p2.n, pos2, NULL, 3, ROW, SNAP, FP), HS_OK);
    expect_plan(b, NULL, &p2, NULL, 0, 4017);
    /* a third branch at 3600 restores at the divergence snapshot 3510 */
    p2.ids[3600] = 5;
    struct bank_plan_pos w3[] = {
        {3600, BANK_SNAP_DIVERGE}, {3712, BANK_SNAP_USER}, {4017, BANK_SNAP_GENPROMPT},
    };
    expect_plan(b, NULL, &p2, w3, 3, 3510);
    /* another fingerprint sees no tree */
    struct bank_plan_in in2;
    plan_in(&p2, &in2);
    int64_t r = -1;
    np = bank_plan(b, FP + 1, NULL, &in2, out, &r);
    cr_assert_eq(r, 0);
    cr_assert_eq(np, 3); /* head, user, genprompt */
    cr_assert_eq(out[0].pos, 3002);
    free(p1.ids);
    free(p2.ids);
    free(path.ids);
    bank_free(b);
}

Test(bank_plan, huge_prompts_widen_the_grid_and_stay_sorted)
{
    struct seq s = {0};
    turn(&s, T_SYSTEM, 10000, 1);
    turn(&s, T_USER, 290000, 2);
    genprompt(&s);
    struct bank_plan_in in;
    plan_in(&s, &in);
    struct bank_plan_pos out[BANK_PLAN_MAX];
    int n = bank_plan(NULL, FP, NULL, &in, out, NULL);
    cr_assert_leq(n, BANK_PLAN_MAX);
    int grid = 0;
    for (int i = 0; i < n; i++) {
        if (i)
            cr_assert_lt(out[i - 1].pos, out[i].pos);
        cr_assert_leq(out[i].pos, s.n);
        if (out[i].kind == BANK_SNAP_GRID) {
            cr_assert_eq(out[i].pos % 8192, 0);
            grid++;
        }
    }
    cr_assert_eq(grid, (int)(s.n / 8192)); /* 300013 tokens: 73 at 4096 do not fit */
    cr_assert_eq(n, grid + 2);             /* head == user start, genprompt */
    free(s.ids);
}

/* ---- the seed scenario in miniature ------------------------------------------------- */

/* Grows one conversation over many turns through plan → lookup → insert; returns the
 * bank. Each turn restores at least at the previous turn's generation-prompt start. */
static struct bank *grow_conversation(bool anchor, uint64_t budget, struct seq *hist)
{
    struct bank_opts o = opts(anchor);
    o.grid = 1024;
    o.ram_budget = budget;
    struct bank *b = bank_init(&o);
    cr_assert_eq(bank_space_add(b, FP, ROW, SNAP, NULL), HS_OK);
    memset(hist, 0, sizeof *hist);
    turn(hist, T_SYSTEM, 1495, 77);       /* head 1500 */
    int64_t prev_gp = 0;
    for (int t = 0; t < 40; t++) {
        struct seq p = {0};
        for (int64_t i = 0; i < hist->n; i++)
            put(&p, hist->ids[i]);
        turn(&p, T_USER, 100 + (int64_t)(bt_mix((uint64_t)t) % 600), 100 + (uint32_t)t);
        int64_t gp = genprompt(&p);
        struct bank_plan_in in;
        plan_in(&p, &in);
        cr_assert_eq(in.head_len, 1500);
        struct bank_plan_pos out[BANK_PLAN_MAX];
        int64_t r;
        int np = bank_plan(b, FP, NULL, &in, out, &r);
        struct bank_hit hit;
        bank_lookup(b, FP, p.ids, p.n, &hit);
        cr_assert_eq(hit.restore_pos, r);
        if (!budget)
            cr_assert_geq(hit.restore_pos, prev_gp, "turn %d restores below the last "
                          "generation prompt", t);
        if (hit.restore_pos)
            cr_assert_eq(bt_check_hit(b, &hit, p.ids, ROW, SNAP, FP), 0);
        bank_hit_release(b, &hit);
        /* generate an answer ending in <|im_end|>; the history re-renders it exactly */
        content(&p, 200 + (int64_t)(bt_mix((uint64_t)t + 99) % 400), 500 + (uint32_t)t);
        put(&p, T_IM_END);
        int64_t pos[BANK_PLAN_MAX + 1];
        enum bank_snap_kind kind[BANK_PLAN_MAX + 1];
        for (int i = 0; i < np; i++) {
            pos[i] = out[i].pos;
            kind[i] = out[i].kind;
        }
        pos[np] = p.n;
        kind[np] = BANK_SNAP_END;
        cr_assert_eq(bt_insert(b, FP, p.ids, p.n, pos, kind, np + 1, ROW, SNAP, FP), HS_OK);
        put(&p, T_NL);
        free(hist->ids);
        *hist = p;
        prev_gp = gp;
    }
    cr_assert_gt(hist->n, 20000);
    return b;
}

static int64_t new_session_restore(struct bank *b, enum bank_reason *reason)
{
    struct seq s = {0};
    turn(&s, T_SYSTEM, 1495, 77);
    turn(&s, T_USER, 400, 4242);
    genprompt(&s);
    struct bank_hit hit;
    bank_lookup(b, FP, s.ids, s.n, &hit);
    int64_t r = hit.restore_pos;
    *reason = hit.reason;
    if (r)
        cr_assert_eq(bt_check_hit(b, &hit, s.ids, ROW, SNAP, FP), 0);
    cr_assert_eq(hit.match_len, 1503); /* shares "<|im_start|>user\n" too */
    bank_hit_release(b, &hit);
    free(s.ids);
    return r;
}

Test(bank_seed, a_new_session_restores_at_the_head_end_after_a_long_chat)
{
    struct seq hist;
    struct bank *b = grow_conversation(true, 0, &hist);
    struct bank_stats st;
    bank_stats_get(b, &st);
    cr_assert_eq(st.snaps_by_kind[BANK_SNAP_HEAD], 1);
    cr_assert_leq(st.n_snaps, 8 + 1, "one path: at most the cap plus the anchor");
    cr_assert_gt(st.evictions[BANK_EVICT_THIN], 0);
    enum bank_reason why;
    cr_assert_eq(new_session_restore(b, &why), 1500);
    cr_assert_eq(why, BANK_REASON_NO_SNAPSHOT);
    free(hist.ids);
    bank_free(b);
}

Test(bank_seed, without_the_anchor_the_head_end_is_thinned_away)
{
    struct seq hist;
    struct bank *b = grow_conversation(false, 0, &hist);
    struct bank_stats st;
    bank_stats_get(b, &st);
    cr_assert_eq(st.snaps_by_kind[BANK_SNAP_HEAD], 0);
    cr_assert_leq(st.n_snaps, 8);
    enum bank_reason why;
    int64_t r = new_session_restore(b, &why);
    cr_assert_eq(why, BANK_REASON_THINNED);
    cr_assert_lt(r, 1500);
    cr_assert_eq(r, 1024, "the oldest grid snapshot survives as the oldest");
    free(hist.ids);
    bank_free(b);
}

Test(bank_seed, the_anchor_survives_a_tight_budget)
{
    struct seq hist;
    /* the unbudgeted conversation holds ~25k tokens * 12 bytes; allow a third */
    struct bank *b = grow_conversation(true, 100 * 1024, &hist);
    struct bank_stats st;
    bank_stats_get(b, &st);
    cr_assert_leq(st.total_bytes, 100 * 1024);
    cr_assert_gt(st.evictions[BANK_EVICT_SNAP] + st.evictions[BANK_EVICT_DEAD_KV], 0);
    cr_assert_eq(st.evictions[BANK_EVICT_PROTECTED], 0);
    enum bank_reason why;
    cr_assert_eq(new_session_restore(b, &why), 1500);
    free(hist.ids);
    bank_free(b);
}
