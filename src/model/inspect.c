/* inspect.c — `headstart inspect MODEL [--json]`: what a model file is, as model_load
 * sees it — architecture, format and files, hyperparameters, the layer pattern, every
 * tensor in file order, parameter counts and a tokenizer summary.
 *
 * The report is built from a successfully loaded model, so anything it prints is what
 * the engine would run; a file that does not load reports model_load's error instead.
 * JSON (for scripts and tests) and the human text carry the same facts.
 */
#include "model/model_int.h"

#include "sys/sys.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *kind_name(enum layer_kind k) { return k == LAYER_KIND_ATTN ? "ATTN" : "GDN"; }

/* The layer kinds compactly: the shortest repeating unit times its count
 * ("GDN GDN GDN ATTN ×6"), else runs ("GDN×3 ATTN GDN×2"). */
static void layer_pattern(const struct model_hparams *hp, struct strbuf *sb)
{
    const int n = (int)hp->n_layer;
    int p = n;
    for (int cand = 1; cand < n; cand++) {
        if (n % cand) continue;
        bool ok = true;
        for (int i = cand; ok && i < n; i++) ok = hp->layer_kind[i] == hp->layer_kind[i % cand];
        if (ok) { p = cand; break; }
    }
    if (p < n) {
        for (int i = 0; i < p; i++) strbuf_printf(sb, "%s%s", i ? " " : "", kind_name(hp->layer_kind[i]));
        strbuf_printf(sb, " \xc3\x97%d", n / p);
        return;
    }
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && hp->layer_kind[j] == hp->layer_kind[i]) j++;
        strbuf_printf(sb, "%s%s", i ? " " : "", kind_name(hp->layer_kind[i]));
        if (j - i > 1) strbuf_printf(sb, "\xc3\x97%d", j - i);
        i = j;
    }
}

/* "all", "none", or the MoE layer indices as ranges ("0-3,6"). */
static void moe_summary(const struct model_hparams *hp, struct strbuf *sb)
{
    int n_moe = 0;
    for (int i = 0; i < hp->n_layer; i++) n_moe += hp->layer_moe[i];
    if (n_moe == 0) { strbuf_puts(sb, "none"); return; }
    if (n_moe == hp->n_layer) { strbuf_puts(sb, "all"); return; }
    bool first = true;
    for (int i = 0; i < hp->n_layer;) {
        if (!hp->layer_moe[i]) { i++; continue; }
        int j = i;
        while (j + 1 < hp->n_layer && hp->layer_moe[j + 1]) j++;
        strbuf_printf(sb, first ? "%d" : ",%d", i);
        if (j > i) strbuf_printf(sb, "-%d", j);
        first = false;
        i = j + 1;
    }
}

struct ordered { const struct tensor_view *v; int index; };

static int cmp_file_order(const void *a, const void *b)
{
    const struct tensor_view *x = ((const struct ordered *)a)->v, *y = ((const struct ordered *)b)->v;
    if (x->file_index != y->file_index) return x->file_index < y->file_index ? -1 : 1;
    if (x->file_offset != y->file_offset) return x->file_offset < y->file_offset ? -1 : 1;
    return 0;
}

/* Tensor indices sorted by (file, offset); owned. */
static int *tensors_in_file_order(const struct tensor_set *ts)
{
    const int n = tensor_set_count(ts);
    struct ordered *o = hs_malloc(sizeof *o * (size_t)(n ? n : 1));
    for (int i = 0; i < n; i++) o[i] = (struct ordered){ tensor_set_at(ts, i), i };
    qsort(o, (size_t)n, sizeof *o, cmp_file_order);
    int *idx = hs_malloc(sizeof *idx * (size_t)(n ? n : 1));
    for (int k = 0; k < n; k++) idx[k] = o[k].index;
    hs_free(o);
    return idx;
}

/* ---- tokenizer summary -------------------------------------------------------------- */

struct tok_summary {
    bool present;
    char model[32], pre[32];
    int64_t n_tokens, n_merges, n_added, eos_id;
    bool has_template;
    /* HF */
    bool has_tokenizer_json, has_tokenizer_config, has_template_file;
    char error[HS_ERR_MSG_MAX];
};

static void gguf_str_copy(const struct gguf_value *v, char *out, size_t len)
{
    out[0] = '\0';
    if (!v || v->type != GGUF_TYPE_STRING) return;
    size_t n = v->v.str.len < len - 1 ? (size_t)v->v.str.len : len - 1;
    memcpy(out, v->v.str.ptr, n);
    out[n] = '\0';
}

