/* libFuzzer harness for the tokenizer (src/tokenizer/): encode, decode, stream detokenizer.
 *
 * Two tokenizers are built once from the same small in-code vocabulary (init_tokenizers):
 * the 256 single-byte tokens in GPT-2 byte-level form, a few dozen merges generated
 * deterministically (ASCII words, multi-byte UTF-8 characters and *parts* of them, so merged
 * tokens may end inside a UTF-8 sequence, which the stream detokenizer must hold back), and
 * the added tokens <|im_start|>, <|im_end|> (special) and <think> (not special), with the
 * Qwen3.5 split regex; one with NFC on, one with NFC off.
 *
 * Input: the whole input is the text. Checked on every input, for both encode flag settings
 * (0 and TOKENIZER_ENCODE_NO_SPECIAL) and both tokenizers (abort on failure):
 *   1. encode succeeds and every id is in 0 .. n_vocab-1 and not a hole (decode accepts it).
 *   2. NFC off: decode(encode(x)) == x exactly, for every x (byte-level BPE represents any
 *      byte sequence, and nothing rewrites the text).
 *   3. NFC on, x valid UTF-8: decode(encode(x)) == the text with each section between added
 *      tokens replaced by utf8proc's NFC of it (expected_nfc: an independent leftmost-longest
 *      scan for the three added tokens). When that equals x (x is NFC section by section),
 *      the ids also equal the NFC-off tokenizer's. When x is not valid UTF-8 no equality is
 *      checked: NFC is applied per valid run there, and reproducing the run boundaries here
 *      would only copy encode_section; property 2 already covers round trip of such bytes.
 *      Equality with x itself is not required when x is not NFC: NFC rewrites such text by
 *      design (HF does the same), so decode gives the normalised text, not x.
 *   4. The stream detokenizer fed the ids one by one (then flushed) gives exactly the bytes of
 *      one-shot decode, with and without TOKENIZER_DECODE_SKIP_SPECIAL; when that decode is
 *      valid UTF-8, every piece a push emits is valid UTF-8 on its own (no sequence is split).
 *   5. Encoding is deterministic: a second encode of x gives the same ids (the piece cache
 *      must not change results).
 * Nothing leaks (the tokenizers are freed by an atexit handler, so LeakSanitizer's check at
 * exit sees a clean heap).
 */
#include "base/base.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define CHECK(c) do { if (!(c)) { fprintf(stderr, "fuzz_tokenizer: check failed: %s (line %d)\n", #c, __LINE__); abort(); } } while (0)

static struct tokenizer *g_nfc, *g_raw; /* NFC on / off */
static int32_t g_n_vocab;

static const char *const ADDED[3] = { "<|im_start|>", "<|im_end|>", "<think>" };

/* ---- vocabulary ----------------------------------------------------------------------- */

struct vocab {
    char **tok;  /* raw bytes of each token (may contain NUL: use len) */
    size_t *len;
    int n, cap;
    char **merges; /* byte-level "left right" */
    int n_merges, merges_cap;
};

static int vocab_find(const struct vocab *v, const char *s, size_t n)
{
    for (int i = 0; i < v->n; i++)
        if (v->len[i] == n && memcmp(v->tok[i], s, n) == 0) return i;
    return -1;
}

static int vocab_add(struct vocab *v, const char *s, size_t n)
{
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 512;
        v->tok = hs_realloc(v->tok, (size_t)v->cap * sizeof *v->tok);
        v->len = hs_realloc(v->len, (size_t)v->cap * sizeof *v->len);
    }
    v->tok[v->n] = hs_malloc(n + 1);
    memcpy(v->tok[v->n], s, n);
    v->tok[v->n][n] = 0;
    v->len[v->n] = n;
    return v->n++;
}

/* GPT-2 byte-level form of raw bytes. */
static void bytelevel(const char *s, size_t n, struct strbuf *out)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = tokenizer_byte_to_cp((uint8_t)s[i]);
        uint8_t b[4];
        utf8proc_ssize_t w = utf8proc_encode_char((utf8proc_int32_t)cp, b);
        strbuf_append(out, b, (size_t)w);
    }
}

