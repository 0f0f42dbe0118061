/* SPDX-License-Identifier: MIT */
/* kv_int.h: the key-value service's private types and functions. */
#ifndef WEFT_KV_INT_H
#define WEFT_KV_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include <event2/buffer.h>

#include <weft/kv.h>

/* ---- Values (store.c) -------------------------------------------------- */

/* An immutable value shared by the store, replies and replication. */
struct weft__kv_blob {
	_Atomic uint32_t refs;
	size_t len;
	uint8_t data[];
};

/* weft__kv_blob_new copies len bytes into a blob with one reference. */
struct weft__kv_blob *weft__kv_blob_new(const void *data, size_t len);
void weft__kv_blob_ref(struct weft__kv_blob *b);
void weft__kv_blob_unref(struct weft__kv_blob *b);
/* weft__kv_blob_lend appends b's bytes to buf by reference (the chain
 * holds a reference on b until libevent frees it, on whichever thread);
 * 0 or WEFT_ENOMEM. */
int weft__kv_blob_lend(struct weft__kv_blob *b, struct evbuffer *buf);

/* ---- The replica (store.c) --------------------------------------------- */

/*
 * A write's version: a hybrid-clock timestamp (wall milliseconds << 16 plus
 * a counter) and the id of the node that coordinated it, compared in that
 * order. origin is borrowed and must outlive the store (a peer id).
 */
struct weft__kv_version {
	uint64_t ts;
	const char *origin;
};

/* weft__kv_version_cmp orders versions: <0, 0 or >0. */
int weft__kv_version_cmp(const struct weft__kv_version *a,
                         const struct weft__kv_version *b);

/* One key: its latest version and value (NULL: deleted), and the last
 * version its coordinator aborted here (origin NULL: none), which is
 * refused if it arrives after its abort. */
struct weft__kv_entry {
	uint64_t hash;
	uint64_t ring; /* weft__kv_ring_hash of the key: its range */
	struct weft__kv_blob *value;
	struct weft__kv_version ver;
	struct weft__kv_version aborted;
	uint32_t key_len;
	uint8_t key[];
};

/*
 * A shard: an open-addressing table (linear probing, power-of-two size,
 * at most 3/4 full) under its own mutex, held only for a lookup or an
 * update, never while waiting for anything. Entries are never removed:
 * a delete is a versioned tombstone.
 */
struct weft__kv_shard {
	pthread_mutex_t lock;
	struct weft__kv_entry **slots;
	size_t cap;
	size_t len;
} __attribute__((aligned(64)));

#define WEFT__KV_SHARDS 64

/*
 * Anti-entropy compares replicas range by range: a key's range is the top
 * bits of a hash under a key every member shares (weft__kv_ring_hash), and
 * a range's digest is the XOR of its entries' digests, each a hash of the
 * key and its version, kept up to date as entries change.
 */
#define WEFT__KV_RANGE_BITS 8
#define WEFT__KV_RANGES (1u << WEFT__KV_RANGE_BITS)

/* weft__kv_ring_hash hashes a key under the cluster-wide fixed key. */
uint64_t weft__kv_ring_hash(const void *key, size_t key_len);
/* weft__kv_range is the range of a key whose ring hash is ring. */
static inline uint32_t
weft__kv_range(uint64_t ring)
{
	return (uint32_t)(ring >> (64 - WEFT__KV_RANGE_BITS));
}

/* ---- The ordered index (index.c) --------------------------------------- */

/* The most levels of the skip list: enough for 4^16 keys. */
#define WEFT__KV_INDEX_HEIGHT 16

struct weft__kv_index_node;

/*
 * Every key the store holds, in byte order (weft__kv_key_cmp), tombstones
 * included. Entries are linked once and never unlinked; walks take the
 * read lock, links the write lock, and neither holds a shard's lock while
 * taking this one.
 */
struct weft__kv_index {
	pthread_rwlock_t lock;
	struct weft__kv_index_node *head; /* a node of every height */
	size_t len;
};

