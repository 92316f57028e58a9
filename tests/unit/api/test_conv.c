/* test_conv.c — OpenAI and Anthropic requests → the neutral conversation: every rule of
 * conv.c (docs/API.md) through both parsers (openai_chat.c, anthropic.c) side by side,
 * every error path with its exact message, key order, and requests shaped like the ones
 * Claude Code, Codex and Qwen Code send.
 *
 * Request bodies and expected dumps are written with ' for " (q() converts) so they read
 * without escapes; an apostrophe inside JSON text is written \u0027. Expected error
 * messages are compared as written. The body is freed before the result is inspected, so
 * anything borrowed from it instead of copied shows up under ASan. */
#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

#include "api/api.h"

enum api { OAI, ANT };

static char *q(const char *s)
{
    char *d = strdup(s), *w = d;
    for (const char *p = s; *p; p++) {
        if (strncmp(p, "\\u0027", 6) == 0) {
            *w++ = '\'';
            p += 5;
        } else {
            *w++ = *p == '\'' ? '"' : *p;
        }
    }
    *w = 0;
    return d;
}

static int parse(enum api api, const char *body_q, struct chat_request *r, struct hs_err *e)
{
    char *s = q(body_q);
    json_error_t je;
    json_t *body = json_loads(s, JSON_DECODE_ANY, &je);
    cr_assert_not_null(body, "test body does not parse: %s: %s", je.text, s);
    free(s);
    hs_err_clear(e);
    memset(r, 0x5a, sizeof *r); /* garbage in: the parser must set every field */
    int rc = api == OAI ? chat_from_openai(body, r, e) : chat_from_anthropic(body, r, e);
    json_decref(body);
    return rc;
}

/* Parse a request that must succeed. */
static struct chat_request ok(enum api api, const char *body_q)
{
    struct chat_request r;
    struct hs_err e;
    int rc = parse(api, body_q, &r, &e);
    cr_assert_eq(rc, HS_OK, "unexpected error: %s", e.msg);
    cr_assert(r.add_generation_prompt);
    cr_assert(json_is_array(r.messages));
    return r;
}

/* The compact, order-kept dump of v equals want (in ' notation); NULL wants NULL. */
static void eq_json(const json_t *v, const char *want_q)
{
    if (!want_q) {
        cr_assert_null(v, "expected NULL, got %s", v ? json_dumps(v, JSON_COMPACT) : "");
        return;
    }
    cr_assert_not_null(v);
    char *got = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER);
    char *want = q(want_q);
    cr_assert_str_eq(got, want);
    free(got);
    free(want);
}

static void check(enum api api, const char *body_q, const char *msgs_q, const char *tools_q)
{
    struct chat_request r = ok(api, body_q);
    eq_json(r.messages, msgs_q);
    eq_json(r.tools, tools_q);
    chat_request_free(&r);
}

static int thinking_of(enum api api, const char *body_q)
{
    struct chat_request r = ok(api, body_q);
    int t = r.enable_thinking;
    chat_request_free(&r);
    return t;
}

/* A request that must fail with exactly `want` (or, with prefix, a message starting so). */
static void fails_as(enum api api, const char *body_q, const char *want, bool prefix)
{
    struct chat_request r;
    struct hs_err e;
    int rc = parse(api, body_q, &r, &e);
    cr_assert_eq(rc, HS_ERR_INVALID, "expected an error for %s (got rc %d)", body_q, rc);
    cr_assert_eq(e.code, HS_ERR_INVALID);
    if (prefix)
        cr_assert(strncmp(e.msg, want, strlen(want)) == 0, "message '%s' does not start with '%s'", e.msg, want);
    else
        cr_assert_str_eq(e.msg, want);
    cr_assert_null(r.messages, "out must be zeroed on failure");
    cr_assert_null(r.tools);
    cr_assert_eq(r.enable_thinking, -1);
    cr_assert(!r.add_generation_prompt);
    chat_request_free(&r);
}

static void fails(enum api api, const char *body_q, const char *want) { fails_as(api, body_q, want, false); }

/* ---- OpenAI ------------------------------------------------------------------------ */

Test(messages_openai, plain_conversation)
{
    struct chat_request r = ok(OAI, "{'model':'m','messages':[{'role':'system','content':'Be brief.'},"
                                    "{'role':'user','content':'Hi'}]}");
    eq_json(r.messages, "[{'role':'system','content':'Be brief.'},{'role':'user','content':'Hi'}]");
    cr_assert_null(r.tools);
    cr_assert_eq(r.enable_thinking, -1);
    chat_request_free(&r);
    chat_request_free(&r); /* a freed request is a zeroed one */
    cr_assert_null(r.messages);
    struct chat_request z = { 0 };
    chat_request_free(&z);
    chat_request_free(NULL);
}

Test(messages_openai, developer_is_system_and_leading_systems_merge)
{
    check(OAI, "{'messages':[{'role':'system','content':'A'},{'role':'developer','content':'B'},"
               "{'role':'system','content':''},{'role':'system','content':[{'type':'text','text':'C'}]},"
               "{'role':'user','content':'u'}]}",
          "[{'role':'system','content':'A\\n\\nB\\n\\nC'},{'role':'user','content':'u'}]", NULL);
    check(OAI, "{'messages':[{'role':'developer','content':'D'},{'role':'user','content':'u'}]}",
          "[{'role':'system','content':'D'},{'role':'user','content':'u'}]", NULL);
}

Test(messages_openai, empty_system_is_dropped)
{
    check(OAI, "{'messages':[{'role':'system','content':''},{'role':'user','content':'u'}]}",
          "[{'role':'user','content':'u'}]", NULL);
    check(OAI, "{'messages':[{'role':'system','content':null},{'role':'user','content':'u'},"
               "{'role':'system','content':[]}]}",
          "[{'role':'user','content':'u'}]", NULL);
}

Test(messages_openai, late_system_becomes_user_at_its_place)
{
    check(OAI, "{'messages':[{'role':'system','content':'S'},{'role':'user','content':'u1'},"
               "{'role':'assistant','content':'a1'},{'role':'system','content':'late'},"
               "{'role':'developer','content':'later'},{'role':'user','content':'u2'}]}",
          "[{'role':'system','content':'S'},{'role':'user','content':'u1'},"
          "{'role':'assistant','content':'a1'},{'role':'user','content':'late'},"
          "{'role':'user','content':'later'},{'role':'user','content':'u2'}]", NULL);
    /* no leading system at all: the late one still becomes a user turn, not a head */
    check(OAI, "{'messages':[{'role':'user','content':'u'},{'role':'system','content':'s'}]}",
          "[{'role':'user','content':'u'},{'role':'user','content':'s'}]", NULL);
}

