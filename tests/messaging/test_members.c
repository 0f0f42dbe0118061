/* SPDX-License-Identifier: MIT */
/*
 * test_members.c: members added and removed while the service runs
 * (members.c), on loopback clusters: a member added is dialed and up
 * without traffic; a member removed ends what is sent to it once, with
 * WEFT_ENOTMEMBER, lets what it was asked be answered while it drains,
 * and is refused when it dials again; adds and removes race with senders
 * on other threads, every callback running exactly once.
 */
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <weft/messaging.h>

#include "cluster.h"
#include "support/echo_verb.h"

#define WAIT_MS 10000
/* The drain's bound in these tests (request_timeout). */
#define DRAIN_MS 600

static void
tune(weft_msvc_limits *l)
{
	l->request_timeout_ms = DRAIN_MS;
	l->heartbeat_interval_ms = 100;
}

/* ---- A node outside the cluster's configuration ------------------------ */

/* n3, whose own configuration lists n1, n2 and itself: the others learn
 * of it only through weft_msvc_member_add. */
struct outsider {
	weft_msvc_config *cfg;
	weft_loop_group *group;
	weft_msvc *svc;
};

static void
outsider_start(struct outsider *o, struct cluster *cl)
{
	char id[16];
	int i;

	assert_int_equal(weft_msvc_config_new("test", &o->cfg), 0);
	for (i = 0; i < 3; i++) {
		snprintf(id, sizeof(id), "n%d", i + 1);
		assert_int_equal(
		    weft_msvc_config_add_node(o->cfg, id, "127.0.0.1", 0), 0);
	}
	tune(weft_msvc_config_limits(o->cfg));
	assert_int_equal(weft_loop_group_new(1, &o->group), 0);
	assert_int_equal(weft_msvc_new(o->group, o->cfg, "n3", NULL, &o->svc),
	                 0);
	assert_int_equal(weft_msvc_register(o->svc, VERB_ECHO, "echo",
	                                    weft_test_on_echo, NULL,
	                                    WEFT_MSVC_CLIENTS),
	                 0);
	assert_int_equal(weft_msvc_start(o->svc), 0);
	for (i = 0; i < 2; i++) {
		snprintf(id, sizeof(id), "n%d", i + 1);
		assert_int_equal(
		    weft_msvc_set_peer_addr(o->svc, id, "127.0.0.1",
		                            weft_msvc_port(cl->svc[i])),
		    0);
	}
}

static void
outsider_stop(struct outsider *o)
{
	weft_msvc_free(o->svc);
	weft_loop_group_free(o->group);
	weft_msvc_config_free(o->cfg);
}

/* ---- Conditions -------------------------------------------------------- */

struct peer_wait {
	weft_msvc_peer *peer;
	bool up;
};

static bool
peer_is(void *arg)
{
	struct peer_wait *w = arg;

	return weft_msvc_peer_is_up(w->peer) == w->up;
}

static bool
left_once(void *arg)
{
	return atomic_load(&((struct cluster *)arg)->leaves) >= 1;
}

/* Adds id again once its drain is over (WEFT_EBUSY until then). */
struct readd {
	weft_msvc *svc;
	const char *id;
	uint16_t port;
	int rv;
};

static bool
readded(void *arg)
{
	struct readd *r = arg;

	r->rv = weft_msvc_member_add(r->svc, r->id, "127.0.0.1", r->port);
	return r->rv != WEFT_EBUSY;
}

/* The second listener has heard the ups, joins and leaves the first
 * heard. */
static bool
also_heard(void *arg)
{
	struct cluster *c = arg;

	return atomic_load(&c->also_ups) == atomic_load(&c->ups) &&
	       atomic_load(&c->also_joins) == atomic_load(&c->joins) &&
	       atomic_load(&c->also_leaves) == atomic_load(&c->leaves);
}

/* ---- Tests ------------------------------------------------------------- */

