/* fuzz_manifest.c — libFuzzer harness for the remote tier's pure parts (src/bank/remote_fmt.c).
 *
 * Each input is one manifest value as Redis might hand it back, and also (up to its first
 * NUL) a --bank-remote URL:
 *   1. manifest_decode never reads outside the input (ASan); when it accepts, encoding the
 *      decoded manifest gives the input back byte for byte (every byte is either a field or
 *      a checked zero, and the checksum covers them), and its sizes are consistent:
 *      blob_len fits the chunk count exactly.
 *   2. remote_url_parse never reads past the string; when it accepts, the host (or socket
 *      path) is not empty and the port is 1..65535; the redaction never prints the password.
 * A mismatch aborts: the fuzzer keeps the input.
 *
 * Built and run by tools/run_fuzz.sh (`make fuzz`). The seed corpus in
 * tests/fuzz/corpus/manifest/ is made by this file built with FUZZ_MANIFEST_MAKE_CORPUS:
 *   cc -std=c11 -D_GNU_SOURCE -DFUZZ_MANIFEST_MAKE_CORPUS -Isrc tests/fuzz/fuzz_manifest.c \
 *      src/bank/blob.c src/bank/remote_fmt.c src/base/[a-z]*.c src/sys/[a-z]*.c \
 *      -lxxhash -lcrypto -lm -lpthread -o /tmp/mkcorpus && /tmp/mkcorpus tests/fuzz/corpus/manifest
 */
#include "bank/blob_int.h"
#include "bank/remote_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check_url(const uint8_t *data, size_t size)
{
    char s[512];
    size_t n = size < sizeof s - 1 ? size : sizeof s - 1;
    memcpy(s, data, n);
    s[n] = 0;
    struct remote_url u;
    const char *why;
    if (remote_url_parse(s, &u, &why)) {
        if (!u.host[0] || u.port < 1 || u.port > 65535) abort();
        char shown[600], leak[300];
        bank_remote_url_redact(s, shown, sizeof shown);
        snprintf(leak, sizeof leak, ":%s@", u.password);
        if (u.password[0] && strstr(shown, leak)) abort();
    } else if (!why || !*why) {
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_url(data, size);
    struct manifest m;
    if (!manifest_decode(data, size, &m)) {
        if (m.chunk_ids) abort(); /* a refusal owns nothing */
        return 0;
    }
    if (m.n_chunks == 0 || (m.blob_len + m.chunk_bytes - 1) / m.chunk_bytes != m.n_chunks) abort();
    size_t len;
    uint8_t *b = manifest_encode(&m, &len);
    if (len != size || memcmp(b, data, size) != 0) abort();
    hs_free(b);
    manifest_free(&m);
    return 0;
}

#ifdef FUZZ_MANIFEST_MAKE_CORPUS
static void put(const char *dir, const char *name, const uint8_t *b, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, n, f) != n) { perror(path); exit(1); }
    fclose(f);
}

int main(int argc, char **argv)
{
    if (argc != 2) { fprintf(stderr, "usage: mkcorpus DIR\n"); return 2; }
    struct manifest m = {0};
    for (int i = 0; i < 32; i++) { m.key[i] = (uint8_t)(0x11 * i); m.parent[i] = (uint8_t)(0xa0 + i); }
    m.fp = 0x0123456789abcdefull;
    m.row = 24;
    m.snap = 40;
    const uint64_t spans[][3] = { {0, 10, 4096}, {10, 30, 4096}, {100, 2000, 4096}, {0, 3000, 1u << 22} };
    for (int k = 0; k < 4; k++) {
        m.start = spans[k][0];
        m.pos = spans[k][1];
        m.chunk_bytes = spans[k][2];
        m.kind = (uint32_t)(k % BANK_SNAP_KIND_COUNT);
        uint64_t plen;
        blob_payload_len((int64_t)m.start, (int64_t)m.pos, m.row, m.snap, &plen);
        m.blob_len = HDR_SIZE + plen;
        m.n_chunks = (uint32_t)((m.blob_len + m.chunk_bytes - 1) / m.chunk_bytes);
        uint8_t zero[32] = {0}, par[32];
        memcpy(par, m.parent, 32);
        if (m.start == 0) memcpy(m.parent, zero, 32);
        m.chunk_ids = calloc(m.n_chunks, MANIFEST_CHUNK_ID);
        for (uint32_t i = 0; i < m.n_chunks * MANIFEST_CHUNK_ID; i++) ((uint8_t *)m.chunk_ids)[i] = (uint8_t)(i * 13 + k);
        size_t len;
        uint8_t *b = manifest_encode(&m, &len);
        struct manifest d;
        if (!manifest_decode(b, len, &d)) { fprintf(stderr, "seed %d does not decode\n", k); return 1; }
        manifest_free(&d);
        char name[64];
        snprintf(name, sizeof name, "valid_%d", k);
        put(argv[1], name, b, len);
        b[40] ^= 1; /* a size changed, checksum stale */
        snprintf(name, sizeof name, "stale_sum_%d", k);
        put(argv[1], name, b, len);
        free(b);
        free(m.chunk_ids);
        memcpy(m.parent, par, 32);
    }
    const char *urls[] = { "redis://127.0.0.1:6379/0", "redis://u:p@[::1]:7000/2", "unix:///tmp/r.sock?db=1",
                           "redis://:pw@host", "redis://h:99999" };
    for (int i = 0; i < 5; i++) {
        char name[32];
        snprintf(name, sizeof name, "url_%d", i);
        put(argv[1], name, (const uint8_t *)urls[i], strlen(urls[i]));
    }
    return 0;
}
#endif
