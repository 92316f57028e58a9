/* q4exp_writer.h — a tiny Qwen3.8-Flash-Next (qwen4exp) model written by hand, as a Hugging
 * Face directory or as a GGUF file with the same numbers: for the loader's tests
 * (tests/unit/model/test_qwen4exp.c) and the engine's (tests/unit/engine/test_qwen4exp.c).
 *
 * One logical model in HF layout, values a function of (name, index) (val); the GGUF file is
 * derived from it as llama.cpp's converter does it (+1 folded into every zero-centred norm,
 * mixer norms as {H, n_hc}, A_log as -exp, the fused indexer projection split into q and k,
 * the table's shards concatenated, experts split into gate and up). Hk == Hv, so no value
 * heads are re-ordered. Geometry: 4 layers (attention at 3), H 8, 4 streams of rank 3, an
 * indexer of 2 heads x 4 keeping 2 blocks of 4 (so queries from position 11 on are sparse), the
 * n-gram embedding on layer 1 (N 3, 4 heads of 3, a 36-row table in 4 shards).
 * Static functions: one copy per test binary.
 */
#ifndef HS_TEST_Q4EXP_WRITER_H
#define HS_TEST_Q4EXP_WRITER_H

#include <criterion/criterion.h>

#include "format/format.h"
#include "model/model_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { L = 4, H = 8, V = 32, NH = 2, NKV = 1, HD = 8, HK = 2, HV = 2, DK = 4, DV = 4, KC = 4, E = 4, EU = 2,
       IE = 8, IS = 8, HCN = 4, HCR = 3, IXH = 2, IXD = 4, NG = 3, HPN = 2, PH = 4, PR = 3, PK = 4,
       SHARDS = 4, EOS = 30 };
#define NHH (HCN * H)
static const uint64_t mods[PH] = { 5, 7, 11, 13 }, offs[PH] = { 0, 5, 12, 23 }, mults[NG] = { 3, 5, 7 };
#define PLE_ROWS 36 /* offs[3] + mods[3] */

struct q4_opts {
    bool gguf;
    int ple_layer;              /* written as ple_layer_ids / ple.layers */
    uint64_t mult0;             /* first multiplier (0: mults[0]) */
    const char *omit;           /* a file tensor (or GGUF key) left out */
    const char *zero;           /* a file tensor written as zeros */
};

struct writer {
    bool gguf;
    struct st_writer *st;
    struct gguf_writer *gg;
    void *bufs[1024];
    int n_bufs;
    const char *omit, *zero;
};

static uint32_t name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

/* The logical value i of HF tensor `name`: small, distinct, reproducible. */
static float val(const char *name, int64_t i)
{
    uint32_t x = name_hash(name) ^ (uint32_t)(i * 2654435761u);
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    return ((float)(x % 2001u) - 1000.0f) / 4096.0f;
}

static float *vals(struct writer *w, const char *hf, int64_t n)
{
    float *v = malloc((size_t)n * sizeof *v);
    for (int64_t i = 0; i < n; i++) v[i] = val(hf, i);
    w->bufs[w->n_bufs++] = v;
    return v;
}

static void put(struct writer *w, const char *name, int n_dims, const int64_t *shape, const float *v)
{
    if (w->omit && strcmp(w->omit, name) == 0) return;
    int64_t n = 1;
    for (int d = 0; d < n_dims; d++) n *= shape[d];
    if (w->zero && strcmp(w->zero, name) == 0) memset((float *)v, 0, (size_t)n * sizeof(float));
    if (w->gguf) gguf_writer_add_tensor(w->gg, name, DTYPE_F32, n_dims, shape, v, (uint64_t)n * 4);
    else st_writer_add(w->st, name, DTYPE_F32, n_dims, shape, v, (uint64_t)n * 4);
}

