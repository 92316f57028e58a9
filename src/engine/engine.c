/*
 * engine.c — the engine object (validated model geometry, forward scratch, thread pool),
 * its numerics fingerprint, and sequence state blobs (seq_save / seq_restore).
 * The forward pass itself is forward.c; sequences are seq.c; sampling is sample.c.
 *
 * Design note
 * -----------
 * Fingerprints. Two 64-bit hashes (engine_hash, below); both start with
 *   1. ENGINE_NUMERICS_VERSION and the compiler's __VERSION__ (the build: a change to
 *      the engine's arithmetic bumps the version string);
 *   2. the kernel variant name ("scalar", ...);
 *   3. the model geometry (struct engine_geom's counts, eps, theta, arch, layer kinds);
 * then
 *   - the process fingerprint (engine_fingerprint: the RAM bank, seq_save blobs) adds,
 *     for every tensor of the file(s), its name, dtype, shape, byte size, file offset and
 *     file index, and for every file the stat it was mapped with (dev, inode, size, mtime,
 *     ctime). It costs no I/O and tells apart any two files loaded in one process; it
 *     says nothing about bytes, so it never names state outside this process;
 *   - the persistent fingerprint (engine_fingerprint_persistent: the disk tier) adds the
 *     model identity (model_identity_compute, src/model/digest.c: XXH3-128 of every byte
 *     of the weight files, config, tokenizer and chat template) instead. It exists only
 *     once engine_set_identity gave the identity: the server hashes in the background (or
 *     finds the digest cached) and keeps the disk tier closed until then.
 * Path and mtime are not part of the persistent one: a copied model file is the same
 * model. Loader options: model_load has none that change numerics; HEADSTART_CPU picks
 * the kernel variant, which is item 2. A model whose files change in place while loaded
 * is caught by model_files_check (the server stops using the bank), and one truncated
 * under us by model_mapping_check (engine_forward fails: forward.c).
 *
 * SIGBUS. Weights are zero-copy views of MAP_PRIVATE file mappings; a truncated file makes
 * the pages past its new end fault with SIGBUS on whichever pool thread reads them. The
 * guard in sys (file.c) maps zero pages over the faulting mapping and marks it, so the
 * load re-executes and the pass runs to its end on zeros; engine_forward checks the mark
 * before and after the pass and returns HS_ERR_IO naming the file, and the caller drops
 * the sequence. (siglongjmp out of the handler would have to unwind a pool worker in the
 * middle of its slice, with the other threads waiting at the pool's barrier.)
 * State made under another fingerprint is refused by seq_restore (and by the bank).
 *
 * Prefault. engine_new maps the pages of the weight files into the process at once
 * (sys_mem_warm: one madvise, no trap per page), all but those of the matrices packed
 * (wpack.c: their copies serve, and each was read and dropped in turn), so the first
 * forward pass does not pay ~0.2 s of page faults on a 0.8b model (what
 * llama.cpp's MAP_POPULATE does at its load too). Not when the files are over half the
 * machine's RAM (they would evict each other: they are read as the passes need them), nor
 * with HEADSTART_NO_PREFAULT=1. Advice only: a truncated file or an old kernel leaves the
 * pages to fault as before, and no bit changes either way.
 *
 * Hash. engine_hash is FNV-1a 64 run over 64-bit little-endian words (then the tail
 * bytes), with a rotate after each multiply so high bits feed back. It is a checksum
 * against corruption and a fingerprint against accidents, not a defence against an
 * adversary.
 *
 * Blob layout (seq_save), all fields little-endian:
 *
 *   OFFSET  SIZE            FIELD
 *   0       4               magic 0x51455348 ("HSEQ")
 *   4       4               version (1)
 *   8       8               engine fingerprint
 *   16      8               pos: positions held (tokens consumed)
 *   24      4               n_attn: attention layers
 *   28      4               n_gdn: GDN layers
 *   32      8               kv_row_floats: nkv * hd (+ idx_d for Flash-Next: the indexer's
 *                           raw key ends each K row, a block's pooled key the V row of its
 *                           last position)
 *   40      8               snapshot bytes (engine_snapshot_bytes)
 *   48      8               payload bytes P = n_attn * 2 * pos * kv_row_floats * 4 + snapshot
 *   56      P               for each attention layer in layer order: K rows [0, pos), then
 *                           V rows [0, pos) (f32); then the GDN state in the snapshot layout
 *                           (Flash-Next: then the n-gram conv history and last token ids)
 *   56 + P  8               engine_hash of bytes [0, 56 + P)
 *
 * Invariants:
 *   1. engine_new refuses a model whose matrices are not f32/f16/bf16/q8_0 or whose shapes
 *      disagree with the hparams, naming the tensor; nothing is half-built on failure.
 *   2. seq_restore checks magic, version, fingerprint, geometry, pos <= n_ctx, the exact
 *      length and the checksum before it touches the sequence.
 */
#include "engine/engine_int.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#define ENGINE_BLOB_HEADER 56

/* ---- hash ------------------------------------------------------------------------------ */

uint64_t engine_hash(uint64_t h, const void *data, size_t n)
{
    const uint8_t *p = data;
    const uint64_t prime = 0x100000001b3ull;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        h = (h ^ hs_rd_u64(p + i)) * prime;
        h = (h << 31) | (h >> 33);
    }
    for (; i < n; i++) h = (h ^ p[i]) * prime;
    return h;
}

static uint64_t hash_u64(uint64_t h, uint64_t v)
{
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    return engine_hash(h, b, 8);
}

