/* SPDX-License-Identifier: MIT */
/*
 * test_kv_members.c: the key-value service while members leave and join,
 * on the cluster simulator (<weft/sim.h>), driven by a non-member client.
 * A member is taken out with weft_msvc_member_remove on the others and
 * brought (back) in with weft_msvc_member_add, as discovery would; the
 * node itself lists every member in its configuration, as a node that
 * joins does.
 *
 *   - a write in flight when a replica leaves is decided once, by the
 *     quorum of the replicas left, not failed for the one that left;
 *   - a member that joins refuses reads until it has copied the others'
 *     data, and a write it got during the copy wins over the older copy;
 *   - anti-entropy brings a replica that missed writes up to date, and
 *     finds nothing to pull once the digests agree.
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
#include <event2/buffer.h>

#include <weft/kv.h>
#include <weft/sim.h>

#include "sim_int.h" /* the routes a member is added at */

#define MAX_NODES 4
#define WAIT_MS 10000
#define KEYS 200
#define OVERWRITTEN 50

static const char *const ids[MAX_NODES] = {"n1", "n2", "n3", "n4"};

struct cluster {
	weft_sim *sim;
	uint32_t nodes;
	weft_kv *_Atomic kv[MAX_NODES];
	weft_msvc *client;
};

/* ---- Calls and waits ------------------------------------------------------
 */

struct call {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int calls;
	int status;
	struct evbuffer *data;
};

static void
call_init(struct call *c)
{
	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->cond, NULL);
	c->calls = 0;
	c->status = 1;
	assert_non_null(c->data = evbuffer_new());
}

static void
call_fini(struct call *c)
{
	evbuffer_free(c->data);
	pthread_cond_destroy(&c->cond);
	pthread_mutex_destroy(&c->lock);
}

static void
on_reply(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	struct call *c = arg;

	(void)svc;
	pthread_mutex_lock(&c->lock);
	c->calls++;
	c->status = status;
	evbuffer_add(c->data, data, len);
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static int
call_wait(struct call *c)
{
	struct timespec ts;
	int status;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += WAIT_MS / 1000;
	pthread_mutex_lock(&c->lock);
	while (c->calls == 0 &&
	       pthread_cond_timedwait(&c->cond, &c->lock, &ts) == 0)
		;
	assert_int_equal(c->calls, 1);
	status = c->status;
	pthread_mutex_unlock(&c->lock);
	return status;
}

static int
calls_of(struct call *c)
{
	int n;

	pthread_mutex_lock(&c->lock);
	n = c->calls;
	pthread_mutex_unlock(&c->lock);
	return n;
}

static void
pause_ms(long ms)
{
	nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000}, NULL);
}

static uint64_t
deadline(void)
{
	return weft_now_ns() + WAIT_MS * 1000000ull;
}

/* ---- The cluster ----------------------------------------------------------
 */

static int
on_start(weft_sim *sim, uint32_t node, weft_msvc *svc, void *arg)
{
	struct cluster *c = arg;
	/* Rounds of anti-entropy only when a test asks for them. */
	weft_kv_opts opts = {.replicate_timeout_ms = 1000,
	                     .repair_interval_ms = 3600 * 1000};
	weft_kv *kv;
	int rv;

	(void)sim;
	if (!weft_msvc_is_member(svc))
		return 0;
	if ((rv = weft_kv_new(svc, &opts, &kv)) == 0)
		atomic_store(&c->kv[node], kv);
	return rv;
}

static void
on_stop(weft_sim *sim, uint32_t node, weft_msvc *svc, void *arg)
{
	struct cluster *c = arg;

	(void)sim;
	(void)svc;
	if (node < MAX_NODES)
		weft_kv_free(atomic_exchange(&c->kv[node], NULL));
}

static bool
caught_up(struct cluster *c, uint32_t i)
{
	weft_kv *kv = atomic_load(&c->kv[i]);

	return kv != NULL && weft_kv_is_caught_up(kv);
}

static void
wait_caught_up(struct cluster *c, uint32_t i)
{
	uint64_t end = deadline();

	while (!caught_up(c, i) && weft_now_ns() < end)
		pause_ms(1);
	assert_true(caught_up(c, i));
}

