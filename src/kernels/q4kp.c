/*
 * q4kp.c — the Q4_K row-group layout (kp.c note 1): Q4_K rows rearranged once, at engine
 * start, 16 rows side by side, for the VNNI matmul of q4kp_avx512.c. Portable code: the
 * layout, its packer and its inverse.
 *
 * Layout of a matrix of `rows` Q4_K rows of k values (nb = k / 256 super-blocks); rows in
 * groups of 16 (the last padded with zero blocks), group g at g * nb * KERN_Q4KP_SB_BYTES,
 * its super-blocks in order, super-block b at b * KERN_Q4KP_SB_BYTES (2368 = 37 lines):
 *
 *   OFFSET       SIZE  what (lane i = bytes 4i .. 4i+3 = row 16g + i)
 *   64 v         64    v = 0..31: lane i = bytes 4v .. 4v+3 of the row's qs. With v = 8j + u
 *                      their low nibbles are the quants of values 64j + 4u .. 64j + 4u + 3
 *                      (sub-block 2j), their high nibbles those of 64j + 32 + 4u .. (sub-block
 *                      2j + 1)
 *   2048 + 16 s  16    s = 0..7: sc[s] of the 16 rows, one byte each (the 6-bit scale)
 *   2176 + 16 s  16    s = 0..7: m[s] of the 16 rows (the 6-bit min)
 *   2304         32    the rows' d (f16), row i at 2i
 *   2336         32    the rows' dmin (f16), row i at 2i
 *
 * Design note:
 *   1. A rearrangement of bits: qs bytes move whole, the 12 bytes of packed 6-bit scales and
 *      mins (96 bits, 16 values) are spread to one byte per value, d and dmin move. Nothing
 *      is rounded, so a kernel over the layout can keep the Q4_K order of kernels.h exactly,
 *      and kern_q4kp_row rebuilds each row bit for bit. Size: 2368 / 2304 of the rows
 *      (+2.8%), plus at most 15 padding rows.
 *   2. The nibbles stay packed: a kernel masks (low) or shifts and masks (high) one vector
 *      into two vpdpbusd operands (the quants 0..15 unsigned, the activation's signed), and
 *      the broadcast activation dword for vector v is q[64j + 4u ..] for the low half,
 *      q[64j + 32 + 4u ..] for the high one.
 *   3. Scales and mins one byte per row, 16 rows in a row: one vpmovzxbd gives a sub-block's
 *      scales as int32 lanes for the products sc * dot, and the mins for the mins' sum.
 */
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kernels_int.h"

size_t kern_q4kp_group_bytes(int64_t k) { return (size_t)(k / KERN_QK) * KERN_Q4KP_SB_BYTES; }

void kern_q4kp_pack(void *dst, const void *w, int64_t rows, int64_t k, int64_t g0, int64_t g1)
{
    const int64_t nb = k / KERN_QK;
    const size_t rb = (size_t)nb * KERN_Q4K_BYTES, gb = kern_q4kp_group_bytes(k);
    for (int64_t g = g0; g < g1; g++) {
        uint8_t *gp = (uint8_t *)dst + (size_t)g * gb;
        memset(gp, 0, gb); /* padding rows: zero blocks (d = dmin = 0) */
        for (int i = 0; i < KERN_KP_ROWS; i++) {
            int64_t r = g * KERN_KP_ROWS + i;
            if (r >= rows) break;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = (const uint8_t *)w + (size_t)r * rb + (size_t)b * KERN_Q4K_BYTES;
                uint8_t *sb = gp + (size_t)b * KERN_Q4KP_SB_BYTES;
                for (int v = 0; v < 32; v++) memcpy(sb + 64 * v + 4 * i, blk + 16 + 4 * v, 4);
                uint8_t sc[8], m[8];
                kern_q4k_scales(blk + 4, sc, m);
                for (int s = 0; s < 8; s++) {
                    sb[2048 + 16 * s + i] = sc[s];
                    sb[2176 + 16 * s + i] = m[s];
                }
                memcpy(sb + 2304 + 2 * i, blk, 2);
                memcpy(sb + 2336 + 2 * i, blk + 2, 2);
            }
        }
    }
}

void kern_q4kp_row(void *out, const void *wp, int64_t k, int64_t row)
{
    const int64_t nb = k / KERN_QK, g = row / KERN_KP_ROWS;
    const int i = (int)(row % KERN_KP_ROWS);
    const uint8_t *gp = (const uint8_t *)wp + (size_t)g * kern_q4kp_group_bytes(k);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *sb = gp + (size_t)b * KERN_Q4KP_SB_BYTES;
        uint8_t *blk = (uint8_t *)out + (size_t)b * KERN_Q4K_BYTES;
        memcpy(blk, sb + 2304 + 2 * i, 2);
        memcpy(blk + 2, sb + 2336 + 2 * i, 2);
        uint8_t sc[8], m[8];
        for (int s = 0; s < 8; s++) {
            sc[s] = sb[2048 + 16 * s + i];
            m[s] = sb[2176 + 16 * s + i];
        }
        kern_q4k_scales_pack(blk + 4, sc, m);
        for (int v = 0; v < 32; v++) memcpy(blk + 16 + 4 * v, sb + 64 * v + 4 * i, 4);
    }
}
