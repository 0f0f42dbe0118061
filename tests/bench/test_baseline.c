/*
 * Tests of the thread-per-peer baseline (bench/baseline): requests among
 * baseline nodes and with weft's messaging service, each answered exactly
 * once; errors for unknown verbs and unreachable peers.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <weft/loop.h>
#include <weft/messaging.h>

#include "baseline.h"

#define VERB_ECHO 16
#define PER_PEER 500

/* Replies counted under a lock, waited for with a deadline. */
typedef struct tally {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint64_t ok, failed, wrong, last_status;
	uint8_t seen[3 * PER_PEER]; /* replies per request, exactly one */
} tally;

typedef struct call {
	tally *t;
	uint32_t index;
} call;

static void
tally_init(tally *t)
{
	memset(t, 0, sizeof(*t));
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cond, NULL);
}

static bool
tally_wait(tally *t, uint64_t n)
{
	struct timespec ts;
	bool done;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 10;
	pthread_mutex_lock(&t->lock);
	while (t->ok + t->failed < n &&
	       pthread_cond_timedwait(&t->cond, &t->lock, &ts) == 0)
		;
	done = t->ok + t->failed >= n;
	pthread_mutex_unlock(&t->lock);
	return done;
}

static void
count(tally *t, uint32_t index, int status, bool right)
{
	pthread_mutex_lock(&t->lock);
	t->seen[index]++;
	if (status == 0)
		t->ok++;
	else
		t->failed++;
	t->wrong += !right;
	t->last_status = (uint64_t)-status;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
}

static void
on_reply(wbase_node *n, int status, const void *data, size_t len, void *arg)
{
	call *c = arg;

	(void)n;
	count(c->t, c->index, status,
	      status != 0 || (len == sizeof(c->index) &&
	                      memcmp(data, &c->index, len) == 0));
}

static void
echo(wbase_node *n, wbase_msg *msg, void *arg)
{
	(void)n;
	(void)arg;
	wbase_respond(msg, wbase_msg_data(msg), wbase_msg_len(msg));
}

static weft_msvc_config *
make_config(int nodes)
{
	weft_msvc_config *cfg;
	char id[16];

	assert_int_equal(weft_msvc_config_new("bench", &cfg), 0);
	for (int i = 0; i < nodes; i++) {
		snprintf(id, sizeof(id), "n%d", i);
		assert_int_equal(
		    weft_msvc_config_add_node(cfg, id, "127.0.0.1", 0), 0);
	}
	weft_msvc_config_limits(cfg)->request_timeout_ms = 5000;
	return cfg;
}

static void
start_nodes(weft_msvc_config *cfg, wbase_node **nodes, int n)
{
	char id[16];

	for (int i = 0; i < n; i++) {
		snprintf(id, sizeof(id), "n%d", i);
		assert_int_equal(wbase_node_new(cfg, id, &nodes[i]), 0);
		assert_int_equal(
		    wbase_register(nodes[i], VERB_ECHO, echo, NULL), 0);
		assert_int_equal(wbase_node_start(nodes[i]), 0);
	}
	for (int i = 0; i < n; i++)
		for (int k = 0; k < n; k++) {
			snprintf(id, sizeof(id), "n%d", k);
			wbase_set_peer_addr(nodes[i], id, "127.0.0.1",
			                    wbase_node_port(nodes[k]));
		}
}

/* Node 0 asks nodes 1 and 2 PER_PEER times each; every reply comes
 * back once, with its own payload. */
static void
test_requests_among_baseline_nodes(void **state)
{
	weft_msvc_config *cfg = make_config(3);
	static call calls[2 * PER_PEER];
	wbase_node *nodes[3];
	wbase_stats st;
	tally t;

	(void)state;
	tally_init(&t);
	start_nodes(cfg, nodes, 3);
	for (uint32_t i = 0; i < 2 * PER_PEER; i++) {
		calls[i] = (call){&t, i};
		assert_int_equal(wbase_request(nodes[0], 1 + i % 2, VERB_ECHO,
		                               &calls[i].index,
		                               sizeof(calls[i].index), 0,
		                               on_reply, &calls[i]),
		                 0);
	}
	assert_true(tally_wait(&t, 2 * PER_PEER));
	assert_int_equal(t.ok, 2 * PER_PEER);
	assert_int_equal(t.wrong, 0);
	for (int i = 0; i < 2 * PER_PEER; i++)
		assert_int_equal(t.seen[i], 1);
	wbase_node_get_stats(nodes[0], &st);
	assert_int_equal(st.requests, 2 * PER_PEER);
	assert_int_equal(st.responses, 2 * PER_PEER);
	/* Two outbound writers, two inbound readers, one acceptor. */
	assert_int_equal(st.threads, 5);
	for (int i = 0; i < 3; i++)
		wbase_node_free(nodes[i]);
	weft_msvc_config_free(cfg);
}

