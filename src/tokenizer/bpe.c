/* bpe.c — byte-level BPE: building the tables, encoding, decoding, lookups.
 *
 * Design note
 * -----------
 * The contract is in tokenizer.h; this file's own invariants:
 *   1. Tokens are kept as raw bytes (the GPT-2 byte-level form is undone once, at init),
 *      so BPE runs on the bytes of a piece: the initial symbols are the single-byte tokens
 *      and a merge (a, b) is looked up by the pair of ids, giving (rank, merged id).
 *   2. The merge loop keeps a binary min-heap of candidate pairs ordered by (rank, start
 *      byte of the left symbol); an entry is stale, and skipped, unless its left symbol is
 *      still alive with the same id and the same right neighbour of the same id. That is
 *      HF's order (lowest rank, then leftmost) in O(n log n).
 *   3. A byte with no single-byte token is dropped, as HF's BPE does without unk/fallback.
 *   4. The piece cache (pieces up to CACHE_MAX_PIECE bytes) is an open-addressing table
 *      over two arenas; when any of them fills it is cleared whole, so memory is bounded
 *      and results never depend on what was cached (the cache stores the merge output).
 *   5. The regex only ever sees valid UTF-8 (checked here, then matched with
 *      PCRE2_NO_UTF_CHECK); invalid runs bypass it as whole pieces.
 */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/tokenizer.h"

#include <pcre2.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#define CACHE_SLOTS (1u << 16)
#define CACHE_MAX_USED (CACHE_SLOTS / 2)
#define CACHE_MAX_PIECE 128
#define CACHE_KEY_BYTES (1u << 21)
#define CACHE_ID_COUNT (1u << 19)
#define MAX_VOCAB (1 << 28)   /* keeps the hash tables' power-of-two sizes in uint32 */
#define MAX_MERGES (1 << 28)

enum piece_kind { PIECE_HOLE = 0, PIECE_VOCAB, PIECE_ADDED, PIECE_SPECIAL };

struct added {
    int32_t id;
    unsigned flags;
    char *s;      /* owned */
    size_t len;
};

struct merge_slot {
    uint64_t key;   /* (left id << 32) | right id */
    int32_t rank;   /* -1: empty slot */
    int32_t id;     /* merged token */
};

struct cache_slot {
    uint64_t hash;
    uint32_t key_off, ids_off;
    uint16_t key_len, n_ids;
    bool used;
};

struct sym {
    int32_t id;
    int32_t prev, next; /* symbol indices, -1 at the ends */
    uint32_t start, len; /* len 0: merged away */
};

struct heap_item {
    int32_t rank;
    int32_t left;       /* symbol index == start byte of the symbol at push time */
    int32_t left_id, right_id;
    int32_t merged_id;
};

struct tokenizer {
    int32_t n_vocab;
    char *pieces;            /* raw bytes of all tokens, concatenated */
    uint32_t *piece_off;     /* [n_vocab] */
    uint32_t *piece_len;     /* [n_vocab] */
    uint8_t *kind;           /* [n_vocab] enum piece_kind */
    int32_t byte_id[256];    /* single-byte token ids, -1 when missing */

    int32_t *vmap;           /* raw bytes -> id, open addressing, -1 empty */
    uint32_t vmap_mask;
    struct merge_slot *mmap;
    uint32_t mmap_mask;

    struct added *added;
    int n_added;
    int *added_order;        /* indices into added, grouped by first byte, longest first */
    uint32_t added_bucket[257];

    pcre2_code *re;          /* NULL: no split regex */
    bool jit;
    bool nfc;

    pthread_mutex_t mu;      /* guards everything below */
    pcre2_match_data *md;
    pcre2_match_context *mctx;
    pcre2_jit_stack *jstack;
    struct cache_slot *cslots;
    uint32_t c_used;
    char *ckeys;
    uint32_t ckeys_len;
    int32_t *cids;
    uint32_t cids_len;
    struct sym *syms;
    size_t syms_cap;
    struct heap_item *heap;
    size_t heap_cap;
    struct strbuf nfc_buf;   /* NFC output of the current text run */
    int32_t *nfc_cps;        /* code points of one NFC stretch */
    uint8_t *nfc_ccc;        /* their combining classes */
    size_t nfc_cap;
    int32_t *nfc_tmp;        /* counting-sort output */
    size_t nfc_tmp_cap;
};

/* ---- the GPT-2 byte map ------------------------------------------------------------- */

/* Printable Latin-1 bytes stand for themselves; the other 68 are moved to U+0100.. in
 * byte order, so every byte has a visible, non-space code point. */
static bool byte_is_direct(unsigned b)
{
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
}

uint32_t tokenizer_byte_to_cp(uint8_t b)
{
    if (byte_is_direct(b)) return b;
    if (b <= 32) return 256u + b;
    if (b <= 160) return 256u + 33u + (b - 127u);
    return 256u + 33u + 34u; /* 173 */
}

int tokenizer_cp_to_byte(uint32_t cp)
{
    if (cp < 256) return byte_is_direct(cp) ? (int)cp : -1;
    if (cp < 256 + 33) return (int)(cp - 256);
    if (cp < 256 + 33 + 34) return (int)(cp - 256 - 33 + 127);
    if (cp == 256 + 33 + 34) return 173;
    return -1;
}

/* ---- UTF-8 -------------------------------------------------------------------------- */

/* The code point of the valid sequence p[0..k) (k from hs_utf8_seq_len). */
static uint32_t utf8_cp(const uint8_t *p, size_t k)
{
    uint32_t cp = 0;
    hs_utf8_decode(p, k, &cp, NULL);
    return cp;
}

