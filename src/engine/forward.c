/*
 * forward.c — engine_forward: the hybrid decoder over a step of at most n_batch tokens,
 * layer by layer (docs/MODELS.md §2-§5).
 *
 * Design note
 * -----------
 * One step = T tokens of one or several sequences (engine_forward_batch): each sequence's
 * tokens are a contiguous segment of the step at its own positions p0 .. p0+T_i-1. Per layer:
 *   xn = rmsnorm(x, attn_norm)          (folded weight, per token)
 *   attention: qg = Wq xn, k = Wk xn, v = Wv xn for all T (batch matmuls); per token the
 *     query heads (rows j*2hd .. j*2hd+hd-1 of qg) are copied out, q_norm / k_norm per
 *     head, partial NeoX RoPE at the token's position, K/V rows appended to the cache;
 *     then every (token, head) attends over keys 0..p (blocks of KERN_ATTN_TOKS tokens share
 *     the key/value loads; the blocks go to whichever thread is free); out *= sigmoid(gate); Wo.
 *   GDN: qkv, z, b, a projections for all T; conv step + SiLU for all T (threads split
 *     channels, each runs its channels through the tokens in order, in place in qkv);
 *     per token L2 norm of q and k heads (eps 1e-6) and gates; then per v-head, token by
 *     token, the gated delta step (kh = h % Hk) and gated RMSNorm with act(z) (threads
 *     split heads; a head's state stays in cache across the step); the layer's state is
 *     captured piecewise (channel range, head) when p0+t+1 is a capture position; Wout.
 *   residual add; xn = rmsnorm(x, post_attn_norm); dense SwiGLU or MoE; residual add.
 * Then, for the requested rows only: final norm and the lm_head.
 *
 * Flash-Next (qwen4exp, docs/MODELS.md §10): the residual x is hc_n streams of H per token;
 * the norms give way to hyper-connection mixers (hc_mix: the block's input; hc_combine: each
 * stream += its weight * the block's output); the n-gram layer first adds its hashed
 * embedding (ple_apply: integer hash, table rows, a per-stream gate, a dilated conv whose
 * history and the last N - 1 token ids live after the GDN layers in the snapshot layout, so
 * captures and restores carry them); attention layers run the QSA indexer: queries normed
 * and rotated per token, the raw key stored at the end of the K row, a complete block's
 * pooled key (mean of its raw keys, normed, rotated at the block's first position) at the
 * end of the V row of its last position, and a query with more complete blocks than it
 * keeps attends to its best blocks (score = sum over heads of relu(q . key) / sqrt(d), ties
 * to the lower block) plus its open block, gathered into a thread's buffer (qsa_attend);
 * the others attend densely as before. The selection is a pure function of the cached rows
 * and the query, computed in one fixed order, so it is chunk- and batch-invariant too; the
 * head mixer replaces the final norm.
 *
 * Several sequences: the matmuls, norms, gates and MoE run over all T tokens at once (per token
 * or batch-invariant, so a token's result does not depend on its neighbours); the KV append,
 * the attention (blocks never span two segments, and are cut from each segment's start), the
 * conv and the recurrence run per segment against that sequence's own state. A sequence's
 * results in a mixed step are therefore the bits of its own engine_forward call.
 *
 * Exactness (docs/DESIGN.md §4): every matmul is kern_matmul, batch-invariant, threads split
 * its output rows (matrices that read the same activation — q/k/v, qkv/z/b/a, gate/up,
 * router and shared expert — run as one pool job over their rows end to end, mm_n); every other operation is per token (or per head / channel of one
 * token) and written once, so its result does not depend on T, the chunking or the
 * thread count. The GDN recurrence runs token by token (per head; heads and channels are
 * independent, so the head-major loop order computes the same bits). MoE experts run as
 * T = 1 matmuls per token, in pick order. Q8_0 activations are quantized per token (kern_q8_quantize
 * works per token and block; so does kern_q8k_quantize (the variant's, byte-identical, split across
 * the pool by token) for Q4_K / Q6_K weights, which
 * go through kern_ops.matmul_k), so batching does not change them either; their scales are
 * then rounded to f16 as llama.cpp stores them (see quant()), which is what makes our
 * Q8_0 logits agree with llama.cpp's. bf16 matrices read the activations rounded to
 * bf16 once per call site (kern_bf16_round, per value, as llama.cpp also rounds them) and
 * go through kern_ops.bf16_matmul (vdpbf16ps order), not kern_matmul.
 *
 * Invariants:
 *   1. Everything that can fail is checked before the first state change: token ids,
 *      n_ctx, rows, capture buffers. After that the pass cannot fail.
 *   2. The only allocations are the KV cache and attention-score growth at the start of
 *      a call (in blocks), never per token.
 */
#include "engine/engine_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- threaded helpers ------------------------------------------------------------------ */

/* At most this many tokens per matmul count as "a few" (a decode step of several sequences):
 * the weights stream from memory, so the rows are handed out in small pieces as for one. */
#define ENGINE_FEW_TOKENS 8
#define ENGINE_PREFILL_PIECES 4 /* pieces per thread of a several-token matmul (mm_n) */

/* Quantized copies of one activation [T, K], NULL where no weight reading it needs them:
 * q8 (kern_q8_quantize) for Q8_0 weights, qk (kern_q8k_quantize) for Q4_K / Q6_K, bf
 * (kern_bf16_round) for bf16 weights; cx (kern_q8p_corr of q8) where Q8_0 matrices have
 * packed copies (wpack.c), computed once for all of them. */
struct act {
    const struct kern_q8_block *q8;
    const struct kern_q8k_block *qk;
    const uint16_t *bf;
    const int32_t *cx;
};
#define ACT_Q8 1
#define ACT_QK 2
#define ACT_BF16 4

/* One matrix of a matmul job: y[t * y_ld + r] = (W x_t)[r] for the rows of w, a matrix of
 * type wt (a K-quant type cast to it, as the dtype is), or its copy in that type's packed
 * layout when packed (wpack.c). */
struct mm_part {
    float *y;
    int64_t y_ld;
    const void *w;
    enum kern_wtype wt;
    int64_t rows;
    bool packed;
};

/* Up to MM_PARTS matrices that read the same activation x (same K), computed in one pool
 * run over their rows laid end to end: a decode step then pays one hand-off per group
 * instead of one per matrix, and each thread moves from one matrix's stream straight into
 * the next. Every row is still one kernel call's row with the same inputs, so how the rows
 * are grouped or split, and which thread runs them, never changes a bit (the kernels are
 * split-invariant). */
#define MM_PARTS 4
struct mm_job {
    const struct kern_ops *ops;
    const float *x;
    struct act xa;
    int64_t T, K;
    int n;
    struct mm_part p[MM_PARTS];
};

static void mm_part_run(const struct mm_job *j, const struct mm_part *p, int64_t r0, int64_t r1)
{
    if (p->packed && p->wt == KERN_W_Q8_0) /* copies packed at engine start (wpack.c) */
        j->ops->matmul_q8p(p->y, p->y_ld, p->w, j->xa.q8, j->xa.cx, j->T, j->K, r0, r1);
    else if (p->packed) /* Q4_K, Q6_K */
        j->ops->matmul_kp(p->y, p->y_ld, p->w, (int)p->wt, j->xa.qk, j->T, j->K, r0, r1);
    else if (kern_wtype_is_k((int)p->wt))
        j->ops->matmul_k(p->y, p->y_ld, p->w, (int)p->wt, j->xa.qk, j->T, j->K, r0, r1);
    else if (kern_wtype_is_x((int)p->wt)) /* Q5_1, IQ4_NL, IQ4_XS ([F12]) */
        j->ops->matmul_x(p->y, p->y_ld, p->w, (int)p->wt, j->xa.q8, j->xa.qk, j->T, j->K, r0, r1);
    else if (p->wt == KERN_W_BF16) /* bf16 x bf16 (kernels.h "BF16 weights"), not kern_matmul's */
        j->ops->bf16_matmul(p->y, p->y_ld, p->w, j->xa.bf, j->T, j->K, r0, r1);
    else
        j->ops->matmul(p->y, p->y_ld, p->w, p->wt, j->x, j->xa.q8, j->T, j->K, r0, r1);
}

/* Rows [r0, r1) of the parts laid end to end. */
static void mm_fn(void *ctx, int64_t r0, int64_t r1, int ti)
{
    const struct mm_job *j = ctx;
    (void)ti;
    int64_t base = 0;
    for (int i = 0; i < j->n && r0 < r1; i++) {
        const struct mm_part *p = &j->p[i];
        int64_t a = HS_MAX(r0, base), b = HS_MIN(r1, base + p->rows);
        if (a < b) mm_part_run(j, p, a - base, b - base);
        base += p->rows;
    }
}

