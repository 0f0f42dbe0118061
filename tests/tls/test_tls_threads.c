/* SPDX-License-Identifier: MIT */
/*
 * test_tls_threads.c: one TLS context used by several loop threads at
 * once. Clients on two loops dial a server on two loops at the same time,
 * with full and resumed handshakes, each connection echoing its bytes
 * back; under ThreadSanitizer this is where shared OpenSSL state would
 * show up.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include "tls_test.h"

#define ROUNDS 24     /* connections per client loop, one after another */
#define MSG_BYTES 512 /* echoed by each connection */

static tt_pki pki;
static weft_tls_ctx *server_tls, *client_tls;
/* Dialers that finished, for the main thread to wait on. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int finished;

static int
setup(void **state)
{
	(void)state;
	return tt_setup(NULL, &pki, &server_tls, &client_tls);
}

static int
teardown(void **state)
{
	(void)state;
	tt_teardown(NULL, &pki, server_tls, client_tls);
	return 0;
}

/* One client loop's run: ROUNDS connections, each echoing MSG_BYTES. */
typedef struct dialer {
	weft_loop *loop;
	uint16_t port;
	int round;
	uint64_t got;      /* bytes back on the current connection */
	atomic_int done;   /* rounds finished, read by the main thread */
	atomic_int failed; /* connects or echoes that went wrong */
} dialer;

static void dial(dialer *d);

static void
finish(dialer *d)
{
	atomic_store(&d->done, ROUNDS);
	pthread_mutex_lock(&lock);
	finished++;
	pthread_cond_signal(&cond);
	pthread_mutex_unlock(&lock);
}

static void
dialer_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	dialer *d = weft_ctx_state(ctx);
	size_t n = evbuffer_get_length(msg);

	(void)type;
	evbuffer_drain(msg, n);
	if ((d->got += n) == MSG_BYTES)
		weft_ctx_close(ctx);
}

static void
dialer_inactive(weft_ctx *ctx)
{
	dialer *d = weft_ctx_state(ctx);

	if (d->got != MSG_BYTES)
		atomic_fetch_add(&d->failed, 1);
	if (++d->round < ROUNDS) {
		atomic_fetch_add(&d->done, 1);
		dial(d);
	} else {
		finish(d);
	}
	weft_ctx_fire_inactive(ctx);
}

static const weft_handler dialer_handler = {
    .read = dialer_read,
    .inactive = dialer_inactive,
};

static int
dialer_init(weft_channel *ch, void *arg)
{
	return weft_pipeline_add_last(ch, "dialer", &dialer_handler, arg);
}

static void
on_connect(weft_channel *ch, int status, void *arg)
{
	dialer *d = arg;
	struct evbuffer *buf;
	char bytes[MSG_BYTES];

	if (status != 0) {
		atomic_fetch_add(&d->failed, 1);
		finish(d);
		return;
	}
	memset(bytes, 'x', sizeof(bytes));
	d->got = 0;
	if ((buf = evbuffer_new()) == NULL ||
	    evbuffer_add(buf, bytes, sizeof(bytes)) != 0 ||
	    weft_channel_write(ch, buf, NULL, NULL) != 0)
		atomic_fetch_add(&d->failed, 1);
	evbuffer_free(buf);
}

static void
dial(dialer *d)
{
	weft_connect_opts o = {
	    .timeout_ms = 10000,
	    .init = dialer_init,
	    .init_arg = d,
	    .tls = client_tls,
	    .server_name = "node-a",
	};
	char addr[64];

	snprintf(addr, sizeof(addr), "127.0.0.1:%u", d->port);
	if (weft_connect(d->loop, addr, &o, on_connect, d) != 0) {
		atomic_fetch_add(&d->failed, 1);
		finish(d);
	}
}

static void
start_task(weft_loop *loop, int status, void *arg)
{
	(void)loop;
	if (status == 0)
		dial(arg);
}

static void
test_handshakes_on_several_loops_at_once(void **state)
{
	weft_loop_group *servers, *clients;
	weft_tls_stats st;
	weft_server *srv;
	dialer d[2];
	struct timespec deadline;
	int i;

	(void)state;
	assert_int_equal(weft_loop_group_new(2, &servers), 0);
	assert_int_equal(weft_loop_group_new(2, &clients), 0);
	assert_int_equal(tt_group_server_new(servers, server_tls, &srv), 0);
	for (i = 0; i < 2; i++) {
		memset(&d[i], 0, sizeof(d[i]));
		d[i].loop = weft_loop_group_at(clients, (size_t)i);
		d[i].port = weft_server_port(srv);
		assert_int_equal(weft_loop_post(d[i].loop, start_task, &d[i]),
		                 0);
	}
	/* The loops run on their own threads; this one waits. */
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += TT_DEADLINE_MS / 1000;
	pthread_mutex_lock(&lock);
	while (finished < 2)
		if (pthread_cond_timedwait(&cond, &lock, &deadline) != 0)
			break;
	pthread_mutex_unlock(&lock);
	for (i = 0; i < 2; i++) {
		assert_int_equal(atomic_load(&d[i].done), ROUNDS);
		assert_int_equal(atomic_load(&d[i].failed), 0);
	}
	weft_tls_ctx_get_stats(client_tls, &st);
	assert_int_equal(st.handshakes_completed, 2 * ROUNDS);
	assert_true(st.handshakes_resumed > 0);
	weft_server_close(srv, NULL, NULL);
	weft_loop_group_free(clients);
	weft_loop_group_free(servers);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_handshakes_on_several_loops_at_once),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
