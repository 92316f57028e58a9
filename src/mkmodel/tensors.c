/* tensors.c — the tensors `headstart mkmodel` writes, in HF layout or in llama.cpp's GGUF
 * spelling, as a plan (plan.c).
 *
 * Design note
 * -----------
 * mk_walk lists the family's tensors by role, in HF file order, choosing by the
 * architecture's layout facts (model_arch_info: fused GDN, experts fused or one per expert,
 * tied head); mk_put adds each to the plan of the output format: as itself for HF; for GGUF
 * under the name model/'s spec tables give it (model_arch_gguf_name), with its role's shape
 * rule, route, transform and value-head tiling (mkmodel.c's design note lists llama.cpp's
 * conventions), in the dtype the Q4_K_M / Q5_K_M mix gives it (mkmodel.c's note, item 3).
 *
 * Invariants:
 *   1. Every HF name a role has is one the architecture's spec tables know, else the GGUF
 *      plan fails naming it; the HF list and shapes are what model/ loads (tests load every
 *      architecture written both ways).
 *   2. Every GGUF output is written whole: routes cover each of its rows once.
 */
#include "mkmodel/mkmodel_int.h"
#include "kernels/kernels.h"
#include "base/base.h"

#include <stdio.h>
#include <string.h>

/* ---- GGUF conventions, per HF tensor role ------------------------------------------- */

enum mk_role {
    MK_ROLE_EMBD, MK_ROLE_OUT_NORM, MK_ROLE_OUTPUT,
    MK_ROLE_ATTN_NORM, MK_ROLE_POST_NORM,
    MK_ROLE_Q, MK_ROLE_K, MK_ROLE_V, MK_ROLE_O, MK_ROLE_Q_NORM, MK_ROLE_K_NORM,
    MK_ROLE_QKV, MK_ROLE_Z, MK_ROLE_B, MK_ROLE_A, MK_ROLE_QKVZ, MK_ROLE_BA,
    MK_ROLE_CONV, MK_ROLE_DT, MK_ROLE_A_LOG, MK_ROLE_SSM_NORM, MK_ROLE_SSM_OUT,
    MK_ROLE_FFN_GATE, MK_ROLE_FFN_UP, MK_ROLE_FFN_DOWN,
    MK_ROLE_ROUTER, MK_ROLE_EXP_GATE_UP, MK_ROLE_EXP_DOWN_3D,
    MK_ROLE_EXP_GATE, MK_ROLE_EXP_UP, MK_ROLE_EXP_DOWN,
    MK_ROLE_SH_GATE, MK_ROLE_SH_UP, MK_ROLE_SH_DOWN, MK_ROLE_SH_GATE_INP,
    MK_ROLE_COUNT
};

/* Value-head tiling a role needs in tiled GGUFs (qwen35/qwen35moe with Hk != Hv). */
enum mk_tile { MK_TILE_NONE, MK_TILE_ROWS_AFTER_QK, MK_TILE_ROWS_DV, MK_TILE_ROWS_1,
               MK_TILE_COLS_DV, MK_TILE_COLS_1 };

enum mk_shape_rule { MK_SHAPE_SAME, MK_SHAPE_SQUEEZE_MID, MK_SHAPE_FLAT, MK_SHAPE_SPLIT,
                     MK_SHAPE_STACK };

/* Where a role's tensor sits: under the text-model prefix, at the checkpoint root (lm_head),
 * or in a layer (prefix + "layers.<il>."; GGUF "blk.<il>."). */
enum mk_where { MK_AT_TOP, MK_AT_ROOT, MK_AT_LAYER };

/* A role's GGUF name is the one model/'s spec tables give its HF tensor (for the two halves
 * of a split, model_arch_gguf_name's part 0 and 1), under "blk.<il>." for layer tensors. */
