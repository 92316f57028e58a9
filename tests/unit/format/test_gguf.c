/* test_gguf.c — GGUF reader and writer: round trips of every value type, typed getters,
 * alignment, tensor types and shapes, and hostile files built byte by byte. */
#include <criterion/criterion.h>

#include "format/format.h"
#include "sys/sys.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- scratch directory -------------------------------------------------------------- */

static char g_dir[64];

static void dir_setup(void)
{
    strcpy(g_dir, "/tmp/hs_gguf_XXXXXX");
    cr_assert_not_null(mkdtemp(g_dir));
}

static void dir_teardown(void)
{
    DIR *d = opendir(g_dir);
    if (!d) return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", g_dir, e->d_name);
        unlink(p);
    }
    closedir(d);
    rmdir(g_dir);
}

static char *path_of(const char *name)
{
    static char p[4][256];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", g_dir, name);
    return p[k];
}

static void write_raw(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    if (len) cr_assert_eq(fwrite(data, 1, len, f), len);
    cr_assert_eq(fclose(f), 0);
}

static char *read_raw(const char *path, size_t *len)
{
    char *data;
    struct hs_err err = { 0 };
    cr_assert_eq(sys_file_read_all(path, 1 << 26, &data, len, &err), HS_OK, "%s", err.msg);
    return data;
}

/* ---- byte builder for hand-made files --------------------------------------------------- */

static void b_u8(struct strbuf *b, uint8_t v) { strbuf_append(b, &v, 1); }
static void b_u32(struct strbuf *b, uint32_t v)
{
    for (int i = 0; i < 4; i++) b_u8(b, (uint8_t)(v >> (8 * i)));
}
static void b_u64(struct strbuf *b, uint64_t v)
{
    for (int i = 0; i < 8; i++) b_u8(b, (uint8_t)(v >> (8 * i)));
}
static void b_str(struct strbuf *b, const char *s)
{
    b_u64(b, strlen(s));
    strbuf_append(b, s, strlen(s));
}
static void b_header(struct strbuf *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    strbuf_init(b);
    strbuf_append(b, "GGUF", 4);
    b_u32(b, version);
    b_u64(b, n_tensors);
    b_u64(b, n_kv);
}
static void b_kv_u32(struct strbuf *b, const char *key, uint32_t v)
{
    b_str(b, key);
    b_u32(b, GGUF_TYPE_UINT32);
    b_u32(b, v);
}
static void b_tensor(struct strbuf *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                     uint64_t offset)
{
    b_str(b, name);
    b_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++) b_u64(b, ne[i]);
    b_u32(b, type);
    b_u64(b, offset);
}
/* Pad to `align` then append `data_len` bytes of a counting pattern. */
static void b_data(struct strbuf *b, uint64_t align, uint64_t data_len)
{
    while (b->len % align) b_u8(b, 0);
    for (uint64_t i = 0; i < data_len; i++) b_u8(b, (uint8_t)i);
}

/* Write b to a file, open it, expect failure with `code` and `needle` in the message. */
static void expect_fail(struct strbuf *b, int code, const char *needle)
{
    const char *p = path_of("bad.gguf");
    write_raw(p, b->buf, b->len);
    strbuf_free(b);
    struct gguf_file *g = (struct gguf_file *)1;
    struct hs_err err = { 0 };
    int rc = gguf_open(p, &g, &err);
    cr_assert_eq(rc, code, "rc %d (want %d): %s", rc, code, err.msg);
    cr_assert_eq(err.code, code);
    cr_assert_null(g);
    cr_assert_not_null(strstr(err.msg, needle), "message '%s' lacks '%s'", err.msg, needle);
    cr_assert_not_null(strstr(err.msg, "bad.gguf"), "message '%s' does not name the file", err.msg);
}

static struct gguf_file *expect_open(struct strbuf *b)
{
    const char *p = path_of("ok.gguf");
    write_raw(p, b->buf, b->len);
    strbuf_free(b);
    struct gguf_file *g = NULL;
    struct hs_err err = { 0 };
    cr_assert_eq(gguf_open(p, &g, &err), HS_OK, "%s", err.msg);
    return g;
}

static struct gguf_file *write_and_open(struct gguf_writer *w, const char *name)
{
    struct hs_err err = { 0 };
    cr_assert_eq(gguf_writer_write(w, path_of(name), &err), HS_OK, "%s", err.msg);
    struct gguf_file *g = NULL;
    cr_assert_eq(gguf_open(path_of(name), &g, &err), HS_OK, "%s", err.msg);
    return g;
}

/* ---- value helpers --------------------------------------------------------------------- */

static struct gguf_value vu(enum gguf_type t, uint64_t u) { struct gguf_value v = { .type = t }; v.v.u = u; return v; }
static struct gguf_value vi(enum gguf_type t, int64_t i) { struct gguf_value v = { .type = t }; v.v.i = i; return v; }
static struct gguf_value vf(enum gguf_type t, double f) { struct gguf_value v = { .type = t }; v.v.f = f; return v; }
static struct gguf_value vb(bool b) { struct gguf_value v = { .type = GGUF_TYPE_BOOL }; v.v.b = b; return v; }
static struct gguf_value vs(const char *s)
{
    struct gguf_value v = { .type = GGUF_TYPE_STRING };
    v.v.str.ptr = s;
    v.v.str.len = strlen(s);
    return v;
}
static struct gguf_value va(enum gguf_type et, const struct gguf_value *items, uint64_t n)
{
    struct gguf_value v = { .type = GGUF_TYPE_ARRAY };
    v.v.arr.elem_type = et;
    v.v.arr.items = items;
    v.v.arr.n = n;
    return v;
}

/* Exact equality; FLOAT32 compares as the float the file holds. */
static bool value_eq(const struct gguf_value *a, const struct gguf_value *b)
{
    if (a->type != b->type) return false;
    switch (a->type) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_UINT32: case GGUF_TYPE_UINT64:
        return a->v.u == b->v.u;
    case GGUF_TYPE_INT8: case GGUF_TYPE_INT16: case GGUF_TYPE_INT32: case GGUF_TYPE_INT64:
        return a->v.i == b->v.i;
    case GGUF_TYPE_FLOAT32: {
        float x = (float)a->v.f, y = (float)b->v.f;
        return memcmp(&x, &y, 4) == 0;
    }
    case GGUF_TYPE_FLOAT64: return memcmp(&a->v.f, &b->v.f, 8) == 0;
    case GGUF_TYPE_BOOL: return a->v.b == b->v.b;
    case GGUF_TYPE_STRING:
        return a->v.str.len == b->v.str.len && (a->v.str.len == 0 || memcmp(a->v.str.ptr, b->v.str.ptr, a->v.str.len) == 0);
    case GGUF_TYPE_ARRAY:
        if (a->v.arr.elem_type != b->v.arr.elem_type || a->v.arr.n != b->v.arr.n) return false;
        for (uint64_t i = 0; i < a->v.arr.n; i++)
            if (!value_eq(&a->v.arr.items[i], &b->v.arr.items[i])) return false;
        return true;
    default: return false;
    }
}

/* ---- round trips ----------------------------------------------------------------------- */

TestSuite(gguf_roundtrip, .init = dir_setup, .fini = dir_teardown);

