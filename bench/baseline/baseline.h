/* SPDX-License-Identifier: MIT */
/*
 * baseline.h: the thread-per-peer baseline that weft-bench's cluster
 * workload compares weft's messaging service against (--io=threads).
 *
 * It speaks weft's wire protocol (docs/PROTOCOL.md: the handshake, CRC32C
 * frames, msgpack envelopes, heartbeat answers) the way messaging services
 * were built before non-blocking I/O: blocking sockets and two threads per
 * peer connection. The dialer's writer thread owns each outbound
 * connection: it dials, shakes hands and then writes whatever senders have
 * queued, all of it per write() call. The acceptor's reader thread owns
 * each inbound connection: it answers the handshake, reads frames into a
 * large buffer and runs handlers inline; a response travels on the
 * responder's own outbound connection to the requester, as the protocol
 * says. Clients (non-members) get a writer thread on their connection;
 * under TLS its reader and writer share the connection's OpenSSL session
 * under a lock, over a non-blocking socket, each waiting in poll()
 * without the lock (as Java's SSLSocket lets two threads read and write).
 * One more thread per node accepts connections and times requests out.
 *
 * Deviations from weft's service, none of which the benchmark exercises:
 * one connection per peer (every class on it), no heartbeats sent (those
 * received are answered), no expiry on arrival, no inbound limit, CRCs
 * kept under TLS.
 *
 * Threads: every function may be called from any thread; callbacks run on
 * the node's reader threads, with no baseline lock held.
 */
#ifndef WBASE_BASELINE_H
#define WBASE_BASELINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <weft/messaging.h>

typedef struct wbase_node wbase_node;
/* A received request or one-way message, borrowed by its handler. */
typedef struct wbase_msg wbase_msg;

/* A verb handler; it may respond inside the call (wbase_respond). */
typedef void (*wbase_handler_cb)(wbase_node *node, wbase_msg *msg, void *arg);
/* A reply: status 0 with the payload, or a negative WEFT_E code
 * (WEFT_ETIMEDOUT, WEFT_EPEERDOWN, WEFT_ESHUTDOWN, WEFT_EOVERLOAD, or the
 * responder's error). Runs exactly once per accepted request. */
typedef void (*wbase_reply_cb)(wbase_node *node, int status, const void *data,
                               size_t len, void *arg);

/* Counters; each is exact, the set is not one snapshot. */
typedef struct wbase_stats {
	uint64_t requests;    /* requests accepted by wbase_request */
	uint64_t responses;   /* replies delivered with status 0 */
	uint64_t failed;      /* replies delivered with an error */
	uint64_t handled;     /* handler calls */
	uint64_t frames_in;   /* frames read */
	uint64_t frames_out;  /* frames queued */
	uint64_t write_calls; /* write() calls by writer threads */
	uint64_t threads;     /* threads running now */
	uint64_t connections; /* connections open now */
	uint64_t bad_input;   /* connections closed for bad frames */
	uint64_t refused;     /* connections refused at the handshake */
} wbase_stats;

/*
 * wbase_node_new makes node id of the cluster in cfg (borrowed; keep it
 * until the node is freed). Nothing runs until wbase_node_start. Returns
 * 0, WEFT_ENOTFOUND (id is not a member), WEFT_EINVAL or WEFT_ENOMEM.
 */
int wbase_node_new(const weft_msvc_config *cfg, const char *id,
                   wbase_node **out);
/*
 * wbase_node_set_tls makes the node dial and accept only TLS (1.3, mutual:
 * both sides present a certificate chaining to ca_file, and a dialer's
 * certificate, a member's or a client's, must name the id it claims).
 * Before start. Returns 0 or WEFT_ECONFIG (files unreadable, key and
 * certificate do not match).
 */
int wbase_node_set_tls(wbase_node *node, const char *cert_file,
                       const char *key_file, const char *ca_file);
/* wbase_register sets verb's handler (verbs 16 and up). Before start. */
int wbase_register(wbase_node *node, uint32_t verb, wbase_handler_cb cb,
                   void *arg);
/* wbase_node_start listens on the node's configured port (0: an
 * ephemeral one, see wbase_node_port) and starts accepting. */
int wbase_node_start(wbase_node *node);
uint16_t wbase_node_port(const wbase_node *node);
/* wbase_set_peer_addr changes where a peer is dialed, before the first
 * message to it. Returns 0 or WEFT_ENOTFOUND. */
int wbase_set_peer_addr(wbase_node *node, const char *id, const char *host,
                        uint16_t port);
size_t wbase_peer_count(const wbase_node *node);
const char *wbase_peer_id(const wbase_node *node, size_t i);
bool wbase_peer_is_self(const wbase_node *node, size_t i);

