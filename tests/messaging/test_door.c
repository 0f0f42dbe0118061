/* SPDX-License-Identifier: MIT */
/*
 * test_door.c: nobody can hold a node's door shut (docs/SECURITY.md, "The
 * door"). A flood of connections that never finish their handshake -
 * silent, trickling a byte at a time, or silent before TLS - renewed as
 * the node closes them, runs while fresh clients connect and a member
 * restarts: every fresh client is let in, the member rejoins, and the
 * node holds no more such connections than its handshake cap.
 *
 * Each test prints what it measured: the fresh clients let in, and how
 * long the restarted member took to be answered again.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <cmocka.h>

#include <weft/tls.h>

#include "cluster.h"
#include "msvc_int.h"
#include "rawpeer.h"
#include "tls_test.h"

#define WAIT_MS 10000
/* The node's handshake cap, and the flood's connections: well over it. */
#define HANDSHAKES 16
#define FLOOD 48
#define FRESH 20
/* The flood renews at most this many connections per 5 ms round (about
 * 200 a second, as an attacker's single core easily does), and gives up
 * after FLOOD_MAX_MS whatever happens. */
#define RENEW_PER_ROUND 1
#define FLOOD_MAX_MS 60000

static struct cluster cl;
static tt_pki pki;

static int
group_setup(void **state)
{
	if (test_setup(state) != 0 || tt_pki_new(&pki) != 0)
		return -1;
	if (tt_node(&pki, "n1", "n1") != 0 || tt_node(&pki, "n2", "n2") != 0 ||
	    tt_node(&pki, "fresh", "fresh") != 0)
		return -1;
	return 0;
}

static int
group_teardown(void **state)
{
	tt_pki_free(&pki);
	return test_teardown(state);
}

static void
door_tune(weft_msvc_limits *l)
{
	/* Long enough that the node's own deadline does not clear the
	 * flood during the test: only the door can. */
	l->connect_timeout_ms = 8000;
	l->request_timeout_ms = 2000;
	l->heartbeat_misses = 10;
	l->reconnect_max_ms = 200;
	l->max_handshakes = HANDSHAKES;
}

static weft_tls_ctx *tls_ctx[2];

static void
start(bool tls)
{
	struct cluster_opts o = {.tune = door_tune};

	if (tls) {
		o.tls_mode = WEFT_MSVC_TLS_ALL;
		assert_int_equal(tt_ctx(&pki, "n1", NULL, &tls_ctx[0]), 0);
		assert_int_equal(tt_ctx(&pki, "n2", NULL, &tls_ctx[1]), 0);
		o.tls[0] = tls_ctx[0];
		o.tls[1] = tls_ctx[1];
	}
	assert_int_equal(cluster_start_with(&cl, 2, &o), 0);
}

static void
stop(void)
{
	cluster_stop(&cl);
	for (int i = 0; i < 2; i++) {
		if (tls_ctx[i] != NULL)
			weft_tls_ctx_unref(tls_ctx[i]);
		tls_ctx[i] = NULL;
	}
}

/* ---- The flood ---------------------------------------------------------- */

enum flood_kind {
	SILENT,  /* connects and says nothing */
	TRICKLE, /* a frame's bytes, one every 200 ms */
};

struct flood {
	uint16_t port;
	enum flood_kind kind;
	int sources; /* from 127.0.0.2 on, round-robin */
	pthread_t thread;
	_Atomic bool stop;
	_Atomic int open;    /* connections open now */
	_Atomic int renewed; /* opened again after the node closed them */
	int fds[FLOOD];
	uint64_t next_byte_ms[FLOOD];
	size_t sent[FLOOD];
	int next_source;
};

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A connection from the flood's next source, or -1. */
static int
flood_connect(struct flood *f)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	char src[32];
	int fd;

	snprintf(src, sizeof(src), "127.0.0.%d",
	         2 + f->next_source++ % f->sources);
	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		return -1;
	inet_pton(AF_INET, src, &sa.sin_addr);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		goto err_close;
	sa.sin_port = htons(f->port);
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		goto err_close;
	fcntl(fd, F_SETFL, O_NONBLOCK);
	return fd;