static struct mm_part part(float *y, int64_t y_ld, const struct model_weight *w, const void *mat)
{
    struct mm_part p = { y, y_ld, mat, (enum kern_wtype)w->dtype, w->rows, false };
    return p;
}

/* The parts p[0..n) (all with w->cols == K) applied to x / xa, in one pool run. */
static void mm_n(struct engine *e, const float *x, struct act xa, int64_t T, int64_t K, int n,
                 const struct mm_part *p)
{
    struct mm_job j = { e->ops, x, xa, T, K, n, { { 0 } } };
    int64_t rows = 0;
    for (int i = 0; i < n; i++) {
        j.p[i] = p[i];
        rows += p[i].rows;
        /* a matrix with a packed copy (wpack.c; of the matrix's own type) multiplies in its
         * layout, where the kernel table has the matmul over it: same bits */
        bool table = p[i].wt == KERN_W_Q8_0 ? e->ops->matmul_q8p != NULL : e->ops->matmul_kp != NULL;
        const void *pk = table && e->n_packs > 0 ? engine_pack_find(e, p[i].w) : NULL;
        if (pk) {
            j.p[i].w = pk;
            j.p[i].packed = true;
        }
    }
    if (T > ENGINE_FEW_TOKENS) {
        /* Several tokens: about ENGINE_PREFILL_PIECES pieces per thread, multiples of 48 rows
         * (whole 3-row float tiles, 8- and 16-row Q8_0 groups, 24-row float groups), first
         * come, first served: a thread that is preempted (the machine shared) or wakes late
         * leaves its pieces to the others instead of making them wait at the end of the run. */
        int64_t nt = sys_pool_threads(e->pool);
        int64_t chunk = (rows / (ENGINE_PREFILL_PIECES * nt) + 47) / 48 * 48;
        sys_pool_run_chunks(e->pool, rows, HS_MAX(chunk, 48), mm_fn, &j);
        return;
    }
    /* One token (or a decode step's few, one per sequence) streams the weights from memory:
     * threads claim pieces of about 1/16 of a thread's share (multiples of 16 rows, the Q8_0
     * row groups) as they go, so a thread that wakes late or shares its core does less
     * instead of making the others wait. */
    int64_t nt = sys_pool_threads(e->pool), chunk = (rows / (16 * nt) + 15) / 16 * 16;
    sys_pool_run_chunks(e->pool, rows, HS_MAX(chunk, 32), mm_fn, &j);
}

/* y[t * y_ld + r] = (W x_t)[r] over all rows of one matrix w (data = mat). */
static void mm(struct engine *e, float *y, int64_t y_ld, const struct model_weight *w,
               const void *mat, const float *x, struct act xa, int64_t T)
{
    struct mm_part p = part(y, y_ld, w, mat);
    mm_n(e, x, xa, T, w->cols, 1, &p);
}

/* kern_bf16_round of tokens [t0, t1) (a per-value rule: any split gives the same bits). */
struct round_job {
    const struct kern_ops *ops;
    uint16_t *xb;
    const float *x;
    int64_t K;
};

static void round_fn(void *ctx, int64_t t0, int64_t t1, int ti)
{
    const struct round_job *j = ctx;
    (void)ti;
    j->ops->bf16_round(j->xb + t0 * j->K, j->x + t0 * j->K, (t1 - t0) * j->K);
}

/* The variant's Q8_K quantizer over tokens [t0, t1) (per token and block: any split gives
 * kern_q8k_quantize's bytes). */
struct q8k_job {
    const struct kern_ops *ops;
    struct kern_q8k_block *xq;
    const float *x;
    int64_t K;
};

static void q8k_fn(void *ctx, int64_t t0, int64_t t1, int ti)
{
    const struct q8k_job *j = ctx;
    (void)ti;
    j->ops->q8k_quantize(j->xq + t0 * (j->K / KERN_QK), j->x + t0 * j->K, t1 - t0, j->K);
}

/* Which quantized activations a weight reads (ACT_* bits; 0 for float weights). */
static int act_need(const struct model_weight *w)
{
    if (w->dtype == DTYPE_Q8_0) return ACT_Q8;
    if (w->dtype == DTYPE_BF16) return ACT_BF16;
    if (kern_wtype_is_x((int)w->dtype)) return kern_x_uses_q8k((int)w->dtype) ? ACT_QK : ACT_Q8;
    return kern_wtype_is_k((int)w->dtype) ? ACT_QK : 0;
}

/* Token t's slice of a quantized activation of K values per token. */
static struct act act_row(struct act a, int64_t t, int64_t K)
{
    struct act r = { a.q8 ? a.q8 + t * (K / KERN_Q8_BLOCK) : NULL, a.qk ? a.qk + t * (K / KERN_QK) : NULL,
                     a.bf ? a.bf + t * K : NULL, a.cx ? a.cx + t * (K / KERN_Q8_BLOCK) : NULL };
    return r;
}

/* Quantized copies of x [T, K] for the weights that read it (need: ACT_* bits). Q8_0's
 * quantizer rounds the activation scale to f16 as llama.cpp's block_q8_0 stores it
 * (kernels.h). Per block or per value, so batch invariance is kept. */
static struct act quant(const struct engine *e, struct kern_q8_block *buf, struct kern_q8k_block *kbuf,
                        const float *x, int64_t T, int64_t K, int need)
{
    struct act a = { NULL, NULL, NULL, NULL };
    if (need & ACT_BF16) {
        /* rounded once here for every bf16 matrix reading x (per value, so per token too);
         * the bf16 slot goes with the q8 slot the caller chose */
        uint16_t *bbuf = buf == e->s.xq_a ? e->s.xb_a : e->s.xb_b;
        struct round_job rj = { e->ops, bbuf, x, K };
        if (T == 1) e->ops->bf16_round(bbuf, x, K);
        else sys_pool_run(e->pool, T, round_fn, &rj);
        a.bf = bbuf;
    }
    if (need & ACT_QK) {
        /* Q4_K / Q6_K: llama.cpp's block_q8_K keeps an f32 scale, so nothing is rounded */
        struct q8k_job qj = { e->ops, kbuf, x, K };
        if (T == 1) e->ops->q8k_quantize(kbuf, x, 1, K);
        else sys_pool_run(e->pool, T, q8k_fn, &qj);
        a.qk = kbuf;
    }
    if (!(need & ACT_Q8)) return a;
    e->ops->q8_quantize(buf, x, T, K);
    a.q8 = buf;
    if (e->has_q8p) { /* the packed Q8_0 matmuls' offset shares, once for all of them */
        int32_t *cbuf = buf == e->s.xq_a ? e->s.xc_a : e->s.xc_b;
        kern_q8p_corr(cbuf, buf, T * (K / KERN_Q8_BLOCK));
        a.cx = cbuf;
    }
    return a;
}

/* The norms of norm.c with the variant's dot in place of kern_dot: every variant's dot keeps
 * kern_dot's 32-lane order (kernels.h), the rest is the same expression, so the bits are
 * those of kern_rmsnorm / kern_rmsnorm_gated / kern_l2norm_heads (the variant tests of
 * test_forward.c compare against the scalar table). */
static void rmsnorm_v(const struct kern_ops *ops, float *y, const float *x, const float *w, int64_t n, float eps)
{
    float r = 1.0f / sqrtf(ops->dot(x, x, n) / (float)n + eps);
    for (int64_t i = 0; i < n; i++) y[i] = (x[i] * r) * w[i];
}

static void rmsnorm_gated_v(const struct kern_ops *ops, float *y, const float *z, const float *w, int64_t n,
                            float eps)
{
    float r = 1.0f / sqrtf(ops->dot(y, y, n) / (float)n + eps);
    ops->gated_scale(y, z, w, r, n);
}

static void l2norm_v(const struct kern_ops *ops, float *x, int64_t n, int64_t n_head, float eps)
{
    for (int64_t h = 0; h < n_head; h++) {
        float *xh = x + h * n;
        float r = 1.0f / sqrtf(ops->dot(xh, xh, n) + eps);
        for (int64_t i = 0; i < n; i++) xh[i] = xh[i] * r;
    }
}

struct rows_job {
    const struct kern_ops *ops;
    float *y;
    const float *x, *w, *g;
    int64_t n;
    float eps;
};

