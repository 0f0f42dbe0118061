/* SPDX-License-Identifier: MIT */
/* tls_test.c: set-up, certificates, echo server, client and checks for
 * the TLS tests. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>
#include <weft/transport.h>

#include "support/wait.h"
#include "tls_int.h"
#include "tls_test.h"

/* ---- Certificates ------------------------------------------------------- */

static int
add_ext(X509 *cert, X509 *issuer, int nid, const char *value)
{
	X509V3_CTX v3;
	X509_EXTENSION *ext;
	int ok;

	X509V3_set_ctx(&v3, issuer, cert, NULL, NULL, 0);
	if ((ext = X509V3_EXT_conf_nid(NULL, &v3, nid, value)) == NULL)
		return -1;
	ok = X509_add_ext(cert, ext, -1);
	X509_EXTENSION_free(ext);
	return ok == 1 ? 0 : -1;
}

/* make_cert builds and signs a certificate for key. issuer NULL: self. */
static X509 *
make_cert(tt_pki *p, EVP_PKEY *key, const char *name, X509 *issuer,
          EVP_PKEY *issuer_key, long from_s, long to_s, bool ca, bool cn_only)
{
	X509 *cert = X509_new();
	char san[160];
	int bad = 0;

	if (cert == NULL)
		return NULL;
	X509_set_version(cert, 2);
	ASN1_INTEGER_set(X509_get_serialNumber(cert), ++p->serial);
	X509_gmtime_adj(X509_getm_notBefore(cert), from_s);
	X509_gmtime_adj(X509_getm_notAfter(cert), to_s);
	X509_set_pubkey(cert, key);
	X509_NAME_add_entry_by_txt(X509_get_subject_name(cert), "CN",
	                           MBSTRING_ASC, (const unsigned char *)name,
	                           -1, -1, 0);
	if (issuer == NULL) {
		issuer = cert;
		issuer_key = key;
	}
	X509_set_issuer_name(cert, X509_get_subject_name(issuer));
	bad |= add_ext(cert, issuer, NID_subject_key_identifier, "hash");
	bad |= add_ext(cert, issuer, NID_authority_key_identifier, "keyid");
	if (ca) {
		bad |= add_ext(cert, issuer, NID_basic_constraints,
		               "critical,CA:TRUE");
		bad |= add_ext(cert, issuer, NID_key_usage,
		               "critical,keyCertSign,cRLSign");
	} else {
		bad |= add_ext(cert, issuer, NID_basic_constraints, "CA:FALSE");
		bad |= add_ext(cert, issuer, NID_ext_key_usage,
		               "serverAuth,clientAuth");
		snprintf(san, sizeof(san), "DNS:%s", name);
		if (!cn_only)
			bad |= add_ext(cert, issuer, NID_subject_alt_name, san);
	}
	if (bad || X509_sign(cert, issuer_key, EVP_sha256()) == 0) {
		X509_free(cert);
		return NULL;
	}
	return cert;
}

static int
write_pem(const char *path, X509 *cert, EVP_PKEY *key)
{
	FILE *f = fopen(path, "w");
	int ok;

	if (f == NULL)
		return -1;
	ok = cert != NULL
	         ? PEM_write_X509(f, cert)
	         : PEM_write_PrivateKey(f, key, NULL, NULL, 0, NULL, NULL);
	return fclose(f) == 0 && ok == 1 ? 0 : -1;
}

const char *
tt_path(const tt_pki *p, const char *file, const char *ext, char *buf,
        size_t len)
{
	snprintf(buf, len, "%s/%s.%s", p->dir, file, ext);
	return buf;
}

static int
make_ca(tt_pki *p, const char *file, const char *name, EVP_PKEY **key,
        X509 **cert)
{
	char path[256];

	if ((*key = EVP_EC_gen("P-256")) == NULL)
		return -1;
	*cert = make_cert(p, *key, name, NULL, NULL, -3600, 86400, true, false);
	if (*cert == NULL)
		return -1;
	return write_pem(tt_path(p, file, "crt", path, sizeof(path)), *cert,
	                 NULL);
}

int
tt_pki_new(tt_pki *p)
{
	memset(p, 0, sizeof(*p));
	snprintf(p->dir, sizeof(p->dir), "/tmp/weft-tls-XXXXXX");
	if (mkdtemp(p->dir) == NULL)
		return -1;
	if (make_ca(p, "ca", "weft test cluster CA", &p->ca_key, &p->ca_cert) !=
	        0 ||
	    make_ca(p, "other-ca", "someone else's CA", &p->other_key,
	            &p->other_cert) != 0)
		return -1;
	return 0;
}

