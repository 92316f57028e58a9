/* hf_tokenizer_config.c — reader for Hugging Face tokenizer_config.json: the chat template
 * and the special-token strings a template may reference.
 *
 * Accepted shape: an object; `chat_template` a string or a list of {name, template} (the
 * entry named "default" is used); `bos_token` / `eos_token` / `pad_token` a string, null, or
 * an object with a string `content`; `add_bos_token` a boolean. Other keys are ignored.
 * Errors name the file and the key; on failure *c is left zeroed.
 */
#include "format/format_int.h"

#include <string.h>

#define TOKCFG_MAX_BYTES (64u << 20)

static int token_string(const json_t *v, const char *path, const char *key, char **out,
                        struct hs_err *err)
{
    *out = NULL;
    if (!v || json_is_null(v)) return HS_OK;
    if (json_is_object(v)) v = json_object_get(v, "content");
    if (!json_is_string(v))
        return hs_err_set(err, HS_ERR_FORMAT, "%s: %s must be a string, null or {content: string}",
                          path, key);
    *out = hs_strndup(json_string_value(v), json_string_length(v));
    return HS_OK;
}

static int read_template(const json_t *v, const char *path, char **out, struct hs_err *err)
{
    *out = NULL;
    if (!v || json_is_null(v)) return HS_OK;
    if (json_is_string(v)) {
        *out = hs_strndup(json_string_value(v), json_string_length(v));
        return HS_OK;
    }
    if (!json_is_array(v))
        return hs_err_set(err, HS_ERR_FORMAT, "%s: chat_template is %s, not a string or a list",
                          path, format_json_kind(v));
    size_t i;
    const json_t *e;
    json_array_foreach(v, i, e) {
        const json_t *name = json_object_get(e, "name"), *tpl = json_object_get(e, "template");
        if (!json_is_string(name) || !json_is_string(tpl))
            return hs_err_set(err, HS_ERR_FORMAT, "%s: chat_template[%zu] needs string name and template",
                              path, i);
        if (strcmp(json_string_value(name), "default") == 0) {
            *out = hs_strndup(json_string_value(tpl), json_string_length(tpl));
            return HS_OK;
        }
    }
    return hs_err_set(err, HS_ERR_FORMAT, "%s: chat_template lists no template named \"default\"", path);
}

int hf_tokenizer_config_load(const char *path, struct hf_tokenizer_config *c, struct hs_err *err)
{
    memset(c, 0, sizeof *c);
    char *text;
    size_t len;
    int rc = sys_file_read_all(path, TOKCFG_MAX_BYTES, &text, &len, err);
    if (rc != HS_OK) return rc;
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    hs_free(text);
    if (!root)
        return hs_err_set(err, HS_ERR_FORMAT, "%s:%d:%d: %s", path, je.line, je.column, je.text);
    if (!json_is_object(root)) {
        rc = hs_err_set(err, HS_ERR_FORMAT, "%s: is %s, not a JSON object", path, format_json_kind(root));
    } else {
        rc = read_template(json_object_get(root, "chat_template"), path, &c->chat_template, err);
        if (rc == HS_OK) rc = token_string(json_object_get(root, "bos_token"), path, "bos_token", &c->bos_token, err);
        if (rc == HS_OK) rc = token_string(json_object_get(root, "eos_token"), path, "eos_token", &c->eos_token, err);
        if (rc == HS_OK) rc = token_string(json_object_get(root, "pad_token"), path, "pad_token", &c->pad_token, err);
        const json_t *ab = json_object_get(root, "add_bos_token");
        if (rc == HS_OK && ab && !json_is_boolean(ab) && !json_is_null(ab))
            rc = hs_err_set(err, HS_ERR_FORMAT, "%s: add_bos_token is %s, not a boolean", path, format_json_kind(ab));
        c->add_bos_token = json_is_true(ab);
    }
    json_decref(root);
    if (rc != HS_OK) hf_tokenizer_config_free(c);
    return rc;
}

void hf_tokenizer_config_free(struct hf_tokenizer_config *c)
{
    if (!c) return;
    hs_free(c->chat_template);
    hs_free(c->bos_token);
    hs_free(c->eos_token);
    hs_free(c->pad_token);
    memset(c, 0, sizeof *c);
}
