/* SPDX-License-Identifier: MIT */
/*
 * test_tcp.c: TCP servers and clients over loopback: echo with every byte
 * checked, spreading over a loop group, connect errors, timeouts and
 * cancellation, server close, water marks, and peers that misbehave.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <netinet/tcp.h>
#include <weft/transport.h>

#include "echo.h"
#include "support/ports.h"
#include "support/wait.h"
#include "transport_int.h"

#define DEADLINE_MS 20000

/* ---- Helpers ------------------------------------------------------------ */

static void
run_for(uint64_t ms)
{
	weft_test_run_until(echo_loop, weft_test_never, NULL, ms);
}

static bool
has_nodelay(weft_channel *ch)
{
	int on = 0;
	socklen_t len = sizeof(on);
	int fd = weft__channel_fd(ch);

	return getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, &len) == 0 &&
	       on != 0;
}

static weft_server *
start_server(const char *address, echo_server *es)
{
	weft_server_opts opts = {
	    .address = address,
	    .init = echo_server_init,
	    .init_arg = es,
	};
	weft_server *srv = NULL;

	assert_int_equal(weft_server_new_on_loop(echo_loop, &opts, &srv), 0);
	return srv;
}

static void
close_server(weft_server *srv)
{
	atomic_int closed = 0;

	weft_server_close(srv, echo_server_closed, &closed);
	/* Idempotent: a second close before the first ends is ignored. */
	weft_server_close(srv, echo_server_closed, &closed);
	assert_int_equal(atomic_load(&closed), 0);
	assert_int_equal(weft_test_run_until(echo_loop, weft_test_atomic_set,
	                                     &closed, DEADLINE_MS),
	                 0);
	run_for(10);
	assert_int_equal(atomic_load(&closed), 1);
}

static void
connect_client(const char *address, echo_client *c)
{
	weft_connect_opts opts = {
	    .init = echo_client_init,
	    .init_arg = c,
	};

	assert_int_equal(
	    weft_connect(echo_loop, address, &opts, echo_client_connected, c),
	    0);
	/* Never inside weft_connect. */
	assert_false(c->connected);
}

static void
run_echo(weft_server *srv, uint64_t msgs)
{
	echo_client c = {.msgs_total = msgs};

	connect_client(weft_server_address(srv), &c);
	assert_int_equal(
	    weft_test_run_until(echo_loop, echo_client_done, &c, DEADLINE_MS),
	    0);
	assert_int_equal(c.connect_status, 0);
	assert_false(c.inactive);
	assert_int_equal(c.msgs_sent, msgs);
	assert_int_equal(c.bytes_recv, c.bytes_sent);
	assert_int_equal(c.mismatches, 0);
	weft_channel_close(c.ch);
	assert_int_equal(weft_test_run_until(echo_loop, weft_test_flag_set,
	                                     &c.inactive, DEADLINE_MS),
	                 0);
}

/* A listener whose accept queue is full: further SYNs go unanswered. */
typedef struct full_listener {
	int fd;
	int fillers[2];
	char address[64];
} full_listener;

static void
full_listener_open(full_listener *fl)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	int i;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fl->fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fl->fd >= 0);
	assert_int_equal(bind(fl->fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(fl->fd, 0), 0);
	assert_int_equal(getsockname(fl->fd, (struct sockaddr *)&sin, &len), 0);
	for (i = 0; i < 2; i++) {
		fl->fillers[i] =
		    socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		connect(fl->fillers[i], (struct sockaddr *)&sin, sizeof(sin));
	}
	snprintf(fl->address, sizeof(fl->address), "127.0.0.1:%u",
	         ntohs(sin.sin_port));
}

static void
full_listener_close(full_listener *fl)
{
	close(fl->fillers[0]);
	close(fl->fillers[1]);
	close(fl->fd);
}

static int
raw_connect(uint16_t port)
{
	struct sockaddr_in sin;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons(port);
	assert_true(fd >= 0);
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
		int err = errno;

		close(fd);
		return -err;
	}
	return fd;
}

typedef struct stats_wait {
	weft_server *srv;
	uint64_t accepted;
	uint64_t open;
} stats_wait;

static bool
stats_reached(void *arg)
{
	stats_wait *w = arg;
	weft_server_stats st;

	weft_server_get_stats(w->srv, &st);
	return st.accepted >= w->accepted && st.channels_open == w->open;
}

/* ---- Echo ---------------------------------------------------------------- */

