/*
 * base — the bottom of headstart: error values, logging, allocation, growable strings,
 * a small JSON writer, the UTF-8 rule for emitted text, and float16/bfloat16 conversions. Depends on libc only.
 *
 * Design note
 * -----------
 * Errors.  A fallible function returns an `int` status (HS_OK == 0, a negative
 * `enum hs_status` otherwise) and, when the caller passes a `struct hs_err *`, fills
 * it with a message that names the file, the field and the reason, e.g.
 *     "model.gguf: tensor 'blk.0.attn_q.weight': data ends at 4096, past the file end 1024"
 * The first error set on a `struct hs_err` wins (sticky): later calls to hs_err_set on
 * the same value keep the first message, so a deep reader can fail and its callers can
 * add nothing but context with hs_err_prefix.
 *
 * Invariants:
 *   1. `hs_err_set` always returns its (negative) code, so `return hs_err_set(...)` reads
 *      naturally; passing a NULL `struct hs_err *` is allowed everywhere.
 *   2. Allocation through hs_malloc/hs_calloc/hs_realloc aborts on out-of-memory with a
 *      message: ordinary call sites never check for NULL. Overflowing size products are
 *      caught (hs_mul_overflow) before allocating.
 *   3. Logging checks the level before formatting; log lines go to stderr, one per call.
 *   4. Nothing here allocates behind the caller's back except strbuf/jsonw, whose
 *      memory the caller frees with strbuf_free.
 */
#ifndef HS_BASE_H
#define HS_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- errors ------------------------------------------------------------------------ */

enum hs_status {
    HS_OK = 0,
    HS_ERR_IO = -1,          /* an operating-system call failed (errno in the message) */
    HS_ERR_FORMAT = -2,      /* a file or request is malformed */
    HS_ERR_UNSUPPORTED = -3, /* well-formed, but something we do not handle (a dtype, ...) */
    HS_ERR_INVALID = -4,     /* a bad argument or option from the user */
    HS_ERR_NOT_FOUND = -5,   /* a named thing (key, tensor, file) is absent */
    HS_ERR_NOMEM = -6,       /* an allocation the caller asked to be fallible failed */
    HS_ERR_LIMIT = -7,       /* a size or count exceeds a configured or sane limit */
};

#define HS_ERR_MSG_MAX 1024

struct hs_err {
    int code;                  /* HS_OK, or the first error's code */
    char msg[HS_ERR_MSG_MAX];  /* NUL-terminated; empty when code == HS_OK */
};

