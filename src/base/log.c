/* log.c — levelled logging to stderr, one line per call, with a wall-clock stamp: text
 * lines by default, or one JSON object per line (hs_log_set_format) for log collectors.
 * Every line goes out in one stdio call, so lines of concurrent threads never interleave. */
#include "base/base.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static enum hs_log_level g_level = HS_LOG_INFO;
static enum hs_log_format g_format = HS_LOG_FORMAT_TEXT;

void hs_log_set_format(enum hs_log_format f) { g_format = f; }
enum hs_log_format hs_log_get_format(void) { return g_format; }

void hs_log_set_level(enum hs_log_level level) { g_level = level; }
enum hs_log_level hs_log_get_level(void) { return g_level; }

static const char *const level_names[] = { "debug", "info", "warn", "error", "none" };

int hs_log_level_parse(const char *s)
{
    for (size_t i = 0; i < HS_ARRAY_LEN(level_names); i++)
        if (strcasecmp(s, level_names[i]) == 0) return (int)i;
    return -1;
}

static const char *level_name(enum hs_log_level level) { return level_names[level < HS_LOG_NONE ? level : 0]; }

/* {"time":"2026-12-01T20:38:48.123Z","level":"info", — the start of a JSON line. */
static void json_head(struct strbuf *out, enum hs_log_level level)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strbuf_printf(out, "{\"time\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ\",\"level\":\"%s\",", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, level_name(level));
}

/* "HH:MM:SS.mmm level " — the start of a text line. */
static int text_head(char *buf, size_t n, enum hs_log_level level)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    return snprintf(buf, n, "%02d:%02d:%02d.%03ld %-5s ", tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
                    level_name(level));
}

void hs_log_write(enum hs_log_level level, const char *fmt, ...)
{
    char line[2048];
    int n = g_format == HS_LOG_FORMAT_JSON ? 0 : text_head(line, sizeof line, level);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < sizeof line) vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    if (g_format != HS_LOG_FORMAT_JSON) {
        fprintf(stderr, "%s\n", line); /* one fprintf so concurrent lines do not interleave */
        return;
    }
    struct strbuf out;
    strbuf_init(&out);
    json_head(&out, level);
    struct jsonw w;
    jsonw_init(&w, &out, 0);
    jsonw_key(&w, "msg");
    jsonw_str(&w, line);
    strbuf_puts(&out, "}\n");
    fputs(out.buf, stderr);
    strbuf_free(&out);
}

void hs_log_record(enum hs_log_level level, const char *text, const char *json_fields)
{
    if (level < g_level) return;
    struct strbuf out;
    strbuf_init(&out);
    if (g_format == HS_LOG_FORMAT_JSON) {
        json_head(&out, level);
        strbuf_puts(&out, json_fields);
        strbuf_puts(&out, "}\n");
    } else {
        char head[48];
        int n = text_head(head, sizeof head, level);
        strbuf_append(&out, head, n > 0 ? (size_t)n : 0);
        strbuf_puts(&out, text);
        strbuf_puts(&out, "\n");
    }
    fputs(out.buf, stderr);
    strbuf_free(&out);
}