err_close:
	close(fd);
	return -1;
}

/* Whether the node closed fd (end of file, a reset). */
static bool
flood_closed(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	char buf[256];

	if (poll(&p, 1, 0) <= 0)
		return false;
	return recv(fd, buf, sizeof(buf), 0) <= 0 || (p.revents & POLLHUP);
}

/* A trickle: a length prefix that promises 256 bytes, then zeros, one
 * byte every 200 ms. */
static void
flood_trickle(struct flood *f, int i, uint64_t now)
{
	static const uint8_t prefix[4] = {0, 0, 1, 0};
	uint8_t b;

	if (now < f->next_byte_ms[i])
		return;
	b = f->sent[i] < sizeof(prefix) ? prefix[f->sent[i]] : 0;
	f->sent[i]++;
	(void)send(f->fds[i], &b, 1, MSG_NOSIGNAL);
	f->next_byte_ms[i] = now + 200;
}

static void *
flood_run(void *arg)
{
	struct flood *f = arg;
	uint64_t end = now_ms() + FLOOD_MAX_MS;
	int i, renew;

	for (i = 0; i < FLOOD; i++)
		f->fds[i] = -1;
	while (!atomic_load(&f->stop) && now_ms() < end) {
		renew = RENEW_PER_ROUND;
		for (i = 0; i < FLOOD; i++) {
			if (f->fds[i] >= 0 && flood_closed(f->fds[i])) {
				close(f->fds[i]);
				f->fds[i] = -1;
				atomic_fetch_sub(&f->open, 1);
			}
			if (f->fds[i] < 0 && renew > 0) {
				renew--;
				if ((f->fds[i] = flood_connect(f)) < 0)
					continue;
				f->next_byte_ms[i] = 0;
				f->sent[i] = 0;
				atomic_fetch_add(&f->open, 1);
				atomic_fetch_add(&f->renewed, 1);
			}
			if (f->fds[i] >= 0 && f->kind == TRICKLE)
				flood_trickle(f, i, now_ms());
		}
		usleep(5000);
	}
	for (i = 0; i < FLOOD; i++)
		if (f->fds[i] >= 0)
			close(f->fds[i]);
	return NULL;
}

static void
flood_start(struct flood *f, enum flood_kind kind, int sources)
{
	memset(f, 0, sizeof(*f));
	f->port = weft_msvc_port(cl.svc[0]);
	f->kind = kind;
	f->sources = sources;
	assert_int_equal(pthread_create(&f->thread, NULL, flood_run, f), 0);
	/* Every slot of the flood taken once. */
	for (int i = 0; i < 1000 && atomic_load(&f->renewed) < FLOOD; i++)
		usleep(5000);
	assert_true(atomic_load(&f->renewed) >= FLOOD);
	usleep(200 * 1000);
}

static void
flood_stop(struct flood *f)
{
	atomic_store(&f->stop, true);
	pthread_join(f->thread, NULL);
}

/* ---- What honest peers see ---------------------------------------------- */

/* FRESH clients, one after another; returns how many were let in. */
static int
fresh_clients(bool tls)
{
	SSL_CTX *ctx = tls ? rp_tls_ctx(pki.dir, "fresh") : NULL;
	uint16_t port = weft_msvc_port(cl.svc[0]);
	int i, in = 0;
	rawpeer p;

	for (i = 0; i < FRESH; i++) {
		bool connected =
		    tls ? rp_try_connect(&p, port, ctx, "n1")
		        : rp_connect_from(&p, port, "127.0.0.1", 0);

		if (!connected)
			continue;
		in += rp_handshake(&p, "test", "fresh", RP_CLIENT, 1, 0) == 0;
		rp_close(&p);
	}
	if (ctx != NULL)
		SSL_CTX_free(ctx);
	return in;
}

