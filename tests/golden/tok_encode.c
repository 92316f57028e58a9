/* tok_encode.c — test driver for tokenizer parity (tests/golden/tokenizer_parity.sh).
 *
 *   tok_encode [options] TOKENIZER_JSON INPUT
 *     --sep S        chunk separator in INPUT (default "\n<<<CHUNK>>>\n"); "\n" escapes ok
 *     --regex R      qwen2 | qwen35 | the file's own (default)
 *     --no-nfc       ignore the file's NFC normaliser (llama.cpp does none)
 *     --check REF    compare with REF, one line of space-separated ids per chunk; prints
 *                    "chunks: N ok, M mismatched" and exits 1 on any mismatch
 *     --roundtrip    also check decode(encode(x)) == x (NFC off) and stream == one-shot
 *     --bench N      encode the whole input N times as one text, print MB/s
 *   Without --check, prints the ids of each chunk, one line each.
 * Chunks split as llama.cpp's test-tokenizer-0 does: at each separator, no trailing empty
 * chunk.
 */
#include "base/base.h"
#include "format/format.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(2); }
    struct strbuf sb;
    strbuf_init(&sb);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) strbuf_append(&sb, buf, n);
    fclose(f);
    return strbuf_detach(&sb, len);
}

static char *unescape(const char *s)
{
    struct strbuf sb;
    strbuf_init(&sb);
    for (; *s; s++) {
        if (s[0] == '\\' && s[1] == 'n') { strbuf_putc(&sb, '\n'); s++; }
        else strbuf_putc(&sb, *s);
    }
    return strbuf_detach(&sb, NULL);
}

static struct tokenizer *load(const char *path, const char *regex, bool no_nfc)
{
    struct hf_tokenizer hf;
    memset(&hf, 0, sizeof hf);
    struct hs_err err;
    hs_err_clear(&err);
    if (hf_tokenizer_load(path, &hf, &err)) { fprintf(stderr, "%s\n", err.msg); exit(2); }
    struct tokenizer_added *added = hs_calloc((size_t)HS_MAX(hf.n_added, 1), sizeof *added);
    for (int i = 0; i < hf.n_added; i++) {
        const struct hf_added_token *a = &hf.added[i];
        added[i].id = (int32_t)a->id;
        added[i].content = a->content;
        added[i].flags = (a->special ? TOKENIZER_ADDED_SPECIAL : 0) | (a->lstrip ? TOKENIZER_ADDED_LSTRIP : 0) |
                         (a->rstrip ? TOKENIZER_ADDED_RSTRIP : 0) | (a->normalized ? TOKENIZER_ADDED_NORMALIZED : 0) |
                         (a->single_word ? TOKENIZER_ADDED_SINGLE_WORD : 0);
    }
    struct tokenizer_spec spec = {
        .n_vocab = (int32_t)hf.n_vocab,
        .id_to_token = (const char *const *)hf.id_to_token,
        .n_merges = hf.n_merges,
        .merges = (const char *const *)hf.merges,
        .n_added = hf.n_added,
        .added = added,
        .split_regex = !regex ? hf.split_regex
                       : strcmp(regex, "qwen2") == 0 ? TOKENIZER_REGEX_QWEN2 : TOKENIZER_REGEX_QWEN35,
        .nfc = !no_nfc && hf.normalizer && strcmp(hf.normalizer, "NFC") == 0,
    };
    struct tokenizer *t;
    if (tokenizer_init(&t, &spec, &err)) { fprintf(stderr, "%s: %s\n", path, err.msg); exit(2); }
    hs_free(added);
    hf_tokenizer_free(&hf);
    return t;
}

