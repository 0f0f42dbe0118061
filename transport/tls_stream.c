/* SPDX-License-Identifier: MIT */
/*
 * tls_stream.c: the stream of a TLS connection (weft/stream.h): OpenSSL
 * driven directly on the socket, on the loop's own events.
 *
 * The socket. The SSL reads and writes the fd through a BIO of ours: recv,
 * and send with MSG_NOSIGNAL, so a peer that went away is an error and
 * never a SIGPIPE. A short recv means the socket is empty: the next read
 * of the same call says "retry" without a system call, and is not even
 * asked for while OpenSSL holds no bytes (the level-triggered event fires
 * again for what arrives later). With read ahead on, one recv
 * brings in several records. Where kernel TLS is asked for and the kernel
 * offers it, the SSL gets OpenSSL's own socket BIO instead, the only one
 * kTLS works with (writes are then plain write(2), so asking for kTLS
 * sets SIGPIPE to ignored: see tls.c).
 *
 * Reads decrypt with SSL_read_ex straight into reserved space of the
 * channel's input, until OpenSSL wants more from an empty socket or the
 * budget is spent; decrypted bytes beyond the budget are announced again
 * on the loop's next turn. A read that wants to write (a post-handshake message
 * OpenSSL must answer at once, with the socket full) waits for the socket
 * to be writable and then says READABLE. (A peer's KeyUpdate read while a
 * record is half written does not get there: OpenSSL 3.0 queues the answer
 * behind the record, test_tls_stream shows it.)
 *
 * Writes encrypt the output buffer's chains at flush time: a big chain
 * goes as it lies, small ones are copied into one record first. Record
 * size grows with the connection's pace: after a second without writing,
 * records fit one TCP segment until SMALL_RECORD_PHASE bytes have gone,
 * then they are as large as TLS allows. Every record of a flush but the
 * last goes with MSG_MORE, so the kernel sends the batch in as few
 * segments as it can. A record OpenSSL could not finish is kept in the
 * staging buffer, counted as unsent, and retried with the same bytes when
 * the socket is writable (OpenSSL's rule for WANT_WRITE).
 *
 * The handshake runs on the same events before the channel exists, with
 * its deadline; its end, good or bad, goes to the transport's callback.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <openssl/err.h>

#include "tls_int.h"

/* The most plaintext one record carries. */
#define RECORD_MAX 16384
/* A record that fits one 1500-byte segment with IPv6 and TCP options. */
#define RECORD_SMALL 1369
/* Small records after idle, for this many bytes. */
#define SMALL_RECORD_PHASE (64u << 10)
/* How long without a write makes a connection idle. */
#define IDLE_NS 1000000000ull
/* Chains shorter than this are copied into one record with their
 * neighbours; longer ones are encrypted where they lie. */
#define COALESCE_BELOW 4096
/* The first read reserves this much, the next ones READ_CHUNK. */
#define READ_FIRST 16384
#define READ_CHUNK (64u << 10)
/* Not an OpenSSL error: the input buffer could not grow. */
#define READ_NOMEM (-1)

/* A client holds its hello at most this share of its timeout while
 * another dial's full handshake to the same name runs (tls_session.c). */
#define HOLD_SHARE 4

struct handshake {
	weft__stream_cb cb;
	void *arg;
	struct event *timer;
	struct weft__tls_hold *hold; /* waiting for another dial's ticket */
	struct event *hold_timer;    /* the end of that wait */
	bool hook_added;
	bool want_read;
	bool want_write;
	char peer[WEFT_ADDRESS_MAX];
};

