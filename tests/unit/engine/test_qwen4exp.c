/* test_qwen4exp.c — the Flash-Next forward pass (hyper-connections, the n-gram embedding,
 * QSA attention) keeps the engine's exactness promise: the logits of every position are the
 * same bits whatever the chunking (1, 3, 4, 5, 64, whole), the thread count, the kernel
 * variant, the company in a batch step, and however the state got there: a blob saved at
 * positions = 0, 1, 3 (mod 4) (inside QSA blocks and at their edges), and a capture
 * restored with its KV rows, the way the bank restores. The model is q4exp_writer.h's: two
 * blocks kept per query, so every query from position 11 on (3 complete blocks) attends sparsely, and the n-gram
 * reset token (30) appears in the prompt.
 */
#include <criterion/criterion.h>

#include "engine/engine_int.h"
#include "sys/sys.h"
#include "unit/cpu_level.h"
#include "unit/q4exp_writer.h"

#include <sys/stat.h>
#include <unistd.h>

#define N_TOK 60

static struct model *load_opts(const struct q4_opts *op, const char *sub)
{
    char dir[128];
    snprintf(dir, sizeof dir, "%s/%s", tmpdir, sub);
    mkdir(dir, 0755);
    struct q4_opts o = *op;
    char *path = write_model(dir, &o);
    struct model *m = NULL;
    struct hs_err err = { 0 };
    cr_assert_eq(model_load(path, &m, &err), HS_OK, "%s", err.msg);
    free(path);
    return m;
}

static struct model *load(bool gguf)
{
    struct q4_opts o = { .gguf = gguf, .ple_layer = 1 };
    return load_opts(&o, gguf ? "gguf" : "hf");
}

static struct engine *engine(const struct model *m, int threads)
{
    struct engine_opts o;
    engine_opts_default(&o);
    o.n_threads = threads;
    struct engine *e = NULL;
    struct hs_err err = { 0 };
    cr_assert_eq(engine_new(m, &o, &e, &err), HS_OK, "%s", err.msg);
    return e;
}

static void prompt(int32_t *ids)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < N_TOK; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        ids[i] = (int32_t)(x % V);
    }
    ids[7] = EOS; /* the n-gram context resets after it */
    ids[20] = EOS;
    ids[21] = EOS;
}

/* Logits of positions [from, N_TOK) fed in chunks into s (at position from). */
static void run(struct engine *e, struct seq *s, const int32_t *ids, int64_t from, int64_t chunk, float *out)
{
    int64_t rows[N_TOK];
    struct hs_err err = { 0 };
    for (int64_t i0 = from; i0 < N_TOK; i0 += chunk) {
        int64_t c = HS_MIN(chunk, N_TOK - i0);
        for (int64_t i = 0; i < c; i++) rows[i] = i;
        cr_assert_eq(engine_forward(e, s, ids + i0, c, NULL, 0, rows, (int)c, out + i0 * V, &err), HS_OK, "%s", err.msg);
    }
}

static void same(const float *a, const float *b, int64_t from, const char *what)
{
    for (int64_t p = from; p < N_TOK; p++)
        cr_assert(memcmp(a + p * V, b + p * V, V * sizeof(float)) == 0, "%s: position %lld differs", what, (long long)p);
}

static float *whole(struct engine *e, const int32_t *ids)
{
    float *ref = calloc(N_TOK * V, sizeof(float));
    struct seq *s = seq_new(e, 256);
    run(e, s, ids, 0, N_TOK, ref);
    seq_free(s);
    for (int64_t i = 0; i < N_TOK * V; i++) cr_assert(isfinite(ref[i]), "logit %lld is not finite", (long long)i);
    return ref;
}

TestSuite(q4exp_forward, .init = setup, .fini = teardown);

