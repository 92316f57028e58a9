/* arch.c — the architecture registry, the shape-symbol and slot tables, and the tensor
 * spec tables the whole Qwen3.5 / Qwen3-Next family shares.
 *
 * Design note
 * -----------
 * An architecture is data: a `struct arch_desc` (arch_qwen35.c, arch_qwen35moe.c,
 * arch_qwen3next.c) names itself, lists the config.json strings it accepts, states the
 * few facts where the family differs (routed experts or not; GGUF value-head order) and
 * lists its spec tables. A spec table row is one tensor as a file holds it:
 *
 *   HF name | GGUF name | scope | shape (symbols) | conversion | slot(s) | flags
 *
 * (model_int.h explains the name patterns, the scopes and the slot rule.) The loader
 * (load.c) walks the tables for every unit — the top, the MTP top, each main layer and
 * each MTP layer — and never asks which architecture it is loading. Rows shared by the
 * family live here; arch_*.c hold the rows that differ. Writers read the same tables:
 * model_arch_hf_walk lists a checkpoint's tensors unit by unit in slot order (the
 * state_dict order, model_int.h), each with the GGUF tensor(s) it becomes.
 *
 * Invariants:
 *   1. Every slot a layer kind needs is filled by some row of every architecture, in
 *      both formats (tests load each arch from HF and GGUF).
 *   2. Rows that fill the same slot are alternatives; the first one found in the file
 *      wins, so the preferred (or most common) spelling comes first.
 *   3. Shape symbols evaluate to at most about 2^44 for hyperparameters that passed
 *      validation (each dimension <= 2^20), so products never overflow.
 */
#include "model/model_int.h"

#include <stddef.h>
#include <string.h>

/* ---- registry ----------------------------------------------------------------------- */

static const struct arch_desc *const registry[MODEL_ARCH_COUNT] = {
    [MODEL_ARCH_QWEN35] = &arch_qwen35,
    [MODEL_ARCH_QWEN35MOE] = &arch_qwen35moe,
    [MODEL_ARCH_QWEN3NEXT] = &arch_qwen3next,
    [MODEL_ARCH_QWEN4EXP] = &arch_qwen4exp,
};

const struct arch_desc *arch_get(enum model_arch a)
{
    return (unsigned)a < MODEL_ARCH_COUNT ? registry[a] : NULL;
}

const struct arch_desc *arch_by_name(const char *name)
{
    for (int a = 0; a < MODEL_ARCH_COUNT; a++)
        if (name && strcmp(registry[a]->name, name) == 0) return registry[a];
    return NULL;
}

const char *model_arch_name(enum model_arch a)
{
    const struct arch_desc *d = arch_get(a);
    return d ? d->name : "unknown";
}

int model_arch_from_name(const char *name)
{
    const struct arch_desc *d = arch_by_name(name);
    return d ? (int)d->arch : -1;
}

bool model_arch_info(enum model_arch a, struct model_arch_info *out)
{
    const struct arch_desc *d = arch_get(a);
    if (!d) return false;
    *out = (struct model_arch_info){
        .arch = d->arch,
        .name = d->name,
        .hf_architecture = d->hf_architectures[0],
        .hf_model_type = d->hf_model_types[0],
        .hf_text_model_type = d->hf_text_config ? d->hf_model_types[1] : NULL,
        .hf_prefix = d->hf_prefix,
        .tokenizer_pre = d->tokenizer_pre,
        .moe = d->moe,
        .norm_topk_always = d->norm_topk_always,
        .gguf_v_tiled = d->gguf_v_tiled,
        .flash_next = d->flash_next,
        .mrope = d->mrope,
        .tied = d->tied,
        .real_vocab = d->real_vocab,
        .defaults = d->defaults,
    };
    return true;
}

static bool in_list(const char *const *list, const char *s)
{
    if (!s || !*s) return false;
    for (; *list; list++)
        if (strcmp(*list, s) == 0) return true;
    return false;
}