struct tls_stream {
	weft_stream base;
	weft_loop *loop;
	evutil_socket_t fd;
	SSL *ssl;
	struct event *rev, *wev;
	struct event
	    *again; /* a timer: READABLE again, for bytes OpenSSL holds */
	struct handshake *hs; /* until the handshake ends */
	int status;    /* the end of the stream or its error, once seen */
	int sys_errno; /* what the last failed system call said */
	bool failed;   /* OpenSSL failed: no more SSL calls but SSL_free */
	bool want_read, want_write; /* the channel's wishes */
	bool rev_on, wev_on;
	bool read_needs_write; /* SSL_read said WANT_WRITE */
	bool write_needs_read; /* SSL_write said WANT_READ */
	bool sock_empty;       /* a short recv in this call */
	bool more;             /* more records follow: MSG_MORE */
	uint64_t last_write_ns;
	uint64_t since_idle; /* bytes written since the last idle */
	size_t pend_off;     /* stage[pend_off, pend_len) waits for the */
	size_t pend_len;     /* socket, the first record half written */
	unsigned char stage[RECORD_MAX];
};

static const weft_stream_ops tls_ops;

/* ---- The socket BIO ---------------------------------------------------- */

/* GLOBAL: made once by pthread_once, read-only after: our BIO method. */
static BIO_METHOD *sock_method;
static pthread_once_t sock_method_once = PTHREAD_ONCE_INIT;
/* GLOBAL: set once by pthread_once: the kernel offers the tls ULP. */
static bool ktls_offered;
static pthread_once_t ktls_once = PTHREAD_ONCE_INIT;

static int
bio_write(BIO *b, const char *buf, int len)
{
	struct tls_stream *s = BIO_get_data(b);
	int flags = MSG_NOSIGNAL | MSG_DONTWAIT | (s->more ? MSG_MORE : 0);
	ssize_t n;

	BIO_clear_retry_flags(b);
	do
		n = send(s->fd, buf, (size_t)len, flags);
	while (n < 0 && errno == EINTR);
	if (n >= 0)
		return (int)n;
	if (errno == EAGAIN || errno == EWOULDBLOCK)
		BIO_set_retry_write(b);
	else
		s->sys_errno = errno;
	return -1;
}

static int
bio_read(BIO *b, char *buf, int len)
{
	struct tls_stream *s = BIO_get_data(b);
	ssize_t n;

	BIO_clear_retry_flags(b);
	if (s->sock_empty) {
		BIO_set_retry_read(b);
		return -1;
	}
	do
		n = recv(s->fd, buf, (size_t)len, 0);
	while (n < 0 && errno == EINTR);
	if (n >= 0) {
		s->sock_empty = n > 0 && n < len;
		return (int)n; /* 0: the end of the stream */
	}
	if (errno == EAGAIN || errno == EWOULDBLOCK) {
		s->sock_empty = true;
		BIO_set_retry_read(b);
	} else {
		s->sys_errno = errno;
	}
	return -1;
}

static long
bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
	struct tls_stream *s = BIO_get_data(b);

	(void)num;
	switch (cmd) {
	case BIO_CTRL_FLUSH:
		return 1;
	case BIO_C_GET_FD: /* SSL_get_fd, for log lines */
		if (ptr != NULL)
			*(int *)ptr = s->fd;
		return s->fd;
	default:
		return 0;
	}
}

static int
bio_create(BIO *b)
{
	BIO_set_init(b, 1);
	return 1;
}

static void
make_sock_method(void)
{
	int type = BIO_get_new_index();
	BIO_METHOD *m;

	if (type < 0)
		return;
	m = BIO_meth_new(type | BIO_TYPE_SOURCE_SINK | BIO_TYPE_DESCRIPTOR,
	                 "weft socket");
	if (m == NULL || BIO_meth_set_write(m, bio_write) != 1 ||
	    BIO_meth_set_read(m, bio_read) != 1 ||
	    BIO_meth_set_ctrl(m, bio_ctrl) != 1 ||
	    BIO_meth_set_create(m, bio_create) != 1) {
		BIO_meth_free(m);
		return;
	}
	sock_method = m;
}

/* find_ktls looks for "tls" among the kernel's TCP upper layers. */
static void
find_ktls(void)
{
	char line[256], *tok, *save = NULL;
	FILE *f = fopen("/proc/sys/net/ipv4/tcp_available_ulp", "re");

	if (f == NULL)
		return;
	if (fgets(line, sizeof(line), f) != NULL)
		for (tok = strtok_r(line, " \n", &save); tok != NULL;
		     tok = strtok_r(NULL, " \n", &save))
			ktls_offered = ktls_offered || strcmp(tok, "tls") == 0;
	fclose(f);
}

