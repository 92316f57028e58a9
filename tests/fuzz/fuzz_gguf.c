/* fuzz_gguf.c — libFuzzer harness for the GGUF reader.
 *
 * Each input is written to an in-memory file (memfd) and opened with gguf_open, the real
 * entry point, mapping included. When it opens, every key is read through every typed
 * getter, arrays are walked to the bottom, and each tensor's first and last byte is read,
 * so a view outside the mapping faults. Everything is freed: leaks are findings.
 *
 * Built and run by tools/run_fuzz.sh (`make fuzz`). The seed corpus in
 * tests/fuzz/corpus/gguf/ is made by this same file built without libFuzzer (it checks
 * that each valid-* seed opens and each bad-* seed fails):
 *
 *   cc -std=c11 -D_GNU_SOURCE -DFUZZ_GGUF_MAKE_CORPUS -Isrc tests/fuzz/fuzz_gguf.c \
 *      src/format/gguf.c src/format/gguf_write.c src/format/tensor.c src/base/[a-z]*.c \
 *      src/sys/file.c src/sys/io.c -ljansson -lm -lpthread -o /tmp/mkcorpus
 *   /tmp/mkcorpus tests/fuzz/corpus/gguf
 */
#include "format/format.h"
#include "sys/sys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static uint64_t walk(const struct gguf_value *v, int depth)
{
    uint64_t acc = (uint64_t)v->type + (uint64_t)depth;
    if (v->type == GGUF_TYPE_STRING && v->v.str.len)
        acc += (uint8_t)v->v.str.ptr[0] + (uint8_t)v->v.str.ptr[v->v.str.len - 1];
    if (v->type == GGUF_TYPE_ARRAY)
        for (uint64_t i = 0; i < v->v.arr.n; i++) acc += walk(&v->v.arr.items[i], depth + 1);
    return acc;
}

static void exercise(const struct gguf_file *g)
{
    volatile uint64_t sink = gguf_version(g) + gguf_alignment(g);
    for (int i = 0; i < gguf_n_kv(g); i++) {
        const char *k = gguf_kv_key(g, i);
        const struct gguf_value *v = gguf_kv_value(g, i);
        if (gguf_find(g, k) != v) abort(); /* keys are unique: find must return this entry */
        sink += walk(v, 0);
        uint32_t u32;
        uint64_t u64;
        int64_t i64;
        float f;
        bool b;
        char *s = NULL;
        const struct gguf_value *items;
        uint64_t n;
        struct hs_err err = { 0 };
        sink += (uint64_t)gguf_get_u32(g, k, &u32, &err);
        sink += (uint64_t)gguf_get_u64(g, k, &u64, NULL);
        sink += (uint64_t)gguf_get_i64(g, k, &i64, NULL);
        sink += (uint64_t)gguf_get_f32(g, k, &f, NULL);
        sink += (uint64_t)gguf_get_bool(g, k, &b, NULL);
        if (gguf_get_str(g, k, &s, NULL) == HS_OK) sink += strlen(s);
        hs_free(s);
        if (v->type == GGUF_TYPE_ARRAY && gguf_get_arr(g, k, v->v.arr.elem_type, &items, &n, NULL) != HS_OK) abort();
        sink += strlen(gguf_value_type_name(v->type));
    }
    const struct tensor_set *ts = gguf_tensors(g);
    for (int i = 0; i < tensor_set_count(ts); i++) {
        const struct tensor_view *t = tensor_set_at(ts, i);
        if (tensor_set_find(ts, t->name) != t) abort();
        if (t->n_bytes) {
            const uint8_t *p = t->data;
            sink += p[0] + p[t->n_bytes - 1];
        }
        char buf[96];
        sink += strlen(tensor_shape_str(t, buf, sizeof buf)) + tensor_n_elems(t);
    }
    (void)sink;
}

#ifndef FUZZ_GGUF_MAKE_CORPUS

static int g_fd = -1;
static char g_path[64];

