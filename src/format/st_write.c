/* st_write.c — the safetensors writer (the layout is described in safetensors.c).
 *
 * Output: the 8-byte header length, the JSON header ("__metadata__" first when set, then
 * the tensors in call order, each {"dtype", "shape", "data_offsets"}), spaces up to the
 * next multiple of 8 so that the data starts 8-aligned, then the tensors' bytes back to
 * back in call order (no gaps: other readers insist that the data is covered exactly).
 * The same calls give the same bytes. The file is streamed to a temp file beside the
 * destination through the sys I/O seam, fsynced and renamed over it.
 *
 * Bad arguments to st_writer_add / st_writer_set_metadata are recorded (the first one
 * wins) and returned by st_writer_write, so callers check one status.
 */
#include "format/format_int.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* The safetensors names of the dtypes we can write (plain types only). */
static const char *const st_write_names[DTYPE_COUNT] = {
    [DTYPE_F32] = "F32", [DTYPE_F16] = "F16", [DTYPE_BF16] = "BF16", [DTYPE_F64] = "F64",
    [DTYPE_I8] = "I8", [DTYPE_I16] = "I16", [DTYPE_I32] = "I32", [DTYPE_I64] = "I64",
    [DTYPE_U8] = "U8",
};

struct st_writer {
    struct wtensor_list entries; /* data borrowed until st_writer_write returns */
    char **meta; /* key, value, key, value, ... (owned) */
    int n_meta;  /* pairs */
    struct hs_err err; /* first bad argument */
};

struct st_writer *st_writer_new(void) { return hs_calloc(1, sizeof(struct st_writer)); }

void st_writer_free(struct st_writer *w)
{
    if (!w) return;
    wtensor_list_free(&w->entries);
    for (int i = 0; i < 2 * w->n_meta; i++) hs_free(w->meta[i]);
    hs_free(w->meta);
    hs_free(w);
}

void st_writer_add(struct st_writer *w, const char *name, enum dtype dtype, int n_dims,
                   const int64_t *shape, const void *data, uint64_t n_bytes)
{
    struct hs_err *e = &w->err;
    if (!name || !name[0] || strcmp(name, "__metadata__") == 0) {
        hs_err_set(e, HS_ERR_INVALID, "safetensors writer: bad tensor name '%.200s'", name ? name : "(null)");
        return;
    }
    if ((unsigned)dtype >= DTYPE_COUNT || !st_write_names[dtype]) {
        const struct dtype_info *di = dtype_info(dtype);
        hs_err_set(e, HS_ERR_UNSUPPORTED, "safetensors writer: tensor '%.200s': dtype %s has no safetensors form",
                   name, di ? di->name : "?");
        return;
    }
    if (n_dims < 0 || n_dims > TENSOR_MAX_DIMS || (n_dims > 0 && !shape)) {
        hs_err_set(e, HS_ERR_INVALID, "safetensors writer: tensor '%.200s': %d dimensions", name, n_dims);
        return;
    }
    uint64_t want = dtype_info(dtype)->block_bytes;
    for (int i = 0; i < n_dims; i++) {
        if (shape[i] <= 0 || hs_mul_overflow(want, (uint64_t)shape[i], &want)) {
            hs_err_set(e, HS_ERR_INVALID, "safetensors writer: tensor '%.200s': bad dimension %d (%" PRId64 ")",
                       name, i, shape[i]);
            return;
        }
    }
    if (want != n_bytes || !data) {
        hs_err_set(e, HS_ERR_INVALID, "safetensors writer: tensor '%.200s': %" PRIu64 " bytes given, its shape needs %" PRIu64,
                   name, data ? n_bytes : 0, want);
        return;
    }
    wtensor_list_add(&w->entries, name, dtype, n_dims, shape, data, n_bytes);
}

