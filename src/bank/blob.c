/*
 * blob.c — the disk tier's blob format: what one entry's file holds, the key that names
 * it, and the checks that decide whether bytes read back may be trusted. Pure: bytes in,
 * verdict out; no file, SQLite or lock is touched here (disk.c reads the files, index.c
 * keeps the rows), so tests/fuzz/fuzz_blob.c can drive every check with hostile bytes.
 *
 * Keys: key(p) = SHA-256(fp as 8 bytes LE ‖ ids[0, p) as int32 LE), the "prefix key"; it
 * names the blob (DIR/blobs/<key[0:2]>/<key>.hsb), and an entry's parent is named by
 * key(a). In text a key is exactly 64 lower-case hex digits.
 *
 * Blob header (160 bytes, little-endian):
 *   OFFSET SIZE FIELD
 *   0      8    magic "HSBANKE2"
 *   8      4    format version (2)
 *   12     4    kind (enum bank_snap_kind)
 *   16     8    fingerprint (model identity + numerics)
 *   24     8    start a: first token of the stretch (0 = a root; a < p)
 *   32     8    pos p: token count after this entry (the snapshot position)
 *   40     8    kv_row_bytes
 *   48     8    snapshot_bytes
 *   56     8    payload_len = 4(p-a) + (p-a)*kv_row_bytes + snapshot_bytes
 *   64     32   key: key(p), equals the file name
 *   96     32   parent: key(a) of the entry holding [.., a); all zero when a = 0
 *   128    8    stretch checksum: XXH3-64 of ids ‖ KV rows (payload [0, 4(p-a) + (p-a)*row))
 *   136    8    snapshot checksum: XXH3-64 of the snapshot bytes
 *   144    8    zero
 *   152    8    header checksum: XXH3-64 of bytes [0, 152)
 * Payload at 160:
 *   OFFSET                      SIZE                FIELD
 *   160                         4(p-a)              ids[a, p) (int32)
 *   160 + 4(p-a)                (p-a)*kv_row_bytes  KV rows [a, p)
 *   160 + 4(p-a) + (p-a)*row    snapshot_bytes      GDN snapshot at p
 *
 * Invariants:
 *   1. A header is trusted only when its magic and header checksum hold, the version is 2,
 *      the kind is known, a < p <= INT64_MAX, payload_len is exactly what (a, p, row, snap)
 *      give without overflow, and the parent is all zero exactly when a = 0.
 *   2. The checks run in one fixed order, the first failure is the verdict: size below a
 *      header (SIZE), header (HEADER), identity against what the chain asks (IDENTITY),
 *      file size = 160 + payload_len (SIZE), stretch then snapshot checksum (CHECKSUM),
 *      ids against the request (TOKENS). disk.c counts and logs by this verdict.
 *   3. No check reads past the bytes it is given, and none trusts a length before the
 *      header that states it has passed invariant 1 and the size check.
 */
#include "bank/blob_int.h"

#include <openssl/evp.h>
#include <xxhash.h>

static const char k_magic[8] = {'H', 'S', 'B', 'A', 'N', 'K', 'E', '2'};
static const uint8_t k_zero_key[32];

/* ---- keys --------------------------------------------------------------------------- */

void blob_hex(const uint8_t *b, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = 0;
}

void blob_key_hex(const uint8_t *k, char *out) { blob_hex(k, 32, out); }

bool blob_is_hex64(const char *s)
{
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return false;
    return true;
}

static int hexval(char c) { return c <= '9' ? c - '0' : c - 'a' + 10; }

bool blob_key_unhex(const char *s, uint8_t *out)
{
    if (!s || !*s) { memset(out, 0, 32); return true; }
    if (strlen(s) != 64 || !blob_is_hex64(s)) return false;
    for (int i = 0; i < 32; i++) out[i] = (uint8_t)(hexval(s[2 * i]) << 4 | hexval(s[2 * i + 1]));
    return true;
}

bool blob_key_is_zero(const uint8_t *k) { return memcmp(k, k_zero_key, 32) == 0; }

bool blob_key_text_ok(const char *s) { return s && strlen(s) == 64 && blob_is_hex64(s); }

bool blob_payload_len(int64_t a, int64_t p, uint64_t row, uint64_t snap, uint64_t *out)
{
    if (a < 0 || p <= a || (uint64_t)p > (UINT64_MAX >> 8)) return false;
    uint64_t n = (uint64_t)(p - a);
    if (row && n > (UINT64_MAX / 4) / row) return false;
    uint64_t kv = n * row, ids = 4 * n;
    if (kv > UINT64_MAX - ids - HDR_SIZE) return false;
    uint64_t t = kv + ids;
    if (snap > UINT64_MAX - t - HDR_SIZE) return false;
    *out = t + snap;
    return true;
}

/* ---- prefix keys ------------------------------------------------------------------- */

void blob_keys_init(struct blob_keys *h, uint64_t fp, const int32_t *ids)
{
    EVP_MD_CTX *c = EVP_MD_CTX_new(), *t = EVP_MD_CTX_new();
    h->c = c;
    h->t = t;
    h->ids = ids;
    h->at = 0;
    uint8_t f[8];
    put_u64(f, fp);
    h->ok = c && t && EVP_DigestInit_ex(c, EVP_sha256(), NULL) && EVP_DigestUpdate(c, f, 8);
}

bool blob_keys_at(struct blob_keys *h, int64_t pos, uint8_t out[32])
{
    unsigned len = 32;
    if (h->ok && pos > h->at) {
        h->ok = EVP_DigestUpdate((EVP_MD_CTX *)h->c, h->ids + h->at, (size_t)(pos - h->at) * 4);
        h->at = pos;
    }
    if (h->ok && pos == h->at && EVP_MD_CTX_copy_ex((EVP_MD_CTX *)h->t, (const EVP_MD_CTX *)h->c) &&
        EVP_DigestFinal_ex((EVP_MD_CTX *)h->t, out, &len))
        return true;
    memset(out, 0, 32);
    return false;
}

