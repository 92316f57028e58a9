/*
 * cmd_replay.c — `headstart replay`: requests from a JSONL file run in order through the
 * request path the server uses (server/session.c), one bank shared by all of them, one
 * JSON report line per request on stdout and the bank's statistics on stderr at the end.
 * Greedy by default, so a run with the bank and one with --no-bank are comparable token
 * for token (and by first_logits_sha256). The bank's disk tier (--bank-dir) is opened at
 * start and closed at exit (every queued write drained), so a later process restores what
 * this one banked.
 */
#include "cli/cli.h"
#include "bank/bank.h"
#include "engine/engine.h"
#include "model/model.h"
#include "server/server.h"
#include "sys/sys.h"
#include "text/text.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One line: {"bank_stats":{...}} plus "bank_disk_stats" when the disk tier was open (one
 * line, so `tail -1` of stderr is always the whole summary). */
static void stats_json(const struct bank_stats *st, const struct bank_disk_stats *dst, struct strbuf *sb)
{
    struct jsonw w;
    jsonw_init(&w, sb, 0);
    jsonw_obj_begin(&w);
    bank_stats_json(st, &w);
    if (dst) bank_disk_stats_json(dst, &w);
    jsonw_obj_end(&w);
}

/* The engine's model identity, for the disk tier's key space (engine.h): hashed here, at
 * start (a replay is short; the server hashes big models in the background), with the
 * per-file digest cache in DIR/model-ids. A failure only keeps the disk tier unused. */
static void identify(struct engine *e, const struct model *m, const char *dir)
{
    struct model_identity_opts o;
    model_identity_opts_default(&o);
    char *cache = sys_path_join(dir, "model-ids");
    o.cache_dir = cache;
    struct model_identity id;
    struct hs_err err;
    hs_err_clear(&err);
    if (model_identity_compute(m, &o, &id, &err) == HS_OK) engine_set_identity(e, id.digest);
    else fprintf(stderr, "headstart replay: model identity failed, disk tier unused: %s\n", err.msg);
    hs_free(cache);
}

/* Open the disk tier; a directory that cannot be used only turns the tier off (the run
 * goes on with the RAM bank), as an I/O error later would. */
static struct bank_disk *open_disk(const char *dir_arg, int64_t cap, struct engine *e, const struct model *m)
{
    char *dir = dir_arg ? hs_strdup(dir_arg) : bank_disk_default_dir();
    if (!dir) {
        fprintf(stderr, "headstart replay: no --bank-dir and no HOME or XDG_CACHE_HOME: disk tier off\n");
        return NULL;
    }
    struct bank_disk_opts o;
    bank_disk_opts_default(&o);
    o.cap_bytes = bank_disk_cap_for(dir, cap);
    struct hs_err err;
    hs_err_clear(&err);
    struct bank_disk *d = bank_disk_open(dir, &o, &err);
    char buf[32];
    if (!d) fprintf(stderr, "headstart replay: disk tier off: %s\n", err.msg);
    else fprintf(stderr, "headstart replay: bank disk %s, cap %s\n", dir, hs_format_size(o.cap_bytes, buf, sizeof(buf)));
    if (d) identify(e, m, dir);
    hs_free(dir);
    return d;
}

struct replay_args {
    const char *model, *requests;
    int64_t threads;
    struct cli_bank_args bank;
    struct bank_opts bo;          /* ram_budget and head_anchor come from `bank` */
    struct session_opts so;
};

