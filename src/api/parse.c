/*
 * parse — the incremental parser of generated text: it turns what the model writes into
 * visible-text deltas, reasoning deltas and complete tool calls, as the text streams in.
 *
 * Design note
 * -----------
 * The parser is a three-state machine over the input bytes:
 *
 *        "<think>"                         "<tool_call>"
 *   REASONING <------------ TEXT ------------------------> CALL
 *       |  "</think>"        ^  ^   complete call: TOOL_CALL   |
 *       +--------------------+  +------------------------------+
 *                                   malformed / truncated: "<tool_call>" becomes
 *                                   text and scanning resumes right after it
 *
 * It starts in REASONING when the generation prompt already opened <think>. In TEXT the
 * tags are `<think>` and `<tool_call>`; in REASONING only `</think>` (thinking may talk
 * about tool calls), plus a `<think>` that comes before any reasoning, which is dropped (a
 * model that repeats the tag the prompt already opened). A `</think>` in TEXT and a
 * `<think>` later in REASONING are ordinary text.
 *
 * Whitespace.  The Qwen3.5 template re-renders an assistant turn of the current exchange
 * as `<think>\n` + (reasoning_content|trim) + `\n</think>\n\n` + (content|trim), then
 * `\n\n` before the first tool call when the content is non-empty and `\n` between calls;
 * the Qwen3 template does the same with strip('\n') / lstrip('\n') and `\n` before every
 * call after content. The whitespace a model writes around the tags is therefore the
 * template's, not the answer's, and the parser returns each stream trimmed exactly as
 * Python's str.strip() trims: the REASONING stream is the concatenation of every think
 * block, TEXT the concatenation of everything outside think blocks and tool calls, and
 * each stream as a whole loses its leading and trailing whitespace (Unicode White_Space as
 * str.isspace() defines it); whitespace inside a stream — also between two think blocks or
 * around a tool call with text on both sides — is kept. So for canonical output
 *     (prompt "<think>\n")  R "\n</think>\n\n" C "\n\n<tool_call>…</tool_call>"
 * the parse is reasoning R, content C and the call, which both templates render back to
 * the same bytes (prefix reuse across turns depends on it); the non-thinking prompt
 * `<think>\n\n</think>\n\n` followed by C parses to reasoning "" and content C, which the
 * template also renders back unchanged. Streaming consequence: leading whitespace of a
 * stream is dropped at once; whitespace after visible characters is held until the next
 * visible character of the same stream (then emitted before it) or dropped at finish.
 *
 * Tool calls.  After `<tool_call>` and optional ASCII whitespace:
 *   '<'  Qwen3.5 / Qwen3-Coder XML:
 *        <function=NAME> { <parameter=KEY> VALUE </parameter> } </function> </tool_call>
 *        with ASCII whitespace allowed between the elements. VALUE is the text between
 *        `<parameter=KEY>` and the first `</parameter>` that is followed (after whitespace)
 *        by `<parameter=` or `</function>` — so a value may itself contain `</parameter>`
 *        or `</tool_call>` — less exactly one leading and one trailing "\n". Values are
 *        typed by tools[i].function.parameters.properties[KEY] (`type` as a string or an
 *        array, or anyOf/oneOf): a schema allowing "string", or no schema, keeps the
 *        string; otherwise "True"/"False" are booleans when "boolean" is allowed (the
 *        template writes Python's str()), "None" is null when "null" is allowed, and
 *        anything else is parsed as JSON, falling back to the string. Keys keep their order.
 *   '{'  Qwen3 JSON: {"name": NAME, "arguments": OBJECT or a string holding one}
 *        ("parameters" accepted for "arguments"; absent means {}), then `</tool_call>`.
 *        The object's end is found by bracket depth outside JSON strings.
 *   Anything else, a structure error, a JSON parse error, invalid UTF-8 in a name or a
 *   string value, or the end of generation before the call closes, makes the call
 *   malformed: `<tool_call>` is emitted as TEXT and scanning resumes after it.
 *
 * Invariants:
 *   1. Split independence: for a given total input the event sequence is the same for
 *      every way of cutting it into feeds, except how consecutive TEXT / REASONING deltas
 *      are chunked (their concatenations are equal). Every decision depends only on bytes
 *      already seen, never on where a feed ended.
 *   2. Nothing is lost: every input byte comes out in a delta or a tool call, except the
 *      tags `<think>` / `</think>` that switch state, the bytes of calls that parsed, and
 *      the whitespace the stream trimming above removes. Without a parsed call, TEXT and
 *      REASONING are exactly the trimmed streams of a plain left-to-right tag scan.
 *   3. Promptness: besides the trailing whitespace of a stream (see above) only what may
 *      still become a tag, an incomplete UTF-8 sequence at the end of the input, or an
 *      open tool call is held back.
 *   4. No delta splits a UTF-8 sequence: a cut happens only before '<' (ASCII) or before a
 *      lead byte; bytes that are not valid UTF-8 pass through one by one. No delta is
 *      empty. Tool calls are numbered 0, 1, ... in order.
 *   5. The callback borrows the event for the duration of the call; it must not feed the
 *      parser it is called from.
 */
