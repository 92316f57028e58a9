/*
 * model — architecture tables and weight binding for the Qwen3.5 / Qwen3.5-MoE /
 * Qwen3-Next family, from a Hugging Face directory or a GGUF file; plus the report
 * behind `headstart inspect` (the random model writer is src/mkmodel/).
 * Depends on base, sys, format.
 *
 * Design note
 * -----------
 * Architecture as data: each architecture is a `struct arch_desc` (src/model/arch_*.c)
 * holding its names, its hyperparameter rules and a table of tensor specs — for every
 * tensor the HF name pattern, the GGUF name pattern, the shape as a formula of the
 * hyperparameters, which layer kinds carry it, and flags (required / optional / tied /
 * MTP). Nothing outside arch_*.c asks which architecture a model is; the engine reads
 * `struct model_hparams` and the per-layer `struct model_layer`.
 *
 * One layout for the engine. Conventions that differ between file formats are resolved
 * once, at load (docs/MODELS.md §2.2, §4.1, §8.3):
 *   1. zero-centred norm weights are delivered folded, as f32 `(1 + w_hf)` (GGUF stores
 *      them folded already); the GDN output norm `ssm_norm` is always used as stored;
 *   2. `ssm_a` is delivered as f32 `-exp(A_log)` (GGUF stores that already);
 *   3. GDN value heads are delivered in the *tiled* order of llama.cpp's qwen35 GGUFs:
 *      value head h reads key head `h % Hk`. HF (grouped, `h / r`) and qwen3next GGUF
 *      (grouped) tensors are permuted at load when Hk != Hv (rows of the V part of qkv,
 *      z, a, b, dt_bias, ssm_a, conv channels; columns of ssm_out);
 *   4. fused tensors are split: Qwen3-Next `in_proj_qkvz` into qkv + z, `in_proj_ba` /
 *      `ssm_ba` into b and a; Qwen3.5-MoE `gate_up_proj` into gate and up;
 *   5. conv1d weights are [C, K] (HF's [C, 1, K] squeezed).
 * Weights not changed by 1-5 stay zero-copy views into the file mapping; changed ones are
 * owned by the model. MTP tensors are bound and kept but not used by the engine yet.
 *
 * Invariants:
 *   1. After model_load succeeds every required tensor is bound with the shape its spec
 *      gives and a dtype the kernels compute with; every mismatch was reported by name.
 *   2. A tensor in the file that no spec claims is ignored (logged at debug level).
 *   3. hparams are consistent: Hv % Hk == 0, n_head % n_head_kv == 0, n_rot <= head_dim,
 *      n_layer <= MODEL_MAX_LAYERS, at least one layer.
 */
#ifndef HS_MODEL_H
#define HS_MODEL_H

#include "base/base.h"
#include "format/format.h"

#include <stdbool.h>
#include <stdint.h>

#define MODEL_MAX_LAYERS 256
#define MODEL_PLE_MAX_NGRAM 8   /* n-gram orders 2..N of the hashed embedding, N <= 8 */
#define MODEL_PLE_MAX_HEADS 64  /* hashed heads in all, (N - 1) * heads per order */

enum model_arch {
    MODEL_ARCH_QWEN35 = 0, MODEL_ARCH_QWEN35MOE, MODEL_ARCH_QWEN3NEXT, MODEL_ARCH_QWEN4EXP, MODEL_ARCH_COUNT
};
enum layer_kind { LAYER_KIND_GDN = 0, LAYER_KIND_ATTN };
enum model_source { MODEL_SOURCE_HF = 0, MODEL_SOURCE_GGUF };
enum gdn_gate_act { GDN_GATE_SILU = 0, GDN_GATE_SIGMOID };

