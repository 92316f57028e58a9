/*
 * cmd_engine.c — `headstart logits` and `headstart run`: their option tables, token ids in,
 * logits or generated tokens out. The work is engine/'s (engine_forward, the sampler);
 * text prompts are tokenized (and --chat rendered through the chat template) by the
 * model's text side (text/model_text.c), and generated text is streamed through the
 * incremental detokenizer.
 */
#include "cli/cli.h"
#include "api/api.h"
#include "engine/engine.h"
#include "model/model.h"
#include "server/server.h"
#include "sys/sys.h"
#include "text/text.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The options of logits and run, one struct (each command reads its own). */
struct engine_args {
    const char *model, *ids, *ids_file, *out, *text, *prompt, *chat;
    int64_t chunk, threads, batch, n_gen;
    bool all, json, ignore_eos;
    struct sampler_opts so;
};

#define EA(f) offsetof(struct engine_args, f)
static const struct cli_opt model_opt[] = {
    { .kind = CLI_OPT_STR, .name = "--model", .alias = "-m", .arg = "MODEL", .off = EA(model),
      .help = "a Hugging Face directory or a .gguf file (required)" },
    { 0 },
};
static const struct cli_opt ids_opts[] = {
    { .kind = CLI_OPT_STR, .name = "--ids", .arg = "\"1 2 3\"", .off = EA(ids),
      .help = "the prompt's token ids (spaces, tabs, newlines or commas between)" },
    { .kind = CLI_OPT_STR, .name = "--ids-file", .arg = "F", .off = EA(ids_file), .help = "the ids from a file" },
    { 0 },
};
static const struct cli_opt forward_opts[] = {
    { .kind = CLI_OPT_I64, .name = "--threads", .arg = "N", .off = EA(threads), .min = 1,
      .help = "engine threads", .def = "1" },
    { .kind = CLI_OPT_I64, .name = "--batch", .arg = "N", .off = EA(batch),
      .help = "the engine's batch size (0: its default)" },
    { 0 },
};

static const struct cli_opt logits_opts[] = {
    { .kind = CLI_OPT_GROUP, .group = model_opt },
    { .kind = CLI_OPT_GROUP, .group = ids_opts },
    { .kind = CLI_OPT_STR, .name = "--text", .arg = "T", .off = EA(text),
      .help = "tokenize T with the model's tokenizer (special tokens like <|im_start|> match)" },
    { .kind = CLI_OPT_I64, .name = "--chunk", .arg = "N", .off = EA(chunk),
      .help = "forward calls of N tokens (0: the whole prompt at once)" },
    { .kind = CLI_OPT_GROUP, .group = forward_opts },
    { .kind = CLI_OPT_FLAG, .name = "--all", .off = EA(all), .help = "every position's row, not only the last" },
    { .kind = CLI_OPT_STR, .name = "--out", .alias = "-o", .arg = "OUT.f32", .off = EA(out),
      .help = "where to write the logits (required)" },
    { 0 },
};

static const struct cli_command logits_cmd = {
    .name = "logits",
    .usage = "-m MODEL (--ids \"1 2 3\" | --ids-file F | --text T) [--chunk N]\n"
             "         [--threads N] [--batch N] [--all] -o OUT.f32",
    .about = "Runs the prompt's token ids through the model and writes float32 little-endian logits:\n"
             "one row of n_vocab per position with --all, else the last position's row. --chunk N\n"
             "cuts the prompt into forward calls of N tokens (the logits do not change with N).\n",
    .opts = logits_opts,
};

