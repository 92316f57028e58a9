/*
 * q6kp.c — the Q6_K row-group layout (kp.c note 1): Q6_K rows rearranged once, at engine
 * start, 16 rows side by side, for the VNNI matmul of q6kp_avx512.c. Portable code: the
 * layout, its packer and its inverse.
 *
 * Layout of a matrix of `rows` Q6_K rows of k values (nb = k / 256 super-blocks); rows in
 * groups of 16 (the last padded with zero blocks), group g at g * nb * KERN_Q6KP_SB_BYTES,
 * its super-blocks in order, super-block b at b * KERN_Q6KP_SB_BYTES (3392 = 53 lines).
 * The Q6_K block (q6k.c): ql[128] at 0, qh[64] at 128, sc[16] (int8) at 192, d (f16) at 208.
 *
 *   OFFSET       SIZE  what (lane i = bytes 4i .. 4i+3 = row 16g + i)
 *   64 v         64    v = 0..31: lane i = bytes 4v .. 4v+3 of the row's ql. With
 *                      v = 16h + 8c + u their low nibbles are the low 4 bits of values
 *                      128h + 32c + 4u .. +3, their high nibbles those of 128h + 32(c+2) + 4u ..
 *   2048 + 64 w  64    w = 0..15: lane i = bytes 4w .. 4w+3 of the row's qh. With w = 8h + u,
 *                      bits 2kk, 2kk+1 of byte l (0..3) are the high 2 bits of value
 *                      128h + 32kk + 4u + l (kk = 0..3)
 *   3072 + 32 p  32    p = 0..7: the rows' sc[2p], sc[2p+1] (int8), row i at 2i, 2i+1
 *   3328         32    the rows' d (f16), row i at 2i
 *   3360         32    zero
 *
 * Design note:
 *   1. A rearrangement of bits: ql, qh, sc and d bytes move whole; nothing is rounded, so a
 *      kernel over the layout can keep the Q6_K order of kernels.h exactly, and
 *      kern_q6kp_row rebuilds each row byte for byte. Size: 3392 / 3360 of the rows (+1%),
 *      plus at most 15 padding rows.
 *   2. ql and qh stay packed as in the rows: one ql vector holds two quants' low nibbles per
 *      byte (values 32 apart in kk, c and c + 2), one qh vector the high bit pairs of four
 *      (kk = 0..3), both for the same 4 values l of a lane, so a kernel builds the four
 *      6-bit quant vectors (0..63, vpdpbusd's unsigned operand) of values
 *      128h + 32kk + 4u .. +3 from two ql vectors and one qh vector with shifts, ands and
 *      bit selects, and the activation dword for them is q[128h + 32kk + 4u ..].
 *   3. Scales as int8 pairs per row: one vpmovsxbw gives lane i = (sc[2p], sc[2p+1]) as
 *      int16, each scale as int32 lanes by shifts (for sc_g * dot_g), or as they are the
 *      operand of vpdpwssd with an activation's (bsum[2p], bsum[2p+1]) for the -32 offset's
 *      share (q6kp_avx512.c measured the share faster as the start of each group's chain,
 *      its note 2, so it takes the shifts only).
 */
#include <string.h>

#include "kernels/kernels.h"

size_t kern_q6kp_group_bytes(int64_t k) { return (size_t)(k / KERN_QK) * KERN_Q6KP_SB_BYTES; }

void kern_q6kp_pack(void *dst, const void *w, int64_t rows, int64_t k, int64_t g0, int64_t g1)
{
    const int64_t nb = k / KERN_QK;
    const size_t rb = (size_t)nb * KERN_Q6K_BYTES, gb = kern_q6kp_group_bytes(k);
    for (int64_t g = g0; g < g1; g++) {
        uint8_t *gp = (uint8_t *)dst + (size_t)g * gb;
        memset(gp, 0, gb); /* padding rows: zero blocks (d = 0, sc = 0); the tail of each super-block */
        for (int i = 0; i < KERN_KP_ROWS; i++) {
            int64_t r = g * KERN_KP_ROWS + i;
            if (r >= rows) break;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *blk = (const uint8_t *)w + (size_t)r * rb + (size_t)b * KERN_Q6K_BYTES;
                uint8_t *sb = gp + (size_t)b * KERN_Q6KP_SB_BYTES;
                for (int v = 0; v < 32; v++) memcpy(sb + 64 * v + 4 * i, blk + 4 * v, 4);
                for (int x = 0; x < 16; x++) memcpy(sb + 2048 + 64 * x + 4 * i, blk + 128 + 4 * x, 4);
                for (int p = 0; p < 8; p++) memcpy(sb + 3072 + 32 * p + 2 * i, blk + 192 + 2 * p, 2);
                memcpy(sb + 3328 + 2 * i, blk + 208, 2);
            }
        }
    }
}

void kern_q6kp_row(void *out, const void *wp, int64_t k, int64_t row)
{
    const int64_t nb = k / KERN_QK, g = row / KERN_KP_ROWS;
    const int i = (int)(row % KERN_KP_ROWS);
    const uint8_t *gp = (const uint8_t *)wp + (size_t)g * kern_q6kp_group_bytes(k);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *sb = gp + (size_t)b * KERN_Q6KP_SB_BYTES;
        uint8_t *blk = (uint8_t *)out + (size_t)b * KERN_Q6K_BYTES;
        for (int v = 0; v < 32; v++) memcpy(blk + 4 * v, sb + 64 * v + 4 * i, 4);
        for (int x = 0; x < 16; x++) memcpy(blk + 128 + 4 * x, sb + 2048 + 64 * x + 4 * i, 4);
        for (int p = 0; p < 8; p++) memcpy(blk + 192 + 2 * p, sb + 3072 + 32 * p + 2 * i, 2);
        memcpy(blk + 208, sb + 3328 + 2 * i, 2);
    }
}