static uint64_t hash_str(uint64_t h, const char *s)
{
    h = engine_hash(h, s, strlen(s));
    return hash_u64(h, strlen(s));
}

static void put_u32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void put_u64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }

/* ---- validation ------------------------------------------------------------------------ */

static bool wtype_ok(enum dtype t)
{
    return t == DTYPE_F32 || t == DTYPE_F16 || t == DTYPE_BF16 || t == DTYPE_Q8_0 ||
           t == DTYPE_Q4_K || t == DTYPE_Q5_K || t == DTYPE_Q6_K || kern_wtype_is_x((int)t);
}

/* The extra block types ([F12]; kernels.h) are cast like the K-quants. */
_Static_assert(KERN_X_Q5_1 == (int)DTYPE_Q5_1 && KERN_X_IQ4_NL == (int)DTYPE_IQ4_NL &&
                   KERN_X_IQ4_XS == (int)DTYPE_IQ4_XS,
               "kernels.h extra block types must equal format.h's enum dtype");

/* A hostile file: an extra-type matrix (or expert stack) with a NaN or infinite f16 scale
 * would turn every logit NaN without a word; refused here, naming the block. The scan reads
 * 2 (Q5_1: 4) bytes per block, so it touches every page of those matrices once. */
static int check_scales(const struct model_weight *w, const char *what, int il, struct hs_err *err)
{
    if (!kern_wtype_is_x((int)w->dtype)) return HS_OK;
    for (int64_t e = 0; e < w->n_mat; e++) {
        const void *m = w->n_mat == 1 ? w->data : w->mats[e];
        int64_t bad = kern_x_bad_scale(m, (int)w->dtype, w->rows, w->cols);
        if (bad >= 0) {
            int64_t per = (int64_t)w->row_bytes / (int64_t)dtype_info(w->dtype)->block_bytes;
            return hs_err_set(err, HS_ERR_FORMAT, "layer %d %s: matrix %lld row %lld block %lld: %s scale is NaN or infinite",
                              il, what, (long long)e, (long long)(bad / per), (long long)(bad % per),
                              dtype_info(w->dtype)->name);
        }
    }
    return HS_OK;
}

/* Check one matrix (or expert stack of n_mat matrices) against its expected shape. */
static int check_weight(const struct model_weight *w, const char *what, int il, int64_t rows,
                        int64_t cols, int64_t n_mat, struct hs_err *err)
{
    if (!wtype_ok(w->dtype))
        return hs_err_set(err, HS_ERR_UNSUPPORTED, "layer %d %s: dtype %s is not one the kernels compute with",
                          il, what, dtype_info(w->dtype) ? dtype_info(w->dtype)->name : "?");
    if (w->rows != rows || w->cols != cols)
        return hs_err_set(err, HS_ERR_FORMAT, "layer %d %s: shape [%lld, %lld], expected [%lld, %lld]",
                          il, what, (long long)w->rows, (long long)w->cols, (long long)rows, (long long)cols);
    if (w->n_mat != n_mat)
        return hs_err_set(err, HS_ERR_FORMAT, "layer %d %s: %lld matrices, expected %lld", il, what,
                          (long long)w->n_mat, (long long)n_mat);
    size_t rb = kern_row_bytes((enum kern_wtype)w->dtype, cols);
    if (rb == 0 || rb != w->row_bytes)
        return hs_err_set(err, HS_ERR_FORMAT, "layer %d %s: row of %lld values cannot be %llu bytes of %s",
                          il, what, (long long)cols, (unsigned long long)w->row_bytes, dtype_info(w->dtype)->name);
    if (n_mat == 1 && !w->data) return hs_err_set(err, HS_ERR_FORMAT, "layer %d %s: not bound", il, what);
    if (n_mat > 1) {
        if (!w->mats) return hs_err_set(err, HS_ERR_FORMAT, "layer %d %s: expert matrices not bound", il, what);
        for (int64_t e = 0; e < n_mat; e++)
            if (!w->mats[e]) return hs_err_set(err, HS_ERR_FORMAT, "layer %d %s: expert %lld not bound", il, what, (long long)e);
    }
    return check_scales(w, what, il, err);
}

static int check_vec(const float *p, const char *what, int il, struct hs_err *err)
{
    return p ? HS_OK : hs_err_set(err, HS_ERR_FORMAT, "layer %d %s: not bound", il, what);
}

