/* arch_qwen3next.c — Qwen3-Next (HF model_type qwen3_next, GGUF qwen3next).
 *
 * Fused GDN input projections grouped by key head: in_proj_qkvz rows are, for each key
 * head g, [q_g (Dk) | k_g (Dk) | v of g's r value heads (r*Dv) | z of them (r*Dv)];
 * in_proj_ba rows are, for each g, [b of g's r heads | a of g's r heads]. llama.cpp's
 * converter splits qkvz into attn_qkv + attn_gate (value heads still grouped; old files
 * keep the fused ssm_in) and keeps ssm_ba fused, so GGUF value heads are grouped too.
 * HF experts are one tensor per expert; dense layers (mlp_only_layers) are allowed.
 */
#include "model/model_int.h"

/* Columns: HF name, GGUF name, scope, n_dims, shape, conversion, slot, slot2, flags. */
static const struct tensor_spec gdn_fused_specs[] = {
    { "linear_attn.in_proj_qkvz.weight", NULL, SCOPE_GDN, 2, { DIM_QKVZ, DIM_H },
      SPEC_CONV_QKVZ, SLOT_WQKV, SLOT_WZ, 0 },
    { NULL, "attn_qkv.weight", SCOPE_GDN, 2, { DIM_QKV, DIM_H },
      SPEC_CONV_QKV, SLOT_WQKV, SLOT_NONE, 0 },
    { NULL, "attn_gate.weight", SCOPE_GDN, 2, { DIM_VD, DIM_H },
      SPEC_CONV_VROWS, SLOT_WZ, SLOT_NONE, 0 },
    { NULL, "ssm_in.weight", SCOPE_GDN, 2, { DIM_QKVZ, DIM_H },
      SPEC_CONV_QKVZ, SLOT_WQKV, SLOT_WZ, 0 },
    { "linear_attn.in_proj_ba.weight", "ssm_ba.weight", SCOPE_GDN, 2, { DIM_2HV, DIM_H },
      SPEC_CONV_BA, SLOT_WB, SLOT_WA, 0 },
};

static const struct tensor_spec experts_hf_specs[] = {
    { "mlp.experts.%d.gate_proj.weight", NULL, SCOPE_MOE, 2, { DIM_IE, DIM_H },
      SPEC_CONV_EXPERT_LIST, SLOT_EXP_GATE, SLOT_NONE, 0 },
    { "mlp.experts.%d.up_proj.weight", NULL, SCOPE_MOE, 2, { DIM_IE, DIM_H },
      SPEC_CONV_EXPERT_LIST, SLOT_EXP_UP, SLOT_NONE, 0 },
    { "mlp.experts.%d.down_proj.weight", NULL, SCOPE_MOE, 2, { DIM_H, DIM_IE },
      SPEC_CONV_EXPERT_LIST, SLOT_EXP_DOWN, SLOT_NONE, 0 },
};

static const struct spec_table gdn_fused = SPEC_TABLE(gdn_fused_specs);
static const struct spec_table experts_hf = SPEC_TABLE(experts_hf_specs);

static const char *const hf_model_types[] = { "qwen3_next", NULL };
static const char *const hf_architectures[] = { "Qwen3NextForCausalLM", NULL };

static const struct spec_table *const tables[] = {
    &arch_specs_top, &arch_specs_mtp, &arch_specs_layer_norms, &arch_specs_attn,
    &gdn_fused, &arch_specs_gdn_tail, &arch_specs_ffn_dense,
    &arch_specs_moe_common, &experts_hf, &arch_specs_moe_gguf,
};

const struct arch_desc arch_qwen3next = {
    .arch = MODEL_ARCH_QWEN3NEXT,
    .name = "qwen3next",
    .hf_model_types = hf_model_types,
    .hf_architectures = hf_architectures,
    .moe = true,
    .norm_topk_always = false,
    .gguf_v_tiled = false,
    .hf_prefix = "model.",
    .hf_text_config = false,
    .tokenizer_pre = "qwen2",
    .mrope = false,
    .tied = false,
    .real_vocab = 151936,
    .defaults = ARCH_QWEN_DEFAULTS,
    .tables = tables,
    .n_tables = (int)HS_ARRAY_LEN(tables),
};
