/* gguf_write.c — GGUF v3 writer (layout: see the design note in gguf.c).
 *
 * Keys and tensors are kept in call order; metadata values are deep copies, tensor data is
 * borrowed. gguf_writer_write builds the header, key/values and tensor infos in memory (they
 * are small), then streams each tensor straight from the caller's buffer into a temp file
 * beside the destination: pwrite, zero padding to the alignment, fsync, close, rename,
 * fsync of the directory. Nothing depends on time or addresses, so the same calls give the
 * same bytes.
 *
 * Invariants:
 *   1. Misuse (bad key, bad value, bad shape, byte count that does not match the shape,
 *      duplicate tensor, bad alignment) is recorded as the writer's first error and
 *      returned by gguf_writer_write, which then writes nothing.
 *   2. Setting a key that is already set replaces its value in place (order unchanged).
 *   3. `general.alignment` is written first, and only when it is not the default 32;
 *      setting it as a key is the same as gguf_writer_set_alignment.
 *   4. Every tensor starts at a multiple of the alignment relative to the data section,
 *      and every tensor (the last included) is followed by zeros up to the alignment.
 *   5. Whatever a writer writes, gguf_open reads back: nesting depth, dimensions and block
 *      sizes are checked against the reader's limits.
 */
#include "format/format_int.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

#define GGUF_VERSION 3
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DEPTH 8
#define GGUF_KEY_ALIGNMENT "general.alignment"

/* dtype -> ggml type id (all our dtypes except U8 have one). */
static const int ggml_type_of[DTYPE_COUNT] = {
    [DTYPE_F32] = 0,   [DTYPE_F16] = 1,   [DTYPE_BF16] = 30, [DTYPE_Q8_0] = 8,
    [DTYPE_F64] = 28,  [DTYPE_I8] = 24,   [DTYPE_I16] = 25,  [DTYPE_I32] = 26,
    [DTYPE_I64] = 27,  [DTYPE_U8] = -1,   [DTYPE_Q4_0] = 2,  [DTYPE_Q4_1] = 3,
    [DTYPE_Q5_0] = 6,  [DTYPE_Q5_1] = 7,  [DTYPE_Q8_1] = 9,  [DTYPE_Q2_K] = 10,
    [DTYPE_Q3_K] = 11, [DTYPE_Q4_K] = 12, [DTYPE_Q5_K] = 13, [DTYPE_Q6_K] = 14,
    [DTYPE_Q8_K] = 15, [DTYPE_IQ4_NL] = 20, [DTYPE_IQ4_XS] = 23,
};

/* Encoded size of scalar types; 0 for STRING and ARRAY. */
static const uint8_t scalar_size[GGUF_TYPE_COUNT] = {
    [GGUF_TYPE_UINT8] = 1, [GGUF_TYPE_INT8] = 1, [GGUF_TYPE_UINT16] = 2, [GGUF_TYPE_INT16] = 2,
    [GGUF_TYPE_UINT32] = 4, [GGUF_TYPE_INT32] = 4, [GGUF_TYPE_FLOAT32] = 4, [GGUF_TYPE_BOOL] = 1,
    [GGUF_TYPE_UINT64] = 8, [GGUF_TYPE_INT64] = 8, [GGUF_TYPE_FLOAT64] = 8,
};

struct wkv {
    char *key;
    struct gguf_value val; /* owned: strings and items are the writer's copies */
};

struct gguf_writer {
    uint32_t alignment;
    struct wkv *kvs;
    int n_kv, cap_kv;
    struct wtensor_list tensors;
    struct hs_err err; /* first misuse; reported by gguf_writer_write */
};

struct gguf_writer *gguf_writer_new(void)
{
    struct gguf_writer *w = hs_calloc(1, sizeof *w);
    w->alignment = GGUF_DEFAULT_ALIGNMENT;
    return w;
}

static void wvalue_free(struct gguf_value *v)
{
    if (v->type == GGUF_TYPE_STRING) {
        hs_free((void *)v->v.str.ptr);
    } else if (v->type == GGUF_TYPE_ARRAY) {
        struct gguf_value *items = (struct gguf_value *)v->v.arr.items;
        for (uint64_t i = 0; i < v->v.arr.n; i++) wvalue_free(&items[i]);
        hs_free(items);
    }
    memset(v, 0, sizeof *v);
}

