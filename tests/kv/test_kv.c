/* SPDX-License-Identifier: MIT */
/*
 * test_kv.c: the replicated key-value service on a 3-node cluster in one
 * process, on the cluster simulator (<weft/sim.h>: each node on a loop
 * group of its own, every connection through its fault layer), driven by
 * a non-member client service, as weft-kv does. The simulator is how a
 * service of your own is tested: on_start makes the service on each node,
 * on_stop frees it, and the faults (stalls, drops, delays, restarts)
 * come from weft_sim_*.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include <msgpack.h>
#include <weft/kv.h>
#include <weft/sim.h>

#include "rawpeer.h"

#define NODES 3
#define WAIT_MS 5000

static const char *const ids[NODES] = {"n1", "n2", "n3"};

/* The frame limit of the next cluster_start (0: the default). */
static size_t next_max_frame;

/* A replica that holds on to the writes it gets until the test lets them
 * go: a slow node, made on purpose. */
#define STUB UINT32_MAX
#define STUB_HELD 16

struct stub {
	pthread_mutex_t lock;
	weft_msvc_msg *held[STUB_HELD];
	_Atomic int count;
	int read_mode; /* STUB_READ_… */
	weft_msvc_msg *read_held;
	_Atomic int reads;
};

/* How the stub answers a quorum or all read (kv_read). */
enum {
	STUB_READ_NONE = 0,      /* no such verb: a node of an older build */
	STUB_READ_HOLD = 1,      /* holds it until the test lets it go */
	STUB_READ_MALFORMED = 2, /* an answer that is not one */
	STUB_READ_AHEAD = 3,     /* a version an hour ahead */
	STUB_READ_STRANGER = 4,  /* a version from no member */
	STUB_READ_HUGE = 5,      /* a bin header claiming 4 GiB */
};

/* The stub's read mode in the next cluster_start. */
static int next_stub_read;
/* The members' read_consistency in the next cluster_start (0: one). */
static weft_kv_consistency next_read_consistency;

/* Three nodes and a client on the cluster simulator (<weft/sim.h>): the
 * key-value service is started on each node by on_start, freed by
 * on_stop, as any service on the simulator would be. */
struct cluster {
	weft_sim *sim;
	uint32_t quorum[NODES]; /* per node; STUB: the stub replica */
	weft_kv *kv[NODES];
	struct stub stub;
	weft_msvc *client;
};

/* ---- Waiting for callbacks from the test thread ------------------------ */

/* One request's outcome, filled in by its reply callback. */
struct call {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int calls; /* must end at exactly 1 */
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
	c->data = evbuffer_new();
	assert_non_null(c->data);
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

static struct timespec
deadline_in(uint64_t ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}

/* Waits for the callback; returns its status. */
static int
call_wait(struct call *c)
{
	struct timespec ts = deadline_in(WAIT_MS);
	int status;

	pthread_mutex_lock(&c->lock);
	while (c->calls == 0 &&
	       pthread_cond_timedwait(&c->cond, &c->lock, &ts) == 0)
		;
	assert_int_equal(c->calls, 1);
	status = c->status;
	pthread_mutex_unlock(&c->lock);
	return status;
}

/* ---- The cluster -------------------------------------------------------- */

static void
on_stub_replicate(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	struct stub *st = arg;
	int i;

	(void)svc;
	pthread_mutex_lock(&st->lock);
	i = atomic_load(&st->count);
	if (i < STUB_HELD) {
		st->held[i] = weft_msvc_msg_detach(msg);
		atomic_store(&st->count, i + 1);
	}
	pthread_mutex_unlock(&st->lock);
}

/* Answers every write the stub holds: an ack, or an error. */
static void
stub_answer(struct stub *st, int status)
{
	int i;

	pthread_mutex_lock(&st->lock);
	for (i = 0; i < atomic_load(&st->count); i++) {
		if (status == 0)
			weft_msvc_respond(st->held[i], "", 0);
		else
			weft_msvc_respond_error(st->held[i], status, "stub");
	}
	atomic_store(&st->count, 0);
	pthread_mutex_unlock(&st->lock);
}

static void
stub_release(struct stub *st)
{
	stub_answer(st, 0);
}

/* A kv_read answer: [op, value, ts, origin]. */
static void
read_answer_payload(msgpack_sbuffer *sb, uint32_t op, const char *value,
                    uint64_t ts, const char *origin)
{
	msgpack_packer pk;

	msgpack_sbuffer_init(sb);
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, 4);
	msgpack_pack_uint32(&pk, op);
	msgpack_pack_bin_with_body(&pk, value, strlen(value));
	msgpack_pack_uint64(&pk, ts);
	msgpack_pack_str_with_body(&pk, origin, strlen(origin));
}

/* The stub's kv_read: held, or answered with a lie (see STUB_READ_…). */
static void
on_stub_read(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	static const uint8_t huge[] = {0x94, 0x01, 0xc6, 0xff,
	                               0xff, 0xff, 0xf0};
	uint64_t ahead = (weft_wall_ms() + 3600 * 1000ull) << 16;
	struct stub *st = arg;
	msgpack_sbuffer sb;

	(void)svc;
	atomic_fetch_add(&st->reads, 1);
	switch (st->read_mode) {
	case STUB_READ_HOLD:
		pthread_mutex_lock(&st->lock);
		if (st->read_held == NULL)
			st->read_held = weft_msvc_msg_detach(msg);
		pthread_mutex_unlock(&st->lock);
		return;
	case STUB_READ_MALFORMED:
		weft_msvc_respond(msg, "\x93\x01", 2);
		return;
	case STUB_READ_HUGE:
		weft_msvc_respond(msg, huge, sizeof(huge));
		return;
	default:
		read_answer_payload(
		    &sb, 1, "lie",
		    st->read_mode == STUB_READ_AHEAD ? ahead
		                                     : weft_wall_ms() << 16,
		    st->read_mode == STUB_READ_AHEAD ? "n3" : "mallory");
		weft_msvc_respond(msg, sb.data, sb.size);
		msgpack_sbuffer_destroy(&sb);
	}
}

/* The simulator starts a node: the service, or the stub replica. */
static int
on_start(weft_sim *sim, uint32_t node, weft_msvc *svc, void *arg)
{
	struct cluster *c = arg;
	weft_kv_opts opts = {.replicate_timeout_ms = 1000};

	(void)sim;
	if (!weft_msvc_is_member(svc))
		return 0;
	if (c->quorum[node] == STUB && c->stub.read_mode != STUB_READ_NONE &&
	    weft_msvc_register(svc, WEFT_KV_VERB_READ, "stub_read",
	                       on_stub_read, &c->stub, 0) != 0)
		return -1;
	if (c->quorum[node] == STUB)
		return weft_msvc_register(svc, WEFT_KV_VERB_REPLICATE, "stub",
		                          on_stub_replicate, &c->stub, 0);
	opts.write_quorum = c->quorum[node];
	opts.read_consistency = next_read_consistency;
	return weft_kv_new(svc, &opts, &c->kv[node]);
}

static void
on_stop(weft_sim *sim, uint32_t node, weft_msvc *svc, void *arg)
{
	struct cluster *c = arg;

	(void)sim;
	(void)svc;
	if (node < NODES) {
		weft_kv_free(c->kv[node]);
		c->kv[node] = NULL;
	}
}

/* True while node i knows node j down: a dial at start that came before
 * j listened leaves it so until its next heartbeat is answered, and a
 * write needing j's ack fails at once meanwhile. */
static bool
sees_down(struct cluster *c, size_t i, size_t j)
{
	weft_msvc *svc = weft_sim_node(c->sim, (uint32_t)i);
	weft_msvc_peer *p = svc ? weft_msvc_peer_find(svc, ids[j]) : NULL;

	return p != NULL && weft_msvc_peer_is_down(p);
}

/* Waits until every replica running has caught up (copied the others'
 * data) and answers reads, as a member does once started, and no node
 * knows another down. */
static void
wait_caught_up(struct cluster *c)
{
	uint64_t deadline = weft_now_ns() + WAIT_MS * 1000000ull;
	size_t i, j;

	for (i = 0; i < NODES; i++) {
		while (c->kv[i] != NULL && !weft_kv_is_caught_up(c->kv[i]) &&
		       weft_now_ns() < deadline)
			nanosleep(&(struct timespec){0, 1000000}, NULL);
		assert_true(c->kv[i] == NULL || weft_kv_is_caught_up(c->kv[i]));
	}
	for (i = 0; i < NODES; i++)
		for (j = 0; j < NODES; j++) {
			while (i != j && sees_down(c, i, j) &&
			       weft_now_ns() < deadline)
				nanosleep(&(struct timespec){0, 1000000}, NULL);
			assert_false(i != j && sees_down(c, i, j));
		}
}

