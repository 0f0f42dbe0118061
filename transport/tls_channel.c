/* SPDX-License-Identifier: MIT */
/*
 * tls_channel.c: TLS on an open channel. The "weft.tls" handler, first in
 * every TLS channel, and what the public API tells about a channel's peer.
 *
 * Reads. libevent's bufferevent_openssl decrypts one record (16 KiB at
 * most) per read event, with two read(2) calls for it, and OpenSSL's read
 * ahead cannot simply be turned on: libevent stops when the current record
 * is consumed and would leave records that OpenSSL already read waiting
 * for the socket to become readable again. So the handler tops the input
 * up itself, as weft.read does for plain sockets: with read ahead on, one
 * read(2) brings in several records, and it reads until what the socket
 * held has been decrypted. Before it returns, OpenSSL holds no complete
 * record (read ahead off, it finishes the last one exactly), and libevent
 * reads exactly, one record at a time, as it expects.
 *
 * Writes need nothing: bufferevent_openssl (2.1.12, over a socket) waits
 * for its write event, as a plaintext socket does, and then encrypts all
 * that was flushed meanwhile, each buffer chain into records of 16 KiB.
 *
 * Close. bufferevent_openssl frees the SSL without sending close_notify
 * (its flush is a no-op in 2.1). The channel fires inactive before it
 * frees the bufferevent, so the handler sends close_notify there when the
 * close is ours and graceful: no TLS error, every byte written, and the
 * peer has not closed first.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "tls_int.h"

/* The most plaintext one TLS record carries. */
#define RECORD_MAX 16384

struct tls_state {
	weft_ctx *ctx;
	size_t max_read_bytes; /* most plaintext one top-up takes */
	bool failed;           /* an OpenSSL error was seen: no close_notify */
};

static SSL *
channel_ssl(weft_channel *ch)
{
	struct bufferevent *bev = weft_channel_bev(ch);

	return bev != NULL ? bufferevent_openssl_get_ssl(bev) : NULL;
}

/* ---- Reading ------------------------------------------------------------ */

/* One top-up: what the socket held when it started. */
struct top_up {
	SSL *ssl;
	BIO *rbio;
	uint64_t target; /* rbio's count once the socket's bytes are in */
	size_t avail;    /* the socket's bytes when we started */
	int err;         /* SSL_get_error of the read that stopped us, or 0 */
	bool finishing;  /* past max: only empty OpenSSL's buffer */
};

/* drained: every byte the socket held is in (unless finishing), and
 * OpenSSL holds nothing that a read would return without the socket. */
static bool
drained(const struct top_up *t)
{
	return (t->finishing || BIO_number_read(t->rbio) >= t->target) &&
	       !SSL_has_pending(t->ssl);
}

/* fill decrypts into [buf, buf + len) until it is full, the socket's bytes
 * are in or a read stops; returns the bytes written. */
static size_t
fill(struct top_up *t, char *buf, size_t len)
{
	size_t got = 0;
	int r;

	while (got < len && !drained(t)) {
		r = SSL_read(t->ssl, buf + got,
		             len - got > INT_MAX ? INT_MAX : (int)(len - got));
		if (r <= 0) {
			t->err = SSL_get_error(t->ssl, r);
			break;
		}
		got += (size_t)r;
	}
	return got;
}

/* top_up_step reserves up to want bytes of in and fills them. */
static size_t
top_up_step(struct top_up *t, struct evbuffer *in, size_t want)
{
	struct evbuffer_iovec v;

	if (evbuffer_reserve_space(in, (ev_ssize_t)want, &v, 1) != 1)
		return 0;
	v.iov_len = fill(t, v.iov_base, want < v.iov_len ? want : v.iov_len);
	evbuffer_commit_space(in, &v, v.iov_len > 0 ? 1 : 0);
	return v.iov_len;
}

/* next_want is how much space the next step reserves: what the socket
 * held (plaintext is never longer) plus a record, within the budget. */
static size_t
next_want(const struct top_up *t, size_t budget)
{
	size_t want = t->avail + RECORD_MAX;

	return t->finishing ? RECORD_MAX : (want < budget ? want : budget);
}

/*
 * top_up decrypts what the socket holds into in, up to max bytes (a few
 * records more to empty OpenSSL's buffer). Returns 0, or WEFT_ETLS after a
 * protocol error (logged). End of stream and socket errors are left for
 * libevent's own next read, which will see them again.
 */
