/* test_safetensors.c — the safetensors writer and reader: round trips for every dtype,
 * the exact bytes the writer emits, sharded sets, and hostile files. */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format/format.h"
#include "sys/sys.h"

/* ---- helpers ------------------------------------------------------------------------- */

static char st_dir[64];

static void st_dir_setup(void)
{
    strcpy(st_dir, "/tmp/hs_st_XXXXXX");
    cr_assert_not_null(mkdtemp(st_dir));
}

static int st_rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

static void st_dir_teardown(void)
{
    sys_io_fault_clear_all();
    nftw(st_dir, st_rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

/* st_dir/name into a static ring of buffers (a few paths live at once). */
static const char *st_path(const char *name)
{
    static char ring[8][256];
    static int k;
    char *p = ring[k++ % 8];
    snprintf(p, 256, "%s/%s", st_dir, name);
    return p;
}

static void st_put(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "fopen %s", path);
    cr_assert_eq(fwrite(data, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
}

static uint8_t *st_slurp(const char *path, size_t *n)
{
    char *buf;
    struct hs_err e;
    hs_err_clear(&e);
    cr_assert_eq(sys_file_read_all(path, 1 << 26, &buf, n, &e), HS_OK, "%s", e.msg);
    return (uint8_t *)buf;
}

/* A file from a header text and data_len bytes of data (byte i = i * 7 + 1). */
static size_t st_compose(struct strbuf *sb, const char *header, size_t data_len)
{
    uint64_t n = strlen(header);
    uint8_t prefix[8];
    for (int i = 0; i < 8; i++) prefix[i] = (uint8_t)(n >> (8 * i));
    strbuf_reset(sb);
    strbuf_append(sb, prefix, 8);
    strbuf_append(sb, header, (size_t)n);
    for (size_t i = 0; i < data_len; i++) strbuf_putc(sb, (char)(uint8_t)(i * 7 + 1));
    return sb->len;
}

static int st_open_header(const char *name, const char *header, size_t data_len, struct tensor_set **ts,
                          struct hs_err *e)
{
    struct strbuf sb;
    strbuf_init(&sb);
    st_compose(&sb, header, data_len);
    st_put(st_path(name), sb.buf, sb.len);
    strbuf_free(&sb);
    hs_err_clear(e);
    return safetensors_open(st_path(name), ts, e);
}

static bool st_dir_has_tmp(void)
{
    bool found = false;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "ls -a %s", st_dir);
    FILE *p = popen(cmd, "r");
    char line[512];
    while (p && fgets(line, sizeof line, p))
        if (strstr(line, ".tmp.")) found = true;
    if (p) pclose(p);
    return found;
}

/* ---- round trips --------------------------------------------------------------------- */

struct st_case_tensor {
    const char *name;
    int n_dims;
    int64_t shape[4];
};

static const struct st_case_tensor st_shapes[] = {
    { "model.embed_tokens.weight", 2, { 5, 3 } },
    { "scalar", 0, { 0 } },
    { "layers.0.conv1d.weight", 3, { 4, 1, 3 } },
    { "four_d", 4, { 2, 1, 3, 2 } },
    { "vec", 1, { 7 } },
};

/* Fill n elements of dtype t with distinct values derived from seed. */
static void st_fill(enum dtype t, void *out, uint64_t n, int seed)
{
    for (uint64_t i = 0; i < n; i++) {
        float v = (float)seed * 0.5f - (float)i * 0.375f + 0.0625f;
        if (t == DTYPE_F32) memcpy((float *)out + i, &v, 4);
        else if (t == DTYPE_F16) ((uint16_t *)out)[i] = hs_f32_to_f16(v);
        else ((uint16_t *)out)[i] = hs_f32_to_bf16(v);
    }
}

static void st_roundtrip_dtype(enum dtype t, const char *st_name)
{
    uint64_t esz = dtype_info(t)->block_bytes;
    void *bufs[HS_ARRAY_LEN(st_shapes)];
    uint64_t sizes[HS_ARRAY_LEN(st_shapes)];
    struct st_writer *w = st_writer_new();
    st_writer_set_metadata(w, "format", "pt");
    st_writer_set_metadata(w, "note", "quote \" backslash \\ newline \n é");
    for (size_t k = 0; k < HS_ARRAY_LEN(st_shapes); k++) {
        uint64_t n = 1;
        for (int d = 0; d < st_shapes[k].n_dims; d++) n *= (uint64_t)st_shapes[k].shape[d];
        sizes[k] = n * esz;
        bufs[k] = malloc(sizes[k]);
        st_fill(t, bufs[k], n, (int)k + 1);
        st_writer_add(w, st_shapes[k].name, t, st_shapes[k].n_dims, st_shapes[k].shape, bufs[k], sizes[k]);
    }
    struct hs_err e;
    hs_err_clear(&e);
    cr_assert_eq(st_writer_write(w, st_path("a.safetensors"), &e), HS_OK, "%s", e.msg);
    cr_assert_eq(st_writer_write(w, st_path("b.safetensors"), &e), HS_OK, "%s", e.msg);
    st_writer_free(w);

    size_t la, lb;
    uint8_t *fa = st_slurp(st_path("a.safetensors"), &la), *fb = st_slurp(st_path("b.safetensors"), &lb);
    cr_assert_eq(la, lb);
    cr_assert(memcmp(fa, fb, la) == 0, "the same input gives the same bytes");
    uint64_t hlen = hs_rd_u64(fa);
    cr_assert_eq((8 + hlen) % 8, 0, "data starts 8-aligned");
    cr_assert_eq(fa[8], '{');
    cr_assert(strstr((char *)fa + 8, st_name) != NULL);

    struct tensor_set *ts = NULL;
    cr_assert_eq(safetensors_open(st_path("a.safetensors"), &ts, &e), HS_OK, "%s", e.msg);
    cr_assert_eq(tensor_set_count(ts), (int)HS_ARRAY_LEN(st_shapes));
    cr_assert_eq(tensor_set_n_files(ts), 1);
    cr_assert_eq(tensor_set_file_size(ts, 0), la);
    uint64_t expect_off = 8 + hlen;
    for (size_t k = 0; k < HS_ARRAY_LEN(st_shapes); k++) {
        const struct tensor_view *v = tensor_set_at(ts, (int)k);
        cr_assert_str_eq(v->name, st_shapes[k].name, "tensors keep call order");
        cr_assert_eq(tensor_set_find(ts, st_shapes[k].name), v);
        cr_assert_eq(v->dtype, t);
        cr_assert_eq(v->n_dims, st_shapes[k].n_dims);
        for (int d = 0; d < v->n_dims; d++) cr_assert_eq(v->shape[d], st_shapes[k].shape[d]);
        cr_assert_eq(v->n_bytes, sizes[k]);
        cr_assert_eq(v->file_offset, expect_off, "back to back in call order");
        cr_assert_eq(v->file_index, 0);
        cr_assert(memcmp(v->data, bufs[k], sizes[k]) == 0, "bytes of '%s'", v->name);
        cr_assert(memcmp(fa + expect_off, bufs[k], sizes[k]) == 0);
        expect_off += sizes[k];
        free(bufs[k]);
    }
    cr_assert_eq(expect_off, la, "no bytes after the last tensor");
    cr_assert_str_eq(safetensors_metadata(ts, "format"), "pt");
    cr_assert_str_eq(safetensors_metadata(ts, "note"), "quote \" backslash \\ newline \n é");
    cr_assert_null(safetensors_metadata(ts, "absent"));
    tensor_set_free(ts);
    hs_free(fa);
    hs_free(fb);
}

TestSuite(st_roundtrip, .init = st_dir_setup, .fini = st_dir_teardown);

Test(st_roundtrip, f32) { st_roundtrip_dtype(DTYPE_F32, "\"F32\""); }
Test(st_roundtrip, f16) { st_roundtrip_dtype(DTYPE_F16, "\"F16\""); }
Test(st_roundtrip, bf16) { st_roundtrip_dtype(DTYPE_BF16, "\"BF16\""); }

Test(st_roundtrip, mixed_dtypes_in_one_file)
{
    float a[3] = { 1.0f, -2.5f, 3.25f };
    uint16_t b[2] = { hs_f32_to_f16(0.5f), hs_f32_to_f16(-7.0f) };
    uint16_t c[1] = { hs_f32_to_bf16(42.0f) };
    int64_t s3[] = { 3 }, s2[] = { 2 };
    struct st_writer *w = st_writer_new();
    st_writer_add(w, "b16", DTYPE_F16, 1, s2, b, sizeof b);
    st_writer_add(w, "bf", DTYPE_BF16, 0, NULL, c, sizeof c);
    st_writer_add(w, "f", DTYPE_F32, 1, s3, a, sizeof a);
    struct hs_err e;
    hs_err_clear(&e);
    cr_assert_eq(st_writer_write(w, st_path("m.safetensors"), &e), HS_OK, "%s", e.msg);
    st_writer_free(w);
    struct tensor_set *ts;
    cr_assert_eq(safetensors_open(st_path("m.safetensors"), &ts, &e), HS_OK, "%s", e.msg);
    const struct tensor_view *f = tensor_set_find(ts, "f"), *h = tensor_set_find(ts, "b16"),
                             *s = tensor_set_find(ts, "bf");
    cr_assert(f && h && s);
    cr_assert_eq(f->dtype, DTYPE_F32);
    cr_assert_eq(h->dtype, DTYPE_F16);
    cr_assert_eq(s->dtype, DTYPE_BF16);
    cr_assert_eq(s->n_dims, 0, "a scalar has no dimensions");
    cr_assert_eq(s->n_bytes, 2);
    cr_assert_eq(tensor_n_elems(s), 1);
    cr_assert(memcmp(f->data, a, sizeof a) == 0);
    cr_assert(memcmp(h->data, b, sizeof b) == 0);
    cr_assert(memcmp(s->data, c, sizeof c) == 0);
    cr_assert_null(safetensors_metadata(ts, "format"), "no __metadata__ written when none is set");
    tensor_set_free(ts);
}

/* The writer's bytes, checked against a header written out by hand. */
Test(st_roundtrip, writer_exact_bytes)
{
    float x[2] = { 1.0f, 2.0f };
    uint16_t y = 0x3c00;
    int64_t s2[] = { 1, 2 };
    struct st_writer *w = st_writer_new();
    st_writer_set_metadata(w, "k", "v");
    st_writer_add(w, "x", DTYPE_F32, 2, s2, x, sizeof x);
    st_writer_add(w, "y", DTYPE_F16, 0, NULL, &y, 2);
    struct hs_err e;
    hs_err_clear(&e);
    cr_assert_eq(st_writer_write(w, st_path("x.safetensors"), &e), HS_OK, "%s", e.msg);
    st_writer_free(w);
    const char *json = "{\"__metadata__\":{\"k\":\"v\"},"
                       "\"x\":{\"dtype\":\"F32\",\"shape\":[1,2],\"data_offsets\":[0,8]},"
                       "\"y\":{\"dtype\":\"F16\",\"shape\":[],\"data_offsets\":[8,10]}}";
    size_t jl = strlen(json); /* 134: padded with 2 spaces to 136, so the data starts at 144 */
    cr_assert_eq(jl, 134);
    size_t n;
    uint8_t *f = st_slurp(st_path("x.safetensors"), &n);
    cr_assert_eq(n, 8 + 136 + 10);
    cr_assert_eq(hs_rd_u64(f), 136);
    cr_assert(memcmp(f + 8, json, jl) == 0, "header: %.*s", 136, (char *)f + 8);
    cr_assert(memcmp(f + 8 + jl, "  ", 2) == 0);
    cr_assert(memcmp(f + 144, x, 8) == 0);
    cr_assert(memcmp(f + 152, &y, 2) == 0);
    hs_free(f);
}

/* A file from another writer: unpadded header, data at an odd offset. */
Test(st_roundtrip, reads_hand_made_unpadded_file)
{
    const char *h = "{\"b\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[4,8]},"
                    " \"a\":{\"data_offsets\":[0,4],\"shape\":[1,1],\"dtype\":\"F32\"}}";
    struct tensor_set *ts;
    struct hs_err e;
    cr_assert_eq(st_open_header("h.safetensors", h, 8, &ts, &e), HS_OK, "%s", e.msg);
    uint64_t start = 8 + strlen(h);
    cr_assert_eq(tensor_set_count(ts), 2);
    cr_assert_str_eq(tensor_set_at(ts, 0)->name, "b", "header order is kept");
    const struct tensor_view *a = tensor_set_find(ts, "a"), *b = tensor_set_find(ts, "b");
    cr_assert_eq(a->file_offset, start);
    cr_assert_eq(b->file_offset, start + 4);
    const uint8_t *pa = a->data, *pb = b->data;
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(pa[i], (uint8_t)(i * 7 + 1));
        cr_assert_eq(pb[i], (uint8_t)((i + 4) * 7 + 1));
    }
    tensor_set_free(ts);
}

Test(st_roundtrip, empty_header_object_is_an_empty_set)
{
    struct tensor_set *ts;
    struct hs_err e;
    cr_assert_eq(st_open_header("e.safetensors", "{\"__metadata__\":{\"a\":\"b\"}}", 0, &ts, &e), HS_OK, "%s", e.msg);
    cr_assert_eq(tensor_set_count(ts), 0);
    cr_assert_str_eq(safetensors_metadata(ts, "a"), "b");
    tensor_set_free(ts);
}

Test(st_roundtrip, i64_buffer_reads_back)
{
    /* Flash-Next's n-gram constants: I64 values no float round trip may touch */
    int64_t v[2] = { INT64_C(23703573157769), -2 };
    int64_t s[] = { 2 };
    struct st_writer *w = st_writer_new();
    st_writer_add(w, "ids", DTYPE_I64, 1, s, v, sizeof v);
    struct hs_err e;
    hs_err_clear(&e);
    cr_assert_eq(st_writer_write(w, st_path("i64.safetensors"), &e), HS_OK, "%s", e.msg);
    st_writer_free(w);
    struct tensor_set *ts = NULL;
    cr_assert_eq(safetensors_open(st_path("i64.safetensors"), &ts, &e), HS_OK, "%s", e.msg);
    const struct tensor_view *t = tensor_set_find(ts, "ids");
    cr_assert_not_null(t);
    cr_assert_eq(t->dtype, DTYPE_I64);
    cr_assert(memcmp(t->data, v, sizeof v) == 0);
    tensor_set_free(ts);
}

Test(st_roundtrip, unsupported_dtype_from_the_writer)
{
    int32_t v[2] = { 1, 2 };
    int64_t s[] = { 2 };
    struct st_writer *w = st_writer_new();
    st_writer_add(w, "ids", DTYPE_I32, 1, s, v, sizeof v);
    struct hs_err e;
    hs_err_clear(&e);
    cr_assert_eq(st_writer_write(w, st_path("i.safetensors"), &e), HS_OK, "%s", e.msg);
    st_writer_free(w);
    struct tensor_set *ts = (void *)1;
    hs_err_clear(&e);
    cr_assert_eq(safetensors_open(st_path("i.safetensors"), &ts, &e), HS_ERR_UNSUPPORTED);
    cr_assert_null(ts);
    cr_assert(strstr(e.msg, "'ids'") && strstr(e.msg, "I32") && strstr(e.msg, "i.safetensors"), "%s", e.msg);
}

/* ---- writer errors ------------------------------------------------------------------- */

TestSuite(st_writer, .init = st_dir_setup, .fini = st_dir_teardown);

static int st_write_one(struct st_writer *w, const char *name, struct hs_err *e)
{
    hs_err_clear(e);
    int rc = st_writer_write(w, st_path(name), e);
    st_writer_free(w);
    return rc;
}

Test(st_writer, bad_arguments_fail_at_write)
{
    float d[8] = { 0 };
    int64_t s2[] = { 2, 4 }, s5[] = { 1, 1, 1, 1, 8 }, s0[] = { 0, 8 }, sn[] = { -2, 4 };
    struct hs_err e;
    struct st_writer *w;

    w = st_writer_new();
    st_writer_add(w, "q", DTYPE_Q8_0, 1, (int64_t[]){ 32 }, d, 34);
    cr_assert_eq(st_write_one(w, "a", &e), HS_ERR_UNSUPPORTED, "%s", e.msg);
    cr_assert(strstr(e.msg, "'q'") && strstr(e.msg, "q8_0"), "%s", e.msg);

    w = st_writer_new();
    st_writer_add(w, "t", DTYPE_F32, 2, s2, d, 31);
    cr_assert_eq(st_write_one(w, "a", &e), HS_ERR_INVALID);
    cr_assert(strstr(e.msg, "31") && strstr(e.msg, "32"), "%s", e.msg);

    w = st_writer_new();
    st_writer_add(w, "t", DTYPE_F32, 5, s5, d, 32);
    cr_assert_eq(st_write_one(w, "a", &e), HS_ERR_INVALID);

    w = st_writer_new();
    st_writer_add(w, "t", DTYPE_F32, 2, s0, d, 0);
    cr_assert_eq(st_write_one(w, "a", &e), HS_ERR_INVALID);

    w = st_writer_new();
    st_writer_add(w, "t", DTYPE_F32, 2, sn, d, 32);
    cr_assert_eq(st_write_one(w, "a", &e), HS_ERR_INVALID);

    w = st_writer_new();
    st_writer_add(w, "__metadata__", DTYPE_F32, 2, s2, d, 32);
    cr_assert_eq(st_write_one(w, "a", &e), HS_ERR_INVALID);

    w = st_writer_new();
    st_writer_add(w, "", DTYPE_F32, 2, s2, d, 32);
    cr_assert_eq(st_write_one(w, "a", &e), HS_ERR_INVALID);

    w = st_writer_new();
    st_writer_add(w, "t", DTYPE_F32, 2, s2, d, 32);
    st_writer_add(w, "u", DTYPE_F32, 2, s2, d, 32);
    st_writer_add(w, "t", DTYPE_F32, 2, s2, d, 32);
    cr_assert_eq(st_write_one(w, "a", &e), HS_ERR_INVALID);
    cr_assert(strstr(e.msg, "'t' added twice"), "%s", e.msg);

    cr_assert(!sys_path_exists(st_path("a")), "nothing is written after a bad argument");
    st_writer_free(NULL);
}

Test(st_writer, metadata_replace_and_remove)
{
    float d = 1.0f;
    struct st_writer *w = st_writer_new();
    st_writer_set_metadata(w, "k", "a");
    st_writer_set_metadata(w, "j", "c");
    st_writer_set_metadata(w, "k", "b");
    st_writer_set_metadata(w, "j", NULL);
    st_writer_set_metadata(w, "gone", NULL);
    st_writer_add(w, "s", DTYPE_F32, 0, NULL, &d, 4);
    struct hs_err e;
    cr_assert_eq(st_write_one(w, "m.safetensors", &e), HS_OK, "%s", e.msg);
    size_t n;
    uint8_t *f = st_slurp(st_path("m.safetensors"), &n);
    cr_assert(memcmp(f + 8, "{\"__metadata__\":{\"k\":\"b\"},\"s\":", 30) == 0, "%s", (char *)f + 8);
    hs_free(f);
    struct tensor_set *ts;
    cr_assert_eq(safetensors_open(st_path("m.safetensors"), &ts, &e), HS_OK, "%s", e.msg);
    cr_assert_str_eq(safetensors_metadata(ts, "k"), "b");
    cr_assert_null(safetensors_metadata(ts, "j"));
    tensor_set_free(ts);
}

/* A failing disk: the destination keeps its old bytes and no temp file is left. */
Test(st_writer, io_failures_leave_destination_untouched)
{
    float d[4] = { 1, 2, 3, 4 };
    int64_t s[] = { 4 };
    const enum sys_io_op ops[] = { SYS_IO_OPEN, SYS_IO_PWRITE, SYS_IO_FSYNC, SYS_IO_CLOSE, SYS_IO_RENAME };
    st_put(st_path("w.safetensors"), "old", 3);
    for (size_t i = 0; i < HS_ARRAY_LEN(ops); i++) {
        struct st_writer *w = st_writer_new();
        st_writer_add(w, "t", DTYPE_F32, 1, s, d, sizeof d);
        st_writer_add(w, "u", DTYPE_F32, 1, s, d, sizeof d);
        /* the second pwrite is a tensor's data: the header went out already */
        sys_io_fault_set(ops[i], ops[i] == SYS_IO_PWRITE ? 2 : 1, EIO, false);
        struct hs_err e;
        cr_assert_eq(st_write_one(w, "w.safetensors", &e), HS_ERR_IO, "op %s", sys_io_op_name(ops[i]));
        sys_io_fault_clear_all();
        cr_assert(strstr(e.msg, "w.safetensors"), "%s", e.msg);
        size_t n;
        uint8_t *f = st_slurp(st_path("w.safetensors"), &n);
        cr_assert(n == 3 && memcmp(f, "old", 3) == 0, "op %s", sys_io_op_name(ops[i]));
        hs_free(f);
        cr_assert(!st_dir_has_tmp(), "op %s left a temp file", sys_io_op_name(ops[i]));
    }
    struct st_writer *w = st_writer_new();
    st_writer_add(w, "t", DTYPE_F32, 1, s, d, sizeof d);
    struct hs_err e;
    cr_assert_eq(st_write_one(w, "no/such/dir.safetensors", &e), HS_ERR_IO);
}

/* ---- sharded sets ---------------------------------------------------------------------- */

TestSuite(st_shard, .init = st_dir_setup, .fini = st_dir_teardown);

static float st_shard_data[3][6];

/* Three shards: s1 {a, b}, s2 {c}, s3 {d, e}; extra is one more tensor put in shard s3. */
static void st_shard_write(const char *extra_in_s3, const char *skip)
{
    const char *names[3][2] = { { "a", "b" }, { "c", NULL }, { "d", "e" } };
    int64_t s[] = { 2, 3 };
    for (int k = 0; k < 3; k++) {
        for (int i = 0; i < 6; i++) st_shard_data[k][i] = (float)(k * 10 + i);
        struct st_writer *w = st_writer_new();
        if (k == 0) st_writer_set_metadata(w, "shard", "one");
        for (int j = 0; j < 2; j++)
            if (names[k][j] && !(skip && strcmp(skip, names[k][j]) == 0))
                st_writer_add(w, names[k][j], DTYPE_F32, 2, s, st_shard_data[k], sizeof st_shard_data[k]);
        if (k == 2 && extra_in_s3) st_writer_add(w, extra_in_s3, DTYPE_F32, 2, s, st_shard_data[k], sizeof st_shard_data[k]);
        char fn[64];
        snprintf(fn, sizeof fn, "model-%05d-of-00003.safetensors", k + 1);
        struct hs_err e;
        hs_err_clear(&e);
        cr_assert_eq(st_writer_write(w, st_path(fn), &e), HS_OK, "%s", e.msg);
        st_writer_free(w);
    }
}

#define S1 "model-00001-of-00003.safetensors"
#define S2 "model-00002-of-00003.safetensors"
#define S3 "model-00003-of-00003.safetensors"
#define ST_GOOD_MAP "\"a\":\"" S1 "\",\"c\":\"" S2 "\",\"b\":\"" S1 "\",\"d\":\"" S3 "\",\"e\":\"" S3 "\""

static void st_index_put(const char *json)
{
    st_put(st_path("model.safetensors.index.json"), json, strlen(json));
}

static int st_open_index(struct tensor_set **ts, struct hs_err *e)
{
    hs_err_clear(e);
    *ts = NULL;
    return safetensors_open(st_path("model.safetensors.index.json"), ts, e);
}

static void st_check_good_set(struct tensor_set *ts)
{
    cr_assert_eq(tensor_set_n_files(ts), 3, "each shard mapped once");
    cr_assert_eq(tensor_set_count(ts), 5);
    const char *names = "abcde";
    const int file_of[5] = { 0, 0, 1, 2, 2 }, shard_of[5] = { 0, 0, 1, 2, 2 };
    for (int i = 0; i < 5; i++) {
        char nm[2] = { names[i], 0 };
        const struct tensor_view *v = tensor_set_find(ts, nm);
        cr_assert_not_null(v, "%s", nm);
        cr_assert_eq(v->file_index, file_of[i], "%s", nm);
        cr_assert(memcmp(v->data, st_shard_data[shard_of[i]], 24) == 0, "%s", nm);
    }
    cr_assert(strstr(tensor_set_file_path(ts, 0), S1));
    cr_assert(strstr(tensor_set_file_path(ts, 1), S2));
    cr_assert(strstr(tensor_set_file_path(ts, 2), S3));
    cr_assert_str_eq(safetensors_metadata(ts, "shard"), "one", "metadata of file 0");
}

Test(st_shard, three_shards_by_index_and_by_directory)
{
    st_shard_write(NULL, NULL);
    st_index_put("{\"metadata\":{\"total_size\":120},\"weight_map\":{" ST_GOOD_MAP "}}");
    struct tensor_set *ts;
    struct hs_err e;
    cr_assert_eq(st_open_index(&ts, &e), HS_OK, "%s", e.msg);
    st_check_good_set(ts);
    tensor_set_free(ts);
    /* a directory prefers the index over a model.safetensors beside it */
    float x = 5;
    struct st_writer *w = st_writer_new();
    st_writer_add(w, "only_single", DTYPE_F32, 0, NULL, &x, 4);
    cr_assert_eq(st_writer_write(w, st_path("model.safetensors"), &e), HS_OK, "%s", e.msg);
    st_writer_free(w);
    cr_assert_eq(safetensors_open(st_dir, &ts, &e), HS_OK, "%s", e.msg);
    st_check_good_set(ts);
    tensor_set_free(ts);
    /* without the index the directory's model.safetensors is used */
    cr_assert_eq(unlink(st_path("model.safetensors.index.json")), 0);
    cr_assert_eq(safetensors_open(st_dir, &ts, &e), HS_OK, "%s", e.msg);
    cr_assert_eq(tensor_set_count(ts), 1);
    cr_assert_not_null(tensor_set_find(ts, "only_single"));
    tensor_set_free(ts);
}

Test(st_shard, directory_without_weights)
{
    struct tensor_set *ts = (void *)1;
    struct hs_err e;
    hs_err_clear(&e);
    cr_assert_eq(safetensors_open(st_dir, &ts, &e), HS_ERR_NOT_FOUND);
    cr_assert_null(ts);
    cr_assert(strstr(e.msg, "model.safetensors.index.json and model.safetensors") && strstr(e.msg, st_dir),
              "%s", e.msg);
}

Test(st_shard, missing_shard_file)
{
    st_shard_write(NULL, NULL);
    cr_assert_eq(unlink(st_path(S2)), 0);
    st_index_put("{\"weight_map\":{" ST_GOOD_MAP "}}");
    struct tensor_set *ts;
    struct hs_err e;
    cr_assert_neq(st_open_index(&ts, &e), HS_OK);
    cr_assert_null(ts);
    cr_assert(strstr(e.msg, S2) && strstr(e.msg, "index.json"), "%s", e.msg);
}

Test(st_shard, tensor_missing_from_its_shard)
{
    st_shard_write(NULL, "d");
    st_index_put("{\"weight_map\":{" ST_GOOD_MAP "}}");
    struct tensor_set *ts;
    struct hs_err e;
    cr_assert_eq(st_open_index(&ts, &e), HS_ERR_FORMAT);
    cr_assert(strstr(e.msg, "'d'") && strstr(e.msg, S3) && strstr(e.msg, "does not hold"), "%s", e.msg);
}

Test(st_shard, tensor_in_shard_but_not_in_map)
{
    st_shard_write("stray", NULL);
    st_index_put("{\"weight_map\":{" ST_GOOD_MAP "}}");
    struct tensor_set *ts;
    struct hs_err e;
    cr_assert_eq(st_open_index(&ts, &e), HS_ERR_FORMAT);
    cr_assert(strstr(e.msg, "'stray'") && strstr(e.msg, "not in weight_map"), "%s", e.msg);
}

Test(st_shard, tensor_mapped_to_the_wrong_shard)
{
    st_shard_write(NULL, NULL);
    st_index_put("{\"weight_map\":{\"a\":\"" S1 "\",\"b\":\"" S2 "\",\"c\":\"" S2 "\",\"d\":\"" S3 "\",\"e\":\"" S3 "\"}}");
    struct tensor_set *ts;
    struct hs_err e;
    cr_assert_eq(st_open_index(&ts, &e), HS_ERR_FORMAT);
    cr_assert(strstr(e.msg, "'b'") && strstr(e.msg, "weight_map puts it in '" S2 "'"), "%s", e.msg);
}

Test(st_shard, same_tensor_in_two_shards)
{
    st_shard_write("a", NULL);
    st_index_put("{\"weight_map\":{" ST_GOOD_MAP "}}");
    struct tensor_set *ts;
    struct hs_err e;
    cr_assert_eq(st_open_index(&ts, &e), HS_ERR_FORMAT);
    cr_assert(strstr(e.msg, "'a'"), "%s", e.msg);
}

Test(st_shard, path_traversal_and_bad_names)
{
    st_shard_write(NULL, NULL);
    mkdir(st_path("sub"), 0755);
    struct strbuf sb;
    strbuf_init(&sb);
    st_compose(&sb, "{}", 0);
    st_put(st_path("sub/x.safetensors"), sb.buf, sb.len);
    strbuf_free(&sb);
    const char *bad[] = { "../" S1, "sub/x.safetensors", "..", ".", "", "/etc/passwd", "a..b", S1 "/" };
    for (size_t i = 0; i < HS_ARRAY_LEN(bad); i++) {
        char json[512];
        snprintf(json, sizeof json, "{\"weight_map\":{\"a\":\"%s\"}}", bad[i]);
        st_index_put(json);
        struct tensor_set *ts;
        struct hs_err e;
        cr_assert_eq(st_open_index(&ts, &e), HS_ERR_FORMAT, "'%s': %s", bad[i], e.msg);
        cr_assert(strstr(e.msg, "not a plain file name") && strstr(e.msg, "'a'"), "%s", e.msg);
    }
}

Test(st_shard, malformed_indexes)
{
    st_shard_write(NULL, NULL);
    const struct { const char *json; const char *want; } cases[] = {
        { "[]", "not a JSON object" },
        { "{}", "'weight_map' is missing" },
        { "{\"weight_map\":[]}", "'weight_map' is an array" },
        { "{\"weight_map\":{}}", "empty" },
        { "{\"weight_map\":{\"a\":1}}", "weight_map['a'] is an integer" },
        { "{\"weight_map\":{\"a\":\"" S1 "\",\"a\":\"" S1 "\"}}", "duplicate" },
        { "{\"weight_map\":{\"a\":\"" S1 "\"", "line 1" },
        { "", "JSON" },
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(cases); i++) {
        st_index_put(cases[i].json);
        struct tensor_set *ts;
        struct hs_err e;
        cr_assert_eq(st_open_index(&ts, &e), HS_ERR_FORMAT, "case %zu: %s", i, e.msg);
        cr_assert(strstr(e.msg, cases[i].want) && strstr(e.msg, "index.json"), "case %zu: %s", i, e.msg);
    }
    struct tensor_set *ts;
    struct hs_err e;
    cr_assert_eq(unlink(st_path("model.safetensors.index.json")), 0);
    cr_assert_neq(st_open_index(&ts, &e), HS_OK);
}

/* ---- hostile files --------------------------------------------------------------------- */

TestSuite(st_hostile, .init = st_dir_setup, .fini = st_dir_teardown);

/* Every proper prefix of a valid file fails cleanly (header bytes, data boundaries, all). */
Test(st_hostile, truncated_at_every_byte)
{
    float a[6] = { 1, 2, 3, 4, 5, 6 };
    uint16_t b[3] = { 1, 2, 3 };
    int64_t s[] = { 2, 3 }, s3[] = { 3 };
    struct st_writer *w = st_writer_new();
    st_writer_set_metadata(w, "format", "pt");
    st_writer_add(w, "a", DTYPE_F32, 2, s, a, sizeof a);
    st_writer_add(w, "b", DTYPE_BF16, 1, s3, b, sizeof b);
    struct hs_err e;
    hs_err_clear(&e);
    cr_assert_eq(st_writer_write(w, st_path("full"), &e), HS_OK, "%s", e.msg);
    st_writer_free(w);
    size_t n;
    uint8_t *full = st_slurp(st_path("full"), &n);
    for (size_t len = 0; len < n; len++) {
        st_put(st_path("cut"), full, len);
        struct tensor_set *ts = (void *)1;
        hs_err_clear(&e);
        int rc = safetensors_open(st_path("cut"), &ts, &e);
        cr_assert_eq(rc, HS_ERR_FORMAT, "cut at %zu of %zu: rc %d %s", len, n, rc, e.msg);
        cr_assert_null(ts);
        cr_assert(strstr(e.msg, "cut"), "%s", e.msg);
    }
    st_put(st_path("cut"), full, n);
    struct tensor_set *ts;
    cr_assert_eq(safetensors_open(st_path("cut"), &ts, &e), HS_OK, "%s", e.msg);
    tensor_set_free(ts);
    hs_free(full);
}

Test(st_hostile, length_prefix)
{
    const char *h = "{}";
    uint8_t buf[16];
    const uint64_t lens[] = { 0, 1, 3, UINT64_MAX, UINT64_MAX - 7, (UINT64_C(100) << 20) + 1, UINT64_C(1) << 63 };
    for (size_t i = 0; i < HS_ARRAY_LEN(lens); i++) {
        for (int b = 0; b < 8; b++) buf[b] = (uint8_t)(lens[i] >> (8 * b));
        memcpy(buf + 8, h, 2);
        st_put(st_path("p"), buf, 10);
        struct tensor_set *ts;
        struct hs_err e;
        hs_err_clear(&e);
        cr_assert_eq(safetensors_open(st_path("p"), &ts, &e), HS_ERR_FORMAT, "len %" PRIu64 ": %s", lens[i], e.msg);
    }
    /* a header over 100 MiB inside a file that is big enough (sparse) hits the limit */
    int fd = open(st_path("big"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(fd >= 0);
    uint64_t n = (UINT64_C(100) << 20) + 1;
    for (int b = 0; b < 8; b++) buf[b] = (uint8_t)(n >> (8 * b));
    cr_assert_eq(write(fd, buf, 8), 8);
    cr_assert_eq(ftruncate(fd, (off_t)(n + 8)), 0);
    close(fd);
    struct tensor_set *ts;
    struct hs_err e;
    hs_err_clear(&e);
    cr_assert_eq(safetensors_open(st_path("big"), &ts, &e), HS_ERR_LIMIT, "%s", e.msg);
    cr_assert(strstr(e.msg, "limit"), "%s", e.msg);
}

struct st_bad {
    const char *header;
    size_t data_len;
    int code;
    const char *want; /* a substring of the message */
};

#define T1(body) "{\"t\":" body "}"
#define F32_2 "\"dtype\":\"F32\",\"shape\":[2]"

static const struct st_bad st_bad_cases[] = {
    /* JSON */
    { "{", 0, HS_ERR_FORMAT, "line 1" },
    { "not json", 0, HS_ERR_FORMAT, "header JSON" },
    { "[]", 0, HS_ERR_FORMAT, "not a JSON object" },
    { "\"x\"", 0, HS_ERR_FORMAT, "header JSON" },
    { "{} x", 0, HS_ERR_FORMAT, "header JSON" },
    { "{\"t\":{" F32_2 ",\"data_offsets\":[0,8]},\"t\":{" F32_2 ",\"data_offsets\":[0,8]}}", 8, HS_ERR_FORMAT, "duplicate" },
    { T1("{" F32_2 ",\"shape\":[2],\"data_offsets\":[0,8]}"), 8, HS_ERR_FORMAT, "duplicate" },
    { "{\"t\\u0000x\":{" F32_2 ",\"data_offsets\":[0,8]}}", 8, HS_ERR_FORMAT, "header JSON" },
    /* metadata */
    { "{\"__metadata__\":[]}", 0, HS_ERR_FORMAT, "__metadata__ is an array" },
    { "{\"__metadata__\":\"x\"}", 0, HS_ERR_FORMAT, "__metadata__ is a string" },
    { "{\"__metadata__\":{\"k\":1}}", 0, HS_ERR_FORMAT, "key 'k' is an integer" },
    { "{\"__metadata__\":{\"k\":null}}", 0, HS_ERR_FORMAT, "key 'k' is null" },
    { "{\"__metadata__\":{\"k\":{}}}", 0, HS_ERR_FORMAT, "key 'k' is an object" },
    /* entry structure */
    { T1("[]"), 0, HS_ERR_FORMAT, "'t': entry is an array" },
    { T1("7"), 0, HS_ERR_FORMAT, "'t': entry is an integer" },
    { T1("{" F32_2 ",\"data_offsets\":[0,8],\"extra\":1}"), 8, HS_ERR_FORMAT, "'t': unexpected key 'extra'" },
    { T1("{\"shape\":[2],\"data_offsets\":[0,8]}"), 8, HS_ERR_FORMAT, "'t': missing 'dtype'" },
    { T1("{\"dtype\":\"F32\",\"data_offsets\":[0,8]}"), 8, HS_ERR_FORMAT, "'t': missing 'shape'" },
    { T1("{" F32_2 "}"), 8, HS_ERR_FORMAT, "'t': missing 'data_offsets'" },
    { "{\"\":{" F32_2 ",\"data_offsets\":[0,8]}}", 8, HS_ERR_FORMAT, "empty" },
    /* dtype */
    { T1("{\"dtype\":5,\"shape\":[2],\"data_offsets\":[0,8]}"), 8, HS_ERR_FORMAT, "'t': dtype is an integer" },
    { T1("{\"dtype\":null,\"shape\":[2],\"data_offsets\":[0,8]}"), 8, HS_ERR_FORMAT, "dtype is null" },
    { T1("{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}"), 8, HS_ERR_FORMAT, "'t': unknown dtype 'F33'" },
    { T1("{\"dtype\":\"f32\",\"shape\":[2],\"data_offsets\":[0,8]}"), 8, HS_ERR_FORMAT, "unknown dtype 'f32'" },
    { T1("{\"dtype\":\"\",\"shape\":[2],\"data_offsets\":[0,8]}"), 8, HS_ERR_FORMAT, "unknown dtype ''" },
    { T1("{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}"), 8, HS_ERR_UNSUPPORTED, "'t': dtype F64" },
    { T1("{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]}"), 8, HS_ERR_UNSUPPORTED, "'t': dtype U8" },
    { T1("{\"dtype\":\"BOOL\",\"shape\":[8],\"data_offsets\":[0,8]}"), 8, HS_ERR_UNSUPPORTED, "'t': dtype BOOL" },
    { T1("{\"dtype\":\"F8_E4M3\",\"shape\":[8],\"data_offsets\":[0,8]}"), 8, HS_ERR_UNSUPPORTED, "'t': dtype F8_E4M3" },
    { T1("{\"dtype\":\"I32\",\"shape\":[2],\"data_offsets\":[0,8]}"), 8, HS_ERR_UNSUPPORTED, "'t': dtype I32" },
    /* shape */
    { T1("{\"dtype\":\"F32\",\"shape\":\"2\",\"data_offsets\":[0,8]}"), 8, HS_ERR_FORMAT, "'t': shape is a string" },
    { T1("{\"dtype\":\"F32\",\"shape\":{},\"data_offsets\":[0,8]}"), 8, HS_ERR_FORMAT, "'t': shape is an object" },
    { T1("{\"dtype\":\"F32\",\"shape\":[1,1,1,1,2],\"data_offsets\":[0,8]}"), 8, HS_ERR_FORMAT, "'t': 5 dimensions" },
    { T1("{\"dtype\":\"F32\",\"shape\":[2,0],\"data_offsets\":[0,0]}"), 8, HS_ERR_FORMAT, "'t': shape[1] is 0" },
    { T1("{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}"), 8, HS_ERR_FORMAT, "'t': shape[0] is not a non-negative" },
    { T1("{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}"), 8, HS_ERR_FORMAT, "'t': shape[0] is not a non-negative" },
    { T1("{\"dtype\":\"F32\",\"shape\":[[2]],\"data_offsets\":[0,8]}"), 8, HS_ERR_FORMAT, "shape[0]" },
    { T1("{\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]}"), 8, HS_ERR_FORMAT, "shape[0]" },
    { T1("{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,8]}"), 8, HS_ERR_FORMAT, "'t': the byte size of its shape overflows" },
    { T1("{\"dtype\":\"F32\",\"shape\":[9223372036854775807,2],\"data_offsets\":[0,8]}"), 8, HS_ERR_FORMAT, "overflows" },
    { T1("{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,8]}"), 8, HS_ERR_FORMAT, "overflows" },
    { T1("{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,8]}"), 8, HS_ERR_FORMAT, "header JSON" },
    { T1("{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}"), 8, HS_ERR_FORMAT, "'t': data_offsets span 8 bytes but a F32 tensor of its shape needs 12" },
    { T1("{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[0,8]}"), 8, HS_ERR_FORMAT, "needs 4" },
    /* data_offsets */
    { T1("{" F32_2 ",\"data_offsets\":[0,16]}"), 8, HS_ERR_FORMAT, "'t': data ends at 16, past the 8 data bytes" },
    { T1("{" F32_2 ",\"data_offsets\":[8,0]}"), 8, HS_ERR_FORMAT, "'t': data_offsets begin 8 is after end 0" },
    { T1("{" F32_2 ",\"data_offsets\":[0]}"), 8, HS_ERR_FORMAT, "'t': data_offsets must be" },
    { T1("{" F32_2 ",\"data_offsets\":[0,8,16]}"), 8, HS_ERR_FORMAT, "data_offsets must be" },
    { T1("{" F32_2 ",\"data_offsets\":[-8,0]}"), 8, HS_ERR_FORMAT, "data_offsets must be" },
    { T1("{" F32_2 ",\"data_offsets\":[0,8.0]}"), 8, HS_ERR_FORMAT, "data_offsets must be" },
    { T1("{" F32_2 ",\"data_offsets\":{}}"), 8, HS_ERR_FORMAT, "data_offsets must be" },
    { T1("{" F32_2 ",\"data_offsets\":\"0,8\"}"), 8, HS_ERR_FORMAT, "data_offsets must be" },
    { T1("{" F32_2 ",\"data_offsets\":[9223372036854775800,9223372036854775807]}"), 8, HS_ERR_FORMAT, "past the 8 data bytes" },
    { T1("{" F32_2 ",\"data_offsets\":[18446744073709551608,18446744073709551615]}"), 8, HS_ERR_FORMAT, "header JSON" },
    /* overlaps */
    { "{\"a\":{" F32_2 ",\"data_offsets\":[0,8]},\"b\":{" F32_2 ",\"data_offsets\":[4,12]}}", 12, HS_ERR_FORMAT, "overlap" },
    { "{\"a\":{" F32_2 ",\"data_offsets\":[0,8]},\"b\":{" F32_2 ",\"data_offsets\":[0,8]}}", 8, HS_ERR_FORMAT, "overlap" },
    { "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},\"b\":{" F32_2 ",\"data_offsets\":[4,12]}}", 16, HS_ERR_FORMAT, "overlap" },
};

Test(st_hostile, bad_headers)
{
    for (size_t i = 0; i < HS_ARRAY_LEN(st_bad_cases); i++) {
        const struct st_bad *c = &st_bad_cases[i];
        struct tensor_set *ts = (void *)1;
        struct hs_err e;
        int rc = st_open_header("bad.safetensors", c->header, c->data_len, &ts, &e);
        cr_expect_eq(rc, c->code, "case %zu (%s): rc %d: %s", i, c->header, rc, e.msg);
        cr_expect_null(ts, "case %zu", i);
        cr_expect(strstr(e.msg, c->want) != NULL, "case %zu: want '%s' in: %s", i, c->want, e.msg);
        cr_expect(strstr(e.msg, "bad.safetensors") != NULL, "case %zu: the file is named: %s", i, e.msg);
        if (rc == HS_OK) tensor_set_free(ts);
    }
}

/* The same entries are fine when well-formed: the table above fails for its one reason. */
Test(st_hostile, controls_are_valid)
{
    const char *good[] = {
        T1("{" F32_2 ",\"data_offsets\":[0,8]}"),
        T1("{\"data_offsets\":[4,8],\"shape\":[1,1,2,1],\"dtype\":\"BF16\"}"),
        "{\"a\":{" F32_2 ",\"data_offsets\":[0,8]},\"b\":{" F32_2 ",\"data_offsets\":[8,16]}}",
        "{\"__metadata__\":{},\"s\":{\"dtype\":\"F16\",\"shape\":[],\"data_offsets\":[6,8]}}",
        "{\"t\":{" F32_2 ",\"data_offsets\":[0,8]}}      ",
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(good); i++) {
        struct tensor_set *ts;
        struct hs_err e;
        cr_assert_eq(st_open_header("ok.safetensors", good[i], 16, &ts, &e), HS_OK, "case %zu: %s", i, e.msg);
        tensor_set_free(ts);
    }
}

/* Absurd counts: a shape with 10^5 entries, 10^4 tensors, a 1 MiB tensor name. */
Test(st_hostile, absurd_counts)
{
    struct strbuf h;
    strbuf_init(&h);
    strbuf_puts(&h, "{\"t\":{\"dtype\":\"F32\",\"data_offsets\":[0,4],\"shape\":[");
    for (int i = 0; i < 100000; i++) strbuf_puts(&h, i ? ",1" : "1");
    strbuf_puts(&h, "]}}");
    struct tensor_set *ts;
    struct hs_err e;
    cr_assert_eq(st_open_header("c.safetensors", h.buf, 4, &ts, &e), HS_ERR_FORMAT);
    cr_assert(strstr(e.msg, "100000 dimensions"), "%s", e.msg);

    strbuf_reset(&h);
    strbuf_putc(&h, '{');
    for (int i = 0; i < 10000; i++)
        strbuf_printf(&h, "%s\"t%d\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[%d,%d]}", i ? "," : "", i, 2 * i, 2 * i + 2);
    strbuf_putc(&h, '}');
    cr_assert_eq(st_open_header("c.safetensors", h.buf, 20000, &ts, &e), HS_OK, "%s", e.msg);
    cr_assert_eq(tensor_set_count(ts), 10000);
    cr_assert_eq(tensor_set_find(ts, "t9999")->file_offset, 8 + h.len + 19998);
    tensor_set_free(ts);
    /* ...and the same with one offset past the data: fails at that tensor */
    strbuf_reset(&h);
    strbuf_putc(&h, '{');
    for (int i = 0; i < 10000; i++)
        strbuf_printf(&h, "%s\"t%d\":{\"dtype\":\"F16\",\"shape\":[1],\"data_offsets\":[%d,%d]}", i ? "," : "", i, 2 * i, 2 * i + 2);
    strbuf_putc(&h, '}');
    cr_assert_eq(st_open_header("c.safetensors", h.buf, 19999, &ts, &e), HS_ERR_FORMAT);
    cr_assert(strstr(e.msg, "'t9999'"), "%s", e.msg);

    strbuf_reset(&h);
    strbuf_puts(&h, "{\"");
    for (int i = 0; i < (1 << 20); i++) strbuf_putc(&h, 'n');
    strbuf_puts(&h, "\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,4]}}");
    cr_assert_eq(st_open_header("c.safetensors", h.buf, 4, &ts, &e), HS_ERR_FORMAT);
    cr_assert(strlen(e.msg) < HS_ERR_MSG_MAX && strstr(e.msg, "nnnn"), "%s", e.msg);
    strbuf_free(&h);
}

Test(st_hostile, not_a_file)
{
    struct tensor_set *ts = (void *)1;
    struct hs_err e;
    hs_err_clear(&e);
    cr_assert_eq(safetensors_open(st_path("absent.safetensors"), &ts, &e), HS_ERR_IO);
    cr_assert_null(ts);
    cr_assert(strstr(e.msg, "absent.safetensors"), "%s", e.msg);
    st_put(st_path("empty.safetensors"), "", 0);
    hs_err_clear(&e);
    cr_assert_eq(safetensors_open(st_path("empty.safetensors"), &ts, &e), HS_ERR_FORMAT);
    cr_assert(strstr(e.msg, "too short"), "%s", e.msg);
    cr_assert_null(safetensors_metadata(NULL, "x"));
}
