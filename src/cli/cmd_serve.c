/*
 * cmd_serve.c — `headstart serve`: its option table, into struct server_opts; the server
 * itself is src/server/ (http.c, sched.c).
 */
#include "cli/cli.h"
#include "server/server.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct serve_args {
    struct server_opts o;
    struct cli_bank_args bank;
    struct strbuf allow, cors;    /* --allow-host, --cors-origin: comma-separated lists */
};

/* Append a --allow-host / --cors-origin value to its comma-separated list (a strbuf). */
static int list_add(const char *cmd, const struct cli_opt *o, const char *s, void *dst)
{
    struct strbuf *list = dst;
    if (!*s || strchr(s, ' ')) { fprintf(stderr, "headstart %s: '%s' is not a name or origin\n", cmd, s); return -1; }
    if (list->len) strbuf_putc(list, ',');
    strbuf_puts(list, s);
    return 0;
}

static int log_format_set(const char *cmd, const struct cli_opt *o, const char *s, void *dst)
{
    if (strcmp(s, "text") && strcmp(s, "json")) { fprintf(stderr, "headstart %s: --log-format wants text or json\n", cmd); return -1; }
    *(bool *)dst = !strcmp(s, "json");
    return 0;
}

#define SO(f) offsetof(struct serve_args, o.f)
static const struct cli_opt serve_opts[] = {
    { .kind = CLI_OPT_STR, .name = "--model", .alias = "-m", .arg = "MODEL", .off = SO(model_path),
      .help = "a Hugging Face directory or a .gguf file (required)" },
    { .kind = CLI_OPT_STR, .name = "--model-name", .arg = "NAME", .off = SO(model_name),
      .help = "the served model's name", .def = "the model file's base name" },
    { .kind = CLI_OPT_STR, .name = "--host", .arg = "ADDR", .off = SO(host), .help = "the address to listen on",
      .def = "127.0.0.1" },
    { .kind = CLI_OPT_INT, .name = "--port", .arg = "N", .off = SO(port), .max = 65535,
      .help = "0 picks a free port (printed on the start line)", .def = "8080" },
    { .kind = CLI_OPT_STR, .name = "--api-key", .arg = "KEY", .off = SO(api_key),
      .help = "then required of every request, as 'Authorization: Bearer KEY' or 'x-api-key: KEY'",
      .def = "$HEADSTART_API_KEY" },
    { .kind = CLI_OPT_FLAG, .name = "--insecure-no-key", .off = SO(insecure_no_key),
      .help = "serve a --host that is not loopback with no API key" },
    { .kind = CLI_OPT_INT, .name = "--threads", .arg = "N", .off = SO(n_threads), .min = 1, .max = 1024,
      .help = "engine threads", .def = "the cores" },
    { .kind = CLI_OPT_I64, .name = "--ctx", .arg = "N", .off = SO(n_ctx), .min = 16,
      .help = "the context of a request", .def = "the model's, at most 32768" },
    { .kind = CLI_OPT_INT, .name = "--parallel", .arg = "N", .off = SO(parallel), .min = 1, .max = SERVER_MAX_PARALLEL,
      .help = "requests computed at once: each forward step carries the next token of every one "
              "and prefill chunks of new ones (answers are identical to running alone)",
      .def = "8" },
    { .kind = CLI_OPT_I64, .name = "--step-tokens", .arg = "N", .off = SO(step_tokens), .min = 1, .max = 8192,
      .help = "most tokens in one forward step: a long prompt is prefilled in chunks so the others' "
              "next tokens wait at most one chunk", .def = "256" },
    { .kind = CLI_OPT_SIZE, .name = "--seq-ram", .arg = "SIZE", .off = SO(seq_ram), .min = 1,
      .help = "RAM for the running requests' state (attention KV and GDN state, reserved for "
              "prompt + output cap at admission): a request waits while it does not fit, and one "
              "that could never fit is refused", .def = "a quarter of RAM" },
    { .kind = CLI_OPT_INT, .name = "--max-queue", .arg = "N", .off = SO(max_queue), .max = 65536,
      .help = "requests that may wait while one runs (0: a request is accepted "
              "only when the engine is idle); more get 429", .def = "16" },
    { .kind = CLI_OPT_SIZE, .name = "--max-body", .arg = "SIZE", .off = SO(max_body), .min = 1,
      .help = "the largest request body (the largest agent requests measured are ~200K)", .def = "4M" },
    { .kind = CLI_OPT_I64, .name = "--max-tokens-default", .arg = "N", .off = SO(max_tokens_default),
      .help = "the output cap of a request that sets no max_tokens, or more (0: up to the context)",
      .def = "1024" },
    { .kind = CLI_OPT_DOUBLE, .name = "--keepalive", .arg = "SECONDS", .off = SO(keepalive_s),
      .fmin = 0.01, .fmax = 3600, .range = CLI_RANGE_MIN | CLI_RANGE_MAX,
      .help = "a stream quiet this long (its prompt being prefilled, or tokens with no text "
              "yet) gets a keep-alive (': keepalive' / Anthropic ping)", .def = "1" },
    { .kind = CLI_OPT_GROUP, .off = offsetof(struct serve_args, bank), .group = cli_bank_opts },
    { .kind = CLI_OPT_INT, .name = "--max-connections", .arg = "N", .off = SO(max_conns), .min = 1, .max = 16384,
      .help = "connections served", .def = "256" },
    { .kind = CLI_OPT_INT, .name = "--max-connections-per-ip", .arg = "N", .off = SO(max_conns_per_ip), .min = 1,
      .max = 16384, .help = "connections served from one address", .def = "64" },
    { .kind = CLI_OPT_INT, .name = "--request-timeout", .arg = "SECONDS", .off = SO(request_timeout_s), .min = 1,
      .max = 86400, .help = "a request's headers and body must arrive within this many "
                            "seconds of the connection's opening or its previous answer", .def = "30" },
    { .kind = CLI_OPT_INT, .name = "--idle-timeout", .arg = "SECONDS", .off = SO(idle_timeout_s), .min = 1,
      .max = 86400, .help = "a connection with nothing moving this long is closed (keep-alive idle too)",
      .def = "15" },
    { .kind = CLI_OPT_FN, .name = "--allow-host", .arg = "NAME", .off = offsetof(struct serve_args, allow),
      .fn = list_add, .help = "a Host header accepted besides this server's address and "
                              "'localhost' (repeatable or comma separated; '*' any)" },
    { .kind = CLI_OPT_FN, .name = "--cors-origin", .arg = "ORIGIN", .off = offsetof(struct serve_args, cors),
      .fn = list_add, .help = "a browser Origin allowed, whose CORS preflights are then "
                              "answered (repeatable or comma separated; '*' any)" },
    { .kind = CLI_OPT_FN, .name = "--log-format", .arg = "text|json", .off = SO(log_json), .fn = log_format_set,
      .help = "json writes every log line as one JSON object", .def = "text" },
    { .kind = CLI_OPT_FLAG, .name = "--log-bodies", .off = SO(log_bodies),
      .help = "add request bodies to the request lines (user data: off by default)" },
    { 0 },
};