Test(messages_openai, content_null_missing_and_parts)
{
    check(OAI, "{'messages':[{'role':'user','content':null},{'role':'user'},"
               "{'role':'user','content':[]},"
               "{'role':'user','content':[{'type':'text','text':'a'},{'type':'text','text':'b\\n'},"
               "{'type':'text','text':'c'}]},"
               "{'role':'assistant','content':[{'type':'text','text':'x'},{'type':'refusal','refusal':'no'}]}]}",
          "[{'role':'user','content':''},{'role':'user','content':''},{'role':'user','content':''},"
          "{'role':'user','content':'ab\\nc'},{'role':'assistant','content':'xno'}]", NULL);
}

Test(messages_openai, consecutive_same_role_kept)
{
    check(OAI, "{'messages':[{'role':'user','content':'a'},{'role':'user','content':'b'},"
               "{'role':'assistant','content':'c'},{'role':'assistant','content':'d'}]}",
          "[{'role':'user','content':'a'},{'role':'user','content':'b'},"
          "{'role':'assistant','content':'c'},{'role':'assistant','content':'d'}]", NULL);
}

Test(messages_openai, media_parts_are_errors_naming_the_part)
{
    fails(OAI, "{'messages':[{'role':'system','content':'s'},{'role':'user','content':[{'type':'text','text':'see'},"
               "{'type':'image_url','image_url':{'url':'data:'}}]}]}",
          "messages[1].content[1]: image_url parts are not supported (text-only model)");
    fails(OAI, "{'messages':[{'role':'user','content':[{'type':'input_audio','input_audio':{}}]}]}",
          "messages[0].content[0]: input_audio parts are not supported (text-only model)");
    fails(OAI, "{'messages':[{'role':'user','content':[{'type':'file','file':{}}]}]}",
          "messages[0].content[0]: file parts are not supported (text-only model)");
    fails(OAI, "{'messages':[{'role':'system','content':[{'type':'image_url'}]},{'role':'user','content':'u'}]}",
          "messages[0].content[0]: image_url parts are not supported (text-only model)");
}

Test(messages_openai, malformed_content_errors)
{
    fails(OAI, "{'messages':[{'role':'user','content':[{'type':'magic'}]}]}",
          "messages[0].content[0]: unknown content part type 'magic'");
    fails(OAI, "{'messages':[{'role':'user','content':['text']}]}",
          "messages[0].content[0]: expected a content part object, not a string");
    fails(OAI, "{'messages':[{'role':'user','content':[{'text':'t'}]}]}",
          "messages[0].content[0]: \"type\" must be a string");
    fails(OAI, "{'messages':[{'role':'user','content':[{'type':'text','text':5}]}]}",
          "messages[0].content[0]: \"text\" must be a string");
    fails(OAI, "{'messages':[{'role':'user','content':42}]}",
          "messages[0].content: expected a string, null or an array of content parts, not a number");
    fails(OAI, "{'messages':[{'role':'user','content':{'type':'text'}}]}",
          "messages[0].content: expected a string, null or an array of content parts, not an object");
}

Test(messages_openai, roles_validated)
{
    fails(OAI, "{'messages':[{'role':'wizard','content':'x'}]}",
          "messages[0].role: unknown role 'wizard' (expected system, developer, user, assistant or tool)");
    fails(OAI, "{'messages':[{'content':'x'}]}", "messages[0].role: must be a string");
    fails(OAI, "{'messages':[{'role':'user','content':'x'},{'role':'function','content':'x'}]}",
          "messages[1].role: unknown role 'function' (expected system, developer, user, assistant or tool)");
    fails(OAI, "{'messages':[{'role':'user','content':'x'},7]}",
          "messages[1]: expected a message object, not a number");
}

Test(messages_openai, request_shape_validated)
{
    fails(OAI, "[]", "request: expected a JSON object");
    fails(OAI, "{'model':'m'}", "messages: expected a non-empty array");
    fails(OAI, "{'messages':[]}", "messages: expected a non-empty array");
    fails(OAI, "{'messages':{'role':'user'}}", "messages: expected a non-empty array");
}

Test(messages_openai, tool_calls_parsed_in_order)
{
    check(OAI,
          "{'messages':[{'role':'user','content':'go'},"
          "{'role':'assistant','content':null,'tool_calls':["
          "{'id':'call_1','type':'function','function':{'name':'f','arguments':'{\\'zeta\\':1,\\'alpha\\':{\\'y\\':[1,2],\\'b\\':\\'\u00e9\\'},\\'mid\\':null}'}},"
          "{'id':'call_2','type':'function','function':{'name':'g','arguments':''}},"
          "{'type':'function','function':{'name':'h','arguments':{'k2':true,'k1':false}}},"
          "{'function':{'name':'i'}}]}]}",
          "[{'role':'user','content':'go'},{'role':'assistant','content':'','tool_calls':["
          "{'type':'function','id':'call_1','function':{'name':'f','arguments':{'zeta':1,'alpha':{'y':[1,2],'b':'\u00e9'},'mid':null}}},"
          "{'type':'function','id':'call_2','function':{'name':'g','arguments':{}}},"
          "{'type':'function','function':{'name':'h','arguments':{'k2':true,'k1':false}}},"
          "{'type':'function','function':{'name':'i','arguments':{}}}]}]",
          NULL);
    /* an empty tool_calls array is no tool calls; null likewise */
    check(OAI, "{'messages':[{'role':'user','content':'u'},{'role':'assistant','content':'a','tool_calls':[]},"
               "{'role':'assistant','content':'b','tool_calls':null}]}",
          "[{'role':'user','content':'u'},{'role':'assistant','content':'a'},{'role':'assistant','content':'b'}]",
          NULL);
}