void gguf_writer_free(struct gguf_writer *w)
{
    if (!w) return;
    for (int i = 0; i < w->n_kv; i++) {
        hs_free(w->kvs[i].key);
        wvalue_free(&w->kvs[i].val);
    }
    wtensor_list_free(&w->tensors);
    hs_free(w->kvs);
    hs_free(w);
}

void gguf_writer_set_alignment(struct gguf_writer *w, uint32_t alignment)
{
    if (alignment == 0 || (alignment & (alignment - 1)))
        hs_err_set(&w->err, HS_ERR_INVALID, "alignment %u is not a non-zero power of two", alignment);
    else
        w->alignment = alignment;
}

/* ---- values ---------------------------------------------------------------------------- */

/* Deep-copy src into dst (zeroed first). False, with the writer's error set, when src is
 * not a value the reader would accept. */
static bool value_copy(struct gguf_writer *w, const char *key, struct gguf_value *dst,
                       const struct gguf_value *src, int depth)
{
    memset(dst, 0, sizeof *dst);
    if ((unsigned)src->type >= GGUF_TYPE_COUNT) {
        hs_err_set(&w->err, HS_ERR_INVALID, "key '%s': unknown value type %d", key, (int)src->type);
        return false;
    }
    dst->type = src->type;
    if (src->type == GGUF_TYPE_STRING) {
        if (!src->v.str.ptr && src->v.str.len) {
            hs_err_set(&w->err, HS_ERR_INVALID, "key '%s': string of %" PRIu64 " bytes has no data", key, src->v.str.len);
            return false;
        }
        char *s = hs_malloc((size_t)src->v.str.len);
        if (src->v.str.len) memcpy(s, src->v.str.ptr, (size_t)src->v.str.len);
        dst->v.str.ptr = s;
        dst->v.str.len = src->v.str.len;
        return true;
    }
    if (src->type != GGUF_TYPE_ARRAY) {
        int bits = 8 * scalar_size[src->type];
        bool fits = true;
        if (src->type == GGUF_TYPE_UINT8 || src->type == GGUF_TYPE_UINT16 || src->type == GGUF_TYPE_UINT32)
            fits = src->v.u >> bits == 0;
        else if (src->type == GGUF_TYPE_INT8 || src->type == GGUF_TYPE_INT16 || src->type == GGUF_TYPE_INT32)
            fits = src->v.i >= -(INT64_C(1) << (bits - 1)) && src->v.i < (INT64_C(1) << (bits - 1));
        if (!fits) {
            hs_err_set(&w->err, HS_ERR_INVALID, "key '%s': value does not fit a %s", key, gguf_value_type_name(src->type));
            return false;
        }
        dst->v = src->v;
        if (src->type == GGUF_TYPE_BOOL) dst->v.b = src->v.b ? true : false;
        return true;
    }
    if (depth >= GGUF_MAX_DEPTH) {
        hs_err_set(&w->err, HS_ERR_INVALID, "key '%s': arrays nested deeper than %d", key, GGUF_MAX_DEPTH);
        return false;
    }
    enum gguf_type et = src->v.arr.elem_type;
    uint64_t n = src->v.arr.n;
    if ((unsigned)et >= GGUF_TYPE_COUNT || (n && !src->v.arr.items) || n > SIZE_MAX / sizeof(struct gguf_value)) {
        hs_err_set(&w->err, HS_ERR_INVALID, "key '%s': bad array (element type %d, %" PRIu64 " items)", key, (int)et, n);
        return false;
    }
    dst->v.arr.elem_type = et;
    struct gguf_value *items = hs_calloc((size_t)n, sizeof *items);
    dst->v.arr.items = items;
    for (uint64_t i = 0; i < n; i++) {
        if (src->v.arr.items[i].type != et) {
            hs_err_set(&w->err, HS_ERR_INVALID, "key '%s': item %" PRIu64 " is a %s in an array of %s", key, i,
                       gguf_value_type_name(src->v.arr.items[i].type), gguf_value_type_name(et));
            dst->v.arr.n = i;
            return false;
        }
        dst->v.arr.n = i + 1; /* item i is freed with the array even if its copy fails */
        if (!value_copy(w, key, &items[i], &src->v.arr.items[i], depth + 1)) return false;
    }
    return true;
}

