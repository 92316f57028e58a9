/*
 * cmd_serve.c — `headstart serve`: option parsing into struct server_opts; the server
 * itself is src/server/ (http.c, sched.c).
 */
#include "cmd.h"
#include "server/server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char serve_help[] =
    "usage: headstart serve -m MODEL [--host 127.0.0.1] [--port 8080] [--api-key KEY]\n"
    "         [--threads N] [--ctx N] [--max-queue N] [--max-body SIZE] [--model-name NAME]\n"
    "         [--bank-ram SIZE] [--no-bank] [--no-head-anchor] [--bank-dir DIR]\n"
    "         [--bank-disk SIZE] [--no-bank-disk] [--keepalive SECONDS]\n"
    "\n"
    "Serves the model over HTTP: POST /v1/chat/completions and /v1/responses (OpenAI), POST\n"
    "/v1/messages and /v1/messages/count_tokens (Anthropic), GET /v1/models, /health,\n"
    "/metrics. One engine thread runs requests in arrival order; --max-queue N requests may\n"
    "wait while one runs (0: a request is accepted only when the engine is idle), more get\n"
    "429. --port 0 picks a free port (printed on the start line). --ctx defaults to the\n"
    "model's context, at most 32768. --api-key KEY (or HEADSTART_API_KEY) is then required\n"
    "as 'Authorization: Bearer KEY' or 'x-api-key: KEY'. --max-body defaults to 32M. A\n"
    "stream quiet for --keepalive seconds (default 1) while its prompt is prefilled gets a\n"
    "keep-alive (': keepalive' / Anthropic ping). Stops on SIGINT or SIGTERM.\n"
    "\n"
    "The session bank keeps prompt state between requests so a shared head (system + tools)\n"
    "or a continued conversation is restored instead of computed (usage reports it as\n"
    "cached tokens). --bank-ram caps it in RAM (default a quarter of RAM; 0: unlimited);\n"
    "--no-head-anchor drops the head's protected snapshot. Its disk tier lives in\n"
    "--bank-dir (default $XDG_CACHE_HOME/headstart/bank, else ~/.cache/headstart/bank),\n"
    "capped by --bank-disk (default 20% of the free space there, at most 64G);\n"
    "--no-bank-disk keeps the bank in RAM only, --no-bank turns both tiers off.\n"
    "The disk tier is keyed by a digest of every byte of the model's files, cached in\n"
    "BANK_DIR/model-ids; a big model not seen before is hashed in the background (the disk\n"
    "tier waits for it, the RAM bank does not). Replace a model by rename, not in place: a\n"
    "file written in place turns the bank off for it, one truncated fails its requests.\n";

int cmd_serve(int argc, char **argv)
{
    struct server_opts o;
    server_opts_default(&o);
    o.api_key = getenv("HEADSTART_API_KEY");
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int64_t v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(serve_help, stdout); return 0; }
        if (!strcmp(a, "--no-bank")) { o.no_bank = true; continue; }
        if (!strcmp(a, "--no-bank-disk")) { o.no_bank_disk = true; continue; }
        if (!strcmp(a, "--no-head-anchor")) { o.no_head_anchor = true; continue; }
        if (i + 1 >= argc) { fprintf(stderr, "headstart serve: %s needs a value (see --help)\n", a); return 2; }
        const char *s = argv[++i];
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) o.model_path = s;
        else if (!strcmp(a, "--host")) o.host = s;
        else if (!strcmp(a, "--api-key")) o.api_key = s;
        else if (!strcmp(a, "--model-name")) o.model_name = s;
        else if (!strcmp(a, "--port")) {
            if (cmd_parse_i64("serve", a, s, &v) || v > 65535) { fprintf(stderr, "headstart serve: --port wants 0..65535\n"); return 2; }
            o.port = (int)v;
        } else if (!strcmp(a, "--threads")) {
            if (cmd_parse_i64("serve", a, s, &v) || v < 1 || v > 1024) { fprintf(stderr, "headstart serve: --threads wants 1..1024\n"); return 2; }
            o.n_threads = (int)v;
        } else if (!strcmp(a, "--ctx")) {
            if (cmd_parse_i64("serve", a, s, &v) || v < 16) { fprintf(stderr, "headstart serve: --ctx wants at least 16\n"); return 2; }
            o.n_ctx = v;
        } else if (!strcmp(a, "--max-queue")) {
            if (cmd_parse_i64("serve", a, s, &v) || v > 65536) { fprintf(stderr, "headstart serve: --max-queue wants 0..65536\n"); return 2; }
            o.max_queue = (int)v;
        } else if (!strcmp(a, "--keepalive")) {
            char *end;
            double d = strtod(s, &end);
            if (end == s || *end || !(d >= 0.01 && d <= 3600.0)) {
                fprintf(stderr, "headstart serve: --keepalive wants seconds in [0.01, 3600], got '%s'\n", s);
                return 2;
            }
            o.keepalive_s = d;
        } else if (!strcmp(a, "--max-body")) {
            o.max_body = hs_parse_size(s);
            if (o.max_body <= 0) { fprintf(stderr, "headstart serve: --max-body wants a size like 32M, got '%s'\n", s); return 2; }
        } else if (!strcmp(a, "--bank-ram")) {
            o.bank_ram = hs_parse_size(s);
            if (o.bank_ram < 0) { fprintf(stderr, "headstart serve: --bank-ram wants a size like 512M or 8G, got '%s'\n", s); return 2; }
        } else if (!strcmp(a, "--bank-dir")) {
            if (!*s) { fprintf(stderr, "headstart serve: --bank-dir wants a directory\n"); return 2; }
            o.bank_dir = s;
        } else if (!strcmp(a, "--bank-disk")) {
            o.bank_disk = hs_parse_size(s);
            if (o.bank_disk <= 0) { fprintf(stderr, "headstart serve: --bank-disk wants a size like 20G, got '%s'\n", s); return 2; }
        } else { fprintf(stderr, "headstart serve: unknown option '%s' (see --help)\n", a); return 2; }
    }
    if (!o.model_path) { fprintf(stderr, "headstart serve: -m MODEL is required (see --help)\n"); return 2; }
    if (o.api_key && !*o.api_key) o.api_key = NULL;
    return server_run(&o);
}
