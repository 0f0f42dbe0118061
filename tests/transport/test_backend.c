/* SPDX-License-Identifier: MIT */
/*
 * test_backend.c: the transport backends (transport/backend.c,
 * tls_backend.c). Each backend listens, accepts and dials through the same
 * operations; servers and clients reach the socket and the TLS backend
 * through one path, the operations of the backend they were given, and
 * nothing else.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <weft/stream.h>

#include "support/wait.h"
#include "tls_test.h"
#include "transport_int.h"

static weft_loop *loop;
static tt_pki pki;
static weft_tls_ctx *server_tls, *client_tls;

static int
setup(void **state)
{
	(void)state;
	return tt_setup(&loop, &pki, &server_tls, &client_tls);
}

static int
teardown(void **state)
{
	(void)state;
	tt_teardown(loop, &pki, server_tls, client_tls);
	return 0;
}

/* ---- The operations, called directly --------------------------------------
 */

/* What a backend's accept or dial gave. */
struct made {
	bool done;
	int status;
	weft_stream *s;
};

static void
on_made(weft_stream *s, int status, const char *why, void *arg)
{
	struct made *m = arg;

	(void)why;
	m->done = true;
	m->status = status;
	m->s = s;
}

static bool
both_made(void *arg)
{
	struct made *m = arg;

	return m[0].done && m[1].done;
}

/* connect_to opens a TCP socket to the listener's port on 127.0.0.1 and
 * makes it non-blocking once connected. */
