/* The response side (src/api/response.c's lifecycle, the writers of openai_chat.c and
 * anthropic.c, errors.c, models.c): exact bodies and streams for both APIs, streams
 * parsed back and re-assembled into the non-stream body (byte-identical), Anthropic event
 * order checked by a state machine, usage arithmetic, stop-reason and error tables, ids,
 * /v1/models and count_tokens. */
#include "api/api.h"
#include "base/base.h"

#include <criterion/criterion.h>
#include <string.h>

/* ---- driving a response ------------------------------------------------------------------ */

enum { EV_END = -1 };

struct sev {
    int kind;                 /* enum chat_event_kind, or EV_END */
    const char *text;         /* TEXT / REASONING */
    const char *name;         /* TOOL_CALL */
    const char *args;         /* TOOL_CALL: JSON object text */
};

#define ST(s) {CHAT_EVENT_TEXT, s, NULL, NULL}
#define SR(s) {CHAT_EVENT_REASONING, s, NULL, NULL}
#define SC(n, a) {CHAT_EVENT_TOOL_CALL, NULL, n, a}
#define SEND {EV_END, NULL, NULL, NULL}

static void send_events(struct api_response *r, const struct sev *evs, struct strbuf *out)
{
    int tool_index = 0;
    for (const struct sev *e = evs; e->kind != EV_END; e++) {
        struct chat_event ev = {.kind = (enum chat_event_kind)e->kind};
        json_t *args = NULL;
        if (e->kind == CHAT_EVENT_TOOL_CALL) {
            json_error_t jerr;
            args = json_loads(e->args, JSON_ALLOW_NUL, &jerr);
            cr_assert(args, "test args: %s", jerr.text);
            ev.tool_name = e->name;
            ev.tool_args = args;
            ev.tool_index = tool_index++;
        } else {
            ev.text = e->text;
            ev.text_len = strlen(e->text);
        }
        api_response_event(r, &ev, out);
        json_decref(args);
    }
}

static struct api_response_opts opts(enum api_kind kind, bool stream, bool include_usage)
{
    struct api_response_opts o = {.kind = kind, .stream = stream, .include_usage = include_usage,
                                  .model = "qwen-tiny", .id = kind == API_KIND_OPENAI_CHAT
                                                                  ? "chatcmpl-test1"
                                                                  : "msg_test1",
                                  .created = 1700000000};
    return o;
}

/* Run a whole response and return its bytes (caller frees with hs_free). */
static char *run(enum api_kind kind, bool stream, bool include_usage, const struct sev *evs,
                 enum api_stop stop, const char *stop_seq, struct api_usage u, bool begin)
{
    struct api_response_opts o = opts(kind, stream, include_usage);
    struct api_response *r = api_response_new(&o);
    struct strbuf out;
    strbuf_init(&out);
    if (begin) api_response_begin(r, &u, &out);
    send_events(r, evs, &out);
    api_response_finish(r, stop, stop_seq, &u, &out);
    /* nothing after finish (invariant 5) */
    size_t len = out.len;
    send_events(r, (const struct sev[]){ST("late"), SEND}, &out);
    api_response_finish(r, stop, stop_seq, &u, &out);
    api_response_keepalive(r, &out);
    cr_assert_eq(out.len, len, "output after finish");
    api_response_free(r);
    strbuf_putc(&out, '\0');
    return strbuf_detach(&out, NULL);
}

static void expect_str(const char *got, const char *want)
{
    cr_assert_str_eq(got, want, "\ngot:  %s\nwant: %s", got, want);
}

/* ---- SSE records ------------------------------------------------------------------------- */

struct sse_rec {
    char event[64];           /* "" when the record has no event line */
    char *data;               /* owned */
};

/* Split an SSE byte stream into records, strictly: only `event: `, `data: ` and `:` comment
 * lines, one data line per record, each record ended by an empty line. */
static int sse_split(const char *s, struct sse_rec *recs, int max)
{
    int n = 0;
    while (*s) {
        if (*s == ':') {       /* comment */
            const char *nl = strstr(s, "\n\n");
            cr_assert(nl, "unterminated comment");
            s = nl + 2;
            continue;
        }
        cr_assert(n < max, "too many records");
        struct sse_rec *r = &recs[n];
        r->event[0] = '\0';
        if (strncmp(s, "event: ", 7) == 0) {
            const char *nl = strchr(s, '\n');
            cr_assert(nl && (size_t)(nl - s - 7) < sizeof r->event);
            memcpy(r->event, s + 7, (size_t)(nl - s - 7));
            r->event[nl - s - 7] = '\0';
            s = nl + 1;
        }
        cr_assert(strncmp(s, "data: ", 6) == 0, "record without data: %.40s", s);
        s += 6;
        const char *end = strstr(s, "\n\n");
        cr_assert(end, "record not ended by a blank line");
        cr_assert(memchr(s, '\n', (size_t)(end - s)) == NULL, "multi-line data");
        r->data = hs_malloc((size_t)(end - s) + 1);
        memcpy(r->data, s, (size_t)(end - s));
        r->data[end - s] = '\0';
        s = end + 2;
        n++;
    }
    return n;
}

static void sse_free(struct sse_rec *recs, int n)
{
    for (int i = 0; i < n; i++) hs_free(recs[i].data);
}

static json_t *load(const char *s)
{
    json_error_t jerr;
    json_t *j = json_loads(s, JSON_ALLOW_NUL, &jerr);
    cr_assert(j, "bad JSON (%s): %s", jerr.text, s);
    return j;
}

static char *dump(const json_t *j) { return json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER); }

/* ---- re-assembling an OpenAI stream into a body --------------------------------------- */

static void sb_append_str(struct strbuf *sb, const json_t *s)
{
    cr_assert(json_is_string(s));
    strbuf_append(sb, json_string_value(s), json_string_length(s));
}

