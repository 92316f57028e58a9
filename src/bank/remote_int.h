/* remote_int.h — the remote tier's pure parts (remote_fmt.c): the manifest format, the
 * Redis key names and the URL grammar. No socket, no Redis, no lock: bytes in, verdict out
 * (tests/unit/bank and tests/fuzz/fuzz_manifest.c drive them). Never included outside
 * src/bank and its tests. */
#ifndef HS_BANK_REMOTE_INT_H
#define HS_BANK_REMOTE_INT_H
#include "bank/bank.h"

#define MANIFEST_MAGIC "HSRMAN01"
#define MANIFEST_VERSION 1
#define MANIFEST_HDR 160
#define MANIFEST_CHUNK_ID 16        /* XXH3-128 of the chunk, big-endian as printed */
#define MANIFEST_MAX_CHUNKS (1u << 20)

/* One entry as Redis holds it: the disk tier's blob (blob.c) cut into chunks. */
struct manifest {
    uint8_t key[32], parent[32];    /* as the blob header's */
    uint64_t fp, start, pos, row, snap;
    uint32_t kind;
    uint64_t blob_len;              /* HDR_SIZE + payload_len */
    uint64_t chunk_bytes;           /* every chunk but the last is this long */
    uint32_t n_chunks;
    uint8_t (*chunk_ids)[MANIFEST_CHUNK_ID]; /* owned by the decoder's caller's buffer or
                                              * manifest_free */
};

/* Encode m (chunk_ids given) into an owned buffer; *len its size. */
uint8_t *manifest_encode(const struct manifest *m, size_t *len);
/* Decode and check self-consistency (magic, version, checksum, the sizes (start, pos, row,
 * snap) give, the chunk count the sizes give); false when the bytes cannot be trusted. On
 * success m->chunk_ids is an owned copy (manifest_free). */
bool manifest_decode(const uint8_t *b, size_t len, struct manifest *m);
void manifest_free(struct manifest *m);
/* The chunk id of bytes (XXH3-128). */
void manifest_chunk_id(const void *bytes, size_t len, uint8_t out[MANIFEST_CHUNK_ID]);

/* Key names (docs/FORMATS.md): PREFIX:hsb2:m:<entry key>, PREFIX:hsb2:c:<chunk id>,
 * PREFIX:hsb2:p:<fp>. Written into out (cap >= strlen(prefix) + 80). */
void remote_key_manifest(const char *prefix, const uint8_t key[32], char *out, size_t cap);
void remote_key_chunk(const char *prefix, const uint8_t id[MANIFEST_CHUNK_ID], char *out, size_t cap);
void remote_key_positions(const char *prefix, uint64_t fp, char *out, size_t cap);

/* A parsed --bank-remote URL. */
struct remote_url {
    bool unix_socket;
    char host[256];                 /* or the socket path */
    int port;
    int db;
    char user[128], password[256];  /* "" none */
};
/* Parse redis://[[user]:password@]host[:port][/db] (host may be [v6]) or
 * unix:///path[?db=N]; false with why (a static string) when malformed. */
bool remote_url_parse(const char *url, struct remote_url *u, const char **why);

/* ---- remote.c's seam for remote_tools.c (`headstart bank --remote`) ---- */
struct redisReply;
/* One command on the lookup connection (taken under its lock; connecting when needed).
 * NULL when the connection failed (the tier is marked down, the error counted); an
 * error reply is returned as such. Free with freeReplyObject. */
struct redisReply *remote_command(struct bank_remote *r, const char *what, int argc,
                                  const char **argv, const size_t *lens);
/* The key namespace. */
const char *remote_prefix(const struct bank_remote *r);

#endif
