/* The OpenAI Responses codec (src/api/responses.c): request items → the neutral conversation
 * (compared with what chat_from_openai makes of the same conversation), tool filtering and
 * head determinism, the stored-state errors; the response object and its event stream
 * (order, sequence numbers, item open/close pairs, re-assembly equal to the final object),
 * incomplete / failed endings, usage and reasoning_tokens. */
#include "api/api.h"
#include "base/base.h"

#include <criterion/criterion.h>
#include <string.h>

static json_t *rq_load(const char *s)
{
    json_error_t e;
    json_t *j = json_loads(s, 0, &e);
    cr_assert(j, "test JSON: %s: %s", e.text, s);
    return j;
}

static char *rq_dump(const json_t *j) { return json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER); }

/* chat_from_responses on `body`; asserts success and returns the messages JSON text. */
static char *rq_msgs(const char *body, struct chat_request *cr)
{
    json_t *b = rq_load(body);
    struct hs_err err;
    hs_err_clear(&err);
    int rc = chat_from_responses(b, cr, &err);
    cr_assert_eq(rc, HS_OK, "chat_from_responses: %s", err.msg);
    json_decref(b);
    return rq_dump(cr->messages);
}

/* chat_from_responses must fail with a message containing `want`. */
static void rq_fails(const char *body, const char *want)
{
    json_t *b = rq_load(body);
    struct hs_err err;
    hs_err_clear(&err);
    struct chat_request cr;
    int rc = chat_from_responses(b, &cr, &err);
    cr_assert_eq(rc, HS_ERR_INVALID, "accepted: %s", body);
    cr_assert(strstr(err.msg, want), "error '%s' lacks '%s'", err.msg, want);
    cr_assert_null(cr.messages);
    cr_assert_null(cr.tools);
    cr_assert_null(cr.tool_name);
    json_decref(b);
}

Test(responses_req, string_input_and_instructions)
{
    struct chat_request cr;
    char *m = rq_msgs("{\"model\":\"m\",\"instructions\":\"Be brief.\",\"input\":\"Hi\"}", &cr);
    cr_assert_str_eq(m, "[{\"role\":\"system\",\"content\":\"Be brief.\"},{\"role\":\"user\",\"content\":\"Hi\"}]");
    cr_assert_null(cr.tools);
    cr_assert_eq(cr.enable_thinking, -1);
    cr_assert(cr.add_generation_prompt);
    cr_assert_eq(cr.tool_choice, CHAT_TOOL_AUTO);
    free(m);
    chat_request_free(&cr);
}

/* A Codex-shaped agent turn becomes exactly what chat_from_openai makes of the same
 * conversation in chat-completions form. */