static bool
answered(void *arg)
{
	return atomic_load(&((struct tally *)arg)->ok) > 0;
}

/* Restarts n2 and returns the ms until n1 answers it again (UINT64_MAX:
 * not within WAIT_MS). Each try is a request n2 -> n1, which needs n2's
 * connection through n1's door. */
static uint64_t
member_rejoin_ms(void)
{
	uint64_t start;

	cluster_stop_node(&cl, 1, 1000);
	assert_int_equal(cluster_start_node(&cl, 1), 0);
	start = now_ms();
	while (now_ms() - start < WAIT_MS) {
		struct tally t = {.want = 1};

		if (weft_msvc_request(cl.svc[1], cluster_peer(&cl, 1, 0),
		                      VERB_ECHO, "m", 1, NULL, tally_cb,
		                      &t) == 0 &&
		    test_wait(tally_complete, &t, WAIT_MS) && answered(&t))
			return now_ms() - start;
		usleep(20 * 1000);
	}
	return UINT64_MAX;
}

/* Connections node 1 has accepted and not closed: the TLS handshake's
 * included, which the node's own counters do not see. */
static uint64_t
accepted_open(void)
{
	weft_server_stats st;

	weft_server_get_stats(cl.svc[0]->server, &st);
	return st.channels_open;
}

/*
 * The scenario: a flood of kind from sources addresses runs against node
 * 1 while FRESH clients connect and n2 restarts. All fresh clients are
 * let in, n2 is answered again, and node 1 holds no more of the flood
 * than its handshake cap.
 */
static void
run_door(bool tls, enum flood_kind kind, int sources, const char *name)
{
	struct flood f;
	uint64_t held, rejoin;
	int in;

	start(tls);
	flood_start(&f, kind, sources);
	held = accepted_open();
	in = fresh_clients(tls);
	rejoin = member_rejoin_ms();
	flood_stop(&f);
	print_message(
	    "%s: %d of %d fresh clients let in; member answered "
	    "again after %lld ms; %llu connections held by the "
	    "node during the flood (cap %d); %d flood "
	    "connections opened\n",
	    name, in, FRESH, rejoin == UINT64_MAX ? -1LL : (long long)rejoin,
	    (unsigned long long)held, HANDSHAKES, atomic_load(&f.renewed));
	stop();
	assert_int_equal(in, FRESH);
	assert_true(rejoin != UINT64_MAX);
	/* The flood's connections within the cap, beside n2's (one per
	 * class) and a few evictions on their way out. */
	assert_true(held <= HANDSHAKES + WEFT_MSVC_CLASSES + 8);
}

/* 1. Silent connections from one address. */
static void
test_silent_flood_from_one_address(void **state)
{
	(void)state;
	run_door(false, SILENT, 1, "silent, one address");
}

/* 2. Silent connections from as many addresses as the flood has
 * connections: no address holds more than one. */
static void
test_silent_flood_from_many_addresses(void **state)
{
	(void)state;
	run_door(false, SILENT, FLOOD, "silent, 48 addresses");
}

/* 3. Connections that trickle a frame's bytes, never finishing it. */
static void
test_trickling_flood(void **state)
{
	(void)state;
	run_door(false, TRICKLE, 4, "trickling, 4 addresses");
}

/* 4. Under TLS, connections that never send a ClientHello. */
static void
test_tls_silent_flood(void **state)
{
	(void)state;
	run_door(true, SILENT, 4, "TLS-silent, 4 addresses");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_silent_flood_from_one_address),
	    cmocka_unit_test(test_silent_flood_from_many_addresses),
	    cmocka_unit_test(test_trickling_flood),
	    cmocka_unit_test(test_tls_silent_flood),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
