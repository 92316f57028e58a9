/*
 * mkmodel.c — `headstart mkmodel`: deterministic random-weight models of the Qwen3.5 family
 * (qwen35, qwen35moe, qwen3next), written as a Hugging Face directory or as a GGUF file that
 * llama.cpp loads. Tests and benchmarks use these instead of downloads.
 *
 * Design note
 * -----------
 * One model, two spellings. The weights are defined once, in Hugging Face layout: every HF
 * tensor is a *source* whose values come from its own PRNG stream, keyed by (seed, HF tensor
 * name, row). A *plan* lists the output tensors and, for each source, a *route* that says
 * where each of its rows lands and a *transform* applied on the way:
 *
 *     HF source row ──generate──▶ f32 row ──(column tiling)──▶ (+1 | -exp) ──▶ dtype ──▶ output row
 *
 * The HF plan is the identity. The GGUF plan applies llama.cpp's conversion conventions
 * (docs/MODELS.md §8.3): zero-centred norms folded (+1), ssm_a = -exp(A_log),
 * value heads tiled for qwen35/qwen35moe when Hk != Hv (new head j*Hk + g <- old head g*r + j;
 * rows of the V part of qkv, z, a, b and conv channels, columns of ssm_out, entries of ssm_a
 * and dt_bias), conv1d squeezed to [C, K], Qwen3-Next in_proj_qkvz split into attn_qkv
 * (q heads, k heads, v heads grouped) + attn_gate, in_proj_ba kept grouped as ssm_ba, fused
 * gate_up_proj split and per-expert tensors stacked into ffn_{gate,up,down}_exps.
 *
 * Value scales keep activations sane: matrices ~ N(0, 1/fan_in) (std 1/sqrt(fan_in), fan_in =
 * the last dimension), HF zero-centred norm weights ~ N(0, 0.05^2) (so 1+w is near 1), the GDN
 * output norm ~ 1 + N(0, 0.05^2), A_log = log(U(0.2, 1.0)) (decays exp(-A softplus(.)) well
 * inside (0, 1)), dt_bias ~ N(0, 0.1^2), conv taps ~ N(0, 1/K). Normals come from splitmix64
 * and Box-Muller in f32. Rows are generated in parallel (each row has its own stream).
 *
 * Memory: the format writers borrow tensor data until they write, so every output tensor is
 * held at once: peak RSS is about the output size (0.8b in q8_0: ~0.8 GiB).
 *
 * Invariants:
 *   1. Same options => same bytes: a value depends only on (seed, HF tensor name, row, column),
 *      never on thread count, output format or the order tensors are produced in.
 *   2. The HF and GGUF files of one seed describe the same model: GGUF values are the HF values
 *      after the conventions above, rounded to the same dtype (transforms are exact
 *      permutations, f32 `1.0f + w` and f32 `-expf(A_log)`).
 *   3. Matrices (2-D projections, embeddings, experts, router) are stored in --dtype; 1-D
 *      tensors (norms, A_log, dt_bias), conv taps and the shared-expert gate vector stay f32.
 *      Q8_0 uses llama.cpp's block: f16 d = max|x|/127, then 32 int8 q = round(x/d).
 *      --dtype q4_k_m (GGUF only; stored as DTYPE_Q4_K in the options) is llama.cpp's
 *      Q4_K_M type mix, per tensor, as llama-quant.cpp chooses it for Qwen3.5 (layers sorted
 *      by number, one attn_v-like tensor per layer): output.weight, and token_embd.weight
 *      when tied, Q6_K; attn_v / attn_qkv and ffn_down* of layer il Q6_K when
 *      use_more_bits(il, n_layer) (il < n/8, il >= 7n/8, or (il - n/8) % 3 == 2), else Q4_K;
 *      every other quantized matrix Q4_K; the MoE router stays f32 (llama.cpp does not
 *      quantize ffn_gate_inp). A row that is not whole 256-value super-blocks falls back to
 *      Q8_0 (llama.cpp: Q6_K -> Q8_0 as here, Q4_K -> Q5_0, which our kernels lack).
 *      --dtype q5_k_m (GGUF only; DTYPE_Q5_K in the options) is the same rule with Q5_K
 *      wherever q4_k_m writes Q4_K (llama.cpp's Q5_K_M; its Q5_K -> Q5_1 fallback is Q8_0
 *      here). 8-expert models are refused for both: llama.cpp's rule for them (Q5_K
 *      attn_output, Q8_0 attn_k / attn_v) is not implemented here.
 *      The quantizers are our own round-to-nearest (mk_store_q4k / _q5k / _q6k), not
 *      llama.cpp's error-minimising search: the files are valid Q4_K_M / Q5_K_M, not
 *      bit-equal to what llama-quantize would write from the same f32 weights.
 *   4. Every file is written atomically (temp + fsync + rename); an HF directory gets its
 *      config.json last, so an interrupted run never leaves a directory that looks complete.
 *   5. Options are validated before anything is generated; each error names the option.
 */
#include "model/model.h"
#include "model/mktok_int.h"
#include "format/format.h"
#include "sys/sys.h"
#include "base/base.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Generated at build time by tools/embed_template.sh; NULL when no bundle was installed. */
extern const char *const hs_chat_template_qwen35;

#define MK_NAME_MAX 128
#define MK_TEMPLATE_MAX (4u << 20)
#define MK_MAX_EXPERTS 1024 /* llama.cpp's LLAMA_MAX_EXPERTS */
#define MK_DIM_MAX (1ll << 24)

/* ---- architectures and presets ------------------------------------------------------- */

struct mk_arch {
    const char *gguf_name;       /* general.architecture */
    const char *hf_prefix;       /* text-model tensor prefix */
    const char *hf_arch;         /* config.json architectures[0] */
    const char *model_type;      /* root model_type */
    const char *text_model_type; /* text_config.model_type; NULL = flat config */
    bool moe;                    /* every layer's FFN is a mixture of experts */
    bool fused_gdn;              /* in_proj_qkvz + in_proj_ba, grouped by key head */
    bool fused_experts;          /* mlp.experts.gate_up_proj / down_proj (3-D) */
    bool tile_v_heads;           /* GGUF value heads tiled by the converter */
    bool mrope;                  /* rope.dimension_sections / rope_parameters.mrope_* */
    bool tied;                   /* tie_word_embeddings */
    int64_t real_vocab;          /* embedding rows of the real checkpoints */
};

static const struct mk_arch mk_archs[MODEL_ARCH_COUNT] = {
    [MODEL_ARCH_QWEN35] = { "qwen35", "model.language_model.", "Qwen3_5ForConditionalGeneration",
                            "qwen3_5", "qwen3_5_text", false, false, false, true, true, true, 248320 },
    [MODEL_ARCH_QWEN35MOE] = { "qwen35moe", "model.language_model.",
                               "Qwen3_5MoeForConditionalGeneration", "qwen3_5_moe",
                               "qwen3_5_moe_text", true, false, true, true, true, false, 248320 },
    [MODEL_ARCH_QWEN3NEXT] = { "qwen3next", "model.", "Qwen3NextForCausalLM", "qwen3_next", NULL,
                               true, true, false, false, false, false, 151936 },
};

/* Trunk geometry of each preset. The real sizes are the dense Qwen3.5 checkpoints
 * (docs/MODELS.md §1.3); MoE architectures get E experts of width n_ff/4 on that trunk. */
struct mk_preset {
    const char *name;
    int64_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff;
    int64_t gdn_k_heads, gdn_v_heads, gdn_head_dim;
    int64_t n_expert, n_expert_used, n_ff_exp;
    int64_t n_ctx;
    bool real_vocab; /* pad the vocabulary to the architecture's real size */
};

static const struct mk_preset mk_presets[] = {
    { "tiny", 4, 64, 4, 2, 32, 128, 2, 4, 32, 4, 2, 32, 4096, false },
    { "0.8b", 24, 1024, 8, 2, 256, 3584, 16, 16, 128, 8, 2, 896, 262144, true },
    { "2b", 24, 2048, 8, 2, 256, 6144, 16, 16, 128, 8, 2, 1536, 262144, true },
    { "4b", 32, 2560, 16, 4, 256, 9216, 16, 32, 128, 8, 2, 2304, 262144, true },
};

struct mk_geom {
    int64_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_rot, n_ff;
    int64_t hk, hv, dk, dv, conv_k;
    int64_t n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
    int64_t n_vocab, n_ctx, full_attn_interval;
    float rope_theta, rms_eps;
    bool tied;
};

static bool mk_layer_is_full(const struct mk_geom *g, int64_t il)
{
    return (il + 1) % g->full_attn_interval == 0;
}

/* ---- the plan: sources, routes, outputs ---------------------------------------------- */

enum mk_route {
    MK_ROUTE_SAME,      /* row r -> row r of dst */
    MK_ROUTE_TILE_ROWS, /* rows [p0, p0 + Hv*p1) are value heads of p1 rows: grouped -> tiled */
    MK_ROUTE_TILE_COLS, /* columns are value heads of p1 columns: grouped -> tiled */
    MK_ROUTE_QKVZ,      /* Qwen3-Next in_proj_qkvz -> attn_qkv (dst) + attn_gate (dst2) */
    MK_ROUTE_GATE_UP,   /* [E, 2I, H] -> gate (dst) + up (dst2), each [E, I, H]; p0 = I */
    MK_ROUTE_STACK,     /* expert p0's matrix -> its slice of a stacked [E, rows, cols] dst */
};