/* Starts three nodes with the given write quorums (0: majority), node i's
 * wall clock clock_ms[i] ms off the system's (clock_ms may be NULL), and
 * a client. */
static struct cluster *
cluster_start_clocked(const uint32_t quorum[NODES],
                      const int64_t clock_ms[NODES])
{
	struct cluster *c = calloc(1, sizeof(*c));
	weft_sim_opts o = {.nodes = NODES,
	                   .cluster = "kvtest",
	                   .on_start = on_start,
	                   .on_stop = on_stop};
	weft_msvc_config *cfg;
	weft_msvc_limits l;
	uint32_t endpoint;
	size_t i;

	assert_non_null(c);
	pthread_mutex_init(&c->stub.lock, NULL);
	c->stub.read_mode = next_stub_read;
	next_stub_read = STUB_READ_NONE;
	for (i = 0; i < NODES; i++)
		c->quorum[i] = quorum ? quorum[i] : 0;
	assert_int_equal(weft_msvc_config_new("kvtest", &cfg), 0);
	l = *weft_msvc_config_limits(cfg);
	weft_msvc_config_free(cfg);
	l.reconnect_min_ms = 10;
	l.reconnect_max_ms = 200;
	l.heartbeat_interval_ms = 200;
	l.request_timeout_ms = 3000;
	l.connect_timeout_ms = 1000;
	l.loops = 1;
	if (next_max_frame != 0)
		l.max_frame_bytes = next_max_frame;
	next_max_frame = 0;
	o.limits = &l;
	o.arg = c;
	for (i = 0; clock_ms != NULL && i < NODES; i++)
		o.clock_offset_ms[i] = clock_ms[i];
	assert_int_equal(weft_sim_new(&o, &c->sim), 0);
	next_read_consistency = WEFT_KV_READ_DEFAULT;
	assert_int_equal(
	    weft_sim_client_new(c->sim, "client", &endpoint, &c->client), 0);
	assert_false(weft_msvc_is_member(c->client));
	wait_caught_up(c);
	return c;
}

static struct cluster *
cluster_start(const uint32_t quorum[NODES])
{
	return cluster_start_clocked(quorum, NULL);
}

static void
node_stop(struct cluster *c, size_t i)
{
	assert_int_equal(weft_sim_node_stop(c->sim, (uint32_t)i), 0);
}

static void
cluster_stop(struct cluster *c)
{
	stub_release(&c->stub);
	if (c->stub.read_held != NULL)
		weft_msvc_respond_error(c->stub.read_held, WEFT_EREMOTE,
		                        "stub");
	weft_sim_free(c->sim);
	pthread_mutex_destroy(&c->stub.lock);
	free(c);
}

static weft_msvc_peer *
node_peer(struct cluster *c, size_t i)
{
	weft_msvc_peer *p = weft_msvc_peer_find(c->client, ids[i]);

	assert_non_null(p);
	return p;
}

/* Waits until node i sees node j down (its connections closed). */
static void
wait_peer_down(struct cluster *c, size_t i, size_t j)
{
	weft_msvc_peer *p =
	    weft_msvc_peer_find(weft_sim_node(c->sim, (uint32_t)i), ids[j]);
	uint64_t deadline = weft_now_ns() + WAIT_MS * 1000000ull;

	assert_non_null(p);
	while (weft_msvc_peer_is_up(p) && weft_now_ns() < deadline)
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	assert_false(weft_msvc_peer_is_up(p));
}

/* ---- Synchronous calls through the client ------------------------------ */

static int
put(struct cluster *c, size_t node, const char *key, const void *value,
    size_t len)
{
	struct call call;
	int status;

	call_init(&call);
	assert_int_equal(weft_kv_client_put(c->client, node_peer(c, node), key,
	                                    strlen(key), value, len, NULL,
	                                    on_reply, &call),
	                 0);
	status = call_wait(&call);
	call_fini(&call);
	return status;
}

static int
put_str(struct cluster *c, size_t node, const char *key, const char *value)
{
	return put(c, node, key, value, strlen(value));
}

static int
del(struct cluster *c, size_t node, const char *key)
{
	struct call call;
	int status;

	call_init(&call);
	assert_int_equal(weft_kv_client_delete(c->client, node_peer(c, node),
	                                       key, strlen(key), NULL, on_reply,
	                                       &call),
	                 0);
	status = call_wait(&call);
	call_fini(&call);
	return status;
}

/* Gets key through node; the value is appended to out (may be NULL). */
static int
get(struct cluster *c, size_t node, const char *key, struct evbuffer *out)
{
	struct call call;
	int status;

	call_init(&call);
	assert_int_equal(weft_kv_client_get(c->client, node_peer(c, node), key,
	                                    strlen(key), NULL, on_reply, &call),
	                 0);
	status = call_wait(&call);
	if (out != NULL)
		evbuffer_add_buffer(out, call.data);
	call_fini(&call);
	return status;
}

static void
expect_kv(struct cluster *c, size_t node, const char *key, const char *value)
{
	struct evbuffer *buf = evbuffer_new();

	assert_int_equal(get(c, node, key, buf), 0);
	assert_int_equal(evbuffer_get_length(buf), strlen(value));
	assert_memory_equal(evbuffer_pullup(buf, -1), value, strlen(value));
	evbuffer_free(buf);
}

/* ---- Tests --------------------------------------------------------------- */

static const uint32_t all3[NODES] = {3, 3, 3};

/* A value larger than a frame (64 KiB here) is put, replicated to every
 * member and read back from each, in chunks both ways (PROTOCOL.md 2.1):
 * [kv] max_value need only fit max_message. */
static void
test_a_value_larger_than_a_frame_is_stored_everywhere(void **state)
{
	const size_t len = 300u << 10;
	struct cluster *c;
	struct evbuffer *buf;
	unsigned char *value = malloc(len);
	size_t i;

	(void)state;
	assert_non_null(value);
	for (i = 0; i < len; i++)
		value[i] = (unsigned char)(i * 7 + (i >> 12));
	next_max_frame = 64u << 10;
	c = cluster_start(all3);
	assert_int_equal(put(c, 0, "large", value, len), 0);
	for (i = 0; i < NODES; i++) {
		assert_non_null(buf = evbuffer_new());
		assert_int_equal(get(c, i, "large", buf), 0);
		assert_int_equal(evbuffer_get_length(buf), len);
		assert_memory_equal(evbuffer_pullup(buf, -1), value, len);
		evbuffer_free(buf);
	}
	cluster_stop(c);
	free(value);
}

static void
test_put_is_readable_on_every_node_after_the_ack(void **state)
{
	struct cluster *c = cluster_start(all3);
	weft_kv_stats st;
	size_t i;

	(void)state;
	assert_int_equal(put_str(c, 0, "colour", "blue"), 0);
	for (i = 0; i < NODES; i++)
		expect_kv(c, i, "colour", "blue");
	/* An overwrite through another node. */
	assert_int_equal(put_str(c, 2, "colour", "green"), 0);
	for (i = 0; i < NODES; i++)
		expect_kv(c, i, "colour", "green");
	weft_kv_get_stats(c->kv[0], &st);
	assert_true(st.puts == 1 && st.writes_acked == 1);
	assert_true(st.replicas_applied == 1 && st.gets == 2);
	assert_true(st.keys == 1 && st.value_bytes == 5);
	cluster_stop(c);
}

static void
test_unknown_key_is_not_found(void **state)
{
	struct cluster *c = cluster_start(NULL);
	struct evbuffer *buf = evbuffer_new();
	weft_kv_stats st;

	(void)state;
	assert_int_equal(weft_kv_write_quorum(c->kv[0]), 2);
	assert_int_equal(get(c, 1, "nothing-here", buf), WEFT_ENOTFOUND);
	assert_true(evbuffer_search(buf, "no such key", 11, NULL).pos >= 0);
	weft_kv_get_stats(c->kv[1], &st);
	assert_true(st.gets == 1 && st.get_misses == 1);
	assert_int_equal(weft_kv_get_local(c->kv[1], "nothing-here", 12, NULL),
	                 WEFT_ENOTFOUND);
	evbuffer_free(buf);
	cluster_stop(c);
}

