/*
 * cmd_text.c — the text-side commands: `headstart tokenize`, `headstart detokenize` and
 * `headstart render` (a request rendered through the model's chat template). They load the
 * model's files for the tokenizer and template (text/model_text.c) but no engine.
 */
#include "cli/cli.h"
#include "api/api.h"
#include "model/model.h"
#include "sys/sys.h"
#include "text/text.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEXT_FILE_MAX (256u << 20)

/* Open a model and its text side; prints the error. */
static int open_text(const char *cmd, const char *path, struct model **m, struct model_text *mt)
{
    struct hs_err err;
    hs_err_clear(&err);
    if (model_load(path, m, &err) != HS_OK || model_text_load(*m, mt, &err) != HS_OK) {
        fprintf(stderr, "headstart %s: %s\n", cmd, err.msg);
        model_free(*m);
        *m = NULL;
        return 1;
    }
    return 0;
}

static void print_ids(const int32_t *ids, size_t n, bool json)
{
    if (json) putchar('[');
    for (size_t i = 0; i < n; i++) printf(json ? "%s%d" : "%s%d", i ? (json ? "," : " ") : "", ids[i]);
    puts(json ? "]" : "");
}

struct tokenize_args {
    const char *model, *text, *file;
    bool json, no_special;
};

#define TOK(f) offsetof(struct tokenize_args, f)
static const struct cli_opt tokenize_opts[] = {
    { .kind = CLI_OPT_STR, .name = "--model", .alias = "-m", .arg = "MODEL", .off = TOK(model),
      .help = "a Hugging Face directory or a .gguf file (required)" },
    { .kind = CLI_OPT_STR, .name = "--text", .arg = "T", .off = TOK(text), .help = "the text" },
    { .kind = CLI_OPT_STR, .name = "--file", .arg = "F", .off = TOK(file), .help = "the text of a file" },
    { .kind = CLI_OPT_FLAG, .name = "--json", .off = TOK(json), .help = "a JSON array" },
    { .kind = CLI_OPT_FLAG, .name = "--no-special", .off = TOK(no_special),
      .help = "special tokens written in the text are plain text" },
    { 0 },
};

static const struct cli_command tokenize_cmd = {
    .name = "tokenize",
    .usage = "-m MODEL (--text T | --file F) [--json] [--no-special]",
    .about = "Prints the token ids of the text, decimal, space separated, on one line (--json: a JSON\n"
             "array). Special tokens written in the text (<|im_start|>, ...) are matched as single\n"
             "tokens unless --no-special.\n",
    .opts = tokenize_opts,
};

int cmd_tokenize(int argc, char **argv)
{
    struct tokenize_args a = { 0 };
    int pr = cli_parse(&tokenize_cmd, argc, argv, &a, NULL, NULL);
    if (pr != CLI_PARSE_OK) return pr == CLI_PARSE_HELP ? 0 : 2;
    const char *model = a.model, *text = a.text, *file = a.file;
    bool json = a.json;
    unsigned flags = a.no_special ? TOKENIZER_ENCODE_NO_SPECIAL : 0;
    if (!model || (!text == !file)) { fprintf(stderr, "headstart tokenize: need -m MODEL and one of --text/--file\n"); return 2; }
    struct hs_err err;
    hs_err_clear(&err);
    char *buf = NULL;
    size_t len = text ? strlen(text) : 0;
    if (file && sys_file_read_all(file, TEXT_FILE_MAX, &buf, &len, &err) != HS_OK) {
        fprintf(stderr, "headstart tokenize: %s\n", err.msg);
        return 1;
    }
    struct model *m;
    struct model_text mt;
    if (open_text("tokenize", model, &m, &mt)) { hs_free(buf); return 1; }
    struct tokenizer_ids ids = { 0 };
    int rc = tokenizer_encode(mt.tok, buf ? buf : text, len, flags, &ids, &err);
    if (rc == HS_OK) print_ids(ids.v, ids.n, json);
    else fprintf(stderr, "headstart tokenize: %s\n", err.msg);
    tokenizer_ids_free(&ids);
    model_text_free(&mt);
    model_free(m);
    hs_free(buf);
    return rc == HS_OK ? 0 : 1;
}

