/*
 * bank — the session bank: a prefix tree over token ids holding attention KV stretches
 * and GDN snapshots at exact positions, snapshot planning (head anchor, last user turn,
 * generation prompt, divergence point, grid), thinning, a RAM budget, and the disk tier
 * (SQLite index + checksummed content-addressed blobs). Depends on base and sys; never on
 * engine: the scheduler moves opaque state blobs between the two.
 *
 * Design note (contract; docs/DESIGN.md §5):
 *   1. Restore copies: bank memory is never aliased writable by a live sequence.
 *   2. The model identity and numerics fingerprint are part of every key: state made by
 *      another model or kernel variant is never restored.
 *   3. A blob that fails verification (checksum, identity, token prefix) is discarded
 *      and counted, never restored.
 *
 * The in-RAM core (tree.c, plan.c, retain.c; check.c tests its invariants, stats.c
 * exports the numbers of both tiers; the disk tier: disk.c and its layers)
 * ---------------------------------------------------------------------------------
 * A bank holds independent key spaces, one per 64-bit fingerprint (model identity +
 * numerics, computed by the caller). Each space declares kv_row_bytes (attention KV of
 * one token, all layers) and snapshot_bytes (one GDN snapshot, all layers). Nothing is
 * ever found across fingerprints.
 *
 * Per space, a radix tree with compressed edges over int32 token ids. A node's edge is a
 * stretch of tokens [start, start+len) with their KV rows stored contiguously
 * (len * kv_row_bytes). A snapshot at position p (1 <= p) is the GDN state after exactly
 * p tokens; it hangs on the node whose stretch holds token p-1 (start < p <= start+len).
 * Shared prefixes are stored once; inserting a path that leaves an edge splits it
 * (tokens, KV and snapshots split with it).
 *
 * Lookup(ids, n): L = longest common prefix with the tree; s = deepest snapshot with
 * s <= min(L, n-1) (so at least one token is computed for fresh logits). The caller gets
 * a pinned read-only handle, copies the snapshot and KV rows [0, s) out, and releases it.
 *
 * Invariants:
 *   1. Every token in the tree has its KV row: a node stores exactly len rows.
 *   2. A snapshot at p has KV rows [0, p) present (follows from 1: it lies on its node's
 *      stretch, all ancestors are complete). Eviction keeps this by removing KV only at
 *      leaf tails, beyond the deepest snapshot of the leaf ("dead KV"), never in the middle
 *      of a path; removing a snapshot never removes KV that a deeper snapshot needs.
 *   3. Children of a node start with pairwise different tokens; no node except the root
 *      has len 0; the root holds no tokens and no snapshots.
 *   4. A pinned snapshot (pins > 0) is never freed by thinning or eviction, and so is
 *      nothing on its path (by 2). Its bytes are const to everyone; callers copy them.
 *   5. After every insert and every eviction round, each root-to-leaf path carries at
 *      most `snap_cap` ordinary unpinned snapshots (retain.c states the rule). Head
 *      anchors and snapshots at branch points (end of a node with >= 2 children) are
 *      protected from thinning and do not count.
 *   6. After bank_insert returns, total bytes <= the RAM budget unless every remaining
 *      byte is needed by a pinned snapshot.
 *   7. Single-threaded: one thread uses a bank at a time (the scheduler's). Pins are
 *      refcounts, not locks; they exist so that an insert or an eviction between lookup
 *      and copy-out cannot free what a hit points at.
 *
 * Lifecycle of a snapshot (an "entry"):
 *
 *        bank_insert               bank_lookup (pins++)
 *   (none) ──────────▶ RESIDENT ◀──────────────────────▶ PINNED
 *                       │  ▲  │        bank_hit_release (pins--)
 *       touched by a hit│  │  │ thinning (ordinary, over the cap, unpinned)
 *       or a re-insert ─┘  │  │ or eviction (budget; unpinned; LRU, least shared)
 *                          │  ▼
 *                        FREED ── its dead KV tail (no deeper snapshot on the leaf)
 *                                 is trimmed with it; the tokens leave the tree
 *
 * Lifecycle of a KV stretch: inserted with its path → shared by every path through it
 * → split when a path diverges inside it → trimmed from a leaf's tail when no snapshot
 * at or below needs it (first under budget pressure, before any snapshot).
 *
 * Byte accounting (the budget): KV rows + snapshot bytes + 4 bytes per stored token id.
 *
 * Reporting: every lookup returns L, s, the restored snapshot's kind and why it stopped
 * (enum bank_reason, checked in this order): FULL (s = n-1), EVICTED (the budget dropped
 * a snapshot in (s, min(L, n-1)] or trimmed the KV where the match ended), THINNED (the
 * cap dropped one there), DIVERGED (s = L < n-1: the prompt leaves the tree at a
 * snapshot), NO_MATCH (L = 0), NO_SNAPSHOT (nothing deeper was ever banked). EVICTED and
 * THINNED come from per-node ranges of dropped positions, so they mean "may have".
 *
 * Cost: lookup and insert walk one path (O(path nodes + children scanned + tokens
 * compared)); thinning walks the paths under the shallowest new snapshot; each eviction
 * step scans the whole tree (fine for thousands of nodes; an LRU heap can replace the scan
 * when banks grow past that).
 */
#ifndef HS_BANK_H
#define HS_BANK_H
#include "base/base.h"

