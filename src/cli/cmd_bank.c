/*
 * cmd_bank.c — `headstart bank stats|ls|verify|gc`: look at and clean up a bank directory
 * offline (no model needed), safely next to a server using it (bank/disk.c, invariant 8):
 *   stats, ls  read only: no lock, nothing reconciled, created or deleted; they say which
 *              live process holds the directory's writer lock, if any.
 *   verify     takes the writer lock when it is free (then bad entries are removed with
 *              what builds on them, after the open's reconcile); when a server holds it,
 *              verifies read-only and removes nothing. Either way exit 1 when anything is
 *              bad: an entry, a malformed index row, something foreign under blobs/.
 *   gc         needs the writer lock: refuses (exit 1, naming the holder's pid) while
 *              another process holds it. Its open reconciles (temp files of dead writers
 *              and unadoptable orphans removed, rows of missing files dropped with the
 *              entries that build on them, a store of an older format cleared).
 *
 * Output: text by default; --json prints one JSON object on stdout (keys below), which is
 * what scripts and tests read. Exit status: 0 ok; 1 the directory failed, or verify found
 * bad entries; 2 bad arguments.
 *   {"dir", "entries", "bytes", "unshared_bytes", "open": {rows, adopted, orphans_removed,
 *    tmp_removed, rows_dropped, old_format_removed},
 *    ls:     "list": [{key, parent, fingerprint, start, tokens, kind, head, bytes,
 *                      chain_bytes, chain_blobs, children, hits, last_use_ms}]
 *    verify: "verify": {checked, good, removed, removed_bytes}
 *    gc:     "gc": {target_bytes (null = orphans only), freed_bytes}}
 * unshared_bytes = the sum of every entry's chain: what the store would hold if no two
 * entries shared a stretch.
 */
#include "cli/cli.h"
#include "bank/bank.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct ls_ctx {
    bool json;
    struct jsonw *w;
    uint64_t unshared;
};

static bool ls_sum(void *ctx, const struct bank_disk_entry *e)
{
    ((struct ls_ctx *)ctx)->unshared += e->chain_bytes;
    return true;
}