Test(responses_req, items_equal_chat_completions)
{
    const char *resp =
        "{\"instructions\":\"You are Codex.\",\"input\":["
        "{\"type\":\"message\",\"role\":\"developer\",\"content\":[{\"type\":\"input_text\",\"text\":\"Sandbox: none.\"}]},"
        "{\"type\":\"message\",\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"<env>\"},"
        "{\"type\":\"input_text\",\"text\":\"List files.\"}]},"
        "{\"type\":\"reasoning\",\"summary\":[],\"content\":[{\"type\":\"reasoning_text\",\"text\":\"Use ls.\"}]},"
        "{\"type\":\"message\",\"role\":\"assistant\",\"content\":[{\"type\":\"output_text\",\"text\":\"Listing.\"}]},"
        "{\"type\":\"function_call\",\"call_id\":\"call_1\",\"name\":\"shell\",\"arguments\":\"{\\\"cmd\\\":[\\\"ls\\\"]}\"},"
        "{\"type\":\"function_call\",\"call_id\":\"call_2\",\"name\":\"shell\",\"arguments\":\"\"},"
        "{\"type\":\"function_call_output\",\"call_id\":\"call_1\",\"output\":\"a.c\"},"
        "{\"type\":\"function_call_output\",\"call_id\":\"call_2\",\"output\":[{\"type\":\"input_text\",\"text\":\"b\"}]},"
        "{\"type\":\"reasoning\",\"summary\":[{\"type\":\"summary_text\",\"text\":\"S1\"},{\"type\":\"summary_text\",\"text\":\"S2\"}]},"
        "{\"type\":\"function_call\",\"call_id\":\"call_3\",\"name\":\"shell\",\"arguments\":\"{}\"},"
        "{\"type\":\"function_call_output\",\"call_id\":\"call_3\",\"output\":\"ok\"},"
        "{\"type\":\"reasoning\",\"summary\":[{\"type\":\"summary_text\",\"text\":\"dropped\"}]},"
        "{\"role\":\"user\",\"content\":\"Thanks\"}],"
        "\"tools\":[{\"type\":\"function\",\"name\":\"shell\",\"description\":\"Run\",\"strict\":false,"
        "\"parameters\":{\"type\":\"object\",\"properties\":{\"cmd\":{\"type\":\"array\"}}}}]}";
    const char *chat =
        "{\"messages\":["
        "{\"role\":\"system\",\"content\":\"You are Codex.\"},"
        "{\"role\":\"developer\",\"content\":\"Sandbox: none.\"},"
        "{\"role\":\"user\",\"content\":\"<env>List files.\"},"
        "{\"role\":\"assistant\",\"content\":\"Listing.\",\"reasoning_content\":\"Use ls.\",\"tool_calls\":["
        "{\"type\":\"function\",\"id\":\"call_1\",\"function\":{\"name\":\"shell\",\"arguments\":\"{\\\"cmd\\\":[\\\"ls\\\"]}\"}},"
        "{\"type\":\"function\",\"id\":\"call_2\",\"function\":{\"name\":\"shell\",\"arguments\":\"\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"a.c\"},"
        "{\"role\":\"tool\",\"tool_call_id\":\"call_2\",\"content\":\"b\"},"
        "{\"role\":\"assistant\",\"content\":\"\",\"reasoning_content\":\"S1\\n\\nS2\",\"tool_calls\":["
        "{\"type\":\"function\",\"id\":\"call_3\",\"function\":{\"name\":\"shell\",\"arguments\":\"{}\"}}]},"
        "{\"role\":\"tool\",\"tool_call_id\":\"call_3\",\"content\":\"ok\"},"
        "{\"role\":\"user\",\"content\":\"Thanks\"}],"
        "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"shell\",\"description\":\"Run\","
        "\"parameters\":{\"type\":\"object\",\"properties\":{\"cmd\":{\"type\":\"array\"}}}}}]}";
    struct chat_request a, b;
    char *ma = rq_msgs(resp, &a);
    json_t *cb = rq_load(chat);
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(chat_from_openai(cb, &b, &err), HS_OK, "%s", err.msg);
    char *mb = rq_dump(b.messages);
    cr_assert_str_eq(ma, mb);
    char *ta = rq_dump(a.tools), *tb = rq_dump(b.tools);
    cr_assert_str_eq(ta, tb);
    free(ma);
    free(mb);
    free(ta);
    free(tb);
    json_decref(cb);
    chat_request_free(&a);
    chat_request_free(&b);
}

Test(responses_req, late_system_becomes_user_turn)
{
    struct chat_request cr;
    char *m = rq_msgs("{\"input\":[{\"role\":\"user\",\"content\":\"a\"},"
                      "{\"role\":\"developer\",\"content\":[{\"type\":\"input_text\",\"text\":\"late\"}]},"
                      "{\"role\":\"system\",\"content\":\"\"}]}", &cr);
    cr_assert_str_eq(m, "[{\"role\":\"user\",\"content\":\"a\"},{\"role\":\"user\",\"content\":\"late\"}]");
    free(m);
    chat_request_free(&cr);
}

Test(responses_req, custom_tool_call_items)
{
    struct chat_request cr;
    char *m = rq_msgs("{\"input\":[{\"role\":\"user\",\"content\":\"p\"},"
                      "{\"type\":\"custom_tool_call\",\"call_id\":\"c9\",\"name\":\"apply_patch\",\"input\":\"*** Begin\"},"
                      "{\"type\":\"custom_tool_call_output\",\"call_id\":\"c9\",\"output\":\"done\"}]}", &cr);
    cr_assert_str_eq(m, "[{\"role\":\"user\",\"content\":\"p\"},{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":"
                        "[{\"type\":\"function\",\"id\":\"c9\",\"function\":{\"name\":\"apply_patch\",\"arguments\":"
                        "{\"input\":\"*** Begin\"}}}]},{\"role\":\"tool\",\"content\":\"done\",\"tool_call_id\":\"c9\"}]");
    free(m);
    chat_request_free(&cr);
}