void
tt_pki_free(tt_pki *p)
{
	char path[512];
	struct dirent *e;
	DIR *d;

	if ((d = opendir(p->dir)) != NULL) {
		while ((e = readdir(d)) != NULL) {
			if (e->d_name[0] == '.')
				continue;
			snprintf(path, sizeof(path), "%s/%s", p->dir,
			         e->d_name);
			unlink(path);
		}
		closedir(d);
	}
	rmdir(p->dir);
	EVP_PKEY_free(p->ca_key);
	X509_free(p->ca_cert);
	EVP_PKEY_free(p->other_key);
	X509_free(p->other_cert);
}

int
tt_issue(tt_pki *p, const char *file, const char *name, enum tt_issuer by,
         long from_s, long to_s, bool cn_only)
{
	X509 *issuer = by == TT_CLUSTER ? p->ca_cert
	               : by == TT_OTHER ? p->other_cert
	                                : NULL;
	EVP_PKEY *ikey = by == TT_CLUSTER ? p->ca_key
	                 : by == TT_OTHER ? p->other_key
	                                  : NULL;
	char path[256];
	EVP_PKEY *key;
	X509 *cert;
	int rv = -1;

	if ((key = EVP_EC_gen("P-256")) == NULL)
		return -1;
	cert =
	    make_cert(p, key, name, issuer, ikey, from_s, to_s, false, cn_only);
	if (cert != NULL &&
	    write_pem(tt_path(p, file, "key", path, sizeof(path)), NULL, key) ==
	        0 &&
	    write_pem(tt_path(p, file, "crt", path, sizeof(path)), cert,
	              NULL) == 0)
		rv = 0;
	X509_free(cert);
	EVP_PKEY_free(key);
	return rv;
}

int
tt_node(tt_pki *p, const char *file, const char *name)
{
	return tt_issue(p, file, name, TT_CLUSTER, -60, 86400, false);
}

int
tt_ctx(const tt_pki *p, const char *file, const weft_tls_opts *base,
       weft_tls_ctx **out)
{
	char cert[256], key[256], ca[256];
	weft_tls_opts o = {0};

	if (base != NULL)
		o = *base;
	if (file != NULL) {
		o.cert_file = tt_path(p, file, "crt", cert, sizeof(cert));
		o.key_file = tt_path(p, file, "key", key, sizeof(key));
	}
	o.ca_file = tt_path(p, "ca", "crt", ca, sizeof(ca));
	return weft_tls_ctx_new(&o, out);
}

/* ---- Test program set-up ------------------------------------------------ */

int
tt_setup(weft_loop **loop, tt_pki *p, weft_tls_ctx **server,
         weft_tls_ctx **client)
{
	signal(SIGPIPE, SIG_IGN);
	if ((loop != NULL && weft_loop_new(loop) != 0) || tt_pki_new(p) != 0)
		return -1;
	if (server != NULL && (tt_node(p, "node-a", "node-a") != 0 ||
	                       tt_ctx(p, "node-a", NULL, server) != 0))
		return -1;
	if (client != NULL && (tt_node(p, "node-b", "node-b") != 0 ||
	                       tt_ctx(p, "node-b", NULL, client) != 0))
		return -1;
	return 0;
}

void
tt_teardown(weft_loop *loop, tt_pki *p, weft_tls_ctx *server,
            weft_tls_ctx *client)
{
	if (loop != NULL)
		weft_loop_free(loop);
	if (server != NULL)
		weft_tls_ctx_unref(server);
	if (client != NULL)
		weft_tls_ctx_unref(client);
	tt_pki_free(p);
}

/* ---- Echo server -------------------------------------------------------- */

static void
server_active(weft_ctx *ctx)
{
	tt_server *s = weft_ctx_state(ctx);
	weft_channel *ch = weft_ctx_channel(ctx);

	s->channels++;
	if (weft_tls_is_active(ch))
		s->tls_channels++;
	s->identity_rv =
	    weft_tls_peer_identity(ch, s->identity, sizeof(s->identity));
	weft_ctx_fire_active(ctx);
}

static void
server_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	tt_server *s = weft_ctx_state(ctx);

	s->bytes += evbuffer_get_length(msg);
	weft_ctx_write(ctx, type, msg, NULL, NULL);
	if (s->close_after != 0 && s->bytes >= s->close_after) {
		weft_ctx_flush(ctx);
		weft_ctx_close(ctx);
	}
}

static void
server_read_complete(weft_ctx *ctx)
{
	weft_ctx_flush(ctx);
}

static void
server_error(weft_ctx *ctx, int status)
{
	tt_server *s = weft_ctx_state(ctx);

	if (s->error == 0)
		s->error = status;
	weft_ctx_fire_error(ctx, status);
}

static void
server_inactive(weft_ctx *ctx)
{
	tt_server *s = weft_ctx_state(ctx);

	s->inactive++;
	weft_ctx_fire_inactive(ctx);
}

static const weft_handler server_handler = {
    .active = server_active,
    .read = server_read,
    .read_complete = server_read_complete,
    .error = server_error,
    .inactive = server_inactive,
};

