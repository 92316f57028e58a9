/*
 * remote.c — the bank's remote tier: a Redis (or Valkey) that several replicas share, so a
 * head computed on one machine is restored on any other, exactly. Behind the disk tier:
 * lookups come here only for a point deeper than RAM and disk give; what this tier holds
 * is what the replicas' disk tiers stored, copied in the background.
 *
 * Design note
 * -----------
 * Layout (remote_fmt.c, docs/FORMATS.md): an entry is the disk tier's blob, byte for byte,
 * cut into chunks (PREFIX:hsb2:c:<XXH3-128>) and named by a manifest under its prefix key
 * (PREFIX:hsb2:m:<key>); its parent is the entry its stretch builds on, exactly as on disk,
 * so a head shared by every session of the fleet is stored once. Per key space a sorted
 * set (PREFIX:hsb2:p:<fp>) holds the positions stored, so a lookup knows which prefix keys
 * of its prompt to ask for without scanning.
 *
 *   lookup: ZREVRANGEBYSCORE positions (min_pos, min(n-1, max_pos)], pages of 256 deepest
 *           first (at most 16) ─▶ prefix keys of the prompt at those positions ─▶ MGET
 *           manifests (64 a call), deepest first ─▶ for the first
 *           that decodes and names the asked identity: fetch its chain (chunks by GET, 2 in flight,
 *           each checked against its id, the blob checked as the disk tier checks a
 *           file, the parent's manifest next) ─▶ a verified hit, or the next candidate
 *   upload: the disk writer says "stored K" ─▶ queue (head anchors first) ─▶ the upload
 *           thread: manifest and all its chunks there? done : parent uploaded first (recursively), then the
 *           blob read from disk and verified, its chunks SET, the manifest SET, the
 *           position ZADDed
 *
 * Invariants:
 *   1. Nothing read from Redis is handed out unverified: the manifest (magic, version,
 *      checksum, sizes) must name exactly the key, fingerprint, position and row sizes
 *      asked; every chunk must have its length and its id; every blob of the chain must
 *      pass the disk tier's checks (blob_check_header / blob_check_payload: header,
 *      identity with the key and parent recomputed from the request's ids, checksums, the
 *      ids equal to the request's). A value that fails is counted (bad_manifest,
 *      bad_chunk, bad_blob), deleted from Redis when it provably cannot be right (a chunk
 *      whose bytes do not have its id, a manifest that does not decode or names another
 *      entry), and the search goes on with the next shallower candidate.
 *   2. Missing values are misses, never errors: a manifest whose chunk or parent Redis
 *      evicted (maxmemory) counts as `evicted`. A manifest whose own chunk is gone is
 *      deleted (chunks are written before their manifest, so it can never serve again),
 *      and an upload finds an entry whole only when its manifest and every chunk are
 *      there: an evicted entry is uploaded again by the next replica that stores it.
 *   3. Redis never stalls a request for longer than one timeout per outage: a failed call
 *      (refused, reset, timed out) marks the tier down and drops the connection; while
 *      down, lookups miss at once and uploads wait in their bounded queue. Only the upload
 *      thread tries again, after retry_ms doubling to 60 s (a PING on a fresh
 *      connection); the first failure of an outage is logged, and the recovery.
 *   4. Writes never run on a request's path: the disk writer's listener only queues a
 *      key. The queue is bounded (queue_len); when full the least valuable (highest
 *      kind, then oldest) is dropped. A manifest is SET only after all its chunks and its
 *      parent's manifest were written, so a complete manifest never names bytes that
 *      were never there. An OOM reply (Redis full under noeviction) drops that upload and
 *      pauses uploads for the backoff; lookups go on.
 *   5. Two replicas writing one entry write the same chunks and an equivalent manifest:
 *      last write wins, both are valid.
 *   6. Threads: the lookup connection is used under lk_mu (callers' threads), the upload
 *      connection only by the upload thread; mu guards the queue, the counters and the
 *      up/down state. Order: lk_mu before mu.
 */
#include "bank/disk_int.h"
#include "bank/remote_int.h"

#include <errno.h>
#include <hiredis/hiredis.h>
#include <sys/socket.h>
#include <xxhash.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define POS_PAGE 256              /* positions asked per ZREVRANGEBYSCORE */
#define POS_PAGES_MAX 16          /* pages per lookup: the 4096 deepest positions stored */
#define MGET_MANIFESTS 64         /* manifests per MGET */
#define FETCH_DEPTH 2             /* chunk GETs in flight (measured: see fetch_blob) */
#define UPLOAD_PIPELINE 8         /* chunk SETs in flight */
#define CHAIN_MAX 4096            /* blobs in one chain (a guard against a cycle) */
#define BACKOFF_CAP_MS 60000u

enum errkind { EK_CONNECT, EK_TIMEOUT, EK_IO, EK_OOM, EK_REPLY };

struct upitem {
    char key[65];
    enum bank_snap_kind kind;
    uint64_t seq;
};

struct bank_remote {
    struct bank_remote_opts o;
    char *url, *prefix;
    char shown[256];              /* the URL with its password hidden */
    struct remote_url u;
    struct bank_disk *disk;

    pthread_mutex_t lk_mu, mu;
    pthread_cond_t cv_work, cv_idle;
    pthread_t th;
    bool started, closing, busy;
    struct conn { redisContext *c; uint64_t epoch; } lk, wr; /* lookups (lk_mu); uploads */

    bool up;
    bool outage_logged;           /* this outage's first failure was logged */
    uint64_t epoch;               /* +1 at each failure: older connections are dropped */
    int64_t retry_at_ms;          /* while down: the upload thread's next try */
    uint32_t backoff_ms;
    int64_t write_pause_until_ms; /* after an OOM */
    struct upitem *q;
    int nq;
    uint64_t seq;
    struct bank_remote_stats st;
};

static int64_t now_ms(void) { return (int64_t)(sys_time_sec() * 1000.0); }

/* ---- connections and the up/down state ------------------------------------------------ */

static struct timeval tv_of(uint32_t ms)
{
    struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
    return tv;
}

static void count_err(struct bank_remote *r, enum errkind k)
{
    switch (k) {
    case EK_CONNECT: r->st.err_connect++; break;
    case EK_TIMEOUT: r->st.err_timeout++; break;
    case EK_IO: r->st.err_io++; break;
    case EK_OOM: r->st.err_oom++; break;
    case EK_REPLY: r->st.err_reply++; break;
    }
}

