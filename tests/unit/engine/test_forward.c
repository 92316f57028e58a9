/* test_forward.c — the forward pass's exactness (docs/DESIGN.md §4), memcmp with no tolerance:
 * for every architecture and weight format (tiny mkmodel presets: f32 / q8_0 / q4_k_m /
 * q5_k_m / q5_1 / iq4_nl / iq4_xs GGUF and bf16 HF, Hk != Hv, MoE), the logits of every position of a 100-token prompt are identical
 * whatever the chunking (1, 7, 64, whole, internal n_batch steps) and thread count (1, 2);
 * a snapshot captured in flight at a random position equals the state of a forward that
 * stopped there, and a sequence restored from a blob (or from the snapshot) continues with
 * identical logits; seeded sampling is identical likewise. Plus the error paths: bad
 * tokens, n_ctx, corrupt / foreign / truncated blobs leave the sequence unchanged. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_int.h"
#include "mkmodel/mkmodel.h"
#include "unit/cpu_level.h"

#define N_PROMPT 100

static char tmpdir[64];

static void fw_setup(void)
{
    strcpy(tmpdir, "/tmp/hs-fwd.XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
    char p[128];
    snprintf(p, sizeof(p), "%s/chat.jinja", tmpdir);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    fputs("{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}", f);
    fclose(f);
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

static void fw_teardown(void) { nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS); }

struct spec {
    enum model_arch arch;
    enum dtype dtype;
    bool gguf;
    int64_t hk, hv; /* 0 = preset (tiny: 2 / 4) */
    uint64_t seed;
};

/* Write a tiny model of the spec into tmpdir and load it. */
static struct model *make_model(const struct spec *sp, const char *name)
{
    char out[160], tpl[128];
    snprintf(out, sizeof(out), "%s/%s%s", tmpdir, name, sp->gguf ? ".gguf" : "");
    snprintf(tpl, sizeof(tpl), "%s/chat.jinja", tmpdir);
    struct mkmodel_opts o;
    mkmodel_opts_default(&o);
    o.arch = sp->arch;
    o.dtype = sp->dtype;
    o.seed = sp->seed ? sp->seed : 7;
    o.chat_template = tpl;
    if (sp->hk) o.gdn_k_heads = sp->hk;
    if (sp->hv) o.gdn_v_heads = sp->hv;
    if (sp->dtype == DTYPE_Q4_K || sp->dtype == DTYPE_Q5_K || sp->dtype == DTYPE_IQ4_XS) {
        /* q4_k_m / q5_k_m: rows of whole 256-value super-blocks (Q4_K / Q6_K), except the experts'
         * down projection (K = 32: the Q8_0 fallback), so one model mixes all three */
        o.n_embd = 256;
        if (sp->arch == MODEL_ARCH_QWEN35) o.n_ff = 512;
        o.head_dim = 64;
        o.gdn_head_dim = 64;
    }
    o.out = out;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(mkmodel_write(&o, &err), 0, "mkmodel: %s", err.msg);
    struct model *m = NULL;
    cr_assert_eq(model_load(out, &m, &err), 0, "load: %s", err.msg);
    return m;
}

static struct engine *make_engine(const struct model *m, int threads, int64_t n_batch)
{
    struct engine_opts o;
    engine_opts_default(&o);
    o.n_threads = threads;
    o.n_batch = n_batch;
    struct engine *e = NULL;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(engine_new(m, &o, &e, &err), 0, "engine_new: %s", err.msg);
    return e;
}

static void prompt(int32_t *ids, int64_t n, int64_t V, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    for (int64_t i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        ids[i] = (int32_t)(x % (uint64_t)V);
    }
}