Test(q4exp_forward, chunks_threads_and_formats)
{
    int32_t ids[N_TOK];
    prompt(ids);
    struct model *m = load(true);
    struct engine *e1 = engine(m, 1), *e2 = engine(m, 2);
    float *ref = whole(e1, ids), *got = calloc(N_TOK * V, sizeof(float));
    static const int64_t chunks[] = { 1, 3, 4, 5, 64 };
    for (size_t c = 0; c < HS_ARRAY_LEN(chunks); c++)
        for (int k = 0; k < 2; k++) {
            struct engine *e = k ? e2 : e1;
            struct seq *s = seq_new(e, 256);
            run(e, s, ids, 0, chunks[c], got);
            char what[64];
            snprintf(what, sizeof what, "chunk %lld, %d threads", (long long)chunks[c], k + 1);
            same(ref, got, 0, what);
            seq_free(s);
        }
    /* the HF directory of the same numbers computes the same bits */
    struct model *mh = load(false);
    struct engine *eh = engine(mh, 2);
    float *hf = whole(eh, ids);
    same(ref, hf, 0, "HF vs GGUF");
    /* QSA decides something here: with every block kept, the first 11 positions (dense
     * anyway) are the same bits and a later one differs */
    int64_t top = e1->g.qsa_top;
    e1->g.qsa_top = 1 << 20;
    float *dense = whole(e1, ids);
    e1->g.qsa_top = top;
    for (int64_t p = 0; p < 11; p++)
        cr_assert(memcmp(ref + p * V, dense + p * V, V * sizeof(float)) == 0, "position %lld: dense differs", (long long)p);
    bool differs = false;
    for (int64_t p = 11; p < N_TOK; p++) differs |= memcmp(ref + p * V, dense + p * V, V * sizeof(float)) != 0;
    cr_assert(differs, "sparse attention changed nothing");
    free(dense);
    free(hf);
    engine_free(eh);
    model_free(mh);
    free(ref);
    free(got);
    engine_free(e1);
    engine_free(e2);
    model_free(m);
}

Test(q4exp_forward, kernel_variants)
{
    int32_t ids[N_TOK];
    prompt(ids);
    struct model *m = load(true);
    struct engine *e = engine(m, 2);
    static const char *const variants[] = { "avx2", "avxvnni", "avx512vnni", "avx512" };
    struct hs_err err = { 0 };
    cr_assert_eq(engine_force_variant(e, "scalar", &err), HS_OK, "%s", err.msg);
    float *ref = whole(e, ids);
    for (size_t v = 0; v < HS_ARRAY_LEN(variants); v++) {
        if (!cpu_level_runs(variants[v])) continue; /* cpu_level.h: not on this CPU or level */
        cr_assert_eq(engine_force_variant(e, variants[v], &err), HS_OK, "%s", err.msg);
        float *got = whole(e, ids);
        same(ref, got, 0, variants[v]);
        free(got);
    }
    free(ref);
    engine_free(e);
    model_free(m);
}

Test(q4exp_forward, batch_composition)
{
    int32_t a[N_TOK], b[N_TOK];
    prompt(a);
    for (int i = 0; i < N_TOK; i++) b[i] = (a[(i * 7) % N_TOK] + 3) % V;
    struct model *m = load(true);
    struct engine *e = engine(m, 2);
    float *ra = whole(e, a), *rb = whole(e, b);
    float *ga = calloc(N_TOK * V, sizeof(float)), *gb = calloc(N_TOK * V, sizeof(float));
    struct seq *sa = seq_new(e, 256), *sb = seq_new(e, 256);
    /* a in chunks of 7, b of 5, side by side in each step; b starts 3 steps later */
    int64_t pa = 0, pb = 0, rows_a[8], rows_b[8];
    float *buf = calloc(16 * V, sizeof(float));
    for (int step = 0; pa < N_TOK || pb < N_TOK; step++) {
        struct engine_item it[2];
        int n = 0;
        int64_t ca = HS_MIN(7, N_TOK - pa), cb = step >= 3 ? HS_MIN(5, N_TOK - pb) : 0;
        for (int64_t i = 0; i < 8; i++) rows_a[i] = rows_b[i] = i;
        if (ca > 0) it[n++] = (struct engine_item){ sa, a + pa, ca, NULL, 0, rows_a, (int)ca };
        if (cb > 0) it[n++] = (struct engine_item){ sb, b + pb, cb, NULL, 0, rows_b, (int)cb };
        struct hs_err err = { 0 };
        cr_assert_eq(engine_forward_batch(e, it, n, buf, &err), HS_OK, "%s", err.msg);
        int64_t k = 0;
        if (ca > 0) { memcpy(ga + pa * V, buf, (size_t)(ca * V) * sizeof(float)); k = ca; pa += ca; }
        if (cb > 0) { memcpy(gb + pb * V, buf + k * V, (size_t)(cb * V) * sizeof(float)); pb += cb; }
    }
    same(ra, ga, 0, "sequence a in a batch");
    same(rb, gb, 0, "sequence b in a batch");
    seq_free(sa);
    seq_free(sb);
    free(buf); free(ra); free(rb); free(ga); free(gb);
    engine_free(e);
    model_free(m);
}