static const struct mk_role_info {
    const char *hf;    /* its HF name within the text model or a layer ("%d": the expert) */
    enum mk_where where;
    enum mk_route route;
    enum mk_xform xform;
    enum mk_tile tile;
    enum mk_shape_rule shape;
} mk_roles[MK_ROLE_COUNT] = {
    [MK_ROLE_EMBD] = { "embed_tokens.weight", MK_AT_TOP, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_OUT_NORM] = { "norm.weight", MK_AT_TOP, MK_ROUTE_SAME, MK_XFORM_PLUS_ONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_OUTPUT] = { "lm_head.weight", MK_AT_ROOT, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_ATTN_NORM] = { "input_layernorm.weight", MK_AT_LAYER, MK_ROUTE_SAME, MK_XFORM_PLUS_ONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_POST_NORM] = { "post_attention_layernorm.weight", MK_AT_LAYER, MK_ROUTE_SAME, MK_XFORM_PLUS_ONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_Q] = { "self_attn.q_proj.weight", MK_AT_LAYER, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_K] = { "self_attn.k_proj.weight", MK_AT_LAYER, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_V] = { "self_attn.v_proj.weight", MK_AT_LAYER, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_O] = { "self_attn.o_proj.weight", MK_AT_LAYER, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_Q_NORM] = { "self_attn.q_norm.weight", MK_AT_LAYER, MK_ROUTE_SAME, MK_XFORM_PLUS_ONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_K_NORM] = { "self_attn.k_norm.weight", MK_AT_LAYER, MK_ROUTE_SAME, MK_XFORM_PLUS_ONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_QKV] = { "linear_attn.in_proj_qkv.weight", MK_AT_LAYER, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_ROWS_AFTER_QK, MK_SHAPE_SAME },
    [MK_ROLE_Z] = { "linear_attn.in_proj_z.weight", MK_AT_LAYER, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_ROWS_DV, MK_SHAPE_SAME },
    [MK_ROLE_B] = { "linear_attn.in_proj_b.weight", MK_AT_LAYER, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_ROWS_1, MK_SHAPE_SAME },
    [MK_ROLE_A] = { "linear_attn.in_proj_a.weight", MK_AT_LAYER, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_ROWS_1, MK_SHAPE_SAME },
    [MK_ROLE_QKVZ] = { "linear_attn.in_proj_qkvz.weight", MK_AT_LAYER, MK_ROUTE_QKVZ, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SPLIT },
    [MK_ROLE_BA] = { "linear_attn.in_proj_ba.weight", MK_AT_LAYER, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_CONV] = { "linear_attn.conv1d.weight", MK_AT_LAYER, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_ROWS_AFTER_QK, MK_SHAPE_SQUEEZE_MID },
    [MK_ROLE_DT] = { "linear_attn.dt_bias", MK_AT_LAYER, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_COLS_1, MK_SHAPE_SAME },
    [MK_ROLE_A_LOG] = { "linear_attn.A_log", MK_AT_LAYER, MK_ROUTE_SAME, MK_XFORM_NEG_EXP, MK_TILE_COLS_1, MK_SHAPE_SAME },
    [MK_ROLE_SSM_NORM] = { "linear_attn.norm.weight", MK_AT_LAYER, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_SSM_OUT] = { "linear_attn.out_proj.weight", MK_AT_LAYER, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_COLS_DV, MK_SHAPE_SAME },
    [MK_ROLE_FFN_GATE] = { "mlp.gate_proj.weight", MK_AT_LAYER, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_FFN_UP] = { "mlp.up_proj.weight", MK_AT_LAYER, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_FFN_DOWN] = { "mlp.down_proj.weight", MK_AT_LAYER, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_ROUTER] = { "mlp.gate.weight", MK_AT_LAYER, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_EXP_GATE_UP] = { "mlp.experts.gate_up_proj", MK_AT_LAYER, MK_ROUTE_GATE_UP, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SPLIT },
    [MK_ROLE_EXP_DOWN_3D] = { "mlp.experts.down_proj", MK_AT_LAYER, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_EXP_GATE] = { "mlp.experts.%d.gate_proj.weight", MK_AT_LAYER, MK_ROUTE_STACK, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_STACK },
    [MK_ROLE_EXP_UP] = { "mlp.experts.%d.up_proj.weight", MK_AT_LAYER, MK_ROUTE_STACK, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_STACK },
    [MK_ROLE_EXP_DOWN] = { "mlp.experts.%d.down_proj.weight", MK_AT_LAYER, MK_ROUTE_STACK, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_STACK },
    [MK_ROLE_SH_GATE] = { "mlp.shared_expert.gate_proj.weight", MK_AT_LAYER, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_SH_UP] = { "mlp.shared_expert.up_proj.weight", MK_AT_LAYER, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_SH_DOWN] = { "mlp.shared_expert.down_proj.weight", MK_AT_LAYER, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_SH_GATE_INP] = { "mlp.shared_expert_gate.weight", MK_AT_LAYER, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_FLAT },
};

