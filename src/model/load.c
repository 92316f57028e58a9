/* load.c — model_load: open an HF directory or a GGUF file, read and validate the
 * hyperparameters, and bind every tensor the architecture's spec tables name into the
 * engine's one layout (model.h design note, items 1-5).
 *
 * Binding walks units: the top, the MTP top, each main layer, each MTP layer. For each
 * unit it tries every applicable spec in table order, checks dtype and shape, converts
 * (or takes a zero-copy view) and marks the slot bound; then every required slot that is
 * still empty is reported missing. Problems are collected, not returned one by one, so a
 * broken file is described in one message (the first lines, then "and N more").
 *
 * Value-head order. A file is "grouped" (value head h reads key head h / r) or "tiled"
 * (h reads h % Hk). The engine wants tiled. Tiled position t holds grouped head
 * (t % Hk) * r + t / Hk; when the file is grouped and Hk != Hv every v-head-indexed axis
 * is permuted by that map (vsrc below). With Hk == Hv the map is the identity.
 */
#include "model/model_int.h"

#include "sys/sys.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(SLOT_COUNT <= 64, "slot masks are uint64_t");

#define MAX_PROBLEM_LINES 20
#define NAME_MAX_LEN 256

/* ---- problem list ------------------------------------------------------------------- */

struct problems {
    char **lines;
    int n, cap;
    bool all_unsupported;   /* every problem is an unsupported dtype */
};

