/*
 * mkmodel.c — `headstart mkmodel`: deterministic random-weight models of the Qwen3.5 family
 * (qwen35, qwen35moe, qwen3next) and of Qwen3.8-Flash-Next (qwen4exp), written as a Hugging
 * Face directory or as a GGUF file that llama.cpp loads. Tests and benchmarks use these
 * instead of downloads.
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
 * gate_up_proj split and per-expert tensors stacked into ffn_{gate,up,down}_exps; for qwen4exp
 * also the indexer's fused index_qk_proj split into indexer.q_proj + k_proj (rows), the n-gram
 * table's HF shards stacked into one per_layer_token_embd, and the n-gram conv squeezed.
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
 *      The quantizers are the kernels' round-to-nearest (kern_row_from_f32, beside the
 *      dequantizers), not llama.cpp's error-minimising search: the files are valid Q4_K_M /
 *      Q5_K_M, not bit-equal to what llama-quantize would write from the same f32 weights.
 *      --dtype q5_1, iq4_nl, iq4_xs (GGUF only; [F12]) store every quantized matrix in that
 *      type, except the MoE router (f32, as q4_k_m), output.weight and a tied
 *      token_embd.weight (Q8_0: the logits' own projection keeps 8 bits, as llama.cpp keeps
 *      it above the file's base type) and, for iq4_xs, a row that is not whole 256-value
 *      super-blocks (IQ4_NL, llama.cpp's own fallback for IQ4_XS). Round to nearest again
 *      (q5_1.c, iq4.c quantizer notes).
 *      --dtype ud_q4_k_xl (GGUF only; DTYPE_Q8_0 with ud_mix in the options) is a mixed file
 *      in the manner of unsloth's UD-Q4_K_XL files of the family: routed experts' gate / up
 *      Q4_K (Q8_0 where a row is not whole super-blocks), their down projection Q5_1, an
 *      untied token_embd.weight IQ4_NL (standing in for a real file's PLE table: large,
 *      read a few rows per token), the router f32, every other matrix Q8_0;
 *      general.file_type 15 as those files say. Not unsloth's exact per-tensor choice.
 *      qwen4exp: the mixer (down, up, inject), indexer, n-gram key / value projections and
 *      the n-gram table are matrices and follow the rules above (the table as token_embd:
 *      the base type; rows of the mixers' up projection are --hc-rank wide, so a q4_k_m file
 *      has them Q8_0 unless the rank is whole super-blocks); mixer and n-gram norms and the
 *      n-gram conv taps stay f32. In ud_q4_k_xl the n-gram table is IQ4_NL and the indexer
 *      projections BF16, as the real UD-Q4_K_XL Flash-Next files have them (our kernels
 *      and llama.cpp both multiply BF16 directly), token_embd Q8_0.
 *   4. Every file is written atomically (temp + fsync + rename); an HF directory gets its
 *      config.json last, so an interrupted run never leaves a directory that looks complete.
 *   5. Options are validated before anything is generated; each error names the option.
 *   6. qwen4exp geometry. The tiny default exercises every part: 4 layers (attention at
 *      il % 4 == 3), H 128, Hk 2 != Hv 4, 4 experts; 4 hyper-connection streams of rank 32;
 *      an indexer of 2 heads x head_dim keeping --qsa-budget tokens (2048: dense for any
 *      prompt up to 2,050 tokens, where llama.cpp agrees; e.g. 16 prunes a short prompt);
 *      the n-gram embedding on layer 1 (a GDN layer, as released) with N 3, 2 heads per
 *      order, rows H / heads wide (llama.cpp needs heads x row = H), conv of 4 taps, the
 *      table in 4 HF shards. Hash constants as the HF code derives them, from our PRNG:
 *      moduli P_h successive primes from a base (101 by default), offsets O_h their prefix
 *      sums, table rows their span rounded up to a multiple of 128 (and of the shard count);
 *      --ngram-table-rows R instead takes the largest base whose primes fit in R rows;
 *      multipliers odd, below half of (2^63 - 1) / V, from a splitmix64 stream of the seed
 *      (so every token id times one is below 2^63). The reset token is the tokenizer's
 *      <|endoftext|> (config eos_token_id, GGUF ple.eos_token_id). HF carries the constants
 *      as the three I64 buffers after the shards, GGUF as u64 arrays; the config also says
 *      split_ngram_parts, ngram_vocab_size_base and make_ngram_vocab_size_divisible_by as a
 *      converter reads them (the buffers and shards are what loaders use).
 */
