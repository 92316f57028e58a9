/* safetensors.c — the safetensors reader: one file, a sharded set behind an index, or a
 * model directory holding either.
 *
 * Design note
 * -----------
 * A safetensors file is a length-prefixed JSON header followed by raw tensor bytes:
 *
 *   OFFSET   SIZE  FIELD
 *   0        8     N, the header length in bytes (u64, little-endian)
 *   8        N     header: one JSON object, UTF-8; may end in spaces (our writer pads it so
 *                  that 8 + N is a multiple of 8)
 *   8+N      ...   data: every tensor's bytes, little-endian, row-major (last dim contiguous)
 *
 * The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}; the
 * offsets count from the byte after the header (absolute = 8 + N + begin). An optional
 * "__metadata__" entry maps strings to strings. The sharded form adds an index,
 *
 *   model.safetensors.index.json   {"metadata": {...}, "weight_map": {tensor: shard file}}
 *
 * whose shard names are resolved next to the index file.
 *
 * Invariants (each is checked before a view is created; a failure is an hs_err naming the
 * file, the tensor or key, and the reason):
 *   1. 0 < N <= ST_HEADER_MAX and 8 + N <= file size; the header is one JSON object with
 *      no duplicate keys.
 *   2. "__metadata__", when present, is an object of string values.
 *   3. A tensor entry has exactly the keys dtype, shape, data_offsets. dtype is a known
 *      safetensors name; F32, F16 and BF16 are accepted, and I64 (Flash-Next keeps its
 *      n-gram hash constants in I64 buffers; the model reads them, never computes with
 *      them); other known names are HS_ERR_UNSUPPORTED. shape has at most TENSOR_MAX_DIMS positive integers (zero
 *      dims: a scalar). 0 <= begin <= end <= data size, and end - begin equals the shape's
 *      element count times the element size, computed without overflow.
 *   4. Tensors of one file do not overlap.
 *   5. Sharded: shard names are plain file names (no '/', no ".."); each shard is mapped
 *      once; the index and the shards agree exactly — every tensor of weight_map is in
 *      its shard and every tensor of a shard is in weight_map under that shard.
 *   6. Views are zero-copy: they point into the read-only mappings owned by the set. Their
 *      data is not necessarily aligned (files from other writers need not pad).
 */
#include "format/format_int.h"

#include <inttypes.h>
#include <jansson.h>
#include <string.h>

#define ST_HEADER_MAX (UINT64_C(100) << 20)
#define ST_INDEX_MAX (UINT64_C(64) << 20)
#define ST_MAX_SHARDS 10000
#define ST_INDEX_NAME "model.safetensors.index.json"
#define ST_SINGLE_NAME "model.safetensors"
#define ST_METADATA_KEY "__metadata__"

/* Names longer than this are cut in messages (the error buffer is 1 KiB). */
#define NM(s) 200, (s)

/* Every dtype name of the safetensors format; dtype < 0 marks a known but unsupported one,
 * so it is told apart from a name that is simply wrong. */
static const struct st_dtype {
    const char *name;
    int dtype;
} st_dtypes[] = {
    { "F32", DTYPE_F32 }, { "F16", DTYPE_F16 }, { "BF16", DTYPE_BF16 },
    { "F64", -1 }, { "I64", DTYPE_I64 }, { "U64", -1 }, { "I32", -1 }, { "U32", -1 },
    { "I16", -1 }, { "U16", -1 }, { "I8", -1 }, { "U8", -1 }, { "BOOL", -1 },
    { "F8_E4M3", -1 }, { "F8_E5M2", -1 }, { "F8_E8M0", -1 }, { "F6_E2M3", -1 },
    { "F6_E3M2", -1 }, { "F4", -1 }, { "C64", -1 },
};

static const struct st_dtype *st_dtype_find(const char *name)
{
    for (size_t i = 0; i < HS_ARRAY_LEN(st_dtypes); i++)
        if (strcmp(st_dtypes[i].name, name) == 0) return &st_dtypes[i];
    return NULL;
}

/* ---- one file ------------------------------------------------------------------------ */

/* Validate the length prefix of a mapped file and parse its header (invariants 1-2).
 * On success *root_out is owned by the caller and *data_start is 8 + N. err may be NULL. */