/* Snapshot kinds, in priority order: when two plans put a snapshot at the same position,
 * the lower value wins the tag. Only BANK_SNAP_HEAD is protected by kind. */
enum bank_snap_kind {
    BANK_SNAP_HEAD = 0,   /* end of the prompt head (system + tools) */
    BANK_SNAP_USER,       /* start of the last user turn */
    BANK_SNAP_GENPROMPT,  /* start of the generation prompt (last <|im_start|>) */
    BANK_SNAP_DIVERGE,    /* where the prompt leaves the tree */
    BANK_SNAP_GRID,       /* every grid_tokens in long prompts */
    BANK_SNAP_END,        /* end of prompt + generated text */
    BANK_SNAP_KIND_COUNT
};

/* Why a lookup stopped where it did. */
enum bank_reason {
    BANK_REASON_FULL = 0,     /* hit at n-1: everything but the last token restored */
    BANK_REASON_DIVERGED,     /* hit exactly at the divergence point L < n */
    BANK_REASON_NO_SNAPSHOT,  /* no snapshot in (s, min(L, n-1)]: stopped below */
    BANK_REASON_EVICTED,      /* the budget dropped a snapshot or KV that went deeper */
    BANK_REASON_THINNED,      /* the per-path cap dropped a snapshot that went deeper */
    BANK_REASON_NO_MATCH,     /* L == 0: nothing shared */
    BANK_REASON_NO_SPACE,     /* fingerprint unknown: nothing of this model is banked */
    BANK_REASON_COUNT
};

enum bank_evict_reason {
    BANK_EVICT_DEAD_KV = 0,   /* KV rows beyond a leaf's deepest snapshot (budget) */
    BANK_EVICT_SNAP,          /* ordinary snapshot, LRU (budget) */
    BANK_EVICT_PROTECTED,     /* head anchor / branch point, only when nothing else is left */
    BANK_EVICT_THIN,          /* thinned to the per-path cap */
    BANK_EVICT_COUNT
};

#define BANK_DEFAULT_SNAP_CAP 8
#define BANK_DEFAULT_MIN_HEAD 256   /* tokens; a shorter head is cheaper to recompute */
#define BANK_DEFAULT_GRID 4096      /* tokens between grid snapshots in long prompts */

struct bank_opts {
    uint64_t ram_budget;   /* bytes; 0 = unlimited */
    int snap_cap;          /* ordinary snapshots per root-to-leaf path, >= 2 */
    int64_t min_head;      /* a head shorter than this gets no anchor */
    int64_t grid;          /* grid spacing in tokens; 0 = no grid */
    bool head_anchor;      /* false = --no-head-anchor */
};

struct bank_stats {
    uint64_t n_spaces, n_nodes, n_tokens, n_snaps;
    uint64_t snaps_by_kind[BANK_SNAP_KIND_COUNT];
    uint64_t kv_bytes, snap_bytes, token_bytes, total_bytes, budget;
    uint64_t lookups, hits, restored_tokens;
    uint64_t misses[BANK_REASON_COUNT];   /* indexed by the reason of a lookup with s == 0 */
    uint64_t stops[BANK_REASON_COUNT];    /* reason of every lookup, hit or miss */
    uint64_t evictions[BANK_EVICT_COUNT]; /* events (a KV trim or one snapshot) */
    uint64_t evicted_bytes[BANK_EVICT_COUNT];
    uint64_t inserts, inserted_tokens, inserted_snaps;
};

struct bank;
struct bank_snap; /* private (bank_int.h) */

/* The result of a lookup. On a hit (restore_pos > 0) the snapshot is pinned until
 * bank_hit_release; `snapshot` points at bank memory that the caller must only read
 * (copy it with bank_copy_snapshot). */
struct bank_hit {
    int64_t n_prompt;        /* n given to lookup */
    int64_t match_len;       /* L: longest common prefix with the tree */
    int64_t restore_pos;     /* s: 0 = miss */
    enum bank_reason reason;
    enum bank_snap_kind kind;/* the restored snapshot's kind (hits only) */
    const void *snapshot;    /* borrowed, read-only, valid while pinned; NULL on a miss */
    size_t snapshot_len;
    size_t kv_row_bytes;
    struct bank_snap *snap_; /* private */
};

/* A snapshot handed to bank_insert: bytes are copied (snapshot_bytes of the space). */
struct bank_snap_in {
    int64_t pos;             /* 1 <= pos <= n */
    enum bank_snap_kind kind;
    const void *bytes;
};

/* A planned capture position. */
struct bank_plan_pos {
    int64_t pos;
    enum bank_snap_kind kind;
};

/* What the planner needs to know about a prompt. */
struct bank_plan_in {
    const int32_t *ids;
    int64_t n;
    int64_t head_len;        /* from the api's head detection; 0 = none */
    int64_t user_start;      /* start of the last user turn; -1 = unknown */
    int64_t genprompt_start; /* start of the generation prompt; -1 = unknown */
};

#define BANK_PLAN_MAX 64 /* enough for the fixed kinds plus a grid over 240k tokens */

void bank_opts_default(struct bank_opts *o);
/* A new bank; opts NULL = defaults. Free with bank_free (all hits released first). */
struct bank *bank_init(const struct bank_opts *opts);
void bank_free(struct bank *b);

/* Declare a key space. Re-declaring the same fingerprint with the same sizes is a no-op;
 * with different sizes it is HS_ERR_INVALID. */