static void
test_echo_ipv6_100k_messages(void **state)
{
	echo_server es = {0};
	weft_server *srv;

	(void)state;
	srv = start_server("[::1]:0", &es);
	assert_true(weft_server_port(srv) != 0);
	assert_non_null(strstr(weft_server_address(srv), "[::1]:"));
	run_echo(srv, 100000);
	assert_int_equal(atomic_load(&es.channels), 1);
	close_server(srv);
}

static bool
clients_done(void *arg)
{
	echo_client *c = arg;
	int i;

	for (i = 0; i < 4; i++)
		if (!echo_client_done(&c[i]))
			return false;
	return true;
}

static bool
four_inactive(void *arg)
{
	return atomic_load(&((echo_server *)arg)->inactive) == 4;
}

/* Four clients, 25k messages each, to a server on a 2-loop group. */
static void
test_echo_ipv4_100k_messages_over_group(void **state)
{
	echo_server es = {0};
	weft_server_opts opts = {
	    .address = "127.0.0.1:0",
	    .init = echo_server_init,
	    .init_arg = &es,
	};
	echo_client c[4];
	atomic_int closed = 0;
	weft_server *srv;
	int i;

	(void)state;
	memset(c, 0, sizeof(c));
	assert_int_equal(weft_loop_group_new(2, &es.group), 0);
	assert_int_equal(weft_server_new(es.group, &opts, &srv), 0);
	for (i = 0; i < 4; i++) {
		c[i].msgs_total = 25000;
		connect_client(weft_server_address(srv), &c[i]);
	}
	assert_int_equal(
	    weft_test_run_until(echo_loop, clients_done, c, DEADLINE_MS), 0);
	for (i = 0; i < 4; i++) {
		assert_int_equal(c[i].connect_status, 0);
		assert_false(c[i].inactive);
		assert_int_equal(c[i].bytes_recv, c[i].bytes_sent);
		assert_int_equal(c[i].mismatches, 0);
		weft_channel_close(c[i].ch);
	}
	/* Round-robin: two channels on each loop. */
	assert_int_equal(atomic_load(&es.per_loop[0]), 2);
	assert_int_equal(atomic_load(&es.per_loop[1]), 2);
	assert_int_equal(
	    weft_test_run_until(echo_loop, four_inactive, &es, DEADLINE_MS), 0);
	weft_server_close(srv, echo_server_closed, &closed);
	assert_int_equal(weft_test_run_until(echo_loop, weft_test_atomic_set,
	                                     &closed, DEADLINE_MS),
	                 0);
	weft_loop_group_free(es.group);
}

static void
test_connect_by_name_and_peer_text(void **state)
{
	echo_server es = {0};
	echo_client c = {.msgs_total = 10};
	char address[64], peer[64];
	weft_server *srv;

	(void)state;
	srv = start_server("127.0.0.1:0", &es);
	snprintf(address, sizeof(address), "localhost:%u",
	         weft_server_port(srv));
	connect_client(address, &c);
	assert_int_equal(
	    weft_test_run_until(echo_loop, echo_client_done, &c, DEADLINE_MS),
	    0);
	assert_int_equal(c.connect_status, 0);
	snprintf(peer, sizeof(peer), "127.0.0.1:%u", weft_server_port(srv));
	assert_string_equal(weft_channel_peer(c.ch), peer);
	assert_true(has_nodelay(c.ch));
	assert_int_equal(atomic_load(&es.nodelay), 1);
	weft_channel_close(c.ch);
	run_for(20);
	close_server(srv);
}

/* ---- Connect errors ------------------------------------------------------ */

static void
test_connect_refused(void **state)
{
	echo_result r = {0};
	char address[64];

	(void)state;
	snprintf(address, sizeof(address), "127.0.0.1:%u",
	         weft_test_free_port());
	assert_int_equal(
	    weft_connect(echo_loop, address, NULL, echo_result_cb, &r), 0);
	assert_int_equal(r.calls, 0);
	assert_int_equal(
	    weft_test_run_until(echo_loop, echo_result_set, &r, DEADLINE_MS),
	    0);
	assert_int_equal(r.status, WEFT_ECONNREFUSED);
	assert_null(r.ch);
	run_for(20);
	assert_int_equal(r.calls, 1);
}

