/* SPDX-License-Identifier: MIT */
/* base_int.h: the baseline's internals, shared by its files. */
#ifndef WBASE_INT_H
#define WBASE_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "baseline.h"

#define WBASE_VERSION 1
#define WBASE_HELLO_MAX 4096
#define WBASE_ENV_HEADER 39
#define WBASE_REQUEST 0x01
#define WBASE_RESPONSE 0x02
#define WBASE_ONEWAY 0x04
#define WBASE_ERROR 0x08
#define WBASE_MAX_VERBS 4096
#define WBASE_STACK_BYTES (256u << 10)

/* ---- tls.c: a connection's bytes, plain or through OpenSSL --------------- */

typedef struct ssl_st SSL;

/* A TLS session and the lock that lets two threads share it. OpenSSL
 * forbids using one SSL object from two threads at once, so every call on
 * it is made under the lock; a thread that must wait for the socket waits
 * in poll() without the lock. A member connection's session is used by
 * one thread only (the dialer's writer or the acceptor's reader), over a
 * blocking socket, and never waits for the lock; a client's connection
 * carries requests in and responses out, so its reader and writer share
 * the session over a non-blocking socket (wbase__io_share). */
typedef struct wbase_tls {
	SSL *ssl;
	pthread_mutex_t lock;
} wbase_tls;

/* One socket, and its TLS session when the node runs TLS. Copies of it
 * share the session; whoever closes it owns both. */
typedef struct wbase_io {
	int fd;
	wbase_tls *tls; /* NULL: plaintext */
} wbase_io;

/* wbase__io_read reads what is there (at most n): > 0, 0 at the end, -1. */
long wbase__io_read(const wbase_io *io, void *buf, size_t n);
/* wbase__io_write writes all n bytes: 0 or -1. */
int wbase__io_write(const wbase_io *io, const void *buf, size_t n);
/* wbase__io_buffered is true when TLS holds decrypted bytes unread. */
bool wbase__io_buffered(const wbase_io *io);
/* wbase__io_share readies a TLS connection for a reader and a writer
 * thread at once: its socket becomes non-blocking, so neither waits for
 * the socket with the session's lock held. Before the second thread
 * starts; nothing to do in plaintext. Returns 0 or -1. */
int wbase__io_share(const wbase_io *io);
/* The handshakes, blocking; 0 or -1 (io->tls is then NULL). */
int wbase__tls_connect(wbase_node *node, wbase_io *io, const char *peer_id);
int wbase__tls_accept(wbase_node *node, wbase_io *io);
/* wbase__tls_peer_is checks that the peer's certificate names id. */
bool wbase__tls_peer_is(const wbase_io *io, const char *id);
/* wbase__io_close frees the TLS session and closes the socket. */
void wbase__io_close(wbase_io *io);
void wbase__tls_free(wbase_node *node);

/* ---- wire.c ------------------------------------------------------------ */

/* A decoded envelope; payload points into the frame. */
typedef struct wbase_env {
	uint64_t id;
	uint32_t verb;
	uint32_t flags;
	uint64_t created_ms, expires_ms;
	const uint8_t *payload;
	size_t len;
} wbase_env;

/* A blocking frame reader over one socket. */
typedef struct wbase_reader {
	const wbase_io *io;
	bool crc;
	size_t max_frame;
	uint8_t *buf;
	size_t cap, off, have;
} wbase_reader;

int wbase__reader_init(wbase_reader *r, const wbase_io *io, size_t max_frame);
void wbase__reader_fini(wbase_reader *r);
/* wbase__read_frame blocks until one whole frame is in; its body stays
 * valid until the next call. Returns 0, or -1 on EOF, error or a bad
 * frame (*bad is then set). timeout_ms 0: no limit. */
int wbase__read_frame(wbase_reader *r, const uint8_t **body, size_t *len,
                      uint64_t timeout_ms, bool *bad);

/* wbase__frame builds a whole frame (length, envelope, payload, CRC) in
 * out, which must hold wbase__frame_len(len) bytes. */
size_t wbase__frame_len(size_t payload_len);
void wbase__frame(uint8_t *out, uint64_t id, uint32_t verb, uint32_t flags,
                  uint64_t expires_ms, const void *payload, size_t len);
int wbase__env_decode(const uint8_t *body, size_t len, wbase_env *env);

/* The handshake, in blocking calls with a time limit. */
int wbase__hello_send(const wbase_io *io, const char *cluster, const char *id,
                      bool member);
/* Reads a HELLO: fills id (size 64) and *member. */
int wbase__hello_recv(wbase_reader *r, const char *cluster, char *id,
                      bool *member, uint64_t timeout_ms);
int wbase__reply_send(const wbase_io *io, unsigned status, const char *id,
                      size_t max_frame, const char *reason);