static int geom_init(const struct model *m, struct engine_geom *g, struct hs_err *err)
{
    const struct model_hparams *hp = model_hparams(m);
    memset(g, 0, sizeof(*g));
    g->H = hp->n_embd; g->V = hp->n_vocab; g->nh = hp->n_head; g->nkv = hp->n_head_kv;
    g->hd = hp->head_dim; g->n_rot = hp->n_rot; g->nff = hp->n_ff;
    g->hk = hp->gdn_k_heads; g->hv = hp->gdn_v_heads; g->dk = hp->gdn_k_dim; g->dv = hp->gdn_v_dim;
    g->kconv = hp->conv_kernel; g->C = 2 * g->hk * g->dk + g->hv * g->dv;
    g->ne = hp->n_expert; g->ne_used = hp->n_expert_used; g->nff_exp = hp->n_ff_exp;
    g->nff_sh = hp->n_ff_shexp; g->n_layer = hp->n_layer;
    g->eps = hp->rms_eps; g->theta = hp->rope_theta;
    if (g->H < 1 || g->V < 1 || g->n_layer < 1 || g->n_layer > MODEL_MAX_LAYERS)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: bad geometry (H %lld, vocab %lld, layers %lld)",
                          model_path(m), (long long)g->H, (long long)g->V, (long long)g->n_layer);
    for (int il = 0; il < g->n_layer; il++) {
        g->attn_index[il] = g->gdn_index[il] = -1;
        if (hp->layer_kind[il] == LAYER_KIND_ATTN) g->attn_index[il] = (int)g->n_attn++;
        else g->gdn_index[il] = (int)g->n_gdn++;
    }
    if (g->n_attn > 0 && (g->nh < 1 || g->nkv < 1 || g->hd < 1 || g->nh % g->nkv || g->n_rot < 0 ||
                          g->n_rot > g->hd || g->n_rot % 2))
        return hs_err_set(err, HS_ERR_FORMAT, "%s: bad attention geometry (heads %lld/%lld, head_dim %lld, n_rot %lld)",
                          model_path(m), (long long)g->nh, (long long)g->nkv, (long long)g->hd, (long long)g->n_rot);
    if (g->n_gdn > 0 && (g->hk < 1 || g->hv < 1 || g->dk < 1 || g->dv < 1 || g->hv % g->hk || g->kconv < 2))
        return hs_err_set(err, HS_ERR_FORMAT, "%s: bad GDN geometry (heads %lld/%lld, dims %lld/%lld, conv %lld)",
                          model_path(m), (long long)g->hk, (long long)g->hv, (long long)g->dk, (long long)g->dv,
                          (long long)g->kconv);
    g->conv_floats = (uint64_t)(g->kconv - 1) * (uint64_t)g->C;
    g->rec_floats = (uint64_t)g->hv * (uint64_t)g->dk * (uint64_t)g->dv;
    g->kv_row_floats = (uint64_t)g->nkv * (uint64_t)g->hd;
    g->ple_layer = -1;
    if (hp->hc_n > 0) {
        /* Flash-Next (the loader validated these): the indexer's raw key rides at the end of
         * each K row, a complete block's pooled key at the end of the V row of its last
         * position (forward.c), so the bank and the blobs carry them as KV rows */
        g->hc_n = hp->hc_n; g->hc_r = hp->hc_rank; g->W = hp->hc_n * g->H;
        g->idx_h = hp->idx_heads; g->idx_d = hp->idx_dim;
        g->qsa_blk = hp->qsa_block; g->qsa_top = hp->qsa_top_blocks;
        g->kv_row_floats += (uint64_t)g->idx_d;
        g->ple_layer = hp->ple_layer; g->ple_n = hp->ple_ngram; g->ple_heads = hp->ple_heads;
        g->ple_row = hp->ple_row; g->ple_dim = hp->ple_heads * hp->ple_row; g->ple_k = hp->ple_kernel;
        g->ple_hist = (g->ple_k - 1) * g->ple_n;
        g->ple_off = (uint64_t)g->n_gdn * (g->conv_floats + g->rec_floats);
        g->ple_floats = (uint64_t)g->ple_hist * (uint64_t)g->W + (uint64_t)(g->ple_n - 1);
    }
    return HS_OK;
}

/* A hyper-connection mixer: norm [W], down (r, W), up (W, r), inject (n, W) unless the head's. */
static int check_hc(const struct model_hc *hc, const struct engine_geom *g, const char *what, int il, bool inject,
                    struct hs_err *err)
{
    int rc;
    if ((rc = check_vec(hc->norm, what, il, err)) || (rc = check_weight(&hc->down, what, il, g->hc_r, g->W, 1, err)) ||
        (rc = check_weight(&hc->up, what, il, g->W, g->hc_r, 1, err)))
        return rc;
    return inject ? check_weight(&hc->inject, what, il, g->hc_n, g->W, 1, err) : HS_OK;
}

/* The n-gram table: its rows are looked up one at a time (kern_row_to_f32). */
static int check_table(const struct model_weight *t, const struct engine_geom *g, int64_t rows, struct hs_err *err)
{
    if (!t->data || t->n_mat < 1 || t->cols != g->ple_row || t->rows * t->n_mat != rows)
        return hs_err_set(err, HS_ERR_FORMAT, "n-gram table: [%lld x %lld rows, %lld], expected %lld rows of %lld",
                          (long long)t->n_mat, (long long)t->rows, (long long)t->cols, (long long)rows,
                          (long long)g->ple_row);
    if (!wtype_ok(t->dtype) || kern_row_bytes((enum kern_wtype)t->dtype, g->ple_row) != t->row_bytes)
        return hs_err_set(err, HS_ERR_UNSUPPORTED, "n-gram table: dtype %s rows of %lld values cannot be read",
                          dtype_info(t->dtype) ? dtype_info(t->dtype)->name : "?", (long long)g->ple_row);
    return HS_OK;
}

