/* test_config.c — config.json: the Qwen3.5 (nested), Qwen3-Next (flat) and Qwen3.5-MoE
 * shapes, defaults, where each field is looked up, and every validation error. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "format/format.h"

/* Qwen/Qwen3.5-0.8B as in docs/MODELS.md §1.3 (vision_config trimmed). */
#define LT4 "\"linear_attention\",\"linear_attention\",\"linear_attention\",\"full_attention\""
static const char cfg_qwen35_08b[] =
    "{\n"
    "  \"architectures\": [\"Qwen3_5ForConditionalGeneration\"],\n"
    "  \"image_token_id\": 248056,\n"
    "  \"model_type\": \"qwen3_5\",\n"
    "  \"text_config\": {\n"
    "    \"attention_bias\": false,\n"
    "    \"attention_dropout\": 0.0,\n"
    "    \"attn_output_gate\": true,\n"
    "    \"dtype\": \"bfloat16\",\n"
    "    \"eos_token_id\": 248044,\n"
    "    \"full_attention_interval\": 4,\n"
    "    \"head_dim\": 256,\n"
    "    \"hidden_act\": \"silu\",\n"
    "    \"hidden_size\": 1024,\n"
    "    \"initializer_range\": 0.02,\n"
    "    \"intermediate_size\": 3584,\n"
    "    \"layer_types\": [" LT4 "," LT4 "," LT4 "," LT4 "," LT4 "," LT4 "],\n"
    "    \"linear_conv_kernel_dim\": 4,\n"
    "    \"linear_key_head_dim\": 128,\n"
    "    \"linear_num_key_heads\": 16,\n"
    "    \"linear_num_value_heads\": 16,\n"
    "    \"linear_value_head_dim\": 128,\n"
    "    \"mamba_ssm_dtype\": \"float32\",\n"
    "    \"max_position_embeddings\": 262144,\n"
    "    \"mlp_only_layers\": [],\n"
    "    \"model_type\": \"qwen3_5_text\",\n"
    "    \"mtp_num_hidden_layers\": 1,\n"
    "    \"mtp_use_dedicated_embeddings\": false,\n"
    "    \"num_attention_heads\": 8,\n"
    "    \"num_hidden_layers\": 24,\n"
    "    \"num_key_value_heads\": 2,\n"
    "    \"rms_norm_eps\": 1e-06,\n"
    "    \"rope_parameters\": {\n"
    "      \"mrope_interleaved\": true,\n"
    "      \"mrope_section\": [11, 11, 10],\n"
    "      \"rope_type\": \"default\",\n"
    "      \"rope_theta\": 10000000,\n"
    "      \"partial_rotary_factor\": 0.25\n"
    "    },\n"
    "    \"tie_word_embeddings\": true,\n"
    "    \"use_cache\": true,\n"
    "    \"vocab_size\": 248320\n"
    "  },\n"
    "  \"tie_word_embeddings\": true,\n"
    "  \"transformers_version\": \"4.57.0.dev0\",\n"
    "  \"video_token_id\": 248057,\n"
    "  \"vision_config\": {\"depth\": 12, \"hidden_size\": 768, \"model_type\": \"qwen3_5\"},\n"
    "  \"vision_end_token_id\": 248054,\n"
    "  \"vision_start_token_id\": 248053\n"
    "}\n";

/* Qwen3-Next-80B-A3B-like: flat, rope fields at the top, no layer_types, MoE. */
static const char cfg_qwen3_next[] =
    "{\"architectures\":[\"Qwen3NextForCausalLM\"],\"model_type\":\"qwen3_next\","
    "\"bos_token_id\":151643,\"eos_token_id\":151645,\"decoder_sparse_step\":1,"
    "\"full_attention_interval\":4,\"head_dim\":256,\"hidden_act\":\"silu\",\"hidden_size\":2048,"
    "\"intermediate_size\":5120,\"linear_conv_kernel_dim\":4,\"linear_key_head_dim\":128,"
    "\"linear_num_key_heads\":16,\"linear_num_value_heads\":32,\"linear_value_head_dim\":128,"
    "\"max_position_embeddings\":262144,\"mlp_only_layers\":[],\"moe_intermediate_size\":512,"
    "\"norm_topk_prob\":true,\"num_attention_heads\":16,\"num_experts\":512,\"num_experts_per_tok\":10,"
    "\"num_hidden_layers\":48,\"num_key_value_heads\":2,\"output_router_logits\":false,"
    "\"partial_rotary_factor\":0.25,\"rms_norm_eps\":1e-06,\"rope_scaling\":null,\"rope_theta\":10000000,"
    "\"router_aux_loss_coef\":0.001,\"shared_expert_intermediate_size\":512,\"tie_word_embeddings\":false,"
    "\"torch_dtype\":\"bfloat16\",\"transformers_version\":\"4.57.0.dev0\",\"use_cache\":true,"
    "\"use_sliding_window\":false,\"vocab_size\":151936}";