static void tok_from_gguf(const struct gguf_file *g, struct tok_summary *t)
{
    const struct gguf_value *v = gguf_find(g, "tokenizer.ggml.model");
    t->present = v != NULL;
    gguf_str_copy(v, t->model, sizeof t->model);
    gguf_str_copy(gguf_find(g, "tokenizer.ggml.pre"), t->pre, sizeof t->pre);
    v = gguf_find(g, "tokenizer.ggml.tokens");
    t->n_tokens = v && v->type == GGUF_TYPE_ARRAY ? (int64_t)v->v.arr.n : -1;
    v = gguf_find(g, "tokenizer.ggml.merges");
    t->n_merges = v && v->type == GGUF_TYPE_ARRAY ? (int64_t)v->v.arr.n : -1;
    t->n_added = -1;
    t->eos_id = -1;
    struct hs_err e = { 0 };
    if (gguf_find(g, "tokenizer.ggml.eos_token_id") &&
        gguf_get_i64(g, "tokenizer.ggml.eos_token_id", &t->eos_id, &e) != HS_OK)
        t->eos_id = -1;
    t->has_template = gguf_find(g, "tokenizer.chat_template") != NULL;
}

static bool dir_has(const char *dir, const char *name)
{
    char *p = sys_path_join(dir, name);
    bool ok = sys_path_exists(p);
    hs_free(p);
    return ok;
}

static void tok_from_hf(const char *dir, struct tok_summary *t)
{
    t->has_tokenizer_json = dir_has(dir, "tokenizer.json");
    t->has_tokenizer_config = dir_has(dir, "tokenizer_config.json");
    t->has_template_file = dir_has(dir, "chat_template.jinja");
    t->present = t->has_tokenizer_json;
    t->n_tokens = t->n_merges = t->n_added = t->eos_id = -1;
    if (!t->has_tokenizer_json) return;
    char *p = sys_path_join(dir, "tokenizer.json");
    struct hf_tokenizer tk;
    memset(&tk, 0, sizeof tk);
    struct hs_err e = { 0 };
    if (hf_tokenizer_load(p, &tk, &e) == HS_OK) {
        snprintf(t->model, sizeof t->model, "%s", tk.model_type);
        t->n_tokens = tk.n_vocab;
        t->n_merges = tk.n_merges;
        t->n_added = tk.n_added;
    } else {
        snprintf(t->error, sizeof t->error, "%s", e.msg);
    }
    hf_tokenizer_free(&tk);
    hs_free(p);
}

/* ---- output ------------------------------------------------------------------------- */

/* A float as the double with its shortest decimal form (1e-06, not 9.99999997e-07). */
static double float_shortest(float f)
{
    char buf[32];
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, sizeof buf, "%.*g", p, (double)f);
        if ((float)strtod(buf, NULL) == f) return strtod(buf, NULL);
    }
    return (double)f;
}

static const char *gate_name(enum gdn_gate_act g) { return g == GDN_GATE_SIGMOID ? "sigmoid" : "silu"; }

