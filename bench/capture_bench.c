/*
 * capture_bench.c — what GDN snapshot capture ([F3]'s engine_capture) costs a prefill:
 * the same prompt prefilled into a fresh sequence with no captures and with N captures,
 * alternating in one process (one model load, one engine, one thread pool), so the two
 * arms see the same machine. Part of bench/run.sh; never run by `make test`.
 *
 * Design note
 * -----------
 * Capture positions are spread evenly over the prompt, the last at its end (pos_i =
 * n * (i + 1) / N), as the bank places its checkpoints through a long prompt. Each arm
 * runs REPS times, alternating; every run gets a new sequence
 * and one engine_forward over the whole prompt with only the last position's logits, as
 * `headstart run` prefills; an untimed 32-token prefill first faults the weights in, and the
 * capture buffers are written once before timing. The order alternates (none, caps in
 * even reps; caps, none in odd ones), so a drift between a rep's first and second run
 * does not land on one arm. Per arm: the best and the median wall seconds and the least
 * CPU seconds (process user + system over the run, all threads). The cost is reported as
 * (caps - none) / none for the best and the median wall time and for CPU time; on a shared
 * machine a few percent either way is noise. So the copies themselves are also timed on
 * their own: N memcpy of snapshot_bytes into the (faulted-in) capture buffers, best of
 * REPS, as a share of the best "none" prefill (cost_copy_pct): what capture adds to the
 * work, free of the run-to-run spread (it leaves out cache effects on the layers that run
 * after a copy, which the A/B figures include).
 *
 * Invariants:
 *   1. Every capture of every "caps" run is filled (checked; exit 1 otherwise).
 *   2. The logits of the last position are identical with and without captures (checked,
 *      memcmp; capture must not change the forward pass).
 *
 * Output: one JSON line
 *   {"tokens":n,"captures":N,"threads":T,"reps":R,"snapshot_bytes":B,
 *    "none":{"best_s":..,"median_s":..,"cpu_s":..},"caps":{...},
 *    "cost_best_pct":..,"cost_median_pct":..,"cost_cpu_pct":..,"copy_s":..,"cost_copy_pct":..}
 *
 *   capture_bench -m MODEL --ids-file F [--captures N] [--threads T] [--reps R]
 *
 * Built by bench/run.sh:
 *   cc -std=c11 -D_GNU_SOURCE -O2 -Isrc bench/capture_bench.c BUILD/libheadstart.a LIBS
 */
#include "engine/engine.h"
#include "model/model.h"
#include "sys/sys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           (double)ru.ru_stime.tv_usec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int read_ids(const char *path, int32_t **ids, int64_t *n)
{
    FILE *f = fopen(path, "r");
    if (!f) { perror(path); return -1; }
    int64_t cap = 1024, k = 0;
    int32_t *v = hs_malloc((size_t)cap * sizeof(int32_t));
    long x;
    while (fscanf(f, "%ld", &x) == 1) {
        if (x < 0 || x > INT32_MAX) { fprintf(stderr, "capture_bench: bad id %ld in %s\n", x, path); fclose(f); hs_free(v); return -1; }
        if (k == cap) v = hs_realloc(v, (size_t)(cap *= 2) * sizeof(int32_t));
        v[k++] = (int32_t)x;
    }
    fclose(f);
    if (k == 0) { fprintf(stderr, "capture_bench: no ids in %s\n", path); hs_free(v); return -1; }
    *ids = v;
    *n = k;
    return 0;
}

