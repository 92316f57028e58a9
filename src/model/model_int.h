/* model_int.h — private to src/model: the architecture description (tensor spec tables)
 * that arch_*.c define and load.c walks, and the loaded model itself.
 *
 * A tensor spec says, for one tensor of one architecture: its name in each file format
 * (NULL where that format has no such tensor), its shape as symbols of the
 * hyperparameters (struct arch_dim), which layers carry it (enum spec_scope), how the
 * loader turns it into the engine's layout (enum spec_conv) and into which slot(s) of
 * the model it binds (enum model_slot). Requiredness is per slot: a slot is required
 * when any applicable spec that fills it is not SPEC_OPT, and it is satisfied when any
 * of them bound; several specs filling one slot are alternatives tried in table order
 * (e.g. ffn_gate_exps + ffn_up_exps, or the fused ffn_gate_up_exps).
 *
 * Name patterns:
 *   SCOPE_TOP  HF: the text-model prefix + name (or the name alone with SPEC_ROOT);
 *              GGUF: the name.
 *   SCOPE_MTP  HF: the name (at the checkpoint root); GGUF: "blk.<n_layer>." + name.
 *   layers     HF: prefix + "layers.<il>." + name, or "mtp.layers.<j>." + name;
 *              GGUF: "blk.<il>." + name (MTP block j: il = n_layer + j).
 *   A second "%d" in a layer name (SPEC_CONV_EXPERT_LIST) is the expert index.
 */
#ifndef HS_MODEL_INT_H
#define HS_MODEL_INT_H

#include "model/model.h"

#define MODEL_MAX_MTP 4

/* Shape symbols; arch.c holds each one's formula and its printable name. */
enum arch_dim {
    DIM_ONE = 0,
    DIM_H,      /* n_embd */
    DIM_V,      /* n_vocab */
    DIM_2H,     /* 2*H (MTP fc input) */
    DIM_HD,     /* head_dim */
    DIM_Q2,     /* 2*nh*hd: query + gate */
    DIM_QO,     /* nh*hd */
    DIM_KV,     /* nkv*hd */
    DIM_QKV,    /* 2*Hk*Dk + Hv*Dv (also conv channels) */
    DIM_QKVZ,   /* 2*Hk*Dk + 2*Hv*Dv */
    DIM_VD,     /* Hv*Dv */
    DIM_HV,     /* Hv */
    DIM_2HV,    /* 2*Hv */
    DIM_DV,     /* Dv */
    DIM_K,      /* conv kernel */
    DIM_I,      /* dense FFN width */
    DIM_E,      /* experts */
    DIM_IE,     /* expert FFN width */
    DIM_2IE,    /* 2*Ie */
    DIM_IS,     /* shared expert width */
    /* qwen4exp */
    DIM_NH,     /* hc_n*H: the streams side by side */
    DIM_HCN,    /* hc_n */
    DIM_HCR,    /* hyper-connection rank */
    DIM_IQ,     /* idx_heads*idx_dim */
    DIM_IQK,    /* (idx_heads+1)*idx_dim: HF's fused indexer projection */
    DIM_ID,     /* idx_dim */
    DIM_PLED,   /* ple_heads*ple_row: the gathered n-gram embedding */
    DIM_PLER,   /* ple_row */
    DIM_PLEK,   /* ple_kernel */
    DIM_PLEN,   /* ple_rows: n-gram table rows */
    DIM_PLES,   /* rows of one table shard (HF) */
    DIM_COUNT
};

/* Which units carry a tensor. */
enum spec_scope {
    SCOPE_TOP = 0,  /* once per model: embedding, final norm, lm_head */
    SCOPE_MTP,      /* once per model, present when the file has MTP blocks */
    SCOPE_LAYER,    /* every decoder layer (main and MTP) */
    SCOPE_ATTN,     /* full-attention layers (MTP layers are attention layers) */
    SCOPE_GDN,      /* Gated DeltaNet layers */
    SCOPE_DENSE,    /* layers with a dense SwiGLU FFN */
    SCOPE_MOE,      /* layers with a routed-expert FFN */
    SCOPE_PLE,      /* the layer the hashed n-gram embedding enters (qwen4exp) */
};

enum spec_flag {
    SPEC_OPT = 1u << 0,   /* this spec does not make its slot required */
    SPEC_TIED = 1u << 1,  /* lm_head: falls back to token_embd when absent / tied */
    SPEC_ZC = 1u << 2,    /* zero-centred norm: HF stores w, the engine gets 1 + w */
    SPEC_ROOT = 1u << 3,  /* HF name sits at the checkpoint root, not under the prefix */
};

