/*
 * remote_tools.c — the remote tier's offline views, behind `headstart bank --remote
 * stats|ls|verify|gc`: what a Redis shared by a fleet holds, whether every entry in it
 * would restore exactly, and the cleanup Redis's own eviction leaves to do (chunks no
 * manifest names, manifests whose chunks or parent were evicted, positions of entries that
 * are gone). It reaches Redis only through remote_command (remote.c's lookup connection),
 * one command at a time: an offline tool, safe next to replicas that use the same Redis.
 *
 * What it reads (remote_fmt.c has the formats): manifests PREFIX:hsb2:m:<key>, chunks
 * PREFIX:hsb2:c:<id>, position sets PREFIX:hsb2:p:<fp>. A view is one pass over them:
 *
 *   SCAN m:* ─▶ MGET, decode ─▶ SCAN c:* (STRLEN each for stats) ─▶ SCAN p:*, ZRANGE each
 *
 * Invariants:
 *   1. Keys are found with SCAN MATCH (the prefix's glob characters escaped) COUNT, never
 *      KEYS: a run next to a fleet never blocks Redis for a whole keyspace. SCAN may name
 *      a key twice; every list is sorted and made unique before use.
 *   2. Manifests are scanned before chunks. A writer SETs an entry's chunks before its
 *      manifest (remote.c, invariant 4), so every chunk a scanned manifest names is in the
 *      chunk scan unless it is really gone (evicted or deleted); gc confirms with EXISTS
 *      before acting on a missing chunk.
 *   3. Nothing that may be a writer's work in progress is deleted: a chunk no manifest
 *      names is an orphan, deleted by gc only when no manifest names it in a second scan
 *      of manifests made just before, and its OBJECT IDLETIME is >= min_idle (60 s by
 *      default; a chunk being uploaded is fresh). Under an LFU policy Redis keeps no idle
 *      time: such orphans are kept and counted (untimed). What remains is a window of
 *      microseconds between the idle check and the DEL; losing it costs a miss, never a
 *      wrong restore (a lookup verifies every chunk).
 *   4. verify reads every chunk of every manifest and checks its length and id, the blob
 *      they make with the disk tier's checks (blob_check, the identity taken from the
 *      manifest: header, size, checksums), and the entry's key recomputed over the whole
 *      chain's ids (SHA-256 of fp ‖ ids[0, pos), blob_keys_*), parents first, exactly as
 *      `bank verify` does on disk. A bad entry is removed (its manifest) with every entry
 *      building on it, a chunk whose bytes are provably wrong too, unless dry_run.
 *   5. gc removes manifests that do not decode, whose chunks are missing, or whose chain
 *      is broken (a parent manifest missing: the whole subtree), orphan chunks (3), then
 *      makes each positions set the positions of the surviving manifests: missing ones
 *      added, others removed (checked against the second scan of 3).
 *   6. A positions set is per fingerprint and shared by every entry that ends at one
 *      position: a position leaves it only when no manifest of that fingerprint ends
 *      there.
 */
#include "bank/blob_int.h"
#include "bank/remote_int.h"

#include <hiredis/hiredis.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SCAN_COUNT "1000"
#define MGET_NAMES 128                  /* manifests per MGET */
#define VERIFY_GROUP_BYTES (16u << 20)  /* chunk bytes per MGET in verify */
#define VERIFY_BLOB_MAX (64ull << 30)   /* a blob verify holds in memory at once */
#define NAME_CAP 160                    /* remote_key_* output (prefix <= 48) */
#define CHAIN_GUARD 4096                /* blobs in one chain (a guard against a cycle) */

_Static_assert(MANIFEST_CHUNK_ID == 16, "bank.h's bank_remote_entry.chunk_ids has 16-byte ids");

/* ---- talking to Redis ------------------------------------------------------------------ */

/* The connection failed (remote.c has marked the tier down): err names the URL and why. */
static int conn_err(struct bank_remote *r, struct hs_err *err, const char *what)
{
    struct bank_remote_stats st;
    bank_remote_stats_get(r, &st);
    return hs_err_set(err, HS_ERR_IO, "redis %s: %s", st.url, st.last_error[0] ? st.last_error : what);
}

/* A command of text arguments. NULL (err set) when the connection failed; an error reply
 * is returned for the caller to judge. */
static redisReply *cmd_raw(struct bank_remote *r, struct hs_err *err, const char *what, int argc,
                           const char **argv)
{
    size_t lens[8];
    for (int i = 0; i < argc; i++) lens[i] = strlen(argv[i]);
    redisReply *rep = remote_command(r, what, argc, argv, lens);
    if (!rep) conn_err(r, err, what);
    return rep;
}

/* As cmd_raw, an error reply too is a failure (err set, NULL). */
static redisReply *cmd(struct bank_remote *r, struct hs_err *err, const char *what, int argc,
                       const char **argv)
{
    redisReply *rep = cmd_raw(r, err, what, argc, argv);
    if (rep && rep->type == REDIS_REPLY_ERROR) {
        struct bank_remote_stats st;
        bank_remote_stats_get(r, &st);
        hs_err_set(err, HS_ERR_IO, "redis %s: %s: %s", st.url, what, rep->str);
        freeReplyObject(rep);
        return NULL;
    }
    return rep;
}

static int del_key(struct bank_remote *r, struct hs_err *err, const char *name)
{
    const char *argv[2] = { "DEL", name };
    redisReply *rep = cmd(r, err, "DEL", 2, argv);
    if (!rep) return err->code;
    freeReplyObject(rep);
    return HS_OK;
}

/* prefix with SCAN's glob characters escaped, then tail ("prefix\*x:hsb2:m:*"). */
static void pattern(const char *prefix, const char *tail, char *out, size_t cap)
{
    size_t o = 0;
    for (const char *p = prefix; *p && o + 3 < cap; p++) {
        if (strchr("*?[]\\", *p)) out[o++] = '\\';
        out[o++] = *p;
    }
    snprintf(out + o, cap - o, "%s", tail);
}

struct names { char **v; size_t n, cap; };

