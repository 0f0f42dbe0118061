/* SPDX-License-Identifier: MIT */
/*
 * test_group_shutdown.c: graceful shutdown of a server's loop group. Pending
 * writes reach the peer before the channels close, within the deadline;
 * write callbacks run exactly once; the server stops accepting.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include "echo.h"
#include "support/wait.h"

#define DEADLINE_MS 20000
#define PAYLOAD_BYTES (8u << 20)

/* Server side: on active, writes PAYLOAD_BYTES with a write callback. */
typedef struct blaster {
	atomic_int write_cbs;
	atomic_int write_status;
	atomic_int wrote; /* the write is queued, not yet on the wire */
} blaster;

static void
on_blast_written(weft_channel *ch, int status, void *arg)
{
	blaster *b = arg;

	(void)ch;
	atomic_store(&b->write_status, status);
	atomic_fetch_add(&b->write_cbs, 1);
}

static void
blaster_active(weft_ctx *ctx)
{
	blaster *b = weft_ctx_state(ctx);
	struct evbuffer *buf = evbuffer_new();
	uint8_t chunk[4096];
	size_t off, i;

	for (off = 0; off < PAYLOAD_BYTES; off += sizeof(chunk)) {
		for (i = 0; i < sizeof(chunk); i++)
			chunk[i] = echo_pattern(off + i);
		evbuffer_add(buf, chunk, sizeof(chunk));
	}
	weft_ctx_write(ctx, &weft_msg_evbuffer, buf, on_blast_written, b);
	weft_ctx_flush(ctx);
	evbuffer_free(buf);
	if (weft_channel_pending_write_bytes(weft_ctx_channel(ctx)) > 0)
		atomic_store(&b->wrote, 1);
	weft_ctx_fire_active(ctx);
}

static const weft_handler blaster_handler = {
    .active = blaster_active,
};

static int
blaster_init(weft_channel *ch, void *arg)
{
	return weft_pipeline_add_last(ch, "blaster", &blaster_handler, arg);
}

/* Client side, on its own loop thread: a paused sink, plus flags. */
typedef struct client {
	echo_sink sink;
	atomic_int connected;
	atomic_int inactive;
} client;

static int
client_init(weft_channel *ch, void *arg)
{
	client *c = arg;
	int rv;

	if ((rv = echo_sink_init(ch, &c->sink)) != 0)
		return rv;
	return echo_notify_init(ch, &c->inactive);
}

static void
client_connected(weft_channel *ch, int status, void *arg)
{
	client *c = arg;

	(void)ch;
	atomic_store(&c->connected, status == 0 ? 1 : status);
}

static void
resume_reading(weft_loop *loop, int status, void *arg)
{
	client *c = arg;

	(void)loop;
	if (status == 0)
		weft_channel_set_auto_read(c->sink.ch, true);
}

typedef struct fixture {
	weft_loop *main;   /* polls from the test thread */
	weft_loop *client; /* the client's own thread */
	weft_loop_group *group;
	weft_server *srv;
	blaster b;
	client c;
	atomic_int closed;
} fixture;

static void
start(fixture *f)
{
	weft_server_opts sopts = {
	    .address = "127.0.0.1:0",
	    .init = blaster_init,
	    .init_arg = &f->b,
	};
	weft_connect_opts copts = {.init = client_init, .init_arg = &f->c};

	memset(f, 0, sizeof(*f));
	f->c.sink.start_paused = true;
	assert_int_equal(weft_loop_new(&f->main), 0);
	assert_int_equal(weft_loop_new(&f->client), 0);
	assert_int_equal(weft_loop_start(f->client), 0);
	assert_int_equal(weft_loop_group_new(2, &f->group), 0);
	assert_int_equal(weft_server_new(f->group, &sopts, &f->srv), 0);
	assert_int_equal(weft_connect(f->client, weft_server_address(f->srv),
	                              &copts, client_connected, &f->c),
	                 0);
	assert_int_equal(weft_test_run_until(f->main, weft_test_atomic_set,
	                                     &f->b.wrote, DEADLINE_MS),
	                 0);
	assert_int_equal(weft_test_run_until(f->main, weft_test_atomic_set,
	                                     &f->c.connected, DEADLINE_MS),
	                 0);
	assert_int_equal(atomic_load(&f->c.connected), 1);
}

static void
shutdown_group(fixture *f, uint64_t timeout_ms, bool resume)
{
	size_t i;

	/* Start the shutdown everywhere, then let the client read. */
	for (i = 0; i < weft_loop_group_size(f->group); i++)
		weft_loop_shutdown(weft_loop_group_at(f->group, i), timeout_ms);
	if (resume)
		assert_int_equal(
		    weft_loop_post(f->client, resume_reading, &f->c), 0);
	weft_loop_group_shutdown(f->group, timeout_ms);
}

