/*
 * main.c — the `headstart` command: global setup (log level) and dispatch to the
 * subcommands of cmd_*.c through one table; each command's own options and --help are its
 * option table's (cli.h).
 */
#include "cli/cli.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HEADSTART_VERSION "0.1.0"

struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *args; /* the usual arguments */
    const char *what; /* one line */
};

static const struct command commands[] = {
    { "inspect", cmd_inspect, "MODEL [--json]", "architecture, hyperparameters, layers and tensors" },
    { "mkmodel", cmd_mkmodel, "[options] --out P", "write a deterministic random-weight model" },
    { "logits", cmd_logits, "-m MODEL --ids ... -o F", "logits of a prompt's token ids (float32)" },
    { "tokenize", cmd_tokenize, "-m MODEL --text T", "token ids of a text" },
    { "detokenize", cmd_detokenize, "-m MODEL --ids ...", "text of token ids" },
    { "render", cmd_render, "-m MODEL --request F", "a request rendered by the chat template" },
    { "run", cmd_run, "-m MODEL --ids ... [-n N]", "generate token ids, with timings" },
    { "serve", cmd_serve, "-m MODEL [--port N]", "OpenAI and Anthropic APIs over HTTP" },
    { "replay", cmd_replay, "-m MODEL --requests F", "run requests through the session bank" },
    { "bank", cmd_bank, "stats|ls|verify|gc [--bank-dir D]", "the bank's disk tier, offline" },
    { "version", NULL, "", "print the version" },
};

static void usage(FILE *f)
{
    fprintf(f, "usage: headstart <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < HS_ARRAY_LEN(commands); i++)
        fprintf(f, "  %-10s %-34s %s\n", commands[i].name, commands[i].args, commands[i].what);
    fprintf(f, "\nMODEL is a Hugging Face directory (config.json + *.safetensors) or a .gguf file.\n"
               "Run 'headstart <command> --help' for a command's options. HEADSTART_LOG=debug|info|warn|error\n"
               "sets the log level.\n");
}

int main(int argc, char **argv)
{
    const char *lvl = getenv("HEADSTART_LOG");
    if (lvl && hs_log_level_parse(lvl) >= 0) hs_log_set_level((enum hs_log_level)hs_log_level_parse(lvl));
    if (argc < 2) { usage(stderr); return 2; }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) { usage(stdout); return 0; }
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) { printf("headstart %s\n", HEADSTART_VERSION); return 0; }
    for (size_t i = 0; i < HS_ARRAY_LEN(commands); i++)
        if (commands[i].run && !strcmp(cmd, commands[i].name)) return commands[i].run(argc - 2, argv + 2);
    fprintf(stderr, "headstart: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
