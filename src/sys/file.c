/* file.c — read-only file mappings, whole-file reads and path helpers. */
#include "sys/sys.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int sys_file_map(const char *path, struct sys_map *m, struct hs_err *err)
{
    memset(m, 0, sizeof *m);
    int fd = sys_io_open(path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return hs_err_set(err, HS_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        sys_io_close(fd);
        return hs_err_set(err, HS_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        sys_io_close(fd);
        return hs_err_set(err, HS_ERR_IO, "%s: not a regular file", path);
    }
    if (st.st_size > 0) {
        void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            sys_io_close(fd);
            return hs_err_set(err, HS_ERR_IO, "%s: cannot map %lld bytes: %s", path,
                              (long long)st.st_size, strerror(e));
        }
        m->data = p;
    }
    sys_io_close(fd); /* the mapping keeps the file alive */
    m->len = (uint64_t)st.st_size;
    m->path = hs_strdup(path);
    m->dev = (uint64_t)st.st_dev;
    m->ino = (uint64_t)st.st_ino;
    m->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    return HS_OK;
}

void sys_file_unmap(struct sys_map *m)
{
    if (!m) return;
    if (m->data && m->len) munmap((void *)m->data, (size_t)m->len);
    hs_free(m->path);
    memset(m, 0, sizeof *m);
}

int sys_file_read_all(const char *path, uint64_t max_len, char **data_out, size_t *len_out,
                      struct hs_err *err)
{
    *data_out = NULL;
    if (len_out) *len_out = 0;
    int fd = sys_io_open(path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0) return hs_err_set(err, errno == ENOENT ? HS_ERR_NOT_FOUND : HS_ERR_IO,
                                  "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        sys_io_close(fd);
        return hs_err_set(err, HS_ERR_IO, "%s: not a readable regular file", path);
    }
    if ((uint64_t)st.st_size > max_len) {
        sys_io_close(fd);
        return hs_err_set(err, HS_ERR_LIMIT, "%s: %lld bytes is more than the %llu allowed", path,
                          (long long)st.st_size, (unsigned long long)max_len);
    }
    size_t n = (size_t)st.st_size;
    char *buf = hs_malloc(n + 1);
    ssize_t got = sys_io_pread_full(fd, buf, n, 0);
    int e = errno;
    sys_io_close(fd);
    if (got < 0 || (size_t)got != n) {
        hs_free(buf);
        return hs_err_set(err, HS_ERR_IO, "%s: read failed: %s", path, got < 0 ? strerror(e) : "file shrank");
    }
    buf[n] = '\0';
    *data_out = buf;
    if (len_out) *len_out = n;
    return HS_OK;
}

bool sys_path_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

bool sys_path_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

char *sys_path_join(const char *dir, const char *name)
{
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/') dl--;
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_append(&sb, dir, dl);
    if (dl && dir[dl - 1] != '/') strbuf_putc(&sb, '/');
    strbuf_puts(&sb, name);
    return strbuf_detach(&sb, NULL);
}

int sys_mkdir_p(const char *path, struct hs_err *err)
{
    if (!path || !*path) return hs_err_set(err, HS_ERR_INVALID, "mkdir: empty directory path");
    char *p = hs_strdup(path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            int e = errno;
            int rc = hs_err_set(err, HS_ERR_IO, "%s: cannot create directory: %s", p, strerror(e));
            hs_free(p);
            return rc;
        }
        *s = '/';
    }
    int rc = HS_OK;
    if (mkdir(p, 0755) != 0 && errno != EEXIST)
        rc = hs_err_set(err, HS_ERR_IO, "%s: cannot create directory: %s", p, strerror(errno));
    else if (!sys_path_is_dir(p))
        rc = hs_err_set(err, HS_ERR_IO, "%s: exists and is not a directory", p);
    hs_free(p);
    return rc;
}
