/*
 * sys — the operating-system seam: memory-mapped files, the disk I/O table with fault
 * injection, a persistent thread pool, CPU feature detection, clocks, and SHA-256 (the
 * system's libcrypto, one implementation for the whole tree).
 * Depends on base.
 *
 * Design note
 * -----------
 * Disk I/O.  Every open/pread/pwrite/fsync/rename/unlink/ftruncate/close of headstart's
 * own files goes through `hs_io` (sys_io_*). Tests arm a fault with sys_io_fault_set:
 * "fail the Nth call of operation OP with errno E", once (transient) or from then on
 * (persistent). That is how the bank's disk tier is proven to survive a failing disk.
 *
 * Threads.  A pool of persistent worker threads; `sys_pool_run` splits an index range
 * [0, n) into at most n_threads contiguous slices (slice t gets the t-th equal share,
 * computed by the same formula every time) and blocks until all are done. The split
 * depends only on (n, n_threads), never on timing; kernels that must be thread-count
 * invariant split output rows only, never a reduction. `sys_pool_run_chunks` hands out
 * fixed pieces first come, first served, for work whose result does not depend on who
 * runs which piece.
 *
 * Invariants:
 *   1. sys_file_map never returns a mapping shorter than the file it reported; an empty
 *      file maps to a valid zero-length view (data may be NULL, len 0).
 *   2. sys_io_* set errno-style messages in hs_err naming the path and the operation.
 *   3. sys_pool_run with n_threads == 1 runs the function inline on the caller's thread.
 *   4. A SIGBUS on a registered mapping never kills the process and never goes unnoticed:
 *      the mapping reads as zeros from then on and sys_file_map_faulted says so.
 */
#ifndef HS_SYS_H
#define HS_SYS_H

#include "base/base.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- memory-mapped files ------------------------------------------------------------ */

/* The stat fields that say whether a file's bytes may have changed: an in-place write
 * changes size, mtime and ctime; a rename puts another inode at the path. */
struct sys_file_stat {
    uint64_t dev, ino, size;
    int64_t mtime_ns, ctime_ns;
    uint64_t nlink;
};

struct stat;
/* The fields of a stat result that tell one version of a file from another. */
void sys_file_stat_from(const struct stat *st, struct sys_file_stat *out);
/* then -> now of one inode may have changed its bytes: size or mtime differ, or ctime
 * does while the link count did not (a rename over the file or its unlink moves ctime
 * and nlink but keeps the bytes; a write that set mtime back moves ctime alone). */
bool sys_file_stat_changed(const struct sys_file_stat *then, const struct sys_file_stat *now);

struct sys_map {
    const uint8_t *data; /* read-only view of the whole file; NULL when len == 0 */
    uint64_t len;        /* file size in bytes at map time */
    char *path;          /* owned copy, for messages */
    uint64_t dev, ino;   /* identity of the mapped file */
    int64_t mtime_ns;
    struct sys_file_stat st; /* the whole stat at map time (st.size == len) */
    int fd;              /* the mapped file, kept open (read-only): its fstat and its bytes
                            are the mapped inode's whatever is renamed over the path later;
                            valid while path != NULL */
};

/* Map a whole file read-only. On success *m is filled; free with sys_file_unmap.
 * The mapping is registered with the SIGBUS guard (below). */
int sys_file_map(const char *path, struct sys_map *m, struct hs_err *err);
void sys_file_unmap(struct sys_map *m); /* safe on a zeroed or already-unmapped map */

/* The file's stat now (through the descriptor: the mapped inode). -1/errno on failure. */
int sys_file_map_stat(const struct sys_map *m, struct sys_file_stat *out);
/* The mapped inode may no longer hold the bytes it held at map time
 * (sys_file_stat_changed: written, truncated or extended in place), or it cannot be
 * stat'ed. Cheap: one fstat. */
