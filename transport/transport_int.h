/* SPDX-License-Identifier: MIT */
/*
 * transport_int.h: what the transport's files share, and the hooks that
 * the TLS files implement. Private to the transport module (and white-box
 * tests).
 */
#ifndef WEFT_TRANSPORT_INT_H
#define WEFT_TRANSPORT_INT_H

#include <pthread.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/un.h>

#include <event2/util.h>
#include <weft/stream.h>
#include <weft/transport.h>

#include "weft_int.h"

struct bufferevent;
struct event_base;

/* ---- Addresses (address.c) ------------------------------------------- */

/*
 * A parsed address: a numeric socket address (family AF_INET, AF_INET6,
 * AF_UNIX) or a name still to resolve (family AF_UNSPEC, host and port).
 */
typedef struct weft__addr {
	int family;
	socklen_t sa_len;
	struct sockaddr_storage sa;
	uint16_t port;
	char host[256]; /* the host part as written, brackets removed */
} weft__addr;

/* weft__addr_parse reads address text (see weft/transport.h) without
 * resolving names. Returns 0 or WEFT_EADDR. */
int weft__addr_parse(const char *text, weft__addr *out);

/*
 * weft__addr_resolve turns a parsed address into numeric ones: *list gets
 * a malloc'd array of *n addresses (one for a numeric address). passive
 * asks for addresses to bind. Blocks in getaddrinfo for a name. Returns 0,
 * WEFT_EADDR (unresolvable) or WEFT_ENOMEM.
 */
int weft__addr_resolve(const weft__addr *addr, bool passive, weft__addr **list,
                       size_t *n);

/* weft__addr_list_from_ai copies the TCP addresses of res (a getaddrinfo
 * result) into *list, a malloc'd array of *n, each with addr's host and
 * port. Returns 0, WEFT_EADDR (none) or WEFT_ENOMEM. */
struct addrinfo;
int weft__addr_list_from_ai(const weft__addr *addr, const struct addrinfo *res,
                            weft__addr **list, size_t *n);

/* ---- Connections not yet established (door.c) ------------------------ */

/* One accepted connection in the door, embedded in the server's record of
 * it. host is NULL once it is out (left, or evicted). */
struct weft__door_entry {
	TAILQ_ENTRY(weft__door_entry) link;      /* all, oldest first */
	TAILQ_ENTRY(weft__door_entry) host_link; /* its host's */
	struct weft__door_host *host;
	uint64_t seq; /* order of arrival */
};

#define WEFT__DOOR_BUCKETS 256

struct weft__door {
	pthread_mutex_t lock;
	TAILQ_HEAD(, weft__door_entry) entries;
	LIST_HEAD(, weft__door_host) buckets[WEFT__DOOR_BUCKETS];
	size_t n, nhosts;
	size_t max; /* 0: no cap */
	uint64_t seq, evicted;
	/* Called under the lock on an entry just evicted, so that the caller
	 * may still use it after the lock is dropped. */
	void (*hold)(struct weft__door_entry *e);
};

/* weft__door_host_of writes the host an address counts under: IPv4 as
 * is, IPv6 its /64, "unix" for any other family. */
void weft__door_host_of(const struct sockaddr *sa, char *out, size_t len);
int weft__door_init(struct weft__door *d,
                    void (*hold)(struct weft__door_entry *e));
void weft__door_fini(struct weft__door *d);
/*
 * weft__door_enter counts e, from host. When the door is at its cap, or
 * make_room asks for it below the cap, another entry makes room: it is
 * taken out, held, and returned in *victim for the caller to close (NULL
 * when there was none to take). Returns 0, or WEFT_ENOMEM (e is not
 * counted; *victim may still be set). Any thread.
 */
int weft__door_enter(struct weft__door *d, struct weft__door_entry *e,
                     const char *host, bool make_room,
                     struct weft__door_entry **victim);
/* weft__door_leave takes e out; false if it was out already. Any
 * thread. */