struct model_hparams {
    enum model_arch arch;
    int64_t n_vocab;        /* rows of token_embd / lm_head */
    int64_t n_embd;         /* H */
    int64_t n_layer;        /* main decoder layers (MTP excluded) */
    int64_t n_ff;           /* dense SwiGLU width; 0 for MoE-only models */
    int64_t n_head;         /* attention query heads (nh) */
    int64_t n_head_kv;      /* attention KV heads (nkv) */
    int64_t head_dim;       /* hd */
    int64_t n_rot;          /* rotary dims per head (hd * partial_rotary_factor) */
    float rope_theta;
    float rms_eps;
    int64_t n_ctx_train;    /* max_position_embeddings / context_length */
    int64_t full_attn_interval;
    /* GDN */
    int64_t gdn_k_heads;    /* Hk */
    int64_t gdn_v_heads;    /* Hv */
    int64_t gdn_k_dim;      /* Dk */
    int64_t gdn_v_dim;      /* Dv */
    int64_t conv_kernel;    /* K */
    enum gdn_gate_act gdn_gate;
    /* MoE (0 experts = dense) */
    int64_t n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
    bool norm_topk_prob;
    /* MTP */
    int64_t n_mtp;          /* MTP blocks present in the file (0 if none bound) */
    bool tied_embeddings;   /* lm_head is token_embd */
    /* Qwen3.8-Flash-Next (qwen4exp); all 0 (ple_layer -1) in the other architectures */
    int64_t hc_n;           /* hyper-connection residual streams (0: a plain residual) */
    int64_t hc_rank;        /* low rank of the hyper-connection mixers */
    int64_t idx_heads;      /* QSA indexer query heads (0: dense attention) */
    int64_t idx_dim;        /* indexer head dim (its first n_rot dims are rotated) */
    int64_t qsa_block;      /* tokens per pooled key block (indexer_compress_ratio) */
    int64_t qsa_top_blocks; /* blocks a query keeps (indexer_budget / qsa_block) */
    int64_t ple_layer;      /* the layer the hashed n-gram embedding enters, or -1 */
    int64_t ple_ngram;      /* N: orders 2..N are hashed */
    int64_t ple_heads;      /* hashed heads in all, (N - 1) * heads per order */
    int64_t ple_row;        /* table row width; ple_heads * ple_row = the gathered width */
    int64_t ple_kernel;     /* dilated conv taps (dilation N) */
    int64_t ple_rows;       /* table rows */
    int64_t ple_shards;     /* tensors the table comes in (HF shards; 1 in GGUF) */
    int64_t ple_eos;        /* the token that resets the n-gram context */
    uint64_t ple_mult[MODEL_PLE_MAX_NGRAM];  /* hash multiplier of context slot j */
    uint64_t ple_mod[MODEL_PLE_MAX_HEADS];   /* per head: prime modulus */
    uint64_t ple_off[MODEL_PLE_MAX_HEADS];   /* per head: first table row */
    /* per layer */
    enum layer_kind layer_kind[MODEL_MAX_LAYERS];
    bool layer_moe[MODEL_MAX_LAYERS];
};

/* A bound weight: a row-major matrix [rows, cols] (out x in) of `dtype`, or for expert
 * stacks n_mat such matrices (mats[e]). 1-D weights have rows == 1. */
struct model_weight {
    enum dtype dtype;
    int64_t rows, cols;
    const void *data;          /* n_mat == 1 */
    int64_t n_mat;             /* 1, or the expert count */
    const void **mats;         /* n_mat > 1: one pointer per matrix (owned array) */
    uint64_t row_bytes;        /* bytes per row */
};

/* A hyper-connection mixer (qwen4exp): reads the hc_n residual streams, writes the block
 * input and (except the head's) the per-stream injection weights. */
struct model_hc {
    const float *norm;             /* (hc_n * H) folded zero-centred, one H slice per stream */
    struct model_weight down;      /* (rank, hc_n * H) */
    struct model_weight up;        /* (hc_n * H, rank) */
    struct model_weight inject;    /* (hc_n, hc_n * H); absent in the head mixer */
};

