/* test_sample.c — the sampler: greedy and ties, the temperature → 0 limit, determinism per
 * seed, empirical distributions against a brute-force reference written here (sort, libm
 * softmax, cuts, renormalise), exact candidate sets of top-k / top-p / min-p, penalties
 * against a brute-force window, option validation, and a 248k-vocabulary timing (printed,
 * not asserted). */
#include <criterion/criterion.h>
#include <float.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static struct sampler_opts opts_plain(float temp, int top_k, float top_p, float min_p,
                                      uint64_t seed)
{
    struct sampler_opts o;
    sampler_opts_default(&o);
    o.temperature = temp;
    o.top_k = top_k;
    o.top_p = top_p;
    o.min_p = min_p;
    o.seed = seed;
    return o;
}

static struct sampler *new_or_die(const struct sampler_opts *o, int64_t n_vocab)
{
    struct sampler *s = sampler_new(o, n_vocab);
    cr_assert_not_null(s);
    return s;
}

static uint64_t lcg_state;
static uint32_t lcg_next(void)
{
    lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(lcg_state >> 33);
}
/* uniform in [lo, hi) */
static float lcg_float(float lo, float hi)
{
    return lo + (hi - lo) * (float)((double)lcg_next() / 2147483648.0);
}

static int32_t argmax_lowest(const float *l, int64_t n)
{
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (l[i] > l[best])
            best = i;
    return (int32_t)best;
}

/* Reference distribution: rank by (logit desc, id asc), keep top_k, softmax with libm over
 * the kept, top-p prefix, min-p, renormalise. p[id] = probability; returns the number of
 * survivors and writes the smallest distance of a cut test to its threshold to *margin so
 * callers can refuse cases that sit on a rounding boundary; rank_of (may be NULL) gets
 * each id's rank. */
static const float *cmp_logits; /* for cmp_rank; the tests run one at a time per process */
static int cmp_rank(const void *pa, const void *pb)
{
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    if (cmp_logits[a] != cmp_logits[b])
        return cmp_logits[a] > cmp_logits[b] ? -1 : 1;
    return a < b ? -1 : a > b;
}

static int64_t ref_dist(const float *l, int64_t n, const struct sampler_opts *o, double *p,
                        double *margin, int32_t *rank_of)
{
    int32_t *ord = malloc((size_t)n * sizeof *ord);
    for (int64_t i = 0; i < n; i++)
        ord[i] = (int32_t)i;
    cmp_logits = l;
    qsort(ord, (size_t)n, sizeof *ord, cmp_rank);
    if (rank_of)
        for (int64_t i = 0; i < n; i++)
            rank_of[ord[i]] = (int32_t)i;
    int64_t k = (o->top_k > 0 && o->top_k < n) ? o->top_k : n;
    double *q = calloc((size_t)k, sizeof *q), z = 0;
    for (int64_t i = 0; i < k; i++)
        z += (q[i] = exp(((double)l[ord[i]] - l[ord[0]]) / o->temperature));
    for (int64_t i = 0; i < k; i++)
        q[i] /= z;
    *margin = 1.0;
    int64_t keep = k;
    if (o->top_p < 1.0f) {
        double cum = 0;
        for (int64_t i = 0; i < k; i++) {
            cum += q[i];
            if (fabs(cum - o->top_p) < *margin)
                *margin = fabs(cum - o->top_p);
            if (cum >= o->top_p) {
                keep = i + 1;
                break;
            }
        }
    }
    if (o->min_p > 0.0f) {
        for (int64_t i = 0; i < keep; i++) {
            double d = q[i] - o->min_p * q[0];
            if (i > 0 && fabs(d) < *margin) /* the best token is always kept */
                *margin = fabs(d);
            if (d < 0) {
                keep = i;
                break;
            }
        }
    }
    double w = 0;
    for (int64_t i = 0; i < keep; i++)
        w += q[i];
    for (int64_t i = 0; i < n; i++)
        p[i] = 0;
    for (int64_t i = 0; i < keep; i++)
        p[ord[i]] = q[i] / w;
    free(q);
    free(ord);
    return keep;
}

/* Draw n_draws tokens; hist[id] counts them. */
static void draw_hist(const struct sampler_opts *o, const float *l, int64_t n, int64_t n_draws,
                      int64_t *hist)
{
    struct sampler *s = new_or_die(o, n);
    memset(hist, 0, (size_t)n * sizeof *hist);
    for (int64_t d = 0; d < n_draws; d++) {
        int32_t t = sampler_sample(s, l);
        cr_assert(t >= 0 && t < n, "token %d out of range", t);
        hist[t]++;
    }
    sampler_free(s);
}

/* The support observed equals the reference support exactly, and frequencies are within
 * tol of the reference probabilities. */