/* Setting a key again replaces its value; a NULL value removes the key. */
void st_writer_set_metadata(struct st_writer *w, const char *key, const char *value)
{
    if (!key) {
        hs_err_set(&w->err, HS_ERR_INVALID, "safetensors writer: NULL metadata key");
        return;
    }
    for (int i = 0; i < w->n_meta; i++) {
        if (strcmp(w->meta[2 * i], key) != 0) continue;
        if (value) {
            hs_free(w->meta[2 * i + 1]);
            w->meta[2 * i + 1] = hs_strdup(value);
        } else {
            hs_free(w->meta[2 * i]);
            hs_free(w->meta[2 * i + 1]);
            memmove(&w->meta[2 * i], &w->meta[2 * i + 2], sizeof *w->meta * 2 * (size_t)(w->n_meta - i - 1));
            w->n_meta--;
        }
        return;
    }
    if (!value) return;
    w->meta = hs_realloc(w->meta, sizeof *w->meta * 2 * (size_t)(w->n_meta + 1));
    w->meta[2 * w->n_meta] = hs_strdup(key);
    w->meta[2 * w->n_meta + 1] = hs_strdup(value);
    w->n_meta++;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Duplicate names are found by sorting (models can hold 10^5 tensors). */
static int st_check_unique(const struct st_writer *w, struct hs_err *err)
{
    if (w->entries.n < 2) return HS_OK;
    const char **names = hs_malloc(sizeof *names * (size_t)w->entries.n);
    for (int i = 0; i < w->entries.n; i++) names[i] = w->entries.v[i].name;
    qsort(names, (size_t)w->entries.n, sizeof *names, cmp_name);
    int rc = HS_OK;
    for (int i = 1; i < w->entries.n && rc == HS_OK; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            rc = hs_err_set(err, HS_ERR_INVALID, "safetensors writer: tensor '%.200s' added twice", names[i]);
    hs_free(names);
    return rc;
}

/* The length prefix, the header and its padding. */
static void st_header_build(const struct st_writer *w, struct strbuf *out)
{
    struct strbuf js;
    strbuf_init(&js);
    struct jsonw j;
    jsonw_init(&j, &js, 0);
    jsonw_obj_begin(&j);
    if (w->n_meta) {
        jsonw_key(&j, "__metadata__");
        jsonw_obj_begin(&j);
        for (int i = 0; i < w->n_meta; i++) {
            jsonw_key(&j, w->meta[2 * i]);
            jsonw_str(&j, w->meta[2 * i + 1]);
        }
        jsonw_obj_end(&j);
    }
    uint64_t off = 0;
    for (int i = 0; i < w->entries.n; i++) {
        const struct wtensor *t = &w->entries.v[i];
        jsonw_key(&j, t->name);
        jsonw_obj_begin(&j);
        jsonw_key(&j, "dtype");
        jsonw_str(&j, st_write_names[t->dtype]);
        jsonw_key(&j, "shape");
        jsonw_arr_begin(&j);
        for (int d = 0; d < t->n_dims; d++) jsonw_int(&j, t->shape[d]);
        jsonw_arr_end(&j);
        jsonw_key(&j, "data_offsets");
        jsonw_arr_begin(&j);
        jsonw_uint(&j, off);
        jsonw_uint(&j, off + t->n_bytes);
        jsonw_arr_end(&j);
        jsonw_obj_end(&j);
        off += t->n_bytes;
    }
    jsonw_obj_end(&j);
    while ((8 + js.len) % 8) strbuf_putc(&js, ' ');
    uint8_t prefix[8];
    for (int b = 0; b < 8; b++) prefix[b] = (uint8_t)((uint64_t)js.len >> (8 * b));
    strbuf_reset(out);
    strbuf_append(out, prefix, 8);
    strbuf_append(out, js.buf, js.len);
    strbuf_free(&js);
}

int st_writer_write(struct st_writer *w, const char *path, struct hs_err *err)
{
    if (w->err.code != HS_OK) return hs_err_set(err, w->err.code, "%s: %s", path, w->err.msg);
    int rc = st_check_unique(w, err);
    if (rc != HS_OK) { hs_err_prefix(err, "%s: ", path); return rc; }
    uint64_t total = 0;
    for (int i = 0; i < w->entries.n; i++)
        if (hs_add_overflow(total, w->entries.v[i].n_bytes, &total) || total > (UINT64_C(1) << 62))
            return hs_err_set(err, HS_ERR_LIMIT, "%s: tensor data is too large", path);

    struct strbuf head;
    strbuf_init(&head);
    st_header_build(w, &head);
    struct sys_wfile f;
    rc = sys_wfile_open(&f, path, err);
    if (rc == HS_OK) {
        sys_wfile_pwrite(&f, head.buf, head.len, 0);
        uint64_t off = head.len;
        for (int i = 0; i < w->entries.n; i++) {
            const struct wtensor *t = &w->entries.v[i];
            sys_wfile_pwrite(&f, t->data, (size_t)t->n_bytes, off);
            off += t->n_bytes;
        }
        rc = sys_wfile_commit(&f, err);
    }
    strbuf_free(&head);
    return rc;
}
