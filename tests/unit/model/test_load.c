/* test_load.c — model_load: spec tables, hyperparameters, conventions (norm folding,
 * -exp(A_log), value-head order, fused splits, experts), tying, MTP, and the error report.
 *
 * Every model here is written by hand with st_writer / gguf_writer from one "logical"
 * model in HF layout whose values are a function of (logical name, index) (tl_val), so a
 * test can say which file value must land where. GGUF files are derived from the logical
 * model the way llama.cpp's converter does it (+1 on zero-centred norms, -exp(A_log),
 * value heads tiled for qwen35*, qkvz split for qwen3next, experts stacked).
 * The helpers tl_* are shared with test_inspect.c (same binary).
 */
#include <criterion/criterion.h>

#include "format/format.h"
#include "model/model_int.h"
#include "sys/sys.h"

#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the hand-made model writer ------------------------------------------------------- */

struct tl_opts {
    enum model_arch arch;
    bool gguf;
    const char *prefix;        /* HF text-model prefix */
    bool flat_config;          /* HF: fields at the root instead of text_config */
    int64_t n_layer, H, V, nh, nkv, hd, Hk, Hv, Dk, Dv, K, I, E, Eu, Ie, Is, interval;
    bool tied;                 /* no lm_head / output tensor */
    int n_mtp;
    enum dtype wtype;          /* matrices (and HF vectors) */
    bool gguf_fused_gate_up;   /* qwen35moe / qwen3next GGUF: ffn_gate_up_exps */
    bool gguf_ssm_in;          /* qwen3next GGUF: legacy fused ssm_in */
    const char *omit[4];       /* file tensor names to leave out */
    const char *reshape;       /* file tensor written with its first dimension + 1 */
    const char *retype[2];     /* file tensors written with retype_dtype[i] (zero bytes) */
    enum dtype retype_dtype[2];
    const char *extra;         /* an extra tensor nobody claims */
    const char *gguf_arch;     /* general.architecture override */
    const char *hf_type;       /* model_type override ("" keeps architectures too) */
    int64_t gguf_block_count;  /* override (0: n_layer + n_mtp) */
    int64_t gguf_time_step_rank; /* override */
    bool gguf_no_embedding_length;
    bool with_tokenizer;       /* GGUF tokenizer keys / HF tokenizer files */
    unsigned attn_mask;        /* bit il: layer il is attention, written as HF layer_types /
                                  GGUF attention.recurrent_layers (0: interval rule) */
    bool kinds_typed;          /* GGUF recurrent_layers of element type kinds_type, not bool */
    enum gguf_type kinds_type;
    bool gguf_per_layer;       /* GGUF head counts, feed-forward and expert widths as per-block
                                  arrays (llama_model_save_to_file style; 0 heads at GDN layers) */
    bool gguf_weights_norm_false; /* GGUF <arch>.expert_weights_norm = false */
};

static bool tl_is_attn(const struct tl_opts *o, int il)
{
    return o->attn_mask ? (o->attn_mask >> il) & 1u : (il + 1) % o->interval == 0;
}

void tl_defaults(struct tl_opts *o, enum model_arch arch, bool gguf);
char *tl_write(const struct tl_opts *o, const char *dir);
float tl_val(const char *logical, uint64_t i);
char *tl_tmpdir(void);
void tl_rmdir(char *dir);

void tl_defaults(struct tl_opts *o, enum model_arch arch, bool gguf)
{
    memset(o, 0, sizeof *o);
    o->arch = arch;
    o->gguf = gguf;
    o->prefix = arch == MODEL_ARCH_QWEN3NEXT ? "model." : "model.language_model.";
    o->n_layer = 4; o->H = 64; o->V = 40; o->nh = 2; o->nkv = 1; o->hd = 16;
    o->Hk = 2; o->Hv = 6;  /* r = 3 != Hk: the map and its inverse differ */ o->Dk = 16; o->Dv = 32; o->K = 4; o->I = 64;
    o->E = 4; o->Eu = 2; o->Ie = 32; o->Is = 32; o->interval = 4;
    o->n_mtp = 1;
    o->wtype = DTYPE_F32;
}

/* Values k/64 with |k| <= 64: exact in f32, f16 and bf16. */
float tl_val(const char *logical, uint64_t i)
{
    uint32_t h = 2166136261u;
    for (const char *p = logical; *p; p++) { h ^= (uint8_t)*p; h *= 16777619u; }
    uint64_t k = (h + i * 7919u + (i >> 7) * 31u) % 129u;
    return ((float)k - 64.0f) / 64.0f;
}

struct tl_tensor {
    char *name;
    enum dtype dtype;
    int n_dims;
    int64_t shape[4];
    void *data;
    uint64_t n_bytes;
};

struct tl_b {
    const struct tl_opts *o;
    struct tl_tensor t[1024];
    int n;
    int64_t r;
};

static uint64_t nel(int n_dims, const int64_t *s)
{
    uint64_t n = 1;
    for (int i = 0; i < n_dims; i++) n *= (uint64_t)s[i];
    return n;
}

static float *gen(const char *logical, uint64_t n)
{
    float *v = malloc(n * sizeof *v);
    for (uint64_t i = 0; i < n; i++) v[i] = tl_val(logical, i);
    return v;
}

static void q8_0_encode(const float *x, uint64_t n, uint8_t *out)
{
    for (uint64_t b = 0; b < n / 32; b++) {
        float amax = 0;
        for (int i = 0; i < 32; i++) amax = fmaxf(amax, fabsf(x[b * 32 + i]));
        float d = amax / 127.0f;
        uint16_t dh = hs_f32_to_f16(d);
        out[b * 34] = (uint8_t)(dh & 0xff);
        out[b * 34 + 1] = (uint8_t)(dh >> 8);
        for (int i = 0; i < 32; i++) {
            float q = d > 0 ? roundf(x[b * 32 + i] / d) : 0;
            out[b * 34 + 2 + i] = (uint8_t)(int8_t)q;
        }
    }
}

static bool in_list(const char *const *l, int n, const char *s)
{
    for (int i = 0; i < n; i++)
        if (l[i] && !strcmp(l[i], s)) return true;
    return false;
}

/* Append a file tensor with values v (f32) converted to dtype. */
static void put(struct tl_b *b, const char *name, enum dtype dtype, int n_dims, const int64_t *shape,
                const float *v)
{
    const struct tl_opts *o = b->o;
    if (in_list(o->omit, 4, name)) return;
    cr_assert_lt(b->n, 1024);
    struct tl_tensor *t = &b->t[b->n++];
    t->name = strdup(name);
    t->n_dims = n_dims;
    memcpy(t->shape, shape, sizeof(int64_t) * (size_t)n_dims);
    t->dtype = dtype;
    for (int i = 0; i < 2; i++)
        if (o->retype[i] && !strcmp(o->retype[i], name)) t->dtype = o->retype_dtype[i];
    bool reshaped = o->reshape && !strcmp(o->reshape, name);
    if (reshaped) t->shape[0] += 1;
    uint64_t n = nel(n_dims, t->shape), rb = 0;
    cr_assert(dtype_row_bytes(t->dtype, (uint64_t)t->shape[n_dims - 1], &rb), "%s: row of %s", name,
              dtype_info(t->dtype)->name);
    t->n_bytes = rb * (n / (uint64_t)t->shape[n_dims - 1]);
    t->data = calloc(1, t->n_bytes ? t->n_bytes : 1);
    if (reshaped || t->dtype != dtype) return; /* contents do not matter */
    for (uint64_t i = 0; i < n; i++) {
        switch (dtype) {
        case DTYPE_F32: memcpy((char *)t->data + 4 * i, &v[i], 4); break;
        case DTYPE_F16: { uint16_t h = hs_f32_to_f16(v[i]); memcpy((char *)t->data + 2 * i, &h, 2); break; }
        case DTYPE_BF16: { uint16_t h = hs_f32_to_bf16(v[i]); memcpy((char *)t->data + 2 * i, &h, 2); break; }
        default: break;
        }
    }
    if (dtype == DTYPE_Q8_0) q8_0_encode(v, n, t->data);
}

/* Tiled position t holds grouped head (t % Hk) * r + t / Hk. */
static int64_t tiled_src(const struct tl_opts *o, int64_t t)
{
    int64_t r = o->Hv / o->Hk;
    return (t % o->Hk) * r + t / o->Hk;
}

/* Permute n_heads blocks of blk floats starting at v + off, grouped -> tiled. */
static void vperm(const struct tl_opts *o, float *v, uint64_t off, uint64_t blk)
{
    float *tmp = malloc(sizeof *tmp * (size_t)(blk * (uint64_t)o->Hv));
    for (int64_t t = 0; t < o->Hv; t++)
        memcpy(tmp + (uint64_t)t * blk, v + off + (uint64_t)tiled_src(o, t) * blk, blk * sizeof *tmp);
    memcpy(v + off, tmp, blk * (uint64_t)o->Hv * sizeof *tmp);
    free(tmp);
}

enum xf { XF_NONE, XF_NORM, XF_A, XF_VVEC, XF_CONV, XF_QKV, XF_VROWS, XF_HROWS, XF_OUT, XF_QKVZ, XF_SHGATE };

struct tl_unit {
    char logical[64], hf[96], gguf[32];
};