static void
test_added_member_is_dialed_and_up_without_traffic(void **state)
{
	struct cluster cl;
	struct outsider o;
	struct peer_wait w = {.up = true};
	weft_msvc_peer *list[4];
	struct tally t = {.want = 1};

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, tune), 0);
	outsider_start(&o, &cl);
	assert_null(weft_msvc_peer_find(cl.svc[0], "n3"));
	assert_int_equal(weft_msvc_members(cl.svc[0], list, 4), 2);
	assert_int_equal(weft_msvc_member_add(cl.svc[0], "n3", "127.0.0.1",
	                                      weft_msvc_port(o.svc)),
	                 0);
	w.peer = weft_msvc_peer_find(cl.svc[0], "n3");
	assert_non_null(w.peer);
	assert_true(weft_msvc_peer_is_member(w.peer));
	assert_int_equal(weft_msvc_members(cl.svc[0], list, 4), 3);
	assert_ptr_equal(list[2], w.peer);
	/* No message is sent: the heartbeats bring it up. */
	assert_true(test_wait(peer_is, &w, WAIT_MS));
	assert_int_equal(atomic_load(&cl.joins), 1);
	assert_true(atomic_load(&cl.last_join) < atomic_load(&cl.last_up));
	/* Every listener hears each event, not only the last one set (the
	 * second after the first, which woke us). */
	assert_true(test_wait(also_heard, &cl, WAIT_MS));
	assert_int_equal(atomic_load(&cl.also_joins), 1);
	/* And it serves: n3 accepts n1 (its config), n1 now accepts n3's
	 * connection for the answer. */
	assert_int_equal(weft_msvc_request(cl.svc[0], w.peer, VERB_ECHO, "x", 1,
	                                   NULL, tally_cb, &t),
	                 0);
	assert_true(test_wait(tally_complete, &t, WAIT_MS));
	assert_int_equal(atomic_load(&t.ok), 1);
	outsider_stop(&o);
	cluster_stop(&cl);
}

static void
test_add_and_remove_refuse_what_they_cannot_do(void **state)
{
	struct cluster cl;
	weft_msvc *svc;
	weft_msvc_config *cfg;
	weft_loop_group *group;

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, tune), 0);
	svc = cl.svc[0];
	assert_int_equal(weft_msvc_member_add(svc, "n2", "127.0.0.1", 1),
	                 WEFT_EEXIST);
	assert_int_equal(weft_msvc_member_add(svc, "n1", "127.0.0.1", 1),
	                 WEFT_EINVAL);
	assert_int_equal(weft_msvc_member_add(svc, "bad id!", "h", 1),
	                 WEFT_EINVAL);
	assert_int_equal(weft_msvc_member_add(svc, "n5", "", 1), WEFT_EINVAL);
	assert_int_equal(weft_msvc_member_add(svc, "n5", "127.0.0.1", 0),
	                 WEFT_EINVAL);
	assert_int_equal(weft_msvc_member_remove(svc, "n1"), WEFT_EINVAL);
	assert_int_equal(weft_msvc_member_remove(svc, "n9"), WEFT_ENOTFOUND);
	assert_int_equal(weft_msvc_member_remove(svc, "n2"), 0);
	assert_int_equal(weft_msvc_member_remove(svc, "n2"), WEFT_ENOTFOUND);
	/* Removed and draining: not yet again. */
	assert_int_equal(weft_msvc_member_add(svc, "n2", "127.0.0.1", 1),
	                 WEFT_EBUSY);
	weft_msvc_stop(svc, 0);
	assert_int_equal(weft_msvc_member_add(svc, "n5", "127.0.0.1", 1),
	                 WEFT_ESHUTDOWN);
	assert_int_equal(weft_msvc_member_remove(svc, "n2"), WEFT_ESHUTDOWN);
	/* The left event ran once, though the stop came before the drain
	 * ended. */
	assert_int_equal(atomic_load(&cl.leaves), 1);
	cluster_stop(&cl);

	/* Not started yet. */
	assert_int_equal(weft_loop_group_new(1, &group), 0);
	assert_int_equal(weft_msvc_config_new("test", &cfg), 0);
	assert_int_equal(weft_msvc_config_add_node(cfg, "n1", "127.0.0.1", 0),
	                 0);
	assert_int_equal(weft_msvc_new(group, cfg, "n1", NULL, &svc), 0);
	assert_int_equal(weft_msvc_member_add(svc, "n2", "127.0.0.1", 1),
	                 WEFT_ESHUTDOWN);
	weft_msvc_free(svc);
	weft_msvc_config_free(cfg);
	weft_loop_group_free(group);
}

static bool
held(void *arg)
{
	return atomic_load(&((struct cluster *)arg)->held_count) >= 4;
}

