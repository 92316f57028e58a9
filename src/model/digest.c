/*
 * digest.c — the model's identity: one 128-bit digest of every byte of the model's files
 * that decides what the model computes (or how its text is tokenized and rendered), with
 * a cache of per-file digests so that a start does not re-read tens of GB; and the checks
 * that the files a model was loaded from are still the bytes it is computing with.
 *
 * Design note
 * -----------
 * What the identity covers (docs/FORMATS.md "Model identity" is the reference):
 *   - GGUF: the whole .gguf file (header, every metadata key — hyperparameters, the
 *     tokenizer, the chat template — the tensor table and all tensor data).
 *   - Hugging Face directory: every safetensors file the weights come from, whole (its
 *     JSON header with the tensor table, then the data), and config.json,
 *     tokenizer.json, tokenizer_config.json and chat_template.jinja (each whole, or
 *     recorded as absent).
 * Each file contributes (role, present, size, XXH3-128 of all its bytes); the identity is
 * the XXH3-128 of the record below. Path, name of the model directory, mtime and owner are
 * left out: a copy of a model is the same model. Build, kernel variant and geometry are
 * not the model's: the engine adds them (engine.c's fingerprint).
 *
 *   record: "headstart-model-identity-1" NUL, u32 source (0 HF, 1 GGUF), u32 n files,
 *           per file: u32 role length, role, u8 present, u64 size, 16-byte digest
 *           (XXH3-128, canonical big-endian; zero when absent); integers little-endian.
 *
 * Digest cache. Hashing reads every byte (disk speed the first time). A per-file digest is
 * kept in CACHE/<hex XXH3-64 of (dev, ino)>.hsid, 80 bytes, little-endian:
 *
 *   OFFSET SIZE FIELD
 *   0      8    magic "HSMODID1"
 *   8      4    version (1)
 *   12     4    zero
 *   16     8    st_dev
 *   24     8    st_ino
 *   32     8    st_size
 *   40     8    st_mtime (ns)
 *   48     8    st_ctime (ns)
 *   56     16   XXH3-128 of the file's bytes (canonical)
 *   72     8    XXH3-64 of bytes [0, 72)
 *
 * Invariants:
 *   1. A cached digest is used only when the entry's checksum, magic and version verify
 *      and its dev, ino, size, mtime and ctime equal the file's fstat now (through the
 *      descriptor of the mapping, never a second open by path: the bytes hashed are the
 *      mapped inode's, read through the mapping itself); anything else (corrupt,
 *      truncated, another file's, a FIFO or symlink planted there) is ignored, the file
 *      re-hashed and the entry rewritten (temp + fsync + rename).
 *   2. Racy files: a digest is cached only when the file's last change (mtime and ctime)
 *      lies at least racy_s before the hash began, so a write in the same timestamp tick
 *      as the hash can never leave a stale entry (every later write moves ctime past it).
 *   3. A file whose stat changes while it is hashed, or (mapped files) differs from the
 *      stat at map time (sys_file_stat_changed), is an error: the bytes hashed are not the
 *      bytes loaded.
 *   4. The cache is an optimisation only: an unreadable or unwritable cache directory
 *      costs a re-hash (logged once per call), never a wrong identity.
 */
#include "model/model_int.h"
#include "sys/sys.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#define ID_TAG "headstart-model-identity-1"
#define ENTRY_BYTES 80
#define HASH_CHUNK (4u << 20)
static const char k_entry_magic[8] = { 'H', 'S', 'M', 'O', 'D', 'I', 'D', '1' };

void model_identity_opts_default(struct model_identity_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->racy_s = 2.0;
    o->max_hash_bytes = UINT64_MAX;
}

static void put32(uint8_t *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i)); }
static void put64(uint8_t *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i)); }

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* One file of the identity: its role, and either a mapping (weights) or a path. */
struct id_file {
    char role[96];
    const struct sys_map *map; /* weights: read through map->fd */
    char *path;                /* side files: opened here; owned */
    bool present;
    int fd;                    /* open descriptor while hashing, -1 when none */
    bool own_fd;
    struct sys_file_stat st;   /* fstat at the start */
    uint8_t digest[16];
    bool cached;
};

