/*
 * server — `headstart serve`: HTTP with libmicrohttpd (only server/http.c touches it),
 * routes, auth, limits, SSE streaming, and the scheduler: one engine thread owning the
 * model and all sequences, a bounded FIFO queue, the bank between requests. It is also
 * the one module that may see every other one, so the glue that joins a model's files to
 * the tokenizer and the chat template lives here (model_text.c).
 *
 * Design note (contract; DESIGN.md §6):
 *   1. HTTP callbacks never block; streaming uses suspend/resume.
 *   2. Bad input gets an error in the API's own shape, never a crash.
 *
 * Status: the HTTP server is not yet written (issue [F6]).
 */
#ifndef HS_SERVER_H
#define HS_SERVER_H

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

/* Load the tokenizer and template of a loaded model. Errors name the file and field. */
int model_text_load(const struct model *m, struct model_text *out, struct hs_err *err);
void model_text_free(struct model_text *t); /* safe on a zeroed struct */

#endif