/* Logits of every position of ids[0..n), forwarded from s's position in chunks. */
static void run_chunks(struct engine *e, struct seq *s, const int32_t *ids, int64_t n, int64_t chunk,
                       float *logits)
{
    int64_t V = e->g.V;
    int64_t *rows = malloc((size_t)n * sizeof(int64_t));
    struct hs_err err;
    hs_err_clear(&err);
    for (int64_t i0 = 0; i0 < n; i0 += chunk) {
        int64_t c = chunk < n - i0 ? chunk : n - i0;
        for (int64_t i = 0; i < c; i++) rows[i] = i;
        cr_assert_eq(engine_forward(e, s, ids + i0, c, NULL, 0, rows, (int)c, logits + i0 * V, &err), 0,
                     "forward: %s", err.msg);
    }
    free(rows);
}

static float *logits_of(const struct model *m, const int32_t *ids, int64_t n, int64_t chunk,
                        int threads, int64_t n_batch)
{
    struct engine *e = make_engine(m, threads, n_batch);
    struct seq *s = seq_new(e, n);
    float *l = malloc((size_t)(n * e->g.V) * sizeof(float));
    run_chunks(e, s, ids, n, chunk, l);
    cr_assert_eq(seq_pos(s), n);
    seq_free(s);
    engine_free(e);
    return l;
}

/* First position whose row differs, or -1. */
static int64_t first_diff(const float *a, const float *b, int64_t n, int64_t V)
{
    for (int64_t i = 0; i < n; i++)
        if (memcmp(a + i * V, b + i * V, (size_t)V * sizeof(float))) return i;
    return -1;
}

