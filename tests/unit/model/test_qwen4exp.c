/* test_qwen4exp.c — loading Qwen3.8-Flash-Next (qwen4exp) from a Hugging Face directory and
 * from a GGUF file: the hyperparameters (hyper-connections, the QSA indexer, the hashed
 * n-gram embedding with its integer constants), the binding of every tensor of both
 * spellings, and the refusals of files that break the architecture's rules. The model is
 * tests/unit/q4exp_writer.h's; loading its two spellings must give the same numbers in
 * every slot.
 */
#include <criterion/criterion.h>

#include "unit/q4exp_writer.h"
#include "sys/sys.h"

#include <sys/stat.h>
#include <unistd.h>

static struct model *load_ok(const struct q4_opts *o, const char *sub)
{
    char dir[128];
    snprintf(dir, sizeof dir, "%s/%s", tmpdir, sub);
    cr_assert_eq(mkdir(dir, 0755), 0);
    char *path = write_model(dir, o);
    struct model *m = NULL;
    struct hs_err err = { 0 };
    cr_assert_eq(model_load(path, &m, &err), HS_OK, "%s: %s", sub, err.msg);
    free(path);
    return m;
}

static int load_err(const struct q4_opts *o, struct hs_err *err)
{
    char *path = write_model(tmpdir, o);
    struct model *m = NULL;
    hs_err_clear(err);
    int rc = model_load(path, &m, err);
    model_free(m);
    free(path);
    return rc;
}

static void same_f32(const float *a, const float *b, int64_t n, const char *what)
{
    cr_assert_not_null(a, "%s unbound", what);
    cr_assert_not_null(b, "%s unbound", what);
    cr_assert(memcmp(a, b, (size_t)n * sizeof *a) == 0, "%s differs between HF and GGUF", what);
}

static void same_w(const struct model_weight *a, const struct model_weight *b, const char *what)
{
    cr_assert_not_null(a->data, "%s unbound", what);
    cr_assert_eq(a->rows, b->rows, "%s rows", what);
    cr_assert_eq(a->cols, b->cols, "%s cols", what);
    cr_assert_eq(a->n_mat, b->n_mat, "%s n_mat", what);
    for (int64_t e = 0; e < a->n_mat; e++) {
        const void *x = a->n_mat > 1 ? a->mats[e] : a->data, *y = b->n_mat > 1 ? b->mats[e] : b->data;
        cr_assert(memcmp(x, y, (size_t)(a->row_bytes * (uint64_t)a->rows)) == 0, "%s [%lld] differs", what, (long long)e);
    }
}

static void same_hc(const struct model_hc *a, const struct model_hc *b, bool inject, const char *what)
{
    same_f32(a->norm, b->norm, NHH, what);
    same_w(&a->down, &b->down, what);
    same_w(&a->up, &b->up, what);
    if (inject) same_w(&a->inject, &b->inject, what);
}

TestSuite(qwen4exp, .init = setup, .fini = teardown);

Test(qwen4exp, hparams_from_hf_and_gguf)
{
    struct q4_opts o = { .ple_layer = 1 };
    for (int k = 0; k < 2; k++) {
        o.gguf = k == 1;
        struct model *m = load_ok(&o, o.gguf ? "gguf" : "hf");
        const struct model_hparams *hp = model_hparams(m);
        cr_assert_eq(hp->arch, MODEL_ARCH_QWEN4EXP);
        cr_assert_eq(hp->hc_n, HCN);
        cr_assert_eq(hp->hc_rank, HCR);
        cr_assert_eq(hp->idx_heads, IXH);
        cr_assert_eq(hp->idx_dim, IXD);
        cr_assert_eq(hp->qsa_block, 4);
        cr_assert_eq(hp->qsa_top_blocks, 2);
        cr_assert_eq(hp->ple_layer, 1);
        cr_assert_eq(hp->ple_ngram, NG);
        cr_assert_eq(hp->ple_heads, PH);
        cr_assert_eq(hp->ple_row, PR);
        cr_assert_eq(hp->ple_kernel, PK);
        cr_assert_eq(hp->ple_rows, PLE_ROWS);
        cr_assert_eq(hp->ple_shards, o.gguf ? 1 : SHARDS);
        cr_assert_eq(hp->ple_eos, EOS);
        cr_assert_eq(hp->gdn_gate, GDN_GATE_SIGMOID);
        cr_assert(hp->norm_topk_prob);
        cr_assert_eq(hp->n_mtp, 0);
        cr_assert_eq(hp->n_rot, 2);
        for (int j = 0; j < NG; j++) cr_assert_eq(hp->ple_mult[j], mults[j]);
        for (int h = 0; h < PH; h++) {
            cr_assert_eq(hp->ple_mod[h], mods[h]);
            cr_assert_eq(hp->ple_off[h], offs[h]);
        }
        cr_assert_null(model_output_norm(m));
        cr_assert_not_null(model_head_mixer(m));
        /* every tensor of the file is bound (the I64 buffers are hyperparameters) */
        const struct tensor_set *ts = model_tensors(m);
        for (int i = 0; i < tensor_set_count(ts); i++)
            if (tensor_set_at(ts, i)->dtype != DTYPE_I64)
                cr_assert(model_tensor_claimed(m, i), "%s not bound", tensor_set_at(ts, i)->name);
        model_free(m);
    }
}