/* Store an owned value under key (replacing an earlier one); takes ownership of *v. */
static void kv_put(struct gguf_writer *w, const char *key, struct gguf_value *v)
{
    if (!key || !*key) {
        hs_err_set(&w->err, HS_ERR_INVALID, "a metadata key is empty");
        wvalue_free(v);
        return;
    }
    if (strcmp(key, GGUF_KEY_ALIGNMENT) == 0) {
        if (v->type == GGUF_TYPE_UINT32 && v->v.u <= UINT32_MAX)
            gguf_writer_set_alignment(w, (uint32_t)v->v.u);
        else
            hs_err_set(&w->err, HS_ERR_INVALID, "key '%s' must be a uint32, not a %s", key, gguf_value_type_name(v->type));
        wvalue_free(v);
        return;
    }
    for (int i = 0; i < w->n_kv; i++) {
        if (strcmp(w->kvs[i].key, key) == 0) {
            wvalue_free(&w->kvs[i].val);
            w->kvs[i].val = *v;
            return;
        }
    }
    if (w->n_kv == w->cap_kv) {
        w->cap_kv = w->cap_kv ? w->cap_kv * 2 : 16;
        w->kvs = hs_realloc(w->kvs, sizeof *w->kvs * (size_t)w->cap_kv);
    }
    w->kvs[w->n_kv].key = hs_strdup(key);
    w->kvs[w->n_kv].val = *v;
    w->n_kv++;
}

void gguf_writer_set_value(struct gguf_writer *w, const char *key, const struct gguf_value *v)
{
    struct gguf_value copy;
    if (!value_copy(w, key ? key : "?", &copy, v, 0)) {
        wvalue_free(&copy);
        return;
    }
    kv_put(w, key, &copy);
}

static void set_scalar(struct gguf_writer *w, const char *key, enum gguf_type t, uint64_t u, int64_t i, double f,
                       bool b)
{
    struct gguf_value v;
    memset(&v, 0, sizeof v);
    v.type = t;
    if (t == GGUF_TYPE_UINT32 || t == GGUF_TYPE_UINT64) v.v.u = u;
    else if (t == GGUF_TYPE_INT32) v.v.i = i;
    else if (t == GGUF_TYPE_FLOAT32) v.v.f = f;
    else v.v.b = b;
    kv_put(w, key, &v);
}

void gguf_writer_set_u32(struct gguf_writer *w, const char *key, uint32_t v) { set_scalar(w, key, GGUF_TYPE_UINT32, v, 0, 0, false); }
void gguf_writer_set_i32(struct gguf_writer *w, const char *key, int32_t v) { set_scalar(w, key, GGUF_TYPE_INT32, 0, v, 0, false); }
void gguf_writer_set_u64(struct gguf_writer *w, const char *key, uint64_t v) { set_scalar(w, key, GGUF_TYPE_UINT64, v, 0, 0, false); }
void gguf_writer_set_f32(struct gguf_writer *w, const char *key, float v) { set_scalar(w, key, GGUF_TYPE_FLOAT32, 0, 0, v, false); }
void gguf_writer_set_bool(struct gguf_writer *w, const char *key, bool v) { set_scalar(w, key, GGUF_TYPE_BOOL, 0, 0, 0, v); }

void gguf_writer_set_str(struct gguf_writer *w, const char *key, const char *s)
{
    struct gguf_value v = { .type = GGUF_TYPE_STRING };
    v.v.str.ptr = s;
    v.v.str.len = s ? strlen(s) : 0;
    gguf_writer_set_value(w, key, &v);
}

/* Arrays built from plain C arrays: item values are filled in place, then kv_put takes
 * the result (no second copy). */
static struct gguf_value *arr_new(struct gguf_value *v, enum gguf_type et, uint64_t n)
{
    memset(v, 0, sizeof *v);
    v->type = GGUF_TYPE_ARRAY;
    v->v.arr.elem_type = et;
    v->v.arr.n = n;
    struct gguf_value *items = hs_calloc((size_t)n, sizeof *items);
    v->v.arr.items = items;
    for (uint64_t i = 0; i < n; i++) items[i].type = et;
    return items;
}

void gguf_writer_set_arr_str(struct gguf_writer *w, const char *key, const char *const *s, uint64_t n)
{
    struct gguf_value v;
    struct gguf_value *items = arr_new(&v, GGUF_TYPE_STRING, n);
    for (uint64_t i = 0; i < n; i++) {
        const char *e = s[i] ? s[i] : "";
        items[i].v.str.len = strlen(e);
        items[i].v.str.ptr = hs_strndup(e, (size_t)items[i].v.str.len);
    }
    kv_put(w, key, &v);
}