/* One tensor of the logical model: written in HF form, or transformed for GGUF. */
static void add(struct tl_b *b, const struct tl_unit *u, const char *hf_sfx, const char *gguf_sfx,
                enum xf xf, int n_dims, int64_t d0, int64_t d1, int64_t d2)
{
    const struct tl_opts *o = b->o;
    int64_t shape[3] = { d0, d1, d2 };
    char logical[192], name[192];
    snprintf(logical, sizeof logical, "%s%s", u->logical, hf_sfx);
    uint64_t n = nel(n_dims, shape);
    float *v = gen(logical, n);
    bool vec = n_dims == 1;
    if (!o->gguf) {
        snprintf(name, sizeof name, "%s%s", u->hf, hf_sfx);
        enum dtype dt = xf == XF_A ? DTYPE_F32 : o->wtype;
        if (dt == DTYPE_Q8_0) dt = DTYPE_F32;
        put(b, name, dt, n_dims, shape, v);
        free(v);
        return;
    }
    const bool tile = o->arch != MODEL_ARCH_QWEN3NEXT && o->Hk != o->Hv;
    const uint64_t kd = (uint64_t)(o->Hk * o->Dk);
    switch (xf) {
    case XF_NONE: break;
    case XF_NORM: for (uint64_t i = 0; i < n; i++) v[i] += 1.0f; break;
    case XF_A:
        for (uint64_t i = 0; i < n; i++) v[i] = -expf(v[i]);
        if (tile) vperm(o, v, 0, 1);
        break;
    case XF_VVEC: if (tile) vperm(o, v, 0, 1); break;
    case XF_CONV:
        n_dims = 2; shape[1] = o->K;
        if (tile) vperm(o, v, 2 * kd * (uint64_t)o->K, (uint64_t)(o->Dv * o->K));
        break;
    case XF_QKV: if (tile) vperm(o, v, 2 * kd * (uint64_t)o->H, (uint64_t)(o->Dv * o->H)); break;
    case XF_VROWS: if (tile) vperm(o, v, 0, (uint64_t)(o->Dv * o->H)); break;
    case XF_HROWS: if (tile) vperm(o, v, 0, (uint64_t)o->H); break;
    case XF_OUT:
        if (tile)
            for (int64_t row = 0; row < o->H; row++) vperm(o, v, (uint64_t)(row * o->Hv * o->Dv), (uint64_t)o->Dv);
        break;
    case XF_SHGATE: n_dims = 1; shape[0] = o->H; vec = true; break;
    case XF_QKVZ:
        if (!o->gguf_ssm_in) {
            /* llama.cpp: q heads, k heads, v heads (grouped order kept) + z. */
            const int64_t r = o->Hv / o->Hk, blk = 2 * o->Dk + 2 * r * o->Dv, H = o->H;
            int64_t qs[2] = { 2 * o->Hk * o->Dk + o->Hv * o->Dv, H }, zs[2] = { o->Hv * o->Dv, H };
            float *q = malloc(sizeof *q * (size_t)(qs[0] * H)), *z = malloc(sizeof *z * (size_t)(zs[0] * H));
            for (int64_t g = 0; g < o->Hk; g++) {
                memcpy(q + g * o->Dk * H, v + g * blk * H, sizeof *q * (size_t)(o->Dk * H));
                memcpy(q + (o->Hk * o->Dk + g * o->Dk) * H, v + (g * blk + o->Dk) * H, sizeof *q * (size_t)(o->Dk * H));
                memcpy(q + (2 * o->Hk * o->Dk + g * r * o->Dv) * H, v + (g * blk + 2 * o->Dk) * H,
                       sizeof *q * (size_t)(r * o->Dv * H));
                memcpy(z + g * r * o->Dv * H, v + (g * blk + 2 * o->Dk + r * o->Dv) * H,
                       sizeof *q * (size_t)(r * o->Dv * H));
            }
            snprintf(name, sizeof name, "%sattn_qkv.weight", u->gguf);
            put(b, name, o->wtype, 2, qs, q);
            snprintf(name, sizeof name, "%sattn_gate.weight", u->gguf);
            put(b, name, o->wtype, 2, zs, z);
            free(q); free(z); free(v);
            return;
        }
        gguf_sfx = "ssm_in.weight";
        break;
    }
    snprintf(name, sizeof name, "%s%s", u->gguf, gguf_sfx);
    put(b, name, vec || xf == XF_CONV ? DTYPE_F32 : o->wtype, n_dims, shape, v);
    free(v);
}

/* Experts: logical stacks gate/up [E, Ie, H] and down [E, H, Ie]. */
static void add_experts(struct tl_b *b, const struct tl_unit *u)
{
    const struct tl_opts *o = b->o;
    const int64_t E = o->E, Ie = o->Ie, H = o->H;
    char lg[192], ln[192], name[192];
    snprintf(lg, sizeof lg, "%smlp.experts.gate", u->logical);
    float *gate = gen(lg, (uint64_t)(E * Ie * H));
    snprintf(lg, sizeof lg, "%smlp.experts.up", u->logical);
    float *up = gen(lg, (uint64_t)(E * Ie * H));
    snprintf(ln, sizeof ln, "%smlp.experts.down", u->logical);
    float *down = gen(ln, (uint64_t)(E * H * Ie));
    const size_t m = (size_t)(Ie * H);
    float *gu = malloc(sizeof *gu * 2 * m * (size_t)E);
    for (int64_t e = 0; e < E; e++) {
        memcpy(gu + (size_t)e * 2 * m, gate + (size_t)e * m, m * sizeof *gu);
        memcpy(gu + (size_t)e * 2 * m + m, up + (size_t)e * m, m * sizeof *gu);
    }
    int64_t s3[3] = { E, Ie, H }, s3d[3] = { E, H, Ie }, s3gu[3] = { E, 2 * Ie, H };
    enum dtype wt = o->wtype;
    if (!o->gguf && wt == DTYPE_Q8_0) wt = DTYPE_F32;
    if (o->gguf) {
        if (o->gguf_fused_gate_up) {
            snprintf(name, sizeof name, "%sffn_gate_up_exps.weight", u->gguf);
            put(b, name, wt, 3, s3gu, gu);
        } else {
            snprintf(name, sizeof name, "%sffn_gate_exps.weight", u->gguf);
            put(b, name, wt, 3, s3, gate);
            snprintf(name, sizeof name, "%sffn_up_exps.weight", u->gguf);
            put(b, name, wt, 3, s3, up);
        }
        snprintf(name, sizeof name, "%sffn_down_exps.weight", u->gguf);
        put(b, name, wt, 3, s3d, down);
    } else if (o->arch == MODEL_ARCH_QWEN35MOE) {
        snprintf(name, sizeof name, "%smlp.experts.gate_up_proj", u->hf);
        put(b, name, wt, 3, s3gu, gu);
        snprintf(name, sizeof name, "%smlp.experts.down_proj", u->hf);
        put(b, name, wt, 3, s3d, down);
    } else {
        int64_t s2[2] = { Ie, H }, s2d[2] = { H, Ie };
        for (int64_t e = 0; e < E; e++) {
            snprintf(name, sizeof name, "%smlp.experts.%d.gate_proj.weight", u->hf, (int)e);
            put(b, name, wt, 2, s2, gate + (size_t)e * m);
            snprintf(name, sizeof name, "%smlp.experts.%d.up_proj.weight", u->hf, (int)e);
            put(b, name, wt, 2, s2, up + (size_t)e * m);
            snprintf(name, sizeof name, "%smlp.experts.%d.down_proj.weight", u->hf, (int)e);
            put(b, name, wt, 2, s2d, down + (size_t)e * m);
        }
    }
    free(gate); free(up); free(down); free(gu);
}

static void add_layer(struct tl_b *b, const struct tl_unit *u, bool attn, bool moe)
{
    const struct tl_opts *o = b->o;
    const int64_t H = o->H, kd = o->Hk * o->Dk, vd = o->Hv * o->Dv;
    add(b, u, "input_layernorm.weight", "attn_norm.weight", XF_NORM, 1, H, 0, 0);
    add(b, u, "post_attention_layernorm.weight", "post_attention_norm.weight", XF_NORM, 1, H, 0, 0);
    if (attn) {
        add(b, u, "self_attn.q_proj.weight", "attn_q.weight", XF_NONE, 2, 2 * o->nh * o->hd, H, 0);
        add(b, u, "self_attn.k_proj.weight", "attn_k.weight", XF_NONE, 2, o->nkv * o->hd, H, 0);
        add(b, u, "self_attn.v_proj.weight", "attn_v.weight", XF_NONE, 2, o->nkv * o->hd, H, 0);
        add(b, u, "self_attn.o_proj.weight", "attn_output.weight", XF_NONE, 2, H, o->nh * o->hd, 0);
        add(b, u, "self_attn.q_norm.weight", "attn_q_norm.weight", XF_NORM, 1, o->hd, 0, 0);
        add(b, u, "self_attn.k_norm.weight", "attn_k_norm.weight", XF_NORM, 1, o->hd, 0, 0);
    } else {
        if (o->arch == MODEL_ARCH_QWEN3NEXT) {
            add(b, u, "linear_attn.in_proj_qkvz.weight", NULL, XF_QKVZ, 2, 2 * kd + 2 * vd, H, 0);
            add(b, u, "linear_attn.in_proj_ba.weight", "ssm_ba.weight", XF_NONE, 2, 2 * o->Hv, H, 0);
        } else {
            add(b, u, "linear_attn.in_proj_qkv.weight", "attn_qkv.weight", XF_QKV, 2, 2 * kd + vd, H, 0);
            add(b, u, "linear_attn.in_proj_z.weight", "attn_gate.weight", XF_VROWS, 2, vd, H, 0);
            add(b, u, "linear_attn.in_proj_b.weight", "ssm_beta.weight", XF_HROWS, 2, o->Hv, H, 0);
            add(b, u, "linear_attn.in_proj_a.weight", "ssm_alpha.weight", XF_HROWS, 2, o->Hv, H, 0);
        }
        add(b, u, "linear_attn.conv1d.weight", "ssm_conv1d.weight", XF_CONV, 3, 2 * kd + vd, 1, o->K);
        add(b, u, "linear_attn.dt_bias", "ssm_dt.bias", XF_VVEC, 1, o->Hv, 0, 0);
        add(b, u, "linear_attn.A_log", "ssm_a", XF_A, 1, o->Hv, 0, 0);
        add(b, u, "linear_attn.norm.weight", "ssm_norm.weight", XF_NONE, 1, o->Dv, 0, 0);
        add(b, u, "linear_attn.out_proj.weight", "ssm_out.weight", XF_OUT, 2, H, vd, 0);
    }
    if (!moe) {
        add(b, u, "mlp.gate_proj.weight", "ffn_gate.weight", XF_NONE, 2, o->I, H, 0);
        add(b, u, "mlp.up_proj.weight", "ffn_up.weight", XF_NONE, 2, o->I, H, 0);
        add(b, u, "mlp.down_proj.weight", "ffn_down.weight", XF_NONE, 2, H, o->I, 0);
    } else {
        add(b, u, "mlp.gate.weight", "ffn_gate_inp.weight", XF_NONE, 2, o->E, H, 0);
        add_experts(b, u);
        add(b, u, "mlp.shared_expert.gate_proj.weight", "ffn_gate_shexp.weight", XF_NONE, 2, o->Is, H, 0);
        add(b, u, "mlp.shared_expert.up_proj.weight", "ffn_up_shexp.weight", XF_NONE, 2, o->Is, H, 0);
        add(b, u, "mlp.shared_expert.down_proj.weight", "ffn_down_shexp.weight", XF_NONE, 2, H, o->Is, 0);
        add(b, u, "mlp.shared_expert_gate.weight", "ffn_gate_inp_shexp.weight", XF_SHGATE, 2, 1, H, 0);
    }
}

