/*
 * q8pack.c — the engine's packed copies of its Q8_0 matrices ([F10], many streams).
 *
 * Design note:
 *   When the kernel variant has a panel-layout matmul (kern_ops.matmul_q8p: the AVX-512 VNNI
 *   tables), every Q8_0 matrix the forward pass multiplies by is copied once, at engine
 *   start, into that layout (kernels.h, q8p.c): a decode step of N sequences then reads each
 *   weight once for all of them with no per-call repacking and no horizontal sums, and one
 *   token or a prefill take the same kernel. The matmul finds a matrix's copy by the address
 *   of its Q8_0 data (engine_q8p_find, a binary search in a sorted table), so nothing else
 *   in the engine or the model changes.
 *
 *   1. Exactness: the packed matmul gives kern_matmul's bits on the unpacked rows (the
 *      kernels' contract, tests/unit/kernels/test_q8p.c), so packing or not, and which
 *      matrices are packed, never changes a logit; the fingerprint does not include it.
 *   2. Memory: a copy is the size of its matrix (padded to 16 rows), in huge pages where
 *      the kernel offers them (hs_huge_alloc). Once a matrix is packed, its pages of the
 *      file mapping are dropped from the resident set (sys_mem_cold; only for matrices that
 *      lie in the mapping, never a copy the model owns): resident memory stays about what
 *      it was, the file's pages become page cache the kernel may keep or drop, and packing
 *      reads the file once. The embedding lookup keeps reading the mapping (a few rows per
 *      step, faulted back in), also when lm_head is token_embd (tied). engine_packed_bytes
 *      reports the copies' size.
 *   3. Lifecycle: built in engine_new (threads of the engine's pool split each matrix's
 *      row groups), read-only afterwards, freed in engine_free. engine_force_variant to a
 *      table without matmul_q8p makes the forward pass ignore the copies (the Q8_0 rows are
 *      still there); HEADSTART_NO_Q8P=1 in the environment skips the copies altogether
 *      (for side-by-side benchmarks; the bits are the same either way).
 *   4. Rows of more than KERN_Q8P_KMAX values stay Q8_0 (the kernel's stack buffers).
 *   5. The activation's share of the layout's offset (kern_q8p_corr) is computed once per
 *      quantized activation, in forward.c's quant() beside the quantization (scratch xc_a /
 *      xc_b), and passed to every packed matmul that reads it.
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

static bool packable(const struct model_weight *w)
{
    return w->dtype == DTYPE_Q8_0 && w->rows >= 1 && w->cols >= KERN_Q8_BLOCK && w->cols % KERN_Q8_BLOCK == 0 &&
           w->cols <= KERN_Q8P_KMAX;
}

/* Visit every matrix of w (one, or each expert's); collect (n counts, tab fills). */
static void visit(struct engine *e, const struct model_weight *w, int64_t *n)
{
    if (!w || !packable(w)) return;
    for (int64_t i = 0; i < w->n_mat; i++) {
        const void *src = w->n_mat == 1 ? w->data : w->mats[i];
        if (!src) continue;
        if (e->q8p) {
            struct engine_q8p *q = &e->q8p[*n];
            q->src = src;
            q->rows = w->rows;
            q->cols = w->cols;
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
    uintptr_t x = (uintptr_t)((const struct engine_q8p *)a)->src, y = (uintptr_t)((const struct engine_q8p *)b)->src;
    return x < y ? -1 : x > y;
}

struct pack_job {
    const struct engine_q8p *q;
};

static void pack_fn(void *ctx, int64_t g0, int64_t g1, int ti)
{
    const struct pack_job *j = ctx;
    (void)ti;
    kern_q8p_pack(j->q->packed, j->q->src, j->q->rows, j->q->cols, g0, g1);
}

void engine_q8p_build(struct engine *e)
{
    const char *off = getenv("HEADSTART_NO_Q8P");
    if (!e->ops->matmul_q8p || (off && *off && strcmp(off, "0") != 0)) return;
    int64_t n = 0;
    visit_all(e, &n);
    if (n == 0) return;
    e->q8p = hs_calloc((size_t)n, sizeof(*e->q8p));
    int64_t filled = 0;
    visit_all(e, &filled);
    qsort(e->q8p, (size_t)n, sizeof(*e->q8p), by_src);
    /* a matrix seen twice (a weight bound under two names) is packed once */
    int64_t u = 0;
    for (int64_t i = 0; i < n; i++)
        if (u == 0 || e->q8p[u - 1].src != e->q8p[i].src) e->q8p[u++] = e->q8p[i];
    e->n_q8p = u;
    for (int64_t i = 0; i < u; i++) {
        struct engine_q8p *q = &e->q8p[i];
        size_t bytes = kern_q8p_bytes(q->rows, q->cols);
        q->packed = hs_huge_alloc(bytes);
        e->q8p_bytes += bytes;
        struct pack_job j = { q };
        sys_pool_run(e->pool, (q->rows + KERN_Q8P_ROWS - 1) / KERN_Q8P_ROWS, pack_fn, &j);
        size_t src_bytes = (size_t)q->rows * kern_row_bytes(KERN_W_Q8_0, q->cols);
        if (in_mapping(e->m, q->src, src_bytes)) sys_mem_cold(q->src, src_bytes);
    }
}

const void *engine_q8p_find(const struct engine *e, const void *src)
{
    int64_t lo = 0, hi = e->n_q8p;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        uintptr_t x = (uintptr_t)e->q8p[mid].src;
        if (x == (uintptr_t)src) return e->q8p[mid].packed;
        if (x < (uintptr_t)src) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

void engine_q8p_free(struct engine *e)
{
    for (int64_t i = 0; i < e->n_q8p; i++) hs_free(e->q8p[i].packed);
    hs_free(e->q8p);
    e->q8p = NULL;
    e->n_q8p = 0;
    e->q8p_bytes = 0;
}
