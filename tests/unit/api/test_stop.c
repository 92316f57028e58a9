/* Stop strings on generated text (src/api/parse.c, chat_stop): hand-written outputs with
 * the released text and the match each must give — earliest match, request order at one
 * position, a string held at the end that only finish can decide, no match inside <think>
 * or a tool call, tool_choice none's blocked <tool_call>, UTF-8 strings — each fed whole,
 * split at every byte boundary and byte by byte (the result must not depend on the
 * split); and promptness: only a possible match's start is held back. */
#include "api/api.h"
#include "base/base.h"

#include <criterion/criterion.h>
#include <string.h>

static json_t *stop_list(const char *const *s)
{
    json_t *a = json_array();
    for (; s && *s; s++) json_array_append_new(a, json_string(*s));
    return a;
}

/* Feed `text` cut at the offsets in cuts[0..n_cuts) (ascending), then finish. */
static int run_split(const char *const *stops, bool block, enum chat_stop_state st, const char *text,
                     const size_t *cuts, int n_cuts, struct strbuf *out)
{
    json_t *a = stop_list(stops);
    struct chat_stop *m = chat_stop_new(a, block, st);
    cr_assert_not_null(m);
    size_t len = strlen(text), at = 0;
    int r = CHAT_STOP_NONE;
    for (int i = 0; i <= n_cuts; i++) {
        size_t end = i < n_cuts ? cuts[i] : len;
        int k = chat_stop_feed(m, text + at, end - at, out);
        if (k != CHAT_STOP_NONE) {
            cr_assert_eq(r, CHAT_STOP_NONE, "two matches");
            r = k;
        }
        at = end;
    }
    int k = chat_stop_finish(m, out);
    if (k != CHAT_STOP_NONE) {
        cr_assert_eq(r, CHAT_STOP_NONE, "a match after a match");
        r = k;
    }
    /* nothing more comes out after the end */
    size_t before = out->len;
    cr_assert_eq(chat_stop_feed(m, "xyz", 3, out), CHAT_STOP_NONE);
    cr_assert_eq(out->len, before);
    chat_stop_free(m);
    json_decref(a);
    return r;
}

/* Whole, every 2-way split, byte by byte: the same released text and result each time. */
static void check(const char *const *stops, bool block, enum chat_stop_state st, const char *text,
                  const char *want, int want_r)
{
    size_t len = strlen(text);
    struct strbuf out;
    strbuf_init(&out);
    int r = run_split(stops, block, st, text, NULL, 0, &out);
    cr_assert_eq(r, want_r, "text '%s': result %d, want %d", text, r, want_r);
    cr_assert_eq(out.len, strlen(want), "text '%s': released '%.*s', want '%s'", text, (int)out.len,
                 out.buf ? out.buf : "", want);
    cr_assert_eq(memcmp(out.buf ? out.buf : "", want, out.len), 0);
    for (size_t c = 0; c <= len; c++) {
        strbuf_reset(&out);
        cr_assert_eq(run_split(stops, block, st, text, &c, 1, &out), want_r, "text %s split at %zu", text, c);
        cr_assert_eq(out.len, strlen(want), "text %s split at %zu: %.*s", text, c, (int)out.len, out.buf ? out.buf : "");
        cr_assert_eq(memcmp(out.buf ? out.buf : "", want, out.len), 0, "split at %zu", c);
    }
    size_t *cuts = hs_malloc((len + 1) * sizeof(size_t));
    for (size_t c = 0; c < len; c++) cuts[c] = c;
    strbuf_reset(&out);
    cr_assert_eq(run_split(stops, block, st, text, cuts, (int)len, &out), want_r, "byte by byte");
    cr_assert_eq(out.len, strlen(want), "byte by byte: '%.*s'", (int)out.len, out.buf ? out.buf : "");
    cr_assert_eq(memcmp(out.buf ? out.buf : "", want, out.len), 0);
    hs_free(cuts);
    strbuf_free(&out);
}

#define S(...) ((const char *const[]){ __VA_ARGS__, NULL })