static const char *hf_arch_string(enum model_arch a, bool flat)
{
    switch (a) {
    case MODEL_ARCH_QWEN35: return flat ? "Qwen3_5ForCausalLM" : "Qwen3_5ForConditionalGeneration";
    case MODEL_ARCH_QWEN35MOE: return flat ? "Qwen3_5MoeForCausalLM" : "Qwen3_5MoeForConditionalGeneration";
    default: return "Qwen3NextForCausalLM";
    }
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert(f, "open %s", path);
    fputs(text, f);
    fclose(f);
}

static void write_config(const struct tl_opts *o, const char *dir)
{
    struct strbuf sb;
    strbuf_init(&sb);
    struct jsonw w;
    jsonw_init(&w, &sb, 2);
    const bool next = o->arch == MODEL_ARCH_QWEN3NEXT, flat = o->flat_config || next;
    const char *mt = next ? "qwen3_next" : o->arch == MODEL_ARCH_QWEN35MOE ? "qwen3_5_moe" : "qwen3_5";
    jsonw_obj_begin(&w);
    if (!(o->hf_type && !*o->hf_type)) {
        jsonw_key(&w, "architectures");
        jsonw_arr_begin(&w);
        jsonw_str(&w, o->hf_type ? "LlamaForCausalLM" : hf_arch_string(o->arch, flat));
        jsonw_arr_end(&w);
    }
    jsonw_key(&w, "model_type");
    jsonw_str(&w, o->hf_type ? (*o->hf_type ? o->hf_type : "llama") : mt);
    jsonw_key(&w, "tie_word_embeddings");
    jsonw_bool(&w, o->tied);
    if (!flat) {
        jsonw_key(&w, "text_config");
        jsonw_obj_begin(&w);
        char tmt[64];
        snprintf(tmt, sizeof tmt, "%s_text", mt);
        jsonw_key(&w, "model_type");
        jsonw_str(&w, o->hf_type ? "llama" : tmt);
    }
#define KI(k, v) do { jsonw_key(&w, k); jsonw_int(&w, v); } while (0)
    KI("vocab_size", o->V); KI("hidden_size", o->H); KI("num_hidden_layers", o->n_layer);
    if (o->arch == MODEL_ARCH_QWEN35) KI("intermediate_size", o->I);
    else if (next) KI("intermediate_size", o->I);
    KI("num_attention_heads", o->nh); KI("num_key_value_heads", o->nkv); KI("head_dim", o->hd);
    KI("linear_num_key_heads", o->Hk); KI("linear_num_value_heads", o->Hv);
    KI("linear_key_head_dim", o->Dk); KI("linear_value_head_dim", o->Dv);
    KI("linear_conv_kernel_dim", o->K); KI("full_attention_interval", o->interval);
    KI("max_position_embeddings", 4096);
    if (!next) KI("mtp_num_hidden_layers", o->n_mtp);
    if (o->attn_mask) {
        jsonw_key(&w, "layer_types");
        jsonw_arr_begin(&w);
        for (int il = 0; il < o->n_layer; il++) jsonw_str(&w, tl_is_attn(o, il) ? "full_attention" : "linear_attention");
        jsonw_arr_end(&w);
    }
    jsonw_key(&w, "rms_norm_eps"); jsonw_double(&w, 1e-6);
    jsonw_key(&w, "attn_output_gate"); jsonw_bool(&w, true);
    jsonw_key(&w, "rope_parameters");
    jsonw_obj_begin(&w);
    jsonw_key(&w, "rope_theta"); jsonw_double(&w, 1e7);
    jsonw_key(&w, "partial_rotary_factor"); jsonw_double(&w, 0.25);
    jsonw_obj_end(&w);
    if (o->arch != MODEL_ARCH_QWEN35) {
        KI("num_experts", o->E); KI("num_experts_per_tok", o->Eu);
        KI("moe_intermediate_size", o->Ie); KI("shared_expert_intermediate_size", o->Is);
        if (next) { jsonw_key(&w, "norm_topk_prob"); jsonw_bool(&w, true); }
    }
#undef KI
    if (!flat) jsonw_obj_end(&w);
    jsonw_obj_end(&w);
    char *p = sys_path_join(dir, "config.json");
    write_file(p, sb.buf);
    hs_free(p);
    strbuf_free(&sb);
}

static void gguf_meta(const struct tl_opts *o, struct gguf_writer *w)
{
    const char *an = o->gguf_arch ? o->gguf_arch : model_arch_name(o->arch);
    char k[128];
    gguf_writer_set_str(w, "general.architecture", an);
#define U(key, v) do { snprintf(k, sizeof k, "%s.%s", an, key); gguf_writer_set_u32(w, k, (uint32_t)(v)); } while (0)
#define FL(key, v) do { snprintf(k, sizeof k, "%s.%s", an, key); gguf_writer_set_f32(w, k, v); } while (0)
    /* per-block array (uint32) when gguf_per_layer; at_gdn = the value at GDN layers */
#define PL(key, v, at_gdn) do {                                                                 \
        if (!o->gguf_per_layer) { U(key, v); break; }                                           \
        int32_t pl[64];                                                                         \
        int npl = (int)(o->n_layer + o->n_mtp);                                                 \
        for (int il = 0; il < npl; il++) pl[il] = il < o->n_layer && !tl_is_attn(o, il) ? (at_gdn) : (v); \
        snprintf(k, sizeof k, "%s.%s", an, key);                                                \
        gguf_writer_set_arr_i32(w, k, pl, (uint64_t)npl);                                       \
    } while (0)
    U("block_count", o->gguf_block_count ? o->gguf_block_count : o->n_layer + o->n_mtp);
    if (o->n_mtp) U("nextn_predict_layers", o->n_mtp);
    U("context_length", 4096);
    if (!o->gguf_no_embedding_length) U("embedding_length", o->H);
    if (o->arch == MODEL_ARCH_QWEN35) PL("feed_forward_length", o->I, o->I);
    PL("attention.head_count", o->nh, 0); PL("attention.head_count_kv", o->nkv, 0);
    U("attention.key_length", o->hd); U("attention.value_length", o->hd);
    FL("attention.layer_norm_rms_epsilon", 1e-6f);
    U("rope.dimension_count", o->hd / 4);
    FL("rope.freq_base", 1e7f);
    int32_t sec[4] = { 11, 11, 10, 0 };
    snprintf(k, sizeof k, "%s.rope.dimension_sections", an);
    gguf_writer_set_arr_i32(w, k, sec, 4);
    U("ssm.conv_kernel", o->K); U("ssm.state_size", o->Dk); U("ssm.group_count", o->Hk);
    U("ssm.time_step_rank", o->gguf_time_step_rank ? o->gguf_time_step_rank : o->Hv);
    U("ssm.inner_size", o->Hv * o->Dv);
    U("full_attention_interval", o->interval);
    if (o->attn_mask) {
        struct gguf_value items[64];
        int n = (int)(o->n_layer + o->n_mtp);
        const enum gguf_type et = o->kinds_typed ? o->kinds_type : GGUF_TYPE_BOOL;
        for (int il = 0; il < n; il++) {
            bool recurrent = il < o->n_layer && !tl_is_attn(o, il);
            items[il] = (struct gguf_value){ .type = et };
            if (et == GGUF_TYPE_BOOL) items[il].v.b = recurrent;
            else if (et == GGUF_TYPE_INT8 || et == GGUF_TYPE_INT16 || et == GGUF_TYPE_INT32 || et == GGUF_TYPE_INT64)
                items[il].v.i = recurrent ? -1 : 0; /* any non-zero value means recurrent */
            else items[il].v.u = recurrent;
        }
        struct gguf_value arr = { .type = GGUF_TYPE_ARRAY };
        arr.v.arr.elem_type = et;
        arr.v.arr.n = (uint64_t)n;
        arr.v.arr.items = items;
        snprintf(k, sizeof k, "%s.attention.recurrent_layers", an);
        gguf_writer_set_value(w, k, &arr);
    }
    if (o->arch != MODEL_ARCH_QWEN35) {
        U("expert_count", o->E); PL("expert_used_count", o->Eu, o->Eu);
        PL("expert_feed_forward_length", o->Ie, o->Ie); U("expert_shared_feed_forward_length", o->Is);
        if (o->gguf_weights_norm_false) {
            snprintf(k, sizeof k, "%s.expert_weights_norm", an);
            gguf_writer_set_bool(w, k, false);
        }
    }
#undef PL
#undef U
#undef FL
    if (o->with_tokenizer) {
        const char *toks[6] = { "a", "b", "ab", "<|endoftext|>", "<|im_start|>", "<|im_end|>" };
        const char *merges[1] = { "a b" };
        gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
        gguf_writer_set_str(w, "tokenizer.ggml.pre", "qwen35");
        gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, 6);
        gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", merges, 1);
        gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 3);
        gguf_writer_set_str(w, "tokenizer.chat_template", "{{ messages }}");
    }
}

static void write_hf_tokenizer(const char *dir)
{
    char *p = sys_path_join(dir, "tokenizer.json");
    write_file(p, "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2},"
                  " \"merges\": [\"a b\"]},"
                  " \"added_tokens\": [{\"id\": 3, \"content\": \"<|endoftext|>\", \"special\": true,"
                  " \"normalized\": false, \"lstrip\": false, \"rstrip\": false, \"single_word\": false}],"
                  " \"pre_tokenizer\": null, \"normalizer\": null}");
    hs_free(p);
    p = sys_path_join(dir, "tokenizer_config.json");
    write_file(p, "{\"eos_token\": \"<|endoftext|>\"}");
    hs_free(p);
}