static void problem_add(struct problems *p, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void problem_add(struct problems *p, int code, const char *fmt, ...)
{
    char line[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 16;
        p->lines = hs_realloc(p->lines, sizeof *p->lines * (size_t)p->cap);
    }
    if (p->n == 0) p->all_unsupported = true;
    if (code != HS_ERR_UNSUPPORTED) p->all_unsupported = false;
    p->lines[p->n++] = hs_strdup(line);
}

static void problems_free(struct problems *p)
{
    for (int i = 0; i < p->n; i++) hs_free(p->lines[i]);
    hs_free(p->lines);
    memset(p, 0, sizeof *p);
}

/* One message: a header, as many lines as fit (at most MAX_PROBLEM_LINES), "and N more". */
static int problems_report(const struct problems *p, const char *what, struct hs_err *err)
{
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_printf(&sb, "%s: %d problem%s binding tensors:", what, p->n, p->n == 1 ? "" : "s");
    int shown = 0;
    for (; shown < p->n && shown < MAX_PROBLEM_LINES; shown++) {
        size_t add = strlen(p->lines[shown]) + 3;
        if (sb.len + add + 32 >= HS_ERR_MSG_MAX) break;
        strbuf_printf(&sb, "\n  %s", p->lines[shown]);
    }
    if (shown < p->n) strbuf_printf(&sb, "\n  and %d more", p->n - shown);
    for (int i = 0; i < p->n; i++) log_debug("%s: %s", what, p->lines[i]);
    int rc = hs_err_set(err, p->all_unsupported ? HS_ERR_UNSUPPORTED : HS_ERR_FORMAT, "%s", sb.buf);
    strbuf_free(&sb);
    return rc;
}

/* ---- small helpers ------------------------------------------------------------------ */

static void *owned_alloc(struct model *m, size_t bytes)
{
    void *p = hs_aligned_alloc(64, bytes ? bytes : 1);
    if (m->n_owned == m->cap_owned) {
        m->cap_owned = m->cap_owned ? m->cap_owned * 2 : 64;
        m->owned = hs_realloc(m->owned, sizeof *m->owned * (size_t)m->cap_owned);
    }
    m->owned[m->n_owned++] = p;
    return p;
}

static float q8_0_value(const uint8_t *blocks, uint64_t i)
{
    const uint8_t *b = blocks + (i / 32) * 34;
    return hs_f16_to_f32(hs_rd_u16(b)) * (float)(int8_t)b[2 + i % 32];
}

/* Element i of a tensor of a computable dtype, as f32. */
static float elem_f32(const struct tensor_view *t, uint64_t i)
{
    const uint8_t *d = t->data;
    switch (t->dtype) {
    case DTYPE_F32: { uint32_t u = hs_rd_u32(d + 4 * i); float f; memcpy(&f, &u, 4); return f; }
    case DTYPE_F16: return hs_f16_to_f32(hs_rd_u16(d + 2 * i));
    case DTYPE_BF16: return hs_bf16_to_f32(hs_rd_u16(d + 2 * i));
    case DTYPE_Q8_0: return q8_0_value(d, i);
    default: return 0.0f; /* excluded by the dtype check */
    }
}

static float *to_f32(struct model *m, const struct tensor_view *t)
{
    uint64_t n = tensor_n_elems(t);
    float *out = owned_alloc(m, (size_t)n * sizeof(float));
    for (uint64_t i = 0; i < n; i++) out[i] = elem_f32(t, i);
    return out;
}

static void weight_set(struct model_weight *w, enum dtype dt, int64_t rows, int64_t cols,
                       const void *data)
{
    memset(w, 0, sizeof *w);
    w->dtype = dt;
    w->rows = rows;
    w->cols = cols;
    w->data = data;
    w->n_mat = 1;
    uint64_t rb = 0;
    dtype_row_bytes(dt, (uint64_t)cols, &rb);
    w->row_bytes = rb;
}

static bool ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* ---- binding ------------------------------------------------------------------------ */

struct binder {
    struct model *m;
    bool hf;
    bool permute;               /* file is grouped and Hk != Hv */
    bool hf_tied;               /* HF config says lm_head is the embedding */
    struct problems pr;
    const struct tensor_view **claimed;
    int n_claimed, cap_claimed;
};

enum unit_kind { UNIT_TOP, UNIT_MTP_TOP, UNIT_LAYER };

struct unit {
    enum unit_kind kind;
    bool mtp;                   /* parameters count as MTP */
    void *base;                 /* struct model_top * or struct model_layer * */
    enum layer_kind lkind;
    bool moe;
    bool ple;                   /* the hashed n-gram embedding enters this layer */
    char prefix[96];            /* prepended to this unit's names in the file's format */
    uint64_t bound, tried;      /* slot masks */
};

static uint64_t bit(enum model_slot s) { return s == SLOT_NONE ? 0 : UINT64_C(1) << s; }

static bool spec_applies(const struct tensor_spec *s, const struct unit *u, bool hf)
{
    if (!(hf ? s->hf : s->gguf)) return false;
    switch (u->kind) {
    case UNIT_TOP: return s->scope == SCOPE_TOP;
    case UNIT_MTP_TOP: return s->scope == SCOPE_MTP;
    case UNIT_LAYER: break;
    }
    return arch_scope_in_layer(s->scope, u->lkind, u->moe, u->ple);
}

/* The file name of a spec in a unit; expert index e for per-expert patterns. */
static void spec_name(const struct binder *b, const struct unit *u, const struct tensor_spec *s,
                      int e, char *out, size_t len)
{
    const char *pat = b->hf ? s->hf : s->gguf;
    char tail[128];  /* patterns are short; with the prefix the name fits NAME_MAX_LEN */
    if (s->conv == SPEC_CONV_EXPERT_LIST) snprintf(tail, sizeof tail, pat, e);
    else if (s->conv == SPEC_CONV_SHARDS) snprintf(tail, sizeof tail, pat, (int)b->m->hp.ple_layer, e);
    else snprintf(tail, sizeof tail, "%s", pat);
    const char *prefix = (b->hf && (s->flags & SPEC_ROOT)) ? "" : u->prefix;
    snprintf(out, len, "%s%s", prefix, tail);
}

static void *slot_ptr(const struct unit *u, enum model_slot s)
{
    return (char *)u->base + arch_slot(s)->offset;
}

static struct model_weight *slot_weight(const struct unit *u, enum model_slot s)
{
    return slot_ptr(u, s);
}

static void slot_set_f32(const struct unit *u, enum model_slot s, const float *v)
{
    memcpy(slot_ptr(u, s), &v, sizeof v);
}

static void claim(struct binder *b, const struct unit *u, const struct tensor_view *t)
{
    if (b->n_claimed == b->cap_claimed) {
        b->cap_claimed = b->cap_claimed ? b->cap_claimed * 2 : 256;
        b->claimed = hs_realloc(b->claimed, sizeof *b->claimed * (size_t)b->cap_claimed);
    }
    b->claimed[b->n_claimed++] = t;
    if (u->mtp) b->m->n_params_mtp += tensor_n_elems(t);
    else b->m->n_params += tensor_n_elems(t);
}

/* Grouped source head for tiled position t (identity unless permuting). */
static int64_t vsrc(const struct binder *b, int64_t t)
{
    if (!b->permute) return t;
    const int64_t hk = b->m->hp.gdn_k_heads, r = b->m->hp.gdn_v_heads / hk;
    return (t % hk) * r + t / hk;
}

/* Whether a conversion keeps the tensor as matrix rows for the kernels (any computable
 * dtype) rather than converting it to f32 values here. */
static bool spec_is_matrix(enum spec_conv c)
{
    switch (c) {
    case SPEC_CONV_NORM:
    case SPEC_CONV_VEC:
    case SPEC_CONV_VEC_VHEAD:
    case SPEC_CONV_A:
    case SPEC_CONV_CONV: return false;
    default: return true;
    }
}

static bool check_tensor(struct binder *b, const struct tensor_spec *s, const struct tensor_view *t,
                         const char *name)
{
    const struct model_hparams *hp = &b->m->hp;
    const struct dtype_info *di = dtype_info(t->dtype);
    bool ok = true;
    if (!di || !di->compute) {
        problem_add(&b->pr, HS_ERR_UNSUPPORTED,
                    "tensor '%s': dtype %s is not supported (f32, f16, bf16 and q8_0 are; q4_k, "
                    "q5_k, q6_k, q5_1, iq4_nl and iq4_xs for matrices)", name, di ? di->name : "?");
        ok = false;
    } else if ((t->dtype == DTYPE_Q4_K || t->dtype == DTYPE_Q5_K || t->dtype == DTYPE_Q6_K ||
                t->dtype == DTYPE_Q5_1 || t->dtype == DTYPE_IQ4_NL || t->dtype == DTYPE_IQ4_XS) &&
               !spec_is_matrix(s->conv)) {
        /* K-quants reach only the matmul and row dequantizer; vectors and conv taps are
         * converted element by element to f32, which this file does for float and Q8_0 */
        problem_add(&b->pr, HS_ERR_UNSUPPORTED,
                    "tensor '%s': dtype %s is supported for matrices only (this tensor is converted "
                    "to f32: use f32, f16, bf16 or q8_0)", name, di->name);
        ok = false;
    }
    bool shape_ok = t->n_dims == s->n_dims;
    for (int i = 0; shape_ok && i < s->n_dims; i++)
        shape_ok = t->shape[i] == arch_dim_value(s->shape[i], hp);
    if (!shape_ok) {
        char got[96], want[256];
        tensor_shape_str(t, got, sizeof got);
        size_t off = (size_t)snprintf(want, sizeof want, "[");
        for (int i = 0; i < s->n_dims && off < sizeof want; i++) {
            enum arch_dim d = s->shape[i];
            if (d == DIM_ONE)
                off += (size_t)snprintf(want + off, sizeof want - off, "%s1", i ? ", " : "");
            else
                off += (size_t)snprintf(want + off, sizeof want - off, "%s%s=%" PRId64, i ? ", " : "",
                                        arch_dim_name(d), arch_dim_value(d, hp));
        }
        if (off < sizeof want) snprintf(want + off, sizeof want - off, "]");
        problem_add(&b->pr, HS_ERR_FORMAT, "tensor '%s': shape %s, expected %s", name, got, want);
        ok = false;
    }
    return ok;
}

/* Permute row blocks: dst block t <- src block vsrc(t), blocks of block_rows rows. */
static void permute_rows(const struct binder *b, uint8_t *dst, const uint8_t *src, int64_t n_heads,
                         uint64_t block_bytes)
{
    for (int64_t t = 0; t < n_heads; t++)
        memcpy(dst + (uint64_t)t * block_bytes, src + (uint64_t)vsrc(b, t) * block_bytes, block_bytes);
}

static void bind_expert_stack(struct binder *b, const struct unit *u, enum model_slot slot,
                              const struct tensor_view *t, int64_t rows, uint64_t stride_rows,
                              uint64_t first_row)
{
    struct model_weight *w = slot_weight(u, slot);
    const int64_t n_exp = t->shape[0], cols = t->shape[2];
    weight_set(w, t->dtype, rows, cols, NULL);
    const void **mats = owned_alloc(b->m, sizeof *mats * (size_t)n_exp);
    const uint8_t *base = t->data;
    for (int64_t e = 0; e < n_exp; e++)
        mats[e] = base + ((uint64_t)e * stride_rows + first_row) * w->row_bytes;
    w->n_mat = n_exp;
    w->mats = mats;
    w->data = mats[0];
}

/* Convert a checked tensor into its slot(s). Returns false (with a problem) when the
 * conversion itself cannot be done. */
static bool convert(struct binder *b, const struct unit *u, const struct tensor_spec *s,
                    const struct tensor_view *t, const char *name)
{
    struct model *m = b->m;
    const struct model_hparams *hp = &m->hp;
    const int64_t hk = hp->gdn_k_heads, hv = hp->gdn_v_heads, dk = hp->gdn_k_dim, dv = hp->gdn_v_dim;
    const int64_t r = hk > 0 ? hv / hk : 1;
    const int64_t rows = t->n_dims >= 2 ? t->shape[0] : 1, cols = t->shape[t->n_dims - 1];
    uint64_t rb = 0;
    dtype_row_bytes(t->dtype, (uint64_t)cols, &rb);

    switch (s->conv) {
    case SPEC_CONV_VIEW:
        weight_set(slot_weight(u, s->slot), t->dtype, rows, cols, t->data);
        return true;
    case SPEC_CONV_NORM: {
        float *v = to_f32(m, t);
        if (b->hf && (s->flags & SPEC_ZC))
            for (uint64_t i = 0; i < tensor_n_elems(t); i++) v[i] += 1.0f;
        slot_set_f32(u, s->slot, v);
        return true;
    }
    case SPEC_CONV_VEC:
        slot_set_f32(u, s->slot, to_f32(m, t));
        return true;
    case SPEC_CONV_VEC_VHEAD:
    case SPEC_CONV_A: {
        float *v = to_f32(m, t);
        if (s->conv == SPEC_CONV_A && b->hf)
            for (int64_t i = 0; i < hv; i++) v[i] = -expf(v[i]);
        if (b->permute) {
            float *p = owned_alloc(m, sizeof *p * (size_t)hv);
            permute_rows(b, (uint8_t *)p, (const uint8_t *)v, hv, sizeof *p);
            v = p;
        }
        slot_set_f32(u, s->slot, v);
        return true;
    }
    case SPEC_CONV_CONV: {
        /* [C, 1, K] and [C, K] share one layout; V channels start after q and k. */
        const int64_t k = hp->conv_kernel;
        float *v = to_f32(m, t);
        if (b->permute) {
            const uint64_t qk = (uint64_t)(2 * hk * dk) * (uint64_t)k;
            float *p = owned_alloc(m, sizeof *p * (size_t)tensor_n_elems(t));
            memcpy(p, v, qk * sizeof *p);
            permute_rows(b, (uint8_t *)(p + qk), (const uint8_t *)(v + qk), hv,
                         (uint64_t)(dv * k) * sizeof *p);
            v = p;
        }
        slot_set_f32(u, s->slot, v);
        return true;
    }
    case SPEC_CONV_QKV:
    case SPEC_CONV_VROWS:
    case SPEC_CONV_HROWS: {
        struct model_weight *w = slot_weight(u, s->slot);
        if (!b->permute) { weight_set(w, t->dtype, rows, cols, t->data); return true; }
        const uint64_t head_rows = s->conv == SPEC_CONV_HROWS ? 1 : (uint64_t)dv;
        const uint64_t fixed = s->conv == SPEC_CONV_QKV ? (uint64_t)(2 * hk * dk) * rb : 0;
        uint8_t *p = owned_alloc(m, (size_t)(rb * (uint64_t)rows));
        memcpy(p, t->data, fixed);
        permute_rows(b, p + fixed, (const uint8_t *)t->data + fixed, hv, head_rows * rb);
        weight_set(w, t->dtype, rows, cols, p);
        return true;
    }
    case SPEC_CONV_OUT: {
        struct model_weight *w = slot_weight(u, s->slot);
        if (!b->permute) { weight_set(w, t->dtype, rows, cols, t->data); return true; }
        uint64_t cb;
        if (!dtype_row_bytes(t->dtype, (uint64_t)dv, &cb)) {
            problem_add(&b->pr, HS_ERR_UNSUPPORTED,
                        "tensor '%s': cannot reorder its value-head columns: Dv=%" PRId64
                        " is not a multiple of the %s block (%u)", name, dv,
                        dtype_info(t->dtype)->name, dtype_info(t->dtype)->block_elems);
            return false;
        }
        uint8_t *p = owned_alloc(m, (size_t)(rb * (uint64_t)rows));
        for (int64_t i = 0; i < rows; i++)
            permute_rows(b, p + (uint64_t)i * rb, (const uint8_t *)t->data + (uint64_t)i * rb, hv, cb);
        weight_set(w, t->dtype, rows, cols, p);
        return true;
    }
    case SPEC_CONV_QKVZ: {
        /* Source block per key head g: [q_g Dk | k_g Dk | v r*Dv | z r*Dv] rows. */
        const uint64_t blk = (uint64_t)(2 * dk + 2 * r * dv);
        const uint8_t *src = t->data;
        const int64_t qkv_rows = 2 * hk * dk + hv * dv, z_rows = hv * dv;
        uint8_t *qkv = owned_alloc(m, (size_t)(rb * (uint64_t)qkv_rows));
        uint8_t *z = owned_alloc(m, (size_t)(rb * (uint64_t)z_rows));
        for (int64_t g = 0; g < hk; g++) {
            memcpy(qkv + (uint64_t)(g * dk) * rb, src + (uint64_t)g * blk * rb, (uint64_t)dk * rb);
            memcpy(qkv + (uint64_t)(hk * dk + g * dk) * rb, src + ((uint64_t)g * blk + (uint64_t)dk) * rb,
                   (uint64_t)dk * rb);
        }
        for (int64_t tt = 0; tt < hv; tt++) {
            const int64_t h = b->permute ? vsrc(b, tt) : tt, g = h / r, j = h % r;
            const uint64_t v_src = (uint64_t)g * blk + (uint64_t)(2 * dk + j * dv);
            const uint64_t z_src = (uint64_t)g * blk + (uint64_t)(2 * dk + r * dv + j * dv);
            memcpy(qkv + (uint64_t)(2 * hk * dk + tt * dv) * rb, src + v_src * rb, (uint64_t)dv * rb);
            memcpy(z + (uint64_t)(tt * dv) * rb, src + z_src * rb, (uint64_t)dv * rb);
        }
        weight_set(slot_weight(u, s->slot), t->dtype, qkv_rows, cols, qkv);
        weight_set(slot_weight(u, s->slot2), t->dtype, z_rows, cols, z);
        return true;
    }
    case SPEC_CONV_BA: {
        /* Source block per key head g: [b of its r heads | a of its r heads]. */
        const uint8_t *src = t->data;
        uint8_t *pb = owned_alloc(m, (size_t)(rb * (uint64_t)hv));
        uint8_t *pa = owned_alloc(m, (size_t)(rb * (uint64_t)hv));
        for (int64_t tt = 0; tt < hv; tt++) {
            const int64_t h = b->permute ? vsrc(b, tt) : tt, g = h / r, j = h % r;
            memcpy(pb + (uint64_t)tt * rb, src + (uint64_t)(g * 2 * r + j) * rb, rb);
            memcpy(pa + (uint64_t)tt * rb, src + (uint64_t)(g * 2 * r + r + j) * rb, rb);
        }
        weight_set(slot_weight(u, s->slot), t->dtype, hv, cols, pb);
        weight_set(slot_weight(u, s->slot2), t->dtype, hv, cols, pa);
        return true;
    }
    case SPEC_CONV_EXPERTS:
        bind_expert_stack(b, u, s->slot, t, t->shape[1], (uint64_t)t->shape[1], 0);
        return true;
    case SPEC_CONV_GATE_UP: {
        const int64_t half = t->shape[1] / 2;
        bind_expert_stack(b, u, s->slot, t, half, (uint64_t)t->shape[1], 0);
        bind_expert_stack(b, u, s->slot2, t, half, (uint64_t)t->shape[1], (uint64_t)half);
        return true;
    }
    case SPEC_CONV_SPLIT_ROWS: {
        const int64_t n = hp->idx_heads * hp->idx_dim;
        weight_set(slot_weight(u, s->slot), t->dtype, n, cols, t->data);
        weight_set(slot_weight(u, s->slot2), t->dtype, rows - n, cols, (const uint8_t *)t->data + (uint64_t)n * rb);
        return true;
    }
    case SPEC_CONV_EXPERT_LIST:
    case SPEC_CONV_SHARDS:
        break; /* bound by bind_expert_list / bind_shards */
    }
    return false;
}

/* The n-gram table as one tensor per shard (hp.ple_shards of them, counted at load): every
 * shard checked and named on its own, all of one dtype; zero-copy, one matrix per shard. */
static void bind_shards(struct binder *b, struct unit *u, const struct tensor_spec *s)
{
    const int64_t n = b->m->hp.ple_shards;
    const void **mats = owned_alloc(b->m, sizeof *mats * (size_t)HS_MAX(n, 1));
    char name[NAME_MAX_LEN];
    bool ok = n > 0;
    enum dtype dt = DTYPE_F32;
    for (int64_t i = 0; i < n; i++) {
        spec_name(b, u, s, (int)i, name, sizeof name);
        const struct tensor_view *t = tensor_set_find(b->m->ts, name);
        if (!t) { problem_add(&b->pr, HS_ERR_FORMAT, "missing tensor '%s'", name); ok = false; continue; }
        claim(b, u, t);
        if (!check_tensor(b, s, t, name)) { ok = false; continue; }
        if (i > 0 && t->dtype != dt) {
            problem_add(&b->pr, HS_ERR_FORMAT, "tensor '%s': dtype %s, but shard 0 is %s", name,
                        dtype_info(t->dtype)->name, dtype_info(dt)->name);
            ok = false;
            continue;
        }
        dt = t->dtype;
        mats[i] = t->data;
    }
    u->tried |= bit(s->slot);
    if (!ok) return;
    struct model_weight *w = slot_weight(u, s->slot);
    weight_set(w, dt, b->m->hp.ple_rows / n, b->m->hp.ple_row, mats[0]);
    w->n_mat = n;
    w->mats = mats;
    u->bound |= bit(s->slot);
}

/* One tensor per expert: every expert checked and named on its own. */
static void bind_expert_list(struct binder *b, struct unit *u, const struct tensor_spec *s)
{
    const int64_t n_exp = b->m->hp.n_expert;
    const struct tensor_view **views = hs_calloc((size_t)n_exp, sizeof *views);
    char name[NAME_MAX_LEN];
    bool ok = true;
    for (int64_t e = 0; e < n_exp; e++) {
        spec_name(b, u, s, (int)e, name, sizeof name);
        const struct tensor_view *t = tensor_set_find(b->m->ts, name);
        if (!t) { problem_add(&b->pr, HS_ERR_FORMAT, "missing tensor '%s'", name); ok = false; continue; }
        claim(b, u, t);
        if (!check_tensor(b, s, t, name)) { ok = false; continue; }
        if (views[0] && t->dtype != views[0]->dtype) {
            problem_add(&b->pr, HS_ERR_FORMAT, "tensor '%s': dtype %s, but expert 0 is %s", name,
                        dtype_info(t->dtype)->name, dtype_info(views[0]->dtype)->name);
            ok = false;
            continue;
        }
        views[e] = t;
    }
    u->tried |= bit(s->slot);
    if (ok) {
        struct model_weight *w = slot_weight(u, s->slot);
        weight_set(w, views[0]->dtype, views[0]->shape[0], views[0]->shape[1], NULL);
        const void **mats = owned_alloc(b->m, sizeof *mats * (size_t)n_exp);
        for (int64_t e = 0; e < n_exp; e++) mats[e] = views[e]->data;
        w->n_mat = n_exp;
        w->mats = mats;
        w->data = mats[0];
        u->bound |= bit(s->slot);
    }
    hs_free(views);
}

static void bind_spec(struct binder *b, struct unit *u, const struct tensor_spec *s)
{
    const uint64_t mask = bit(s->slot) | bit(s->slot2);
    if ((u->bound | u->tried) & mask) return;  /* an alternative came first */
    if (b->hf && b->hf_tied && (s->flags & SPEC_TIED)) return; /* HF ties: lm_head is ignored */
    char name[NAME_MAX_LEN];
    spec_name(b, u, s, 0, name, sizeof name);
    const struct tensor_view *t = tensor_set_find(b->m->ts, name);
    if (!t) return;
    if (s->conv == SPEC_CONV_EXPERT_LIST) { bind_expert_list(b, u, s); return; }
    if (s->conv == SPEC_CONV_SHARDS) { bind_shards(b, u, s); return; }
    claim(b, u, t);
    u->tried |= mask;
    if (!check_tensor(b, s, t, name)) return;
    if (convert(b, u, s, t, name)) u->bound |= mask;
}

/* After all specs of a unit: each required slot still empty is reported once, with
 * every spelling that would have filled it. */
static void report_missing(struct binder *b, struct unit *u)
{
    uint64_t reported = 0;
    const struct arch_desc *a = b->m->arch;
    for (int ti = 0; ti < a->n_tables; ti++) {
        for (int si = 0; si < a->tables[ti]->n; si++) {
            const struct tensor_spec *s = &a->tables[ti]->specs[si];
            if (!spec_applies(s, u, b->hf) || (s->flags & SPEC_OPT)) continue;
            enum model_slot slots2[2] = { s->slot, s->slot2 };
            for (int k = 0; k < 2; k++) {
                uint64_t bt = bit(slots2[k]);
                if (!bt || ((u->bound | u->tried | reported) & bt)) continue;
                reported |= bt;
                struct strbuf sb;
                strbuf_init(&sb);
                char name[NAME_MAX_LEN];
                int n_alt = 0;
                for (int tj = 0; tj < a->n_tables; tj++)
                    for (int sj = 0; sj < a->tables[tj]->n; sj++) {
                        const struct tensor_spec *o = &a->tables[tj]->specs[sj];
                        if (!spec_applies(o, u, b->hf) || !((bit(o->slot) | bit(o->slot2)) & bt)) continue;
                        spec_name(b, u, o, 0, name, sizeof name);
                        strbuf_printf(&sb, n_alt++ ? " or '%s'" : "'%s'", name);
                    }
                problem_add(&b->pr, HS_ERR_FORMAT, "missing tensor %s", sb.buf);
                strbuf_free(&sb);
            }
        }
    }
}

static void bind_unit(struct binder *b, struct unit *u)
{
    const struct arch_desc *a = b->m->arch;
    for (int ti = 0; ti < a->n_tables; ti++)
        for (int si = 0; si < a->tables[ti]->n; si++) {
            const struct tensor_spec *s = &a->tables[ti]->specs[si];
            if (spec_applies(s, u, b->hf)) bind_spec(b, u, s);
        }
    report_missing(b, u);
}

/* lm_head absent: the embedding doubles as the head when the format allows it. */
static void bind_tied(struct binder *b, struct unit *top)
{
    struct model *m = b->m;
    if (top->bound & bit(SLOT_OUTPUT)) { m->hp.tied_embeddings = false; return; }
    if (top->tried & bit(SLOT_OUTPUT)) return; /* present but bad: already reported */
    if (b->hf && !b->hf_tied) {
        problem_add(&b->pr, HS_ERR_FORMAT, "missing tensor 'lm_head.weight' (tie_word_embeddings is false)");
        return;
    }
    m->top.output = m->top.token_embd;
    m->hp.tied_embeddings = true;
}

static int cmp_ptr(const void *x, const void *y)
{
    uintptr_t a = (uintptr_t)*(const void *const *)x, c = (uintptr_t)*(const void *const *)y;
    return a < c ? -1 : a > c;
}

static int bind_all(struct model *m, bool hf_tied, struct hs_err *err)
{
    struct binder b = { .m = m, .hf = m->source == MODEL_SOURCE_HF, .hf_tied = hf_tied };
    const struct model_hparams *hp = &m->hp;
    bool grouped = b.hf || !m->arch->gguf_v_tiled;
    b.permute = grouped && hp->gdn_k_heads > 0 && hp->gdn_k_heads != hp->gdn_v_heads;

    struct unit top = { .kind = UNIT_TOP, .base = &m->top };
    snprintf(top.prefix, sizeof top.prefix, "%s", b.hf ? m->hf_prefix : "");
    bind_unit(&b, &top);
    bind_tied(&b, &top);

    m->layers = hs_calloc((size_t)hp->n_layer, sizeof *m->layers);
    for (int il = 0; il < hp->n_layer; il++) {
        struct unit u = { .kind = UNIT_LAYER, .base = &m->layers[il],
                          .lkind = hp->layer_kind[il], .moe = hp->layer_moe[il], .ple = hp->ple_layer == il };
        m->layers[il].kind = u.lkind;
        if (b.hf) snprintf(u.prefix, sizeof u.prefix, "%slayers.%d.", m->hf_prefix, il);
        else snprintf(u.prefix, sizeof u.prefix, "blk.%d.", il);
        bind_unit(&b, &u);
    }
    if (hp->n_mtp > 0) {
        struct unit mt = { .kind = UNIT_MTP_TOP, .mtp = true, .base = &m->top };
        if (!b.hf) snprintf(mt.prefix, sizeof mt.prefix, "blk.%" PRId64 ".", hp->n_layer);
        bind_unit(&b, &mt);
        for (int j = 0; j < hp->n_mtp; j++) {
            struct unit u = { .kind = UNIT_LAYER, .mtp = true, .base = &m->mtp_layers[j],
                              .lkind = LAYER_KIND_ATTN, .moe = m->arch->moe };
            m->mtp_layers[j].kind = LAYER_KIND_ATTN;
            if (b.hf) snprintf(u.prefix, sizeof u.prefix, "mtp.layers.%d.", j);
            else snprintf(u.prefix, sizeof u.prefix, "blk.%" PRId64 ".", hp->n_layer + j);
            bind_unit(&b, &u);
        }
    }

    /* Which file tensors were claimed; the rest are logged and ignored. */
    const int n_t = tensor_set_count(m->ts);
    m->claimed = hs_calloc((size_t)(n_t ? n_t : 1), sizeof *m->claimed);
    qsort(b.claimed, (size_t)b.n_claimed, sizeof *b.claimed, cmp_ptr);
    for (int i = 0; i < n_t; i++) {
        const struct tensor_view *t = tensor_set_at(m->ts, i);
        m->claimed[i] = b.n_claimed && bsearch(&t, b.claimed, (size_t)b.n_claimed, sizeof *b.claimed, cmp_ptr);
        if (m->claimed[i]) continue;
        /* llama.cpp adds any attn_{q,k,v,qkv}.bias it finds and multiplies matmul outputs
         * by any per-tensor .scale / .input_scale; Qwen3.5-family checkpoints have neither
         * and the engine computes neither, so ignoring one would give other logits. */
        if (!b.hf && (ends_with(t->name, ".bias") || ends_with(t->name, ".scale") ||
                      ends_with(t->name, ".input_scale")))
            problem_add(&b.pr, HS_ERR_UNSUPPORTED,
                        "tensor '%s': biases and per-tensor scales are not supported (llama.cpp would "
                        "apply it; Qwen3.5-family models have none)", t->name);
        else
            log_debug("%s: ignoring tensor '%s' (no spec claims it)", m->path, t->name);
    }
    hs_free(b.claimed);

    int rc = HS_OK;
    if (b.pr.n) rc = problems_report(&b.pr, m->path, err);
    problems_free(&b.pr);
    return rc;
}

/* ---- hyperparameters ---------------------------------------------------------------- */

enum hp_field {
    HPF_VOCAB, HPF_EMBD, HPF_LAYER, HPF_FF, HPF_HEAD, HPF_HEAD_KV, HPF_HEAD_DIM, HPF_ROT,
    HPF_EPS, HPF_HK, HPF_HV, HPF_DK, HPF_DV, HPF_CONV, HPF_EXPERT, HPF_EXPERT_USED,
    HPF_FF_EXP, HPF_FF_SHEXP, HPF_INTERVAL, HPF_MTP, HPF_COUNT
};

/* The key that carries each field, per source (GGUF keys get the "<arch>." prefix). */
static const char *const hp_keys[2][HPF_COUNT] = {
    [MODEL_SOURCE_HF] = {
        "vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size",
        "num_attention_heads", "num_key_value_heads", "head_dim", "partial_rotary_factor",
        "rms_norm_eps", "linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
        "linear_value_head_dim", "linear_conv_kernel_dim", "num_experts", "num_experts_per_tok",
        "moe_intermediate_size", "shared_expert_intermediate_size", "full_attention_interval",
        "mtp_num_hidden_layers",
    },
    [MODEL_SOURCE_GGUF] = {
        "vocab (token_embd.weight rows)", "embedding_length", "block_count", "feed_forward_length",
        "attention.head_count", "attention.head_count_kv", "attention.key_length",
        "rope.dimension_count", "attention.layer_norm_rms_epsilon", "ssm.group_count",
        "ssm.time_step_rank", "ssm.state_size", "ssm.inner_size", "ssm.conv_kernel",
        "expert_count", "expert_used_count", "expert_feed_forward_length",
        "expert_shared_feed_forward_length", "full_attention_interval", "nextn_predict_layers",
    },
};

struct hp_ctx {
    const char *file;
    enum model_source src;
    const char *arch;
};

static const char *key_name(const struct hp_ctx *c, enum hp_field f, char *buf, size_t len)
{
    if (c->src == MODEL_SOURCE_GGUF && f != HPF_VOCAB) snprintf(buf, len, "%s.%s", c->arch, hp_keys[c->src][f]);
    else snprintf(buf, len, "%s", hp_keys[c->src][f]);
    return buf;
}

static int check_range(const struct hp_ctx *c, enum hp_field f, int64_t v, int64_t lo, int64_t hi,
                       struct hs_err *err)
{
    if (v >= lo && v <= hi) return HS_OK;
    char k[96];
    return hs_err_set(err, HS_ERR_FORMAT, "%s: %s is %" PRId64 " (must be %" PRId64 "..%" PRId64 ")",
                      c->file, key_name(c, f, k, sizeof k), v, lo, hi);
}

#define DIM_LIMIT (INT64_C(1) << 20)

/* model.h invariant 3 plus the limits that keep shape products from overflowing. */
static int hparams_validate(const struct hp_ctx *c, const struct arch_desc *a, struct model_hparams *hp,
                            struct hs_err *err)
{
    char k1[96], k2[96];
    int rc;
    if ((rc = check_range(c, HPF_LAYER, hp->n_layer, 1, MODEL_MAX_LAYERS, err))) return rc;
    if ((rc = check_range(c, HPF_VOCAB, hp->n_vocab, 1, INT64_C(1) << 24, err))) return rc;
    if ((rc = check_range(c, HPF_EMBD, hp->n_embd, 1, DIM_LIMIT, err))) return rc;
    if ((rc = check_range(c, HPF_HEAD, hp->n_head, 1, 4096, err))) return rc;
    if ((rc = check_range(c, HPF_HEAD_KV, hp->n_head_kv, 1, 4096, err))) return rc;
    if ((rc = check_range(c, HPF_HEAD_DIM, hp->head_dim, 1, 65536, err))) return rc;
    if (hp->n_head % hp->n_head_kv)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: %s (%" PRId64 ") is not a multiple of %s (%" PRId64 ")",
                          c->file, key_name(c, HPF_HEAD, k1, sizeof k1), hp->n_head,
                          key_name(c, HPF_HEAD_KV, k2, sizeof k2), hp->n_head_kv);
    if (hp->n_rot < 0 || hp->n_rot > hp->head_dim || hp->n_rot % 2)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: %s gives %" PRId64 " rotary dimensions (must be even and <= head_dim %" PRId64 ")",
                          c->file, key_name(c, HPF_ROT, k1, sizeof k1), hp->n_rot, hp->head_dim);
    if (!(hp->rms_eps > 0.0f) || !isfinite(hp->rms_eps))
        return hs_err_set(err, HS_ERR_FORMAT, "%s: %s is %g (must be positive)", c->file,
                          key_name(c, HPF_EPS, k1, sizeof k1), (double)hp->rms_eps);
    if (!isfinite(hp->rope_theta) || !(hp->rope_theta > 0.0f))
        return hs_err_set(err, HS_ERR_FORMAT, "%s: rope theta is %g (must be positive)", c->file,
                          (double)hp->rope_theta);
    if ((rc = check_range(c, HPF_INTERVAL, hp->full_attn_interval, 1, MODEL_MAX_LAYERS, err))) return rc;

    bool any_gdn = false, any_dense = false, any_moe = false;
    for (int il = 0; il < hp->n_layer; il++) {
        any_gdn |= hp->layer_kind[il] == LAYER_KIND_GDN;
        any_moe |= hp->layer_moe[il];
        any_dense |= !hp->layer_moe[il];
    }
    if (hp->n_mtp > 0) { any_moe |= a->moe; any_dense |= !a->moe; }
    if (any_gdn) {
        if ((rc = check_range(c, HPF_HK, hp->gdn_k_heads, 1, 4096, err))) return rc;
        if ((rc = check_range(c, HPF_HV, hp->gdn_v_heads, 1, 4096, err))) return rc;
        if ((rc = check_range(c, HPF_DK, hp->gdn_k_dim, 1, 65536, err))) return rc;
        if ((rc = check_range(c, HPF_DV, hp->gdn_v_dim, 1, 65536, err))) return rc;
        if ((rc = check_range(c, HPF_CONV, hp->conv_kernel, 1, 64, err))) return rc;
        if (hp->gdn_v_heads % hp->gdn_k_heads)
            return hs_err_set(err, HS_ERR_FORMAT, "%s: %s (%" PRId64 ") is not a multiple of %s (%" PRId64 ")",
                              c->file, key_name(c, HPF_HV, k1, sizeof k1), hp->gdn_v_heads,
                              key_name(c, HPF_HK, k2, sizeof k2), hp->gdn_k_heads);
    }
    if (a->moe && hp->n_expert <= 0)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: %s is a mixture-of-experts architecture but %s is %" PRId64,
                          c->file, a->name, key_name(c, HPF_EXPERT, k1, sizeof k1), hp->n_expert);
    if (any_dense && (rc = check_range(c, HPF_FF, hp->n_ff, 1, DIM_LIMIT, err))) return rc;
    if (any_moe) {
        if ((rc = check_range(c, HPF_EXPERT, hp->n_expert, 1, 65536, err))) return rc;
        if ((rc = check_range(c, HPF_EXPERT_USED, hp->n_expert_used, 1, hp->n_expert, err))) return rc;
        if ((rc = check_range(c, HPF_FF_EXP, hp->n_ff_exp, 1, DIM_LIMIT, err))) return rc;
        if ((rc = check_range(c, HPF_FF_SHEXP, hp->n_ff_shexp, 1, DIM_LIMIT, err))) return rc;
    }
    if ((rc = check_range(c, HPF_MTP, hp->n_mtp, 0, MODEL_MAX_MTP, err))) return rc;
    return HS_OK;
}

