/* SPDX-License-Identifier: MIT */
/*
 * weft/tls.h: TLS (OpenSSL 3) for weft servers and clients.
 *
 * A weft_tls_ctx holds a certificate chain, its private key and the CA
 * bundle that peers' certificates must chain to. One context serves both
 * sides: a node accepts and dials with the same context and presents the
 * same certificate either way (mutual TLS). Hand it to a server or a
 * client in its options (weft/transport.h: tls, tls_mode, server_name);
 * the channel's stream is then weft's own TLS stream (OpenSSL on the
 * socket, records sized to the traffic, kernel TLS where asked for and
 * offered) and the pipeline above it sees plaintext.
 *
 * Defaults: TLS 1.3 only (1.2 on request); TLS 1.3 suites AES-128-GCM,
 * AES-256-GCM, ChaCha20-Poly1305, TLS 1.2 ciphers ECDHE with AEAD only; no
 * renegotiation, no compression. Both sides must present a certificate
 * that chains to ca_file, or the handshake fails: a server refuses a
 * client without one. A client given a server_name also checks that the
 * server's certificate names it. Sessions resume with TLS 1.3 tickets
 * (one per connection); a client caches the last session per server_name.
 * Dials to one server_name that start while a full handshake to it runs
 * wait for its ticket and resume from it (at most a quarter of their
 * timeout; see weft_tls(3), SESSIONS). Reloading the context (a new
 * certificate, a new CA) starts a new session space: sessions from before
 * do not resume.
 *
 * Identity: a certificate's identity is its first subjectAltName of type
 * DNS or, when it has none, the first commonName of its subject. Node
 * certificates carry the node id as a DNS name (scripts/gen-certs.sh).
 * weft_tls_peer_check accepts any of the DNS names.
 *
 * Closing: when a channel closes gracefully (all its bytes written), weft
 * sends TLS close_notify before closing the socket. A peer that closes
 * its socket without close_notify is treated as end of stream, as with
 * plain TCP (weft's length-prefixed frames expose a truncated message);
 * OpenSSL errors close the channel with WEFT_ETLS and log OpenSSL's
 * reason.
 */
#ifndef WEFT_TLS_H
#define WEFT_TLS_H

#include <weft/channel.h>
#include <weft/core.h>
#include <weft/transport.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Protocol versions for weft_tls_opts.min_version. */
#define WEFT_TLS_VERSION_1_2 12
#define WEFT_TLS_VERSION_1_3 13

/* How strictly peers' certificates are checked. */
enum weft_tls_verify {
	/* The peer must present a certificate that chains to ca_file. */
	WEFT_TLS_VERIFY_REQUIRED = 0,
	/* A server also lets in clients without a certificate (they have
	 * no identity); a certificate that is presented must verify. */
	WEFT_TLS_VERIFY_OPTIONAL = 1,
	/* Nothing is checked. Encryption without authentication: for tests
	 * and benchmarks only. */
	WEFT_TLS_VERIFY_NONE = 2,
};

/* Context options; zero fields take the defaults shown. */
typedef struct weft_tls_opts {
	/* PEM: this side's certificate, then its intermediates. With
	 * key_file; both NULL makes a client-only context that presents no
	 * certificate. */
	const char *cert_file;
	const char *key_file; /* PEM private key, not encrypted */
	/* PEM: the CA certificates peers must chain to. Required unless
	 * verify is WEFT_TLS_VERIFY_NONE. */
	const char *ca_file;
	int min_version;          /* 0: WEFT_TLS_VERSION_1_3 */
	const char *ciphers;      /* TLS 1.2 list; NULL: the default above */
	const char *ciphersuites; /* TLS 1.3 list; NULL: the default above */
	enum weft_tls_verify verify;
	uint32_t session_lifetime_s; /* 0: 7200, how long tickets resume */
	bool no_resumption; /* every connection does a full handshake */
	/* 0: 64 KiB. How much ciphertext one socket read may take; the
	 * buffer is allocated per connection. */
	size_t read_buffer_bytes;
	/* Ask for kernel TLS (SSL_OP_ENABLE_KTLS); silently unused where
	 * the kernel or OpenSSL lacks it. OpenSSL then writes the socket
	 * with write(2), which cannot say MSG_NOSIGNAL: making a context
	 * with ktls on sets SIGPIPE to ignored if it is at its default (the
	 * one signal disposition weft ever changes, and only when asked). */
	bool ktls;
} weft_tls_opts;

