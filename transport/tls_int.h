/* SPDX-License-Identifier: MIT */
/*
 * tls_int.h: what the TLS files of the transport share (tls.c: contexts;
 * tls_session.c: generations and the session cache; tls_stream.c: the
 * stream and its handshake; tls_backend.c: the backend that accepts,
 * sniffs and dials; tls_channel.c: peer identity). Private to the
 * transport module.
 */
#ifndef WEFT_TLS_INT_H
#define WEFT_TLS_INT_H

#include <stdatomic.h>

#include <openssl/ssl.h>
#include <weft/tls.h>

#include "transport_int.h"

/* Counters shared by a context and every SSL_CTX it ever loaded. */
struct weft__tls_shared {
	atomic_int refs;
	atomic_uint_fast64_t handshakes_started;
	atomic_uint_fast64_t handshakes_completed;
	atomic_uint_fast64_t handshakes_resumed;
	atomic_uint_fast64_t plaintext_accepted;
	atomic_uint_fast64_t reloads;
	atomic_uint_fast64_t reload_failures;
	atomic_uint_fast64_t ktls_send;
	atomic_uint_fast64_t ktls_recv;
};

/* weft__tls_shared_unref drops a reference to the counters. */
void weft__tls_shared_unref(struct weft__tls_shared *shared);

static inline void
weft__tls_shared_ref(struct weft__tls_shared *shared)
{
	atomic_fetch_add_explicit(&shared->refs, 1, memory_order_relaxed);
}

static inline void
weft__tls_count(atomic_uint_fast64_t *counter)
{
	atomic_fetch_add_explicit(counter, 1, memory_order_relaxed);
}

/* ---- Generations (tls_session.c) --------------------------------------- */

/* weft__tls_generation_init sets up the ex_data slot, once per process.
 * Returns 0 or WEFT_ENOMEM. Any thread. */
int weft__tls_generation_init(void);

/*
 * weft__tls_generation_attach gives a new SSL_CTX its generation (taking a
 * reference to shared) and the callbacks that use it: handshake counting
 * and the client session cache. SSL_CTX_free frees the generation. Returns
 * 0 or WEFT_ENOMEM.
 */
int weft__tls_generation_attach(SSL_CTX *sctx, struct weft__tls_shared *shared);

/* weft__tls_session_offer offers a client SSL the session cached for its
 * server name, if there is a live one. Any thread. */
void weft__tls_session_offer(SSL *ssl);

/* A dial that waits for another dial's ticket (tls_session.c). */
struct weft__tls_hold;

/* How a held dial is woken: ready(arg), run on loop. */
struct weft__tls_wake {
	weft_loop *loop;
	void (*ready)(void *arg);
	void *arg;
};

/* weft__tls_session_claim returns this for a dial that waits. */
#define WEFT__TLS_HELD 1

/*
 * weft__tls_session_claim readies a client SSL's first handshake message:
 * it offers the session cached for its server name. Without one, while
 * another dial's full handshake to that name runs (begun less than its
 * bound_ms ago), it returns WEFT__TLS_HELD with *hold and *until_ns (when
 * the wait ends, weft_now_ns): wake->ready runs on wake->loop once that
 * handshake stored its ticket or its SSL went. The caller then, or at
 * *until_ns, calls weft__tls_session_unhold and weft__tls_session_offer
 * and sends its hello. Otherwise it returns 0: send the hello now; if no
 * session was offered and bound_ms is not 0, this SSL leads (the dials to
 * its name in the next bound_ms wait for its ticket). Names that are
 * addresses (no session cache) and contexts without tickets never wait.
 * Loop thread of wake->loop.
 */
int weft__tls_session_claim(SSL *ssl, uint64_t bound_ms,
                            const struct weft__tls_wake *wake,
                            struct weft__tls_hold **hold, uint64_t *until_ns);

/* weft__tls_session_unhold ends ssl's wait and frees hold (or leaves it to
 * its posted wake-up, which then does not call ready). Loop thread. */
void weft__tls_session_unhold(SSL *ssl, struct weft__tls_hold *hold);

/* weft__tls_session_done is called before a client SSL is freed: if it led
 * and no ticket came, the dials waiting for it go on at once. Any
 * thread. */
void weft__tls_session_done(SSL *ssl);

/* ---- Contexts and connections (tls.c) ---------------------------------- */

/*
 * weft__tls_ssl_new makes a connection's SSL from the context's current
 * SSL_CTX (the SSL holds its own reference, so a reload leaves it alone).
 * For a client (server == false), server_name (may be NULL) is sent as SNI,
 * the server's certificate must name it, and it keys the session cache.
 * Returns 0 and *out, WEFT_EINVAL (a server without a certificate) or
 * WEFT_ENOMEM; failures are logged. Any thread.
 */
int weft__tls_ssl_new(weft_tls_ctx *tls, bool server, const char *server_name,
                      SSL **out);

/* weft__tls_count_plaintext counts a plaintext client let in by optional
 * mode. Any thread. */
void weft__tls_count_plaintext(weft_tls_ctx *tls);

/*
 * weft__tls_errors pops OpenSSL's error queue of this thread into buf as
 * "reason; reason" (ERR_error_string_n), leaving the queue empty. Writes
 * "no detail" when it was empty. Returns buf.
 */
const char *weft__tls_errors(char *buf, size_t len);

/* ---- Streams (tls_stream.c, tls_channel.c) ---------------------------- */

/* weft__tls_stream_ssl is the SSL of a TLS stream, else NULL. */
SSL *weft__tls_stream_ssl(const weft_stream *s);

/* weft__tls_ktls_offered tells whether the kernel offers the tls TCP
 * upper layer (kTLS), read once per process. Any thread. */
bool weft__tls_ktls_offered(void);

/* weft__tls_ssl_identity is weft_tls_peer_identity for ssl (NULL:
 * WEFT_EINVAL). */
int weft__tls_ssl_identity(SSL *ssl, char *buf, size_t len);

#endif