static int st_header_load(const struct sys_map *m, json_t **root_out, uint64_t *data_start,
                          struct hs_err *err)
{
    const char *path = m->path ? m->path : "?";
    *root_out = NULL;
    if (m->len < 8)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: %" PRIu64 " bytes is too short for the 8-byte header length",
                          path, m->len);
    uint64_t n = hs_rd_u64(m->data);
    if (n == 0) return hs_err_set(err, HS_ERR_FORMAT, "%s: header length is 0", path);
    if (n > m->len - 8)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: header length %" PRIu64 " runs past the file end (%" PRIu64 " bytes)",
                          path, n, m->len);
    if (n > ST_HEADER_MAX)
        return hs_err_set(err, HS_ERR_LIMIT, "%s: header length %" PRIu64 " is over the %" PRIu64 "-byte limit",
                          path, n, ST_HEADER_MAX);
    json_error_t jerr;
    json_t *root = json_loadb((const char *)m->data + 8, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: header JSON, line %d, column %d: %s", path,
                          jerr.line, jerr.column, jerr.text);
    if (!json_is_object(root)) {
        int rc = hs_err_set(err, HS_ERR_FORMAT, "%s: header is %s, not a JSON object", path, format_json_kind(root));
        json_decref(root);
        return rc;
    }
    json_t *meta = json_object_get(root, ST_METADATA_KEY);
    if (meta) {
        int rc = HS_OK;
        if (!json_is_object(meta)) {
            rc = hs_err_set(err, HS_ERR_FORMAT, "%s: %s is %s, not an object of strings", path,
                            ST_METADATA_KEY, format_json_kind(meta));
        } else {
            const char *k;
            json_t *v;
            json_object_foreach(meta, k, v) {
                if (json_is_string(v)) continue;
                rc = hs_err_set(err, HS_ERR_FORMAT, "%s: %s key '%.*s' is %s, not a string", path,
                                ST_METADATA_KEY, NM(k), format_json_kind(v));
                break;
            }
        }
        if (rc != HS_OK) { json_decref(root); return rc; }
    }
    *root_out = root;
    *data_start = 8 + n;
    return HS_OK;
}

/* Read a JSON integer that must be >= 0. */
static bool json_get_u64(const json_t *v, uint64_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < 0) return false;
    *out = (uint64_t)json_integer_value(v);
    return true;
}

/* Check one header entry (invariant 3) and add it to the set as file fi's tensor. */
static int st_tensor_add(struct tensor_set *ts, int fi, const char *name, const json_t *e,
                         uint64_t data_start, struct hs_err *err)
{
    const struct sys_map *m = tensor_set_file(ts, fi);
    const char *path = m->path;
    if (!json_is_object(e))
        return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': entry is %s, not an object",
                          path, NM(name), format_json_kind(e));
    json_t *jd = NULL, *js = NULL, *jo = NULL;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)e, k, v) {
        if (strcmp(k, "dtype") == 0) jd = v;
        else if (strcmp(k, "shape") == 0) js = v;
        else if (strcmp(k, "data_offsets") == 0) jo = v;
        else
            return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': unexpected key '%.*s'",
                              path, NM(name), 64, k);
    }
    const char *missing = !jd ? "dtype" : !js ? "shape" : !jo ? "data_offsets" : NULL;
    if (missing)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': missing '%s'", path, NM(name), missing);

    if (!json_is_string(jd))
        return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': dtype is %s, not a string",
                          path, NM(name), format_json_kind(jd));
    const char *dname = json_string_value(jd);
    const struct st_dtype *sd = st_dtype_find(dname);
    if (!sd)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': unknown dtype '%.*s'",
                          path, NM(name), 32, dname);

    if (!json_is_array(js))
        return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': shape is %s, not an array",
                          path, NM(name), format_json_kind(js));
    size_t n_dims = json_array_size(js);
    if (n_dims > TENSOR_MAX_DIMS)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': %zu dimensions (at most %d supported)",
                          path, NM(name), n_dims, TENSOR_MAX_DIMS);
    int64_t shape[TENSOR_MAX_DIMS] = { 0 };
    for (size_t i = 0; i < n_dims; i++) {
        uint64_t d;
        if (!json_get_u64(json_array_get(js, i), &d))
            return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': shape[%zu] is not a non-negative integer",
                              path, NM(name), i);
        if (d == 0)
            return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': shape[%zu] is 0; zero-size tensors are not supported",
                              path, NM(name), i);
        shape[i] = (int64_t)d;
    }

    uint64_t begin, end;
    if (!json_is_array(jo) || json_array_size(jo) != 2 || !json_get_u64(json_array_get(jo, 0), &begin) ||
        !json_get_u64(json_array_get(jo, 1), &end))
        return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': data_offsets must be [begin, end], two non-negative integers",
                          path, NM(name));
    if (begin > end)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': data_offsets begin %" PRIu64 " is after end %" PRIu64,
                          path, NM(name), begin, end);
    uint64_t data_len = m->len - data_start; /* data_start <= len: checked by st_header_load */
    if (end > data_len)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': data ends at %" PRIu64 ", past the %" PRIu64 " data bytes of the file",
                          path, NM(name), end, data_len);

    if (sd->dtype < 0)
        return hs_err_set(err, HS_ERR_UNSUPPORTED, "%s: tensor '%.*s': dtype %s is not supported (only F32, F16, BF16, I64)",
                          path, NM(name), sd->name);
    uint64_t want = dtype_info((enum dtype)sd->dtype)->block_bytes;
    for (size_t i = 0; i < n_dims; i++)
        if (hs_mul_overflow(want, (uint64_t)shape[i], &want))
            return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': the byte size of its shape overflows",
                              path, NM(name));
    if (want != end - begin)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s': data_offsets span %" PRIu64 " bytes but a %s tensor of its shape needs %" PRIu64,
                          path, NM(name), end - begin, sd->name, want);
    return tensor_set_add(ts, name, strlen(name), (enum dtype)sd->dtype, (int)n_dims, shape, fi,
                          data_start + begin, end - begin, err);
}