Test(gguf_roundtrip, every_value_type)
{
    struct gguf_value u8s[] = { vu(GGUF_TYPE_UINT8, 0), vu(GGUF_TYPE_UINT8, 255) };
    struct gguf_value i8s[] = { vi(GGUF_TYPE_INT8, -128), vi(GGUF_TYPE_INT8, 127) };
    struct gguf_value u16s[] = { vu(GGUF_TYPE_UINT16, 65535) };
    struct gguf_value i16s[] = { vi(GGUF_TYPE_INT16, -32768), vi(GGUF_TYPE_INT16, 1) };
    struct gguf_value u32s[] = { vu(GGUF_TYPE_UINT32, UINT32_MAX), vu(GGUF_TYPE_UINT32, 7) };
    struct gguf_value i32s[] = { vi(GGUF_TYPE_INT32, INT32_MIN), vi(GGUF_TYPE_INT32, INT32_MAX) };
    struct gguf_value u64s[] = { vu(GGUF_TYPE_UINT64, UINT64_MAX) };
    struct gguf_value i64s[] = { vi(GGUF_TYPE_INT64, INT64_MIN), vi(GGUF_TYPE_INT64, -1) };
    struct gguf_value f32s[] = { vf(GGUF_TYPE_FLOAT32, 1.5), vf(GGUF_TYPE_FLOAT32, -0.0), vf(GGUF_TYPE_FLOAT32, INFINITY) };
    struct gguf_value f64s[] = { vf(GGUF_TYPE_FLOAT64, 3.141592653589793), vf(GGUF_TYPE_FLOAT64, -1e300) };
    struct gguf_value bools[] = { vb(true), vb(false), vb(true) };
    struct gguf_value strs[] = { vs(""), vs("héllo ✓ 日本"), vs("<|im_start|>") };
    struct gguf_value inner0[] = { vu(GGUF_TYPE_UINT32, 1), vu(GGUF_TYPE_UINT32, 2), vu(GGUF_TYPE_UINT32, 3) };
    struct gguf_value inner1[] = { vu(GGUF_TYPE_UINT32, 4) };
    struct gguf_value nested[] = { va(GGUF_TYPE_UINT32, inner0, 3), va(GGUF_TYPE_UINT32, NULL, 0),
                                   va(GGUF_TYPE_UINT32, inner1, 1) };
    struct gguf_value sarr0[] = { vs("a"), vs("") };
    struct gguf_value nested_s[] = { va(GGUF_TYPE_STRING, sarr0, 2) };
    struct gguf_value deep2[] = { va(GGUF_TYPE_ARRAY, nested_s, 1), va(GGUF_TYPE_ARRAY, nested, 3) };

    struct { const char *key; struct gguf_value v; } kvs[] = {
        { "t.u8", vu(GGUF_TYPE_UINT8, 200) },       { "t.i8", vi(GGUF_TYPE_INT8, -100) },
        { "t.u16", vu(GGUF_TYPE_UINT16, 60000) },   { "t.i16", vi(GGUF_TYPE_INT16, -30000) },
        { "t.u32", vu(GGUF_TYPE_UINT32, 4000000000u) }, { "t.i32", vi(GGUF_TYPE_INT32, -2000000000) },
        { "t.u64", vu(GGUF_TYPE_UINT64, UINT64_C(18000000000000000000)) },
        { "t.i64", vi(GGUF_TYPE_INT64, INT64_C(-9000000000000000000)) },
        { "t.f32", vf(GGUF_TYPE_FLOAT32, 0.1f) },   { "t.f64", vf(GGUF_TYPE_FLOAT64, 0.1) },
        { "t.true", vb(true) },                     { "t.false", vb(false) },
        { "t.str.empty", vs("") },                  { "t.str.utf8", vs("naïve — 中文 🙂") },
        { "a.u8", va(GGUF_TYPE_UINT8, u8s, 2) },    { "a.i8", va(GGUF_TYPE_INT8, i8s, 2) },
        { "a.u16", va(GGUF_TYPE_UINT16, u16s, 1) }, { "a.i16", va(GGUF_TYPE_INT16, i16s, 2) },
        { "a.u32", va(GGUF_TYPE_UINT32, u32s, 2) }, { "a.i32", va(GGUF_TYPE_INT32, i32s, 2) },
        { "a.u64", va(GGUF_TYPE_UINT64, u64s, 1) }, { "a.i64", va(GGUF_TYPE_INT64, i64s, 2) },
        { "a.f32", va(GGUF_TYPE_FLOAT32, f32s, 3) }, { "a.f64", va(GGUF_TYPE_FLOAT64, f64s, 2) },
        { "a.bool", va(GGUF_TYPE_BOOL, bools, 3) }, { "a.str", va(GGUF_TYPE_STRING, strs, 3) },
        { "a.empty", va(GGUF_TYPE_INT32, NULL, 0) },
        { "a.nested", va(GGUF_TYPE_ARRAY, nested, 3) },
        { "a.nested3", va(GGUF_TYPE_ARRAY, deep2, 2) },
    };
    int n = (int)HS_ARRAY_LEN(kvs);
    struct gguf_writer *w = gguf_writer_new();
    for (int i = 0; i < n; i++) gguf_writer_set_value(w, kvs[i].key, &kvs[i].v);
    struct gguf_file *g = write_and_open(w, "rt.gguf");
    struct hs_err err = { 0 };
    cr_assert_eq(gguf_writer_write(w, path_of("rt2.gguf"), &err), HS_OK, "%s", err.msg);
    gguf_writer_free(w);

    cr_assert_eq(gguf_version(g), 3);
    cr_assert_eq(gguf_alignment(g), 32);
    cr_assert_eq(gguf_n_kv(g), n); /* no general.alignment at the default */
    cr_assert_eq(tensor_set_count(gguf_tensors(g)), 0);
    for (int i = 0; i < n; i++) {
        cr_assert_str_eq(gguf_kv_key(g, i), kvs[i].key); /* call order */
        cr_assert(value_eq(gguf_kv_value(g, i), &kvs[i].v), "key %s differs", kvs[i].key);
        cr_assert_eq(gguf_find(g, kvs[i].key), gguf_kv_value(g, i));
    }
    cr_assert_null(gguf_kv_key(g, n));
    cr_assert_null(gguf_kv_value(g, -1));
    cr_assert_null(gguf_find(g, "t.u"));
    gguf_close(g);

    /* deterministic: two writes give the same bytes */
    size_t l1, l2;
    char *a = read_raw(path_of("rt.gguf"), &l1), *b = read_raw(path_of("rt2.gguf"), &l2);
    cr_assert_eq(l1, l2);
    cr_assert_eq(memcmp(a, b, l1), 0);
    cr_assert_eq(l1 % 32, 0);
    hs_free(a);
    hs_free(b);
}

