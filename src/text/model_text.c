/* model_text.c — the tokenizer and chat template of a model, assembled from its files.
 *
 * Hugging Face directory: tokenizer.json (vocabulary, merges, added tokens with flags, the
 * Split regex, NFC when its normalizer says so) and the chat template from
 * chat_template.jinja when present, else tokenizer_config.json's chat_template.
 * GGUF: tokenizer.ggml.tokens / token_type / merges / pre and tokenizer.chat_template.
 * GGUF token types: 3 (control) become special added tokens, 4 (user-defined) non-special
 * added tokens, 5 (unused, e.g. [PAD] rows) holes; the split regex follows `pre`
 * ("qwen35" or "qwen2"); no NFC, as llama.cpp applies none to GGUF vocabularies.
 *
 * The invariants are text.h's.
 */
#include "format/format.h"
#include "sys/sys.h"
#include "text/text.h"

#include <string.h>

#define GGUF_TYPE_CONTROL 3
#define GGUF_TYPE_USER_DEFINED 4
#define GGUF_TYPE_UNUSED 5

static const struct { const char *pre; const char *regex; } gguf_pre_regex[] = {
    { "qwen35", TOKENIZER_REGEX_QWEN35 },
    { "qwen2", TOKENIZER_REGEX_QWEN2 },
};

static int load_hf(const char *dir, struct model_text *mt, char **tmpl, char **bos, char **eos,
                   struct hs_err *err)
{
    char *path = sys_path_join(dir, "tokenizer.json");
    struct hf_tokenizer ht;
    int rc = hf_tokenizer_load(path, &ht, err);
    hs_free(path);
    if (rc != HS_OK) return rc;
    struct tokenizer_added *added = hs_calloc((size_t)ht.n_added + 1, sizeof *added);
    for (int i = 0; i < ht.n_added; i++) {
        const struct hf_added_token *a = &ht.added[i];
        added[i].id = (int32_t)a->id;
        added[i].content = a->content;
        added[i].flags = (a->special ? TOKENIZER_ADDED_SPECIAL : 0) | (a->lstrip ? TOKENIZER_ADDED_LSTRIP : 0) |
                         (a->rstrip ? TOKENIZER_ADDED_RSTRIP : 0) | (a->normalized ? TOKENIZER_ADDED_NORMALIZED : 0) |
                         (a->single_word ? TOKENIZER_ADDED_SINGLE_WORD : 0);
    }
    mt->nfc = ht.normalizer && strcmp(ht.normalizer, "NFC") == 0;
    struct tokenizer_spec spec = {
        .n_vocab = (int32_t)ht.n_vocab, .id_to_token = (const char *const *)ht.id_to_token,
        .n_merges = ht.n_merges, .merges = (const char *const *)ht.merges,
        .n_added = ht.n_added, .added = added, .split_regex = ht.split_regex, .nfc = mt->nfc,
    };
    rc = tokenizer_init(&mt->tok, &spec, err);
    if (rc != HS_OK) hs_err_prefix(err, "%s/tokenizer.json: ", dir);
    hs_free(added);
    hf_tokenizer_free(&ht);
    if (rc != HS_OK) return rc;

    struct hf_tokenizer_config cfg;
    path = sys_path_join(dir, "tokenizer_config.json");
    rc = sys_path_exists(path) ? hf_tokenizer_config_load(path, &cfg, err) : (memset(&cfg, 0, sizeof cfg), HS_OK);
    hs_free(path);
    if (rc != HS_OK) return rc;
    path = sys_path_join(dir, "chat_template.jinja");
    if (sys_path_exists(path)) {
        size_t len;
        rc = sys_file_read_all(path, 16u << 20, tmpl, &len, err);
    } else {
        *tmpl = cfg.chat_template;
        cfg.chat_template = NULL;
    }
    hs_free(path);
    *bos = cfg.bos_token;
    *eos = cfg.eos_token;
    cfg.bos_token = cfg.eos_token = NULL;
    hf_tokenizer_config_free(&cfg);
    return rc;
}

