/* test_inspect.c — model_inspect: the human report and the JSON report (parsed back with
 * jansson) for HF and GGUF models written by test_load.c's helpers. */
#include <criterion/criterion.h>

#include "format/format.h"
#include "model/model.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* from test_load.c */
char *tl_write_basic(enum model_arch arch, bool gguf, int n_layer, const char *dir);
char *tl_tmpdir(void);
void tl_rmdir(char *dir);

static json_t *inspect_json(const char *path)
{
    struct strbuf out;
    strbuf_init(&out);
    struct hs_err err = { 0 };
    cr_assert_eq(model_inspect(path, true, &out, &err), HS_OK, "%s", err.msg);
    json_error_t je;
    json_t *root = json_loadb(out.buf, out.len, 0, &je);
    cr_assert_not_null(root, "JSON does not parse: %s (line %d)\n%s", je.text, je.line, out.buf);
    strbuf_free(&out);
    return root;
}

static char *inspect_text(const char *path)
{
    struct strbuf out;
    strbuf_init(&out);
    struct hs_err err = { 0 };
    cr_assert_eq(model_inspect(path, false, &out, &err), HS_OK, "%s", err.msg);
    return strbuf_detach(&out, NULL);
}

static int64_t jint(json_t *o, const char *path)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *cur = o;
    for (char *tok = strtok(buf, "."); tok; tok = strtok(NULL, ".")) cur = json_object_get(cur, tok);
    cr_assert(json_is_integer(cur), "%s is not an integer", path);
    return json_integer_value(cur);
}

static const char *jstr(json_t *o, const char *path)
{
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *cur = o;
    for (char *tok = strtok(buf, "."); tok; tok = strtok(NULL, ".")) cur = json_object_get(cur, tok);
    cr_assert(json_is_string(cur), "%s is not a string", path);
    return json_string_value(cur);
}

Test(inspect, gguf_json_round_trip)
{
    char *dir = tl_tmpdir();
    char *path = tl_write_basic(MODEL_ARCH_QWEN35, true, 8, dir);
    json_t *j = inspect_json(path);
    cr_assert_str_eq(jstr(j, "architecture"), "qwen35");
    cr_assert_str_eq(jstr(j, "format"), "gguf");
    cr_assert_eq(jint(j, "hparams.n_layer"), 8);
    cr_assert_eq(jint(j, "hparams.n_embd"), 64);
    cr_assert_eq(jint(j, "hparams.gdn_v_heads"), 6);
    cr_assert_eq(jint(j, "hparams.n_mtp"), 1);
    cr_assert_str_eq(jstr(j, "layers.pattern"), "GDN GDN GDN ATTN \xc3\x97" "2");
    cr_assert_eq(json_array_size(json_object_get(json_object_get(j, "layers"), "kinds")), 8);
    cr_assert_str_eq(jstr(j, "tokenizer.model"), "gpt2");
    cr_assert_str_eq(jstr(j, "tokenizer.pre"), "qwen35");
    cr_assert_eq(jint(j, "tokenizer.n_tokens"), 6);
    cr_assert_eq(jint(j, "tokenizer.n_merges"), 1);
    cr_assert_eq(jint(j, "tokenizer.eos_id"), 3);
    cr_assert(json_is_true(json_object_get(json_object_get(j, "tokenizer"), "has_chat_template")));

    struct model *m = NULL;
    struct hs_err err = { 0 };
    cr_assert_eq(model_load(path, &m, &err), HS_OK, "%s", err.msg);
    cr_assert_eq((uint64_t)jint(j, "params.main"), model_n_params(m));
    cr_assert_eq((uint64_t)jint(j, "params.mtp"), model_n_params_mtp(m));
    cr_assert_gt(model_n_params_mtp(m), 0);
    cr_assert_eq((uint64_t)jint(j, "file_bytes"), model_file_bytes(m));
    json_t *ts = json_object_get(j, "tensors");
    cr_assert_eq((int)json_array_size(ts), tensor_set_count(model_tensors(m)));
    uint64_t prev = 0, sum = 0;
    for (size_t i = 0; i < json_array_size(ts); i++) {
        json_t *t = json_array_get(ts, i);
        const char *name = json_string_value(json_object_get(t, "name"));
        const struct tensor_view *v = tensor_set_find(model_tensors(m), name);
        cr_assert_not_null(v, "%s", name);
        cr_assert_str_eq(json_string_value(json_object_get(t, "dtype")), dtype_info(v->dtype)->name);
        json_t *shape = json_object_get(t, "shape");
        cr_assert_eq((int)json_array_size(shape), v->n_dims);
        for (int d = 0; d < v->n_dims; d++) cr_assert_eq(json_integer_value(json_array_get(shape, (size_t)d)), v->shape[d]);
        cr_assert_eq((uint64_t)json_integer_value(json_object_get(t, "bytes")), v->n_bytes);
        uint64_t off = (uint64_t)json_integer_value(json_object_get(t, "offset"));
        cr_assert_geq(off, prev, "file order");
        prev = off;
        cr_assert(json_is_true(json_object_get(t, "used")), "%s", name);
        sum += tensor_n_elems(v);
    }
    cr_assert_eq(sum, model_n_params(m) + model_n_params_mtp(m));
    model_free(m);
    json_decref(j);
    free(path);
    tl_rmdir(dir);
}