static void check_against_ref(const struct sampler_opts *o, const float *l, int64_t n,
                              int64_t n_draws, double tol, const char *what)
{
    double *p = malloc((size_t)n * sizeof *p), margin;
    int64_t *hist = malloc((size_t)n * sizeof *hist);
    ref_dist(l, n, o, p, &margin, NULL);
    cr_assert_gt(margin, 1e-4, "%s: case sits on a cut boundary (margin %g)", what, margin);
    draw_hist(o, l, n, n_draws, hist);
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        cr_assert_eq(hist[i] > 0, p[i] > 0, "%s: token %lld seen %lld times, p %g", what,
                     (long long)i, (long long)hist[i], p[i]);
        double d = fabs((double)hist[i] / (double)n_draws - p[i]);
        if (d > worst)
            worst = d;
    }
    cr_assert_lt(worst, tol, "%s: max |freq - p| = %g", what, worst);
    free(p);
    free(hist);
}

/* ---- options and lifecycle ---------------------------------------------------------------- */

Test(sample_opts, defaults_are_qwen_non_thinking)
{
    struct sampler_opts o;
    memset(&o, 0x5a, sizeof o);
    sampler_opts_default(&o);
    cr_assert_eq(o.temperature, 0.7f);
    cr_assert_eq(o.top_k, 20);
    cr_assert_eq(o.top_p, 0.8f);
    cr_assert_eq(o.min_p, 0.0f);
    cr_assert_eq(o.repetition_penalty, 1.0f);
    cr_assert_eq(o.presence_penalty, 0.0f);
    cr_assert_eq(o.frequency_penalty, 0.0f);
    cr_assert_eq(o.penalty_last_n, 64);
    cr_assert_eq(o.seed, 0);
}

Test(sample_opts, invalid_options_are_refused)
{
    struct sampler_opts good;
    sampler_opts_default(&good);
    struct sampler *s = sampler_new(&good, 10);
    cr_assert_not_null(s);
    sampler_free(s);
    sampler_free(NULL);
    cr_assert_null(sampler_new(NULL, 10));
    cr_assert_null(sampler_new(&good, 0));
    cr_assert_null(sampler_new(&good, -5));
    cr_assert_null(sampler_new(&good, (int64_t)INT32_MAX + 1));
    struct sampler_opts o;
    o = good; o.temperature = -0.1f;          cr_assert_null(sampler_new(&o, 10));
    o = good; o.temperature = NAN;            cr_assert_null(sampler_new(&o, 10));
    o = good; o.temperature = INFINITY;       cr_assert_null(sampler_new(&o, 10));
    o = good; o.top_k = -1;                   cr_assert_null(sampler_new(&o, 10));
    o = good; o.top_p = 1.5f;                 cr_assert_null(sampler_new(&o, 10));
    o = good; o.top_p = -0.1f;                cr_assert_null(sampler_new(&o, 10));
    o = good; o.top_p = NAN;                  cr_assert_null(sampler_new(&o, 10));
    o = good; o.min_p = 1.01f;                cr_assert_null(sampler_new(&o, 10));
    o = good; o.min_p = NAN;                  cr_assert_null(sampler_new(&o, 10));
    o = good; o.repetition_penalty = 0.0f;    cr_assert_null(sampler_new(&o, 10));
    o = good; o.repetition_penalty = -1.0f;   cr_assert_null(sampler_new(&o, 10));
    o = good; o.presence_penalty = INFINITY;  cr_assert_null(sampler_new(&o, 10));
    o = good; o.frequency_penalty = NAN;      cr_assert_null(sampler_new(&o, 10));
    o = good; o.penalty_last_n = -2;          cr_assert_null(sampler_new(&o, 10));
    /* edges that are valid */
    o = good; o.top_p = 0.0f; o.min_p = 1.0f; o.top_k = 1000; o.penalty_last_n = -1;
    o.presence_penalty = -2.0f;
    s = sampler_new(&o, 10);
    cr_assert_not_null(s);
    sampler_free(s);
}

Test(sample_opts, accept_ignores_out_of_range_tokens)
{
    struct sampler_opts o = opts_plain(0.0f, 0, 1.0f, 0.0f, 0);
    o.presence_penalty = 10.0f;
    struct sampler *s = new_or_die(&o, 4);
    const float l[4] = { 1, 3, 2, 0 };
    sampler_accept(s, -1);
    sampler_accept(s, 4);
    sampler_accept(s, INT32_MAX);
    sampler_accept(NULL, 1);
    cr_assert_eq(sampler_sample(s, l), 1);
    sampler_accept(s, 1);
    cr_assert_eq(sampler_sample(s, l), 2, "an in-range token is penalised");
    sampler_free(s);
}

/* ---- greedy -------------------------------------------------------------------------------- */

Test(sample_greedy, argmax_of_random_logits)
{
    lcg_state = 1;
    float l[1000];
    struct sampler_opts o = opts_plain(0.0f, 20, 0.8f, 0.0f, 0);
    struct sampler *s = new_or_die(&o, 1000);
    for (int trial = 0; trial < 50; trial++) {
        for (int i = 0; i < 1000; i++)
            l[i] = lcg_float(-10, 10);
        float copy[1000];
        memcpy(copy, l, sizeof l);
        cr_assert_eq(sampler_sample(s, l), argmax_lowest(l, 1000));
        cr_assert_eq(memcmp(copy, l, sizeof l), 0, "logits are not modified");
    }
    sampler_free(s);
}

