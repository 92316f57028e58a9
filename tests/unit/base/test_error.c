/* test_error.c — sticky errors, prefixes, status names, log levels. */
#include <criterion/criterion.h>

#include <limits.h>
#include <string.h>

#include "base/base.h"

Test(base_error, clear_resets_code_and_message)
{
    struct hs_err e;
    memset(&e, 'x', sizeof e);
    hs_err_clear(&e);
    cr_assert_eq(e.code, HS_OK);
    cr_assert_str_empty(e.msg);
}

Test(base_error, set_returns_code_and_formats)
{
    struct hs_err e;
    hs_err_clear(&e);
    int rc = hs_err_set(&e, HS_ERR_FORMAT, "%s: tensor '%s': %d bytes", "m.gguf", "blk.0", 42);
    cr_assert_eq(rc, HS_ERR_FORMAT);
    cr_assert_eq(e.code, HS_ERR_FORMAT);
    cr_assert_str_eq(e.msg, "m.gguf: tensor 'blk.0': 42 bytes");
}

Test(base_error, first_error_wins)
{
    struct hs_err e;
    hs_err_clear(&e);
    hs_err_set(&e, HS_ERR_IO, "first %d", 1);
    int rc = hs_err_set(&e, HS_ERR_LIMIT, "second %d", 2);
    cr_assert_eq(rc, HS_ERR_LIMIT, "set returns its own code even when it records nothing");
    cr_assert_eq(e.code, HS_ERR_IO);
    cr_assert_str_eq(e.msg, "first 1");
    hs_err_clear(&e);
    hs_err_set(&e, HS_ERR_LIMIT, "third");
    cr_assert_eq(e.code, HS_ERR_LIMIT);
    cr_assert_str_eq(e.msg, "third");
}

Test(base_error, null_is_allowed_everywhere)
{
    cr_assert_eq(hs_err_set(NULL, HS_ERR_NOT_FOUND, "x %s", "y"), HS_ERR_NOT_FOUND);
    hs_err_prefix(NULL, "a: ");
    hs_err_clear(NULL);
}

Test(base_error, prefix_prepends_context)
{
    struct hs_err e;
    hs_err_clear(&e);
    hs_err_set(&e, HS_ERR_FORMAT, "key 'x': bad type");
    hs_err_prefix(&e, "%s: ", "config.json");
    cr_assert_str_eq(e.msg, "config.json: key 'x': bad type");
    hs_err_prefix(&e, "model %d: ", 3);
    cr_assert_str_eq(e.msg, "model 3: config.json: key 'x': bad type");
    cr_assert_eq(e.code, HS_ERR_FORMAT);
}

Test(base_error, prefix_without_error_is_noop)
{
    struct hs_err e;
    hs_err_clear(&e);
    hs_err_prefix(&e, "file: ");
    cr_assert_eq(e.code, HS_OK);
    cr_assert_str_empty(e.msg);
}

Test(base_error, long_messages_truncate_and_stay_terminated)
{
    char big[3000];
    memset(big, 'm', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    struct hs_err e;
    hs_err_clear(&e);
    hs_err_set(&e, HS_ERR_IO, "%s", big);
    cr_assert_eq(strlen(e.msg), HS_ERR_MSG_MAX - 1);
    hs_err_prefix(&e, "pre: ");
    cr_assert_eq(strlen(e.msg), HS_ERR_MSG_MAX - 1);
    cr_assert_eq(strncmp(e.msg, "pre: mmm", 8), 0);
    /* a prefix that alone fills the buffer leaves the message as it was */
    char copy[HS_ERR_MSG_MAX];
    memcpy(copy, e.msg, sizeof copy);
    hs_err_prefix(&e, "%s", big);
    cr_assert_str_eq(e.msg, copy);
}

Test(base_error, status_names)
{
    cr_assert_str_eq(hs_status_name(HS_OK), "ok");
    cr_assert_str_eq(hs_status_name(HS_ERR_IO), "io");
    cr_assert_str_eq(hs_status_name(HS_ERR_FORMAT), "format");
    cr_assert_str_eq(hs_status_name(HS_ERR_UNSUPPORTED), "unsupported");
    cr_assert_str_eq(hs_status_name(HS_ERR_INVALID), "invalid");
    cr_assert_str_eq(hs_status_name(HS_ERR_NOT_FOUND), "not-found");
    cr_assert_str_eq(hs_status_name(HS_ERR_NOMEM), "nomem");
    cr_assert_str_eq(hs_status_name(HS_ERR_LIMIT), "limit");
    cr_assert_str_eq(hs_status_name(-8), "unknown");
    cr_assert_str_eq(hs_status_name(1), "unknown");
    cr_assert_str_eq(hs_status_name(INT_MIN), "unknown");
    cr_assert_str_eq(hs_status_name(INT_MAX), "unknown");
}

Test(base_log, levels_parse_and_stick)
{
    cr_assert_eq(hs_log_level_parse("debug"), HS_LOG_DEBUG);
    cr_assert_eq(hs_log_level_parse("WARN"), HS_LOG_WARN);
    cr_assert_eq(hs_log_level_parse("none"), HS_LOG_NONE);
    cr_assert_eq(hs_log_level_parse("warning"), -1);
    cr_assert_eq(hs_log_level_parse(""), -1);
    enum hs_log_level old = hs_log_get_level();
    hs_log_set_level(HS_LOG_ERROR);
    cr_assert_eq(hs_log_get_level(), HS_LOG_ERROR);
    hs_log_set_level(old);
}