static void
test_delete_removes_the_key_everywhere(void **state)
{
	struct cluster *c = cluster_start(all3);
	size_t i;

	(void)state;
	assert_int_equal(put_str(c, 0, "doomed", "soon gone"), 0);
	assert_int_equal(del(c, 1, "doomed"), 0);
	for (i = 0; i < NODES; i++)
		assert_int_equal(get(c, i, "doomed", NULL), WEFT_ENOTFOUND);
	/* Deleting again, or a key never written, succeeds. */
	assert_int_equal(del(c, 2, "doomed"), 0);
	assert_int_equal(del(c, 2, "never-written"), 0);
	/* And the key can come back. */
	assert_int_equal(put_str(c, 2, "doomed", "back"), 0);
	for (i = 0; i < NODES; i++)
		expect_kv(c, i, "doomed", "back");
	cluster_stop(c);
}

static void
test_write_quorum_with_a_node_stopped(void **state)
{
	/* n1 needs all three replicas, n2 a majority. */
	static const uint32_t q[NODES] = {3, 2, 2};
	struct cluster *c = cluster_start(q);
	uint64_t start;
	weft_kv_stats st;
	int status;

	(void)state;
	assert_int_equal(put_str(c, 0, "warm", "up"), 0);
	node_stop(c, 2);
	wait_peer_down(c, 0, 2);
	start = weft_now_ns();
	status = put_str(c, 0, "strict", "fails");
	assert_true(status == WEFT_ETIMEDOUT || status == WEFT_EPEERDOWN);
	/* It fails by the replicate timeout, not the client's (or at once,
	 * with n3 known down). */
	assert_true(weft_now_ns() - start < 2900 * 1000000ull);
	weft_kv_get_stats(c->kv[0], &st);
	assert_true(st.quorum_failures == 1);
	assert_int_equal(put_str(c, 1, "relaxed", "works"), 0);
	expect_kv(c, 0, "relaxed", "works");
	expect_kv(c, 1, "relaxed", "works");
	cluster_stop(c);
}

/* With n3 known down, a write that needs all three replicas fails at
 * once and is not applied anywhere; one that needs two still works. */
static void
test_impossible_quorum_fails_at_once(void **state)
{
	static const uint32_t q[NODES] = {3, 2, 2};
	struct cluster *c = cluster_start(q);
	weft_msvc_peer *p;
	uint64_t deadline;

	(void)state;
	assert_int_equal(put_str(c, 0, "warm", "up"), 0);
	node_stop(c, 2);
	p = weft_msvc_peer_find(weft_sim_node(c->sim, 0), ids[2]);
	deadline = weft_now_ns() + WAIT_MS * 1000000ull;
	while (!weft_msvc_peer_is_down(p) && weft_now_ns() < deadline)
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	assert_true(weft_msvc_peer_is_down(p));
	assert_int_equal(put_str(c, 0, "strict", "fails"), WEFT_EPEERDOWN);
	assert_int_equal(weft_kv_get_local(c->kv[0], "strict", 6, NULL),
	                 WEFT_ENOTFOUND);
	assert_int_equal(weft_kv_get_local(c->kv[1], "strict", 6, NULL),
	                 WEFT_ENOTFOUND);
	assert_int_equal(put_str(c, 1, "relaxed", "works"), 0);
	cluster_stop(c);
}

/* How many replicas hold value for key. */
static size_t
replicas_with(struct cluster *c, const char *key, const char *value)
{
	struct evbuffer *buf;
	size_t i, n = 0;

	for (i = 0; i < NODES; i++) {
		if (c->kv[i] == NULL) /* the stub */
			continue;
		buf = evbuffer_new();
		if (weft_kv_get_local(c->kv[i], key, strlen(key), buf) == 0 &&
		    evbuffer_get_length(buf) == strlen(value) &&
		    memcmp(evbuffer_pullup(buf, -1), value, strlen(value)) == 0)
			n++;
		evbuffer_free(buf);
	}
	return n;
}

/* Waits until no replica holds value for key; false if one still does. */
static bool
wait_replicas_without(struct cluster *c, const char *key, const char *value)
{
	uint64_t deadline = weft_now_ns() + WAIT_MS * 1000000ull;

	while (replicas_with(c, key, value) > 0 && weft_now_ns() < deadline)
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	return replicas_with(c, key, value) == 0;
}

static bool
stub_holds_one(struct cluster *c)
{
	uint64_t deadline = weft_now_ns() + WAIT_MS * 1000000ull;

	while (atomic_load(&c->stub.count) < 1 && weft_now_ns() < deadline)
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	return atomic_load(&c->stub.count) == 1;
}

static void
test_reads_do_not_wait_for_a_pending_write(void **state)
{
	/* n1 needs every replica's ack, and n3 sits on its writes. */
	static const uint32_t q[NODES] = {3, 2, STUB};
	struct cluster *c = cluster_start(q);
	struct call pending;
	int i;

	(void)state;
	assert_int_equal(put_str(c, 1, "k", "old"), 0);
	/* n2 needs only n1's ack: the stub may get "old" after put_str
	 * returned, so wait for it before letting it go. */
	assert_true(stub_holds_one(c));
	stub_release(&c->stub);
	call_init(&pending);
	assert_int_equal(weft_kv_client_put(c->client, node_peer(c, 0), "k", 1,
	                                    "new", 3, NULL, on_reply, &pending),
	                 0);
	assert_true(stub_holds_one(c));
	/* The write waits for n3, staged on n1, while reads of the same key
	 * on the same node go on, and return what was acknowledged. */
	for (i = 0; i < 50; i++)
		expect_kv(c, 0, "k", "old");
	pthread_mutex_lock(&pending.lock);
	assert_int_equal(pending.calls, 0);
	pthread_mutex_unlock(&pending.lock);
	/* Once n3 answers, n1 applies it and the client gets its answer. */
	stub_release(&c->stub);
	assert_int_equal(call_wait(&pending), 0);
	expect_kv(c, 0, "k", "new");
	call_fini(&pending);
	cluster_stop(c);
}

static void
test_a_replica_error_fails_the_write(void **state)
{
	static const uint32_t q[NODES] = {3, 2, STUB};
	struct cluster *c = cluster_start(q);
	struct call pending;
	weft_kv_stats st;

	(void)state;
	call_init(&pending);
	assert_int_equal(weft_kv_client_put(c->client, node_peer(c, 0), "k", 1,
	                                    "v", 1, NULL, on_reply, &pending),
	                 0);
	assert_true(stub_holds_one(c));
	stub_answer(&c->stub, WEFT_EINVAL);
	assert_int_equal(call_wait(&pending), WEFT_EREMOTE);
	assert_true(
	    evbuffer_search(pending.data, "write quorum not reached", 24, NULL)
	        .pos >= 0);
	call_fini(&pending);
	weft_kv_get_stats(c->kv[0], &st);
	assert_true(st.quorum_failures == 1 && st.replica_failures == 1);
	/* n2 applied the write and acknowledged it before n3's error: the
	 * coordinator's abort takes it back there, and n1 never had it. */
	assert_int_equal(weft_kv_get_local(c->kv[0], "k", 1, NULL),
	                 WEFT_ENOTFOUND);
	assert_true(wait_replicas_without(c, "k", "v"));
	assert_int_equal(weft_kv_get_local(c->kv[1], "k", 1, NULL),
	                 WEFT_ENOTFOUND);
	/* The stub, which had it too, gets its abort as well. */
	assert_true(stub_holds_one(c));
	stub_release(&c->stub);
	cluster_stop(c);
}

#define ROUNDS 30
#define KEYS 8

/* Every node's replica holds the same value for key (or none). */
static bool
replicas_agree(struct cluster *c, const char *key)
{
	struct evbuffer *v[NODES];
	bool same = true;
	int rv[NODES];
	size_t i;

	for (i = 0; i < NODES; i++) {
		v[i] = evbuffer_new();
		rv[i] = weft_kv_get_local(c->kv[i], key, strlen(key), v[i]);
	}
	for (i = 1; i < NODES && same; i++) {
		same =
		    rv[i] == rv[0] &&
		    evbuffer_get_length(v[i]) == evbuffer_get_length(v[0]) &&
		    memcmp(evbuffer_pullup(v[i], -1), evbuffer_pullup(v[0], -1),
		           evbuffer_get_length(v[0])) == 0;
	}
	for (i = 0; i < NODES; i++)
		evbuffer_free(v[i]);
	return same && rv[0] == 0;
}

/* Each node coordinates a write of every key at once, rounds times; then
 * every replica must end with the same value for each key. */
