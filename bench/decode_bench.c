/*
 * decode_bench.c — the decode matmul's memory bandwidth: GB/s of the one-token (T = 1)
 * matmul of each weight type over a matrix far larger than the caches, the rows split over
 * a pool of threads as the engine's forward pass splits them, next to a plain read of the
 * same buffer by the same threads. A decode step is this matmul over every weight of the
 * model, so the ratio of the two is how close the kernel streams to what the memory gives.
 * Never run by `make test`.
 *
 * Design note
 * -----------
 *   1. The variant is the engine's choice (engine_best_variant, so
 *      HEADSTART_CPU=avx2 measures the AVX2 table on an AVX-512 CPU), or --variant.
 *   2. Per weight type (f32, f16, bf16 with f32 activations, bf16_dp = kern_bf16_matmul on
 *      bf16-rounded activations, the path the engine takes for bf16 files, q8_0, and q4_k /
 *      q6_k through kern_ops.matmul_k on their rows, with the activations quantized once
 *      outside the timing; K-quants only where --k is a multiple of 256), one matrix of about --mib MiB (K =
 *      --k, the rows to fill it), written once before timing (every page faulted in).
 *      q8_0p, q4_kp and q6_kp are the same rows packed once (kern_q8p_pack, kern_kp_pack)
 *      and multiplied in that layout (kern_ops.matmul_q8p, matmul_kp), as the engine does
 *      where the table has the kernel (wpack.c); skipped where it has not. Their bytes are
 *      the packed copy's.
 *   2a. The rows go to the threads as the engine hands out a decode matmul's (forward.c mm_n):
 *      pieces of about 1/16 of a thread's share, multiples of 16 rows, at least 32, claimed
 *      first come, first served (sys_pool_run_chunks); the plain read takes the same pieces.
 *   3. read_gb_s: the same threads xor-reading the same matrix with 32-byte loads (AVX2
 *      where the CPU has it), four accumulators, the same row split: the roofline of this
 *      one matrix on this machine at this moment. Kernel and read runs alternate, so load
 *      from other jobs hits both alike.
 *   4. GB/s = weight bytes / seconds (1 GB = 1e9 bytes); the best and the median of --reps.
 *      With --threads 1 the pool runs on the calling thread, and cpu_gb_s / read_cpu_gb_s
 *      divide by that thread's CPU time instead: on a loaded machine the time it was not
 *      scheduled drops out (a stall on memory still counts), so A/B runs of two builds
 *      compare there when the wall-clock figures scatter.
 *
 * Output: one JSON line per weight type and a human line on stderr:
 *     {"kernel":"decode","wtype":"f16","variant":"avx2","threads":2,"rows":R,"k":K,
 *      "bytes":B,"reps":N,"gb_s":X,"median_gb_s":Y,"read_gb_s":Z,"pct_of_read":P}
 *
 *   decode_bench [--variant V] [--threads N] [--k K] [--mib M] [--reps R] [--wtype T]...
 *
 * Built by bench/run.sh (prepare) against the library:
 *   cc -std=c11 -D_GNU_SOURCE -O2 -ffp-contract=off -Isrc bench/decode_bench.c \
 *      build/libheadstart.a -lm -lpthread -o build/decode_bench
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/engine.h"
#include "kernels/kernels.h"
#include "sys/sys.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

static uint64_t db_rng = 7;
static uint64_t db_next(void)
{
    uint64_t z = (db_rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static float db_val(void) { return (float)((double)(db_next() >> 11) / 9007199254740992.0) * 2.0f - 1.0f; }

enum { DB_F32, DB_F16, DB_BF16, DB_BF16_DP, DB_Q8_0, DB_Q4_K, DB_Q6_K, DB_Q8_0P, DB_Q4_KP, DB_Q6_KP, DB_N };
static const char *const db_names[DB_N] = { "f32", "f16", "bf16", "bf16_dp", "q8_0", "q4_k", "q6_k",
                                            "q8_0p", "q4_kp", "q6_kp" };
static const int db_wt[DB_N] = { KERN_W_F32, KERN_W_F16, KERN_W_BF16, KERN_W_BF16, KERN_W_Q8_0,
                                 KERN_K_Q4_K, KERN_K_Q6_K, KERN_W_Q8_0, KERN_K_Q4_K, KERN_K_Q6_K };
static bool db_packed(int type) { return type >= DB_Q8_0P; }

struct db_job {
    const struct kern_ops *ops;
    int type;           /* DB_* */
    const uint8_t *w;   /* the rows, or their packed copy (note 2) */
    size_t rb;          /* bytes per row (of the rows; the read takes the packed copy's rows' share) */
    int64_t rows;
    size_t bytes;       /* of w */
    const float *x;
    const uint16_t *xb;
    const struct kern_q8_block *xq;
    const struct kern_q8k_block *xk;
    float *y;
    int64_t k;
    bool read;          /* the plain read (note 3) instead of the matmul */
    uint64_t sum[64];   /* per thread: the read's checksum */
};

