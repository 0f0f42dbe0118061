/* SPDX-License-Identifier: MIT */
/* msvc_int.h: the messaging service's private types and functions. */
#ifndef WEFT_MSVC_INT_H
#define WEFT_MSVC_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/types.h>
#include <time.h>

#include <event2/buffer.h>

#include <weft/channel.h>
#include <weft/chunk.h>
#include <weft/compress.h>
#include <weft/envelope.h>
#include <weft/histogram.h>
#include <weft/messaging.h>
#include <weft/metrics.h>
#include <weft/transport.h>

#include "weft_int.h"

/* ---- Configuration ----------------------------------------------------- */

struct weft__msvc_node {
	char id[WEFT_MSVC_MAX_ID + 1];
	char *host;
	uint16_t port;
	int line; /* of its [node ID] header; 0: added in code */
};

struct weft__msvc_kv {
	char *section, *key, *value;
	int line; /* in the file it was read from; 0: set in code */
};

struct weft_msvc_config {
	char cluster[WEFT_MSVC_MAX_ID + 1];
	struct weft__msvc_node *nodes;
	size_t nodes_len, nodes_cap;
	weft_msvc_limits limits;
	weft_msvc_tls_config tls;
	struct weft__msvc_kv *extra;
	size_t extra_len, extra_cap;
	char *source; /* the file read, for messages; NULL: built in code */
};

bool weft__msvc_id_is_valid(const char *id);
void weft__msvc_limits_defaults(weft_msvc_limits *l);
ssize_t weft__msvc_config_find(const weft_msvc_config *cfg, const char *id);
int weft__msvc_config_add_extra(weft_msvc_config *cfg, const char *section,
                                const char *key, const char *value, int line);
int weft__msvc_config_set_source(weft_msvc_config *cfg, const char *source);
/* The file name for messages ("<config>" for a config built in code). */
const char *weft__msvc_config_source(const weft_msvc_config *cfg);

/* conf.c: the values' grammar and key tables (weft.conf(5)). */
bool weft__conf_parse_size(const char *s, uint64_t *out);
bool weft__conf_parse_duration(const char *s, uint64_t *out);
bool weft__conf_parse_bool(const char *s, bool *out);
bool weft__conf_parse_address(const char *s, weft_msvc_conf_address *out);
const weft_msvc_conf_key *weft__conf_find(const weft_msvc_conf_key *keys,
                                          size_t n, const char *name);
/* weft__conf_set parses value as k says into dst (the section's struct);
 * 0, or WEFT_ECONFIG with the reason in why. */
int weft__conf_set(const weft_msvc_conf_key *k, const char *value, void *dst,
                   char *why, size_t whylen);
/* weft__conf_apply finds key in keys and sets it; 0, or WEFT_ECONFIG with
 * "[section] key: reason" or "[section]: unknown key 'key'" in msg. */
int weft__conf_apply(const char *section, const weft_msvc_conf_key *keys,
                     size_t n, const char *key, const char *value, void *dst,
                     char *msg, size_t msglen);
/* weft__msvc_config_validate checks what the values mean together (the
 * bounds of one value are in the key tables): 0, or WEFT_ECONFIG with
 * "FILE:LINE: [section] key: reason" in err. */
int weft__msvc_config_validate(const weft_msvc_config *cfg, char *err,
                               size_t errlen);

/* Hard caps on what a configuration may ask for (docs/WEFTD.md). */
#define WEFT__MSVC_MAX_NODES 1024 /* members of one cluster */
#define WEFT__MSVC_MAX_NODES_WHY                                               \
	"every member keeps connections to every other and heartbeats "        \
	"them, which past this costs more than it serves"
#define WEFT__MSVC_MAX_LOOPS 256 /* loops one service spreads over */
#define WEFT__MSVC_LOOPS_PER_CPU 4
#define WEFT__MSVC_MAX_WORKERS 1024
#define WEFT__MSVC_WORKERS_PER_CPU 32
#define WEFT__MSVC_MAX_CONNECTIONS_PER_CLASS 64

/* Descriptors kept beyond the members' connections: the listener, the
 * loops' own, files, the metrics endpoint. */
#define WEFT__MSVC_FD_SLACK 64
/* What a file limit leaves a node for the connections it accepts. */
struct weft__msvc_fd_caps {
	uint64_t reserve;    /* the members' connections, and a slack */
	uint32_t clients;    /* client connections at once */
	uint32_t handshakes; /* connections in their handshake at once */
	bool lowered;        /* below max_clients or max_handshakes */
};
/* weft__msvc_fd_caps derives the caps for a node of members members
 * under a file limit of fd_limit descriptors (UINT64_MAX: none): what the
 * limit leaves once every member's connections (each class, dialled and
 * accepted) and a slack are provided for, handshakes taking at most a
 * quarter of it. The one derivation for the guard at start and for the
 * configuration check. */
void weft__msvc_fd_caps(const weft_msvc_limits *l, size_t members,
                        uint64_t fd_limit, struct weft__msvc_fd_caps *out);
/* weft__msvc_fd_limit is the process's file limit now (RLIMIT_NOFILE's
 * soft limit), UINT64_MAX when there is none or it cannot be read. */
uint64_t weft__msvc_fd_limit(void);
int weft__msvc_config_copy(const weft_msvc_config *src, weft_msvc_config **out);

/* ---- Wire format (wire.c, docs/PROTOCOL.md) ---------------------------- */

#define WEFT__MSVC_VERSION_MIN 1
#define WEFT__MSVC_VERSION_MAX 2
#define WEFT__MSVC_HELLO_MAX 4096
/* HELLO flags (docs/PROTOCOL.md 3.1): TLS without CRCs, assembles chunks,
 * asks for compression with the algorithm a bit of which is
 * WEFT__MSVC_HELLO_ALG(alg). The reply's (3.2): CRCs, chunks both ways,
 * the algorithm both ways. */
#define WEFT__MSVC_HELLO_TLS 0x01u
#define WEFT__MSVC_REPLY_CRC 0x01u
#define WEFT__MSVC_HELLO_CHUNKS 0x02u
#define WEFT__MSVC_HELLO_ALG(alg) (0x02u << (alg))
#define WEFT__MSVC_HELLO_ALGS                                                  \
	(WEFT__MSVC_HELLO_ALG(WEFT_COMPRESS_LZ4) |                             \
	 WEFT__MSVC_HELLO_ALG(WEFT_COMPRESS_ZSTD))
/* The largest max_message: an envelope's payload is a bin 32. */
#define WEFT__MSVC_MAX_MESSAGE ((size_t)UINT32_MAX - 64)
/* What a chunk's frame adds to its share of the body: the chunk header of
 * a first chunk, and a compressed body's header should it not shrink. */
#define WEFT__MSVC_CHUNK_OVERHEAD 64
/* The least chunk the chunk codec takes (weft/chunk.h). */
#define WEFT__MSVC_CHUNK_MIN 64
#define WEFT__MSVC_VERB_HEARTBEAT 0

/* Envelope flags. */
#define WEFT__MSVC_F_REQUEST 0x01u
#define WEFT__MSVC_F_RESPONSE 0x02u
#define WEFT__MSVC_F_ONEWAY 0x04u
#define WEFT__MSVC_F_ERROR 0x08u
/* Version 2 (weft/envelope.h): a cancel of the request of that id. */
#define WEFT__MSVC_F_CANCEL 0x20u

/* How long a closing connection may take to write what it holds: the
 * service waits for every channel to close before it is freed. */
#define WEFT__MSVC_LINGER_MS 500
/* At most one line per this many ms about rejected connections. */
#define WEFT__MSVC_LOG_LIMIT_MS 5000
/* A connection's index within its class is below this: the most
 * connections a class may have, so that a HELLO's index names a slot of
 * the peer's inbound order (conn.c). */
#define WEFT__MSVC_INDEX_MAX WEFT__MSVC_MAX_CONNECTIONS_PER_CLASS

/* Handshake refusal reasons. */
enum weft__msvc_refusal {
	WEFT__MSVC_OK = 0,
	WEFT__MSVC_R_MALFORMED = 1,
	WEFT__MSVC_R_VERSION = 2,
	WEFT__MSVC_R_CLUSTER = 3,
	WEFT__MSVC_R_UNKNOWN_NODE = 4,
	WEFT__MSVC_R_NO_CLIENTS = 5,
	WEFT__MSVC_R_AUTH = 6,
	WEFT__MSVC_R_SHUTTING_DOWN = 7,
	WEFT__MSVC_R_BAD_CLASS = 8,
};

struct weft__msvc_hello {
	uint64_t min_version, max_version;
	char cluster[WEFT_MSVC_MAX_ID + 1];
	char id[WEFT_MSVC_MAX_ID + 1];
	uint64_t role, cls, index, flags;
};

struct weft__msvc_reply {
	uint64_t status, version, flags, max_frame;
	char id[WEFT_MSVC_MAX_ID + 1];
	char reason[128];
};

/* Adds a handshake frame's body (magic + array) to buf; the frame codec
 * frames it. */
int weft__msvc_hello_encode(struct evbuffer *buf,
                            const struct weft__msvc_hello *h);
int weft__msvc_hello_decode(const uint8_t *p, size_t n,
                            struct weft__msvc_hello *out);
int weft__msvc_reply_encode(struct evbuffer *buf,
                            const struct weft__msvc_reply *r);
