/*
 * remote_fmt.c — the remote tier's pure parts: the manifest that names an entry's chunks,
 * the Redis key names, and the --bank-remote URL. Pure: bytes in, verdict out (fuzzed by
 * tests/fuzz/fuzz_manifest.c).
 *
 * An entry in Redis is the disk tier's blob (blob.c: header + ids + KV rows + snapshot),
 * byte for byte, cut into chunks of chunk_bytes, each stored under its own XXH3-128 (so
 * equal bytes are one value), plus a manifest under the entry's prefix key:
 *
 * Manifest (little-endian):
 *   OFFSET SIZE FIELD
 *   0      8    magic "HSRMAN01"
 *   8      4    manifest version (1)
 *   12     4    kind (enum bank_snap_kind)
 *   16     8    fingerprint (the persistent model identity + numerics)
 *   24     8    start a (the parent entry ends here; 0 = none)
 *   32     8    pos p
 *   40     8    kv_row_bytes
 *   48     8    snapshot_bytes
 *   56     8    blob_len = 160 + 4(p-a) + (p-a)*kv_row_bytes + snapshot_bytes
 *   64     32   key: key(p) (blob.c), the entry's name
 *   96     32   parent: key(a), all zero when a = 0
 *   128    8    chunk_bytes (every chunk but the last; >= 4096)
 *   136    4    n_chunks = ceil(blob_len / chunk_bytes)
 *   140    4    zero
 *   144    8    zero
 *   152    8    checksum: XXH3-64 of bytes [0, 152) and the chunk table
 *   160    16n  chunk table: XXH3-128 of each chunk (high 64 bits first, big-endian)
 *
 * Invariants:
 *   1. A manifest is trusted only when its magic, version and checksum hold, its kind is
 *      known, a < p, blob_len is exactly what (a, p, row, snap) give without overflow,
 *      n_chunks is exactly ceil(blob_len / chunk_bytes), the parent is zero exactly when
 *      a = 0, and its length is 160 + 16 n_chunks.
 *   2. Nothing here trusts a length before invariant 1 has passed; nothing reads past the
 *      bytes given.
 *   3. A key name is derived only from bytes (hex-printed), never from text read back.
 */
#include "bank/blob_int.h"
#include "bank/remote_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

void manifest_chunk_id(const void *bytes, size_t len, uint8_t out[MANIFEST_CHUNK_ID])
{
    XXH128_hash_t h = XXH3_128bits(bytes, len);
    XXH128_canonical_t c;
    XXH128_canonicalFromHash(&c, h);
    memcpy(out, c.digest, MANIFEST_CHUNK_ID);
}

static uint64_t manifest_sum(const uint8_t *b, size_t len)
{
    XXH3_state_t *st = XXH3_createState();
    XXH3_64bits_reset(st);
    XXH3_64bits_update(st, b, 152);
    XXH3_64bits_update(st, b + MANIFEST_HDR, len - MANIFEST_HDR);
    uint64_t v = XXH3_64bits_digest(st);
    XXH3_freeState(st);
    return v;
}

uint8_t *manifest_encode(const struct manifest *m, size_t *len)
{
    *len = MANIFEST_HDR + (size_t)m->n_chunks * MANIFEST_CHUNK_ID;
    uint8_t *b = hs_calloc(1, *len);
    memcpy(b, MANIFEST_MAGIC, 8);
    put_u32(b + 8, MANIFEST_VERSION);
    put_u32(b + 12, m->kind);
    put_u64(b + 16, m->fp);
    put_u64(b + 24, m->start);
    put_u64(b + 32, m->pos);
    put_u64(b + 40, m->row);
    put_u64(b + 48, m->snap);
    put_u64(b + 56, m->blob_len);
    memcpy(b + 64, m->key, 32);
    memcpy(b + 96, m->parent, 32);
    put_u64(b + 128, m->chunk_bytes);
    put_u32(b + 136, m->n_chunks);
    if (m->n_chunks) memcpy(b + MANIFEST_HDR, m->chunk_ids, (size_t)m->n_chunks * MANIFEST_CHUNK_ID);
    put_u64(b + 152, manifest_sum(b, *len));
    return b;
}

