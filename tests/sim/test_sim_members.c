/* SPDX-License-Identifier: MIT */
/*
 * test_sim_members.c: a member leaving and joining again under load, on
 * the cluster simulator, with a ledger of every request. n1 sends to n2
 * and n3 from two threads while it removes n3 and adds it back, four
 * times, its bytes to n3 delayed so that requests are in flight each time:
 * every accepted request's callback runs exactly once, those to n2 all
 * succeed, those to n3 succeed or end with WEFT_ENOTMEMBER, and n1 tells
 * each join and each leave once.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include <weft/sim.h>

#include "sim_int.h" /* the route n1 dials n3 through */
#include "support/echo_verb.h"

#define VERB_ECHO 16
#define SENDERS 2
#define ENTRIES 200000 /* requests at most, all threads */
#define OUTSTANDING 32 /* per thread */
#define CYCLES 4
#define WAIT_MS 10000

struct entry {
	_Atomic uint8_t accepted, callbacks, to_n3;
	_Atomic int status;
};

struct ledger {
	weft_sim *sim;
	struct entry *e;
	_Atomic uint32_t next;
	_Atomic uint32_t accepted, done;
	_Atomic bool stop;
	_Atomic int joins, leaves; /* on n1 */
	_Atomic int wrong_member;  /* an event for another than n3 */
};

static struct ledger the_ledger;

static void
on_member(weft_msvc *svc, weft_msvc_peer *peer, bool joined, void *arg)
{
	struct ledger *l = arg;

	(void)svc;
	if (strcmp(weft_msvc_peer_id(peer), "n3") != 0)
		atomic_fetch_add(&l->wrong_member, 1);
	atomic_fetch_add(joined ? &l->joins : &l->leaves, 1);
}

static int
on_start(weft_sim *sim, uint32_t e, weft_msvc *svc, void *arg)
{
	int rv;

	(void)sim;
	rv = weft_msvc_register(svc, VERB_ECHO, "echo", weft_test_on_echo, NULL,
	                        0);
	if (rv == 0 && e == 0)
		rv = weft_msvc_on_member_event(svc, on_member, arg);
	return rv;
}

static void
on_reply(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	struct entry *e = arg;

	(void)svc;
	(void)data;
	(void)len;
	atomic_store(&e->status, status);
	atomic_fetch_add(&e->callbacks, 1);
	atomic_fetch_add(&the_ledger.done, 1);
}

static void
pause_ms(long ms)
{
	nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000}, NULL);
}

static void *
sender(void *arg)
{
	struct ledger *l = arg;
	weft_msvc *svc = weft_sim_node(l->sim, 0);
	weft_msvc_peer *n2 = weft_msvc_peer_find(svc, "n2");
	weft_msvc_peer *n3 = weft_msvc_peer_find(svc, "n3");
	uint32_t i, mine = 0;
	int rv;

	while (!atomic_load(&l->stop) && mine < ENTRIES / SENDERS) {
		/* Bounded: the requests still out, of both threads. */
		if (atomic_load(&l->accepted) - atomic_load(&l->done) >=
		    SENDERS * OUTSTANDING) {
			pause_ms(1);
			continue;
		}
		i = atomic_fetch_add(&l->next, 1);
		mine++;
		atomic_store(&l->e[i].to_n3, i % 2);
		rv = weft_msvc_request(svc, i % 2 ? n3 : n2, VERB_ECHO, &i,
		                       sizeof(i), NULL, on_reply, &l->e[i]);
		if (rv == 0) {
			atomic_store(&l->e[i].accepted, 1);
			atomic_fetch_add(&l->accepted, 1);
		} else {
			atomic_store(&l->e[i].status, rv);
		}
	}
	return NULL;
}

