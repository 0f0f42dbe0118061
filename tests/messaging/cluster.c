/* SPDX-License-Identifier: MIT */
/* cluster.c: see cluster.h. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "cluster.h"
#include "support/echo_verb.h"

weft_loop *test_loop;

static void
noop_task(weft_loop *loop, int status, void *arg)
{
	(void)loop;
	(void)status;
	(void)arg;
}

int
test_setup(void **state)
{
	(void)state;
	/* The library leaves SIGPIPE alone; the raw peers' TLS writes
	 * (SSL_write over a socket) cannot say MSG_NOSIGNAL. */
	signal(SIGPIPE, SIG_IGN);
	return weft_loop_new(&test_loop);
}

int
test_teardown(void **state)
{
	(void)state;
	weft_loop_free(test_loop);
	test_loop = NULL;
	return 0;
}

void
test_poke(void)
{
	if (test_loop != NULL)
		weft_loop_post(test_loop, noop_task, NULL);
}

static void
on_recheck(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	(void)arg;
}

bool
test_wait(bool (*done)(void *arg), void *arg, uint64_t timeout_ms)
{
	struct timeval tv = {0, 2000};
	struct event *ev;
	int rv;

	/* Conditions on counters nobody pokes for: look every 2 ms. */
	ev = event_new(weft_loop_base(test_loop), -1, EV_PERSIST, on_recheck,
	               NULL);
	if (ev != NULL)
		event_add(ev, &tv);
	rv = weft_loop_run_until(test_loop, done, arg, timeout_ms);
	if (ev != NULL)
		event_free(ev);
	return rv == 0;
}

void
tally_cb(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	struct tally *t = arg;

	(void)svc;
	(void)data;
	(void)len;
	if (status == 0)
		atomic_fetch_add(&t->ok, 1);
	else if (-status < 32)
		atomic_fetch_add(&t->status_counts[-status], 1);
	atomic_fetch_add(&t->done, 1);
	test_poke();
}

bool
tally_complete(void *arg)
{
	struct tally *t = arg;

	return atomic_load(&t->done) >= t->want;
}

static struct cluster *the_cluster;

static int
node_index(weft_msvc *svc)
{
	const char *id = weft_msvc_node_id(svc);

	return id[1] - '1';
}

static void
on_sink(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	struct cluster *cl = arg;
	int i = node_index(svc);
	uint64_t seq = 0;

	if (weft_msvc_msg_len(msg) >= sizeof(seq)) {
		memcpy(&seq, weft_msvc_msg_data(msg), sizeof(seq));
		if (seq != cl->sink_next[i])
			atomic_fetch_add(&cl->sink_disorder[i], 1);
		cl->sink_next[i] = seq + 1;
	}
	atomic_fetch_add(&cl->sink_count[i], 1);
	test_poke();
}

static void
on_hold(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	struct cluster *cl = arg;
	int k = atomic_fetch_add(&cl->held_count, 1);

	(void)svc;
	if (k < 64)
		atomic_store(&cl->held[k], weft_msvc_msg_detach(msg));
	else
		weft_msvc_respond_error(msg, WEFT_EOVERLOAD, "too many held");
	test_poke();
}

static bool
released(void *arg)
{
	struct cluster *cl = arg;

	return atomic_load(&cl->slow_release);
}

/* Registered after the cancel came: runs within the registration. */
static void
on_late_cancel(void *arg)
{
	struct cluster *cl = arg;

	atomic_fetch_add(&cl->cancel_notified_late, 1);
}

/* The hold-notify verb's callback: answers its message from inside. */
static void
on_held_cancel(void *arg)
{
	weft_msvc_msg *msg = arg;
	struct cluster *cl = the_cluster;

	atomic_fetch_add(&cl->cancel_notified, 1);
	weft_msvc_respond(msg, "", 0);
	test_poke();
}

