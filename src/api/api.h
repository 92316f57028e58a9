/*
 * api — the request/response codecs of the OpenAI (/v1/chat/completions) and Anthropic
 * (/v1/messages) APIs, chat rendering through the model's template, tool-call parsing
 * and head detection. Depends on base and tokenizer (and jansson).
 *
 * Design note (contract):
 *   1. Identical requests render to identical token ids; the head (system text + tools)
 *      renders byte-identically across sessions.
 *   2. Requests from real clients never fail to render; unsupported content gets an
 *      error naming the block, never a silent drop.
 *
 * Status: not yet written (issues [F2], [F6]).
 */
#ifndef HS_API_H
#define HS_API_H
#include "base/base.h"
#endif