/* Merge tokens a and b (ids) into a new token, unless the result exists already. */
static void vocab_merge(struct vocab *v, int a, int b)
{
    struct strbuf m;
    strbuf_init(&m);
    strbuf_append(&m, v->tok[a], v->len[a]);
    strbuf_append(&m, v->tok[b], v->len[b]);
    if (vocab_find(v, m.buf, m.len) < 0) {
        struct strbuf r;
        strbuf_init(&r);
        bytelevel(v->tok[a], v->len[a], &r);
        strbuf_putc(&r, ' ');
        bytelevel(v->tok[b], v->len[b], &r);
        if (v->n_merges == v->merges_cap) {
            v->merges_cap = v->merges_cap ? 2 * v->merges_cap : 64;
            v->merges = hs_realloc(v->merges, (size_t)v->merges_cap * sizeof *v->merges);
        }
        size_t rl;
        v->merges[v->n_merges++] = strbuf_detach(&r, &rl);
        vocab_add(v, m.buf, m.len);
    }
    strbuf_free(&m);
}

/* Merges that build `word` left to right (each prefix + next byte). */
static void vocab_word(struct vocab *v, const char *word)
{
    size_t n = strlen(word);
    int cur = vocab_find(v, word, 1);
    for (size_t k = 1; k < n; k++) {
        int nb = vocab_find(v, word + k, 1);
        vocab_merge(v, cur, nb);
        cur = vocab_find(v, word, k + 1);
    }
}

static void free_tokenizers(void)
{
    tokenizer_free(g_nfc);
    tokenizer_free(g_raw);
    g_nfc = g_raw = NULL;
}

static void init_tokenizers(void)
{
    struct vocab v;
    memset(&v, 0, sizeof v);
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        vocab_add(&v, &c, 1);
    }
    /* Words, ChatML pieces, whitespace runs, multi-byte characters: "é", "ü", a combining
     * acute, "你好", "世界", an emoji, and CJK with the first two bytes only (a token ending
     * in the middle of a sequence). */
    static const char *const words[] = {
        "the", " the", " and", "ing", " in", "ion", " to", "er", "re", " a", "\n\n", "    ",
        "\t\t", "  ", "<|", "|>", "im", "_start", "_end", "think", "</", "int", "return",
        " {", "();", "\xc3\xa9", "\xc3\xbc", "e\xcc\x81", "\xcc\x81\xcc\x81", "\xe4\xbd\xa0\xe5\xa5\xbd",
        "\xe4\xb8\x96\xe7\x95\x8c", "\xf0\x9f\x98\x80", "\xe4\xbd", "\xf0\x9f", " caf\xc3\xa9",
    };
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) vocab_word(&v, words[i]);
    /* A few pseudo-random merges of existing tokens (fixed LCG: deterministic). */
    uint32_t x = 12345;
    for (int i = 0; i < 24; i++) {
        x = x * 1103515245u + 12345u;
        int a = 256 + (int)((x >> 8) % (uint32_t)(v.n - 256));
        x = x * 1103515245u + 12345u;
        int b = (int)((x >> 8) % (uint32_t)v.n);
        if (v.len[a] + v.len[b] <= 12) vocab_merge(&v, a, b);
    }
    int n_tok = v.n;
    g_n_vocab = n_tok + 3;
    char **id_to_token = hs_calloc((size_t)g_n_vocab, sizeof *id_to_token);
    for (int i = 0; i < n_tok; i++) {
        struct strbuf sb;
        strbuf_init(&sb);
        bytelevel(v.tok[i], v.len[i], &sb);
        size_t l;
        id_to_token[i] = strbuf_detach(&sb, &l);
    }
    struct tokenizer_added added[3] = {
        { n_tok, ADDED[0], TOKENIZER_ADDED_SPECIAL },
        { n_tok + 1, ADDED[1], TOKENIZER_ADDED_SPECIAL },
        { n_tok + 2, ADDED[2], 0 },
    };
    struct tokenizer_spec spec = {
        .n_vocab = g_n_vocab, .id_to_token = (const char *const *)id_to_token,
        .n_merges = v.n_merges, .merges = (const char *const *)v.merges,
        .n_added = 3, .added = added, .split_regex = TOKENIZER_REGEX_QWEN35, .nfc = true,
    };
    struct hs_err err;
    hs_err_clear(&err);
    if (tokenizer_init(&g_nfc, &spec, &err)) { fprintf(stderr, "fuzz_tokenizer: %s\n", err.msg); abort(); }
    spec.nfc = false;
    if (tokenizer_init(&g_raw, &spec, &err)) { fprintf(stderr, "fuzz_tokenizer: %s\n", err.msg); abort(); }
    /* The merges are live: whole words come out as one token each. */
    static const char *const one[] = { "the", " and", "\xe4\xbd\xa0\xe5\xa5\xbd", "<|im_start|>", "<think>" };
    for (size_t i = 0; i < sizeof one / sizeof one[0]; i++) {
        struct tokenizer_ids ids = { 0 };
        if (tokenizer_encode(g_raw, one[i], strlen(one[i]), 0, &ids, &err) || ids.n != 1) {
            fprintf(stderr, "fuzz_tokenizer: '%s' is not one token (%zu)\n", one[i], ids.n);
            abort();
        }
        tokenizer_ids_free(&ids);
    }
    fprintf(stderr, "fuzz_tokenizer: vocabulary of %d (%d merges)\n", g_n_vocab, v.n_merges);
    for (int i = 0; i < g_n_vocab; i++) hs_free(id_to_token[i]);
    hs_free(id_to_token);
    for (int i = 0; i < v.n; i++) hs_free(v.tok[i]);
    for (int i = 0; i < v.n_merges; i++) hs_free(v.merges[i]);
    hs_free(v.tok);
    hs_free(v.len);
    hs_free(v.merges);
    atexit(free_tokenizers);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    init_tokenizers();
    return 0;
}

