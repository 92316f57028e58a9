/* test_bpe.c — byte map, merges on hand-made vocabularies, added tokens, invalid UTF-8,
 * round trips, the piece cache, errors. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tokenizer.h"

#include <utf8proc.h>

/* ---- a small vocabulary: the 256 byte tokens (ids 0..255 in byte order), then one token
 * per merge (its two parts concatenated), then the added tokens ----------------------- */

struct vocab {
    int n;
    char *tok[1024];     /* byte-level form */
    char *merges[512];
    int n_merges;
};

/* Byte-level form of raw bytes. */
static char *bl(const char *raw, size_t n)
{
    char *out = malloc(n * 2 + 1), *o = out;
    for (size_t i = 0; i < n; i++) {
        uint32_t cp = tokenizer_byte_to_cp((uint8_t)raw[i]);
        if (cp < 0x80) *o++ = (char)cp;
        else { *o++ = (char)(0xC0 | cp >> 6); *o++ = (char)(0x80 | (cp & 0x3F)); }
    }
    *o = 0;
    return out;
}

static void vocab_init(struct vocab *v)
{
    memset(v, 0, sizeof *v);
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        v->tok[v->n++] = bl(&c, 1);
    }
}

/* Add the merge of two raw strings; returns the merged token's id. */
static int vocab_merge(struct vocab *v, const char *l, const char *r)
{
    char *bll = bl(l, strlen(l)), *blr = bl(r, strlen(r));
    char *m = malloc(strlen(bll) + strlen(blr) + 2);
    sprintf(m, "%s %s", bll, blr);
    v->merges[v->n_merges++] = m;
    char *cat = malloc(strlen(bll) + strlen(blr) + 1);
    sprintf(cat, "%s%s", bll, blr);
    free(bll);
    free(blr);
    for (int i = 0; i < v->n; i++)
        if (!strcmp(v->tok[i], cat)) { free(cat); return i; }
    v->tok[v->n] = cat;
    return v->n++;
}

static void vocab_free(struct vocab *v)
{
    for (int i = 0; i < v->n; i++) free(v->tok[i]);
    for (int i = 0; i < v->n_merges; i++) free(v->merges[i]);
}

static struct tokenizer *build(struct vocab *v, const struct tokenizer_added *added, int n_added,
                               const char *regex, bool nfc)
{
    /* added ids are given by the caller: make sure the table covers them */
    int n = v->n;
    for (int i = 0; i < n_added; i++) if (added[i].id >= n) n = added[i].id + 1;
    const char **ids = calloc((size_t)n, sizeof *ids);
    for (int i = 0; i < v->n; i++) ids[i] = v->tok[i];
    struct tokenizer_spec spec = {
        .n_vocab = n, .id_to_token = ids, .n_merges = v->n_merges,
        .merges = (const char *const *)v->merges, .n_added = n_added, .added = added,
        .split_regex = regex, .nfc = nfc,
    };
    struct tokenizer *t = NULL;
    struct hs_err err;
    hs_err_clear(&err);
    int rc = tokenizer_init(&t, &spec, &err);
    cr_assert_eq(rc, HS_OK, "%s", err.msg);
    free(ids);
    return t;
}

static size_t enc(struct tokenizer *t, const char *s, size_t n, unsigned flags, int32_t *out, size_t cap)
{
    struct tokenizer_ids ids = { 0 };
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(tokenizer_encode(t, s, n, flags, &ids, &err), HS_OK, "%s", err.msg);
    cr_assert_leq(ids.n, cap);
    if (ids.n) memcpy(out, ids.v, ids.n * sizeof *out);
    size_t k = ids.n;
    tokenizer_ids_free(&ids);
    return k;
}

#define ENC(t, s, flags, out) enc((t), (s), strlen(s), (flags), (out), sizeof(out) / sizeof((out)[0]))

static void expect_ids(const int32_t *got, size_t n, const int32_t *want, size_t wn, const char *what)
{
    cr_assert_eq(n, wn, "%s: %zu ids, want %zu", what, n, wn);
    for (size_t i = 0; i < n; i++) cr_assert_eq(got[i], want[i], "%s: id %zu is %d, want %d", what, i, got[i], want[i]);
}

static void expect_roundtrip(struct tokenizer *t, const char *s, size_t n)
{
    struct tokenizer_ids ids = { 0 };
    struct strbuf out;
    strbuf_init(&out);
    cr_assert_eq(tokenizer_encode(t, s, n, 0, &ids, NULL), HS_OK);
    cr_assert_eq(tokenizer_decode(t, ids.v, ids.n, 0, &out, NULL), HS_OK);
    cr_assert_eq(out.len, n, "round trip: %zu bytes back, want %zu", out.len, n);
    cr_assert(n == 0 || memcmp(out.buf, s, n) == 0, "round trip bytes differ");
    strbuf_free(&out);
    tokenizer_ids_free(&ids);
}

