/* SPDX-License-Identifier: MIT */
/*
 * Tests of the thread-per-peer baseline (bench/baseline): requests among
 * baseline nodes and with weft's messaging service, each answered exactly
 * once; errors for unknown verbs and unreachable peers; weft's service as
 * a client of a baseline node over mutual TLS (the client's reader and
 * writer threads share one OpenSSL session), and a client whose
 * certificate names someone else refused; the baseline's key-value
 * service with weft's key-value client.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <weft/kv.h>
#include <weft/loop.h>
#include <weft/messaging.h>
#include <weft/tls.h>

#include "baseline.h"
#include "support/certs.h"
#include "support/echo_verb.h"

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
	ts.tv_sec += 25; /* generous: sanitizers on a loaded machine */
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
	assert_int_equal(weft_msvc_register(svc, VERB_ECHO, "echo",
	                                    weft_test_on_echo, NULL,
	                                    WEFT_MSVC_CLIENTS),
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

/* ---- A weft client over TLS ---------------------------------------------- */

#define TLS_CALLS 300

/* A request's payload: small, one TLS record and a bit, several records
 * (still the small class), and above weft's large_message (64 KiB: the
 * client's large connection, a second client connection). */
static size_t
payload_len(uint32_t index)
{
	static const size_t lens[4] = {4, 20000, 60000, 100000};

	return lens[index % 4];
}

static void
fill_payload(uint32_t index, uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)(index * 31 + i * 7);
}

static void
tls_reply(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	call *c = arg;
	bool right = status != 0 || len == payload_len(c->index);
	const uint8_t *p = data;

	(void)svc;
	for (size_t i = 0; right && status == 0 && i < len; i++)
		right = p[i] == (uint8_t)(c->index * 31 + i * 7);
	count(c->t, c->index, status, right);
}

/* A TLS client: weft's service, not a member, presenting cert_id's
 * certificate from dir. */
typedef struct tls_client {
	weft_loop_group *group;
	weft_tls_ctx *ctx;
	weft_msvc *svc;
} tls_client;

static void
tls_client_start(tls_client *c, weft_msvc_config *cfg, const char *dir,
                 const char *cert_id, uint16_t port)
{
	char cert[256], key[256], ca[256];
	weft_msvc_tls_config tc = {.mode = WEFT_MSVC_TLS_ALL};
	weft_tls_opts to = {0};
	weft_msvc_opts mo = {0};

	snprintf(cert, sizeof(cert), "%s/%s.crt", dir, cert_id);
	snprintf(key, sizeof(key), "%s/%s.key", dir, cert_id);
	snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
	tc.cert_file = to.cert_file = cert;
	tc.key_file = to.key_file = key;
	tc.ca_file = to.ca_file = ca;
	assert_int_equal(weft_msvc_config_set_tls(cfg, &tc), 0);
	assert_int_equal(weft_tls_ctx_new(&to, &c->ctx), 0);
	mo.tls = c->ctx;
	assert_int_equal(weft_loop_group_new(1, &c->group), 0);
	assert_int_equal(weft_msvc_new(c->group, cfg, "c0", &mo, &c->svc), 0);
	assert_int_equal(weft_msvc_start(c->svc), 0);
	weft_msvc_set_peer_addr(c->svc, "n0", "127.0.0.1", port);
}

static void
tls_client_free(tls_client *c)
{
	weft_msvc_stop(c->svc, 1000);
	weft_loop_group_shutdown(c->group, 1000);
	weft_msvc_free(c->svc);
	weft_loop_group_free(c->group);
	weft_tls_ctx_unref(c->ctx);
}

/* start_tls_server starts baseline node n0 with n0's certificate. */
static wbase_node *
start_tls_server(weft_msvc_config *cfg, const char *dir)
{
	char cert[256], key[256], ca[256];
	wbase_node *base;

	snprintf(cert, sizeof(cert), "%s/n0.crt", dir);
	snprintf(key, sizeof(key), "%s/n0.key", dir);
	snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
	assert_int_equal(wbase_node_new(cfg, "n0", &base), 0);
	assert_int_equal(wbase_register(base, VERB_ECHO, echo, NULL), 0);
	assert_int_equal(wbase_node_set_tls(base, cert, key, ca), 0);
	assert_int_equal(wbase_node_start(base), 0);
	return base;
}

/* A weft client keeps TLS_CALLS requests in flight at once against a
 * baseline TLS server, most of them larger than a TLS record (16 KiB) and
 * some on the client's large connection: the server's reader and writer
 * share each connection's session; every request is answered exactly
 * once, with its own payload. */
