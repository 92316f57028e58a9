/* arch_qwen4exp.c — Qwen3.8-Flash-Next (HF model_type qwen4_exp / qwen4_exp_text, GGUF
 * qwen4exp), docs/MODELS.md §10.
 *
 * Design note
 * -----------
 * The Qwen3.5-MoE layer (split GDN projections, gated attention, routed experts with a gated
 * shared expert) with four differences a loader sees:
 *   1. no input / post-attention / final norms: every block reads its input through a
 *      hyper-connection mixer (hc_norm, input_mix_weight_down/up, block_inject_weight; GGUF
 *      hc_{attn,ffn}_{norm,down,up,inject}), and the head through one without injection
 *      (hyper_connection_mixer; GGUF output_hc_*). The mixer norms are zero-centred, one H
 *      slice per stream: HF stores them flat [hc_n * H], GGUF as {H, hc_n} (folded);
 *   2. attention layers carry the QSA indexer: HF fuses its query heads and its one key
 *      head in index_qk_proj [(idx_heads + 1) * idx_dim, H] (split here, zero-copy), GGUF
 *      has indexer.q_proj / indexer.k_proj; its q / k norms are zero-centred;
 *   3. one GDN layer (ple_layer) carries the hashed n-gram embedding: key / value
 *      projections, three grouped zero-centred norms, a depthwise conv, and the table. HF
 *      keeps the table inside that layer as shards (".shard_<i>", rows concatenated in shard
 *      order), GGUF at the top as per_layer_token_embd. Its integer constants (multipliers,
 *      moduli, offsets) are hyperparameters (load.c reads them from the I64 buffers or the
 *      GGUF arrays), not tensors;
 *   4. the GDN output gate is a sigmoid (config output_gate_type), and the top-k weights are
 *      renormalised (norm_topk_prob, default true).
 * MTP blocks (HF mtp.*) are not bound: their fusion differs from Qwen3.5's and llama.cpp's
 * converter drops them.
 */
#include "model/model_int.h"

/* Columns: HF name, GGUF name, scope, n_dims, shape, conversion, slot, slot2, flags. */
static const struct tensor_spec top_specs[] = {
    { "embed_tokens.weight", "token_embd.weight", SCOPE_TOP, 2, { DIM_V, DIM_H },
      SPEC_CONV_VIEW, SLOT_TOKEN_EMBD, SLOT_NONE, 0 },
    { "layers.%d.ple.ple_embedding.ngram_embedding.shard_%d.weight", NULL, SCOPE_TOP, 2, { DIM_PLES, DIM_PLER },
      SPEC_CONV_SHARDS, SLOT_PLE_TABLE, SLOT_NONE, 0 },
    { NULL, "per_layer_token_embd.weight", SCOPE_TOP, 2, { DIM_PLEN, DIM_PLER },
      SPEC_CONV_VIEW, SLOT_PLE_TABLE, SLOT_NONE, 0 },
    { "hyper_connection_mixer.hc_norm.weight", NULL, SCOPE_TOP, 1, { DIM_NH },
      SPEC_CONV_NORM, SLOT_HC_HEAD_NORM, SLOT_NONE, SPEC_ZC },
    { NULL, "output_hc_norm.weight", SCOPE_TOP, 2, { DIM_HCN, DIM_H },
      SPEC_CONV_NORM, SLOT_HC_HEAD_NORM, SLOT_NONE, SPEC_ZC },
    { "hyper_connection_mixer.input_mix_weight_down.weight", "output_hc_down.weight", SCOPE_TOP, 2,
      { DIM_HCR, DIM_NH }, SPEC_CONV_VIEW, SLOT_HC_HEAD_DOWN, SLOT_NONE, 0 },
    { "hyper_connection_mixer.input_mix_weight_up.weight", "output_hc_up.weight", SCOPE_TOP, 2,
      { DIM_NH, DIM_HCR }, SPEC_CONV_VIEW, SLOT_HC_HEAD_UP, SLOT_NONE, 0 },
    { "lm_head.weight", "output.weight", SCOPE_TOP, 2, { DIM_V, DIM_H },
      SPEC_CONV_VIEW, SLOT_OUTPUT, SLOT_NONE, SPEC_OPT | SPEC_TIED | SPEC_ROOT },
};

