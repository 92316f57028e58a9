/*
 * q8p.c — the Q8_0 panel layout ("Q8P"): Q8_0 weights rearranged once, at engine start, so
 * that a matmul with VNNI reads 16 rows' block sums out of one vpdpbusd chain, with no
 * per-call repacking and no horizontal sums, for any number of tokens (q8p_avx512.c).
 * Portable code: the layout and its packer; the matmul over it is a SIMD variant's
 * (kern_ops.matmul_q8p, NULL in the tables that have none).
 *
 * Layout of a matrix of `rows` rows and k values per row (nb = k / 32 blocks), all
 * little-endian; rows are taken in groups of 16 (the last group padded with zero rows):
 *
 *   group g (rows 16g .. 16g+15) at byte g * kern_q8p_group_bytes(k), holding its nb blocks
 *   in nb slots; block b sits in slot kern_q8p_slot(b, nb): the blocks of partial sum 0
 *   (b % 8 == 0: 0, 8, 16, ...), then those of partial sum 1 (1, 9, 17, ...), ..., 7 (note 4).
 *   Slots in pairs (2p, 2p+1) of 1088 bytes (17 cache lines, so every vector below is 64-byte
 *   aligned and the whole group is one sequential stream):
 *     OFFSET                 SIZE  what
 *     1088 p + 512 h + 64 s  64    slot 2p+h, step s (0..7): 4 bytes per row i (lane i):
 *                                  quants 4s .. 4s+3 of row 16g+i's block, each xor 0x80
 *                                  (q + 128 as an unsigned byte: vpdpbusd's unsigned operand)
 *     1088 p + 1024 + 32 h   32    slot 2p+h: the 16 rows' f16 scales, row i at 2 i
 *   An odd nb leaves the last pair's second half zero.
 *
 * Design note:
 *   1. A byte permutation of the Q8_0 data plus a constant xor: nothing is rounded, so a
 *      kernel over this layout can keep the Q8_0 matmul's float order (kernels.h) exactly,
 *      and kern_q8p_row recovers each Q8_0 row bit for bit.
 *   2. Same bytes per 16 rows as Q8_0 (16 * 34 per block), so the copy costs what the
 *      matrix costs; padding is at most 15 rows per matrix and half a pair per group.
 *   3. The offset's share (128 * sum of the activation's quants per block) belongs to the
 *      token, not the weights: the kernel subtracts it, so the layout stores no correction.
 *      kern_q8p_corr computes it (negated: a block sum starts from it); the engine does so
 *      once per quantized activation, beside the quantization, for all the matrices that
 *      read it.
 *   4. The slot order is the float order's: the Q8_0 contract keeps 8 partial sums, block b
 *      going to sum b % 8 in ascending b, and the 8 sums are independent until the final
 *      tree. With the blocks of one sum in consecutive slots a kernel finishes sum 0 over
 *      the whole row, then sum 1, ..., each in one register per (group, token) that never
 *      leaves the register file, reading the group front to back: the same fma sequence
 *      per sum as the scalar code, so the same bits.
 */
#include <string.h>

#include "kernels/kernels.h"

size_t kern_q8p_group_bytes(int64_t k)
{
    size_t nb = (size_t)(k / KERN_Q8_BLOCK);
    return (nb + 1) / 2 * KERN_Q8P_PAIR_BYTES;
}

size_t kern_q8p_bytes(int64_t rows, int64_t k)
{
    if (rows < 1 || k < KERN_Q8_BLOCK || k % KERN_Q8_BLOCK != 0) return 0;
    return (size_t)((rows + KERN_Q8P_ROWS - 1) / KERN_Q8P_ROWS) * kern_q8p_group_bytes(k);
}

void kern_q8p_pack(void *dst, const void *w, int64_t rows, int64_t k, int64_t g0, int64_t g1)
{
    const int64_t nb = k / KERN_Q8_BLOCK;
    const size_t rb = (size_t)nb * KERN_Q8_BLOCK_BYTES, gb = kern_q8p_group_bytes(k);
    for (int64_t g = g0; g < g1; g++) {
        uint8_t *gp = (uint8_t *)dst + (size_t)g * gb;
        memset(gp, 0, gb);
        for (int i = 0; i < KERN_Q8P_ROWS; i++) {
            int64_t r = g * KERN_Q8P_ROWS + i;
            for (int64_t b = 0; b < nb; b++) {
                /* a padding row: quants 0 (0x80 offset), scale 0 */
                const uint8_t *blk = r < rows ? (const uint8_t *)w + (size_t)r * rb + (size_t)b * KERN_Q8_BLOCK_BYTES : NULL;
                int64_t sl = kern_q8p_slot(b, nb);
                uint8_t *q = gp + kern_q8p_quants_at(sl) + 4 * i;
                for (int s = 0; s < 8; s++) { /* 4 quants at a time: xor 0x80 on each byte */
                    uint32_t v = 0;
                    if (blk) memcpy(&v, blk + 2 + 4 * s, 4);
                    v ^= 0x80808080u;
                    memcpy(q + 64 * s, &v, 4);
                }
                if (blk) memcpy(gp + kern_q8p_scales_at(sl) + 2 * i, blk, 2);
            }
        }
    }
}

void kern_q8p_row(void *out, const void *wp, int64_t k, int64_t row)
{
    const int64_t nb = k / KERN_Q8_BLOCK;
    const uint8_t *gp = (const uint8_t *)wp + (size_t)(row / KERN_Q8P_ROWS) * kern_q8p_group_bytes(k);
    int i = (int)(row % KERN_Q8P_ROWS);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *blk = (uint8_t *)out + (size_t)b * KERN_Q8_BLOCK_BYTES;
        int64_t sl = kern_q8p_slot(b, nb);
        memcpy(blk, gp + kern_q8p_scales_at(sl) + 2 * i, 2);
        for (int s = 0; s < 8; s++)
            for (int c = 0; c < 4; c++) blk[2 + 4 * s + c] = (uint8_t)(gp[kern_q8p_quants_at(sl) + 64 * s + 4 * i + c] ^ 0x80);
    }
}

void kern_q8p_corr(int32_t *cx, const struct kern_q8_block *xq, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        int32_t s = 0;
        for (int c = 0; c < KERN_Q8_BLOCK; c++) s += xq[i].q[c];
        cx[i] = -128 * s;
    }
}
