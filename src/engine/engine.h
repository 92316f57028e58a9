/*
 * engine — the hybrid forward pass: sequences (KV cache per attention layer, recurrent and
 * conv state per GDN layer), `engine_forward` over any number of tokens with in-flight GDN
 * snapshot capture at chosen positions, sequence state save/restore as opaque blobs, and
 * sampling. Depends on base, sys, kernels, model.
 *
 * Design note
 * -----------
 * Exactness (docs/DESIGN.md §4): the logits at position p depend only on tokens 0..p — not on
 * how the prompt is cut into forward calls, how many tokens one call holds, how many threads
 * run, or whether the state came from a cold prefill or a restore. The engine keeps it by
 * construction: matmuls are batch-invariant kernels with threads splitting output rows;
 * attention reduces each query over keys 0..p in order; the GDN recurrence and the conv run
 * token by token; every per-token operation is the same code whatever the batch.
 *
 * Positions. A sequence at position n has consumed tokens 0..n-1. engine_forward(seq,
 * tokens, k) consumes k more. A snapshot "at p" is the GDN state after exactly p tokens;
 * with the attention KV rows [0, p) it is everything needed to continue at p.
 *
 * Memory. A sequence owns its KV cache (f32, [n_ctx, nkv, hd] per attention layer, grown
 * on demand in blocks) and one GDN state (conv [K-1, C] + recurrent [Hv, Dk, Dv] f32 per
 * GDN layer). Scratch for a forward is sized once per engine from n_batch.
 *
 * Invariants:
 *   1. engine_forward never allocates per token; it fails cleanly (no state change) when a
 *      position would pass the sequence's n_ctx.
 *   2. A captured snapshot equals, byte for byte, the GDN state a sequence would hold after
 *      a forward that stopped at that position.
 *   3. seq_restore(seq_save(s)) gives a sequence whose future logits are bit-identical to
 *      s's. Blobs are versioned and checksummed; a blob from another model geometry is
 *      refused.
 */
#ifndef HS_ENGINE_H
#define HS_ENGINE_H

#include "base/base.h"
#include "model/model.h"

#include <stdbool.h>
#include <stdint.h>

/* ---- engine and sequences ------------------------------------------------------------- */

struct engine_opts {
    int n_threads;      /* >= 1 */
    int64_t n_batch;    /* most tokens per internal forward step (scratch size); default 512 */
};

struct engine;
struct seq;

void engine_opts_default(struct engine_opts *o);
/* The model is borrowed and must outlive the engine. */
int engine_new(const struct model *m, const struct engine_opts *o, struct engine **out,
               struct hs_err *err);
void engine_free(struct engine *e);
const struct model *engine_model(const struct engine *e);
/* Name of the kernel variant in use ("scalar", "avx2", "avxvnni", "avx512vnni", "avx512") — part of
 * the numerics fingerprint. */
const char *engine_kernel_variant(const struct engine *e);
/* Bytes of the engine's own copies of Q8_0, Q4_K and Q6_K matrices in their packed layouts
 * (wpack.c: made at engine_new when the kernel variant multiplies by them; 0 otherwise).
 * Resident in place of the file mapping's pages of those matrices, which are dropped once
 * copied. */
uint64_t engine_packed_bytes(const struct engine *e);
/* The variant a new engine uses on this machine: the best the CPU has, lowered by
 * HEADSTART_CPU=scalar|avx2|avxvnni|avx512vnni|avx512 (static string). */
const char *engine_best_variant(void);
/* True when this machine (as HEADSTART_CPU leaves it) can run kernel variant `name`
 * (kern_variant_runs on the detected features). */
bool engine_variant_runs(const char *name);
/* The process fingerprint: (build, kernel variant, model geometry, tensor table, the stat
 * of each model file at load). State made under another fingerprint must never be
 * restored; this one names state only inside this process (the RAM bank, seq_save). */
uint64_t engine_fingerprint(const struct engine *e);
/* Give the engine its model's identity (model_identity_compute's digest). Engine thread. */
void engine_set_identity(struct engine *e, const uint8_t digest[16]);
/* The persistent fingerprint: (build, kernel variant, model geometry, model identity), the
 * key space of state that outlives the process (the disk tier). False (and *fp untouched)
 * until engine_set_identity: such state must then be neither read nor written. */
bool engine_fingerprint_persistent(const struct engine *e, uint64_t *fp);

struct seq *seq_new(struct engine *e, int64_t n_ctx);
void seq_free(struct seq *s);
int64_t seq_pos(const struct seq *s);
int64_t seq_n_ctx(const struct seq *s);
void seq_reset(struct seq *s); /* back to position 0, state zeroed */

/* ---- forward ---------------------------------------------------------------------------- */

/* Bytes of one GDN snapshot (every GDN layer's conv + recurrent state). */
uint64_t engine_snapshot_bytes(const struct engine *e);

struct engine_capture {
    int64_t pos;        /* absolute position p: state after exactly p tokens */
    void *buf;          /* engine_snapshot_bytes(e) bytes, caller-owned */
    bool filled;        /* set by engine_forward when captured */
};

