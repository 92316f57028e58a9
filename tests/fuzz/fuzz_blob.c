/* fuzz_blob.c — libFuzzer harness for the bank's blob format (src/bank/blob.c).
 *
 * Each input is one blob file's bytes. blob.c's checks are pure (bytes in, verdict out),
 * so the harness calls the very functions a lookup, a verify and the reconcile's adoption
 * run on a file, with no disk:
 *   1. blob_check with no identity to expect (what adoption asks) must give a verdict in
 *      the checks' range, and never read outside the input (ASan).
 *   2. When the header decodes: the same check with the header's own identity as the
 *      expectation and its own ids as the request's must give the same verdict; with one
 *      identity field changed it must say IDENTITY; decode(encode(header)) must equal the
 *      header; and when the blob passes, a changed id must say TOKENS.
 *   3. The key text helpers on the input's first bytes: whatever blob_key_text_ok accepts,
 *      blob_key_unhex turns back into the same text.
 * A mismatch aborts: the fuzzer keeps the input.
 *
 * Built and run by tools/run_fuzz.sh (`make fuzz`). The seed corpus in
 * tests/fuzz/corpus/blob/ is made by this same file built without libFuzzer: valid blobs
 * written by the disk tier's own writer (bank_disk_put into a scratch directory), and
 * corrupted variants of them, each checked for the verdict it must get:
 *
 *   cc -std=c11 -D_GNU_SOURCE -DFUZZ_BLOB_MAKE_CORPUS -Isrc tests/fuzz/fuzz_blob.c \
 *      src/bank/[a-z]*.c src/base/[a-z]*.c src/sys/[a-z]*.c \
 *      -lsqlite3 -lxxhash -lcrypto -lm -lpthread -o /tmp/mkcorpus
 *   /tmp/mkcorpus tests/fuzz/corpus/blob
 */
#include "bank/blob_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check_text_keys(const uint8_t *data, size_t size)
{
    char text[65];
    size_t n = size < 64 ? size : 64;
    memcpy(text, data, n);
    text[n] = 0;
    if (strlen(text) != n) return; /* a NUL inside: not a key, nothing to compare */
    uint8_t k[32];
    if (!blob_key_text_ok(text)) return;
    if (!blob_key_unhex(text, k)) abort(); /* accepted as text, refused as a key */
    char back[65];
    blob_key_hex(k, back);
    if (strcmp(back, text) != 0) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check_text_keys(data, size);
    struct blob_hdr h;
    enum rd any = blob_check(data, size, NULL, NULL, &h);
    if (any != RD_OK && any != RD_SIZE && any != RD_HEADER && any != RD_CHECKSUM) abort();
    if (size < HDR_SIZE || !blob_hdr_decode(data, &h)) {
        if (any == RD_OK) abort();
        return 0;
    }
    /* the header's own identity: the verdict must not change */
    struct blob_hdr exp = h;
    const uint8_t *ids = data + HDR_SIZE;
    bool sized = size == HDR_SIZE + h.payload_len;
    enum rd own = blob_check(data, size, &exp, sized ? ids : NULL, NULL);
    if (own != any) abort();
    /* another fingerprint (then another parent): an identity failure, unless the size
     * check below the header already failed */
    exp.fp ^= 1;
    if (blob_check(data, size, &exp, NULL, NULL) != RD_IDENTITY) abort();
    exp = h;
    exp.parent[31] ^= 1;
    if (blob_check(data, size, &exp, NULL, NULL) != RD_IDENTITY) abort();
    /* the header survives a round trip */
    uint8_t hb[HDR_SIZE];
    struct blob_hdr again;
    blob_hdr_encode(&h, hb);
    if (!blob_hdr_decode(hb, &again) || memcmp(&again, &h, sizeof h) != 0) abort();
    /* a blob that passes must notice one changed id */
    if (any == RD_OK && h.pos > h.start) {
        size_t ids_b = (size_t)(h.pos - h.start) * 4;
        uint8_t *want = malloc(ids_b);
        if (!want) return 0;
        memcpy(want, ids, ids_b);
        want[ids_b - 1] ^= 0x80;
        if (blob_check(data, size, &h, want, NULL) != RD_TOKENS) abort();
        free(want);
    }
    return 0;
}

#ifdef FUZZ_BLOB_MAKE_CORPUS
#include "bank/bank.h"
#include "sys/sys.h"

#include <dirent.h>
#include <sys/stat.h>

static void save(const char *dir, const char *name, const uint8_t *b, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(b, 1, n, f) != n || fclose(f) != 0) { perror(path); exit(1); }
}

static void expect(const char *name, const uint8_t *b, size_t n, enum rd want)
{
    enum rd got = blob_check(b, n, NULL, NULL, NULL);
    if (got != want) {
        fprintf(stderr, "mkcorpus: %s: verdict %s, want %s\n", name, blob_rd_name(got), blob_rd_name(want));
        exit(1);
    }
}

/* Every blob file the writer left under dir/blobs, in name order (at most 8); owned. */
static int collect(const char *dir, char *paths[8])
{
    char *blobs = sys_path_join(dir, "blobs");
    int n = 0;
    DIR *top = opendir(blobs);
    struct dirent *e1;
    while (top && (e1 = readdir(top)) && n < 8) {
        if (e1->d_name[0] == '.') continue;
        char *sub = sys_path_join(blobs, e1->d_name);
        DIR *dd = opendir(sub);
        struct dirent *e2;
        while (dd && (e2 = readdir(dd)) && n < 8)
            if (e2->d_name[0] != '.') paths[n++] = sys_path_join(sub, e2->d_name);
        if (dd) closedir(dd);
        hs_free(sub);
    }
    if (top) closedir(top);
    hs_free(blobs);
    for (int i = 1; i < n; i++) /* insertion sort: a stable corpus */
        for (int j = i; j > 0 && strcmp(paths[j - 1], paths[j]) > 0; j--) {
            char *x = paths[j];
            paths[j] = paths[j - 1];
            paths[j - 1] = x;
        }
    return n;
}

