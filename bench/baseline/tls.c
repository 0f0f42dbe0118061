/* SPDX-License-Identifier: MIT */
/*
 * tls.c: the baseline's bytes, plain or through OpenSSL, as a
 * thread-per-peer service does TLS: blocking SSL_read and SSL_write on a
 * member connection (one thread each), and on a client's connection one
 * session shared by its reader and writer threads under a lock, over a
 * non-blocking socket, each thread waiting in poll() without the lock
 * (what Java's SSLSocket offers: concurrent reads and writes).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "base_int.h"

/* wait_for waits until fd is ready for events. A thread waiting on its
 * own direction (a reader for bytes, a writer for room) may wait as long
 * as it takes: the socket's shutdown wakes it. One waiting on the other
 * direction (which TLS 1.3 hardly ever asks for) polls briefly and
 * retries, since the other thread may take the event first. */
static void
wait_for(int fd, short events, bool own_direction)
{
	struct pollfd pfd = {.fd = fd, .events = events};

	poll(&pfd, 1, own_direction ? -1 : 10);
}

/* tls_call makes one SSL_read_ex (writing false) or SSL_write_ex under the
 * session's lock, waiting outside it for as long as OpenSSL needs the
 * socket. Returns 1 with *done set, 0 at a clean end (close_notify) or
 * -1. A write is retried with the same arguments, as OpenSSL requires. */
static int
tls_call(const wbase_io *io, bool writing, void *buf, size_t n, size_t *done)
{
	wbase_tls *t = io->tls;

	for (;;) {
		int rc, err = SSL_ERROR_NONE;

		pthread_mutex_lock(&t->lock);
		rc = writing ? SSL_write_ex(t->ssl, buf, n, done)
		             : SSL_read_ex(t->ssl, buf, n, done);
		if (rc != 1) {
			err = SSL_get_error(t->ssl, rc);
			ERR_clear_error(); /* the next call starts clean */
		}
		pthread_mutex_unlock(&t->lock);
		if (err == SSL_ERROR_NONE)
			return 1;
		if (err == SSL_ERROR_WANT_READ)
			wait_for(io->fd, POLLIN, !writing);
		else if (err == SSL_ERROR_WANT_WRITE)
			wait_for(io->fd, POLLOUT, writing);
		else if (err == SSL_ERROR_ZERO_RETURN && !writing)
			return 0;
		else
			return -1;
	}
}

long
wbase__io_read(const wbase_io *io, void *buf, size_t n)
{
	ssize_t got;

	if (io->tls != NULL) {
		size_t done = 0;
		int rc = tls_call(io, false, buf, n, &done);

		return rc == 1 ? (long)done : rc;
	}
	do
		got = read(io->fd, buf, n);
	while (got < 0 && errno == EINTR);
	return got;
}

int
wbase__io_write(const wbase_io *io, const void *buf, size_t n)
{
	const unsigned char *p = buf;

	while (n > 0) {
		size_t done = 0;
		ssize_t w;

		if (io->tls != NULL) {
			if (tls_call(io, true, (void *)p, n, &done) != 1)
				return -1;
			w = (ssize_t)done;
		} else if ((w = write(io->fd, p, n)) < 0 && errno == EINTR) {
			continue;
		}
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

bool
wbase__io_buffered(const wbase_io *io)
{
	bool buffered;

	if (io->tls == NULL)
		return false;
	pthread_mutex_lock(&io->tls->lock);
	buffered = SSL_has_pending(io->tls->ssl) == 1; /* read ahead too */
	pthread_mutex_unlock(&io->tls->lock);
	return buffered;
}

int
wbase__io_share(const wbase_io *io)
{
	int flags;

	if (io->tls == NULL)
		return 0;
	flags = fcntl(io->fd, F_GETFL);
	if (flags < 0 || fcntl(io->fd, F_SETFL, flags | O_NONBLOCK) != 0)
		return -1;
	return 0;
}

/* tls_free frees a session that no thread uses any more. */
static void
tls_free(wbase_tls *t)
{
	if (t == NULL)
		return;
	SSL_free(t->ssl);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

void
wbase__io_close(wbase_io *io)
{
	tls_free(io->tls);
	io->tls = NULL;
	if (io->fd >= 0)
		close(io->fd);
	io->fd = -1;
}

/* new_ctx loads a TLS context from the node's files. */
static SSL_CTX *
new_ctx(const char *cert, const char *key, const char *ca)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_method());

	if (ctx == NULL)
		goto err;
	SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
	/* One long-lived connection per peer: nothing to resume, and no
	 * session cache shared by every reader thread. */
	SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
	SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);
	/* Read as a plaintext reader does, as much as the socket has (up to
	 * 64 KiB), not a record header and then its body: two system calls
	 * for every small record a batching peer sends. */
	SSL_CTX_set_read_ahead(ctx, 1);
	SSL_CTX_set_default_read_buffer_len(ctx, 64u << 10);
	SSL_CTX_set_verify(
	    ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1 ||
	    SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1)
		goto err;
	return ctx;
err:
	SSL_CTX_free(ctx);
	ERR_clear_error();
	return NULL;
}

