/*
 * sample.c — turning one row of logits into one token: penalties, temperature, top-k,
 * softmax, top-p, min-p and a seeded draw, reproducible bit for bit on every machine.
 *
 * Design note
 * -----------
 * The pipeline, in this fixed order (temperature > 0):
 *
 *   logits ──copy──▶ work (NaN → −inf, +inf → FLT_MAX, −0 → +0)
 *     ──penalties (tokens in the window only)──▶ work
 *     ──order by (work desc, id asc), first K = top_k (or the whole vocabulary)──▶ cand
 *     ──e_i = exp(work_i/T − work_0/T) in double; Z = Σ e over the K candidates──▶
 *     ──top-p: shortest prefix with Σ e ≥ top_p·Z; min-p: drop e_i < min_p (e_0 = 1)──▶
 *     ──target = u·W (W = Σ e over the survivors); walk the sorted survivors──▶ token
 *
 * temperature == 0 is greedy: the argmax of the penalised logits, ties to the lowest id;
 * no random number is drawn. Otherwise exactly one uniform is drawn per call, however
 * few candidates survive, so the generator's position depends only on the call count.
 *
 * Penalties, for each distinct token t among the last penalty_last_n accepted tokens
 * (count c ≥ 1), in float, in this order:  l = l > 0 ? l / rp : l * rp;  l -= presence;
 * l -= frequency · c.  The window is a ring buffer (grown up to penalty_last_n) plus a
 * count table and a list of the distinct tokens in it, so a call costs O(distinct), not
 * O(n_vocab), beyond the copy. penalty_last_n == −1 keeps every accepted token (no ring).
 * The caller accepts every token it wants the penalties to see, generated ones included:
 * sampler_sample does not accept what it returns.
 *
 * Numerics. The softmax is in double with our own exp (range reduction by ln2 in two parts
 * and a degree-13 Taylor polynomial, times 2^k built from bits; 0 below −708): every step
 * is an IEEE-754 basic operation, so with -ffp-contract=off and FLT_EVAL_METHOD 0 the same
 * inputs give the same bits on every machine, whatever its libm. Z is summed in sorted
 * order over the top-k set, or in id order over the whole vocabulary when top-k is off
 * (it then needs no sort). Probabilities are never formed: the cuts compare unnormalised
 * masses (Σ e ≥ top_p·Z, and e_i < min_p since the best token's e is exactly 1), the same
 * tests up to one rounding, and renormalisation is implicit in W. With top-k off and
 * min-p the only cut, Z is not needed and e is computed only along the walked prefix.
 *
 * Sorting. Both methods produce the one order (work desc, id asc), so their results are
 * interchangeable and a prefix never changes as it grows. A bounded heap selects the
 * first k (O(n log k), nearly O(n) for small k: most tokens lose to the heap's worst at
 * the first comparison) and is then heap-sorted in place; past k = 1024 or n/8, an LSD
 * radix sort over the float bits, stable and fed in id order, sorts everything. With
 * top_k on, the K candidates are selected at once. With top_k off the sorted prefix grows
 * lazily (64, 1024, all) only as far as the top-p/min-p cut or the draw walks, so a peaked
 * distribution never sorts the vocabulary; a flat one ends in a full sort.
 *
 * Speed. A call reads the whole row at least once (248k logits for Qwen3.5 = 1 MB), so the
 * three full scans (the cleaning copy, greedy's argmax, the heap's test against its worst)
 * run in 4-wide generic vectors, sixteen values per step: lane-wise compares and selects,
 * no arithmetic across lanes, the same result as the scalar loop to the bit (test_sample.c
 * sample_scan). The default settings went from about 0.5 to 0.12 ms per call on a loaded
 * AVX-512 EPYC, which is what a step with many streams pays once per stream.
 *
 * PRNG: xoshiro256** seeded by four splitmix64 outputs from the seed; one uniform double
 * in [0, 1) per draw from the top 53 bits.
 *
 * Defaults (sampler_opts_default): temperature 0.7, top_p 0.8, top_k 20, min_p 0 — Qwen's
 * recommended non-thinking settings for the Qwen3 family, and what a request that names
 * no sampling options should get; all penalties off (1 / 0 / 0) because they change what
 * the model would say and Qwen recommends them only against endless repetition;
 * penalty_last_n 64 (a common window) so that turning a penalty on alone is meaningful;
 * seed 0 (callers that want variety pass their own).
 *
 * Invariants:
 *   1. sampler_sample is a pure function of (options, seed, number of earlier non-greedy
 *      calls, the accepted tokens in the window, the logits); it never reads the clock and
 *      does not modify the logits. It allocates only once: the radix scratch, on the
 *      first call that needs a full sort.
 *   2. The candidate order is (penalised logit desc, id asc); every sum and every walk
 *      follows it (or id order for Z over the whole vocabulary).
 *   3. The returned token always has e > 0 unless every logit is −inf/NaN, in which case
 *      it is the lowest such id (0) — the same answer greedy gives.
 *   4. top_k ≥ n_vocab behaves exactly like top_k = 0; top_p = 1 and min_p = 0 are off.
 *   5. Options are validated by sampler_new (NULL when invalid); tokens outside
 *      [0, n_vocab) passed to sampler_accept are ignored.
 */