/* HF tensor hf (prefix + name) with its shape; in GGUF as gg with gshape, transformed. */
enum xf { XF_NONE, XF_ZC, XF_NEGEXP };
static void tensor(struct writer *w, const char *hf, const char *gg, int n_dims, const int64_t *shape, int g_dims,
                   const int64_t *gshape, enum xf xf)
{
    int64_t n = 1;
    for (int d = 0; d < n_dims; d++) n *= shape[d];
    float *v = vals(w, hf, n);
    if (!w->gguf) { put(w, hf, n_dims, shape, v); return; }
    if (!gg) return;
    for (int64_t i = 0; i < n; i++) v[i] = xf == XF_ZC ? v[i] + 1.0f : xf == XF_NEGEXP ? -expf(v[i]) : v[i];
    put(w, gg, g_dims ? g_dims : n_dims, g_dims ? gshape : shape, v);
}

#define S(...) ((const int64_t[]){ __VA_ARGS__ })
#define P "model.language_model."

static void hc(struct writer *w, const char *hfm, const char *ggm, bool inject)
{
    char a[160], b[160];
    snprintf(a, sizeof a, "%s.hc_norm.weight", hfm); snprintf(b, sizeof b, "%s_norm.weight", ggm);
    tensor(w, a, b, 1, S(NHH), 2, S(HCN, H), XF_ZC);
    snprintf(a, sizeof a, "%s.input_mix_weight_down.weight", hfm); snprintf(b, sizeof b, "%s_down.weight", ggm);
    tensor(w, a, b, 2, S(HCR, NHH), 0, NULL, XF_NONE);
    snprintf(a, sizeof a, "%s.input_mix_weight_up.weight", hfm); snprintf(b, sizeof b, "%s_up.weight", ggm);
    tensor(w, a, b, 2, S(NHH, HCR), 0, NULL, XF_NONE);
    if (!inject) return;
    snprintf(a, sizeof a, "%s.block_inject_weight.weight", hfm); snprintf(b, sizeof b, "%s_inject.weight", ggm);
    tensor(w, a, b, 2, S(HCN, NHH), 0, NULL, XF_NONE);
}

static void i64_buffer(struct writer *w, const char *name, const uint64_t *v, int64_t n)
{
    if (w->gguf || (w->omit && strcmp(w->omit, name) == 0)) return;
    st_writer_add(w->st, name, DTYPE_I64, 1, S(n), v, (uint64_t)n * 8);
}