static void
test_weft_client_over_tls(void **state)
{
	char dir[] = "/tmp/wbase-tls-XXXXXX";
	weft_msvc_config *cfg = make_config(1);
	static call calls[TLS_CALLS];
	static uint8_t buf[100000];
	weft_msvc_peer *peer;
	wbase_node *base;
	wbase_stats st;
	tls_client c;
	tally t;

	(void)state;
	if (!weft_test_gen_certs(dir, "n0 c0")) {
		weft_msvc_config_free(cfg);
		skip();
	}
	tally_init(&t);
	/* Handshakes under a sanitizer on a busy machine can take seconds;
	 * this test is about answers, not timeouts. */
	weft_msvc_config_limits(cfg)->connect_timeout_ms = 15000;
	weft_msvc_config_limits(cfg)->request_timeout_ms = 20000;
	base = start_tls_server(cfg, dir);
	tls_client_start(&c, cfg, dir, "c0", wbase_node_port(base));
	peer = weft_msvc_peer_find(c.svc, "n0");
	for (uint32_t i = 0; i < TLS_CALLS; i++) {
		calls[i] = (call){&t, i};
		fill_payload(i, buf, payload_len(i));
		assert_int_equal(weft_msvc_request(c.svc, peer, VERB_ECHO, buf,
		                                   payload_len(i), NULL,
		                                   tls_reply, &calls[i]),
		                 0);
	}
	assert_true(tally_wait(&t, TLS_CALLS));
	assert_int_equal(t.ok, TLS_CALLS);
	assert_int_equal(t.wrong, 0);
	for (int i = 0; i < TLS_CALLS; i++)
		assert_int_equal(t.seen[i], 1);
	wbase_node_get_stats(base, &st);
	assert_int_equal(st.handled, TLS_CALLS);
	assert_int_equal(st.refused, 0);
	assert_int_equal(st.bad_input, 0);
	tls_client_free(&c);
	wbase_node_free(base);
	weft_msvc_config_free(cfg);
	weft_test_remove_dir(dir);
}

/* A client that claims id c0 but presents c1's certificate (which the
 * cluster's CA signed) is refused at the handshake; its request fails. */
static void
test_tls_client_with_wrong_certificate_is_refused(void **state)
{
	char dir[] = "/tmp/wbase-tls-XXXXXX";
	weft_msvc_config *cfg = make_config(1);
	static call calls[1];
	weft_msvc_peer *peer;
	wbase_node *base;
	wbase_stats st;
	tls_client c;
	tally t;

	(void)state;
	if (!weft_test_gen_certs(dir, "n0 c1")) {
		weft_msvc_config_free(cfg);
		skip();
	}
	tally_init(&t);
	weft_msvc_config_limits(cfg)->request_timeout_ms = 1000;
	base = start_tls_server(cfg, dir);
	tls_client_start(&c, cfg, dir, "c1", wbase_node_port(base));
	peer = weft_msvc_peer_find(c.svc, "n0");
	calls[0] = (call){&t, 0};
	assert_int_equal(weft_msvc_request(c.svc, peer, VERB_ECHO, "x", 1, NULL,
	                                   tls_reply, &calls[0]),
	                 0);
	assert_true(tally_wait(&t, 1));
	assert_int_equal(t.failed, 1);
	assert_int_equal(t.seen[0], 1);
	wbase_node_get_stats(base, &st);
	assert_true(st.refused >= 1);
	assert_int_equal(st.handled, 0);
	tls_client_free(&c);
	wbase_node_free(base);
	weft_msvc_config_free(cfg);
	weft_test_remove_dir(dir);
}

/* ---- The key-value service --------------------------------------------- */

/* One call at a time: its status and a copy of its answer. */
typedef struct sync_call {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int status;
	char data[64];
	size_t len;
} sync_call;

static void
sync_reset(sync_call *c)
{
	pthread_mutex_lock(&c->lock);
	c->done = false;
	c->len = 0;
	pthread_mutex_unlock(&c->lock);
}