static void
test_connect_timeout(void **state)
{
	weft_connect_opts opts = {.timeout_ms = 200};
	echo_result r = {0};
	full_listener fl;
	uint64_t start;

	(void)state;
	full_listener_open(&fl);
	start = weft_now_ns();
	assert_int_equal(
	    weft_connect(echo_loop, fl.address, &opts, echo_result_cb, &r), 0);
	assert_int_equal(
	    weft_test_run_until(echo_loop, echo_result_set, &r, DEADLINE_MS),
	    0);
	assert_int_equal(r.status, WEFT_ETIMEDOUT);
	assert_true(weft_now_ns() - start >= 150u * 1000000u);
	run_for(20);
	assert_int_equal(r.calls, 1);
	full_listener_close(&fl);
}

static void
test_connect_cancel(void **state)
{
	echo_result queued = {0}, inflight = {0};
	weft_connect_req *req;
	full_listener fl;

	(void)state;
	full_listener_open(&fl);
	/* Cancelled before its start task ran. */
	assert_int_equal(weft_connect_start(echo_loop, fl.address, NULL,
	                                    echo_result_cb, &queued, &req),
	                 0);
	weft_connect_cancel(req);
	assert_int_equal(queued.calls, 0);
	/* Cancelled while connect() is in flight. */
	assert_int_equal(weft_connect_start(echo_loop, fl.address, NULL,
	                                    echo_result_cb, &inflight, &req),
	                 0);
	run_for(50);
	assert_int_equal(inflight.calls, 0);
	weft_connect_cancel(req);
	assert_int_equal(inflight.calls, 0);
	assert_int_equal(weft_test_run_until(echo_loop, echo_result_set,
	                                     &inflight, DEADLINE_MS),
	                 0);
	run_for(20);
	assert_int_equal(queued.calls, 1);
	assert_int_equal(queued.status, WEFT_ECANCELED);
	assert_int_equal(inflight.calls, 1);
	assert_int_equal(inflight.status, WEFT_ECANCELED);
	full_listener_close(&fl);
}

static void
test_connect_bad_address_fails_at_once(void **state)
{
	static const char *bad[] = {
	    "nonsense", "127.0.0.1", "127.0.0.1:99999", "[::1:5",
	    "::1:5",    "unix:",     "host name:80",    "127.0.0.1:-1",
	    ":80",      "[]:80",     "[localhost]:80",
	};
	echo_result r = {0};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(weft_address_check(bad[i]), WEFT_EADDR);
		assert_int_equal(
		    weft_connect(echo_loop, bad[i], NULL, echo_result_cb, &r),
		    WEFT_EADDR);
	}
	assert_int_equal(
	    weft_connect(echo_loop, NULL, NULL, echo_result_cb, &r),
	    WEFT_EINVAL);
	run_for(20);
	assert_int_equal(r.calls, 0);
}

static void
check_round_trip(const char *text)
{
	char out[WEFT_ADDRESS_MAX];
	weft__addr a;

	assert_int_equal(weft__addr_parse(text, &a), 0);
	weft__addr_format((struct sockaddr *)&a.sa, a.sa_len, out, sizeof(out));
	assert_string_equal(out, text);
}

static void
test_address_text(void **state)
{
	weft__addr a;

	(void)state;
	check_round_trip("127.0.0.1:5000");
	check_round_trip("[::1]:80");
	check_round_trip("[fe80::1:2]:65535");
	check_round_trip("0.0.0.0:0");
	check_round_trip("unix:/tmp/x.sock");
	check_round_trip("unix:@abstract");
	assert_int_equal(weft__addr_parse("localhost:80", &a), 0);
	assert_int_equal(a.family, AF_UNSPEC);
	assert_string_equal(a.host, "localhost");
	assert_int_equal(a.port, 80);
	assert_int_equal(weft__addr_parse("unix:@", &a), WEFT_EADDR);
}

/* The public pair: host and port joined as weft_connect takes them, and
 * split back, brackets and all; what weft_address_check refuses, split
 * refuses too. */
static void
test_address_join_and_split(void **state)
{
	static const struct {
		const char *host, *text;
		uint16_t port;
	} good[] = {
	    {"127.0.0.1", "127.0.0.1:5000", 5000},
	    {"::1", "[::1]:80", 80},
	    {"node-1.cluster.local", "node-1.cluster.local:7000", 7000},
	    {"0.0.0.0", "0.0.0.0:0", 0},
	};
	static const char *bad[] = {
	    "nonsense",         "::1:5", "[localhost]:80",
	    "unix:/tmp/x.sock", ":80",   "h:65536"};
	char buf[WEFT_ADDRESS_MAX], host[64], tiny[4];
	uint16_t port;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_int_equal(weft_address_join(good[i].host, good[i].port,
		                                   buf, sizeof(buf)),
		                 strlen(good[i].text));
		assert_string_equal(buf, good[i].text);
		assert_int_equal(
		    weft_address_split(buf, host, sizeof(host), &port), 0);
		assert_string_equal(host, good[i].host);
		assert_int_equal(port, good[i].port);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(
		    weft_address_split(bad[i], host, sizeof(host), &port),
		    WEFT_EADDR);
	/* A host too long for the caller's buffer, and a cut join. */
	assert_int_equal(
	    weft_address_split("[::1]:80", tiny, sizeof(tiny), &port), 0);
	assert_int_equal(
	    weft_address_split("localhost:80", tiny, sizeof(tiny), &port),
	    WEFT_EADDR);
	assert_int_equal(weft_address_join("::1", 80, tiny, sizeof(tiny)), 8);
	assert_string_equal(tiny, "[::");
}