#include "api/api.h"
#include "base/base.h"

#include <string.h>

#define TAG_TOOL_CALL "<tool_call>"
#define TAG_TOOL_CALL_LEN 11
#define NAME_MAX_LEN 256     /* a longer function or parameter name is not a call */

enum parse_state { PARSE_TEXT, PARSE_REASONING, PARSE_CALL };

/* Where the tool-call scanner stands; it resumes there when more input arrives. */
enum call_phase {
    CALL_START,          /* whitespace, then '<' (XML) or '{' (JSON) */
    CALL_XML_FUNC,       /* expecting "<function=" */
    CALL_XML_FNAME,      /* the function name, up to '>' */
    CALL_XML_BODY,       /* whitespace, then "<parameter=" or "</function>" */
    CALL_XML_PNAME,      /* a parameter name, up to '>' */
    CALL_XML_VALUE,      /* looking for "</parameter>" */
    CALL_XML_VALUE_END,  /* after a candidate "</parameter>": does a parameter or the end follow? */
    CALL_CLOSE,          /* after "</function>" or the JSON object: whitespace, "</tool_call>" */
    CALL_JSON_OBJ,       /* inside the JSON object: tracking strings and depth */
};

enum scan_result { SCAN_MORE, SCAN_DONE, SCAN_BAD };

struct span { size_t off, len; };              /* relative to the call body */
struct xml_param { struct span key, value; };

struct call_scan {
    enum call_phase phase;
    size_t at;                  /* next body offset to examine */
    bool json;
    struct span name;           /* XML: the function name; JSON: the whole object */
    struct span key;            /* XML: the parameter being read */
    size_t value_start, cand;   /* XML: its value start; candidate "</parameter>" offset */
    struct xml_param *params;
    int n_params, cap_params;
    int depth;                  /* JSON: bracket depth */
    bool in_str, esc;           /* JSON: inside a string; after a backslash */
};

/* Trimming state of one output stream (TEXT or REASONING), see the design note. */
struct text_stream {
    struct strbuf held;         /* whitespace after the last visible character */
    bool started;               /* a visible character has been emitted */
};

struct chat_parser {
    const json_t *tools;        /* borrowed */
    chat_event_fn fn;
    void *ctx;
    enum parse_state state;
    struct strbuf in;           /* unconsumed input is in.buf[pos, in.len) */
    size_t pos;
    size_t call_tag;            /* PARSE_CALL: offset of "<tool_call>" in `in` */
    struct call_scan scan;
    struct text_stream streams[2]; /* indexed by CHAT_EVENT_TEXT, CHAT_EVENT_REASONING */
    struct strbuf out;          /* the delta being emitted */
    int n_calls;
    bool finished;
};

/* ---- UTF-8 and whitespace --------------------------------------------------------------- */

/* Python's str.isspace(): the code points with bidi class WS, B or S, or category Zs. */
static bool is_py_space(uint32_t cp)
{
    if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x1F);
    return cp == 0x85 || cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* The unit at s: a valid sequence, or one byte that is not valid UTF-8 (never space). */