static int
top_up(struct tls_state *st, SSL *ssl, struct evbuffer *in)
{
	struct top_up t = {.ssl = ssl, .rbio = SSL_get_rbio(ssl)};
	size_t done = 0, got;
	char why[512];
	int avail = 0;

	/* libevent read one record. Whatever else the socket holds is read
	 * now, small records too: with many connections each carrying a few
	 * small messages per flush, skipping this look for a small record
	 * cost one wake-up and two reads per record (and 2 to 5 times the
	 * CPU per op in weft-bench cluster --tls at P = 32), against one
	 * ioctl per read event in a ping-pong. */
	if (ioctl(SSL_get_fd(ssl), FIONREAD, &avail) != 0 || avail < 0)
		avail = 0;
	t.avail = (size_t)avail;
	t.target = BIO_number_read(t.rbio) + t.avail;
	/* SSL_get_error needs an empty queue; reads that succeed add
	 * nothing to it, so once is enough. */
	ERR_clear_error();
	SSL_set_read_ahead(ssl, 1);
	while (t.err == 0 && !drained(&t)) {
		/* Past the budget, finish only what OpenSSL holds: read ahead
		 * off, it reads no further than the end of its last record. */
		if (done >= st->max_read_bytes && !t.finishing) {
			t.finishing = true;
			SSL_set_read_ahead(ssl, 0);
		}
		got = top_up_step(&t, in,
		                  next_want(&t, st->max_read_bytes - done));
		if (got == 0 && t.err == 0)
			break; /* no memory: libevent will read on */
		done += got;
	}
	SSL_set_read_ahead(ssl, 0);
	if (t.err != SSL_ERROR_SSL) {
		ERR_clear_error();
		return 0;
	}
	weft_warn("%s: TLS: %s", weft_channel_peer(weft_ctx_channel(st->ctx)),
	          weft__tls_errors(why, sizeof(why)));
	return WEFT_ETLS;
}

static void
tls_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct tls_state *st = weft_ctx_state(ctx);
	weft_channel *ch = weft_ctx_channel(ctx);
	struct bufferevent *bev = weft_channel_bev(ch);
	SSL *ssl;
	int rv = 0;

	/* First in the pipeline, it sees the channel's input. */
	if (bev != NULL && type == &weft_msg_evbuffer &&
	    (ssl = bufferevent_openssl_get_ssl(bev)) != NULL && !st->failed)
		rv = top_up(st, ssl, msg);
	weft_ctx_fire_read(ctx, type, msg);
	if (rv != 0 && !st->failed) {
		st->failed = true;
		weft_ctx_fire_error(ctx, rv);
		weft_ctx_close(ctx);
	}
}

/* ---- Errors and close --------------------------------------------------- */

/* log_bev_errors logs the OpenSSL errors libevent kept for bev; returns
 * how many there were. */
static int
log_bev_errors(weft_channel *ch, struct bufferevent *bev)
{
	char detail[256];
	unsigned long e;
	int n = 0;

	while ((e = bufferevent_get_openssl_error(bev)) != 0) {
		/* libevent 2.1 also keeps a bare code that names nothing. */
		if (ERR_GET_LIB(e) == 0 && !ERR_SYSTEM_ERROR(e))
			continue;
		ERR_error_string_n(e, detail, sizeof(detail));
		weft_warn("%s: TLS: %s", weft_channel_peer(ch), detail);
		n++;
	}
	return n;
}

static void
tls_error(weft_ctx *ctx, int status)
{
	struct tls_state *st = weft_ctx_state(ctx);
	weft_channel *ch = weft_ctx_channel(ctx);
	struct bufferevent *bev = weft_channel_bev(ch);

	/* After any error, SSL_shutdown must not be called. */
	st->failed = true;
	if (bev != NULL && log_bev_errors(ch, bev) > 0)
		status = WEFT_ETLS;
	weft_ctx_fire_error(ctx, status);
}

static void
send_close_notify(weft_channel *ch, SSL *ssl)
{
	char why[256];

	ERR_clear_error();
	/* 0: sent, the peer's own is still to come; that is all we wait. */
	if (SSL_shutdown(ssl) < 0)
		weft_debug("%s: TLS close_notify not sent: %s",
		           weft_channel_peer(ch),
		           weft__tls_errors(why, sizeof(why)));
	ERR_clear_error();
}

static void
tls_inactive(weft_ctx *ctx)
{
	struct tls_state *st = weft_ctx_state(ctx);
	weft_channel *ch = weft_ctx_channel(ctx);
	struct bufferevent *bev = weft_channel_bev(ch);
	SSL *ssl = bev != NULL ? bufferevent_openssl_get_ssl(bev) : NULL;

	/* Only when we close first: a peer that sent close_notify (or
	 * vanished) is likely gone, and a write to a reset socket raises
	 * SIGPIPE in a process that does not ignore it. */
	if (ssl != NULL && !st->failed && SSL_is_init_finished(ssl) &&
	    SSL_get_shutdown(ssl) == 0 &&
	    weft_channel_pending_write_bytes(ch) == 0)
		send_close_notify(ch, ssl);
	weft_ctx_fire_inactive(ctx);
}

static void
tls_added(weft_ctx *ctx)
{
	struct tls_state *st = weft_ctx_state(ctx);

	st->ctx = ctx;
}

static void
tls_removed(weft_ctx *ctx)
{
	free(weft_ctx_state(ctx));
}

