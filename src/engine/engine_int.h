/*
 * engine_int.h — the engine's private structures, shared by engine.c (engine, fingerprint,
 * state blobs), seq.c (sequences) and forward.c (the forward pass). Tests may include it to
 * reach a sequence's GDN state (seq_gdn_state) and the geometry.
 */
#ifndef HS_ENGINE_INT_H
#define HS_ENGINE_INT_H

#include "engine/engine.h"
#include "kernels/kernels.h"
#include "sys/sys.h"

/* The engine casts a weight's enum dtype (format) to the kernels' weight type: kernels may
 * not include format/, so the two numberings are kept equal here, where both are seen. */
_Static_assert((int)KERN_W_F32 == (int)DTYPE_F32 && (int)KERN_W_F16 == (int)DTYPE_F16 &&
                   (int)KERN_W_BF16 == (int)DTYPE_BF16 && (int)KERN_W_Q8_0 == (int)DTYPE_Q8_0 &&
                   KERN_K_Q4_K == (int)DTYPE_Q4_K && KERN_K_Q5_K == (int)DTYPE_Q5_K &&
                   KERN_K_Q6_K == (int)DTYPE_Q6_K,
               "kernels.h weight types must equal format.h's enum dtype");

/* Bumped whenever the engine's arithmetic or the blob layout changes: part of the
 * fingerprint and of every blob header. */
#define ENGINE_NUMERICS_VERSION "headstart-engine-numerics-3" /* 2: bf16 x bf16 matmul, 3: kern_expf ([F7]) */
#define ENGINE_BLOB_MAGIC 0x51455348u /* "HSEQ" little-endian */
#define ENGINE_BLOB_VERSION 1u
#define ENGINE_KV_BLOCK 256 /* KV cache rows are grown in blocks of this many positions */

/* Geometry derived once from the hparams (all counts >= 0). */
struct engine_geom {
    int64_t H, V, nh, nkv, hd, n_rot, nff;
    int64_t hk, hv, dk, dv, kconv, C;      /* GDN; C = 2*hk*dk + hv*dv conv channels */
    int64_t ne, ne_used, nff_exp, nff_sh;  /* MoE */
    int64_t n_layer, n_attn, n_gdn;
    int attn_index[MODEL_MAX_LAYERS];      /* layer -> index among attention layers, or -1 */
    int gdn_index[MODEL_MAX_LAYERS];       /* layer -> index among GDN layers, or -1 */
    uint64_t conv_floats;                  /* (kconv - 1) * C per GDN layer */
    uint64_t rec_floats;                   /* hv * dk * dv per GDN layer */
    uint64_t kv_row_floats;                /* nkv * hd (+ idx_d with an indexer): one K (or V)
                                              row of one layer */
    float eps, theta;
    /* Qwen3.8-Flash-Next (qwen4exp; all 0 elsewhere, forward.c "Flash-Next") */
    int64_t hc_n, hc_r, W;                 /* residual streams, mixer rank, W = hc_n * H */
    int64_t idx_h, idx_d, qsa_blk, qsa_top;/* indexer heads / dim; block size, blocks kept */
    int64_t ple_layer, ple_n, ple_heads, ple_row, ple_dim, ple_k, ple_hist;
                                           /* n-gram layer (-1), N, heads, row, heads * row,
                                              conv taps, (taps - 1) * N history rows */
    uint64_t ple_off;                      /* floats: the n-gram state in the snapshot layout,
                                              after the GDN layers: history [ple_hist, W],
                                              then the last N - 1 token ids (int32 bits) */
    uint64_t ple_floats;                   /* its size */
};

/* One forward step over several sequences (forward.c): a segment is one sequence's tokens,
 * contiguous in the step; an attention block is at most KERN_ATTN_TOKS tokens of one
 * segment. */
struct fwd_seg {
    struct seq *s;
    const int32_t *tokens;                 /* [T] */
    int64_t t0, T, p0;                     /* first index in the step, tokens, seq position */
    struct engine_capture *caps;
    int n_caps;
};
struct fwd_block {
    int seg;
    int64_t t0, nt;                        /* first index in the step, tokens */
};
struct fwd_step {
    const struct fwd_seg *seg;
    int n_seg;
    const int32_t *tok_seg;                /* [T] token -> segment */
    const struct fwd_block *blk;
    int64_t n_blk, T;
};

/* A QSA block's score, ranked by score (descending), then block index (ascending). */
struct qsa_pair {
    float score;
    int32_t block;
};

