/* test_cpu.c — CPU detection: consistent flags, agreement with the kernel's view in
 * /proc/cpuinfo, and HEADSTART_CPU lowering the level.
 *
 * Detection is cached per process, so HEADSTART_CPU is tested in a fresh process: this
 * binary re-executes itself with HS_TEST_CPU_CHILD set; a constructor (which runs before
 * Criterion's main) then writes sys_cpu_get()'s struct to stdout and exits. */
#include <criterion/criterion.h>

#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sys/sys.h"

extern char **environ;

__attribute__((constructor)) static void cpu_child_main(void)
{
    if (!getenv("HS_TEST_CPU_CHILD")) return;
    const struct sys_cpu *c = sys_cpu_get();
    ssize_t w = write(STDOUT_FILENO, c, sizeof *c);
    _exit(w == (ssize_t)sizeof *c ? 0 : 1);
}

/* Detect in a fresh process with HEADSTART_CPU=level (NULL: unset). */
static struct sys_cpu detect_in_child(const char *level)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fds[0]);

    /* the parent's environment without HEADSTART_CPU, plus the two variables we need */
    size_t n_env = 0;
    while (environ[n_env]) n_env++;
    char **env = hs_calloc(n_env + 3, sizeof *env);
    size_t k = 0;
    for (size_t i = 0; i < n_env; i++)
        if (strncmp(environ[i], "HEADSTART_CPU=", 14) != 0) env[k++] = environ[i];
    env[k++] = (char *)"HS_TEST_CPU_CHILD=1";
    char setting[64];
    if (level) {
        snprintf(setting, sizeof setting, "HEADSTART_CPU=%s", level);
        env[k++] = setting;
    }
    env[k] = NULL;

    char *argv[] = { (char *)"cpu_child", NULL };
    pid_t pid;
    int rc = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    hs_free(env);
    close(fds[1]);
    cr_assert_eq(rc, 0, "spawn: %s", strerror(rc));
    struct sys_cpu c;
    size_t got = 0;
    while (got < sizeof c) {
        ssize_t r = read(fds[0], (char *)&c + got, sizeof c - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed");
    cr_assert_eq(got, sizeof c);
    return c;
}

static void check_consistent(const struct sys_cpu *c)
{
    if (c->avx512f) cr_assert(c->avx2 && c->fma && c->f16c, "avx512f implies avx2, fma, f16c");
    if (c->avx512bw || c->avx512vl || c->avx512_bf16 || c->avx512_vnni) cr_assert(c->avx512f);
    if (c->amx) cr_assert(c->avx512f);
    cr_assert_geq(c->n_cores, 1);
    cr_assert_lt(strlen(c->model), sizeof c->model);
    cr_assert_gt(strlen(c->model), 0);
    cr_assert_neq(c->model[0], ' ', "leading spaces trimmed");
}

/* Is `flag` among the first processor's flags in /proc/cpuinfo? */
static bool cpuinfo_has(const char *flag)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f) return false;
    char line[8192];
    bool found = false;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, "flags", 5) != 0) continue;
        for (char *tok = strtok(strchr(line, ':') + 1, " \n"); tok; tok = strtok(NULL, " \n"))
            if (strcmp(tok, flag) == 0) found = true;
        break;
    }
    fclose(f);
    return found;
}

Test(sys_cpu, detected_once_and_consistent)
{
    const struct sys_cpu *c = sys_cpu_get();
    cr_assert_eq(c, sys_cpu_get(), "cached");
    check_consistent(c);
    cr_assert_eq(c->n_cores, (int)sysconf(_SC_NPROCESSORS_ONLN));
}

Test(sys_cpu, agrees_with_proc_cpuinfo)
{
    struct sys_cpu c = detect_in_child(NULL);
    check_consistent(&c);
#if defined(__x86_64__)
    cr_assert_not(c.neon);
    /* Linux lists a feature only when the CPU has it and the kernel enabled its state */
    cr_assert_eq(c.avx2, cpuinfo_has("avx2"));
    cr_assert_eq(c.fma, cpuinfo_has("fma"));
    cr_assert_eq(c.f16c, cpuinfo_has("f16c"));
    cr_assert_eq(c.avx512f, cpuinfo_has("avx512f"));
    cr_assert_eq(c.avx512bw, cpuinfo_has("avx512bw"));
    cr_assert_eq(c.avx512vl, cpuinfo_has("avx512vl"));
    cr_assert_eq(c.avx512_bf16, cpuinfo_has("avx512_bf16"));
    cr_assert_eq(c.avx512_vnni, cpuinfo_has("avx512_vnni"));
    cr_assert_eq(c.avx_vnni, cpuinfo_has("avx_vnni") && c.avx2 && c.fma && c.f16c);
    if (c.amx) cr_assert(cpuinfo_has("amx_tile"));
#elif defined(__aarch64__)
    cr_assert(c.neon);
#endif
}

Test(sys_cpu, forced_scalar_clears_simd)
{
    struct sys_cpu all = detect_in_child(NULL), c = detect_in_child("scalar");
    cr_assert_not(c.avx2 || c.fma || c.f16c || c.avx512f || c.avx512bw || c.avx512vl ||
                  c.avx512_bf16 || c.avx512_vnni || c.avx_vnni || c.amx || c.neon, "scalar leaves no SIMD flag");
    cr_assert_eq(c.n_cores, all.n_cores);
    cr_assert_str_eq(c.model, all.model);
}

Test(sys_cpu, forced_levels_clear_only_above)
{
    struct sys_cpu all = detect_in_child(NULL);
    struct sys_cpu c = detect_in_child("avx2");
    cr_assert_eq(c.avx2, all.avx2);
    cr_assert_eq(c.fma, all.fma);
    cr_assert_eq(c.f16c, all.f16c);
    cr_assert_not(c.avx512f || c.avx512bw || c.avx512vl || c.avx512_bf16 || c.avx512_vnni || c.avx_vnni || c.amx);
    c = detect_in_child("avxvnni");
    cr_assert_eq(c.avx2, all.avx2);
    cr_assert_eq(c.avx_vnni, all.avx_vnni, "avxvnni keeps AVX-VNNI where the CPU has it, never adds it");
    cr_assert_not(c.avx512f || c.avx512bw || c.avx512vl || c.avx512_bf16 || c.avx512_vnni || c.amx);
    c = detect_in_child("avx512");
    cr_assert_eq(c.avx_vnni, all.avx_vnni);
    cr_assert_eq(c.avx2, all.avx2);
    cr_assert_eq(c.avx512f, all.avx512f, "a level never raises a flag, nor lowers its own");
    cr_assert_eq(c.avx512bw, all.avx512bw);
    cr_assert_eq(c.avx512vl, all.avx512vl);
    cr_assert_eq(c.avx512_bf16, all.avx512_bf16);
    cr_assert_eq(c.avx512_vnni, all.avx512_vnni);
    cr_assert_not(c.amx);
    c = detect_in_child("avx512vnni");
    cr_assert_eq(c.avx512f, all.avx512f);
    cr_assert_eq(c.avx512bw, all.avx512bw);
    cr_assert_eq(c.avx512vl, all.avx512vl);
    cr_assert_eq(c.avx512_vnni, all.avx512_vnni);
    cr_assert_not(c.avx512_bf16 || c.amx, "avx512vnni clears AVX512_BF16 and AMX");
}

Test(sys_cpu, unknown_level_is_ignored)
{
    struct sys_cpu all = detect_in_child(NULL), c = detect_in_child("avx9000");
    cr_assert_eq(memcmp(&c, &all, sizeof c), 0);
}