/*
 * wbase_request sends a request for verb with a copy of data to peer i.
 * Returns 0, and cb then runs exactly once (never inside this call); or
 * WEFT_EOVERLOAD (the peer's queue is full), WEFT_EINVAL, WEFT_ESHUTDOWN,
 * WEFT_ENOMEM, and cb never runs. timeout_ms 0: the config's default.
 */
int wbase_request(wbase_node *node, size_t peer, uint32_t verb,
                  const void *data, size_t len, uint64_t timeout_ms,
                  wbase_reply_cb cb, void *arg);

const void *wbase_msg_data(const wbase_msg *msg);
size_t wbase_msg_len(const wbase_msg *msg);
uint32_t wbase_msg_verb(const wbase_msg *msg);
/* wbase_msg_deadline_ms is the request's expiry (wall ms, 0: none). */
uint64_t wbase_msg_deadline_ms(const wbase_msg *msg);
/* wbase_msg_sender is the sender's member index, or SIZE_MAX for a
 * client. */
size_t wbase_msg_sender(const wbase_msg *msg);
/*
 * wbase_respond answers a request with a copy of data: inside the
 * handler, or from any thread for a detached message, which it consumes
 * (on success and failure). Returns 0, or an error as for wbase_request.
 */
int wbase_respond(wbase_msg *msg, const void *data, size_t len);
/* wbase_respond_error answers with an error response: status a negative
 * WEFT_E code (its wire code, docs/PROTOCOL.md 4.2; others become
 * APPLICATION), text a short explanation (copied, cut at 255 bytes, may
 * be NULL). As wbase_respond otherwise. */
int wbase_respond_error(wbase_msg *msg, int status, const char *text);
/*
 * wbase_msg_detach keeps a request past its handler: inside the handler,
 * it returns a copy (without the payload: read it first) that is the
 * caller's until passed to wbase_respond*, from any thread; the original
 * then counts as answered. The copy keeps a client's connection alive
 * (its response fails with WEFT_ESHUTDOWN once that connection is gone).
 * Answer it before wbase_node_free. Returns NULL for a one-way message,
 * a message already answered or detached, or when memory runs out.
 */
wbase_msg *wbase_msg_detach(wbase_msg *msg);

void wbase_node_get_stats(const wbase_node *node, wbase_stats *out);

/*
 * The key-value service of <weft/kv.h> on the baseline (kv.c): the same
 * verbs (get 64, put 65, delete 66, replicate 67, scan 68), payloads,
 * errors and
 * semantics, written as a thread-per-peer service would be: handlers run
 * on the reader threads, the replica is a hash map in mutex-protected
 * shards, and a put or delete counts its replicas' acknowledgements in
 * reply callbacks, answering the client from the one that reaches the
 * quorum (or makes it unreachable). Each write goes to each replica as a
 * replicate request of its own, as in weft's service; the writer threads
 * coalesce the frames queued meanwhile into one write() call.
 */
typedef struct wbase_kv wbase_kv;

typedef struct wbase_kv_stats {
	uint64_t gets, get_misses, puts, deletes;
	uint64_t writes_acked, quorum_failures;
	uint64_t replicas_applied, replicas_stale, replica_failures;
	uint64_t bad_requests, keys, scans;
	/* Quorum and all gets coordinated, of which the replicas disagreed,
	 * of which failed. */
	uint64_t reads_coordinated, read_disagreements, read_failures;
} wbase_kv_stats;

/* Options; zero fields take the defaults of weft_kv_opts. */
typedef struct wbase_kv_opts {
	/* Replicas that must apply a write, 1 to the member count.
	 * Default: a majority. */
	uint32_t write_quorum;
	/* How long a replica has to acknowledge a write (the client's
	 * deadline still applies). Default 2000 ms. */
	uint64_t replicate_timeout_ms;
} wbase_kv_opts;

/*
 * wbase_kv_new registers the verbs on node (not started yet) and returns
 * the store in *out; opts may be NULL. Returns 0, WEFT_EINVAL (a quorum
 * above the member count, a verb taken) or WEFT_ENOMEM.
 */
int wbase_kv_new(wbase_node *node, const wbase_kv_opts *opts, wbase_kv **out);
/* wbase_kv_free frees the store, after wbase_node_stop(node) has
 * returned (every write in progress has ended then). NULL is ignored. */
void wbase_kv_free(wbase_kv *kv);
void wbase_kv_get_stats(const wbase_kv *kv, wbase_kv_stats *out);

/* wbase_node_stop closes every connection, fails the pending requests
 * with WEFT_ESHUTDOWN and joins every thread. Idempotent. */
void wbase_node_stop(wbase_node *node);
/* wbase_node_free stops the node if needed and frees it. */
void wbase_node_free(wbase_node *node);

#endif