int wbase__reply_recv(wbase_reader *r, uint64_t timeout_ms);

/* ---- conn.c: outbound queues and their writer threads -------------------- */

/* Bytes queued for one connection, and the thread that writes them. */
typedef struct wbase_out {
	wbase_node *node;
	size_t peer; /* member index, or SIZE_MAX for a client's connection */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct evbuffer *queue; /* whole frames, awaiting the writer */
	wbase_io io;            /* fd -1 until dialed */
	bool started, stopping, failed, exited;
	uint64_t retry_ms; /* a failed connection is dialed again after */
	pthread_t thread;
	/* A client's connection: its reader and each detached request to
	 * answer on it hold a reference; the last one frees it. */
	atomic_uint refs;
} wbase_out;

int wbase__out_init(wbase_out *o, wbase_node *node, size_t peer,
                    const wbase_io *io);
/* wbase__out_push queues one frame, starting the writer thread (which
 * dials) if needed. Returns 0, WEFT_EOVERLOAD or WEFT_ESHUTDOWN. */
int wbase__out_push(wbase_out *o, const uint8_t *frame, size_t len);
void wbase__out_stop(wbase_out *o);
void wbase__out_join(wbase_out *o);
void wbase__out_fini(wbase_out *o);
/* wbase__client_out_unref drops a reference on a client's connection
 * (heap-allocated), freeing it with the last one; its writer must have
 * been stopped and joined by then. */
void wbase__client_out_unref(wbase_out *o);

/* ---- node.c ------------------------------------------------------------- */

typedef struct wbase_peer {
	char id[64];
	char host[128];
	uint16_t port;
	bool self;
	wbase_out out;
} wbase_peer;

typedef struct wbase_pending {
	uint64_t id; /* 0: free */
	uint64_t deadline_ms;
	size_t peer;
	wbase_reply_cb cb;
	void *arg;
} wbase_pending;

/* An accepted connection and its reader thread. */
typedef struct wbase_in {
	struct wbase_in *next;
	wbase_node *node;
	wbase_io io;
	pthread_t thread;
	wbase_out *client_out; /* a client's own connection, or NULL */
} wbase_in;

struct wbase_msg {
	wbase_node *node;
	wbase_in *in;
	wbase_env env;
	size_t peer;           /* the sender's member index, or SIZE_MAX */
	wbase_out *client_out; /* a client's connection, or NULL */
	bool responded;
	/* A detached copy: its own heap block, freed by the response; NULL
	 * for the reader's message on its stack. */
	struct wbase_msg *heap;
};

struct wbase_node {
	const weft_msvc_config *cfg;
	weft_msvc_limits limits;
	const char *cluster;
	size_t self;
	size_t npeers;
	wbase_peer *peers;
	struct {
		wbase_handler_cb cb;
		void *arg;
	} verbs[WBASE_MAX_VERBS];
	int listen_fd;
	uint16_t port;
	/* TLS files, or NULL: plaintext. Each connection loads its own
	 * context: OpenSSL 3.0 fills a shared certificate store's cache
	 * under a read lock (a race ThreadSanitizer reports), and a
	 * connection shakes hands only once. */
	char *tls_cert, *tls_key, *tls_ca;
	pthread_t acceptor;
	bool started;
	atomic_bool stopping;
	/* Pending requests: a table indexed by id, grown when ids wrap. */
	pthread_mutex_t pending_lock;
	wbase_pending *pending;
	size_t pending_cap, pending_len;
	uint64_t next_id;
	/* Peers' addresses may change until the first dial (any thread). */
	pthread_mutex_t addr_lock;
	/* Accepted connections. */
	pthread_mutex_t in_lock;
	wbase_in *ins;
	/* Counters. */
	atomic_uint_fast64_t requests, responses, failed, handled;
	atomic_uint_fast64_t frames_in, frames_out, write_calls;
	atomic_uint_fast64_t threads, connections, bad_input, refused;
};

/* wbase__fail_peer fails every pending request to peer with status. */
void wbase__fail_peer(wbase_node *node, size_t peer, int status);
/* wbase__start_thread starts a thread with the baseline's stack size. */
int wbase__start_thread(wbase_node *node, pthread_t *t, void *(*fn)(void *),
                        void *arg);
void wbase__thread_exit(wbase_node *node);
/* wbase__reader_main is an accepted connection's reader thread. */
void *wbase__reader_main(void *arg);
/* wbase__dial connects to peer and shakes hands; 0 or -1. */
int wbase__dial(wbase_node *node, size_t peer, wbase_io *io);
/* wbase__deliver_response completes the pending request of env. */
void wbase__deliver_response(wbase_node *node, const wbase_env *env);

#endif