int weft__msvc_reply_decode(const uint8_t *p, size_t n,
                            struct weft__msvc_reply *out);
/* Error payloads: [code, text]. */
size_t weft__msvc_error_encode(uint8_t *out, size_t cap, int status,
                               const char *text);
int weft__msvc_error_decode(const uint8_t *p, size_t n, int *status,
                            const uint8_t **text, size_t *text_len);

/* ---- Runtime ----------------------------------------------------------- */

struct weft__msvc_loop;
struct weft__msvc_conn;

/* A message waiting to be encoded: on a peer's queue or a backlog. */
/* What a message carries in its version 2 params (trace.c). */
struct weft__msvc_out_params {
	/* Response: when it was answered (0: no stage times), and its first
	 * stages then known, in us; SEND is added when it is encoded. */
	uint64_t answered_ns;
	uint32_t stage_us[WEFT_MSVC_STAGE_SEND];
	/* Request: it belongs to tp's trace, tp.span_id being the caller's
	 * span, until open_slot makes it the request's own (traced); or it
	 * starts a new trace there (new_trace). */
	bool traced, new_trace;
	weft_msvc_traceparent tp;
};

struct weft__msvc_out {
	weft_task task;       /* the hand-off to the peer's home loop */
	weft_msvc_peer *peer; /* while handed off */
	TAILQ_ENTRY(weft__msvc_out) link; /* backlog */
	struct weft__msvc_conn *conn;     /* whose backlog */
	const uint8_t *ptr; /* payload: data below or the caller's */
	uint64_t id;        /* response: the request's id */
	uint64_t key;
	uint64_t created_ms, expires_ms; /* this node's clock */
	/* Response: the expires_at to write, the request's in its sender's
	 * clock (expires_ms is it in ours, for our own queues). */
	uint64_t echo_expires_ms;
	uint64_t timeout_ms; /* request */
	uint64_t handle;     /* request: for weft_msvc_cancel, or 0 */
	weft_msvc_reply_cb cb;
	void *arg;
	uint32_t verb;
	uint32_t flags;
	uint32_t slot; /* request: its pending slot, once drained */
	uint8_t cls;
	bool internal;        /* heartbeat: exempt from limits */
	size_t len;           /* payload bytes */
	size_t accounted;     /* bytes counted in the peer's queued_bytes */
	struct evbuffer *buf; /* payload, when not inline */
	struct weft__msvc_out_params params;
	uint8_t data[]; /* inline payload */
};
TAILQ_HEAD(weft__msvc_outq, weft__msvc_out);

enum weft__msvc_conn_state {
	WEFT__MSVC_IDLE,       /* outbound, never dialed or waiting for use */
	WEFT__MSVC_CONNECTING, /* outbound, TCP (and TLS) connect */
	WEFT__MSVC_HANDSHAKE,  /* HELLO sent / awaited */
	WEFT__MSVC_UP,
	WEFT__MSVC_BACKOFF, /* outbound, waiting to redial */
	WEFT__MSVC_CLOSED,  /* inbound, closed */
};

/*
 * What every connection has: its channel, its data path both ways, and
 * its place in its loop's lists. Each is one of two kinds, which share
 * this as their first member: an outbound connection (a fixed member of
 * its peer, dialed and redialed on the peer's home loop) or an inbound one
 * (made per accepted channel, on the loop the transport chose, and freed
 * when it goes away). c->outbound says which; weft__msvc_outbound_of and
 * weft__msvc_inbound_of give the rest.
 */
/* A token bucket (rate.c), in messages. */
struct weft__msvc_bucket {
	double tokens; /* below 0: a debt */
	uint64_t last_ns;
	uint32_t rate; /* per second; 0: no limit */
};

struct weft__msvc_rate_addr;

/* What a connection does that depends on its kind: weft__msvc_inbound_ops
 * (accept.c) for one this node accepted, weft__msvc_outbound_ops (dial.c)
 * for one it dials. All on the connection's loop. */
struct weft__msvc_conn_ops {
	/* The first frame on a new channel: the peer's HELLO, or its reply
	 * to ours. True once the connection is up; false when it was
	 * refused (and closed). */
	bool (*handshake)(struct weft__msvc_conn *c, const uint8_t *body,
	                  size_t n);
	/* Its channel closed, by either side. */
	void (*closed)(struct weft__msvc_conn *c);
	/* Its channel let go of it: nothing reaches it through the channel
	 * from here on. */
	void (*removed)(struct weft__msvc_conn *c);
	/* Its timers are freed (its loop, or a stopped one). */
	void (*free_timers)(struct weft__msvc_conn *c);
};
extern const struct weft__msvc_conn_ops weft__msvc_inbound_ops;
extern const struct weft__msvc_conn_ops weft__msvc_outbound_ops;

struct weft__msvc_conn {
	const struct weft__msvc_conn_ops *ops; /* its kind's */
	weft_msvc *svc;
	struct weft__msvc_loop *ml; /* owning loop */
	weft_msvc_peer *peer;       /* NULL for inbound before handshake */
	weft_channel *ch;           /* NULL when not connected */
	enum weft__msvc_conn_state state;
	bool outbound;
	bool crc;
	uint8_t version; /* the protocol version agreed, once up */
	bool batch_open; /* written since the last flush passed */
	bool paused;
	bool blocked; /* a client whose answers back up: not read */
	uint8_t cls;
	uint32_t index;
	/* Inbound from a member: its place in the order the node accepted
	 * that member's connections of this class and index (conn.c); 0:
	 * not ordered. */
	uint64_t generation;
	weft_ctx *ctx;          /* the service's handler in ch's pipeline */
	size_t batch_accounted; /* queued_bytes the open batch holds */
	uint64_t seen_writes, seen_bytes; /* the channel's stats last counted */
	struct weft__msvc_outq backlog;
	uint32_t pending_head; /* slots sent here, UINT32_MAX: none */
	LIST_ENTRY(weft__msvc_conn) paused_link;
	char peer_addr[WEFT_ADDRESS_MAX];
	uint64_t frame_started_ns; /* a frame begun and not ended, or 0 */
	size_t frame_reserved;     /* inflight bytes held for that frame */
	size_t frame_wanted;       /* its size, while the budget has no room */
	/* Messages in assembly from chunks (read.c): the inflight bytes held
	 * for them from their first chunks, a new one's size while the
	 * budget has no room for it, and when the first of them began (its
	 * deadline is frame_timeout's). */
	size_t assembly_reserved;
	size_t assembly_wanted;
	uint64_t assembly_started_ns;
	size_t assembly_messages;
	uint32_t turn_messages; /* handed in during this read turn */
	/* The wire stages the handshake agreed (docs/PROTOCOL.md 2.1): chunks
	 * both ways, and compression with this algorithm (0: none). */
	bool chunks;
	uint8_t compression;
	uint64_t opened_ns; /* when ch was attached (debug.c) */
	/* The stages' counters last added to the peer's (write.c). */
	weft_compress_stats seen_compress;
	uint64_t seen_chunked_out, seen_chunked_in;
	/* A client's rate limits (rate.c): its bucket, its address's, and
	 * the timer that reads it again once its debt is paid. */
	struct weft__msvc_bucket rate;
	struct weft__msvc_rate_addr *rate_addr;
	weft_timer *rate_timer;
	bool rate_paused;
};

LIST_HEAD(weft__msvc_conn_list, weft__msvc_conn);

/* An outbound connection: how it dials (dial.c) and waits for the answer
 * to its HELLO (handshake.c). */
struct weft__msvc_outbound {
	struct weft__msvc_conn conn; /* first */
	weft_connect_req *connecting;
	bool plain_fallback; /* optional TLS mode: the peer has no TLS */
	bool established;    /* the handshake was accepted */
	bool retry_plain;    /* redial in plaintext, no failure */
	uint32_t attempts;   /* failed dials in a row */
	unsigned jitter_seed;
	weft_timer *backoff;     /* until the next dial */
	weft_timer *reply_timer; /* the handshake reply's deadline */
	char why[320];           /* why the last attempt failed */
};

/* An accepted connection, with what the node grants it (guard.c). */
struct weft__msvc_inbound {
	struct weft__msvc_conn conn;         /* first */
	LIST_ENTRY(weft__msvc_inbound) link; /* in its loop's inbound list */
	weft_timer *watch;                   /* its deadlines */
	uint64_t watch_at_ns;
	uint64_t handshake_deadline_ns;
	uint64_t last_active_ns; /* a frame in or out */
	uint64_t blocked_since_ns;
	bool counted_handshake;
	bool counted_client;
};

static inline struct weft__msvc_outbound *
weft__msvc_outbound_of(struct weft__msvc_conn *c)
{
	return c->outbound ? (struct weft__msvc_outbound *)c : NULL;
}

static inline struct weft__msvc_inbound *
weft__msvc_inbound_of(struct weft__msvc_conn *c)
{
	return c->outbound ? NULL : (struct weft__msvc_inbound *)c;
}

/* Clients per source address (guard.c). */
struct weft__msvc_addr {
	char host[WEFT_ADDRESS_MAX];
	uint32_t n;
};

