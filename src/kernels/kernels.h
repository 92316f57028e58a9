/*
 * kernels — the numeric kernels of the forward pass: matmul over f32/f16/bf16/Q8_0
 * weights, norms, RoPE, attention, the GDN recurrence, conv1d, MoE routing.
 * Depends on base only.
 *
 * Design note (the contract the implementation must keep; see DESIGN.md §4):
 *   1. A scalar reference defines every kernel; SIMD variants (files *_avx2.c,
 *      *_avx512.c, chosen at start-up from sys CPU detection by the engine) equal it bit
 *      for bit, or are a documented numerics variant that the bank fingerprint tells apart.
 *   2. Batch invariance: each output element accumulates over K in one fixed order
 *      whether the batch holds 1 or 512 rows; threads split output rows, never a sum.
 *   3. No -ffast-math, -ffp-contract=off; FMA only where written explicitly.
 *
 * Status: not yet written (issue [F3]).
 */
#ifndef HS_KERNELS_H
#define HS_KERNELS_H
#include "base/base.h"
#endif