/*
 * weft_tls_ctx_new loads the files named in opts (the paths are copied and
 * kept for weft_tls_ctx_reload). Returns 0 and a context holding one
 * reference in *out; WEFT_EINVAL for bad options; WEFT_ECONFIG when a file
 * is missing or unreadable, or the key does not match the certificate
 * (logged with OpenSSL's reason); WEFT_ENOMEM. Any thread.
 */
WEFT_API int weft_tls_ctx_new(const weft_tls_opts *opts, weft_tls_ctx **out);

/* weft_tls_ctx_ref takes a reference. Any thread. */
WEFT_API void weft_tls_ctx_ref(weft_tls_ctx *ctx);
/*
 * weft_tls_ctx_unref drops one; the last frees the context. Connections
 * made with it keep what they need (OpenSSL's own reference), so dropping
 * it while they run is fine. Any thread.
 */
WEFT_API void weft_tls_ctx_unref(weft_tls_ctx *ctx);

/*
 * weft_tls_ctx_reload reads the files again. On success, connections made
 * from now on use the new certificate, key and CA bundle; connections
 * already open continue with what they had. Returns 0 then. On failure
 * nothing changes, the reason is logged and WEFT_ECONFIG (or WEFT_ENOMEM)
 * is returned. Any
 * thread (it blocks on file reads: call it from a signal-handling thread,
 * not from a loop thread on a busy node).
 */
WEFT_API int weft_tls_ctx_reload(weft_tls_ctx *ctx);

/* Counters a context keeps, over every loop using it. */
typedef struct weft_tls_stats {
	uint64_t handshakes_started;   /* both sides */
	uint64_t handshakes_completed; /* of which completed */
	uint64_t handshakes_resumed;   /* of which resumed a session */
	uint64_t plaintext_accepted;   /* optional mode: plaintext clients */
	uint64_t reloads;              /* successful reloads */
	uint64_t reload_failures;
	uint64_t ktls_send; /* handshakes after which the kernel encrypts */
	uint64_t ktls_recv; /* handshakes after which the kernel decrypts */
	/* The kernel offers kernel TLS (the tls TCP upper layer): with
	 * weft_tls_opts.ktls, connections then try it. */
	bool ktls_offered;
} weft_tls_stats;

/* weft_tls_ctx_get_stats copies the counters (a slightly stale view). Any
 * thread. */
WEFT_API void weft_tls_ctx_get_stats(const weft_tls_ctx *ctx,
                                     weft_tls_stats *out);

/* weft_tls_is_active is true for a channel that runs TLS (false for
 * plaintext, also a plaintext client let in by optional mode, and once the
 * channel is closed). Loop thread. */
WEFT_API bool weft_tls_is_active(weft_channel *ch);

/*
 * weft_tls_peer_identity writes the identity (see the top of this file) of
 * the certificate the peer presented and that verified, NUL-terminated,
 * into buf. Returns 0; WEFT_EINVAL for a channel without TLS (or closed);
 * WEFT_EAUTH when the peer presented no certificate, or it did not verify,
 * or it has no usable name; WEFT_ETOOBIG when len is too small. Loop
 * thread.
 */
WEFT_API int weft_tls_peer_identity(weft_channel *ch, char *buf, size_t len);

/*
 * weft_tls_peer_check tells whether the peer's verified certificate names
 * id: one of its DNS subjectAltNames equals id, or it has none and its
 * commonName does (exact, case-sensitive, no wildcards). Returns 0,
 * WEFT_EAUTH (no match, no verified certificate) or WEFT_EINVAL (no TLS).
 * The messaging service calls it to match the node id a peer claims.
 * Loop thread.
 */
WEFT_API int weft_tls_peer_check(weft_channel *ch, const char *id);

/* What a TLS channel negotiated, for logs and benchmarks. */
typedef struct weft_tls_info {
	const char *version; /* "TLSv1.3": constant strings from OpenSSL */
	const char *cipher;  /* "TLS_AES_128_GCM_SHA256" */
	bool resumed;        /* the handshake resumed a session */
	bool ktls_send;      /* the kernel encrypts what we send */
	bool ktls_recv;      /* the kernel decrypts what we read */
} weft_tls_info;

/* weft_tls_get_info fills *out for a TLS channel. Returns 0 or WEFT_EINVAL
 * (no TLS). Loop thread. */
WEFT_API int weft_tls_get_info(weft_channel *ch, weft_tls_info *out);

/* weft_tls_version_parse reads "1.2" or "1.3" (as in a config file) into
 * a WEFT_TLS_VERSION_ value. Returns 0 or WEFT_EINVAL. Any thread. */
WEFT_API int weft_tls_version_parse(const char *text, int *out);

#ifdef __cplusplus
}
#endif

#endif
