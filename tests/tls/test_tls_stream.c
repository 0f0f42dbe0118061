/* SPDX-License-Identifier: MIT */
/*
 * test_tls_stream.c: weft's TLS stream against peers that do what weft
 * never does itself: a client driven through memory BIOs that splits a
 * record across the socket at every byte, peers that send a KeyUpdate (to
 * a weft server and to a weft client), a KeyUpdate that arrives while the
 * socket is full (the answer cannot be written at once), a peer that resets the
 * connection under a write with SIGPIPE at its default, and a raw server that
 * measures the records weft sends. The raw peers are plain blocking OpenSSL, on
 * a thread of their own.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <openssl/ssl.h>
#include <weft/stream.h>

#include "support/wait.h"
#include "tls_int.h"
#include "tls_test.h"

/* TLS 1.3 with AES-GCM: a record's header, content type and tag. */
#define RECORD_OVERHEAD (5 + 1 + 16)

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

/* all_gone: every channel the server made has gone inactive. */
static bool
all_gone(void *arg)
{
	const tt_server *s = arg;

	return s->inactive >= s->channels;
}

/* server_stop_when_idle waits for the server's channels to see their
 * peers leave before it stops the server: their handler writes to *s,
 * which lives on the test's stack. */
static void
server_stop_when_idle(tt_server *s)
{
	assert_int_equal(weft_test_run_until(loop, all_gone, s, 5000), 0);
	tt_server_stop(loop, s);
}

/* ---- Pattern I/O over a blocking SSL ----------------------------------- */

static int
ssl_send_pattern(SSL *ssl, uint64_t off, size_t len)
{
	unsigned char buf[16384];
	size_t n, i, done;

	while (len > 0) {
		n = len < sizeof(buf) ? len : sizeof(buf);
		for (i = 0; i < n; i++)
			buf[i] = tt_pattern(off + i);
		if (SSL_write_ex(ssl, buf, n, &done) != 1 || done != n)
			return -1;
		off += n;
		len -= n;
	}
	return 0;
}

static int
ssl_check_pattern(SSL *ssl, uint64_t off, size_t len)
{
	unsigned char buf[16384];
	size_t n, i;

	while (len > 0) {
		if (SSL_read_ex(ssl, buf, len < sizeof(buf) ? len : sizeof(buf),
		                &n) != 1)
			return -1;
		for (i = 0; i < n; i++)
			if (buf[i] != tt_pattern(off + i))
				return -2;
		off += n;
		len -= n;
	}
	return 0;
}

/* ---- A raw peer on a thread -------------------------------------------- */

typedef struct peer peer;
struct peer {
	SSL *ssl;
	int fd;
	int listen_fd; /* for a server peer */
	pthread_t thread;
	int (*script)(peer *p);
	atomic_bool done;
	int rv; /* the script's result: 0 or the step that failed */
	/* What the message callback saw coming in. */
	int key_updates;
	size_t records;
	size_t app_bytes;
	size_t biggest_early; /* largest record in the first 64 KiB */
	size_t biggest;
	size_t n; /* the script's size */
};

static void
on_msg(int write_p, int version, int type, const void *buf, size_t len,
       SSL *ssl, void *arg)
{
	const unsigned char *b = buf;
	peer *p = arg;
	size_t size;

	(void)version;
	(void)ssl;
	if (write_p)
		return;
	if (type == SSL3_RT_HANDSHAKE && len > 0 && b[0] == SSL3_MT_KEY_UPDATE)
		p->key_updates++;
	/* Record headers; application data travels as type 23. */
	if (type == SSL3_RT_HEADER && len >= 5 && b[0] == 23) {
		size = (size_t)b[3] << 8 | b[4];
		p->records++;
		if (p->app_bytes < (64u << 10) && size > p->biggest_early)
			p->biggest_early = size;
		if (size > p->biggest)
			p->biggest = size;
		p->app_bytes += size - RECORD_OVERHEAD + 5;
	}
}

static void *
peer_main(void *arg)
{
	peer *p = arg;

	if (p->listen_fd >= 0) {
		p->fd = accept(p->listen_fd, NULL, NULL);
		close(p->listen_fd);
		p->listen_fd = -1;
		SSL_set_accept_state(p->ssl);
	} else {
		SSL_set_connect_state(p->ssl);
	}
	SSL_set_fd(p->ssl, p->fd);
	SSL_set_msg_callback(p->ssl, on_msg);
	SSL_set_msg_callback_arg(p->ssl, p);
	if (SSL_do_handshake(p->ssl) != 1)
		p->rv = 100;
	else
		p->rv = p->script(p);
	atomic_store(&p->done, true);
	return NULL;
}