#include "engine/engine.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* Excess precision (x87) would change the rounding of every step, and the 1.5·2^52
 * rounding trick in exp_det with it. */
#if !defined(FLT_EVAL_METHOD) || FLT_EVAL_METHOD != 0
#error "sample.c needs FLT_EVAL_METHOD == 0 for machine-independent results"
#endif

struct sampler {
    struct sampler_opts o;
    int64_t n_vocab;
    uint64_t rng[4];     /* xoshiro256** state */
    float *work;         /* (n_vocab) penalised logits of the current call */
    int32_t *order;      /* (n_vocab) order[0..n_sorted) are the best tokens, best first */
    int64_t n_sorted;
    double *ev;          /* (n_vocab) e of each token by id; valid for the candidates only */
    uint32_t *rkey[2];   /* (n_vocab) radix sort scratch: keys ... */
    int32_t *rid;        /* (n_vocab) ... and the ids moving with them */

    /* penalty window; all NULL/0 when no penalty is on or penalty_last_n == 0 */
    bool track;
    int64_t *count;      /* (n_vocab) occurrences in the window */
    int32_t *distinct;   /* (n_distinct) tokens with count > 0, in no particular order */
    int32_t *where;      /* (n_vocab) index of a token in distinct, valid while count > 0 */
    int64_t n_distinct;
    int32_t *ring;       /* (ring_cap) the window, oldest at ring_head once full */
    int64_t ring_cap, ring_len, ring_head;
};

/* ---- PRNG ------------------------------------------------------------------------------ */

