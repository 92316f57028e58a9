/*
 * engine — the hybrid forward pass: sequences (KV cache per attention layer, recurrent
 * and conv state per GDN layer), `forward` over any number of tokens with in-flight GDN
 * snapshot capture at chosen positions, state save/restore as opaque blobs, sampling.
 * Depends on base, sys, kernels, model.
 *
 * Design note (contract; DESIGN.md §4):
 *   1. The logits at position p depend only on tokens 0..p: not on chunking, batch size,
 *      thread count, or whether the state came from a cold prefill or a restore.
 *   2. One engine thread owns all sequences; scratch is allocated once per model.
 *
 * Status: not yet written (issue [F3]).
 */
#ifndef HS_ENGINE_H
#define HS_ENGINE_H
#include "base/base.h"
#endif