Test(messages_openai, tool_call_errors_name_the_path)
{
    fails_as(OAI, "{'messages':[{'role':'user','content':'u'},{'role':'assistant','tool_calls':["
                  "{'id':'a','type':'function','function':{'name':'f','arguments':'{}'}},"
                  "{'id':'b','type':'function','function':{'name':'f','arguments':'{oops'}}]}]}",
             "messages[1].tool_calls[1].function.arguments: not valid JSON (", true);
    fails(OAI, "{'messages':[{'role':'user','content':'u'},{'role':'assistant','tool_calls':["
               "{'type':'function','function':{'name':'f','arguments':'[1,2]'}}]}]}",
          "messages[1].tool_calls[0].function.arguments: must encode a JSON object, not an array");
    fails(OAI, "{'messages':[{'role':'user','content':'u'},{'role':'assistant','tool_calls':["
               "{'type':'function','function':{'name':'f','arguments':'\\'str\\''}}]}]}",
          "messages[1].tool_calls[0].function.arguments: must encode a JSON object, not a string");
    fails(OAI, "{'messages':[{'role':'user','content':'u'},{'role':'assistant','tool_calls':["
               "{'type':'function','function':{'name':'f','arguments':3}}]}]}",
          "messages[1].tool_calls[0].function.arguments: expected a JSON string holding an object, not a number");
    fails(OAI, "{'messages':[{'role':'user','content':'u'},{'role':'assistant','tool_calls':["
               "{'type':'custom','custom':{}}]}]}",
          "messages[1].tool_calls[0]: tool call type 'custom' is not supported (only \"function\")");
    fails(OAI, "{'messages':[{'role':'user','content':'u'},{'role':'assistant','tool_calls':["
               "{'type':'function','function':{'arguments':'{}'}}]}]}",
          "messages[1].tool_calls[0].function: \"name\" must be a non-empty string");
    fails(OAI, "{'messages':[{'role':'user','content':'u'},{'role':'assistant','tool_calls':["
               "{'type':'function'}]}]}",
          "messages[1].tool_calls[0].function: expected an object with \"name\" and \"arguments\"");
    fails(OAI, "{'messages':[{'role':'user','content':'u'},{'role':'assistant','tool_calls':["
               "{'id':7,'type':'function','function':{'name':'f'}}]}]}",
          "messages[1].tool_calls[0]: \"id\" must be a string, not a number");
    fails(OAI, "{'messages':[{'role':'user','content':'u'},{'role':'assistant','tool_calls':[5]}]}",
          "messages[1].tool_calls[0]: expected a tool call object, not a number");
    fails(OAI, "{'messages':[{'role':'user','content':'u'},{'role':'assistant','tool_calls':{}}]}",
          "messages[1].tool_calls: expected an array, not an object");
    fails(OAI, "{'messages':[{'role':'user','content':'u','tool_calls':[]}]}",
          "messages[0].tool_calls: only assistant messages carry tool calls");
    fails(OAI, "{'messages':[{'role':'user','content':'u'},{'role':'assistant','function_call':{'name':'f'}}]}",
          "messages[1].function_call: the deprecated function_call is not supported; send tool_calls");
}

Test(messages_openai, reasoning_content_and_alias)
{
    check(OAI, "{'messages':[{'role':'user','content':'u'},"
               "{'role':'assistant','content':'a','reasoning_content':'think'},"
               "{'role':'assistant','content':'b','reasoning':'alias'},"
               "{'role':'assistant','content':'c','reasoning_content':'wins','reasoning':'loses'},"
               "{'role':'assistant','content':'d','reasoning_content':''},"
               "{'role':'assistant','content':'e','reasoning_content':null},"
               "{'role':'user','content':'v','reasoning_content':'ignored on users'}]}",
          "[{'role':'user','content':'u'},"
          "{'role':'assistant','content':'a','reasoning_content':'think'},"
          "{'role':'assistant','content':'b','reasoning_content':'alias'},"
          "{'role':'assistant','content':'c','reasoning_content':'wins'},"
          "{'role':'assistant','content':'d','reasoning_content':''},"
          "{'role':'assistant','content':'e'},"
          "{'role':'user','content':'v'}]", NULL);
    fails(OAI, "{'messages':[{'role':'user','content':'u'},{'role':'assistant','content':'a','reasoning_content':1}]}",
          "messages[1]: \"reasoning_content\" must be a string, not a number");
}

Test(messages_openai, tool_messages_and_names)
{
    check(OAI, "{'messages':[{'role':'user','content':'u','name':'alice'},"
               "{'role':'assistant','tool_calls':[{'id':'c1','type':'function','function':{'name':'f','arguments':'{}'}}]},"
               "{'role':'tool','tool_call_id':'c1','name':'f','content':'result'},"
               "{'role':'tool','content':null}]}",
          "[{'role':'user','content':'u','name':'alice'},"
          "{'role':'assistant','content':'','tool_calls':[{'type':'function','id':'c1','function':{'name':'f','arguments':{}}}]},"
          "{'role':'tool','content':'result','tool_call_id':'c1','name':'f'},"
          "{'role':'tool','content':''}]", NULL);
    fails(OAI, "{'messages':[{'role':'user','content':'u'},{'role':'tool','tool_call_id':9,'content':'r'}]}",
          "messages[1]: \"tool_call_id\" must be a string, not a number");
    fails(OAI, "{'messages':[{'role':'user','content':'u','name':['x']}]}",
          "messages[0]: \"name\" must be a string, not an array");
}

Test(messages_openai, tools_copied_with_key_order_and_unicode)
{
    const char *tools =
        "[{'type':'function','function':{'name':'get_weather','description':'Wetter f\u00fcr \u6771\u4eac \U0001F600',"
        "'parameters':{'type':'object','properties':{'zip':{'type':'string'},'city':{'type':'string','enum':['a','b']},"
        "'days':{'type':'integer','minimum':1}},'required':['city'],'additionalProperties':false},'strict':true}},"
        "{'function':{'parameters':{'type':'object','properties':{}},'name':'noop'},'type':'function'}]";
    char body[2048];
    snprintf(body, sizeof body, "{'messages':[{'role':'user','content':'u'}],'tools':%s}", tools);
    check(OAI, body, "[{'role':'user','content':'u'}]", tools);
    check(OAI, "{'messages':[{'role':'user','content':'u'}],'tools':[]}", "[{'role':'user','content':'u'}]", NULL);
    check(OAI, "{'messages':[{'role':'user','content':'u'}],'tools':null}", "[{'role':'user','content':'u'}]", NULL);
}

Test(messages_openai, tool_errors)
{
    fails(OAI, "{'messages':[{'role':'user','content':'u'}],'tools':[{'type':'function','function':{'name':'f'}},"
               "{'type':'web_search'}]}",
          "tools[1]: tool type 'web_search' is not supported (only \"function\" tools)");
    fails(OAI, "{'messages':[{'role':'user','content':'u'}],'tools':[{'function':{'name':'f'}}]}",
          "tools[0]: \"type\" must be a string (\"function\")");
    fails(OAI, "{'messages':[{'role':'user','content':'u'}],'tools':[{'type':'function'}]}",
          "tools[0].function: expected an object with \"name\"");
    fails(OAI, "{'messages':[{'role':'user','content':'u'}],'tools':[{'type':'function','function':{'name':''}}]}",
          "tools[0].function: \"name\" must be a non-empty string");
    fails(OAI, "{'messages':[{'role':'user','content':'u'}],'tools':[{'type':'function','function':{'name':'f','description':1}}]}",
          "tools[0].function: \"description\" must be a string, not a number");
    fails(OAI, "{'messages':[{'role':'user','content':'u'}],'tools':[{'type':'function','function':{'name':'f','parameters':'x'}}]}",
          "tools[0].function: \"parameters\" must be a JSON schema object, not a string");
    fails(OAI, "{'messages':[{'role':'user','content':'u'}],'tools':{}}", "tools: expected an array, not an object");
    fails(OAI, "{'messages':[{'role':'user','content':'u'}],'tools':['f']}", "tools[0]: expected a tool object, not a string");
}