int main(int argc, char **argv)
{
    if (argc != 2) { fprintf(stderr, "usage: mkcorpus OUT_DIR\n"); return 2; }
    const char *out = argv[1];
    char scratch[] = "/tmp/hs_blob_corpus_XXXXXX";
    if (!mkdtemp(scratch)) { perror("mkdtemp"); return 1; }
    struct bank_disk_opts o;
    bank_disk_opts_default(&o);
    o.free_floor_bytes = 0;
    o.writer_low_priority = false;
    struct hs_err err;
    hs_err_clear(&err);
    struct bank_disk *d = bank_disk_open(scratch, &o, &err);
    if (!d) { fprintf(stderr, "mkcorpus: %s\n", err.msg); return 1; }
    /* a root of 6 tokens, a child [6, 9) building on it, and a root with no KV rows */
    int32_t ids[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    uint8_t kv[9 * 8], snap[12];
    for (size_t i = 0; i < sizeof kv; i++) kv[i] = (uint8_t)(i * 7 + 1);
    for (size_t i = 0; i < sizeof snap; i++) snap[i] = (uint8_t)(0xA0 + i);
    bank_disk_put(d, 0x1234, 8, sizeof snap, ids, 6, kv, snap, BANK_SNAP_HEAD);
    bank_disk_flush(d);
    bank_disk_put(d, 0x1234, 8, sizeof snap, ids, 9, kv, snap, BANK_SNAP_END);
    bank_disk_put(d, 0x99, 0, 4, ids + 2, 2, NULL, snap, BANK_SNAP_USER);
    bank_disk_flush(d);
    bank_disk_close(d);

    char *paths[8];
    int n = collect(scratch, paths);
    if (n != 3) { fprintf(stderr, "mkcorpus: the writer left %d blobs, want 3\n", n); return 1; }
    for (int i = 0; i < n; i++) {
        FILE *f = fopen(paths[i], "rb");
        uint8_t b[1024];
        size_t len = f ? fread(b, 1, sizeof b, f) : 0;
        if (f) fclose(f);
        hs_free(paths[i]);
        if (len < HDR_SIZE || len == sizeof b) { fprintf(stderr, "mkcorpus: %s: size %zu\n", paths[i], len); return 1; }
        char name[64];
        snprintf(name, sizeof name, "valid-%d.hsb", i);
        expect(name, b, len, RD_OK);
        save(out, name, b, len);
        if (i) continue; /* the corrupted variants are made from the first blob */
        uint8_t c[1024];
        struct { const char *name; size_t off; uint8_t xor_; bool seal; long dlen; enum rd want; } v[] = {
            { "bad-truncated-header.hsb", 0, 0, false, -(long)(len - 100), RD_SIZE },
            { "bad-truncated-payload.hsb", 0, 0, false, -1, RD_SIZE },
            { "bad-extra-byte.hsb", 0, 0, false, 1, RD_SIZE },
            { "bad-magic.hsb", 0, 0x20, false, 0, RD_HEADER },
            { "bad-header-checksum.hsb", 152, 1, false, 0, RD_HEADER },
            { "bad-version.hsb", 8, 3, true, 0, RD_HEADER },
            { "bad-kind.hsb", 12, 0x40, true, 0, RD_HEADER },
            { "bad-payload-len.hsb", 56, 4, true, 0, RD_HEADER },
            { "bad-start-after-pos.hsb", 24, 0x7f, true, 0, RD_HEADER },
            { "bad-stretch-checksum.hsb", 128, 1, false, 0, RD_HEADER },
            { "bad-stretch-checksum-sealed.hsb", 128, 1, true, 0, RD_CHECKSUM },
            { "bad-snapshot-checksum-sealed.hsb", 136, 1, true, 0, RD_CHECKSUM },
            { "bad-payload-byte.hsb", HDR_SIZE + 2, 1, false, 0, RD_CHECKSUM },
            { "bad-snapshot-byte.hsb", 0, 1, false, 0, RD_CHECKSUM }, /* last byte, below */
        };
        for (size_t j = 0; j < sizeof v / sizeof v[0]; j++) {
            size_t clen = (size_t)((long)len + v[j].dlen);
            memset(c, 0, sizeof c);
            memcpy(c, b, len < clen ? len : clen);
            size_t off = !strcmp(v[j].name, "bad-snapshot-byte.hsb") ? len - 1 : v[j].off;
            if (v[j].xor_) c[off] ^= v[j].xor_;
            /* re-sealed: the header checksum made good again, so the check reaches the field */
            if (v[j].seal) put_u64(c + 152, blob_hdr_sum(c));
            expect(v[j].name, c, clen, v[j].want);
            save(out, v[j].name, c, clen);
        }
    }
    char rm[256];
    snprintf(rm, sizeof rm, "rm -rf '%s'", scratch); /* our own mkdtemp directory */
    if (system(rm) != 0) fprintf(stderr, "mkcorpus: could not remove %s\n", scratch);
    printf("mkcorpus: wrote %d valid blobs and their corrupted variants to %s\n", n, out);
    return 0;
}
#endif