int bank_space_add(struct bank *b, uint64_t fp, size_t kv_row_bytes, size_t snapshot_bytes,
                   struct hs_err *err);

/* Longest common prefix of ids[0, n) with the tree of fp (0 if fp unknown). */
int64_t bank_match_len(const struct bank *b, uint64_t fp, const int32_t *ids, int64_t n);

/* Look a prompt up. Always fills *hit (a miss has restore_pos 0 and nothing pinned);
 * counts stats. On a hit the caller must call bank_hit_release exactly once. */
void bank_lookup(struct bank *b, uint64_t fp, const int32_t *ids, int64_t n,
                 struct bank_hit *hit);
/* Copy KV rows [0, restore_pos) into dst (restore_pos * kv_row_bytes bytes). */
void bank_copy_kv(const struct bank *b, const struct bank_hit *hit, void *dst);
/* Copy the snapshot bytes into dst (snapshot_len bytes). */
void bank_copy_snapshot(const struct bank *b, const struct bank_hit *hit, void *dst);
/* Unpin; no-op for a miss or a hit already released. */
void bank_hit_release(struct bank *b, struct bank_hit *hit);

/* Insert after a request: the full path ids[0, n) (prompt + generated), KV rows
 * [kv_from, n) in kv_rows (borrowed; the bank copies what it lacks), and snapshots
 * (copied). kv_from must be <= the tree's current match length for ids (the tree must
 * already hold rows [0, kv_from)). A snapshot at a position already banked only
 * refreshes it (and upgrades it to HEAD when so tagged). Then thins and enforces the
 * budget. Errors: unknown fingerprint (HS_ERR_NOT_FOUND), bad positions or a KV gap
 * (HS_ERR_INVALID); on error nothing changes. */
int bank_insert(struct bank *b, uint64_t fp, const int32_t *ids, int64_t n, int64_t kv_from,
                const void *kv_rows, const struct bank_snap_in *snaps, int n_snaps,
                struct hs_err *err);

/* Plan capture positions for a prefill of in->ids (plan.c states the rule). b may be NULL
 * (no tree: restore point 0, no divergence). Writes up to BANK_PLAN_MAX positions, sorted
 * and unique, into out and returns their count; *restore_pos_out (may be NULL) gets the
 * restore point the plan assumes. opts NULL = the bank's (or default) options. */
int bank_plan(const struct bank *b, uint64_t fp, const struct bank_opts *opts,
              const struct bank_plan_in *in, struct bank_plan_pos *out,
              int64_t *restore_pos_out);

/* Evict until total bytes <= target (never pinned state). Returns bytes freed. */
uint64_t bank_shrink_to(struct bank *b, uint64_t target);
void bank_set_budget(struct bank *b, uint64_t ram_budget);

void bank_stats_get(const struct bank *b, struct bank_stats *out);
/* Walk every tree and test the invariants above (check.c lists them): HS_OK, or
 * HS_ERR_INVALID with err naming the invariant and where it broke. Reads only; O(size).
 * For tests and debugging (tests call it after every insert and eviction). */
int bank_check(const struct bank *b, struct hs_err *err);
const char *bank_snap_kind_name(enum bank_snap_kind k);
const char *bank_reason_name(enum bank_reason r);
const char *bank_evict_reason_name(enum bank_evict_reason r);

/* The thinning rule on a sorted list of positions (retain.c): marks keep[i] for the
 * positions kept under cap. Exposed for tests and for the disk tier. */
void bank_thin_positions(const int64_t *pos, int n, int cap, bool *keep);

/* ---- the disk tier (disk.c states its invariants and layers; blob.c the format) ---- */

struct bank_disk;

/* How a handle shares its directory with other processes (disk.c, invariant 8). */
enum bank_disk_access {
    BANK_DISK_WRITER = 0,       /* take DIR/lock exclusively; the open fails, naming the
                                 * holder's pid, when another handle has it */
    BANK_DISK_READER,           /* no lock: read the index and blobs, never write, delete or
                                 * reconcile anything (SQLite may leave its -wal/-shm) */
    BANK_DISK_WRITER_OR_READER, /* the writer when the lock is free, else a reader (stats say
                                 * so and name the holder) */
};

struct bank_disk_opts {
    uint64_t cap_bytes;        /* the whole blob store (index rows' bytes); 0 = unlimited */
    uint64_t free_floor_bytes; /* below this much free disk nothing is written; 0 = none */
    int queue_len;             /* pending writes, >= 1 */
    uint64_t queue_bytes;      /* pending bytes; 0 = unlimited (a lone write is always taken) */
    bool writer_low_priority;  /* writer thread at nice 19 + idle I/O class (default true) */
    enum bank_disk_access access; /* default BANK_DISK_WRITER */
    bool take_over;            /* a reader of WRITER_OR_READER tries the lock every retry_ms
                                * and becomes the writer once it is free */
    uint32_t retry_ms;         /* after an I/O error the tier retries in retry_ms, doubling
                                * up to 60 s, and re-enables itself; 0 = 1000 */
};

/* What bank_disk_put did with a write (the queue decides later whether it is written). */
enum bank_disk_put_result {
    BANK_DISK_QUEUED = 0,
    BANK_DISK_DUPLICATE,     /* already pending */
    BANK_DISK_DROPPED,       /* queue full and this write was the least valuable */
    BANK_DISK_OFF,           /* the tier is disabled (an I/O error) or closing */
    BANK_DISK_TOO_BIG,       /* larger than the cap */
    BANK_DISK_BAD_ARGS,
    BANK_DISK_ROWS_MISSING,  /* bank_disk_put_rows: the prefix the tier holds ends before the
                              * rows handed (it vanished); counted in skipped_base_gone */
};