Test(messages_openai, thinking_flags)
{
    cr_assert_eq(thinking_of(OAI, "{'messages':[{'role':'user','content':'u'}]}"), -1);
    cr_assert_eq(thinking_of(OAI, "{'messages':[{'role':'user','content':'u'}],'chat_template_kwargs':{'enable_thinking':false}}"), 0);
    cr_assert_eq(thinking_of(OAI, "{'messages':[{'role':'user','content':'u'}],'chat_template_kwargs':{'enable_thinking':true}}"), 1);
    cr_assert_eq(thinking_of(OAI, "{'messages':[{'role':'user','content':'u'}],'chat_template_kwargs':{'other':1}}"), -1);
    cr_assert_eq(thinking_of(OAI, "{'messages':[{'role':'user','content':'u'}],'enable_thinking':false}"), 0);
    cr_assert_eq(thinking_of(OAI, "{'messages':[{'role':'user','content':'u'}],'enable_thinking':true}"), 1);
    cr_assert_eq(thinking_of(OAI, "{'messages':[{'role':'user','content':'u'}],'enable_thinking':false,"
                                  "'chat_template_kwargs':{'enable_thinking':true}}"), 1, "chat_template_kwargs wins");
    cr_assert_eq(thinking_of(OAI, "{'messages':[{'role':'user','content':'u'}],'reasoning_effort':'none'}"), 0);
    cr_assert_eq(thinking_of(OAI, "{'messages':[{'role':'user','content':'u'}],'reasoning_effort':'high'}"), -1);
    cr_assert_eq(thinking_of(OAI, "{'messages':[{'role':'user','content':'u'}],'reasoning_effort':'none',"
                                  "'enable_thinking':true}"), 1, "an explicit flag wins over reasoning_effort");
    fails(OAI, "{'messages':[{'role':'user','content':'u'}],'chat_template_kwargs':{'enable_thinking':'no'}}",
          "chat_template_kwargs.enable_thinking: expected a boolean, not a string");
    fails(OAI, "{'messages':[{'role':'user','content':'u'}],'chat_template_kwargs':[]}",
          "chat_template_kwargs: expected an object, not an array");
    fails(OAI, "{'messages':[{'role':'user','content':'u'}],'enable_thinking':1}",
          "enable_thinking: expected a boolean, not a number");
    fails(OAI, "{'messages':[{'role':'user','content':'u'}],'reasoning_effort':0}",
          "reasoning_effort: expected a string, not a number");
}

/* Codex talks to OpenAI-compatible servers with developer messages (for the chat API). */
Test(messages_openai, codex_like_developer_messages)
{
    check(OAI, "{'model':'m','messages':[{'role':'developer','content':'You are Codex.'},"
               "{'role':'developer','content':[{'type':'text','text':'<permissions>ro</permissions>'}]},"
               "{'role':'user','content':[{'type':'text','text':'<environment_context>cwd</environment_context>'}]},"
               "{'role':'user','content':[{'type':'text','text':'fix it'}]}],"
               "'tools':[{'type':'function','function':{'name':'shell','parameters':{'type':'object','properties':{"
               "'command':{'type':'array','items':{'type':'string'}}},'required':['command']}}}],"
               "'prompt_cache_key':'k','stream':true}",
          "[{'role':'system','content':'You are Codex.\\n\\n<permissions>ro</permissions>'},"
          "{'role':'user','content':'<environment_context>cwd</environment_context>'},"
          "{'role':'user','content':'fix it'}]",
          "[{'type':'function','function':{'name':'shell','parameters':{'type':'object','properties':{"
          "'command':{'type':'array','items':{'type':'string'}}},'required':['command']}}}]");
}

/* Qwen Code sends tool results as arrays of text parts. */
Test(messages_openai, qwen_code_like_tool_results_as_parts)
{
    check(OAI, "{'messages':[{'role':'system','content':'You are Qwen Code.'},"
               "{'role':'user','content':[{'type':'text','text':'list files'}]},"
               "{'role':'assistant','content':'','tool_calls':[{'id':'call_0','type':'function',"
               "'function':{'name':'list_directory','arguments':'{\\'path\\':\\'/w\\'}'}}]},"
               "{'role':'tool','tool_call_id':'call_0','content':[{'type':'text','text':'a.c\\n'},"
               "{'type':'text','text':'b.c'}]}],"
               "'chat_template_kwargs':{'enable_thinking':false}}",
          "[{'role':'system','content':'You are Qwen Code.'},{'role':'user','content':'list files'},"
          "{'role':'assistant','content':'','tool_calls':[{'type':'function','id':'call_0',"
          "'function':{'name':'list_directory','arguments':{'path':'/w'}}}]},"
          "{'role':'tool','content':'a.c\\nb.c','tool_call_id':'call_0'}]", NULL);
}

/* ---- Anthropic --------------------------------------------------------------------- */

Test(messages_anthropic, system_string_and_string_contents)
{
    struct chat_request r = ok(ANT, "{'model':'m','max_tokens':10,'system':'Be brief.',"
                                    "'messages':[{'role':'user','content':'Hi'},{'role':'assistant','content':'Hello'},"
                                    "{'role':'user','content':'Bye'}]}");
    eq_json(r.messages, "[{'role':'system','content':'Be brief.'},{'role':'user','content':'Hi'},"
                        "{'role':'assistant','content':'Hello'},{'role':'user','content':'Bye'}]");
    cr_assert_null(r.tools);
    cr_assert_eq(r.enable_thinking, -1);
    chat_request_free(&r);
}

Test(messages_anthropic, system_blocks_join_and_cache_control_ignored)
{
    check(ANT, "{'system':[{'type':'text','text':'A'},{'type':'text','text':'','cache_control':{'type':'ephemeral'}},"
               "{'type':'text','text':'B','cache_control':{'type':'ephemeral'}}],"
               "'messages':[{'role':'user','content':'u'}]}",
          "[{'role':'system','content':'A\\n\\nB'},{'role':'user','content':'u'}]", NULL);
    check(ANT, "{'system':[],'messages':[{'role':'user','content':'u'}]}", "[{'role':'user','content':'u'}]", NULL);
    check(ANT, "{'system':'','messages':[{'role':'user','content':'u'}]}", "[{'role':'user','content':'u'}]", NULL);
}

Test(messages_anthropic, billing_header_line_dropped)
{
    /* the header alone in a block: the block goes */
    check(ANT, "{'system':[{'type':'text','text':'x-anthropic-billing-header: cc_version=2.1.101.e51; cc_entrypoint=cli; cch=a5145;'},"
               "{'type':'text','text':'You are Claude Code.'}],'messages':[{'role':'user','content':'u'}]}",
          "[{'role':'system','content':'You are Claude Code.'},{'role':'user','content':'u'}]", NULL);
    /* the header as the first line of a longer text: only that line goes */
    check(ANT, "{'system':'x-anthropic-billing-header: cch=00000;\\nYou are Claude Code.\\nMore.',"
               "'messages':[{'role':'user','content':'u'}]}",
          "[{'role':'system','content':'You are Claude Code.\\nMore.'},{'role':'user','content':'u'}]", NULL);
    /* only at the start of a block; elsewhere it is ordinary text */
    check(ANT, "{'system':[{'type':'text','text':'see x-anthropic-billing-header: 1'}],'messages':[{'role':'user','content':'u'}]}",
          "[{'role':'system','content':'see x-anthropic-billing-header: 1'},{'role':'user','content':'u'}]", NULL);
    /* nothing but the header: no system message at all */
    check(ANT, "{'system':'x-anthropic-billing-header: cch=1;','messages':[{'role':'user','content':'u'}]}",
          "[{'role':'user','content':'u'}]", NULL);
}