/* Write the model into dir; returns the path model_load takes (owned, free()). */
char *tl_write(const struct tl_opts *o, const char *dir)
{
    struct tl_b *b = calloc(1, sizeof *b);
    b->o = o;
    struct tl_unit top = { "", "", "" }, root = { "", "", "" };
    if (!o->gguf) snprintf(top.hf, sizeof top.hf, "%s", o->prefix);
    add(b, &top, "embed_tokens.weight", "token_embd.weight", XF_NONE, 2, o->V, o->H, 0);
    add(b, &top, "norm.weight", "output_norm.weight", XF_NORM, 1, o->H, 0, 0);
    if (!o->tied) add(b, &root, "lm_head.weight", "output.weight", XF_NONE, 2, o->V, o->H, 0);
    const bool moe = o->arch != MODEL_ARCH_QWEN35 && o->E > 0;
    for (int il = 0; il < o->n_layer; il++) {
        struct tl_unit u;
        snprintf(u.logical, sizeof u.logical, "layers.%d.", il);
        snprintf(u.hf, sizeof u.hf, "%slayers.%d.", o->prefix, il);
        snprintf(u.gguf, sizeof u.gguf, "blk.%d.", il);
        add_layer(b, &u, tl_is_attn(o, il), moe);
    }
    if (o->n_mtp) {
        struct tl_unit mt = { "", "", "" };
        snprintf(mt.gguf, sizeof mt.gguf, "blk.%d.", (int)o->n_layer);
        add(b, &mt, "mtp.fc.weight", "nextn.eh_proj.weight", XF_NONE, 2, o->H, 2 * o->H, 0);
        add(b, &mt, "mtp.pre_fc_norm_embedding.weight", "nextn.enorm.weight", XF_NORM, 1, o->H, 0, 0);
        add(b, &mt, "mtp.pre_fc_norm_hidden.weight", "nextn.hnorm.weight", XF_NORM, 1, o->H, 0, 0);
        add(b, &mt, "mtp.norm.weight", "nextn.shared_head_norm.weight", XF_NORM, 1, o->H, 0, 0);
        for (int j = 0; j < o->n_mtp; j++) {
            struct tl_unit u;
            snprintf(u.logical, sizeof u.logical, "mtp.layers.%d.", j);
            snprintf(u.hf, sizeof u.hf, "mtp.layers.%d.", j);
            snprintf(u.gguf, sizeof u.gguf, "blk.%d.", (int)o->n_layer + j);
            add_layer(b, &u, true, moe);
        }
    }
    if (o->extra) {
        int64_t s[1] = { 8 };
        float v[8] = { 0 };
        put(b, o->extra, DTYPE_F32, 1, s, v);
    }

    struct hs_err err = { 0 };
    char *path;
    if (o->gguf) {
        path = sys_path_join(dir, "model.gguf");
        struct gguf_writer *w = gguf_writer_new();
        gguf_meta(o, w);
        for (int i = 0; i < b->n; i++)
            gguf_writer_add_tensor(w, b->t[i].name, b->t[i].dtype, b->t[i].n_dims, b->t[i].shape,
                                   b->t[i].data, b->t[i].n_bytes);
        cr_assert_eq(gguf_writer_write(w, path, &err), HS_OK, "%s", err.msg);
        gguf_writer_free(w);
    } else {
        write_config(o, dir);
        if (o->with_tokenizer) write_hf_tokenizer(dir);
        char *st = sys_path_join(dir, "model.safetensors");
        struct st_writer *w = st_writer_new();
        for (int i = 0; i < b->n; i++)
            st_writer_add(w, b->t[i].name, b->t[i].dtype, b->t[i].n_dims, b->t[i].shape, b->t[i].data,
                          b->t[i].n_bytes);
        cr_assert_eq(st_writer_write(w, st, &err), HS_OK, "%s", err.msg);
        st_writer_free(w);
        hs_free(st);
        path = hs_strdup(dir);
    }
    for (int i = 0; i < b->n; i++) { free(b->t[i].name); free(b->t[i].data); }
    free(b);
    char *out = strdup(path);
    hs_free(path);
    return out;
}

/* For test_inspect.c: a default model of an architecture, with tokenizer data. */
char *tl_write_basic(enum model_arch arch, bool gguf, int n_layer, const char *dir);
char *tl_write_basic(enum model_arch arch, bool gguf, int n_layer, const char *dir)
{
    struct tl_opts o;
    tl_defaults(&o, arch, gguf);
    o.n_layer = n_layer;
    o.with_tokenizer = true;
    return tl_write(&o, dir);
}

