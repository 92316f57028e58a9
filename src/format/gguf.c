/* gguf.c — GGUF (v2/v3) reader: metadata key/values and zero-copy tensor views.
 *
 * Design note
 * -----------
 * GGUF is llama.cpp's single-file model format: a header, a list of typed metadata
 * key/values, a list of tensor descriptions, then the tensor bytes. Everything is
 * little-endian. The whole file is mapped read-only; strings and tensor data are views into
 * the mapping, only keys (NUL-terminated copies) and the decoded value tree are allocated.
 *
 * File layout (v3; v2 is identical; v1, with 32-bit counts and lengths, is rejected):
 *
 *   OFFSET        SIZE   FIELD
 *   0             4      magic "GGUF" (47 47 55 46)
 *   4             4      u32 version (2 or 3)
 *   8             8      u64 n_tensors
 *   16            8      u64 n_kv
 *   24            ...    n_kv key/value entries
 *   ...           ...    n_tensors tensor infos
 *   ...           0..A-1 zero padding up to the next multiple of A = general.alignment
 *   D = that      ...    data section: tensor bytes, each at D + its offset
 *
 *   key/value entry:
 *     +0          8      u64 key length K
 *     +8          K      key bytes (UTF-8, no NUL)
 *     +8+K        4      u32 value type (enum gguf_type)
 *     +12+K       ...    value
 *
 *   value, by type:
 *     UINT8/INT8/BOOL            1   (BOOL must be 0 or 1)
 *     UINT16/INT16               2
 *     UINT32/INT32/FLOAT32       4
 *     UINT64/INT64/FLOAT64       8
 *     STRING                     8 + L   u64 length L, then L bytes (not NUL-terminated)
 *     ARRAY                      4 + 8 + ...   u32 element type, u64 count, count values
 *                                              of that type (arrays may nest)
 *
 *   tensor info:
 *     +0          8+N    name (a string as above)
 *     +8+N        4      u32 n_dims (0..4)
 *     +12+N       8*n    u64 ne[n_dims], fastest-varying first (ne[0] is contiguous)
 *     ...         4      u32 ggml type id (table ggml_types below)
 *     ...         8      u64 offset of the data, relative to D; a multiple of A
 *
 * `general.alignment` (UINT32; default 32) must be a non-zero power of two. Each tensor
 * holds ne[0]/block * block_bytes * ne[1] * ne[2] * ne[3] bytes. Writers pad each tensor to
 * A; readers need not care, only that tensors lie inside the file and do not overlap.
 *
 * Invariants (on top of format.h's):
 *   1. Before anything is allocated for a count or length, count * (smallest possible
 *      encoding of one element) is checked against the bytes left in the file, so a count
 *      of 2^60 fails at once; the decoded value tree is at most a fixed multiple of the
 *      file size and never more than GGUF_MAX_ITEMS values.
 *   2. Arrays nest at most GGUF_MAX_DEPTH levels (no unbounded recursion).
 *   3. Keys are non-empty, NUL-free and unique; tensor names likewise (tensor.c checks).
 *   4. Every error names the file, the key or tensor, and the byte offset of the bad field.
 *   5. A gguf_file is immutable after gguf_open; all pointers it hands out live until
 *      gguf_close.
 */
#include "format/format_int.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DEPTH 8                   /* array nesting levels */
#define GGUF_MAX_ITEMS (UINT64_C(1) << 24) /* decoded values across all keys */
#define GGUF_MAX_COUNT (UINT64_C(1) << 24) /* keys, tensors */
#define GGUF_KEY_ALIGNMENT "general.alignment"

/* ---- type tables --------------------------------------------------------------------- */

struct gguf_type_desc {
    const char *name;
    uint8_t size;     /* encoded size of a scalar; 0 for STRING/ARRAY */
    uint8_t min_size; /* smallest encoding of one value: bounds counts before allocating */
};

static const struct gguf_type_desc gguf_types[GGUF_TYPE_COUNT] = {
    [GGUF_TYPE_UINT8] = { "uint8", 1, 1 },     [GGUF_TYPE_INT8] = { "int8", 1, 1 },
    [GGUF_TYPE_UINT16] = { "uint16", 2, 2 },   [GGUF_TYPE_INT16] = { "int16", 2, 2 },
    [GGUF_TYPE_UINT32] = { "uint32", 4, 4 },   [GGUF_TYPE_INT32] = { "int32", 4, 4 },
    [GGUF_TYPE_FLOAT32] = { "float32", 4, 4 }, [GGUF_TYPE_BOOL] = { "bool", 1, 1 },
    [GGUF_TYPE_STRING] = { "string", 0, 8 },   [GGUF_TYPE_ARRAY] = { "array", 0, 12 },
    [GGUF_TYPE_UINT64] = { "uint64", 8, 8 },   [GGUF_TYPE_INT64] = { "int64", 8, 8 },
    [GGUF_TYPE_FLOAT64] = { "float64", 8, 8 },
};