/* The two mixers of every layer. */
static const struct tensor_spec hc_specs[] = {
    { "attn_hyper_connection.hc_norm.weight", NULL, SCOPE_LAYER, 1, { DIM_NH },
      SPEC_CONV_NORM, SLOT_HC_ATTN_NORM, SLOT_NONE, SPEC_ZC },
    { NULL, "hc_attn_norm.weight", SCOPE_LAYER, 2, { DIM_HCN, DIM_H },
      SPEC_CONV_NORM, SLOT_HC_ATTN_NORM, SLOT_NONE, SPEC_ZC },
    { "attn_hyper_connection.input_mix_weight_down.weight", "hc_attn_down.weight", SCOPE_LAYER, 2,
      { DIM_HCR, DIM_NH }, SPEC_CONV_VIEW, SLOT_HC_ATTN_DOWN, SLOT_NONE, 0 },
    { "attn_hyper_connection.input_mix_weight_up.weight", "hc_attn_up.weight", SCOPE_LAYER, 2,
      { DIM_NH, DIM_HCR }, SPEC_CONV_VIEW, SLOT_HC_ATTN_UP, SLOT_NONE, 0 },
    { "attn_hyper_connection.block_inject_weight.weight", "hc_attn_inject.weight", SCOPE_LAYER, 2,
      { DIM_HCN, DIM_NH }, SPEC_CONV_VIEW, SLOT_HC_ATTN_INJECT, SLOT_NONE, 0 },
    { "mlp_hyper_connection.hc_norm.weight", NULL, SCOPE_LAYER, 1, { DIM_NH },
      SPEC_CONV_NORM, SLOT_HC_FFN_NORM, SLOT_NONE, SPEC_ZC },
    { NULL, "hc_ffn_norm.weight", SCOPE_LAYER, 2, { DIM_HCN, DIM_H },
      SPEC_CONV_NORM, SLOT_HC_FFN_NORM, SLOT_NONE, SPEC_ZC },
    { "mlp_hyper_connection.input_mix_weight_down.weight", "hc_ffn_down.weight", SCOPE_LAYER, 2,
      { DIM_HCR, DIM_NH }, SPEC_CONV_VIEW, SLOT_HC_FFN_DOWN, SLOT_NONE, 0 },
    { "mlp_hyper_connection.input_mix_weight_up.weight", "hc_ffn_up.weight", SCOPE_LAYER, 2,
      { DIM_NH, DIM_HCR }, SPEC_CONV_VIEW, SLOT_HC_FFN_UP, SLOT_NONE, 0 },
    { "mlp_hyper_connection.block_inject_weight.weight", "hc_ffn_inject.weight", SCOPE_LAYER, 2,
      { DIM_HCN, DIM_NH }, SPEC_CONV_VIEW, SLOT_HC_FFN_INJECT, SLOT_NONE, 0 },
};

static const struct tensor_spec indexer_specs[] = {
    { "self_attn.indexer.index_qk_proj.weight", NULL, SCOPE_ATTN, 2, { DIM_IQK, DIM_H },
      SPEC_CONV_SPLIT_ROWS, SLOT_IDX_Q, SLOT_IDX_K, 0 },
    { NULL, "indexer.q_proj.weight", SCOPE_ATTN, 2, { DIM_IQ, DIM_H },
      SPEC_CONV_VIEW, SLOT_IDX_Q, SLOT_NONE, 0 },
    { NULL, "indexer.k_proj.weight", SCOPE_ATTN, 2, { DIM_ID, DIM_H },
      SPEC_CONV_VIEW, SLOT_IDX_K, SLOT_NONE, 0 },
    { "self_attn.indexer.q_layernorm.weight", "indexer.q_norm.weight", SCOPE_ATTN, 1, { DIM_ID },
      SPEC_CONV_NORM, SLOT_IDX_Q_NORM, SLOT_NONE, SPEC_ZC },
    { "self_attn.indexer.k_layernorm.weight", "indexer.k_norm.weight", SCOPE_ATTN, 1, { DIM_ID },
      SPEC_CONV_NORM, SLOT_IDX_K_NORM, SLOT_NONE, SPEC_ZC },
};