/* Unicode White_Space, the set Rust's char::is_whitespace and regex `\s` use. */
static bool cp_is_space(uint32_t c)
{
    return (c >= 9 && c <= 13) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

static bool cp_is_word(uint32_t c)
{
    if (c < 0x80) return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || c == '_';
    utf8proc_category_t k = utf8proc_category((utf8proc_int32_t)c);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) ||
           (k >= UTF8PROC_CATEGORY_ND && k <= UTF8PROC_CATEGORY_NO);
}

/* The code point that ends at p[end) (scanning back at most 4 bytes); false if invalid. */
static bool utf8_cp_before(const uint8_t *p, size_t begin, size_t end, uint32_t *cp, size_t *k)
{
    for (size_t n = 1; n <= 4 && n <= end - begin; n++) {
        if (hs_utf8_seq_len(p + end - n, n) == n) { *cp = utf8_cp(p + end - n, n); *k = n; return true; }
    }
    return false;
}

/* ---- hashing ------------------------------------------------------------------------ */

static uint64_t hash_bytes(const void *data, size_t n)
{
    const uint8_t *p = data;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
        p += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, p, n);
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    h *= 0xFF51AFD7ED558CCDull;
    return h ^ (h >> 32);
}

static uint64_t hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    x *= 0xC4CEB9FE1A85EC53ull;
    return x ^ (x >> 33);
}

static uint32_t pow2_at_least(uint64_t n)
{
    uint32_t s = 16;
    while (s < n) s <<= 1;
    return s;
}

/* ---- lookups ------------------------------------------------------------------------ */

int32_t tokenizer_n_vocab(const struct tokenizer *t) { return t->n_vocab; }

const char *tokenizer_piece(const struct tokenizer *t, int32_t id, size_t *len)
{
    if (id < 0 || id >= t->n_vocab || t->kind[id] == PIECE_HOLE) return NULL;
    *len = t->piece_len[id];
    return t->pieces + t->piece_off[id];
}

bool tokenizer_is_special(const struct tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab && t->kind[id] == PIECE_SPECIAL;
}

bool tokenizer_is_added(const struct tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab && (t->kind[id] == PIECE_ADDED || t->kind[id] == PIECE_SPECIAL);
}

static int32_t vmap_find(const struct tokenizer *t, const void *s, size_t len)
{
    for (uint32_t i = (uint32_t)hash_bytes(s, len) & t->vmap_mask;; i = (i + 1) & t->vmap_mask) {
        int32_t id = t->vmap[i];
        if (id < 0) return -1;
        if (t->piece_len[id] == len && memcmp(t->pieces + t->piece_off[id], s, len) == 0) return id;
    }
}

int32_t tokenizer_token_id(const struct tokenizer *t, const char *s, size_t len)
{
    for (int i = 0; i < t->n_added; i++)
        if (t->added[i].len == len && memcmp(t->added[i].s, s, len) == 0) return t->added[i].id;
    return vmap_find(t, s, len);
}

static const struct merge_slot *merge_find(const struct tokenizer *t, int32_t a, int32_t b)
{
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (uint32_t i = (uint32_t)hash_u64(key) & t->mmap_mask;; i = (i + 1) & t->mmap_mask) {
        const struct merge_slot *m = &t->mmap[i];
        if (m->rank < 0) return NULL;
        if (m->key == key) return m;
    }
}

/* ---- init --------------------------------------------------------------------------- */

/* Undo the byte-level form: each code point of the map becomes its byte; anything else
 * (not expected in a byte-level vocabulary) keeps its UTF-8 bytes. */
static void bytelevel_to_raw(const char *s, size_t n, struct strbuf *out)
{
    const uint8_t *p = (const uint8_t *)s;
    size_t i = 0;
    while (i < n) {
        size_t k = hs_utf8_seq_len(p + i, n - i);
        if (k == 0) { strbuf_putc(out, (char)p[i]); i++; continue; }
        int b = tokenizer_cp_to_byte(utf8_cp(p + i, k));
        if (b >= 0) strbuf_putc(out, (char)b);
        else strbuf_append(out, p + i, k);
        i += k;
    }
}

/* Rewrite `\s`/`\S` to Unicode White_Space (the set HF's Oniguruma `\s` is; PCRE2's UCP
 * `\s` also matches U+180E), and `\p{L}`, `\p{N}`, `\p{M}` (and `\P{..}`) to PCRE2's class
 * plus the code points Unicode assigned to that category after PCRE2 10.42's Unicode 14.0,
 * up to Unicode 16.0: the tables of HF tokenizers 0.23 (Oniguruma 6.9.10). Without them a
 * letter of Garay, Kawi or CJK Extension I is "not a letter" to us and a letter to the
 * reference, and the split differs (tests/golden/tokenizer_parity.sh sweeps every code
 * point). A newer PCRE2 already has these ranges, so the union is harmless there. Inside a
 * class the lists are bare; `\S`/`\P{..}` inside a class have no list form and are left to
 * PCRE2. */
