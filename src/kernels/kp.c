/*
 * kp.c — the row-group layout of the K-quant types ("KP", [F10]): the entry points that take
 * a weight type and forward to the type's own files (q4kp.c, q4kp_avx2.c and q4kp_avx512.c
 * for Q4_K; q6kp.c, q6kp_avx2.c and q6kp_avx512.c for Q6_K), as kern_matmul_k forwards to q5k.c and q6k.c.
 *
 * Design note:
 *   1. Why a layout: a decode step of several sequences multiplies every matrix by a few
 *      tokens. On the K-quant rows a VNNI kernel must reduce each row's products across a
 *      vector (horizontal sums) and run the per-token float steps one row at a time; with 16
 *      rows side by side in the lanes of one vector (lane i = row 16 g + i, as the Q8_0 panel
 *      layout has them, q8p.c) every integer sum and every float step is lane-wise, the
 *      weight vectors are loaded once per tile of tokens, and nothing is reduced.
 *   2. Only Q4_K and Q6_K have it: they are what Q4_K_M files are made of. Q5_K rows stay.
 *   3. kern_matmul_kp_avx2, kern_matmul_kp_avxvnni and kern_matmul_kp_avx512 are the avx2,
 *      avxvnni and AVX-512 tables' kern_ops.matmul_kp; they only forward, so they need no
 *      ISA flags, but exist in x86 builds only, as the kernels they call (the avxvnni ones
 *      are the AVX2 files built again: q4kp_avxvnni.c, q6kp_avxvnni.c). The layouts are the same for both: 16-row
 *      groups, which an AVX2 kernel takes as two halves of 8 rows (q4kp_avx2.c,
 *      q6kp_avx2.c).
 */
#include "kernels/kernels.h"

size_t kern_kp_group_bytes(int wt, int64_t k)
{
    if (k < KERN_QK || k % KERN_QK) return 0;
    if (wt == KERN_K_Q4_K) return kern_q4kp_group_bytes(k);
    if (wt == KERN_K_Q6_K) return kern_q6kp_group_bytes(k);
    return 0;
}

size_t kern_kp_bytes(int wt, int64_t rows, int64_t k)
{
    if (rows < 1) return 0;
    return (size_t)((rows + KERN_KP_ROWS - 1) / KERN_KP_ROWS) * kern_kp_group_bytes(wt, k);
}

void kern_kp_pack(void *dst, const void *w, int wt, int64_t rows, int64_t k, int64_t g0, int64_t g1)
{
    if (wt == KERN_K_Q4_K) kern_q4kp_pack(dst, w, rows, k, g0, g1);
    else if (wt == KERN_K_Q6_K) kern_q6kp_pack(dst, w, rows, k, g0, g1);
}

void kern_kp_row(void *out, const void *wp, int wt, int64_t k, int64_t row)
{
    if (wt == KERN_K_Q4_K) kern_q4kp_row(out, wp, k, row);
    else if (wt == KERN_K_Q6_K) kern_q6kp_row(out, wp, k, row);
}

#if defined(__x86_64__) || defined(__i386__)
void kern_matmul_kp_avx2(float *y, int64_t y_ld, const void *wp, int wt, const struct kern_q8k_block *xq,
                         int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    if (wt == KERN_K_Q4_K) kern_matmul_q4kp_avx2(y, y_ld, wp, xq, n_tok, k, r0, r1);
    else kern_matmul_q6kp_avx2(y, y_ld, wp, xq, n_tok, k, r0, r1); /* KERN_K_Q6_K */
}

void kern_matmul_kp_avxvnni(float *y, int64_t y_ld, const void *wp, int wt, const struct kern_q8k_block *xq,
                            int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    if (wt == KERN_K_Q4_K) kern_matmul_q4kp_avxvnni(y, y_ld, wp, xq, n_tok, k, r0, r1);
    else kern_matmul_q6kp_avxvnni(y, y_ld, wp, xq, n_tok, k, r0, r1); /* KERN_K_Q6_K */
}

void kern_matmul_kp_avx512(float *y, int64_t y_ld, const void *wp, int wt, const struct kern_q8k_block *xq,
                           int64_t n_tok, int64_t k, int64_t r0, int64_t r1)
{
    if (wt == KERN_K_Q4_K) kern_matmul_q4kp_avx512(y, y_ld, wp, xq, n_tok, k, r0, r1);
    else kern_matmul_q6kp_avx512(y, y_ld, wp, xq, n_tok, k, r0, r1); /* KERN_K_Q6_K */
}
#endif
