/* test_opt.c — the command line's option parser and help (src/cli/opt.c):
 *   1. every kind stores what its argument says, at its offset, groups at theirs; a later
 *      option overrides an earlier one; an option's value may start with '-';
 *   2. bad values (trailing bytes, out of range, NaN where a range is set, a size of 0
 *      where one is needed) are errors and store nothing; so are unknown options, a
 *      missing value, and one positional argument too many;
 *   3. --help anywhere stops the parse with CLI_PARSE_HELP;
 *   4. the shared bank options parse into cli_bank_args (--bank-ram 0 is unlimited,
 *      --bank-disk 0 and an empty --bank-dir are refused);
 *   5. the help names every option, groups included, with its default, and wraps long
 *      text under the text column. */
#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

struct t_args {
    bool flag;
    const char *str;
    int64_t i64;
    int i;
    uint64_t u64;
    float f;
    double d;
    int64_t size;
    int choice;
    struct cli_bank_args bank;
};

static int pick(const char *cmd, const struct cli_opt *o, const char *s, void *dst)
{
    if (strcmp(s, "one") && strcmp(s, "two")) return -1;
    *(int *)dst = !strcmp(s, "one") ? 1 : 2;
    return 0;
}

#define T(f) offsetof(struct t_args, f)
static const struct cli_opt t_opts[] = {
    { .kind = CLI_OPT_FLAG, .name = "--flag", .off = T(flag), .help = "a flag" },
    { .kind = CLI_OPT_STR, .name = "--str", .alias = "-s", .arg = "S", .off = T(str), .help = "a string" },
    { .kind = CLI_OPT_I64, .name = "--i64", .arg = "N", .off = T(i64), .min = 2, .help = "at least 2",
      .def = "7" },
    { .kind = CLI_OPT_INT, .name = "--int", .arg = "N", .off = T(i), .max = 10, .help = "0..10" },
    { .kind = CLI_OPT_U64, .name = "--u64", .arg = "N", .off = T(u64), .help = "any" },
    { .kind = CLI_OPT_FLOAT, .name = "--float", .arg = "X", .off = T(f), .fmin = 0, .range = CLI_RANGE_MIN,
      .help = ">= 0" },
    { .kind = CLI_OPT_DOUBLE, .name = "--double", .arg = "X", .off = T(d), .fmin = 0.5, .fmax = 2,
      .range = CLI_RANGE_MIN | CLI_RANGE_MAX,
      .help = "a long text that has to wrap because it goes on and on past the width of a terminal line" },
    { .kind = CLI_OPT_SIZE, .name = "--size", .arg = "SIZE", .off = T(size), .min = 1, .help = "not 0" },
    { .kind = CLI_OPT_FN, .name = "--pick", .arg = "one|two", .off = T(choice), .fn = pick, .help = "a choice" },
    { .kind = CLI_OPT_GROUP, .off = T(bank), .group = cli_bank_opts },
    { 0 },
};

static const struct cli_command t_cmd = {
    .name = "t", .usage = "[options] A [B]", .about = "About t.\n", .opts = t_opts,
    .max_pos = 2, .too_many_pos = "at most two ('%s', then '%s')",
};

static struct t_args t_fresh(void)
{
    struct t_args a;
    memset(&a, 0, sizeof a);
    a.i64 = 7;
    cli_bank_args_default(&a.bank);
    return a;
}

#define PARSE(a, pos, np, ...) \
    cli_parse(&t_cmd, (int)(sizeof((char *[]){ __VA_ARGS__ }) / sizeof(char *)), (char *[]){ __VA_ARGS__ }, &(a), pos, np)

Test(cli_opt, kinds_store_at_their_offsets)
{
    struct t_args a = t_fresh();
    const char *pos[CLI_POS_MAX];
    int np = -1;
    cr_assert_eq(PARSE(a, pos, &np, "--flag", "-s", "-x", "--i64", "3", "--int", "10", "--u64", "18",
                       "--float", "0.25", "--double", "2", "--size", "2K", "--pick", "two", "A",
                       "--bank-ram", "0", "--bank-dir", "/d", "--no-bank-disk", "B", "--i64", "9"),
                 CLI_PARSE_OK);
    cr_assert(a.flag);
    cr_assert_str_eq(a.str, "-x");
    cr_assert_eq(a.i64, 9); /* the later one */
    cr_assert_eq(a.i, 10);
    cr_assert_eq(a.u64, 18u);
    cr_assert_eq(a.f, 0.25f);
    cr_assert_eq(a.d, 2.0);
    cr_assert_eq(a.size, 2048);
    cr_assert_eq(a.choice, 2);
    cr_assert_eq(a.bank.ram, 0);
    cr_assert_str_eq(a.bank.dir, "/d");
    cr_assert(a.bank.no_disk);
    cr_assert(!a.bank.no_bank);
    cr_assert_eq(a.bank.disk, 0);
    cr_assert_eq(np, 2);
    cr_assert_str_eq(pos[0], "A");
    cr_assert_str_eq(pos[1], "B");
}