const char *gguf_value_type_name(enum gguf_type t)
{
    return (unsigned)t < GGUF_TYPE_COUNT ? gguf_types[t].name : "?";
}

/* ggml type ids -> our dtype. Ids that ggml knows but we do not read carry a name only
 * (dtype -1), so the message can say what the file holds. */
struct ggml_type_desc {
    const char *name;
    int dtype;
};

static const struct ggml_type_desc ggml_types[] = {
    [0] = { "f32", DTYPE_F32 },       [1] = { "f16", DTYPE_F16 },
    [2] = { "q4_0", DTYPE_Q4_0 },     [3] = { "q4_1", DTYPE_Q4_1 },
    [6] = { "q5_0", DTYPE_Q5_0 },     [7] = { "q5_1", DTYPE_Q5_1 },
    [8] = { "q8_0", DTYPE_Q8_0 },     [9] = { "q8_1", DTYPE_Q8_1 },
    [10] = { "q2_k", DTYPE_Q2_K },    [11] = { "q3_k", DTYPE_Q3_K },
    [12] = { "q4_k", DTYPE_Q4_K },    [13] = { "q5_k", DTYPE_Q5_K },
    [14] = { "q6_k", DTYPE_Q6_K },    [15] = { "q8_k", DTYPE_Q8_K },
    [16] = { "iq2_xxs", -1 },         [17] = { "iq2_xs", -1 },
    [18] = { "iq3_xxs", -1 },         [19] = { "iq1_s", -1 },
    [20] = { "iq4_nl", DTYPE_IQ4_NL }, [21] = { "iq3_s", -1 },
    [22] = { "iq2_s", -1 },           [23] = { "iq4_xs", DTYPE_IQ4_XS },
    [24] = { "i8", DTYPE_I8 },        [25] = { "i16", DTYPE_I16 },
    [26] = { "i32", DTYPE_I32 },      [27] = { "i64", DTYPE_I64 },
    [28] = { "f64", DTYPE_F64 },      [29] = { "iq1_m", -1 },
    [30] = { "bf16", DTYPE_BF16 },    [34] = { "tq1_0", -1 },
    [35] = { "tq2_0", -1 },           [39] = { "mxfp4", -1 },
};

/* ---- the file object ----------------------------------------------------------------- */

struct gguf_file {
    struct tensor_set *ts;     /* owns the mapping and the tensor views */
    const char *path;          /* the mapping's copy */
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset;      /* D: start of the data section */
    int n_kv;
    char **keys;               /* [n_kv] owned, NUL-terminated */
    struct gguf_value *values; /* [n_kv]; array items owned, strings into the mapping */
    int *index;                /* open addressing over keys: kv index or -1 */
    uint32_t index_cap;        /* power of two > 2 * n_kv */
};

static void value_free(struct gguf_value *v)
{
    if (v->type != GGUF_TYPE_ARRAY) return;
    struct gguf_value *items = (struct gguf_value *)v->v.arr.items;
    if (v->v.arr.elem_type == GGUF_TYPE_ARRAY)
        for (uint64_t i = 0; i < v->v.arr.n; i++) value_free(&items[i]);
    hs_free(items);
    v->v.arr.items = NULL;
    v->v.arr.n = 0;
}

void gguf_close(struct gguf_file *g)
{
    if (!g) return;
    for (int i = 0; i < g->n_kv; i++) {
        hs_free(g->keys[i]);
        value_free(&g->values[i]);
    }
    hs_free(g->keys);
    hs_free(g->values);
    hs_free(g->index);
    tensor_set_free(g->ts);
    hs_free(g);
}

static uint32_t key_hash(const char *s, size_t n)
{
    return hs_fnv1a32(HS_FNV1A32_INIT, s, n);
}

/* Index of key s[0..n) or -1. */
static int key_lookup(const struct gguf_file *g, const char *s, size_t n)
{
    if (!g->index_cap) return -1;
    uint32_t h = key_hash(s, n) & (g->index_cap - 1);
    for (; g->index[h] >= 0; h = (h + 1) & (g->index_cap - 1)) {
        const char *k = g->keys[g->index[h]];
        if (strncmp(k, s, n) == 0 && k[n] == '\0') return g->index[h];
    }
    return -1;
}