static evutil_socket_t
connect_to(const weft__listener *l)
{
	struct sockaddr_in sin = {.sin_family = AF_INET,
	                          .sin_port = htons(l->port),
	                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	evutil_socket_t fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
	return fd;
}

static evutil_socket_t
accept_from(const weft__listener *l)
{
	evutil_socket_t fd;

	do
		fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	while (fd < 0 && errno == EINTR);
	assert_true(fd >= 0);
	return fd;
}

/*
 * run_backend listens with server's backend, connects a socket to it,
 * accepts it, and makes the streams of both ends: the accepted one with
 * server's accept, the connected one with client's dial. Checks that both
 * are of kind and closes them.
 */
static void
run_backend(const weft__backend *server, const weft__backend *client,
            const char *kind)
{
	struct made m[2] = {{0}, {0}};
	weft__listener l;
	evutil_socket_t afd, cfd;
	weft_stream *dialing;
	int i;

	assert_int_equal(server->ops->listen(server, "127.0.0.1:0", 16, &l), 0);
	assert_true(l.port != 0);
	assert_int_equal(strncmp(l.address, "127.0.0.1:", 10), 0);
	cfd = connect_to(&l);
	afd = accept_from(&l);
	server->ops->accept(server, loop, afd, "client", on_made, &m[0]);
	dialing =
	    client->ops->dial(client, loop, cfd, "server", on_made, &m[1]);
	/* A handle exactly while the dial is still being set up. */
	assert_true((dialing == NULL) == m[1].done);
	/* A plaintext client speaks first, as a sniffing server waits for. */
	if (m[1].done && m[1].status == 0)
		assert_int_equal(write(cfd, "x", 1), 1);
	assert_int_equal(
	    weft_test_run_until(loop, both_made, m, TT_DEADLINE_MS), 0);
	for (i = 0; i < 2; i++) {
		assert_int_equal(m[i].status, 0);
		assert_non_null(m[i].s);
		assert_string_equal(m[i].s->ops->name, kind);
		m[i].s->ops->close(m[i].s, false);
	}
	close(l.fd);
}

static void
test_socket_backend_listens_accepts_and_dials(void **state)
{
	weft__backend b;

	(void)state;
	weft__backend_init(&b, NULL);
	assert_ptr_equal(b.ops, &weft__socket_backend);
	run_backend(&b, &b, "socket");
}

static void
test_tls_backend_listens_accepts_and_dials_through_the_same_ops(void **state)
{
	weft__backend server, client;

	(void)state;
	weft__backend_init(&server, server_tls);
	weft__backend_init(&client, client_tls);
	assert_ptr_equal(server.ops, &weft__tls_backend);
	server.timeout_ms = TT_DEADLINE_MS;
	client.timeout_ms = TT_DEADLINE_MS;
	client.server_name = "node-a";
	run_backend(&server, &client, "tls");
}

static void
test_tls_backend_gives_a_plaintext_client_a_socket_stream(void **state)
{
	weft__backend server, client;

	(void)state;
	weft__backend_init(&server, server_tls);
	server.tls_mode = WEFT_TLS_MODE_OPTIONAL;
	server.timeout_ms = TT_DEADLINE_MS;
	weft__backend_init(&client, NULL);
	run_backend(&server, &client, "socket");
}

/* read_to_end reads fd (blocking) until the end of the stream: 0, or -1
 * on an error or after 1000 reads. */
static int
read_to_end(evutil_socket_t fd)
{
	char buf[4096];
	ssize_t n;
	int i;

	for (i = 0; i < 1000; i++) {
		if ((n = read(fd, buf, sizeof(buf))) == 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -1;
	}
	return -1;
}

static void
test_a_cancelled_tls_dial_never_calls_back(void **state)
{
	struct made m = {0};
	weft__backend server, client;
	weft__listener l;
	evutil_socket_t afd, cfd;
	weft_stream *dialing;

	(void)state;
	weft__backend_init(&server, server_tls);
	weft__backend_init(&client, client_tls);
	client.timeout_ms = TT_DEADLINE_MS;
	assert_int_equal(server.ops->listen(&server, "127.0.0.1:0", 16, &l), 0);
	cfd = connect_to(&l);
	afd = accept_from(&l);
	/* Nobody answers on afd: the handshake waits until cancelled. */
	dialing = client.ops->dial(&client, loop, cfd, "server", on_made, &m);
	assert_non_null(dialing);
	client.ops->cancel(dialing);
	assert_false(m.done);
	/* The socket went with it: the peer reads the ClientHello, then the
	 * end of the stream. */
	assert_int_equal(fcntl(afd, F_SETFL, 0), 0);
	assert_int_equal(read_to_end(afd), 0);
	close(afd);
	close(l.fd);
}

/* ---- Servers and clients over a backend of the test's own -----------------
 */

/* A backend that counts its calls and hands each one to the backend its
 * options ask for. */
static const weft__backend_ops *dial_inner;
static int listens, accepts, dials;

static const weft__backend_ops *
inner(const weft__backend *b)
{
	weft__backend real;

	weft__backend_init(&real, b->tls);
	return real.ops;
}

static int
counting_listen(const weft__backend *b, const char *address, int backlog,
                weft__listener *out)
{
	listens++;
	return inner(b)->listen(b, address, backlog, out);
}

static void
counting_accept(const weft__backend *b, weft_loop *lp, evutil_socket_t fd,
                const char *peer, weft__stream_cb cb, void *arg)
{
	accepts++;
	inner(b)->accept(b, lp, fd, peer, cb, arg);
}

static weft_stream *
counting_dial(const weft__backend *b, weft_loop *lp, evutil_socket_t fd,
              const char *peer, weft__stream_cb cb, void *arg)
{
	dials++;
	dial_inner = inner(b);
	return dial_inner->dial(b, lp, fd, peer, cb, arg);
}

static void
counting_cancel(weft_stream *dialing)
{
	dial_inner->cancel(dialing);
}

static const weft__backend_ops counting = {
    .name = "counting",
    .listen = counting_listen,
    .accept = counting_accept,
    .dial = counting_dial,
    .cancel = counting_cancel,
};

/* A client that keeps what it reads. */
struct reader {
	weft_channel *ch;
	int status;
	bool connected;
	struct evbuffer *in;
};

static void
reader_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct reader *r = weft_ctx_state(ctx);

	(void)type;
	evbuffer_add_buffer(r->in, msg);
}

static const weft_handler reader_handler = {.read = reader_read};

static int
reader_init(weft_channel *ch, void *arg)
{
	return weft_pipeline_add_last(ch, "reader", &reader_handler, arg);
}

static void
on_connect(weft_channel *ch, int status, void *arg)
{
	struct reader *r = arg;

	r->connected = true;
	r->status = status;
	if (ch != NULL)
		weft_channel_ref(ch);
	r->ch = ch;
}

static bool
connected(void *arg)
{
	return ((struct reader *)arg)->connected;
}

static bool
echoed(void *arg)
{
	return evbuffer_get_length(((struct reader *)arg)->in) >= 5;
}

static bool
closed(void *arg)
{
	return *(bool *)arg;
}

static void
on_server_closed(weft_server *srv, void *arg)
{
	(void)srv;
	*(bool *)arg = true;
}

/*
 * echo_over runs an echo server made with srv_tls (NULL: plaintext) in
 * mode and a client with tls, both over the counting backend, and checks
 * that the bytes come back, that each end went through its operations
 * once and that the client's channel is of kind.
 */
static void
echo_over(weft_tls_ctx *srv_tls, int mode, weft_tls_ctx *tls, const char *kind)
{
	weft_server_opts so = {.address = "127.0.0.1:0",
	                       .init = tt_echo_init,
	                       .tls = srv_tls,
	                       .tls_mode = mode};
	weft_connect_opts co = {.init = reader_init, .tls = tls};
	struct reader r = {.in = evbuffer_new()};
	struct evbuffer *out = evbuffer_new();
	char address[WEFT_ADDRESS_MAX];
	weft_server *srv;
	bool srv_closed = false;

	listens = accepts = dials = 0;
	co.init_arg = &r;
	co.server_name = "node-a";
	assert_int_equal(weft__server_new(loop, NULL, &so, &counting, &srv), 0);
	snprintf(address, sizeof(address), "%s", weft_server_address(srv));
	assert_int_equal(weft__connect_start(loop, address, &co, &counting,
	                                     on_connect, &r, NULL),
	                 0);
	assert_int_equal(
	    weft_test_run_until(loop, connected, &r, TT_DEADLINE_MS), 0);
	assert_int_equal(r.status, 0);
	assert_string_equal(weft_channel_stream(r.ch)->ops->name, kind);
	evbuffer_add(out, "hello", 5);
	assert_int_equal(weft_channel_write(r.ch, out, NULL, NULL), 0);
	evbuffer_free(out);
	assert_int_equal(weft_test_run_until(loop, echoed, &r, TT_DEADLINE_MS),
	                 0);
	assert_int_equal(evbuffer_get_length(r.in), 5);
	assert_memory_equal(evbuffer_pullup(r.in, 5), "hello", 5);
	assert_int_equal(listens, 1);
	assert_int_equal(accepts, 1);
	assert_int_equal(dials, 1);
	weft_channel_close(r.ch);
	weft_channel_unref(r.ch);
	weft_server_close(srv, on_server_closed, &srv_closed);
	assert_int_equal(
	    weft_test_run_until(loop, closed, &srv_closed, TT_DEADLINE_MS), 0);
	evbuffer_free(r.in);
}

static void
test_plain_and_tls_servers_and_clients_take_one_path(void **state)
{
	(void)state;
	echo_over(NULL, WEFT_TLS_MODE_REQUIRED, NULL, "socket");
	echo_over(server_tls, WEFT_TLS_MODE_REQUIRED, client_tls, "tls");
	/* Optional mode: a plaintext client through the TLS backend. */
	echo_over(server_tls, WEFT_TLS_MODE_OPTIONAL, NULL, "socket");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_socket_backend_listens_accepts_and_dials),
	    cmocka_unit_test(
	        test_tls_backend_listens_accepts_and_dials_through_the_same_ops),
	    cmocka_unit_test(
	        test_tls_backend_gives_a_plaintext_client_a_socket_stream),
	    cmocka_unit_test(test_a_cancelled_tls_dial_never_calls_back),
	    cmocka_unit_test(
	        test_plain_and_tls_servers_and_clients_take_one_path),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