Test(stop_match, text)
{
    check(S("wor"), false, CHAT_STOP_IN_TEXT, "hello world", "hello ", 0);
    check(S("zzz", "wor"), false, CHAT_STOP_IN_TEXT, "hello world", "hello ", 1);
    check(S("zzz"), false, CHAT_STOP_IN_TEXT, "hello world", "hello world", CHAT_STOP_NONE);
    /* the earliest match wins, whatever the order of the strings */
    check(S("de", "bc"), false, CHAT_STOP_IN_TEXT, "abcdef", "a", 1);
    /* at one position: the request's order */
    check(S("abc", "ab"), false, CHAT_STOP_IN_TEXT, "xabcd", "x", 0);
    check(S("ab", "abc"), false, CHAT_STOP_IN_TEXT, "xabcd", "x", 0);
    /* a string at the very start, the whole text, overlapping candidates */
    check(S("hello"), false, CHAT_STOP_IN_TEXT, "hello", "", 0);
    check(S("aab"), false, CHAT_STOP_IN_TEXT, "aaaab!", "aa", 0);
    /* held at the end: "abcdef" may still come, so "cd" is decided only at finish */
    check(S("abcdef", "cd"), false, CHAT_STOP_IN_TEXT, "xxabcd", "xxab", 1);
    check(S("abcdef", "cd"), false, CHAT_STOP_IN_TEXT, "xxabcdef", "xx", 0);
    /* UTF-8 */
    check(S("wö"), false, CHAT_STOP_IN_TEXT, "héllo wörld", "héllo ", 0);
    check(S("\n\n"), false, CHAT_STOP_IN_TEXT, "line one\nline two\n\nline three", "line one\nline two", 0);
}

Test(stop_match, not_in_reasoning_or_calls)
{
    /* the prompt opened <think>: no match until </think> */
    check(S("stop"), false, CHAT_STOP_IN_REASONING, "think stop</think>answer stop more", "think stop</think>answer ", 0);
    check(S("stop"), false, CHAT_STOP_IN_REASONING, "think stop", "think stop", CHAT_STOP_NONE);
    /* a think block the model opened itself */
    check(S("stop"), false, CHAT_STOP_IN_TEXT, "a<think>stop</think>b stop", "a<think>stop</think>b ", 0);
    /* a stop string that is part of a tag matches as a stop string in text */
    check(S("<th"), false, CHAT_STOP_IN_TEXT, "a<think>b", "a", 0);
    /* inside a tool call */
    check(S("stop"), false, CHAT_STOP_IN_TEXT, "x<tool_call>{\"stop\": 1}</tool_call> stop", "x<tool_call>{\"stop\": 1}</tool_call> ", 0);
    check(S("}"), false, CHAT_STOP_IN_TEXT, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>",
          "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", CHAT_STOP_NONE);
    /* a forced call: generation starts inside it */
    check(S("stop"), false, CHAT_STOP_IN_CALL, "{\"a\": \"stop\"}}\n</tool_call>after stop", "{\"a\": \"stop\"}}\n</tool_call>after ", 0);
}

Test(stop_match, blocked_tool_calls)
{
    check(NULL, true, CHAT_STOP_IN_TEXT, "hello <tool_call>\n{\"name\": \"f\"}</tool_call>", "hello ", CHAT_STOP_TOOL_CALL);
    check(NULL, true, CHAT_STOP_IN_TEXT, "plain answer", "plain answer", CHAT_STOP_NONE);
    /* reasoning may talk about tool calls */
    check(NULL, true, CHAT_STOP_IN_REASONING, "use <tool_call> now</think>ok <tool_call>x", "use <tool_call> now</think>ok ",
          CHAT_STOP_TOOL_CALL);
    /* a stop string before the call wins */
    check(S("ok"), true, CHAT_STOP_IN_TEXT, "fine ok <tool_call>", "fine ", 0);
}