static const struct cli_command serve_cmd = {
    .name = "serve",
    .usage = "-m MODEL [--host 127.0.0.1] [--port 8080] [--api-key KEY] [options]",
    .about =
    "Serves the model over HTTP: POST /v1/chat/completions and /v1/responses (OpenAI), POST\n"
    "/v1/messages and /v1/messages/count_tokens (Anthropic), GET /v1/models, /health,\n"
    "/metrics. With an API key (--api-key or HEADSTART_API_KEY)\n"
    "every request must carry it; a --host that is not loopback refuses to start without\n"
    "one unless --insecure-no-key. Stops on SIGINT or SIGTERM.\n"
    "\n"
    "Concurrency: one engine thread runs up to --parallel requests at once. Each forward step\n"
    "carries the next token of every generating request and prefill chunks of new ones (at\n"
    "most --step-tokens tokens), so the weights are read once for all of them and a long\n"
    "prompt delays the others by one chunk at most. Every answer is bit-identical to the same\n"
    "request run alone. Requests are admitted in arrival order while their state (KV rows of\n"
    "prompt + output cap, GDN state) fits --seq-ram; the rest wait, up to --max-queue of\n"
    "them, and more get 429. Requests with one head arriving together compute it once: the\n"
    "others wait for its snapshot and restore it.\n"
    "\n"
    "Output: a request that sets no max_tokens (or more) generates at most\n"
    "--max-tokens-default tokens and ends with the usual length stop (finish_reason\n"
    "\"length\", stop_reason \"max_tokens\"). Every API request, and every request answered\n"
    "with an error, logs one line: id, API, model, status, prompt / cached / generated\n"
    "tokens, cache source, time to first token, total time, stop reason, client address.\n"
    "\n"
    "Connections: past --max-connections, or --max-connections-per-ip from one address, the\n"
    "oldest connection still waiting for its request is closed, and when none waits a small\n"
    "reserve answers only /health, /metrics and /. Browsers: the Host header must be this\n"
    "server's address, 'localhost' or a name given with --allow-host; a request with an\n"
    "Origin header is refused (403) unless --cors-origin lists it; POST bodies must be\n"
    "Content-Type: application/json (else 415).\n"
    "\n"
    "The session bank keeps prompt state between requests so a shared head (system + tools)\n"
    "or a continued conversation is restored instead of computed (usage reports it as\n"
    "cached tokens), in RAM and in its disk tier. The disk tier is keyed by a digest of\n"
    "every byte of the model's files, cached in BANK_DIR/model-ids; a big model not seen\n"
    "before is hashed in the background (the disk tier waits for it, the RAM bank does\n"
    "not). Replace a model by rename, not in place: a file written in place turns the bank\n"
    "off for it, one truncated fails its requests.\n"
    "\n"
    "Environment: HEADSTART_API_KEY (as --api-key). HEADSTART_TEST_EMIT=FILE is for tests\n"
    "only (src/server/test_emit.c): FILE is a JSON array of strings, and each generation\n"
    "emits the next one instead of what the model samples; the server warns at start.\n",
    .opts = serve_opts,
};

