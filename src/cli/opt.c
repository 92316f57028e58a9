/*
 * opt.c — the one argument parser of the `headstart` command and the --help it prints,
 * both driven by a command's option table (cli.h, design note 1).
 *
 * Invariants:
 *   1. Every value is checked completely (no trailing bytes, its range) before it is
 *      stored; a bad one stores nothing and is a usage error naming the option.
 *   2. The parser never allocates: strings are borrowed from argv, lists are the FN
 *      handlers' business. (The help does, to wrap its lines.)
 *   3. The help lists every option of the table, groups included, in table order.
 */
#include "cli/cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The option called `a`, searching groups; *base gets the offset its group adds. */
static const struct cli_opt *opt_find(const struct cli_opt *t, const char *a, size_t *base)
{
    for (; t->kind != CLI_OPT_END; t++) {
        if (t->kind == CLI_OPT_GROUP) {
            size_t sub = 0;
            const struct cli_opt *o = opt_find(t->group, a, &sub);
            if (o) { *base = t->off + sub; return o; }
            continue;
        }
        if (!strcmp(a, t->name) || (t->alias && !strcmp(a, t->alias))) { *base = 0; return t; }
    }
    return NULL;
}

static int bad_int(const char *cmd, const struct cli_opt *o, const char *s)
{
    if (o->max)
        fprintf(stderr, "headstart %s: %s wants an integer in %lld..%lld, got '%s'\n", cmd, o->name,
                (long long)o->min, (long long)o->max, s);
    else if (o->min > 0)
        fprintf(stderr, "headstart %s: %s wants an integer of at least %lld, got '%s'\n", cmd, o->name,
                (long long)o->min, s);
    else
        fprintf(stderr, "headstart %s: %s wants a non-negative integer, got '%s'\n", cmd, o->name, s);
    return -1;
}

static int parse_int(const char *cmd, const struct cli_opt *o, const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno || v < 0 || v < o->min || (o->max && v > o->max)) return bad_int(cmd, o, s);
    *out = v;
    return 0;
}

static int parse_real(const char *cmd, const struct cli_opt *o, const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = o->kind == CLI_OPT_FLOAT ? (double)strtof(s, &end) : strtod(s, &end);
    bool lo = o->range & CLI_RANGE_MIN, hi = o->range & CLI_RANGE_MAX;
    if (!*s || *end || errno || ((lo || hi) && isnan(v)) || (lo && v < o->fmin) || (hi && v > o->fmax)) {
        if (lo && hi)
            fprintf(stderr, "headstart %s: %s wants a number in [%g, %g], got '%s'\n", cmd, o->name, o->fmin, o->fmax, s);
        else if (lo)
            fprintf(stderr, "headstart %s: %s wants a number >= %g, got '%s'\n", cmd, o->name, o->fmin, s);
        else
            fprintf(stderr, "headstart %s: %s wants a number, got '%s'\n", cmd, o->name, s);
        return -1;
    }
    *out = v;
    return 0;
}

/* Store the value of option o (argument s) at dst. */
static int opt_store(const char *cmd, const struct cli_opt *o, const char *s, void *dst)
{
    int64_t iv;
    double dv;
    switch (o->kind) {
    case CLI_OPT_FLAG: *(bool *)dst = true; return 0;
    case CLI_OPT_STR: *(const char **)dst = s; return 0;
    case CLI_OPT_I64: if (parse_int(cmd, o, s, &iv)) return -1; *(int64_t *)dst = iv; return 0;
    case CLI_OPT_INT: if (parse_int(cmd, o, s, &iv)) return -1; *(int *)dst = (int)iv; return 0;
    case CLI_OPT_U64: if (parse_int(cmd, o, s, &iv)) return -1; *(uint64_t *)dst = (uint64_t)iv; return 0;
    case CLI_OPT_FLOAT: if (parse_real(cmd, o, s, &dv)) return -1; *(float *)dst = (float)dv; return 0;
    case CLI_OPT_DOUBLE: if (parse_real(cmd, o, s, &dv)) return -1; *(double *)dst = dv; return 0;
    case CLI_OPT_SIZE:
        iv = hs_parse_size(s);
        if (iv < o->min) {
            fprintf(stderr, "headstart %s: %s wants a size like 10G or 512M%s, got '%s'\n", cmd, o->name,
                    o->min > 0 ? " (not 0)" : "", s);
            return -1;
        }
        *(int64_t *)dst = iv;
        return 0;
    case CLI_OPT_FN: return o->fn(cmd, o, s, dst);
    case CLI_OPT_END: case CLI_OPT_GROUP: break;
    }
    return -1;
}

int cli_parse(const struct cli_command *c, int argc, char **argv, void *args, const char **pos, int *n_pos)
{
    int np = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { cli_help(c, stdout); return CLI_PARSE_HELP; }
        if (a[0] != '-') {
            if (np < c->max_pos && np < CLI_POS_MAX) { pos[np++] = a; continue; }
            if (c->too_many_pos && np) {
                fprintf(stderr, "headstart %s: ", c->name);
                fprintf(stderr, c->too_many_pos, pos[np - 1], a);
                fputc('\n', stderr);
            } else {
                fprintf(stderr, "headstart %s: unexpected argument '%s' (see --help)\n", c->name, a);
            }
            return CLI_PARSE_ERROR;
        }
        size_t base = 0;
        const struct cli_opt *o = opt_find(c->opts, a, &base);
        if (!o) { fprintf(stderr, "headstart %s: unknown option '%s' (see --help)\n", c->name, a); return CLI_PARSE_ERROR; }
        const char *v = NULL;
        if (o->kind != CLI_OPT_FLAG) {
            if (i + 1 >= argc) { fprintf(stderr, "headstart %s: %s needs a value (see --help)\n", c->name, a); return CLI_PARSE_ERROR; }
            v = argv[++i];
        }
        if (opt_store(c->name, o, v, (char *)args + base + o->off)) return CLI_PARSE_ERROR;
    }
    if (n_pos) *n_pos = np;
    return CLI_PARSE_OK;
}