Test(stop_match, nothing_to_match_and_promptness)
{
    cr_assert_null(chat_stop_new(NULL, false, CHAT_STOP_IN_TEXT));
    json_t *empty = json_array();
    cr_assert_null(chat_stop_new(empty, false, CHAT_STOP_IN_TEXT));
    json_decref(empty);

    json_t *a = stop_list(S("cde"));
    struct chat_stop *m = chat_stop_new(a, false, CHAT_STOP_IN_TEXT);
    struct strbuf out;
    strbuf_init(&out);
    /* "c" might start "cde": only it is held */
    cr_assert_eq(chat_stop_feed(m, "abc", 3, &out), CHAT_STOP_NONE);
    cr_assert_eq(out.len, 2);
    cr_assert_eq(memcmp(out.buf, "ab", 2), 0);
    /* "cx" cannot: released at once; "<" could be a tag in text: held */
    cr_assert_eq(chat_stop_feed(m, "x<", 2, &out), CHAT_STOP_NONE);
    cr_assert_eq(out.len, 4);
    cr_assert_eq(memcmp(out.buf, "abcx", 4), 0);
    cr_assert_eq(chat_stop_feed(m, "b", 1, &out), CHAT_STOP_NONE);
    cr_assert_eq(out.len, 6);
    cr_assert_eq(chat_stop_finish(m, &out), CHAT_STOP_NONE);
    cr_assert_eq(out.len, 6);
    chat_stop_free(m);
    chat_stop_free(NULL);
    json_decref(a);
    strbuf_free(&out);
}

/* ---- the request controls: stop strings and tool_choice from both APIs ------------------ */

static int parse_oai(const char *json, struct chat_request *c, struct hs_err *err)
{
    json_error_t je;
    json_t *b = json_loads(json, 0, &je);
    cr_assert_not_null(b, "%s", je.text);
    hs_err_clear(err);
    int rc = chat_from_openai(b, c, err);
    json_decref(b);
    return rc;
}

static int parse_ant(const char *json, struct chat_request *c, struct hs_err *err)
{
    json_error_t je;
    json_t *b = json_loads(json, 0, &je);
    cr_assert_not_null(b, "%s", je.text);
    hs_err_clear(err);
    int rc = chat_from_anthropic(b, c, err);
    json_decref(b);
    return rc;
}

#define MSGS "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]"
#define OTOOLS "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"read\",\"parameters\":{\"type\":\"object\"}}}]"
#define ATOOLS "\"tools\":[{\"name\":\"read\",\"input_schema\":{\"type\":\"object\"}}]"

/* A refused body: HS_ERR_INVALID naming `want`, the request left zeroed. */
static void refused(int rc, const struct chat_request *c, const struct hs_err *err, const char *want)
{
    cr_assert_eq(rc, HS_ERR_INVALID);
    cr_assert_not_null(strstr(err->msg, want), "'%s' lacks '%s'", err->msg, want);
    cr_assert_null(c->messages);
    cr_assert_null(c->stop);
    cr_assert_null(c->tool_name);
}

Test(stop_controls, openai_stop)
{
    struct chat_request c;
    struct hs_err err;
    cr_assert_eq(parse_oai("{" MSGS ",\"stop\":\"END\"}", &c, &err), 0, "%s", err.msg);
    cr_assert_eq(json_array_size(c.stop), 1);
    cr_assert_str_eq(json_string_value(json_array_get(c.stop, 0)), "END");
    chat_request_free(&c);
    cr_assert_eq(parse_oai("{" MSGS ",\"stop\":[\"a\",\"b\\n\",\"c\",\"d\"]}", &c, &err), 0, "%s", err.msg);
    cr_assert_eq(json_array_size(c.stop), 4);
    chat_request_free(&c);
    cr_assert_eq(parse_oai("{" MSGS ",\"stop\":null}", &c, &err), 0);
    cr_assert_null(c.stop);
    chat_request_free(&c);
    cr_assert_eq(parse_oai("{" MSGS ",\"stop\":[]}", &c, &err), 0);
    cr_assert_null(c.stop);
    chat_request_free(&c);
    refused(parse_oai("{" MSGS ",\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", &c, &err), &c, &err, "at most 4 stop strings, got 5");
    refused(parse_oai("{" MSGS ",\"stop\":[\"a\",7]}", &c, &err), &c, &err, "stop[1]: expected a string");
    refused(parse_oai("{" MSGS ",\"stop\":[\"a\",\"\"]}", &c, &err), &c, &err, "stop[1]: a stop string must not be empty");
    refused(parse_oai("{" MSGS ",\"stop\":\"\"}", &c, &err), &c, &err, "stop: a stop string must not be empty");
    refused(parse_oai("{" MSGS ",\"stop\":{}}", &c, &err), &c, &err, "stop: expected a string or an array");
    char big[400];
    snprintf(big, sizeof(big), "{" MSGS ",\"stop\":\"%0300d\"}", 0);
    refused(parse_oai(big, &c, &err), &c, &err, "at most 256 bytes");
}

