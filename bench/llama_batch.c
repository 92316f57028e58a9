/*
 * llama_batch.c — llama.cpp's side of bench/concurrency.sh ([F10]): N sequences decoded
 * together, one llama_batch per step, on the prebuilt library of the node-llama-cpp npm
 * package. Load a GGUF; prefill N distinct prompts, one llama_decode each under its own
 * seq_id (untimed for the rate: it is the setup); then decode all N together for N_GEN - 1
 * steps: each step one batch holding the next token of every sequence (its own seq_id and
 * position, its logits requested), greedy. Print one JSON line:
 *     {"streams":N,"prompt_tokens_total":P,"generated_per_stream":G,"decode_steps":D,
 *      "decode_tokens":N*D,"prefill_seconds":S,"decode_seconds":S,"aggregate_tok_s":R,
 *      "threads":T,"cpu_backend":"FILE" or "best","cpu_features":"..."}
 *
 *   llama_batch --lib-dir DIR MODEL.gguf --prompt-ids FILE [--streams N] [-n N_GEN]
 *               [--threads T] [--cpu-lib FILE]
 *
 * --cpu-lib loads that one CPU backend library of DIR (libggml-cpu-haswell.so: the AVX2
 * build, concurrency.sh's BENCH_ISA=avx2) instead of the best one for this CPU, as
 * llama_bench.c does; the JSON line then carries the loaded backend's "cpu_features".
 *
 * FILE holds one prompt per line, whitespace-separated token ids; stream i takes line i
 * (--streams defaults to the number of lines). Not part of make test.
 *
 * Invariants (what makes the number comparable with headstart's in concurrency.sh):
 *   1. Each stream generates N_GEN tokens: the first from its prefill's logits, the other
 *      N_GEN - 1 from the timed decode steps, as headstart's "tokens after each stream's
 *      first token" (the last token is not fed back: no forward needs it).
 *   2. The timed window is exactly the steps in which all N sequences decode, so
 *      aggregate_tok_s = N x (N_GEN - 1) / decode_seconds; greedy argmax is inside it, as
 *      headstart's sampling is inside its own.
 *   3. Each sequence owns n_ctx / N positions (kv_unified off: the prompts share nothing),
 *      enough for its prompt plus N_GEN.
 */
#include "llama.h"
#include "ggml-backend.h"
#include "llama_cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LB_MAX_STREAMS 64
#define LB_MAX_PROMPT 65536

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
    fprintf(stderr, "usage: llama_batch --lib-dir DIR MODEL.gguf --prompt-ids FILE [--streams N] [-n N_GEN] "
                    "[--threads T] [--cpu-lib FILE]\n");
    return 2;
}

/* One prompt per line of f into p[] (n[] their lengths); returns the number of lines read,
 * at most max; -1 on a malformed or over-long line. */
static int prompts_read(FILE *f, llama_token **p, int *n, int max)
{
    static char line[LB_MAX_PROMPT * 8];
    int k = 0;
    while (k < max && fgets(line, sizeof line, f)) {
        if (!strchr(line, '\n') && !feof(f)) return -1;
        llama_token *ids = malloc(sizeof *ids * LB_MAX_PROMPT);
        if (!ids) return -1;
        int m = 0;
        char *s = line, *end;
        for (long v = strtol(s, &end, 10); end != s; v = strtol(s, &end, 10)) {
            if (m == LB_MAX_PROMPT || v < 0) { free(ids); return -1; }
            ids[m++] = (llama_token)v;
            s = end;
        }
        if (m == 0) { free(ids); continue; } /* blank line */
        p[k] = ids;
        n[k++] = m;
    }
    return k;
}

static llama_token argmax(const float *lg, int n_vocab)
{
    llama_token best = 0;
    for (int t = 1; t < n_vocab; t++)
        if (lg[t] > lg[best]) best = t;
    return best;
}

