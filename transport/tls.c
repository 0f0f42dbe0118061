/* SPDX-License-Identifier: MIT */
/*
 * tls.c: TLS contexts. A weft_tls_ctx keeps copies of its options and the
 * SSL_CTX that new connections use; a reload builds a new SSL_CTX from the
 * files and swaps it in under a lock. Every SSL holds a reference to the
 * SSL_CTX it was made from, so open connections keep their configuration.
 *
 * Each SSL_CTX also carries a generation (tls_session.c): the shared
 * counters and the client session cache of that configuration.
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "tls_int.h"

#define DEFAULT_CIPHERSUITES                                                   \
	"TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"                       \
	"TLS_CHACHA20_POLY1305_SHA256"
#define DEFAULT_CIPHERS                                                        \
	"ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"           \
	"ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"           \
	"ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"
#define DEFAULT_LIFETIME_S 7200
#define DEFAULT_READ_BUFFER (64u << 10)
#define MAX_READ_BUFFER (16u << 20)
#define SESSION_ID_CONTEXT "weft"

struct weft_tls_ctx {
	atomic_int refs;
	pthread_mutex_t lock; /* guards current */
	SSL_CTX *current;
	struct weft__tls_shared *shared;
	weft_tls_opts opts; /* the strings are our copies */
};

/* ---- Errors ------------------------------------------------------------- */

const char *
weft__tls_errors(char *buf, size_t len)
{
	unsigned long e;
	size_t used = 0;

	buf[0] = '\0';
	while ((e = ERR_get_error()) != 0) {
		if (used + 8 >= len)
			continue; /* keep popping: leave the queue empty */
		if (used > 0) {
			memcpy(buf + used, "; ", 3);
			used += 2;
		}
		ERR_error_string_n(e, buf + used, len - used);
		used += strlen(buf + used);
	}
	if (used == 0)
		snprintf(buf, len, "no detail");
	return buf;
}

/* ---- Shared counters ---------------------------------------------------- */

static struct weft__tls_shared *
shared_new(void)
{
	struct weft__tls_shared *s = calloc(1, sizeof(*s));

	if (s != NULL)
		atomic_init(&s->refs, 1);
	return s;
}

void
weft__tls_shared_unref(struct weft__tls_shared *s)
{
	if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) == 1)
		free(s);
}

/* ---- Building an SSL_CTX ------------------------------------------------ */

/* An encrypted key would make OpenSSL prompt on the terminal: refuse. */
static int
no_password(char *buf, int size, int rwflag, void *arg)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)arg;
	return 0;
}

static int
fail(const char *what, const char *path)
{
	char why[512];

	weft_warn("TLS: %s %s: %s", what, path ? path : "",
	          weft__tls_errors(why, sizeof(why)));
	return WEFT_ECONFIG;
}

/* kTLS writes with write(2): a peer that went away would raise SIGPIPE,
 * so a program that asks for kTLS gets it ignored, unless it chose a
 * disposition of its own. */
static void
ignore_sigpipe(void)
{
	struct sigaction sa;

	if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL) {
		sa.sa_handler = SIG_IGN;
		sigaction(SIGPIPE, &sa, NULL);
	}
}

static int
set_protocol(SSL_CTX *sctx, const weft_tls_opts *o)
{
	uint64_t options = SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
	                   SSL_OP_CIPHER_SERVER_PREFERENCE |
	                   SSL_OP_IGNORE_UNEXPECTED_EOF;
	int min = o->min_version == WEFT_TLS_VERSION_1_2 ? TLS1_2_VERSION
	                                                 : TLS1_3_VERSION;
	size_t rbuf =
	    o->read_buffer_bytes ? o->read_buffer_bytes : DEFAULT_READ_BUFFER;

	if (o->ktls) {
		options |= SSL_OP_ENABLE_KTLS;
		ignore_sigpipe();
	}
	SSL_CTX_set_options(sctx, options);
	if (SSL_CTX_set_min_proto_version(sctx, min) != 1)
		return fail("min_version", NULL);
	if (SSL_CTX_set_ciphersuites(sctx, o->ciphersuites
	                                       ? o->ciphersuites
	                                       : DEFAULT_CIPHERSUITES) != 1)
		return fail("ciphersuites", o->ciphersuites);
	if (SSL_CTX_set_cipher_list(sctx, o->ciphers ? o->ciphers
	                                             : DEFAULT_CIPHERS) != 1)
		return fail("ciphers", o->ciphers);
	/* Release no buffers between records: allocation per record costs
	 * more than the memory saved on our few long-lived connections. */
	SSL_CTX_clear_mode(sctx, SSL_MODE_RELEASE_BUFFERS);
	/* The stream retries a half-written record from its own buffer and
	 * takes each record's success as it comes (tls_stream.c). */
	SSL_CTX_set_mode(sctx, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
	                           SSL_MODE_ENABLE_PARTIAL_WRITE);
	SSL_CTX_set_default_read_buffer_len(sctx, rbuf);
	SSL_CTX_set_default_passwd_cb(sctx, no_password);
	return 0;
}