struct bank_disk_stats {
    uint64_t entries, bytes, cap_bytes, free_floor_bytes;
    uint64_t pending, pending_bytes;
    uint64_t puts, written, written_bytes, written_tokens, already_stored;
    uint64_t dropped_queue_full, skipped_too_big, skipped_low_disk, skipped_off;
    uint64_t skipped_base_gone; /* the stored prefix a queued write builds on vanished */
    uint64_t lookups, hits, hit_tokens, hit_blobs, misses;
    uint64_t bad_checksum, bad_header, bad_identity, bad_tokens, bad_size, missing_files;
    uint64_t bad_not_regular; /* a blob name that is no regular file (FIFO, symlink, ...) */
    uint64_t bad_rows;        /* index rows with a malformed key or parent: never a path */
    uint64_t discarded;       /* entries dropped as bad by lookups and verify (each logged) */
    uint64_t foreign;         /* things under blobs/ the tier did not make: never followed,
                               * opened or deleted (last scan) */
    char foreign_example[256];/* the first of them ("" none) */
    uint64_t evicted, evicted_bytes;
    uint64_t io_errors;
    uint64_t reenabled;       /* times the tier re-enabled itself after an I/O error */
    uint64_t skipped_foreign; /* writes skipped: their path is held by something foreign */
    /* found by the reconcile at open (and gc) */
    uint64_t open_rows, open_adopted, open_orphans_removed, open_tmp_removed,
             open_rows_dropped, open_old_removed /* files of an older format */;
    int writer_nice;          /* the writer thread's nice value (0 = not lowered) */
    bool writer_io_idle;      /* the writer thread is in the idle I/O class */
    bool disabled;            /* an I/O error: lookups miss, puts are refused until the
                               * retry (retry_in_ms) re-enables it */
    int64_t retry_in_ms;      /* while disabled: ms until the next retry */
    char disabled_reason[256];
    bool read_only;           /* a reader (by choice, or another process has the lock) */
    long lock_holder_pid;     /* a reader: the pid DIR/lock names when that process is
                               * alive; 0 none or unknown */
    bool old_format;          /* a reader found a store of an older format (gc clears it) */
};

/* One restorable entry as listed by bank_disk_ls: its blob holds ids and KV rows
 * [start, pos) and the snapshot at pos; the rows before start are its parent's chain. */
struct bank_disk_entry {
    char key[65];             /* hex SHA-256 of (fingerprint, token ids [0, pos)) */
    char parent[65];          /* key of the entry ending at start; "" when start = 0 */
    uint64_t fp;
    int64_t start, pos;
    enum bank_snap_kind kind;
    uint64_t bytes;           /* this blob file's size */
    uint64_t chain_bytes;     /* bytes a restore reads: this blob and its ancestors' */
    int64_t chain_blobs;      /* blobs in the chain, this one included */
    int64_t children;         /* entries whose parent this is (0 = a leaf, evictable) */
    bool chain_broken;        /* an ancestor row is missing (reconcile drops it) */
    int64_t created_ms, last_use_ms;
    uint64_t hits;
};

/* A disk hit: one buffer holding ids, KV rows [0, pos) (read from the chain of stretch
 * blobs) and the snapshot, all verified (checksums, identity, the exact token prefix).
 * Read-only once the lookup returns: bank_disk_put_hit queues a write that shares it
 * (refcounted) instead of copying it. Free with bank_disk_hit_free (the buffer goes when
 * its last holder lets it go). */
struct bank_disk_hit {
    int64_t pos;              /* 0 = miss */
    enum bank_snap_kind kind;
    const int32_t *ids;       /* pos ids */
    const void *kv;           /* pos * kv_row_bytes */
    const void *snapshot;     /* snapshot_bytes */
    size_t kv_bytes, snapshot_bytes;
    int64_t n_blobs;          /* blobs read: the chain of KV stretches */
    struct bank_hitbuf *buf_; /* private: the refcounted buffer */
};

struct bank_disk_verify_result {
    uint64_t checked, good, removed, removed_bytes;
    uint64_t bad;             /* entries found bad (a reader removes nothing: bad > removed) */
    uint64_t bad_rows;        /* index rows with a malformed key or parent */
    uint64_t foreign;         /* things under blobs/ it cannot account for */
    bool read_only;           /* nothing was removed: another process holds the directory */
};

void bank_disk_opts_default(struct bank_disk_opts *o);
/* Open (creating dir when missing), take the writer lock, reconcile index and files,
 * enforce the cap, start the writer thread; a reader (o->access) only opens the index
 * read-only. NULL with err set when the directory or the index cannot be used, or when a
 * writer finds the lock held (the message names the holder's pid). */
struct bank_disk *bank_disk_open(const char *dir, const struct bank_disk_opts *o,
                                 struct hs_err *err);
/* Drain the queue (every accepted write finishes or fails), stop the writer, close. */
void bank_disk_close(struct bank_disk *d);
/* Queue a write of the entry at pos: ids [0, pos), KV rows [0, pos) (pos * kv_row_bytes),
 * the snapshot (snapshot_bytes). Everything is copied; never blocks on disk I/O. */