static void json_report(const struct model *m, const struct tok_summary *tok, struct strbuf *out)
{
    const struct model_hparams *hp = model_hparams(m);
    const struct tensor_set *ts = model_tensors(m);
    struct jsonw w;
    jsonw_init(&w, out, 2);
    jsonw_obj_begin(&w);
    jsonw_key(&w, "path"); jsonw_str(&w, model_path(m));
    jsonw_key(&w, "format"); jsonw_str(&w, model_source(m) == MODEL_SOURCE_HF ? "hf" : "gguf");
    jsonw_key(&w, "architecture"); jsonw_str(&w, model_arch_name(hp->arch));
    jsonw_key(&w, "files");
    jsonw_arr_begin(&w);
    for (int i = 0; i < tensor_set_n_files(ts); i++) {
        jsonw_obj_begin(&w);
        jsonw_key(&w, "path"); jsonw_str(&w, tensor_set_file_path(ts, i));
        jsonw_key(&w, "bytes"); jsonw_uint(&w, tensor_set_file_size(ts, i));
        jsonw_obj_end(&w);
    }
    jsonw_arr_end(&w);
    jsonw_key(&w, "file_bytes"); jsonw_uint(&w, model_file_bytes(m));

    jsonw_key(&w, "hparams");
    jsonw_obj_begin(&w);
#define HI(name, v) do { jsonw_key(&w, name); jsonw_int(&w, v); } while (0)
    HI("n_vocab", hp->n_vocab); HI("n_embd", hp->n_embd); HI("n_layer", hp->n_layer);
    HI("n_ff", hp->n_ff); HI("n_head", hp->n_head); HI("n_head_kv", hp->n_head_kv);
    HI("head_dim", hp->head_dim); HI("n_rot", hp->n_rot);
    jsonw_key(&w, "rope_theta"); jsonw_double(&w, float_shortest(hp->rope_theta));
    jsonw_key(&w, "rms_eps"); jsonw_double(&w, float_shortest(hp->rms_eps));
    HI("n_ctx_train", hp->n_ctx_train); HI("full_attn_interval", hp->full_attn_interval);
    HI("gdn_k_heads", hp->gdn_k_heads); HI("gdn_v_heads", hp->gdn_v_heads);
    HI("gdn_k_dim", hp->gdn_k_dim); HI("gdn_v_dim", hp->gdn_v_dim); HI("conv_kernel", hp->conv_kernel);
    jsonw_key(&w, "gdn_gate"); jsonw_str(&w, gate_name(hp->gdn_gate));
    HI("n_expert", hp->n_expert); HI("n_expert_used", hp->n_expert_used);
    HI("n_ff_exp", hp->n_ff_exp); HI("n_ff_shexp", hp->n_ff_shexp);
    jsonw_key(&w, "norm_topk_prob"); jsonw_bool(&w, hp->norm_topk_prob);
    HI("n_mtp", hp->n_mtp);
    jsonw_key(&w, "tied_embeddings"); jsonw_bool(&w, hp->tied_embeddings);
    if (hp->hc_n > 0) {
        HI("hc_streams", hp->hc_n); HI("hc_rank", hp->hc_rank);
        HI("indexer_heads", hp->idx_heads); HI("indexer_head_dim", hp->idx_dim);
        HI("qsa_block", hp->qsa_block); HI("qsa_top_blocks", hp->qsa_top_blocks);
        HI("ple_layer", hp->ple_layer); HI("ple_ngram", hp->ple_ngram); HI("ple_heads", hp->ple_heads);
        HI("ple_row", hp->ple_row); HI("ple_kernel", hp->ple_kernel); HI("ple_rows", hp->ple_rows);
        HI("ple_shards", hp->ple_shards); HI("ple_eos", hp->ple_eos);
    }
#undef HI
    jsonw_obj_end(&w);

    struct strbuf pat;
    strbuf_init(&pat);
    layer_pattern(hp, &pat);
    jsonw_key(&w, "layers");
    jsonw_obj_begin(&w);
    jsonw_key(&w, "pattern"); jsonw_str(&w, pat.buf);
    jsonw_key(&w, "kinds");
    jsonw_arr_begin(&w);
    for (int i = 0; i < hp->n_layer; i++) jsonw_str(&w, kind_name(hp->layer_kind[i]));
    jsonw_arr_end(&w);
    jsonw_key(&w, "moe");
    jsonw_arr_begin(&w);
    for (int i = 0; i < hp->n_layer; i++) jsonw_bool(&w, hp->layer_moe[i]);
    jsonw_arr_end(&w);
    jsonw_obj_end(&w);
    strbuf_free(&pat);

    jsonw_key(&w, "params");
    jsonw_obj_begin(&w);
    jsonw_key(&w, "main"); jsonw_uint(&w, model_n_params(m));
    jsonw_key(&w, "mtp"); jsonw_uint(&w, model_n_params_mtp(m));
    jsonw_obj_end(&w);

    jsonw_key(&w, "tokenizer");
    jsonw_obj_begin(&w);
    jsonw_key(&w, "present"); jsonw_bool(&w, tok->present);
    if (tok->model[0]) { jsonw_key(&w, "model"); jsonw_str(&w, tok->model); }
    if (tok->pre[0]) { jsonw_key(&w, "pre"); jsonw_str(&w, tok->pre); }
    if (tok->n_tokens >= 0) { jsonw_key(&w, "n_tokens"); jsonw_int(&w, tok->n_tokens); }
    if (tok->n_merges >= 0) { jsonw_key(&w, "n_merges"); jsonw_int(&w, tok->n_merges); }
    if (tok->n_added >= 0) { jsonw_key(&w, "n_added"); jsonw_int(&w, tok->n_added); }
    if (tok->eos_id >= 0) { jsonw_key(&w, "eos_id"); jsonw_int(&w, tok->eos_id); }
    if (model_source(m) == MODEL_SOURCE_GGUF) {
        jsonw_key(&w, "has_chat_template"); jsonw_bool(&w, tok->has_template);
    } else {
        jsonw_key(&w, "tokenizer_json"); jsonw_bool(&w, tok->has_tokenizer_json);
        jsonw_key(&w, "tokenizer_config_json"); jsonw_bool(&w, tok->has_tokenizer_config);
        jsonw_key(&w, "chat_template_jinja"); jsonw_bool(&w, tok->has_template_file);
    }
    if (tok->error[0]) { jsonw_key(&w, "error"); jsonw_str(&w, tok->error); }
    jsonw_obj_end(&w);

    jsonw_key(&w, "tensors");
    jsonw_arr_begin(&w);
    int *order = tensors_in_file_order(ts);
    for (int k = 0; k < tensor_set_count(ts); k++) {
        const struct tensor_view *t = tensor_set_at(ts, order[k]);
        jsonw_obj_begin(&w);
        jsonw_key(&w, "name"); jsonw_str(&w, t->name);
        jsonw_key(&w, "dtype"); jsonw_str(&w, dtype_info(t->dtype)->name);
        jsonw_key(&w, "shape");
        jsonw_arr_begin(&w);
        for (int d = 0; d < t->n_dims; d++) jsonw_int(&w, t->shape[d]);
        jsonw_arr_end(&w);
        jsonw_key(&w, "bytes"); jsonw_uint(&w, t->n_bytes);
        jsonw_key(&w, "file"); jsonw_int(&w, t->file_index);
        jsonw_key(&w, "offset"); jsonw_uint(&w, t->file_offset);
        jsonw_key(&w, "used"); jsonw_bool(&w, model_tensor_claimed(m, order[k]));
        jsonw_obj_end(&w);
    }
    hs_free(order);
    jsonw_arr_end(&w);
    jsonw_obj_end(&w);
    strbuf_putc(out, '\n');
}