static char *entry_path(const char *dir, const struct sys_file_stat *st)
{
    uint8_t k[16];
    put64(k, st->dev);
    put64(k + 8, st->ino);
    char name[40];
    snprintf(name, sizeof(name), "%016" PRIx64 ".hsid", (uint64_t)XXH3_64bits(k, sizeof(k)));
    return sys_path_join(dir, name);
}

/* The cached digest of a file with stat st, or false (invariant 1). */
static bool cache_get(const char *dir, const struct sys_file_stat *st, uint8_t digest[16])
{
    char *p = entry_path(dir, st);
    int fd = sys_io_open(p, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
    hs_free(p);
    if (fd < 0) return false;
    struct stat es;
    uint8_t b[ENTRY_BYTES];
    bool ok = fstat(fd, &es) == 0 && S_ISREG(es.st_mode) && es.st_size == ENTRY_BYTES &&
              sys_io_pread_full(fd, b, ENTRY_BYTES, 0) == ENTRY_BYTES;
    sys_io_close(fd);
    ok = ok && !memcmp(b, k_entry_magic, 8) && hs_rd_u32(b + 8) == 1 && hs_rd_u32(b + 12) == 0 &&
         hs_rd_u64(b + 72) == (uint64_t)XXH3_64bits(b, 72);
    ok = ok && hs_rd_u64(b + 16) == st->dev && hs_rd_u64(b + 24) == st->ino && hs_rd_u64(b + 32) == st->size &&
         (int64_t)hs_rd_u64(b + 40) == st->mtime_ns && (int64_t)hs_rd_u64(b + 48) == st->ctime_ns;
    if (ok) memcpy(digest, b + 56, 16);
    return ok;
}

static int cache_put(const char *dir, const struct sys_file_stat *st, const uint8_t digest[16], struct hs_err *err)
{
    uint8_t b[ENTRY_BYTES] = { 0 };
    memcpy(b, k_entry_magic, 8);
    put32(b + 8, 1);
    put64(b + 16, st->dev);
    put64(b + 24, st->ino);
    put64(b + 32, st->size);
    put64(b + 40, (uint64_t)st->mtime_ns);
    put64(b + 48, (uint64_t)st->ctime_ns);
    memcpy(b + 56, digest, 16);
    put64(b + 72, (uint64_t)XXH3_64bits(b, 72));
    int rc = sys_mkdir_p(dir, err);
    char *p = entry_path(dir, st);
    if (rc == HS_OK) rc = sys_file_write_atomic(p, b, sizeof(b), err);
    hs_free(p);
    return rc;
}

/* XXH3-128 of the whole file behind f->fd, whose stat was f->st (invariant 3). */
static int hash_file(struct id_file *f, const struct model_identity_opts *o, uint64_t *hashed, struct hs_err *err)
{
    const char *name = f->map ? f->map->path : f->path;
    XXH3_state_t *x = XXH3_createState();
    uint8_t *buf = hs_malloc(HASH_CHUNK);
    XXH3_128bits_reset(x);
#ifdef POSIX_FADV_SEQUENTIAL
    posix_fadvise(f->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
#endif
    int rc = HS_OK;
    /* a mapped file is read through its mapping: no copy, and its page tables are warm for
     * the first request; a truncation meanwhile is the SIGBUS guard's (checked below) */
    const uint8_t *mapped = f->map && f->map->len == f->st.size ? f->map->data : NULL;
    for (uint64_t off = 0; off < f->st.size && rc == HS_OK;) {
        if (o->stop && o->stop(o->stop_ctx)) {
            rc = hs_err_set(err, HS_ERR_INVALID, "%s: hashing stopped", name);
            break;
        }
        size_t n = (size_t)HS_MIN((uint64_t)HASH_CHUNK, f->st.size - off);
        if (mapped) {
            XXH3_128bits_update(x, mapped + off, n);
            off += n;
            *hashed += n;
            continue;
        }
        ssize_t got = sys_io_pread_full(f->fd, buf, n, (off_t)off);
        if (got != (ssize_t)n)
            rc = hs_err_set(err, HS_ERR_IO, "%s: read at %" PRIu64 " failed: %s", name, off,
                            got < 0 ? strerror(errno) : "the file shrank while it was hashed");
        else XXH3_128bits_update(x, buf, n);
        off += n;
        *hashed += n;
    }
    struct stat after;
    struct sys_file_stat sa;
    if (rc == HS_OK && mapped && sys_file_map_faulted(f->map))
        rc = hs_err_set(err, HS_ERR_IO, "%s: the file was truncated while it was hashed", name);
    if (rc == HS_OK) {
        if (fstat(f->fd, &after) != 0)
            rc = hs_err_set(err, HS_ERR_IO, "%s: cannot stat: %s", name, strerror(errno));
        else if (sys_file_stat_from(&after, &sa), sys_file_stat_changed(&f->st, &sa))
            rc = hs_err_set(err, HS_ERR_IO, "%s: the file changed while it was hashed", name);
    }
    if (rc == HS_OK) {
        XXH128_canonical_t c;
        XXH128_canonicalFromHash(&c, XXH3_128bits_digest(x));
        memcpy(f->digest, c.digest, 16);
    }
    hs_free(buf);
    XXH3_freeState(x);
    return rc;
}

static void add_side(struct id_file *fs, int *n, const char *dir, const char *name)
{
    struct id_file *f = &fs[(*n)++];
    snprintf(f->role, sizeof(f->role), "%s", name);
    f->path = sys_path_join(dir, name);
}

int model_identity_compute(const struct model *m, const struct model_identity_opts *opts,
                           struct model_identity *out, struct hs_err *err)
{
    struct model_identity_opts d;
    model_identity_opts_default(&d);
    const struct model_identity_opts *o = opts ? opts : &d;
    memset(out, 0, sizeof(*out));
    double t0 = sys_time_sec();
    const struct tensor_set *ts = model_tensors(m);
    int n_w = tensor_set_n_files(ts), n = 0;
    struct id_file *fs = hs_calloc((size_t)n_w + 4, sizeof(*fs));
    for (int i = 0; i < n_w; i++) {
        struct id_file *f = &fs[n++];
        f->map = tensor_set_file(ts, i);
        const char *p = f->map->path, *slash = strrchr(p, '/');
        if (model_source(m) == MODEL_SOURCE_GGUF) snprintf(f->role, sizeof(f->role), "gguf");
        else snprintf(f->role, sizeof(f->role), "weights/%.80s", slash ? slash + 1 : p);
    }
    if (model_source(m) == MODEL_SOURCE_HF) {
        static const char *const side[] = { "config.json", "tokenizer.json", "tokenizer_config.json",
                                            "chat_template.jinja" };
        for (size_t i = 0; i < HS_ARRAY_LEN(side); i++) add_side(fs, &n, model_dir(m), side[i]);
    }
    int rc = HS_OK;
    /* open and stat everything first: the cache answers what it can, the rest is hashed */
    uint64_t to_hash = 0;
    for (int i = 0; i < n && rc == HS_OK; i++) {
        struct id_file *f = &fs[i];
        f->fd = -1;
        struct stat st;
        if (f->map) {
            f->fd = f->map->fd;
            f->present = true;
            if (fstat(f->fd, &st) != 0) {
                rc = hs_err_set(err, HS_ERR_IO, "%s: cannot stat: %s", f->map->path, strerror(errno));
                break;
            }
            sys_file_stat_from(&st, &f->st);
            if (sys_file_stat_changed(&f->map->st, &f->st))
                rc = hs_err_set(err, HS_ERR_IO, "%s: the file changed since it was loaded (written in place)",
                                f->map->path);
        } else {
            f->fd = sys_io_open(f->path, O_RDONLY | O_CLOEXEC | O_NONBLOCK, 0);
            if (f->fd < 0) {
                if (errno != ENOENT)
                    rc = hs_err_set(err, HS_ERR_IO, "%s: cannot open: %s", f->path, strerror(errno));
                continue; /* absent: recorded as such */
            }
            f->own_fd = true;
            if (fstat(f->fd, &st) != 0 || !S_ISREG(st.st_mode)) {
                rc = hs_err_set(err, HS_ERR_IO, "%s: not a readable regular file", f->path);
                break;
            }
            f->present = true;
            sys_file_stat_from(&st, &f->st);
        }
        if (rc == HS_OK && o->cache_dir && cache_get(o->cache_dir, &f->st, f->digest)) f->cached = true;
        if (!f->cached) to_hash += f->st.size;
    }
    if (rc == HS_OK && to_hash > o->max_hash_bytes)
        rc = hs_err_set(err, HS_ERR_LIMIT, "%s: %" PRIu64 " bytes to hash, more than %" PRIu64, model_path(m),
                        to_hash, o->max_hash_bytes);
    int64_t t_hash = now_ns();
    bool cache_warned = false;
    for (int i = 0; i < n && rc == HS_OK; i++) {
        struct id_file *f = &fs[i];
        if (!f->present || f->cached) continue;
        rc = hash_file(f, o, &out->bytes_hashed, err);
        if (rc != HS_OK) break;
        int64_t last = HS_MAX(f->st.mtime_ns, f->st.ctime_ns);
        if (o->cache_dir && (double)(t_hash - last) >= o->racy_s * 1e9) {
            struct hs_err ce;
            hs_err_clear(&ce);
            if (cache_put(o->cache_dir, &f->st, f->digest, &ce) != HS_OK && !cache_warned) {
                hs_log_write(HS_LOG_WARN, "model identity: digest not cached: %s", ce.msg);
                cache_warned = true;
            }
        }
    }
    if (rc == HS_OK) {
        /* the record of the design note */
        XXH3_state_t *x = XXH3_createState();
        XXH3_128bits_reset(x);
        XXH3_128bits_update(x, ID_TAG, sizeof(ID_TAG));
        uint8_t b[8];
        put32(b, model_source(m) == MODEL_SOURCE_GGUF ? 1u : 0u);
        put32(b + 4, (uint32_t)n);
        XXH3_128bits_update(x, b, 8);
        for (int i = 0; i < n; i++) {
            struct id_file *f = &fs[i];
            uint8_t h[4 + 1 + 8];
            put32(h, (uint32_t)strlen(f->role));
            XXH3_128bits_update(x, h, 4);
            XXH3_128bits_update(x, f->role, strlen(f->role));
            h[0] = f->present;
            put64(h + 1, f->present ? f->st.size : 0);
            XXH3_128bits_update(x, h, 9);
            static const uint8_t zero[16];
            XXH3_128bits_update(x, f->present ? f->digest : zero, 16);
            out->n_files += f->present;
            out->n_cached += f->present && f->cached;
        }
        XXH128_canonical_t c;
        XXH128_canonicalFromHash(&c, XXH3_128bits_digest(x));
        memcpy(out->digest, c.digest, 16);
        XXH3_freeState(x);
    }
    for (int i = 0; i < n; i++) {
        if (fs[i].own_fd) sys_io_close(fs[i].fd);
        hs_free(fs[i].path);
    }
    hs_free(fs);
    out->seconds = sys_time_sec() - t0;
    if (rc != HS_OK) {
        uint64_t h = out->bytes_hashed;
        double s = out->seconds;
        memset(out, 0, sizeof(*out));
        out->bytes_hashed = h;
        out->seconds = s;
    }
    return rc;
}

void model_identity_hex(const struct model_identity *id, char out[33])
{
    for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", id->digest[i]);
}

/* HS_ERR_IO naming the first mapped file of m that bad() finds: "<path>: <what>; replace a
 * model by rename, then restart". */
static int model_files_find(const struct model *m, bool (*bad)(const struct sys_map *f), const char *what,
                            struct hs_err *err)
{
    const struct tensor_set *ts = model_tensors(m);
    for (int i = 0; ts && i < tensor_set_n_files(ts); i++) {
        const struct sys_map *f = tensor_set_file(ts, i);
        if (bad(f)) return hs_err_set(err, HS_ERR_IO, "%s: %s; replace a model by rename, then restart", f->path, what);
    }
    return HS_OK;
}

int model_files_check(const struct model *m, struct hs_err *err)
{
    return model_files_find(m, sys_file_map_changed,
                            "the model file changed on disk since it was loaded (written, truncated or "
                            "replaced in place)", err);
}

int model_mapping_check(const struct model *m, struct hs_err *err)
{
    if (!sys_file_map_faults()) return HS_OK; /* the common case: one atomic load */
    return model_files_find(m, sys_file_map_faulted,
                            "the model file was truncated while it was in use (SIGBUS reading its mapping)",
                            err);
}
