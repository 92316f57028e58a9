/* llama_cpu.h — what bench/llama_bench.c and bench/llama_batch.c share about llama.cpp's CPU
 * backend: loading one CPU library by name (BENCH_ISA=avx2: libggml-cpu-haswell.so) or the
 * best of the library directory, and the features the loaded one was compiled for. Static
 * functions: each program is one translation unit. Not part of make test. */
#ifndef HS_BENCH_LLAMA_CPU_H
#define HS_BENCH_LLAMA_CPU_H

#include <stdio.h>
#include <string.h>

#include "ggml-backend.h"

/* The features of the registered CPU backend ("AVX2 AVX512 ..." of those whose value is not
 * "0"), into buf; "" when there is none or it reports nothing. */
static void cpu_features(char *buf, size_t len)
{
    buf[0] = 0;
    ggml_backend_reg_t reg = ggml_backend_reg_by_name("CPU");
    if (!reg) return;
    /* a data pointer to a function pointer by its bytes: ISO C has no cast between them */
    void *sym = ggml_backend_reg_get_proc_address(reg, "ggml_backend_get_features");
    if (!sym) return;
    ggml_backend_get_features_t get;
    memcpy(&get, &sym, sizeof get);
    size_t used = 0;
    for (struct ggml_backend_feature *f = get(reg); f && f->name; f++) {
        if (!strcmp(f->value, "0")) continue;
        /* names only for flags ("1"); name=value for the rest (e.g. the SIMD width) */
        int n = !strcmp(f->value, "1") ? snprintf(buf + used, len - used, "%s%s", used ? " " : "", f->name)
                                       : snprintf(buf + used, len - used, "%s%s=%s", used ? " " : "", f->name, f->value);
        if (n < 0 || (size_t)n >= len - used) break;
        used += (size_t)n;
    }
}

/* Loads cpu_lib (a bare file name is taken from lib_dir) or, when it is NULL, every backend of
 * lib_dir; the loaded path into path[len] ("" for the directory). Says why on stderr, as
 * program `who`, and returns -1 when the library does not load. */
static int cpu_backend_load(const char *who, const char *lib_dir, const char *cpu_lib, char *path, size_t len)
{
    path[0] = 0;
    if (!cpu_lib) {
        ggml_backend_load_all_from_path(lib_dir);
        return 0;
    }
    snprintf(path, len, "%s%s%s", strchr(cpu_lib, '/') ? "" : lib_dir, strchr(cpu_lib, '/') ? "" : "/", cpu_lib);
    if (!ggml_backend_load(path)) {
        fprintf(stderr, "%s: cannot load CPU backend %s (missing, or not supported on this CPU)\n", who, path);
        return -1;
    }
    return 0;
}

#endif