/* The exactness sweep for one model spec. */
static void sweep(const struct spec *sp)
{
    struct model *m = make_model(sp, "m");
    int64_t V = model_hparams(m)->n_vocab;
    int32_t ids[N_PROMPT];
    prompt(ids, N_PROMPT, V, sp->seed + 3);
    float *ref = logits_of(m, ids, N_PROMPT, N_PROMPT, 1, 512);
    bool finite = true;
    for (int64_t i = 0; i < N_PROMPT * V; i++) finite = finite && ref[i] == ref[i] && ref[i] - ref[i] == 0.0f;
    cr_assert(finite, "reference logits are not all finite");
    static const struct { int64_t chunk; int threads; int64_t n_batch; } runs[] = {
        { 1, 1, 512 }, { 7, 1, 512 }, { 64, 1, 512 }, { N_PROMPT, 2, 512 }, { 1, 2, 512 },
        { 7, 2, 512 }, { 64, 2, 512 }, { N_PROMPT, 1, 16 }, { N_PROMPT, 2, 5 },
    };
    for (size_t r = 0; r < sizeof(runs) / sizeof(runs[0]); r++) {
        float *l = logits_of(m, ids, N_PROMPT, runs[r].chunk, runs[r].threads, runs[r].n_batch);
        int64_t d = first_diff(ref, l, N_PROMPT, V);
        cr_assert_eq(d, -1, "chunk %lld, %d threads, n_batch %lld: logits of position %lld differ",
                     (long long)runs[r].chunk, runs[r].threads, (long long)runs[r].n_batch, (long long)d);
        free(l);
    }

    /* capture at p during a whole-prompt forward (2 threads) */
    struct engine *e = make_engine(m, 2, 512);
    int64_t p = 1 + (int64_t)((sp->seed * 37 + 11) % (N_PROMPT - 2)); /* 1 .. N-2 */
    uint64_t nb = engine_snapshot_bytes(e);
    cr_assert_gt(nb, 0);
    struct engine_capture cap[2] = { { p, calloc(1, nb), false }, { N_PROMPT + 5, NULL, false } };
    struct seq *a = seq_new(e, N_PROMPT);
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(engine_forward(e, a, ids, N_PROMPT, cap, 2, NULL, 0, NULL, &err), 0, "%s", err.msg);
    cr_assert(cap[0].filled);
    cr_assert(!cap[1].filled);

    /* a forward that stops at p (chunks of 7, 1 thread's engine is another engine: same
     * fingerprint) holds exactly the captured state */
    struct engine *e1 = make_engine(m, 1, 512);
    cr_assert_eq(engine_fingerprint(e1), engine_fingerprint(e));
    struct seq *b = seq_new(e1, N_PROMPT);
    float *lb = malloc((size_t)(N_PROMPT * V) * sizeof(float));
    run_chunks(e1, b, ids, p, 7, lb);
    cr_assert_eq(memcmp(seq_gdn_state(b), cap[0].buf, nb), 0, "captured snapshot differs from the state at %lld", (long long)p);

    /* blob restore into a fresh sequence of the other engine, continue */
    void *blob;
    uint64_t blen;
    cr_assert_eq(seq_save(b, &blob, &blen, &err), 0);
    struct seq *c = seq_new(e, N_PROMPT);
    cr_assert_eq(seq_restore(c, blob, blen, &err), 0, "%s", err.msg);
    cr_assert_eq(seq_pos(c), p);
    float *lc = malloc((size_t)(N_PROMPT * V) * sizeof(float));
    run_chunks(e, c, ids + p, N_PROMPT - p, 7, lc);
    int64_t d = first_diff(ref + p * V, lc, N_PROMPT - p, V);
    cr_assert_eq(d, -1, "after restore at %lld: position %lld differs", (long long)p, (long long)(p + d));

    /* restore via the captured snapshot: KV from the blob, GDN state overwritten by the
     * capture (after scrambling it so the capture must be what counts) */
    struct seq *f = seq_new(e1, N_PROMPT);
    cr_assert_eq(seq_restore(f, blob, blen, &err), 0, "%s", err.msg);
    memset(seq_gdn_state(f), 0x3f, nb);
    memcpy(seq_gdn_state(f), cap[0].buf, nb);
    run_chunks(e1, f, ids + p, N_PROMPT - p, 64, lc);
    d = first_diff(ref + p * V, lc, N_PROMPT - p, V);
    cr_assert_eq(d, -1, "after snapshot restore at %lld: position %lld differs", (long long)p, (long long)(p + d));

    /* seeded sampling from two differently built states gives the same tokens */
    struct sampler_opts so;
    sampler_opts_default(&so);
    so.temperature = 0.9f;
    so.top_k = 0;
    so.top_p = 1.0f;
    so.seed = 99;
    int32_t gen[2][12];
    struct seq *gs[2] = { a, c };
    struct engine *ge[2] = { e, e };
    float *row = malloc((size_t)V * sizeof(float));
    for (int k = 0; k < 2; k++) {
        /* both are at N_PROMPT now (a cold, c restored); their last logits are ref's
         * last row; each continues in a copy with room for the generated tokens */
        struct sampler *smp = sampler_new(&so, V);
        cr_assert_not_null(smp);
        memcpy(row, ref + (N_PROMPT - 1) * V, (size_t)V * sizeof(float));
        struct seq *gsq = seq_new(ge[k], N_PROMPT + 12);
        void *bb;
        uint64_t bl;
        cr_assert_eq(seq_save(gs[k], &bb, &bl, &err), 0);
        cr_assert_eq(seq_restore(gsq, bb, bl, &err), 0, "%s", err.msg);
        hs_free(bb);
        for (int t = 0; t < 12; t++) {
            gen[k][t] = sampler_sample(smp, row);
            sampler_accept(smp, gen[k][t]);
            int64_t r0 = 0;
            cr_assert_eq(engine_forward(ge[k], gsq, &gen[k][t], 1, NULL, 0, &r0, 1, row, &err), 0, "%s", err.msg);
        }
        sampler_free(smp);
        seq_free(gsq);
    }
    cr_assert_eq(memcmp(gen[0], gen[1], sizeof(gen[0])), 0, "seeded sampling differs");
    free(row);
    hs_free(blob);
    free(cap[0].buf);
    free(lb);
    free(lc);
    seq_free(a);
    seq_free(b);
    seq_free(c);
    seq_free(f);
    engine_free(e1);
    engine_free(e);
    free(ref);
    model_free(m);
}

