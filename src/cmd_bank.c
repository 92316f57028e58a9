/*
 * cmd_bank.c — `headstart bank stats|ls|verify|gc`: look at and clean up a bank directory
 * offline (no model needed). Opening the directory reconciles it with its index (temp files
 * and unadoptable orphans removed, rows of missing files dropped; bank/disk.c), so every
 * subcommand reports what that found first.
 */
#include "cmd.h"
#include "bank/bank.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char bank_help[] =
    "usage: headstart bank (stats|ls|verify|gc) [--bank-dir DIR] [--to SIZE]\n"
    "\n"
    "  stats    entries, bytes and what the reconcile at open found\n"
    "  ls       entries, most recently used first: key, fingerprint, tokens, bytes, kind\n"
    "           (head = a session-head anchor), hits, last use\n"
    "  verify   read every entry fully (checksums, identity, token prefix); delete bad ones\n"
    "           (exit status 1 when any was bad)\n"
    "  gc       remove orphans and evict least recently used entries down to --to SIZE\n"
    "           (e.g. 10G; default: only orphans)\n"
    "\n"
    "--bank-dir defaults to $XDG_CACHE_HOME/headstart/bank (or ~/.cache/headstart/bank).\n";

static void print_reconcile(const struct bank_disk_stats *st)
{
    char b[32];
    printf("entries %" PRIu64 ", %s (%" PRIu64 " bytes)\n", st->entries,
           hs_format_size(st->bytes, b, sizeof b), st->bytes);
    printf("at open: index rows %" PRIu64 ", adopted %" PRIu64 ", orphans removed %" PRIu64
           ", temp files removed %" PRIu64 ", rows dropped %" PRIu64 "\n",
           st->open_rows, st->open_adopted, st->open_orphans_removed, st->open_tmp_removed,
           st->open_rows_dropped);
}

static bool ls_line(void *ctx, const struct bank_disk_entry *e)
{
    (void)ctx;
    char when[32] = "never";
    if (e->last_use_ms > 0) {
        time_t t = (time_t)(e->last_use_ms / 1000);
        struct tm tm;
        if (gmtime_r(&t, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    }
    printf("%.16s  %016" PRIx64 "  %10" PRId64 "  %12" PRIu64 "  %-9s  %-4s  %6" PRIu64 "  %s\n",
           e->key, e->fp, e->pos, e->bytes, bank_snap_kind_name(e->kind),
           e->kind == BANK_SNAP_HEAD ? "yes" : "no", e->hits, when);
    return true;
}

int cmd_bank(int argc, char **argv)
{
    const char *sub = NULL, *dir_arg = NULL, *to = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(bank_help, stdout); return 0; }
        if (a[0] != '-') {
            if (sub) { fprintf(stderr, "headstart bank: one subcommand only (see --help)\n"); return 2; }
            sub = a;
            continue;
        }
        if (i + 1 >= argc) { fprintf(stderr, "headstart bank: %s needs a value (see --help)\n", a); return 2; }
        if (!strcmp(a, "--bank-dir")) dir_arg = argv[++i];
        else if (!strcmp(a, "--to")) to = argv[++i];
        else { fprintf(stderr, "headstart bank: unknown option '%s' (see --help)\n", a); return 2; }
    }
    if (!sub || (strcmp(sub, "stats") && strcmp(sub, "ls") && strcmp(sub, "verify") &&
                 strcmp(sub, "gc"))) {
        fprintf(stderr, "headstart bank: need one of stats, ls, verify, gc (see --help)\n");
        return 2;
    }
    int64_t target = -1;
    if (to) {
        if (strcmp(sub, "gc")) { fprintf(stderr, "headstart bank: --to is for gc\n"); return 2; }
        target = hs_parse_size(to);
        if (target < 0) { fprintf(stderr, "headstart bank: --to wants a size like 10G, got '%s'\n", to); return 2; }
    }
    char *dir = dir_arg ? hs_strdup(dir_arg) : bank_disk_default_dir();
    if (!dir) { fprintf(stderr, "headstart bank: no --bank-dir and no HOME to default to\n"); return 2; }

    struct bank_disk_opts o;
    bank_disk_opts_default(&o);
    o.cap_bytes = 0;        /* never evict just by looking */
    o.free_floor_bytes = 0;
    struct hs_err err;
    hs_err_clear(&err);
    struct bank_disk *d = bank_disk_open(dir, &o, &err);
    if (!d) {
        fprintf(stderr, "headstart bank: %s\n", err.msg);
        hs_free(dir);
        return 1;
    }
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    int rc = 0;
    printf("bank %s\n", dir);
    print_reconcile(&st);
    if (!strcmp(sub, "ls")) {
        printf("%-16s  %-16s  %10s  %12s  %-9s  %-4s  %6s  %s\n", "key", "fingerprint", "tokens",
               "bytes", "kind", "head", "hits", "last use");
        bank_disk_ls(d, ls_line, NULL);
    } else if (!strcmp(sub, "verify")) {
        struct bank_disk_verify_result vr;
        rc = bank_disk_verify(d, &vr, &err) == HS_OK && vr.removed == 0 ? 0 : 1;
        printf("verify: checked %" PRIu64 ", good %" PRIu64 ", removed %" PRIu64 " (%" PRIu64
               " bytes)\n", vr.checked, vr.good, vr.removed, vr.removed_bytes);
        if (rc) fprintf(stderr, "headstart bank: %s\n", err.msg);
    } else if (!strcmp(sub, "gc")) {
        uint64_t freed = bank_disk_gc(d, target < 0 ? UINT64_MAX : (uint64_t)target);
        bank_disk_stats_get(d, &st);
        char b[32];
        printf("gc: freed %" PRIu64 " bytes; now %" PRIu64 " entries, %s\n", freed, st.entries,
               hs_format_size(st.bytes, b, sizeof b));
    }
    bank_disk_stats_get(d, &st);
    if (st.disabled) {
        fprintf(stderr, "headstart bank: the bank directory failed: %s\n", st.disabled_reason);
        rc = 1;
    }
    bank_disk_close(d);
    hs_free(dir);
    return rc;
}
