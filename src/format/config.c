/* config.c — Hugging Face config.json for the Qwen3.5 / Qwen3.5-MoE / Qwen3-Next text model.
 *
 * Design note
 * -----------
 * The text model's fields live in `text_config` for the multimodal exports (Qwen3.5 and
 * its MoE) and at the root for flat ones (Qwen3-Next, text-only exports); everything in
 * struct hf_config is read from that one object (docs/MODELS.md §1),
 * except the few fields real files keep at either level, which are looked up in
 * text_config first and then at the root: tie_word_embeddings, eos/bos/pad_token_id,
 * dtype / torch_dtype. Unknown keys are ignored: configs carry much we do not use.
 *
 * This file reads keys; it does not know an architecture's defaults. A missing
 * rope_theta, partial_rotary_factor, rms_norm_eps, max_position_embeddings,
 * linear_conv_kernel_dim or full_attention_interval is left 0 and the model applies its
 * architecture's value (struct model_arch_defaults in src/model/arch_*.c). The defaults
 * kept here are the ones that decide how the rest of the file reads (head_dim,
 * num_key_value_heads) or that only refuse (attention_bias, mamba_ssm_dtype).
 *
 * Invariants (a failure is an hs_err naming the file, the field's JSON path and why):
 *   1. Required: vocab_size, hidden_size, num_hidden_layers, num_attention_heads, and the
 *      linear_* GDN geometry when any layer is linear attention (so a config without
 *      linear layers needs none of them).
 *   2. Every field present has its JSON type (integer fields take integers only, no
 *      1.0); null counts as absent for optional fields. Sizes lie in [1, INT32_MAX].
 *   3. Layer kinds come from layer_types when present (length == num_hidden_layers,
 *      entries "linear_attention" / "full_attention", Flash-Next's attention layers also as
 *      "deepseek_sparse_attention" / "hybrid_indexed"), else, when full_attention_interval
 *      is present, layer i is full attention iff (i + 1) % full_attention_interval == 0;
 *      with neither, every layer_is_full is false and the model decides.
 *   4. 1 <= num_hidden_layers <= HF_CONFIG_MAX_LAYERS; num_attention_heads is a multiple
 *      of num_key_value_heads; linear_num_value_heads of linear_num_key_heads.
 *   5. output_gate_type is stored normalised: "silu" (also for "swish") or "sigmoid";
 *      mamba_ssm_dtype is "float32".
 */
#include "format/format_int.h"
#include "sys/sys.h"

#include <inttypes.h>
#include <stddef.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#define CFG_FILE_MAX (UINT64_C(16) << 20)
#define CFG_DIM_MAX INT32_MAX

struct cfg_ctx {
    const char *file;  /* for messages */
    json_t *root;
    json_t *tc;        /* text_config, or root */
    const char *tc_at; /* "text_config." or "" */
    struct hs_err *err;
};

static int cfg_type_err(struct cfg_ctx *c, const char *at, const char *key, const char *want, const json_t *v)
{
    return hs_err_set(c->err, HS_ERR_FORMAT, "%s: %s%s: expected %s, got %s", c->file, at, key, want,
                      format_json_kind(v));
}

static int cfg_missing(struct cfg_ctx *c, const char *at, const char *key)
{
    return hs_err_set(c->err, HS_ERR_FORMAT, "%s: missing required field '%s%s'", c->file, at, key);
}

/* The value of key in obj, NULL when absent or null. */
static json_t *cfg_get(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_null(v) ? NULL : v;
}

/* Integer field in [lo, hi]: *out keeps def when absent; error when absent and required. */
static int cfg_int(struct cfg_ctx *c, json_t *obj, const char *at, const char *key, bool required,
                   int64_t def, int64_t lo, int64_t hi, int64_t *out)
{
    json_t *v = cfg_get(obj, key);
    *out = def;
    if (!v) return required ? cfg_missing(c, at, key) : HS_OK;
    if (!json_is_integer(v)) return cfg_type_err(c, at, key, "an integer", v);
    int64_t x = (int64_t)json_integer_value(v);
    if (x < lo || x > hi)
        return hs_err_set(c->err, x > hi ? HS_ERR_LIMIT : HS_ERR_FORMAT,
                          "%s: %s%s is %" PRId64 ", outside [%" PRId64 ", %" PRId64 "]", c->file, at, key, x, lo, hi);
    *out = x;
    return HS_OK;
}

