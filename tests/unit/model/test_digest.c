/* test_digest.c — the model identity (digest.c): it covers every byte (a change in the
 * middle of the weights, in the tokenizer or the template changes it; a copy does not), the
 * per-file digest cache (a hit on an unchanged file; a re-hash after touch and after an
 * in-place write; corrupt, foreign, FIFO and racy entries never trusted), the byte limit
 * and the stop hook, and the file checks (model_files_check: written in place vs replaced
 * by rename). */
#include <criterion/criterion.h>

#include "mkmodel/mkmodel.h"
#include "model/model.h"
#include "sys/sys.h"

#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char dir[64];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/hs-digest.XXXXXX");
    cr_assert(mkdtemp(dir));
}

static void teardown(void) { nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

static void mk(const char *name, uint64_t seed)
{
    struct mkmodel_opts o;
    mkmodel_opts_default(&o);
    o.seed = seed;
    char out[128];
    snprintf(out, sizeof(out), "%s/%s", dir, name);
    o.out = out;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(mkmodel_write(&o, &err), HS_OK, "%s", err.msg);
}

static struct model *load(const char *name)
{
    char p[128];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    struct model *m = NULL;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(model_load(p, &m, &err), HS_OK, "%s", err.msg);
    return m;
}

static struct model_identity ident(const struct model *m, const char *cache, double racy)
{
    struct model_identity_opts o;
    model_identity_opts_default(&o);
    o.cache_dir = cache;
    o.racy_s = racy;
    struct model_identity id;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(model_identity_compute(m, &o, &id, &err), HS_OK, "%s", err.msg);
    return id;
}

static void nap(double s)
{
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
    nanosleep(&ts, NULL);
}

static char *path(const char *a, const char *b)
{
    char *p = malloc(256);
    snprintf(p, 256, "%s/%s/%s", dir, a, b);
    return p;
}

/* Overwrite n bytes at off of a file with other bytes, in place (same size). */
static void poke(const char *p, long off, size_t n, unsigned char x)
{
    FILE *f = fopen(p, "r+b");
    cr_assert(f);
    fseek(f, off, SEEK_SET);
    for (size_t i = 0; i < n; i++) fputc((int)(x + i), f);
    fclose(f);
}

static long fsize(const char *p)
{
    struct stat st;
    cr_assert_eq(stat(p, &st), 0);
    return (long)st.st_size;
}

static int n_entries(const char *cache)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "ls %s 2>/dev/null | grep -c hsid", cache);
    FILE *f = popen(cmd, "r");
    int n = 0;
    if (fscanf(f, "%d", &n) != 1) n = 0;
    pclose(f);
    return n;
}

TestSuite(model_identity, .init = setup, .fini = teardown, .timeout = 120);

Test(model_identity, covers_the_middle_of_the_weights)
{
    mk("a", 3);
    struct model *m = load("a");
    struct model_identity id0 = ident(m, NULL, 0);
    cr_assert_eq(id0.n_files, 4, "safetensors, config, tokenizer, tokenizer_config: %d", id0.n_files);
    struct model_identity again = ident(m, NULL, 0);
    cr_assert_eq(memcmp(id0.digest, again.digest, 16), 0, "deterministic");
    model_free(m);
    /* one byte in the middle of the data, far from both ends */
    char *st = path("a", "model.safetensors");
    long n = fsize(st);
    cr_assert_gt(n, 4 * 65536);
    poke(st, n / 2, 1, 0x5a);
    m = load("a");
    struct model_identity id1 = ident(m, NULL, 0);
    cr_assert_neq(memcmp(id0.digest, id1.digest, 16), 0, "a mid-file byte must change the identity");
    model_free(m);
    free(st);
}