static size_t unit_at(const char *s, size_t n, bool *space)
{
    uint32_t cp;
    size_t l = hs_utf8_decode(s, n, &cp, NULL);
    *space = l > 0 && is_py_space(cp);
    return l > 0 ? l : 1;
}

static bool all_space(const char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        bool space;
        i += unit_at(s + i, n - i, &space);
        if (!space) return false;
    }
    return true;
}

/* ---- output ------------------------------------------------------------------------------ */

/* Append s[0, n) (whole units only, except at finish) to a stream, trimming as the design
 * note says, and emit what became visible as one delta. */
static void stream_put(struct chat_parser *p, enum chat_event_kind kind, const char *s, size_t n)
{
    struct text_stream *st = &p->streams[kind];
    strbuf_reset(&p->out);
    for (size_t i = 0; i < n;) {
        bool space;
        size_t l = unit_at(s + i, n - i, &space);
        if (!space) {
            if (st->held.len > 0) {
                strbuf_append(&p->out, st->held.buf, st->held.len);
                strbuf_reset(&st->held);
            }
            strbuf_append(&p->out, s + i, l);
            st->started = true;
        } else if (st->started) {
            strbuf_append(&st->held, s + i, l);
        }
        i += l;
    }
    if (p->out.len > 0) {
        struct chat_event ev = {.kind = kind, .text = p->out.buf, .text_len = p->out.len};
        p->fn(p->ctx, &ev);
    }
}

/* ---- tool-call values ------------------------------------------------------------------- */

enum { TYPE_STRING = 1, TYPE_BOOLEAN = 2, TYPE_NULL = 4, TYPE_OTHER = 8 };

static unsigned type_bit(const json_t *name)
{
    static const struct { const char *name; unsigned bit; } types[] = {
        {"string", TYPE_STRING}, {"boolean", TYPE_BOOLEAN}, {"null", TYPE_NULL},
        {"integer", TYPE_OTHER}, {"number", TYPE_OTHER}, {"object", TYPE_OTHER},
        {"array", TYPE_OTHER},
    };
    if (!json_is_string(name)) return 0;
    for (size_t i = 0; i < HS_ARRAY_LEN(types); i++)
        if (strcmp(json_string_value(name), types[i].name) == 0) return types[i].bit;
    return 0;
}

/* The set of JSON types a parameter schema allows (0: unknown). */
static unsigned schema_types(const json_t *schema, int depth)
{
    static const char *const alts[] = {"anyOf", "oneOf"};
    unsigned mask = 0;
    size_t i;
    const json_t *v, *t;
    if (!json_is_object(schema) || depth > 8) return 0;
    t = json_object_get(schema, "type");
    if (json_is_array(t)) {
        json_array_foreach(t, i, v) mask |= type_bit(v);
    } else {
        mask |= type_bit(t);
    }
    for (size_t a = 0; a < HS_ARRAY_LEN(alts); a++) {
        const json_t *list = json_object_get(schema, alts[a]);
        if (json_is_array(list))
            json_array_foreach(list, i, v) mask |= schema_types(v, depth + 1);
    }
    return mask;
}

/* The schema of parameter `key` of tool `fname`, or NULL. Tools are in the neutral shape
 * {type, function: {name, parameters}}; a bare {name, input_schema} is also understood. */
static const json_t *param_schema(const json_t *tools, const char *fname, const char *key)
{
    size_t i;
    const json_t *tool;
    if (!json_is_array(tools)) return NULL;
    json_array_foreach(tools, i, tool) {
        const json_t *f = json_object_get(tool, "function");
        if (!json_is_object(f)) f = tool;
        const json_t *name = json_object_get(f, "name");
        if (!json_is_string(name) || strcmp(json_string_value(name), fname) != 0) continue;
        const json_t *params = json_object_get(f, "parameters");
        if (!params) params = json_object_get(f, "input_schema");
        return json_object_get(json_object_get(params, "properties"), key);
    }
    return NULL;
}

static bool bytes_eq(const char *s, size_t n, const char *lit)
{
    return n == strlen(lit) && memcmp(s, lit, n) == 0;
}

