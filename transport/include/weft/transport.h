/* SPDX-License-Identifier: MIT */
/*
 * weft/transport.h: where a channel's bytes come from. TCP and Unix-socket
 * servers and clients, and an in-process channel pair.
 *
 * Addresses are text:
 *   "127.0.0.1:5000"      IPv4
 *   "[::1]:5000"          IPv6 (brackets required)
 *   "localhost:5000"      a name (servers: getaddrinfo; clients: evdns)
 *   "unix:/path/to/sock"  a Unix stream socket
 *   "unix:@name"          a Linux abstract Unix socket
 * Port 0 makes a server bind an ephemeral port (see weft_server_port).
 *
 * Every transport only creates the connection: it makes the byte stream
 * of one backend (weft/stream.h: a TCP or Unix socket, TLS, an in-process
 * pair, any bufferevent) on the channel's loop (TCP sockets get
 * TCP_NODELAY), wraps it in a channel, names the peer, calls the init
 * callback to build the pipeline, and activates the channel. From then on
 * the channel (core) owns the connection. A TLS channel becomes active
 * only once its handshake is done.
 *
 * A socket's stream reads up to max_read_bytes per wake-up (libevent 2.1's
 * socket bufferevent takes 4 KiB) and writes a flush at once, with one
 * sendmsg. Transports put handlers of their own first in the pipeline,
 * after init: "weft.tls" (TLS channels) and "weft.server" (accepted
 * channels, for the server's counters). Leave them in place; the names
 * are reserved.
 */
#ifndef WEFT_TRANSPORT_H
#define WEFT_TRANSPORT_H

#include <weft/channel.h>
#include <weft/core.h>
#include <weft/loop.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A TLS context, made with the functions in <weft/tls.h>. */
typedef struct weft_tls_ctx weft_tls_ctx;

/* How a server with a TLS context treats its clients. */
enum weft_tls_mode {
	WEFT_TLS_MODE_REQUIRED = 0, /* every client must speak TLS */
	WEFT_TLS_MODE_OPTIONAL = 1, /* TLS or plaintext, told by first bytes */
};

/* The longest address text weft produces, with its NUL. */
#define WEFT_ADDRESS_MAX 128

/* ---- Servers ---------------------------------------------------------- */

typedef struct weft_server weft_server;

/*
 * Server options; zero fields take the defaults shown. init is required.
 *
 * init runs once per accepted connection on the loop that will own the
 * channel, before the channel is active. With a loop group it runs on
 * several loop threads at once, so init_arg must be safe to share. init_arg
 * and tls are borrowed: keep them alive while the server or any channel it
 * accepted may still be set up (until the loops are freed, to be safe).
 */
typedef struct weft_server_opts {
	const char *address; /* required; see the top of this file */
	int backlog;         /* 0: SOMAXCONN */
	weft_channel_init_cb init;
	void *init_arg;
	weft_channel_opts channel;     /* for every accepted channel */
	weft_tls_ctx *tls;             /* NULL: plaintext */
	int tls_mode;                  /* enum weft_tls_mode */
	uint64_t handshake_timeout_ms; /* 10000: TLS handshake, sniffing */
	/* 0: no limit. Every accepted connection counts, from accept on.
	 * At the limit a pending connection (below) makes room for a new
	 * one, which is let in while accepting pauses until the evicted one
	 * has closed; when none is pending (every channel established) the
	 * new one is closed at once, counted in rejected. */
	size_t max_channels;
	/*
	 * 0: no limit. Connections accepted and not yet established
	 * (weft_server_establish): sniffed, in their TLS handshake, or in the
	 * application's own handshake. When one more arrives at the cap, the
	 * source host holding the most pending connections (an IPv4 address,
	 * an IPv6 /64) has its oldest one closed to make room (counted in
	 * evicted), so a host that never finishes its handshakes only ever
	 * evicts its own.
	 */
	size_t max_pending;
} weft_server_opts;

/* Counters a server keeps. Any thread (a slightly stale view). */
typedef struct weft_server_stats {
	uint64_t accepted;       /* connections accepted */
	uint64_t accept_errors;  /* accept() failures (EMFILE, ...) */
	uint64_t rejected;       /* closed at once: over max_channels */
	uint64_t setup_failures; /* failed before active (init, TLS, ...) */
	uint64_t channels_open;  /* accepted channels not yet torn down */
	uint64_t pending;        /* accepted, not yet established */
	uint64_t evicted;        /* pending ones closed to make room */
} weft_server_stats;

/*
 * weft_server_new binds and listens on opts->address, accepts on the first
 * loop of group and spreads the accepted channels over all of its loops,
 * round-robin. Listening starts before it returns, so clients may connect
 * at once (the first accept happens on the loop). A name is resolved with
 * getaddrinfo, which may block. A stale Unix socket file (nobody listening)
 * is replaced; a live one gives WEFT_EADDRINUSE.
 *
 * Returns 0 and the server in *out, which stays yours until
 * weft_server_close; or WEFT_EINVAL, WEFT_EADDR, WEFT_EADDRINUSE,
 * WEFT_ENOMEM, WEFT_EIO. Any thread.
 */