enum mk_xform { MK_XFORM_NONE, MK_XFORM_PLUS_ONE, MK_XFORM_NEG_EXP };

/* How a source's values are drawn. */
enum mk_init {
    MK_INIT_MATRIX,   /* N(0, 1/fan_in) */
    MK_INIT_NORM_ZC,  /* zero-centred norm weight (HF: used as 1 + w) */
    MK_INIT_NORM_ONE, /* plain norm weight near 1 */
    MK_INIT_A_LOG,
    MK_INIT_DT_BIAS,
    MK_INIT_CONV,     /* N(0, 1/K) */
};

struct mk_src {
    char name[MK_NAME_MAX]; /* HF name: also the key of the PRNG stream */
    int n_dims;
    int64_t shape[TENSOR_MAX_DIMS];
    enum mk_init init;
    bool quant;             /* stored in --dtype (else f32) */
};

struct mk_out {
    char name[MK_NAME_MAX];
    enum dtype dtype;
    int n_dims;
    int64_t shape[TENSOR_MAX_DIMS];
    int64_t row_len, n_rows;
    uint64_t row_bytes, n_bytes;
    uint8_t *data; /* owned */
};

struct mk_job {
    struct mk_src src;
    enum mk_route route;
    enum mk_xform xform;
    int dst, dst2;
    int64_t p0, p1;
};

struct mk_plan {
    struct mk_out *outs;
    int n_outs, cap_outs;
    struct mk_job *jobs;
    int n_jobs, cap_jobs;
    int64_t max_row;
    uint64_t total_bytes;
};

static void mk_plan_free(struct mk_plan *p)
{
    for (int i = 0; i < p->n_outs; i++) hs_free(p->outs[i].data);
    hs_free(p->outs);
    hs_free(p->jobs);
    memset(p, 0, sizeof(*p));
}

/* Add an output tensor (data allocated later); returns its index or a negative status. */
static int mk_out_add(struct mk_plan *p, const char *name, enum dtype dt, int n_dims,
                      const int64_t *shape, struct hs_err *err)
{
    if (p->n_outs == p->cap_outs) {
        p->cap_outs = p->cap_outs ? 2 * p->cap_outs : 64;
        p->outs = hs_realloc(p->outs, (size_t)p->cap_outs * sizeof(*p->outs));
    }
    struct mk_out *o = &p->outs[p->n_outs];
    memset(o, 0, sizeof(*o));
    snprintf(o->name, sizeof(o->name), "%s", name);
    o->dtype = dt;
    o->n_dims = n_dims;
    o->n_rows = 1;
    for (int d = 0; d < n_dims; d++) {
        o->shape[d] = shape[d];
        if (d < n_dims - 1) o->n_rows *= shape[d];
    }
    o->row_len = shape[n_dims - 1];
    uint64_t n_bytes;
    if (!dtype_row_bytes(dt, (uint64_t)o->row_len, &o->row_bytes) ||
        hs_mul_overflow(o->row_bytes, (uint64_t)o->n_rows, &n_bytes) ||
        hs_add_overflow(p->total_bytes, n_bytes, &p->total_bytes))
        return hs_err_set(err, HS_ERR_LIMIT, "tensor '%s': %s rows of %lld values do not fit",
                          name, dtype_info(dt)->name, (long long)o->row_len);
    o->n_bytes = n_bytes;
    return p->n_outs++;
}

static void mk_job_add(struct mk_plan *p, const struct mk_src *src, enum mk_route route,
                       enum mk_xform xform, int dst, int dst2, int64_t p0, int64_t p1)
{
    if (p->n_jobs == p->cap_jobs) {
        p->cap_jobs = p->cap_jobs ? 2 * p->cap_jobs : 64;
        p->jobs = hs_realloc(p->jobs, (size_t)p->cap_jobs * sizeof(*p->jobs));
    }
    struct mk_job *j = &p->jobs[p->n_jobs++];
    j->src = *src;
    j->route = route;
    j->xform = xform;
    j->dst = dst;
    j->dst2 = dst2;
    j->p0 = p0;
    j->p1 = p1;
    p->max_row = HS_MAX(p->max_row, src->shape[src->n_dims - 1]);
}

/* ---- GGUF conventions, per HF tensor role ------------------------------------------- */

enum mk_role {
    MK_ROLE_EMBD, MK_ROLE_OUT_NORM, MK_ROLE_OUTPUT,
    MK_ROLE_ATTN_NORM, MK_ROLE_POST_NORM,
    MK_ROLE_Q, MK_ROLE_K, MK_ROLE_V, MK_ROLE_O, MK_ROLE_Q_NORM, MK_ROLE_K_NORM,
    MK_ROLE_QKV, MK_ROLE_Z, MK_ROLE_B, MK_ROLE_A, MK_ROLE_QKVZ, MK_ROLE_BA,
    MK_ROLE_CONV, MK_ROLE_DT, MK_ROLE_A_LOG, MK_ROLE_SSM_NORM, MK_ROLE_SSM_OUT,
    MK_ROLE_FFN_GATE, MK_ROLE_FFN_UP, MK_ROLE_FFN_DOWN,
    MK_ROLE_ROUTER, MK_ROLE_EXP_GATE_UP, MK_ROLE_EXP_DOWN_3D,
    MK_ROLE_EXP_GATE, MK_ROLE_EXP_UP, MK_ROLE_EXP_DOWN,
    MK_ROLE_SH_GATE, MK_ROLE_SH_UP, MK_ROLE_SH_DOWN, MK_ROLE_SH_GATE_INP,
    MK_ROLE_COUNT
};

/* Value-head tiling a role needs in tiled GGUFs (qwen35/qwen35moe with Hk != Hv). */
enum mk_tile { MK_TILE_NONE, MK_TILE_ROWS_AFTER_QK, MK_TILE_ROWS_DV, MK_TILE_ROWS_1,
               MK_TILE_COLS_DV, MK_TILE_COLS_1 };

enum mk_shape_rule { MK_SHAPE_SAME, MK_SHAPE_SQUEEZE_MID, MK_SHAPE_FLAT, MK_SHAPE_SPLIT,
                     MK_SHAPE_STACK };

static const struct mk_role_info {
    const char *gguf;  /* name pattern (%d = layer) */
    const char *gguf2; /* second output of a split */
    enum mk_route route;
    enum mk_xform xform;
    enum mk_tile tile;
    enum mk_shape_rule shape;
} mk_roles[MK_ROLE_COUNT] = {
    [MK_ROLE_EMBD] = { "token_embd.weight", NULL, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_OUT_NORM] = { "output_norm.weight", NULL, MK_ROUTE_SAME, MK_XFORM_PLUS_ONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_OUTPUT] = { "output.weight", NULL, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_ATTN_NORM] = { "blk.%d.attn_norm.weight", NULL, MK_ROUTE_SAME, MK_XFORM_PLUS_ONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_POST_NORM] = { "blk.%d.post_attention_norm.weight", NULL, MK_ROUTE_SAME, MK_XFORM_PLUS_ONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_Q] = { "blk.%d.attn_q.weight", NULL, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_K] = { "blk.%d.attn_k.weight", NULL, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_V] = { "blk.%d.attn_v.weight", NULL, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_O] = { "blk.%d.attn_output.weight", NULL, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_Q_NORM] = { "blk.%d.attn_q_norm.weight", NULL, MK_ROUTE_SAME, MK_XFORM_PLUS_ONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_K_NORM] = { "blk.%d.attn_k_norm.weight", NULL, MK_ROUTE_SAME, MK_XFORM_PLUS_ONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_QKV] = { "blk.%d.attn_qkv.weight", NULL, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_ROWS_AFTER_QK, MK_SHAPE_SAME },
    [MK_ROLE_Z] = { "blk.%d.attn_gate.weight", NULL, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_ROWS_DV, MK_SHAPE_SAME },
    [MK_ROLE_B] = { "blk.%d.ssm_beta.weight", NULL, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_ROWS_1, MK_SHAPE_SAME },
    [MK_ROLE_A] = { "blk.%d.ssm_alpha.weight", NULL, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_ROWS_1, MK_SHAPE_SAME },
    [MK_ROLE_QKVZ] = { "blk.%d.attn_qkv.weight", "blk.%d.attn_gate.weight", MK_ROUTE_QKVZ, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SPLIT },
    [MK_ROLE_BA] = { "blk.%d.ssm_ba.weight", NULL, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_CONV] = { "blk.%d.ssm_conv1d.weight", NULL, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_ROWS_AFTER_QK, MK_SHAPE_SQUEEZE_MID },
    [MK_ROLE_DT] = { "blk.%d.ssm_dt.bias", NULL, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_COLS_1, MK_SHAPE_SAME },
    [MK_ROLE_A_LOG] = { "blk.%d.ssm_a", NULL, MK_ROUTE_SAME, MK_XFORM_NEG_EXP, MK_TILE_COLS_1, MK_SHAPE_SAME },
    [MK_ROLE_SSM_NORM] = { "blk.%d.ssm_norm.weight", NULL, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_SSM_OUT] = { "blk.%d.ssm_out.weight", NULL, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_COLS_DV, MK_SHAPE_SAME },
    [MK_ROLE_FFN_GATE] = { "blk.%d.ffn_gate.weight", NULL, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_FFN_UP] = { "blk.%d.ffn_up.weight", NULL, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_FFN_DOWN] = { "blk.%d.ffn_down.weight", NULL, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_ROUTER] = { "blk.%d.ffn_gate_inp.weight", NULL, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_EXP_GATE_UP] = { "blk.%d.ffn_gate_exps.weight", "blk.%d.ffn_up_exps.weight", MK_ROUTE_GATE_UP, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SPLIT },
    [MK_ROLE_EXP_DOWN_3D] = { "blk.%d.ffn_down_exps.weight", NULL, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_EXP_GATE] = { "blk.%d.ffn_gate_exps.weight", NULL, MK_ROUTE_STACK, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_STACK },
    [MK_ROLE_EXP_UP] = { "blk.%d.ffn_up_exps.weight", NULL, MK_ROUTE_STACK, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_STACK },
    [MK_ROLE_EXP_DOWN] = { "blk.%d.ffn_down_exps.weight", NULL, MK_ROUTE_STACK, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_STACK },
    [MK_ROLE_SH_GATE] = { "blk.%d.ffn_gate_shexp.weight", NULL, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_SH_UP] = { "blk.%d.ffn_up_shexp.weight", NULL, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_SH_DOWN] = { "blk.%d.ffn_down_shexp.weight", NULL, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_SAME },
    [MK_ROLE_SH_GATE_INP] = { "blk.%d.ffn_gate_inp_shexp.weight", NULL, MK_ROUTE_SAME, MK_XFORM_NONE, MK_TILE_NONE, MK_SHAPE_FLAT },
};

