/* SPDX-License-Identifier: MIT */
/*
 * rawpeer.h: a hostile peer for the trust tests. It speaks the wire
 * protocol of docs/PROTOCOL.md from the document alone, over a blocking
 * socket (plaintext, or TLS driven with OpenSSL directly): it encodes its
 * own HELLO and envelopes with msgpack-c and never calls the service's
 * code, so it can lie about anything the protocol lets a peer say.
 */
#ifndef WEFT_TESTS_RAWPEER_H
#define WEFT_TESTS_RAWPEER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <openssl/ssl.h>

struct evbuffer;

/* Envelope flags and handshake values (PROTOCOL.md sections 3 and 4). */
#define RP_REQUEST 0x01u
#define RP_RESPONSE 0x02u
#define RP_ONEWAY 0x04u
#define RP_ERROR 0x08u
#define RP_PARAMS 0x10u /* version 2 */
#define RP_CANCEL 0x20u /* version 2 */
#define RP_MEMBER 0
#define RP_CLIENT 1

typedef struct rawpeer {
	int fd;
	SSL *ssl;    /* NULL: plaintext */
	bool crc;    /* CRC trailers after the handshake */
	int status;  /* the HELLO-REPLY's status, -1 before or without one */
	int version; /* the version the HELLO-REPLY chose */
	char acceptor[64];
	uint64_t max_frame;
	uint64_t reply_flags; /* the HELLO-REPLY's flags */
	uint8_t *rbuf;        /* the last frame read */
	size_t rcap;
} rawpeer;

/* A decoded envelope; payload points into the peer's read buffer, valid
 * until the next read. */
typedef struct rp_env {
	uint64_t id;
	uint32_t verb;
	uint32_t flags;
	uint64_t created_ms, expires_ms;
	const uint8_t *payload;
	size_t len;
	/* Version 2: whether params came (their flag bit is taken out of
	 * flags), and how many pairs. */
	bool has_params;
	uint32_t params_count;
	/* For error responses: the code and text of [code, text]. */
	uint64_t error_code;
	char error_text[256];
} rp_env;

/*
 * rp_connect opens a TCP connection to 127.0.0.1:port, and with tls (not
 * NULL) runs the TLS handshake on it (server name sni, may be NULL).
 * Fails the running cmocka test if it cannot. Receive timeout 5 s.
 */
void rp_connect(rawpeer *p, uint16_t port, SSL_CTX *tls, const char *sni);

/* rp_try_connect is rp_connect that returns false instead of failing the
 * test when the connection or TLS handshake is refused. */
bool rp_try_connect(rawpeer *p, uint16_t port, SSL_CTX *tls, const char *sni);

/* rp_connect_from is rp_connect (plaintext) from source address src
 * (another 127.0.0.0/8 address), with a receive buffer of rcvbuf bytes
 * (0: the default). Returns false if the connection failed. */
bool rp_connect_from(rawpeer *p, uint16_t port, const char *src, int rcvbuf);

/*
 * rp_handshake sends HELLO (version 1, the given role, class, index; flag
 * bit 0 when on TLS) and reads the reply. Returns its status (0:
 * accepted), or -1 when the connection closed without a reply.
 */
int rp_handshake(rawpeer *p, const char *cluster, const char *id, int role,
                 int cls, int index);
/* rp_handshake_version is rp_handshake offering versions 1 to
 * max_version; p->version is the one the reply chose. */
int rp_handshake_version(rawpeer *p, const char *cluster, const char *id,
                         int role, int cls, int index, int max_version);

/* rp_handshake_flags is rp_handshake_version with the HELLO's flags as
 * given (p->reply_flags: the reply's). */
int rp_handshake_flags(rawpeer *p, const char *cluster, const char *id,
                       int role, int cls, int index, int max_version,
                       uint64_t flags);

/* rp_close closes the connection (close_notify first on TLS). */
void rp_close(rawpeer *p);

/* rp_frame appends one frame around body (CRC trailer when crc). */
void rp_frame(struct evbuffer *out, const void *body, size_t n, bool crc);

/* rp_envelope appends one frame holding the fixed-layout envelope. */
void rp_envelope(struct evbuffer *out, bool crc, uint64_t id, uint32_t verb,
                 uint32_t flags, uint64_t expires_ms, const void *payload,
                 size_t len);

/* rp_envelope_at is rp_envelope stamped created_ms (a sender whose
 * clock is off, or lies). */
void rp_envelope_at(struct evbuffer *out, bool crc, uint64_t id, uint32_t verb,
                    uint32_t flags, uint64_t created_ms, uint64_t expires_ms,
                    const void *payload, size_t len);

/* rp_envelope_params appends one frame holding a fixed-layout envelope of
 * version 2: an array of 7 with the n bytes at params after the payload
 * (flags should have RP_PARAMS), stamped now and due in 5 s. */
void rp_envelope_params(struct evbuffer *out, bool crc, uint64_t id,
                        uint32_t verb, uint32_t flags, const void *payload,
                        size_t len, const void *params, size_t n);

/* rp_send writes all of b in one write and empties it. False when the
 * peer closed the connection. */
bool rp_send(rawpeer *p, struct evbuffer *b);
bool rp_send_bytes(rawpeer *p, const void *data, size_t n);

/* rp_request sends one request frame (p->crc decides the trailer). */
bool rp_request(rawpeer *p, uint64_t id, uint32_t verb, const void *payload,
                size_t len);

/*
 * rp_read_env reads the next frame (within timeout_ms) and decodes its
 * envelope. Returns 0, -1 on EOF or error, or -2 on timeout.
 */
int rp_read_env(rawpeer *p, rp_env *out, int timeout_ms);

/* rp_read_frame reads the next frame's body into p->rbuf (within
 * timeout_ms): returns its length, -1 on EOF or error, -2 on timeout. */
ssize_t rp_read_frame(rawpeer *p, int timeout_ms);

/* rp_env_decode decodes the envelope of n bytes at body (a frame body,
 * or chunks put together) into *out, whose payload points into body;
 * fails the running test when it is not one. */
void rp_env_decode(const uint8_t *body, size_t n, rp_env *out);

/* rp_closed reads and drops until EOF or reset; true if that came within
 * timeout_ms. */
bool rp_closed(rawpeer *p, int timeout_ms);

/* A client SSL_CTX with <dir>/<name>.crt and .key (name NULL: no
 * certificate) trusting <dir>/ca.crt; the caller frees it. */
SSL_CTX *rp_tls_ctx(const char *dir, const char *name);

#endif