bool sys_file_map_changed(const struct sys_map *m);
/* The SIGBUS guard. Reading a page of a mapping past the end of its (since truncated)
 * file raises SIGBUS. For a registered mapping the handler replaces the whole mapping
 * with zero pages (mmap MAP_FIXED of anonymous memory over the same range: the faulting
 * load then re-executes and reads 0, on whichever thread it was), marks it faulted and
 * returns; a SIGBUS anywhere else gets the handler that was installed before (the
 * default: the process dies as it always did). What was computed from such a mapping is
 * garbage: callers check sys_file_map_faulted after the work and discard it. The mark is
 * sticky: the mapping stays zero until it is unmapped. */
bool sys_file_map_faulted(const struct sys_map *m);
/* Faults taken on registered mappings since the process started. */
uint64_t sys_file_map_faults(void);

/* Drop the whole pages inside [p, p+n) of a read-only file mapping from the resident set
 * (mem.c; advice only, never an error): a later read refaults them from the file. */
void sys_mem_cold(const void *p, size_t n);
/* Read and map in the whole pages covering [p, p+n) of a file mapping now, rather than a
 * fault at a time on first use (mem.c; advice only, never an error). */
void sys_mem_warm(const void *p, size_t n);

/* Read a whole (small) file into memory, NUL-terminated; *len_out excludes the NUL. */
int sys_file_read_all(const char *path, uint64_t max_len, char **data_out, size_t *len_out,
                      struct hs_err *err);

bool sys_path_is_dir(const char *path);
bool sys_path_exists(const char *path);
/* Join dir and name with one '/'; returns an owned string. */
char *sys_path_join(const char *dir, const char *name);
/* mkdir -p; ok when it exists. */
int sys_mkdir_p(const char *path, struct hs_err *err);

/* ---- the disk I/O seam -------------------------------------------------------------- */

enum sys_io_op {
    SYS_IO_OPEN, SYS_IO_PREAD, SYS_IO_PWRITE, SYS_IO_FSYNC, SYS_IO_RENAME,
    SYS_IO_UNLINK, SYS_IO_FTRUNCATE, SYS_IO_CLOSE, SYS_IO_OP_COUNT
};

/* The table every file operation goes through. Return values follow POSIX (-1 + errno). */
struct sys_io_ops {
    int (*open)(const char *path, int flags, mode_t mode);
    ssize_t (*pread)(int fd, void *buf, size_t n, off_t off);
    ssize_t (*pwrite)(int fd, const void *buf, size_t n, off_t off);
    int (*fsync)(int fd);
    int (*rename)(const char *from, const char *to);
    int (*unlink)(const char *path);
    int (*ftruncate)(int fd, off_t len);
    int (*close)(int fd);
};

/* Replace the table (NULL restores the real one). For tests. */
void sys_io_set_ops(const struct sys_io_ops *ops);
/* Arm a fault: the nth (1-based) call of op from now fails with errno_value; when
 * persistent, every later call of op fails too. nth == 0 disarms op. */
void sys_io_fault_set(enum sys_io_op op, uint64_t nth, int errno_value, bool persistent);
void sys_io_fault_clear_all(void);
/* Calls of op seen since start or the last clear (counted whether or not they failed). */
uint64_t sys_io_calls(enum sys_io_op op);
const char *sys_io_op_name(enum sys_io_op op);

/* Wrappers: -1/errno on failure like POSIX; short reads/writes are retried until done. */
int sys_io_open(const char *path, int flags, mode_t mode);
ssize_t sys_io_pread_full(int fd, void *buf, size_t n, off_t off);
ssize_t sys_io_pwrite_full(int fd, const void *buf, size_t n, off_t off);
int sys_io_fsync(int fd);
int sys_io_rename(const char *from, const char *to);
int sys_io_unlink(const char *path);
int sys_io_ftruncate(int fd, off_t len);
int sys_io_close(int fd);

