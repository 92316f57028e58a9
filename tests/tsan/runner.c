/* runner.c — main() of a unit suite built for `make tsan` (see criterion/criterion.h here for
 * why Criterion itself cannot run under ThreadSanitizer).
 *
 * Design note
 * -----------
 *   1. Tests run one at a time, each in a child forked from a parent that has started no
 *      thread (TSan does not support threads across fork), in registration order: the
 *      order of the files on the command line, then of the tests in each file.
 *   2. Verdict per child: exit 0 passes; exit 1 (a failed assertion) fails; exit 3
 *      (cr_skip_test, which printed its "[SKIP]" line) is not counted, as under Criterion;
 *      any other exit (TSan's 66 after a report) or a signal crashes; running past the
 *      timeout is killed and crashes. Only a pass counts as a pass.
 *   3. Output is Criterion's as far as tools/run_tests.sh reads it: "[FAIL] suite::name: why"
 *      per failure and one closing "[====] Synthesis: Tested: N | Passing: N | Failing: N |
 *      Crashing: N". Criterion's options (--verbose, --jobs N) are accepted and ignored; a
 *      bare argument runs only the tests whose "suite::name" contains it.
 */
#include <criterion/criterion.h>

#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEFAULT_TIMEOUT_S 600

static struct shim_test *g_tests, **g_tail = &g_tests;
static struct shim_suite *g_suites;
static jmp_buf g_abort; /* in the child: where a failed assertion goes */
static char g_full[256]; /* in the child: "suite::name" of the test it runs */
enum { EXIT_SKIPPED = 3 };

void shim_register_test(struct shim_test *t)
{
    *g_tail = t;
    g_tail = &t->next;
}

void shim_register_suite(struct shim_suite *s)
{
    s->next = g_suites;
    g_suites = s;
}

void shim_fail(const char *file, int line, const char *expr, const char *fmt, ...)
{
    fprintf(stderr, "%s:%d: assertion failed: %s", file, line, expr);
    if (fmt && fmt[0]) {
        va_list ap;
        va_start(ap, fmt);
        fputs(": ", stderr);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
    }
    fputc('\n', stderr);
    longjmp(g_abort, 1);
}

void shim_skip(const char *fmt, ...)
{
    printf("[SKIP] %s: ", g_full);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(NULL);
    _exit(EXIT_SKIPPED);
}

static const struct shim_opts *suite_opts(const char *name)
{
    for (struct shim_suite *s = g_suites; s; s = s->next)
        if (strcmp(s->name, name) == 0) return s->opts;
    return NULL;
}

/* The child: init (suite, test), body, fini (test, suite); a failure skips to the finis. */
static void run_child(const struct shim_test *t, const struct shim_opts *so)
{
    volatile int failed = 0;
    if (setjmp(g_abort) == 0) {
        if (so && so->init) so->init();
        if (t->opts->init) t->opts->init();
        t->fn();
    } else {
        failed = 1;
    }
    if (setjmp(g_abort) == 0) {
        if (t->opts->fini) t->opts->fini();
        if (so && so->fini) so->fini();
    } else {
        failed = 1;
    }
    fflush(NULL);
    _exit(failed ? 1 : 0);
}

int main(int argc, char **argv)
{
    const char *filter = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--jobs") == 0 || strcmp(argv[i], "-j") == 0) i++;
        else if (argv[i][0] != '-') filter = argv[i];
    }
    int n = 0, passed = 0, failing = 0, crashing = 0;
    for (const struct shim_test *t = g_tests; t; t = t->next) {
        char *full = g_full;
        snprintf(g_full, sizeof g_full, "%s::%s", t->suite, t->name);
        if (filter && !strstr(full, filter)) continue;
        const struct shim_opts *so = suite_opts(t->suite);
        double timeout = t->opts->timeout > 0 ? t->opts->timeout
                       : so && so->timeout > 0 ? so->timeout : DEFAULT_TIMEOUT_S;
        n++;
        printf("[RUN ] %s\n", full);
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) { perror("fork"); return 2; }
        if (pid == 0) {
            /* TSan slows a test several times; Criterion's timeouts are for native speed */
            alarm((unsigned)(timeout * 4) + 1);
            run_child(t, so);
        }
        int st = 0;
        while (waitpid(pid, &st, 0) < 0) {}
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
            passed++;
            printf("[PASS] %s\n", full);
        } else if (WIFEXITED(st) && WEXITSTATUS(st) == EXIT_SKIPPED) {
            n--;
        } else if (WIFEXITED(st) && WEXITSTATUS(st) == 1) {
            failing++;
            printf("[FAIL] %s: an assertion failed\n", full);
        } else {
            crashing++;
            if (WIFSIGNALED(st))
                printf("[FAIL] %s: crashed: signal %d%s\n", full, WTERMSIG(st),
                       WTERMSIG(st) == SIGALRM ? " (timed out)" : "");
            else
                printf("[FAIL] %s: crashed: exit %d%s\n", full, WEXITSTATUS(st),
                       WEXITSTATUS(st) == 66 ? " (ThreadSanitizer report above)" : "");
        }
        fflush(NULL);
    }
    printf("[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | Crashing: %d\n", n, passed,
           failing, crashing);
    return failing + crashing ? 1 : 0;
}