/* ---- --help ------------------------------------------------------------------------- */

#define HELP_COL 30   /* where an option's text starts */
#define HELP_WIDTH 94 /* where it wraps */

/* Print text from column col (already there) to HELP_WIDTH, wrapping at spaces onto lines
 * indented to HELP_COL; a '\n' in it forces a break. */
static void help_wrap(const char *text, int col, FILE *f)
{
    const char *p = text;
    bool line_empty = true;
    while (*p) {
        if (*p == '\n') { p++; fprintf(f, "\n%*s", HELP_COL, ""); col = HELP_COL; line_empty = true; continue; }
        if (*p == ' ') { p++; continue; }
        size_t w = strcspn(p, " \n");
        if (!line_empty && col + 1 + (int)w > HELP_WIDTH) {
            fprintf(f, "\n%*s", HELP_COL, "");
            col = HELP_COL;
            line_empty = true;
        }
        if (!line_empty) { fputc(' ', f); col++; }
        fwrite(p, 1, w, f);
        col += (int)w;
        p += w;
        line_empty = false;
    }
    fputc('\n', f);
}

static void help_opts(const struct cli_opt *t, FILE *f)
{
    for (; t->kind != CLI_OPT_END; t++) {
        if (t->kind == CLI_OPT_GROUP) { help_opts(t->group, f); continue; }
        int n = fprintf(f, "  %s%s%s%s%s", t->alias ? t->alias : "", t->alias ? ", " : "", t->name,
                        t->arg ? " " : "", t->arg ? t->arg : "");
        if (n >= HELP_COL - 1) { fputc('\n', f); n = 0; }
        fprintf(f, "%*s", HELP_COL - n, "");
        struct strbuf sb;
        strbuf_init(&sb);
        strbuf_puts(&sb, t->help);
        if (t->def) { strbuf_puts(&sb, " (default "); strbuf_puts(&sb, t->def); strbuf_putc(&sb, ')'); }
        help_wrap(sb.buf, HELP_COL, f);
        strbuf_free(&sb);
    }
}

void cli_help(const struct cli_command *c, FILE *f)
{
    fprintf(f, "usage: headstart %s %s\n", c->name, c->usage);
    if (c->about) fprintf(f, "\n%s", c->about);
    if (c->opts && c->opts->kind != CLI_OPT_END) {
        fputs("\noptions:\n", f);
        help_opts(c->opts, f);
    }
}

/* ---- the bank's options ------------------------------------------------------------- */

static int bank_dir_set(const char *cmd, const struct cli_opt *o, const char *s, void *dst)
{
    if (!*s) { fprintf(stderr, "headstart %s: %s wants a directory\n", cmd, o->name); return -1; }
    *(const char **)dst = s;
    return 0;
}

const struct cli_opt cli_bank_dir_opts[] = {
    { .kind = CLI_OPT_FN, .name = "--bank-dir", .arg = "DIR", .fn = bank_dir_set,
      .help = "the bank's disk tier: a directory of its own",
      .def = "$XDG_CACHE_HOME/headstart/bank, else ~/.cache/headstart/bank" },
    { 0 },
};

#define BANK_OFF(f) offsetof(struct cli_bank_args, f)
const struct cli_opt cli_bank_opts[] = {
    { .kind = CLI_OPT_SIZE, .name = "--bank-ram", .arg = "SIZE", .off = BANK_OFF(ram),
      .help = "the bank's RAM budget (e.g. 512M, 8G; 0: unlimited)", .def = "a quarter of RAM" },
    { .kind = CLI_OPT_FLAG, .name = "--no-head-anchor", .off = BANK_OFF(no_head_anchor),
      .help = "no protected snapshot at the end of the prompt head" },
    { .kind = CLI_OPT_GROUP, .off = BANK_OFF(dir), .group = cli_bank_dir_opts },
    { .kind = CLI_OPT_SIZE, .name = "--bank-disk", .arg = "SIZE", .off = BANK_OFF(disk), .min = 1,
      .help = "caps the disk tier (e.g. 20G)", .def = "20% of the free space there, at most 64G" },
    { .kind = CLI_OPT_FLAG, .name = "--no-bank-disk", .off = BANK_OFF(no_disk),
      .help = "keep the bank in RAM only" },
    { .kind = CLI_OPT_STR, .name = "--bank-remote", .arg = "URL", .off = BANK_OFF(remote),
      .help = "a remote tier behind the disk tier, shared by replicas: redis://[[user]:password@]host[:port][/db]"
              " or unix:///path/redis.sock[?db=N] (Redis 7 or Valkey)" },
    { .kind = CLI_OPT_STR, .name = "--bank-remote-prefix", .arg = "NAME", .off = BANK_OFF(remote_prefix),
      .help = "the remote tier's key namespace", .def = "headstart" },
    { .kind = CLI_OPT_INT, .name = "--bank-remote-timeout", .arg = "MS", .off = BANK_OFF(remote_timeout_ms),
      .min = 10, .max = 600000, .help = "limit on every Redis call; a slower one takes the tier down until a retry",
      .def = "1000" },
    { .kind = CLI_OPT_FLAG, .name = "--no-bank", .off = BANK_OFF(no_bank),
      .help = "no bank at all (every tier off): every prompt computed" },
    { 0 },
};

void cli_bank_args_default(struct cli_bank_args *b)
{
    memset(b, 0, sizeof *b);
    b->ram = -1;
}