/* Waits (bounded) until cond(l, want) holds. */
static bool
wait_until(bool (*cond)(struct ledger *l, uint32_t want), struct ledger *l,
           uint32_t want)
{
	uint64_t deadline = weft_now_ns() + WAIT_MS * 1000000ull;

	while (!cond(l, want)) {
		if (weft_now_ns() > deadline)
			return false;
		pause_ms(2);
	}
	return true;
}

static bool
accepted_at_least(struct ledger *l, uint32_t want)
{
	return atomic_load(&l->accepted) >= want;
}

static bool
all_done(struct ledger *l, uint32_t want)
{
	(void)want;
	return atomic_load(&l->done) == atomic_load(&l->accepted);
}

/* Adds n3 back once its drain is over. */
static int
readd(weft_sim *sim)
{
	weft_msvc *svc = weft_sim_node(sim, 0);
	uint64_t deadline = weft_now_ns() + WAIT_MS * 1000000ull;
	int rv;

	do {
		rv = weft_msvc_member_add(svc, "n3", "127.0.0.1",
		                          sim->routes[0][2].port);
		if (rv != WEFT_EBUSY)
			return rv;
		pause_ms(5);
	} while (weft_now_ns() < deadline);
	return rv;
}

static void
test_a_member_leaves_and_joins_under_load(void **state)
{
	struct ledger *l = &the_ledger;
	weft_sim_opts o = {.nodes = 3, .on_start = on_start, .arg = l};
	uint32_t i, n3_ok = 0, n3_gone = 0;
	pthread_t th[SENDERS];
	weft_msvc *svc;
	int c;

	(void)state;
	memset(l, 0, sizeof(*l));
	assert_non_null(l->e = calloc(ENTRIES, sizeof(*l->e)));
	assert_int_equal(weft_sim_new(&o, &l->sim), 0);
	svc = weft_sim_node(l->sim, 0);
	/* Requests to n3 are on the wire when it leaves. */
	assert_int_equal(weft_sim_delay(l->sim, 0, 2, 5, 20), 0);
	for (c = 0; c < SENDERS; c++)
		assert_int_equal(pthread_create(&th[c], NULL, sender, l), 0);
	for (c = 0; c < CYCLES; c++) {
		assert_true(wait_until(accepted_at_least, l,
		                       atomic_load(&l->accepted) + 200));
		assert_int_equal(weft_msvc_member_remove(svc, "n3"), 0);
		assert_int_equal(readd(l->sim), 0);
	}
	assert_true(
	    wait_until(accepted_at_least, l, atomic_load(&l->accepted) + 200));
	atomic_store(&l->stop, true);
	for (c = 0; c < SENDERS; c++)
		pthread_join(th[c], NULL);
	assert_true(wait_until(all_done, l, 0));
	for (i = 0; i < atomic_load(&l->next); i++) {
		struct entry *e = &l->e[i];
		int st = atomic_load(&e->status);

		assert_int_equal(atomic_load(&e->callbacks),
		                 atomic_load(&e->accepted));
		if (!atomic_load(&e->accepted)) {
			/* Refused at once: only n3, while it was away. */
			assert_true(atomic_load(&e->to_n3));
			assert_int_equal(st, WEFT_ENOTMEMBER);
			continue;
		}
		if (!atomic_load(&e->to_n3)) {
			assert_int_equal(st, 0);
		} else if (st == 0) {
			n3_ok++;
		} else {
			assert_int_equal(st, WEFT_ENOTMEMBER);
			n3_gone++;
		}
	}
	print_message("%u requests, %u accepted; to n3: %u answered, %u "
	              "ended with WEFT_ENOTMEMBER\n",
	              atomic_load(&l->next), atomic_load(&l->accepted), n3_ok,
	              n3_gone);
	assert_true(n3_ok > 0);
	assert_int_equal(atomic_load(&l->leaves), CYCLES);
	assert_int_equal(atomic_load(&l->joins), CYCLES);
	assert_int_equal(atomic_load(&l->wrong_member), 0);
	weft_sim_free(l->sim);
	free(l->e);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_a_member_leaves_and_joins_under_load),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