/* Parse "1 2 3" or "1,2,3" into ids; prints the error. */
static int parse_ids(const char *cmd, const char *s, struct tokenizer_ids *ids)
{
    const char *p = s;
    while (*p) {
        while (*p == ' ' || *p == ',' || *p == '\n' || *p == '\t' || *p == '[' || *p == ']') p++;
        if (!*p) break;
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v > INT32_MAX) {
            fprintf(stderr, "headstart %s: bad token id at '%.20s'\n", cmd, p);
            return -1;
        }
        if (ids->n == ids->cap) {
            ids->cap = ids->cap ? ids->cap * 2 : 64;
            ids->v = hs_realloc(ids->v, ids->cap * sizeof *ids->v);
        }
        ids->v[ids->n++] = (int32_t)v;
        p = end;
    }
    return 0;
}

struct detokenize_args {
    const char *model, *ids;
    bool skip_special;
};

#define DETOK(f) offsetof(struct detokenize_args, f)
static const struct cli_opt detokenize_opts[] = {
    { .kind = CLI_OPT_STR, .name = "--model", .alias = "-m", .arg = "MODEL", .off = DETOK(model),
      .help = "a Hugging Face directory or a .gguf file (required)" },
    { .kind = CLI_OPT_STR, .name = "--ids", .arg = "\"1 2 3\"", .off = DETOK(ids),
      .help = "the token ids, space or comma separated (required)" },
    { .kind = CLI_OPT_FLAG, .name = "--skip-special", .off = DETOK(skip_special),
      .help = "leave special tokens out of the text" },
    { 0 },
};

static const struct cli_command detokenize_cmd = {
    .name = "detokenize",
    .usage = "-m MODEL --ids \"1 2 3\" [--skip-special]",
    .about = "Prints the text of the ids (space or comma separated), exactly, with no newline added.\n",
    .opts = detokenize_opts,
};

int cmd_detokenize(int argc, char **argv)
{
    struct detokenize_args a = { 0 };
    int pr = cli_parse(&detokenize_cmd, argc, argv, &a, NULL, NULL);
    if (pr != CLI_PARSE_OK) return pr == CLI_PARSE_HELP ? 0 : 2;
    const char *model = a.model, *idstr = a.ids;
    unsigned flags = a.skip_special ? TOKENIZER_DECODE_SKIP_SPECIAL : 0;
    if (!model || !idstr) { fprintf(stderr, "headstart detokenize: need -m MODEL and --ids\n"); return 2; }
    struct tokenizer_ids ids = { 0 };
    if (parse_ids("detokenize", idstr, &ids)) { tokenizer_ids_free(&ids); return 2; }
    struct model *m;
    struct model_text mt;
    if (open_text("detokenize", model, &m, &mt)) { tokenizer_ids_free(&ids); return 1; }
    struct strbuf out;
    strbuf_init(&out);
    struct hs_err err;
    hs_err_clear(&err);
    int rc = tokenizer_decode(mt.tok, ids.v, ids.n, flags, &out, &err);
    if (rc == HS_OK) fwrite(out.buf ? out.buf : "", 1, out.len, stdout);
    else fprintf(stderr, "headstart detokenize: %s\n", err.msg);
    strbuf_free(&out);
    tokenizer_ids_free(&ids);
    model_text_free(&mt);
    model_free(m);
    return rc == HS_OK ? 0 : 1;
}

static int api_set(const char *cmd, const struct cli_opt *o, const char *s, void *dst)
{
    if (strcmp(s, "openai") && strcmp(s, "anthropic") && strcmp(s, "responses")) {
        fprintf(stderr, "headstart %s: --api must be openai, anthropic or responses, not '%s'\n", cmd, s);
        return -1;
    }
    *(const char **)dst = s;
    return 0;
}

struct render_args {
    const char *model, *request, *api;
    bool ids, head;
};