/* Building the plan: walk the HF tensors once; `put` adds each to the plan of the format. */
struct mk_builder {
    const struct mk_arch *arch;
    const struct mk_geom *g;
    enum dtype dtype;
    bool gguf;
    struct mk_plan plan;
    int stack_out[MK_ROLE_COUNT]; /* stacked expert outputs of the current layer */
};

static void mk_name(char *buf, const char *pattern, int il)
{
    snprintf(buf, MK_NAME_MAX, pattern, il);
}

/* llama.cpp's use_more_bits(i_layer, n_layers) of its Q4_K_M rule (llama-quant.cpp). */
static bool mk_more_bits(int64_t il, int64_t n)
{
    return il < n / 8 || il >= 7 * n / 8 || (il - n / 8) % 3 == 2;
}

/* The Q4_K_M (base Q4_K) or Q5_K_M (base Q5_K) type of GGUF tensor `name` of layer il (-1:
 * none) with rows of row_len values (design note, item 3). */
static enum dtype mk_kquant_type(const struct mk_geom *g, enum dtype base, const char *name, int64_t il,
                                 int64_t row_len)
{
    enum dtype t = base;
    if (!strcmp(name, "output.weight") || (g->tied && !strcmp(name, "token_embd.weight")))
        t = DTYPE_Q6_K;
    else if (strstr(name, "ffn_gate_inp.weight"))
        return DTYPE_F32;
    else if ((strstr(name, "attn_v.weight") || strstr(name, "attn_qkv.weight") || strstr(name, "ffn_down")) &&
             il >= 0 && mk_more_bits(il, g->n_layer))
        t = DTYPE_Q6_K;
    return row_len % 256 ? DTYPE_Q8_0 : t;
}

static int mk_put(struct mk_builder *b, enum mk_role role, int il, int e, enum mk_init init,
                  bool quant, int n_dims, const int64_t *shape, struct hs_err *err, const char *fmt,
                  ...) __attribute__((format(printf, 10, 11)));

static int mk_put(struct mk_builder *b, enum mk_role role, int il, int e, enum mk_init init,
                  bool quant, int n_dims, const int64_t *shape, struct hs_err *err, const char *fmt,
                  ...)
{
    struct mk_src src;
    memset(&src, 0, sizeof(src));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(src.name, sizeof(src.name), fmt, ap);
    va_end(ap);
    src.n_dims = n_dims;
    memcpy(src.shape, shape, (size_t)n_dims * sizeof(*shape));
    src.init = init;
    src.quant = quant;
    enum dtype dt = quant ? b->dtype : DTYPE_F32;
    struct mk_plan *p = &b->plan;

    if (!b->gguf) {
        int o = mk_out_add(p, src.name, dt, n_dims, shape, err);
        if (o < 0) return o;
        mk_job_add(p, &src, MK_ROUTE_SAME, MK_XFORM_NONE, o, -1, 0, 0);
        return HS_OK;
    }

    const struct mk_role_info *ri = &mk_roles[role];
    const struct mk_geom *g = b->g;
    char name[MK_NAME_MAX], name2[MK_NAME_MAX];
    mk_name(name, ri->gguf, il);
    enum dtype dt2 = dt;
    if (quant && (b->dtype == DTYPE_Q4_K || b->dtype == DTYPE_Q5_K)) {
        dt = mk_kquant_type(g, b->dtype, name, il, shape[n_dims - 1]);
        if (ri->gguf2) {
            mk_name(name2, ri->gguf2, il);
            dt2 = mk_kquant_type(g, b->dtype, name2, il, shape[n_dims - 1]);
        }
    }
    int64_t gs[TENSOR_MAX_DIMS] = { 0 };
    int gn = n_dims;
    memcpy(gs, shape, (size_t)n_dims * sizeof(*shape));
    int dst = -1, dst2 = -1;
    int64_t p0 = 0, p1 = 0;
    enum mk_route route = ri->route;

    switch (ri->shape) {
    case MK_SHAPE_SAME:
        break;
    case MK_SHAPE_SQUEEZE_MID: /* conv1d [C, 1, K] -> [C, K] */
        gn = 2;
        gs[0] = shape[0];
        gs[1] = shape[2];
        break;
    case MK_SHAPE_FLAT: /* shared_expert_gate [1, H] -> [H] */
        gn = 1;
        gs[0] = shape[n_dims - 1];
        break;
    case MK_SHAPE_SPLIT:
        mk_name(name2, ri->gguf2, il);
        if (route == MK_ROUTE_QKVZ) {
            int64_t s1[2] = { 2 * g->hk * g->dk + g->hv * g->dv, g->n_embd };
            int64_t s2[2] = { g->hv * g->dv, g->n_embd };
            dst = mk_out_add(p, name, dt, 2, s1, err);
            if (dst < 0) return dst;
            dst2 = mk_out_add(p, name2, dt2, 2, s2, err);
            if (dst2 < 0) return dst2;
        } else { /* GATE_UP: [E, 2I, H] -> 2 x [E, I, H] */
            int64_t s[3] = { shape[0], shape[1] / 2, shape[2] };
            dst = mk_out_add(p, name, dt, 3, s, err);
            if (dst < 0) return dst;
            dst2 = mk_out_add(p, name2, dt2, 3, s, err);
            if (dst2 < 0) return dst2;
            p0 = s[1];
        }
        break;
    case MK_SHAPE_STACK:
        if (e == 0) {
            int64_t s[3] = { g->n_expert, shape[0], shape[1] };
            int o = mk_out_add(p, name, dt, 3, s, err);
            if (o < 0) return o;
            b->stack_out[role] = o;
        }
        dst = b->stack_out[role];
        p0 = e;
        break;
    }
    if (dst < 0) {
        dst = mk_out_add(p, name, dt, gn, gs, err);
        if (dst < 0) return dst;
    }
    if (b->arch->tile_v_heads && g->hk != g->hv && ri->tile != MK_TILE_NONE) {
        switch (ri->tile) {
        case MK_TILE_ROWS_AFTER_QK: route = MK_ROUTE_TILE_ROWS; p0 = 2 * g->hk * g->dk; p1 = g->dv; break;
        case MK_TILE_ROWS_DV: route = MK_ROUTE_TILE_ROWS; p0 = 0; p1 = g->dv; break;
        case MK_TILE_ROWS_1: route = MK_ROUTE_TILE_ROWS; p0 = 0; p1 = 1; break;
        case MK_TILE_COLS_DV: route = MK_ROUTE_TILE_COLS; p1 = g->dv; break;
        case MK_TILE_COLS_1: route = MK_ROUTE_TILE_COLS; p1 = 1; break;
        case MK_TILE_NONE: break;
        }
    }
    mk_job_add(p, &src, route, ri->xform, dst, dst2, p0, p1);
    return HS_OK;
}

