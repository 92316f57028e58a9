/* disk_test.h — helpers for the disk tier's tests: temp directories, deterministic entries
 * (KV rows and snapshots from bank_test.h), exact hit checks, blob paths computed
 * independently from the documented key (SHA-256 of fp LE ‖ ids LE; one blob per entry
 * holding the stretch [a, p) past its parent), byte flips, and an
 * fsync gate that holds the writer thread still. */
#ifndef HS_DISK_TEST_H
#define HS_DISK_TEST_H
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "bank_test.h"
#include "sys/sys.h"

#define FP1 0x0123456789abcdefull
#define FP2 0xfedcba9876543210ull
#define ROW 24
#define SNAP 40
#define HDR 160

static inline char *dt_mkdtemp(void)
{
    char *t = strdup("/tmp/hs_disk_XXXXXX");
    cr_assert_not_null(mkdtemp(t));
    char *d = malloc(strlen(t) + 8);
    sprintf(d, "%s/bank", t); /* the tier creates its own directory */
    free(t);
    return d;
}

static inline int dt_rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb; (void)flag; (void)f;
    return remove(p);
}

/* Remove the mkdtemp directory above dir (and dir); frees dir. */
static inline void dt_rmrf(char *dir)
{
    char *slash = strrchr(dir, '/');
    *slash = 0;
    nftw(dir, dt_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    free(dir);
}

static inline char *dt_strcat(const char *a, const char *b)
{
    char *s = malloc(strlen(a) + strlen(b) + 1);
    strcpy(s, a);
    strcat(s, b);
    return s;
}

static inline void dt_ids(int32_t *ids, int64_t n, int seed)
{
    for (int64_t i = 0; i < n; i++) ids[i] = (int32_t)(bt_mix((uint64_t)(seed * 100003 + i)) % 150000);
}

/* The blob of an entry holding [a, p) (ids, KV rows) and the snapshot at p. */
static inline uint64_t dt_blob_bytes(int64_t a, int64_t p)
{
    return HDR + (4 + ROW) * (uint64_t)(p - a) + SNAP;
}
/* A root entry's blob: [0, p). */
static inline uint64_t dt_entry_bytes(int64_t p) { return dt_blob_bytes(0, p); }

static inline struct bank_disk *dt_open(const char *dir, const struct bank_disk_opts *o)
{
    struct bank_disk_opts def;
    if (!o) {
        bank_disk_opts_default(&def);
        def.free_floor_bytes = 0;
        o = &def;
    }
    hs_log_set_level(HS_LOG_ERROR); /* open logs one info line; failures warn */
    struct hs_err err;
    hs_err_clear(&err);
    struct bank_disk *d = bank_disk_open(dir, o, &err);
    cr_assert_not_null(d, "open %s: %s", dir, err.msg);
    return d;
}

static inline enum bank_disk_put_result dt_put(struct bank_disk *d, uint64_t fp,
                                               const int32_t *ids, int64_t p,
                                               enum bank_snap_kind kind)
{
    uint8_t *kv = bt_kv_rows(ids, 0, p, ROW);
    uint8_t snap[SNAP];
    bt_snap_fill(snap, SNAP, ids, p, fp);
    enum bank_disk_put_result r = bank_disk_put(d, fp, ROW, SNAP, ids, p, kv, snap, kind);
    free(kv);
    return r;
}

/* 0 when the hit carries exactly the bytes of (fp, ids[0, pos)). */
static inline int dt_hit_bad(const struct bank_disk_hit *h, uint64_t fp, const int32_t *ids)
{
    if (h->pos <= 0) return 1;
    if (memcmp(h->ids, ids, (size_t)h->pos * 4)) return 2;
    uint8_t *kv = bt_kv_rows(ids, 0, h->pos, ROW);
    int bad = h->kv_bytes != (size_t)h->pos * ROW || memcmp(h->kv, kv, h->kv_bytes) ? 3 : 0;
    free(kv);
    uint8_t snap[SNAP];
    bt_snap_fill(snap, SNAP, ids, h->pos, fp);
    if (!bad && (h->snapshot_bytes != SNAP || memcmp(h->snapshot, snap, SNAP))) bad = 4;
    return bad;
}

static inline void dt_expect(struct bank_disk *d, uint64_t fp, const int32_t *ids, int64_t n,
                             int64_t max_pos, int64_t want)
{
    struct bank_disk_hit h;
    bank_disk_lookup(d, fp, ROW, SNAP, ids, n, 0, max_pos, &h);
    cr_assert_eq(h.pos, want, "lookup n=%lld max=%lld: pos %lld want %lld", (long long)n,
                 (long long)max_pos, (long long)h.pos, (long long)want);
    if (want) cr_assert_eq(dt_hit_bad(&h, fp, ids), 0, "hit bytes differ");
    bank_disk_hit_free(&h);
}

static inline char *dt_blob_path(const char *dir, uint64_t fp, const int32_t *ids, int64_t p)
{
    uint8_t buf[8 + 4 * 4096], md[32];
    cr_assert_leq(p, 4096);
    memcpy(buf, &fp, 8);
    memcpy(buf + 8, ids, (size_t)p * 4);
    unsigned len = 32;
    cr_assert(EVP_Digest(buf, 8 + (size_t)p * 4, md, &len, EVP_sha256(), NULL));
    char hex[65];
    for (int i = 0; i < 32; i++) sprintf(hex + 2 * i, "%02x", md[i]);
    char *s = malloc(strlen(dir) + 100);
    sprintf(s, "%s/blobs/%.2s/%s.hsb", dir, hex, hex);
    return s;
}

static inline bool dt_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static inline void dt_flip(const char *p, long off)
{
    FILE *f = fopen(p, "r+b");
    cr_assert_not_null(f, "open %s", p);
    cr_assert_eq(fseek(f, off, SEEK_SET), 0);
    int c = fgetc(f);
    cr_assert_neq(c, EOF);
    cr_assert_eq(fseek(f, off, SEEK_SET), 0);
    fputc(c ^ 0x40, f);
    fclose(f);
}

static inline void dt_write_file(const char *p, const void *b, size_t n)
{
    FILE *f = fopen(p, "wb");
    cr_assert_not_null(f, "create %s", p);
    cr_assert_eq(fwrite(b, 1, n, f), n);
    fclose(f);
}

static inline void dt_rm_index(const char *dir)
{
    const char *sfx[] = {"/index.sqlite", "/index.sqlite-wal", "/index.sqlite-shm"};
    for (int i = 0; i < 3; i++) {
        char *p = dt_strcat(dir, sfx[i]);
        unlink(p);
        free(p);
    }
}

static int dt_blob_count_;
static inline int dt_count_cb(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
    (void)sb; (void)f;
    if (flag == FTW_F) dt_blob_count_++;
    return 0;
}

/* Files under dir/blobs (blobs and temp files alike). */
static inline int dt_count_blobs(const char *dir)
{
    char *b = dt_strcat(dir, "/blobs");
    dt_blob_count_ = 0;
    nftw(b, dt_count_cb, 16, FTW_PHYS);
    free(b);
    return dt_blob_count_;
}

static inline bool dt_ls_cb(void *ctx, const struct bank_disk_entry *e)
{
    (void)ctx; (void)e;
    return true;
}

static inline int64_t dt_ls_count(struct bank_disk *d) { return bank_disk_ls(d, dt_ls_cb, NULL); }

/* The pid of a process that has exited (and been reaped): a writer that is gone. */
static inline pid_t dt_dead_pid(void)
{
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) _exit(0);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    return pid;
}

/* ---- an fsync that waits: holds the writer thread inside a write -------------------- */

static atomic_int dt_gate_state_; /* 0 closed, 1 a writer waits, 2 open */

static inline int dt_gate_fsync(int fd)
{
    int expect = 0;
    atomic_compare_exchange_strong(&dt_gate_state_, &expect, 1);
    while (atomic_load(&dt_gate_state_) != 2) usleep(1000);
    return fsync(fd);
}
static inline int dt_open_(const char *p, int f, mode_t m) { return open(p, f, m); }
static inline int dt_close_(int fd) { return close(fd); }

static inline void dt_gate_install(void)
{
    static const struct sys_io_ops ops = {dt_open_, pread, pwrite, dt_gate_fsync, rename,
                                          unlink, ftruncate, dt_close_};
    atomic_store(&dt_gate_state_, 0);
    sys_io_set_ops(&ops);
}

static inline void dt_gate_wait_blocked(void)
{
    for (int i = 0; i < 10000 && atomic_load(&dt_gate_state_) != 1; i++) usleep(1000);
    cr_assert_eq(atomic_load(&dt_gate_state_), 1, "the writer never reached fsync");
}

static inline void dt_gate_open(void) { atomic_store(&dt_gate_state_, 2); }

#endif