#if defined(__x86_64__)
__attribute__((target("avx2"))) static uint64_t read_avx2(const uint8_t *p, int64_t n)
{
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 128 <= n; i += 128) {
        a0 = _mm256_xor_si256(a0, _mm256_loadu_si256((const __m256i *)(const void *)(p + i)));
        a1 = _mm256_xor_si256(a1, _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 32)));
        a2 = _mm256_xor_si256(a2, _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 64)));
        a3 = _mm256_xor_si256(a3, _mm256_loadu_si256((const __m256i *)(const void *)(p + i + 96)));
    }
    __m256i a = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    uint64_t s[4];
    _mm256_storeu_si256((__m256i *)(void *)s, a);
    for (; i < n; i++) s[0] ^= p[i];
    return s[0] ^ s[1] ^ s[2] ^ s[3];
}
#endif

static uint64_t read_plain(const uint8_t *p, int64_t n)
{
    uint64_t s = 0;
    for (int64_t i = 0; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, p + i, 8);
        s ^= v;
    }
    return s;
}

static void db_fn(void *ctx, int64_t r0, int64_t r1, int ti)
{
    struct db_job *j = ctx;
    if (j->read) { /* the same share of w's bytes as rows [r0, r1) */
        size_t a = (size_t)((double)j->bytes * (double)r0 / (double)j->rows);
        size_t b = (size_t)((double)j->bytes * (double)r1 / (double)j->rows);
        const uint8_t *p = j->w + a;
        int64_t n = (int64_t)(b - a);
#if defined(__x86_64__)
        if (sys_cpu_get()->avx2) { j->sum[ti & 63] ^= read_avx2(p, n); return; }
#endif
        j->sum[ti & 63] ^= read_plain(p, n);
        return;
    }
    if (j->type == DB_Q8_0P) j->ops->matmul_q8p(j->y, 1, j->w, j->xq, NULL, 1, j->k, r0, r1);
    else if (db_packed(j->type)) j->ops->matmul_kp(j->y, 1, j->w, db_wt[j->type], j->xk, 1, j->k, r0, r1);
    else if (j->type == DB_BF16_DP) j->ops->bf16_matmul(j->y, 1, j->w, j->xb, 1, j->k, r0, r1);
    else if (kern_wtype_is_k(db_wt[j->type])) j->ops->matmul_k(j->y, 1, j->w, db_wt[j->type], j->xk, 1, j->k, r0, r1);
    else j->ops->matmul(j->y, 1, j->w, (enum kern_wtype)db_wt[j->type], j->x, j->xq, 1, j->k, r0, r1);
}

static uint8_t *db_weights(int type, int64_t rows, int64_t k, size_t rb)
{
    uint8_t *w = hs_malloc(rb * (size_t)rows);
    for (int64_t r = 0; r < rows; r++) {
        uint8_t *row = w + rb * (size_t)r;
        if (type == DB_Q8_0 || type == DB_Q8_0P) {
            for (int64_t b = 0; b < k / KERN_Q8_BLOCK; b++) {
                uint16_t d = hs_f32_to_f16(0.01f * db_val());
                memcpy(row + KERN_Q8_BLOCK_BYTES * b, &d, 2);
                for (int i = 0; i < KERN_Q8_BLOCK; i++)
                    row[KERN_Q8_BLOCK_BYTES * b + 2 + i] = (uint8_t)(int8_t)(127.0f * db_val());
            }
            continue;
        }
        if (kern_wtype_is_k(db_wt[type])) { /* random bits, the f16 scales kept small and finite */
            for (size_t i = 0; i < rb; i++) row[i] = (uint8_t)db_next();
            bool q4 = db_wt[type] == KERN_K_Q4_K;
            size_t bb = q4 ? KERN_Q4K_BYTES : KERN_Q6K_BYTES;
            for (size_t b = 0; b < rb / bb; b++) {
                uint8_t *blk = row + bb * b;
                uint16_t d = hs_f32_to_f16(0.01f * db_val()), dm = hs_f32_to_f16(0.001f * db_val());
                if (q4) { memcpy(blk, &d, 2); memcpy(blk + 2, &dm, 2); }
                else memcpy(blk + bb - 2, &d, 2);
            }
            continue;
        }
        for (int64_t i = 0; i < k; i++) {
            float f = db_val();
            if (type == DB_F32) { memcpy(row + 4 * i, &f, 4); continue; }
            uint16_t h = type == DB_F16 ? hs_f32_to_f16(f) : hs_f32_to_bf16(f);
            memcpy(row + 2 * i, &h, 2);
        }
    }
    return w;
}

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static long db_arg(const char *opt, const char *v)
{
    char *end;
    long x = strtol(v, &end, 10);
    if (!*v || *end || x < 1) {
        fprintf(stderr, "decode_bench: %s wants a positive integer, got '%s'\n", opt, v);
        exit(2);
    }
    return x;
}

