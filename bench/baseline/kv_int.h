/* SPDX-License-Identifier: MIT */
/* kv_int.h: the baseline key-value service's replica and its ordered
 * index, shared by kv.c, kv_scan.c, kv_store.c and kv_index.c. */
#ifndef WBASE_KV_INT_H
#define WBASE_KV_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "baseline.h"

/* An immutable value, shared by the map and the gets reading it. */
typedef struct wbase_blob {
	atomic_uint refs;
	size_t len;
	uint8_t data[];
} wbase_blob;

/* wbase__blob_new copies len bytes into a blob with one reference. */
wbase_blob *wbase__blob_new(const void *data, size_t len);
/* wbase__blob_unref drops a reference; NULL is ignored. */
void wbase__blob_unref(wbase_blob *b);

/* A write's version: hybrid-clock timestamp, then the coordinator's id
 * (a peer id of the node: it outlives the store), last writer wins. */
typedef struct wbase_version {
	uint64_t ts;
	const char *origin;
} wbase_version;

#define WBASE_KV_SHARDS 64

/* One key of the map: its latest version and value. */
typedef struct wbase_entry {
	uint64_t hash;
	wbase_blob *value; /* NULL: deleted */
	wbase_version ver;
	size_t key_len;
	uint8_t key[];
} wbase_entry;

/* The ordered index (kv_index.c): every key of the map in byte order,
 * tombstones included, linked once and never unlinked. */
#define WBASE_INDEX_HEIGHT 16
typedef struct wbase_index_node wbase_index_node;
typedef struct wbase_index {
	pthread_rwlock_t lock;
	wbase_index_node *head;
} wbase_index;

/* wbase__key_cmp orders keys bytewise, a prefix first. */
int wbase__key_cmp(const void *a, size_t a_len, const void *b, size_t b_len);
int wbase__index_init(wbase_index *ix);
void wbase__index_fini(wbase_index *ix);
/* wbase__index_node_new makes the node that will link e, or NULL. */
wbase_index_node *wbase__index_node_new(const wbase_entry *e);
/* wbase__index_link links it (write lock). Any thread. */
void wbase__index_link(wbase_index *ix, wbase_index_node *n);
/* wbase__index_walk calls visit for each entry from start on, in order,
 * until it returns false, under the read lock. Any thread. */
void wbase__index_walk(wbase_index *ix, const void *start, size_t start_len,
                       bool (*visit)(const wbase_entry *e, void *arg),
                       void *arg);

/* A shard: open addressing (linear probing, power-of-two size, at most
 * 3/4 full) under its own mutex, held for a lookup or an update only. */
typedef struct wbase_shard {
	pthread_mutex_t lock;
	struct wbase_entry **slots;
	size_t cap, len;
} __attribute__((aligned(64))) wbase_shard;

typedef struct wbase_store {
	wbase_shard shards[WBASE_KV_SHARDS];
	wbase_index index;
	uint64_t seed;
	atomic_uint_fast64_t keys;
} wbase_store;

int wbase__store_init(wbase_store *s);
void wbase__store_fini(wbase_store *s);
/* wbase__store_apply makes (value, ver) the key's state if ver is newer
 * (value NULL: a tombstone; the store takes its own reference). Returns 1
 * (applied), 0 (this version is held already), WBASE_SUPERSEDED (a newer
 * one is) or WEFT_ENOMEM, as weft's service does. Any thread. */
#define WBASE_SUPERSEDED 2
int wbase__store_apply(wbase_store *s, const void *key, size_t key_len,
                       wbase_blob *value, const wbase_version *ver);
/* wbase__store_get returns the live value with a reference for the
 * caller, or NULL (absent or deleted); ver, if not NULL, receives its
 * version (ts 0, origin "": absent). Any thread. */
wbase_blob *wbase__store_get(wbase_store *s, const void *key, size_t key_len,
                             wbase_version *ver);
/* wbase__store_entry_value returns the live value of e, an entry of s,
 * with a reference, or NULL for a tombstone. Any thread. */
wbase_blob *wbase__store_entry_value(wbase_store *s, const wbase_entry *e);

/* The service (kv.c), shared with the scan handler (kv_scan.c). */
struct wbase_kv {
	wbase_node *node;
	const char *self_id;
	uint32_t members, quorum;
	uint64_t replicate_timeout_ms;
	atomic_uint_fast64_t clock; /* the hybrid clock's last timestamp */
	atomic_uint_fast64_t gets, get_misses, puts, deletes, writes_acked;
	atomic_uint_fast64_t quorum_failures, replicas_applied;
	atomic_uint_fast64_t replicas_stale, replica_failures, bad_requests;
	atomic_uint_fast64_t scans;
	atomic_uint_fast64_t reads_coordinated, read_disagreements;
	atomic_uint_fast64_t read_failures;
	wbase_store store;
};

/* wbase__kv_on_read answers kv_read (71) of <weft/kv.h>: this replica's
 * entry of a key with its version (kv_read.c). */
void wbase__kv_on_read(wbase_node *node, wbase_msg *msg, void *arg);
/* wbase__kv_read_coordinate answers a get of key at consistency cl
 * (WEFT_KV_READ_QUORUM or _ALL) by reading every member's entry, as weft's
 * service does (kv_read.c). */
void wbase__kv_read_coordinate(wbase_kv *kv, wbase_msg *msg, const void *key,
                               size_t key_len, uint32_t cl);
/* wbase__kv_answer_value answers a get with b (consumed; NULL: not
 * found). */
void wbase__kv_answer_value(wbase_kv *kv, wbase_msg *msg, wbase_blob *b);
/* wbase__kv_origin finds the member named (id, len), or NULL. */
const char *wbase__kv_origin(wbase_kv *kv, const char *id, size_t len);

/* wbase__kv_on_scan answers the scan verb (68) of <weft/kv.h>. */
void wbase__kv_on_scan(wbase_node *node, wbase_msg *msg, void *arg);

#endif