static void
warn_if_expired(SSL_CTX *sctx, const char *path)
{
	X509 *cert = SSL_CTX_get0_certificate(sctx);

	if (cert == NULL)
		return;
	if (X509_cmp_current_time(X509_get0_notAfter(cert)) < 0)
		weft_warn("TLS: certificate %s has expired: peers will "
		          "refuse it",
		          path);
	else if (X509_cmp_current_time(X509_get0_notBefore(cert)) > 0)
		weft_warn("TLS: certificate %s is not valid yet", path);
}

static int
set_identity(SSL_CTX *sctx, const weft_tls_opts *o)
{
	if (o->cert_file == NULL)
		return 0;
	if (SSL_CTX_use_certificate_chain_file(sctx, o->cert_file) != 1)
		return fail("certificate", o->cert_file);
	if (SSL_CTX_use_PrivateKey_file(sctx, o->key_file, SSL_FILETYPE_PEM) !=
	    1)
		return fail("private key", o->key_file);
	if (SSL_CTX_check_private_key(sctx) != 1)
		return fail("private key does not match", o->cert_file);
	warn_if_expired(sctx, o->cert_file);
	return 0;
}

/* peer_text names the other end of ssl's socket, for log lines. */
static const char *
peer_text(SSL *ssl, char *buf, size_t len)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (ssl == NULL ||
	    getpeername(SSL_get_fd(ssl), (struct sockaddr *)&ss, &sl) != 0)
		snprintf(buf, len, "?");
	else
		weft__addr_format((struct sockaddr *)&ss, sl, buf, len);
	return buf;
}

/* Says why a certificate is refused: the handshake error that follows only
 * says "certificate verify failed". */
static int
on_verify(int ok, X509_STORE_CTX *store)
{
	X509 *cert = X509_STORE_CTX_get_current_cert(store);
	char peer[WEFT_ADDRESS_MAX], subject[256] = "?";
	SSL *ssl;

	if (ok)
		return ok;
	ssl = X509_STORE_CTX_get_ex_data(store,
	                                 SSL_get_ex_data_X509_STORE_CTX_idx());
	if (cert != NULL)
		X509_NAME_oneline(X509_get_subject_name(cert), subject,
		                  sizeof(subject));
	weft_warn(
	    "TLS %s: refusing certificate %s: %s",
	    peer_text(ssl, peer, sizeof(peer)), subject,
	    X509_verify_cert_error_string(X509_STORE_CTX_get_error(store)));
	return ok;
}

static int
set_verify(SSL_CTX *sctx, const weft_tls_opts *o)
{
	STACK_OF(X509_NAME) * names;
	int mode = SSL_VERIFY_PEER;

	if (o->verify == WEFT_TLS_VERIFY_REQUIRED)
		mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
	if (o->verify == WEFT_TLS_VERIFY_NONE)
		mode = SSL_VERIFY_NONE;
	SSL_CTX_set_verify(sctx, mode,
	                   mode == SSL_VERIFY_NONE ? NULL : on_verify);
	if (o->ca_file == NULL)
		return 0;
	if (SSL_CTX_load_verify_locations(sctx, o->ca_file, NULL) != 1)
		return fail("CA bundle", o->ca_file);
	/* Tell clients which CAs we accept, so they pick the right cert. */
	if ((names = SSL_load_client_CA_file(o->ca_file)) != NULL)
		SSL_CTX_set_client_CA_list(sctx, names);
	ERR_clear_error();
	return 0;
}

static void
set_sessions(SSL_CTX *sctx, const weft_tls_opts *o)
{
	if (o->no_resumption) {
		SSL_CTX_set_options(sctx, SSL_OP_NO_TICKET);
		SSL_CTX_set_num_tickets(sctx, 0);
		SSL_CTX_set_session_cache_mode(sctx, SSL_SESS_CACHE_OFF);
		return;
	}
	/* Required for resumption once clients are verified. */
	SSL_CTX_set_session_id_context(
	    sctx, (const unsigned char *)SESSION_ID_CONTEXT,
	    sizeof(SESSION_ID_CONTEXT) - 1);
	/* Stateless tickets, one per connection; clients keep the last one
	 * per server name (tls_session.c). */
	SSL_CTX_set_num_tickets(sctx, 1);
	SSL_CTX_set_timeout(sctx, o->session_lifetime_s ? o->session_lifetime_s
	                                                : DEFAULT_LIFETIME_S);
	SSL_CTX_set_session_cache_mode(sctx, SSL_SESS_CACHE_BOTH |
	                                         SSL_SESS_CACHE_NO_INTERNAL);
}

