/* mktok.c — the tokenizer that `headstart mkmodel` writes next to its random weights.
 *
 * Design note
 * -----------
 * Two sources, one result (`struct mktok`, mkmodel_int.h):
 *   - mktok_build_default: our own small byte-level BPE. 256 byte tokens in the GPT-2
 *     byte-to-unicode form, then MKTOK_DEFAULT_MERGES merges learned by plain BPE counting
 *     on the English text below (our own writing), then the ChatML/Qwen added tokens.
 *   - mktok_from_file: a given tokenizer.json (e.g. the real Qwen3 one), read through
 *     hf_tokenizer_load and kept verbatim for HF output.
 * Either is emitted as tokenizer.json (HF), tokenizer_config.json, or GGUF
 * tokenizer.ggml.* keys that llama.cpp's "gpt2" vocabulary accepts.
 *
 * Byte tokens take ids 0..255 in the order of GPT-2's map: the 188 printable bytes
 * ('!'..'~', 0xA1..0xAC, 0xAE..0xFF, which map to themselves) first, then the other 68
 * bytes in byte order (mapped to U+0100, U+0101, ...). So "!" is 0, "\n" ("Ċ") is 198 and
 * " " ("Ġ") is 220, as in the Qwen vocabularies.
 *
 * Training (deterministic): the text is cut into words by an ASCII approximation of the
 * Qwen split regex (letters with one leading non-letter such as a space, digits one by
 * one, punctuation runs with an optional leading space and trailing newlines, whitespace
 * runs); each merge step picks the adjacent pair with the highest count over all words,
 * ties broken by the smaller (left id, right id); stops early when no pair occurs twice.
 *
 * Invariants:
 *   1. Token strings are unique (llama.cpp asserts it), every one of the 256 byte tokens is
 *      present, and ids are 0..n_tokens-1 with no hole.
 *   2. Every merge "l r" names two tokens whose concatenation is a token (default build).
 *   3. n_vocab is n_tokens rounded up to a multiple of 64; mkmodel may raise it, and
 *      mktok_gguf_put pads up to whatever t->n_vocab holds then.
 *   4. Building twice gives identical tokens, merges and JSON bytes.
 *   5. Token types: special added tokens CONTROL, other added tokens USER_DEFINED, the rest
 *      NORMAL; GGUF padding rows are "[PAD<id>]" with type UNUSED, as llama.cpp's converter
 *      writes them. (That converter also types non-special "<|...|>" tokens CONTROL; we
 *      keep the file's special flag so tokenizer_config.json and GGUF agree.)
 *
 * GGUF keys written (tokenizer.ggml.*): model "gpt2", pre, tokens [n_vocab], token_type
 * [n_vocab] i32, merges, eos/bos/padding_token_id u32 (all <|endoftext|>; bos is never
 * added), add_bos_token false, and tokenizer.chat_template when given.
 */
#include "mkmodel/mkmodel_int.h"
#include "sys/sys.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MKTOK_DEFAULT_MERGES 400
#define MKTOK_VOCAB_ALIGN 64
#define MKTOK_MODEL_MAX_LENGTH 262144
#define MKTOK_MAX_FILE (512ull << 20)

/* Split regexes written into tokenizer.json (docs/MODELS.md §9.1). */
static const char qwen35_regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}"
    "| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char qwen2_regex[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}"
    "| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* Added tokens of the default tokenizer, in id order; `special` mirrors Qwen3's file
 * (tool and think tags are not special, so they survive skip_special_tokens). */
static const struct { const char *content; bool special; } default_added[] = {
    { "<|endoftext|>", true },
    { "<|im_start|>", true },
    { "<|im_end|>", true },
    { "<tool_call>", false },
    { "</tool_call>", false },
    { "<think>", false },
    { "</think>", false },
    { "<tool_response>", false },
    { "</tool_response>", false },
};

/* Training text for the default merges, in pieces (C caps string literal length);
 * the pieces are joined before cutting into words. */