static void
write_concurrently(struct cluster *c, size_t rounds)
{
	struct call calls[NODES * KEYS];
	bool(*acked)[NODES * KEYS] = calloc(rounds, sizeof(*acked));
	char key[16], value[32];
	uint64_t deadline;
	bool agree = false;
	size_t r, i, k;
	int status;

	assert_non_null(acked);
	for (r = 0; r < rounds; r++) {
		for (i = 0; i < NODES; i++) {
			for (k = 0; k < KEYS; k++) {
				struct call *call = &calls[i * KEYS + k];

				snprintf(key, sizeof(key), "key%zu", k);
				snprintf(value, sizeof(value), "r%zu-%s", r,
				         ids[i]);
				call_init(call);
				assert_int_equal(weft_kv_client_put(
				                     c->client, node_peer(c, i),
				                     key, strlen(key), value,
				                     strlen(value), NULL,
				                     on_reply, call),
				                 0);
			}
		}
		/* A write that lost to a concurrent one at a replica
		 * before it met its quorum is not acknowledged. */
		for (i = 0; i < NODES * KEYS; i++) {
			status = call_wait(&calls[i]);
			assert_true(status == 0 || status == WEFT_ECONFLICT);
			acked[r][i] = status == 0;
			call_fini(&calls[i]);
		}
	}
	/* The third replica of each write may still be on its way. */
	deadline = weft_now_ns() + WAIT_MS * 1000000ull;
	while (!agree && weft_now_ns() < deadline) {
		agree = true;
		for (k = 0; k < KEYS && agree; k++) {
			snprintf(key, sizeof(key), "key%zu", k);
			agree = replicas_agree(c, key);
		}
		if (!agree)
			nanosleep(&(struct timespec){0, 1000000}, NULL);
	}
	assert_true(agree);
	/* The value every replica settled on was acknowledged. */
	for (k = 0; k < KEYS; k++) {
		struct evbuffer *v = evbuffer_new();
		unsigned wr, wn;

		snprintf(key, sizeof(key), "key%zu", k);
		assert_int_equal(
		    weft_kv_get_local(c->kv[0], key, strlen(key), v), 0);
		evbuffer_add(v, "", 1);
		assert_int_equal(sscanf((const char *)evbuffer_pullup(v, -1),
		                        "r%u-n%u", &wr, &wn),
		                 2);
		assert_true(acked[wr][(wn - 1) * KEYS + k]);
		evbuffer_free(v);
	}
	free(acked);
}

static void
test_concurrent_writers_converge(void **state)
{
	struct cluster *c = cluster_start(NULL);

	(void)state;
	write_concurrently(c, ROUNDS);
	cluster_stop(c);
}

/* ---- Under faults (the simulator's fault layer) ------------------------- */

/* Puts until one succeeds (a link healing, a peer marked up again). */
static bool
put_until_ok(struct cluster *c, size_t node, const char *key, const char *value)
{
	uint64_t deadline = weft_now_ns() + WAIT_MS * 1000000ull;

	while (weft_now_ns() < deadline)
		if (put_str(c, node, key, value) == 0)
			return true;
	return false;
}

/* Waits until node i is in touch with the other nodes and has measured
 * their clocks (a heartbeat came back from each). */
static void
wait_clocks_measured(struct cluster *c, size_t i)
{
	weft_msvc *svc = weft_sim_node(c->sim, (uint32_t)i);
	uint64_t deadline = weft_now_ns() + WAIT_MS * 1000000ull;
	weft_msvc_peer_stats ps;
	size_t j, measured = 0;

	for (j = 0; j < NODES; j++)
		if (j != i)
			assert_int_equal(
			    weft_msvc_peer_wait_up(
			        svc, weft_msvc_peer_find(svc, ids[j]), WAIT_MS),
			    0);
	while (measured < NODES - 1 && weft_now_ns() < deadline) {
		nanosleep(&(struct timespec){0, 1000000}, NULL);
		for (j = 0, measured = 0; j < NODES; j++) {
			if (j == i)
				continue;
			weft_msvc_peer_get_stats(
			    weft_msvc_peer_find(svc, ids[j]), &ps);
			measured += ps.clock_measured;
		}
	}
	assert_int_equal(measured, NODES - 1);
}

/*
 * A coordinator whose clock is an hour ahead: its versions are still
 * close to the others' clocks (it stamps them by the cluster's time, the
 * median of the clocks it measures), so the replicas take its writes,
 * and a write through another node afterwards is newer and wins.
 */
static void
test_a_coordinator_an_hour_ahead_writes_in_order(void **state)
{
	const int64_t clocks[NODES] = {3600 * 1000, 0, 0};
	struct cluster *c = cluster_start_clocked(all3, clocks);

	(void)state;
	wait_clocks_measured(c, 0);
	assert_int_equal(put_str(c, 0, "skewed", "from n1"), 0);
	expect_kv(c, 1, "skewed", "from n1");
	assert_int_equal(put_str(c, 1, "skewed", "from n2"), 0);
	expect_kv(c, 0, "skewed", "from n2");
	expect_kv(c, 2, "skewed", "from n2");
	cluster_stop(c);
}

/*
 * A coordinator whose clock is an hour behind, restarted after it missed
 * a write: its next write of that key is newer by the cluster's time and
 * must win, not lose to the version it never saw (CONFLICT).
 */
static void
test_a_coordinator_an_hour_behind_writes_in_order(void **state)
{
	const int64_t clocks[NODES] = {-3600 * 1000, 0, 0};
	struct cluster *c = cluster_start_clocked(NULL, clocks);

	(void)state;
	node_stop(c, 0);
	assert_int_equal(put_str(c, 1, "behind", "before"), 0);
	assert_int_equal(weft_sim_node_start(c->sim, 0, NULL), 0);
	wait_caught_up(c);
	wait_clocks_measured(c, 0);
	assert_int_equal(put_str(c, 0, "behind", "after"), 0);
	expect_kv(c, 1, "behind", "after");
	expect_kv(c, 2, "behind", "after");
	cluster_stop(c);
}

static void
test_a_stalled_replica_fails_an_all_quorum_write_until_healed(void **state)
{
	struct cluster *c = cluster_start(all3);
	uint64_t start;
	int status;
	size_t i;

	(void)state;
	assert_int_equal(put_str(c, 0, "warm", "up"), 0);
	/* n1's replication to n3 stops on the way: n3 never sees it. */
	assert_int_equal(weft_sim_stall(c->sim, 0, 2, true), 0);
	start = weft_now_ns();
	status = put_str(c, 0, "k", "during");
	assert_true(status == WEFT_ETIMEDOUT || status == WEFT_EPEERDOWN);
	/* By the replicate timeout (1 s), not the client's 3 s. */
	assert_true(weft_now_ns() - start < 2900 * 1000000ull);
	/* A majority write through n2 still works meanwhile. */
	assert_int_equal(put_str(c, 1, "other", "fine"), 0);
	weft_sim_heal(c->sim);
	assert_true(put_until_ok(c, 0, "k", "after"));
	for (i = 0; i < NODES; i++)
		expect_kv(c, i, "k", "after");
	cluster_stop(c);
}

/*
 * A write that failed is visible through no node. n1 needs all three
 * replicas and n3 is paused: n2 applies the write and acknowledges it,
 * n3's replication times out (or n3 is marked down), and the client hears
 * the failure. n1 never applied it, n2 goes back to the acknowledged value
 * on n1's abort, and n3, resumed, either drops the expired replication
 * or applies it and then takes it back on the abort n1 kept for it.
 */
static void
test_a_failed_write_is_never_visible(void **state)
{
	struct cluster *c = cluster_start(all3);
	weft_kv_stats st;
	int status;
	size_t i;

	(void)state;
	assert_int_equal(put_str(c, 0, "k", "acked"), 0);
	assert_int_equal(weft_sim_pause(c->sim, 2, true), 0);
	status = put_str(c, 0, "k", "failed");
	assert_true(status == WEFT_ETIMEDOUT || status == WEFT_EPEERDOWN);
	/* Through the coordinator, at once. */
	expect_kv(c, 0, "k", "acked");
	/* Through the replica that applied it, once the abort is there. */
	assert_true(wait_replicas_without(c, "k", "failed"));
	expect_kv(c, 1, "k", "acked");
	weft_kv_get_stats(c->kv[1], &st);
	assert_int_equal(st.replicas_aborted, 1);
	/* n3, resumed, may still apply the replication if it has not
	 * expired: n1's abort, parked while n3 was down, follows it. */
	weft_sim_heal(c->sim);
	assert_true(put_until_ok(c, 0, "other", "healed"));
	assert_true(wait_replicas_without(c, "k", "failed"));
	for (i = 0; i < NODES; i++)
		expect_kv(c, i, "k", "acked");
	cluster_stop(c);
}