/* A pending request. */
struct weft__msvc_slot {
	uint32_t tag;            /* random per use: the id's upper half */
	uint32_t next;           /* free list */
	uint32_t c_next, c_prev; /* the conn's pending list */
	uint32_t index;          /* in its loop's slots */
	struct weft__msvc_loop *ml;
	weft_timer *timer; /* its deadline; made with the slot, reused */
	bool live;
	bool sent;
	bool internal;
	int fail_status; /* not 0: ends with this at its deadline */
	struct weft__msvc_conn *conn; /* sent on, or NULL */
	struct weft__msvc_out *out;   /* still in a backlog, or NULL */
	weft_msvc_peer *peer;
	weft_msvc_reply_cb cb;
	void *arg;
	uint32_t verb;
	uint64_t start_ns;
	uint64_t expires_ms; /* wall clock, as the envelope carries it */
	uint64_t timeout_ms;
	bool armed;      /* its timer runs, due at due_ms (wall clock) */
	uint64_t due_ms; /* maybe for an earlier request of the slot */
	uint64_t handle; /* weft_msvc_cancel's, or 0 */
	/* The tag of the slot's last request if it was cancelled (0:
	 * not), so that its answer is counted as such (cancel.c). */
	uint32_t cancelled_tag;
	/* A request of a trace: tp as sent (its own span), and its parent
	 * span (all zero: a root). */
	bool traced;
	weft_msvc_traceparent tp;
	uint8_t parent_span_id[8];
};

/* A histogram per stage (weft_msvc_stage), made on first use. */
struct weft__msvc_stage_hists {
	weft_histogram *h[WEFT_MSVC_STAGES];
};

/* Reactor counters, written by their loop only. */
struct weft__msvc_rstats {
	_Atomic uint64_t read_batches, messages_in, drain_batches;
	_Atomic uint64_t messages_out, handoffs, write_calls, bytes_written;
	_Atomic uint64_t read_yields;
};

/* The service's state on one loop; touched only on that loop. */
struct weft__msvc_loop {
	weft_msvc *svc;
	weft_loop *loop;
	uint32_t index;
	bool hooked; /* on_group_shutdown is the loop's shutdown hook */
	/* What weft__msvc_each_loop runs on this loop: posted without
	 * allocation. */
	weft_task each_task;
	void (*each_fn)(struct weft__msvc_loop *ml);
	struct weft__msvc_slot **chunks; /* slots, in chunks that never move */
	uint32_t slots_cap, free_head;
	weft_timer *stats_timer;
	/* Connections paused for the inbound budget: members', clients'. */
	struct weft__msvc_conn_list paused, paused_clients;
	LIST_HEAD(, weft__msvc_inbound) inbound;
	_Atomic bool resume_posted;
	weft_task resume_task;
	struct weft__msvc_rstats rs;
	/* Written on the loop only; atomic because weft_msvc_stop reads
	 * them from its own thread while it waits for them to reach 0. */
	_Atomic uint32_t connects_in_progress;
	_Atomic uint32_t inbound_len; /* entries in inbound */
	bool init_failed;
	_Atomic uint64_t wakeups; /* the loop's, cached on its thread */
	/* Request round trips per verb, made on this loop: live ones (loop
	 * thread) and the last second's snapshot (under snap_lock), both
	 * allocated for a verb on its first completed request. */
	weft_histogram **verb_lat;
	weft_histogram **verb_snap;
	/* The stage times of the answers, per verb, the same two ways:
	 * arrays made on the first answer that carries them (trace.c). */
	struct weft__msvc_stage_hists **verb_stages, **verb_stages_snap;
	pthread_mutex_t snap_lock;
	/* Random bits for request ids, refilled from getrandom. */
	uint32_t random[256];
	uint32_t random_left;
	/* The clock read once per batch (a read event, a queue drain). */
	uint32_t batch_depth;
	uint64_t now_ns, now_ms;
};

/* Per-peer counters. */
struct weft__msvc_pstats {
	_Atomic uint64_t sent, received, bytes_sent, bytes_received;
	_Atomic uint64_t dropped_expired, dropped_overload, timed_out;
	_Atomic uint64_t failed_peer_down, pending, connects;
	_Atomic uint64_t connect_failures, downs;
	_Atomic uint64_t body_bytes_out, wire_bytes_out;
	_Atomic uint64_t body_bytes_in, wire_bytes_in;
	_Atomic uint64_t chunked_sent, chunked_received;
};

/* A warning about a peer's clock (about all clients' for clients) at most
 * this often (clock.c). */
#define WEFT__MSVC_CLOCK_LOG_MS 60000
/* The round trips a peer's clock estimate is chosen from (clock.c). */
#define WEFT__MSVC_CLOCK_SAMPLES 4

/*
 * A peer's wall clock as this node sees it (clock.c): its offset (the
 * peer's clock minus ours, ms), measured like NTP from the round trips of
 * this node's heartbeats to it, or, until one has come back (and for
 * clients, which are not heartbeated), estimated from the created_at of
 * what it sends. Deadlines it writes are judged through it.
 */
struct weft__msvc_clock {
	/* Any thread. */
	_Atomic int64_t offset_ms;
	_Atomic int64_t rtt_ms; /* of the round trip it came from */
	_Atomic bool measured;  /* from round trips, not one-way */
	_Atomic bool known;     /* any estimate yet */
	_Atomic bool flagged;   /* past max_clock_skew */
	/* One-way: the largest created_at - arrival of this window and of
	 * the one before (INT64_MIN: none); a window ends at window_end_ns. */
	_Atomic int64_t oneway_cur, oneway_prev;
	_Atomic uint64_t window_end_ns;
	/* Round trips, the peer's home loop only. */
	int64_t sample_offset[WEFT__MSVC_CLOCK_SAMPLES];
	int64_t sample_rtt[WEFT__MSVC_CLOCK_SAMPLES];
	uint32_t nsamples, next_sample;
	weft_log_limit log;
};

struct weft_msvc_peer {
	weft_msvc *svc;
	uint32_t index; /* member index, UINT32_MAX: a client */
	char id[WEFT_MSVC_MAX_ID + 1];
	bool is_self;
	bool is_client;
	struct weft__msvc_loop *home;
	/* Any thread. */
	_Atomic size_t queued_bytes;
	_Atomic bool up;
	/* Known down: marked down, or dialed and not reached since it was
	 * last up. Requests and sends to it fail at once (peer down). */
	_Atomic bool down;
	/* Dials of it that failed, counted before waiters are woken: a
	 * weft_msvc_peer_wait_up that sees this move learns that the peer
	 * is still down, now, rather than at its timeout. */
	_Atomic uint64_t failed_dials;
	/* Seen over TLS (its certificate checked): optional mode then
	 * refuses plaintext claims to be this member. */
	_Atomic bool seen_tls;
	_Atomic int refs; /* clients: the conn and detached messages */
	_Atomic bool watch_requested; /* weft_msvc_watch_members, once */
	pthread_mutex_t addr_lock;
	char *host;
	uint16_t port;
	/* Members: per class and index, the generation of the newest
	 * connection accepted from it (conn.c); an older one still open is
	 * superseded. WEFT_MSVC_CLASSES * WEFT__MSVC_INDEX_MAX, made with the
	 * member's first accepted connection and kept; any thread. */
	_Atomic(_Atomic uint64_t *) newest_inbound;
	/* Home loop only. */
	struct weft__msvc_outbound *conns[WEFT_MSVC_CLASSES]; /* arrays */
	struct weft__msvc_conn *client_conn;
	bool used;
	bool hb_sent, hb_acked;
	uint32_t hb_misses;
	weft_timer *hb_timer;
	/* Round trips: made on the first (home loop). */
	weft_histogram *lat;
	/* The figures the stats timer publishes from lat each second: a few
	 * numbers, not a second histogram, to keep a peer small. */
	pthread_mutex_t snap_lock;
	uint64_t snap_count, snap_p50_ns, snap_p99_ns, snap_max_ns;
	/* And the exposition's histogram (metrics.c). */
	uint64_t snap_buckets[WEFT_METRICS_LATENCY_BUCKETS + 1];
	double snap_sum_ns;
	/* The stage times of its answers: live (home loop) and the last
	 * second's copy (under snap_lock), trace.c. */
	struct weft__msvc_stage_hists stages, stages_snap;
	struct weft__msvc_pstats st;
	struct weft__msvc_clock clock;
	/* members.c. Any thread: WEFT__MSVC_MEMBER_*. */
	_Atomic int member_state;
	_Atomic uint32_t close_left; /* loops yet to close its inbound */
	weft_task join_task, leave_task;
	struct weft__msvc_close_task *close_tasks; /* one per loop */
	/* Home loop only. */
	bool awaiting_join; /* added, its joined event not yet told */
	bool drain_closing; /* left: its connections are closing */
	uint64_t drain_deadline_ns;
	weft_timer *drain_timer;
};

struct weft__msvc_verb {
	weft_msvc_handler_cb cb;
	void *arg;
	char *name;
	unsigned flags;
	_Atomic uint64_t received, handled, responded, sent, expired;
	_Atomic uint64_t bytes_received, bytes_sent;
	/* This node's requests and sends of the verb (several loops). */
	_Atomic uint64_t timed_out, dropped_overload, pending;
	/* weft_msvc_verb_limit: requests in progress here, counted only
	 * with a cap (0: none), and those refused past it. */
	uint32_t max_in_progress;
	_Atomic uint32_t in_progress;
	_Atomic uint64_t over_limit;
};

