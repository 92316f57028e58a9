/* bank_int.h — the bank's private structures, shared by tree.c, plan.c and retain.c.
 * Never included outside src/bank. */
#ifndef HS_BANK_INT_H
#define HS_BANK_INT_H
#include "bank/bank.h"

/* Why a lookup stopped short: BNODE_TAIL_TRIMMED is a sticky node flag (the node lost tail
 * tokens or a child to eviction); the SNAP bits name the causes of struct bank_dropped. */
enum {
    BNODE_SNAP_EVICTED = 1u << 0, /* a snapshot was evicted (budget) */
    BNODE_TAIL_TRIMMED = 1u << 1,
    BNODE_SNAP_THINNED = 1u << 2, /* a snapshot was thinned (cap) */
};

/* Positions [lo, hi] that enclose every snapshot ever dropped from a stretch, per cause
 * (0 = evicted, 1 = thinned); hi == 0 when none. Only used to explain lookups. */
struct bank_dropped {
    int64_t lo[2], hi[2];
};

struct bank_snap {
    int64_t pos;
    enum bank_snap_kind kind;
    int pins;
    uint64_t last_used;      /* bank clock at insert or last hit */
    uint8_t *bytes;          /* snapshot_bytes, owned */
    struct bank_node *node;  /* the node whose stretch holds token pos-1 */
    struct bank_snap *next;  /* next on the node, ascending pos */
};

struct bank_node {
    struct bank_node *parent;   /* NULL for the root */
    struct bank_node **kids;
    int n_kids, cap_kids;
    int64_t start;              /* position of ids[0] */
    int64_t len;                /* tokens on this stretch */
    int32_t *ids;               /* len, owned */
    uint8_t *kv;                /* len * kv_row_bytes, owned */
    struct bank_snap *snaps;    /* ascending pos, all in (start, start+len] */
    uint64_t last_used;
    unsigned flags;
    struct bank_dropped dropped;
    int64_t n_leaves;           /* scratch for eviction ranking */
};

struct bank_space {
    uint64_t fp;
    size_t kv_row_bytes;
    size_t snap_bytes;
    struct bank_node root;
};

struct bank {
    struct bank_opts opts;
    struct bank_space **spaces;
    int n_spaces;
    uint64_t clock;
    struct bank_stats st;       /* counters; sizes are maintained incrementally */
};

static inline int64_t bnode_end(const struct bank_node *nd) { return nd->start + nd->len; }

/* tree.c */
struct bank_space *bank_space_find(const struct bank *b, uint64_t fp);
/* Walk ids: returns L and the deepest snapshot with pos <= limit on the matched path
 * (limit < 0 means L). *stop_node (may be NULL) gets the node where matching stopped. */
int64_t bank_tree_match(const struct bank_space *sp, const int32_t *ids, int64_t n,
                        int64_t limit, struct bank_snap **best, struct bank_node **stop_node);
/* Free a snapshot; why_flag (BNODE_SNAP_EVICTED or _THINNED) is recorded on its node. */
void bank_snap_unlink_free(struct bank *b, struct bank_space *sp, struct bank_snap *s,
                           unsigned why_flag);
void bank_node_remove_leaf(struct bank *b, struct bank_space *sp, struct bank_node *nd);
void bank_node_truncate(struct bank *b, struct bank_space *sp, struct bank_node *nd,
                        int64_t new_len);
bool bank_snap_protected(const struct bank_snap *s);

/* retain.c */
/* Re-apply the per-path cap to every leaf under nd (nd itself if it is a leaf). */
void bank_retain_thin_under(struct bank *b, struct bank_space *sp, struct bank_node *nd);
/* Evict until total bytes <= target; returns bytes freed. */
uint64_t bank_retain_evict(struct bank *b, uint64_t target);

#endif