static const char *const train_text[] = {
    "A cache is a place where a program keeps the answer to a question it expects to be asked\n"
    "again. The first time the question comes in, the server does the work and stores the result;\n"
    "the next time, it reads the stored result instead of doing the work again. Caching is only\n"
    "useful when the same questions come back, when the stored answers are still correct, and when\n"
    "reading an answer is cheaper than computing it. A good cache therefore needs a key that names\n"
    "the question exactly, a rule that decides which entries to keep when memory runs out, and a\n"
    "way to know that an entry is still valid.\n"
    "\n",
    "Language model servers cache the state of a prompt. When an agent sends a request, the prompt\n"
    "usually starts with the same long head: the system text, the list of tools, and the earlier\n"
    "turns of the conversation. The server reads the prompt as tokens and computes a state for\n"
    "every token. If the head is the same as in an earlier request, the server can restore the\n"
    "saved state and start computing at the first token that is new. That saves time for the\n"
    "user and work for the machine, and it makes the first token of the answer arrive sooner.\n"
    "\n",
    "An agent is a program that talks to a model in a loop. It sends the conversation, reads the\n"
    "answer, and when the answer asks for a tool, it runs the tool and sends the result back as a\n"
    "new message. The tools are things like reading a file, running a command, searching the code,\n"
    "or writing a change to a file. Each tool has a name, a description and a schema for its\n"
    "arguments. The agent sends the same tools with every request, so the head of the prompt stays\n"
    "the same for the whole session, and a server that keeps the state of that head can answer\n"
    "every turn of the session without reading the head again.\n"
    "\n",
    "The server is written to be simple to read and hard to break. Every request is checked before\n"
    "it is used: the size of the body, the names of the fields, the types of the values, and the\n"
    "number of tokens. When something is wrong, the server returns an error that says what was\n"
    "wrong and where, and it keeps serving the other clients. When the queue is full, the server\n"
    "tells the client to try again later instead of making it wait forever.\n"
    "\n",
    "    def handle_request(server, request):\n"
    "        tokens = server.tokenizer.encode(request.prompt)\n"
    "        state = server.cache.lookup(tokens)\n"
    "        if state is None:\n"
    "            state = server.model.new_state()\n"
    "        for token in tokens[state.position:]:\n"
    "            state = server.model.forward(state, token)\n"
    "        server.cache.store(tokens, state)\n"
    "        return server.sample(state, request.temperature)\n"
    "\n",
    "    int cache_lookup(struct cache *cache, const int *tokens, int n_tokens)\n"
    "    {\n"
    "        int best = 0;\n"
    "        for (int i = 0; i < cache->n_entries; i++) {\n"
    "            int n = common_prefix(cache->entries[i].tokens, tokens, n_tokens);\n"
    "            if (n > best) best = n;\n"
    "        }\n"
    "        return best;\n"
    "    }\n"
    "\n",
    "{\"name\": \"read_file\", \"description\": \"Read a file from the project and return its text.\",\n"
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"path\": {\"type\": \"string\"}},\n"
    " \"required\": [\"path\"]}}\n"
    "{\"name\": \"run_command\", \"description\": \"Run a shell command and return what it printed.\",\n"
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"command\": {\"type\": \"string\"}},\n"
    " \"required\": [\"command\"]}}\n"
    "\n",
    "The user asked the agent to find why the tests failed. The agent read the test file, ran the\n"
    "tests, and saw that one of them expected the cache to return the state it had stored for the\n"
    "same tokens. The cache returned a state for a different prompt that only shared the first\n"
    "part of its tokens. The agent wrote a fix that compares every token of the key, ran the tests\n"
    "again, and they passed. Then it wrote a short note for the user that said what was wrong,\n"
    "what it changed, and which tests it ran to check the change.\n"
    "\n",
    "When the server starts, it loads the model, reads the saved states from the disk, and checks\n"
    "each one before it trusts it. A state that was written by another build, for another model,\n"
    "or that does not match its checksum is never restored. The server can stop at any time: the\n"
    "states it writes are first written to a temporary file, then moved into place, so a state on\n"
    "the disk is either complete or not there at all. It's a rule that we keep, and we've found\n"
    "that it's worth the small cost, because a wrong state would give wrong answers that nobody\n"
    "would notice until they'd spread through a long session.\n"
    "\n",
    "In 2024 the first version handled 8 requests at a time; the next one handled 32, and the\n"
    "one after that 128. Each request may use up to 262144 tokens of context, and a typical agent\n"
    "head is between 8000 and 18000 tokens long. Restoring a state takes a few milliseconds, while\n"
    "reading the same head again would take many seconds on a small machine.\n",
};

/* ---- byte map ------------------------------------------------------------------------ */