/* ---- the byte map ---------------------------------------------------------------------- */

Test(bpe_bytemap, bijection_and_known_points)
{
    bool seen[1024] = { false };
    for (int b = 0; b < 256; b++) {
        uint32_t cp = tokenizer_byte_to_cp((uint8_t)b);
        cr_assert_lt(cp, 1024u);
        cr_assert(!seen[cp], "code point %u used twice", cp);
        seen[cp] = true;
        cr_assert_eq(tokenizer_cp_to_byte(cp), b);
    }
    cr_assert_eq(tokenizer_byte_to_cp(' '), 0x120u);   /* Ġ */
    cr_assert_eq(tokenizer_byte_to_cp('\n'), 0x10Au);  /* Ċ */
    cr_assert_eq(tokenizer_byte_to_cp('\t'), 0x109u);
    cr_assert_eq(tokenizer_byte_to_cp(0), 0x100u);
    cr_assert_eq(tokenizer_byte_to_cp(0x7F), 0x121u);
    cr_assert_eq(tokenizer_byte_to_cp(0xA0), 0x142u);
    cr_assert_eq(tokenizer_byte_to_cp(0xAD), 0x143u);
    cr_assert_eq(tokenizer_byte_to_cp('A'), (uint32_t)'A');
    cr_assert_eq(tokenizer_byte_to_cp(0xE9), 0xE9u);
    cr_assert_eq(tokenizer_cp_to_byte(' '), -1);
    cr_assert_eq(tokenizer_cp_to_byte(0x144), -1);
    cr_assert_eq(tokenizer_cp_to_byte(0x4E00), -1);
}

/* ---- merges ------------------------------------------------------------------------------ */

Test(bpe_merge, known_words)
{
    struct vocab v;
    vocab_init(&v);
    int lo = vocab_merge(&v, "l", "o");
    int low = vocab_merge(&v, "lo", "w");
    int er = vocab_merge(&v, "e", "r");
    int sp_l = vocab_merge(&v, " ", "low");   /* needs " low" parts: " " and "low" */
    struct tokenizer *t = build(&v, NULL, 0, TOKENIZER_REGEX_QWEN2, false);
    int32_t ids[64];
    size_t n = ENC(t, "lower", 0, ids);
    expect_ids(ids, n, (int32_t[]){ low, er }, 2, "lower");
    n = ENC(t, "lo", 0, ids);
    expect_ids(ids, n, (int32_t[]){ lo }, 1, "lo");
    n = ENC(t, "slow", 0, ids);
    expect_ids(ids, n, (int32_t[]){ 's', low }, 2, "slow");
    /* the regex isolates " lower" as one piece: " low" merges, then "er" */
    n = ENC(t, "a lower", 0, ids);
    expect_ids(ids, n, (int32_t[]){ 'a', sp_l, er }, 3, "a lower");
    /* no merge crosses a piece boundary: "o" and "w" are in different pieces */
    n = ENC(t, "lo.w", 0, ids);
    expect_ids(ids, n, (int32_t[]){ lo, '.', 'w' }, 3, "lo.w");
    n = ENC(t, "", 0, ids);
    cr_assert_eq(n, 0u);
    cr_assert_eq(tokenizer_token_id(t, "low", 3), low);
    size_t len;
    const char *p = tokenizer_piece(t, sp_l, &len);
    cr_assert(p && len == 4 && memcmp(p, " low", 4) == 0);
    tokenizer_free(t);
    vocab_free(&v);
}

