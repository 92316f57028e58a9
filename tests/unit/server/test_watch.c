/* test_watch.c — the served model's identity (watch.c) with a disk tier: known at start
 * when the hash is small (the engine has its persistent fingerprint before any request);
 * hashed in the background otherwise, the disk tier skipped by session_run until the
 * engine thread applies the digest (report bank_off "model_identity_unknown"), then used;
 * and a model file changed in place turns the bank off for the request (bank_off
 * "model_changed"), counted by watch_report. */
#include <criterion/criterion.h>

#include "server/server_int.h"
#include "unit/server/session_test.h"
#include "sys/sys.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char w_dir[64];

static int w_rm(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

static void w_setup(void)
{
    strcpy(w_dir, "/tmp/hs-watch.XXXXXX");
    cr_assert_not_null(mkdtemp(w_dir));
}

static void w_teardown(void) { nftw(w_dir, w_rm, 16, FTW_DEPTH | FTW_PHYS); }

static char bank_dir[128];

/* A server with a model, its engine, a RAM bank and a disk tier in the temp dir. */
static struct server *w_server(void)
{
    char out[128];
    snprintf(out, sizeof(out), "%s/m", w_dir);
    snprintf(bank_dir, sizeof(bank_dir), "%s/bank", w_dir);
    struct mkmodel_opts o;
    mkmodel_opts_default(&o);
    o.out = out;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(mkmodel_write(&o, &err), 0, "%s", err.msg);
    struct server *srv = hs_calloc(1, sizeof(*srv));
    pthread_mutex_init(&srv->metrics.mu, NULL);
    srv->opts.bank_dir = bank_dir;
    cr_assert_eq(model_load(out, &srv->model, &err), 0, "%s", err.msg);
    cr_assert_eq(model_text_load(srv->model, &srv->text, &err), 0, "%s", err.msg);
    struct engine_opts eo;
    engine_opts_default(&eo);
    cr_assert_eq(engine_new(srv->model, &eo, &srv->engine, &err), 0, "%s", err.msg);
    srv->bank = bank_init(NULL);
    struct bank_disk_opts dopts;
    bank_disk_opts_default(&dopts);
    srv->disk = bank_disk_open(bank_dir, &dopts, &err);
    cr_assert_not_null(srv->disk, "%s", err.msg);
    return srv;
}

static void w_free(struct server *srv)
{
    watch_stop(srv);
    bank_disk_close(srv->disk);
    bank_free(srv->bank);
    engine_free(srv->engine);
    model_text_free(&srv->text);
    model_free(srv->model);
    pthread_mutex_destroy(&srv->metrics.mu);
    hs_free(srv);
}

static void w_run(struct server *srv, struct session_report *r)
{
    char sys[2048] = "";
    for (int i = 0; i < 14; i++) strcat(sys, "You are a careful agent; read before you write. ");
    json_t *body = json_pack("{s:s, s:i, s:[{s:s, s:s}, {s:s, s:s}]}", "model", "x", "max_tokens", 3, "messages",
                             "role", "system", "content", sys, "role", "user", "content", "hello");
    struct session_opts so = { 0 };
    sampler_opts_default(&so.sampling);
    so.sampling.temperature = 0;
    so.disk = srv->disk;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(test_session_run_body(srv->engine, &srv->text, srv->bank, body, &so, NULL, NULL, r, &err),
                 0, "%s", err.msg);
    json_decref(body);
}

TestSuite(watch, .init = w_setup, .fini = w_teardown, .timeout = 120);

Test(watch, small_model_known_at_start)
{
    struct server *srv = w_server();
    uint64_t fp;
    cr_assert(!engine_fingerprint_persistent(srv->engine, &fp), "no identity before the watch");
    watch_start(srv);
    cr_assert_eq(atomic_load(&srv->watch.state), WATCH_KNOWN);
    cr_assert(engine_fingerprint_persistent(srv->engine, &fp));
    struct session_report r;
    w_run(srv, &r);
    cr_assert_eq(r.bank_off, SESSION_BANK_ON);
    cr_assert_gt(r.n_disk_puts, 0, "the disk tier is used");
    session_report_free(&r);
    w_free(srv);
}

Test(watch, big_model_hashed_in_background)
{
    struct server *srv = w_server();
    srv->watch.sync_max = 1; /* anything is "big" */
    watch_start(srv);
    uint64_t fp;
    cr_assert(!engine_fingerprint_persistent(srv->engine, &fp), "only the engine thread applies it");
    cr_assert_neq(atomic_load(&srv->watch.state), WATCH_FAILED);
    /* requests meanwhile: RAM bank yes, disk tier no */
    struct session_report r;
    w_run(srv, &r);
    cr_assert_str_eq(session_bank_off_name(r.bank_off), "model_identity_unknown");
    cr_assert_eq(r.n_disk_puts, 0);
    cr_assert(r.banked, "the RAM bank still works");
    watch_report(srv, &r);
    cr_assert_eq(srv->metrics.bank_off[1], 1);
    session_report_free(&r);
    for (int i = 0; i < 1000 && atomic_load(&srv->watch.state) == WATCH_PENDING; i++) {
        struct timespec ts = { 0, 10 * 1000000L };
        nanosleep(&ts, NULL);
    }
    cr_assert_eq(atomic_load(&srv->watch.state), WATCH_KNOWN, "%s", srv->watch.error);
    watch_poll(srv);
    cr_assert(engine_fingerprint_persistent(srv->engine, &fp));
    /* the same identity a direct computation gives */
    struct model_identity id;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(model_identity_compute(srv->model, NULL, &id, &err), 0, "%s", err.msg);
    cr_assert_eq(memcmp(id.digest, srv->watch.id.digest, 16), 0);
    w_run(srv, &r);
    cr_assert_eq(r.bank_off, SESSION_BANK_ON);
    cr_assert_gt(r.n_disk_puts, 0, "the disk tier is open now");
    session_report_free(&r);
    w_free(srv);
}

Test(watch, changed_in_place_turns_the_bank_off)
{
    struct server *srv = w_server();
    watch_start(srv);
    struct session_report r;
    w_run(srv, &r);
    session_report_free(&r);
    w_run(srv, &r);
    cr_assert_gt(r.cached_tokens, 0, "control: restored");
    session_report_free(&r);
    char p[160];
    snprintf(p, sizeof(p), "%s/m/model.safetensors", w_dir);
    struct timespec ts = { 0, 20 * 1000000L };
    nanosleep(&ts, NULL);
    FILE *f = fopen(p, "r+b");
    fseek(f, 600000, SEEK_SET);
    fputc(0x42, f);
    fclose(f);
    w_run(srv, &r);
    cr_assert_eq(r.cached_tokens, 0);
    cr_assert_str_eq(session_bank_off_name(r.bank_off), "model_changed");
    cr_assert(!r.banked);
    cr_assert_eq(r.n_disk_puts, 0);
    watch_report(srv, &r);
    cr_assert(srv->metrics.model_changed);
    cr_assert_eq(srv->metrics.bank_off[0], 1);
    session_report_free(&r);
    w_free(srv);
}