/* A call failed in a way that says the server is not usable now (invariant 3). */
static void mark_down(struct bank_remote *r, enum errkind k, const char *what, const char *msg)
{
    pthread_mutex_lock(&r->mu);
    count_err(r, k);
    snprintf(r->st.last_error, sizeof r->st.last_error, "%s: %s", what, msg);
    bool log = !r->outage_logged;
    r->outage_logged = true;
    r->epoch++;
    r->up = false;
    r->backoff_ms = r->backoff_ms ? HS_MIN(r->backoff_ms * 2, BACKOFF_CAP_MS) : r->o.retry_ms;
    r->retry_at_ms = now_ms() + r->backoff_ms;
    uint32_t wait = r->backoff_ms;
    pthread_cond_broadcast(&r->cv_work);
    pthread_mutex_unlock(&r->mu);
    if (log)
        log_warn("bank remote: %s: %s: %s; serving from the local tiers, retrying in %u ms (doubling to %u s)",
                 r->shown, what, msg, wait, BACKOFF_CAP_MS / 1000);
}

static bool is_up(struct bank_remote *r)
{
    pthread_mutex_lock(&r->mu);
    bool up = r->up;
    pthread_mutex_unlock(&r->mu);
    return up;
}

static enum errkind classify(const redisContext *c, int saved_errno)
{
    if (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK || saved_errno == ETIMEDOUT ||
        strstr(c->errstr, "timed out") || strstr(c->errstr, "temporarily unavailable"))
        return EK_TIMEOUT;
    return EK_IO;
}

static redisReply *command(redisContext *c, int argc, const char **argv, const size_t *lens)
{
    return redisCommandArgv(c, argc, argv, lens);
}

/* A new connection: connect, timeouts, AUTH, SELECT. NULL (and the tier marked down)
 * when any of it fails. */
