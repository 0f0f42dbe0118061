/* SPDX-License-Identifier: MIT */
/*
 * transport_int.h: what the transport's files share, and the hooks that
 * tls.c implements. Private to the transport module (and white-box tests).
 */
#ifndef WEFT_TRANSPORT_INT_H
#define WEFT_TRANSPORT_INT_H

#include <sys/socket.h>

#include <event2/util.h>
#include <weft/stream.h>
#include <weft/transport.h>

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
 * init (may be NULL), then puts the TLS handler first for a TLS stream.
 * Returns 0, or init's error or WEFT_ENOMEM (the caller closes the
 * channel). Activate the channel afterwards. Loop thread (handshake.c).
 */
int weft__channel_init(weft_channel *ch, weft_channel_init_cb init, void *arg,
                       size_t max_read_bytes);

/* ---- Listening sockets (listen.c) -------------------------------------- */

/*
 * weft__listen_open binds and listens on addr (numeric, already resolved):
 * non-blocking, close-on-exec, SO_REUSEADDR for TCP. A Unix socket file
 * that nobody listens on is removed first; a live one is WEFT_EADDRINUSE.
 * Returns 0 and the fd, or a WEFT_E code (logged).
 */
int weft__listen_open(const weft__addr *addr, int backlog, evutil_socket_t *fd);

/* ---- Getting a bufferevent ready (handshake.c) ------------------------- */

/* Runs once when bev can carry application data (status 0, bev now the
 * caller's) or cannot (a WEFT_E code, bev freed, NULL; why, borrowed
 * until the callback returns, says what OpenSSL or the socket said, or is
 * NULL). */
typedef void (*weft__ready_cb)(struct bufferevent *bev, int status,
                               const char *why, void *arg);

/*
 * weft__bev_when_ready calls cb at once (inside this call) for a plain
 * bufferevent or an OpenSSL one whose handshake is done; otherwise it
 * takes over bev's callbacks until the handshake finishes, fails
 * (WEFT_ETLS, the detail in why and at debug level in the log) or
 * timeout_ms passes (WEFT_ETIMEDOUT), and calls cb then: whoever asked
 * reports the failure. peer names the other end. The result is a
 * handle for weft__bev_ready_cancel, or NULL when cb has already run. Loop
 * thread of bev.
 */
typedef struct weft__ready weft__ready;
weft__ready *weft__bev_when_ready(weft_loop *loop, struct bufferevent *bev,
                                  const char *peer, uint64_t timeout_ms,
                                  weft__ready_cb cb, void *arg);
/* weft__bev_ready_cancel frees the bufferevent and the wait; cb never
 * runs. */
void weft__bev_ready_cancel(weft__ready *ready);

/* weft__bev_error_status names why a bufferevent event failed: WEFT_ETLS
 * for an OpenSSL error (its detail in why, len bytes, and at debug level
 * in the log), otherwise the errno translation. what and peer are for the
 * log line. */
int weft__bev_error_status(struct bufferevent *bev, short events,
                           const char *what, const char *peer, char *why,
                           size_t len);

/* ---- TLS hooks: implemented by tls.c (tls_stub.c without it) ----------- */

/*
 * Runs once on base's loop thread, never inside weft__tls_bev_accept: with
 * status 0 and a bufferevent that is now the caller's (a TLS client), or
 * status 0, bev NULL and plain_fd the caller's (a plaintext client in
 * optional mode, its first bytes still in the socket), or with a negative
 * WEFT_E code, bev NULL and plain_fd -1 (the fd has been closed).
 */
typedef void (*weft__tls_accept_cb)(struct bufferevent *bev,
                                    evutil_socket_t plain_fd, int status,
                                    void *arg);

/*
 * weft__tls_bev_accept makes the bufferevent for an accepted connection.
 * It takes fd in every case (closed on failure). mode is an enum
 * weft_tls_mode.
 *
 * It either finishes at once: returns 0 with *out set (cb never runs); or
 * later, e.g. to sniff the first bytes in WEFT_TLS_MODE_OPTIONAL: returns
 * 0 with *out NULL, and then calls cb exactly once (at the latest after
 * timeout_ms, with WEFT_ETIMEDOUT). The bufferevent is a
 * bufferevent_openssl (server side, its handshake started or finished); in
 * optional mode a plaintext client comes as its fd instead (sniffed bytes
 * are left in the socket with MSG_PEEK). Options: BEV_OPT_CLOSE_ON_FREE,
 * never BEV_OPT_THREADSAFE. The transport waits for an unfinished handshake
 * itself (weft__bev_when_ready), so either is fine. Returns a negative
 * WEFT_E code on failure (cb never runs). Loop thread of base.
 */
int weft__tls_bev_accept(struct weft_tls_ctx *tls, int mode,
                         struct event_base *base, evutil_socket_t fd,
                         uint64_t timeout_ms, weft__tls_accept_cb cb, void *arg,
                         struct bufferevent **out);

/*
 * weft__tls_bev_connect makes a client bufferevent_openssl over fd, which
 * is already connected; it takes fd (closed on failure). server_name (may
 * be NULL for a numeric address) is for SNI and the certificate name check.
 * The handshake may still be running: the transport waits for it
 * (BEV_EVENT_CONNECTED) before the channel exists. Options as above.
 * Returns 0 with *out set, or a negative WEFT_E code. Loop thread of base.
 */
int weft__tls_bev_connect(struct weft_tls_ctx *tls, struct event_base *base,
                          evutil_socket_t fd, const char *server_name,
                          struct bufferevent **out);

/*
 * weft__tls_channel_install puts the "weft.tls" handler first in a channel
 * over a bufferevent_openssl (nothing for other channels): big reads,
 * OpenSSL errors as WEFT_ETLS, close_notify on a graceful close. The
 * transport calls it once the channel exists, before it is active.
 * Returns 0 or WEFT_ENOMEM. Loop thread. (tls_channel.c; also declared in
 * tls_int.h.)
 */
int weft__tls_channel_install(weft_channel *ch, size_t max_read_bytes);

#endif
