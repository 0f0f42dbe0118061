/*
 * tls.c: the baseline's bytes, plain or through OpenSSL with blocking
 * sockets (SSL_read, SSL_write), as a thread-per-peer service does TLS.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "base_int.h"

long
wbase__io_read(const wbase_io *io, void *buf, size_t n)
{
	ssize_t got;

	if (io->ssl != NULL) {
		size_t done = 0;

		if (SSL_read_ex(io->ssl, buf, n, &done) == 1)
			return (long)done;
		return SSL_get_error(io->ssl, 0) == SSL_ERROR_ZERO_RETURN ? 0
		                                                          : -1;
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

		if (io->ssl != NULL) {
			if (SSL_write_ex(io->ssl, p, n, &done) != 1)
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
	return io->ssl != NULL && SSL_pending(io->ssl) > 0;
}

void
wbase__io_close(wbase_io *io)
{
	if (io->ssl != NULL)
		SSL_free(io->ssl);
	io->ssl = NULL;
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

static int
handshake(wbase_node *n, wbase_io *io, const char *peer_id)
{
	SSL_CTX *ctx = new_ctx(n->tls_cert, n->tls_key, n->tls_ca);
	int ok;

	/* The session holds its own reference to the context. */
	io->ssl = ctx != NULL ? SSL_new(ctx) : NULL;
	SSL_CTX_free(ctx);
	if (io->ssl == NULL || SSL_set_fd(io->ssl, io->fd) != 1)
		goto err;
	/* A dialer checks that the acceptor's certificate names it. */
	if (peer_id != NULL && SSL_set1_host(io->ssl, peer_id) != 1)
		goto err;
	set_timeout(io->fd, n->limits.connect_timeout_ms);
	ok = peer_id != NULL ? SSL_connect(io->ssl) : SSL_accept(io->ssl);
	set_timeout(io->fd, 0);
	if (ok == 1)
		return 0;
err:
	ERR_clear_error();
	SSL_free(io->ssl);
	io->ssl = NULL;
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
	X509 *cert = SSL_get1_peer_certificate(io->ssl);
	bool named = cert != NULL && X509_check_host(cert, id, 0, 0, NULL) == 1;

	X509_free(cert);
	return named;
}