static bool ls_line(void *ctx, const struct bank_disk_entry *e)
{
    struct ls_ctx *c = ctx;
    if (c->json) {
        struct jsonw *w = c->w;
        char fp[17];
        snprintf(fp, sizeof fp, "%016" PRIx64, e->fp);
        jsonw_obj_begin(w);
        jsonw_key(w, "key"); jsonw_str(w, e->key);
        jsonw_key(w, "parent"); jsonw_str(w, e->parent);
        jsonw_key(w, "fingerprint"); jsonw_str(w, fp);
        jsonw_key(w, "start"); jsonw_int(w, e->start);
        jsonw_key(w, "tokens"); jsonw_int(w, e->pos);
        jsonw_key(w, "kind"); jsonw_str(w, bank_snap_kind_name(e->kind));
        jsonw_key(w, "head"); jsonw_bool(w, e->kind == BANK_SNAP_HEAD);
        jsonw_key(w, "bytes"); jsonw_uint(w, e->bytes);
        jsonw_key(w, "chain_bytes"); jsonw_uint(w, e->chain_bytes);
        jsonw_key(w, "chain_blobs"); jsonw_int(w, e->chain_blobs);
        jsonw_key(w, "children"); jsonw_int(w, e->children);
        jsonw_key(w, "hits"); jsonw_uint(w, e->hits);
        jsonw_key(w, "last_use_ms"); jsonw_int(w, e->last_use_ms);
        jsonw_obj_end(w);
        return true;
    }
    char when[32] = "never";
    if (e->last_use_ms > 0) {
        time_t t = (time_t)(e->last_use_ms / 1000);
        struct tm tm;
        if (gmtime_r(&t, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
    }
    printf("%.16s  %016" PRIx64 "  %10" PRId64 "  %10" PRId64 "  %12" PRIu64 "  %12" PRIu64
           "  %-9s  %-4s  %5" PRId64 "  %6" PRIu64 "  %s\n",
           e->key, e->fp, e->start, e->pos, e->bytes, e->chain_bytes, bank_snap_kind_name(e->kind),
           e->kind == BANK_SNAP_HEAD ? "yes" : "no", e->children, e->hits, when);
    return true;
}

static void open_json(struct jsonw *w, const struct bank_disk_stats *st)
{
    jsonw_key(w, "open");
    jsonw_obj_begin(w);
    jsonw_key(w, "rows"); jsonw_uint(w, st->open_rows);
    jsonw_key(w, "adopted"); jsonw_uint(w, st->open_adopted);
    jsonw_key(w, "orphans_removed"); jsonw_uint(w, st->open_orphans_removed);
    jsonw_key(w, "tmp_removed"); jsonw_uint(w, st->open_tmp_removed);
    jsonw_key(w, "rows_dropped"); jsonw_uint(w, st->open_rows_dropped);
    jsonw_key(w, "old_format_removed"); jsonw_uint(w, st->open_old_removed);
    jsonw_obj_end(w);
    jsonw_key(w, "read_only"); jsonw_bool(w, st->read_only);
    jsonw_key(w, "lock_holder_pid"); jsonw_int(w, st->lock_holder_pid);
    jsonw_key(w, "old_format"); jsonw_bool(w, st->old_format);
    jsonw_key(w, "foreign"); jsonw_uint(w, st->foreign);
    jsonw_key(w, "bad_rows"); jsonw_uint(w, st->bad_rows);
}

static void print_reconcile(const struct bank_disk_stats *st, uint64_t unshared)
{
    char b[32], u[32];
    printf("entries %" PRIu64 ", %s (%" PRIu64 " bytes; %s if no stretch were shared)\n",
           st->entries, hs_format_size(st->bytes, b, sizeof b), st->bytes,
           hs_format_size(unshared, u, sizeof u));
    printf("at open: index rows %" PRIu64 ", adopted %" PRIu64 ", orphans removed %" PRIu64
           ", temp files removed %" PRIu64 ", rows dropped %" PRIu64 ", old-format files removed %"
           PRIu64 "\n",
           st->open_rows, st->open_adopted, st->open_orphans_removed, st->open_tmp_removed,
           st->open_rows_dropped, st->open_old_removed);
    if (st->lock_holder_pid)
        printf("in use by process %ld (its writer lock): this is a read-only view\n", st->lock_holder_pid);
    if (st->old_format)
        printf("holds a store of an older format, which this build does not read: `headstart bank gc` clears it\n");
    if (st->foreign)
        printf("foreign: %" PRIu64 " things under blobs/ the bank did not make (e.g. %s), left alone\n",
               st->foreign, st->foreign_example);
    if (st->bad_rows)
        printf("malformed index rows: %" PRIu64 " (never used as paths)\n", st->bad_rows);
}

struct bank_args {
    const char *dir;
    int64_t size;                 /* -1: not given */
    bool json;
};

#define BA(f) offsetof(struct bank_args, f)
static const struct cli_opt bank_opts[] = {
    { .kind = CLI_OPT_GROUP, .off = BA(dir), .group = cli_bank_dir_opts },
    { .kind = CLI_OPT_SIZE, .name = "--size", .arg = "SIZE", .off = BA(size),
      .help = "gc: evict until the store holds at most SIZE (e.g. 10G)",
      .def = "only orphans" },
    { .kind = CLI_OPT_SIZE, .name = "--to", .arg = "SIZE", .off = BA(size), .help = "the same as --size" },
    { .kind = CLI_OPT_FLAG, .name = "--json", .off = BA(json), .help = "one JSON object instead of text" },
    { 0 },
};

static const struct cli_command bank_cmd = {
    .name = "bank",
    .usage = "(stats|ls|verify|gc) [--bank-dir DIR] [--size SIZE] [--json]",
    .about =
    "  stats    entries, bytes (each shared stretch once), and what the reconcile at open\n"
    "           found\n"
    "  ls       entries, most recently used first: key, fingerprint, start and end token,\n"
    "           own bytes, bytes a restore reads (its chain), kind (head = a session-head\n"
    "           anchor), entries building on it, hits, last use\n"
    "  verify   read every entry fully (checksums, identity, the key over the whole token\n"
    "           prefix); delete bad ones with the entries building on them (exit status 1\n"
    "           when any was bad, or anything under the directory is not the bank's own)\n"
    "  gc       remove orphans and evict least recently used entries that nothing builds on\n"
    "           until the store holds at most --size SIZE\n"
    "\n"
    "stats and ls only read (safe next to a running server). verify reads only, and removes\n"
    "nothing, while a server holds the directory; gc refuses then, naming its pid.\n",
    .opts = bank_opts,
    .max_pos = 1,
    .too_many_pos = "one subcommand only, got '%s' and '%s' (see --help)",
};

int cmd_bank(int argc, char **argv)
{
    struct bank_args a = { .size = -1 };
    const char *pos[CLI_POS_MAX];
    int n_pos = 0;
    int pr = cli_parse(&bank_cmd, argc, argv, &a, pos, &n_pos);
    if (pr != CLI_PARSE_OK) return pr == CLI_PARSE_HELP ? 0 : 2;
    const char *sub = n_pos ? pos[0] : NULL, *dir_arg = a.dir;
    bool json = a.json;
    if (!sub || (strcmp(sub, "stats") && strcmp(sub, "ls") && strcmp(sub, "verify") &&
                 strcmp(sub, "gc"))) {
        if (sub) fprintf(stderr, "headstart bank: unknown subcommand '%s'; need one of stats, ls, verify, gc (see --help)\n", sub);
        else fprintf(stderr, "headstart bank: need one of stats, ls, verify, gc (see --help)\n");
        return 2;
    }
    int64_t target = a.size;
    if (target >= 0 && strcmp(sub, "gc")) { fprintf(stderr, "headstart bank: --size is for gc\n"); return 2; }
    char *dir = dir_arg ? hs_strdup(dir_arg) : bank_disk_default_dir();
    if (!dir) { fprintf(stderr, "headstart bank: no --bank-dir and no HOME to default to\n"); return 2; }

    struct bank_disk_opts o;
    bank_disk_opts_default(&o);
    o.cap_bytes = 0;        /* never evict just by looking */
    o.free_floor_bytes = 0;
    /* who may change what: the design note above */
    o.access = !strcmp(sub, "gc") ? BANK_DISK_WRITER
             : !strcmp(sub, "verify") ? BANK_DISK_WRITER_OR_READER : BANK_DISK_READER;
    struct hs_err err;
    hs_err_clear(&err);
    struct bank_disk *d = bank_disk_open(dir, &o, &err);
    if (!d) {
        if (!strcmp(sub, "gc"))
            fprintf(stderr, "headstart bank: gc: %s (gc needs the directory to itself: stop that"
                            " process first; a server keeps its own --bank-disk cap)\n", err.msg);
        else
            fprintf(stderr, "headstart bank: %s\n", err.msg);
        hs_free(dir);
        return 1;
    }
    struct bank_disk_stats st;
    bank_disk_stats_get(d, &st);
    struct ls_ctx lc = { json, NULL, 0 };
    bank_disk_ls(d, ls_sum, &lc);
    struct strbuf sb;
    strbuf_init(&sb);
    struct jsonw w;
    jsonw_init(&w, &sb, 0);
    lc.w = &w;
    if (json) {
        jsonw_obj_begin(&w);
        jsonw_key(&w, "dir"); jsonw_str(&w, dir);
        jsonw_key(&w, "entries"); jsonw_uint(&w, st.entries);
        jsonw_key(&w, "bytes"); jsonw_uint(&w, st.bytes);
        jsonw_key(&w, "unshared_bytes"); jsonw_uint(&w, lc.unshared);
        open_json(&w, &st);
    } else {
        printf("bank %s\n", dir);
        print_reconcile(&st, lc.unshared);
    }
    int rc = 0;
    if (!strcmp(sub, "ls")) {
        if (json) {
            jsonw_key(&w, "list");
            jsonw_arr_begin(&w);
        } else {
            printf("%-16s  %-16s  %10s  %10s  %12s  %12s  %-9s  %-4s  %5s  %6s  %s\n", "key",
                   "fingerprint", "start", "tokens", "bytes", "chain bytes", "kind", "head",
                   "kids", "hits", "last use");
        }
        bank_disk_ls(d, ls_line, &lc);
        if (json) jsonw_arr_end(&w);
    } else if (!strcmp(sub, "verify")) {
        struct bank_disk_verify_result vr;
        int vrc = bank_disk_verify(d, &vr, &err);
        rc = vrc == HS_OK && vr.bad == 0 && vr.removed == 0 && vr.bad_rows == 0 && vr.foreign == 0 ? 0 : 1;
        if (json) {
            jsonw_key(&w, "verify");
            jsonw_obj_begin(&w);
            jsonw_key(&w, "checked"); jsonw_uint(&w, vr.checked);
            jsonw_key(&w, "good"); jsonw_uint(&w, vr.good);
            jsonw_key(&w, "removed"); jsonw_uint(&w, vr.removed);
            jsonw_key(&w, "removed_bytes"); jsonw_uint(&w, vr.removed_bytes);
            jsonw_key(&w, "bad"); jsonw_uint(&w, vr.bad);
            jsonw_key(&w, "bad_rows"); jsonw_uint(&w, vr.bad_rows);
            jsonw_key(&w, "foreign"); jsonw_uint(&w, vr.foreign);
            jsonw_key(&w, "read_only"); jsonw_bool(&w, vr.read_only);
            jsonw_obj_end(&w);
        } else {
            printf("verify: checked %" PRIu64 ", good %" PRIu64 ", bad %" PRIu64 ", removed %" PRIu64
                   " (%" PRIu64 " bytes), malformed index rows %" PRIu64 ", foreign %" PRIu64 "%s\n",
                   vr.checked, vr.good, vr.bad, vr.removed, vr.removed_bytes, vr.bad_rows, vr.foreign,
                   vr.read_only ? " (read-only: another process holds the directory)" : "");
        }
        if (vrc != HS_OK) fprintf(stderr, "headstart bank: verify: %s\n", err.msg);
        if (vr.removed)
            fprintf(stderr, "headstart bank: verify: %" PRIu64 " bad or dependent entries removed\n", vr.removed);
        if (vr.bad > vr.removed)
            fprintf(stderr, "headstart bank: verify: %" PRIu64 " bad or dependent entries found; left in place"
                            " (the directory's writer, pid %ld, drops them when it meets them)\n",
                    vr.bad - vr.removed, st.lock_holder_pid);
        if (vr.bad_rows)
            fprintf(stderr, "headstart bank: verify: %" PRIu64 " index rows with a malformed key or parent%s\n",
                    vr.bad_rows, vr.read_only ? "" : " (removed at open)");
        if (vr.foreign) {
            bank_disk_stats_get(d, &st);
            fprintf(stderr, "headstart bank: verify: %" PRIu64 " things under %s/blobs that the bank did not"
                            " make, e.g. %s (left alone: remove them yourself)\n", vr.foreign, dir, st.foreign_example);
        }
    } else if (!strcmp(sub, "gc")) {
        uint64_t freed = bank_disk_gc(d, target < 0 ? UINT64_MAX : (uint64_t)target);
        bank_disk_stats_get(d, &st);
        if (json) {
            jsonw_key(&w, "gc");
            jsonw_obj_begin(&w);
            jsonw_key(&w, "target_bytes");
            if (target < 0) jsonw_null(&w);
            else jsonw_int(&w, target);
            jsonw_key(&w, "freed_bytes"); jsonw_uint(&w, freed);
            jsonw_key(&w, "entries"); jsonw_uint(&w, st.entries);
            jsonw_key(&w, "bytes"); jsonw_uint(&w, st.bytes);
            jsonw_obj_end(&w);
        } else {
            char b[32];
            printf("gc: freed %" PRIu64 " bytes; now %" PRIu64 " entries, %s (%" PRIu64 " bytes)\n",
                   freed, st.entries, hs_format_size(st.bytes, b, sizeof b), st.bytes);
        }
    }
    bank_disk_stats_get(d, &st);
    if (st.disabled) {
        fprintf(stderr, "headstart bank: the bank directory failed: %s\n", st.disabled_reason);
        rc = 1;
    }
    if (json) {
        jsonw_obj_end(&w);
        printf("%.*s\n", (int)sb.len, sb.buf ? sb.buf : "");
    }
    strbuf_free(&sb);
    bank_disk_close(d);
    hs_free(dir);
    return rc;
}