/* Building the plan: walk the HF tensors once; `put` adds each to the plan of the format. */
struct mk_builder {
    const struct model_arch_info *arch;
    const struct mk_geom *g;
    enum dtype dtype;
    bool gguf;
    struct mk_plan plan;
    int stack_out[MK_ROLE_COUNT]; /* stacked expert outputs of the current layer */
};

/* The GGUF name of part `part` of role ri's tensor in layer il. */
static int mk_gguf_name(const struct mk_builder *b, const struct mk_role_info *ri, int part, int il,
                        char *buf, struct hs_err *err)
{
    const char *gg = model_arch_gguf_name(b->arch->arch, ri->hf, part);
    if (!gg)
        return hs_err_set(err, HS_ERR_UNSUPPORTED, "mkmodel: %s has no GGUF name for '%s' (part %d)",
                          b->arch->name, ri->hf, part);
    if (ri->where == MK_AT_LAYER) snprintf(buf, MK_NAME_MAX, "blk.%d.%s", il, gg);
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

static int mk_put(struct mk_builder *b, enum mk_role role, int il, int e, enum mk_init init,
                  bool quant, int n_dims, const int64_t *shape, struct hs_err *err)
{
    const struct mk_role_info *ri = &mk_roles[role];
    struct mk_src src;
    memset(&src, 0, sizeof(src));
    char rel[MK_NAME_MAX];
    snprintf(rel, sizeof(rel), ri->hf, e); /* "%d" in expert names only */
    int n = ri->where == MK_AT_ROOT  ? snprintf(src.name, sizeof(src.name), "%s", rel)
            : ri->where == MK_AT_TOP ? snprintf(src.name, sizeof(src.name), "%s%s", b->arch->hf_prefix, rel)
                                     : snprintf(src.name, sizeof(src.name), "%slayers.%d.%s", b->arch->hf_prefix,
                                                il, rel);
    if (n < 0 || (size_t)n >= sizeof(src.name))
        return hs_err_set(err, HS_ERR_LIMIT, "mkmodel: tensor name '%s...' is too long", src.name);
    src.n_dims = n_dims;
    memcpy(src.shape, shape, (size_t)n_dims * sizeof(*shape));
    src.init = init;
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
    int rc = mk_gguf_name(b, ri, 0, il, name, err);
    if (rc) return rc;
    const bool split = ri->shape == MK_SHAPE_SPLIT;
    enum dtype dt2 = dt;
    if (quant && (b->dtype == DTYPE_Q4_K || b->dtype == DTYPE_Q5_K)) {
        dt = mk_kquant_type(g, b->dtype, name, il, shape[n_dims - 1]);
        if (split) {
            if ((rc = mk_gguf_name(b, ri, 1, il, name2, err))) return rc;
            dt2 = mk_kquant_type(g, b->dtype, name2, il, shape[n_dims - 1]);
        }
    }
    int64_t gs[TENSOR_MAX_DIMS] = { 0 };
    int gn = n_dims;
    memcpy(gs, shape, (size_t)n_dims * sizeof(*shape));
    int dst = -1, dst2 = -1;
    int64_t p0 = 0, p1 = 0;
    enum mk_route route = ri->route;

    switch (ri->shape) {
    case MK_SHAPE_SAME:
        break;
    case MK_SHAPE_SQUEEZE_MID: /* conv1d [C, 1, K] -> [C, K] */
        gn = 2;
        gs[0] = shape[0];
        gs[1] = shape[2];
        break;
    case MK_SHAPE_FLAT: /* shared_expert_gate [1, H] -> [H] */
        gn = 1;
        gs[0] = shape[n_dims - 1];
        break;
    case MK_SHAPE_SPLIT:
        if ((rc = mk_gguf_name(b, ri, 1, il, name2, err))) return rc;
        if (route == MK_ROUTE_QKVZ) {
            int64_t s1[2] = { 2 * g->hk * g->dk + g->hv * g->dv, g->n_embd };
            int64_t s2[2] = { g->hv * g->dv, g->n_embd };
            dst = mk_out_add(p, name, dt, 2, s1, err);
            if (dst < 0) return dst;
            dst2 = mk_out_add(p, name2, dt2, 2, s2, err);
            if (dst2 < 0) return dst2;
        } else { /* GATE_UP: [E, 2I, H] -> 2 x [E, I, H] */
            int64_t s[3] = { shape[0], shape[1] / 2, shape[2] };
            dst = mk_out_add(p, name, dt, 3, s, err);
            if (dst < 0) return dst;
            dst2 = mk_out_add(p, name2, dt2, 3, s, err);
            if (dst2 < 0) return dst2;
            p0 = s[1];
        }
        break;
    case MK_SHAPE_STACK:
        if (e == 0) {
            int64_t s[3] = { g->n_expert, shape[0], shape[1] };
            int o = mk_out_add(p, name, dt, 3, s, err);
            if (o < 0) return o;
            b->stack_out[role] = o;
        }
        dst = b->stack_out[role];
        p0 = e;
        break;
    }
    if (dst < 0) {
        dst = mk_out_add(p, name, dt, gn, gs, err);
        if (dst < 0) return dst;
    }
    if (b->arch->gguf_v_tiled && g->hk != g->hv && ri->tile != MK_TILE_NONE) {
        switch (ri->tile) {
        case MK_TILE_ROWS_AFTER_QK: route = MK_ROUTE_TILE_ROWS; p0 = 2 * g->hk * g->dk; p1 = g->dv; break;
        case MK_TILE_ROWS_DV: route = MK_ROUTE_TILE_ROWS; p0 = 0; p1 = g->dv; break;
        case MK_TILE_ROWS_1: route = MK_ROUTE_TILE_ROWS; p0 = 0; p1 = 1; break;
        case MK_TILE_COLS_DV: route = MK_ROUTE_TILE_COLS; p1 = g->dv; break;
        case MK_TILE_COLS_1: route = MK_ROUTE_TILE_COLS; p1 = 1; break;
        case MK_TILE_NONE: break;
        }
    }
    mk_job_add(p, &src, route, ri->xform, dst, dst2, p0, p1);
    return HS_OK;
}

#define MK_SHAPE(...) ((const int64_t[]){ __VA_ARGS__ })
/* PUT(role, layer, expert, init, stored-in-dtype, MK_SHAPE(dims...)): the HF name is the role's */
#define PUT(role, il, e, init, quant, dims) \
    do { int rc_ = mk_put(b, role, il, e, init, quant, (int)(sizeof(dims) / sizeof(int64_t)), dims, err); \
         if (rc_) return rc_; } while (0)

/* The model's tensors in HF layout (docs/MODELS.md §7.1), in file order. */
static int mk_walk(struct mk_builder *b, struct hs_err *err)
{
    const struct model_arch_info *a = b->arch;
    const struct mk_geom *g = b->g;
    const int64_t H = g->n_embd, C = 2 * g->hk * g->dk + g->hv * g->dv;

    PUT(MK_ROLE_EMBD, -1, -1, MK_INIT_MATRIX, true, MK_SHAPE(g->n_vocab, H));
    for (int il = 0; il < (int)g->n_layer; il++) {
        PUT(MK_ROLE_ATTN_NORM, il, -1, MK_INIT_NORM_ZC, false, MK_SHAPE(H));
        if (mk_layer_is_full(g, il)) {
            const int64_t qd = g->n_head * g->head_dim, kd = g->n_head_kv * g->head_dim;
            PUT(MK_ROLE_Q, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(2 * qd, H));
            PUT(MK_ROLE_K, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(kd, H));
            PUT(MK_ROLE_V, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(kd, H));
            PUT(MK_ROLE_O, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(H, qd));
            PUT(MK_ROLE_Q_NORM, il, -1, MK_INIT_NORM_ZC, false, MK_SHAPE(g->head_dim));
            PUT(MK_ROLE_K_NORM, il, -1, MK_INIT_NORM_ZC, false, MK_SHAPE(g->head_dim));
        } else {
            const int64_t vd = g->hv * g->dv;
            if (a->fused_gdn) {
                PUT(MK_ROLE_QKVZ, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(C + vd, H));
                PUT(MK_ROLE_BA, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(2 * g->hv, H));
            } else {
                PUT(MK_ROLE_QKV, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(C, H));
                PUT(MK_ROLE_Z, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(vd, H));
                PUT(MK_ROLE_B, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(g->hv, H));
                PUT(MK_ROLE_A, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(g->hv, H));
            }
            PUT(MK_ROLE_CONV, il, -1, MK_INIT_CONV, false, MK_SHAPE(C, 1, g->conv_k));
            PUT(MK_ROLE_DT, il, -1, MK_INIT_DT_BIAS, false, MK_SHAPE(g->hv));
            PUT(MK_ROLE_A_LOG, il, -1, MK_INIT_A_LOG, false, MK_SHAPE(g->hv));
            PUT(MK_ROLE_SSM_NORM, il, -1, MK_INIT_NORM_ONE, false, MK_SHAPE(g->dv));
            PUT(MK_ROLE_SSM_OUT, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(H, vd));
        }
        PUT(MK_ROLE_POST_NORM, il, -1, MK_INIT_NORM_ZC, false, MK_SHAPE(H));
        if (a->moe) {
            const int64_t E = g->n_expert, Ie = g->n_ff_exp, Is = g->n_ff_shexp;
            PUT(MK_ROLE_ROUTER, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(E, H));
            if (a->fused_experts) {
                PUT(MK_ROLE_EXP_GATE_UP, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(E, 2 * Ie, H));
                PUT(MK_ROLE_EXP_DOWN_3D, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(E, H, Ie));
            } else {
                for (int e = 0; e < (int)E; e++) {
                    PUT(MK_ROLE_EXP_GATE, il, e, MK_INIT_MATRIX, true, MK_SHAPE(Ie, H));
                    PUT(MK_ROLE_EXP_UP, il, e, MK_INIT_MATRIX, true, MK_SHAPE(Ie, H));
                    PUT(MK_ROLE_EXP_DOWN, il, e, MK_INIT_MATRIX, true, MK_SHAPE(H, Ie));
                }
            }
            PUT(MK_ROLE_SH_GATE, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(Is, H));
            PUT(MK_ROLE_SH_UP, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(Is, H));
            PUT(MK_ROLE_SH_DOWN, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(H, Is));
            PUT(MK_ROLE_SH_GATE_INP, il, -1, MK_INIT_MATRIX, false, MK_SHAPE(1, H));
        } else {
            PUT(MK_ROLE_FFN_GATE, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(g->n_ff, H));
            PUT(MK_ROLE_FFN_UP, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(g->n_ff, H));
            PUT(MK_ROLE_FFN_DOWN, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(H, g->n_ff));
        }
    }
    PUT(MK_ROLE_OUT_NORM, -1, -1, MK_INIT_NORM_ZC, false, MK_SHAPE(H));
    if (!g->tied) PUT(MK_ROLE_OUTPUT, -1, -1, MK_INIT_MATRIX, true, MK_SHAPE(g->n_vocab, H));
    return HS_OK;
}

#undef PUT

int mk_tensors_plan(struct mk_plan *plan, const struct model_arch_info *a, const struct mk_geom *g,
                    enum dtype dt, bool gguf, struct hs_err *err)
{
    struct mk_builder b;
    memset(&b, 0, sizeof(b));
    b.arch = a;
    b.g = g;
    b.dtype = dt;
    b.gguf = gguf;
    int rc = mk_walk(&b, err);
    *plan = b.plan; /* the caller frees it, also on error */
    return rc;
}
