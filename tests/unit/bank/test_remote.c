/* test_remote.c — the bank's remote tier: the manifest format and the URL grammar (pure),
 * then against a live redis-server this file starts on a unix socket in a temp dir: exact
 * round trips from one replica's disk tier to another process's lookup (chains of several
 * blobs, several chunks per blob), the deepest-prefix choice, identity isolation, and every
 * kind of altered value (a chunk's bytes, a chunk cut short, a blob whose chunks are
 * consistent but whose checksums or ids are wrong, a manifest naming another entry, garbage
 * in the positions set): found, counted, never restored; then Redis going away (lookups miss
 * at once) and coming back. */
#include <criterion/criterion.h>

#include <hiredis/hiredis.h>
#include <signal.h>

#include "bank/blob_int.h"
#include "bank/remote_int.h"
#include "disk_test.h"

/* ---- the manifest and the URL ---------------------------------------------------------- */

static struct manifest mk_manifest(uint32_t n_chunks)
{
    struct manifest m = {0};
    for (int i = 0; i < 32; i++) { m.key[i] = (uint8_t)(i + 1); m.parent[i] = (uint8_t)(200 - i); }
    m.fp = FP1;
    m.start = 10;
    m.pos = 30;
    m.row = 1000;
    m.snap = 5000;
    m.kind = BANK_SNAP_END;
    m.blob_len = 160 + 4 * 20 + 20 * 1000 + 5000;
    m.chunk_bytes = (m.blob_len + n_chunks - 1) / n_chunks;
    if (m.chunk_bytes < 4096) m.chunk_bytes = 4096;
    m.n_chunks = (uint32_t)((m.blob_len + m.chunk_bytes - 1) / m.chunk_bytes);
    m.chunk_ids = malloc((size_t)m.n_chunks * MANIFEST_CHUNK_ID);
    for (uint32_t i = 0; i < m.n_chunks * MANIFEST_CHUNK_ID; i++) ((uint8_t *)m.chunk_ids)[i] = (uint8_t)(i * 7);
    return m;
}

Test(remote_fmt, manifest_roundtrip_and_every_rejection)
{
    struct manifest m = mk_manifest(6);
    cr_assert_eq(m.n_chunks, 6);
    size_t len;
    uint8_t *b = manifest_encode(&m, &len);
    cr_assert_eq(len, 160 + 6 * 16);
    struct manifest d;
    cr_assert(manifest_decode(b, len, &d));
    cr_assert_eq(d.fp, m.fp);
    cr_assert_eq(d.start, 10);
    cr_assert_eq(d.pos, 30);
    cr_assert_eq(d.blob_len, m.blob_len);
    cr_assert_eq(d.n_chunks, 6);
    cr_assert_eq(memcmp(d.key, m.key, 32), 0);
    cr_assert_eq(memcmp(d.parent, m.parent, 32), 0);
    cr_assert_eq(memcmp(d.chunk_ids, m.chunk_ids, 6 * 16), 0);
    manifest_free(&d);
    /* any one byte changed anywhere: refused (the checksum, or a field check before it) */
    for (size_t i = 0; i < len; i++) {
        b[i] ^= 0x20;
        cr_assert(!manifest_decode(b, len, &d), "byte %zu flipped and still decoded", i);
        cr_assert_null(d.chunk_ids);
        b[i] ^= 0x20;
    }
    /* short, long, empty */
    cr_assert(!manifest_decode(b, len - 1, &d));
    cr_assert(!manifest_decode(b, 100, &d));
    cr_assert(!manifest_decode(NULL, 0, &d));
    free(b);
    /* consistent checksums, inconsistent fields: each encoded whole, each refused */
    struct manifest bad;
    bad = m; bad.start = 30;                 b = manifest_encode(&bad, &len); cr_assert(!manifest_decode(b, len, &d), "start = pos"); free(b);
    bad = m; bad.blob_len += 1;              b = manifest_encode(&bad, &len); cr_assert(!manifest_decode(b, len, &d), "blob_len"); free(b);
    bad = m; bad.kind = BANK_SNAP_KIND_COUNT; b = manifest_encode(&bad, &len); cr_assert(!manifest_decode(b, len, &d), "kind"); free(b);
    bad = m; bad.start = 0;                  b = manifest_encode(&bad, &len); cr_assert(!manifest_decode(b, len, &d), "a root with a parent"); free(b);
    bad = m; memset(bad.parent, 0, 32);      b = manifest_encode(&bad, &len); cr_assert(!manifest_decode(b, len, &d), "no parent, start > 0"); free(b);
    bad = m; bad.chunk_bytes = 1024;         b = manifest_encode(&bad, &len); cr_assert(!manifest_decode(b, len, &d), "chunk_bytes"); free(b);
    bad = m; bad.n_chunks = 5;               b = manifest_encode(&bad, &len); cr_assert(!manifest_decode(b, len, &d), "n_chunks"); free(b);
    bad = m; bad.chunk_bytes = m.blob_len;   b = manifest_encode(&bad, &len); cr_assert(!manifest_decode(b, len, &d), "n_chunks vs size"); free(b);
    manifest_free(&m);
}