Test(bpe_merge, lower_rank_wins_then_leftmost)
{
    struct vocab v;
    vocab_init(&v);
    int bc = vocab_merge(&v, "b", "c"); /* rank 0 */
    int ab = vocab_merge(&v, "a", "b"); /* rank 1 */
    struct tokenizer *t = build(&v, NULL, 0, NULL, false);
    int32_t ids[64];
    size_t n = ENC(t, "abc", 0, ids);
    expect_ids(ids, n, (int32_t[]){ 'a', bc }, 2, "abc, b c first");
    n = ENC(t, "abab", 0, ids);
    expect_ids(ids, n, (int32_t[]){ ab, ab }, 2, "abab");
    tokenizer_free(t);
    vocab_free(&v);

    vocab_init(&v);
    ab = vocab_merge(&v, "a", "b");
    bc = vocab_merge(&v, "b", "c");
    t = build(&v, NULL, 0, NULL, false);
    n = ENC(t, "abc", 0, ids);
    expect_ids(ids, n, (int32_t[]){ ab, 'c' }, 2, "abc, a b first");
    tokenizer_free(t);
    vocab_free(&v);

    vocab_init(&v);
    int aa = vocab_merge(&v, "a", "a");
    int aaaa = vocab_merge(&v, "aa", "aa");
    t = build(&v, NULL, 0, NULL, false);
    n = ENC(t, "aaa", 0, ids);
    expect_ids(ids, n, (int32_t[]){ aa, 'a' }, 2, "aaa: leftmost pair first");
    n = ENC(t, "aaaaa", 0, ids);
    expect_ids(ids, n, (int32_t[]){ aaaa, 'a' }, 2, "aaaaa");
    n = ENC(t, "aaaaaaa", 0, ids);
    expect_ids(ids, n, (int32_t[]){ aaaa, aa, 'a' }, 3, "aaaaaaa");
    /* a long piece (no regex): 100000 a's -> 25000 "aaaa" */
    size_t big = 100000;
    char *s = malloc(big);
    memset(s, 'a', big);
    struct tokenizer_ids out = { 0 };
    cr_assert_eq(tokenizer_encode(t, s, big, 0, &out, NULL), HS_OK);
    cr_assert_eq(out.n, big / 4);
    for (size_t i = 0; i < out.n; i++) cr_assert_eq(out.v[i], aaaa);
    tokenizer_ids_free(&out);
    free(s);
    tokenizer_free(t);
    vocab_free(&v);
}

/* A plain reference: repeatedly merge the lowest-ranked pair, leftmost on ties. */
static size_t naive_bpe(const char *s, size_t n, char **ml, char **mr, int nm, char out[][64])
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) { out[k][0] = s[i]; out[k][1] = 0; k++; }
    for (;;) {
        int best = -1;
        size_t at = 0;
        for (size_t i = 0; i + 1 < k; i++)
            for (int r = 0; r < nm && (best < 0 || r < best); r++)
                if (!strcmp(out[i], ml[r]) && !strcmp(out[i + 1], mr[r])) { best = r; at = i; }
        if (best < 0) return k;
        size_t la = strlen(out[at]), lb = strlen(out[at + 1]);
        memcpy(out[at] + la, out[at + 1], lb + 1);
        memmove(out[at + 1], out[at + 2], (k - at - 2) * sizeof out[0]);
        k--;
    }
}

Test(bpe_merge, equals_naive_reference_on_random_text)
{
    srand(1234);
    for (int round = 0; round < 20; round++) {
        struct vocab v;
        vocab_init(&v);
        char *ml[40], *mr[40];
        int nm = 0;
        /* random merges over a tiny alphabet, built from existing tokens */
        char known[80][64] = { "a", "b", "c", "d" };
        int nk = 4;
        while (nm < 30) {
            char l[64], r[64];
            strcpy(l, known[rand() % nk]);
            strcpy(r, known[rand() % nk]);
            if (strlen(l) + strlen(r) >= 60) continue;
            bool dup = false;
            for (int i = 0; i < nm; i++) if (!strcmp(ml[i], l) && !strcmp(mr[i], r)) dup = true;
            if (dup) continue;
            ml[nm] = strdup(l);
            mr[nm] = strdup(r);
            nm++;
            vocab_merge(&v, l, r);
            size_t ll = strlen(l);
            memcpy(known[nk], l, ll);
            memcpy(known[nk] + ll, r, strlen(r) + 1);
            nk++;
        }
        struct tokenizer *t = build(&v, NULL, 0, NULL, false);
        for (int k = 0; k < 50; k++) {
            char s[40];
            size_t n = (size_t)(rand() % 39) + 1;
            for (size_t i = 0; i < n; i++) s[i] = "abcd"[rand() % 4];
            static char want[64][64];
            size_t wn = naive_bpe(s, n, ml, mr, nm, want);
            struct tokenizer_ids ids = { 0 };
            cr_assert_eq(tokenizer_encode(t, s, n, 0, &ids, NULL), HS_OK);
            cr_assert_eq(ids.n, wn, "round %d text %.*s: %zu ids, want %zu", round, (int)n, s, ids.n, wn);
            for (size_t i = 0; i < wn; i++) {
                size_t len;
                const char *p = tokenizer_piece(t, ids.v[i], &len);
                cr_assert(len == strlen(want[i]) && memcmp(p, want[i], len) == 0, "token %zu differs", i);
            }
            tokenizer_ids_free(&ids);
        }
        for (int i = 0; i < nm; i++) { free(ml[i]); free(mr[i]); }
        tokenizer_free(t);
        vocab_free(&v);
    }
}