Test(cli_opt, bad_values_are_errors_and_store_nothing)
{
    static const char *const bad[][2] = {
        { "--i64", "1" }, { "--i64", "3x" }, { "--i64", "" }, { "--int", "11" }, { "--int", "-1" },
        { "--u64", "99999999999999999999" }, { "--float", "-0.5" }, { "--float", "nan" },
        { "--double", "0.4" }, { "--double", "2.5" }, { "--double", "1s" }, { "--size", "0" },
        { "--size", "banana" }, { "--pick", "three" }, { "--bank-disk", "0" }, { "--bank-ram", "x" },
        { "--bank-dir", "" },
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        struct t_args a = t_fresh(), b = t_fresh();
        int np = 0;
        const char *pos[CLI_POS_MAX];
        char *argv[] = { (char *)bad[k][0], (char *)bad[k][1] };
        cr_assert_eq(cli_parse(&t_cmd, 2, argv, &a, pos, &np), CLI_PARSE_ERROR, "%s %s", bad[k][0], bad[k][1]);
        cr_assert_eq(memcmp(&a, &b, sizeof a), 0, "%s %s stored something", bad[k][0], bad[k][1]);
    }
}

Test(cli_opt, unknown_missing_and_extra_arguments)
{
    struct t_args a = t_fresh();
    const char *pos[CLI_POS_MAX];
    int np = 0;
    cr_assert_eq(PARSE(a, pos, &np, "--frob"), CLI_PARSE_ERROR);
    cr_assert_eq(PARSE(a, pos, &np, "--frob", "x"), CLI_PARSE_ERROR);
    cr_assert_eq(PARSE(a, pos, &np, "-"), CLI_PARSE_ERROR);
    cr_assert_eq(PARSE(a, pos, &np, "--str"), CLI_PARSE_ERROR);
    cr_assert_eq(PARSE(a, pos, &np, "A", "B", "C"), CLI_PARSE_ERROR);
    /* a command without positionals refuses one */
    static const struct cli_command none = { .name = "n", .usage = "", .opts = t_opts };
    char *argv[] = { "A" };
    cr_assert_eq(cli_parse(&none, 1, argv, &a, NULL, NULL), CLI_PARSE_ERROR);
}

Test(cli_opt, help_stops_the_parse)
{
    struct t_args a = t_fresh();
    const char *pos[CLI_POS_MAX];
    int np = 0;
    FILE *saved = stdout;
    stdout = fopen("/dev/null", "w");
    int r1 = PARSE(a, pos, &np, "--flag", "--help", "--frob");
    int r2 = PARSE(a, pos, &np, "-h");
    fclose(stdout);
    stdout = saved;
    cr_assert_eq(r1, CLI_PARSE_HELP);
    cr_assert_eq(r2, CLI_PARSE_HELP);
    /* an error before it wins */
    cr_assert_eq(PARSE(a, pos, &np, "--frob", "--help"), CLI_PARSE_ERROR);
}

Test(cli_opt, help_lists_every_option_and_wraps)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_not_null(f);
    cli_help(&t_cmd, f);
    fclose(f);
    cr_assert(strstr(buf, "usage: headstart t [options] A [B]\n\nAbout t.\n\noptions:\n"));
    static const char *const names[] = {
        "--flag", "-s, --str S", "--i64 N", "(default 7)", "--int N", "--u64 N", "--float X", "--double X",
        "--size SIZE", "--pick one|two", "--bank-ram SIZE", "--no-head-anchor", "--bank-dir DIR",
        "--bank-disk SIZE", "--no-bank-disk", "--no-bank",
    };
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) cr_assert(strstr(buf, names[k]), "%s", names[k]);
    /* every line fits, and a wrapped line starts at the text column */
    for (char *line = buf, *nl; (nl = strchr(line, '\n')); line = nl + 1) {
        cr_assert_leq(nl - line, 94, "%.*s", (int)(nl - line), line);
        if (line != buf && !strncmp(line, "    ", 4)) cr_assert(strspn(line, " ") == 30, "%.*s", (int)(nl - line), line);
    }
    free(buf);
}