static void layers_from_interval(struct model_hparams *hp)
{
    for (int il = 0; il < hp->n_layer; il++)
        hp->layer_kind[il] = (il + 1) % hp->full_attn_interval == 0 ? LAYER_KIND_ATTN : LAYER_KIND_GDN;
}

/* ---- qwen4exp: hyper-connections, the QSA indexer, the hashed n-gram embedding ------- */

/* The qwen4exp hyperparameters checked together (llama.cpp refuses the same files): at
 * least two streams, a rank, an indexer whose head holds the rotary dims, one PLE layer that
 * is a GDN layer, N in 2..8, moduli and offsets inside the table, and hash multipliers
 * small enough that c * m stays below 2^63 for every token id c (so the 64-bit products
 * are the exact ones the reference computes). */
static int qwen4exp_validate(const char *file, const struct model_hparams *hp, struct hs_err *err)
{
    if (hp->hc_n < 2 || hp->hc_n > 64 || hp->hc_rank < 1 || hp->hc_rank > DIM_LIMIT)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: hyper-connections: %" PRId64 " streams of rank %" PRId64
                          " (must be 2..64 streams, rank >= 1)", file, hp->hc_n, hp->hc_rank);
    if (hp->idx_heads < 1 || hp->idx_heads > 4096 || hp->idx_dim < 1 || hp->idx_dim > 65536 || hp->idx_dim < hp->n_rot)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: QSA indexer: %" PRId64 " heads of %" PRId64
                          " dims (must be >= 1 heads of at least the %" PRId64 " rotary dims)",
                          file, hp->idx_heads, hp->idx_dim, hp->n_rot);
    if (hp->qsa_block < 1 || hp->qsa_block > 4096 || hp->qsa_top_blocks < 1)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: QSA blocks of %" PRId64 " tokens, %" PRId64
                          " kept per query (both must be >= 1)", file, hp->qsa_block, hp->qsa_top_blocks);
    if (hp->ple_layer < 0 || hp->ple_layer >= hp->n_layer || hp->layer_kind[hp->ple_layer] != LAYER_KIND_GDN)
        return hs_err_set(err, HS_ERR_UNSUPPORTED, "%s: the n-gram embedding must enter one Gated DeltaNet layer "
                          "(layer %" PRId64 ")", file, hp->ple_layer);
    if (hp->ple_ngram < 2 || hp->ple_ngram > MODEL_PLE_MAX_NGRAM || hp->ple_heads < 1 ||
        hp->ple_heads > MODEL_PLE_MAX_HEADS || hp->ple_heads % (hp->ple_ngram - 1))
        return hs_err_set(err, HS_ERR_FORMAT, "%s: n-gram embedding: size %" PRId64 ", %" PRId64
                          " heads (size 2..%d, heads a multiple of size - 1, at most %d)", file, hp->ple_ngram,
                          hp->ple_heads, MODEL_PLE_MAX_NGRAM, MODEL_PLE_MAX_HEADS);
    if (hp->ple_row < 1 || hp->ple_row > DIM_LIMIT || hp->ple_kernel < 1 || hp->ple_kernel > 64 ||
        hp->ple_rows < 1 || hp->ple_shards < 1 || hp->ple_rows % hp->ple_shards)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: n-gram table: %" PRId64 " rows of %" PRId64 " in %" PRId64
                          " shards, conv of %" PRId64 " taps", file, hp->ple_rows, hp->ple_row, hp->ple_shards,
                          hp->ple_kernel);
    if (hp->ple_eos < 0 || hp->ple_eos >= hp->n_vocab)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: n-gram reset token %" PRId64 " is outside the vocabulary", file,
                          hp->ple_eos);
    const uint64_t mult_max = (UINT64_C(1) << 63) / (uint64_t)hp->n_vocab;
    for (int64_t j = 0; j < hp->ple_ngram; j++)
        if (hp->ple_mult[j] == 0 || hp->ple_mult[j] >= mult_max)
            return hs_err_set(err, HS_ERR_FORMAT, "%s: n-gram hash multiplier %" PRId64 " is %" PRIu64
                              " (must be 1..%" PRIu64 ")", file, j, hp->ple_mult[j], mult_max - 1);
    for (int64_t h = 0; h < hp->ple_heads; h++)
        if (hp->ple_mod[h] == 0 || hp->ple_off[h] > (uint64_t)hp->ple_rows ||
            hp->ple_mod[h] > (uint64_t)hp->ple_rows - hp->ple_off[h])
            return hs_err_set(err, HS_ERR_FORMAT, "%s: n-gram head %" PRId64 ": rows %" PRIu64 " .. %" PRIu64
                              " + %" PRIu64 " outside the table's %" PRId64, file, h, hp->ple_off[h], hp->ple_off[h],
                              hp->ple_mod[h], hp->ple_rows);
    return HS_OK;
}

