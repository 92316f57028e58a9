/* mkmodel_int.h — private to src/mkmodel: the tokenizer that `headstart mkmodel` writes
 * (mktok.c), and the geometry and tensor plan of the model it writes (plan.c, tensors.c).
 *
 * Either our own small byte-level BPE (all 256 byte tokens, a few hundred merges learned
 * from built-in English text, and the ChatML/Qwen special tokens as added tokens), or a
 * given tokenizer.json re-expressed as GGUF vocabulary. Token strings are in the GPT-2
 * byte-to-unicode form that tokenizer.json and GGUF use.
 */
#ifndef HS_MKMODEL_INT_H
#define HS_MKMODEL_INT_H

#include "format/format.h"
#include "mkmodel/mkmodel.h"

/* GGUF token types (llama.cpp's numbering). */
enum mktok_type { MKTOK_NORMAL = 1, MKTOK_UNKNOWN = 2, MKTOK_CONTROL = 3, MKTOK_USER_DEFINED = 4, MKTOK_UNUSED = 5, MKTOK_BYTE = 6 };

struct mktok {
    int64_t n_tokens;        /* tokens with an id in the tokenizer (BPE vocab + added) */
    int64_t n_vocab;         /* embedding rows: n_tokens rounded up (padding ids have no token) */
    char **tokens;           /* [n_tokens], owned */
    int32_t *token_type;     /* [n_tokens] enum mktok_type */
    int64_t n_merges;
    char **merges;           /* [n_merges] "left right", owned */
    int64_t eos_id;          /* <|endoftext|> (generation also stops at <|im_end|>) */
    int64_t pad_id;
    int64_t im_start_id, im_end_id;
    char pre[16];            /* GGUF tokenizer.ggml.pre: "qwen35" or "qwen2" */
    char *tokenizer_json;    /* the tokenizer.json text to write for HF output, owned */
    size_t tokenizer_json_len;
};

/* Our own tokenizer; `pre` decides the split regex written into tokenizer.json. */
int mktok_build_default(struct mktok *t, enum model_arch arch, struct hs_err *err);
/* Load an existing tokenizer.json (e.g. the real Qwen one) for re-emission. */
int mktok_from_file(const char *tokenizer_json_path, enum model_arch arch, struct mktok *t,
                    struct hs_err *err);
void mktok_free(struct mktok *t);
/* tokenizer_config.json text (chat_template, eos/pad tokens, add_bos false); owned. */
char *mktok_tokenizer_config_json(const struct mktok *t, const char *chat_template);
/* Put tokenizer.ggml.* (model gpt2, pre, tokens padded to n_vocab with [PAD<id>] unused
 * tokens, token_type, merges, eos/pad ids, add_bos false) and tokenizer.chat_template. */
void mktok_gguf_put(const struct mktok *t, struct gguf_writer *w, const char *chat_template);

/* ---- the model being written: geometry and plan (plan.c, tensors.c) --------------------
 * mkmodel.c's design note describes sources, routes, transforms and outputs. */

#define MK_NAME_MAX 128

/* The validated geometry (mkmodel.c's mk_geom_init). */
struct mk_geom {
    int64_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_rot, n_ff;
    int64_t hk, hv, dk, dv, conv_k;
    int64_t n_expert, n_expert_used, n_ff_exp, n_ff_shexp;
    int64_t n_vocab, n_ctx, full_attn_interval;
    float rope_theta, rms_eps;
    bool tied;
    /* qwen4exp (flash_next): hyper-connections, the QSA indexer, the n-gram embedding */
    bool flash_next;
    int64_t hc_n, hc_rank, idx_heads, idx_dim, qsa_block, qsa_budget;
    int64_t ple_layer, ple_ngram, ple_per_order, ple_heads, ple_row, ple_kernel;
    int64_t ple_rows, ple_shards, ple_base, ple_eos;
    uint64_t ple_mult[MODEL_PLE_MAX_NGRAM], ple_mod[MODEL_PLE_MAX_HEADS], ple_off[MODEL_PLE_MAX_HEADS];
};

static inline bool mk_layer_is_full(const struct mk_geom *g, int64_t il)
{
    return (il + 1) % g->full_attn_interval == 0;
}

enum mk_route {
    MK_ROUTE_SAME,      /* row r -> row r of dst */
    MK_ROUTE_TILE_ROWS, /* rows [p0, p0 + Hv*p1) are value heads of p1 rows: grouped -> tiled */
    MK_ROUTE_TILE_COLS, /* columns are value heads of p1 columns: grouped -> tiled */
    MK_ROUTE_QKVZ,      /* Qwen3-Next in_proj_qkvz -> attn_qkv (dst) + attn_gate (dst2) */
    MK_ROUTE_GATE_UP,   /* [E, 2I, H] -> gate (dst) + up (dst2), each [E, I, H]; p0 = I */
    MK_ROUTE_STACK,     /* expert (or table shard) p0's rows -> its slice of a stacked dst */
    MK_ROUTE_SPLIT,     /* rows [0, p0) -> dst, the rest -> dst2 (the indexer's fused q|k) */
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
    const void *fixed; /* not generated: these n_bytes are copied in (the I64 buffers) */
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

/* plan.c */
void mk_plan_free(struct mk_plan *p);
/* Add an output tensor (data allocated later); returns its index or a negative status. */
int mk_out_add(struct mk_plan *p, const char *name, enum dtype dt, int n_dims, const int64_t *shape,
               struct hs_err *err);
/* Add an output holding given bytes (borrowed until mk_plan_free). */
int mk_out_add_fixed(struct mk_plan *p, const char *name, enum dtype dt, int64_t n, const void *data,
                     struct hs_err *err);
void mk_job_add(struct mk_plan *p, const struct mk_src *src, enum mk_route route, enum mk_xform xform,
                int dst, int dst2, int64_t p0, int64_t p1);
/* Allocate every output and generate every source into it (rows in parallel). */
void mk_plan_run(struct mk_plan *p, const struct mk_geom *g, uint64_t seed);

/* tensors.c: the plan of architecture a's tensors in HF layout (gguf false) or in llama.cpp's
 * GGUF spelling, matrices in dt (K-quant types: the Q4_K_M / Q5_K_M mix). */
int mk_tensors_plan(struct mk_plan *plan, const struct model_arch_info *a, const struct mk_geom *g,
                    enum dtype dt, bool ud_mix, bool gguf, struct hs_err *err);

#endif