static uint64_t splitmix64_next(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl64(uint64_t v, int k) { return (v << k) | (v >> (64 - k)); }

static uint64_t rng_next(uint64_t st[4])
{
    uint64_t out = rotl64(st[1] * 5, 7) * 9;
    uint64_t t = st[1] << 17;
    st[2] ^= st[0];
    st[3] ^= st[1];
    st[1] ^= st[2];
    st[0] ^= st[3];
    st[2] ^= t;
    st[3] = rotl64(st[3], 45);
    return out;
}

/* Uniform in [0, 1): the top 53 bits, exactly representable. */
static double rng_uniform(uint64_t st[4]) { return (double)(rng_next(st) >> 11) * 0x1.0p-53; }

/* ---- deterministic exp ----------------------------------------------------------------- */

/* exp(x) for x <= 0 from basic operations only; below −708 (and for −inf, NaN) it is 0,
 * which keeps every result a normal double whose scale 2^k can be built from bits (no
 * ldexp, no floor: both are libm calls on baseline x86-64). k is x/ln2 rounded to nearest
 * by the 1.5·2^52 trick; ln2 is split so that k·LN2_HI is exact for |k| < 2^21; the
 * Taylor polynomial's truncation error on |r| <= ln2/2 is below 1e-17 relative.
 * exp(0) is exactly 1 (invariant used by min-p). Tokens 708 nats below the best carry
 * < 1e-307 of its mass, so flushing them changes no cut and no draw that matters. */
static inline double exp_det(double x)
{
    static const double LN2_HI = 6.93147180369123816490e-01; /* 32 significant bits */
    static const double LN2_LO = 1.90821492927058770002e-10;
    static const double INV_LN2 = 1.44269504088896338700e+00;
    static const double ROUND = 0x1.8p52;
    if (!(x > -708.0))
        return 0.0;
    double k = (x * INV_LN2 + ROUND) - ROUND;
    double r = (x - k * LN2_HI) - k * LN2_LO;
    double p = 1.0 / 6227020800.0;            /* 1/13! */
    p = p * r + 1.0 / 479001600.0;            /* 1/12! */
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    /* k in [-1021, 0]: 2^k is a normal double */
    uint64_t bits = (uint64_t)((int64_t)k + 1023) << 52;
    double scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

/* ---- options --------------------------------------------------------------------------- */

void sampler_opts_default(struct sampler_opts *o)
{
    memset(o, 0, sizeof *o);
    o->temperature = 0.7f;
    o->top_k = 20;
    o->top_p = 0.8f;
    o->min_p = 0.0f;
    o->repetition_penalty = 1.0f;
    o->presence_penalty = 0.0f;
    o->frequency_penalty = 0.0f;
    o->penalty_last_n = 64;
    o->seed = 0;
}

static bool opts_valid(const struct sampler_opts *o)
{
    /* written so that NaN fails every test */
    return o->temperature >= 0.0f && isfinite(o->temperature) && o->top_k >= 0 &&
           o->top_p >= 0.0f && o->top_p <= 1.0f && o->min_p >= 0.0f && o->min_p <= 1.0f &&
           o->repetition_penalty > 0.0f && isfinite(o->repetition_penalty) &&
           isfinite(o->presence_penalty) && isfinite(o->frequency_penalty) &&
           o->penalty_last_n >= -1;
}

int sampler_opts_check(const struct sampler_opts *o, struct hs_err *err)
{
    if (opts_valid(o)) return HS_OK;
    /* the same tests as opts_valid, one by one, for the message */
    if (!(o->temperature >= 0.0f && isfinite(o->temperature)))
        return hs_err_set(err, HS_ERR_INVALID, "sampling: temperature %g is not a finite value >= 0", (double)o->temperature);
    if (o->top_k < 0) return hs_err_set(err, HS_ERR_INVALID, "sampling: top_k %d is negative", (int)o->top_k);
    if (!(o->top_p >= 0.0f && o->top_p <= 1.0f))
        return hs_err_set(err, HS_ERR_INVALID, "sampling: top_p %g is not in [0, 1]", (double)o->top_p);
    if (!(o->min_p >= 0.0f && o->min_p <= 1.0f))
        return hs_err_set(err, HS_ERR_INVALID, "sampling: min_p %g is not in [0, 1]", (double)o->min_p);
    if (!(o->repetition_penalty > 0.0f && isfinite(o->repetition_penalty)))
        return hs_err_set(err, HS_ERR_INVALID, "sampling: repetition_penalty %g is not a finite value > 0",
                          (double)o->repetition_penalty);
    if (!isfinite(o->presence_penalty))
        return hs_err_set(err, HS_ERR_INVALID, "sampling: presence_penalty is not finite");
    if (!isfinite(o->frequency_penalty))
        return hs_err_set(err, HS_ERR_INVALID, "sampling: frequency_penalty is not finite");
    return hs_err_set(err, HS_ERR_INVALID, "sampling: penalty_last_n %lld is below -1", (long long)o->penalty_last_n);
}

/* ---- lifecycle ------------------------------------------------------------------------- */

struct sampler *sampler_new(const struct sampler_opts *o, int64_t n_vocab)
{
    if (!o || n_vocab <= 0 || n_vocab > INT32_MAX || !opts_valid(o))
        return NULL;
    struct sampler *s = hs_calloc(1, sizeof *s);
    s->o = *o;
    s->n_vocab = n_vocab;
    uint64_t sm = o->seed;
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix64_next(&sm);
    s->work = hs_malloc((size_t)n_vocab * sizeof *s->work);
    s->order = hs_malloc((size_t)n_vocab * sizeof *s->order);
    s->ev = hs_malloc((size_t)n_vocab * sizeof *s->ev);
    s->track = (o->repetition_penalty != 1.0f || o->presence_penalty != 0.0f ||
                o->frequency_penalty != 0.0f) && o->penalty_last_n != 0;
    if (s->track) {
        s->count = hs_calloc((size_t)n_vocab, sizeof *s->count);
        s->distinct = hs_malloc((size_t)n_vocab * sizeof *s->distinct);
        s->where = hs_malloc((size_t)n_vocab * sizeof *s->where);
    }
    return s;
}

void sampler_free(struct sampler *s)
{
    if (!s)
        return;
    hs_free(s->work);
    hs_free(s->order);
    hs_free(s->ev);
    hs_free(s->rkey[0]);
    hs_free(s->rkey[1]);
    hs_free(s->rid);
    hs_free(s->count);
    hs_free(s->distinct);
    hs_free(s->where);
    hs_free(s->ring);
    hs_free(s);
}

/* ---- penalty window -------------------------------------------------------------------- */

static void window_add(struct sampler *s, int32_t t)
{
    if (s->count[t]++ == 0) {
        s->where[t] = (int32_t)s->n_distinct;
        s->distinct[s->n_distinct++] = t;
    }
}

static void window_remove(struct sampler *s, int32_t t)
{
    if (--s->count[t] == 0) {
        int32_t last = s->distinct[--s->n_distinct];
        s->distinct[s->where[t]] = last;
        s->where[last] = s->where[t];
    }
}

void sampler_accept(struct sampler *s, int32_t token)
{
    if (!s || !s->track || token < 0 || token >= s->n_vocab)
        return;
    int64_t last_n = s->o.penalty_last_n;
    if (last_n < 0) {
        window_add(s, token);
        return;
    }
    if (s->ring_len < last_n) {
        /* Not yet full: append (no wrap has happened, the oldest is at 0). The capacity
         * grows to exactly last_n, so the ring arithmetic below can use last_n. */
        if (s->ring_len == s->ring_cap) {
            int64_t cap = s->ring_cap < 16 ? 16 : s->ring_cap * 2;
            if (cap > last_n)
                cap = last_n;
            s->ring = hs_realloc(s->ring, (size_t)cap * sizeof *s->ring);
            s->ring_cap = cap;
        }
        s->ring[s->ring_len++] = token;
    } else {
        window_remove(s, s->ring[s->ring_head]);
        s->ring[s->ring_head] = token;
        s->ring_head = (s->ring_head + 1) % last_n;
    }
    window_add(s, token);
}

/* Keep work values finite or −inf (so x − max is never inf − inf) and −0 as +0 (so the
 * float order the heap uses and the bit order the radix sort uses are the same). */
static inline float clean_logit(float v)
{
    if (isnan(v))
        return -INFINITY;
    if (v > FLT_MAX)
        return FLT_MAX;
    if (v == 0.0f)
        return 0.0f;
    return v;
}

/* The scans over the whole vocabulary (the copy, the argmax, the heap's first test) run
 * four values at a time in GCC's generic vectors: SSE2 on every x86-64, NEON on arm64, a
 * plain loop elsewhere. Lane-wise compares and bit selects only, so every value is exactly
 * what clean_logit gives; lanes are never summed. */
typedef float vf4 __attribute__((vector_size(16)));
typedef int32_t vi4 __attribute__((vector_size(16)));

static inline vf4 vf4_load(const float *p)
{
    vf4 x;
    memcpy(&x, p, sizeof x);
    return x;
}

static inline vf4 vf4_select(vi4 mask, vf4 yes, vf4 no)
{
    vi4 y, n;
    memcpy(&y, &yes, sizeof y);
    memcpy(&n, &no, sizeof n);
    n = (y & mask) | (n & ~mask);
    vf4 r;
    memcpy(&r, &n, sizeof r);
    return r;
}

static inline bool vi4_any(vi4 m) { return (m[0] | m[1] | m[2] | m[3]) != 0; }

/* clean_logit of four values: NaN → −inf, > FLT_MAX → FLT_MAX, and + 0 turns −0 into +0
 * (round to nearest) while leaving every other value, ±inf included, as it is. */
static inline vf4 clean_logit4(vf4 x)
{
    const vf4 ninf = { -INFINITY, -INFINITY, -INFINITY, -INFINITY };
    const vf4 fmax = { FLT_MAX, FLT_MAX, FLT_MAX, FLT_MAX };
    x = vf4_select(x != x, ninf, x);
    x = vf4_select(x > fmax, fmax, x);
    return x + 0.0f;
}

static void clean_copy(float *restrict w, const float *restrict v, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        vf4 x = clean_logit4(vf4_load(v + i));
        memcpy(w + i, &x, sizeof x);
    }
    for (; i < n; i++)
        w[i] = clean_logit(v[i]);
}

static void apply_penalties(struct sampler *s)
{
    const float rp = s->o.repetition_penalty;
    const float pres = s->o.presence_penalty, freq = s->o.frequency_penalty;
    for (int64_t i = 0; i < s->n_distinct; i++) {
        int32_t t = s->distinct[i];
        float l = s->work[t];
        if (rp != 1.0f)
            l = l > 0.0f ? l / rp : l * rp;
        l -= pres;
        l -= freq * (float)s->count[t];
        s->work[t] = clean_logit(l);
    }
}

/* ---- candidate order ------------------------------------------------------------------- */

/* a ranks before b: higher penalised logit, then lower id. A total order. */
static inline bool ranks_before(const float *w, int32_t a, int32_t b)
{
    return w[a] > w[b] || (w[a] == w[b] && a < b);
}

/* Restore the heap property below node i of a heap whose root is its last-ranked token. */
static void heap_sift(const float *w, int32_t *h, int64_t n, int64_t i)
{
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, worst = i;
        if (l < n && ranks_before(w, h[worst], h[l]))
            worst = l;
        if (r < n && ranks_before(w, h[worst], h[r]))
            worst = r;
        if (worst == i)
            return;
        int32_t tmp = h[i];
        h[i] = h[worst];
        h[worst] = tmp;
        i = worst;
    }
}

