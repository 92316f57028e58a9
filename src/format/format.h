/*
 * format — readers (and writers) for the files models come in: safetensors (single and
 * sharded), GGUF v3, and Hugging Face config.json. Depends on base and sys; the JSON
 * headers are parsed with jansson.
 *
 * Design note
 * -----------
 * Every reader treats its file as hostile: each length, count, offset and dimension is
 * bounds- and overflow-checked against the mapped file before it is used, and every
 * failure returns an hs_err message naming the file, the field (tensor or key name) and
 * the reason. Tensors are zero-copy views into the read-only mmap.
 *
 * One tensor vocabulary for both formats: `struct tensor_view` gives the shape in
 * PyTorch order (outermost first, last dimension contiguous). GGUF lists dimensions
 * fastest-first (ne0 = innermost); its reader reverses them, so a torch [out, in]
 * matrix and a GGUF {in, out} tensor both read as shape {out, in}.
 *
 * Invariants:
 *   1. A tensor_view's bytes [data, data + n_bytes) lie inside its file's mapping, and
 *      n_bytes == dtype_row_bytes(dtype, shape[last]) * (product of the other dims).
 *   2. The innermost dimension of a block-quantised tensor is a multiple of its block.
 *   3. Names are unique within a tensor_set (duplicates are a format error).
 *   4. Views stay valid until the owning tensor_set / gguf_file is freed.
 */
#ifndef HS_FORMAT_H
#define HS_FORMAT_H

#include "base/base.h"

#include <stdbool.h>
#include <stdint.h>

/* ---- element types ------------------------------------------------------------------ */

/* Our own numbering; GGUF and safetensors type codes map onto it through tables. */
enum dtype {
    DTYPE_F32 = 0,
    DTYPE_F16,
    DTYPE_BF16,
    DTYPE_Q8_0,   /* llama.cpp block: f16 scale + 32 int8, 34 bytes per 32 values */
    DTYPE_F64,
    DTYPE_I8,
    DTYPE_I16,
    DTYPE_I32,
    DTYPE_I64,
    DTYPE_U8,
    /* ggml block types that GGUF files may hold; readable (sizes known), not computable,
     * except Q4_K, Q5_K and Q6_K (the types of llama.cpp's Q4_K_M files) and Q5_1, IQ4_NL and
     * IQ4_XS (community files), computable as 2-D matrices only (the kernels' K-quant and
     * extra-type matmuls; norms and vectors must be float) */
    DTYPE_Q4_0, DTYPE_Q4_1, DTYPE_Q5_0, DTYPE_Q5_1, DTYPE_Q8_1,
    DTYPE_Q2_K, DTYPE_Q3_K,
    DTYPE_Q4_K,   /* = 17: 256 values in 144 bytes (f16 d, f16 dmin, 12 B 6-bit scales/mins, 128 B nibbles) */
    DTYPE_Q5_K,
    DTYPE_Q6_K,   /* = 19: 256 values in 210 bytes (128 B low 4 bits, 64 B high 2 bits, 16 int8 scales, f16 d) */
    DTYPE_Q8_K,
    DTYPE_IQ4_NL, /* = 21: 32 values in 18 bytes (f16 d, 16 B 4-bit indices into a fixed codebook) */
    DTYPE_IQ4_XS, /* = 22: 256 values in 136 bytes (f16 d, 6-bit sub-block scales, 128 B indices) */
    DTYPE_COUNT
};

struct dtype_info {
    const char *name;     /* "f32", "bf16", "q8_0", ... */
    uint32_t block_elems; /* values per block (1 for plain types) */
    uint32_t block_bytes; /* bytes per block */
    bool compute;         /* our kernels compute with it (f32/f16/bf16/q8_0; q4_k/q5_k/q6_k,
                           * q5_1/iq4_nl/iq4_xs matrices) */
};

const struct dtype_info *dtype_info(enum dtype t);
/* Lookup by our short name ("q8_0"); returns -1 when unknown. */
int dtype_from_name(const char *name);
/* Bytes of a row of n values; false when n is not a multiple of the block or overflows. */
bool dtype_row_bytes(enum dtype t, uint64_t n, uint64_t *bytes_out);

/* ---- tensors ------------------------------------------------------------------------ */

#define TENSOR_MAX_DIMS 4

struct tensor_view {
    const char *name;               /* owned by the set, NUL-terminated */
    enum dtype dtype;
    int n_dims;                     /* 1..TENSOR_MAX_DIMS (0 for a scalar) */
    int64_t shape[TENSOR_MAX_DIMS]; /* PyTorch order: shape[n_dims-1] is contiguous */
    const void *data;               /* into the read-only file mapping */
    uint64_t n_bytes;
    uint64_t file_offset;           /* absolute offset of data in its file */
    int file_index;                 /* which file of the set (shard index; 0 for GGUF) */
};