enum bank_disk_put_result bank_disk_put(struct bank_disk *d, uint64_t fp,
                                        size_t kv_row_bytes, size_t snapshot_bytes,
                                        const int32_t *ids, int64_t pos,
                                        const void *kv_rows, const void *snapshot,
                                        enum bank_snap_kind kind);
/* As bank_disk_put with only KV rows [rows_from, pos) handed (kv_rows holds row rows_from
 * first): enough when the tier holds (or has queued) a prefix of ids at rows_from or
 * deeper (bank_disk_known_prefix), since a put copies only the rows past that; else
 * BANK_DISK_ROWS_MISSING (the prefix vanished meanwhile: only reuse is lost). */
enum bank_disk_put_result bank_disk_put_rows(struct bank_disk *d, uint64_t fp, size_t kv_row_bytes,
                                             size_t snapshot_bytes, const int32_t *ids, int64_t pos,
                                             int64_t rows_from, const void *kv_rows, const void *snapshot,
                                             enum bank_snap_kind kind);
/* The deepest p <= pos such that an entry of ids[0, p) (fp, row sizes) is stored, being
 * written, or queued and more valuable than kind (0 none, or d NULL): a put of kind at pos
 * (or deeper) copies only the rows from there. */
int64_t bank_disk_known_prefix(struct bank_disk *d, uint64_t fp, size_t kv_row_bytes, size_t snapshot_bytes,
                               const int32_t *ids, int64_t pos, enum bank_snap_kind kind);
/* As bank_disk_put of the hit's ids, rows and snapshot (hit->pos, hit->kind), without
 * copying them: the queued write holds a reference to the hit's buffer, which nobody
 * writes after its lookup (a remote hit going to the local disk). hit stays the caller's
 * and valid; free it as usual. */
enum bank_disk_put_result bank_disk_put_hit(struct bank_disk *d, uint64_t fp, size_t kv_row_bytes,
                                            size_t snapshot_bytes, const struct bank_disk_hit *hit);
/* Wait until nothing is pending or being written. */
void bank_disk_flush(struct bank_disk *d);
/* The deepest stored p with min_pos < p <= min(n-1, max_pos) whose exact prefix ids[0, p)
 * and identity (fp, row sizes) match, verified (min_pos: what RAM already restores, so a
 * blob that is not better is never read). Bad entries met on the way are deleted and
 * counted and the search goes on. Always fills *hit (pos 0 = miss); free it with
 * bank_disk_hit_free. */
void bank_disk_lookup(struct bank_disk *d, uint64_t fp, size_t kv_row_bytes,
                      size_t snapshot_bytes, const int32_t *ids, int64_t n, int64_t min_pos,
                      int64_t max_pos, struct bank_disk_hit *hit);
void bank_disk_hit_free(struct bank_disk_hit *hit);
void bank_disk_stats_get(struct bank_disk *d, struct bank_disk_stats *out);
/* Entries, most recently used first; fn returns false to stop. Returns the count listed. */
int64_t bank_disk_ls(struct bank_disk *d,
                     bool (*fn)(void *ctx, const struct bank_disk_entry *e), void *ctx);
/* Read and verify every entry fully (checksums, header, and its key recomputed over the
 * whole chain's ids); delete the bad ones with every entry below them (a reader only
 * counts them). Also counts malformed index rows and foreign files: a clean store has
 * bad == bad_rows == foreign == 0. */
int bank_disk_verify(struct bank_disk *d, struct bank_disk_verify_result *out,
                     struct hs_err *err);
/* Remove orphans and evict LRU leaves (never an entry another one builds on) until the
 * store holds <= target_bytes. Returns the bytes freed (0 for a reader: it changes
 * nothing). */
uint64_t bank_disk_gc(struct bank_disk *d, uint64_t target_bytes);
const char *bank_disk_put_result_name(enum bank_disk_put_result r);
/* The disk tier's cap, the one policy every caller uses: requested when > 0; else 20% of
 * the free space where dir lives (its nearest existing parent while it does not exist
 * yet), at most 64 GiB; unknown free space: 64 GiB. */
#define BANK_DISK_CAP_MAX (64ull << 30)
uint64_t bank_disk_cap_for(const char *dir, int64_t requested);
/* The default --bank-dir: $XDG_CACHE_HOME/headstart/bank, else ~/.cache/headstart/bank;
 * NULL when neither variable is set. Owned string. */
char *bank_disk_default_dir(void);

/* Called on the disk writer thread each time an entry is stored or found already stored (a
 * put of a stored prefix): hexkey names it, kind is its kind. The remote tier uses it to
 * copy what the disk holds; it must not call back into this disk tier's writer. Setting a
 * new listener (NULL: none) waits for a call of the old one to return. */
typedef void (*bank_disk_stored_fn)(void *ctx, const char *hexkey, enum bank_snap_kind kind);
void bank_disk_set_listener(struct bank_disk *d, bank_disk_stored_fn fn, void *ctx);

/* ---- the remote tier (remote.c states its invariants; docs/FORMATS.md the Redis layout) ---- */

struct bank_remote;