Test(q4exp_forward, restores_inside_and_at_block_edges)
{
    int32_t ids[N_TOK];
    prompt(ids);
    struct model *m = load(true);
    struct engine *e = engine(m, 2);
    float *ref = whole(e, ids), *got = calloc(N_TOK * V, sizeof(float));
    static const int64_t at[] = { 8, 9, 11, 13, 16, 23, 36 }; /* = 0, 1, 3 (mod 4), before and after position 11 */
    for (size_t i = 0; i < HS_ARRAY_LEN(at); i++) {
        int64_t p = at[i];
        /* 1. seq_save / seq_restore */
        struct seq *s = seq_new(e, 256), *r = seq_new(e, 256);
        run(e, s, ids, 0, N_TOK, got);
        seq_free(s);
        s = seq_new(e, 256);
        int64_t rows[N_TOK];
        for (int64_t k = 0; k < p; k++) rows[k] = k;
        struct hs_err err = { 0 };
        cr_assert_eq(engine_forward(e, s, ids, p, NULL, 0, rows, (int)p, got, &err), HS_OK, "%s", err.msg);
        void *blob;
        uint64_t len;
        cr_assert_eq(seq_save(s, &blob, &len, &err), HS_OK);
        cr_assert_eq(seq_restore(r, blob, len, &err), HS_OK, "%s", err.msg);
        run(e, r, ids, p, 5, got);
        char what[64];
        snprintf(what, sizeof what, "blob restored at %lld", (long long)p);
        same(ref, got, p, what);
        free(blob);
        seq_free(r);
        seq_free(s);
        /* 2. a capture taken mid-chunk plus KV rows: the bank's restore */
        s = seq_new(e, 256);
        uint64_t snap_bytes = engine_snapshot_bytes(e);
        struct engine_capture cap = { p, malloc(snap_bytes), false };
        cr_assert_eq(engine_forward(e, s, ids, N_TOK, &cap, 1, NULL, 0, NULL, &err), HS_OK, "%s", err.msg);
        cr_assert(cap.filled);
        void *kv = malloc((size_t)(engine_kv_row_bytes(e) * (uint64_t)p));
        cr_assert_eq(seq_kv_read(s, 0, p, kv), HS_OK);
        r = seq_new(e, 256);
        cr_assert_eq(seq_restore_parts(r, p, kv, cap.buf, &err), HS_OK, "%s", err.msg);
        run(e, r, ids, p, 3, got);
        snprintf(what, sizeof what, "capture restored at %lld", (long long)p);
        same(ref, got, p, what);
        free(kv);
        free(cap.buf);
        seq_free(r);
        seq_free(s);
    }
    free(ref);
    free(got);
    engine_free(e);
    model_free(m);
}

/* Every block scores exactly 0 when the indexer's key projection is zero (the pooled keys
 * are zero vectors): a total tie, which the rule breaks towards the lower blocks. The
 * selection of each sparse query of the step is in the engine's scratch after a forward. */
