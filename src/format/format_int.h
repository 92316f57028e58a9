/* format_int.h — private to src/format: building tensor sets. */
#ifndef HS_FORMAT_INT_H
#define HS_FORMAT_INT_H

#include "format/format.h"
#include "sys/sys.h"

#include <jansson.h>

/* An empty set; files are added with tensor_set_add_file (ownership of the map moves
 * to the set) and tensors with tensor_set_add. */
struct tensor_set *tensor_set_new(void);
/* Takes ownership of *m (the caller's struct is zeroed); returns the file index. */
int tensor_set_add_file(struct tensor_set *ts, struct sys_map *m);
/* Add a view; the name is copied. Checks invariants 1-3 of format.h against the file and
 * returns HS_ERR_FORMAT naming the tensor when one fails. `what` names the source in
 * messages (usually the file path). */
int tensor_set_add(struct tensor_set *ts, const char *name, size_t name_len, enum dtype dtype,
                   int n_dims, const int64_t *shape, int file_index, uint64_t file_offset,
                   uint64_t n_bytes, struct hs_err *err);
/* String metadata of the set (safetensors "__metadata__" of file 0); both strings are
 * copied; a second put of the same key replaces the value. */
void tensor_set_meta_put(struct tensor_set *ts, const char *key, const char *value);
const char *tensor_set_meta_get(const struct tensor_set *ts, const char *key); /* NULL if absent */
/* "an object", "a string", ... for messages about a JSON value of the wrong kind. */
const char *format_json_kind(const json_t *v);

/* The tensors a writer (gguf_write.c, st_write.c) was given, in the order given: their
 * data is borrowed until the file is written. */
struct wtensor {
    char *name;                     /* owned */
    enum dtype dtype;
    int n_dims;
    int64_t shape[TENSOR_MAX_DIMS]; /* PyTorch order */
    const void *data;               /* borrowed */
    uint64_t n_bytes;
};
struct wtensor_list {
    struct wtensor *v;
    int n, cap;
};
/* Append a tensor whose arguments the writer checked (the name is copied). */
void wtensor_list_add(struct wtensor_list *l, const char *name, enum dtype dtype, int n_dims,
                      const int64_t *shape, const void *data, uint64_t n_bytes);
void wtensor_list_free(struct wtensor_list *l);

/* Check that no two tensors of the same file overlap; HS_ERR_FORMAT names both. */
int tensor_set_check_overlaps(const struct tensor_set *ts, struct hs_err *err);

#endif