static void
test_removed_member_drains_then_closes(void **state)
{
	struct cluster cl;
	weft_msvc_call_opts long_opts = {.timeout_ms = 30000};
	struct tally t = {.want = 4}, late = {.want = 1};
	struct readd r = {.id = "n2"};
	weft_msvc_peer *peer;
	weft_msvc_msg *m;
	int i;

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, tune), 0);
	peer = cluster_peer(&cl, 0, 1);
	/* Four requests n2 holds, with deadlines past the drain's. */
	for (i = 0; i < 4; i++)
		assert_int_equal(weft_msvc_request(cl.svc[0], peer, VERB_HOLD,
		                                   "h", 1, &long_opts, tally_cb,
		                                   &t),
		                 0);
	assert_true(test_wait(held, &cl, WAIT_MS));
	assert_int_equal(weft_msvc_member_remove(cl.svc[0], "n2"), 0);
	/* At once: not found, and sends to the peer held fail. */
	assert_null(weft_msvc_peer_find(cl.svc[0], "n2"));
	assert_false(weft_msvc_peer_is_member(peer));
	assert_int_equal(weft_msvc_request(cl.svc[0], peer, VERB_ECHO, "x", 1,
	                                   NULL, tally_cb, &late),
	                 WEFT_ENOTMEMBER);
	assert_int_equal(
	    weft_msvc_send(cl.svc[0], peer, VERB_SINK, "x", 1, NULL),
	    WEFT_ENOTMEMBER);
	assert_int_equal(weft_msvc_peer_wait_up(cl.svc[0], peer, WAIT_MS),
	                 WEFT_ENOTMEMBER);
	assert_true(test_wait(left_once, &cl, WAIT_MS));
	assert_true(atomic_load(&cl.last_down) < atomic_load(&cl.last_leave));
	assert_false(weft_msvc_peer_is_up(peer));
	/* Two are answered while it drains... */
	for (i = 0; i < 2; i++) {
		m = atomic_exchange(&cl.held[i], NULL);
		assert_int_equal(weft_msvc_respond(m, "ok", 2), 0);
	}
	/* ... and the other two end with WEFT_ENOTMEMBER when it ends. */
	assert_true(test_wait(tally_complete, &t, WAIT_MS));
	assert_int_equal(atomic_load(&t.ok), 2);
	assert_int_equal(atomic_load(&t.status_counts[-WEFT_ENOTMEMBER]), 2);
	assert_int_equal(atomic_load(&t.done), 4);
	/* n2 still counts n1 a member, but n1 refuses it now. */
	late.want = 1;
	assert_int_equal(weft_msvc_request(cl.svc[1], cluster_peer(&cl, 1, 0),
	                                   VERB_ECHO, "x", 1, NULL, tally_cb,
	                                   &late),
	                 0);
	assert_true(test_wait(tally_complete, &late, WAIT_MS));
	assert_int_equal(atomic_load(&late.ok), 0);
	/* Drained: n2 can be added again, the same peer. */
	r.svc = cl.svc[0];
	r.port = weft_msvc_port(cl.svc[1]);
	assert_true(test_wait(readded, &r, WAIT_MS));
	assert_int_equal(r.rv, 0);
	assert_ptr_equal(weft_msvc_peer_find(cl.svc[0], "n2"), peer);
	assert_int_equal(weft_msvc_peer_count(cl.svc[0]), 2);
	assert_int_equal(
	    weft_msvc_call(cl.svc[0], peer, VERB_ECHO, "y", 1, NULL, NULL), 0);
	assert_int_equal(atomic_load(&cl.joins), 1);
	assert_int_equal(atomic_load(&cl.leaves), 1);
	assert_true(test_wait(also_heard, &cl, WAIT_MS));
	assert_int_equal(atomic_load(&cl.also_leaves), 1);
	cluster_stop(&cl);
}

/* ---- Senders on other threads while the member comes and goes ---------- */

#define SENDERS 3
/* At most; they stop once the member has come and gone three times. */
#define SENDS_PER_THREAD 200000

struct race {
	struct cluster *cl;
	weft_msvc_peer *peer;
	_Atomic int accepted, refused, wrong_status;
	_Atomic int calls[SENDERS * SENDS_PER_THREAD];
	_Atomic bool was_accepted[SENDERS * SENDS_PER_THREAD];
	_Atomic int done;
	_Atomic int index;
	_Atomic bool stop;
};

struct race_req {
	struct race *race;
	int slot;
};