int main(int argc, char **argv)
{
    long threads = 2, k = 4096, mib = 256, reps = 7;
    const char *variant = NULL;
    bool want[DB_N] = { false }, any = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc) { fprintf(stderr, "decode_bench: bad option '%s'\n", a); return 2; }
        const char *v = argv[++i];
        if (!strcmp(a, "--variant")) variant = v;
        else if (!strcmp(a, "--threads")) threads = db_arg(a, v);
        else if (!strcmp(a, "--k")) k = db_arg(a, v);
        else if (!strcmp(a, "--mib")) mib = db_arg(a, v);
        else if (!strcmp(a, "--reps")) reps = db_arg(a, v);
        else if (!strcmp(a, "--wtype")) {
            int t = 0;
            while (t < DB_N && strcmp(v, db_names[t])) t++;
            if (t == DB_N) { fprintf(stderr, "decode_bench: unknown --wtype '%s'\n", v); return 2; }
            want[t] = any = true;
        } else { fprintf(stderr, "decode_bench: bad option '%s'\n", a); return 2; }
    }
    if (k % KERN_Q8_BLOCK) { fprintf(stderr, "decode_bench: --k must be a multiple of 32\n"); return 2; }
    if (threads > 64 || reps > 1000) { fprintf(stderr, "decode_bench: at most 64 threads, 1000 reps\n"); return 2; }
    if (!variant) variant = engine_best_variant(); /* the engine's own choice, HEADSTART_CPU included */
    const struct kern_ops *ops = kern_ops_for(variant);
    if (!ops) { fprintf(stderr, "decode_bench: no kernel variant '%s'\n", variant); return 2; }
    struct sys_pool *pool = sys_pool_new((int)threads);

    float *x = hs_malloc((size_t)k * sizeof(float));
    for (long i = 0; i < k; i++) x[i] = db_val();
    uint16_t *xb = hs_malloc((size_t)k * sizeof(uint16_t));
    ops->bf16_round(xb, x, k);
    struct kern_q8_block *xq = hs_malloc((size_t)(k / KERN_Q8_BLOCK) * sizeof(*xq));
    kern_q8_quantize(xq, x, 1, k);
    struct kern_q8k_block *xk = NULL;
    if (k % KERN_QK == 0) {
        xk = hs_malloc((size_t)(k / KERN_QK) * sizeof(*xk));
        kern_q8k_quantize(xk, x, 1, k);
    }
    double *ts = hs_malloc((size_t)reps * sizeof(double)), *tr = hs_malloc((size_t)reps * sizeof(double));
    double *cs = hs_malloc((size_t)reps * sizeof(double)), *cr = hs_malloc((size_t)reps * sizeof(double));

    for (int type = 0; type < DB_N; type++) {
        if (any && !want[type]) continue;
        if (kern_wtype_is_k(db_wt[type]) && !xk) continue; /* K-quants need k % 256 == 0 */
        size_t rb = kern_wtype_is_k(db_wt[type]) ? kern_k_row_bytes(db_wt[type], k)
                                                 : kern_row_bytes((enum kern_wtype)db_wt[type], k);
        int64_t rows = (int64_t)(((size_t)mib << 20) / rb);
        if (rows < 1) rows = 1;
        if (db_packed(type) && (type == DB_Q8_0P ? !ops->matmul_q8p : !ops->matmul_kp)) {
            fprintf(stderr, "decode %-7s %s: the table has no matmul over the packed layout, skipped\n",
                    db_names[type], variant);
            continue;
        }
        uint8_t *w = db_weights(type, rows, k, rb);
        size_t wbytes = rb * (size_t)rows;
        if (db_packed(type)) { /* the engine's packed copy (note 2) */
            int64_t groups = (rows + KERN_KP_ROWS - 1) / KERN_KP_ROWS; /* KERN_Q8P_ROWS too */
            wbytes = type == DB_Q8_0P ? kern_q8p_bytes(rows, k) : kern_kp_bytes(db_wt[type], rows, k);
            uint8_t *pk = hs_aligned_alloc(64, wbytes);
            memset(pk, 0, wbytes);
            if (type == DB_Q8_0P) kern_q8p_pack(pk, w, rows, k, 0, groups);
            else kern_kp_pack(pk, w, db_wt[type], rows, k, 0, groups);
            hs_free(w);
            w = pk;
        }
        float *y = hs_malloc((size_t)rows * sizeof(float));
        struct db_job j = { .ops = ops, .type = type, .w = w, .rb = rb, .rows = rows, .bytes = wbytes,
                            .x = x, .xb = xb, .xq = xq, .xk = xk, .y = y, .k = k };
        double bytes = (double)wbytes;
        /* the engine's decode pieces (note 2a) */
        int64_t chunk = HS_MAX((rows / (16 * threads) + 15) / 16 * 16, (int64_t)32);
        for (long rep = -1; rep < reps; rep++) { /* rep -1: a warm-up of each */
            j.read = false;
            double c0 = thread_cpu_s(), t0 = sys_time_sec();
            sys_pool_run_chunks(pool, rows, chunk, db_fn, &j);
            double c1 = thread_cpu_s(), t1 = sys_time_sec();
            j.read = true;
            sys_pool_run_chunks(pool, rows, chunk, db_fn, &j);
            double c2 = thread_cpu_s(), t2 = sys_time_sec();
            if (rep >= 0) ts[rep] = t1 - t0, tr[rep] = t2 - t1, cs[rep] = c1 - c0, cr[rep] = c2 - c1;
        }
        qsort(ts, (size_t)reps, sizeof *ts, cmp_double);
        qsort(tr, (size_t)reps, sizeof *tr, cmp_double);
        qsort(cs, (size_t)reps, sizeof *cs, cmp_double);
        qsort(cr, (size_t)reps, sizeof *cr, cmp_double);
        double gb = bytes / ts[0] * 1e-9, med = bytes / ts[reps / 2] * 1e-9, rd = bytes / tr[0] * 1e-9;
        /* thread CPU time means something only when the caller ran every row (note 4) */
        double cgb = threads == 1 ? bytes / cs[0] * 1e-9 : 0.0, crd = threads == 1 ? bytes / cr[0] * 1e-9 : 0.0;
        uint64_t sum = 0;
        for (int i = 0; i < 64; i++) sum ^= j.sum[i];
        printf("{\"kernel\":\"decode\",\"wtype\":\"%s\",\"variant\":\"%s\",\"threads\":%ld,\"rows\":%lld,"
               "\"k\":%ld,\"bytes\":%.0f,\"reps\":%ld,\"gb_s\":%.3f,\"median_gb_s\":%.3f,\"read_gb_s\":%.3f,"
               "\"pct_of_read\":%.1f,\"cpu_gb_s\":%.3f,\"read_cpu_gb_s\":%.3f,\"checksum\":%llu}\n",
               db_names[type], variant, threads, (long long)rows, k, bytes, reps, gb, med, rd,
               100.0 * gb / rd, cgb, crd, (unsigned long long)(sum ^ (uint64_t)(y[0] != y[0])));
        fflush(stdout);
        fprintf(stderr, "decode %-7s %s %ld threads %lld x %ld (%.0f MiB): %6.2f GB/s (median %6.2f), read %6.2f GB/s, %5.1f%%",
                db_names[type], variant, threads, (long long)rows, k, bytes / 1048576.0, gb, med, rd, 100.0 * gb / rd);
        if (threads == 1) fprintf(stderr, "; per CPU second %6.2f, read %6.2f", cgb, crd);
        fputc('\n', stderr);
        hs_free(w);
        hs_free(y);
    }
    hs_free(x);
    hs_free(xb);
    hs_free(xq);
    hs_free(xk);
    hs_free(ts);
    hs_free(tr);
    hs_free(cs);
    hs_free(cr);
    sys_pool_free(pool);
    return 0;
}
