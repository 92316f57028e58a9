/*
 * cpu.c — what the processor (and the operating system) let kernels use.
 *
 * A feature counts only when the CPU has it AND the OS saves its register state on a
 * context switch (XCR0 via XGETBV): a CPU with AVX-512 under an OS or hypervisor that does
 * not enable the ZMM state must run the AVX2 kernels. HEADSTART_CPU=scalar|avx2|avxvnni|
 * avx512vnni|avx512 then lowers the level for tests and comparisons (avx512vnni clears
 * AVX512_BF16, avxvnni every AVX-512 flag, avx2 AVX-VNNI too); it never raises it: forcing
 * avxvnni on a CPU without AVX-VNNI (Zen 4, Ice Lake) leaves it at AVX2.
 *
 * Invariants:
 *   1. Detection runs once (pthread_once); every caller sees the same struct.
 *   2. The flags are consistent: avx512f implies avx2, fma and f16c; avx512bw/vl/bf16/vnni imply
 *      avx512f; amx implies avx512f. A CPU that breaks these (odd hypervisors) is treated
 *      as the lower level.
 *   3. amx says the tile instructions exist and XCR0 enables tile state; a kernel that uses
 *      them must still ask Linux for permission (arch_prctl ARCH_REQ_XCOMP_PERM) first.
 */
#include "sys/sys.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

static struct sys_cpu g_cpu;
static pthread_once_t g_cpu_once = PTHREAD_ONCE_INIT;

static void trim_copy(char *dst, size_t cap, const char *src)
{
    while (*src == ' ' || *src == '\t') src++;
    size_t n = strlen(src);
    while (n && (src[n - 1] == ' ' || src[n - 1] == '\n' || src[n - 1] == '\t')) n--;
    if (n >= cap) n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* The value of the first "key<spaces>: value" line of /proc/cpuinfo whose key is one of
 * `keys`, in order of preference. */
static bool cpuinfo_model(char *dst, size_t cap)
{
    static const char *const keys[] = { "model name", "Hardware", "Processor", "cpu model" };
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return false;
    char line[512];
    bool found = false;
    for (size_t k = 0; k < HS_ARRAY_LEN(keys) && !found; k++) {
        rewind(f);
        size_t kl = strlen(keys[k]);
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, keys[k], kl) != 0) continue;
            const char *colon = strchr(line + kl, ':');
            if (!colon) continue;
            trim_copy(dst, cap, colon + 1);
            found = dst[0] != '\0';
            break;
        }
    }
    fclose(f);
    return found;
}

#if defined(__x86_64__) || defined(__i386__)
static uint64_t xgetbv0(void)
{
    uint32_t lo, hi;
    __asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return (uint64_t)hi << 32 | lo;
}

static void detect_x86(struct sys_cpu *c)
{
    unsigned a, b, cx, d;
    unsigned max_leaf = (unsigned)__get_cpuid_max(0, NULL);
    if (max_leaf < 1) return;
    __cpuid_count(1, 0, a, b, cx, d);
    bool osxsave = cx & (1u << 27), avx = cx & (1u << 28);
    bool fma = cx & (1u << 12), f16c = cx & (1u << 29);
    uint64_t xcr0 = osxsave ? xgetbv0() : 0;
    bool os_avx = (xcr0 & 0x6) == 0x6;                 /* XMM | YMM state */
    bool os_avx512 = os_avx && (xcr0 & 0xe0) == 0xe0;  /* opmask | ZMM_Hi256 | Hi16_ZMM */
    bool os_amx = (xcr0 & 0x60000) == 0x60000;         /* XTILECFG | XTILEDATA */
    if (!(avx && os_avx)) return; /* no usable AVX: everything we dispatch on is off */
    c->fma = fma;
    c->f16c = f16c;
    if (max_leaf < 7) return;
    __cpuid_count(7, 0, a, b, cx, d);
    unsigned max_sub7 = a;
    c->avx2 = b & (1u << 5);
    if (os_avx512) {
        c->avx512f = b & (1u << 16);
        c->avx512bw = b & (1u << 30);
        c->avx512vl = b & (1u << 31);
        c->avx512_vnni = cx & (1u << 11);
    }
    c->amx = os_amx && (d & (1u << 24));
    if (max_sub7 >= 1) {
        __cpuid_count(7, 1, a, b, cx, d);
        c->avx_vnni = a & (1u << 4); /* ymm only: the YMM state os_avx checked is enough */
        if (os_avx512) c->avx512_bf16 = a & (1u << 5);
    }
}