/* ---- Server close and misbehaving clients -------------------------------- */

static void
test_server_close_keeps_connected_clients(void **state)
{
	echo_server es = {0};
	echo_client c = {.msgs_total = 100};
	echo_result late = {0};
	char address[64];
	weft_server *srv;

	(void)state;
	srv = start_server("127.0.0.1:0", &es);
	snprintf(address, sizeof(address), "%s", weft_server_address(srv));
	connect_client(address, &c);
	assert_int_equal(
	    weft_test_run_until(echo_loop, echo_client_done, &c, DEADLINE_MS),
	    0);
	close_server(srv);
	/* Connected clients go on; new ones are refused. */
	c.msgs_total += 1000;
	weft_channel_fire_user_event(c.ch, 1, NULL);
	assert_int_equal(
	    weft_connect(echo_loop, address, NULL, echo_result_cb, &late), 0);
	assert_int_equal(
	    weft_test_run_until(echo_loop, echo_result_set, &late, DEADLINE_MS),
	    0);
	assert_int_equal(late.status, WEFT_ECONNREFUSED);
	assert_int_equal(
	    weft_test_run_until(echo_loop, echo_client_done, &c, DEADLINE_MS),
	    0);
	assert_false(c.inactive);
	assert_int_equal(c.msgs_sent, 1100);
	assert_int_equal(c.bytes_recv, c.bytes_sent);
	assert_int_equal(c.mismatches, 0);
	weft_channel_close(c.ch);
	assert_int_equal(weft_test_run_until(echo_loop, weft_test_flag_set,
	                                     &c.inactive, DEADLINE_MS),
	                 0);
	run_for(20);
	assert_int_equal(atomic_load(&es.inactive), 1);
}

static void
test_client_connects_and_closes_at_once(void **state)
{
	echo_server es = {0};
	stats_wait w;
	weft_server *srv;
	int i, fd;

	(void)state;
	srv = start_server("127.0.0.1:0", &es);
	for (i = 0; i < 20; i++) {
		fd = raw_connect(weft_server_port(srv));
		assert_true(fd >= 0);
		close(fd);
	}
	w = (stats_wait){.srv = srv, .accepted = 20, .open = 0};
	assert_int_equal(
	    weft_test_run_until(echo_loop, stats_reached, &w, DEADLINE_MS), 0);
	run_echo(srv, 1000);
	close_server(srv);
}

static void
test_client_half_closes(void **state)
{
	echo_server es = {0};
	char got[16];
	weft_server *srv;
	stats_wait w;
	ssize_t n;
	size_t total = 0;
	int fd;

	(void)state;
	srv = start_server("127.0.0.1:0", &es);
	fd = raw_connect(weft_server_port(srv));
	assert_true(fd >= 0);
	assert_int_equal(send(fd, "hello", 5, 0), 5);
	assert_int_equal(shutdown(fd, SHUT_WR), 0);
	/* The server takes EOF as the end: its channel goes away. */
	w = (stats_wait){.srv = srv, .accepted = 1, .open = 0};
	assert_int_equal(
	    weft_test_run_until(echo_loop, stats_reached, &w, DEADLINE_MS), 0);
	assert_int_equal(atomic_load(&es.inactive), 1);
	/* What the client gets back is a prefix of what it sent, then EOF. */
	while ((n = recv(fd, got + total, sizeof(got) - total, 0)) > 0)
		total += (size_t)n;
	assert_true(n == 0 || errno == ECONNRESET);
	assert_true(total <= 5);
	assert_memory_equal(got, "hello", total);
	close(fd);
	close_server(srv);
}

static bool
all_connected(void *arg)
{
	echo_result *r = arg;
	int i;

	for (i = 0; i < 200; i++)
		if (r[i].calls == 0)
			return false;
	return true;
}

