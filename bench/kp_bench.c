/*
 * kp_bench.c — K-quant rows (kern_ops.matmul_k) against the row-group layout
 * (kern_ops.matmul_kp, [F10]) side by side, one thread, on the variant's own table
 * (default "avx512"; --variant avx2: q4k_avx2.c / q6k_avx2.c against q4kp_avx2.c /
 * q6kp_avx2.c on the same layout). For each shape and token count: the best time of each
 * path over the repeats, the two interleaved call by call, and the ratio new / old; outputs
 * compared with memcmp on the way. Weights are random rows of the type; each path reads its own
 * copies of the matrix, rotated so that the copies of one path are at least --stream-mb MiB
 * (default 96: past this machine's L3), so a decode call streams its weights from memory as
 * the engine's does. Prints one JSON object per line and a summary on stderr.
 * --base B: the old path is table B's matmul_kp on the same packed copies in place of the
 * rows (two tables on one layout: --base avx2 --variant avxvnni).
 *
 *   kp_bench [--wt q6k|q4k] [--variant V] [--base B] [--reps N] [--stream-mb M] [ROWSxK:T,T,... ...]
 * default shapes: the 0.8B model's ffn_down, attn_qkv and (a fifth of) lm_head:
 *   1024x3584:1,2,4,8,64,512 6144x1024:1,2,4,8,64,512 49664x1024:1,2,4,8,64
 *
 * Build (from the repository root, after `make`):
 *   cc -std=c11 -D_GNU_SOURCE -O2 -ffp-contract=off -Isrc bench/kp_bench.c build/libheadstart.a \
 *      -lm -lpthread -o build/kp_bench
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kernels.h"

static uint64_t kb_rng = 42;
static uint64_t kb_next(void)
{
    uint64_t z = (kb_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Random rows of type wt: quantized from random floats (valid scales). */
static uint8_t *make_rows(int wt, int64_t rows, int64_t k)
{
    size_t rb = kern_k_row_bytes(wt, k);
    uint8_t *w = hs_malloc(rb * (size_t)rows);
    float *x = hs_malloc((size_t)k * sizeof(float));
    for (int64_t r = 0; r < rows; r++) {
        if (r < 64) {
            for (int64_t i = 0; i < k; i++) x[i] = (float)((double)(kb_next() >> 11) / 9007199254740992.0) - 0.5f;
            kern_k_row_from_f32(w + rb * (size_t)r, wt, x, k);
        } else {
            memcpy(w + rb * (size_t)r, w + rb * (size_t)(r % 64), rb);
        }
    }
    hs_free(x);
    return w;
}

typedef void (*kp_fn)(float *y, int64_t y_ld, const void *wp, int wt, const struct kern_q8k_block *xq,
                      int64_t n_tok, int64_t k, int64_t r0, int64_t r1);

/* The old path: table ops's matmul_k on the rows w, or base (when set) on the packed wp. */
static void run_old(const struct kern_ops *ops, kp_fn base, float *y, int64_t rows, const uint8_t *w, const void *wp,
                    int wt, const struct kern_q8k_block *xq, int64_t T, int64_t k)
{
    if (base) base(y, rows, wp, wt, xq, T, k, 0, rows);
    else ops->matmul_k(y, rows, w, wt, xq, T, k, 0, rows);
}