/* Node counters. */
struct weft__msvc_nstats {
	_Atomic uint64_t expired_in_queue, expired_on_arrival;
	_Atomic uint64_t expired_before_handler, overloaded, read_pauses;
	_Atomic uint64_t bad_frames, oversized_frames, bad_envelopes;
	_Atomic uint64_t bad_compressed, bad_chunks, oversized_messages;
	_Atomic uint64_t handshakes_refused, unknown_verbs, late_responses;
	_Atomic uint64_t forbidden_requests;
	_Atomic uint64_t connections_accepted, connections_open;
	_Atomic uint64_t heartbeats_missed, peer_downs, worker_jobs;
	_Atomic uint64_t responses_dropped, forged_responses;
	_Atomic uint64_t clients_refused, handshakes_dropped, client_pauses;
	_Atomic uint64_t rate_limited;
	_Atomic uint64_t stalled_clients, idle_clients, frame_timeouts;
	_Atomic uint64_t superseded_connections, superseded_messages;
	_Atomic uint64_t cancelled_requests, cancelled_responses;
	_Atomic uint64_t cancels_received, cancels_unknown, cancelled_jobs;
	_Atomic uint64_t bad_traceparents;
};

/* The requests a cancel may still reach (cancel.c): heap messages of
 * version 2, by sender and id. */
#define WEFT__MSVC_CANCEL_BUCKETS 1024
struct weft__msvc_cancels {
	pthread_mutex_t lock;
	pthread_cond_t ran; /* an on-cancel callback has returned */
	struct weft_msvc_msg *buckets[WEFT__MSVC_CANCEL_BUCKETS];
	_Atomic uint64_t next_handle; /* weft_msvc_cancel's handles */
};

/* A worker pool for blocking handlers. */
struct weft__msvc_pool {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct weft_msvc_msg *head, *tail;
	pthread_t *threads;
	uint32_t n;
	uint32_t live; /* workers that have not ended */
	bool stopping;
};

/*
 * The stop (stop.c): stages driven by events, never by a thread that
 * waits. Whoever changes what a stage waits for (a loop done with the
 * stage's task, the last request answered, the last connection closed,
 * the last API caller gone, the last worker out, a deadline's timer)
 * kicks; the kick that finds no run under way posts one to the first
 * loop, and a run goes on while kicks keep coming.
 */
enum weft__msvc_stop_stage {
	WEFT__MSVC_STOP_NONE,       /* not stopping */
	WEFT__MSVC_STOP_CALLERS,    /* API calls under way return */
	WEFT__MSVC_STOP_HEARTBEATS, /* each loop ends its heartbeats */
	WEFT__MSVC_STOP_DRAIN,    /* requests and queues drain, to a deadline */
	WEFT__MSVC_STOP_GUARD,    /* each loop stops its door and guards */
	WEFT__MSVC_STOP_CALLERS2, /* calls that began before stopped */
	WEFT__MSVC_STOP_SHUTDOWN, /* each loop ends what is left, closes */
	WEFT__MSVC_STOP_CLOSE,    /* connections close, to their linger */
	WEFT__MSVC_STOP_WORKERS,  /* the workers end */
	WEFT__MSVC_STOP_TEARDOWN, /* each loop frees its state */
	WEFT__MSVC_STOP_DONE,
};

struct weft__msvc_stop {
	_Atomic bool armed;       /* the fields below are set: kicks count */
	_Atomic uint32_t kicks;   /* asked for; the one from 0 runs */
	_Atomic uint32_t kickers; /* kicks under way: free waits for them */
	enum weft__msvc_stop_stage stage; /* the run's alone */
	bool on_loop; /* this run is a task of the first loop, which runs */
	uint64_t drain_deadline_ns, close_deadline_ns;
	weft_task task;
	weft_timer *timer; /* on the first loop: a deadline to look again at */
	weft_msvc_stop_cb cb;
	void *cb_arg;
	bool done; /* under wait_lock: weft_msvc_stop returns */
};

/* An inbound message as a handler sees it. */
struct weft_msvc_msg {
	weft_msvc *svc;
	weft_msvc_peer *peer;       /* member or client peer */
	struct weft_msvc_msg *next; /* worker queue */
	struct weft__msvc_loop *ml; /* the loop that read it */
	uint64_t id;
	/* In this node's clock: the envelope's, through the sender's
	 * offset (clock.c); wire_expires_ms as it came, for the response. */
	uint64_t created_ms, expires_ms, wire_expires_ms;
	uint32_t verb;
	uint32_t flags;
	uint32_t conn_index; /* the request's connection index */
	bool heap;           /* allocated: freed after responding */
	bool detached;
	bool responded;
	bool cancelable; /* came on a connection of version 2 */
	bool tracked;    /* in svc->cancels: a cancel can find it */
	/* Counts in its verb's in_progress until it is released: moved to
	 * the copy that answers it (the pool's, or a detached one). */
	bool holds_slot;
	bool urgent; /* counted in svc->urgent_inflight, not inflight */
	bool traced; /* tp holds the sender's trace context */
	weft_msvc_traceparent tp;
	/* Monotonic times of its stages (trace.c): read (0: not measured,
	 * a request of version 1), dispatched, handler started. */
	uint64_t read_ns, dispatch_ns, run_ns;
	_Atomic bool cancelled;
	/* A heap message's enum weft_msvc_req_stage, for snapshots
	 * (debug.c), which read it under svc->cancels.lock. */
	_Atomic int stage;
	struct weft_msvc_msg *tracked_next; /* svc->cancels' bucket */
	/* weft_msvc_msg_on_cancel's callback, until it runs; while it runs,
	 * running is the running side's record (cancel.c). Both under
	 * svc->cancels.lock. */
	weft_msvc_cancel_cb on_cancel;
	void *on_cancel_arg;
	struct weft__msvc_cancel_run *running;
	size_t counted; /* bytes counted in svc->inflight (0: none) */
	const uint8_t *data;
	size_t len;
	uint8_t own[]; /* heap: the payload copy */
};

/* A listener of peer or member events (weft_msvc_on_peer_event,
 * weft_msvc_on_member_event). */
struct weft__msvc_peer_listener {
	weft_msvc_peer_cb cb;
	void *arg;
};
struct weft__msvc_member_listener {
	weft_msvc_member_cb cb;
	void *arg;
};

struct weft_msvc {
	weft_msvc_config *cfg;
	weft_loop_group *group;
	weft_msvc_opts opts;
	char id[WEFT_MSVC_MAX_ID + 1];
	bool member;
	_Atomic bool started;
	_Atomic bool stopping;
	_Atomic bool stopped;
	_Atomic bool stop_called; /* weft_msvc_stop ran, or runs */
	_Atomic int callers;      /* API calls in progress, for stop */
	uint32_t self_index;
	weft_server *server;
	_Atomic uint16_t port;
	struct weft__msvc_loop *loops;
	uint32_t nloops;
	/* Room for WEFT__MSVC_MAX_NODES, so it never moves; a peer is
	 * written into its slot before npeers counts it (members.c). */
	weft_msvc_peer **peers;
	_Atomic uint32_t npeers;
	pthread_mutex_t members_lock; /* adds and removes, one at a time */
	/* Event listeners, each added before start (so fixed while it
	 * runs) and called in the order added. */
	struct weft__msvc_member_listener *member_cbs;
	size_t member_cb_count;
	struct weft__msvc_verb *verbs; /* WEFT_MSVC_MAX_VERBS */
	struct weft__msvc_peer_listener *peer_cbs;
	size_t peer_cb_count;
	_Atomic uint64_t inflight;
	/* The members' urgent lanes' inbound bytes in flight: a budget of
	 * their own (weft__msvc_conn_budget). */
	_Atomic uint64_t urgent_inflight;
	_Atomic uint64_t pending;
	/* Of pending, the heartbeats: exempt from max_pending_requests,
	 * but drained at stop like any request. */
	_Atomic uint64_t pending_internal;
	/* The generations of members' inbound connections (conn.c). */
	_Atomic uint64_t inbound_generations;
	/* What untrusted peers hold (guard.c). The caps follow the file
	 * limit (nofile), read again each second by door_check on the first
	 * loop, which also copies the door's evictions and refusals. */
	_Atomic uint32_t clients;
	_Atomic uint64_t client_queued; /* queued_bytes of all clients */
	_Atomic uint32_t client_cap, handshake_cap;
	size_t channel_cap; /* the server's, on all accepted connections */
	uint64_t nofile;
	weft_timer *door_check;
	_Atomic uint64_t door_dropped;
	/* The address buckets of the client rate limits (rate.c). */
	pthread_mutex_t rate_lock;
	LIST_HEAD(, weft__msvc_rate_addr) rate_addrs;
	pthread_mutex_t addr_lock;
	struct weft__msvc_addr *addrs;
	size_t naddrs, addrs_cap;
	_Atomic uint32_t paused_conns;
	_Atomic uint64_t key_rr;
	struct weft__msvc_pool pool;
	struct weft__msvc_stop stop;
	struct weft__msvc_cancels cancels;
	/* trace.c: the span hook (set before start), and the requests that
	 * could have started a trace, for trace_sample_rate. */
	weft_msvc_span_cb span_cb;
	void *span_arg;
	_Atomic uint64_t trace_roots;
	struct weft__msvc_nstats st;
	/* A bad connection is one line, not one per connection. */
	weft_log_limit log_reject;
	/* Clients' clocks past max_clock_skew: one line for them all, each
	 * client being a peer of its own (clock.c). */
	weft_log_limit log_client_clock;
	weft_log_limit log_slow_call; /* debug.c */
	/* weft__msvc_each_loop: loops yet to run the task, and what runs
	 * after the last. */
	_Atomic uint32_t each_left;
	void (*each_done)(weft_msvc *svc);
	/* Waits for new and start (each_waiting) and for stop (stop.done). */
	pthread_mutex_t wait_lock;
	pthread_cond_t wait_cond;
	bool each_waiting;
	/* sync.c: threads waiting for a peer to come up (monotonic). */
	pthread_mutex_t sync_lock;
	pthread_cond_t sync_cond;
	/* capacity.c: threads and callbacks waiting for pending to fall
	 * below max_pending_requests; the count, of both, is read by every
	 * request that ends. */
	_Atomic uint32_t capacity_waiters;
	pthread_mutex_t capacity_lock;
	pthread_cond_t capacity_cond; /* CLOCK_MONOTONIC */
	TAILQ_HEAD(, weft__msvc_capacity) capacity_list;
};