static int load_gguf(const struct gguf_file *g, const char *path, struct model_text *mt, char **tmpl,
                     struct hs_err *err)
{
    char *model = NULL, *pre = NULL;
    int rc = gguf_get_str(g, "tokenizer.ggml.model", &model, err);
    if (rc == HS_OK && strcmp(model, "gpt2") != 0)
        rc = hs_err_set(err, HS_ERR_UNSUPPORTED, "%s: tokenizer.ggml.model '%s' is not supported (only gpt2 byte-level BPE)", path, model);
    if (rc == HS_OK) rc = gguf_get_str(g, "tokenizer.ggml.pre", &pre, err);
    const char *regex = NULL;
    for (size_t i = 0; rc == HS_OK && i < HS_ARRAY_LEN(gguf_pre_regex); i++)
        if (strcmp(pre, gguf_pre_regex[i].pre) == 0) regex = gguf_pre_regex[i].regex;
    if (rc == HS_OK && !regex)
        rc = hs_err_set(err, HS_ERR_UNSUPPORTED, "%s: tokenizer.ggml.pre '%s' is not supported (qwen35, qwen2)", path, pre);
    hs_free(model);
    hs_free(pre);
    const struct gguf_value *toks = NULL, *types = NULL, *merges = NULL;
    uint64_t n_tok = 0, n_types = 0, n_merges = 0;
    if (rc == HS_OK) rc = gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &toks, &n_tok, err);
    if (rc == HS_OK && gguf_find(g, "tokenizer.ggml.token_type"))
        rc = gguf_get_arr(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &types, &n_types, err);
    if (rc == HS_OK && gguf_find(g, "tokenizer.ggml.merges"))
        rc = gguf_get_arr(g, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &merges, &n_merges, err);
    if (rc == HS_OK && types && n_types != n_tok)
        rc = hs_err_set(err, HS_ERR_FORMAT, "%s: tokenizer.ggml.token_type has %llu entries for %llu tokens",
                        path, (unsigned long long)n_types, (unsigned long long)n_tok);
    if (rc == HS_OK && n_tok > INT32_MAX)
        rc = hs_err_set(err, HS_ERR_LIMIT, "%s: %llu tokens", path, (unsigned long long)n_tok);
    if (rc != HS_OK) return rc;

    char **vocab = hs_calloc((size_t)n_tok + 1, sizeof *vocab);
    char **mrg = hs_calloc((size_t)n_merges + 1, sizeof *mrg);
    struct tokenizer_added *added = hs_calloc((size_t)n_tok + 1, sizeof *added);
    int n_added = 0;
    for (uint64_t i = 0; i < n_tok; i++) {
        int64_t type = types ? types[i].v.i : 1;
        if (type == GGUF_TYPE_UNUSED) continue;
        vocab[i] = hs_strndup(toks[i].v.str.ptr, (size_t)toks[i].v.str.len);
        if (type == GGUF_TYPE_CONTROL || type == GGUF_TYPE_USER_DEFINED) {
            added[n_added].id = (int32_t)i;
            added[n_added].content = vocab[i];
            added[n_added].flags = type == GGUF_TYPE_CONTROL ? TOKENIZER_ADDED_SPECIAL : 0;
            n_added++;
        }
    }
    for (uint64_t i = 0; i < n_merges; i++) mrg[i] = hs_strndup(merges[i].v.str.ptr, (size_t)merges[i].v.str.len);
    struct tokenizer_spec spec = {
        .n_vocab = (int32_t)n_tok, .id_to_token = (const char *const *)vocab,
        .n_merges = (int64_t)n_merges, .merges = (const char *const *)mrg,
        .n_added = n_added, .added = added, .split_regex = regex, .nfc = false,
    };
    rc = tokenizer_init(&mt->tok, &spec, err);
    if (rc != HS_OK) hs_err_prefix(err, "%s: ", path);
    for (uint64_t i = 0; i < n_tok; i++) hs_free(vocab[i]);
    for (uint64_t i = 0; i < n_merges; i++) hs_free(mrg[i]);
    hs_free(vocab);
    hs_free(mrg);
    hs_free(added);
    if (rc == HS_OK && gguf_find(g, "tokenizer.chat_template"))
        rc = gguf_get_str(g, "tokenizer.chat_template", tmpl, err);
    return rc;
}

int model_text_load(const struct model *m, struct model_text *mt, struct hs_err *err)
{
    memset(mt, 0, sizeof *mt);
    mt->im_start_id = mt->im_end_id = mt->eos_id = -1;
    char *tmpl = NULL, *bos = NULL, *eos = NULL;
    int rc = model_gguf(m) ? load_gguf(model_gguf(m), model_path(m), mt, &tmpl, err)
                           : load_hf(model_dir(m), mt, &tmpl, &bos, &eos, err);
    if (rc == HS_OK) {
        mt->im_start_id = tokenizer_token_id(mt->tok, "<|im_start|>", 12);
        mt->im_end_id = tokenizer_token_id(mt->tok, "<|im_end|>", 10);
        mt->eos_id = tokenizer_token_id(mt->tok, "<|endoftext|>", 13);
        if (mt->im_end_id >= 0) mt->stop_ids[mt->n_stop_ids++] = mt->im_end_id;
        if (mt->eos_id >= 0) mt->stop_ids[mt->n_stop_ids++] = mt->eos_id;
        struct tokenizer_ids ids = { 0 };
        if (tokenizer_encode(mt->tok, "system", 6, TOKENIZER_ENCODE_NO_SPECIAL, &ids, err) == HS_OK &&
            ids.n <= HS_ARRAY_LEN(mt->system_ids)) {
            memcpy(mt->system_ids, ids.v, ids.n * sizeof *ids.v);
            mt->n_system_ids = (int)ids.n;
        }
        tokenizer_ids_free(&ids);
    }
    if (rc == HS_OK && tmpl) {
        rc = chat_template_new(tmpl, bos, eos, &mt->tmpl, err);
        if (rc != HS_OK) hs_err_prefix(err, "%s: chat template: ", model_path(m));
        mt->tmpl_source = tmpl;
        tmpl = NULL;
    }
    hs_free(tmpl);
    hs_free(bos);
    hs_free(eos);
    if (rc != HS_OK) model_text_free(mt);
    return rc;
}

void model_text_free(struct model_text *mt)
{
    if (!mt) return;
    tokenizer_free(mt->tok);
    chat_template_free(mt->tmpl);
    hs_free(mt->tmpl_source);
    memset(mt, 0, sizeof *mt);
    mt->im_start_id = mt->im_end_id = mt->eos_id = -1;
}