#include "mkmodel/mkmodel_int.h"
#include "kernels/kernels.h"
#include "model/model.h"
#include "format/format.h"
#include "sys/sys.h"
#include "base/base.h"

#include <stdio.h>
#include <string.h>

/* The --dtype spelling of a matrix dtype (q4_k_m / q5_k_m for the K-quant mixes). */
static const char *mk_dtype_opt_name(enum dtype dt)
{
    return dt == DTYPE_Q4_K ? "q4_k_m" : dt == DTYPE_Q5_K ? "q5_k_m" : dtype_info(dt)->name;
}

/* Generated at build time by tools/embed_template.sh; NULL when no bundle was installed. */
extern const char *const hs_chat_template_qwen35;

#define MK_TEMPLATE_MAX (4u << 20)
#define MK_MAX_EXPERTS 1024 /* llama.cpp's LLAMA_MAX_EXPERTS */
#define MK_DIM_MAX (1ll << 24)

/* ---- presets ----------------------------------------------------------------------------- */

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

/* ---- qwen4exp: hyper-connections, the indexer, the n-gram embedding (note 6) ------------- */

static bool mk_is_prime(uint64_t n)
{
    if (n < 2) return false;
    for (uint64_t d = 2; d * d <= n; d++)
        if (n % d == 0) return false;
    return true;
}

/* Moduli: successive primes from base on, one per head; offsets: their prefix sums. Returns
 * the rows they span. */
static uint64_t mk_ple_primes(struct mk_geom *g, uint64_t base)
{
    uint64_t p = base, off = 0;
    for (int64_t h = 0; h < g->ple_heads; h++) {
        while (!mk_is_prime(p)) p++;
        g->ple_mod[h] = p;
        g->ple_off[h] = off;
        off += p++;
    }
    return off;
}

static int64_t mk_gcd(int64_t a, int64_t b) { return b ? mk_gcd(b, a % b) : a; }

#define MK_PLE_BASE 101      /* tiny default: a few hundred rows */
#define MK_PLE_PAD 128       /* real files pad the table to a multiple of 128 rows */
#define MK_QSA_BLOCK 4       /* indexer_compress_ratio: tokens per pooled key block */