/* `\s` means Unicode White_Space (as in HF's Oniguruma regex): U+180E MONGOLIAN VOWEL
 * SEPARATOR is not a space (PCRE2's own UCP `\s` says it is), U+0085 is. */
Test(bpe_merge, regex_space_is_unicode_white_space)
{
    struct vocab v;
    vocab_init(&v);
    vocab_merge(&v, "\xe1", "\xa0");
    int x = vocab_merge(&v, "\xe1\xa0", "\x8e");
    int xx = vocab_merge(&v, "\xe1\xa0\x8e", "\xe1\xa0\x8e");
    vocab_merge(&v, "\xc2", "\x85");
    int sp = vocab_merge(&v, "\xc2\x85", " ");
    struct tokenizer *t = build(&v, NULL, 0, TOKENIZER_REGEX_QWEN35, false);
    int32_t ids[16];
    /* punctuation-like: one piece "\u180e\u180e", then "a" (PCRE2's \s would give
     * "\u180e" + "\u180ea") */
    size_t n = ENC(t, "\xe1\xa0\x8e\xe1\xa0\x8e" "a", 0, ids);
    expect_ids(ids, n, (int32_t[]){ xx, 'a' }, 2, "U+180E is not a space");
    (void)x;
    /* U+0085 + space is one whitespace piece before "b"... minus the last space */
    n = ENC(t, "\xc2\x85  b", 0, ids);
    expect_ids(ids, n, (int32_t[]){ sp, ' ', 'b' }, 3, "U+0085 is a space");
    tokenizer_free(t);
    vocab_free(&v);
}

/* \p{L}, \p{N}, \p{M} know the code points of Unicode 15.0-16.0 (HF tokenizers' tables),
 * also where PCRE2's own tables stop at Unicode 14.0. */
Test(bpe_merge, regex_properties_are_unicode_16)
{
    struct vocab v;
    vocab_init(&v);
    int as = vocab_merge(&v, "'", "s");
    /* U+10D4A GARAY CAPITAL LETTER A (16.0): "a" + it is one letter run, then "'s" */
    int32_t ids[32];
    struct tokenizer *t = build(&v, NULL, 0, TOKENIZER_REGEX_QWEN2, false);
    size_t n = ENC(t, "a\xf0\x90\xb5\x8a's", 0, ids);
    expect_ids(ids, n, (int32_t[]){ 'a', 0xf0, 0x90, 0xb5, 0x8a, as }, 6, "U+10D4A is a letter");
    /* U+2EBF0 (CJK Extension I, 15.1) too */
    n = ENC(t, "\xf0\xae\xaf\xb0's", 0, ids);
    expect_ids(ids, n, (int32_t[]){ 0xf0, 0xae, 0xaf, 0xb0, as }, 5, "U+2EBF0 is a letter");
    tokenizer_free(t);
    vocab_free(&v);

    /* U+1E4F0 NAG MUNDARI DIGIT ZERO (15.0) is \p{N}: one piece per digit, so the merge of
     * two of them (a punctuation run if it were not a digit) never applies */
    vocab_init(&v);
    vocab_merge(&v, "\xf0", "\x9e");
    vocab_merge(&v, "\xf0\x9e", "\x93");
    int d = vocab_merge(&v, "\xf0\x9e\x93", "\xb0");
    int dd = vocab_merge(&v, "\xf0\x9e\x93\xb0", "\xf0\x9e\x93\xb0");
    t = build(&v, NULL, 0, TOKENIZER_REGEX_QWEN2, false);
    n = ENC(t, "\xf0\x9e\x93\xb0\xf0\x9e\x93\xb0", 0, ids);
    expect_ids(ids, n, (int32_t[]){ d, d }, 2, "U+1E4F0 is a digit");
    (void)dd;
    tokenizer_free(t);
    vocab_free(&v);

    /* U+11F00 KAWI SIGN CANDRABINDU (15.0) is \p{M}: with the Qwen3.5 regex it stays in the
     * letter run of "a", so "a" + it merges */
    vocab_init(&v);
    vocab_merge(&v, "a", "\xf0");
    vocab_merge(&v, "a\xf0", "\x91");
    vocab_merge(&v, "a\xf0\x91", "\xbc");
    int am = vocab_merge(&v, "a\xf0\x91\xbc", "\x80");
    t = build(&v, NULL, 0, TOKENIZER_REGEX_QWEN35, false);
    n = ENC(t, " a\xf0\x91\xbc\x80", 0, ids);
    expect_ids(ids, n, (int32_t[]){ ' ', am }, 2, "U+11F00 is a mark");
    tokenizer_free(t);
    vocab_free(&v);
}