/* Number of elements (product of shape). */
uint64_t tensor_n_elems(const struct tensor_view *t);
/* "[4096, 1024]" into buf. */
const char *tensor_shape_str(const struct tensor_view *t, char *buf, size_t len);

/* A set of named tensors over one or more mapped files. */
struct tensor_set;

int tensor_set_count(const struct tensor_set *ts);
const struct tensor_view *tensor_set_at(const struct tensor_set *ts, int i);
/* NULL when absent. O(1) average. */
const struct tensor_view *tensor_set_find(const struct tensor_set *ts, const char *name);
int tensor_set_n_files(const struct tensor_set *ts);
const char *tensor_set_file_path(const struct tensor_set *ts, int file_index);
uint64_t tensor_set_file_size(const struct tensor_set *ts, int file_index);
/* The mapping of file file_index (struct sys_map, sys.h: its descriptor and its stat at map
 * time, for the model's identity and change checks); NULL when out of range. */
struct sys_map;
const struct sys_map *tensor_set_file(const struct tensor_set *ts, int file_index);
void tensor_set_free(struct tensor_set *ts); /* NULL is a no-op */

/* ---- safetensors -------------------------------------------------------------------- */

/* Open weights from `path`: a .safetensors file, a model.safetensors.index.json, or a
 * directory holding either (the index wins when both exist). Dtypes accepted: F32, F16,
 * BF16; any other dtype is an HS_ERR_UNSUPPORTED error naming the tensor. */
int safetensors_open(const char *path, struct tensor_set **out, struct hs_err *err);

/* The optional "__metadata__" string map of file 0; NULL when absent. */
const char *safetensors_metadata(const struct tensor_set *ts, const char *key);

/* Writer: tensors are appended in call order; data is borrowed until write returns. */
struct st_writer;
struct st_writer *st_writer_new(void);
void st_writer_add(struct st_writer *w, const char *name, enum dtype dtype, int n_dims,
                   const int64_t *shape, const void *data, uint64_t n_bytes);
void st_writer_set_metadata(struct st_writer *w, const char *key, const char *value);
/* Write atomically (temp + fsync + rename) through the sys I/O seam. */
int st_writer_write(struct st_writer *w, const char *path, struct hs_err *err);
void st_writer_free(struct st_writer *w);

/* ---- GGUF --------------------------------------------------------------------------- */

/* GGUF metadata value types, numbered as in the file format. */
enum gguf_type {
    GGUF_TYPE_UINT8 = 0, GGUF_TYPE_INT8 = 1, GGUF_TYPE_UINT16 = 2, GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4, GGUF_TYPE_INT32 = 5, GGUF_TYPE_FLOAT32 = 6, GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8, GGUF_TYPE_ARRAY = 9, GGUF_TYPE_UINT64 = 10, GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12, GGUF_TYPE_COUNT
};

struct gguf_value {
    enum gguf_type type;
    union {
        uint64_t u;   /* UINT8/16/32/64 */
        int64_t i;    /* INT8/16/32/64 */
        double f;     /* FLOAT32/64 */
        bool b;       /* BOOL */
        struct { const char *ptr; uint64_t len; } str; /* STRING: into the mapping, not NUL-terminated */
        struct { enum gguf_type elem_type; uint64_t n; const struct gguf_value *items; } arr;
    } v;
};

struct gguf_file;

int gguf_open(const char *path, struct gguf_file **out, struct hs_err *err);
void gguf_close(struct gguf_file *g); /* NULL is a no-op */
uint32_t gguf_version(const struct gguf_file *g);
uint64_t gguf_alignment(const struct gguf_file *g);
int gguf_n_kv(const struct gguf_file *g);
const char *gguf_kv_key(const struct gguf_file *g, int i);
const struct gguf_value *gguf_kv_value(const struct gguf_file *g, int i);
const struct gguf_value *gguf_find(const struct gguf_file *g, const char *key); /* NULL if absent */
const struct tensor_set *gguf_tensors(const struct gguf_file *g); /* owned by g */
/* Name of a metadata value type ("uint32", "string", "array", ...). */
const char *gguf_value_type_name(enum gguf_type t);

/* Typed getters. Integers convert between widths and signedness when the value fits;
 * HS_ERR_NOT_FOUND when absent, HS_ERR_FORMAT (naming key and type) on a mismatch. */