Test(q4exp_forward, ties_go_to_the_lower_blocks)
{
    int32_t ids[N_TOK];
    prompt(ids);
    struct q4_opts o = { .gguf = true, .ple_layer = 1, .zero = "blk.3.indexer.k_proj.weight" };
    struct model *m = load_opts(&o, "tie");
    struct engine *e = engine(m, 2);
    struct seq *s = seq_new(e, 256);
    struct hs_err err = { 0 };
    cr_assert_eq(engine_forward(e, s, ids, N_TOK, NULL, 0, NULL, 0, NULL, &err), HS_OK, "%s", err.msg);
    const int64_t blk = e->g.qsa_blk, top = e->g.qsa_top;
    int checked = 0;
    for (int64_t p = 0; p < N_TOK; p++) {
        int64_t nb = (p + 1) / blk;
        if (nb <= top) {
            cr_assert_eq(e->s.n_sel[p], 0, "position %lld is dense", (long long)p);
            continue;
        }
        const int32_t *sel = e->s.sel + p * e->s.sel_cap;
        cr_assert_eq(e->s.n_sel[p], top * blk + (p + 1 - nb * blk), "position %lld", (long long)p);
        for (int64_t i = 0; i < top * blk; i++)
            cr_assert_eq(sel[i], i, "position %lld: selected position %lld is %d, not the lowest blocks'",
                         (long long)p, (long long)i, sel[i]);
        for (int64_t q = nb * blk; q <= p; q++) cr_assert_eq(sel[top * blk + q - nb * blk], q, "open block");
        checked++;
    }
    cr_assert_gt(checked, 40);
    seq_free(s);
    engine_free(e);
    model_free(m);
}

/* A KV cache that grows past its first block moves every plane, the indexer's row tails
 * included (engine/seq.c): token by token (growing at ENGINE_KV_BLOCK) the logits of every
 * position equal one forward of the whole prompt, and a blob of the grown sequence restores
 * to the same next logits. Past the block, QSA selects among many blocks of the moved tails. */
Test(q4exp_forward, kv_grows_past_a_block)
{
    const int64_t n = ENGINE_KV_BLOCK + 40;
    int32_t *ids = malloc((size_t)n * sizeof(int32_t));
    for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)((i * 31 + 7) % V);
    struct model *m = load(true);
    struct engine *e = engine(m, 2);
    struct seq *a = seq_new(e, n + 1), *b = seq_new(e, n + 1);
    int64_t *rows = malloc((size_t)n * sizeof(int64_t)), r0 = 0;
    for (int64_t i = 0; i < n; i++) rows[i] = i;
    float *la = malloc((size_t)(n * V) * sizeof(float)), *lb = malloc((size_t)V * sizeof(float));
    struct hs_err err = { 0 };
    cr_assert_eq(engine_forward(e, a, ids, n, NULL, 0, rows, (int)n, la, &err), HS_OK, "%s", err.msg);
    for (int64_t i = 0; i < n; i++) {
        cr_assert_eq(engine_forward(e, b, ids + i, 1, NULL, 0, &r0, 1, lb, &err), HS_OK, "%s", err.msg);
        cr_assert(memcmp(la + i * V, lb, V * sizeof(float)) == 0, "position %lld: grown cache differs", (long long)i);
    }
    cr_assert_gt(b->kv_cap, ENGINE_KV_BLOCK);
    /* the grown sequence's blob, restored into a fresh one: the same next logits */
    void *blob = NULL;
    uint64_t len = 0;
    cr_assert_eq(seq_save(b, &blob, &len, &err), HS_OK, "%s", err.msg);
    struct seq *c = seq_new(e, n + 1);
    cr_assert_eq(seq_restore(c, blob, len, &err), HS_OK, "%s", err.msg);
    const int32_t next = 3;
    float *lc = malloc((size_t)V * sizeof(float));
    cr_assert_eq(engine_forward(e, b, &next, 1, NULL, 0, &r0, 1, lb, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(engine_forward(e, c, &next, 1, NULL, 0, &r0, 1, lc, &err), HS_OK, "%s", err.msg);
    cr_assert(memcmp(lb, lc, V * sizeof(float)) == 0, "restored blob of a grown cache differs");
    free(blob);
    free(ids); free(rows); free(la); free(lb); free(lc);
    seq_free(a); seq_free(b); seq_free(c);
    engine_free(e);
    model_free(m);
}
