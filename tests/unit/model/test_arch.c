/* test_arch.c — what model/ tells a writer about an architecture (model_arch_info,
 * model_arch_hf_walk), read from the arch_*.c tables. */
#include <criterion/criterion.h>
#include "model/model.h"

#include <stdio.h>
#include <string.h>

Test(model_arch, info_of_each_architecture)
{
    struct model_arch_info i;
    cr_assert(model_arch_info(MODEL_ARCH_QWEN35, &i));
    cr_assert_str_eq(i.name, "qwen35");
    cr_assert_str_eq(i.hf_architecture, "Qwen3_5ForConditionalGeneration");
    cr_assert_str_eq(i.hf_model_type, "qwen3_5");
    cr_assert_str_eq(i.hf_text_model_type, "qwen3_5_text");
    cr_assert(!i.moe && i.gguf_v_tiled && i.mrope && i.tied);
    cr_assert_eq(i.defaults.rope_theta, 1e7);
    cr_assert_eq(i.defaults.full_attn_interval, 4);
    cr_assert(model_arch_info(MODEL_ARCH_QWEN3NEXT, &i));
    cr_assert_null(i.hf_text_model_type, "a flat config");
    cr_assert_str_eq(i.tokenizer_pre, "qwen2");
    cr_assert(i.moe && !i.gguf_v_tiled && !i.norm_topk_always);
    cr_assert(model_arch_info(MODEL_ARCH_QWEN35MOE, &i));
    cr_assert(i.moe && i.norm_topk_always);
    cr_assert(!model_arch_info(MODEL_ARCH_COUNT, &i));
}

/* A small geometry: layer 0 GDN, layer 1 attention; 2 experts. */
static void small_hparams(enum model_arch a, bool tied, struct model_hparams *hp)
{
    memset(hp, 0, sizeof(*hp));
    hp->arch = a;
    hp->n_vocab = 100, hp->n_embd = 16, hp->n_layer = 2, hp->n_ff = 32;
    hp->n_head = 2, hp->n_head_kv = 1, hp->head_dim = 8;
    hp->gdn_k_heads = 1, hp->gdn_v_heads = 2, hp->gdn_k_dim = 4, hp->gdn_v_dim = 4;
    hp->conv_kernel = 4, hp->tied_embeddings = tied;
    struct model_arch_info i;
    model_arch_info(a, &i);
    if (i.moe) hp->n_expert = 2, hp->n_ff_exp = 8, hp->n_ff_shexp = 8;
    hp->layer_kind[0] = LAYER_KIND_GDN, hp->layer_kind[1] = LAYER_KIND_ATTN;
    hp->layer_moe[0] = hp->layer_moe[1] = i.moe;
}

struct walked {
    char lines[128][160];
    int n, stop_at;
};

/* One line a tensor: "il e hf -> gguf0 [gguf1] shape". */
static int collect(const struct model_arch_tensor *t, void *ctx)
{
    struct walked *w = ctx;
    cr_assert_lt(w->n, 128);
    char sh[64] = "";
    for (int k = 0; k < t->gguf_n_dims[0]; k++)
        snprintf(sh + strlen(sh), sizeof sh - strlen(sh), "%s%lld", k ? "x" : "", (long long)t->gguf_shape[0][k]);
    snprintf(w->lines[w->n++], sizeof w->lines[0], "%d %d %s -> %s%s%s %s", t->il, t->expert, t->hf,
             t->gguf[0] ? t->gguf[0] : "-", t->gguf[1] ? " " : "", t->gguf[1] ? t->gguf[1] : "", sh);
    return w->n == w->stop_at ? 42 : 0;
}

static bool walked_has(const struct walked *w, const char *line)
{
    for (int i = 0; i < w->n; i++)
        if (!strcmp(w->lines[i], line)) return true;
    return false;
}