static void
echo_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	weft_ctx_write(ctx, type, msg, NULL, NULL);
}

static const weft_handler echo_handler = {
    .read = echo_read,
    .read_complete = server_read_complete,
};

int
tt_echo_init(weft_channel *ch, void *arg)
{
	(void)arg;
	return weft_pipeline_add_last(ch, "echo", &echo_handler, NULL);
}

static int
server_init(weft_channel *ch, void *arg)
{
	return weft_pipeline_add_last(ch, "echo", &server_handler, arg);
}

int
tt_server_start(weft_loop *loop, weft_tls_ctx *tls, int mode, tt_server *s)
{
	return tt_server_start_timeout(loop, tls, mode, 5000, s);
}

int
tt_server_start_timeout(weft_loop *loop, weft_tls_ctx *tls, int mode,
                        uint64_t timeout_ms, tt_server *s)
{
	weft_server_opts o = {
	    .address = "127.0.0.1:0",
	    .init = server_init,
	    .init_arg = s,
	    .tls = tls,
	    .tls_mode = mode,
	    .handshake_timeout_ms = timeout_ms,
	};
	int rv;

	memset(s, 0, sizeof(*s));
	if ((rv = weft_server_new_on_loop(loop, &o, &s->srv)) != 0)
		return rv;
	s->port = weft_server_port(s->srv);
	return 0;
}

static void
on_server_closed(weft_server *srv, void *arg)
{
	tt_server *s = arg;

	(void)srv;
	s->closed = true;
}

void
tt_server_stop(weft_loop *loop, tt_server *s)
{
	if (s->srv == NULL)
		return;
	weft_server_close(s->srv, on_server_closed, s);
	tt_run_flag(loop, &s->closed);
	s->srv = NULL;
}

int
tt_group_server_new(weft_loop_group *group, weft_tls_ctx *tls,
                    weft_server **out)
{
	weft_server_opts o = {
	    .address = "127.0.0.1:0",
	    .init = tt_echo_init,
	    .tls = tls,
	};

	return weft_server_new(group, &o, out);
}

struct failures_wait {
	tt_server *s;
	uint64_t n;
};

static bool
failures_reached(void *arg)
{
	struct failures_wait *w = arg;
	weft_server_stats st;

	weft_server_get_stats(w->s->srv, &st);
	return st.setup_failures >= w->n;
}

int
tt_run_failures(weft_loop *loop, tt_server *s, uint64_t n)
{
	struct failures_wait w = {s, n};

	return weft_test_run_until(loop, failures_reached, &w, 5000);
}

/* ---- Client ------------------------------------------------------------- */

static void
client_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	tt_client *c = weft_ctx_state(ctx);

	(void)type;
	evbuffer_add_buffer(c->received, msg);
}

static void
client_error(weft_ctx *ctx, int status)
{
	tt_client *c = weft_ctx_state(ctx);

	if (c->error == 0)
		c->error = status;
	weft_ctx_fire_error(ctx, status);
}

static void
client_inactive(weft_ctx *ctx)
{
	tt_client *c = weft_ctx_state(ctx);
	SSL *ssl =
	    weft__tls_stream_ssl(weft_channel_stream(weft_ctx_channel(ctx)));

	c->inactive = true;
	c->got_close_notify =
	    ssl != NULL && (SSL_get_shutdown(ssl) & SSL_RECEIVED_SHUTDOWN);
	weft_ctx_fire_inactive(ctx);
}

static const weft_handler client_handler = {
    .read = client_read,
    .error = client_error,
    .inactive = client_inactive,
};

static int
client_init(weft_channel *ch, void *arg)
{
	return weft_pipeline_add_last(ch, "client", &client_handler, arg);
}

static void
on_connect(weft_channel *ch, int status, void *arg)
{
	tt_client *c = arg;

	c->connected = true;
	c->status = status;
	if (ch == NULL)
		return;
	weft_channel_ref(ch);
	c->ch = ch;
	c->identity_rv =
	    weft_tls_peer_identity(ch, c->identity, sizeof(c->identity));
}

int
tt_client_start(weft_loop *loop, uint16_t port, weft_tls_ctx *tls,
                const char *server_name, uint64_t timeout_ms, tt_client *c)
{
	weft_connect_opts o = {
	    .timeout_ms = timeout_ms,
	    .init = client_init,
	    .tls = tls,
	    .server_name = server_name,
	};
	char addr[64];

	memset(c, 0, sizeof(*c));
	o.init_arg = c;
	if ((c->received = evbuffer_new()) == NULL)
		return WEFT_ENOMEM;
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	return weft_connect(loop, addr, &o, on_connect, c);
}