/* ---- independent helpers -------------------------------------------------------------- */

/* Byte equality that accepts NULL for empty buffers (memcmp does not). */
static bool same(const void *a, size_t an, const void *b, size_t bn)
{
    return an == bn && (an == 0 || memcmp(a, b, an) == 0);
}

static bool valid_utf8(const char *s, size_t n)
{
    return utf8proc_decompose((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, NULL, 0, 0) >= 0 ||
           n == 0;
}

/* Append utf8proc's NFC of s[0..n) (valid UTF-8). */
static void append_nfc(const char *s, size_t n, struct strbuf *out)
{
    if (n == 0) return;
    utf8proc_uint8_t *r = NULL;
    utf8proc_ssize_t rl = utf8proc_map((const utf8proc_uint8_t *)s, (utf8proc_ssize_t)n, &r,
                                       UTF8PROC_STABLE | UTF8PROC_COMPOSE);
    CHECK(rl >= 0);
    strbuf_append(out, r, (size_t)rl);
    free(r);
}

/* What the NFC tokenizer's decode(encode(x)) must be for valid UTF-8 x: added tokens (the
 * special ones only when `special`) cut out leftmost-longest, NFC of the text between. */
static void expected_nfc(const char *s, size_t n, bool special, struct strbuf *out)
{
    size_t sec = 0;
    for (size_t p = 0; p < n;) {
        size_t best = 0;
        for (int k = 0; k < 3; k++) {
            if (k < 2 && !special) continue;
            size_t l = strlen(ADDED[k]);
            if (l <= n - p && memcmp(s + p, ADDED[k], l) == 0 && l > best) best = l;
        }
        if (!best) { p++; continue; }
        append_nfc(s + sec, p - sec, out);
        strbuf_append(out, s + p, best);
        p = sec = p + best;
    }
    append_nfc(s + sec, n - sec, out);
}

/* Property 4 for one decode flag setting. */
static void check_stream(struct tokenizer *t, const struct tokenizer_ids *ids, unsigned dflags)
{
    struct hs_err err;
    hs_err_clear(&err);
    struct strbuf one, all, piece;
    strbuf_init(&one);
    strbuf_init(&all);
    strbuf_init(&piece);
    CHECK(tokenizer_decode(t, ids->v, ids->n, dflags, &one, &err) == HS_OK);
    bool valid = valid_utf8(one.buf, one.len);
    struct tokenizer_stream st;
    tokenizer_stream_init(&st, t, dflags);
    for (size_t i = 0; i < ids->n; i++) {
        strbuf_reset(&piece);
        CHECK(tokenizer_stream_push(&st, ids->v[i], &piece, &err) == HS_OK);
        if (valid) CHECK(valid_utf8(piece.buf, piece.len));
        strbuf_append(&all, piece.buf, piece.len);
    }
    strbuf_reset(&piece);
    tokenizer_stream_flush(&st, &piece);
    if (valid) CHECK(piece.len == 0); /* a valid text leaves nothing held back */
    strbuf_append(&all, piece.buf, piece.len);
    CHECK(same(all.buf, all.len, one.buf, one.len));
    strbuf_free(&one);
    strbuf_free(&all);
    strbuf_free(&piece);
}

/* Encode with one tokenizer and flag setting; properties 1, 4, 5. Returns the decode. */
static void encode_checked(struct tokenizer *t, const char *s, size_t n, unsigned flags,
                           struct tokenizer_ids *ids, struct strbuf *dec)
{
    struct hs_err err;
    hs_err_clear(&err);
    CHECK(tokenizer_encode(t, s, n, flags, ids, &err) == HS_OK);
    for (size_t i = 0; i < ids->n; i++) CHECK(ids->v[i] >= 0 && ids->v[i] < g_n_vocab);
    CHECK(n == 0 || ids->n > 0);
    CHECK(tokenizer_decode(t, ids->v, ids->n, 0, dec, &err) == HS_OK);
    struct tokenizer_ids again = { 0 };
    CHECK(tokenizer_encode(t, s, n, flags, &again, &err) == HS_OK);
    CHECK(same(again.v, again.n * sizeof *again.v, ids->v, ids->n * sizeof *ids->v));
    tokenizer_ids_free(&again);
    check_stream(t, ids, 0);
    check_stream(t, ids, TOKENIZER_DECODE_SKIP_SPECIAL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_nfc) init_tokenizers();
    const char *s = (const char *)data;
    bool valid = valid_utf8(s, size);
    for (unsigned flags = 0; flags <= TOKENIZER_ENCODE_NO_SPECIAL; flags += TOKENIZER_ENCODE_NO_SPECIAL) {
        struct tokenizer_ids raw_ids = { 0 }, nfc_ids = { 0 };
        struct strbuf raw_dec, nfc_dec, want;
        strbuf_init(&raw_dec);
        strbuf_init(&nfc_dec);
        strbuf_init(&want);

        encode_checked(g_raw, s, size, flags, &raw_ids, &raw_dec);
        CHECK(same(raw_dec.buf, raw_dec.len, s, size));

        encode_checked(g_nfc, s, size, flags, &nfc_ids, &nfc_dec);
        if (valid) {
            expected_nfc(s, size, !(flags & TOKENIZER_ENCODE_NO_SPECIAL), &want);
            CHECK(same(nfc_dec.buf, nfc_dec.len, want.buf, want.len));
            if (same(want.buf, want.len, s, size))
                CHECK(same(nfc_ids.v, nfc_ids.n * sizeof *nfc_ids.v, raw_ids.v, raw_ids.n * sizeof *raw_ids.v));
        }
        tokenizer_ids_free(&raw_ids);
        tokenizer_ids_free(&nfc_ids);
        strbuf_free(&raw_dec);
        strbuf_free(&nfc_dec);
        strbuf_free(&want);
    }
    return 0;
}
