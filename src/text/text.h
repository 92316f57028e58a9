/*
 * text — a model's text side: its tokenizer, its chat template and the special token ids
 * the bank, the scheduler and the command line care about, assembled from the model's own
 * files. The CLI (tokenize, render, run, replay) and the server load it the same way, so a
 * prompt renders and tokenizes to the same ids whichever of them runs it.
 *
 * Sources (model_text.c):
 *   Hugging Face directory: tokenizer.json (vocabulary, merges, added tokens with flags, the
 *     Split regex, NFC when its normalizer says so); the chat template from
 *     chat_template.jinja when present, else tokenizer_config.json's chat_template.
 *   GGUF: tokenizer.ggml.tokens / token_type / merges / pre and tokenizer.chat_template.
 *
 * Invariants:
 *   1. The same files always give the same tokenizer and template (nothing depends on the
 *      machine).
 *   2. An unknown GGUF pre-tokenizer or tokenizer model is an error, never a guess: wrong
 *      ids would silently poison every cache key downstream.
 *   3. A loaded model_text owns everything it points to; it borrows nothing from the model
 *      it was built from, which may be freed first.
 */
#ifndef HS_TEXT_H
#define HS_TEXT_H

#include "api/api.h"
#include "base/base.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

#include <stdint.h>

/* A model's text side: tokenizer, chat template and the token ids the bank and the
 * scheduler care about. Built from tokenizer.json + tokenizer_config.json (or
 * chat_template.jinja) for a Hugging Face directory, from tokenizer.ggml.* and
 * tokenizer.chat_template for a GGUF file. */
struct model_text {
    struct tokenizer *tok;
    struct chat_template *tmpl;   /* NULL when the model has no chat template */
    char *tmpl_source;            /* its source, NULL when none */
    int32_t im_start_id;          /* -1 when the vocabulary has no <|im_start|> */
    int32_t im_end_id;            /* -1 when absent */
    int32_t eos_id;               /* <|endoftext|> (or the declared eos), -1 when absent */
    int32_t system_ids[8];        /* the ids of "system" (head detection) */
    int n_system_ids;
    int32_t stop_ids[4];          /* generation stops at any of these */
    int n_stop_ids;
    char nfc;                     /* 1 when NFC normalisation is applied */
};

/* Load the tokenizer and template of a loaded model (borrowed; only read during the call).
 * Errors name the file and field. */
int model_text_load(const struct model *m, struct model_text *out, struct hs_err *err);
void model_text_free(struct model_text *t); /* safe on a zeroed struct */

#endif