WEFT_API int weft_server_new(weft_loop_group *group,
                             const weft_server_opts *opts, weft_server **out);

/* weft_server_new_on_loop is weft_server_new with a single loop that both
 * accepts and owns every channel. Any thread. */
WEFT_API int weft_server_new_on_loop(weft_loop *loop,
                                     const weft_server_opts *opts,
                                     weft_server **out);

/* weft_server_port is the bound TCP port (useful after port 0), or 0 for a
 * Unix socket. Any thread. */
WEFT_API uint16_t weft_server_port(const weft_server *srv);

/* weft_server_address is the bound address as text ("127.0.0.1:41234",
 * "[::1]:5000", "unix:/tmp/s"); it lives as long as srv. Any thread. */
WEFT_API const char *weft_server_address(const weft_server *srv);

/* weft_server_get_stats copies the server's counters into *out. Any
 * thread. */
WEFT_API void weft_server_get_stats(const weft_server *srv,
                                    weft_server_stats *out);

/*
 * weft_server_establish tells srv's door that ch, one of its accepted
 * channels, has proven itself (its handshake is done): it no longer counts
 * against max_pending and is never evicted. Idempotent; does nothing for
 * a channel no server accepted. The channel's loop thread.
 */
WEFT_API void weft_server_establish(weft_channel *ch);

/*
 * weft_server_set_limits changes max_channels and max_pending of a
 * running server (as weft_server_opts says; a lowered max_pending evicts
 * the pending connections beyond it at once). max_pending is ignored for
 * a server made without it (no door). Any thread.
 */
WEFT_API void weft_server_set_limits(weft_server *srv, size_t max_channels,
                                     size_t max_pending);

/* Runs once, on the server's accepting loop, when the server is closed. */
typedef void (*weft_server_close_cb)(weft_server *srv, void *arg);

/*
 * weft_server_close stops accepting: the listening socket is closed (a Unix
 * socket file is removed) and then cb (if not NULL) runs on the accepting
 * loop, after which srv is freed. Channels already accepted are not
 * touched; close them yourself, or shut the loops down. Connections still
 * being set up (a TLS handshake, the first byte in optional mode, the
 * hand-over to their loop) are dropped, without calling init, when their
 * set-up ends after this call; one ending at the same time on another
 * loop may still call init, so init_arg may be freed, while the loops go
 * on, once a task posted after this call has run on each loop. Idempotent:
 * a second call before cb has run is ignored (its cb never runs). If the
 * accepting loop has stopped (its group was shut down), cb runs when the
 * loop is freed, with the loop's other queued tasks. Call it before
 * freeing the loops. Any thread.
 */
WEFT_API void weft_server_close(weft_server *srv, weft_server_close_cb cb,
                                void *arg);

/*
 * Shutting down the accepting loop (weft_loop_shutdown or
 * weft_loop_group_shutdown) also stops accepting, through a shutdown hook;
 * the server must still be closed with weft_server_close to free it.
 */

/* ---- Clients ---------------------------------------------------------- */

/* Connect options; zero fields take the defaults shown. */
typedef struct weft_connect_opts {
	uint64_t timeout_ms;       /* 10000: connect (and TLS handshake) */
	weft_channel_init_cb init; /* NULL: an empty pipeline */
	void *init_arg;
	weft_channel_opts channel;
	weft_tls_ctx *tls;       /* NULL: plaintext */
	const char *server_name; /* TLS SNI and name check; NULL: host part */
} weft_connect_opts;

/*
 * Runs exactly once on the loop: status 0 with the active channel, or a
 * negative WEFT_E code with ch NULL (WEFT_ECONNREFUSED, WEFT_ETIMEDOUT,
 * WEFT_EADDR, WEFT_ETLS, WEFT_ECANCELED, WEFT_ESHUTDOWN, WEFT_EIO, ...).
 * ch is borrowed: take a reference (weft_channel_ref) to keep it past its
 * inactive event.
 */
typedef void (*weft_connect_cb)(weft_channel *ch, int status, void *arg);

/* A pending connect, for weft_connect_cancel. */
typedef struct weft_connect_req weft_connect_req;

/*
 * weft_connect connects to address without blocking the loop. A name is
 * resolved on the loop with libevent's evdns (/etc/hosts, then the
 * nameservers of /etc/resolv.conf, or of the file the WEFT_RESOLV_CONF
 * environment variable names), anew for every connect, so that a
 * reconnect follows a changed record. Each address a name resolves to is
 * tried in turn within the one timeout, resolution included. On success the
 * channel gets TCP_NODELAY, its pipeline from opts->init, the peer text, and is
 * activated before cb runs.
 *
 * opts may be NULL (defaults, empty pipeline) and is copied, but init_arg
 * and tls are borrowed until cb has run. Returns 0, after which cb runs
 * exactly once, never inside this call; or WEFT_EINVAL / WEFT_EADDR (bad
 * address text) / WEFT_ENOMEM / WEFT_ESHUTDOWN, and cb never runs. Any
 * thread.
 */