static void rmsnorm_fn(void *ctx, int64_t t0, int64_t t1, int ti)
{
    const struct rows_job *j = ctx;
    (void)ti;
    for (int64_t t = t0; t < t1; t++) rmsnorm_v(j->ops, j->y + t * j->n, j->x + t * j->n, j->w, j->n, j->eps);
}

static void rmsnorm_rows(struct engine *e, float *y, const float *x, const float *w, int64_t T, int64_t n, float eps)
{
    struct rows_job j = { e->ops, y, x, w, NULL, n, eps };
    sys_pool_run(e->pool, T, rmsnorm_fn, &j);
}

static void swiglu_fn(void *ctx, int64_t i0, int64_t i1, int ti)
{
    const struct rows_job *j = ctx;
    (void)ti;
    j->ops->swiglu(j->y, j->y, j->g, i0, i1);
}

/* y = silu(y) * up over n values, threads splitting the elements (independent). */
static void swiglu_par(struct engine *e, float *y, const float *up, int64_t n)
{
    struct rows_job j = { e->ops, y, NULL, NULL, up, n, 0.0f };
    sys_pool_run(e->pool, n, swiglu_fn, &j);
}

/* ---- attention ------------------------------------------------------------------------- */

struct attn_job {
    struct engine *e;
    const struct fwd_step *st;
    const struct model_layer *L;
    int ai;
};

/* Per token: query heads out of qg, q/k norms, RoPE, KV append. */
static void attn_prep_fn(void *ctx, int64_t t0, int64_t t1, int ti)
{
    const struct attn_job *j = ctx;
    struct engine *e = j->e;
    const struct engine_geom *g = &e->g;
    struct engine_scratch *sc = &e->s;
    int64_t qw = g->nh * g->hd, kvw = (int64_t)g->kv_row_floats;
    (void)ti;
    for (int64_t t = t0; t < t1; t++) {
        float *q = sc->q + t * qw, *k = sc->k + t * kvw, *v = sc->v + t * kvw;
        const float *qg = sc->qg + t * 2 * qw;
        for (int64_t h = 0; h < g->nh; h++) memcpy(q + h * g->hd, qg + h * 2 * g->hd, (size_t)g->hd * sizeof(float));
        for (int64_t h = 0; h < g->nh; h++)
            rmsnorm_v(e->ops, q + h * g->hd, q + h * g->hd, j->L->q_norm, g->hd, g->eps);
        for (int64_t h = 0; h < g->nkv; h++)
            rmsnorm_v(e->ops, k + h * g->hd, k + h * g->hd, j->L->k_norm, g->hd, g->eps);
        if (g->n_rot > 0) {
            const float *cs = sc->rope + t * g->n_rot;
            kern_rope_apply(q, g->hd, g->n_rot, cs, 0, g->nh);
            kern_rope_apply(k, g->hd, g->n_rot, cs, 0, g->nkv);
        }
        if (g->idx_h > 0) {
            /* indexer queries: zero-centred norm per head, RoPE on their first n_rot dims;
             * the V row's tail is where a complete block's pooled key goes (qsa_pool_fn) */
            float *iq = sc->iq + t * g->idx_h * g->idx_d;
            for (int64_t h = 0; h < g->idx_h; h++)
                rmsnorm_v(e->ops, iq + h * g->idx_d, iq + h * g->idx_d, j->L->idx_q_norm, g->idx_d, g->eps);
            if (g->n_rot > 0) kern_rope_apply(iq, g->idx_d, g->n_rot, sc->rope + t * g->n_rot, 0, g->idx_h);
            memset(v + g->nkv * g->hd, 0, (size_t)g->idx_d * sizeof(float));
        }
        const struct fwd_seg *sg = &j->st->seg[j->st->tok_seg[t]];
        int64_t p = sg->p0 + (t - sg->t0);
        seq_kv_put(sg->s, sg->s->kc[j->ai], p, k);
        seq_kv_put(sg->s, sg->s->vc[j->ai], p, v);
    }
}

/* Query heads per attention call: the largest divisor of the GQA group <= KERN_ATTN_HEADS,
 * so one call's heads share a kv head (a variant may then load each key/value row once for
 * all of them; every head's result is the same either way). */
static int64_t attn_heads_per_call(const struct engine_geom *g)
{
    int64_t group = g->nh / g->nkv, n = KERN_ATTN_HEADS;
    while (group % n) n--;
    return n;
}

/* ---- Flash-Next: QSA (the indexer's block selection) ---------------------------------- */

/* A complete block's pooled key, once its last position is in the cache: the mean of its
 * raw keys (summed in position order, then divided), the zero-centred norm, RoPE at the
 * block's first position; kept at the end of that last position's V row. Per token; the
 * block's other raw keys were appended by attn_prep_fn before this pass runs. */
static void qsa_pool_fn(void *ctx, int64_t t0, int64_t t1, int ti)
{
    const struct attn_job *j = ctx;
    const struct engine_geom *g = &j->e->g;
    float *cs = j->e->s.prope + (int64_t)ti * HS_MAX(g->n_rot, 1);
    for (int64_t t = t0; t < t1; t++) {
        const struct fwd_seg *sg = &j->st->seg[j->st->tok_seg[t]];
        int64_t p = sg->p0 + (t - sg->t0);
        if ((p + 1) % g->qsa_blk) continue;
        /* the row tails' planes (seq.c): raw keys in K's, pooled keys in V's */
        const float *kt = seq_kv_plane(sg->s, sg->s->kc[j->ai], g->nkv);
        float *pk = seq_kv_plane(sg->s, sg->s->vc[j->ai], g->nkv) + p * g->idx_d;
        int64_t first = p + 1 - g->qsa_blk;
        for (int64_t d = 0; d < g->idx_d; d++) {
            float acc = kt[first * g->idx_d + d];
            for (int64_t i = 1; i < g->qsa_blk; i++) acc += kt[(first + i) * g->idx_d + d];
            pk[d] = acc / (float)g->qsa_blk;
        }
        rmsnorm_v(j->e->ops, pk, pk, j->L->idx_k_norm, g->idx_d, g->eps);
        if (g->n_rot > 0) {
            kern_rope_table(cs, g->n_rot, g->theta, first);
            kern_rope_apply(pk, g->idx_d, g->n_rot, cs, 0, 1);
        }
    }
}

static int qsa_rank(const void *a, const void *b)
{
    const struct qsa_pair *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->block > y->block) - (x->block < y->block);
}

static int qsa_by_block(const void *a, const void *b)
{
    const struct qsa_pair *x = a, *y = b;
    return (x->block > y->block) - (x->block < y->block);
}

/* Per token: with more complete blocks visible than it keeps (B = (p + 1) / blk > top), the
 * positions it attends: its top blocks by score, score = sum over indexer heads of
 * max(0, q_h . key_b) / sqrt(idx_d) (heads in order, kern_dot's order), ties to the lower
 * block, taken in block order, then its open block's positions up to p. n_sel 0: dense. */
static void qsa_select_fn(void *ctx, int64_t t0, int64_t t1, int ti)
{
    const struct attn_job *j = ctx;
    struct engine *e = j->e;
    const struct engine_geom *g = &e->g;
    struct engine_scratch *sc = &e->s;
    const float div = sqrtf((float)g->idx_d);
    struct qsa_pair *pr = sc->bpair + (int64_t)ti * sc->bpair_cap;
    for (int64_t t = t0; t < t1; t++) {
        const struct fwd_seg *sg = &j->st->seg[j->st->tok_seg[t]];
        int64_t p = sg->p0 + (t - sg->t0), nb = (p + 1) / g->qsa_blk;
        sc->n_sel[t] = 0;
        if (nb <= g->qsa_top) continue;
        const float *iq = sc->iq + t * g->idx_h * g->idx_d;
        const float *vt = seq_kv_plane(sg->s, sg->s->vc[j->ai], g->nkv); /* pooled keys (seq.c) */
        for (int64_t b = 0; b < nb; b++) {
            const float *key = vt + ((b + 1) * g->qsa_blk - 1) * g->idx_d;
            float acc = 0.0f;
            for (int64_t h = 0; h < g->idx_h; h++) acc += HS_MAX(0.0f, e->ops->dot(iq + h * g->idx_d, key, g->idx_d));
            pr[b] = (struct qsa_pair){ acc / div, (int32_t)b };
        }
        qsort(pr, (size_t)nb, sizeof *pr, qsa_rank);
        qsort(pr, (size_t)g->qsa_top, sizeof *pr, qsa_by_block);
        int32_t *sel = sc->sel + t * sc->sel_cap;
        int64_t n = 0;
        for (int64_t k = 0; k < g->qsa_top; k++)
            for (int64_t i = 0; i < g->qsa_blk; i++) sel[n++] = (int32_t)(pr[k].block * g->qsa_blk + i);
        for (int64_t q = nb * g->qsa_blk; q <= p; q++) sel[n++] = (int32_t)q;
        sc->n_sel[t] = n;
    }
}