Test(inspect, hf_human_report)
{
    char *dir = tl_tmpdir();
    char *path = tl_write_basic(MODEL_ARCH_QWEN3NEXT, false, 4, dir);
    char *txt = inspect_text(path);
    cr_assert(strstr(txt, "architecture  qwen3next\n"), "%s", txt);
    cr_assert(strstr(txt, "hf safetensors, 1 file"), "%s", txt);
    cr_assert(strstr(txt, "layers        GDN\xc3\x97" "3 ATTN\n"), "%s", txt);
    cr_assert(strstr(txt, "MoE layers  all"), "%s", txt);
    cr_assert(strstr(txt, "experts 4, used 2"), "%s", txt);
    cr_assert(strstr(txt, "MTP blocks 1"), "%s", txt);
    cr_assert(strstr(txt, "BPE, 4 tokens, 1 merges, 1 added"), "%s", txt);
    cr_assert(strstr(txt, "tokenizer.json yes, tokenizer_config.json yes, chat_template.jinja no"), "%s", txt);
    cr_assert(strstr(txt, "model.layers.0.linear_attn.in_proj_qkvz.weight"), "%s", txt);
    cr_assert(strstr(txt, "mtp.layers.0.mlp.experts.3.down_proj.weight"), "%s", txt);
    cr_assert_null(strstr(txt, "(unused)"), "%s", txt);
    free(txt);
    free(path);
    tl_rmdir(dir);
}

Test(inspect, hf_json_and_runs)
{
    char *dir = tl_tmpdir();
    char *path = tl_write_basic(MODEL_ARCH_QWEN35MOE, false, 6, dir);
    json_t *j = inspect_json(path);
    cr_assert_str_eq(jstr(j, "format"), "hf");
    cr_assert_str_eq(jstr(j, "architecture"), "qwen35moe");
    cr_assert_str_eq(jstr(j, "layers.pattern"), "GDN\xc3\x97" "3 ATTN GDN\xc3\x97" "2");
    json_t *moe = json_object_get(json_object_get(j, "layers"), "moe");
    cr_assert_eq(json_array_size(moe), 6);
    cr_assert(json_is_true(json_array_get(moe, 5)));
    json_t *tok = json_object_get(j, "tokenizer");
    cr_assert(json_is_true(json_object_get(tok, "tokenizer_json")));
    cr_assert_eq(jint(j, "tokenizer.n_tokens"), 4);
    cr_assert_eq(jint(j, "tokenizer.n_added"), 1);
    cr_assert_eq(jint(j, "hparams.n_expert"), 4);
    cr_assert(json_is_true(json_object_get(json_object_get(j, "hparams"), "norm_topk_prob")));
    json_decref(j);
    free(path);
    tl_rmdir(dir);
}

Test(inspect, load_error_is_returned)
{
    struct strbuf out;
    strbuf_init(&out);
    struct hs_err err = { 0 };
    cr_assert_neq(model_inspect("/nonexistent/hs_inspect.gguf", true, &out, &err), HS_OK);
    cr_assert(strstr(err.msg, "/nonexistent/hs_inspect.gguf"));
    cr_assert_eq(out.len, 0);
    strbuf_free(&out);
}