bool
weft__tls_ktls_offered(void)
{
	pthread_once(&ktls_once, find_ktls);
	return ktls_offered;
}

/* attach_socket gives the SSL its BIO over the stream's fd. */
static int
attach_socket(struct tls_stream *s)
{
	BIO *b;

	if ((SSL_get_options(s->ssl) & SSL_OP_ENABLE_KTLS) &&
	    weft__tls_ktls_offered())
		return SSL_set_fd(s->ssl, s->fd) == 1 ? 0 : WEFT_ENOMEM;
	pthread_once(&sock_method_once, make_sock_method);
	if (sock_method == NULL || (b = BIO_new(sock_method)) == NULL)
		return WEFT_ENOMEM;
	BIO_set_data(b, s);
	SSL_set_bio(s->ssl, b, b);
	return 0;
}

/* ---- Events ------------------------------------------------------------ */

static void
set_event(struct event *ev, bool *on, bool want)
{
	if (*on == want)
		return;
	*on = want;
	if (want)
		event_add(ev, NULL);
	else
		event_del(ev);
}

/* update_events watches what the handshake, OpenSSL or the channel need. */
static void
update_events(struct tls_stream *s)
{
	bool r, w;

	if (s->hs != NULL) {
		r = s->hs->want_read;
		w = s->hs->want_write;
	} else {
		r = s->want_read || s->write_needs_read;
		w = s->want_write || s->read_needs_write || s->pend_len > 0;
	}
	set_event(s->rev, &s->rev_on, r);
	set_event(s->wev, &s->wev_on, w);
}

/* read_again says READABLE soon, for bytes (or an end) that the socket
 * will not announce: on the loop's next turn, after it polled the other
 * sockets (a timer of 0, where event_active would run again in the same
 * turn and let one busy connection starve the rest of the loop). */
static void
read_again(struct tls_stream *s)
{
	static const struct timeval next_turn = {0, 0};

	event_add(s->again, &next_turn);
}

static void
on_again(evutil_socket_t fd, short what, void *arg)
{
	struct tls_stream *s = arg;

	(void)fd;
	(void)what;
	if (s->want_read)
		weft_stream_ready(&s->base, WEFT_STREAM_READABLE);
}

static const char *
peer_name(struct tls_stream *s)
{
	if (s->hs != NULL)
		return s->hs->peer;
	return s->base.channel != NULL ? weft_channel_peer(s->base.channel)
	                               : "?";
}

static int
sock_status(int err)
{
	if (err == EPIPE || err == ECONNRESET)
		return WEFT_ECLOSED;
	return weft_from_errno(err) != 0 ? weft_from_errno(err) : WEFT_EIO;
}

/* GLOBAL: the rate limit of io_failure's line, one for the process: a peer
 * that opens connections only to send forged records gets a line per
 * peer interval (weft_log_set_peer_interval), with the count of the
 * others, not a line each. */
static weft_log_limit log_record_failure =
    WEFT_LOG_LIMIT_INIT(WEFT_LOG_PEER_INTERVAL);

/* io_failure names why an SSL call stopped for good (err is
 * SSL_get_error's answer) and keeps it as the stream's status. */
static int
io_failure(struct tls_stream *s, int err)
{
	char why[512];

	if (err == SSL_ERROR_ZERO_RETURN) {
		s->status =
		    WEFT_ECLOSED; /* close_notify, or the socket's end */
		return s->status;
	}
	s->failed = true;
	if (err == READ_NOMEM) {
		s->status = WEFT_ENOMEM;
	} else if (err == SSL_ERROR_SSL) {
		weft__tls_errors(why, sizeof(why));
		weft_log_limited(&log_record_failure, WEFT_LOG_WARN,
		                 "%s: TLS: %s; closing", peer_name(s), why);
		s->status = WEFT_ETLS;
	} else {
		s->status = s->sys_errno != 0 ? sock_status(s->sys_errno)
		                              : WEFT_ECLOSED;
	}
	ERR_clear_error();
	return s->status;
}

