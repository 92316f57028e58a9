/* plan.c — the tensor plan of `headstart mkmodel` and the values that fill it.
 *
 * Design note
 * -----------
 * A plan is a list of output tensors and of jobs: one job a source tensor (HF layout, its
 * own PRNG stream keyed by seed and HF name), a route for its rows and a transform on the
 * way (mkmodel.c's design note has the picture). mk_plan_run generates every row of every
 * source in parallel and stores it, through the kernels' quantizers, where its route says.
 *
 * Invariants:
 *   1. A value depends only on (seed, HF tensor name, row, column): never on the thread
 *      count, the output format or the order of the jobs.
 *   2. Every output row is written by exactly one source row (routes are permutations).
 */
#include "mkmodel/mkmodel_int.h"
#include "kernels/kernels.h"
#include "sys/sys.h"
#include "base/base.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void mk_plan_free(struct mk_plan *p)
{
    for (int i = 0; i < p->n_outs; i++) hs_free(p->outs[i].data);
    hs_free(p->outs);
    hs_free(p->jobs);
    memset(p, 0, sizeof(*p));
}

int mk_out_add(struct mk_plan *p, const char *name, enum dtype dt, int n_dims,
                      const int64_t *shape, struct hs_err *err)
{
    if (p->n_outs == p->cap_outs) {
        p->cap_outs = p->cap_outs ? 2 * p->cap_outs : 64;
        p->outs = hs_realloc(p->outs, (size_t)p->cap_outs * sizeof(*p->outs));
    }
    struct mk_out *o = &p->outs[p->n_outs];
    memset(o, 0, sizeof(*o));
    snprintf(o->name, sizeof(o->name), "%s", name);
    o->dtype = dt;
    o->n_dims = n_dims;
    o->n_rows = 1;
    for (int d = 0; d < n_dims; d++) {
        o->shape[d] = shape[d];
        if (d < n_dims - 1) o->n_rows *= shape[d];
    }
    o->row_len = shape[n_dims - 1];
    uint64_t n_bytes;
    if (!dtype_row_bytes(dt, (uint64_t)o->row_len, &o->row_bytes) ||
        hs_mul_overflow(o->row_bytes, (uint64_t)o->n_rows, &n_bytes) ||
        hs_add_overflow(p->total_bytes, n_bytes, &p->total_bytes))
        return hs_err_set(err, HS_ERR_LIMIT, "tensor '%s': %s rows of %lld values do not fit",
                          name, dtype_info(dt)->name, (long long)o->row_len);
    o->n_bytes = n_bytes;
    return p->n_outs++;
}

int mk_out_add_fixed(struct mk_plan *p, const char *name, enum dtype dt, int64_t n, const void *data,
                     struct hs_err *err)
{
    int o = mk_out_add(p, name, dt, 1, &n, err);
    if (o >= 0) p->outs[o].fixed = data;
    return o;
}

void mk_job_add(struct mk_plan *p, const struct mk_src *src, enum mk_route route,
                       enum mk_xform xform, int dst, int dst2, int64_t p0, int64_t p1)
{
    if (p->n_jobs == p->cap_jobs) {
        p->cap_jobs = p->cap_jobs ? 2 * p->cap_jobs : 64;
        p->jobs = hs_realloc(p->jobs, (size_t)p->cap_jobs * sizeof(*p->jobs));
    }
    p->jobs[p->n_jobs++] = (struct mk_job){
        .src = *src, .route = route, .xform = xform, .dst = dst, .dst2 = dst2, .p0 = p0, .p1 = p1,
    };
    p->max_row = HS_MAX(p->max_row, src->shape[src->n_dims - 1]);
}

/* ---- values: PRNG, transforms, storage ---------------------------------------------- */

static uint64_t mk_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* splitmix64: a 64-bit counter stepped by the golden ratio, finalised by mk_mix64. */
static uint64_t mk_next(uint64_t *s)
{
    *s += 0x9E3779B97F4A7C15ull;
    return mk_mix64(*s);
}

static double mk_unit(uint64_t x) { return (double)(x >> 11) * 0x1.0p-53; } /* [0, 1) */