bool manifest_decode(const uint8_t *b, size_t len, struct manifest *m)
{
    memset(m, 0, sizeof *m);
    if (!b || len < MANIFEST_HDR || memcmp(b, MANIFEST_MAGIC, 8) != 0) return false;
    if (get_u32(b + 8) != MANIFEST_VERSION || get_u32(b + 140) != 0 || get_u64(b + 144) != 0) return false;
    uint32_t n = get_u32(b + 136);
    if (n == 0 || n > MANIFEST_MAX_CHUNKS || len != MANIFEST_HDR + (size_t)n * MANIFEST_CHUNK_ID) return false;
    if (get_u64(b + 152) != manifest_sum(b, len)) return false;
    m->kind = get_u32(b + 12);
    m->fp = get_u64(b + 16);
    m->start = get_u64(b + 24);
    m->pos = get_u64(b + 32);
    m->row = get_u64(b + 40);
    m->snap = get_u64(b + 48);
    m->blob_len = get_u64(b + 56);
    memcpy(m->key, b + 64, 32);
    memcpy(m->parent, b + 96, 32);
    m->chunk_bytes = get_u64(b + 128);
    m->n_chunks = n;
    uint64_t plen;
    if (m->kind >= BANK_SNAP_KIND_COUNT || m->start >= m->pos || m->pos > (uint64_t)INT64_MAX ||
        !blob_payload_len((int64_t)m->start, (int64_t)m->pos, m->row, m->snap, &plen) ||
        plen > UINT64_MAX - HDR_SIZE || m->blob_len != HDR_SIZE + plen ||
        (m->start == 0) != blob_key_is_zero(m->parent) || m->chunk_bytes < 4096 ||
        (m->blob_len + m->chunk_bytes - 1) / m->chunk_bytes != n) {
        memset(m, 0, sizeof *m);
        return false;
    }
    m->chunk_ids = hs_malloc((size_t)n * MANIFEST_CHUNK_ID);
    memcpy(m->chunk_ids, b + MANIFEST_HDR, (size_t)n * MANIFEST_CHUNK_ID);
    return true;
}

void manifest_free(struct manifest *m)
{
    if (!m) return;
    hs_free(m->chunk_ids);
    m->chunk_ids = NULL;
}

void remote_key_manifest(const char *prefix, const uint8_t key[32], char *out, size_t cap)
{
    char h[65];
    blob_hex(key, 32, h);
    snprintf(out, cap, "%s:hsb2:m:%s", prefix, h);
}

void remote_key_chunk(const char *prefix, const uint8_t id[MANIFEST_CHUNK_ID], char *out, size_t cap)
{
    char h[2 * MANIFEST_CHUNK_ID + 1];
    blob_hex(id, MANIFEST_CHUNK_ID, h);
    snprintf(out, cap, "%s:hsb2:c:%s", prefix, h);
}

void remote_key_positions(const char *prefix, uint64_t fp, char *out, size_t cap)
{
    snprintf(out, cap, "%s:hsb2:p:%016llx", prefix, (unsigned long long)fp);
}

/* ---- the URL ------------------------------------------------------------------------- */

/* Decimal in [lo, hi] spanning exactly [s, e). */
static bool parse_int(const char *s, const char *e, long lo, long hi, int *out)
{
    if (s == e || e - s > 9) return false;
    long v = 0;
    for (const char *p = s; p < e; p++) {
        if (*p < '0' || *p > '9') return false;
        v = v * 10 + (*p - '0');
    }
    if (v < lo || v > hi) return false;
    *out = (int)v;
    return true;
}

static bool copy_span(char *dst, size_t cap, const char *s, const char *e)
{
    if ((size_t)(e - s) >= cap) return false;
    memcpy(dst, s, (size_t)(e - s));
    dst[e - s] = 0;
    return true;
}