/* weft__kv_key_cmp orders keys bytewise, a prefix first: <0, 0 or >0. */
int weft__kv_key_cmp(const void *a, size_t a_len, const void *b, size_t b_len);
int weft__kv_index_init(struct weft__kv_index *ix);
/* weft__kv_index_fini frees the nodes, not the entries. */
void weft__kv_index_fini(struct weft__kv_index *ix);
/* weft__kv_index_node_new makes the node that will link e (not yet
 * linked), or returns NULL when memory runs out. */
struct weft__kv_index_node *weft__kv_index_node_new(struct weft__kv_entry *e);
/* weft__kv_index_link links a node made for an entry not in the index.
 * Takes the write lock. Any thread. */
void weft__kv_index_link(struct weft__kv_index *ix,
                         struct weft__kv_index_node *n);

/* A walk's visitor: true to go on to the next entry. */
typedef bool (*weft__kv_index_visit_cb)(struct weft__kv_entry *e, void *arg);

/*
 * weft__kv_index_walk calls visit for each entry whose key is start or
 * sorts after it, in order, until visit returns false, under the read
 * lock (visit may take a shard's lock, not the index's). Returns the
 * entries visited. Any thread.
 */
size_t weft__kv_index_walk(struct weft__kv_index *ix, const void *start,
                           size_t start_len, weft__kv_index_visit_cb visit,
                           void *arg);

struct weft__kv_store {
	struct weft__kv_shard shards[WEFT__KV_SHARDS];
	struct weft__kv_index index;
	uint64_t seed[2]; /* SipHash key: keys from the network */
	/* Each range's digest, XOR-ed under the entry's shard lock. */
	_Atomic uint64_t digest[WEFT__KV_RANGES];
	_Atomic uint64_t keys;
	_Atomic uint64_t value_bytes;
};

int weft__kv_store_init(struct weft__kv_store *s);
void weft__kv_store_fini(struct weft__kv_store *s);

/* What weft__kv_store_apply did. */
enum weft__kv_applied {
	WEFT__KV_HELD = 0,       /* this very version is held already */
	WEFT__KV_APPLIED = 1,    /* it is the key's state now */
	WEFT__KV_SUPERSEDED = 2, /* a newer version is held: nothing done */
	WEFT__KV_ABORTED = 3,    /* its coordinator aborted it: nothing done */
};

/*
 * weft__kv_store_apply makes (value, ver) the key's state if ver is newer
 * than what the store holds; value NULL deletes. The store takes its own
 * reference on value. Returns a weft__kv_applied or WEFT_ENOMEM. Any
 * thread.
 */
int weft__kv_store_apply(struct weft__kv_store *s, const void *key,
                         size_t key_len, struct weft__kv_blob *value,
                         const struct weft__kv_version *ver);

/*
 * weft__kv_store_abort takes back a write its coordinator reported failed:
 * if the key's state is that version (failed), it becomes (value, ver),
 * the coordinator's own state of the key, even though older; otherwise
 * (value, ver) is applied as weft__kv_store_apply would. Either way failed
 * is remembered, so that its write, arriving later, is refused
 * (WEFT__KV_ABORTED). Returns WEFT__KV_APPLIED when the state changed,
 * WEFT__KV_HELD or WEFT__KV_SUPERSEDED when not, or WEFT_ENOMEM. ver.ts 0
 * with value NULL is a key the coordinator does not hold. Any thread.
 */
int weft__kv_store_abort(struct weft__kv_store *s, const void *key,
                         size_t key_len, const struct weft__kv_version *failed,
                         struct weft__kv_blob *value,
                         const struct weft__kv_version *ver);

/*
 * weft__kv_store_get returns the key's value with a reference for the
 * caller, or NULL when the key is absent or deleted. If ver is not NULL it
 * receives the version (ts 0 when absent). Any thread.
 */
struct weft__kv_blob *weft__kv_store_get(struct weft__kv_store *s,
                                         const void *key, size_t key_len,
                                         struct weft__kv_version *ver);

/*
 * weft__kv_store_entry_value returns e's value with a reference for the
 * caller, or NULL for a tombstone; ver, if not NULL, receives its version.
 * e is an entry of s (from a walk of its index). Any thread.
 */