#define MK_SHAPE(...) ((const int64_t[]){ __VA_ARGS__ })
/* PUT(role, layer, expert, init, stored-in-dtype, MK_SHAPE(dims...), "HF name format", args...) */
#define PUT(role, il, e, init, quant, dims, ...) \
    do { int rc_ = mk_put(b, role, il, e, init, quant, (int)(sizeof(dims) / sizeof(int64_t)), dims, err, __VA_ARGS__); \
         if (rc_) return rc_; } while (0)

/* The model's tensors in HF layout (docs/MODELS.md §7.1), in file order. */
static int mk_walk(struct mk_builder *b, struct hs_err *err)
{
    const struct mk_arch *a = b->arch;
    const struct mk_geom *g = b->g;
    const char *P = a->hf_prefix;
    const int64_t H = g->n_embd, C = 2 * g->hk * g->dk + g->hv * g->dv;

    PUT(MK_ROLE_EMBD, -1, -1, MK_INIT_MATRIX, true, MK_SHAPE(g->n_vocab, H), "%sembed_tokens.weight", P);
    for (int il = 0; il < (int)g->n_layer; il++) {
        PUT(MK_ROLE_ATTN_NORM, il, -1, MK_INIT_NORM_ZC, false, MK_SHAPE(H), "%slayers.%d.input_layernorm.weight", P, il);
        if (mk_layer_is_full(g, il)) {
            const int64_t qd = g->n_head * g->head_dim, kd = g->n_head_kv * g->head_dim;
            PUT(MK_ROLE_Q, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(2 * qd, H), "%slayers.%d.self_attn.q_proj.weight", P, il);
            PUT(MK_ROLE_K, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(kd, H), "%slayers.%d.self_attn.k_proj.weight", P, il);
            PUT(MK_ROLE_V, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(kd, H), "%slayers.%d.self_attn.v_proj.weight", P, il);
            PUT(MK_ROLE_O, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(H, qd), "%slayers.%d.self_attn.o_proj.weight", P, il);
            PUT(MK_ROLE_Q_NORM, il, -1, MK_INIT_NORM_ZC, false, MK_SHAPE(g->head_dim), "%slayers.%d.self_attn.q_norm.weight", P, il);
            PUT(MK_ROLE_K_NORM, il, -1, MK_INIT_NORM_ZC, false, MK_SHAPE(g->head_dim), "%slayers.%d.self_attn.k_norm.weight", P, il);
        } else {
            const int64_t vd = g->hv * g->dv;
            if (a->fused_gdn) {
                PUT(MK_ROLE_QKVZ, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(C + vd, H), "%slayers.%d.linear_attn.in_proj_qkvz.weight", P, il);
                PUT(MK_ROLE_BA, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(2 * g->hv, H), "%slayers.%d.linear_attn.in_proj_ba.weight", P, il);
            } else {
                PUT(MK_ROLE_QKV, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(C, H), "%slayers.%d.linear_attn.in_proj_qkv.weight", P, il);
                PUT(MK_ROLE_Z, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(vd, H), "%slayers.%d.linear_attn.in_proj_z.weight", P, il);
                PUT(MK_ROLE_B, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(g->hv, H), "%slayers.%d.linear_attn.in_proj_b.weight", P, il);
                PUT(MK_ROLE_A, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(g->hv, H), "%slayers.%d.linear_attn.in_proj_a.weight", P, il);
            }
            PUT(MK_ROLE_CONV, il, -1, MK_INIT_CONV, false, MK_SHAPE(C, 1, g->conv_k), "%slayers.%d.linear_attn.conv1d.weight", P, il);
            PUT(MK_ROLE_DT, il, -1, MK_INIT_DT_BIAS, false, MK_SHAPE(g->hv), "%slayers.%d.linear_attn.dt_bias", P, il);
            PUT(MK_ROLE_A_LOG, il, -1, MK_INIT_A_LOG, false, MK_SHAPE(g->hv), "%slayers.%d.linear_attn.A_log", P, il);
            PUT(MK_ROLE_SSM_NORM, il, -1, MK_INIT_NORM_ONE, false, MK_SHAPE(g->dv), "%slayers.%d.linear_attn.norm.weight", P, il);
            PUT(MK_ROLE_SSM_OUT, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(H, vd), "%slayers.%d.linear_attn.out_proj.weight", P, il);
        }
        PUT(MK_ROLE_POST_NORM, il, -1, MK_INIT_NORM_ZC, false, MK_SHAPE(H), "%slayers.%d.post_attention_layernorm.weight", P, il);
        if (a->moe) {
            const int64_t E = g->n_expert, Ie = g->n_ff_exp, Is = g->n_ff_shexp;
            PUT(MK_ROLE_ROUTER, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(E, H), "%slayers.%d.mlp.gate.weight", P, il);
            if (a->fused_experts) {
                PUT(MK_ROLE_EXP_GATE_UP, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(E, 2 * Ie, H), "%slayers.%d.mlp.experts.gate_up_proj", P, il);
                PUT(MK_ROLE_EXP_DOWN_3D, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(E, H, Ie), "%slayers.%d.mlp.experts.down_proj", P, il);
            } else {
                for (int e = 0; e < (int)E; e++) {
                    PUT(MK_ROLE_EXP_GATE, il, e, MK_INIT_MATRIX, true, MK_SHAPE(Ie, H), "%slayers.%d.mlp.experts.%d.gate_proj.weight", P, il, e);
                    PUT(MK_ROLE_EXP_UP, il, e, MK_INIT_MATRIX, true, MK_SHAPE(Ie, H), "%slayers.%d.mlp.experts.%d.up_proj.weight", P, il, e);
                    PUT(MK_ROLE_EXP_DOWN, il, e, MK_INIT_MATRIX, true, MK_SHAPE(H, Ie), "%slayers.%d.mlp.experts.%d.down_proj.weight", P, il, e);
                }
            }
            PUT(MK_ROLE_SH_GATE, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(Is, H), "%slayers.%d.mlp.shared_expert.gate_proj.weight", P, il);
            PUT(MK_ROLE_SH_UP, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(Is, H), "%slayers.%d.mlp.shared_expert.up_proj.weight", P, il);
            PUT(MK_ROLE_SH_DOWN, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(H, Is), "%slayers.%d.mlp.shared_expert.down_proj.weight", P, il);
            PUT(MK_ROLE_SH_GATE_INP, il, -1, MK_INIT_MATRIX, false, MK_SHAPE(1, H), "%slayers.%d.mlp.shared_expert_gate.weight", P, il);
        } else {
            PUT(MK_ROLE_FFN_GATE, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(g->n_ff, H), "%slayers.%d.mlp.gate_proj.weight", P, il);
            PUT(MK_ROLE_FFN_UP, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(g->n_ff, H), "%slayers.%d.mlp.up_proj.weight", P, il);
            PUT(MK_ROLE_FFN_DOWN, il, -1, MK_INIT_MATRIX, true, MK_SHAPE(H, g->n_ff), "%slayers.%d.mlp.down_proj.weight", P, il);
        }
    }
    PUT(MK_ROLE_OUT_NORM, -1, -1, MK_INIT_NORM_ZC, false, MK_SHAPE(H), "%snorm.weight", P);
    if (!g->tied) PUT(MK_ROLE_OUTPUT, -1, -1, MK_INIT_MATRIX, true, MK_SHAPE(g->n_vocab, H), "lm_head.weight");
    return HS_OK;
}

#undef PUT

/* ---- values: PRNG, transforms, storage ---------------------------------------------- */

static uint64_t mk_mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* splitmix64: a 64-bit counter stepped by the golden ratio, finalised by mk_mix64. */
static uint64_t mk_next(uint64_t *s)
{
    *s += 0x9E3779B97F4A7C15ull;
    return mk_mix64(*s);
}

static uint64_t mk_fnv1a(const char *s)
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (; *s; s++) h = (h ^ (uint8_t)*s) * 0x100000001B3ull;
    return h;
}

static double mk_unit(uint64_t x) { return (double)(x >> 11) * 0x1.0p-53; } /* [0, 1) */

/* Fill out[0..n) with standard normals: Box-Muller in float (the costly part of a large
 * model), both outputs used, one 64-bit draw per pair (24 bits for each uniform). */
static void mk_normals(uint64_t *s, float *out, int64_t n)
{
    for (int64_t i = 0; i < n; i += 2) {
        uint64_t x = mk_next(s);
        float u1 = 1.0f - (float)(x >> 40) * 0x1.0p-24f; /* (0, 1]: log is finite */
        float u2 = (float)((x >> 16) & 0xFFFFFF) * 0x1.0p-24f;
        float r = sqrtf(-2.0f * logf(u1)), sn, cs;
        sincosf(6.2831853f * u2, &sn, &cs);
        out[i] = r * cs;
        if (i + 1 < n) out[i + 1] = r * sn;
    }
}