#define WS_LIST "\\t\\n\\x0B\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"
/* Unicode 15.0, 15.1 and 16.0 additions to L, N and M (ranges, inclusive). */
#define U16_L                                                                                 \
    "\\x{1C89}-\\x{1C8A}\\x{A7CB}-\\x{A7CD}\\x{A7DA}-\\x{A7DC}\\x{105C0}-\\x{105F3}"          \
    "\\x{10D4A}-\\x{10D65}\\x{10D6F}-\\x{10D85}\\x{10EC2}-\\x{10EC4}\\x{1123F}-\\x{11240}"    \
    "\\x{11380}-\\x{11389}\\x{1138B}\\x{1138E}\\x{11390}-\\x{113B5}\\x{113B7}\\x{113D1}"      \
    "\\x{113D3}\\x{11BC0}-\\x{11BE0}\\x{11F02}\\x{11F04}-\\x{11F10}\\x{11F12}-\\x{11F33}"     \
    "\\x{1342F}\\x{13441}-\\x{13446}\\x{13460}-\\x{143FA}\\x{16100}-\\x{1611D}"               \
    "\\x{16D40}-\\x{16D6C}\\x{18CFF}\\x{1B132}\\x{1B155}\\x{1DF25}-\\x{1DF2A}"                \
    "\\x{1E030}-\\x{1E06D}\\x{1E4D0}-\\x{1E4EB}\\x{1E5D0}-\\x{1E5ED}\\x{1E5F0}\\x{2B739}"     \
    "\\x{2EBF0}-\\x{2EE5D}\\x{31350}-\\x{323AF}"
#define U16_N                                                                                 \
    "\\x{10D40}-\\x{10D49}\\x{116D0}-\\x{116E3}\\x{11BF0}-\\x{11BF9}\\x{11F50}-\\x{11F59}"    \
    "\\x{16130}-\\x{16139}\\x{16D70}-\\x{16D79}\\x{1CCF0}-\\x{1CCF9}\\x{1D2C0}-\\x{1D2D3}"    \
    "\\x{1E4F0}-\\x{1E4F9}\\x{1E5F1}-\\x{1E5FA}"
#define U16_M                                                                                 \
    "\\x{897}\\x{CF3}\\x{ECE}\\x{10D69}-\\x{10D6D}\\x{10EFC}-\\x{10EFF}\\x{11241}"            \
    "\\x{113B8}-\\x{113C0}\\x{113C2}\\x{113C5}\\x{113C7}-\\x{113CA}\\x{113CC}-\\x{113D0}"     \
    "\\x{113D2}\\x{113E1}-\\x{113E2}\\x{11F00}-\\x{11F01}\\x{11F03}\\x{11F34}-\\x{11F3A}"     \
    "\\x{11F3E}-\\x{11F42}\\x{11F5A}\\x{13440}\\x{13447}-\\x{13455}\\x{1611E}-\\x{1612F}"     \
    "\\x{1E08F}\\x{1E4EC}-\\x{1E4EF}\\x{1E5EE}-\\x{1E5EF}"

/* The list that `\p{X}` at re (pointing at 'p' or 'P') stands for, with its length in *n;
 * NULL when it is not one of \p{L}, \p{N}, \p{M}. */
static const char *prop_list(const char *re, size_t *n, char *cat)
{
    if ((re[0] != 'p' && re[0] != 'P') || re[1] != '{' || !re[2] || re[3] != '}') return NULL;
    *n = 4;
    *cat = re[2];
    switch (re[2]) {
    case 'L': return U16_L;
    case 'N': return U16_N;
    case 'M': return U16_M;
    default: return NULL;
    }
}

static void regex_rewrite(const char *re, struct strbuf *out)
{
    bool in_class = false;
    for (size_t i = 0; re[i]; i++) {
        char c = re[i];
        if (c == '\\' && re[i + 1]) {
            char d = re[i + 1], cat = 0;
            size_t pn = 0;
            const char *pl = prop_list(re + i + 1, &pn, &cat);
            if (d == 's') {
                strbuf_puts(out, in_class ? WS_LIST : "[" WS_LIST "]");
            } else if (d == 'S' && !in_class) {
                strbuf_puts(out, "[^" WS_LIST "]");
            } else if (pl && (d == 'p' || !in_class)) {
                /* \p{X} -> [\p{X}extra] (bare inside a class); \P{X} -> [^\p{X}extra] */
                strbuf_puts(out, in_class ? "" : d == 'p' ? "[" : "[^");
                strbuf_printf(out, "\\p{%c}%s", cat, pl);
                if (!in_class) strbuf_putc(out, ']');
                i += pn;
                continue;
            } else {
                strbuf_putc(out, c);
                strbuf_putc(out, d);
            }
            i++;
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = true;
            strbuf_putc(out, c);
            /* a ']' right after '[' or '[^' is a literal */
            if (re[i + 1] == '^') { strbuf_putc(out, '^'); i++; }
            if (re[i + 1] == ']') { strbuf_putc(out, ']'); i++; }
            continue;
        }
        if (c == ']' && in_class) in_class = false;
        strbuf_putc(out, c);
    }
}

static int init_regex(struct tokenizer *t, const char *pattern, struct hs_err *err)
{
    struct strbuf sb;
    strbuf_init(&sb);
    regex_rewrite(pattern, &sb);
    int ec = 0;
    PCRE2_SIZE eo = 0;
    t->re = pcre2_compile((PCRE2_SPTR)(sb.buf ? sb.buf : ""), sb.len, PCRE2_UTF | PCRE2_UCP, &ec, &eo,
                          NULL);
    strbuf_free(&sb);
    if (!t->re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return hs_err_set(err, HS_ERR_FORMAT, "split_regex: does not compile at offset %zu: %s",
                          (size_t)eo, (const char *)msg);
    }
    t->jit = pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE) == 0;
    t->md = pcre2_match_data_create_from_pattern(t->re, NULL);
    t->mctx = pcre2_match_context_create(NULL);
    if (!t->md || !t->mctx) return hs_err_set(err, HS_ERR_NOMEM, "split_regex: out of memory");
    if (t->jit) {
        t->jstack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
        if (!t->jstack) return hs_err_set(err, HS_ERR_NOMEM, "split_regex: no JIT stack");
        pcre2_jit_stack_assign(t->mctx, NULL, t->jstack);
    }
    return HS_OK;
}