static void
sync_done(sync_call *c, int status, const void *data, size_t len)
{
	pthread_mutex_lock(&c->lock);
	c->status = status;
	c->len = len < sizeof(c->data) ? len : sizeof(c->data);
	if (status == 0 && c->len > 0)
		memcpy(c->data, data, c->len);
	c->done = true;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static void
sync_msvc(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	(void)svc;
	sync_done(arg, status, data, len);
}

static void
sync_base(wbase_node *n, int status, const void *data, size_t len, void *arg)
{
	(void)n;
	sync_done(arg, status, data, len);
}

/* sync_wait waits for the answer; returns its status. */
static int
sync_wait(sync_call *c)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += 20;
	pthread_mutex_lock(&c->lock);
	while (!c->done && pthread_cond_timedwait(&c->cond, &c->lock, &ts) == 0)
		;
	assert_true(c->done);
	pthread_mutex_unlock(&c->lock);
	return c->status;
}

/* Three baseline members with the key-value service and a weft client. */
typedef struct kv_rig {
	weft_msvc_config *cfg;
	wbase_node *nodes[3];
	wbase_kv *kvs[3];
	weft_loop_group *group;
	weft_msvc *svc;
	weft_msvc_peer *peers[3];
	sync_call call;
} kv_rig;

static void
kv_rig_start(kv_rig *r)
{
	char id[16];

	memset(r, 0, sizeof(*r));
	pthread_mutex_init(&r->call.lock, NULL);
	pthread_cond_init(&r->call.cond, NULL);
	r->cfg = make_config(3);
	for (int i = 0; i < 3; i++) {
		snprintf(id, sizeof(id), "n%d", i);
		assert_int_equal(wbase_node_new(r->cfg, id, &r->nodes[i]), 0);
		assert_int_equal(wbase_kv_new(r->nodes[i], NULL, &r->kvs[i]),
		                 0);
		assert_int_equal(wbase_node_start(r->nodes[i]), 0);
	}
	assert_int_equal(weft_loop_group_new(1, &r->group), 0);
	assert_int_equal(weft_msvc_new(r->group, r->cfg, "c0", NULL, &r->svc),
	                 0);
	assert_int_equal(weft_msvc_start(r->svc), 0);
	for (int i = 0; i < 3; i++) {
		snprintf(id, sizeof(id), "n%d", i);
		for (int k = 0; k < 3; k++)
			wbase_set_peer_addr(r->nodes[k], id, "127.0.0.1",
			                    wbase_node_port(r->nodes[i]));
		weft_msvc_set_peer_addr(r->svc, id, "127.0.0.1",
		                        wbase_node_port(r->nodes[i]));
		r->peers[i] = weft_msvc_peer_find(r->svc, id);
	}
}

static void
kv_rig_stop(kv_rig *r)
{
	weft_msvc_stop(r->svc, 1000);
	weft_loop_group_shutdown(r->group, 1000);
	weft_msvc_free(r->svc);
	weft_loop_group_free(r->group);
	for (int i = 0; i < 3; i++)
		wbase_node_stop(r->nodes[i]);
	for (int i = 0; i < 3; i++) {
		wbase_kv_free(r->kvs[i]);
		wbase_node_free(r->nodes[i]);
	}
	weft_msvc_config_free(r->cfg);
	pthread_mutex_destroy(&r->call.lock);
	pthread_cond_destroy(&r->call.cond);
}

static int
kv_put(kv_rig *r, int node, const char *key, const char *value)
{
	sync_reset(&r->call);
	assert_int_equal(weft_kv_client_put(r->svc, r->peers[node], key,
	                                    strlen(key), value, strlen(value),
	                                    NULL, sync_msvc, &r->call),
	                 0);
	return sync_wait(&r->call);
}

/* kv_get gets key from node; on success the value is in r->call. */
static int
kv_get(kv_rig *r, int node, const char *key)
{
	sync_reset(&r->call);
	assert_int_equal(weft_kv_client_get(r->svc, r->peers[node], key,
	                                    strlen(key), NULL, sync_msvc,
	                                    &r->call),
	                 0);
	return sync_wait(&r->call);
}

static bool
has_value(const kv_rig *r, const char *value)
{
	return r->call.len == strlen(value) &&
	       memcmp(r->call.data, value, r->call.len) == 0;
}

/* raw sends verb with payload p (n bytes) to node; returns the status. */
static int
raw(kv_rig *r, int node, uint32_t verb, const void *p, size_t n)
{
	sync_reset(&r->call);
	assert_int_equal(weft_msvc_request(r->svc, r->peers[node], verb, p, n,
	                                   NULL, sync_msvc, &r->call),
	                 0);
	return sync_wait(&r->call);
}

/* get_eventually polls node until it has key's value (replication runs
 * on after the quorum's answer). */