struct model_layer {
    enum layer_kind kind;
    struct model_hc hc_attn, hc_ffn; /* qwen4exp: no attn_norm / post_attn_norm */
    /* hashed n-gram embedding (qwen4exp, layer ple_layer only) */
    struct model_weight ple_key;   /* (hc_n * H, ple_heads * ple_row) */
    struct model_weight ple_value; /* (H, ple_heads * ple_row) */
    const float *ple_norm_key, *ple_norm_query, *ple_norm_conv; /* (hc_n * H) folded */
    const float *ple_conv;         /* (hc_n * H, ple_kernel) f32 */
    /* QSA indexer (qwen4exp attention layers) */
    struct model_weight idx_q;     /* (idx_heads * idx_dim, H) */
    struct model_weight idx_k;     /* (idx_dim, H) */
    const float *idx_q_norm, *idx_k_norm; /* (idx_dim) folded */
    const float *attn_norm;        /* (H) folded zero-centred norm, f32 */
    const float *post_attn_norm;   /* (H) */
    /* attention (kind == LAYER_KIND_ATTN) */
    struct model_weight wq;        /* (2*nh*hd, H): per head [query hd | gate hd] */
    struct model_weight wk;        /* (nkv*hd, H) */
    struct model_weight wv;        /* (nkv*hd, H) */
    struct model_weight wo;        /* (H, nh*hd) */
    const float *q_norm, *k_norm;  /* (hd) folded */
    /* GDN (kind == LAYER_KIND_GDN), value heads tiled */
    struct model_weight wqkv;      /* (2*Hk*Dk + Hv*Dv, H): q heads, k heads, v heads */
    struct model_weight wz;        /* (Hv*Dv, H) */
    struct model_weight wb;        /* (Hv, H) beta logits */
    struct model_weight wa;        /* (Hv, H) decay input */
    const float *conv;             /* (C, K) f32, C = 2*Hk*Dk + Hv*Dv */
    const float *dt_bias;          /* (Hv) */
    const float *ssm_a;            /* (Hv) = -exp(A_log) */
    const float *ssm_norm;         /* (Dv) plain weight, used as stored */
    struct model_weight wout;      /* (H, Hv*Dv) */
    /* dense FFN */
    struct model_weight ffn_gate;  /* (I, H) */
    struct model_weight ffn_up;    /* (I, H) */
    struct model_weight ffn_down;  /* (H, I) */
    /* MoE FFN */
    struct model_weight router;    /* (E, H) */
    struct model_weight exp_gate;  /* n_mat E of (Ie, H) */
    struct model_weight exp_up;    /* n_mat E of (Ie, H) */
    struct model_weight exp_down;  /* n_mat E of (H, Ie) */
    struct model_weight sh_gate;   /* (Is, H) */
    struct model_weight sh_up;     /* (Is, H) */
    struct model_weight sh_down;   /* (H, Is) */
    struct model_weight sh_gate_inp; /* (1, H) shared-expert gate */
};

struct model;

/* The values an architecture implies where its config.json (or GGUF, for the interval)
 * lacks a key: the loader applies them, mkmodel writes them. */
struct model_arch_defaults {
    double rope_theta;             /* rope_theta */
    double partial_rotary_factor;  /* rotary share of head_dim */
    double rms_eps;                /* rms_norm_eps */
    int64_t n_ctx_train;           /* max_position_embeddings */
    int64_t conv_kernel;           /* linear_conv_kernel_dim */
    int64_t full_attn_interval;    /* full_attention_interval (layer il is full attention
                                      iff (il + 1) % interval == 0) */
};

/* How an architecture is spelled in the files a writer makes, and the layout facts a
 * writer needs (src/mkmodel); filled from the architecture's arch_*.c. */
struct model_arch_info {
    enum model_arch arch;
    const char *name;               /* GGUF general.architecture */
    const char *hf_architecture;    /* config.json architectures[0] */
    const char *hf_model_type;      /* root model_type */
    const char *hf_text_model_type; /* text_config.model_type; NULL: a flat config */
    const char *hf_prefix;          /* the text model's tensor-name prefix */
    const char *tokenizer_pre;      /* GGUF tokenizer.ggml.pre of its tokenizer */
    bool moe;                       /* every layer's FFN is routed experts */
    bool norm_topk_always;          /* top-k always renormalised: no norm_topk_prob key */
    bool gguf_v_tiled;              /* GGUF value heads tiled (the converter re-orders) */
    bool flash_next;                /* Qwen3.8-Flash-Next's parts (hyper-connections, n-gram embedding, QSA) */
    bool mrope;                     /* rope_parameters with M-RoPE sections */
    bool tied;                      /* tie_word_embeddings of the real checkpoints */
    int64_t real_vocab;             /* embedding rows of the real checkpoints */
    struct model_arch_defaults defaults;
};

/* Fills *out for architecture a; false when a is not one. */
bool model_arch_info(enum model_arch a, struct model_arch_info *out);
/* How the loader turns a file tensor into the engine's layout (design note, items 1-5); a
 * writer that spells a tensor the other way (mkmodel's GGUF) does the inverse. */
