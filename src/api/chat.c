/*
 * chat.c — a model's chat template bound to its special tokens, rendering neutral
 * conversations (api.h) into prompt text through the Jinja interpreter (jinja/jinja.h).
 *
 * The render context is what transformers' apply_chat_template passes, so templates take
 * the same branches they take in Python:
 *   messages               the conversation (borrowed, not copied)
 *   tools                  only when the request has a non-empty tools array
 *   add_generation_prompt  a bool
 *   enable_thinking        only when the request sets it (a bool); unset leaves the
 *                          template's default, which `is defined` tests see
 *   every other chat_template_kwargs entry, as the JSON value the request sent (e.g.
 *                          Qwen3.6's preserve_thinking); set before the names above,
 *                          which the parsers keep out of it
 *   bos_token, eos_token   only when the model has them
 *
 * The tool-call dialect (XML or JSON inside <tool_call>) is a property of the compiled
 * template, read once from its source; a forced tool call starts in it.
 */
#include "api/api.h"
#include "jinja/jinja.h"

#include <string.h>

struct chat_template {
    struct jinja_template *tpl;
    char *bos;   /* NULL: undefined in the template */
    char *eos;
    enum chat_tool_dialect dialect;
};

int chat_template_new(const char *source, const char *bos, const char *eos,
                      struct chat_template **out, struct hs_err *err)
{
    *out = NULL;
    if (!source)
        return hs_err_set(err, HS_ERR_INVALID, "chat template: no template source");
    struct jinja_template *tpl = NULL;
    int rc = jinja_compile(source, strlen(source), &tpl, err);
    if (rc != HS_OK) {
        hs_err_prefix(err, "chat template: ");
        return rc;
    }
    struct chat_template *t = hs_calloc(1, sizeof(*t));
    t->tpl = tpl;
    t->bos = bos ? hs_strdup(bos) : NULL;
    t->eos = eos ? hs_strdup(eos) : NULL;
    /* Qwen3.5's templates write <function=NAME> blocks; Qwen3's write JSON objects */
    t->dialect = strstr(source, "<function=") ? CHAT_TOOL_DIALECT_XML : CHAT_TOOL_DIALECT_JSON;
    *out = t;
    return HS_OK;
}

int chat_template_render(const struct chat_template *t, const struct chat_request *c,
                         struct strbuf *out, struct hs_err *err)
{
    if (!json_is_array(c->messages))
        return hs_err_set(err, HS_ERR_INVALID, "chat template: the conversation has no messages array");
    json_t *ctx = json_object();
    if (json_is_object(c->template_kwargs)) json_object_update(ctx, c->template_kwargs);
    json_object_set(ctx, "messages", c->messages);
    if (json_is_array(c->tools) && json_array_size(c->tools) > 0)
        json_object_set(ctx, "tools", c->tools);
    json_object_set_new(ctx, "add_generation_prompt", json_boolean(c->add_generation_prompt));
    if (c->enable_thinking >= 0)
        json_object_set_new(ctx, "enable_thinking", json_boolean(c->enable_thinking != 0));
    if (t->bos)
        json_object_set_new(ctx, "bos_token", json_string(t->bos));
    if (t->eos)
        json_object_set_new(ctx, "eos_token", json_string(t->eos));
    int rc = jinja_render(t->tpl, ctx, out, err);
    json_decref(ctx);
    if (rc != HS_OK)
        hs_err_prefix(err, "chat template: ");
    return rc;
}

void chat_template_free(struct chat_template *t)
{
    if (!t)
        return;
    jinja_free(t->tpl);
    hs_free(t->bos);
    hs_free(t->eos);
    hs_free(t);
}

enum chat_tool_dialect chat_template_tool_dialect(const struct chat_template *t)
{
    return t->dialect;
}

void chat_forced_call_text(const struct chat_template *t, bool thinking, const char *name, struct strbuf *out)
{
    if (thinking) strbuf_puts(out, "\n</think>\n\n");
    strbuf_puts(out, "<tool_call>\n");
    if (!name) return;
    if (t->dialect == CHAT_TOOL_DIALECT_XML) {
        strbuf_printf(out, "<function=%s>\n", name);
    } else {
        json_t *js = json_string(name);
        strbuf_puts(out, "{\"name\": ");
        jinja_tojson(js, -1, out);
        strbuf_puts(out, ", \"arguments\": ");
        json_decref(js);
    }
}