static const struct cli_opt run_opts[] = {
    { .kind = CLI_OPT_GROUP, .group = model_opt },
    { .kind = CLI_OPT_STR, .name = "--prompt", .alias = "-p", .arg = "TEXT", .off = EA(prompt),
      .help = "a raw text prompt" },
    { .kind = CLI_OPT_STR, .name = "--chat", .arg = "TEXT", .off = EA(chat),
      .help = "one user message, rendered through the model's chat template with "
              "the generation prompt" },
    { .kind = CLI_OPT_GROUP, .group = ids_opts },
    { .kind = CLI_OPT_I64, .name = "-n", .arg = "N", .off = EA(n_gen), .help = "tokens to generate at most",
      .def = "32" },
    { .kind = CLI_OPT_FLOAT, .name = "--temp", .arg = "T", .off = EA(so.temperature),
      .help = "sampling temperature; 0 is greedy", .def = "0.7" },
    { .kind = CLI_OPT_FLOAT, .name = "--top-p", .arg = "P", .off = EA(so.top_p), .help = "nucleus sampling",
      .def = "0.8" },
    { .kind = CLI_OPT_INT, .name = "--top-k", .arg = "K", .off = EA(so.top_k), .max = INT32_MAX,
      .help = "the K most likely tokens only", .def = "20" },
    { .kind = CLI_OPT_FLOAT, .name = "--min-p", .arg = "P", .off = EA(so.min_p),
      .help = "drop tokens below P times the most likely's probability" },
    { .kind = CLI_OPT_U64, .name = "--seed", .arg = "S", .off = EA(so.seed), .help = "the sampler's seed" },
    { .kind = CLI_OPT_GROUP, .group = forward_opts },
    { .kind = CLI_OPT_FLAG, .name = "--ignore-eos", .off = EA(ignore_eos),
      .help = "do not stop at the model's end-of-turn tokens" },
    { .kind = CLI_OPT_FLAG, .name = "--json", .off = EA(json), .help = "one JSON object instead" },
    { 0 },
};

static const struct cli_command run_cmd = {
    .name = "run",
    .usage = "-m MODEL (-p TEXT | --chat TEXT | --ids \"1 2 3\" | --ids-file F)\n"
             "         [-n N] [--temp T] [--top-p P] [--top-k K] [--min-p P] [--seed S] [--threads N]\n"
             "         [--ignore-eos] [--json]",
    .about = "Prefills the prompt, generates up to N tokens and ends with one line of timings. With a\n"
             "text prompt the output is streamed as text and stops at the model's end-of-turn tokens\n"
             "(unless --ignore-eos); with ids it prints the generated ids.\n",
    .opts = run_opts,
};

/* Parse ids separated by spaces, tabs, newlines or commas. */
static int parse_ids(const char *cmd, const char *s, int32_t **ids_out, int64_t *n_out)
{
    int64_t n = 0, cap = 64;
    int32_t *ids = hs_malloc((size_t)cap * sizeof(int32_t));
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == ',') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX) {
            fprintf(stderr, "headstart %s: token id %lld is not a non-negative 32-bit integer near '%.16s'\n", cmd,
                    (long long)n, p);
            hs_free(ids);
            return -1;
        }
        if (n == cap) ids = hs_realloc(ids, (size_t)(cap *= 2) * sizeof(int32_t));
        ids[n++] = (int32_t)v;
        p = end;
    }
    if (n == 0) {
        fprintf(stderr, "headstart %s: no token ids given\n", cmd);
        hs_free(ids);
        return -1;
    }
    *ids_out = ids;
    *n_out = n;
    return 0;
}

static int load_ids(const char *cmd, const char *ids_arg, const char *ids_file, int32_t **ids, int64_t *n)
{
    if (!!ids_arg == !!ids_file) {
        fprintf(stderr, "headstart %s: give exactly one of --ids and --ids-file (see --help)\n", cmd);
        return -1;
    }
    if (ids_arg) return parse_ids(cmd, ids_arg, ids, n);
    char *data;
    size_t len;
    struct hs_err err;
    hs_err_clear(&err);
    if (sys_file_read_all(ids_file, 64ull << 20, &data, &len, &err)) {
        fprintf(stderr, "headstart %s: %s\n", cmd, err.msg);
        return -1;
    }
    int rc = parse_ids(cmd, data, ids, n);
    hs_free(data);
    return rc;
}

