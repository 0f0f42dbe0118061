/* SPDX-License-Identifier: MIT */
/* store.c: one node's replica: sharded hash tables of versioned values,
 * and the ordered index of their keys (index.c). */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "kv_int.h"

#define INITIAL_CAP 16

struct weft__kv_blob *
weft__kv_blob_new(const void *data, size_t len)
{
	struct weft__kv_blob *b;

	if ((b = malloc(sizeof(*b) + len)) == NULL)
		return NULL;
	atomic_init(&b->refs, 1);
	b->len = len;
	if (len > 0)
		memcpy(b->data, data, len);
	return b;
}

void
weft__kv_blob_ref(struct weft__kv_blob *b)
{
	atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
}

void
weft__kv_blob_unref(struct weft__kv_blob *b)
{
	if (b != NULL &&
	    atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1)
		free(b);
}

static void
blob_release(const void *data, size_t len, void *arg)
{
	(void)data;
	(void)len;
	weft__kv_blob_unref(arg);
}

int
weft__kv_blob_lend(struct weft__kv_blob *b, struct evbuffer *buf)
{
	weft__kv_blob_ref(b);
	if (evbuffer_add_reference(buf, b->data, b->len, blob_release, b) !=
	    0) {
		weft__kv_blob_unref(b);
		return WEFT_ENOMEM;
	}
	return 0;
}

int
weft__kv_version_cmp(const struct weft__kv_version *a,
                     const struct weft__kv_version *b)
{
	if (a->ts != b->ts)
		return a->ts < b->ts ? -1 : 1;
	return strcmp(a->origin, b->origin);
}

/* ---- SipHash-2-4 (Aumasson and Bernstein) ------------------------------ */

#define ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))

static void
sip_round(uint64_t v[4])
{
	v[0] += v[1];
	v[1] = ROTL(v[1], 13) ^ v[0];
	v[0] = ROTL(v[0], 32);
	v[2] += v[3];
	v[3] = ROTL(v[3], 16) ^ v[2];
	v[0] += v[3];
	v[3] = ROTL(v[3], 21) ^ v[0];
	v[2] += v[1];
	v[1] = ROTL(v[1], 17) ^ v[2];
	v[2] = ROTL(v[2], 32);
}