/* The qwen4exp geometry (or the refusal of its options for the other architectures). */
static int mk_geom_flash(const struct mkmodel_opts *o, const struct model_arch_info *a, struct mk_geom *g,
                         struct hs_err *err)
{
    const struct { const char *opt; int64_t v; } fl[] = {
        { "--hc-streams", o->hc_streams }, { "--hc-rank", o->hc_rank },
        { "--indexer-heads", o->indexer_heads }, { "--indexer-head-dim", o->indexer_head_dim },
        { "--qsa-budget", o->qsa_budget }, { "--ngram", o->ngram }, { "--ngram-heads", o->ngram_heads },
        { "--ngram-row", o->ngram_row }, { "--ngram-table-rows", o->ngram_table_rows },
        { "--ngram-shards", o->ngram_shards }, { "--ngram-conv-kernel", o->ngram_conv_kernel },
    };
    if (!a->flash_next) {
        for (size_t i = 0; i < HS_ARRAY_LEN(fl); i++)
            if (fl[i].v > 0)
                return hs_err_set(err, HS_ERR_INVALID, "%s applies to qwen4exp, not %s", fl[i].opt, a->name);
        return HS_OK;
    }
    for (size_t i = 0; i < HS_ARRAY_LEN(fl); i++)
        if (fl[i].v > MK_DIM_MAX && strcmp(fl[i].opt, "--ngram-table-rows")) /* rows: checked below */
            return hs_err_set(err, HS_ERR_INVALID, "%s %lld is too large (at most %lld)", fl[i].opt,
                              (long long)fl[i].v, MK_DIM_MAX);
    g->flash_next = true;
    g->hc_n = mk_pick(o->hc_streams, 4);
    g->hc_rank = mk_pick(o->hc_rank, 32);
    g->idx_heads = mk_pick(o->indexer_heads, 2);
    g->idx_dim = mk_pick(o->indexer_head_dim, g->head_dim);
    g->qsa_block = MK_QSA_BLOCK;
    g->qsa_budget = mk_pick(o->qsa_budget, 2048);
    g->ple_layer = 1; /* a GDN layer under every interval > 2, as in the real checkpoint */
    g->ple_ngram = mk_pick(o->ngram, 3);
    g->ple_per_order = mk_pick(o->ngram_heads, 2);
    g->ple_kernel = mk_pick(o->ngram_conv_kernel, 4);
    g->ple_shards = mk_pick(o->ngram_shards, 4);
    if (g->hc_n < 2 || g->hc_n > 64)
        return hs_err_set(err, HS_ERR_INVALID, "--hc-streams %lld: 2..64 (one stream has nothing to mix; "
                          "llama.cpp and the HF code refuse it)", (long long)g->hc_n);
    if (g->idx_dim < g->n_rot || g->idx_dim % 2)
        return hs_err_set(err, HS_ERR_INVALID, "--indexer-head-dim %lld: even and at least the %lld rotary "
                          "dims", (long long)g->idx_dim, (long long)g->n_rot);
    if (a->mrope && g->idx_dim < 32)
        return hs_err_set(err, HS_ERR_INVALID, "--indexer-head-dim %lld: %s needs at least 32 (the indexer's "
                          "rotary embedding is the attention's, whose M-RoPE sections [11,11,10] span 32 dims "
                          "in llama.cpp)", (long long)g->idx_dim, a->name);
    if (g->qsa_budget % g->qsa_block)
        return hs_err_set(err, HS_ERR_INVALID, "--qsa-budget %lld: a multiple of the %lld-token block",
                          (long long)g->qsa_budget, (long long)g->qsa_block);
    if (g->ple_ngram < 2 || g->ple_ngram > MODEL_PLE_MAX_NGRAM)
        return hs_err_set(err, HS_ERR_INVALID, "--ngram %lld: 2..%d", (long long)g->ple_ngram, MODEL_PLE_MAX_NGRAM);
    g->ple_heads = (g->ple_ngram - 1) * g->ple_per_order;
    if (g->ple_heads > MODEL_PLE_MAX_HEADS)
        return hs_err_set(err, HS_ERR_INVALID, "--ngram-heads %lld: (--ngram - 1) x --ngram-heads is %lld "
                          "heads (at most %d)", (long long)g->ple_per_order, (long long)g->ple_heads,
                          MODEL_PLE_MAX_HEADS);
    if (o->ngram_row > 0) g->ple_row = o->ngram_row;
    else if (g->n_embd % g->ple_heads == 0) g->ple_row = g->n_embd / g->ple_heads;
    else
        return hs_err_set(err, HS_ERR_INVALID, "--ngram-row: --hidden %lld is not a multiple of the %lld "
                          "n-gram heads; give the row width", (long long)g->n_embd, (long long)g->ple_heads);
    if (g->ple_kernel > 64)
        return hs_err_set(err, HS_ERR_INVALID, "--ngram-conv-kernel %lld: at most 64", (long long)g->ple_kernel);
    /* rows: the moduli's span padded as real files are, and whole HF shards */
    const int64_t pad = MK_PLE_PAD / mk_gcd(MK_PLE_PAD, g->ple_shards) * g->ple_shards;
    if (o->ngram_table_rows > 0) {
        const int64_t rows = o->ngram_table_rows;
        if (rows > INT32_MAX || rows % g->ple_shards || rows < 2 * g->ple_heads + 2)
            return hs_err_set(err, HS_ERR_INVALID, "--ngram-table-rows %lld: a multiple of --ngram-shards "
                              "%lld, at least %lld and at most %d", (long long)rows,
                              (long long)g->ple_shards, (long long)(2 * g->ple_heads + 2), INT32_MAX);
        /* the largest base whose primes fit (their span grows with the base): step down
         * from rows / heads to one that fits, then bisect up to the last that does */
        int64_t hi = rows / g->ple_heads + 1, lo = hi - 1;
        for (;;) {
            uint64_t span = mk_ple_primes(g, (uint64_t)lo);
            if (span <= (uint64_t)rows) break;
            hi = lo;
            lo -= HS_MAX(1, (int64_t)((span - (uint64_t)rows) / (uint64_t)g->ple_heads));
            if (lo < 2)
                return hs_err_set(err, HS_ERR_INVALID, "--ngram-table-rows %lld: too few for %lld heads",
                                  (long long)rows, (long long)g->ple_heads);
        }
        while (hi - lo > 1) { /* lo fits, hi does not */
            int64_t mid = lo + (hi - lo) / 2;
            if (mk_ple_primes(g, (uint64_t)mid) <= (uint64_t)rows) lo = mid;
            else hi = mid;
        }
        mk_ple_primes(g, (uint64_t)lo);
        g->ple_base = lo;
        g->ple_rows = rows;
    } else {
        g->ple_base = MK_PLE_BASE;
        uint64_t span = mk_ple_primes(g, MK_PLE_BASE);
        g->ple_rows = (int64_t)((span + (uint64_t)pad - 1) / (uint64_t)pad * (uint64_t)pad);
    }
    return HS_OK;
}