Test(model_arch, hf_walk_in_state_dict_order)
{
    struct model_hparams hp;
    small_hparams(MODEL_ARCH_QWEN3NEXT, false, &hp);
    struct walked w = { .stop_at = -1 };
    cr_assert_eq(model_arch_hf_walk(MODEL_ARCH_QWEN3NEXT, &hp, collect, &w), 0);
    static const char *const want[] = {
        "-1 -1 embed_tokens.weight -> token_embd.weight 100x16",
        "0 -1 input_layernorm.weight -> attn_norm.weight 16",
        "0 -1 linear_attn.in_proj_qkvz.weight -> attn_qkv.weight attn_gate.weight 16x16",
        "0 -1 linear_attn.in_proj_ba.weight -> ssm_ba.weight 4x16",
        "0 -1 linear_attn.conv1d.weight -> ssm_conv1d.weight 16x4",
        "0 -1 linear_attn.dt_bias -> ssm_dt.bias 2",
        "0 -1 linear_attn.A_log -> ssm_a 2",
        "0 -1 linear_attn.norm.weight -> ssm_norm.weight 4",
        "0 -1 linear_attn.out_proj.weight -> ssm_out.weight 16x8",
        "0 -1 post_attention_layernorm.weight -> post_attention_norm.weight 16",
        "0 -1 mlp.gate.weight -> ffn_gate_inp.weight 2x16",
        "0 0 mlp.experts.%d.gate_proj.weight -> ffn_gate_exps.weight 2x8x16",
        "0 0 mlp.experts.%d.up_proj.weight -> ffn_up_exps.weight 2x8x16",
        "0 0 mlp.experts.%d.down_proj.weight -> ffn_down_exps.weight 2x16x8",
        "0 1 mlp.experts.%d.gate_proj.weight -> ffn_gate_exps.weight 2x8x16",
        "0 1 mlp.experts.%d.up_proj.weight -> ffn_up_exps.weight 2x8x16",
        "0 1 mlp.experts.%d.down_proj.weight -> ffn_down_exps.weight 2x16x8",
        "0 -1 mlp.shared_expert.gate_proj.weight -> ffn_gate_shexp.weight 8x16",
        "0 -1 mlp.shared_expert.up_proj.weight -> ffn_up_shexp.weight 8x16",
        "0 -1 mlp.shared_expert.down_proj.weight -> ffn_down_shexp.weight 16x8",
        "0 -1 mlp.shared_expert_gate.weight -> ffn_gate_inp_shexp.weight 16",
        "1 -1 input_layernorm.weight -> attn_norm.weight 16",
        "1 -1 self_attn.q_proj.weight -> attn_q.weight 32x16",
        "1 -1 self_attn.k_proj.weight -> attn_k.weight 8x16",
        "1 -1 self_attn.v_proj.weight -> attn_v.weight 8x16",
        "1 -1 self_attn.o_proj.weight -> attn_output.weight 16x16",
        "1 -1 self_attn.q_norm.weight -> attn_q_norm.weight 8",
        "1 -1 self_attn.k_norm.weight -> attn_k_norm.weight 8",
        "1 -1 post_attention_layernorm.weight -> post_attention_norm.weight 16",
    };
    const int n_want = (int)(sizeof want / sizeof want[0]);
    /* then layer 1's FFN (as layer 0's, 11 tensors), the final norm and lm_head */
    cr_assert_eq(w.n, n_want + 11 + 2, "%d tensors", w.n);
    for (int i = 0; i < n_want; i++) cr_expect_str_eq(w.lines[i], want[i], "tensor %d", i);
    cr_expect_str_eq(w.lines[w.n - 2], "-1 -1 norm.weight -> output_norm.weight 16");
    cr_expect_str_eq(w.lines[w.n - 1], "-1 -1 lm_head.weight -> output.weight 100x16");

    struct walked stop = { .stop_at = 3 };
    cr_assert_eq(model_arch_hf_walk(MODEL_ARCH_QWEN3NEXT, &hp, collect, &stop), 42, "fn's nonzero return");
    cr_assert_eq(stop.n, 3);
    cr_assert_neq(model_arch_hf_walk(MODEL_ARCH_COUNT, &hp, collect, &stop), 0);
}

Test(model_arch, hf_walk_follows_each_architecture)
{
    struct model_hparams hp;
    struct walked w = { .stop_at = -1 };
    small_hparams(MODEL_ARCH_QWEN35, true, &hp);
    cr_assert_eq(model_arch_hf_walk(MODEL_ARCH_QWEN35, &hp, collect, &w), 0);
    cr_expect(walked_has(&w, "0 -1 linear_attn.in_proj_qkv.weight -> attn_qkv.weight 16x16"));
    cr_expect(walked_has(&w, "0 -1 linear_attn.in_proj_z.weight -> attn_gate.weight 8x16"));
    cr_expect(walked_has(&w, "0 -1 linear_attn.in_proj_b.weight -> ssm_beta.weight 2x16"));
    cr_expect(walked_has(&w, "1 -1 mlp.down_proj.weight -> ffn_down.weight 16x32"));
    cr_expect_str_eq(w.lines[w.n - 1], "-1 -1 norm.weight -> output_norm.weight 16", "tied: no lm_head");

    w.n = 0;
    small_hparams(MODEL_ARCH_QWEN35MOE, false, &hp);
    cr_assert_eq(model_arch_hf_walk(MODEL_ARCH_QWEN35MOE, &hp, collect, &w), 0);
    cr_expect(walked_has(&w, "0 -1 mlp.experts.gate_up_proj -> ffn_gate_exps.weight ffn_up_exps.weight 2x8x16"));
    cr_expect(walked_has(&w, "1 -1 mlp.experts.down_proj -> ffn_down_exps.weight 2x16x8"));
    cr_expect(!walked_has(&w, "1 -1 mlp.down_proj.weight -> ffn_down.weight 16x32"), "no dense FFN");
}