/* Qwen3.5-35B-A3B-like: nested, MoE without norm_topk_prob, eos as a list, swish gate. */
static const char cfg_qwen35_moe[] =
    "{\"architectures\":[\"Qwen3_5MoeForConditionalGeneration\"],\"model_type\":\"qwen3_5_moe\","
    "\"tie_word_embeddings\":false,\"eos_token_id\":[1,2],"
    "\"text_config\":{\"model_type\":\"qwen3_5_moe_text\",\"vocab_size\":248320,\"hidden_size\":2048,"
    "\"num_hidden_layers\":8,\"num_attention_heads\":16,\"num_key_value_heads\":2,\"head_dim\":256,"
    "\"layer_types\":[" LT4 "," LT4 "],\"linear_num_key_heads\":16,\"linear_num_value_heads\":32,"
    "\"linear_key_head_dim\":128,\"linear_value_head_dim\":128,\"num_experts\":256,"
    "\"num_experts_per_tok\":8,\"moe_intermediate_size\":512,\"shared_expert_intermediate_size\":512,"
    "\"eos_token_id\":[248044,248046],\"output_gate_type\":\"swish\",\"mtp_num_hidden_layers\":1,"
    "\"rope_parameters\":{\"rope_theta\":10000000,\"partial_rotary_factor\":0.25,"
    "\"mrope_section\":[11,11,10],\"mrope_interleaved\":true},\"dtype\":\"bfloat16\"}}";

static int cfg_parse(const char *json, struct hf_config *c, struct hs_err *e)
{
    hs_err_clear(e);
    return hf_config_parse(json, strlen(json), "cfg.json", c, e);
}

/* Edit a JSON text: replace the first occurrence of `from` with `to`. */
static char *cfg_edit(const char *json, const char *from, const char *to)
{
    const char *p = strstr(json, from);
    cr_assert_not_null(p, "'%s' not in the config", from);
    size_t a = (size_t)(p - json), fl = strlen(from), tl = strlen(to), n = strlen(json);
    char *out = malloc(n - fl + tl + 1);
    memcpy(out, json, a);
    memcpy(out + a, to, tl);
    memcpy(out + a + tl, p + fl, n - a - fl + 1);
    return out;
}

TestSuite(cfg_parse);

Test(cfg_parse, qwen35_08b_nested)
{
    struct hf_config c;
    struct hs_err e;
    cr_assert_eq(cfg_parse(cfg_qwen35_08b, &c, &e), HS_OK, "%s", e.msg);
    cr_assert_str_eq(c.model_type, "qwen3_5_text");
    cr_assert_str_eq(c.root_model_type, "qwen3_5");
    cr_assert_str_eq(c.architecture, "Qwen3_5ForConditionalGeneration");
    cr_assert_eq(c.vocab_size, 248320);
    cr_assert_eq(c.hidden_size, 1024);
    cr_assert_eq(c.intermediate_size, 3584);
    cr_assert_eq(c.num_hidden_layers, 24);
    cr_assert_eq(c.num_attention_heads, 8);
    cr_assert_eq(c.num_key_value_heads, 2);
    cr_assert_eq(c.head_dim, 256, "explicit, not hidden/heads (128)");
    cr_assert(c.attn_output_gate);
    cr_assert(!c.attention_bias);
    cr_assert_eq(c.rms_norm_eps, 1e-6);
    cr_assert_eq(c.rope_theta, 1e7);
    cr_assert_eq(c.partial_rotary_factor, 0.25);
    cr_assert_eq(c.n_mrope_section, 3);
    cr_assert(c.mrope_section[0] == 11 && c.mrope_section[1] == 11 && c.mrope_section[2] == 10 && c.mrope_section[3] == 0);
    cr_assert(c.mrope_interleaved);
    cr_assert_eq(c.max_position_embeddings, 262144);
    cr_assert(c.has_layer_types);
    for (int i = 0; i < 24; i++) cr_assert_eq(c.layer_is_full[i], i % 4 == 3, "layer %d", i);
    cr_assert_eq(c.full_attention_interval, 4);
    cr_assert_eq(c.linear_num_key_heads, 16);
    cr_assert_eq(c.linear_num_value_heads, 16);
    cr_assert_eq(c.linear_key_head_dim, 128);
    cr_assert_eq(c.linear_value_head_dim, 128);
    cr_assert_eq(c.linear_conv_kernel_dim, 4);
    cr_assert_str_eq(c.mamba_ssm_dtype, "float32");
    cr_assert_str_eq(c.output_gate_type, "silu");
    cr_assert_eq(c.num_experts, 0);
    cr_assert_eq(c.num_experts_per_tok, 0);
    cr_assert(c.norm_topk_prob);
    cr_assert(!c.has_norm_topk_prob);
    cr_assert_eq(c.decoder_sparse_step, 1);
    for (int i = 0; i < 24; i++) cr_assert(!c.mlp_only_layer[i]);
    cr_assert_eq(c.mtp_num_hidden_layers, 1);
    cr_assert(!c.mtp_use_dedicated_embeddings);
    cr_assert(c.tie_word_embeddings);
    cr_assert_eq(c.n_eos_token_ids, 1);
    cr_assert_eq(c.eos_token_ids[0], 248044);
    cr_assert_eq(c.bos_token_id, -1);
    cr_assert_eq(c.pad_token_id, -1);
    cr_assert_str_eq(c.torch_dtype, "bfloat16");
}