static void
on_slow_cancel(void *arg)
{
	struct cluster *cl = arg;

	atomic_store(&cl->slow_notify_started, 1);
	test_poke();
	nanosleep(&(struct timespec){0, 100 * 1000000L}, NULL);
	atomic_store(&cl->slow_notify_done, 1);
}

static void
on_hold_slow_notify(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	struct cluster *cl = arg;
	int k = atomic_fetch_add(&cl->held_count, 1);
	weft_msvc_msg *held;

	(void)svc;
	if (k >= 64 || (held = weft_msvc_msg_detach(msg)) == NULL ||
	    weft_msvc_msg_on_cancel(held, on_slow_cancel, cl) != 0)
		abort();
	atomic_store(&cl->held[k], held);
	test_poke();
}

static void
on_hold_notify(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	struct cluster *cl = arg;
	weft_msvc_msg *held = weft_msvc_msg_detach(msg);

	(void)svc;
	if (held == NULL ||
	    weft_msvc_msg_on_cancel(held, on_held_cancel, held) != 0)
		abort();
	atomic_fetch_add(&cl->notify_held, 1);
	test_poke();
}

static void
on_slow(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	struct cluster *cl = arg;
	weft_loop *loop;

	(void)svc;
	atomic_fetch_add(&cl->slow_running, 1);
	test_poke();
	/* A blocking handler: wait (on a private loop) until released, or
	 * until its requester cancels it. */
	if (weft_loop_new(&loop) == 0) {
		while (!released(cl) && !weft_msvc_msg_is_cancelled(msg))
			weft_loop_run_until(loop, released, cl, 5);
		weft_loop_free(loop);
	}
	if (weft_msvc_msg_is_cancelled(msg)) {
		atomic_fetch_add(&cl->slow_cancelled, 1);
		weft_msvc_msg_on_cancel(msg, on_late_cancel, cl);
		test_poke();
	}
	if (weft_msvc_msg_is_request(msg))
		weft_msvc_respond(msg, "slow", 4);
}

static void
on_peer_event(weft_msvc *svc, weft_msvc_peer *peer, bool up, void *arg)
{
	struct cluster *cl = arg;

	(void)svc;
	(void)peer;
	atomic_fetch_add(up ? &cl->ups : &cl->downs, 1);
	atomic_store(up ? &cl->last_up : &cl->last_down,
	             atomic_fetch_add(&cl->event_seq, 1) + 1);
	test_poke();
}

static void
on_member_event(weft_msvc *svc, weft_msvc_peer *peer, bool joined, void *arg)
{
	struct cluster *cl = arg;

	(void)svc;
	(void)peer;
	atomic_fetch_add(joined ? &cl->joins : &cl->leaves, 1);
	atomic_store(joined ? &cl->last_join : &cl->last_leave,
	             atomic_fetch_add(&cl->event_seq, 1) + 1);
	test_poke();
}

static void
on_peer_event_also(weft_msvc *svc, weft_msvc_peer *peer, bool up, void *arg)
{
	struct cluster *cl = arg;

	(void)svc;
	(void)peer;
	if (up)
		atomic_fetch_add(&cl->also_ups, 1);
}

static void
on_member_event_also(weft_msvc *svc, weft_msvc_peer *peer, bool joined,
                     void *arg)
{
	struct cluster *cl = arg;

	(void)svc;
	(void)peer;
	atomic_fetch_add(joined ? &cl->also_joins : &cl->also_leaves, 1);
}

void
cluster_fill(uint8_t *buf, size_t n, uint32_t seed)
{
	static const char *const words[16] = {
	    "key",   "value", "node", "replica",   "range",  "token",
	    "write", "read",  "42",   "1700000",   "status", "ok",
	    "user",  "{",     "}",    "\"field\":"};
	uint32_t x = seed * 2654435761u + 1;
	size_t i = 0, k;

	/* Words drawn at random: text a compressor shrinks, not to nothing. */
	while (i < n) {
		const char *w;

		x = x * 1103515245u + 12345u;
		w = words[(x >> 16) & 15];
		for (k = 0; w[k] != '\0' && i < n; k++)
			buf[i++] = (uint8_t)w[k];
		if (i < n)
			buf[i++] = (uint8_t)(' ' + ((x >> 8) & 1));
	}
}

