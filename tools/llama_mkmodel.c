/*
 * llama_mkmodel.c — a random-weight GGUF written by llama.cpp itself (the prebuilt library
 * from the node-llama-cpp npm package), so parity tests see files from llama.cpp's writer
 * and not only from `headstart mkmodel`.
 *
 *   llama_mkmodel --lib-dir DIR --arch qwen35|qwen35moe|qwen3next --tokenizer-from T.gguf
 *                 --out FILE.gguf [--seed N] [--layers N] [--embd N] [--heads N]
 *                 [--kv-heads N] [--head-dim N] [--rot N] [--ff N] [--gdn-k-heads N]
 *                 [--gdn-v-heads N] [--gdn-dim N] [--conv N] [--interval N] [--experts N]
 *                 [--experts-used N] [--ff-exp N] [--ff-shexp N] [--tied] [--fused-gate-up]
 *                 [--legacy-ssm-in] [--attn-bias] [--verbose]
 *   llama_mkmodel --lib-dir DIR --resave IN.gguf --out FILE.gguf
 *
 * The second form loads IN.gguf with llama.cpp and writes it back with
 * llama_model_save_to_file: the same tensors under llama.cpp's metadata spelling, so a
 * reader can be checked to give identical results on both files.
 *
 * How: the hyperparameters go into a gguf_context as the keys llama.cpp's loaders read,
 * with the tokenizer.* keys copied from T.gguf (any GGUF llama.cpp loads), and one tensor
 * info (name, f32, shape) per tensor the model should have. llama_model_init_from_user
 * builds the model in memory from that and calls back for each tensor's values;
 * llama_model_save_to_file writes the file. Everything in the output (which keys, their
 * types, array or scalar, the tensor order) is llama.cpp's writer's choice: e.g. the
 * per-layer recurrent flags become an array of uint32 and full_attention_interval is
 * dropped. (The npm build carries node-llama-cpp's patch PR-22566: in this mode the loader
 * creates exactly the tensors listed in the metadata, so optional ones are chosen here.)
 *
 * Which tensors: what llama.cpp's converter writes for these architectures (separate
 * attn_q/k/v without biases; GDN attn_qkv + attn_gate; qwen35* ssm_beta/ssm_alpha, qwen3next
 * ssm_ba; ffn_gate_exps + ffn_up_exps; output.weight), with switches for the variants a
 * reader must also handle: --tied (no output.weight: the embedding is the head),
 * --fused-gate-up (ffn_gate_up_exps), --legacy-ssm-in (qwen3next: the fused, key-head-
 * grouped ssm_in instead of attn_qkv + attn_gate) and --attn-bias (attn_q/k/v.bias, which
 * llama.cpp adds and Qwen3.5 checkpoints never have: for testing that a reader refuses
 * what it cannot compute).
 *
 * Values (deterministic: a splitmix64 stream per tensor, keyed by seed and name; Box-Muller
 * normals): matrices N(0, 1/fan_in) with fan_in = ne0; norm weights 1 + N(0, 0.05^2);
 * ssm_a = -U(0.2, 1.0) (a decay well inside (0, 1)); ssm_dt.bias N(0, 0.1^2); conv taps
 * N(0, 1/K); attention biases N(0, 0.5^2).
 *
 * Exit status: 0 written, 1 failure (message on stderr), 2 usage.
 */
#include "llama.h"
#include "ggml.h"
#include "ggml-backend.h"
#include "gguf.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool verbose;

