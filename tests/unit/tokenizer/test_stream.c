/* test_stream.c — the incremental detokenizer: every split point, invalid bytes, flush. */
#include <criterion/criterion.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

/* Byte-only vocabulary (ids 0..255 are the bytes) plus two specials: every multi-byte
 * character is split across tokens, the hardest case for a streamer. */
static struct tokenizer *byte_tokenizer(void)
{
    static char toks[256][4];
    const char *ids[258];
    for (int b = 0; b < 256; b++) {
        uint32_t cp = tokenizer_byte_to_cp((uint8_t)b);
        if (cp < 0x80) { toks[b][0] = (char)cp; toks[b][1] = 0; }
        else { toks[b][0] = (char)(0xC0 | cp >> 6); toks[b][1] = (char)(0x80 | (cp & 0x3F)); toks[b][2] = 0; }
        ids[b] = toks[b];
    }
    ids[256] = ids[257] = NULL;
    static const struct tokenizer_added added[] = {
        { 256, "<|im_end|>", TOKENIZER_ADDED_SPECIAL },
        { 257, "<think>", 0 },
    };
    struct tokenizer_spec spec = { .n_vocab = 258, .id_to_token = ids, .n_added = 2, .added = added,
                                   .split_regex = TOKENIZER_REGEX_QWEN35 };
    struct tokenizer *t;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(tokenizer_init(&t, &spec, &err), HS_OK, "%s", err.msg);
    return t;
}

/* Length of the longest prefix of s that is complete, valid UTF-8. */
static size_t valid_prefix(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t k = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (!k || i + k > n) return i;
        for (size_t j = 1; j < k; j++) if ((s[i + j] & 0xC0) != 0x80) return i;
        i += k;
    }
    return i;
}

Test(stream_detok, every_split_point_equals_one_shot)
{
    struct tokenizer *t = byte_tokenizer();
    const char *text = "h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c<think>\xf0\x9f\x98\x80!\xf0\x9f\x91\x8d\xf0\x9f\x8f\xbd"
                       "<|im_end|>e\xcc\x81 \xd0\x96";
    struct tokenizer_ids ids = { 0 };
    cr_assert_eq(tokenizer_encode(t, text, strlen(text), 0, &ids, NULL), HS_OK);
    cr_assert_gt(ids.n, 20u);
    struct strbuf whole;
    strbuf_init(&whole);
    cr_assert_eq(tokenizer_decode(t, ids.v, ids.n, 0, &whole, NULL), HS_OK);
    cr_assert_eq(whole.len, strlen(text));
    cr_assert(memcmp(whole.buf, text, whole.len) == 0);
    for (size_t k = 0; k <= ids.n; k++) {
        struct tokenizer_stream s;
        tokenizer_stream_init(&s, t, 0);
        struct strbuf out;
        strbuf_init(&out);
        for (size_t i = 0; i < k; i++) cr_assert_eq(tokenizer_stream_push(&s, ids.v[i], &out, NULL), HS_OK);
        /* after k tokens: a prefix of the whole, complete UTF-8, and nothing complete held back */
        cr_assert_leq(out.len, whole.len);
        cr_assert(out.len == 0 || memcmp(out.buf, whole.buf, out.len) == 0, "split %zu: not a prefix", k);
        cr_assert_eq(valid_prefix((const uint8_t *)out.buf, out.len), out.len, "split %zu: partial sequence emitted", k);
        cr_assert_lt(s.n_pending, 4);
        for (size_t i = k; i < ids.n; i++) cr_assert_eq(tokenizer_stream_push(&s, ids.v[i], &out, NULL), HS_OK);
        tokenizer_stream_flush(&s, &out);
        cr_assert_eq(out.len, whole.len, "split %zu", k);
        cr_assert(memcmp(out.buf, whole.buf, out.len) == 0, "split %zu: bytes differ", k);
        strbuf_free(&out);
    }
    strbuf_free(&whole);
    tokenizer_ids_free(&ids);
    tokenizer_free(t);
}

Test(stream_detok, invalid_bytes_do_not_stall)
{
    struct tokenizer *t = byte_tokenizer();
    struct tokenizer_stream s;
    tokenizer_stream_init(&s, t, 0);
    struct strbuf out;
    strbuf_init(&out);
    tokenizer_stream_push(&s, 0xFF, &out, NULL);      /* can never be valid: out at once */
    cr_assert_eq(out.len, 1u);
    tokenizer_stream_push(&s, 0xE2, &out, NULL);      /* a lead: held */
    tokenizer_stream_push(&s, 0x82, &out, NULL);
    cr_assert_eq(out.len, 1u);
    tokenizer_stream_push(&s, 'A', &out, NULL);       /* broken sequence: all out, in order */
    cr_assert_eq(out.len, 4u);
    cr_assert(memcmp(out.buf, "\xff\xe2\x82" "A", 4) == 0);
    tokenizer_stream_push(&s, 0xE0, &out, NULL);      /* E0 80 is never valid */
    tokenizer_stream_push(&s, 0x80, &out, NULL);
    cr_assert_eq(out.len, 6u);
    tokenizer_stream_push(&s, 0xF0, &out, NULL);      /* held at end of generation ... */
    cr_assert_eq(out.len, 6u);
    tokenizer_stream_flush(&s, &out);                 /* ... and flushed */
    cr_assert_eq(out.len, 7u);
    cr_assert_eq((uint8_t)out.buf[6], 0xF0);
    strbuf_free(&out);
    tokenizer_free(t);
}

Test(stream_detok, skip_special_and_bad_id)
{
    struct tokenizer *t = byte_tokenizer();
    struct tokenizer_stream s;
    tokenizer_stream_init(&s, t, TOKENIZER_DECODE_SKIP_SPECIAL);
    struct strbuf out;
    strbuf_init(&out);
    cr_assert_eq(tokenizer_stream_push(&s, 'a', &out, NULL), HS_OK);
    cr_assert_eq(tokenizer_stream_push(&s, 256, &out, NULL), HS_OK);
    cr_assert_eq(tokenizer_stream_push(&s, 257, &out, NULL), HS_OK);
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(tokenizer_stream_push(&s, 258, &out, &err), HS_ERR_INVALID);
    cr_assert(strstr(err.msg, "258"), "%s", err.msg);
    tokenizer_stream_flush(&s, &out);
    cr_assert_str_eq(out.buf, "a<think>");
    strbuf_free(&out);
    tokenizer_free(t);
}
