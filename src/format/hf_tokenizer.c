/* hf_tokenizer.c — reader for Hugging Face tokenizer.json files (byte-level BPE only).
 *
 * Design note
 * -----------
 * What it is for: `headstart mkmodel --tokenizer-json` re-emits a real tokenizer (e.g.
 * Qwen3's) as GGUF vocabulary, and the tokenizer module needs the same facts: the id of
 * every token, the merge list, the added tokens with their flags, the split regex of the
 * pre-tokenizer and the normaliser. Everything else in the file is ignored.
 *
 * Accepted shape (anything else is an error naming the JSON path):
 *   model            {type: "BPE", vocab: {token: id}, merges: ["a b", ...] or [["a","b"], ...]}
 *   added_tokens     [{id, content, special, normalized, lstrip, rstrip, single_word}] (optional)
 *   pre_tokenizer    null, Split, ByteLevel, or a Sequence (nested allowed) of those
 *   normalizer       null or {type: ...}; a Sequence of one normaliser reads as that one
 *
 * Invariants:
 *   1. Every id is an integer in [0, 2^31) and below HF_TOKENIZER_MAX_VOCAB (a memory
 *      bound: the id table is dense). n_vocab = 1 + the largest id seen.
 *   2. No id names two different strings (an added token may repeat its vocab entry).
 *   3. Every merge is stored as "left right" with both parts non-empty and free of spaces,
 *      the form GGUF's tokenizer.ggml.merges and llama.cpp's parser expect.
 *   4. At most one Split pre-tokenizer, with behaviour "Isolated", invert false and a
 *      Regex pattern; ByteLevel only as the Qwen/GPT-4-style byte mapper (add_prefix_space
 *      and use_regex false). Other pre-tokenizers are HS_ERR_UNSUPPORTED: tokenising with
 *      a part of the pipeline missing would silently give wrong ids.
 *   5. On failure *t is left zeroed (all partial allocations freed).
 * Duplicate JSON keys are accepted (jansson keeps the last), as Python's json does.
 */
#include "format/format.h"
#include "sys/sys.h"

#include <jansson.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define HF_TOKENIZER_MAX_FILE (512ull << 20)
#define HF_TOKENIZER_MAX_VOCAB (1ll << 24) /* 16.7M ids; real vocabularies are < 300k */
#define HF_TOKENIZER_MAX_ID ((1ll << 31) - 1)

/* Parsing context: file name for messages, output, error. */
struct ctx {
    const char *path;
    struct hf_tokenizer *t;
    struct hs_err *err;
};