#define RENDER(f) offsetof(struct render_args, f)
static const struct cli_opt render_opts[] = {
    { .kind = CLI_OPT_STR, .name = "--model", .alias = "-m", .arg = "MODEL", .off = RENDER(model),
      .help = "a Hugging Face directory or a .gguf file (required)" },
    { .kind = CLI_OPT_STR, .name = "--request", .arg = "FILE", .off = RENDER(request),
      .help = "the request body, JSON (required)" },
    { .kind = CLI_OPT_FN, .name = "--api", .arg = "API", .off = RENDER(api), .fn = api_set,
      .help = "openai (a /v1/chat/completions body), anthropic (a /v1/messages body) "
              "or responses (a /v1/responses body)", .def = "openai" },
    { .kind = CLI_OPT_FLAG, .name = "--ids", .off = RENDER(ids), .help = "print the prompt's token ids instead" },
    { .kind = CLI_OPT_FLAG, .name = "--head", .off = RENDER(head),
      .help = "print the head length in tokens instead (the system text + tools "
              "shared by sessions; 0 when none)" },
    { 0 },
};

static const struct cli_command render_cmd = {
    .name = "render",
    .usage = "-m MODEL --request FILE [--api openai|anthropic|responses] [--ids | --head]",
    .about = "Renders the conversation of an API request body (JSON) through the model's chat template\n"
             "and prints the prompt text exactly.\n",
    .opts = render_opts,
};

int cmd_render(int argc, char **argv)
{
    struct render_args a = { .api = "openai" };
    int pr = cli_parse(&render_cmd, argc, argv, &a, NULL, NULL);
    if (pr != CLI_PARSE_OK) return pr == CLI_PARSE_HELP ? 0 : 2;
    const char *model = a.model, *req = a.request, *api = a.api;
    bool want_ids = a.ids, want_head = a.head;
    if (!model || !req) { fprintf(stderr, "headstart render: need -m MODEL and --request FILE\n"); return 2; }
    struct hs_err err;
    hs_err_clear(&err);
    char *body;
    size_t len;
    if (sys_file_read_all(req, TEXT_FILE_MAX, &body, &len, &err) != HS_OK) {
        fprintf(stderr, "headstart render: %s\n", err.msg);
        return 1;
    }
    json_error_t je;
    json_t *root = json_loadb(body, len, 0, &je);
    hs_free(body);
    if (!root) {
        fprintf(stderr, "headstart render: %s:%d:%d: %s\n", req, je.line, je.column, je.text);
        return 1;
    }
    struct chat_request cr;
    int rc = !strcmp(api, "openai")      ? chat_from_openai(root, &cr, &err)
             : !strcmp(api, "responses") ? chat_from_responses(root, &cr, &err)
                                         : chat_from_anthropic(root, &cr, &err);
    json_decref(root);
    if (rc != HS_OK) { fprintf(stderr, "headstart render: %s: %s\n", req, err.msg); return 1; }
    struct model *m;
    struct model_text mt;
    if (open_text("render", model, &m, &mt)) { chat_request_free(&cr); return 1; }
    struct strbuf out;
    strbuf_init(&out);
    if (!mt.tmpl) rc = hs_err_set(&err, HS_ERR_UNSUPPORTED, "%s: the model has no chat template", model);
    else rc = chat_template_render(mt.tmpl, &cr, &out, &err);
    if (rc == HS_OK && (want_ids || want_head)) {
        struct tokenizer_ids ids = { 0 };
        rc = tokenizer_encode(mt.tok, out.buf ? out.buf : "", out.len, 0, &ids, &err);
        if (rc == HS_OK && want_head)
            printf("%lld\n", (long long)chat_head_length(ids.v, (int64_t)ids.n, mt.im_start_id, mt.system_ids, mt.n_system_ids));
        else if (rc == HS_OK) print_ids(ids.v, ids.n, false);
        tokenizer_ids_free(&ids);
    } else if (rc == HS_OK) {
        fwrite(out.buf ? out.buf : "", 1, out.len, stdout);
    }
    if (rc != HS_OK) fprintf(stderr, "headstart render: %s\n", err.msg);
    strbuf_free(&out);
    chat_request_free(&cr);
    model_text_free(&mt);
    model_free(m);
    return rc == HS_OK ? 0 : 1;
}