/* "12.35M" style count. */
static const char *fmt_count(uint64_t n, char *buf, size_t len)
{
    if (n >= 1000000000ull) snprintf(buf, len, "%.2fB", (double)n / 1e9);
    else if (n >= 1000000ull) snprintf(buf, len, "%.2fM", (double)n / 1e6);
    else if (n >= 1000ull) snprintf(buf, len, "%.2fK", (double)n / 1e3);
    else snprintf(buf, len, "%" PRIu64, n);
    return buf;
}

static void human_report(const struct model *m, const struct tok_summary *tok, struct strbuf *out)
{
    const struct model_hparams *hp = model_hparams(m);
    const struct tensor_set *ts = model_tensors(m);
    char s1[32], s2[32];
    const bool hf = model_source(m) == MODEL_SOURCE_HF;
    strbuf_printf(out, "model         %s\n", model_path(m));
    strbuf_printf(out, "architecture  %s\n", model_arch_name(hp->arch));
    strbuf_printf(out, "format        %s, %d file%s, %s\n", hf ? "hf safetensors" : "gguf",
                  tensor_set_n_files(ts), tensor_set_n_files(ts) == 1 ? "" : "s",
                  hs_format_size(model_file_bytes(m), s1, sizeof s1));
    for (int i = 0; i < tensor_set_n_files(ts); i++)
        strbuf_printf(out, "  file        %s  %s\n", tensor_set_file_path(ts, i),
                      hs_format_size(tensor_set_file_size(ts, i), s1, sizeof s1));
    strbuf_printf(out, "parameters    %s main (%" PRIu64 "), %s MTP (%" PRIu64 ")\n",
                  fmt_count(model_n_params(m), s1, sizeof s1), model_n_params(m),
                  fmt_count(model_n_params_mtp(m), s2, sizeof s2), model_n_params_mtp(m));
    strbuf_printf(out, "hparams       vocab %" PRId64 ", hidden %" PRId64 ", layers %" PRId64 ", ffn %" PRId64
                  ", context %" PRId64 ", rms eps %g\n",
                  hp->n_vocab, hp->n_embd, hp->n_layer, hp->n_ff, hp->n_ctx_train, (double)hp->rms_eps);
    strbuf_printf(out, "  attention   heads %" PRId64 ", kv heads %" PRId64 ", head dim %" PRId64
                  ", rope dims %" PRId64 ", theta %g, every %" PRId64 " layers\n",
                  hp->n_head, hp->n_head_kv, hp->head_dim, hp->n_rot, (double)hp->rope_theta,
                  hp->full_attn_interval);
    strbuf_printf(out, "  gdn         k heads %" PRId64 ", v heads %" PRId64 ", k dim %" PRId64 ", v dim %" PRId64
                  ", conv %" PRId64 ", gate %s\n",
                  hp->gdn_k_heads, hp->gdn_v_heads, hp->gdn_k_dim, hp->gdn_v_dim, hp->conv_kernel,
                  gate_name(hp->gdn_gate));
    if (hp->n_expert > 0)
        strbuf_printf(out, "  moe         experts %" PRId64 ", used %" PRId64 ", expert ffn %" PRId64
                      ", shared ffn %" PRId64 ", renormalise top-k %s\n",
                      hp->n_expert, hp->n_expert_used, hp->n_ff_exp, hp->n_ff_shexp,
                      hp->norm_topk_prob ? "yes" : "no");
    if (hp->hc_n > 0) {
        strbuf_printf(out, "  hyper-conn  %" PRId64 " residual streams, mixer rank %" PRId64 "\n", hp->hc_n, hp->hc_rank);
        strbuf_printf(out, "  qsa         indexer heads %" PRId64 " x %" PRId64 ", blocks of %" PRId64 " tokens, top %" PRId64
                      " blocks per query\n", hp->idx_heads, hp->idx_dim, hp->qsa_block, hp->qsa_top_blocks);
        strbuf_printf(out, "  n-gram emb  layer %" PRId64 ", orders 2..%" PRId64 ", %" PRId64 " heads x %" PRId64
                      ", table %" PRId64 " rows in %" PRId64 " shard%s, conv %" PRId64 " taps, reset token %" PRId64 "\n",
                      hp->ple_layer, hp->ple_ngram, hp->ple_heads, hp->ple_row, hp->ple_rows, hp->ple_shards,
                      hp->ple_shards == 1 ? "" : "s", hp->ple_kernel, hp->ple_eos);
    }
    strbuf_printf(out, "  head        %s, MTP blocks %" PRId64 "\n",
                  hp->tied_embeddings ? "tied to the embedding" : "own lm_head", hp->n_mtp);
    strbuf_puts(out, "layers        ");
    layer_pattern(hp, out);
    strbuf_puts(out, "\n  MoE layers  ");
    moe_summary(hp, out);
    strbuf_putc(out, '\n');

    strbuf_puts(out, "tokenizer     ");
    if (!tok->present) {
        strbuf_puts(out, "none");
    } else {
        strbuf_printf(out, "%s", tok->model[0] ? tok->model : "?");
        if (tok->pre[0]) strbuf_printf(out, " (pre %s)", tok->pre);
        if (tok->n_tokens >= 0) strbuf_printf(out, ", %" PRId64 " tokens", tok->n_tokens);
        if (tok->n_merges >= 0) strbuf_printf(out, ", %" PRId64 " merges", tok->n_merges);
        if (tok->n_added >= 0) strbuf_printf(out, ", %" PRId64 " added", tok->n_added);
        if (tok->eos_id >= 0) strbuf_printf(out, ", eos %" PRId64, tok->eos_id);
    }
    if (hf)
        strbuf_printf(out, "; tokenizer.json %s, tokenizer_config.json %s, chat_template.jinja %s",
                      tok->has_tokenizer_json ? "yes" : "no", tok->has_tokenizer_config ? "yes" : "no",
                      tok->has_template_file ? "yes" : "no");
    else
        strbuf_printf(out, "; chat template %s", tok->has_template ? "yes" : "no");
    if (tok->error[0]) strbuf_printf(out, "\n  error       %s", tok->error);
    strbuf_putc(out, '\n');

    const int n = tensor_set_count(ts);
    size_t wname = 4;
    for (int i = 0; i < n; i++) wname = HS_MAX(wname, strlen(tensor_set_at(ts, i)->name));
    strbuf_printf(out, "tensors       %d (in file order)\n", n);
    strbuf_printf(out, "  %-*s  %-6s  %-22s  %s\n", (int)wname, "name", "dtype", "shape", "bytes");
    int *order = tensors_in_file_order(ts);
    for (int k = 0; k < n; k++) {
        const struct tensor_view *t = tensor_set_at(ts, order[k]);
        char shape[96];
        tensor_shape_str(t, shape, sizeof shape);
        strbuf_printf(out, "  %-*s  %-6s  %-22s  %" PRIu64 "%s\n", (int)wname, t->name, dtype_info(t->dtype)->name,
                      shape, t->n_bytes, model_tensor_claimed(m, order[k]) ? "" : "  (unused)");
    }
    hs_free(order);
}

int model_inspect(const char *path, bool as_json, struct strbuf *out, struct hs_err *err)
{
    struct model *m = NULL;
    int rc = model_load(path, &m, err);
    if (rc) return rc;
    struct tok_summary tok;
    memset(&tok, 0, sizeof tok);
    if (model_gguf(m)) tok_from_gguf(model_gguf(m), &tok);
    else tok_from_hf(model_dir(m), &tok);
    if (as_json) json_report(m, &tok, out);
    else human_report(m, &tok, out);
    model_free(m);
    return HS_OK;
}
