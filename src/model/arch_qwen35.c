/* arch_qwen35.c — Qwen3.5 / Qwen3.6 dense (HF model_type qwen3_5, GGUF qwen35).
 *
 * Split GDN projections (in_proj_qkv, in_proj_z, in_proj_b, in_proj_a), dense SwiGLU in
 * every layer. llama.cpp's converter re-orders GDN value heads into the tiled order, so
 * GGUF files need no permutation (docs/MODELS.md §8.3).
 */
#include "model/model_int.h"

/* Columns: HF name, GGUF name, scope, n_dims, shape, conversion, slot, slot2, flags. */
static const struct tensor_spec gdn_split_specs[] = {
    { "linear_attn.in_proj_qkv.weight", "attn_qkv.weight", SCOPE_GDN, 2, { DIM_QKV, DIM_H },
      SPEC_CONV_QKV, SLOT_WQKV, SLOT_NONE, 0 },
    { "linear_attn.in_proj_z.weight", "attn_gate.weight", SCOPE_GDN, 2, { DIM_VD, DIM_H },
      SPEC_CONV_VROWS, SLOT_WZ, SLOT_NONE, 0 },
    { "linear_attn.in_proj_b.weight", "ssm_beta.weight", SCOPE_GDN, 2, { DIM_HV, DIM_H },
      SPEC_CONV_HROWS, SLOT_WB, SLOT_NONE, 0 },
    { "linear_attn.in_proj_a.weight", "ssm_alpha.weight", SCOPE_GDN, 2, { DIM_HV, DIM_H },
      SPEC_CONV_HROWS, SLOT_WA, SLOT_NONE, 0 },
};

const struct spec_table arch_specs_gdn_split = SPEC_TABLE(gdn_split_specs);

static const char *const hf_model_types[] = { "qwen3_5", "qwen3_5_text", NULL };
static const char *const hf_architectures[] = {
    "Qwen3_5ForConditionalGeneration", "Qwen3_5ForCausalLM", NULL
};

static const struct spec_table *const tables[] = {
    &arch_specs_top, &arch_specs_mtp, &arch_specs_layer_norms, &arch_specs_attn,
    &arch_specs_gdn_split, &arch_specs_gdn_tail, &arch_specs_ffn_dense,
};

const struct arch_desc arch_qwen35 = {
    .arch = MODEL_ARCH_QWEN35,
    .name = "qwen35",
    .hf_model_types = hf_model_types,
    .hf_architectures = hf_architectures,
    .moe = false,
    .norm_topk_always = false,
    .gguf_v_tiled = true,
    .hf_prefix = "model.language_model.",
    .hf_text_config = true,
    .tokenizer_pre = "qwen35",
    .mrope = true,
    .tied = true,
    .real_vocab = 248320,
    .defaults = ARCH_QWEN_DEFAULTS,
    .tables = tables,
    .n_tables = (int)HS_ARRAY_LEN(tables),
};