Test(model_identity, covers_tokenizer_and_template_not_the_path)
{
    mk("a", 3);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "cp -r %s/a %s/b", dir, dir);
    cr_assert_eq(system(cmd), 0);
    struct model *a = load("a"), *b = load("b");
    struct model_identity ia = ident(a, NULL, 0), ib = ident(b, NULL, 0);
    cr_assert_eq(memcmp(ia.digest, ib.digest, 16), 0, "a copy is the same model");
    model_free(b);
    /* the tokenizer's vocabulary file, then a chat template file that was absent */
    char *tj = path("b", "tokenizer.json");
    FILE *f = fopen(tj, "a");
    fputs(" ", f);
    fclose(f);
    b = load("b");
    struct model_identity it = ident(b, NULL, 0);
    cr_assert_neq(memcmp(ia.digest, it.digest, 16), 0, "tokenizer.json is covered");
    model_free(b);
    char *ct = path("a", "chat_template.jinja");
    f = fopen(ct, "w");
    fputs("{{ messages }}", f);
    fclose(f);
    model_free(a);
    a = load("a");
    struct model_identity ic = ident(a, NULL, 0);
    cr_assert_neq(memcmp(ia.digest, ic.digest, 16), 0, "chat_template.jinja is covered");
    cr_assert_eq(ic.n_files, 5);
    model_free(a);
    free(tj);
    free(ct);
}

Test(model_identity, gguf_whole_file)
{
    mk("g.gguf", 5);
    struct model *m = load("g.gguf");
    struct model_identity id0 = ident(m, NULL, 0);
    cr_assert_eq(id0.n_files, 1);
    model_free(m);
    char p[128];
    snprintf(p, sizeof(p), "%s/g.gguf", dir);
    poke(p, fsize(p) / 2, 4, 0x11);
    m = load("g.gguf");
    struct model_identity id1 = ident(m, NULL, 0);
    cr_assert_neq(memcmp(id0.digest, id1.digest, 16), 0);
    model_free(m);
}

Test(model_identity, cache_hit_and_rehash_after_touch_and_write)
{
    mk("a", 3);
    char cache[128];
    snprintf(cache, sizeof(cache), "%s/cache", dir);
    nap(0.15); /* older than racy_s below: cacheable */
    struct model *m = load("a");
    struct model_identity cold = ident(m, cache, 0.1);
    cr_assert_eq(cold.n_cached, 0);
    cr_assert_gt(cold.bytes_hashed, 1000000);
    cr_assert_eq(n_entries(cache), 4, "one entry per file");
    struct model_identity hit = ident(m, cache, 0.1);
    cr_assert_eq(hit.n_cached, 4, "unchanged files: every digest from the cache");
    cr_assert_eq(hit.bytes_hashed, 0);
    cr_assert_eq(memcmp(cold.digest, hit.digest, 16), 0);
    model_free(m);

    /* touch: same bytes, new mtime/ctime: re-hashed, same identity */
    char *st = path("a", "model.safetensors");
    cr_assert_eq(utimensat(AT_FDCWD, st, NULL, 0), 0);
    nap(0.15);
    m = load("a");
    struct model_identity t = ident(m, cache, 0.1);
    cr_assert_eq(t.n_cached, 3, "the touched file is re-hashed");
    cr_assert_eq(t.bytes_hashed, (uint64_t)fsize(st));
    cr_assert_eq(memcmp(cold.digest, t.digest, 16), 0);
    model_free(m);

    /* an in-place write of the same size, its mtime set back to what it was: the ctime
     * still moves, the cache entry no longer matches */
    struct stat before;
    cr_assert_eq(stat(st, &before), 0);
    nap(0.15);
    poke(st, fsize(st) / 2, 8, 0x77);
    struct timespec ts[2] = { before.st_atim, before.st_mtim };
    cr_assert_eq(utimensat(AT_FDCWD, st, ts, 0), 0);
    nap(0.15);
    m = load("a");
    struct model_identity w = ident(m, cache, 0.1);
    cr_assert_eq(w.n_cached, 3);
    cr_assert_neq(memcmp(cold.digest, w.digest, 16), 0, "new bytes, new identity (not the cached one)");
    struct model_identity w2 = ident(m, cache, 0.1);
    cr_assert_eq(w2.n_cached, 4);
    cr_assert_eq(memcmp(w.digest, w2.digest, 16), 0);
    model_free(m);
    free(st);
}