/* An I64 buffer of the checkpoint (the PLE constants) into out[n]. */
static int hf_i64_buffer(const struct model *m, const char *file, const char *tail, int64_t n, uint64_t *out,
                         struct hs_err *err)
{
    char name[NAME_MAX_LEN];
    snprintf(name, sizeof name, "%slayers.%" PRId64 ".ple.ple_embedding.%s", m->hf_prefix, m->hp.ple_layer, tail);
    const struct tensor_view *t = tensor_set_find(m->ts, name);
    if (!t) return hs_err_set(err, HS_ERR_FORMAT, "%s: missing tensor '%s'", file, name);
    if (t->dtype != DTYPE_I64 || t->n_dims != 1 || t->shape[0] != n)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%s' must be I64 [%" PRId64 "]", file, name, n);
    for (int64_t i = 0; i < n; i++) memcpy(&out[i], (const uint8_t *)t->data + 8 * i, 8);
    return HS_OK;
}

/* After the checkpoint is open (the constants and the table's shards are tensors). */
static int qwen4exp_from_hf(struct model *m, const struct hf_config *c, const char *file, struct hs_err *err)
{
    struct model_hparams *hp = &m->hp;
    hp->hc_n = c->hc_count;
    hp->hc_rank = c->hc_lowrank;
    hp->idx_heads = c->indexer_n_heads;
    hp->idx_dim = c->indexer_head_dim;
    hp->qsa_block = c->indexer_compress_ratio;
    hp->qsa_top_blocks = c->indexer_compress_ratio > 0 ? c->indexer_budget / c->indexer_compress_ratio : 0;
    if (c->indexer_kv_heads > 1)
        return hs_err_set(err, HS_ERR_UNSUPPORTED, "%s: indexer_kv_heads %" PRId64 " (one indexer key head is supported)",
                          file, c->indexer_kv_heads);
    hp->ple_layer = c->ple_layer;
    hp->ple_ngram = c->ngram_size;
    hp->ple_heads = c->ngram_size > 1 ? (c->ngram_size - 1) * c->heads_per_ngram : 0;
    hp->ple_row = hp->ple_heads > 0 && c->ple_embed_dim % hp->ple_heads == 0 ? c->ple_embed_dim / hp->ple_heads : 0;
    hp->ple_kernel = c->ple_conv_kernel_size;
    hp->ple_eos = c->n_eos_token_ids > 0 ? c->eos_token_ids[0] : -1;
    hp->n_mtp = 0; /* mtp.* is not bound (arch_qwen4exp.c) */
    if (hp->ple_layer < 0 || hp->ple_ngram < 2 || hp->ple_ngram > MODEL_PLE_MAX_NGRAM || hp->ple_heads < 1 ||
        hp->ple_heads > MODEL_PLE_MAX_HEADS)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: ple_layer_ids, ngram_size (2..%d) and heads_per_ngram must "
                          "describe one n-gram embedding of at most %d heads", file, MODEL_PLE_MAX_NGRAM,
                          MODEL_PLE_MAX_HEADS);
    int rc = hf_i64_buffer(m, file, "layer_multipliers", hp->ple_ngram, hp->ple_mult, err);
    if (!rc) rc = hf_i64_buffer(m, file, "ngram_heads_offsets", hp->ple_heads, hp->ple_off, err);
    if (!rc) rc = hf_i64_buffer(m, file, "ngram_heads_vocab_sizes", hp->ple_heads, hp->ple_mod, err);
    if (rc) return rc;
    /* the table: shards 0, 1, ... of equal rows */
    char name[NAME_MAX_LEN];
    hp->ple_shards = 0;
    hp->ple_rows = 0;
    for (;;) {
        snprintf(name, sizeof name, "%slayers.%" PRId64 ".ple.ple_embedding.ngram_embedding.shard_%" PRId64 ".weight",
                 m->hf_prefix, hp->ple_layer, hp->ple_shards);
        const struct tensor_view *t = tensor_set_find(m->ts, name);
        if (!t) break;
        if (t->n_dims != 2)
            return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%s' is not 2-D", file, name);
        hp->ple_rows += t->shape[0];
        hp->ple_shards++;
    }
    if (hp->ple_shards == 0)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: missing tensor '%s' (the n-gram table)", file, name);
    return qwen4exp_validate(file, hp, err);
}

