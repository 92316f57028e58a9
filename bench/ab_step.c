/*
 * ab_step.c — two builds of the engine in one process, decode steps alternating: a base
 * build's library with every symbol renamed old_* (objcopy) beside this checkout's, on the
 * same GGUF and thread count. For each stream count N both engines prefill N sequences with
 * the same ids, then run S steps of engine_forward_batch with one token per sequence
 * (greedy), old and new in turn (which goes first alternates), so both see the same load.
 * Prints per N: min / median wall ms per step, CPU ms per step (process user + system,
 * both pools' threads), old / new, the aggregate N / 1 ratio of each, and whether every
 * logit of the two builds is equal (it must be, for a change that keeps the bits). Never
 * run by `make test`.
 *
 * Build (from the repository root; BASE = a built checkout of the base commit):
 *   nm -g --defined-only BASE/build/libheadstart.a | awk 'NF == 3 && $2 ~ /^[TDBRWVC]$/
 *       { print $3 " old_" $3 }' | sort -u > /tmp/old.map
 *   objcopy --redefine-syms=/tmp/old.map BASE/build/libheadstart.a /tmp/libold.a
 *   cc -std=c11 -D_GNU_SOURCE -O2 -Isrc bench/ab_step.c build/libheadstart.a /tmp/libold.a \
 *      -ljansson -lpcre2-8 -lutf8proc -lmicrohttpd -lm -lpthread -lsqlite3 -lxxhash -lcrypto \
 *      -lhiredis -o build/ab_step
 *   build/ab_step MODEL.gguf THREADS PROMPT STEPS N...      (N <= 16)
 * The base build must have the same engine.h API (engine_new, seq_new, engine_forward,
 * engine_forward_batch) as this one.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "engine/engine.h"

#define AB_NMAX 16
#define OLD(ret, name, args) ret old_##name args;
OLD(int, model_load, (const char *path, struct model **out, struct hs_err *err))
OLD(void, model_free, (struct model *m))
OLD(void, engine_opts_default, (struct engine_opts *o))
OLD(int, engine_new, (const struct model *m, const struct engine_opts *o, struct engine **out, struct hs_err *err))
OLD(void, engine_free, (struct engine *e))
OLD(struct seq *, seq_new, (struct engine *e, int64_t n_ctx))
OLD(void, seq_free, (struct seq *s))
OLD(int, engine_forward, (struct engine *e, struct seq *s, const int32_t *tokens, int64_t n,
                          struct engine_capture *caps, int n_caps, const int64_t *rows, int n_rows, float *logits,
                          struct hs_err *err))
OLD(int, engine_forward_batch, (struct engine *e, struct engine_item *items, int n_items, float *logits,
                                struct hs_err *err))

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)r.ru_utime.tv_sec + (double)r.ru_utime.tv_usec * 1e-6 + (double)r.ru_stime.tv_sec +
           (double)r.ru_stime.tv_usec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int32_t argmax(const float *l, int64_t nv)
{
    int32_t b = 0;
    for (int64_t v = 1; v < nv; v++)
        if (l[v] > l[b]) b = (int32_t)v;
    return b;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: ab_step MODEL THREADS PROMPT STEPS N...\n");
        return 2;
    }
    const char *path = argv[1];
    int threads = atoi(argv[2]), P = atoi(argv[3]), S = atoi(argv[4]);
    struct hs_err err = { 0 };
    struct model *mo, *mn;
    struct engine *eo, *en;
    struct engine_opts o;
    if (old_model_load(path, &mo, &err) || model_load(path, &mn, &err)) {
        fprintf(stderr, "ab_step: loading %s failed\n", path);
        return 1;
    }
    old_engine_opts_default(&o);
    o.n_threads = threads;
    if (old_engine_new(mo, &o, &eo, &err)) return 1;
    engine_opts_default(&o);
    o.n_threads = threads;
    if (engine_new(mn, &o, &en, &err)) return 1;
    const int64_t nv = model_hparams(mn)->n_vocab;
    double one_old = 0, one_new = 0;
    for (int ai = 5; ai < argc; ai++) {
        int N = atoi(argv[ai]);
        if (N < 1 || N > AB_NMAX) continue;
        struct seq *so[AB_NMAX], *sn[AB_NMAX];
        int32_t to[AB_NMAX], tn[AB_NMAX];
        float *lo = malloc(sizeof(float) * (size_t)(nv * N)), *ln = malloc(sizeof(float) * (size_t)(nv * N));
        int32_t *ids = malloc(sizeof(int32_t) * (size_t)P);
        double *dto = malloc(sizeof(double) * (size_t)S), *dtn = malloc(sizeof(double) * (size_t)S), co = 0, cn = 0;
        int64_t last = P - 1, zero = 0;
        bool same = true;
        for (int i = 0; i < N; i++) {
            for (int p = 0; p < P; p++) ids[p] = (int32_t)((p * 7919 + i * 104729 + 13) % 150000);
            so[i] = old_seq_new(eo, P + S + 8);
            sn[i] = seq_new(en, P + S + 8);
            if (old_engine_forward(eo, so[i], ids, P, NULL, 0, &last, 1, lo, &err) ||
                engine_forward(en, sn[i], ids, P, NULL, 0, &last, 1, ln, &err))
                return 1;
            same &= !memcmp(lo, ln, sizeof(float) * (size_t)nv);
            to[i] = argmax(lo, nv);
            tn[i] = argmax(ln, nv);
        }
        for (int s = 0; s < S; s++) {
            struct engine_item io[AB_NMAX], in[AB_NMAX];
            for (int i = 0; i < N; i++) {
                struct engine_item a = { so[i], &to[i], 1, NULL, 0, &zero, 1 }, b = { sn[i], &tn[i], 1, NULL, 0, &zero, 1 };
                io[i] = a;
                in[i] = b;
            }
            for (int k = 0; k < 2; k++) {
                bool is_new = (k == 0) == (s & 1);
                double c0 = cpu_s(), t0 = now_s();
                int rc = is_new ? engine_forward_batch(en, in, N, ln, &err) : old_engine_forward_batch(eo, io, N, lo, &err);
                double dt = now_s() - t0, dc = cpu_s() - c0;
                if (rc) return 1;
                if (is_new) dtn[s] = dt, cn += dc;
                else dto[s] = dt, co += dc;
            }
            same &= !memcmp(lo, ln, sizeof(float) * (size_t)(nv * N));
            for (int i = 0; i < N; i++) {
                to[i] = argmax(lo + (int64_t)i * nv, nv);
                tn[i] = argmax(ln + (int64_t)i * nv, nv);
            }
        }
        qsort(dto, (size_t)S, sizeof(double), cmp_double);
        qsort(dtn, (size_t)S, sizeof(double), cmp_double);
        double med_o = dto[S / 2], med_n = dtn[S / 2];
        if (N == 1) one_old = med_o, one_new = med_n;
        printf("N=%-2d old min %6.1f med %6.1f cpu %6.1f | new min %6.1f med %6.1f cpu %6.1f ms/step | old/new med "
               "%.2f cpu %.2f | N/1 (med) old %.2f new %.2f | logits %s\n",
               N, dto[0] * 1e3, med_o * 1e3, co / S * 1e3, dtn[0] * 1e3, med_n * 1e3, cn / S * 1e3, med_o / med_n,
               co / cn, one_old > 0 ? N * one_old / med_o : 0, one_new > 0 ? N * one_new / med_n : 0,
               same ? "equal" : "DIFFER");
        fflush(stdout);
        for (int i = 0; i < N; i++) {
            old_seq_free(so[i]);
            seq_free(sn[i]);
        }
        free(lo);
        free(ln);
        free(ids);
        free(dto);
        free(dtn);
    }
    old_engine_free(eo);
    engine_free(en);
    old_model_free(mo);
    model_free(mn);
    return 0;
}