static bool byte_maps_to_itself(unsigned b)
{
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

/* id_of[b]: the byte token id of byte b; byte_of[id]: the byte of byte token id. */
static void byte_ids(uint8_t byte_of[256], int32_t id_of[256])
{
    int id = 0;
    for (unsigned b = 0; b < 256; b++)
        if (byte_maps_to_itself(b)) byte_of[id++] = (uint8_t)b;
    for (unsigned b = 0; b < 256; b++)
        if (!byte_maps_to_itself(b)) byte_of[id++] = (uint8_t)b;
    for (int i = 0; i < 256; i++) id_of[byte_of[i]] = i;
}

/* The token string of byte b (UTF-8 of its code point; at most 2 bytes + NUL). */
static void byte_token(unsigned b, char out[3])
{
    unsigned cp = b;
    if (!byte_maps_to_itself(b)) {
        unsigned n = 0;
        for (unsigned x = 0; x < b; x++) n += !byte_maps_to_itself(x);
        cp = 256 + n;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = '\0';
    } else {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = '\0';
    }
}

/* ---- a string -> id map (open addressing, FNV-1a); keys are borrowed ------------------- */

struct strmap {
    const char **keys;
    int64_t *vals;
    size_t cap; /* a power of two, at least twice the entries */
};

static void strmap_init(struct strmap *m, size_t n)
{
    m->cap = 16;
    while (m->cap < 2 * n + 2) m->cap *= 2;
    m->keys = hs_calloc(m->cap, sizeof *m->keys);
    m->vals = hs_calloc(m->cap, sizeof *m->vals);
}

static void strmap_free(struct strmap *m)
{
    hs_free(m->keys);
    hs_free(m->vals);
}

/* The slot of key: where it is, or the empty slot where it would go. */
static size_t strmap_slot(const struct strmap *m, const char *key)
{
    size_t i = (size_t)hs_fnv1a64_str(key) & (m->cap - 1);
    while (m->keys[i] && strcmp(m->keys[i], key) != 0) i = (i + 1) & (m->cap - 1);
    return i;
}

static int64_t strmap_get(const struct strmap *m, const char *key)
{
    size_t i = strmap_slot(m, key);
    return m->keys[i] ? m->vals[i] : -1;
}

/* Insert; returns the existing value when the key is already there (nothing changes). */
static int64_t strmap_put(struct strmap *m, const char *key, int64_t val)
{
    size_t i = strmap_slot(m, key);
    if (m->keys[i]) return m->vals[i];
    m->keys[i] = key;
    m->vals[i] = val;
    return -1;
}

/* ---- pre-split (ASCII approximation of the Qwen regex) -------------------------------- */

static bool is_letter(unsigned char c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
static bool is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
static bool is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
static bool is_nl(unsigned char c) { return c == '\n' || c == '\r'; }
static bool is_punct(unsigned char c) { return !is_space(c) && !is_letter(c) && !is_digit(c); }

/* End of the word that starts at s[i] (i < n). */
static size_t split_next(const unsigned char *s, size_t n, size_t i)
{
    /* contractions 's 't 'm 'd 're 've 'll */
    if (s[i] == '\'' && i + 1 < n) {
        unsigned char a = (unsigned char)(s[i + 1] | 0x20);
        unsigned char b = i + 2 < n ? (unsigned char)(s[i + 2] | 0x20) : 0;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
        if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    }
    /* [^\r\n L N]? L+ */
    size_t j = i;
    if (!is_letter(s[j]) && !is_nl(s[j]) && !is_digit(s[j]) && j + 1 < n && is_letter(s[j + 1])) j++;
    if (is_letter(s[j])) {
        while (j < n && is_letter(s[j])) j++;
        return j;
    }
    if (is_digit(s[i])) return i + 1;
    /* ' ?[^\s L N]+[\r\n]*' */
    j = i;
    if (s[j] == ' ' && j + 1 < n && is_punct(s[j + 1])) j++;
    if (is_punct(s[j])) {
        while (j < n && is_punct(s[j])) j++;
        while (j < n && is_nl(s[j])) j++;
        return j;
    }
    /* whitespace: \s*[\r\n]+ takes the run up to its last newline; \s+(?!\S) leaves the
     * last space of a run for the word that follows; \s+ otherwise */
    size_t end = i;
    while (end < n && is_space(s[end])) end++;
    size_t last_nl = 0;
    for (size_t k = i; k < end; k++)
        if (is_nl(s[k])) last_nl = k + 1;
    if (last_nl) return last_nl;
    if (end == n || end - i == 1) return end;
    return end - 1;
}

/* ---- training ------------------------------------------------------------------------ */

struct word {
    const unsigned char *text;
    size_t len;
    int64_t count;
    int32_t *sym; /* current symbols (token ids) */
    size_t n_sym;
};

static int word_cmp(const void *pa, const void *pb)
{
    const struct word *a = pa, *b = pb;
    size_t n = HS_MIN(a->len, b->len);
    int c = memcmp(a->text, b->text, n);
    if (c) return c;
    return (a->len > b->len) - (a->len < b->len);
}

/* Growable token list while building. */
struct toklist {
    char **tok;
    int64_t n, cap;
};

static int64_t toklist_add(struct toklist *l, char *s)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 512;
        l->tok = hs_realloc(l->tok, (size_t)l->cap * sizeof *l->tok);
    }
    l->tok[l->n] = s;
    return l->n++;
}

