/*
 * attn.c — causal GQA attention of one query position. Each query head reduces over its
 * keys from position 0 in ascending order, so the result does not depend on how the
 * prompt was cut into forwards or which heads a thread took.
 */
#include <math.h>

#include "kernels/kernels_int.h"

void kern_expsub(float *x, int64_t n, float m)
{
    for (int64_t i = 0; i < n; i++) x[i] = kern_expf(x[i] - m);
}

float kern_attn_scores(float *scratch, const float *qj, const float *km, int64_t kv_ld,
                       int64_t hd, int64_t n_pos, float scale, kern_dot_fn dot, kern_expsub_fn expsub)
{
    float mx = 0.0f;
    for (int64_t t = 0; t < n_pos; t++) {
        scratch[t] = dot(qj, km + t * kv_ld, hd) * scale;
        if (t == 0 || scratch[t] > mx) mx = scratch[t];
    }
    expsub(scratch, n_pos, mx);
    float sum = 0.0f;
    for (int64_t t = 0; t < n_pos; t++) sum = sum + scratch[t];
    return sum;
}

void kern_attn(float *out, const float *q, const float *kc, const float *vc, int64_t kv_ld,
               int64_t n_pos, int64_t hd, int64_t n_head, int64_t n_kv_head, float scale,
               float *scratch, int64_t h0, int64_t h1)
{
    int64_t group = n_head / n_kv_head;
    for (int64_t j = h0; j < h1; j++) {
        const float *qj = q + j * hd;
        int64_t m = j / group;
        float sum = kern_attn_scores(scratch, qj, kc + m * hd, kv_ld, hd, n_pos, scale, kern_dot, kern_expsub);
        float *oj = out + j * hd;
        for (int64_t d = 0; d < hd; d++) oj[d] = 0.0f;
        for (int64_t t = 0; t < n_pos; t++) {
            const float *vt = vc + t * kv_ld + m * hd;
            for (int64_t d = 0; d < hd; d++) oj[d] = fmaf(scratch[t], vt[d], oj[d]);
        }
        for (int64_t d = 0; d < hd; d++) oj[d] = oj[d] / sum;
    }
}

void kern_attn_tokens(float *out, int64_t out_ld, const float *q, int64_t q_ld, const float *kc,
                      const float *vc, int64_t kv_ld, int64_t n_pos0, int64_t n_tok, int64_t hd,
                      int64_t n_head, int64_t n_kv_head, float scale, float *scratch, int64_t h0,
                      int64_t h1)
{
    for (int64_t i = 0; i < n_tok; i++)
        kern_attn(out + i * out_ld, q + i * q_ld, kc, vc, kv_ld, n_pos0 + i, hd, n_head, n_kv_head, scale,
                  scratch, h0, h1);
}