/* ---- bounds-checked cursor ---------------------------------------------------------- */

struct rd {
    const uint8_t *p;
    uint64_t len, pos;
    const char *path;
    struct hs_err *err;
    uint64_t n_items; /* decoded values so far (invariant 1) */
};

static uint64_t rd_left(const struct rd *r) { return r->len - r->pos; }

/* Fail unless n more bytes are there. Messages read "FILE: key 'KEY': FIELD ..." (or
 * "FILE: FIELD ..." outside a key/value). */
static int rd_need(struct rd *r, uint64_t n, const char *key, const char *field)
{
    if (n <= rd_left(r)) return HS_OK;
    return hs_err_set(r->err, HS_ERR_FORMAT,
                      "%s: %s%s%s%s needs %" PRIu64 " bytes at offset %" PRIu64 " but the file ends at %" PRIu64,
                      r->path, key ? "key '" : "", key ? key : "", key ? "': " : "", field, n, r->pos, r->len);
}

static int rd_u32(struct rd *r, uint32_t *out, const char *key, const char *field)
{
    int rc = rd_need(r, 4, key, field);
    if (rc) return rc;
    *out = hs_rd_u32(r->p + r->pos);
    r->pos += 4;
    return HS_OK;
}

static int rd_u64(struct rd *r, uint64_t *out, const char *key, const char *field)
{
    int rc = rd_need(r, 8, key, field);
    if (rc) return rc;
    *out = hs_rd_u64(r->p + r->pos);
    r->pos += 8;
    return HS_OK;
}

/* A string: u64 length then bytes; *s points into the mapping. */
static int rd_str(struct rd *r, const char **s, uint64_t *n, const char *key, const char *field)
{
    uint64_t at = r->pos, len;
    int rc = rd_u64(r, &len, key, field);
    if (rc) return rc;
    if (len > rd_left(r))
        return hs_err_set(r->err, HS_ERR_FORMAT,
                          "%s: %s%s%s%s: length %" PRIu64 " at offset %" PRIu64 " runs past the file end %" PRIu64,
                          r->path, key ? "key '" : "", key ? key : "", key ? "': " : "", field, len, at, r->len);
    *s = (const char *)r->p + r->pos;
    *n = len;
    r->pos += len;
    return HS_OK;
}

/* ---- values --------------------------------------------------------------------------- */

/* Decode one value of `type` at the cursor into *out. On failure *out is still safe to
 * value_free (arrays hold exactly the items decoded so far). */