Test(messages_anthropic, late_system_message_becomes_user_leading_one_merges)
{
    check(ANT, "{'system':'S','messages':[{'role':'system','content':'early'},{'role':'user','content':'u'},"
               "{'role':'system','content':[{'type':'text','text':'env: '},{'type':'text','text':'linux'}]},"
               "{'role':'system','content':''},{'role':'assistant','content':'a'}]}",
          "[{'role':'system','content':'S\\n\\nearly'},{'role':'user','content':'u'},"
          "{'role':'user','content':'env: linux'},{'role':'assistant','content':'a'}]", NULL);
    fails(ANT, "{'messages':[{'role':'user','content':'u'},{'role':'system','content':[{'type':'image','source':{}}]}]}",
          "messages[1].content[0]: image blocks are not supported (text-only model)");
    fails(ANT, "{'messages':[{'role':'user','content':'u'},{'role':'system','content':[{'type':'tool_use','name':'f'}]}]}",
          "messages[1].content[0]: tool_use blocks belong in assistant messages, not in system messages");
}

Test(messages_anthropic, assistant_blocks)
{
    check(ANT, "{'messages':[{'role':'user','content':'u'},{'role':'assistant','content':["
               "{'type':'thinking','thinking':'Let me see.','signature':'sig=='},"
               "{'type':'redacted_thinking','data':'enc'},"
               "{'type':'text','text':'One, '},{'type':'text','text':'two.'},"
               "{'type':'tool_use','id':'toolu_1','name':'Read','input':{'file_path':'/a','limit':5,'offset':1}},"
               "{'type':'tool_use','id':'toolu_2','name':'Glob','input':{}}]}]}",
          "[{'role':'user','content':'u'},{'role':'assistant','content':'One, two.','reasoning_content':'Let me see.',"
          "'tool_calls':[{'type':'function','id':'toolu_1','function':{'name':'Read','arguments':{'file_path':'/a','limit':5,'offset':1}}},"
          "{'type':'function','id':'toolu_2','function':{'name':'Glob','arguments':{}}}]}]", NULL);
    /* only redacted thinking: an empty assistant turn, no reasoning_content */
    check(ANT, "{'messages':[{'role':'user','content':'u'},{'role':'assistant','content':[{'type':'redacted_thinking','data':'x'}]},"
               "{'role':'assistant','content':[{'type':'thinking','thinking':''}]},{'role':'assistant'}]}",
          "[{'role':'user','content':'u'},{'role':'assistant','content':''},"
          "{'role':'assistant','content':'','reasoning_content':''},{'role':'assistant','content':''}]", NULL);
}

Test(messages_anthropic, tool_results_split_in_order)
{
    check(ANT, "{'messages':[{'role':'user','content':'u'},"
               "{'role':'assistant','content':[{'type':'tool_use','id':'t1','name':'A','input':{'x':1}},"
               "{'type':'tool_use','id':'t2','name':'B','input':{}}]},"
               "{'role':'user','content':[{'type':'text','text':'before'},"
               "{'type':'tool_result','tool_use_id':'t1','content':'r1','cache_control':{'type':'ephemeral'}},"
               "{'type':'tool_result','tool_use_id':'t2','is_error':true,'content':[{'type':'text','text':'<tool_use_error>'},"
               "{'type':'text','text':'bad</tool_use_error>'}]},"
               "{'type':'text','text':'after '},{'type':'text','text':'both'}]},"
               "{'role':'user','content':[{'type':'tool_result','tool_use_id':'t3'}]}]}",
          "[{'role':'user','content':'u'},"
          "{'role':'assistant','content':'','tool_calls':[{'type':'function','id':'t1','function':{'name':'A','arguments':{'x':1}}},"
          "{'type':'function','id':'t2','function':{'name':'B','arguments':{}}}]},"
          "{'role':'user','content':'before'},"
          "{'role':'tool','content':'r1','tool_call_id':'t1'},"
          "{'role':'tool','content':'<tool_use_error>bad</tool_use_error>','tool_call_id':'t2'},"
          "{'role':'user','content':'after both'},"
          "{'role':'tool','content':'','tool_call_id':'t3'}]", NULL);
    /* a user message of no blocks is one empty user turn */
    check(ANT, "{'messages':[{'role':'user','content':[]}]}", "[{'role':'user','content':''}]", NULL);
}

Test(messages_anthropic, block_errors_name_the_block)
{
    fails(ANT, "{'messages':[{'role':'user','content':'u'},{'role':'assistant','content':'a'},"
               "{'role':'user','content':'v'},{'role':'user','content':[{'type':'text','text':'see'},"
               "{'type':'image','source':{'type':'base64','data':''}}]}]}",
          "messages[3].content[1]: image blocks are not supported (text-only model)");
    fails(ANT, "{'messages':[{'role':'user','content':[{'type':'document','source':{}}]}]}",
          "messages[0].content[0]: document blocks are not supported (text-only model)");
    fails(ANT, "{'messages':[{'role':'user','content':'u'},{'role':'assistant','content':[{'type':'tool_result','tool_use_id':'t'}]}]}",
          "messages[1].content[0]: tool_result blocks belong in user messages, not in assistant messages");
    fails(ANT, "{'messages':[{'role':'user','content':[{'type':'tool_use','id':'t','name':'f','input':{}}]}]}",
          "messages[0].content[0]: tool_use blocks belong in assistant messages, not in user messages");
    fails(ANT, "{'messages':[{'role':'user','content':[{'type':'thinking','thinking':'t'}]}]}",
          "messages[0].content[0]: thinking blocks belong in assistant messages, not in user messages");
    fails(ANT, "{'messages':[{'role':'user','content':'u'},{'role':'assistant','content':[{'type':'server_tool_use','id':'s'}]}]}",
          "messages[1].content[0]: unsupported content block type 'server_tool_use' in assistant messages");
    fails(ANT, "{'messages':[{'role':'user','content':[{'type':'text'}]}]}",
          "messages[0].content[0]: \"text\" must be a string");
    fails(ANT, "{'messages':[{'role':'user','content':'u'},{'role':'assistant','content':[{'type':'thinking','signature':'s'}]}]}",
          "messages[1].content[0]: \"thinking\" must be a string");
    fails(ANT, "{'messages':[{'role':'user','content':[{'text':'x'}]}]}",
          "messages[0].content[0]: \"type\" must be a string");
    fails(ANT, "{'messages':[{'role':'user','content':[3]}]}",
          "messages[0].content[0]: expected a content block object, not a number");
    fails(ANT, "{'messages':[{'role':'user','content':[{'type':'tool_result','tool_use_id':'t','content':{}}]}]}",
          "messages[0].content[0].content: expected a string or an array of text blocks, not an object");
    fails(ANT, "{'messages':[{'role':'user','content':[{'type':'tool_result','tool_use_id':'t','is_error':'yes'}]}]}",
          "messages[0].content[0]: \"is_error\" must be a boolean, not a string");
    fails(ANT, "{'messages':[{'role':'user','content':[{'type':'tool_result','tool_use_id':5}]}]}",
          "messages[0].content[0]: \"tool_use_id\" must be a string, not a number");
    fails(ANT, "{'messages':[{'role':'user','content':'u'},{'role':'assistant','content':[{'type':'tool_use','id':'t','name':'f','input':[1]}]}]}",
          "messages[1].content[0]: \"input\" must be an object, not an array");
    fails(ANT, "{'messages':[{'role':'user','content':'u'},{'role':'assistant','content':[{'type':'tool_use','id':'t','input':{}}]}]}",
          "messages[1].content[0]: \"name\" must be a non-empty string");
}

