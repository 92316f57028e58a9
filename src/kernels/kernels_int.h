/* kernels_int.h — private to src/kernels: pieces the scalar references share with their
 * SIMD variants, so that each written order exists once. */
#ifndef HS_KERNELS_INT_H
#define HS_KERNELS_INT_H

#include "kernels/kernels.h"

static inline float kern_clampf(float v, float lo, float hi) { return v < lo ? lo : v > hi ? hi : v; }

/* A little-endian u16 into p[0..2) (block headers). */
static inline void kern_put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

/* The scales Q4_K and Q5_K share (q4k.c): writes d, dmin and the 12 packed scale bytes to
 * blk[0..16) and the quants of the 256 values of x, in [0, qmax], to q. */
void kern_kq_scales_from_f32(const float *x, float qmax, uint8_t *blk, uint8_t q[KERN_QK]);

typedef float (*kern_dot_fn)(const float *a, const float *b, int64_t n);

/* Scores of one query head over keys 0..n_pos-1 (key t at km + t * kv_ld), in kern_attn's
 * order: scratch[t] = dot(q, k_t) * scale, max by ascending t, then scratch[t] =
 * kern_expf(scratch[t] - max) (by expsub), summed in ascending t. Returns the sum. */
/* x[i] = kern_expf(x[i] - m) for i < n: the variant's vector form of the exp pass. */
typedef void (*kern_expsub_fn)(float *x, int64_t n, float m);
void kern_expsub(float *x, int64_t n, float m);
void kern_expsub_avx2(float *x, int64_t n, float m);
void kern_expsub_avx512(float *x, int64_t n, float m);

float kern_attn_scores(float *scratch, const float *qj, const float *km, int64_t kv_ld,
                       int64_t hd, int64_t n_pos, float scale, kern_dot_fn dot, kern_expsub_fn expsub);

/* The Q4_K / Q6_K row-group layouts' several-token matmul through q4k_avx512.c's /
 * q6k_avx512.c's panel path (their note 3; q4k_avx2.c's note 2 for the AVX2 one): whole
 * groups [g0, g1) of the packed matrix wp (k values per row), all 16 rows of each stored,
 * kern_matmul_k's bits. Returns false, computing nothing, where that path does
 * not apply (fewer tokens than it takes, or rows too long for its stack panel). */
bool kern_q4kp_panels_avx512(float *y, int64_t y_ld, const void *wp, const struct kern_q8k_block *xq,
                             int64_t n_tok, int64_t k, int64_t g0, int64_t g1);
bool kern_q4kp_panels_avx2(float *y, int64_t y_ld, const void *wp, const struct kern_q8k_block *xq,
                           int64_t n_tok, int64_t k, int64_t g0, int64_t g1);
bool kern_q4kp_panels_avxvnni(float *y, int64_t y_ld, const void *wp, const struct kern_q8k_block *xq,
                              int64_t n_tok, int64_t k, int64_t g0, int64_t g1);
/* The Q8_0 panel layout's several-token matmul through matmul_avx2.c's Q8_0 panel path (its
 * note 7; q8p_avx2.c note 5): 8-row halves [h0, h1) of the packed matrix wp (rows 8 h0 ..
 * 8 h1 - 1, all stored), kern_matmul's Q8_0 bits. Returns false, computing nothing, where
 * the rows are too long for its stack panel (k > 8192). */
bool kern_q8p_panels_avx2(float *y, int64_t y_ld, const void *wp, const struct kern_q8_block *xq,
                          int64_t n_tok, int64_t k, int64_t h0, int64_t h1);
bool kern_q8p_panels_avxvnni(float *y, int64_t y_ld, const void *wp, const struct kern_q8_block *xq,
                             int64_t n_tok, int64_t k, int64_t h0, int64_t h1); /* the same, AVX-VNNI */
bool kern_q6kp_panels_avx512(float *y, int64_t y_ld, const void *wp, const struct kern_q8k_block *xq,
                             int64_t n_tok, int64_t k, int64_t g0, int64_t g1);

#endif