static int rd_value(struct rd *r, uint32_t type, int depth, struct gguf_value *out, const char *key)
{
    memset(out, 0, sizeof *out);
    uint64_t at = r->pos;
    if (type >= GGUF_TYPE_COUNT)
        return hs_err_set(r->err, HS_ERR_FORMAT, "%s: key '%s': unknown value type %u at offset %" PRIu64,
                          r->path, key, type, at);
    if (++r->n_items > GGUF_MAX_ITEMS)
        return hs_err_set(r->err, HS_ERR_LIMIT, "%s: key '%s': more than %" PRIu64 " metadata values in the file",
                          r->path, key, GGUF_MAX_ITEMS);
    out->type = (enum gguf_type)type;
    const struct gguf_type_desc *d = &gguf_types[type];
    int rc;
    if (d->size) {
        if ((rc = rd_need(r, d->size, key, gguf_types[type].name))) return rc;
        const uint8_t *p = r->p + r->pos;
        r->pos += d->size;
        switch (out->type) {
        case GGUF_TYPE_UINT8: out->v.u = p[0]; break;
        case GGUF_TYPE_INT8: out->v.i = (int8_t)p[0]; break;
        case GGUF_TYPE_UINT16: out->v.u = hs_rd_u16(p); break;
        case GGUF_TYPE_INT16: out->v.i = (int16_t)hs_rd_u16(p); break;
        case GGUF_TYPE_UINT32: out->v.u = hs_rd_u32(p); break;
        case GGUF_TYPE_INT32: out->v.i = (int32_t)hs_rd_u32(p); break;
        case GGUF_TYPE_UINT64: out->v.u = hs_rd_u64(p); break;
        case GGUF_TYPE_INT64: out->v.i = (int64_t)hs_rd_u64(p); break;
        case GGUF_TYPE_FLOAT32: {
            uint32_t bits = hs_rd_u32(p);
            float f;
            memcpy(&f, &bits, sizeof f);
            out->v.f = f;
            break;
        }
        case GGUF_TYPE_FLOAT64: {
            uint64_t bits = hs_rd_u64(p);
            memcpy(&out->v.f, &bits, sizeof out->v.f);
            break;
        }
        case GGUF_TYPE_BOOL:
            if (p[0] > 1)
                return hs_err_set(r->err, HS_ERR_FORMAT, "%s: key '%s': bool value %u at offset %" PRIu64 " (must be 0 or 1)",
                                  r->path, key, p[0], at);
            out->v.b = p[0] != 0;
            break;
        default: break;
        }
        return HS_OK;
    }
    if (out->type == GGUF_TYPE_STRING)
        return rd_str(r, &out->v.str.ptr, &out->v.str.len, key, "string");

    /* ARRAY */
    if (depth >= GGUF_MAX_DEPTH)
        return hs_err_set(r->err, HS_ERR_FORMAT, "%s: key '%s': arrays nested deeper than %d at offset %" PRIu64,
                          r->path, key, GGUF_MAX_DEPTH, at);
    uint32_t elem;
    uint64_t n;
    if ((rc = rd_u32(r, &elem, key, "array element type"))) return rc;
    if (elem >= GGUF_TYPE_COUNT)
        return hs_err_set(r->err, HS_ERR_FORMAT, "%s: key '%s': unknown array element type %u at offset %" PRIu64,
                          r->path, key, elem, at);
    if ((rc = rd_u64(r, &n, key, "array length"))) return rc;
    if (n > rd_left(r) / gguf_types[elem].min_size)
        return hs_err_set(r->err, HS_ERR_FORMAT,
                          "%s: key '%s': array of %" PRIu64 " %s at offset %" PRIu64 " cannot fit in the %" PRIu64 " bytes left",
                          r->path, key, n, gguf_types[elem].name, at, rd_left(r));
    if (n > GGUF_MAX_ITEMS - r->n_items)
        return hs_err_set(r->err, HS_ERR_LIMIT, "%s: key '%s': more than %" PRIu64 " metadata values in the file",
                          r->path, key, GGUF_MAX_ITEMS);
    out->v.arr.elem_type = (enum gguf_type)elem;
    struct gguf_value *items = hs_malloc(sizeof *items * (size_t)n);
    out->v.arr.items = items;
    for (uint64_t i = 0; i < n; i++) {
        rc = rd_value(r, elem, depth + 1, &items[i], key);
        if (rc) {
            out->v.arr.n = elem == GGUF_TYPE_ARRAY ? i + 1 : i; /* item i is safe to free */
            return rc;
        }
    }
    out->v.arr.n = n;
    return HS_OK;
}

/* ---- tensor infos --------------------------------------------------------------------- */

struct tinfo {
    const char *name;
    uint64_t name_len;
    uint32_t n_dims;
    uint64_t ne[TENSOR_MAX_DIMS];
    uint32_t ggml_type;
    uint64_t offset;
    uint64_t at; /* where the info starts, for messages */
};

static int rd_tinfo(struct rd *r, uint64_t idx, struct tinfo *t)
{
    char what[320];
    snprintf(what, sizeof what, "tensor info %" PRIu64 " name", idx);
    t->at = r->pos;
    int rc = rd_str(r, &t->name, &t->name_len, NULL, what);
    if (rc) return rc;
    int nl = t->name_len > 256 ? 256 : (int)t->name_len; /* messages show at most 256 bytes */
    snprintf(what, sizeof what, "tensor '%.*s' n_dims", nl, t->name);
    if ((rc = rd_u32(r, &t->n_dims, NULL, what))) return rc;
    if (t->n_dims > TENSOR_MAX_DIMS)
        return hs_err_set(r->err, HS_ERR_FORMAT, "%s: tensor '%.*s': %u dimensions at offset %" PRIu64 " (at most %d)",
                          r->path, nl, t->name, t->n_dims, t->at, TENSOR_MAX_DIMS);
    for (uint32_t i = 0; i < t->n_dims; i++) {
        uint64_t at = r->pos;
        snprintf(what, sizeof what, "tensor '%.*s' ne[%u]", nl, t->name, i);
        if ((rc = rd_u64(r, &t->ne[i], NULL, what))) return rc;
        if (t->ne[i] == 0 || t->ne[i] > (UINT64_C(1) << 60))
            return hs_err_set(r->err, HS_ERR_FORMAT, "%s: tensor '%.*s': ne[%u] = %" PRIu64 " at offset %" PRIu64 " (must be 1..2^60)",
                              r->path, nl, t->name, i, t->ne[i], at);
    }
    snprintf(what, sizeof what, "tensor '%.*s' type", nl, t->name);
    if ((rc = rd_u32(r, &t->ggml_type, NULL, what))) return rc;
    snprintf(what, sizeof what, "tensor '%.*s' offset", nl, t->name);
    return rd_u64(r, &t->offset, NULL, what);
}