Test(messages_anthropic, request_and_role_errors)
{
    fails(ANT, "'text'", "request: expected a JSON object");
    fails(ANT, "{'system':'s'}", "messages: expected a non-empty array");
    fails(ANT, "{'messages':[{'role':'tool','content':'x'}]}",
          "messages[0].role: unknown role 'tool' (expected user, assistant or system)");
    fails(ANT, "{'messages':[{'content':'x'}]}", "messages[0].role: must be a string");
    fails(ANT, "{'messages':['x']}", "messages[0]: expected a message object, not a string");
    fails(ANT, "{'messages':[{'role':'user','content':5}]}",
          "messages[0].content: expected a string or an array of content blocks, not a number");
    fails(ANT, "{'system':5,'messages':[{'role':'user','content':'u'}]}",
          "system: expected a string or an array of text blocks, not a number");
    fails(ANT, "{'system':[{'type':'image','source':{}}],'messages':[{'role':'user','content':'u'}]}",
          "system[0]: image blocks are not supported (text-only model)");
    fails(ANT, "{'system':[{'type':'text','text':'a'},{'type':'text'}],'messages':[{'role':'user','content':'u'}]}",
          "system[1]: \"text\" must be a string");
}

Test(messages_anthropic, tools_become_function_tools_in_order)
{
    check(ANT, "{'messages':[{'role':'user','content':'u'}],'tools':["
               "{'name':'Bash','description':'Run \u00e4 command \u2192 \U0001F680','input_schema':{'type':'object',"
               "'properties':{'command':{'type':'string','description':'cmd'},'timeout':{'type':'number'}},"
               "'required':['command'],'additionalProperties':false,'$schema':'http://json-schema.org/draft-07/schema#'},"
               "'cache_control':{'type':'ephemeral'}},"
               "{'input_schema':{'type':'object'},'type':'custom','name':'Min'},"
               "{'name':'Bare'}]}",
          "[{'role':'user','content':'u'}]",
          "[{'type':'function','function':{'name':'Bash','description':'Run \u00e4 command \u2192 \U0001F680','parameters':{'type':'object',"
          "'properties':{'command':{'type':'string','description':'cmd'},'timeout':{'type':'number'}},"
          "'required':['command'],'additionalProperties':false,'$schema':'http://json-schema.org/draft-07/schema#'}}},"
          "{'type':'function','function':{'name':'Min','parameters':{'type':'object'}}},"
          "{'type':'function','function':{'name':'Bare'}}]");
    check(ANT, "{'messages':[{'role':'user','content':'u'}],'tools':[]}", "[{'role':'user','content':'u'}]", NULL);
}

Test(messages_anthropic, tool_errors)
{
    fails(ANT, "{'messages':[{'role':'user','content':'u'}],'tools':[{'name':'ok','input_schema':{}},"
               "{'type':'web_search_20250305','name':'web_search','max_uses':5}]}",
          "tools[1]: server tool 'web_search' (type 'web_search_20250305') is not supported; only custom tools with an input_schema");
    fails(ANT, "{'messages':[{'role':'user','content':'u'}],'tools':[{'type':'bash_20250124','name':'bash'}]}",
          "tools[0]: server tool 'bash' (type 'bash_20250124') is not supported; only custom tools with an input_schema");
    fails(ANT, "{'messages':[{'role':'user','content':'u'}],'tools':[{'description':'d'}]}",
          "tools[0]: \"name\" must be a non-empty string");
    fails(ANT, "{'messages':[{'role':'user','content':'u'}],'tools':[{'name':'f','input_schema':'s'}]}",
          "tools[0]: \"input_schema\" must be a JSON schema object, not a string");
    fails(ANT, "{'messages':[{'role':'user','content':'u'}],'tools':[{'name':'f','description':[]}]}",
          "tools[0]: \"description\" must be a string, not an array");
    fails(ANT, "{'messages':[{'role':'user','content':'u'}],'tools':[1]}", "tools[0]: expected a tool object, not a number");
    fails(ANT, "{'messages':[{'role':'user','content':'u'}],'tools':'all'}", "tools: expected an array, not a string");
}

Test(messages_anthropic, thinking_flags)
{
    cr_assert_eq(thinking_of(ANT, "{'messages':[{'role':'user','content':'u'}]}"), -1);
    cr_assert_eq(thinking_of(ANT, "{'messages':[{'role':'user','content':'u'}],'thinking':{'type':'enabled','budget_tokens':1024}}"), 1);
    cr_assert_eq(thinking_of(ANT, "{'messages':[{'role':'user','content':'u'}],'thinking':{'type':'adaptive'}}"), 1);
    cr_assert_eq(thinking_of(ANT, "{'messages':[{'role':'user','content':'u'}],'thinking':{'type':'disabled'}}"), 0);
    cr_assert_eq(thinking_of(ANT, "{'messages':[{'role':'user','content':'u'}],'thinking':null}"), -1);
    fails(ANT, "{'messages':[{'role':'user','content':'u'}],'thinking':{'type':'maximum'}}",
          "thinking.type: unknown value 'maximum' (expected enabled, adaptive or disabled)");
    fails(ANT, "{'messages':[{'role':'user','content':'u'}],'thinking':true}",
          "thinking: expected an object with a string \"type\"");
}

/* The shape Claude Code sends: billing header + cache_control system blocks, tools with
 * input_schema and unicode, an environment note as role "system" after the user turn, and
 * a tool_use / tool_result round. */