WEFT_API int weft_connect(weft_loop *loop, const char *address,
                          const weft_connect_opts *opts, weft_connect_cb cb,
                          void *arg);

/*
 * weft_connect_start is weft_connect that also gives a handle for
 * weft_connect_cancel in *out, valid until cb starts to run. Loop thread
 * (the handle could be gone before another thread saw it).
 */
WEFT_API int weft_connect_start(weft_loop *loop, const char *address,
                                const weft_connect_opts *opts,
                                weft_connect_cb cb, void *arg,
                                weft_connect_req **out);

/*
 * weft_connect_cancel abandons a pending connect: its socket is closed and
 * cb runs soon after, on the loop, with WEFT_ECANCELED (never inside this
 * call). Cancelling a request whose cb has started is not allowed. Loop
 * thread.
 */
WEFT_API void weft_connect_cancel(weft_connect_req *req);

/* ---- A socket of your own --------------------------------------------- */

/*
 * weft_channel_new_socket wraps a connected stream socket (TCP or Unix) in
 * a channel on loop, with the transport's own socket stream. fd must be
 * non-blocking; the channel takes it, also on failure (closed then). The
 * peer text is set from the socket's address. Build the pipeline, then
 * call weft_channel_activate. Returns 0 or WEFT_ENOMEM. Loop thread.
 */
WEFT_API int weft_channel_new_socket(weft_loop *loop, int fd,
                                     const weft_channel_opts *opts,
                                     weft_channel **out);

/* ---- Any bufferevent -------------------------------------------------- */

struct bufferevent;

/*
 * weft_channel_new wraps a connected bufferevent of loop's event_base in a
 * channel (its stream moves bytes between the bufferevent's buffers and
 * the channel's). The channel takes bev, also on failure (freed then; the
 * fd is closed if bev has BEV_OPT_CLOSE_ON_FREE), and owns its callbacks.
 * The channel holds one reference for being open; *out is borrowed unless
 * you take a reference. Call weft_channel_activate once the pipeline is
 * built. Returns 0 or WEFT_ENOMEM. Loop thread.
 */
WEFT_API int weft_channel_new(weft_loop *loop, struct bufferevent *bev,
                              const weft_channel_opts *opts,
                              weft_channel **out);

/* ---- In-process pair -------------------------------------------------- */

/*
 * weft_inproc_pair makes two connected channels on loop, over a libevent
 * bufferevent pair: bytes written on one are read on the other, with the
 * same water marks and back-pressure as a socket, and closing one end
 * gives the other EOF (it goes inactive). No system calls are made. Each
 * init (either may be NULL) builds its end's pipeline; both ends are then
 * activated, a first. The peer text of both is "inproc".
 *
 * Returns 0 with both channels in *a and *b (borrowed, as from
 * weft_channel_new), or WEFT_ENOMEM, or an init's error (both ends are
 * then closed and *a, *b untouched). opts may be NULL. Loop thread (or
 * before the loop runs).
 */
WEFT_API int weft_inproc_pair(weft_loop *loop, const weft_channel_opts *opts,
                              weft_channel_init_cb init_a, void *arg_a,
                              weft_channel_init_cb init_b, void *arg_b,
                              weft_channel **a, weft_channel **b);

/* ---- Address text ----------------------------------------------------- */

/*
 * weft_address_check tells whether address is well-formed text (it does
 * not resolve names). Returns 0 or WEFT_EADDR. Any thread.
 */
WEFT_API int weft_address_check(const char *address);

/*
 * weft_address_join writes host and port as the address text weft_connect
 * takes: "host:port", or "[host]:port" when host is an IPv6 literal (it
 * holds a ':'). Like snprintf, it writes at most len bytes, always
 * terminated when len > 0. Returns the length the whole text needs
 * (without the terminator): the text was cut if that is len or more.
 * Any thread.
 */
WEFT_API size_t weft_address_join(const char *host, uint16_t port, char *buf,
                                  size_t len);

/*
 * weft_address_split splits "host:port" or "[v6]:port", checked as
 * weft_address_check checks it, into host (brackets removed, terminated)
 * and *port. Returns 0, or WEFT_EADDR: the text is not such an address
 * (a unix: path included) or its host does not fit in host_len bytes.
 * Any thread.
 */
WEFT_API int weft_address_split(const char *address, char *host,
                                size_t host_len, uint16_t *port);

#ifdef __cplusplus
}
#endif

#endif