/* Row `row` of source s, in HF layout. */
static void mk_gen_row(const struct mk_src *s, uint64_t tensor_seed, int64_t row, float *out)
{
    const int64_t n = s->shape[s->n_dims - 1];
    uint64_t st = mk_mix64(tensor_seed ^ (0xD1B54A32D192ED03ull * (uint64_t)(row + 1)));
    float mean = 0.0f, sd;
    switch (s->init) {
    case MK_INIT_MATRIX: sd = (float)(1.0 / sqrt((double)n)); break;
    case MK_INIT_CONV: sd = (float)(1.0 / sqrt((double)n)); break;
    case MK_INIT_NORM_ZC: sd = 0.05f; break;
    case MK_INIT_NORM_ONE: mean = 1.0f; sd = 0.05f; break;
    case MK_INIT_DT_BIAS: sd = 0.1f; break;
    case MK_INIT_A_LOG:
        for (int64_t i = 0; i < n; i++) out[i] = (float)log(0.2 + 0.8 * mk_unit(mk_next(&st)));
        return;
    default: sd = 0.0f; break;
    }
    mk_normals(&st, out, n);
    for (int64_t i = 0; i < n; i++) out[i] = mean + sd * out[i];
}

/* Value-head tiling: old head g*r + j (grouped by key head g) -> new head j*Hk + g. */
static int64_t mk_tile_head(const struct mk_geom *g, int64_t h)
{
    int64_t r = g->hv / g->hk;
    return (h % r) * g->hk + h / r;
}

static void mk_route_row(const struct mk_job *j, const struct mk_geom *g, int64_t r, int *dst,
                         int64_t *dr)
{
    *dst = j->dst;
    *dr = r;
    switch (j->route) {
    case MK_ROUTE_SAME:
    case MK_ROUTE_TILE_COLS:
        break;
    case MK_ROUTE_TILE_ROWS:
        if (r >= j->p0) {
            int64_t h = (r - j->p0) / j->p1, w = (r - j->p0) % j->p1;
            *dr = j->p0 + mk_tile_head(g, h) * j->p1 + w;
        }
        break;
    case MK_ROUTE_QKVZ: {
        const int64_t rv = (g->hv / g->hk) * g->dv, blk = 2 * g->dk + 2 * rv;
        const int64_t grp = r / blk, o = r % blk, kd = g->hk * g->dk;
        if (o < g->dk) *dr = grp * g->dk + o;
        else if (o < 2 * g->dk) *dr = kd + grp * g->dk + (o - g->dk);
        else if (o < 2 * g->dk + rv) *dr = 2 * kd + grp * rv + (o - 2 * g->dk);
        else { *dst = j->dst2; *dr = grp * rv + (o - 2 * g->dk - rv); }
        break;
    }
    case MK_ROUTE_GATE_UP: {
        const int64_t e = r / (2 * j->p0), i = r % (2 * j->p0);
        if (i < j->p0) *dr = e * j->p0 + i;
        else { *dst = j->dst2; *dr = e * j->p0 + (i - j->p0); }
        break;
    }
    case MK_ROUTE_STACK: {
        int64_t rows = 1;
        for (int d = 0; d < j->src.n_dims - 1; d++) rows *= j->src.shape[d];
        *dr = j->p0 * rows + r;
        break;
    }
    }
}

static void mk_put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static float mk_clampf(float v, float lo, float hi) { return v < lo ? lo : v > hi ? hi : v; }

/* The part Q4_K and Q5_K share (layouts: kernels/q4k.c, kernels/q5k.c), round to nearest:
 * per sub-block of 32 the range [min(0, lo), hi] in qmax steps (x = s * q - o, o = -min >=
 * 0); d = max s / 63 and dmin = max o / 63 as f16; 6-bit sc = round(s / d), m = round(o /
 * dmin); then q = round((x + dmin * m) / (d * sc)) in [0, qmax] with the stored (rounded)
 * scales. Writes d, dmin and the 12 packed scale bytes to blk[0..16), the quants to q. */