TestSuite(forward_exact, .init = fw_setup, .fini = fw_teardown, .timeout = 120);

Test(forward_exact, qwen35_f32_gguf) { struct spec s = { MODEL_ARCH_QWEN35, DTYPE_F32, true, 0, 0, 1 }; sweep(&s); }
Test(forward_exact, qwen35_q8_0_gguf) { struct spec s = { MODEL_ARCH_QWEN35, DTYPE_Q8_0, true, 0, 0, 2 }; sweep(&s); }
Test(forward_exact, qwen35_bf16_hf) { struct spec s = { MODEL_ARCH_QWEN35, DTYPE_BF16, false, 0, 0, 3 }; sweep(&s); }
Test(forward_exact, qwen35_hk1_hv3_f32_gguf) { struct spec s = { MODEL_ARCH_QWEN35, DTYPE_F32, true, 1, 3, 4 }; sweep(&s); }
Test(forward_exact, qwen35moe_q8_0_gguf) { struct spec s = { MODEL_ARCH_QWEN35MOE, DTYPE_Q8_0, true, 0, 0, 5 }; sweep(&s); }
Test(forward_exact, qwen35moe_bf16_hf) { struct spec s = { MODEL_ARCH_QWEN35MOE, DTYPE_BF16, false, 0, 0, 6 }; sweep(&s); }
Test(forward_exact, qwen3next_f32_gguf) { struct spec s = { MODEL_ARCH_QWEN3NEXT, DTYPE_F32, true, 0, 0, 7 }; sweep(&s); }
Test(forward_exact, qwen3next_q8_0_gguf) { struct spec s = { MODEL_ARCH_QWEN3NEXT, DTYPE_Q8_0, true, 0, 0, 8 }; sweep(&s); }
Test(forward_exact, qwen35_q4_k_m_gguf) { struct spec s = { MODEL_ARCH_QWEN35, DTYPE_Q4_K, true, 0, 0, 14 }; sweep(&s); }
Test(forward_exact, qwen35moe_q4_k_m_gguf) { struct spec s = { MODEL_ARCH_QWEN35MOE, DTYPE_Q4_K, true, 0, 0, 15 }; sweep(&s); }
/* Hk == Hv: a grouped qwen3next file with Hk != Hv needs ssm_out's columns reordered in
 * Dv blocks, which K-quant super-blocks of 256 do not allow (the loader says so) */
Test(forward_exact, qwen3next_q4_k_m_gguf) { struct spec s = { MODEL_ARCH_QWEN3NEXT, DTYPE_Q4_K, true, 2, 2, 16 }; sweep(&s); }
Test(forward_exact, qwen35_q5_k_m_gguf) { struct spec s = { MODEL_ARCH_QWEN35, DTYPE_Q5_K, true, 0, 0, 19 }; sweep(&s); }
Test(forward_exact, qwen35moe_q5_k_m_gguf) { struct spec s = { MODEL_ARCH_QWEN35MOE, DTYPE_Q5_K, true, 0, 0, 20 }; sweep(&s); }
/* [F12] Q5_1, IQ4_NL (qwen3next Hk != Hv: 32-value blocks reorder in Dv blocks) and IQ4_XS
 * (IQ4_NL where a row is not whole super-blocks) */
