/* mkmodel_int.h — private to src/mkmodel: the tokenizer that `headstart mkmodel` writes.
 *
 * Either our own small byte-level BPE (all 256 byte tokens, a few hundred merges learned
 * from built-in English text, and the ChatML/Qwen special tokens as added tokens), or a
 * given tokenizer.json re-expressed as GGUF vocabulary. Token strings are in the GPT-2
 * byte-to-unicode form that tokenizer.json and GGUF use.
 */
#ifndef HS_MKMODEL_INT_H
#define HS_MKMODEL_INT_H

#include "format/format.h"
#include "mkmodel/mkmodel.h"

/* GGUF token types (llama.cpp's numbering). */
enum mktok_type { MKTOK_NORMAL = 1, MKTOK_UNKNOWN = 2, MKTOK_CONTROL = 3, MKTOK_USER_DEFINED = 4, MKTOK_UNUSED = 5, MKTOK_BYTE = 6 };

struct mktok {
    int64_t n_tokens;        /* tokens with an id in the tokenizer (BPE vocab + added) */
    int64_t n_vocab;         /* embedding rows: n_tokens rounded up (padding ids have no token) */
    char **tokens;           /* [n_tokens], owned */
    int32_t *token_type;     /* [n_tokens] enum mktok_type */
    int64_t n_merges;
    char **merges;           /* [n_merges] "left right", owned */
    int64_t eos_id;          /* <|endoftext|> (generation also stops at <|im_end|>) */
    int64_t pad_id;
    int64_t im_start_id, im_end_id;
    char pre[16];            /* GGUF tokenizer.ggml.pre: "qwen35" or "qwen2" */
    char *tokenizer_json;    /* the tokenizer.json text to write for HF output, owned */
    size_t tokenizer_json_len;
};

/* Our own tokenizer; `pre` decides the split regex written into tokenizer.json. */
int mktok_build_default(struct mktok *t, enum model_arch arch, struct hs_err *err);
/* Load an existing tokenizer.json (e.g. the real Qwen one) for re-emission. */
int mktok_from_file(const char *tokenizer_json_path, enum model_arch arch, struct mktok *t,
                    struct hs_err *err);
void mktok_free(struct mktok *t);
/* tokenizer_config.json text (chat_template, eos/pad tokens, add_bos false); owned. */
char *mktok_tokenizer_config_json(const struct mktok *t, const char *chat_template);
/* Put tokenizer.ggml.* (model gpt2, pre, tokens padded to n_vocab with [PAD<id>] unused
 * tokens, token_type, merges, eos/pad ids, add_bos false) and tokenizer.chat_template. */
void mktok_gguf_put(const struct mktok *t, struct gguf_writer *w, const char *chat_template);

#endif