bool weft__door_leave(struct weft__door *d, struct weft__door_entry *e);
/* weft__door_set_max sets the cap and, while more entries than that are
 * in, evicts one and returns it held (call again for the next); NULL when
 * within the cap. Any thread. */
struct weft__door_entry *weft__door_set_max(struct weft__door *d, size_t max);
/* weft__door_evict_oldest evicts (and holds) one entry to make room,
 * chosen as for a newcomer at the cap; NULL when the door is empty. */
struct weft__door_entry *weft__door_evict_oldest(struct weft__door *d);
void weft__door_counts(struct weft__door *d, uint64_t *pending,
                       uint64_t *evicted);

/* ---- Resolving names without blocking (resolve.c) ------------------- */

/*
 * Runs once on the loop, never inside weft__resolve_start: status 0 with
 * addrs, a malloc'd array of n numeric addresses that is now the
 * callee's, or WEFT_EADDR (unresolvable; logged) or WEFT_ENOMEM, with
 * addrs NULL.
 */
typedef void (*weft__resolve_cb)(int status, weft__addr *addrs, size_t n,
                                 void *arg);
typedef struct weft__resolve weft__resolve;

/*
 * weft__resolve_start resolves addr's host (a name: family AF_UNSPEC)
 * with evdns, on loop, without blocking it: /etc/hosts first, then the
 * nameservers of /etc/resolv.conf (or of the file the WEFT_RESOLV_CONF
 * environment variable names). Returns 0 with a handle in *out, valid
 * until cb starts; or WEFT_ENOMEM, and cb never runs. Loop thread.
 */
int weft__resolve_start(weft_loop *loop, const weft__addr *addr,
                        weft__resolve_cb cb, void *arg, weft__resolve **out);
/* weft__resolve_cancel abandons a resolution: cb never runs (its memory
 * goes once evdns is done with it). Loop thread. */
void weft__resolve_cancel(weft__resolve *r);

/* weft__addr_format writes sa as address text ("127.0.0.1:80",
 * "[::1]:80", "unix:/p", "unix:@n", "unix:" when unnamed) into buf. */
void weft__addr_format(const struct sockaddr *sa, socklen_t len, char *buf,
                       size_t size);

/* weft__addr_of_fd writes the address of fd's own end (peer false) or
 * of its peer's as weft__addr_format does. Returns 0, or WEFT_ENOTSUP
 * when fd has none (not a socket, or no longer connected). */
int weft__addr_of_fd(int fd, bool peer, char *buf, size_t size);

/* weft__addr_is_tcp is true for AF_INET and AF_INET6. */
bool weft__addr_is_tcp(int family);

/* ---- Sockets (address.c) --------------------------------------------- */

/* weft__sock_error translates errnum (an errno value) into a WEFT_E code
 * and logs at warn what failed: "<what> <address>: <strerror>". */
int weft__sock_error(int errnum, const char *what, const char *address);

/* weft__errstr names an errno value in buf (strerror is not thread-safe)
 * and returns the text. */
const char *weft__errstr(int errnum, char *buf, size_t size);

/* weft__sock_nodelay sets TCP_NODELAY; failures are logged, not fatal. */
void weft__sock_nodelay(evutil_socket_t fd);

/* The default of weft_channel_opts.max_read_bytes (see weft/channel.h). */
#define WEFT__DEFAULT_MAX_READ (256u << 10)

/* ---- Streams (socket.c, bev.c) ----------------------------------------- */

/* weft__sock_stream_new makes the stream of a connected, non-blocking
 * socket fd (taken; closed on failure) on loop. Returns 0 or WEFT_ENOMEM. */
int weft__sock_stream_new(weft_loop *loop, evutil_socket_t fd,
                          weft_stream **out);
bool weft__stream_is_socket(const weft_stream *s);

/* weft__bev_stream_new makes the stream of bev (taken; freed on failure),
 * taking over its callbacks. Returns 0 or WEFT_ENOMEM. */