void blob_keys_free(struct blob_keys *h)
{
    EVP_MD_CTX_free((EVP_MD_CTX *)h->c);
    EVP_MD_CTX_free((EVP_MD_CTX *)h->t);
}

/* ---- the header ---------------------------------------------------------------------- */

uint64_t blob_hdr_sum(const uint8_t *b) { return XXH3_64bits(b, 152); }

void blob_hdr_encode(const struct blob_hdr *h, uint8_t *b)
{
    memset(b, 0, HDR_SIZE);
    memcpy(b, k_magic, 8);
    put_u32(b + 8, h->version);
    put_u32(b + 12, h->kind);
    put_u64(b + 16, h->fp);
    put_u64(b + 24, h->start);
    put_u64(b + 32, h->pos);
    put_u64(b + 40, h->row);
    put_u64(b + 48, h->snap);
    put_u64(b + 56, h->payload_len);
    memcpy(b + 64, h->key, 32);
    memcpy(b + 96, h->parent, 32);
    put_u64(b + 128, h->kv_sum);
    put_u64(b + 136, h->snap_sum);
    put_u64(b + 152, blob_hdr_sum(b));
}

bool blob_hdr_decode(const uint8_t *b, struct blob_hdr *h)
{
    if (memcmp(b, k_magic, 8) != 0) return false;
    if (get_u64(b + 152) != blob_hdr_sum(b)) return false;
    h->version = get_u32(b + 8);
    h->kind = get_u32(b + 12);
    h->fp = get_u64(b + 16);
    h->start = get_u64(b + 24);
    h->pos = get_u64(b + 32);
    h->row = get_u64(b + 40);
    h->snap = get_u64(b + 48);
    h->payload_len = get_u64(b + 56);
    memcpy(h->key, b + 64, 32);
    memcpy(h->parent, b + 96, 32);
    h->kv_sum = get_u64(b + 128);
    h->snap_sum = get_u64(b + 136);
    uint64_t want;
    if (h->version != FORMAT_VERSION || h->kind >= BANK_SNAP_KIND_COUNT ||
        h->pos > (uint64_t)INT64_MAX || h->start >= h->pos ||
        !blob_payload_len((int64_t)h->start, (int64_t)h->pos, h->row, h->snap, &want) ||
        want != h->payload_len || (h->start == 0) != blob_key_is_zero(h->parent))
        return false;
    return true;
}

uint64_t blob_stretch_sum(const void *ids, size_t ids_len, const void *kv, size_t kv_len)
{
    XXH3_state_t *xs = XXH3_createState();
    XXH3_64bits_reset(xs);
    XXH3_64bits_update(xs, ids, ids_len);
    XXH3_64bits_update(xs, kv, kv_len);
    uint64_t sum = XXH3_64bits_digest(xs);
    XXH3_freeState(xs);
    return sum;
}

uint64_t blob_snapshot_sum(const void *snap, size_t len) { return XXH3_64bits(snap, len); }

/* ---- the checks (invariant 2) -------------------------------------------------------- */

enum rd blob_check_header(const uint8_t *hb, uint64_t file_len, const struct blob_hdr *exp,
                          struct blob_hdr *h)
{
    if (file_len < HDR_SIZE) return RD_SIZE;
    if (!blob_hdr_decode(hb, h)) return RD_HEADER;
    if (exp && (h->fp != exp->fp || memcmp(h->key, exp->key, 32) != 0 || h->start != exp->start ||
                h->pos != exp->pos || h->row != exp->row || h->snap != exp->snap ||
                memcmp(h->parent, exp->parent, 32) != 0))
        return RD_IDENTITY;
    if (file_len != HDR_SIZE + h->payload_len) return RD_SIZE;
    return RD_OK;
}

enum rd blob_check_payload(const struct blob_hdr *h, const void *ids, const void *kv,
                           const void *snap, const void *want_ids)
{
    size_t ids_b = (size_t)(h->pos - h->start) * 4, kv_b = (size_t)(h->pos - h->start) * h->row;
    if (blob_stretch_sum(ids, ids_b, kv, kv_b) != h->kv_sum ||
        (snap && blob_snapshot_sum(snap, h->snap) != h->snap_sum))
        return RD_CHECKSUM;
    if (want_ids && memcmp(ids, want_ids, ids_b) != 0) return RD_TOKENS;
    return RD_OK;
}

enum rd blob_check(const uint8_t *buf, size_t len, const struct blob_hdr *exp,
                   const void *want_ids, struct blob_hdr *h)
{
    struct blob_hdr tmp;
    if (!h) h = &tmp;
    enum rd r = blob_check_header(buf, len, exp, h);
    if (r != RD_OK) return r;
    /* the size check passed: 160 + payload_len == len, so every part lies inside buf */
    size_t ids_b = (size_t)(h->pos - h->start) * 4, kv_b = (size_t)(h->pos - h->start) * h->row;
    const uint8_t *p = buf + HDR_SIZE;
    return blob_check_payload(h, p, p + ids_b, p + ids_b + kv_b, want_ids);
}

const char *blob_rd_name(enum rd r)
{
    static const char *const names[RD_COUNT] = {"ok", "missing file", "I/O error", "bad header",
                                                "wrong identity", "wrong size", "bad checksum",
                                                "wrong tokens", "not a regular file"};
    return (unsigned)r < RD_COUNT ? names[r] : "?";
}
