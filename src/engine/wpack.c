/*
 * wpack.c — the engine's packed copies of its quantized weight matrices ([F10], many
 * streams): Q8_0 in the panel layout (q8p.c), Q4_K and Q6_K in the row-group layout (kp.c).
 *
 * Design note:
 *   When the kernel variant has a matmul over such a layout (kern_ops.matmul_q8p,
 *   kern_ops.matmul_kp: the AVX2 and AVX-512 tables), every matrix of that type the
 *   forward pass multiplies by is copied once, at engine start, into it (kernels.h): a
 *   decode step of N sequences then reads each weight once for all of them with no per-call
 *   repacking and no horizontal sums, and one token or a prefill take the same kernel. The
 *   matmul finds a matrix's copy by the address of its data (engine_pack_find, a binary
 *   search in a sorted table), so nothing else in the engine or the model changes.
 *
 *   1. Exactness: the packed matmuls give kern_matmul's / kern_matmul_k's bits on the
 *      unpacked rows (the kernels' contract, tests/unit/kernels/test_q8p.c, test_q4kp.c,
 *      test_q6kp.c), so packing or not, and which matrices are packed, never changes a
 *      logit; the fingerprint does not include it.
 *   2. Memory: a copy is about the size of its matrix (Q8_0 and Q6_K the same bytes per 16
 *      rows, Q4_K 2.8% more; padded to 16 rows), in huge pages where the kernel offers them
 *      (hs_huge_alloc). Once a matrix is packed, its pages of the file mapping are dropped
 *      from the resident set (sys_mem_cold; only for matrices that lie in the mapping, never
 *      a copy the model owns): resident memory stays about what it was, the file's pages
 *      become page cache the kernel may keep or drop, and packing reads the file once. The
 *      embedding lookup keeps reading the mapping (a few rows per step, faulted back in),
 *      also when lm_head is token_embd (tied). engine_packed_bytes reports the copies' size.
 *   3. Lifecycle: built in engine_new (threads of the engine's pool split each matrix's
 *      row groups), read-only afterwards, freed in engine_free. engine_force_variant to a
 *      table without the matmul makes the forward pass ignore the copies (the rows are
 *      still there); HEADSTART_NO_PACK=1 in the environment (or its older name
 *      HEADSTART_NO_Q8P=1) skips the copies altogether (for side-by-side benchmarks; the
 *      bits are the same either way).
 *   4. Q8_0 rows of more than KERN_Q8P_KMAX values stay Q8_0 (the kernel's stack buffers).
 *   5. The activation's share of the Q8_0 layout's offset (kern_q8p_corr) is computed once
 *      per quantized activation, in forward.c's quant() beside the quantization (scratch
 *      xc_a / xc_b), and passed to every packed Q8_0 matmul that reads it (the AVX2 one
 *      undoes the offset per weight vector instead and ignores it).
 */
#include "engine/engine_int.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Every struct model_weight of a layer that the forward pass may multiply by. */
static const size_t layer_weights[] = {
    offsetof(struct model_layer, hc_attn.down), offsetof(struct model_layer, hc_attn.up),
    offsetof(struct model_layer, hc_attn.inject), offsetof(struct model_layer, hc_ffn.down),
    offsetof(struct model_layer, hc_ffn.up), offsetof(struct model_layer, hc_ffn.inject),
    offsetof(struct model_layer, ple_key), offsetof(struct model_layer, ple_value),
    offsetof(struct model_layer, idx_q), offsetof(struct model_layer, idx_k),
    offsetof(struct model_layer, wq), offsetof(struct model_layer, wk),
    offsetof(struct model_layer, wv), offsetof(struct model_layer, wo),
    offsetof(struct model_layer, wqkv), offsetof(struct model_layer, wz),
    offsetof(struct model_layer, wb), offsetof(struct model_layer, wa),
    offsetof(struct model_layer, wout), offsetof(struct model_layer, ffn_gate),
    offsetof(struct model_layer, ffn_up), offsetof(struct model_layer, ffn_down),
    offsetof(struct model_layer, router), offsetof(struct model_layer, exp_gate),
    offsetof(struct model_layer, exp_up), offsetof(struct model_layer, exp_down),
    offsetof(struct model_layer, sh_gate), offsetof(struct model_layer, sh_up),
    offsetof(struct model_layer, sh_down), offsetof(struct model_layer, sh_gate_inp),
};

/* The type w is packed as under the engine's kernel table (KERN_W_Q8_0, KERN_K_Q4_K,
 * KERN_K_Q6_K), or -1 when it is not. */
static int pack_type(const struct engine *e, const struct model_weight *w)
{
    if (w->rows < 1) return -1;
    if (w->dtype == DTYPE_Q8_0 && e->ops->matmul_q8p && w->cols >= KERN_Q8_BLOCK && w->cols % KERN_Q8_BLOCK == 0 &&
        w->cols <= KERN_Q8P_KMAX)
        return KERN_W_Q8_0;
    int t = (int)w->dtype;
    if ((t == KERN_K_Q4_K || t == KERN_K_Q6_K) && e->ops->matmul_kp && kern_kp_bytes(t, w->rows, w->cols) > 0)
        return t;
    return -1;
}

static size_t pack_bytes(int wt, int64_t rows, int64_t cols)
{
    return wt == KERN_W_Q8_0 ? kern_q8p_bytes(rows, cols) : kern_kp_bytes(wt, rows, cols);
}