Test(forward_exact, qwen35_q5_1_gguf) { struct spec s = { MODEL_ARCH_QWEN35, DTYPE_Q5_1, true, 0, 0, 41 }; sweep(&s); }
Test(forward_exact, qwen35moe_iq4_nl_gguf) { struct spec s = { MODEL_ARCH_QWEN35MOE, DTYPE_IQ4_NL, true, 0, 0, 42 }; sweep(&s); }
Test(forward_exact, qwen3next_iq4_nl_gguf_hk1_hv2) { struct spec s = { MODEL_ARCH_QWEN3NEXT, DTYPE_IQ4_NL, true, 1, 2, 43 }; sweep(&s); }
Test(forward_exact, qwen35moe_iq4_xs_gguf) { struct spec s = { MODEL_ARCH_QWEN35MOE, DTYPE_IQ4_XS, true, 0, 0, 44 }; sweep(&s); }
Test(forward_exact, qwen3next_bf16_hf_hk1_hv2) { struct spec s = { MODEL_ARCH_QWEN3NEXT, DTYPE_BF16, false, 1, 2, 9 }; sweep(&s); }

/* Every kernel variant that runs here (cpu_level.h) gives the same logits, bit for bit, as
 * the scalar reference (kernels.h: the variants keep the scalar accumulation orders); the
 * fingerprint still names the variant. One test per variant, a skip where it does not run. */
static const char *const fw_variants[] = { "avx2", "avxvnni", "avx512vnni", "avx512" };

ParameterizedTestParameters(forward_exact, variants_equal_scalar)
{
    static int idx[] = { 0, 1, 2, 3 };
    return cr_make_param_array(int, idx, HS_ARRAY_LEN(idx));
}

ParameterizedTest(int *vi, forward_exact, variants_equal_scalar)
{
    const char *name = fw_variants[*vi];
    cpu_level_ops_or_skip(name);
    static const struct spec sps[] = { { MODEL_ARCH_QWEN35, DTYPE_Q8_0, true, 0, 0, 11 },
                                       { MODEL_ARCH_QWEN35MOE, DTYPE_BF16, false, 0, 0, 12 },
                                       { MODEL_ARCH_QWEN3NEXT, DTYPE_F32, true, 0, 0, 13 },
                                       { MODEL_ARCH_QWEN35MOE, DTYPE_Q4_K, true, 0, 0, 18 },
                                       { MODEL_ARCH_QWEN35, DTYPE_Q5_K, true, 0, 0, 21 },
                                       { MODEL_ARCH_QWEN35, DTYPE_Q5_1, true, 0, 0, 45 },
                                       { MODEL_ARCH_QWEN35MOE, DTYPE_IQ4_NL, true, 0, 0, 46 },
                                       { MODEL_ARCH_QWEN3NEXT, DTYPE_IQ4_XS, true, 2, 2, 47 } };
    for (size_t k = 0; k < sizeof(sps) / sizeof(sps[0]); k++) {
        char nm[16];
        snprintf(nm, sizeof(nm), "v%zu", k);
        struct model *m = make_model(&sps[k], nm);
        int64_t V = model_hparams(m)->n_vocab, n = 40;
        int32_t ids[40];
        prompt(ids, n, V, 17 + k);
        struct hs_err err;
        hs_err_clear(&err);
        struct engine *es = make_engine(m, 2, 512);
        cr_assert_eq(engine_force_variant(es, "scalar", &err), 0, "%s", err.msg);
        cr_assert_str_eq(engine_kernel_variant(es), "scalar");
        cr_assert_neq(engine_force_variant(es, "sse9", &err), 0);
        float *ref = malloc((size_t)(n * V) * sizeof(float)), *l = malloc((size_t)(n * V) * sizeof(float));
        struct seq *s = seq_new(es, n);
        run_chunks(es, s, ids, n, 7, ref);
        struct engine *ev = make_engine(m, 2, 512);
        hs_err_clear(&err);
        cr_assert_eq(engine_force_variant(ev, name, &err), 0, "%s", err.msg);
        cr_assert_str_eq(engine_kernel_variant(ev), name);
        cr_assert_neq(engine_fingerprint(ev), engine_fingerprint(es));
        struct seq *sv = seq_new(ev, n);
        run_chunks(ev, sv, ids, n, 13, l);
        int64_t d = first_diff(ref, l, n, V);
        cr_assert_eq(d, -1, "%s vs scalar, model %zu: position %lld differs", name, k, (long long)d);
        seq_free(sv);
        engine_free(ev);
        free(ref);
        free(l);
        seq_free(s);
        engine_free(es);
        model_free(m);
    }
}