/* Hosted and custom tools are skipped by type alone: two requests that differ only in them
 * give the same neutral tools, so the same head. */
Test(responses_req, tools_skipped_deterministically)
{
    const char *fn = "{\"type\":\"function\",\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}";
    char a[1024], b[1024];
    snprintf(a, sizeof a, "{\"input\":\"x\",\"tools\":[{\"type\":\"web_search\"},%s,{\"type\":\"local_shell\"},"
             "{\"type\":\"custom\",\"name\":\"apply_patch\",\"format\":{\"type\":\"grammar\"}},"
             "{\"type\":\"namespace\",\"name\":\"mcp\",\"tools\":[]}]}", fn);
    snprintf(b, sizeof b, "{\"input\":\"x\",\"tools\":[%s,{\"type\":\"image_generation\"}]}", fn);
    struct chat_request ca, cb;
    free(rq_msgs(a, &ca));
    free(rq_msgs(b, &cb));
    char *ta = rq_dump(ca.tools), *tb = rq_dump(cb.tools);
    cr_assert_str_eq(ta, "[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}]");
    cr_assert_str_eq(ta, tb);
    free(ta);
    free(tb);
    chat_request_free(&ca);
    chat_request_free(&cb);
    struct chat_request cc;
    free(rq_msgs("{\"input\":\"x\",\"tools\":[{\"type\":\"web_search\"}]}", &cc));
    cr_assert_null(cc.tools, "no function tools: no tools at all");
    chat_request_free(&cc);
}

Test(responses_req, options)
{
    struct chat_request cr;
    free(rq_msgs("{\"input\":\"x\",\"reasoning\":{\"effort\":\"none\"},\"store\":true,\"include\":[\"reasoning.encrypted_content\"],"
                 "\"prompt_cache_key\":\"k\",\"text\":{\"verbosity\":\"low\"},\"parallel_tool_calls\":false,"
                 "\"previous_response_id\":null,\"background\":false}", &cr));
    cr_assert_eq(cr.enable_thinking, 0);
    chat_request_free(&cr);
    free(rq_msgs("{\"input\":\"x\",\"reasoning\":{\"effort\":\"high\",\"summary\":\"auto\"}}", &cr));
    cr_assert_eq(cr.enable_thinking, -1);
    chat_request_free(&cr);
    const char *tools = "\"tools\":[{\"type\":\"function\",\"name\":\"f\"},{\"type\":\"web_search\"}]";
    char b[512];
    snprintf(b, sizeof b, "{\"input\":\"x\",%s,\"tool_choice\":\"none\"}", tools);
    free(rq_msgs(b, &cr));
    cr_assert_eq(cr.tool_choice, CHAT_TOOL_NONE);
    chat_request_free(&cr);
    snprintf(b, sizeof b, "{\"input\":\"x\",%s,\"tool_choice\":\"required\"}", tools);
    free(rq_msgs(b, &cr));
    cr_assert_eq(cr.tool_choice, CHAT_TOOL_REQUIRED);
    chat_request_free(&cr);
    snprintf(b, sizeof b, "{\"input\":\"x\",%s,\"tool_choice\":{\"type\":\"function\",\"name\":\"f\"}}", tools);
    free(rq_msgs(b, &cr));
    cr_assert_eq(cr.tool_choice, CHAT_TOOL_NAMED);
    cr_assert_str_eq(cr.tool_name, "f");
    chat_request_free(&cr);
    free(rq_msgs("{\"input\":\"x\",\"stop\":\"END\"}", &cr));
    char *st = rq_dump(cr.stop);
    cr_assert_str_eq(st, "[\"END\"]");
    free(st);
    chat_request_free(&cr);
    free(rq_msgs("{\"input\":\"x\",\"stop\":[\"a\",\"b\"],\"chat_template_kwargs\":{\"enable_thinking\":true}}", &cr));
    cr_assert_eq(json_array_size(cr.stop), 2);
    cr_assert_eq(cr.enable_thinking, 1);
    chat_request_free(&cr);
    snprintf(b, sizeof b, "{\"input\":\"x\",%s,\"tool_choice\":{\"type\":\"web_search\"}}", tools);
    free(rq_msgs(b, &cr));
    cr_assert_eq(cr.tool_choice, CHAT_TOOL_AUTO);
    chat_request_free(&cr);
}