struct weft__kv_blob *weft__kv_store_entry_value(struct weft__kv_store *s,
                                                 const struct weft__kv_entry *e,
                                                 struct weft__kv_version *ver);

/* SipHash-2-4 of data under a 128-bit key. */
uint64_t weft__kv_siphash(const uint64_t key[2], const void *data, size_t len);

/* ---- Payloads (wire.c) ------------------------------------------------- */

/*
 * A replicate's op. An abort (one-way, sent by a coordinator whose write
 * failed) is [3, key, value, ts, origin, restore op, restore ts, restore
 * origin]: the failed version (ts, origin) and the coordinator's own state
 * of the key (value, with restore op 2 and ts 0 when it holds none). A
 * node of an older build refuses it as malformed.
 */
enum weft__kv_op {
	WEFT__KV_OP_PUT = 1,
	WEFT__KV_OP_DELETE = 2,
	WEFT__KV_OP_ABORT = 3,
};

/* The most bytes one encoded header field takes. */
#define WEFT__KV_HDR_MAX 9

/* Encoders: each writes one msgpack header or value at out and returns
 * the bytes written (at most WEFT__KV_HDR_MAX). */
size_t weft__kv_enc_array(uint8_t *out, uint32_t n);
size_t weft__kv_enc_uint(uint8_t *out, uint64_t v);
size_t weft__kv_enc_bin(uint8_t *out, uint32_t len);
size_t weft__kv_enc_str(uint8_t *out, uint32_t len);
/* weft__kv_enc_version writes [ts: uint, origin: str]: at most
 * 2 * WEFT__KV_HDR_MAX + WEFT_MSVC_MAX_ID bytes. */
size_t weft__kv_enc_version(uint8_t *out, const struct weft__kv_version *ver);

/* A bounded reader over one payload; every read returns 0 or
 * WEFT_EINVAL (wrong type, truncated). */
struct weft__kv_reader {
	const uint8_t *p;
	const uint8_t *end;
};

int weft__kv_read_array(struct weft__kv_reader *r, uint32_t *n);
int weft__kv_read_uint(struct weft__kv_reader *r, uint64_t *v);
int weft__kv_read_bin(struct weft__kv_reader *r, const uint8_t **data,
                      size_t *len);
int weft__kv_read_str(struct weft__kv_reader *r, const char **data,
                      size_t *len);

/* A decoded request. */
struct weft__kv_req {
	uint32_t op; /* replicate only */
	const uint8_t *key;
	size_t key_len;
	const uint8_t *value;
	size_t value_len;
	uint64_t ts;        /* replicate only */
	const char *origin; /* replicate only, not NUL-terminated */
	size_t origin_len;
	uint32_t restore_op; /* abort only: the state to go back to */
	uint64_t restore_ts;
	const char *restore_origin; /* not NUL-terminated */
	size_t restore_origin_len;
};

/* Decoders for each verb's request; 0 or WEFT_EINVAL (bad shape, empty
 * or too long key). */
int weft__kv_decode_key(const void *p, size_t n, struct weft__kv_req *out);
int weft__kv_decode_put(const void *p, size_t n, struct weft__kv_req *out);
int weft__kv_decode_replicate(const void *p, size_t n,
                              struct weft__kv_req *out);
/* weft__kv_decode_get reads [key] or [key, consistency]: *cl receives
 * the consistency (1 to 3), or WEFT_KV_READ_DEFAULT for the first form. */
int weft__kv_decode_get(const void *p, size_t n, struct weft__kv_req *out,
                        uint32_t *cl);
/* weft__kv_decode_read_answer reads a replica's answer to kv_read
 * ([op, value, ts, origin], see <weft/kv.h>) into op, value, ts and
 * origin: an absent key has op 0 and nothing else; a put or delete a
 * timestamp above 0 and an origin of 1 to WEFT_MSVC_MAX_ID bytes, a
 * delete no value. 0 or WEFT_EINVAL. */
int weft__kv_decode_read_answer(const void *p, size_t n,
                                struct weft__kv_req *out);