enum spec_conv {
    SPEC_CONV_VIEW = 0,    /* zero-copy matrix (1-D: one row) */
    SPEC_CONV_NORM,        /* f32; +1 in HF files when zero-centred */
    SPEC_CONV_VEC,         /* f32 as stored (ssm_norm) */
    SPEC_CONV_VEC_VHEAD,   /* f32, one entry per value head (dt_bias) */
    SPEC_CONV_A,           /* f32 -exp(A_log) from HF; GGUF stores it already; per v head */
    SPEC_CONV_CONV,        /* f32 [C, K] (HF [C, 1, K]); V channels per v head */
    SPEC_CONV_QKV,         /* rows: q heads, k heads, v heads (v rows per v head) */
    SPEC_CONV_VROWS,       /* rows in v-head blocks of Dv (z) */
    SPEC_CONV_HROWS,       /* one row per v head (a, b) */
    SPEC_CONV_OUT,         /* columns in v-head blocks of Dv */
    SPEC_CONV_QKVZ,        /* grouped [q_g | k_g | v_g | z_g] -> qkv + z */
    SPEC_CONV_BA,          /* grouped [b_g | a_g] -> b + a */
    SPEC_CONV_EXPERTS,     /* [E, r, c] -> E zero-copy matrices */
    SPEC_CONV_GATE_UP,     /* [E, 2I, c] -> gate + up, zero-copy */
    SPEC_CONV_EXPERT_LIST, /* one tensor per expert ("%d") -> E zero-copy matrices */
    SPEC_CONV_SPLIT_ROWS,  /* rows [0, n) -> slot, the rest -> slot2, zero-copy (the indexer's
                              fused q|k projection: n = idx_heads * idx_dim) */
    SPEC_CONV_SHARDS,      /* one tensor per shard ("%d"), rows concatenated in shard order ->
                              one weight of n_mat shards (the n-gram table) */
};

/* One tensor of an architecture's HF checkpoint and its GGUF spelling, from the spec
 * tables (model_arch_hf_walk): what a writer needs. */
struct model_arch_tensor {
    int il;                          /* layer, or -1 for a tensor outside the layers */
    int expert;                      /* the expert of a per-expert tensor, else -1 */
    const char *hf;                  /* HF name within the text model or the layer, as the
                                        tables spell it ("%d": the expert) */
    bool hf_root;                    /* at the checkpoint root (lm_head), not under hf_prefix */
    int n_dims;
    int64_t shape[TENSOR_MAX_DIMS];  /* HF shape, PyTorch order */
    enum spec_conv conv;             /* what the loader does to the HF tensor */
    bool zero_centred;               /* a norm HF stores as w and GGUF as 1 + w */
    bool weight;                     /* binds as a matrix the kernels multiply (else f32) */
    /* The GGUF tensor(s) it becomes (names within "blk.<il>." or at the top; NULL: the
     * architecture has none). gguf[1]: the second output of a tensor that GGUF splits
     * (in_proj_qkvz -> attn_gate, gate_up_proj -> ffn_up_exps), else NULL. A per-expert
     * tensor's GGUF tensor is the stack of all experts. */
    const char *gguf[2];
    int gguf_n_dims[2];
    int64_t gguf_shape[2][TENSOR_MAX_DIMS];
};

/* Calls fn for every tensor of architecture a's HF checkpoint (MTP blocks aside) with
 * hyperparameters hp (the layer kinds, layer_moe and tied_embeddings decide which), in
 * state_dict order: the embedding, each layer in order, the final norm, lm_head; a layer's
 * per-expert tensors expert by expert. Stops at fn's first nonzero return and returns it;
 * HS_ERR_INVALID when a is not an architecture. */
int model_arch_hf_walk(enum model_arch a, const struct model_hparams *hp,
                       int (*fn)(const struct model_arch_tensor *t, void *ctx), void *ctx);

/* Load and bind a model: `path` is a Hugging Face directory (config.json + safetensors)
 * or a .gguf file. Every problem comes back in err naming the file and tensor/key. */
int model_load(const char *path, struct model **out, struct hs_err *err);
void model_free(struct model *m); /* NULL is a no-op */