static bool brand_string(char *dst, size_t cap)
{
    unsigned regs[12];
    if ((unsigned)__get_cpuid_max(0x80000000u, NULL) < 0x80000004u) return false;
    for (unsigned i = 0; i < 3; i++)
        __cpuid(0x80000002u + i, regs[4 * i], regs[4 * i + 1], regs[4 * i + 2], regs[4 * i + 3]);
    char s[49];
    memcpy(s, regs, 48);
    s[48] = '\0';
    trim_copy(dst, cap, s);
    return dst[0] != '\0';
}
#endif

/* Invariant 2: drop flags whose prerequisites are missing. */
static void make_consistent(struct sys_cpu *c)
{
    if (!c->avx2 || !c->fma || !c->f16c) c->avx512f = c->avx_vnni = false;
    if (!c->avx512f) c->avx512bw = c->avx512vl = c->avx512_bf16 = c->avx512_vnni = c->amx = false;
}

enum cpu_level { CPU_LEVEL_SCALAR, CPU_LEVEL_AVX2, CPU_LEVEL_AVXVNNI, CPU_LEVEL_AVX512VNNI, CPU_LEVEL_AVX512 };

/* Clear every flag above `level`. AMX kernels sit above every level one can force. */
static void apply_level(struct sys_cpu *c, enum cpu_level level)
{
    c->amx = false;
    if (level < CPU_LEVEL_AVX512) c->avx512_bf16 = false;
    if (level < CPU_LEVEL_AVX512VNNI)
        c->avx512f = c->avx512bw = c->avx512vl = c->avx512_bf16 = c->avx512_vnni = false;
    if (level < CPU_LEVEL_AVXVNNI) c->avx_vnni = false;
    if (level < CPU_LEVEL_AVX2) c->avx2 = c->fma = c->f16c = c->neon = false;
}

static void detect(void)
{
    struct sys_cpu *c = &g_cpu;
    memset(c, 0, sizeof *c);
#if defined(__x86_64__) || defined(__i386__)
    detect_x86(c);
    if (!brand_string(c->model, sizeof c->model)) cpuinfo_model(c->model, sizeof c->model);
#elif defined(__aarch64__)
    c->neon = true; /* Advanced SIMD is mandatory on AArch64 */
    cpuinfo_model(c->model, sizeof c->model);
#else
    cpuinfo_model(c->model, sizeof c->model);
#endif
    if (!c->model[0]) snprintf(c->model, sizeof c->model, "unknown");
    make_consistent(c);

    long n = sysconf(_SC_NPROCESSORS_ONLN);
    c->n_cores = n > 0 ? (n > 1 << 20 ? 1 << 20 : (int)n) : 1;

    const char *force = getenv("HEADSTART_CPU");
    if (force && *force) {
        static const struct { const char *name; enum cpu_level level; } levels[] = {
            { "scalar", CPU_LEVEL_SCALAR }, { "avx2", CPU_LEVEL_AVX2 }, { "avxvnni", CPU_LEVEL_AVXVNNI },
            { "avx512vnni", CPU_LEVEL_AVX512VNNI }, { "avx512", CPU_LEVEL_AVX512 },
        };
        size_t i = 0;
        while (i < HS_ARRAY_LEN(levels) && strcmp(force, levels[i].name) != 0) i++;
        if (i < HS_ARRAY_LEN(levels)) apply_level(c, levels[i].level);
        else log_warn("HEADSTART_CPU=%s: unknown level (scalar, avx2, avxvnni, avx512vnni or avx512); ignored", force);
    }
}

const struct sys_cpu *sys_cpu_get(void)
{
    pthread_once(&g_cpu_once, detect);
    return &g_cpu;
}