/* NFC keeps a composition exclusion decomposed: U+2ADC FORKING -> U+2ADD U+0338, and
 * U+0958 DEVANAGARI QA -> U+0915 U+093C (utf8proc recomposes them unless told STABLE). */
Test(bpe_bytes, nfc_keeps_composition_exclusions_decomposed)
{
    struct vocab v;
    vocab_init(&v);
    struct tokenizer *t = build(&v, NULL, 0, TOKENIZER_REGEX_QWEN2, true);
    const char *in[] = { "\xe2\xab\x9c", "x\xe0\xa5\x98y", "\xe2\xab\x9d\xcc\xb8" };
    const char *want[] = { "\xe2\xab\x9d\xcc\xb8", "x\xe0\xa4\x95\xe0\xa4\xbcy", "\xe2\xab\x9d\xcc\xb8" };
    for (int i = 0; i < 3; i++) {
        int32_t ids[32];
        size_t n = ENC(t, in[i], 0, ids);
        struct strbuf out;
        strbuf_init(&out);
        cr_assert_eq(tokenizer_decode(t, ids, n, 0, &out, NULL), HS_OK);
        cr_assert(out.len == strlen(want[i]) && memcmp(out.buf, want[i], out.len) == 0,
                  "case %d: NFC gave %zu bytes, not the decomposed form", i, out.len);
        strbuf_free(&out);
    }
    tokenizer_free(t);
    vocab_free(&v);
}

/* ---- added tokens --------------------------------------------------------------------- */

enum { ID_START = 300, ID_END, ID_THINK, ID_AB, ID_ABC, ID_L, ID_R, ID_W };

static struct tokenizer *build_added(struct vocab *v)
{
    static const struct tokenizer_added added[] = {
        { ID_START, "<|im_start|>", TOKENIZER_ADDED_SPECIAL },
        { ID_END, "<|im_end|>", TOKENIZER_ADDED_SPECIAL },
        { ID_THINK, "<think>", 0 },
        { ID_AB, "<ab>", 0 },
        { ID_ABC, "<ab>c", 0 },
        { ID_L, "<L>", TOKENIZER_ADDED_LSTRIP },
        { ID_R, "<R>", TOKENIZER_ADDED_RSTRIP },
        { ID_W, "<W>", TOKENIZER_ADDED_SINGLE_WORD },
    };
    vocab_init(v);
    return build(v, added, (int)HS_ARRAY_LEN(added), TOKENIZER_REGEX_QWEN35, true);
}

Test(bpe_added, atomic_longest_adjacent)
{
    struct vocab v;
    struct tokenizer *t = build_added(&v);
    int32_t ids[128];
    size_t n = ENC(t, "<|im_end|><|im_start|>", 0, ids);
    expect_ids(ids, n, (int32_t[]){ ID_END, ID_START }, 2, "adjacent specials");
    n = ENC(t, "x<|im_start|>user\n", 0, ids);
    expect_ids(ids, n, (int32_t[]){ 'x', ID_START, 'u', 's', 'e', 'r', '\n' }, 7, "special inside text");
    n = ENC(t, "<ab>c<ab>d", 0, ids);
    expect_ids(ids, n, (int32_t[]){ ID_ABC, ID_AB, 'd' }, 3, "longest match first");
    n = ENC(t, "<|im_sta", 0, ids);
    cr_assert_eq(n, 8u, "a partial special is text");
    /* untrusted text: specials become text, non-special added tokens still match */
    n = ENC(t, "<|im_start|><think>", TOKENIZER_ENCODE_NO_SPECIAL, ids);
    cr_assert_eq(n, 13u);
    cr_assert_eq(ids[0], '<');
    cr_assert_eq(ids[12], ID_THINK);
    cr_assert(tokenizer_is_special(t, ID_START));
    cr_assert(!tokenizer_is_special(t, ID_THINK));
    cr_assert(tokenizer_is_added(t, ID_THINK));
    cr_assert(!tokenizer_is_added(t, 'a'));
    cr_assert_eq(tokenizer_token_id(t, "<think>", 7), ID_THINK);
    cr_assert_eq(tokenizer_token_id(t, "<nope>", 6), -1);
    /* decode skips specials on request */
    struct strbuf sb;
    strbuf_init(&sb);
    int32_t d[] = { ID_START, 'h', 'i', ID_THINK, ID_END };
    cr_assert_eq(tokenizer_decode(t, d, 5, 0, &sb, NULL), HS_OK);
    cr_assert_str_eq(sb.buf, "<|im_start|>hi<think><|im_end|>");
    strbuf_reset(&sb);
    cr_assert_eq(tokenizer_decode(t, d, 5, TOKENIZER_DECODE_SKIP_SPECIAL, &sb, NULL), HS_OK);
    cr_assert_str_eq(sb.buf, "hi<think>");
    strbuf_free(&sb);
    tokenizer_free(t);
    vocab_free(&v);
}