static void
test_acknowledged_writes_survive_dropped_connections(void **state)
{
	struct cluster *c = cluster_start(NULL);
	uint64_t rng = weft_sim_seed(c->sim), deadline;
	char key[16], value[16];
	bool acked[40], held;
	size_t i, n;

	(void)state;
	for (i = 0; i < 40; i++) {
		uint32_t a = (uint32_t)(i % NODES), b;

		/* A dropped connection between two nodes before each write;
		 * the same seed drops the same ones. */
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		b = (a + 1 + (uint32_t)(rng >> 33) % (NODES - 1)) % NODES;
		assert_int_equal(weft_sim_drop(c->sim, a, b), 0);
		snprintf(key, sizeof(key), "k%zu", i);
		snprintf(value, sizeof(value), "v%zu", i);
		acked[i] = put_str(c, i % NODES, key, value) == 0;
	}
	/* Every acknowledged write is on a majority of the replicas. */
	deadline = weft_now_ns() + WAIT_MS * 1000000ull;
	do {
		held = true;
		for (i = n = 0; i < 40; i++) {
			snprintf(key, sizeof(key), "k%zu", i);
			snprintf(value, sizeof(value), "v%zu", i);
			if (acked[i] && replicas_with(c, key, value) < 2)
				held = false;
			n += acked[i];
		}
	} while (!held && weft_now_ns() < deadline);
	print_message("%zu of 40 writes acknowledged (seed 0x%llx)\n", n,
	              (unsigned long long)weft_sim_seed(c->sim));
	assert_true(held);
	assert_true(n > 0);
	cluster_stop(c);
}

static void
test_writers_converge_with_connections_reordered(void **state)
{
	struct cluster *c = cluster_start(NULL);
	uint32_t a, b;

	(void)state;
	/* Every link waits 0 to 20 ms a read: connections overtake each
	 * other, each keeps its own order. */
	for (a = 0; a <= NODES; a++)
		for (b = 0; b <= NODES; b++)
			if (a != b && (a < NODES || b < NODES))
				assert_int_equal(
				    weft_sim_delay(c->sim, a, b, 0, 20), 0);
	write_concurrently(c, ROUNDS / 3);
	cluster_stop(c);
}

static void
test_one_mebibyte_value(void **state)
{
	struct cluster *c = cluster_start(all3);
	size_t len = 1u << 20, i;
	struct evbuffer *buf;
	uint8_t *value;

	(void)state;
	value = malloc(len);
	assert_non_null(value);
	for (i = 0; i < len; i++)
		value[i] = (uint8_t)(i * 131 + (i >> 12));
	assert_int_equal(put(c, 1, "big", value, len), 0);
	for (i = 0; i < NODES; i++) {
		buf = evbuffer_new();
		assert_int_equal(get(c, i, "big", buf), 0);
		assert_int_equal(evbuffer_get_length(buf), len);
		assert_memory_equal(evbuffer_pullup(buf, -1), value, len);
		evbuffer_free(buf);
	}
	free(value);
	cluster_stop(c);
}

static void
test_malformed_requests_are_refused(void **state)
{
	struct cluster *c = cluster_start(NULL);
	static const uint8_t junk[] = {0xc1, 0x00, 0xff};
	static const uint32_t verbs[] = {WEFT_KV_VERB_GET, WEFT_KV_VERB_PUT,
	                                 WEFT_KV_VERB_DELETE,
	                                 WEFT_KV_VERB_REPLICATE};
	struct call call;
	weft_kv_stats st;
	size_t i;

	(void)state;
	for (i = 0; i < 4; i++) {
		/* Replicas take writes from members only: n2 asks. */
		weft_msvc *from = verbs[i] == WEFT_KV_VERB_REPLICATE
		                      ? weft_sim_node(c->sim, 1)
		                      : c->client;

		call_init(&call);
		assert_int_equal(
		    weft_msvc_request(from, weft_msvc_peer_find(from, ids[0]),
		                      verbs[i], junk, sizeof(junk), NULL,
		                      on_reply, &call),
		    0);
		assert_int_equal(call_wait(&call), WEFT_EINVAL);
		call_fini(&call);
	}
	weft_kv_get_stats(c->kv[0], &st);
	assert_true(st.bad_requests == 4);
	/* Client-side checks refuse bad keys before sending. */
	assert_int_equal(weft_kv_client_get(c->client, node_peer(c, 0), "", 0,
	                                    NULL, on_reply, NULL),
	                 WEFT_EINVAL);
	/* The node still serves. */
	assert_int_equal(put_str(c, 0, "after", "fine"), 0);
	cluster_stop(c);
}

/* ---- Peers that lie ------------------------------------------------------ */

/* A kv_replicate payload: [op, key, value, ts, origin]. */
static void
replicate_payload(msgpack_sbuffer *sb, const char *key, const char *value,
                  uint64_t ts, const char *origin)
{
	msgpack_packer pk;

	msgpack_sbuffer_init(sb);
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	msgpack_pack_array(&pk, 5);
	msgpack_pack_uint8(&pk, 1); /* put */
	msgpack_pack_bin_with_body(&pk, key, strlen(key));
	msgpack_pack_bin_with_body(&pk, value, strlen(value));
	msgpack_pack_uint64(&pk, ts);
	msgpack_pack_str_with_body(&pk, origin, strlen(origin));
}

/* Sends one replicate request on p; a client then reads the answer (a
 * member's goes back on the node's own connection to that member). */
static void
raw_replicate(rawpeer *p, const char *key, const char *value, uint64_t ts,
              rp_env *answer)
{
	msgpack_sbuffer sb;

	replicate_payload(&sb, key, value, ts, "n1");
	assert_true(
	    rp_request(p, 42, WEFT_KV_VERB_REPLICATE, sb.data, sb.size));
	msgpack_sbuffer_destroy(&sb);
	if (answer == NULL)
		return;
	assert_int_equal(rp_read_env(p, answer, WAIT_MS), 0);
	assert_true(answer->id == 42);
}

/* Waits until node's counter (a weft_kv_stats field) reaches want. */
static void
wait_kv_stat(struct cluster *c, size_t node, size_t offset, uint64_t want)
{
	uint64_t deadline = weft_now_ns() + WAIT_MS * 1000000ull;
	weft_kv_stats st;

	do {
		weft_kv_get_stats(c->kv[node], &st);
		if (*(uint64_t *)((char *)&st + offset) >= want)
			return;
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	} while (weft_now_ns() < deadline);
	fail_msg("counter at offset %zu of node %zu below %llu", offset, node,
	         (unsigned long long)want);
}

#define WAIT_KV(c, node, field, want)                                          \
	wait_kv_stat(c, node, offsetof(weft_kv_stats, field), want)

/*
 * A client that writes a replica directly with the largest version
 * pinned the key for good (later puts and deletes said yes and changed
 * nothing), and pushed the node's clock to its end. Replicas take writes
 * from members only.
 */
static void
test_clients_cannot_write_replicas(void **state)
{
	struct cluster *c = cluster_start(NULL);
	rawpeer p;
	rp_env e;

	(void)state;
	rp_connect(&p, weft_msvc_port(weft_sim_node(c->sim, 0)), NULL, NULL);
	assert_int_equal(rp_handshake(&p, "kvtest", "evil", RP_CLIENT, 1, 0),
	                 0);
	raw_replicate(&p, "pinned", "mine", UINT64_MAX, &e);
	assert_int_equal(e.flags, RP_RESPONSE | RP_ERROR);
	assert_int_equal(e.error_code, 11); /* FORBIDDEN */
	rp_close(&p);
	assert_int_equal(put_str(c, 0, "pinned", "theirs"), 0);
	expect_kv(c, 0, "pinned", "theirs");
	assert_int_equal(del(c, 0, "pinned"), 0);
	assert_int_equal(get(c, 0, "pinned", NULL), WEFT_ENOTFOUND);
	cluster_stop(c);
}

/* A member (here a plaintext impostor of n3) sends a version far ahead
 * of the replica's clock: refused, and the key stays writable. */
static void
test_replicas_refuse_versions_far_ahead(void **state)
{
	struct cluster *c = cluster_start(NULL);
	uint64_t ahead = (weft_wall_ms() + 3600 * 1000ull) << 16;
	rawpeer p;

	(void)state;
	rp_connect(&p, weft_msvc_port(weft_sim_node(c->sim, 0)), NULL, NULL);
	assert_int_equal(rp_handshake(&p, "kvtest", "n3", RP_MEMBER, 1, 0), 0);
	raw_replicate(&p, "far", "pinned", UINT64_MAX, NULL);
	raw_replicate(&p, "far", "pinned", ahead, NULL);
	WAIT_KV(c, 0, replicas_refused, 2);
	rp_close(&p);
	assert_int_equal(put_str(c, 0, "far", "fresh"), 0);
	expect_kv(c, 0, "far", "fresh");
	expect_kv(c, 1, "far", "fresh");
	expect_kv(c, 2, "far", "fresh");
	cluster_stop(c);
}

