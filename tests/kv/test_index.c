/* SPDX-License-Identifier: MIT */
/* test_index.c: the replica's ordered key index (white-box:
 * services/kv/kv_int.h), through the store that keeps it. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kv_int.h"

static int
put(struct weft__kv_store *s, const char *key, uint64_t ts)
{
	struct weft__kv_blob *b = weft__kv_blob_new(key, strlen(key));
	struct weft__kv_version v = {ts, "n1"};
	int rv;

	assert_non_null(b);
	rv = weft__kv_store_apply(s, key, strlen(key), b, &v);
	weft__kv_blob_unref(b);
	return rv;
}

/* A walk that copies up to 64 keys (NUL-terminated) into keys. */
struct collect {
	char keys[64][32];
	size_t n, stop_after;
	bool ordered; /* each key sorted after the one before */
};

static bool
collect_visit(struct weft__kv_entry *e, void *arg)
{
	struct collect *c = arg;

	assert_true(e->key_len < sizeof(c->keys[0]));
	if (c->n > 0 &&
	    weft__kv_key_cmp(c->keys[c->n - 1], strlen(c->keys[c->n - 1]),
	                     e->key, e->key_len) >= 0)
		c->ordered = false;
	memcpy(c->keys[c->n], e->key, e->key_len);
	c->keys[c->n][e->key_len] = '\0';
	return ++c->n < c->stop_after && c->n < 64;
}

static struct collect *
walk(struct weft__kv_store *s, const char *start, size_t stop_after)
{
	static struct collect c;

	memset(&c, 0, sizeof(c));
	c.ordered = true;
	c.stop_after = stop_after;
	weft__kv_index_walk(&s->index, start, strlen(start), collect_visit, &c);
	return &c;
}

static void
test_keys_compare_bytewise_with_a_prefix_first(void **state)
{
	(void)state;
	assert_true(weft__kv_key_cmp("a", 1, "b", 1) < 0);
	assert_true(weft__kv_key_cmp("a", 1, "ab", 2) < 0);
	assert_true(weft__kv_key_cmp("ab", 2, "b", 1) < 0);
	assert_true(weft__kv_key_cmp("b", 1, "ab", 2) > 0);
	assert_true(weft__kv_key_cmp("\xff", 1, "\x01", 1) > 0);
	assert_int_equal(weft__kv_key_cmp("same", 4, "same", 4), 0);
	assert_int_equal(weft__kv_key_cmp("", 0, "", 0), 0);
}

static void
test_walk_visits_keys_in_order_from_the_start(void **state)
{
	static const char *const keys[] = {"m", "b", "ab", "a", "zz",
	                                   "c", "z", "ba", "mm"};
	struct weft__kv_store s;
	struct collect *c;

	(void)state;
	assert_int_equal(weft__kv_store_init(&s), 0);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		assert_int_equal(put(&s, keys[i], 1), 1);
	/* Overwrites and tombstones add no second node. */
	assert_int_equal(put(&s, "m", 2), 1);
	assert_int_equal(
	    weft__kv_store_apply(&s, "c", 1, NULL,
	                         &(struct weft__kv_version){3, "n1"}),
	    1);
	c = walk(&s, "", 64);
	assert_int_equal(c->n, 9);
	assert_true(c->ordered);
	assert_string_equal(c->keys[0], "a");
	assert_string_equal(c->keys[1], "ab");
	assert_string_equal(c->keys[8], "zz");
	/* From a key that is there, and from one between two. */
	c = walk(&s, "ba", 64);
	assert_int_equal(c->n, 6);
	assert_string_equal(c->keys[0], "ba");
	c = walk(&s, "d", 64);
	assert_int_equal(c->n, 4);
	assert_string_equal(c->keys[0], "m");
	/* Past the last key, and a visitor that stops. */
	assert_int_equal(walk(&s, "zzz", 64)->n, 0);
	c = walk(&s, "b", 2);
	assert_int_equal(c->n, 2);
	assert_string_equal(c->keys[1], "ba");
	assert_int_equal(s.index.len, 9);
	weft__kv_store_fini(&s);
}

/* Many keys in a scrambled order come out sorted: every level links. */
static void
test_many_keys_stay_sorted(void **state)
{
	struct weft__kv_store s;
	char key[32];
	struct collect *c;

	(void)state;
	assert_int_equal(weft__kv_store_init(&s), 0);
	for (unsigned i = 0; i < 20000; i++) {
		snprintf(key, sizeof(key), "key%08u", (i * 7919u) % 20000u);
		assert_int_equal(put(&s, key, 1), 1);
	}
	assert_int_equal(s.index.len, 20000);
	c = walk(&s, "key00012345", 64);
	assert_int_equal(c->n, 64);
	assert_true(c->ordered);
	assert_string_equal(c->keys[0], "key00012345");
	assert_string_equal(c->keys[63], "key00012408");
	weft__kv_store_fini(&s);
}

#define WRITERS 2
#define PER_WRITER 3000

struct race {
	struct weft__kv_store s;
	unsigned writer;
};

static void *
writer(void *arg)
{
	struct race *r = arg;
	unsigned id = __atomic_fetch_add(&r->writer, 1, __ATOMIC_RELAXED);
	char key[32];

	for (unsigned i = 0; i < PER_WRITER; i++) {
		snprintf(key, sizeof(key), "w%u-%06u", id, i);
		put(&r->s, key, 1);
	}
	return NULL;
}

/* A visitor that reads every value, as a scan does, and counts. */
struct count {
	struct weft__kv_store *s;
	size_t n;
};

static bool
count_visit(struct weft__kv_entry *e, void *arg)
{
	struct count *c = arg;

	weft__kv_blob_unref(weft__kv_store_entry_value(c->s, e, NULL));
	c->n++;
	return true;
}

/* Walks while writers add keys: every walk sees sorted keys, the last one
 * all of them. Under ThreadSanitizer this checks the locking. */
static void
test_walks_run_beside_writers(void **state)
{
	struct race r = {.writer = 0};
	struct count all = {.s = &r.s};
	pthread_t t[WRITERS];

	(void)state;
	assert_int_equal(weft__kv_store_init(&r.s), 0);
	for (int i = 0; i < WRITERS; i++)
		assert_int_equal(pthread_create(&t[i], NULL, writer, &r), 0);
	for (int i = 0; i < 200; i++) {
		struct count some = {.s = &r.s};

		assert_true(walk(&r.s, "w", 64)->ordered);
		weft__kv_index_walk(&r.s.index, "w1", 2, count_visit, &some);
	}
	for (int i = 0; i < WRITERS; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(
	    weft__kv_index_walk(&r.s.index, "", 0, count_visit, &all),
	    WRITERS * PER_WRITER);
	assert_int_equal(all.n, WRITERS * PER_WRITER);
	weft__kv_store_fini(&r.s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_keys_compare_bytewise_with_a_prefix_first),
	    cmocka_unit_test(test_walk_visits_keys_in_order_from_the_start),
	    cmocka_unit_test(test_many_keys_stay_sorted),
	    cmocka_unit_test(test_walks_run_beside_writers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