/* ---- Writing ----------------------------------------------------------- */

/* write_started notes the time of a write call (once per call, for the
 * records it makes): after IDLE_NS without a write, records are small
 * again. */
static void
write_started(struct tls_stream *s)
{
	uint64_t now = weft_now_ns();

	if (now - s->last_write_ns > IDLE_NS)
		s->since_idle = 0;
	s->last_write_ns = now;
}

/* record_size is how much plaintext the next record carries. */
static size_t
record_size(const struct tls_stream *s)
{
	return s->since_idle < SMALL_RECORD_PHASE ? RECORD_SMALL : RECORD_MAX;
}

static void
count_written(struct tls_stream *s, size_t n)
{
	s->since_idle += n;
}

/* write_stalled handles an SSL_write that did not finish: 1 when it waits
 * for the socket (or for the peer), else the stream's error. */
static int
write_stalled(struct tls_stream *s, int err)
{
	if (err == SSL_ERROR_WANT_WRITE)
		return 1;
	if (err == SSL_ERROR_WANT_READ) {
		s->write_needs_read = true;
		return 1;
	}
	return io_failure(s, err);
}

/* flush_pending finishes the record OpenSSL has half written and the rest
 * of the staging buffer. Returns 0 when done, 1 while it waits, or the
 * stream's error. */
static int
flush_pending(struct tls_stream *s)
{
	size_t n;
	int rv;

	while (s->pend_off < s->pend_len) {
		s->more = false;
		ERR_clear_error();
		if (SSL_write_ex(s->ssl, s->stage + s->pend_off,
		                 s->pend_len - s->pend_off, &n) != 1) {
			rv = SSL_get_error(s->ssl, 0);
			return write_stalled(s, rv);
		}
		s->pend_off += n;
		count_written(s, n);
	}
	s->pend_off = s->pend_len = 0;
	return 0;
}

/* next_record points *buf at the plaintext of the next record: a big
 * chain where it lies, or small ones copied into the staging buffer. */
static size_t
next_record(struct tls_stream *s, struct evbuffer *out, const void **buf)
{
	size_t limit = record_size(s), left = evbuffer_get_length(out);
	struct evbuffer_iovec v;

	evbuffer_peek(out, -1, NULL, &v, 1);
	if (v.iov_len >= COALESCE_BELOW || v.iov_len == left) {
		*buf = v.iov_base;
		return v.iov_len < limit ? v.iov_len : limit;
	}
	*buf = s->stage;
	return (size_t)evbuffer_copyout(out, s->stage,
	                                left < limit ? left : limit);
}

static ssize_t
tls_write(weft_stream *base, struct evbuffer *out)
{
	struct tls_stream *s = (struct tls_stream *)base;
	size_t taken = 0, len, n;
	const void *buf;
	int rv;

	if (s->failed)
		return s->status;
	write_started(s);
	if (s->pend_len > 0 && (rv = flush_pending(s)) != 0) {
		update_events(s);
		return rv < 0 ? rv : 0;
	}
	while (evbuffer_get_length(out) > 0) {
		len = next_record(s, out, &buf);
		s->more = evbuffer_get_length(out) > len;
		ERR_clear_error();
		if (SSL_write_ex(s->ssl, buf, len, &n) == 1) {
			evbuffer_drain(out, n);
			taken += n;
			count_written(s, n);
			continue;
		}
		if ((rv = write_stalled(s, SSL_get_error(s->ssl, 0))) < 0)
			return taken > 0 ? (ssize_t)taken : rv;
		/* The record is half out: its bytes move to the staging
		 * buffer, where the retry finds them unchanged. */
		if (buf != s->stage)
			memcpy(s->stage, buf, len);
		evbuffer_drain(out, len);
		s->pend_off = 0;
		s->pend_len = len;
		taken += len;
		break;
	}
	update_events(s);
	return (ssize_t)taken;
}