/* members.c: members added and removed at run time. */
enum {
	WEFT__MSVC_MEMBER_ACTIVE = 0,
	WEFT__MSVC_MEMBER_LEAVING, /* removed, draining */
	WEFT__MSVC_MEMBER_GONE,    /* removed and drained */
};

/* Closing a leaving member's connections to us on one loop. */
struct weft__msvc_close_task {
	weft_task task;
	weft_msvc_peer *peer;
	struct weft__msvc_loop *ml;
};

/* weft__msvc_peer_left: the member was removed. Any thread. */
static inline bool
weft__msvc_peer_left(const weft_msvc_peer *peer)
{
	return atomic_load_explicit(&((weft_msvc_peer *)peer)->member_state,
	                            memory_order_relaxed) !=
	       WEFT__MSVC_MEMBER_ACTIVE;
}
/* peer_life.c: weft__msvc_member_index is the slot of the member id in
 * svc->peers, or -1 when it is not a member (never was, or removed). Any
 * thread. */
ssize_t weft__msvc_member_index(weft_msvc *svc, const char *id);
/* At stop: the drain's timer stops (shutdown), and is freed (teardown).
 * Home loop. */
void weft__msvc_member_stop(weft_msvc_peer *peer);
void weft__msvc_member_free_timers(weft_msvc_peer *peer);
/* peer_life.c: what every peer starts with (0, or WEFT_ENOMEM), and a
 * peer freed; members.c: a member's peer, made with its outbound
 * connections. */
int weft__msvc_peer_init(weft_msvc *svc, weft_msvc_peer *peer, const char *id);
int weft__msvc_member_new(weft_msvc *svc, uint32_t index, const char *id,
                          const char *host, uint16_t port,
                          weft_msvc_peer **out);
void weft__msvc_peer_free(weft_msvc_peer *peer);

/* weft__msvc_cancel_moved: msg's on-cancel callback now belongs to its
 * detached copy. */
void weft__msvc_cancel_moved(weft_msvc_msg *msg);

/* weft__msvc_tell_peer calls every peer listener with up; nothing once
 * the service has stopped. The peer's loop. */
void weft__msvc_tell_peer(weft_msvc_peer *peer, bool up);

/* wait.c: what waits by threads that are not the service's need. */
/* weft__msvc_cond_init_monotonic makes cond wait on CLOCK_MONOTONIC. */
void weft__msvc_cond_init_monotonic(pthread_cond_t *cond);
/* The condition waiters for a peer's state sleep on, made and freed with
 * the service; weft__msvc_sync_notify wakes them: a peer's state changed,
 * or the service is stopping. Any thread. */
void weft__msvc_sync_init(weft_msvc *svc);
void weft__msvc_sync_fini(weft_msvc *svc);
void weft__msvc_sync_notify(weft_msvc *svc);
/* weft__msvc_on_own_loop is true on one of svc's loop threads, where
 * waiting would never end. Any thread. */
bool weft__msvc_on_own_loop(const weft_msvc *svc);
/* weft__msvc_deadline_in sets *at to the CLOCK_MONOTONIC time timeout_ms
 * from now, for a timed wait; false for "no deadline" (UINT64_MAX, or
 * beyond what a timespec holds). */
bool weft__msvc_deadline_in(uint64_t timeout_ms, struct timespec *at);

/* capacity.c: waiting for request capacity. returned is called after a
 * request gave its count in pending back while capacity_waiters is not
 * 0; stop lets every waiter go with WEFT_ESHUTDOWN. Any thread. */
void weft__msvc_capacity_init(weft_msvc *svc);
void weft__msvc_capacity_fini(weft_msvc *svc);
void weft__msvc_capacity_returned(weft_msvc *svc);
void weft__msvc_capacity_stop(weft_msvc *svc);

/* stop.c */
/* weft__msvc_each_loop runs fn(ml) on each loop's thread (at once on a
 * loop that no longer takes tasks) and done(svc) after the last, on the
 * thread that ran it. One at a time. Any thread. */
void weft__msvc_each_loop(weft_msvc *svc,
                          void (*fn)(struct weft__msvc_loop *ml),
                          void (*done)(weft_msvc *svc));

/* drain.c: what the stop waits for. weft__msvc_is_quiet: no request
 * pending, no inbound bytes in flight and nothing queued for a member;
 * weft__msvc_is_closed: no connect in progress and no connection left
 * open. weft__msvc_wake_if_quiet and weft__msvc_wake_if_closed kick the
 * stop when they hold. weft__msvc_stop_kick asks the stop to look again
 * at what its stage waits for; nothing before the stop begins. Any
 * thread. */
bool weft__msvc_is_quiet(weft_msvc *svc);
bool weft__msvc_is_closed(weft_msvc *svc);
void weft__msvc_wake_if_quiet(weft_msvc *svc);
void weft__msvc_wake_if_closed(weft_msvc *svc);
void weft__msvc_stop_kick(weft_msvc *svc);
/* drain.c: an API call from a thread that is not a service loop is
 * bracketed by these, so that stopping waits for it; enter returns false
 * once the service is stopping. Any thread. */
bool weft__msvc_enter(weft_msvc *svc);
void weft__msvc_leave(weft_msvc *svc);

/* stop.c */
/* weft__msvc_stop_loop_init, on each loop's thread at weft_msvc_new:
 * the group's shutdown hook, and on the first loop the stop's timer.
 * Returns 0 or WEFT_ENOMEM. weft__msvc_stop_fini waits for kicks still
 * under way on other threads, before the service is freed. */
int weft__msvc_stop_loop_init(struct weft__msvc_loop *ml);
void weft__msvc_stop_fini(weft_msvc *svc);

/* weft__msvc_drained is called where svc->pending, svc->inflight or a
 * peer's queued_bytes has just reached 0; weft__msvc_closed where a
 * loop's connects_in_progress or inbound_len or the node's open
 * connections have. While the service runs they cost one load. Any
 * thread.
 *
 * The load is sequentially consistent, as are the decrements before it
 * and stop's store of stopping: then either the load sees stopping or
 * stop's check sees the decrement, and no wake-up is lost. (On x86 it
 * is the same plain load as a relaxed one.) */
static inline void
weft__msvc_drained(weft_msvc *svc)
{
	if (atomic_load(&svc->stopping))
		weft__msvc_wake_if_quiet(svc);
}

static inline void
weft__msvc_closed(weft_msvc *svc)
{
	if (atomic_load(&svc->stopping))
		weft__msvc_wake_if_closed(svc);
}

/* weft__msvc_user_of is how many of all pending requests count against
 * max_pending_requests: all but the internal ones (heartbeats). A
 * heartbeat counts itself as internal just before it counts itself as
 * pending, so a reader between the two sees one more internal than
 * pending: none, not a difference wrapped around. */
static inline uint64_t
weft__msvc_user_of(uint64_t all, uint64_t internal)
{
	return all > internal ? all - internal : 0;
}

/* weft__msvc_user_pending is weft__msvc_user_of for svc now. */
static inline uint64_t
weft__msvc_user_pending(weft_msvc *svc)
{
	return weft__msvc_user_of(atomic_load(&svc->pending),
	                          atomic_load(&svc->pending_internal));
}

/* weft__msvc_pending_sub gives back a request's count in svc->pending. */
static inline void
weft__msvc_pending_sub(weft_msvc *svc)
{
	if (atomic_fetch_sub(&svc->pending, 1) == 1)
		weft__msvc_drained(svc);
	if (atomic_load(&svc->capacity_waiters) != 0)
		weft__msvc_capacity_returned(svc);
}
void weft__msvc_wait_done(weft_msvc *svc);
uint64_t weft__msvc_class_for(const weft_msvc *svc, uint32_t verb, size_t len);
void weft__msvc_peer_set_up(weft_msvc_peer *peer, bool up);
/* peer_life.c: a client's peer, made at its HELLO on c, and a reference
 * to a client's peer given back (the last frees it). */
void weft__msvc_peer_unref(weft_msvc_peer *peer);
int weft__msvc_peer_client_new(weft_msvc *svc, struct weft__msvc_conn *c,
                               const char *id, weft_msvc_peer **out);

/* peer.c: queues, class choice, heartbeats. */
int weft__msvc_submit(weft_msvc_peer *peer, struct weft__msvc_out *out);
int weft__msvc_submit_stack(weft_msvc_peer *peer, struct weft__msvc_out *out);
void weft__msvc_peer_touch(weft_msvc_peer *peer);
/* weft__msvc_peer_dialed_us: a member's connection to us came up: watch
 * it, and if it is known down, dial it now rather than at the end of the
 * back-off (it is back). Home loop. */