struct bank_remote_opts {
    const char *url;          /* redis://[[user]:password@]host[:port][/db] or
                               * unix:///path/redis.sock[?db=N] */
    const char *prefix;       /* key namespace; NULL = "headstart" */
    uint32_t timeout_ms;      /* every connect and call; 0 = 1000 */
    uint64_t chunk_bytes;     /* blob bytes per value; 0 = 4 MiB */
    int queue_len;            /* pending uploads, >= 1; 0 = 64 */
    uint32_t retry_ms;        /* first wait after a failure (doubling to 60 s); 0 = 1000 */
};

struct bank_remote_stats {
    char url[256];            /* the password, if any, shown as *** */
    char prefix[64];
    bool up;                  /* the last call worked (or the first has not failed yet) */
    int64_t retry_in_ms;      /* while down: ms until the next try */
    char last_error[256];     /* "" none */
    uint64_t lookups, hits, hit_tokens, hit_bytes, hit_blobs, misses;
    uint64_t evicted;         /* a manifest whose chunks (or parent) are gone: a miss */
    uint64_t bad_manifest, bad_chunk, bad_blob; /* failed verification: never restored */
    uint64_t deleted_bad;     /* bad values, and manifests whose chunk is gone, deleted */
    uint64_t uploads, upload_bytes, upload_chunks, already_stored;
    uint64_t upload_dropped;  /* queue full: the least valuable pending upload dropped */
    uint64_t upload_skipped;  /* the local entry vanished or did not verify */
    uint64_t pending;
    uint64_t err_connect, err_timeout, err_io, err_oom, err_reply;
    uint64_t reconnects;      /* times the tier came back after being down */
};

void bank_remote_opts_default(struct bank_remote_opts *o);
/* Parse the URL and start the upload thread. Redis being unreachable is not an error (the
 * tier starts down, logs once and retries with backoff); a malformed URL is (NULL, err).
 * disk (may be NULL: lookups only) is the tier it copies: every entry the disk stores is
 * uploaded in the background, head anchors first. */
struct bank_remote *bank_remote_open(const struct bank_remote_opts *o, struct bank_disk *disk,
                                     struct hs_err *err);
/* Upload what is pending (when Redis is up), stop the thread, close. Close it before the
 * disk tier it copies (its upload thread reads that tier's files). */
void bank_remote_close(struct bank_remote *r);
/* Wait until no upload is pending or running (or the tier is down). */
void bank_remote_flush(struct bank_remote *r);
/* As bank_disk_lookup, from Redis: the deepest entry p with min_pos < p <= min(n-1,
 * max_pos) of (fp, row sizes) whose exact prefix ids[0, p) matches, every chunk and blob
 * of its chain verified. Never blocks longer than one timeout per failure. */
void bank_remote_lookup(struct bank_remote *r, uint64_t fp, size_t kv_row_bytes,
                        size_t snapshot_bytes, const int32_t *ids, int64_t n, int64_t min_pos,
                        int64_t max_pos, struct bank_disk_hit *hit);
void bank_remote_stats_get(struct bank_remote *r, struct bank_remote_stats *out);
/* HS_OK when url is a --bank-remote URL; else HS_ERR_INVALID with err saying why. */
int bank_remote_url_check(const char *url, struct hs_err *err);
/* url with its password replaced by ***, for logs */
void bank_remote_url_redact(const char *url, char *out, size_t cap);

/* ---- the remote tier's offline views (remote_tools.c), behind `headstart bank --remote` ----
 * Each takes a tier opened with bank_remote_open (disk NULL) and reads Redis by SCAN, one
 * command at a time; HS_OK, or an error naming the URL when Redis failed mid-way. */

/* What Redis holds under the prefix (bank_remote_inventory_get). */
struct bank_remote_inventory {
    uint64_t manifests;       /* that decode and are named by their own key */
    uint64_t bad_manifests;   /* that do not (verify and gc remove them) */
    uint64_t chunks, bytes;   /* chunk values; bytes = the sum of their lengths */
    uint64_t unshared_bytes;  /* the sum of every whole chain's blob bytes: what the
                               * entries would take if no two shared a stretch */
    uint64_t position_sets, positions;
    uint64_t orphan_chunks, orphan_bytes; /* chunks no manifest names */
    uint64_t missing_chunks;  /* named by a manifest, absent (evicted) */
    uint64_t incomplete;      /* manifests with a chunk missing */
    uint64_t broken_chains;   /* manifests with an ancestor's manifest missing */
    uint64_t unfindable;      /* manifests whose position is not in their set */
    uint64_t stale_positions; /* positions no manifest ends at */
    uint64_t foreign_keys;    /* keys under PREFIX:hsb2:{m,c,p}: that are not one (a name
                               * of another shape, a value of another type) */
    int64_t maxmemory, used_memory; /* bytes; -1 unknown */
    char policy[32];          /* maxmemory-policy; "" unknown */
};
/* One manifest as bank_remote_ls lists it. */
struct bank_remote_entry {
    char key[65], parent[65]; /* parent "" when start = 0 */
    uint64_t fp;
    int64_t start, pos;
    enum bank_snap_kind kind;
    uint64_t bytes;           /* its blob */
    uint32_t chunks;
    uint64_t chain_bytes;     /* bytes a restore reads: its blob and its ancestors' */
    int64_t chain_blobs, children;
    bool chain_broken;        /* an ancestor's manifest is missing */
    const uint8_t (*chunk_ids)[16]; /* chunks entries: PREFIX:hsb2:c:<hex id> (borrowed: valid
                               * during the callback) */
};
struct bank_remote_verify_result {
    uint64_t checked, good, bad;        /* entries; bad includes those building on a bad one */
    uint64_t bad_manifests;             /* manifests that do not decode or name another entry */
    uint64_t missing_chunks, bad_chunks; /* the first failing chunk of each bad entry */
    uint64_t removed, removed_chunks, positions_removed; /* deleted (0 with dry_run) */
};
struct bank_remote_gc_result {
    int64_t min_idle_s;
    uint64_t orphan_chunks;             /* chunks no manifest names */
    uint64_t removed_chunks, removed_chunk_bytes;
    uint64_t young_chunks;              /* orphans idle < min_idle_s: perhaps an upload in
                                         * progress; kept */
    uint64_t untimed_chunks;            /* orphans with no idle time (an LFU policy); kept */
    char untimed_reason[160];
    uint64_t bad_manifests, missing_chunk_manifests, broken_chain_manifests;
    uint64_t removed_manifests;         /* the three kinds above (counted with dry_run) */
    uint64_t positions_added, positions_removed;
};
int bank_remote_inventory_get(struct bank_remote *r, struct bank_remote_inventory *out, struct hs_err *err);
/* Manifests by fingerprint, position, key; fn returns false to stop. The count listed, or
 * -1 with err set. */
