/* tensors.c — the tensors `headstart mkmodel` writes, in HF layout or in llama.cpp's GGUF
 * spelling, as a plan (plan.c).
 *
 * Design note
 * -----------
 * mkmodel keeps no tensor list of its own: model_arch_hf_walk lists the architecture's HF
 * tensors from model/'s spec tables, in state_dict order, each with its shape under the
 * geometry and the GGUF tensor(s) it becomes. mk_put adds each to the plan of the output
 * format: as itself for HF; for GGUF as the walk's GGUF tensor(s), produced by the inverse of
 * the loader's conversion of that tensor (mk_convs: the value distribution, the route of its
 * rows, the transform and the value-head tiling; mkmodel.c's design note lists llama.cpp's
 * conventions), in the dtype the Q4_K_M / Q5_K_M mix gives it (mkmodel.c's note, item 3).
 *
 * Invariants:
 *   1. Names, shapes and order come from the spec tables alone: an architecture whose
 *      conversions are all in mk_convs needs nothing here. The files' bytes are pinned by
 *      tests/golden/mkmodel_bytes.sh.
 *   2. A weight is stored in --dtype when GGUF keeps it a matrix too (the shared-expert gate,
 *      [1, H] in HF and [H] in GGUF, stays f32 in both); every other tensor is f32.
 *   3. Every GGUF output is written whole: routes cover each of its rows once.
 *   4. qwen4exp's two tensors that are not one-to-one: the indexer's fused q|k projection is
 *      routed row by row into indexer.q_proj and k_proj (MK_ROUTE_SPLIT); the n-gram table,
 *      one walk entry for all its shards, is one source per shard (its own name, so its own
 *      stream), each stacked into its slice of per_layer_token_embd (mk_put_table), with the
 *      hash constants as I64 outputs in HF only. The n-gram conv (a per-channel vector
 *      conversion in the spec tables) is drawn as conv taps.
 */
#include "mkmodel/mkmodel_int.h"
#include "kernels/kernels.h"
#include "base/base.h"

#include <stdio.h>
#include <string.h>

/* Value-head tiling a conversion needs in tiled GGUFs (qwen35/qwen35moe with Hk != Hv). */
enum mk_tile { MK_TILE_NONE, MK_TILE_ROWS_AFTER_QK, MK_TILE_ROWS_DV, MK_TILE_ROWS_1,
               MK_TILE_COLS_DV, MK_TILE_COLS_1 };

/* For each of the loader's conversions, how mkmodel draws the HF tensor and makes the GGUF
 * one from it. The norm row is the zero-centred form (drawn around 0, +1 in GGUF); a norm
 * that is not zero-centred is drawn near 1 and written as it is. */
static const struct mk_conv_rule {
    enum mk_init init;
    enum mk_route route;
    enum mk_xform xform;
    enum mk_tile tile;
} mk_convs[] = {
    [SPEC_CONV_VIEW] = { MK_INIT_MATRIX, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE },
    [SPEC_CONV_NORM] = { MK_INIT_NORM_ZC, MK_ROUTE_SAME, MK_XFORM_PLUS_ONE, MK_TILE_NONE },
    [SPEC_CONV_VEC] = { MK_INIT_NORM_ONE, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE },
    [SPEC_CONV_VEC_VHEAD] = { MK_INIT_DT_BIAS, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_COLS_1 },
    [SPEC_CONV_A] = { MK_INIT_A_LOG, MK_ROUTE_SAME, MK_XFORM_NEG_EXP, MK_TILE_COLS_1 },
    [SPEC_CONV_CONV] = { MK_INIT_CONV, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_ROWS_AFTER_QK },
    [SPEC_CONV_QKV] = { MK_INIT_MATRIX, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_ROWS_AFTER_QK },
    [SPEC_CONV_VROWS] = { MK_INIT_MATRIX, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_ROWS_DV },
    [SPEC_CONV_HROWS] = { MK_INIT_MATRIX, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_ROWS_1 },
    [SPEC_CONV_OUT] = { MK_INIT_MATRIX, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_COLS_DV },
    [SPEC_CONV_QKVZ] = { MK_INIT_MATRIX, MK_ROUTE_QKVZ, MK_XFORM_NONE, MK_TILE_NONE },
    [SPEC_CONV_BA] = { MK_INIT_MATRIX, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE },
    [SPEC_CONV_EXPERTS] = { MK_INIT_MATRIX, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE },
    [SPEC_CONV_GATE_UP] = { MK_INIT_MATRIX, MK_ROUTE_GATE_UP, MK_XFORM_NONE, MK_TILE_NONE },
    [SPEC_CONV_EXPERT_LIST] = { MK_INIT_MATRIX, MK_ROUTE_STACK, MK_XFORM_NONE, MK_TILE_NONE },
    [SPEC_CONV_SPLIT_ROWS] = { MK_INIT_MATRIX, MK_ROUTE_SPLIT, MK_XFORM_NONE, MK_TILE_NONE },
    [SPEC_CONV_SHARDS] = { MK_INIT_MATRIX, MK_ROUTE_STACK, MK_XFORM_NONE, MK_TILE_NONE },
};