/* Parse an OpenAI stream like an SDK would and build the chat.completion it stands for. */
static char *openai_reassemble(const char *stream, bool expect_usage)
{
    struct sse_rec recs[256];
    int n = sse_split(stream, recs, 256);
    cr_assert(n >= 3);
    cr_assert_str_eq(recs[n - 1].data, "[DONE]");
    struct strbuf text, reasoning;
    strbuf_init(&text);
    strbuf_init(&reasoning);
    json_t *calls = json_array();
    json_t *args_acc = json_array();  /* arguments text per call */
    json_t *usage = NULL, *finish = NULL, *first = NULL;
    for (int i = 0; i < n - 1; i++) {
        cr_assert_str_eq(recs[i].event, "", "OpenAI records carry no event line");
        json_t *c = load(recs[i].data);
        cr_assert_str_eq(json_string_value(json_object_get(c, "object")), "chat.completion.chunk");
        if (!first) first = json_incref(c);
        cr_assert(json_equal(json_object_get(c, "id"), json_object_get(first, "id")));
        cr_assert(json_equal(json_object_get(c, "created"), json_object_get(first, "created")));
        json_t *choices = json_object_get(c, "choices");
        cr_assert(json_is_array(choices));
        if (json_array_size(choices) == 0) {
            cr_assert(expect_usage && !usage && finish, "usage chunk only once, after finish");
            usage = json_incref(json_object_get(c, "usage"));
            cr_assert(i == n - 2, "usage chunk is the last before [DONE]");
            json_decref(c);
            continue;
        }
        cr_assert(!finish, "no chunk after the finish_reason chunk but usage");
        cr_assert_eq(json_array_size(choices), 1);
        json_t *ch = json_array_get(choices, 0);
        cr_assert_eq(json_integer_value(json_object_get(ch, "index")), 0);
        json_t *delta = json_object_get(ch, "delta");
        cr_assert(json_is_object(delta));
        json_t *role = json_object_get(delta, "role");
        cr_assert_eq(role != NULL, i == 0, "role exactly in the first chunk");
        if (json_object_get(delta, "content")) sb_append_str(&text, json_object_get(delta, "content"));
        if (json_object_get(delta, "reasoning_content"))
            sb_append_str(&reasoning, json_object_get(delta, "reasoning_content"));
        json_t *tcs = json_object_get(delta, "tool_calls");
        for (size_t k = 0; k < json_array_size(tcs); k++) {
            json_t *tc = json_array_get(tcs, k);
            size_t idx = (size_t)json_integer_value(json_object_get(tc, "index"));
            json_t *fn = json_object_get(tc, "function");
            if (idx == json_array_size(calls)) {
                json_t *f = json_object();
                json_object_set(f, "name", json_object_get(fn, "name"));
                json_object_set_new(f, "arguments", json_string(""));
                json_t *call = json_object();
                json_object_set(call, "id", json_object_get(tc, "id"));
                json_object_set(call, "type", json_object_get(tc, "type"));
                json_object_set_new(call, "function", f);
                json_array_append_new(calls, call);
                json_array_append_new(args_acc, json_string(""));
            }
            cr_assert(idx < json_array_size(calls), "tool call index out of order");
            struct strbuf a;
            strbuf_init(&a);
            sb_append_str(&a, json_array_get(args_acc, idx));
            sb_append_str(&a, json_object_get(fn, "arguments"));
            json_array_set_new(args_acc, idx, json_stringn(a.buf, a.len));
            strbuf_free(&a);
        }
        json_t *fr = json_object_get(ch, "finish_reason");
        if (!json_is_null(fr)) {
            cr_assert(json_object_size(delta) == 0, "finish chunk has an empty delta");
            finish = json_incref(fr);
        }
        json_decref(c);
    }
    cr_assert(finish, "no finish_reason");
    cr_assert_eq(usage != NULL, expect_usage);
    for (size_t k = 0; k < json_array_size(calls); k++)
        json_object_set(json_object_get(json_array_get(calls, k), "function"), "arguments",
                        json_array_get(args_acc, k));

    json_t *msg = json_object();
    json_object_set_new(msg, "role", json_string("assistant"));
    if (text.len == 0 && json_array_size(calls) > 0) json_object_set_new(msg, "content", json_null());
    else json_object_set_new(msg, "content", json_stringn(text.buf ? text.buf : "", text.len));
    if (reasoning.len) json_object_set_new(msg, "reasoning_content", json_stringn(reasoning.buf, reasoning.len));
    if (json_array_size(calls)) json_object_set(msg, "tool_calls", calls);
    json_t *choice = json_object();
    json_object_set_new(choice, "index", json_integer(0));
    json_object_set_new(choice, "message", msg);
    json_object_set_new(choice, "finish_reason", finish);
    json_t *body = json_object();
    json_object_set(body, "id", json_object_get(first, "id"));
    json_object_set_new(body, "object", json_string("chat.completion"));
    json_object_set(body, "created", json_object_get(first, "created"));
    json_object_set(body, "model", json_object_get(first, "model"));
    json_object_set_new(body, "choices", json_array());
    json_array_append_new(json_object_get(body, "choices"), choice);
    if (usage) json_object_set_new(body, "usage", usage);
    char *s = dump(body);
    json_decref(body);
    json_decref(first);
    json_decref(calls);
    json_decref(args_acc);
    strbuf_free(&text);
    strbuf_free(&reasoning);
    sse_free(recs, n);
    return s;
}

/* ---- re-assembling an Anthropic stream into a body ------------------------------------ */

static const char *jtype(const json_t *j) { return json_string_value(json_object_get(j, "type")); }

/* Check the event order (message_start, blocks start/delta/stop with indices 0,1,..,
 * message_delta, message_stop; pings anywhere after message_start) and build the message. */
static char *anthropic_reassemble(const char *stream)
{
    struct sse_rec recs[256];
    int n = sse_split(stream, recs, 256);
    json_t *msg = NULL;
    int open = -1, n_blocks = 0;
    bool sig_seen = false, got_delta = false, stopped = false;
    struct strbuf acc;
    strbuf_init(&acc);
    for (int i = 0; i < n; i++) {
        json_t *e = load(recs[i].data);
        const char *name = recs[i].event;
        cr_assert_str_eq(jtype(e), name, "event line and data type agree");
        cr_assert(!stopped, "nothing after message_stop");
        if (i == 0) cr_assert_str_eq(name, "message_start");
        if (strcmp(name, "message_start") == 0) {
            cr_assert(!msg);
            msg = json_incref(json_object_get(e, "message"));
            cr_assert_eq(json_array_size(json_object_get(msg, "content")), 0);
            cr_assert(json_is_null(json_object_get(msg, "stop_reason")));
            cr_assert_eq(json_integer_value(json_object_get(json_object_get(msg, "usage"), "output_tokens")), 0);
        } else if (strcmp(name, "ping") == 0) {
        } else if (strcmp(name, "content_block_start") == 0) {
            cr_assert(open < 0 && !got_delta, "start while a block is open");
            cr_assert_eq(json_integer_value(json_object_get(e, "index")), n_blocks);
            json_t *b = json_deep_copy(json_object_get(e, "content_block"));
            const char *t = jtype(b);
            if (strcmp(t, "text") == 0) cr_assert_str_eq(json_string_value(json_object_get(b, "text")), "");
            else if (strcmp(t, "thinking") == 0)
                cr_assert_str_eq(json_string_value(json_object_get(b, "thinking")), "");
            else {
                cr_assert_str_eq(t, "tool_use");
                cr_assert_eq(json_object_size(json_object_get(b, "input")), 0);
            }
            json_array_append_new(json_object_get(msg, "content"), b);
            open = n_blocks++;
            sig_seen = false;
            strbuf_reset(&acc);
        } else if (strcmp(name, "content_block_delta") == 0) {
            cr_assert(open >= 0);
            cr_assert_eq(json_integer_value(json_object_get(e, "index")), open);
            cr_assert(!sig_seen, "signature_delta is the last delta of a thinking block");
            json_t *b = json_array_get(json_object_get(msg, "content"), (size_t)open);
            json_t *d = json_object_get(e, "delta");
            const char *bt = jtype(b), *dt = jtype(d);
            if (strcmp(dt, "text_delta") == 0) {
                cr_assert_str_eq(bt, "text");
                sb_append_str(&acc, json_object_get(d, "text"));
                json_object_set_new(b, "text", json_stringn(acc.buf, acc.len));
                got_delta = true;
            } else if (strcmp(dt, "thinking_delta") == 0) {
                cr_assert_str_eq(bt, "thinking");
                sb_append_str(&acc, json_object_get(d, "thinking"));
                json_object_set_new(b, "thinking", json_stringn(acc.buf, acc.len));
                got_delta = true;
            } else if (strcmp(dt, "signature_delta") == 0) {
                cr_assert_str_eq(bt, "thinking");
                json_object_set(b, "signature", json_object_get(d, "signature"));
                sig_seen = true;
            } else {
                cr_assert_str_eq(dt, "input_json_delta");
                cr_assert_str_eq(bt, "tool_use");
                sb_append_str(&acc, json_object_get(d, "partial_json"));
                got_delta = true;
            }
        } else if (strcmp(name, "content_block_stop") == 0) {
            cr_assert(open >= 0 && got_delta, "stop of an open block that got a delta");
            cr_assert_eq(json_integer_value(json_object_get(e, "index")), open);
            json_t *b = json_array_get(json_object_get(msg, "content"), (size_t)open);
            if (strcmp(jtype(b), "thinking") == 0) cr_assert(sig_seen, "thinking block without signature");
            if (strcmp(jtype(b), "tool_use") == 0) {
                strbuf_putc(&acc, '\0');
                json_object_set_new(b, "input", load(acc.buf));
            }
            open = -1;
            got_delta = false;
        } else if (strcmp(name, "message_delta") == 0) {
            cr_assert(open < 0, "message_delta with a block open");
            json_t *d = json_object_get(e, "delta");
            json_object_set(msg, "stop_reason", json_object_get(d, "stop_reason"));
            json_object_set(msg, "stop_sequence", json_object_get(d, "stop_sequence"));
            json_object_set(msg, "usage", json_object_get(e, "usage"));
        } else {
            cr_assert_str_eq(name, "message_stop");
            cr_assert(!json_is_null(json_object_get(msg, "stop_reason")), "message_delta first");
            stopped = true;
        }
        json_decref(e);
    }
    cr_assert(stopped, "no message_stop");
    char *s = dump(msg);
    json_decref(msg);
    strbuf_free(&acc);
    sse_free(recs, n);
    return s;
}

