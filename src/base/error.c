/* error.c — sticky error values with messages that name the file, field and reason. */
#include "base/base.h"

#include <stdio.h>
#include <string.h>

void hs_err_clear(struct hs_err *e)
{
    if (!e) return;
    e->code = HS_OK;
    e->msg[0] = '\0';
}

int hs_err_vset(struct hs_err *e, int code, const char *fmt, va_list ap)
{
    if (!e || e->code != HS_OK) return code; /* the first error wins */
    e->code = code;
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    return code;
}

int hs_err_set(struct hs_err *e, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    hs_err_vset(e, code, fmt, ap);
    va_end(ap);
    return code;
}

void hs_err_prefix(struct hs_err *e, const char *fmt, ...)
{
    if (!e || e->code == HS_OK) return;
    char head[HS_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    if (n <= 0) return;
    size_t hl = strlen(head), ml = strlen(e->msg);
    if (hl >= sizeof e->msg - 1) return;
    if (hl + ml >= sizeof e->msg) ml = sizeof e->msg - 1 - hl;
    memmove(e->msg + hl, e->msg, ml);
    memcpy(e->msg, head, hl);
    e->msg[hl + ml] = '\0';
}

static const char *const status_names[] = {
    [0] = "ok", [1] = "io", [2] = "format", [3] = "unsupported",
    [4] = "invalid", [5] = "not-found", [6] = "nomem", [7] = "limit",
};

const char *hs_status_name(int code)
{
    /* range-check before negating: -INT_MIN overflows */
    if (code > 0 || code <= -(int)HS_ARRAY_LEN(status_names)) return "unknown";
    return status_names[-code];
}
