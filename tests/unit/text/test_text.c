/* test_text.c — a model's text side (src/text/model_text.c):
 *   1. the HF directory and the GGUF file of the same mkmodel model give the same
 *      special ids (<|im_start|>, <|im_end|>, <|endoftext|>, "system"), stop
 *      ids, chat template source and token ids for a text with special tokens in it;
 *   2. an HF directory's chat_template.jinja wins over tokenizer_config.json's template;
 *   3. a model_text stays usable after its model is freed (it borrows nothing from it),
 *      and model_text_free is safe twice and on a zeroed struct;
 *   4. a directory with no tokenizer.json is an error naming the file. */
#include <criterion/criterion.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mkmodel/mkmodel.h"
#include "sys/sys.h"
#include "text/text.h"

static char tx_dir[64];

static int tx_rm(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

static void tx_setup(void)
{
    strcpy(tx_dir, "/tmp/hs-text.XXXXXX");
    cr_assert_not_null(mkdtemp(tx_dir));
}

static void tx_teardown(void) { nftw(tx_dir, tx_rm, 16, FTW_DEPTH | FTW_PHYS); }

/* Write mkmodel's tiny qwen35 (seed 3) at dir/name; return the path (static buffer). */
static const char *tx_make(const char *name)
{
    static char out[2][160];
    static int which;
    char *p = out[which++ & 1];
    snprintf(p, sizeof out[0], "%s/%s", tx_dir, name);
    struct mkmodel_opts o;
    mkmodel_opts_default(&o);
    o.arch = MODEL_ARCH_QWEN35;
    o.seed = 3;
    o.dtype = strstr(name, ".gguf") ? DTYPE_Q8_0 : DTYPE_F32;
    o.out = p;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(mkmodel_write(&o, &err), 0, "mkmodel: %s", err.msg);
    return p;
}

/* Load path's text side; the model is freed before returning (invariant 3). */
static void tx_load(const char *path, struct model_text *mt)
{
    struct model *m = NULL;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(model_load(path, &m, &err), 0, "%s", err.msg);
    cr_assert_eq(model_text_load(m, mt, &err), 0, "%s", err.msg);
    model_free(m);
}

static void tx_ids(struct model_text *mt, const char *s, struct tokenizer_ids *ids)
{
    struct hs_err err;
    hs_err_clear(&err);
    memset(ids, 0, sizeof *ids);
    cr_assert_eq(tokenizer_encode(mt->tok, s, strlen(s), 0, ids, &err), 0, "%s", err.msg);
}

Test(text, hf_and_gguf_agree, .init = tx_setup, .fini = tx_teardown)
{
    struct model_text a, b;
    tx_load(tx_make("hf"), &a);
    tx_load(tx_make("m.gguf"), &b);
    /* (n_vocab may differ: a GGUF vocabulary has the embedding's pad rows as holes) */
    cr_assert_geq(a.im_start_id, 0);
    cr_assert_geq(a.im_end_id, 0);
    cr_assert_geq(a.eos_id, 0);
    cr_assert_eq(a.im_start_id, b.im_start_id);
    cr_assert_eq(a.im_end_id, b.im_end_id);
    cr_assert_eq(a.eos_id, b.eos_id);
    cr_assert_gt(a.n_system_ids, 0);
    cr_assert_eq(a.n_system_ids, b.n_system_ids);
    cr_assert_eq(memcmp(a.system_ids, b.system_ids, (size_t)a.n_system_ids * sizeof a.system_ids[0]), 0);
    cr_assert_eq(a.n_stop_ids, 2);
    cr_assert_eq(a.stop_ids[0], a.im_end_id);
    cr_assert_eq(a.stop_ids[1], a.eos_id);
    cr_assert_eq(b.n_stop_ids, 2);
    cr_assert_eq(memcmp(a.stop_ids, b.stop_ids, sizeof a.stop_ids), 0);
    cr_assert_not_null(a.tmpl);
    cr_assert_not_null(b.tmpl);
    cr_assert_str_eq(a.tmpl_source, b.tmpl_source);
    cr_assert_eq(b.nfc, 0); /* GGUF: none, as llama.cpp */
    struct tokenizer_ids x, y;
    const char *s = "<|im_start|>system\nYou are héllo, wörld 123!<|im_end|>\n";
    tx_ids(&a, s, &x);
    tx_ids(&b, s, &y);
    cr_assert_eq(x.n, y.n);
    cr_assert_eq(memcmp(x.v, y.v, x.n * sizeof x.v[0]), 0);
    cr_assert_eq(x.v[0], a.im_start_id);
    tokenizer_ids_free(&x);
    tokenizer_ids_free(&y);
    model_text_free(&a);
    model_text_free(&a);
    model_text_free(&b);
    struct model_text z;
    memset(&z, 0, sizeof z);
    model_text_free(&z);
    model_text_free(NULL);
}

Test(text, chat_template_jinja_wins, .init = tx_setup, .fini = tx_teardown)
{
    const char *dir = tx_make("hf");
    char *path = sys_path_join(dir, "chat_template.jinja");
    static const char tmpl[] = "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}";
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(sys_file_write_atomic(path, tmpl, strlen(tmpl), &err), 0, "%s", err.msg);
    hs_free(path);
    struct model_text mt;
    tx_load(dir, &mt);
    cr_assert_not_null(mt.tmpl);
    cr_assert_str_eq(mt.tmpl_source, tmpl);
    model_text_free(&mt);
}

Test(text, missing_tokenizer_is_an_error, .init = tx_setup, .fini = tx_teardown)
{
    const char *dir = tx_make("hf");
    char *path = sys_path_join(dir, "tokenizer.json");
    cr_assert_eq(remove(path), 0);
    hs_free(path);
    struct model *m = NULL;
    struct model_text mt;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(model_load(dir, &m, &err), 0, "%s", err.msg);
    cr_assert_neq(model_text_load(m, &mt, &err), 0);
    cr_assert(strstr(err.msg, "tokenizer.json"), "%s", err.msg);
    cr_assert_null(mt.tok);
    model_free(m);
}