/* ---- exact shapes: OpenAI ----------------------------------------------------------------- */

static const struct api_usage usage1 = {.prompt_tokens = 120, .completion_tokens = 9, .cached_tokens = 100};

Test(respond_openai, body_text_and_reasoning)
{
    static const struct sev evs[] = {SR("Let me"), SR(" think."), ST("Hello"), ST(", \"world\" — ok"), SEND};
    char *s = run(API_KIND_OPENAI_CHAT, false, false, evs, API_STOP_END, NULL, usage1, false);
    expect_str(s, "{\"id\":\"chatcmpl-test1\",\"object\":\"chat.completion\",\"created\":1700000000,"
                  "\"model\":\"qwen-tiny\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
                  "\"content\":\"Hello, \\\"world\\\" — ok\",\"reasoning_content\":\"Let me think.\"},"
                  "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":9,"
                  "\"total_tokens\":129,\"prompt_tokens_details\":{\"cached_tokens\":100}}}");
    hs_free(s);
}

Test(respond_openai, body_tool_calls)
{
    static const struct sev evs[] = {
        SC("read_file", "{\"path\": \"src/ä.c\", \"limit\": 10}"),
        SC("run", "{\"cmd\": [\"ls\", \"-l\"], \"env\": {\"Z\": 1, \"A\": null}}"), SEND};
    char *s = run(API_KIND_OPENAI_CHAT, false, false, evs, API_STOP_END, NULL, usage1, false);
    char id0[API_ID_MAX], id1[API_ID_MAX];
    /* tool-call ids derive from the request id (invariant 4) */
    uint64_t h = 0xCBF29CE484222325ull;
    for (const char *p = "chatcmpl-test1"; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001B3ull;
    api_id_make(h, 0, "call_", id0);
    api_id_make(h, 1, "call_", id1);
    char want[2048];
    snprintf(want, sizeof want,
             "{\"id\":\"chatcmpl-test1\",\"object\":\"chat.completion\",\"created\":1700000000,"
             "\"model\":\"qwen-tiny\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
             "\"content\":null,\"tool_calls\":["
             "{\"id\":\"%s\",\"type\":\"function\",\"function\":{\"name\":\"read_file\","
             "\"arguments\":\"{\\\"path\\\":\\\"src/ä.c\\\",\\\"limit\\\":10}\"}},"
             "{\"id\":\"%s\",\"type\":\"function\",\"function\":{\"name\":\"run\","
             "\"arguments\":\"{\\\"cmd\\\":[\\\"ls\\\",\\\"-l\\\"],\\\"env\\\":{\\\"Z\\\":1,\\\"A\\\":null}}\"}}]},"
             "\"finish_reason\":\"tool_calls\"}],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":9,"
             "\"total_tokens\":129,\"prompt_tokens_details\":{\"cached_tokens\":100}}}",
             id0, id1);
    expect_str(s, want);
    hs_free(s);
}

Test(respond_openai, body_empty)
{
    static const struct sev evs[] = {ST(""), SEND};
    struct api_usage u = {5, 0, 0};
    char *s = run(API_KIND_OPENAI_CHAT, false, false, evs, API_STOP_LENGTH, NULL, u, false);
    expect_str(s, "{\"id\":\"chatcmpl-test1\",\"object\":\"chat.completion\",\"created\":1700000000,"
                  "\"model\":\"qwen-tiny\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
                  "\"content\":\"\"},\"finish_reason\":\"length\"}],\"usage\":{\"prompt_tokens\":5,"
                  "\"completion_tokens\":0,\"total_tokens\":5,\"prompt_tokens_details\":{\"cached_tokens\":0}}}");
    hs_free(s);
}

#define OA_HEAD "data: {\"id\":\"chatcmpl-test1\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,\"model\":\"qwen-tiny\","

Test(respond_openai, stream_exact)
{
    static const struct sev evs[] = {SR("hm"), ST("Hi"), ST("!"), SC("f", "{\"a\":\"é\"}"), SEND};
    char *s = run(API_KIND_OPENAI_CHAT, true, true, evs, API_STOP_END, NULL, usage1, true);
    uint64_t h = 0xCBF29CE484222325ull;
    for (const char *p = "chatcmpl-test1"; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001B3ull;
    char id0[API_ID_MAX];
    api_id_make(h, 0, "call_", id0);
    char want[4096];
    snprintf(want, sizeof want,
             OA_HEAD "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n"
             OA_HEAD "\"choices\":[{\"index\":0,\"delta\":{\"reasoning_content\":\"hm\"},\"finish_reason\":null}]}\n\n"
             OA_HEAD "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n"
             OA_HEAD "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"!\"},\"finish_reason\":null}]}\n\n"
             OA_HEAD "\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"%s\",\"type\":\"function\","
             "\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":\\\"é\\\"}\"}}]},\"finish_reason\":null}]}\n\n"
             OA_HEAD "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n"
             OA_HEAD "\"choices\":[],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":9,\"total_tokens\":129,"
             "\"prompt_tokens_details\":{\"cached_tokens\":100}}}\n\n"
             "data: [DONE]\n\n",
             id0);
    expect_str(s, want);
    hs_free(s);
}

Test(respond_openai, stream_without_usage)
{
    static const struct sev evs[] = {ST("ok"), SEND};
    char *s = run(API_KIND_OPENAI_CHAT, true, false, evs, API_STOP_LENGTH, NULL, usage1, false);
    expect_str(s, OA_HEAD "\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},\"finish_reason\":null}]}\n\n"
                  OA_HEAD "\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":null}]}\n\n"
                  OA_HEAD "\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}\n\n"
                  "data: [DONE]\n\n");
    hs_free(s);
}

