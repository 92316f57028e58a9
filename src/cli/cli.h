/*
 * cli.h — the subcommands of the `headstart` command. Each cmd_*.c file parses one family
 * of subcommands' options and calls the module that does the work; main.c dispatches.
 * Every command returns a process exit status: 0 ok, 1 failure, 2 usage error.
 */
#ifndef HS_CLI_H
#define HS_CLI_H

#include "base/base.h"

#include <stdint.h>

/* argv[0] is the first argument after the command name. */
int cmd_inspect(int argc, char **argv);
int cmd_mkmodel(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_render(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_bank(int argc, char **argv);

/* Parse a non-negative integer option value; prints an error naming the option. */
int cmd_parse_i64(const char *cmd, const char *opt, const char *s, int64_t *out);

#endif