char *tl_tmpdir(void)
{
    char *d = strdup("/tmp/hs_model_test_XXXXXX");
    cr_assert(mkdtemp(d), "mkdtemp");
    return d;
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

void tl_rmdir(char *dir)
{
    if (!dir) return;
    nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

/* ---- reading bound weights back -------------------------------------------------------- */

static float wget(const struct model_weight *w, int64_t mat, int64_t row, int64_t col)
{
    const uint8_t *base = w->n_mat > 1 ? w->mats[mat] : w->data;
    const uint8_t *p = base + (uint64_t)row * w->row_bytes;
    switch (w->dtype) {
    case DTYPE_F32: { float f; memcpy(&f, p + 4 * col, 4); return f; }
    case DTYPE_F16: return hs_f16_to_f32(hs_rd_u16(p + 2 * col));
    case DTYPE_BF16: return hs_bf16_to_f32(hs_rd_u16(p + 2 * col));
    default: cr_assert_fail("wget: dtype %d", w->dtype); return 0;
    }
}

static struct model *load_ok(const char *path)
{
    struct model *m = NULL;
    struct hs_err err = { 0 };
    int rc = model_load(path, &m, &err);
    cr_assert_eq(rc, HS_OK, "model_load: %s", err.msg);
    cr_assert_not_null(m);
    return m;
}

static int load_err(const char *path, struct hs_err *err)
{
    struct model *m = NULL;
    hs_err_clear(err);
    int rc = model_load(path, &m, err);
    cr_assert_neq(rc, HS_OK, "model_load unexpectedly succeeded");
    cr_assert_null(m);
    cr_assert_eq(err->code, rc);
    return rc;
}

static const struct tensor_view *view(const struct model *m, const char *name)
{
    const struct tensor_view *t = tensor_set_find(model_tensors(m), name);
    cr_assert_not_null(t, "tensor %s", name);
    return t;
}

/* ---- HF: conventions, values at known positions ---------------------------------------- */

Test(load_hf, qwen35_vlm_grouped_heads_are_tiled)
{
    char *dir = tl_tmpdir();
    struct tl_opts o;
    tl_defaults(&o, MODEL_ARCH_QWEN35, false);  /* Hk 2, Hv 6, Dv 32, untied, 1 MTP */
    char *path = tl_write(&o, dir);
    struct model *m = load_ok(path);
    const struct model_hparams *hp = model_hparams(m);
    cr_assert_eq(hp->arch, MODEL_ARCH_QWEN35);
    cr_assert_eq(hp->n_layer, 4);
    cr_assert_eq(hp->n_vocab, 40);
    cr_assert_eq(hp->n_rot, 4);
    cr_assert_eq(hp->gdn_k_heads, 2);
    cr_assert_eq(hp->gdn_v_heads, 6);
    cr_assert_eq(hp->n_mtp, 1);
    cr_assert(!hp->tied_embeddings);
    cr_assert_eq(hp->layer_kind[0], LAYER_KIND_GDN);
    cr_assert_eq(hp->layer_kind[3], LAYER_KIND_ATTN);
    cr_assert_eq(model_source(m), MODEL_SOURCE_HF);
    cr_assert_str_eq(m->hf_prefix, "model.language_model.");

    const struct model_layer *L = model_layer(m, 0);
    const int64_t H = 64, Hk = 2, Hv = 6, Dk = 16, Dv = 32, r = 3, K = 4;
    /* norms folded: 1 + w */
    for (int i = 0; i < H; i++) {
        cr_assert_eq(L->attn_norm[i], 1.0f + tl_val("layers.0.input_layernorm.weight", (uint64_t)i));
        cr_assert_eq(L->post_attn_norm[i], 1.0f + tl_val("layers.0.post_attention_layernorm.weight", (uint64_t)i));
        cr_assert_eq(model_output_norm(m)[i], 1.0f + tl_val("norm.weight", (uint64_t)i));
    }
    const struct model_layer *A = model_layer(m, 3);
    for (int i = 0; i < 16; i++) {
        cr_assert_eq(A->q_norm[i], 1.0f + tl_val("layers.3.self_attn.q_norm.weight", (uint64_t)i));
        cr_assert_eq(A->k_norm[i], 1.0f + tl_val("layers.3.self_attn.k_norm.weight", (uint64_t)i));
    }
    /* ssm_norm as stored */
    for (int i = 0; i < Dv; i++) cr_assert_eq(L->ssm_norm[i], tl_val("layers.0.linear_attn.norm.weight", (uint64_t)i));
    /* value heads: tiled t holds grouped (t % Hk) * r + t / Hk */
    for (int64_t t = 0; t < Hv; t++) {
        const int64_t h = (t % Hk) * r + t / Hk;
        cr_assert_eq(L->ssm_a[t], -expf(tl_val("layers.0.linear_attn.A_log", (uint64_t)h)), "ssm_a[%ld]", (long)t);
        cr_assert_eq(L->dt_bias[t], tl_val("layers.0.linear_attn.dt_bias", (uint64_t)h));
        for (int64_t c = 0; c < H; c += 7) {
            cr_assert_eq(wget(&L->wb, 0, t, c), tl_val("layers.0.linear_attn.in_proj_b.weight", (uint64_t)(h * H + c)));
            cr_assert_eq(wget(&L->wa, 0, t, c), tl_val("layers.0.linear_attn.in_proj_a.weight", (uint64_t)(h * H + c)));
        }
        for (int64_t d = 0; d < Dv; d += 5) {
            const int64_t qkv_row = 2 * Hk * Dk + h * Dv + d;
            for (int64_t c = 0; c < H; c += 9) {
                cr_assert_eq(wget(&L->wqkv, 0, 2 * Hk * Dk + t * Dv + d, c),
                             tl_val("layers.0.linear_attn.in_proj_qkv.weight", (uint64_t)(qkv_row * H + c)));
                cr_assert_eq(wget(&L->wz, 0, t * Dv + d, c),
                             tl_val("layers.0.linear_attn.in_proj_z.weight", (uint64_t)((h * Dv + d) * H + c)));
            }
            for (int64_t k = 0; k < K; k++)
                cr_assert_eq(L->conv[(2 * Hk * Dk + t * Dv + d) * K + k],
                             tl_val("layers.0.linear_attn.conv1d.weight", (uint64_t)(qkv_row * K + k)));
            for (int64_t row = 0; row < H; row += 11)
                cr_assert_eq(wget(&L->wout, 0, row, t * Dv + d),
                             tl_val("layers.0.linear_attn.out_proj.weight", (uint64_t)(row * Hv * Dv + h * Dv + d)));
        }
    }
    /* q and k rows and channels stay where they were */
    for (int64_t row = 0; row < 2 * Hk * Dk; row += 3) {
        cr_assert_eq(wget(&L->wqkv, 0, row, 5), tl_val("layers.0.linear_attn.in_proj_qkv.weight", (uint64_t)(row * H + 5)));
        cr_assert_eq(L->conv[row * K + 1], tl_val("layers.0.linear_attn.conv1d.weight", (uint64_t)(row * K + 1)));
    }
    /* untouched matrices are zero-copy views */
    cr_assert_eq(A->wq.data, view(m, "model.language_model.layers.3.self_attn.q_proj.weight")->data);
    cr_assert_eq(L->ffn_down.data, view(m, "model.language_model.layers.0.mlp.down_proj.weight")->data);
    cr_assert_eq(A->wq.rows, 64);
    cr_assert_eq(A->wq.cols, 64);
    cr_assert_eq(A->wq.row_bytes, 256);
    /* untied head */
    cr_assert_eq(model_lm_head(m)->data, view(m, "lm_head.weight")->data);
    cr_assert_neq(model_lm_head(m)->data, model_token_embd(m)->data);
    /* MTP */
    const struct model_top *top = model_top_weights(m);
    cr_assert_eq(top->mtp_fc.data, view(m, "mtp.fc.weight")->data);
    cr_assert_eq(top->mtp_fc.cols, 128);
    cr_assert_eq(top->mtp_enorm[3], 1.0f + tl_val("mtp.pre_fc_norm_embedding.weight", 3));
    cr_assert_eq(top->mtp_norm[0], 1.0f + tl_val("mtp.norm.weight", 0));
    const struct model_layer *M = model_mtp_layer(m, 0);
    cr_assert_not_null(M);
    cr_assert_eq(M->kind, LAYER_KIND_ATTN);
    cr_assert_eq(M->wk.data, view(m, "mtp.layers.0.self_attn.k_proj.weight")->data);
    cr_assert_eq(M->q_norm[2], 1.0f + tl_val("mtp.layers.0.self_attn.q_norm.weight", 2));
    cr_assert_null(model_mtp_layer(m, 1));
    /* every tensor claimed; parameter counts split main / MTP */
    uint64_t total = 0, mtp = 0;
    for (int i = 0; i < tensor_set_count(model_tensors(m)); i++) {
        const struct tensor_view *t = tensor_set_at(model_tensors(m), i);
        cr_assert(model_tensor_claimed(m, i), "%s not claimed", t->name);
        total += tensor_n_elems(t);
        if (!strncmp(t->name, "mtp.", 4)) mtp += tensor_n_elems(t);
    }
    cr_assert_eq(model_n_params_mtp(m), mtp);
    cr_assert_eq(model_n_params(m) + model_n_params_mtp(m), total);
    cr_assert_gt(model_file_bytes(m), total * 4);
    cr_assert_not_null(model_dir(m));
    cr_assert_null(model_gguf(m));
    model_free(m);
    free(path);
    tl_rmdir(dir);
}

Test(load_hf, qwen35_flat_prefix_tied_equal_heads_zero_copy)
{
    char *dir = tl_tmpdir();
    struct tl_opts o;
    tl_defaults(&o, MODEL_ARCH_QWEN35, false);
    o.prefix = "model.";
    o.flat_config = true;
    o.tied = true;
    o.Hv = 2;      /* Hk == Hv: nothing to permute */
    o.n_mtp = 0;
    char *path = tl_write(&o, dir);
    struct model *m = load_ok(path);
    cr_assert_str_eq(m->hf_prefix, "model.");
    cr_assert(model_hparams(m)->tied_embeddings);
    cr_assert_eq(model_hparams(m)->n_mtp, 0);
    cr_assert_eq(model_lm_head(m)->data, model_token_embd(m)->data);
    cr_assert_eq(model_lm_head(m)->rows, 40);
    const struct model_layer *L = model_layer(m, 1);
    cr_assert_eq(L->wqkv.data, view(m, "model.layers.1.linear_attn.in_proj_qkv.weight")->data);
    cr_assert_eq(L->wz.data, view(m, "model.layers.1.linear_attn.in_proj_z.weight")->data);
    cr_assert_eq(L->wout.data, view(m, "model.layers.1.linear_attn.out_proj.weight")->data);
    cr_assert_eq(L->dt_bias[1], tl_val("layers.1.linear_attn.dt_bias", 1));
    cr_assert_null(model_layer(m, 4));
    cr_assert_null(model_layer(m, -1));
    model_free(m);
    free(path);
    tl_rmdir(dir);
}

Test(load_hf, qwen35_mlx_style_prefix_and_bf16)
{
    char *dir = tl_tmpdir();
    struct tl_opts o;
    tl_defaults(&o, MODEL_ARCH_QWEN35, false);
    o.prefix = "language_model.model.";
    o.wtype = DTYPE_BF16;
    char *path = tl_write(&o, dir);
    struct model *m = load_ok(path);
    cr_assert_str_eq(m->hf_prefix, "language_model.model.");
    const struct model_layer *L = model_layer(m, 2);
    cr_assert_eq(L->wa.dtype, DTYPE_BF16);
    cr_assert_eq(L->wa.row_bytes, 128);
    cr_assert_eq(L->ffn_up.data, view(m, "language_model.model.layers.2.mlp.up_proj.weight")->data);
    /* bf16 norm -> f32, + 1, exact for these values */
    cr_assert_eq(L->attn_norm[9], 1.0f + tl_val("layers.2.input_layernorm.weight", 9));
    cr_assert_eq(wget(&L->wb, 0, 1, 3), tl_val("layers.2.linear_attn.in_proj_b.weight", (uint64_t)(3 * 64 + 3)));
    model_free(m);
    free(path);
    tl_rmdir(dir);
}

Test(load_hf, qwen3next_qkvz_and_ba_split_experts_listed)
{
    char *dir = tl_tmpdir();
    struct tl_opts o;
    tl_defaults(&o, MODEL_ARCH_QWEN3NEXT, false);
    char *path = tl_write(&o, dir);
    struct model *m = load_ok(path);
    const struct model_hparams *hp = model_hparams(m);
    cr_assert_eq(hp->arch, MODEL_ARCH_QWEN3NEXT);
    cr_assert_eq(hp->n_expert, 4);
    cr_assert(hp->norm_topk_prob);
    cr_assert(hp->layer_moe[0] && hp->layer_moe[3]);
    cr_assert_eq(hp->n_mtp, 1, "Qwen3-Next: MTP count from the tensors");
    cr_assert_str_eq(m->hf_prefix, "model.");
    const struct model_layer *L = model_layer(m, 0);
    const int64_t H = 64, Hk = 2, Hv = 6, Dk = 16, Dv = 32, r = 3, blk = 2 * Dk + 2 * r * Dv;
    const char *qkvz = "layers.0.linear_attn.in_proj_qkvz.weight", *ba = "layers.0.linear_attn.in_proj_ba.weight";
    for (int64_t g = 0; g < Hk; g++)
        for (int64_t d = 0; d < Dk; d += 3) {
            cr_assert_eq(wget(&L->wqkv, 0, g * Dk + d, 2), tl_val(qkvz, (uint64_t)((g * blk + d) * H + 2)));
            cr_assert_eq(wget(&L->wqkv, 0, Hk * Dk + g * Dk + d, 2), tl_val(qkvz, (uint64_t)((g * blk + Dk + d) * H + 2)));
        }
    for (int64_t t = 0; t < Hv; t++) {
        const int64_t h = (t % Hk) * r + t / Hk, g = h / r, j = h % r;
        for (int64_t d = 0; d < Dv; d += 7) {
            cr_assert_eq(wget(&L->wqkv, 0, 2 * Hk * Dk + t * Dv + d, 1),
                         tl_val(qkvz, (uint64_t)((g * blk + 2 * Dk + j * Dv + d) * H + 1)), "v head %ld", (long)t);
            cr_assert_eq(wget(&L->wz, 0, t * Dv + d, 1),
                         tl_val(qkvz, (uint64_t)((g * blk + 2 * Dk + r * Dv + j * Dv + d) * H + 1)));
        }
        cr_assert_eq(wget(&L->wb, 0, t, 4), tl_val(ba, (uint64_t)((g * 2 * r + j) * H + 4)));
        cr_assert_eq(wget(&L->wa, 0, t, 4), tl_val(ba, (uint64_t)((g * 2 * r + r + j) * H + 4)));
        cr_assert_eq(L->ssm_a[t], -expf(tl_val("layers.0.linear_attn.A_log", (uint64_t)h)));
    }
    cr_assert_eq(L->wqkv.rows, 2 * Hk * Dk + Hv * Dv);
    cr_assert_eq(L->wz.rows, Hv * Dv);
    /* per-expert tensors: zero-copy pointers */
    cr_assert_eq(L->exp_gate.n_mat, 4);
    for (int e = 0; e < 4; e++) {
        char nm[96];
        snprintf(nm, sizeof nm, "model.layers.0.mlp.experts.%d.up_proj.weight", e);
        cr_assert_eq(L->exp_up.mats[e], view(m, nm)->data);
        snprintf(nm, sizeof nm, "model.layers.0.mlp.experts.%d.down_proj.weight", e);
        cr_assert_eq(L->exp_down.mats[e], view(m, nm)->data);
    }
    cr_assert_eq(L->exp_down.rows, 64);
    cr_assert_eq(L->exp_down.cols, 32);
    cr_assert_eq(wget(&L->exp_gate, 2, 5, 6), tl_val("layers.0.mlp.experts.gate", (uint64_t)(2 * 32 * 64 + 5 * 64 + 6)));
    cr_assert_eq(L->sh_gate_inp.rows, 1);
    cr_assert_eq(L->sh_gate_inp.cols, 64);
    cr_assert_eq(model_mtp_layer(m, 0)->exp_gate.n_mat, 4);
    model_free(m);
    free(path);
    tl_rmdir(dir);
}

Test(load_hf, qwen35moe_gate_up_split_zero_copy)
{
    char *dir = tl_tmpdir();
    struct tl_opts o;
    tl_defaults(&o, MODEL_ARCH_QWEN35MOE, false);
    char *path = tl_write(&o, dir);
    struct model *m = load_ok(path);
    const struct model_hparams *hp = model_hparams(m);
    cr_assert_eq(hp->arch, MODEL_ARCH_QWEN35MOE);
    cr_assert(hp->norm_topk_prob);
    cr_assert_eq(hp->n_ff_exp, 32);
    const struct model_layer *L = model_layer(m, 1);
    const struct tensor_view *gu = view(m, "model.language_model.layers.1.mlp.experts.gate_up_proj");
    const struct tensor_view *dn = view(m, "model.language_model.layers.1.mlp.experts.down_proj");
    const uint64_t rb = 64 * 4;
    for (int e = 0; e < 4; e++) {
        cr_assert_eq(L->exp_gate.mats[e], (const uint8_t *)gu->data + (uint64_t)e * 64 * rb);
        cr_assert_eq(L->exp_up.mats[e], (const uint8_t *)gu->data + ((uint64_t)e * 64 + 32) * rb);
        cr_assert_eq(L->exp_down.mats[e], (const uint8_t *)dn->data + (uint64_t)e * 64 * 32 * 4);
    }
    cr_assert_eq(L->exp_gate.rows, 32);
    cr_assert_eq(L->exp_up.cols, 64);
    cr_assert_eq(wget(&L->exp_up, 3, 31, 63), tl_val("layers.1.mlp.experts.up", (uint64_t)(3 * 32 * 64 + 31 * 64 + 63)));
    cr_assert_eq(wget(&L->exp_down, 1, 7, 2), tl_val("layers.1.mlp.experts.down", (uint64_t)(1 * 64 * 32 + 7 * 32 + 2)));
    model_free(m);
    free(path);
    tl_rmdir(dir);
}

/* ---- GGUF ------------------------------------------------------------------------------ */

Test(load_gguf, qwen35_as_stored_tied)
{
    char *dir = tl_tmpdir();
    struct tl_opts o;
    tl_defaults(&o, MODEL_ARCH_QWEN35, true);
    o.tied = true;
    char *path = tl_write(&o, dir);
    struct model *m = load_ok(path);
    const struct model_hparams *hp = model_hparams(m);
    cr_assert_eq(model_source(m), MODEL_SOURCE_GGUF);
    cr_assert_eq(hp->n_layer, 4, "block_count 5 minus 1 MTP");
    cr_assert_eq(hp->n_mtp, 1);
    cr_assert_eq(hp->n_vocab, 40);
    cr_assert_eq(hp->n_rot, 4);
    cr_assert_eq(hp->gdn_v_dim, 32);
    cr_assert_float_eq(hp->rope_theta, 1e7f, 1.0f);
    cr_assert(hp->tied_embeddings);
    cr_assert_eq(model_lm_head(m)->data, view(m, "token_embd.weight")->data);
    const struct model_layer *L = model_layer(m, 0);
    /* GGUF: already tiled, already folded: zero-copy and as stored */
    cr_assert_eq(L->wqkv.data, view(m, "blk.0.attn_qkv.weight")->data);
    cr_assert_eq(L->wout.data, view(m, "blk.0.ssm_out.weight")->data);
    cr_assert_eq(L->wb.data, view(m, "blk.0.ssm_beta.weight")->data);
    float stored;
    memcpy(&stored, (const char *)view(m, "blk.0.attn_norm.weight")->data + 4 * 5, 4);
    cr_assert_eq(L->attn_norm[5], stored);
    cr_assert_eq(L->attn_norm[5], 1.0f + tl_val("layers.0.input_layernorm.weight", 5));
    memcpy(&stored, (const char *)view(m, "blk.0.ssm_a")->data + 4, 4);
    cr_assert_eq(L->ssm_a[1], stored);
    /* tiled position 1 = grouped head 3 (Hk 2, r 3) */
    cr_assert_eq(L->ssm_a[1], -expf(tl_val("layers.0.linear_attn.A_log", 3)));
    const struct model_top *top = model_top_weights(m);
    cr_assert_eq(top->mtp_fc.data, view(m, "blk.4.nextn.eh_proj.weight")->data);
    cr_assert_eq(model_mtp_layer(m, 0)->wq.data, view(m, "blk.4.attn_q.weight")->data);
    cr_assert_null(model_dir(m));
    cr_assert_not_null(model_gguf(m));
    model_free(m);
    free(path);
    tl_rmdir(dir);
}

/* The same logical model as HF and as a llama.cpp-style GGUF binds to identical bytes. */
static void weights_equal(const struct model_weight *a, const struct model_weight *b, const char *what)
{
    cr_assert_eq(a->dtype, b->dtype, "%s dtype", what);
    cr_assert_eq(a->rows, b->rows, "%s rows", what);
    cr_assert_eq(a->cols, b->cols, "%s cols", what);
    cr_assert_eq(a->n_mat, b->n_mat, "%s n_mat", what);
    cr_assert_eq(a->row_bytes, b->row_bytes, "%s row_bytes", what);
    if (!a->data && !b->data) return;
    cr_assert(a->data && b->data, "%s bound in one only", what);
    for (int64_t e = 0; e < a->n_mat; e++) {
        const void *pa = a->n_mat > 1 ? a->mats[e] : a->data, *pb = b->n_mat > 1 ? b->mats[e] : b->data;
        cr_assert_eq(memcmp(pa, pb, a->row_bytes * (uint64_t)a->rows), 0, "%s matrix %ld differs", what, (long)e);
    }
}

static void vec_equal(const float *a, const float *b, int64_t n, const char *what)
{
    if (!a && !b) return;
    cr_assert(a && b, "%s bound in one only", what);
    cr_assert_eq(memcmp(a, b, sizeof(float) * (size_t)n), 0, "%s differs", what);
}

static void layers_equal(const struct model_hparams *hp, const struct model_layer *a, const struct model_layer *b)
{
    const int64_t C = 2 * hp->gdn_k_heads * hp->gdn_k_dim + hp->gdn_v_heads * hp->gdn_v_dim;
    cr_assert_eq(a->kind, b->kind);
    vec_equal(a->attn_norm, b->attn_norm, hp->n_embd, "attn_norm");
    vec_equal(a->post_attn_norm, b->post_attn_norm, hp->n_embd, "post_attn_norm");
    vec_equal(a->q_norm, b->q_norm, hp->head_dim, "q_norm");
    vec_equal(a->k_norm, b->k_norm, hp->head_dim, "k_norm");
    vec_equal(a->conv, b->conv, C * hp->conv_kernel, "conv");
    vec_equal(a->dt_bias, b->dt_bias, hp->gdn_v_heads, "dt_bias");
    vec_equal(a->ssm_a, b->ssm_a, hp->gdn_v_heads, "ssm_a");
    vec_equal(a->ssm_norm, b->ssm_norm, hp->gdn_v_dim, "ssm_norm");
    const struct { const char *n; size_t off; } ws[] = {
#define WO(f) { #f, offsetof(struct model_layer, f) }
        WO(wq), WO(wk), WO(wv), WO(wo), WO(wqkv), WO(wz), WO(wb), WO(wa), WO(wout), WO(ffn_gate),
        WO(ffn_up), WO(ffn_down), WO(router), WO(exp_gate), WO(exp_up), WO(exp_down), WO(sh_gate),
        WO(sh_up), WO(sh_down),
#undef WO
    };
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++)
        weights_equal((const void *)((const char *)a + ws[i].off), (const void *)((const char *)b + ws[i].off), ws[i].n);
    /* the shared-expert gate is [1, H] in HF and [H] in GGUF: same values, one row */
    if (a->sh_gate_inp.data)
        cr_assert_eq(memcmp(a->sh_gate_inp.data, b->sh_gate_inp.data, a->sh_gate_inp.row_bytes), 0);
}

static void cross_format(enum model_arch arch, bool fused_gate_up, bool ssm_in, int64_t hv)
{
    char *d1 = tl_tmpdir(), *d2 = tl_tmpdir();
    struct tl_opts o;
    tl_defaults(&o, arch, false);
    o.Hv = hv;
    char *p1 = tl_write(&o, d1);
    o.gguf = true;
    o.gguf_fused_gate_up = fused_gate_up;
    o.gguf_ssm_in = ssm_in;
    char *p2 = tl_write(&o, d2);
    struct model *a = load_ok(p1), *b = load_ok(p2);
    const struct model_hparams *ha = model_hparams(a), *hb = model_hparams(b);
    cr_assert_eq(ha->n_layer, hb->n_layer);
    cr_assert_eq(ha->n_mtp, hb->n_mtp);
    cr_assert_eq(ha->n_expert, hb->n_expert);
    cr_assert_eq(ha->n_rot, hb->n_rot);
    cr_assert_eq(ha->head_dim, hb->head_dim);
    for (int il = 0; il < ha->n_layer; il++) {
        cr_assert_eq(ha->layer_kind[il], hb->layer_kind[il]);
        cr_assert_eq(ha->layer_moe[il], hb->layer_moe[il]);
        layers_equal(ha, model_layer(a, il), model_layer(b, il));
    }
    for (int j = 0; j < ha->n_mtp; j++) layers_equal(ha, model_mtp_layer(a, j), model_mtp_layer(b, j));
    weights_equal(model_token_embd(a), model_token_embd(b), "token_embd");
    weights_equal(model_lm_head(a), model_lm_head(b), "lm_head");
    vec_equal(model_output_norm(a), model_output_norm(b), ha->n_embd, "output_norm");
    const struct model_top *ta = model_top_weights(a), *tb = model_top_weights(b);
    weights_equal(&ta->mtp_fc, &tb->mtp_fc, "mtp_fc");
    vec_equal(ta->mtp_enorm, tb->mtp_enorm, ha->n_embd, "mtp_enorm");
    vec_equal(ta->mtp_hnorm, tb->mtp_hnorm, ha->n_embd, "mtp_hnorm");
    vec_equal(ta->mtp_norm, tb->mtp_norm, ha->n_embd, "mtp_norm");
    cr_assert_eq(model_n_params(a), model_n_params(b));
    cr_assert_eq(model_n_params_mtp(a), model_n_params_mtp(b));
    model_free(a);
    model_free(b);
    free(p1);
    free(p2);
    tl_rmdir(d1);
    tl_rmdir(d2);
}

Test(load_cross, qwen35_hf_equals_gguf) { cross_format(MODEL_ARCH_QWEN35, false, false, 6); }
Test(load_cross, qwen35_hk2_hv4) { cross_format(MODEL_ARCH_QWEN35, false, false, 4); }
Test(load_cross, qwen35_equal_heads) { cross_format(MODEL_ARCH_QWEN35, false, false, 2); }
Test(load_cross, qwen35moe_hf_equals_gguf) { cross_format(MODEL_ARCH_QWEN35MOE, false, false, 6); }
Test(load_cross, qwen35moe_fused_gate_up_exps) { cross_format(MODEL_ARCH_QWEN35MOE, true, false, 6); }
Test(load_cross, qwen3next_hf_equals_gguf) { cross_format(MODEL_ARCH_QWEN3NEXT, false, false, 6); }
Test(load_cross, qwen3next_legacy_ssm_in) { cross_format(MODEL_ARCH_QWEN3NEXT, true, true, 6); }
Test(load_cross, qwen3next_equal_heads) { cross_format(MODEL_ARCH_QWEN3NEXT, false, false, 2); }

Test(load_gguf, q8_0_value_head_columns_move_as_blocks)
{
    char *dir = tl_tmpdir();
    struct tl_opts o;
    tl_defaults(&o, MODEL_ARCH_QWEN3NEXT, true);  /* qwen3next GGUF is grouped: permuted at load */
    o.wtype = DTYPE_Q8_0;
    char *path = tl_write(&o, dir);
    struct model *m = load_ok(path);
    const struct model_layer *L = model_layer(m, 0);
    const struct tensor_view *t = view(m, "blk.0.ssm_out.weight");
    cr_assert_eq(t->dtype, DTYPE_Q8_0);
    cr_assert_eq(L->wout.dtype, DTYPE_Q8_0);
    cr_assert_neq(L->wout.data, t->data);
    const uint64_t rb = 6 * 34, cb = 34;  /* 192 columns; Dv 32 = one block */
    cr_assert_eq(L->wout.row_bytes, rb);
    for (int64_t row = 0; row < 64; row++)
        for (int64_t tt = 0; tt < 6; tt++) {
            int64_t h = (tt % 2) * 3 + tt / 2;
            cr_assert_eq(memcmp((const uint8_t *)L->wout.data + row * rb + tt * cb,
                                (const uint8_t *)t->data + row * rb + h * cb, cb), 0);
        }
    /* q8_0 rows of z permuted whole: tiled 1 <- grouped 3 */
    const struct tensor_view *z = view(m, "blk.0.attn_gate.weight");
    cr_assert_eq(memcmp((const uint8_t *)L->wz.data + 1 * 32 * L->wz.row_bytes,
                        (const uint8_t *)z->data + 3 * 32 * L->wz.row_bytes, 32 * L->wz.row_bytes), 0);
    model_free(m);
    free(path);

    /* Dv 16 cannot be moved in whole q8_0 blocks */
    o.Dv = 16;
    o.Dk = 16;
    path = tl_write(&o, dir);
    struct hs_err err;
    cr_assert_eq(load_err(path, &err), HS_ERR_UNSUPPORTED);
    cr_assert(strstr(err.msg, "blk.0.ssm_out.weight") && strstr(err.msg, "Dv=16"), "%s", err.msg);
    free(path);
    tl_rmdir(dir);
}

/* ---- errors ------------------------------------------------------------------------------ */

Test(load_err, missing_tensor_named)
{
    char *dir = tl_tmpdir();
    struct tl_opts o;
    tl_defaults(&o, MODEL_ARCH_QWEN35, false);
    o.omit[0] = "model.language_model.layers.1.linear_attn.in_proj_z.weight";
    char *path = tl_write(&o, dir);
    struct hs_err err;
    cr_assert_eq(load_err(path, &err), HS_ERR_FORMAT);
    cr_assert(strstr(err.msg, "1 problem binding"), "%s", err.msg);
    cr_assert(strstr(err.msg, "missing tensor 'model.language_model.layers.1.linear_attn.in_proj_z.weight'"), "%s", err.msg);
    free(path);
    tl_rmdir(dir);
}

Test(load_err, all_problems_in_one_message)
{
    char *dir = tl_tmpdir();
    struct tl_opts o;
    tl_defaults(&o, MODEL_ARCH_QWEN35MOE, true);
    o.omit[0] = "blk.0.ffn_up_exps.weight";
    o.omit[1] = "blk.4.nextn.enorm.weight";
    o.reshape = "blk.3.attn_k.weight";
    o.retype[0] = "blk.2.ssm_alpha.weight";
    o.retype_dtype[0] = DTYPE_I32;
    char *path = tl_write(&o, dir);
    struct hs_err err;
    cr_assert_eq(load_err(path, &err), HS_ERR_FORMAT);
    cr_assert(strstr(err.msg, "4 problems binding"), "%s", err.msg);
    cr_assert(strstr(err.msg, "missing tensor 'blk.0.ffn_up_exps.weight' or 'blk.0.ffn_gate_up_exps.weight'"), "%s", err.msg);
    cr_assert(strstr(err.msg, "missing tensor 'blk.4.nextn.enorm.weight'"), "%s", err.msg);
    cr_assert(strstr(err.msg, "tensor 'blk.3.attn_k.weight': shape [17, 64], expected [nkv*hd=16, H=64]"), "%s", err.msg);
    cr_assert(strstr(err.msg, "tensor 'blk.2.ssm_alpha.weight': dtype i32 is not supported"), "%s", err.msg);
    free(path);
    tl_rmdir(dir);
}

Test(load_err, many_problems_truncated)
{
    char *dir = tl_tmpdir();
    struct tl_opts o;
    tl_defaults(&o, MODEL_ARCH_QWEN35, true);
    o.n_mtp = 0;
    o.gguf_block_count = 12;  /* 8 layers' worth of tensors missing */
    char *path = tl_write(&o, dir);
    struct hs_err err;
    cr_assert_eq(load_err(path, &err), HS_ERR_FORMAT);
    cr_assert(strstr(err.msg, "problems binding"), "%s", err.msg);
    cr_assert(strstr(err.msg, "missing tensor 'blk.4.attn_norm.weight'"), "%s", err.msg);
    cr_assert(strstr(err.msg, "more"), "%s", err.msg);
    cr_assert_lt(strlen(err.msg), HS_ERR_MSG_MAX - 1);
    free(path);
    tl_rmdir(dir);
}

Test(load_err, unsupported_dtypes)
{
    char *dir = tl_tmpdir();
    struct tl_opts o;
    tl_defaults(&o, MODEL_ARCH_QWEN35, true);
    o.H = 256;  /* k-quant rows need 256 columns */
    o.retype[0] = "blk.0.attn_qkv.weight";
    o.retype_dtype[0] = DTYPE_Q3_K;
    o.retype[1] = "blk.3.attn_q.weight";
    o.retype_dtype[1] = DTYPE_I32;
    char *path = tl_write(&o, dir);
    struct hs_err err;
    cr_assert_eq(load_err(path, &err), HS_ERR_UNSUPPORTED);
    cr_assert(strstr(err.msg, "tensor 'blk.0.attn_qkv.weight': dtype q3_k is not supported"), "%s", err.msg);
    cr_assert(strstr(err.msg, "tensor 'blk.3.attn_q.weight': dtype i32 is not supported"), "%s", err.msg);
    free(path);
    tl_rmdir(dir);
}

/* Q4_K / Q6_K are computable as matrices only: a norm vector in Q4_K is refused by name. */
Test(load_err, k_quant_vector)
{
    char *dir = tl_tmpdir();
    struct tl_opts o;
    tl_defaults(&o, MODEL_ARCH_QWEN35, true);
    o.H = 256;
    o.retype[0] = "blk.1.attn_norm.weight";
    o.retype_dtype[0] = DTYPE_Q4_K;
    o.retype[1] = "blk.0.attn_qkv.weight";
    o.retype_dtype[1] = DTYPE_Q6_K; /* a matrix: accepted, not in the message */
    char *path = tl_write(&o, dir);
    struct hs_err err;
    cr_assert_eq(load_err(path, &err), HS_ERR_UNSUPPORTED);
    cr_assert(strstr(err.msg, "tensor 'blk.1.attn_norm.weight': dtype q4_k is supported for matrices only"), "%s", err.msg);
    cr_assert_null(strstr(err.msg, "attn_qkv"), "%s", err.msg);
    free(path);
    tl_rmdir(dir);
}

Test(load_err, unknown_architecture)
{
    char *dir = tl_tmpdir();
    struct tl_opts o;
    tl_defaults(&o, MODEL_ARCH_QWEN35, true);
    o.gguf_arch = "llama";
    char *path = tl_write(&o, dir);
    struct hs_err err;
    cr_assert_eq(load_err(path, &err), HS_ERR_UNSUPPORTED);
    cr_assert(strstr(err.msg, "general.architecture 'llama'"), "%s", err.msg);
    free(path);
    tl_rmdir(dir);

    dir = tl_tmpdir();
    tl_defaults(&o, MODEL_ARCH_QWEN35, false);
    o.hf_type = "";
    path = tl_write(&o, dir);
    cr_assert_eq(load_err(path, &err), HS_ERR_UNSUPPORTED);
    cr_assert(strstr(err.msg, "model_type 'llama'"), "%s", err.msg);
    free(path);
    tl_rmdir(dir);
}

Test(load_err, bad_hparams_name_the_key)
{
    char *dir = tl_tmpdir();
    struct tl_opts o;
    tl_defaults(&o, MODEL_ARCH_QWEN35, true);
    o.gguf_time_step_rank = 3;  /* Hv 3 with Hk 2 */
    char *path = tl_write(&o, dir);
    struct hs_err err;
    load_err(path, &err);
    cr_assert(strstr(err.msg, "qwen35.ssm.time_step_rank"), "%s", err.msg);
    free(path);

    tl_defaults(&o, MODEL_ARCH_QWEN35, true);
    o.gguf_no_embedding_length = true;
    path = tl_write(&o, dir);
    load_err(path, &err);
    cr_assert(strstr(err.msg, "missing key 'qwen35.embedding_length'"), "%s", err.msg);
    free(path);
    tl_rmdir(dir);

    dir = tl_tmpdir();
    tl_defaults(&o, MODEL_ARCH_QWEN35MOE, false);
    o.E = 0;
    path = tl_write(&o, dir);
    cr_assert_eq(load_err(path, &err), HS_ERR_FORMAT);
    cr_assert(strstr(err.msg, "num_experts is 0"), "%s", err.msg);
    free(path);
    tl_rmdir(dir);
}

Test(load_err, untied_without_lm_head)
{
    char *dir = tl_tmpdir();
    struct tl_opts o;
    tl_defaults(&o, MODEL_ARCH_QWEN35, false);
    o.omit[0] = "lm_head.weight";
    char *path = tl_write(&o, dir);
    struct hs_err err;
    load_err(path, &err);
    cr_assert(strstr(err.msg, "missing tensor 'lm_head.weight' (tie_word_embeddings is false)"), "%s", err.msg);
    free(path);
    tl_rmdir(dir);
}

Test(load_err, no_embedding_names_the_prefixes)
{
    char *dir = tl_tmpdir();
    struct tl_opts o;
    tl_defaults(&o, MODEL_ARCH_QWEN35, false);
    o.prefix = "transformer.";
    char *path = tl_write(&o, dir);
    struct hs_err err;
    cr_assert_eq(load_err(path, &err), HS_ERR_FORMAT);
    cr_assert(strstr(err.msg, "model.language_model.embed_tokens.weight"), "%s", err.msg);
    free(path);
    tl_rmdir(dir);
}

Test(load_err, missing_path_and_free_null)
{
    struct hs_err err;
    cr_assert_eq(load_err("/nonexistent/hs/model.gguf", &err), HS_ERR_NOT_FOUND);
    cr_assert(strstr(err.msg, "/nonexistent/hs/model.gguf"));
    model_free(NULL);
}

Test(load_misc, unclaimed_tensor_is_ignored)
{
    char *dir = tl_tmpdir();
    struct tl_opts o;
    tl_defaults(&o, MODEL_ARCH_QWEN35, false);
    o.extra = "model.visual.blocks.0.norm.weight";
    char *path = tl_write(&o, dir);
    struct model *m = load_ok(path);
    int n_unclaimed = 0;
    for (int i = 0; i < tensor_set_count(model_tensors(m)); i++)
        if (!model_tensor_claimed(m, i)) {
            n_unclaimed++;
            cr_assert_str_eq(tensor_set_at(model_tensors(m), i)->name, "model.visual.blocks.0.norm.weight");
        }
    cr_assert_eq(n_unclaimed, 1);
    model_free(m);
    free(path);
    tl_rmdir(dir);
}

static void explicit_kinds(bool gguf)
{
    char *dir = tl_tmpdir();
    struct tl_opts o;
    tl_defaults(&o, MODEL_ARCH_QWEN35, gguf);
    o.attn_mask = 0x2 | 0x4;  /* layers 1 and 2 attention, 0 and 3 GDN: not the interval rule */
    char *path = tl_write(&o, dir);
    struct model *m = load_ok(path);
    const struct model_hparams *hp = model_hparams(m);
    cr_assert_eq(hp->layer_kind[0], LAYER_KIND_GDN);
    cr_assert_eq(hp->layer_kind[1], LAYER_KIND_ATTN);
    cr_assert_eq(hp->layer_kind[2], LAYER_KIND_ATTN);
    cr_assert_eq(hp->layer_kind[3], LAYER_KIND_GDN);
    cr_assert_not_null(model_layer(m, 3)->wqkv.data);
    cr_assert_not_null(model_layer(m, 1)->wq.data);
    cr_assert_null(model_layer(m, 1)->wqkv.data);
    model_free(m);
    free(path);
    tl_rmdir(dir);
}

Test(load_misc, hf_layer_types) { explicit_kinds(false); }
Test(load_misc, gguf_recurrent_layers) { explicit_kinds(true); }

/* llama_model_save_to_file writes the per-layer flags as uint32 (other writers: any integer
 * type); 0 = attention, any other value = recurrent. */
Test(load_misc, gguf_recurrent_layers_of_any_integer_type)
{
    const enum gguf_type types[] = { GGUF_TYPE_UINT32, GGUF_TYPE_INT32, GGUF_TYPE_UINT8, GGUF_TYPE_INT8,
                                     GGUF_TYPE_UINT16, GGUF_TYPE_INT64, GGUF_TYPE_UINT64 };
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        char *dir = tl_tmpdir();
        struct tl_opts o;
        tl_defaults(&o, MODEL_ARCH_QWEN35, true);
        o.attn_mask = 0x2 | 0x4;
        o.kinds_typed = true;
        o.kinds_type = types[ti];
        char *path = tl_write(&o, dir);
        struct model *m = load_ok(path);
        const struct model_hparams *hp = model_hparams(m);
        cr_assert_eq(hp->layer_kind[0], LAYER_KIND_GDN, "%s", gguf_value_type_name(types[ti]));
        cr_assert_eq(hp->layer_kind[1], LAYER_KIND_ATTN, "%s", gguf_value_type_name(types[ti]));
        cr_assert_eq(hp->layer_kind[2], LAYER_KIND_ATTN, "%s", gguf_value_type_name(types[ti]));
        cr_assert_eq(hp->layer_kind[3], LAYER_KIND_GDN, "%s", gguf_value_type_name(types[ti]));
        model_free(m);
        free(path);
        tl_rmdir(dir);
    }
}