Test(responses_req, errors_name_the_field)
{
    rq_fails("{\"input\":\"x\",\"previous_response_id\":\"resp_1\"}", "previous_response_id: headstart does not store");
    rq_fails("{\"input\":\"x\",\"conversation\":\"c\"}", "conversation:");
    rq_fails("{\"input\":\"x\",\"background\":true}", "background:");
    rq_fails("{\"model\":\"m\"}", "input: expected a string or a non-empty array");
    rq_fails("{\"input\":[]}", "input: expected");
    rq_fails("{\"input\":\"x\",\"instructions\":3}", "instructions: expected a string");
    rq_fails("{\"input\":[{\"role\":\"user\",\"content\":[{\"type\":\"input_text\",\"text\":\"a\"},"
             "{\"type\":\"input_image\",\"image_url\":\"u\"}]}]}", "input[0].content[1]: input_image parts are not supported");
    rq_fails("{\"input\":[{\"type\":\"item_reference\",\"id\":\"msg_1\"}]}", "input[0]: item_reference");
    rq_fails("{\"input\":[{\"type\":\"web_search_call\",\"id\":\"ws\"}]}", "input[0]: input item type 'web_search_call'");
    rq_fails("{\"input\":[{\"role\":\"tool\",\"content\":\"a\"}]}", "input[0].role: unknown role 'tool'");
    rq_fails("{\"input\":[{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"f\",\"arguments\":\"{bad\"}]}",
             "input[0].arguments: not valid JSON");
    rq_fails("{\"input\":[{\"type\":\"function_call\",\"name\":\"f\",\"arguments\":\"{}\"}]}",
             "input[0]: \"call_id\" must be a non-empty string");
    rq_fails("{\"input\":[{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":5}]}", "input[0].output:");
    rq_fails("{\"input\":\"x\",\"tools\":[{\"type\":\"function\"}]}", "tools[0]: \"name\"");
    rq_fails("{\"input\":\"x\",\"tools\":[{\"type\":\"function\",\"name\":\"f\"}],\"tool_choice\":{\"type\":\"function\",\"name\":\"g\"}}",
             "tool_choice.name: no function tool named 'g'");
    rq_fails("{\"input\":\"x\",\"tools\":[{\"type\":\"web_search\"}],\"tool_choice\":\"required\"}", "tool_choice: asks for a tool call");
    rq_fails("{\"input\":\"x\",\"tool_choice\":\"sometimes\"}", "tool_choice: unknown value");
    rq_fails("{\"input\":\"x\",\"reasoning\":{\"effort\":1}}", "reasoning.effort");
    rq_fails("{\"input\":\"x\",\"stop\":[\"a\",\"\"]}", "stop: item 1: a stop string must not be empty");
    rq_fails("{\"input\":\"x\",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", "stop: at most 4");
    rq_fails("{\"input\":\"x\",\"stop\":7}", "stop: expected a string or an array");
    rq_fails("{\"input\":[{\"type\":\"reasoning\",\"summary\":[{\"type\":\"summary_text\",\"text\":\"a\"},7]}]}",
             "input[0].summary[1]: expected a summary_text part");
}

/* ---- the response side ------------------------------------------------------------------- */

struct rs_ev {
    int kind;                 /* enum chat_event_kind, -1: end */
    const char *text;
    const char *name, *args;
};

static void rs_send(struct api_response *r, const struct rs_ev *evs, struct strbuf *out)
{
    for (int i = 0; evs[i].kind >= 0; i++) {
        struct chat_event ev = { .kind = (enum chat_event_kind)evs[i].kind };
        json_t *args = NULL;
        if (evs[i].kind == CHAT_EVENT_TOOL_CALL) {
            args = rq_load(evs[i].args);
            ev.tool_name = evs[i].name;
            ev.tool_args = args;
        } else {
            ev.text = evs[i].text;
            ev.text_len = strlen(evs[i].text);
        }
        api_response_event(r, &ev, out);
        json_decref(args);
    }
}