static void mk_store_kq_scales(const float *x, float qmax, uint8_t *blk, uint8_t q[256])
{
    float s[8], o[8], smax = 0.0f, omax = 0.0f;
    for (int j = 0; j < 8; j++) {
        float lo = 0.0f, hi = 0.0f;
        for (int i = 0; i < 32; i++) {
            lo = HS_MIN(lo, x[32 * j + i]);
            hi = HS_MAX(hi, x[32 * j + i]);
        }
        s[j] = (hi - lo) / qmax;
        o[j] = -lo;
        smax = HS_MAX(smax, s[j]);
        omax = HS_MAX(omax, o[j]);
    }
    uint16_t dh = hs_f32_to_f16(smax / 63.0f), mh = hs_f32_to_f16(omax / 63.0f);
    float d = hs_f16_to_f32(dh), dmin = hs_f16_to_f32(mh);
    uint8_t sc[8], m[8];
    for (int j = 0; j < 8; j++) {
        sc[j] = (uint8_t)(d > 0.0f ? mk_clampf(roundf(s[j] / d), 0.0f, 63.0f) : 0.0f);
        m[j] = (uint8_t)(dmin > 0.0f ? mk_clampf(roundf(o[j] / dmin), 0.0f, 63.0f) : 0.0f);
    }
    mk_put16(blk, dh);
    mk_put16(blk + 2, mh);
    uint8_t *s12 = blk + 4;
    for (int j = 0; j < 4; j++) {
        s12[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
        s12[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
        s12[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
    }
    for (int i = 0; i < 256; i++) {
        float step = d * (float)sc[i / 32], off = dmin * (float)m[i / 32];
        q[i] = (uint8_t)(step > 0.0f ? mk_clampf(roundf((x[i] + off) / step), 0.0f, qmax) : 0.0f);
    }
}

/* One Q4_K super-block of 256 values: q in [0, 15], two sub-blocks per 32 bytes of nibbles. */
static void mk_store_q4k(const float *x, uint8_t *blk)
{
    uint8_t q[256];
    mk_store_kq_scales(x, 15.0f, blk, q);
    for (int j = 0; j < 4; j++)
        for (int l = 0; l < 32; l++) blk[16 + 32 * j + l] = (uint8_t)(q[64 * j + l] | q[64 * j + 32 + l] << 4);
}

/* One Q5_K super-block of 256 values: q in [0, 31], the low nibbles as Q4_K's (at byte 48),
 * the 5th bit of value l of sub-block sb in bit sb of qh[l] (bytes 16..47). */
static void mk_store_q5k(const float *x, uint8_t *blk)
{
    uint8_t q[256];
    memset(blk, 0, 176);
    mk_store_kq_scales(x, 31.0f, blk, q);
    for (int i = 0; i < 256; i++) {
        int sb = i / 32, l = i % 32;
        uint8_t *qs = blk + 48 + 32 * (i / 64) + l;
        *qs = (uint8_t)(*qs | (sb % 2 ? (q[i] & 15) << 4 : (q[i] & 15)));
        blk[16 + l] = (uint8_t)(blk[16 + l] | (q[i] >> 4) << sb);
    }
}

/* One Q6_K super-block (layout: kernels/q4k.c), round to nearest: per group of 16 the
 * step s = max|x| / 31; d = max s / 127 as f16; int8 sc = round(s / d); q = round(x / (d *
 * sc)) in [-32, 31], stored + 32. */
static void mk_store_q6k(const float *x, uint8_t *blk)
{
    float s[16], smax = 0.0f;
    for (int g = 0; g < 16; g++) {
        float a = 0.0f;
        for (int i = 0; i < 16; i++) a = HS_MAX(a, fabsf(x[16 * g + i]));
        s[g] = a / 31.0f;
        smax = HS_MAX(smax, s[g]);
    }
    uint16_t dh = hs_f32_to_f16(smax / 127.0f);
    float d = hs_f16_to_f32(dh);
    memset(blk, 0, 210);
    int8_t *sc = (int8_t *)(blk + 192);
    for (int g = 0; g < 16; g++) sc[g] = (int8_t)(d > 0.0f ? mk_clampf(roundf(s[g] / d), 0.0f, 127.0f) : 0.0f);
    for (int i = 0; i < 256; i++) {
        float step = d * (float)sc[i / 16];
        int q = (int)(step > 0.0f ? mk_clampf(roundf(x[i] / step), -32.0f, 31.0f) : 0.0f) + 32;
        int h = i / 128, k = (i % 128) / 32, l = i % 32;
        uint8_t *lo = blk + 64 * h + 32 * (k & 1) + l;
        *lo = (uint8_t)(*lo | (k < 2 ? (q & 15) : (q & 15) << 4));
        blk[128 + 32 * h + l] = (uint8_t)(blk[128 + 32 * h + l] | (q >> 4) << (2 * k));
    }
    mk_put16(blk + 208, dh);
}

/* Store n f32 values as dtype at dst (little-endian). */
static void mk_store_row(enum dtype dt, const float *x, int64_t n, uint8_t *dst)
{
    switch (dt) {
    case DTYPE_Q4_K:
        for (int64_t b0 = 0; b0 < n; b0 += 256) mk_store_q4k(x + b0, dst + b0 / 256 * 144);
        break;
    case DTYPE_Q5_K:
        for (int64_t b0 = 0; b0 < n; b0 += 256) mk_store_q5k(x + b0, dst + b0 / 256 * 176);
        break;
    case DTYPE_Q6_K:
        for (int64_t b0 = 0; b0 < n; b0 += 256) mk_store_q6k(x + b0, dst + b0 / 256 * 210);
        break;
    case DTYPE_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = hs_f32_to_f16(x[i]);
            dst[2 * i] = (uint8_t)h;
            dst[2 * i + 1] = (uint8_t)(h >> 8);
        }
        break;
    case DTYPE_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h = hs_f32_to_bf16(x[i]);
            dst[2 * i] = (uint8_t)h;
            dst[2 * i + 1] = (uint8_t)(h >> 8);
        }
        break;
    case DTYPE_Q8_0:
        for (int64_t b0 = 0; b0 < n; b0 += 32, dst += 34) {
            float amax = 0.0f;
            for (int i = 0; i < 32; i++) amax = HS_MAX(amax, fabsf(x[b0 + i]));
            float d = amax / 127.0f;
            uint16_t dh = hs_f32_to_f16(d);
            dst[0] = (uint8_t)dh;
            dst[1] = (uint8_t)(dh >> 8);
            for (int i = 0; i < 32; i++) {
                float q = d > 0.0f ? roundf(x[b0 + i] / d) : 0.0f;
                q = HS_MAX(-127.0f, HS_MIN(127.0f, q));
                dst[2 + i] = (uint8_t)(int8_t)q;
            }
        }
        break;
    default: /* DTYPE_F32 */
        for (int64_t i = 0; i < n; i++) {
            uint32_t u;
            memcpy(&u, &x[i], 4);
            dst[4 * i] = (uint8_t)u;
            dst[4 * i + 1] = (uint8_t)(u >> 8);
            dst[4 * i + 2] = (uint8_t)(u >> 16);
            dst[4 * i + 3] = (uint8_t)(u >> 24);
        }
        break;
    }
}

struct mk_run {
    struct mk_plan *plan;
    const struct mk_geom *g;
    const struct mk_job *job;
    uint64_t tensor_seed;
    float *scratch; /* 2 * plan->max_row floats per thread */
};

static void mk_run_rows(void *ctx, int64_t begin, int64_t end, int t)
{
    struct mk_run *run = ctx;
    const struct mk_job *j = run->job;
    const int64_t n = j->src.shape[j->src.n_dims - 1];
    float *row = run->scratch + (size_t)t * 2 * (size_t)run->plan->max_row;
    float *tmp = row + run->plan->max_row;
    for (int64_t r = begin; r < end; r++) {
        float *x = row;
        mk_gen_row(&j->src, run->tensor_seed, r, x);
        if (j->route == MK_ROUTE_TILE_COLS) {
            for (int64_t c = 0; c < n; c++)
                tmp[mk_tile_head(run->g, c / j->p1) * j->p1 + c % j->p1] = x[c];
            x = tmp;
        }
        if (j->xform == MK_XFORM_PLUS_ONE)
            for (int64_t c = 0; c < n; c++) x[c] = 1.0f + x[c];
        else if (j->xform == MK_XFORM_NEG_EXP)
            for (int64_t c = 0; c < n; c++) x[c] = -expf(x[c]);
        int dst;
        int64_t dr;
        mk_route_row(j, run->g, r, &dst, &dr);
        const struct mk_out *o = &run->plan->outs[dst];
        mk_store_row(o->dtype, x, n, o->data + (uint64_t)dr * o->row_bytes);
    }
}

/* Allocate every output and generate every source into it. */
static void mk_plan_run(struct mk_plan *p, const struct mk_geom *g, uint64_t seed)
{
    for (int i = 0; i < p->n_outs; i++) p->outs[i].data = hs_malloc(p->outs[i].n_bytes);
    const struct sys_cpu *cpu = sys_cpu_get();
    int n_threads = HS_MAX(1, HS_MIN(cpu ? cpu->n_cores : 1, 16));
    struct sys_pool *pool = sys_pool_new(n_threads);
    struct mk_run run = { .plan = p, .g = g };
    run.scratch = hs_malloc((size_t)n_threads * 2 * (size_t)p->max_row * sizeof(float));
    for (int i = 0; i < p->n_jobs; i++) {
        const struct mk_job *j = &p->jobs[i];
        int64_t rows = 1;
        for (int d = 0; d < j->src.n_dims - 1; d++) rows *= j->src.shape[d];
        run.job = j;
        run.tensor_seed = mk_mix64(mk_mix64(seed) ^ mk_fnv1a(j->src.name));
        sys_pool_run(pool, rows, mk_run_rows, &run);
    }
    hs_free(run.scratch);
    sys_pool_free(pool);
}

/* ---- options --------------------------------------------------------------------------- */

void mkmodel_opts_default(struct mkmodel_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->arch = MODEL_ARCH_QWEN35;
    o->preset = "tiny";
    o->dtype = DTYPE_F32;
}

static int64_t mk_pick(int64_t override, int64_t preset) { return override > 0 ? override : preset; }

static bool mk_is_gguf_path(const char *path)
{
    size_t n = strlen(path);
    return n > 5 && !strcmp(path + n - 5, ".gguf");
}

/* Geometry from preset + overrides, validated. n_vocab is set later from the tokenizer. */
static int mk_geom_init(const struct mkmodel_opts *o, const struct mk_arch *a, struct mk_geom *g,
                        const struct mk_preset **preset_out, struct hs_err *err)
{
    const char *pname = o->preset ? o->preset : "tiny";
    const struct mk_preset *p = NULL;
    for (size_t i = 0; i < HS_ARRAY_LEN(mk_presets); i++)
        if (!strcmp(mk_presets[i].name, pname)) p = &mk_presets[i];
    if (!p) return hs_err_set(err, HS_ERR_INVALID, "unknown --preset '%s' (tiny, 0.8b, 2b, 4b)", pname);
    *preset_out = p;

    memset(g, 0, sizeof(*g));
    g->n_layer = mk_pick(o->n_layer, p->n_layer);
    g->n_embd = mk_pick(o->n_embd, p->n_embd);
    g->n_head = mk_pick(o->n_head, p->n_head);
    g->n_head_kv = mk_pick(o->n_head_kv, p->n_head_kv);
    g->head_dim = mk_pick(o->head_dim, p->head_dim);
    g->hk = mk_pick(o->gdn_k_heads, p->gdn_k_heads);
    g->hv = mk_pick(o->gdn_v_heads, p->gdn_v_heads);
    g->dk = g->dv = mk_pick(o->gdn_head_dim, p->gdn_head_dim);
    g->conv_k = 4;
    g->full_attn_interval = 4;
    g->rope_theta = 1e7f;
    g->rms_eps = 1e-6f;
    g->n_ctx = p->n_ctx;
    g->tied = a->tied;
    if (a->moe) {
        if (o->n_ff > 0)
            return hs_err_set(err, HS_ERR_INVALID, "--ffn sets the dense FFN width; %s has experts "
                              "(use --expert-ffn)", a->gguf_name);
        g->n_expert = mk_pick(o->n_expert, p->n_expert);
        g->n_expert_used = mk_pick(o->n_expert_used, p->n_expert_used);
        g->n_ff_exp = mk_pick(o->n_ff_exp, p->n_ff_exp);
        g->n_ff_shexp = g->n_ff_exp;
    } else {
        if (o->n_expert > 0 || o->n_expert_used > 0 || o->n_ff_exp > 0)
            return hs_err_set(err, HS_ERR_INVALID, "--experts, --experts-used and --expert-ffn apply "
                              "to qwen35moe and qwen3next, not %s", a->gguf_name);
        g->n_ff = mk_pick(o->n_ff, p->n_ff);
    }

    const struct { const char *opt; int64_t v; } dims[] = {
        { "--layers", g->n_layer }, { "--hidden", g->n_embd }, { "--heads", g->n_head },
        { "--kv-heads", g->n_head_kv }, { "--head-dim", g->head_dim }, { "--ffn", g->n_ff },
        { "--gdn-k-heads", g->hk }, { "--gdn-v-heads", g->hv }, { "--gdn-head-dim", g->dk },
        { "--experts", g->n_expert }, { "--experts-used", g->n_expert_used },
        { "--expert-ffn", g->n_ff_exp },
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(dims); i++)
        if (dims[i].v > MK_DIM_MAX)
            return hs_err_set(err, HS_ERR_INVALID, "%s %lld is too large (at most %lld)", dims[i].opt,
                              (long long)dims[i].v, MK_DIM_MAX);
    if (g->n_layer > MODEL_MAX_LAYERS)
        return hs_err_set(err, HS_ERR_INVALID, "--layers %lld: at most %d layers",
                          (long long)g->n_layer, MODEL_MAX_LAYERS);
    if (g->n_layer < g->full_attn_interval)
        return hs_err_set(err, HS_ERR_INVALID, "--layers %lld: at least %lld, so that a layer is "
                          "full attention (every %lld-th is; llama.cpp cannot run a model without one)",
                          (long long)g->n_layer, (long long)g->full_attn_interval,
                          (long long)g->full_attn_interval);
    if (g->n_head_kv > g->n_head || g->n_head % g->n_head_kv)
        return hs_err_set(err, HS_ERR_INVALID, "--heads %lld is not a multiple of --kv-heads %lld",
                          (long long)g->n_head, (long long)g->n_head_kv);
    if (g->head_dim % 8)
        return hs_err_set(err, HS_ERR_INVALID, "--head-dim %lld: must be a multiple of 8 (a quarter "
                          "of it rotates, in pairs)", (long long)g->head_dim);
    if (a->mrope && g->head_dim < 32)
        return hs_err_set(err, HS_ERR_INVALID, "--head-dim %lld: %s needs at least 32 (llama.cpp's "
                          "M-RoPE sections [11,11,10] span 32 dims)", (long long)g->head_dim,
                          a->gguf_name);
    if (g->hv % g->hk)
        return hs_err_set(err, HS_ERR_INVALID, "--gdn-v-heads %lld is not a multiple of "
                          "--gdn-k-heads %lld", (long long)g->hv, (long long)g->hk);
    if (a->moe) {
        if (g->n_expert > MK_MAX_EXPERTS)
            return hs_err_set(err, HS_ERR_INVALID, "--experts %lld: at most %d",
                              (long long)g->n_expert, MK_MAX_EXPERTS);
        if (g->n_expert_used > g->n_expert)
            return hs_err_set(err, HS_ERR_INVALID, "--experts-used %lld exceeds --experts %lld",
                              (long long)g->n_expert_used, (long long)g->n_expert);
    }
    g->n_rot = g->head_dim / 4;

    const char *kname = o->dtype == DTYPE_Q8_0 ? "q8_0" : o->dtype == DTYPE_Q4_K ? "q4_k_m" : "q5_k_m";
    if ((o->dtype == DTYPE_Q4_K || o->dtype == DTYPE_Q5_K) && g->n_expert == 8)
        return hs_err_set(err, HS_ERR_INVALID, "--dtype %s with --experts 8: llama.cpp's rule for "
                          "8-expert models (Q5_K attn_output, Q8_0 attn_k / attn_v) is not "
                          "implemented by mkmodel", kname);
    if (o->dtype == DTYPE_Q8_0 || o->dtype == DTYPE_Q4_K || o->dtype == DTYPE_Q5_K) {
        /* Every matrix row (the innermost dimension) must hold whole 32-value blocks (the
         * Q8_0 fallback of q4_k_m rows that are not whole 256-value super-blocks). */
        const struct { const char *opt; int64_t v; } rows[] = {
            { "--hidden", g->n_embd }, { "--heads x --head-dim", g->n_head * g->head_dim },
            { "--gdn-v-heads x --gdn-head-dim", g->hv * g->dv }, { "--ffn", g->n_ff },
            { "--expert-ffn", g->n_ff_exp },
        };
        for (size_t i = 0; i < HS_ARRAY_LEN(rows); i++)
            if (rows[i].v % 32)
                return hs_err_set(err, HS_ERR_INVALID, "--dtype %s needs %s (%lld) to be a "
                                  "multiple of 32", kname, rows[i].opt, (long long)rows[i].v);
    }
    return HS_OK;
}

/* ---- config.json ------------------------------------------------------------------------ */

static void mk_config_text_fields(struct jsonw *w, const struct mk_arch *a, const struct mk_geom *g,
                                  const struct mktok *t, const char *torch_dtype)
{
    if (a->text_model_type) {
        jsonw_key(w, "model_type");
        jsonw_str(w, a->text_model_type);
    }
    jsonw_key(w, "vocab_size"); jsonw_int(w, g->n_vocab);
    jsonw_key(w, "hidden_size"); jsonw_int(w, g->n_embd);
    if (!a->moe) { jsonw_key(w, "intermediate_size"); jsonw_int(w, g->n_ff); }
    jsonw_key(w, "num_hidden_layers"); jsonw_int(w, g->n_layer);
    jsonw_key(w, "num_attention_heads"); jsonw_int(w, g->n_head);
    jsonw_key(w, "num_key_value_heads"); jsonw_int(w, g->n_head_kv);
    jsonw_key(w, "head_dim"); jsonw_int(w, g->head_dim);
    jsonw_key(w, "attn_output_gate"); jsonw_bool(w, true);
    jsonw_key(w, "attention_bias"); jsonw_bool(w, false);
    jsonw_key(w, "hidden_act"); jsonw_str(w, "silu");
    jsonw_key(w, "rms_norm_eps"); jsonw_double(w, 1e-6);
    if (a->mrope) {
        jsonw_key(w, "rope_parameters");
        jsonw_obj_begin(w);
        jsonw_key(w, "rope_type"); jsonw_str(w, "default");
        jsonw_key(w, "rope_theta"); jsonw_double(w, g->rope_theta);
        jsonw_key(w, "partial_rotary_factor"); jsonw_double(w, 0.25);
        jsonw_key(w, "mrope_section");
        jsonw_arr_begin(w);
        jsonw_int(w, 11); jsonw_int(w, 11); jsonw_int(w, 10);
        jsonw_arr_end(w);
        jsonw_key(w, "mrope_interleaved"); jsonw_bool(w, true);
        jsonw_obj_end(w);
    } else { /* Qwen3-Next's older spelling: top-level rope fields */
        jsonw_key(w, "rope_theta"); jsonw_double(w, g->rope_theta);
        jsonw_key(w, "partial_rotary_factor"); jsonw_double(w, 0.25);
    }
    jsonw_key(w, "max_position_embeddings"); jsonw_int(w, g->n_ctx);
    jsonw_key(w, "layer_types");
    jsonw_arr_begin(w);
    for (int64_t il = 0; il < g->n_layer; il++)
        jsonw_str(w, mk_layer_is_full(g, il) ? "full_attention" : "linear_attention");
    jsonw_arr_end(w);
    jsonw_key(w, "full_attention_interval"); jsonw_int(w, g->full_attn_interval);
    jsonw_key(w, "linear_num_key_heads"); jsonw_int(w, g->hk);
    jsonw_key(w, "linear_num_value_heads"); jsonw_int(w, g->hv);
    jsonw_key(w, "linear_key_head_dim"); jsonw_int(w, g->dk);
    jsonw_key(w, "linear_value_head_dim"); jsonw_int(w, g->dv);
    jsonw_key(w, "linear_conv_kernel_dim"); jsonw_int(w, g->conv_k);
    jsonw_key(w, "mamba_ssm_dtype"); jsonw_str(w, "float32");
    if (a->moe) {
        jsonw_key(w, "num_experts"); jsonw_int(w, g->n_expert);
        jsonw_key(w, "num_experts_per_tok"); jsonw_int(w, g->n_expert_used);
        jsonw_key(w, "moe_intermediate_size"); jsonw_int(w, g->n_ff_exp);
        jsonw_key(w, "shared_expert_intermediate_size"); jsonw_int(w, g->n_ff_shexp);
        if (!a->text_model_type) { /* Qwen3-Next only; Qwen3.5-MoE always renormalises */
            jsonw_key(w, "norm_topk_prob"); jsonw_bool(w, true);
            jsonw_key(w, "decoder_sparse_step"); jsonw_int(w, 1);
        }
    }
    jsonw_key(w, "mlp_only_layers");
    jsonw_arr_begin(w);
    jsonw_arr_end(w);
    jsonw_key(w, "mtp_num_hidden_layers"); jsonw_int(w, 0);
    jsonw_key(w, "mtp_use_dedicated_embeddings"); jsonw_bool(w, false);
    jsonw_key(w, "tie_word_embeddings"); jsonw_bool(w, g->tied);
    jsonw_key(w, "eos_token_id"); jsonw_int(w, t->eos_id);
    if (t->pad_id >= 0) { jsonw_key(w, "pad_token_id"); jsonw_int(w, t->pad_id); }
    jsonw_key(w, a->text_model_type ? "dtype" : "torch_dtype"); jsonw_str(w, torch_dtype);
}

static char *mk_config_json(const struct mk_arch *a, const struct mk_geom *g, const struct mktok *t,
                            enum dtype dt, size_t *len)
{
    const char *torch_dtype = dt == DTYPE_BF16 ? "bfloat16" : dt == DTYPE_F16 ? "float16" : "float32";
    struct strbuf sb;
    strbuf_init(&sb);
    struct jsonw w;
    jsonw_init(&w, &sb, 2);
    jsonw_obj_begin(&w);
    jsonw_key(&w, "architectures");
    jsonw_arr_begin(&w);
    jsonw_str(&w, a->hf_arch);
    jsonw_arr_end(&w);
    jsonw_key(&w, "model_type");
    jsonw_str(&w, a->model_type);
    if (a->text_model_type) {
        jsonw_key(&w, "text_config");
        jsonw_obj_begin(&w);
        mk_config_text_fields(&w, a, g, t, torch_dtype);
        jsonw_obj_end(&w);
        jsonw_key(&w, "tie_word_embeddings"); jsonw_bool(&w, g->tied);
    } else {
        mk_config_text_fields(&w, a, g, t, torch_dtype);
    }
    jsonw_obj_end(&w);
    strbuf_putc(&sb, '\n');
    return strbuf_detach(&sb, len);
}

/* ---- GGUF metadata ---------------------------------------------------------------------- */

static void mk_gguf_meta(struct gguf_writer *w, const struct mk_arch *a, const struct mk_geom *g,
                         const char *preset, enum dtype dt)
{
    /* llama_ftype: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q8_0 7, MOSTLY_Q4_K_M 15, MOSTLY_Q5_K_M 17,
     * MOSTLY_BF16 32 */
    uint32_t ftype = dt == DTYPE_F16    ? 1
                     : dt == DTYPE_Q8_0 ? 7
                     : dt == DTYPE_Q4_K ? 15
                     : dt == DTYPE_Q5_K ? 17
                     : dt == DTYPE_BF16 ? 32
                                        : 0;
    char key[96], name[96];
#define KEY(k) (snprintf(key, sizeof(key), "%s." k, a->gguf_name), key)
    gguf_writer_set_str(w, "general.architecture", a->gguf_name);
    snprintf(name, sizeof(name), "headstart mkmodel %s %s", a->gguf_name, preset);
    gguf_writer_set_str(w, "general.name", name);
    gguf_writer_set_u32(w, "general.file_type", ftype);
    gguf_writer_set_u32(w, KEY("context_length"), (uint32_t)g->n_ctx);
    gguf_writer_set_u32(w, KEY("embedding_length"), (uint32_t)g->n_embd);
    gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)g->n_layer);
    if (!a->moe) gguf_writer_set_u32(w, KEY("feed_forward_length"), (uint32_t)g->n_ff);
    gguf_writer_set_u32(w, KEY("attention.head_count"), (uint32_t)g->n_head);
    gguf_writer_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)g->n_head_kv);
    gguf_writer_set_u32(w, KEY("attention.key_length"), (uint32_t)g->head_dim);
    gguf_writer_set_u32(w, KEY("attention.value_length"), (uint32_t)g->head_dim);
    gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), g->rms_eps);
    gguf_writer_set_f32(w, KEY("rope.freq_base"), g->rope_theta);
    gguf_writer_set_u32(w, KEY("rope.dimension_count"), (uint32_t)g->n_rot);
    if (a->mrope) {
        static const int32_t sections[4] = { 11, 11, 10, 0 };
        gguf_writer_set_arr_i32(w, KEY("rope.dimension_sections"), sections, 4);
    }
    gguf_writer_set_u32(w, KEY("ssm.conv_kernel"), (uint32_t)g->conv_k);
    gguf_writer_set_u32(w, KEY("ssm.state_size"), (uint32_t)g->dk);
    gguf_writer_set_u32(w, KEY("ssm.group_count"), (uint32_t)g->hk);
    gguf_writer_set_u32(w, KEY("ssm.time_step_rank"), (uint32_t)g->hv);
    gguf_writer_set_u32(w, KEY("ssm.inner_size"), (uint32_t)(g->hv * g->dv));
    gguf_writer_set_u32(w, KEY("full_attention_interval"), (uint32_t)g->full_attn_interval);
    if (a->moe) {
        gguf_writer_set_u32(w, KEY("expert_count"), (uint32_t)g->n_expert);
        gguf_writer_set_u32(w, KEY("expert_used_count"), (uint32_t)g->n_expert_used);
        gguf_writer_set_u32(w, KEY("expert_feed_forward_length"), (uint32_t)g->n_ff_exp);
        gguf_writer_set_u32(w, KEY("expert_shared_feed_forward_length"), (uint32_t)g->n_ff_shexp);
    }