/* order[0..k) = the k first-ranked tokens of work, best first, by a bounded heap:
 * O(n log k), nearly O(n) for small k since most tokens lose to the heap's worst. */
static void select_heap(struct sampler *s, int64_t k)
{
    const float *w = s->work;
    int32_t *h = s->order;
    const int64_t n = s->n_vocab;
    for (int64_t i = 0; i < k; i++)
        h[i] = (int32_t)i;
    for (int64_t i = k / 2; i-- > 0;)
        heap_sift(w, h, k, i);
    /* Ids grow along the scan, so a tie with the root never ranks before it: strict >. */
    float worst = w[h[0]];
    for (int64_t i = k; i < n;) {
        /* sixteen at a time while none beats the worst (nearly always, past the start) */
        if (i + 16 <= n) {
            const vf4 lim = { worst, worst, worst, worst };
            vi4 gt = (vf4_load(w + i) > lim) | (vf4_load(w + i + 4) > lim) | (vf4_load(w + i + 8) > lim) |
                     (vf4_load(w + i + 12) > lim);
            if (!vi4_any(gt)) {
                i += 16;
                continue;
            }
        }
        for (int64_t end = HS_MIN(i + 16, n); i < end; i++) {
            if (w[i] > worst) {
                h[0] = (int32_t)i;
                heap_sift(w, h, k, 0);
                worst = w[h[0]];
            }
        }
    }
    /* Heap sort: moving the root (last-ranked) to the end leaves the array best first. */
    for (int64_t end = k - 1; end > 0; end--) {
        int32_t tmp = h[0];
        h[0] = h[end];
        h[end] = tmp;
        heap_sift(w, h, end, 0);
    }
}