const struct arch_desc *arch_from_hf(const char *architecture, const char *model_type,
                                     const char *root_model_type)
{
    for (int a = 0; a < MODEL_ARCH_COUNT; a++)
        if (in_list(registry[a]->hf_architectures, architecture)) return registry[a];
    for (int a = 0; a < MODEL_ARCH_COUNT; a++)
        if (in_list(registry[a]->hf_model_types, model_type) ||
            in_list(registry[a]->hf_model_types, root_model_type))
            return registry[a];
    return NULL;
}

/* ---- shape symbols ------------------------------------------------------------------ */

static const char *const dim_names[DIM_COUNT] = {
    [DIM_ONE] = "1", [DIM_H] = "H", [DIM_V] = "V", [DIM_2H] = "2*H", [DIM_HD] = "hd",
    [DIM_Q2] = "2*nh*hd", [DIM_QO] = "nh*hd", [DIM_KV] = "nkv*hd",
    [DIM_QKV] = "2*Hk*Dk+Hv*Dv", [DIM_QKVZ] = "2*Hk*Dk+2*Hv*Dv", [DIM_VD] = "Hv*Dv",
    [DIM_HV] = "Hv", [DIM_2HV] = "2*Hv", [DIM_DV] = "Dv", [DIM_K] = "K", [DIM_I] = "I",
    [DIM_E] = "E", [DIM_IE] = "Ie", [DIM_2IE] = "2*Ie", [DIM_IS] = "Is",
    [DIM_NH] = "n_hc*H", [DIM_HCN] = "n_hc", [DIM_HCR] = "hc_rank", [DIM_IQ] = "idx_heads*idx_dim",
    [DIM_IQK] = "(idx_heads+1)*idx_dim", [DIM_ID] = "idx_dim", [DIM_PLED] = "ple_heads*ple_row",
    [DIM_PLER] = "ple_row", [DIM_PLEK] = "ple_kernel", [DIM_PLEN] = "ple_rows",
    [DIM_PLES] = "ple_rows/shards",
};

const char *arch_dim_name(enum arch_dim d)
{
    return (unsigned)d < DIM_COUNT ? dim_names[d] : "?";
}

int64_t arch_dim_value(enum arch_dim d, const struct model_hparams *hp)
{
    const int64_t kd = hp->gdn_k_heads * hp->gdn_k_dim, vd = hp->gdn_v_heads * hp->gdn_v_dim;
    switch (d) {
    case DIM_ONE: return 1;
    case DIM_H: return hp->n_embd;
    case DIM_V: return hp->n_vocab;
    case DIM_2H: return 2 * hp->n_embd;
    case DIM_HD: return hp->head_dim;
    case DIM_Q2: return 2 * hp->n_head * hp->head_dim;
    case DIM_QO: return hp->n_head * hp->head_dim;
    case DIM_KV: return hp->n_head_kv * hp->head_dim;
    case DIM_QKV: return 2 * kd + vd;
    case DIM_QKVZ: return 2 * kd + 2 * vd;
    case DIM_VD: return vd;
    case DIM_HV: return hp->gdn_v_heads;
    case DIM_2HV: return 2 * hp->gdn_v_heads;
    case DIM_DV: return hp->gdn_v_dim;
    case DIM_K: return hp->conv_kernel;
    case DIM_I: return hp->n_ff;
    case DIM_E: return hp->n_expert;
    case DIM_IE: return hp->n_ff_exp;
    case DIM_2IE: return 2 * hp->n_ff_exp;
    case DIM_IS: return hp->n_ff_shexp;
    case DIM_NH: return hp->hc_n * hp->n_embd;
    case DIM_HCN: return hp->hc_n;
    case DIM_HCR: return hp->hc_rank;
    case DIM_IQ: return hp->idx_heads * hp->idx_dim;
    case DIM_IQK: return (hp->idx_heads + 1) * hp->idx_dim;
    case DIM_ID: return hp->idx_dim;
    case DIM_PLED: return hp->ple_heads * hp->ple_row;
    case DIM_PLER: return hp->ple_row;
    case DIM_PLEK: return hp->ple_kernel;
    case DIM_PLEN: return hp->ple_rows;
    case DIM_PLES: return hp->ple_shards > 0 ? hp->ple_rows / hp->ple_shards : hp->ple_rows;
    case DIM_COUNT: break;
    }
    return -1;
}

