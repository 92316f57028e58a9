/* tensor.c — element types and tensor sets (named zero-copy views over mapped files).
 *
 * A set owns its file mappings and a name index (open addressing, FNV-1a). Views are
 * checked once, when added: dimensions positive, element count and byte size without
 * overflow, bytes inside the file, innermost dimension a whole number of blocks.
 */
#include "format/format_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct dtype_info dtype_table[DTYPE_COUNT] = {
    [DTYPE_F32]  = { "f32", 1, 4, true },
    [DTYPE_F16]  = { "f16", 1, 2, true },
    [DTYPE_BF16] = { "bf16", 1, 2, true },
    [DTYPE_Q8_0] = { "q8_0", 32, 34, true },
    [DTYPE_F64]  = { "f64", 1, 8, false },
    [DTYPE_I8]   = { "i8", 1, 1, false },
    [DTYPE_I16]  = { "i16", 1, 2, false },
    [DTYPE_I32]  = { "i32", 1, 4, false },
    [DTYPE_I64]  = { "i64", 1, 8, false },
    [DTYPE_U8]   = { "u8", 1, 1, false },
    [DTYPE_Q4_0] = { "q4_0", 32, 18, false },
    [DTYPE_Q4_1] = { "q4_1", 32, 20, false },
    [DTYPE_Q5_0] = { "q5_0", 32, 22, false },
    [DTYPE_Q5_1] = { "q5_1", 32, 24, true },
    [DTYPE_Q8_1] = { "q8_1", 32, 36, false },
    [DTYPE_Q2_K] = { "q2_k", 256, 84, false },
    [DTYPE_Q3_K] = { "q3_k", 256, 110, false },
    [DTYPE_Q4_K] = { "q4_k", 256, 144, true },
    [DTYPE_Q5_K] = { "q5_k", 256, 176, true },
    [DTYPE_Q6_K] = { "q6_k", 256, 210, true },
    [DTYPE_Q8_K] = { "q8_k", 256, 292, false },
    [DTYPE_IQ4_NL] = { "iq4_nl", 32, 18, true },
    [DTYPE_IQ4_XS] = { "iq4_xs", 256, 136, true },
};

const struct dtype_info *dtype_info(enum dtype t)
{
    if ((unsigned)t >= DTYPE_COUNT) return NULL;
    return &dtype_table[t];
}

int dtype_from_name(const char *name)
{
    for (int i = 0; i < DTYPE_COUNT; i++)
        if (strcmp(dtype_table[i].name, name) == 0) return i;
    return -1;
}

bool dtype_row_bytes(enum dtype t, uint64_t n, uint64_t *bytes_out)
{
    const struct dtype_info *d = dtype_info(t);
    if (!d || n % d->block_elems) return false;
    return !hs_mul_overflow(n / d->block_elems, d->block_bytes, bytes_out);
}

uint64_t tensor_n_elems(const struct tensor_view *t)
{
    uint64_t n = 1;
    for (int i = 0; i < t->n_dims; i++) n *= (uint64_t)t->shape[i];
    return n;
}