Test(sample_greedy, ties_go_to_the_lowest_id)
{
    const float l[8] = { 1, 4, 2, 7, 0, 7, 7, -1 };
    struct sampler_opts o = opts_plain(0.0f, 0, 1.0f, 0.0f, 0);
    struct sampler *s = new_or_die(&o, 8);
    cr_assert_eq(sampler_sample(s, l), 3);
    sampler_free(s);
}

Test(sample_greedy, nan_and_infinities)
{
    struct sampler_opts o = opts_plain(0.0f, 0, 1.0f, 0.0f, 0);
    struct sampler *s = new_or_die(&o, 5);
    const float a[5] = { NAN, 1, NAN, 2, -INFINITY };
    cr_assert_eq(sampler_sample(s, a), 3, "NaN never wins");
    const float b[5] = { -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY };
    cr_assert_eq(sampler_sample(s, b), 0, "all banned: lowest id");
    const float c[5] = { 1, INFINITY, 3, INFINITY, 2 };
    cr_assert_eq(sampler_sample(s, c), 1);
    sampler_free(s);
    /* the same corner cases when sampling */
    o = opts_plain(1.0f, 0, 1.0f, 0.0f, 9);
    s = new_or_die(&o, 5);
    for (int i = 0; i < 200; i++) {
        cr_assert_eq(sampler_sample(s, b), 0);
        int32_t t = sampler_sample(s, c);
        cr_assert(t == 1 || t == 3, "+inf tokens share the mass, got %d", t);
        cr_assert_neq(sampler_sample(s, a), 0);
    }
    sampler_free(s);
}

Test(sample_greedy, small_temperature_converges_to_argmax)
{
    lcg_state = 2;
    float l[500];
    for (int i = 0; i < 500; i++)
        l[i] = lcg_float(-5, 5);
    l[123] = 5.001f; /* a unique max, 1e-3 above the rest at most */
    static const float temps[] = { 1e-4f, 1e-6f, 1e-20f, 1e-45f };
    static const int topks[] = { 0, 20, 1 };
    for (size_t a = 0; a < HS_ARRAY_LEN(temps); a++) {
        for (size_t b = 0; b < HS_ARRAY_LEN(topks); b++) {
            struct sampler_opts o = opts_plain(temps[a], topks[b], 1.0f, 0.0f, a * 10 + b);
            struct sampler *s = new_or_die(&o, 500);
            for (int d = 0; d < 300; d++)
                cr_assert_eq(sampler_sample(s, l), 123, "T=%g top_k=%d", temps[a], topks[b]);
            sampler_free(s);
        }
    }
}

Test(sample_greedy, top_k_1_equals_greedy)
{
    lcg_state = 3;
    float l[300];
    struct sampler_opts og = opts_plain(0.0f, 0, 1.0f, 0.0f, 0);
    struct sampler_opts ok = opts_plain(1.5f, 1, 1.0f, 0.0f, 77);
    struct sampler *g = new_or_die(&og, 300), *k = new_or_die(&ok, 300);
    for (int trial = 0; trial < 1000; trial++) {
        for (int i = 0; i < 300; i++)
            l[i] = (float)(int)lcg_float(-4, 4); /* integers: many ties */
        cr_assert_eq(sampler_sample(k, l), sampler_sample(g, l));
    }
    sampler_free(g);
    sampler_free(k);
}

/* ---- determinism --------------------------------------------------------------------------- */

static void draw_seq(const struct sampler_opts *o, const float *l, int64_t n, int32_t *out,
                     int count)
{
    struct sampler *s = new_or_die(o, n);
    for (int i = 0; i < count; i++)
        out[i] = sampler_sample(s, l);
    sampler_free(s);
}

Test(sample_determinism, same_seed_same_sequence_other_seed_differs)
{
    enum { N = 2000, DRAWS = 1000 };
    static float l[N];
    lcg_state = 4;
    for (int i = 0; i < N; i++)
        l[i] = lcg_float(-3, 3);
    static const int topks[] = { 20, 0 };
    for (size_t t = 0; t < HS_ARRAY_LEN(topks); t++) {
        struct sampler_opts o = opts_plain(1.0f, topks[t], 0.95f, 0.0f, 12345);
        static int32_t a[DRAWS], b[DRAWS], c[DRAWS];
        draw_seq(&o, l, N, a, DRAWS);
        draw_seq(&o, l, N, b, DRAWS);
        cr_assert_eq(memcmp(a, b, sizeof a), 0, "top_k %d", topks[t]);
        o.seed = 12346;
        draw_seq(&o, l, N, c, DRAWS);
        int same = 0;
        for (int i = 0; i < DRAWS; i++)
            same += a[i] == c[i];
        cr_assert_lt(same, DRAWS / 2, "another seed gives another sequence (%d equal)", same);
    }
}

Test(sample_determinism, top_k_at_or_past_vocab_equals_off)
{
    enum { N = 700, DRAWS = 1000 };
    float l[N];
    lcg_state = 5;
    for (int i = 0; i < N; i++)
        l[i] = lcg_float(-2, 2);
    static int32_t a[DRAWS], b[DRAWS], c[DRAWS];
    struct sampler_opts o = opts_plain(0.9f, 0, 0.9f, 0.01f, 5);
    draw_seq(&o, l, N, a, DRAWS);
    o.top_k = N;
    draw_seq(&o, l, N, b, DRAWS);
    o.top_k = N + 100;
    draw_seq(&o, l, N, c, DRAWS);
    cr_assert_eq(memcmp(a, b, sizeof a), 0);
    cr_assert_eq(memcmp(a, c, sizeof a), 0);
}

