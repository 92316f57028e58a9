/*
 * cmd_replay.c — `headstart replay`: requests from a JSONL file run in order through the
 * request path the server uses (server/session.c), one bank shared by all of them, one
 * JSON report line per request on stdout and the bank's statistics on stderr at the end.
 * Greedy by default, so a run with the bank and one with --no-bank are comparable token
 * for token (and by first_logits_sha256). The bank's disk tier (--bank-dir) is opened at
 * start and closed at exit (every queued write drained), so a later process restores what
 * this one banked.
 */
#include "cmd.h"
#include "bank/bank.h"
#include "engine/engine.h"
#include "model/model.h"
#include "server/server.h"
#include "sys/sys.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char replay_help[] =
    "usage: headstart replay -m MODEL --requests FILE.jsonl [--bank-ram SIZE] [--no-bank]\n"
    "         [--no-head-anchor] [--max-tokens N] [--seed S] [--threads N] [--temp T]\n"
    "         [--grid N] [--snap-cap N] [--min-head N] [--bank-dir DIR] [--bank-disk SIZE]\n"
    "         [--no-bank-disk]\n"
    "\n"
    "Each line of FILE is {\"api\":\"openai\"|\"anthropic\",\"body\":{...}} (a request body). The\n"
    "requests run in order through one session bank: render, restore, prefill, generate,\n"
    "bank. One JSON line per request on stdout (prompt_tokens, cached_tokens, cache_source,\n"
    "head_tokens, restore_reason, stop_reason, output_ids, first_logits_sha256, prefill_ms,\n"
    "ttft_ms, ...; stop_sequence when a body's stop / stop_sequences string ended it,\n"
    "forced_text when its tool_choice forced a call); the bank statistics as one JSON line\n"
    "on stderr at the end.\n"
    "--bank-ram defaults to 1/4 of the machine's memory; --max-tokens overrides the bodies'\n"
    "max_tokens (default 256 when a body has none); --temp defaults to 0 (greedy).\n"
    "The disk tier lives in --bank-dir (default $XDG_CACHE_HOME/headstart/bank, else\n"
    "~/.cache/headstart/bank); --bank-disk caps it (default 20% of the free space there, at\n"
    "most 64G); --no-bank-disk turns it off (--no-bank turns off both tiers).\n";

static void disk_stats_json(struct jsonw *w, const struct bank_disk_stats *d)
{
    jsonw_key(w, "bank_disk_stats");
    jsonw_obj_begin(w);
    jsonw_key(w, "entries"); jsonw_uint(w, d->entries);
    jsonw_key(w, "bytes"); jsonw_uint(w, d->bytes);
    jsonw_key(w, "cap_bytes"); jsonw_uint(w, d->cap_bytes);
    jsonw_key(w, "free_floor_bytes"); jsonw_uint(w, d->free_floor_bytes);
    jsonw_key(w, "pending"); jsonw_uint(w, d->pending);
    jsonw_key(w, "puts"); jsonw_uint(w, d->puts);
    jsonw_key(w, "written"); jsonw_uint(w, d->written);
    jsonw_key(w, "written_bytes"); jsonw_uint(w, d->written_bytes);
    jsonw_key(w, "already_stored"); jsonw_uint(w, d->already_stored);
    jsonw_key(w, "dropped_queue_full"); jsonw_uint(w, d->dropped_queue_full);
    jsonw_key(w, "skipped_too_big"); jsonw_uint(w, d->skipped_too_big);
    jsonw_key(w, "skipped_low_disk"); jsonw_uint(w, d->skipped_low_disk);
    jsonw_key(w, "skipped_off"); jsonw_uint(w, d->skipped_off);
    jsonw_key(w, "lookups"); jsonw_uint(w, d->lookups);
    jsonw_key(w, "hits"); jsonw_uint(w, d->hits);
    jsonw_key(w, "hit_tokens"); jsonw_uint(w, d->hit_tokens);
    jsonw_key(w, "misses"); jsonw_uint(w, d->misses);
    jsonw_key(w, "discarded");
    jsonw_obj_begin(w);
    jsonw_key(w, "bad_checksum"); jsonw_uint(w, d->bad_checksum);
    jsonw_key(w, "bad_header"); jsonw_uint(w, d->bad_header);
    jsonw_key(w, "bad_identity"); jsonw_uint(w, d->bad_identity);
    jsonw_key(w, "bad_tokens"); jsonw_uint(w, d->bad_tokens);
    jsonw_key(w, "bad_size"); jsonw_uint(w, d->bad_size);
    jsonw_key(w, "missing_files"); jsonw_uint(w, d->missing_files);
    jsonw_obj_end(w);
    jsonw_key(w, "evicted"); jsonw_uint(w, d->evicted);
    jsonw_key(w, "evicted_bytes"); jsonw_uint(w, d->evicted_bytes);
    jsonw_key(w, "io_errors"); jsonw_uint(w, d->io_errors);
    jsonw_key(w, "disabled"); jsonw_bool(w, d->disabled);
    if (d->disabled) { jsonw_key(w, "disabled_reason"); jsonw_str(w, d->disabled_reason); }
    jsonw_obj_end(w);
}