/* Turn one tensor info into a view of the set. */
static int add_tensor(struct gguf_file *g, const struct tinfo *t, struct hs_err *err)
{
    int nl = t->name_len > 256 ? 256 : (int)t->name_len;
    const struct ggml_type_desc *gt = t->ggml_type < HS_ARRAY_LEN(ggml_types) ? &ggml_types[t->ggml_type] : NULL;
    if (!gt || !gt->name)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': unknown ggml type %u (info at offset %" PRIu64 ")",
                          g->path, nl, t->name, t->ggml_type, t->at);
    if (gt->dtype < 0)
        return hs_err_set(err, HS_ERR_UNSUPPORTED, "%s: tensor '%.*s': ggml type %u (%s) is not supported",
                          g->path, nl, t->name, t->ggml_type, gt->name);
    enum dtype dt = (enum dtype)gt->dtype;
    const struct dtype_info *di = dtype_info(dt);
    if (t->offset % g->alignment)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': offset %" PRIu64 " is not a multiple of the alignment %" PRIu64,
                          g->path, nl, t->name, t->offset, g->alignment);
    uint64_t ne0 = t->n_dims ? t->ne[0] : 1, row_bytes, rows = 1, n_bytes, file_offset;
    if (!dtype_row_bytes(dt, ne0, &row_bytes))
        return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': ne[0] = %" PRIu64 " is not a multiple of the %s block (%u)",
                          g->path, nl, t->name, ne0, di->name, di->block_elems);
    for (uint32_t i = 1; i < t->n_dims; i++)
        if (hs_mul_overflow(rows, t->ne[i], &rows))
            return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': element count overflows", g->path, nl, t->name);
    if (hs_mul_overflow(row_bytes, rows, &n_bytes))
        return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': byte size overflows", g->path, nl, t->name);
    if (hs_add_overflow(g->data_offset, t->offset, &file_offset))
        return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': offset %" PRIu64 " overflows",
                          g->path, nl, t->name, t->offset);
    int64_t shape[TENSOR_MAX_DIMS];
    for (uint32_t i = 0; i < t->n_dims; i++) shape[i] = (int64_t)t->ne[t->n_dims - 1 - i]; /* PyTorch order */
    return tensor_set_add(g->ts, t->name, (size_t)t->name_len, dt, (int)t->n_dims, shape, 0, file_offset,
                          n_bytes, err);
}

/* ---- open ----------------------------------------------------------------------------- */

