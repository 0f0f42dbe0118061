/* SPDX-License-Identifier: MIT */
/*
 * kv_index.c: the baseline replica's ordered key index, for scans: a
 * skip list of the map's entries in the byte order of their keys, behind
 * one reader-writer lock, as a thread-per-peer service would keep a
 * sorted map beside its hash map. Entries are never removed from the map,
 * so the list only grows; a new key is linked after its shard's lock is
 * released, so no thread holds a shard's lock while waiting for this one.
 * A node's height comes from hash bits that pick neither shard nor slot.
 */
#include <stdlib.h>
#include <string.h>

#include "kv_int.h"

struct wbase_index_node {
	const wbase_entry *entry;
	unsigned height;
	struct wbase_index_node *next[];
};

int
wbase__key_cmp(const void *a, size_t a_len, const void *b, size_t b_len)
{
	int c = memcmp(a, b, a_len < b_len ? a_len : b_len);

	return c != 0 ? c : (a_len > b_len) - (a_len < b_len);
}

int
wbase__index_init(wbase_index *ix)
{
	memset(ix, 0, sizeof(*ix));
	ix->head = calloc(1, sizeof(*ix->head) + WBASE_INDEX_HEIGHT *
	                                             sizeof(ix->head->next[0]));
	if (ix->head == NULL)
		return WEFT_ENOMEM;
	ix->head->height = WBASE_INDEX_HEIGHT;
	pthread_rwlock_init(&ix->lock, NULL);
	return 0;
}

void
wbase__index_fini(wbase_index *ix)
{
	wbase_index_node *n, *next;

	if (ix->head == NULL)
		return;
	for (n = ix->head->next[0]; n != NULL; n = next) {
		next = n->next[0];
		free(n);
	}
	free(ix->head);
	pthread_rwlock_destroy(&ix->lock);
}

wbase_index_node *
wbase__index_node_new(const wbase_entry *e)
{
	uint64_t bits = e->hash >> 40;
	unsigned height = 1;
	wbase_index_node *n;

	while (height < WBASE_INDEX_HEIGHT && (bits & 3) == 0) {
		height++;
		bits >>= 2;
	}
	if ((n = calloc(1, sizeof(*n) + height * sizeof(n->next[0]))) == NULL)
		return NULL;
	n->entry = e;
	n->height = height;
	return n;
}

/* find_before fills prev[h] with the last node of level h sorting before
 * key. Requires the lock. */
static void
find_before(wbase_index *ix, const void *key, size_t key_len,
            wbase_index_node **prev)
{
	wbase_index_node *x = ix->head;

	for (unsigned h = WBASE_INDEX_HEIGHT; h-- > 0;) {
		while (x->next[h] != NULL &&
		       wbase__key_cmp(x->next[h]->entry->key,
		                      x->next[h]->entry->key_len, key,
		                      key_len) < 0)
			x = x->next[h];
		prev[h] = x;
	}
}

void
wbase__index_link(wbase_index *ix, wbase_index_node *n)
{
	wbase_index_node *prev[WBASE_INDEX_HEIGHT];

	pthread_rwlock_wrlock(&ix->lock);
	find_before(ix, n->entry->key, n->entry->key_len, prev);
	for (unsigned h = 0; h < n->height; h++) {
		n->next[h] = prev[h]->next[h];
		prev[h]->next[h] = n;
	}
	pthread_rwlock_unlock(&ix->lock);
}

void
wbase__index_walk(wbase_index *ix, const void *start, size_t start_len,
                  bool (*visit)(const wbase_entry *e, void *arg), void *arg)
{
	wbase_index_node *prev[WBASE_INDEX_HEIGHT], *n;

	pthread_rwlock_rdlock(&ix->lock);
	find_before(ix, start, start_len, prev);
	for (n = prev[0]->next[0]; n != NULL && visit(n->entry, arg);
	     n = n->next[0])
		;
	pthread_rwlock_unlock(&ix->lock);
}