Test(remote_fmt, urls)
{
    struct remote_url u;
    const char *why;
    cr_assert(remote_url_parse("redis://127.0.0.1", &u, &why));
    cr_assert_str_eq(u.host, "127.0.0.1");
    cr_assert_eq(u.port, 6379);
    cr_assert_eq(u.db, 0);
    cr_assert(remote_url_parse("redis://:s3cr@t@cache.local:7000/3", &u, &why));
    cr_assert_str_eq(u.host, "cache.local");
    cr_assert_str_eq(u.password, "s3cr@t");
    cr_assert_str_eq(u.user, "");
    cr_assert_eq(u.port, 7000);
    cr_assert_eq(u.db, 3);
    cr_assert(remote_url_parse("redis://bob:pw@[::1]:6380", &u, &why));
    cr_assert_str_eq(u.host, "::1");
    cr_assert_str_eq(u.user, "bob");
    cr_assert_eq(u.port, 6380);
    cr_assert(remote_url_parse("unix:///run/redis.sock?db=2", &u, &why));
    cr_assert(u.unix_socket);
    cr_assert_str_eq(u.host, "/run/redis.sock");
    cr_assert_eq(u.db, 2);
    const char *bad[] = { "", "http://x", "redis://", "redis://h:0", "redis://h:65536", "redis://h:12x",
                          "redis://h/db", "redis://user@h", "redis://[::1", "unix://rel.sock", "unix:///s?x=1",
                          "redis://h:6379/-1", NULL };
    for (int i = 0; bad[i]; i++) cr_assert(!remote_url_parse(bad[i], &u, &why), "%s parsed", bad[i]);
    char shown[256];
    bank_remote_url_redact("redis://bob:pw@[::1]:6380/1", shown, sizeof shown);
    cr_assert_str_eq(shown, "redis://bob:***@[::1]:6380/1");
    bank_remote_url_redact("redis://h:1/2", shown, sizeof shown);
    cr_assert_str_eq(shown, "redis://h:1/2");
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(bank_remote_url_check("redis://:pw@h:99999", &err), HS_ERR_INVALID);
    cr_assert(strstr(err.msg, "***") && !strstr(err.msg, "pw@"), "%s", err.msg);
}

/* ---- a live Redis ------------------------------------------------------------------- */

static char g_dir[64], g_sock[96];
static pid_t g_redis;

static redisContext *raw(void)
{
    redisContext *c = redisConnectUnix(g_sock);
    cr_assert(c && !c->err, "connect %s", g_sock);
    return c;
}

static bool redis_up(void)
{
    redisContext *c = redisConnectUnix(g_sock);
    bool ok = false;
    if (c && !c->err) {
        redisReply *r = redisCommand(c, "PING");
        ok = r && r->type == REDIS_REPLY_STATUS;
        if (r) freeReplyObject(r);
    }
    if (c) redisFree(c);
    return ok;
}

