/* head.c — where the head of a prompt ends, from token ids alone (docs/DESIGN.md §5).
 *
 * The head is the opening run of system turns (system text + tools in the Qwen
 * templates): it ends at the first `im_start` that does not open a system turn. Working
 * on ids rather than text means the answer is exactly a token boundary the bank can
 * anchor a snapshot at.
 *
 * Invariants:
 *   1. The result r is 0 or satisfies 0 < r < n and ids[r] == im_start_id.
 *   2. 0 when im_start_id < 0 (no ChatML turn token), system_ids is empty, the prompt does
 *      not open with im_start + system_ids, or no non-system turn follows.
 *   3. An im_start too close to the end to hold system_ids opens a non-system turn.
 */
#include "api/api.h"

#include <string.h>

/* true when ids[at] is im_start followed by all of system_ids. */
static bool opens_system(const int32_t *ids, int64_t n, int64_t at, const int32_t *system_ids,
                         int n_system)
{
    if (n - at - 1 < n_system) return false;
    return memcmp(ids + at + 1, system_ids, (size_t)n_system * sizeof *ids) == 0;
}

int64_t chat_head_length(const int32_t *ids, int64_t n, int32_t im_start_id,
                         const int32_t *system_ids, int n_system)
{
    if (!ids || im_start_id < 0 || !system_ids || n_system <= 0 || n < 1) return 0;
    if (ids[0] != im_start_id || !opens_system(ids, n, 0, system_ids, n_system)) return 0;
    for (int64_t i = 1 + n_system; i < n; i++) {
        if (ids[i] != im_start_id) continue;
        if (!opens_system(ids, n, i, system_ids, n_system)) return i;
        i += n_system;
    }
    return 0;
}