Test(gguf_roundtrip, typed_setters_and_replace)
{
    struct gguf_writer *w = gguf_writer_new();
    const char *toks[] = { "a", "", "ü", NULL };
    int32_t ints[] = { -1, 0, 2147483647 };
    float fl[] = { 0.5f, -2.25f };
    gguf_writer_set_u32(w, "k.u32", 7);
    gguf_writer_set_i32(w, "k.i32", -7);
    gguf_writer_set_u64(w, "k.u64", UINT64_C(1) << 40);
    gguf_writer_set_f32(w, "k.f32", 1e-6f);
    gguf_writer_set_bool(w, "k.bool", true);
    gguf_writer_set_str(w, "k.str", "qwen35");
    gguf_writer_set_arr_str(w, "k.toks", toks, 4);
    gguf_writer_set_arr_i32(w, "k.ints", ints, 3);
    gguf_writer_set_arr_f32(w, "k.fl", fl, 2);
    gguf_writer_set_u32(w, "k.u32", 9); /* replaces in place */
    struct gguf_file *g = write_and_open(w, "t.gguf");
    gguf_writer_free(w);

    cr_assert_eq(gguf_n_kv(g), 9);
    cr_assert_str_eq(gguf_kv_key(g, 0), "k.u32");
    cr_assert_eq(gguf_kv_value(g, 0)->type, GGUF_TYPE_UINT32);
    cr_assert_eq(gguf_kv_value(g, 0)->v.u, 9);
    cr_assert_eq(gguf_find(g, "k.i32")->type, GGUF_TYPE_INT32);
    cr_assert_eq(gguf_find(g, "k.i32")->v.i, -7);
    cr_assert_eq(gguf_find(g, "k.u64")->type, GGUF_TYPE_UINT64);
    cr_assert_eq(gguf_find(g, "k.f32")->type, GGUF_TYPE_FLOAT32);
    cr_assert_eq((float)gguf_find(g, "k.f32")->v.f, 1e-6f);
    cr_assert_eq(gguf_find(g, "k.bool")->v.b, true);
    const struct gguf_value *it;
    uint64_t n;
    struct hs_err err = { 0 };
    cr_assert_eq(gguf_get_arr(g, "k.toks", GGUF_TYPE_STRING, &it, &n, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(n, 4);
    cr_assert_eq(it[0].v.str.len, 1);
    cr_assert_eq(it[1].v.str.len, 0);
    cr_assert_eq(it[2].v.str.len, 2);
    cr_assert_eq(memcmp(it[2].v.str.ptr, "ü", 2), 0);
    cr_assert_eq(it[3].v.str.len, 0); /* NULL is written as "" */
    cr_assert_eq(gguf_get_arr(g, "k.ints", GGUF_TYPE_INT32, &it, &n, &err), HS_OK);
    cr_assert_eq(n, 3);
    cr_assert_eq(it[0].v.i, -1);
    cr_assert_eq(it[2].v.i, 2147483647);
    cr_assert_eq(gguf_get_arr(g, "k.fl", GGUF_TYPE_FLOAT32, &it, &n, &err), HS_OK);
    cr_assert_eq(n, 2);
    cr_assert_eq(it[1].v.f, -2.25);
    char *s;
    cr_assert_eq(gguf_get_str(g, "k.str", &s, &err), HS_OK);
    cr_assert_str_eq(s, "qwen35");
    hs_free(s);
    gguf_close(g);
    gguf_close(NULL);
    gguf_writer_free(NULL);
}

/* ---- typed getters --------------------------------------------------------------------- */

TestSuite(gguf_getters, .init = dir_setup, .fini = dir_teardown);

Test(gguf_getters, conversions_and_mismatches)
{
    struct gguf_writer *w = gguf_writer_new();
    struct gguf_value v;
    v = vu(GGUF_TYPE_UINT8, 200); gguf_writer_set_value(w, "u8", &v);
    v = vi(GGUF_TYPE_INT16, -5); gguf_writer_set_value(w, "neg", &v);
    v = vi(GGUF_TYPE_INT64, 123); gguf_writer_set_value(w, "i64pos", &v);
    v = vi(GGUF_TYPE_INT64, INT64_MIN); gguf_writer_set_value(w, "i64min", &v);
    gguf_writer_set_u64(w, "big", UINT64_C(1) << 40);
    gguf_writer_set_u64(w, "max", UINT64_MAX);
    v = vf(GGUF_TYPE_FLOAT64, 0.25); gguf_writer_set_value(w, "f64", &v);
    v = vf(GGUF_TYPE_FLOAT64, 1e300); gguf_writer_set_value(w, "f64big", &v);
    gguf_writer_set_f32(w, "f32", 2.5f);
    gguf_writer_set_bool(w, "b", false);
    gguf_writer_set_str(w, "s", "text");
    int32_t ints[] = { 1, 2 };
    gguf_writer_set_arr_i32(w, "arr", ints, 2);
    struct gguf_file *g = write_and_open(w, "g.gguf");
    gguf_writer_free(w);

    struct hs_err err = { 0 };
    uint32_t u32 = 0;
    uint64_t u64 = 0;
    int64_t i64 = 0;
    float f = 0;
    bool b = true;
    char *s = NULL;
    const struct gguf_value *it;
    uint64_t n;

    cr_assert_eq(gguf_get_u32(g, "u8", &u32, &err), HS_OK); cr_assert_eq(u32, 200);
    cr_assert_eq(gguf_get_u64(g, "u8", &u64, &err), HS_OK); cr_assert_eq(u64, 200);
    cr_assert_eq(gguf_get_i64(g, "u8", &i64, &err), HS_OK); cr_assert_eq(i64, 200);
    cr_assert_eq(gguf_get_i64(g, "neg", &i64, &err), HS_OK); cr_assert_eq(i64, -5);
    cr_assert_eq(gguf_get_u32(g, "i64pos", &u32, &err), HS_OK); cr_assert_eq(u32, 123);
    cr_assert_eq(gguf_get_i64(g, "i64min", &i64, &err), HS_OK); cr_assert_eq(i64, INT64_MIN);
    cr_assert_eq(gguf_get_u64(g, "big", &u64, &err), HS_OK); cr_assert_eq(u64, UINT64_C(1) << 40);
    cr_assert_eq(gguf_get_i64(g, "big", &i64, &err), HS_OK); cr_assert_eq(i64, INT64_C(1) << 40);
    cr_assert_eq(gguf_get_f32(g, "f64", &f, &err), HS_OK); cr_assert_eq(f, 0.25f);
    cr_assert_eq(gguf_get_f32(g, "f32", &f, &err), HS_OK); cr_assert_eq(f, 2.5f);
    cr_assert_eq(gguf_get_bool(g, "b", &b, &err), HS_OK); cr_assert_eq(b, false);
    cr_assert_eq(gguf_get_str(g, "s", &s, &err), HS_OK); cr_assert_str_eq(s, "text");
    hs_free(s);
    cr_assert_eq(err.code, HS_OK, "%s", err.msg);

    /* out of range: value untouched, message names key and value */
    u32 = 77;
    cr_assert_eq(gguf_get_u32(g, "neg", &u32, &err), HS_ERR_FORMAT);
    cr_assert_eq(u32, 77);
    cr_assert_not_null(strstr(err.msg, "'neg'"), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, "-5"), "%s", err.msg);
    hs_err_clear(&err);
    cr_assert_eq(gguf_get_u64(g, "i64min", &u64, &err), HS_ERR_FORMAT); hs_err_clear(&err);
    cr_assert_eq(gguf_get_u32(g, "big", &u32, &err), HS_ERR_FORMAT); hs_err_clear(&err);
    cr_assert_eq(gguf_get_i64(g, "max", &i64, &err), HS_ERR_FORMAT); hs_err_clear(&err);
    cr_assert_eq(gguf_get_f32(g, "f64big", &f, &err), HS_ERR_FORMAT); hs_err_clear(&err);
    /* type mismatches */
    cr_assert_eq(gguf_get_u32(g, "s", &u32, &err), HS_ERR_FORMAT);
    cr_assert_not_null(strstr(err.msg, "key 's' is a string"), "%s", err.msg);
    hs_err_clear(&err);
    cr_assert_eq(gguf_get_u32(g, "f32", &u32, &err), HS_ERR_FORMAT); hs_err_clear(&err);
    cr_assert_eq(gguf_get_i64(g, "b", &i64, &err), HS_ERR_FORMAT); hs_err_clear(&err);
    cr_assert_eq(gguf_get_f32(g, "u8", &f, &err), HS_ERR_FORMAT); hs_err_clear(&err);
    cr_assert_eq(gguf_get_bool(g, "u8", &b, &err), HS_ERR_FORMAT); hs_err_clear(&err);
    cr_assert_eq(gguf_get_str(g, "arr", &s, &err), HS_ERR_FORMAT);
    cr_assert_null(s);
    hs_err_clear(&err);
    cr_assert_eq(gguf_get_arr(g, "s", GGUF_TYPE_INT32, &it, &n, &err), HS_ERR_FORMAT); hs_err_clear(&err);
    cr_assert_eq(gguf_get_arr(g, "arr", GGUF_TYPE_UINT32, &it, &n, &err), HS_ERR_FORMAT);
    cr_assert_not_null(strstr(err.msg, "array of int32, not of uint32"), "%s", err.msg);
    hs_err_clear(&err);
    cr_assert_eq(gguf_get_arr(g, "arr", GGUF_TYPE_INT32, &it, &n, &err), HS_OK);
    cr_assert_eq(n, 2);
    cr_assert_eq(it[1].v.i, 2);
    /* absent */
    cr_assert_eq(gguf_get_u32(g, "nope", &u32, &err), HS_ERR_NOT_FOUND);
    cr_assert_not_null(strstr(err.msg, "'nope' not found"), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, "g.gguf"), "%s", err.msg);
    hs_err_clear(&err);
    cr_assert_eq(gguf_get_str(g, "nope", &s, &err), HS_ERR_NOT_FOUND);
    cr_assert_eq(gguf_get_arr(g, "nope", GGUF_TYPE_INT32, &it, &n, NULL), HS_ERR_NOT_FOUND);
    cr_assert_str_eq(gguf_value_type_name(GGUF_TYPE_FLOAT64), "float64");
    cr_assert_str_eq(gguf_value_type_name(GGUF_TYPE_COUNT), "?");
    gguf_close(g);
}