void gguf_writer_set_arr_i32(struct gguf_writer *w, const char *key, const int32_t *a, uint64_t n)
{
    struct gguf_value v;
    struct gguf_value *items = arr_new(&v, GGUF_TYPE_INT32, n);
    for (uint64_t i = 0; i < n; i++) items[i].v.i = a[i];
    kv_put(w, key, &v);
}

void gguf_writer_set_arr_f32(struct gguf_writer *w, const char *key, const float *a, uint64_t n)
{
    struct gguf_value v;
    struct gguf_value *items = arr_new(&v, GGUF_TYPE_FLOAT32, n);
    for (uint64_t i = 0; i < n; i++) items[i].v.f = a[i];
    kv_put(w, key, &v);
}

/* ---- tensors --------------------------------------------------------------------------- */

void gguf_writer_add_tensor(struct gguf_writer *w, const char *name, enum dtype dtype, int n_dims,
                            const int64_t *shape, const void *data, uint64_t n_bytes)
{
    const struct dtype_info *di = dtype_info(dtype);
    const char *nm = name ? name : "";
    if (!*nm) { hs_err_set(&w->err, HS_ERR_INVALID, "a tensor has an empty name"); return; }
    if (!di || ggml_type_of[dtype] < 0) {
        hs_err_set(&w->err, HS_ERR_INVALID, "tensor '%s': dtype %d has no GGUF type", nm, (int)dtype);
        return;
    }
    if (n_dims < 0 || n_dims > TENSOR_MAX_DIMS) {
        hs_err_set(&w->err, HS_ERR_INVALID, "tensor '%s': %d dimensions (at most %d)", nm, n_dims, TENSOR_MAX_DIMS);
        return;
    }
    uint64_t rows = 1, row_bytes, want;
    for (int i = 0; i < n_dims; i++) {
        if (shape[i] <= 0) {
            hs_err_set(&w->err, HS_ERR_INVALID, "tensor '%s': dimension %d is %" PRId64, nm, i, shape[i]);
            return;
        }
        if (i < n_dims - 1 && hs_mul_overflow(rows, (uint64_t)shape[i], &rows)) {
            hs_err_set(&w->err, HS_ERR_INVALID, "tensor '%s': element count overflows", nm);
            return;
        }
    }
    uint64_t inner = n_dims ? (uint64_t)shape[n_dims - 1] : 1;
    if (!dtype_row_bytes(dtype, inner, &row_bytes) || hs_mul_overflow(row_bytes, rows, &want)) {
        hs_err_set(&w->err, HS_ERR_INVALID, "tensor '%s': innermost dimension %" PRIu64 " is not a whole number of %s blocks (%u)",
                   nm, inner, di->name, di->block_elems);
        return;
    }
    if (want != n_bytes || !data) {
        hs_err_set(&w->err, HS_ERR_INVALID, "tensor '%s': given %" PRIu64 " bytes%s, a %s tensor of that shape holds %" PRIu64,
                   nm, n_bytes, data ? "" : " (no data)", di->name, want);
        return;
    }
    for (int i = 0; i < w->tensors.n; i++) {
        if (strcmp(w->tensors.v[i].name, nm) == 0) {
            hs_err_set(&w->err, HS_ERR_INVALID, "tensor '%s' added twice", nm);
            return;
        }
    }
    wtensor_list_add(&w->tensors, nm, dtype, n_dims, shape, data, n_bytes);
}

/* ---- serialisation --------------------------------------------------------------------- */