static void
race_cb(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	struct race_req *q = arg;
	struct race *race = q->race;

	(void)svc;
	(void)data;
	(void)len;
	/* What a request may end with while its member comes and goes. */
	if (status != 0 && status != WEFT_ENOTMEMBER &&
	    status != WEFT_EPEERDOWN && status != WEFT_ETIMEDOUT)
		atomic_fetch_add(&race->wrong_status, 1);
	atomic_fetch_add(&race->calls[q->slot], 1);
	atomic_fetch_add(&race->done, 1);
	test_poke();
}

static struct race_req reqs[SENDERS * SENDS_PER_THREAD];

static void *
sender(void *arg)
{
	struct race *race = arg;
	int i, k, rv;

	for (i = 0; i < SENDS_PER_THREAD && !atomic_load(&race->stop); i++) {
		k = atomic_fetch_add(&race->index, 1);
		reqs[k] = (struct race_req){.race = race, .slot = k};
		rv = weft_msvc_request(race->cl->svc[0], race->peer, VERB_ECHO,
		                       "r", 1, NULL, race_cb, &reqs[k]);
		if (rv == 0) {
			atomic_store(&race->was_accepted[k], true);
			atomic_fetch_add(&race->accepted, 1);
		} else if (rv == WEFT_ENOTMEMBER || rv == WEFT_EPEERDOWN ||
		           rv == WEFT_EOVERLOAD) {
			atomic_fetch_add(&race->refused, 1);
			sched_yield(); /* not spin while it is away */
		} else
			atomic_fetch_add(&race->wrong_status, 1);
	}
	return NULL;
}

static bool
race_done(void *arg)
{
	struct race *race = arg;

	return atomic_load(&race->done) == atomic_load(&race->accepted);
}

struct accepted_wait {
	struct race *race;
	int target;
};

static bool
accepted_more(void *arg)
{
	struct accepted_wait *w = arg;

	return atomic_load(&w->race->accepted) >= w->target;
}

static void
test_remove_and_add_race_with_senders(void **state)
{
	static struct race race;
	struct cluster cl;
	struct readd r = {.id = "n2"};
	pthread_t th[SENDERS];
	int i, rounds = 0;

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, tune), 0);
	memset(&race, 0, sizeof(race));
	race.cl = &cl;
	race.peer = cluster_peer(&cl, 0, 1);
	r.svc = cl.svc[0];
	r.port = weft_msvc_port(cl.svc[1]);
	for (i = 0; i < SENDERS; i++)
		assert_int_equal(pthread_create(&th[i], NULL, sender, &race),
		                 0);
	/* Remove and add back while they send, a bounded number of times,
	 * each time once requests are going through again. */
	while (rounds < 3) {
		struct accepted_wait w = {
		    .race = &race, .target = atomic_load(&race.accepted) + 50};

		assert_true(test_wait(accepted_more, &w, WAIT_MS));
		assert_int_equal(weft_msvc_member_remove(cl.svc[0], "n2"), 0);
		assert_true(test_wait(readded, &r, WAIT_MS));
		assert_int_equal(r.rv, 0);
		rounds++;
	}
	atomic_store(&race.stop, true);
	for (i = 0; i < SENDERS; i++)
		pthread_join(th[i], NULL);
	assert_true(test_wait(race_done, &race, WAIT_MS));
	assert_int_equal(atomic_load(&race.wrong_status), 0);
	assert_int_equal(atomic_load(&race.accepted) +
	                     atomic_load(&race.refused),
	                 atomic_load(&race.index));
	/* Every accepted request's callback ran once, no refused one's. */
	for (i = 0; i < atomic_load(&race.index); i++)
		assert_int_equal(atomic_load(&race.calls[i]),
		                 atomic_load(&race.was_accepted[i]) ? 1 : 0);
	assert_int_equal(atomic_load(&race.done), atomic_load(&race.accepted));
	print_message("%d rounds, %d requests: %d accepted, %d refused\n",
	              rounds, atomic_load(&race.index),
	              atomic_load(&race.accepted), atomic_load(&race.refused));
	assert_int_equal(rounds, 3);
	assert_int_equal(atomic_load(&cl.leaves), rounds);
	assert_int_equal(atomic_load(&cl.joins), rounds);
	cluster_stop(&cl);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(
	        test_added_member_is_dialed_and_up_without_traffic),
	    cmocka_unit_test(test_add_and_remove_refuse_what_they_cannot_do),
	    cmocka_unit_test(test_removed_member_drains_then_closes),
	    cmocka_unit_test(test_remove_and_add_race_with_senders),
	};

	return cmocka_run_group_tests(tests, test_setup, test_teardown);
}