static int parse(struct gguf_file *g, const struct sys_map *m, struct hs_err *err)
{
    struct rd r = { .p = m->data, .len = m->len, .pos = 0, .path = g->path, .err = err };
    int rc;
    if ((rc = rd_need(&r, 4, NULL, "magic"))) return rc;
    if (memcmp(r.p, GGUF_MAGIC, 4) != 0)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: not a GGUF file (magic %02x %02x %02x %02x, want \"GGUF\")",
                          g->path, r.p[0], r.p[1], r.p[2], r.p[3]);
    r.pos = 4;
    if ((rc = rd_u32(&r, &g->version, NULL, "version"))) return rc;
    if (g->version == 1)
        return hs_err_set(err, HS_ERR_UNSUPPORTED, "%s: GGUF version 1 (32-bit lengths) is not supported; convert to v3",
                          g->path);
    if (g->version != 2 && g->version != 3) {
        if (g->version && (g->version & 0xffff) == 0)
            return hs_err_set(err, HS_ERR_UNSUPPORTED, "%s: GGUF version 0x%08x: a big-endian file? only little-endian v2/v3 are read",
                              g->path, g->version);
        return hs_err_set(err, HS_ERR_UNSUPPORTED, "%s: GGUF version %u is not supported (only 2 and 3)", g->path, g->version);
    }
    uint64_t n_tensors, n_kv;
    if ((rc = rd_u64(&r, &n_tensors, NULL, "n_tensors"))) return rc;
    if ((rc = rd_u64(&r, &n_kv, NULL, "n_kv"))) return rc;
    /* smallest key/value: 8 (key length) + 4 (type) + 1 (value); an empty key is
     * rejected later, with its own message */
    if (n_kv > rd_left(&r) / 13 || n_kv > GGUF_MAX_COUNT)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: header says %" PRIu64 " key/values; the file has room for at most %" PRIu64,
                          g->path, n_kv, HS_MIN(rd_left(&r) / 13, GGUF_MAX_COUNT));

    g->keys = hs_calloc((size_t)n_kv, sizeof *g->keys);
    g->values = hs_calloc((size_t)n_kv, sizeof *g->values);
    g->index_cap = 16;
    while (g->index_cap <= 2 * n_kv) g->index_cap *= 2;
    g->index = hs_malloc(sizeof *g->index * g->index_cap);
    for (uint32_t i = 0; i < g->index_cap; i++) g->index[i] = -1;

    for (uint64_t i = 0; i < n_kv; i++) {
        uint64_t at = r.pos, klen;
        const char *k;
        char what[48];
        snprintf(what, sizeof what, "key of key/value %" PRIu64, i);
        if ((rc = rd_str(&r, &k, &klen, NULL, what))) return rc;
        if (klen == 0 || memchr(k, '\0', (size_t)klen))
            return hs_err_set(err, HS_ERR_FORMAT, "%s: key/value %" PRIu64 " at offset %" PRIu64 " has an empty or NUL-containing key",
                              g->path, i, at);
        if (key_lookup(g, k, (size_t)klen) >= 0)
            return hs_err_set(err, HS_ERR_FORMAT, "%s: key '%.*s' appears twice (second at offset %" PRIu64 ")",
                              g->path, (int)HS_MIN(klen, 256), k, at);
        g->keys[i] = hs_strndup(k, (size_t)klen);
        g->n_kv = (int)i + 1; /* from here on gguf_close frees entry i */
        uint32_t h = key_hash(k, (size_t)klen) & (g->index_cap - 1);
        while (g->index[h] >= 0) h = (h + 1) & (g->index_cap - 1);
        g->index[h] = (int)i;
        uint32_t type;
        if ((rc = rd_u32(&r, &type, g->keys[i], "value type"))) return rc;
        if ((rc = rd_value(&r, type, 0, &g->values[i], g->keys[i]))) return rc;
    }

    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const struct gguf_value *al = gguf_find(g, GGUF_KEY_ALIGNMENT);
    if (al) {
        if (al->type != GGUF_TYPE_UINT32)
            return hs_err_set(err, HS_ERR_FORMAT, "%s: key '%s' is a %s (must be uint32)", g->path, GGUF_KEY_ALIGNMENT,
                              gguf_value_type_name(al->type));
        if (al->v.u == 0 || (al->v.u & (al->v.u - 1)))
            return hs_err_set(err, HS_ERR_FORMAT, "%s: key '%s' is %" PRIu64 " (must be a non-zero power of two)",
                              g->path, GGUF_KEY_ALIGNMENT, al->v.u);
        g->alignment = al->v.u;
    }

    /* smallest tensor info: 8 (name length) + 4 (n_dims) + 4 (type) + 8 (offset) */
    if (n_tensors > rd_left(&r) / 24 || n_tensors > GGUF_MAX_COUNT)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: header says %" PRIu64 " tensors; the file has room for at most %" PRIu64 " after offset %" PRIu64,
                          g->path, n_tensors, HS_MIN(rd_left(&r) / 24, GGUF_MAX_COUNT), r.pos);
    struct tinfo *infos = hs_calloc((size_t)(n_tensors ? n_tensors : 1), sizeof *infos);
    for (uint64_t i = 0; i < n_tensors && !rc; i++) rc = rd_tinfo(&r, i, &infos[i]);
    if (!rc) {
        /* the data section starts at the next multiple of the alignment; the padding
         * itself need not be in the file when no tensor reaches it */
        uint64_t pad = (g->alignment - r.pos % g->alignment) % g->alignment;
        g->data_offset = r.pos + pad;
        for (uint64_t i = 0; i < n_tensors && !rc; i++) rc = add_tensor(g, &infos[i], err);
    }
    hs_free(infos);
    if (rc) return rc;
    return tensor_set_check_overlaps(g->ts, err);
}