/* ---- exact shapes: Anthropic -------------------------------------------------------------- */

/* The signature anthropic.c gives a thinking block of this text: "hs1" + FNV-1a 64 in hex,
 * written here from the contract (stable for the same text, never empty). */
static const char *sig_of(const char *text, char buf[24])
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (const char *p = text; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001B3ull;
    snprintf(buf, 24, "hs1%016llx", (unsigned long long)h);
    return buf;
}

Test(respond_anthropic, body_exact)
{
    static const struct sev evs[] = {SR("Plan: "), SR("read."), ST("Reading "), ST("now."),
                                     SC("Read", "{\"file_path\": \"/tmp/ü\", \"n\": 2.5}"), SEND};
    char *s = run(API_KIND_ANTHROPIC_MESSAGES, false, false, evs, API_STOP_END, NULL, usage1, false);
    uint64_t h = 0xCBF29CE484222325ull;
    for (const char *p = "msg_test1"; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001B3ull;
    char id0[API_ID_MAX];
    api_id_make(h, 0, "toolu_", id0);
    char want[2048], sig[24];
    snprintf(want, sizeof want,
             "{\"id\":\"msg_test1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"qwen-tiny\","
             "\"content\":[{\"type\":\"thinking\",\"thinking\":\"Plan: read.\",\"signature\":\"%s\"},"
             "{\"type\":\"text\",\"text\":\"Reading now.\"},"
             "{\"type\":\"tool_use\",\"id\":\"%s\",\"name\":\"Read\",\"input\":{\"file_path\":\"/tmp/ü\",\"n\":2.5}}],"
             "\"stop_reason\":\"tool_use\",\"stop_sequence\":null,\"usage\":{\"input_tokens\":20,"
             "\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":100,\"output_tokens\":9}}",
             sig_of("Plan: read.", sig), id0);
    expect_str(s, want);
    hs_free(s);
}

Test(respond_anthropic, body_stop_sequence_and_empty)
{
    static const struct sev evs[] = {SEND};
    struct api_usage u = {7, 3, 0};
    char *s = run(API_KIND_ANTHROPIC_MESSAGES, false, false, evs, API_STOP_STOP_SEQUENCE, "\nUser:", u, false);
    expect_str(s, "{\"id\":\"msg_test1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"qwen-tiny\","
                  "\"content\":[],\"stop_reason\":\"stop_sequence\",\"stop_sequence\":\"\\nUser:\","
                  "\"usage\":{\"input_tokens\":7,\"cache_creation_input_tokens\":0,"
                  "\"cache_read_input_tokens\":0,\"output_tokens\":3}}");
    hs_free(s);
}

#define AN_EV(name) "event: " name "\ndata: "

Test(respond_anthropic, stream_exact)
{
    static const struct sev evs[] = {SR("r1"), SR("r2"), ST("T"), SC("Bash", "{\"command\":\"ls\"}"), SEND};
    char *s = run(API_KIND_ANTHROPIC_MESSAGES, true, false, evs, API_STOP_END, NULL, usage1, true);
    uint64_t h = 0xCBF29CE484222325ull;
    for (const char *p = "msg_test1"; *p; p++) h = (h ^ (unsigned char)*p) * 0x100000001B3ull;
    char id0[API_ID_MAX];
    api_id_make(h, 0, "toolu_", id0);
    char want[4096], sig[24];
    snprintf(want, sizeof want,
             AN_EV("message_start") "{\"type\":\"message_start\",\"message\":{\"id\":\"msg_test1\",\"type\":\"message\","
             "\"role\":\"assistant\",\"model\":\"qwen-tiny\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,"
             "\"usage\":{\"input_tokens\":20,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":100,"
             "\"output_tokens\":0}}}\n\n"
             AN_EV("ping") "{\"type\":\"ping\"}\n\n"
             AN_EV("content_block_start") "{\"type\":\"content_block_start\",\"index\":0,\"content_block\":"
             "{\"type\":\"thinking\",\"thinking\":\"\",\"signature\":\"\"}}\n\n"
             AN_EV("content_block_delta") "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":"
             "{\"type\":\"thinking_delta\",\"thinking\":\"r1\"}}\n\n"
             AN_EV("content_block_delta") "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":"
             "{\"type\":\"thinking_delta\",\"thinking\":\"r2\"}}\n\n"
             AN_EV("content_block_delta") "{\"type\":\"content_block_delta\",\"index\":0,\"delta\":"
             "{\"type\":\"signature_delta\",\"signature\":\"%s\"}}\n\n"
             AN_EV("content_block_stop") "{\"type\":\"content_block_stop\",\"index\":0}\n\n"
             AN_EV("content_block_start") "{\"type\":\"content_block_start\",\"index\":1,\"content_block\":"
             "{\"type\":\"text\",\"text\":\"\"}}\n\n"
             AN_EV("content_block_delta") "{\"type\":\"content_block_delta\",\"index\":1,\"delta\":"
             "{\"type\":\"text_delta\",\"text\":\"T\"}}\n\n"
             AN_EV("content_block_stop") "{\"type\":\"content_block_stop\",\"index\":1}\n\n"
             AN_EV("content_block_start") "{\"type\":\"content_block_start\",\"index\":2,\"content_block\":"
             "{\"type\":\"tool_use\",\"id\":\"%s\",\"name\":\"Bash\",\"input\":{}}}\n\n"
             AN_EV("content_block_delta") "{\"type\":\"content_block_delta\",\"index\":2,\"delta\":"
             "{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"command\\\":\\\"ls\\\"}\"}}\n\n"
             AN_EV("content_block_stop") "{\"type\":\"content_block_stop\",\"index\":2}\n\n"
             AN_EV("message_delta") "{\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\","
             "\"stop_sequence\":null},\"usage\":{\"input_tokens\":20,\"cache_creation_input_tokens\":0,"
             "\"cache_read_input_tokens\":100,\"output_tokens\":9}}\n\n"
             AN_EV("message_stop") "{\"type\":\"message_stop\"}\n\n",
             sig_of("r1r2", sig), id0);
    expect_str(s, want);
    hs_free(s);
}

/* ---- streams reproduce bodies ------------------------------------------------------------ */

static const struct sev scen_text[] = {ST("Hello"), ST(", "), ST("world.\n"), SEND};
static const struct sev scen_think[] = {SR("a"), SR("b\n"), ST("c"), SEND};
static const struct sev scen_mixed[] = {SR("why"), ST("so "), ST("we call"), SC("a", "{\"x\":1}"),
                                        SC("b", "{\"y\":[true,false,{\"z\":\"\\u0000\\n\"}]}"), SEND};
static const struct sev scen_tool_only[] = {SC("only", "{}"), SEND};
static const struct sev scen_none[] = {SEND};
static const struct sev scen_back[] = {ST("t1"), SR("r1"), ST("t2"), SR("r2"), SC("c", "{\"k\":\"v\"}"),
                                       ST("after"), SEND};
static const struct sev scen_unicode[] = {SR("思考中… 🤔"), ST("答案：𝄞 naïve "), ST("😀👍🏽"),
                                          SC("写", "{\"路径\":\"/tmp/ü\",\"emoji\":\"🎉\"}"), SEND};
static const struct sev *const scenarios[] = {scen_text, scen_think, scen_mixed, scen_tool_only,
                                              scen_none, scen_back, scen_unicode};
#define N_SCEN (int)(sizeof scenarios / sizeof scenarios[0])

Test(respond_roundtrip, openai_stream_equals_body)
{
    struct api_usage u = {1000, 37, 512};
    int n = 0;
    for (int si = 0; si < N_SCEN; si++)
        for (int stop = API_STOP_END; stop <= API_STOP_STOP_SEQUENCE; stop++)
            for (int begin = 0; begin < 2; begin++) {
                char *body = run(API_KIND_OPENAI_CHAT, false, false, scenarios[si], stop, "X", u, begin);
                char *stream = run(API_KIND_OPENAI_CHAT, true, true, scenarios[si], stop, "X", u, begin);
                char *re = openai_reassemble(stream, true);
                cr_assert_str_eq(re, body, "scenario %d stop %d\nstream: %s\nbody:   %s", si, stop, re, body);
                free(re);
                hs_free(stream);
                stream = run(API_KIND_OPENAI_CHAT, true, false, scenarios[si], stop, "X", u, begin);
                re = openai_reassemble(stream, false);
                /* without usage: the body minus its usage member */
                json_t *b = load(body);
                json_object_del(b, "usage");
                char *bs = dump(b);
                cr_assert_str_eq(re, bs, "scenario %d stop %d (no usage)", si, stop);
                free(bs);
                json_decref(b);
                free(re);
                hs_free(stream);
                hs_free(body);
                n++;
            }
    cr_assert_eq(n, N_SCEN * 8);
}

Test(respond_roundtrip, anthropic_stream_equals_body)
{
    struct api_usage u = {1000, 37, 512};
    for (int si = 0; si < N_SCEN; si++)
        for (int stop = API_STOP_END; stop <= API_STOP_STOP_SEQUENCE; stop++)
            for (int begin = 0; begin < 2; begin++) {
                char *body = run(API_KIND_ANTHROPIC_MESSAGES, false, false, scenarios[si], stop, "</s>", u, begin);
                char *stream = run(API_KIND_ANTHROPIC_MESSAGES, true, false, scenarios[si], stop, "</s>", u, begin);
                char *re = anthropic_reassemble(stream);
                cr_assert_str_eq(re, body, "scenario %d stop %d\nstream: %s\nbody:   %s", si, stop, re, body);
                free(re);
                hs_free(stream);
                hs_free(body);
            }
}

/* Block counts: consecutive same-kind deltas merge; every tool call is its own block. */
Test(respond_roundtrip, anthropic_block_merging)
{
    struct api_usage u = {1, 1, 0};
    char *body = run(API_KIND_ANTHROPIC_MESSAGES, false, false, scen_back, API_STOP_END, NULL, u, false);
    json_t *b = load(body);
    json_t *c = json_object_get(b, "content");
    static const char *const types[] = {"text", "thinking", "text", "thinking", "tool_use", "text"};
    cr_assert_eq(json_array_size(c), 6);
    for (size_t i = 0; i < 6; i++) cr_assert_str_eq(jtype(json_array_get(c, i)), types[i]);
    json_decref(b);
    hs_free(body);
}

/* ---- text through the response's own parser ---------------------------------------------- */

static char *run_feed(enum api_kind kind, bool stream, const char *text, size_t step, bool in_reasoning)
{
    struct api_response_opts o = opts(kind, stream, true);
    o.starts_in_reasoning = in_reasoning;
    struct api_response *r = api_response_new(&o);
    struct strbuf out;
    strbuf_init(&out);
    size_t n = strlen(text);
    for (size_t i = 0; i < n; i += step)
        api_response_feed(r, text + i, n - i < step ? n - i : step, &out);
    struct api_usage u = {10, 20, 4};
    api_response_finish(r, API_STOP_END, NULL, &u, &out);
    cr_assert_eq(api_response_n_tool_calls(r), strstr(text, "<tool_call>") ? 1 : 0);
    api_response_free(r);
    strbuf_putc(&out, '\0');
    return strbuf_detach(&out, NULL);
}

Test(respond_feed, parser_splits_agree)
{
    static const char text[] = "The user wants 2+2.\n</think>\n\nIt is 4; I’ll check.<tool_call>\n<function=calc>\n"
                               "<parameter=expr>\n2+2\n</parameter>\n</function>\n</tool_call>";
    for (int k = 0; k < 2; k++) {
        enum api_kind kind = k ? API_KIND_ANTHROPIC_MESSAGES : API_KIND_OPENAI_CHAT;
        char *body = run_feed(kind, false, text, sizeof text, true);
        json_t *b = load(body);
        if (kind == API_KIND_OPENAI_CHAT) {
            json_t *m = json_object_get(json_array_get(json_object_get(b, "choices"), 0), "message");
            cr_assert_str_eq(json_string_value(json_object_get(m, "reasoning_content")), "The user wants 2+2.");
            cr_assert_str_eq(json_string_value(json_object_get(m, "content")), "It is 4; I’ll check.");
            json_t *f = json_object_get(json_array_get(json_object_get(m, "tool_calls"), 0), "function");
            cr_assert_str_eq(json_string_value(json_object_get(f, "arguments")), "{\"expr\":\"2+2\"}");
        } else {
            cr_assert_eq(json_array_size(json_object_get(b, "content")), 3);
            cr_assert_str_eq(json_string_value(json_object_get(b, "stop_reason")), "tool_use");
        }
        json_decref(b);
        for (size_t step = 1; step <= 17; step += 4) {
            char *stream = run_feed(kind, true, text, step, true);
            char *re = kind == API_KIND_OPENAI_CHAT ? openai_reassemble(stream, true) : anthropic_reassemble(stream);
            cr_assert_str_eq(re, body, "kind %d step %zu", k, step);
            free(re);
            hs_free(stream);
        }
        hs_free(body);
    }
}

/* Invalid UTF-8 in a delta becomes U+FFFD in both the stream and the body (invariant 3). */
Test(respond_feed, invalid_utf8_replaced)
{
    static const struct sev evs[] = {ST("a\xff" "b"), ST("\xC3"), ST("\xA9"), SEND};
    struct api_usage u = {1, 1, 0};
    for (int k = 0; k < 2; k++) {
        enum api_kind kind = k ? API_KIND_ANTHROPIC_MESSAGES : API_KIND_OPENAI_CHAT;
        char *body = run(kind, false, false, evs, API_STOP_END, NULL, u, false);
        cr_assert(strstr(body, "a\xEF\xBF\xBD" "b\xEF\xBF\xBD\xEF\xBF\xBD"), "%s", body);
        char *stream = run(kind, true, true, evs, API_STOP_END, NULL, u, false);
        char *re = k ? anthropic_reassemble(stream) : openai_reassemble(stream, true);
        cr_assert_str_eq(re, body);
        free(re);
        hs_free(stream);
        hs_free(body);
    }
}

/* ---- usage and stop reasons -------------------------------------------------------------- */

static json_t *body_json(enum api_kind kind, const struct sev *evs, enum api_stop stop,
                         const char *seq, struct api_usage u)
{
    char *s = run(kind, false, false, evs, stop, seq, u, false);
    json_t *j = load(s);
    hs_free(s);
    return j;
}

static int64_t jint(const json_t *o, const char *k1, const char *k2)
{
    const json_t *v = json_object_get(o, k1);
    if (k2) v = json_object_get(v, k2);
    cr_assert(json_is_integer(v), "%s.%s", k1, k2 ? k2 : "");
    return json_integer_value(v);
}

Test(respond_usage, numbers)
{
    static const struct {
        struct api_usage in;
        int64_t prompt, completion, cached;   /* after cleaning */
    } rows[] = {
        {{120, 9, 100}, 120, 9, 100},
        {{50, 0, 0}, 50, 0, 0},
        {{64, 3, 64}, 64, 3, 64},        /* everything restored: input_tokens 0 */
        {{10, 2, 99}, 10, 2, 10},        /* cached clamped to the prompt */
        {{-1, -5, -3}, 0, 0, 0},         /* nothing negative */
        {{3000000000LL, 1, 2999999999LL}, 3000000000LL, 1, 2999999999LL},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        json_t *o = body_json(API_KIND_OPENAI_CHAT, scen_text, API_STOP_END, NULL, rows[i].in);
        json_t *ou = json_object_get(o, "usage");
        cr_assert_eq(jint(ou, "prompt_tokens", NULL), rows[i].prompt, "row %zu", i);
        cr_assert_eq(jint(ou, "completion_tokens", NULL), rows[i].completion);
        cr_assert_eq(jint(ou, "total_tokens", NULL), rows[i].prompt + rows[i].completion);
        cr_assert_eq(jint(ou, "prompt_tokens_details", "cached_tokens"), rows[i].cached);
        json_decref(o);
        json_t *a = body_json(API_KIND_ANTHROPIC_MESSAGES, scen_text, API_STOP_END, NULL, rows[i].in);
        json_t *au = json_object_get(a, "usage");
        cr_assert_eq(jint(au, "input_tokens", NULL), rows[i].prompt - rows[i].cached, "row %zu", i);
        cr_assert_eq(jint(au, "cache_read_input_tokens", NULL), rows[i].cached);
        cr_assert_eq(jint(au, "cache_creation_input_tokens", NULL), 0);
        cr_assert_eq(jint(au, "output_tokens", NULL), rows[i].completion);
        json_decref(a);
    }
}

/* message_start carries the prompt usage given to begin, or zeros without begin. */
Test(respond_usage, message_start)
{
    struct api_usage u = {300, 8, 256};
    char *s = run(API_KIND_ANTHROPIC_MESSAGES, true, false, scen_text, API_STOP_END, NULL, u, true);
    cr_assert(strstr(s, "\"usage\":{\"input_tokens\":44,\"cache_creation_input_tokens\":0,"
                        "\"cache_read_input_tokens\":256,\"output_tokens\":0}}}\n\n"), "%s", s);
    hs_free(s);
    s = run(API_KIND_ANTHROPIC_MESSAGES, true, false, scen_text, API_STOP_END, NULL, u, false);
    cr_assert(strstr(s, "\"usage\":{\"input_tokens\":0,\"cache_creation_input_tokens\":0,"
                        "\"cache_read_input_tokens\":0,\"output_tokens\":0}}}\n\n"), "%s", s);
    hs_free(s);
}

Test(respond_stop, table)
{
    static const struct {
        const struct sev *evs;
        enum api_stop stop;
        const char *seq;
        const char *openai, *anthropic, *anthropic_seq;   /* anthropic_seq NULL: null */
    } rows[] = {
        {scen_text, API_STOP_END, NULL, "stop", "end_turn", NULL},
        {scen_text, API_STOP_LENGTH, NULL, "length", "max_tokens", NULL},
        {scen_text, API_STOP_TOOL_CALLS, NULL, "tool_calls", "tool_use", NULL},
        {scen_text, API_STOP_STOP_SEQUENCE, "STOP", "stop", "stop_sequence", "STOP"},
        {scen_text, API_STOP_END, "ignored", "stop", "end_turn", NULL},
        {scen_mixed, API_STOP_END, NULL, "tool_calls", "tool_use", NULL},   /* END + calls */
        {scen_mixed, API_STOP_LENGTH, NULL, "length", "max_tokens", NULL},  /* stays length */
        {scen_mixed, API_STOP_STOP_SEQUENCE, "Ω", "stop", "stop_sequence", "Ω"},
        {scen_none, (enum api_stop)99, NULL, "stop", "end_turn", NULL},     /* out of range */
    };
    struct api_usage u = {1, 1, 0};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        json_t *o = body_json(API_KIND_OPENAI_CHAT, rows[i].evs, rows[i].stop, rows[i].seq, u);
        cr_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(o, "choices"), 0),
                                                           "finish_reason")),
                         rows[i].openai, "row %zu", i);
        json_decref(o);
        json_t *a = body_json(API_KIND_ANTHROPIC_MESSAGES, rows[i].evs, rows[i].stop, rows[i].seq, u);
        cr_assert_str_eq(json_string_value(json_object_get(a, "stop_reason")), rows[i].anthropic, "row %zu", i);
        json_t *sq = json_object_get(a, "stop_sequence");
        if (rows[i].anthropic_seq) cr_assert_str_eq(json_string_value(sq), rows[i].anthropic_seq);
        else cr_assert(json_is_null(sq), "row %zu", i);
        json_decref(a);
    }
}