/* One line: {"bank_stats":{...}} plus "bank_disk_stats" when the disk tier was open (one
 * line, so `tail -1` of stderr is always the whole summary). */
static void stats_json(const struct bank_stats *st, const struct bank_disk_stats *dst, struct strbuf *sb)
{
    struct jsonw w;
    jsonw_init(&w, sb, 0);
    jsonw_obj_begin(&w);
    jsonw_key(&w, "bank_stats");
    jsonw_obj_begin(&w);
    jsonw_key(&w, "nodes"); jsonw_uint(&w, st->n_nodes);
    jsonw_key(&w, "tokens"); jsonw_uint(&w, st->n_tokens);
    jsonw_key(&w, "snapshots"); jsonw_uint(&w, st->n_snaps);
    jsonw_key(&w, "snapshots_by_kind");
    jsonw_obj_begin(&w);
    for (int k = 0; k < BANK_SNAP_KIND_COUNT; k++) {
        jsonw_key(&w, bank_snap_kind_name((enum bank_snap_kind)k));
        jsonw_uint(&w, st->snaps_by_kind[k]);
    }
    jsonw_obj_end(&w);
    jsonw_key(&w, "kv_bytes"); jsonw_uint(&w, st->kv_bytes);
    jsonw_key(&w, "snapshot_bytes"); jsonw_uint(&w, st->snap_bytes);
    jsonw_key(&w, "token_bytes"); jsonw_uint(&w, st->token_bytes);
    jsonw_key(&w, "total_bytes"); jsonw_uint(&w, st->total_bytes);
    jsonw_key(&w, "budget"); jsonw_uint(&w, st->budget);
    jsonw_key(&w, "lookups"); jsonw_uint(&w, st->lookups);
    jsonw_key(&w, "hits"); jsonw_uint(&w, st->hits);
    jsonw_key(&w, "restored_tokens"); jsonw_uint(&w, st->restored_tokens);
    jsonw_key(&w, "misses");
    jsonw_obj_begin(&w);
    for (int r = 0; r < BANK_REASON_COUNT; r++) {
        jsonw_key(&w, bank_reason_name((enum bank_reason)r));
        jsonw_uint(&w, st->misses[r]);
    }
    jsonw_obj_end(&w);
    jsonw_key(&w, "evictions");
    jsonw_obj_begin(&w);
    for (int r = 0; r < BANK_EVICT_COUNT; r++) {
        jsonw_key(&w, bank_evict_reason_name((enum bank_evict_reason)r));
        jsonw_uint(&w, st->evictions[r]);
    }
    jsonw_obj_end(&w);
    jsonw_key(&w, "inserts"); jsonw_uint(&w, st->inserts);
    jsonw_obj_end(&w);
    if (dst) disk_stats_json(&w, dst);
    jsonw_obj_end(&w);
}

/* The engine's model identity, for the disk tier's key space (engine.h): hashed here, at
 * start (a replay is short; the server hashes big models in the background), with the
 * per-file digest cache in DIR/model-ids. A failure only keeps the disk tier unused. */
static void identify(struct engine *e, const struct model *m, const char *dir)
{
    struct model_identity_opts o;
    model_identity_opts_default(&o);
    char *cache = sys_path_join(dir, "model-ids");
    o.cache_dir = cache;
    struct model_identity id;
    struct hs_err err;
    hs_err_clear(&err);
    if (model_identity_compute(m, &o, &id, &err) == HS_OK) engine_set_identity(e, id.digest);
    else fprintf(stderr, "headstart replay: model identity failed, disk tier unused: %s\n", err.msg);
    hs_free(cache);
}