/* Learn up to max_merges merges over byte tokens [0, 256) already in `l`; appends new
 * tokens to l and the merges (as token id pairs) to pairs[2*i], pairs[2*i+1]. Returns the
 * number of merges. */
static int64_t bpe_train(const char *text, int64_t max_merges, struct toklist *l, struct strmap *map,
                         int32_t *pairs)
{
    uint8_t byte_of[256];
    int32_t id_of[256];
    byte_ids(byte_of, id_of);
    const unsigned char *s = (const unsigned char *)text;
    size_t n = strlen(text);

    /* cut into words, then collapse equal words into one with a count */
    size_t n_words = 0, cap_words = 256;
    struct word *w = hs_malloc(cap_words * sizeof *w);
    for (size_t i = 0; i < n;) {
        size_t e = split_next(s, n, i);
        if (n_words == cap_words) w = hs_realloc(w, (cap_words *= 2) * sizeof *w);
        w[n_words++] = (struct word){ .text = s + i, .len = e - i, .count = 1 };
        i = e;
    }
    qsort(w, n_words, sizeof *w, word_cmp);
    size_t u = 0;
    for (size_t i = 0; i < n_words; i++) {
        if (u > 0 && word_cmp(&w[u - 1], &w[i]) == 0) w[u - 1].count++;
        else w[u++] = w[i];
    }
    n_words = u;
    for (size_t i = 0; i < n_words; i++) {
        w[i].sym = hs_malloc(w[i].len * sizeof(int32_t));
        w[i].n_sym = w[i].len;
        for (size_t k = 0; k < w[i].len; k++) w[i].sym[k] = id_of[w[i].text[k]];
    }

    /* pair counts in a dense table over every id that can exist */
    int64_t dim = 256 + max_merges;
    int64_t *cnt = hs_calloc((size_t)(dim * dim), sizeof *cnt);
    int64_t m = 0;
    for (; m < max_merges; m++) {
        for (size_t i = 0; i < n_words; i++)
            for (size_t k = 0; k + 1 < w[i].n_sym; k++)
                cnt[w[i].sym[k] * dim + w[i].sym[k + 1]] += w[i].count;
        int64_t best = 0;
        int32_t bl = 0, br = 0;
        for (size_t i = 0; i < n_words; i++)
            for (size_t k = 0; k + 1 < w[i].n_sym; k++) {
                int32_t a = w[i].sym[k], b = w[i].sym[k + 1];
                int64_t c = cnt[a * dim + b];
                if (c > best || (c == best && (a < bl || (a == bl && b < br)))) {
                    best = c;
                    bl = a;
                    br = b;
                }
            }
        for (size_t i = 0; i < n_words; i++)
            for (size_t k = 0; k + 1 < w[i].n_sym; k++) cnt[w[i].sym[k] * dim + w[i].sym[k + 1]] = 0;
        if (best < 2) break;

        size_t ll = strlen(l->tok[bl]), rl = strlen(l->tok[br]);
        char *joined = hs_malloc(ll + rl + 1);
        memcpy(joined, l->tok[bl], ll);
        memcpy(joined + ll, l->tok[br], rl + 1);
        int64_t id = strmap_get(map, joined);
        if (id < 0) {
            id = toklist_add(l, joined);
            strmap_put(map, joined, id);
        } else {
            hs_free(joined); /* another pair already made this string */
        }
        pairs[2 * m] = bl;
        pairs[2 * m + 1] = br;
        for (size_t i = 0; i < n_words; i++) {
            size_t o = 0;
            for (size_t k = 0; k < w[i].n_sym; k++) {
                if (k + 1 < w[i].n_sym && w[i].sym[k] == bl && w[i].sym[k + 1] == br) {
                    w[i].sym[o++] = (int32_t)id;
                    k++;
                } else {
                    w[i].sym[o++] = w[i].sym[k];
                }
            }
            w[i].n_sym = o;
        }
    }
    hs_free(cnt);
    for (size_t i = 0; i < n_words; i++) hs_free(w[i].sym);
    hs_free(w);
    return m;
}

/* ---- shared helpers ------------------------------------------------------------------ */

static int64_t round_up(int64_t n, int64_t a) { return (n + a - 1) / a * a; }

/* The architecture's tokenizer family (GGUF tokenizer.ggml.pre): "qwen35", or "qwen2" for
 * the older Qwen tokenizer (its split regex, no NFC normalizer). */