static struct api_response *rs_new(bool stream, bool thinking)
{
    struct api_response_opts o = { .kind = API_KIND_OPENAI_RESPONSES, .stream = stream, .model = "tiny",
                                   .id = "resp_test1", .created = 1700000000, .starts_in_reasoning = thinking };
    return api_response_new(&o);
}

static const struct api_usage rs_u = { .prompt_tokens = 100, .completion_tokens = 7, .cached_tokens = 60 };

static char *rs_run(bool stream, const struct rs_ev *evs, enum api_stop stop)
{
    struct api_response *r = rs_new(stream, false);
    struct strbuf out;
    strbuf_init(&out);
    if (stream) api_response_begin(r, &rs_u, &out);
    rs_send(r, evs, &out);
    api_response_finish(r, stop, NULL, &rs_u, &out);
    size_t len = out.len;
    rs_send(r, (const struct rs_ev[]){ { CHAT_EVENT_TEXT, "late", NULL, NULL }, { -1, NULL, NULL, NULL } }, &out);
    api_response_finish(r, stop, NULL, &rs_u, &out);
    api_response_keepalive(r, &out);
    cr_assert_eq(out.len, len, "output after finish");
    api_response_free(r);
    strbuf_putc(&out, '\0');
    return strbuf_detach(&out, NULL);
}

static const struct rs_ev rs_mixed[] = {
    { CHAT_EVENT_REASONING, "Think", NULL, NULL },
    { CHAT_EVENT_REASONING, "ing.", NULL, NULL },
    { CHAT_EVENT_TEXT, "Hel", NULL, NULL },
    { CHAT_EVENT_TEXT, "lo \xff", NULL, NULL },   /* an invalid byte: U+FFFD */
    { CHAT_EVENT_TOOL_CALL, NULL, "get", "{\"b\":1,\"a\":\"\xc3\xa9\"}" },
    { CHAT_EVENT_TOOL_CALL, NULL, "put", "{}" },
    { -1, NULL, NULL, NULL },
};

Test(responses_out, body_text_only)
{
    char *s = rs_run(false, (const struct rs_ev[]){ { CHAT_EVENT_TEXT, "Hi", NULL, NULL }, { -1, NULL, NULL, NULL } },
                     API_STOP_END);
    const char *want =
        "{\"id\":\"resp_test1\",\"object\":\"response\",\"created_at\":1700000000,\"status\":\"completed\","
        "\"error\":null,\"incomplete_details\":null,\"model\":\"tiny\",\"output\":[{\"id\":\"msg_";
    cr_assert(!strncmp(s, want, strlen(want)), "got %s", s);
    json_t *j = rq_load(s);
    json_t *item = json_array_get(json_object_get(j, "output"), 0);
    char *it = rq_dump(item);
    const char *tail = "\",\"type\":\"message\",\"status\":\"completed\",\"role\":\"assistant\",\"content\":"
                       "[{\"type\":\"output_text\",\"annotations\":[],\"logprobs\":[],\"text\":\"Hi\"}]}";
    cr_assert(strstr(it, tail), "item %s", it);
    char *u = rq_dump(json_object_get(j, "usage"));
    cr_assert_str_eq(u, "{\"input_tokens\":100,\"input_tokens_details\":{\"cached_tokens\":60},\"output_tokens\":7,"
                        "\"output_tokens_details\":{\"reasoning_tokens\":0},\"total_tokens\":107}");
    cr_assert(json_is_false(json_object_get(j, "store")));
    free(u);
    free(it);
    json_decref(j);
    free(s);
}