static int model_check(const struct model *m, const struct engine_geom *g, struct hs_err *err)
{
    const struct model_hparams *hp = model_hparams(m);
    int rc = HS_OK;
    const struct model_weight *emb = model_token_embd(m), *lm = model_lm_head(m);
    if ((rc = check_weight(emb, "token_embd", -1, g->V, g->H, 1, err))) return rc;
    if ((rc = check_weight(lm, "lm_head", -1, g->V, g->H, 1, err))) return rc;
    if (g->hc_n > 0) {
        if ((rc = check_hc(model_head_mixer(m), g, "output_hc", -1, false, err)) ||
            (rc = check_table(model_ple_table(m), g, hp->ple_rows, err)))
            return rc;
    } else if ((rc = check_vec(model_output_norm(m), "output_norm", -1, err))) {
        return rc;
    }
    for (int il = 0; il < g->n_layer && !rc; il++) {
        const struct model_layer *L = model_layer(m, il);
        if (g->hc_n > 0) {
            if ((rc = check_hc(&L->hc_attn, g, "hc_attn", il, true, err)) ||
                (rc = check_hc(&L->hc_ffn, g, "hc_ffn", il, true, err)))
                return rc;
            if (il == g->ple_layer &&
                ((rc = check_weight(&L->ple_key, "ple_key", il, g->W, g->ple_dim, 1, err)) ||
                 (rc = check_weight(&L->ple_value, "ple_value", il, g->H, g->ple_dim, 1, err)) ||
                 (rc = check_vec(L->ple_norm_key, "ple_norm_key", il, err)) ||
                 (rc = check_vec(L->ple_norm_query, "ple_norm_query", il, err)) ||
                 (rc = check_vec(L->ple_norm_conv, "ple_norm_conv", il, err)) ||
                 (rc = check_vec(L->ple_conv, "ple_conv1d", il, err))))
                return rc;
            if (L->kind == LAYER_KIND_ATTN &&
                ((rc = check_weight(&L->idx_q, "indexer.q_proj", il, g->idx_h * g->idx_d, g->H, 1, err)) ||
                 (rc = check_weight(&L->idx_k, "indexer.k_proj", il, g->idx_d, g->H, 1, err)) ||
                 (rc = check_vec(L->idx_q_norm, "indexer.q_norm", il, err)) ||
                 (rc = check_vec(L->idx_k_norm, "indexer.k_norm", il, err))))
                return rc;
        } else if ((rc = check_vec(L->attn_norm, "attn_norm", il, err)) ||
                   (rc = check_vec(L->post_attn_norm, "post_attn_norm", il, err))) {
            return rc;
        }
        if (L->kind == LAYER_KIND_ATTN) {
            if ((rc = check_weight(&L->wq, "attn_q", il, 2 * g->nh * g->hd, g->H, 1, err)) ||
                (rc = check_weight(&L->wk, "attn_k", il, g->nkv * g->hd, g->H, 1, err)) ||
                (rc = check_weight(&L->wv, "attn_v", il, g->nkv * g->hd, g->H, 1, err)) ||
                (rc = check_weight(&L->wo, "attn_output", il, g->H, g->nh * g->hd, 1, err)) ||
                (rc = check_vec(L->q_norm, "attn_q_norm", il, err)) || (rc = check_vec(L->k_norm, "attn_k_norm", il, err)))
                return rc;
        } else {
            if ((rc = check_weight(&L->wqkv, "attn_qkv", il, g->C, g->H, 1, err)) ||
                (rc = check_weight(&L->wz, "attn_gate", il, g->hv * g->dv, g->H, 1, err)) ||
                (rc = check_weight(&L->wb, "ssm_beta", il, g->hv, g->H, 1, err)) ||
                (rc = check_weight(&L->wa, "ssm_alpha", il, g->hv, g->H, 1, err)) ||
                (rc = check_weight(&L->wout, "ssm_out", il, g->H, g->hv * g->dv, 1, err)) ||
                (rc = check_vec(L->conv, "ssm_conv1d", il, err)) || (rc = check_vec(L->dt_bias, "ssm_dt", il, err)) ||
                (rc = check_vec(L->ssm_a, "ssm_a", il, err)) || (rc = check_vec(L->ssm_norm, "ssm_norm", il, err)))
                return rc;
        }
        if (hp->layer_moe[il]) {
            if (g->ne < 1 || g->ne_used < 1 || g->ne_used > g->ne || g->nff_exp < 1)
                return hs_err_set(err, HS_ERR_FORMAT, "layer %d: bad MoE geometry (%lld experts, %lld used, width %lld)",
                                  il, (long long)g->ne, (long long)g->ne_used, (long long)g->nff_exp);
            if ((rc = check_weight(&L->router, "ffn_gate_inp", il, g->ne, g->H, 1, err)) ||
                (rc = check_weight(&L->exp_gate, "ffn_gate_exps", il, g->nff_exp, g->H, g->ne, err)) ||
                (rc = check_weight(&L->exp_up, "ffn_up_exps", il, g->nff_exp, g->H, g->ne, err)) ||
                (rc = check_weight(&L->exp_down, "ffn_down_exps", il, g->H, g->nff_exp, g->ne, err)))
                return rc;
            if (g->nff_sh > 0 &&
                ((rc = check_weight(&L->sh_gate, "ffn_gate_shexp", il, g->nff_sh, g->H, 1, err)) ||
                 (rc = check_weight(&L->sh_up, "ffn_up_shexp", il, g->nff_sh, g->H, 1, err)) ||
                 (rc = check_weight(&L->sh_down, "ffn_down_shexp", il, g->H, g->nff_sh, 1, err)) ||
                 (rc = check_weight(&L->sh_gate_inp, "ffn_gate_inp_shexp", il, 1, g->H, 1, err))))
                return rc;
        } else {
            if (g->nff < 1) return hs_err_set(err, HS_ERR_FORMAT, "layer %d: dense FFN of width 0", il);
            if ((rc = check_weight(&L->ffn_gate, "ffn_gate", il, g->nff, g->H, 1, err)) ||
                (rc = check_weight(&L->ffn_up, "ffn_up", il, g->nff, g->H, 1, err)) ||
                (rc = check_weight(&L->ffn_down, "ffn_down", il, g->H, g->nff, 1, err)))
                return rc;
        }
    }
    return rc;
}