static uint64_t
load_le64(const uint8_t *p, size_t n)
{
	uint64_t v = 0;
	size_t i;

	for (i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

uint64_t
weft__kv_siphash(const uint64_t key[2], const void *data, size_t len)
{
	const uint8_t *p = data;
	uint64_t v[4], m;
	size_t i, blocks = len / 8;

	v[0] = key[0] ^ 0x736f6d6570736575ull;
	v[1] = key[1] ^ 0x646f72616e646f6dull;
	v[2] = key[0] ^ 0x6c7967656e657261ull;
	v[3] = key[1] ^ 0x7465646279746573ull;
	for (i = 0; i <= blocks; i++) {
		if (i < blocks)
			m = load_le64(p + 8 * i, 8);
		else
			m = load_le64(p + 8 * i, len % 8) |
			    ((uint64_t)(len & 0xff) << 56);
		v[3] ^= m;
		sip_round(v);
		sip_round(v);
		v[0] ^= m;
	}
	v[2] ^= 0xff;
	for (i = 0; i < 4; i++)
		sip_round(v);
	return v[0] ^ v[1] ^ v[2] ^ v[3];
}

/* The ring hash's key: the same on every member, so that a key falls in
 * the same range everywhere. Not secret: ranges are compared, never
 * probed, so an attacker choosing keys gains only unevenly sized ranges. */
static const uint64_t ring_key[2] = {0x7765667472696e67ull,
                                     0x72616e6765730001ull};

uint64_t
weft__kv_ring_hash(const void *key, size_t key_len)
{
	return weft__kv_siphash(ring_key, key, key_len);
}

/* An entry's digest at ver: a hash of its key's ring hash and the version
 * (0 for an entry without one yet). */
static uint64_t
entry_digest(const struct weft__kv_entry *e, const struct weft__kv_version *ver)
{
	uint64_t words[3];

	if (ver->origin == NULL)
		return 0;
	words[0] = e->ring;
	words[1] = ver->ts;
	words[2] = weft__kv_siphash(ring_key, ver->origin, strlen(ver->origin));
	return weft__kv_siphash(ring_key, words, sizeof(words));
}

/* ---- Shards ------------------------------------------------------------- */

int
weft__kv_store_init(struct weft__kv_store *s)
{
	size_t i;

	memset(s, 0, sizeof(*s));
	if (getrandom(s->seed, sizeof(s->seed), 0) != sizeof(s->seed)) {
		/* No entropy yet: still a keyed hash, just a guessable key. */
		s->seed[0] = weft_now_ns();
		s->seed[1] = (uint64_t)(uintptr_t)s ^ weft_wall_ms();
	}
	if (weft__kv_index_init(&s->index) != 0)
		return WEFT_ENOMEM;
	for (i = 0; i < WEFT__KV_SHARDS; i++) {
		if (pthread_mutex_init(&s->shards[i].lock, NULL) != 0)
			goto err_locks;
	}
	return 0;

err_locks:
	while (i-- > 0)
		pthread_mutex_destroy(&s->shards[i].lock);
	weft__kv_index_fini(&s->index);
	return WEFT_ENOMEM;
}

void
weft__kv_store_fini(struct weft__kv_store *s)
{
	struct weft__kv_shard *sh;
	size_t i, j;

	for (i = 0; i < WEFT__KV_SHARDS; i++) {
		sh = &s->shards[i];
		for (j = 0; j < sh->cap; j++) {
			if (sh->slots[j] == NULL)
				continue;
			weft__kv_blob_unref(sh->slots[j]->value);
			free(sh->slots[j]);
		}
		free(sh->slots);
		pthread_mutex_destroy(&sh->lock);
	}
	weft__kv_index_fini(&s->index);
}

static struct weft__kv_shard *
shard_for(struct weft__kv_store *s, uint64_t hash)
{
	/* The top bits pick the shard, the low bits the slot. */
	return &s->shards[hash >> 58];
}

/* Returns the slot holding key, or the empty slot where it would go.
 * Requires the shard's lock and a table that is not full. */
static size_t
find_slot(const struct weft__kv_shard *sh, uint64_t hash, const void *key,
          size_t key_len)
{
	size_t mask = sh->cap - 1, i = hash & mask;
	const struct weft__kv_entry *e;

	while ((e = sh->slots[i]) != NULL) {
		if (e->hash == hash && e->key_len == key_len &&
		    memcmp(e->key, key, key_len) == 0)
			return i;
		i = (i + 1) & mask;
	}
	return i;
}

/* Doubles the table (or makes the first). Requires the shard's lock. */
static int
grow(struct weft__kv_shard *sh)
{
	size_t cap = sh->cap ? sh->cap * 2 : INITIAL_CAP, i, j;
	struct weft__kv_entry **old = sh->slots, *e;

	if ((sh->slots = calloc(cap, sizeof(*sh->slots))) == NULL) {
		sh->slots = old;
		return WEFT_ENOMEM;
	}
	for (i = 0; i < sh->cap; i++) {
		if ((e = old[i]) == NULL)
			continue;
		j = e->hash & (cap - 1);
		while (sh->slots[j] != NULL)
			j = (j + 1) & (cap - 1);
		sh->slots[j] = e;
	}
	free(old);
	sh->cap = cap;
	return 0;
}

/* Adds a new entry at slot i, and makes the node (*node) that links it
 * into the index once the shard's lock is released. Requires the lock. */
static int
insert(struct weft__kv_store *s, struct weft__kv_shard *sh, uint64_t hash,
       const void *key, size_t key_len, size_t *slot,
       struct weft__kv_index_node **node)
{
	struct weft__kv_entry *e;
	int rv;

	if ((sh->len + 1) * 4 > sh->cap * 3) {
		if ((rv = grow(sh)) != 0)
			return rv;
		*slot = find_slot(sh, hash, key, key_len);
	}
	if ((e = calloc(1, sizeof(*e) + key_len)) == NULL)
		return WEFT_ENOMEM;
	e->hash = hash;
	e->ring = weft__kv_ring_hash(key, key_len);
	e->key_len = (uint32_t)key_len;
	memcpy(e->key, key, key_len);
	if ((*node = weft__kv_index_node_new(e)) == NULL) {
		free(e);
		return WEFT_ENOMEM;
	}
	sh->slots[*slot] = e;
	sh->len++;
	atomic_fetch_add_explicit(&s->keys, 1, memory_order_relaxed);
	return 0;
}

/* Finds key's entry, adding it (with no version) if absent; *node is the
 * index node to link for a new one. Requires the shard's lock. */
static int
entry_for(struct weft__kv_store *s, struct weft__kv_shard *sh, uint64_t hash,
          const void *key, size_t key_len, struct weft__kv_entry **e,
          struct weft__kv_index_node **node)
{
	size_t slot;
	int rv;

	if (sh->cap == 0 && (rv = grow(sh)) != 0)
		return rv;
	slot = find_slot(sh, hash, key, key_len);
	if (sh->slots[slot] == NULL &&
	    (rv = insert(s, sh, hash, key, key_len, &slot, node)) != 0)
		return rv;
	*e = sh->slots[slot];
	return 0;
}

/* Makes (value, ver) e's state and releases the shard's lock; links node
 * (a new entry's) into the index. Returns WEFT__KV_APPLIED. */
static int
replace(struct weft__kv_store *s, struct weft__kv_shard *sh,
        struct weft__kv_entry *e, struct weft__kv_index_node *node,
        struct weft__kv_blob *value, const struct weft__kv_version *ver)
{
	struct weft__kv_blob *old = e->value;

	if (value != NULL)
		weft__kv_blob_ref(value);
	e->value = value;
	atomic_fetch_xor_explicit(&s->digest[weft__kv_range(e->ring)],
	                          entry_digest(e, &e->ver) ^
	                              entry_digest(e, ver),
	                          memory_order_relaxed);
	e->ver = *ver;
	pthread_mutex_unlock(&sh->lock);
	if (node != NULL)
		weft__kv_index_link(&s->index, node);
	atomic_fetch_add_explicit(&s->value_bytes, value ? value->len : 0,
	                          memory_order_relaxed);
	if (old != NULL) {
		atomic_fetch_sub_explicit(&s->value_bytes, old->len,
		                          memory_order_relaxed);
		weft__kv_blob_unref(old);
	}
	return WEFT__KV_APPLIED;
}

/* What applying ver to e would do: WEFT__KV_APPLIED (it is newer), or
 * the weft__kv_applied that leaves e as it is. */
static int
outcome(const struct weft__kv_entry *e, const struct weft__kv_version *ver)
{
	int cmp;

	if (e->aborted.origin != NULL &&
	    weft__kv_version_cmp(ver, &e->aborted) == 0)
		return WEFT__KV_ABORTED;
	/* A new entry has no version yet: anything is newer. */
	if (e->ver.origin == NULL ||
	    (cmp = weft__kv_version_cmp(ver, &e->ver)) > 0)
		return WEFT__KV_APPLIED;
	return cmp < 0 ? WEFT__KV_SUPERSEDED : WEFT__KV_HELD;
}

int
weft__kv_store_apply(struct weft__kv_store *s, const void *key, size_t key_len,
                     struct weft__kv_blob *value,
                     const struct weft__kv_version *ver)
{
	uint64_t hash = weft__kv_siphash(s->seed, key, key_len);
	struct weft__kv_shard *sh = shard_for(s, hash);
	struct weft__kv_index_node *node = NULL;
	struct weft__kv_entry *e;
	int rv;

	pthread_mutex_lock(&sh->lock);
	if ((rv = entry_for(s, sh, hash, key, key_len, &e, &node)) == 0 &&
	    (rv = outcome(e, ver)) == WEFT__KV_APPLIED)
		return replace(s, sh, e, node, value, ver);
	pthread_mutex_unlock(&sh->lock);
	return rv;
}

int
weft__kv_store_abort(struct weft__kv_store *s, const void *key, size_t key_len,
                     const struct weft__kv_version *failed,
                     struct weft__kv_blob *value,
                     const struct weft__kv_version *ver)
{
	uint64_t hash = weft__kv_siphash(s->seed, key, key_len);
	struct weft__kv_shard *sh = shard_for(s, hash);
	struct weft__kv_index_node *node = NULL;
	struct weft__kv_entry *e;
	int rv;

	pthread_mutex_lock(&sh->lock);
	if ((rv = entry_for(s, sh, hash, key, key_len, &e, &node)) == 0) {
		e->aborted = *failed;
		/* The failed write is the key's state: back to the
		 * coordinator's, older or not. */
		if (e->ver.origin != NULL &&
		    weft__kv_version_cmp(failed, &e->ver) == 0)
			return replace(s, sh, e, node, value, ver);
		if ((rv = outcome(e, ver)) == WEFT__KV_APPLIED)
			return replace(s, sh, e, node, value, ver);
		if (rv == WEFT__KV_ABORTED)
			rv = WEFT__KV_SUPERSEDED;
	}
	pthread_mutex_unlock(&sh->lock);
	return rv;
}

struct weft__kv_blob *
weft__kv_store_get(struct weft__kv_store *s, const void *key, size_t key_len,
                   struct weft__kv_version *ver)
{
	uint64_t hash = weft__kv_siphash(s->seed, key, key_len);
	struct weft__kv_shard *sh = shard_for(s, hash);
	struct weft__kv_blob *b = NULL;
	struct weft__kv_entry *e;

	if (ver != NULL)
		*ver = (struct weft__kv_version){0, ""};
	pthread_mutex_lock(&sh->lock);
	if (sh->cap > 0 &&
	    (e = sh->slots[find_slot(sh, hash, key, key_len)]) != NULL) {
		if ((b = e->value) != NULL)
			weft__kv_blob_ref(b);
		if (ver != NULL)
			*ver = e->ver;
	}
	pthread_mutex_unlock(&sh->lock);
	return b;
}

struct weft__kv_blob *
weft__kv_store_entry_value(struct weft__kv_store *s,
                           const struct weft__kv_entry *e,
                           struct weft__kv_version *ver)
{
	struct weft__kv_shard *sh = shard_for(s, e->hash);
	struct weft__kv_blob *b;

	pthread_mutex_lock(&sh->lock);
	if ((b = e->value) != NULL)
		weft__kv_blob_ref(b);
	if (ver != NULL)
		*ver = e->ver;
	pthread_mutex_unlock(&sh->lock);
	return b;
}
