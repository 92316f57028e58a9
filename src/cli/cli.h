/*
 * cli — the `headstart` command: main.c dispatches to the subcommands of cmd_*.c; each
 * parses its arguments with one option table (opt.c) and calls the module that does the
 * work. It is the top of the module tree (it may include every module; none includes it)
 * and is linked into the binary, not into libheadstart.a.
 *
 * Design note:
 *   1. One table per command says everything about an option: its names, its argument's
 *      kind and range, where the value goes (an offset into the command's argument struct),
 *      its help text and default. cli_parse reads argv with it and cli_help prints the
 *      command's --help from it, so the two cannot drift apart.
 *   2. Options shared by commands (the bank's: cli_bank_opts) are one table included by
 *      each command that has them (CLI_OPT_GROUP), parsed and documented once.
 *   3. Every command returns a process exit status: 0 ok, 1 failure, 2 usage error. A usage
 *      error prints one line naming the command and the option ("headstart serve: --port
 *      wants an integer in 0..65535, got 'x'") on stderr.
 *   4. Arguments are read left to right; a later option overrides an earlier one; --help
 *      (-h) prints the help and stops wherever it appears (after any error before it).
 *   5. An option's value is the next argument whatever it looks like (`--text -x` is the
 *      text "-x"); any other argument starting with '-' is an option, the rest positional.
 */
#ifndef HS_CLI_H
#define HS_CLI_H

#include "base/base.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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

/* ---- option tables (opt.c) ---------------------------------------------------------- */

enum cli_opt_kind {
    CLI_OPT_END,     /* ends a table */
    CLI_OPT_FLAG,    /* bool: set to true; takes no argument */
    CLI_OPT_STR,     /* const char *: the argument itself (borrowed from argv) */
    CLI_OPT_I64,     /* int64_t in [min, max] */
    CLI_OPT_INT,     /* int in [min, max] */
    CLI_OPT_U64,     /* uint64_t in [min, max] */
    CLI_OPT_FLOAT,   /* float in [fmin, fmax] where CLI_RANGE_* says so */
    CLI_OPT_DOUBLE,  /* double, likewise */
    CLI_OPT_SIZE,    /* int64_t bytes ("512M", "8G", hs_parse_size) of at least min */
    CLI_OPT_FN,      /* fn(cmd, opt, arg, dst): anything else (choices, lists) */
    CLI_OPT_GROUP,   /* the options of `group`, their offsets taken from `off` */
};

enum { CLI_RANGE_MIN = 1, CLI_RANGE_MAX = 2 };

struct cli_opt {
    enum cli_opt_kind kind;
    const char *name;    /* "--port" */
    const char *alias;   /* "-m"; NULL when none */
    size_t off;          /* the destination: an offset into the command's argument struct */
    const char *arg;     /* the argument's name in --help ("N", "SIZE"); NULL for flags */
    const char *help;    /* one or more lines ('\n' between them) */
    const char *def;     /* the default, for --help; NULL when there is none to say */
    int64_t min, max;    /* integer and size range; max 0 = no upper bound */
    double fmin, fmax;   /* float range, where `range` sets CLI_RANGE_MIN / _MAX */
    int range;
    /* CLI_OPT_FN: store what `arg` says into dst; print the error and return -1 if it is
     * not valid. */
    int (*fn)(const char *cmd, const struct cli_opt *o, const char *arg, void *dst);
    const struct cli_opt *group; /* CLI_OPT_GROUP */
};

struct cli_command {
    const char *name;    /* "serve" */
    const char *usage;   /* the rest of the usage line: "-m MODEL [options]" (may wrap) */
    const char *about;   /* what it does, paragraphs; printed before the options */
    const struct cli_opt *opts;
    int max_pos;         /* positional arguments accepted (0: none) */
    const char *too_many_pos; /* the error for one too many, a format given the last one
                                 accepted and the extra ("%s", "%s") */
};

#define CLI_POS_MAX 4

/* A number macro as the text of a table's default ("8" for BANK_DEFAULT_SNAP_CAP). */
#define CLI_STR_(x) #x
#define CLI_STR(x) CLI_STR_(x)

enum { CLI_PARSE_OK = 0, CLI_PARSE_HELP = 1, CLI_PARSE_ERROR = -1 };

/* Parse argv into `args` (the command's argument struct, defaults already set), the
 * positional arguments into pos[0..*n_pos) (borrowed from argv; may be NULL when max_pos
 * is 0). CLI_PARSE_HELP: --help was printed on stdout (exit 0); CLI_PARSE_ERROR: the
 * error was printed on stderr (exit 2). */
int cli_parse(const struct cli_command *c, int argc, char **argv, void *args, const char **pos, int *n_pos);

/* Print the command's help: usage line, about, then one entry per option. */
void cli_help(const struct cli_command *c, FILE *f);

/* The bank's options, shared by serve and replay (CLI_OPT_GROUP over a cli_bank_args). */
struct cli_bank_args {
    int64_t ram;            /* --bank-ram bytes; -1: not given (a quarter of RAM) */
    bool no_bank;           /* --no-bank */
    bool no_head_anchor;    /* --no-head-anchor */
    const char *dir;        /* --bank-dir; NULL: bank_disk_default_dir() */
    int64_t disk;           /* --bank-disk bytes; 0: not given */
    bool no_disk;           /* --no-bank-disk */
    const char *remote;     /* --bank-remote URL; NULL: no remote tier */
    const char *remote_prefix; /* --bank-remote-prefix; NULL: "headstart" */
    int remote_timeout_ms;  /* --bank-remote-timeout; 0: 1000 */
};
extern const struct cli_opt cli_bank_opts[];
void cli_bank_args_default(struct cli_bank_args *b);
/* --bank-dir alone (a const char * at the group's offset), for `headstart bank`. */
extern const struct cli_opt cli_bank_dir_opts[];

#endif