static struct cluster *
cluster_start(uint32_t nodes)
{
	struct cluster *c = calloc(1, sizeof(*c));
	weft_sim_opts o = {.nodes = nodes,
	                   .cluster = "kvmembers",
	                   .on_start = on_start,
	                   .on_stop = on_stop};
	weft_msvc_config *cfg;
	weft_msvc_limits l;
	uint32_t endpoint, i;

	assert_non_null(c);
	c->nodes = nodes;
	assert_int_equal(weft_msvc_config_new("kvmembers", &cfg), 0);
	l = *weft_msvc_config_limits(cfg);
	weft_msvc_config_free(cfg);
	l.reconnect_min_ms = 10;
	l.reconnect_max_ms = 200;
	l.heartbeat_interval_ms = 200;
	l.request_timeout_ms = 2000;
	l.connect_timeout_ms = 1000;
	l.loops = 1;
	o.limits = &l;
	o.arg = c;
	assert_int_equal(weft_sim_new(&o, &c->sim), 0);
	assert_int_equal(
	    weft_sim_client_new(c->sim, "client", &endpoint, &c->client), 0);
	for (i = 0; i < nodes; i++)
		wait_caught_up(c, i);
	return c;
}

static void
cluster_stop(struct cluster *c)
{
	weft_sim_free(c->sim);
	free(c);
}

static weft_kv *
kv_of(struct cluster *c, uint32_t i)
{
	weft_kv *kv = atomic_load(&c->kv[i]);

	assert_non_null(kv);
	return kv;
}

/* Waits until node i's write quorum is q (a membership event is told on
 * the member's loop, after the call that made it returned). */
static void
wait_quorum(struct cluster *c, uint32_t i, uint32_t q)
{
	uint64_t end = deadline();

	while (weft_kv_write_quorum(kv_of(c, i)) != q && weft_now_ns() < end)
		pause_ms(1);
	assert_int_equal(weft_kv_write_quorum(kv_of(c, i)), q);
}

/* Node `on` stops counting `who` as a member. */
static void
remove_member(struct cluster *c, uint32_t on, uint32_t who)
{
	assert_int_equal(
	    weft_msvc_member_remove(weft_sim_node(c->sim, on), ids[who]), 0);
}

/* Node `on` counts `who` as a member again, once the drain of its removal
 * is over, dialling it through the simulator's proxy. */
static void
add_member(struct cluster *c, uint32_t on, uint32_t who)
{
	weft_msvc *svc = weft_sim_node(c->sim, on);
	uint64_t end = deadline();
	int rv;

	do {
		rv = weft_msvc_member_add(svc, ids[who], "127.0.0.1",
		                          c->sim->routes[on][who].port);
		if (rv != WEFT_EBUSY)
			break;
		pause_ms(5);
	} while (weft_now_ns() < end);
	assert_int_equal(rv, 0);
}

/* Stalls (on) or resumes the bytes both ways between a and b. */
static void
stall_both(struct cluster *c, uint32_t a, uint32_t b, bool on)
{
	assert_int_equal(weft_sim_stall(c->sim, a, b, on), 0);
	assert_int_equal(weft_sim_stall(c->sim, b, a, on), 0);
}

static int
put_async(struct cluster *c, uint32_t node, const char *key, const char *value,
          struct call *call)
{
	return weft_kv_client_put(
	    c->client, weft_msvc_peer_find(c->client, ids[node]), key,
	    strlen(key), value, strlen(value), NULL, on_reply, call);
}

static int
put(struct cluster *c, uint32_t node, const char *key, const char *value)
{
	struct call call;
	int status;

	call_init(&call);
	assert_int_equal(put_async(c, node, key, value, &call), 0);
	status = call_wait(&call);
	call_fini(&call);
	return status;
}

static int
get(struct cluster *c, uint32_t node, const char *key, struct evbuffer *out)
{
	struct call call;
	int status;

	call_init(&call);
	assert_int_equal(
	    weft_kv_client_get(c->client,
	                       weft_msvc_peer_find(c->client, ids[node]), key,
	                       strlen(key), NULL, on_reply, &call),
	    0);
	status = call_wait(&call);
	if (out != NULL)
		evbuffer_add_buffer(out, call.data);
	call_fini(&call);
	return status;
}

static bool
buf_is(struct evbuffer *buf, const char *value)
{
	return evbuffer_get_length(buf) == strlen(value) &&
	       memcmp(evbuffer_pullup(buf, -1), value, strlen(value)) == 0;
}