static redisContext *connect_new(struct bank_remote *r)
{
    struct timeval tv = tv_of(r->o.timeout_ms);
    redisContext *c = r->u.unix_socket ? redisConnectUnixWithTimeout(r->u.host, tv)
                                       : redisConnectWithTimeout(r->u.host, r->u.port, tv);
    if (!c || c->err) {
        enum errkind k = c && classify(c, errno) == EK_TIMEOUT ? EK_TIMEOUT : EK_CONNECT;
        mark_down(r, k, "connect", c ? c->errstr : "out of memory");
        if (c) redisFree(c);
        return NULL;
    }
    if (redisSetTimeout(c, tv) != REDIS_OK) {
        mark_down(r, EK_CONNECT, "connect", "cannot set the socket timeout");
        redisFree(c);
        return NULL;
    }
    const char *argv[3];
    size_t lens[3];
    int argc = 0;
    if (r->u.password[0]) {
        argv[argc] = "AUTH"; lens[argc++] = 4;
        if (r->u.user[0]) { argv[argc] = r->u.user; lens[argc] = strlen(r->u.user); argc++; }
        argv[argc] = r->u.password; lens[argc] = strlen(r->u.password); argc++;
        redisReply *rep = command(c, argc, argv, lens);
        bool ok = rep && rep->type == REDIS_REPLY_STATUS;
        char msg[200];
        snprintf(msg, sizeof msg, "%s", rep ? (rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply") : c->errstr);
        if (rep) freeReplyObject(rep);
        if (!ok) {
            mark_down(r, rep ? EK_REPLY : classify(c, errno), "AUTH", msg);
            redisFree(c);
            return NULL;
        }
    }
    if (r->u.db) {
        char db[16];
        snprintf(db, sizeof db, "%d", r->u.db);
        argv[0] = "SELECT"; lens[0] = 6;
        argv[1] = db; lens[1] = strlen(db);
        redisReply *rep = command(c, 2, argv, lens);
        bool ok = rep && rep->type == REDIS_REPLY_STATUS;
        char msg[200];
        snprintf(msg, sizeof msg, "%s", rep ? (rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply") : c->errstr);
        if (rep) freeReplyObject(rep);
        if (!ok) {
            mark_down(r, rep ? EK_REPLY : classify(c, errno), "SELECT", msg);
            redisFree(c);
            return NULL;
        }
    }
    return c;
}

/* One command on *cp (connecting when needed). NULL when the connection failed (it is
 * dropped, the tier marked down); an error reply is returned for the caller to judge. */
/* A connection made before the last failure is dropped (it may be to a server that has
 * gone since); a new one is made when there is none. false when that fails. */
static bool conn_ready(struct bank_remote *r, struct conn *cn)
{
    pthread_mutex_lock(&r->mu);
    uint64_t epoch = r->epoch;
    pthread_mutex_unlock(&r->mu);
    if (cn->c && cn->epoch != epoch) {
        redisFree(cn->c);
        cn->c = NULL;
    }
    if (!cn->c) {
        cn->c = connect_new(r);
        cn->epoch = epoch;
    }
    return cn->c != NULL;
}

static void conn_failed(struct bank_remote *r, struct conn *cn, const char *what)
{
    int e = errno;
    char msg[128];
    snprintf(msg, sizeof msg, "%s", cn->c->errstr);
    enum errkind k = classify(cn->c, e);
    redisFree(cn->c);
    cn->c = NULL;
    mark_down(r, k, what, msg);
}

static redisReply *call(struct bank_remote *r, struct conn *cn, const char *what, int argc,
                        const char **argv, const size_t *lens)
{
    if (!conn_ready(r, cn)) return NULL;
    redisReply *rep = command(cn->c, argc, argv, lens);
    if (!rep) conn_failed(r, cn, what);
    return rep;
}

/* An error reply: counted (OOM apart), logged by the caller's words. */
static bool reply_error(struct bank_remote *r, const redisReply *rep, const char *what)
{
    if (rep->type != REDIS_REPLY_ERROR) return false;
    bool oom = strncmp(rep->str, "OOM", 3) == 0;
    pthread_mutex_lock(&r->mu);
    count_err(r, oom ? EK_OOM : EK_REPLY);
    snprintf(r->st.last_error, sizeof r->st.last_error, "%s: %s", what, rep->str);
    pthread_mutex_unlock(&r->mu);
    return true;
}

/* Several commands at once (a pipeline); replies[i] owned by the caller. false when the
 * connection failed (replies all NULL). */
static bool pipeline(struct bank_remote *r, struct conn *cn, const char *what, int n,
                     const int *argcs, const char *const *const *argvs, const size_t *const *lens,
                     redisReply **replies)
{
    for (int i = 0; i < n; i++) replies[i] = NULL;
    if (!conn_ready(r, cn)) return false;
    for (int i = 0; i < n; i++)
        if (redisAppendCommandArgv(cn->c, argcs[i], (const char **)argvs[i], lens[i]) != REDIS_OK) goto fail;
    for (int i = 0; i < n; i++) {
        void *rep = NULL;
        if (redisGetReply(cn->c, &rep) != REDIS_OK || !rep) goto fail;
        replies[i] = rep;
    }
    return true;
fail:
    conn_failed(r, cn, what);
    for (int i = 0; i < n; i++) {
        if (replies[i]) freeReplyObject(replies[i]);
        replies[i] = NULL;
    }
    return false;
}

/* Best effort: a value provably wrong leaves Redis (invariant 1). */
static void delete_key(struct bank_remote *r, const char *key)
{
    const char *argv[2] = { "DEL", key };
    size_t lens[2] = { 3, strlen(key) };
    redisReply *rep = call(r, &r->lk, "DEL", 2, argv, lens);
    if (!rep) return;
    if (rep->type == REDIS_REPLY_INTEGER && rep->integer > 0) {
        pthread_mutex_lock(&r->mu);
        r->st.deleted_bad++;
        pthread_mutex_unlock(&r->mu);
    }
    freeReplyObject(rep);
}

static void count(struct bank_remote *r, uint64_t *field, uint64_t v)
{
    pthread_mutex_lock(&r->mu);
    *field += v;
    pthread_mutex_unlock(&r->mu);
}

/* ---- lookup ------------------------------------------------------------------------- */

enum fetch { FT_OK, FT_EVICTED, FT_BAD, FT_DOWN };

/* ---- chunk bodies straight off the socket ---------------------------------------------
 * hiredis copies a bulk reply three times (socket buffer, its read buffer, the reply
 * object); a restore moves hundreds of MB, so chunk GETs bypass its reader: the command
 * is written on the connection's socket and the reply's payload is received straight into
 * its place in the hit (one copy), hashed there. Only when hiredis holds nothing unread or
 * unsent; any surprise on the wire drops the connection (the next call reconnects). */

struct rawio {
    int fd;
    uint8_t *buf;             /* RAW_BUF bytes: reply headers and what comes with them */
    size_t pos, len;
};
#define RAW_BUF 65536

/* 1: got bytes; 0: EOF; -1: error or timeout (errno) */
static int raw_recv(int fd, void *dst, size_t n, size_t *got)
{
    for (;;) {
        ssize_t k = recv(fd, dst, n, 0);
        if (k > 0) { *got = (size_t)k; return 1; }
        if (k == 0) return 0;
        if (errno != EINTR) return -1;
    }
}

/* Copy n bytes of the stream into dst (NULL: into nothing), feeding the hash. */
static bool raw_take(struct rawio *io, uint8_t *dst, size_t n, XXH3_state_t *h)
{
    while (n) {
        if (io->pos < io->len) {
            size_t k = HS_MIN(n, io->len - io->pos);
            if (dst) { memcpy(dst, io->buf + io->pos, k); dst += k; }
            XXH3_128bits_update(h, io->buf + io->pos, k);
            io->pos += k;
            n -= k;
            continue;
        }
        size_t got = 0;
        if (dst && n >= RAW_BUF) { /* big: straight into place */
            if (raw_recv(io->fd, dst, n, &got) != 1) return false;
            XXH3_128bits_update(h, dst, got);
            dst += got;
            n -= got;
        } else {
            io->pos = io->len = 0;
            if (raw_recv(io->fd, io->buf, RAW_BUF, &got) != 1) return false;
            io->len = got;
        }
    }
    return true;
}

/* One reply line (without \r\n) into line; false on a failure or a line over cap. */
static bool raw_line(struct rawio *io, char *line, size_t cap)
{
    size_t n = 0;
    for (;;) {
        if (io->pos == io->len) {
            size_t got = 0;
            io->pos = io->len = 0;
            if (raw_recv(io->fd, io->buf, RAW_BUF, &got) != 1) return false;
            io->len = got;
        }
        char ch = (char)io->buf[io->pos++];
        if (ch == '\n') {
            if (n == 0 || line[n - 1] != '\r') return false;
            line[n - 1] = 0;
            return true;
        }
        if (n + 1 >= cap) return false;
        line[n++] = ch;
    }
}

static bool raw_send(int fd, const char *b, size_t n)
{
    while (n) {
        ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        b += k;
        n -= (size_t)k;
    }
    return true;
}

/* Where the bytes of a blob go: [0, 160) the header, then ids, KV rows and (when wanted)
 * the snapshot straight into the hit's buffer. */
struct scatter {
    uint64_t end[4];
    uint8_t *dst[4];
};

/* Receive blob bytes [off, off + n) into their places (NULL places: read and hashed only). */
static bool raw_scatter(struct rawio *io, const struct scatter *sc, uint64_t off, uint64_t n, XXH3_state_t *h)
{
    uint64_t lo = 0;
    for (int i = 0; i < 4 && n; i++) {
        uint64_t hi = sc->end[i];
        if (off < hi) {
            uint64_t k = HS_MIN(n, hi - off);
            if (!raw_take(io, sc->dst[i] ? sc->dst[i] + (off - lo) : NULL, (size_t)k, h)) return false;
            off += k;
            n -= k;
        }
        lo = hi;
    }
    return n == 0;
}

static void conn_drop(struct conn *cn)
{
    if (cn->c) redisFree(cn->c);
    cn->c = NULL;
}

/* Fetch and verify one blob of a chain: m names it (already matched to the identity exp
 * asks), its bytes go to ids_dst / kv_dst / snap_dst (NULL: not fetched, not checked). */
static enum fetch fetch_blob(struct bank_remote *r, const struct manifest *m, const struct blob_hdr *exp,
                             int32_t *ids_dst, uint8_t *kv_dst, uint8_t *snap_dst,
                             const int32_t *want_ids, uint64_t *bytes)
{
    uint64_t n = m->pos - m->start;
    uint8_t hb[HDR_SIZE];
    struct scatter sc;
    sc.end[0] = HDR_SIZE;
    sc.end[1] = sc.end[0] + 4 * n;
    sc.end[2] = sc.end[1] + n * m->row;
    sc.end[3] = sc.end[2] + m->snap;
    sc.dst[0] = hb;
    sc.dst[1] = (uint8_t *)ids_dst;
    sc.dst[2] = kv_dst;
    sc.dst[3] = snap_dst;
    uint64_t need = snap_dst ? m->blob_len : sc.end[2];
    uint32_t n_need = (uint32_t)((need + m->chunk_bytes - 1) / m->chunk_bytes);
    if (!conn_ready(r, &r->lk)) return FT_DOWN;
    redisContext *c = r->lk.c;
    if (c->reader->pos != c->reader->len || (c->obuf && c->obuf[0])) {
        conn_drop(&r->lk); /* hiredis holds bytes of its own: start clean */
        if (!conn_ready(r, &r->lk)) return FT_DOWN;
        c = r->lk.c;
    }
    struct rawio io = { c->fd, hs_malloc(RAW_BUF), 0, 0 };
    XXH3_state_t *h = XXH3_createState();
    enum fetch res = FT_OK;
    bool wire_ok = true;
    char bad[160] = "";
    /* GETs pipelined FETCH_DEPTH deep (measured: several multi-MiB values in one MGET
     * reply ran 5-10x slower on loopback than a few GETs in flight) */
    uint32_t sent = 0, got = 0;
    char names[FETCH_DEPTH][160];
    while (got < n_need && res == FT_OK && wire_ok) {
        for (; sent < n_need && sent - got < FETCH_DEPTH && wire_ok; sent++) {
            char *nm = names[sent % FETCH_DEPTH];
            remote_key_chunk(r->prefix, m->chunk_ids[sent], nm, sizeof names[0]);
            char cmd[224];
            int cl = snprintf(cmd, sizeof cmd, "*2\r\n$3\r\nGET\r\n$%zu\r\n%s\r\n", strlen(nm), nm);
            wire_ok = raw_send(io.fd, cmd, (size_t)cl);
        }
        if (!wire_ok) break;
        uint32_t i = got++;
        const char *nm = names[i % FETCH_DEPTH];
        uint64_t off = (uint64_t)i * m->chunk_bytes;
        uint64_t want = HS_MIN(m->chunk_bytes, m->blob_len - off);
        char line[256];
        if (!raw_line(&io, line, sizeof line)) { wire_ok = false; break; }
        if (strcmp(line, "$-1") == 0) {
            res = FT_EVICTED; /* the manifest is stale (fetch_chain deletes it) */
            break;
        }
        if (line[0] == '-') {
            pthread_mutex_lock(&r->mu);
            count_err(r, strncmp(line + 1, "OOM", 3) == 0 ? EK_OOM : EK_REPLY);
            snprintf(r->st.last_error, sizeof r->st.last_error, "GET chunk: %.200s", line + 1);
            pthread_mutex_unlock(&r->mu);
            res = FT_DOWN;
            break;
        }
        char *end = NULL;
        unsigned long long len = line[0] == '$' ? strtoull(line + 1, &end, 10) : 0;
        if (line[0] != '$' || !end || *end || len != want) {
            if (line[0] != '$' || !end || *end) { wire_ok = false; break; } /* not a bulk string */
            snprintf(bad, sizeof bad, "%s", nm); /* wrong length: never read it */
            count(r, &r->st.bad_chunk, 1);
            log_warn("bank remote: chunk %s: wrong length; deleted, not restored", nm);
            res = FT_BAD;
            break;
        }
        XXH3_128bits_reset(h);
        char crlf[2];
        if (!raw_scatter(&io, &sc, off, want, h) || !raw_line(&io, crlf, sizeof crlf)) { wire_ok = false; break; }
        XXH128_canonical_t cid;
        XXH128_canonicalFromHash(&cid, XXH3_128bits_digest(h));
        if (memcmp(cid.digest, m->chunk_ids[i], MANIFEST_CHUNK_ID) != 0) {
            snprintf(bad, sizeof bad, "%s", nm);
            count(r, &r->st.bad_chunk, 1);
            log_warn("bank remote: chunk %s: bytes do not match its id; deleted, not restored", nm);
            res = FT_BAD;
            break;
        }
        *bytes += want;
    }
    XXH3_freeState(h);
    hs_free(io.buf);
    if (!wire_ok) {
        int e = errno;
        conn_drop(&r->lk);
        mark_down(r, e == EAGAIN || e == EWOULDBLOCK ? EK_TIMEOUT : EK_IO, "GET chunk", e ? strerror(e) : "bad reply");
        return FT_DOWN;
    }
    /* stopped early (replies or a payload still on the wire) or bytes read past the last
     * reply: the connection is not in a state hiredis knows */
    if (res != FT_OK || got < sent || io.pos < io.len) conn_drop(&r->lk);
    if (bad[0]) delete_key(r, bad);
    if (res != FT_OK) return res;
    struct blob_hdr hd;
    enum rd v = blob_check_header(hb, m->blob_len, exp, &hd);
    if (v == RD_OK) v = blob_check_payload(&hd, ids_dst, kv_dst, snap_dst, want_ids);
    if (v != RD_OK) {
        char hk[65];
        blob_key_hex(m->key, hk);
        count(r, &r->st.bad_blob, 1);
        log_warn("bank remote: entry %s: %s; not restored", hk, blob_rd_name(v));
        return FT_BAD;
    }
    return FT_OK;
}

/* GET and decode the manifest of key; FT_EVICTED when there is none, FT_BAD (deleted)
 * when it does not decode or names another entry than exp asks. */
static enum fetch get_manifest(struct bank_remote *r, const uint8_t key[32], const struct blob_hdr *exp,
                               struct manifest *m)
{
    char name[160];
    remote_key_manifest(r->prefix, key, name, sizeof name);
    const char *argv[2] = { "GET", name };
    size_t lens[2] = { 3, strlen(name) };
    redisReply *rep = call(r, &r->lk, "GET manifest", 2, argv, lens);
    if (!rep) return FT_DOWN;
    enum fetch res = FT_OK;
    memset(m, 0, sizeof *m);
    bool ok = rep->type == REDIS_REPLY_STRING && manifest_decode((const uint8_t *)rep->str, rep->len, m);
    if (reply_error(r, rep, "GET manifest")) res = FT_DOWN;
    else if (rep->type == REDIS_REPLY_NIL) res = FT_EVICTED;
    else if (ok && (m->row != exp->row || m->snap != exp->snap)) res = FT_EVICTED; /* not this chain's sizes */
    else if (!ok || memcmp(m->key, exp->key, 32) != 0 || m->fp != exp->fp || m->pos != exp->pos) {
        count(r, &r->st.bad_manifest, 1);
        log_warn("bank remote: manifest %s does not decode or names another entry; deleted", name);
        res = FT_BAD;
    }
    if (res != FT_OK) manifest_free(m);
    freeReplyObject(rep);
    if (res == FT_BAD) delete_key(r, name);
    return res;
}

/* Restore the chain whose tail manifest is tail (identity matched) into hit. */
static enum fetch fetch_chain(struct bank_remote *r, const struct manifest *tail, const int32_t *ids,
                              struct bank_disk_hit *hit)
{
    const int64_t p = (int64_t)tail->pos;
    const size_t rowb = tail->row, snapb = tail->snap;
    size_t ids_b = (size_t)p * 4, kv_b = (size_t)p * rowb;
    struct bank_hitbuf *hb = hitbuf_new(ids_b + kv_b + snapb + 1);
    uint8_t *buf = hb->mem;
    int32_t *dst_ids = (int32_t *)buf;
    uint8_t *dst_kv = buf + ids_b, *dst_snap = dst_kv + kv_b;
    struct manifest cur = *tail;
    cur.chunk_ids = hs_malloc((size_t)tail->n_chunks * MANIFEST_CHUNK_ID);
    memcpy(cur.chunk_ids, tail->chunk_ids, (size_t)tail->n_chunks * MANIFEST_CHUNK_ID);
    uint64_t bytes = 0;
    int64_t blobs = 0;
    enum fetch res = FT_OK;
    for (;;) {
        struct blob_hdr exp = {0};
        exp.fp = cur.fp;
        exp.start = cur.start;
        exp.pos = cur.pos;
        exp.row = rowb;
        exp.snap = snapb;
        memcpy(exp.key, cur.key, 32);
        /* the parent as the request's ids give it: a blob naming any other is refused */
        if (cur.start > 0) {
            struct blob_keys ks;
            blob_keys_init(&ks, cur.fp, ids);
            blob_keys_at(&ks, (int64_t)cur.start, exp.parent);
            blob_keys_free(&ks);
        }
        res = fetch_blob(r, &cur, &exp, dst_ids + cur.start, dst_kv + (size_t)cur.start * rowb,
                         blobs == 0 ? dst_snap : NULL, ids + cur.start, &bytes);
        blobs++;
        if (res == FT_EVICTED) {
            /* a chunk of this entry is gone: its manifest can never serve again, and while
             * it stands no replica uploads the entry anew (upload sees it whole first) */
            char name[160];
            remote_key_manifest(r->prefix, cur.key, name, sizeof name);
            delete_key(r, name);
        }
        if (res != FT_OK || cur.start == 0) break;
        if (blobs >= CHAIN_MAX) { res = FT_BAD; break; }
        struct blob_hdr pexp = exp;
        memcpy(pexp.key, exp.parent, 32);
        pexp.pos = cur.start;
        manifest_free(&cur);
        res = get_manifest(r, pexp.key, &pexp, &cur);
        if (res != FT_OK) break;
    }
    manifest_free(&cur);
    if (res != FT_OK) {
        hitbuf_unref(hb);
        return res;
    }
    hit->pos = p;
    hit->kind = (enum bank_snap_kind)tail->kind;
    hit->buf_ = hb;
    hit->ids = dst_ids;
    hit->kv = dst_kv;
    hit->kv_bytes = kv_b;
    hit->snapshot = dst_snap;
    hit->snapshot_bytes = snapb;
    hit->n_blobs = blobs;
    pthread_mutex_lock(&r->mu);
    r->st.hits++;
    r->st.hit_tokens += (uint64_t)p;
    r->st.hit_bytes += bytes;
    r->st.hit_blobs += (uint64_t)blobs;
    pthread_mutex_unlock(&r->mu);
    return FT_OK;
}

static int i64_cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Page `page` of the positions stored for fp in (lo, hi], deepest first, returned
 * ascending and unique; *more: Redis may hold further pages. NULL when none or a failure. */
static int64_t *positions(struct bank_remote *r, uint64_t fp, int64_t lo, int64_t hi, int page, int *n_out,
                          bool *more)
{
    *n_out = 0;
    *more = false;
    char name[160], smax[32], smin[32], off[16], cnt[16];
    remote_key_positions(r->prefix, fp, name, sizeof name);
    snprintf(smax, sizeof smax, "%" PRId64, hi);
    snprintf(smin, sizeof smin, "(%" PRId64, lo);
    snprintf(off, sizeof off, "%d", page * POS_PAGE);
    snprintf(cnt, sizeof cnt, "%d", POS_PAGE);
    const char *argv[7] = { "ZREVRANGEBYSCORE", name, smax, smin, "LIMIT", off, cnt };
    size_t lens[7];
    for (int i = 0; i < 7; i++) lens[i] = strlen(argv[i]);
    redisReply *rep = call(r, &r->lk, "ZREVRANGEBYSCORE", 7, argv, lens);
    if (!rep) return NULL;
    int64_t *v = NULL;
    if (!reply_error(r, rep, "ZREVRANGEBYSCORE") && rep->type == REDIS_REPLY_ARRAY && rep->elements) {
        *more = rep->elements == POS_PAGE;
        v = hs_malloc(rep->elements * sizeof *v);
        int n = 0;
        for (size_t i = 0; i < rep->elements; i++) {
            const redisReply *e = rep->element[i];
            if (e->type != REDIS_REPLY_STRING || e->len == 0 || e->len > 18) continue;
            char t[24];
            memcpy(t, e->str, e->len);
            t[e->len] = 0;
            char *end;
            long long x = strtoll(t, &end, 10);
            if (*end || x <= lo || x > hi) continue; /* not ours to trust: skipped */
            v[n++] = x;
        }
        qsort(v, (size_t)n, sizeof *v, i64_cmp);
        int u = 0;
        for (int i = 0; i < n; i++)
            if (u == 0 || v[u - 1] != v[i]) v[u++] = v[i];
        *n_out = u;
    }
    freeReplyObject(rep);
    return v;
}

/* MGET the manifests of candidates top, top-1, ... (k of them) and restore the first whose
 * chain verifies; true with hit filled. *down when Redis failed. */
static bool try_manifests(struct bank_remote *r, uint64_t fp, size_t kv_row_bytes, size_t snapshot_bytes,
                          const int32_t *ids, const int64_t *pos, uint8_t (*keys)[32], int top, int k,
                          struct bank_disk_hit *hit, bool *down)
{
    char names[MGET_MANIFESTS][160];
    const char *argv[MGET_MANIFESTS + 1];
    size_t lens[MGET_MANIFESTS + 1];
    argv[0] = "MGET";
    lens[0] = 4;
    for (int i = 0; i < k; i++) {
        remote_key_manifest(r->prefix, keys[top - i], names[i], sizeof names[i]);
        argv[1 + i] = names[i];
        lens[1 + i] = strlen(names[i]);
    }
    redisReply *rep = call(r, &r->lk, "MGET manifests", k + 1, argv, lens);
    if (!rep) { *down = true; return false; }
    bool found = false;
    if (reply_error(r, rep, "MGET manifests") || rep->type != REDIS_REPLY_ARRAY || rep->elements != (size_t)k) {
        freeReplyObject(rep);
        *down = true;
        return false;
    }
    for (int i = 0; i < k && !found && !*down; i++) {
        const redisReply *e = rep->element[i];
        if (e->type == REDIS_REPLY_NIL) continue;
        struct manifest m;
        bool ok = e->type == REDIS_REPLY_STRING && manifest_decode((const uint8_t *)e->str, e->len, &m);
        if (ok && (m.row != kv_row_bytes || m.snap != snapshot_bytes)) {
            manifest_free(&m); /* other state sizes: not this lookup's (as disk's index) */
            continue;
        }
        if (!ok || memcmp(m.key, keys[top - i], 32) != 0 || m.fp != fp || (int64_t)m.pos != pos[top - i]) {
            /* a manifest under the key of this exact prefix naming another prefix is
             * corrupt (the key is SHA-256 of fp and the ids) */
            manifest_free(&m);
            count(r, &r->st.bad_manifest, 1);
            log_warn("bank remote: manifest %s does not decode or names another entry; deleted", names[i]);
            delete_key(r, names[i]);
            continue;
        }
        enum fetch f = fetch_chain(r, &m, ids, hit);
        manifest_free(&m);
        if (f == FT_OK) found = true;
        else if (f == FT_EVICTED) count(r, &r->st.evicted, 1);
        else if (f == FT_DOWN) *down = true;
    }
    freeReplyObject(rep);
    return found;
}

void bank_remote_lookup(struct bank_remote *r, uint64_t fp, size_t kv_row_bytes,
                        size_t snapshot_bytes, const int32_t *ids, int64_t n, int64_t min_pos,
                        int64_t max_pos, struct bank_disk_hit *hit)
{
    memset(hit, 0, sizeof *hit);
    if (!r || !ids) return;
    int64_t hi = HS_MIN(n - 1, max_pos);
    if (hi <= min_pos || hi < 1) return;
    count(r, &r->st.lookups, 1);
    pthread_mutex_lock(&r->lk_mu);
    bool found = false, down = false, more = is_up(r);
    for (int page = 0; page < POS_PAGES_MAX && more && !found && !down; page++) {
        int np = 0;
        int64_t *pos = positions(r, fp, HS_MAX(min_pos, 0), hi, page, &np, &more);
        if (!np) { /* none, or a page of values that are not positions */
            hs_free(pos);
            continue;
        }
        uint8_t (*keys)[32] = hs_malloc((size_t)np * 32);
        struct blob_keys ks;
        blob_keys_init(&ks, fp, ids);
        for (int i = 0; i < np; i++) blob_keys_at(&ks, pos[i], keys[i]);
        blob_keys_free(&ks);
        for (int top = np - 1; top >= 0 && !found && !down; top -= MGET_MANIFESTS)
            found = try_manifests(r, fp, kv_row_bytes, snapshot_bytes, ids, pos, keys, top,
                                  HS_MIN(MGET_MANIFESTS, top + 1), hit, &down);
        hs_free(pos);
        hs_free(keys);
    }
    pthread_mutex_unlock(&r->lk_mu);
    if (!found) count(r, &r->st.misses, 1);
}

/* ---- upload ------------------------------------------------------------------------- */

static bool write_paused(struct bank_remote *r)
{
    pthread_mutex_lock(&r->mu);
    bool p = now_ms() < r->write_pause_until_ms;
    pthread_mutex_unlock(&r->mu);
    return p;
}

static void pause_writes(struct bank_remote *r, const char *why)
{
    pthread_mutex_lock(&r->mu);
    bool first = now_ms() >= r->write_pause_until_ms;
    r->backoff_ms = r->backoff_ms ? HS_MIN(r->backoff_ms * 2, BACKOFF_CAP_MS) : r->o.retry_ms;
    r->write_pause_until_ms = now_ms() + r->backoff_ms;
    uint32_t wait = r->backoff_ms;
    pthread_mutex_unlock(&r->mu);
    if (first) log_warn("bank remote: %s: %s; uploads paused for %u ms (lookups go on)", r->shown, why, wait);
}

enum up { UP_DONE, UP_SKIP, UP_FAIL };

/* Is the entry key in Redis whole: its manifest there, decoding, and every chunk it names
 * present? 1 yes, 0 no (missing, or a chunk evicted: upload it again), -1 failed. */
static int manifest_complete(struct bank_remote *r, const uint8_t key[32])
{
    char name[160];
    remote_key_manifest(r->prefix, key, name, sizeof name);
    const char *argv[2] = { "GET", name };
    size_t lens[2] = { 3, strlen(name) };
    redisReply *rep = call(r, &r->wr, "GET manifest", 2, argv, lens);
    if (!rep) return -1;
    struct manifest m;
    int v = reply_error(r, rep, "GET manifest") ? -1
          : rep->type == REDIS_REPLY_STRING && manifest_decode((const uint8_t *)rep->str, rep->len, &m) ? 1 : 0;
    freeReplyObject(rep);
    if (v != 1) return v;
    const char **av = hs_malloc(((size_t)m.n_chunks + 1) * sizeof *av);
    size_t *al = hs_malloc(((size_t)m.n_chunks + 1) * sizeof *al);
    char (*names)[160] = hs_malloc((size_t)m.n_chunks * 160);
    av[0] = "EXISTS";
    al[0] = 6;
    for (uint32_t i = 0; i < m.n_chunks; i++) {
        remote_key_chunk(r->prefix, m.chunk_ids[i], names[i], sizeof names[i]);
        av[1 + i] = names[i];
        al[1 + i] = strlen(names[i]);
    }
    rep = call(r, &r->wr, "EXISTS chunks", (int)m.n_chunks + 1, av, al);
    v = !rep ? -1 : reply_error(r, rep, "EXISTS chunks") || rep->type != REDIS_REPLY_INTEGER ? -1
      : rep->integer == (long long)m.n_chunks;
    if (rep) freeReplyObject(rep);
    hs_free(av);
    hs_free(al);
    hs_free(names);
    manifest_free(&m);
    return v;
}

/* ZADD positions(fp) pos pos: how a lookup finds the entry. */
static bool add_position(struct bank_remote *r, uint64_t fp, int64_t pos)
{
    char name[160], p[32];
    remote_key_positions(r->prefix, fp, name, sizeof name);
    snprintf(p, sizeof p, "%" PRId64, pos);
    const char *argv[4] = { "ZADD", name, p, p };
    size_t lens[4] = { 4, strlen(name), strlen(p), strlen(p) };
    redisReply *rep = call(r, &r->wr, "ZADD", 4, argv, lens);
    if (!rep) return false;
    bool ok = !reply_error(r, rep, "ZADD");
    if (!ok && strncmp(rep->str, "OOM", 3) == 0) pause_writes(r, rep->str);
    freeReplyObject(rep);
    return ok;
}

/* Upload the stored entry hk (its parent first): invariant 4. */
static enum up upload(struct bank_remote *r, const char *hk, int depth)
{
    uint8_t key[32];
    if (!blob_key_unhex(hk, key)) return UP_SKIP;
    int ex = manifest_complete(r, key);
    if (ex < 0) return UP_FAIL;
    struct disk_row row;
    if (ex == 1) {
        /* keep it findable: the positions set may have been evicted on its own */
        if (disk_entry_row(r->disk, hk, &row) && !add_position(r, row.fp, row.pos)) return UP_FAIL;
        count(r, &r->st.already_stored, 1);
        return UP_DONE;
    }
    uint8_t *blob;
    size_t len;
    enum rd v = disk_entry_read(r->disk, hk, &row, &blob, &len);
    if (v != RD_OK) {
        count(r, &r->st.upload_skipped, 1);
        return UP_SKIP;
    }
    if (row.parent[0]) {
        if (depth >= CHAIN_MAX) { hs_free(blob); return UP_SKIP; }
        enum up pu = upload(r, row.parent, depth + 1);
        if (pu != UP_DONE) { hs_free(blob); return pu; }
    }
    struct manifest m = {0};
    memcpy(m.key, key, 32);
    blob_key_unhex(row.parent, m.parent);
    m.fp = row.fp;
    m.start = (uint64_t)row.start;
    m.pos = (uint64_t)row.pos;
    m.row = row.row;
    m.snap = row.snap;
    m.kind = (uint32_t)row.kind;
    m.blob_len = len;
    m.chunk_bytes = r->o.chunk_bytes;
    m.n_chunks = (uint32_t)((len + m.chunk_bytes - 1) / m.chunk_bytes);
    m.chunk_ids = hs_malloc((size_t)m.n_chunks * MANIFEST_CHUNK_ID);
    enum up res = UP_DONE;
    char names[UPLOAD_PIPELINE][160];
    const char *argvs[UPLOAD_PIPELINE][3];
    size_t lens[UPLOAD_PIPELINE][3];
    const char *const *argp[UPLOAD_PIPELINE];
    const size_t *lenp[UPLOAD_PIPELINE];
    int argcs[UPLOAD_PIPELINE];
    redisReply *reps[UPLOAD_PIPELINE];
    for (uint32_t g = 0; g < m.n_chunks && res == UP_DONE; g += UPLOAD_PIPELINE) {
        int k = (int)HS_MIN((uint32_t)UPLOAD_PIPELINE, m.n_chunks - g);
        for (int i = 0; i < k; i++) {
            uint64_t off = (uint64_t)(g + (uint32_t)i) * m.chunk_bytes;
            size_t cl = (size_t)HS_MIN(m.chunk_bytes, len - off);
            manifest_chunk_id(blob + off, cl, m.chunk_ids[g + (uint32_t)i]);
            remote_key_chunk(r->prefix, m.chunk_ids[g + (uint32_t)i], names[i], sizeof names[i]);
            argvs[i][0] = "SET"; lens[i][0] = 3;
            argvs[i][1] = names[i]; lens[i][1] = strlen(names[i]);
            argvs[i][2] = (const char *)blob + off; lens[i][2] = cl;
            argp[i] = argvs[i];
            lenp[i] = lens[i];
            argcs[i] = 3;
        }
        if (!pipeline(r, &r->wr, "SET chunks", k, argcs, argp, lenp, reps)) { res = UP_FAIL; break; }
        for (int i = 0; i < k; i++) {
            if (res == UP_DONE && reply_error(r, reps[i], "SET chunk")) {
                if (strncmp(reps[i]->str, "OOM", 3) == 0) pause_writes(r, reps[i]->str);
                res = UP_SKIP;
            }
            freeReplyObject(reps[i]);
        }
        if (res == UP_DONE) count(r, &r->st.upload_chunks, (uint64_t)k);
    }
    hs_free(blob);
    if (res == UP_DONE) {
        size_t ml;
        uint8_t *mb = manifest_encode(&m, &ml);
        char name[160];
        remote_key_manifest(r->prefix, key, name, sizeof name);
        const char *argv[3] = { "SET", name, (const char *)mb };
        size_t ls[3] = { 3, strlen(name), ml };
        redisReply *rep = call(r, &r->wr, "SET manifest", 3, argv, ls);
        hs_free(mb);
        if (!rep) res = UP_FAIL;
        else {
            if (reply_error(r, rep, "SET manifest")) {
                if (strncmp(rep->str, "OOM", 3) == 0) pause_writes(r, rep->str);
                res = UP_SKIP;
            }
            freeReplyObject(rep);
        }
        if (res == UP_DONE && !add_position(r, m.fp, (int64_t)m.pos)) res = UP_SKIP;
    }
    if (res == UP_DONE) {
        pthread_mutex_lock(&r->mu);
        r->st.uploads++;
        r->st.upload_bytes += len;
        pthread_mutex_unlock(&r->mu);
    }
    manifest_free(&m);
    return res;
}

/* ---- the queue and the upload thread ---------------------------------------------- */

static bool less_valuable(const struct upitem *a, const struct upitem *b)
{
    if (a->kind != b->kind) return a->kind > b->kind;
    return a->seq < b->seq;
}

/* Queue hk (caller holds mu). */
static void enqueue_locked(struct bank_remote *r, const char *hk, enum bank_snap_kind kind)
{
    for (int i = 0; i < r->nq; i++)
        if (strcmp(r->q[i].key, hk) == 0) return;
    struct upitem it;
    snprintf(it.key, sizeof it.key, "%s", hk);
    it.kind = kind;
    it.seq = ++r->seq;
    if (r->nq >= r->o.queue_len) {
        int worst = 0;
        for (int i = 1; i < r->nq; i++)
            if (less_valuable(&r->q[i], &r->q[worst])) worst = i;
        r->st.upload_dropped++;
        if (less_valuable(&it, &r->q[worst])) return;
        r->q[worst] = r->q[--r->nq];
    }
    r->q[r->nq++] = it;
    pthread_cond_signal(&r->cv_work);
}

static void on_stored(void *ctx, const char *hexkey, enum bank_snap_kind kind)
{
    struct bank_remote *r = ctx;
    pthread_mutex_lock(&r->mu);
    if (!r->closing) enqueue_locked(r, hexkey, kind);
    pthread_mutex_unlock(&r->mu);
}

/* The disk's head anchors, offered again each time the tier comes up: a replica that
 * computed them while Redis was away still shares them. */
static void offer_heads(struct bank_remote *r)
{
    if (!r->disk) return;
    int n = 0;
    char (*keys)[65] = disk_head_keys(r->disk, r->o.queue_len, &n);
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < n; i++) enqueue_locked(r, keys[i], BANK_SNAP_HEAD);
    pthread_mutex_unlock(&r->mu);
    hs_free(keys);
}

/* Down and due: a fresh connection and a PING (invariant 3). */
static void probe(struct bank_remote *r)
{
    if (r->wr.c) { redisFree(r->wr.c); r->wr.c = NULL; }
    const char *argv[1] = { "PING" };
    size_t lens[1] = { 4 };
    redisReply *rep = call(r, &r->wr, "PING", 1, argv, lens);
    if (!rep) return;
    bool ok = rep->type == REDIS_REPLY_STATUS;
    char msg[200];
    snprintf(msg, sizeof msg, "%s", rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
    freeReplyObject(rep);
    if (!ok) {
        redisFree(r->wr.c);
        r->wr.c = NULL;
        mark_down(r, EK_REPLY, "PING", msg);
        return;
    }
    pthread_mutex_lock(&r->mu);
    bool was_down = !r->up;
    bool had_failed = r->outage_logged;
    r->up = true;
    r->outage_logged = false;
    r->backoff_ms = 0;
    if (was_down && had_failed) r->st.reconnects++;
    r->st.last_error[0] = 0;
    pthread_cond_broadcast(&r->cv_work);
    pthread_mutex_unlock(&r->mu);
    if (was_down && had_failed) log_info("bank remote: %s: reachable again", r->shown);
    if (was_down) offer_heads(r);
}

static void *upload_main(void *arg)
{
    struct bank_remote *r = arg;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        bool up = r->up;
        if (r->closing && (r->nq == 0 || !up)) break;
        int64_t now = now_ms();
        if (!up && now >= r->retry_at_ms) {
            pthread_mutex_unlock(&r->mu);
            probe(r);
            pthread_mutex_lock(&r->mu);
            continue;
        }
        int64_t wake = !up ? r->retry_at_ms : r->nq > 0 && now < r->write_pause_until_ms ? r->write_pause_until_ms : 0;
        if (wake || r->nq == 0) {
            if (r->nq == 0 || !up) pthread_cond_broadcast(&r->cv_idle);
            if (wake) {
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                int64_t wait = HS_MAX(wake - now, (int64_t)1);
                ts.tv_sec += (time_t)(wait / 1000);
                ts.tv_nsec += (long)(wait % 1000) * 1000000L;
                if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
                pthread_cond_timedwait(&r->cv_work, &r->mu, &ts);
            } else {
                pthread_cond_wait(&r->cv_work, &r->mu);
            }
            continue;
        }
        int best = 0;
        for (int i = 1; i < r->nq; i++)
            if (less_valuable(&r->q[best], &r->q[i])) best = i;
        struct upitem it = r->q[best];
        memmove(r->q + best, r->q + best + 1, (size_t)(r->nq - best - 1) * sizeof *r->q);
        r->nq--;
        r->busy = true;
        pthread_mutex_unlock(&r->mu);
        enum up res = write_paused(r) ? UP_SKIP : upload(r, it.key, 0);
        pthread_mutex_lock(&r->mu);
        r->busy = false;
        if (res == UP_FAIL && !r->closing) enqueue_locked(r, it.key, it.kind); /* once up again */
    }
    r->busy = false;
    pthread_cond_broadcast(&r->cv_idle);
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* ---- the seam for remote_tools.c ------------------------------------------------------- */

struct redisReply *remote_command(struct bank_remote *r, const char *what, int argc,
                                  const char **argv, const size_t *lens)
{
    pthread_mutex_lock(&r->lk_mu);
    redisReply *rep = call(r, &r->lk, what, argc, argv, lens);
    pthread_mutex_unlock(&r->lk_mu);
    return rep;
}

const char *remote_prefix(const struct bank_remote *r) { return r->prefix; }

/* ---- public ----------------------------------------------------------------------- */

void bank_remote_opts_default(struct bank_remote_opts *o)
{
    memset(o, 0, sizeof *o);
    o->prefix = "headstart";
    o->timeout_ms = 1000;
    o->chunk_bytes = 4u << 20;
    o->queue_len = 64;
    o->retry_ms = 1000;
}

struct bank_remote *bank_remote_open(const struct bank_remote_opts *o, struct bank_disk *disk,
                                     struct hs_err *err)
{
    struct bank_remote_opts def;
    bank_remote_opts_default(&def);
    struct remote_url u;
    const char *why;
    if (!o || !remote_url_parse(o->url, &u, &why)) {
        char shown[256];
        bank_remote_url_redact(o ? o->url : NULL, shown, sizeof shown);
        hs_err_set(err, HS_ERR_INVALID, "--bank-remote %s: %s", shown, why);
        return NULL;
    }
    const char *prefix = o->prefix && *o->prefix ? o->prefix : def.prefix;
    if (strlen(prefix) > 48 || strpbrk(prefix, " \t\r\n")) {
        hs_err_set(err, HS_ERR_INVALID, "--bank-remote-prefix: at most 48 characters, no spaces");
        return NULL;
    }
    if (o->chunk_bytes && (o->chunk_bytes < 4096 || o->chunk_bytes > (256u << 20))) {
        hs_err_set(err, HS_ERR_INVALID, "remote chunk size %llu: must be 4 KiB .. 256 MiB",
                   (unsigned long long)o->chunk_bytes);
        return NULL;
    }
    struct bank_remote *r = hs_calloc(1, sizeof *r);
    r->o = *o;
    if (!r->o.timeout_ms) r->o.timeout_ms = def.timeout_ms;
    if (!r->o.chunk_bytes) r->o.chunk_bytes = def.chunk_bytes;
    if (r->o.queue_len < 1) r->o.queue_len = def.queue_len;
    if (!r->o.retry_ms) r->o.retry_ms = def.retry_ms;
    r->url = hs_strdup(o->url);
    r->prefix = hs_strdup(prefix);
    r->o.url = r->url;
    r->o.prefix = r->prefix;
    r->u = u;
    r->disk = disk;
    bank_remote_url_redact(r->url, r->shown, sizeof r->shown);
    snprintf(r->st.url, sizeof r->st.url, "%s", r->shown);
    snprintf(r->st.prefix, sizeof r->st.prefix, "%s", r->prefix);
    r->q = hs_calloc((size_t)r->o.queue_len, sizeof *r->q);
    pthread_mutex_init(&r->lk_mu, NULL);
    pthread_mutex_init(&r->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->cv_work, &ca);
    pthread_condattr_destroy(&ca);
    pthread_cond_init(&r->cv_idle, NULL);
    /* hiredis writes with write(2): a peer gone must be an error, not a signal */
    struct sigaction sa;
    if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);
    /* down until the first PING, which the upload thread sends at once */
    r->up = false;
    r->retry_at_ms = 0;
    if (pthread_create(&r->th, NULL, upload_main, r) != 0) {
        hs_err_set(err, HS_ERR_IO, "bank remote: cannot start the upload thread");
        bank_remote_close(r);
        return NULL;
    }
    r->started = true;
    /* wait for that first answer (at most one timeout), so a server that starts with
     * Redis up restores from it from the first request */
    pthread_mutex_lock(&r->mu);
    int64_t until = now_ms() + (int64_t)r->o.timeout_ms * 2 + 100;
    while (!r->up && r->st.err_connect + r->st.err_timeout + r->st.err_io + r->st.err_reply == 0 &&
           now_ms() < until) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 20 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
        pthread_cond_timedwait(&r->cv_work, &r->mu, &ts);
    }
    pthread_mutex_unlock(&r->mu);
    if (disk) bank_disk_set_listener(disk, on_stored, r);
    return r;
}

void bank_remote_flush(struct bank_remote *r)
{
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    while ((r->nq > 0 && r->up) || r->busy) pthread_cond_wait(&r->cv_idle, &r->mu);
    pthread_mutex_unlock(&r->mu);
}

void bank_remote_close(struct bank_remote *r)
{
    if (!r) return;
    if (r->disk) bank_disk_set_listener(r->disk, NULL, NULL);
    pthread_mutex_lock(&r->mu);
    r->closing = true;
    pthread_cond_broadcast(&r->cv_work);
    pthread_mutex_unlock(&r->mu);
    if (r->started) pthread_join(r->th, NULL);
    if (r->lk.c) redisFree(r->lk.c);
    if (r->wr.c) redisFree(r->wr.c);
    pthread_mutex_destroy(&r->lk_mu);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv_work);
    pthread_cond_destroy(&r->cv_idle);
    hs_free(r->q);
    hs_free(r->url);
    hs_free(r->prefix);
    hs_free(r);
}

void bank_remote_stats_get(struct bank_remote *r, struct bank_remote_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    *out = r->st;
    out->up = r->up;
    out->pending = (uint64_t)r->nq + (r->busy ? 1 : 0);
    int64_t now = now_ms();
    out->retry_in_ms = !r->up && r->retry_at_ms > now ? r->retry_at_ms - now : 0;
    pthread_mutex_unlock(&r->mu);
}