Test(bpe_added, lstrip_rstrip_single_word)
{
    struct vocab v;
    struct tokenizer *t = build_added(&v);
    int32_t ids[128];
    size_t n = ENC(t, "a \t <L> b", 0, ids);
    expect_ids(ids, n, (int32_t[]){ 'a', ID_L, ' ', 'b' }, 4, "lstrip eats the left spaces only");
    n = ENC(t, "a <R> \n b", 0, ids);
    expect_ids(ids, n, (int32_t[]){ 'a', ' ', ID_R, 'b' }, 4, "rstrip eats the right spaces only");
    n = ENC(t, "a\u3000<L>", 0, ids);
    expect_ids(ids, n, (int32_t[]){ 'a', ID_L }, 2, "lstrip eats Unicode spaces");
    n = ENC(t, "x<W>", 0, ids);
    cr_assert_eq(n, 4u, "single_word: not after a letter");
    n = ENC(t, "<W>9", 0, ids);
    cr_assert_eq(n, 4u, "single_word: not before a digit");
    n = ENC(t, "\u00e9<W>", 0, ids);
    cr_assert_eq(n, 5u, "single_word: not after a non-ASCII letter");
    n = ENC(t, "x <W>.", 0, ids);
    expect_ids(ids, n, (int32_t[]){ 'x', ' ', ID_W, '.' }, 4, "single_word between a space and a dot");
    tokenizer_free(t);
    vocab_free(&v);
}

/* ---- any bytes ------------------------------------------------------------------------- */

Test(bpe_bytes, invalid_utf8_round_trips)
{
    struct vocab v;
    struct tokenizer *t = build_added(&v); /* regex and NFC on */
    static const char *cases[] = {
        "\xff", "\xfe\xff abc", "caf\xc3", "\xc3\xa9\xcc", "a\xe2\x82", "\xed\xa0\x80 surrogate",
        "\xf4\x90\x80\x80 too big", "\xc0\xaf overlong", "ok \xe2\x82\xac euro \x80\x80\x80 tail",
        "<|im_start|>\xff<|im_end|>", "\r\n\r\n  \t\xa0",
    };
    for (size_t i = 0; i < HS_ARRAY_LEN(cases); i++) expect_roundtrip(t, cases[i], strlen(cases[i]));
    char nul[] = { 'a', 0, 'b', 0, 0 };
    expect_roundtrip(t, nul, sizeof nul);
    int32_t ids[16];
    size_t n = enc(t, "\xff\xfe", 2, 0, ids, 16);
    expect_ids(ids, n, (int32_t[]){ 0xff, 0xfe }, 2, "raw bytes are their byte tokens");
    tokenizer_free(t);
    vocab_free(&v);
}

Test(bpe_bytes, random_bytes_round_trip)
{
    struct vocab v;
    vocab_init(&v);
    vocab_merge(&v, " ", "t");
    vocab_merge(&v, "\xc3", "\xa9");
    vocab_merge(&v, "\r", "\n");
    struct tokenizer *t = build(&v, NULL, 0, TOKENIZER_REGEX_QWEN35, false);
    srand(99);
    static const char alphabet[] = "ab \t\r\n\xc3\xa9\xe4\xb8\x80\xf0\x9f\x98\x80\xff\x80'sT1";
    for (int k = 0; k < 300; k++) {
        char s[200];
        size_t n = (size_t)(rand() % 200);
        for (size_t i = 0; i < n; i++)
            s[i] = rand() % 3 ? alphabet[rand() % (sizeof alphabet - 1)] : (char)(rand() % 256);
        expect_roundtrip(t, s, n);
    }
    tokenizer_free(t);
    vocab_free(&v);
}

Test(bpe_bytes, nfc_applies_to_text_not_added)
{
    struct vocab v;
    struct tokenizer *t = build_added(&v);
    int32_t a[16], b[16];
    size_t na = ENC(t, "e\xcc\x81", 0, a);   /* e + COMBINING ACUTE */
    size_t nb = ENC(t, "\xc3\xa9", 0, b);    /* precomposed é */
    expect_ids(a, na, b, nb, "NFC composes");
    tokenizer_free(t);
    vocab_free(&v);
    vocab_init(&v);
    t = build(&v, NULL, 0, TOKENIZER_REGEX_QWEN35, false);
    na = ENC(t, "e\xcc\x81", 0, a);
    cr_assert_eq(na, 3u, "without NFC the three bytes stay");
    tokenizer_free(t);
    vocab_free(&v);
}