__attribute__((format(printf, 4, 5)))
static int fail(struct ctx *c, int code, const char *jpath, const char *fmt, ...)
{
    char reason[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    return hs_err_set(c->err, code, "%s: %s: %s", c->path, jpath, reason);
}

/* A JSON path element for a token string key: model.vocab["abc"], shortened if long. */
static void key_path(char *buf, size_t len, const char *prefix, const char *key)
{
    size_t n = strlen(key);
    if (n > 48) snprintf(buf, len, "%s[\"%.48s...\"]", prefix, key);
    else snprintf(buf, len, "%s[\"%s\"]", prefix, key);
}

/* Read an id: an integer in [0, 2^31). */
static int read_id(struct ctx *c, const json_t *v, const char *jpath, int64_t *out)
{
    if (!json_is_integer(v))
        return fail(c, HS_ERR_FORMAT, jpath, "id is not an integer");
    json_int_t id = json_integer_value(v);
    if (id < 0) return fail(c, HS_ERR_FORMAT, jpath, "id %" PRId64 " is negative", (int64_t)id);
    if (id > HF_TOKENIZER_MAX_ID)
        return fail(c, HS_ERR_FORMAT, jpath, "id %" PRId64 " is not below 2^31", (int64_t)id);
    if (id >= HF_TOKENIZER_MAX_VOCAB)
        return fail(c, HS_ERR_LIMIT, jpath, "id %" PRId64 " exceeds the supported vocabulary size %lld",
                    (int64_t)id, HF_TOKENIZER_MAX_VOCAB);
    *out = (int64_t)id;
    return HS_OK;
}

/* An optional boolean member; absent keeps *out. */
static int read_opt_bool(struct ctx *c, const json_t *obj, const char *key, const char *jpath,
                         bool *out)
{
    const json_t *v = json_object_get(obj, key);
    if (!v) return HS_OK;
    if (!json_is_boolean(v)) {
        char p[160];
        snprintf(p, sizeof p, "%s.%s", jpath, key);
        return fail(c, HS_ERR_FORMAT, p, "not a boolean");
    }
    *out = json_is_true(v);
    return HS_OK;
}

static int parse_added(struct ctx *c, const json_t *arr)
{
    if (!arr || json_is_null(arr)) return HS_OK;
    if (!json_is_array(arr)) return fail(c, HS_ERR_FORMAT, "added_tokens", "not an array");
    size_t n = json_array_size(arr);
    if (n > (size_t)HF_TOKENIZER_MAX_VOCAB)
        return fail(c, HS_ERR_LIMIT, "added_tokens", "%zu entries is too many", n);
    c->t->added = hs_calloc(n ? n : 1, sizeof *c->t->added);
    for (size_t i = 0; i < n; i++) {
        char jp[64];
        snprintf(jp, sizeof jp, "added_tokens[%zu]", i);
        const json_t *e = json_array_get(arr, i);
        if (!json_is_object(e)) return fail(c, HS_ERR_FORMAT, jp, "not an object");
        struct hf_added_token *a = &c->t->added[i];
        char sub[96];
        snprintf(sub, sizeof sub, "%s.id", jp);
        const json_t *idv = json_object_get(e, "id");
        if (!idv) return fail(c, HS_ERR_FORMAT, sub, "missing");
        int rc = read_id(c, idv, sub, &a->id);
        if (rc) return rc;
        snprintf(sub, sizeof sub, "%s.content", jp);
        const json_t *cv = json_object_get(e, "content");
        if (!json_is_string(cv)) return fail(c, HS_ERR_FORMAT, sub, cv ? "not a string" : "missing");
        if (json_string_length(cv) == 0) return fail(c, HS_ERR_FORMAT, sub, "empty token");
        a->special = false;
        if ((rc = read_opt_bool(c, e, "special", jp, &a->special))) return rc;
        a->normalized = !a->special; /* the tokenizers library's default */
        if ((rc = read_opt_bool(c, e, "normalized", jp, &a->normalized)) ||
            (rc = read_opt_bool(c, e, "lstrip", jp, &a->lstrip)) ||
            (rc = read_opt_bool(c, e, "rstrip", jp, &a->rstrip)) ||
            (rc = read_opt_bool(c, e, "single_word", jp, &a->single_word)))
            return rc;
        a->content = hs_strdup(json_string_value(cv));
        c->t->n_added = (int)i + 1;
    }
    return HS_OK;
}

/* Place token `s` at `id`; an id may only repeat with the same string. */
static int place(struct ctx *c, int64_t id, const char *s, const char *jpath)
{
    char **slot = &c->t->id_to_token[id];
    if (*slot) {
        if (strcmp(*slot, s) == 0) return HS_OK;
        return fail(c, HS_ERR_FORMAT, jpath, "id %" PRId64 " is used by both \"%.48s\" and \"%.48s\"",
                    id, *slot, s);
    }
    *slot = hs_strdup(s);
    return HS_OK;
}

static int parse_vocab(struct ctx *c, const json_t *vocab)
{
    if (!vocab) return fail(c, HS_ERR_FORMAT, "model.vocab", "missing");
    if (!json_is_object(vocab)) return fail(c, HS_ERR_FORMAT, "model.vocab", "not an object");
    const char *key;
    const json_t *v;
    char jp[128];
    int64_t max_id = -1;
    json_object_foreach((json_t *)vocab, key, v) {
        key_path(jp, sizeof jp, "model.vocab", key);
        if (key[0] == '\0') return fail(c, HS_ERR_FORMAT, jp, "empty token");
        int64_t id;
        int rc = read_id(c, v, jp, &id);
        if (rc) return rc;
        if (id > max_id) max_id = id;
    }
    for (int i = 0; i < c->t->n_added; i++)
        if (c->t->added[i].id > max_id) max_id = c->t->added[i].id;
    if (max_id < 0) return fail(c, HS_ERR_FORMAT, "model.vocab", "no tokens");
    c->t->n_vocab = max_id + 1;
    c->t->id_to_token = hs_calloc((size_t)c->t->n_vocab, sizeof(char *));
    json_object_foreach((json_t *)vocab, key, v) {
        key_path(jp, sizeof jp, "model.vocab", key);
        int rc = place(c, (int64_t)json_integer_value(v), key, jp);
        if (rc) return rc;
    }
    for (int i = 0; i < c->t->n_added; i++) {
        snprintf(jp, sizeof jp, "added_tokens[%d]", i);
        int rc = place(c, c->t->added[i].id, c->t->added[i].content, jp);
        if (rc) return rc;
    }
    return HS_OK;
}

static int check_merge_part(struct ctx *c, const char *s, const char *jpath)
{
    if (s[0] == '\0') return fail(c, HS_ERR_FORMAT, jpath, "empty merge part");
    if (strchr(s, ' '))
        return fail(c, HS_ERR_UNSUPPORTED, jpath,
                    "merge part \"%.48s\" contains a space, which the \"left right\" form cannot hold", s);
    return HS_OK;
}

static int parse_merges(struct ctx *c, const json_t *merges)
{
    if (!merges) return fail(c, HS_ERR_FORMAT, "model.merges", "missing");
    if (!json_is_array(merges)) return fail(c, HS_ERR_FORMAT, "model.merges", "not an array");
    size_t n = json_array_size(merges);
    c->t->merges = hs_calloc(n ? n : 1, sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        char jp[64];
        snprintf(jp, sizeof jp, "model.merges[%zu]", i);
        const json_t *m = json_array_get(merges, i);
        char *out;
        if (json_is_string(m)) {
            const char *s = json_string_value(m);
            const char *sp = strchr(s, ' ');
            if (!sp || sp == s || sp[1] == '\0' || strchr(sp + 1, ' '))
                return fail(c, HS_ERR_FORMAT, jp, "\"%.64s\" is not two tokens separated by one space", s);
            out = hs_strdup(s);
        } else if (json_is_array(m)) {
            if (json_array_size(m) != 2) return fail(c, HS_ERR_FORMAT, jp, "a merge pair needs 2 strings, not %zu",
                                                     json_array_size(m));
            const json_t *l = json_array_get(m, 0), *r = json_array_get(m, 1);
            if (!json_is_string(l) || !json_is_string(r))
                return fail(c, HS_ERR_FORMAT, jp, "a merge pair needs 2 strings");
            int rc = check_merge_part(c, json_string_value(l), jp);
            if (!rc) rc = check_merge_part(c, json_string_value(r), jp);
            if (rc) return rc;
            size_t ll = json_string_length(l), rl = json_string_length(r);
            out = hs_malloc(ll + rl + 2);
            memcpy(out, json_string_value(l), ll);
            out[ll] = ' ';
            memcpy(out + ll + 1, json_string_value(r), rl + 1);
        } else {
            return fail(c, HS_ERR_FORMAT, jp, "neither a string nor a pair");
        }
        c->t->merges[i] = out;
        c->t->n_merges = (int64_t)i + 1;
    }
    return HS_OK;
}

static const char *type_of(struct ctx *c, const json_t *node, const char *jpath, int *rc)
{
    const json_t *ty = json_object_get(node, "type");
    if (!json_is_string(ty)) {
        char p[160];
        snprintf(p, sizeof p, "%s.type", jpath);
        *rc = fail(c, HS_ERR_FORMAT, p, ty ? "not a string" : "missing");
        return NULL;
    }
    *rc = HS_OK;
    return json_string_value(ty);
}

static int parse_pretok(struct ctx *c, const json_t *node, const char *jpath, int depth)
{
    if (json_is_null(node)) return HS_OK;
    if (!json_is_object(node)) return fail(c, HS_ERR_FORMAT, jpath, "not an object");
    if (depth > 8) return fail(c, HS_ERR_UNSUPPORTED, jpath, "Sequences nested too deeply");
    int rc;
    const char *type = type_of(c, node, jpath, &rc);
    if (!type) return rc;
    char p[160];
    if (strcmp(type, "Sequence") == 0) {
        const json_t *list = json_object_get(node, "pretokenizers");
        snprintf(p, sizeof p, "%s.pretokenizers", jpath);
        if (!json_is_array(list)) return fail(c, HS_ERR_FORMAT, p, list ? "not an array" : "missing");
        for (size_t i = 0; i < json_array_size(list); i++) {
            char pi[sizeof p + 24];
            snprintf(pi, sizeof pi, "%s[%zu]", p, i);
            if ((rc = parse_pretok(c, json_array_get(list, i), pi, depth + 1))) return rc;
        }
        return HS_OK;
    }
    if (strcmp(type, "Split") == 0) {
        if (c->t->split_regex) return fail(c, HS_ERR_UNSUPPORTED, jpath, "more than one Split pre-tokenizer");
        const json_t *pat = json_object_get(node, "pattern");
        snprintf(p, sizeof p, "%s.pattern", jpath);
        if (!json_is_object(pat)) return fail(c, HS_ERR_FORMAT, p, pat ? "not an object" : "missing");
        const json_t *re = json_object_get(pat, "Regex");
        if (!re) {
            if (json_object_get(pat, "String"))
                return fail(c, HS_ERR_UNSUPPORTED, p, "String patterns are not supported (only Regex)");
            return fail(c, HS_ERR_FORMAT, p, "no Regex");
        }
        if (!json_is_string(re)) return fail(c, HS_ERR_FORMAT, p, "Regex is not a string");
        const json_t *beh = json_object_get(node, "behavior");
        snprintf(p, sizeof p, "%s.behavior", jpath);
        if (!json_is_string(beh)) return fail(c, HS_ERR_FORMAT, p, beh ? "not a string" : "missing");
        if (strcmp(json_string_value(beh), "Isolated") != 0)
            return fail(c, HS_ERR_UNSUPPORTED, p, "behavior \"%.32s\" is not supported (only Isolated)",
                        json_string_value(beh));
        bool invert = false;
        if ((rc = read_opt_bool(c, node, "invert", jpath, &invert))) return rc;
        if (invert) {
            snprintf(p, sizeof p, "%s.invert", jpath);
            return fail(c, HS_ERR_UNSUPPORTED, p, "invert true is not supported");
        }
        c->t->split_regex = hs_strdup(json_string_value(re));
        return HS_OK;
    }
    if (strcmp(type, "ByteLevel") == 0) {
        bool add_prefix_space = false, use_regex = false;
        if ((rc = read_opt_bool(c, node, "add_prefix_space", jpath, &add_prefix_space)) ||
            (rc = read_opt_bool(c, node, "use_regex", jpath, &use_regex)))
            return rc;
        if (add_prefix_space || use_regex) {
            snprintf(p, sizeof p, "%s.%s", jpath, add_prefix_space ? "add_prefix_space" : "use_regex");
            return fail(c, HS_ERR_UNSUPPORTED, p, "ByteLevel with this option true is not supported");
        }
        c->t->byte_level = true;
        return HS_OK;
    }
    return fail(c, HS_ERR_UNSUPPORTED, jpath, "pre-tokenizer type \"%.32s\" is not supported", type);
}

static int parse_normalizer(struct ctx *c, const json_t *node, const char *jpath, int depth)
{
    if (!node || json_is_null(node)) return HS_OK;
    if (!json_is_object(node)) return fail(c, HS_ERR_FORMAT, jpath, "not an object");
    int rc;
    const char *type = type_of(c, node, jpath, &rc);
    if (!type) return rc;
    if (strcmp(type, "Sequence") == 0 && depth < 8) {
        const json_t *list = json_object_get(node, "normalizers");
        char p[160];
        snprintf(p, sizeof p, "%s.normalizers", jpath);
        if (!json_is_array(list)) return fail(c, HS_ERR_FORMAT, p, list ? "not an array" : "missing");
        if (json_array_size(list) == 0) return HS_OK; /* does nothing */
        if (json_array_size(list) == 1) {
            snprintf(p, sizeof p, "%s.normalizers[0]", jpath);
            return parse_normalizer(c, json_array_get(list, 0), p, depth + 1);
        }
    }
    c->t->normalizer = hs_strdup(type);
    return HS_OK;
}

static int parse_root(struct ctx *c, const json_t *root)
{
    if (!json_is_object(root)) return fail(c, HS_ERR_FORMAT, "(root)", "not an object");
    const json_t *model = json_object_get(root, "model");
    if (!json_is_object(model)) return fail(c, HS_ERR_FORMAT, "model", model ? "not an object" : "missing");
    int rc;
    const char *type = type_of(c, model, "model", &rc);
    if (!type) return rc;
    if (strcmp(type, "BPE") != 0)
        return fail(c, HS_ERR_UNSUPPORTED, "model.type", "\"%.32s\" is not supported (only BPE)", type);
    snprintf(c->t->model_type, sizeof c->t->model_type, "%s", type);
    if ((rc = parse_added(c, json_object_get(root, "added_tokens")))) return rc;
    if ((rc = parse_vocab(c, json_object_get(model, "vocab")))) return rc;
    if ((rc = parse_merges(c, json_object_get(model, "merges")))) return rc;
    const json_t *pre = json_object_get(root, "pre_tokenizer");
    if (pre && (rc = parse_pretok(c, pre, "pre_tokenizer", 0))) return rc;
    return parse_normalizer(c, json_object_get(root, "normalizer"), "normalizer", 0);
}

int hf_tokenizer_load(const char *path, struct hf_tokenizer *t, struct hs_err *err)
{
    memset(t, 0, sizeof *t);
    char *text = NULL;
    size_t len = 0;
    int rc = sys_file_read_all(path, HF_TOKENIZER_MAX_FILE, &text, &len, err);
    if (rc) return rc;
    json_error_t jerr;
    json_t *root = json_loadb(text, len, 0, &jerr);
    hs_free(text);
    if (!root)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: JSON error at line %d, column %d: %s", path,
                          jerr.line, jerr.column, jerr.text);
    struct ctx c = { path, t, err };
    rc = parse_root(&c, root);
    json_decref(root);
    if (rc) hf_tokenizer_free(t);
    return rc;
}

void hf_tokenizer_free(struct hf_tokenizer *t)
{
    if (!t) return;
    if (t->id_to_token)
        for (int64_t i = 0; i < t->n_vocab; i++) hs_free(t->id_to_token[i]);
    hs_free(t->id_to_token);
    if (t->merges)
        for (int64_t i = 0; i < t->n_merges; i++) hs_free(t->merges[i]);
    hs_free(t->merges);
    if (t->added)
        for (int i = 0; i < t->n_added; i++) hs_free(t->added[i].content);
    hs_free(t->added);
    hs_free(t->split_regex);
    hs_free(t->normalizer);
    memset(t, 0, sizeof *t);
}