/* ---- fingerprint ----------------------------------------------------------------------- */

/* The best kernel variant for this CPU. sys_cpu has no AVX-512 DQ flag: every CPU with
 * AVX-512 F+BW+VL and VNNI has DQ (Cascade Lake, Ice Lake, Sapphire Rapids and later,
 * Zen 4 and later). */
struct cpu_feats {
    bool avx2_fma_f16c, avx_vnni, avx512_vnni, avx512_bf16;
};

/* sys's flags as the kernels' variant choice takes them. */
static struct cpu_feats cpu_feats(void)
{
    const struct sys_cpu *cpu = sys_cpu_get();
    bool vnni = cpu->avx512f && cpu->avx512bw && cpu->avx512vl && cpu->avx512_vnni;
    return (struct cpu_feats){ cpu->avx2 && cpu->fma && cpu->f16c, cpu->avx_vnni, vnni, vnni && cpu->avx512_bf16 };
}

const char *engine_best_variant(void)
{
    struct cpu_feats f = cpu_feats();
    return kern_best_variant(f.avx2_fma_f16c, f.avx_vnni, f.avx512_vnni, f.avx512_bf16);
}

bool engine_variant_runs(const char *name)
{
    struct cpu_feats f = cpu_feats();
    return kern_variant_runs(name, f.avx2_fma_f16c, f.avx_vnni, f.avx512_vnni, f.avx512_bf16);
}

/* Items 1-3 of the design note. */
static uint64_t fingerprint_numerics(const struct engine *e)
{
    const struct engine_geom *g = &e->g;
    const struct model_hparams *hp = model_hparams(e->m);
    uint64_t h = ENGINE_FNV_INIT;
    h = hash_str(h, ENGINE_NUMERICS_VERSION);
#ifdef __VERSION__
    h = hash_str(h, __VERSION__);
#endif
    h = hash_str(h, e->variant);
    int64_t dims[] = { hp->arch, g->H, g->V, g->nh, g->nkv, g->hd, g->n_rot, g->nff, g->hk, g->hv,
                       g->dk, g->dv, g->kconv, g->ne, g->ne_used, g->nff_exp, g->nff_sh, g->n_layer,
                       hp->norm_topk_prob, hp->gdn_gate, g->hc_n, g->hc_r, g->idx_h, g->idx_d, g->qsa_blk,
                       g->qsa_top, g->ple_layer, g->ple_n, g->ple_heads, g->ple_row, g->ple_k, hp->ple_eos };
    for (size_t i = 0; i < HS_ARRAY_LEN(dims); i++) h = hash_u64(h, (uint64_t)dims[i]);
    h = engine_hash(h, &g->eps, sizeof(g->eps));
    h = engine_hash(h, &g->theta, sizeof(g->theta));
    for (int il = 0; il < g->n_layer; il++) h = hash_u64(h, (uint64_t)hp->layer_kind[il] * 2 + hp->layer_moe[il]);
    for (int64_t j = 0; g->ple_layer >= 0 && j < g->ple_n; j++) h = hash_u64(h, hp->ple_mult[j]);
    for (int64_t j = 0; g->ple_layer >= 0 && j < g->ple_heads; j++) h = hash_u64(h, hp->ple_mod[j] * 31 + hp->ple_off[j]);
    return h;
}

/* The process fingerprint: numerics + the tensor table + each file's stat at map time. */
static uint64_t fingerprint(const struct engine *e)
{
    uint64_t h = hash_str(fingerprint_numerics(e), "process");
    const struct tensor_set *ts = model_tensors(e->m);
    if (ts) {
        for (int i = 0; i < tensor_set_count(ts); i++) {
            const struct tensor_view *t = tensor_set_at(ts, i);
            h = hash_str(h, t->name);
            h = hash_u64(h, (uint64_t)t->dtype);
            for (int d = 0; d < t->n_dims; d++) h = hash_u64(h, (uint64_t)t->shape[d]);
            h = hash_u64(h, t->n_bytes);
            h = hash_u64(h, t->file_offset);
            h = hash_u64(h, (uint64_t)t->file_index);
        }
        for (int f = 0; f < tensor_set_n_files(ts); f++) {
            const struct sys_file_stat *st = &tensor_set_file(ts, f)->st;
            uint64_t v[] = { st->dev, st->ino, st->size, (uint64_t)st->mtime_ns, (uint64_t)st->ctime_ns };
            for (size_t k = 0; k < HS_ARRAY_LEN(v); k++) h = hash_u64(h, v[k]);
        }
    }
    return h;
}

/* The persistent fingerprint: numerics + the model identity (valid once has_identity). */
static uint64_t fingerprint_persistent(const struct engine *e)
{
    uint64_t h = hash_str(fingerprint_numerics(e), "persistent");
    return engine_hash(h, e->identity, sizeof(e->identity));
}

/* ---- engine ---------------------------------------------------------------------------- */

void engine_opts_default(struct engine_opts *o)
{
    o->n_threads = 1;
    o->n_batch = 512;
}

static float *falloc(int64_t n) { return hs_calloc((size_t)HS_MAX(n, 1), sizeof(float)); }