/* ---- slots -------------------------------------------------------------------------- */

#define TOP(s, f, k) [s] = { #f, true, false, k, offsetof(struct model_top, f) }
#define TAIL(s, f, k) [s] = { #f, true, true, k, offsetof(struct model_top, f) }
#define LAY(s, f, k) [s] = { #f, false, false, k, offsetof(struct model_layer, f) }
#define W SLOT_KIND_WEIGHT
#define F SLOT_KIND_F32

static const struct slot_info slots[SLOT_COUNT] = {
    [SLOT_NONE] = { "none", true, false, W, 0 },
    TOP(SLOT_TOKEN_EMBD, token_embd, W), TOP(SLOT_PLE_TABLE, ple_table, W),
    TAIL(SLOT_OUTPUT_NORM, output_norm, F), TAIL(SLOT_HC_HEAD_NORM, hc_head.norm, F),
    TAIL(SLOT_HC_HEAD_DOWN, hc_head.down, W), TAIL(SLOT_HC_HEAD_UP, hc_head.up, W),
    TAIL(SLOT_OUTPUT, output, W),
    TOP(SLOT_MTP_FC, mtp_fc, W), TOP(SLOT_MTP_ENORM, mtp_enorm, F),
    TOP(SLOT_MTP_HNORM, mtp_hnorm, F), TOP(SLOT_MTP_NORM, mtp_norm, F),
    TOP(SLOT_MTP_EMBD, mtp_embd, W), TOP(SLOT_MTP_HEAD, mtp_head, W),
    LAY(SLOT_ATTN_NORM, attn_norm, F),
    LAY(SLOT_PLE_KEY, ple_key, W), LAY(SLOT_PLE_VALUE, ple_value, W),
    LAY(SLOT_PLE_NORM_KEY, ple_norm_key, F), LAY(SLOT_PLE_NORM_QUERY, ple_norm_query, F),
    LAY(SLOT_PLE_NORM_CONV, ple_norm_conv, F), LAY(SLOT_PLE_CONV, ple_conv, F),
    LAY(SLOT_HC_ATTN_NORM, hc_attn.norm, F), LAY(SLOT_HC_ATTN_DOWN, hc_attn.down, W),
    LAY(SLOT_HC_ATTN_UP, hc_attn.up, W), LAY(SLOT_HC_ATTN_INJECT, hc_attn.inject, W),
    LAY(SLOT_WQ, wq, W), LAY(SLOT_WK, wk, W), LAY(SLOT_WV, wv, W), LAY(SLOT_WO, wo, W),
    LAY(SLOT_Q_NORM, q_norm, F), LAY(SLOT_K_NORM, k_norm, F),
    LAY(SLOT_IDX_Q, idx_q, W), LAY(SLOT_IDX_K, idx_k, W), LAY(SLOT_IDX_Q_NORM, idx_q_norm, F),
    LAY(SLOT_IDX_K_NORM, idx_k_norm, F),
    LAY(SLOT_WQKV, wqkv, W), LAY(SLOT_WZ, wz, W), LAY(SLOT_WB, wb, W), LAY(SLOT_WA, wa, W),
    LAY(SLOT_CONV, conv, F), LAY(SLOT_DT_BIAS, dt_bias, F), LAY(SLOT_SSM_A, ssm_a, F),
    LAY(SLOT_SSM_NORM, ssm_norm, F), LAY(SLOT_WOUT, wout, W),
    LAY(SLOT_POST_ATTN_NORM, post_attn_norm, F),
    LAY(SLOT_HC_FFN_NORM, hc_ffn.norm, F), LAY(SLOT_HC_FFN_DOWN, hc_ffn.down, W),
    LAY(SLOT_HC_FFN_UP, hc_ffn.up, W), LAY(SLOT_HC_FFN_INJECT, hc_ffn.inject, W),
    LAY(SLOT_FFN_GATE, ffn_gate, W), LAY(SLOT_FFN_UP, ffn_up, W), LAY(SLOT_FFN_DOWN, ffn_down, W),
    LAY(SLOT_ROUTER, router, W), LAY(SLOT_EXP_GATE, exp_gate, W), LAY(SLOT_EXP_UP, exp_up, W),
    LAY(SLOT_EXP_DOWN, exp_down, W),
    LAY(SLOT_SH_GATE, sh_gate, W), LAY(SLOT_SH_UP, sh_up, W), LAY(SLOT_SH_DOWN, sh_down, W),
    LAY(SLOT_SH_GATE_INP, sh_gate_inp, W),
};

