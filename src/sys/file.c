/*
 * file.c — read-only file mappings (with the SIGBUS guard), whole-file reads and path
 * helpers.
 *
 * The SIGBUS guard (sys.h). A model is mapped MAP_PRIVATE and read by every thread of the
 * forward pass; when someone truncates the file under us (`cp` over it truncates first),
 * the pages past the new end raise SIGBUS on whichever thread touches them. Jumping out
 * of the fault (siglongjmp) would have to happen on that thread, possibly a pool worker in
 * the middle of a slice, leaving the pool's barrier and the engine half-way; instead the
 * handler makes the load succeed: it maps anonymous zero pages over the whole faulting
 * mapping (one mmap MAP_FIXED: atomic for the other threads, which read either the old
 * pages or zeros, never a hole), sets the mapping's sticky fault mark and returns, and the
 * faulting instruction re-executes and reads 0. The work runs to its end on zeros and the
 * caller, which checks the mark after the work (engine_forward does), throws the result
 * away and reports an error. Zero pages cost no memory (the kernel's shared zero page).
 *
 * Handler safety: it reads the registry (a fixed array of slots published with atomics,
 * never reallocated), calls mmap (a system call; glibc takes no lock for it) and stores
 * atomics: nothing that can deadlock in a signal handler. A fault outside every
 * registered range (a real bug) is handed to the handler installed before ours, or the
 * default action is restored and the faulting load re-executed, so it kills the process
 * as before.
 *
 * Registry slot lifecycle: free (base 0) -> claimed (CAS of `state`) -> published (len,
 * then base with release) -> cleared at unmap (base 0 first, then munmap) -> free.
 */
#include "sys/sys.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GUARD_SLOTS 256 /* mappings guarded at once (model shards); more are mapped unguarded */

struct guard_slot {
    atomic_int state;          /* 0 free, 1 claimed */
    _Atomic uintptr_t base;    /* 0 while unpublished */
    _Atomic size_t len;
    atomic_bool faulted;
};

static struct guard_slot g_slots[GUARD_SLOTS];
static atomic_uint_fast64_t g_faults;
static struct sigaction g_prev_bus;
static pthread_once_t g_guard_once = PTHREAD_ONCE_INIT;

static struct guard_slot *guard_find(uintptr_t a)
{
    for (int i = 0; i < GUARD_SLOTS; i++) {
        uintptr_t b = atomic_load_explicit(&g_slots[i].base, memory_order_acquire);
        if (b && a >= b && a - b < atomic_load_explicit(&g_slots[i].len, memory_order_relaxed)) return &g_slots[i];
    }
    return NULL;
}

static void guard_handler(int sig, siginfo_t *si, void *uc)
{
    struct guard_slot *g = si ? guard_find((uintptr_t)si->si_addr) : NULL;
    if (g) {
        uintptr_t b = atomic_load_explicit(&g->base, memory_order_acquire);
        size_t n = atomic_load_explicit(&g->len, memory_order_relaxed);
        if (mmap((void *)b, n, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
            atomic_store(&g->faulted, true);
            atomic_fetch_add(&g_faults, 1);
            return; /* the load re-executes on zero pages */
        }
    }
    /* not ours (or the remap failed): what would have happened without us */
    if (g_prev_bus.sa_flags & SA_SIGINFO) {
        if (g_prev_bus.sa_sigaction) { g_prev_bus.sa_sigaction(sig, si, uc); return; }
    } else if (g_prev_bus.sa_handler != SIG_DFL && g_prev_bus.sa_handler != SIG_IGN && g_prev_bus.sa_handler) {
        g_prev_bus.sa_handler(sig);
        return;
    }
    signal(SIGBUS, SIG_DFL); /* the load re-executes and the default action ends the process */
}

static void guard_install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = guard_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &g_prev_bus);
}

static void guard_add(const void *base, size_t len)
{
    if (!base || !len) return;
    pthread_once(&g_guard_once, guard_install);
    for (int i = 0; i < GUARD_SLOTS; i++) {
        int want = 0;
        if (!atomic_compare_exchange_strong(&g_slots[i].state, &want, 1)) continue;
        atomic_store(&g_slots[i].faulted, false);
        atomic_store_explicit(&g_slots[i].len, len, memory_order_relaxed);
        atomic_store_explicit(&g_slots[i].base, (uintptr_t)base, memory_order_release);
        return;
    }
    hs_log_write(HS_LOG_WARN, "sys: more than %d mappings: a truncated file will end the process", GUARD_SLOTS);
}

static struct guard_slot *guard_of(const void *base)
{
    if (!base) return NULL;
    for (int i = 0; i < GUARD_SLOTS; i++)
        if (atomic_load_explicit(&g_slots[i].base, memory_order_acquire) == (uintptr_t)base) return &g_slots[i];
    return NULL;
}

static void guard_remove(const void *base)
{
    struct guard_slot *g = guard_of(base);
    if (!g) return;
    atomic_store_explicit(&g->base, 0, memory_order_release);
    atomic_store(&g->state, 0);
}

bool sys_file_map_faulted(const struct sys_map *m)
{
    const struct guard_slot *g = m ? guard_of(m->data) : NULL;
    return g && atomic_load(&g->faulted);
}

uint64_t sys_file_map_faults(void) { return (uint64_t)atomic_load(&g_faults); }

void sys_file_stat_from(const struct stat *st, struct sys_file_stat *o)
{
    o->dev = (uint64_t)st->st_dev;
    o->ino = (uint64_t)st->st_ino;
    o->size = (uint64_t)st->st_size;
    o->mtime_ns = (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
    o->ctime_ns = (int64_t)st->st_ctim.tv_sec * 1000000000 + st->st_ctim.tv_nsec;
    o->nlink = (uint64_t)st->st_nlink;
}

bool sys_file_stat_changed(const struct sys_file_stat *then, const struct sys_file_stat *now)
{
    if (then->dev != now->dev || then->ino != now->ino) return true;
    if (then->size != now->size || then->mtime_ns != now->mtime_ns) return true;
    return then->ctime_ns != now->ctime_ns && then->nlink == now->nlink;
}

int sys_file_map_stat(const struct sys_map *m, struct sys_file_stat *out)
{
    struct stat st;
    if (!m || !m->path) { errno = EBADF; return -1; }
    if (fstat(m->fd, &st) != 0) return -1;
    sys_file_stat_from(&st, out);
    return 0;
}

bool sys_file_map_changed(const struct sys_map *m)
{
    struct sys_file_stat now;
    if (sys_file_map_stat(m, &now) != 0) return true;
    return sys_file_stat_changed(&m->st, &now);
}

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
        guard_add(p, (size_t)st.st_size);
    }
    m->fd = fd; /* kept: fstat and reads of the mapped inode (sys.h) */
    m->len = (uint64_t)st.st_size;
    m->path = hs_strdup(path);
    sys_file_stat_from(&st, &m->st);
    m->dev = m->st.dev;
    m->ino = m->st.ino;
    m->mtime_ns = m->st.mtime_ns;
    return HS_OK;
}

void sys_file_unmap(struct sys_map *m)
{
    if (!m) return;
    if (m->data && m->len) {
        guard_remove(m->data);
        munmap((void *)m->data, (size_t)m->len);
    }
    if (m->path) sys_io_close(m->fd);
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
