/*
 * xtype_dequant.c — test driver for tests/golden/xtype_parity.sh (the [F12] weight types
 * Q5_1, IQ4_NL, IQ4_XS). Links libheadstart.a and llama.cpp's prebuilt libggml-base (the
 * npm package's), so that llama.cpp's own dequantizer (ggml_get_type_traits(t)->to_float)
 * reads the same bytes as ours (kern_row_to_f32).
 *
 *   xtype_dequant same IN.gguf        every Q5_1 / IQ4_NL / IQ4_XS tensor of IN, every row:
 *                                     ours and llama.cpp's f32 values memcmp-equal; then
 *                                     4096 blocks of random bytes per type (finite f16
 *                                     scales) likewise. Prints one line per type.
 *   xtype_dequant f32 IN.gguf OUT.gguf  OUT = IN with every block-type tensor (Q8_0, K-quants,
 *                                     the three above) as f32 from our dequantizer and
 *                                     general.file_type 0 (q4k_dequant.c's job, more types)
 *   xtype_dequant poison IN.gguf OUT.gguf NAME
 *                                     OUT = IN with the f16 scale of the last block of
 *                                     tensor NAME set to NaN (a hostile file)
 * Exit 0 ok, 1 a difference or an error (message on stderr), 2 usage.
 *
 * Invariant: dequantization is exact f32 arithmetic on the same f16 scales and small
 * integers in the same order (Q5_1 q * d then + m; IQ4_NL d * kv; IQ4_XS (d * (ls - 32)) *
 * kv), so any difference is a reading error on one side, never rounding noise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/format.h"
#include "kernels/kernels.h"
#include "ggml.h"

static int ggml_id(enum dtype dt)
{
    return dt == DTYPE_Q5_1 ? GGML_TYPE_Q5_1 : dt == DTYPE_IQ4_NL ? GGML_TYPE_IQ4_NL : dt == DTYPE_IQ4_XS ? GGML_TYPE_IQ4_XS : -1;
}

/* rows of k values at data: ours vs llama.cpp's; the number of differing values. */
static long long compare_rows(enum dtype dt, const void *data, int64_t rows, int64_t k)
{
    const struct ggml_type_traits *tr = ggml_get_type_traits((enum ggml_type)ggml_id(dt));
    float *a = malloc(sizeof(float) * (size_t)k), *b = malloc(sizeof(float) * (size_t)k);
    size_t rb = kern_row_bytes((enum kern_wtype)dt, k);
    long long bad = 0;
    for (int64_t r = 0; r < rows; r++) {
        kern_row_to_f32(a, data, (enum kern_wtype)dt, k, r);
        tr->to_float((const uint8_t *)data + (size_t)r * rb, b, k);
        for (int64_t i = 0; i < k; i++)
            if (memcmp(&a[i], &b[i], 4)) {
                if (!bad) fprintf(stderr, "xtype_dequant: %s row %lld value %lld: ours %a, llama.cpp %a\n",
                                  dtype_info(dt)->name, (long long)r, (long long)i, (double)a[i], (double)b[i]);
                bad++;
            }
    }
    free(a);
    free(b);
    return bad;
}

static int cmd_same(const char *in)
{
    struct hs_err err;
    hs_err_clear(&err);
    struct gguf_file *g = NULL;
    if (gguf_open(in, &g, &err)) {
        fprintf(stderr, "xtype_dequant: %s\n", err.msg);
        return 1;
    }
    const enum dtype dts[3] = { DTYPE_Q5_1, DTYPE_IQ4_NL, DTYPE_IQ4_XS };
    int rc = 0;
    for (int ti = 0; ti < 3; ti++) {
        const struct tensor_set *ts = gguf_tensors(g);
        long long tensors = 0, values = 0, bad = 0;
        for (int i = 0; i < tensor_set_count(ts); i++) {
            const struct tensor_view *t = tensor_set_at(ts, i);
            if (t->dtype != dts[ti]) continue;
            int64_t k = t->shape[t->n_dims - 1], rows = (int64_t)(tensor_n_elems(t) / (uint64_t)k);
            bad += compare_rows(t->dtype, t->data, rows, k);
            tensors++;
            values += rows * k;
        }
        /* random blocks: any bytes, the f16 scales made finite (a NaN compares unequal) */
        uint64_t s = 0x9E3779B97F4A7C15ull * (uint64_t)(ti + 1);
        int64_t k = 4096 * (dts[ti] == DTYPE_IQ4_XS ? 256 : 32);
        size_t nbytes = kern_row_bytes((enum kern_wtype)dts[ti], k), bb = dtype_info(dts[ti])->block_bytes;
        uint8_t *raw = malloc(nbytes);
        for (size_t i = 0; i < nbytes; i++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            raw[i] = (uint8_t)(s >> 24);
        }
        for (size_t b = 0; b < nbytes / bb; b++) {
            raw[b * bb + 1] = (uint8_t)(raw[b * bb + 1] & 0xbf); /* exponent below all ones */
            if (dts[ti] == DTYPE_Q5_1) raw[b * bb + 3] = (uint8_t)(raw[b * bb + 3] & 0xbf);
        }
        long long rbad = compare_rows(dts[ti], raw, 1, k);
        free(raw);
        printf("%s: %lld tensors, %lld values from the file, %lld random values: %lld differ\n",
               dtype_info(dts[ti])->name, tensors, values, (long long)k, bad + rbad);
        if (bad + rbad) rc = 1;
    }
    gguf_close(g);
    return rc;
}