/* The whole vocabulary, best first, by an LSD radix sort on a key whose unsigned order is
 * the reverse of the float order (no NaN, no −0 in work). Each pass is stable and the
 * input is in id order, so equal logits stay in ascending id order. */
static void sort_radix(struct sampler *s)
{
    const int64_t n = s->n_vocab;
    if (!s->rid) {
        s->rkey[0] = hs_malloc((size_t)n * sizeof *s->rkey[0]);
        s->rkey[1] = hs_malloc((size_t)n * sizeof *s->rkey[1]);
        s->rid = hs_malloc((size_t)n * sizeof *s->rid);
    }
    uint32_t *key = s->rkey[0], *key2 = s->rkey[1];
    int32_t *id = s->order, *id2 = s->rid;
    uint32_t hist[4][256];
    memset(hist, 0, sizeof hist);
    for (int64_t i = 0; i < n; i++) {
        uint32_t b;
        memcpy(&b, &s->work[i], sizeof b);
        b = (b & 0x80000000u) ? b : ~b & 0x7fffffffu; /* ascending key = descending float */
        key[i] = b;
        id[i] = (int32_t)i;
        for (int d = 0; d < 4; d++)
            hist[d][(b >> (8 * d)) & 0xff]++;
    }
    for (int d = 0; d < 4; d++) {
        if (hist[d][(key[0] >> (8 * d)) & 0xff] == (uint32_t)n)
            continue; /* every key has this digit: the pass would not move anything */
        uint32_t pos[256], sum = 0;
        for (int b = 0; b < 256; b++) {
            pos[b] = sum;
            sum += hist[d][b];
        }
        for (int64_t i = 0; i < n; i++) {
            uint32_t at = pos[(key[i] >> (8 * d)) & 0xff]++;
            key2[at] = key[i];
            id2[at] = id[i];
        }
        uint32_t *tk = key; key = key2; key2 = tk;
        int32_t *ti = id; id = id2; id2 = ti;
    }
    if (id != s->order)
        memcpy(s->order, id, (size_t)n * sizeof *id);
}