static const char *pre_of(enum model_arch arch)
{
    struct model_arch_info info;
    return model_arch_info(arch, &info) ? info.tokenizer_pre : "qwen35";
}

static bool pre_is_qwen2(enum model_arch arch) { return strcmp(pre_of(arch), "qwen2") == 0; }

static int64_t find_token(const struct mktok *t, const char *s)
{
    for (int64_t i = t->n_tokens; i-- > 0;)
        if (strcmp(t->tokens[i], s) == 0) return i;
    return -1;
}

static void json_bytelevel(struct jsonw *w)
{
    jsonw_obj_begin(w);
    jsonw_key(w, "type"); jsonw_str(w, "ByteLevel");
    jsonw_key(w, "add_prefix_space"); jsonw_bool(w, false);
    jsonw_key(w, "trim_offsets"); jsonw_bool(w, false);
    jsonw_key(w, "use_regex"); jsonw_bool(w, false);
    jsonw_obj_end(w);
}

/* tokenizer.json for the default tokenizer; the layout follows what the tokenizers
 * library writes for Qwen (keys in its order, vocab in id order). */
static void write_tokenizer_json(struct mktok *t, int64_t n_bpe, enum model_arch arch)
{
    struct strbuf sb;
    strbuf_init(&sb);
    struct jsonw w;
    jsonw_init(&w, &sb, 2);
    jsonw_obj_begin(&w);
    jsonw_key(&w, "version"); jsonw_str(&w, "1.0");
    jsonw_key(&w, "truncation"); jsonw_null(&w);
    jsonw_key(&w, "padding"); jsonw_null(&w);
    jsonw_key(&w, "added_tokens");
    jsonw_arr_begin(&w);
    for (int64_t i = n_bpe; i < t->n_tokens; i++) {
        jsonw_obj_begin(&w);
        jsonw_key(&w, "id"); jsonw_int(&w, i);
        jsonw_key(&w, "content"); jsonw_str(&w, t->tokens[i]);
        jsonw_key(&w, "single_word"); jsonw_bool(&w, false);
        jsonw_key(&w, "lstrip"); jsonw_bool(&w, false);
        jsonw_key(&w, "rstrip"); jsonw_bool(&w, false);
        jsonw_key(&w, "normalized"); jsonw_bool(&w, false);
        jsonw_key(&w, "special"); jsonw_bool(&w, t->token_type[i] == MKTOK_CONTROL);
        jsonw_obj_end(&w);
    }
    jsonw_arr_end(&w);
    jsonw_key(&w, "normalizer");
    if (pre_is_qwen2(arch)) {
        jsonw_null(&w);
    } else {
        jsonw_obj_begin(&w);
        jsonw_key(&w, "type"); jsonw_str(&w, "NFC");
        jsonw_obj_end(&w);
    }
    jsonw_key(&w, "pre_tokenizer");
    jsonw_obj_begin(&w);
    jsonw_key(&w, "type"); jsonw_str(&w, "Sequence");
    jsonw_key(&w, "pretokenizers");
    jsonw_arr_begin(&w);
    jsonw_obj_begin(&w);
    jsonw_key(&w, "type"); jsonw_str(&w, "Split");
    jsonw_key(&w, "pattern");
    jsonw_obj_begin(&w);
    jsonw_key(&w, "Regex"); jsonw_str(&w, pre_is_qwen2(arch) ? qwen2_regex : qwen35_regex);
    jsonw_obj_end(&w);
    jsonw_key(&w, "behavior"); jsonw_str(&w, "Isolated");
    jsonw_key(&w, "invert"); jsonw_bool(&w, false);
    jsonw_obj_end(&w);
    json_bytelevel(&w);
    jsonw_arr_end(&w);
    jsonw_obj_end(&w);
    jsonw_key(&w, "post_processor"); json_bytelevel(&w);
    jsonw_key(&w, "decoder"); json_bytelevel(&w);
    jsonw_key(&w, "model");
    jsonw_obj_begin(&w);
    jsonw_key(&w, "type"); jsonw_str(&w, "BPE");
    jsonw_key(&w, "dropout"); jsonw_null(&w);
    jsonw_key(&w, "unk_token"); jsonw_null(&w);
    jsonw_key(&w, "continuing_subword_prefix"); jsonw_str(&w, "");
    jsonw_key(&w, "end_of_word_suffix"); jsonw_str(&w, "");
    jsonw_key(&w, "fuse_unk"); jsonw_bool(&w, false);
    jsonw_key(&w, "byte_fallback"); jsonw_bool(&w, false);
    jsonw_key(&w, "ignore_merges"); jsonw_bool(&w, false);
    jsonw_key(&w, "vocab");
    jsonw_obj_begin(&w);
    for (int64_t i = 0; i < n_bpe; i++) {
        jsonw_key(&w, t->tokens[i]);
        jsonw_int(&w, i);
    }
    jsonw_obj_end(&w);
    jsonw_key(&w, "merges");
    jsonw_arr_begin(&w);
    for (int64_t i = 0; i < t->n_merges; i++) jsonw_str(&w, t->merges[i]);
    jsonw_arr_end(&w);
    jsonw_obj_end(&w);
    jsonw_obj_end(&w);
    strbuf_putc(&sb, '\n');
    t->tokenizer_json = strbuf_detach(&sb, &t->tokenizer_json_len);
}