/* Fill out[0..n) with standard normals: Box-Muller in float (the costly part of a large
 * model), both outputs used, one 64-bit draw per pair (24 bits for each uniform). */
static void mk_normals(uint64_t *s, float *out, int64_t n)
{
    for (int64_t i = 0; i < n; i += 2) {
        uint64_t x = mk_next(s);
        float u1 = 1.0f - (float)(x >> 40) * 0x1.0p-24f; /* (0, 1]: log is finite */
        float u2 = (float)((x >> 16) & 0xFFFFFF) * 0x1.0p-24f;
        float r = sqrtf(-2.0f * logf(u1)), sn, cs;
        sincosf(6.2831853f * u2, &sn, &cs);
        out[i] = r * cs;
        if (i + 1 < n) out[i + 1] = r * sn;
    }
}

/* Row `row` of source s, in HF layout. */
static void mk_gen_row(const struct mk_src *s, uint64_t tensor_seed, int64_t row, float *out)
{
    const int64_t n = s->shape[s->n_dims - 1];
    uint64_t st = mk_mix64(tensor_seed ^ (0xD1B54A32D192ED03ull * (uint64_t)(row + 1)));
    float mean = 0.0f, sd;
    switch (s->init) {
    case MK_INIT_MATRIX: sd = (float)(1.0 / sqrt((double)n)); break;
    case MK_INIT_CONV: sd = (float)(1.0 / sqrt((double)n)); break;
    case MK_INIT_NORM_ZC: sd = 0.05f; break;
    case MK_INIT_NORM_ONE: mean = 1.0f; sd = 0.05f; break;
    case MK_INIT_DT_BIAS: sd = 0.1f; break;
    case MK_INIT_A_LOG:
        for (int64_t i = 0; i < n; i++) out[i] = (float)log(0.2 + 0.8 * mk_unit(mk_next(&st)));
        return;
    default: sd = 0.0f; break;
    }
    mk_normals(&st, out, n);
    for (int64_t i = 0; i < n; i++) out[i] = mean + sd * out[i];
}

/* Value-head tiling: old head g*r + j (grouped by key head g) -> new head j*Hk + g. */
static int64_t mk_tile_head(const struct mk_geom *g, int64_t h)
{
    int64_t r = g->hv / g->hk;
    return (h % r) * g->hk + h / r;
}

static void mk_route_row(const struct mk_job *j, const struct mk_geom *g, int64_t r, int *dst,
                         int64_t *dr)
{
    *dst = j->dst;
    *dr = r;
    switch (j->route) {
    case MK_ROUTE_SAME:
    case MK_ROUTE_TILE_COLS:
        break;
    case MK_ROUTE_TILE_ROWS:
        if (r >= j->p0) {
            int64_t h = (r - j->p0) / j->p1, w = (r - j->p0) % j->p1;
            *dr = j->p0 + mk_tile_head(g, h) * j->p1 + w;
        }
        break;
    case MK_ROUTE_QKVZ: {
        const int64_t rv = (g->hv / g->hk) * g->dv, blk = 2 * g->dk + 2 * rv;
        const int64_t grp = r / blk, o = r % blk, kd = g->hk * g->dk;
        if (o < g->dk) *dr = grp * g->dk + o;
        else if (o < 2 * g->dk) *dr = kd + grp * g->dk + (o - g->dk);
        else if (o < 2 * g->dk + rv) *dr = 2 * kd + grp * rv + (o - 2 * g->dk);
        else { *dst = j->dst2; *dr = grp * rv + (o - 2 * g->dk - rv); }
        break;
    }
    case MK_ROUTE_GATE_UP: {
        const int64_t e = r / (2 * j->p0), i = r % (2 * j->p0);
        if (i < j->p0) *dr = e * j->p0 + i;
        else { *dst = j->dst2; *dr = e * j->p0 + (i - j->p0); }
        break;
    }
    case MK_ROUTE_STACK: {
        int64_t rows = 1;
        for (int d = 0; d < j->src.n_dims - 1; d++) rows *= j->src.shape[d];
        *dr = j->p0 * rows + r;
        break;
    }
    case MK_ROUTE_SPLIT:
        if (r >= j->p0) {
            *dst = j->dst2;
            *dr = r - j->p0;
        }
        break;
    }
}