/* A parameter value typed by its schema; NULL when it is a string that is not UTF-8. */
static json_t *typed_value(const char *s, size_t n, unsigned types)
{
    if (types != 0 && !(types & TYPE_STRING)) {
        if (types & TYPE_BOOLEAN) {
            if (bytes_eq(s, n, "True") || bytes_eq(s, n, "true")) return json_true();
            if (bytes_eq(s, n, "False") || bytes_eq(s, n, "false")) return json_false();
        }
        if ((types & TYPE_NULL) && (bytes_eq(s, n, "None") || bytes_eq(s, n, "null")))
            return json_null();
        json_error_t jerr;
        json_t *v = json_loadb(s, n, JSON_DECODE_ANY, &jerr);
        if (v) return v;
    }
    return json_stringn(s, n);
}

/* ---- the tool-call scanner -------------------------------------------------------------- */

static bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* 1: s starts with lit; 0: s is a proper prefix of lit (need more); -1: neither. */
static int match_lit(const char *s, size_t n, const char *lit)
{
    size_t l = strlen(lit);
    if (memcmp(s, lit, HS_MIN(n, l)) != 0) return -1;
    return n >= l ? 1 : 0;
}

static size_t skip_ws(const char *b, size_t i, size_t n)
{
    while (i < n && is_ws(b[i])) i++;
    return i;
}

static void scan_reset(struct call_scan *sc)
{
    struct xml_param *params = sc->params;
    int cap = sc->cap_params;
    memset(sc, 0, sizeof(*sc));
    sc->params = params;
    sc->cap_params = cap;
}

/* Advance the scanner over the call body b[0, n). SCAN_DONE leaves sc->at just past
 * "</tool_call>". Decisions depend only on b, never on how it arrived (invariant 1). */
static enum scan_result scan_call(struct call_scan *sc, const char *b, size_t n)
{
    for (;;) {
        size_t i = sc->at;
        int m, m2;
        switch (sc->phase) {
        case CALL_START:
            i = skip_ws(b, i, n);
            sc->at = i;
            if (i == n) return SCAN_MORE;
            if (b[i] == '{') {
                sc->json = true;
                sc->name.off = i;
                sc->phase = CALL_JSON_OBJ;
            } else if (b[i] == '<') {
                sc->phase = CALL_XML_FUNC;
            } else {
                return SCAN_BAD;
            }
            break;
        case CALL_XML_FUNC:
            m = match_lit(b + i, n - i, "<function=");
            if (m <= 0) return m < 0 ? SCAN_BAD : SCAN_MORE;
            sc->at = sc->name.off = i + 10;
            sc->phase = CALL_XML_FNAME;
            break;
        case CALL_XML_FNAME:
        case CALL_XML_PNAME: {
            struct span *sp = sc->phase == CALL_XML_FNAME ? &sc->name : &sc->key;
            for (; i < n && b[i] != '>'; i++)
                if (b[i] == '<' || b[i] == '\n' || b[i] == '\0' || i - sp->off >= NAME_MAX_LEN)
                    return SCAN_BAD;
            sc->at = i;
            if (i == n) return SCAN_MORE;
            sp->len = i - sp->off;
            if (sp->len == 0) return SCAN_BAD;
            sc->at = i + 1;
            if (sc->phase == CALL_XML_FNAME) {
                sc->phase = CALL_XML_BODY;
            } else {
                sc->value_start = sc->at;
                sc->phase = CALL_XML_VALUE;
            }
            break;
        }
        case CALL_XML_BODY:
            i = skip_ws(b, i, n);
            sc->at = i;
            if (i == n) return SCAN_MORE;
            m = match_lit(b + i, n - i, "<parameter=");
            m2 = match_lit(b + i, n - i, "</function>");
            if (m == 1) {
                sc->at = sc->key.off = i + 11;
                sc->phase = CALL_XML_PNAME;
            } else if (m2 == 1) {
                sc->at = i + 11;
                sc->phase = CALL_CLOSE;
            } else {
                return m == 0 || m2 == 0 ? SCAN_MORE : SCAN_BAD;
            }
            break;
        case CALL_XML_VALUE: {
            const char *e = memmem(b + i, n - i, "</parameter>", 12);
            if (!e) {
                /* resume where a "</parameter>" cut by the end of input could begin */
                sc->at = n - i > 11 ? n - 11 : i;
                return SCAN_MORE;
            }
            sc->cand = (size_t)(e - b);
            sc->at = sc->cand + 12;
            sc->phase = CALL_XML_VALUE_END;
            break;
        }
        case CALL_XML_VALUE_END:
            /* sc->at stays just past the candidate, in case it turns out to be content */
            i = skip_ws(b, i, n);
            if (i == n) return SCAN_MORE;
            m = match_lit(b + i, n - i, "<parameter=");
            m2 = match_lit(b + i, n - i, "</function>");
            if (m == 1 || m2 == 1) {
                if (sc->n_params == sc->cap_params) {
                    sc->cap_params = sc->cap_params ? 2 * sc->cap_params : 8;
                    sc->params = hs_realloc(sc->params, (size_t)sc->cap_params * sizeof(*sc->params));
                }
                sc->params[sc->n_params++] = (struct xml_param){
                    .key = sc->key,
                    .value = {sc->value_start, sc->cand - sc->value_start},
                };
                sc->phase = CALL_XML_BODY;
            } else if (m == 0 || m2 == 0) {
                return SCAN_MORE;
            } else {
                sc->at = sc->cand + 1;
                sc->phase = CALL_XML_VALUE;
            }
            break;
        case CALL_JSON_OBJ:
            for (; i < n; i++) {
                char c = b[i];
                if (sc->in_str) {
                    if (sc->esc) sc->esc = false;
                    else if (c == '\\') sc->esc = true;
                    else if (c == '"') sc->in_str = false;
                } else if (c == '"') {
                    sc->in_str = true;
                } else if (c == '{' || c == '[') {
                    sc->depth++;
                } else if ((c == '}' || c == ']') && --sc->depth == 0) {
                    break;
                }
            }
            if (i == n) {
                sc->at = n;
                return SCAN_MORE;
            }
            sc->name.len = i + 1 - sc->name.off;
            sc->at = i + 1;
            sc->phase = CALL_CLOSE;
            break;
        case CALL_CLOSE:
            i = skip_ws(b, i, n);
            sc->at = i;
            if (i == n) return SCAN_MORE;
            m = match_lit(b + i, n - i, "</tool_call>");
            if (m <= 0) return m < 0 ? SCAN_BAD : SCAN_MORE;
            sc->at = i + 12;
            return SCAN_DONE;
        }
    }
}