#undef TOP
#undef TAIL
#undef LAY
#undef W
#undef F

const struct slot_info *arch_slot(enum model_slot s)
{
    return (unsigned)s < SLOT_COUNT ? &slots[s] : &slots[SLOT_NONE];
}

/* ---- layer scopes and the checkpoint walk -------------------------------------------- */

bool arch_scope_in_layer(enum spec_scope scope, enum layer_kind lkind, bool moe, bool ple)
{
    switch (scope) {
    case SCOPE_PLE: return ple;
    case SCOPE_LAYER: return true;
    case SCOPE_ATTN: return lkind == LAYER_KIND_ATTN;
    case SCOPE_GDN: return lkind == LAYER_KIND_GDN;
    case SCOPE_DENSE: return !moe;
    case SCOPE_MOE: return moe;
    case SCOPE_TOP:
    case SCOPE_MTP: break;
    }
    return false;
}

/* One unit of the walk: the top (il < 0; before or after the layers) or layer il. */
struct walk {
    const struct arch_desc *d;
    const struct model_hparams *hp;
    int il;
    bool after_layers;
    int (*fn)(const struct model_arch_tensor *t, void *ctx);
    void *ctx;
};

static bool walk_applies(const struct walk *w, const struct tensor_spec *s, bool hf)
{
    if (!(hf ? s->hf : s->gguf)) return false;
    if (w->il < 0) return s->scope == SCOPE_TOP;
    return arch_scope_in_layer(s->scope, w->hp->layer_kind[w->il], w->hp->layer_moe[w->il],
                               w->hp->ple_layer == w->il);
}

/* The first row of the unit, in the given format, whose (first) slot is slot. */
static const struct tensor_spec *walk_row(const struct walk *w, enum model_slot slot, bool hf)
{
    for (int t = 0; t < w->d->n_tables; t++)
        for (int i = 0; i < w->d->tables[t]->n; i++) {
            const struct tensor_spec *s = &w->d->tables[t]->specs[i];
            if (s->slot == slot && walk_applies(w, s, hf)) return s;
        }
    return NULL;
}

static void walk_shape(const struct walk *w, const struct tensor_spec *s, int *n_dims, int64_t *shape)
{
    *n_dims = s->n_dims;
    for (int k = 0; k < s->n_dims; k++) shape[k] = arch_dim_value(s->shape[k], w->hp);
}

/* HF row s as the walk reports it: its GGUF spelling is the row itself when the row names
 * one, else the GGUF rows that fill its slot and slot2 (a tensor GGUF splits in two). */
static int walk_emit(const struct walk *w, const struct tensor_spec *s, int e)
{
    struct model_arch_tensor t = {
        .il = w->il,
        .expert = e,
        .hf = s->hf,
        .hf_root = (s->flags & SPEC_ROOT) != 0,
        .conv = s->conv,
        .zero_centred = (s->flags & SPEC_ZC) != 0,
        .weight = arch_slot(s->slot)->kind == SLOT_KIND_WEIGHT,
    };
    walk_shape(w, s, &t.n_dims, t.shape);
    const struct tensor_spec *g[2] = { s, NULL };
    if (!s->gguf) {
        g[0] = walk_row(w, s->slot, false);
        g[1] = s->slot2 != SLOT_NONE ? walk_row(w, s->slot2, false) : NULL;
    }
    for (int k = 0; k < 2; k++)
        if (g[k]) {
            t.gguf[k] = g[k]->gguf;
            walk_shape(w, g[k], &t.gguf_n_dims[k], t.gguf_shape[k]);
        }
    return w->fn(&t, w->ctx);
}

/* A unit's HF tensors in slot order (model_int.h: the state_dict order); for each slot the
 * first row that fills it (arch.c invariant 2: the preferred spelling). Per-expert rows
 * come as one group, expert by expert, where the first of them falls. */