/* Consume tokens[0..n) at the sequence's position. For each capture with
 * seq_pos < pos <= seq_pos + n, the GDN state after exactly `pos` tokens is copied into its
 * buffer during the pass (no extra forward). Logits: for every i in rows[0..n_rows)
 * (indices into tokens, ascending), n_vocab floats go to logits + k*n_vocab (k-th row);
 * rows may be NULL with n_rows 0.
 * HS_ERR_IO when the model's mapping took a SIGBUS (its file was truncated:
 * model_mapping_check), before or during the call: nothing it computed may be used, the
 * sequence's state is undefined (reset or free it), and every later call fails the same. */
int engine_forward(struct engine *e, struct seq *s, const int32_t *tokens, int64_t n,
                   struct engine_capture *caps, int n_caps, const int64_t *rows, int n_rows,
                   float *logits, struct hs_err *err);

/* Several sequences in one forward step: each item consumes its tokens at its sequence's
 * position, with its own captures and logit rows, exactly as engine_forward would for that
 * sequence alone: every item's logits and state are bit-identical to its own call's, however
 * the items are chosen, ordered or sized (matmuls run over all tokens at once and are
 * batch-invariant; attention, the conv and the recurrence run per sequence, each token at its
 * own position). The rows of all items go, in item order, to logits + k * n_vocab. At most
 * engine_n_batch(e) tokens in all; each sequence at most once; an item may have n == 0.
 * Errors as engine_forward's, checked for every item before any state changes. */
struct engine_item {
    struct seq *s;
    const int32_t *tokens;
    int64_t n;
    struct engine_capture *caps;
    int n_caps;
    const int64_t *rows;        /* indices into tokens, ascending; NULL with n_rows 0 */
    int n_rows;
};

int engine_forward_batch(struct engine *e, struct engine_item *items, int n_items, float *logits,
                         struct hs_err *err);
/* The most tokens one engine_forward_batch step holds (engine_opts.n_batch). */
int64_t engine_n_batch(const struct engine *e);

/* ---- state blobs ------------------------------------------------------------------------ */

/* Serialise the whole sequence state at its position (KV rows [0, pos) + GDN state + pos)
 * into an owned, versioned, checksummed blob (free with hs_free). */
int seq_save(const struct seq *s, void **blob, uint64_t *len, struct hs_err *err);
/* Load a blob made by seq_save of the same engine fingerprint; on error s is unchanged. */
int seq_restore(struct seq *s, const void *blob, uint64_t len, struct hs_err *err);

/* ---- sampling --------------------------------------------------------------------------- */

struct sampler_opts {
    float temperature;         /* 0 = greedy */
    int top_k;                 /* 0 = off */
    float top_p;               /* 1 = off */
    float min_p;               /* 0 = off */
    float repetition_penalty;  /* 1 = off (divides positive logits, multiplies negative) */
    float presence_penalty;    /* 0 = off (subtracted once per distinct seen token) */
    float frequency_penalty;   /* 0 = off (subtracted per occurrence) */
    int64_t penalty_last_n;    /* window of recent tokens the penalties look at; -1 = all */
    uint64_t seed;
};

struct sampler;

void sampler_opts_default(struct sampler_opts *o);
/* HS_OK, or HS_ERR_INVALID naming the first option out of range and its value. */
int sampler_opts_check(const struct sampler_opts *o, struct hs_err *err);
/* NULL when sampler_opts_check fails or n_vocab is not in [1, INT32_MAX]. */
struct sampler *sampler_new(const struct sampler_opts *o, int64_t n_vocab);
void sampler_free(struct sampler *s);
/* Record a token as part of the context the penalties see (prompt and generated). */
void sampler_accept(struct sampler *s, int32_t token);
/* Pick the next token from logits (n_vocab floats; not modified). Deterministic: the same
 * seed, accepted history and logits give the same token on every machine. */
int32_t sampler_sample(struct sampler *s, const float *logits);

/* ---- parts for the session bank (seq.c) ----------------------------------------------------
 * The bank stores attention KV per token and GDN snapshots separately; these move them in
 * and out of a sequence. KV row layout (one token): for each attention layer in layer
 * order, its K row then its V row (nkv * hd f32 each); rows of consecutive positions are
 * contiguous, so [from, to) is (to - from) * engine_kv_row_bytes(e) bytes. */

/* Bytes of one token's KV over all attention layers (0 for a model without attention). */
uint64_t engine_kv_row_bytes(const struct engine *e);
/* Copy KV rows [from, to) (0 <= from <= to <= seq_pos) into dst in the layout above.
 * HS_ERR_INVALID (nothing copied) for a bad range. */
int seq_kv_read(const struct seq *s, int64_t from, int64_t to, void *dst);
/* Set the sequence to position pos: KV rows [0, pos) from kv_rows (the layout above), the
 * GDN state from snapshot (engine_snapshot_bytes(e) bytes, the snapshot layout of
 * engine_forward's captures), exactly as if those pos tokens had been computed. Fails
 * (sequence unchanged) when pos < 0 or pos > n_ctx. */
int seq_restore_parts(struct seq *s, int64_t pos, const void *kv_rows, const void *snapshot,
                      struct hs_err *err);
/* Copy the GDN state at the sequence's position into buf (engine_snapshot_bytes(e) bytes):
 * the snapshot a capture at seq_pos would have taken. */
void seq_snapshot(const struct seq *s, void *buf);

#endif