Test(sample_determinism, with_penalties_and_accepted_history)
{
    /* Two samplers fed the same tokens stay in lockstep through a wrapping window; a third
     * that skips the first accept diverges while that token is in a's window (the window
     * is part of the input), and may fall back into step once the windows agree again. */
    enum { N = 300, DRAWS = 1000 };
    float l[N];
    lcg_state = 14;
    for (int i = 0; i < N; i++)
        l[i] = lcg_float(-1, 1);
    struct sampler_opts o = opts_plain(1.0f, 0, 0.9f, 0.02f, 21);
    o.repetition_penalty = 1.3f;
    o.presence_penalty = 0.4f;
    o.frequency_penalty = 0.1f;
    o.penalty_last_n = 16;
    struct sampler *a = new_or_die(&o, N), *b = new_or_die(&o, N), *c = new_or_die(&o, N);
    int diverged = 0;
    for (int i = 0; i < DRAWS; i++) {
        int32_t ta = sampler_sample(a, l), tb = sampler_sample(b, l), tc = sampler_sample(c, l);
        cr_assert_eq(ta, tb, "draw %d", i);
        diverged += ta != tc;
        sampler_accept(a, ta);
        sampler_accept(b, tb);
        if (i != 0)
            sampler_accept(c, tc);
    }
    cr_assert_gt(diverged, 0, "a missing accept changed nothing");
    sampler_free(a);
    sampler_free(b);
    sampler_free(c);
}

/* Pinned output: the sampler must give these tokens on every machine and every build.
 * Regenerate only on a deliberate change of the sampling definition. */
Test(sample_determinism, pinned_sequence)
{
    enum { N = 64, DRAWS = 24 };
    float l[N];
    for (int i = 0; i < N; i++)
        l[i] = (float)((i * 37) % 64) / 16.0f - 2.0f;
    struct sampler_opts o = opts_plain(1.0f, 0, 1.0f, 0.0f, 42);
    int32_t got[DRAWS];
    draw_seq(&o, l, N, got, DRAWS);
    static const int32_t want[DRAWS] = {
        38, 24, 22, 37, 33, 53, 60, 39, 53, 10, 22, 50, 27, 5, 60, 32, 29, 39, 41, 41, 38, 12, 43, 29,
    };
    char buf[512] = "";
    for (int i = 0; i < DRAWS; i++)
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%d, ", got[i]);
    cr_assert_eq(memcmp(got, want, sizeof got), 0, "got %s", buf);
}

/* ---- distributions and candidate sets ------------------------------------------------------ */

static const float small_l[8] = { 1.0f, 2.0f, 0.5f, -1.0f, 3.0f, 2.0f, 0.0f, -2.5f };

Test(sample_dist, full_softmax_matches)
{
    struct sampler_opts o = opts_plain(0.8f, 0, 1.0f, 0.0f, 1);
    check_against_ref(&o, small_l, 8, 200000, 0.01, "T=0.8");
    o = opts_plain(2.5f, 0, 1.0f, 0.0f, 2);
    check_against_ref(&o, small_l, 8, 200000, 0.01, "T=2.5");
}

Test(sample_dist, top_k_keeps_the_k_best_with_id_ties)
{
    /* ranks: 4 (3.0), 1 (2.0), 5 (2.0, tie broken by id), 0 (1.0), ... */
    struct sampler_opts o = opts_plain(1.0f, 3, 1.0f, 0.0f, 3);
    check_against_ref(&o, small_l, 8, 200000, 0.01, "top_k 3");
    o.top_k = 2; /* 4 and 1, not 5 */
    check_against_ref(&o, small_l, 8, 200000, 0.01, "top_k 2");
}

Test(sample_dist, top_p_keeps_the_shortest_prefix)
{
    /* T=1: p ≈ .468 (4) .172 (1) .172 (5) .063 (0) .038 (2) ... */
    struct sampler_opts o = opts_plain(1.0f, 0, 0.7f, 0.0f, 4);  /* 4, 1, 5 */
    check_against_ref(&o, small_l, 8, 200000, 0.01, "top_p 0.7");
    o.top_p = 0.9f;                                              /* + 0 and 2 */
    check_against_ref(&o, small_l, 8, 200000, 0.01, "top_p 0.9");
    o.top_p = 0.3f;                                              /* only 4 */
    check_against_ref(&o, small_l, 8, 200000, 0.01, "top_p 0.3");
    o.top_p = 0.0f;                                              /* at least one */
    check_against_ref(&o, small_l, 8, 20000, 0.01, "top_p 0");
    o = opts_plain(1.0f, 4, 0.8f, 0.0f, 5); /* top-p over the renormalised top 4 */
    check_against_ref(&o, small_l, 8, 200000, 0.01, "top_k 4 + top_p 0.8");
}