int64_t bank_remote_ls(struct bank_remote *r, bool (*fn)(void *ctx, const struct bank_remote_entry *e),
                       void *ctx, struct hs_err *err);
/* Fetch every chunk of every manifest, check it (length, id), the blob (the disk tier's
 * checks) and the key over the chain's ids; remove bad entries with those building on
 * them, and bad chunk values (none of it with dry_run). */
int bank_remote_verify(struct bank_remote *r, bool dry_run, struct bank_remote_verify_result *out,
                       struct hs_err *err);
/* Remove manifests that cannot restore (undecodable, chunks missing, a broken chain),
 * orphan chunks idle >= min_idle_s, and make the position sets match the manifests. */
int bank_remote_gc(struct bank_remote *r, int64_t min_idle_s, bool dry_run, struct bank_remote_gc_result *out,
                   struct hs_err *err);
/* A line of advice when the eviction policy (maxmemory-policy, "" unknown) will not make
 * room for uploads in the way the bank wants (allkeys-lru / allkeys-lfu); NULL when fine. */
const char *bank_remote_policy_warning(const char *policy, int64_t maxmemory);

/* ---- a request's restore and store over both tiers (restore.c) ---------------------------- */

/* The key spaces and sizes of one engine's state. */
struct bank_keys {
    uint64_t fp;              /* RAM key space: the process fingerprint */
    uint64_t disk_fp;         /* disk key space: the persistent model identity */
    size_t kv_row_bytes, snapshot_bytes;
};

/* Where restored state came from. */
enum bank_source { BANK_SOURCE_NONE = 0, BANK_SOURCE_RAM, BANK_SOURCE_DISK, BANK_SOURCE_REMOTE, BANK_SOURCE_COUNT };

/* What bank_restore found. kv / snapshot are owned by the result (bank_restored_free). */
struct bank_restored {
    int64_t pos;              /* tokens restored (s); 0 = nothing: compute from scratch */
    enum bank_source source;
    int64_t match_len;        /* L: longest common prefix with RAM's tree (after a promotion) */
    enum bank_reason reason;  /* why the restore stopped at pos */
    int64_t disk_discarded;   /* disk entries that failed verification in this lookup */
    int64_t remote_discarded; /* remote values that failed verification in this lookup */
    const void *kv;           /* KV rows [0, pos), pos * kv_row_bytes */
    const void *snapshot;     /* snapshot_bytes */
    void *ram_kv_, *ram_snap_;          /* private */
    bool promote_;                      /* private: bank_restored_promote still to do */
    struct bank_disk_hit disk_, remote_; /* private */
};

/* The deepest state ids[0, n) can resume from (at most n - 1 tokens): RAM, then the disk
 * tier d (may be NULL) for a deeper point, which is promoted into RAM, then the remote
 * tier rt (may be NULL) for a point deeper than both, promoted into RAM and queued for
 * disk. Declares k's RAM key space first (its error is the only one). */
int bank_restore(struct bank *b, struct bank_disk *d, struct bank_remote *rt, const struct bank_keys *k,
                 const int32_t *ids, int64_t n, struct bank_restored *out, struct hs_err *err);
/* As bank_restore, but a disk or remote hit is not promoted into RAM yet: the result keeps
 * it until bank_restored_promote (restore.c, invariant 5: off the time to first token). */
int bank_restore_lazy(struct bank *b, struct bank_disk *d, struct bank_remote *rt, const struct bank_keys *k,
                      const int32_t *ids, int64_t n, struct bank_restored *out, struct hs_err *err);
/* The promotion bank_restore_lazy left (b and k as given to it); a no-op when none is left.
 * Call it before bank_restored_free; a result freed without it only loses the reuse. */
void bank_restored_promote(struct bank *b, const struct bank_keys *k, struct bank_restored *r);
void bank_restored_free(struct bank_restored *r); /* safe on a zeroed struct */
/* The first KV row of path[0, n) bank_store needs to be handed with these snapshots:
 * where RAM's tree stops matching, and with a disk tier no later than the prefix it holds
 * (or has queued) for the shallowest of them (bank_disk_known_prefix: each disk put copies
 * only the rows past it). */