int
wbase_node_set_tls(wbase_node *n, const char *cert, const char *key,
                   const char *ca)
{
	SSL_CTX *ctx;

	if (n->started)
		return WEFT_EBUSY;
	if ((ctx = new_ctx(cert, key, ca)) == NULL)
		return WEFT_ECONFIG; /* checked once, used per connection */
	SSL_CTX_free(ctx);
	wbase__tls_free(n);
	n->tls_cert = strdup(cert);
	n->tls_key = strdup(key);
	n->tls_ca = strdup(ca);
	if (n->tls_cert == NULL || n->tls_key == NULL || n->tls_ca == NULL) {
		wbase__tls_free(n);
		return WEFT_ENOMEM;
	}
	return 0;
}

void
wbase__tls_free(wbase_node *n)
{
	free(n->tls_cert);
	free(n->tls_key);
	free(n->tls_ca);
	n->tls_cert = n->tls_key = n->tls_ca = NULL;
}

/* set_timeout bounds a blocking handshake by the connect timeout. */
static void
set_timeout(int fd, uint64_t ms)
{
	struct timeval tv = {.tv_sec = (time_t)(ms / 1000),
	                     .tv_usec = (suseconds_t)(ms % 1000) * 1000};
	struct timeval none = {0};

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, ms ? &tv : &none, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, ms ? &tv : &none, sizeof(tv));
}

/* tls_new makes a session for io's socket from the node's files. */
static wbase_tls *
tls_new(wbase_node *n, int fd)
{
	SSL_CTX *ctx = new_ctx(n->tls_cert, n->tls_key, n->tls_ca);
	wbase_tls *t = calloc(1, sizeof(*t));

	if (ctx == NULL || t == NULL)
		goto err;
	/* The session holds its own reference to the context. */
	if ((t->ssl = SSL_new(ctx)) == NULL || SSL_set_fd(t->ssl, fd) != 1)
		goto err;
	pthread_mutex_init(&t->lock, NULL);
	SSL_CTX_free(ctx);
	return t;
err:
	if (t != NULL)
		SSL_free(t->ssl);
	free(t);
	SSL_CTX_free(ctx);
	return NULL;
}

static int
handshake(wbase_node *n, wbase_io *io, const char *peer_id)
{
	int ok;

	if ((io->tls = tls_new(n, io->fd)) == NULL)
		goto err;
	/* A dialer checks that the acceptor's certificate names it. */
	if (peer_id != NULL && SSL_set1_host(io->tls->ssl, peer_id) != 1)
		goto err;
	set_timeout(io->fd, n->limits.connect_timeout_ms);
	ok = peer_id != NULL ? SSL_connect(io->tls->ssl)
	                     : SSL_accept(io->tls->ssl);
	set_timeout(io->fd, 0);
	if (ok == 1)
		return 0;
err:
	ERR_clear_error();
	tls_free(io->tls);
	io->tls = NULL;
	return -1;
}

int
wbase__tls_connect(wbase_node *n, wbase_io *io, const char *peer_id)
{
	return handshake(n, io, peer_id);
}

int
wbase__tls_accept(wbase_node *n, wbase_io *io)
{
	return handshake(n, io, NULL);
}

bool
wbase__tls_peer_is(const wbase_io *io, const char *id)
{
	X509 *cert = SSL_get1_peer_certificate(io->tls->ssl);
	bool named = cert != NULL && X509_check_host(cert, id, 0, 0, NULL) == 1;

	X509_free(cert);
	return named;
}