Test(sample_dist, min_p_drops_the_unlikely)
{
    struct sampler_opts o = opts_plain(1.0f, 0, 1.0f, 0.3f, 6); /* p >= .14: 4, 1, 5 */
    check_against_ref(&o, small_l, 8, 200000, 0.01, "min_p 0.3");
    o.min_p = 0.1f;                                             /* + 0 (.063 >= .047) */
    check_against_ref(&o, small_l, 8, 200000, 0.01, "min_p 0.1");
    o.min_p = 1.0f;                                             /* only the max */
    check_against_ref(&o, small_l, 8, 20000, 0.01, "min_p 1");
    o = opts_plain(0.7f, 5, 0.95f, 0.05f, 7);                   /* all three together */
    check_against_ref(&o, small_l, 8, 200000, 0.01, "top_k 5 + top_p .95 + min_p .05");
}

Test(sample_dist, top_p_grows_the_sorted_prefix_in_a_large_vocab)
{
    /* p_j ∝ exp(-0.003 j) over a permutation of 3000 ids: top-p 0.52 keeps ~245 tokens,
     * more than the first sorted chunk (64). */
    enum { N = 3000 };
    static float l[N];
    static int32_t perm[N];
    lcg_state = 6;
    for (int i = 0; i < N; i++)
        perm[i] = i;
    for (int i = N - 1; i > 0; i--) {
        int j = (int)(lcg_next() % (uint32_t)(i + 1));
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int j = 0; j < N; j++)
        l[perm[j]] = -0.003f * (float)j;
    struct sampler_opts o = opts_plain(1.0f, 0, 0.52f, 0.0f, 8);
    check_against_ref(&o, l, N, 20000, 0.01, "3000-token top_p 0.52");
}

Test(sample_dist, flat_top_p_keeps_lowest_ids)
{
    /* 600 equal logits: each e is exactly 1, so top-p 0.5 keeps exactly ids 0..299, which
     * needs the sorted prefix grown from the first heap (64) to a full radix sort. 40 draws
     * per kept token make a miss a 1e-15 event. */
    enum { N = 600 };
    static float l[N];
    static int64_t hist[N];
    for (int i = 0; i < N; i++)
        l[i] = 0.25f;
    struct sampler_opts o = opts_plain(1.0f, 0, 0.5f, 0.0f, 9);
    draw_hist(&o, l, N, 12000, hist);
    for (int i = 0; i < N; i++)
        cr_assert_eq(hist[i] > 0, i < 300, "token %d seen %lld times", i, (long long)hist[i]);
    o = opts_plain(1.0f, 0, 1.0f, 1.0f, 10); /* min-p 1 keeps all ties with the max */
    draw_hist(&o, l, N, 24000, hist);
    for (int i = 0; i < N; i++)
        cr_assert_gt(hist[i], 0, "token %d", i);
}

Test(sample_dist, nucleus_past_the_heap_sizes_in_248k_vocab)
{
    /* A flat-ish body so the top-p 0.3 nucleus holds thousands of tokens: the sorted prefix
     * grows 64 → 1024 (heap) → all (radix) within one call, and every draw must still
     * fall inside the reference nucleus; some must rank past 1024. */
    enum { N = 248320, DRAWS = 200 };
    float *l = malloc(N * sizeof *l);
    double *p = malloc(N * sizeof *p), margin;
    int32_t *rank = malloc(N * sizeof *rank);
    lcg_state = 12;
    for (int i = 0; i < N; i++)
        l[i] = lcg_float(-4, 4);
    struct sampler_opts o = opts_plain(1.0f, 0, 0.3f, 0.0f, 13);
    int64_t keep = ref_dist(l, N, &o, p, &margin, rank);
    cr_assert_gt(margin, 1e-9, "margin %g", margin);
    cr_assert_gt(keep, 4096, "nucleus %lld", (long long)keep);
    struct sampler *s = new_or_die(&o, N);
    int32_t max_rank = 0;
    for (int d = 0; d < DRAWS; d++) {
        int32_t t = sampler_sample(s, l);
        cr_assert_lt(rank[t], keep, "token %d of rank %d is outside the nucleus %lld", t,
                     rank[t], (long long)keep);
        if (rank[t] > max_rank)
            max_rank = rank[t];
    }
    cr_assert_gt(max_rank, 1024);
    sampler_free(s);
    free(l);
    free(p);
    free(rank);
}

/* ---- penalties ------------------------------------------------------------------------------ */

static struct sampler *greedy_pen(float rp, float pres, float freq, int64_t last_n, int64_t n)
{
    struct sampler_opts o = opts_plain(0.0f, 0, 1.0f, 0.0f, 0);
    o.repetition_penalty = rp;
    o.presence_penalty = pres;
    o.frequency_penalty = freq;
    o.penalty_last_n = last_n;
    return new_or_die(&o, n);
}

static int32_t greedy_after(float rp, float pres, float freq, int64_t last_n,
                            const int32_t *hist, int n_hist, const float *l, int64_t n)
{
    struct sampler *s = greedy_pen(rp, pres, freq, last_n, n);
    for (int i = 0; i < n_hist; i++)
        sampler_accept(s, hist[i]);
    int32_t t = sampler_sample(s, l);
    sampler_free(s);
    return t;
}