/* Building the plan: the walk calls mk_put once per HF tensor. */
struct mk_builder {
    const struct model_arch_info *arch;
    const struct mk_geom *g;
    enum dtype dtype;
    bool ud_mix; /* --dtype ud_q4_k_xl */
    bool gguf;
    struct mk_plan plan;
    int stack_il, n_stacks; /* the stacked GGUF outputs of layer stack_il's experts */
    const char *stack_hf[4];
    int stack_out[4];
    struct hs_err *err;
};

/* The GGUF name of part `part` of the walk's tensor t. */
static int mk_gguf_name(const struct mk_builder *b, const struct model_arch_tensor *t, int part, char *buf,
                        struct hs_err *err)
{
    const char *gg = t->gguf[part];
    if (!gg)
        return hs_err_set(err, HS_ERR_UNSUPPORTED, "mkmodel: %s has no GGUF name for '%s' (part %d)",
                          b->arch->name, t->hf, part);
    if (t->il >= 0) snprintf(buf, MK_NAME_MAX, "blk.%d.%s", t->il, gg);
    else snprintf(buf, MK_NAME_MAX, "%s", gg);
    return HS_OK;
}

/* llama.cpp's use_more_bits(i_layer, n_layers) of its Q4_K_M rule (llama-quant.cpp). */
static bool mk_more_bits(int64_t il, int64_t n)
{
    return il < n / 8 || il >= 7 * n / 8 || (il - n / 8) % 3 == 2;
}

/* The Q4_K_M (base Q4_K) or Q5_K_M (base Q5_K) type of GGUF tensor `name` of layer il (-1:
 * none) with rows of row_len values (design note, item 3). */
static enum dtype mk_kquant_type(const struct mk_geom *g, enum dtype base, const char *name, int64_t il,
                                 int64_t row_len)
{
    enum dtype t = base;
    if (!strcmp(name, "output.weight") || (g->tied && !strcmp(name, "token_embd.weight")))
        t = DTYPE_Q6_K;
    else if (strstr(name, "ffn_gate_inp.weight"))
        return DTYPE_F32;
    else if ((strstr(name, "attn_v.weight") || strstr(name, "attn_qkv.weight") || strstr(name, "ffn_down")) &&
             il >= 0 && mk_more_bits(il, g->n_layer))
        t = DTYPE_Q6_K;
    return row_len % KERN_QK ? DTYPE_Q8_0 : t;
}

/* The type of GGUF tensor `name` with rows of row_len values in a --dtype q5_1 / iq4_nl /
 * iq4_xs file (base; design note, item 3): the router f32, the output projection (and a tied
 * embedding) Q8_0, IQ4_XS rows that are not whole super-blocks IQ4_NL, the rest base. */
static enum dtype mk_xtype_type(const struct mk_geom *g, enum dtype base, const char *name, int64_t row_len)
{
    if (strstr(name, "ffn_gate_inp.weight")) return DTYPE_F32;
    if (!strcmp(name, "output.weight") || (g->tied && !strcmp(name, "token_embd.weight"))) return DTYPE_Q8_0;
    if (base == DTYPE_IQ4_XS && row_len % KERN_QK) return DTYPE_IQ4_NL;
    return base;
}

/* The type of GGUF tensor `name` (rows of row_len values) in a --dtype ud_q4_k_xl file
 * (mkmodel.c note 3): routed experts' gate / up Q4_K (Q8_0 where a row is not whole
 * super-blocks) and down Q5_1, the router f32, the rest Q8_0; the large table read a few rows
 * per token IQ4_NL (qwen4exp: the n-gram table, as real files have it, and its indexer BF16;
 * the other architectures: an untied token_embd, standing in for such a table). */