/* ---- errors ------------------------------------------------------------------------------ */

Test(respond_errors, table_rows)
{
    static const struct {
        int code, status;
        const char *oa_type, *oa_code, *an_type;
    } rows[] = {
        {HS_ERR_FORMAT, 400, "invalid_request_error", NULL, "invalid_request_error"},
        {HS_ERR_UNSUPPORTED, 400, "invalid_request_error", NULL, "invalid_request_error"},
        {HS_ERR_INVALID, 400, "invalid_request_error", NULL, "invalid_request_error"},
        {HS_ERR_LIMIT, 400, "invalid_request_error", NULL, "invalid_request_error"},
        {HS_ERR_NOT_FOUND, 404, "invalid_request_error", NULL, "not_found_error"},
        {HS_ERR_IO, 500, "server_error", NULL, "api_error"},
        {HS_ERR_NOMEM, 503, "server_error", NULL, "overloaded_error"},
        {API_ERR_AUTH, 401, "invalid_request_error", "invalid_api_key", "authentication_error"},
        {API_ERR_ROUTE, 404, "invalid_request_error", NULL, "not_found_error"},
        {API_ERR_METHOD, 405, "invalid_request_error", NULL, "invalid_request_error"},
        {API_ERR_TOO_LARGE, 413, "invalid_request_error", NULL, "request_too_large"},
        {API_ERR_QUEUE_FULL, 429, "requests", "rate_limit_exceeded", "rate_limit_error"},
        {API_ERR_OVERLOADED, 503, "server_error", NULL, "overloaded_error"},
        {API_ERR_FORBIDDEN, 403, "invalid_request_error", NULL, "permission_error"},
        {API_ERR_MEDIA_TYPE, 415, "invalid_request_error", NULL, "invalid_request_error"},
        {API_ERR_INTERNAL, 500, "server_error", NULL, "api_error"},
        {HS_OK, 500, "server_error", NULL, "api_error"},        /* not an error: internal */
        {12345, 500, "server_error", NULL, "api_error"},        /* unknown: internal */
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        const struct api_error_info *e = api_error_info(rows[i].code);
        cr_assert_eq(e->http_status, rows[i].status, "row %zu", i);
        struct strbuf sb;
        strbuf_init(&sb);
        int st = api_error_write(API_KIND_OPENAI_CHAT, rows[i].code, "bad \"thing\" ü", &sb);
        cr_assert_eq(st, rows[i].status);
        char want[512];
        if (rows[i].oa_code)
            snprintf(want, sizeof want, "{\"error\":{\"message\":\"bad \\\"thing\\\" ü\",\"type\":\"%s\","
                     "\"param\":null,\"code\":\"%s\"}}", rows[i].oa_type, rows[i].oa_code);
        else
            snprintf(want, sizeof want, "{\"error\":{\"message\":\"bad \\\"thing\\\" ü\",\"type\":\"%s\","
                     "\"param\":null,\"code\":null}}", rows[i].oa_type);
        expect_str(sb.buf, want);
        strbuf_reset(&sb);
        st = api_error_write(API_KIND_ANTHROPIC_MESSAGES, rows[i].code, "bad \"thing\" ü", &sb);
        cr_assert_eq(st, rows[i].status);
        snprintf(want, sizeof want, "{\"type\":\"error\",\"error\":{\"type\":\"%s\","
                 "\"message\":\"bad \\\"thing\\\" ü\"}}", rows[i].an_type);
        expect_str(sb.buf, want);
        strbuf_free(&sb);
    }
}