/* A geometry field: a size in [1, CFG_DIM_MAX] (or [0, ...] when zero_ok). */
static int cfg_dim(struct cfg_ctx *c, const char *key, bool required, int64_t def, bool zero_ok, int64_t *out)
{
    return cfg_int(c, c->tc, c->tc_at, key, required, def, zero_ok ? 0 : 1, CFG_DIM_MAX, out);
}

static int cfg_num(struct cfg_ctx *c, json_t *obj, const char *at, const char *key, double def, double *out,
                   bool *present)
{
    json_t *v = cfg_get(obj, key);
    *out = def;
    if (present) *present = v != NULL;
    if (!v) return HS_OK;
    if (!json_is_number(v)) return cfg_type_err(c, at, key, "a number", v);
    *out = json_number_value(v);
    return HS_OK;
}

static int cfg_bool(struct cfg_ctx *c, json_t *obj, const char *at, const char *key, bool def, bool *out,
                    bool *present)
{
    json_t *v = cfg_get(obj, key);
    *out = def;
    if (present) *present = v != NULL;
    if (!v) return HS_OK;
    if (!json_is_boolean(v)) return cfg_type_err(c, at, key, "a boolean", v);
    *out = json_is_true(v);
    return HS_OK;
}

/* Copy a JSON string value into buf[cap]; too long (or holding a NUL) is an error. */
static int cfg_copy_str(struct cfg_ctx *c, const json_t *v, const char *at, const char *key, char *buf, size_t cap)
{
    if (!json_is_string(v)) return cfg_type_err(c, at, key, "a string", v);
    size_t n = json_string_length(v);
    if (n >= cap || memchr(json_string_value(v), '\0', n))
        return hs_err_set(c->err, HS_ERR_FORMAT, "%s: %s%s: '%.64s' is longer than %zu bytes", c->file, at, key,
                          json_string_value(v), cap - 1);
    memcpy(buf, json_string_value(v), n + 1);
    return HS_OK;
}

/* String field into buf[cap], left as it is when absent; *present tells if it was there. */
static int cfg_str(struct cfg_ctx *c, json_t *obj, const char *at, const char *key, char *buf, size_t cap,
                   bool *present)
{
    json_t *v = cfg_get(obj, key);
    if (present) *present = v != NULL;
    return v ? cfg_copy_str(c, v, at, key, buf, cap) : HS_OK;
}

/* The object for a field kept at either level: text_config first, then the root. */
static json_t *cfg_either(struct cfg_ctx *c, const char *key, const char **at)
{
    *at = c->tc_at;
    if (cfg_get(c->tc, key)) return c->tc;
    *at = "";
    return c->root;
}

/* ---- groups of fields ----------------------------------------------------------------- */

static int cfg_read_identity(struct cfg_ctx *c, struct hf_config *cfg)
{
    bool present = false;
    int rc = cfg_str(c, c->root, "", "model_type", cfg->root_model_type, sizeof cfg->root_model_type, NULL);
    if (rc == HS_OK) rc = cfg_str(c, c->tc, c->tc_at, "model_type", cfg->model_type, sizeof cfg->model_type, &present);
    if (rc != HS_OK) return rc;
    if (!present) memcpy(cfg->model_type, cfg->root_model_type, sizeof cfg->model_type);
    json_t *arch = cfg_get(c->root, "architectures");
    if (arch) {
        if (!json_is_array(arch)) return cfg_type_err(c, "", "architectures", "an array of strings", arch);
        if (json_array_size(arch) > 0) {
            rc = cfg_copy_str(c, json_array_get(arch, 0), "", "architectures[0]", cfg->architecture,
                              sizeof cfg->architecture);
            if (rc != HS_OK) return rc;
        }
    }
    return HS_OK;
}