/* ---- public -------------------------------------------------------------------------- */

int mktok_build_default(struct mktok *t, enum model_arch arch, struct hs_err *err)
{
    memset(t, 0, sizeof *t);
    if ((unsigned)arch >= MODEL_ARCH_COUNT)
        return hs_err_set(err, HS_ERR_INVALID, "mktok: unknown architecture %d", (int)arch);
    uint8_t byte_of[256];
    int32_t id_of[256];
    byte_ids(byte_of, id_of);

    struct toklist l = { 0 };
    struct strmap map;
    strmap_init(&map, 256 + MKTOK_DEFAULT_MERGES + HS_ARRAY_LEN(default_added));
    for (int i = 0; i < 256; i++) {
        char b[3];
        byte_token(byte_of[i], b);
        toklist_add(&l, hs_strdup(b));
        strmap_put(&map, l.tok[i], i);
    }
    int32_t *pairs = hs_malloc(2 * MKTOK_DEFAULT_MERGES * sizeof *pairs);
    struct strbuf text;
    strbuf_init(&text);
    for (size_t i = 0; i < HS_ARRAY_LEN(train_text); i++) strbuf_puts(&text, train_text[i]);
    t->n_merges = bpe_train(text.buf, MKTOK_DEFAULT_MERGES, &l, &map, pairs);
    strbuf_free(&text);
    t->merges = hs_calloc((size_t)(t->n_merges ? t->n_merges : 1), sizeof(char *));
    for (int64_t m = 0; m < t->n_merges; m++) {
        struct strbuf sb;
        strbuf_init(&sb);
        strbuf_printf(&sb, "%s %s", l.tok[pairs[2 * m]], l.tok[pairs[2 * m + 1]]);
        t->merges[m] = strbuf_detach(&sb, NULL);
    }
    hs_free(pairs);

    int64_t n_bpe = l.n;
    for (size_t i = 0; i < HS_ARRAY_LEN(default_added); i++) {
        int64_t id = toklist_add(&l, hs_strdup(default_added[i].content));
        /* cannot happen with the built-in text; checked because llama.cpp requires it */
        if (strmap_put(&map, l.tok[id], id) >= 0) {
            t->tokens = l.tok;
            t->n_tokens = l.n;
            strmap_free(&map);
            mktok_free(t);
            return hs_err_set(err, HS_ERR_INVALID, "mktok: added token %s is also a BPE token",
                              default_added[i].content);
        }
    }
    strmap_free(&map);
    t->tokens = l.tok;
    t->n_tokens = l.n;
    t->token_type = hs_malloc((size_t)t->n_tokens * sizeof *t->token_type);
    for (int64_t i = 0; i < t->n_tokens; i++) t->token_type[i] = MKTOK_NORMAL;
    for (size_t i = 0; i < HS_ARRAY_LEN(default_added); i++)
        t->token_type[n_bpe + (int64_t)i] = default_added[i].special ? MKTOK_CONTROL : MKTOK_USER_DEFINED;
    t->n_vocab = round_up(t->n_tokens, MKTOK_VOCAB_ALIGN);
    t->eos_id = t->pad_id = find_token(t, "<|endoftext|>");
    t->im_start_id = find_token(t, "<|im_start|>");
    t->im_end_id = find_token(t, "<|im_end|>");
    snprintf(t->pre, sizeof t->pre, "%s", pre_of(arch));
    write_tokenizer_json(t, n_bpe, arch);
    return HS_OK;
}