/* Clear an error value for reuse. */
void hs_err_clear(struct hs_err *e);
/* Record the first error (printf-style message) and return `code`. e may be NULL. */
int hs_err_set(struct hs_err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int hs_err_vset(struct hs_err *e, int code, const char *fmt, va_list ap);
/* Prepend context ("file.gguf: ") to an error already set; no-op when none is set. */
void hs_err_prefix(struct hs_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Short name of a status ("io", "format", ...). */
const char *hs_status_name(int code);

/* ---- logging ----------------------------------------------------------------------- */

enum hs_log_level { HS_LOG_DEBUG = 0, HS_LOG_INFO, HS_LOG_WARN, HS_LOG_ERROR, HS_LOG_NONE };

void hs_log_set_level(enum hs_log_level level);
enum hs_log_level hs_log_get_level(void);
/* Parse "debug|info|warn|error|none"; returns -1 for anything else. */
int hs_log_level_parse(const char *s);
void hs_log_write(enum hs_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Text lines ("HH:MM:SS.mmm level message", the default) or one JSON object a line
 * ({"time": ISO 8601 UTC with ms, "level", "msg"}) for log collectors. */
enum hs_log_format { HS_LOG_FORMAT_TEXT = 0, HS_LOG_FORMAT_JSON };
void hs_log_set_format(enum hs_log_format f);
enum hs_log_format hs_log_get_format(void);
/* A record with fields: text mode prints `text` as a message; JSON mode prints
 * {"time", "level", then json_fields: the members of an object, without its braces}.
 * Neither is cut (hs_log_write cuts a message at 2 KiB). Written with one fputs. */
void hs_log_record(enum hs_log_level level, const char *text, const char *json_fields);

#define hs_log(level, ...) \
    do { if ((level) >= hs_log_get_level()) hs_log_write((level), __VA_ARGS__); } while (0)
#define log_debug(...) hs_log(HS_LOG_DEBUG, __VA_ARGS__)
#define log_info(...)  hs_log(HS_LOG_INFO, __VA_ARGS__)
#define log_warn(...)  hs_log(HS_LOG_WARN, __VA_ARGS__)
#define log_error(...) hs_log(HS_LOG_ERROR, __VA_ARGS__)

/* ---- allocation -------------------------------------------------------------------- */

void *hs_malloc(size_t n);             /* aborts on OOM; hs_malloc(0) returns a valid pointer */
void *hs_calloc(size_t n, size_t size); /* aborts on OOM or overflow */
void *hs_realloc(void *p, size_t n);
void *hs_aligned_alloc(size_t align, size_t n); /* free with hs_free; align a power of two */
/* For a large block read over and over: 2 MiB-aligned from 2 MiB up and advised as huge
 * pages (alloc.c); free with hs_free. */
void *hs_huge_alloc(size_t n);
char *hs_strdup(const char *s);
char *hs_strndup(const char *s, size_t n);
void hs_free(void *p);                 /* hs_free(NULL) is a no-op */
/* true when a*b overflows uint64; otherwise *out = a*b. */
bool hs_mul_overflow(uint64_t a, uint64_t b, uint64_t *out);
bool hs_add_overflow(uint64_t a, uint64_t b, uint64_t *out);

/* ---- growable strings -------------------------------------------------------------- */

struct strbuf {
    char *buf;   /* NUL-terminated while len > 0 or after any append; owned */
    size_t len;
    size_t cap;
};

void strbuf_init(struct strbuf *sb);
void strbuf_free(struct strbuf *sb);
void strbuf_reset(struct strbuf *sb); /* len = 0, keeps memory */
void strbuf_append(struct strbuf *sb, const void *data, size_t n);
void strbuf_puts(struct strbuf *sb, const char *s);
void strbuf_putc(struct strbuf *sb, char c);
void strbuf_printf(struct strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hand the buffer to the caller (free with hs_free); sb is left empty. */
char *strbuf_detach(struct strbuf *sb, size_t *len_out);

/* ---- UTF-8 (utf8.c) ------------------------------------------------------------------ */
/* The one rule for text headstart emits (JSON files and lines, HTTP bodies): strict UTF-8,
 * and every byte that is not part of a valid sequence becomes U+FFFD. */

#define HS_UTF8_REPLACEMENT "\xEF\xBF\xBD" /* U+FFFD */
/* Length of the valid sequence at s[0..n) (1..4) with its code point in *cp (may be NULL),
 * 0 when none starts there (overlong forms, surrogates, code points past U+10FFFF and
 * truncated sequences are invalid). *partial (may be NULL) is set when the bytes are a
 * proper prefix of a valid sequence that n cut short. */
size_t hs_utf8_decode(const void *s, size_t n, uint32_t *cp, bool *partial);
/* hs_utf8_decode without the code point. */
size_t hs_utf8_seq_len(const void *s, size_t n);
/* Bytes at the end of s[0..n) that begin a valid sequence the text has not completed yet
 * (0..3): what a stream holds back until the next piece arrives. */
size_t hs_utf8_open_tail(const void *s, size_t n);
bool hs_utf8_valid(const void *s, size_t n);
/* Append s[0..n) with each byte outside a valid sequence replaced by U+FFFD. */
void hs_utf8_clean_append(struct strbuf *out, const void *s, size_t n);

/* ---- hashes (hash.c) ------------------------------------------------------------------ */
/* FNV-1a (Fowler/Noll/Vo), byte at a time: small keys for hash tables and stable derived
 * ids. Not a checksum: files carry XXH3 or SHA-256 (bank, model identity). */

#define HS_FNV1A64_INIT 0xcbf29ce484222325ull
#define HS_FNV1A32_INIT 2166136261u
/* Continue a 64-bit FNV-1a hash h over p[0..n); start with HS_FNV1A64_INIT. */
uint64_t hs_fnv1a64(uint64_t h, const void *p, size_t n);
/* The 64-bit FNV-1a hash of a NUL-terminated string. */
uint64_t hs_fnv1a64_str(const char *s);
/* Continue a 32-bit FNV-1a hash h over p[0..n); start with HS_FNV1A32_INIT. */
uint32_t hs_fnv1a32(uint32_t h, const void *p, size_t n);

/* ---- JSON writer ------------------------------------------------------------------- */
/* Writes compact or indented JSON into a strbuf; the caller drives structure and commas
 * are inserted automatically. For emitting files (config.json, tokenizer.json); parsing
 * is jansson's job in the modules allowed to use it. */

struct jsonw {
    struct strbuf *out;   /* borrowed */
    int depth;
    int indent;           /* spaces per level; 0 = compact */
    bool need_comma[64];
    bool after_key;
};

void jsonw_init(struct jsonw *w, struct strbuf *out, int indent);
void jsonw_obj_begin(struct jsonw *w);
void jsonw_obj_end(struct jsonw *w);
void jsonw_arr_begin(struct jsonw *w);
void jsonw_arr_end(struct jsonw *w);
void jsonw_key(struct jsonw *w, const char *key);
void jsonw_str(struct jsonw *w, const char *s);
void jsonw_strn(struct jsonw *w, const char *s, size_t n);
void jsonw_int(struct jsonw *w, int64_t v);
void jsonw_uint(struct jsonw *w, uint64_t v);
void jsonw_double(struct jsonw *w, double v); /* shortest text that reads back the same */
void jsonw_bool(struct jsonw *w, bool v);
void jsonw_null(struct jsonw *w);
/* Append s as a JSON string literal (quotes included), escaping as JSON requires; text
 * that is not valid UTF-8 is repaired by the rule above (hs_utf8_clean_append), so the
 * output is always valid JSON (RFC 8259 wants UTF-8). */
void json_escape_append(struct strbuf *sb, const char *s, size_t n);

/* ---- float formats ----------------------------------------------------------------- */

float hs_f16_to_f32(uint16_t h);
uint16_t hs_f32_to_f16(float f);   /* round to nearest even; overflow -> inf; NaN kept */
float hs_bf16_to_f32(uint16_t h);
uint16_t hs_f32_to_bf16(float f);  /* round to nearest even; NaN kept quiet */

/* ---- small helpers ----------------------------------------------------------------- */

#define HS_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define HS_MIN(a, b) ((a) < (b) ? (a) : (b))
#define HS_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Parse a byte size like "512M", "8G", "1.5GiB", "4096"; returns -1 on error. */
int64_t hs_parse_size(const char *s);
/* Format bytes as "1.50 GiB" into buf; returns buf. */
const char *hs_format_size(uint64_t bytes, char *buf, size_t buf_len);
/* Little-endian loads/stores that do not care about alignment. */
static inline uint16_t hs_rd_u16(const void *p) { const uint8_t *b = p; return (uint16_t)(b[0] | b[1] << 8); }
static inline uint32_t hs_rd_u32(const void *p) { const uint8_t *b = p; return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24; }
static inline uint64_t hs_rd_u64(const void *p) { const uint8_t *b = p; return (uint64_t)hs_rd_u32(b) | (uint64_t)hs_rd_u32(b + 4) << 32; }

#endif