static size_t
tls_unsent(const weft_stream *base)
{
	const struct tls_stream *s = (const struct tls_stream *)base;

	return s->pend_len - s->pend_off;
}

/* ---- Reading ----------------------------------------------------------- */

/* read_into decrypts up to want bytes into reserved space of in (two
 * pieces at most, so that the input's last chain is filled rather than
 * moved); *err gets SSL_get_error's answer for the read that stopped it,
 * if any. */
static size_t
read_into(struct tls_stream *s, struct evbuffer *in, size_t want, int *err)
{
	struct evbuffer_iovec v[2];
	size_t got = 0, n, room;
	int i, nv, used = 0;

	if ((nv = evbuffer_reserve_space(in, (ev_ssize_t)want, v, 2)) <= 0) {
		*err = READ_NOMEM;
		return 0;
	}
	for (i = 0; i < nv && *err == SSL_ERROR_NONE && got < want; i++) {
		room = v[i].iov_len < want - got ? v[i].iov_len : want - got;
		v[i].iov_len = 0;
		while (v[i].iov_len < room) {
			/* The socket is empty and OpenSSL holds nothing: the
			 * call would only say so. */
			if (s->sock_empty && !SSL_has_pending(s->ssl)) {
				*err = SSL_ERROR_WANT_READ;
				break;
			}
			if (SSL_read_ex(s->ssl,
			                (char *)v[i].iov_base + v[i].iov_len,
			                room - v[i].iov_len, &n) != 1) {
				*err = SSL_get_error(s->ssl, 0);
				break;
			}
			v[i].iov_len += n;
		}
		got += v[i].iov_len;
		if (v[i].iov_len > 0)
			used = i + 1;
	}
	evbuffer_commit_space(in, v, used);
	return got;
}

static ssize_t
tls_read(weft_stream *base, struct evbuffer *in, size_t max)
{
	struct tls_stream *s = (struct tls_stream *)base;
	size_t total = 0, want = READ_FIRST;
	int err = SSL_ERROR_NONE;

	if (s->status != 0)
		return s->status;
	s->sock_empty = false;
	ERR_clear_error();
	while (total < max && err == SSL_ERROR_NONE) {
		total += read_into(
		    s, in, max - total < want ? max - total : want, &err);
		want = READ_CHUNK;
	}
	if (err == SSL_ERROR_NONE) {
		/* The budget is spent: what OpenSSL holds is ours to tell. */
		if (SSL_has_pending(s->ssl))
			read_again(s);
	} else if (err == SSL_ERROR_WANT_WRITE) {
		s->read_needs_write = true;
		update_events(s);
	} else if (err != SSL_ERROR_WANT_READ) {
		io_failure(s, err);
		if (total > 0)
			read_again(s); /* the end or error, after these bytes */
	}
	return total > 0 ? (ssize_t)total : s->status;
}

/* ---- Readiness --------------------------------------------------------- */

static bool handshake_step(struct tls_stream *s);

static void
on_event(evutil_socket_t fd, short what, void *arg)
{
	struct tls_stream *s = arg;
	unsigned ready = 0;
	int rv;

	(void)fd;
	if (s->hs != NULL) {
		(void)handshake_step(s);
		return;
	}
	if (what & EV_WRITE) {
		rv = 0;
		if (s->pend_len > 0 && !s->failed) {
			write_started(s);
			rv = flush_pending(s);
		}
		if (s->read_needs_write) {
			s->read_needs_write = false;
			ready |= WEFT_STREAM_READABLE;
		}
		if (rv == 0 && s->want_write)
			ready |= WEFT_STREAM_WRITABLE;
		if (rv < 0) /* the channel hears of it from read or write */
			ready |= WEFT_STREAM_READABLE | WEFT_STREAM_WRITABLE;
	}
	if (what & EV_READ) {
		if (s->write_needs_read) {
			s->write_needs_read = false;
			ready |= WEFT_STREAM_WRITABLE;
		}
		if (s->want_read)
			ready |= WEFT_STREAM_READABLE;
	}
	update_events(s);
	if (ready != 0)
		weft_stream_ready(&s->base, ready);
}

