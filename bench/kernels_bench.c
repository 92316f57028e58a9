/*
 * kernels_bench.c — speed of the matmul variants (scalar, AVX2, AVX-VNNI, AVX-512) side by side, one
 * thread, on the Qwen3.5-0.8B shapes (K = 1024; 3584 and 6144 output rows; T = 1 decode and
 * T = 64 prefill), for f32 / f16 / bf16 / Q8_0 weights, plus the Q8_0 quantizer and kern_dot,
 * and Q8_0 rows against the packed panel layout (kern_ops.matmul_q8p, its offset shares
 * computed once outside the timing as the engine does) at T = 1, 2, 4, 8, 12, 16, 64, 512;
 * `--q8p` runs that part alone.
 * Each variant's output is checked against scalar (memcmp) on the way. Prints one JSON
 * object per line and a human summary with GFLOP/s (2 * rows * K * T per call) and the
 * ratio to scalar; absolute times on a shared machine are noise, the ratios are the point.
 * Never run by `make test`.
 *
 * --peak: the arithmetic peak the prefill numbers of bench/run.sh are held against. The
 * variant the engine picks (--variant, which run.sh takes from `headstart run --json`; else
 * kern_best_variant), one large square-ish matmul per weight type (bf16 with f32
 * activations, bf16_dp = kern_bf16_matmul when built with -DBENCH_HAVE_BF16_MATMUL, q8_0,
 * and q4_k when the kernels have K-quants; default 4096 rows x K 4096,
 * 256 tokens), the rows split over a sys_pool of --threads threads exactly as the engine's
 * forward pass splits them (one pool run per matmul, sys_pool_run over the rows), the
 * activations quantized once outside the timing (the engine shares one quantization among
 * the matmuls reading it). Best time of the repeats; one JSON line per weight type:
 *     {"kernel":"matmul_peak","wtype":"bf16","variant":"avx512","threads":2,"rows":4096,
 *      "k":4096,"tokens":256,"seconds":S,"gflops":G}
 *   kernels_bench --peak [--variant V] [--threads N] [--rows R] [--k K] [--tokens T] [--min-s S]
 *
 * Build and run (from the repository root, after `make`): bench/run.sh builds it as
 *   cc -std=c11 -D_GNU_SOURCE -O2 -ffp-contract=off -Isrc bench/kernels_bench.c \
 *      build/libheadstart.a -lm -lpthread -o build/kernels_bench && build/kernels_bench [--quick]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "kernels/kernels.h"
#include "sys/sys.h"

static uint64_t bench_rng = 42;
static float bench_val(void)
{
    uint64_t z = (bench_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)((double)(z >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool cpu_has(const char *v)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (!strcmp(v, "avx2")) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (!strcmp(v, "avxvnni")) { /* cpuid 7.1 EAX bit 4: GCC 12's builtin does not report it */
        unsigned a, b, c, d;
        return cpu_has("avx2") && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4));
    }
    bool vnni = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                __builtin_cpu_supports("avx512vnni");
    if (!strcmp(v, "avx512vnni")) return vnni;
    if (!strcmp(v, "avx512")) return vnni && __builtin_cpu_supports("avx512bf16");
#endif
    return !strcmp(v, "scalar");
}

static uint8_t *make_weights(enum kern_wtype t, int64_t rows, int64_t k)
{
    size_t rb = kern_row_bytes(t, k);
    uint8_t *w = hs_malloc(rb * (size_t)rows);
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *row = w + rb * (size_t)r;
        for (int64_t i = 0; t != KERN_W_Q8_0 && i < k; i++) {
            float f = bench_val();
            uint16_t h = t == KERN_W_F16 ? hs_f32_to_f16(f) : hs_f32_to_bf16(f);
            if (t == KERN_W_F32) memcpy(row + 4 * i, &f, 4);
            else memcpy(row + 2 * i, &h, 2);
        }
        for (int64_t b = 0; t == KERN_W_Q8_0 && b < k / 32; b++) {
            uint16_t d = hs_f32_to_f16(0.01f * bench_val());
            memcpy(row + 34 * b, &d, 2);
            for (int i = 0; i < 32; i++) row[34 * b + 2 + i] = (uint8_t)(int8_t)(127.0f * bench_val());
        }
    }
    return w;
}