typedef struct group_wait {
	echo_server *es;
	int inactive;
} group_wait;

static bool
server_inactive_reached(void *arg)
{
	group_wait *w = arg;

	return atomic_load(&w->es->inactive) >= w->inactive;
}

static void
test_many_connects_at_once(void **state)
{
	echo_server es = {0};
	weft_server_opts opts = {
	    .address = "127.0.0.1:0",
	    .init = echo_server_init,
	    .init_arg = &es,
	};
	echo_result *r = calloc(200, sizeof(*r));
	group_wait gw = {.es = &es, .inactive = 200};
	atomic_int closed = 0;
	weft_server *srv;
	int i;

	(void)state;
	assert_int_equal(weft_loop_group_new(2, &es.group), 0);
	assert_int_equal(weft_server_new(es.group, &opts, &srv), 0);
	for (i = 0; i < 200; i++)
		assert_int_equal(weft_connect(echo_loop,
		                              weft_server_address(srv), NULL,
		                              echo_result_cb, &r[i]),
		                 0);
	assert_int_equal(
	    weft_test_run_until(echo_loop, all_connected, r, DEADLINE_MS), 0);
	for (i = 0; i < 200; i++) {
		assert_int_equal(r[i].status, 0);
		assert_int_equal(r[i].calls, 1);
		weft_channel_close(r[i].ch);
	}
	assert_int_equal(weft_test_run_until(echo_loop, server_inactive_reached,
	                                     &gw, DEADLINE_MS),
	                 0);
	assert_int_equal(atomic_load(&es.channels), 200);
	assert_int_equal(atomic_load(&es.per_loop[0]), 100);
	weft_server_close(srv, echo_server_closed, &closed);
	assert_int_equal(weft_test_run_until(echo_loop, weft_test_atomic_set,
	                                     &closed, DEADLINE_MS),
	                 0);
	weft_loop_group_free(es.group);
	free(r);
}

static void
test_max_channels_rejects_extra(void **state)
{
	echo_server es = {0};
	weft_server_opts opts = {
	    .address = "127.0.0.1:0",
	    .init = echo_server_init,
	    .init_arg = &es,
	    .max_channels = 2,
	};
	echo_client c[3];
	weft_server_stats st;
	weft_server *srv;
	int i;

	(void)state;
	memset(c, 0, sizeof(c));
	assert_int_equal(weft_server_new_on_loop(echo_loop, &opts, &srv), 0);
	for (i = 0; i < 3; i++) {
		c[i].msgs_total = 10;
		connect_client(weft_server_address(srv), &c[i]);
		assert_int_equal(weft_test_run_until(echo_loop,
		                                     echo_client_done, &c[i],
		                                     DEADLINE_MS),
		                 0);
	}
	assert_false(c[0].inactive);
	assert_false(c[1].inactive);
	/* The third connected, then was closed by the server at once. */
	assert_true(c[2].inactive || c[2].connect_status != 0);
	weft_server_get_stats(srv, &st);
	assert_int_equal(st.rejected, 1);
	assert_int_equal(st.channels_open, 2);
	weft_channel_close(c[0].ch);
	weft_channel_close(c[1].ch);
	run_for(20);
	close_server(srv);
}

static int
refuse_init(weft_channel *ch, void *arg)
{
	(void)ch;
	atomic_fetch_add((atomic_int *)arg, 1);
	return WEFT_EPROTO;
}

static void
test_init_failure_closes_the_connection(void **state)
{
	atomic_int server_inits = 0, client_inits = 0;
	weft_server_opts opts = {
	    .address = "127.0.0.1:0",
	    .init = refuse_init,
	    .init_arg = &server_inits,
	};
	weft_connect_opts copts = {
	    .init = refuse_init,
	    .init_arg = &client_inits,
	};
	echo_client c = {.msgs_total = 10};
	echo_result r = {0};
	weft_server_stats st;
	weft_server *srv;
	stats_wait w;

	(void)state;
	assert_int_equal(weft_server_new_on_loop(echo_loop, &opts, &srv), 0);
	/* The server refuses the channel: the client sees it close. */
	connect_client(weft_server_address(srv), &c);
	assert_int_equal(
	    weft_test_run_until(echo_loop, echo_client_done, &c, DEADLINE_MS),
	    0);
	assert_true(c.inactive);
	w = (stats_wait){.srv = srv, .accepted = 1, .open = 0};
	assert_int_equal(
	    weft_test_run_until(echo_loop, stats_reached, &w, DEADLINE_MS), 0);
	weft_server_get_stats(srv, &st);
	assert_int_equal(st.setup_failures, 1);
	assert_int_equal(atomic_load(&server_inits), 1);
	/* The client refuses its own channel: the callback says why. */
	assert_int_equal(weft_connect(echo_loop, weft_server_address(srv),
	                              &copts, echo_result_cb, &r),
	                 0);
	assert_int_equal(
	    weft_test_run_until(echo_loop, echo_result_set, &r, DEADLINE_MS),
	    0);
	assert_int_equal(r.status, WEFT_EPROTO);
	assert_null(r.ch);
	assert_int_equal(atomic_load(&client_inits), 1);
	run_for(20);
	close_server(srv);
}