void weft__msvc_peer_dialed_us(weft_msvc_peer *peer);
void weft__msvc_peer_down(weft_msvc_peer *peer, const char *why);
void weft__msvc_peer_unreachable(weft_msvc_peer *peer, const char *why);
void weft__msvc_peer_conn_up(weft_msvc_peer *peer, struct weft__msvc_conn *c);
/* out.c: a message to encode, with inline_len bytes of payload room. */
struct weft__msvc_out *weft__msvc_out_new(size_t inline_len);
void weft__msvc_out_free(struct weft__msvc_out *out);
void weft__msvc_release_queued(weft_msvc_peer *peer, size_t n);
/* weft__msvc_out_drop ends out, which will never be written: a
 * request's callback runs with status. Its peer's loop. */
void weft__msvc_out_drop(weft_msvc_peer *peer, struct weft__msvc_out *out,
                         int status);
/* out.c: weft__msvc_take_queued counts n more bytes queued for peer, within its
 * queue limit (and for a client, the node's budget for all clients)
 * unless internal; false, with nothing counted, when they do not fit.
 * weft__msvc_release_queued gives them back. Any thread. */
bool weft__msvc_take_queued(weft_msvc_peer *peer, size_t n, bool internal);
void weft__msvc_hb_start(weft_msvc_peer *peer);

/* conn.c: connection objects and their pipelines. */
#define WEFT__MSVC_FRAME_CODEC "msvc-frame"
#define WEFT__MSVC_HANDSHAKE_HANDLER "msvc-handshake"
#define WEFT__MSVC_ENVELOPE_CODEC "msvc-envelope"
#define WEFT__MSVC_COMPRESS_CODEC "msvc-compress"
#define WEFT__MSVC_CHUNK_CODEC "msvc-chunk"
#define WEFT__MSVC_HANDLER "msvc"
/* weft__msvc_loop_of is svc's loop state for loop, or NULL. */
static inline struct weft__msvc_loop *
weft__msvc_loop_of(weft_msvc *svc, weft_loop *loop)
{
	uint32_t i;

	for (i = 0; i < svc->nloops; i++)
		if (svc->loops[i].loop == loop)
			return &svc->loops[i];
	return NULL;
}
/* weft__msvc_conn_attach gives ch c's pipeline, bound to c. */
int weft__msvc_conn_attach(struct weft__msvc_conn *c, weft_channel *ch);
/* weft__msvc_conn_fini frees what c holds (its backlog, its kind's
 * timers), not c. Its loop, or a stopped one. */
void weft__msvc_conn_fini(struct weft__msvc_conn *c);
void weft__msvc_conn_free_timers(struct weft__msvc_conn *c);
void weft__msvc_conn_close(struct weft__msvc_conn *c, const char *why);
/* weft__msvc_conn_reject closes c for bad input, with a warning. */
void weft__msvc_conn_reject(struct weft__msvc_conn *c, const char *why);
/* accept.c: the server's init for a new channel (a connection made for
 * it), and the end of one, freed when its channel let go of it. */
int weft__msvc_accept_init(weft_channel *ch, void *arg);
void weft__msvc_conn_free(struct weft__msvc_conn *c);
/* dial.c: outbound connection index of class cls to a member, made with
 * its peer (not dialed yet). */
int weft__msvc_conn_init_outbound(weft_msvc_peer *peer, int cls, uint32_t index,
                                  struct weft__msvc_outbound *o);
/*
 * weft__msvc_conn_supersede makes c, an inbound connection from a member
 * whose HELLO was just accepted, the newest of that member's class and
 * index: every older one still open is superseded, closed on its own
 * loop, and nothing it still brings is delivered (per (peer, class,
 * index) FIFO across reconnections; docs/RELIABILITY.md). c's loop.
 */
void weft__msvc_conn_supersede(struct weft__msvc_conn *c);
/* weft__msvc_conn_supersede's bookkeeping needs memory once per member: 0,
 * or WEFT_ENOMEM (then c cannot be accepted). */
int weft__msvc_conn_order_init(weft_msvc_peer *peer);

/* weft__msvc_conn_is_superseded: a newer connection of c's member, class
 * and index was accepted after c. Any thread. */
static inline bool
weft__msvc_conn_is_superseded(const struct weft__msvc_conn *c)
{
	/* A connection with a generation made the array or saw it. */
	return c->generation != 0 &&
	       c->generation <
	           atomic_load_explicit(
	               &atomic_load_explicit(
	                   &c->peer->newest_inbound,
	                   memory_order_relaxed)[c->cls * WEFT__MSVC_INDEX_MAX +
	                                         c->index],
	               memory_order_relaxed);
}
/* weft__msvc_conn_drop_superseded closes superseded c (once), counting a
 * message that arrived on it as dropped if message. c's loop. */
void weft__msvc_conn_drop_superseded(struct weft__msvc_conn *c, bool message);

/* dial.c */
void weft__msvc_conn_dial(struct weft__msvc_conn *c);
/* weft__msvc_dial_lost: an outbound connection ended, or its dial failed,
 * with status; it backs off before the next dial. */
void weft__msvc_dial_lost(struct weft__msvc_conn *c, int status);
/* weft__msvc_dial_now cuts short c's back-off and dials it at once. Its
 * loop. */
void weft__msvc_dial_now(struct weft__msvc_conn *c);

/* handshake.c: the handler that runs the handshake, then leaves. */
extern const weft_handler weft__msvc_handshake_handler;
/* The two sides of the handshake, as the kinds' ops: an inbound
 * connection's HELLO, an outbound one's reply. */
bool weft__msvc_handshake_hello(struct weft__msvc_conn *c, const uint8_t *body,
                                size_t n);
bool weft__msvc_handshake_reply(struct weft__msvc_conn *c, const uint8_t *body,
                                size_t n);
void weft__msvc_handshake_send_hello(struct weft__msvc_conn *c);

/* read.c: the gate before the frame codec and the service's handler. */
extern const weft_handler weft__msvc_gate_handler;
extern const weft_handler weft__msvc_handler;
void weft__msvc_loop_resume(weft_loop *loop, int status, void *arg);

/* write.c: out down c's pipeline (an UP connection whose channel is
 * open), into the channel's batch; the service handler's flush, which
 * releases a batch's queue bytes once they have left; and what a closed
 * connection's unflushed batch held. */
void weft__msvc_conn_count_stages(struct weft__msvc_conn *c);
/* The largest payload this node sends or accepts: max_message, but never
 * less than one frame holds (config.c). */
size_t weft__msvc_max_message(const weft_msvc_limits *l);
/* The body bytes per chunk: chunk_size, cut to fit this node's frames
 * and peer_max_frame (0: not known) with the chunk's header. */
size_t weft__msvc_chunk_bytes(const weft_msvc_limits *l, size_t peer_max_frame);
void weft__msvc_conn_send(struct weft__msvc_conn *c,
                          const struct weft__msvc_out *out);
void weft__msvc_conn_flush(weft_ctx *ctx);
void weft__msvc_conn_drop_batch(struct weft__msvc_conn *c);
/* weft__msvc_conn_takes_writes: c is up and its channel is not closing;
 * weft__msvc_conn_encode writes out (a request's, in slot) into its
 * batch. A connection's backlog, what waits for it to take writes: sent
 * (flush), ended with status (fail), or rid of its one-way messages and
 * responses that expired, or of all of them (purge). c's loop. */
void weft__msvc_conn_encode(struct weft__msvc_conn *c,
                            struct weft__msvc_out *out, uint32_t slot);
void weft__msvc_conn_flush_backlog(struct weft__msvc_conn *c);
void weft__msvc_conn_fail_backlog(struct weft__msvc_conn *c, int status);
void weft__msvc_conn_purge_backlog(struct weft__msvc_conn *c, bool all);

/* guard.c: caps, budgets and deadlines for accepted connections. */
void weft__msvc_guard_init(weft_msvc *svc);
/* Start and stop the file limit's check, on the first loop (the one that
 * accepts): after the server is made, before it is closed. */
void weft__msvc_guard_loop_start(struct weft__msvc_loop *ml);
void weft__msvc_guard_loop_stop(struct weft__msvc_loop *ml);
/* weft__msvc_guard_accept arms a new connection's deadlines; until its
 * handshake is done it counts in the server's door, unless its
 * certificate proves it a member. */
int weft__msvc_guard_accept(struct weft__msvc_conn *c);
void weft__msvc_guard_handshake_done(struct weft__msvc_conn *c);
/* weft__msvc_guard_admit_client counts c as a client, or returns the
 * refusal (reason in *why) when the node or its address has too many. */
int weft__msvc_guard_admit_client(struct weft__msvc_conn *c, const char **why);
/* weft__msvc_member_admitted is weft__msvc_member_index for a HELLO: a
 * member that is leaving is let in too while it owes this node answers.
 * Any thread. */
ssize_t weft__msvc_member_admitted(weft_msvc *svc, const char *id);
void weft__msvc_guard_release(struct weft__msvc_conn *c);
void weft__msvc_guard_fini(struct weft__msvc_conn *c);
/* A frame of total bytes is incomplete: its clock starts, and its bytes
 * are reserved in the inflight budget; false when the budget has no room
 * (the caller pauses c until it has). */