static void scratch_alloc(struct engine *e)
{
    const struct engine_geom *g = &e->g;
    struct engine_scratch *s = &e->s;
    int64_t T = e->n_batch;
    int64_t ffmax = HS_MAX(HS_MAX(g->nff, g->nff_exp), g->nff_sh);
    int64_t kmax = HS_MAX(HS_MAX(g->H, ffmax), HS_MAX(g->nh * g->hd, g->hv * g->dv));
    kmax = HS_MAX(kmax, HS_MAX(g->W, HS_MAX(g->hc_r, g->ple_dim)));
    s->x = falloc(T * HS_MAX(g->H, g->W)); s->xn = falloc(T * g->H); s->out = falloc(T * g->H);
    if (g->hc_n > 0) {
        s->xh = falloc(T * g->W); s->hca = falloc(T * g->hc_r); s->hcg = falloc(T * g->W);
        s->hcw = falloc(T * g->hc_n);
        s->pe = falloc(T * g->ple_dim); s->pk = falloc(T * g->W); s->pv = falloc(T * g->H); s->pu = falloc(T * g->W);
        s->iq = falloc(T * g->idx_h * g->idx_d);
        s->sel_cap = g->qsa_top * g->qsa_blk + g->qsa_blk;
        s->sel = hs_calloc((size_t)(T * s->sel_cap), sizeof(int32_t));
        s->n_sel = hs_calloc((size_t)T, sizeof(int64_t));
        s->kg = falloc(e->n_threads * s->sel_cap * (int64_t)g->kv_row_floats);
        s->prope = falloc(e->n_threads * HS_MAX(g->n_rot, 1));
        s->vg = falloc(e->n_threads * s->sel_cap * (int64_t)g->kv_row_floats);
    }
    s->hrow = falloc(T * g->H);
    if (g->n_attn) {
        s->qg = falloc(T * 2 * g->nh * g->hd); s->q = falloc(T * g->nh * g->hd);
        s->k = falloc(T * g->kv_row_floats); s->v = falloc(T * g->kv_row_floats);
        s->att = falloc(T * g->nh * g->hd); s->rope = falloc(T * HS_MAX(g->n_rot, 1));
    }
    if (g->n_gdn) {
        s->qkv = falloc(T * g->C); s->z = falloc(T * g->hv * g->dv); s->b = falloc(T * g->hv);
        s->a = falloc(T * g->hv); s->conv = falloc(g->C); s->y = falloc(T * g->hv * g->dv);
    }
    s->ffa = falloc(T * ffmax); s->ffb = falloc(T * ffmax);
    if (g->ne) {
        s->router = falloc(T * g->ne); s->probs = falloc(g->ne); s->ew = falloc(g->ne_used);
        s->eid = hs_calloc((size_t)g->ne_used, sizeof(int32_t));
        s->eh = falloc(2 * g->nff_exp); s->eo = falloc(g->H); s->shg = falloc(T);
        s->macc = falloc(g->H);
    }
    size_t nq = (size_t)(T * (kmax / KERN_Q8_BLOCK + 1));
    s->xq_a = hs_calloc(nq, sizeof(struct kern_q8_block));
    s->xq_b = hs_calloc(nq, sizeof(struct kern_q8_block));
    s->xc_a = hs_calloc(nq, sizeof(int32_t));
    s->xc_b = hs_calloc(nq, sizeof(int32_t));
    size_t nk = (size_t)(T * (kmax / KERN_QK + 1)); /* K-quant activations ([F7] q4k) */
    s->xk_a = hs_calloc(nk, sizeof(struct kern_q8k_block));
    s->xk_b = hs_calloc(nk, sizeof(struct kern_q8k_block));
    s->xb_a = hs_calloc((size_t)(T * kmax), sizeof(uint16_t)); /* bf16 activations ([F7]) */
    s->xb_b = hs_calloc((size_t)(T * kmax), sizeof(uint16_t));
    s->attn_cap = 0;
    s->attn_scores = NULL;
    s->seg = hs_calloc((size_t)T, sizeof(*s->seg));
    s->tok_seg = hs_calloc((size_t)T, sizeof(*s->tok_seg));
    s->blk = hs_calloc((size_t)T, sizeof(*s->blk));
    s->row_idx = hs_calloc((size_t)T, sizeof(*s->row_idx));
}

void engine_attn_reserve(struct engine *e, int64_t n_pos)
{
    if (n_pos <= e->s.attn_cap) return;
    int64_t cap = (n_pos + ENGINE_KV_BLOCK - 1) / ENGINE_KV_BLOCK * ENGINE_KV_BLOCK;
    hs_free(e->s.attn_scores);
    e->s.attn_scores = hs_calloc((size_t)(cap * KERN_ATTN_TOKS * KERN_ATTN_HEADS * e->n_threads), sizeof(float));
    e->s.attn_cap = cap;
    if (e->g.qsa_blk > 0) { /* a score slot per block a query can see */
        hs_free(e->s.bpair);
        e->s.bpair_cap = cap / e->g.qsa_blk + 1;
        e->s.bpair = hs_calloc((size_t)(e->s.bpair_cap * e->n_threads), sizeof(struct qsa_pair));
    }
}