static void put_u32(struct strbuf *sb, uint32_t v)
{
    uint8_t b[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
    strbuf_append(sb, b, 4);
}

static void put_u64(struct strbuf *sb, uint64_t v)
{
    put_u32(sb, (uint32_t)v);
    put_u32(sb, (uint32_t)(v >> 32));
}

static void put_str(struct strbuf *sb, const char *s, uint64_t n)
{
    put_u64(sb, n);
    if (n) strbuf_append(sb, s, (size_t)n);
}

/* The value's payload (no type tag); `t` is its type (an array item's is elem_type). */
static void put_value(struct strbuf *sb, enum gguf_type t, const struct gguf_value *v)
{
    uint64_t bits = 0;
    switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_UINT16: case GGUF_TYPE_UINT32: case GGUF_TYPE_UINT64:
        bits = v->v.u;
        break;
    case GGUF_TYPE_INT8: case GGUF_TYPE_INT16: case GGUF_TYPE_INT32: case GGUF_TYPE_INT64:
        bits = (uint64_t)v->v.i; /* two's complement; truncated to the width below */
        break;
    case GGUF_TYPE_FLOAT32: {
        float f = (float)v->v.f;
        uint32_t b32;
        memcpy(&b32, &f, 4);
        bits = b32;
        break;
    }
    case GGUF_TYPE_FLOAT64: memcpy(&bits, &v->v.f, 8); break;
    case GGUF_TYPE_BOOL: bits = v->v.b ? 1 : 0; break;
    case GGUF_TYPE_STRING: put_str(sb, v->v.str.ptr, v->v.str.len); return;
    case GGUF_TYPE_ARRAY:
        put_u32(sb, (uint32_t)v->v.arr.elem_type);
        put_u64(sb, v->v.arr.n);
        for (uint64_t i = 0; i < v->v.arr.n; i++) put_value(sb, v->v.arr.elem_type, &v->v.arr.items[i]);
        return;
    default: return;
    }
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(bits >> (8 * i));
    strbuf_append(sb, b, scalar_size[t]);
}

static uint64_t pad_to(uint64_t n, uint64_t a) { return (a - n % a) % a; }

int gguf_writer_write(struct gguf_writer *w, const char *path, struct hs_err *err)
{
    if (w->err.code) return hs_err_set(err, w->err.code, "%s: %s", path, w->err.msg);
    bool write_alignment = w->alignment != GGUF_DEFAULT_ALIGNMENT;

    struct strbuf meta;
    strbuf_init(&meta);
    strbuf_append(&meta, "GGUF", 4);
    put_u32(&meta, GGUF_VERSION);
    put_u64(&meta, (uint64_t)w->tensors.n);
    put_u64(&meta, (uint64_t)w->n_kv + (write_alignment ? 1 : 0));
    if (write_alignment) {
        put_str(&meta, GGUF_KEY_ALIGNMENT, strlen(GGUF_KEY_ALIGNMENT));
        put_u32(&meta, GGUF_TYPE_UINT32);
        put_u32(&meta, w->alignment);
    }
    for (int i = 0; i < w->n_kv; i++) {
        put_str(&meta, w->kvs[i].key, strlen(w->kvs[i].key));
        put_u32(&meta, (uint32_t)w->kvs[i].val.type);
        put_value(&meta, w->kvs[i].val.type, &w->kvs[i].val);
    }
    uint64_t *offsets = hs_calloc((size_t)(w->tensors.n ? w->tensors.n : 1), sizeof *offsets);
    uint64_t data_len = 0;
    for (int i = 0; i < w->tensors.n; i++) {
        const struct wtensor *t = &w->tensors.v[i];
        put_str(&meta, t->name, strlen(t->name));
        put_u32(&meta, (uint32_t)t->n_dims);
        for (int d = t->n_dims - 1; d >= 0; d--) put_u64(&meta, (uint64_t)t->shape[d]); /* fastest first */
        put_u32(&meta, (uint32_t)ggml_type_of[t->dtype]);
        put_u64(&meta, data_len);
        offsets[i] = data_len;
        data_len += t->n_bytes + pad_to(t->n_bytes, w->alignment);
    }
    uint64_t meta_pad = pad_to(meta.len, w->alignment);
    uint64_t data_start = meta.len + meta_pad;

    struct sys_wfile f;
    int rc = sys_wfile_open(&f, path, err);
    if (rc == HS_OK) {
        sys_wfile_pwrite(&f, meta.buf, meta.len, 0);
        sys_wfile_zeros(&f, meta_pad, meta.len);
        for (int i = 0; i < w->tensors.n; i++) {
            const struct wtensor *t = &w->tensors.v[i];
            uint64_t at = data_start + offsets[i];
            sys_wfile_pwrite(&f, t->data, (size_t)t->n_bytes, at);
            sys_wfile_zeros(&f, pad_to(t->n_bytes, w->alignment), at + t->n_bytes);
        }
        rc = sys_wfile_commit(&f, err);
    }
    strbuf_free(&meta);
    hs_free(offsets);
    return rc;
}
