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
 *
 * The remote tier (bank/remote_tools.c): --remote URL [--remote-prefix NAME] (the same as
 * serve's --bank-remote / --bank-remote-prefix, accepted under those names too) points the
 * subcommand at a Redis shared by replicas instead of a directory; with --bank-dir given as
 * well it runs on both, the directory first (one exit status: the worse of the two; --size
 * is the directory's). Without --remote nothing changes. Redis is read by SCAN, never KEYS,
 * so every subcommand is safe next to live replicas:
 *   stats      manifests, chunks and their bytes, position sets, orphan chunks, chunks
 *              missing, broken chains, and Redis's maxmemory / maxmemory-policy /
 *              used_memory (INFO memory, else CONFIG GET; unknown when refused), with a
 *              warning unless the policy is allkeys-lru or allkeys-lfu (under noeviction,
 *              and under volatile-* since the bank sets no TTL, uploads fail with OOM once
 *              Redis is full).
 *   ls         one line per manifest, by fingerprint then position.
 *   verify     fetches every chunk and checks every entry as a lookup would (chunk ids, the
 *              blob's checks, the key over the whole chain); removes the bad ones with what
 *              builds on them (their manifests, provably wrong chunk values) unless
 *              --dry-run; exit 1 when anything was bad.
 *   gc         removes manifests that cannot restore (undecodable, a chunk missing, a parent
 *              missing: the whole subtree), chunks no manifest names once idle for
 *              --min-idle SECONDS (60: a writer uploads an entry's chunks before its
 *              manifest, so a fresh orphan may be an upload in progress; kept and counted
 *              under an LFU policy, which keeps no idle time), and makes each position set
 *              match the manifests; --dry-run only counts. Redis evicts by its own policy:
 *              there is no --size.
 * Redis unreachable, or failing mid-way: exit 1 naming the URL (its password hidden).
 * Every subcommand first prints what stats prints, as Redis was before it acted:
 *   {"remote": {url, prefix, manifests, bad_manifests, chunks, bytes, unshared_bytes,
 *     position_sets, positions, orphan_chunks, orphan_bytes, missing_chunks, incomplete,
 *     broken_chains, unfindable, stale_positions, foreign_keys,
 *     redis: {maxmemory, maxmemory_policy, used_memory} (null = unknown), warning (or null),
 *     ls:     "list": [{key, parent, fingerprint, start, tokens, kind, head, bytes, chunks,
 *                       chain_bytes, chain_blobs, children, chain_broken, chunk_ids}]
 *     verify: "verify": {checked, good, bad, bad_manifests, missing_chunks, bad_chunks,
 *                        removed, removed_chunks, positions_removed, dry_run}
 *     gc:     "gc": {min_idle_s, orphan_chunks, removed_chunks, removed_chunk_bytes,
 *                    young_chunks, untimed_chunks, bad_manifests, missing_chunk_manifests,
 *                    broken_chain_manifests, removed_manifests, positions_added,
 *                    positions_removed, dry_run}}}
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

/* The fields every listed entry has, disk or remote, opening its object. */
static void ls_entry_json(struct jsonw *w, const char *key, const char *parent, uint64_t fp_v, int64_t start,
                          int64_t pos, enum bank_snap_kind kind, uint64_t bytes)
{
    char fp[17];
    snprintf(fp, sizeof fp, "%016" PRIx64, fp_v);
    jsonw_obj_begin(w);
    jsonw_key(w, "key"); jsonw_str(w, key);
    jsonw_key(w, "parent"); jsonw_str(w, parent);
    jsonw_key(w, "fingerprint"); jsonw_str(w, fp);
    jsonw_key(w, "start"); jsonw_int(w, start);
    jsonw_key(w, "tokens"); jsonw_int(w, pos);
    jsonw_key(w, "kind"); jsonw_str(w, bank_snap_kind_name(kind));
    jsonw_key(w, "head"); jsonw_bool(w, kind == BANK_SNAP_HEAD);
    jsonw_key(w, "bytes"); jsonw_uint(w, bytes);
}

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
        ls_entry_json(w, e->key, e->parent, e->fp, e->start, e->pos, e->kind, e->bytes);
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

/* The disk stats members of every subcommand's JSON, from the bank's field table (rows
 * flagged BANK_STAT_CMD, in table order), with unshared_bytes (not a stat) after bytes. */
static void stats_json(struct jsonw *w, const struct bank_disk_stats *st, uint64_t unshared)
{
    const char *group = NULL;
    for (int i = 0; i < bank_disk_stats_n_fields; i++) {
        const struct bank_stat_field *f = &bank_disk_stats_fields[i];
        if (!(f->outputs & BANK_STAT_CMD)) continue;
        bank_stat_json(w, f, st, &group);
        if (!f->group && !strcmp(f->key, "bytes")) { jsonw_key(w, "unshared_bytes"); jsonw_uint(w, unshared); }
    }
    bank_stat_json_end(w, &group);
}

static void print_reconcile(const struct bank_disk_stats *st, uint64_t unshared)
{
    char b[32], u[32];
    printf("entries %" PRIu64 ", %s (%" PRIu64 " bytes; %s if no stretch were shared)\n",
           st->entries, hs_format_size(st->bytes, b, sizeof b), st->bytes,
           hs_format_size(unshared, u, sizeof u));
    struct strbuf open;
    strbuf_init(&open);
    bank_stats_text(bank_disk_stats_fields, bank_disk_stats_n_fields, "open", st, &open);
    printf("at open: %.*s\n", (int)open.len, open.buf ? open.buf : "");
    strbuf_free(&open);
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
    const char *remote, *remote_prefix;
    int64_t min_idle;             /* -1: not given */
    bool dry_run;
};

#define REMOTE_TOOL_TIMEOUT_MS 5000 /* an offline tool may wait for a big MGET */
#define REMOTE_MIN_IDLE_S 60

#define BA(f) offsetof(struct bank_args, f)
static const struct cli_opt bank_opts[] = {
    { .kind = CLI_OPT_GROUP, .off = BA(dir), .group = cli_bank_dir_opts },
    { .kind = CLI_OPT_SIZE, .name = "--size", .arg = "SIZE", .off = BA(size),
      .help = "gc: evict until the store holds at most SIZE (e.g. 10G)",
      .def = "only orphans" },
    { .kind = CLI_OPT_SIZE, .name = "--to", .arg = "SIZE", .off = BA(size), .help = "the same as --size" },
    { .kind = CLI_OPT_FLAG, .name = "--json", .off = BA(json), .help = "one JSON object instead of text" },
    { .kind = CLI_OPT_STR, .name = "--remote", .alias = "--bank-remote", .arg = "URL", .off = BA(remote),
      .help = "the remote tier instead (or, with --bank-dir, as well): redis://[[user]:password@]host[:port][/db]"
              " or unix:///path/redis.sock[?db=N]" },
    { .kind = CLI_OPT_STR, .name = "--remote-prefix", .alias = "--bank-remote-prefix", .arg = "NAME",
      .off = BA(remote_prefix), .help = "the remote tier's key namespace", .def = "headstart" },
    { .kind = CLI_OPT_I64, .name = "--min-idle", .arg = "SECONDS", .off = BA(min_idle), .min = 0,
      .help = "gc --remote: delete a chunk no manifest names only once Redis says it has been idle this long"
              " (a younger one may be an upload in progress)", .def = CLI_STR(REMOTE_MIN_IDLE_S) },
    { .kind = CLI_OPT_FLAG, .name = "--dry-run", .off = BA(dry_run),
      .help = "verify|gc --remote: count what would be removed, remove nothing" },
    { 0 },
};

static const struct cli_command bank_cmd = {
    .name = "bank",
    .usage = "(stats|ls|verify|gc) [--bank-dir DIR] [--size SIZE] [--json]\n"
             "       headstart bank (stats|ls|verify|gc) --remote URL [--remote-prefix NAME] [--bank-dir DIR]\n"
             "                      [--min-idle SECONDS] [--dry-run] [--json]",
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
    "nothing, while a server holds the directory; gc refuses then, naming its pid.\n"
    "\n"
    "With --remote the subcommand looks at the remote tier, a Redis shared by replicas (with\n"
    "--bank-dir too: at both, the directory first). Redis is read with SCAN, never KEYS, so it\n"
    "is safe next to live replicas:\n"
    "  stats    manifests, chunks, bytes, position sets, orphan chunks (no manifest names\n"
    "           them), chunks missing, broken chains; Redis's maxmemory, maxmemory-policy\n"
    "           and used_memory, with a warning unless the policy is allkeys-lru/-lfu\n"
    "  ls       manifests by fingerprint and position: key, parent, start and end token,\n"
    "           blob bytes, chunks, kind, whether its chain is broken (a parent missing)\n"
    "  verify   fetch every chunk; check it, the blob and the key over the whole token\n"
    "           prefix; remove bad entries with those building on them (exit status 1 when\n"
    "           any was bad)\n"
    "  gc       remove manifests that cannot restore (a chunk or parent missing), chunks no\n"
    "           manifest names once idle --min-idle seconds, positions of entries gone\n",
    .opts = bank_opts,
    .max_pos = 1,
    .too_many_pos = "one subcommand only, got '%s' and '%s' (see --help)",
};

/* The directory's part of a run: its members of the JSON object w (json) or its text.
 * *wrote when it wrote any. The exit status. */
static int disk_part(const char *sub, const char *dir_arg, bool json, int64_t target, struct jsonw *w, bool *wrote)
{
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
    lc.w = w;
    *wrote = true;
    if (json) {
        jsonw_key(w, "dir"); jsonw_str(w, dir);
        stats_json(w, &st, lc.unshared);
    } else {
        printf("bank %s\n", dir);
        print_reconcile(&st, lc.unshared);
    }
    int rc = 0;
    if (!strcmp(sub, "ls")) {
        if (json) {
            jsonw_key(w, "list");
            jsonw_arr_begin(w);
        } else {
            printf("%-16s  %-16s  %10s  %10s  %12s  %12s  %-9s  %-4s  %5s  %6s  %s\n", "key",
                   "fingerprint", "start", "tokens", "bytes", "chain bytes", "kind", "head",
                   "kids", "hits", "last use");
        }
        bank_disk_ls(d, ls_line, &lc);
        if (json) jsonw_arr_end(w);
    } else if (!strcmp(sub, "verify")) {
        struct bank_disk_verify_result vr;
        int vrc = bank_disk_verify(d, &vr, &err);
        rc = vrc == HS_OK && vr.bad == 0 && vr.removed == 0 && vr.bad_rows == 0 && vr.foreign == 0 ? 0 : 1;
        if (json) {
            jsonw_key(w, "verify");
            jsonw_obj_begin(w);
            jsonw_key(w, "checked"); jsonw_uint(w, vr.checked);
            jsonw_key(w, "good"); jsonw_uint(w, vr.good);
            jsonw_key(w, "removed"); jsonw_uint(w, vr.removed);
            jsonw_key(w, "removed_bytes"); jsonw_uint(w, vr.removed_bytes);
            jsonw_key(w, "bad"); jsonw_uint(w, vr.bad);
            jsonw_key(w, "bad_rows"); jsonw_uint(w, vr.bad_rows);
            jsonw_key(w, "foreign"); jsonw_uint(w, vr.foreign);
            jsonw_key(w, "read_only"); jsonw_bool(w, vr.read_only);
            jsonw_obj_end(w);
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
            jsonw_key(w, "gc");
            jsonw_obj_begin(w);
            jsonw_key(w, "target_bytes");
            if (target < 0) jsonw_null(w);
            else jsonw_int(w, target);
            jsonw_key(w, "freed_bytes"); jsonw_uint(w, freed);
            jsonw_key(w, "entries"); jsonw_uint(w, st.entries);
            jsonw_key(w, "bytes"); jsonw_uint(w, st.bytes);
            jsonw_obj_end(w);
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
    bank_disk_close(d);
    hs_free(dir);
    return rc;
}

/* ---- the remote tier ------------------------------------------------------------------ */

struct rls_ctx {
    bool json;
    struct jsonw *w;
};

static bool rls_line(void *ctx, const struct bank_remote_entry *e)
{
    struct rls_ctx *c = ctx;
    if (c->json) {
        struct jsonw *w = c->w;
        ls_entry_json(w, e->key, e->parent, e->fp, e->start, e->pos, e->kind, e->bytes);
        jsonw_key(w, "chunks"); jsonw_uint(w, e->chunks);
        jsonw_key(w, "chain_bytes"); jsonw_uint(w, e->chain_bytes);
        jsonw_key(w, "chain_blobs"); jsonw_int(w, e->chain_blobs);
        jsonw_key(w, "children"); jsonw_int(w, e->children);
        jsonw_key(w, "chain_broken"); jsonw_bool(w, e->chain_broken);
        jsonw_key(w, "chunk_ids");
        jsonw_arr_begin(w);
        for (uint32_t i = 0; i < e->chunks; i++) {
            char h[33];
            for (int b = 0; b < 16; b++) snprintf(h + 2 * b, 3, "%02x", e->chunk_ids[i][b]);
            jsonw_str(w, h);
        }
        jsonw_arr_end(w);
        jsonw_obj_end(w);
        return true;
    }
    printf("%.16s  %-16.16s  %016" PRIx64 "  %10" PRId64 "  %10" PRId64 "  %12" PRIu64 "  %6u  %12" PRIu64
           "  %-9s  %-4s  %5" PRId64 "  %s\n",
           e->key, e->parent[0] ? e->parent : "-", e->fp, e->start, e->pos, e->bytes, e->chunks, e->chain_bytes,
           bank_snap_kind_name(e->kind), e->kind == BANK_SNAP_HEAD ? "yes" : "no", e->children,
           e->chain_broken ? "BROKEN" : "whole");
    return true;
}

static void json_i64_or_null(struct jsonw *w, const char *key, int64_t v)
{
    jsonw_key(w, key);
    if (v < 0) jsonw_null(w);
    else jsonw_int(w, v);
}

static void remote_inventory_out(const struct bank_remote_inventory *iv, const struct bank_remote_stats *st,
                                 const char *warning, bool json, struct jsonw *w)
{
    if (json) {
        jsonw_key(w, "url"); jsonw_str(w, st->url);
        jsonw_key(w, "prefix"); jsonw_str(w, st->prefix);
        jsonw_key(w, "manifests"); jsonw_uint(w, iv->manifests);
        jsonw_key(w, "bad_manifests"); jsonw_uint(w, iv->bad_manifests);
        jsonw_key(w, "chunks"); jsonw_uint(w, iv->chunks);
        jsonw_key(w, "bytes"); jsonw_uint(w, iv->bytes);
        jsonw_key(w, "unshared_bytes"); jsonw_uint(w, iv->unshared_bytes);
        jsonw_key(w, "position_sets"); jsonw_uint(w, iv->position_sets);
        jsonw_key(w, "positions"); jsonw_uint(w, iv->positions);
        jsonw_key(w, "orphan_chunks"); jsonw_uint(w, iv->orphan_chunks);
        jsonw_key(w, "orphan_bytes"); jsonw_uint(w, iv->orphan_bytes);
        jsonw_key(w, "missing_chunks"); jsonw_uint(w, iv->missing_chunks);
        jsonw_key(w, "incomplete"); jsonw_uint(w, iv->incomplete);
        jsonw_key(w, "broken_chains"); jsonw_uint(w, iv->broken_chains);
        jsonw_key(w, "unfindable"); jsonw_uint(w, iv->unfindable);
        jsonw_key(w, "stale_positions"); jsonw_uint(w, iv->stale_positions);
        jsonw_key(w, "foreign_keys"); jsonw_uint(w, iv->foreign_keys);
        jsonw_key(w, "redis");
        jsonw_obj_begin(w);
        json_i64_or_null(w, "maxmemory", iv->maxmemory);
        jsonw_key(w, "maxmemory_policy");
        if (iv->policy[0]) jsonw_str(w, iv->policy);
        else jsonw_null(w);
        json_i64_or_null(w, "used_memory", iv->used_memory);
        jsonw_obj_end(w);
        jsonw_key(w, "warning");
        if (warning) jsonw_str(w, warning);
        else jsonw_null(w);
        return;
    }
    char b[32], u[32], m[32];
    printf("remote %s, prefix %s\n", st->url, st->prefix);
    printf("manifests %" PRIu64 ", chunks %" PRIu64 ", %s (%" PRIu64 " bytes; %s if no stretch were shared),"
           " position sets %" PRIu64 " (%" PRIu64 " positions)\n",
           iv->manifests, iv->chunks, hs_format_size(iv->bytes, b, sizeof b), iv->bytes,
           hs_format_size(iv->unshared_bytes, u, sizeof u), iv->position_sets, iv->positions);
    printf("orphan chunks %" PRIu64 " (%" PRIu64 " bytes), chunks missing %" PRIu64 " (in %" PRIu64
           " manifests), broken chains %" PRIu64 ", unfindable %" PRIu64 ", stale positions %" PRIu64
           ", undecodable manifests %" PRIu64 ", foreign keys %" PRIu64 "\n",
           iv->orphan_chunks, iv->orphan_bytes, iv->missing_chunks, iv->incomplete, iv->broken_chains,
           iv->unfindable, iv->stale_positions, iv->bad_manifests, iv->foreign_keys);
    printf("redis: maxmemory %s, maxmemory-policy %s, used_memory %s\n",
           iv->maxmemory < 0 ? "unknown" : iv->maxmemory == 0 ? "0 (no limit)" : hs_format_size((uint64_t)iv->maxmemory, m, sizeof m),
           iv->policy[0] ? iv->policy : "unknown",
           iv->used_memory < 0 ? "unknown" : hs_format_size((uint64_t)iv->used_memory, u, sizeof u));
    if (warning) printf("warning: %s\n", warning);
}

/* The remote tier's part of a run, as disk_part. */
static int remote_part(const char *sub, const struct bank_args *a, bool json, struct jsonw *w, bool *wrote)
{
    struct bank_remote_opts ro;
    bank_remote_opts_default(&ro);
    ro.url = a->remote;
    if (a->remote_prefix) ro.prefix = a->remote_prefix;
    ro.timeout_ms = REMOTE_TOOL_TIMEOUT_MS;
    struct hs_err err;
    hs_err_clear(&err);
    /* the tier's own words for an outage ("serving from the local tiers") are a server's:
     * this command says it its way */
    enum hs_log_level lvl = hs_log_get_level();
    if (lvl < HS_LOG_ERROR) hs_log_set_level(HS_LOG_ERROR);
    struct bank_remote *r = bank_remote_open(&ro, NULL, &err);
    if (!r) {
        hs_log_set_level(lvl);
        fprintf(stderr, "headstart bank: %s\n", err.msg);
        return 2; /* only a malformed URL or prefix gets here */
    }
    struct bank_remote_stats st;
    bank_remote_stats_get(r, &st);
    if (!st.up) {
        bank_remote_close(r); /* its thread may still be logging the failure: joined first */
        hs_log_set_level(lvl);
        fprintf(stderr, "headstart bank: --remote %s: Redis is unreachable (%s)\n", st.url,
                st.last_error[0] ? st.last_error : "no answer");
        return 1;
    }
    hs_log_set_level(lvl);
    int rc = 0, vrc = HS_OK;
    struct bank_remote_inventory iv;
    vrc = bank_remote_inventory_get(r, &iv, &err);
    if (vrc != HS_OK) {
        fprintf(stderr, "headstart bank: --remote: %s\n", err.msg);
        bank_remote_close(r);
        return 1;
    }
    const char *warning = bank_remote_policy_warning(iv.policy, iv.maxmemory);
    *wrote = true;
    if (json) {
        jsonw_key(w, "remote");
        jsonw_obj_begin(w);
        if (warning) fprintf(stderr, "headstart bank: --remote %s: warning: %s\n", st.url, warning);
    } else {
        printf("%s", a->dir ? "\n" : "");
    }
    remote_inventory_out(&iv, &st, warning, json, w);
    if (!strcmp(sub, "ls")) {
        struct rls_ctx lc = { json, w };
        if (json) {
            jsonw_key(w, "list");
            jsonw_arr_begin(w);
        } else {
            printf("%-16s  %-16s  %-16s  %10s  %10s  %12s  %6s  %12s  %-9s  %-4s  %5s  %s\n", "key", "parent",
                   "fingerprint", "start", "tokens", "bytes", "chunks", "chain bytes", "kind", "head", "kids", "chain");
        }
        if (bank_remote_ls(r, rls_line, &lc, &err) < 0) vrc = err.code;
        if (json) jsonw_arr_end(w);
    } else if (!strcmp(sub, "verify")) {
        struct bank_remote_verify_result vr;
        vrc = bank_remote_verify(r, a->dry_run, &vr, &err);
        if (vr.bad || vr.bad_manifests) rc = 1;
        if (json) {
            jsonw_key(w, "verify");
            jsonw_obj_begin(w);
            jsonw_key(w, "checked"); jsonw_uint(w, vr.checked);
            jsonw_key(w, "good"); jsonw_uint(w, vr.good);
            jsonw_key(w, "bad"); jsonw_uint(w, vr.bad);
            jsonw_key(w, "bad_manifests"); jsonw_uint(w, vr.bad_manifests);
            jsonw_key(w, "missing_chunks"); jsonw_uint(w, vr.missing_chunks);
            jsonw_key(w, "bad_chunks"); jsonw_uint(w, vr.bad_chunks);
            jsonw_key(w, "removed"); jsonw_uint(w, vr.removed);
            jsonw_key(w, "removed_chunks"); jsonw_uint(w, vr.removed_chunks);
            jsonw_key(w, "positions_removed"); jsonw_uint(w, vr.positions_removed);
            jsonw_key(w, "dry_run"); jsonw_bool(w, a->dry_run);
            jsonw_obj_end(w);
        } else {
            printf("verify: checked %" PRIu64 ", good %" PRIu64 ", bad %" PRIu64 " (first failing chunk missing %" PRIu64
                   ", altered %" PRIu64 "), undecodable manifests %" PRIu64 "; removed %" PRIu64 " manifests, %" PRIu64
                   " chunks, %" PRIu64 " positions%s\n",
                   vr.checked, vr.good, vr.bad, vr.missing_chunks, vr.bad_chunks, vr.bad_manifests, vr.removed,
                   vr.removed_chunks, vr.positions_removed, a->dry_run ? " (--dry-run: nothing removed)" : "");
        }
        if (vrc == HS_OK && (vr.bad || vr.bad_manifests))
            fprintf(stderr, "headstart bank: verify --remote: %" PRIu64 " bad or dependent entries, %" PRIu64
                            " undecodable manifests%s\n", vr.bad, vr.bad_manifests,
                    a->dry_run ? " (--dry-run: left in place)" : "; removed");
    } else if (!strcmp(sub, "gc")) {
        struct bank_remote_gc_result gr;
        vrc = bank_remote_gc(r, a->min_idle >= 0 ? a->min_idle : REMOTE_MIN_IDLE_S, a->dry_run, &gr, &err);
        if (json) {
            jsonw_key(w, "gc");
            jsonw_obj_begin(w);
            jsonw_key(w, "min_idle_s"); jsonw_int(w, gr.min_idle_s);
            jsonw_key(w, "orphan_chunks"); jsonw_uint(w, gr.orphan_chunks);
            jsonw_key(w, "removed_chunks"); jsonw_uint(w, gr.removed_chunks);
            jsonw_key(w, "removed_chunk_bytes"); jsonw_uint(w, gr.removed_chunk_bytes);
            jsonw_key(w, "young_chunks"); jsonw_uint(w, gr.young_chunks);
            jsonw_key(w, "untimed_chunks"); jsonw_uint(w, gr.untimed_chunks);
            jsonw_key(w, "bad_manifests"); jsonw_uint(w, gr.bad_manifests);
            jsonw_key(w, "missing_chunk_manifests"); jsonw_uint(w, gr.missing_chunk_manifests);
            jsonw_key(w, "broken_chain_manifests"); jsonw_uint(w, gr.broken_chain_manifests);
            jsonw_key(w, "removed_manifests"); jsonw_uint(w, gr.removed_manifests);
            jsonw_key(w, "positions_added"); jsonw_uint(w, gr.positions_added);
            jsonw_key(w, "positions_removed"); jsonw_uint(w, gr.positions_removed);
            jsonw_key(w, "dry_run"); jsonw_bool(w, a->dry_run);
            jsonw_obj_end(w);
        } else {
            char b[32];
            printf("gc: orphan chunks %" PRIu64 ": removed %" PRIu64 " (%s), kept %" PRIu64 " idle < %" PRId64
                   " s, %" PRIu64 " with no idle time; manifests removed %" PRIu64 " (undecodable %" PRIu64
                   ", a chunk missing %" PRIu64 ", a broken chain %" PRIu64 "); positions added %" PRIu64
                   ", removed %" PRIu64 "%s\n",
                   gr.orphan_chunks, gr.removed_chunks, hs_format_size(gr.removed_chunk_bytes, b, sizeof b),
                   gr.young_chunks, gr.min_idle_s, gr.untimed_chunks, gr.removed_manifests, gr.bad_manifests,
                   gr.missing_chunk_manifests, gr.broken_chain_manifests, gr.positions_added, gr.positions_removed,
                   a->dry_run ? " (--dry-run: nothing changed)" : "");
        }
        if (gr.untimed_chunks)
            fprintf(stderr, "headstart bank: gc --remote: %" PRIu64 " orphan chunks kept: Redis keeps no idle time"
                            " under this policy (%s), so none can be told apart from an upload in progress\n",
                    gr.untimed_chunks, gr.untimed_reason);
    }
    if (json) jsonw_obj_end(w);
    if (vrc != HS_OK) {
        fprintf(stderr, "headstart bank: --remote %s: %s: %s\n", st.url, sub, err.msg);
        rc = 1;
    }
    bank_remote_close(r);
    return rc;
}

int cmd_bank(int argc, char **argv)
{
    struct bank_args a = { .size = -1, .min_idle = -1 };
    const char *pos[CLI_POS_MAX];
    int n_pos = 0;
    int pr = cli_parse(&bank_cmd, argc, argv, &a, pos, &n_pos);
    if (pr != CLI_PARSE_OK) return pr == CLI_PARSE_HELP ? 0 : 2;
    const char *sub = n_pos ? pos[0] : NULL;
    bool json = a.json;
    if (!sub || (strcmp(sub, "stats") && strcmp(sub, "ls") && strcmp(sub, "verify") &&
                 strcmp(sub, "gc"))) {
        if (sub) fprintf(stderr, "headstart bank: unknown subcommand '%s'; need one of stats, ls, verify, gc (see --help)\n", sub);
        else fprintf(stderr, "headstart bank: need one of stats, ls, verify, gc (see --help)\n");
        return 2;
    }
    int64_t target = a.size;
    /* the directory when there is no --remote, or when both are named */
    bool do_disk = !a.remote || a.dir, do_remote = a.remote != NULL;
    if (target >= 0 && strcmp(sub, "gc")) { fprintf(stderr, "headstart bank: --size is for gc\n"); return 2; }
    if (target >= 0 && !do_disk) {
        fprintf(stderr, "headstart bank: --size is for a --bank-dir (Redis evicts by its own maxmemory policy)\n");
        return 2;
    }
    if (!do_remote && (a.remote_prefix || a.min_idle >= 0 || a.dry_run)) {
        fprintf(stderr, "headstart bank: %s is for --remote\n",
                a.remote_prefix ? "--remote-prefix" : a.min_idle >= 0 ? "--min-idle" : "--dry-run");
        return 2;
    }
    if (a.min_idle >= 0 && strcmp(sub, "gc")) { fprintf(stderr, "headstart bank: --min-idle is for gc\n"); return 2; }
    if (a.dry_run && strcmp(sub, "gc") && strcmp(sub, "verify")) {
        fprintf(stderr, "headstart bank: --dry-run is for verify and gc\n");
        return 2;
    }
    if (do_remote) {
        struct hs_err uerr;
        hs_err_clear(&uerr);
        if (bank_remote_url_check(a.remote, &uerr) != HS_OK) {
            fprintf(stderr, "headstart bank: %s\n", uerr.msg);
            return 2;
        }
    }
    struct strbuf sb;
    strbuf_init(&sb);
    struct jsonw w;
    jsonw_init(&w, &sb, 0);
    jsonw_obj_begin(&w);
    bool wrote = false;
    int rc = 0;
    if (do_disk) rc = disk_part(sub, a.dir, json, target, &w, &wrote);
    if (do_remote && rc != 2) {
        int rrc = remote_part(sub, &a, json, &w, &wrote);
        if (rrc > rc) rc = rrc;
    }
    if (json && wrote) {
        jsonw_obj_end(&w);
        printf("%.*s\n", (int)sb.len, sb.buf ? sb.buf : "");
    }
    strbuf_free(&sb);
    return rc;
}