static int walk_unit(const struct walk *w)
{
    uint64_t done = 0;
    for (int slot = SLOT_NONE + 1; slot < SLOT_COUNT; slot++) {
        const struct slot_info *si = arch_slot((enum model_slot)slot);
        if (si->top != (w->il < 0) || (si->top && si->after_layers != w->after_layers)) continue;
        if (done & (UINT64_C(1) << slot)) continue;
        const struct tensor_spec *s = walk_row(w, (enum model_slot)slot, true);
        if (!s || ((s->flags & SPEC_TIED) && w->hp->tied_embeddings)) continue;
        if (s->conv != SPEC_CONV_EXPERT_LIST) {
            done |= (UINT64_C(1) << s->slot) | (s->slot2 ? UINT64_C(1) << s->slot2 : 0);
            int rc = walk_emit(w, s, -1);
            if (rc) return rc;
            continue;
        }
        const struct tensor_spec *group[SLOT_COUNT];
        int n = 0;
        for (int k = slot; k < SLOT_COUNT; k++) {
            const struct tensor_spec *o = walk_row(w, (enum model_slot)k, true);
            if (o && o->conv == SPEC_CONV_EXPERT_LIST) {
                group[n++] = o;
                done |= UINT64_C(1) << k;
            }
        }
        for (int e = 0; e < (int)w->hp->n_expert; e++)
            for (int k = 0; k < n; k++) {
                int rc = walk_emit(w, group[k], e);
                if (rc) return rc;
            }
    }
    return HS_OK;
}

int model_arch_hf_walk(enum model_arch a, const struct model_hparams *hp,
                       int (*fn)(const struct model_arch_tensor *t, void *ctx), void *ctx)
{
    struct walk w = { .d = arch_get(a), .hp = hp, .il = -1, .fn = fn, .ctx = ctx };
    if (!w.d) return HS_ERR_INVALID;
    int rc = walk_unit(&w);
    for (w.il = 0; rc == HS_OK && w.il < (int)hp->n_layer; w.il++) rc = walk_unit(&w);
    if (rc) return rc;
    w.il = -1;
    w.after_layers = true;
    return walk_unit(&w);
}

/* ---- shared spec tables ------------------------------------------------------------- */
/* Columns: HF name, GGUF name, scope, n_dims, shape, conversion, slot, slot2, flags. */

static const struct tensor_spec top_specs[] = {
    { "embed_tokens.weight", "token_embd.weight", SCOPE_TOP, 2, { DIM_V, DIM_H },
      SPEC_CONV_VIEW, SLOT_TOKEN_EMBD, SLOT_NONE, 0 },
    { "norm.weight", "output_norm.weight", SCOPE_TOP, 1, { DIM_H },
      SPEC_CONV_NORM, SLOT_OUTPUT_NORM, SLOT_NONE, SPEC_ZC },
    { "lm_head.weight", "output.weight", SCOPE_TOP, 2, { DIM_V, DIM_H },
      SPEC_CONV_VIEW, SLOT_OUTPUT, SLOT_NONE, SPEC_OPT | SPEC_TIED | SPEC_ROOT },
};

/* The MTP block's own tensors; its decoder layer uses the layer tables. */
static const struct tensor_spec mtp_specs[] = {
    { "mtp.fc.weight", "nextn.eh_proj.weight", SCOPE_MTP, 2, { DIM_H, DIM_2H },
      SPEC_CONV_VIEW, SLOT_MTP_FC, SLOT_NONE, 0 },
    { "mtp.pre_fc_norm_embedding.weight", "nextn.enorm.weight", SCOPE_MTP, 1, { DIM_H },
      SPEC_CONV_NORM, SLOT_MTP_ENORM, SLOT_NONE, SPEC_ZC },
    { "mtp.pre_fc_norm_hidden.weight", "nextn.hnorm.weight", SCOPE_MTP, 1, { DIM_H },
      SPEC_CONV_NORM, SLOT_MTP_HNORM, SLOT_NONE, SPEC_ZC },
    { "mtp.norm.weight", "nextn.shared_head_norm.weight", SCOPE_MTP, 1, { DIM_H },
      SPEC_CONV_NORM, SLOT_MTP_NORM, SLOT_NONE, SPEC_ZC },
    { NULL, "nextn.embed_tokens.weight", SCOPE_MTP, 2, { DIM_V, DIM_H },
      SPEC_CONV_VIEW, SLOT_MTP_EMBD, SLOT_NONE, SPEC_OPT },
    { NULL, "nextn.shared_head_head.weight", SCOPE_MTP, 2, { DIM_V, DIM_H },
      SPEC_CONV_VIEW, SLOT_MTP_HEAD, SLOT_NONE, SPEC_OPT },
};