/* weft__kv_decode_scan reads [start: bin, count: uint]: a start key of 0
 * to WEFT_KV_MAX_KEY bytes (in key, key_len) and a count of 1 to
 * WEFT_KV_MAX_SCAN (in *count). */
int weft__kv_decode_scan(const void *p, size_t n, struct weft__kv_req *out,
                         uint32_t *count);

/* ---- Configuration (config.c) ------------------------------------------ */

/* A write_quorum as written: a count, or one resolved against the members. */
struct weft__kv_quorum {
	int kind; /* WEFT__KV_QUORUM_… */
	uint32_t count;
};
enum {
	WEFT__KV_QUORUM_COUNT = 0,
	WEFT__KV_QUORUM_MAJORITY = 1,
	WEFT__KV_QUORUM_ALL = 2,
	WEFT__KV_QUORUM_ONE = 3,
};

/* The [kv] section, read with weft_kv_config_section. */
struct weft__kv_settings {
	struct weft__kv_quorum quorum;
	uint64_t replicate_timeout_ms;
	size_t max_value;
	uint64_t max_clock_skew_ms;
	uint64_t repair_interval_ms;
	uint32_t write_quorum;     /* quorum, resolved */
	uint32_t read_consistency; /* weft_kv_consistency, not DEFAULT */
};

/* weft__kv_settings_read reads [kv] of cfg (NULL: the defaults) and checks
 * it against the cluster of members; 0 or WEFT_ECONFIG (file:line in
 * err). */
int weft__kv_settings_read(const weft_msvc_config *cfg, uint32_t members,
                           struct weft__kv_settings *s, char *err,
                           size_t errlen);
int weft__kv_quorum_parse(const char *text, void *field, char *why,
                          size_t whylen);
int weft__kv_quorum_resolve(const struct weft__kv_quorum *q, uint32_t members,
                            uint32_t *out);
/* weft__kv_quorum_now is q for a cluster of members now: what a write
 * needs (more than members when a count no longer fits). */
uint32_t weft__kv_quorum_now(const struct weft__kv_quorum *q, uint32_t members);
/* weft__kv_parse_quorum resolves text for members; 0 or WEFT_EINVAL. */
int weft__kv_parse_quorum(const char *text, uint32_t members, uint32_t *out);

/* ---- A replicated operation's tally (write.c, read.c) ------------------ */

/*
 * One atomic word per write or quorum read: three counts of 16 bits (a
 * cluster has at most 1024 members) of the replicas that answered, failed
 * and left, and the bit set by the count that decided the operation, so
 * that exactly one of the threads counting sees it decided.
 */
#define WEFT__KV_ACK (1ull << 0)
#define WEFT__KV_FAIL (1ull << 16)
#define WEFT__KV_GONE (1ull << 32)
#define WEFT__KV_DECIDED (1ull << 63)
#define WEFT__KV_COUNT(state, field) ((uint32_t)((state) / (field)) & 0xffff)

/* weft__kv_client_status is what a client is told when a replica's
 * failure (status) puts a write or a quorum read out of reach (write.c). */
int weft__kv_client_status(int status);

/* weft__kv_tally_verdict: 1 once need of the left replicas answered, -1
 * once they can no longer (need above those left, or too many failed), 0
 * while it is open. */
static inline int
weft__kv_tally_verdict(uint64_t state, uint32_t left, uint32_t need)
{
	if (need > left)
		return -1;
	if (WEFT__KV_COUNT(state, WEFT__KV_ACK) >= need)
		return 1;
	return left - WEFT__KV_COUNT(state, WEFT__KV_FAIL) < need ? -1 : 0;
}

/* weft__kv_tally_add adds one to field of *tally; returns the verdict
 * (1 or -1) if this call decided it by outcome(op, new state), or 0.
 * Any thread. */
static inline int
weft__kv_tally_add(_Atomic uint64_t *tally, uint64_t field,
                   int (*outcome)(const void *op, uint64_t state),
                   const void *op)
{
	uint64_t old = atomic_load(tally), next;
	int verdict;

	do {
		next = old + field;
		verdict = old & WEFT__KV_DECIDED ? 0 : outcome(op, next);
		if (verdict != 0)
			next |= WEFT__KV_DECIDED;
	} while (!atomic_compare_exchange_weak(tally, &old, next));
	return verdict;
}