/* A new engine runs the table cpu_level_expected() names: the CPU's best, or the lower
 * HEADSTART_CPU (make test runs this suite natively and forced to avx2 and scalar), and a
 * variant above it cannot be forced. */
Test(forward_exact, engine_uses_the_expected_table)
{
    struct spec sp = { MODEL_ARCH_QWEN35, DTYPE_F32, true, 0, 0, 22 };
    struct model *m = make_model(&sp, "lvl");
    struct engine *e = make_engine(m, 1, 16);
    const char *want = cpu_level_expected();
    cr_assert_str_eq(engine_kernel_variant(e), want, "HEADSTART_CPU=%s", getenv("HEADSTART_CPU") ? getenv("HEADSTART_CPU") : "");
    cr_assert_eq(e->ops, kern_ops_for(want));
    cr_log_info("engine kernel table: %s", want);
    static const char *const all[] = { "scalar", "avx2", "avxvnni", "avx512vnni", "avx512" };
    for (size_t i = 0; i < HS_ARRAY_LEN(all); i++) {
        struct hs_err err;
        hs_err_clear(&err);
        bool allowed = cpu_level_should_run(all[i]);
        cr_assert_eq(engine_force_variant(e, all[i], &err) == 0, allowed, "force %s under %s", all[i], want);
    }
    engine_free(e);
    model_free(m);
}

/* ---- several sequences per step (engine_forward_batch, [F10]) ------------------------------
 * Five sequences of different lengths (one of a single token) go through steps that mix them
 * at random: any subset, any order, chunks of 1 (decode) to 20 tokens, within n_batch. Every
 * position's logits, an in-flight capture and the final state of each equal, bit for bit,
 * those of the sequence run alone; for 1 and 2 threads and a small n_batch. */
#define BATCH_SEQS 5

static uint64_t xs(uint64_t *x)
{
    *x ^= *x << 13; *x ^= *x >> 7; *x ^= *x << 17;
    return *x;
}