#undef KEY
}

/* ---- writing ------------------------------------------------------------------------------ */

static int mk_write_hf(const char *dir, const struct mk_plan *p, const struct mk_arch *a,
                       const struct mk_geom *g, const struct mktok *t, const char *tpl,
                       enum dtype dt, struct hs_err *err)
{
    int rc = sys_mkdir_p(dir, err);
    if (rc) return rc;
    char *path = sys_path_join(dir, "model.safetensors");
    struct st_writer *sw = st_writer_new();
    st_writer_set_metadata(sw, "format", "pt");
    for (int i = 0; i < p->n_outs; i++) {
        const struct mk_out *o = &p->outs[i];
        st_writer_add(sw, o->name, o->dtype, o->n_dims, o->shape, o->data, o->n_bytes);
    }
    rc = st_writer_write(sw, path, err);
    st_writer_free(sw);
    hs_free(path);
    if (rc) return rc;

    path = sys_path_join(dir, "tokenizer.json");
    rc = sys_file_write_atomic(path, t->tokenizer_json, t->tokenizer_json_len, err);
    hs_free(path);
    if (rc) return rc;

    char *tc = mktok_tokenizer_config_json(t, tpl);
    path = sys_path_join(dir, "tokenizer_config.json");
    rc = sys_file_write_atomic(path, tc, strlen(tc), err);
    hs_free(path);
    hs_free(tc);
    if (rc) return rc;