const char *tensor_shape_str(const struct tensor_view *t, char *buf, size_t len)
{
    size_t off = 0;
    off += (size_t)snprintf(buf + off, len - off, "[");
    for (int i = 0; i < t->n_dims && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%" PRId64, i ? ", " : "", t->shape[i]);
    if (off < len) snprintf(buf + off, len - off, "]");
    return buf;
}

/* ---- sets --------------------------------------------------------------------------- */

struct tensor_set {
    struct tensor_view *views;
    int n, cap;
    struct sys_map *files;
    int n_files;
    char **meta;       /* key, value, key, value, ... (owned) */
    int n_meta;        /* pairs */
    int *index;        /* open-addressing slots: view index or -1 */
    uint32_t index_cap; /* power of two, > 2n */
};

static uint32_t name_hash(const char *s, size_t n)
{
    return hs_fnv1a32(HS_FNV1A32_INIT, s, n);
}

struct tensor_set *tensor_set_new(void)
{
    struct tensor_set *ts = hs_calloc(1, sizeof *ts);
    return ts;
}

int tensor_set_add_file(struct tensor_set *ts, struct sys_map *m)
{
    ts->files = hs_realloc(ts->files, sizeof *ts->files * (size_t)(ts->n_files + 1));
    ts->files[ts->n_files] = *m;
    memset(m, 0, sizeof *m);
    return ts->n_files++;
}

const struct sys_map *tensor_set_file(const struct tensor_set *ts, int file_index)
{
    if (file_index < 0 || file_index >= ts->n_files) return NULL;
    return &ts->files[file_index];
}

static void index_rebuild(struct tensor_set *ts, uint32_t cap)
{
    hs_free(ts->index);
    ts->index = hs_malloc(sizeof *ts->index * cap);
    for (uint32_t i = 0; i < cap; i++) ts->index[i] = -1;
    ts->index_cap = cap;
    for (int v = 0; v < ts->n; v++) {
        const char *nm = ts->views[v].name;
        uint32_t h = name_hash(nm, strlen(nm)) & (cap - 1);
        while (ts->index[h] >= 0) h = (h + 1) & (cap - 1);
        ts->index[h] = v;
    }
}

static int index_find(const struct tensor_set *ts, const char *name, size_t len)
{
    if (!ts->index_cap) return -1;
    uint32_t h = name_hash(name, len) & (ts->index_cap - 1);
    while (ts->index[h] >= 0) {
        const char *nm = ts->views[ts->index[h]].name;
        if (strlen(nm) == len && memcmp(nm, name, len) == 0) return ts->index[h];
        h = (h + 1) & (ts->index_cap - 1);
    }
    return -1;
}

int tensor_set_add(struct tensor_set *ts, const char *name, size_t name_len, enum dtype dtype,
                   int n_dims, const int64_t *shape, int file_index, uint64_t file_offset,
                   uint64_t n_bytes, struct hs_err *err)
{
    const struct sys_map *f = tensor_set_file(ts, file_index);
    const char *fpath = f && f->path ? f->path : "?";
    const struct dtype_info *di = dtype_info(dtype);
    if (!f || !di) return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': bad file or dtype", fpath, (int)name_len, name);
    if (name_len == 0 || memchr(name, '\0', name_len))
        return hs_err_set(err, HS_ERR_FORMAT, "%s: a tensor has an empty or NUL-containing name", fpath);
    if (n_dims < 0 || n_dims > TENSOR_MAX_DIMS)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': %d dimensions (at most %d supported)",
                          fpath, (int)name_len, name, n_dims, TENSOR_MAX_DIMS);
    uint64_t elems = 1;
    for (int i = 0; i < n_dims; i++) {
        if (shape[i] <= 0)
            return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': dimension %d is %" PRId64 " (must be positive)",
                              fpath, (int)name_len, name, i, shape[i]);
        if (hs_mul_overflow(elems, (uint64_t)shape[i], &elems) || elems > (UINT64_C(1) << 60))
            return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': element count overflows",
                              fpath, (int)name_len, name);
    }
    uint64_t inner = n_dims ? (uint64_t)shape[n_dims - 1] : 1, row_bytes, want;
    if (!dtype_row_bytes(dtype, inner, &row_bytes))
        return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': innermost dimension %" PRIu64 " is not a multiple of the %s block (%u)",
                          fpath, (int)name_len, name, inner, di->name, di->block_elems);
    if (hs_mul_overflow(row_bytes, elems / inner, &want))
        return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': byte size overflows", fpath, (int)name_len, name);
    if (want != n_bytes)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': holds %" PRIu64 " bytes but a %s tensor of that shape needs %" PRIu64,
                          fpath, (int)name_len, name, n_bytes, di->name, want);
    uint64_t end;
    if (hs_add_overflow(file_offset, n_bytes, &end) || end > f->len)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': data [%" PRIu64 ", +%" PRIu64 ") runs past the file end %" PRIu64,
                          fpath, (int)name_len, name, file_offset, n_bytes, f->len);
    if (index_find(ts, name, name_len) >= 0)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s' appears twice", fpath, (int)name_len, name);

    if (ts->n == ts->cap) {
        ts->cap = ts->cap ? ts->cap * 2 : 64;
        ts->views = hs_realloc(ts->views, sizeof *ts->views * (size_t)ts->cap);
    }
    struct tensor_view *v = &ts->views[ts->n++];
    memset(v, 0, sizeof *v);
    v->name = hs_strndup(name, name_len);
    v->dtype = dtype;
    v->n_dims = n_dims;
    for (int i = 0; i < n_dims; i++) v->shape[i] = shape[i];
    v->data = n_bytes ? f->data + file_offset : f->data;
    v->n_bytes = n_bytes;
    v->file_offset = file_offset;
    v->file_index = file_index;
    if ((uint32_t)ts->n * 2 >= ts->index_cap) index_rebuild(ts, ts->index_cap ? ts->index_cap * 2 : 128);
    else {
        uint32_t h = name_hash(name, name_len) & (ts->index_cap - 1);
        while (ts->index[h] >= 0) h = (h + 1) & (ts->index_cap - 1);
        ts->index[h] = ts->n - 1;
    }
    return HS_OK;
}

