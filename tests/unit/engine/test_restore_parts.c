/* test_restore_parts.c — the engine parts the session bank uses (engine.h, "parts for the
 * session bank"), memcmp with no tolerance, on tiny q8_0 GGUF models (qwen35 and qwen35moe):
 *   1. seq_snapshot after a forward that stopped at p equals a capture at p mid-forward;
 *   2. seq_kv_read of [a, b) + [b, c) equals [a, c), and it rejects bad ranges;
 *   3. a sequence rebuilt with seq_restore_parts at p (rows [0, p) read from another
 *      sequence, a captured snapshot) — even over a dirty sequence at another position —
 *      gives logits for p..n identical to a cold forward of 0..n, and reads back the same KV;
 *   4. a restore past n_ctx fails and leaves the sequence unchanged. */
#include <criterion/criterion.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine_int.h"
#include "mkmodel/mkmodel.h"

#define RP_N 90
#define RP_AT 37

static char rp_dir[64];

static int rp_rm(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

static void rp_setup(void)
{
    strcpy(rp_dir, "/tmp/hs-rp.XXXXXX");
    cr_assert_not_null(mkdtemp(rp_dir));
    char p[128];
    snprintf(p, sizeof(p), "%s/chat.jinja", rp_dir);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    fputs("{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}", f);
    fclose(f);
}

static void rp_teardown(void) { nftw(rp_dir, rp_rm, 16, FTW_DEPTH | FTW_PHYS); }

static struct model *rp_model(enum model_arch arch)
{
    char out[160], tpl[128];
    snprintf(out, sizeof(out), "%s/m%d.gguf", rp_dir, (int)arch);
    snprintf(tpl, sizeof(tpl), "%s/chat.jinja", rp_dir);
    struct mkmodel_opts o;
    mkmodel_opts_default(&o);
    o.arch = arch;
    o.dtype = DTYPE_Q8_0;
    o.seed = 11;
    o.chat_template = tpl;
    o.out = out;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(mkmodel_write(&o, &err), 0, "mkmodel: %s", err.msg);
    struct model *m = NULL;
    cr_assert_eq(model_load(out, &m, &err), 0, "load: %s", err.msg);
    return m;
}

static void rp_check(enum model_arch arch)
{
    struct model *m = rp_model(arch);
    struct engine_opts eo;
    engine_opts_default(&eo);
    eo.n_threads = 2;
    struct engine *e = NULL;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(engine_new(m, &eo, &e, &err), 0, "%s", err.msg);
    int64_t V = e->g.V;
    uint64_t rb = engine_kv_row_bytes(e), sb = engine_snapshot_bytes(e);
    cr_assert_eq(rb, (uint64_t)e->g.n_attn * 2 * e->g.kv_row_floats * 4);
    cr_assert_gt(rb, 0);
    cr_assert_gt(sb, 0);

    int32_t ids[RP_N];
    uint64_t x = 0x1234567ull;
    for (int i = 0; i < RP_N; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        ids[i] = (int32_t)(x % (uint64_t)V);
    }
    /* cold reference: logits of every position, a capture at RP_AT */
    struct seq *a = seq_new(e, RP_N);
    float *ref = malloc((size_t)(RP_N * V) * sizeof(float));
    int64_t rows[RP_N];
    for (int i = 0; i < RP_N; i++) rows[i] = i;
    void *cap_buf = malloc(sb);
    struct engine_capture cap = { .pos = RP_AT, .buf = cap_buf };
    cr_assert_eq(engine_forward(e, a, ids, RP_N, &cap, 1, rows, RP_N, ref, &err), 0, "%s", err.msg);
    cr_assert(cap.filled);

    /* 1: seq_snapshot at a stop equals the capture */
    struct seq *c = seq_new(e, RP_N);
    cr_assert_eq(engine_forward(e, c, ids, RP_AT, NULL, 0, NULL, 0, NULL, &err), 0, "%s", err.msg);
    void *snap = malloc(sb);
    seq_snapshot(c, snap);
    cr_assert_eq(memcmp(snap, cap_buf, sb), 0, "seq_snapshot differs from the capture");

    /* 2: kv_read pieces */
    uint8_t *kv_all = malloc(rb * RP_N), *kv_two = malloc(rb * RP_N);
    cr_assert_eq(seq_kv_read(a, 0, RP_N, kv_all), 0);
    cr_assert_eq(seq_kv_read(a, 0, 20, kv_two), 0);
    cr_assert_eq(seq_kv_read(a, 20, RP_N, kv_two + 20 * rb), 0);
    cr_assert_eq(memcmp(kv_all, kv_two, rb * RP_N), 0);
    uint8_t *kv_c = malloc(rb * RP_AT);
    cr_assert_eq(seq_kv_read(c, 0, RP_AT, kv_c), 0);
    cr_assert_eq(memcmp(kv_c, kv_all, rb * RP_AT), 0, "KV rows depend on how far the forward went");
    cr_assert_neq(seq_kv_read(c, 0, RP_AT + 1, kv_two), 0);
    cr_assert_neq(seq_kv_read(c, 5, 4, kv_two), 0);
    cr_assert_neq(seq_kv_read(c, -1, 4, kv_two), 0);

    /* 3: restore over a dirty sequence, continue, compare */
    struct seq *b = seq_new(e, RP_N);
    cr_assert_eq(engine_forward(e, b, ids + 3, 50, NULL, 0, NULL, 0, NULL, &err), 0, "%s", err.msg);
    cr_assert_eq(seq_restore_parts(b, RP_AT, kv_all, cap_buf, &err), 0, "%s", err.msg);
    cr_assert_eq(seq_pos(b), RP_AT);
    cr_assert_eq(seq_kv_read(b, 0, RP_AT, kv_two), 0);
    cr_assert_eq(memcmp(kv_two, kv_all, rb * RP_AT), 0);
    float *got = malloc((size_t)(RP_N * V) * sizeof(float));
    int64_t n_rest = RP_N - RP_AT;
    cr_assert_eq(engine_forward(e, b, ids + RP_AT, n_rest, NULL, 0, rows, (int)n_rest, got, &err), 0, "%s",
                 err.msg);
    cr_assert_eq(memcmp(got, ref + RP_AT * V, (size_t)(n_rest * V) * sizeof(float)), 0,
                 "logits after restore_parts differ from the cold forward");
    cr_assert_eq(seq_kv_read(b, 0, RP_N, kv_two), 0);
    cr_assert_eq(memcmp(kv_two, kv_all, rb * RP_N), 0);

    /* 4: past n_ctx */
    struct seq *d = seq_new(e, 10);
    cr_assert_eq(engine_forward(e, d, ids, 4, NULL, 0, NULL, 0, NULL, &err), 0, "%s", err.msg);
    void *before = malloc(sb);
    seq_snapshot(d, before);
    cr_assert_neq(seq_restore_parts(d, 11, kv_all, cap_buf, &err), 0);
    cr_assert_eq(seq_pos(d), 4);
    seq_snapshot(d, snap);
    cr_assert_eq(memcmp(snap, before, sb), 0);

    free(before); free(got); free(kv_c); free(kv_two); free(kv_all); free(snap); free(cap_buf); free(ref);
    seq_free(d); seq_free(b); seq_free(c); seq_free(a);
    engine_free(e);
    model_free(m);
}

Test(restore_parts, qwen35_q8_0, .init = rp_setup, .fini = rp_teardown) { rp_check(MODEL_ARCH_QWEN35); }
Test(restore_parts, qwen35moe_q8_0, .init = rp_setup, .fini = rp_teardown) { rp_check(MODEL_ARCH_QWEN35MOE); }