Test(cfg_parse, qwen3_next_flat)
{
    struct hf_config c;
    struct hs_err e;
    cr_assert_eq(cfg_parse(cfg_qwen3_next, &c, &e), HS_OK, "%s", e.msg);
    cr_assert_str_eq(c.model_type, "qwen3_next");
    cr_assert_str_eq(c.root_model_type, "qwen3_next");
    cr_assert_str_eq(c.architecture, "Qwen3NextForCausalLM");
    cr_assert_eq(c.vocab_size, 151936);
    cr_assert_eq(c.num_hidden_layers, 48);
    cr_assert(!c.has_layer_types);
    for (int i = 0; i < 48; i++) cr_assert_eq(c.layer_is_full[i], (i + 1) % 4 == 0, "layer %d", i);
    cr_assert_eq(c.rope_theta, 1e7, "top-level rope_theta");
    cr_assert_eq(c.partial_rotary_factor, 0.25);
    cr_assert_eq(c.n_mrope_section, 3, "default sections");
    cr_assert(!c.mrope_interleaved);
    cr_assert_eq(c.linear_num_value_heads, 32);
    cr_assert_eq(c.num_experts, 512);
    cr_assert_eq(c.num_experts_per_tok, 10);
    cr_assert_eq(c.moe_intermediate_size, 512);
    cr_assert_eq(c.shared_expert_intermediate_size, 512);
    cr_assert(c.norm_topk_prob && c.has_norm_topk_prob);
    cr_assert_eq(c.decoder_sparse_step, 1);
    cr_assert_eq(c.mtp_num_hidden_layers, 0);
    cr_assert_eq(c.max_position_embeddings, 262144);
    cr_assert(!c.tie_word_embeddings);
    cr_assert_eq(c.n_eos_token_ids, 1);
    cr_assert_eq(c.eos_token_ids[0], 151645);
    cr_assert_eq(c.bos_token_id, 151643);
    cr_assert_str_eq(c.torch_dtype, "bfloat16", "torch_dtype when dtype is absent");
    cr_assert_str_eq(c.output_gate_type, "silu");
}

Test(cfg_parse, qwen35_moe_nested)
{
    struct hf_config c;
    struct hs_err e;
    cr_assert_eq(cfg_parse(cfg_qwen35_moe, &c, &e), HS_OK, "%s", e.msg);
    cr_assert_str_eq(c.model_type, "qwen3_5_moe_text");
    cr_assert_str_eq(c.root_model_type, "qwen3_5_moe");
    cr_assert_eq(c.num_experts, 256);
    cr_assert_eq(c.num_experts_per_tok, 8);
    cr_assert(c.norm_topk_prob && !c.has_norm_topk_prob, "absent: renormalise");
    cr_assert_eq(c.intermediate_size, 0);
    cr_assert_eq(c.n_eos_token_ids, 2, "text_config's list wins over the root's");
    cr_assert(c.eos_token_ids[0] == 248044 && c.eos_token_ids[1] == 248046);
    cr_assert_str_eq(c.output_gate_type, "silu", "swish is silu");
    cr_assert(!c.tie_word_embeddings, "root value when text_config has none");
    cr_assert_eq(c.max_position_embeddings, 0, "absent: the architecture's default applies (model/)");
    cr_assert_eq(c.rms_norm_eps, 0, "absent");
}

