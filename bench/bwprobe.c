/*
 * bwprobe.c — memory read bandwidth of this machine with a given thread count, the
 * denominator of the decode roofline in bench/run.sh. Never run by `make test`.
 *
 * Design note
 * -----------
 * Decode reads every weight once per token from a mapping far larger than the caches, with
 * the engine's threads splitting the rows of one matrix at a time (sys_pool_run, one
 * contiguous slice per thread). The probe does the same thing on an anonymous buffer:
 *   stream  — one pool run over the whole buffer, each thread reading its contiguous slice
 *             (the most the memory system gives these threads: the roofline's denominator);
 *   pieces  — pool runs over consecutive PIECE-byte pieces (default 8 MiB, about one
 *             projection matrix), each split over the threads like a matmul's rows, so the
 *             pool's wake-up and barrier cost per matrix is in the number.
 * Loads are AVX-512 (64-byte) or AVX2 (32-byte) when the CPU has them, else 8-byte words,
 * with four independent accumulators so the loop is bound by the loads, not by the adds;
 * the sums are printed so the compiler cannot drop the reads.
 *
 * Invariants:
 *   1. The buffer is written once before timing (every page faulted in, no zero-page
 *      sharing) and is at least 4x the last-level cache the CPU reports.
 *   2. GB/s = bytes read / best seconds over the repeats, 1 GB = 1e9 bytes.
 *
 * Output: one JSON line {"threads":T,"bytes":B,"isa":"avx512","stream_gb_s":X,
 * "pieces_gb_s":Y,"piece_bytes":P,"reps":R,"checksum":C}.
 *
 *   bwprobe [--threads T] [--mib M] [--piece-mib P] [--reps R]
 *
 * Built by bench/run.sh against the library:
 *   cc -std=c11 -D_GNU_SOURCE -O2 -Isrc bench/bwprobe.c BUILD/libheadstart.a -lm -lpthread
 */
#include "sys/sys.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

struct probe {
    const uint8_t *buf;
    int64_t bytes;      /* bytes of this pool run, from buf */
    int64_t unit;       /* the index range of the pool run counts units of this many bytes */
    int isa;            /* 2 = avx512, 1 = avx2, 0 = scalar */
    uint64_t sum[64];   /* per thread, indexed by thread_index */
};

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static uint64_t read_avx512(const uint8_t *p, int64_t n)
{
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i + 256 <= n; i += 256) {
        a0 = _mm512_xor_si512(a0, _mm512_load_si512((const void *)(p + i)));
        a1 = _mm512_xor_si512(a1, _mm512_load_si512((const void *)(p + i + 64)));
        a2 = _mm512_xor_si512(a2, _mm512_load_si512((const void *)(p + i + 128)));
        a3 = _mm512_xor_si512(a3, _mm512_load_si512((const void *)(p + i + 192)));
    }
    a0 = _mm512_xor_si512(_mm512_xor_si512(a0, a1), _mm512_xor_si512(a2, a3));
    uint64_t v[8]; /* summed as unsigned: the intrinsic's reduction adds signed lanes (UBSan) */
    _mm512_storeu_si512((void *)v, a0);
    return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}

__attribute__((target("avx2"))) static uint64_t read_avx2(const uint8_t *p, int64_t n)
{
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (int64_t i = 0; i + 128 <= n; i += 128) {
        a0 = _mm256_xor_si256(a0, _mm256_load_si256((const __m256i *)(const void *)(p + i)));
        a1 = _mm256_xor_si256(a1, _mm256_load_si256((const __m256i *)(const void *)(p + i + 32)));
        a2 = _mm256_xor_si256(a2, _mm256_load_si256((const __m256i *)(const void *)(p + i + 64)));
        a3 = _mm256_xor_si256(a3, _mm256_load_si256((const __m256i *)(const void *)(p + i + 96)));
    }
    a0 = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    uint64_t v[4];
    _mm256_storeu_si256((__m256i *)(void *)v, a0);
    return v[0] + v[1] + v[2] + v[3];
}
#endif

static uint64_t read_scalar(const uint8_t *p, int64_t n)
{
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    for (int64_t i = 0; i + 32 <= n; i += 32) {
        uint64_t w[4];
        memcpy(w, p + i, sizeof(w));
        a0 ^= w[0];
        a1 ^= w[1];
        a2 ^= w[2];
        a3 ^= w[3];
    }
    return a0 + a1 + a2 + a3;
}