/* Open the disk tier; a directory that cannot be used only turns the tier off (the run
 * goes on with the RAM bank), as an I/O error later would. */
static struct bank_disk *open_disk(const char *dir_arg, int64_t cap, struct engine *e, const struct model *m)
{
    char *dir = dir_arg ? hs_strdup(dir_arg) : bank_disk_default_dir();
    if (!dir) {
        fprintf(stderr, "headstart replay: no --bank-dir and no HOME or XDG_CACHE_HOME: disk tier off\n");
        return NULL;
    }
    struct bank_disk_opts o;
    bank_disk_opts_default(&o);
    o.cap_bytes = bank_disk_cap_for(dir, cap);
    struct hs_err err;
    hs_err_clear(&err);
    struct bank_disk *d = bank_disk_open(dir, &o, &err);
    char buf[32];
    if (!d) fprintf(stderr, "headstart replay: disk tier off: %s\n", err.msg);
    else fprintf(stderr, "headstart replay: bank disk %s, cap %s\n", dir, hs_format_size(o.cap_bytes, buf, sizeof(buf)));
    if (d) identify(e, m, dir);
    hs_free(dir);
    return d;
}

int cmd_replay(int argc, char **argv)
{
    const char *model_path = NULL, *req_path = NULL;
    int64_t threads = 1, iv;
    bool use_bank = true, use_disk = true;
    const char *bank_dir = NULL;
    int64_t disk_cap = -1;
    struct bank_opts bo;
    bank_opts_default(&bo);
    bool ram_given = false;
    struct session_opts so = { 0 };
    sampler_opts_default(&so.sampling);
    so.sampling.temperature = 0.0f;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(replay_help, stdout); return 0; }
        if (!strcmp(a, "--no-bank")) { use_bank = false; continue; }
        if (!strcmp(a, "--no-head-anchor")) { bo.head_anchor = false; continue; }
        if (!strcmp(a, "--no-bank-disk")) { use_disk = false; continue; }
        if (i + 1 >= argc) { fprintf(stderr, "headstart replay: %s needs a value (see --help)\n", a); return 2; }
        const char *v = argv[++i];
        if (!strcmp(a, "-m") || !strcmp(a, "--model")) model_path = v;
        else if (!strcmp(a, "--requests")) req_path = v;
        else if (!strcmp(a, "--threads")) { if (cmd_parse_i64("replay", a, v, &threads) || threads < 1) return 2; }
        else if (!strcmp(a, "--max-tokens")) { if (cmd_parse_i64("replay", a, v, &so.max_tokens)) return 2; }
        else if (!strcmp(a, "--seed")) { if (cmd_parse_i64("replay", a, v, &iv)) return 2; so.sampling.seed = (uint64_t)iv; }
        else if (!strcmp(a, "--grid")) { if (cmd_parse_i64("replay", a, v, &bo.grid)) return 2; }
        else if (!strcmp(a, "--min-head")) { if (cmd_parse_i64("replay", a, v, &bo.min_head)) return 2; }
        else if (!strcmp(a, "--snap-cap")) {
            if (cmd_parse_i64("replay", a, v, &iv) || iv < 2 || iv > 1000) { fprintf(stderr, "headstart replay: --snap-cap wants 2..1000\n"); return 2; }
            bo.snap_cap = (int)iv;
        } else if (!strcmp(a, "--temp")) {
            char *end;
            errno = 0;
            so.sampling.temperature = strtof(v, &end);
            if (!*v || *end || errno || so.sampling.temperature < 0) { fprintf(stderr, "headstart replay: --temp wants a number >= 0, got '%s'\n", v); return 2; }
        } else if (!strcmp(a, "--bank-ram")) {
            int64_t b = hs_parse_size(v);
            if (b < 0) { fprintf(stderr, "headstart replay: --bank-ram wants a size like 512M or 8G, got '%s'\n", v); return 2; }
            bo.ram_budget = (uint64_t)b;
            ram_given = true;
        } else if (!strcmp(a, "--bank-dir")) {
            if (!*v) { fprintf(stderr, "headstart replay: --bank-dir wants a directory\n"); return 2; }
            bank_dir = v;
        } else if (!strcmp(a, "--bank-disk")) {
            disk_cap = hs_parse_size(v);
            if (disk_cap <= 0) { fprintf(stderr, "headstart replay: --bank-disk wants a size like 20G, got '%s'\n", v); return 2; }
        } else { fprintf(stderr, "headstart replay: unknown option '%s' (see --help)\n", a); return 2; }
    }
    if (!model_path || !req_path) { fprintf(stderr, "headstart replay: -m MODEL and --requests FILE are required (see --help)\n"); return 2; }
    if (!ram_given) bo.ram_budget = sys_mem_total_bytes() / 4;

    struct hs_err err;
    hs_err_clear(&err);
    char *data = NULL;
    size_t len = 0;
    if (sys_file_read_all(req_path, 1ull << 30, &data, &len, &err) != HS_OK) {
        fprintf(stderr, "headstart replay: %s\n", err.msg);
        return 1;
    }
    struct model *m = NULL;
    struct model_text mt = { 0 };
    struct engine *e = NULL;
    struct engine_opts eo;
    engine_opts_default(&eo);
    eo.n_threads = (int)threads;
    if (model_load(model_path, &m, &err) != HS_OK || model_text_load(m, &mt, &err) != HS_OK ||
        engine_new(m, &eo, &e, &err) != HS_OK) {
        fprintf(stderr, "headstart replay: %s\n", err.msg);
        model_text_free(&mt);
        model_free(m);
        hs_free(data);
        return 1;
    }
    struct bank *bank = use_bank ? bank_init(&bo) : NULL;
    if (bank) {
        char buf[32];
        fprintf(stderr, "headstart replay: bank budget %s, head anchor %s (min %lld tokens), grid %lld, cap %d\n",
                hs_format_size(bo.ram_budget, buf, sizeof(buf)), bo.head_anchor ? "on" : "off",
                (long long)bo.min_head, (long long)bo.grid, bo.snap_cap);
    }
    if (bank && use_disk) so.disk = open_disk(bank_dir, disk_cap, e, m);
    int rc = 0;
    int64_t line_no = 0;
    struct strbuf sb;
    strbuf_init(&sb);
    for (char *p = data; p && *p && !rc;) {
        char *nl = strchr(p, '\n');
        size_t ll = nl ? (size_t)(nl - p) : strlen(p);
        char *next = nl ? nl + 1 : NULL;
        line_no++;
        const char *q = p;
        while (q < p + ll && (*q == ' ' || *q == '\t' || *q == '\r')) q++;
        if (q == p + ll) { p = next; continue; }
        json_error_t je;
        json_t *root = json_loadb(p, ll, 0, &je);
        p = next;
        json_t *api = root ? json_object_get(root, "api") : NULL, *body = root ? json_object_get(root, "body") : NULL;
        const char *api_s = json_string_value(api);
        if (!root || !api_s || !json_is_object(body) || (strcmp(api_s, "openai") && strcmp(api_s, "anthropic"))) {
            fprintf(stderr, "headstart replay: %s:%lld: %s\n", req_path, (long long)line_no,
                    !root ? je.text : "want {\"api\":\"openai\"|\"anthropic\",\"body\":{...}}");
            json_decref(root);
            rc = 1;
            break;
        }
        struct session_report r;
        enum api_kind kind = !strcmp(api_s, "anthropic") ? API_KIND_ANTHROPIC_MESSAGES : API_KIND_OPENAI_CHAT;
        int src = session_run(e, &mt, bank, kind, body, &so, NULL, NULL, &r, &err);
        json_decref(root);
        if (src != HS_OK) {
            fprintf(stderr, "headstart replay: %s:%lld: %s\n", req_path, (long long)line_no, err.msg);
            rc = 1;
            break;
        }
        sb.len = 0;
        session_report_json(&r, &sb);
        fwrite(sb.buf, 1, sb.len, stdout);
        fputc('\n', stdout);
        fflush(stdout);
        session_report_free(&r);
    }
    struct bank_disk_stats dst;
    bool had_disk = so.disk != NULL;
    if (so.disk) {
        /* drain the queue first, so the stats count every write this run made */
        bank_disk_flush(so.disk);
        bank_disk_stats_get(so.disk, &dst);
        bank_disk_close(so.disk);
        so.disk = NULL;
    }
    if (bank) {
        struct bank_stats st;
        bank_stats_get(bank, &st);
        sb.len = 0;
        stats_json(&st, had_disk ? &dst : NULL, &sb);
        fwrite(sb.buf, 1, sb.len, stderr);
        fputc('\n', stderr);
    }
    strbuf_free(&sb);
    bank_free(bank);
    engine_free(e);
    model_text_free(&mt);
    model_free(m);
    hs_free(data);
    return rc;
}