/* Best seconds per call over repeats (at least one, until min_s has passed or 15 runs). */
static double time_matmul(const struct kern_ops *ops, float *y, const uint8_t *w, enum kern_wtype wt,
                          const float *x, const struct kern_q8_block *xq, int64_t T, int64_t k,
                          int64_t rows, double min_s)
{
    double best = 1e30, start = now_s();
    for (int rep = 0; rep < 15; rep++) {
        double t0 = now_s();
        ops->matmul(y, rows, w, wt, x, xq, T, k, 0, rows);
        double dt = now_s() - t0;
        if (dt < best) best = dt;
        if (now_s() - start > min_s) break;
    }
    return best;
}

/* ---- --peak ---------------------------------------------------------------------------- */

struct peak_job {
    const struct kern_ops *ops;
    float *y;
    const void *w;
    int wt;                 /* enum kern_wtype, or a K-quant type (KERN_K_*); -1: bf16_matmul */
    const float *x;
    const void *xq;         /* struct kern_q8_block (Q8_0) or kern_q8k_block (K-quants) */
    int64_t rows, k, T;
};

/* One thread's slice of the rows, as the engine's mm_fn (forward.c) does it. */
static void peak_fn(void *ctx, int64_t r0, int64_t r1, int ti)
{
    const struct peak_job *j = ctx;
    (void)ti;
#ifdef BENCH_HAVE_BF16_MATMUL
    if (j->wt == -1) {
        j->ops->bf16_matmul(j->y, j->rows, j->w, j->xq, j->T, j->k, r0, r1);
        return;
    }
#endif
#ifdef KERN_K_Q4_K
    if (kern_wtype_is_k(j->wt)) {
        j->ops->matmul_k(j->y, j->rows, j->w, j->wt, j->xq, j->T, j->k, r0, r1);
        return;
    }
#endif
    j->ops->matmul(j->y, j->rows, j->w, (enum kern_wtype)j->wt, j->x, j->xq, j->T, j->k, r0, r1);
}

static int peak_arg(const char *opt, const char *v, double *out)
{
    char *end;
    double x = strtod(v, &end);
    if (!*v || *end || !(x > 0)) {
        fprintf(stderr, "kernels_bench: %s wants a positive number, got '%s'\n", opt, v);
        return -1;
    }
    *out = x;
    return 0;
}