Test(cfg_parse, defaults_of_a_minimal_config)
{
    struct hf_config c;
    struct hs_err e;
    const char *j = "{\"vocab_size\":100,\"hidden_size\":64,\"num_hidden_layers\":3,\"num_attention_heads\":4,"
                    "\"linear_num_key_heads\":2,\"linear_num_value_heads\":2,\"linear_key_head_dim\":8,"
                    "\"linear_value_head_dim\":8}";
    cr_assert_eq(cfg_parse(j, &c, &e), HS_OK, "%s", e.msg);
    cr_assert_str_eq(c.model_type, "");
    cr_assert_str_eq(c.architecture, "");
    cr_assert_eq(c.num_key_value_heads, 4);
    cr_assert_eq(c.head_dim, 16);
    cr_assert(c.attn_output_gate && !c.attention_bias);
    /* keys with an architecture default are 0 when absent: model/ applies the default */
    cr_assert_eq(c.rope_theta, 0);
    cr_assert_eq(c.partial_rotary_factor, 0);
    cr_assert(c.mrope_section[0] == 11 && c.mrope_section[2] == 10 && c.mrope_section[3] == 0);
    cr_assert_eq(c.full_attention_interval, 0);
    for (int i = 0; i < 3; i++) cr_assert(!c.layer_is_full[i], "no interval, no layer_types: undecided");
    cr_assert_eq(c.linear_conv_kernel_dim, 0);
    cr_assert_str_eq(c.mamba_ssm_dtype, "float32");
    cr_assert_str_eq(c.torch_dtype, "");
    cr_assert_eq(c.n_eos_token_ids, 0);
    cr_assert_eq(c.bos_token_id, -1);
    cr_assert_eq(c.max_position_embeddings, 0);
    /* the same layers without the linear geometry: it is required */
    const char *k = "{\"vocab_size\":100,\"hidden_size\":64,\"num_hidden_layers\":3,\"num_attention_heads\":4}";
    cr_assert_eq(cfg_parse(k, &c, &e), HS_ERR_FORMAT);
    cr_assert(strstr(e.msg, "missing required field 'linear_num_key_heads'"), "%s", e.msg);
}

Test(cfg_parse, interval_and_layer_types)
{
    struct hf_config c;
    struct hs_err e;
    /* interval 3, no layer_types: layers 2, 5 are full */
    const char *j = "{\"vocab_size\":10,\"hidden_size\":8,\"num_hidden_layers\":6,\"num_attention_heads\":2,"
                    "\"full_attention_interval\":3,\"linear_num_key_heads\":1,\"linear_num_value_heads\":2,"
                    "\"linear_key_head_dim\":4,\"linear_value_head_dim\":4}";
    cr_assert_eq(cfg_parse(j, &c, &e), HS_OK, "%s", e.msg);
    const bool want[6] = { false, false, true, false, false, true };
    for (int i = 0; i < 6; i++) cr_assert_eq(c.layer_is_full[i], want[i], "layer %d", i);
    /* layer_types wins over the interval */
    const char *k = "{\"vocab_size\":10,\"hidden_size\":8,\"num_hidden_layers\":3,\"num_attention_heads\":2,"
                    "\"full_attention_interval\":3,\"layer_types\":[\"full_attention\",\"linear_attention\",\"full_attention\"],"
                    "\"linear_num_key_heads\":1,\"linear_num_value_heads\":1,\"linear_key_head_dim\":4,\"linear_value_head_dim\":4}";
    cr_assert_eq(cfg_parse(k, &c, &e), HS_OK, "%s", e.msg);
    cr_assert(c.has_layer_types);
    cr_assert(c.layer_is_full[0] && !c.layer_is_full[1] && c.layer_is_full[2]);
    cr_assert_eq(c.full_attention_interval, 3);
    /* Flash-Next's other spellings of an attention layer */
    const char *q = "{\"vocab_size\":10,\"hidden_size\":8,\"num_hidden_layers\":3,\"num_attention_heads\":2,"
                    "\"layer_types\":[\"linear_attention\",\"deepseek_sparse_attention\",\"hybrid_indexed\"],"
                    "\"linear_num_key_heads\":1,\"linear_num_value_heads\":1,\"linear_key_head_dim\":4,\"linear_value_head_dim\":4}";
    cr_assert_eq(cfg_parse(q, &c, &e), HS_OK, "%s", e.msg);
    cr_assert(!c.layer_is_full[0] && c.layer_is_full[1] && c.layer_is_full[2]);
    /* all full attention: the linear geometry is not needed */
    const char *f = "{\"vocab_size\":10,\"hidden_size\":8,\"num_hidden_layers\":2,\"num_attention_heads\":2,"
                    "\"full_attention_interval\":1}";
    cr_assert_eq(cfg_parse(f, &c, &e), HS_OK, "%s", e.msg);
    cr_assert(c.layer_is_full[0] && c.layer_is_full[1]);
    cr_assert_eq(c.linear_num_key_heads, 0);
}