const struct model_hparams *model_hparams(const struct model *m);
const struct model_layer *model_layer(const struct model *m, int il);
const struct model_weight *model_token_embd(const struct model *m); /* (V, H) */
const struct model_weight *model_lm_head(const struct model *m);    /* (V, H); token_embd if tied */
const float *model_output_norm(const struct model *m);               /* (H) folded; NULL with a head mixer */
const struct model_hc *model_head_mixer(const struct model *m);      /* qwen4exp's, else NULL */
/* The n-gram table (ple_rows, ple_row), NULL without one: n_mat shards of rows / n_mat rows
 * each (an HF checkpoint's shards, zero-copy), or one matrix (GGUF). */
const struct model_weight *model_ple_table(const struct model *m);
enum model_source model_source(const struct model *m);
const char *model_path(const struct model *m);
const char *model_arch_name(enum model_arch a); /* "qwen35", "qwen35moe", "qwen3next", "qwen4exp" */
int model_arch_from_name(const char *name);      /* -1 when unknown */
/* The tensors as found in the file(s) (for inspect). */
const struct tensor_set *model_tensors(const struct model *m);
/* Total parameter count of bound main-model weights (MTP separately). */
uint64_t model_n_params(const struct model *m);
uint64_t model_n_params_mtp(const struct model *m);
/* Sum of file sizes. */
uint64_t model_file_bytes(const struct model *m);
/* Directory of an HF model, or NULL for GGUF (where tokenizer.json etc. would be). */
const char *model_dir(const struct model *m);
/* The GGUF file for metadata (tokenizer), or NULL for HF models. */
const struct gguf_file *model_gguf(const struct model *m);

/* ---- identity and file checks (digest.c) ----------------------------------------------
 * The model's identity is a 128-bit digest of every byte of its files that decides what
 * it computes, tokenizes or renders (digest.c's design note and docs/FORMATS.md list
 * them): state that outlives the process is keyed by it. Per-file digests can be cached
 * in a directory (keyed by dev, inode, size, mtime, ctime; re-hashed when any changes).
 * model_identity_compute only reads (weight files through their mappings, the others
 * through descriptors of its own): it may run on a thread of its own while the model is
 * in use. */

struct model_identity {
    uint8_t digest[16];     /* XXH3-128 of the identity record */
    int n_files;            /* files covered (present) */
    int n_cached;           /* of those, how many digests came from the cache */
    uint64_t bytes_hashed;  /* bytes read and hashed by this call */
    double seconds;         /* the call's wall time */
};

struct model_identity_opts {
    const char *cache_dir;  /* per-file digest cache (created when needed); NULL: none */
    double racy_s;          /* a file changed less than this long before the hash is not
                               cached (default 2 s: timestamp granularity, digest.c) */
    uint64_t max_hash_bytes;/* more than this left to hash after the cache: HS_ERR_LIMIT
                               at once, nothing read (default: no limit) */
    bool (*stop)(void *ctx);/* polled between 4 MiB reads; true: stop (HS_ERR_INVALID) */
    void *stop_ctx;
};

void model_identity_opts_default(struct model_identity_opts *o);
/* The identity of a loaded model (opts NULL: defaults). Errors: an I/O error, a file that
 * changed since the model was loaded or while it was hashed (HS_ERR_IO), the byte limit
 * (HS_ERR_LIMIT), a stop. On error *out holds only bytes_hashed and seconds. */
int model_identity_compute(const struct model *m, const struct model_identity_opts *opts,
                           struct model_identity *out, struct hs_err *err);
/* 32 lowercase hex digits + NUL. */
void model_identity_hex(const struct model_identity *id, char out[33]);
/* HS_ERR_IO naming the file when a mapped file of the model changed on disk since it was
 * loaded (size, mtime or ctime of the mapped inode: written, truncated or extended in
 * place) — its mapping no longer holds the bytes the model was loaded from. A file
 * replaced by rename is not a change: the mapping keeps the old inode. One fstat a file. */
int model_files_check(const struct model *m, struct hs_err *err);
/* HS_ERR_IO naming the file when a mapping of the model took a SIGBUS (its file was
 * truncated; sys.h's guard): everything computed from the model since is garbage, and so
 * is everything computed from it from now on. */
int model_mapping_check(const struct model *m, struct hs_err *err);

/* `headstart inspect`: a human report, or JSON when as_json. */
int model_inspect(const char *path, bool as_json, struct strbuf *out, struct hs_err *err);

#endif