static void write_layers(struct writer *w, const struct q4_opts *o)
{
    char hf[192], gg[192], hp[64], gp[32];
    for (int il = 0; il < L; il++) {
        snprintf(hp, sizeof hp, P "layers.%d.", il);
        snprintf(gp, sizeof gp, "blk.%d.", il);
#define T(hn, gn, ...) (snprintf(hf, sizeof hf, "%s%s", hp, hn), snprintf(gg, sizeof gg, "%s%s", gp, gn), \
                        tensor(w, hf, gg, __VA_ARGS__))
        snprintf(hf, sizeof hf, "%sattn_hyper_connection", hp); snprintf(gg, sizeof gg, "%shc_attn", gp);
        hc(w, hf, gg, true);
        snprintf(hf, sizeof hf, "%smlp_hyper_connection", hp); snprintf(gg, sizeof gg, "%shc_ffn", gp);
        hc(w, hf, gg, true);
        if (il == o->ple_layer) {
            T("ple.key_proj.weight", "ple_key.weight", 2, S(NHH, PH * PR), 0, NULL, XF_NONE);
            T("ple.value_proj.weight", "ple_value.weight", 2, S(H, PH * PR), 0, NULL, XF_NONE);
            T("ple.norm_key.weight", "ple_norm_key.weight", 1, S(NHH), 2, S(HCN, H), XF_ZC);
            T("ple.norm_query.weight", "ple_norm_query.weight", 1, S(NHH), 2, S(HCN, H), XF_ZC);
            T("ple.norm_conv.weight", "ple_norm_conv.weight", 1, S(NHH), 2, S(HCN, H), XF_ZC);
            T("ple.conv1d.weight", "ple_conv1d.weight", 3, S(NHH, 1, PK), 2, S(NHH, PK), XF_NONE);
            snprintf(hf, sizeof hf, "%sple.ple_embedding.layer_multipliers", hp);
            uint64_t *m = malloc(sizeof(uint64_t) * NG); /* borrowed until the write */
            m[0] = o->mult0 ? o->mult0 : mults[0], m[1] = mults[1], m[2] = mults[2];
            w->bufs[w->n_bufs++] = m;
            i64_buffer(w, hf, m, NG);
            snprintf(hf, sizeof hf, "%sple.ple_embedding.ngram_heads_offsets", hp);
            i64_buffer(w, hf, offs, PH);
            snprintf(hf, sizeof hf, "%sple.ple_embedding.ngram_heads_vocab_sizes", hp);
            i64_buffer(w, hf, mods, PH);
        }
        if ((il + 1) % 4 == 0) {
            T("self_attn.q_proj.weight", "attn_q.weight", 2, S(2 * NH * HD, H), 0, NULL, XF_NONE);
            T("self_attn.k_proj.weight", "attn_k.weight", 2, S(NKV * HD, H), 0, NULL, XF_NONE);
            T("self_attn.v_proj.weight", "attn_v.weight", 2, S(NKV * HD, H), 0, NULL, XF_NONE);
            T("self_attn.o_proj.weight", "attn_output.weight", 2, S(H, NH * HD), 0, NULL, XF_NONE);
            T("self_attn.q_norm.weight", "attn_q_norm.weight", 1, S(HD), 0, NULL, XF_ZC);
            T("self_attn.k_norm.weight", "attn_k_norm.weight", 1, S(HD), 0, NULL, XF_ZC);
            snprintf(hf, sizeof hf, "%sself_attn.indexer.index_qk_proj.weight", hp);
            float *qk = vals(w, hf, (IXH + 1) * IXD * H);
            if (!w->gguf) {
                put(w, hf, 2, S((IXH + 1) * IXD, H), qk);
            } else {
                snprintf(gg, sizeof gg, "%sindexer.q_proj.weight", gp);
                put(w, gg, 2, S(IXH * IXD, H), qk);
                snprintf(gg, sizeof gg, "%sindexer.k_proj.weight", gp);
                put(w, gg, 2, S(IXD, H), qk + IXH * IXD * H);
            }
            T("self_attn.indexer.q_layernorm.weight", "indexer.q_norm.weight", 1, S(IXD), 0, NULL, XF_ZC);
            T("self_attn.indexer.k_layernorm.weight", "indexer.k_norm.weight", 1, S(IXD), 0, NULL, XF_ZC);
        } else {
            const int64_t C = 2 * HK * DK + HV * DV;
            T("linear_attn.in_proj_qkv.weight", "attn_qkv.weight", 2, S(C, H), 0, NULL, XF_NONE);
            T("linear_attn.in_proj_z.weight", "attn_gate.weight", 2, S(HV * DV, H), 0, NULL, XF_NONE);
            T("linear_attn.in_proj_b.weight", "ssm_beta.weight", 2, S(HV, H), 0, NULL, XF_NONE);
            T("linear_attn.in_proj_a.weight", "ssm_alpha.weight", 2, S(HV, H), 0, NULL, XF_NONE);
            T("linear_attn.conv1d.weight", "ssm_conv1d.weight", 3, S(C, 1, KC), 2, S(C, KC), XF_NONE);
            T("linear_attn.dt_bias", "ssm_dt.bias", 1, S(HV), 0, NULL, XF_NONE);
            T("linear_attn.A_log", "ssm_a", 1, S(HV), 0, NULL, XF_NEGEXP);
            T("linear_attn.norm.weight", "ssm_norm.weight", 1, S(DV), 0, NULL, XF_NONE);
            T("linear_attn.out_proj.weight", "ssm_out.weight", 2, S(H, HV * DV), 0, NULL, XF_NONE);
        }
        T("mlp.gate.weight", "ffn_gate_inp.weight", 2, S(E, H), 0, NULL, XF_NONE);
        snprintf(hf, sizeof hf, "%smlp.experts.gate_up_proj", hp);
        float *gu = vals(w, hf, E * 2 * IE * H);
        if (!w->gguf) {
            put(w, hf, 3, S(E, 2 * IE, H), gu);
        } else {
            float *g = vals(w, "", E * IE * H), *u = vals(w, "", E * IE * H);
            for (int e = 0; e < E; e++) {
                memcpy(g + e * IE * H, gu + (e * 2 * IE) * H, IE * H * sizeof(float));
                memcpy(u + e * IE * H, gu + (e * 2 * IE + IE) * H, IE * H * sizeof(float));
            }
            snprintf(gg, sizeof gg, "%sffn_gate_exps.weight", gp);
            put(w, gg, 3, S(E, IE, H), g);
            snprintf(gg, sizeof gg, "%sffn_up_exps.weight", gp);
            put(w, gg, 3, S(E, IE, H), u);
        }
        T("mlp.experts.down_proj", "ffn_down_exps.weight", 3, S(E, H, IE), 0, NULL, XF_NONE);
        T("mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight", 2, S(IS, H), 0, NULL, XF_NONE);
        T("mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight", 2, S(IS, H), 0, NULL, XF_NONE);
        T("mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight", 2, S(H, IS), 0, NULL, XF_NONE);
        T("mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight", 2, S(1, H), 1, S(H), XF_NONE);
#undef T
    }
}