/* Attention of one sparse query over its selected rows, gathered in order into the
 * thread's buffers: the result of attention over exactly those keys. */
static void qsa_attend(const struct attn_job *j, const struct fwd_seg *sg, int64_t t, int ti, float *scores,
                       int64_t h0, int64_t h1)
{
    struct engine *e = j->e;
    const struct engine_geom *g = &e->g;
    struct engine_scratch *sc = &e->s;
    const int64_t kvw = (int64_t)g->kv_row_floats, qw = g->nh * g->hd, n = sc->n_sel[t];
    float *kg = sc->kg + (int64_t)ti * sc->sel_cap * kvw, *vg = sc->vg + (int64_t)ti * sc->sel_cap * kvw;
    const int32_t *sel = sc->sel + t * sc->sel_cap;
    for (int64_t m = 0; m < g->nkv; m++) { /* kv head m's plane (seq.c) into the rows' place m */
        const float *kc = seq_kv_plane(sg->s, sg->s->kc[j->ai], m), *vc = seq_kv_plane(sg->s, sg->s->vc[j->ai], m);
        for (int64_t i = 0; i < n; i++) {
            memcpy(kg + i * kvw + m * g->hd, kc + (int64_t)sel[i] * g->hd, (size_t)g->hd * sizeof(float));
            memcpy(vg + i * kvw + m * g->hd, vc + (int64_t)sel[i] * g->hd, (size_t)g->hd * sizeof(float));
        }
    }
    e->ops->attn_tokens(sc->att + t * qw, qw, sc->q + t * qw, qw, kg, vg, kvw, n, 1, g->hd, g->nh, g->nkv,
                        1.0f / sqrtf((float)g->hd), scores, h0, h1);
}

/* Per (block of up to KERN_ATTN_TOKS tokens, run of query heads of one kv head): attention
 * of each token over keys 0..p (the tokens of a block share the key and value loads), then
 * the sigmoid output gate of each head. */
static void attn_fn(void *ctx, int64_t i0, int64_t i1, int ti)
{
    const struct attn_job *j = ctx;
    struct engine *e = j->e;
    const struct engine_geom *g = &e->g;
    struct engine_scratch *sc = &e->s;
    int64_t qw = g->nh * g->hd, hc = attn_heads_per_call(g), runs = g->nh / hc;
    float scale = 1.0f / sqrtf((float)g->hd);
    float *scores = sc->attn_scores + (int64_t)ti * KERN_ATTN_TOKS * KERN_ATTN_HEADS * sc->attn_cap;
    for (int64_t i = i0; i < i1; i++) {
        const struct fwd_block *b = &j->st->blk[i / runs];
        const struct fwd_seg *sg = &j->st->seg[b->seg];
        int64_t t0 = b->t0, h0 = (i % runs) * hc, nt = b->nt;
        /* QSA: positions ascend in a block, so its dense queries come first */
        int64_t nd = 0;
        while (nd < nt && !(g->idx_h > 0 && sc->n_sel[t0 + nd] > 0)) nd++;
        if (nd > 0) { /* the run's kv head m alone: its plane (seq.c), its group of query heads */
            int64_t group = g->nh / g->nkv, m = h0 / group, hq = m * group * g->hd;
            e->ops->attn_tokens(sc->att + t0 * qw + hq, qw, sc->q + t0 * qw + hq, qw,
                                seq_kv_plane(sg->s, sg->s->kc[j->ai], m), seq_kv_plane(sg->s, sg->s->vc[j->ai], m),
                                g->hd, sg->p0 + (t0 - sg->t0) + 1, nd, g->hd, group, 1, scale, scores,
                                h0 - m * group, h0 - m * group + hc);
        }
        for (int64_t t = t0 + nd; t < t0 + nt; t++) qsa_attend(j, sg, t, ti, scores, h0, h0 + hc);
        for (int64_t t = t0; t < t0 + nt; t++) {
            float *out = sc->att + t * qw;
            for (int64_t h = h0; h < h0 + hc; h++)
                e->ops->sigmoid_mul(out + h * g->hd, out + h * g->hd, sc->qg + t * 2 * qw + h * 2 * g->hd + g->hd,
                                    g->hd);
        }
    }
}

static void layer_attn(struct engine *e, const struct fwd_step *st, const struct model_layer *L, int ai)
{
    const int64_t T = st->T;
    const struct engine_geom *g = &e->g;
    struct engine_scratch *sc = &e->s;
    const int64_t kvw = (int64_t)g->kv_row_floats;
    int need = act_need(&L->wq) | act_need(&L->wk) | act_need(&L->wv);
    if (g->idx_h > 0) need |= act_need(&L->idx_q) | act_need(&L->idx_k);
    struct act xq = quant(e, sc->xq_a, sc->xk_a, sc->xn, T, g->H, need);
    struct mm_part qkv[3] = { part(sc->qg, L->wq.rows, &L->wq, L->wq.data), part(sc->k, kvw, &L->wk, L->wk.data),
                              part(sc->v, kvw, &L->wv, L->wv.data) };
    mm_n(e, sc->xn, xq, T, g->H, 3, qkv);
    if (g->idx_h > 0) { /* the indexer's raw key lands at the end of the K row (engine.c geom_init) */
        struct mm_part ix[2] = { part(sc->iq, g->idx_h * g->idx_d, &L->idx_q, L->idx_q.data),
                                 part(sc->k + g->nkv * g->hd, kvw, &L->idx_k, L->idx_k.data) };
        mm_n(e, sc->xn, xq, T, g->H, 2, ix);
    }
    struct attn_job j = { e, st, L, ai };
    sys_pool_run(e->pool, T, attn_prep_fn, &j);
    if (g->idx_h > 0) {
        sys_pool_run(e->pool, T, qsa_pool_fn, &j);
        sys_pool_run(e->pool, T, qsa_select_fn, &j);
    }
    /* later tokens see more keys: blocks are handed out first come, first served (every
     * block's result is the same whichever thread runs it) */
    sys_pool_run_chunks(e->pool, st->n_blk * (g->nh / attn_heads_per_call(g)), 1, attn_fn, &j);
    int64_t qw = g->nh * g->hd;
    struct act aq = quant(e, sc->xq_b, sc->xk_b, sc->att, T, qw, act_need(&L->wo));
    mm(e, sc->out, g->H, &L->wo, L->wo.data, sc->att, aq, T);
}

/* ---- Gated DeltaNet -------------------------------------------------------------------- */

struct gdn_job {
    struct engine *e;
    const struct fwd_step *st;
    const struct model_layer *L;
    uint64_t off;       /* the layer's offset in floats inside the snapshot layout: its state in
                           each sequence is seq->gdn + off, conv [K-1, C] then recurrent [Hv, Dk, Dv] */
};

/* Conv step + SiLU for channels [c0, c1) of every token, in place in qkv: each sequence's
 * tokens in order through its own conv state (token order is the recurrence order; channels
 * are independent). A capture after token t copies this channel range of the conv state. */
static void gdn_conv_fn(void *ctx, int64_t c0, int64_t c1, int ti)
{
    const struct gdn_job *j = ctx;
    const struct engine_geom *g = &j->e->g;
    (void)ti;
    for (int si = 0; si < j->st->n_seg; si++) {
        const struct fwd_seg *sg = &j->st->seg[si];
        float *state = sg->s->gdn + j->off;
        for (int64_t t = sg->t0; t < sg->t0 + sg->T; t++) {
            float *x = j->e->s.qkv + t * g->C;
            j->e->ops->conv1d_step(x, state, x, j->L->conv, g->C, g->kconv, c0, c1);
            for (int c = 0; c < sg->n_caps; c++)
                if (sg->caps[c].pos == sg->p0 + (t - sg->t0) + 1)
                    for (int64_t r = 0; r < g->kconv - 1; r++)
                        memcpy((float *)sg->caps[c].buf + j->off + r * g->C + c0, state + r * g->C + c0,
                               (size_t)(c1 - c0) * sizeof(float));
        }
    }
}