static bool
get_eventually(kv_rig *r, int node, const char *key, const char *value)
{
	uint64_t deadline = weft_now_ns() + 10000000000ull;
	struct timespec ts = {0, 1000000};

	while (weft_now_ns() < deadline) {
		if (kv_get(r, node, key) == 0 && has_value(r, value))
			return true;
		nanosleep(&ts, NULL);
	}
	return false;
}

/* Puts and gets on different members from weft's key-value client: each
 * member reads the writes it acknowledged, the others catch up, deletes
 * hide keys, and missing keys are not found. */
static void
test_kv_puts_and_gets(void **state)
{
	char key[16], value[32];
	wbase_kv_stats st;
	kv_rig r;

	(void)state;
	kv_rig_start(&r);
	for (int i = 0; i < 30; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		snprintf(value, sizeof(value), "value %d", i);
		assert_int_equal(kv_put(&r, i % 3, key, value), 0);
		assert_int_equal(kv_get(&r, i % 3, key), 0);
		assert_true(has_value(&r, value));
	}
	/* An overwrite on another member wins: its version is later. */
	assert_int_equal(kv_put(&r, 2, "k0", "newer"), 0);
	for (int n = 0; n < 3; n++) {
		assert_true(get_eventually(&r, n, "k0", "newer"));
		assert_true(get_eventually(&r, n, "k29", "value 29"));
	}
	assert_int_equal(kv_get(&r, 1, "nope"), WEFT_ENOTFOUND);
	sync_reset(&r.call);
	assert_int_equal(weft_kv_client_delete(r.svc, r.peers[1], "k1", 2, NULL,
	                                       sync_msvc, &r.call),
	                 0);
	assert_int_equal(sync_wait(&r.call), 0);
	assert_int_equal(kv_get(&r, 1, "k1"), WEFT_ENOTFOUND);
	wbase_kv_get_stats(r.kvs[0], &st);
	assert_int_equal(st.puts, 10);
	assert_int_equal(st.quorum_failures, 0);
	assert_int_equal(st.bad_requests, 0);
	kv_rig_stop(&r);
}

/* replicate sends a replicate request from member n0 to n1; returns the
 * status of its answer (an error answer reads as WEFT_EREMOTE). */
static int
replicate(kv_rig *r, const void *p, size_t n)
{
	sync_reset(&r->call);
	assert_int_equal(wbase_request(r->nodes[0], 1, WEFT_KV_VERB_REPLICATE,
	                               p, n, 0, sync_base, &r->call),
	                 0);
	return sync_wait(&r->call);
}

/* kv_get_at gets key from node at consistency cl. */
static int
kv_get_at(kv_rig *r, int node, const char *key, weft_kv_consistency cl)
{
	sync_reset(&r->call);
	assert_int_equal(weft_kv_client_get_at(r->svc, r->peers[node], key,
	                                       strlen(key), cl, NULL, sync_msvc,
	                                       &r->call),
	                 0);
	return sync_wait(&r->call);
}

/*
 * The baseline reads at quorum and all as weft's service does: n1 alone
 * holds a newer version (replicated to it by n0 and to nobody else); a
 * read at one through n2 answers n2's, at all the newest, and counts the
 * disagreement. With n1 stopped, a read at all fails and one at quorum
 * does not.
 */
static void
test_kv_reads_at_all_return_the_newest(void **state)
{
	/* [1 (put), "k", "new", ts, "n0"]: ts far above any clock here. */
	static const uint8_t newer[] = {
	    0x95, 0x01, 0xc4, 0x01, 'k',  0xc4, 0x03, 'n',  'e',  'w', 0xcf,
	    0x7f, 0xff, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xa2, 'n', '0'};
	wbase_kv_stats st;
	kv_rig r;

	(void)state;
	kv_rig_start(&r);
	assert_int_equal(kv_put(&r, 0, "k", "old"), 0);
	for (int n = 0; n < 3; n++)
		assert_true(get_eventually(&r, n, "k", "old"));
	assert_int_equal(replicate(&r, newer, sizeof(newer)), 0);
	assert_int_equal(kv_get_at(&r, 2, "k", WEFT_KV_READ_ONE), 0);
	assert_true(has_value(&r, "old"));
	assert_int_equal(kv_get_at(&r, 2, "k", WEFT_KV_READ_ALL), 0);
	assert_true(has_value(&r, "new"));
	assert_int_equal(kv_get_at(&r, 2, "absent", WEFT_KV_READ_ALL),
	                 WEFT_ENOTFOUND);
	wbase_kv_get_stats(r.kvs[2], &st);
	assert_int_equal(st.reads_coordinated, 2);
	assert_int_equal(st.read_disagreements, 1);
	wbase_node_stop(r.nodes[1]);
	assert_int_not_equal(kv_get_at(&r, 2, "k", WEFT_KV_READ_ALL), 0);
	assert_int_equal(kv_get_at(&r, 2, "k", WEFT_KV_READ_QUORUM), 0);
	wbase_kv_get_stats(r.kvs[2], &st);
	assert_int_equal(st.read_failures, 1);
	kv_rig_stop(&r);
}