/*
 * n2 holds a newer version of a key than n1's clock can stamp (from a
 * member whose clock runs ahead, within the skew). A put coordinated by
 * n1 that every replica must apply loses at n2: it must fail with
 * ECONFLICT, not be acknowledged as applied.
 */
static void
test_a_write_that_lost_is_not_acknowledged(void **state)
{
	struct cluster *c = cluster_start(all3);
	uint64_t ahead = (weft_wall_ms() + 5000) << 16;
	weft_kv_stats st;
	rawpeer p;

	(void)state;
	rp_connect(&p, weft_msvc_port(weft_sim_node(c->sim, 1)), NULL, NULL);
	assert_int_equal(rp_handshake(&p, "kvtest", "n3", RP_MEMBER, 1, 0), 0);
	raw_replicate(&p, "raced", "newer", ahead, NULL);
	WAIT_KV(c, 1, replicas_applied, 1);
	rp_close(&p);
	assert_int_equal(put_str(c, 0, "raced", "older"), WEFT_ECONFLICT);
	weft_kv_get_stats(c->kv[0], &st);
	assert_int_equal(st.writes_acked, 0);
	assert_int_equal(st.writes_superseded, 1);
	expect_kv(c, 1, "raced", "newer");
	cluster_stop(c);
}

/* ---- Read consistency ------------------------------------------------- */

/* Gets key through node at cl; the value is appended to out (may be
 * NULL), the error text to text (may be NULL, at most textlen bytes). */
static int
get_at(struct cluster *c, size_t node, const char *key, weft_kv_consistency cl,
       struct evbuffer *out)
{
	struct call call;
	int status;

	call_init(&call);
	assert_int_equal(weft_kv_client_get_at(c->client, node_peer(c, node),
	                                       key, strlen(key), cl, NULL,
	                                       on_reply, &call),
	                 0);
	status = call_wait(&call);
	if (out != NULL)
		evbuffer_add_buffer(out, call.data);
	call_fini(&call);
	return status;
}

static void
expect_kv_at(struct cluster *c, size_t node, const char *key,
             weft_kv_consistency cl, const char *value)
{
	struct evbuffer *buf = evbuffer_new();

	assert_int_equal(get_at(c, node, key, cl, buf), 0);
	assert_int_equal(evbuffer_get_length(buf), strlen(value));
	assert_memory_equal(evbuffer_pullup(buf, -1), value, strlen(value));
	evbuffer_free(buf);
}

/* Writes (key, value) at ts on node's replica alone, as a write that
 * reached it and not the others (from a plaintext impostor of another
 * member, with origin n1). */
static void
replica_only(struct cluster *c, size_t node, const char *key, const char *value,
             uint64_t ts)
{
	weft_kv_stats st;
	rawpeer p;

	weft_kv_get_stats(c->kv[node], &st);
	rp_connect(&p, weft_msvc_port(weft_sim_node(c->sim, (uint32_t)node)),
	           NULL, NULL);
	assert_int_equal(rp_handshake(&p, "kvtest", ids[(node + 1) % NODES],
	                              RP_MEMBER, 1, 0),
	                 0);
	raw_replicate(&p, key, value, ts, NULL);
	WAIT_KV(c, node, replicas_applied, st.replicas_applied + 1);
	rp_close(&p);
}

/*
 * n3 alone holds a newer version of a key than n1 and n2 (a write the
 * others missed): a read at one through n1 answers n1's value, a read at
 * all the newest, counts the disagreement and brings n1's own replica up
 * to date. A newer value on n2 and n3 is what a quorum read through n1
 * answers, whichever of them answers first.
 */
static void
test_quorum_and_all_reads_return_the_newest_version(void **state)
{
	struct cluster *c = cluster_start(all3);
	uint64_t newer = (weft_wall_ms() + 2000) << 16;
	weft_kv_stats st;

	(void)state;
	assert_int_equal(put_str(c, 0, "k", "old"), 0);
	replica_only(c, 2, "k", "new", newer);
	expect_kv_at(c, 0, "k", WEFT_KV_READ_ONE, "old");
	expect_kv(c, 0, "k", "old"); /* the default is one */
	expect_kv_at(c, 0, "k", WEFT_KV_READ_ALL, "new");
	weft_kv_get_stats(c->kv[0], &st);
	assert_int_equal(st.reads_coordinated, 1);
	assert_int_equal(st.read_disagreements, 1);
	assert_int_equal(st.read_repairs, 1);
	assert_int_equal(st.read_failures, 0);
	expect_kv_at(c, 0, "k", WEFT_KV_READ_ONE, "new"); /* repaired */
	/* n2 still has the old one, left to anti-entropy. */
	expect_kv_at(c, 1, "k", WEFT_KV_READ_ONE, "old");

	/* n1's clock has seen newer (a put now is stamped after it): newer
	 * still for "q", within max_clock_skew. */
	newer += 5000ull << 16;
	assert_int_equal(put_str(c, 0, "q", "old"), 0);
	replica_only(c, 1, "q", "new", newer);
	replica_only(c, 2, "q", "new", newer);
	expect_kv_at(c, 0, "q", WEFT_KV_READ_QUORUM, "new");
	weft_kv_get_stats(c->kv[0], &st);
	assert_int_equal(st.reads_coordinated, 2);
	assert_int_equal(st.read_disagreements, 2);
	cluster_stop(c);
}

/* A delete newer than a replica's value wins an all read: not found. An
 * absent key read at all is not found without disagreement. */
static void
test_an_all_read_sees_a_newer_delete(void **state)
{
	struct cluster *c = cluster_start(NULL);
	weft_kv_stats st;

	(void)state;
	assert_int_equal(put_str(c, 0, "gone", "here"), 0);
	expect_kv_at(c, 1, "gone", WEFT_KV_READ_ALL, "here");
	assert_int_equal(del(c, 0, "gone"), 0);
	assert_int_equal(get_at(c, 2, "gone", WEFT_KV_READ_ALL, NULL),
	                 WEFT_ENOTFOUND);
	assert_int_equal(get_at(c, 2, "never", WEFT_KV_READ_ALL, NULL),
	                 WEFT_ENOTFOUND);
	weft_kv_get_stats(c->kv[2], &st);
	assert_int_equal(st.reads_coordinated, 2);
	assert_int_equal(st.get_misses, 2);
	cluster_stop(c);
}

/* With n3 stopped, an all read fails at once, saying why; a quorum read
 * and a read at one still succeed. */
static void
test_a_replica_down_fails_an_all_read_not_one(void **state)
{
	struct cluster *c = cluster_start(NULL);
	struct call call;
	char text[256] = "";
	weft_kv_stats st;

	(void)state;
	assert_int_equal(put_str(c, 0, "k", "v"), 0);
	node_stop(c, 2);
	wait_peer_down(c, 0, 2);
	call_init(&call);
	assert_int_equal(weft_kv_client_get_at(c->client, node_peer(c, 0), "k",
	                                       1, WEFT_KV_READ_ALL, NULL,
	                                       on_reply, &call),
	                 0);
	assert_int_equal(call_wait(&call), WEFT_EPEERDOWN);
	evbuffer_copyout(call.data, text, sizeof(text) - 1);
	assert_non_null(strstr(text, "read consistency all"));
	call_fini(&call);
	expect_kv_at(c, 0, "k", WEFT_KV_READ_ONE, "v");
	expect_kv_at(c, 0, "k", WEFT_KV_READ_QUORUM, "v");
	weft_kv_get_stats(c->kv[0], &st);
	assert_int_equal(st.read_failures, 1);
	cluster_stop(c);
}

/*
 * n3 holds the read it is asked; n3 is then removed from n1's members.
 * The read ends, once, with what n1 and n2 hold: a member that left is
 * taken out of the read, as out of a write.
 */
