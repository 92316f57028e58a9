/*
 * mkmodel — `headstart mkmodel`: deterministic random-weight models of any architecture
 * model/ knows, written as a Hugging Face directory or a GGUF file that llama.cpp loads,
 * with a small BPE tokenizer (or a given tokenizer.json). Tests and benchmarks use these
 * instead of downloads. Depends on base, sys, format, model.
 *
 * Design note
 * -----------
 * What an architecture is comes from model/ (model_arch_info: names, config spelling,
 * layout facts, tokenizer family, config defaults; arch_*.c). This module owns what only
 * a writer needs: the preset geometries, the value distributions, the GGUF spelling of the
 * family's tensors, the Q4_K_M / Q5_K_M type mix and the tokenizer. The quantizers are the
 * kernels' (kern_row_from_f32, beside the dequantizers).
 *   mkmodel.c  options, presets, geometry, config.json and GGUF metadata, writing the files
 *   tensors.c  the family's tensor list in HF layout and its GGUF spelling, as a plan
 *   plan.c     the plan (HF sources routed to output rows) and value generation
 *   mktok.c    the tokenizer
 * mkmodel_int.h is shared by the four.
 *
 * Invariants:
 *   1. Same options => same bytes, whatever the thread count (mkmodel.c's design note).
 *   2. Options are validated before anything is generated; each error names the option.
 */
#ifndef HS_MKMODEL_H
#define HS_MKMODEL_H

#include "base/base.h"
#include "format/format.h"
#include "model/model.h"

#include <stdbool.h>
#include <stdint.h>

struct mkmodel_opts {
    enum model_arch arch;
    const char *preset;          /* "tiny" (default), "0.8b", "2b", "4b" */
    /* overrides; 0 / -1 = from the preset */
    int64_t n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff;
    int64_t gdn_k_heads, gdn_v_heads, gdn_head_dim;
    int64_t n_expert, n_expert_used, n_ff_exp;
    /* qwen4exp only (mkmodel.c note 6); 0 = the default */
    int64_t hc_streams, hc_rank;           /* hyper-connection streams, mixer rank */
    int64_t indexer_heads, indexer_head_dim;
    int64_t qsa_budget;                    /* tokens a query keeps (blocks of 4) */
    int64_t ngram, ngram_heads, ngram_row; /* N (orders 2..N), heads per order, row width */
    int64_t ngram_table_rows;              /* 0: derived from successive primes */
    int64_t ngram_shards, ngram_conv_kernel;
    enum dtype dtype;            /* weight dtype of matrices (norms stay f32) */
    bool ud_mix;                 /* --dtype ud_q4_k_xl (with dtype DTYPE_Q8_0): a mixed file in
                                  * the manner of unsloth's UD-Q4_K_XL (mkmodel.c note 3) */
    uint64_t seed;
    const char *tokenizer_json;  /* NULL: write our own small BPE tokenizer */
    const char *chat_template;   /* NULL: the Qwen3.5 template (built in, see Makefile) */
    const char *out;             /* a directory (HF) or a path ending in .gguf */
};

void mkmodel_opts_default(struct mkmodel_opts *o);
int mkmodel_write(const struct mkmodel_opts *o, struct hs_err *err);

#endif
