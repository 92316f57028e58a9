/* io.c — the disk I/O seam: one table of file operations, with fault injection.
 *
 * A fault is armed per operation: counting from the arming, the nth call fails with a
 * chosen errno (transient), or the nth and every later call (persistent). Counters are
 * atomic so the background writer thread and the test thread can share the seam.
 */
#include "sys/sys.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static int real_open(const char *path, int flags, mode_t mode) { return open(path, flags, mode); }

static const struct sys_io_ops real_ops = {
    .open = real_open, .pread = pread, .pwrite = pwrite, .fsync = fsync,
    .rename = rename, .unlink = unlink, .ftruncate = ftruncate, .close = close,
};

static const struct sys_io_ops *g_ops = &real_ops;

struct fault {
    _Atomic uint64_t calls;    /* calls seen since the last clear */
    _Atomic uint64_t armed_at; /* calls count when armed */
    _Atomic uint64_t nth;      /* 0 = disarmed */
    _Atomic int errno_value;
    _Atomic bool persistent;
};

static struct fault g_faults[SYS_IO_OP_COUNT];

static const char *const op_names[SYS_IO_OP_COUNT] = {
    "open", "pread", "pwrite", "fsync", "rename", "unlink", "ftruncate", "close",
};

const char *sys_io_op_name(enum sys_io_op op)
{
    return (unsigned)op < SYS_IO_OP_COUNT ? op_names[op] : "?";
}

void sys_io_set_ops(const struct sys_io_ops *ops) { g_ops = ops ? ops : &real_ops; }

void sys_io_fault_set(enum sys_io_op op, uint64_t nth, int errno_value, bool persistent)
{
    struct fault *f = &g_faults[op];
    atomic_store(&f->armed_at, atomic_load(&f->calls));
    atomic_store(&f->errno_value, errno_value);
    atomic_store(&f->persistent, persistent);
    atomic_store(&f->nth, nth);
}

void sys_io_fault_clear_all(void)
{
    for (int i = 0; i < SYS_IO_OP_COUNT; i++) {
        atomic_store(&g_faults[i].nth, 0);
        atomic_store(&g_faults[i].calls, 0);
        atomic_store(&g_faults[i].armed_at, 0);
    }
}

uint64_t sys_io_calls(enum sys_io_op op) { return atomic_load(&g_faults[op].calls); }

/* Count a call of op; true (and errno set) when it must fail. */
static bool fault_hit(enum sys_io_op op)
{
    struct fault *f = &g_faults[op];
    uint64_t k = atomic_fetch_add(&f->calls, 1) + 1;
    uint64_t nth = atomic_load(&f->nth);
    if (!nth) return false;
    uint64_t i = k - atomic_load(&f->armed_at);
    if (i == nth || (i > nth && atomic_load(&f->persistent))) {
        errno = atomic_load(&f->errno_value);
        return true;
    }
    return false;
}

int sys_io_open(const char *path, int flags, mode_t mode)
{
    if (fault_hit(SYS_IO_OPEN)) return -1;
    return g_ops->open(path, flags, mode);
}

ssize_t sys_io_pread_full(int fd, void *buf, size_t n, off_t off)
{
    size_t done = 0;
    while (done < n) {
        if (fault_hit(SYS_IO_PREAD)) return -1;
        ssize_t r = g_ops->pread(fd, (char *)buf + done, n - done, off + (off_t)done);
        if (r < 0) { if (errno == EINTR) continue; return -1; }
        if (r == 0) break; /* end of file: a short count tells the caller */
        done += (size_t)r;
    }
    return (ssize_t)done;
}

ssize_t sys_io_pwrite_full(int fd, const void *buf, size_t n, off_t off)
{
    size_t done = 0;
    while (done < n) {
        if (fault_hit(SYS_IO_PWRITE)) return -1;
        ssize_t r = g_ops->pwrite(fd, (const char *)buf + done, n - done, off + (off_t)done);
        if (r < 0) { if (errno == EINTR) continue; return -1; }
        if (r == 0) { errno = EIO; return -1; }
        done += (size_t)r;
    }
    return (ssize_t)done;
}