static void redis_start(void)
{
    g_redis = fork();
    cr_assert_neq(g_redis, -1);
    if (g_redis == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        dup2(fd, 2);
        execlp("redis-server", "redis-server", "--port", "0", "--unixsocket", g_sock, "--save", "",
               "--appendonly", "no", "--dir", g_dir, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 100 && !redis_up(); i++) usleep(20000);
    cr_assert(redis_up(), "redis-server did not start (is it installed? make deps)");
}

static void redis_stop(void)
{
    if (g_redis <= 0) return;
    kill(g_redis, SIGTERM);
    waitpid(g_redis, NULL, 0);
    g_redis = 0;
}

static void live_setup(void)
{
    strcpy(g_dir, "/tmp/hs_remote_XXXXXX");
    cr_assert_not_null(mkdtemp(g_dir));
    snprintf(g_sock, sizeof g_sock, "%s/r.sock", g_dir);
    hs_log_set_level(HS_LOG_ERROR);
    redis_start();
}

static void live_teardown(void)
{
    redis_stop();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    cr_assert_eq(system(cmd), 0);
}

static struct bank_remote *open_remote(struct bank_disk *d, uint64_t chunk_bytes)
{
    struct bank_remote_opts o;
    bank_remote_opts_default(&o);
    char url[128];
    snprintf(url, sizeof url, "unix://%s", g_sock);
    o.url = url;
    o.prefix = "t";
    o.chunk_bytes = chunk_bytes;
    o.timeout_ms = 300;
    o.retry_ms = 100;
    struct hs_err err;
    hs_err_clear(&err);
    struct bank_remote *r = bank_remote_open(&o, d, &err);
    cr_assert_not_null(r, "%s", err.msg);
    return r;
}

static int64_t rlook(struct bank_remote *r, uint64_t fp, const int32_t *ids, int64_t n, int64_t min_pos,
                     int64_t max_pos, int64_t *blobs)
{
    struct bank_disk_hit h;
    bank_remote_lookup(r, fp, ROW, SNAP, ids, n, min_pos, max_pos, &h);
    int64_t p = h.pos;
    if (p) cr_assert_eq(dt_hit_bad(&h, fp, ids), 0, "remote hit at %lld: bytes differ", (long long)p);
    if (blobs) *blobs = h.n_blobs;
    bank_disk_hit_free(&h);
    return p;
}

/* One replica's disk tier puts entries at `at` (ascending) of ids; its remote tier uploads. */
static void fill(const int32_t *ids, const int64_t *at, int n, uint64_t fp, uint64_t chunk_bytes)
{
    char *dir = dt_mkdtemp();
    struct bank_disk *d = dt_open(dir, NULL);
    struct bank_remote *r = open_remote(d, chunk_bytes);
    for (int i = 0; i < n; i++) {
        cr_assert_eq(dt_put(d, fp, ids, at[i], i == 0 ? BANK_SNAP_HEAD : BANK_SNAP_GRID), BANK_DISK_QUEUED);
        bank_disk_flush(d); /* one at a time: each builds on the one before */
    }
    bank_remote_flush(r);
    struct bank_remote_stats st;
    bank_remote_stats_get(r, &st);
    cr_assert_eq(st.uploads, (uint64_t)n, "uploads %llu", (unsigned long long)st.uploads);
    cr_assert(st.up);
    bank_remote_close(r);
    bank_disk_close(d);
    dt_rmrf(dir);
}

static void key_of(uint64_t fp, const int32_t *ids, int64_t p, uint8_t out[32])
{
    struct blob_keys k;
    blob_keys_init(&k, fp, ids);
    blob_keys_at(&k, p, out);
    blob_keys_free(&k);
}

/* GET the manifest of (fp, ids[0, p)); decoded into m. */
static void get_manifest_raw(redisContext *c, uint64_t fp, const int32_t *ids, int64_t p, struct manifest *m)
{
    uint8_t k[32];
    key_of(fp, ids, p, k);
    char name[160];
    remote_key_manifest("t", k, name, sizeof name);
    redisReply *rep = redisCommand(c, "GET %s", name);
    cr_assert(rep && rep->type == REDIS_REPLY_STRING, "no manifest at %lld", (long long)p);
    cr_assert(manifest_decode((const uint8_t *)rep->str, rep->len, m));
    freeReplyObject(rep);
}

/* The whole blob of manifest m, reassembled from its chunks. */
static uint8_t *get_blob_raw(redisContext *c, const struct manifest *m)
{
    uint8_t *b = malloc(m->blob_len);
    for (uint32_t i = 0; i < m->n_chunks; i++) {
        char name[160];
        remote_key_chunk("t", m->chunk_ids[i], name, sizeof name);
        redisReply *rep = redisCommand(c, "GET %s", name);
        cr_assert(rep && rep->type == REDIS_REPLY_STRING);
        memcpy(b + (size_t)i * m->chunk_bytes, rep->str, rep->len);
        freeReplyObject(rep);
    }
    return b;
}

/* Store blob b (blob_len bytes) for m: new chunks under their ids, the manifest re-encoded. */
static void put_blob_raw(redisContext *c, struct manifest *m, const uint8_t *b)
{
    for (uint32_t i = 0; i < m->n_chunks; i++) {
        size_t off = (size_t)i * m->chunk_bytes, len = (size_t)HS_MIN(m->chunk_bytes, m->blob_len - off);
        manifest_chunk_id(b + off, len, m->chunk_ids[i]);
        char name[160];
        remote_key_chunk("t", m->chunk_ids[i], name, sizeof name);
        redisReply *rep = redisCommand(c, "SET %s %b", name, b + off, len);
        cr_assert(rep && rep->type == REDIS_REPLY_STATUS);
        freeReplyObject(rep);
    }
    size_t ml;
    uint8_t *mb = manifest_encode(m, &ml);
    char name[160];
    remote_key_manifest("t", m->key, name, sizeof name);
    redisReply *rep = redisCommand(c, "SET %s %b", name, mb, ml);
    cr_assert(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    free(mb);
}

TestSuite(remote, .init = live_setup, .fini = live_teardown);

Test(remote, roundtrip_chains_chunks_and_choice)
{
    static int32_t ids[2048], other[2048];
    dt_ids(ids, 2048, 11);
    memcpy(other, ids, sizeof ids);
    other[500] ^= 0x40;
    const int64_t at[] = {300, 700, 1500};
    fill(ids, at, 3, FP1, 4096); /* blobs of 8-22 KB in 4 KiB chunks */
    struct bank_remote *r = open_remote(NULL, 0); /* another process: no disk of its own */
    int64_t blobs = 0;
    cr_assert_eq(rlook(r, FP1, ids, 2048, 0, 1 << 20, &blobs), 1500);
    cr_assert_eq(blobs, 3, "the chain 0-300-700-1500");
    cr_assert_eq(rlook(r, FP1, ids, 1501, 0, 1 << 20, NULL), 1500);
    cr_assert_eq(rlook(r, FP1, ids, 1500, 0, 1 << 20, NULL), 700, "n - 1: one token is always computed");
    cr_assert_eq(rlook(r, FP1, ids, 2048, 0, 1499, NULL), 700, "max_pos");
    cr_assert_eq(rlook(r, FP1, ids, 2048, 700, 1 << 20, NULL), 1500);
    cr_assert_eq(rlook(r, FP1, ids, 2048, 1500, 1 << 20, NULL), 0, "nothing deeper than min_pos");
    cr_assert_eq(rlook(r, FP1, other, 2048, 0, 1 << 20, NULL), 300, "diverges at 500");
    cr_assert_eq(rlook(r, FP2, ids, 2048, 0, 1 << 20, NULL), 0, "another model's key space");
    struct bank_disk_hit h;
    bank_remote_lookup(r, FP1, ROW + 1, SNAP, ids, 2048, 0, 1 << 20, &h);
    cr_assert_eq(h.pos, 0, "other row sizes");
    struct bank_remote_stats st;
    bank_remote_stats_get(r, &st);
    cr_assert_eq(st.bad_manifest + st.bad_chunk + st.bad_blob, 0);
    cr_assert_eq(st.hits, 6);
    bank_remote_close(r);
}

Test(remote, altered_values_are_never_restored)
{
    static int32_t ids[1024];
    dt_ids(ids, 1024, 12);
    const int64_t at[] = {200, 600};
    redisContext *c = raw();
    struct bank_remote *r = open_remote(NULL, 0);
    struct bank_remote_stats st;
    struct manifest m;

    /* a chunk's bytes changed (its id no longer matches): counted, deleted, the parent serves */
    fill(ids, at, 2, FP1, 4096);
    get_manifest_raw(c, FP1, ids, 600, &m);
    char name[160];
    remote_key_chunk("t", m.chunk_ids[1], name, sizeof name);
    redisReply *rep = redisCommand(c, "SETRANGE %s 100 XYZ", name);
    freeReplyObject(rep);
    cr_assert_eq(rlook(r, FP1, ids, 1024, 0, 1 << 20, NULL), 200);
    bank_remote_stats_get(r, &st);
    cr_assert_eq(st.bad_chunk, 1);
    rep = redisCommand(c, "EXISTS %s", name);
    cr_assert_eq(rep->integer, 0, "the bad chunk was deleted");
    freeReplyObject(rep);
    manifest_free(&m);

    /* a chunk cut short */
    freeReplyObject(redisCommand(c, "FLUSHALL"));
    fill(ids, at, 2, FP1, 4096);
    get_manifest_raw(c, FP1, ids, 600, &m);
    remote_key_chunk("t", m.chunk_ids[m.n_chunks - 1], name, sizeof name);
    freeReplyObject(redisCommand(c, "SET %s short", name));
    cr_assert_eq(rlook(r, FP1, ids, 1024, 0, 1 << 20, NULL), 200);
    bank_remote_stats_get(r, &st);
    cr_assert_eq(st.bad_chunk, 2);
    manifest_free(&m);

    /* consistent chunks, a KV byte changed in the blob: the stretch checksum */
    freeReplyObject(redisCommand(c, "FLUSHALL"));
    fill(ids, at, 2, FP1, 4096);
    get_manifest_raw(c, FP1, ids, 600, &m);
    uint8_t *b = get_blob_raw(c, &m);
    b[160 + 4 * 400 + 5] ^= 1;
    put_blob_raw(c, &m, b);
    cr_assert_eq(rlook(r, FP1, ids, 1024, 0, 1 << 20, NULL), 200);
    bank_remote_stats_get(r, &st);
    cr_assert_eq(st.bad_blob, 1);

    /* ids changed with every checksum recomputed: the blob is self-consistent, but not the
     * prompt asked (its key was computed from the request's ids) */
    struct blob_hdr hd;
    b[160 + 4 * 400 + 5] ^= 1;
    cr_assert_eq(blob_check(b, m.blob_len, NULL, NULL, &hd), RD_OK);
    int32_t t;
    memcpy(&t, b + 160 + 4 * 10, 4);
    t ^= 0x11;
    memcpy(b + 160 + 4 * 10, &t, 4);
    hd.kv_sum = blob_stretch_sum(b + 160, 4 * 400, b + 160 + 4 * 400, 400 * ROW);
    blob_hdr_encode(&hd, b);
    cr_assert_eq(blob_check(b, m.blob_len, NULL, NULL, NULL), RD_OK);
    put_blob_raw(c, &m, b);
    cr_assert_eq(rlook(r, FP1, ids, 1024, 0, 1 << 20, NULL), 200);
    bank_remote_stats_get(r, &st);
    cr_assert_eq(st.bad_blob, 2);
    free(b);

    /* the parent's manifest names another entry: the chain is refused */
    struct manifest p;
    get_manifest_raw(c, FP1, ids, 200, &p);
    uint8_t k200[32];
    memcpy(k200, p.key, 32);
    p.key[0] ^= 1;
    size_t ml;
    uint8_t *mb = manifest_encode(&p, &ml);
    remote_key_manifest("t", k200, name, sizeof name);
    freeReplyObject(redisCommand(c, "SET %s %b", name, mb, ml));
    free(mb);
    manifest_free(&p);
    cr_assert_eq(rlook(r, FP1, ids, 1024, 0, 1 << 20, NULL), 0);
    bank_remote_stats_get(r, &st);
    cr_assert_geq(st.bad_manifest, 1);
    rep = redisCommand(c, "EXISTS %s", name);
    cr_assert_eq(rep->integer, 0, "the lying manifest was deleted");
    freeReplyObject(rep);
    manifest_free(&m);

    /* garbage in the positions set is skipped */
    freeReplyObject(redisCommand(c, "FLUSHALL"));
    fill(ids, at, 2, FP1, 4096);
    char pos[160];
    remote_key_positions("t", FP1, pos, sizeof pos);
    freeReplyObject(redisCommand(c, "ZADD %s 700 abc 650 -5 640 1e3 630 99999999999999999999", pos));
    cr_assert_eq(rlook(r, FP1, ids, 1024, 0, 1 << 20, NULL), 600);
    /* more positions deeper than the entry than one page holds (other prompts' entries) */
    for (int q = 601; q < 1024; q++) freeReplyObject(redisCommand(c, "ZADD %s %d %d", pos, q, q));
    cr_assert_eq(rlook(r, FP1, ids, 1024, 0, 1 << 20, NULL), 600, "found past the first page of positions");
    bank_remote_close(r);
    redisFree(c);
}

Test(remote, down_misses_at_once_and_comes_back)
{
    static int32_t ids[512];
    dt_ids(ids, 512, 13);
    const int64_t at[] = {100, 300};
    fill(ids, at, 2, FP1, 0);
    struct bank_remote *r = open_remote(NULL, 0);
    cr_assert_eq(rlook(r, FP1, ids, 512, 0, 1 << 20, NULL), 300);
    redis_stop();
    cr_assert_eq(rlook(r, FP1, ids, 512, 0, 1 << 20, NULL), 0, "Redis gone: a miss");
    struct bank_remote_stats st;
    bank_remote_stats_get(r, &st);
    cr_assert(!st.up);
    cr_assert_geq(st.err_io + st.err_connect, 1);
    /* down: the next lookups make no call at all (a call would fail and be counted) */
    uint64_t errs = st.err_io + st.err_connect + st.err_timeout;
    for (int i = 0; i < 100; i++) cr_assert_eq(rlook(r, FP1, ids, 512, 0, 1 << 20, NULL), 0);
    bank_remote_stats_get(r, &st);
    cr_assert_eq(st.err_io + st.err_connect + st.err_timeout, errs, "lookups called a Redis that is down");
    /* back: the upload thread's retry brings it up (empty: a miss, not an error) */
    redis_start();
    for (int i = 0; i < 100; i++) {
        bank_remote_stats_get(r, &st);
        if (st.up) break;
        usleep(20000);
    }
    cr_assert(st.up, "never came back");
    cr_assert_eq(st.reconnects, 1);
    cr_assert_eq(rlook(r, FP1, ids, 512, 0, 1 << 20, NULL), 0);
    bank_remote_close(r);
}

/* One replica keeps its disk tier open; Redis evicts a chunk of its entry. The entry must
 * come back: a lookup that meets the stale manifest deletes it, and an upload re-sends an
 * entry whose manifest stands but whose chunk is gone. */
Test(remote, an_evicted_entry_is_uploaded_again)
{
    static int32_t ids[512];
    dt_ids(ids, 512, 14);
    char *dir = dt_mkdtemp();
    struct bank_disk *d = dt_open(dir, NULL);
    struct bank_remote *up = open_remote(d, 4096);
    struct bank_remote *r = open_remote(NULL, 0);
    redisContext *c = raw();
    struct manifest m;
    cr_assert_eq(dt_put(d, FP1, ids, 300, BANK_SNAP_HEAD), BANK_DISK_QUEUED);
    bank_disk_flush(d);
    bank_remote_flush(up);
    cr_assert_eq(rlook(r, FP1, ids, 512, 0, 1 << 20, NULL), 300);
    for (int round = 0; round < 2; round++) {
        get_manifest_raw(c, FP1, ids, 300, &m);
        char name[160];
        remote_key_chunk("t", m.chunk_ids[1], name, sizeof name);
        manifest_free(&m);
        freeReplyObject(redisCommand(c, "DEL %s", name));
        if (round == 0) {
            /* a lookup meets it first: a miss, and the stale manifest goes */
            cr_assert_eq(rlook(r, FP1, ids, 512, 0, 1 << 20, NULL), 0);
            uint8_t k[32];
            key_of(FP1, ids, 300, k);
            char mname[160];
            remote_key_manifest("t", k, mname, sizeof mname);
            redisReply *rep = redisCommand(c, "EXISTS %s", mname);
            cr_assert_eq(rep->integer, 0, "the stale manifest stayed");
            freeReplyObject(rep);
        }
        /* the replica stores the entry again (a put of a stored prefix: a touch) */
        dt_put(d, FP1, ids, 300, BANK_SNAP_HEAD);
        bank_disk_flush(d);
        bank_remote_flush(up);
        cr_assert_eq(rlook(r, FP1, ids, 512, 0, 1 << 20, NULL), 300, "round %d: not uploaded again", round);
    }
    struct bank_remote_stats st;
    bank_remote_stats_get(up, &st);
    cr_assert_eq(st.uploads, 3);
    redisFree(c);
    bank_remote_close(r);
    bank_remote_close(up);
    bank_disk_close(d);
    dt_rmrf(dir);
}