/* Build the call the scanner found in b; false when it does not make a valid call. */
static bool call_build(const struct chat_parser *p, const char *b, char **name_out, json_t **args_out)
{
    const struct call_scan *sc = &p->scan;
    if (sc->json) {
        json_error_t jerr;
        json_t *doc = json_loadb(b + sc->name.off, sc->name.len, 0, &jerr);
        const json_t *name = json_object_get(doc, "name");
        json_t *args = json_object_get(doc, "arguments");
        if (!args) args = json_object_get(doc, "parameters");
        if (!json_is_string(name) || json_string_length(name) == 0 ||
            strlen(json_string_value(name)) != json_string_length(name)) {
            json_decref(doc);
            return false;
        }
        if (!args || json_is_null(args)) {
            args = json_object();
        } else if (json_is_string(args)) {
            args = json_loadb(json_string_value(args), json_string_length(args), 0, &jerr);
        } else {
            json_incref(args);
        }
        if (!json_is_object(args)) {
            json_decref(args);
            json_decref(doc);
            return false;
        }
        *name_out = hs_strdup(json_string_value(name));
        *args_out = args;
        json_decref(doc);
        return true;
    }
    if (!hs_utf8_valid(b + sc->name.off, sc->name.len)) return false;
    char *name = hs_strndup(b + sc->name.off, sc->name.len);
    json_t *args = json_object();
    for (int k = 0; k < sc->n_params; k++) {
        const struct xml_param *pr = &sc->params[k];
        const char *v = b + pr->value.off;
        size_t vlen = pr->value.len;
        if (vlen > 0 && v[0] == '\n') { v++; vlen--; }
        if (vlen > 0 && v[vlen - 1] == '\n') vlen--;
        char *key = hs_strndup(b + pr->key.off, pr->key.len);
        json_t *value = NULL;
        if (hs_utf8_valid(key, pr->key.len))
            value = typed_value(v, vlen, schema_types(param_schema(p->tools, name, key), 0));
        bool ok = value && json_object_set_new(args, key, value) == 0;
        hs_free(key);
        if (!ok) {
            json_decref(args);
            hs_free(name);
            return false;
        }
    }
    *name_out = name;
    *args_out = args;
    return true;
}