Test(responses_out, body_items_in_order)
{
    char *s = rs_run(false, rs_mixed, API_STOP_TOOL_CALLS);
    json_t *j = rq_load(s);
    json_t *out = json_object_get(j, "output");
    cr_assert_eq(json_array_size(out), 4);
    static const char *const types[] = { "reasoning", "message", "function_call", "function_call" };
    static const char *const prefixes[] = { "rs_", "msg_", "fc_", "fc_" };
    for (size_t i = 0; i < 4; i++) {
        json_t *it = json_array_get(out, i);
        cr_assert_str_eq(json_string_value(json_object_get(it, "type")), types[i]);
        const char *id = json_string_value(json_object_get(it, "id"));
        cr_assert(!strncmp(id, prefixes[i], strlen(prefixes[i])) && strlen(id) == strlen(prefixes[i]) + 24, "id %s", id);
    }
    json_t *rs = json_array_get(out, 0);
    cr_assert_eq(json_array_size(json_object_get(rs, "summary")), 0);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(rs, "content"), 0), "text")), "Thinking.");
    json_t *msg = json_array_get(out, 1);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(msg, "content"), 0), "text")),
                     "Hello \xef\xbf\xbd");
    json_t *fc = json_array_get(out, 2);
    cr_assert_str_eq(json_string_value(json_object_get(fc, "name")), "get");
    cr_assert_str_eq(json_string_value(json_object_get(fc, "arguments")), "{\"b\":1,\"a\":\"\xc3\xa9\"}");
    const char *c1 = json_string_value(json_object_get(fc, "call_id"));
    const char *c2 = json_string_value(json_object_get(json_array_get(out, 3), "call_id"));
    cr_assert(!strncmp(c1, "call_", 5) && strcmp(c1, c2), "call ids %s %s", c1, c2);
    cr_assert_str_eq(json_string_value(json_object_get(j, "status")), "completed");
    json_decref(j);
    free(s);
    /* deterministic: the same request id gives the same bytes */
    char *s2 = rs_run(false, rs_mixed, API_STOP_TOOL_CALLS), *s3 = rs_run(false, rs_mixed, API_STOP_TOOL_CALLS);
    cr_assert_str_eq(s2, s3);
    free(s2);
    free(s3);
}

/* Parse a stream strictly: `event: T` + `data: {type: T, sequence_number: n}` records,
 * sequence numbers 0.., the official order (item added/done pairs, content parts inside),
 * and re-assemble the output; returns the final response event's data. */
static json_t *rs_replay(const char *s, const char *final_type, json_t **assembled)
{
    json_t *out = json_array();
    json_t *final = NULL;
    int64_t seq = 0;
    int open = -1;          /* output index of the open item */
    bool part_open = false;
    const char *p = s;
    int n = 0;
    while (*p) {
        if (*p == ':') { p = strstr(p, "\n\n") + 2; continue; }
        cr_assert(!strncmp(p, "event: ", 7), "record %d: %.60s", n, p);
        const char *nl = strchr(p, '\n');
        char ev[96];
        cr_assert((size_t)(nl - p - 7) < sizeof ev);
        memcpy(ev, p + 7, (size_t)(nl - p - 7));
        ev[nl - p - 7] = '\0';
        p = nl + 1;
        cr_assert(!strncmp(p, "data: ", 6));
        const char *end = strstr(p, "\n\n");
        cr_assert(end);
        json_error_t je;
        json_t *d = json_loadb(p + 6, (size_t)(end - p - 6), 0, &je);
        cr_assert(d, "data %d: %s", n, je.text);
        p = end + 2;
        cr_assert_str_eq(json_string_value(json_object_get(d, "type")), ev);
        cr_assert_eq(json_integer_value(json_object_get(d, "sequence_number")), seq, "seq at %s", ev);
        seq++;
        int oi = (int)json_integer_value(json_object_get(d, "output_index"));
        if (n == 0) cr_assert_str_eq(ev, "response.created");
        if (n == 1) cr_assert_str_eq(ev, "response.in_progress");
        if (n < 2) {
            json_t *resp = json_object_get(d, "response");
            cr_assert_str_eq(json_string_value(json_object_get(resp, "status")), "in_progress");
            cr_assert(json_is_null(json_object_get(resp, "usage")));
        }
        cr_assert(!final, "%s after the final event", ev);
        if (!strcmp(ev, "response.output_item.added")) {
            cr_assert_eq(open, -1, "item added while another is open");
            cr_assert_eq(oi, (int)json_array_size(out));
            json_array_append(out, json_object_get(d, "item"));
            open = oi;
        } else if (!strcmp(ev, "response.content_part.added")) {
            cr_assert(open == oi && !part_open);
            part_open = true;
        } else if (!strcmp(ev, "response.output_text.delta") || !strcmp(ev, "response.reasoning_text.delta")) {
            cr_assert(open == oi && part_open);
            json_t *it = json_array_get(out, (size_t)oi);
            json_t *acc = json_object_get(it, "acc");
            struct strbuf sb;
            strbuf_init(&sb);
            if (acc) strbuf_append(&sb, json_string_value(acc), json_string_length(acc));
            json_t *dl = json_object_get(d, "delta");
            strbuf_append(&sb, json_string_value(dl), json_string_length(dl));
            json_object_set_new(it, "acc", json_stringn(sb.buf, sb.len));
            strbuf_free(&sb);
        } else if (!strcmp(ev, "response.output_text.done") || !strcmp(ev, "response.reasoning_text.done")) {
            cr_assert(open == oi && part_open);
            json_t *acc = json_object_get(json_array_get(out, (size_t)oi), "acc");
            cr_assert(json_equal(acc, json_object_get(d, "text")), "deltas join to the done text");
        } else if (!strcmp(ev, "response.content_part.done")) {
            cr_assert(open == oi && part_open);
            part_open = false;
        } else if (!strcmp(ev, "response.function_call_arguments.delta")) {
            cr_assert(open == oi && !part_open);
            json_object_set(json_array_get(out, (size_t)oi), "acc", json_object_get(d, "delta"));
        } else if (!strcmp(ev, "response.function_call_arguments.done")) {
            cr_assert(json_equal(json_object_get(json_array_get(out, (size_t)oi), "acc"), json_object_get(d, "arguments")));
        } else if (!strcmp(ev, "response.output_item.done")) {
            cr_assert(open == oi && !part_open, "item done out of order");
            json_array_set(out, (size_t)oi, json_object_get(d, "item"));
            open = -1;
        } else if (!strcmp(ev, final_type)) {
            cr_assert_eq(open, -1, "final event with an open item");
            final = json_incref(json_object_get(d, "response"));
        } else {
            cr_assert(n < 2, "unexpected event %s", ev);
        }
        json_decref(d);
        n++;
    }
    cr_assert(final, "no %s", final_type);
    *assembled = out;
    return final;
}