int main(int argc, char **argv)
{
    const char *lib_dir = NULL, *model_path = NULL, *ids_path = NULL, *cpu_lib = NULL;
    int n_gen = 128, n_threads = 1, n_streams = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has = i + 1 < argc;
        if (!strcmp(a, "--lib-dir") && has) lib_dir = argv[++i];
        else if (!strcmp(a, "--prompt-ids") && has) ids_path = argv[++i];
        else if (!strcmp(a, "--streams") && has) n_streams = atoi(argv[++i]);
        else if (!strcmp(a, "-n") && has) n_gen = atoi(argv[++i]);
        else if (!strcmp(a, "--threads") && has) n_threads = atoi(argv[++i]);
        else if (!strcmp(a, "--cpu-lib") && has) cpu_lib = argv[++i];
        else if (a[0] != '-' && !model_path) model_path = a;
        else return usage();
    }
    if (!lib_dir || !model_path || !ids_path || n_threads < 1 || n_gen < 1 || n_streams < 0 ||
        n_streams > LB_MAX_STREAMS)
        return usage();

    static llama_token *prompt[LB_MAX_STREAMS];
    static int plen[LB_MAX_STREAMS];
    FILE *f = fopen(ids_path, "r");
    if (!f) { perror(ids_path); return 1; }
    int have = prompts_read(f, prompt, plen, LB_MAX_STREAMS);
    fclose(f);
    if (have < 0) { fprintf(stderr, "llama_batch: malformed or too long line in %s\n", ids_path); return 1; }
    if (n_streams == 0) n_streams = have;
    if (n_streams < 1 || have < n_streams) {
        fprintf(stderr, "llama_batch: %s has %d prompts, %d streams asked\n", ids_path, have, n_streams);
        return 1;
    }
    int longest = 0, total_prompt = 0;
    for (int s = 0; s < n_streams; s++) {
        if (plen[s] > longest) longest = plen[s];
        total_prompt += plen[s];
    }

    llama_log_set(quiet_log, NULL);
    char cpu_path[4096], feats[1024];
    if (cpu_backend_load("llama_batch", lib_dir, cpu_lib, cpu_path, sizeof cpu_path)) return 1;
    cpu_features(feats, sizeof feats);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(model_path, mp);
    if (!model) { fprintf(stderr, "llama_batch: cannot load %s\n", model_path); return 1; }
    const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
    struct llama_context_params cp = llama_context_default_params();
    int per_seq = longest + n_gen < 256 ? 256 : longest + n_gen;
    cp.n_ctx = (uint32_t)(per_seq * n_streams);
    cp.n_batch = cp.n_ubatch = (uint32_t)(longest > n_streams ? longest : n_streams);
    cp.n_seq_max = (uint32_t)n_streams;
    cp.kv_unified = false;
    cp.n_threads = cp.n_threads_batch = n_threads;
    cp.no_perf = true;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "llama_batch: no context\n"); llama_model_free(model); return 1; }

    int rc = 1;
    struct llama_batch b = llama_batch_init(cp.n_batch, 0, 1);
    llama_token next[LB_MAX_STREAMS];
    double t0 = now();
    for (int s = 0; s < n_streams; s++) {
        b.n_tokens = plen[s];
        for (int i = 0; i < plen[s]; i++) {
            b.token[i] = prompt[s][i];
            b.pos[i] = i;
            b.n_seq_id[i] = 1;
            b.seq_id[i][0] = s;
            b.logits[i] = i == plen[s] - 1;
        }
        if (llama_decode(ctx, b) != 0) { fprintf(stderr, "llama_batch: prefill of stream %d failed\n", s); goto done; }
        next[s] = argmax(llama_get_logits_ith(ctx, -1), n_vocab);
    }
    double t1 = now();
    int steps = 0;
    for (int g = 1; g < n_gen; g++) {
        b.n_tokens = n_streams;
        for (int s = 0; s < n_streams; s++) {
            b.token[s] = next[s];
            b.pos[s] = plen[s] + g - 1;
            b.n_seq_id[s] = 1;
            b.seq_id[s][0] = s;
            b.logits[s] = 1;
        }
        if (llama_decode(ctx, b) != 0) { fprintf(stderr, "llama_batch: decode step %d failed\n", g); goto done; }
        for (int s = 0; s < n_streams; s++) next[s] = argmax(llama_get_logits_ith(ctx, s), n_vocab);
        steps++;
    }
    double t2 = now();
    printf("{\"streams\":%d,\"prompt_tokens_total\":%d,\"generated_per_stream\":%d,\"decode_steps\":%d,\"decode_tokens\":%d,"
           "\"prefill_seconds\":%.6f,\"decode_seconds\":%.6f,\"aggregate_tok_s\":%.3f,\"threads\":%d,"
           "\"cpu_backend\":\"%s\",\"cpu_features\":\"%s\"}\n",
           n_streams, total_prompt, n_gen, steps, steps * n_streams, t1 - t0, t2 - t1,
           steps ? steps * n_streams / (t2 - t1) : 0.0, n_threads, cpu_lib ? cpu_path : "best", feats);
    rc = 0;
done:
    llama_batch_free(b);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    for (int s = 0; s < have; s++) free(prompt[s]);
    return rc;
}