static void quiet_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (verbose || level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

struct geom {
    long layers, embd, heads, kv_heads, head_dim, rot, ff;
    long hk, hv, gdn_dim, conv, interval;
    long experts, experts_used, ff_exp, ff_shexp;
};

struct fill {
    uint64_t seed;
    long n_tensors;
};

static uint64_t splitmix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double uniform01(uint64_t *s) { return ((double)(splitmix64(s) >> 11) + 0.5) * 0x1.0p-53; }

static double normal(uint64_t *s)
{
    double u = uniform01(s), v = uniform01(s);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static bool ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* llama_model_set_tensor_data_t: values for one tensor (f32, see the design note). */
static void set_tensor_data(struct ggml_tensor *t, void *ud)
{
    struct fill *f = ud;
    const int64_t n = ggml_nelements(t);
    if (t->type != GGML_TYPE_F32) {
        fprintf(stderr, "llama_mkmodel: tensor %s is %s, expected f32\n", t->name, ggml_type_name(t->type));
        exit(1);
    }
    float *v = malloc((size_t)n * sizeof *v);
    if (!v) { fprintf(stderr, "llama_mkmodel: out of memory\n"); exit(1); }
    uint64_t s = f->seed * 0x2545f4914f6cdd1dull;
    for (const char *p = t->name; *p; p++) s = (s ^ (uint8_t)*p) * 0x100000001b3ull; /* FNV-1a */
    for (int64_t i = 0; i < n; i++) {
        double x;
        if (strstr(t->name, ".ssm_dt")) x = 0.1 * normal(&s);
        else if (ends_with(t->name, ".bias")) x = 0.5 * normal(&s);
        else if (strstr(t->name, ".ssm_a")) x = -(0.2 + 0.8 * uniform01(&s));
        else if (strstr(t->name, "norm.weight")) x = 1.0 + 0.05 * normal(&s);
        else x = normal(&s) / sqrt((double)t->ne[0]); /* matrices, conv taps, shexp gate */
        v[i] = (float)x;
    }
    ggml_backend_tensor_set(t, v, 0, ggml_nbytes(t));
    free(v);
    f->n_tensors++;
}

/* One f32 tensor info in the metadata: name, shape ne (fastest first). */
static void want(struct gguf_context *meta, const char *name, int64_t ne0, int64_t ne1, int64_t ne2)
{
    struct ggml_tensor t;
    memset(&t, 0, sizeof t);
    t.type = GGML_TYPE_F32;
    t.ne[0] = ne0; t.ne[1] = ne1 > 0 ? ne1 : 1; t.ne[2] = ne2 > 0 ? ne2 : 1; t.ne[3] = 1;
    t.nb[0] = sizeof(float);
    for (int d = 1; d < 4; d++) t.nb[d] = t.nb[d - 1] * (size_t)t.ne[d - 1];
    snprintf(t.name, sizeof t.name, "%s", name);
    gguf_add_tensor(meta, &t);
}

static int usage(void)
{
    fprintf(stderr,
            "usage: llama_mkmodel --lib-dir DIR --arch qwen35|qwen35moe|qwen3next --tokenizer-from T.gguf "
            "--out FILE [--seed N] [--layers N] [--embd N] [--heads N] [--kv-heads N] [--head-dim N] "
            "[--rot N] [--ff N] [--gdn-k-heads N] [--gdn-v-heads N] [--gdn-dim N] [--conv N] "
            "[--interval N] [--experts N] [--experts-used N] [--ff-exp N] [--ff-shexp N] [--tied] "
            "[--fused-gate-up] [--legacy-ssm-in] [--attn-bias] [--verbose]\n"
            "       llama_mkmodel --lib-dir DIR --resave IN.gguf --out FILE\n");
    return 2;
}

/* Copy every tokenizer.* key of the GGUF at path into dst; the token count in *n_vocab. */
static int copy_tokenizer(struct gguf_context *dst, const char *path, int64_t *n_vocab)
{
    struct gguf_init_params ip = { .no_alloc = true, .ctx = NULL };
    struct gguf_context *src = gguf_init_from_file(path, ip);
    if (!src) {
        fprintf(stderr, "llama_mkmodel: cannot read GGUF %s\n", path);
        return 1;
    }
    struct gguf_context *tmp = gguf_init_empty();
    gguf_set_kv(tmp, src);
    for (int64_t i = gguf_get_n_kv(tmp) - 1; i >= 0; i--) {
        const char *k = gguf_get_key(tmp, i);
        if (strncmp(k, "tokenizer.", 10) != 0) gguf_remove_key(tmp, k);
    }
    gguf_set_kv(dst, tmp);
    gguf_free(tmp);
    gguf_free(src);
    int64_t id = gguf_find_key(dst, "tokenizer.ggml.tokens");
    if (id < 0 || gguf_get_kv_type(dst, id) != GGUF_TYPE_ARRAY) {
        fprintf(stderr, "llama_mkmodel: %s has no tokenizer.ggml.tokens\n", path);
        return 1;
    }
    *n_vocab = (int64_t)gguf_get_arr_n(dst, id);
    return 0;
}

static bool init_backends(const char *lib_dir)
{
    llama_log_set(quiet_log, NULL);
    ggml_backend_load_all_from_path(lib_dir);
    if (ggml_backend_dev_count() == 0) {
        fprintf(stderr, "llama_mkmodel: no ggml backend found in %s\n", lib_dir);
        return false;
    }
    llama_backend_init();
    return true;
}

static int resave_file(const char *lib_dir, const char *in, const char *out)
{
    if (!init_backends(lib_dir)) return 1;
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(in, mp);
    if (!model) {
        fprintf(stderr, "llama_mkmodel: llama.cpp could not load %s (run with --verbose)\n", in);
        return 1;
    }
    llama_model_save_to_file(model, out);
    printf("wrote %s: %s as llama.cpp saves it\n", out, in);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}

int main(int argc, char **argv)
{
    const char *lib_dir = NULL, *arch = NULL, *out = NULL, *tok_from = NULL, *resave = NULL;
    struct geom g = { .layers = 4, .embd = 64, .heads = 4, .kv_heads = 2, .head_dim = 32, .rot = -1,
                      .ff = 128, .hk = 2, .hv = 4, .gdn_dim = 32, .conv = 4, .interval = 4,
                      .experts = 4, .experts_used = 2, .ff_exp = 32, .ff_shexp = 32 };
    struct fill f = { .seed = 1 };
    bool tied = false, fused_gate_up = false, legacy_ssm_in = false, attn_bias = false;
    struct { const char *name; long *v; } opts[] = {
        { "--layers", &g.layers }, { "--embd", &g.embd }, { "--heads", &g.heads },
        { "--kv-heads", &g.kv_heads }, { "--head-dim", &g.head_dim }, { "--rot", &g.rot },
        { "--ff", &g.ff }, { "--gdn-k-heads", &g.hk }, { "--gdn-v-heads", &g.hv },
        { "--gdn-dim", &g.gdn_dim }, { "--conv", &g.conv }, { "--interval", &g.interval },
        { "--experts", &g.experts }, { "--experts-used", &g.experts_used },
        { "--ff-exp", &g.ff_exp }, { "--ff-shexp", &g.ff_shexp },
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        bool done = false;
        for (size_t k = 0; k < sizeof opts / sizeof opts[0] && !done; k++)
            if (!strcmp(a, opts[k].name) && has_value) {
                char *end;
                *opts[k].v = strtol(argv[++i], &end, 10);
                if (*end || *opts[k].v < 0 || *opts[k].v > (1l << 20)) {
                    fprintf(stderr, "llama_mkmodel: %s wants an integer 0..2^20\n", a);
                    return 2;
                }
                done = true;
            }
        if (done) continue;
        if (!strcmp(a, "--verbose")) verbose = true;
        else if (!strcmp(a, "--tied")) tied = true;
        else if (!strcmp(a, "--fused-gate-up")) fused_gate_up = true;
        else if (!strcmp(a, "--legacy-ssm-in")) legacy_ssm_in = true;
        else if (!strcmp(a, "--attn-bias")) attn_bias = true;
        else if (!strcmp(a, "--lib-dir") && has_value) lib_dir = argv[++i];
        else if (!strcmp(a, "--arch") && has_value) arch = argv[++i];
        else if (!strcmp(a, "--out") && has_value) out = argv[++i];
        else if (!strcmp(a, "--tokenizer-from") && has_value) tok_from = argv[++i];
        else if (!strcmp(a, "--resave") && has_value) resave = argv[++i];
        else if (!strcmp(a, "--seed") && has_value) f.seed = strtoull(argv[++i], NULL, 10);
        else return usage();
    }
    if (resave && lib_dir && out && !arch && !tok_from) return resave_file(lib_dir, resave, out);
    if (!lib_dir || !arch || !out || !tok_from) return usage();
    const bool next = !strcmp(arch, "qwen3next");
    const bool moe = next || !strcmp(arch, "qwen35moe");
    if (!moe && strcmp(arch, "qwen35") != 0) {
        fprintf(stderr, "llama_mkmodel: --arch must be qwen35, qwen35moe or qwen3next\n");
        return 2;
    }
    if (legacy_ssm_in && !next) {
        fprintf(stderr, "llama_mkmodel: --legacy-ssm-in is for qwen3next\n");
        return 2;
    }
    if (g.rot < 0) g.rot = g.head_dim / 4; /* partial rotary factor 0.25, as Qwen3.5 */
    if (g.rot % 2) g.rot--;
    if (g.layers < 1 || g.embd < 1 || g.heads < 1 || g.kv_heads < 1 || g.heads % g.kv_heads ||
        g.head_dim < 2 || g.rot < 2 || g.rot > g.head_dim || g.hk < 1 || g.hv % g.hk || g.gdn_dim < 1 ||
        g.conv < 1 || g.interval < 1 || (moe && (g.experts < 1 || g.experts_used < 1 ||
        g.experts_used > g.experts || g.ff_exp < 1 || g.ff_shexp < 1)) || (!moe && g.ff < 1)) {
        fprintf(stderr, "llama_mkmodel: inconsistent geometry (heads %% kv-heads, gdn-v-heads %% "
                        "gdn-k-heads, 2 <= rot <= head-dim, experts-used <= experts, all positive)\n");
        return 2;
    }

    if (!init_backends(lib_dir)) return 1;

    struct gguf_context *meta = gguf_init_empty();
    int64_t n_vocab = 0;
    if (copy_tokenizer(meta, tok_from, &n_vocab)) return 1;
    char key[128];
#define KEY(k) (snprintf(key, sizeof key, "%s." k, arch), key)
    gguf_set_val_str(meta, "general.architecture", arch);
    gguf_set_val_str(meta, "general.name", "llama_mkmodel");
    gguf_set_val_u32(meta, KEY("context_length"), 4096);
    gguf_set_val_u32(meta, KEY("embedding_length"), (uint32_t)g.embd);
    gguf_set_val_u32(meta, KEY("block_count"), (uint32_t)g.layers);
    if (!moe) gguf_set_val_u32(meta, KEY("feed_forward_length"), (uint32_t)g.ff);
    gguf_set_val_u32(meta, KEY("attention.head_count"), (uint32_t)g.heads);
    gguf_set_val_u32(meta, KEY("attention.head_count_kv"), (uint32_t)g.kv_heads);
    gguf_set_val_u32(meta, KEY("attention.key_length"), (uint32_t)g.head_dim);
    gguf_set_val_u32(meta, KEY("attention.value_length"), (uint32_t)g.head_dim);
    gguf_set_val_f32(meta, KEY("attention.layer_norm_rms_epsilon"), 1e-6f);
    gguf_set_val_f32(meta, KEY("rope.freq_base"), 1e7f);
    gguf_set_val_u32(meta, KEY("rope.dimension_count"), (uint32_t)g.rot);
    if (!next) {
        /* M-RoPE sections must cover the rotary half (Qwen3.5: 11+11+10 = 32 of 64); text
         * positions are equal in every section, so any split is plain NeoX RoPE */
        const int32_t third = (int32_t)(g.rot / 2 / 3);
        const int32_t sections[4] = { (int32_t)(g.rot / 2) - 2 * third, third, third, 0 };
        gguf_set_arr_data(meta, KEY("rope.dimension_sections"), GGUF_TYPE_INT32, sections, 4);
    }
    gguf_set_val_u32(meta, KEY("ssm.conv_kernel"), (uint32_t)g.conv);
    gguf_set_val_u32(meta, KEY("ssm.state_size"), (uint32_t)g.gdn_dim);
    gguf_set_val_u32(meta, KEY("ssm.group_count"), (uint32_t)g.hk);
    gguf_set_val_u32(meta, KEY("ssm.time_step_rank"), (uint32_t)g.hv);
    gguf_set_val_u32(meta, KEY("ssm.inner_size"), (uint32_t)(g.hv * g.gdn_dim));
    gguf_set_val_u32(meta, KEY("full_attention_interval"), (uint32_t)g.interval);
    if (moe) {
        gguf_set_val_u32(meta, KEY("expert_count"), (uint32_t)g.experts);
        gguf_set_val_u32(meta, KEY("expert_used_count"), (uint32_t)g.experts_used);
        gguf_set_val_u32(meta, KEY("expert_feed_forward_length"), (uint32_t)g.ff_exp);
        gguf_set_val_u32(meta, KEY("expert_shared_feed_forward_length"), (uint32_t)g.ff_shexp);
    }
#undef KEY

    /* The tensors, in llama.cpp's names and ggml shapes (ne0 = input features). */
    const int64_t H = g.embd, hd = g.head_dim, D = g.gdn_dim;
    const int64_t qk = 2 * g.hk * D, vd = g.hv * D;
    char nm[GGML_MAX_NAME];
    want(meta, "token_embd.weight", H, n_vocab, 0);
    want(meta, "output_norm.weight", H, 0, 0);
    if (!tied) want(meta, "output.weight", H, n_vocab, 0);
#define T(fmt, a, b, c) (snprintf(nm, sizeof nm, "blk.%ld." fmt, il), want(meta, nm, a, b, c))
    for (long il = 0; il < g.layers; il++) {
        T("attn_norm.weight", H, 0, 0);
        T("post_attention_norm.weight", H, 0, 0);
        if ((il + 1) % g.interval == 0) {
            T("attn_q.weight", H, 2 * g.heads * hd, 0);
            T("attn_k.weight", H, g.kv_heads * hd, 0);
            T("attn_v.weight", H, g.kv_heads * hd, 0);
            if (attn_bias) {
                T("attn_q.bias", 2 * g.heads * hd, 0, 0);
                T("attn_k.bias", g.kv_heads * hd, 0, 0);
                T("attn_v.bias", g.kv_heads * hd, 0, 0);
            }
            T("attn_output.weight", g.heads * hd, H, 0);
            T("attn_q_norm.weight", hd, 0, 0);
            T("attn_k_norm.weight", hd, 0, 0);
        } else {
            if (legacy_ssm_in) {
                T("ssm_in.weight", H, qk + 2 * vd, 0);
            } else {
                T("attn_qkv.weight", H, qk + vd, 0);
                T("attn_gate.weight", H, vd, 0);
            }
            T("ssm_conv1d.weight", g.conv, qk + vd, 0);
            T("ssm_dt.bias", g.hv, 0, 0);
            T("ssm_a", g.hv, 0, 0);
            if (next) {
                T("ssm_ba.weight", H, 2 * g.hv, 0);
            } else {
                T("ssm_beta.weight", H, g.hv, 0);
                T("ssm_alpha.weight", H, g.hv, 0);
            }
            T("ssm_norm.weight", D, 0, 0);
            T("ssm_out.weight", vd, H, 0);
        }
        if (moe) {
            T("ffn_gate_inp.weight", H, g.experts, 0);
            if (fused_gate_up) {
                T("ffn_gate_up_exps.weight", H, 2 * g.ff_exp, g.experts);
            } else {
                T("ffn_gate_exps.weight", H, g.ff_exp, g.experts);
                T("ffn_up_exps.weight", H, g.ff_exp, g.experts);
            }
            T("ffn_down_exps.weight", g.ff_exp, H, g.experts);
            T("ffn_gate_inp_shexp.weight", H, 0, 0);
            T("ffn_gate_shexp.weight", H, g.ff_shexp, 0);
            T("ffn_up_shexp.weight", H, g.ff_shexp, 0);
            T("ffn_down_shexp.weight", g.ff_shexp, H, 0);
        } else {
            T("ffn_gate.weight", H, g.ff, 0);
            T("ffn_up.weight", H, g.ff, 0);
            T("ffn_down.weight", g.ff, H, 0);
        }
    }
#undef T

    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_init_from_user(meta, set_tensor_data, &f, mp);
    if (!model) {
        fprintf(stderr, "llama_mkmodel: llama_model_init_from_user failed for %s (run with --verbose)\n", arch);
        gguf_free(meta);
        return 1;
    }
    llama_model_save_to_file(model, out);
    printf("wrote %s: %s, %ld tensors, %ld layers, GDN %ld/%ld heads of %ld, attention %ld/%ld heads of %ld%s\n",
           out, arch, f.n_tensors, g.layers, g.hk, g.hv, g.gdn_dim, g.heads, g.kv_heads, g.head_dim,
           tied ? ", tied" : "");
    llama_model_free(model);
    gguf_free(meta);
    llama_backend_free();
    return 0;
}