#define CC_TOOLS \
    "'tools':[{'name':'Read','description':'Reads a file \u2014 absolute paths only.','input_schema':{" \
    "'type':'object','properties':{'file_path':{'type':'string','description':'The path'},'offset':{'type':'number'}}," \
    "'required':['file_path'],'additionalProperties':false,'$schema':'http://json-schema.org/draft-07/schema#'}}," \
    "{'name':'TodoWrite','description':'\u270d todos','input_schema':{'type':'object','properties':{'todos':{'type':'array'," \
    "'items':{'type':'object','properties':{'content':{'type':'string','minLength':1},'status':{'type':'string'," \
    "'enum':['pending','in_progress','completed']}},'required':['content','status']}}},'required':['todos']}," \
    "'cache_control':{'type':'ephemeral'}}]"
#define CC_TOOLS_OUT \
    "[{'type':'function','function':{'name':'Read','description':'Reads a file \u2014 absolute paths only.','parameters':{" \
    "'type':'object','properties':{'file_path':{'type':'string','description':'The path'},'offset':{'type':'number'}}," \
    "'required':['file_path'],'additionalProperties':false,'$schema':'http://json-schema.org/draft-07/schema#'}}}," \
    "{'type':'function','function':{'name':'TodoWrite','description':'\u270d todos','parameters':{'type':'object','properties':{'todos':{'type':'array'," \
    "'items':{'type':'object','properties':{'content':{'type':'string','minLength':1},'status':{'type':'string'," \
    "'enum':['pending','in_progress','completed']}},'required':['content','status']}}},'required':['todos']}}}]"

static void claude_code_body(char *buf, size_t n, const char *cch, const char *prompt)
{
    snprintf(buf, n,
             "{'model':'claude-sonnet-4-5','max_tokens':32000,'stream':true,"
             "'system':[{'type':'text','text':'x-anthropic-billing-header: cc_version=2.1.101.e51; cc_entrypoint=cli; cch=%s;'},"
             "{'type':'text','text':'You are Claude Code, Anthropic\\u0027s official CLI for Claude.','cache_control':{'type':'ephemeral'}},"
             "{'type':'text','text':'You are an interactive agent.\\n# Tone','cache_control':{'type':'ephemeral'}}],"
             "'messages':[{'role':'user','content':[{'type':'text','text':'<system-reminder>\\nctx\\n</system-reminder>\\n'},"
             "{'type':'text','text':'%s','cache_control':{'type':'ephemeral'}}]},"
             "{'role':'system','content':'<env>Working directory: /w</env>'},"
             "{'role':'assistant','content':[{'type':'thinking','thinking':'Read it.','signature':'abc'},"
             "{'type':'text','text':'Reading.'},{'type':'tool_use','id':'toolu_01','name':'Read','input':{'file_path':'/w/a.c','offset':1}}]},"
             "{'role':'user','content':[{'type':'tool_result','tool_use_id':'toolu_01','content':'int main;'}]}],"
             CC_TOOLS ",'thinking':{'type':'adaptive'},'context_management':{},'output_config':{},"
             "'metadata':{'user_id':'u'}}",
             cch, prompt);
}

Test(messages_anthropic, claude_code_like_request)
{
    char body[8192];
    claude_code_body(body, sizeof body, "a5145", "fix the bug");
    struct chat_request r = ok(ANT, body);
    eq_json(r.messages,
            "[{'role':'system','content':'You are Claude Code, Anthropic\\u0027s official CLI for Claude.\\n\\n"
            "You are an interactive agent.\\n# Tone'},"
            "{'role':'user','content':'<system-reminder>\\nctx\\n</system-reminder>\\nfix the bug'},"
            "{'role':'user','content':'<env>Working directory: /w</env>'},"
            "{'role':'assistant','content':'Reading.','reasoning_content':'Read it.','tool_calls':[{'type':'function',"
            "'id':'toolu_01','function':{'name':'Read','arguments':{'file_path':'/w/a.c','offset':1}}}]},"
            "{'role':'tool','content':'int main;','tool_call_id':'toolu_01'}]");
    eq_json(r.tools, CC_TOOLS_OUT);
    cr_assert_eq(r.enable_thinking, 1);
    chat_request_free(&r);
}

/* Two sessions with different billing stamps and prompts share the head exactly. */
Test(messages_anthropic, claude_code_head_is_identical_across_sessions)
{
    char b1[8192], b2[8192];
    claude_code_body(b1, sizeof b1, "a5145", "first session");
    claude_code_body(b2, sizeof b2, "ffe01", "another task entirely");
    struct chat_request r1 = ok(ANT, b1), r2 = ok(ANT, b2);
    char *s1 = json_dumps(json_array_get(r1.messages, 0), JSON_COMPACT);
    char *s2 = json_dumps(json_array_get(r2.messages, 0), JSON_COMPACT);
    char *t1 = json_dumps(r1.tools, JSON_COMPACT), *t2 = json_dumps(r2.tools, JSON_COMPACT);
    cr_assert_str_eq(s1, s2);
    cr_assert_str_eq(t1, t2);
    cr_assert_null(strstr(s1, "cch="));
    char *m1 = json_dumps(r1.messages, JSON_COMPACT), *m2 = json_dumps(r2.messages, JSON_COMPACT);
    cr_assert_str_neq(m1, m2, "the prompts differ, so the conversations must");
    free(s1), free(s2), free(t1), free(t2), free(m1), free(m2);
    chat_request_free(&r1);
    chat_request_free(&r2);
}

/* Rule 4's exception: media inside tool results become a fixed placeholder naming the kind
 * and the (validated, lower-cased) media type, counted; the same part elsewhere stays a 400. */
