/*
 * body.c — what a request body may cost before jansson builds a tree of it: one pass over
 * the raw bytes that counts JSON elements and nesting depth, outside strings, and refuses a
 * body over either limit before any allocation.
 *
 * Design note
 * -----------
 * jansson spends tens to hundreds of bytes of heap per value (a json_t, its array table
 * or hash buckets, malloc's overhead), so a body of `[]` or `{}` elements (3 bytes each)
 * grows 10-50x once parsed: 1.5 GB was measured for 32 MiB of `[]`. The scan bounds that
 * cost by the count of structural bytes,
 * which is cheap to take: every container starts with `[` or `{`, and every element after a
 * container's first follows a `,`, so `containers + commas` is within one per container of
 * the number of values and object members jansson makes. A string is skipped as a unit
 * (`\` escapes the next byte), so text inside strings is never counted.
 *
 * Invariants:
 *   1. Reads only buf[0, len); any bytes (NUL, invalid UTF-8, unbalanced brackets) are
 *      scanned without error: the scan judges cost, jansson judges syntax afterwards.
 *   2. Refuses at the first byte that crosses a limit, naming the limit and the byte.
 */
#include "api/api.h"

int api_body_prescan(const char *buf, size_t len, int64_t max_elements, int max_depth, struct hs_err *err)
{
    int64_t elements = 0;
    int depth = 0;
    bool in_str = false;
    for (size_t i = 0; i < len; i++) {
        char ch = buf[i];
        if (in_str) {
            if (ch == '\\') i++;
            else if (ch == '"') in_str = false;
            continue;
        }
        switch (ch) {
        case '"': in_str = true; break;
        case '[': case '{': case ',': /* a container is an element too */
            if (ch != ',' && ++depth > max_depth)
                return hs_err_set(err, HS_ERR_LIMIT, "the request body nests JSON deeper than %d levels (byte %zu)",
                                  max_depth, i);
            if (++elements > max_elements)
                return hs_err_set(err, HS_ERR_LIMIT, "the request body has more than %lld JSON elements (byte %zu)",
                                  (long long)max_elements, i);
            break;
        case ']': case '}':
            if (depth > 0) depth--;
            break;
        default: break;
        }
    }
    return HS_OK;
}