static const struct tensor_spec layer_norm_specs[] = {
    { "input_layernorm.weight", "attn_norm.weight", SCOPE_LAYER, 1, { DIM_H },
      SPEC_CONV_NORM, SLOT_ATTN_NORM, SLOT_NONE, SPEC_ZC },
    { "post_attention_layernorm.weight", "post_attention_norm.weight", SCOPE_LAYER, 1, { DIM_H },
      SPEC_CONV_NORM, SLOT_POST_ATTN_NORM, SLOT_NONE, SPEC_ZC },
};

static const struct tensor_spec attn_specs[] = {
    { "self_attn.q_proj.weight", "attn_q.weight", SCOPE_ATTN, 2, { DIM_Q2, DIM_H },
      SPEC_CONV_VIEW, SLOT_WQ, SLOT_NONE, 0 },
    { "self_attn.k_proj.weight", "attn_k.weight", SCOPE_ATTN, 2, { DIM_KV, DIM_H },
      SPEC_CONV_VIEW, SLOT_WK, SLOT_NONE, 0 },
    { "self_attn.v_proj.weight", "attn_v.weight", SCOPE_ATTN, 2, { DIM_KV, DIM_H },
      SPEC_CONV_VIEW, SLOT_WV, SLOT_NONE, 0 },
    { "self_attn.o_proj.weight", "attn_output.weight", SCOPE_ATTN, 2, { DIM_H, DIM_QO },
      SPEC_CONV_VIEW, SLOT_WO, SLOT_NONE, 0 },
    { "self_attn.q_norm.weight", "attn_q_norm.weight", SCOPE_ATTN, 1, { DIM_HD },
      SPEC_CONV_NORM, SLOT_Q_NORM, SLOT_NONE, SPEC_ZC },
    { "self_attn.k_norm.weight", "attn_k_norm.weight", SCOPE_ATTN, 1, { DIM_HD },
      SPEC_CONV_NORM, SLOT_K_NORM, SLOT_NONE, SPEC_ZC },
};

/* GDN tensors every architecture spells the same way. */
static const struct tensor_spec gdn_tail_specs[] = {
    { "linear_attn.conv1d.weight", NULL, SCOPE_GDN, 3, { DIM_QKV, DIM_ONE, DIM_K },
      SPEC_CONV_CONV, SLOT_CONV, SLOT_NONE, 0 },
    { NULL, "ssm_conv1d.weight", SCOPE_GDN, 2, { DIM_QKV, DIM_K },
      SPEC_CONV_CONV, SLOT_CONV, SLOT_NONE, 0 },
    { "linear_attn.dt_bias", "ssm_dt.bias", SCOPE_GDN, 1, { DIM_HV },
      SPEC_CONV_VEC_VHEAD, SLOT_DT_BIAS, SLOT_NONE, 0 },
    { "linear_attn.A_log", "ssm_a", SCOPE_GDN, 1, { DIM_HV },
      SPEC_CONV_A, SLOT_SSM_A, SLOT_NONE, 0 },
    { "linear_attn.norm.weight", "ssm_norm.weight", SCOPE_GDN, 1, { DIM_DV },
      SPEC_CONV_VEC, SLOT_SSM_NORM, SLOT_NONE, 0 },
    { "linear_attn.out_proj.weight", "ssm_out.weight", SCOPE_GDN, 2, { DIM_H, DIM_VD },
      SPEC_CONV_OUT, SLOT_WOUT, SLOT_NONE, 0 },
};