static void
test_unknown_verb_and_dead_peer_fail(void **state)
{
	weft_msvc_config *cfg = make_config(3);
	static call calls[2];
	wbase_node *nodes[2];
	tally t;

	(void)state;
	tally_init(&t);
	/* n2 never starts: its port 0 cannot be dialed. */
	start_nodes(cfg, nodes, 2);
	calls[0] = (call){&t, 0};
	calls[1] = (call){&t, 1};
	assert_int_equal(
	    wbase_request(nodes[0], 1, 99, "x", 1, 0, on_reply, &calls[0]), 0);
	assert_true(tally_wait(&t, 1));
	assert_int_equal(t.last_status, -WEFT_EREMOTE);
	assert_int_equal(wbase_request(nodes[0], 2, VERB_ECHO, "x", 1, 0,
	                               on_reply, &calls[1]),
	                 0);
	assert_true(tally_wait(&t, 2));
	assert_int_equal(t.failed, 2);
	assert_int_equal(t.seen[0] + t.seen[1], 2);
	wbase_node_free(nodes[0]);
	wbase_node_free(nodes[1]);
	weft_msvc_config_free(cfg);
}

/* ---- With weft's messaging service --------------------------------------- */

static void
msvc_echo(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	(void)svc;
	(void)arg;
	weft_msvc_respond(msg, weft_msvc_msg_data(msg), weft_msvc_msg_len(msg));
}

static void
msvc_reply(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	call *c = arg;

	(void)svc;
	count(c->t, c->index, status,
	      status != 0 || (len == sizeof(c->index) &&
	                      memcmp(data, &c->index, len) == 0));
}

/* A baseline node and a weft node ask each other: the same protocol. */
static void
test_baseline_and_weft_interoperate(void **state)
{
	weft_msvc_config *cfg = make_config(2);
	static call calls[2 * PER_PEER];
	weft_loop_group *group;
	wbase_node *base;
	weft_msvc *svc;
	tally t;

	(void)state;
	tally_init(&t);
	assert_int_equal(weft_loop_group_new(1, &group), 0);
	assert_int_equal(weft_msvc_new(group, cfg, "n1", NULL, &svc), 0);
	assert_int_equal(weft_msvc_register(svc, VERB_ECHO, "echo", msvc_echo,
	                                    NULL, WEFT_MSVC_INLINE),
	                 0);
	assert_int_equal(weft_msvc_start(svc), 0);
	assert_int_equal(wbase_node_new(cfg, "n0", &base), 0);
	assert_int_equal(wbase_register(base, VERB_ECHO, echo, NULL), 0);
	assert_int_equal(wbase_node_start(base), 0);
	wbase_set_peer_addr(base, "n1", "127.0.0.1", weft_msvc_port(svc));
	weft_msvc_set_peer_addr(svc, "n0", "127.0.0.1", wbase_node_port(base));
	for (uint32_t i = 0; i < PER_PEER; i++) {
		calls[i] = (call){&t, i};
		assert_int_equal(wbase_request(base, 1, VERB_ECHO,
		                               &calls[i].index, 4, 0, on_reply,
		                               &calls[i]),
		                 0);
		calls[PER_PEER + i] = (call){&t, PER_PEER + i};
		assert_int_equal(
		    weft_msvc_request(svc, weft_msvc_peer_find(svc, "n0"),
		                      VERB_ECHO, &calls[PER_PEER + i].index, 4,
		                      NULL, msvc_reply, &calls[PER_PEER + i]),
		    0);
	}
	assert_true(tally_wait(&t, 2 * PER_PEER));
	assert_int_equal(t.ok, 2 * PER_PEER);
	assert_int_equal(t.wrong, 0);
	wbase_node_free(base);
	weft_msvc_stop(svc, 1000);
	/* The service's connections go with their loops stopped. */
	weft_loop_group_shutdown(group, 1000);
	weft_msvc_free(svc);
	weft_loop_group_free(group);
	weft_msvc_config_free(cfg);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_requests_among_baseline_nodes),
	    cmocka_unit_test(test_unknown_verb_and_dead_peer_fail),
	    cmocka_unit_test(test_baseline_and_weft_interoperate),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