/* Per-layer keys as llama.cpp writes them: a scalar, or an array of any integer type or of
 * bools (llama_model_save_to_file: uint32 recurrent-layer flags; the converter: bools). */
Test(gguf_getters, per_layer_integers_any_spelling)
{
    struct gguf_writer *w = gguf_writer_new();
    struct gguf_value v;
    struct gguf_value u32s[] = { vu(GGUF_TYPE_UINT32, 1), vu(GGUF_TYPE_UINT32, 0), vu(GGUF_TYPE_UINT32, 7) };
    struct gguf_value i8s[] = { vi(GGUF_TYPE_INT8, -1), vi(GGUF_TYPE_INT8, 0) };
    struct gguf_value bools[] = { vb(true), vb(false) };
    struct gguf_value u64s[] = { vu(GGUF_TYPE_UINT64, UINT64_MAX) };
    struct gguf_value strs[] = { vs("x") };
    struct gguf_value f32s[] = { vf(GGUF_TYPE_FLOAT32, 1.0) };
    v = va(GGUF_TYPE_UINT32, u32s, 3); gguf_writer_set_value(w, "u32s", &v);
    v = va(GGUF_TYPE_INT8, i8s, 2); gguf_writer_set_value(w, "i8s", &v);
    v = va(GGUF_TYPE_BOOL, bools, 2); gguf_writer_set_value(w, "bools", &v);
    v = va(GGUF_TYPE_UINT64, u64s, 1); gguf_writer_set_value(w, "u64s", &v);
    v = va(GGUF_TYPE_STRING, strs, 1); gguf_writer_set_value(w, "strs", &v);
    v = va(GGUF_TYPE_FLOAT32, f32s, 1); gguf_writer_set_value(w, "f32s", &v);
    v = vu(GGUF_TYPE_UINT16, 12); gguf_writer_set_value(w, "scalar", &v);
    gguf_writer_set_bool(w, "flag", true);
    v = vu(GGUF_TYPE_UINT8, 1); gguf_writer_set_value(w, "u8one", &v);
    v = vi(GGUF_TYPE_INT32, 0); gguf_writer_set_value(w, "i32zero", &v);
    gguf_writer_set_str(w, "s", "text");
    struct gguf_file *g = write_and_open(w, "pl.gguf");
    gguf_writer_free(w);

    struct hs_err err = { 0 };
    int64_t x = -9;
    uint64_t n = 99;
    cr_assert_eq(gguf_get_i64_at(g, "u32s", 2, &x, &n, &err), HS_OK, "%s", err.msg);
    cr_assert(x == 7 && n == 3);
    cr_assert_eq(gguf_get_i64_at(g, "u32s", 1, &x, &n, &err), HS_OK); cr_assert_eq(x, 0);
    cr_assert_eq(gguf_get_i64_at(g, "i8s", 0, &x, &n, &err), HS_OK); cr_assert(x == -1 && n == 2);
    cr_assert_eq(gguf_get_i64_at(g, "bools", 0, &x, &n, &err), HS_OK); cr_assert_eq(x, 1);
    cr_assert_eq(gguf_get_i64_at(g, "bools", 1, &x, &n, &err), HS_OK); cr_assert_eq(x, 0);
    /* a scalar is every layer's value */
    cr_assert_eq(gguf_get_i64_at(g, "scalar", 40, &x, &n, &err), HS_OK); cr_assert(x == 12 && n == 0);
    cr_assert_eq(gguf_get_i64_at(g, "flag", 3, &x, &n, &err), HS_OK); cr_assert(x == 1 && n == 0);
    cr_assert_eq(err.code, HS_OK, "%s", err.msg);
    /* past the end, wrong element types, too large, absent */
    cr_assert_eq(gguf_get_i64_at(g, "u32s", 3, &x, &n, &err), HS_ERR_FORMAT);
    cr_assert(strstr(err.msg, "'u32s' has 3 entries") && n == 3, "%s", err.msg);
    hs_err_clear(&err);
    cr_assert_eq(gguf_get_i64_at(g, "strs", 0, &x, &n, &err), HS_ERR_FORMAT);
    cr_assert(strstr(err.msg, "array of string, not of integers or bools"), "%s", err.msg);
    hs_err_clear(&err);
    cr_assert_eq(gguf_get_i64_at(g, "f32s", 0, &x, &n, &err), HS_ERR_FORMAT); hs_err_clear(&err);
    cr_assert_eq(gguf_get_i64_at(g, "u64s", 0, &x, &n, &err), HS_ERR_FORMAT); hs_err_clear(&err);
    cr_assert_eq(gguf_get_i64_at(g, "s", 0, &x, &n, &err), HS_ERR_FORMAT); hs_err_clear(&err);
    cr_assert_eq(gguf_get_i64_at(g, "nope", 0, &x, &n, &err), HS_ERR_NOT_FOUND); hs_err_clear(&err);

    /* bools: also an integer 0 or 1 */
    bool b = false;
    cr_assert_eq(gguf_get_bool(g, "u8one", &b, &err), HS_OK); cr_assert(b);
    cr_assert_eq(gguf_get_bool(g, "i32zero", &b, &err), HS_OK); cr_assert(!b);
    cr_assert_eq(gguf_get_bool(g, "scalar", &b, &err), HS_ERR_FORMAT); hs_err_clear(&err);
    cr_assert_eq(gguf_get_bool(g, "s", &b, &err), HS_ERR_FORMAT); hs_err_clear(&err);

    int64_t i;
    struct gguf_value big = vu(GGUF_TYPE_UINT64, UINT64_MAX), str = vs("1");
    cr_assert(!gguf_value_int(&big, &i));
    cr_assert(!gguf_value_int(&str, &i));
    gguf_close(g);
}