/* A file replaced atomically: bytes go to a temp file beside `path`; commit fsyncs, renames
 * over `path` and fsyncs the directory. Writes record the first failure (sticky) and do
 * nothing after it; commit reports it. On any failure the destination is untouched and
 * the temp file removed. Lifecycle: open -> write* -> commit | abort (both release). */
struct sys_wfile {
    int fd;                /* -1 once closed */
    char *path, *tmp;      /* owned */
    const char *failed_op; /* NULL, or the first operation that failed */
    int failed_errno;
};

int sys_wfile_open(struct sys_wfile *w, const char *path, struct hs_err *err);
void sys_wfile_pwrite(struct sys_wfile *w, const void *buf, size_t n, uint64_t off);
void sys_wfile_zeros(struct sys_wfile *w, uint64_t n, uint64_t off);
int sys_wfile_commit(struct sys_wfile *w, struct hs_err *err);
void sys_wfile_abort(struct sys_wfile *w);

/* Write a whole file atomically (a sys_wfile of one write). */
int sys_file_write_atomic(const char *path, const void *data, size_t len, struct hs_err *err);

/* ---- thread pool -------------------------------------------------------------------- */

struct sys_pool;
/* fn(ctx, begin, end, thread_index) handles indices [begin, end). */
typedef void (*sys_pool_fn)(void *ctx, int64_t begin, int64_t end, int thread_index);

struct sys_pool *sys_pool_new(int n_threads); /* n_threads >= 1; the caller is thread 0 */
void sys_pool_free(struct sys_pool *p);       /* joins the workers; NULL is a no-op */
int sys_pool_threads(const struct sys_pool *p);
/* Split [0, n) into contiguous slices, one per thread, and wait for all of them. */
void sys_pool_run(struct sys_pool *p, int64_t n, sys_pool_fn fn, void *ctx);
/* [0, n) in pieces [i, min(i + chunk, n)) for i = 0, chunk, 2 chunk, ...; every thread takes
 * the next untaken piece until none is left, then all are waited for. Which thread runs a
 * piece depends on timing, so this is only for work whose result cannot depend on it
 * (e.g. the rows of a matmul, each computed whole by one call): a thread that starts late
 * or runs slow (a busy neighbour) takes fewer pieces instead of holding the others up.
 * chunk < 1 is taken as 1. */
void sys_pool_run_chunks(struct sys_pool *p, int64_t n, int64_t chunk, sys_pool_fn fn, void *ctx);
/* The slice of [0, n) that thread t of n_threads gets (deterministic). */
void sys_pool_slice(int64_t n, int n_threads, int t, int64_t *begin, int64_t *end);

/* ---- CPU and machine ---------------------------------------------------------------- */

struct sys_cpu {
    bool avx2, fma, f16c, avx512f, avx512bw, avx512vl, avx512_bf16, avx512_vnni, amx;
    bool avx_vnni; /* VEX-encoded vpdpbusd on ymm (AVX-VNNI: Alder Lake and later, Zen 5) */
    bool neon; /* arm64 */
    int n_cores; /* online logical CPUs */
    char model[64];
};

const struct sys_cpu *sys_cpu_get(void); /* detected once, cached */
/* Honour HEADSTART_CPU=scalar|avx2|avxvnni|avx512vnni|avx512 to force a lower kernel level (tests). */
uint64_t sys_mem_total_bytes(void);
uint64_t sys_disk_free_bytes(const char *path); /* 0 when unknown */

/* ---- SHA-256 (sha256.c, OpenSSL's libcrypto) ------------------------------------------ */
/* Digest of data[0..len) (FIPS 180-4, big-endian as the standard writes it), and the same
 * as 64 lowercase hex digits and a NUL. */
void sys_sha256(const void *data, size_t len, uint8_t out[32]);
void sys_sha256_hex(const void *data, size_t len, char out[65]);

/* ---- clocks ------------------------------------------------------------------------- */
double sys_time_sec(void); /* monotonic seconds */
int64_t sys_time_unix_ms(void);

#endif