static int cfg_read_attention(struct cfg_ctx *c, struct hf_config *cfg)
{
    int rc = HS_OK;
    if (rc == HS_OK) rc = cfg_dim(c, "vocab_size", true, 0, false, &cfg->vocab_size);
    if (rc == HS_OK) rc = cfg_dim(c, "hidden_size", true, 0, false, &cfg->hidden_size);
    if (rc == HS_OK) rc = cfg_dim(c, "intermediate_size", false, 0, true, &cfg->intermediate_size);
    if (rc == HS_OK) rc = cfg_int(c, c->tc, c->tc_at, "num_hidden_layers", true, 0, 1, HF_CONFIG_MAX_LAYERS,
                                  &cfg->num_hidden_layers);
    if (rc == HS_OK) rc = cfg_dim(c, "num_attention_heads", true, 0, false, &cfg->num_attention_heads);
    if (rc == HS_OK) rc = cfg_dim(c, "num_key_value_heads", false, cfg->num_attention_heads, false,
                                  &cfg->num_key_value_heads);
    if (rc != HS_OK) return rc;
    if (cfg->num_attention_heads % cfg->num_key_value_heads)
        return hs_err_set(c->err, HS_ERR_FORMAT, "%s: %snum_attention_heads %" PRId64 " is not a multiple of num_key_value_heads %" PRId64,
                          c->file, c->tc_at, cfg->num_attention_heads, cfg->num_key_value_heads);
    if (!cfg_get(c->tc, "head_dim") && cfg->hidden_size % cfg->num_attention_heads)
        return hs_err_set(c->err, HS_ERR_FORMAT, "%s: %shead_dim is absent and hidden_size %" PRId64 " is not a multiple of num_attention_heads %" PRId64,
                          c->file, c->tc_at, cfg->hidden_size, cfg->num_attention_heads);
    rc = cfg_dim(c, "head_dim", false, cfg->hidden_size / cfg->num_attention_heads, false, &cfg->head_dim);
    if (rc == HS_OK) rc = cfg_bool(c, c->tc, c->tc_at, "attn_output_gate", true, &cfg->attn_output_gate, NULL);
    if (rc == HS_OK) rc = cfg_bool(c, c->tc, c->tc_at, "attention_bias", false, &cfg->attention_bias, NULL);
    bool present = false;
    if (rc == HS_OK) rc = cfg_num(c, c->tc, c->tc_at, "rms_norm_eps", 0, &cfg->rms_norm_eps, &present);
    if (rc == HS_OK && present && !(cfg->rms_norm_eps > 0 && cfg->rms_norm_eps < 1))
        rc = hs_err_set(c->err, HS_ERR_FORMAT, "%s: %srms_norm_eps %g is outside (0, 1)", c->file, c->tc_at, cfg->rms_norm_eps);
    if (rc == HS_OK) rc = cfg_int(c, c->tc, c->tc_at, "max_position_embeddings", false, 0, 1, INT64_MAX,
                                  &cfg->max_position_embeddings);
    return rc;
}

/* rope_parameters (current transformers) or the older top-level rope_theta /
 * partial_rotary_factor, with mrope fields in rope_parameters or rope_scaling. */
static int cfg_read_rope(struct cfg_ctx *c, struct hf_config *cfg)
{
    char at[64];
    json_t *rp = cfg_get(c->tc, "rope_parameters");
    const char *rp_key = "rope_parameters";
    if (!rp) { rp = cfg_get(c->tc, "rope_scaling"); rp_key = "rope_scaling"; }
    if (rp && !json_is_object(rp)) return cfg_type_err(c, c->tc_at, rp_key, "an object", rp);
    snprintf(at, sizeof at, "%s%s.", c->tc_at, rp_key);

    bool in_rp = false, has_theta = false, has_prf = false;
    int rc = cfg_num(c, rp, at, "rope_theta", 0, &cfg->rope_theta, &in_rp);
    has_theta = in_rp;
    if (rc == HS_OK && !in_rp) rc = cfg_num(c, c->tc, c->tc_at, "rope_theta", 0, &cfg->rope_theta, &has_theta);
    if (rc == HS_OK) rc = cfg_num(c, rp, at, "partial_rotary_factor", 0, &cfg->partial_rotary_factor, &in_rp);
    has_prf = in_rp;
    if (rc == HS_OK && !in_rp)
        rc = cfg_num(c, c->tc, c->tc_at, "partial_rotary_factor", 0, &cfg->partial_rotary_factor, &has_prf);
    if (rc != HS_OK) return rc;
    if (has_theta && !(cfg->rope_theta > 0))
        return hs_err_set(c->err, HS_ERR_FORMAT, "%s: rope_theta %g is not positive", c->file, cfg->rope_theta);
    if (has_prf && !(cfg->partial_rotary_factor > 0 && cfg->partial_rotary_factor <= 1))
        return hs_err_set(c->err, HS_ERR_FORMAT, "%s: partial_rotary_factor %g is outside (0, 1]", c->file,
                          cfg->partial_rotary_factor);

    static const int def_sections[4] = { 11, 11, 10, 0 };
    memcpy(cfg->mrope_section, def_sections, sizeof def_sections);
    cfg->n_mrope_section = 3;
    json_t *ms = cfg_get(rp, "mrope_section");
    if (ms) {
        if (!json_is_array(ms) || json_array_size(ms) > 4)
            return cfg_type_err(c, at, "mrope_section", "an array of at most 4 integers", ms);
        memset(cfg->mrope_section, 0, sizeof cfg->mrope_section);
        cfg->n_mrope_section = (int)json_array_size(ms);
        for (int i = 0; i < cfg->n_mrope_section; i++) {
            json_t *x = json_array_get(ms, (size_t)i);
            if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) > 4096)
                return hs_err_set(c->err, HS_ERR_FORMAT, "%s: %smrope_section[%d] is not an integer in [0, 4096]",
                                  c->file, at, i);
            cfg->mrope_section[i] = (int)json_integer_value(x);
        }
    }
    return cfg_bool(c, rp, at, "mrope_interleaved", false, &cfg->mrope_interleaved, NULL);
}

