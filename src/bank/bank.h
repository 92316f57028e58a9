/*
 * bank — the session bank: a prefix tree over token ids holding attention KV stretches
 * and GDN snapshots at exact positions, snapshot planning (head anchor, last user turn,
 * generation prompt, divergence point, grid), thinning, a RAM budget, and the disk tier
 * (SQLite index + checksummed content-addressed blobs). Depends on base and sys; never on
 * engine: the scheduler moves opaque state blobs between the two.
 *
 * Design note (contract; DESIGN.md §5):
 *   1. Restore copies: bank memory is never aliased writable by a live sequence.
 *   2. The model identity and numerics fingerprint are part of every key: state made by
 *      another model or kernel variant is never restored.
 *   3. A blob that fails verification (checksum, identity, token prefix) is discarded
 *      and counted, never restored.
 *
 * Status: not yet written (issues [F4], [F5]).
 */
#ifndef HS_BANK_H
#define HS_BANK_H
#include "base/base.h"
#endif