/* Tokenize a raw prompt, or render one user message (chat) and tokenize it. */
static int text_prompt(const char *cmd, const struct model_text *mt, const char *text, bool chat,
                       int32_t **ids, int64_t *n)
{
    struct hs_err err;
    hs_err_clear(&err);
    struct strbuf rendered;
    strbuf_init(&rendered);
    int rc = HS_OK;
    if (chat) {
        struct chat_request cr;
        json_t *body = json_pack("{s:[{s:s,s:s}]}", "messages", "role", "user", "content", text);
        rc = body ? chat_from_openai(body, &cr, &err) : hs_err_set(&err, HS_ERR_INVALID, "--chat text is not valid UTF-8");
        json_decref(body);
        if (rc == HS_OK) {
            rc = mt->tmpl ? chat_template_render(mt->tmpl, &cr, &rendered, &err)
                          : hs_err_set(&err, HS_ERR_UNSUPPORTED, "the model has no chat template (use -p)");
            chat_request_free(&cr);
        }
        text = rendered.buf ? rendered.buf : "";
    }
    struct tokenizer_ids t = { 0 };
    if (rc == HS_OK) rc = tokenizer_encode(mt->tok, text, strlen(text), 0, &t, &err);
    if (rc == HS_OK && t.n == 0) rc = hs_err_set(&err, HS_ERR_INVALID, "the prompt is empty");
    if (rc != HS_OK) {
        fprintf(stderr, "headstart %s: %s\n", cmd, err.msg);
        tokenizer_ids_free(&t);
    } else {
        *ids = t.v;
        *n = (int64_t)t.n;
    }
    strbuf_free(&rendered);
    return rc == HS_OK ? 0 : -1;
}

/* Model + engine + a sequence for n_ctx positions; prints the error. */
static int open_engine(const char *cmd, const char *path, int64_t threads, int64_t batch,
                       struct model **m, struct engine **e, struct hs_err *err)
{
    if (model_load(path, m, err)) {
        fprintf(stderr, "headstart %s: %s\n", cmd, err->msg);
        return -1;
    }
    struct engine_opts o;
    engine_opts_default(&o);
    o.n_threads = (int)threads;
    if (batch > 0) o.n_batch = batch;
    if (engine_new(*m, &o, e, err)) {
        fprintf(stderr, "headstart %s: %s\n", cmd, err->msg);
        model_free(*m);
        *m = NULL;
        return -1;
    }
    return 0;
}

int cmd_logits(int argc, char **argv)
{
    struct engine_args a = { .threads = 1 };
    int pr = cli_parse(&logits_cmd, argc, argv, &a, NULL, NULL);
    if (pr != CLI_PARSE_OK) return pr == CLI_PARSE_HELP ? 0 : 2;
    const char *model_path = a.model, *ids_arg = a.ids, *ids_file = a.ids_file, *out = a.out, *text = a.text;
    int64_t chunk = a.chunk, threads = a.threads, batch = a.batch;
    bool all = a.all;
    if (!model_path || !out) { fprintf(stderr, "headstart logits: -m and -o are required (see --help)\n"); return 2; }
    int32_t *ids;
    int64_t n;
    if (!text && load_ids("logits", ids_arg, ids_file, &ids, &n)) return 2;
    if (text && (ids_arg || ids_file)) { fprintf(stderr, "headstart logits: give one of --ids, --ids-file, --text\n"); return 2; }
    struct hs_err err;
    hs_err_clear(&err);
    struct model *m = NULL;
    struct engine *e = NULL;
    if (open_engine("logits", model_path, threads, batch, &m, &e, &err)) { if (!text) hs_free(ids); return 1; }
    if (text) {
        struct model_text mt;
        int bad = model_text_load(m, &mt, &err) != HS_OK;
        if (bad) fprintf(stderr, "headstart logits: %s\n", err.msg);
        else bad = text_prompt("logits", &mt, text, false, &ids, &n);
        model_text_free(&mt);
        if (bad) { engine_free(e); model_free(m); return 1; }
    }
    int64_t V = model_hparams(m)->n_vocab;
    int64_t n_rows = all ? n : 1;
    float *logits = hs_malloc((size_t)(n_rows * V) * sizeof(float));
    int64_t *rows = hs_malloc((size_t)n * sizeof(int64_t));
    struct seq *s = seq_new(e, n);
    int rc = 0;
    if (chunk <= 0) chunk = n;
    for (int64_t i0 = 0; i0 < n && !rc; i0 += chunk) {
        int64_t c = HS_MIN(chunk, n - i0);
        int nr = 0;
        for (int64_t i = 0; i < c; i++)
            if (all || i0 + i == n - 1) rows[nr++] = i;
        float *dst = logits + (all ? i0 * V : 0);
        rc = engine_forward(e, s, ids + i0, c, NULL, 0, rows, nr, dst, &err);
    }
    if (!rc) rc = sys_file_write_atomic(out, logits, (size_t)(n_rows * V) * sizeof(float), &err);
    if (rc) fprintf(stderr, "headstart logits: %s\n", err.msg);
    seq_free(s);
    hs_free(rows);
    hs_free(logits);
    hs_free(ids);
    engine_free(e);
    model_free(m);
    return rc ? 1 : 0;
}