static void
tls_watch(weft_stream *base, bool read, bool write)
{
	struct tls_stream *s = (struct tls_stream *)base;
	bool was_reading = s->want_read;

	s->want_read = read;
	s->want_write = write;
	update_events(s);
	/* Bytes OpenSSL read ahead (with the handshake's last flight, or
	 * while reading was paused) or an end seen early. */
	if (read && !was_reading && (s->status != 0 || SSL_has_pending(s->ssl)))
		read_again(s);
}

/* ---- Close, addresses, identity ---------------------------------------- */

static void
stream_free(struct tls_stream *s)
{
	if (s->ssl != NULL && !SSL_is_server(s->ssl))
		weft__tls_session_done(s->ssl);
	if (s->rev != NULL)
		event_free(s->rev);
	if (s->wev != NULL)
		event_free(s->wev);
	if (s->again != NULL)
		event_free(s->again);
	if (s->ssl != NULL)
		SSL_free(s->ssl);
	ERR_clear_error();
	close(s->fd);
	free(s);
}

/* send_close_notify says close_notify without waiting: a socket too full
 * to take it gets none (best effort, as the close does not linger). */
static void
send_close_notify(struct tls_stream *s)
{
	char why[256];

	ERR_clear_error();
	s->more = false;
	/* 0: sent, the peer's own is still to come; that is all we wait. */
	if (SSL_shutdown(s->ssl) < 0)
		weft_debug("%s: TLS close_notify not sent: %s", peer_name(s),
		           weft__tls_errors(why, sizeof(why)));
	ERR_clear_error();
}

static void
tls_close(weft_stream *base, bool graceful)
{
	struct tls_stream *s = (struct tls_stream *)base;

	/* Only when we close first: a peer that sent close_notify (or
	 * vanished) is likely gone. */
	if (graceful && s->status == 0 && !s->failed && s->pend_len == 0 &&
	    SSL_is_init_finished(s->ssl) && SSL_get_shutdown(s->ssl) == 0)
		send_close_notify(s);
	stream_free(s);
}

static int
tls_address(weft_stream *base, bool peer, char *buf, size_t len)
{
	return weft__addr_of_fd(((struct tls_stream *)base)->fd, peer, buf,
	                        len);
}

static int
tls_peer_identity(weft_stream *base, char *buf, size_t len)
{
	return weft__tls_ssl_identity(((struct tls_stream *)base)->ssl, buf,
	                              len);
}

static const weft_stream_ops tls_ops = {
    .name = "tls",
    .read = tls_read,
    .write = tls_write,
    .unsent = tls_unsent,
    .watch = tls_watch,
    .close = tls_close,
    .address = tls_address,
    .peer_identity = tls_peer_identity,
};

SSL *
weft__tls_stream_ssl(const weft_stream *s)
{
	return s != NULL && s->ops == &tls_ops
	           ? ((const struct tls_stream *)s)->ssl
	           : NULL;
}

evutil_socket_t
weft__tls_stream_fd(const weft_stream *s)
{
	return s != NULL && s->ops == &tls_ops
	           ? ((const struct tls_stream *)s)->fd
	           : -1;
}

/* ---- The handshake ----------------------------------------------------- */

static void on_loop_shutdown(weft_loop *loop, uint64_t deadline_ns, void *arg);

/* handshake_failure names why the handshake failed, in why (len bytes)
 * and at debug level in the log. */