/* Per token: L2 norm of the q and k heads, the decay / beta gates. */
static void gdn_prep_fn(void *ctx, int64_t t0, int64_t t1, int ti)
{
    const struct gdn_job *j = ctx;
    const struct engine_geom *g = &j->e->g;
    struct engine_scratch *sc = &j->e->s;
    (void)ti;
    for (int64_t t = t0; t < t1; t++) {
        float *c = sc->qkv + t * g->C;
        l2norm_v(j->e->ops, c, g->dk, g->hk, 1e-6f);
        l2norm_v(j->e->ops, c + g->hk * g->dk, g->dk, g->hk, 1e-6f);
        float *a = sc->a + t * g->hv, *b = sc->b + t * g->hv;
        kern_gdn_gates(a, b, a, b, j->L->ssm_a, j->L->dt_bias, 0, g->hv);
    }
}

/* The recurrence of v-heads [h0, h1), head by head through each sequence's tokens (a head's
 * state stays in cache for the sequence's whole step; heads are independent), then the
 * gated norm of each (token, head). A capture after token t copies the head's state. */
static void gdn_step_fn(void *ctx, int64_t h0, int64_t h1, int ti)
{
    const struct gdn_job *j = ctx;
    struct engine *e = j->e;
    const struct engine_geom *g = &e->g;
    struct engine_scratch *sc = &e->s;
    int64_t vw = g->hv * g->dv, hs = g->dk * g->dv;
    bool sig = model_hparams(e->m)->gdn_gate == GDN_GATE_SIGMOID;
    (void)ti;
    for (int si = 0; si < j->st->n_seg; si++) {
        const struct fwd_seg *sg = &j->st->seg[si];
        float *S = sg->s->gdn + j->off + g->conv_floats;
        for (int64_t h = h0; h < h1; h++) {
            for (int64_t t = sg->t0; t < sg->t0 + sg->T; t++) {
                const float *c = sc->qkv + t * g->C;
                float *y = sc->y + t * vw, *z = sc->z + t * vw;
                e->ops->gdn_step(y, S, c, c + g->hk * g->dk, c + 2 * g->hk * g->dk, sc->a + t * g->hv,
                                 sc->b + t * g->hv, g->hk, g->hv, g->dk, g->dv, h, h + 1);
                if (sig) {
                    /* ((o * r) * w) * sigmoid(z): the gated norm with the other activation */
                    rmsnorm_v(e->ops, y + h * g->dv, y + h * g->dv, j->L->ssm_norm, g->dv, g->eps);
                    e->ops->sigmoid_mul(y + h * g->dv, y + h * g->dv, z + h * g->dv, g->dv);
                } else {
                    rmsnorm_gated_v(e->ops, y + h * g->dv, z + h * g->dv, j->L->ssm_norm, g->dv, g->eps);
                }
                for (int cc = 0; cc < sg->n_caps; cc++)
                    if (sg->caps[cc].pos == sg->p0 + (t - sg->t0) + 1)
                        memcpy((float *)sg->caps[cc].buf + j->off + g->conv_floats + h * hs, S + h * hs,
                               (size_t)hs * sizeof(float));
            }
        }
    }
}

static void layer_gdn(struct engine *e, const struct fwd_step *st, const struct model_layer *L, int gi)
{
    const int64_t T = st->T;
    const struct engine_geom *g = &e->g;
    struct engine_scratch *sc = &e->s;
    int q8 = act_need(&L->wqkv) | act_need(&L->wz) | act_need(&L->wb) | act_need(&L->wa);
    struct act xq = quant(e, sc->xq_a, sc->xk_a, sc->xn, T, g->H, q8);
    struct mm_part in[4] = { part(sc->qkv, g->C, &L->wqkv, L->wqkv.data), part(sc->z, g->hv * g->dv, &L->wz, L->wz.data),
                             part(sc->b, g->hv, &L->wb, L->wb.data), part(sc->a, g->hv, &L->wa, L->wa.data) };
    mm_n(e, sc->xn, xq, T, g->H, 4, in);
    uint64_t off = engine_gdn_offset(e, gi);
    struct gdn_job j = { e, st, L, off };
    sys_pool_run(e->pool, g->C, gdn_conv_fn, &j);
    sys_pool_run(e->pool, T, gdn_prep_fn, &j);
    sys_pool_run(e->pool, g->hv, gdn_step_fn, &j);
    int64_t vw = g->hv * g->dv;
    struct act yq = quant(e, sc->xq_b, sc->xk_b, sc->y, T, vw, act_need(&L->wout));
    mm(e, sc->out, g->H, &L->wout, L->wout.data, sc->y, yq, T);
}

/* ---- feed-forward ---------------------------------------------------------------------- */

static void ffn_dense(struct engine *e, const struct model_layer *L, int64_t T)
{
    const struct engine_geom *g = &e->g;
    struct engine_scratch *sc = &e->s;
    struct act xq = quant(e, sc->xq_a, sc->xk_a, sc->xn, T, g->H, act_need(&L->ffn_gate) | act_need(&L->ffn_up));
    struct mm_part gu[2] = { part(sc->ffa, g->nff, &L->ffn_gate, L->ffn_gate.data),
                             part(sc->ffb, g->nff, &L->ffn_up, L->ffn_up.data) };
    mm_n(e, sc->xn, xq, T, g->H, 2, gu);
    swiglu_par(e, sc->ffa, sc->ffb, T * g->nff);
    struct act hq = quant(e, sc->xq_b, sc->xk_b, sc->ffa, T, g->nff, act_need(&L->ffn_down));
    mm(e, sc->out, g->H, &L->ffn_down, L->ffn_down.data, sc->ffa, hq, T);
}

static void ffn_moe(struct engine *e, const struct model_layer *L, int64_t T)
{
    const struct engine_geom *g = &e->g;
    struct engine_scratch *sc = &e->s;
    int q8 = act_need(&L->router) | act_need(&L->exp_gate) | act_need(&L->exp_up) | act_need(&L->sh_gate) |
              act_need(&L->sh_up) | act_need(&L->sh_gate_inp);
    struct act xq = quant(e, sc->xq_a, sc->xk_a, sc->xn, T, g->H, q8);
    bool shared = g->nff_sh > 0;
    /* the router and the shared expert's gate, up and gate input all read xn */
    struct mm_part in[4] = { part(sc->router, g->ne, &L->router, L->router.data) };
    if (shared) {
        in[1] = part(sc->ffa, g->nff_sh, &L->sh_gate, L->sh_gate.data);
        in[2] = part(sc->ffb, g->nff_sh, &L->sh_up, L->sh_up.data);
        in[3] = part(sc->shg, 1, &L->sh_gate_inp, L->sh_gate_inp.data);
    }
    mm_n(e, sc->xn, xq, T, g->H, shared ? 4 : 1, in);
    if (shared) {
        swiglu_par(e, sc->ffa, sc->ffb, T * g->nff_sh);
        struct act hq = quant(e, sc->xq_b, sc->xk_b, sc->ffa, T, g->nff_sh, act_need(&L->sh_down));
        mm(e, sc->out, g->H, &L->sh_down, L->sh_down.data, sc->ffa, hq, T);
    }
    bool renorm = model_hparams(e->m)->norm_topk_prob; /* the loader sets it per architecture */
    float *eg = sc->eh, *eu = sc->eh + g->nff_exp;
    for (int64_t t = 0; t < T; t++) {
        const float *xt = sc->xn + t * g->H;
        struct act xqt = act_row(xq, t, g->H);
        kern_moe_route(sc->eid, sc->ew, sc->probs, sc->router + t * g->ne, g->ne, g->ne_used, renorm);
        float *acc = sc->macc; /* [H] routed sum of this token */
        memset(acc, 0, (size_t)g->H * sizeof(float));
        for (int64_t k = 0; k < g->ne_used; k++) {
            int32_t ex = sc->eid[k];
            struct mm_part egu[2] = { part(eg, g->nff_exp, &L->exp_gate, L->exp_gate.mats[ex]),
                                      part(eu, g->nff_exp, &L->exp_up, L->exp_up.mats[ex]) };
            mm_n(e, xt, xqt, 1, g->H, 2, egu);
            e->ops->swiglu(eg, eg, eu, 0, g->nff_exp);
            struct act hq = quant(e, sc->xq_b, sc->xk_b, eg, 1, g->nff_exp, act_need(&L->exp_down));
            mm(e, sc->eo, g->H, &L->exp_down, L->exp_down.mats[ex], eg, hq, 1);
            kern_axpy(acc, sc->ew[k], sc->eo, g->H);
        }
        if (shared) kern_axpy(acc, kern_sigmoid(sc->shg[t]), sc->out + t * g->H, g->H);
        memcpy(sc->out + t * g->H, acc, (size_t)g->H * sizeof(float)); /* the token's FFN output */
    }
}