static int init_pieces(struct tokenizer *t, const struct tokenizer_spec *spec, struct hs_err *err)
{
    int32_t n = spec->n_vocab;
    t->piece_off = hs_calloc((size_t)n, sizeof *t->piece_off);
    t->piece_len = hs_calloc((size_t)n, sizeof *t->piece_len);
    t->kind = hs_calloc((size_t)n, 1);
    const char **added_content = hs_calloc((size_t)n, sizeof *added_content);
    for (int i = 0; i < spec->n_added; i++) {
        const struct tokenizer_added *a = &spec->added[i];
        if (a->id < 0 || a->id >= n) {
            hs_free(added_content);
            return hs_err_set(err, HS_ERR_FORMAT, "added[%d]: id %d outside the vocabulary (0..%d)",
                              i, (int)a->id, (int)n - 1);
        }
        if (!a->content || !a->content[0]) {
            hs_free(added_content);
            return hs_err_set(err, HS_ERR_FORMAT, "added[%d] (id %d): empty content", i, (int)a->id);
        }
        added_content[a->id] = a->content;
        t->kind[a->id] = (a->flags & TOKENIZER_ADDED_SPECIAL) ? PIECE_SPECIAL : PIECE_ADDED;
    }
    struct strbuf sb;
    strbuf_init(&sb);
    int rc = HS_OK;
    for (int32_t id = 0; id < n; id++) {
        size_t before = sb.len;
        if (added_content[id]) {
            strbuf_puts(&sb, added_content[id]);
        } else if (spec->id_to_token[id]) {
            const char *s = spec->id_to_token[id];
            if (!s[0]) {
                rc = hs_err_set(err, HS_ERR_FORMAT, "id_to_token[%d]: empty token", (int)id);
                break;
            }
            bytelevel_to_raw(s, strlen(s), &sb);
            t->kind[id] = PIECE_VOCAB;
        } else {
            continue;
        }
        if (sb.len > UINT32_MAX) {
            rc = hs_err_set(err, HS_ERR_LIMIT, "id_to_token: more than 4 GiB of token text");
            break;
        }
        t->piece_off[id] = (uint32_t)before;
        t->piece_len[id] = (uint32_t)(sb.len - before);
    }
    hs_free(added_content);
    size_t len;
    strbuf_putc(&sb, 0); /* so an all-empty vocabulary still owns a buffer */
    t->pieces = strbuf_detach(&sb, &len);
    if (rc) return rc;

    t->vmap_mask = pow2_at_least((uint64_t)n * 2) - 1;
    t->vmap = hs_malloc(((size_t)t->vmap_mask + 1) * sizeof *t->vmap);
    memset(t->vmap, 0xFF, ((size_t)t->vmap_mask + 1) * sizeof *t->vmap);
    for (int32_t id = 0; id < n; id++) {
        if (t->kind[id] == PIECE_HOLE) continue;
        const char *s = t->pieces + t->piece_off[id];
        uint32_t i = (uint32_t)hash_bytes(s, t->piece_len[id]) & t->vmap_mask;
        bool dup = false;
        for (; t->vmap[i] >= 0; i = (i + 1) & t->vmap_mask) {
            int32_t o = t->vmap[i];
            if (t->piece_len[o] == t->piece_len[id] && memcmp(t->pieces + t->piece_off[o], s, t->piece_len[id]) == 0) {
                dup = true; /* the lowest id keeps the string */
                break;
            }
        }
        if (!dup) t->vmap[i] = id;
    }
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        t->byte_id[b] = vmap_find(t, &c, 1);
    }
    return HS_OK;
}

static int init_merges(struct tokenizer *t, const struct tokenizer_spec *spec, struct hs_err *err)
{
    if (spec->n_merges < 0 || spec->n_merges > MAX_MERGES)
        return hs_err_set(err, HS_ERR_LIMIT, "merges: count %lld out of range", (long long)spec->n_merges);
    t->mmap_mask = pow2_at_least((uint64_t)spec->n_merges * 2) - 1;
    t->mmap = hs_malloc(((size_t)t->mmap_mask + 1) * sizeof *t->mmap);
    for (size_t i = 0; i <= t->mmap_mask; i++) t->mmap[i].rank = -1;
    struct strbuf a, b;
    strbuf_init(&a);
    strbuf_init(&b);
    int rc = HS_OK;
    for (int64_t r = 0; r < spec->n_merges && rc == HS_OK; r++) {
        const char *m = spec->merges[r];
        const char *sp = m ? strchr(m, ' ') : NULL;
        if (!sp || sp == m || !sp[1]) {
            rc = hs_err_set(err, HS_ERR_FORMAT, "merges[%lld]: '%.64s' is not \"left right\"",
                            (long long)r, m ? m : "(null)");
            break;
        }
        strbuf_reset(&a);
        strbuf_reset(&b);
        bytelevel_to_raw(m, (size_t)(sp - m), &a);
        bytelevel_to_raw(sp + 1, strlen(sp + 1), &b);
        int32_t ia = vmap_find(t, a.buf, a.len), ib = vmap_find(t, b.buf, b.len);
        strbuf_append(&a, b.buf, b.len);
        int32_t im = vmap_find(t, a.buf, a.len);
        if (ia < 0 || ib < 0 || im < 0) {
            rc = hs_err_set(err, HS_ERR_FORMAT, "merges[%lld]: '%.64s': %s is not in the vocabulary",
                            (long long)r, m, ia < 0 ? "the left part" : ib < 0 ? "the right part" : "the merged token");
            break;
        }
        uint64_t key = (uint64_t)(uint32_t)ia << 32 | (uint32_t)ib;
        uint32_t i = (uint32_t)hash_u64(key) & t->mmap_mask;
        while (t->mmap[i].rank >= 0 && t->mmap[i].key != key) i = (i + 1) & t->mmap_mask;
        if (t->mmap[i].rank >= 0) continue; /* a repeated merge keeps its first rank */
        t->mmap[i] = (struct merge_slot){ key, (int32_t)r, im };
    }
    strbuf_free(&a);
    strbuf_free(&b);
    return rc;
}

