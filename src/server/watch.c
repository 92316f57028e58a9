/*
 * watch.c — the served model's identity and its files, for the bank's sake: the digest
 * that opens the disk tier to this model (model_identity_compute, with its per-file cache
 * in BANK_DIR/model-ids), computed at start when it is cheap and in the background when it
 * is not, and the log line and metrics when a model file changes under the server.
 *
 * Design note
 * -----------
 * The disk tier is keyed by the engine's persistent fingerprint, which exists only once
 * the engine has the model identity (engine.h). At start (sched_start, before the engine
 * thread exists and before the server says it is ready) watch_start asks for the identity
 * with at most WATCH_SYNC_BYTES left to hash after the cache: a cached digest or a small
 * model is known before the first request. Otherwise a thread hashes the files (reading
 * them once: disk speed the first time, the page cache after) while requests are served
 * from the RAM bank only (session.c skips the disk tier: report bank_off
 * "model_identity_unknown", /metrics headstart_model_identity{state="pending"}); the
 * engine thread hands the digest to the engine before its next job (watch_poll).
 *
 *   off (no disk tier) | pending ──hashed──> known ──(engine thread) applied
 *                          └──I/O error, file changed──> failed (disk tier off for good)
 *
 * Invariants:
 *   1. Only the engine thread calls engine_set_identity (watch_start runs before that
 *      thread starts): the engine keeps one owner (sched.c invariant 1).
 *   2. The hashing thread only reads: the weight files through their mappings (which
 *      also warms them for the first request), the small files through descriptors of
 *      its own (digest.c); watch_stop stops it within one 4 MiB piece and joins it before
 *      the model can be freed (sched_stop runs before model_free).
 *   3. A model file changed in place is logged once (the first request that sees it) and
 *      counted per request in /metrics; the bank stays off for the model from then on
 *      (session.c checks before every restore and insert).
 */
#include "server/server_int.h"

#include "sys/sys.h"

#include <string.h>

#define WATCH_SYNC_BYTES (256ull << 20) /* hashed at start: ~0.1 s from the page cache */

static bool watch_stopping(void *ctx)
{
    struct model_watch *w = ctx;
    return atomic_load(&w->stop);
}

static void watch_opts(struct model_watch *w, struct model_identity_opts *o)
{
    model_identity_opts_default(o);
    o->cache_dir = w->cache_dir;
    o->stop = watch_stopping;
    o->stop_ctx = w;
}

static void watch_log_known(const struct model_watch *w, const char *how)
{
    char hex[33];
    model_identity_hex(&w->id, hex);
    log_info("serve: model identity %s (%d files, %d digests cached, %.1f MB hashed in %.3f s%s): the disk tier "
             "is open to this model",
             hex, w->id.n_files, w->id.n_cached, (double)w->id.bytes_hashed / 1e6, w->id.seconds, how);
}

static void *watch_main(void *arg)
{
    struct server *srv = arg;
    struct model_watch *w = &srv->watch;
    struct model_identity_opts o;
    watch_opts(w, &o);
    struct hs_err err;
    hs_err_clear(&err);
    int rc = model_identity_compute(srv->model, &o, &w->id, &err);
    if (rc == HS_OK) {
        atomic_store(&w->state, WATCH_KNOWN);
        watch_log_known(w, ", in the background");
    } else {
        snprintf(w->error, sizeof(w->error), "%s", err.msg);
        atomic_store(&w->state, WATCH_FAILED);
        if (!atomic_load(&w->stop))
            log_warn("serve: model identity failed: %s; the bank's disk tier stays off for this model", err.msg);
    }
    return NULL;
}

void watch_start(struct server *srv)
{
    struct model_watch *w = &srv->watch;
    atomic_init(&w->stop, false);
    atomic_init(&w->state, WATCH_OFF);
    srv->metrics.identity_state = &w->state;
    if (!srv->engine || !srv->model || !srv->disk) return; /* no disk tier: nothing waits on it */
    char *dir = srv->opts.bank_dir ? hs_strdup(srv->opts.bank_dir) : bank_disk_default_dir();
    if (dir) w->cache_dir = sys_path_join(dir, "model-ids");
    hs_free(dir);
    struct model_identity_opts o;
    watch_opts(w, &o);
    o.max_hash_bytes = w->sync_max ? w->sync_max : WATCH_SYNC_BYTES;
    struct hs_err err;
    hs_err_clear(&err);
    int rc = model_identity_compute(srv->model, &o, &w->id, &err);
    if (rc == HS_OK) {
        engine_set_identity(srv->engine, w->id.digest); /* the engine thread does not exist yet */
        w->applied = true;
        atomic_store(&w->state, WATCH_KNOWN);
        watch_log_known(w, ", at start");
        return;
    }
    if (rc != HS_ERR_LIMIT) {
        snprintf(w->error, sizeof(w->error), "%s", err.msg);
        atomic_store(&w->state, WATCH_FAILED);
        log_warn("serve: model identity failed: %s; the bank's disk tier stays off for this model", err.msg);
        return;
    }
    atomic_store(&w->state, WATCH_PENDING);
    log_info("serve: hashing the model in the background (%s); the bank's disk tier opens to it when done",
             err.msg);
    if (pthread_create(&w->thread, NULL, watch_main, srv) == 0) {
        w->thread_started = true;
    } else {
        snprintf(w->error, sizeof(w->error), "cannot start the hashing thread");
        atomic_store(&w->state, WATCH_FAILED);
        log_warn("serve: cannot start the model hashing thread; the bank's disk tier stays off for this model");
    }
}

void watch_poll(struct server *srv)
{
    struct model_watch *w = &srv->watch;
    if (w->applied || atomic_load(&w->state) != WATCH_KNOWN || !srv->engine) return;
    engine_set_identity(srv->engine, w->id.digest);
    w->applied = true;
}

void watch_report(struct server *srv, const struct session_report *r)
{
    struct model_watch *w = &srv->watch;
    struct hs_err err;
    hs_err_clear(&err);
    /* also after a failed request (a truncated file fails it: no report) */
    bool changed = srv->model && model_files_check(srv->model, &err) != HS_OK;
    if (changed && !w->changed_logged) {
        w->changed_logged = true;
        log_warn("serve: %s; the bank is off for this model until then", err.msg);
    }
    bool off_changed = r && r->bank_off == SESSION_BANK_OFF_MODEL_CHANGED;
    bool off_unknown = r && r->bank_off == SESSION_BANK_OFF_IDENTITY_UNKNOWN;
    pthread_mutex_lock(&srv->metrics.mu);
    srv->metrics.bank_off[0] += off_changed;
    srv->metrics.bank_off[1] += off_unknown;
    if (changed) srv->metrics.model_changed = true;
    pthread_mutex_unlock(&srv->metrics.mu);
}

void watch_stop(struct server *srv)
{
    struct model_watch *w = &srv->watch;
    atomic_store(&w->stop, true);
    if (w->thread_started) pthread_join(w->thread, NULL);
    w->thread_started = false;
    hs_free(w->cache_dir);
    w->cache_dir = NULL;
}