int sys_io_fsync(int fd) { return fault_hit(SYS_IO_FSYNC) ? -1 : g_ops->fsync(fd); }
int sys_io_rename(const char *from, const char *to) { return fault_hit(SYS_IO_RENAME) ? -1 : g_ops->rename(from, to); }
int sys_io_unlink(const char *path) { return fault_hit(SYS_IO_UNLINK) ? -1 : g_ops->unlink(path); }
int sys_io_ftruncate(int fd, off_t len) { return fault_hit(SYS_IO_FTRUNCATE) ? -1 : g_ops->ftruncate(fd, len); }

int sys_io_close(int fd)
{
    if (fault_hit(SYS_IO_CLOSE)) { close(fd); return -1; } /* never leak the descriptor */
    return g_ops->close(fd);
}

int sys_wfile_open(struct sys_wfile *w, const char *path, struct hs_err *err)
{
    memset(w, 0, sizeof *w);
    w->fd = -1;
    struct strbuf tmp;
    strbuf_init(&tmp);
    /* pid + a process-wide sequence: two threads writing the same path never share a temp */
    static _Atomic uint64_t seq;
    strbuf_printf(&tmp, "%s.tmp.%ld.%llu", path, (long)getpid(),
                  (unsigned long long)atomic_fetch_add(&seq, 1));
    w->fd = sys_io_open(tmp.buf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        int rc = hs_err_set(err, HS_ERR_IO, "%s: open failed: %s", path, strerror(errno));
        strbuf_free(&tmp);
        return rc;
    }
    w->path = hs_strdup(path);
    w->tmp = strbuf_detach(&tmp, NULL);
    return HS_OK;
}

static void wfile_fail(struct sys_wfile *w, const char *op)
{
    if (w->failed_op) return;
    w->failed_op = op;
    w->failed_errno = errno;
}

void sys_wfile_pwrite(struct sys_wfile *w, const void *buf, size_t n, uint64_t off)
{
    if (w->failed_op || !n) return;
    if (off > (uint64_t)INT64_MAX - n) { errno = EFBIG; wfile_fail(w, "write"); return; }
    if (sys_io_pwrite_full(w->fd, buf, n, (off_t)off) < 0) wfile_fail(w, "write");
}

void sys_wfile_zeros(struct sys_wfile *w, uint64_t n, uint64_t off)
{
    static const uint8_t zeros[4096];
    while (n && !w->failed_op) {
        size_t k = n < sizeof zeros ? (size_t)n : sizeof zeros;
        sys_wfile_pwrite(w, zeros, k, off);
        n -= k;
        off += k;
    }
}

static void wfile_release(struct sys_wfile *w)
{
    hs_free(w->path);
    hs_free(w->tmp);
    w->path = w->tmp = NULL;
}

void sys_wfile_abort(struct sys_wfile *w)
{
    if (w->fd >= 0) sys_io_close(w->fd);
    w->fd = -1;
    if (w->tmp) unlink(w->tmp); /* directly: the seam may be what is failing */
    wfile_release(w);
}

int sys_wfile_commit(struct sys_wfile *w, struct hs_err *err)
{
    if (!w->failed_op && sys_io_fsync(w->fd) != 0) wfile_fail(w, "fsync");
    if (!w->failed_op) {
        int fd = w->fd;
        w->fd = -1; /* closed either way */
        if (sys_io_close(fd) != 0) wfile_fail(w, "close");
    }
    if (!w->failed_op && sys_io_rename(w->tmp, w->path) != 0) wfile_fail(w, "rename");
    if (w->failed_op) {
        int rc = hs_err_set(err, HS_ERR_IO, "%s: %s failed: %s", w->path, w->failed_op,
                            strerror(w->failed_errno));
        sys_wfile_abort(w);
        return rc;
    }
    /* make the rename durable: fsync the directory (best effort: some filesystems refuse) */
    char *dcopy = hs_strdup(w->path);
    int dfd = open(dirname(dcopy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) { (void)fsync(dfd); close(dfd); }
    hs_free(dcopy);
    wfile_release(w);
    return HS_OK;
}

int sys_file_write_atomic(const char *path, const void *data, size_t len, struct hs_err *err)
{
    struct sys_wfile w;
    int rc = sys_wfile_open(&w, path, err);
    if (rc != HS_OK) return rc;
    sys_wfile_pwrite(&w, data, len, 0);
    return sys_wfile_commit(&w, err);
}