/* ---- alignment and tensors ------------------------------------------------------------- */

TestSuite(gguf_tensors, .init = dir_setup, .fini = dir_teardown);

static void fill(uint8_t *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(seed + i * 37);
}

static void check_alignment(uint32_t align)
{
    static uint8_t f32[2 * 3 * 4], f16[5 * 2], bf16[2 * 2 * 3 * 2], q8[3 * 2 * 34], q4k[2 * 144];
    fill(f32, sizeof f32, 1);
    fill(f16, sizeof f16, 2);
    fill(bf16, sizeof bf16, 3);
    fill(q8, sizeof q8, 4);
    fill(q4k, sizeof q4k, 5);
    struct gguf_writer *w = gguf_writer_new();
    if (align != 32) gguf_writer_set_alignment(w, align);
    gguf_writer_set_str(w, "general.architecture", "test");
    int64_t s_f32[] = { 2, 3 }, s_f16[] = { 5 }, s_bf16[] = { 2, 2, 3 }, s_q8[] = { 3, 64 }, s_q4k[] = { 2, 256 };
    gguf_writer_add_tensor(w, "a.f32", DTYPE_F32, 2, s_f32, f32, sizeof f32);
    gguf_writer_add_tensor(w, "b.f16", DTYPE_F16, 1, s_f16, f16, sizeof f16);
    gguf_writer_add_tensor(w, "c.bf16", DTYPE_BF16, 3, s_bf16, bf16, sizeof bf16);
    gguf_writer_add_tensor(w, "d.q8_0", DTYPE_Q8_0, 2, s_q8, q8, sizeof q8);
    gguf_writer_add_tensor(w, "e.q4_k", DTYPE_Q4_K, 2, s_q4k, q4k, sizeof q4k);
    struct gguf_file *g = write_and_open(w, "al.gguf");
    gguf_writer_free(w);

    cr_assert_eq(gguf_alignment(g), align);
    cr_assert_eq(gguf_n_kv(g), align == 32 ? 1 : 2);
    if (align != 32) {
        cr_assert_str_eq(gguf_kv_key(g, 0), "general.alignment");
        cr_assert_eq(gguf_kv_value(g, 0)->type, GGUF_TYPE_UINT32);
    }
    const struct tensor_set *ts = gguf_tensors(g);
    cr_assert_eq(tensor_set_count(ts), 5);
    struct { const char *name; enum dtype dt; int n_dims; int64_t shape[3]; const uint8_t *data; uint64_t n; } want[] = {
        { "a.f32", DTYPE_F32, 2, { 2, 3 }, f32, sizeof f32 },
        { "b.f16", DTYPE_F16, 1, { 5 }, f16, sizeof f16 },
        { "c.bf16", DTYPE_BF16, 3, { 2, 2, 3 }, bf16, sizeof bf16 },
        { "d.q8_0", DTYPE_Q8_0, 2, { 3, 64 }, q8, sizeof q8 },
        { "e.q4_k", DTYPE_Q4_K, 2, { 2, 256 }, q4k, sizeof q4k },
    };
    for (int i = 0; i < 5; i++) {
        const struct tensor_view *t = tensor_set_find(ts, want[i].name);
        cr_assert_not_null(t, "%s", want[i].name);
        cr_assert_eq(t, tensor_set_at(ts, i)); /* file order */
        cr_assert_eq(t->dtype, want[i].dt);
        cr_assert_eq(t->n_dims, want[i].n_dims);
        for (int d = 0; d < t->n_dims; d++) cr_assert_eq(t->shape[d], want[i].shape[d], "%s dim %d", t->name, d);
        cr_assert_eq(t->n_bytes, want[i].n);
        cr_assert_eq(memcmp(t->data, want[i].data, want[i].n), 0);
        cr_assert_eq(t->file_offset % align, 0, "%s at %llu", t->name, (unsigned long long)t->file_offset);
        cr_assert_eq(t->file_index, 0);
    }
    /* the Q4_K tensor: 2 rows of one 256-value block, 144 bytes each */
    cr_assert_eq(tensor_n_elems(tensor_set_find(ts, "e.q4_k")), 512);
    uint64_t fsize = tensor_set_file_size(ts, 0);
    cr_assert_eq(fsize % align, 0);
    gguf_close(g);

    /* shapes are written fastest-first: find a.f32's info and read its ne */
    size_t len;
    char *raw = read_raw(path_of("al.gguf"), &len);
    cr_assert_eq(len, fsize);
    char *at = memmem(raw, len, "a.f32", 5);
    cr_assert_not_null(at);
    const uint8_t *p = (const uint8_t *)at + 5;
    cr_assert_eq(hs_rd_u32(p), 2);
    cr_assert_eq(hs_rd_u64(p + 4), 3);
    cr_assert_eq(hs_rd_u64(p + 12), 2);
    cr_assert_eq(hs_rd_u32(p + 20), 0);  /* ggml F32 */
    cr_assert_eq(hs_rd_u64(p + 24), 0);  /* first tensor at data offset 0 */
    at = memmem(raw, len, "c.bf16", 6);
    p = (const uint8_t *)at + 6;
    cr_assert_eq(hs_rd_u32(p), 3);
    cr_assert_eq(hs_rd_u64(p + 4), 3);
    cr_assert_eq(hs_rd_u64(p + 12), 2);
    cr_assert_eq(hs_rd_u64(p + 20), 2);
    cr_assert_eq(hs_rd_u32(p + 28), 30); /* ggml BF16 */
    at = memmem(raw, len, "e.q4_k", 6);
    cr_assert_eq(hs_rd_u32((const uint8_t *)at + 6 + 4 + 16), 12); /* ggml Q4_K */
    hs_free(raw);
}

Test(gguf_tensors, alignment_32) { check_alignment(32); }
Test(gguf_tensors, alignment_64) { check_alignment(64); }
Test(gguf_tensors, alignment_4096) { check_alignment(4096); }

Test(gguf_tensors, invalid_alignment_in_writer)
{
    uint32_t bad[] = { 0, 48, 3 };
    for (size_t i = 0; i < HS_ARRAY_LEN(bad); i++) {
        struct gguf_writer *w = gguf_writer_new();
        gguf_writer_set_alignment(w, bad[i]);
        struct hs_err err = { 0 };
        cr_assert_eq(gguf_writer_write(w, path_of("x.gguf"), &err), HS_ERR_INVALID);
        cr_assert_not_null(strstr(err.msg, "power of two"), "%s", err.msg);
        cr_assert(!sys_path_exists(path_of("x.gguf")));
        gguf_writer_free(w);
    }
    /* general.alignment through the generic setter is the same knob; wrong type fails */
    struct gguf_writer *w = gguf_writer_new();
    gguf_writer_set_u32(w, "general.alignment", 128);
    struct gguf_file *g = write_and_open(w, "y.gguf");
    gguf_writer_free(w);
    cr_assert_eq(gguf_alignment(g), 128);
    cr_assert_eq(gguf_n_kv(g), 1);
    gguf_close(g);
    w = gguf_writer_new();
    gguf_writer_set_u64(w, "general.alignment", 64);
    struct hs_err err = { 0 };
    cr_assert_eq(gguf_writer_write(w, path_of("z.gguf"), &err), HS_ERR_INVALID);
    gguf_writer_free(w);
}