/* NFC is applied to stretches of the text only (see nfc_into in bpe.c); it must equal NFC
 * of the whole text. With a byte-only vocabulary the ids are the normalised bytes. */
Test(bpe_bytes, piecewise_nfc_equals_whole_nfc)
{
    struct vocab v;
    vocab_init(&v);
    struct tokenizer *on = build(&v, NULL, 0, TOKENIZER_REGEX_QWEN35, true);
    struct tokenizer *off = build(&v, NULL, 0, TOKENIZER_REGEX_QWEN35, false);
    static const char *atoms[] = {
        "a", "e", " ", "\n", "x", "\xc3\xa9", "\xcc\x81", "\xcc\xa3", "\xcc\x88", "\xcd\x85",
        "\xe1\x84\x80", "\xe1\x85\xa1", "\xe1\x86\xa8", "\xea\xb0\x80", "\xe2\x84\xab", "\xe4\xb8\x80",
        "\xe0\xa4\x95", "\xe0\xa4\xbc", "\xef\xac\x81", "\xf0\x9f\x98\x80", "\xd0\x98", "\xcc\x86",
    };
    static const char *marks[] = { "\xcc\x81", "\xcc\xa3", "\xcd\x85", "\xe0\xa4\xbc", "\xcc\x88", "\xcc\x9b" };
    srand(4242);
    for (int k = 0; k < 500; k++) {
        struct strbuf s;
        strbuf_init(&s);
        int n = rand() % 24;
        for (int i = 0; i < n; i++) strbuf_puts(&s, atoms[rand() % HS_ARRAY_LEN(atoms)]);
        if (k >= 400) /* long runs of marks with mixed classes: the counting-sort path */
            for (int i = rand() % 200; i > 0; i--) strbuf_puts(&s, marks[rand() % HS_ARRAY_LEN(marks)]);
        utf8proc_uint8_t *nfc = NULL;
        utf8proc_ssize_t m = utf8proc_map((const utf8proc_uint8_t *)(s.buf ? s.buf : ""), (utf8proc_ssize_t)s.len, &nfc,
                                          UTF8PROC_STABLE | UTF8PROC_COMPOSE);
        cr_assert_geq(m, 0);
        struct tokenizer_ids a = { 0 }, b = { 0 };
        cr_assert_eq(tokenizer_encode(on, s.buf, s.len, 0, &a, NULL), HS_OK);
        cr_assert_eq(tokenizer_encode(off, (const char *)nfc, (size_t)m, 0, &b, NULL), HS_OK);
        cr_assert_eq(a.n, b.n, "case %d: %zu ids vs %zu", k, a.n, b.n);
        cr_assert(a.n == 0 || memcmp(a.v, b.v, a.n * sizeof *a.v) == 0, "case %d differs", k);
        tokenizer_ids_free(&a);
        tokenizer_ids_free(&b);
        free(nfc);
        strbuf_free(&s);
    }
    tokenizer_free(on);
    tokenizer_free(off);
    vocab_free(&v);
}

/* Canonical ordering must not be quadratic: 300000 combining marks after one letter. */
Test(bpe_bytes, long_mark_run_is_fast, .timeout = 30)
{
    struct vocab v;
    vocab_init(&v);
    struct tokenizer *t = build(&v, NULL, 0, TOKENIZER_REGEX_QWEN35, true);
    struct strbuf s;
    strbuf_init(&s);
    strbuf_putc(&s, 'e');
    for (int i = 0; i < 150000; i++) strbuf_puts(&s, "\xcc\x81\xcc\xa3"); /* acute 230, dot below 220 */
    struct tokenizer_ids ids = { 0 };
    cr_assert_eq(tokenizer_encode(t, s.buf, s.len, 0, &ids, NULL), HS_OK);
    /* NFC: all dot-below marks sort before the acutes; e + dot below composes to U+1EB9
     * (same byte length), nothing else composes. Byte-only vocabulary: ids are bytes. */
    cr_assert_eq(ids.n, s.len, "%zu ids", ids.n);
    int32_t head[] = { 0xE1, 0xBA, 0xB9, 0xCC, 0xA3 };
    for (int i = 0; i < 5; i++) cr_assert_eq(ids.v[i], head[i]);
    size_t last_dot = 3 + 2 * (150000 - 2), first_acute = last_dot + 2;
    cr_assert_eq(ids.v[last_dot + 1], 0xA3);
    cr_assert_eq(ids.v[first_acute + 1], 0x81);
    cr_assert_eq(ids.v[ids.n - 1], 0x81);
    tokenizer_ids_free(&ids);
    strbuf_free(&s);
    tokenizer_free(t);
    vocab_free(&v);
}