/* ---- Flash-Next: hyper-connections ------------------------------------------------------- */

/* The residual is hc_n streams of H side by side ([T, W]). A mixer reads them: each stream
 * normed with its slice of the gain (xh), a = silu(down xh / n), gates = sigmoid(up a), the
 * block input m = (sum over streams of gate * xh, in stream order) / n; with inject, the
 * write weights w = 2 sigmoid(inject xh / n). Per token (or per token and stream) and
 * batch-invariant matmuls, like everything else here. */
struct hc_job {
    struct engine *e;
    const struct model_hc *hc;
    const float *X;
    float *m;
    bool inject;
};

static void hc_norm_fn(void *ctx, int64_t r0, int64_t r1, int ti)
{
    const struct hc_job *j = ctx;
    const struct engine_geom *g = &j->e->g;
    (void)ti;
    for (int64_t r = r0; r < r1; r++)
        rmsnorm_v(j->e->ops, j->e->s.xh + r * g->H, j->X + r * g->H, j->hc->norm + (r % g->hc_n) * g->H, g->H, g->eps);
}

static void hc_gate_fn(void *ctx, int64_t t0, int64_t t1, int ti)
{
    const struct hc_job *j = ctx;
    const struct engine_geom *g = &j->e->g;
    struct engine_scratch *sc = &j->e->s;
    const float n = (float)g->hc_n;
    (void)ti;
    for (int64_t t = t0; t < t1; t++) {
        float *a = sc->hca + t * g->hc_r;
        for (int64_t i = 0; i < g->hc_r; i++) a[i] = kern_silu(a[i] / n);
        if (!j->inject) continue;
        float *w = sc->hcw + t * g->hc_n;
        for (int64_t s = 0; s < g->hc_n; s++) w[s] = 2.0f * kern_sigmoid(w[s] / n);
    }
}

static void hc_mix_fn(void *ctx, int64_t t0, int64_t t1, int ti)
{
    const struct hc_job *j = ctx;
    const struct engine_geom *g = &j->e->g;
    struct engine_scratch *sc = &j->e->s;
    (void)ti;
    for (int64_t t = t0; t < t1; t++) {
        const float *gt = sc->hcg + t * g->W, *xt = sc->xh + t * g->W;
        float *m = j->m + t * g->H;
        for (int64_t i = 0; i < g->H; i++) {
            float acc = kern_sigmoid(gt[i]) * xt[i];
            for (int64_t s = 1; s < g->hc_n; s++) acc += kern_sigmoid(gt[s * g->H + i]) * xt[s * g->H + i];
            m[i] = acc / (float)g->hc_n;
        }
    }
}

/* m [T, H] from the streams X [T, W] through mixer hc; with inject, sc->hcw [T, hc_n]. */
static void hc_mix(struct engine *e, const struct model_hc *hc, const float *X, int64_t T, float *m, bool inject)
{
    const struct engine_geom *g = &e->g;
    struct engine_scratch *sc = &e->s;
    struct hc_job j = { e, hc, X, m, inject };
    sys_pool_run(e->pool, T * g->hc_n, hc_norm_fn, &j);
    int need = act_need(&hc->down) | (inject ? act_need(&hc->inject) : 0);
    struct act xq = quant(e, sc->xq_a, sc->xk_a, sc->xh, T, g->W, need);
    struct mm_part rd[2] = { part(sc->hca, g->hc_r, &hc->down, hc->down.data),
                             part(sc->hcw, g->hc_n, &hc->inject, hc->inject.data) };
    mm_n(e, sc->xh, xq, T, g->W, inject ? 2 : 1, rd);
    sys_pool_run(e->pool, T, hc_gate_fn, &j);
    struct act aq = quant(e, sc->xq_b, sc->xk_b, sc->hca, T, g->hc_r, act_need(&hc->up));
    mm(e, sc->hcg, g->W, &hc->up, hc->up.data, sc->hca, aq, T);
    sys_pool_run(e->pool, T, hc_mix_fn, &j);
}

static void hc_combine_fn(void *ctx, int64_t t0, int64_t t1, int ti)
{
    const struct hc_job *j = ctx;
    const struct engine_geom *g = &j->e->g;
    struct engine_scratch *sc = &j->e->s;
    (void)ti;
    for (int64_t t = t0; t < t1; t++)
        for (int64_t s = 0; s < g->hc_n; s++) {
            float *x = sc->x + t * g->W + s * g->H, w = sc->hcw[t * g->hc_n + s];
            const float *y = sc->out + t * g->H;
            for (int64_t i = 0; i < g->H; i++) x[i] = x[i] + w * y[i];
        }
}

/* Stream s += w_s * the block's output (sc->out), per token. */
static void hc_combine(struct engine *e, int64_t T)
{
    struct hc_job j = { e, NULL, NULL, NULL, true };
    sys_pool_run(e->pool, T, hc_combine_fn, &j);
}

/* ---- Flash-Next: the hashed n-gram embedding --------------------------------------------- */

/* The n-gram state of a sequence (engine_int.h: after the GDN layers): history rows, then
 * the last N - 1 token ids, most recent first. */
static float *ple_hist(const struct engine *e, void *state) { return (float *)state + e->g.ple_off; }

static int32_t ple_prev(const struct engine *e, const float *state, int64_t k)
{
    int32_t v;
    memcpy(&v, state + e->g.ple_off + (uint64_t)e->g.ple_hist * (uint64_t)e->g.W + (uint64_t)k, sizeof v);
    return v;
}

/* The token at position q of segment sg (q < p0: from the sequence's saved ids). */
static int64_t ple_token(const struct engine *e, const struct fwd_seg *sg, int64_t q)
{
    return q >= sg->p0 ? sg->tokens[q - sg->p0] : ple_prev(e, sg->s->gdn, sg->p0 - 1 - q);
}

struct ple_job {
    struct engine *e;
    const struct fwd_step *st;
    const struct model_layer *L;
};

/* Per token: the context ids (the token, then up to N - 1 predecessors; from the first
 * missing or reset one on, the reset id), the hash of each order o = 2..N (xor of id *
 * multiplier over its o ids, 64-bit), and each head's table row (hash mod its modulus plus
 * its offset), gathered into pe. Integer arithmetic: exact. */
static void ple_gather_fn(void *ctx, int64_t t0, int64_t t1, int ti)
{
    const struct ple_job *j = ctx;
    const struct engine *e = j->e;
    const struct engine_geom *g = &e->g;
    const struct model_hparams *hp = model_hparams(e->m);
    const struct model_weight *tb = model_ple_table(e->m);
    const int64_t per = g->ple_heads / (g->ple_n - 1);
    (void)ti;
    for (int64_t t = t0; t < t1; t++) {
        const struct fwd_seg *sg = &j->st->seg[j->st->tok_seg[t]];
        int64_t p = sg->p0 + (t - sg->t0);
        uint64_t c[MODEL_PLE_MAX_NGRAM];
        c[0] = (uint64_t)sg->tokens[t - sg->t0];
        bool cut = false;
        for (int64_t k = 1; k < g->ple_n; k++) {
            int64_t id = cut || p - k < 0 ? hp->ple_eos : ple_token(e, sg, p - k);
            cut = cut || p - k < 0 || id == hp->ple_eos;
            c[k] = (uint64_t)(cut ? hp->ple_eos : id);
        }
        uint64_t mu = c[0] * hp->ple_mult[0];
        for (int64_t o = 2; o <= g->ple_n; o++) {
            mu ^= c[o - 1] * hp->ple_mult[o - 1];
            for (int64_t k = 0; k < per; k++) {
                int64_t h = (o - 2) * per + k;
                int64_t row = (int64_t)(mu % hp->ple_mod[h] + hp->ple_off[h]);
                const void *mat = tb->n_mat > 1 ? tb->mats[row / tb->rows] : tb->data;
                kern_row_to_f32(e->s.pe + t * g->ple_dim + h * g->ple_row, mat, (enum kern_wtype)tb->dtype, g->ple_row,
                                tb->n_mat > 1 ? row % tb->rows : row);
            }
        }
    }
}

/* Per token and stream s: key k_s normed (gain ple_norm_key), the stream itself normed (gain
 * ple_norm_query), their dot / sqrt(H) = d, gate = sigmoid(sign(d) sqrt(max(|d|, 1e-6)))
 * (d = 0: 0.5), u_s = gate * value (pu), and u_s normed with ple_norm_conv (into pk). */