#define RA(f) offsetof(struct replay_args, f)
static const struct cli_opt replay_opts[] = {
    { .kind = CLI_OPT_STR, .name = "--model", .alias = "-m", .arg = "MODEL", .off = RA(model),
      .help = "a Hugging Face directory or a .gguf file (required)" },
    { .kind = CLI_OPT_STR, .name = "--requests", .arg = "FILE.jsonl", .off = RA(requests),
      .help = "the requests, one a line (required)" },
    { .kind = CLI_OPT_I64, .name = "--max-tokens", .arg = "N", .off = RA(so.max_tokens),
      .help = "overrides the bodies' max_tokens (default 256 when a body has none)" },
    { .kind = CLI_OPT_FLOAT, .name = "--temp", .arg = "T", .off = RA(so.sampling.temperature),
      .fmin = 0, .range = CLI_RANGE_MIN, .help = "sampling temperature; 0 is greedy", .def = "0" },
    { .kind = CLI_OPT_U64, .name = "--seed", .arg = "S", .off = RA(so.sampling.seed), .help = "the sampler's seed" },
    { .kind = CLI_OPT_I64, .name = "--threads", .arg = "N", .off = RA(threads), .min = 1,
      .help = "engine threads", .def = "1" },
    { .kind = CLI_OPT_GROUP, .off = RA(bank), .group = cli_bank_opts },
    { .kind = CLI_OPT_I64, .name = "--grid", .arg = "N", .off = RA(bo.grid),
      .help = "the bank's snapshot grid spacing in tokens (0: no grid)",
      .def = CLI_STR(BANK_DEFAULT_GRID) },
    { .kind = CLI_OPT_INT, .name = "--snap-cap", .arg = "N", .off = RA(bo.snap_cap), .min = 2, .max = 1000,
      .help = "ordinary snapshots kept per root-to-leaf path",
      .def = CLI_STR(BANK_DEFAULT_SNAP_CAP) },
    { .kind = CLI_OPT_I64, .name = "--min-head", .arg = "N", .off = RA(bo.min_head),
      .help = "a head shorter than this (tokens) gets no anchor",
      .def = CLI_STR(BANK_DEFAULT_MIN_HEAD) },
    { 0 },
};

static const struct cli_command replay_cmd = {
    .name = "replay",
    .usage = "-m MODEL --requests FILE.jsonl [options]",
    .about =
    "Each line of FILE is {\"api\":\"openai\"|\"anthropic\",\"body\":{...}} (a request body). The\n"
    "requests run in order through one session bank: render, restore, prefill, generate,\n"
    "bank. One JSON line per request on stdout (prompt_tokens, cached_tokens, cache_source,\n"
    "head_tokens, restore_reason, stop_reason, output_ids, first_logits_sha256, prefill_ms,\n"
    "ttft_ms, ...; stop_sequence when a body's stop / stop_sequences string ended it,\n"
    "forced_text when its tool_choice forced a call); the bank statistics as one JSON line\n"
    "on stderr at the end.\n",
    .opts = replay_opts,
};