Test(cfg_parse, rope_and_moe_variants)
{
    struct hf_config c;
    struct hs_err e;
    /* rope_parameters without rope_theta falls back to a top-level value */
    char *j = cfg_edit(cfg_qwen35_08b, "\"rope_theta\": 10000000,", "");
    char *k = cfg_edit(j, "\"mamba_ssm_dtype\"", "\"rope_theta\": 5000000, \"mamba_ssm_dtype\"");
    cr_assert_eq(cfg_parse(k, &c, &e), HS_OK, "%s", e.msg);
    cr_assert_eq(c.rope_theta, 5e6);
    free(j);
    free(k);
    /* older rope_scaling carrying mrope fields */
    j = cfg_edit(cfg_qwen3_next, "\"rope_scaling\":null", "\"rope_scaling\":{\"type\":\"mrope\",\"mrope_section\":[16,24,24,0]}");
    cr_assert_eq(cfg_parse(j, &c, &e), HS_OK, "%s", e.msg);
    cr_assert(c.n_mrope_section == 4 && c.mrope_section[0] == 16 && c.mrope_section[1] == 24);
    cr_assert_eq(c.rope_theta, 1e7);
    free(j);
    /* mlp_only_layers, decoder_sparse_step, sigmoid gate, bools and ids at the root */
    j = cfg_edit(cfg_qwen3_next, "\"mlp_only_layers\":[]", "\"mlp_only_layers\":[0,47],\"output_gate_type\":\"sigmoid\"");
    k = cfg_edit(j, "\"decoder_sparse_step\":1", "\"decoder_sparse_step\":2,\"pad_token_id\":null,\"eos_token_id\":[]");
    free(j);
    j = cfg_edit(k, "\"eos_token_id\":151645,", "");
    cr_assert_eq(cfg_parse(j, &c, &e), HS_OK, "%s", e.msg);
    cr_assert(c.mlp_only_layer[0] && c.mlp_only_layer[47] && !c.mlp_only_layer[1]);
    cr_assert_eq(c.decoder_sparse_step, 2);
    cr_assert_str_eq(c.output_gate_type, "sigmoid");
    cr_assert_eq(c.pad_token_id, -1, "null is absent");
    cr_assert_eq(c.n_eos_token_ids, 0);
    free(j);
    free(k);
    /* tie_word_embeddings: text_config first */
    j = cfg_edit(cfg_qwen35_08b, "\"tie_word_embeddings\": true,\n    \"use_cache\"", "\"tie_word_embeddings\": false,\n    \"use_cache\"");
    cr_assert_eq(cfg_parse(j, &c, &e), HS_OK, "%s", e.msg);
    cr_assert(!c.tie_word_embeddings);
    free(j);
}

Test(cfg_parse, unknown_keys_are_ignored)
{
    struct hf_config c;
    struct hs_err e;
    char *j = cfg_edit(cfg_qwen35_08b, "\"use_cache\": true,", "\"use_cache\": true, \"future\": {\"x\": [1, {}]}, \"quantization\": {\"bits\": 4},");
    cr_assert_eq(cfg_parse(j, &c, &e), HS_OK, "%s", e.msg);
    cr_assert_eq(c.hidden_size, 1024);
    free(j);
}