/* Bad payloads get INVALID answers, and the members keep serving. */
static void
test_kv_bad_payloads_fail(void **state)
{
	static uint8_t long_key[8 + WEFT_KV_MAX_KEY + 1];
	/* An array claiming 4 billion elements; a map; a key of type str;
	 * a put without its value; trailing bytes. */
	static const uint8_t huge[] = {0xdd, 0xff, 0xff, 0xff, 0xff, 0xc4};
	static const uint8_t map[] = {0x81, 0xc4, 0x01, 'k', 0x01};
	static const uint8_t str_key[] = {0x91, 0xa1, 'k'};
	static const uint8_t no_value[] = {0x91, 0xc4, 0x01, 'k'};
	static const uint8_t trailing[] = {0x91, 0xc4, 0x01, 'k', 0x00};
	/* Two replicate writes, back to back. */
	uint8_t batch[2 * 32], *p = batch;
	size_t half;
	uint64_t ts = (weft_wall_ms() + 1000) << 16;
	wbase_kv_stats st;
	kv_rig r;

	(void)state;
	kv_rig_start(&r);
	assert_int_equal(raw(&r, 0, WEFT_KV_VERB_GET, "\xff", 1), WEFT_EINVAL);
	assert_int_equal(raw(&r, 0, WEFT_KV_VERB_GET, huge, sizeof(huge)),
	                 WEFT_EINVAL);
	assert_int_equal(raw(&r, 1, WEFT_KV_VERB_GET, map, sizeof(map)),
	                 WEFT_EINVAL);
	assert_int_equal(raw(&r, 1, WEFT_KV_VERB_GET, str_key, sizeof(str_key)),
	                 WEFT_EINVAL);
	assert_int_equal(
	    raw(&r, 2, WEFT_KV_VERB_PUT, no_value, sizeof(no_value)),
	    WEFT_EINVAL);
	assert_int_equal(
	    raw(&r, 2, WEFT_KV_VERB_DELETE, trailing, sizeof(trailing)),
	    WEFT_EINVAL);
	assert_int_equal(raw(&r, 2, WEFT_KV_VERB_DELETE, "", 0), WEFT_EINVAL);
	long_key[0] = 0x91;
	long_key[1] = 0xc5; /* bin 16 */
	long_key[2] = (WEFT_KV_MAX_KEY + 1) >> 8;
	long_key[3] = (WEFT_KV_MAX_KEY + 1) & 0xff;
	assert_int_equal(
	    raw(&r, 0, WEFT_KV_VERB_GET, long_key, 4 + WEFT_KV_MAX_KEY + 1),
	    WEFT_EINVAL);
	/* Clients may not replicate. */
	assert_int_equal(
	    raw(&r, 0, WEFT_KV_VERB_REPLICATE, str_key, sizeof(str_key)),
	    WEFT_EINVAL);
	for (int i = 0; i < 2; i++) {
		*p++ = 0x95;
		*p++ = 0x01;
		*p++ = 0xc4;
		*p++ = 0x02;
		*p++ = 'b';
		*p++ = (uint8_t)('1' + i);
		*p++ = 0xc4;
		*p++ = 0x01;
		*p++ = (uint8_t)('x' + i);
		*p++ = 0xcf;
		for (int b = 7; b >= 0; b--)
			*p++ = (uint8_t)(ts >> (8 * b));
		*p++ = 0xa2;
		*p++ = 'n';
		*p++ = '0';
	}
	half = (size_t)(p - batch) / 2;
	/* One write, from member n0: applied. */
	assert_int_equal(replicate(&r, batch, half), 0);
	assert_int_equal(kv_get(&r, 1, "b1"), 0);
	assert_true(has_value(&r, "x"));
	/* Two writes back to back, and one cut short: errors, nothing
	 * applied. */
	batch[4] = 'c';
	assert_int_not_equal(replicate(&r, batch, 2 * half), 0);
	assert_int_not_equal(replicate(&r, batch + half, half - 1), 0);
	assert_int_equal(kv_get(&r, 1, "c1"), WEFT_ENOTFOUND);
	assert_int_equal(kv_get(&r, 1, "b2"), WEFT_ENOTFOUND);
	/* Still serving. */
	assert_int_equal(kv_put(&r, 0, "after", "ok"), 0);
	assert_int_equal(kv_get(&r, 0, "after"), 0);
	wbase_kv_get_stats(r.kvs[1], &st);
	assert_true(st.replicas_applied >= 1);
	wbase_kv_get_stats(r.kvs[0], &st);
	assert_int_equal(st.bad_requests, 4);
	kv_rig_stop(&r);
}