/* Pool body: units [begin, end) of the current run, each `unit` bytes. */
static void probe_slice(void *ctx, int64_t begin, int64_t end, int t)
{
    struct probe *pr = ctx;
    const uint8_t *p = pr->buf + begin * pr->unit;
    int64_t n = (end - begin) * pr->unit;
    if (n > pr->bytes - begin * pr->unit) n = pr->bytes - begin * pr->unit;
    uint64_t s;
#if defined(__x86_64__)
    if (pr->isa == 2) s = read_avx512(p, n);
    else if (pr->isa == 1) s = read_avx2(p, n);
    else
#endif
        s = read_scalar(p, n);
    pr->sum[t & 63] += s;
}

static int parse_pos(const char *opt, const char *v, long long *out)
{
    char *end;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || x < 1) {
        fprintf(stderr, "bwprobe: %s wants a positive integer, got '%s'\n", opt, v);
        return -1;
    }
    *out = x;
    return 0;
}

int main(int argc, char **argv)
{
    long long threads = 2, mib = 0, piece_mib = 8, reps = 5;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) { fprintf(stderr, "usage: bwprobe [--threads T] [--mib M] [--piece-mib P] [--reps R]\n"); return 2; }
        const char *a = argv[i], *v = argv[++i];
        long long *dst = !strcmp(a, "--threads") ? &threads : !strcmp(a, "--mib") ? &mib
                       : !strcmp(a, "--piece-mib") ? &piece_mib : !strcmp(a, "--reps") ? &reps : NULL;
        if (!dst) { fprintf(stderr, "bwprobe: unknown option '%s'\n", a); return 2; }
        if (parse_pos(a, v, dst)) return 2;
    }
    if (threads > 64) { fprintf(stderr, "bwprobe: at most 64 threads\n"); return 2; }
    /* at least 4x the LLC (invariant 1), at least 1 GiB */
    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (llc <= 0) llc = sysconf(_SC_LEVEL2_CACHE_SIZE);
    long long min_mib = llc > 0 ? 4 * (long long)llc / (1 << 20) + 1 : 1024;
    if (min_mib < 1024) min_mib = 1024;
    if (mib == 0) mib = min_mib;
    int64_t bytes = (int64_t)mib << 20, piece = (int64_t)piece_mib << 20;
    if (piece > bytes) piece = bytes;

    uint8_t *buf = NULL;
    if (posix_memalign((void **)&buf, 4096, (size_t)bytes)) { fprintf(stderr, "bwprobe: cannot allocate %lld MiB\n", mib); return 1; }
    for (int64_t i = 0; i < bytes; i += 8) {
        uint64_t v = (uint64_t)i * 0x9E3779B97F4A7C15ull;
        memcpy(buf + i, &v, 8);
    }

    const struct sys_cpu *cpu = sys_cpu_get();
    struct probe pr;
    memset(&pr, 0, sizeof(pr));
    pr.buf = buf;
    pr.isa = cpu->avx512f ? 2 : cpu->avx2 ? 1 : 0;
    static const char *isa_name[] = {"scalar", "avx2", "avx512"};
    struct sys_pool *pool = sys_pool_new((int)threads);

    /* units of 4 KiB keep every slice 256-byte aligned and the split the pool's own */
    const int64_t unit = 4096;
    double best_stream = 1e30, best_pieces = 1e30;
    for (long long r = 0; r < reps; r++) {
        pr.unit = unit;
        pr.bytes = bytes;
        double t0 = sys_time_sec();
        sys_pool_run(pool, bytes / unit, probe_slice, &pr);
        double t1 = sys_time_sec();
        if (t1 - t0 < best_stream) best_stream = t1 - t0;

        double t2 = sys_time_sec();
        for (int64_t off = 0; off + piece <= bytes; off += piece) {
            pr.buf = buf + off;
            pr.bytes = piece;
            sys_pool_run(pool, piece / unit, probe_slice, &pr);
        }
        double t3 = sys_time_sec();
        pr.buf = buf;
        if (t3 - t2 < best_pieces) best_pieces = t3 - t2;
    }
    uint64_t sum = 0;
    for (int t = 0; t < 64; t++) sum += pr.sum[t];
    int64_t piece_total = bytes / piece * piece;
    printf("{\"threads\":%lld,\"bytes\":%lld,\"isa\":\"%s\",\"stream_gb_s\":%.3f,\"pieces_gb_s\":%.3f,"
           "\"piece_bytes\":%lld,\"reps\":%lld,\"llc_bytes\":%ld,\"checksum\":%llu}\n",
           threads, (long long)bytes, isa_name[pr.isa], (double)bytes / best_stream * 1e-9,
           (double)piece_total / best_pieces * 1e-9, (long long)piece, reps, llc, (unsigned long long)sum);
    sys_pool_free(pool);
    free(buf);
    return 0;
}