static void
finish_server(fixture *f)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	/* The shutdown hook closed the listener. */
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sin.sin_port = htons(weft_server_port(f->srv));
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), -1);
	assert_int_equal(errno, ECONNREFUSED);
	close(fd);
	/* The loop has stopped: the close runs when the group is freed. */
	weft_server_close(f->srv, echo_server_closed, &f->closed);
	weft_loop_group_free(f->group);
	assert_int_equal(atomic_load(&f->closed), 1);
}

static void
finish(fixture *f)
{
	weft_loop_free(f->client);
	weft_loop_free(f->main);
}

static void
test_shutdown_delivers_pending_writes(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	uint64_t start_ns;

	(void)state;
	start(f);
	start_ns = weft_now_ns();
	shutdown_group(f, 10000, true);
	assert_true(weft_now_ns() - start_ns < 10000ull * 1000000u);
	assert_int_equal(atomic_load(&f->b.write_cbs), 1);
	assert_int_equal(atomic_load(&f->b.write_status), 0);
	/* The server closed after the data: the client reads it all, then
	 * sees EOF, while the stopped group still exists (a stopping loop
	 * runs libevent's finalizers, which close the sockets). */
	assert_int_equal(weft_test_run_until(f->main, weft_test_atomic_set,
	                                     &f->c.inactive, DEADLINE_MS),
	                 0);
	finish_server(f);
	finish(f);
	assert_int_equal(f->c.sink.bytes, PAYLOAD_BYTES);
	assert_int_equal(f->c.sink.mismatches, 0);
	free(f);
}

static void
test_shutdown_deadline_fails_undelivered_writes_once(void **state)
{
	fixture *f = calloc(1, sizeof(*f));
	uint64_t start_ns;

	(void)state;
	start(f);
	start_ns = weft_now_ns();
	shutdown_group(f, 300, false);
	assert_true(weft_now_ns() - start_ns >= 250ull * 1000000u);
	assert_true(weft_now_ns() - start_ns < 5000ull * 1000000u);
	assert_int_equal(atomic_load(&f->b.write_cbs), 1);
	assert_int_equal(atomic_load(&f->b.write_status), WEFT_ECLOSED);
	finish_server(f);
	finish(f);
	assert_true(f->c.sink.bytes < PAYLOAD_BYTES);
	assert_int_equal(atomic_load(&f->b.write_cbs), 1);
	free(f);
}

static void
on_pending_connect(weft_channel *ch, int status, void *arg)
{
	(void)ch;
	atomic_store((atomic_int *)arg + 1, status);
	atomic_fetch_add((atomic_int *)arg, 1);
}

/* A connect still pending when its loop shuts down ends with ESHUTDOWN,
 * once. */
static void
test_shutdown_ends_pending_connects(void **state)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	socklen_t len = sizeof(sin);
	atomic_int result[2] = {0, 0}; /* calls, status */
	weft_connect_opts opts = {.timeout_ms = 60000};
	weft_loop_group *group;
	int lfd, fillers[2], i;
	char address[64];
	weft_loop *main;

	(void)state;
	/* A listener with a full accept queue: the connect never ends. */
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(lfd, 0), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&sin, &len), 0);
	for (i = 0; i < 2; i++) {
		fillers[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		connect(fillers[i], (struct sockaddr *)&sin, sizeof(sin));
	}
	snprintf(address, sizeof(address), "127.0.0.1:%u", ntohs(sin.sin_port));
	assert_int_equal(weft_loop_new(&main), 0);
	assert_int_equal(weft_loop_group_new(1, &group), 0);
	assert_int_equal(weft_connect(weft_loop_group_at(group, 0), address,
	                              &opts, on_pending_connect, result),
	                 0);
	/* Let the connect get going, then shut down. */
	weft_test_run_until(main, weft_test_atomic_set, &result[0], 100);
	assert_int_equal(atomic_load(&result[0]), 0);
	weft_loop_group_shutdown(group, 1000);
	assert_int_equal(atomic_load(&result[0]), 1);
	assert_int_equal(atomic_load(&result[1]), WEFT_ESHUTDOWN);
	weft_loop_group_free(group);
	assert_int_equal(atomic_load(&result[0]), 1);
	weft_loop_free(main);
	close(fillers[0]);
	close(fillers[1]);
	close(lfd);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_shutdown_delivers_pending_writes),
	    cmocka_unit_test(
	        test_shutdown_deadline_fails_undelivered_writes_once),
	    cmocka_unit_test(test_shutdown_ends_pending_connects),
	};

	if (argc > 1)
		cmocka_set_test_filter(argv[1]);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
