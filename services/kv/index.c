/* SPDX-License-Identifier: MIT */
/*
 * index.c: the replica's ordered key index, for scans: a skip list (Pugh,
 * 1990) of the store's entries in the byte order of their keys, under one
 * reader-writer lock.
 *
 * Entries are never removed from the store (a delete is a tombstone), so
 * the index only grows: a new key is linked once, after its shard's lock
 * is released, and a scan walks the list under the read lock. Neither
 * glibc, libevent nor msgpack-c has an ordered map; libbsd's <sys/tree.h>
 * does not build under strict C11 (its RB_GENERATE_STATIC needs a
 * __unused that libbsd leaves undefined on purpose), so the list is here.
 *
 * A node's height comes from bits of its entry's keyed hash that pick
 * neither the shard nor the slot: geometric with p = 1/4, and not
 * predictable from outside, since the hash key is secret.
 */
#include <stdlib.h>
#include <string.h>

#include "kv_int.h"

struct weft__kv_index_node {
	struct weft__kv_entry *entry;
	uint32_t height;
	struct weft__kv_index_node *next[];
};

int
weft__kv_key_cmp(const void *a, size_t a_len, const void *b, size_t b_len)
{
	int c = memcmp(a, b, a_len < b_len ? a_len : b_len);

	if (c != 0)
		return c;
	return (a_len > b_len) - (a_len < b_len);
}

/* height_of draws a height from hash bits 24 to 57, two at a time. */
static uint32_t
height_of(uint64_t hash)
{
	uint64_t bits = (hash >> 24) & ((1ull << 34) - 1);
	uint32_t h = 1;

	while (h < WEFT__KV_INDEX_HEIGHT && (bits & 3) == 0) {
		h++;
		bits >>= 2;
	}
	return h;
}

int
weft__kv_index_init(struct weft__kv_index *ix)
{
	memset(ix, 0, sizeof(*ix));
	ix->head = calloc(1, sizeof(*ix->head) + WEFT__KV_INDEX_HEIGHT *
	                                             sizeof(ix->head->next[0]));
	if (ix->head == NULL)
		return WEFT_ENOMEM;
	ix->head->height = WEFT__KV_INDEX_HEIGHT;
	if (pthread_rwlock_init(&ix->lock, NULL) != 0) {
		free(ix->head);
		return WEFT_ENOMEM;
	}
	return 0;
}

void
weft__kv_index_fini(struct weft__kv_index *ix)
{
	struct weft__kv_index_node *n, *next;

	if (ix->head == NULL)
		return;
	for (n = ix->head->next[0]; n != NULL; n = next) {
		next = n->next[0];
		free(n);
	}
	free(ix->head);
	pthread_rwlock_destroy(&ix->lock);
}

struct weft__kv_index_node *
weft__kv_index_node_new(struct weft__kv_entry *e)
{
	uint32_t height = height_of(e->hash);
	struct weft__kv_index_node *n;

	n = calloc(1, sizeof(*n) + height * sizeof(n->next[0]));
	if (n == NULL)
		return NULL;
	n->entry = e;
	n->height = height;
	return n;
}

/* node_before reports whether n's key sorts before key. */
static bool
node_before(const struct weft__kv_index_node *n, const void *key,
            size_t key_len)
{
	return n != NULL && weft__kv_key_cmp(n->entry->key, n->entry->key_len,
	                                     key, key_len) < 0;
}

/* find_before fills prev[h] with the last node of each level whose key
 * sorts before key (the head if none). Requires the lock. */
static void
find_before(struct weft__kv_index *ix, const void *key, size_t key_len,
            struct weft__kv_index_node **prev)
{
	struct weft__kv_index_node *x = ix->head;

	for (uint32_t h = WEFT__KV_INDEX_HEIGHT; h-- > 0;) {
		while (node_before(x->next[h], key, key_len))
			x = x->next[h];
		prev[h] = x;
	}
}

void
weft__kv_index_link(struct weft__kv_index *ix, struct weft__kv_index_node *n)
{
	struct weft__kv_index_node *prev[WEFT__KV_INDEX_HEIGHT];

	pthread_rwlock_wrlock(&ix->lock);
	find_before(ix, n->entry->key, n->entry->key_len, prev);
	for (uint32_t h = 0; h < n->height; h++) {
		n->next[h] = prev[h]->next[h];
		prev[h]->next[h] = n;
	}
	ix->len++;
	pthread_rwlock_unlock(&ix->lock);
}

size_t
weft__kv_index_walk(struct weft__kv_index *ix, const void *start,
                    size_t start_len, weft__kv_index_visit_cb visit, void *arg)
{
	struct weft__kv_index_node *prev[WEFT__KV_INDEX_HEIGHT], *n;
	size_t visited = 0;

	pthread_rwlock_rdlock(&ix->lock);
	find_before(ix, start, start_len, prev);
	for (n = prev[0]->next[0]; n != NULL; n = n->next[0]) {
		visited++;
		if (!visit(n->entry, arg))
			break;
	}
	pthread_rwlock_unlock(&ix->lock);
	return visited;
}