static bool
peer_done(void *arg)
{
	return atomic_load(&((peer *)arg)->done);
}

/* peer_start runs script as a client of port (port != 0) over fd (-1:
 * connect one) or as a server listening on *port_out. */
static void
peer_start(peer *p, uint16_t port, int fd, int (*script)(peer *),
           uint16_t *port_out)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	socklen_t len = sizeof(sin);
	bool server = port == 0;

	p->script = script;
	p->fd = fd;
	p->listen_fd = -1;
	atomic_init(&p->done, false);
	assert_int_equal(weft__tls_ssl_new(server ? server_tls : client_tls,
	                                   server, server ? NULL : "node-a",
	                                   &p->ssl),
	                 0);
	if (server) {
		sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		p->listen_fd = socket(AF_INET, SOCK_STREAM, 0);
		assert_int_equal(
		    bind(p->listen_fd, (struct sockaddr *)&sin, sizeof(sin)),
		    0);
		assert_int_equal(listen(p->listen_fd, 1), 0);
		assert_int_equal(
		    getsockname(p->listen_fd, (struct sockaddr *)&sin, &len),
		    0);
		*port_out = ntohs(sin.sin_port);
	} else if (p->fd < 0) {
		p->fd = tt_raw_connect(port);
	}
	assert_int_equal(pthread_create(&p->thread, NULL, peer_main, p), 0);
}

static void
peer_finish(peer *p)
{
	assert_int_equal(
	    weft_test_run_until(loop, peer_done, p, TT_DEADLINE_MS), 0);
	pthread_join(p->thread, NULL);
	SSL_free(p->ssl);
	if (p->fd >= 0)
		close(p->fd);
}

/* ---- A record split across reads at every byte ------------------------- */

/* A client of ours, through memory BIOs over a blocking socket. */
typedef struct mem_client {
	SSL *ssl;
	BIO *in, *out;
	int fd;
	unsigned char got[4096];
	size_t ngot;
	int ticks;
} mem_client;

static void
mc_flush(mem_client *m)
{
	unsigned char buf[4096];
	int n;

	while ((n = BIO_read(m->out, buf, sizeof(buf))) > 0)
		assert_int_equal(send(m->fd, buf, (size_t)n, 0), n);
}

