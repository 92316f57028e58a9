/*
 * tokenizer — byte-level BPE (Qwen vocabularies): added tokens matched atomically, the
 * Split pre-tokenizer regex through PCRE2, merges by rank, an incremental detokenizer.
 * Depends on base (and PCRE2); it receives vocabulary arrays, not files: format/ parses
 * tokenizer.json and GGUF metadata, so this module never touches JSON.
 *
 * Design note (contract):
 *   1. Encoding is a pure function of (vocabulary, text): identical requests give
 *      identical ids, equal to the Hugging Face tokenizer's.
 *   2. The streaming detokenizer never emits a partial UTF-8 sequence, and the
 *      concatenation of its pieces equals a one-shot decode.
 *
 * Status: not yet written (issue [F2]).
 */
#ifndef HS_TOKENIZER_H
#define HS_TOKENIZER_H
#include "base/base.h"
#endif