Test(gguf_tensors, invalid_alignment_in_file)
{
    uint32_t bad[] = { 0, 48, 3, 0x80000001u };
    for (size_t i = 0; i < HS_ARRAY_LEN(bad); i++) {
        struct strbuf b;
        b_header(&b, 3, 0, 1);
        b_kv_u32(&b, "general.alignment", bad[i]);
        expect_fail(&b, HS_ERR_FORMAT, "power of two");
    }
    struct strbuf b;
    b_header(&b, 3, 0, 1);
    b_str(&b, "general.alignment");
    b_u32(&b, GGUF_TYPE_UINT64);
    b_u64(&b, 64);
    expect_fail(&b, HS_ERR_FORMAT, "must be uint32");
    /* a valid one read from a hand-made file */
    uint64_t ne[] = { 16 };
    b_header(&b, 2, 1, 1); /* version 2 has the same layout */
    b_kv_u32(&b, "general.alignment", 16);
    b_tensor(&b, "t", 1, ne, 0, 0);
    b_data(&b, 16, 64);
    struct gguf_file *g = expect_open(&b);
    cr_assert_eq(gguf_version(g), 2);
    cr_assert_eq(gguf_alignment(g), 16);
    const struct tensor_view *t = tensor_set_find(gguf_tensors(g), "t");
    cr_assert_eq(t->file_offset % 16, 0);
    cr_assert_eq(((const uint8_t *)t->data)[5], 5);
    gguf_close(g);
}

Test(gguf_tensors, writer_rejects_bad_tensors)
{
    static uint8_t buf[4096];
    int64_t s2[] = { 2, 3 }, s0[] = { 2, 0 }, sq[] = { 2, 48 }, s5[] = { 1, 1, 1, 1, 1 };
    struct { const char *name; enum dtype dt; int n_dims; const int64_t *shape; uint64_t n; const char *needle; } cases[] = {
        { "wrong_bytes", DTYPE_F32, 2, s2, 20, "holds 24" },
        { "zero_dim", DTYPE_F32, 2, s0, 0, "dimension 1 is 0" },
        { "q8_part", DTYPE_Q8_0, 2, sq, 102, "blocks" },
        { "five", DTYPE_F32, 5, s5, 4, "5 dimensions" },
        { "u8", DTYPE_U8, 2, s2, 6, "no GGUF type" },
        { "", DTYPE_F32, 2, s2, 24, "empty name" },
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(cases); i++) {
        struct gguf_writer *w = gguf_writer_new();
        gguf_writer_add_tensor(w, cases[i].name, cases[i].dt, cases[i].n_dims, cases[i].shape, buf, cases[i].n);
        struct hs_err err = { 0 };
        cr_assert_eq(gguf_writer_write(w, path_of("w.gguf"), &err), HS_ERR_INVALID, "%s", cases[i].name);
        cr_assert_not_null(strstr(err.msg, cases[i].needle), "%s: %s", cases[i].name, err.msg);
        gguf_writer_free(w);
    }
    struct gguf_writer *w = gguf_writer_new();
    gguf_writer_add_tensor(w, "t", DTYPE_F32, 2, s2, buf, 24);
    gguf_writer_add_tensor(w, "t", DTYPE_F32, 2, s2, buf, 24);
    struct hs_err err = { 0 };
    cr_assert_eq(gguf_writer_write(w, path_of("w.gguf"), &err), HS_ERR_INVALID);
    cr_assert_not_null(strstr(err.msg, "added twice"), "%s", err.msg);
    gguf_writer_free(w);
}

Test(gguf_tensors, writer_rejects_bad_values)
{
    struct gguf_value bad_items[] = { vu(GGUF_TYPE_UINT32, 1), vi(GGUF_TYPE_INT32, 2) };
    struct gguf_value deep[9];
    deep[0] = va(GGUF_TYPE_UINT8, NULL, 0);
    for (int i = 1; i < 9; i++) deep[i] = va(GGUF_TYPE_ARRAY, &deep[i - 1], 1);
    struct gguf_value cases[] = {
        va(GGUF_TYPE_UINT32, bad_items, 2),    /* item type differs from the element type */
        deep[8],                                /* 9 levels of arrays */
        vu(GGUF_TYPE_UINT8, 256),               /* does not fit */
        vi(GGUF_TYPE_INT16, 40000),
        vu((enum gguf_type)13, 0),              /* unknown type */
        va(GGUF_TYPE_UINT8, NULL, 3),           /* items missing */
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(cases); i++) {
        struct gguf_writer *w = gguf_writer_new();
        gguf_writer_set_value(w, "k", &cases[i]);
        struct hs_err err = { 0 };
        cr_assert_eq(gguf_writer_write(w, path_of("v.gguf"), &err), HS_ERR_INVALID, "case %zu", i);
        cr_assert_not_null(strstr(err.msg, "'k'"), "%s", err.msg);
        gguf_writer_free(w);
    }
    /* 8 levels is the limit, and reads back */
    struct gguf_writer *w = gguf_writer_new();
    gguf_writer_set_value(w, "deep", &deep[7]);
    struct gguf_file *g = write_and_open(w, "d.gguf");
    cr_assert(value_eq(gguf_find(g, "deep"), &deep[7]));
    gguf_close(g);
    gguf_writer_free(w);
    /* an empty key */
    w = gguf_writer_new();
    gguf_writer_set_u32(w, "", 1);
    struct hs_err err = { 0 };
    cr_assert_eq(gguf_writer_write(w, path_of("v.gguf"), &err), HS_ERR_INVALID);
    gguf_writer_free(w);
}

Test(gguf_tensors, writer_io_failures_leave_nothing)
{
    static uint8_t buf[64];
    int64_t s[] = { 16 };
    enum sys_io_op ops[] = { SYS_IO_OPEN, SYS_IO_PWRITE, SYS_IO_FSYNC, SYS_IO_RENAME };
    for (size_t i = 0; i < HS_ARRAY_LEN(ops); i++) {
        struct gguf_writer *w = gguf_writer_new();
        gguf_writer_set_str(w, "k", "v");
        gguf_writer_add_tensor(w, "t", DTYPE_F32, 1, s, buf, 64);
        sys_io_fault_clear_all();
        sys_io_fault_set(ops[i], ops[i] == SYS_IO_PWRITE ? 2 : 1, EIO, false);
        struct hs_err err = { 0 };
        cr_assert_eq(gguf_writer_write(w, path_of("f.gguf"), &err), HS_ERR_IO, "%s", sys_io_op_name(ops[i]));
        cr_assert_not_null(strstr(err.msg, "f.gguf"), "%s", err.msg);
        sys_io_fault_clear_all();
        DIR *d = opendir(g_dir);
        struct dirent *e;
        int n = 0;
        while ((e = readdir(d))) n += e->d_name[0] != '.';
        closedir(d);
        cr_assert_eq(n, 0, "%s: files left behind", sys_io_op_name(ops[i]));
        gguf_writer_free(w);
    }
    struct gguf_writer *w = gguf_writer_new();
    struct hs_err err = { 0 };
    cr_assert_eq(gguf_writer_write(w, "/nonexistent-dir-h3/x.gguf", &err), HS_ERR_IO);
    gguf_writer_free(w);
}