static void write_table(struct writer *w, const struct q4_opts *o)
{
    /* logical table: shard i holds rows [i*9, i*9+9); GGUF holds them all, in order */
    const int per = PLE_ROWS / SHARDS;
    float *all = vals(w, "", PLE_ROWS * PR);
    char name[192];
    for (int s = 0; s < SHARDS; s++) {
        snprintf(name, sizeof name, P "layers.%d.ple.ple_embedding.ngram_embedding.shard_%d.weight", o->ple_layer, s);
        for (int i = 0; i < per * PR; i++) all[s * per * PR + i] = val(name, i);
        if (!w->gguf) put(w, name, 2, S(per, PR), all + s * per * PR);
    }
    if (w->gguf) put(w, "per_layer_token_embd.weight", 2, S(PLE_ROWS, PR), all);
}

static void write_config(const char *dir, const struct q4_opts *o)
{
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fprintf(f, "{\"architectures\": [\"Qwen4ExpForConditionalGeneration\"], \"model_type\": \"qwen4_exp\",\n"
               " \"text_config\": {\"model_type\": \"qwen4_exp_text\", \"vocab_size\": %d, \"hidden_size\": %d,\n"
               "  \"num_hidden_layers\": %d, \"num_attention_heads\": %d, \"num_key_value_heads\": %d, \"head_dim\": %d,\n"
               "  \"layer_types\": [\"linear_attention\", \"linear_attention\", \"linear_attention\", \"full_attention\"],\n"
               "  \"linear_num_key_heads\": %d, \"linear_num_value_heads\": %d, \"linear_key_head_dim\": %d,\n"
               "  \"linear_value_head_dim\": %d, \"linear_conv_kernel_dim\": %d, \"output_gate_type\": \"sigmoid\",\n"
               "  \"num_experts\": %d, \"num_experts_per_tok\": %d, \"moe_intermediate_size\": %d,\n"
               "  \"shared_expert_intermediate_size\": %d, \"hc_count\": %d, \"hc_lowrank\": %d,\n"
               "  \"indexer_n_heads\": %d, \"indexer_kv_heads\": 1, \"indexer_head_dim\": %d, \"indexer_budget\": 8,\n"
               "  \"indexer_compress_ratio\": 4, \"ple_layer_ids\": [%d], \"ple_embed_dim\": %d,\n"
               "  \"ple_conv_kernel_size\": %d, \"ngram_size\": %d, \"heads_per_ngram\": %d, \"eos_token_id\": %d,\n"
               "  \"rms_norm_eps\": 1e-6, \"tie_word_embeddings\": false,\n"
               "  \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 10000000.0, \"partial_rotary_factor\": 0.25}}}\n",
            V, H, L, NH, NKV, HD, HK, HV, DK, DV, KC, E, EU, IE, IS, HCN, HCR, IXH, IXD, o->ple_layer + 1, PH * PR, PK,
            NG, HPN, EOS);
    fclose(f);
}