/* Hash multipliers (after the vocabulary is known): odd, below half of (2^63 - 1) / V so that
 * every token id times one stays below 2^63, drawn from a splitmix64 stream of the seed. */
static void mk_ple_mults(struct mk_geom *g, uint64_t seed)
{
    const uint64_t bound = (uint64_t)INT64_MAX / (uint64_t)g->n_vocab / 2;
    uint64_t st = seed ^ 0x5EEDF1A5C0FFEE11ull;
    for (int64_t j = 0; j < g->ple_ngram; j++) {
        st += 0x9E3779B97F4A7C15ull;
        uint64_t z = st;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        g->ple_mult[j] = (z % bound) | 1u;
    }
}

/* Geometry from preset + overrides, validated. n_vocab is set later from the tokenizer. */
static int mk_geom_init(const struct mkmodel_opts *o, const struct model_arch_info *a, struct mk_geom *g,
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
    /* qwen4exp's tiny trunk is 128 wide: 4 n-gram heads of 32 (rows of whole blocks) fill it */
    g->n_embd = mk_pick(o->n_embd, a->flash_next && !strcmp(p->name, "tiny") ? 128 : p->n_embd);
    g->n_head = mk_pick(o->n_head, p->n_head);
    g->n_head_kv = mk_pick(o->n_head_kv, p->n_head_kv);
    g->head_dim = mk_pick(o->head_dim, p->head_dim);
    g->hk = mk_pick(o->gdn_k_heads, p->gdn_k_heads);
    g->hv = mk_pick(o->gdn_v_heads, p->gdn_v_heads);
    g->dk = g->dv = mk_pick(o->gdn_head_dim, p->gdn_head_dim);
    g->conv_k = a->defaults.conv_kernel;
    g->full_attn_interval = a->defaults.full_attn_interval;
    g->rope_theta = (float)a->defaults.rope_theta;
    g->rms_eps = (float)a->defaults.rms_eps;
    g->n_ctx = p->n_ctx;
    g->tied = a->tied;
    if (a->moe) {
        if (o->n_ff > 0)
            return hs_err_set(err, HS_ERR_INVALID, "--ffn sets the dense FFN width; %s has experts "
                              "(use --expert-ffn)", a->name);
        g->n_expert = mk_pick(o->n_expert, p->n_expert);
        g->n_expert_used = mk_pick(o->n_expert_used, p->n_expert_used);
        g->n_ff_exp = mk_pick(o->n_ff_exp, p->n_ff_exp);
        g->n_ff_shexp = g->n_ff_exp;
    } else {
        if (o->n_expert > 0 || o->n_expert_used > 0 || o->n_ff_exp > 0)
            return hs_err_set(err, HS_ERR_INVALID, "--experts, --experts-used and --expert-ffn apply "
                              "to qwen35moe and qwen3next, not %s", a->name);
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
                          a->name);
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
    g->n_rot = (int64_t)((double)g->head_dim * a->defaults.partial_rotary_factor); /* as the loader */

    int rc = mk_geom_flash(o, a, g, err);
    if (rc) return rc;

    const char *kname = o->ud_mix ? "ud_q4_k_xl" : mk_dtype_opt_name(o->dtype);
    if ((o->dtype == DTYPE_Q4_K || o->dtype == DTYPE_Q5_K) && g->n_expert == 8)
        return hs_err_set(err, HS_ERR_INVALID, "--dtype %s with --experts 8: llama.cpp's rule for "
                          "8-expert models (Q5_K attn_output, Q8_0 attn_k / attn_v) is not "
                          "implemented by mkmodel", kname);
    if (dtype_info(o->dtype)->block_elems > 1) {
        /* Every matrix row (the innermost dimension) must hold whole 32-value blocks (the
         * Q8_0 fallback of q4_k_m rows that are not whole 256-value super-blocks, IQ4_NL
         * that of iq4_xs). */
        const struct { const char *opt; int64_t v; } rows[] = {
            { "--hidden", g->n_embd }, { "--heads x --head-dim", g->n_head * g->head_dim },
            { "--gdn-v-heads x --gdn-head-dim", g->hv * g->dv }, { "--ffn", g->n_ff },
            { "--expert-ffn", g->n_ff_exp }, { "--hc-rank", g->hc_rank }, { "--ngram-row", g->ple_row },
        };
        for (size_t i = 0; i < HS_ARRAY_LEN(rows); i++)
            if (rows[i].v % KERN_Q8_BLOCK)
                return hs_err_set(err, HS_ERR_INVALID, "--dtype %s needs %s (%lld) to be a "
                                  "multiple of %d", kname, rows[i].opt, (long long)rows[i].v,
                                  KERN_Q8_BLOCK);
    }
    return HS_OK;
}