static void names_push(struct names *s, const char *str, size_t len)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->v = hs_realloc(s->v, s->cap * sizeof *s->v);
    }
    char *c = hs_malloc(len + 1);
    memcpy(c, str, len);
    c[len] = 0;
    s->v[s->n++] = c;
}

static void names_free(struct names *s)
{
    for (size_t i = 0; i < s->n; i++) hs_free(s->v[i]);
    hs_free(s->v);
    memset(s, 0, sizeof *s);
}

static int str_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Sorted, unique (SCAN may return a key twice). */
static void names_unique(struct names *s)
{
    if (s->n) qsort(s->v, s->n, sizeof *s->v, str_cmp);
    size_t u = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (u && !strcmp(s->v[u - 1], s->v[i])) { hs_free(s->v[i]); continue; }
        s->v[u++] = s->v[i];
    }
    s->n = u;
}

/* Every key matching prefix-escaped + tail, by SCAN (invariant 1). */
static int scan_keys(struct bank_remote *r, const char *tail, struct names *out, struct hs_err *err)
{
    char pat[2 * NAME_CAP];
    pattern(remote_prefix(r), tail, pat, sizeof pat);
    char cursor[32] = "0";
    do {
        const char *argv[6] = { "SCAN", cursor, "MATCH", pat, "COUNT", SCAN_COUNT };
        redisReply *rep = cmd(r, err, "SCAN", 6, argv);
        if (!rep) return err->code;
        if (rep->type != REDIS_REPLY_ARRAY || rep->elements != 2 || rep->element[0]->type != REDIS_REPLY_STRING ||
            rep->element[0]->len >= sizeof cursor || rep->element[1]->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(rep);
            return hs_err_set(err, HS_ERR_FORMAT, "SCAN: unexpected reply");
        }
        memcpy(cursor, rep->element[0]->str, rep->element[0]->len);
        cursor[rep->element[0]->len] = 0;
        const redisReply *keys = rep->element[1];
        for (size_t i = 0; i < keys->elements; i++)
            if (keys->element[i]->type == REDIS_REPLY_STRING)
                names_push(out, keys->element[i]->str, keys->element[i]->len);
        freeReplyObject(rep);
    } while (strcmp(cursor, "0") != 0);
    names_unique(out);
    return HS_OK;
}

/* The hex tail of name after PREFIX:hsb2:<kind>: into out (n bytes); false when name is
 * not of that shape (a key a tool never touches). */
static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static bool name_tail(const char *prefix, const char *kind, const char *name, uint8_t *out, size_t n)
{
    size_t pl = strlen(prefix), kl = strlen(kind);
    if (strncmp(name, prefix, pl) != 0 || strncmp(name + pl, kind, kl) != 0) return false;
    const char *h = name + pl + kl;
    if (strlen(h) != 2 * n) return false;
    for (size_t i = 0; i < n; i++) {
        int a = hexval(h[2 * i]), b = hexval(h[2 * i + 1]);
        if (a < 0 || b < 0) return false;
        out[i] = (uint8_t)(a << 4 | b);
    }
    return true;
}

/* ---- a view of the keyspace ----------------------------------------------------------- */

struct ment {                   /* one manifest that decodes and is named by its own key */
    struct manifest m;
    int64_t parent;             /* index of the parent's manifest; -1: none or missing */
    bool parent_missing;        /* start > 0 and no consistent parent manifest */
    uint8_t state;              /* verify / gc: 0 not yet, 1 good, 2 bad */
    int32_t *ids;               /* verify, a good entry: ids [start, pos) */
    int64_t children;
};

struct chunkref {
    uint8_t id[MANIFEST_CHUNK_ID];
    uint64_t len;               /* STRLEN, when asked */
    bool named;                 /* by a manifest kept */
};

struct posset {
    uint64_t fp;
    int64_t *pos;               /* ascending, unique */
    size_t n;
    struct names junk;          /* members that are no position */
};

struct view {
    struct ment *e;             /* sorted by key */
    size_t n;
    size_t *order;              /* indices of e by (fp, pos, key): parents before children */
    struct names bad;           /* manifest keys that do not decode or name another entry */
    struct chunkref *c;         /* sorted by id */
    size_t nc;
    struct posset *p;           /* sorted by fp */
    size_t np;
    uint64_t foreign;           /* keys under PREFIX:hsb2:{m,c,p}: that are not one */
};

static void view_free(struct view *v)
{
    for (size_t i = 0; i < v->n; i++) {
        manifest_free(&v->e[i].m);
        hs_free(v->e[i].ids);
    }
    hs_free(v->e);
    hs_free(v->order);
    names_free(&v->bad);
    hs_free(v->c);
    for (size_t i = 0; i < v->np; i++) {
        hs_free(v->p[i].pos);
        names_free(&v->p[i].junk);
    }
    hs_free(v->p);
    memset(v, 0, sizeof *v);
}

static int ment_key_cmp(const void *a, const void *b)
{
    return memcmp(((const struct ment *)a)->m.key, ((const struct ment *)b)->m.key, 32);
}

static const struct ment *g_sort_e; /* qsort has no context argument; single-threaded tool */

static int order_cmp(const void *a, const void *b)
{
    const struct manifest *x = &g_sort_e[*(const size_t *)a].m, *y = &g_sort_e[*(const size_t *)b].m;
    if (x->fp != y->fp) return x->fp < y->fp ? -1 : 1;
    if (x->pos != y->pos) return x->pos < y->pos ? -1 : 1;
    return memcmp(x->key, y->key, 32);
}

static int64_t find_ment(const struct view *v, const uint8_t key[32])
{
    if (!v->n) return -1;
    struct ment probe;
    memcpy(probe.m.key, key, 32);
    const struct ment *f = bsearch(&probe, v->e, v->n, sizeof *v->e, ment_key_cmp);
    return f ? f - v->e : -1;
}

/* MGET the manifests names[0, n) and decode them: good ones into *e (grown), the names of
 * bad ones into bad. A name whose key is gone by now is skipped. */
