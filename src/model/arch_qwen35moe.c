/* arch_qwen35moe.c — Qwen3.5 / Qwen3.6 MoE (HF model_type qwen3_5_moe, GGUF qwen35moe).
 *
 * GDN as dense Qwen3.5; every layer's FFN is routed experts plus a gated shared expert.
 * HF stores the experts fused: gate_up_proj [E, 2*Ie, H] (per expert: Ie gate rows, then
 * Ie up rows) and down_proj [E, H, Ie], without a ".weight" suffix. The top-k weights are
 * always renormalised (the config has no norm_topk_prob).
 */
#include "model/model_int.h"

/* Columns: HF name, GGUF name, scope, n_dims, shape, conversion, slot, slot2, flags. */
static const struct tensor_spec experts_hf_specs[] = {
    { "mlp.experts.gate_up_proj", NULL, SCOPE_MOE, 3, { DIM_E, DIM_2IE, DIM_H },
      SPEC_CONV_GATE_UP, SLOT_EXP_GATE, SLOT_EXP_UP, 0 },
    { "mlp.experts.down_proj", NULL, SCOPE_MOE, 3, { DIM_E, DIM_H, DIM_IE },
      SPEC_CONV_EXPERTS, SLOT_EXP_DOWN, SLOT_NONE, 0 },
};

const struct spec_table arch_specs_experts_hf = SPEC_TABLE(experts_hf_specs);

static const char *const hf_model_types[] = { "qwen3_5_moe", "qwen3_5_moe_text", NULL };
static const char *const hf_architectures[] = {
    "Qwen3_5MoeForConditionalGeneration", "Qwen3_5MoeForCausalLM", NULL
};

static const struct spec_table *const tables[] = {
    &arch_specs_top, &arch_specs_mtp, &arch_specs_layer_norms, &arch_specs_attn,
    &arch_specs_gdn_split, &arch_specs_gdn_tail, &arch_specs_ffn_dense,
    &arch_specs_moe_common, &arch_specs_experts_hf, &arch_specs_moe_gguf,
};

const struct arch_desc arch_qwen35moe = {
    .arch = MODEL_ARCH_QWEN35MOE,
    .name = "qwen35moe",
    .hf_model_types = hf_model_types,
    .hf_architectures = hf_architectures,
    .moe = true,
    .norm_topk_always = true,
    .gguf_v_tiled = true,
    .hf_prefix = "model.language_model.",
    .hf_text_config = true,
    .tokenizer_pre = "qwen35",
    .mrope = true,
    .tied = false,
    .real_vocab = 248320,
    .defaults = ARCH_QWEN_DEFAULTS,
    .tables = tables,
    .n_tables = (int)HS_ARRAY_LEN(tables),
};