/* Map `path`, add it to the set and add all of its tensors. *fi_out gets its file index. */
static int st_file_read(struct tensor_set *ts, const char *path, int *fi_out, struct hs_err *err)
{
    struct sys_map m;
    int rc = sys_file_map(path, &m, err);
    if (rc != HS_OK) return rc;
    int fi = tensor_set_add_file(ts, &m); /* the set owns the mapping from here on */
    if (fi_out) *fi_out = fi;
    json_t *root;
    uint64_t data_start = 0;
    rc = st_header_load(tensor_set_file(ts, fi), &root, &data_start, err);
    if (rc != HS_OK) return rc;
    const char *name;
    json_t *e;
    json_object_foreach(root, name, e) {
        if (strcmp(name, ST_METADATA_KEY) == 0) {
            if (fi == 0) { /* st_header_load checked it is an object of strings */
                const char *mk;
                json_t *mv;
                json_object_foreach(e, mk, mv) tensor_set_meta_put(ts, mk, json_string_value(mv));
            }
            continue;
        }
        rc = st_tensor_add(ts, fi, name, e, data_start, err);
        if (rc != HS_OK) break;
    }
    json_decref(root);
    return rc;
}

static int st_open_single(const char *path, struct tensor_set **out, struct hs_err *err)
{
    struct tensor_set *ts = tensor_set_new();
    int rc = st_file_read(ts, path, NULL, err);
    if (rc == HS_OK) rc = tensor_set_check_overlaps(ts, err);
    if (rc != HS_OK) { tensor_set_free(ts); return rc; }
    *out = ts;
    return HS_OK;
}

/* ---- sharded sets --------------------------------------------------------------------- */

/* A shard name must stay inside the index's directory (invariant 5). */
static bool st_shard_name_ok(const char *s)
{
    return s[0] != '\0' && strcmp(s, ".") != 0 && !strchr(s, '/') && !strstr(s, "..");
}

/* Check that every tensor file fi contributed (views [first, count)) is mapped to `shard`. */
static int st_shard_check(const struct tensor_set *ts, int first, const json_t *wm, const char *shard,
                          const char *index_path, struct hs_err *err)
{
    for (int i = first; i < tensor_set_count(ts); i++) {
        const struct tensor_view *t = tensor_set_at(ts, i);
        const char *want = json_string_value(json_object_get(wm, t->name));
        if (!want)
            return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s' is in shard '%.*s' but not in weight_map",
                              index_path, NM(t->name), NM(shard));
        if (strcmp(want, shard) != 0)
            return hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s' is in shard '%.*s' but weight_map puts it in '%.*s'",
                              index_path, NM(t->name), NM(shard), NM(want));
    }
    return HS_OK;
}