/* The grow verb: answers a payload of the size its request names (4
 * bytes, big-endian), filled by cluster_fill with seed 0 and moved to
 * the response. */
static void
on_grow(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	const uint8_t *p = weft_msvc_msg_data(msg);
	struct evbuffer *b;
	struct evbuffer_iovec v;
	uint32_t n;

	(void)svc;
	(void)arg;
	if (weft_msvc_msg_len(msg) != 4 || (b = evbuffer_new()) == NULL) {
		weft_msvc_respond_error(msg, WEFT_EINVAL, "want a size");
		return;
	}
	n = (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
	    p[3];
	if (n > 0 && evbuffer_reserve_space(b, n, &v, 1) == 1) {
		cluster_fill(v.iov_base, n, 0);
		v.iov_len = n;
		evbuffer_commit_space(b, &v, 1);
	}
	weft_msvc_respond_buf(msg, b);
	evbuffer_free(b);
}

static void
on_relayed(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	weft_msvc_msg *held = arg;

	(void)svc;
	if (status == 0)
		weft_msvc_respond(held, data, len);
	else
		weft_msvc_respond_error(held, status, "relay failed");
}

/* The relay verb (cluster.h). */
static void
on_relay(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	struct cluster *cl = arg;
	const uint8_t *p = weft_msvc_msg_data(msg);
	size_t len = weft_msvc_msg_len(msg);
	int me = node_index(svc);
	weft_msvc_msg *held;

	atomic_store(&cl->relay_traced[me],
	             weft_msvc_msg_traceparent(msg, &cl->relay_tp[me]) == 0);
	atomic_fetch_add(&cl->relay_seen[me], 1);
	if (len == 0 || p[0] >= cl->n || p[0] == me) {
		weft_msvc_respond(msg, "done", 4);
		return;
	}
	if ((held = weft_msvc_msg_detach_reply(msg)) == NULL) {
		weft_msvc_respond_error(msg, WEFT_ENOMEM, "no memory");
		return;
	}
	if (weft_msvc_request(svc, cluster_peer(cl, me, p[0]), VERB_RELAY,
	                      p + 1, len - 1, NULL, on_relayed, held) != 0)
		weft_msvc_respond_error(held, WEFT_EREMOTE, "relay refused");
}

static int
register_verbs(struct cluster *cl, weft_msvc *svc)
{
	int rv = weft_msvc_on_peer_event(svc, on_peer_event, cl);

	rv |= weft_msvc_on_member_event(svc, on_member_event, cl);
	rv |= weft_msvc_on_peer_event(svc, on_peer_event_also, cl);
	rv |= weft_msvc_on_member_event(svc, on_member_event_also, cl);

	rv |= weft_msvc_register(svc, VERB_ECHO, "echo", weft_test_on_echo, cl,
	                         WEFT_MSVC_CLIENTS);
	rv |= weft_msvc_register(svc, VERB_SINK, "sink", on_sink, cl,
	                         WEFT_MSVC_CLIENTS);
	rv |= weft_msvc_register(svc, VERB_HOLD, "hold", on_hold, cl,
	                         WEFT_MSVC_CLIENTS);
	rv |= weft_msvc_register(svc, VERB_SLOW, "slow", on_slow, cl,
	                         WEFT_MSVC_BLOCKING | WEFT_MSVC_CLIENTS);
	rv |= weft_msvc_register(svc, VERB_ECHO_BLOCK, "echo_block",
	                         weft_test_on_echo, cl,
	                         WEFT_MSVC_BLOCKING | WEFT_MSVC_CLIENTS);
	rv |= weft_msvc_register(svc, VERB_MEMBERS, "members_echo",
	                         weft_test_on_echo, cl, 0);
	rv |= weft_msvc_register(svc, VERB_MEMBERS_BLOCK, "members_block",
	                         weft_test_on_echo, cl, WEFT_MSVC_BLOCKING);
	rv |= weft_msvc_register(svc, VERB_URGENT, "urgent", weft_test_on_echo,
	                         cl, WEFT_MSVC_URGENT_LANE | WEFT_MSVC_CLIENTS);
	rv |= weft_msvc_register(svc, VERB_HOLD_CAPPED, "hold_capped", on_hold,
	                         cl, WEFT_MSVC_CLIENTS);
	rv |= weft_msvc_verb_limit(svc, VERB_HOLD_CAPPED, CAPPED_MAX);
	rv |= weft_msvc_register(svc, VERB_SLOW_CAPPED, "slow_capped", on_slow,
	                         cl, WEFT_MSVC_BLOCKING | WEFT_MSVC_CLIENTS);
	rv |= weft_msvc_verb_limit(svc, VERB_SLOW_CAPPED, CAPPED_MAX);
	rv |= weft_msvc_register(svc, VERB_HOLD_NOTIFY, "hold_notify",
	                         on_hold_notify, cl, WEFT_MSVC_CLIENTS);
	rv |= weft_msvc_register(svc, VERB_HOLD_SLOW_NOTIFY, "hold_slow_notify",
	                         on_hold_slow_notify, cl, WEFT_MSVC_CLIENTS);
	rv |= weft_msvc_register(svc, VERB_GROW, "grow", on_grow, cl,
	                         WEFT_MSVC_CLIENTS);
	rv |= weft_msvc_register(svc, VERB_RELAY, "relay", on_relay, cl,
	                         WEFT_MSVC_CLIENTS);
	return rv;
}

static void
share_ports(struct cluster *cl)
{
	char id[16];
	int i, j;

	for (i = 0; i < cl->n; i++) {
		if (cl->svc[i] == NULL)
			continue;
		snprintf(id, sizeof(id), "n%d", i + 1);
		for (j = 0; j < cl->n; j++)
			if (cl->svc[j] != NULL && j != i)
				weft_msvc_set_peer_addr(
				    cl->svc[j], id, "127.0.0.1",
				    weft_msvc_port(cl->svc[i]));
	}
}

int
cluster_start_node(struct cluster *cl, int i)
{
	weft_msvc_opts o = {.tls = cl->tls[i],
	                    .clock_offset_ms = cl->clock_offset_ms[i],
	                    .trace_sample_rate = cl->trace_sample_rate,
	                    .stage_times = cl->stage_times};
	weft_msvc_limits limits;
	char id[16];
	int rv;

	snprintf(id, sizeof(id), "n%d", i + 1);
	if ((rv = weft_loop_group_new(cl->loops > 0 ? (size_t)cl->loops : 1,
	                              &cl->groups[i])) != 0)
		return rv;
	/* The service copies the config: each node may get a version and
	 * limits of its own. */
	limits = *weft_msvc_config_limits(cl->cfg);
	weft_msvc_config_limits(cl->cfg)->max_protocol_version =
	    cl->max_version[i];
	if (cl->tune_node != NULL)
		cl->tune_node(i, weft_msvc_config_limits(cl->cfg));
	rv = weft_msvc_new(cl->groups[i], cl->cfg, id, &o, &cl->svc[i]);
	*weft_msvc_config_limits(cl->cfg) = limits;
	if (rv != 0)
		return rv;
	if ((rv = register_verbs(cl, cl->svc[i])) != 0)
		return rv;
	if (cl->setup_node != NULL)
		cl->setup_node(i, cl->svc[i]);
	if ((rv = weft_msvc_start(cl->svc[i])) != 0)
		return rv;
	/* Restarted nodes keep their port when they can. */
	share_ports(cl);
	return 0;
}

int
cluster_start(struct cluster *cl, int n, void (*tune)(weft_msvc_limits *l))
{
	struct cluster_opts o = {.tune = tune};

	return cluster_start_with(cl, n, &o);
}

int
cluster_start_with(struct cluster *cl, int n, const struct cluster_opts *o)
{
	weft_msvc_tls_config tls = {
	    .mode = o->tls_mode,
	    .allow_plaintext_members = o->allow_plaintext_members,
	};
	char id[16];
	int i, rv;

	memset(cl, 0, sizeof(*cl));
	if (n < 1 || n > CLUSTER_MAX)
		return WEFT_EINVAL;
	the_cluster = cl;
	cl->n = n;
	cl->loops = o->loops;
	memcpy(cl->tls, o->tls, sizeof(cl->tls));
	memcpy(cl->clock_offset_ms, o->clock_offset_ms,
	       sizeof(cl->clock_offset_ms));
	memcpy(cl->max_version, o->max_version, sizeof(cl->max_version));
	cl->tune_node = o->tune_node;
	cl->trace_sample_rate = o->trace_sample_rate;
	cl->stage_times = o->stage_times;
	cl->setup_node = o->setup_node;
	if ((rv = weft_msvc_config_new("test", &cl->cfg)) != 0)
		return rv;
	for (i = 0; i < n; i++) {
		snprintf(id, sizeof(id), "n%d", i + 1);
		weft_msvc_config_add_node(cl->cfg, id, "127.0.0.1", 0);
	}
	weft_msvc_config_limits(cl->cfg)->worker_threads = 1;
	if (o->tune != NULL)
		o->tune(weft_msvc_config_limits(cl->cfg));
	if ((rv = weft_msvc_config_set_tls(cl->cfg, &tls)) != 0)
		return rv;
	for (i = 0; i < n; i++)
		if ((rv = cluster_start_node(cl, i)) != 0)
			return rv;
	return 0;
}

void
cluster_stop_node(struct cluster *cl, int i, uint64_t timeout_ms)
{
	if (cl->svc[i] != NULL) {
		weft_msvc_stop(cl->svc[i], timeout_ms);
		weft_msvc_free(cl->svc[i]);
	}
	if (cl->groups[i] != NULL)
		weft_loop_group_free(cl->groups[i]);
	cl->svc[i] = NULL;
	cl->groups[i] = NULL;
}

void
cluster_stop(struct cluster *cl)
{
	int i;

	atomic_store(&cl->slow_release, true);
	/* Answer whatever the hold verb kept. */
	for (i = 0; i < 64; i++) {
		weft_msvc_msg *m = atomic_exchange(&cl->held[i], NULL);

		if (m != NULL)
			weft_msvc_respond(m, NULL, 0);
	}
	for (i = 0; i < cl->n; i++)
		cluster_stop_node(cl, i, 0);
	weft_msvc_config_free(cl->cfg);
	cl->cfg = NULL;
}

weft_msvc_peer *
cluster_peer(struct cluster *cl, int from, int to)
{
	char id[16];

	snprintf(id, sizeof(id), "n%d", to + 1);
	return weft_msvc_peer_find(cl->svc[from], id);
}

int
cluster_black_hole(uint16_t *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(fd, 8), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	*port = ntohs(a.sin_port);
	return fd;
}

struct cluster *
cluster_new(int n, void (*tune)(weft_msvc_limits *l))
{
	struct cluster *cl = calloc(1, sizeof(*cl));

	assert_non_null(cl);
	test_setup(NULL);
	assert_int_equal(cluster_start(cl, n, tune), 0);
	return cl;
}

void
cluster_free(struct cluster *cl)
{
	cluster_stop(cl);
	test_teardown(NULL);
	free(cl);
}