static int hparams_from_hf(struct model *m, const struct hf_config *c, const char *file, struct hs_err *err)
{
    struct model_hparams *hp = &m->hp;
    const struct arch_desc *a = m->arch;
    if (c->attention_bias)
        return hs_err_set(err, HS_ERR_UNSUPPORTED, "%s: attention_bias true is not supported", file);
    if (!c->attn_output_gate)
        return hs_err_set(err, HS_ERR_UNSUPPORTED, "%s: attn_output_gate false is not supported", file);
    if (c->mamba_ssm_dtype[0] && strcmp(c->mamba_ssm_dtype, "float32") != 0)
        return hs_err_set(err, HS_ERR_UNSUPPORTED, "%s: mamba_ssm_dtype '%s' is not supported (float32 is)",
                          file, c->mamba_ssm_dtype);
    if (!c->output_gate_type[0] || !strcmp(c->output_gate_type, "silu") || !strcmp(c->output_gate_type, "swish"))
        hp->gdn_gate = GDN_GATE_SILU;
    else if (!strcmp(c->output_gate_type, "sigmoid"))
        hp->gdn_gate = GDN_GATE_SIGMOID;
    else
        return hs_err_set(err, HS_ERR_UNSUPPORTED, "%s: output_gate_type '%s' is not supported (silu, sigmoid)",
                          file, c->output_gate_type);
    hp->arch = a->arch;
    hp->ple_layer = -1;
    hp->n_vocab = c->vocab_size;
    hp->n_embd = c->hidden_size;
    hp->n_layer = c->num_hidden_layers;
    hp->n_ff = c->intermediate_size;
    hp->n_head = c->num_attention_heads;
    hp->n_head_kv = c->num_key_value_heads;
    hp->head_dim = c->head_dim;
    /* config.c leaves absent keys 0: the architecture's defaults fill them */
    const struct model_arch_defaults *df = &a->defaults;
    const double prf = c->partial_rotary_factor > 0 ? c->partial_rotary_factor : df->partial_rotary_factor;
    if (!(prf >= 0.0 && prf <= 1.0))
        return hs_err_set(err, HS_ERR_FORMAT, "%s: partial_rotary_factor %g is outside [0, 1]", file, prf);
    hp->n_rot = (int64_t)((double)c->head_dim * prf);
    hp->rope_theta = (float)(c->rope_theta > 0 ? c->rope_theta : df->rope_theta);
    hp->rms_eps = (float)(c->rms_norm_eps > 0 ? c->rms_norm_eps : df->rms_eps);
    hp->n_ctx_train = c->max_position_embeddings > 0 ? c->max_position_embeddings : df->n_ctx_train;
    hp->full_attn_interval = c->full_attention_interval > 0 ? c->full_attention_interval : df->full_attn_interval;
    hp->gdn_k_heads = c->linear_num_key_heads;
    hp->gdn_v_heads = c->linear_num_value_heads;
    hp->gdn_k_dim = c->linear_key_head_dim;
    hp->gdn_v_dim = c->linear_value_head_dim;
    hp->conv_kernel = c->linear_conv_kernel_dim > 0 ? c->linear_conv_kernel_dim : df->conv_kernel;
    if (a->moe) {
        hp->n_expert = c->num_experts;
        hp->n_expert_used = c->num_experts_per_tok;
        hp->n_ff_exp = c->moe_intermediate_size;
        hp->n_ff_shexp = c->shared_expert_intermediate_size;
        hp->norm_topk_prob = a->norm_topk_always ? true : c->norm_topk_prob;
    }
    if (hp->n_layer < 1 || hp->n_layer > MODEL_MAX_LAYERS || hp->n_layer > HF_CONFIG_MAX_LAYERS)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: num_hidden_layers is %" PRId64 " (must be 1..%d)", file,
                          hp->n_layer, MODEL_MAX_LAYERS);
    if (hp->full_attn_interval < 1)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: full_attention_interval is %" PRId64 " (must be >= 1)",
                          file, hp->full_attn_interval);
    if (c->has_layer_types)
        for (int il = 0; il < hp->n_layer; il++)
            hp->layer_kind[il] = c->layer_is_full[il] ? LAYER_KIND_ATTN : LAYER_KIND_GDN;
    else
        layers_from_interval(hp);
    const int64_t step = c->decoder_sparse_step > 0 ? c->decoder_sparse_step : 1;
    for (int il = 0; il < hp->n_layer; il++)
        hp->layer_moe[il] = hp->n_expert > 0 && !c->mlp_only_layer[il] && (il + 1) % step == 0;
    return HS_OK;
}