static enum dtype mk_ud_type(const struct mk_geom *g, const char *name, int64_t row_len)
{
    if (strstr(name, "ffn_gate_inp.weight")) return DTYPE_F32;
    if (strstr(name, "ffn_gate_exps") || strstr(name, "ffn_up_exps") || strstr(name, "ffn_gate_up_exps"))
        return row_len % KERN_QK ? DTYPE_Q8_0 : DTYPE_Q4_K;
    if (strstr(name, "ffn_down_exps")) return DTYPE_Q5_1;
    if (g->flash_next) {
        if (!strcmp(name, "per_layer_token_embd.weight")) return DTYPE_IQ4_NL;
        if (strstr(name, ".indexer.")) return DTYPE_BF16;
    } else if (!g->tied && !strcmp(name, "token_embd.weight")) {
        return DTYPE_IQ4_NL;
    }
    return DTYPE_Q8_0;
}

/* The stacked GGUF output of per-expert tensor t: made at expert 0, found at the others. */
static int mk_stack_out(struct mk_builder *b, const struct model_arch_tensor *t, const char *name,
                        enum dtype dt, struct hs_err *err)
{
    if (t->il != b->stack_il) {
        b->stack_il = t->il;
        b->n_stacks = 0;
    }
    for (int k = 0; k < b->n_stacks; k++)
        if (!strcmp(b->stack_hf[k], t->hf)) return b->stack_out[k];
    if (t->expert != 0 || b->n_stacks == (int)HS_ARRAY_LEN(b->stack_out))
        return hs_err_set(err, HS_ERR_INVALID, "mkmodel: per-expert tensor '%s' out of order", t->hf);
    int o = mk_out_add(&b->plan, name, dt, t->gguf_n_dims[0], t->gguf_shape[0], err);
    if (o < 0) return o;
    b->stack_hf[b->n_stacks] = t->hf;
    b->stack_out[b->n_stacks++] = o;
    return o;
}

/* The type a quantized GGUF matrix `name` of layer il with rows of row_len values gets in
 * this file (design note, invariant 2; mkmodel.c note 3). */
static enum dtype mk_gguf_type(const struct mk_builder *b, const char *name, int64_t il, int64_t row_len)
{
    if (b->ud_mix) return mk_ud_type(b->g, name, row_len);
    if (b->dtype == DTYPE_Q4_K || b->dtype == DTYPE_Q5_K) return mk_kquant_type(b->g, b->dtype, name, il, row_len);
    if (b->dtype == DTYPE_Q5_1 || b->dtype == DTYPE_IQ4_NL || b->dtype == DTYPE_IQ4_XS)
        return mk_xtype_type(b->g, b->dtype, name, row_len);
    return b->dtype;
}

/* The n-gram table (qwen4exp): HF keeps it as ple_shards tensors inside the PLE layer, rows
 * concatenated in shard order, GGUF as one per_layer_token_embd; each shard is a source
 * stacked into its slice of the GGUF table. The hash constants follow it in HF (I64
 * buffers; GGUF keeps them as metadata, mkmodel.c). */