int weft__bev_stream_new(struct bufferevent *bev, weft_stream **out);
/* weft__bev_stream_get is the bufferevent of a bev stream, else NULL. */
struct bufferevent *weft__bev_stream_get(const weft_stream *s);

/*
 * weft__channel_init builds a new channel's pipeline for a transport: runs
 * init (may be NULL). Returns 0 or init's error (the caller closes the
 * channel). Activate the channel afterwards. Loop thread (handshake.c).
 */
int weft__channel_init(weft_channel *ch, weft_channel_init_cb init, void *arg);

/* ---- Transport backends (backend.c, listen.c, tls_backend.c) ---------- */

/*
 * A backend makes the connections of one kind, as nng's stream dialers and
 * listeners or Redis's ConnectionType do: servers (server.c) and clients
 * (connect.c) pick one from their options once (weft__backend_init) and
 * from then on call only its operations, so neither branches on the kind.
 * Both backends of today run over sockets: "socket" (TCP and Unix,
 * plaintext) and "tls" (the same sockets with weft's TLS stream). They
 * listen, accept and connect the same way; what differs is the stream each
 * makes over a connected socket. The in-process pair (inproc.c) has no
 * addresses to listen on or dial, so it is no backend here.
 */
typedef struct weft__backend weft__backend;

/* A bound, listening socket and what a server tells about it. */
typedef struct weft__listener {
	evutil_socket_t fd;
	char address[WEFT_ADDRESS_MAX]; /* as bound: port 0 resolved */
	uint16_t port;                  /* 0 for a Unix socket */
	/* A Unix socket's file, or "" (abstract, or TCP). */
	char unix_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	dev_t unix_dev;
	ino_t unix_ino;
} weft__listener;

/*
 * Runs once on the loop when a connection's stream is ready (status 0, s
 * now the callee's) or cannot be made (a negative WEFT_E code, s NULL and
 * the socket closed; why, borrowed until the callback returns, says what
 * OpenSSL or the socket said, or is NULL). It may run inside the operation
 * that started it: a plaintext stream is made at once.
 */
typedef void (*weft__stream_cb)(weft_stream *s, int status, const char *why,
                                void *arg);

typedef struct weft__backend_ops {
	const char *name; /* "socket", "tls" */

	/*
	 * listen binds and listens on address text (weft/transport.h's forms,
	 * a name resolved with getaddrinfo, which may block) and fills *out.
	 * Returns 0 or WEFT_EADDR, WEFT_EADDRINUSE, WEFT_ENOMEM, WEFT_EIO
	 * (logged). Any thread.
	 */
	int (*listen)(const weft__backend *b, const char *address, int backlog,
	              weft__listener *out);

	/*
	 * accept makes the stream of an accepted socket fd on loop, taking fd
	 * (closed on failure), and calls cb once; peer names the other end
	 * (borrowed until cb). Shutting fd down ends a set-up still running (a
	 * TLS handshake, waiting for the first byte) with an error soon.
	 * Loop thread.
	 */
	void (*accept)(const weft__backend *b, weft_loop *loop,
	               evutil_socket_t fd, const char *peer, weft__stream_cb cb,
	               void *arg);

	/*
	 * dial makes the stream of a client socket fd that has just connected,
	 * taking fd, and calls cb once. Returns the stream still being set up,
	 * a handle for cancel, or NULL when cb has already run (inside this
	 * call). Loop thread.
	 */
	weft_stream *(*dial)(const weft__backend *b, weft_loop *loop,
	                     evutil_socket_t fd, const char *peer,
	                     weft__stream_cb cb, void *arg);

	/* cancel abandons a dial still being set up (dial's handle): its
	 * stream and socket go, cb never runs. Loop thread. */
	void (*cancel)(weft_stream *dialing);
} weft__backend_ops;

/* A backend and the options of one server or client; what it borrows
 * must outlive the connections it sets up. */
struct weft__backend {
	const weft__backend_ops *ops;
	struct weft_tls_ctx *tls; /* tls: borrowed */
	int tls_mode;             /* tls, accept: enum weft_tls_mode */
	const char *server_name;  /* tls, dial: SNI and name check; or NULL */
	uint64_t timeout_ms;      /* bound on a set-up (handshake, sniffing) */
};