int cmd_run(int argc, char **argv)
{
    struct engine_args a = { .threads = 1, .n_gen = 32 };
    sampler_opts_default(&a.so);
    int pr = cli_parse(&run_cmd, argc, argv, &a, NULL, NULL);
    if (pr != CLI_PARSE_OK) return pr == CLI_PARSE_HELP ? 0 : 2;
    const char *model_path = a.model, *ids_arg = a.ids, *ids_file = a.ids_file, *prompt = a.prompt, *chat = a.chat;
    int64_t n_gen = a.n_gen, threads = a.threads, batch = a.batch;
    bool json = a.json, ignore_eos = a.ignore_eos;
    struct sampler_opts so = a.so;
    if (!model_path) { fprintf(stderr, "headstart run: -m is required (see --help)\n"); return 2; }
    int32_t *ids = NULL;
    int64_t n = 0;
    const char *text = prompt ? prompt : chat;
    if ((prompt != NULL) + (chat != NULL) + (ids_arg != NULL) + (ids_file != NULL) != 1) {
        fprintf(stderr, "headstart run: give exactly one of -p, --chat, --ids, --ids-file (see --help)\n");
        return 2;
    }
    if (!text && load_ids("run", ids_arg, ids_file, &ids, &n)) return 2;
    struct hs_err err;
    hs_err_clear(&err);
    struct model *m = NULL;
    struct engine *e = NULL;
    if (open_engine("run", model_path, threads, batch, &m, &e, &err)) { hs_free(ids); return 1; }
    struct model_text mt = { 0 };
    if (text) {
        int bad = model_text_load(m, &mt, &err) != HS_OK;
        if (bad) fprintf(stderr, "headstart run: %s\n", err.msg);
        else bad = text_prompt("run", &mt, text, chat != NULL, &ids, &n);
        if (bad) { model_text_free(&mt); engine_free(e); model_free(m); return 1; }
    }
    {
        struct hs_err serr = {0};
        if (sampler_opts_check(&so, &serr) != HS_OK) {
            fprintf(stderr, "headstart run: %s\n", serr.msg[0] ? serr.msg : "invalid sampling options");
            model_text_free(&mt);
            hs_free(ids);
            engine_free(e);
            model_free(m);
            return 2;
        }
    }
    /* the request path's own steps, without a bank: prefill in one step, then one
     * generate step per token (its text decoded without special tokens) */
    struct session_opts o = { .max_tokens = HS_MAX(n_gen, 1), .sampling = so, .ignore_eos = ignore_eos,
                              .text_flags = TOKENIZER_DECODE_SKIP_SPECIAL };
    struct session *sn = NULL;
    struct strbuf piece, all_text;
    strbuf_init(&piece);
    strbuf_init(&all_text);
    int rc = session_new_ids(e, text ? &mt : NULL, NULL, ids, n, &o, &sn, &err);
    if (rc == HS_OK) rc = session_restore(sn, &err);
    bool done = false, emit;
    double t0 = sys_time_sec();
    if (rc == HS_OK) rc = session_prefill(sn, 0, &done, &err);
    double t1 = sys_time_sec();
    int64_t steps = 0;
    done = false;
    while (rc == HS_OK && !done && steps < n_gen) {
        strbuf_reset(&piece);
        rc = session_generate(sn, &piece, &emit, &done, &err);
        steps++;
        strbuf_append(&all_text, piece.buf ? piece.buf : "", piece.len);
        if (!json && piece.len) { fwrite(piece.buf, 1, piece.len, stdout); fflush(stdout); }
    }
    double t2 = sys_time_sec();
    if (text && rc == HS_OK) {
        strbuf_reset(&piece);
        session_generate_end(sn, &piece);
        strbuf_append(&all_text, piece.buf ? piece.buf : "", piece.len);
        if (!json && piece.len) fwrite(piece.buf, 1, piece.len, stdout);
    }
    const struct session_report *rep = sn ? session_report(sn) : NULL;
    /* a stop id ends the text and is not part of the output */
    bool stopped = rep && rep->stop_reason == SESSION_STOP_END;
    const char *stop_reason = stopped ? "stop" : "length";
    int64_t n_out = (rep ? rep->n_output : 0) - (stopped ? 1 : 0), n_decode = steps > 0 ? steps - 1 : 0;
    const int32_t *out = sn ? session_output_ids(sn) : NULL;
    if (rc) {
        fprintf(stderr, "headstart run: %s\n", err.msg);
    } else {
        double pf = t1 > t0 ? (double)n / (t1 - t0) : 0.0, dc = t2 > t1 && n_decode ? (double)n_decode / (t2 - t1) : 0.0;
        if (json) {
            struct strbuf sb;
            strbuf_init(&sb);
            struct jsonw w;
            jsonw_init(&w, &sb, 0);
            jsonw_obj_begin(&w);
            jsonw_key(&w, "prompt_tokens"); jsonw_int(&w, n);
            jsonw_key(&w, "prefill_seconds"); jsonw_double(&w, t1 - t0);
            jsonw_key(&w, "prefill_tok_s"); jsonw_double(&w, pf);
            jsonw_key(&w, "generated_tokens"); jsonw_int(&w, n_out);
            jsonw_key(&w, "decode_forwards"); jsonw_int(&w, n_decode);
            jsonw_key(&w, "decode_seconds"); jsonw_double(&w, t2 - t1);
            jsonw_key(&w, "decode_tok_s"); jsonw_double(&w, dc);
            jsonw_key(&w, "threads"); jsonw_int(&w, threads);
            jsonw_key(&w, "kernels"); jsonw_str(&w, engine_kernel_variant(e));
            jsonw_key(&w, "stop_reason"); jsonw_str(&w, stop_reason);
            if (text) { jsonw_key(&w, "text"); jsonw_strn(&w, all_text.buf ? all_text.buf : "", all_text.len); }
            jsonw_key(&w, "ids");
            jsonw_arr_begin(&w);
            for (int64_t i = 0; i < n_out; i++) jsonw_int(&w, out[i]);
            jsonw_arr_end(&w);
            jsonw_obj_end(&w);
            printf("%s\n", sb.buf);
            strbuf_free(&sb);
        } else {
            if (!text)
                for (int64_t i = 0; i < n_out; i++) printf(i ? " %d" : "%d", out[i]);
            printf("\nprompt %lld tokens, prefill %.2f tok/s; generated %lld tokens, decode %.2f tok/s\n",
                   (long long)n, pf, (long long)n_out, dc);
        }
    }
    session_free(sn);
    strbuf_free(&piece);
    strbuf_free(&all_text);
    model_text_free(&mt);
    hs_free(ids);
    engine_free(e);
    model_free(m);
    return rc ? 1 : 0;
}