static const struct tensor_spec ple_specs[] = {
    { "ple.key_proj.weight", "ple_key.weight", SCOPE_PLE, 2, { DIM_NH, DIM_PLED },
      SPEC_CONV_VIEW, SLOT_PLE_KEY, SLOT_NONE, 0 },
    { "ple.value_proj.weight", "ple_value.weight", SCOPE_PLE, 2, { DIM_H, DIM_PLED },
      SPEC_CONV_VIEW, SLOT_PLE_VALUE, SLOT_NONE, 0 },
    { "ple.norm_key.weight", NULL, SCOPE_PLE, 1, { DIM_NH },
      SPEC_CONV_NORM, SLOT_PLE_NORM_KEY, SLOT_NONE, SPEC_ZC },
    { NULL, "ple_norm_key.weight", SCOPE_PLE, 2, { DIM_HCN, DIM_H },
      SPEC_CONV_NORM, SLOT_PLE_NORM_KEY, SLOT_NONE, SPEC_ZC },
    { "ple.norm_query.weight", NULL, SCOPE_PLE, 1, { DIM_NH },
      SPEC_CONV_NORM, SLOT_PLE_NORM_QUERY, SLOT_NONE, SPEC_ZC },
    { NULL, "ple_norm_query.weight", SCOPE_PLE, 2, { DIM_HCN, DIM_H },
      SPEC_CONV_NORM, SLOT_PLE_NORM_QUERY, SLOT_NONE, SPEC_ZC },
    { "ple.norm_conv.weight", NULL, SCOPE_PLE, 1, { DIM_NH },
      SPEC_CONV_NORM, SLOT_PLE_NORM_CONV, SLOT_NONE, SPEC_ZC },
    { NULL, "ple_norm_conv.weight", SCOPE_PLE, 2, { DIM_HCN, DIM_H },
      SPEC_CONV_NORM, SLOT_PLE_NORM_CONV, SLOT_NONE, SPEC_ZC },
    { "ple.conv1d.weight", NULL, SCOPE_PLE, 3, { DIM_NH, DIM_ONE, DIM_PLEK },
      SPEC_CONV_VEC, SLOT_PLE_CONV, SLOT_NONE, 0 },
    { NULL, "ple_conv1d.weight", SCOPE_PLE, 2, { DIM_NH, DIM_PLEK },
      SPEC_CONV_VEC, SLOT_PLE_CONV, SLOT_NONE, 0 },
};

static const struct spec_table top = SPEC_TABLE(top_specs), hc = SPEC_TABLE(hc_specs),
                                indexer = SPEC_TABLE(indexer_specs), ple = SPEC_TABLE(ple_specs);

static const char *const hf_model_types[] = { "qwen4_exp", "qwen4_exp_text", NULL };
static const char *const hf_architectures[] = {
    "Qwen4ExpForConditionalGeneration", "Qwen4ExpForCausalLM", NULL
};

static const struct spec_table *const tables[] = {
    &top, &ple, &hc, &arch_specs_attn, &indexer, &arch_specs_gdn_split, &arch_specs_gdn_tail,
    &arch_specs_moe_common, &arch_specs_experts_hf, &arch_specs_moe_gguf,
};

const struct arch_desc arch_qwen4exp = {
    .arch = MODEL_ARCH_QWEN4EXP,
    .name = "qwen4exp",
    .hf_model_types = hf_model_types,
    .hf_architectures = hf_architectures,
    .moe = true,
    .norm_topk_always = false,
    .gguf_v_tiled = true,
    .flash_next = true,
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