static const struct tensor_spec ffn_dense_specs[] = {
    { "mlp.gate_proj.weight", "ffn_gate.weight", SCOPE_DENSE, 2, { DIM_I, DIM_H },
      SPEC_CONV_VIEW, SLOT_FFN_GATE, SLOT_NONE, 0 },
    { "mlp.up_proj.weight", "ffn_up.weight", SCOPE_DENSE, 2, { DIM_I, DIM_H },
      SPEC_CONV_VIEW, SLOT_FFN_UP, SLOT_NONE, 0 },
    { "mlp.down_proj.weight", "ffn_down.weight", SCOPE_DENSE, 2, { DIM_H, DIM_I },
      SPEC_CONV_VIEW, SLOT_FFN_DOWN, SLOT_NONE, 0 },
};

/* Router and shared expert: the same in Qwen3.5-MoE and Qwen3-Next. */
static const struct tensor_spec moe_common_specs[] = {
    { "mlp.gate.weight", "ffn_gate_inp.weight", SCOPE_MOE, 2, { DIM_E, DIM_H },
      SPEC_CONV_VIEW, SLOT_ROUTER, SLOT_NONE, 0 },
    { "mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight", SCOPE_MOE, 2, { DIM_IS, DIM_H },
      SPEC_CONV_VIEW, SLOT_SH_GATE, SLOT_NONE, 0 },
    { "mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight", SCOPE_MOE, 2, { DIM_IS, DIM_H },
      SPEC_CONV_VIEW, SLOT_SH_UP, SLOT_NONE, 0 },
    { "mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight", SCOPE_MOE, 2, { DIM_H, DIM_IS },
      SPEC_CONV_VIEW, SLOT_SH_DOWN, SLOT_NONE, 0 },
    /* HF keeps the shared-expert gate as a [1, H] linear; llama.cpp writes it 1-D. */
    { "mlp.shared_expert_gate.weight", NULL, SCOPE_MOE, 2, { DIM_ONE, DIM_H },
      SPEC_CONV_VIEW, SLOT_SH_GATE_INP, SLOT_NONE, 0 },
    { NULL, "ffn_gate_inp_shexp.weight", SCOPE_MOE, 1, { DIM_H },
      SPEC_CONV_VIEW, SLOT_SH_GATE_INP, SLOT_NONE, 0 },
};

/* GGUF expert stacks (llama.cpp merges HF experts into [E, I, H] / [E, H, I]); the fused
 * gate+up stack some converters write is the alternative. */
static const struct tensor_spec moe_gguf_specs[] = {
    { NULL, "ffn_gate_exps.weight", SCOPE_MOE, 3, { DIM_E, DIM_IE, DIM_H },
      SPEC_CONV_EXPERTS, SLOT_EXP_GATE, SLOT_NONE, 0 },
    { NULL, "ffn_up_exps.weight", SCOPE_MOE, 3, { DIM_E, DIM_IE, DIM_H },
      SPEC_CONV_EXPERTS, SLOT_EXP_UP, SLOT_NONE, 0 },
    { NULL, "ffn_gate_up_exps.weight", SCOPE_MOE, 3, { DIM_E, DIM_2IE, DIM_H },
      SPEC_CONV_GATE_UP, SLOT_EXP_GATE, SLOT_EXP_UP, 0 },
    { NULL, "ffn_down_exps.weight", SCOPE_MOE, 3, { DIM_E, DIM_H, DIM_IE },
      SPEC_CONV_EXPERTS, SLOT_EXP_DOWN, SLOT_NONE, 0 },
};

const struct spec_table arch_specs_top = SPEC_TABLE(top_specs);
const struct spec_table arch_specs_mtp = SPEC_TABLE(mtp_specs);
const struct spec_table arch_specs_layer_norms = SPEC_TABLE(layer_norm_specs);
const struct spec_table arch_specs_attn = SPEC_TABLE(attn_specs);
const struct spec_table arch_specs_gdn_tail = SPEC_TABLE(gdn_tail_specs);
const struct spec_table arch_specs_ffn_dense = SPEC_TABLE(ffn_dense_specs);
const struct spec_table arch_specs_moe_common = SPEC_TABLE(moe_common_specs);
const struct spec_table arch_specs_moe_gguf = SPEC_TABLE(moe_gguf_specs);