Test(cfg_parse, load_from_file)
{
    char dir[] = "/tmp/hs_cfg_XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    fputs(cfg_qwen35_08b, f);
    fclose(f);
    struct hf_config c, c2;
    struct hs_err e;
    hs_err_clear(&e);
    int rc = hf_config_load(path, &c, &e);
    unlink(path);
    hs_err_clear(&e);
    int rc2 = hf_config_load(path, &c2, &e);
    rmdir(dir);
    cr_assert_eq(rc, HS_OK);
    cr_assert_eq(c.hidden_size, 1024);
    cr_assert_eq(rc2, HS_ERR_NOT_FOUND, "%s", e.msg);
    cr_assert(strstr(e.msg, "config.json"), "%s", e.msg);
}

/* ---- validation -------------------------------------------------------------------------- */

TestSuite(cfg_errors);

struct cfg_bad {
    const char *from, *to; /* edit of cfg_qwen35_08b */
    int code;
    const char *want;
};

static const struct cfg_bad cfg_bad_cases[] = {
    /* required fields */
    { "\"vocab_size\": 248320", "\"x\": 1", HS_ERR_FORMAT, "missing required field 'text_config.vocab_size'" },
    { "\"hidden_size\": 1024,", "", HS_ERR_FORMAT, "missing required field 'text_config.hidden_size'" },
    { "\"num_hidden_layers\": 24,", "", HS_ERR_FORMAT, "'text_config.num_hidden_layers'" },
    { "\"num_attention_heads\": 8,", "", HS_ERR_FORMAT, "'text_config.num_attention_heads'" },
    { "\"num_attention_heads\": 8,", "\"num_attention_heads\": null,", HS_ERR_FORMAT, "'text_config.num_attention_heads'" },
    { "\"linear_key_head_dim\": 128,", "", HS_ERR_FORMAT, "'text_config.linear_key_head_dim'" },
    { "\"linear_num_key_heads\": 16,", "", HS_ERR_FORMAT, "'text_config.linear_num_key_heads'" },
    { "\"linear_num_value_heads\": 16,", "", HS_ERR_FORMAT, "'text_config.linear_num_value_heads'" },
    { "\"linear_value_head_dim\": 128,", "", HS_ERR_FORMAT, "'text_config.linear_value_head_dim'" },
    /* types */
    { "\"hidden_size\": 1024", "\"hidden_size\": \"1024\"", HS_ERR_FORMAT, "text_config.hidden_size: expected an integer, got a string" },
    { "\"hidden_size\": 1024", "\"hidden_size\": 1024.0", HS_ERR_FORMAT, "hidden_size: expected an integer, got a real number" },
    { "\"head_dim\": 256", "\"head_dim\": [256]", HS_ERR_FORMAT, "head_dim: expected an integer, got an array" },
    { "\"attn_output_gate\": true", "\"attn_output_gate\": 1", HS_ERR_FORMAT, "attn_output_gate: expected a boolean, got an integer" },
    { "\"rms_norm_eps\": 1e-06", "\"rms_norm_eps\": \"1e-6\"", HS_ERR_FORMAT, "rms_norm_eps: expected a number, got a string" },
    { "\"rope_theta\": 10000000", "\"rope_theta\": true", HS_ERR_FORMAT, "text_config.rope_parameters.rope_theta: expected a number" },
    { "\"rope_parameters\": {", "\"rope_parameters\": 5, \"x\": {", HS_ERR_FORMAT, "rope_parameters: expected an object" },
    { "\"mrope_section\": [11, 11, 10]", "\"mrope_section\": [1, 2, 3, 4, 5]", HS_ERR_FORMAT, "mrope_section" },
    { "\"mrope_section\": [11, 11, 10]", "\"mrope_section\": [1, \"2\"]", HS_ERR_FORMAT, "mrope_section[1]" },
    { "\"mrope_interleaved\": true", "\"mrope_interleaved\": \"yes\"", HS_ERR_FORMAT, "mrope_interleaved: expected a boolean" },
    { "\"model_type\": \"qwen3_5_text\"", "\"model_type\": 3", HS_ERR_FORMAT, "text_config.model_type: expected a string" },
    { "\"architectures\": [\"Qwen3_5ForConditionalGeneration\"]", "\"architectures\": \"Q\"", HS_ERR_FORMAT, "architectures: expected an array" },
    { "\"architectures\": [\"Qwen3_5ForConditionalGeneration\"]", "\"architectures\": [7]", HS_ERR_FORMAT, "architectures[0]: expected a string" },
    { "\"tie_word_embeddings\": true,\n    \"use_cache\"", "\"tie_word_embeddings\": \"true\",\n    \"use_cache\"", HS_ERR_FORMAT, "text_config.tie_word_embeddings: expected a boolean" },
    { "\"eos_token_id\": 248044", "\"eos_token_id\": \"</s>\"", HS_ERR_FORMAT, "eos_token_id: expected an integer or an array" },
    { "\"eos_token_id\": 248044", "\"eos_token_id\": [1, \"x\"]", HS_ERR_FORMAT, "eos_token_id[]: expected an integer" },
    { "\"eos_token_id\": 248044", "\"eos_token_id\": [1,2,3,4,5,6,7,8,9]", HS_ERR_LIMIT, "9 ids" },
    { "\"eos_token_id\": 248044", "\"eos_token_id\": -3", HS_ERR_FORMAT, "negative" },
    { "\"eos_token_id\": 248044", "\"bos_token_id\": [1]", HS_ERR_FORMAT, "bos_token_id: expected an integer" },
    { "\"dtype\": \"bfloat16\"", "\"dtype\": 16", HS_ERR_FORMAT, "text_config.dtype: expected a string" },
    { "\"dtype\": \"bfloat16\"", "\"dtype\": \"a-much-too-long-dtype-name\"", HS_ERR_FORMAT, "longer than 15 bytes" },
    { "\"model_type\": \"qwen3_5_text\"", "\"model_type\": \"" "0123456789012345678901234567890123456789012345678901234567890123456789" "\"", HS_ERR_FORMAT, "longer than 63" },
    { "\"mlp_only_layers\": []", "\"mlp_only_layers\": {}", HS_ERR_FORMAT, "mlp_only_layers: expected an array" },
    { "\"mlp_only_layers\": []", "\"mlp_only_layers\": [24]", HS_ERR_FORMAT, "mlp_only_layers[0] is not a layer index" },
    { "\"mtp_use_dedicated_embeddings\": false", "\"mtp_use_dedicated_embeddings\": 0", HS_ERR_FORMAT, "mtp_use_dedicated_embeddings: expected a boolean" },
    { "\"model_type\": \"qwen3_5\",\n  \"text_config\": {", "\"model_type\": \"qwen3_5\", \"text_config\": [], \"x\": {", HS_ERR_FORMAT, "text_config: expected an object, got an array" },
    /* layer kinds */
    { "\"layer_types\": [", "\"layer_types\": [\"full_attention\",", HS_ERR_FORMAT, "layer_types has 25 entries but num_hidden_layers is 24" },
    { "\"num_hidden_layers\": 24", "\"num_hidden_layers\": 23", HS_ERR_FORMAT, "layer_types has 24 entries but num_hidden_layers is 23" },
    { "\"layer_types\": [\"linear_attention\"", "\"layer_types\": [\"sliding_attention\"", HS_ERR_FORMAT, "layer_types[0] is 'sliding_attention'" },
    { "\"layer_types\": [\"linear_attention\"", "\"layer_types\": [3", HS_ERR_FORMAT, "layer_types[0] is an integer" },
    { "\"layer_types\": [", "\"layer_types\": {\"a\": 1}, \"x\": [", HS_ERR_FORMAT, "layer_types: expected an array" },
    { "\"full_attention_interval\": 4", "\"full_attention_interval\": 0", HS_ERR_FORMAT, "full_attention_interval is 0" },
    { "\"num_hidden_layers\": 24", "\"num_hidden_layers\": 257", HS_ERR_LIMIT, "num_hidden_layers is 257" },
    { "\"num_hidden_layers\": 24", "\"num_hidden_layers\": 0", HS_ERR_FORMAT, "num_hidden_layers is 0" },
    /* values */
    { "\"hidden_size\": 1024", "\"hidden_size\": -1024", HS_ERR_FORMAT, "hidden_size is -1024" },
    { "\"vocab_size\": 248320", "\"vocab_size\": 4294967296", HS_ERR_LIMIT, "vocab_size is 4294967296" },
    { "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3", HS_ERR_FORMAT, "num_attention_heads 8 is not a multiple of num_key_value_heads 3" },
    { "\"linear_num_value_heads\": 16", "\"linear_num_value_heads\": 24", HS_ERR_FORMAT, "linear_num_value_heads 24 is not a multiple" },
    { "\"rms_norm_eps\": 1e-06", "\"rms_norm_eps\": 0", HS_ERR_FORMAT, "rms_norm_eps" },
    { "\"partial_rotary_factor\": 0.25", "\"partial_rotary_factor\": 1.5", HS_ERR_FORMAT, "partial_rotary_factor" },
    { "\"rope_theta\": 10000000", "\"rope_theta\": -1", HS_ERR_FORMAT, "rope_theta" },
    { "\"mamba_ssm_dtype\": \"float32\"", "\"mamba_ssm_dtype\": \"bfloat16\"", HS_ERR_UNSUPPORTED, "mamba_ssm_dtype 'bfloat16'" },
    { "\"mamba_ssm_dtype\": \"float32\"", "\"mamba_ssm_dtype\": 32", HS_ERR_FORMAT, "mamba_ssm_dtype: expected a string" },
    { "\"mamba_ssm_dtype\": \"float32\"", "\"output_gate_type\": \"relu\"", HS_ERR_FORMAT, "output_gate_type 'relu'" },
    { "\"mamba_ssm_dtype\": \"float32\"", "\"output_gate_type\": true", HS_ERR_FORMAT, "output_gate_type: expected a string" },
    { "\"mlp_only_layers\": []", "\"num_experts\": 4", HS_ERR_FORMAT, "missing required field 'text_config.num_experts_per_tok'" },
    { "\"mlp_only_layers\": []", "\"num_experts\": 4, \"num_experts_per_tok\": 5, \"moe_intermediate_size\": 8", HS_ERR_FORMAT, "num_experts_per_tok is 5" },
    { "\"mlp_only_layers\": []", "\"num_experts\": 4, \"num_experts_per_tok\": 2", HS_ERR_FORMAT, "'text_config.moe_intermediate_size'" },
    { "\"mlp_only_layers\": []", "\"decoder_sparse_step\": 0", HS_ERR_FORMAT, "decoder_sparse_step is 0" },
    { "\"mtp_num_hidden_layers\": 1", "\"mtp_num_hidden_layers\": -1", HS_ERR_FORMAT, "mtp_num_hidden_layers is -1" },
    /* JSON */
    { "\"hidden_size\": 1024,", "\"hidden_size\": 1024,,", HS_ERR_FORMAT, "cfg.json: JSON, line 14, column" },
    { "\"hidden_size\": 1024,", "\"hidden_size\": 1024, \"hidden_size\": 1024,", HS_ERR_FORMAT, "duplicate" },
};