/* ---- hostile files --------------------------------------------------------------------- */

TestSuite(gguf_hostile, .init = dir_setup, .fini = dir_teardown);

Test(gguf_hostile, truncated_at_every_offset)
{
    /* the last tensor's size is a multiple of the alignment, so the file has no trailing
     * padding and every cut removes bytes the reader needs */
    static float a[7], b[16];
    for (int i = 0; i < 7; i++) a[i] = (float)i;
    struct gguf_writer *w = gguf_writer_new();
    gguf_writer_set_str(w, "general.name", "trunc");
    gguf_writer_set_u32(w, "x.u32", 5);
    struct gguf_value bools[] = { vb(true), vb(false) }, strs[] = { vs("ab"), vs("") };
    struct gguf_value nest[] = { va(GGUF_TYPE_BOOL, bools, 2), va(GGUF_TYPE_STRING, strs, 2) };
    struct gguf_value v = va(GGUF_TYPE_ARRAY, nest, 2);
    gguf_writer_set_value(w, "x.nest", &v);
    v = vf(GGUF_TYPE_FLOAT64, 2.0);
    gguf_writer_set_value(w, "x.f64", &v);
    int64_t sa[] = { 7 }, sb[] = { 4, 4 };
    gguf_writer_add_tensor(w, "a", DTYPE_F32, 1, sa, a, sizeof a);
    gguf_writer_add_tensor(w, "b", DTYPE_F32, 2, sb, b, sizeof b);
    struct hs_err err = { 0 };
    cr_assert_eq(gguf_writer_write(w, path_of("full.gguf"), &err), HS_OK, "%s", err.msg);
    gguf_writer_free(w);
    size_t len;
    char *raw = read_raw(path_of("full.gguf"), &len);
    struct gguf_file *g = NULL;
    cr_assert_eq(gguf_open(path_of("full.gguf"), &g, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(tensor_set_find(gguf_tensors(g), "b")->file_offset + sizeof b, len);
    gguf_close(g);
    for (size_t cut = 0; cut < len; cut++) {
        write_raw(path_of("cut.gguf"), raw, cut);
        hs_err_clear(&err);
        g = (struct gguf_file *)1;
        int rc = gguf_open(path_of("cut.gguf"), &g, &err);
        cr_assert_eq(rc, HS_ERR_FORMAT, "cut at %zu: rc %d %s", cut, rc, err.msg);
        cr_assert_null(g);
        cr_assert_not_null(strstr(err.msg, "cut.gguf"), "cut at %zu: %s", cut, err.msg);
    }
    hs_free(raw);
}

Test(gguf_hostile, empty_and_bad_magic)
{
    struct strbuf b;
    strbuf_init(&b);
    strbuf_append(&b, "", 0);
    expect_fail(&b, HS_ERR_FORMAT, "magic");
    strbuf_init(&b);
    strbuf_append(&b, "GGML\3\0\0\0", 8);
    b_u64(&b, 0);
    b_u64(&b, 0);
    expect_fail(&b, HS_ERR_FORMAT, "not a GGUF file");
}

Test(gguf_hostile, versions)
{
    struct strbuf b;
    b_header(&b, 1, 0, 0);
    expect_fail(&b, HS_ERR_UNSUPPORTED, "version 1");
    b_header(&b, 4, 0, 0);
    expect_fail(&b, HS_ERR_UNSUPPORTED, "version 4");
    b_header(&b, 0, 0, 0);
    expect_fail(&b, HS_ERR_UNSUPPORTED, "version 0");
    b_header(&b, 0x03000000u, 0, 0);
    expect_fail(&b, HS_ERR_UNSUPPORTED, "big-endian");
    b_header(&b, 3, 0, 0); /* the smallest valid file */
    struct gguf_file *g = expect_open(&b);
    cr_assert_eq(gguf_n_kv(g), 0);
    cr_assert_eq(tensor_set_count(gguf_tensors(g)), 0);
    gguf_close(g);
}

Test(gguf_hostile, absurd_counts)
{
    struct strbuf b;
    b_header(&b, 3, 0, UINT64_C(1) << 60);
    expect_fail(&b, HS_ERR_FORMAT, "key/values");
    b_header(&b, 3, UINT64_C(1) << 60, 0);
    expect_fail(&b, HS_ERR_FORMAT, "tensors");
    b_header(&b, 3, UINT64_MAX, UINT64_MAX);
    expect_fail(&b, HS_ERR_FORMAT, "key/values");
    /* an array count of 2^60 */
    b_header(&b, 3, 0, 1);
    b_str(&b, "arr");
    b_u32(&b, GGUF_TYPE_ARRAY);
    b_u32(&b, GGUF_TYPE_UINT8);
    b_u64(&b, UINT64_C(1) << 60);
    b_u64(&b, 0);
    expect_fail(&b, HS_ERR_FORMAT, "array of 1152921504606846976 uint8");
    /* an array of arrays whose count fits the bytes of uint8 but not of 12-byte arrays */
    b_header(&b, 3, 0, 1);
    b_str(&b, "arr");
    b_u32(&b, GGUF_TYPE_ARRAY);
    b_u32(&b, GGUF_TYPE_ARRAY);
    b_u64(&b, 40);
    for (int i = 0; i < 40; i++) b_u8(&b, 0);
    expect_fail(&b, HS_ERR_FORMAT, "'arr'");
}

Test(gguf_hostile, huge_string_lengths)
{
    struct strbuf b;
    b_header(&b, 3, 0, 1);
    b_u64(&b, UINT64_C(1) << 62); /* key length */
    strbuf_append(&b, "abcdefghijklmnop", 16);
    expect_fail(&b, HS_ERR_FORMAT, "length 4611686018427387904");
    b_header(&b, 3, 0, 1);
    b_str(&b, "s");
    b_u32(&b, GGUF_TYPE_STRING);
    b_u64(&b, UINT64_MAX);
    strbuf_append(&b, "abcdefgh", 8);
    expect_fail(&b, HS_ERR_FORMAT, "key 's': string: length 18446744073709551615");
    b_header(&b, 3, 1, 0);
    b_u64(&b, 1000); /* tensor name length */
    strbuf_append(&b, "abcdefghijklmnopabcdefghijklmnop", 32);
    expect_fail(&b, HS_ERR_FORMAT, "tensor info 0");
}

Test(gguf_hostile, bad_values)
{
    struct strbuf b;
    b_header(&b, 3, 0, 1);
    b_str(&b, "k");
    b_u32(&b, 13);
    b_u64(&b, 0);
    expect_fail(&b, HS_ERR_FORMAT, "unknown value type 13");
    b_header(&b, 3, 0, 1);
    b_str(&b, "k");
    b_u32(&b, GGUF_TYPE_ARRAY);
    b_u32(&b, 0xffffffffu);
    b_u64(&b, 0);
    expect_fail(&b, HS_ERR_FORMAT, "unknown array element type");
    b_header(&b, 3, 0, 1);
    b_str(&b, "flag");
    b_u32(&b, GGUF_TYPE_BOOL);
    b_u8(&b, 2);
    expect_fail(&b, HS_ERR_FORMAT, "bool value 2");
    b_header(&b, 3, 0, 1);
    b_str(&b, "");
    b_u32(&b, GGUF_TYPE_UINT8);
    b_u8(&b, 2);
    expect_fail(&b, HS_ERR_FORMAT, "empty or NUL");
    b_header(&b, 3, 0, 1);
    b_u64(&b, 3);
    strbuf_append(&b, "a\0b", 3);
    b_u32(&b, GGUF_TYPE_UINT8);
    b_u8(&b, 2);
    expect_fail(&b, HS_ERR_FORMAT, "empty or NUL");
    b_header(&b, 3, 0, 2);
    b_kv_u32(&b, "dup.key", 1);
    b_kv_u32(&b, "dup.key", 2);
    expect_fail(&b, HS_ERR_FORMAT, "'dup.key' appears twice");
    /* nine levels of arrays (the limit is eight) */
    b_header(&b, 3, 0, 1);
    b_str(&b, "deep");
    b_u32(&b, GGUF_TYPE_ARRAY);
    for (int i = 0; i < 8; i++) { b_u32(&b, GGUF_TYPE_ARRAY); b_u64(&b, 1); }
    b_u32(&b, GGUF_TYPE_UINT8);
    b_u64(&b, 0);
    expect_fail(&b, HS_ERR_FORMAT, "nested deeper than 8");
    /* a bad item deep inside an array frees what was decoded (ASan checks the leak) */
    b_header(&b, 3, 0, 1);
    b_str(&b, "partial");
    b_u32(&b, GGUF_TYPE_ARRAY);
    b_u32(&b, GGUF_TYPE_ARRAY);
    b_u64(&b, 2);
    b_u32(&b, GGUF_TYPE_STRING); b_u64(&b, 1); b_str(&b, "x");
    b_u32(&b, GGUF_TYPE_BOOL); b_u64(&b, 2); b_u8(&b, 1); b_u8(&b, 7);
    expect_fail(&b, HS_ERR_FORMAT, "bool value 7");
}

/* One tensor info plus data; returns the builder. */
static void one_tensor(struct strbuf *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type,
                       uint64_t offset, uint64_t data_len)
{
    b_header(b, 3, 1, 0);
    b_tensor(b, name, n_dims, ne, type, offset);
    b_data(b, 32, data_len);
}

Test(gguf_hostile, bad_tensors)
{
    struct strbuf b;
    uint64_t ne[] = { 4, 2 };
    one_tensor(&b, "w", 2, ne, 99, 0, 32);
    expect_fail(&b, HS_ERR_FORMAT, "tensor 'w': unknown ggml type 99");
    one_tensor(&b, "w", 2, ne, 4, 0, 32); /* Q4_2: removed from ggml */
    expect_fail(&b, HS_ERR_FORMAT, "unknown ggml type 4");
    uint64_t ne_iq[] = { 256 };
    one_tensor(&b, "iq", 1, ne_iq, 16, 0, 256);
    expect_fail(&b, HS_ERR_UNSUPPORTED, "iq2_xxs");
    /* [F12]: the rest of the IQ family stays refused by name; IQ4_NL / IQ4_XS are read, with
     * their block sizes checked */
    static const struct { uint32_t id; const char *name; } iq[] = {
        { 17, "iq2_xs" }, { 18, "iq3_xxs" }, { 19, "iq1_s" }, { 21, "iq3_s" }, { 22, "iq2_s" }, { 29, "iq1_m" },
    };
    for (size_t i = 0; i < sizeof iq / sizeof iq[0]; i++) {
        one_tensor(&b, "iq", 1, ne_iq, iq[i].id, 0, 256);
        expect_fail(&b, HS_ERR_UNSUPPORTED, iq[i].name);
    }
    uint64_t ne_32[] = { 32, 2 };
    one_tensor(&b, "x", 2, ne_32, 23, 0, 256);
    expect_fail(&b, HS_ERR_FORMAT, "ne[0] = 32 is not a multiple of the iq4_xs block (256)");
    one_tensor(&b, "x", 2, ne_32, 20, 0, 35); /* two IQ4_NL blocks are 36 bytes */
    expect_fail(&b, HS_ERR_FORMAT, "past the file end");
    one_tensor(&b, "x", 2, ne_32, 7, 0, 47); /* two Q5_1 blocks are 48 bytes */
    expect_fail(&b, HS_ERR_FORMAT, "past the file end");
    one_tensor(&b, "w", 2, ne, 0, 16, 64);
    expect_fail(&b, HS_ERR_FORMAT, "offset 16 is not a multiple of the alignment 32");
    one_tensor(&b, "w", 2, ne, 0, 0, 31);
    expect_fail(&b, HS_ERR_FORMAT, "past the file end");
    one_tensor(&b, "w", 2, ne, 0, UINT64_MAX - 31, 32);
    expect_fail(&b, HS_ERR_FORMAT, "'w'");
    uint64_t big[] = { UINT64_C(1) << 40, UINT64_C(1) << 40 };
    one_tensor(&b, "w", 2, big, 0, 0, 32);
    expect_fail(&b, HS_ERR_FORMAT, "overflows");
    uint64_t huge[] = { UINT64_C(1) << 61 };
    one_tensor(&b, "w", 1, huge, 0, 0, 32);
    expect_fail(&b, HS_ERR_FORMAT, "ne[0]");
    uint64_t zero[] = { 4, 0 };
    one_tensor(&b, "w", 2, zero, 0, 0, 32);
    expect_fail(&b, HS_ERR_FORMAT, "ne[1] = 0");
    uint64_t five[] = { 1, 1, 1, 1, 1 };
    one_tensor(&b, "w", 5, five, 0, 0, 32);
    expect_fail(&b, HS_ERR_FORMAT, "5 dimensions");
    uint64_t q[] = { 48 };
    one_tensor(&b, "q", 1, q, 8, 0, 64);
    expect_fail(&b, HS_ERR_FORMAT, "not a multiple of the q8_0 block");
    one_tensor(&b, "", 2, ne, 0, 0, 32);
    expect_fail(&b, HS_ERR_FORMAT, "empty or NUL");

    /* overlap: both at offset 0 */
    b_header(&b, 3, 2, 0);
    b_tensor(&b, "x", 2, ne, 0, 0);
    b_tensor(&b, "y", 1, ne, 0, 0);
    b_data(&b, 32, 64);
    expect_fail(&b, HS_ERR_FORMAT, "overlap");
    /* overlap: y starts inside x */
    uint64_t ne16[] = { 16 };
    b_header(&b, 3, 2, 0);
    b_tensor(&b, "x", 1, ne16, 0, 0);
    b_tensor(&b, "y", 1, ne16, 0, 32);
    b_data(&b, 32, 128);
    expect_fail(&b, HS_ERR_FORMAT, "overlap");
    /* duplicate names */
    b_header(&b, 3, 2, 0);
    b_tensor(&b, "x", 1, ne16, 0, 0);
    b_tensor(&b, "x", 1, ne16, 0, 64);
    b_data(&b, 32, 128);
    expect_fail(&b, HS_ERR_FORMAT, "'x' appears twice");

    /* and the same shapes done right open: 0 dims is a scalar */
    b_header(&b, 3, 3, 0);
    b_tensor(&b, "x", 1, ne16, 0, 0);
    b_tensor(&b, "y", 1, ne16, 0, 64);
    b_tensor(&b, "s", 0, NULL, 0, 128);
    b_data(&b, 32, 132);
    struct gguf_file *g = expect_open(&b);
    const struct tensor_view *s = tensor_set_find(gguf_tensors(g), "s");
    cr_assert_eq(s->n_dims, 0);
    cr_assert_eq(s->n_bytes, 4);
    gguf_close(g);
}