Test(qwen4exp, hf_and_gguf_bind_the_same_numbers)
{
    struct q4_opts o = { .ple_layer = 1 };
    struct model *a = load_ok(&o, "hf");
    o.gguf = true;
    struct model *b = load_ok(&o, "gguf");
    /* the table: 4 shards of 9 rows against one tensor of 36 */
    const struct model_weight *ta = model_ple_table(a), *tb = model_ple_table(b);
    cr_assert_eq(ta->n_mat, SHARDS);
    cr_assert_eq(ta->rows, PLE_ROWS / SHARDS);
    cr_assert_eq(tb->n_mat, 1);
    cr_assert_eq(tb->rows, PLE_ROWS);
    for (int s = 0; s < SHARDS; s++)
        cr_assert(memcmp(ta->mats[s], (const uint8_t *)tb->data + (uint64_t)s * ta->rows * ta->row_bytes,
                         (size_t)(ta->rows * (int64_t)ta->row_bytes)) == 0, "table shard %d", s);
    same_hc(model_head_mixer(a), model_head_mixer(b), false, "head mixer");
    same_w(model_lm_head(a), model_lm_head(b), "lm_head");
    for (int il = 0; il < L; il++) {
        const struct model_layer *x = model_layer(a, il), *y = model_layer(b, il);
        same_hc(&x->hc_attn, &y->hc_attn, true, "hc_attn");
        same_hc(&x->hc_ffn, &y->hc_ffn, true, "hc_ffn");
        if (il == 1) {
            same_w(&x->ple_key, &y->ple_key, "ple_key");
            same_w(&x->ple_value, &y->ple_value, "ple_value");
            same_f32(x->ple_norm_key, y->ple_norm_key, NHH, "ple_norm_key");
            same_f32(x->ple_norm_query, y->ple_norm_query, NHH, "ple_norm_query");
            same_f32(x->ple_norm_conv, y->ple_norm_conv, NHH, "ple_norm_conv");
            same_f32(x->ple_conv, y->ple_conv, NHH * PK, "ple_conv");
        } else {
            cr_assert_null(x->ple_key.data);
            cr_assert_null(y->ple_norm_conv);
        }
        if (il == 3) {
            same_w(&x->idx_q, &y->idx_q, "indexer q");
            same_w(&x->idx_k, &y->idx_k, "indexer k");
            cr_assert_eq(x->idx_q.rows, IXH * IXD);
            cr_assert_eq(x->idx_k.rows, IXD);
            same_f32(x->idx_q_norm, y->idx_q_norm, IXD, "indexer q norm");
            same_f32(x->idx_k_norm, y->idx_k_norm, IXD, "indexer k norm");
            same_w(&x->wq, &y->wq, "wq");
            same_f32(x->q_norm, y->q_norm, HD, "q_norm");
        } else {
            same_w(&x->wqkv, &y->wqkv, "wqkv");
            same_f32(x->ssm_a, y->ssm_a, HV, "ssm_a");
            same_f32(x->conv, y->conv, (2 * HK * DK + HV * DV) * KC, "conv");
        }
        cr_assert_null(x->attn_norm);
        same_w(&x->router, &y->router, "router");
        same_w(&x->exp_gate, &y->exp_gate, "exp_gate");
        same_w(&x->exp_up, &y->exp_up, "exp_up");
        same_w(&x->exp_down, &y->exp_down, "exp_down");
        same_w(&x->sh_gate_inp, &y->sh_gate_inp, "sh_gate_inp");
    }
    /* a zero-centred mixer norm is folded: 1 + the file's value */
    cr_assert_float_eq(model_layer(a, 0)->hc_attn.norm[5],
                       1.0f + val(P "layers.0.attn_hyper_connection.hc_norm.weight", 5), 0.0f);
    model_free(a);
    model_free(b);
}