/* load builds an SSL_CTX from o. Returns 0 or a WEFT_E code (logged). */
static int
load(const weft_tls_opts *o, struct weft__tls_shared *shared, SSL_CTX **out)
{
	SSL_CTX *sctx;
	int rv;

	if ((sctx = SSL_CTX_new(TLS_method())) == NULL) {
		fail("cannot make a context:", NULL);
		return WEFT_ENOMEM;
	}
	/* From here on, SSL_CTX_free also frees the generation. */
	if ((rv = weft__tls_generation_attach(sctx, shared)) != 0 ||
	    (rv = set_protocol(sctx, o)) != 0 ||
	    (rv = set_identity(sctx, o)) != 0 ||
	    (rv = set_verify(sctx, o)) != 0) {
		SSL_CTX_free(sctx);
		return rv;
	}
	set_sessions(sctx, o);
	*out = sctx;
	return 0;
}

/* ---- Contexts ----------------------------------------------------------- */

static int
check_opts(const weft_tls_opts *o)
{
	if (o == NULL || (o->cert_file == NULL) != (o->key_file == NULL) ||
	    (o->ca_file == NULL && o->verify != WEFT_TLS_VERIFY_NONE) ||
	    o->verify > WEFT_TLS_VERIFY_NONE ||
	    o->read_buffer_bytes > MAX_READ_BUFFER)
		return WEFT_EINVAL;
	if (o->min_version != 0 && o->min_version != WEFT_TLS_VERSION_1_2 &&
	    o->min_version != WEFT_TLS_VERSION_1_3)
		return WEFT_EINVAL;
	return 0;
}

static void
free_opts(weft_tls_opts *o)
{
	free((char *)o->cert_file);
	free((char *)o->key_file);
	free((char *)o->ca_file);
	free((char *)o->ciphers);
	free((char *)o->ciphersuites);
}

static int
dup_str(const char **dst, const char *src)
{
	*dst = NULL;
	if (src != NULL && (*dst = strdup(src)) == NULL)
		return WEFT_ENOMEM;
	return 0;
}

static int
copy_opts(weft_tls_opts *dst, const weft_tls_opts *src)
{
	*dst = *src;
	if (dup_str(&dst->cert_file, src->cert_file) != 0 ||
	    dup_str(&dst->key_file, src->key_file) != 0 ||
	    dup_str(&dst->ca_file, src->ca_file) != 0 ||
	    dup_str(&dst->ciphers, src->ciphers) != 0 ||
	    dup_str(&dst->ciphersuites, src->ciphersuites) != 0) {
		free_opts(dst);
		return WEFT_ENOMEM;
	}
	return 0;
}

int
weft_tls_ctx_new(const weft_tls_opts *opts, weft_tls_ctx **out)
{
	weft_tls_ctx *ctx;
	int rv;

	if ((rv = check_opts(opts)) != 0 || (rv = weft_init()) != 0)
		return rv;
	if ((rv = weft__tls_generation_init()) != 0)
		return rv;
	if ((ctx = calloc(1, sizeof(*ctx))) == NULL)
		return WEFT_ENOMEM;
	if ((rv = copy_opts(&ctx->opts, opts)) != 0)
		goto err_free_ctx;
	rv = WEFT_ENOMEM;
	if ((ctx->shared = shared_new()) == NULL)
		goto err_free_opts;
	if ((rv = load(&ctx->opts, ctx->shared, &ctx->current)) != 0)
		goto err_unref_shared;
	pthread_mutex_init(&ctx->lock, NULL);
	atomic_init(&ctx->refs, 1);
	*out = ctx;
	return 0;

err_unref_shared:
	weft__tls_shared_unref(ctx->shared);
err_free_opts:
	free_opts(&ctx->opts);
err_free_ctx:
	free(ctx);
	return rv;
}

void
weft_tls_ctx_ref(weft_tls_ctx *ctx)
{
	atomic_fetch_add_explicit(&ctx->refs, 1, memory_order_relaxed);
}

