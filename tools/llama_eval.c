/*
 * llama_eval.c — evaluate a GGUF with llama.cpp (the prebuilt library from the
 * node-llama-cpp npm package) as an outside reference: load the model, tokenize a ChatML
 * prompt with llama.cpp's own tokenizer (or take token ids), decode every token in one
 * batch, print the ids and the top-5 logits of the last position, and fail unless every
 * logit is finite.
 *
 *   llama_eval --lib-dir DIR MODEL.gguf [--prompt TEXT | --tokens ID,ID,...]
 *              [--logits-out FILE] [--threads N] [--no-repack] [--kv-f32] [--verbose]
 *
 * DIR holds libllama/libggml and the CPU backends, which are loaded at run time with
 * ggml_backend_load_all_from_path (without it llama.cpp has no CPU backend). --logits-out
 * writes the logits of every position as raw little-endian f32, n_tokens x n_vocab, so
 * other tests can compare them with headstart's.
 * --kv-f32 keeps llama.cpp's KV cache in f32 without flash attention (its default f16
 * cache rounds V, hence the first position's attention output, to f16); --no-repack turns
 * off ggml-cpu's extra buffer types (weight repacking, AMX). Both exist for parity checks:
 * docs/notes/q8_0_parity.md.
 *
 * Output (stdout), one item per line:
 *     tokens N: id id id ...
 *     n_vocab V
 *     top5: id=logit(piece) ...
 *     ok: N x V logits finite
 * Exit status: 0 ok, 1 any failure (message on stderr), 2 usage.
 */
#include "llama.h"
#include "ggml-backend.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EVAL_MAX_TOKENS 4096

static const char default_prompt[] =
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    "<|im_start|>user\nHello, what is the capital of France?<|im_end|>\n"
    "<|im_start|>assistant\n";

static bool verbose;

static void quiet_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (verbose || level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

/* "1,2,3" -> ids; returns the count or -1. */
static int parse_ids(const char *s, llama_token *out, int max)
{
    int n = 0;
    while (*s) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || v < 0 || v > INT32_MAX || n == max) return -1;
        out[n++] = (llama_token)v;
        s = end;
        if (*s == ',') s++;
        else if (*s) return -1;
    }
    return n;
}