/* Split like llama.cpp's read_tests: at every separator; no trailing empty chunk. */
static size_t split(char *text, size_t len, const char *sep, char ***starts, size_t **lens)
{
    size_t cap = 64, n = 0, pos = 0, sl = strlen(sep);
    *starts = hs_malloc(cap * sizeof **starts);
    *lens = hs_malloc(cap * sizeof **lens);
    while (pos < len) {
        char *next = memmem(text + pos, len - pos, sep, sl);
        size_t end = next ? (size_t)(next - text) : len;
        if (n == cap) {
            cap *= 2;
            *starts = hs_realloc(*starts, cap * sizeof **starts);
            *lens = hs_realloc(*lens, cap * sizeof **lens);
        }
        (*starts)[n] = text + pos;
        (*lens)[n] = end - pos;
        n++;
        if (!next) break;
        pos = end + sl;
    }
    return n;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    const char *sep = "\n<<<CHUNK>>>\n", *regex = NULL, *check = NULL;
    bool no_nfc = false, roundtrip = false;
    int bench = 0, a = 1;
    char *sep_owned = NULL;
    for (; a < argc && strncmp(argv[a], "--", 2) == 0; a++) {
        if (!strcmp(argv[a], "--sep") && a + 1 < argc) sep = sep_owned = unescape(argv[++a]);
        else if (!strcmp(argv[a], "--regex") && a + 1 < argc) regex = argv[++a];
        else if (!strcmp(argv[a], "--no-nfc")) no_nfc = true;
        else if (!strcmp(argv[a], "--check") && a + 1 < argc) check = argv[++a];
        else if (!strcmp(argv[a], "--roundtrip")) roundtrip = true;
        else if (!strcmp(argv[a], "--bench") && a + 1 < argc) bench = atoi(argv[++a]);
        else { fprintf(stderr, "unknown option %s\n", argv[a]); return 2; }
    }
    if (argc - a != 2) { fprintf(stderr, "usage: tok_encode [options] TOKENIZER_JSON INPUT\n"); return 2; }
    struct tokenizer *t = load(argv[a], regex, no_nfc);
    size_t len;
    char *text = read_all(argv[a + 1], &len);
    char **starts;
    size_t *lens;
    size_t n = split(text, len, sep, &starts, &lens);

    char *ref = NULL;
    size_t ref_len = 0, ref_pos = 0;
    if (check) ref = read_all(check, &ref_len);
    size_t ok = 0, bad = 0, rt_ok = 0, rt_bad = 0;
    struct hs_err err;
    hs_err_clear(&err);
    struct tokenizer_ids ids = { 0 };
    struct strbuf line, dec, st;
    strbuf_init(&line);
    strbuf_init(&dec);
    strbuf_init(&st);
    for (size_t i = 0; i < n; i++) {
        ids.n = 0;
        if (tokenizer_encode(t, starts[i], lens[i], 0, &ids, &err)) { fprintf(stderr, "%s\n", err.msg); return 2; }
        strbuf_reset(&line);
        for (size_t k = 0; k < ids.n; k++) strbuf_printf(&line, k ? " %d" : "%d", (int)ids.v[k]);
        if (!check) {
            if (!bench) printf("%s\n", line.len ? line.buf : "");
        } else {
            /* compare with the next reference line, whitespace-normalised */
            size_t e = ref_pos;
            while (e < ref_len && ref[e] != '\n') e++;
            size_t b = ref_pos, q = e;
            while (b < q && (ref[b] == ' ' || ref[b] == '\r')) b++;
            while (q > b && (ref[q - 1] == ' ' || ref[q - 1] == '\r')) q--;
            bool same = ref_pos < ref_len && q - b == line.len && memcmp(ref + b, line.buf ? line.buf : "", line.len) == 0;
            if (ref_pos >= ref_len && i < n) same = false;
            ref_pos = e < ref_len ? e + 1 : ref_len;
            if (same) ok++;
            else {
                bad++;
                if (bad <= 5)
                    fprintf(stderr, "chunk %zu mismatch (%zu bytes: %.60s...)\n  ours: %.300s\n  ref:  %.*s\n", i,
                            lens[i], starts[i], line.len ? line.buf : "", (int)HS_MIN(q - b, 300), ref + b);
            }
        }
        if (roundtrip) {
            /* without NFC, byte-level BPE must give the input back exactly */
            static struct tokenizer *raw;
            if (!raw) raw = load(argv[a], regex, true);
            ids.n = 0;
            strbuf_reset(&dec);
            strbuf_reset(&st);
            tokenizer_encode(raw, starts[i], lens[i], 0, &ids, &err);
            tokenizer_decode(raw, ids.v, ids.n, 0, &dec, &err);
            struct tokenizer_stream s;
            tokenizer_stream_init(&s, raw, 0);
            for (size_t k = 0; k < ids.n; k++) tokenizer_stream_push(&s, ids.v[k], &st, &err);
            tokenizer_stream_flush(&s, &st);
            if (dec.len == lens[i] && memcmp(dec.buf ? dec.buf : "", starts[i], lens[i]) == 0 && st.len == dec.len &&
                memcmp(st.buf ? st.buf : "", dec.buf ? dec.buf : "", dec.len) == 0)
                rt_ok++;
            else rt_bad++;
            if (i + 1 == n) tokenizer_free(raw);
        }
    }
    if (check) printf("chunks: %zu ok, %zu mismatched\n", ok, bad);
    if (roundtrip) printf("roundtrip: %zu ok, %zu failed\n", rt_ok, rt_bad);
    if (bench > 0) {
        size_t total = 0;
        double t0 = now();
        for (int r = 0; r < bench; r++) {
            ids.n = 0;
            tokenizer_encode(t, text, len, 0, &ids, &err);
            total += len;
        }
        double dt = now() - t0;
        printf("bench: %zu bytes, %zu tokens, %.3f s, %.1f MB/s\n", total, ids.n * (size_t)bench, dt, total / dt / 1e6);
    }
    tokenizer_ids_free(&ids);
    strbuf_free(&line);
    strbuf_free(&dec);
    strbuf_free(&st);
    hs_free(ref);
    hs_free(starts);
    hs_free(lens);
    hs_free(text);
    hs_free(sep_owned);
    tokenizer_free(t);
    return (bad || rt_bad) ? 1 : 0;
}