static int cfg_read_layers(struct cfg_ctx *c, struct hf_config *cfg)
{
    int64_t n = cfg->num_hidden_layers;
    int rc = cfg_int(c, c->tc, c->tc_at, "full_attention_interval", false, 0, 1, HF_CONFIG_MAX_LAYERS,
                     &cfg->full_attention_interval);
    if (rc != HS_OK) return rc;
    json_t *lt = cfg_get(c->tc, "layer_types");
    cfg->has_layer_types = lt != NULL;
    if (!lt) {
        if (cfg->full_attention_interval > 0)
            for (int64_t i = 0; i < n; i++) cfg->layer_is_full[i] = (i + 1) % cfg->full_attention_interval == 0;
        return HS_OK;
    }
    if (!json_is_array(lt)) return cfg_type_err(c, c->tc_at, "layer_types", "an array of strings", lt);
    if ((int64_t)json_array_size(lt) != n)
        return hs_err_set(c->err, HS_ERR_FORMAT, "%s: %slayer_types has %zu entries but num_hidden_layers is %" PRId64,
                          c->file, c->tc_at, json_array_size(lt), n);
    for (int64_t i = 0; i < n; i++) {
        const char *s = json_string_value(json_array_get(lt, (size_t)i));
        /* transformers' Qwen4Exp config class spells its attention layers (indexer, QSA)
         * deepseek_sparse_attention, and hybrid_indexed where the n-gram embedding also
         * enters; the released config and llama.cpp's converter say full_attention */
        if (s && (strcmp(s, "full_attention") == 0 || strcmp(s, "deepseek_sparse_attention") == 0 ||
                  strcmp(s, "hybrid_indexed") == 0))
            cfg->layer_is_full[i] = true;
        else if (s && strcmp(s, "linear_attention") == 0) cfg->layer_is_full[i] = false;
        else
            return hs_err_set(c->err, HS_ERR_FORMAT, "%s: %slayer_types[%" PRId64 "] is %s%.64s%s, not \"linear_attention\" or \"full_attention\"",
                              c->file, c->tc_at, i, s ? "'" : format_json_kind(json_array_get(lt, (size_t)i)),
                              s ? s : "", s ? "'" : "");
    }
    return HS_OK;
}