int mktok_from_file(const char *path, enum model_arch arch, struct mktok *t, struct hs_err *err)
{
    memset(t, 0, sizeof *t);
    if ((unsigned)arch >= MODEL_ARCH_COUNT)
        return hs_err_set(err, HS_ERR_INVALID, "mktok: unknown architecture %d", (int)arch);
    struct hf_tokenizer hf;
    int rc = hf_tokenizer_load(path, &hf, err);
    if (rc) return rc;
    struct strmap map = { 0 };

    /* GGUF has one token per id and llama.cpp's "gpt2" vocabulary maps bytes through the
     * GPT-2 table, so the file must be a gap-free byte-level BPE */
    if (!hf.byte_level) {
        rc = hs_err_set(err, HS_ERR_UNSUPPORTED, "%s: pre_tokenizer: no ByteLevel step; only byte-level BPE "
                        "tokenizers can be written as GGUF \"gpt2\" vocabularies", path);
        goto fail;
    }
    for (int64_t i = 0; i < hf.n_vocab; i++)
        if (!hf.id_to_token[i]) {
            rc = hs_err_set(err, HS_ERR_FORMAT, "%s: model.vocab: id %" PRId64 " has no token (ids must "
                            "run 0..%" PRId64 " without holes)", path, i, hf.n_vocab - 1);
            goto fail;
        }
    strmap_init(&map, (size_t)hf.n_vocab);
    for (int64_t i = 0; i < hf.n_vocab; i++) {
        int64_t other = strmap_put(&map, hf.id_to_token[i], i);
        if (other >= 0) {
            rc = hs_err_set(err, HS_ERR_FORMAT, "%s: token \"%.64s\" has two ids, %" PRId64 " and %" PRId64,
                            path, hf.id_to_token[i], other, i);
            goto fail;
        }
    }
    for (unsigned b = 0; b < 256; b++) {
        char s[3];
        byte_token(b, s);
        if (strmap_get(&map, s) < 0) {
            rc = hs_err_set(err, HS_ERR_UNSUPPORTED, "%s: model.vocab: the byte token \"%s\" (byte 0x%02x) "
                            "is missing", path, s, b);
            goto fail;
        }
    }
    int64_t eos = strmap_get(&map, "<|endoftext|>");
    if (eos < 0) {
        rc = hs_err_set(err, HS_ERR_UNSUPPORTED, "%s: added_tokens: no <|endoftext|> token", path);
        goto fail;
    }
    t->im_start_id = strmap_get(&map, "<|im_start|>");
    t->im_end_id = strmap_get(&map, "<|im_end|>");
    strmap_free(&map);

    rc = sys_file_read_all(path, MKTOK_MAX_FILE, &t->tokenizer_json, &t->tokenizer_json_len, err);
    if (rc) goto fail;
    /* take the strings over from hf */
    t->n_tokens = hf.n_vocab;
    t->tokens = hf.id_to_token;
    hf.id_to_token = NULL;
    t->n_merges = hf.n_merges;
    t->merges = hf.merges;
    hf.merges = NULL;
    hf.n_merges = 0;
    t->token_type = hs_malloc((size_t)t->n_tokens * sizeof *t->token_type);
    for (int64_t i = 0; i < t->n_tokens; i++) t->token_type[i] = MKTOK_NORMAL;
    for (int i = 0; i < hf.n_added; i++)
        t->token_type[hf.added[i].id] = hf.added[i].special ? MKTOK_CONTROL : MKTOK_USER_DEFINED;
    t->n_vocab = round_up(t->n_tokens, MKTOK_VOCAB_ALIGN);
    t->eos_id = t->pad_id = eos;
    snprintf(t->pre, sizeof t->pre, "%s", pre_of(arch));
    hf_tokenizer_free(&hf);
    return HS_OK;

fail:
    if (map.keys) strmap_free(&map);
    hf_tokenizer_free(&hf);
    mktok_free(t);
    return rc;
}

void mktok_free(struct mktok *t)
{
    if (!t) return;
    if (t->tokens)
        for (int64_t i = 0; i < t->n_tokens; i++) hs_free(t->tokens[i]);
    hs_free(t->tokens);
    hs_free(t->token_type);
    if (t->merges)
        for (int64_t i = 0; i < t->n_merges; i++) hs_free(t->merges[i]);
    hs_free(t->merges);
    hs_free(t->tokenizer_json);
    memset(t, 0, sizeof *t);
}