/* Where a tensor binds. Top slots live in struct model_top, layer slots in
 * struct model_layer; arch.c's slot table gives each one's offset and kind.
 * The order is a checkpoint's state_dict order (the model's modules in definition order):
 * model_arch_hf_walk, and with it every file mkmodel writes, lists a unit's tensors in
 * slot order (top slots marked after_layers follow the layers). */
enum model_slot {
    SLOT_NONE = 0,
    /* top */
    SLOT_TOKEN_EMBD, SLOT_PLE_TABLE, SLOT_OUTPUT_NORM, SLOT_HC_HEAD_NORM, SLOT_HC_HEAD_DOWN,
    SLOT_HC_HEAD_UP, SLOT_OUTPUT,
    SLOT_MTP_FC, SLOT_MTP_ENORM, SLOT_MTP_HNORM, SLOT_MTP_NORM, SLOT_MTP_EMBD, SLOT_MTP_HEAD,
    /* layer */
    SLOT_ATTN_NORM,
    SLOT_PLE_KEY, SLOT_PLE_VALUE, SLOT_PLE_NORM_KEY, SLOT_PLE_NORM_QUERY, SLOT_PLE_NORM_CONV, SLOT_PLE_CONV,
    SLOT_HC_ATTN_NORM, SLOT_HC_ATTN_DOWN, SLOT_HC_ATTN_UP, SLOT_HC_ATTN_INJECT,
    SLOT_WQ, SLOT_WK, SLOT_WV, SLOT_WO, SLOT_Q_NORM, SLOT_K_NORM,
    SLOT_IDX_Q, SLOT_IDX_K, SLOT_IDX_Q_NORM, SLOT_IDX_K_NORM,
    SLOT_WQKV, SLOT_WZ, SLOT_WB, SLOT_WA, SLOT_CONV, SLOT_DT_BIAS, SLOT_SSM_A, SLOT_SSM_NORM,
    SLOT_WOUT,
    SLOT_POST_ATTN_NORM,
    SLOT_HC_FFN_NORM, SLOT_HC_FFN_DOWN, SLOT_HC_FFN_UP, SLOT_HC_FFN_INJECT,
    SLOT_FFN_GATE, SLOT_FFN_UP, SLOT_FFN_DOWN,
    SLOT_ROUTER, SLOT_EXP_GATE, SLOT_EXP_UP, SLOT_EXP_DOWN,
    SLOT_SH_GATE, SLOT_SH_UP, SLOT_SH_DOWN, SLOT_SH_GATE_INP,
    SLOT_COUNT
};

enum slot_kind { SLOT_KIND_WEIGHT = 0, SLOT_KIND_F32 };

struct slot_info {
    const char *name;     /* for messages and inspect */
    bool top;             /* in struct model_top (else struct model_layer) */
    bool after_layers;    /* a top slot whose tensor follows the layers in a checkpoint */
    enum slot_kind kind;  /* struct model_weight or const float * */
    size_t offset;
};

struct tensor_spec {
    const char *hf;                 /* HF name pattern, NULL when HF has none */
    const char *gguf;               /* GGUF name pattern, NULL when GGUF has none */
    enum spec_scope scope;
    int n_dims;
    enum arch_dim shape[TENSOR_MAX_DIMS]; /* as the file holds it, PyTorch order */
    enum spec_conv conv;
    enum model_slot slot, slot2;    /* slot2: second output of a split */
    unsigned flags;
};

struct spec_table {
    const struct tensor_spec *specs;
    int n;
};

#define SPEC_TABLE(a) { (a), (int)HS_ARRAY_LEN(a) }

struct arch_desc {
    enum model_arch arch;
    const char *name;                     /* GGUF general.architecture */
    const char *const *hf_model_types;    /* NULL-terminated: top-level or text model_type */
    const char *const *hf_architectures;  /* NULL-terminated: config.json architectures[0] */
    bool moe;                 /* routed experts (required); false: dense FFN only */
    bool norm_topk_always;    /* top-k weights always renormalised (no config field) */
    bool gguf_v_tiled;        /* GGUF value heads already tiled (llama.cpp qwen35*) */
    bool flash_next;          /* hyper-connections, the n-gram embedding and the QSA indexer
                                 (their hyperparameters are read; load.c) */
    /* what a writer needs (model_arch_info; struct model_arch_info says what each is) */
    const char *hf_prefix;
    bool hf_text_config;      /* HF config nests the text model in text_config; its
                                 model_type is hf_model_types[1] (else flat) */
    const char *tokenizer_pre;
    bool mrope, tied;
    int64_t real_vocab;
    struct model_arch_defaults defaults; /* also what the loader applies */
    const struct spec_table *const *tables; /* walked in order */
    int n_tables;
};