static void scratch_free(struct engine_scratch *s)
{
    float *fs[] = { s->x, s->xn, s->out, s->qg, s->q, s->k, s->v, s->att, s->rope, s->qkv,
                    s->z, s->b, s->a, s->conv, s->y, s->ffa, s->ffb, s->router, s->probs, s->ew,
                    s->eh, s->eo, s->shg, s->macc, s->hrow, s->attn_scores, s->xh, s->hca, s->hcg,
                    s->hcw, s->pe, s->pk, s->pv, s->pu, s->iq, s->kg, s->vg, s->prope };
    for (size_t i = 0; i < HS_ARRAY_LEN(fs); i++) hs_free(fs[i]);
    hs_free(s->eid);
    hs_free(s->sel);
    hs_free(s->n_sel);
    hs_free(s->bpair);
    hs_free(s->xq_a);
    hs_free(s->xq_b);
    hs_free(s->xc_a);
    hs_free(s->xc_b);
    hs_free(s->xk_a);
    hs_free(s->xk_b);
    hs_free(s->xb_a);
    hs_free(s->xb_b);
    hs_free(s->seg);
    hs_free(s->tok_seg);
    hs_free(s->blk);
    hs_free(s->row_idx);
}

/* Map the weight files' pages in now (see Prefault above), but for the matrices packed
 * (their copies serve; e->packs is sorted by address), unless the files would not fit. */
static void prefault(const struct engine *e)
{
    const struct tensor_set *ts = model_tensors(e->m);
    if (!ts || getenv("HEADSTART_NO_PREFAULT")) return;
    uint64_t total = 0;
    for (int i = 0; i < tensor_set_n_files(ts); i++) total += tensor_set_file_size(ts, i);
    if (total > sys_mem_total_bytes() / 2) return;
    for (int i = 0; i < tensor_set_n_files(ts); i++) {
        const struct sys_map *f = tensor_set_file(ts, i);
        if (!f || !f->data) continue;
        const uint8_t *at = f->data, *end = f->data + f->len;
        for (int64_t k = 0; k < e->n_packs; k++) {
            const uint8_t *src = e->packs[k].src;
            if (src < at || src >= end) continue;
            sys_mem_warm(at, (size_t)(src - at));
            at = src + e->packs[k].src_bytes;
        }
        if (at < end) sys_mem_warm(at, (size_t)(end - at));
    }
}

int engine_new(const struct model *m, const struct engine_opts *o, struct engine **out,
               struct hs_err *err)
{
    struct engine_opts d;
    engine_opts_default(&d);
    if (!o) o = &d;
    *out = NULL;
    if (o->n_threads < 1 || o->n_threads > 1024)
        return hs_err_set(err, HS_ERR_INVALID, "engine: n_threads %d out of range [1, 1024]", o->n_threads);
    if (o->n_batch < 1 || o->n_batch > (1 << 20))
        return hs_err_set(err, HS_ERR_INVALID, "engine: n_batch %lld out of range [1, 1048576]", (long long)o->n_batch);
    struct engine *e = hs_calloc(1, sizeof(*e));
    e->m = m;
    e->n_threads = o->n_threads;
    e->n_batch = o->n_batch;
    /* The variant: the best the CPU has (HEADSTART_CPU=scalar|avx2|avxvnni|avx512vnni|avx512
     * lowers it). */
    e->variant = engine_best_variant();
    e->ops = kern_ops_for(e->variant);
    if (!e->ops) e->ops = kern_ops_for(e->variant = "scalar");
    int rc = geom_init(m, &e->g, err);
    if (!rc) rc = model_check(m, &e->g, err);
    if (rc) {
        hs_err_prefix(err, "%s: ", model_path(m));
        hs_free(e);
        return rc;
    }
    scratch_alloc(e);
    e->pool = sys_pool_new(e->n_threads);
    engine_pack_build(e);
    prefault(e);
    e->fingerprint = fingerprint(e);
    *out = e;
    return HS_OK;
}

void engine_free(struct engine *e)
{
    if (!e) return;
    sys_pool_free(e->pool);
    engine_pack_free(e);
    scratch_free(&e->s);
    hs_free(e);
}

int engine_force_variant(struct engine *e, const char *name, struct hs_err *err)
{
    const char *b = engine_best_variant();
    const struct kern_ops *ops = engine_variant_runs(name) ? kern_ops_for(name) : NULL;
    if (!ops) return hs_err_set(err, HS_ERR_UNSUPPORTED, "engine: kernel variant '%s' is not available here (best: %s)", name, b);
    e->ops = ops;
    e->variant = ops->name;
    e->fingerprint = fingerprint(e);
    if (e->has_identity) e->fingerprint_persistent = fingerprint_persistent(e);
    return HS_OK;
}

void engine_set_identity(struct engine *e, const uint8_t digest[16])
{
    memcpy(e->identity, digest, sizeof(e->identity));
    e->has_identity = true;
    e->fingerprint_persistent = fingerprint_persistent(e);
}

bool engine_fingerprint_persistent(const struct engine *e, uint64_t *fp)
{
    if (e->has_identity && fp) *fp = e->fingerprint_persistent;
    return e->has_identity;
}

const struct model *engine_model(const struct engine *e) { return e->m; }
const char *engine_kernel_variant(const struct engine *e) { return e->variant; }
uint64_t engine_packed_bytes(const struct engine *e) { return e->packed_bytes; }
uint64_t engine_fingerprint(const struct engine *e) { return e->fingerprint; }

uint64_t engine_snapshot_bytes(const struct engine *e)
{
    return ((uint64_t)e->g.n_gdn * (e->g.conv_floats + e->g.rec_floats) + e->g.ple_floats) * sizeof(float);
}

uint64_t engine_gdn_offset(const struct engine *e, int gi)
{
    return (uint64_t)gi * (e->g.conv_floats + e->g.rec_floats);
}

/* ---- state blobs ----------------------------------------------------------------------- */