/* ---- Water marks ----------------------------------------------------------
 */

typedef struct flood {
	uint64_t sent;
	uint64_t limit;
	int unwritable_events;
	int writable_events;
	weft_channel *ch;
} flood;

static void
flood_pump(weft_ctx *ctx, flood *f)
{
	struct evbuffer *buf = evbuffer_new();
	uint8_t chunk[16384];
	size_t i;

	while (weft_channel_is_writable(weft_ctx_channel(ctx)) &&
	       f->sent < f->limit) {
		for (i = 0; i < sizeof(chunk); i++)
			chunk[i] = echo_pattern(f->sent + i);
		evbuffer_add(buf, chunk, sizeof(chunk));
		weft_ctx_write(ctx, &weft_msg_evbuffer, buf, NULL, NULL);
		weft_ctx_flush(ctx);
		f->sent += sizeof(chunk);
	}
	evbuffer_free(buf);
}

static void
flood_active(weft_ctx *ctx)
{
	flood *f = weft_ctx_state(ctx);

	f->ch = weft_ctx_channel(ctx);
	flood_pump(ctx, f);
	weft_ctx_fire_active(ctx);
}

static void
flood_writability(weft_ctx *ctx, bool writable)
{
	flood *f = weft_ctx_state(ctx);

	if (writable) {
		f->writable_events++;
		flood_pump(ctx, f);
	} else {
		f->unwritable_events++;
	}
	weft_ctx_fire_writability_changed(ctx, writable);
}

static const weft_handler flood_handler = {
    .active = flood_active,
    .writability_changed = flood_writability,
};

static int
flood_init(weft_channel *ch, void *arg)
{
	return weft_pipeline_add_last(ch, "flood", &flood_handler, arg);
}

static bool
flood_blocked(void *arg)
{
	return ((flood *)arg)->unwritable_events > 0;
}

static flood *resume_flood;

/* arg: the writable-event count before reading resumed. */
static bool
flood_resumed(void *arg)
{
	return resume_flood->writable_events > *(int *)arg;
}

typedef struct flood_sink {
	flood *f;
	echo_sink *s;
} flood_sink;

static bool
flood_received(void *arg)
{
	flood_sink *fs = arg;

	return fs->f->sent == fs->f->limit && fs->s->bytes == fs->f->sent;
}

static void
test_water_marks_pause_and_resume_writer(void **state)
{
	echo_sink sink = {.start_paused = true};
	weft_server_opts sopts = {
	    .address = "127.0.0.1:0",
	    .init = echo_sink_init,
	    .init_arg = &sink,
	};
	flood f = {.limit = 64u << 20};
	weft_connect_opts copts = {
	    .init = flood_init,
	    .init_arg = &f,
	    .channel = {.high_water_bytes = 256 << 10,
	                .low_water_bytes = 64 << 10},
	};
	flood_sink fs = {&f, &sink};
	echo_result r = {0};
	weft_server *srv;
	uint64_t sent_when_blocked;
	int rounds = 0, writable_before;

	(void)state;
	assert_int_equal(weft_server_new_on_loop(echo_loop, &sopts, &srv), 0);
	assert_int_equal(weft_connect(echo_loop, weft_server_address(srv),
	                              &copts, echo_result_cb, &r),
	                 0);
	assert_int_equal(
	    weft_test_run_until(echo_loop, flood_blocked, &f, DEADLINE_MS), 0);
	assert_int_equal(r.status, 0);
	/* The kernel's buffers take a few MiB first; once they are full the
	 * writer stays unwritable: wait until nothing moves for 100 ms. */
	do {
		sent_when_blocked = f.sent;
		run_for(100);
	} while (
	    (f.sent != sent_when_blocked || weft_channel_is_writable(f.ch)) &&
	    ++rounds < 100);
	assert_false(weft_channel_is_writable(f.ch));
	assert_true(weft_channel_pending_write_bytes(f.ch) > 64u << 10);
	assert_true(f.sent < f.limit);
	assert_int_equal(sink.bytes, 0);
	/* From here on, send only a little more after resuming. */
	f.limit = f.sent + (1u << 20);
	writable_before = f.writable_events;
	resume_flood = &f;
	weft_channel_set_auto_read(sink.ch, true);
	assert_int_equal(weft_test_run_until(echo_loop, flood_resumed,
	                                     &writable_before, DEADLINE_MS),
	                 0);
	assert_int_equal(
	    weft_test_run_until(echo_loop, flood_received, &fs, DEADLINE_MS),
	    0);
	assert_int_equal(sink.mismatches, 0);
	/* Reads take what the socket has, up to max_read_bytes each. */
	fprintf(stderr, "sink: %llu bytes in %llu reads; sent %llu\n",
	        (unsigned long long)sink.bytes, (unsigned long long)sink.reads,
	        (unsigned long long)f.sent);
	assert_true(sink.reads < sink.bytes / 16384);
	weft_channel_close(f.ch);
	assert_int_equal(weft_test_run_until(echo_loop, weft_test_flag_set,
	                                     &sink.inactive, DEADLINE_MS),
	                 0);
	close_server(srv);
}