static void
test_a_member_removed_mid_read_ends_it_once(void **state)
{
	static const uint32_t q[NODES] = {2, 2, STUB};
	struct cluster *c;
	struct call call;
	uint64_t deadline;

	(void)state;
	next_stub_read = STUB_READ_HOLD;
	c = cluster_start(q);
	assert_int_equal(put_str(c, 0, "k", "v"), 0);
	call_init(&call);
	assert_int_equal(weft_kv_client_get_at(c->client, node_peer(c, 0), "k",
	                                       1, WEFT_KV_READ_ALL, NULL,
	                                       on_reply, &call),
	                 0);
	deadline = weft_now_ns() + WAIT_MS * 1000000ull;
	while (atomic_load(&c->stub.reads) == 0 && weft_now_ns() < deadline)
		nanosleep(&(struct timespec){0, 1000000}, NULL);
	assert_int_equal(atomic_load(&c->stub.reads), 1);
	pthread_mutex_lock(&call.lock);
	assert_int_equal(call.calls, 0);
	pthread_mutex_unlock(&call.lock);
	assert_int_equal(
	    weft_msvc_member_remove(weft_sim_node(c->sim, 0), ids[2]), 0);
	assert_int_equal(call_wait(&call), 0);
	assert_int_equal(evbuffer_get_length(call.data), 1);
	/* The held request answered late changes nothing. */
	pthread_mutex_lock(&c->stub.lock);
	if (c->stub.read_held != NULL)
		weft_msvc_respond_error(c->stub.read_held, WEFT_EREMOTE,
		                        "late");
	c->stub.read_held = NULL;
	pthread_mutex_unlock(&c->stub.lock);
	nanosleep(&(struct timespec){0, 50000000}, NULL);
	pthread_mutex_lock(&call.lock);
	assert_int_equal(call.calls, 1);
	pthread_mutex_unlock(&call.lock);
	call_fini(&call);
	cluster_stop(c);
}

/* n3 is of an older build, without kv_read: an all read through n1 is
 * read on n1 and n2 alone, and says so in its counter. */
static void
test_a_member_without_reads_is_left_out(void **state)
{
	static const uint32_t q[NODES] = {2, 2, STUB};
	struct cluster *c = cluster_start(q);
	weft_kv_stats st;

	(void)state;
	assert_int_equal(put_str(c, 0, "k", "v"), 0);
	expect_kv_at(c, 0, "k", WEFT_KV_READ_ALL, "v");
	weft_kv_get_stats(c->kv[0], &st);
	assert_int_equal(st.reads_downgraded, 1);
	assert_int_equal(st.read_failures, 0);
	cluster_stop(c);
}

/*
 * n3 answers reads with lies: a malformed answer, a bin that claims
 * 4 GiB, a version an hour ahead (which would win every read of the key
 * from then on), a version from no member. Each counts as n3 failing:
 * the all read fails, a quorum read answers n1's and n2's value, the
 * coordinator's clock and replica are untouched.
 */
static void
test_lying_read_answers_fail_the_replica_not_the_node(void **state)
{
	static const uint32_t q[NODES] = {2, 2, STUB};
	static const int modes[] = {STUB_READ_MALFORMED, STUB_READ_HUGE,
	                            STUB_READ_AHEAD, STUB_READ_STRANGER};
	weft_kv_stats st;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++) {
		struct cluster *c;

		next_stub_read = modes[i];
		c = cluster_start(q);
		assert_int_equal(put_str(c, 0, "k", "v"), 0);
		assert_int_equal(get_at(c, 0, "k", WEFT_KV_READ_ALL, NULL),
		                 WEFT_EREMOTE);
		expect_kv_at(c, 0, "k", WEFT_KV_READ_QUORUM, "v");
		expect_kv_at(c, 0, "k", WEFT_KV_READ_ONE, "v");
		weft_kv_get_stats(c->kv[0], &st);
		assert_true(st.read_answers_refused >= 1);
		assert_int_equal(st.read_failures, 1);
		assert_int_equal(st.read_repairs, 0);
		/* Writes still work: the clock was not pushed ahead. */
		assert_int_equal(put_str(c, 0, "k", "w"), 0);
		expect_kv_at(c, 1, "k", WEFT_KV_READ_ONE, "w");
		cluster_stop(c);
	}
}

/* A node's read_consistency is what a get that names none reads (an
 * older client's get, which cannot name one): at all, n3's newer value. */
static void
test_the_default_read_consistency_reads_every_replica(void **state)
{
	struct cluster *c;
	weft_kv_stats st;

	(void)state;
	next_read_consistency = WEFT_KV_READ_ALL;
	c = cluster_start(all3);
	assert_int_equal(put_str(c, 0, "k", "old"), 0);
	replica_only(c, 2, "k", "new", (weft_wall_ms() + 2000) << 16);
	expect_kv(c, 0, "k", "new");
	expect_kv_at(c, 1, "k", WEFT_KV_READ_ONE, "old");
	weft_kv_get_stats(c->kv[0], &st);
	assert_int_equal(st.reads_coordinated, 1);
	cluster_stop(c);
}

/* The names of the read consistencies, and a bad one refused. */
static void
test_read_consistency_config_is_validated(void **state)
{
	weft_kv_consistency cl;

	(void)state;
	assert_int_equal(weft_kv_consistency_parse("ALL", &cl), 0);
	assert_int_equal(cl, WEFT_KV_READ_ALL);
	assert_int_equal(weft_kv_consistency_parse("quorum", &cl), 0);
	assert_int_equal(cl, WEFT_KV_READ_QUORUM);
	assert_int_equal(weft_kv_consistency_parse("one", &cl), 0);
	assert_int_equal(cl, WEFT_KV_READ_ONE);
	assert_int_equal(weft_kv_consistency_parse("two", &cl), WEFT_EINVAL);
	assert_int_equal(weft_kv_consistency_parse("", &cl), WEFT_EINVAL);
	assert_int_equal(
	    weft_kv_client_get_at(NULL, NULL, "k", 1, 4, NULL, on_reply, NULL),
	    WEFT_EINVAL);
}

/* ---- Scans -------------------------------------------------------------- */

/* A scan's answer, read back: up to 16 keys and their value lengths. */
struct scanned {
	char keys[16][32];
	size_t value_len[16];
	int n;
	char next[32]; /* "" when nil */
	bool ordered;
};

static void
on_entry(const void *key, size_t key_len, const void *value, size_t value_len,
         void *arg)
{
	struct scanned *sc = arg;

	(void)value;
	assert_true(sc->n < 16 && key_len < 32);
	memcpy(sc->keys[sc->n], key, key_len);
	sc->keys[sc->n][key_len] = '\0';
	if (sc->n > 0 && strcmp(sc->keys[sc->n - 1], sc->keys[sc->n]) >= 0)
		sc->ordered = false;
	sc->value_len[sc->n++] = value_len;
}

/* Scans through node from start; fills *out and returns the status. */
static int
scan(struct cluster *c, size_t node, const char *start, uint32_t count,
     struct scanned *out)
{
	const void *next;
	size_t next_len;
	struct call call;
	int status;

	memset(out, 0, sizeof(*out));
	out->ordered = true;
	call_init(&call);
	assert_int_equal(weft_kv_client_scan(c->client, node_peer(c, node),
	                                     start, strlen(start), count, NULL,
	                                     on_reply, &call),
	                 0);
	status = call_wait(&call);
	if (status == 0) {
		size_t len = evbuffer_get_length(call.data);
		const uint8_t *p = evbuffer_pullup(call.data, -1);
		int n =
		    weft_kv_scan_parse(p, len, on_entry, out, &next, &next_len);

		assert_int_equal(n, out->n);
		assert_true(next_len < sizeof(out->next));
		if (next != NULL)
			memcpy(out->next, next, next_len);
		/* Every truncation is caught before the first entry. */
		for (size_t cut = 0; cut < len; cut++)
			assert_int_equal(
			    weft_kv_scan_parse(p, cut, NULL, NULL, NULL, NULL),
			    WEFT_EINVAL);
	}
	call_fini(&call);
	return status;
}

static void
test_scan_returns_live_keys_in_order(void **state)
{
	static const char *const keys[] = {"user5", "user1", "user3", "user2",
	                                   "user4", "apple", "zebra"};
	struct cluster *c = cluster_start(all3);
	struct scanned sc;
	weft_kv_stats st;
	char from[32];

	(void)state;
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		assert_int_equal(put_str(c, i % NODES, keys[i], keys[i]), 0);
	assert_int_equal(del(c, 0, "user3"), 0);
	/* Every node holds every key: scan each one's replica. */
	for (size_t i = 0; i < NODES; i++) {
		assert_int_equal(scan(c, i, "user", 10, &sc), 0);
		assert_int_equal(sc.n, 5);
		assert_true(sc.ordered);
		assert_string_equal(sc.keys[0], "user1");
		assert_string_equal(sc.keys[2], "user4"); /* user3 is gone */
		assert_string_equal(sc.keys[4], "zebra");
		assert_int_equal(sc.value_len[0], 5);
		assert_string_equal(sc.next, "");
	}
	/* A count that stops early names where to go on; that key is the
	 * next scan's first. */
	assert_int_equal(scan(c, 1, "", 2, &sc), 0);
	assert_int_equal(sc.n, 2);
	assert_string_equal(sc.keys[0], "apple");
	assert_string_equal(sc.keys[1], "user1");
	assert_string_equal(sc.next, "user2");
	snprintf(from, sizeof(from), "%s", sc.next);
	assert_int_equal(scan(c, 1, from, 1, &sc), 0);
	assert_string_equal(sc.keys[0], "user2");
	/* Past the last key: nothing, and nothing after. */
	assert_int_equal(scan(c, 2, "zzz", 5, &sc), 0);
	assert_int_equal(sc.n, 0);
	assert_string_equal(sc.next, "");
	weft_kv_get_stats(c->kv[0], &st);
	assert_true(st.scans == 1);
	cluster_stop(c);
}