/* ---- The service (kv.c) ------------------------------------------------ */

/* ---- Aborts of failed writes (abort.c) ---------------------------------- */

struct weft__kv_abort;

/* The aborts waiting for their replica to be reachable again, oldest
 * first. */
struct weft__kv_aborts {
	pthread_mutex_t lock;
	struct weft__kv_abort *head, *tail;
	uint32_t parked;
	_Atomic uint32_t waiting; /* parked, read without the lock */
	weft_log_limit log;
};

int weft__kv_aborts_init(struct weft__kv_aborts *q);
/* weft__kv_aborts_fini frees the parked aborts (after the service
 * stopped: none is in flight). */
void weft__kv_aborts_fini(struct weft__kv_aborts *q);

struct weft__kv_counters {
	_Atomic uint64_t gets, get_misses, puts, deletes, writes_acked;
	_Atomic uint64_t quorum_failures, replicas_applied, replicas_stale;
	_Atomic uint64_t replica_failures, bad_requests, replicas_refused,
	    scans;
	_Atomic uint64_t writes_superseded, aborts_sent, replicas_aborted;
	_Atomic uint64_t aborts_dropped, reads_refused, repair_rounds;
	_Atomic uint64_t ranges_repaired, entries_pulled, entries_pulled_stale;
	_Atomic uint64_t bytes_pulled;
	_Atomic uint64_t reads_coordinated, read_disagreements, read_failures;
	_Atomic uint64_t read_repairs, reads_downgraded, read_answers_refused;
};

/* ---- Catch-up and anti-entropy (sync.c, repair.c) ----------------------- */

/* The members at one moment (weft_msvc_members), this node included. */
struct weft__kv_members {
	weft_msvc_peer **peers; /* small, or allocated */
	size_t count;
	weft_msvc_peer *small[16];
};

/* The thread that catches this replica up and runs anti-entropy rounds
 * (repair.c). */
struct weft__kv_repair {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* on the clock's monotonic time */
	bool running;        /* the thread was started */
	bool stopping;
	bool requested; /* weft_kv_repair asked for a round */
	uint32_t next;  /* the member the next round compares with */
	/* The members copied from so far while catching up. */
	weft_msvc_peer **copied;
	size_t ncopied;
	uint64_t catch_up_start_ns;
	weft_log_limit log;
};

struct weft_kv {
	weft_msvc *svc;
	weft_msvc_peer *self;
	struct weft__kv_quorum quorum_spec; /* resolved for each write */
	uint32_t read_consistency;          /* a get's, when it names none */
	_Atomic uint32_t members;           /* as last seen, for reports */
	_Atomic uint32_t quorum;            /* quorum_spec for members */
	_Atomic bool caught_up;             /* reads are answered */
	_Atomic bool members_known;         /* not awaiting discovery */
	_Atomic uint64_t born_ts; /* this run's first write's ts; 0: none */
	uint64_t repair_interval_ms;
	uint64_t replicate_timeout_ms;
	size_t max_value;
	uint64_t max_skew_ms;
	void (*on_caught_up)(weft_kv *kv, void *arg);
	void *on_caught_up_arg;
	_Atomic uint64_t clock; /* the hybrid clock's last timestamp */
	_Atomic bool watching;  /* weft_msvc_watch_members asked */
	struct weft__kv_counters st;
	struct weft__kv_store store;
	struct weft__kv_aborts aborts;
	struct weft__kv_repair repair;
};

/* weft__kv_members_get fills m with the members now; 0 or WEFT_ENOMEM.
 * weft__kv_members_fini frees what it took. Any thread. */
int weft__kv_members_get(weft_kv *kv, struct weft__kv_members *m);
void weft__kv_members_fini(struct weft__kv_members *m);
/* weft__kv_origin returns the id of the member (current or past) named
 * (id, len), which lives as long as the service, or NULL. Any thread. */