static int cfg_read_gdn(struct cfg_ctx *c, struct hf_config *cfg)
{
    /* Without layer_types or an interval the kinds are the architecture's: layer 0 is linear
     * attention under any interval above 1, so the GDN geometry is required. */
    bool any_linear = !cfg->has_layer_types && cfg->full_attention_interval == 0;
    for (int64_t i = 0; i < cfg->num_hidden_layers; i++) any_linear |= !cfg->layer_is_full[i];
    int rc = HS_OK;
    if (rc == HS_OK) rc = cfg_dim(c, "linear_num_key_heads", any_linear, 0, !any_linear, &cfg->linear_num_key_heads);
    if (rc == HS_OK) rc = cfg_dim(c, "linear_num_value_heads", any_linear, 0, !any_linear, &cfg->linear_num_value_heads);
    if (rc == HS_OK) rc = cfg_dim(c, "linear_key_head_dim", any_linear, 0, !any_linear, &cfg->linear_key_head_dim);
    if (rc == HS_OK) rc = cfg_dim(c, "linear_value_head_dim", any_linear, 0, !any_linear, &cfg->linear_value_head_dim);
    if (rc == HS_OK) rc = cfg_dim(c, "linear_conv_kernel_dim", false, 0, false, &cfg->linear_conv_kernel_dim);
    if (rc != HS_OK) return rc;
    if (cfg->linear_num_key_heads > 0 && cfg->linear_num_value_heads % cfg->linear_num_key_heads)
        return hs_err_set(c->err, HS_ERR_FORMAT, "%s: %slinear_num_value_heads %" PRId64 " is not a multiple of linear_num_key_heads %" PRId64,
                          c->file, c->tc_at, cfg->linear_num_value_heads, cfg->linear_num_key_heads);

    strcpy(cfg->mamba_ssm_dtype, "float32");
    rc = cfg_str(c, c->tc, c->tc_at, "mamba_ssm_dtype", cfg->mamba_ssm_dtype, sizeof cfg->mamba_ssm_dtype, NULL);
    if (rc != HS_OK) return rc;
    if (strcmp(cfg->mamba_ssm_dtype, "float32") != 0)
        return hs_err_set(c->err, HS_ERR_UNSUPPORTED, "%s: %smamba_ssm_dtype '%s' is not supported (only float32)",
                          c->file, c->tc_at, cfg->mamba_ssm_dtype);
    char gate[16] = "silu";
    rc = cfg_str(c, c->tc, c->tc_at, "output_gate_type", gate, sizeof gate, NULL);
    if (rc != HS_OK) return rc;
    if (strcmp(gate, "silu") == 0 || strcmp(gate, "swish") == 0) strcpy(cfg->output_gate_type, "silu");
    else if (strcmp(gate, "sigmoid") == 0) strcpy(cfg->output_gate_type, "sigmoid");
    else
        return hs_err_set(c->err, HS_ERR_FORMAT, "%s: %soutput_gate_type '%s' is not silu, swish or sigmoid",
                          c->file, c->tc_at, gate);
    return HS_OK;
}

static int cfg_read_moe(struct cfg_ctx *c, struct hf_config *cfg)
{
    int rc = cfg_dim(c, "num_experts", false, 0, true, &cfg->num_experts);
    bool moe = cfg->num_experts > 0;
    if (rc == HS_OK) rc = cfg_dim(c, "num_experts_per_tok", moe, 0, !moe, &cfg->num_experts_per_tok);
    if (rc == HS_OK && cfg->num_experts_per_tok > cfg->num_experts && moe)
        rc = hs_err_set(c->err, HS_ERR_FORMAT, "%s: %snum_experts_per_tok is %" PRId64 ", more than num_experts %" PRId64,
                        c->file, c->tc_at, cfg->num_experts_per_tok, cfg->num_experts);
    if (rc == HS_OK) rc = cfg_dim(c, "moe_intermediate_size", moe, 0, !moe, &cfg->moe_intermediate_size);
    if (rc == HS_OK) rc = cfg_dim(c, "shared_expert_intermediate_size", false, 0, true,
                                  &cfg->shared_expert_intermediate_size);
    if (rc == HS_OK) rc = cfg_bool(c, c->tc, c->tc_at, "norm_topk_prob", true, &cfg->norm_topk_prob,
                                   &cfg->has_norm_topk_prob);
    if (rc == HS_OK) rc = cfg_int(c, c->tc, c->tc_at, "decoder_sparse_step", false, 1, 1, HF_CONFIG_MAX_LAYERS,
                                  &cfg->decoder_sparse_step);
    if (rc != HS_OK) return rc;
    json_t *mo = cfg_get(c->tc, "mlp_only_layers");
    if (!mo) return HS_OK;
    if (!json_is_array(mo)) return cfg_type_err(c, c->tc_at, "mlp_only_layers", "an array of layer indices", mo);
    for (size_t i = 0; i < json_array_size(mo); i++) {
        json_t *x = json_array_get(mo, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= cfg->num_hidden_layers)
            return hs_err_set(c->err, HS_ERR_FORMAT, "%s: %smlp_only_layers[%zu] is not a layer index in [0, %" PRId64 ")",
                              c->file, c->tc_at, i, cfg->num_hidden_layers);
        cfg->mlp_only_layer[json_integer_value(x)] = true;
    }
    return HS_OK;
}