int64_t bank_store_rows_from(const struct bank *b, struct bank_disk *d, const struct bank_keys *k,
                             const int32_t *path, int64_t n, const struct bank_snap_in *snaps, int n_snaps);
/* Store a computed path: RAM insert of path[0, n) with kv_rows = rows [rows_from, n)
 * (rows_from from bank_store_rows_from) and the snapshots, then the same snapshots queued
 * for the disk tier d (may be NULL) with the rows past what it holds (bank_disk_put_rows);
 * *n_disk_puts counts those queued (or already pending).
 * Declares k's RAM key space when new. An insert error is returned and nothing is queued. */
int bank_store(struct bank *b, struct bank_disk *d, const struct bank_keys *k, const int32_t *path, int64_t n,
               int64_t rows_from, const void *kv_rows, const struct bank_snap_in *snaps, int n_snaps,
               int *n_disk_puts, struct hs_err *err);
const char *bank_source_name(enum bank_source s);

/* ---- statistics as data (stats.c): one field table per stats struct ---- */

enum bank_stat_kind { BANK_STAT_COUNTER = 0, BANK_STAT_GAUGE };
enum bank_stat_type {
    BANK_STAT_U64 = 0,   /* uint64_t (or n of them) */
    BANK_STAT_BOOL,      /* bool: JSON true/false, metrics 1/0 */
    BANK_STAT_NOT_BOOL,  /* bool, exported negated (disabled -> enabled) */
    BANK_STAT_LONG,      /* long */
    BANK_STAT_STR,       /* char[]: JSON only */
};
/* Which outputs carry a row (bits). */
enum {
    BANK_STAT_REPLAY = 1u << 0,  /* `headstart replay`'s summary line (bank_stats_json ...) */
    BANK_STAT_CMD = 1u << 1,     /* `headstart bank stats|ls|verify|gc` (cmd_bank.c) */
    BANK_STAT_METRICS = 1u << 2, /* /metrics (Prometheus text) */
};

/* One exported quantity of a stats struct. A row that is one label value of a family
 * (label != NULL) shares metric and help with its siblings, which follow it directly in
 * the metrics order. */
struct bank_stat_field {
    const char *key;          /* JSON key (inside `group` when set) */
    const char *metric;       /* Prometheus family name; NULL: not a metric */
    const char *label;        /* this row's value of the family's "reason" label; NULL none */
    const char *help;         /* Prometheus HELP text */
    enum bank_stat_kind kind;
    enum bank_stat_type type;
    size_t offset;            /* offsetof in the stats struct */
    int n;                    /* 0: one value; > 0: an array of n uint64_t, indexed by an enum */
    const char *(*name_of)(int i); /* the enum's names: JSON keys / "reason" label values */
    const char *group;        /* JSON: the nested object it sits in; NULL: top level */
    const char *text;         /* the words of `bank stats`' text line; NULL: not in text */
    size_t only_if;           /* offset of a bool that must be true to show it; (size_t)-1 */
    unsigned outputs;         /* BANK_STAT_* bits */
};

/* The tables: rows in the JSON order of every output (each output takes its rows). */
extern const struct bank_stat_field bank_stats_fields[];      /* struct bank_stats */
extern const int bank_stats_n_fields;
extern const struct bank_stat_field bank_disk_stats_fields[]; /* struct bank_disk_stats */
extern const int bank_disk_stats_n_fields;
extern const struct bank_stat_field bank_remote_stats_fields[]; /* struct bank_remote_stats */
extern const int bank_remote_stats_n_fields;
/* /metrics lists the disk rows in another order: indices into bank_disk_stats_fields. */
extern const int bank_disk_stats_metrics_order[];
extern const int bank_disk_stats_n_metrics;

struct jsonw;
struct strbuf;
/* One row as JSON ("key": value, or "key": {name: value, ...} for an array), opening and
 * closing its group's object as needed: start with *group = NULL and finish with
 * bank_stat_json_end. Rows whose only_if is false write nothing. */
void bank_stat_json(struct jsonw *w, const struct bank_stat_field *f, const void *st,
                    const char **group);
void bank_stat_json_end(struct jsonw *w, const char **group);
/* Every row of table t flagged for `output`, in table order, into the open object of w. */
void bank_stats_json_fields(const struct bank_stat_field *t, int n, unsigned output,
                            const void *st, struct jsonw *w);
/* One row as Prometheus text: "# HELP" and "# TYPE" when prev (the row written before,
 * or NULL) belongs to another family, then its sample line(s). */
void bank_stat_metric(struct strbuf *out, const struct bank_stat_field *f, const void *st,
                      const struct bank_stat_field *prev);
/* Every metric row of a struct, in its metrics order (what /metrics prints for the bank). */
void bank_stats_metrics(const struct bank_stats *st, struct strbuf *out);
void bank_disk_stats_metrics(const struct bank_disk_stats *st, struct strbuf *out);
void bank_remote_stats_metrics(const struct bank_remote_stats *st, struct strbuf *out);
/* `headstart replay`'s summary members: "bank_stats": {...} and "bank_disk_stats": {...}. */
void bank_stats_json(const struct bank_stats *st, struct jsonw *w);
void bank_disk_stats_json(const struct bank_disk_stats *st, struct jsonw *w);
/* The rows of `group` with a text name as "words value, words value, ..." (no newline). */
void bank_stats_text(const struct bank_stat_field *t, int n, const char *group, const void *st,
                     struct strbuf *out);

#endif