Test(cfg_errors, each_validation_error)
{
    for (size_t i = 0; i < HS_ARRAY_LEN(cfg_bad_cases); i++) {
        const struct cfg_bad *b = &cfg_bad_cases[i];
        char *j = cfg_edit(cfg_qwen35_08b, b->from, b->to);
        struct hf_config c;
        struct hs_err e;
        int rc = cfg_parse(j, &c, &e);
        cr_expect_eq(rc, b->code, "case %zu (%s): rc %d: %s", i, b->to, rc, e.msg);
        cr_expect(strstr(e.msg, b->want) != NULL, "case %zu: want '%s' in: %s", i, b->want, e.msg);
        cr_expect(strncmp(e.msg, "cfg.json: ", 10) == 0, "case %zu: the file is named: %s", i, e.msg);
        free(j);
    }
}

Test(cfg_errors, not_an_object_and_flat_names)
{
    struct hf_config c;
    struct hs_err e;
    cr_assert_eq(cfg_parse("[1]", &c, &e), HS_ERR_FORMAT);
    cr_assert(strstr(e.msg, "not a JSON object"), "%s", e.msg);
    cr_assert_eq(cfg_parse("", &c, &e), HS_ERR_FORMAT);
    cr_assert(strstr(e.msg, "line"), "%s", e.msg);
    /* a flat config names fields without the text_config. prefix */
    char *j = cfg_edit(cfg_qwen3_next, "\"hidden_size\":2048,", "");
    cr_assert_eq(cfg_parse(j, &c, &e), HS_ERR_FORMAT);
    cr_assert(strstr(e.msg, "missing required field 'hidden_size'"), "%s", e.msg);
    free(j);
    j = cfg_edit(cfg_qwen3_next, "\"rope_theta\":10000000", "\"rope_theta\":\"1e7\"");
    cr_assert_eq(cfg_parse(j, &c, &e), HS_ERR_FORMAT);
    cr_assert(strstr(e.msg, "cfg.json: rope_theta: expected a number, got a string"), "%s", e.msg);
    free(j);
    /* an error leaves no stale state: a good parse after a bad one is complete */
    cr_assert_eq(cfg_parse(cfg_qwen3_next, &c, &e), HS_OK, "%s", e.msg);
    cr_assert_eq(c.num_experts, 512);
}