static void batch_sweep(const struct spec *sp)
{
    struct model *m = make_model(sp, "b");
    int64_t V = model_hparams(m)->n_vocab;
    static const int64_t len[BATCH_SEQS] = { 37, N_PROMPT, 1, 64, 90 };
    int32_t ids[BATCH_SEQS][N_PROMPT];
    float *ref[BATCH_SEQS];
    void *ref_cap[BATCH_SEQS], *ref_state[BATCH_SEQS];
    int64_t cap_pos[BATCH_SEQS];
    struct hs_err err;
    hs_err_clear(&err);
    struct engine *e1 = make_engine(m, 1, 512);
    uint64_t nb = engine_snapshot_bytes(e1);
    for (int k = 0; k < BATCH_SEQS; k++) {
        prompt(ids[k], len[k], V, sp->seed * 10 + (uint64_t)k);
        ref[k] = logits_of(m, ids[k], len[k], len[k], 1, 512);
        cap_pos[k] = 1 + (int64_t)(((uint64_t)k * 31 + sp->seed) % (uint64_t)len[k]); /* 1 .. len */
        struct engine_capture c = { cap_pos[k], calloc(1, nb), false };
        struct seq *s = seq_new(e1, len[k]);
        cr_assert_eq(engine_forward(e1, s, ids[k], len[k], &c, 1, NULL, 0, NULL, &err), 0, "%s", err.msg);
        cr_assert(c.filled);
        ref_cap[k] = c.buf;
        ref_state[k] = malloc(nb);
        memcpy(ref_state[k], seq_gdn_state(s), nb);
        seq_free(s);
    }
    static const struct { int threads; int64_t n_batch; uint64_t seed; } runs[] = {
        { 1, 512, 1 }, { 2, 512, 2 }, { 2, 24, 3 }, { 1, 9, 4 },
    };
    for (size_t r = 0; r < HS_ARRAY_LEN(runs); r++) {
        struct engine *e = make_engine(m, runs[r].threads, runs[r].n_batch);
        struct seq *sq[BATCH_SEQS];
        struct engine_capture caps[BATCH_SEQS];
        for (int k = 0; k < BATCH_SEQS; k++) {
            sq[k] = seq_new(e, len[k]);
            caps[k] = (struct engine_capture){ cap_pos[k], calloc(1, nb), false };
        }
        float *logits = malloc((size_t)(runs[r].n_batch * V) * sizeof(float));
        int64_t rows[BATCH_SEQS][N_PROMPT];
        for (int64_t i = 0; i < N_PROMPT; i++)
            for (int k = 0; k < BATCH_SEQS; k++) rows[k][i] = i;
        uint64_t x = runs[r].seed * 0x9e3779b97f4a7c15ull + 5;
        int steps = 0, mixed = 0;
        for (;;) {
            struct engine_item it[BATCH_SEQS];
            int n_it = 0, order[BATCH_SEQS] = { 0, 1, 2, 3, 4 };
            for (int k = BATCH_SEQS - 1; k > 0; k--) { /* a random order */
                int o = (int)(xs(&x) % (uint64_t)(k + 1)), t = order[k];
                order[k] = order[o];
                order[o] = t;
            }
            int64_t budget = runs[r].n_batch;
            static const int64_t sizes[] = { 1, 1, 1, 3, 7, 20 };
            for (int oi = 0; oi < BATCH_SEQS; oi++) {
                int k = order[oi];
                int64_t left = len[k] - seq_pos(sq[k]);
                if (left == 0 || budget == 0 || (n_it > 0 && xs(&x) % 4 == 0)) continue;
                int64_t want = sizes[xs(&x) % HS_ARRAY_LEN(sizes)]; /* once: HS_MIN evaluates twice */
                int64_t c = HS_MIN(HS_MIN(want, left), budget);
                it[n_it++] = (struct engine_item){ .s = sq[k], .tokens = ids[k] + seq_pos(sq[k]), .n = c,
                                                   .caps = &caps[k], .n_caps = 1, .rows = rows[k], .n_rows = (int)c };
                budget -= c;
            }
            if (n_it == 0) break;
            int64_t at[BATCH_SEQS];
            for (int i = 0; i < n_it; i++) at[i] = seq_pos(it[i].s);
            cr_assert_eq(engine_forward_batch(e, it, n_it, logits, &err), 0, "%s", err.msg);
            steps++;
            mixed += n_it > 1;
            int64_t row = 0;
            for (int i = 0; i < n_it; i++) {
                int k = (int)(it[i].s == sq[0] ? 0 : it[i].s == sq[1] ? 1 : it[i].s == sq[2] ? 2 : it[i].s == sq[3] ? 3 : 4);
                int64_t d = first_diff(ref[k] + at[i] * V, logits + row * V, it[i].n, V);
                cr_assert_eq(d, -1, "run %zu step %d: sequence %d position %lld differs from alone (%d in the step)", r,
                             steps, k, (long long)(at[i] + d), n_it);
                row += it[i].n;
            }
        }
        cr_assert_gt(mixed, 3, "the schedule mixed sequences in only %d steps", mixed);
        for (int k = 0; k < BATCH_SEQS; k++) {
            cr_assert_eq(seq_pos(sq[k]), len[k]);
            cr_assert(caps[k].filled);
            cr_assert_eq(memcmp(caps[k].buf, ref_cap[k], nb), 0, "run %zu: capture of sequence %d differs", r, k);
            cr_assert_eq(memcmp(seq_gdn_state(sq[k]), ref_state[k], nb), 0, "run %zu: final state of sequence %d differs", r, k);
            free(caps[k].buf);
            seq_free(sq[k]);
        }
        free(logits);
        engine_free(e);
    }
    for (int k = 0; k < BATCH_SEQS; k++) {
        free(ref[k]);
        free(ref_cap[k]);
        free(ref_state[k]);
    }
    engine_free(e1);
    model_free(m);
}