int
tt_client_connect(weft_loop *loop, uint16_t port, weft_tls_ctx *tls,
                  const char *server_name, tt_client *c)
{
	int rv;

	if ((rv = tt_client_start(loop, port, tls, server_name, 5000, c)) != 0)
		return rv;
	if ((rv = tt_run_flag(loop, &c->connected)) != 0)
		return rv;
	return c->status;
}

void
tt_client_free(weft_loop *loop, tt_client *c)
{
	if (c->ch != NULL) {
		weft_channel_close(c->ch);
		tt_run_flag(loop, &c->inactive);
		weft_channel_unref(c->ch);
		c->ch = NULL;
	}
	if (c->received != NULL)
		evbuffer_free(c->received);
	c->received = NULL;
}

uint8_t
tt_pattern(uint64_t i)
{
	return (uint8_t)((i * 2654435761u) >> 13);
}

int
tt_send(tt_client *c, uint64_t off, size_t len)
{
	struct evbuffer *buf = evbuffer_new();
	struct evbuffer_iovec v;
	size_t i;
	int rv;

	if (buf == NULL ||
	    evbuffer_reserve_space(buf, (ev_ssize_t)len, &v, 1) != 1) {
		evbuffer_free(buf);
		return WEFT_ENOMEM;
	}
	for (i = 0; i < len; i++)
		((uint8_t *)v.iov_base)[i] = tt_pattern(off + i);
	v.iov_len = len;
	evbuffer_commit_space(buf, &v, 1);
	rv = weft_channel_write(c->ch, buf, NULL, NULL);
	evbuffer_free(buf);
	return rv;
}

bool
tt_check(tt_client *c, uint64_t len)
{
	uint8_t chunk[4096];
	uint64_t off = 0;
	int n, i;

	if (evbuffer_get_length(c->received) != len)
		return false;
	while ((n = evbuffer_remove(c->received, chunk, sizeof(chunk))) > 0) {
		for (i = 0; i < n; i++)
			if (chunk[i] != tt_pattern(off + (uint64_t)i))
				return false;
		off += (uint64_t)n;
	}
	return off == len;
}

/* ---- Running the loop --------------------------------------------------- */

int
tt_run_flag(weft_loop *loop, const bool *flag)
{
	return weft_loop_run_until(loop, weft_test_flag_set, (void *)flag,
	                           TT_DEADLINE_MS);
}

struct bytes_wait {
	tt_client *c;
	uint64_t n;
};

static bool
bytes_done(void *arg)
{
	struct bytes_wait *w = arg;

	return evbuffer_get_length(w->c->received) >= w->n || w->c->inactive;
}

int
tt_run_bytes(weft_loop *loop, tt_client *c, uint64_t n)
{
	struct bytes_wait w = {c, n};

	return weft_loop_run_until(loop, bytes_done, &w, TT_DEADLINE_MS);
}

/* ---- Checks ------------------------------------------------------------- */

void
tt_echo_check(weft_loop *loop, uint16_t port, weft_tls_ctx *tls, size_t n)
{
	tt_client c;

	assert_int_equal(tt_client_connect(loop, port, tls, "node-a", &c), 0);
	assert_int_equal(weft_tls_is_active(c.ch), tls != NULL);
	assert_int_equal(tt_send(&c, 0, n), 0);
	assert_int_equal(tt_run_bytes(loop, &c, n), 0);
	assert_true(tt_check(&c, n));
	tt_client_free(loop, &c);
}

/* ---- Plaintext sockets -------------------------------------------------- */

int
tt_raw_connect(uint16_t port)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sin.sin_port = htons(port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	return fd;
}

bool
tt_raw_closed(void *arg)
{
	int fd = *(int *)arg;
	char buf[512];
	ssize_t n;

	while ((n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		;
	return n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK);
}

/* ---- Log capture -------------------------------------------------------- */

/* The sink may run on any loop thread. */
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_text[16384];

static void
capture(enum weft_log_level level, const char *line, void *arg)
{
	size_t used;

	(void)arg;
	fprintf(stderr, "%s\n", line);
	if (level < WEFT_LOG_WARN)
		return;
	pthread_mutex_lock(&log_lock);
	used = strlen(log_text);
	snprintf(log_text + used, sizeof(log_text) - used, "%s\n", line);
	pthread_mutex_unlock(&log_lock);
}

void
tt_log_capture(void)
{
	weft_log_set_sink(capture, NULL);
	/* Every line about a bad peer, for the tests that look for it. */
	weft_log_set_peer_interval(0);
}

bool
tt_log_contains(const char *text)
{
	bool found;

	pthread_mutex_lock(&log_lock);
	found = strstr(log_text, text) != NULL;
	pthread_mutex_unlock(&log_lock);
	return found;
}

void
tt_log_clear(void)
{
	pthread_mutex_lock(&log_lock);
	log_text[0] = '\0';
	pthread_mutex_unlock(&log_lock);
}
