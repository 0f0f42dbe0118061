/* SPDX-License-Identifier: MIT */
/* kv_int.h: the baseline key-value service's replica, shared by kv.c and
 * kv_store.c. */
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

/* A shard: open addressing (linear probing, power-of-two size, at most
 * 3/4 full) under its own mutex, held for a lookup or an update only. */
typedef struct wbase_shard {
	pthread_mutex_t lock;
	struct wbase_entry **slots;
	size_t cap, len;
} __attribute__((aligned(64))) wbase_shard;

typedef struct wbase_store {
	wbase_shard shards[WBASE_KV_SHARDS];
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
 * caller, or NULL (absent or deleted). Any thread. */
wbase_blob *wbase__store_get(wbase_store *s, const void *key, size_t key_len);

#endif
