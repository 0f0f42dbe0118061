/* SPDX-License-Identifier: MIT */
/*
 * tls_test.h: what the TLS tests share. Certificates made at test time with
 * the OpenSSL API in a temporary directory (nothing is committed), an echo
 * server and a client that keeps what it reads, on one loop.
 */
#ifndef WEFT_TESTS_TLS_TEST_H
#define WEFT_TESTS_TLS_TEST_H

#include <stdbool.h>
#include <stdint.h>

#include <openssl/evp.h>
#include <openssl/x509.h>
#include <weft/channel.h>
#include <weft/loop.h>
#include <weft/tls.h>
#include <weft/transport.h>

#define TT_DEADLINE_MS 20000

/* ---- Certificates -------------------------------------------------------- */

/* Who signs a certificate. */
enum tt_issuer {
	TT_CLUSTER, /* the cluster CA: ca.crt */
	TT_OTHER,   /* another CA nobody trusts: other-ca.crt */
	TT_SELF,    /* self-signed */
};

typedef struct tt_pki {
	char dir[128]; /* a fresh temporary directory */
	EVP_PKEY *ca_key;
	X509 *ca_cert;
	EVP_PKEY *other_key;
	X509 *other_cert;
	long serial;
} tt_pki;

/* tt_pki_new makes a directory with ca.crt (the cluster CA) and
 * other-ca.crt. Returns 0 or -1. */
int tt_pki_new(tt_pki *p);
/* tt_pki_free removes the directory and everything in it. */
void tt_pki_free(tt_pki *p);

/*
 * tt_issue writes <dir>/<file>.crt and <file>.key: an EC P-256 key and a
 * certificate for name (as subjectAltName DNS and commonName; only the
 * commonName if cn_only) signed by, valid from now + from_s to now + to_s.
 * Returns 0 or -1.
 */
int tt_issue(tt_pki *p, const char *file, const char *name, enum tt_issuer by,
             long from_s, long to_s, bool cn_only);

/* tt_node issues a normal node certificate: cluster CA, valid a day. */
int tt_node(tt_pki *p, const char *file, const char *name);

/* tt_path formats <dir>/<file>.<ext> into buf and returns it. */
const char *tt_path(const tt_pki *p, const char *file, const char *ext,
                    char *buf, size_t len);

/* tt_ctx makes a context with <file>.crt/.key (file NULL: none) trusting
 * ca.crt, with the given options (NULL: defaults). Returns 0 or an error. */
int tt_ctx(const tt_pki *p, const char *file, const weft_tls_opts *base,
           weft_tls_ctx **out);

/* ---- Test program set-up ------------------------------------------------ */

/*
 * tt_setup makes what the TLS test programs share, for a cmocka group
 * set-up: SIGPIPE ignored, a loop (if loop is not NULL), the PKI p, and
 * for each context asked for, a node certificate and a context with it:
 * *server with node-a, *client with node-b (either may be NULL).
 * Returns 0 or -1. Main thread.
 */
int tt_setup(weft_loop **loop, tt_pki *p, weft_tls_ctx **server,
             weft_tls_ctx **client);
/* tt_teardown frees what tt_setup made; NULL pointers are skipped. */
void tt_teardown(weft_loop *loop, tt_pki *p, weft_tls_ctx *server,
                 weft_tls_ctx *client);

/* ---- Echo server ------------------------------------------------------- */

typedef struct tt_server {
	weft_server *srv;
	uint16_t port;
	int channels; /* made (after the handshake) */
	int inactive;
	int tls_channels;
	uint64_t bytes;
	int identity_rv; /* weft_tls_peer_identity of the last channel */
	char identity[128];
	bool closed;
	uint64_t close_after; /* not 0: close a channel once it echoed this */
	int error;            /* the first error event's status */
} tt_server;

/* tt_server_start listens on 127.0.0.1, port 0, on loop. */
int tt_server_start(weft_loop *loop, weft_tls_ctx *tls, int mode, tt_server *s);
/* tt_server_start_timeout also sets the handshake (and sniff) timeout. */
int tt_server_start_timeout(weft_loop *loop, weft_tls_ctx *tls, int mode,
                            uint64_t timeout_ms, tt_server *s);