static int mk_put_table(struct mk_builder *b, const struct model_arch_tensor *t)
{
    struct hs_err *err = b->err;
    const struct mk_geom *g = b->g;
    struct mk_plan *p = &b->plan;
    struct mk_src src;
    memset(&src, 0, sizeof(src));
    src.n_dims = t->n_dims;
    memcpy(src.shape, t->shape, (size_t)t->n_dims * sizeof(*t->shape));
    src.init = MK_INIT_MATRIX;
    src.quant = true;
    const int64_t row_len = t->shape[t->n_dims - 1];
    int table = -1;
    if (b->gguf) {
        char name[MK_NAME_MAX];
        int rc = mk_gguf_name(b, t, 0, name, err);
        if (rc) return rc;
        table = mk_out_add(p, name, mk_gguf_type(b, name, -1, row_len), t->gguf_n_dims[0], t->gguf_shape[0], err);
        if (table < 0) return table;
    }
    for (int64_t s = 0; s < g->ple_shards; s++) {
        char rel[MK_NAME_MAX];
        snprintf(rel, sizeof(rel), t->hf, (int)g->ple_layer, (int)s);
        int n = snprintf(src.name, sizeof(src.name), "%s%s", b->arch->hf_prefix, rel);
        if (n < 0 || (size_t)n >= sizeof(src.name))
            return hs_err_set(err, HS_ERR_LIMIT, "mkmodel: tensor name '%s...' is too long", src.name);
        int dst = table;
        if (!b->gguf && (dst = mk_out_add(p, src.name, b->dtype, t->n_dims, t->shape, err)) < 0) return dst;
        mk_job_add(p, &src, b->gguf ? MK_ROUTE_STACK : MK_ROUTE_SAME, MK_XFORM_NONE, dst, -1, b->gguf ? s : 0, 0);
    }
    if (b->gguf) return HS_OK;
    static const struct { const char *tail; int which; } bufs[] = {
        { "layer_multipliers", 0 }, { "ngram_heads_offsets", 1 }, { "ngram_heads_vocab_sizes", 2 },
    };
    for (size_t k = 0; k < HS_ARRAY_LEN(bufs); k++) {
        char name[MK_NAME_MAX];
        snprintf(name, sizeof(name), "%slayers.%d.ple.ple_embedding.%s", b->arch->hf_prefix, (int)g->ple_layer,
                 bufs[k].tail);
        const uint64_t *v = bufs[k].which == 0 ? g->ple_mult : bufs[k].which == 1 ? g->ple_off : g->ple_mod;
        int o = mk_out_add_fixed(p, name, DTYPE_I64, bufs[k].which == 0 ? g->ple_ngram : g->ple_heads, v, err);
        if (o < 0) return o;
    }
    return HS_OK;
}

static int mk_put(const struct model_arch_tensor *t, void *ctx)
{
    struct mk_builder *b = ctx;
    struct hs_err *err = b->err;
    const struct mk_conv_rule *cr = &mk_convs[t->conv];
    struct mk_src src;
    memset(&src, 0, sizeof(src));
    if (t->conv == SPEC_CONV_SHARDS) return mk_put_table(b, t);
    char rel[MK_NAME_MAX];
    snprintf(rel, sizeof(rel), t->hf, t->expert); /* "%d" in expert names only */
    int n = t->hf_root ? snprintf(src.name, sizeof(src.name), "%s", rel)
            : t->il < 0 ? snprintf(src.name, sizeof(src.name), "%s%s", b->arch->hf_prefix, rel)
                        : snprintf(src.name, sizeof(src.name), "%slayers.%d.%s", b->arch->hf_prefix,
                                   t->il, rel);
    if (n < 0 || (size_t)n >= sizeof(src.name))
        return hs_err_set(err, HS_ERR_LIMIT, "mkmodel: tensor name '%s...' is too long", src.name);
    const int n_dims = t->n_dims;
    const int64_t *shape = t->shape;
    const bool quant = t->weight && t->gguf_n_dims[0] >= 2; /* invariant 2 */
    src.n_dims = n_dims;
    memcpy(src.shape, shape, (size_t)n_dims * sizeof(*shape));
    const bool plain_norm = t->conv == SPEC_CONV_NORM && !t->zero_centred;
    /* conv taps stored as they are (the n-gram embedding's depthwise conv, HF [C, 1, K]) */
    const bool taps = t->conv == SPEC_CONV_VEC && n_dims == 3;
    src.init = plain_norm ? MK_INIT_NORM_ONE : taps ? MK_INIT_CONV : cr->init;
    src.quant = quant;
    enum dtype dt = quant ? b->dtype : DTYPE_F32;
    struct mk_plan *p = &b->plan;

    if (!b->gguf) {
        int o = mk_out_add(p, src.name, dt, n_dims, shape, err);
        if (o < 0) return o;
        mk_job_add(p, &src, MK_ROUTE_SAME, MK_XFORM_NONE, o, -1, 0, 0);
        return HS_OK;
    }

    const struct mk_geom *g = b->g;
    char name[MK_NAME_MAX], name2[MK_NAME_MAX];
    int rc = mk_gguf_name(b, t, 0, name, err);
    if (rc) return rc;
    const bool split = t->gguf[1] != NULL;
    enum dtype dt2 = dt;
    if (split && (rc = mk_gguf_name(b, t, 1, name2, err))) return rc;
    if (quant) {
        dt = mk_gguf_type(b, name, t->il, shape[n_dims - 1]);
        if (split) dt2 = mk_gguf_type(b, name2, t->il, shape[n_dims - 1]);
    }
    int dst, dst2 = -1;
    int64_t p0 = 0, p1 = 0;
    enum mk_route route = cr->route;
    if (route == MK_ROUTE_STACK) {
        dst = mk_stack_out(b, t, name, dt, err);
        p0 = t->expert;
    } else {
        dst = mk_out_add(p, name, dt, t->gguf_n_dims[0], t->gguf_shape[0], err);
        if (dst >= 0 && split) dst2 = mk_out_add(p, name2, dt2, t->gguf_n_dims[1], t->gguf_shape[1], err);
        if (route == MK_ROUTE_GATE_UP) p0 = t->gguf_shape[0][1]; /* I of [E, I, H] */
        if (route == MK_ROUTE_SPLIT) p0 = t->gguf_shape[0][0];   /* rows of the first part */
    }
    if (dst < 0) return dst;
    if (dst2 < 0 && split) return dst2;
    if (b->arch->gguf_v_tiled && g->hk != g->hv && cr->tile != MK_TILE_NONE) {
        switch (cr->tile) {
        case MK_TILE_ROWS_AFTER_QK: route = MK_ROUTE_TILE_ROWS; p0 = 2 * g->hk * g->dk; p1 = g->dv; break;
        case MK_TILE_ROWS_DV: route = MK_ROUTE_TILE_ROWS; p0 = 0; p1 = g->dv; break;
        case MK_TILE_ROWS_1: route = MK_ROUTE_TILE_ROWS; p0 = 0; p1 = 1; break;
        case MK_TILE_COLS_DV: route = MK_ROUTE_TILE_COLS; p1 = g->dv; break;
        case MK_TILE_COLS_1: route = MK_ROUTE_TILE_COLS; p1 = 1; break;
        case MK_TILE_NONE: break;
        }
    }
    mk_job_add(p, &src, route, plain_norm ? MK_XFORM_NONE : cr->xform, dst, dst2, p0, p1);
    return HS_OK;
}