Test(respond_errors, message_cleaned)
{
    struct strbuf sb;
    strbuf_init(&sb);
    api_error_write(API_KIND_ANTHROPIC_MESSAGES, HS_ERR_FORMAT, "x\xC0y", &sb);
    expect_str(sb.buf, "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"x\xEF\xBF\xBDy\"}}");
    strbuf_reset(&sb);
    api_error_write(API_KIND_OPENAI_CHAT, HS_ERR_FORMAT, NULL, &sb);
    expect_str(sb.buf, "{\"error\":{\"message\":\"\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}");
    strbuf_free(&sb);
}

static char *run_fail(enum api_kind kind, bool stream, bool begin, int code, int *status)
{
    struct api_response_opts o = opts(kind, stream, true);
    struct api_response *r = api_response_new(&o);
    struct strbuf out;
    strbuf_init(&out);
    struct api_usage u = {10, 0, 0};
    if (begin) api_response_begin(r, &u, &out);
    size_t at = out.len;
    *status = api_response_fail(r, code, "engine stopped", &out);
    /* nothing after fail */
    size_t len = out.len;
    send_events(r, (const struct sev[]){ST("late"), SEND}, &out);
    api_response_finish(r, API_STOP_END, NULL, &u, &out);
    cr_assert_eq(api_response_fail(r, code, "again", &out), *status);
    cr_assert_eq(out.len, len);
    api_response_free(r);
    char *s = hs_strdup(out.buf ? out.buf + at : "");
    strbuf_free(&out);
    return s;
}