static const struct tokenizer *g_sort_t; /* qsort has no context argument in C11 */
static int added_cmp(const void *x, const void *y)
{
    const struct added *a = &g_sort_t->added[*(const int *)x], *b = &g_sort_t->added[*(const int *)y];
    uint8_t fa = (uint8_t)a->s[0], fb = (uint8_t)b->s[0];
    if (fa != fb) return fa < fb ? -1 : 1;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

static void init_added(struct tokenizer *t, const struct tokenizer_spec *spec)
{
    static pthread_mutex_t sort_mu = PTHREAD_MUTEX_INITIALIZER;
    t->n_added = spec->n_added;
    t->added = hs_calloc((size_t)HS_MAX(spec->n_added, 1), sizeof *t->added);
    t->added_order = hs_calloc((size_t)HS_MAX(spec->n_added, 1), sizeof *t->added_order);
    for (int i = 0; i < spec->n_added; i++) {
        t->added[i].id = spec->added[i].id;
        t->added[i].flags = spec->added[i].flags;
        t->added[i].s = hs_strdup(spec->added[i].content);
        t->added[i].len = strlen(t->added[i].s);
        t->added_order[i] = i;
    }
    pthread_mutex_lock(&sort_mu);
    g_sort_t = t;
    qsort(t->added_order, (size_t)t->n_added, sizeof *t->added_order, added_cmp);
    g_sort_t = NULL;
    pthread_mutex_unlock(&sort_mu);
    int k = 0;
    for (int b = 0; b < 256; b++) {
        t->added_bucket[b] = (uint32_t)k;
        while (k < t->n_added && (uint8_t)t->added[t->added_order[k]].s[0] == b) k++;
    }
    t->added_bucket[256] = (uint32_t)k;
}

int tokenizer_init(struct tokenizer **out, const struct tokenizer_spec *spec, struct hs_err *err)
{
    *out = NULL;
    if (spec->n_vocab <= 0 || !spec->id_to_token)
        return hs_err_set(err, HS_ERR_INVALID, "tokenizer: n_vocab %d (or id_to_token) invalid", (int)spec->n_vocab);
    if (spec->n_vocab > MAX_VOCAB)
        return hs_err_set(err, HS_ERR_LIMIT, "tokenizer: n_vocab %d exceeds %d", (int)spec->n_vocab, MAX_VOCAB);
    if (spec->n_added < 0 || (spec->n_added > 0 && !spec->added))
        return hs_err_set(err, HS_ERR_INVALID, "tokenizer: added tokens missing");
    if (spec->n_merges > 0 && !spec->merges)
        return hs_err_set(err, HS_ERR_INVALID, "tokenizer: merges missing");
    struct tokenizer *t = hs_calloc(1, sizeof *t);
    t->n_vocab = spec->n_vocab;
    t->nfc = spec->nfc;
    pthread_mutex_init(&t->mu, NULL);
    strbuf_init(&t->nfc_buf);
    int rc = init_pieces(t, spec, err);
    if (rc == HS_OK) rc = init_merges(t, spec, err);
    if (rc == HS_OK) init_added(t, spec);
    if (rc == HS_OK && spec->split_regex) rc = init_regex(t, spec->split_regex, err);
    if (rc != HS_OK) {
        tokenizer_free(t);
        return rc;
    }
    t->cslots = hs_calloc(CACHE_SLOTS, sizeof *t->cslots);
    t->ckeys = hs_malloc(CACHE_KEY_BYTES);
    t->cids = hs_malloc(CACHE_ID_COUNT * sizeof *t->cids);
    *out = t;
    return HS_OK;
}

void tokenizer_free(struct tokenizer *t)
{
    if (!t) return;
    hs_free(t->pieces);
    hs_free(t->piece_off);
    hs_free(t->piece_len);
    hs_free(t->kind);
    hs_free(t->vmap);
    hs_free(t->mmap);
    for (int i = 0; t->added && i < t->n_added; i++) hs_free(t->added[i].s);
    hs_free(t->added);
    hs_free(t->added_order);
    pcre2_match_data_free(t->md);
    pcre2_match_context_free(t->mctx);
    pcre2_jit_stack_free(t->jstack);
    pcre2_code_free(t->re);
    hs_free(t->cslots);
    hs_free(t->ckeys);
    hs_free(t->cids);
    hs_free(t->syms);
    hs_free(t->heap);
    strbuf_free(&t->nfc_buf);
    hs_free(t->nfc_cps);
    hs_free(t->nfc_ccc);
    hs_free(t->nfc_tmp);
    pthread_mutex_destroy(&t->mu);
    hs_free(t);
}

/* ---- encode ------------------------------------------------------------------------- */

void tokenizer_ids_free(struct tokenizer_ids *ids)
{
    hs_free(ids->v);
    ids->v = NULL;
    ids->n = ids->cap = 0;
}

static void ids_push(struct tokenizer_ids *o, int32_t id)
{
    if (o->n == o->cap) {
        o->cap = o->cap ? o->cap * 2 : 64;
        o->v = hs_realloc(o->v, o->cap * sizeof *o->v);
    }
    o->v[o->n++] = id;
}

static bool heap_less(const struct heap_item *a, const struct heap_item *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->left < b->left;
}

static void heap_push(struct tokenizer *t, size_t *n, struct heap_item it)
{
    if (*n == t->heap_cap) {
        t->heap_cap = t->heap_cap ? t->heap_cap * 2 : 256;
        t->heap = hs_realloc(t->heap, t->heap_cap * sizeof *t->heap);
    }
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&it, &t->heap[p])) break;
        t->heap[i] = t->heap[p];
        i = p;
    }
    t->heap[i] = it;
}