Test(qwen4exp, refusals)
{
    struct hs_err err = { 0 };
    struct q4_opts o = { .ple_layer = 3 }; /* the attention layer */
    cr_assert_eq(load_err(&o, &err), HS_ERR_UNSUPPORTED);
    cr_assert(strstr(err.msg, "Gated DeltaNet layer"), "%s", err.msg);
    o = (struct q4_opts){ .ple_layer = 1, .omit = P "layers.1.ple.ple_embedding.ngram_heads_offsets" };
    cr_assert_eq(load_err(&o, &err), HS_ERR_FORMAT);
    cr_assert(strstr(err.msg, "ngram_heads_offsets"), "%s", err.msg);
    o = (struct q4_opts){ .ple_layer = 1, .mult0 = (UINT64_C(1) << 63) / V };
    cr_assert_eq(load_err(&o, &err), HS_ERR_FORMAT);
    cr_assert(strstr(err.msg, "multiplier 0"), "%s", err.msg);
    o = (struct q4_opts){ .gguf = true, .ple_layer = 1, .omit = "qwen4exp.ple.head_vocab_sizes" };
    cr_assert_eq(load_err(&o, &err), HS_ERR_FORMAT);
    cr_assert(strstr(err.msg, "head_vocab_sizes"), "%s", err.msg);
    o = (struct q4_opts){ .gguf = true, .ple_layer = 1, .omit = "blk.3.indexer.k_proj.weight" };
    cr_assert_eq(load_err(&o, &err), HS_ERR_FORMAT);
    cr_assert(strstr(err.msg, "blk.3.indexer.k_proj.weight"), "%s", err.msg);
    o = (struct q4_opts){ .ple_layer = 1, .omit = P "layers.1.ple.ple_embedding.ngram_embedding.shard_2.weight" };
    cr_assert_neq(load_err(&o, &err), HS_OK, "a missing shard is caught");
}

Test(qwen4exp, inspect_reports_the_new_parts)
{
    struct q4_opts o = { .ple_layer = 1 };
    char dir[128];
    snprintf(dir, sizeof dir, "%s/hf", tmpdir);
    cr_assert_eq(mkdir(dir, 0755), 0);
    char *path = write_model(dir, &o);
    struct strbuf sb;
    strbuf_init(&sb);
    struct hs_err err = { 0 };
    cr_assert_eq(model_inspect(path, false, &sb, &err), HS_OK, "%s", err.msg);
    cr_assert(strstr(sb.buf, "architecture  qwen4exp"), "%s", sb.buf);
    cr_assert(strstr(sb.buf, "4 residual streams, mixer rank 3"), "%s", sb.buf);
    cr_assert(strstr(sb.buf, "indexer heads 2 x 4, blocks of 4 tokens, top 2 blocks per query"), "%s", sb.buf);
    cr_assert(strstr(sb.buf, "layer 1, orders 2..3, 4 heads x 3, table 36 rows in 4 shards"), "%s", sb.buf);
    cr_assert(strstr(sb.buf, "gate sigmoid"), "%s", sb.buf);
    strbuf_free(&sb);
    strbuf_init(&sb);
    cr_assert_eq(model_inspect(path, true, &sb, &err), HS_OK, "%s", err.msg);
    cr_assert(strstr(sb.buf, "\"ple_rows\": 36") && strstr(sb.buf, "\"hc_streams\": 4"), "%s", sb.buf);
    strbuf_free(&sb);
    free(path);
}
