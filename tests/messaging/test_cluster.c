/* test_cluster.c: a 3-node cluster in one process: requests, one-way
 * ordering, unknown verbs, timeouts, expiry, large messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <event2/buffer.h>

#include "cluster.h"

static struct cluster cl;

struct pair_check {
	_Atomic int done;
	_Atomic int bad;
	int want;
};

static void
on_pair_reply(weft_msvc *svc, int status, const void *data, size_t len,
	      void *arg)
{
	struct pair_check *pc = arg;
	char want[32];

	snprintf(want, sizeof(want), "from %s", weft_msvc_node_id(svc));
	if (status != 0 || len != strlen(want) || memcmp(data, want, len) != 0)
		atomic_fetch_add(&pc->bad, 1);
	atomic_fetch_add(&pc->done, 1);
	test_poke();
}

static bool
pairs_done(void *arg)
{
	struct pair_check *pc = arg;

	return atomic_load(&pc->done) >= pc->want;
}

static bool
all_up(void *arg)
{
	struct cluster *c = arg;

	return atomic_load(&c->ups) >= c->n * (c->n - 1);
}

static void
test_requests_between_every_pair(void **state)
{
	struct pair_check pc = {.want = 3 * 2 * 50};
	char text[32];
	int i, j, k;

	(void)state;
	assert_int_equal(cluster_start(&cl, 3, NULL), 0);
	for (k = 0; k < 50; k++)
		for (i = 0; i < 3; i++)
			for (j = 0; j < 3; j++) {
				if (i == j)
					continue;
				snprintf(text, sizeof(text), "from n%d",
					 i + 1);
				assert_int_equal(
					weft_msvc_request(
						cl.svc[i],
						cluster_peer(&cl, i, j),
						k % 2 ? VERB_ECHO
						      : VERB_ECHO_BLOCK,
						text, strlen(text), NULL,
						on_pair_reply, &pc),
					0);
			}
	assert_true(test_wait(pairs_done, &pc, 5000));
	assert_int_equal(atomic_load(&pc.bad), 0);
	assert_true(test_wait(all_up, &cl, 5000));
	for (i = 0; i < 3; i++)
		for (j = 0; j < 3; j++)
			if (i != j)
				assert_true(weft_msvc_peer_is_up(
					cluster_peer(&cl, i, j)));
	cluster_stop(&cl);
}

static void
test_unknown_verb_gets_error_response(void **state)
{
	struct tally t = {.want = 1};
	weft_msvc_stats st;

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, NULL), 0);
	assert_int_equal(weft_msvc_request(cl.svc[0], cluster_peer(&cl, 0, 1),
					   99, "x", 1, NULL, tally_cb, &t),
			 0);
	assert_true(test_wait(tally_complete, &t, 5000));
	assert_int_equal(atomic_load(&t.status_counts[-WEFT_EUNKNOWNVERB]), 1);
	weft_msvc_get_stats(cl.svc[1], &st);
	assert_int_equal(st.unknown_verbs, 1);
	/* Verbs out of range are refused locally. */
	assert_int_equal(weft_msvc_request(cl.svc[0], cluster_peer(&cl, 0, 1),
					   5, "x", 1, NULL, tally_cb, &t),
			 WEFT_EINVAL);
	cluster_stop(&cl);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_requests_between_every_pair),
		cmocka_unit_test(test_unknown_verb_gets_error_response),
	};

	return cmocka_run_group_tests(tests, test_setup, test_teardown);
}