/* The kernels' weight type of each dtype mkmodel stores: an explicit map, the two enums
 * belong to modules that do not know each other. */
static const int mk_kern_types[DTYPE_COUNT] = {
    [DTYPE_F32] = KERN_W_F32, [DTYPE_F16] = KERN_W_F16, [DTYPE_BF16] = KERN_W_BF16,
    [DTYPE_Q8_0] = KERN_W_Q8_0, [DTYPE_Q4_K] = KERN_K_Q4_K, [DTYPE_Q5_K] = KERN_K_Q5_K,
    [DTYPE_Q6_K] = KERN_K_Q6_K, [DTYPE_Q5_1] = KERN_X_Q5_1, [DTYPE_IQ4_NL] = KERN_X_IQ4_NL,
    [DTYPE_IQ4_XS] = KERN_X_IQ4_XS,
};

/* Store n f32 values as dtype at dst: the kernels' quantizers, beside their dequantizers. */
static void mk_store_row(enum dtype dt, const float *x, int64_t n, uint8_t *dst)
{
    kern_row_from_f32(dst, (enum kern_wtype)mk_kern_types[dt], x, n);
}

struct mk_run {
    struct mk_plan *plan;
    const struct mk_geom *g;
    const struct mk_job *job;
    uint64_t tensor_seed;
    float *scratch; /* 2 * plan->max_row floats per thread */
};

static void mk_run_rows(void *ctx, int64_t begin, int64_t end, int t)
{
    struct mk_run *run = ctx;
    const struct mk_job *j = run->job;
    const int64_t n = j->src.shape[j->src.n_dims - 1];
    float *row = run->scratch + (size_t)t * 2 * (size_t)run->plan->max_row;
    float *tmp = row + run->plan->max_row;
    for (int64_t r = begin; r < end; r++) {
        float *x = row;
        mk_gen_row(&j->src, run->tensor_seed, r, x);
        if (j->route == MK_ROUTE_TILE_COLS) {
            for (int64_t c = 0; c < n; c++)
                tmp[mk_tile_head(run->g, c / j->p1) * j->p1 + c % j->p1] = x[c];
            x = tmp;
        }
        if (j->xform == MK_XFORM_PLUS_ONE)
            for (int64_t c = 0; c < n; c++) x[c] = 1.0f + x[c];
        else if (j->xform == MK_XFORM_NEG_EXP)
            for (int64_t c = 0; c < n; c++) x[c] = -expf(x[c]);
        int dst;
        int64_t dr;
        mk_route_row(j, run->g, r, &dst, &dr);
        const struct mk_out *o = &run->plan->outs[dst];
        mk_store_row(o->dtype, x, n, o->data + (uint64_t)dr * o->row_bytes);
    }
}

void mk_plan_run(struct mk_plan *p, const struct mk_geom *g, uint64_t seed)
{
    for (int i = 0; i < p->n_outs; i++) {
        p->outs[i].data = hs_malloc(p->outs[i].n_bytes);
        if (p->outs[i].fixed) memcpy(p->outs[i].data, p->outs[i].fixed, p->outs[i].n_bytes);
    }
    const struct sys_cpu *cpu = sys_cpu_get();
    int n_threads = HS_MAX(1, HS_MIN(cpu ? cpu->n_cores : 1, 16));
    struct sys_pool *pool = sys_pool_new(n_threads);
    struct mk_run run = { .plan = p, .g = g };
    run.scratch = hs_malloc((size_t)n_threads * 2 * (size_t)p->max_row * sizeof(float));
    for (int i = 0; i < p->n_jobs; i++) {
        const struct mk_job *j = &p->jobs[i];
        int64_t rows = 1;
        for (int d = 0; d < j->src.n_dims - 1; d++) rows *= j->src.shape[d];
        run.job = j;
        run.tensor_seed = mk_mix64(mk_mix64(seed) ^ hs_fnv1a64_str(j->src.name));
        sys_pool_run(pool, rows, mk_run_rows, &run);
    }
    hs_free(run.scratch);
    sys_pool_free(pool);
}