/* ---- the state machine ------------------------------------------------------------------ */

/* One step in TEXT or REASONING over the unconsumed input. Returns true when a tag changed
 * the state (run again), false when all input that can be decided has been consumed. */
static bool step_text(struct chat_parser *p, bool final)
{
    if (p->pos == p->in.len) return false; /* also: nothing fed yet, in.buf is NULL */
    const char *s = p->in.buf + p->pos;
    size_t n = p->in.len - p->pos;
    bool reasoning = p->state == PARSE_REASONING;
    enum chat_event_kind kind = reasoning ? CHAT_EVENT_REASONING : CHAT_EVENT_TEXT;
    for (size_t i = 0; i < n; i++) {
        if (s[i] != '<') continue;
        const char *tags[2];
        int n_tags = 0;
        if (reasoning) {
            tags[n_tags++] = "</think>";
            if (!p->streams[CHAT_EVENT_REASONING].started && all_space(s, i))
                tags[n_tags++] = "<think>";
        } else {
            tags[n_tags++] = "<think>";
            tags[n_tags++] = TAG_TOOL_CALL;
        }
        bool maybe = false;
        for (int t = 0; t < n_tags; t++) {
            int m = match_lit(s + i, n - i, tags[t]);
            if (m == 0) maybe = true;
            if (m != 1) continue;
            stream_put(p, kind, s, i);
            p->pos += i + strlen(tags[t]);
            if (strcmp(tags[t], "</think>") == 0) {
                p->state = PARSE_TEXT;
            } else if (strcmp(tags[t], "<think>") == 0) {
                p->state = PARSE_REASONING;
            } else {
                p->state = PARSE_CALL;
                p->call_tag = p->pos - TAG_TOOL_CALL_LEN;
                scan_reset(&p->scan);
            }
            return true;
        }
        if (maybe && !final) {
            stream_put(p, kind, s, i);
            p->pos += i;
            return false;
        }
    }
    size_t keep = final ? 0 : hs_utf8_open_tail(s, n);
    stream_put(p, kind, s, n - keep);
    p->pos += n - keep;
    return false;
}

/* One step in CALL: false when the call needs more input. */
static bool step_call(struct chat_parser *p, bool final)
{
    size_t body = p->call_tag + TAG_TOOL_CALL_LEN;
    const char *b = p->in.buf + body;
    enum scan_result r = scan_call(&p->scan, b, p->in.len - body);
    if (r == SCAN_MORE && !final) return false;
    char *name = NULL;
    json_t *args = NULL;
    if (r == SCAN_DONE && call_build(p, b, &name, &args)) {
        struct chat_event ev = {.kind = CHAT_EVENT_TOOL_CALL, .tool_name = name,
                                .tool_args = args, .tool_index = p->n_calls++};
        p->fn(p->ctx, &ev);
        hs_free(name);
        json_decref(args);
        p->pos = body + p->scan.at;
    } else {
        /* not a call: the tag is text and what followed it is scanned again as such */
        stream_put(p, CHAT_EVENT_TEXT, TAG_TOOL_CALL, TAG_TOOL_CALL_LEN);
        p->pos = body;
    }
    p->state = PARSE_TEXT;
    return true;
}

static void parser_run(struct chat_parser *p, bool final)
{
    for (;;) {
        bool again = p->state == PARSE_CALL ? step_call(p, final) : step_text(p, final);
        if (!again) return;
    }
}

/* ---- public ----------------------------------------------------------------------------- */

static void event_ignore(void *ctx, const struct chat_event *ev) { (void)ctx; (void)ev; }