const char *weft__kv_origin(weft_kv *kv, const char *id, size_t len);

/* sync.c: the digest and pull verbs (members only), and the puller. */
void weft__kv_on_digest(weft_msvc *svc, weft_msvc_msg *msg, void *arg);
void weft__kv_on_pull(weft_msvc *svc, weft_msvc_msg *msg, void *arg);
/* weft__kv_digest_read fills out with this replica's range digests. */
void weft__kv_digest_read(weft_kv *kv, uint64_t out[WEFT__KV_RANGES]);
/*
 * weft__kv_pull copies from peer every entry of the ranges set in ranges
 * (a bitmap of WEFT__KV_RANGES bits; NULL: all) that is newer than this
 * replica's, page by page, with blocking calls. Returns 0, or the status
 * of the call that failed. Not from one of the service's loops.
 */
int weft__kv_pull(weft_kv *kv, weft_msvc_peer *peer, const uint8_t *ranges);
/* weft__kv_fetch_digest asks peer for its range digests; 0 or the
 * call's status. Not from one of the service's loops. */
int weft__kv_fetch_digest(weft_kv *kv, weft_msvc_peer *peer,
                          uint64_t out[WEFT__KV_RANGES]);

/* repair.c */
int weft__kv_repair_start(weft_kv *kv);
void weft__kv_repair_stop(weft_kv *kv);
/* weft__kv_aborts_forget drops the aborts parked for peer, a member that
 * left (abort.c). Any thread. */
void weft__kv_aborts_forget(weft_kv *kv, const weft_msvc_peer *peer);

/*
 * weft__kv_clock_next returns a timestamp above every one seen, or 0 when
 * the clock has reached its end (it never wraps; observe keeps it within
 * max_skew_ms of the wall clock, so only a wall clock past the year 10000
 * gets there).
 */
uint64_t weft__kv_clock_next(weft_kv *kv);
/*
 * weft__kv_clock_observe moves the clock up to ts, a version seen from
 * another member; returns 0, or WEFT_EINVAL (nothing changed) when ts is
 * more than max_skew_ms ahead of the cluster's time as this node reads
 * it (weft_msvc_cluster_wall_ms).
 */
int weft__kv_clock_observe(weft_kv *kv, uint64_t ts);

/* write.c: puts and deletes, coordinated by the node that receives them. */
void weft__kv_on_put(weft_msvc *svc, weft_msvc_msg *msg, void *arg);
void weft__kv_on_delete(weft_msvc *svc, weft_msvc_msg *msg, void *arg);
void weft__kv_on_replicate(weft_msvc *svc, weft_msvc_msg *msg, void *arg);

/*
 * weft__kv_abort takes back, on peer, the write of key at failed (one
 * this node coordinated and reported failed), sending it again until the
 * replica answers (abort.c). lane is the key's ordering key. Any thread.
 */
void weft__kv_abort(weft_kv *kv, weft_msvc_peer *peer, const void *key,
                    size_t key_len, const struct weft__kv_version *failed,
                    uint64_t lane);
/* weft__kv_aborts_retry sends again the parked aborts to peer (NULL: to
 * every replica) that is up now. Any thread. */
void weft__kv_aborts_retry(weft_kv *kv, const weft_msvc_peer *peer);

/* weft__kv_refuse_read answers msg (a get or scan) with OVERLOADED while
 * this replica is catching up, and returns whether it did. */
bool weft__kv_refuse_read(weft_kv *kv, weft_msvc_msg *msg);

/* read.c: gets, at one replica or coordinated across a quorum or all
 * (kv_get), and a replica's answer to a coordinator (kv_read). */
void weft__kv_on_get(weft_msvc *svc, weft_msvc_msg *msg, void *arg);
void weft__kv_on_read(weft_msvc *svc, weft_msvc_msg *msg, void *arg);

/* scan.c: ordered scans of this node's replica. */
void weft__kv_on_scan(weft_msvc *svc, weft_msvc_msg *msg, void *arg);

static inline void
weft__kv_count(_Atomic uint64_t *c)
{
	atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

#endif