/* The config.json defaults the whole family shares (transformers' Qwen3_5TextConfig;
 * Qwen3-Next's are the same). A macro: a static initializer cannot copy an object. */
#define ARCH_QWEN_DEFAULTS                                                                   \
    {                                                                                        \
        .rope_theta = 1e7, .partial_rotary_factor = 0.25, .rms_eps = 1e-6,                  \
        .n_ctx_train = 32768, .conv_kernel = 4, .full_attn_interval = 4,                     \
    }

/* Registry (arch.c). */
const struct arch_desc *arch_get(enum model_arch a);
const struct arch_desc *arch_by_name(const char *gguf_name);     /* NULL if unknown */
/* Match config.json strings; architectures[0] is tried first, then the model types. */
const struct arch_desc *arch_from_hf(const char *architecture, const char *model_type,
                                     const char *root_model_type);
const struct slot_info *arch_slot(enum model_slot s);
/* Value of a shape symbol under hp, and its formula text ("2*Hk*Dk+Hv*Dv"). */
int64_t arch_dim_value(enum arch_dim d, const struct model_hparams *hp);
const char *arch_dim_name(enum arch_dim d);
/* Whether a row of `scope` applies to a decoder layer of kind lkind (moe: its FFN is
 * routed experts; ple: the hashed n-gram embedding enters it); the top scopes apply to no
 * layer. */
bool arch_scope_in_layer(enum spec_scope scope, enum layer_kind lkind, bool moe, bool ple);

/* Tables shared by the family (arch.c) and across archs (arch_qwen35.c, arch_qwen35moe.c). */
extern const struct spec_table arch_specs_top, arch_specs_mtp, arch_specs_layer_norms,
    arch_specs_attn, arch_specs_gdn_tail, arch_specs_ffn_dense, arch_specs_moe_common;
extern const struct spec_table arch_specs_gdn_split;   /* Qwen3.5 split GDN projections */
extern const struct spec_table arch_specs_moe_gguf;    /* GGUF expert stacks */

extern const struct spec_table arch_specs_experts_hf;  /* HF fused expert stacks */

extern const struct arch_desc arch_qwen35, arch_qwen35moe, arch_qwen3next, arch_qwen4exp;

/* ---- the loaded model ------------------------------------------------------------- */

/* Weights outside the decoder layers. */
struct model_top {
    struct model_weight token_embd;  /* (V, H) */
    struct model_weight output;      /* (V, H); == token_embd when tied */
    const float *output_norm;        /* (H) folded */
    /* MTP (n_mtp > 0) */
    struct model_weight mtp_fc;      /* (H, 2H): input is [embedding | hidden] */
    const float *mtp_enorm;          /* (H) folded */
    const float *mtp_hnorm;          /* (H) folded */
    const float *mtp_norm;           /* (H) folded */
    struct model_weight mtp_embd;    /* optional dedicated embedding (GGUF nextn) */
    struct model_weight mtp_head;    /* optional dedicated head (GGUF nextn) */
    /* qwen4exp */
    struct model_hc hc_head;         /* the head mixer (no inject): replaces output_norm */
    struct model_weight ple_table;   /* (ple_rows, ple_row), shards as n_mat */
};

struct model {
    char *path;
    char *dir;                       /* HF directory; NULL for GGUF */
    enum model_source source;
    const struct arch_desc *arch;
    struct model_hparams hp;
    struct tensor_set *st;           /* HF weights (owned) */
    struct gguf_file *gguf;          /* GGUF file (owned) */
    const struct tensor_set *ts;     /* whichever of the two */
    const char *hf_prefix;           /* the text-model prefix found ("model.language_model.") */
    struct model_top top;
    struct model_layer *layers;      /* [n_layer] */
    struct model_layer mtp_layers[MODEL_MAX_MTP]; /* [n_mtp], attention layers */
    bool *claimed;                   /* [tensor count]: some spec bound this tensor */
    void **owned;                    /* converted tensors and expert pointer arrays */
    int n_owned, cap_owned;
    uint64_t n_params, n_params_mtp;
};

/* MTP parts for tests and later engine use. */
const struct model_top *model_top_weights(const struct model *m);
const struct model_layer *model_mtp_layer(const struct model *m, int j);
/* Whether tensor i of model_tensors() was bound by a spec. */
bool model_tensor_claimed(const struct model *m, int i);

#endif