static void run_shape(const struct kern_ops *ops, kp_fn base, kp_fn matmul_kp, int wt, int64_t rows, int64_t k, const int64_t *toks, int n_toks,
                      int reps, double stream_mb)
{
    const size_t rb = kern_k_row_bytes(wt, k), wbytes = rb * (size_t)rows, pbytes = kern_kp_bytes(wt, rows, k);
    int n_copy = (int)fmax(1.0, ceil(stream_mb * 1048576.0 / (double)wbytes));
    uint8_t *w0 = make_rows(wt, rows, k);
    uint8_t **w = hs_malloc((size_t)n_copy * sizeof(*w));
    void **wp = hs_malloc((size_t)n_copy * sizeof(*wp));
    for (int c = 0; c < n_copy; c++) {
        w[c] = hs_aligned_alloc(64, wbytes);
        memcpy(w[c], w0, wbytes);
        wp[c] = hs_aligned_alloc(64, pbytes);
        kern_kp_pack(wp[c], w0, wt, rows, k, 0, (rows + KERN_KP_ROWS - 1) / KERN_KP_ROWS);
    }
    int64_t tmax = 0;
    for (int i = 0; i < n_toks; i++) tmax = toks[i] > tmax ? toks[i] : tmax;
    float *x = hs_malloc((size_t)(tmax * k) * sizeof(float));
    for (int64_t i = 0; i < tmax * k; i++) x[i] = (float)((double)(kb_next() >> 11) / 9007199254740992.0) * 2.0f - 1.0f;
    struct kern_q8k_block *xq = hs_malloc((size_t)(tmax * (k / KERN_QK)) * sizeof(*xq));
    kern_q8k_quantize(xq, x, tmax, k);
    float *ya = hs_malloc((size_t)(tmax * rows) * sizeof(float));
    float *yb = hs_malloc((size_t)(tmax * rows) * sizeof(float));
    for (int ti = 0; ti < n_toks; ti++) {
        int64_t T = toks[ti];
        run_old(ops, base, ya, rows, w[0], wp[0], wt, xq, T, k);
        matmul_kp(yb, rows, wp[0], wt, xq, T, k, 0, rows);
        bool same = !memcmp(ya, yb, (size_t)(T * rows) * sizeof(float));
        /* as many calls per repeat as keep a repeat near 20 ms at least (short shapes) */
        double t0 = now_s();
        run_old(ops, base, ya, rows, w[1 % n_copy], wp[1 % n_copy], wt, xq, T, k);
        double one = now_s() - t0;
        int calls = (int)fmax(1.0, fmin(n_copy, 0.02 / fmax(one, 1e-7)));
        double best_old = 1e30, best_new = 1e30;
        int c = 0;
        for (int rep = 0; rep < reps; rep++) {
            t0 = now_s();
            for (int i = 0; i < calls; i++, c++) run_old(ops, base, ya, rows, w[c % n_copy], wp[c % n_copy], wt, xq, T, k);
            best_old = fmin(best_old, (now_s() - t0) / calls);
            t0 = now_s();
            for (int i = 0; i < calls; i++, c++) matmul_kp(yb, rows, wp[c % n_copy], wt, xq, T, k, 0, rows);
            best_new = fmin(best_new, (now_s() - t0) / calls);
        }
        double gb = (double)wbytes / 1e9;
        printf("{\"kernel\":\"matmul_kp\",\"wt\":%d,\"variant\":\"%s\",\"rows\":%ld,\"k\":%ld,\"tokens\":%ld,"
               "\"old_s\":%.6g,\"new_s\":%.6g,\"ratio\":%.4f,\"bit_identical\":%s}\n",
               wt, ops->name, (long)rows, (long)k, (long)T, best_old, best_new, best_new / best_old,
               same ? "true" : "false");
        fprintf(stderr, "%6ldx%-5ld T=%-4ld old %9.1f us (%5.1f GB/s)  new %9.1f us (%5.1f GB/s)  new/old %.3f%s\n",
                (long)rows, (long)k, (long)T, best_old * 1e6, gb / best_old, best_new * 1e6, gb / best_new,
                best_new / best_old, same ? "" : "  DIFFERS");
    }
    for (int c = 0; c < n_copy; c++) {
        hs_free(w[c]);
        hs_free(wp[c]);
    }
    hs_free(w);
    hs_free(wp);
    hs_free(w0);
    hs_free(x);
    hs_free(xq);
    hs_free(ya);
    hs_free(yb);
}

int main(int argc, char **argv)
{
    int wt = KERN_K_Q6_K, reps = 7;
    const char *variant = "avx512", *base_name = NULL;
    double stream_mb = 96;
    static const char *defaults[] = {"1024x3584:1,2,4,8,64,512", "6144x1024:1,2,4,8,64,512",
                                     "49664x1024:1,2,4,8,64"};
    const char *shapes[16];
    int n_shapes = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--wt") && i + 1 < argc) {
            i++;
            wt = !strcmp(argv[i], "q4k") ? KERN_K_Q4_K : KERN_K_Q6_K;
        } else if (!strcmp(argv[i], "--variant") && i + 1 < argc) {
            variant = argv[++i];
        } else if (!strcmp(argv[i], "--base") && i + 1 < argc) {
            base_name = argv[++i];
        } else if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--stream-mb") && i + 1 < argc) {
            stream_mb = atof(argv[++i]);
        } else if (n_shapes < 16) {
            shapes[n_shapes++] = argv[i];
        }
    }
    if (!n_shapes)
        for (int i = 0; i < 3; i++) shapes[n_shapes++] = defaults[i];
    const struct kern_ops *ops = kern_ops_for(variant);
    kp_fn mkp = ops ? ops->matmul_kp : NULL;
    if (!mkp) {
        fprintf(stderr, "kp_bench: variant %s has no matmul_kp\n", variant);
        return 1;
    }
    const struct kern_ops *bops = base_name ? kern_ops_for(base_name) : NULL;
    if (base_name && (!bops || !bops->matmul_kp)) {
        fprintf(stderr, "kp_bench: base %s has no matmul_kp\n", base_name);
        return 1;
    }
    for (int s = 0; s < n_shapes; s++) {
        long rows = 0, k = 0;
        int64_t toks[32];
        int n_toks = 0, used = 0;
        if (sscanf(shapes[s], "%ldx%ld:%n", &rows, &k, &used) != 2 || rows < 1 || k % KERN_QK) {
            fprintf(stderr, "kp_bench: bad shape %s (ROWSxK:T,T,...)\n", shapes[s]);
            return 1;
        }
        for (const char *p = shapes[s] + used; *p && n_toks < 32;) {
            toks[n_toks++] = strtol(p, (char **)&p, 10);
            if (*p == ',') p++;
        }
        run_shape(ops, bops ? bops->matmul_kp : NULL, mkp, wt, rows, k, toks, n_toks, reps, stream_mb);
    }
    return 0;
}