extern const weft__backend_ops weft__socket_backend;
extern const weft__backend_ops weft__tls_backend;

/* weft__backend_init fills b with the backend for tls (NULL: plaintext)
 * and its other options zero. The one place that tells the kinds apart. */
void weft__backend_init(weft__backend *b, struct weft_tls_ctx *tls);

/* weft__listen is the listen operation of the socket backends: binds the
 * first of address's resolutions that works. */
int weft__listen(const weft__backend *b, const char *address, int backlog,
                 weft__listener *out);

/* weft__listener_unlink removes l's Unix socket file, if it is still the
 * one l made (another server may have replaced it). */
void weft__listener_unlink(const weft__listener *l);

/*
 * weft__server_new is weft_server_new over the backend ops (NULL: the one
 * opts->tls asks for); group NULL: accept_loop owns every channel. Any
 * thread.
 */
int weft__server_new(weft_loop *accept_loop, weft_loop_group *group,
                     const weft_server_opts *opts, const weft__backend_ops *ops,
                     weft_server **out);

/* weft__connect_start is weft_connect_start over the backend ops (NULL:
 * the one opts->tls asks for). */
int weft__connect_start(weft_loop *loop, const char *address,
                        const weft_connect_opts *opts,
                        const weft__backend_ops *ops, weft_connect_cb cb,
                        void *arg, weft_connect_req **out);

/*
 * weft__listen_open binds and listens on addr (numeric, already resolved):
 * non-blocking, close-on-exec, SO_REUSEADDR for TCP. A Unix socket file
 * that nobody listens on is removed first; a live one is WEFT_EADDRINUSE.
 * Returns 0 and the fd, or a WEFT_E code (logged).
 */
int weft__listen_open(const weft__addr *addr, int backlog, evutil_socket_t *fd);

/*
 * weft__channel_fd is the socket under a channel (TCP, Unix, TLS, a
 * socket bufferevent), else -1. Not for the library, which reaches sockets
 * only through streams: for white-box tests that look at socket options or
 * write bytes beneath a stream.
 */
evutil_socket_t weft__channel_fd(weft_channel *ch);

/* ---- The TLS stream (tls_stream.c) ------------------------------------ */

/*
 * weft__tls_stream_new makes the TLS stream of a connected, non-blocking
 * socket fd (taken; closed on failure) on loop, its handshake not started:
 * server side (server true) or client side, where server_name (may be
 * NULL) is sent as SNI, must be named by the server's certificate and
 * keys the session cache. Returns 0, WEFT_EINVAL (a server context
 * without a certificate) or WEFT_ENOMEM. Loop thread.
 */
int weft__tls_stream_new(weft_loop *loop, struct weft_tls_ctx *tls,
                         evutil_socket_t fd, bool server,
                         const char *server_name, weft_stream **out);

/*
 * weft__tls_handshake takes s (from weft__tls_stream_new) and runs its
 * handshake on its loop's events until it is done, fails (WEFT_ETLS, the
 * detail in why and at debug level in the log), timeout_ms passes
 * (WEFT_ETIMEDOUT) or the loop shuts down (WEFT_ESHUTDOWN); then it calls
 * cb (s freed on failure): whoever asked reports the failure. peer names
 * the other end. The result is a handle for weft__tls_handshake_cancel, or
 * NULL when cb has already run (inside this call). Loop thread.
 */
weft_stream *weft__tls_handshake(weft_stream *s, const char *peer,
                                 uint64_t timeout_ms, weft__stream_cb cb,
                                 void *arg);
/* weft__tls_handshake_cancel frees a stream whose handshake runs; cb never
 * runs. */
void weft__tls_handshake_cancel(weft_stream *s);

/* weft__tls_stream_fd is the socket of a TLS stream, else -1. */
evutil_socket_t weft__tls_stream_fd(const weft_stream *s);

#endif