struct chat_parser *chat_parser_new(const json_t *tools, bool starts_in_reasoning,
                                    chat_event_fn fn, void *ctx)
{
    struct chat_parser *p = hs_calloc(1, sizeof(*p));
    p->tools = tools;
    p->fn = fn ? fn : event_ignore;
    p->ctx = ctx;
    p->state = starts_in_reasoning ? PARSE_REASONING : PARSE_TEXT;
    strbuf_init(&p->in);
    strbuf_init(&p->out);
    strbuf_init(&p->streams[0].held);
    strbuf_init(&p->streams[1].held);
    return p;
}

void chat_parser_feed(struct chat_parser *p, const char *text, size_t len)
{
    if (!p || p->finished || len == 0) return;
    /* drop consumed input; an open call keeps its tag, as scanner offsets are relative to it */
    size_t drop = p->state == PARSE_CALL ? p->call_tag : p->pos;
    if (drop > 0) {
        memmove(p->in.buf, p->in.buf + drop, p->in.len - drop);
        p->in.len -= drop;
        p->pos -= drop;
        if (p->state == PARSE_CALL) p->call_tag = 0;
    }
    strbuf_append(&p->in, text, len);
    parser_run(p, false);
}

void chat_parser_finish(struct chat_parser *p)
{
    if (!p || p->finished) return;
    parser_run(p, true);
    p->finished = true;
    strbuf_reset(&p->streams[0].held); /* trailing whitespace of each stream: trimmed */
    strbuf_reset(&p->streams[1].held);
}

void chat_parser_free(struct chat_parser *p)
{
    if (!p) return;
    strbuf_free(&p->in);
    strbuf_free(&p->out);
    strbuf_free(&p->streams[0].held);
    strbuf_free(&p->streams[1].held);
    hs_free(p->scan.params);
    hs_free(p);
}

/* ---- stop strings ---------------------------------------------------------------------
 * chat_stop matches a request's stop strings on the raw generated text, before the parser
 * above sees it, so a match ends generation and the client never receives the string.
 *
 * Rules (docs/API.md says the same for users):
 *   1. Stop strings match only in answer text: not inside reasoning (from `<think>` to
 *      `</think>`, or from the start when the prompt opened <think>) and not inside a tool
 *      call (from `<tool_call>` to `</tool_call>`). A stop string that could cut a think
 *      block or a call in half would leave the client a broken one; the tags are tracked
 *      the way the parser switches on them (TEXT: <think>, <tool_call>; REASONING:
 *      </think>; CALL: </tool_call>).
 *   2. The earliest match wins; at one position the first string in the request's order
 *      (then the state's tags). The text before it is released, the string and everything
 *      after it are dropped.
 *   3. Hold-back: text is released as soon as no suffix of what is pending can still grow
 *      into a stop string or a tag of the current state; so at most (longest pattern - 1)
 *      bytes wait. The released text is split-independent in total (only its chunking
 *      depends on the feeds).
 *   4. block_tool_calls (tool_choice none): `<tool_call>` in text is a match of its own
 *      (CHAT_STOP_TOOL_CALL), released text ends before it. */

struct chat_stop {
    char **s;                   /* the stop strings (copies) */
    size_t *n;
    int n_stops;
    bool block_calls;
    enum chat_stop_state state;
    struct strbuf pend;         /* fed, not yet released */
    bool matched;
};

static const struct { const char *tag; size_t len; } stop_tags[3][2] = {
    [CHAT_STOP_IN_TEXT] = { { "<think>", 7 }, { TAG_TOOL_CALL, TAG_TOOL_CALL_LEN } },
    [CHAT_STOP_IN_REASONING] = { { "</think>", 8 }, { NULL, 0 } },
    [CHAT_STOP_IN_CALL] = { { "</tool_call>", 12 }, { NULL, 0 } },
};