/* ---- the cache -------------------------------------------------------------------------- */

Test(bpe_cache, results_do_not_depend_on_cache_state)
{
    struct vocab v;
    vocab_init(&v);
    vocab_merge(&v, "q", "u");
    vocab_merge(&v, "qu", "i");
    vocab_merge(&v, " ", "qu");
    vocab_merge(&v, "x", "y");
    struct tokenizer *warm = build(&v, NULL, 0, TOKENIZER_REGEX_QWEN2, false);
    /* 50000 distinct words overflow the cache (cleared at 32768 entries) */
    struct strbuf text;
    strbuf_init(&text);
    srand(7);
    for (int i = 0; i < 50000; i++) {
        strbuf_putc(&text, ' ');
        for (int k = 0; k < 6; k++) strbuf_putc(&text, "quixyz"[rand() % 6]);
    }
    struct tokenizer_ids a = { 0 }, b = { 0 }, c = { 0 };
    cr_assert_eq(tokenizer_encode(warm, text.buf, text.len, 0, &a, NULL), HS_OK);
    cr_assert_eq(tokenizer_encode(warm, text.buf, text.len, 0, &b, NULL), HS_OK);
    struct tokenizer *cold = build(&v, NULL, 0, TOKENIZER_REGEX_QWEN2, false);
    /* cold: encode word by word, each from a different cache state */
    for (size_t off = 0; off < text.len; off += 7)
        cr_assert_eq(tokenizer_encode(cold, text.buf + off, 7, 0, &c, NULL), HS_OK);
    cr_assert_eq(a.n, b.n);
    cr_assert_eq(a.n, c.n);
    cr_assert(memcmp(a.v, b.v, a.n * sizeof *a.v) == 0);
    cr_assert(memcmp(a.v, c.v, a.n * sizeof *a.v) == 0);
    tokenizer_ids_free(&a);
    tokenizer_ids_free(&b);
    tokenizer_ids_free(&c);
    strbuf_free(&text);
    tokenizer_free(warm);
    tokenizer_free(cold);
    vocab_free(&v);
}

/* ---- errors --------------------------------------------------------------------------------- */

Test(bpe_errors, bad_specs_and_ids)
{
    tokenizer_free(NULL);
    struct vocab v;
    vocab_init(&v);
    v.merges[v.n_merges++] = strdup("a zz"); /* "zz" is not a token */
    const char **ids = calloc(256, sizeof *ids);
    for (int i = 0; i < 256; i++) ids[i] = v.tok[i];
    struct tokenizer_spec spec = { .n_vocab = 256, .id_to_token = ids, .n_merges = 1,
                                   .merges = (const char *const *)v.merges };
    struct tokenizer *t = (struct tokenizer *)1;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(tokenizer_init(&t, &spec, &err), HS_ERR_FORMAT);
    cr_assert_null(t);
    cr_assert(strstr(err.msg, "merges[0]") && strstr(err.msg, "right part"), "%s", err.msg);

    spec.n_merges = 0;
    spec.split_regex = "(unclosed";
    hs_err_clear(&err);
    cr_assert_eq(tokenizer_init(&t, &spec, &err), HS_ERR_FORMAT);
    cr_assert(strstr(err.msg, "split_regex"), "%s", err.msg);

    spec.split_regex = NULL;
    struct tokenizer_added bad = { 256, "<x>", 0 };
    spec.n_added = 1;
    spec.added = &bad;
    hs_err_clear(&err);
    cr_assert_eq(tokenizer_init(&t, &spec, &err), HS_ERR_FORMAT);
    cr_assert(strstr(err.msg, "added[0]"), "%s", err.msg);

    spec.n_added = 0;
    cr_assert_eq(tokenizer_init(&t, &spec, NULL), HS_OK);
    struct strbuf sb;
    strbuf_init(&sb);
    int32_t d[] = { 'a', 256 };
    hs_err_clear(&err);
    cr_assert_eq(tokenizer_decode(t, d, 2, 0, &sb, &err), HS_ERR_INVALID);
    cr_assert_eq(sb.len, 0u, "nothing appended on error");
    cr_assert(strstr(err.msg, "ids[1]"), "%s", err.msg);
    d[1] = -1;
    cr_assert_eq(tokenizer_decode(t, d, 2, 0, &sb, NULL), HS_ERR_INVALID);
    cr_assert_null(tokenizer_piece(t, 999, &(size_t){ 0 }));
    cr_assert_eq(tokenizer_n_vocab(t), 256);
    strbuf_free(&sb);
    tokenizer_free(t);
    free(ids);
    vocab_free(&v);
}