/* Collects a scan's keys, "k1,k2,...". */
static void
join_key(const void *key, size_t key_len, const void *value, size_t value_len,
         void *arg)
{
	char *out = arg;

	(void)value;
	(void)value_len;
	snprintf(out + strlen(out), 256 - strlen(out), "%s%.*s",
	         out[0] ? "," : "", (int)key_len, (const char *)key);
}

/* kv_scan scans through node; the keys go to keys, the resume key to
 * next ("" at the end). */
static int
kv_scan(kv_rig *r, int node, const char *start, uint32_t count, char *keys,
        char *next)
{
	const void *resume;
	size_t resume_len;
	int status;

	sync_reset(&r->call);
	keys[0] = next[0] = '\0';
	assert_int_equal(weft_kv_client_scan(r->svc, r->peers[node], start,
	                                     strlen(start), count, NULL,
	                                     sync_msvc, &r->call),
	                 0);
	if ((status = sync_wait(&r->call)) != 0)
		return status;
	assert_true(weft_kv_scan_parse(r->call.data, r->call.len, join_key,
	                               keys, &resume, &resume_len) >= 0);
	snprintf(next, 64, "%.*s", (int)resume_len,
	         resume ? (const char *)resume : "");
	return 0;
}

/* The baseline's scan answers as weft's does: live keys in order from
 * the start, the key to go on from, malformed requests refused. */
static void
test_kv_scans(void **state)
{
	static const char *const keys[] = {"b", "a", "d", "c", "e"};
	/* [start, 0] and [start] */
	static const uint8_t zero[] = {0x92, 0xc4, 0x01, 'a', 0x00};
	static const uint8_t one[] = {0x91, 0xc4, 0x01, 'a'};
	char got[256], next[64];
	wbase_kv_stats st;
	kv_rig r;

	(void)state;
	kv_rig_start(&r);
	for (int i = 0; i < 5; i++)
		assert_int_equal(kv_put(&r, 0, keys[i], keys[i]), 0);
	sync_reset(&r.call);
	assert_int_equal(weft_kv_client_delete(r.svc, r.peers[0], "c", 1, NULL,
	                                       sync_msvc, &r.call),
	                 0);
	assert_int_equal(sync_wait(&r.call), 0);
	assert_int_equal(kv_scan(&r, 0, "", 10, got, next), 0);
	assert_string_equal(got, "a,b,d,e");
	assert_string_equal(next, "");
	assert_int_equal(kv_scan(&r, 0, "b", 2, got, next), 0);
	assert_string_equal(got, "b,d");
	assert_string_equal(next, "e");
	assert_int_equal(raw(&r, 0, WEFT_KV_VERB_SCAN, zero, sizeof(zero)),
	                 WEFT_EINVAL);
	assert_int_equal(raw(&r, 0, WEFT_KV_VERB_SCAN, one, sizeof(one)),
	                 WEFT_EINVAL);
	wbase_kv_get_stats(r.kvs[0], &st);
	assert_true(st.scans == 2 && st.bad_requests == 2);
	kv_rig_stop(&r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_requests_among_baseline_nodes),
	    cmocka_unit_test(test_unknown_verb_and_dead_peer_fail),
	    cmocka_unit_test(test_baseline_and_weft_interoperate),
	    cmocka_unit_test(test_weft_client_over_tls),
	    cmocka_unit_test(test_tls_client_with_wrong_certificate_is_refused),
	    cmocka_unit_test(test_kv_puts_and_gets),
	    cmocka_unit_test(test_kv_bad_payloads_fail),
	    cmocka_unit_test(test_kv_scans),
	    cmocka_unit_test(test_kv_reads_at_all_return_the_newest),
	};

	/* The baseline writes with blocking send and SSL_write, as
	 * thread-per-peer programs do: weft-bench ignores SIGPIPE in its main,
	 * and so does this test, which runs it in-process. */
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