/* Forward scratch, sized once for n_batch tokens (invariant 1 of engine.h). */
struct engine_scratch {
    float *x, *xn, *out;                   /* residual, normed input, projection out: [T, H] */
    float *qg, *q, *k, *v, *att;           /* attention */
    float *rope;                           /* [T, n_rot] cos/sin tables */
    float *qkv, *z, *b, *a, *conv, *y;     /* GDN */
    float *ffa, *ffb;                      /* [T, max ff] gate / up */
    float *router, *probs, *ew, *eh, *eo;  /* MoE: [T, E], [E], [n_used], [ff], [H] */
    int32_t *eid;                          /* [n_used] */
    float *shg;                            /* [T] shared-expert gate logits */
    float *macc;                           /* [H] one token's MoE sum */
    float *hrow;                           /* [T, H] final-normed rows for the lm_head */
    /* Flash-Next: x above is [T, W] (the streams side by side) */
    float *xh;                             /* [T, W] the streams, normed per stream */
    float *hca;                            /* [T, hc_r] mixer low-rank read */
    float *hcg;                            /* [T, W] mixer gates */
    float *hcw;                            /* [T, hc_n] injection weights */
    float *pe, *pk, *pv, *pu;              /* n-gram: gathered [T, ple_dim], key [T, W],
                                              value [T, H], gated value then its norm [T, W] */
    float *iq;                             /* [T, idx_h * idx_d] indexer queries */
    int32_t *sel;                          /* [T, sel_cap] positions a sparse query attends */
    int64_t *n_sel;                        /* [T] how many (0: dense) */
    int64_t sel_cap;                       /* qsa_top * qsa_blk + qsa_blk */
    float *kg, *vg;                        /* per thread [sel_cap, kv_row_floats] gathered rows */
    float *prope;                          /* per thread [n_rot] a pooled key's rope table */
    struct qsa_pair *bpair;                /* per thread [bpair_cap] block scores to rank */
    int64_t bpair_cap;
    struct kern_q8_block *xq_a, *xq_b;     /* quantized activations, [T, max K / 32] */
    int32_t *xc_a, *xc_b;                  /* kern_q8p_corr of xq_a / xq_b (packed Q8_0 matmuls) */
    struct kern_q8k_block *xk_a, *xk_b;    /* the same for K-quant weights, [T, max K / 256] */
    uint16_t *xb_a, *xb_b;                 /* bf16-rounded activations for bf16 weights, [T, max K] */
    float *attn_scores;                    /* n_threads * KERN_ATTN_TOKS * KERN_ATTN_HEADS * attn_cap floats */
    int64_t attn_cap;                      /* positions each thread's score row holds */
    struct fwd_seg *seg;                   /* [n_batch] the step's segments */
    int32_t *tok_seg;                      /* [n_batch] */
    struct fwd_block *blk;                 /* [n_batch] */
    int64_t *row_idx;                      /* [n_batch] step indices of the logit rows */
};

/* One weight matrix [rows, cols] of type wt (KERN_W_Q8_0, KERN_K_Q4_K or KERN_K_Q6_K) at src,
 * src_bytes long, and its copy in the type's packed layout (wpack.c). */
struct engine_pack {
    const void *src;
    void *packed;
    int wt;
    int64_t rows, cols;
    size_t src_bytes;
};

struct engine {
    const struct model *m;
    struct engine_geom g;
    int n_threads;
    int64_t n_batch;
    struct sys_pool *pool;
    struct engine_scratch s;
    uint64_t fingerprint;                  /* the process fingerprint (engine.c) */
    bool has_identity;                     /* engine_set_identity was called */
    uint8_t identity[16];                  /* the model identity (model_identity_compute) */
    uint64_t fingerprint_persistent;       /* valid when has_identity */
    const char *variant;
    const struct kern_ops *ops;            /* matmul / q8_quantize of the variant */
    struct engine_pack *packs;             /* packed weight copies, sorted by src (wpack.c) */
    int64_t n_packs;
    bool has_q8p;                          /* one of them is Q8_0 (the activations' offset shares) */
    uint64_t packed_bytes;                 /* their bytes in all */
};

struct seq {
    struct engine *e;
    int64_t n_ctx, pos;
    int64_t kv_cap;                        /* positions allocated per attention layer */
    float **kc, **vc;                      /* [n_attn] -> planes by kv head (seq.c note) */
    float *gdn;                            /* all GDN layers, snapshot layout */
};

/* The sequence's GDN state in the snapshot layout: for each GDN layer in layer order,
 * conv [K-1, C] then recurrent [Hv, Dk, Dv], f32. engine_snapshot_bytes(e) bytes. */
float *seq_gdn_state(struct seq *s);
/* Offset in floats of GDN layer gi's conv state inside the snapshot layout. */
uint64_t engine_gdn_offset(const struct engine *e, int gi);
/* Make room for KV rows up to n_pos positions (grown in ENGINE_KV_BLOCK blocks). */
void seq_kv_reserve(struct seq *s, int64_t n_pos);
/* Plane m of an attention layer's K (or V) cache buf (seq.c note): kv head m's rows
 * [kv_cap, hd] for m < nkv; m == nkv is the row tails' plane [kv_cap, kv_row_floats - nkv * hd]
 * (Flash-Next's indexer). Row p of a plane of width w is at + p * w. */
static inline float *seq_kv_plane(const struct seq *s, float *buf, int64_t m)
{
    return buf + m * s->kv_cap * s->e->g.hd;
}
/* Row p of buf in the logical order (kv heads in order, then the tail: kv_row_floats floats,
 * the order of blobs and the bank's KV rows), gathered into row / scattered from it. */
void seq_kv_get(const struct seq *s, const float *buf, int64_t p, void *row);
void seq_kv_put(const struct seq *s, float *buf, int64_t p, const void *row);
/* Make sure each thread's attention score row holds n_pos floats. */
void engine_attn_reserve(struct engine *e, int64_t n_pos);

/* Switch the engine to a lower kernel variant ("scalar", "avx2", "avx512"; at most the
 * CPU's best) and recompute the fingerprints. For tests that compare variants. */
int engine_force_variant(struct engine *e, const char *name, struct hs_err *err);

/* Pack every Q8_0 matrix of the model when the variant has kern_ops.matmul_q8p, every Q4_K
 * and Q6_K one when it has kern_ops.matmul_kp (unless HEADSTART_NO_PACK is set); needs
 * e->pool. The copy of src (in the layout of its own type), or NULL; free them all. */
void engine_pack_build(struct engine *e);
const void *engine_pack_find(const struct engine *e, const void *src);
void engine_pack_free(struct engine *e);

/* FNV-1a 64 over bytes, continuing from h (start with ENGINE_FNV_INIT). */
#define ENGINE_FNV_INIT 0xcbf29ce484222325ull
uint64_t engine_hash(uint64_t h, const void *data, size_t n);

#endif