/* A file the reader can open by path, reused for every input. */
static void scratch_init(void)
{
    if (g_fd >= 0) return;
    g_fd = memfd_create("fuzz_gguf", 0);
    if (g_fd >= 0) {
        snprintf(g_path, sizeof g_path, "/proc/self/fd/%d", g_fd);
        return;
    }
    strcpy(g_path, "/tmp/fuzz_gguf_XXXXXX");
    g_fd = mkstemp(g_path);
    if (g_fd < 0) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    scratch_init();
    if (ftruncate(g_fd, 0) != 0) abort();
    if (size && pwrite(g_fd, data, size, 0) != (ssize_t)size) abort();
    struct gguf_file *g = NULL;
    struct hs_err err = { 0 };
    int rc = gguf_open(g_path, &g, &err);
    if (rc == HS_OK) {
        exercise(g);
        gguf_close(g);
    } else if (g != NULL || err.code != rc || err.msg[0] == '\0') {
        abort(); /* a failure must leave no object and explain itself */
    }
    return 0;
}

#else /* the seed-corpus generator */

static const char *g_out;

static void put(const char *name, const void *data, size_t len)
{
    if (len >= 4096) { fprintf(stderr, "%s: %zu bytes is too big for a seed\n", name, len); exit(1); }
    char *p = sys_path_join(g_out, name);
    struct hs_err err = { 0 };
    if (sys_file_write_atomic(p, data, len, &err) != HS_OK) { fprintf(stderr, "%s\n", err.msg); exit(1); }
    struct gguf_file *g = NULL;
    int rc = gguf_open(p, &g, &err);
    bool want_ok = strncmp(name, "valid-", 6) == 0;
    printf("%-28s %5zu bytes  %s\n", name, len, rc == HS_OK ? "opens" : err.msg);
    if ((rc == HS_OK) != want_ok) { fprintf(stderr, "%s: unexpected result\n", name); exit(1); }
    if (g) exercise(g);
    gguf_close(g);
    hs_free(p);
}

/* Write w to a temp file and return its bytes. */
static char *build(struct gguf_writer *w, size_t *len)
{
    char *p = sys_path_join(g_out, ".seed.tmp");
    struct hs_err err = { 0 };
    char *data = NULL;
    if (gguf_writer_write(w, p, &err) != HS_OK || sys_file_read_all(p, 1 << 20, &data, len, &err) != HS_OK) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    unlink(p);
    hs_free(p);
    gguf_writer_free(w);
    return data;
}

/* Offset of the first occurrence of needle (which must exist). */
static size_t find(const char *hay, size_t n, const char *needle, size_t nl)
{
    const char *at = memmem(hay, n, needle, nl);
    if (!at) { fprintf(stderr, "seed: '%s' not found\n", needle); exit(1); }
    return (size_t)(at - hay);
}

static void st_u32(char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (char)(v >> (8 * i)); }
static void st_u64(char *p, uint64_t v) { for (int i = 0; i < 8; i++) p[i] = (char)(v >> (8 * i)); }