void
weft_tls_ctx_unref(weft_tls_ctx *ctx)
{
	if (ctx == NULL ||
	    atomic_fetch_sub_explicit(&ctx->refs, 1, memory_order_acq_rel) != 1)
		return;
	SSL_CTX_free(ctx->current);
	weft__tls_shared_unref(ctx->shared);
	free_opts(&ctx->opts);
	pthread_mutex_destroy(&ctx->lock);
	free(ctx);
}

int
weft_tls_ctx_reload(weft_tls_ctx *ctx)
{
	SSL_CTX *fresh, *old;
	int rv;

	if ((rv = load(&ctx->opts, ctx->shared, &fresh)) != 0) {
		weft__tls_count(&ctx->shared->reload_failures);
		weft_warn("TLS reload failed (%s): keeping the certificates "
		          "loaded before",
		          weft_strerror(rv));
		return rv;
	}
	pthread_mutex_lock(&ctx->lock);
	old = ctx->current;
	ctx->current = fresh;
	pthread_mutex_unlock(&ctx->lock);
	SSL_CTX_free(old); /* open connections hold their own references */
	weft__tls_count(&ctx->shared->reloads);
	weft_info("TLS reload: new connections use %s",
	          ctx->opts.cert_file ? ctx->opts.cert_file : "no certificate");
	return 0;
}

void
weft_tls_ctx_get_stats(const weft_tls_ctx *ctx, weft_tls_stats *out)
{
	struct weft__tls_shared *s = ctx->shared;

	out->handshakes_started = atomic_load(&s->handshakes_started);
	out->handshakes_completed = atomic_load(&s->handshakes_completed);
	out->handshakes_resumed = atomic_load(&s->handshakes_resumed);
	out->plaintext_accepted = atomic_load(&s->plaintext_accepted);
	out->reloads = atomic_load(&s->reloads);
	out->reload_failures = atomic_load(&s->reload_failures);
	out->ktls_send = atomic_load(&s->ktls_send);
	out->ktls_recv = atomic_load(&s->ktls_recv);
	out->ktls_offered = weft__tls_ktls_offered();
}

void
weft__tls_count_plaintext(weft_tls_ctx *tls)
{
	weft__tls_count(&tls->shared->plaintext_accepted);
}

int
weft_tls_version_parse(const char *text, int *out)
{
	if (text != NULL && strcmp(text, "1.2") == 0)
		*out = WEFT_TLS_VERSION_1_2;
	else if (text != NULL && strcmp(text, "1.3") == 0)
		*out = WEFT_TLS_VERSION_1_3;
	else
		return WEFT_EINVAL;
	return 0;
}

/* ---- Connections -------------------------------------------------------- */

static bool
is_ip_literal(const char *name)
{
	unsigned char buf[sizeof(struct in6_addr)];

	return inet_pton(AF_INET, name, buf) == 1 ||
	       inet_pton(AF_INET6, name, buf) == 1;
}

/* client_setup names the server we expect; the handshake offers a cached
 * session when it starts (weft__tls_session_claim). */
static int
client_setup(SSL *ssl, const char *name)
{
	if (name == NULL || name[0] == '\0')
		return 0;
	if (is_ip_literal(name)) {
		/* No SNI for addresses; the certificate must carry it. */
		if (X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), name) !=
		    1)
			goto err_name;
		return 0;
	}
	if (SSL_set_tlsext_host_name(ssl, name) != 1 ||
	    SSL_set1_host(ssl, name) != 1)
		goto err_name;
	SSL_set_hostflags(ssl, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
	return 0;

err_name:
	fail("bad server name", name);
	return WEFT_EINVAL;
}

int
weft__tls_ssl_new(weft_tls_ctx *tls, bool server, const char *server_name,
                  SSL **out)
{
	SSL_CTX *sctx;
	SSL *ssl;
	int rv;

	if (server && tls->opts.cert_file == NULL) {
		weft_warn("TLS: a context without a certificate cannot accept");
		return WEFT_EINVAL;
	}
	pthread_mutex_lock(&tls->lock);
	sctx = tls->current;
	SSL_CTX_up_ref(sctx);
	pthread_mutex_unlock(&tls->lock);
	ssl = SSL_new(sctx);
	SSL_CTX_free(sctx); /* the SSL holds its own reference */
	if (ssl == NULL) {
		ERR_clear_error();
		return WEFT_ENOMEM;
	}
	if (!server && (rv = client_setup(ssl, server_name)) != 0) {
		SSL_free(ssl);
		return rv;
	}
	*out = ssl;
	return 0;
}