int gguf_open(const char *path, struct gguf_file **out, struct hs_err *err)
{
    *out = NULL;
    struct sys_map m;
    int rc = sys_file_map(path, &m, err);
    if (rc) return rc;
    struct gguf_file *g = hs_calloc(1, sizeof *g);
    g->ts = tensor_set_new();
    tensor_set_add_file(g->ts, &m); /* the set owns the mapping from here */
    const struct sys_map *fm = tensor_set_file(g->ts, 0);
    g->path = fm->path;
    rc = parse(g, fm, err);
    if (rc) {
        gguf_close(g);
        return rc;
    }
    *out = g;
    return HS_OK;
}

/* ---- accessors ------------------------------------------------------------------------ */

uint32_t gguf_version(const struct gguf_file *g) { return g->version; }
uint64_t gguf_alignment(const struct gguf_file *g) { return g->alignment; }
int gguf_n_kv(const struct gguf_file *g) { return g->n_kv; }
const struct tensor_set *gguf_tensors(const struct gguf_file *g) { return g->ts; }

const char *gguf_kv_key(const struct gguf_file *g, int i)
{
    return i >= 0 && i < g->n_kv ? g->keys[i] : NULL;
}

const struct gguf_value *gguf_kv_value(const struct gguf_file *g, int i)
{
    return i >= 0 && i < g->n_kv ? &g->values[i] : NULL;
}

const struct gguf_value *gguf_find(const struct gguf_file *g, const char *key)
{
    int i = key_lookup(g, key, strlen(key));
    return i >= 0 ? &g->values[i] : NULL;
}

/* ---- typed getters -------------------------------------------------------------------- */

static const struct gguf_value *get(const struct gguf_file *g, const char *key, struct hs_err *err)
{
    const struct gguf_value *v = gguf_find(g, key);
    if (!v) hs_err_set(err, HS_ERR_NOT_FOUND, "%s: key '%s' not found", g->path, key);
    return v;
}

static int mismatch(const struct gguf_file *g, const char *key, const struct gguf_value *v, const char *want,
                    struct hs_err *err)
{
    return hs_err_set(err, HS_ERR_FORMAT, "%s: key '%s' is a %s, not %s", g->path, key, gguf_value_type_name(v->type), want);
}

static bool is_unsigned(enum gguf_type t)
{
    return t == GGUF_TYPE_UINT8 || t == GGUF_TYPE_UINT16 || t == GGUF_TYPE_UINT32 || t == GGUF_TYPE_UINT64;
}

static bool is_signed(enum gguf_type t)
{
    return t == GGUF_TYPE_INT8 || t == GGUF_TYPE_INT16 || t == GGUF_TYPE_INT32 || t == GGUF_TYPE_INT64;
}

/* An integer value as (negative?, magnitude) so any width/signedness compares exactly. */
static int get_int(const struct gguf_file *g, const char *key, const char *want, bool *neg, uint64_t *mag,
                   struct hs_err *err)
{
    const struct gguf_value *v = get(g, key, err);
    if (!v) return HS_ERR_NOT_FOUND;
    if (is_unsigned(v->type)) {
        *neg = false;
        *mag = v->v.u;
    } else if (is_signed(v->type)) {
        *neg = v->v.i < 0;
        *mag = *neg ? (uint64_t)0 - (uint64_t)v->v.i : (uint64_t)v->v.i;
    } else {
        return mismatch(g, key, v, want, err);
    }
    return HS_OK;
}

static int out_of_range(const struct gguf_file *g, const char *key, bool neg, uint64_t mag, const char *want,
                        struct hs_err *err)
{
    return hs_err_set(err, HS_ERR_FORMAT, "%s: key '%s': value %s%" PRIu64 " does not fit %s", g->path, key,
                      neg ? "-" : "", mag, want);
}

int gguf_get_u32(const struct gguf_file *g, const char *key, uint32_t *out, struct hs_err *err)
{
    bool neg;
    uint64_t mag;
    int rc = get_int(g, key, "an integer", &neg, &mag, err);
    if (rc) return rc;
    if ((neg && mag) || mag > UINT32_MAX) return out_of_range(g, key, neg, mag, "uint32", err);
    *out = (uint32_t)mag;
    return HS_OK;
}

int gguf_get_u64(const struct gguf_file *g, const char *key, uint64_t *out, struct hs_err *err)
{
    bool neg;
    uint64_t mag;
    int rc = get_int(g, key, "an integer", &neg, &mag, err);
    if (rc) return rc;
    if (neg && mag) return out_of_range(g, key, neg, mag, "uint64", err);
    *out = mag;
    return HS_OK;
}