int main(int argc, char **argv)
{
    if (argc != 2) { fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]); return 2; }
    g_out = argv[1];
    struct hs_err err = { 0 };
    if (sys_mkdir_p(g_out, &err) != HS_OK) { fprintf(stderr, "%s\n", err.msg); return 1; }

    static uint8_t data[1024];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)(i * 7 + 1);
    size_t len;

    /* 1. metadata of every type, nested arrays, no tensors */
    struct gguf_writer *w = gguf_writer_new();
    struct gguf_value inner[2], items[3], nest, v;
    for (int i = 0; i < 3; i++) { memset(&items[i], 0, sizeof items[i]); items[i].type = GGUF_TYPE_INT16; items[i].v.i = -i; }
    memset(inner, 0, sizeof inner);
    inner[0].type = inner[1].type = GGUF_TYPE_ARRAY;
    inner[0].v.arr.elem_type = inner[1].v.arr.elem_type = GGUF_TYPE_INT16;
    inner[0].v.arr.items = items; inner[0].v.arr.n = 3;
    inner[1].v.arr.items = items; inner[1].v.arr.n = 1;
    memset(&nest, 0, sizeof nest);
    nest.type = GGUF_TYPE_ARRAY; nest.v.arr.elem_type = GGUF_TYPE_ARRAY; nest.v.arr.items = inner; nest.v.arr.n = 2;
    gguf_writer_set_value(w, "nest", &nest);
    enum gguf_type scalars[] = { GGUF_TYPE_UINT8, GGUF_TYPE_INT8, GGUF_TYPE_UINT16, GGUF_TYPE_INT16,
                                 GGUF_TYPE_INT64, GGUF_TYPE_FLOAT64 };
    for (size_t i = 0; i < HS_ARRAY_LEN(scalars); i++) {
        char key[16];
        memset(&v, 0, sizeof v);
        v.type = scalars[i];
        v.v.u = 100 + i;
        if (scalars[i] == GGUF_TYPE_FLOAT64) v.v.f = 0.5;
        snprintf(key, sizeof key, "s.%s", gguf_value_type_name(scalars[i]));
        gguf_writer_set_value(w, key, &v);
    }
    gguf_writer_set_u32(w, "u32", 7);
    gguf_writer_set_i32(w, "i32", -7);
    gguf_writer_set_u64(w, "u64", 1u << 31);
    gguf_writer_set_f32(w, "f32", 1e-6f);
    gguf_writer_set_bool(w, "bool", true);
    gguf_writer_set_str(w, "general.name", "seed ✓");
    const char *toks[] = { "<|im_start|>", "", "a" };
    gguf_writer_set_arr_str(w, "tokens", toks, 3);
    int32_t ints[] = { 1, -2, 3 };
    gguf_writer_set_arr_i32(w, "ints", ints, 3);
    float fl[] = { 0.25f, -1.0f };
    gguf_writer_set_arr_f32(w, "floats", fl, 2);
    char *meta = build(w, &len);
    size_t meta_len = len;
    put("valid-metadata.gguf", meta, len);

    /* 2. tensors of several types, alignment 64 */
    w = gguf_writer_new();
    gguf_writer_set_alignment(w, 64);
    gguf_writer_set_str(w, "general.architecture", "seed");
    int64_t s_f32[] = { 2, 4 }, s_f16[] = { 3 }, s_bf16[] = { 2, 1, 2 }, s_q8[] = { 1, 32 }, s_q4k[] = { 1, 256 };
    gguf_writer_add_tensor(w, "f32", DTYPE_F32, 2, s_f32, data, 32);
    gguf_writer_add_tensor(w, "f16", DTYPE_F16, 1, s_f16, data, 6);
    gguf_writer_add_tensor(w, "bf16", DTYPE_BF16, 3, s_bf16, data, 8);
    gguf_writer_add_tensor(w, "q8_0", DTYPE_Q8_0, 2, s_q8, data, 34);
    gguf_writer_add_tensor(w, "q4_k", DTYPE_Q4_K, 2, s_q4k, data, 144);
    char *tens = build(w, &len);
    size_t tens_len = len;
    put("valid-tensors.gguf", tens, len);

    /* 3. the smallest file */
    w = gguf_writer_new();
    char *empty = build(w, &len);
    put("valid-empty.gguf", empty, len);
    hs_free(empty);

    /* invalid variants, each a small edit of a valid file */
    char *b = hs_malloc(tens_len);
    size_t info = find(tens, tens_len, "\4\0\0\0\0\0\0\0q8_0", 12) + 12; /* n_dims of q8_0 */
    size_t f32info = find(tens, tens_len, "\3\0\0\0\0\0\0\0f32", 11) + 11;

    memcpy(b, tens, tens_len); b[0] = 'X';
    put("bad-magic.gguf", b, tens_len);
    memcpy(b, tens, tens_len); st_u32(b + 4, 1);
    put("bad-version1.gguf", b, tens_len);
    memcpy(b, tens, tens_len); st_u32(b + 4, 4);
    put("bad-version4.gguf", b, tens_len);
    memcpy(b, tens, tens_len); st_u64(b + 8, UINT64_C(1) << 60);
    put("bad-ntensors.gguf", b, tens_len);
    memcpy(b, tens, tens_len); st_u64(b + 16, UINT64_C(1) << 60);
    put("bad-nkv.gguf", b, tens_len);
    memcpy(b, tens, tens_len); st_u32(b + info, 5);
    put("bad-5dims.gguf", b, tens_len);
    memcpy(b, tens, tens_len); st_u32(b + info + 4 + 16, 99);
    put("bad-ggml-type.gguf", b, tens_len);
    memcpy(b, tens, tens_len); st_u64(b + info + 4 + 16 + 4, 8);
    put("bad-offset-unaligned.gguf", b, tens_len);
    memcpy(b, tens, tens_len); st_u64(b + info + 4 + 16 + 4, 0);
    put("bad-overlap.gguf", b, tens_len);
    memcpy(b, tens, tens_len); st_u64(b + info + 4 + 16 + 4, 1u << 20);
    put("bad-past-end.gguf", b, tens_len);
    memcpy(b, tens, tens_len); st_u64(b + f32info + 4, UINT64_C(1) << 59); st_u64(b + f32info + 12, UINT64_C(1) << 59);
    put("bad-dims-overflow.gguf", b, tens_len);
    memcpy(b, tens, tens_len); memcpy(b + find(tens, tens_len, "q4_k", 4), "q8_0", 4);
    put("bad-dup-tensor.gguf", b, tens_len);
    memcpy(b, tens, tens_len);
    st_u32(b + find(tens, tens_len, "general.alignment", 17) + 17 + 4, 48);
    put("bad-alignment.gguf", b, tens_len);
    put("bad-truncated.gguf", tens, tens_len - 100);
    hs_free(b);

    b = hs_malloc(meta_len);
    size_t u32key = find(meta, meta_len, "\3\0\0\0\0\0\0\0u32", 11);
    memcpy(b, meta, meta_len); st_u32(b + u32key + 11, 13);
    put("bad-value-type.gguf", b, meta_len);
    memcpy(b, meta, meta_len); memcpy(b + find(meta, meta_len, "i32", 3), "u32", 3);
    put("bad-dup-key.gguf", b, meta_len);
    memcpy(b, meta, meta_len); b[find(meta, meta_len, "bool", 4) + 4 + 4] = 2;
    put("bad-bool.gguf", b, meta_len);
    memcpy(b, meta, meta_len); st_u64(b + find(meta, meta_len, "general.name", 12) - 8, UINT64_C(1) << 62);
    put("bad-key-length.gguf", b, meta_len);
    size_t tokens = find(meta, meta_len, "tokens", 6) + 6 + 4 + 4; /* the array count */
    memcpy(b, meta, meta_len); st_u64(b + tokens, UINT64_C(1) << 60);
    put("bad-array-count.gguf", b, meta_len);
    memcpy(b, meta, meta_len); st_u64(b + tokens + 8, UINT64_MAX);
    put("bad-string-length.gguf", b, meta_len);
    put("bad-truncated-meta.gguf", meta, meta_len / 2);
    hs_free(b);

    /* arrays nested nine deep: one past the limit */
    char deep[256];
    size_t n = 0;
    memcpy(deep, "GGUF\3\0\0\0", 8); n = 8;
    st_u64(deep + n, 0); n += 8;
    st_u64(deep + n, 1); n += 8;
    st_u64(deep + n, 1); n += 8; deep[n++] = 'd';
    st_u32(deep + n, GGUF_TYPE_ARRAY); n += 4;
    for (int i = 0; i < 8; i++) { st_u32(deep + n, GGUF_TYPE_ARRAY); n += 4; st_u64(deep + n, 1); n += 8; }
    st_u32(deep + n, GGUF_TYPE_UINT8); n += 4;
    st_u64(deep + n, 0); n += 8;
    put("bad-nesting.gguf", deep, n);

    hs_free(meta);
    hs_free(tens);
    return 0;
}

#endif