static int
handshake_failure(struct tls_stream *s, int err, char *why, size_t len)
{
	char detail[256];
	unsigned long e;

	why[0] = '\0';
	while (err == SSL_ERROR_SSL && (e = ERR_get_error()) != 0) {
		if (ERR_GET_LIB(e) == 0)
			continue;
		ERR_error_string_n(e, detail, sizeof(detail));
		weft_debug("TLS handshake %s: %s", s->hs->peer, detail);
		if (why[0] == '\0')
			snprintf(why, len, "%s", detail);
	}
	ERR_clear_error();
	if (why[0] != '\0')
		return WEFT_ETLS;
	snprintf(why, len, "connection closed during the TLS handshake");
	weft_debug("TLS handshake %s: %s", s->hs->peer, why);
	return WEFT_ETLS;
}

/* hold_end ends a client's wait for another dial's ticket, if it waits. */
static void
hold_end(struct handshake *hs, SSL *ssl)
{
	if (hs->hold != NULL)
		weft__tls_session_unhold(ssl, hs->hold);
	if (hs->hold_timer != NULL)
		event_free(hs->hold_timer);
	hs->hold = NULL;
	hs->hold_timer = NULL;
}

/* handshake_end ends the wait: the stream goes to the callback (status
 * 0) or is freed first. */
static void
handshake_end(struct tls_stream *s, int status, const char *why)
{
	struct handshake *hs = s->hs;
	char text[256];

	snprintf(text, sizeof(text), "%s", why != NULL ? why : "");
	hold_end(hs, s->ssl);
	if (hs->hook_added)
		weft_loop_remove_shutdown(s->loop, on_loop_shutdown, s);
	event_free(hs->timer);
	s->hs = NULL;
	update_events(s);
	if (status != 0) {
		s->failed = true;
		stream_free(s);
		s = NULL;
	}
	hs->cb(s != NULL ? &s->base : NULL, status,
	       text[0] != '\0' ? text : NULL, hs->arg);
	free(hs);
}

/* handshake_step advances the handshake; false once it ended (and s went
 * to the callback, or was freed). */
static bool
handshake_step(struct tls_stream *s)
{
	char why[256];
	int r, err;

	s->sock_empty = false;
	s->more = false;
	ERR_clear_error();
	if ((r = SSL_do_handshake(s->ssl)) == 1) {
		handshake_end(s, 0, NULL);
		return false;
	}
	err = SSL_get_error(s->ssl, r);
	if (err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE) {
		s->hs->want_read = err == SSL_ERROR_WANT_READ;
		s->hs->want_write = err == SSL_ERROR_WANT_WRITE;
		update_events(s);
		return true;
	}
	handshake_end(s, handshake_failure(s, err, why, sizeof(why)), why);
	return false;
}

static void
on_handshake_timeout(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	handshake_end(arg, WEFT_ETIMEDOUT, "TLS handshake timed out");
}

/* A loop that shuts down ends the handshakes it runs. */
static void
on_loop_shutdown(weft_loop *loop, uint64_t deadline_ns, void *arg)
{
	struct tls_stream *s = arg;

	(void)loop;
	(void)deadline_ns;
	handshake_end(s, WEFT_ESHUTDOWN, NULL);
}

/* The wait for another dial's ticket is over (it came, that dial went, or
 * the deadline passed): the hello goes, resuming if a session is there. */
static void
hold_over(struct tls_stream *s)
{
	hold_end(s->hs, s->ssl);
	weft__tls_session_offer(s->ssl);
	(void)handshake_step(s);
}

static void
on_hold_ready(void *arg)
{
	hold_over(arg);
}

static void
on_hold_timeout(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	hold_over(arg);
}

/* hold_for_ticket offers a client's cached session, or has it wait for the
 * ticket of a full handshake to the same name under way. Returns whether
 * it waits (the hello goes later). */