Test(forward_exact, batch_qwen35_q8_0_gguf) { struct spec s = { MODEL_ARCH_QWEN35, DTYPE_Q8_0, true, 0, 0, 31 }; batch_sweep(&s); }
Test(forward_exact, batch_qwen35_bf16_hf) { struct spec s = { MODEL_ARCH_QWEN35, DTYPE_BF16, false, 1, 3, 32 }; batch_sweep(&s); }
Test(forward_exact, batch_qwen35moe_q4_k_m_gguf) { struct spec s = { MODEL_ARCH_QWEN35MOE, DTYPE_Q4_K, true, 0, 0, 33 }; batch_sweep(&s); }
Test(forward_exact, batch_qwen3next_f32_gguf) { struct spec s = { MODEL_ARCH_QWEN3NEXT, DTYPE_F32, true, 0, 0, 34 }; batch_sweep(&s); }
Test(forward_exact, batch_qwen35moe_q5_1_gguf) { struct spec s = { MODEL_ARCH_QWEN35MOE, DTYPE_Q5_1, true, 0, 0, 48 }; batch_sweep(&s); }
Test(forward_exact, batch_qwen35_iq4_xs_gguf) { struct spec s = { MODEL_ARCH_QWEN35, DTYPE_IQ4_XS, true, 0, 0, 49 }; batch_sweep(&s); }
Test(forward_exact, batch_qwen35_q5_k_m_gguf) { struct spec s = { MODEL_ARCH_QWEN35, DTYPE_Q5_K, true, 0, 0, 35 }; batch_sweep(&s); }

/* Bad batches fail before any state changes: one sequence twice, more tokens than a step
 * holds, a bad token in the last item. */
Test(forward_exact, batch_refuses_bad_items)
{
    struct spec sp = { MODEL_ARCH_QWEN35, DTYPE_F32, true, 0, 0, 36 };
    struct model *m = make_model(&sp, "bb");
    struct engine *e = make_engine(m, 1, 8);
    struct seq *a = seq_new(e, 64), *b = seq_new(e, 64);
    int32_t t[10] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 }, bad = -1;
    struct hs_err err;
    hs_err_clear(&err);
    struct engine_item twice[2] = { { .s = a, .tokens = t, .n = 2 }, { .s = a, .tokens = t, .n = 1 } };
    cr_assert_eq(engine_forward_batch(e, twice, 2, NULL, &err), HS_ERR_INVALID);
    struct engine_item big[2] = { { .s = a, .tokens = t, .n = 5 }, { .s = b, .tokens = t, .n = 4 } };
    cr_assert_eq(engine_forward_batch(e, big, 2, NULL, &err), HS_ERR_LIMIT);
    struct engine_item badtok[2] = { { .s = a, .tokens = t, .n = 3 }, { .s = b, .tokens = &bad, .n = 1 } };
    cr_assert_eq(engine_forward_batch(e, badtok, 2, NULL, &err), HS_ERR_INVALID);
    cr_assert_eq(seq_pos(a), 0);
    cr_assert_eq(seq_pos(b), 0);
    struct engine_item ok[2] = { { .s = a, .tokens = t, .n = 3 }, { .s = b, .tokens = t, .n = 0 } };
    cr_assert_eq(engine_forward_batch(e, ok, 2, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(seq_pos(a), 3);
    cr_assert_eq(seq_pos(b), 0);
    seq_free(a);
    seq_free(b);
    engine_free(e);
    model_free(m);
}
