/* test_identity.c — the engine's two fingerprints (engine.c's design note): the process one
 * tells apart two loaded files (even byte-identical copies) and is stable for one file;
 * the persistent one exists only after engine_set_identity, is equal for a copy of the
 * model and differs for a model whose weights differ only in the middle of the file
 * (what the old 128 KiB identity missed); and a SIGBUS on the mapping fails engine_forward,
 * while an engine computing with its own packed copies of the matrices either fails so or
 * still gives the logits it gave before the truncation. */
#include <criterion/criterion.h>

#include "engine/engine_int.h"
#include "mkmodel/mkmodel.h"
#include "model/model.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

static void setup(void)
{
    strcpy(dir, "/tmp/hs-eid.XXXXXX");
    cr_assert(mkdtemp(dir));
}

static void teardown(void) { nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS); }

/* A small Q8_0 model with `seed` at dir/name. */
static void write_q8(const char *name, uint64_t seed)
{
    char out[128];
    snprintf(out, sizeof(out), "%s/%s", dir, name);
    struct mkmodel_opts o;
    mkmodel_opts_default(&o);
    o.dtype = DTYPE_Q8_0;
    o.seed = seed;
    o.out = out;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(mkmodel_write(&o, &err), 0, "%s", err.msg);
}

static struct engine *open_engine(const char *name, struct model **m)
{
    char p[128];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(model_load(p, m, &err), 0, "%s", err.msg);
    struct engine *e = NULL;
    cr_assert_eq(engine_new(*m, NULL, &e, &err), 0, "%s", err.msg);
    struct model_identity id;
    cr_assert_eq(model_identity_compute(*m, NULL, &id, &err), 0, "%s", err.msg);
    uint64_t fp;
    cr_assert(!engine_fingerprint_persistent(e, &fp));
    engine_set_identity(e, id.digest);
    cr_assert(engine_fingerprint_persistent(e, &fp));
    return e;
}

static uint64_t pfp(const struct engine *e)
{
    uint64_t fp = 0;
    cr_assert(engine_fingerprint_persistent(e, &fp));
    return fp;
}

TestSuite(engine_identity, .init = setup, .fini = teardown, .timeout = 120);

Test(engine_identity, mid_file_change_and_copies)
{
    char out[128], cmd[400];
    write_q8("a.gguf", 3);
    write_q8("b.gguf", 4);
    struct hs_err err;
    hs_err_clear(&err);
    /* c: a with the middle half of b's bytes; d: a byte-identical copy of a */
    snprintf(cmd, sizeof(cmd),
             "cd %s && cp a.gguf c.gguf && cp a.gguf d.gguf && n=$(stat -c %%s a.gguf) && "
             "dd if=b.gguf of=c.gguf bs=1 skip=$((n / 4)) seek=$((n / 4)) count=$((n / 2)) conv=notrunc 2>/dev/null && "
             "cmp -s -n 65536 a.gguf c.gguf && ! cmp -s a.gguf c.gguf",
             dir);
    cr_assert_eq(system(cmd), 0);
    /* the SIGBUS guard needs matrices read from the mapping: without the packed Q8_0
     * copies (wpack.c), which would leave it only the embedding rows and the norms to read
     * (packed_copies_and_truncation below) */
    setenv("HEADSTART_NO_PACK", "1", 1);
    struct model *ma, *mc, *md, *ma2;
    struct engine *a = open_engine("a.gguf", &ma), *c = open_engine("c.gguf", &mc), *d = open_engine("d.gguf", &md),
                  *a2 = open_engine("a.gguf", &ma2);
    cr_assert_eq(engine_fingerprint(a), engine_fingerprint(a2), "one file, one process fingerprint");
    cr_assert_neq(engine_fingerprint(a), engine_fingerprint(d), "another file: another process fingerprint");
    cr_assert_eq(pfp(a), pfp(d), "a copy is the same model on disk");
    cr_assert_neq(pfp(a), pfp(c), "a mid-file change is another model on disk");
    cr_assert_neq(engine_fingerprint(a), pfp(a));
    /* a truncated file: the next forward fails naming it, and keeps failing */
    struct seq *s = seq_new(a, 8);
    int32_t t[2] = { 1, 2 };
    cr_assert_eq(engine_forward(a, s, t, 2, NULL, 0, NULL, 0, NULL, &err), 0, "%s", err.msg);
    snprintf(out, sizeof(out), "%s/a.gguf", dir);
    struct stat st;
    cr_assert_eq(stat(out, &st), 0);
    cr_assert_eq(truncate(out, st.st_size / 3), 0);
    hs_err_clear(&err);
    cr_assert_eq(engine_forward(a, s, t, 2, NULL, 0, NULL, 0, NULL, &err), HS_ERR_IO);
    cr_assert(strstr(err.msg, "a.gguf") && strstr(err.msg, "truncated"), "%s", err.msg);
    seq_reset(s);
    hs_err_clear(&err);
    cr_assert_eq(engine_forward(a, s, t, 1, NULL, 0, NULL, 0, NULL, &err), HS_ERR_IO);
    seq_free(s);
    engine_free(a); engine_free(c); engine_free(d); engine_free(a2);
    model_free(ma); model_free(mc); model_free(md); model_free(ma2);
}

/* With packed Q8_0 copies (wpack.c; where the kernel variant has them) the matrices no
 * longer come from the file: after the file is cut to a third, a forward either fails
 * naming the file (it read a truncated page: an embedding row, a norm) or returns the very
 * logits it returned before. Never other logits. */
Test(engine_identity, packed_copies_and_truncation)
{
    write_q8("a.gguf", 5);
    char out[128];
    snprintf(out, sizeof(out), "%s/a.gguf", dir);
    struct hs_err err;
    hs_err_clear(&err);
    unsetenv("HEADSTART_NO_PACK");
    struct model *m;
    struct engine *e = open_engine("a.gguf", &m);
    int64_t V = e->g.V, row = 1;
    float *l0 = hs_malloc((size_t)V * sizeof(float)), *l1 = hs_malloc((size_t)V * sizeof(float));
    int32_t t[2] = { 1, 2 };
    struct seq *s = seq_new(e, 8);
    cr_assert_eq(engine_forward(e, s, t, 2, NULL, 0, &row, 1, l0, &err), 0, "%s", err.msg);
    struct stat st;
    cr_assert_eq(stat(out, &st), 0);
    cr_assert_eq(truncate(out, st.st_size / 3), 0);
    seq_reset(s);
    hs_err_clear(&err);
    int rc = engine_forward(e, s, t, 2, NULL, 0, &row, 1, l1, &err);
    if (rc) {
        cr_assert_eq(rc, HS_ERR_IO, "%s", err.msg);
        cr_assert(strstr(err.msg, "a.gguf") && strstr(err.msg, "truncated"), "%s", err.msg);
    } else {
        cr_assert(e->n_packs > 0, "no packed copies and no error: the guard missed the truncation");
        cr_assert(!memcmp(l0, l1, (size_t)V * sizeof(float)), "other logits after the truncation, and no error");
    }
    seq_free(s);
    hs_free(l0);
    hs_free(l1);
    engine_free(e);
    model_free(m);
}