char *mktok_tokenizer_config_json(const struct mktok *t, const char *chat_template)
{
    struct strbuf sb;
    strbuf_init(&sb);
    struct jsonw w;
    jsonw_init(&w, &sb, 2);
    const char *pad = t->pad_id >= 0 ? t->tokens[t->pad_id] : NULL;
    const char *eos = t->im_end_id >= 0 ? t->tokens[t->im_end_id] : pad;
    jsonw_obj_begin(&w);
    jsonw_key(&w, "add_bos_token"); jsonw_bool(&w, false);
    jsonw_key(&w, "add_prefix_space"); jsonw_bool(&w, false);
    jsonw_key(&w, "added_tokens_decoder");
    jsonw_obj_begin(&w);
    for (int64_t i = 0; i < t->n_tokens; i++) {
        if (t->token_type[i] != MKTOK_CONTROL && t->token_type[i] != MKTOK_USER_DEFINED) continue;
        char id[24];
        snprintf(id, sizeof id, "%" PRId64, i);
        jsonw_key(&w, id);
        jsonw_obj_begin(&w);
        jsonw_key(&w, "content"); jsonw_str(&w, t->tokens[i]);
        jsonw_key(&w, "lstrip"); jsonw_bool(&w, false);
        jsonw_key(&w, "normalized"); jsonw_bool(&w, false);
        jsonw_key(&w, "rstrip"); jsonw_bool(&w, false);
        jsonw_key(&w, "single_word"); jsonw_bool(&w, false);
        jsonw_key(&w, "special"); jsonw_bool(&w, t->token_type[i] == MKTOK_CONTROL);
        jsonw_obj_end(&w);
    }
    jsonw_obj_end(&w);
    /* as Qwen lists them: the special added tokens other than the pad/eos text token */
    jsonw_key(&w, "additional_special_tokens");
    jsonw_arr_begin(&w);
    for (int64_t i = 0; i < t->n_tokens; i++)
        if (t->token_type[i] == MKTOK_CONTROL && i != t->pad_id) jsonw_str(&w, t->tokens[i]);
    jsonw_arr_end(&w);
    jsonw_key(&w, "bos_token"); jsonw_null(&w);
    if (chat_template) {
        jsonw_key(&w, "chat_template"); jsonw_str(&w, chat_template);
    }
    jsonw_key(&w, "clean_up_tokenization_spaces"); jsonw_bool(&w, false);
    jsonw_key(&w, "eos_token");
    if (eos) jsonw_str(&w, eos); else jsonw_null(&w);
    jsonw_key(&w, "errors"); jsonw_str(&w, "replace");
    jsonw_key(&w, "model_max_length"); jsonw_int(&w, MKTOK_MODEL_MAX_LENGTH);
    jsonw_key(&w, "pad_token");
    if (pad) jsonw_str(&w, pad); else jsonw_null(&w);
    jsonw_key(&w, "split_special_tokens"); jsonw_bool(&w, false);
    jsonw_key(&w, "tokenizer_class"); jsonw_str(&w, "Qwen2Tokenizer");
    jsonw_key(&w, "unk_token"); jsonw_null(&w);
    jsonw_obj_end(&w);
    strbuf_putc(&sb, '\n');
    return strbuf_detach(&sb, NULL);
}

void mktok_gguf_put(const struct mktok *t, struct gguf_writer *w, const char *chat_template)
{
    /* never fewer entries than tokens; mkmodel keeps n_vocab >= n_tokens */
    int64_t n = HS_MAX(t->n_vocab, t->n_tokens);
    const char **tokens = hs_malloc((size_t)n * sizeof *tokens);
    int32_t *types = hs_malloc((size_t)n * sizeof *types);
    char **pads = hs_calloc((size_t)(n - t->n_tokens + 1), sizeof *pads);
    for (int64_t i = 0; i < n; i++) {
        if (i < t->n_tokens) {
            tokens[i] = t->tokens[i];
            types[i] = t->token_type[i];
        } else {
            /* padding rows, named and typed as llama.cpp's converter does */
            char buf[32];
            snprintf(buf, sizeof buf, "[PAD%" PRId64 "]", i);
            tokens[i] = pads[i - t->n_tokens] = hs_strdup(buf);
            types[i] = MKTOK_UNUSED;
        }
    }
    gguf_writer_set_str(w, "tokenizer.ggml.model", "gpt2");
    gguf_writer_set_str(w, "tokenizer.ggml.pre", t->pre);
    gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", tokens, (uint64_t)n);
    gguf_writer_set_arr_i32(w, "tokenizer.ggml.token_type", types, (uint64_t)n);
    gguf_writer_set_arr_str(w, "tokenizer.ggml.merges", (const char *const *)t->merges, (uint64_t)t->n_merges);
    if (t->eos_id >= 0) {
        gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)t->eos_id);
        /* Qwen's config.json gives bos_token_id = <|endoftext|>, which converters copy; it
         * is never added (add_bos_token false) */
        gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)t->eos_id);
    }
    if (t->pad_id >= 0) gguf_writer_set_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)t->pad_id);
    gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", false);
    if (chat_template) gguf_writer_set_str(w, "tokenizer.chat_template", chat_template);
    for (int64_t i = 0; i < n - t->n_tokens; i++) hs_free(pads[i]);
    hs_free(pads);
    hs_free(tokens);
    hs_free(types);
}
