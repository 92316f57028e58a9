/* blob_int.h — the disk tier's blob format (blob.c): header layout, prefix keys and the
 * pure checks that decide whether bytes read back may be trusted. No I/O, no SQLite, no
 * locks: bytes in, verdict out (tests/fuzz/fuzz_blob.c drives it). Never included outside
 * src/bank and its tests. */
#ifndef HS_BANK_BLOB_INT_H
#define HS_BANK_BLOB_INT_H
#include "bank/bank.h"

#include <string.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the bank's disk format is little-endian; add byte swapping for this host"
#endif

#define HDR_SIZE 160
#define FORMAT_VERSION 2
#define FORMAT_STR "2"
#define EXT ".hsb"

/* What reading an entry found. The I/O causes (MISSING, IO, NOT_REGULAR) come from the
 * file layer (disk.c); blob.c's checks return only OK, HEADER, IDENTITY, SIZE, CHECKSUM
 * and TOKENS. */
enum rd {
    RD_OK = 0, RD_MISSING, RD_IO, RD_HEADER, RD_IDENTITY, RD_SIZE, RD_CHECKSUM, RD_TOKENS,
    RD_NOT_REGULAR, RD_COUNT
};

/* A decoded header (blob.c's note has the byte layout). */
struct blob_hdr {
    uint32_t version, kind;
    uint64_t fp, start, pos, row, snap, payload_len, kv_sum, snap_sum;
    uint8_t key[32], parent[32];
};

/* Prefix keys of one id array at ascending positions, in one pass over the ids. */
struct blob_keys {
    void *c, *t;              /* EVP_MD_CTX (OpenSSL stays inside blob.c) */
    const int32_t *ids;
    int64_t at;
    bool ok;
};

static inline void put_u32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void put_u64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static inline uint32_t get_u32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t get_u64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* n bytes as 2n lower-case hex digits (and a NUL) */
void blob_hex(const uint8_t *b, size_t n, char *out);
/* keys as text: 64 lower-case hex digits */
void blob_key_hex(const uint8_t *k, char *out);
bool blob_is_hex64(const char *s);
/* hex (64 lower-case digits, or "" / NULL for none = all zero) to bytes; false when
 * malformed */
bool blob_key_unhex(const char *s, uint8_t *out);
bool blob_key_is_zero(const uint8_t *k);
/* A key as the index or a file name holds it: exactly 64 lower-case hex digits (disk.c,
 * invariant 10); anything else is never turned into a path. */
bool blob_key_text_ok(const char *s);

/* Size of the payload of [a, p) with overflow checks; false when it does not fit. */
bool blob_payload_len(int64_t a, int64_t p, uint64_t row, uint64_t snap, uint64_t *out);

void blob_keys_init(struct blob_keys *h, uint64_t fp, const int32_t *ids);
/* key(pos) for pos >= every pos asked before; false (key zeroed) when libcrypto fails,
 * and an all-zero key never matches a stored one. */
bool blob_keys_at(struct blob_keys *h, int64_t pos, uint8_t out[32]);
void blob_keys_free(struct blob_keys *h);

/* The header checksum: XXH3-64 of b[0, 152). */
uint64_t blob_hdr_sum(const uint8_t *b);
/* Encode h (version, kind, identity, sums) into b[HDR_SIZE], header checksum included. */
void blob_hdr_encode(const struct blob_hdr *h, uint8_t *b);
/* Decode and check self-consistency; false when the header cannot be trusted. */
bool blob_hdr_decode(const uint8_t *b, struct blob_hdr *h);
/* XXH3-64 of ids ‖ KV rows, the stretch checksum. */
uint64_t blob_stretch_sum(const void *ids, size_t ids_len, const void *kv, size_t kv_len);
/* XXH3-64 of the snapshot bytes, the snapshot checksum. */
uint64_t blob_snapshot_sum(const void *snap, size_t len);

/* The header of a blob file of file_len bytes: hb is its first HDR_SIZE bytes (NULL
 * allowed when file_len < HDR_SIZE). exp: the identity it must have (fp, start, pos, row,
 * snap, key, parent), or NULL to accept any self-consistent header. RD_SIZE (shorter than
 * a header, or not HDR_SIZE + payload_len), RD_HEADER, RD_IDENTITY or RD_OK; *h gets the
 * header when it decoded. */
enum rd blob_check_header(const uint8_t *hb, uint64_t file_len, const struct blob_hdr *exp,
                          struct blob_hdr *h);
/* The payload of a header that passed blob_check_header: ids (pos-start of them), kv
 * ((pos-start) rows), snap (the snapshot, or NULL: not checked) against the header's
 * checksums, then ids against want_ids (NULL: not compared). RD_CHECKSUM, RD_TOKENS or
 * RD_OK. Pointers need no alignment. */
enum rd blob_check_payload(const struct blob_hdr *h, const void *ids, const void *kv,
                           const void *snap, const void *want_ids);
/* A whole blob in memory (header + payload), checked as a lookup checks the file: header,
 * identity (exp NULL: any), size, both checksums, and ids against want_ids (NULL: not
 * compared). *h (may be NULL) gets the header when it decoded. */
enum rd blob_check(const uint8_t *buf, size_t len, const struct blob_hdr *exp,
                   const void *want_ids, struct blob_hdr *h);
const char *blob_rd_name(enum rd r);

#endif