/* A GGUF integer key "<arch>.<key>"; absent -> def when !required. */
static int gg_int(const struct gguf_file *g, const struct hp_ctx *c, const char *key, bool required,
                  int64_t def, int64_t *out, struct hs_err *err)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", c->arch, key);
    if (!gguf_find(g, full)) {
        if (required) return hs_err_set(err, HS_ERR_FORMAT, "%s: missing key '%s'", c->file, full);
        *out = def;
        return HS_OK;
    }
    return gguf_get_i64(g, full, out, err);  /* its messages name the file and key */
}

static int gg_f32(const struct gguf_file *g, const struct hp_ctx *c, const char *key, bool required,
                  float def, float *out, struct hs_err *err)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", c->arch, key);
    if (!gguf_find(g, full)) {
        if (required) return hs_err_set(err, HS_ERR_FORMAT, "%s: missing key '%s'", c->file, full);
        *out = def;
        return HS_OK;
    }
    return gguf_get_f32(g, full, out, err);
}

/* Which layers a per-layer key is read at. */
enum layer_pick { PICK_ALL, PICK_ATTN };

/* A per-layer GGUF integer key "<arch>.<key>", as llama.cpp reads it (get_key_or_arr): a
 * scalar for every layer, or an array of any integer type with one entry per block (main
 * layers, then MTP layers). The engine has one value per model, so the entries of the
 * layers `pick` selects (MTP layers count as attention) must agree; entries of other
 * layers are ignored (hybrid writers put 0 heads at recurrent layers). With no such layer,
 * the largest entry. Layer kinds must be known. */
static int gg_layer_int(const struct gguf_file *g, const struct hp_ctx *c, const struct model_hparams *hp,
                        const char *key, bool required, int64_t def, enum layer_pick pick, int64_t *out,
                        struct hs_err *err)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", c->arch, key);
    if (!gguf_find(g, full)) {
        if (required) return hs_err_set(err, HS_ERR_FORMAT, "%s: missing key '%s'", c->file, full);
        *out = def;
        return HS_OK;
    }
    int64_t v;
    uint64_t n;
    int rc = gguf_get_i64_at(g, full, 0, &v, &n, err);
    if (rc || n == 0) { *out = v; return rc; }
    if (n < (uint64_t)hp->n_layer)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: %s has %" PRIu64 " entries for %" PRId64 " layers", c->file,
                          full, n, hp->n_layer);
    int64_t found = -1, found_at = -1, max = INT64_MIN;
    for (uint64_t i = 0; i < n; i++) {
        if ((rc = gguf_get_i64_at(g, full, i, &v, &n, err))) return rc;
        max = HS_MAX(max, v);
        bool attn = i >= (uint64_t)hp->n_layer || hp->layer_kind[i] == LAYER_KIND_ATTN;
        if (pick == PICK_ATTN && !attn) continue;
        if (found_at < 0) { found = v; found_at = (int64_t)i; continue; }
        if (v != found)
            return hs_err_set(err, HS_ERR_UNSUPPORTED,
                              "%s: %s differs between layers (%" PRId64 " at block %" PRId64 ", %" PRId64
                              " at block %" PRIu64 "); one value per model is supported",
                              c->file, full, found, found_at, v, i);
    }
    *out = found_at >= 0 ? found : max;
    return HS_OK;
}

/* A u64 array "<arch>.<key>" of at least n entries into out. */
static int gg_u64_array(const struct gguf_file *g, const struct hp_ctx *c, const char *key, int64_t n,
                        uint64_t *out, struct hs_err *err)
{
    char full[128];
    snprintf(full, sizeof full, "%s.%s", c->arch, key);
    if (!gguf_find(g, full)) return hs_err_set(err, HS_ERR_FORMAT, "%s: missing key '%s'", c->file, full);
    for (int64_t i = 0; i < n; i++) {
        int64_t v;
        uint64_t len;
        int rc = gguf_get_i64_at(g, full, (uint64_t)i, &v, &len, err);
        if (rc) return rc;
        if (len < (uint64_t)n)
            return hs_err_set(err, HS_ERR_FORMAT, "%s: %s has %" PRIu64 " entries (%" PRId64 " needed)", c->file, full,
                              len, n);
        out[i] = (uint64_t)v;
    }
    return HS_OK;
}