Test(sample_penalty, repetition_divides_positive_multiplies_negative)
{
    const int32_t h0[] = { 0 };
    const float pos[4] = { 2.0f, 1.5f, -1.0f, -0.5f };
    cr_assert_eq(greedy_after(1.0f, 0, 0, 64, h0, 1, pos, 4), 0);
    cr_assert_eq(greedy_after(1.25f, 0, 0, 64, h0, 1, pos, 4), 0, "2/1.25 = 1.6 > 1.5");
    cr_assert_eq(greedy_after(1.5f, 0, 0, 64, h0, 1, pos, 4), 1, "2/1.5 = 1.33 < 1.5");
    const float neg[3] = { -1.0f, -1.2f, -5.0f };
    cr_assert_eq(greedy_after(1.1f, 0, 0, 64, h0, 1, neg, 3), 0, "-1.1 > -1.2");
    cr_assert_eq(greedy_after(1.5f, 0, 0, 64, h0, 1, neg, 3), 1, "-1.5 < -1.2");
    /* rp < 1 rewards: -1.2 * 0.5 = -0.6 beats -1 */
    const int32_t h1[] = { 1 };
    cr_assert_eq(greedy_after(0.5f, 0, 0, 64, h1, 1, neg, 3), 1);
    /* the count does not matter for repetition */
    const int32_t h000[] = { 0, 0, 0 };
    cr_assert_eq(greedy_after(1.25f, 0, 0, 64, h000, 3, pos, 4), 0);
}

Test(sample_penalty, presence_once_frequency_per_occurrence)
{
    const float l[2] = { 3.0f, 2.5f };
    const int32_t h[] = { 0, 0, 0 };
    cr_assert_eq(greedy_after(1, 0.4f, 0, 64, h, 3, l, 2), 0, "3 - 0.4 once = 2.6");
    cr_assert_eq(greedy_after(1, 0.6f, 0, 64, h, 3, l, 2), 1, "3 - 0.6 = 2.4");
    cr_assert_eq(greedy_after(1, 0, 0.2f, 64, h, 2, l, 2), 0, "3 - 2*0.2 = 2.6");
    cr_assert_eq(greedy_after(1, 0, 0.2f, 64, h, 3, l, 2), 1, "3 - 3*0.2 = 2.4");
    cr_assert_eq(greedy_after(1, 0.1f, 0.1f, 64, h, 3, l, 2), 0, "3 - .1 - .3 = 2.6");
    cr_assert_eq(greedy_after(1, 0.3f, 0.1f, 64, h, 3, l, 2), 1, "3 - .3 - .3 = 2.4");
    /* negative presence rewards */
    const int32_t h1[] = { 1 };
    cr_assert_eq(greedy_after(1, -0.6f, 0, 64, h1, 1, l, 2), 1);
}

Test(sample_penalty, window_forgets_old_tokens)
{
    const float l[3] = { 3.0f, 2.5f, 0.0f };
    const int32_t h[] = { 0, 2, 2 };
    cr_assert_eq(greedy_after(1, 1.0f, 0, 3, h, 3, l, 3), 1, "0 is in a window of 3");
    cr_assert_eq(greedy_after(1, 1.0f, 0, 2, h, 3, l, 3), 0, "0 left a window of 2");
    cr_assert_eq(greedy_after(1, 1.0f, 0, 0, h, 3, l, 3), 0, "window 0: no penalty");
    cr_assert_eq(greedy_after(1, 1.0f, 0, -1, h, 3, l, 3), 1, "-1: everything");
    int32_t longh[1000];
    longh[0] = 0;
    for (int i = 1; i < 1000; i++)
        longh[i] = 2;
    cr_assert_eq(greedy_after(1, 1.0f, 0, -1, longh, 1000, l, 3), 1);
    cr_assert_eq(greedy_after(1, 1.0f, 0, 999, longh, 1000, l, 3), 0);
    cr_assert_eq(greedy_after(1, 1.0f, 0, 1000, longh, 1000, l, 3), 1);
}

/* The window, counts and formulas against a brute force over the last_n accepted tokens,
 * on a vocabulary small enough that the penalties often move the argmax. The float
 * operations are the same as in the definition, in the same order, so the argmax agrees
 * exactly. */
Test(sample_penalty, matches_brute_force_window)
{
    enum { N = 12, H = 200 };
    static const float rps[] = { 1.0f, 1.3f, 0.8f };
    static const float pres[] = { 0.0f, 0.5f, -0.3f };
    static const float freqs[] = { 0.0f, 0.25f };
    static const int64_t lastns[] = { -1, 0, 1, 3, 7, 64 };
    lcg_state = 7;
    int moved = 0;
    for (int trial = 0; trial < 3000; trial++) {
        float l[N], pen[N];
        int32_t hist[H];
        for (int i = 0; i < N; i++)
            l[i] = lcg_float(-3, 3);
        int n_hist = (int)(lcg_next() % H);
        for (int i = 0; i < n_hist; i++)
            hist[i] = (int32_t)(lcg_next() % N);
        float rp = rps[lcg_next() % 3], pr = pres[lcg_next() % 3], fq = freqs[lcg_next() % 2];
        int64_t last_n = lastns[lcg_next() % 6];
        int start = last_n < 0 || last_n >= n_hist ? 0 : n_hist - (int)last_n;
        int64_t count[N] = { 0 };
        for (int i = start; i < n_hist; i++)
            count[hist[i]]++;
        memcpy(pen, l, sizeof l);
        for (int t = 0; t < N; t++) {
            if (count[t] == 0)
                continue;
            float v = pen[t];
            if (rp != 1.0f)
                v = v > 0.0f ? v / rp : v * rp;
            v -= pr;
            v -= fq * (float)count[t];
            pen[t] = v;
        }
        int32_t want = argmax_lowest(pen, N);
        moved += want != argmax_lowest(l, N);
        cr_assert_eq(greedy_after(rp, pr, fq, last_n, hist, n_hist, l, N), want,
                     "trial %d: rp %g pres %g freq %g last_n %lld n_hist %d", trial, rp, pr,
                     fq, (long long)last_n, n_hist);
    }
    cr_assert_gt(moved, 300, "penalties moved the argmax in only %d trials", moved);
}