/* Make sure order[0..need) is sorted, growing the prefix (64, 1024 by heap while that is
 * at most an eighth of the vocabulary, then everything by radix) up to cap. Both methods give the same order, so the prefix never changes as it grows. */
static void ensure_sorted(struct sampler *s, int64_t need, int64_t cap)
{
    if (need <= s->n_sorted)
        return;
    int64_t k = s->n_sorted < 64 ? 64 : s->n_sorted * 16;
    if (k < need)
        k = need;
    if (k > cap)
        k = cap;
    if (k <= 1024 && k <= s->n_vocab / 8) { /* past that a full radix sort is cheaper */
        select_heap(s, k);
        s->n_sorted = k;
    } else {
        sort_radix(s);
        s->n_sorted = cap;
    }
}

/* ---- sampling -------------------------------------------------------------------------- */

/* Argmax, lowest id on ties, over the cleaned values of v: the largest value first (sixteen
 * running maxima; a maximum is the same whatever the order), then the first id holding it. */
static int32_t argmax_clean(const float *v, int64_t n)
{
    float best = -INFINITY;
    int64_t i = 0;
    if (n >= 16) {
        vf4 m[4];
        for (int j = 0; j < 4; j++)
            m[j] = clean_logit4(vf4_load(v + 4 * j));
        for (i = 16; i + 16 <= n; i += 16) {
            for (int j = 0; j < 4; j++) {
                vf4 x = clean_logit4(vf4_load(v + i + 4 * j));
                m[j] = vf4_select(x > m[j], x, m[j]);
            }
        }
        for (int j = 0; j < 16; j++)
            best = m[j / 4][j % 4] > best ? m[j / 4][j % 4] : best;
    }
    for (; i < n; i++) {
        float x = clean_logit(v[i]);
        best = x > best ? x : best;
    }
    const vf4 b4 = { best, best, best, best };
    for (i = 0; i + 16 <= n; i += 16) {
        vi4 eq = (clean_logit4(vf4_load(v + i)) == b4) | (clean_logit4(vf4_load(v + i + 4)) == b4) |
                 (clean_logit4(vf4_load(v + i + 8)) == b4) | (clean_logit4(vf4_load(v + i + 12)) == b4);
        if (vi4_any(eq))
            break;
    }
    while (clean_logit(v[i]) != best)
        i++;
    return (int32_t)i;
}