bool remote_url_parse(const char *url, struct remote_url *u, const char **why)
{
    memset(u, 0, sizeof *u);
    u->port = 6379;
    *why = "expected redis://[[user]:password@]host[:port][/db] or unix:///path[?db=N]";
    if (!url) return false;
    if (strncmp(url, "unix://", 7) == 0) {
        const char *p = url + 7, *q = strchr(p, '?');
        const char *end = q ? q : p + strlen(p);
        if (*p != '/' || end - p < 2) { *why = "unix:// needs an absolute socket path"; return false; }
        if (!copy_span(u->host, sizeof u->host, p, end)) { *why = "socket path too long"; return false; }
        if (q && (strncmp(q, "?db=", 4) != 0 || !parse_int(q + 4, q + strlen(q), 0, 1 << 20, &u->db))) {
            *why = "unix:// takes only ?db=N";
            return false;
        }
        u->unix_socket = true;
        return true;
    }
    if (strncmp(url, "redis://", 8) != 0) return false;
    const char *p = url + 8, *end = p + strlen(p);
    const char *slash = strchr(p, '/');
    const char *auth_end = NULL;
    for (const char *c = p; c < (slash ? slash : end); c++)
        if (*c == '@') auth_end = c;  /* the last '@' before the path: passwords may hold '@' */
    if (auth_end) {
        const char *colon = memchr(p, ':', (size_t)(auth_end - p));
        if (!colon) { *why = "credentials need user:password or :password"; return false; }
        if (!copy_span(u->user, sizeof u->user, p, colon) ||
            !copy_span(u->password, sizeof u->password, colon + 1, auth_end)) {
            *why = "credentials too long";
            return false;
        }
        p = auth_end + 1;
    }
    const char *hend = slash ? slash : end, *port = NULL;
    if (*p == '[') {
        const char *rb = memchr(p, ']', (size_t)(hend - p));
        if (!rb) { *why = "unclosed [ in the host"; return false; }
        if (!copy_span(u->host, sizeof u->host, p + 1, rb)) { *why = "host too long"; return false; }
        if (rb + 1 < hend) {
            if (rb[1] != ':') return false;
            port = rb + 2;
        }
    } else {
        const char *colon = memchr(p, ':', (size_t)(hend - p));
        if (!copy_span(u->host, sizeof u->host, p, colon ? colon : hend)) { *why = "host too long"; return false; }
        if (colon) port = colon + 1;
    }
    if (!u->host[0]) { *why = "no host"; return false; }
    if (port && !parse_int(port, hend, 1, 65535, &u->port)) { *why = "the port must be 1..65535"; return false; }
    if (slash && slash + 1 < end && !parse_int(slash + 1, end, 0, 1 << 20, &u->db)) {
        *why = "the path must be a database number";
        return false;
    }
    return true;
}

void bank_remote_url_redact(const char *url, char *out, size_t cap)
{
    if (!url) { snprintf(out, cap, "(none)"); return; }
    const char *at = NULL, *p = url;
    if (strncmp(url, "redis://", 8) == 0) {
        p = url + 8;
        const char *slash = strchr(p, '/');
        for (const char *c = p; *c && (!slash || c < slash); c++)
            if (*c == '@') at = c;
    }
    const char *colon = at ? memchr(p, ':', (size_t)(at - p)) : NULL;
    if (!colon) { snprintf(out, cap, "%s", url); return; }
    snprintf(out, cap, "%.*s:***%s", (int)(colon - url), url, at);
}

int bank_remote_url_check(const char *url, struct hs_err *err)
{
    struct remote_url u;
    const char *why;
    if (remote_url_parse(url, &u, &why)) return HS_OK;
    char shown[256];
    bank_remote_url_redact(url, shown, sizeof shown);
    return hs_err_set(err, HS_ERR_INVALID, "--bank-remote %s: %s", shown, why);
}