static int peak_main(int argc, char **argv)
{
    double threads = 2, rows_d = 4096, k_d = 4096, tok_d = 256, min_s = 1.0;
    const char *variant = NULL;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--variant") && i + 1 < argc) { variant = argv[++i]; continue; }
        double *dst = !strcmp(a, "--threads") ? &threads : !strcmp(a, "--rows") ? &rows_d
                    : !strcmp(a, "--k") ? &k_d : !strcmp(a, "--tokens") ? &tok_d
                    : !strcmp(a, "--min-s") ? &min_s : NULL;
        if (!dst || i + 1 >= argc) { fprintf(stderr, "kernels_bench: bad option '%s'\n", a); return 2; }
        if (peak_arg(a, argv[++i], dst)) return 2;
    }
    int64_t rows = (int64_t)rows_d, k = (int64_t)k_d, T = (int64_t)tok_d;
    if (k % 256) { fprintf(stderr, "kernels_bench: --k must be a multiple of 256\n"); return 2; }
    if (!variant) variant = engine_best_variant(); /* the engine's own choice, HEADSTART_CPU included */
    const struct kern_ops *ops = kern_ops_for(variant);
    if (!ops) { fprintf(stderr, "kernels_bench: no kernel variant '%s'\n", variant); return 2; }
    struct sys_pool *pool = sys_pool_new((int)threads);

    float *x = hs_malloc((size_t)(T * k) * sizeof(float));
    for (int64_t i = 0; i < T * k; i++) x[i] = bench_val();
    float *y = hs_malloc((size_t)(T * rows) * sizeof(float));
    struct kern_q8_block *xq = hs_malloc((size_t)(T * k / 32) * sizeof(*xq));
    kern_q8_quantize(xq, x, T, k);
    static const char *names[] = {"bf16", "bf16_dp", "q8_0", "q4_k"};
    for (int ti = 0; ti < 4; ti++) {
        int wt = ti <= 1 ? KERN_W_BF16 : KERN_W_Q8_0;
        const void *xin = ti == 2 ? (const void *)xq : NULL;
        uint8_t *w = NULL;
        void *xk = NULL;
        if (ti == 1) {
#ifdef BENCH_HAVE_BF16_MATMUL
            /* the bf16 x bf16 path (vdpbf16ps where the variant has it), activations rounded
             * once outside the timing as the engine rounds them once per call site */
            w = make_weights(KERN_W_BF16, rows, k);
            xk = hs_malloc((size_t)(T * k) * sizeof(uint16_t));
            ops->bf16_round(xk, x, T * k);
            xin = xk;
            wt = -1;
#else
            continue;
#endif
        } else if (ti != 3) {
            w = make_weights((enum kern_wtype)wt, rows, k);
        } else {
#ifdef KERN_K_Q4_K
            /* random nibbles and packed scales; d and dmin small normal f16 values */
            wt = KERN_K_Q4_K;
            size_t n_blk = (size_t)(rows * k / KERN_QK);
            w = hs_malloc(n_blk * KERN_Q4K_BYTES);
            for (size_t b = 0; b < n_blk; b++) {
                uint8_t *blk = w + b * KERN_Q4K_BYTES;
                uint16_t d = hs_f32_to_f16(0.001f + 0.001f * fabsf(bench_val()));
                uint16_t dm = hs_f32_to_f16(0.001f * fabsf(bench_val()));
                memcpy(blk, &d, 2);
                memcpy(blk + 2, &dm, 2);
                for (int i = 4; i < KERN_Q4K_BYTES; i++) blk[i] = (uint8_t)(256.0f * fabsf(bench_val()));
            }
            xk = hs_malloc((size_t)(T * k / KERN_QK) * sizeof(struct kern_q8k_block));
            kern_q8k_quantize(xk, x, T, k);
            xin = xk;
#else
            continue;
#endif
        }
        struct peak_job j = { ops, y, w, wt, x, xin, rows, k, T };
        double best = 1e30, start = now_s();
        for (int rep = 0; rep < 100; rep++) {
            double t0 = now_s();
            sys_pool_run(pool, rows, peak_fn, &j);
            double dt = now_s() - t0;
            if (dt < best) best = dt;
            if (rep >= 2 && now_s() - start > min_s) break;
        }
        double gf = 2.0 * (double)rows * (double)k * (double)T / best * 1e-9;
        printf("{\"kernel\":\"matmul_peak\",\"wtype\":\"%s\",\"variant\":\"%s\",\"threads\":%d,"
               "\"rows\":%ld,\"k\":%ld,\"tokens\":%ld,\"seconds\":%.6g,\"gflops\":%.3f}\n",
               names[ti], variant, (int)threads, (long)rows, (long)k, (long)T, best, gf);
        fflush(stdout);
        fprintf(stderr, "peak %-5s %s %d threads %ldx%ld T=%ld: %8.2f GFLOP/s\n", names[ti], variant,
                (int)threads, (long)rows, (long)k, (long)T, gf);
        hs_free(w);
        hs_free(xk);
    }
    hs_free(x);
    hs_free(y);
    hs_free(xq);
    sys_pool_free(pool);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--peak")) return peak_main(argc, argv);
    bool quick = argc > 1 && !strcmp(argv[1], "--quick");
    bool only_q8p = argc > 1 && !strcmp(argv[1], "--q8p");
    static const char *variants[] = {"scalar", "avx2", "avxvnni", "avx512"};
    const int n_var = (int)(sizeof variants / sizeof variants[0]);
    static const char *tnames[] = {"f32", "f16", "bf16", "q8_0"};
    static const int64_t rows_set[] = {3584, 6144};
    static const int64_t toks[] = {1, 64};
    const int64_t k = 1024;
    double min_s = quick ? 0.05 : 0.3;
    int n_bad = 0;

    enum { TMAX = 512 }; /* tokens of the largest call (the q8p part's prefill) */
    float *x = hs_malloc((size_t)(TMAX * k) * sizeof(float));
    for (int64_t i = 0; i < TMAX * k; i++) x[i] = bench_val();
    struct kern_q8_block *xq = hs_malloc((size_t)(TMAX * k / 32) * sizeof(*xq));
    kern_q8_quantize(xq, x, TMAX, k);
    float *yref = hs_malloc((size_t)(TMAX * 6144) * sizeof(float));
    float *y = hs_malloc((size_t)(TMAX * 6144) * sizeof(float));

    printf("# kernels_bench: K=%ld, one thread; GFLOP/s = 2*rows*K*T / time; x = ratio to scalar\n", (long)k);
    int32_t *cx = hs_malloc((size_t)(TMAX * k / 32) * sizeof(int32_t));
    kern_q8p_corr(cx, xq, TMAX * k / 32);
    for (int ti = 0; ti < (only_q8p ? 0 : 4); ti++) {
        enum kern_wtype wt = (enum kern_wtype)ti;
        for (int ri = 0; ri < 2; ri++) {
            int64_t rows = rows_set[ri];
            uint8_t *w = make_weights(wt, rows, k);
            for (int tk = 0; tk < 2; tk++) {
                int64_t T = toks[tk];
                double t_scalar = 0;
                char line[256];
                int len = snprintf(line, sizeof(line), "%-5s rows=%-5ld T=%-3ld", tnames[ti], (long)rows, (long)T);
                for (int vi = 0; vi < n_var; vi++) {
                    if (!cpu_has(variants[vi])) continue;
                    const struct kern_ops *ops = kern_ops_for(variants[vi]);
                    float *out = vi == 0 ? yref : y;
                    double s = time_matmul(ops, out, w, wt, x, xq, T, k, rows,
                                           vi == 0 && T > 1 ? min_s / 4 : min_s);
                    bool same = vi == 0 || !memcmp(yref, y, (size_t)(T * rows) * sizeof(float));
                    n_bad += !same;
                    if (vi == 0) t_scalar = s;
                    double gf = 2.0 * (double)rows * (double)k * (double)T / s * 1e-9;
                    printf("{\"kernel\":\"matmul\",\"wtype\":\"%s\",\"variant\":\"%s\",\"rows\":%ld,"
                           "\"k\":%ld,\"tokens\":%ld,\"seconds\":%.6g,\"gflops\":%.3f,"
                           "\"vs_scalar\":%.2f,\"bit_identical\":%s}\n",
                           tnames[ti], variants[vi], (long)rows, (long)k, (long)T, s, gf,
                           t_scalar / s, same ? "true" : "false");
                    if (len < (int)sizeof(line))
                        len += snprintf(line + len, sizeof(line) - (size_t)len, "  %s %7.2f GF/s (%5.1fx)%s",
                                        variants[vi], gf, t_scalar / s, same ? "" : " DIFFERS");
                }
                fprintf(stderr, "%s\n", line);
            }
            free(w);
        }
    }

    /* Q8_0 rows against the panel layout (kern_ops.matmul_q8p, packed outside the timing as
     * the engine packs once at start), at a decode step's token counts and a prefill's: the
     * variant's own matmul on the rows is the baseline (x = rows / packed), bits compared */
    for (int vi = 1; vi < n_var; vi++) {
        const struct kern_ops *ops = cpu_has(variants[vi]) ? kern_ops_for(variants[vi]) : NULL;
        if (!ops || !ops->matmul_q8p) continue;
        static const int64_t few[] = {1, 2, 4, 8, 12, 16, 64, TMAX};
        for (int ri = 0; ri < 2; ri++) {
            int64_t rows = rows_set[ri];
            uint8_t *w = make_weights(KERN_W_Q8_0, rows, k);
            void *wp = hs_aligned_alloc(64, kern_q8p_bytes(rows, k));
            kern_q8p_pack(wp, w, rows, k, 0, (rows + KERN_Q8P_ROWS - 1) / KERN_Q8P_ROWS);
            for (int tk = 0; tk < (int)(sizeof few / sizeof few[0]); tk++) {
                int64_t T = few[tk];
                double s_rows = time_matmul(ops, yref, w, KERN_W_Q8_0, x, xq, T, k, rows, min_s), best = 1e30;
                double start = now_s();
                for (int rep = 0; rep < 15; rep++) {
                    double t0 = now_s();
                    ops->matmul_q8p(y, rows, wp, xq, cx, T, k, 0, rows);
                    best = fmin(best, now_s() - t0);
                    if (now_s() - start > min_s) break;
                }
                bool same = !memcmp(yref, y, (size_t)(T * rows) * sizeof(float));
                n_bad += !same;
                printf("{\"kernel\":\"matmul_q8p\",\"variant\":\"%s\",\"rows\":%ld,\"k\":%ld,\"tokens\":%ld,"
                       "\"seconds_rows\":%.6g,\"seconds_packed\":%.6g,\"rows_over_packed\":%.2f,\"bit_identical\":%s}\n",
                       variants[vi], (long)rows, (long)k, (long)T, s_rows, best, s_rows / best, same ? "true" : "false");
                fprintf(stderr, "q8_0 packed rows=%-5ld T=%-3ld %s rows %8.1f us  packed %8.1f us  (%4.2fx)%s\n",
                        (long)rows, (long)T, variants[vi], s_rows * 1e6, best * 1e6, s_rows / best,
                        same ? "" : " DIFFERS");
            }
            free(w);
            hs_free(wp);
        }
    }

    hs_free(cx);
    /* the quantizer on the 64-token input and a 1024-long dot */
    for (int vi = 0; vi < (only_q8p ? 0 : n_var); vi++) {
        if (!cpu_has(variants[vi])) continue;
        const struct kern_ops *ops = kern_ops_for(variants[vi]);
        struct kern_q8_block *q = hs_malloc((size_t)(64 * k / 32) * sizeof(*q));
        double best = 1e30;
        for (int rep = 0; rep < 20; rep++) {
            double t0 = now_s();
            ops->q8_quantize(q, x, 64, k);
            best = fmin(best, now_s() - t0);
        }
        bool same = !memcmp(q, xq, (size_t)(64 * k / 32) * sizeof(*q));
        n_bad += !same;
        free(q);
        float d = 0;
        double bd = 1e30;
        for (int rep = 0; rep < 20; rep++) {
            double t0 = now_s();
            for (int i = 0; i < 100; i++) d += ops->dot(x + i, x + 1024, k);
            bd = fmin(bd, (now_s() - t0) / 100);
        }
        printf("{\"kernel\":\"q8_quantize\",\"variant\":\"%s\",\"values\":%ld,\"seconds\":%.6g,\"bit_identical\":%s}\n",
               variants[vi], (long)(64 * k), best, same ? "true" : "false");
        printf("{\"kernel\":\"dot\",\"variant\":\"%s\",\"n\":%ld,\"seconds\":%.6g,\"checksum\":%a}\n",
               variants[vi], (long)k, bd, d);
        fprintf(stderr, "%-6s q8_quantize 64x1024: %8.1f us%s   dot 1024: %6.1f ns\n", variants[vi],
                best * 1e6, same ? "" : " DIFFERS", bd * 1e9);
    }
    free(x);
    free(xq);
    free(yref);
    free(y);
    if (n_bad) fprintf(stderr, "%d variant outputs differ from scalar\n", n_bad);
    return n_bad ? 1 : 0;
}
