/* test_file.c — file mappings, whole-file reads, path helpers, mkdir -p. */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
    strcpy(g_dir, "/tmp/hs_file_test_XXXXXX");
    cr_assert_not_null(mkdtemp(g_dir));
    sys_io_fault_clear_all();
}

static void teardown(void)
{
    sys_io_fault_clear_all();
    nftw(g_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* Write `len` bytes to dir/name directly (not through the code under test). */
static char *put_file(const char *name, const void *data, size_t len)
{
    char *path = sys_path_join(g_dir, name);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(data, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
    return path;
}

TestSuite(sys_file, .init = setup, .fini = teardown);

Test(sys_file, map_whole_file)
{
    unsigned char data[10000];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (unsigned char)(i * 7 + 3);
    char *path = put_file("a.bin", data, sizeof data);
    struct sys_map m;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(sys_file_map(path, &m, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(m.len, sizeof data);
    cr_assert_eq(memcmp(m.data, data, sizeof data), 0);
    cr_assert_str_eq(m.path, path);
    cr_assert_neq(m.path, path, "the map owns a copy");
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(m.ino, (uint64_t)st.st_ino);
    cr_assert_eq(m.dev, (uint64_t)st.st_dev);
    cr_assert_eq(m.mtime_ns, (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec);
    sys_file_unmap(&m);
    cr_assert_null(m.data);
    cr_assert_null(m.path);
    cr_assert_eq(m.len, 0);
    sys_file_unmap(&m); /* twice is fine */
    sys_file_unmap(NULL);
    hs_free(path);
}

Test(sys_file, map_empty_file)
{
    char *path = put_file("empty", "", 0);
    struct sys_map m;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(sys_file_map(path, &m, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(m.len, 0);
    cr_assert_null(m.data);
    cr_assert_str_eq(m.path, path);
    sys_file_unmap(&m);
    hs_free(path);
}

Test(sys_file, map_directory_is_an_error)
{
    struct sys_map m;
    struct hs_err err;
    hs_err_clear(&err);
    int rc = sys_file_map(g_dir, &m, &err);
    cr_assert_eq(rc, HS_ERR_IO);
    cr_assert_eq(err.code, HS_ERR_IO);
    cr_assert_not_null(strstr(err.msg, g_dir), "message names the path: %s", err.msg);
    cr_assert_not_null(strstr(err.msg, "not a regular file"), "%s", err.msg);
    cr_assert_null(m.data);
    cr_assert_null(m.path);
    sys_file_unmap(&m);
}

Test(sys_file, map_missing_file_names_path)
{
    char *path = sys_path_join(g_dir, "no-such-file.gguf");
    struct sys_map m;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_neq(sys_file_map(path, &m, &err), HS_OK);
    cr_assert_not_null(strstr(err.msg, path), "message names the path: %s", err.msg);
    cr_assert_not_null(strstr(err.msg, strerror(ENOENT)), "%s", err.msg);
    cr_assert_null(m.path);
    cr_assert_eq(sys_file_map(path, &m, NULL), HS_ERR_IO, "a NULL error is allowed");
    hs_free(path);
}

Test(sys_file, map_open_fault)
{
    char *path = put_file("f", "xyz", 3);
    struct sys_map m;
    struct hs_err err;
    hs_err_clear(&err);
    sys_io_fault_set(SYS_IO_OPEN, 1, EMFILE, false);
    cr_assert_eq(sys_file_map(path, &m, &err), HS_ERR_IO);
    cr_assert_not_null(strstr(err.msg, strerror(EMFILE)), "%s", err.msg);
    cr_assert_eq(sys_file_map(path, &m, NULL), HS_OK, "the fault was transient");
    cr_assert_eq(memcmp(m.data, "xyz", 3), 0);
    sys_file_unmap(&m);
    hs_free(path);
}

Test(sys_file, read_all_and_limit)
{
    const char text[] = "hello\0world";
    char *path = put_file("t.txt", text, sizeof text - 1);
    char *data = NULL;
    size_t len = 0;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(sys_file_read_all(path, 11, &data, &len, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(len, 11, "a limit equal to the size is allowed");
    cr_assert_eq(memcmp(data, text, 11), 0);
    cr_assert_eq(data[11], '\0', "NUL-terminated");
    hs_free(data);

    cr_assert_eq(sys_file_read_all(path, 10, &data, &len, &err), HS_ERR_LIMIT);
    cr_assert_null(data);
    cr_assert_eq(len, 0);
    cr_assert_not_null(strstr(err.msg, path), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, "11"), "%s", err.msg);

    cr_assert_eq(sys_file_read_all(path, 100, &data, NULL, NULL), HS_OK, "len_out may be NULL");
    cr_assert_eq(memcmp(data, text, 11), 0);
    hs_free(data);
    hs_free(path);
}

Test(sys_file, read_all_empty_missing_directory)
{
    char *path = put_file("e", "", 0);
    char *data = NULL;
    size_t len = 7;
    cr_assert_eq(sys_file_read_all(path, 0, &data, &len, NULL), HS_OK);
    cr_assert_eq(len, 0);
    cr_assert_str_empty(data);
    hs_free(data);
    hs_free(path);

    struct hs_err err;
    hs_err_clear(&err);
    path = sys_path_join(g_dir, "missing.json");
    cr_assert_eq(sys_file_read_all(path, 100, &data, &len, &err), HS_ERR_NOT_FOUND);
    cr_assert_null(data);
    cr_assert_not_null(strstr(err.msg, path), "%s", err.msg);
    hs_free(path);

    hs_err_clear(&err);
    cr_assert_eq(sys_file_read_all(g_dir, 100, &data, &len, &err), HS_ERR_IO);
    cr_assert_not_null(strstr(err.msg, g_dir), "%s", err.msg);
}

Test(sys_file, read_all_pread_fault)
{
    char *path = put_file("p", "abcdef", 6);
    char *data = (char *)"sentinel";
    struct hs_err err;
    hs_err_clear(&err);
    sys_io_fault_set(SYS_IO_PREAD, 1, EIO, false);
    cr_assert_eq(sys_file_read_all(path, 100, &data, NULL, &err), HS_ERR_IO);
    cr_assert_null(data);
    cr_assert_not_null(strstr(err.msg, path), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, strerror(EIO)), "%s", err.msg);
    hs_free(path);
}

Test(sys_file, path_predicates)
{
    char *path = put_file("x", "1", 1);
    cr_assert(sys_path_exists(path));
    cr_assert_not(sys_path_is_dir(path));
    cr_assert(sys_path_exists(g_dir));
    cr_assert(sys_path_is_dir(g_dir));
    char *missing = sys_path_join(g_dir, "nope");
    cr_assert_not(sys_path_exists(missing));
    cr_assert_not(sys_path_is_dir(missing));
    hs_free(missing);
    hs_free(path);
}

Test(sys_file, path_join)
{
    static const struct { const char *dir, *name, *want; } cases[] = {
        { "a", "b", "a/b" }, { "a/", "b", "a/b" }, { "a///", "b", "a/b" }, { "/", "b", "/b" },
        { "", "b", "b" }, { "/x/y", "z.json", "/x/y/z.json" }, { "a", "", "a/" },
        { "a", "b/c", "a/b/c" },
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(cases); i++) {
        char *j = sys_path_join(cases[i].dir, cases[i].name);
        cr_assert_str_eq(j, cases[i].want, "join('%s', '%s')", cases[i].dir, cases[i].name);
        hs_free(j);
    }
}

Test(sys_file, mkdir_p)
{
    char *deep = sys_path_join(g_dir, "a/b/c/d");
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(sys_mkdir_p(deep, &err), HS_OK, "%s", err.msg);
    cr_assert(sys_path_is_dir(deep));
    cr_assert_eq(sys_mkdir_p(deep, &err), HS_OK, "existing is fine");
    char *slash = sys_path_join(g_dir, "s/t/");
    cr_assert_eq(sys_mkdir_p(slash, &err), HS_OK, "%s", err.msg);
    cr_assert(sys_path_is_dir(slash));

    /* a file in the way: as the last component and in the middle */
    char *file = put_file("plain", "x", 1);
    cr_assert_eq(sys_mkdir_p(file, &err), HS_ERR_IO);
    cr_assert_not_null(strstr(err.msg, file), "%s", err.msg);
    hs_err_clear(&err);
    char *under = sys_path_join(file, "sub/dir");
    cr_assert_eq(sys_mkdir_p(under, &err), HS_ERR_IO);
    cr_assert_not_null(strstr(err.msg, file), "names the component that failed: %s", err.msg);
    hs_err_clear(&err);
    cr_assert_eq(sys_mkdir_p("", &err), HS_ERR_INVALID);
    hs_free(under);
    hs_free(file);
    hs_free(slash);
    hs_free(deep);
}

/* Resident kB of the mapping that starts at p, from /proc/self/smaps (-1: not found). */
static long smaps_rss_kb(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    cr_assert_not_null(f);
    char line[512];
    bool in = false;
    long kb = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long a, b;
        if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            in = a == (unsigned long)(uintptr_t)p;
            continue;
        }
        if (in && sscanf(line, "Rss: %ld kB", &kb) == 1) break;
    }
    fclose(f);
    return kb;
}

Test(sys_file, warm_maps_pages_in_and_cold_drops_them)
{
    enum { SIZE = 1 << 20 };
    long pg = sysconf(_SC_PAGESIZE);
    unsigned char *data = malloc(SIZE);
    for (size_t i = 0; i < SIZE; i++) data[i] = (unsigned char)(i * 13 + 1);
    char *path = put_file("w.bin", data, SIZE);
    struct sys_map m;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(sys_file_map(path, &m, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(smaps_rss_kb(m.data), 0, "nothing is mapped in before the first read");
    if (madvise((void *)m.data, (size_t)pg, 22 /* MADV_POPULATE_READ */) != 0) {
        sys_file_unmap(&m);
        hs_free(path);
        free(data);
        cr_skip_test("this kernel has no MADV_POPULATE_READ (Linux < 5.14)");
    }
    sys_mem_warm(m.data + 100, SIZE - 200); /* grown to whole pages: all of them */
    cr_assert_eq(smaps_rss_kb(m.data), SIZE / 1024, "warm maps every page in");
    sys_mem_cold(m.data, SIZE / 2);
    cr_assert_eq(smaps_rss_kb(m.data), SIZE / 2 / 1024, "cold drops the half it was given");
    cr_assert_eq(memcmp(m.data, data, SIZE), 0, "the bytes are the file's, before and after");
    sys_file_unmap(&m);
    hs_free(path);
    free(data);
}