static int cmd_rewrite(const char *in, const char *out, const char *poison)
{
    struct hs_err err;
    hs_err_clear(&err);
    struct gguf_file *g = NULL;
    if (gguf_open(in, &g, &err)) {
        fprintf(stderr, "xtype_dequant: %s\n", err.msg);
        return 1;
    }
    struct gguf_writer *w = gguf_writer_new();
    for (int i = 0; i < gguf_n_kv(g); i++) {
        const char *key = gguf_kv_key(g, i);
        if (!poison && strcmp(key, "general.file_type") == 0) gguf_writer_set_u32(w, key, 0);
        else gguf_writer_set_value(w, key, gguf_kv_value(g, i));
    }
    const struct tensor_set *ts = gguf_tensors(g);
    int n = tensor_set_count(ts), found = 0;
    void **owned = calloc((size_t)n, sizeof(void *));
    for (int i = 0; i < n; i++) {
        const struct tensor_view *t = tensor_set_at(ts, i);
        if (poison) {
            if (strcmp(t->name, poison) || dtype_info(t->dtype)->block_elems == 1) {
                gguf_writer_add_tensor(w, t->name, t->dtype, t->n_dims, t->shape, t->data, t->n_bytes);
                continue;
            }
            uint8_t *copy = malloc(t->n_bytes);
            memcpy(copy, t->data, t->n_bytes);
            size_t last = t->n_bytes - dtype_info(t->dtype)->block_bytes;
            copy[last] = 0x00;
            copy[last + 1] = 0x7e; /* f16 quiet NaN */
            owned[i] = copy;
            found = 1;
            gguf_writer_add_tensor(w, t->name, t->dtype, t->n_dims, t->shape, copy, t->n_bytes);
            continue;
        }
        bool quant = t->dtype == DTYPE_Q4_K || t->dtype == DTYPE_Q5_K || t->dtype == DTYPE_Q6_K ||
                     t->dtype == DTYPE_Q8_0 || ggml_id(t->dtype) >= 0;
        if (!quant || t->n_dims < 1) {
            gguf_writer_add_tensor(w, t->name, t->dtype, t->n_dims, t->shape, t->data, t->n_bytes);
            continue;
        }
        int64_t cols = t->shape[t->n_dims - 1], rows = 1;
        for (int d = 0; d < t->n_dims - 1; d++) rows *= t->shape[d];
        float *f = malloc((size_t)(rows * cols) * sizeof(float));
        for (int64_t r = 0; r < rows; r++) kern_row_to_f32(f + r * cols, t->data, (enum kern_wtype)t->dtype, cols, r);
        owned[i] = f;
        gguf_writer_add_tensor(w, t->name, DTYPE_F32, t->n_dims, t->shape, f, (uint64_t)(rows * cols) * sizeof(float));
    }
    int rc = poison && !found ? 1 : gguf_writer_write(w, out, &err);
    if (poison && !found) fprintf(stderr, "xtype_dequant: no block-type tensor '%s'\n", poison);
    else if (rc) fprintf(stderr, "xtype_dequant: %s\n", err.msg);
    gguf_writer_free(w);
    for (int i = 0; i < n; i++) free(owned[i]);
    free(owned);
    gguf_close(g);
    return rc ? 1 : 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "same")) return cmd_same(argv[2]);
    if (argc == 4 && !strcmp(argv[1], "f32")) return cmd_rewrite(argv[2], argv[3], NULL);
    if (argc == 5 && !strcmp(argv[1], "poison")) return cmd_rewrite(argv[2], argv[3], argv[4]);
    fprintf(stderr, "usage: xtype_dequant same IN.gguf | f32 IN.gguf OUT.gguf | poison IN.gguf OUT.gguf NAME\n");
    return 2;
}