Test(stop_controls, anthropic_stop_sequences)
{
    struct chat_request c;
    struct hs_err err;
    cr_assert_eq(parse_ant("{" MSGS ",\"max_tokens\":5,\"stop_sequences\":[\"\\n\\nHuman:\"]}", &c, &err), 0, "%s", err.msg);
    cr_assert_str_eq(json_string_value(json_array_get(c.stop, 0)), "\n\nHuman:");
    chat_request_free(&c);
    /* Anthropic takes an array only; OpenAI's `stop` means nothing there */
    refused(parse_ant("{" MSGS ",\"stop_sequences\":\"x\"}", &c, &err), &c, &err, "stop_sequences: expected an array of strings");
    cr_assert_eq(parse_ant("{" MSGS ",\"stop\":\"x\"}", &c, &err), 0);
    cr_assert_null(c.stop);
    chat_request_free(&c);
}

Test(stop_controls, tool_choice)
{
    struct chat_request c;
    struct hs_err err;
    static const struct { const char *json; int openai; enum chat_tool_choice want; } ok[] = {
        { "{" MSGS "," OTOOLS ",\"tool_choice\":\"auto\"}", 1, CHAT_TOOL_AUTO },
        { "{" MSGS "," OTOOLS ",\"tool_choice\":\"none\"}", 1, CHAT_TOOL_NONE },
        { "{" MSGS ",\"tool_choice\":\"none\"}", 1, CHAT_TOOL_NONE },
        { "{" MSGS "," OTOOLS ",\"tool_choice\":\"required\"}", 1, CHAT_TOOL_REQUIRED },
        { "{" MSGS "," OTOOLS ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"read\"}}}", 1, CHAT_TOOL_NAMED },
        { "{" MSGS "," ATOOLS ",\"tool_choice\":{\"type\":\"auto\"}}", 0, CHAT_TOOL_AUTO },
        { "{" MSGS "," ATOOLS ",\"tool_choice\":{\"type\":\"none\"}}", 0, CHAT_TOOL_NONE },
        { "{" MSGS "," ATOOLS ",\"tool_choice\":{\"type\":\"any\"}}", 0, CHAT_TOOL_REQUIRED },
        { "{" MSGS "," ATOOLS ",\"tool_choice\":{\"type\":\"tool\",\"name\":\"read\",\"disable_parallel_tool_use\":true}}", 0,
          CHAT_TOOL_NAMED },
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        int rc = ok[i].openai ? parse_oai(ok[i].json, &c, &err) : parse_ant(ok[i].json, &c, &err);
        cr_assert_eq(rc, 0, "%zu: %s", i, err.msg);
        cr_assert_eq(c.tool_choice, ok[i].want, "%zu", i);
        if (ok[i].want == CHAT_TOOL_NAMED) cr_assert_str_eq(c.tool_name, "read");
        else cr_assert_null(c.tool_name);
        chat_request_free(&c);
    }
    refused(parse_oai("{" MSGS "," OTOOLS ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"write\"}}}", &c, &err),
            &c, &err, "no tool named 'write' in tools");
    refused(parse_oai("{" MSGS ",\"tool_choice\":\"required\"}", &c, &err), &c, &err, "the request has no tools");
    refused(parse_oai("{" MSGS "," OTOOLS ",\"tool_choice\":\"sometimes\"}", &c, &err), &c, &err, "unknown value 'sometimes'");
    refused(parse_oai("{" MSGS "," OTOOLS ",\"tool_choice\":{\"type\":\"function\"}}", &c, &err), &c, &err, "tool_choice: expected");
    refused(parse_ant("{" MSGS "," ATOOLS ",\"tool_choice\":{\"type\":\"tool\",\"name\":\"write\"}}", &c, &err), &c, &err,
            "no tool named 'write'");
    refused(parse_ant("{" MSGS "," ATOOLS ",\"tool_choice\":{\"type\":\"tool\"}}", &c, &err), &c, &err, "tool_choice.name");
    refused(parse_ant("{" MSGS ",\"tool_choice\":{\"type\":\"any\"}}", &c, &err), &c, &err, "the request has no tools");
    refused(parse_ant("{" MSGS "," ATOOLS ",\"tool_choice\":\"auto\"}", &c, &err), &c, &err, "tool_choice: expected an object");
}