static void ple_gate_fn(void *ctx, int64_t t0, int64_t t1, int ti)
{
    const struct ple_job *j = ctx;
    const struct engine *e = j->e;
    const struct engine_geom *g = &e->g;
    const struct engine_scratch *sc = &e->s;
    const float rh = sqrtf((float)g->H);
    (void)ti;
    for (int64_t t = t0; t < t1; t++)
        for (int64_t s = 0; s < g->hc_n; s++) {
            float *k = sc->pk + t * g->W + s * g->H, *q = sc->xh + t * g->W + s * g->H;
            float *u = sc->pu + t * g->W + s * g->H;
            const float *v = sc->pv + t * g->H;
            rmsnorm_v(e->ops, k, k, j->L->ple_norm_key + s * g->H, g->H, g->eps);
            rmsnorm_v(e->ops, q, sc->x + t * g->W + s * g->H, j->L->ple_norm_query + s * g->H, g->H, g->eps);
            float d = e->ops->dot(k, q, g->H) / rh;
            float z = d > 0.0f ? sqrtf(HS_MAX(d, 1e-6f)) : d < 0.0f ? -sqrtf(HS_MAX(-d, 1e-6f)) : 0.0f;
            float gate = kern_sigmoid(z);
            for (int64_t i = 0; i < g->H; i++) u[i] = gate * v[i];
            rmsnorm_v(e->ops, k, u, j->L->ple_norm_conv + s * g->H, g->H, g->eps);
        }
}

/* Channels [c0, c1) of every sequence, token by token: the dilated causal conv over the
 * normed values (tap k reads the value N * (taps - 1 - k) positions back; the history holds
 * the last (taps - 1) * N, zeros before position 0), SiLU, and the residual gets u + conv.
 * A capture after a token copies the history's channel range. */
static void ple_conv_fn(void *ctx, int64_t c0, int64_t c1, int ti)
{
    const struct ple_job *j = ctx;
    const struct engine *e = j->e;
    const struct engine_geom *g = &e->g;
    const struct engine_scratch *sc = &e->s;
    const int64_t W = g->W, nh = g->ple_hist, K = g->ple_k;
    (void)ti;
    for (int si = 0; si < j->st->n_seg; si++) {
        const struct fwd_seg *sg = &j->st->seg[si];
        float *hist = ple_hist(e, sg->s->gdn);
        for (int64_t t = sg->t0; t < sg->t0 + sg->T; t++) {
            const float *cur = sc->pk + t * W, *u = sc->pu + t * W;
            float *x = sc->x + t * W;
            for (int64_t c = c0; c < c1; c++) {
                const float *w = j->L->ple_conv + c * K;
                float acc = K > 1 ? w[0] * hist[c] : w[0] * cur[c];
                for (int64_t k = 1; k < K - 1; k++) acc += w[k] * hist[k * g->ple_n * W + c];
                if (K > 1) acc += w[K - 1] * cur[c];
                x[c] = (x[c] + u[c]) + kern_silu(acc);
                for (int64_t r = 0; r + 1 < nh; r++) hist[r * W + c] = hist[(r + 1) * W + c];
                if (nh > 0) hist[(nh - 1) * W + c] = cur[c];
            }
            int64_t pos = sg->p0 + (t - sg->t0) + 1;
            for (int cc = 0; cc < sg->n_caps; cc++)
                if (sg->caps[cc].pos == pos)
                    for (int64_t r = 0; r < nh; r++)
                        memcpy(ple_hist(e, sg->caps[cc].buf) + r * W + c0, hist + r * W + c0,
                               (size_t)(c1 - c0) * sizeof(float));
        }
    }
}

/* The last N - 1 token ids before position pos, most recent first, into the n-gram ids of
 * a snapshot-layout buffer (a capture's or the sequence's own); ids before position 0 are 0
 * and never read. All are read before any is written. */
static void ple_ids_at(const struct engine *e, const struct fwd_seg *sg, int64_t pos, void *dst)
{
    const struct engine_geom *g = &e->g;
    int32_t v[MODEL_PLE_MAX_NGRAM];
    for (int64_t k = 0; k + 1 < g->ple_n; k++) v[k] = pos - 1 - k >= 0 ? (int32_t)ple_token(e, sg, pos - 1 - k) : 0;
    memcpy(ple_hist(e, dst) + (uint64_t)g->ple_hist * (uint64_t)g->W, v, (size_t)(g->ple_n - 1) * sizeof(int32_t));
}

/* The n-gram embedding's layer: X += u + conv(norm(u)), before the layer's mixer. */
static void ple_apply(struct engine *e, const struct fwd_step *st, const struct model_layer *L)
{
    const struct engine_geom *g = &e->g;
    struct engine_scratch *sc = &e->s;
    const int64_t T = st->T;
    struct ple_job j = { e, st, L };
    sys_pool_run(e->pool, T, ple_gather_fn, &j);
    int need = act_need(&L->ple_key) | act_need(&L->ple_value);
    struct act pq = quant(e, sc->xq_a, sc->xk_a, sc->pe, T, g->ple_dim, need);
    struct mm_part kv[2] = { part(sc->pk, g->W, &L->ple_key, L->ple_key.data),
                             part(sc->pv, g->H, &L->ple_value, L->ple_value.data) };
    mm_n(e, sc->pe, pq, T, g->ple_dim, 2, kv);
    sys_pool_run(e->pool, T, ple_gate_fn, &j);
    sys_pool_run(e->pool, g->W, ple_conv_fn, &j);
    /* ids: the captures' first (they read the ids from before this step), then the sequence's */
    for (int si = 0; si < st->n_seg; si++) {
        const struct fwd_seg *sg = &st->seg[si];
        for (int c = 0; c < sg->n_caps; c++)
            if (sg->caps[c].pos > sg->p0 && sg->caps[c].pos <= sg->p0 + sg->T)
                ple_ids_at(e, sg, sg->caps[c].pos, sg->caps[c].buf);
    }
    for (int si = 0; si < st->n_seg; si++) ple_ids_at(e, &st->seg[si], st->seg[si].p0 + st->seg[si].T, st->seg[si].s->gdn);
}

/* ---- the pass -------------------------------------------------------------------------- */

static int check_args(struct engine *e, struct seq *s, const int32_t *tokens, int64_t n,
                      const struct engine_capture *caps, int n_caps, const int64_t *rows, int n_rows,
                      const float *logits, struct hs_err *err)
{
    if (s->e != e) return hs_err_set(err, HS_ERR_INVALID, "engine_forward: the sequence belongs to another engine");
    if (n < 0 || (n > 0 && !tokens)) return hs_err_set(err, HS_ERR_INVALID, "engine_forward: %lld tokens", (long long)n);
    if (n > s->n_ctx - s->pos)
        return hs_err_set(err, HS_ERR_LIMIT, "engine_forward: %lld tokens at position %lld pass n_ctx %lld",
                          (long long)n, (long long)s->pos, (long long)s->n_ctx);
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= e->g.V)
            return hs_err_set(err, HS_ERR_INVALID, "engine_forward: token %lld is id %d, outside the vocabulary [0, %lld)",
                              (long long)i, tokens[i], (long long)e->g.V);
    if (n_rows < 0 || (n_rows > 0 && (!rows || !logits)))
        return hs_err_set(err, HS_ERR_INVALID, "engine_forward: %d logit rows without rows/logits", n_rows);
    for (int k = 0; k < n_rows; k++)
        if (rows[k] < 0 || rows[k] >= n || (k > 0 && rows[k] <= rows[k - 1]))
            return hs_err_set(err, HS_ERR_INVALID, "engine_forward: logit row %d is %lld: rows must ascend within [0, %lld)",
                              k, (long long)rows[k], (long long)n);
    if (n_caps < 0 || (n_caps > 0 && !caps)) return hs_err_set(err, HS_ERR_INVALID, "engine_forward: %d captures", n_caps);
    for (int c = 0; c < n_caps; c++)
        if (caps[c].pos > s->pos && caps[c].pos <= s->pos + n && !caps[c].buf && e->g.n_gdn > 0)
            return hs_err_set(err, HS_ERR_INVALID, "engine_forward: capture %d at %lld has no buffer", c, (long long)caps[c].pos);
    return HS_OK;
}

/* The step table of one forward: segments (one per sequence, its tokens contiguous in the
 * step), each token's segment, and the attention blocks (KERN_ATTN_TOKS tokens of one
 * segment at most, counted from the segment's start, as a forward of that sequence alone
 * cuts them). In the engine's scratch, sized for n_batch tokens. */