/* ---- Batching -------------------------------------------------------------
 */

#define SMALL_MSGS 10000
#define SMALL_MSG_BYTES 16

static bool
sink_has(void *arg)
{
	return ((echo_sink *)arg)->bytes == SMALL_MSGS * SMALL_MSG_BYTES;
}

/* Writes SMALL_MSGS small messages, with one flush (ctx) or a flush per
 * message (weft_channel_write). */
static void
write_small(weft_channel *ch, weft_ctx *ctx)
{
	struct evbuffer *buf = evbuffer_new();
	uint8_t bytes[SMALL_MSG_BYTES];
	uint64_t off = 0;
	int i, j;

	for (i = 0; i < SMALL_MSGS; i++) {
		for (j = 0; j < SMALL_MSG_BYTES; j++)
			bytes[j] = echo_pattern(off++);
		evbuffer_add(buf, bytes, sizeof(bytes));
		if (ctx != NULL)
			weft_ctx_write(ctx, &weft_msg_evbuffer, buf, NULL,
			               NULL);
		else
			assert_int_equal(
			    weft_channel_write(ch, buf, NULL, NULL), 0);
	}
	if (ctx != NULL)
		weft_ctx_flush(ctx);
	evbuffer_free(buf);
}

static void
batch_active(weft_ctx *ctx)
{
	write_small(NULL, ctx);
	weft_ctx_fire_active(ctx);
}

static const weft_handler batch_handler = {
    .active = batch_active,
};

static int
batch_init(weft_channel *ch, void *arg)
{
	return weft_pipeline_add_last(ch, "batch", &batch_handler, arg);
}

/*
 * Many small writes in one loop turn should leave in few writev calls
 * (counted with strace -f -c; see the transport report). Here: every byte
 * arrives in order, in far fewer reads than writes.
 */
static void
small_writes(bool one_flush)
{
	echo_sink sink = {0};
	weft_server_opts opts = {
	    .address = "127.0.0.1:0",
	    .init = echo_sink_init,
	    .init_arg = &sink,
	};
	weft_connect_opts copts = {.init = one_flush ? batch_init : NULL};
	echo_result r = {0};
	weft_server *srv;

	assert_int_equal(weft_server_new_on_loop(echo_loop, &opts, &srv), 0);
	assert_int_equal(weft_connect(echo_loop, weft_server_address(srv),
	                              &copts, echo_result_cb, &r),
	                 0);
	assert_int_equal(
	    weft_test_run_until(echo_loop, echo_result_set, &r, DEADLINE_MS),
	    0);
	assert_int_equal(r.status, 0);
	if (!one_flush)
		write_small(r.ch, NULL);
	assert_int_equal(
	    weft_test_run_until(echo_loop, sink_has, &sink, DEADLINE_MS), 0);
	assert_int_equal(sink.mismatches, 0);
	assert_true(sink.reads < 100);
	weft_channel_close(r.ch);
	assert_int_equal(weft_test_run_until(echo_loop, weft_test_flag_set,
	                                     &sink.inactive, DEADLINE_MS),
	                 0);
	close_server(srv);
}

static void
test_small_ctx_writes_one_flush(void **state)
{
	(void)state;
	small_writes(true);
}

