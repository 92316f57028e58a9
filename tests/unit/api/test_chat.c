/*
 * test_chat.c — chat_template_*: the render context matches what transformers passes
 * (tools only when non-empty, enable_thinking only when set, bos/eos only when the model
 * has them), conversations are borrowed, and errors carry the template line. Expected
 * strings were produced by tools/ref/render.py (Python jinja2) from the same contexts.
 */
#include "api/api.h"

#include <criterion/criterion.h>
#include <string.h>

static const char *const TPL =
    "{{- bos_token if bos_token is defined else '[nobos]' }}\n"
    "{%- if tools %}\n"
    "<tools>\n"
    "{%- for tool in tools %}\n"
    "{{ tool | tojson }}\n"
    "{%- endfor %}\n"
    "</tools>\n"
    "{%- endif %}\n"
    "{%- for message in messages %}\n"
    "<|im_start|>{{ message.role }}\n"
    "{{ message.content | trim }}<|im_end|>\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "<|im_start|>assistant\n"
    "{%- if enable_thinking is defined %}{{ ' think=' ~ enable_thinking }}{% else %} think=default{% endif %}\n"
    "{%- endif %}\n"
    "[{{ eos_token if eos_token is defined else 'noeos' }}]\n";

static json_t *jparse(const char *s)
{
    json_error_t e;
    json_t *j = json_loads(s, 0, &e);
    cr_assert(j, "bad test JSON: %s", e.text);
    return j;
}

static void expect_render(const char *bos, const char *eos, struct chat_request *req, const char *want)
{
    struct chat_template *t = NULL;
    struct hs_err err = {0};
    cr_assert_eq(chat_template_new(TPL, bos, eos, &t, &err), HS_OK, "%s", err.msg);
    struct strbuf sb;
    strbuf_init(&sb);
    cr_assert_eq(chat_template_render(t, req, &sb, &err), HS_OK, "%s", err.msg);
    cr_expect_str_eq(sb.buf, want);
    strbuf_free(&sb);
    chat_template_free(t);
}

Test(chat_render, full_context)
{
    struct chat_request req = {
        .messages = jparse("[{\"role\": \"system\", \"content\": \" Sys \\u2713 \"}, "
                           "{\"role\": \"user\", \"content\": \"Hi \\\"there\\\"\"}]"),
        .tools = jparse("[{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"\\u00e9\", "
                        "\"parameters\": {\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"number\", "
                        "\"default\": 1.0}}}}}]"),
        .enable_thinking = 0,
        .add_generation_prompt = true,
    };
    expect_render("<s>", "<|im_end|>", &req,
                  "<s><tools>{\"type\": \"function\", \"function\": {\"name\": \"f\", \"description\": \"\303\251\", "
                  "\"parameters\": {\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"number\", "
                  "\"default\": 1.0}}}}}</tools><|im_start|>system\nSys \342\234\223<|im_end|><|im_start|>user\n"
                  "Hi \"there\"<|im_end|><|im_start|>assistant think=False[<|im_end|>]");
    /* the conversation is borrowed: no references are kept or dropped */
    cr_expect_eq(req.messages->refcount, 1);
    cr_expect_eq(req.tools->refcount, 1);
    json_decref(req.messages);
    json_decref(req.tools);
}

Test(chat_render, unset_values_are_undefined)
{
    struct chat_request req = {
        .messages = jparse("[{\"role\": \"user\", \"content\": \"q\"}]"),
        .tools = NULL,
        .enable_thinking = -1,
        .add_generation_prompt = true,
    };
    expect_render(NULL, NULL, &req, "[nobos]<|im_start|>user\nq<|im_end|><|im_start|>assistant think=default[noeos]");
    req.enable_thinking = 1;
    expect_render(NULL, NULL, &req, "[nobos]<|im_start|>user\nq<|im_end|><|im_start|>assistant think=True[noeos]");
    json_decref(req.messages);
}

