/* test_mkmodel.c — `headstart mkmodel`: determinism, the HF and GGUF layouts our readers see,
 * the GGUF conventions restated from docs/MODELS.md §8.3 (and checked
 * value by value against the HF file of the same seed), Q8_0 blocks, option validation,
 * and that model_load binds both formats of one seed to the same weights. */
#include <criterion/criterion.h>

#include "base/base.h"
#include "format/format.h"
#include "kernels/kernels.h"
#include "mkmodel/mkmodel.h"
#include "model/model.h"
#include "sys/sys.h"

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern const char *const hs_chat_template_qwen35;

/* The tiny preset's geometry (model.h / mkmodel.c): 4 layers, layer 3 full attention. */
enum { T_H = 64, T_NH = 4, T_NKV = 2, T_HD = 32, T_FF = 128, T_HK = 2, T_HV = 4, T_D = 32,
       T_K = 4, T_E = 4, T_EU = 2, T_IE = 32, T_C = 2 * T_HK * T_D + T_HV * T_D };

static char tmpdir[64];
static char tpl_path[128];

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb; (void)flag; (void)f;
    return remove(p);
}

static void setup(void)
{
    strcpy(tmpdir, "/tmp/hs-mkmodel-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
    snprintf(tpl_path, sizeof(tpl_path), "%s/chat.jinja", tmpdir);
    static const char tpl[] = "{%- for m in messages %}<|im_start|>{{ m.role }}\n"
                              "{{ m.content }}<|im_end|>\n{%- endfor %}";
    FILE *f = fopen(tpl_path, "w");
    cr_assert_not_null(f);
    fputs(tpl, f);
    fclose(f);
}

static void teardown(void)
{
    nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static const char *tp(char *buf, const char *name)
{
    snprintf(buf, 160, "%s/%s", tmpdir, name);
    return buf;
}

static void opts(struct mkmodel_opts *o, enum model_arch a, enum dtype dt, uint64_t seed,
                 const char *out)
{
    mkmodel_opts_default(o);
    o->arch = a;
    o->dtype = dt;
    o->seed = seed;
    o->chat_template = tpl_path;
    o->out = out;
}

static void make(enum model_arch a, enum dtype dt, uint64_t seed, const char *out)
{
    struct mkmodel_opts o;
    opts(&o, a, dt, seed, out);
    struct hs_err err;
    hs_err_clear(&err);
    int rc = mkmodel_write(&o, &err);
    cr_assert_eq(rc, HS_OK, "mkmodel %s: %s", out, err.msg);
}

static bool same_file(const char *a, const char *b)
{
    struct sys_map ma, mb;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(sys_file_map(a, &ma, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(sys_file_map(b, &mb, &err), HS_OK, "%s", err.msg);
    bool same = ma.len == mb.len && (ma.len == 0 || !memcmp(ma.data, mb.data, ma.len));
    sys_file_unmap(&ma);
    sys_file_unmap(&mb);
    return same;
}

static float f32_at(const struct tensor_view *v, int64_t i)
{
    float x;
    memcpy(&x, (const uint8_t *)v->data + 4 * i, 4);
    return x;
}

static const struct tensor_view *need(const struct tensor_set *ts, const char *name,
                                      enum dtype dt, int n_dims, const int64_t *shape)
{
    const struct tensor_view *v = tensor_set_find(ts, name);
    cr_assert_not_null(v, "tensor %s missing", name);
    cr_assert_eq(v->dtype, dt, "%s: dtype %s, want %s", name, dtype_info(v->dtype)->name,
                 dtype_info(dt)->name);
    cr_assert_eq(v->n_dims, n_dims, "%s: %d dims, want %d", name, v->n_dims, n_dims);
    for (int d = 0; d < n_dims; d++)
        cr_assert_eq(v->shape[d], shape[d], "%s: dim %d is %lld, want %lld", name, d,
                     (long long)v->shape[d], (long long)shape[d]);
    return v;
}

#define SHAPE(...) ((const int64_t[]){ __VA_ARGS__ })
#define NEED(ts, name, dt, ...) \
    need(ts, name, dt, (int)(sizeof(SHAPE(__VA_ARGS__)) / sizeof(int64_t)), SHAPE(__VA_ARGS__))

/* Grouped value head h (key head h / r) -> its index in a tiled GGUF (§8.3). */
static int64_t tiled(int64_t h)
{
    const int64_t r = T_HV / T_HK;
    return (h % r) * T_HK + h / r;
}

/* ---- determinism ------------------------------------------------------------------------ */

TestSuite(mkmodel_write, .init = setup, .fini = teardown, .timeout = 120);

Test(mkmodel_write, same_seed_same_bytes_other_seed_other_bytes)
{
    char a[160], b[160], c[160], x[320], y[320];
    make(MODEL_ARCH_QWEN35, DTYPE_Q8_0, 5, tp(a, "a.gguf"));
    make(MODEL_ARCH_QWEN35, DTYPE_Q8_0, 5, tp(b, "b.gguf"));
    make(MODEL_ARCH_QWEN35, DTYPE_Q8_0, 6, tp(c, "c.gguf"));
    cr_assert(same_file(a, b), "same options wrote different GGUF bytes");
    cr_assert(!same_file(a, c), "seeds 5 and 6 wrote the same GGUF");

    make(MODEL_ARCH_QWEN3NEXT, DTYPE_BF16, 5, tp(a, "hf-a"));
    make(MODEL_ARCH_QWEN3NEXT, DTYPE_BF16, 5, tp(b, "hf-b"));
    make(MODEL_ARCH_QWEN3NEXT, DTYPE_BF16, 6, tp(c, "hf-c"));
    static const char *files[] = { "config.json", "model.safetensors", "tokenizer.json",
                                   "tokenizer_config.json" };
    for (size_t i = 0; i < HS_ARRAY_LEN(files); i++) {
        snprintf(x, sizeof(x), "%s/%s", a, files[i]);
        snprintf(y, sizeof(y), "%s/%s", b, files[i]);
        cr_assert(same_file(x, y), "%s differs between two identical runs", files[i]);
    }
    snprintf(x, sizeof(x), "%s/model.safetensors", a);
    snprintf(y, sizeof(y), "%s/model.safetensors", c);
    cr_assert(!same_file(x, y), "seeds 5 and 6 wrote the same weights");
    snprintf(x, sizeof(x), "%s/config.json", a);
    snprintf(y, sizeof(y), "%s/config.json", c);
    cr_assert(same_file(x, y), "the seed changed config.json");
}

/* ---- what our readers see: HF ---------------------------------------------------------- */

static void check_hf(enum model_arch arch, int want_tensors)
{
    char dir[160], path[320];
    make(arch, DTYPE_F16, 1, tp(dir, "hf"));
    struct hs_err err;
    hs_err_clear(&err);

    struct hf_config cfg;
    snprintf(path, sizeof(path), "%s/config.json", dir);
    cr_assert_eq(hf_config_load(path, &cfg, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(cfg.hidden_size, T_H);
    cr_assert_eq(cfg.num_hidden_layers, 4);
    cr_assert_eq(cfg.num_attention_heads, T_NH);
    cr_assert_eq(cfg.num_key_value_heads, T_NKV);
    cr_assert_eq(cfg.head_dim, T_HD);
    cr_assert_eq(cfg.linear_num_key_heads, T_HK);
    cr_assert_eq(cfg.linear_num_value_heads, T_HV);
    cr_assert_eq(cfg.linear_key_head_dim, T_D);
    cr_assert_eq(cfg.linear_value_head_dim, T_D);
    cr_assert_eq(cfg.linear_conv_kernel_dim, T_K);
    cr_assert(!cfg.layer_is_full[0] && !cfg.layer_is_full[1] && !cfg.layer_is_full[2]);
    cr_assert(cfg.layer_is_full[3]);
    cr_assert_float_eq(cfg.partial_rotary_factor, 0.25, 1e-12);
    cr_assert_float_eq(cfg.rope_theta, 1e7, 1e-3);
    cr_assert_str_eq(cfg.torch_dtype, "float16");
    cr_assert_eq(cfg.tie_word_embeddings, arch == MODEL_ARCH_QWEN35);
    if (arch == MODEL_ARCH_QWEN3NEXT) {
        cr_assert_str_eq(cfg.model_type, "qwen3_next");
        cr_assert_str_eq(cfg.architecture, "Qwen3NextForCausalLM");
    } else {
        cr_assert_str_eq(cfg.root_model_type, arch == MODEL_ARCH_QWEN35 ? "qwen3_5" : "qwen3_5_moe");
        cr_assert_str_eq(cfg.model_type, arch == MODEL_ARCH_QWEN35 ? "qwen3_5_text" : "qwen3_5_moe_text");
        cr_assert_eq(cfg.n_mrope_section, 3);
        cr_assert(cfg.mrope_interleaved);
    }
    if (arch == MODEL_ARCH_QWEN35) {
        cr_assert_eq(cfg.intermediate_size, T_FF);
        cr_assert_eq(cfg.num_experts, 0);
    } else {
        cr_assert_eq(cfg.num_experts, T_E);
        cr_assert_eq(cfg.num_experts_per_tok, T_EU);
        cr_assert_eq(cfg.moe_intermediate_size, T_IE);
        cr_assert_eq(cfg.shared_expert_intermediate_size, T_IE);
    }

    struct tensor_set *ts = NULL;
    cr_assert_eq(safetensors_open(dir, &ts, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(tensor_set_count(ts), want_tensors, "%d tensors, want %d",
                 tensor_set_count(ts), want_tensors);
    const char *P = arch == MODEL_ARCH_QWEN3NEXT ? "model." : "model.language_model.";
    char n[160];
#define HN(fmt) (snprintf(n, sizeof(n), "%s" fmt, P), n)
    NEED(ts, HN("embed_tokens.weight"), DTYPE_F16, cfg.vocab_size, T_H);
    NEED(ts, HN("norm.weight"), DTYPE_F32, T_H);
    NEED(ts, HN("layers.0.input_layernorm.weight"), DTYPE_F32, T_H);
    NEED(ts, HN("layers.0.linear_attn.conv1d.weight"), DTYPE_F32, T_C, 1, T_K);
    NEED(ts, HN("layers.0.linear_attn.A_log"), DTYPE_F32, T_HV);
    NEED(ts, HN("layers.0.linear_attn.dt_bias"), DTYPE_F32, T_HV);
    NEED(ts, HN("layers.0.linear_attn.norm.weight"), DTYPE_F32, T_D);
    NEED(ts, HN("layers.0.linear_attn.out_proj.weight"), DTYPE_F16, T_H, T_HV * T_D);
    NEED(ts, HN("layers.3.self_attn.q_proj.weight"), DTYPE_F16, 2 * T_NH * T_HD, T_H);
    NEED(ts, HN("layers.3.self_attn.k_proj.weight"), DTYPE_F16, T_NKV * T_HD, T_H);
    NEED(ts, HN("layers.3.self_attn.o_proj.weight"), DTYPE_F16, T_H, T_NH * T_HD);
    NEED(ts, HN("layers.3.self_attn.q_norm.weight"), DTYPE_F32, T_HD);
    cr_assert_null(tensor_set_find(ts, HN("layers.3.linear_attn.A_log")));
    cr_assert_null(tensor_set_find(ts, HN("layers.0.self_attn.q_proj.weight")));
    if (arch == MODEL_ARCH_QWEN3NEXT) {
        NEED(ts, HN("layers.0.linear_attn.in_proj_qkvz.weight"), DTYPE_F16, T_C + T_HV * T_D, T_H);
        NEED(ts, HN("layers.0.linear_attn.in_proj_ba.weight"), DTYPE_F16, 2 * T_HV, T_H);
        NEED(ts, HN("layers.2.mlp.experts.3.down_proj.weight"), DTYPE_F16, T_H, T_IE);
        NEED(ts, HN("layers.2.mlp.experts.0.gate_proj.weight"), DTYPE_F16, T_IE, T_H);
    } else {
        NEED(ts, HN("layers.0.linear_attn.in_proj_qkv.weight"), DTYPE_F16, T_C, T_H);
        NEED(ts, HN("layers.0.linear_attn.in_proj_z.weight"), DTYPE_F16, T_HV * T_D, T_H);
        NEED(ts, HN("layers.0.linear_attn.in_proj_b.weight"), DTYPE_F16, T_HV, T_H);
        NEED(ts, HN("layers.0.linear_attn.in_proj_a.weight"), DTYPE_F16, T_HV, T_H);
    }
    if (arch == MODEL_ARCH_QWEN35) {
        NEED(ts, HN("layers.1.mlp.gate_proj.weight"), DTYPE_F16, T_FF, T_H);
        NEED(ts, HN("layers.1.mlp.down_proj.weight"), DTYPE_F16, T_H, T_FF);
        cr_assert_null(tensor_set_find(ts, "lm_head.weight"), "tied model has an lm_head");
    } else {
        NEED(ts, HN("layers.1.mlp.gate.weight"), DTYPE_F16, T_E, T_H);
        NEED(ts, HN("layers.1.mlp.shared_expert.up_proj.weight"), DTYPE_F16, T_IE, T_H);
        NEED(ts, HN("layers.1.mlp.shared_expert_gate.weight"), DTYPE_F32, 1, T_H);
        NEED(ts, "lm_head.weight", DTYPE_F16, cfg.vocab_size, T_H);
    }
    if (arch == MODEL_ARCH_QWEN35MOE) {
        NEED(ts, HN("layers.1.mlp.experts.gate_up_proj"), DTYPE_F16, T_E, 2 * T_IE, T_H);
        NEED(ts, HN("layers.1.mlp.experts.down_proj"), DTYPE_F16, T_E, T_H, T_IE);
    }
#undef HN
    tensor_set_free(ts);

    /* tokenizer.json reads back, with the vocabulary config.json announces (or fewer). */
    struct hf_tokenizer tok;
    memset(&tok, 0, sizeof(tok));
    snprintf(path, sizeof(path), "%s/tokenizer.json", dir);
    cr_assert_eq(hf_tokenizer_load(path, &tok, &err), HS_OK, "%s", err.msg);
    cr_assert(tok.n_vocab > 256 && tok.n_vocab <= cfg.vocab_size);
    hf_tokenizer_free(&tok);
    char *tc = NULL;
    size_t tc_len;
    snprintf(path, sizeof(path), "%s/tokenizer_config.json", dir);
    cr_assert_eq(sys_file_read_all(path, 1 << 20, &tc, &tc_len, &err), HS_OK, "%s", err.msg);
    cr_assert_not_null(strstr(tc, "chat_template"));
    cr_assert_not_null(strstr(tc, "m.content"), "our --chat-template is not in tokenizer_config.json");
    hs_free(tc);
}

/* tiny: 3 GDN layers + 1 attention layer. qwen35: 2 + 3*14 + 11; qwen35moe: 3 + 3*18 + 15;
 * qwen3next: 3 + 3*26 + 25 (12 per-expert tensors per layer). */
Test(mkmodel_write, hf_layout_qwen35) { check_hf(MODEL_ARCH_QWEN35, 55); }
Test(mkmodel_write, hf_layout_qwen35moe) { check_hf(MODEL_ARCH_QWEN35MOE, 72); }
Test(mkmodel_write, hf_layout_qwen3next) { check_hf(MODEL_ARCH_QWEN3NEXT, 106); }

/* ---- what our readers see: GGUF -------------------------------------------------------- */

static uint32_t u32key(const struct gguf_file *g, const char *arch, const char *key)
{
    char k[128];
    snprintf(k, sizeof(k), "%s.%s", arch, key);
    uint32_t v = 0;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(gguf_get_u32(g, k, &v, &err), HS_OK, "%s", err.msg);
    return v;
}

static void check_gguf(enum model_arch arch, int want_tensors)
{
    char path[160];
    make(arch, DTYPE_Q8_0, 1, tp(path, "m.gguf"));
    const char *an = model_arch_name(arch);
    struct hs_err err;
    hs_err_clear(&err);
    struct gguf_file *g = NULL;
    cr_assert_eq(gguf_open(path, &g, &err), HS_OK, "%s", err.msg);

    char *s = NULL;
    cr_assert_eq(gguf_get_str(g, "general.architecture", &s, &err), HS_OK, "%s", err.msg);
    cr_assert_str_eq(s, an);
    hs_free(s);
    cr_assert_eq(u32key(g, an, "block_count"), 4);
    cr_assert_eq(u32key(g, an, "embedding_length"), T_H);
    cr_assert_eq(u32key(g, an, "attention.head_count"), T_NH);
    cr_assert_eq(u32key(g, an, "attention.head_count_kv"), T_NKV);
    cr_assert_eq(u32key(g, an, "attention.key_length"), T_HD);
    cr_assert_eq(u32key(g, an, "attention.value_length"), T_HD);
    cr_assert_eq(u32key(g, an, "rope.dimension_count"), T_HD / 4);
    cr_assert_eq(u32key(g, an, "ssm.conv_kernel"), T_K);
    cr_assert_eq(u32key(g, an, "ssm.state_size"), T_D);
    cr_assert_eq(u32key(g, an, "ssm.group_count"), T_HK);
    cr_assert_eq(u32key(g, an, "ssm.time_step_rank"), T_HV);
    cr_assert_eq(u32key(g, an, "ssm.inner_size"), T_HV * T_D);
    cr_assert_eq(u32key(g, an, "full_attention_interval"), 4);
    cr_assert_eq(u32key(g, an, "context_length"), 4096);
    char k[128];
    float eps = 0;
    snprintf(k, sizeof(k), "%s.attention.layer_norm_rms_epsilon", an);
    cr_assert_eq(gguf_get_f32(g, k, &eps, &err), HS_OK, "%s", err.msg);
    cr_assert_float_eq(eps, 1e-6f, 1e-12f);
    snprintf(k, sizeof(k), "%s.rope.dimension_sections", an);
    const struct gguf_value *items;
    uint64_t n;
    if (arch == MODEL_ARCH_QWEN3NEXT) {
        cr_assert_null(gguf_find(g, k));
    } else {
        cr_assert_eq(gguf_get_arr(g, k, GGUF_TYPE_INT32, &items, &n, &err), HS_OK, "%s", err.msg);
        cr_assert_eq(n, 4);
        cr_assert(items[0].v.i == 11 && items[1].v.i == 11 && items[2].v.i == 10 && items[3].v.i == 0);
    }
    snprintf(k, sizeof(k), "%s.feed_forward_length", an);
    if (arch == MODEL_ARCH_QWEN35) {
        cr_assert_eq(u32key(g, an, "feed_forward_length"), T_FF);
    } else {
        cr_assert_null(gguf_find(g, k));
        cr_assert_eq(u32key(g, an, "expert_count"), T_E);
        cr_assert_eq(u32key(g, an, "expert_used_count"), T_EU);
        cr_assert_eq(u32key(g, an, "expert_feed_forward_length"), T_IE);
        cr_assert_eq(u32key(g, an, "expert_shared_feed_forward_length"), T_IE);
    }
    cr_assert_eq(gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &items, &n, &err),
                 HS_OK, "%s", err.msg);
    cr_assert_not_null(gguf_find(g, "tokenizer.chat_template"));

    const struct tensor_set *ts = gguf_tensors(g);
    cr_assert_eq(tensor_set_count(ts), want_tensors, "%d tensors, want %d",
                 tensor_set_count(ts), want_tensors);
    const int64_t V = (int64_t)n; /* embedding rows == vocabulary entries */
    NEED(ts, "token_embd.weight", DTYPE_Q8_0, V, T_H);
    NEED(ts, "output_norm.weight", DTYPE_F32, T_H);
    if (arch == MODEL_ARCH_QWEN35) cr_assert_null(tensor_set_find(ts, "output.weight"));
    else NEED(ts, "output.weight", DTYPE_Q8_0, V, T_H);
    NEED(ts, "blk.0.attn_norm.weight", DTYPE_F32, T_H);
    NEED(ts, "blk.0.post_attention_norm.weight", DTYPE_F32, T_H);
    NEED(ts, "blk.0.attn_qkv.weight", DTYPE_Q8_0, T_C, T_H);
    NEED(ts, "blk.0.attn_gate.weight", DTYPE_Q8_0, T_HV * T_D, T_H);
    NEED(ts, "blk.0.ssm_conv1d.weight", DTYPE_F32, T_C, T_K);
    NEED(ts, "blk.0.ssm_dt.bias", DTYPE_F32, T_HV);
    NEED(ts, "blk.0.ssm_a", DTYPE_F32, T_HV);
    NEED(ts, "blk.0.ssm_norm.weight", DTYPE_F32, T_D);
    NEED(ts, "blk.0.ssm_out.weight", DTYPE_Q8_0, T_H, T_HV * T_D);
    NEED(ts, "blk.3.attn_q.weight", DTYPE_Q8_0, 2 * T_NH * T_HD, T_H);
    NEED(ts, "blk.3.attn_k.weight", DTYPE_Q8_0, T_NKV * T_HD, T_H);
    NEED(ts, "blk.3.attn_v.weight", DTYPE_Q8_0, T_NKV * T_HD, T_H);
    NEED(ts, "blk.3.attn_output.weight", DTYPE_Q8_0, T_H, T_NH * T_HD);
    NEED(ts, "blk.3.attn_q_norm.weight", DTYPE_F32, T_HD);
    NEED(ts, "blk.3.attn_k_norm.weight", DTYPE_F32, T_HD);
    cr_assert_null(tensor_set_find(ts, "blk.3.ssm_a"));
    if (arch == MODEL_ARCH_QWEN3NEXT) {
        NEED(ts, "blk.0.ssm_ba.weight", DTYPE_Q8_0, 2 * T_HV, T_H);
        cr_assert_null(tensor_set_find(ts, "blk.0.ssm_beta.weight"));
    } else {
        NEED(ts, "blk.0.ssm_beta.weight", DTYPE_Q8_0, T_HV, T_H);
        NEED(ts, "blk.0.ssm_alpha.weight", DTYPE_Q8_0, T_HV, T_H);
    }
    if (arch == MODEL_ARCH_QWEN35) {
        NEED(ts, "blk.2.ffn_gate.weight", DTYPE_Q8_0, T_FF, T_H);
        NEED(ts, "blk.2.ffn_up.weight", DTYPE_Q8_0, T_FF, T_H);
        NEED(ts, "blk.2.ffn_down.weight", DTYPE_Q8_0, T_H, T_FF);
    } else {
        NEED(ts, "blk.2.ffn_gate_inp.weight", DTYPE_Q8_0, T_E, T_H);
        NEED(ts, "blk.2.ffn_gate_exps.weight", DTYPE_Q8_0, T_E, T_IE, T_H);
        NEED(ts, "blk.2.ffn_up_exps.weight", DTYPE_Q8_0, T_E, T_IE, T_H);
        NEED(ts, "blk.2.ffn_down_exps.weight", DTYPE_Q8_0, T_E, T_H, T_IE);
        NEED(ts, "blk.2.ffn_gate_shexp.weight", DTYPE_Q8_0, T_IE, T_H);
        NEED(ts, "blk.2.ffn_down_shexp.weight", DTYPE_Q8_0, T_H, T_IE);
        NEED(ts, "blk.2.ffn_gate_inp_shexp.weight", DTYPE_F32, T_H);
    }
    gguf_close(g);
}

/* qwen35: same 55 tensors as HF; qwen35moe: gate_up split (+1 per layer) = 76; qwen3next:
 * qkvz split (+1 per GDN layer), 12 expert tensors stacked into 3 per layer = 73. */
Test(mkmodel_write, gguf_layout_qwen35) { check_gguf(MODEL_ARCH_QWEN35, 55); }
Test(mkmodel_write, gguf_layout_qwen35moe) { check_gguf(MODEL_ARCH_QWEN35MOE, 76); }
Test(mkmodel_write, gguf_layout_qwen3next) { check_gguf(MODEL_ARCH_QWEN3NEXT, 73); }

/* ---- the GGUF conventions, value by value against the HF file of the same seed ---------- */

struct pair {
    struct tensor_set *hf;
    struct gguf_file *g;
    const struct tensor_set *gt;
    const char *P;
};

static void pair_open(struct pair *p, enum model_arch arch, enum dtype dt)
{
    char hf[160], gg[160];
    make(arch, dt, 11, tp(hf, "pair-hf"));
    make(arch, dt, 11, tp(gg, "pair.gguf"));
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(safetensors_open(hf, &p->hf, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(gguf_open(gg, &p->g, &err), HS_OK, "%s", err.msg);
    p->gt = gguf_tensors(p->g);
    p->P = arch == MODEL_ARCH_QWEN3NEXT ? "model." : "model.language_model.";
}

static void pair_close(struct pair *p)
{
    tensor_set_free(p->hf);
    gguf_close(p->g);
}

static const struct tensor_view *hf_t(const struct pair *p, const char *tail)
{
    char n[200];
    snprintf(n, sizeof(n), "%s%s", tail[0] == '!' ? "" : p->P, tail + (tail[0] == '!'));
    const struct tensor_view *v = tensor_set_find(p->hf, n);
    cr_assert_not_null(v, "HF tensor %s missing", n);
    return v;
}

static const struct tensor_view *gg_t(const struct pair *p, const char *name)
{
    const struct tensor_view *v = tensor_set_find(p->gt, name);
    cr_assert_not_null(v, "GGUF tensor %s missing", name);
    return v;
}

/* Row r of a 2-D (or flattened) tensor as bytes. */
static const uint8_t *row_at(const struct tensor_view *v, int64_t r)
{
    uint64_t rb;
    cr_assert(dtype_row_bytes(v->dtype, (uint64_t)v->shape[v->n_dims - 1], &rb));
    return (const uint8_t *)v->data + (uint64_t)r * rb;
}

static void same_rows(const struct tensor_view *a, int64_t ra, const struct tensor_view *b,
                      int64_t rb, int64_t n_rows, const char *what)
{
    uint64_t bytes;
    cr_assert(dtype_row_bytes(a->dtype, (uint64_t)a->shape[a->n_dims - 1], &bytes));
    for (int64_t i = 0; i < n_rows; i++)
        cr_assert(!memcmp(row_at(a, ra + i), row_at(b, rb + i), bytes),
                  "%s: row %lld of %s differs from row %lld of %s", what, (long long)(ra + i),
                  a->name, (long long)(rb + i), b->name);
}

static void check_norm_folded(const struct pair *p, const char *hf_tail, const char *gguf)
{
    const struct tensor_view *h = hf_t(p, hf_tail), *g = gg_t(p, gguf);
    int64_t n = (int64_t)tensor_n_elems(h);
    cr_assert_eq((int64_t)tensor_n_elems(g), n);
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(f32_at(g, i), 1.0f + f32_at(h, i), "%s[%lld] is not 1 + %s", gguf,
                     (long long)i, h->name);
}

static void check_conventions(enum model_arch arch)
{
    struct pair p;
    pair_open(&p, arch, DTYPE_F32);
    const bool tile = arch != MODEL_ARCH_QWEN3NEXT; /* qwen35 GGUFs tile value heads */
    const int64_t r = T_HV / T_HK, QK = 2 * T_HK * T_D;
    char n[128];

    same_rows(hf_t(&p, "embed_tokens.weight"), 0, gg_t(&p, "token_embd.weight"), 0,
              gg_t(&p, "token_embd.weight")->shape[0], "token_embd");
    check_norm_folded(&p, "norm.weight", "output_norm.weight");
    check_norm_folded(&p, "layers.1.input_layernorm.weight", "blk.1.attn_norm.weight");
    check_norm_folded(&p, "layers.3.post_attention_layernorm.weight", "blk.3.post_attention_norm.weight");
    check_norm_folded(&p, "layers.3.self_attn.q_norm.weight", "blk.3.attn_q_norm.weight");
    check_norm_folded(&p, "layers.3.self_attn.k_norm.weight", "blk.3.attn_k_norm.weight");
    same_rows(hf_t(&p, "layers.3.self_attn.q_proj.weight"), 0, gg_t(&p, "blk.3.attn_q.weight"), 0,
              2 * T_NH * T_HD, "attn_q (query+gate interleaved per head, unchanged)");
    same_rows(hf_t(&p, "layers.3.self_attn.o_proj.weight"), 0, gg_t(&p, "blk.3.attn_output.weight"),
              0, T_H, "attn_output");

    /* GDN layer 0 */
    const struct tensor_view *ssm_norm = gg_t(&p, "blk.0.ssm_norm.weight");
    const struct tensor_view *hf_norm = hf_t(&p, "layers.0.linear_attn.norm.weight");
    for (int64_t i = 0; i < T_D; i++)
        cr_assert_eq(f32_at(ssm_norm, i), f32_at(hf_norm, i), "ssm_norm must not be folded");
    const struct tensor_view *a_log = hf_t(&p, "layers.0.linear_attn.A_log");
    const struct tensor_view *dt = hf_t(&p, "layers.0.linear_attn.dt_bias");
    const struct tensor_view *ssm_a = gg_t(&p, "blk.0.ssm_a"), *ssm_dt = gg_t(&p, "blk.0.ssm_dt.bias");
    for (int64_t h = 0; h < T_HV; h++) {
        int64_t gh = tile ? tiled(h) : h;
        cr_assert_eq(f32_at(ssm_a, gh), -expf(f32_at(a_log, h)), "ssm_a[%lld]", (long long)gh);
        cr_assert(f32_at(ssm_a, gh) < 0.0f && expf(f32_at(a_log, h)) > 0.0f);
        cr_assert_eq(f32_at(ssm_dt, gh), f32_at(dt, h), "ssm_dt.bias[%lld]", (long long)gh);
    }
    const struct tensor_view *conv_h = hf_t(&p, "layers.0.linear_attn.conv1d.weight");
    const struct tensor_view *conv_g = gg_t(&p, "blk.0.ssm_conv1d.weight");
    same_rows(conv_h, 0, conv_g, 0, QK, "conv q/k channels");
    for (int64_t h = 0; h < T_HV; h++)
        same_rows(conv_h, QK + h * T_D, conv_g, QK + (tile ? tiled(h) : h) * T_D, T_D, "conv v channels");
    const struct tensor_view *out_h = hf_t(&p, "layers.0.linear_attn.out_proj.weight");
    const struct tensor_view *out_g = gg_t(&p, "blk.0.ssm_out.weight");
    for (int64_t row = 0; row < T_H; row++)
        for (int64_t c = 0; c < T_HV * T_D; c++) {
            int64_t gc = (tile ? tiled(c / T_D) : c / T_D) * T_D + c % T_D;
            cr_assert_eq(f32_at(out_g, row * T_HV * T_D + gc), f32_at(out_h, row * T_HV * T_D + c),
                         "ssm_out column %lld", (long long)c);
        }
    const struct tensor_view *qkv_g = gg_t(&p, "blk.0.attn_qkv.weight");
    const struct tensor_view *z_g = gg_t(&p, "blk.0.attn_gate.weight");
    if (arch == MODEL_ARCH_QWEN3NEXT) {
        /* in_proj_qkvz is grouped by key head: [q_g | k_g | v_g (r heads) | z_g (r heads)] */
        const struct tensor_view *qkvz = hf_t(&p, "layers.0.linear_attn.in_proj_qkvz.weight");
        const int64_t blk = 2 * T_D + 2 * r * T_D;
        for (int64_t g = 0; g < T_HK; g++) {
            same_rows(qkvz, g * blk, qkv_g, g * T_D, T_D, "qkvz -> q");
            same_rows(qkvz, g * blk + T_D, qkv_g, T_HK * T_D + g * T_D, T_D, "qkvz -> k");
            same_rows(qkvz, g * blk + 2 * T_D, qkv_g, QK + g * r * T_D, r * T_D, "qkvz -> v (grouped)");
            same_rows(qkvz, g * blk + 2 * T_D + r * T_D, z_g, g * r * T_D, r * T_D, "qkvz -> z");
        }
        same_rows(hf_t(&p, "layers.0.linear_attn.in_proj_ba.weight"), 0, gg_t(&p, "blk.0.ssm_ba.weight"),
                  0, 2 * T_HV, "ssm_ba (grouped, as stored)");
    } else {
        const struct tensor_view *qkv_h = hf_t(&p, "layers.0.linear_attn.in_proj_qkv.weight");
        same_rows(qkv_h, 0, qkv_g, 0, QK, "attn_qkv q/k rows");
        const struct tensor_view *z_h = hf_t(&p, "layers.0.linear_attn.in_proj_z.weight");
        const struct tensor_view *b_h = hf_t(&p, "layers.0.linear_attn.in_proj_b.weight");
        const struct tensor_view *a_h = hf_t(&p, "layers.0.linear_attn.in_proj_a.weight");
        for (int64_t h = 0; h < T_HV; h++) {
            same_rows(qkv_h, QK + h * T_D, qkv_g, QK + tiled(h) * T_D, T_D, "attn_qkv v rows");
            same_rows(z_h, h * T_D, z_g, tiled(h) * T_D, T_D, "attn_gate");
            same_rows(b_h, h, gg_t(&p, "blk.0.ssm_beta.weight"), tiled(h), 1, "ssm_beta");
            same_rows(a_h, h, gg_t(&p, "blk.0.ssm_alpha.weight"), tiled(h), 1, "ssm_alpha");
        }
    }

    /* FFN of layer 2 */
    if (arch == MODEL_ARCH_QWEN35) {
        same_rows(hf_t(&p, "layers.2.mlp.down_proj.weight"), 0, gg_t(&p, "blk.2.ffn_down.weight"), 0,
                  T_H, "ffn_down");
    } else {
        const struct tensor_view *ge = gg_t(&p, "blk.2.ffn_gate_exps.weight");
        const struct tensor_view *ue = gg_t(&p, "blk.2.ffn_up_exps.weight");
        const struct tensor_view *de = gg_t(&p, "blk.2.ffn_down_exps.weight");
        for (int64_t e = 0; e < T_E; e++) {
            if (arch == MODEL_ARCH_QWEN35MOE) {
                const struct tensor_view *gu = hf_t(&p, "layers.2.mlp.experts.gate_up_proj");
                same_rows(gu, e * 2 * T_IE, ge, e * T_IE, T_IE, "gate_up_proj -> gate_exps");
                same_rows(gu, e * 2 * T_IE + T_IE, ue, e * T_IE, T_IE, "gate_up_proj -> up_exps");
                same_rows(hf_t(&p, "layers.2.mlp.experts.down_proj"), e * T_H, de, e * T_H, T_H,
                          "down_proj -> down_exps");
            } else {
                snprintf(n, sizeof(n), "layers.2.mlp.experts.%lld.gate_proj.weight", (long long)e);
                same_rows(hf_t(&p, n), 0, ge, e * T_IE, T_IE, "experts.e.gate_proj -> gate_exps");
                snprintf(n, sizeof(n), "layers.2.mlp.experts.%lld.up_proj.weight", (long long)e);
                same_rows(hf_t(&p, n), 0, ue, e * T_IE, T_IE, "experts.e.up_proj -> up_exps");
                snprintf(n, sizeof(n), "layers.2.mlp.experts.%lld.down_proj.weight", (long long)e);
                same_rows(hf_t(&p, n), 0, de, e * T_H, T_H, "experts.e.down_proj -> down_exps");
            }
        }
        same_rows(hf_t(&p, "layers.2.mlp.gate.weight"), 0, gg_t(&p, "blk.2.ffn_gate_inp.weight"), 0,
                  T_E, "router");
        same_rows(hf_t(&p, "layers.2.mlp.shared_expert_gate.weight"), 0,
                  gg_t(&p, "blk.2.ffn_gate_inp_shexp.weight"), 0, 1, "shared expert gate");
        same_rows(hf_t(&p, "!lm_head.weight"), 0, gg_t(&p, "output.weight"), 0, T_H, "lm_head");
    }
    pair_close(&p);
}

Test(mkmodel_write, gguf_conventions_qwen35) { check_conventions(MODEL_ARCH_QWEN35); }
Test(mkmodel_write, gguf_conventions_qwen35moe) { check_conventions(MODEL_ARCH_QWEN35MOE); }
Test(mkmodel_write, gguf_conventions_qwen3next) { check_conventions(MODEL_ARCH_QWEN3NEXT); }

/* bf16 in both formats: the same rounded values, bit for bit. */
Test(mkmodel_write, bf16_same_bits_in_both_formats)
{
    struct pair p;
    pair_open(&p, MODEL_ARCH_QWEN35, DTYPE_BF16);
    const struct tensor_view *e = gg_t(&p, "token_embd.weight");
    cr_assert_eq(e->dtype, DTYPE_BF16);
    same_rows(hf_t(&p, "embed_tokens.weight"), 0, e, 0, e->shape[0], "bf16 token_embd");
    same_rows(hf_t(&p, "layers.1.mlp.up_proj.weight"), 0, gg_t(&p, "blk.1.ffn_up.weight"), 0, T_FF,
              "bf16 ffn_up");
    pair_close(&p);
}

/* Q8_0: llama.cpp's block (f16 d = max|x|/127, then 32 int8), against the f32 file. */
Test(mkmodel_write, q8_0_blocks_quantise_the_f32_values)
{
    char a[160], b[160];
    make(MODEL_ARCH_QWEN35, DTYPE_F32, 4, tp(a, "f.gguf"));
    make(MODEL_ARCH_QWEN35, DTYPE_Q8_0, 4, tp(b, "q.gguf"));
    struct hs_err err;
    hs_err_clear(&err);
    struct gguf_file *gf = NULL, *gq = NULL;
    cr_assert_eq(gguf_open(a, &gf, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(gguf_open(b, &gq, &err), HS_OK, "%s", err.msg);
    static const char *names[] = { "token_embd.weight", "blk.0.attn_qkv.weight", "blk.0.ssm_out.weight" };
    for (size_t t = 0; t < HS_ARRAY_LEN(names); t++) {
        const struct tensor_view *f = tensor_set_find(gguf_tensors(gf), names[t]);
        const struct tensor_view *q = tensor_set_find(gguf_tensors(gq), names[t]);
        cr_assert(f && q && q->dtype == DTYPE_Q8_0);
        uint64_t n = tensor_n_elems(f);
        cr_assert_eq(q->n_bytes, n / 32 * 34);
        const uint8_t *blk = q->data;
        for (uint64_t b0 = 0; b0 < n; b0 += 32, blk += 34) {
            float amax = 0;
            for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(f32_at(f, (int64_t)(b0 + i))));
            float d = hs_f16_to_f32(hs_rd_u16(blk));
            cr_assert_eq(hs_rd_u16(blk), hs_f32_to_f16(amax / 127.0f), "%s block %llu scale",
                         names[t], (unsigned long long)(b0 / 32));
            int qmax = 0;
            for (int i = 0; i < 32; i++) {
                int qi = (int8_t)blk[2 + i];
                qmax = abs(qi) > qmax ? abs(qi) : qmax;
                cr_assert_leq(fabsf(qi * d - f32_at(f, (int64_t)(b0 + i))), 0.5f * d + 1e-3f * amax,
                              "%s value %llu", names[t], (unsigned long long)(b0 + i));
            }
            cr_assert_eq(qmax, 127, "the largest value of a block maps to +-127");
        }
    }
    gguf_close(gf);
    gguf_close(gq);
}

/* q4_k_m: llama.cpp's Q4_K_M type per tensor (mkmodel.c design note, item 3) on a 256-wide
 * 4-layer qwen35 (use_more_bits(il, 4) holds for layers 2 and 3), and our round-to-nearest
 * blocks hold the f32 file's values within their quantization steps. */
static float q4km_value(const struct tensor_view *q, int64_t i)
{
    int64_t b = i / 256, k = i % 256;
    if (q->dtype == DTYPE_Q4_K) {
        const uint8_t *blk = (const uint8_t *)q->data + b * 144, *s12 = blk + 4;
        int j = (int)(k / 32);
        int sc = j < 4 ? s12[j] & 63 : (s12[j + 4] & 15) | (s12[j - 4] >> 6) << 4;
        int m = j < 4 ? s12[j + 4] & 63 : (s12[j + 4] >> 4) | (s12[j] >> 6) << 4;
        uint8_t byte = blk[16 + 32 * (k / 64) + k % 32];
        int qv = j % 2 ? byte >> 4 : byte & 15;
        return hs_f16_to_f32(hs_rd_u16(blk)) * (float)sc * (float)qv - hs_f16_to_f32(hs_rd_u16(blk + 2)) * (float)m;
    }
    const uint8_t *blk = (const uint8_t *)q->data + b * 210;
    int h = (int)(k / 128), c = (int)(k % 128) / 32, l = (int)(k % 32);
    uint8_t byte = blk[64 * h + 32 * (c & 1) + l];
    int lo = c < 2 ? byte & 15 : byte >> 4, hi = (blk[128 + 32 * h + l] >> (2 * c)) & 3;
    return hs_f16_to_f32(hs_rd_u16(blk + 208)) * (float)(int8_t)blk[192 + k / 16] * (float)((lo | hi << 4) - 32);
}

Test(mkmodel_write, q4_k_m_types_and_values)
{
    char a[160], b[160];
    struct mkmodel_opts o;
    struct hs_err err;
    const char *paths[2] = { tp(a, "k32.gguf"), tp(b, "k4m.gguf") };
    const enum dtype dts[2] = { DTYPE_F32, DTYPE_Q4_K };
    for (int i = 0; i < 2; i++) {
        opts(&o, MODEL_ARCH_QWEN35, dts[i], 9, paths[i]);
        o.n_embd = 256;
        o.n_ff = 512;
        o.head_dim = 64;
        o.gdn_head_dim = 64;
        hs_err_clear(&err);
        cr_assert_eq(mkmodel_write(&o, &err), HS_OK, "%s", err.msg);
    }
    struct gguf_file *gf = NULL, *gq = NULL;
    cr_assert_eq(gguf_open(a, &gf, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(gguf_open(b, &gq, &err), HS_OK, "%s", err.msg);
    uint32_t ft = 0;
    cr_assert_eq(gguf_get_u32(gq, "general.file_type", &ft, &err), HS_OK);
    cr_assert_eq(ft, 15, "LLAMA_FTYPE_MOSTLY_Q4_K_M");
    static const struct { const char *name; enum dtype dt; } want[] = {
        { "token_embd.weight", DTYPE_Q6_K },     /* tied: the output's type */
        { "blk.0.attn_qkv.weight", DTYPE_Q4_K }, { "blk.2.attn_qkv.weight", DTYPE_Q6_K },
        { "blk.3.attn_v.weight", DTYPE_Q6_K },   { "blk.3.attn_k.weight", DTYPE_Q4_K },
        { "blk.1.ffn_down.weight", DTYPE_Q4_K }, { "blk.2.ffn_down.weight", DTYPE_Q6_K },
        { "blk.1.ssm_out.weight", DTYPE_Q4_K },  { "blk.1.ssm_alpha.weight", DTYPE_Q4_K },
        { "blk.0.ssm_conv1d.weight", DTYPE_F32 }, { "blk.0.attn_norm.weight", DTYPE_F32 },
    };
    for (size_t t = 0; t < HS_ARRAY_LEN(want); t++) {
        const struct tensor_view *f = tensor_set_find(gguf_tensors(gf), want[t].name);
        const struct tensor_view *q = tensor_set_find(gguf_tensors(gq), want[t].name);
        cr_assert(f && q, "%s missing", want[t].name);
        cr_assert_eq(q->dtype, want[t].dt, "%s: %s", want[t].name, dtype_info(q->dtype)->name);
        if (q->dtype == DTYPE_F32) continue;
        /* error against the f32 value, relative to the range of its 16- or 32-value group */
        uint64_t n = tensor_n_elems(f);
        int gsz = q->dtype == DTYPE_Q4_K ? 32 : 16;
        double worst = 0;
        for (uint64_t g0 = 0; g0 < n; g0 += (uint64_t)gsz) {
            float lo = 0, hi = 0;
            for (int i = 0; i < gsz; i++) {
                lo = fminf(lo, f32_at(f, (int64_t)(g0 + i)));
                hi = fmaxf(hi, f32_at(f, (int64_t)(g0 + i)));
            }
            for (int i = 0; i < gsz; i++) {
                double e = fabs((double)q4km_value(q, (int64_t)(g0 + i)) - f32_at(f, (int64_t)(g0 + i)));
                worst = fmax(worst, e / fmax(hi - lo, 1e-30));
            }
        }
        /* Q4_K: 15 steps over the range, Q6_K: 62 over twice the max; rounding of the 6-bit
         * scales adds up to a step */
        cr_assert_lt(worst, q->dtype == DTYPE_Q4_K ? 0.11 : 0.05, "%s: worst error %.3f of the range",
                     want[t].name, worst);
    }
    gguf_close(gf);
    gguf_close(gq);
}

/* q5_k_m: Q5_K wherever q4_k_m writes Q4_K (same Q6_K tensors), general.file_type 17, and
 * the Q5_K blocks (decoded here from the layout in kernels/q5k.c) hold the f32 file's values
 * within their steps: 31 per sub-block range, so about half q4_k_m's error. */
static float q5km_value(const struct tensor_view *q, int64_t i)
{
    int64_t b = i / 256, k = i % 256;
    const uint8_t *blk = (const uint8_t *)q->data + b * 176, *s12 = blk + 4;
    int j = (int)(k / 32);
    int sc = j < 4 ? s12[j] & 63 : (s12[j + 4] & 15) | (s12[j - 4] >> 6) << 4;
    int m = j < 4 ? s12[j + 4] & 63 : (s12[j + 4] >> 4) | (s12[j] >> 6) << 4;
    uint8_t byte = blk[48 + 32 * (k / 64) + k % 32];
    int qv = (j % 2 ? byte >> 4 : byte & 15) | ((blk[16 + k % 32] >> j) & 1) << 4;
    return hs_f16_to_f32(hs_rd_u16(blk)) * (float)sc * (float)qv - hs_f16_to_f32(hs_rd_u16(blk + 2)) * (float)m;
}

Test(mkmodel_write, q5_k_m_types_and_values)
{
    char a[160], b[160];
    struct mkmodel_opts o;
    struct hs_err err;
    const char *paths[2] = { tp(a, "k5f32.gguf"), tp(b, "k5m.gguf") };
    const enum dtype dts[2] = { DTYPE_F32, DTYPE_Q5_K };
    for (int i = 0; i < 2; i++) {
        opts(&o, MODEL_ARCH_QWEN35, dts[i], 9, paths[i]);
        o.n_embd = 256;
        o.n_ff = 512;
        o.head_dim = 64;
        o.gdn_head_dim = 64;
        hs_err_clear(&err);
        cr_assert_eq(mkmodel_write(&o, &err), HS_OK, "%s", err.msg);
    }
    struct gguf_file *gf = NULL, *gq = NULL;
    cr_assert_eq(gguf_open(a, &gf, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(gguf_open(b, &gq, &err), HS_OK, "%s", err.msg);
    uint32_t ft = 0;
    cr_assert_eq(gguf_get_u32(gq, "general.file_type", &ft, &err), HS_OK);
    cr_assert_eq(ft, 17, "LLAMA_FTYPE_MOSTLY_Q5_K_M");
    static const struct { const char *name; enum dtype dt; } want[] = {
        { "token_embd.weight", DTYPE_Q6_K },
        { "blk.0.attn_qkv.weight", DTYPE_Q5_K }, { "blk.2.attn_qkv.weight", DTYPE_Q6_K },
        { "blk.3.attn_v.weight", DTYPE_Q6_K },   { "blk.3.attn_k.weight", DTYPE_Q5_K },
        { "blk.1.ffn_down.weight", DTYPE_Q5_K }, { "blk.2.ffn_down.weight", DTYPE_Q6_K },
        { "blk.1.ssm_out.weight", DTYPE_Q5_K },  { "blk.0.ffn_up.weight", DTYPE_Q5_K },
        { "blk.0.attn_norm.weight", DTYPE_F32 },
    };
    for (size_t t = 0; t < HS_ARRAY_LEN(want); t++) {
        const struct tensor_view *f = tensor_set_find(gguf_tensors(gf), want[t].name);
        const struct tensor_view *q = tensor_set_find(gguf_tensors(gq), want[t].name);
        cr_assert(f && q, "%s missing", want[t].name);
        cr_assert_eq(q->dtype, want[t].dt, "%s: %s", want[t].name, dtype_info(q->dtype)->name);
        if (q->dtype != DTYPE_Q5_K) continue;
        uint64_t n = tensor_n_elems(f);
        double worst = 0;
        bool high_bit = false;
        for (uint64_t g0 = 0; g0 < n; g0 += 32) {
            float lo = 0, hi = 0;
            for (int i = 0; i < 32; i++) {
                lo = fminf(lo, f32_at(f, (int64_t)(g0 + i)));
                hi = fmaxf(hi, f32_at(f, (int64_t)(g0 + i)));
            }
            for (int i = 0; i < 32; i++) {
                double e = fabs((double)q5km_value(q, (int64_t)(g0 + i)) - f32_at(f, (int64_t)(g0 + i)));
                worst = fmax(worst, e / fmax(hi - lo, 1e-30));
            }
        }
        for (uint64_t bb = 0; bb < n / 256 && !high_bit; bb++)
            for (int l = 0; l < 32; l++) high_bit |= ((const uint8_t *)q->data)[bb * 176 + 16 + l] != 0;
        cr_assert(high_bit, "%s: no 5th bit set anywhere", want[t].name);
        /* half a step of 1/31 of the range, plus the rounding of the 6-bit scales */
        cr_assert_lt(worst, 0.06, "%s: worst error %.3f of the range", want[t].name, worst);
    }
    gguf_close(gf);
    gguf_close(gq);
}

/* --dtype q5_1 / iq4_nl / iq4_xs ([F12]): every quantized matrix in the type (IQ4_XS rows that
 * are not whole 256-value super-blocks IQ4_NL), the MoE router f32, output.weight and a tied
 * token_embd Q8_0, general.file_type 9 / 25 / 30, and the blocks (read by the kernels' row
 * dequantizer) hold the f32 file's values within their steps, relative to each 32-value
 * group's largest magnitude: Q5_1 0.6 / 31 of the range, IQ4_NL 14.5 / 127 (the codebook's
 * widest gap), IQ4_XS that plus the 6-bit sub-scale grid. */
static void check_xtype(enum dtype dt, uint32_t ftype, double tol)
{
    char a[160], b[160];
    struct mkmodel_opts o;
    struct hs_err err;
    const char *paths[2] = { tp(a, "xf32.gguf"), tp(b, "xq.gguf") };
    const enum dtype dts[2] = { DTYPE_F32, dt };
    for (int i = 0; i < 2; i++) {
        opts(&o, MODEL_ARCH_QWEN35MOE, dts[i], 9, paths[i]);
        o.n_embd = 256;
        o.head_dim = 64;
        o.gdn_head_dim = 64;
        o.n_ff_exp = 128;
        hs_err_clear(&err);
        cr_assert_eq(mkmodel_write(&o, &err), HS_OK, "%s", err.msg);
    }
    struct gguf_file *gf = NULL, *gq = NULL;
    cr_assert_eq(gguf_open(a, &gf, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(gguf_open(b, &gq, &err), HS_OK, "%s", err.msg);
    uint32_t ft = 0;
    cr_assert_eq(gguf_get_u32(gq, "general.file_type", &ft, &err), HS_OK);
    cr_assert_eq(ft, ftype);
    const struct tensor_set *ts = gguf_tensors(gq);
    int n_type = 0;
    for (int i = 0; i < tensor_set_count(ts); i++) {
        const struct tensor_view *q = tensor_set_at(ts, i);
        const struct tensor_view *f = tensor_set_find(gguf_tensors(gf), q->name);
        cr_assert(f, "%s missing from the f32 file", q->name);
        int64_t row = q->shape[q->n_dims - 1];
        bool tied = !tensor_set_find(ts, "output.weight");
        enum dtype want = dt == DTYPE_IQ4_XS && row % 256 ? DTYPE_IQ4_NL : dt;
        if (f->n_dims < 2 || strstr(q->name, "ffn_gate_inp") || strstr(q->name, "conv1d")) want = DTYPE_F32;
        else if (!strcmp(q->name, "output.weight") || (tied && !strcmp(q->name, "token_embd.weight"))) want = DTYPE_Q8_0;
        cr_assert_eq(q->dtype, want, "%s: %s, expected %s", q->name, dtype_info(q->dtype)->name, dtype_info(want)->name);
        if (q->dtype != dt && !(dt == DTYPE_IQ4_XS && q->dtype == DTYPE_IQ4_NL)) continue;
        n_type += q->dtype == dt;
        uint64_t n = tensor_n_elems(f);
        int64_t rows = (int64_t)(n / (uint64_t)row);
        float *back = malloc(sizeof(float) * (size_t)row);
        double worst = 0;
        for (int64_t r = 0; r < rows; r++) {
            kern_row_to_f32(back, q->data, (enum kern_wtype)q->dtype, row, r);
            for (int64_t g0 = 0; g0 < row; g0 += 32) {
                float amax = 0;
                for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(f32_at(f, r * row + g0 + j)));
                for (int j = 0; j < 32; j++) {
                    double e = fabs((double)back[g0 + j] - f32_at(f, r * row + g0 + j));
                    worst = fmax(worst, e / fmax(2.0 * amax, 1e-30));
                }
            }
        }
        free(back);
        cr_assert_lt(worst, tol, "%s %s: worst error %.4f of the range", q->name, dtype_info(q->dtype)->name, worst);
    }
    cr_assert_gt(n_type, 10, "only %d tensors of the type", n_type);
    gguf_close(gf);
    gguf_close(gq);
}

Test(mkmodel_write, q5_1_types_and_values) { check_xtype(DTYPE_Q5_1, 9, 0.6 / 31); }
Test(mkmodel_write, iq4_nl_types_and_values) { check_xtype(DTYPE_IQ4_NL, 25, 14.6 / 127 / 2 + 0.01); }
Test(mkmodel_write, iq4_xs_types_and_values) { check_xtype(DTYPE_IQ4_XS, 30, 0.2); }

/* --dtype ud_q4_k_xl: the mixed file's per-tensor types (mkmodel.c note 3), file_type 15. */
Test(mkmodel_write, ud_q4_k_xl_types)
{
    char a[160];
    struct mkmodel_opts o;
    struct hs_err err;
    opts(&o, MODEL_ARCH_QWEN35MOE, DTYPE_Q8_0, 9, tp(a, "ud.gguf"));
    o.ud_mix = true;
    o.n_embd = 256;
    o.head_dim = 64;
    o.gdn_head_dim = 64;
    o.n_ff_exp = 96; /* not whole super-blocks: gate / up rows are H = 256, down rows 96 */
    hs_err_clear(&err);
    cr_assert_eq(mkmodel_write(&o, &err), HS_OK, "%s", err.msg);
    struct gguf_file *g = NULL;
    cr_assert_eq(gguf_open(a, &g, &err), HS_OK, "%s", err.msg);
    uint32_t ft = 0;
    cr_assert_eq(gguf_get_u32(g, "general.file_type", &ft, &err), HS_OK);
    cr_assert_eq(ft, 15);
    bool tied = !tensor_set_find(gguf_tensors(g), "output.weight");
    static const struct { const char *name; enum dtype dt; } want[] = {
        { "blk.0.ffn_gate_exps.weight", DTYPE_Q4_K }, { "blk.1.ffn_up_exps.weight", DTYPE_Q4_K },
        { "blk.0.ffn_down_exps.weight", DTYPE_Q5_1 }, { "blk.0.ffn_gate_inp.weight", DTYPE_F32 },
        { "blk.0.attn_qkv.weight", DTYPE_Q8_0 },      { "blk.3.attn_q.weight", DTYPE_Q8_0 },
        { "blk.0.ffn_down_shexp.weight", DTYPE_Q8_0 }, { "blk.0.attn_norm.weight", DTYPE_F32 },
    };
    for (size_t t = 0; t < HS_ARRAY_LEN(want); t++) {
        const struct tensor_view *q = tensor_set_find(gguf_tensors(g), want[t].name);
        cr_assert(q, "%s missing", want[t].name);
        cr_assert_eq(q->dtype, want[t].dt, "%s: %s", want[t].name, dtype_info(q->dtype)->name);
    }
    const struct tensor_view *e = tensor_set_find(gguf_tensors(g), "token_embd.weight");
    cr_assert(e);
    cr_assert_eq(e->dtype, tied ? DTYPE_Q8_0 : DTYPE_IQ4_NL);
    gguf_close(g);
    struct model *m = NULL;
    cr_assert_eq(model_load(a, &m, &err), HS_OK, "%s", err.msg);
    model_free(m);
}

/* ---- options -------------------------------------------------------------------------------- */

Test(mkmodel_write, rejects_bad_options_by_name)
{
    char out[160], gg[160];
    tp(out, "bad-hf");
    tp(gg, "bad.gguf");
    struct {
        enum model_arch arch;
        enum dtype dt;
        const char *out;
        int64_t layers, head_dim, k_heads, v_heads, hidden, ffn, experts, used;
        const char *preset, *tpl, *want;
    } cases[] = {
        { MODEL_ARCH_QWEN35, DTYPE_F32, gg, 0, 0, 3, 4, 0, 0, 0, 0, NULL, NULL, "--gdn-v-heads 4 is not a multiple" },
        { MODEL_ARCH_QWEN35, DTYPE_Q8_0, gg, 0, 0, 0, 0, 48, 0, 0, 0, NULL, NULL, "multiple of 32" },
        { MODEL_ARCH_QWEN35, DTYPE_Q8_0, out, 0, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, "needs a .gguf" },
        { MODEL_ARCH_QWEN35, DTYPE_Q4_K, out, 0, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, "--dtype q4_k_m needs a .gguf" },
        { MODEL_ARCH_QWEN35, DTYPE_Q4_K, gg, 0, 0, 0, 0, 48, 0, 0, 0, NULL, NULL, "--dtype q4_k_m needs --hidden (48)" },
        { MODEL_ARCH_QWEN35, DTYPE_Q6_K, gg, 0, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, "--dtype must be" },
        { MODEL_ARCH_QWEN35MOE, DTYPE_Q4_K, gg, 0, 0, 0, 0, 0, 0, 8, 0, NULL, NULL, "Q5_K" },
        { MODEL_ARCH_QWEN35MOE, DTYPE_Q5_K, gg, 0, 0, 0, 0, 0, 0, 8, 0, NULL, NULL, "--dtype q5_k_m with --experts 8" },
        { MODEL_ARCH_QWEN35, DTYPE_Q5_K, out, 0, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, "--dtype q5_k_m needs a .gguf" },
        { MODEL_ARCH_QWEN35, DTYPE_IQ4_XS, out, 0, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, "--dtype iq4_xs needs a .gguf" },
        { MODEL_ARCH_QWEN35, DTYPE_F32, gg, 0, 0, 0, 0, 0, 0, 0, 0, "7b", NULL, "--preset '7b'" },
        { MODEL_ARCH_QWEN35MOE, DTYPE_F32, gg, 0, 0, 0, 0, 0, 256, 0, 0, NULL, NULL, "--expert-ffn" },
        { MODEL_ARCH_QWEN35, DTYPE_F32, gg, 0, 0, 0, 0, 0, 0, 8, 0, NULL, NULL, "--experts" },
        { MODEL_ARCH_QWEN3NEXT, DTYPE_F32, gg, 0, 0, 0, 0, 0, 0, 4, 5, NULL, NULL, "--experts-used 5" },
        { MODEL_ARCH_QWEN35, DTYPE_F32, gg, 3, 0, 0, 0, 0, 0, 0, 0, NULL, NULL, "--layers 3" },
        { MODEL_ARCH_QWEN35, DTYPE_F32, gg, 0, 16, 0, 0, 0, 0, 0, 0, NULL, NULL, "--head-dim 16" },
        { MODEL_ARCH_QWEN35, DTYPE_F32, gg, 0, 36, 0, 0, 0, 0, 0, 0, NULL, NULL, "multiple of 8" },
        { MODEL_ARCH_QWEN35, DTYPE_F32, gg, 0, 0, 0, 0, 0, 0, 0, 0, NULL, "/nonexistent/t.jinja", "--chat-template" },
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(cases); i++) {
        struct mkmodel_opts o;
        opts(&o, cases[i].arch, cases[i].dt, 1, cases[i].out);
        o.n_layer = cases[i].layers;
        o.head_dim = cases[i].head_dim;
        o.gdn_k_heads = cases[i].k_heads;
        o.gdn_v_heads = cases[i].v_heads;
        o.n_embd = cases[i].hidden;
        o.n_ff = cases[i].ffn;
        o.n_expert = cases[i].experts;
        o.n_expert_used = cases[i].used;
        if (cases[i].preset) o.preset = cases[i].preset;
        if (cases[i].tpl) o.chat_template = cases[i].tpl;
        struct hs_err err;
        hs_err_clear(&err);
        int rc = mkmodel_write(&o, &err);
        cr_assert_lt(rc, 0, "case %zu was accepted", i);
        cr_assert_not_null(strstr(err.msg, cases[i].want), "case %zu: '%s' does not say '%s'", i,
                           err.msg, cases[i].want);
        cr_assert(!sys_path_exists(cases[i].out), "case %zu left %s behind", i, cases[i].out);
    }
}

Test(mkmodel_write, overrides_replace_the_preset)
{
    char out[160], path[320];
    struct mkmodel_opts o;
    opts(&o, MODEL_ARCH_QWEN35, DTYPE_F32, 1, tp(out, "ov"));
    o.n_layer = 8;
    o.n_embd = 96;
    o.n_head = 6;
    o.n_head_kv = 3;
    o.head_dim = 48;
    o.n_ff = 80;
    o.gdn_k_heads = 1;
    o.gdn_v_heads = 3;
    o.gdn_head_dim = 16;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(mkmodel_write(&o, &err), HS_OK, "%s", err.msg);
    struct hf_config cfg;
    snprintf(path, sizeof(path), "%s/config.json", out);
    cr_assert_eq(hf_config_load(path, &cfg, &err), HS_OK, "%s", err.msg);
    cr_assert(cfg.num_hidden_layers == 8 && cfg.hidden_size == 96 && cfg.num_attention_heads == 6 &&
              cfg.num_key_value_heads == 3 && cfg.head_dim == 48 && cfg.intermediate_size == 80 &&
              cfg.linear_num_key_heads == 1 && cfg.linear_num_value_heads == 3 &&
              cfg.linear_key_head_dim == 16 && cfg.linear_value_head_dim == 16);
    cr_assert(cfg.layer_is_full[3] && cfg.layer_is_full[7] && !cfg.layer_is_full[4]);
}

Test(mkmodel_write, builtin_chat_template_or_a_clear_error)
{
    char out[160], path[320];
    struct mkmodel_opts o;
    opts(&o, MODEL_ARCH_QWEN35, DTYPE_F32, 1, tp(out, "tpl"));
    o.chat_template = NULL;
    struct hs_err err;
    hs_err_clear(&err);
    int rc = mkmodel_write(&o, &err);
    if (!hs_chat_template_qwen35) {
        cr_assert_lt(rc, 0);
        cr_assert_str_eq(err.msg, "no built-in chat template: run make deps or pass --chat-template");
        return;
    }
    cr_assert_eq(rc, HS_OK, "%s", err.msg);
    char *tc = NULL;
    size_t len;
    snprintf(path, sizeof(path), "%s/tokenizer_config.json", out);
    cr_assert_eq(sys_file_read_all(path, 1 << 22, &tc, &len, &err), HS_OK, "%s", err.msg);
    cr_assert_not_null(strstr(tc, "<|im_start|>"), "the built-in template is not in tokenizer_config.json");
    hs_free(tc);
}

/* A tokenizer.json given with --tokenizer decides the vocabulary. */
Test(mkmodel_write, tokenizer_file_sets_the_vocabulary)
{
    char first[160], tok[320], second[160];
    make(MODEL_ARCH_QWEN35, DTYPE_F32, 1, tp(first, "first"));
    snprintf(tok, sizeof(tok), "%s/tokenizer.json", first);
    struct mkmodel_opts o;
    opts(&o, MODEL_ARCH_QWEN35, DTYPE_F32, 1, tp(second, "second.gguf"));
    o.tokenizer_json = tok;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(mkmodel_write(&o, &err), HS_OK, "%s", err.msg);
    struct hf_tokenizer t;
    memset(&t, 0, sizeof(t));
    cr_assert_eq(hf_tokenizer_load(tok, &t, &err), HS_OK, "%s", err.msg);
    struct gguf_file *g = NULL;
    cr_assert_eq(gguf_open(second, &g, &err), HS_OK, "%s", err.msg);
    const struct tensor_view *e = tensor_set_find(gguf_tensors(g), "token_embd.weight");
    cr_assert_not_null(e);
    cr_assert_geq(e->shape[0], t.n_vocab);
    cr_assert_lt(e->shape[0], t.n_vocab + 1024, "embedding rows %lld for %lld tokens",
                 (long long)e->shape[0], (long long)t.n_vocab);
    gguf_close(g);
    hf_tokenizer_free(&t);
}

/* ---- model_load binds both formats of one seed to the same weights ------------------------ */

static void same_f32(const float *a, const float *b, int64_t n, const char *what, int il)
{
    cr_assert(a && b, "layer %d %s: not bound", il, what);
    for (int64_t i = 0; i < n; i++)
        cr_assert_eq(a[i], b[i], "layer %d %s[%lld]: %.9g vs %.9g", il, what, (long long)i, a[i], b[i]);
}

static void same_weight(const struct model_weight *a, const struct model_weight *b, const char *what,
                        int il)
{
    cr_assert(a->dtype == b->dtype && a->rows == b->rows && a->cols == b->cols && a->n_mat == b->n_mat,
              "layer %d %s: %s [%lld x %lld] x%lld vs %s [%lld x %lld] x%lld", il, what,
              dtype_info(a->dtype)->name, (long long)a->rows, (long long)a->cols, (long long)a->n_mat,
              dtype_info(b->dtype)->name, (long long)b->rows, (long long)b->cols, (long long)b->n_mat);
    cr_assert_eq(a->row_bytes, b->row_bytes);
    for (int64_t m = 0; m < a->n_mat; m++) {
        const void *da = a->n_mat > 1 ? a->mats[m] : a->data;
        const void *db = b->n_mat > 1 ? b->mats[m] : b->data;
        cr_assert(da && db, "layer %d %s: not bound", il, what);
        for (int64_t r = 0; r < a->rows; r++)
            cr_assert(!memcmp((const uint8_t *)da + r * a->row_bytes, (const uint8_t *)db + r * b->row_bytes,
                              a->row_bytes),
                      "layer %d %s: matrix %lld row %lld differs between HF and GGUF", il, what,
                      (long long)m, (long long)r);
    }
}

static void check_binding(enum model_arch arch, enum dtype dt)
{
    char hf[160], gg[160];
    make(arch, dt, 21, tp(hf, "bind-hf"));
    make(arch, dt, 21, tp(gg, "bind.gguf"));
    struct hs_err err;
    hs_err_clear(&err);
    struct model *mh = NULL, *mg = NULL;
    cr_assert_eq(model_load(hf, &mh, &err), HS_OK, "HF: %s", err.msg);
    cr_assert_eq(model_load(gg, &mg, &err), HS_OK, "GGUF: %s", err.msg);
    const struct model_hparams *a = model_hparams(mh), *b = model_hparams(mg);
    cr_assert_eq(a->arch, arch);
    cr_assert_eq(b->arch, arch);
    cr_assert(a->n_vocab == b->n_vocab && a->n_embd == b->n_embd && a->n_layer == b->n_layer &&
              a->n_ff == b->n_ff && a->n_head == b->n_head && a->n_head_kv == b->n_head_kv &&
              a->head_dim == b->head_dim && a->n_rot == b->n_rot && a->gdn_k_heads == b->gdn_k_heads &&
              a->gdn_v_heads == b->gdn_v_heads && a->gdn_k_dim == b->gdn_k_dim &&
              a->gdn_v_dim == b->gdn_v_dim && a->conv_kernel == b->conv_kernel &&
              a->n_expert == b->n_expert && a->n_expert_used == b->n_expert_used &&
              a->n_ff_exp == b->n_ff_exp && a->n_ff_shexp == b->n_ff_shexp &&
              a->tied_embeddings == b->tied_embeddings && a->n_ctx_train == b->n_ctx_train,
              "hyperparameters differ between the HF and GGUF files");
    cr_assert_float_eq(a->rope_theta, b->rope_theta, 1e-3);
    cr_assert_float_eq(a->rms_eps, b->rms_eps, 1e-12);
    cr_assert_eq(a->n_rot, T_HD / 4);
    cr_assert_eq(a->gdn_k_heads, T_HK);
    cr_assert_eq(a->gdn_v_heads, T_HV);

    same_weight(model_token_embd(mh), model_token_embd(mg), "token_embd", -1);
    same_weight(model_lm_head(mh), model_lm_head(mg), "lm_head", -1);
    same_f32(model_output_norm(mh), model_output_norm(mg), T_H, "output_norm", -1);
    const int64_t H = a->n_embd, C = 2 * T_HK * T_D + T_HV * T_D;
    for (int il = 0; il < (int)a->n_layer; il++) {
        const struct model_layer *x = model_layer(mh, il), *y = model_layer(mg, il);
        cr_assert_eq(x->kind, y->kind);
        cr_assert_eq(x->kind, (il + 1) % 4 == 0 ? LAYER_KIND_ATTN : LAYER_KIND_GDN);
        same_f32(x->attn_norm, y->attn_norm, H, "attn_norm", il);
        same_f32(x->post_attn_norm, y->post_attn_norm, H, "post_attn_norm", il);
        if (x->kind == LAYER_KIND_ATTN) {
            same_weight(&x->wq, &y->wq, "wq", il);
            same_weight(&x->wk, &y->wk, "wk", il);
            same_weight(&x->wv, &y->wv, "wv", il);
            same_weight(&x->wo, &y->wo, "wo", il);
            same_f32(x->q_norm, y->q_norm, T_HD, "q_norm", il);
            same_f32(x->k_norm, y->k_norm, T_HD, "k_norm", il);
        } else {
            same_weight(&x->wqkv, &y->wqkv, "wqkv", il);
            same_weight(&x->wz, &y->wz, "wz", il);
            same_weight(&x->wb, &y->wb, "wb", il);
            same_weight(&x->wa, &y->wa, "wa", il);
            same_weight(&x->wout, &y->wout, "wout", il);
            same_f32(x->conv, y->conv, C * T_K, "conv", il);
            same_f32(x->dt_bias, y->dt_bias, T_HV, "dt_bias", il);
            same_f32(x->ssm_norm, y->ssm_norm, T_D, "ssm_norm", il);
            /* ssm_a: HF gives A_log and the loader computes -exp; allow the last bit of exp. */
            cr_assert(x->ssm_a && y->ssm_a);
            for (int h = 0; h < T_HV; h++)
                cr_assert_float_eq(x->ssm_a[h], y->ssm_a[h], 2e-7f * fabsf(y->ssm_a[h]),
                                   "layer %d ssm_a[%d]: %.9g vs %.9g", il, h, x->ssm_a[h], y->ssm_a[h]);
        }
        if (arch == MODEL_ARCH_QWEN35) {
            same_weight(&x->ffn_gate, &y->ffn_gate, "ffn_gate", il);
            same_weight(&x->ffn_up, &y->ffn_up, "ffn_up", il);
            same_weight(&x->ffn_down, &y->ffn_down, "ffn_down", il);
        } else {
            same_weight(&x->router, &y->router, "router", il);
            same_weight(&x->exp_gate, &y->exp_gate, "exp_gate", il);
            same_weight(&x->exp_up, &y->exp_up, "exp_up", il);
            same_weight(&x->exp_down, &y->exp_down, "exp_down", il);
            same_weight(&x->sh_gate, &y->sh_gate, "sh_gate", il);
            same_weight(&x->sh_up, &y->sh_up, "sh_up", il);
            same_weight(&x->sh_down, &y->sh_down, "sh_down", il);
            same_weight(&x->sh_gate_inp, &y->sh_gate_inp, "sh_gate_inp", il);
        }
    }
    model_free(mh);
    model_free(mg);
}

Test(mkmodel_write, model_load_binds_hf_and_gguf_alike_qwen35) { check_binding(MODEL_ARCH_QWEN35, DTYPE_F32); }
Test(mkmodel_write, model_load_binds_hf_and_gguf_alike_qwen35moe) { check_binding(MODEL_ARCH_QWEN35MOE, DTYPE_F32); }
Test(mkmodel_write, model_load_binds_hf_and_gguf_alike_qwen3next) { check_binding(MODEL_ARCH_QWEN3NEXT, DTYPE_F32); }
Test(mkmodel_write, model_load_binds_hf_and_gguf_alike_bf16) { check_binding(MODEL_ARCH_QWEN3NEXT, DTYPE_BF16); }

/* ---- qwen4exp (Qwen3.8-Flash-Next) ---------------------------------------------------------
 * The tiny default: H 128, 4 streams of rank 32, an indexer of 2 x 32, the n-gram embedding on
 * layer 1 (N 3, 2 heads per order of 32, a 512-row table in 4 HF shards), Hk 2 != Hv 4. */
enum { F_H = 128, F_HC = 4, F_HCR = 32, F_IXH = 2, F_IXD = 32, F_NG = 3, F_PH = 4, F_PR = 32, F_PK = 4,
       F_ROWS = 512, F_SHARDS = 4 };

/* Row r of matrix m of weight w. */
static const uint8_t *w_row(const struct model_weight *w, int64_t m, int64_t r)
{
    const void *d = w->n_mat > 1 ? w->mats[m] : w->data;
    return (const uint8_t *)d + r * w->row_bytes;
}

static void same_hc(const struct model_hc *x, const struct model_hc *y, bool inject, const char *what, int il)
{
    same_f32(x->norm, y->norm, F_HC * F_H, what, il);
    same_weight(&x->down, &y->down, what, il);
    same_weight(&x->up, &y->up, what, il);
    if (inject) same_weight(&x->inject, &y->inject, what, il);
}

static void check_binding_flash(enum dtype dt)
{
    char hf[160], gg[160];
    make(MODEL_ARCH_QWEN4EXP, dt, 21, tp(hf, "bind4-hf"));
    make(MODEL_ARCH_QWEN4EXP, dt, 21, tp(gg, "bind4.gguf"));
    struct hs_err err;
    hs_err_clear(&err);
    struct model *mh = NULL, *mg = NULL;
    cr_assert_eq(model_load(hf, &mh, &err), HS_OK, "HF: %s", err.msg);
    cr_assert_eq(model_load(gg, &mg, &err), HS_OK, "GGUF: %s", err.msg);
    const struct model_hparams *a = model_hparams(mh), *b = model_hparams(mg);
    cr_assert(a->n_vocab == b->n_vocab && a->n_embd == F_H && b->n_embd == F_H && a->n_layer == b->n_layer &&
              a->n_head == b->n_head && a->n_head_kv == b->n_head_kv && a->head_dim == b->head_dim &&
              a->n_rot == b->n_rot && a->gdn_k_heads == T_HK && b->gdn_k_heads == T_HK &&
              a->gdn_v_heads == T_HV && b->gdn_v_heads == T_HV && a->n_expert == b->n_expert &&
              a->n_expert_used == b->n_expert_used && a->n_ff_exp == b->n_ff_exp && a->n_ff_shexp == b->n_ff_shexp,
              "trunk hyperparameters differ between the HF and GGUF files");
    cr_assert(a->gdn_gate == GDN_GATE_SIGMOID && b->gdn_gate == GDN_GATE_SIGMOID);
    cr_assert(a->hc_n == F_HC && b->hc_n == F_HC && a->hc_rank == F_HCR && b->hc_rank == F_HCR);
    cr_assert(a->idx_heads == F_IXH && b->idx_heads == F_IXH && a->idx_dim == F_IXD && b->idx_dim == F_IXD);
    cr_assert(a->qsa_block == 4 && b->qsa_block == 4 && a->qsa_top_blocks == 512 && b->qsa_top_blocks == 512);
    cr_assert(a->ple_layer == 1 && b->ple_layer == 1 && a->ple_ngram == F_NG && b->ple_ngram == F_NG);
    cr_assert(a->ple_heads == F_PH && b->ple_heads == F_PH && a->ple_row == F_PR && b->ple_row == F_PR);
    cr_assert(a->ple_kernel == F_PK && b->ple_kernel == F_PK && a->ple_rows == F_ROWS && b->ple_rows == F_ROWS);
    cr_assert(a->ple_shards == F_SHARDS && b->ple_shards == 1);
    cr_assert(a->ple_eos == b->ple_eos && a->ple_eos > 0 && a->ple_eos < a->n_vocab);
    for (int j = 0; j < F_NG; j++) {
        cr_assert_eq(a->ple_mult[j], b->ple_mult[j], "multiplier %d", j);
        cr_assert(a->ple_mult[j] & 1, "multiplier %d is even", j);
        cr_assert_lt(a->ple_mult[j], (UINT64_C(1) << 63) / (uint64_t)a->n_vocab);
    }
    /* moduli: successive primes from 101; offsets: their prefix sums; rows padded to 128 */
    static const uint64_t primes[F_PH] = { 101, 103, 107, 109 };
    uint64_t off = 0;
    for (int h = 0; h < F_PH; h++) {
        cr_assert(a->ple_mod[h] == primes[h] && b->ple_mod[h] == primes[h], "head %d modulus", h);
        cr_assert(a->ple_off[h] == off && b->ple_off[h] == off, "head %d offset", h);
        off += primes[h];
    }

    same_weight(model_token_embd(mh), model_token_embd(mg), "token_embd", -1);
    same_weight(model_lm_head(mh), model_lm_head(mg), "lm_head", -1);
    cr_assert_null(model_output_norm(mh));
    cr_assert_null(model_output_norm(mg));
    same_hc(model_head_mixer(mh), model_head_mixer(mg), false, "head mixer", -1);
    /* the table: HF rows come shard by shard, GGUF holds them in one matrix */
    const struct model_weight *th = model_ple_table(mh), *tg = model_ple_table(mg);
    cr_assert(th && tg);
    cr_assert(th->n_mat == F_SHARDS && tg->n_mat == 1 && th->dtype == tg->dtype && th->row_bytes == tg->row_bytes);
    for (int64_t r = 0; r < F_ROWS; r++)
        cr_assert(!memcmp(w_row(th, r / (F_ROWS / F_SHARDS), r % (F_ROWS / F_SHARDS)), w_row(tg, 0, r), th->row_bytes),
                  "n-gram table row %lld differs between HF and GGUF", (long long)r);
    const int64_t C = 2 * T_HK * T_D + T_HV * T_D;
    for (int il = 0; il < (int)a->n_layer; il++) {
        const struct model_layer *x = model_layer(mh, il), *y = model_layer(mg, il);
        cr_assert_eq(x->kind, y->kind);
        cr_assert_eq(x->kind, (il + 1) % 4 == 0 ? LAYER_KIND_ATTN : LAYER_KIND_GDN);
        same_hc(&x->hc_attn, &y->hc_attn, true, "hc_attn", il);
        same_hc(&x->hc_ffn, &y->hc_ffn, true, "hc_ffn", il);
        if (il == 1) {
            same_weight(&x->ple_key, &y->ple_key, "ple_key", il);
            same_weight(&x->ple_value, &y->ple_value, "ple_value", il);
            same_f32(x->ple_norm_key, y->ple_norm_key, F_HC * F_H, "ple_norm_key", il);
            same_f32(x->ple_norm_query, y->ple_norm_query, F_HC * F_H, "ple_norm_query", il);
            same_f32(x->ple_norm_conv, y->ple_norm_conv, F_HC * F_H, "ple_norm_conv", il);
            same_f32(x->ple_conv, y->ple_conv, F_HC * F_H * F_PK, "ple_conv", il);
        }
        if (x->kind == LAYER_KIND_ATTN) {
            same_weight(&x->wq, &y->wq, "wq", il);
            same_weight(&x->wk, &y->wk, "wk", il);
            same_weight(&x->wv, &y->wv, "wv", il);
            same_weight(&x->wo, &y->wo, "wo", il);
            same_f32(x->q_norm, y->q_norm, T_HD, "q_norm", il);
            same_f32(x->k_norm, y->k_norm, T_HD, "k_norm", il);
            same_weight(&x->idx_q, &y->idx_q, "idx_q", il);
            same_weight(&x->idx_k, &y->idx_k, "idx_k", il);
            same_f32(x->idx_q_norm, y->idx_q_norm, F_IXD, "idx_q_norm", il);
            same_f32(x->idx_k_norm, y->idx_k_norm, F_IXD, "idx_k_norm", il);
        } else {
            same_weight(&x->wqkv, &y->wqkv, "wqkv", il);
            same_weight(&x->wz, &y->wz, "wz", il);
            same_weight(&x->wb, &y->wb, "wb", il);
            same_weight(&x->wa, &y->wa, "wa", il);
            same_weight(&x->wout, &y->wout, "wout", il);
            same_f32(x->conv, y->conv, C * T_K, "conv", il);
            same_f32(x->dt_bias, y->dt_bias, T_HV, "dt_bias", il);
            same_f32(x->ssm_norm, y->ssm_norm, T_D, "ssm_norm", il);
            for (int h = 0; h < T_HV; h++)
                cr_assert_float_eq(x->ssm_a[h], y->ssm_a[h], 2e-7f * fabsf(y->ssm_a[h]),
                                   "layer %d ssm_a[%d]: %.9g vs %.9g", il, h, x->ssm_a[h], y->ssm_a[h]);
        }
        same_weight(&x->router, &y->router, "router", il);
        same_weight(&x->exp_gate, &y->exp_gate, "exp_gate", il);
        same_weight(&x->exp_up, &y->exp_up, "exp_up", il);
        same_weight(&x->exp_down, &y->exp_down, "exp_down", il);
        same_weight(&x->sh_gate, &y->sh_gate, "sh_gate", il);
        same_weight(&x->sh_up, &y->sh_up, "sh_up", il);
        same_weight(&x->sh_down, &y->sh_down, "sh_down", il);
        same_weight(&x->sh_gate_inp, &y->sh_gate_inp, "sh_gate_inp", il);
    }
    model_free(mh);
    model_free(mg);
}

Test(mkmodel_write, model_load_binds_hf_and_gguf_alike_qwen4exp) { check_binding_flash(DTYPE_F32); }
Test(mkmodel_write, model_load_binds_hf_and_gguf_alike_qwen4exp_bf16) { check_binding_flash(DTYPE_BF16); }

Test(mkmodel_write, qwen4exp_same_seed_same_bytes)
{
    char a[160], b[160], c[160], x[320], y[320];
    make(MODEL_ARCH_QWEN4EXP, DTYPE_Q8_0, 5, tp(a, "f-a.gguf"));
    make(MODEL_ARCH_QWEN4EXP, DTYPE_Q8_0, 5, tp(b, "f-b.gguf"));
    make(MODEL_ARCH_QWEN4EXP, DTYPE_Q8_0, 6, tp(c, "f-c.gguf"));
    cr_assert(same_file(a, b), "same options wrote different GGUF bytes");
    cr_assert(!same_file(a, c), "seeds 5 and 6 wrote the same GGUF");
    make(MODEL_ARCH_QWEN4EXP, DTYPE_F32, 5, tp(a, "f-hf-a"));
    make(MODEL_ARCH_QWEN4EXP, DTYPE_F32, 5, tp(b, "f-hf-b"));
    static const char *files[] = { "config.json", "model.safetensors" };
    for (size_t i = 0; i < HS_ARRAY_LEN(files); i++) {
        snprintf(x, sizeof(x), "%s/%s", a, files[i]);
        snprintf(y, sizeof(y), "%s/%s", b, files[i]);
        cr_assert(same_file(x, y), "%s differs between two identical runs", files[i]);
    }
    /* the multipliers follow the seed (they are model constants, in the safetensors) */
    struct hs_err err;
    hs_err_clear(&err);
    struct tensor_set *ts = NULL;
    cr_assert_eq(safetensors_open(a, &ts, &err), HS_OK, "%s", err.msg);
    const struct tensor_view *m = NEED(ts, "model.language_model.layers.1.ple.ple_embedding.layer_multipliers",
                                       DTYPE_I64, F_NG);
    NEED(ts, "model.language_model.layers.1.ple.ple_embedding.ngram_heads_offsets", DTYPE_I64, F_PH);
    NEED(ts, "model.language_model.layers.1.ple.ple_embedding.ngram_heads_vocab_sizes", DTYPE_I64, F_PH);
    NEED(ts, "model.language_model.layers.1.ple.ple_embedding.ngram_embedding.shard_3.weight", DTYPE_F32,
         F_ROWS / F_SHARDS, F_PR);
    NEED(ts, "model.language_model.layers.3.self_attn.indexer.index_qk_proj.weight", DTYPE_F32,
         (F_IXH + 1) * F_IXD, F_H);
    NEED(ts, "model.language_model.hyper_connection_mixer.hc_norm.weight", DTYPE_F32, F_HC * F_H);
    cr_assert_null(tensor_set_find(ts, "model.language_model.norm.weight"));
    uint64_t m0;
    memcpy(&m0, m->data, 8);
    tensor_set_free(ts);
    make(MODEL_ARCH_QWEN4EXP, DTYPE_F32, 6, tp(c, "f-hf-c"));
    cr_assert_eq(safetensors_open(c, &ts, &err), HS_OK, "%s", err.msg);
    m = tensor_set_find(ts, "model.language_model.layers.1.ple.ple_embedding.layer_multipliers");
    uint64_t m1;
    memcpy(&m1, m->data, 8);
    cr_assert_neq(m0, m1, "the seed did not change the hash multipliers");
    tensor_set_free(ts);
}

Test(mkmodel_write, qwen4exp_ud_q4_k_xl_types_and_flags)
{
    char a[160];
    struct mkmodel_opts o;
    struct hs_err err;
    opts(&o, MODEL_ARCH_QWEN4EXP, DTYPE_Q8_0, 9, tp(a, "f-ud.gguf"));
    o.ud_mix = true;
    o.n_embd = 256; /* expert gate / up rows of whole Q4_K super-blocks */
    /* the flags reach the file */
    o.hc_streams = 3;
    o.hc_rank = 64;
    o.indexer_heads = 3;
    o.indexer_head_dim = 64;
    o.qsa_budget = 16;
    o.ngram = 4;
    o.ngram_heads = 1;
    o.ngram_row = 32;
    o.ngram_table_rows = 600;
    o.ngram_shards = 3;
    o.ngram_conv_kernel = 3;
    hs_err_clear(&err);
    cr_assert_eq(mkmodel_write(&o, &err), HS_OK, "%s", err.msg);
    struct gguf_file *g = NULL;
    cr_assert_eq(gguf_open(a, &g, &err), HS_OK, "%s", err.msg);
    static const struct { const char *name; enum dtype dt; } want[] = {
        { "per_layer_token_embd.weight", DTYPE_IQ4_NL }, { "blk.3.indexer.q_proj.weight", DTYPE_BF16 },
        { "blk.3.indexer.k_proj.weight", DTYPE_BF16 },   { "token_embd.weight", DTYPE_Q8_0 },
        { "blk.0.ffn_gate_exps.weight", DTYPE_Q4_K },    { "blk.0.ffn_down_exps.weight", DTYPE_Q5_1 },
        { "blk.0.hc_attn_down.weight", DTYPE_Q8_0 },     { "blk.1.ple_key.weight", DTYPE_Q8_0 },
        { "blk.0.hc_attn_norm.weight", DTYPE_F32 },      { "blk.1.ple_conv1d.weight", DTYPE_F32 },
        { "blk.0.ffn_gate_inp.weight", DTYPE_F32 },      { "output_hc_up.weight", DTYPE_Q8_0 },
    };
    for (size_t t = 0; t < HS_ARRAY_LEN(want); t++) {
        const struct tensor_view *q = tensor_set_find(gguf_tensors(g), want[t].name);
        cr_assert(q, "%s missing", want[t].name);
        cr_assert_eq(q->dtype, want[t].dt, "%s: %s", want[t].name, dtype_info(q->dtype)->name);
    }
    gguf_close(g);
    struct model *m = NULL;
    cr_assert_eq(model_load(a, &m, &err), HS_OK, "%s", err.msg);
    const struct model_hparams *hp = model_hparams(m);
    cr_assert(hp->hc_n == 3 && hp->hc_rank == 64 && hp->idx_heads == 3 && hp->idx_dim == 64);
    cr_assert(hp->qsa_block == 4 && hp->qsa_top_blocks == 4);
    cr_assert(hp->ple_ngram == 4 && hp->ple_heads == 3 && hp->ple_row == 32 && hp->ple_kernel == 3);
    cr_assert_eq(hp->ple_rows, 600);
    /* the largest base whose three successive primes fit in 600 rows */
    cr_assert_leq(hp->ple_off[2] + hp->ple_mod[2], 600);
    cr_assert_gt(hp->ple_off[2] + hp->ple_mod[2], 600 - 3 * 8);
    for (int h = 1; h < 3; h++) cr_assert_eq(hp->ple_off[h], hp->ple_off[h - 1] + hp->ple_mod[h - 1]);
    model_free(m);
}

Test(mkmodel_write, qwen4exp_rejects_bad_options_by_name)
{
    char gg[160];
    tp(gg, "f-bad.gguf");
    struct {
        enum model_arch arch;
        int64_t streams, rank, ixdim, budget, ngram, heads, row, rows, shards, kernel, hidden;
        enum dtype dt;
        const char *want;
    } cases[] = {
        { MODEL_ARCH_QWEN35, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, DTYPE_F32, "--hc-streams applies to qwen4exp" },
        { MODEL_ARCH_QWEN3NEXT, 0, 0, 0, 0, 0, 0, 0, 600, 0, 0, 0, DTYPE_F32, "--ngram-table-rows applies to qwen4exp" },
        { MODEL_ARCH_QWEN4EXP, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, DTYPE_F32, "--hc-streams 1" },
        { MODEL_ARCH_QWEN4EXP, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, DTYPE_F32, "--indexer-head-dim 4" },
        { MODEL_ARCH_QWEN4EXP, 0, 0, 16, 0, 0, 0, 0, 0, 0, 0, 0, DTYPE_F32, "--indexer-head-dim 16: qwen4exp needs at least 32" },
        { MODEL_ARCH_QWEN4EXP, 0, 0, 0, 18, 0, 0, 0, 0, 0, 0, 0, DTYPE_F32, "--qsa-budget 18" },
        { MODEL_ARCH_QWEN4EXP, 0, 0, 0, 0, 9, 0, 0, 0, 0, 0, 0, DTYPE_F32, "--ngram 9" },
        { MODEL_ARCH_QWEN4EXP, 0, 0, 0, 0, 0, 40, 0, 0, 0, 0, 0, DTYPE_F32, "--ngram-heads 40" },
        { MODEL_ARCH_QWEN4EXP, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, DTYPE_F32, "--ngram-row" },
        { MODEL_ARCH_QWEN4EXP, 0, 0, 0, 0, 0, 0, 0, 601, 0, 0, 0, DTYPE_F32, "--ngram-table-rows 601" },
        { MODEL_ARCH_QWEN4EXP, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, DTYPE_F32, "--ngram-table-rows 8" },
        { MODEL_ARCH_QWEN4EXP, 0, 0, 0, 0, 0, 0, 0, 0, 0, 65, 0, DTYPE_F32, "--ngram-conv-kernel 65" },
        { MODEL_ARCH_QWEN4EXP, 0, 40, 0, 0, 0, 0, 0, 0, 0, 0, 0, DTYPE_Q8_0, "--hc-rank (40)" },
        { MODEL_ARCH_QWEN4EXP, 0, 0, 0, 0, 0, 0, 24, 0, 0, 0, 0, DTYPE_Q8_0, "--ngram-row (24)" },
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(cases); i++) {
        struct mkmodel_opts o;
        opts(&o, cases[i].arch, cases[i].dt, 1, gg);
        o.hc_streams = cases[i].streams;
        o.hc_rank = cases[i].rank;
        o.indexer_head_dim = cases[i].ixdim;
        o.qsa_budget = cases[i].budget;
        o.ngram = cases[i].ngram;
        o.ngram_heads = cases[i].heads;
        o.ngram_row = cases[i].row;
        o.ngram_table_rows = cases[i].rows;
        o.ngram_shards = cases[i].shards;
        o.ngram_conv_kernel = cases[i].kernel;
        o.n_embd = cases[i].hidden;
        struct hs_err err;
        hs_err_clear(&err);
        int rc = mkmodel_write(&o, &err);
        cr_assert_lt(rc, 0, "case %zu was accepted", i);
        cr_assert_not_null(strstr(err.msg, cases[i].want), "case %zu: '%s' does not say '%s'", i, err.msg,
                           cases[i].want);
        cr_assert(!sys_path_exists(gg), "case %zu left %s behind", i, gg);
    }
}