/* ---- config.json ------------------------------------------------------------------------ */

static void mk_config_text_fields(struct jsonw *w, const struct model_arch_info *a, const struct mk_geom *g,
                                  const struct mktok *t, const char *torch_dtype)
{
    if (a->hf_text_model_type) {
        jsonw_key(w, "model_type");
        jsonw_str(w, a->hf_text_model_type);
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
    jsonw_key(w, "rms_norm_eps"); jsonw_double(w, a->defaults.rms_eps);
    if (a->mrope) {
        jsonw_key(w, "rope_parameters");
        jsonw_obj_begin(w);
        jsonw_key(w, "rope_type"); jsonw_str(w, "default");
        jsonw_key(w, "rope_theta"); jsonw_double(w, g->rope_theta);
        jsonw_key(w, "partial_rotary_factor"); jsonw_double(w, a->defaults.partial_rotary_factor);
        jsonw_key(w, "mrope_section");
        jsonw_arr_begin(w);
        jsonw_int(w, 11); jsonw_int(w, 11); jsonw_int(w, 10);
        jsonw_arr_end(w);
        jsonw_key(w, "mrope_interleaved"); jsonw_bool(w, true);
        jsonw_obj_end(w);
    } else { /* Qwen3-Next's older spelling: top-level rope fields */
        jsonw_key(w, "rope_theta"); jsonw_double(w, g->rope_theta);
        jsonw_key(w, "partial_rotary_factor"); jsonw_double(w, a->defaults.partial_rotary_factor);
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
        if (!a->norm_topk_always) { /* the architecture reads the key (Qwen3-Next) */
            jsonw_key(w, "norm_topk_prob"); jsonw_bool(w, true);
            jsonw_key(w, "decoder_sparse_step"); jsonw_int(w, 1);
        }
    }
    if (g->flash_next) {
        jsonw_key(w, "output_gate_type"); jsonw_str(w, "sigmoid");
        jsonw_key(w, "hc_count"); jsonw_int(w, g->hc_n);
        jsonw_key(w, "hc_lowrank"); jsonw_int(w, g->hc_rank);
        jsonw_key(w, "indexer_n_heads"); jsonw_int(w, g->idx_heads);
        jsonw_key(w, "indexer_kv_heads"); jsonw_int(w, 1);
        jsonw_key(w, "indexer_head_dim"); jsonw_int(w, g->idx_dim);
        jsonw_key(w, "indexer_budget"); jsonw_int(w, g->qsa_budget);
        jsonw_key(w, "indexer_compress_ratio"); jsonw_int(w, g->qsa_block);
        jsonw_key(w, "ple_layer_ids"); /* 1-based */
        jsonw_arr_begin(w);
        jsonw_int(w, g->ple_layer + 1);
        jsonw_arr_end(w);
        jsonw_key(w, "ple_embed_dim"); jsonw_int(w, g->ple_heads * g->ple_row);
        jsonw_key(w, "ple_conv_kernel_size"); jsonw_int(w, g->ple_kernel);
        jsonw_key(w, "ngram_size"); jsonw_int(w, g->ple_ngram);
        jsonw_key(w, "heads_per_ngram"); jsonw_int(w, g->ple_per_order);
        jsonw_key(w, "ngram_vocab_size_base"); jsonw_int(w, g->ple_base);
        jsonw_key(w, "make_ngram_vocab_size_divisible_by"); jsonw_int(w, 128);
        jsonw_key(w, "split_ngram_parts"); jsonw_int(w, g->ple_shards);
    }
    jsonw_key(w, "mlp_only_layers");
    jsonw_arr_begin(w);
    jsonw_arr_end(w);
    jsonw_key(w, "mtp_num_hidden_layers"); jsonw_int(w, 0);
    jsonw_key(w, "mtp_use_dedicated_embeddings"); jsonw_bool(w, false);
    jsonw_key(w, "tie_word_embeddings"); jsonw_bool(w, g->tied);
    jsonw_key(w, "eos_token_id"); jsonw_int(w, t->eos_id);
    if (t->pad_id >= 0) { jsonw_key(w, "pad_token_id"); jsonw_int(w, t->pad_id); }
    jsonw_key(w, a->hf_text_model_type ? "dtype" : "torch_dtype"); jsonw_str(w, torch_dtype);
}

static char *mk_config_json(const struct model_arch_info *a, const struct mk_geom *g, const struct mktok *t,
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
    jsonw_str(&w, a->hf_architecture);
    jsonw_arr_end(&w);
    jsonw_key(&w, "model_type");
    jsonw_str(&w, a->hf_model_type);
    if (a->hf_text_model_type) {
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

static void mk_gguf_meta(struct gguf_writer *w, const struct model_arch_info *a, const struct mk_geom *g,
                         const char *preset, enum dtype dt)
{
    /* llama_ftype: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q8_0 7, MOSTLY_Q4_K_M 15, MOSTLY_Q5_K_M 17,
     * MOSTLY_BF16 32, MOSTLY_Q5_1 9, MOSTLY_IQ4_NL 25, MOSTLY_IQ4_XS 30 */
    uint32_t ftype = dt == DTYPE_F16    ? 1
                     : dt == DTYPE_Q8_0 ? 7
                     : dt == DTYPE_Q4_K ? 15
                     : dt == DTYPE_Q5_K ? 17
                     : dt == DTYPE_Q5_1 ? 9
                     : dt == DTYPE_IQ4_NL ? 25
                     : dt == DTYPE_IQ4_XS ? 30
                     : dt == DTYPE_BF16 ? 32
                                        : 0;
    char key[96], name[96];
#define KEY(k) (snprintf(key, sizeof(key), "%s." k, a->name), key)
    gguf_writer_set_str(w, "general.architecture", a->name);
    snprintf(name, sizeof(name), "headstart mkmodel %s %s", a->name, preset);
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
    if (g->flash_next) {
        gguf_writer_set_u32(w, KEY("hyper_connection.count"), (uint32_t)g->hc_n);
        gguf_writer_set_u32(w, KEY("hyper_connection.low_rank"), (uint32_t)g->hc_rank);
        gguf_writer_set_u32(w, KEY("attention.indexer.head_count"), (uint32_t)g->idx_heads);
        gguf_writer_set_u32(w, KEY("attention.indexer.key_length"), (uint32_t)g->idx_dim);
        gguf_writer_set_u32(w, KEY("attention.indexer.top_k"), (uint32_t)g->qsa_budget); /* tokens */
        int32_t ratios[MODEL_MAX_LAYERS];
        for (int64_t il = 0; il < g->n_layer; il++) ratios[il] = mk_layer_is_full(g, il) ? (int32_t)g->qsa_block : 0;
        gguf_writer_set_arr_i32(w, KEY("attention.compress_ratios"), ratios, (uint64_t)g->n_layer);
        const int32_t ple_layer = (int32_t)g->ple_layer; /* 0-based */
        gguf_writer_set_arr_i32(w, KEY("ple.layers"), &ple_layer, 1);
        gguf_writer_set_u32(w, KEY("ple.ngram_size"), (uint32_t)g->ple_ngram);
        gguf_writer_set_u32(w, KEY("ple.heads_per_ngram"), (uint32_t)g->ple_per_order);
        gguf_writer_set_u32(w, KEY("ple.conv_kernel"), (uint32_t)g->ple_kernel);
        gguf_writer_set_u32(w, KEY("ple.eos_token_id"), (uint32_t)g->ple_eos);
        gguf_writer_set_u32(w, KEY("embedding_length_per_layer_input"), (uint32_t)g->ple_row);
        /* u64 arrays: the multipliers pass 2^32 (llama.cpp reads them at that width) */
        const struct { const char *k; const uint64_t *v; int64_t n; } arrs[] = {
            { "ple.layer_multipliers", g->ple_mult, g->ple_ngram },
            { "ple.head_offsets", g->ple_off, g->ple_heads },
            { "ple.head_vocab_sizes", g->ple_mod, g->ple_heads },
        };
        for (size_t k = 0; k < HS_ARRAY_LEN(arrs); k++) {
            struct gguf_value items[MODEL_PLE_MAX_HEADS], v = { .type = GGUF_TYPE_ARRAY };
            for (int64_t i = 0; i < arrs[k].n; i++)
                items[i] = (struct gguf_value){ .type = GGUF_TYPE_UINT64, .v.u = arrs[k].v[i] };
            v.v.arr.elem_type = GGUF_TYPE_UINT64;
            v.v.arr.n = (uint64_t)arrs[k].n;
            v.v.arr.items = items;
            snprintf(key, sizeof(key), "%s.%s", a->name, arrs[k].k);
            gguf_writer_set_value(w, key, &v);
        }
    }
#undef KEY
}

/* ---- writing ------------------------------------------------------------------------------ */

static int mk_write_hf(const char *dir, const struct mk_plan *p, const struct model_arch_info *a,
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

static int mk_write_gguf(const char *path, const struct mk_plan *p, const struct model_arch_info *a,
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
    if ((unsigned)o->dtype >= DTYPE_COUNT || !dtype_info(o->dtype)->compute || o->dtype == DTYPE_Q6_K ||
        (o->ud_mix && o->dtype != DTYPE_Q8_0))
        return hs_err_set(err, HS_ERR_INVALID, "--dtype must be f32, f16, bf16, q8_0, q4_k_m, q5_k_m, "
                          "q5_1, iq4_nl or iq4_xs");
    const bool gguf = mk_is_gguf_path(o->out);
    if (!gguf && dtype_info(o->dtype)->block_elems > 1)
        return hs_err_set(err, HS_ERR_INVALID, "--dtype %s needs a .gguf --out (safetensors has "
                          "no %s; use f32, f16 or bf16 for a Hugging Face directory)",
                          o->ud_mix ? "ud_q4_k_xl" : mk_dtype_opt_name(o->dtype),
                          o->dtype == DTYPE_Q8_0 && !o->ud_mix ? "Q8_0" : "block types");
    struct model_arch_info info;
    model_arch_info(o->arch, &info);
    const struct model_arch_info *a = &info;
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
    if (g.flash_next) {
        g.ple_eos = t.eos_id; /* <|endoftext|> resets the n-gram context, as in the real config */
        mk_ple_mults(&g, o->seed);
    }

    struct mk_plan plan;
    rc = mk_tensors_plan(&plan, a, &g, o->dtype, o->ud_mix, gguf, err);
    if (rc == HS_OK) {
        mk_plan_run(&plan, &g, o->seed);
        rc = gguf ? mk_write_gguf(o->out, &plan, a, &g, &t, tpl, preset->name, o->ud_mix ? DTYPE_Q4_K : o->dtype, err)
                  : mk_write_hf(o->out, &plan, a, &g, &t, tpl, o->dtype, err);
    }
    mk_plan_free(&plan);
    mktok_free(&t);
    hs_free(tpl_owned);
    return rc;
}
