/*
 * llama_bench.c — llama.cpp's side of bench/engine_bench.sh: the same measurement that
 * `headstart run --json` makes, on llama.cpp (the prebuilt library of the node-llama-cpp
 * npm package). Load a GGUF, decode N_PROMPT synthetic token ids in one batch (prefill,
 * timed), then greedily decode N_GEN tokens one at a time (timed), and print one JSON line:
 *     {"prompt_tokens":P,"prefill_seconds":S,"prefill_tok_s":R,"decode_forwards":D,
 *      "decode_seconds":S,"decode_tok_s":R,"threads":T,"cpu_backend":"FILE","cpu_features":"..."}
 *
 *   llama_bench --lib-dir DIR MODEL.gguf --prompt-ids FILE [-n N_GEN] [--threads T]
 *               [--cpu-lib FILE]
 *
 * --cpu-lib loads that one CPU backend library of DIR (e.g. libggml-cpu-haswell.so, the AVX2
 * build: `make bench` with BENCH_ISA=avx2) instead of letting ggml pick the best one for this
 * CPU. Either way cpu_features lists what the loaded CPU backend was compiled for (its
 * ggml_backend_get_features: compile-time flags, so the AVX2 library says no AVX512 even on
 * an AVX-512 CPU), which is how the caller checks it got the library it asked for.
 *
 * FILE holds whitespace-separated token ids (the same file headstart gets). Defaults to
 * the library's context options except: context = prompt + N_GEN (at least 256), one
 * ubatch for the whole prompt, only the last position's logits. Not part of make test.
 */
#include "llama.h"
#include "ggml-backend.h"
#include "llama_cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BENCH_MAX_TOKENS 65536

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void quiet_log(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level == GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static int usage(void)
{
    fprintf(stderr, "usage: llama_bench --lib-dir DIR MODEL.gguf --prompt-ids FILE [-n N] [--threads T] [--cpu-lib FILE]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *lib_dir = NULL, *model_path = NULL, *ids_path = NULL, *cpu_lib = NULL;
    int n_gen = 128, n_threads = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "--lib-dir") && has) lib_dir = argv[++i];
        else if (!strcmp(a, "--prompt-ids") && has) ids_path = argv[++i];
        else if (!strcmp(a, "-n") && has) n_gen = atoi(argv[++i]);
        else if (!strcmp(a, "--threads") && has) n_threads = atoi(argv[++i]);
        else if (!strcmp(a, "--cpu-lib") && has) cpu_lib = argv[++i];
        else if (a[0] != '-' && !model_path) model_path = a;
        else return usage();
    }
    if (!lib_dir || !model_path || !ids_path || n_threads < 1 || n_gen < 1) return usage();

    static llama_token toks[BENCH_MAX_TOKENS];
    int n = 0;
    FILE *f = fopen(ids_path, "r");
    if (!f) { perror(ids_path); return 1; }
    long v;
    while (n < BENCH_MAX_TOKENS && fscanf(f, "%ld", &v) == 1) toks[n++] = (llama_token)v;
    fclose(f);
    if (n < 1) { fprintf(stderr, "llama_bench: no ids in %s\n", ids_path); return 1; }

    llama_log_set(quiet_log, NULL);
    char cpu_path[4096];
    if (cpu_backend_load("llama_bench", lib_dir, cpu_lib, cpu_path, sizeof cpu_path)) return 1;
    char feats[1024];
    cpu_features(feats, sizeof feats);
    fprintf(stderr, "llama_bench: CPU backend %s: %s\n", cpu_lib ? cpu_path : "best of the library directory", feats);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(model_path, mp);
    if (!model) { fprintf(stderr, "llama_bench: cannot load %s\n", model_path); return 1; }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(n + n_gen < 256 ? 256 : n + n_gen);
    cp.n_batch = cp.n_ubatch = (uint32_t)n;
    cp.n_seq_max = 1;
    cp.n_threads = cp.n_threads_batch = n_threads;
    cp.no_perf = true;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "llama_bench: no context\n"); llama_model_free(model); return 1; }

    int rc = 1;
    double t0 = now();
    if (llama_decode(ctx, llama_batch_get_one(toks, n)) != 0) { fprintf(stderr, "llama_bench: prefill failed\n"); goto done; }
    const float *lg = llama_get_logits_ith(ctx, -1);
    double t1 = now();
    int n_dec = 0;
    for (int i = 0; i < n_gen; i++) {
        llama_token best = 0;
        for (int t = 1; t < n_vocab; t++)
            if (lg[t] > lg[best]) best = t;
        if (i == n_gen - 1) break; /* the last token needs no forward (as in headstart run) */
        if (llama_decode(ctx, llama_batch_get_one(&best, 1)) != 0) { fprintf(stderr, "llama_bench: decode failed\n"); goto done; }
        lg = llama_get_logits_ith(ctx, -1);
        n_dec++;
    }
    double t2 = now();
    printf("{\"prompt_tokens\":%d,\"prefill_seconds\":%.6f,\"prefill_tok_s\":%.3f,\"decode_forwards\":%d,"
           "\"decode_seconds\":%.6f,\"decode_tok_s\":%.3f,\"threads\":%d,\"cpu_backend\":\"%s\",\"cpu_features\":\"%s\"}\n",
           n, t1 - t0, n / (t1 - t0), n_dec, t2 - t1, n_dec ? n_dec / (t2 - t1) : 0.0, n_threads,
           cpu_lib ? cpu_path : "best", feats);
    rc = 0;
done:
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return rc;
}