Test(sample_penalty, sampling_sees_penalties_too)
{
    /* T=1, top_k 0: a presence penalty of ln 4 makes token 0 four times less likely. */
    const float l[2] = { 0.0f, 0.0f };
    struct sampler_opts o = opts_plain(1.0f, 0, 1.0f, 0.0f, 11);
    o.presence_penalty = (float)log(4.0);
    struct sampler *s = new_or_die(&o, 2);
    sampler_accept(s, 0);
    int n0 = 0;
    for (int i = 0; i < 100000; i++)
        n0 += sampler_sample(s, l) == 0;
    sampler_free(s);
    cr_assert_lt(fabs(n0 / 100000.0 - 0.2), 0.01, "freq of 0: %g", n0 / 100000.0);
}

/* ---- large vocabulary ---------------------------------------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Timing for n_vocab 248320 (printed, not asserted) and the top-k bound checked against a
 * brute force: every token drawn with top_k 20 ranks among the 20 largest logits. */
Test(sample_large, vocab_248320)
{
    enum { N = 248320, CALLS = 100 };
    float *l = malloc(N * sizeof *l);
    lcg_state = 8;
    for (int i = 0; i < N; i++) /* roughly LLM-like: a broad body and a few strong tokens */
        l[i] = lcg_float(-6, 6) + lcg_float(-6, 6);
    for (int i = 0; i < 8; i++)
        l[lcg_next() % N] = 14.0f + (float)i * 0.5f;

    struct sampler_opts o;
    sampler_opts_default(&o);
    o.seed = 99;
    struct sampler *s = new_or_die(&o, N);
    double t0 = now_s();
    for (int c = 0; c < CALLS; c++) {
        int32_t t = sampler_sample(s, l);
        int above = 0; /* tokens that rank before t */
        for (int i = 0; i < N && above < 20; i++)
            above += l[i] > l[t] || (l[i] == l[t] && i < t);
        cr_assert_lt(above, 20, "token %d is not in the top 20", t);
        (void)t;
    }
    double t_defaults = now_s() - t0;
    sampler_free(s);

    /* The brute-force check above dominates that loop; time the sampler alone. */
    const struct { const char *name; int top_k; float top_p; float min_p; } cfg[] = {
        { "defaults (T .7, top_k 20, top_p .8)", 20, 0.8f, 0.0f },
        { "top_k 0, top_p .8", 0, 0.8f, 0.0f },
        { "top_k 0, top_p 1", 0, 1.0f, 0.0f },
        { "top_k 0, min_p .05", 0, 1.0f, 0.05f },
    };
    for (size_t k = 0; k < HS_ARRAY_LEN(cfg); k++) {
        o.top_k = cfg[k].top_k;
        o.top_p = cfg[k].top_p;
        o.min_p = cfg[k].min_p;
        s = new_or_die(&o, N);
        double t1 = now_s();
        for (int c = 0; c < CALLS; c++)
            (void)sampler_sample(s, l);
        double dt = now_s() - t1;
        sampler_free(s);
        fprintf(stderr, "sample_large: n_vocab %d, %s: %.3f ms/sample\n", N, cfg[k].name,
                dt * 1e3 / CALLS);
    }
    o.temperature = 0.0f;
    s = new_or_die(&o, N);
    double t2 = now_s();
    for (int c = 0; c < CALLS; c++)
        (void)sampler_sample(s, l);
    fprintf(stderr, "sample_large: n_vocab %d, greedy: %.3f ms/sample (checked loop %.3f)\n",
            N, (now_s() - t2) * 1e3 / CALLS, t_defaults * 1e3 / CALLS);
    sampler_free(s);
    free(l);
}

/* ---- the vectorised scans: every lane, every tail ------------------------------------------ */

/* What the sampler makes of a logit before ranking: NaN → −inf, +inf → FLT_MAX, −0 → +0. */
static float ref_clean(float v)
{
    if (isnan(v))
        return -INFINITY;
    if (v > FLT_MAX)
        return FLT_MAX;
    return v == 0.0f ? 0.0f : v;
}

/* Logits with ties (a coarse grid) and the special values at random places, so that the
 * best, its ties and the specials fall in every lane of a block and in the scalar tail. */
