/* stream.c — incremental detokenizer for streaming output.
 *
 * Invariants:
 *   1. Bytes leave in order and none is invented or dropped: the concatenation of every
 *      push and the final flush equals tokenizer_decode of the same ids.
 *   2. A push holds back only a tail that is a proper prefix of a valid UTF-8 sequence
 *      (at most 3 bytes); bytes that can never become valid are emitted at once, so an
 *      invalid byte never stalls the stream.
 */
#include "tokenizer/tokenizer.h"

#include <string.h>

void tokenizer_stream_init(struct tokenizer_stream *s, const struct tokenizer *t, unsigned flags)
{
    memset(s, 0, sizeof *s);
    s->t = t;
    s->flags = flags;
}

int tokenizer_stream_push(struct tokenizer_stream *s, int32_t id, struct strbuf *out,
                          struct hs_err *err)
{
    size_t len;
    const char *piece = tokenizer_piece(s->t, id, &len);
    if (!piece)
        return hs_err_set(err, HS_ERR_INVALID, "detokenize: id %d is not a token (vocabulary of %d)",
                          (int)id, (int)tokenizer_n_vocab(s->t));
    if ((s->flags & TOKENIZER_DECODE_SKIP_SPECIAL) && tokenizer_is_special(s->t, id)) return HS_OK;
    size_t start = out->len;
    strbuf_append(out, s->pending, (size_t)s->n_pending);
    strbuf_append(out, piece, len);
    size_t n = out->len - start;
    size_t tail = hs_utf8_open_tail((const uint8_t *)out->buf + start, n);
    memcpy(s->pending, out->buf + out->len - tail, tail);
    s->n_pending = (int)tail;
    out->len -= tail;
    if (out->buf) out->buf[out->len] = 0;
    return HS_OK;
}

void tokenizer_stream_flush(struct tokenizer_stream *s, struct strbuf *out)
{
    strbuf_append(out, s->pending, (size_t)s->n_pending);
    s->n_pending = 0;
}