static int fetch_manifests(struct bank_remote *r, char **names, size_t n, struct ment **e, size_t *ne,
                           struct names *bad, uint64_t *foreign, struct hs_err *err)
{
    const char *prefix = remote_prefix(r);
    const char *argv[MGET_NAMES + 1];
    size_t lens[MGET_NAMES + 1];
    size_t cap = *ne;
    for (size_t g = 0; g < n; g += MGET_NAMES) {
        size_t k = HS_MIN((size_t)MGET_NAMES, n - g);
        argv[0] = "MGET";
        lens[0] = 4;
        for (size_t i = 0; i < k; i++) {
            argv[1 + i] = names[g + i];
            lens[1 + i] = strlen(names[g + i]);
        }
        redisReply *rep = remote_command(r, "MGET manifests", (int)k + 1, argv, lens);
        if (!rep) return conn_err(r, err, "MGET manifests");
        if (rep->type != REDIS_REPLY_ARRAY || rep->elements != k) {
            int rc = hs_err_set(err, HS_ERR_FORMAT, "MGET manifests: %s",
                                rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
            freeReplyObject(rep);
            return rc;
        }
        for (size_t i = 0; i < k; i++) {
            const redisReply *x = rep->element[i];
            if (x->type == REDIS_REPLY_NIL) continue;
            uint8_t key[32];
            if (!name_tail(prefix, ":hsb2:m:", names[g + i], key, 32)) { (*foreign)++; continue; }
            struct manifest m;
            if (x->type != REDIS_REPLY_STRING || !manifest_decode((const uint8_t *)x->str, x->len, &m) ||
                memcmp(m.key, key, 32) != 0) {
                if (x->type == REDIS_REPLY_STRING) manifest_free(&m);
                names_push(bad, names[g + i], strlen(names[g + i]));
                continue;
            }
            if (*ne == cap) {
                cap = cap ? 2 * cap : 64;
                *e = hs_realloc(*e, cap * sizeof **e);
            }
            memset(&(*e)[*ne], 0, sizeof **e);
            (*e)[*ne].m = m;
            (*e)[*ne].parent = -1;
            (*ne)++;
        }
        freeReplyObject(rep);
    }
    return HS_OK;
}

static int chunk_cmp(const void *a, const void *b)
{
    return memcmp(((const struct chunkref *)a)->id, ((const struct chunkref *)b)->id, MANIFEST_CHUNK_ID);
}

static struct chunkref *find_chunk(const struct view *v, const uint8_t id[MANIFEST_CHUNK_ID])
{
    if (!v->nc) return NULL;
    struct chunkref probe;
    memcpy(probe.id, id, MANIFEST_CHUNK_ID);
    return bsearch(&probe, v->c, v->nc, sizeof *v->c, chunk_cmp);
}

static int fp_cmp(const void *a, const void *b)
{
    uint64_t x = ((const struct posset *)a)->fp, y = ((const struct posset *)b)->fp;
    return x < y ? -1 : x > y;
}

static int i64_cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static struct posset *find_posset(const struct view *v, uint64_t fp)
{
    if (!v->np) return NULL;
    struct posset probe = { .fp = fp };
    return bsearch(&probe, v->p, v->np, sizeof *v->p, fp_cmp);
}

static bool posset_has(const struct posset *s, int64_t pos)
{
    return s && s->n && bsearch(&pos, s->pos, s->n, sizeof *s->pos, i64_cmp) != NULL;
}

/* A decimal position as remote.c writes it (1 .. 2^62); false otherwise. */
static bool parse_pos(const char *s, size_t len, int64_t *out)
{
    if (len == 0 || len > 18 || s[0] == '0') return false;
    int64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return true;
}

enum { LOAD_CHUNKS = 1, LOAD_CHUNK_LENS = 2, LOAD_POSITIONS = 4 };

/* The view: manifests, then (what flags ask) chunks and position sets (invariant 2). */
static int view_load(struct bank_remote *r, unsigned flags, struct view *v, struct hs_err *err)
{
    memset(v, 0, sizeof *v);
    const char *prefix = remote_prefix(r);
    struct names mn = {0};
    int rc = scan_keys(r, ":hsb2:m:*", &mn, err);
    if (rc == HS_OK) rc = fetch_manifests(r, mn.v, mn.n, &v->e, &v->n, &v->bad, &v->foreign, err);
    names_free(&mn);
    if (rc != HS_OK) return rc;
    if (v->n) qsort(v->e, v->n, sizeof *v->e, ment_key_cmp);
    v->order = hs_malloc((v->n + 1) * sizeof *v->order);
    for (size_t i = 0; i < v->n; i++) v->order[i] = i;
    g_sort_e = v->e;
    if (v->n) qsort(v->order, v->n, sizeof *v->order, order_cmp);
    /* parents, in (fp, pos) order so a parent's verdict is known before its children's */
    for (size_t j = 0; j < v->n; j++) {
        struct ment *x = &v->e[v->order[j]];
        if (x->m.start == 0) continue;
        int64_t pi = find_ment(v, x->m.parent);
        const struct ment *p = pi >= 0 ? &v->e[pi] : NULL;
        if (!p || p->m.pos != x->m.start || p->m.fp != x->m.fp || p->m.row != x->m.row || p->m.snap != x->m.snap) {
            x->parent_missing = true;
            continue;
        }
        x->parent = pi;
        v->e[pi].children++;
    }
    if (flags & (LOAD_CHUNKS | LOAD_CHUNK_LENS)) {
        struct names cn = {0};
        rc = scan_keys(r, ":hsb2:c:*", &cn, err);
        if (rc == HS_OK) {
            v->c = hs_malloc((cn.n + 1) * sizeof *v->c);
            for (size_t i = 0; i < cn.n; i++) {
                struct chunkref *c = &v->c[v->nc];
                memset(c, 0, sizeof *c);
                if (!name_tail(prefix, ":hsb2:c:", cn.v[i], c->id, MANIFEST_CHUNK_ID)) { v->foreign++; continue; }
                if (flags & LOAD_CHUNK_LENS) {
                    const char *argv[2] = { "STRLEN", cn.v[i] };
                    redisReply *rep = cmd_raw(r, err, "STRLEN", 2, argv);
                    if (!rep) { rc = err->code; break; }
                    bool other = rep->type != REDIS_REPLY_INTEGER; /* WRONGTYPE: not a value */
                    if (!other) c->len = (uint64_t)HS_MAX(rep->integer, 0LL);
                    bool gone = !other && rep->integer == 0;
                    freeReplyObject(rep);
                    if (other) { v->foreign++; continue; }
                    if (gone) continue; /* deleted or evicted since the scan */
                }
                v->nc++;
            }
            if (v->nc) qsort(v->c, v->nc, sizeof *v->c, chunk_cmp);
        }
        names_free(&cn);
        if (rc != HS_OK) return rc;
    }
    if (flags & LOAD_POSITIONS) {
        struct names pn = {0};
        rc = scan_keys(r, ":hsb2:p:*", &pn, err);
        if (rc == HS_OK) v->p = hs_calloc(pn.n + 1, sizeof *v->p);
        for (size_t i = 0; rc == HS_OK && i < pn.n; i++) {
            uint8_t fb[8];
            if (!name_tail(prefix, ":hsb2:p:", pn.v[i], fb, 8)) { v->foreign++; continue; }
            struct posset *s = &v->p[v->np];
            for (int b = 0; b < 8; b++) s->fp = s->fp << 8 | fb[b];
            const char *argv[4] = { "ZRANGE", pn.v[i], "0", "-1" };
            redisReply *rep = cmd_raw(r, err, "ZRANGE", 4, argv); /* WRONGTYPE: foreign */
            if (!rep) { rc = err->code; break; }
            if (rep->type == REDIS_REPLY_ARRAY) {
                s->pos = hs_malloc((rep->elements + 1) * sizeof *s->pos);
                for (size_t k = 0; k < rep->elements; k++) {
                    const redisReply *x = rep->element[k];
                    if (x->type != REDIS_REPLY_STRING) continue;
                    if (parse_pos(x->str, x->len, &s->pos[s->n])) s->n++;
                    else names_push(&s->junk, x->str, x->len);
                }
                qsort(s->pos, s->n, sizeof *s->pos, i64_cmp);
                v->np++;
            } else {
                v->foreign++; /* a key of another type under our name */
            }
            freeReplyObject(rep);
        }
        names_free(&pn);
        if (rc != HS_OK) return rc;
        if (v->np) qsort(v->p, v->np, sizeof *v->p, fp_cmp);
    }
    return HS_OK;
}

/* Manifests stored since the view was loaded (a writer at work): their (fp, pos) and
 * chunks count as kept (invariant 3). Owned array, *n entries. */
static int late_manifests(struct bank_remote *r, const struct view *v, struct ment **late, size_t *n,
                          struct hs_err *err)
{
    *late = NULL;
    *n = 0;
    struct names mn = {0}, fresh = {0};
    int rc = scan_keys(r, ":hsb2:m:*", &mn, err);
    const char *prefix = remote_prefix(r);
    for (size_t i = 0; rc == HS_OK && i < mn.n; i++) {
        uint8_t key[32];
        if (!name_tail(prefix, ":hsb2:m:", mn.v[i], key, 32)) continue;
        if (find_ment(v, key) < 0) names_push(&fresh, mn.v[i], strlen(mn.v[i]));
    }
    struct names bad = {0};
    uint64_t foreign = 0;
    if (rc == HS_OK) rc = fetch_manifests(r, fresh.v, fresh.n, late, n, &bad, &foreign, err);
    names_free(&mn);
    names_free(&fresh);
    names_free(&bad);
    return rc;
}

static void late_free(struct ment *late, size_t n)
{
    for (size_t i = 0; i < n; i++) manifest_free(&late[i].m);
    hs_free(late);
}

struct fpp { uint64_t fp; int64_t pos; };

static int fpp_cmp(const void *a, const void *b)
{
    const struct fpp *x = a, *y = b;
    if (x->fp != y->fp) return x->fp < y->fp ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

/* The (fp, pos) of v's manifests not found bad (state != 2) and of late[0, n_late),
 * sorted; *n its length. Owned. */
static struct fpp *kept_positions(const struct view *v, const struct ment *late, size_t n_late, size_t *n)
{
    struct fpp *k = hs_malloc((v->n + n_late + 1) * sizeof *k);
    size_t nk = 0;
    for (size_t i = 0; i < v->n + n_late; i++) {
        const struct ment *x = i < v->n ? &v->e[i] : &late[i - v->n];
        if (x->state == 2) continue;
        k[nk].fp = x->m.fp;
        k[nk++].pos = (int64_t)x->m.pos;
    }
    if (nk) qsort(k, nk, sizeof *k, fpp_cmp);
    *n = nk;
    return k;
}

static bool fpp_has(const struct fpp *k, size_t n, uint64_t fp, int64_t pos)
{
    struct fpp probe = { fp, pos };
    return n && bsearch(&probe, k, n, sizeof *k, fpp_cmp) != NULL;
}

/* Make each positions set hold the positions of the kept manifests (state != 2) and the
 * late ones: add those missing (when add), remove the rest (invariant 6). */
static int positions_fix(struct bank_remote *r, const struct view *v, const struct ment *late, size_t n_late,
                         bool add, bool dry_run, uint64_t *added, uint64_t *removed, struct hs_err *err)
{
    const char *prefix = remote_prefix(r);
    size_t nk = 0;
    struct fpp *k = kept_positions(v, late, n_late, &nk);
    int rc = HS_OK;
    /* additions: in (fp, pos) order over the kept manifests */
    for (size_t i = 0; add && rc == HS_OK && i < v->n; i++) {
        const struct ment *x = &v->e[v->order[i]];
        if (x->state == 2) continue;
        if (i > 0 && v->e[v->order[i - 1]].m.fp == x->m.fp && v->e[v->order[i - 1]].m.pos == x->m.pos) continue;
        if (posset_has(find_posset(v, x->m.fp), (int64_t)x->m.pos)) continue;
        (*added)++;
        if (dry_run) continue;
        char name[NAME_CAP], p[32];
        remote_key_positions(prefix, x->m.fp, name, sizeof name);
        snprintf(p, sizeof p, "%" PRIu64, x->m.pos);
        const char *argv[4] = { "ZADD", name, p, p };
        redisReply *rep = cmd(r, err, "ZADD", 4, argv);
        if (!rep) rc = err->code;
        else freeReplyObject(rep);
    }
    /* removals: members no kept manifest ends at, and members that are no position */
    for (size_t s = 0; rc == HS_OK && s < v->np; s++) {
        const struct posset *ps = &v->p[s];
        char name[NAME_CAP];
        remote_key_positions(prefix, ps->fp, name, sizeof name);
        for (size_t j = 0; rc == HS_OK && j < ps->n + ps->junk.n; j++) {
            char p[32];
            const char *member = p;
            if (j < ps->n) {
                if (fpp_has(k, nk, ps->fp, ps->pos[j])) continue;
                snprintf(p, sizeof p, "%" PRId64, ps->pos[j]);
            } else {
                member = ps->junk.v[j - ps->n];
            }
            (*removed)++;
            if (dry_run) continue;
            const char *argv[3] = { "ZREM", name, member };
            redisReply *rep = cmd(r, err, "ZREM", 3, argv);
            if (!rep) rc = err->code;
            else freeReplyObject(rep);
        }
    }
    hs_free(k);
    return rc;
}

/* ---- Redis's memory settings ---------------------------------------------------------- */

/* "field:value" of an INFO text into out; false when absent. */
static bool info_field(const char *text, const char *field, char *out, size_t cap)
{
    size_t fl = strlen(field);
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        if (strncmp(l, field, fl) == 0 && l[fl] == ':') {
            const char *v = l + fl + 1;
            size_t n = strcspn(v, "\r\n");
            if (n >= cap) return false;
            memcpy(out, v, n);
            out[n] = 0;
            return true;
        }
    }
    return false;
}

static bool parse_u64(const char *s, int64_t *out)
{
    char *end;
    long long x = strtoll(s, &end, 10);
    if (!*s || *end || x < 0) return false;
    *out = x;
    return true;
}

/* CONFIG GET name into out; false when refused (a managed Redis may rename CONFIG). */
static bool config_get(struct bank_remote *r, const char *name, char *out, size_t cap)
{
    struct hs_err e;
    hs_err_clear(&e);
    const char *argv[3] = { "CONFIG", "GET", name };
    redisReply *rep = cmd_raw(r, &e, "CONFIG GET", 3, argv);
    if (!rep) return false;
    bool ok = rep->type == REDIS_REPLY_ARRAY && rep->elements == 2 && rep->element[1]->type == REDIS_REPLY_STRING &&
              rep->element[1]->len < cap;
    if (ok) {
        memcpy(out, rep->element[1]->str, rep->element[1]->len);
        out[rep->element[1]->len] = 0;
    }
    freeReplyObject(rep);
    return ok;
}

static void memory_settings(struct bank_remote *r, struct bank_remote_inventory *out)
{
    out->maxmemory = out->used_memory = -1;
    out->policy[0] = 0;
    struct hs_err e;
    hs_err_clear(&e);
    const char *argv[2] = { "INFO", "memory" };
    redisReply *rep = cmd_raw(r, &e, "INFO", 2, argv);
    char v[64];
    if (rep && rep->type == REDIS_REPLY_STRING) {
        if (info_field(rep->str, "used_memory", v, sizeof v)) parse_u64(v, &out->used_memory);
        if (info_field(rep->str, "maxmemory", v, sizeof v)) parse_u64(v, &out->maxmemory);
        if (info_field(rep->str, "maxmemory_policy", v, sizeof v))
            snprintf(out->policy, sizeof out->policy, "%.31s", v);
    }
    if (rep) freeReplyObject(rep);
    if (out->maxmemory < 0 && config_get(r, "maxmemory", v, sizeof v)) parse_u64(v, &out->maxmemory);
    if (!out->policy[0] && config_get(r, "maxmemory-policy", v, sizeof v))
        snprintf(out->policy, sizeof out->policy, "%.31s", v);
}

const char *bank_remote_policy_warning(const char *policy, int64_t maxmemory)
{
    if (!policy || !*policy)
        return "the eviction policy is unknown (INFO and CONFIG GET refused): make sure it is allkeys-lru"
               " or allkeys-lfu, or uploads fail with OOM once Redis is full";
    if (!strcmp(policy, "allkeys-lru") || !strcmp(policy, "allkeys-lfu"))
        return maxmemory == 0 ? "maxmemory is 0 (no limit): Redis grows until the machine runs out of memory;"
                                " set maxmemory so that it evicts" : NULL;
    if (!strcmp(policy, "noeviction"))
        return "maxmemory-policy noeviction: once Redis is full every upload fails with OOM and nothing old"
               " makes room; use allkeys-lru (or allkeys-lfu)";
    if (!strncmp(policy, "volatile-", 9))
        return "a volatile-* policy evicts only keys with a TTL and the bank sets none: once Redis is full"
               " uploads fail with OOM; use allkeys-lru (or allkeys-lfu)";
    if (!strcmp(policy, "allkeys-random"))
        return "allkeys-random evicts a shared head as readily as a leaf; allkeys-lru (or allkeys-lfu) keeps"
               " what the fleet restores";
    return "an eviction policy this build does not know: the bank is written for allkeys-lru or allkeys-lfu";
}

/* ---- stats, ls ------------------------------------------------------------------------ */

/* e's chain: blobs and bytes from it to its root; false when broken. */
static bool chain_of(const struct view *v, const struct ment *x, uint64_t *bytes, int64_t *blobs)
{
    *bytes = 0;
    *blobs = 0;
    for (int guard = 0; x && guard < CHAIN_GUARD; guard++) {
        *bytes += x->m.blob_len;
        (*blobs)++;
        if (x->m.start == 0) return true;
        if (x->parent_missing || x->parent < 0) return false;
        x = &v->e[x->parent];
    }
    return false;
}

int bank_remote_inventory_get(struct bank_remote *r, struct bank_remote_inventory *out, struct hs_err *err)
{
    memset(out, 0, sizeof *out);
    struct view v;
    int rc = view_load(r, LOAD_CHUNK_LENS | LOAD_POSITIONS, &v, err);
    if (rc != HS_OK) {
        view_free(&v);
        return rc;
    }
    out->manifests = v.n;
    out->bad_manifests = v.bad.n;
    out->chunks = v.nc;
    for (size_t i = 0; i < v.nc; i++) out->bytes += v.c[i].len;
    out->position_sets = v.np;
    for (size_t i = 0; i < v.np; i++) out->positions += v.p[i].n + v.p[i].junk.n;
    for (size_t i = 0; i < v.n; i++) {
        const struct ment *x = &v.e[i];
        uint64_t cb;
        int64_t nb;
        if (chain_of(&v, x, &cb, &nb)) out->unshared_bytes += cb;
        else out->broken_chains++;
        bool missing = false;
        for (uint32_t c = 0; c < x->m.n_chunks; c++) {
            struct chunkref *f = find_chunk(&v, x->m.chunk_ids[c]);
            if (f) f->named = true;
            else { out->missing_chunks++; missing = true; }
        }
        if (missing) out->incomplete++;
        if (!posset_has(find_posset(&v, x->m.fp), (int64_t)x->m.pos)) out->unfindable++;
    }
    for (size_t i = 0; i < v.nc; i++)
        if (!v.c[i].named) {
            out->orphan_chunks++;
            out->orphan_bytes += v.c[i].len;
        }
    size_t nk = 0;
    struct fpp *k = kept_positions(&v, NULL, 0, &nk);
    for (size_t s = 0; s < v.np; s++) {
        out->stale_positions += v.p[s].junk.n;
        for (size_t j = 0; j < v.p[s].n; j++)
            if (!fpp_has(k, nk, v.p[s].fp, v.p[s].pos[j])) out->stale_positions++;
    }
    hs_free(k);
    out->foreign_keys = v.foreign;
    memory_settings(r, out);
    view_free(&v);
    return HS_OK;
}

int64_t bank_remote_ls(struct bank_remote *r, bool (*fn)(void *ctx, const struct bank_remote_entry *e),
                       void *ctx, struct hs_err *err)
{
    struct view v;
    if (view_load(r, 0, &v, err) != HS_OK) {
        view_free(&v);
        return -1;
    }
    int64_t n = 0;
    for (size_t j = 0; j < v.n; j++) {
        const struct ment *x = &v.e[v.order[j]];
        struct bank_remote_entry e;
        memset(&e, 0, sizeof e);
        blob_key_hex(x->m.key, e.key);
        if (x->m.start > 0) blob_key_hex(x->m.parent, e.parent);
        e.fp = x->m.fp;
        e.start = (int64_t)x->m.start;
        e.pos = (int64_t)x->m.pos;
        e.kind = x->m.kind < BANK_SNAP_KIND_COUNT ? (enum bank_snap_kind)x->m.kind : BANK_SNAP_END;
        e.bytes = x->m.blob_len;
        e.chunks = x->m.n_chunks;
        e.chain_broken = !chain_of(&v, x, &e.chain_bytes, &e.chain_blobs);
        e.children = x->children;
        e.chunk_ids = (const uint8_t (*)[16])x->m.chunk_ids;
        n++;
        if (fn && !fn(ctx, &e)) break;
    }
    view_free(&v);
    return n;
}

/* ---- verify --------------------------------------------------------------------------- */

/* The blob of x from its chunks into buf (m.blob_len bytes): NULL when every chunk is
 * there with its length and id; else why (a static string), *chunk_i the chunk, *bad_chunk
 * whether its value is provably wrong (not merely missing). */
static const char *fetch_blob(struct bank_remote *r, const struct manifest *m, uint8_t *buf, uint32_t *chunk_i,
                              bool *bad_chunk, struct hs_err *err, int *rc)
{
    const char *prefix = remote_prefix(r);
    uint32_t per = (uint32_t)HS_MAX((uint64_t)1, VERIFY_GROUP_BYTES / m->chunk_bytes);
    per = HS_MIN(per, (uint32_t)64);
    char names[64][NAME_CAP];
    const char *argv[65];
    size_t lens[65];
    *rc = HS_OK;
    *bad_chunk = false;
    for (uint32_t g = 0; g < m->n_chunks; g += per) {
        uint32_t k = HS_MIN(per, m->n_chunks - g);
        argv[0] = "MGET";
        lens[0] = 4;
        for (uint32_t i = 0; i < k; i++) {
            remote_key_chunk(prefix, m->chunk_ids[g + i], names[i], sizeof names[i]);
            argv[1 + i] = names[i];
            lens[1 + i] = strlen(names[i]);
        }
        redisReply *rep = remote_command(r, "MGET chunks", (int)k + 1, argv, lens);
        if (!rep) { *rc = conn_err(r, err, "MGET chunks"); return "no connection"; }
        if (rep->type != REDIS_REPLY_ARRAY || rep->elements != k) {
            *rc = hs_err_set(err, HS_ERR_FORMAT, "MGET chunks: %s",
                             rep->type == REDIS_REPLY_ERROR ? rep->str : "unexpected reply");
            freeReplyObject(rep);
            return "no answer";
        }
        for (uint32_t i = 0; i < k; i++) {
            const redisReply *x = rep->element[i];
            uint64_t off = (uint64_t)(g + i) * m->chunk_bytes;
            uint64_t want = HS_MIN(m->chunk_bytes, m->blob_len - off);
            *chunk_i = g + i;
            const char *why = NULL;
            if (x->type == REDIS_REPLY_NIL) why = "missing";
            else if (x->type != REDIS_REPLY_STRING) why = "not a string";
            else if ((uint64_t)x->len != want) why = "wrong length";
            else {
                uint8_t id[MANIFEST_CHUNK_ID];
                manifest_chunk_id(x->str, x->len, id);
                if (memcmp(id, m->chunk_ids[g + i], MANIFEST_CHUNK_ID) != 0) why = "bytes do not match its id";
            }
            if (why) {
                *bad_chunk = x->type != REDIS_REPLY_NIL;
                freeReplyObject(rep);
                return why;
            }
            memcpy(buf + off, x->str, (size_t)want);
        }
        freeReplyObject(rep);
    }
    return NULL;
}

/* ids [0, x->pos) of a good entry, from its chain's kept stretches. Owned. */
static int32_t *chain_ids(const struct view *v, const struct ment *x, const int32_t *own)
{
    int32_t *ids = hs_malloc((size_t)x->m.pos * 4 + 4);
    memcpy(ids + x->m.start, own, (size_t)(x->m.pos - x->m.start) * 4);
    for (const struct ment *p = x->parent >= 0 ? &v->e[x->parent] : NULL; p; p = p->parent >= 0 ? &v->e[p->parent] : NULL)
        memcpy(ids + p->m.start, p->ids, (size_t)(p->m.pos - p->m.start) * 4);
    return ids;
}

int bank_remote_verify(struct bank_remote *r, bool dry_run, struct bank_remote_verify_result *out,
                       struct hs_err *err)
{
    memset(out, 0, sizeof *out);
    struct view v;
    int rc = view_load(r, LOAD_POSITIONS, &v, err);
    const char *prefix = remote_prefix(r);
    struct names bad_chunks = {0};
    for (size_t j = 0; rc == HS_OK && j < v.n; j++) {
        struct ment *x = &v.e[v.order[j]];
        char hk[65];
        blob_key_hex(x->m.key, hk);
        out->checked++;
        const char *why = NULL;
        char whybuf[160];
        bool quiet = false;       /* below a bad entry: it goes with its parent's subtree */
        if (x->m.start > 0) {
            if (x->parent_missing) why = "its parent's manifest is missing (a broken chain)";
            else if (v.e[x->parent].state != 1) { why = "it builds on a bad entry"; quiet = true; }
        }
        uint8_t *buf = NULL;
        /* a manifest decodes with any sizes that agree with each other: a hostile one must
         * not make the tool allocate without bound (bank_remote_open takes chunks up to
         * 256 MiB) */
        if (!why && (x->m.chunk_bytes > (256u << 20) || x->m.blob_len > VERIFY_BLOB_MAX))
            why = "implausible sizes (chunks over 256 MiB or a blob over 64 GiB)";
        if (!why && !(buf = malloc((size_t)x->m.blob_len))) {
            rc = hs_err_set(err, HS_ERR_NOMEM, "verify: cannot allocate %" PRIu64 " bytes for entry %s",
                            x->m.blob_len, hk);
            break;
        }
        if (!why) {
            uint32_t ci = 0;
            bool provably_bad = false;
            const char *cw = fetch_blob(r, &x->m, buf, &ci, &provably_bad, err, &rc);
            if (rc != HS_OK) { free(buf); break; }
            if (cw) {
                snprintf(whybuf, sizeof whybuf, "chunk %u of %u: %s", ci + 1, x->m.n_chunks, cw);
                why = whybuf;
                if (provably_bad) {
                    out->bad_chunks++;
                    char name[NAME_CAP];
                    remote_key_chunk(prefix, x->m.chunk_ids[ci], name, sizeof name);
                    names_push(&bad_chunks, name, strlen(name));
                } else {
                    out->missing_chunks++;
                }
            }
        }
        if (!why) {
            struct blob_hdr exp = {0}, h;
            exp.fp = x->m.fp;
            exp.start = x->m.start;
            exp.pos = x->m.pos;
            exp.row = x->m.row;
            exp.snap = x->m.snap;
            memcpy(exp.key, x->m.key, 32);
            memcpy(exp.parent, x->m.parent, 32);
            enum rd rd = blob_check(buf, (size_t)x->m.blob_len, &exp, NULL, &h);
            if (rd != RD_OK) {
                why = blob_rd_name(rd);
            } else {
                /* the key is the hash of the whole prefix: the chain's ids and these */
                size_t nid = (size_t)(x->m.pos - x->m.start);
                x->ids = hs_malloc(nid * 4 + 4);
                memcpy(x->ids, buf + HDR_SIZE, nid * 4);
                int32_t *ids = chain_ids(&v, x, x->ids);
                struct blob_keys ks;
                uint8_t k[32];
                blob_keys_init(&ks, x->m.fp, ids);
                bool ok = blob_keys_at(&ks, (int64_t)x->m.pos, k);
                blob_keys_free(&ks);
                hs_free(ids);
                if (!ok) {
                    rc = hs_err_set(err, HS_ERR_IO, "verify: SHA-256 failed (libcrypto)");
                    free(buf);
                    break;
                }
                if (memcmp(k, x->m.key, 32) != 0) why = "its key is not the hash of its token prefix";
            }
        }
        free(buf);
        if (!why) {
            x->state = 1;
            out->good++;
            continue;
        }
        x->state = 2;
        hs_free(x->ids);
        x->ids = NULL;
        out->bad++;
        if (!quiet)
            log_warn("bank remote verify: entry %s (fingerprint %016" PRIx64 ", tokens %" PRIu64 "..%" PRIu64 "): %s%s",
                     hk, x->m.fp, x->m.start, x->m.pos, why,
                     dry_run ? "" : "; removed with the entries building on it");
    }
    out->bad_manifests = v.bad.n;
    for (size_t i = 0; i < v.bad.n; i++)
        log_warn("bank remote verify: manifest %s does not decode or names another entry%s", v.bad.v[i],
                 dry_run ? "" : "; removed");
    if (rc == HS_OK && !dry_run) {
        for (size_t i = 0; rc == HS_OK && i < v.n; i++) {
            if (v.e[i].state != 2) continue;
            char name[NAME_CAP];
            remote_key_manifest(prefix, v.e[i].m.key, name, sizeof name);
            rc = del_key(r, err, name);
            if (rc == HS_OK) out->removed++;
        }
        for (size_t i = 0; rc == HS_OK && i < v.bad.n; i++) {
            rc = del_key(r, err, v.bad.v[i]);
            if (rc == HS_OK) out->removed++;
        }
        names_unique(&bad_chunks);
        for (size_t i = 0; rc == HS_OK && i < bad_chunks.n; i++) {
            rc = del_key(r, err, bad_chunks.v[i]);
            if (rc == HS_OK) out->removed_chunks++;
        }
        if (rc == HS_OK && out->bad) {
            /* the positions of the entries removed, where no other ends (invariant 6) */
            struct ment *late = NULL;
            size_t n_late = 0;
            uint64_t added = 0;
            rc = late_manifests(r, &v, &late, &n_late, err);
            if (rc == HS_OK) rc = positions_fix(r, &v, late, n_late, false, false, &added, &out->positions_removed, err);
            late_free(late, n_late);
        }
    }
    names_free(&bad_chunks);
    view_free(&v);
    return rc;
}

/* ---- gc --------------------------------------------------------------------------------- */

int bank_remote_gc(struct bank_remote *r, int64_t min_idle_s, bool dry_run, struct bank_remote_gc_result *out,
                   struct hs_err *err)
{
    memset(out, 0, sizeof *out);
    out->min_idle_s = min_idle_s;
    const char *prefix = remote_prefix(r);
    struct view v;
    int rc = view_load(r, LOAD_CHUNKS | LOAD_POSITIONS, &v, err);
    /* manifests that cannot be restored: chunks missing (confirmed: invariant 2), or a
     * broken chain (parents first, so a dead parent takes its subtree) */
    for (size_t j = 0; rc == HS_OK && j < v.n; j++) {
        struct ment *x = &v.e[v.order[j]];
        bool dead = x->m.start > 0 && (x->parent_missing || v.e[x->parent].state == 2);
        const char *why = dead ? "a broken chain (its parent's manifest is missing or removed)" : "chunks missing";
        if (dead) out->broken_chain_manifests++;
        for (uint32_t c = 0; !dead && c < x->m.n_chunks; c++) {
            if (find_chunk(&v, x->m.chunk_ids[c])) continue;
            char name[NAME_CAP];
            remote_key_chunk(prefix, x->m.chunk_ids[c], name, sizeof name);
            const char *argv[2] = { "EXISTS", name };
            redisReply *rep = cmd(r, err, "EXISTS", 2, argv);
            if (!rep) { rc = err->code; break; }
            dead = rep->type == REDIS_REPLY_INTEGER && rep->integer == 0;
            freeReplyObject(rep);
            if (dead) out->missing_chunk_manifests++;
        }
        if (!dead) continue;
        x->state = 2;
        char hk[65];
        blob_key_hex(x->m.key, hk);
        log_info("bank remote gc: entry %s (tokens %" PRIu64 "..%" PRIu64 "): %s%s", hk, x->m.start, x->m.pos,
                 why, dry_run ? "" : "; removed");
        if (dry_run) { out->removed_manifests++; continue; }
        char name[NAME_CAP];
        remote_key_manifest(prefix, x->m.key, name, sizeof name);
        rc = del_key(r, err, name);
        if (rc == HS_OK) out->removed_manifests++;
    }
    out->bad_manifests = v.bad.n;
    for (size_t i = 0; rc == HS_OK && i < v.bad.n; i++) {
        log_info("bank remote gc: manifest %s does not decode or names another entry%s", v.bad.v[i], dry_run ? "" : "; removed");
        if (!dry_run) rc = del_key(r, err, v.bad.v[i]);
        if (rc == HS_OK) out->removed_manifests++;
    }
    /* orphans: chunks no kept manifest names, nor one stored since (invariant 3) */
    struct ment *late = NULL;
    size_t n_late = 0;
    if (rc == HS_OK) rc = late_manifests(r, &v, &late, &n_late, err);
    for (size_t i = 0; rc == HS_OK && i < v.n + n_late; i++) {
        const struct ment *x = i < v.n ? &v.e[i] : &late[i - v.n];
        if (x->state == 2) continue;
        for (uint32_t c = 0; c < x->m.n_chunks; c++) {
            struct chunkref *f = find_chunk(&v, x->m.chunk_ids[c]);
            if (f) f->named = true;
        }
    }
    bool untimed = false;
    for (size_t i = 0; rc == HS_OK && i < v.nc; i++) {
        if (v.c[i].named) continue;
        out->orphan_chunks++;
        if (untimed) { out->untimed_chunks++; continue; }
        char name[NAME_CAP];
        remote_key_chunk(prefix, v.c[i].id, name, sizeof name);
        const char *argv[3] = { "OBJECT", "IDLETIME", name };
        redisReply *rep = cmd_raw(r, err, "OBJECT IDLETIME", 3, argv);
        if (!rep) { rc = err->code; break; }
        int64_t idle = rep->type == REDIS_REPLY_INTEGER ? rep->integer : -1;
        bool gone = rep->type == REDIS_REPLY_NIL;
        if (rep->type == REDIS_REPLY_ERROR) {
            /* an LFU policy: Redis keeps no idle time, so no chunk can be told old */
            untimed = true;
            out->untimed_chunks++;
            snprintf(out->untimed_reason, sizeof out->untimed_reason, "%s", rep->str);
        }
        freeReplyObject(rep);
        if (gone || idle < 0) continue;
        if (idle < min_idle_s) { out->young_chunks++; continue; }
        const char *sargv[2] = { "STRLEN", name };
        rep = cmd(r, err, "STRLEN", 2, sargv);
        if (!rep) { rc = err->code; break; }
        uint64_t len = rep->type == REDIS_REPLY_INTEGER ? (uint64_t)HS_MAX(rep->integer, 0LL) : 0;
        freeReplyObject(rep);
        if (!dry_run) {
            const char *dargv[2] = { "DEL", name };
            rep = cmd(r, err, "DEL", 2, dargv);
            if (!rep) { rc = err->code; break; }
            bool deleted = rep->type == REDIS_REPLY_INTEGER && rep->integer > 0;
            freeReplyObject(rep);
            if (!deleted) continue;
        }
        out->removed_chunks++;
        out->removed_chunk_bytes += len;
    }
    if (rc == HS_OK)
        rc = positions_fix(r, &v, late, n_late, true, dry_run, &out->positions_added, &out->positions_removed, err);
    late_free(late, n_late);
    view_free(&v);
    return rc;
}