/* Entries stop before the answer outgrows WEFT_KV_SCAN_MAX_BYTES, but the
 * first always goes. */
static void
test_scan_stops_at_its_byte_limit(void **state)
{
	/* Every node acknowledges at once: the scans read n1, which applied
	 * every write, and the test does not wait for replicas that a loaded
	 * machine slows down. */
	static const uint32_t one[NODES] = {1, 1, 1};
	struct cluster *c = cluster_start(one);
	size_t len = 300 * 1024, huge = WEFT_KV_SCAN_MAX_BYTES + 1024;
	struct scanned sc;
	uint8_t *value = calloc(1, huge);
	char key[16];

	(void)state;
	assert_non_null(value);
	for (int i = 0; i < 4; i++) {
		snprintf(key, sizeof(key), "big%d", i);
		assert_int_equal(put(c, 0, key, value, len), 0);
	}
	assert_int_equal(put(c, 0, "huge", value, huge), 0);
	/* Three of 300 KiB fit in 1 MiB, the fourth would not. */
	assert_int_equal(scan(c, 0, "big", 10, &sc), 0);
	assert_int_equal(sc.n, 3);
	assert_int_equal(sc.value_len[2], len);
	assert_string_equal(sc.next, "big3");
	/* The first entry goes whatever its size. */
	assert_int_equal(scan(c, 0, "huge", 10, &sc), 0);
	assert_int_equal(sc.n, 1);
	assert_int_equal(sc.value_len[0], huge);
	free(value);
	cluster_stop(c);
}

/* A client's get that names a consistency it cannot (0, 4, a string, a
 * third field) is refused alone, and a client may not ask a member for
 * its replica's entry (kv_read is members only); gets go on. */
static void
test_bad_consistencies_and_client_reads_are_refused(void **state)
{
	struct cluster *c = cluster_start(NULL);
	/* ["k", 0]; ["k", 4]; ["k", "x"]; ["k", 1, 2] */
	static const uint8_t zero[] = {0x92, 0xc4, 0x01, 'k', 0x00};
	static const uint8_t four[] = {0x92, 0xc4, 0x01, 'k', 0x04};
	static const uint8_t text[] = {0x92, 0xc4, 0x01, 'k', 0xa1, 'x'};
	static const uint8_t three[] = {0x93, 0xc4, 0x01, 'k', 0x01, 0x02};
	static const uint8_t key[] = {0x91, 0xc4, 0x01, 'k'};
	const struct {
		uint32_t verb;
		const uint8_t *p;
		size_t n;
		int status;
	} bad[] = {{WEFT_KV_VERB_GET, zero, sizeof(zero), WEFT_EINVAL},
	           {WEFT_KV_VERB_GET, four, sizeof(four), WEFT_EINVAL},
	           {WEFT_KV_VERB_GET, text, sizeof(text), WEFT_EINVAL},
	           {WEFT_KV_VERB_GET, three, sizeof(three), WEFT_EINVAL},
	           {WEFT_KV_VERB_READ, key, sizeof(key), WEFT_EPERM}};
	weft_kv_stats st;
	struct call call;

	(void)state;
	assert_int_equal(put_str(c, 0, "k", "v"), 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		call_init(&call);
		assert_int_equal(weft_msvc_request(
		                     c->client, node_peer(c, 0), bad[i].verb,
		                     bad[i].p, bad[i].n, NULL, on_reply, &call),
		                 0);
		assert_int_equal(call_wait(&call), bad[i].status);
		call_fini(&call);
	}
	weft_kv_get_stats(c->kv[0], &st);
	assert_int_equal(st.reads_coordinated, 0);
	expect_kv_at(c, 0, "k", WEFT_KV_READ_ALL, "v");
	cluster_stop(c);
}

static void
test_bad_scans_are_refused(void **state)
{
	struct cluster *c = cluster_start(NULL);
	/* [start, 0]; [start, 1001]; [start] */
	static const uint8_t zero[] = {0x92, 0xc4, 0x01, 'a', 0x00};
	static const uint8_t many[] = {0x92, 0xc4, 0x01, 'a', 0xcd, 0x03, 0xe9};
	static const uint8_t short_[] = {0x91, 0xc4, 0x01, 'a'};
	const struct {
		const uint8_t *p;
		size_t n;
	} bad[] = {{zero, sizeof(zero)},
	           {many, sizeof(many)},
	           {short_, sizeof(short_)}};
	char start[WEFT_KV_MAX_KEY + 1];
	struct call call;

	(void)state;
	for (size_t i = 0; i < 3; i++) {
		call_init(&call);
		assert_int_equal(weft_msvc_request(c->client, node_peer(c, 0),
		                                   WEFT_KV_VERB_SCAN, bad[i].p,
		                                   bad[i].n, NULL, on_reply,
		                                   &call),
		                 0);
		assert_int_equal(call_wait(&call), WEFT_EINVAL);
		call_fini(&call);
	}
	memset(start, 'k', sizeof(start));
	assert_int_equal(weft_kv_client_scan(c->client, node_peer(c, 0), start,
	                                     sizeof(start), 1, NULL, on_reply,
	                                     NULL),
	                 WEFT_EINVAL);
	assert_int_equal(weft_kv_client_scan(c->client, node_peer(c, 0), "a", 1,
	                                     0, NULL, on_reply, NULL),
	                 WEFT_EINVAL);
	assert_int_equal(weft_kv_client_scan(c->client, node_peer(c, 0), "a", 1,
	                                     WEFT_KV_MAX_SCAN + 1, NULL,
	                                     on_reply, NULL),
	                 WEFT_EINVAL);
	cluster_stop(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_put_is_readable_on_every_node_after_the_ack),
	    cmocka_unit_test(
	        test_a_value_larger_than_a_frame_is_stored_everywhere),
	    cmocka_unit_test(test_unknown_key_is_not_found),
	    cmocka_unit_test(test_delete_removes_the_key_everywhere),
	    cmocka_unit_test(test_write_quorum_with_a_node_stopped),
	    cmocka_unit_test(test_impossible_quorum_fails_at_once),
	    cmocka_unit_test(test_reads_do_not_wait_for_a_pending_write),
	    cmocka_unit_test(test_a_replica_error_fails_the_write),
	    cmocka_unit_test(test_concurrent_writers_converge),
	    cmocka_unit_test(test_a_failed_write_is_never_visible),
	    cmocka_unit_test(test_one_mebibyte_value),
	    cmocka_unit_test(test_a_coordinator_an_hour_ahead_writes_in_order),
	    cmocka_unit_test(test_a_coordinator_an_hour_behind_writes_in_order),
	    cmocka_unit_test(
	        test_a_stalled_replica_fails_an_all_quorum_write_until_healed),
	    cmocka_unit_test(
	        test_acknowledged_writes_survive_dropped_connections),
	    cmocka_unit_test(test_writers_converge_with_connections_reordered),
	    cmocka_unit_test(test_malformed_requests_are_refused),
	    cmocka_unit_test(test_clients_cannot_write_replicas),
	    cmocka_unit_test(test_replicas_refuse_versions_far_ahead),
	    cmocka_unit_test(test_a_write_that_lost_is_not_acknowledged),
	    cmocka_unit_test(
	        test_quorum_and_all_reads_return_the_newest_version),
	    cmocka_unit_test(test_an_all_read_sees_a_newer_delete),
	    cmocka_unit_test(test_a_replica_down_fails_an_all_read_not_one),
	    cmocka_unit_test(test_a_member_removed_mid_read_ends_it_once),
	    cmocka_unit_test(test_a_member_without_reads_is_left_out),
	    cmocka_unit_test(
	        test_lying_read_answers_fail_the_replica_not_the_node),
	    cmocka_unit_test(
	        test_the_default_read_consistency_reads_every_replica),
	    cmocka_unit_test(test_read_consistency_config_is_validated),
	    cmocka_unit_test(test_scan_returns_live_keys_in_order),
	    cmocka_unit_test(test_scan_stops_at_its_byte_limit),
	    cmocka_unit_test(test_bad_scans_are_refused),
	    cmocka_unit_test(
	        test_bad_consistencies_and_client_reads_are_refused),
	};

	/* The raw peer's writes may meet a closed connection. */
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