static struct heap_item heap_pop(struct tokenizer *t, size_t *n)
{
    struct heap_item top = t->heap[0], last = t->heap[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= *n) break;
        if (c + 1 < *n && heap_less(&t->heap[c + 1], &t->heap[c])) c++;
        if (!heap_less(&t->heap[c], &last)) break;
        t->heap[i] = t->heap[c];
        i = c;
    }
    if (*n > 0) t->heap[i] = last;
    return top;
}

static void pair_push(struct tokenizer *t, size_t *nh, int32_t left)
{
    const struct sym *s = t->syms;
    int32_t right = s[left].next;
    if (right < 0 || s[left].id < 0 || s[right].id < 0) return;
    const struct merge_slot *m = merge_find(t, s[left].id, s[right].id);
    if (m) heap_push(t, nh, (struct heap_item){ m->rank, left, s[left].id, s[right].id, m->id });
}

/* BPE over the bytes of one piece; appends the resulting ids. */
static void bpe_piece(struct tokenizer *t, const uint8_t *p, size_t n, struct tokenizer_ids *out)
{
    if (n == 1) {
        if (t->byte_id[p[0]] >= 0) ids_push(out, t->byte_id[p[0]]);
        return;
    }
    uint64_t h = 0;
    struct cache_slot *slot = NULL;
    if (n <= CACHE_MAX_PIECE) {
        h = hash_bytes(p, n);
        for (uint32_t i = (uint32_t)h & (CACHE_SLOTS - 1);; i = (i + 1) & (CACHE_SLOTS - 1)) {
            struct cache_slot *c = &t->cslots[i];
            if (!c->used) { slot = c; break; }
            if (c->hash == h && c->key_len == n && memcmp(t->ckeys + c->key_off, p, n) == 0) {
                for (uint32_t k = 0; k < c->n_ids; k++) ids_push(out, t->cids[c->ids_off + k]);
                return;
            }
        }
    }
    if (n > t->syms_cap) {
        t->syms_cap = HS_MAX(n, 2 * t->syms_cap);
        t->syms = hs_realloc(t->syms, t->syms_cap * sizeof *t->syms);
    }
    struct sym *s = t->syms;
    for (size_t i = 0; i < n; i++)
        s[i] = (struct sym){ t->byte_id[p[i]], (int32_t)i - 1, i + 1 < n ? (int32_t)i + 1 : -1, (uint32_t)i, 1 };
    size_t nh = 0;
    for (size_t i = 0; i + 1 < n; i++) pair_push(t, &nh, (int32_t)i);
    while (nh > 0) {
        struct heap_item it = heap_pop(t, &nh);
        struct sym *l = &s[it.left];
        if (l->len == 0 || l->id != it.left_id || l->next < 0 || s[l->next].id != it.right_id) continue;
        struct sym *r = &s[l->next];
        l->id = it.merged_id;
        l->len += r->len;
        r->len = 0;
        l->next = r->next;
        if (l->next >= 0) s[l->next].prev = it.left;
        if (l->prev >= 0) pair_push(t, &nh, l->prev);
        pair_push(t, &nh, it.left);
    }
    size_t first = out->n;
    for (int32_t i = 0; i >= 0; i = s[i].next)
        if (s[i].id >= 0) ids_push(out, s[i].id);
    if (!slot) return;
    size_t k = out->n - first;
    if (t->c_used >= CACHE_MAX_USED || t->ckeys_len + n > CACHE_KEY_BYTES || t->cids_len + k > CACHE_ID_COUNT) {
        memset(t->cslots, 0, CACHE_SLOTS * sizeof *t->cslots);
        t->c_used = t->ckeys_len = t->cids_len = 0;
        for (uint32_t i = (uint32_t)h & (CACHE_SLOTS - 1);; i = (i + 1) & (CACHE_SLOTS - 1))
            if (!t->cslots[i].used) { slot = &t->cslots[i]; break; }
    }
    *slot = (struct cache_slot){ h, t->ckeys_len, t->cids_len, (uint16_t)n, (uint16_t)k, true };
    memcpy(t->ckeys + t->ckeys_len, p, n);
    memcpy(t->cids + t->cids_len, out->v + first, k * sizeof *out->v);
    t->ckeys_len += (uint32_t)n;
    t->cids_len += (uint32_t)k;
    t->c_used++;
}

