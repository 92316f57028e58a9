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

int sys_file_write_atomic(const char *path, const void *data, size_t len, struct hs_err *err)
{
    struct strbuf tmp;
    strbuf_init(&tmp);
    /* pid + a process-wide sequence: two threads writing the same path never share a temp */
    static _Atomic uint64_t seq;
    strbuf_printf(&tmp, "%s.tmp.%ld.%llu", path, (long)getpid(),
                  (unsigned long long)atomic_fetch_add(&seq, 1));
    const char *what = "open";
    int fd = sys_io_open(tmp.buf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) goto fail_noclose;
    what = "write";
    if (sys_io_pwrite_full(fd, data, len, 0) < 0) goto fail;
    what = "fsync";
    if (sys_io_fsync(fd) != 0) goto fail;
    what = "close";
    if (sys_io_close(fd) != 0) { fd = -1; goto fail; }
    fd = -1;
    what = "rename";
    if (sys_io_rename(tmp.buf, path) != 0) goto fail;
    /* make the rename durable: fsync the directory (best effort: some filesystems refuse) */
    char *dcopy = hs_strdup(path);
    int dfd = open(dirname(dcopy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) { (void)fsync(dfd); close(dfd); }
    hs_free(dcopy);
    strbuf_free(&tmp);
    return HS_OK;
fail:;
    int e = errno;
    if (fd >= 0) sys_io_close(fd);
    unlink(tmp.buf); /* clean up directly: the seam may be the thing failing */
    errno = e;
fail_noclose:;
    int rc = hs_err_set(err, HS_ERR_IO, "%s: %s failed: %s", path, what, strerror(errno));
    strbuf_free(&tmp);
    return rc;
}