bool weft__msvc_guard_frame_wait(struct weft__msvc_conn *c, size_t total);
/* weft__msvc_guard_may_resume tells whether paused c can be read again:
 * the budget has room for what it waits for. */
bool weft__msvc_guard_may_resume(struct weft__msvc_conn *c);
/* weft__msvc_guard_assembling takes the news of c's chunk codec about its
 * messages in assembly: their declared bytes are held in the inflight
 * budget from their first chunks; false when a new one must wait for room
 * (the caller pauses c; resuming takes the room). */
bool weft__msvc_guard_assembling(struct weft__msvc_conn *c,
                                 const weft_chunk_assembling *a);
/* c closed: what its messages in assembly held goes back. */
void weft__msvc_guard_assembly_done(struct weft__msvc_conn *c);
/* A frame's first bytes, before its length is known. */
void weft__msvc_guard_frame_begun(struct weft__msvc_conn *c);
/* The incomplete frame ended: its reservation goes back. */
void weft__msvc_guard_frame_done(struct weft__msvc_conn *c);
/* weft__msvc_guard_backlogged stops reading a client whose answers back
 * up; true while it is stopped. */
bool weft__msvc_guard_backlogged(struct weft__msvc_conn *c);
/* Answers to c's client left: reading may resume. */
void weft__msvc_guard_drained(struct weft__msvc_conn *c);
void weft__msvc_guard_active(struct weft__msvc_conn *c);
/* weft__msvc_inflight_release gives n inbound bytes back to the node's
 * budget (or the urgent lanes'), resuming the connections paused for
 * room. Any thread. */
void weft__msvc_inflight_release(weft_msvc *svc, size_t n, bool urgent);

/* pending.c: pending requests and their deadlines, per loop. */
/* weft__msvc_verb_name writes verb's registered name to out, or "" for a
 * verb without one. */
#define WEFT__MSVC_VERB_NAME_MAX 48
void weft__msvc_verb_name(const weft_msvc *svc, uint32_t verb, char *out,
                          size_t len);
int weft__msvc_slot_new(struct weft__msvc_loop *ml, uint32_t *out);
struct weft__msvc_slot *weft__msvc_slot_at(struct weft__msvc_loop *ml,
                                           uint32_t i);
uint64_t weft__msvc_slot_id(struct weft__msvc_loop *ml, uint32_t i);
void weft__msvc_slot_arm(struct weft__msvc_loop *ml, uint32_t i,
                         uint64_t timeout_ms, uint64_t expires_ms);
void weft__msvc_slot_sent(struct weft__msvc_loop *ml, uint32_t i,
                          struct weft__msvc_conn *c);
void weft__msvc_slot_cancel(struct weft__msvc_loop *ml, uint32_t i);
/* weft__msvc_slot_fail_soon ends the request at the next tick with
 * status, instead of at its deadline. */
void weft__msvc_slot_fail_soon(struct weft__msvc_loop *ml, uint32_t i,
                               int status);
void weft__msvc_slot_complete(struct weft__msvc_loop *ml, uint32_t i,
                              int status, const void *data, size_t len);
/* weft__msvc_slot_complete_stages is weft__msvc_slot_complete for an
 * answer that carried stage times (stages may be NULL). */
void weft__msvc_slot_complete_stages(struct weft__msvc_loop *ml, uint32_t i,
                                     int status, const void *data, size_t len,
                                     const weft_msvc_stage_times *stages);
/* What became of a response (weft__msvc_response). */
enum weft__msvc_match {
	WEFT__MSVC_MATCHED, /* completed its request */
	WEFT__MSVC_LATE,    /* no request waits for it: dropped */
	WEFT__MSVC_FORGED,  /* a request waits, but not from this peer */
};
/* weft__msvc_response completes the request env answers, if from is the
 * peer it was sent to; from is a member, or a member we are a client
 * of. */
enum weft__msvc_match weft__msvc_response(struct weft__msvc_loop *ml,
                                          const weft_msvc_peer *from,
                                          const weft_envelope *env);
void weft__msvc_fail_conn_pending(struct weft__msvc_conn *c, int status);
void weft__msvc_fail_all_pending(struct weft__msvc_loop *ml, int status);
void weft__msvc_fail_internal_pending(struct weft__msvc_loop *ml, int status);
/* The answer to a request of slot i came from the slot's peer after the
 * slot was freed: true (and counted) if it was cancelled. */
bool weft__msvc_answer_was_cancelled(struct weft__msvc_loop *ml, uint32_t i,
                                     uint32_t tag, const weft_msvc_peer *from);
/* weft__msvc_slots_init and _fini make ml's slot table empty and free
 * its slots and their timers. */
void weft__msvc_slots_init(struct weft__msvc_loop *ml);
void weft__msvc_slots_fini(struct weft__msvc_loop *ml);
/* loop.c: a loop's state, set up on its thread (0 or WEFT_ENOMEM) and
 * torn down. */
int weft__msvc_loop_init(weft_msvc *svc, struct weft__msvc_loop *ml);
void weft__msvc_loop_fini(struct weft__msvc_loop *ml);

/* dispatch.c: handlers, responses, the worker pool. */
void weft__msvc_dispatch(struct weft__msvc_conn *c, const weft_envelope *env);

/* ---- Cancellation (cancel.c) -------------------------------------------- */

void weft__msvc_cancels_init(weft_msvc *svc);
void weft__msvc_cancels_fini(weft_msvc *svc);
/* weft__msvc_track makes a heap message of version 2 findable by a cancel
 * until weft__msvc_untrack (msg_release). Any thread. */
void weft__msvc_track(weft_msvc_msg *msg);
void weft__msvc_untrack(weft_msvc_msg *msg);
/* weft__msvc_msg_assign copies src's fields to dst; for a tracked src,
 * under the table's lock, as a cancel may mark src meanwhile. */
void weft__msvc_msg_assign(weft_msvc_msg *dst, const weft_msvc_msg *src);
/* A CANCEL envelope arrived on c: marks the requests it names. c's
 * loop. */
void weft__msvc_cancel_arrived(struct weft__msvc_conn *c,
                               const weft_envelope *env);

/* The pool's workers start with weft_msvc_start; weft__msvc_pool_quit
 * asks them to end after the jobs queued so far (the last one out kicks
 * the stop), weft__msvc_pool_idle is true once they have, and
 * weft__msvc_pool_join waits for their threads and frees them (not from
 * one of them). */
int weft__msvc_pool_start(weft_msvc *svc);
void weft__msvc_pool_quit(weft_msvc *svc);
bool weft__msvc_pool_idle(weft_msvc *svc);
void weft__msvc_pool_join(weft_msvc *svc);
int weft__msvc_error_status_to_wire(int status);
int weft__msvc_wire_to_error_status(int code);

/* trace.c: a peer's round trips, in 4.8 KB: a node keeps one per peer
 * it calls, so within 1/16 rather than the default's 1/128 (59 KB), up
 * to 2^40 ns (18 minutes; longer ones count as the maximum). */
#define WEFT__MSVC_PEER_LAT_SUB_BITS 4
#define WEFT__MSVC_PEER_LAT_MAX_NS ((UINT64_C(1) << 40) - 1)
int weft__msvc_peer_lat_new(weft_histogram **out);

/* pending.c: logs the request of slot s, answered after took_ns, if that
 * is above slow_call (rate limited). Home loop. */
void weft__msvc_slow_call(struct weft__msvc_loop *ml,
                          const struct weft__msvc_slot *s, uint64_t took_ns);

/* metrics.c */
void weft__msvc_stats_tick(weft_timer *t, void *arg);
void weft__msvc_cache_wakeups(struct weft__msvc_loop *ml);

/* clock.c */
/* weft__msvc_clock_now_ms is this node's wall clock: the system's, moved
 * by the service's clock_offset_ms option (tests). Any thread. */
static inline uint64_t
weft__msvc_clock_now_ms(const weft_msvc *svc)
{
	return weft_wall_ms() + (uint64_t)svc->opts.clock_offset_ms;
}
void weft__msvc_clock_init(struct weft__msvc_clock *clk);
/* A heartbeat to peer came back: sent rtt_ns ago (monotonic), answered
 * at peer_ms by the peer's clock, now now_ms by ours. Home loop. */
void weft__msvc_clock_round_trip(weft_msvc_peer *peer, uint64_t peer_ms,
                                 uint64_t rtt_ns, uint64_t now_ms);
/* A message peer made at created_ms (its clock) arrived at now_ms (ours;
 * now_ns on the monotonic clock). Any loop. */
void weft__msvc_clock_arrival(weft_msvc_peer *peer, uint64_t created_ms,
                              uint64_t now_ms, uint64_t now_ns);
/* weft__msvc_clock_local is peer's time t (ms, its clock) in ours; 0
 * stays 0 (no expiry). Any thread. */
uint64_t weft__msvc_clock_local(const weft_msvc_peer *peer, uint64_t t);

/* A batch of work on ml's loop: the clock is read once for all of it. */
static inline void
weft__msvc_batch_begin(struct weft__msvc_loop *ml)
{
	if (ml->batch_depth++ == 0) {
		ml->now_ns = weft_now_ns();
		ml->now_ms = weft__msvc_clock_now_ms(ml->svc);
	}
}

static inline void
weft__msvc_batch_end(struct weft__msvc_loop *ml)
{
	ml->batch_depth--;
}

/* A frame as the frame codec delivers it (a borrowed byte run, or an
 * evbuffer for a large one): its contiguous bytes and their number, or
 * NULL when there is no memory to make them contiguous. */