/* Reads key through node, over the network. */
static void
expect_get(struct cluster *c, uint32_t node, const char *key, const char *value)
{
	struct evbuffer *buf = evbuffer_new();

	assert_int_equal(get(c, node, key, buf), 0);
	assert_true(buf_is(buf, value));
	evbuffer_free(buf);
}

/* Whether node's replica holds value for key. */
static bool
local_is(struct cluster *c, uint32_t node, const char *key, const char *value)
{
	struct evbuffer *buf = evbuffer_new();
	bool is =
	    weft_kv_get_local(kv_of(c, node), key, strlen(key), buf) == 0 &&
	    buf_is(buf, value);

	evbuffer_free(buf);
	return is;
}

static void
key_value(char *key, char *value, const char *kp, const char *vp, int i)
{
	snprintf(key, 16, "%s%03d", kp, i);
	snprintf(value, 16, "%s-%03d", vp, i);
}

/* ---- Tests ----------------------------------------------------------------
 */

/*
 * n1 coordinates a write for four members (a majority: 3), its bytes to n3
 * and n4 stalled, so only n2 answers: 2 of 3. n4 leaves meanwhile: the
 * write's replicas are the three left, whose majority is 2, met already,
 * and the client hears success once, not a failure for the member that
 * never answered (its call times out after it left).
 */
static void
test_a_write_in_flight_when_a_replica_leaves_ends_once(void **state)
{
	struct cluster *c = cluster_start(4);
	struct call pending;
	weft_kv_stats st;

	(void)state;
	assert_int_equal(weft_kv_write_quorum(kv_of(c, 0)), 3);
	assert_int_equal(put(c, 0, "warm", "up"), 0);
	assert_int_equal(weft_sim_stall(c->sim, 0, 2, true), 0);
	assert_int_equal(weft_sim_stall(c->sim, 0, 3, true), 0);
	call_init(&pending);
	assert_int_equal(put_async(c, 0, "k", "during", &pending), 0);
	pause_ms(200);
	assert_int_equal(calls_of(&pending), 0);
	remove_member(c, 0, 3);
	assert_int_equal(call_wait(&pending), 0);
	wait_quorum(c, 0, 2);
	/* n3's stalled call times out later: nothing more is told. */
	pause_ms(1500);
	assert_int_equal(calls_of(&pending), 1);
	call_fini(&pending);
	assert_true(local_is(c, 0, "k", "during"));
	assert_true(local_is(c, 1, "k", "during"));
	weft_kv_get_stats(kv_of(c, 0), &st);
	assert_int_equal(st.quorum_failures, 0);
	assert_int_equal(st.writes_acked, 2);
	cluster_stop(c);
}

/*
 * n4 leaves (n1..n3 remove it), stops, and joins again empty while
 * KEYS keys are held. Its links to n2 and n3 are stalled, so it can copy
 * from n1 only, and needs N - W + 1 = 2 members: it refuses reads. Then
 * OVERWRITTEN keys are written again through n1 while n2 is cut off from
 * n1 (n1, n3 and n4 make the quorum of 3): n4 holds the new versions, n2
 * the old ones. Once n4's links come back it copies n2's or n3's data,
 * and the older copies must not replace what it holds.
 */