/* Qwen3.8-Flash-Next's hyper-connections, QSA indexer and hashed n-gram embedding (PLE);
 * all absent in the other architectures (left 0, ple_layer -1). One PLE layer at most:
 * ple_layer_ids is 1-based, as the HF config spells it. */
static int cfg_read_qwen4exp(struct cfg_ctx *c, struct hf_config *cfg)
{
    static const struct { const char *key; size_t off; } dims[] = {
        { "hc_count", offsetof(struct hf_config, hc_count) },
        { "hc_lowrank", offsetof(struct hf_config, hc_lowrank) },
        { "indexer_n_heads", offsetof(struct hf_config, indexer_n_heads) },
        { "indexer_kv_heads", offsetof(struct hf_config, indexer_kv_heads) },
        { "indexer_head_dim", offsetof(struct hf_config, indexer_head_dim) },
        { "indexer_budget", offsetof(struct hf_config, indexer_budget) },
        { "indexer_compress_ratio", offsetof(struct hf_config, indexer_compress_ratio) },
        { "ple_embed_dim", offsetof(struct hf_config, ple_embed_dim) },
        { "ple_conv_kernel_size", offsetof(struct hf_config, ple_conv_kernel_size) },
        { "ngram_size", offsetof(struct hf_config, ngram_size) },
        { "heads_per_ngram", offsetof(struct hf_config, heads_per_ngram) },
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(dims); i++) {
        int rc = cfg_dim(c, dims[i].key, false, 0, true, (int64_t *)((char *)cfg + dims[i].off));
        if (rc != HS_OK) return rc;
    }
    cfg->ple_layer = -1;
    json_t *pl = cfg_get(c->tc, "ple_layer_ids");
    if (!pl) return HS_OK;
    if (!json_is_array(pl)) return cfg_type_err(c, c->tc_at, "ple_layer_ids", "an array of layer numbers", pl);
    if (json_array_size(pl) > 1)
        return hs_err_set(c->err, HS_ERR_UNSUPPORTED, "%s: %sple_layer_ids lists %zu layers (one is supported)",
                          c->file, c->tc_at, json_array_size(pl));
    if (json_array_size(pl) == 0) return HS_OK;
    json_t *x = json_array_get(pl, 0);
    if (!json_is_integer(x) || json_integer_value(x) < 1 || json_integer_value(x) > cfg->num_hidden_layers)
        return hs_err_set(c->err, HS_ERR_FORMAT, "%s: %sple_layer_ids[0] is not a layer number in [1, %" PRId64 "]",
                          c->file, c->tc_at, cfg->num_hidden_layers);
    cfg->ple_layer = (int64_t)json_integer_value(x) - 1;
    return HS_OK;
}

/* A token id field (int, or for eos a list of ints), text_config first then root. */
static int cfg_read_tokens(struct cfg_ctx *c, struct hf_config *cfg)
{
    const char *at;
    json_t *obj = cfg_either(c, "eos_token_id", &at);
    json_t *eos = cfg_get(obj, "eos_token_id");
    if (eos && json_is_integer(eos)) {
        cfg->eos_token_ids[0] = (int64_t)json_integer_value(eos);
        cfg->n_eos_token_ids = 1;
    } else if (eos && json_is_array(eos)) {
        size_t n = json_array_size(eos);
        if (n > HS_ARRAY_LEN(cfg->eos_token_ids))
            return hs_err_set(c->err, HS_ERR_LIMIT, "%s: %seos_token_id lists %zu ids (at most %zu)", c->file, at, n,
                              HS_ARRAY_LEN(cfg->eos_token_ids));
        for (size_t i = 0; i < n; i++) {
            json_t *x = json_array_get(eos, i);
            if (!json_is_integer(x)) return cfg_type_err(c, at, "eos_token_id[]", "an integer", x);
            cfg->eos_token_ids[i] = (int64_t)json_integer_value(x);
        }
        cfg->n_eos_token_ids = (int)n;
    } else if (eos) {
        return cfg_type_err(c, at, "eos_token_id", "an integer or an array of integers", eos);
    }
    for (int i = 0; i < cfg->n_eos_token_ids; i++)
        if (cfg->eos_token_ids[i] < 0)
            return hs_err_set(c->err, HS_ERR_FORMAT, "%s: %seos_token_id %" PRId64 " is negative", c->file, at,
                              cfg->eos_token_ids[i]);
    obj = cfg_either(c, "bos_token_id", &at);
    int rc = cfg_int(c, obj, at, "bos_token_id", false, -1, 0, INT64_MAX, &cfg->bos_token_id);
    if (rc != HS_OK) return rc;
    obj = cfg_either(c, "pad_token_id", &at);
    return cfg_int(c, obj, at, "pad_token_id", false, -1, 0, INT64_MAX, &cfg->pad_token_id);
}