int gguf_get_u32(const struct gguf_file *g, const char *key, uint32_t *out, struct hs_err *err);
int gguf_get_u64(const struct gguf_file *g, const char *key, uint64_t *out, struct hs_err *err);
int gguf_get_i64(const struct gguf_file *g, const char *key, int64_t *out, struct hs_err *err);
int gguf_get_f32(const struct gguf_file *g, const char *key, float *out, struct hs_err *err);
/* A bool; an integer 0 or 1 is accepted too (some writers store flags as uint8). */
int gguf_get_bool(const struct gguf_file *g, const char *key, bool *out, struct hs_err *err);
/* The integer value of v: any integer width or signedness, or a bool (0/1); false for any
 * other type and for a uint64 above INT64_MAX. */
bool gguf_value_int(const struct gguf_value *v, int64_t *out);
/* Entry i of a per-layer integer key, as llama.cpp writes them: either a scalar (the same
 * value for every layer; *n = 0) or an array of any integer type or of bools (*n = its
 * length; i past the end is an error). *n is 0 where the key is missing or not an integer array. */
int gguf_get_i64_at(const struct gguf_file *g, const char *key, uint64_t i, int64_t *out, uint64_t *n,
                    struct hs_err *err);
/* The string is copied into an owned, NUL-terminated buffer (free with hs_free). */
int gguf_get_str(const struct gguf_file *g, const char *key, char **out, struct hs_err *err);
/* An array of a given element type (checked); items point into g. */
int gguf_get_arr(const struct gguf_file *g, const char *key, enum gguf_type elem_type,
                 const struct gguf_value **items, uint64_t *n, struct hs_err *err);

/* Writer. Keys and tensors are emitted in call order; tensor data is borrowed until
 * gguf_writer_write returns. Shapes are given in PyTorch order (outermost first) and
 * written fastest-first as GGUF requires. */
struct gguf_writer;
struct gguf_writer *gguf_writer_new(void);
void gguf_writer_set_alignment(struct gguf_writer *w, uint32_t alignment); /* default 32 */
void gguf_writer_set_u32(struct gguf_writer *w, const char *key, uint32_t v);
void gguf_writer_set_i32(struct gguf_writer *w, const char *key, int32_t v);
void gguf_writer_set_u64(struct gguf_writer *w, const char *key, uint64_t v);
void gguf_writer_set_f32(struct gguf_writer *w, const char *key, float v);
void gguf_writer_set_bool(struct gguf_writer *w, const char *key, bool v);
void gguf_writer_set_str(struct gguf_writer *w, const char *key, const char *v);
void gguf_writer_set_arr_str(struct gguf_writer *w, const char *key, const char *const *v, uint64_t n);
void gguf_writer_set_arr_i32(struct gguf_writer *w, const char *key, const int32_t *v, uint64_t n);
void gguf_writer_set_arr_f32(struct gguf_writer *w, const char *key, const float *v, uint64_t n);
/* A generic value (any type, arrays nested to any depth); deep-copied. */
void gguf_writer_set_value(struct gguf_writer *w, const char *key, const struct gguf_value *v);
void gguf_writer_add_tensor(struct gguf_writer *w, const char *name, enum dtype dtype, int n_dims,
                            const int64_t *shape, const void *data, uint64_t n_bytes);
int gguf_writer_write(struct gguf_writer *w, const char *path, struct hs_err *err);
void gguf_writer_free(struct gguf_writer *w);

/* ---- Hugging Face config.json ------------------------------------------------------- */

#define HF_CONFIG_MAX_LAYERS 256

/* The text-model fields of docs/MODELS.md §1.2, after defaults.
 * `has_*` flags tell whether a field was present in the file. */