/* The walk's hyperparameters from mkmodel's geometry: every layer full attention or GDN by
 * the interval, every FFN routed experts when the architecture has them. */
static void mk_hparams(const struct model_arch_info *a, const struct mk_geom *g, struct model_hparams *hp)
{
    memset(hp, 0, sizeof(*hp));
    hp->arch = a->arch;
    hp->n_vocab = g->n_vocab;
    hp->n_embd = g->n_embd;
    hp->n_layer = g->n_layer;
    hp->n_ff = g->n_ff;
    hp->n_head = g->n_head;
    hp->n_head_kv = g->n_head_kv;
    hp->head_dim = g->head_dim;
    hp->gdn_k_heads = g->hk;
    hp->gdn_v_heads = g->hv;
    hp->gdn_k_dim = g->dk;
    hp->gdn_v_dim = g->dv;
    hp->conv_kernel = g->conv_k;
    hp->n_expert = g->n_expert;
    hp->n_ff_exp = g->n_ff_exp;
    hp->n_ff_shexp = g->n_ff_shexp;
    hp->tied_embeddings = g->tied;
    hp->ple_layer = -1;
    if (g->flash_next) {
        hp->hc_n = g->hc_n;
        hp->hc_rank = g->hc_rank;
        hp->idx_heads = g->idx_heads;
        hp->idx_dim = g->idx_dim;
        hp->ple_layer = g->ple_layer;
        hp->ple_heads = g->ple_heads;
        hp->ple_row = g->ple_row;
        hp->ple_kernel = g->ple_kernel;
        hp->ple_rows = g->ple_rows;
        hp->ple_shards = g->ple_shards;
    }
    for (int64_t il = 0; il < g->n_layer; il++) {
        hp->layer_kind[il] = mk_layer_is_full(g, il) ? LAYER_KIND_ATTN : LAYER_KIND_GDN;
        hp->layer_moe[il] = a->moe;
    }
}

int mk_tensors_plan(struct mk_plan *plan, const struct model_arch_info *a, const struct mk_geom *g,
                    enum dtype dt, bool ud_mix, bool gguf, struct hs_err *err)
{
    struct mk_builder b;
    memset(&b, 0, sizeof(b));
    b.arch = a;
    b.g = g;
    b.dtype = dt;
    b.ud_mix = ud_mix;
    b.gguf = gguf;
    b.stack_il = -1;
    b.err = err;
    struct model_hparams hp;
    mk_hparams(a, g, &hp);
    int rc = model_arch_hf_walk(a->arch, &hp, mk_put, &b);
    *plan = b.plan; /* the caller frees it, also on error */
    return rc;
}