/* mc_pump feeds what the socket holds to the SSL and decrypts it. */
static void
mc_pump(mem_client *m)
{
	unsigned char buf[4096];
	size_t n;
	ssize_t r;

	while ((r = recv(m->fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		BIO_write(m->in, buf, (int)r);
	while (m->ngot < sizeof(m->got) &&
	       SSL_read_ex(m->ssl, m->got + m->ngot, sizeof(m->got) - m->ngot,
	                   &n) == 1)
		m->ngot += n;
	mc_flush(m);
}

static bool
mc_handshake(void *arg)
{
	mem_client *m = arg;
	int r;

	mc_pump(m);
	r = SSL_do_handshake(m->ssl);
	mc_flush(m);
	return r == 1;
}

/* mc_connect connects m to a weft server on port, through memory BIOs,
 * and runs the loop until the handshake is done. */
static void
mc_connect(mem_client *m, uint16_t port)
{
	assert_int_equal(
	    weft__tls_ssl_new(client_tls, false, "node-a", &m->ssl), 0);
	m->in = BIO_new(BIO_s_mem());
	m->out = BIO_new(BIO_s_mem());
	SSL_set_bio(m->ssl, m->in, m->out);
	SSL_set_connect_state(m->ssl);
	m->fd = tt_raw_connect(port);
	assert_int_equal(weft_test_run_until(loop, mc_handshake, m, 5000), 0);
}

static bool
mc_two_ticks(void *arg)
{
	return ++((mem_client *)arg)->ticks > 2;
}

struct mc_wait {
	mem_client *m;
	size_t n;
};

static bool
mc_received(void *arg)
{
	struct mc_wait *w = arg;

	mc_pump(w->m);
	return w->m->ngot >= w->n;
}

/* mc_record encrypts len bytes of the pattern from off: one record, whose
 * bytes come back in rec. */
static size_t
mc_record(mem_client *m, uint64_t off, size_t len, unsigned char *rec,
          size_t cap)
{
	unsigned char msg[512];
	size_t i, n;
	int got;

	for (i = 0; i < len; i++)
		msg[i] = tt_pattern(off + i);
	assert_int_equal(SSL_write_ex(m->ssl, msg, len, &n), 1);
	got = BIO_read(m->out, rec, (int)cap);
	assert_int_equal(got, (int)(len + RECORD_OVERHEAD));
	return (size_t)got;
}

static void
mc_expect_echo(mem_client *m, uint64_t off, size_t len)
{
	struct mc_wait w = {m, len};
	size_t i;

	assert_int_equal(weft_test_run_until(loop, mc_received, &w, 5000), 0);
	assert_int_equal(m->ngot, len);
	for (i = 0; i < len; i++)
		assert_int_equal(m->got[i], tt_pattern(off + i));
	m->ngot = 0;
}

static void
test_a_record_split_at_every_byte_arrives_whole(void **state)
{
	const size_t len = 200;
	unsigned char rec[1024];
	mem_client m = {0};
	uint64_t off = 0;
	size_t k, n, i;
	tt_server s;

	(void)state;
	assert_int_equal(
	    tt_server_start(loop, server_tls, WEFT_TLS_MODE_REQUIRED, &s), 0);
	mc_connect(&m, s.port);

	/* Two pieces, split at every byte of the record. */
	for (k = 1; k < len + RECORD_OVERHEAD; k++) {
		n = mc_record(&m, off, len, rec, sizeof(rec));
		assert_int_equal(send(m.fd, rec, k, 0), (ssize_t)k);
		m.ticks = 0;
		assert_int_equal(
		    weft_test_run_until(loop, mc_two_ticks, &m, 5000), 0);
		assert_int_equal(send(m.fd, rec + k, n - k, 0),
		                 (ssize_t)(n - k));
		mc_expect_echo(&m, off, len);
		off += len;
	}
	/* One byte at a time, the server reading after each. */
	n = mc_record(&m, off, len, rec, sizeof(rec));
	for (i = 0; i < n; i++) {
		assert_int_equal(send(m.fd, rec + i, 1, 0), 1);
		m.ticks = 0;
		assert_int_equal(
		    weft_test_run_until(loop, mc_two_ticks, &m, 5000), 0);
	}
	mc_expect_echo(&m, off, len);
	assert_int_equal(s.error, 0);
	assert_int_equal(s.bytes, off + len);

	SSL_free(m.ssl);
	close(m.fd);
	server_stop_when_idle(&s);
}

/* ---- A flood of forged records ------------------------------------------ */

/* GLOBAL (test): lines the TLS stream logged about a failed record, and
 * the last one, written by the single test thread that runs the loop. */
static int record_lines;
static char last_record_line[512];

static void
count_record_lines(enum weft_log_level level, const char *line, void *arg)
{
	(void)arg;
	if (level >= WEFT_LOG_WARN && strstr(line, ": TLS: ") != NULL) {
		record_lines++;
		snprintf(last_record_line, sizeof(last_record_line), "%s",
		         line);
	}
}

/* closed_count: the server's channels that went, up to want. */
struct closed_count {
	const tt_server *s;
	int want;
};

static bool
closed_count(void *arg)
{
	const struct closed_count *c = arg;

	return c->s->inactive >= c->want;
}

/* forge_one connects, finishes the handshake and sends one record with a
 * bit of its tag flipped; returns once the server closed the channel. */
static void
forge_one(tt_server *s)
{
	struct closed_count gone = {s, s->inactive + 1};
	unsigned char rec[1024];
	mem_client m = {0};
	size_t n;

	mc_connect(&m, s->port);
	n = mc_record(&m, 0, 100, rec, sizeof(rec));
	rec[n - 3] ^= 0x10;
	assert_int_equal(send(m.fd, rec, n, 0), (ssize_t)n);
	assert_int_equal(weft_test_run_until(loop, closed_count, &gone, 5000),
	                 0);
	SSL_free(m.ssl);
	close(m.fd);
}

/*
 * Twenty connections finish their handshake and each sends a record with
 * one bit flipped. Each is closed with WEFT_ETLS, but inside one peer
 * interval the node logs no line for them after the first: a peer that
 * opens connections only to send garbage cannot flood the log. The next
 * line after the interval says how many were dropped.
 */
static void
test_forged_records_close_each_connection_and_log_at_a_rate(void **state)
{
	uint64_t interval = weft_log_get_peer_interval();
	tt_server s;

	(void)state;
	assert_int_equal(
	    tt_server_start(loop, server_tls, WEFT_TLS_MODE_REQUIRED, &s), 0);
	record_lines = 0;
	weft_log_set_sink(count_record_lines, NULL);
	weft_log_set_peer_interval(0);
	forge_one(&s);
	assert_int_equal(record_lines, 1);
	weft_log_set_peer_interval(3600 * 1000); /* longer than any run */
	for (int i = 0; i < 20; i++)
		forge_one(&s);
	assert_int_equal(s.channels, 21);
	assert_int_equal(s.error, WEFT_ETLS);
	assert_int_equal(record_lines, 1);

	weft_log_set_peer_interval(0); /* the interval is over */
	forge_one(&s);
	assert_int_equal(record_lines, 2);
	assert_true(strstr(last_record_line, "bad record mac") ||
	            strstr(last_record_line, "decryption failed"));
	assert_non_null(strstr(last_record_line, "and 20 more like it"));
	weft_log_set_peer_interval(interval);
	weft_log_set_sink(NULL, NULL);
	server_stop_when_idle(&s);
}

/* ---- KeyUpdate ---------------------------------------------------------- */

#define KU_BYTES (300u << 10)

/* Against a weft echo server: data, a KeyUpdate asking for one back, more
 * data under the new keys. */
static int
client_key_update_script(peer *p)
{
	if (ssl_send_pattern(p->ssl, 0, KU_BYTES) != 0 ||
	    ssl_check_pattern(p->ssl, 0, KU_BYTES) != 0)
		return 1;
	if (SSL_key_update(p->ssl, SSL_KEY_UPDATE_REQUESTED) != 1)
		return 2;
	if (ssl_send_pattern(p->ssl, KU_BYTES, KU_BYTES) != 0 ||
	    ssl_check_pattern(p->ssl, KU_BYTES, KU_BYTES) != 0)
		return 3;
	if (p->key_updates < 1)
		return 4; /* the server never answered */
	SSL_shutdown(p->ssl);
	return 0;
}

static void
test_a_key_update_from_the_client_is_answered(void **state)
{
	tt_server s;
	peer p = {0};

	(void)state;
	assert_int_equal(
	    tt_server_start(loop, server_tls, WEFT_TLS_MODE_REQUIRED, &s), 0);
	peer_start(&p, s.port, -1, client_key_update_script, NULL);
	peer_finish(&p);
	assert_int_equal(p.rv, 0);
	assert_int_equal(s.error, 0);
	assert_int_equal(s.bytes, 2 * KU_BYTES);
	server_stop_when_idle(&s);
}

/* A server that reads data from a weft client, sends a KeyUpdate asking
 * for one back with data, and reads more data under the new keys. */
static int
server_key_update_script(peer *p)
{
	if (ssl_check_pattern(p->ssl, 0, KU_BYTES) != 0)
		return 1;
	if (SSL_key_update(p->ssl, SSL_KEY_UPDATE_REQUESTED) != 1 ||
	    ssl_send_pattern(p->ssl, 0, KU_BYTES) != 0)
		return 2;
	if (ssl_check_pattern(p->ssl, KU_BYTES, KU_BYTES) != 0)
		return 3;
	if (p->key_updates < 1)
		return 4; /* the client never answered */
	return 0;
}

static void
test_a_key_update_from_the_server_is_answered(void **state)
{
	uint16_t port;
	tt_client c;
	peer p = {0};

	(void)state;
	peer_start(&p, 0, -1, server_key_update_script, &port);
	assert_int_equal(
	    tt_client_connect(loop, port, client_tls, "node-a", &c), 0);
	assert_int_equal(tt_send(&c, 0, KU_BYTES), 0);
	assert_int_equal(tt_run_bytes(loop, &c, KU_BYTES), 0);
	assert_true(tt_check(&c, KU_BYTES));
	assert_int_equal(tt_send(&c, KU_BYTES, KU_BYTES), 0);
	peer_finish(&p);
	assert_int_equal(p.rv, 0);
	assert_int_equal(c.error, 0);
	tt_client_free(loop, &c);
}

/* ---- SSL_ERROR_WANT_WRITE during a read --------------------------------- */

#define FILL_BYTES (12u << 20)

/*
 * The client writes far more than the sockets hold without reading, so
 * the echo server's socket is full and a record of its is half written;
 * then it asks for a KeyUpdate, which the server reads but cannot answer
 * until the client drains everything. (OpenSSL 3 queues the answer behind
 * the half-written record instead of failing the read with WANT_WRITE;
 * either way the stream must resume and the answer arrive.)
 */
static int
fill_then_key_update_script(peer *p)
{
	if (ssl_send_pattern(p->ssl, 0, FILL_BYTES) != 0)
		return 1;
	if (SSL_key_update(p->ssl, SSL_KEY_UPDATE_REQUESTED) != 1 ||
	    ssl_send_pattern(p->ssl, FILL_BYTES, 1000) != 0)
		return 2;
	if (ssl_check_pattern(p->ssl, 0, FILL_BYTES + 1000) != 0)
		return 3;
	if (p->key_updates < 1)
		return 4;
	SSL_shutdown(p->ssl);
	return 0;
}

static void
test_a_key_update_read_while_the_socket_is_full_is_answered(void **state)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	int small = 64 << 10, fd;
	tt_server s;
	peer p = {0};

	(void)state;
	assert_int_equal(
	    tt_server_start(loop, server_tls, WEFT_TLS_MODE_REQUIRED, &s), 0);
	/* A small receive buffer, set before connecting. */
	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(
	    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
	sin.sin_port = htons(s.port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	peer_start(&p, s.port, fd, fill_then_key_update_script, NULL);
	peer_finish(&p);
	assert_int_equal(p.rv, 0);
	assert_int_equal(s.error, 0);
	assert_int_equal(s.bytes, FILL_BYTES + 1000);
	server_stop_when_idle(&s);
}

/* ---- Big transfers ------------------------------------------------------ */

static void
test_megabytes_both_ways_in_mixed_writes_come_back_exact(void **state)
{
	const uint64_t total = 24u << 20;
	uint64_t off = 0, i = 0;
	tt_server s;
	tt_client c;
	size_t n;

	(void)state;
	assert_int_equal(
	    tt_server_start(loop, server_tls, WEFT_TLS_MODE_REQUIRED, &s), 0);
	assert_int_equal(
	    tt_client_connect(loop, s.port, client_tls, "node-a", &c), 0);
	/* Small writes coalesce into records, big ones are encrypted where
	 * they lie; both mixed, in bursts the socket cannot take at once. */
	while (off < total) {
		n = (i++ % 3 == 0) ? 1 + (size_t)(off * 31 % 700)
		                   : 1 + (size_t)(off * 7 % (96u << 10));
		if (n > total - off)
			n = (size_t)(total - off);
		assert_int_equal(tt_send(&c, off, n), 0);
		off += n;
		if (i % 64 == 0)
			assert_int_equal(tt_run_bytes(loop, &c, off / 2), 0);
	}
	assert_int_equal(tt_run_bytes(loop, &c, total), 0);
	assert_true(tt_check(&c, total));
	assert_int_equal(s.bytes, total);
	tt_client_free(loop, &c);
	server_stop_when_idle(&s);
}

/* ---- Record sizes ------------------------------------------------------- */

#define SIZED_BYTES (512u << 10)

static int
measure_records_script(peer *p)
{
	return ssl_check_pattern(p->ssl, 0, p->n) != 0;
}

static void
test_records_start_small_then_grow_to_full_size(void **state)
{
	uint16_t port;
	tt_client c;
	peer p = {.n = SIZED_BYTES};

	(void)state;
	peer_start(&p, 0, -1, measure_records_script, &port);
	assert_int_equal(
	    tt_client_connect(loop, port, client_tls, "node-a", &c), 0);
	/* One flush of half a megabyte on a connection that never wrote. */
	assert_int_equal(tt_send(&c, 0, SIZED_BYTES), 0);
	peer_finish(&p);
	assert_int_equal(p.rv, 0);
	/* The first 64 KiB in records that fit one segment... */
	assert_true(p.biggest_early > 0);
	assert_true(p.biggest_early <= 1369 + RECORD_OVERHEAD - 5);
	/* ...then full records. */
	assert_int_equal(p.biggest, 16384 + RECORD_OVERHEAD - 5);
	assert_true(p.records < SIZED_BYTES / 16384 + 64);
	tt_client_free(loop, &c);
}

/* ---- A reset under a write ---------------------------------------------- */

/* run_flag_for runs the loop until *flag or ms passed. */
static void
run_flag_for(const bool *flag, uint64_t ms)
{
	(void)weft_test_run_until(loop, weft_test_flag_set, (void *)flag, ms);
}

static int
reset_script(peer *p)
{
	struct linger lg = {.l_onoff = 1, .l_linger = 0};
	unsigned char byte;
	size_t n;

	/* Once the client wrote, reset: close with linger 0. */
	if (SSL_read_ex(p->ssl, &byte, 1, &n) != 1)
		return 1;
	setsockopt(p->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	close(p->fd);
	p->fd = -1;
	return 0;
}

static void
test_a_peer_reset_under_a_write_is_an_error_not_sigpipe(void **state)
{
	uint16_t port;
	tt_client c;
	peer p = {0};
	int i;

	(void)state;
	peer_start(&p, 0, -1, reset_script, &port);
	assert_int_equal(
	    tt_client_connect(loop, port, client_tls, "node-a", &c), 0);
	/* Nothing ignores SIGPIPE now: a write that raised it would end the
	 * test program here. */
	signal(SIGPIPE, SIG_DFL);
	assert_int_equal(tt_send(&c, 0, 100), 0);
	peer_finish(&p);
	for (i = 0; i < 200 && !c.inactive; i++) {
		if (weft_channel_is_writable(c.ch))
			tt_send(&c, 0, 256u << 10);
		run_flag_for(&c.inactive, 10);
	}
	signal(SIGPIPE, SIG_IGN);
	assert_true(c.inactive);
	tt_client_free(loop, &c);
}

/* ---- The budget: one busy connection does not keep the loop ------------- */

#define BUDGET_BYTES (16u << 10)

typedef struct budget_client {
	weft_channel *ch;
	struct evbuffer *got;
	bool connected;
	int status;
	size_t last_len; /* at the previous turn of the loop */
	size_t most_per_turn;
	size_t want;
} budget_client;

static void
budget_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	budget_client *b = weft_ctx_state(ctx);

	(void)type;
	evbuffer_add_buffer(b->got, msg);
}

static const weft_handler budget_handler = {.read = budget_read};

static int
budget_init(weft_channel *ch, void *arg)
{
	return weft_pipeline_add_last(ch, "budget", &budget_handler, arg);
}

static void
budget_connected(weft_channel *ch, int status, void *arg)
{
	budget_client *b = arg;

	b->ch = ch;
	b->status = status;
	b->connected = true;
	if (ch != NULL)
		weft_channel_ref(ch);
}

static bool
budget_connect_done(void *arg)
{
	return ((budget_client *)arg)->connected;
}

/* Called once per turn of the loop: how much arrived since the last. */
static bool
budget_turn(void *arg)
{
	budget_client *b = arg;
	size_t len = evbuffer_get_length(b->got);

	if (len - b->last_len > b->most_per_turn)
		b->most_per_turn = len - b->last_len;
	b->last_len = len;
	return len >= b->want;
}

static void
test_a_read_past_its_budget_waits_for_the_next_turn(void **state)
{
	weft_connect_opts co = {0};
	budget_client b = {0};
	struct evbuffer_iovec v;
	struct evbuffer *buf;
	char addr[64];
	tt_server s;
	size_t i;

	(void)state;
	assert_int_equal(
	    tt_server_start(loop, server_tls, WEFT_TLS_MODE_REQUIRED, &s), 0);
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", s.port);
	co.tls = client_tls;
	co.server_name = "node-a";
	co.init = budget_init;
	co.init_arg = &b;
	co.channel.max_read_bytes = BUDGET_BYTES;
	assert_non_null(b.got = evbuffer_new());
	assert_int_equal(weft_connect(loop, addr, &co, budget_connected, &b),
	                 0);
	assert_int_equal(
	    weft_test_run_until(loop, budget_connect_done, &b, 5000), 0);
	assert_int_equal(b.status, 0);
	/* 2 MiB echoed: the server's writes fill the client's socket and
	 * OpenSSL's read-ahead buffer far past the client's budget. */
	b.want = 2u << 20;
	assert_non_null(buf = evbuffer_new());
	assert_int_equal(evbuffer_reserve_space(buf, (ev_ssize_t)b.want, &v, 1),
	                 1);
	for (i = 0; i < b.want; i++)
		((uint8_t *)v.iov_base)[i] = tt_pattern(i);
	v.iov_len = b.want;
	assert_int_equal(evbuffer_commit_space(buf, &v, 1), 0);
	assert_int_equal(weft_channel_write(b.ch, buf, NULL, NULL), 0);
	evbuffer_free(buf);
	assert_int_equal(weft_loop_run_until(loop, budget_turn, &b, 20000), 0);
	/* A turn of the loop reads at most a budget from the socket event
	 * and one from the stream's own call back, never everything. */
	assert_true(b.most_per_turn <= 2 * BUDGET_BYTES);
	weft_channel_close(b.ch);
	weft_channel_unref(b.ch);
	server_stop_when_idle(&s);
	evbuffer_free(b.got);
}

/* ---- A handshake that fails at once ------------------------------------ */

struct ready {
	int calls;
	int status;
	weft_stream *stream;
};

static void
on_ready(weft_stream *s, int status, const char *why, void *arg)
{
	struct ready *r = arg;

	(void)why;
	r->calls++;
	r->status = status;
	r->stream = s;
}

static void
test_a_handshake_that_fails_at_once_ends_once_inside_the_call(void **state)
{
	struct ready r = {0};
	weft_stream *s, *h;
	int sv[2];

	(void)state;
	/* The peer is gone before the client hello: its send fails. */
	assert_int_equal(
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
	close(sv[1]);
	assert_int_equal(
	    weft__tls_stream_new(loop, client_tls, sv[0], false, "node-a", &s),
	    0);
	h = weft__tls_handshake(s, "gone", 1000, on_ready, &r);
	assert_null(h);
	assert_int_equal(r.calls, 1);
	assert_int_equal(r.status, WEFT_ETLS);
	assert_null(r.stream);
}

/* ---- kTLS --------------------------------------------------------------- */

static void
test_ktls_is_reported_as_it_runs(void **state)
{
	weft_tls_opts o = {.ktls = true};
	weft_tls_ctx *ktls;
	weft_tls_stats st;
	weft_tls_info info;
	tt_server s;
	tt_client c;

	(void)state;
	assert_int_equal(tt_ctx(&pki, "node-b", &o, &ktls), 0);
	assert_int_equal(
	    tt_server_start(loop, server_tls, WEFT_TLS_MODE_REQUIRED, &s), 0);
	assert_int_equal(tt_client_connect(loop, s.port, ktls, "node-a", &c),
	                 0);
	assert_int_equal(tt_send(&c, 0, 100000), 0);
	assert_int_equal(tt_run_bytes(loop, &c, 100000), 0);
	assert_true(tt_check(&c, 100000));
	assert_int_equal(weft_tls_get_info(c.ch, &info), 0);
	weft_tls_ctx_get_stats(ktls, &st);
	assert_int_equal(st.ktls_send, info.ktls_send ? 1 : 0);
	assert_int_equal(st.ktls_recv, info.ktls_recv ? 1 : 0);
	/* Without the kernel's tls ULP (as on most build machines) the
	 * report says so, and the path above ran in user space. */
	if (!st.ktls_offered) {
		assert_false(info.ktls_send);
		assert_false(info.ktls_recv);
	}
	tt_client_free(loop, &c);
	server_stop_when_idle(&s);
	weft_tls_ctx_unref(ktls);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_a_record_split_at_every_byte_arrives_whole),
	    cmocka_unit_test(
	        test_forged_records_close_each_connection_and_log_at_a_rate),
	    cmocka_unit_test(test_a_key_update_from_the_client_is_answered),
	    cmocka_unit_test(test_a_key_update_from_the_server_is_answered),
	    cmocka_unit_test(
	        test_a_key_update_read_while_the_socket_is_full_is_answered),
	    cmocka_unit_test(
	        test_megabytes_both_ways_in_mixed_writes_come_back_exact),
	    cmocka_unit_test(test_records_start_small_then_grow_to_full_size),
	    cmocka_unit_test(
	        test_a_peer_reset_under_a_write_is_an_error_not_sigpipe),
	    cmocka_unit_test(
	        test_a_read_past_its_budget_waits_for_the_next_turn),
	    cmocka_unit_test(
	        test_a_handshake_that_fails_at_once_ends_once_inside_the_call),
	    cmocka_unit_test(test_ktls_is_reported_as_it_runs),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