static int cmp_by_file_offset(const void *a, const void *b)
{
    const struct tensor_view *x = *(const struct tensor_view *const *)a, *y = *(const struct tensor_view *const *)b;
    if (x->file_index != y->file_index) return x->file_index < y->file_index ? -1 : 1;
    if (x->file_offset != y->file_offset) return x->file_offset < y->file_offset ? -1 : 1;
    return 0;
}

int tensor_set_check_overlaps(const struct tensor_set *ts, struct hs_err *err)
{
    if (ts->n < 2) return HS_OK;
    const struct tensor_view **order = hs_malloc(sizeof *order * (size_t)ts->n);
    for (int i = 0; i < ts->n; i++) order[i] = &ts->views[i];
    qsort(order, (size_t)ts->n, sizeof *order, cmp_by_file_offset);
    int rc = HS_OK;
    for (int i = 1; i < ts->n; i++) {
        const struct tensor_view *a = order[i - 1], *b = order[i];
        if (a->file_index == b->file_index && a->n_bytes && b->n_bytes &&
            a->file_offset + a->n_bytes > b->file_offset) {
            rc = hs_err_set(err, HS_ERR_FORMAT, "%s: tensors '%s' and '%s' overlap",
                            ts->files[a->file_index].path, a->name, b->name);
            break;
        }
    }
    hs_free(order);
    return rc;
}

void tensor_set_meta_put(struct tensor_set *ts, const char *key, const char *value)
{
    for (int i = 0; i < ts->n_meta; i++) {
        if (strcmp(ts->meta[2 * i], key) == 0) {
            hs_free(ts->meta[2 * i + 1]);
            ts->meta[2 * i + 1] = hs_strdup(value);
            return;
        }
    }
    ts->meta = hs_realloc(ts->meta, sizeof *ts->meta * 2 * (size_t)(ts->n_meta + 1));
    ts->meta[2 * ts->n_meta] = hs_strdup(key);
    ts->meta[2 * ts->n_meta + 1] = hs_strdup(value);
    ts->n_meta++;
}

const char *tensor_set_meta_get(const struct tensor_set *ts, const char *key)
{
    for (int i = 0; i < ts->n_meta; i++)
        if (strcmp(ts->meta[2 * i], key) == 0) return ts->meta[2 * i + 1];
    return NULL;
}

int tensor_set_count(const struct tensor_set *ts) { return ts->n; }

const struct tensor_view *tensor_set_at(const struct tensor_set *ts, int i)
{
    return (i >= 0 && i < ts->n) ? &ts->views[i] : NULL;
}

const struct tensor_view *tensor_set_find(const struct tensor_set *ts, const char *name)
{
    int i = index_find(ts, name, strlen(name));
    return i >= 0 ? &ts->views[i] : NULL;
}

int tensor_set_n_files(const struct tensor_set *ts) { return ts->n_files; }

const char *tensor_set_file_path(const struct tensor_set *ts, int file_index)
{
    const struct sys_map *f = tensor_set_file(ts, file_index);
    return f ? f->path : NULL;
}

uint64_t tensor_set_file_size(const struct tensor_set *ts, int file_index)
{
    const struct sys_map *f = tensor_set_file(ts, file_index);
    return f ? f->len : 0;
}

void tensor_set_free(struct tensor_set *ts)
{
    if (!ts) return;
    for (int i = 0; i < ts->n; i++) hs_free((void *)ts->views[i].name);
    for (int i = 0; i < ts->n_files; i++) sys_file_unmap(&ts->files[i]);
    for (int i = 0; i < 2 * ts->n_meta; i++) hs_free(ts->meta[i]);
    hs_free(ts->meta);
    hs_free(ts->views);
    hs_free(ts->files);
    hs_free(ts->index);
    hs_free(ts);
}

const char *format_json_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "an array";
    case JSON_STRING: return "a string";
    case JSON_INTEGER: return "an integer";
    case JSON_REAL: return "a real number";
    case JSON_TRUE: case JSON_FALSE: return "a boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

void wtensor_list_add(struct wtensor_list *l, const char *name, enum dtype dtype, int n_dims,
                      const int64_t *shape, const void *data, uint64_t n_bytes)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        l->v = hs_realloc(l->v, sizeof *l->v * (size_t)l->cap);
    }
    struct wtensor *t = &l->v[l->n++];
    memset(t, 0, sizeof *t);
    t->name = hs_strdup(name);
    t->dtype = dtype;
    t->n_dims = n_dims;
    for (int i = 0; i < n_dims; i++) t->shape[i] = shape[i];
    t->data = data;
    t->n_bytes = n_bytes;
}

void wtensor_list_free(struct wtensor_list *l)
{
    for (int i = 0; i < l->n; i++) hs_free(l->v[i].name);
    hs_free(l->v);
    memset(l, 0, sizeof *l);
}