static int st_index_load(struct tensor_set *ts, const char *index_path, struct hs_err *err)
{
    char *buf;
    size_t len;
    int rc = sys_file_read_all(index_path, ST_INDEX_MAX, &buf, &len, err);
    if (rc != HS_OK) return rc;
    json_error_t jerr;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    hs_free(buf);
    if (!root)
        return hs_err_set(err, HS_ERR_FORMAT, "%s: JSON, line %d, column %d: %s", index_path,
                          jerr.line, jerr.column, jerr.text);
    const char **shards = NULL; /* unique shard names in first-use order; borrowed from root */
    int n_shards = 0;
    char *dir = NULL;
    json_t *wm = json_object_get(root, "weight_map");
    if (!json_is_object(root)) {
        rc = hs_err_set(err, HS_ERR_FORMAT, "%s: the index is %s, not a JSON object", index_path, format_json_kind(root));
        goto done;
    }
    if (!json_is_object(wm)) {
        rc = hs_err_set(err, HS_ERR_FORMAT, "%s: 'weight_map' is %s, not an object", index_path,
                        wm ? format_json_kind(wm) : "missing");
        goto done;
    }
    if (json_object_size(wm) == 0) {
        rc = hs_err_set(err, HS_ERR_FORMAT, "%s: 'weight_map' is empty", index_path);
        goto done;
    }
    const char *slash = strrchr(index_path, '/');
    dir = slash ? hs_strndup(index_path, (size_t)(slash - index_path) + (slash == index_path)) : hs_strdup(".");

    const char *name;
    json_t *v;
    json_object_foreach(wm, name, v) {
        if (!json_is_string(v)) {
            rc = hs_err_set(err, HS_ERR_FORMAT, "%s: weight_map['%.*s'] is %s, not a file name",
                            index_path, NM(name), format_json_kind(v));
            goto done;
        }
        const char *shard = json_string_value(v);
        if (!st_shard_name_ok(shard)) {
            rc = hs_err_set(err, HS_ERR_FORMAT, "%s: weight_map['%.*s']: shard '%.*s' is not a plain file name beside the index",
                            index_path, NM(name), NM(shard));
            goto done;
        }
        bool seen = false;
        for (int i = n_shards - 1; i >= 0 && !seen; i--) seen = strcmp(shards[i], shard) == 0;
        if (seen) continue;
        if (n_shards == ST_MAX_SHARDS) {
            rc = hs_err_set(err, HS_ERR_LIMIT, "%s: more than %d shards", index_path, ST_MAX_SHARDS);
            goto done;
        }
        shards = hs_realloc(shards, sizeof *shards * (size_t)(n_shards + 1));
        shards[n_shards++] = shard;
        /* Each shard is mapped and checked as soon as it is first named, so a missing
         * file fails before the rest of a large map is walked. */
        char *spath = sys_path_join(dir, shard);
        int first = tensor_set_count(ts);
        rc = st_file_read(ts, spath, NULL, err);
        hs_free(spath);
        if (rc == HS_OK) rc = st_shard_check(ts, first, wm, shard, index_path, err);
        if (rc != HS_OK) {
            hs_err_prefix(err, "%s: shard '%.*s': ", index_path, NM(shard));
            goto done;
        }
    }
    /* Every shard of the map is loaded and holds only its own tensors; what is left to
     * find is a tensor the map promises but its shard lacks. */
    json_object_foreach(wm, name, v) {
        if (!tensor_set_find(ts, name)) {
            rc = hs_err_set(err, HS_ERR_FORMAT, "%s: tensor '%.*s' is listed for shard '%.*s' but that shard does not hold it",
                            index_path, NM(name), NM(json_string_value(v)));
            goto done;
        }
    }
    rc = tensor_set_check_overlaps(ts, err);
done:
    hs_free(dir);
    hs_free(shards);
    json_decref(root);
    return rc;
}

static int st_open_index(const char *index_path, struct tensor_set **out, struct hs_err *err)
{
    struct tensor_set *ts = tensor_set_new();
    int rc = st_index_load(ts, index_path, err);
    if (rc != HS_OK) { tensor_set_free(ts); return rc; }
    *out = ts;
    return HS_OK;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

int safetensors_open(const char *path, struct tensor_set **out, struct hs_err *err)
{
    *out = NULL;
    if (sys_path_is_dir(path)) {
        char *index = sys_path_join(path, ST_INDEX_NAME);
        char *single = sys_path_join(path, ST_SINGLE_NAME);
        int rc;
        if (sys_path_exists(index)) rc = st_open_index(index, out, err);
        else if (sys_path_exists(single)) rc = st_open_single(single, out, err);
        else rc = hs_err_set(err, HS_ERR_NOT_FOUND, "%s: no weights: looked for %s and %s", path,
                             ST_INDEX_NAME, ST_SINGLE_NAME);
        hs_free(index);
        hs_free(single);
        return rc;
    }
    if (ends_with(path, ".json")) return st_open_index(path, out, err);
    return st_open_single(path, out, err);
}

/* ---- metadata ---------------------------------------------------------------------- */

const char *safetensors_metadata(const struct tensor_set *ts, const char *key)
{
    return ts && key ? tensor_set_meta_get(ts, key) : NULL;
}