static int qwen4exp_from_gguf(struct model *m, const struct hp_ctx *c, struct hs_err *err)
{
    const struct gguf_file *g = m->gguf;
    struct model_hparams *hp = &m->hp;
    int64_t top_k = 0, per_head = 0, ple_layer = -1;
    int rc;
    if ((rc = gg_int(g, c, "hyper_connection.count", true, 0, &hp->hc_n, err))) return rc;
    if ((rc = gg_int(g, c, "hyper_connection.low_rank", true, 0, &hp->hc_rank, err))) return rc;
    if ((rc = gg_int(g, c, "attention.indexer.head_count", true, 0, &hp->idx_heads, err))) return rc;
    if ((rc = gg_int(g, c, "attention.indexer.key_length", true, 0, &hp->idx_dim, err))) return rc;
    if ((rc = gg_int(g, c, "attention.indexer.top_k", true, 0, &top_k, err))) return rc;
    if ((rc = gg_layer_int(g, c, hp, "attention.compress_ratios", true, 0, PICK_ATTN, &hp->qsa_block, err))) return rc;
    hp->qsa_top_blocks = hp->qsa_block > 0 ? top_k / hp->qsa_block : 0;
    char key[128];
    snprintf(key, sizeof key, "%s.ple.layers", c->arch);
    uint64_t n = 0;
    if (!gguf_find(g, key)) return hs_err_set(err, HS_ERR_FORMAT, "%s: missing key '%s'", c->file, key);
    if ((rc = gguf_get_i64_at(g, key, 0, &ple_layer, &n, err))) return rc;
    if (n != 1)
        return hs_err_set(err, HS_ERR_UNSUPPORTED, "%s: %s lists %" PRIu64 " layers (one is supported)", c->file, key, n);
    hp->ple_layer = ple_layer;
    if ((rc = gg_int(g, c, "ple.ngram_size", true, 0, &hp->ple_ngram, err))) return rc;
    if ((rc = gg_int(g, c, "ple.heads_per_ngram", true, 0, &per_head, err))) return rc;
    if ((rc = gg_int(g, c, "ple.conv_kernel", true, 0, &hp->ple_kernel, err))) return rc;
    if ((rc = gg_int(g, c, "embedding_length_per_layer_input", true, 0, &hp->ple_row, err))) return rc;
    if ((rc = gg_int(g, c, "ple.eos_token_id", true, 0, &hp->ple_eos, err))) return rc;
    if (hp->ple_ngram < 2 || hp->ple_ngram > MODEL_PLE_MAX_NGRAM || per_head < 1 ||
        (hp->ple_ngram - 1) * per_head > MODEL_PLE_MAX_HEADS)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: %s.ple.ngram_size %" PRId64 " (2..%d) and heads_per_ngram %" PRId64
                          " give more than %d heads", c->file, c->arch, hp->ple_ngram, MODEL_PLE_MAX_NGRAM, per_head,
                          MODEL_PLE_MAX_HEADS);
    hp->ple_heads = (hp->ple_ngram - 1) * per_head;
    if ((rc = gg_u64_array(g, c, "ple.layer_multipliers", hp->ple_ngram, hp->ple_mult, err))) return rc;
    if ((rc = gg_u64_array(g, c, "ple.head_offsets", hp->ple_heads, hp->ple_off, err))) return rc;
    if ((rc = gg_u64_array(g, c, "ple.head_vocab_sizes", hp->ple_heads, hp->ple_mod, err))) return rc;
    const struct tensor_view *t = tensor_set_find(m->ts, "per_layer_token_embd.weight");
    hp->ple_rows = t && t->n_dims == 2 ? t->shape[0] : 0;
    hp->ple_shards = 1;
    hp->gdn_gate = GDN_GATE_SIGMOID; /* llama.cpp's qwen4exp graph: a sigmoid output gate */
    return HS_OK;
}

static int hparams_from_gguf(struct model *m, const struct hp_ctx *c, struct hs_err *err)
{
    const struct gguf_file *g = m->gguf;
    const struct arch_desc *a = m->arch;
    struct model_hparams *hp = &m->hp;
    int64_t block_count = 0, n_mtp = 0, inner = 0, val_len = 0;
    int rc;
    hp->arch = a->arch;
    hp->ple_layer = -1;
    if ((rc = gg_int(g, c, "block_count", true, 0, &block_count, err))) return rc;
    if ((rc = gg_int(g, c, "nextn_predict_layers", false, 0, &n_mtp, err))) return rc;
    if (n_mtp < 0 || n_mtp >= block_count)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: %s.nextn_predict_layers %" PRId64 " leaves no main layers of %s.block_count %" PRId64,
                          c->file, c->arch, n_mtp, c->arch, block_count);
    hp->n_layer = block_count - n_mtp;
    hp->n_mtp = n_mtp;
    if (hp->n_layer > MODEL_MAX_LAYERS)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: %s.block_count is %" PRId64 " (at most %d main layers)", c->file,
                          c->arch, block_count, MODEL_MAX_LAYERS);
    if ((rc = gg_int(g, c, "full_attention_interval", false, a->defaults.full_attn_interval,
                     &hp->full_attn_interval, err)))
        return rc;
    if (hp->full_attn_interval < 1)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: %s.full_attention_interval is %" PRId64 " (must be >= 1)",
                          c->file, c->arch, hp->full_attn_interval);

    /* Layer kinds: the explicit per-layer flags when the file has them (llama.cpp's
     * converter writes bools, its llama_model_save_to_file uint32s, and a scalar when every
     * layer is alike); non-zero = recurrent (GDN), 0 = attention. Else the interval. */
    char key[128];
    snprintf(key, sizeof key, "%s.attention.recurrent_layers", c->arch);
    if (gguf_find(g, key)) {
        for (int il = 0; il < hp->n_layer; il++) {
            int64_t flag;
            uint64_t n = 0;
            if ((rc = gguf_get_i64_at(g, key, (uint64_t)il, &flag, &n, err))) {
                if (n > 0 && n < (uint64_t)hp->n_layer) {
                    hs_err_clear(err);
                    return hs_err_set(err, HS_ERR_FORMAT, "%s: %s has %" PRIu64 " entries for %" PRId64 " layers",
                                      c->file, key, n, hp->n_layer);
                }
                return rc;
            }
            hp->layer_kind[il] = flag ? LAYER_KIND_GDN : LAYER_KIND_ATTN;
        }
    } else {
        layers_from_interval(hp);
    }
    for (int il = 0; il < hp->n_layer; il++) hp->layer_moe[il] = a->moe;

    if ((rc = gg_int(g, c, "context_length", true, 0, &hp->n_ctx_train, err))) return rc;
    if ((rc = gg_int(g, c, "embedding_length", true, 0, &hp->n_embd, err))) return rc;
    if ((rc = gg_layer_int(g, c, hp, "feed_forward_length", !a->moe, 0, PICK_ALL, &hp->n_ff, err))) return rc;
    if ((rc = gg_layer_int(g, c, hp, "attention.head_count", true, 0, PICK_ATTN, &hp->n_head, err))) return rc;
    if ((rc = gg_layer_int(g, c, hp, "attention.head_count_kv", true, 0, PICK_ATTN, &hp->n_head_kv, err))) return rc;
    int64_t def_hd = hp->n_head > 0 ? hp->n_embd / hp->n_head : 0;
    if ((rc = gg_int(g, c, "attention.key_length", false, def_hd, &hp->head_dim, err))) return rc;
    if ((rc = gg_int(g, c, "attention.value_length", false, hp->head_dim, &val_len, err))) return rc;
    if (val_len != hp->head_dim)
        return hs_err_set(err, HS_ERR_UNSUPPORTED, "%s: %s.attention.value_length %" PRId64 " differs from key_length %" PRId64,
                          c->file, c->arch, val_len, hp->head_dim);
    if ((rc = gg_int(g, c, "rope.dimension_count", false, hp->head_dim, &hp->n_rot, err))) return rc;
    if ((rc = gg_f32(g, c, "rope.freq_base", false, 10000.0f, &hp->rope_theta, err))) return rc;
    if ((rc = gg_f32(g, c, "attention.layer_norm_rms_epsilon", true, 0, &hp->rms_eps, err))) return rc;
    if ((rc = gg_int(g, c, "ssm.conv_kernel", true, 0, &hp->conv_kernel, err))) return rc;
    if ((rc = gg_int(g, c, "ssm.state_size", true, 0, &hp->gdn_k_dim, err))) return rc;
    if ((rc = gg_int(g, c, "ssm.group_count", true, 0, &hp->gdn_k_heads, err))) return rc;
    if ((rc = gg_int(g, c, "ssm.time_step_rank", true, 0, &hp->gdn_v_heads, err))) return rc;
    if ((rc = gg_int(g, c, "ssm.inner_size", true, 0, &inner, err))) return rc;
    if (hp->gdn_v_heads <= 0 || inner <= 0 || inner % hp->gdn_v_heads)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: %s.ssm.inner_size %" PRId64 " is not a positive multiple of %s.ssm.time_step_rank %" PRId64,
                          c->file, c->arch, inner, c->arch, hp->gdn_v_heads);
    hp->gdn_v_dim = inner / hp->gdn_v_heads;
    hp->gdn_gate = GDN_GATE_SILU;
    if (a->moe) {
        if ((rc = gg_int(g, c, "expert_count", true, 0, &hp->n_expert, err))) return rc;
        if ((rc = gg_layer_int(g, c, hp, "expert_used_count", true, 0, PICK_ALL, &hp->n_expert_used, err))) return rc;
        if ((rc = gg_layer_int(g, c, hp, "expert_feed_forward_length", true, 0, PICK_ALL, &hp->n_ff_exp, err)))
            return rc;
        if ((rc = gg_int(g, c, "expert_shared_feed_forward_length", true, 0, &hp->n_ff_shexp, err))) return rc;
        /* Both llama.cpp graphs (qwen35moe, qwen3next) renormalise the top-k weights
         * unconditionally and neither loader reads <arch>.expert_weights_norm, which
         * llama_model_save_to_file writes as false: in a GGUF it means nothing. */
        hp->norm_topk_prob = true;
    }
    for (int il = 0; il < hp->n_layer; il++) hp->layer_moe[il] = a->moe && hp->n_expert > 0;

    /* The vocabulary is the embedding's row count (padded past the token list). */
    const struct tensor_view *e = tensor_set_find(m->ts, "token_embd.weight");
    if (e && e->n_dims == 2) hp->n_vocab = e->shape[0];
    if (a->flash_next) {
        if ((rc = qwen4exp_from_gguf(m, c, err))) return rc;
        return qwen4exp_validate(c->file, hp, err);
    }
    return HS_OK;
}