static struct fwd_step step_begin(struct engine *e)
{
    struct fwd_step st = { .seg = e->s.seg, .tok_seg = e->s.tok_seg, .blk = e->s.blk };
    return st;
}

static void step_add(struct engine *e, struct fwd_step *st, struct seq *s, const int32_t *tokens, int64_t T,
                     struct engine_capture *caps, int n_caps)
{
    struct fwd_seg *sg = &e->s.seg[st->n_seg];
    *sg = (struct fwd_seg){ .s = s, .tokens = tokens, .t0 = st->T, .T = T, .p0 = s->pos, .caps = caps, .n_caps = n_caps };
    for (int64_t t = 0; t < T; t++) e->s.tok_seg[st->T + t] = st->n_seg;
    for (int64_t b = 0; b < T; b += KERN_ATTN_TOKS)
        e->s.blk[st->n_blk++] = (struct fwd_block){ .seg = st->n_seg, .t0 = st->T + b, .nt = HS_MIN(KERN_ATTN_TOKS, T - b) };
    st->n_seg++;
    st->T += T;
}

static void forward_step(struct engine *e, const struct fwd_step *st)
{
    const struct engine_geom *g = &e->g;
    struct engine_scratch *sc = &e->s;
    const struct model_weight *emb = model_token_embd(e->m);
    const int64_t T = st->T;
    const int64_t xw = g->hc_n > 0 ? g->W : g->H; /* the residual's width per token */
    for (int si = 0; si < st->n_seg; si++) {
        const struct fwd_seg *sg = &st->seg[si];
        for (int64_t t = 0; t < sg->T; t++) {
            float *xt = sc->x + (sg->t0 + t) * xw;
            kern_row_to_f32(xt, emb->data, (enum kern_wtype)emb->dtype, g->H, sg->tokens[t]);
            for (int64_t k = 1; k < g->hc_n; k++) memcpy(xt + k * g->H, xt, (size_t)g->H * sizeof(float));
            if (g->n_attn > 0 && g->n_rot > 0)
                kern_rope_table(sc->rope + (sg->t0 + t) * g->n_rot, g->n_rot, g->theta, sg->p0 + t);
        }
    }
    const struct model_hparams *hp = model_hparams(e->m);
    for (int il = 0; il < g->n_layer; il++) {
        const struct model_layer *L = model_layer(e->m, il);
        if (g->hc_n > 0) { /* Flash-Next: mixers in place of the norms, weighted writes */
            if (il == g->ple_layer) ple_apply(e, st, L);
            hc_mix(e, &L->hc_attn, sc->x, T, sc->xn, true);
        } else {
            rmsnorm_rows(e, sc->xn, sc->x, L->attn_norm, T, g->H, g->eps);
        }
        if (L->kind == LAYER_KIND_ATTN) layer_attn(e, st, L, g->attn_index[il]);
        else layer_gdn(e, st, L, g->gdn_index[il]);
        if (g->hc_n > 0) {
            hc_combine(e, T);
            hc_mix(e, &L->hc_ffn, sc->x, T, sc->xn, true);
        } else {
            kern_add(sc->x, sc->out, T * g->H);
            rmsnorm_rows(e, sc->xn, sc->x, L->post_attn_norm, T, g->H, g->eps);
        }
        if (hp->layer_moe[il]) ffn_moe(e, L, T);
        else ffn_dense(e, L, T);
        if (g->hc_n > 0) hc_combine(e, T);
        else kern_add(sc->x, sc->out, T * g->H);
    }
    for (int si = 0; si < st->n_seg; si++) {
        const struct fwd_seg *sg = &st->seg[si];
        for (int c = 0; c < sg->n_caps; c++)
            if (sg->caps[c].pos > sg->p0 && sg->caps[c].pos <= sg->p0 + sg->T) sg->caps[c].filled = true;
        sg->s->pos = sg->p0 + sg->T;
    }
}

/* Logits of the step's tokens idx[0..n) (indices into the step) into logits + k * n_vocab:
 * the final norm per row, then one lm_head matmul over all of them (batch-invariant, so a
 * row's logits do not depend on which others share the call). */
static void lm_rows(struct engine *e, const int64_t *idx, int n, float *logits)
{
    if (n == 0) return;
    if (e->g.hc_n > 0) { /* the head mixer: the rows' streams gathered, mixed without inject */
        for (int r = 0; r < n; r++)
            memcpy(e->s.pu + (int64_t)r * e->g.W, e->s.x + idx[r] * e->g.W, (size_t)e->g.W * sizeof(float));
        hc_mix(e, model_head_mixer(e->m), e->s.pu, n, e->s.hrow, false);
    } else {
        for (int r = 0; r < n; r++)
            kern_rmsnorm(e->s.hrow + (int64_t)r * e->g.H, e->s.x + idx[r] * e->g.H, model_output_norm(e->m),
                         e->g.H, e->g.eps);
    }
    const struct model_weight *lm = model_lm_head(e->m);
    struct act hq = quant(e, e->s.xq_a, e->s.xk_a, e->s.hrow, n, e->g.H, act_need(lm));
    mm(e, logits, e->g.V, lm, lm->data, e->s.hrow, hq, n);
}

static void reserve(struct engine *e, struct seq *s, int64_t n)
{
    seq_kv_reserve(s, s->pos + n);
    if (e->g.n_attn > 0) engine_attn_reserve(e, s->pos + n);
}

int engine_forward(struct engine *e, struct seq *s, const int32_t *tokens, int64_t n,
                   struct engine_capture *caps, int n_caps, const int64_t *rows, int n_rows,
                   float *logits, struct hs_err *err)
{
    int rc = check_args(e, s, tokens, n, caps, n_caps, rows, n_rows, logits, err);
    if (rc) return rc;
    if ((rc = model_mapping_check(e->m, err))) return rc; /* the file was truncated earlier */
    if (n == 0) return HS_OK;
    reserve(e, s, n);
    int k = 0; /* next requested row */
    for (int64_t i0 = 0; i0 < n; i0 += e->n_batch) {
        int64_t T = HS_MIN(e->n_batch, n - i0);
        struct fwd_step st = step_begin(e);
        step_add(e, &st, s, tokens + i0, T, caps, n_caps);
        forward_step(e, &st);
        int k0 = k;
        for (; k < n_rows && rows[k] < i0 + T; k++) e->s.row_idx[k - k0] = rows[k] - i0;
        lm_rows(e, e->s.row_idx, k - k0, logits ? logits + (int64_t)k0 * e->g.V : NULL);
    }
    /* a SIGBUS during the pass left zeros where weights were (sys.h's guard): discard it */
    return model_mapping_check(e->m, err);
}

int64_t engine_n_batch(const struct engine *e) { return e->n_batch; }

int engine_forward_batch(struct engine *e, struct engine_item *items, int n_items, float *logits,
                         struct hs_err *err)
{
    if (n_items < 0 || (n_items > 0 && !items))
        return hs_err_set(err, HS_ERR_INVALID, "engine_forward_batch: %d items", n_items);
    int64_t total = 0;
    int n_rows = 0;
    for (int i = 0; i < n_items; i++) {
        const struct engine_item *it = &items[i];
        int rc = check_args(e, it->s, it->tokens, it->n, it->caps, it->n_caps, it->rows, it->n_rows, logits, err);
        if (rc) return rc;
        for (int j = 0; j < i; j++)
            if (items[j].s == it->s)
                return hs_err_set(err, HS_ERR_INVALID, "engine_forward_batch: items %d and %d are one sequence", j, i);
        total += it->n;
        n_rows += it->n_rows;
    }
    if (total > e->n_batch)
        return hs_err_set(err, HS_ERR_LIMIT, "engine_forward_batch: %lld tokens in one step; the engine's step holds %lld",
                          (long long)total, (long long)e->n_batch);
    int rc = model_mapping_check(e->m, err);
    if (rc || total == 0) return rc;
    struct fwd_step st = step_begin(e);
    for (int i = 0; i < n_items; i++) {
        struct engine_item *it = &items[i];
        if (it->n == 0) continue;
        reserve(e, it->s, it->n);
        step_add(e, &st, it->s, it->tokens, it->n, it->caps, it->n_caps);
    }
    forward_step(e, &st);
    int k = 0;
    for (int i = 0, si = 0; i < n_items; i++) {
        if (items[i].n == 0) continue;
        for (int r = 0; r < items[i].n_rows; r++) e->s.row_idx[k++] = st.seg[si].t0 + items[i].rows[r];
        si++;
    }
    lm_rows(e, e->s.row_idx, n_rows, logits);
    return model_mapping_check(e->m, err);
}
