/* test_io.c — the disk I/O seam: fault injection, call counters, the ops table, and
 * atomic whole-file writes that leave the destination untouched on any failure. */
#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sys/sys.h"

static char g_dir[64];

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st; (void)flag; (void)ftw;
    return remove(path);
}

static void setup(void)
{
    strcpy(g_dir, "/tmp/hs_io_test_XXXXXX");
    cr_assert_not_null(mkdtemp(g_dir));
    sys_io_fault_clear_all();
    sys_io_set_ops(NULL);
}

static void teardown(void)
{
    sys_io_fault_clear_all();
    sys_io_set_ops(NULL);
    nftw(g_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

TestSuite(sys_io, .init = setup, .fini = teardown);

static int n_dir_entries(void)
{
    DIR *d = opendir(g_dir);
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static char *slurp(const char *path, size_t *len)
{
    char *data = NULL;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(sys_file_read_all(path, 1 << 20, &data, len, &err), HS_OK, "%s", err.msg);
    return data;
}

static int open_tmp(const char *name)
{
    char *p = sys_path_join(g_dir, name);
    int fd = open(p, O_RDWR | O_CREAT | O_TRUNC, 0644);
    cr_assert_geq(fd, 0);
    hs_free(p);
    return fd;
}

Test(sys_io, op_names)
{
    static const char *const want[SYS_IO_OP_COUNT] = {
        "open", "pread", "pwrite", "fsync", "rename", "unlink", "ftruncate", "close",
    };
    for (int op = 0; op < SYS_IO_OP_COUNT; op++) cr_assert_str_eq(sys_io_op_name(op), want[op]);
    cr_assert_str_eq(sys_io_op_name(SYS_IO_OP_COUNT), "?");
    cr_assert_str_eq(sys_io_op_name((enum sys_io_op)-1), "?");
}

Test(sys_io, transient_fault_fails_only_the_nth_call)
{
    int fd = open_tmp("f");
    char b = 'x';
    sys_io_fault_set(SYS_IO_PWRITE, 3, ENOSPC, false);
    for (int i = 1; i <= 6; i++) {
        errno = 0;
        ssize_t r = sys_io_pwrite_full(fd, &b, 1, i);
        if (i == 3) {
            cr_assert_eq(r, -1, "call %d", i);
            cr_assert_eq(errno, ENOSPC);
        } else {
            cr_assert_eq(r, 1, "call %d", i);
        }
    }
    cr_assert_eq(sys_io_calls(SYS_IO_PWRITE), 6, "failed calls are counted too");
    cr_assert_eq(sys_io_calls(SYS_IO_PREAD), 0);
    close(fd);
}

Test(sys_io, persistent_fault_fails_from_nth_on)
{
    int fd = open_tmp("f");
    sys_io_fault_set(SYS_IO_FSYNC, 2, EIO, true);
    cr_assert_eq(sys_io_fsync(fd), 0);
    for (int i = 0; i < 5; i++) {
        errno = 0;
        cr_assert_eq(sys_io_fsync(fd), -1);
        cr_assert_eq(errno, EIO);
    }
    sys_io_fault_set(SYS_IO_FSYNC, 0, 0, false); /* nth == 0 disarms */
    cr_assert_eq(sys_io_fsync(fd), 0);
    cr_assert_eq(sys_io_calls(SYS_IO_FSYNC), 7);
    close(fd);
}

Test(sys_io, nth_counts_from_arming)
{
    int fd = open_tmp("f");
    for (int i = 0; i < 4; i++) cr_assert_eq(sys_io_fsync(fd), 0);
    sys_io_fault_set(SYS_IO_FSYNC, 1, EROFS, false); /* the very next call */
    cr_assert_eq(sys_io_fsync(fd), -1);
    cr_assert_eq(errno, EROFS);
    cr_assert_eq(sys_io_fsync(fd), 0);
    sys_io_fault_set(SYS_IO_FSYNC, 2, EIO, false); /* re-arming restarts the count */
    cr_assert_eq(sys_io_fsync(fd), 0);
    cr_assert_eq(sys_io_fsync(fd), -1);
    cr_assert_eq(sys_io_fsync(fd), 0);
    cr_assert_eq(sys_io_calls(SYS_IO_FSYNC), 9);
    /* faults are per operation */
    sys_io_fault_set(SYS_IO_FTRUNCATE, 1, EPERM, false);
    cr_assert_eq(sys_io_fsync(fd), 0);
    cr_assert_eq(sys_io_ftruncate(fd, 0), -1);
    cr_assert_eq(errno, EPERM);
    cr_assert_eq(sys_io_ftruncate(fd, 0), 0);
    close(fd);
}

Test(sys_io, clear_all_disarms_and_zeroes)
{
    int fd = open_tmp("f");
    sys_io_fault_set(SYS_IO_FSYNC, 2, EIO, true);
    sys_io_fault_set(SYS_IO_UNLINK, 1, EIO, true);
    cr_assert_eq(sys_io_fsync(fd), 0);
    sys_io_fault_clear_all();
    for (int op = 0; op < SYS_IO_OP_COUNT; op++) cr_assert_eq(sys_io_calls(op), 0);
    for (int i = 0; i < 3; i++) cr_assert_eq(sys_io_fsync(fd), 0);
    char *p = sys_path_join(g_dir, "f");
    cr_assert_eq(sys_io_unlink(p), 0);
    cr_assert_not(sys_path_exists(p));
    cr_assert_eq(sys_io_calls(SYS_IO_FSYNC), 3);
    cr_assert_eq(sys_io_calls(SYS_IO_UNLINK), 1);
    hs_free(p);
    close(fd);
}

Test(sys_io, failed_close_still_releases_the_descriptor)
{
    int fd = open_tmp("f");
    sys_io_fault_set(SYS_IO_CLOSE, 1, EIO, false);
    cr_assert_eq(sys_io_close(fd), -1);
    cr_assert_eq(errno, EIO);
    errno = 0;
    cr_assert_eq(fcntl(fd, F_GETFD), -1, "fd %d still open", fd);
    cr_assert_eq(errno, EBADF);
}

Test(sys_io, rename_and_open_faults)
{
    char *a = sys_path_join(g_dir, "a"), *b = sys_path_join(g_dir, "b");
    sys_io_fault_set(SYS_IO_OPEN, 1, EACCES, false);
    cr_assert_eq(sys_io_open(a, O_WRONLY | O_CREAT, 0644), -1);
    cr_assert_eq(errno, EACCES);
    cr_assert_not(sys_path_exists(a), "a failed open creates nothing");
    int fd = sys_io_open(a, O_WRONLY | O_CREAT, 0644);
    cr_assert_geq(fd, 0);
    cr_assert_eq(sys_io_close(fd), 0);
    sys_io_fault_set(SYS_IO_RENAME, 1, EXDEV, false);
    cr_assert_eq(sys_io_rename(a, b), -1);
    cr_assert_eq(errno, EXDEV);
    cr_assert(sys_path_exists(a));
    cr_assert_eq(sys_io_rename(a, b), 0);
    cr_assert(sys_path_exists(b));
    cr_assert_not(sys_path_exists(a));
    hs_free(a);
    hs_free(b);
}

Test(sys_io, pread_full_stops_at_eof)
{
    int fd = open_tmp("f");
    cr_assert_eq(write(fd, "0123456789", 10), 10);
    char buf[32];
    cr_assert_eq(sys_io_pread_full(fd, buf, 4, 3), 4);
    cr_assert_eq(memcmp(buf, "3456", 4), 0);
    cr_assert_eq(sys_io_pread_full(fd, buf, 32, 6), 4, "short count at end of file");
    cr_assert_eq(memcmp(buf, "6789", 4), 0);
    cr_assert_eq(sys_io_pread_full(fd, buf, 0, 0), 0);
    close(fd);
}

/* ---- a custom ops table: one byte at a time, one EINTR, and counters --------------- */

static int g_custom_calls[SYS_IO_OP_COUNT];
static bool g_eintr_once;

static int c_open(const char *path, int flags, mode_t mode) { g_custom_calls[SYS_IO_OPEN]++; return open(path, flags, mode); }
static ssize_t c_pread(int fd, void *buf, size_t n, off_t off)
{
    g_custom_calls[SYS_IO_PREAD]++;
    return pread(fd, buf, n ? 1 : 0, off);
}
static ssize_t c_pwrite(int fd, const void *buf, size_t n, off_t off)
{
    g_custom_calls[SYS_IO_PWRITE]++;
    if (g_eintr_once) { g_eintr_once = false; errno = EINTR; return -1; }
    return pwrite(fd, buf, n ? 1 : 0, off);
}
static int c_fsync(int fd) { g_custom_calls[SYS_IO_FSYNC]++; return fsync(fd); }
static int c_rename(const char *a, const char *b) { g_custom_calls[SYS_IO_RENAME]++; return rename(a, b); }
static int c_unlink(const char *p) { g_custom_calls[SYS_IO_UNLINK]++; return unlink(p); }
static int c_ftruncate(int fd, off_t len) { g_custom_calls[SYS_IO_FTRUNCATE]++; return ftruncate(fd, len); }
static int c_close(int fd) { g_custom_calls[SYS_IO_CLOSE]++; return close(fd); }

static const struct sys_io_ops custom_ops = {
    .open = c_open, .pread = c_pread, .pwrite = c_pwrite, .fsync = c_fsync, .rename = c_rename,
    .unlink = c_unlink, .ftruncate = c_ftruncate, .close = c_close,
};

Test(sys_io, custom_ops_table_is_used)
{
    sys_io_set_ops(&custom_ops);
    g_eintr_once = true;
    char *path = sys_path_join(g_dir, "out.bin");
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(sys_file_write_atomic(path, "abcdefgh", 8, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(g_custom_calls[SYS_IO_OPEN], 1);
    cr_assert_eq(g_custom_calls[SYS_IO_PWRITE], 9, "one EINTR retried, then one byte per call");
    cr_assert_eq(g_custom_calls[SYS_IO_FSYNC], 1);
    cr_assert_eq(g_custom_calls[SYS_IO_CLOSE], 1);
    cr_assert_eq(g_custom_calls[SYS_IO_RENAME], 1);
    cr_assert_eq(sys_io_calls(SYS_IO_PWRITE), 9, "the seam counts each attempt");

    size_t len;
    char *data = slurp(path, &len);
    cr_assert_eq(len, 8);
    cr_assert_str_eq(data, "abcdefgh");
    cr_assert_eq(g_custom_calls[SYS_IO_PREAD], 8, "reads also go one byte at a time");
    hs_free(data);

    int fd = sys_io_open(path, O_RDWR, 0);
    cr_assert_eq(sys_io_ftruncate(fd, 3), 0);
    cr_assert_eq(sys_io_close(fd), 0);
    cr_assert_eq(sys_io_unlink(path), 0);
    cr_assert_eq(g_custom_calls[SYS_IO_FTRUNCATE], 1);
    cr_assert_eq(g_custom_calls[SYS_IO_UNLINK], 1);

    sys_io_set_ops(NULL); /* back to the real table: the counters stand still */
    int before = g_custom_calls[SYS_IO_OPEN];
    cr_assert_eq(sys_file_write_atomic(path, "z", 1, &err), HS_OK);
    cr_assert_eq(g_custom_calls[SYS_IO_OPEN], before);
    hs_free(path);
}

static ssize_t full_disk_pwrite(int fd, const void *buf, size_t n, off_t off)
{
    errno = ENOSPC;
    return -1;
}

Test(sys_io, custom_op_failure_reaches_the_caller)
{
    struct sys_io_ops ops = custom_ops;
    ops.pwrite = full_disk_pwrite;
    sys_io_set_ops(&ops);
    char *path = sys_path_join(g_dir, "full");
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(sys_file_write_atomic(path, "abc", 3, &err), HS_ERR_IO);
    cr_assert_not_null(strstr(err.msg, strerror(ENOSPC)), "%s", err.msg);
    cr_assert_eq(n_dir_entries(), 0, "no temp file left");
    hs_free(path);
}

/* ---- atomic writes ------------------------------------------------------------------ */

Test(sys_io, write_atomic_creates_and_replaces)
{
    char *path = sys_path_join(g_dir, "blob");
    struct hs_err err;
    hs_err_clear(&err);
    unsigned char big[100000];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (unsigned char)(i ^ i >> 8);
    cr_assert_eq(sys_file_write_atomic(path, big, sizeof big, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(sys_io_calls(SYS_IO_OPEN), 1);
    cr_assert_eq(sys_io_calls(SYS_IO_FSYNC), 1);
    cr_assert_eq(sys_io_calls(SYS_IO_CLOSE), 1);
    cr_assert_eq(sys_io_calls(SYS_IO_RENAME), 1);
    size_t len;
    char *data = slurp(path, &len);
    cr_assert_eq(len, sizeof big);
    cr_assert_eq(memcmp(data, big, len), 0);
    hs_free(data);

    cr_assert_eq(sys_file_write_atomic(path, "short", 5, &err), HS_OK, "%s", err.msg);
    data = slurp(path, &len);
    cr_assert_eq(len, 5, "replaced, not overwritten in place");
    cr_assert_str_eq(data, "short");
    hs_free(data);

    cr_assert_eq(sys_file_write_atomic(path, NULL, 0, &err), HS_OK, "%s", err.msg);
    data = slurp(path, &len);
    cr_assert_eq(len, 0);
    hs_free(data);
    cr_assert_eq(n_dir_entries(), 1, "only the destination");
    hs_free(path);
}

static const struct { enum sys_io_op op; const char *word; } g_write_steps[] = {
    { SYS_IO_OPEN, "open" }, { SYS_IO_PWRITE, "write" }, { SYS_IO_FSYNC, "fsync" },
    { SYS_IO_CLOSE, "close" }, { SYS_IO_RENAME, "rename" },
};

Test(sys_io, write_atomic_fault_at_each_step_keeps_old_content)
{
    char *path = sys_path_join(g_dir, "state.bin");
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(sys_file_write_atomic(path, "OLD CONTENT", 11, &err), HS_OK, "%s", err.msg);
    for (size_t s = 0; s < HS_ARRAY_LEN(g_write_steps); s++) {
        sys_io_fault_clear_all();
        sys_io_fault_set(g_write_steps[s].op, 1, EIO, false);
        hs_err_clear(&err);
        int rc = sys_file_write_atomic(path, "NEW", 3, &err);
        cr_assert_eq(rc, HS_ERR_IO, "fault at %s", g_write_steps[s].word);
        cr_assert_eq(sys_io_calls(g_write_steps[s].op), 1, "the step ran once");
        cr_assert_not_null(strstr(err.msg, path), "names the path: %s", err.msg);
        cr_assert_not_null(strstr(err.msg, g_write_steps[s].word), "names the step: %s", err.msg);
        cr_assert_not_null(strstr(err.msg, strerror(EIO)), "%s", err.msg);
        size_t len;
        char *data = slurp(path, &len);
        cr_assert_eq(len, 11, "fault at %s changed the file", g_write_steps[s].word);
        cr_assert_str_eq(data, "OLD CONTENT");
        hs_free(data);
        cr_assert_eq(n_dir_entries(), 1, "fault at %s left a temp file", g_write_steps[s].word);
        /* the next write, with the fault spent, succeeds */
        cr_assert_eq(sys_file_write_atomic(path, "OLD CONTENT", 11, &err), HS_OK);
    }
    hs_free(path);
}

Test(sys_io, write_atomic_fault_without_previous_file)
{
    char *path = sys_path_join(g_dir, "fresh.bin");
    for (size_t s = 0; s < HS_ARRAY_LEN(g_write_steps); s++) {
        sys_io_fault_set(g_write_steps[s].op, 1, ENOSPC, true);
        struct hs_err err;
        hs_err_clear(&err);
        cr_assert_eq(sys_file_write_atomic(path, "NEW", 3, &err), HS_ERR_IO);
        cr_assert_not(sys_path_exists(path), "fault at %s created the file", g_write_steps[s].word);
        cr_assert_eq(n_dir_entries(), 0, "fault at %s left a temp file", g_write_steps[s].word);
        sys_io_fault_clear_all();
    }
    hs_free(path);
}

Test(sys_io, write_atomic_into_missing_directory)
{
    char *path = sys_path_join(g_dir, "no/such/dir/x");
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(sys_file_write_atomic(path, "x", 1, &err), HS_ERR_IO);
    cr_assert_not_null(strstr(err.msg, path), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, "open"), "%s", err.msg);
    hs_free(path);
}
