/*
 * q4k_dequant.c — test driver for tests/golden/q4k_parity.sh: copy a GGUF with every
 * quantized tensor (Q4_K, Q5_K, Q6_K, Q8_0) replaced by its f32 values from our row dequantizer
 * (kern_row_to_f32), every other tensor and every metadata key as they are, and
 * general.file_type set to 0 (all f32). llama.cpp then computes the "same weights"
 * without any activation quantization, which separates our reading of the block formats
 * from the activation-quantization noise.
 *
 *   q4k_dequant IN.gguf OUT.gguf        exit 0 ok, 1 error (message on stderr), 2 usage
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/format.h"
#include "kernels/kernels.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: q4k_dequant IN.gguf OUT.gguf\n");
        return 2;
    }
    struct hs_err err;
    hs_err_clear(&err);
    struct gguf_file *g = NULL;
    if (gguf_open(argv[1], &g, &err)) {
        fprintf(stderr, "q4k_dequant: %s\n", err.msg);
        return 1;
    }
    struct gguf_writer *w = gguf_writer_new();
    for (int i = 0; i < gguf_n_kv(g); i++) {
        const char *key = gguf_kv_key(g, i);
        if (strcmp(key, "general.file_type") == 0) gguf_writer_set_u32(w, key, 0);
        else gguf_writer_set_value(w, key, gguf_kv_value(g, i));
    }
    const struct tensor_set *ts = gguf_tensors(g);
    int n = tensor_set_count(ts);
    float **owned = calloc((size_t)n, sizeof(float *));
    for (int i = 0; i < n; i++) {
        const struct tensor_view *t = tensor_set_at(ts, i);
        bool quant = t->dtype == DTYPE_Q4_K || t->dtype == DTYPE_Q5_K || t->dtype == DTYPE_Q6_K ||
                     t->dtype == DTYPE_Q8_0;
        if (!quant || t->n_dims < 1) {
            gguf_writer_add_tensor(w, t->name, t->dtype, t->n_dims, t->shape, t->data, t->n_bytes);
            continue;
        }
        int64_t cols = t->shape[t->n_dims - 1], rows = 1;
        for (int d = 0; d < t->n_dims - 1; d++) rows *= t->shape[d];
        owned[i] = malloc((size_t)(rows * cols) * sizeof(float));
        for (int64_t r = 0; r < rows; r++)
            kern_row_to_f32(owned[i] + r * cols, t->data, (enum kern_wtype)t->dtype, cols, r);
        gguf_writer_add_tensor(w, t->name, DTYPE_F32, t->n_dims, t->shape, owned[i],
                               (uint64_t)(rows * cols) * sizeof(float));
    }
    int rc = gguf_writer_write(w, argv[2], &err);
    if (rc) fprintf(stderr, "q4k_dequant: %s\n", err.msg);
    gguf_writer_free(w);
    for (int i = 0; i < n; i++) free(owned[i]);
    free(owned);
    gguf_close(g);
    return rc ? 1 : 0;
}