struct chat_stop *chat_stop_new(const json_t *stops, bool block_tool_calls, enum chat_stop_state start)
{
    size_t n = json_is_array(stops) ? json_array_size(stops) : 0;
    int k = 0;
    for (size_t i = 0; i < n; i++) k += json_string_length(json_array_get(stops, i)) > 0;
    if (k == 0 && !block_tool_calls) return NULL;
    struct chat_stop *m = hs_calloc(1, sizeof(*m));
    m->s = hs_calloc((size_t)HS_MAX(k, 1), sizeof(char *));
    m->n = hs_calloc((size_t)HS_MAX(k, 1), sizeof(size_t));
    for (size_t i = 0; i < n; i++) {
        const json_t *v = json_array_get(stops, i);
        size_t len = json_string_length(v);
        if (!len) continue;
        m->s[m->n_stops] = hs_strndup(json_string_value(v), len);
        m->n[m->n_stops++] = len;
    }
    m->block_calls = block_tool_calls;
    m->state = (unsigned)start <= CHAT_STOP_IN_CALL ? start : CHAT_STOP_IN_TEXT;
    strbuf_init(&m->pend);
    return m;
}

#define STOP_HOLD (-10)

/* What happens at b[0, n), patterns tried in priority order (the stop strings in the
 * request's order, then the state's tags): the first that matches in full gives its kind
 * (a stop index >= 0, or -2 - tag index); one before it that b could still grow into
 * gives STOP_HOLD (never when `final`); else CHAT_STOP_NONE. */
static int stop_match_at(const struct chat_stop *m, const char *b, size_t n, bool final)
{
    if (m->state == CHAT_STOP_IN_TEXT)
        for (int k = 0; k < m->n_stops; k++) {
            if (n >= m->n[k]) {
                if (!memcmp(b, m->s[k], m->n[k])) return k;
            } else if (!final && !memcmp(b, m->s[k], n)) {
                return STOP_HOLD;
            }
        }
    for (int t = 0; t < 2; t++) {
        const char *tag = stop_tags[m->state][t].tag;
        size_t tl = stop_tags[m->state][t].len;
        if (!tag) continue;
        if (n >= tl) {
            if (!memcmp(b, tag, tl)) return -2 - t;
        } else if (!final && !memcmp(b, tag, n)) {
            return STOP_HOLD;
        }
    }
    return CHAT_STOP_NONE;
}

/* Scan what is pending; `final`: no more input, so nothing is held for a possible prefix. */
static int stop_scan(struct chat_stop *m, bool final, struct strbuf *out)
{
    const char *b = m->pend.buf;
    size_t n = m->pend.len, i = 0, keep = n; /* pend[keep, n) stays pending */
    int result = CHAT_STOP_NONE;
    while (i < n) {
        int k = stop_match_at(m, b + i, n - i, final);
        if (k == STOP_HOLD) { keep = i; break; }
        if (k == CHAT_STOP_NONE) { i++; continue; }
        if (k >= 0 || (k == -3 && m->block_calls)) { /* a stop string, or a blocked call */
            result = k >= 0 ? k : CHAT_STOP_TOOL_CALL;
            m->matched = true;
            keep = i;
            break;
        }
        size_t tl = stop_tags[m->state][-2 - k].len;
        if (m->state == CHAT_STOP_IN_TEXT) m->state = k == -2 ? CHAT_STOP_IN_REASONING : CHAT_STOP_IN_CALL;
        else m->state = CHAT_STOP_IN_TEXT;
        i += tl;
    }
    if (keep) strbuf_append(out, b, keep);
    if (m->matched || final) {
        strbuf_reset(&m->pend);
    } else if (keep) {
        memmove(m->pend.buf, b + keep, n - keep);
        m->pend.len = n - keep;
        m->pend.buf[m->pend.len] = '\0';
    }
    return result;
}

int chat_stop_feed(struct chat_stop *m, const char *text, size_t len, struct strbuf *out)
{
    if (m->matched) return CHAT_STOP_NONE;
    if (len) strbuf_append(&m->pend, text, len);
    return m->pend.len ? stop_scan(m, false, out) : CHAT_STOP_NONE;
}

int chat_stop_finish(struct chat_stop *m, struct strbuf *out)
{
    if (m->matched) return CHAT_STOP_NONE;
    int r = m->pend.len ? stop_scan(m, true, out) : CHAT_STOP_NONE;
    m->matched = true;
    return r;
}

void chat_stop_free(struct chat_stop *m)
{
    if (!m) return;
    for (int k = 0; k < m->n_stops; k++) hs_free(m->s[k]);
    hs_free(m->s);
    hs_free(m->n);
    strbuf_free(&m->pend);
    hs_free(m);
}