Test(load_misc, gguf_recurrent_layers_of_floats_refused)
{
    char *dir = tl_tmpdir();
    struct tl_opts o;
    tl_defaults(&o, MODEL_ARCH_QWEN35, true);
    o.attn_mask = 0x8;
    o.kinds_typed = true;
    o.kinds_type = GGUF_TYPE_FLOAT32;
    char *path = tl_write(&o, dir);
    struct hs_err err;
    cr_assert_eq(load_err(path, &err), HS_ERR_FORMAT);
    cr_assert(strstr(err.msg, "qwen35.attention.recurrent_layers") && strstr(err.msg, "float32"), "%s", err.msg);
    free(path);
    tl_rmdir(dir);
}

/* Head counts, feed-forward and expert widths as per-block arrays, 0 heads at the GDN
 * layers (llama.cpp's hybrid writers): the attention layers' value counts. */
static void per_layer_arrays(enum model_arch arch)
{
    char *dir = tl_tmpdir();
    struct tl_opts o;
    tl_defaults(&o, arch, true);
    o.gguf_per_layer = true;
    char *path = tl_write(&o, dir);
    struct model *m = load_ok(path);
    const struct model_hparams *hp = model_hparams(m);
    cr_assert_eq(hp->n_head, o.nh);
    cr_assert_eq(hp->n_head_kv, o.nkv);
    if (arch == MODEL_ARCH_QWEN35) cr_assert_eq(hp->n_ff, o.I);
    else cr_assert(hp->n_expert_used == o.Eu && hp->n_ff_exp == o.Ie);
    model_free(m);
    free(path);
    tl_rmdir(dir);
}