static const weft_handler tls_handler = {
    .added = tls_added,
    .removed = tls_removed,
    .read = tls_read,
    .error = tls_error,
    .inactive = tls_inactive,
};

int
weft__tls_channel_install(weft_channel *ch, size_t max_read_bytes)
{
	struct tls_state *st;
	int rv;

	if (channel_ssl(ch) == NULL || weft_pipeline_get(ch, "weft.tls"))
		return 0;
	if ((st = calloc(1, sizeof(*st))) == NULL)
		return WEFT_ENOMEM;
	st->max_read_bytes =
	    max_read_bytes ? max_read_bytes : WEFT__DEFAULT_MAX_READ;
	if ((rv = weft_pipeline_add_first(ch, "weft.tls", &tls_handler, st)))
		free(st);
	return rv;
}

/* ---- The peer ----------------------------------------------------------- */

bool
weft_tls_is_active(weft_channel *ch)
{
	return channel_ssl(ch) != NULL;
}

/* peer_cert finds the peer's certificate, if it verified. */
static int
peer_cert(weft_channel *ch, X509 **out)
{
	SSL *ssl = channel_ssl(ch);

	if (ssl == NULL)
		return WEFT_EINVAL;
	*out = SSL_get0_peer_certificate(ssl);
	if (*out == NULL || SSL_get_verify_result(ssl) != X509_V_OK)
		return WEFT_EAUTH;
	return 0;
}

static int
copy_name(const unsigned char *data, int n, char *buf, size_t len)
{
	if (n <= 0 || memchr(data, '\0', (size_t)n) != NULL)
		return WEFT_EAUTH;
	if ((size_t)n >= len)
		return WEFT_ETOOBIG;
	memcpy(buf, data, (size_t)n);
	buf[n] = '\0';
	return 0;
}

static int
common_name(X509 *cert, char *buf, size_t len)
{
	X509_NAME *subject = X509_get_subject_name(cert);
	unsigned char *utf8 = NULL;
	int i, n, rv;

	i = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
	if (i < 0)
		return WEFT_EAUTH;
	n = ASN1_STRING_to_UTF8(
	    &utf8, X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i)));
	rv = n < 0 ? WEFT_EAUTH : copy_name(utf8, n, buf, len);
	OPENSSL_free(utf8);
	ERR_clear_error();
	return rv;
}

/* dns_name returns names[i]'s DNS name, or NULL for another type. */
static const ASN1_IA5STRING *
dns_name(const GENERAL_NAMES *names, int i)
{
	const GENERAL_NAME *gn = sk_GENERAL_NAME_value(names, i);

	return gn->type == GEN_DNS ? gn->d.dNSName : NULL;
}

int
weft_tls_peer_identity(weft_channel *ch, char *buf, size_t len)
{
	const ASN1_IA5STRING *dns = NULL;
	GENERAL_NAMES *names;
	X509 *cert;
	int i, rv;

	if ((rv = peer_cert(ch, &cert)) != 0)
		return rv;
	names = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
	for (i = 0; names != NULL && i < sk_GENERAL_NAME_num(names); i++)
		if ((dns = dns_name(names, i)) != NULL)
			break;
	if (dns != NULL)
		rv = copy_name(ASN1_STRING_get0_data(dns),
		               ASN1_STRING_length(dns), buf, len);
	else
		rv = common_name(cert, buf, len);
	GENERAL_NAMES_free(names);
	return rv;
}

int
weft_tls_peer_check(weft_channel *ch, const char *id)
{
	const ASN1_IA5STRING *dns;
	GENERAL_NAMES *names;
	bool has_dns = false, match = false;
	char cn[256];
	X509 *cert;
	int i, rv;

	if ((rv = peer_cert(ch, &cert)) != 0)
		return rv;
	names = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
	for (i = 0; names != NULL && i < sk_GENERAL_NAME_num(names); i++) {
		if ((dns = dns_name(names, i)) == NULL)
			continue;
		has_dns = true;
		match =
		    match ||
		    ((size_t)ASN1_STRING_length(dns) == strlen(id) &&
		     memcmp(ASN1_STRING_get0_data(dns), id, strlen(id)) == 0);
	}
	GENERAL_NAMES_free(names);
	if (!has_dns)
		match = common_name(cert, cn, sizeof(cn)) == 0 &&
		        strcmp(cn, id) == 0;
	return match ? 0 : WEFT_EAUTH;
}

int
weft_tls_get_info(weft_channel *ch, weft_tls_info *out)
{
	SSL *ssl = channel_ssl(ch);

	if (ssl == NULL)
		return WEFT_EINVAL;
	out->version = SSL_get_version(ssl);
	out->cipher = SSL_get_cipher_name(ssl);
	out->resumed = SSL_session_reused(ssl) == 1;
	out->ktls_send = BIO_get_ktls_send(SSL_get_wbio(ssl)) != 0;
	out->ktls_recv = BIO_get_ktls_recv(SSL_get_rbio(ssl)) != 0;
	return 0;
}