Test(respond_errors, fail_before_and_during_stream)
{
    int st;
    char *s = run_fail(API_KIND_OPENAI_CHAT, false, true, API_ERR_OVERLOADED, &st);
    cr_assert_eq(st, 503);
    expect_str(s, "{\"error\":{\"message\":\"engine stopped\",\"type\":\"server_error\",\"param\":null,\"code\":null}}");
    hs_free(s);
    s = run_fail(API_KIND_OPENAI_CHAT, true, false, HS_ERR_LIMIT, &st);   /* nothing sent yet */
    cr_assert_eq(st, 400);
    expect_str(s, "{\"error\":{\"message\":\"engine stopped\",\"type\":\"invalid_request_error\",\"param\":null,\"code\":null}}");
    hs_free(s);
    s = run_fail(API_KIND_OPENAI_CHAT, true, true, API_ERR_INTERNAL, &st);
    cr_assert_eq(st, 200);
    expect_str(s, "data: {\"error\":{\"message\":\"engine stopped\",\"type\":\"server_error\",\"param\":null,\"code\":null}}\n\n"
                  "data: [DONE]\n\n");
    hs_free(s);
    s = run_fail(API_KIND_ANTHROPIC_MESSAGES, false, false, API_ERR_QUEUE_FULL, &st);
    cr_assert_eq(st, 429);
    expect_str(s, "{\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"engine stopped\"}}");
    hs_free(s);
    s = run_fail(API_KIND_ANTHROPIC_MESSAGES, true, true, API_ERR_OVERLOADED, &st);
    cr_assert_eq(st, 200);
    expect_str(s, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\","
                  "\"message\":\"engine stopped\"}}\n\n");
    hs_free(s);
}

/* A stream cut by an error mid-block: the error event follows the partial block. */
Test(respond_errors, fail_mid_block)
{
    struct api_response_opts o = opts(API_KIND_ANTHROPIC_MESSAGES, true, false);
    struct api_response *r = api_response_new(&o);
    struct strbuf out;
    strbuf_init(&out);
    send_events(r, (const struct sev[]){ST("partial"), SEND}, &out);
    cr_assert(api_response_started(r));
    cr_assert_eq(api_response_fail(r, HS_ERR_IO, "disk", &out), 200);
    struct sse_rec recs[16];
    int n = sse_split(out.buf, recs, 16);
    cr_assert_eq(n, 5);
    static const char *const names[] = {"message_start", "ping", "content_block_start",
                                        "content_block_delta", "error"};
    for (int i = 0; i < n; i++) cr_assert_str_eq(recs[i].event, names[i]);
    expect_str(recs[4].data, "{\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"disk\"}}");
    sse_free(recs, n);
    strbuf_free(&out);
    api_response_free(r);
}

/* ---- keep-alive, ids, models, count_tokens ------------------------------------------------ */