static void
test_a_joined_member_serves_reads_only_once_caught_up(void **state)
{
	struct cluster *c = cluster_start(4);
	char key[16], value[16];
	weft_kv_stats st;
	uint32_t i;

	(void)state;
	for (i = 0; i < 3; i++)
		remove_member(c, i, 3);
	wait_quorum(c, 0, 2);
	assert_int_equal(weft_sim_node_stop(c->sim, 3), 0);
	for (i = 0; i < KEYS; i++) {
		key_value(key, value, "k", "v1", (int)i);
		assert_int_equal(put(c, i % 3, key, value), 0);
	}
	stall_both(c, 1, 3, true);
	stall_both(c, 2, 3, true);
	assert_int_equal(weft_sim_node_start(c->sim, 3, NULL), 0);
	for (i = 0; i < 3; i++)
		add_member(c, i, 3);
	wait_quorum(c, 0, 3);
	/* Not caught up: a read is refused, not answered from an empty
	 * replica. */
	assert_int_equal(get(c, 3, "k000", NULL), WEFT_EOVERLOAD);
	assert_false(weft_kv_is_caught_up(kv_of(c, 3)));
	weft_kv_get_stats(kv_of(c, 3), &st);
	assert_true(st.reads_refused >= 1);
	/* Writes during the copy, which n2 misses. */
	stall_both(c, 0, 1, true);
	for (i = 0; i < OVERWRITTEN; i++) {
		key_value(key, value, "k", "v2", (int)i);
		assert_int_equal(put(c, 0, key, value), 0);
		key_value(key, value, "late", "v1", (int)i);
		assert_int_equal(put(c, 0, key, value), 0);
	}
	assert_true(local_is(c, 1, "k000", "v1-000"));
	assert_false(weft_kv_is_caught_up(kv_of(c, 3)));
	stall_both(c, 1, 3, false);
	stall_both(c, 2, 3, false);
	wait_caught_up(c, 3);
	for (i = 0; i < KEYS; i++) {
		key_value(key, value, "k", i < OVERWRITTEN ? "v2" : "v1",
		          (int)i);
		expect_get(c, 3, key, value);
	}
	for (i = 0; i < OVERWRITTEN; i++) {
		key_value(key, value, "late", "v1", (int)i);
		expect_get(c, 3, key, value);
	}
	weft_kv_get_stats(kv_of(c, 3), &st);
	assert_true(st.entries_pulled >= KEYS - OVERWRITTEN);
	assert_true(st.entries_pulled_stale >= OVERWRITTEN);
	weft_sim_heal(c->sim);
	cluster_stop(c);
}

/* Asks node for one anti-entropy round and waits for it. */
static void
repair_round(struct cluster *c, uint32_t node, weft_kv_stats *after)
{
	weft_kv *kv = kv_of(c, node);
	uint64_t before, end = deadline();

	weft_kv_get_stats(kv, after);
	before = after->repair_rounds;
	/* A round is skipped while no other member is up (n3 may still see
	 * the others down since they refused it): ask again. */
	do {
		weft_kv_repair(kv);
		pause_ms(50);
		weft_kv_get_stats(kv, after);
	} while (after->repair_rounds == before && weft_now_ns() < end);
	assert_true(after->repair_rounds > before);
}

/*
 * n3 misses KEYS writes: n1 and n2 take it out of their members while
 * they are made (each with a quorum of two), and take it back after.
 * n3 is a member all along in its own eyes and never heard of them; one
 * anti-entropy round with either pulls them, and the next finds the
 * digests equal.
 */
static void
test_anti_entropy_converges_a_replica_that_missed_writes(void **state)
{
	struct cluster *c = cluster_start(3);
	char key[16], value[16];
	weft_kv_stats st, again;
	uint32_t i;

	(void)state;
	remove_member(c, 0, 2);
	remove_member(c, 1, 2);
	wait_quorum(c, 0, 2);
	wait_quorum(c, 1, 2);
	for (i = 0; i < KEYS; i++) {
		key_value(key, value, "k", "v1", (int)i);
		assert_int_equal(put(c, i % 2, key, value), 0);
	}
	add_member(c, 0, 2);
	add_member(c, 1, 2);
	for (i = 0; i < KEYS; i++) {
		key_value(key, value, "k", "v1", (int)i);
		assert_false(local_is(c, 2, key, value));
	}
	repair_round(c, 2, &st);
	for (i = 0; i < KEYS; i++) {
		key_value(key, value, "k", "v1", (int)i);
		assert_true(local_is(c, 2, key, value));
	}
	assert_true(st.ranges_repaired > 0);
	assert_int_equal(st.entries_pulled, KEYS);
	/* Converged: the next round, with the other member, pulls
	 * nothing, and costs about the digests' 2 KiB each way. */
	repair_round(c, 2, &again);
	assert_int_equal(again.ranges_repaired, st.ranges_repaired);
	assert_int_equal(again.entries_pulled, st.entries_pulled);
	print_message(
	    "an anti-entropy round between equal replicas: %llu "
	    "payload bytes\n",
	    (unsigned long long)(again.bytes_pulled - st.bytes_pulled));
	cluster_stop(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(
	        test_a_write_in_flight_when_a_replica_leaves_ends_once),
	    cmocka_unit_test(
	        test_a_joined_member_serves_reads_only_once_caught_up),
	    cmocka_unit_test(
	        test_anti_entropy_converges_a_replica_that_missed_writes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