int cmd_serve(int argc, char **argv)
{
    struct serve_args a;
    server_opts_default(&a.o);
    a.o.api_key = getenv("HEADSTART_API_KEY");
    cli_bank_args_default(&a.bank);
    strbuf_init(&a.allow);
    strbuf_init(&a.cors);
    int pr = cli_parse(&serve_cmd, argc, argv, &a, NULL, NULL);
    int rc = pr == CLI_PARSE_HELP ? 0 : 2;
    if (pr == CLI_PARSE_OK && !a.o.model_path) {
        fprintf(stderr, "headstart serve: -m MODEL is required (see --help)\n");
    } else if (pr == CLI_PARSE_OK) {
        struct server_opts *o = &a.o;
        if (o->api_key && !*o->api_key) o->api_key = NULL;
        o->bank_ram = a.bank.ram;
        o->no_bank = a.bank.no_bank;
        o->no_head_anchor = a.bank.no_head_anchor;
        if (a.bank.dir) o->bank_dir = a.bank.dir;
        if (a.bank.disk > 0) o->bank_disk = a.bank.disk;
        o->no_bank_disk = a.bank.no_disk;
        o->bank_remote = a.bank.remote;
        o->bank_remote_prefix = a.bank.remote_prefix;
        o->bank_remote_timeout_ms = a.bank.remote_timeout_ms;
        o->allow_hosts = a.allow.len ? a.allow.buf : NULL;
        o->cors_origins = a.cors.len ? a.cors.buf : NULL;
        if (o->log_json) hs_log_set_format(HS_LOG_FORMAT_JSON);
        rc = server_run(o);
    }
    strbuf_free(&a.allow);
    strbuf_free(&a.cors);
    return rc;
}