/* tt_echo_init is a weft_channel_init_cb that only echoes (no counters,
 * so it may run on several loops at once); arg is unused. */
int tt_echo_init(weft_channel *ch, void *arg);
/* tt_server_stop closes the server and waits for it. */
void tt_server_stop(weft_loop *loop, tt_server *s);
/* tt_group_server_new makes an echo server (tt_echo_init) with tls on
 * 127.0.0.1, port 0, on the loops of group. Returns 0 or an error. */
int tt_group_server_new(weft_loop_group *group, weft_tls_ctx *tls,
                        weft_server **out);
/* tt_run_failures runs loop until s counted n setup failures (refused
 * handshakes, dropped silent peers) or 5 s passed. Returns 0 or
 * WEFT_ETIMEDOUT. */
int tt_run_failures(weft_loop *loop, tt_server *s, uint64_t n);

/* ---- Client ------------------------------------------------------------- */

typedef struct tt_client {
	weft_channel *ch; /* a reference, once connected */
	int status;       /* of the connect */
	bool connected;   /* the connect callback ran */
	bool inactive;
	int error;             /* the first error event's status */
	bool got_close_notify; /* at inactive: the peer sent close_notify */
	struct evbuffer *received;
	int identity_rv;
	char identity[128];
} tt_client;

/* tt_client_connect dials 127.0.0.1:port and runs loop until the connect
 * callback. Returns the connect status. */
int tt_client_connect(weft_loop *loop, uint16_t port, weft_tls_ctx *tls,
                      const char *server_name, tt_client *c);
/* tt_client_start dials 127.0.0.1:port with a timeout and returns at once
 * (c->connected once the connect callback ran). Returns weft_connect's
 * result. */
int tt_client_start(weft_loop *loop, uint16_t port, weft_tls_ctx *tls,
                    const char *server_name, uint64_t timeout_ms, tt_client *c);
/* tt_client_free closes the channel and frees what c holds. */
void tt_client_free(weft_loop *loop, tt_client *c);

/* tt_send writes len bytes of the test pattern, from offset off. */
int tt_send(tt_client *c, uint64_t off, size_t len);
/* tt_check tells whether received holds exactly the pattern [0, len). */
bool tt_check(tt_client *c, uint64_t len);
/* tt_pattern is the byte at offset i of every test stream. */
uint8_t tt_pattern(uint64_t i);

/* tt_run runs loop until *flag or the deadline. Returns 0 or an error. */
int tt_run_flag(weft_loop *loop, const bool *flag);
/* tt_run_bytes runs loop until c received at least n bytes or went
 * inactive. */
int tt_run_bytes(weft_loop *loop, tt_client *c, uint64_t n);

/* ---- Checks ------------------------------------------------------------ */

/* tt_echo_check connects a client with tls (NULL: plaintext) to
 * port, expecting node-a there, checks TLS is on exactly when tls is given, and
 * checks that n bytes of the pattern come back; then frees the client. Fails
 * the running cmocka test otherwise. */
void tt_echo_check(weft_loop *loop, uint16_t port, weft_tls_ctx *tls, size_t n);

/* ---- Plaintext sockets -------------------------------------------------- */

/* tt_raw_connect opens a blocking TCP socket to 127.0.0.1:port and
 * returns it (the caller closes it); fails the running cmocka test if it
 * cannot. */
int tt_raw_connect(uint16_t port);
/* tt_raw_closed, for weft_test_run_until with arg an int *fd: skips what the
 * peer sent and tells whether it closed (or reset) the socket. */
bool tt_raw_closed(void *arg);

/* ---- Log capture -------------------------------------------------------- */

/* tt_log_capture keeps the log lines at warn and above in a buffer;
 * tt_log_contains looks for text there. */
void tt_log_capture(void);
bool tt_log_contains(const char *text);
void tt_log_clear(void);

#endif