/* ---- HF specifics ------------------------------------------------------------------- */

static const char *const hf_prefixes[] = { "model.language_model.", "model.", "language_model.model." };

static int hf_pick_prefix(struct model *m, struct hs_err *err)
{
    char name[NAME_MAX_LEN];
    for (size_t i = 0; i < HS_ARRAY_LEN(hf_prefixes); i++) {
        snprintf(name, sizeof name, "%sembed_tokens.weight", hf_prefixes[i]);
        if (tensor_set_find(m->ts, name)) { m->hf_prefix = hf_prefixes[i]; return HS_OK; }
    }
    const struct tensor_view *first = tensor_set_at(m->ts, 0);
    return hs_err_set(err, HS_ERR_FORMAT,
                      "%s: no token embedding: none of 'model.language_model.embed_tokens.weight', "
                      "'model.embed_tokens.weight', 'language_model.model.embed_tokens.weight' exists "
                      "(first tensor: '%s')", m->path, first ? first->name : "none");
}

/* MTP blocks present in the checkpoint: the config's count, or the highest
 * "mtp.layers.<j>." seen (Qwen3-Next configs do not state it). 0 when no mtp.* tensor. */
static int64_t hf_count_mtp(const struct model *m, const struct hf_config *c)
{
    bool any = false;
    int64_t found = 0;
    for (int i = 0; i < tensor_set_count(m->ts); i++) {
        const char *nm = tensor_set_at(m->ts, i)->name;
        if (strncmp(nm, "mtp.", 4) != 0) continue;
        any = true;
        if (strncmp(nm, "mtp.layers.", 11) == 0) {
            char *end;
            long j = strtol(nm + 11, &end, 10);
            if (end != nm + 11 && *end == '.' && j >= 0 && j < 1000 && j + 1 > found) found = j + 1;
        }
    }
    if (!any) return 0;
    int64_t n = HS_MAX(c->mtp_num_hidden_layers, found);
    return n > 0 ? n : 1;
}

static int load_hf(struct model *m, bool *tied, struct hs_err *err)
{
    char *cfg_path = sys_path_join(m->dir, "config.json");
    struct hf_config *cfg = hs_calloc(1, sizeof *cfg);
    int rc = hf_config_load(cfg_path, cfg, err);
    if (rc) goto out;
    m->arch = arch_from_hf(cfg->architecture, cfg->model_type, cfg->root_model_type);
    if (!m->arch) {
        rc = hs_err_set(err, HS_ERR_UNSUPPORTED,
                        "%s: architecture '%s' (model_type '%s') is not supported "
                        "(Qwen3.5 qwen3_5, Qwen3.5-MoE qwen3_5_moe, Qwen3-Next qwen3_next, Qwen3.8-Flash-Next qwen4_exp)",
                        cfg_path, cfg->architecture, cfg->model_type[0] ? cfg->model_type : cfg->root_model_type);
        goto out;
    }
    if ((rc = hparams_from_hf(m, cfg, cfg_path, err))) goto out;
    if ((rc = safetensors_open(m->dir, &m->st, err))) goto out;
    m->ts = m->st;
    if ((rc = hf_pick_prefix(m, err))) goto out;
    m->hp.n_mtp = hf_count_mtp(m, cfg);
    if (m->arch->flash_next && (rc = qwen4exp_from_hf(m, cfg, cfg_path, err))) goto out;
    *tied = cfg->tie_word_embeddings;
    struct hp_ctx hc = { cfg_path, MODEL_SOURCE_HF, m->arch->name };
    rc = hparams_validate(&hc, m->arch, &m->hp, err);
out:
    hs_free(cfg);
    hs_free(cfg_path);
    return rc;
}

static int load_gguf(struct model *m, struct hs_err *err)
{
    int rc = gguf_open(m->path, &m->gguf, err);
    if (rc) return rc;
    m->ts = gguf_tensors(m->gguf);
    char *arch = NULL;
    if ((rc = gguf_get_str(m->gguf, "general.architecture", &arch, err))) {
        if (rc == HS_ERR_NOT_FOUND) {
            hs_err_clear(err);
            return hs_err_set(err, HS_ERR_FORMAT, "%s: missing key 'general.architecture'", m->path);
        }
        return rc;
    }
    m->arch = arch_by_name(arch);
    if (!m->arch) {
        rc = hs_err_set(err, HS_ERR_UNSUPPORTED,
                        "%s: general.architecture '%s' is not supported (qwen35, qwen35moe, qwen3next, qwen4exp)",
                        m->path, arch);
        hs_free(arch);
        return rc;
    }
    hs_free(arch);
    struct hp_ctx hc = { m->path, MODEL_SOURCE_GGUF, m->arch->name };
    if ((rc = hparams_from_gguf(m, &hc, err))) return rc;
    return hparams_validate(&hc, m->arch, &m->hp, err);
}

/* ---- public API --------------------------------------------------------------------- */

int model_load(const char *path, struct model **out, struct hs_err *err)
{
    *out = NULL;
    if (!path || !*path) return hs_err_set(err, HS_ERR_INVALID, "no model path given");
    struct model *m = hs_calloc(1, sizeof *m);
    m->path = hs_strdup(path);
    int rc;
    bool hf_tied = false;
    if (sys_path_is_dir(path)) {
        m->source = MODEL_SOURCE_HF;
        m->dir = hs_strdup(path);
    } else if (!sys_path_exists(path)) {
        rc = hs_err_set(err, HS_ERR_NOT_FOUND, "%s: no such file or directory", path);
        goto fail;
    } else if (ends_with(path, ".safetensors") || ends_with(path, ".json")) {
        /* A file inside an HF directory stands for the directory. */
        m->source = MODEL_SOURCE_HF;
        const char *slash = strrchr(path, '/');
        m->dir = slash ? hs_strndup(path, (size_t)(slash - path)) : hs_strdup(".");
    } else {
        m->source = MODEL_SOURCE_GGUF;
    }
    rc = m->source == MODEL_SOURCE_HF ? load_hf(m, &hf_tied, err) : load_gguf(m, err);
    if (rc) goto fail;
    if ((rc = bind_all(m, hf_tied, err))) goto fail;
    *out = m;
    return HS_OK;
fail:
    model_free(m);
    return rc;
}

void model_free(struct model *m)
{
    if (!m) return;
    for (int i = 0; i < m->n_owned; i++) hs_free(m->owned[i]);
    hs_free(m->owned);
    hs_free(m->layers);
    hs_free(m->claimed);
    tensor_set_free(m->st);
    gguf_close(m->gguf);
    hs_free(m->dir);
    hs_free(m->path);
    hs_free(m);
}

const struct model_hparams *model_hparams(const struct model *m) { return &m->hp; }

const struct model_layer *model_layer(const struct model *m, int il)
{
    return (il >= 0 && il < m->hp.n_layer) ? &m->layers[il] : NULL;
}

const struct model_weight *model_token_embd(const struct model *m) { return &m->top.token_embd; }
const struct model_weight *model_lm_head(const struct model *m) { return &m->top.output; }
const float *model_output_norm(const struct model *m) { return m->top.output_norm; }
const struct model_hc *model_head_mixer(const struct model *m) { return m->hp.hc_n > 0 ? &m->top.hc_head : NULL; }
const struct model_weight *model_ple_table(const struct model *m)
{
    return m->hp.ple_layer >= 0 ? &m->top.ple_table : NULL;
}
enum model_source model_source(const struct model *m) { return m->source; }
const char *model_path(const struct model *m) { return m->path; }
const struct tensor_set *model_tensors(const struct model *m) { return m->ts; }
uint64_t model_n_params(const struct model *m) { return m->n_params; }
uint64_t model_n_params_mtp(const struct model *m) { return m->n_params_mtp; }
const char *model_dir(const struct model *m) { return m->dir; }
const struct gguf_file *model_gguf(const struct model *m) { return m->gguf; }

uint64_t model_file_bytes(const struct model *m)
{
    uint64_t n = 0;
    for (int i = 0; i < tensor_set_n_files(m->ts); i++) n += tensor_set_file_size(m->ts, i);
    return n;
}

const struct model_top *model_top_weights(const struct model *m) { return &m->top; }

const struct model_layer *model_mtp_layer(const struct model *m, int j)
{
    return (j >= 0 && j < m->hp.n_mtp) ? &m->mtp_layers[j] : NULL;
}

bool model_tensor_claimed(const struct model *m, int i)
{
    return i >= 0 && i < tensor_set_count(m->ts) && m->claimed[i];
}