/* Split valid UTF-8 text with the regex (Isolated: matches and gaps are pieces). */
static int split_and_bpe(struct tokenizer *t, const uint8_t *s, size_t n, struct tokenizer_ids *out,
                         struct hs_err *err)
{
    if (!t->re) { bpe_piece(t, s, n, out); return HS_OK; }
    size_t off = 0, gap = 0;
    while (off < n) {
        int rc = t->jit ? pcre2_jit_match(t->re, s, n, off, PCRE2_NO_UTF_CHECK, t->md, t->mctx)
                        : pcre2_match(t->re, s, n, off, PCRE2_NO_UTF_CHECK, t->md, t->mctx);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return hs_err_set(err, HS_ERR_LIMIT, "tokenizer: split regex failed at byte %zu: %s", off,
                              (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(t->md);
        size_t ms = ov[0], me = ov[1];
        if (me <= ms) { /* empty match: not a piece; move on one character */
            size_t k = hs_utf8_seq_len(s + ms, n - ms);
            off = ms + (k ? k : 1);
            continue;
        }
        if (ms > gap) bpe_piece(t, s + gap, ms - gap, out);
        bpe_piece(t, s + ms, me - ms, out);
        off = gap = me;
    }
    if (gap < n) bpe_piece(t, s + gap, n - gap, out);
    return HS_OK;
}

/* Stable sort of a run of non-starters by canonical combining class: the canonical
 * ordering step of NFD. utf8proc's own reordering is quadratic in the run length (a text
 * of many combining marks would stall encode for minutes), so ours: insertion sort for
 * short runs, a counting sort for long ones. */
static void ccc_sort(struct tokenizer *t, int32_t *cp, uint8_t *ccc, size_t n)
{
    if (n <= 8) {
        for (size_t i = 1; i < n; i++)
            for (size_t j = i; j > 0 && ccc[j - 1] > ccc[j]; j--) {
                int32_t c = cp[j]; cp[j] = cp[j - 1]; cp[j - 1] = c;
                uint8_t k = ccc[j]; ccc[j] = ccc[j - 1]; ccc[j - 1] = k;
            }
        return;
    }
    size_t count[257] = { 0 };
    for (size_t i = 0; i < n; i++) count[ccc[i] + 1]++;
    for (int k = 1; k < 257; k++) count[k] += count[k - 1];
    if (n > t->nfc_tmp_cap) {
        t->nfc_tmp_cap = HS_MAX(n, 2 * t->nfc_tmp_cap);
        t->nfc_tmp = hs_realloc(t->nfc_tmp, t->nfc_tmp_cap * sizeof *t->nfc_tmp);
    }
    for (size_t i = 0; i < n; i++) t->nfc_tmp[count[ccc[i]]++] = cp[i];
    memcpy(cp, t->nfc_tmp, n * sizeof *cp);
    for (size_t i = 0; i < n; i++) ccc[i] = (uint8_t)utf8proc_get_property(cp[i])->combining_class;
}

/* NFC of a stretch of valid UTF-8: canonical decomposition (utf8proc, one code point at a
 * time), canonical ordering (ccc_sort), canonical composition (utf8proc, linear). The
 * composition needs UTF8PROC_STABLE: without it utf8proc ignores the composition
 * exclusions and turns U+2ADD U+0338 back into U+2ADC (NFC keeps it decomposed). */
static void nfc_stretch(struct tokenizer *t, const uint8_t *s, size_t n, struct strbuf *out)
{
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        size_t k = hs_utf8_seq_len(s + i, n - i);
        uint32_t c = utf8_cp(s + i, k);
        i += k;
        if (m + 8 > t->nfc_cap) { /* a canonical decomposition is at most 4 code points */
            t->nfc_cap = HS_MAX(m + 8, 2 * t->nfc_cap);
            t->nfc_cps = hs_realloc(t->nfc_cps, t->nfc_cap * sizeof *t->nfc_cps);
            t->nfc_ccc = hs_realloc(t->nfc_ccc, t->nfc_cap);
        }
        int bound = 0;
        utf8proc_ssize_t d = utf8proc_decompose_char((utf8proc_int32_t)c, t->nfc_cps + m, 8, UTF8PROC_DECOMPOSE, &bound);
        if (d < 0 || d > 8) { t->nfc_cps[m] = (int32_t)c; d = 1; } /* not expected for valid input */
        m += (size_t)d;
    }
    for (size_t i = 0; i < m; i++) t->nfc_ccc[i] = (uint8_t)utf8proc_get_property(t->nfc_cps[i])->combining_class;
    for (size_t i = 0; i < m;) {
        if (t->nfc_ccc[i] == 0) { i++; continue; }
        size_t j = i;
        while (j < m && t->nfc_ccc[j] != 0) j++;
        if (j - i > 1) ccc_sort(t, t->nfc_cps + i, t->nfc_ccc + i, j - i);
        i = j;
    }
    utf8proc_ssize_t r =
        utf8proc_normalize_utf32(t->nfc_cps, (utf8proc_ssize_t)m, UTF8PROC_COMPOSE | UTF8PROC_STABLE);
    if (r < 0) r = (utf8proc_ssize_t)m;
    for (utf8proc_ssize_t i = 0; i < r; i++) {
        uint8_t buf[4];
        utf8proc_ssize_t w = utf8proc_encode_char(t->nfc_cps[i], buf);
        strbuf_append(out, buf, (size_t)w);
    }
}

/* NFC of valid UTF-8 into out. Code points below U+0300 never change under NFC on their
 * own, and an ASCII character is a starter that composes with nothing before it, so NFC
 * distributes over a cut made just before an ASCII character: only the stretches from the
 * last ASCII character before a byte >= 0xCC (a lead of U+0300 and up) to the next ASCII
 * character are normalised; the rest is copied. */
static void nfc_into(struct tokenizer *t, const uint8_t *s, size_t n, struct strbuf *out)
{
    size_t done = 0, i = 0;
    while (i < n) {
        if (s[i] < 0xCC) { i++; continue; }
        size_t a = i;
        while (a > done && s[a - 1] >= 0x80) a--;
        if (a > done) a--; /* include the ASCII character before, it may compose */
        size_t e = i + 1;
        while (e < n && s[e] >= 0x80) e++;
        strbuf_append(out, s + done, a - done);
        nfc_stretch(t, s + a, e - a, out);
        done = i = e;
    }
    strbuf_append(out, s + done, n - done);
}

/* One section of text between added tokens. */
static int encode_section(struct tokenizer *t, const uint8_t *s, size_t n, struct tokenizer_ids *out,
                          struct hs_err *err)
{
    size_t i = 0;
    while (i < n) {
        size_t j = i;
        bool plain = true; /* no byte >= 0xCC: NFC is the identity */
        while (j < n) {
            if (s[j] < 0x80) { j++; continue; }
            size_t k = hs_utf8_seq_len(s + j, n - j);
            if (!k) break;
            plain &= s[j] < 0xCC;
            j += k;
        }
        if (j > i) {
            int rc;
            if (t->nfc && !plain) {
                strbuf_reset(&t->nfc_buf);
                nfc_into(t, s + i, j - i, &t->nfc_buf);
                rc = split_and_bpe(t, (const uint8_t *)t->nfc_buf.buf, t->nfc_buf.len, out, err);
            } else {
                rc = split_and_bpe(t, s + i, j - i, out, err);
            }
            if (rc) return rc;
        }
        i = j;
        /* a maximal run of bytes where no valid sequence starts is one piece */
        while (j < n && s[j] >= 0x80 && hs_utf8_seq_len(s + j, n - j) == 0) j++;
        if (j > i) bpe_piece(t, s + i, j - i, out);
        i = j;
    }
    return HS_OK;
}

/* The added token that matches at p (longest first), honouring single_word; -1 if none. */
static int added_at(const struct tokenizer *t, const uint8_t *s, size_t n, size_t p, unsigned flags)
{
    uint32_t b = s[p];
    for (uint32_t k = t->added_bucket[b]; k < t->added_bucket[b + 1]; k++) {
        const struct added *a = &t->added[t->added_order[k]];
        if ((flags & TOKENIZER_ENCODE_NO_SPECIAL) && (a->flags & TOKENIZER_ADDED_SPECIAL)) continue;
        if (a->len > n - p || memcmp(s + p, a->s, a->len) != 0) continue;
        if (a->flags & TOKENIZER_ADDED_SINGLE_WORD) {
            uint32_t cp;
            size_t kk;
            if (p > 0 && utf8_cp_before(s, 0, p, &cp, &kk) && cp_is_word(cp)) continue;
            size_t e = p + a->len, k2 = e < n ? hs_utf8_seq_len(s + e, n - e) : 0;
            if (k2 && cp_is_word(utf8_cp(s + e, k2))) continue;
        }
        return t->added_order[k];
    }
    return -1;
}

int tokenizer_encode(struct tokenizer *t, const char *text, size_t len, unsigned flags,
                     struct tokenizer_ids *out, struct hs_err *err)
{
    const uint8_t *s = (const uint8_t *)text;
    if (len > INT32_MAX) /* symbol links are int32 */
        return hs_err_set(err, HS_ERR_LIMIT, "tokenizer: text of %zu bytes exceeds 2 GiB", len);
    pthread_mutex_lock(&t->mu);
    int rc = HS_OK;
    size_t sec = 0, p = 0;
    bool any = t->n_added > 0;
    while (any && p < len) {
        if (t->added_bucket[s[p]] == t->added_bucket[s[p] + 1]) { p++; continue; }
        int k = added_at(t, s, len, p, flags);
        if (k < 0) { p++; continue; }
        const struct added *a = &t->added[k];
        size_t ms = p, me = p + a->len;
        uint32_t cp;
        size_t kk;
        if (a->flags & TOKENIZER_ADDED_LSTRIP)
            while (ms > sec && utf8_cp_before(s, sec, ms, &cp, &kk) && cp_is_space(cp)) ms -= kk;
        if (a->flags & TOKENIZER_ADDED_RSTRIP)
            while (me < len && (kk = hs_utf8_seq_len(s + me, len - me)) && cp_is_space(utf8_cp(s + me, kk))) me += kk;
        if (ms > sec && (rc = encode_section(t, s + sec, ms - sec, out, err))) goto done;
        ids_push(out, a->id);
        sec = p = me;
    }
    if (len > sec) rc = encode_section(t, s + sec, len - sec, out, err);
done:
    pthread_mutex_unlock(&t->mu);
    return rc;
}

/* ---- decode ------------------------------------------------------------------------- */

int tokenizer_decode(const struct tokenizer *t, const int32_t *ids, size_t n, unsigned flags,
                     struct strbuf *out, struct hs_err *err)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= t->n_vocab || t->kind[ids[i]] == PIECE_HOLE)
            return hs_err_set(err, HS_ERR_INVALID, "decode: ids[%zu] = %d is not a token (vocabulary of %d)",
                              i, (int)ids[i], (int)t->n_vocab);
    for (size_t i = 0; i < n; i++) {
        if ((flags & TOKENIZER_DECODE_SKIP_SPECIAL) && t->kind[ids[i]] == PIECE_SPECIAL) continue;
        strbuf_append(out, t->pieces + t->piece_off[ids[i]], t->piece_len[ids[i]]);
    }
    return HS_OK;
}