Test(responses_out, stream_reassembles_to_body)
{
    char *st = rs_run(true, rs_mixed, API_STOP_TOOL_CALLS);
    char *body = rs_run(false, rs_mixed, API_STOP_TOOL_CALLS);
    json_t *items;
    json_t *final = rs_replay(st, "response.completed", &items);
    json_t *b = rq_load(body);
    cr_assert(json_equal(items, json_object_get(final, "output")), "done items = final output");
    cr_assert(json_equal(final, b), "final response = non-stream body");
    json_decref(items);
    json_decref(final);
    json_decref(b);
    free(st);
    free(body);
}

Test(responses_out, max_tokens_is_incomplete)
{
    const struct rs_ev evs[] = { { CHAT_EVENT_TEXT, "cut", NULL, NULL }, { -1, NULL, NULL, NULL } };
    char *st = rs_run(true, evs, API_STOP_LENGTH);
    json_t *items;
    json_t *final = rs_replay(st, "response.incomplete", &items);
    cr_assert_str_eq(json_string_value(json_object_get(final, "status")), "incomplete");
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(final, "incomplete_details"), "reason")),
                     "max_output_tokens");
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(items, 0), "status")), "incomplete");
    json_decref(items);
    json_decref(final);
    free(st);
}

Test(responses_out, failures)
{
    struct strbuf out;
    strbuf_init(&out);
    struct api_response *r = rs_new(false, false);
    int status = api_response_fail(r, HS_ERR_LIMIT, "too long", &out);
    cr_assert_eq(status, 400);
    strbuf_putc(&out, '\0');
    cr_assert_str_eq(out.buf, "{\"error\":{\"message\":\"too long\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}");
    api_response_free(r);
    strbuf_reset(&out);
    r = rs_new(true, false);
    api_response_begin(r, &rs_u, &out);
    cr_assert(api_response_started(r));
    rs_send(r, (const struct rs_ev[]){ { CHAT_EVENT_TEXT, "a", NULL, NULL }, { -1, NULL, NULL, NULL } }, &out);
    status = api_response_fail(r, API_ERR_INTERNAL, "engine broke", &out);
    cr_assert_eq(status, 200);
    strbuf_putc(&out, '\0');
    cr_assert(strstr(out.buf, "event: error\ndata: {\"type\":\"error\",\"sequence_number\":"), "%s", out.buf);
    cr_assert(strstr(out.buf, "\"code\":\"server_error\",\"message\":\"engine broke\""), "%s", out.buf);
    const char *failed = strstr(out.buf, "event: response.failed\n");
    cr_assert(failed && strstr(failed, "\"status\":\"failed\""), "%s", out.buf);
    api_response_free(r);
    strbuf_free(&out);
}

