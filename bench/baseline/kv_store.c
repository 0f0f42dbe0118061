/* SPDX-License-Identifier: MIT */
/*
 * kv_store.c: the baseline replica: a hash map in 64 shards, each behind
 * a mutex, keys hashed with a random seed (keys come from the network).
 * Entries are never removed: a delete is a versioned tombstone. A new
 * key is also linked into the ordered index (kv_index.c) for scans.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "kv_int.h"

#define SHARD_MIN 64

wbase_blob *
wbase__blob_new(const void *data, size_t len)
{
	wbase_blob *b = malloc(sizeof(*b) + len);

	if (b == NULL)
		return NULL;
	atomic_init(&b->refs, 1);
	b->len = len;
	if (len > 0)
		memcpy(b->data, data, len);
	return b;
}

void
wbase__blob_unref(wbase_blob *b)
{
	if (b != NULL && atomic_fetch_sub(&b->refs, 1) == 1)
		free(b);
}

/* hash: FNV-1a from a secret seed, then a finalizer that spreads the
 * bits over the shard index (low bits) and the slot (high bits). */
static uint64_t
hash(const wbase_store *s, const uint8_t *p, size_t n)
{
	uint64_t h = s->seed ^ 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	h *= 0xc4ceb9fe1a85ec53ull;
	return h ^ (h >> 33);
}

int
wbase__store_init(wbase_store *s)
{
	memset(s, 0, sizeof(*s));
	if (wbase__index_init(&s->index) != 0)
		return WEFT_ENOMEM;
	if (getrandom(&s->seed, sizeof(s->seed), 0) != sizeof(s->seed))
		s->seed = (uint64_t)weft_now_ns() * 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < WBASE_KV_SHARDS; i++)
		pthread_mutex_init(&s->shards[i].lock, NULL);
	return 0;
}

void
wbase__store_fini(wbase_store *s)
{
	for (size_t i = 0; i < WBASE_KV_SHARDS; i++) {
		wbase_shard *sh = &s->shards[i];

		for (size_t j = 0; j < sh->cap; j++) {
			if (sh->slots[j] == NULL)
				continue;
			wbase__blob_unref(sh->slots[j]->value);
			free(sh->slots[j]);
		}
		free(sh->slots);
		pthread_mutex_destroy(&sh->lock);
	}
	wbase__index_fini(&s->index);
}

/* find returns the slot of key in sh: its entry, or the empty slot where
 * it would go. Requires the shard's lock and cap > 0. */
static wbase_entry **
find(wbase_shard *sh, uint64_t h, const uint8_t *key, size_t key_len)
{
	size_t i = (size_t)(h >> 16) & (sh->cap - 1);

	for (;; i = (i + 1) & (sh->cap - 1)) {
		wbase_entry *e = sh->slots[i];

		if (e == NULL || (e->hash == h && e->key_len == key_len &&
		                  memcmp(e->key, key, key_len) == 0))
			return &sh->slots[i];
	}
}

/* grow doubles the shard's table. Requires its lock. */
static int
grow(wbase_shard *sh)
{
	size_t cap = sh->cap ? sh->cap * 2 : SHARD_MIN, old = sh->cap;
	wbase_entry **slots = calloc(cap, sizeof(*slots)), **from = sh->slots;

	if (slots == NULL)
		return WEFT_ENOMEM;
	sh->slots = slots;
	sh->cap = cap;
	for (size_t i = 0; i < old; i++)
		if (from[i] != NULL)
			*find(sh, from[i]->hash, from[i]->key,
			      from[i]->key_len) = from[i];
	free(from);
	return 0;
}

static int
version_cmp(const wbase_version *a, const wbase_version *b)
{
	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	return strcmp(a->origin, b->origin);
}

/* insert adds a new entry at slot, and the index node (*node) that links
 * it once the shard's lock is released. Requires the lock. */
static int
insert(wbase_store *s, wbase_entry **slot, uint64_t h, const void *key,
       size_t key_len, wbase_blob *value, const wbase_version *ver,
       wbase_index_node **node)
{
	wbase_entry *e = malloc(sizeof(*e) + key_len);

	if (e == NULL)
		return WEFT_ENOMEM;
	e->hash = h;
	if ((*node = wbase__index_node_new(e)) == NULL) {
		free(e);
		return WEFT_ENOMEM;
	}
	e->value = value;
	e->ver = *ver;
	e->key_len = key_len;
	memcpy(e->key, key, key_len);
	if (value != NULL)
		atomic_fetch_add(&value->refs, 1);
	*slot = e;
	atomic_fetch_add_explicit(&s->keys, 1, memory_order_relaxed);
	return 1;
}

int
wbase__store_apply(wbase_store *s, const void *key, size_t key_len,
                   wbase_blob *value, const wbase_version *ver)
{
	uint64_t h = hash(s, key, key_len);
	wbase_shard *sh = &s->shards[h % WBASE_KV_SHARDS];
	wbase_index_node *node = NULL;
	wbase_blob *old = NULL;
	wbase_entry **slot;
	int rv = 0, cmp;

	pthread_mutex_lock(&sh->lock);
	if ((sh->len + 1) * 4 > sh->cap * 3 && (rv = grow(sh)) != 0)
		goto out;
	slot = find(sh, h, key, key_len);
	if (*slot == NULL) {
		if ((rv = insert(s, slot, h, key, key_len, value, ver, &node)) >
		    0)
			sh->len++;
	} else if ((cmp = version_cmp(ver, &(*slot)->ver)) > 0) {
		old = (*slot)->value;
		(*slot)->value = value;
		(*slot)->ver = *ver;
		if (value != NULL)
			atomic_fetch_add(&value->refs, 1);
		rv = 1;
	} else if (cmp < 0) {
		rv = WBASE_SUPERSEDED;
	}
out:
	pthread_mutex_unlock(&sh->lock);
	if (node != NULL)
		wbase__index_link(&s->index, node);
	wbase__blob_unref(old);
	return rv;
}

wbase_blob *
wbase__store_get(wbase_store *s, const void *key, size_t key_len,
                 wbase_version *ver)
{
	uint64_t h = hash(s, key, key_len);
	wbase_shard *sh = &s->shards[h % WBASE_KV_SHARDS];
	wbase_blob *b = NULL;
	wbase_entry **slot;

	if (ver != NULL)
		*ver = (wbase_version){0, ""};
	pthread_mutex_lock(&sh->lock);
	if (sh->cap > 0 && *(slot = find(sh, h, key, key_len)) != NULL) {
		if ((b = (*slot)->value) != NULL)
			atomic_fetch_add(&b->refs, 1);
		if (ver != NULL)
			*ver = (*slot)->ver;
	}
	pthread_mutex_unlock(&sh->lock);
	return b;
}

wbase_blob *
wbase__store_entry_value(wbase_store *s, const wbase_entry *e)
{
	wbase_shard *sh = &s->shards[e->hash % WBASE_KV_SHARDS];
	wbase_blob *b;

	pthread_mutex_lock(&sh->lock);
	if ((b = e->value) != NULL)
		atomic_fetch_add(&b->refs, 1);
	pthread_mutex_unlock(&sh->lock);
	return b;
}