int32_t sampler_sample(struct sampler *s, const float *logits)
{
    const int64_t n = s->n_vocab;
    float *w = s->work;
    if (s->o.temperature == 0.0f && !s->track)
        return argmax_clean(logits, n); /* the same answer without the copy */
    clean_copy(w, logits, n);
    if (s->track)
        apply_penalties(s);
    if (s->o.temperature == 0.0f)
        return argmax_clean(w, n);

    const double u = rng_uniform(s->rng);
    const double temp = s->o.temperature;
    const bool full = s->o.top_k <= 0 || s->o.top_k >= n;
    const int64_t n_cand = full ? n : s->o.top_k;

    s->n_sorted = 0;
    ensure_sorted(s, full ? 1 : n_cand, n_cand);
    const int32_t *ord = s->order;
    if (w[ord[0]] == -INFINITY)
        return ord[0];
    const double xmax = (double)w[ord[0]] / temp;

    /* e of every candidate (by id) and Z, in a fixed order. With top-k off and min-p the
     * only cut, Z is not needed: e is computed only for the prefix the cut walks. */
    const bool use_top_p = s->o.top_p < 1.0f, use_min_p = s->o.min_p > 0.0f;
    const bool lazy_e = full && use_min_p && !use_top_p;
    double *ev = s->ev, z = 0.0;
    if (lazy_e) {
        /* z is unused */
    } else if (full) {
        for (int64_t i = 0; i < n; i++)
            ev[i] = exp_det((double)w[i] / temp - xmax);
        for (int64_t i = 0; i < n; i++)
            z += ev[i];
    } else {
        for (int64_t i = 0; i < n_cand; i++) {
            int32_t t = ord[i];
            ev[t] = exp_det((double)w[t] / temp - xmax);
            z += ev[t];
        }
    }

    /* Cuts: the survivors are ord[0..n_keep), of total mass `mass`. */
    int64_t n_keep = n_cand;
    double mass = z;
    if (use_top_p || use_min_p) {
        const double p_lim = (double)s->o.top_p * z, m_lim = (double)s->o.min_p;
        double cum = 0.0;
        int64_t i = 0;
        for (; i < n_cand; i++) {
            ensure_sorted(s, i + 1, n_cand);
            int32_t t = ord[i];
            if (lazy_e)
                ev[t] = exp_det((double)w[t] / temp - xmax);
            double e = ev[t];
            if (use_min_p && e < m_lim)
                break;
            cum += e;
            if (use_top_p && cum >= p_lim) {
                i++;
                break;
            }
        }
        n_keep = i; /* >= 1: the best token has e == 1 >= min_p and is kept before top-p */
        mass = cum;
    }

    const double target = u * mass;
    double acc = 0.0;
    int32_t last_live = ord[0];
    for (int64_t i = 0; i < n_keep; i++) {
        ensure_sorted(s, i + 1, n_cand);
        double e = ev[ord[i]];
        if (e > 0.0)
            last_live = ord[i];
        acc += e;
        if (target < acc)
            return ord[i];
    }
    /* Only reached when rounding left acc <= target (mass summed in another order). */
    return last_live;
}