int cmd_replay(int argc, char **argv)
{
    struct replay_args a = { .threads = 1 };
    cli_bank_args_default(&a.bank);
    bank_opts_default(&a.bo);
    sampler_opts_default(&a.so.sampling);
    a.so.sampling.temperature = 0.0f;
    int pr = cli_parse(&replay_cmd, argc, argv, &a, NULL, NULL);
    if (pr != CLI_PARSE_OK) return pr == CLI_PARSE_HELP ? 0 : 2;
    const char *model_path = a.model, *req_path = a.requests;
    int64_t threads = a.threads;
    bool use_bank = !a.bank.no_bank, use_disk = !a.bank.no_disk;
    const char *bank_dir = a.bank.dir;
    int64_t disk_cap = a.bank.disk;
    struct bank_opts bo = a.bo;
    bo.head_anchor = !a.bank.no_head_anchor;
    struct session_opts so = a.so;
    if (!model_path || !req_path) { fprintf(stderr, "headstart replay: -m MODEL and --requests FILE are required (see --help)\n"); return 2; }
    if (a.bank.remote && (!use_bank || !use_disk)) {
        fprintf(stderr, "headstart replay: --bank-remote needs the disk tier (the remote tier holds copies of what it stores)\n");
        return 2;
    }
    struct hs_err uerr;
    hs_err_clear(&uerr);
    if (a.bank.remote && bank_remote_url_check(a.bank.remote, &uerr) != HS_OK) {
        fprintf(stderr, "headstart replay: %s\n", uerr.msg);
        return 2;
    }
    bo.ram_budget = a.bank.ram >= 0 ? (uint64_t)a.bank.ram : sys_mem_total_bytes() / 4;

    struct hs_err err;
    hs_err_clear(&err);
    char *data = NULL;
    size_t len = 0;
    if (sys_file_read_all(req_path, 1ull << 30, &data, &len, &err) != HS_OK) {
        fprintf(stderr, "headstart replay: %s\n", err.msg);
        return 1;
    }
    struct model *m = NULL;
    struct model_text mt = { 0 };
    struct engine *e = NULL;
    struct engine_opts eo;
    engine_opts_default(&eo);
    eo.n_threads = (int)threads;
    if (model_load(model_path, &m, &err) != HS_OK || model_text_load(m, &mt, &err) != HS_OK ||
        engine_new(m, &eo, &e, &err) != HS_OK) {
        fprintf(stderr, "headstart replay: %s\n", err.msg);
        model_text_free(&mt);
        model_free(m);
        hs_free(data);
        return 1;
    }
    struct bank *bank = use_bank ? bank_init(&bo) : NULL;
    if (bank) {
        char buf[32];
        fprintf(stderr, "headstart replay: bank budget %s, head anchor %s (min %lld tokens), grid %lld, cap %d\n",
                hs_format_size(bo.ram_budget, buf, sizeof(buf)), bo.head_anchor ? "on" : "off",
                (long long)bo.min_head, (long long)bo.grid, bo.snap_cap);
    }
    if (bank && use_disk) so.disk = open_disk(bank_dir, disk_cap, e, m);
    if (so.disk && a.bank.remote) {
        struct bank_remote_opts ro;
        bank_remote_opts_default(&ro);
        ro.url = a.bank.remote;
        if (a.bank.remote_prefix) ro.prefix = a.bank.remote_prefix;
        if (a.bank.remote_timeout_ms > 0) ro.timeout_ms = (uint32_t)a.bank.remote_timeout_ms;
        so.remote = bank_remote_open(&ro, so.disk, &err);
        if (!so.remote) fprintf(stderr, "headstart replay: remote tier off: %s\n", err.msg);
        hs_err_clear(&err);
    }
    int rc = 0;
    int64_t line_no = 0;
    struct strbuf sb;
    strbuf_init(&sb);
    for (char *p = data; p && *p && !rc;) {
        char *nl = strchr(p, '\n');
        size_t ll = nl ? (size_t)(nl - p) : strlen(p);
        char *next = nl ? nl + 1 : NULL;
        line_no++;
        const char *q = p;
        while (q < p + ll && (*q == ' ' || *q == '\t' || *q == '\r')) q++;
        if (q == p + ll) { p = next; continue; }
        json_error_t je;
        json_t *root = json_loadb(p, ll, 0, &je);
        p = next;
        json_t *api = root ? json_object_get(root, "api") : NULL, *body = root ? json_object_get(root, "body") : NULL;
        const char *api_s = json_string_value(api);
        if (!root || !api_s || !json_is_object(body) || (strcmp(api_s, "openai") && strcmp(api_s, "anthropic"))) {
            fprintf(stderr, "headstart replay: %s:%lld: %s\n", req_path, (long long)line_no,
                    !root ? je.text : "want {\"api\":\"openai\"|\"anthropic\",\"body\":{...}}");
            json_decref(root);
            rc = 1;
            break;
        }
        struct session_report r;
        enum api_kind kind = !strcmp(api_s, "anthropic") ? API_KIND_ANTHROPIC_MESSAGES : API_KIND_OPENAI_CHAT;
        struct api_sampling defaults;
        session_sampling_defaults(&defaults);
        struct api_request req;
        int src = api_request_parse(kind, body, &defaults, &req, &err);
        json_decref(root);
        /* sampling is the command line's (greedy by default), not the logged request's */
        if (src == HS_OK) src = session_run(e, &mt, bank, &req, &so, NULL, NULL, &r, &err);
        api_request_free(&req);
        if (src != HS_OK) {
            fprintf(stderr, "headstart replay: %s:%lld: %s\n", req_path, (long long)line_no, err.msg);
            rc = 1;
            break;
        }
        sb.len = 0;
        session_report_json(&r, &sb);
        fwrite(sb.buf, 1, sb.len, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        session_report_free(&r);
    }
    struct bank_disk_stats dst;
    bool had_disk = so.disk != NULL;
    if (so.disk) {
        /* drain the queues first, so the stats count every write this run made */
        bank_disk_flush(so.disk);
        bank_remote_flush(so.remote);
        bank_remote_close(so.remote);
        so.remote = NULL;
        bank_disk_stats_get(so.disk, &dst);
        bank_disk_close(so.disk);
        so.disk = NULL;
    }
    if (bank) {
        struct bank_stats st;
        bank_stats_get(bank, &st);
        sb.len = 0;
        stats_json(&st, had_disk ? &dst : NULL, &sb);
        fwrite(sb.buf, 1, sb.len, stderr);
        fputc('\n', stderr);
    }
    strbuf_free(&sb);
    bank_free(bank);
    engine_free(e);
    model_text_free(&mt);
    model_free(m);
    hs_free(data);
    return rc;
}