    size_t len;
    char *cfg = mk_config_json(a, g, t, dt, &len);
    path = sys_path_join(dir, "config.json");
    rc = sys_file_write_atomic(path, cfg, len, err);
    hs_free(path);
    hs_free(cfg);
    return rc;
}

static int mk_write_gguf(const char *path, const struct mk_plan *p, const struct mk_arch *a,
                         const struct mk_geom *g, const struct mktok *t, const char *tpl,
                         const char *preset, enum dtype dt, struct hs_err *err)
{
    struct gguf_writer *w = gguf_writer_new();
    mk_gguf_meta(w, a, g, preset, dt);
    mktok_gguf_put(t, w, tpl);
    for (int i = 0; i < p->n_outs; i++) {
        const struct mk_out *o = &p->outs[i];
        gguf_writer_add_tensor(w, o->name, o->dtype, o->n_dims, o->shape, o->data, o->n_bytes);
    }
    int rc = gguf_writer_write(w, path, err);
    gguf_writer_free(w);
    return rc;
}

int mkmodel_write(const struct mkmodel_opts *o, struct hs_err *err)
{
    if (!o->out || !*o->out) return hs_err_set(err, HS_ERR_INVALID, "--out is required");
    if ((unsigned)o->arch >= MODEL_ARCH_COUNT)
        return hs_err_set(err, HS_ERR_INVALID, "unknown architecture %d", (int)o->arch);
    if ((unsigned)o->dtype >= DTYPE_COUNT || !dtype_info(o->dtype)->compute || o->dtype == DTYPE_Q6_K)
        return hs_err_set(err, HS_ERR_INVALID, "--dtype must be f32, f16, bf16, q8_0, q4_k_m or q5_k_m");
    const bool gguf = mk_is_gguf_path(o->out);
    if (!gguf && (o->dtype == DTYPE_Q8_0 || o->dtype == DTYPE_Q4_K || o->dtype == DTYPE_Q5_K))
        return hs_err_set(err, HS_ERR_INVALID, "--dtype %s needs a .gguf --out (safetensors has "
                          "no %s; use f32, f16 or bf16 for a Hugging Face directory)",
                          o->dtype == DTYPE_Q8_0 ? "q8_0" : o->dtype == DTYPE_Q4_K ? "q4_k_m" : "q5_k_m",
                          o->dtype == DTYPE_Q8_0 ? "Q8_0" : "K-quants");
    const struct mk_arch *a = &mk_archs[o->arch];
    struct mk_geom g;
    const struct mk_preset *preset = NULL;
    int rc = mk_geom_init(o, a, &g, &preset, err);
    if (rc) return rc;

    const char *tpl = hs_chat_template_qwen35;
    char *tpl_owned = NULL;
    if (o->chat_template) {
        size_t len;
        rc = sys_file_read_all(o->chat_template, MK_TEMPLATE_MAX, &tpl_owned, &len, err);
        if (rc) {
            hs_err_prefix(err, "--chat-template: ");
            return rc;
        }
        tpl = tpl_owned;
    } else if (!tpl) {
        return hs_err_set(err, HS_ERR_INVALID, "no built-in chat template: run make deps or pass "
                          "--chat-template");
    }

    struct mktok t;
    memset(&t, 0, sizeof(t));
    rc = o->tokenizer_json ? mktok_from_file(o->tokenizer_json, o->arch, &t, err)
                           : mktok_build_default(&t, o->arch, err);
    if (rc) {
        hs_free(tpl_owned);
        return rc;
    }
    /* Real presets keep the real embedding size unless a tokenizer brings its own. */
    if (preset->real_vocab && !o->tokenizer_json) t.n_vocab = HS_MAX(t.n_vocab, a->real_vocab);
    g.n_vocab = t.n_vocab;

    struct mk_builder b;
    memset(&b, 0, sizeof(b));
    b.arch = a;
    b.g = &g;
    b.dtype = o->dtype;
    b.gguf = gguf;
    rc = mk_walk(&b, err);
    if (rc == HS_OK) {
        mk_plan_run(&b.plan, &g, o->seed);
        rc = gguf ? mk_write_gguf(o->out, &b.plan, a, &g, &t, tpl, preset->name, o->dtype, err)
                  : mk_write_hf(o->out, &b.plan, a, &g, &t, tpl, o->dtype, err);
    }
    mk_plan_free(&b.plan);
    mktok_free(&t);
    hs_free(tpl_owned);
    return rc;
}