static uint64_t blob_payload(const struct engine *e, int64_t pos)
{
    return (uint64_t)e->g.n_attn * 2 * (uint64_t)pos * e->g.kv_row_floats * sizeof(float) +
           engine_snapshot_bytes(e);
}

int seq_save(const struct seq *s, void **blob, uint64_t *len, struct hs_err *err)
{
    const struct engine *e = s->e;
    uint64_t payload = blob_payload(e, s->pos);
    uint64_t total = ENGINE_BLOB_HEADER + payload + 8;
    uint8_t *b = hs_malloc((size_t)total);
    put_u32(b, ENGINE_BLOB_MAGIC);
    put_u32(b + 4, ENGINE_BLOB_VERSION);
    put_u64(b + 8, e->fingerprint);
    put_u64(b + 16, (uint64_t)s->pos);
    put_u32(b + 24, (uint32_t)e->g.n_attn);
    put_u32(b + 28, (uint32_t)e->g.n_gdn);
    put_u64(b + 32, e->g.kv_row_floats);
    put_u64(b + 40, engine_snapshot_bytes(e));
    put_u64(b + 48, payload);
    uint8_t *p = b + ENGINE_BLOB_HEADER;
    size_t rb = (size_t)e->g.kv_row_floats * sizeof(float); /* logical rows (seq.c note) */
    for (int64_t a = 0; a < e->g.n_attn; a++) {
        for (int64_t r = 0; r < s->pos; r++, p += rb) seq_kv_get(s, s->kc[a], r, p);
        for (int64_t r = 0; r < s->pos; r++, p += rb) seq_kv_get(s, s->vc[a], r, p);
    }
    if (engine_snapshot_bytes(e)) memcpy(p, s->gdn, (size_t)engine_snapshot_bytes(e));
    p += engine_snapshot_bytes(e);
    put_u64(p, engine_hash(ENGINE_FNV_INIT, b, (size_t)(ENGINE_BLOB_HEADER + payload)));
    *blob = b;
    *len = total;
    (void)err;
    return HS_OK;
}

int seq_restore(struct seq *s, const void *blob, uint64_t len, struct hs_err *err)
{
    const struct engine *e = s->e;
    const uint8_t *b = blob;
    if (!b || len < ENGINE_BLOB_HEADER + 8)
        return hs_err_set(err, HS_ERR_FORMAT, "state blob: %llu bytes, shorter than its header", (unsigned long long)len);
    if (hs_rd_u32(b) != ENGINE_BLOB_MAGIC)
        return hs_err_set(err, HS_ERR_FORMAT, "state blob: field magic: 0x%08x is not a headstart sequence state", hs_rd_u32(b));
    if (hs_rd_u32(b + 4) != ENGINE_BLOB_VERSION)
        return hs_err_set(err, HS_ERR_UNSUPPORTED, "state blob: field version: %u, this build reads %u", hs_rd_u32(b + 4),
                          ENGINE_BLOB_VERSION);
    if (hs_rd_u64(b + 8) != e->fingerprint)
        return hs_err_set(err, HS_ERR_INVALID, "state blob: field fingerprint: %016llx, this engine is %016llx",
                          (unsigned long long)hs_rd_u64(b + 8), (unsigned long long)e->fingerprint);
    uint64_t pos = hs_rd_u64(b + 16);
    if (hs_rd_u32(b + 24) != (uint32_t)e->g.n_attn || hs_rd_u32(b + 28) != (uint32_t)e->g.n_gdn ||
        hs_rd_u64(b + 32) != e->g.kv_row_floats || hs_rd_u64(b + 40) != engine_snapshot_bytes(e))
        return hs_err_set(err, HS_ERR_INVALID, "state blob: fields n_attn/n_gdn/kv_row/snapshot: geometry differs from this model");
    if (pos > (uint64_t)s->n_ctx)
        return hs_err_set(err, HS_ERR_LIMIT, "state blob: field pos: %llu past the sequence's n_ctx %lld",
                          (unsigned long long)pos, (long long)s->n_ctx);
    uint64_t payload = blob_payload(e, (int64_t)pos);
    if (hs_rd_u64(b + 48) != payload || len != ENGINE_BLOB_HEADER + payload + 8)
        return hs_err_set(err, HS_ERR_FORMAT, "state blob: field payload: %llu bytes in a %llu-byte blob, expected %llu",
                          (unsigned long long)hs_rd_u64(b + 48), (unsigned long long)len, (unsigned long long)payload);
    uint64_t sum = engine_hash(ENGINE_FNV_INIT, b, (size_t)(ENGINE_BLOB_HEADER + payload));
    if (sum != hs_rd_u64(b + ENGINE_BLOB_HEADER + payload))
        return hs_err_set(err, HS_ERR_FORMAT, "state blob: field checksum: mismatch (corrupt blob)");
    seq_kv_reserve(s, (int64_t)pos);
    const uint8_t *p = b + ENGINE_BLOB_HEADER;
    size_t rb = (size_t)e->g.kv_row_floats * sizeof(float);
    for (int64_t a = 0; a < e->g.n_attn; a++) {
        for (int64_t r = 0; r < (int64_t)pos; r++, p += rb) seq_kv_put(s, s->kc[a], r, p);
        for (int64_t r = 0; r < (int64_t)pos; r++, p += rb) seq_kv_put(s, s->vc[a], r, p);
    }
    if (engine_snapshot_bytes(e)) memcpy(s->gdn, p, (size_t)engine_snapshot_bytes(e));
    s->pos = (int64_t)pos;
    return HS_OK;
}