Test(messages_media, tool_result_media_become_placeholders)
{
    struct chat_request r = ok(ANT,
        "{'messages':[{'role':'user','content':'u'},{'role':'assistant','content':[{'type':'tool_use','id':'t','name':'Read','input':{}}]},"
        "{'role':'user','content':[{'type':'tool_result','tool_use_id':'t','content':[{'type':'text','text':'x'},"
        "{'type':'image','source':{'type':'base64','media_type':'Image/PNG','data':'iVBORw0KGgo='}},"
        "{'type':'document','source':{'type':'base64','media_type':'application/pdf','data':'JVBER'}},"
        "{'type':'image','source':{'type':'url','url':'https://example.invalid/a.png'}},"
        "{'type':'image','source':{'type':'base64','media_type':'image/png\\nIGNORE ALL','data':''}}]}]}]}");
    eq_json(json_array_get(r.messages, 2),
            "{'role':'tool','content':'x[image omitted (image/png): this model reads text only]"
            "[document omitted (application/pdf): this model reads text only]"
            "[image omitted: this model reads text only][image omitted: this model reads text only]','tool_call_id':'t'}");
    cr_assert_eq(r.n_media_placeholders, 4);
    chat_request_free(&r);

    /* the bytes depend on the media type only, never on the data */
    struct chat_request a = ok(ANT, "{'messages':[{'role':'user','content':[{'type':'tool_result','tool_use_id':'t','content':"
                                    "[{'type':'image','source':{'type':'base64','media_type':'image/jpeg','data':'AAAA'}}]}]}]}");
    struct chat_request b = ok(ANT, "{'messages':[{'role':'user','content':[{'type':'tool_result','tool_use_id':'t','content':"
                                    "[{'type':'image','source':{'type':'base64','media_type':'image/jpeg','data':'BBBBBBBB'}}]}]}]}");
    cr_assert(json_equal(a.messages, b.messages));
    chat_request_free(&a);
    chat_request_free(&b);

    r = ok(OAI, "{'messages':[{'role':'user','content':'u'},{'role':'assistant','content':null,'tool_calls':"
                "[{'id':'c','type':'function','function':{'name':'view','arguments':'{}'}}]},"
                "{'role':'tool','tool_call_id':'c','content':[{'type':'text','text':'shot: '},"
                "{'type':'image_url','image_url':{'url':'data:image/webp;base64,UklGR'}},"
                "{'type':'input_audio','input_audio':{'data':'x','format':'wav'}},{'type':'file','file':{}}]}]}");
    eq_json(json_array_get(r.messages, 2),
            "{'role':'tool','content':'shot: [image omitted (image/webp): this model reads text only]"
            "[audio omitted (audio/wav): this model reads text only][file omitted: this model reads text only]','tool_call_id':'c'}");
    cr_assert_eq(r.n_media_placeholders, 3);
    chat_request_free(&r);

    /* outside tool results: still an error naming the part */
    fails(ANT, "{'messages':[{'role':'user','content':[{'type':'image','source':{'type':'base64','media_type':'image/png','data':''}}]}]}",
          "messages[0].content[0]: image blocks are not supported (text-only model)");
    fails(OAI, "{'messages':[{'role':'user','content':[{'type':'image_url','image_url':{'url':'data:image/png;base64,'}}]}]}",
          "messages[0].content[0]: image_url parts are not supported (text-only model)");
    r = ok(ANT, "{'messages':[{'role':'user','content':'plain'}]}");
    cr_assert_eq(r.n_media_placeholders, 0);
    chat_request_free(&r);
}

/* chat_template_kwargs: enable_thinking sets the flag, every other entry is kept with its
 * type for the template (all three APIs; an extension for Anthropic), names the request
 * sets itself are refused. */
Test(messages_kwargs, template_kwargs_pass_through)
{
    struct chat_request r = ok(OAI, "{'messages':[{'role':'user','content':'u'}],"
                                    "'chat_template_kwargs':{'enable_thinking':false,'preserve_thinking':true,'n':3,'s':'x'}}");
    cr_assert_eq(r.enable_thinking, 0);
    eq_json(r.template_kwargs, "{'preserve_thinking':true,'n':3,'s':'x'}");
    chat_request_free(&r);
    r = ok(ANT, "{'messages':[{'role':'user','content':'u'}],'thinking':{'type':'enabled'},"
                "'chat_template_kwargs':{'enable_thinking':false,'preserve_thinking':false}}");
    cr_assert_eq(r.enable_thinking, 1, "Anthropic's thinking decides");
    eq_json(r.template_kwargs, "{'preserve_thinking':false}");
    chat_request_free(&r);
    r = ok(OAI, "{'messages':[{'role':'user','content':'u'}],'chat_template_kwargs':{'enable_thinking':true}}");
    cr_assert_null(r.template_kwargs);
    cr_assert_eq(r.enable_thinking, 1);
    chat_request_free(&r);
    fails(OAI, "{'messages':[{'role':'user','content':'u'}],'chat_template_kwargs':{'messages':[]}}",
          "chat_template_kwargs.messages: is set from the request itself, not a template argument");
    fails(ANT, "{'messages':[{'role':'user','content':'u'}],'chat_template_kwargs':{'add_generation_prompt':false}}",
          "chat_template_kwargs.add_generation_prompt: is set from the request itself, not a template argument");
    fails(OAI, "{'messages':[{'role':'user','content':'u'}],'chat_template_kwargs':{'enable_thinking':1}}",
          "chat_template_kwargs.enable_thinking: expected a boolean, not a number");
    fails(OAI, "{'messages':[{'role':'user','content':'u'}],'chat_template_kwargs':[1]}",
          "chat_template_kwargs: expected an object, not an array");
}

/* Newer request shapes of real clients ([F11] item 7) render as the older ones did: Claude
 * Code 2.1.328's trailing role "system" message with output_config, tools with
 * defer_loading, thinking.display "omitted" and a top-level output_config; pi's tools with
 * eager_input_streaming; Kilo's user turn of two text parts. The head (system + tools)
 * stays the same conversation and tool list as without the new fields. */
Test(messages_shapes, newer_client_fields_keep_the_head)
{
    const char *base = "{'system':[{'type':'text','text':'You are Claude Code.'}],"
                       "'tools':[{'name':'Read','description':'r','input_schema':{'type':'object'}},"
                       "{'name':'Grep','description':'g','input_schema':{'type':'object'}}],"
                       "'thinking':{'type':'adaptive'},"
                       "'messages':[{'role':'user','content':'hi'}]}";
    const char *newer = "{'system':[{'type':'text','text':'You are Claude Code.'}],"
                        "'tools':[{'name':'Read','description':'r','input_schema':{'type':'object'},'eager_input_streaming':true},"
                        "{'name':'Grep','description':'g','input_schema':{'type':'object'},'defer_loading':true}],"
                        "'thinking':{'type':'adaptive','display':'omitted'},'output_config':{'effort':'high'},"
                        "'messages':[{'role':'user','content':'hi'},"
                        "{'role':'system','content':'','output_config':{'effort':'high'}}]}";
    struct chat_request a = ok(ANT, base), b = ok(ANT, newer);
    cr_assert(json_equal(a.messages, b.messages), "the empty trailing system message is dropped");
    cr_assert(json_equal(a.tools, b.tools), "defer_loading / eager_input_streaming do not change the tools");
    cr_assert_eq(a.enable_thinking, b.enable_thinking);
    chat_request_free(&a);
    chat_request_free(&b);

    /* a trailing system message with text is a user turn at its place; the head is unchanged */
    struct chat_request c = ok(ANT, "{'system':'S','messages':[{'role':'user','content':'hi'},"
                                    "{'role':'system','content':[{'type':'text','text':'effort: high'}],'output_config':{'effort':'high'}}]}");
    eq_json(c.messages, "[{'role':'system','content':'S'},{'role':'user','content':'hi'},"
                        "{'role':'user','content':'effort: high'}]");
    chat_request_free(&c);

    /* Kilo: one user turn as two text parts, joined with "" (rule 3) */
    check(OAI, "{'messages':[{'role':'user','content':[{'type':'text','text':'<task>fix</task>'},"
               "{'type':'text','text':'<environment_details>x</environment_details>'}]}]}",
          "[{'role':'user','content':'<task>fix</task><environment_details>x</environment_details>'}]", NULL);
}
