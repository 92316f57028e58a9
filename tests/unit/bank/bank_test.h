/* bank_test.h — helpers shared by the bank's unit tests: deterministic KV and snapshot
 * bytes derived from (position, token) and from the token prefix, so any mix-up of rows,
 * positions or paths changes the bytes. */
#ifndef HS_BANK_TEST_H
#define HS_BANK_TEST_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "bank/bank.h"

/* The tree's invariants hold (bank_check); called after every insert and eviction. */
static inline void bt_check(const struct bank *b)
{
    struct hs_err err;
    hs_err_clear(&err);
    int rc = bank_check(b, &err);
    cr_assert_eq(rc, HS_OK, "%s", err.msg);
}

/* bank_shrink_to, then bank_check. */
static inline uint64_t bt_shrink_to(struct bank *b, uint64_t target)
{
    uint64_t freed = bank_shrink_to(b, target);
    bt_check(b);
    return freed;
}

static inline uint64_t bt_mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

/* Byte j of the KV row of token tok at position pos. */
static inline uint8_t bt_kv_byte(int64_t pos, int32_t tok, size_t j)
{
    return (uint8_t)bt_mix((uint64_t)pos * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uint32_t)tok << 20 ^
                           (uint64_t)j * 0x632be59bd9b4e019ull);
}

/* Rows [from, n) of ids into a fresh buffer (row bytes each). */
static inline uint8_t *bt_kv_rows(const int32_t *ids, int64_t from, int64_t n, size_t row)
{
    uint8_t *kv = calloc((size_t)(n - from) * row + 1, 1);
    for (int64_t p = from; p < n; p++)
        for (size_t j = 0; j < row; j++)
            kv[(size_t)(p - from) * row + j] = bt_kv_byte(p, ids[p], j);
    return kv;
}

/* Hash of the prefix ids[0, pos) mixed with a salt (the fingerprint). */
static inline uint64_t bt_prefix_hash(const int32_t *ids, int64_t pos, uint64_t salt)
{
    uint64_t h = salt ^ 0x1234567ull;
    for (int64_t i = 0; i < pos; i++)
        h = bt_mix(h ^ (uint64_t)(uint32_t)ids[i] ^ (uint64_t)i << 32);
    return h;
}

/* The snapshot after pos tokens of ids: bytes derived from the prefix and pos. */
static inline void bt_snap_fill(uint8_t *dst, size_t len, const int32_t *ids, int64_t pos,
                                uint64_t salt)
{
    uint64_t h = bt_prefix_hash(ids, pos, salt) ^ (uint64_t)pos;
    for (size_t j = 0; j < len; j++) {
        if (j % 8 == 0)
            h = bt_mix(h + j);
        dst[j] = (uint8_t)(h >> (8 * (j % 8)));
    }
}

/* Check a hit against the expected bytes: KV rows [0, s) and the snapshot. Returns 0 when
 * equal, 1 for a KV mismatch, 2 for a snapshot mismatch. */
static inline int bt_check_hit(const struct bank *b, const struct bank_hit *hit,
                               const int32_t *ids, size_t row, size_t snap_len, uint64_t salt)
{
    int64_t s = hit->restore_pos;
    uint8_t *kv = calloc((size_t)s * row + 1, 1);
    bank_copy_kv(b, hit, kv);
    uint8_t *want = bt_kv_rows(ids, 0, s, row);
    int bad = memcmp(kv, want, (size_t)s * row) ? 1 : 0;
    free(kv);
    free(want);
    if (!bad) {
        uint8_t *sn = calloc(snap_len, 1), *sw = calloc(snap_len, 1);
        bank_copy_snapshot(b, hit, sn);
        bt_snap_fill(sw, snap_len, ids, s, salt);
        bad = memcmp(sn, sw, snap_len) || memcmp(hit->snapshot, sw, snap_len) ? 2 : 0;
        free(sn);
        free(sw);
    }
    return bad;
}

/* Insert ids[0, n) with snapshots at pos[0, n_pos) of the given kinds (kinds NULL = all
 * GRID); KV rows from the tree's current match length. */
static inline int bt_insert(struct bank *b, uint64_t fp, const int32_t *ids, int64_t n,
                            const int64_t *pos, const enum bank_snap_kind *kinds, int n_pos,
                            size_t row, size_t snap_len, uint64_t salt)
{
    int64_t from = bank_match_len(b, fp, ids, n);
    uint8_t *kv = bt_kv_rows(ids, from, n, row);
    struct bank_snap_in *sn = calloc((size_t)n_pos + 1, sizeof *sn);
    uint8_t *bytes = malloc((size_t)n_pos * snap_len + 1);
    for (int i = 0; i < n_pos; i++) {
        bt_snap_fill(bytes + (size_t)i * snap_len, snap_len, ids, pos[i], salt);
        sn[i].pos = pos[i];
        sn[i].kind = kinds ? kinds[i] : BANK_SNAP_GRID;
        sn[i].bytes = bytes + (size_t)i * snap_len;
    }
    struct hs_err err;
    hs_err_clear(&err);
    int rc = bank_insert(b, fp, ids, n, from, kv, sn, n_pos, &err);
    bt_check(b);
    free(kv);
    free(sn);
    free(bytes);
    return rc;
}

static inline uint64_t bt_total(const struct bank *b)
{
    struct bank_stats st;
    bank_stats_get(b, &st);
    return st.total_bytes;
}

#endif
