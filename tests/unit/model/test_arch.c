/* test_arch.c — what model/ tells a writer about an architecture (model_arch_info,
 * model_arch_gguf_name), read from the arch_*.c tables. */
#include <criterion/criterion.h>
#include "model/model.h"

#include <string.h>

Test(model_arch, info_of_each_architecture)
{
    struct model_arch_info i;
    cr_assert(model_arch_info(MODEL_ARCH_QWEN35, &i));
    cr_assert_str_eq(i.name, "qwen35");
    cr_assert_str_eq(i.hf_architecture, "Qwen3_5ForConditionalGeneration");
    cr_assert_str_eq(i.hf_model_type, "qwen3_5");
    cr_assert_str_eq(i.hf_text_model_type, "qwen3_5_text");
    cr_assert(!i.moe && i.gguf_v_tiled && i.mrope && i.tied && !i.fused_gdn);
    cr_assert_eq(i.defaults.rope_theta, 1e7);
    cr_assert_eq(i.defaults.full_attn_interval, 4);
    cr_assert(model_arch_info(MODEL_ARCH_QWEN3NEXT, &i));
    cr_assert_null(i.hf_text_model_type, "a flat config");
    cr_assert_str_eq(i.tokenizer_pre, "qwen2");
    cr_assert(i.moe && i.fused_gdn && !i.fused_experts && !i.gguf_v_tiled && !i.norm_topk_always);
    cr_assert(model_arch_info(MODEL_ARCH_QWEN35MOE, &i));
    cr_assert(i.moe && i.fused_experts && i.norm_topk_always);
    cr_assert(!model_arch_info(MODEL_ARCH_COUNT, &i));
}

Test(model_arch, gguf_names_from_the_spec_tables)
{
    static const struct { enum model_arch a; const char *hf; int part; const char *want; } cases[] = {
        { MODEL_ARCH_QWEN35, "embed_tokens.weight", 0, "token_embd.weight" },
        { MODEL_ARCH_QWEN35, "lm_head.weight", 0, "output.weight" },
        { MODEL_ARCH_QWEN35, "linear_attn.in_proj_z.weight", 0, "attn_gate.weight" },
        { MODEL_ARCH_QWEN35, "linear_attn.conv1d.weight", 0, "ssm_conv1d.weight" }, /* another row */
        { MODEL_ARCH_QWEN35, "linear_attn.in_proj_z.weight", 1, NULL },             /* no split */
        { MODEL_ARCH_QWEN35, "linear_attn.in_proj_qkvz.weight", 0, NULL },          /* not qwen35's */
        { MODEL_ARCH_QWEN3NEXT, "linear_attn.in_proj_qkvz.weight", 0, "attn_qkv.weight" },
        { MODEL_ARCH_QWEN3NEXT, "linear_attn.in_proj_qkvz.weight", 1, "attn_gate.weight" },
        { MODEL_ARCH_QWEN3NEXT, "linear_attn.in_proj_ba.weight", 0, "ssm_ba.weight" },
        { MODEL_ARCH_QWEN3NEXT, "mlp.experts.%d.up_proj.weight", 0, "ffn_up_exps.weight" },
        { MODEL_ARCH_QWEN35MOE, "mlp.experts.gate_up_proj", 0, "ffn_gate_exps.weight" },
        { MODEL_ARCH_QWEN35MOE, "mlp.experts.gate_up_proj", 1, "ffn_up_exps.weight" },
        { MODEL_ARCH_QWEN35MOE, "mlp.shared_expert_gate.weight", 0, "ffn_gate_inp_shexp.weight" },
        { MODEL_ARCH_QWEN35MOE, "no.such.weight", 0, NULL },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *got = model_arch_gguf_name(cases[i].a, cases[i].hf, cases[i].part);
        if (!cases[i].want) cr_expect_null(got, "%s part %d: %s", cases[i].hf, cases[i].part, got);
        else cr_expect(got && !strcmp(got, cases[i].want), "%s part %d: %s, want %s", cases[i].hf,
                       cases[i].part, got ? got : "NULL", cases[i].want);
    }
}
