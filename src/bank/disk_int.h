/* disk_int.h — the disk tier's private state, shared by its files: disk.c (open, close,
 * lookup, the blob files), index.c (the SQLite index and its in-memory mirror),
 * reconcile.c (index against files), writer.c (the queue, the writer thread and lock) and
 * tools.c (ls, verify, gc); blob.c's pure format is in blob_int.h. disk.c's note states
 * the invariants every one of them keeps. Never included outside src/bank. */
#ifndef HS_BANK_DISK_INT_H
#define HS_BANK_DISK_INT_H
#include "bank/bank.h"
#include "bank/blob_int.h"
#include "sys/sys.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include <sqlite3.h>

#define BACKOFF_MAX_MS 60000u

struct pending {
    uint64_t fp;
    size_t row, snap;         /* kv_row_bytes, snapshot_bytes */
    int64_t pos;
    int64_t from;             /* KV rows held: [from, pos); from > 0: base = key(from) */
    enum bank_snap_kind kind;
    bool touch;               /* stored at put time: refresh its recency only, no data */
    uint8_t key[32], base[32];
    uint64_t seq;
    uint64_t bytes;           /* bytes held (queue_bytes accounting) */
    const int32_t *ids;       /* pos ids */
    const uint8_t *kv, *snapb;/* (pos - from) rows, the snapshot */
    struct bank_hitbuf *share;/* NULL: ids, kv, snapb are owned copies; else they point
                               * into this hit buffer, held by a reference */
};

/* A hit's buffer (ids | KV rows | snapshot): written by the lookup that fills it, then
 * read-only, freed when its last reference goes (the hit's, and those of the disk writes
 * queued from it by bank_disk_put_hit, on the writer thread). */
struct bank_hitbuf {
    atomic_int refs;
    uint8_t *mem;
};
struct bank_hitbuf *hitbuf_new(size_t bytes); /* one reference */
void hitbuf_unref(struct bank_hitbuf *hb);   /* NULL: no-op */

/* The mirror of the index that put consults without touching SQLite (invariant 6). */
struct known {
    uint64_t fp;
    int64_t pos;
    uint64_t row, snap;
    uint8_t key[32];
};

struct bank_disk {
    char *dir, *blobs, *index_path, *lock_path;
    struct bank_disk_opts o;
    int lock_fd;              /* the writer lock; -1 for a reader */
    bool read_only;           /* a reader (invariant 8); changes only under db_mu + mu */
    int64_t retry_at_ms;      /* monotonic ms of the next retry (disabled, or take_over) */
    uint32_t backoff_ms;      /* the wait after the next failure */
    bool recovering;          /* a retry is running: reported as disabled until it is done */
    bool taking_over;         /* ... and it took the lock: reported read-only until done */
    sqlite3 *db;
    pthread_mutex_t db_mu, mu;
    pthread_cond_t cv_work, cv_idle;
    pthread_t writer;
    bool writer_started, closing;
    struct pending **q;
    int nq;
    uint64_t q_bytes, seq;
    bool busy;                /* the writer holds an item */
    const struct pending *cur;/* that item (NULL none): put may build on it */
    char inflight[65];        /* key being written ("" none): reconcile never removes it */
    uint8_t inflight_base[32];/* its parent (pinned); zero when none */
    struct known *kn;         /* under mu */
    size_t nkn, ckn;
    char old_format[32];      /* the format an older index declared ("" none) */
    /* written under db_mu only; atomic so that stats never wait for a lookup's read */
    _Atomic uint64_t total_bytes, n_entries;
    int64_t tick;
    struct bank_disk_stats st;
    bank_disk_stored_fn on_stored; /* called by the writer under listen_mu, so that */
    void *on_stored_ctx;           /* bank_disk_set_listener(NULL) waits out a call */
    pthread_mutex_t listen_mu;
};

/* One index row (the columns of ROW_COLS). */
struct disk_row {
    char key[65], parent[65];
    uint64_t fp, row, snap, bytes;
    int64_t start, pos;
    int kind;
};
#define ROW_COLS "key, parent, fp, start, pos, kind, kv_row_bytes, snapshot_bytes, bytes"

static inline int64_t disk_mono_ms(void) { return (int64_t)(sys_time_sec() * 1000.0); }

/* ---- disk.c: state, counters and the blob files ---- */
/* Strictly increasing wall-clock ms: LRU order is exact. Caller holds db_mu. */
int64_t disk_next_tick(struct bank_disk *d);
uint32_t disk_retry_min_ms(const struct bank_disk *d);
/* Disable the tier until the retry (invariant 7); _locked: caller holds mu. */
void disk_disable_locked(struct bank_disk *d, const char *fmt, const char *a, const char *b);
void disk_disable(struct bank_disk *d, const char *fmt, const char *a, const char *b);
bool disk_is_disabled(struct bank_disk *d);
/* *field += v under mu */
void disk_count(struct bank_disk *d, uint64_t *field, uint64_t v);
/* DIR/blobs/<key[0:2]>/<key>.hsb, or NULL when hexkey is not a valid key (invariant 10). */
char *disk_blob_path(const struct bank_disk *d, const char *hexkey);
/* 0: the shard directory of hexkey is a real directory; ENOENT: it does not exist;
 * ENOTDIR: something foreign is there (a symlink, a file); -1 (errno set): lstat failed. */
