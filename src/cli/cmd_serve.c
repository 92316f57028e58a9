/*
 * cmd_serve.c — `headstart serve`: option parsing into struct server_opts; the server
 * itself is src/server/ (http.c, sched.c).
 */
#include "cli/cli.h"
#include "server/server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int serve_parse(int argc, char **argv, struct strbuf *allow, struct strbuf *cors);

static const char serve_help[] =
    "usage: headstart serve -m MODEL [--host 127.0.0.1] [--port 8080] [--api-key KEY]\n"
    "         [--threads N] [--ctx N] [--max-queue N] [--max-body SIZE] [--model-name NAME]\n"
    "         [--bank-ram SIZE] [--no-bank] [--no-head-anchor] [--bank-dir DIR]\n"
    "         [--bank-disk SIZE] [--no-bank-disk] [--keepalive SECONDS]\n"
    "         [--max-connections N] [--max-connections-per-ip N] [--idle-timeout SECONDS]\n"
    "         [--request-timeout SECONDS] [--allow-host NAME] [--cors-origin ORIGIN]\n"
    "         [--insecure-no-key] [--max-tokens-default N] [--log-format text|json]\n"
    "         [--log-bodies]\n"
    "\n"
    "Serves the model over HTTP: POST /v1/chat/completions and /v1/responses (OpenAI), POST\n"
    "/v1/messages and /v1/messages/count_tokens (Anthropic), GET /v1/models, /health,\n"
    "/metrics. One engine thread runs requests in arrival order; --max-queue N requests may\n"
    "wait while one runs (0: a request is accepted only when the engine is idle), more get\n"
    "429. --port 0 picks a free port (printed on the start line). --ctx defaults to the\n"
    "model's context, at most 32768. --api-key KEY (or HEADSTART_API_KEY) is then required\n"
    "as 'Authorization: Bearer KEY' or 'x-api-key: KEY'; a --host that is not loopback\n"
    "refuses to start without one unless --insecure-no-key. --max-body defaults to 4M (the\n"
    "largest agent requests measured are ~200K). A stream quiet for --keepalive seconds\n"
    "(default 1) while its prompt is prefilled gets a keep-alive (': keepalive' / Anthropic\n"
    "ping). Stops on SIGINT or SIGTERM.\n"
    "\n"
    "Output: a request that sets no max_tokens (or more) generates at most\n"
    "--max-tokens-default tokens (default 1024; 0: up to the context) and ends with the\n"
    "usual length stop (finish_reason \"length\", stop_reason \"max_tokens\"). Every API\n"
    "request, and every request answered with an error, logs one line: id, API, model,\n"
    "status, prompt / cached / generated tokens, cache source, time to first token, total\n"
    "time, stop reason, client address. --log-format json writes every log line as one JSON\n"
    "object; --log-bodies adds request bodies to the request lines (user data: off by\n"
    "default).\n"
    "\n"
    "Connections: at most --max-connections (default 256) are served, --max-connections-per-ip\n"
    "(default 64) from one address; past either, the oldest connection still waiting for its\n"
    "request is closed, and when none waits a small reserve answers only /health, /metrics\n"
    "and /. A request's headers and body must arrive within --request-timeout seconds\n"
    "(default 30) of the connection's opening or its previous answer; a connection with\n"
    "nothing moving for --idle-timeout seconds (default 15; keep-alive idle too) is closed.\n"
    "Browsers: the Host header must be this server's address, 'localhost' or a name given\n"
    "with --allow-host (repeatable or comma separated; '*' any); a request with an Origin\n"
    "header is refused (403) unless --cors-origin lists it ('*' any), which also answers its\n"
    "CORS preflights; POST bodies must be Content-Type: application/json (else 415).\n"
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

/* Append a --allow-host / --cors-origin value to a comma-separated list (owned). */
static int list_add(struct strbuf *list, const char *s)
{
    if (!*s || strchr(s, ' ')) { fprintf(stderr, "headstart serve: '%s' is not a name or origin\n", s); return 2; }
    if (list->len) strbuf_putc(list, ',');
    strbuf_puts(list, s);
    return 0;
}

int cmd_serve(int argc, char **argv)
{
    struct strbuf allow, cors;
    strbuf_init(&allow);
    strbuf_init(&cors);
    int rc = serve_parse(argc, argv, &allow, &cors);
    strbuf_free(&allow);
    strbuf_free(&cors);
    return rc;
}

static int serve_parse(int argc, char **argv, struct strbuf *allow, struct strbuf *cors)
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
        if (!strcmp(a, "--insecure-no-key")) { o.insecure_no_key = true; continue; }
        if (!strcmp(a, "--log-bodies")) { o.log_bodies = true; continue; }
        if (i + 1 >= argc) { fprintf(stderr, "headstart serve: %s needs a value (see --help)\n", a); return 2; }
        const char *s = argv[++i];
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) o.model_path = s;
        else if (!strcmp(a, "--host")) o.host = s;
        else if (!strcmp(a, "--api-key")) o.api_key = s;
        else if (!strcmp(a, "--model-name")) o.model_name = s;
        else if (!strcmp(a, "--allow-host")) { if (list_add(allow, s)) return 2; }
        else if (!strcmp(a, "--cors-origin")) { if (list_add(cors, s)) return 2; }
        else if (!strcmp(a, "--max-connections")) {
            if (cmd_parse_i64("serve", a, s, &v) || v < 1 || v > 16384) { fprintf(stderr, "headstart serve: --max-connections wants 1..16384\n"); return 2; }
            o.max_conns = (int)v;
        } else if (!strcmp(a, "--max-connections-per-ip")) {
            if (cmd_parse_i64("serve", a, s, &v) || v < 1 || v > 16384) { fprintf(stderr, "headstart serve: --max-connections-per-ip wants 1..16384\n"); return 2; }
            o.max_conns_per_ip = (int)v;
        } else if (!strcmp(a, "--idle-timeout")) {
            if (cmd_parse_i64("serve", a, s, &v) || v < 1 || v > 86400) { fprintf(stderr, "headstart serve: --idle-timeout wants seconds in 1..86400\n"); return 2; }
            o.idle_timeout_s = (int)v;
        } else if (!strcmp(a, "--request-timeout")) {
            if (cmd_parse_i64("serve", a, s, &v) || v < 1 || v > 86400) { fprintf(stderr, "headstart serve: --request-timeout wants seconds in 1..86400\n"); return 2; }
            o.request_timeout_s = (int)v;
        }
        else if (!strcmp(a, "--max-tokens-default")) {
            if (cmd_parse_i64("serve", a, s, &v) || v < 0) { fprintf(stderr, "headstart serve: --max-tokens-default wants 0 or more\n"); return 2; }
            o.max_tokens_default = v;
        } else if (!strcmp(a, "--log-format")) {
            if (strcmp(s, "text") && strcmp(s, "json")) { fprintf(stderr, "headstart serve: --log-format wants text or json\n"); return 2; }
            o.log_json = !strcmp(s, "json");
        }
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
    o.allow_hosts = allow->len ? allow->buf : NULL;
    o.cors_origins = cors->len ? cors->buf : NULL;
    if (o.log_json) hs_log_set_format(HS_LOG_FORMAT_JSON);
    return server_run(&o);
}