static int cfg_read_misc(struct cfg_ctx *c, struct hf_config *cfg)
{
    const char *at;
    int rc = cfg_int(c, c->tc, c->tc_at, "mtp_num_hidden_layers", false, 0, 0, HF_CONFIG_MAX_LAYERS,
                     &cfg->mtp_num_hidden_layers);
    if (rc == HS_OK) rc = cfg_bool(c, c->tc, c->tc_at, "mtp_use_dedicated_embeddings", false,
                                   &cfg->mtp_use_dedicated_embeddings, NULL);
    json_t *obj = cfg_either(c, "tie_word_embeddings", &at);
    if (rc == HS_OK) rc = cfg_bool(c, obj, at, "tie_word_embeddings", false, &cfg->tie_word_embeddings, NULL);
    if (rc == HS_OK) rc = cfg_read_tokens(c, cfg);
    /* "dtype" is the current name, "torch_dtype" the older one */
    static const char *const dtype_keys[2] = { "dtype", "torch_dtype" };
    json_t *levels[2] = { c->tc, c->root };
    const char *level_at[2] = { c->tc_at, "" };
    bool present = false;
    for (int l = 0; l < 2 && rc == HS_OK && !present; l++)
        for (int k = 0; k < 2 && rc == HS_OK && !present; k++)
            rc = cfg_str(c, levels[l], level_at[l], dtype_keys[k], cfg->torch_dtype, sizeof cfg->torch_dtype, &present);
    return rc;
}

int hf_config_parse(const char *json, size_t len, const char *name, struct hf_config *cfg, struct hs_err *err)
{
    memset(cfg, 0, sizeof *cfg);
    if (!name) name = "config.json";
    json_error_t jerr;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: JSON, line %d, column %d: %s", name, jerr.line, jerr.column,
                          jerr.text);
    struct cfg_ctx c = { .file = name, .root = root, .tc = root, .tc_at = "", .err = err };
    int rc = HS_OK;
    if (!json_is_object(root)) {
        rc = hs_err_set(err, HS_ERR_FORMAT, "%s: the config is %s, not a JSON object", name, format_json_kind(root));
        goto done;
    }
    json_t *tc = cfg_get(root, "text_config");
    if (tc) {
        if (!json_is_object(tc)) { rc = cfg_type_err(&c, "", "text_config", "an object", tc); goto done; }
        c.tc = tc;
        c.tc_at = "text_config.";
    }
    rc = cfg_read_identity(&c, cfg);
    if (rc == HS_OK) rc = cfg_read_attention(&c, cfg);
    if (rc == HS_OK) rc = cfg_read_rope(&c, cfg);
    if (rc == HS_OK) rc = cfg_read_layers(&c, cfg);
    if (rc == HS_OK) rc = cfg_read_gdn(&c, cfg);
    if (rc == HS_OK) rc = cfg_read_moe(&c, cfg);
    if (rc == HS_OK) rc = cfg_read_qwen4exp(&c, cfg);
    if (rc == HS_OK) rc = cfg_read_misc(&c, cfg);
done:
    json_decref(root);
    return rc;
}

int hf_config_load(const char *path, struct hf_config *cfg, struct hs_err *err)
{
    char *buf;
    size_t len;
    memset(cfg, 0, sizeof *cfg);
    int rc = sys_file_read_all(path, CFG_FILE_MAX, &buf, &len, err);
    if (rc != HS_OK) return rc;
    rc = hf_config_parse(buf, len, path, cfg, err);
    hs_free(buf);
    return rc;
}