Test(respond_misc, keepalive)
{
    struct strbuf sb;
    strbuf_init(&sb);
    struct api_response_opts o = opts(API_KIND_OPENAI_CHAT, true, false);
    struct api_response *r = api_response_new(&o);
    cr_assert(!api_response_started(r));
    api_response_keepalive(r, &sb);
    expect_str(sb.buf, ": keepalive\n\n");
    /* the keep-alive sent the stream's headers: a later error goes in-stream */
    cr_assert(api_response_started(r));
    strbuf_reset(&sb);
    cr_assert_eq(api_response_fail(r, HS_ERR_LIMIT, "too long", &sb), 200);
    expect_str(sb.buf, "data: {\"error\":{\"message\":\"too long\",\"type\":\"invalid_request_error\","
                       "\"param\":null,\"code\":null}}\n\ndata: [DONE]\n\n");
    api_response_free(r);
    strbuf_reset(&sb);
    o = opts(API_KIND_ANTHROPIC_MESSAGES, true, false);
    r = api_response_new(&o);
    api_response_keepalive(r, &sb);            /* before message_start: a comment */
    expect_str(sb.buf, ": keepalive\n\n");
    strbuf_reset(&sb);
    api_response_begin(r, NULL, &sb);
    strbuf_reset(&sb);
    api_response_keepalive(r, &sb);
    expect_str(sb.buf, "event: ping\ndata: {\"type\":\"ping\"}\n\n");
    api_response_free(r);
    strbuf_reset(&sb);
    o = opts(API_KIND_ANTHROPIC_MESSAGES, false, false);
    r = api_response_new(&o);
    api_response_begin(r, NULL, &sb);
    api_response_keepalive(r, &sb);
    cr_assert_eq(sb.len, 0, "non-stream: nothing");
    cr_assert(!api_response_started(r));
    api_response_free(r);
    api_response_free(NULL);
    strbuf_free(&sb);
}

static bool is_base62(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= 'a' && s[i] <= 'z')))
            return false;
    return true;
}

static int cmp_str(const void *a, const void *b) { return strcmp(a, b); }

Test(respond_misc, ids)
{
    enum { N = 5000 };
    char(*ids)[API_ID_MAX] = hs_malloc(N * sizeof *ids);
    struct api_ids g = {.seed = 42, .counter = 0};
    for (int i = 0; i < N; i++) {
        api_ids_next(&g, API_KIND_OPENAI_CHAT, ids[i]);
        cr_assert_eq(strlen(ids[i]), 9 + 24);
        cr_assert(strncmp(ids[i], "chatcmpl-", 9) == 0 && is_base62(ids[i] + 9, 24), "%s", ids[i]);
    }
    cr_assert_eq(g.counter, N);
    /* reproducible from (seed, counter) */
    char again[API_ID_MAX];
    api_id_make(42, 1234, "chatcmpl-", again);
    cr_assert_str_eq(again, ids[1234]);
    /* distinct */
    qsort(ids, N, sizeof *ids, cmp_str);
    for (int i = 1; i < N; i++) cr_assert_str_neq(ids[i - 1], ids[i]);
    hs_free(ids);
    /* another seed, another id; Anthropic prefix */
    char a[API_ID_MAX], b[API_ID_MAX];
    api_id_make(42, 0, "msg_", a);
    api_id_make(43, 0, "msg_", b);
    cr_assert_str_neq(a, b);
    struct api_ids g2 = {.seed = 43, .counter = 0};
    api_ids_next(&g2, API_KIND_ANTHROPIC_MESSAGES, a);
    cr_assert_str_eq(a, b);
    /* an over-long prefix is cut so the id still fits */
    api_id_make(1, 1, "a-very-long-prefix-that-does-not-fit-at-all", a);
    cr_assert_eq(strlen(a), API_ID_MAX - 1);
}

/* Same request id → same tool-call ids; another request id → others. */
Test(respond_misc, tool_ids_follow_request_id)
{
    struct api_usage u = {1, 1, 0};
    char *s1 = run(API_KIND_OPENAI_CHAT, false, false, scen_mixed, API_STOP_END, NULL, u, false);
    char *s2 = run(API_KIND_OPENAI_CHAT, false, false, scen_mixed, API_STOP_END, NULL, u, false);
    cr_assert_str_eq(s1, s2);
    struct api_response_opts o = opts(API_KIND_OPENAI_CHAT, false, false);
    o.id = "chatcmpl-other";
    struct api_response *r = api_response_new(&o);
    struct strbuf out;
    strbuf_init(&out);
    send_events(r, scen_mixed, &out);
    api_response_finish(r, API_STOP_END, NULL, &u, &out);
    json_t *a = load(s1), *b = load(out.buf);
    for (size_t k = 0; k < 2; k++) {
        const char *ia = json_string_value(json_object_get(json_array_get(json_object_get(json_object_get(
            json_array_get(json_object_get(a, "choices"), 0), "message"), "tool_calls"), k), "id"));
        const char *ib = json_string_value(json_object_get(json_array_get(json_object_get(json_object_get(
            json_array_get(json_object_get(b, "choices"), 0), "message"), "tool_calls"), k), "id"));
        cr_assert(strncmp(ia, "call_", 5) == 0 && strlen(ia) == 29 && is_base62(ia + 5, 24), "%s", ia);
        cr_assert_str_neq(ia, ib);
    }
    json_decref(a);
    json_decref(b);
    strbuf_free(&out);
    api_response_free(r);
    hs_free(s1);
    hs_free(s2);
}

Test(respond_misc, models_and_count_tokens)
{
    struct strbuf sb;
    strbuf_init(&sb);
    const char *names[] = {"qwen3.5-0.8b", "alias"};
    api_models_write(API_KIND_OPENAI_CHAT, names, 2, 1700000000, &sb);
    expect_str(sb.buf, "{\"object\":\"list\",\"data\":[{\"id\":\"qwen3.5-0.8b\",\"object\":\"model\","
                       "\"created\":1700000000,\"owned_by\":\"headstart\"},{\"id\":\"alias\",\"object\":"
                       "\"model\",\"created\":1700000000,\"owned_by\":\"headstart\"}]}");
    strbuf_reset(&sb);
    api_models_write(API_KIND_ANTHROPIC_MESSAGES, names, 2, 1700000000, &sb);
    expect_str(sb.buf, "{\"data\":[{\"type\":\"model\",\"id\":\"qwen3.5-0.8b\",\"display_name\":\"qwen3.5-0.8b\","
                       "\"created_at\":\"2023-11-14T22:13:20Z\"},{\"type\":\"model\",\"id\":\"alias\","
                       "\"display_name\":\"alias\",\"created_at\":\"2023-11-14T22:13:20Z\"}],"
                       "\"has_more\":false,\"first_id\":\"qwen3.5-0.8b\",\"last_id\":\"alias\"}");
    strbuf_reset(&sb);
    api_models_write(API_KIND_ANTHROPIC_MESSAGES, NULL, 0, 0, &sb);
    expect_str(sb.buf, "{\"data\":[],\"has_more\":false,\"first_id\":null,\"last_id\":null}");
    strbuf_reset(&sb);
    api_count_tokens_write(18342, &sb);
    expect_str(sb.buf, "{\"input_tokens\":18342}");
    strbuf_reset(&sb);
    api_count_tokens_write(-3, &sb);
    expect_str(sb.buf, "{\"input_tokens\":0}");
    strbuf_free(&sb);
}