int gguf_get_i64(const struct gguf_file *g, const char *key, int64_t *out, struct hs_err *err)
{
    bool neg;
    uint64_t mag;
    int rc = get_int(g, key, "an integer", &neg, &mag, err);
    if (rc) return rc;
    if (neg) {
        if (mag > (uint64_t)INT64_MAX + 1) return out_of_range(g, key, neg, mag, "int64", err);
        *out = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    } else {
        if (mag > (uint64_t)INT64_MAX) return out_of_range(g, key, neg, mag, "int64", err);
        *out = (int64_t)mag;
    }
    return HS_OK;
}

int gguf_get_f32(const struct gguf_file *g, const char *key, float *out, struct hs_err *err)
{
    const struct gguf_value *v = get(g, key, err);
    if (!v) return HS_ERR_NOT_FOUND;
    if (v->type != GGUF_TYPE_FLOAT32 && v->type != GGUF_TYPE_FLOAT64) return mismatch(g, key, v, "a float", err);
    if (isfinite(v->v.f) && fabs(v->v.f) > 3.4028234663852886e38)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: key '%s': value %g does not fit float32", g->path, key, v->v.f);
    *out = (float)v->v.f;
    return HS_OK;
}

int gguf_get_bool(const struct gguf_file *g, const char *key, bool *out, struct hs_err *err)
{
    const struct gguf_value *v = get(g, key, err);
    if (!v) return HS_ERR_NOT_FOUND;
    int64_t i;
    if (v->type == GGUF_TYPE_BOOL) *out = v->v.b;
    else if (gguf_value_int(v, &i) && (i == 0 || i == 1)) *out = i == 1;
    else return mismatch(g, key, v, "a bool (or an integer 0 or 1)", err);
    return HS_OK;
}

bool gguf_value_int(const struct gguf_value *v, int64_t *out)
{
    if (is_unsigned(v->type)) {
        if (v->v.u > (uint64_t)INT64_MAX) return false;
        *out = (int64_t)v->v.u;
    } else if (is_signed(v->type)) {
        *out = v->v.i;
    } else if (v->type == GGUF_TYPE_BOOL) {
        *out = v->v.b;
    } else {
        return false;
    }
    return true;
}

int gguf_get_i64_at(const struct gguf_file *g, const char *key, uint64_t i, int64_t *out, uint64_t *n,
                    struct hs_err *err)
{
    *n = 0;
    const struct gguf_value *v = get(g, key, err);
    if (!v) return HS_ERR_NOT_FOUND;
    if (v->type != GGUF_TYPE_ARRAY) {
        if (v->type == GGUF_TYPE_BOOL) { *out = v->v.b; return HS_OK; }
        return gguf_get_i64(g, key, out, err);
    }
    const enum gguf_type et = v->v.arr.elem_type;
    if (!is_unsigned(et) && !is_signed(et) && et != GGUF_TYPE_BOOL)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: key '%s' is an array of %s, not of integers or bools", g->path,
                          key, gguf_value_type_name(et));
    *n = v->v.arr.n;
    if (i >= v->v.arr.n)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: key '%s' has %" PRIu64 " entries, entry %" PRIu64 " is missing",
                          g->path, key, v->v.arr.n, i);
    if (!gguf_value_int(&v->v.arr.items[i], out))
        return hs_err_set(err, HS_ERR_FORMAT, "%s: key '%s': entry %" PRIu64 " (%" PRIu64 ") does not fit int64",
                          g->path, key, i, v->v.arr.items[i].v.u);
    return HS_OK;
}

int gguf_get_str(const struct gguf_file *g, const char *key, char **out, struct hs_err *err)
{
    *out = NULL;
    const struct gguf_value *v = get(g, key, err);
    if (!v) return HS_ERR_NOT_FOUND;
    if (v->type != GGUF_TYPE_STRING) return mismatch(g, key, v, "a string", err);
    *out = hs_strndup(v->v.str.len ? v->v.str.ptr : "", (size_t)v->v.str.len);
    return HS_OK;
}

int gguf_get_arr(const struct gguf_file *g, const char *key, enum gguf_type elem_type,
                 const struct gguf_value **items, uint64_t *n, struct hs_err *err)
{
    const struct gguf_value *v = get(g, key, err);
    if (!v) return HS_ERR_NOT_FOUND;
    if (v->type != GGUF_TYPE_ARRAY) return mismatch(g, key, v, "an array", err);
    if (v->v.arr.elem_type != elem_type)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: key '%s' is an array of %s, not of %s", g->path, key,
                          gguf_value_type_name(v->v.arr.elem_type), gguf_value_type_name(elem_type));
    *items = v->v.arr.items;
    *n = v->v.arr.n;
    return HS_OK;
}