static void gguf_keys(struct gguf_writer *g, const struct q4_opts *o)
{
    gguf_writer_set_str(g, "general.architecture", "qwen4exp");
#define U(k, v) gguf_writer_set_u32(g, "qwen4exp." k, (uint32_t)(v))
    U("block_count", L); U("context_length", 4096); U("embedding_length", H);
    U("attention.head_count", NH); U("attention.head_count_kv", NKV); U("attention.key_length", HD);
    U("attention.value_length", HD); U("rope.dimension_count", HD / 4);
    gguf_writer_set_f32(g, "qwen4exp.rope.freq_base", 1e7f);
    gguf_writer_set_f32(g, "qwen4exp.attention.layer_norm_rms_epsilon", 1e-6f);
    U("ssm.conv_kernel", KC); U("ssm.state_size", DK); U("ssm.group_count", HK); U("ssm.time_step_rank", HV);
    U("ssm.inner_size", HV * DV); U("full_attention_interval", 4);
    U("expert_count", E); U("expert_used_count", EU); U("expert_feed_forward_length", IE);
    U("expert_shared_feed_forward_length", IS);
    U("hyper_connection.count", HCN); U("hyper_connection.low_rank", HCR);
    U("attention.indexer.head_count", IXH); U("attention.indexer.key_length", IXD); U("attention.indexer.top_k", 8);
    U("ple.ngram_size", NG); U("ple.heads_per_ngram", HPN); U("ple.conv_kernel", PK);
    U("embedding_length_per_layer_input", PR); U("ple.eos_token_id", EOS);
#undef U
    gguf_writer_set_arr_i32(g, "qwen4exp.attention.compress_ratios", (const int32_t[]){ 0, 0, 0, 4 }, L);
    gguf_writer_set_arr_i32(g, "qwen4exp.ple.layers", (const int32_t[]){ o->ple_layer }, 1);
    static const char *const keys[3] = { "qwen4exp.ple.layer_multipliers", "qwen4exp.ple.head_offsets",
                                         "qwen4exp.ple.head_vocab_sizes" };
    uint64_t m[NG] = { o->mult0 ? o->mult0 : mults[0], mults[1], mults[2] };
    const uint64_t *arrs[3] = { m, offs, mods };
    const uint64_t lens[3] = { NG, PH, PH };
    for (int k = 0; k < 3; k++) {
        if (o->omit && strcmp(o->omit, keys[k]) == 0) continue;
        struct gguf_value items[PH], v = { .type = GGUF_TYPE_ARRAY };
        for (uint64_t i = 0; i < lens[k]; i++) items[i] = (struct gguf_value){ .type = GGUF_TYPE_UINT64, .v.u = arrs[k][i] };
        v.v.arr.elem_type = GGUF_TYPE_UINT64;
        v.v.arr.n = lens[k];
        v.v.arr.items = items;
        gguf_writer_set_value(g, keys[k], &v);
    }
}

/* Writes the model under dir (HF) or dir/m.gguf and returns the path to load. */
static char *write_model(const char *dir, const struct q4_opts *o)
{
    struct writer w = { .gguf = o->gguf, .omit = o->omit, .zero = o->zero };
    if (o->gguf) { w.gg = gguf_writer_new(); gguf_keys(w.gg, o); }
    else w.st = st_writer_new();
    tensor(&w, P "embed_tokens.weight", "token_embd.weight", 2, S(V, H), 0, NULL, XF_NONE);
    write_table(&w, o);
    write_layers(&w, o);
    hc(&w, P "hyper_connection_mixer", "output_hc", false);
    tensor(&w, "lm_head.weight", "output.weight", 2, S(V, H), 0, NULL, XF_NONE);
    char *path = malloc(512);
    struct hs_err err = { 0 };
    if (o->gguf) {
        snprintf(path, 512, "%s/m.gguf", dir);
        cr_assert_eq(gguf_writer_write(w.gg, path, &err), HS_OK, "%s", err.msg);
        gguf_writer_free(w.gg);
    } else {
        char st[512];
        snprintf(st, sizeof st, "%s/model.safetensors", dir);
        cr_assert_eq(st_writer_write(w.st, st, &err), HS_OK, "%s", err.msg);
        st_writer_free(w.st);
        write_config(dir, o);
        snprintf(path, 512, "%s", dir);
    }
    for (int i = 0; i < w.n_bufs; i++) free(w.bufs[i]);
    return path;
}

/* The suites' temporary directory (Criterion .init / .fini of both test files). */
static char tmpdir[64];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/hs-q4exp-XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    cr_assert_eq(system(cmd), 0);
}

#endif