/* reasoning_tokens: tokens fed before the first visible output, when there was reasoning. */
Test(responses_out, reasoning_tokens_by_feed)
{
    static const char *const toks[] = { "I", " think", "</think>", "\n\n", "Hi", "!" };
    struct api_response *r = rs_new(false, true);
    struct strbuf out;
    strbuf_init(&out);
    for (size_t i = 0; i < HS_ARRAY_LEN(toks); i++) api_response_feed(r, toks[i], strlen(toks[i]), &out);
    struct api_usage u = { .prompt_tokens = 10, .completion_tokens = 6, .cached_tokens = 0 };
    api_response_finish(r, API_STOP_END, NULL, &u, &out);
    strbuf_putc(&out, '\0');
    json_t *j = rq_load(out.buf);
    json_t *usage = json_object_get(j, "usage");
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(usage, "output_tokens_details"), "reasoning_tokens")), 4,
                 "%s", out.buf);
    json_t *o = json_object_get(j, "output");
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(o, 0), "type")), "reasoning");
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(o, 1), "type")), "message");
    json_decref(j);
    api_response_free(r);
    strbuf_free(&out);
}

Test(responses_out, ids_and_keepalive)
{
    struct api_ids ids = { .seed = 7, .counter = 0 };
    char id[API_ID_MAX];
    api_ids_next(&ids, API_KIND_OPENAI_RESPONSES, id);
    cr_assert(!strncmp(id, "resp_", 5) && strlen(id) == 29, "%s", id);
    struct api_response *r = rs_new(true, false);
    struct strbuf out;
    strbuf_init(&out);
    cr_assert(!api_response_started(r));
    api_response_keepalive(r, &out);
    cr_assert(api_response_started(r));
    strbuf_putc(&out, '\0');
    cr_assert_str_eq(out.buf, ": keepalive\n\n");
    api_response_free(r);
    strbuf_free(&out);
}

/* A tool's output with an image or a file (Codex's view_image): placeholders, counted. */
Test(responses_req, tool_output_media_become_placeholders)
{
    struct chat_request cr;
    free(rq_msgs("{\"input\":[{\"role\":\"user\",\"content\":\"look\"},"
                 "{\"type\":\"function_call\",\"call_id\":\"c\",\"name\":\"view_image\",\"arguments\":\"{}\"},"
                 "{\"type\":\"function_call_output\",\"call_id\":\"c\",\"output\":["
                 "{\"type\":\"input_image\",\"image_url\":\"data:image/png;base64,iVBOR\"},"
                 "{\"type\":\"input_file\",\"filename\":\"a.pdf\",\"file_data\":\"data:application/pdf;base64,JVBER\"},"
                 "{\"type\":\"input_text\",\"text\":\" ok\"}]}]}", &cr));
    const json_t *m = json_array_get(cr.messages, 2);
    cr_assert_str_eq(json_string_value(json_object_get(m, "role")), "tool");
    cr_assert_str_eq(json_string_value(json_object_get(m, "content")),
                     "[image omitted (image/png): this model reads text only]"
                     "[file omitted (application/pdf): this model reads text only] ok");
    cr_assert_eq(cr.n_media_placeholders, 2);
    chat_request_free(&cr);
}

Test(responses_req, template_kwargs_pass_through)
{
    struct chat_request cr;
    free(rq_msgs("{\"input\":\"x\",\"reasoning\":{\"effort\":\"none\"},"
                 "\"chat_template_kwargs\":{\"preserve_thinking\":true}}", &cr));
    cr_assert_eq(cr.enable_thinking, 0);
    cr_assert(json_is_true(json_object_get(cr.template_kwargs, "preserve_thinking")));
    chat_request_free(&cr);
    rq_fails("{\"input\":\"x\",\"chat_template_kwargs\":{\"tools\":[]}}", "chat_template_kwargs.tools: is set from the request");
}