struct hf_config {
    char model_type[64];          /* text model_type ("qwen3_5_text", "qwen3_next", ...) */
    char root_model_type[64];     /* top-level model_type */
    char architecture[96];        /* architectures[0], "" when absent */
    int64_t vocab_size;
    int64_t hidden_size;
    int64_t intermediate_size;    /* 0 when absent */
    int64_t num_hidden_layers;
    int64_t num_attention_heads;
    int64_t num_key_value_heads;
    int64_t head_dim;             /* explicit; default hidden_size / num_attention_heads */
    bool attn_output_gate;        /* default true */
    bool attention_bias;          /* default false */
    /* 0 when absent: the architecture's default applies (model/, struct model_arch_defaults) */
    double rms_norm_eps;
    double rope_theta;            /* rope_parameters.rope_theta or top-level */
    double partial_rotary_factor;
    int mrope_section[4];         /* default {11,11,10,0} */
    int n_mrope_section;
    bool mrope_interleaved;
    int64_t max_position_embeddings; /* 0 when absent */
    /* layer kinds: true = full attention, false = linear attention (GDN); all false when
     * neither layer_types nor full_attention_interval is given */
    bool layer_is_full[HF_CONFIG_MAX_LAYERS];
    bool has_layer_types;
    int64_t full_attention_interval; /* 0 when absent */
    /* GDN */
    int64_t linear_num_key_heads, linear_num_value_heads;
    int64_t linear_key_head_dim, linear_value_head_dim;
    int64_t linear_conv_kernel_dim;   /* 0 when absent */
    char mamba_ssm_dtype[16];         /* default "float32" */
    char output_gate_type[16];        /* GDN norm gate activation: "silu" (default) or "sigmoid" */
    /* MoE */
    int64_t num_experts, num_experts_per_tok;
    int64_t moe_intermediate_size, shared_expert_intermediate_size;
    bool norm_topk_prob;              /* default true */
    bool has_norm_topk_prob;
    int64_t decoder_sparse_step;      /* default 1 */
    bool mlp_only_layer[HF_CONFIG_MAX_LAYERS];
    /* MTP */
    int64_t mtp_num_hidden_layers;    /* default 0 */
    bool mtp_use_dedicated_embeddings;
    /* Qwen3.8-Flash-Next (qwen4_exp): 0 when absent */
    int64_t hc_count, hc_lowrank;           /* hyper-connection streams, low rank */
    int64_t indexer_n_heads, indexer_kv_heads, indexer_head_dim;
    int64_t indexer_budget, indexer_compress_ratio; /* QSA token budget, block size */
    int64_t ple_layer;                      /* 0-based (ple_layer_ids is 1-based); -1 when absent */
    int64_t ple_embed_dim, ple_conv_kernel_size, ngram_size, heads_per_ngram;
    /* misc */
    bool tie_word_embeddings;         /* text_config first, then root; default false */
    int64_t eos_token_ids[8];
    int n_eos_token_ids;
    int64_t bos_token_id, pad_token_id; /* -1 when absent */
    char torch_dtype[16];             /* "dtype" or "torch_dtype"; "" when absent */
};

/* Parse config.json (a path to the file). Text fields come from `text_config` when
 * present, else from the root. Missing required fields and unknown values of enumerated
 * fields (output_gate_type, layer_types entries, mamba_ssm_dtype) are errors. */
int hf_config_load(const char *path, struct hf_config *cfg, struct hs_err *err);
int hf_config_parse(const char *json, size_t len, const char *name, struct hf_config *cfg,
                    struct hs_err *err);

/* ---- tokenizer.json (Hugging Face tokenizers) --------------------------------------- */

struct hf_added_token {
    int64_t id;
    char *content;                  /* owned, UTF-8 */
    bool special, normalized, lstrip, rstrip, single_word;
};

/* The parts of a tokenizer.json that a byte-level BPE needs. Strings are owned. */
struct hf_tokenizer {
    char model_type[16];            /* "BPE" (others are rejected) */
    int64_t n_vocab;                /* max id + 1 over model.vocab and added_tokens */
    char **id_to_token;             /* [n_vocab]; NULL where no token has that id */
    int64_t n_merges;
    char **merges;                  /* "left right" (both JSON forms are accepted) */
    int n_added;
    struct hf_added_token *added;   /* in file order */
    char *split_regex;              /* the Split pre-tokenizer pattern, or NULL */
    bool byte_level;                /* a ByteLevel pre-tokenizer is present */
    char *normalizer;               /* "NFC" or another type name, or NULL for none */
};

/* Parse tokenizer.json; errors name the file and the JSON path of the bad field. */
int hf_tokenizer_load(const char *path, struct hf_tokenizer *t, struct hs_err *err);
void hf_tokenizer_free(struct hf_tokenizer *t); /* safe on a zeroed struct */

/* The parts of tokenizer_config.json a server needs. Strings are owned; NULL when absent. */
struct hf_tokenizer_config {
    char *chat_template;   /* a string, or the "default" entry of a list of named templates */
    char *bos_token;       /* a string or {content: ...}; NULL for null/absent */
    char *eos_token;
    char *pad_token;
    bool add_bos_token;
};

/* Parse tokenizer_config.json; errors name the file and field. */
int hf_tokenizer_config_load(const char *path, struct hf_tokenizer_config *c, struct hs_err *err);
void hf_tokenizer_config_free(struct hf_tokenizer_config *c); /* safe on a zeroed struct */

#endif