Test(chat_render, empty_tools_are_absent)
{
    struct chat_request req = {
        .messages = jparse("[{\"role\": \"user\", \"content\": \"q\"}]"),
        .tools = json_array(),
        .enable_thinking = -1,
        .add_generation_prompt = false,
    };
    expect_render(NULL, "E", &req, "[nobos]<|im_start|>user\nq<|im_end|>[E]");
    json_decref(req.messages);
    json_decref(req.tools);
}

Test(chat_errors, render_error_names_the_line)
{
    const char *tpl = "{%- for m in messages %}\n"
                      "{%- if m.role == 'system' and not loop.first %}\n"
                      "{{- raise_exception('System message must be at the beginning.') }}\n"
                      "{%- endif %}\n"
                      "{%- endfor %}";
    struct chat_template *t = NULL;
    struct hs_err err = {0};
    cr_assert_eq(chat_template_new(tpl, NULL, NULL, &t, &err), HS_OK, "%s", err.msg);
    struct chat_request req = {
        .messages = jparse("[{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"system\", \"content\": \"late\"}]"),
        .enable_thinking = -1,
    };
    struct strbuf sb;
    strbuf_init(&sb);
    cr_expect_neq(chat_template_render(t, &req, &sb, &err), HS_OK);
    cr_expect(strstr(err.msg, "chat template: ") == err.msg, "%s", err.msg);
    cr_expect(strstr(err.msg, "line 3") != NULL, "%s", err.msg);
    cr_expect(strstr(err.msg, "System message must be at the beginning.") != NULL, "%s", err.msg);
    cr_expect_eq(sb.len, 0);
    strbuf_free(&sb);
    json_decref(req.messages);
    chat_template_free(t);
}

Test(chat_errors, bad_template_and_bad_request)
{
    struct chat_template *t = (struct chat_template *)&t;
    struct hs_err err = {0};
    cr_expect_neq(chat_template_new("{% for x in messages %}", NULL, NULL, &t, &err), HS_OK);
    cr_expect_null(t);
    cr_expect(strstr(err.msg, "chat template: template line 1") == err.msg, "%s", err.msg);
    chat_template_free(NULL);

    hs_err_clear(&err);
    cr_assert_eq(chat_template_new("x", NULL, NULL, &t, &err), HS_OK);
    struct chat_request req = {.messages = NULL, .enable_thinking = -1};
    struct strbuf sb;
    strbuf_init(&sb);
    cr_expect_neq(chat_template_render(t, &req, &sb, &err), HS_OK);
    strbuf_free(&sb);
    chat_template_free(t);
}

/* chat_template_kwargs beyond enable_thinking reach the template with their JSON types
 * (Qwen3.6's preserve_thinking is a boolean; numbers stay numbers, strings strings). */
Test(chat_render, template_kwargs_are_typed_variables)
{
    const char *tpl = "{%- if preserve_thinking is defined and preserve_thinking is true %}keep{% else %}drop{% endif %}"
                      "|{{ depth + 1 }}|{{ style | upper }}|{{ messages | length }}";
    struct chat_template *t = NULL;
    struct hs_err err = {0};
    cr_assert_eq(chat_template_new(tpl, NULL, NULL, &t, &err), HS_OK, "%s", err.msg);
    struct chat_request req = {
        .messages = jparse("[{\"role\": \"user\", \"content\": \"q\"}]"),
        .template_kwargs = jparse("{\"preserve_thinking\": true, \"depth\": 2, \"style\": \"terse\"}"),
        .enable_thinking = -1,
    };
    struct strbuf sb;
    strbuf_init(&sb);
    cr_assert_eq(chat_template_render(t, &req, &sb, &err), HS_OK, "%s", err.msg);
    cr_expect_str_eq(sb.buf, "keep|3|TERSE|1");
    json_decref(req.template_kwargs);
    req.template_kwargs = jparse("{\"preserve_thinking\": \"yes\", \"depth\": 0, \"style\": \"x\"}");
    strbuf_reset(&sb);
    cr_assert_eq(chat_template_render(t, &req, &sb, &err), HS_OK, "%s", err.msg);
    cr_expect_str_eq(sb.buf, "drop|1|X|1", "a string is not the boolean true");
    strbuf_free(&sb);
    json_decref(req.template_kwargs);
    json_decref(req.messages);
    chat_template_free(t);
}
