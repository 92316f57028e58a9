/*
 * tile_int.h — private to src/kernels: the loops that walk a matmul's outputs in register
 * tiles, shared by the SIMD files that had each written their own copy (matmul_avx2.c,
 * matmul_avx512.c for float and Q8_0 weights, bf16_avx2.c, bf16_avx512.c). ISA-free macros:
 * the tile itself (its registers, loads and accumulation order) stays in each file, and the
 * expansion is the loop each file had, so every caller compiles to the code it had.
 *
 * A caller defines a tile macro TILE(r, t, nr, nt) that computes the outputs y[t + j][r + i]
 * for i < nr, j < nt; nr and nt are constants at every expansion (so the tile's
 * accumulators can live in registers once the tile function is inlined).
 *
 * Invariants:
 *   1. Every output (row r in [r0, r1), token t < n_tok) is computed by exactly one tile,
 *      and a tile only reuses loads across its outputs: each output keeps its own
 *      accumulators and its own order over k, so the tile shapes, the panel size, n_tok, r0
 *      and r1 cannot change a bit (kernels.h, design note 2).
 *   2. One token (decode): tiles of rows1 rows, then single rows; the weights stream once.
 *   3. Several tokens (prefill): rows in panels of about KERN_PANEL_BYTES of weights (an L2's
 *      worth), and within a panel token tiles of `toks` in the outer loop, row tiles of `rows`
 *      inside: one token tile's activations stay in L1 while the panel's rows pass by.
 *      Leftover rows of a panel go one by one, leftover tokens one by one.
 */
#ifndef HS_KERNELS_TILE_INT_H
#define HS_KERNELS_TILE_INT_H

#include "kernels/kernels.h"

#define KERN_PANEL_BYTES (256 * 1024) /* weights per row panel of the several-token loop (L2) */

/* Rows [r0, r1) of one token (invariant 2); r is the caller's int64_t row index. */
#define KERN_TILES_ONE_TOKEN(r, r0, r1, rows1, TILE)                                               \
    do {                                                                                           \
        for ((r) = (r0); (r) + (rows1) <= (r1); (r) += (rows1)) TILE((r), 0, (rows1), 1);          \
        for (; (r) < (r1); (r)++) TILE((r), 0, 1, 1);                                              \
    } while (0)

/* Rows [r0, r1) x tokens [0, n_tok) in panels (invariant 3); row_bytes is the size of one
 * weight row; r is the caller's int64_t row index. */
#define KERN_TILES_PANELS(r, r0, r1, n_tok, row_bytes, rows, toks, TILE)                           \
    do {                                                                                           \
        int64_t panel_ = HS_MAX((int64_t)(KERN_PANEL_BYTES / (row_bytes)) / (rows) * (rows), (rows)); \
        for (int64_t p0_ = (r0); p0_ < (r1); p0_ += panel_) {                                      \
            int64_t p1_ = HS_MIN(p0_ + panel_, (r1)), t_ = 0;                                      \
            for (; t_ + (toks) <= (n_tok); t_ += (toks)) {                                         \
                for ((r) = p0_; (r) + (rows) <= p1_; (r) += (rows)) TILE((r), t_, (rows), (toks)); \
                for (; (r) < p1_; (r)++) TILE((r), t_, 1, (toks));                                 \
            }                                                                                      \
            for (; t_ < (n_tok); t_++) {                                                           \
                for ((r) = p0_; (r) + (rows) <= p1_; (r) += (rows)) TILE((r), t_, (rows), 1);      \
                for (; (r) < p1_; (r)++) TILE((r), t_, 1, 1);                                      \
            }                                                                                      \
        }                                                                                          \
    } while (0)

#endif