static inline const uint8_t *
weft__msvc_frame_body(const weft_msg_type *type, void *msg, size_t *n)
{
	if (type == &weft_msg_bytes) {
		const weft_bytes *b = msg;

		*n = b->len;
		return b->data;
	}
	*n = evbuffer_get_length(msg);
	return evbuffer_pullup(msg, -1);
}

/*
 * After a frame was handled: once the service has closed c (or its channel
 * is closing), the frame codec is stopped before the next frame, so that
 * nothing more of what the peer sent is handled. Returns false then.
 */
static inline bool
weft__msvc_may_read_on(struct weft__msvc_conn *c)
{
	if (c->state != WEFT__MSVC_CLOSED && weft_channel_is_open(c->ch))
		return true;
	weft_channel_set_auto_read(c->ch, false);
	return false;
}

/*
 * c takes writes now: it is up and its channel is not closing. A
 * connection this node closed (its peer marked down) stays UP until its
 * channel is gone, which is up to the channel's linger later when the
 * peer does not read: what was encoded into it meanwhile would be
 * dropped unsent, with nothing to tell of it. What is sent then waits in
 * c's backlog for the next connection instead.
 */
static inline bool
weft__msvc_conn_takes_writes(const struct weft__msvc_conn *c)
{
	return c->state == WEFT__MSVC_UP && c->ch != NULL &&
	       weft_channel_is_open(c->ch);
}

/* weft__msvc_inbound_limit is the inbound bytes in flight from which a
 * connection is not read, nor a frame of its let in: the node's budget
 * (inbound_inflight) for a client or a stranger, and a quarter more for a
 * member, room only members can use (their replication and heartbeats go
 * on while clients hold the whole budget). Clients keep the whole budget
 * rather than three quarters of it: a client's frame as large as the
 * budget, begun and never finished, must not pause every other client. */
static inline uint64_t
weft__msvc_inbound_limit(const weft_msvc *svc, bool client)
{
	uint64_t limit = svc->cfg->limits.inbound_inflight_bytes;

	return client ? limit : limit + limit / 4;
}

/* weft__msvc_conn_urgent is true for a member's urgent lane (heartbeats,
 * urgent verbs, cancels); a stranger before its HELLO is not a member. */
static inline bool
weft__msvc_conn_urgent(const struct weft__msvc_conn *c)
{
	return c->cls == WEFT_MSVC_URGENT && c->peer != NULL &&
	       !c->peer->is_client;
}

/* weft__msvc_urgent_limit is the members' urgent lanes' own inbound
 * budget: an eighth of inbound_inflight. */
static inline uint64_t
weft__msvc_urgent_limit(const weft_msvc *svc)
{
	return svc->cfg->limits.inbound_inflight_bytes / 8;
}

/*
 * weft__msvc_conn_budget is the inbound bytes in flight that c counts
 * against, with its limit in *limit. A member's urgent lane has a budget
 * of its own, an eighth of inbound_inflight: a node whose budget is held
 * full by requests (a slow handler, writes waiting for their quorum)
 * still reads its members' heartbeats and urgent verbs, and is not taken
 * for down. Every other connection shares the node's budget
 * (weft__msvc_inbound_limit).
 */
static inline _Atomic uint64_t *
weft__msvc_conn_budget(struct weft__msvc_conn *c, uint64_t *limit)
{
	weft_msvc *svc = c->svc;

	if (weft__msvc_conn_urgent(c)) {
		*limit = weft__msvc_urgent_limit(svc);
		return &svc->urgent_inflight;
	}
	*limit = weft__msvc_inbound_limit(svc, c->peer == NULL ||
	                                           c->peer->is_client);
	return &svc->inflight;
}

/* weft__msvc_host_of writes the host part of a peer address ("host:port",
 * "[v6]:port", or a Unix path whole) to out. */
static inline void
weft__msvc_host_of(const char *peer, char *out, size_t len)
{
	const char *colon = strrchr(peer, ':');

	if (colon == NULL || strncmp(peer, "unix:", 5) == 0)
		colon = peer + strlen(peer);
	snprintf(out, len, "%.*s", (int)(colon - peer), peer);
}

/* trace.c: trace context and stage times (docs/PROTOCOL.md 4.5). */

/* The longest params map weft writes: a traceparent and 8 stage times. */
#define WEFT__MSVC_PARAMS_MAX 80

/* weft__msvc_random32 is 32 unpredictable bits (random.c). Loop thread. */
uint32_t weft__msvc_random32(struct weft__msvc_loop *ml);
/* Marks msg as the handler running on this thread, for the requests it
 * makes, until weft__msvc_handler_leave(the value returned). */
const weft_msvc_msg *weft__msvc_handler_enter(const weft_msvc_msg *msg);
void weft__msvc_handler_leave(const weft_msvc_msg *prev);
/* The same for the stage times of the reply callback about to run. */
const weft_msvc_stage_times *
weft__msvc_reply_enter(const weft_msvc_stage_times *stages);
void weft__msvc_reply_leave(const weft_msvc_stage_times *prev);
/* A request's trace context, from opts, the running handler or the
 * sampling rate, into out->params. Any thread. */
void weft__msvc_trace_request(weft_msvc *svc, const weft_msvc_call_opts *opts,
                              struct weft__msvc_out *out);
/* Gives the request of slot s its own span (and trace, if it starts
 * one), in out->params and s. Home loop. */
void weft__msvc_trace_open(struct weft__msvc_loop *ml,
                           struct weft__msvc_slot *s,
                           struct weft__msvc_out *out);
/* An inbound request of c: its trace context and first stage time. */
void weft__msvc_trace_arrived(struct weft__msvc_conn *c, weft_msvc_msg *msg,
                              const weft_envelope *env);
/* msg is answered by out: the stage times so far. */
void weft__msvc_stages_answered(const weft_msvc_msg *msg,
                                struct weft__msvc_out *out);
/* Encodes out's params for a connection of version 2 into buf
 * (WEFT__MSVC_PARAMS_MAX bytes), now_ns ending the SEND stage; returns
 * their length, 0 for none. */
size_t weft__msvc_params_encode(const struct weft__msvc_out *out,
                                uint64_t now_ns, uint8_t *buf);
/* Reads the stage times of a response; false if it has none. */
bool weft__msvc_stages_decode(const weft_envelope *env,
                              weft_msvc_stage_times *out);
/* Counts an answer's stage times for its peer and verb. Home loop. */
void weft__msvc_stages_record(struct weft__msvc_loop *ml, weft_msvc_peer *peer,
                              uint32_t verb, const weft_msvc_stage_times *st);
/* Publishes the stage histograms of ml's loop (and of the peers it is home
 * for) to the snapshots readers use. Loop thread. */
void weft__msvc_stages_snapshot(struct weft__msvc_loop *ml);
/* Frees what the stage histograms of ml, or of peer, hold. */
void weft__msvc_stages_loop_fini(struct weft__msvc_loop *ml);
void weft__msvc_stages_free(struct weft__msvc_stage_hists *sh);
/* Calls the span hook for slot s, ending with status. Home loop. */
void weft__msvc_span_end(struct weft__msvc_loop *ml,
                         const struct weft__msvc_slot *s, int status,
                         const weft_msvc_stage_times *stages);

/* rate.c. Init and fini with the service; the rest on c's loop. */
void weft__msvc_rate_init(weft_msvc *svc);
void weft__msvc_rate_fini(weft_msvc *svc);
void weft__msvc_bucket_init(struct weft__msvc_bucket *b, uint32_t rate,
                            uint64_t now_ns);
/* weft__msvc_rate_take takes one message of client c out of its buckets
 * and returns how long c must not be read for their debt to be paid (0:
 * none). */
uint64_t weft__msvc_rate_take(struct weft__msvc_conn *c, uint64_t now_ns);
/* weft__msvc_rate_release frees c's timer and its share of its address
 * bucket. */
void weft__msvc_rate_release(struct weft__msvc_conn *c);

/* A whole frame arrived: the one that was incomplete, if any, is done. */
static inline void
weft__msvc_frame_arrived(struct weft__msvc_conn *c)
{
	if (c->frame_started_ns != 0)
		weft__msvc_guard_frame_done(c);
}

/* Wall-clock and monotonic time on ml's thread: the batch's if inside
 * one. */
static inline uint64_t
weft__msvc_wall_ms(const struct weft__msvc_loop *ml)
{
	return ml->batch_depth ? ml->now_ms : weft__msvc_clock_now_ms(ml->svc);
}

static inline uint64_t
weft__msvc_now_ns(const struct weft__msvc_loop *ml)
{
	return ml->batch_depth ? ml->now_ns : weft_now_ns();
}

static inline uint64_t
weft__msvc_relaxed(_Atomic uint64_t *a)
{
	return atomic_load_explicit(a, memory_order_relaxed);
}

/* Counter bump for fields that several threads may write. */
static inline void
weft__msvc_count(_Atomic uint64_t *a, uint64_t n)
{
	atomic_fetch_add_explicit(a, n, memory_order_relaxed);
}

/* Counter bump for fields only one loop writes: no locked instruction. */
static inline void
weft__msvc_count1(_Atomic uint64_t *a, uint64_t n)
{
	atomic_store_explicit(a,
	                      atomic_load_explicit(a, memory_order_relaxed) + n,
	                      memory_order_relaxed);
}

#endif