static bool
hold_for_ticket(struct tls_stream *s, uint64_t timeout_ms)
{
	struct weft__tls_wake wake = {s->loop, on_hold_ready, s};
	struct handshake *hs = s->hs;
	uint64_t until_ns, now_ns, wait_us;
	struct timeval tv;

	if (SSL_is_server(s->ssl) ||
	    weft__tls_session_claim(s->ssl, timeout_ms / HOLD_SHARE, &wake,
	                            &hs->hold, &until_ns) != WEFT__TLS_HELD)
		return false;
	hs->hold_timer =
	    event_new(weft_loop_base(s->loop), -1, 0, on_hold_timeout, s);
	if (hs->hold_timer == NULL) {
		hold_end(hs, s->ssl);
		weft__tls_session_offer(s->ssl);
		return false;
	}
	/* A plain timeval: each wait's length is its own, and the loop's
	 * common timeouts are for durations used again and again. */
	now_ns = weft_now_ns();
	wait_us = until_ns > now_ns ? (until_ns - now_ns + 999) / 1000 : 0;
	tv.tv_sec = (time_t)(wait_us / 1000000);
	tv.tv_usec = (suseconds_t)(wait_us % 1000000);
	event_add(hs->hold_timer, &tv);
	return true;
}

weft_stream *
weft__tls_handshake(weft_stream *base, const char *peer, uint64_t timeout_ms,
                    weft__stream_cb cb, void *arg)
{
	struct tls_stream *s = (struct tls_stream *)base;
	struct timeval scratch;
	struct handshake *hs;

	if ((hs = calloc(1, sizeof(*hs))) == NULL)
		goto err_free;
	hs->timer =
	    event_new(weft_loop_base(s->loop), -1, 0, on_handshake_timeout, s);
	if (hs->timer == NULL)
		goto err_free_hs;
	hs->hook_added =
	    weft_loop_on_shutdown(s->loop, on_loop_shutdown, s) >= 0;
	hs->cb = cb;
	hs->arg = arg;
	snprintf(hs->peer, sizeof(hs->peer), "%s", peer ? peer : "");
	s->hs = hs;
	event_add(hs->timer, weft_loop_timeval(s->loop, timeout_ms, &scratch));
	/* A client's hello goes at once, unless it waits for another
	 * dial's ticket; a server waits for the hello. */
	if (hold_for_ticket(s, timeout_ms))
		return base;
	return handshake_step(s) ? base : NULL;

err_free_hs:
	free(hs);
err_free:
	stream_free(s);
	cb(NULL, WEFT_ENOMEM, NULL, arg);
	return NULL;
}

void
weft__tls_handshake_cancel(weft_stream *base)
{
	struct tls_stream *s = (struct tls_stream *)base;
	struct handshake *hs = s->hs;

	hold_end(hs, s->ssl);
	if (hs->hook_added)
		weft_loop_remove_shutdown(s->loop, on_loop_shutdown, s);
	event_free(hs->timer);
	free(hs);
	s->hs = NULL;
	s->failed = true;
	stream_free(s);
}

/* ---- Making one -------------------------------------------------------- */

int
weft__tls_stream_new(weft_loop *loop, weft_tls_ctx *tls, evutil_socket_t fd,
                     bool server, const char *server_name, weft_stream **out)
{
	struct event_base *base = weft_loop_base(loop);
	struct tls_stream *s;
	int rv;

	if ((s = calloc(1, sizeof(*s))) == NULL) {
		close(fd);
		return WEFT_ENOMEM;
	}
	s->base.ops = &tls_ops;
	s->loop = loop;
	s->fd = fd;
	if ((rv = weft__tls_ssl_new(tls, server, server_name, &s->ssl)) != 0)
		goto err_free;
	rv = WEFT_ENOMEM;
	s->rev = event_new(base, fd, EV_READ | EV_PERSIST, on_event, s);
	s->wev = event_new(base, fd, EV_WRITE | EV_PERSIST, on_event, s);
	s->again = event_new(base, -1, 0, on_again, s);
	if (s->rev == NULL || s->wev == NULL || s->again == NULL ||
	    (rv = attach_socket(s)) != 0)
		goto err_free;
	SSL_set_mode(s->ssl, SSL_MODE_ENABLE_PARTIAL_WRITE |
	                         SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
	SSL_set_read_ahead(s->ssl, 1);
	if (server)
		SSL_set_accept_state(s->ssl);
	else
		SSL_set_connect_state(s->ssl);
	*out = &s->base;
	return 0;

err_free:
	stream_free(s);
	return rv;
}