Test(load_gguf, per_layer_arrays_qwen35) { per_layer_arrays(MODEL_ARCH_QWEN35); }
Test(load_gguf, per_layer_arrays_qwen3next) { per_layer_arrays(MODEL_ARCH_QWEN3NEXT); }

/* llama_model_save_to_file writes expert_weights_norm = false; llama.cpp's qwen3next graph
 * renormalises the top-k weights regardless, so the GGUF means renormalised. */
Test(load_gguf, qwen3next_expert_weights_norm_false_still_renormalises)
{
    char *dir = tl_tmpdir();
    struct tl_opts o;
    tl_defaults(&o, MODEL_ARCH_QWEN3NEXT, true);
    o.gguf_weights_norm_false = true;
    char *path = tl_write(&o, dir);
    struct model *m = load_ok(path);
    cr_assert(model_hparams(m)->norm_topk_prob);
    model_free(m);
    free(path);
    tl_rmdir(dir);
}

/* Tensors llama.cpp computes with and the engine does not: refused, named. */
static void refused_extra(const char *name)
{
    char *dir = tl_tmpdir();
    struct tl_opts o;
    tl_defaults(&o, MODEL_ARCH_QWEN35, true);
    o.extra = name;
    char *path = tl_write(&o, dir);
    struct hs_err err;
    cr_assert_eq(load_err(path, &err), HS_ERR_UNSUPPORTED, "%s: %s", name, err.msg);
    cr_assert(strstr(err.msg, name), "%s", err.msg);
    free(path);
    tl_rmdir(dir);
}

Test(load_err, gguf_attention_bias_refused) { refused_extra("blk.3.attn_q.bias"); }
Test(load_err, gguf_per_tensor_scale_refused) { refused_extra("blk.0.attn_qkv.scale"); }
Test(load_err, gguf_input_scale_refused) { refused_extra("output.input_scale"); }

Test(load_misc, arch_names)
{
    cr_assert_str_eq(model_arch_name(MODEL_ARCH_QWEN35), "qwen35");
    cr_assert_str_eq(model_arch_name(MODEL_ARCH_QWEN35MOE), "qwen35moe");
    cr_assert_str_eq(model_arch_name(MODEL_ARCH_QWEN3NEXT), "qwen3next");
    cr_assert_eq(model_arch_from_name("qwen3next"), MODEL_ARCH_QWEN3NEXT);
    cr_assert_eq(model_arch_from_name("llama"), -1);
    cr_assert_eq(arch_from_hf("", "qwen3_5_moe_text", "qwen3_5_moe"), &arch_qwen35moe);
    cr_assert_eq(arch_from_hf("Qwen3_5ForCausalLM", "", ""), &arch_qwen35);
    cr_assert_null(arch_from_hf("LlamaForCausalLM", "llama", "llama"));
}