static int usage(void)
{
    fprintf(stderr, "usage: llama_eval --lib-dir DIR MODEL.gguf [--prompt TEXT | --tokens ID,...] "
                    "[--logits-out FILE] [--threads N] [--no-repack] [--kv-f32] [--verbose]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *lib_dir = NULL, *model_path = NULL, *prompt = default_prompt, *ids_arg = NULL;
    const char *logits_out = NULL;
    int n_threads = 2;
    bool no_repack = false, kv_f32 = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool has_value = i + 1 < argc;
        if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) verbose = true;
        else if (!strcmp(a, "--lib-dir") && has_value) lib_dir = argv[++i];
        else if (!strcmp(a, "--prompt") && has_value) prompt = argv[++i];
        else if (!strcmp(a, "--tokens") && has_value) ids_arg = argv[++i];
        else if (!strcmp(a, "--logits-out") && has_value) logits_out = argv[++i];
        else if (!strcmp(a, "--threads") && has_value) n_threads = atoi(argv[++i]);
        else if (!strcmp(a, "--no-repack")) no_repack = true;
        else if (!strcmp(a, "--kv-f32")) kv_f32 = true;
        else if (a[0] != '-' && !model_path) model_path = a;
        else return usage();
    }
    if (!lib_dir || !model_path || n_threads < 1) return usage();

    llama_log_set(quiet_log, NULL);
    ggml_backend_load_all_from_path(lib_dir);
    if (ggml_backend_dev_count() == 0) {
        fprintf(stderr, "llama_eval: no ggml backend found in %s\n", lib_dir);
        return 1;
    }
    llama_backend_init();

    int rc = 1;
    struct llama_model *model = NULL;
    struct llama_context *ctx = NULL;
    llama_token *tokens = malloc(EVAL_MAX_TOKENS * sizeof(*tokens));
    struct llama_batch batch = { 0 };
    bool have_batch = false;
    if (!tokens) goto done;

    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    /* --no-repack: plain ggml-cpu buffers only (no weight repacking / AMX), to tell the
     * repacked kernels' rounding apart from the reference dot products */
    if (no_repack) mp.use_extra_bufts = false;
    model = llama_model_load_from_file(model_path, mp);
    if (!model) {
        fprintf(stderr, "llama_eval: llama.cpp could not load %s (run with --verbose)\n", model_path);
        goto done;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);

    int n_tokens;
    if (ids_arg) {
        n_tokens = parse_ids(ids_arg, tokens, EVAL_MAX_TOKENS);
        if (n_tokens <= 0) {
            fprintf(stderr, "llama_eval: --tokens wants comma-separated ids (at most %d)\n", EVAL_MAX_TOKENS);
            goto done;
        }
        for (int i = 0; i < n_tokens; i++)
            if (tokens[i] >= n_vocab) {
                fprintf(stderr, "llama_eval: token %d is outside the vocabulary (%d)\n", tokens[i], n_vocab);
                goto done;
            }
    } else {
        n_tokens = llama_tokenize(vocab, prompt, (int32_t)strlen(prompt), tokens, EVAL_MAX_TOKENS,
                                  false, true);
        if (n_tokens <= 0) {
            fprintf(stderr, "llama_eval: tokenizing the prompt failed (%d)\n", n_tokens);
            goto done;
        }
    }

    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(n_tokens < 256 ? 256 : n_tokens);
    cp.n_batch = cp.n_ctx;
    cp.n_ubatch = cp.n_ctx; /* one ubatch: the whole prompt is one forward pass */
    cp.n_seq_max = 1;
    cp.n_threads = n_threads;
    cp.n_threads_batch = n_threads;
    cp.no_perf = true;
    if (kv_f32) {
        /* --kv-f32: keep K and V in f32 and use the plain attention path. The default f16
         * cache (and flash attention's f16 Q) rounds every attention input to f16, a
         * ~5e-4 relative error that later Q8_0 activation quantizations amplify. */
        cp.type_k = GGML_TYPE_F32;
        cp.type_v = GGML_TYPE_F32;
        cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    }
    ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "llama_eval: could not create a context for %s\n", model_path);
        goto done;
    }

    batch = llama_batch_init(n_tokens, 0, 1);
    have_batch = true;
    for (int i = 0; i < n_tokens; i++) {
        batch.token[i] = tokens[i];
        batch.pos[i] = i;
        batch.n_seq_id[i] = 1;
        batch.seq_id[i][0] = 0;
        batch.logits[i] = 1; /* every position: all logits are checked */
    }
    batch.n_tokens = n_tokens;
    int drc = llama_decode(ctx, batch);
    if (drc != 0) {
        fprintf(stderr, "llama_eval: llama_decode failed (%d)\n", drc);
        goto done;
    }

    printf("tokens %d:", n_tokens);
    for (int i = 0; i < n_tokens; i++) printf(" %d", tokens[i]);
    printf("\nn_vocab %d\n", n_vocab);

    FILE *dump = NULL;
    if (logits_out && !(dump = fopen(logits_out, "wb"))) {
        fprintf(stderr, "llama_eval: %s: %s\n", logits_out, strerror(errno));
        goto done;
    }
    long n_bad = 0;
    const float *last = NULL;
    for (int i = 0; i < n_tokens; i++) {
        const float *lg = llama_get_logits_ith(ctx, i);
        if (!lg) {
            fprintf(stderr, "llama_eval: no logits at position %d\n", i);
            if (dump) fclose(dump);
            goto done;
        }
        for (int v = 0; v < n_vocab; v++) n_bad += !isfinite(lg[v]);
        if (dump && fwrite(lg, sizeof(float), (size_t)n_vocab, dump) != (size_t)n_vocab) {
            fprintf(stderr, "llama_eval: %s: write failed\n", logits_out);
            fclose(dump);
            goto done;
        }
        last = lg;
    }
    if (dump && fclose(dump) != 0) {
        fprintf(stderr, "llama_eval: %s: %s\n", logits_out, strerror(errno));
        goto done;
    }

    int top[5];
    int n_top = n_vocab < 5 ? n_vocab : 5;
    for (int k = 0; k < n_top; k++) {
        int best = -1;
        for (int v = 0; v < n_vocab; v++) {
            bool taken = false;
            for (int q = 0; q < k; q++) taken |= top[q] == v;
            if (!taken && isfinite(last[v]) && (best < 0 || last[v] > last[best])) best = v;
        }
        top[k] = best;
    }
    printf("top5:");
    for (int k = 0; k < n_top && top[k] >= 0; k++) {
        char piece[64];
        int n = llama_token_to_piece(vocab, top[k], piece, (int32_t)sizeof(piece), 0, true);
        printf(" %d=%.6f(", top[k], last[top[k]]);
        for (int c = 0; c < n; c++) { /* pieces may be partial UTF-8: keep the line ASCII */
            unsigned char ch = (unsigned char)piece[c];
            if (ch >= 0x20 && ch < 0x7f && ch != '\\') putchar(ch);
            else printf("\\x%02x", ch);
        }
        printf(")");
    }
    printf("\n");
    if (n_bad) {
        fprintf(stderr, "llama_eval: %ld of %ld logits are not finite\n", n_bad, (long)n_tokens * n_vocab);
        goto done;
    }
    printf("ok: %d x %d logits finite\n", n_tokens, n_vocab);
    rc = 0;

done:
    if (have_batch) llama_batch_free(batch);
    if (ctx) llama_free(ctx);
    if (model) llama_model_free(model);
    free(tokens);
    llama_backend_free();
    return rc;
}