int disk_shard_state(const struct bank_disk *d, const char *hexkey);
/* Remove the blob of hexkey when it is a regular file in a real shard directory; anything
 * else at that name is foreign and left alone (invariant 10). 0 when nothing of ours is
 * left there; -1 with errno when the unlink failed. */
int disk_blob_unlink(struct bank_disk *d, const char *hexkey);
/* Open the blob of hexkey for reading (invariant 10). Returns the fd, or -1 with
 * *r = RD_MISSING, RD_NOT_REGULAR or RD_IO (errno). */
int disk_blob_open(struct bank_disk *d, const char *path, const char *hexkey, struct stat *stb,
                   enum rd *r);
/* Read the blob of hexkey and verify it with blob.c's checks (see disk.c). */
enum rd disk_blob_read(struct bank_disk *d, const char *hexkey, const struct blob_hdr *exp,
                       int32_t *ids_dst, uint8_t *kv_dst, uint8_t *snap_dst,
                       const int32_t *want_ids, uint32_t *kind_out);
/* An entry found bad: counted by cause, logged, deleted with its subtree by a writer.
 * Caller holds db_mu. */
void disk_discard(struct bank_disk *d, const char *hexkey, enum rd why, const char *during);

/* ---- for the remote tier (remote.c copies what this tier stores) ---- */
/* The stored entry hexkey: its row, and its blob file read whole into *buf (owned) and
 * checked as a lookup checks it (header, identity against the row, size, checksums; not
 * the token prefix). RD_OK, or why not (RD_MISSING when there is no such row). */
enum rd disk_entry_read(struct bank_disk *d, const char *hexkey, struct disk_row *row,
                        uint8_t **buf, size_t *len);
/* The stored row of hexkey: false when there is none. */
bool disk_entry_row(struct bank_disk *d, const char *hexkey, struct disk_row *row);
/* Keys of up to max stored head anchors, most recently used first (owned array of 65-byte
 * strings); the count in *n. */
char (*disk_head_keys(struct bank_disk *d, int max, int *n))[65];

/* ---- index.c: SQLite (caller holds db_mu unless said otherwise) ---- */
int index_open(struct bank_disk *d, struct hs_err *err);
int index_open_reader(struct bank_disk *d, struct hs_err *err);
void index_remove_files(const char *index_path);
/* exec / prepare; a failure disables the tier (its message names the SQL) */
int index_exec(struct bank_disk *d, const char *sql);
sqlite3_stmt *index_prep(struct bank_disk *d, const char *sql);
/* Column col as a key: true with out set when it is 64 lower-case hex digits (or "" when
 * empty and empty_ok); anything else leaves out "" and returns false. */
bool index_col_key(sqlite3_stmt *s, int col, char out[65], bool empty_ok);
/* false when the row's key or parent is malformed (invariant 10): skip such a row */
bool index_row_read(sqlite3_stmt *s, int col0, struct disk_row *r);
bool index_row_get(struct bank_disk *d, const char *hexkey, struct disk_row *r);
int index_insert(struct bank_disk *d, const char *hexkey, const char *parent, uint64_t fp,
                 int64_t start, int64_t pos, int kind, uint64_t row, uint64_t snap,
                 uint64_t bytes, int64_t created, int64_t used);
void index_touch(struct bank_disk *d, const char *hexkey, bool hit, bool *found);
/* Delete hexkey's entry with every entry below it; returns the rows deleted. */
uint64_t index_subtree_delete(struct bank_disk *d, const char *hexkey);
/* Evict LRU leaves until total + incoming <= limit (protect: pinned too). */
void index_evict_to(struct bank_disk *d, uint64_t limit, uint64_t incoming, const uint8_t *protect);
/* Rows with a malformed key or parent: a writer deletes them; returns the count. */
uint64_t index_bad_rows_pass(struct bank_disk *d, char *example, size_t cap);
/* Rebuild the mirror (struct known) from the index. */
void index_known_reload(struct bank_disk *d);
/* Every well-formed row, ordered by `order` (SQL); owned array. */
struct disk_row *index_rows_all(struct bank_disk *d, size_t *n_out, const char *order);
/* bsearch in rows sorted by key */
const struct disk_row *index_row_find(const struct disk_row *sorted, size_t n, const char *key);

/* ---- reconcile.c ---- */
/* Match blobs/ with the index (invariant 4); scan_only (or a reader) only counts. db_mu held. */
void disk_reconcile(struct bank_disk *d, bool scan_only);

/* ---- writer.c ---- */
void disk_pending_free(struct pending *p);
void *disk_writer_main(void *arg);
/* The pid DIR/lock names when that process is alive; 0 when none or unknown. */
long disk_lock_file_pid(const char *lock_path);
/* 0 taken, 1 held by another (*holder its pid), -1 unusable (err). */
int disk_lock_take(struct bank_disk *d, long *holder, struct hs_err *err);
void disk_lock_release(struct bank_disk *d);

#endif
