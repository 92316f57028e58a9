/* test_state.c — the engine's refusals and state-blob checks: engine_new option and model
 * validation, forward argument errors (token ids, n_ctx, rows, capture buffers) that leave
 * the sequence untouched, seq_restore of corrupt / truncated / foreign blobs (sequence
 * unchanged, its next logits identical to an untouched twin's), fingerprints (same model
 * file: equal; another model: different), seq_reset, and KV growth past one block. */
#include <criterion/criterion.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_int.h"
#include "mkmodel/mkmodel.h"

static char tmpdir[64];

static void st_setup(void)
{
    strcpy(tmpdir, "/tmp/hs-est.XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
    char p[128];
    snprintf(p, sizeof(p), "%s/chat.jinja", tmpdir);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    fputs("{%- for m in messages %}{{ m.content }}{%- endfor %}", f);
    fclose(f);
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

static void st_teardown(void) { nftw(tmpdir, rm_cb, 16, FTW_DEPTH | FTW_PHYS); }

static struct model *mk(enum model_arch arch, uint64_t seed, const char *name)
{
    char out[160], tpl[128];
    snprintf(out, sizeof(out), "%s/%s.gguf", tmpdir, name);
    snprintf(tpl, sizeof(tpl), "%s/chat.jinja", tmpdir);
    struct mkmodel_opts o;
    mkmodel_opts_default(&o);
    o.arch = arch;
    o.dtype = DTYPE_F32;
    o.seed = seed;
    o.chat_template = tpl;
    o.out = out;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(mkmodel_write(&o, &err), 0, "mkmodel: %s", err.msg);
    struct model *m = NULL;
    cr_assert_eq(model_load(out, &m, &err), 0, "load: %s", err.msg);
    return m;
}

static struct engine *eng(const struct model *m)
{
    struct engine *e = NULL;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(engine_new(m, NULL, &e, &err), 0, "%s", err.msg);
    return e;
}

static const int32_t ids[] = { 5, 9, 100, 3, 77, 12, 40, 41, 8, 19 };

TestSuite(engine_state, .init = st_setup, .fini = st_teardown, .timeout = 60);

Test(engine_state, engine_new_refuses_bad_options)
{
    struct model *m = mk(MODEL_ARCH_QWEN35, 1, "a");
    struct engine_opts o;
    engine_opts_default(&o);
    cr_assert_eq(o.n_threads, 1);
    cr_assert_eq(o.n_batch, 512);
    struct engine *e = (struct engine *)1;
    struct hs_err err;
    hs_err_clear(&err);
    o.n_threads = 0;
    cr_assert_eq(engine_new(m, &o, &e, &err), HS_ERR_INVALID);
    cr_assert_null(e);
    cr_assert(strstr(err.msg, "n_threads"), "%s", err.msg);
    o.n_threads = 1;
    o.n_batch = 0;
    hs_err_clear(&err);
    cr_assert_eq(engine_new(m, &o, &e, &err), HS_ERR_INVALID);
    cr_assert(strstr(err.msg, "n_batch"), "%s", err.msg);
    engine_free(NULL);
    seq_free(NULL);
    model_free(m);
}

Test(engine_state, forward_errors_change_nothing)
{
    struct model *m = mk(MODEL_ARCH_QWEN35, 1, "a");
    struct engine *e = eng(m);
    int64_t V = e->g.V;
    struct seq *s = seq_new(e, 8), *twin = seq_new(e, 8);
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(engine_forward(e, s, ids, 3, NULL, 0, NULL, 0, NULL, &err), 0);
    cr_assert_eq(engine_forward(e, twin, ids, 3, NULL, 0, NULL, 0, NULL, &err), 0);
    int32_t bad[2] = { 1, (int32_t)V };
    cr_assert_eq(engine_forward(e, s, bad, 2, NULL, 0, NULL, 0, NULL, &err), HS_ERR_INVALID);
    cr_assert(strstr(err.msg, "vocabulary"), "%s", err.msg);
    hs_err_clear(&err);
    bad[1] = -1;
    cr_assert_eq(engine_forward(e, s, bad, 2, NULL, 0, NULL, 0, NULL, &err), HS_ERR_INVALID);
    hs_err_clear(&err);
    cr_assert_eq(engine_forward(e, s, ids, 6, NULL, 0, NULL, 0, NULL, &err), HS_ERR_LIMIT); /* 3 + 6 > 8 */
    cr_assert(strstr(err.msg, "n_ctx"), "%s", err.msg);
    hs_err_clear(&err);
    int64_t rows[2] = { 1, 1 };
    float *l = malloc((size_t)(2 * V) * sizeof(float));
    cr_assert_eq(engine_forward(e, s, ids, 2, NULL, 0, rows, 2, l, &err), HS_ERR_INVALID); /* not ascending */
    hs_err_clear(&err);
    rows[1] = 2;
    cr_assert_eq(engine_forward(e, s, ids, 2, NULL, 0, rows, 2, l, &err), HS_ERR_INVALID); /* past n */
    hs_err_clear(&err);
    struct engine_capture cap = { 4, NULL, false };
    cr_assert_eq(engine_forward(e, s, ids, 2, &cap, 1, NULL, 0, NULL, &err), HS_ERR_INVALID);
    cr_assert_eq(seq_pos(s), 3);
    /* the failed calls left s equal to its twin */
    int64_t r0 = 0;
    float *l2 = malloc((size_t)V * sizeof(float));
    cr_assert_eq(engine_forward(e, s, ids + 3, 1, NULL, 0, &r0, 1, l, &err), 0, "%s", err.msg);
    cr_assert_eq(engine_forward(e, twin, ids + 3, 1, NULL, 0, &r0, 1, l2, &err), 0, "%s", err.msg);
    cr_assert_eq(memcmp(l, l2, (size_t)V * sizeof(float)), 0);
    /* n == 0 is a no-op */
    cr_assert_eq(engine_forward(e, s, NULL, 0, NULL, 0, NULL, 0, NULL, &err), 0);
    cr_assert_eq(seq_pos(s), 4);
    free(l);
    free(l2);
    seq_free(s);
    seq_free(twin);
    engine_free(e);
    model_free(m);
}

Test(engine_state, restore_refuses_bad_blobs)
{
    struct model *m = mk(MODEL_ARCH_QWEN35, 1, "a"), *m2 = mk(MODEL_ARCH_QWEN35, 2, "b");
    struct engine *e = eng(m), *e2 = eng(m2);
    int64_t V = e->g.V;
    struct hs_err err;
    hs_err_clear(&err);
    struct seq *src = seq_new(e, 16), *dst = seq_new(e, 16), *twin = seq_new(e, 16);
    cr_assert_eq(engine_forward(e, src, ids, 6, NULL, 0, NULL, 0, NULL, &err), 0);
    cr_assert_eq(engine_forward(e, dst, ids, 2, NULL, 0, NULL, 0, NULL, &err), 0);
    cr_assert_eq(engine_forward(e, twin, ids, 2, NULL, 0, NULL, 0, NULL, &err), 0);
    void *blob;
    uint64_t len;
    cr_assert_eq(seq_save(src, &blob, &len, &err), 0);
    uint8_t *b = blob;
    /* every single flipped byte is caught (header fields by their checks, the rest by the
     * checksum) */
    for (uint64_t i = 0; i < len; i += (i < 64 ? 1 : 97)) {
        b[i] ^= 0x40;
        hs_err_clear(&err);
        cr_assert_neq(seq_restore(dst, blob, len, &err), 0, "flipped byte %llu accepted", (unsigned long long)i);
        b[i] ^= 0x40;
    }
    hs_err_clear(&err);
    cr_assert_neq(seq_restore(dst, blob, len - 1, &err), 0);
    cr_assert_neq(seq_restore(dst, blob, 10, &err), 0);
    hs_err_clear(&err);
    b[len - 1] ^= 1;
    cr_assert_neq(seq_restore(dst, blob, len, &err), 0);
    cr_assert(strstr(err.msg, "checksum"), "%s", err.msg);
    b[len - 1] ^= 1;
    /* a foreign engine (another model file) refuses it by fingerprint */
    cr_assert_neq(engine_fingerprint(e), engine_fingerprint(e2));
    struct seq *other = seq_new(e2, 16);
    hs_err_clear(&err);
    cr_assert_eq(seq_restore(other, blob, len, &err), HS_ERR_INVALID);
    cr_assert(strstr(err.msg, "fingerprint"), "%s", err.msg);
    /* too small a context */
    struct seq *small = seq_new(e, 4);
    hs_err_clear(&err);
    cr_assert_eq(seq_restore(small, blob, len, &err), HS_ERR_LIMIT);
    cr_assert_eq(seq_pos(dst), 2);
    /* dst is still its twin */
    int64_t r0 = 0;
    float *l = malloc((size_t)V * sizeof(float)), *l2 = malloc((size_t)V * sizeof(float));
    cr_assert_eq(engine_forward(e, dst, ids + 2, 1, NULL, 0, &r0, 1, l, &err), 0);
    cr_assert_eq(engine_forward(e, twin, ids + 2, 1, NULL, 0, &r0, 1, l2, &err), 0);
    cr_assert_eq(memcmp(l, l2, (size_t)V * sizeof(float)), 0);
    /* a good restore, then reset: back to position 0 and a cold start */
    cr_assert_eq(seq_restore(dst, blob, len, &err), 0, "%s", err.msg);
    cr_assert_eq(seq_pos(dst), 6);
    seq_reset(dst);
    seq_reset(twin);
    cr_assert_eq(seq_pos(dst), 0);
    cr_assert_eq(engine_forward(e, dst, ids, 1, NULL, 0, &r0, 1, l, &err), 0);
    cr_assert_eq(engine_forward(e, twin, ids, 1, NULL, 0, &r0, 1, l2, &err), 0);
    cr_assert_eq(memcmp(l, l2, (size_t)V * sizeof(float)), 0);
    free(l);
    free(l2);
    hs_free(blob);
    seq_free(src); seq_free(dst); seq_free(twin); seq_free(other); seq_free(small);
    engine_free(e); engine_free(e2);
    model_free(m); model_free(m2);
}

Test(engine_state, fingerprint_and_geometry)
{
    struct model *m = mk(MODEL_ARCH_QWEN35MOE, 3, "a");
    struct model *again = NULL;
    char p[160];
    snprintf(p, sizeof(p), "%s/a.gguf", tmpdir);
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(model_load(p, &again, &err), 0);
    struct engine *e = eng(m), *e2 = eng(again);
    cr_assert_eq(engine_fingerprint(e), engine_fingerprint(e2));
    cr_assert_str_eq(engine_kernel_variant(e), e->ops->name);
    cr_assert_eq(engine_model(e), m);
    const struct model_hparams *hp = model_hparams(m);
    uint64_t want = 0;
    for (int il = 0; il < hp->n_layer; il++)
        if (hp->layer_kind[il] == LAYER_KIND_GDN)
            want += (uint64_t)((hp->conv_kernel - 1) * (2 * hp->gdn_k_heads * hp->gdn_k_dim + hp->gdn_v_heads * hp->gdn_v_dim) +
                               hp->gdn_v_heads * hp->gdn_k_dim * hp->gdn_v_dim) * 4;
    cr_assert_eq(engine_snapshot_bytes(e), want);
    engine_free(e); engine_free(e2);
    model_free(m); model_free(again);
}

Test(engine_state, kv_grows_past_a_block)
{
    struct model *m = mk(MODEL_ARCH_QWEN35, 1, "a");
    struct engine *e = eng(m);
    int64_t n = ENGINE_KV_BLOCK + 40, V = e->g.V;
    int32_t *t = malloc((size_t)n * sizeof(int32_t));
    for (int64_t i = 0; i < n; i++) t[i] = (int32_t)((i * 31 + 7) % V);
    struct seq *a = seq_new(e, n), *b = seq_new(e, n);
    struct hs_err err;
    hs_err_clear(&err);
    int64_t last = n - 1, r0 = 0;
    float *l = malloc((size_t)V * sizeof(float)), *l2 = malloc((size_t)V * sizeof(float));
    cr_assert_eq(engine_forward(e, a, t, n, NULL, 0, &last, 1, l, &err), 0, "%s", err.msg);
    for (int64_t i = 0; i < n; i++) cr_assert_eq(engine_forward(e, b, t + i, 1, NULL, 0, &r0, 1, l2, &err), 0);
    cr_assert_eq(memcmp(l, l2, (size_t)V * sizeof(float)), 0);
    cr_assert_geq(a->kv_cap, n);
    cr_assert_leq(a->kv_cap, seq_n_ctx(a));
    free(t); free(l); free(l2);
    seq_free(a); seq_free(b);
    engine_free(e);
    model_free(m);
}