static void special_logits(float *l, int64_t n, bool with_inf)
{
    static const float specials[] = { NAN, -INFINITY, -0.0f, 0.0f, FLT_MAX, -FLT_MAX, INFINITY };
    const int n_special = with_inf ? 7 : 4;
    for (int64_t i = 0; i < n; i++) {
        uint32_t r = lcg_next();
        l[i] = r % 5 == 0 ? specials[(r / 5) % (uint32_t)n_special] : (float)((int)(r % 17) - 8) * 0.25f;
    }
}

Test(sample_scan, greedy_over_every_lane_and_tail)
{
    lcg_state = 21;
    float l[1100], clean[1100];
    for (int64_t n = 1; n <= 1100; n += n < 70 ? 1 : 97) {
        struct sampler_opts plain = opts_plain(0.0f, 0, 1.0f, 0.0f, 0);
        struct sampler_opts pen = plain; /* a penalty on: the copy-then-argmax path */
        pen.repetition_penalty = 1.5f;
        struct sampler *a = new_or_die(&plain, n), *b = new_or_die(&pen, n);
        for (int trial = 0; trial < 40; trial++) {
            special_logits(l, n, true);
            if (trial % 8 == 7) /* all banned */
                for (int64_t i = 0; i < n; i++)
                    l[i] = trial % 16 == 7 ? NAN : -INFINITY;
            for (int64_t i = 0; i < n; i++)
                clean[i] = ref_clean(l[i]);
            int32_t want = argmax_lowest(clean, n);
            cr_assert_eq(sampler_sample(a, l), want, "n %lld trial %d", (long long)n, trial);
            cr_assert_eq(sampler_sample(b, l), want, "n %lld trial %d (copy path)", (long long)n, trial);
        }
        sampler_free(a);
        sampler_free(b);
    }
}

/* With an enormous temperature every finite candidate has e ≈ 1, so many draws return each
 * of the top-k tokens: the set drawn is the set the heap selected, ties broken by id. */
Test(sample_scan, top_k_set_over_every_lane_and_tail)
{
    lcg_state = 22;
    static float l[5000], clean[5000];
    static int32_t rank[5000];
    static const int64_t sizes[] = { 17, 20, 21, 31, 33, 47, 100, 1001, 4099 };
    static const int ks[] = { 1, 3, 16, 20 };
    for (size_t si = 0; si < HS_ARRAY_LEN(sizes); si++) {
        const int64_t n = sizes[si];
        for (size_t ki = 0; ki < HS_ARRAY_LEN(ks); ki++) {
            special_logits(l, n, false);
            for (int64_t i = 0; i < n; i++) {
                clean[i] = ref_clean(l[i]);
                rank[i] = (int32_t)i;
            }
            cmp_logits = clean;
            qsort(rank, (size_t)n, sizeof *rank, cmp_rank);
            bool want[5000] = { false };
            for (int k = 0; k < ks[ki]; k++)
                want[rank[k]] = clean[rank[k]] > -INFINITY;
            struct sampler_opts o = opts_plain(1e30f, ks[ki], 1.0f, 0.0f, 7 + si);
            struct sampler *s = new_or_die(&o, n);
            bool got[5000] = { false };
            for (int d = 0; d < 60 * ks[ki]; d++) {
                int32_t t = sampler_sample(s, l);
                cr_assert(want[t], "n %lld top_k %d: token %d is not among the best", (long long)n, ks[ki], t);
                got[t] = true;
            }
            for (int64_t i = 0; i < n; i++)
                cr_assert(got[i] == want[i], "n %lld top_k %d: token %lld never drawn", (long long)n, ks[ki], (long long)i);
            sampler_free(s);
        }
    }
}

Test(sample_opts, check_names_the_bad_option)
{
    struct sampler_opts good, o;
    sampler_opts_default(&good);
    struct hs_err err = {0};
    cr_assert_eq(sampler_opts_check(&good, &err), HS_OK);
    static const struct { const char *name; int field; float v; } cases[] = {
        { "temperature", 0, -1.0f }, { "top_k", 1, -3.0f }, { "top_p", 2, 2.0f }, { "min_p", 3, NAN },
        { "repetition_penalty", 4, 0.0f }, { "presence_penalty", 5, INFINITY }, { "frequency_penalty", 6, NAN },
        { "penalty_last_n", 7, -2.0f },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        o = good;
        switch (cases[i].field) {
        case 0: o.temperature = cases[i].v; break;
        case 1: o.top_k = (int)cases[i].v; break;
        case 2: o.top_p = cases[i].v; break;
        case 3: o.min_p = cases[i].v; break;
        case 4: o.repetition_penalty = cases[i].v; break;
        case 5: o.presence_penalty = cases[i].v; break;
        case 6: o.frequency_penalty = cases[i].v; break;
        default: o.penalty_last_n = (int64_t)cases[i].v; break;
        }
        struct hs_err e = {0};
        cr_assert_eq(sampler_opts_check(&o, &e), HS_ERR_INVALID, "%s", cases[i].name);
        cr_assert(strstr(e.msg, cases[i].name) != NULL, "message for %s: %s", cases[i].name, e.msg);
        cr_assert_null(sampler_new(&o, 10));
    }
}