static void
test_small_channel_writes(void **state)
{
	(void)state;
	small_writes(false);
}

/* ---- Accept errors --------------------------------------------------------
 */

static bool
accept_error_seen(void *arg)
{
	weft_server_stats st;

	weft_server_get_stats(arg, &st);
	return st.accept_errors > 0;
}

static bool
one_channel(void *arg)
{
	return atomic_load(&((echo_server *)arg)->channels) == 1;
}

/* Out of fds, accept fails with EMFILE and the connection stays queued:
 * the server must pause, not spin, and accept it once fds are back. */
static void
test_accept_emfile_pauses_then_recovers(void **state)
{
	echo_server es = {0};
	struct rlimit saved, low;
	weft_server_stats st;
	int dummies[64], n = 0, fd;
	weft_server *srv;

	(void)state;
	srv = start_server("127.0.0.1:0", &es);
	run_for(10); /* the listener starts */
	fd = raw_connect(weft_server_port(srv));
	assert_true(fd >= 0);
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
	low = saved;
	low.rlim_cur = (rlim_t)fcntl(fd, F_DUPFD, 0) + 8;
	close((int)low.rlim_cur - 8);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	/* Fill every fd below the limit. */
	while (n < 64 && (dummies[n] = dup(0)) >= 0)
		n++;
	assert_true(n < 64);
	assert_int_equal(
	    weft_test_run_until(echo_loop, accept_error_seen, srv, DEADLINE_MS),
	    0);
	run_for(250);
	weft_server_get_stats(srv, &st);
	/* One error per 100 ms pause, not thousands. */
	assert_true(st.accept_errors <= 5);
	assert_int_equal(atomic_load(&es.channels), 0);
	while (n > 0)
		close(dummies[--n]);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
	assert_int_equal(
	    weft_test_run_until(echo_loop, one_channel, &es, DEADLINE_MS), 0);
	close(fd);
	close_server(srv);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_echo_ipv6_100k_messages,
	                                    echo_loop_setup,
	                                    echo_loop_teardown),
	    cmocka_unit_test_setup_teardown(
	        test_echo_ipv4_100k_messages_over_group, echo_loop_setup,
	        echo_loop_teardown),
	    cmocka_unit_test_setup_teardown(test_connect_by_name_and_peer_text,
	                                    echo_loop_setup,
	                                    echo_loop_teardown),
	    cmocka_unit_test_setup_teardown(
	        test_connect_refused, echo_loop_setup, echo_loop_teardown),
	    cmocka_unit_test_setup_teardown(
	        test_connect_timeout, echo_loop_setup, echo_loop_teardown),
	    cmocka_unit_test_setup_teardown(
	        test_connect_cancel, echo_loop_setup, echo_loop_teardown),
	    cmocka_unit_test_setup_teardown(
	        test_connect_bad_address_fails_at_once, echo_loop_setup,
	        echo_loop_teardown),
	    cmocka_unit_test(test_address_text),
	    cmocka_unit_test(test_address_join_and_split),
	    cmocka_unit_test_setup_teardown(
	        test_server_close_keeps_connected_clients, echo_loop_setup,
	        echo_loop_teardown),
	    cmocka_unit_test_setup_teardown(
	        test_client_connects_and_closes_at_once, echo_loop_setup,
	        echo_loop_teardown),
	    cmocka_unit_test_setup_teardown(
	        test_client_half_closes, echo_loop_setup, echo_loop_teardown),
	    cmocka_unit_test_setup_teardown(test_many_connects_at_once,
	                                    echo_loop_setup,
	                                    echo_loop_teardown),
	    cmocka_unit_test_setup_teardown(test_max_channels_rejects_extra,
	                                    echo_loop_setup,
	                                    echo_loop_teardown),
	    cmocka_unit_test_setup_teardown(
	        test_init_failure_closes_the_connection, echo_loop_setup,
	        echo_loop_teardown),
	    cmocka_unit_test_setup_teardown(
	        test_water_marks_pause_and_resume_writer, echo_loop_setup,
	        echo_loop_teardown),
	    cmocka_unit_test_setup_teardown(test_small_ctx_writes_one_flush,
	                                    echo_loop_setup,
	                                    echo_loop_teardown),
	    cmocka_unit_test_setup_teardown(
	        test_small_channel_writes, echo_loop_setup, echo_loop_teardown),
	    cmocka_unit_test_setup_teardown(
	        test_accept_emfile_pauses_then_recovers, echo_loop_setup,
	        echo_loop_teardown),
	};

	/* An argument runs only the tests whose names match it. */
	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
