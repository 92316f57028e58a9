/* log.c — levelled logging to stderr, one line per call, with a wall-clock stamp. */
#include "base/base.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static enum hs_log_level g_level = HS_LOG_INFO;

void hs_log_set_level(enum hs_log_level level) { g_level = level; }
enum hs_log_level hs_log_get_level(void) { return g_level; }

static const char *const level_names[] = { "debug", "info", "warn", "error", "none" };

int hs_log_level_parse(const char *s)
{
    for (size_t i = 0; i < HS_ARRAY_LEN(level_names); i++)
        if (strcasecmp(s, level_names[i]) == 0) return (int)i;
    return -1;
}

void hs_log_write(enum hs_log_level level, const char *fmt, ...)
{
    char line[2048];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof line, "%02d:%02d:%02d.%03ld %-5s ", tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, level_names[level < HS_LOG_NONE ? level : 0]);
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof line) vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line); /* one fprintf so concurrent lines do not interleave */
}