Test(model_identity, bad_entries_are_ignored)
{
    mk("a", 3);
    char cache[128];
    snprintf(cache, sizeof(cache), "%s/cache", dir);
    nap(0.15);
    struct model *m = load("a");
    struct model_identity ref = ident(m, NULL, 0);
    ident(m, cache, 0.1);
    cr_assert_eq(n_entries(cache), 4);
    /* every entry: flip one digest byte (checksum mismatch) */
    char cmd[400];
    snprintf(cmd, sizeof(cmd),
             "for f in %s/*.hsid; do printf '\\377' | dd of=\"$f\" bs=1 seek=60 conv=notrunc 2>/dev/null; done", cache);
    cr_assert_eq(system(cmd), 0);
    struct model_identity c = ident(m, cache, 0.1);
    cr_assert_eq(c.n_cached, 0, "corrupt entries are not used");
    cr_assert_eq(memcmp(ref.digest, c.digest, 16), 0);
    /* rewritten: now good again; then make them foreign: each entry holds another file's
     * (valid) entry, so its stat fields disagree */
    cr_assert_eq(ident(m, cache, 0.1).n_cached, 4);
    snprintf(cmd, sizeof(cmd), "cd %s && first=$(ls | head -1) && for f in *.hsid; do [ \"$f\" = \"$first\" ] || cp \"$first\" \"$f\"; done", cache);
    cr_assert_eq(system(cmd), 0);
    c = ident(m, cache, 0.1);
    cr_assert_eq(c.n_cached, 1, "foreign entries are not used");
    cr_assert_eq(memcmp(ref.digest, c.digest, 16), 0);
    /* a FIFO where an entry would be: no hang, re-hashed */
    snprintf(cmd, sizeof(cmd), "cd %s && for f in *.hsid; do rm \"$f\" && mkfifo \"$f\"; done", cache);
    cr_assert_eq(system(cmd), 0);
    c = ident(m, cache, 0.1);
    cr_assert_eq(c.n_cached, 0);
    cr_assert_eq(memcmp(ref.digest, c.digest, 16), 0);
    model_free(m);
}

Test(model_identity, racy_files_are_not_cached)
{
    mk("a", 3);
    char cache[128];
    snprintf(cache, sizeof(cache), "%s/cache", dir);
    struct model *m = load("a");
    ident(m, cache, 1000); /* everything changed within the window */
    cr_assert_eq(n_entries(cache), 0);
    cr_assert_eq(ident(m, cache, 1000).n_cached, 0);
    model_free(m);
}

static bool stop_now(void *ctx) { (void)ctx; return true; }

Test(model_identity, limit_stop_and_changed_since_load)
{
    mk("a", 3);
    struct model *m = load("a");
    struct model_identity_opts o;
    model_identity_opts_default(&o);
    o.max_hash_bytes = 1000;
    struct model_identity id;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(model_identity_compute(m, &o, &id, &err), HS_ERR_LIMIT);
    cr_assert_eq(id.bytes_hashed, 0, "the limit reads nothing");
    model_identity_opts_default(&o);
    o.stop = stop_now;
    hs_err_clear(&err);
    cr_assert_neq(model_identity_compute(m, &o, &id, &err), HS_OK);
    cr_assert(strstr(err.msg, "stopped"), "%s", err.msg);
    /* written in place after load: the identity refuses, model_files_check says so */
    hs_err_clear(&err);
    cr_assert_eq(model_files_check(m, &err), HS_OK);
    char *st = path("a", "model.safetensors");
    nap(0.02);
    poke(st, fsize(st) / 2, 1, 0x33);
    hs_err_clear(&err);
    cr_assert_eq(model_files_check(m, &err), HS_ERR_IO);
    cr_assert(strstr(err.msg, "model.safetensors") && strstr(err.msg, "rename"), "%s", err.msg);
    hs_err_clear(&err);
    cr_assert_eq(model_identity_compute(m, NULL, &id, &err), HS_ERR_IO);
    cr_assert(strstr(err.msg, "changed since it was loaded"), "%s", err.msg);
    cr_assert_eq(model_mapping_check(m, &err), HS_OK, "no SIGBUS: the file kept its size");
    model_free(m);
    free(st);
}

Test(model_identity, replaced_by_rename_is_no_change)
{
    mk("a", 3);
    mk("b", 4);
    struct model *m = load("a");
    struct model_identity id0 = ident(m, NULL, 0);
    char *sa = path("a", "model.safetensors"), *sb = path("b", "model.safetensors");
    cr_assert_eq(rename(sb, sa), 0);
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(model_files_check(m, &err), HS_OK, "%s", err.msg);
    /* the loaded model is still the old inode: same identity */
    struct model_identity id1 = ident(m, NULL, 0);
    cr_assert_eq(memcmp(id0.digest, id1.digest, 16), 0);
    model_free(m);
    free(sa);
    free(sb);
}