static size_t src_bytes(int wt, int64_t rows, int64_t cols)
{
    return (size_t)rows * (wt == KERN_W_Q8_0 ? kern_row_bytes(KERN_W_Q8_0, cols) : kern_k_row_bytes(wt, cols));
}

/* Visit every matrix of w (one, or each expert's); collect (n counts, tab fills). */
static void visit(struct engine *e, const struct model_weight *w, int64_t *n)
{
    int wt = w ? pack_type(e, w) : -1;
    if (wt < 0) return;
    for (int64_t i = 0; i < w->n_mat; i++) {
        const void *src = w->n_mat == 1 ? w->data : w->mats[i];
        if (!src) continue;
        if (e->packs) {
            struct engine_pack *q = &e->packs[*n];
            q->src = src;
            q->wt = wt;
            q->rows = w->rows;
            q->cols = w->cols;
            q->src_bytes = src_bytes(wt, w->rows, w->cols);
            q->packed = NULL;
        }
        (*n)++;
    }
}

static void visit_all(struct engine *e, int64_t *n)
{
    const struct model *m = e->m;
    visit(e, model_lm_head(m), n);
    const struct model_hc *hc = model_head_mixer(m);
    if (hc) {
        visit(e, &hc->down, n);
        visit(e, &hc->up, n);
        visit(e, &hc->inject, n);
    }
    for (int il = 0; il < e->g.n_layer; il++) {
        const struct model_layer *L = model_layer(m, il);
        for (size_t i = 0; i < sizeof layer_weights / sizeof layer_weights[0]; i++)
            visit(e, (const struct model_weight *)((const char *)L + layer_weights[i]), n);
    }
}

/* [p, p + n) lies inside one of the model's file mappings (not a copy the model owns). */
static bool in_mapping(const struct model *m, const void *p, size_t n)
{
    const struct tensor_set *ts = model_tensors(m);
    for (int i = 0; ts && i < tensor_set_n_files(ts); i++) {
        const struct sys_map *f = tensor_set_file(ts, i);
        if (f && f->data && (const uint8_t *)p >= f->data && (uint64_t)((const uint8_t *)p - f->data) <= f->len &&
            n <= f->len - (uint64_t)((const uint8_t *)p - f->data))
            return true;
    }
    return false;
}

static int by_src(const void *a, const void *b)
{
    uintptr_t x = (uintptr_t)((const struct engine_pack *)a)->src, y = (uintptr_t)((const struct engine_pack *)b)->src;
    return x < y ? -1 : x > y;
}

struct pack_job {
    const struct engine_pack *q;
};

static void pack_fn(void *ctx, int64_t g0, int64_t g1, int ti)
{
    const struct pack_job *j = ctx;
    (void)ti;
    if (j->q->wt == KERN_W_Q8_0) kern_q8p_pack(j->q->packed, j->q->src, j->q->rows, j->q->cols, g0, g1);
    else kern_kp_pack(j->q->packed, j->q->src, j->q->wt, j->q->rows, j->q->cols, g0, g1);
}

void engine_pack_build(struct engine *e)
{
    const char *off = getenv("HEADSTART_NO_PACK"), *off_old = getenv("HEADSTART_NO_Q8P");
    if (!off || !*off) off = off_old;
    if ((!e->ops->matmul_q8p && !e->ops->matmul_kp) || (off && *off && strcmp(off, "0") != 0)) return;
    int64_t n = 0;
    visit_all(e, &n);
    if (n == 0) return;
    e->packs = hs_calloc((size_t)n, sizeof(*e->packs));
    int64_t filled = 0;
    visit_all(e, &filled);
    qsort(e->packs, (size_t)n, sizeof(*e->packs), by_src);
    /* a matrix seen twice (a weight bound under two names) is packed once */
    int64_t u = 0;
    for (int64_t i = 0; i < n; i++)
        if (u == 0 || e->packs[u - 1].src != e->packs[i].src) e->packs[u++] = e->packs[i];
    e->n_packs = u;
    for (int64_t i = 0; i < u; i++) {
        struct engine_pack *q = &e->packs[i];
        size_t bytes = pack_bytes(q->wt, q->rows, q->cols);
        q->packed = hs_huge_alloc(bytes);
        e->packed_bytes += bytes;
        if (q->wt == KERN_W_Q8_0) e->has_q8p = true;
        struct pack_job j = { q };
        sys_pool_run(e->pool, (q->rows + KERN_KP_ROWS - 1) / KERN_KP_ROWS, pack_fn, &j);
        if (in_mapping(e->m, q->src, q->src_bytes)) sys_mem_cold(q->src, q->src_bytes);
    }
}

const void *engine_pack_find(const struct engine *e, const void *src)
{
    int64_t lo = 0, hi = e->n_packs;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        uintptr_t x = (uintptr_t)e->packs[mid].src;
        if (x == (uintptr_t)src) return e->packs[mid].packed;
        if (x < (uintptr_t)src) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

void engine_pack_free(struct engine *e)
{
    for (int64_t i = 0; i < e->n_packs; i++) hs_free(e->packs[i].packed);
    hs_free(e->packs);
    e->packs = NULL;
    e->n_packs = 0;
    e->has_q8p = false;
    e->packed_bytes = 0;
}