int main(int argc, char **argv)
{
    const char *model_path = NULL, *ids_path = NULL;
    int n_caps = 8, threads = 2, reps = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) goto usage;
        const char *v = argv[++i];
        if (!strcmp(a, "-m")) model_path = v;
        else if (!strcmp(a, "--ids-file")) ids_path = v;
        else if (!strcmp(a, "--captures")) n_caps = atoi(v);
        else if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--reps")) reps = atoi(v);
        else goto usage;
    }
    if (!model_path || !ids_path || n_caps < 1 || n_caps > 1024 || threads < 1 || reps < 1 || reps > 100) goto usage;

    int32_t *ids;
    int64_t n;
    if (read_ids(ids_path, &ids, &n)) return 1;
    struct hs_err err;
    hs_err_clear(&err);
    struct model *m = NULL;
    struct engine *e = NULL;
    if (model_load(model_path, &m, &err)) { fprintf(stderr, "capture_bench: %s\n", err.msg); return 1; }
    struct engine_opts o;
    engine_opts_default(&o);
    o.n_threads = threads;
    if (engine_new(m, &o, &e, &err)) { fprintf(stderr, "capture_bench: %s\n", err.msg); model_free(m); return 1; }

    uint64_t snap = engine_snapshot_bytes(e);
    struct engine_capture *caps = hs_malloc((size_t)n_caps * sizeof(*caps));
    for (int c = 0; c < n_caps; c++) {
        caps[c].pos = n * (c + 1) / n_caps;
        caps[c].buf = hs_malloc(snap ? snap : 1);
        memset(caps[c].buf, 0, snap ? snap : 1); /* fault the pages in before timing */
    }
    int64_t V = model_hparams(m)->n_vocab, last = n - 1;
    float *lg[2] = { hs_malloc((size_t)V * sizeof(float)), hs_malloc((size_t)V * sizeof(float)) };
    double wall[2][100], cpu[2][100];
    /* warm-up, untimed: a few tokens read every weight once (page faults of the mapping) */
    struct seq *ws = seq_new(e, n);
    int64_t n_warm = n < 32 ? n : 32, wlast = n_warm - 1;
    int rc = engine_forward(e, ws, ids, n_warm, NULL, 0, &wlast, 1, lg[0], &err);
    seq_free(ws);
    if (rc) fprintf(stderr, "capture_bench: %s\n", err.msg);
    for (int r = 0; r < reps && !rc; r++) {
        for (int a = 0; a < 2 && !rc; a++) {
            int arm = r % 2 ? 1 - a : a; /* none first in even reps, captures first in odd ones */
            for (int c = 0; c < n_caps; c++) caps[c].filled = false;
            struct seq *s = seq_new(e, n);
            double c0 = cpu_seconds(), t0 = sys_time_sec();
            rc = engine_forward(e, s, ids, n, arm ? caps : NULL, arm ? n_caps : 0, &last, 1, lg[arm], &err);
            wall[arm][r] = sys_time_sec() - t0;
            cpu[arm][r] = cpu_seconds() - c0;
            seq_free(s);
            if (rc) { fprintf(stderr, "capture_bench: %s\n", err.msg); break; }
            fprintf(stderr, "capture_bench: rep %d/%d %s: %.3f s wall, %.3f s CPU\n", r + 1, reps,
                    arm ? "captures" : "none", wall[arm][r], cpu[arm][r]);
            for (int c = 0; arm && c < n_caps; c++)
                if (!caps[c].filled && snap) { fprintf(stderr, "capture_bench: capture %d not filled\n", c); rc = 1; }
        }
        if (!rc && memcmp(lg[0], lg[1], (size_t)V * sizeof(float))) {
            fprintf(stderr, "capture_bench: logits differ with captures\n");
            rc = 1;
        }
    }
    /* the copies alone: the same bytes a "caps" run writes, from a buffer of the same size */
    double copy_best = 1e30;
    if (!rc && snap) {
        uint8_t *src = hs_malloc(snap);
        memset(src, 1, snap);
        for (int r = 0; r < reps; r++) {
            double t0 = sys_time_sec();
            for (int c = 0; c < n_caps; c++) memcpy(caps[c].buf, src, snap);
            double dt = sys_time_sec() - t0;
            if (dt < copy_best) copy_best = dt;
        }
        hs_free(src);
    }
    if (!snap) copy_best = 0;
    if (!rc) {
        double best[2], med[2], least[2];
        for (int arm = 0; arm < 2; arm++) {
            best[arm] = 1e30;
            least[arm] = 1e30;
            for (int r = 0; r < reps; r++) {
                if (wall[arm][r] < best[arm]) best[arm] = wall[arm][r];
                if (cpu[arm][r] < least[arm]) least[arm] = cpu[arm][r];
            }
            med[arm] = median(wall[arm], reps);
        }
        printf("{\"tokens\":%lld,\"captures\":%d,\"threads\":%d,\"reps\":%d,\"snapshot_bytes\":%llu,"
               "\"none\":{\"best_s\":%.4f,\"median_s\":%.4f,\"cpu_s\":%.4f},"
               "\"caps\":{\"best_s\":%.4f,\"median_s\":%.4f,\"cpu_s\":%.4f},"
               "\"cost_best_pct\":%.3f,\"cost_median_pct\":%.3f,\"cost_cpu_pct\":%.3f,"
               "\"copy_s\":%.5f,\"cost_copy_pct\":%.4f}\n",
               (long long)n, n_caps, threads, reps, (unsigned long long)snap, best[0], med[0], least[0], best[1],
               med[1], least[1], 100.0 * (best[1] - best[0]) / best[0], 100.0 * (med[1] - med[0]) / med[0],
               100.0 * (least[1] - least[0]) / least[0], copy_best, 100.0 * copy_best / best[0]);
    }
    for (int c = 0; c < n_caps; c++) hs_free(caps[c].buf);
    hs_free(caps);
    hs_free(lg[0]);
    hs_free(lg[1]);
    hs_free(ids);
    engine_free(e);
    model_free(m);
    return rc ? 1 : 0;

usage:
    fprintf(stderr, "usage: capture_bench -m MODEL --ids-file F [--captures N] [--threads T] [--reps R]\n");
    return 2;
}
