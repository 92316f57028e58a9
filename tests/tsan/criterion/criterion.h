/* criterion.h — the part of Criterion's API the threaded unit suites use, for `make tsan`.
 *
 * Design note
 * -----------
 * Criterion cannot start under ThreadSanitizer: its runner maps a shared arena at a random
 * address between 0x2000_0000_0000 and 0x6000_0000_0000, which TSan reserves for itself, and
 * aborts ("Could not initialize inheritable arena", Criterion issue #274). The TSan build
 * compiles the sources of tests/unit/<module>/ unchanged with -Itests/tsan ahead of the system headers, so
 * `#include <criterion/criterion.h>` lands here, and links tests/tsan/runner.c instead of
 * libcriterion.
 *   1. Same meaning as Criterion for what the suites use: Test(suite, name, .init, .fini,
 *      .timeout), TestSuite(suite, ...) with the suite's init before the test's and the
 *      test's fini before the suite's, the cr_assert* family (a failure ends the test,
 *      then its fini runs) and cr_skip_test (the test ends, its finis do not run, and it
 *      is not counted: a "[SKIP] suite::name: why" line says so).
 *   2. Each test runs in its own forked process, as under Criterion, so tests keep their
 *      isolation (globals, fault injection, exit paths).
 *   3. The runner prints Criterion's "[FAIL]" and "Synthesis:" lines, so tools/run_tests.sh
 *      counts these suites as it counts Criterion's.
 * A suite that starts to use more of Criterion fails to compile here: add it, same meaning.
 */
#ifndef HS_TSAN_CRITERION_H
#define HS_TSAN_CRITERION_H

#include <math.h>
#include <string.h>

struct shim_opts {
    int sentinel_;
    void (*init)(void);
    void (*fini)(void);
    double timeout; /* seconds; 0 = the suite's, or the runner's default */
};

struct shim_test {
    const char *suite, *name;
    void (*fn)(void);
    const struct shim_opts *opts;
    struct shim_test *next;
};

struct shim_suite {
    const char *name;
    const struct shim_opts *opts;
    struct shim_suite *next;
};

void shim_register_test(struct shim_test *t);
void shim_register_suite(struct shim_suite *s);
/* Reports a failed assertion (fmt and its arguments are the caller's optional message,
 * "" when none) and ends the test: does not return. */
void shim_fail(const char *file, int line, const char *expr, const char *fmt, ...)
    __attribute__((noreturn));

/* Ends the test as skipped (Criterion's cr_skip_test): the runner prints "[SKIP] suite::name:
 * why" and leaves it out of the counts, as Criterion does. Does not return. */
void shim_skip(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
#define cr_skip_test(...) shim_skip(__VA_ARGS__)

#define SHIM_CAT_(a, b) a##b
#define SHIM_CAT(a, b) SHIM_CAT_(a, b)

#define Test(...) SHIM_TEST_(__VA_ARGS__, .sentinel_ = 0)
#define SHIM_TEST_(suite, name, ...)                                                         \
    static void suite##_##name##_fn(void);                                                   \
    static const struct shim_opts suite##_##name##_opts = { __VA_ARGS__ };                   \
    static struct shim_test suite##_##name##_test = { #suite, #name, suite##_##name##_fn,    \
                                                      &suite##_##name##_opts, NULL };        \
    __attribute__((constructor)) static void suite##_##name##_reg(void)                      \
    {                                                                                        \
        shim_register_test(&suite##_##name##_test);                                          \
    }                                                                                        \
    static void suite##_##name##_fn(void)

#define TestSuite(...) SHIM_SUITE_(__VA_ARGS__, .sentinel_ = 0)
#define SHIM_SUITE_(suite, ...)                                                              \
    static const struct shim_opts suite##_suite_opts = { __VA_ARGS__ };                      \
    static struct shim_suite suite##_suite = { #suite, &suite##_suite_opts, NULL };          \
    __attribute__((constructor)) static void suite##_suite_reg(void)                         \
    {                                                                                        \
        shim_register_suite(&suite##_suite);                                                 \
    }                                                                                        \
    struct shim_suite_semicolon_

/* The optional message rides after the condition; the trailing "" makes it never empty. */
#define SHIM_CHECK_(cond, expr, ...)                                                         \
    do {                                                                                     \
        if (!(cond)) shim_fail(__FILE__, __LINE__, expr, __VA_ARGS__);                       \
    } while (0)
#define SHIM_A_(cond, ...) SHIM_CHECK_(cond, #cond, __VA_ARGS__)
#define SHIM_CMP_(op, a, b, ...) SHIM_CHECK_((a)op(b), #a " " #op " " #b, __VA_ARGS__)
#define SHIM_STR_(op, a, b, ...)                                                             \
    SHIM_CHECK_(strcmp((a), (b)) op 0, "strcmp(" #a ", " #b ") " #op " 0", __VA_ARGS__)

#define cr_assert(...) SHIM_A_(__VA_ARGS__, "")
#define cr_assert_not(...) SHIM_NOT_(__VA_ARGS__, "")
#define SHIM_NOT_(cond, ...) SHIM_CHECK_(!(cond), "!(" #cond ")", __VA_ARGS__)
#define cr_assert_null(...) SHIM_NULL_(==, __VA_ARGS__, "")
#define cr_assert_not_null(...) SHIM_NULL_(!=, __VA_ARGS__, "")
#define SHIM_NULL_(op, p, ...) SHIM_CHECK_((p)op NULL, #p " " #op " NULL", __VA_ARGS__)
#define cr_assert_eq(...) SHIM_CMP_(==, __VA_ARGS__, "")
#define cr_assert_neq(...) SHIM_CMP_(!=, __VA_ARGS__, "")
#define cr_assert_lt(...) SHIM_CMP_(<, __VA_ARGS__, "")
#define cr_assert_leq(...) SHIM_CMP_(<=, __VA_ARGS__, "")
#define cr_assert_gt(...) SHIM_CMP_(>, __VA_ARGS__, "")
#define cr_assert_geq(...) SHIM_CMP_(>=, __VA_ARGS__, "")
#define cr_assert_str_eq(...) SHIM_STR_(==, __VA_ARGS__, "")
#define cr_assert_str_neq(...) SHIM_STR_(!=, __VA_ARGS__, "")
#define cr_assert_str_empty(...) SHIM_EMPTY_(__VA_ARGS__, "")
#define SHIM_EMPTY_(s, ...) SHIM_CHECK_((s)[0] == '\0', #s " is empty", __VA_ARGS__)
#define cr_assert_float_eq(...) SHIM_FEQ_(__VA_ARGS__, "")
#define SHIM_FEQ_(a, b, eps, ...)                                                            \
    SHIM_CHECK_(fabs((double)(a) - (double)(b)) <= (double)(eps),                            \
                "|" #a " - " #b "| <= " #eps, __VA_ARGS__)

#endif
