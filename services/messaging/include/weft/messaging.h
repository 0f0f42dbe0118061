/* SPDX-License-Identifier: MIT */
/*
 * weft/messaging.h: the cluster messaging service.
 *
 * A cluster is a set of member nodes (id, host, port) sharing a name, read
 * from one INI file (or built in code). A service (weft_msvc) runs one node,
 * or a non-member client, on a loop group. Each node dials its own outbound
 * connections to each peer lazily, one or more per message class (urgent:
 * heartbeats and control; small; large: payload above a threshold; the
 * first urgent connection comes up with the first one of any class), and
 * writes only on connections it dialed; a response travels on the
 * responder's own outbound connection of the class that fits its size. A
 * non-member client (a service started with an id the config does not
 * list) gets its responses on the connection it opened. The wire format is
 * docs/PROTOCOL.md.
 *
 * Every function says which threads may call it. send, request
 * and respond may be called from any thread; they enqueue the message on
 * the peer's lock-free queue and wake the peer's loop once per batch.
 * Callbacks (handlers, replies, peer events) run on one of the service's
 * loops, or on a worker thread for handlers registered as blocking, with
 * no weft lock held.
 *
 * Every request ends: once weft_msvc_request() returned 0 its callback runs
 * exactly once, with the response or with an error, never inside the call.
 */
#ifndef WEFT_MESSAGING_H
#define WEFT_MESSAGING_H

#include <weft/core.h>
#include <weft/loop.h>

#ifdef __cplusplus
extern "C" {
#endif

struct evbuffer;
/* A TLS context, from <weft/tls.h>. */
typedef struct weft_tls_ctx weft_tls_ctx;

/* One node's (or client's) messaging service. */
typedef struct weft_msvc weft_msvc;
/* A cluster configuration: name, members, limits, TLS settings. */
typedef struct weft_msvc_config weft_msvc_config;
/* A member of the cluster as seen by one service; lives as long as it. */
typedef struct weft_msvc_peer weft_msvc_peer;
/* An inbound message handed to a verb handler. */
typedef struct weft_msvc_msg weft_msvc_msg;

/* Connection (message) classes. */
enum weft_msvc_class {
	WEFT_MSVC_URGENT = 0, /* heartbeats and control */
	WEFT_MSVC_SMALL = 1,  /* payload up to large_message_bytes */
	WEFT_MSVC_LARGE = 2,  /* payload above large_message_bytes */
	WEFT_MSVC_CLASSES = 3,
};

/* The highest verb number plus one; 0..15 are reserved for the protocol
 * (0 is the heartbeat), so user verbs are 16..WEFT_MSVC_MAX_VERBS-1. */
#define WEFT_MSVC_MAX_VERBS 4096
#define WEFT_MSVC_VERB_USER_MIN 16
/* Longest node id, client id and cluster name, in bytes. */
#define WEFT_MSVC_MAX_ID 63

/*
 * Limits and timeouts. Zero fields take the defaults shown when the
 * service starts; weft_msvc_config_new() fills the defaults in. Each has
 * bounds, checked when the file is read and by weft_msvc_config_check()
 * (docs/WEFTD.md, "Bounds"): large_message at most max_frame, and
 * outbound_queue and client_outbound at least large_message (a message
 * larger than its queue is refused); loops at most 256 and 4 per CPU;
 * worker_threads at most 1024 and 32 per CPU; at most 64 connections per
 * class; in the file, durations at most a day and max_frame at least
 * 4 KiB.
 */
typedef struct weft_msvc_limits {
	size_t max_frame_bytes;      /* 32 MiB: larger frames close the link */
	size_t outbound_queue_bytes; /* 64 MiB per peer, queued + unwritten */
	size_t
	    inbound_inflight_bytes; /* 64 MiB per node: then reading pauses */
	uint32_t max_pending_requests;  /* 65536 per node */
	size_t large_message_bytes;     /* 64 KiB: above this, class LARGE */
	uint64_t connect_timeout_ms;    /* 2000, TCP connect plus handshake */
	uint64_t heartbeat_interval_ms; /* 1000 */
	uint32_t heartbeat_misses;      /* 3 missed in a row: peer down */
	/* 1000: a peer whose clock is further off than this from ours is
	 * flagged (a warning, the peer's clock_skew_exceeded); its
	 * deadlines are still judged through its measured offset. */
	uint64_t max_clock_skew_ms;
	uint64_t reconnect_min_ms;   /* 50: first back-off */
	uint64_t reconnect_max_ms;   /* 5000: back-off cap */
	uint64_t request_timeout_ms; /* 5000: default request timeout */
	uint32_t loops;              /* 0: one per CPU (for weftd) */
	uint32_t worker_threads;     /* 2: runs handlers marked BLOCKING */
	uint32_t connections[WEFT_MSVC_CLASSES]; /* 1, 1, 1 per peer */
	bool allow_clients; /* true: accept non-member clients */
	/*
	 * What one node grants peers it does not trust (docs/SECURITY.md).
	 * Answers queued for all clients together, and for one client before
	 * the node stops reading from it; a client that then does not read
	 * its answers for client_stall_timeout is closed, as is one that
	 * sends and receives nothing for client_idle_timeout. A frame begun
	 * must end within frame_timeout (its bytes count as in flight
	 * meanwhile). Client connections are capped per node (lowered to
	 * what the file limit leaves once every member's connections are
	 * provided for, at start and whenever the limit changes) and per
	 * source address. Connections still in their handshake (from
	 * accept, the TLS handshake included) are capped per node the same
	 * way; at the cap, the source address holding the most of them
	 * gives up its oldest to a newcomer (docs/SECURITY.md, "The door").
	 */
	size_t client_outbound_bytes;     /* 64 MiB per node */
	size_t client_pause_bytes;        /* 1 MiB per client */
	uint64_t client_stall_timeout_ms; /* 30000 */
	uint64_t client_idle_timeout_ms;  /* 60000 */
	uint64_t frame_timeout_ms;        /* 30000 */
	uint32_t max_clients;             /* 1024 */
	uint32_t max_clients_per_address; /* 64 */
	uint32_t max_handshakes;          /* 128 at once */
	/*
	 * Fairness (docs/RELIABILITY.md). A connection hands in at most its
	 * read budget of messages per turn; then the loop serves every
	 * other ready connection before it gets another turn. Members'
	 * budget is larger than clients', so that replication and
	 * heartbeats go ahead of client traffic under load.
	 */
	uint32_t member_read_budget; /* 256 messages per turn (1 to 65536) */
	uint32_t client_read_budget; /* 32 messages per turn (1 to 65536) */
	/*
	 * Optional rate limits on clients, in messages per second (0: off,
	 * the default; up to 10,000,000): per client connection, and per
	 * source address over all its clients. Each allows a burst of one
	 * second's worth; a client past either is not read until it is
	 * back within it (rate_limited counts the pauses).
	 */
	uint32_t client_rate;
	uint32_t address_rate;
	/*
	 * The newest protocol version this node offers in its handshakes
	 * (docs/PROTOCOL.md section 3): 0 is the newest it speaks (2); 1
	 * keeps it at version 1 with every peer, as a node of an older
	 * release would be.
	 */
	uint32_t max_protocol_version;
	/*
	 * Large messages and compression (docs/PROTOCOL.md section 2.1).
	 * max_message is the largest payload this node sends or accepts
	 * (never less than one frame holds); one above chunk_size (cut to
	 * fit a frame, the peer's too) travels as a sequence of frames of that
	 * size, which interleave with the smaller messages on their
	 * connection, to every peer that assembles them (every peer of
	 * this release; to an older one, a message must fit max_frame).
	 * compression is what this node asks for on the connections it
	 * dials and agrees to on those it accepts: WEFT_COMPRESS_NONE, _LZ4
	 * or _ZSTD of <weft/compress.h> (a connection is compressed when
	 * both ends want it, with the dialer's choice); a body below
	 * compression_min stays as it is, and a compressed body that would
	 * grow more than max_compression_ratio times closes the connection.
	 */
	size_t max_message_bytes;       /* 64 MiB */
	size_t chunk_bytes;             /* 128 KiB */
	int compression;                /* WEFT_COMPRESS_NONE (0) */
	size_t compression_min_bytes;   /* 512 */
	uint32_t max_compression_ratio; /* 255 */
	/* This node's requests whose round trip took longer are logged
	 * (peer, verb, round trip), at most a line per 5 s with the number
	 * of others; 0 (the default): none are. */
	uint64_t slow_call_ms;
} weft_msvc_limits;

enum weft_msvc_tls_mode {
	WEFT_MSVC_TLS_NONE = 0,     /* plaintext everywhere */
	WEFT_MSVC_TLS_ALL = 1,      /* dial and accept only TLS */
	WEFT_MSVC_TLS_OPTIONAL = 2, /* dial TLS, accept both */
};

/* The [tls] section, stored for the TLS layer. Strings are owned by the
 * config (NULL when not set). */
typedef struct weft_msvc_tls_config {
	enum weft_msvc_tls_mode mode;
	const char *cert_file;
	const char *key_file;
	const char *ca_file;
	const char *min_version; /* "1.2" or "1.3"; NULL: the TLS default */
	/*
	 * Optional mode only. A plaintext dialer's claim to be a member is
	 * unauthenticated; once this node has seen a member over TLS, it
	 * refuses that member's plaintext claims (AUTH), unless this is true
	 * (a cluster moving back from TLS). Default false.
	 */
	bool allow_plaintext_members;
} weft_msvc_tls_config;

/*
 * weft_msvc_config_new makes an empty configuration for cluster (copied),
 * with default limits and no nodes. *out is the caller's, to free with
 * weft_msvc_config_free(). Returns 0, WEFT_EINVAL (bad name) or
 * WEFT_ENOMEM. Any thread.
 */
WEFT_API int weft_msvc_config_new(const char *cluster, weft_msvc_config **out);

/*
 * weft_msvc_config_load reads an INI file (format in docs/PROTOCOL.md,
 * "Cluster configuration"). Returns 0 and the configuration in *out, the
 * caller's to free with weft_msvc_config_free. On failure it returns
 * WEFT_ECONFIG (or WEFT_ENOMEM, or WEFT_EIO when the file cannot be read)
 * and writes a message naming the file and line into err (errlen bytes,
 * always NUL-terminated when errlen > 0); *out is then untouched. Any
 * thread.
 */
WEFT_API int weft_msvc_config_load(const char *path, weft_msvc_config **out,
                                   char *err, size_t errlen);

/* weft_msvc_config_parse is weft_msvc_config_load for INI text in memory;
 * name is used in error messages. */
WEFT_API int weft_msvc_config_parse(const char *text, const char *name,
                                    weft_msvc_config **out, char *err,
                                    size_t errlen);

/*
 * weft_msvc_config_check says whether a node of cfg can start on this
 * host: the checks of loading (each value within its bounds, the values
 * consistent with one another), then what depends on the host: loops and
 * worker_threads against its CPUs, and the file limit (RLIMIT_NOFILE, read
 * now) against the members' connections, which must leave a returning
 * member its handshake slots (docs/WEFTD.md, "Bounds"). weft_msvc_start
 * runs it, and `weftd --check-config` too, so that a check passes exactly
 * when a start would. Returns 0, or WEFT_ECONFIG with "FILE:LINE: [section]
 * key: reason" in err (errlen bytes); WEFT_EINVAL for a NULL cfg. Any
 * thread.
 */
WEFT_API int weft_msvc_config_check(const weft_msvc_config *cfg, char *err,
                                    size_t errlen);

/*
 * weft_msvc_host_check says whether host can work: an IP literal, or a
 * name that resolves (getaddrinfo, which may block); with local, it must
 * also be an address of this host (a socket binds to it, on port 0, so a
 * node running already does not fail it). Returns 0; WEFT_ECONFIG when it
 * never can without an edit (digits and dots that are no IPv4 address, an
 * address of another host); WEFT_ENOTFOUND for a name without a record
 * (a typo, or a record not published yet); WEFT_EADDR when the name cannot
 * be looked up now (the DNS does not answer), which may pass later. The
 * reason goes into why (whylen bytes). Any thread.
 */
WEFT_API int weft_msvc_host_check(const char *host, bool local, char *why,
                                  size_t whylen);

/*
 * weft_msvc_config_check_hosts runs weft_msvc_host_check on every member's
 * host, self's as local (self NULL: none). An error is "FILE:LINE: [node
 * ID] host: reason" in err. A name the DNS cannot answer for now is only
 * a warning (logged) for another member, which is dialled again until it
 * resolves; for self it is WEFT_EADDR, since a node cannot listen on it.
 * Another member's name without a record is an error when strict (a
 * check of a file: a typo), else a warning: a node starting does not
 * refuse a member whose record its orchestrator publishes only when that
 * member starts (a StatefulSet's pods). Returns 0, WEFT_ECONFIG,
 * WEFT_EADDR or WEFT_EINVAL. Any thread.
 */
WEFT_API int weft_msvc_config_check_hosts(const weft_msvc_config *cfg,
                                          const char *self, bool strict,
                                          char *err, size_t errlen);

/* weft_msvc_config_free frees cfg; NULL is ignored. A service keeps its
 * own copy, so a config may be freed once the services using it exist.
 * Any thread, once no other thread uses cfg. */
WEFT_API void weft_msvc_config_free(weft_msvc_config *cfg);

/*
 * weft_msvc_config_add_node adds a member (strings copied). Port 0 means
 * "not known yet": a service for that node binds an ephemeral port (see
 * weft_msvc_port), and others learn it with weft_msvc_set_peer_addr().
 * Returns 0, WEFT_EEXIST (id taken), WEFT_EINVAL (a bad id, an empty
 * host) or WEFT_ENOMEM. Any thread, while no other thread uses cfg.
 */
WEFT_API int weft_msvc_config_add_node(weft_msvc_config *cfg, const char *id,
                                       const char *host, uint16_t port);

/* weft_msvc_config_limits returns the limits, to read or change in place
 * before the config is given to a service. Never NULL.
 * weft_msvc_config_limits_const returns them to read. Any thread, while no
 * other thread changes cfg. */
WEFT_API weft_msvc_limits *weft_msvc_config_limits(weft_msvc_config *cfg);
WEFT_API const weft_msvc_limits *
weft_msvc_config_limits_const(const weft_msvc_config *cfg);

/* weft_msvc_config_set_tls stores TLS settings (strings copied). Returns
 * 0, WEFT_EINVAL (an unknown mode) or WEFT_ENOMEM (the settings are then
 * unchanged). Any thread, while no other thread uses cfg. */
WEFT_API int weft_msvc_config_set_tls(weft_msvc_config *cfg,
                                      const weft_msvc_tls_config *tls);
/* weft_msvc_config_tls returns the stored settings; never NULL. Any
 * thread, while no other thread changes cfg. */
WEFT_API const weft_msvc_tls_config *
weft_msvc_config_tls(const weft_msvc_config *cfg);

/* weft_msvc_config_cluster returns the cluster name, borrowed from cfg.
 * Any thread, while no other thread changes cfg. */
WEFT_API const char *weft_msvc_config_cluster(const weft_msvc_config *cfg);
/* weft_msvc_config_node_count returns the number of members. Any thread,
 * while no other thread changes cfg. */
WEFT_API size_t weft_msvc_config_node_count(const weft_msvc_config *cfg);
/* weft_msvc_config_node reads member i (i < count) into those of id, host
 * and port that are not NULL; strings are borrowed from cfg. Returns 0 or
 * WEFT_EINVAL (i out of range). Any thread, while no other thread changes
 * cfg. */
WEFT_API int weft_msvc_config_node(const weft_msvc_config *cfg, size_t i,
                                   const char **id, const char **host,
                                   uint16_t *port);

/*
 * weft_msvc_config_get returns the value of key in a section the messaging
 * service does not know (say [kv] or [weftd]), kept verbatim for other
 * components, or NULL. The string is borrowed from cfg. A component reads
 * its section typed and checked with weft_msvc_config_read instead. Any
 * thread, while no other thread changes cfg.
 */
WEFT_API const char *weft_msvc_config_get(const weft_msvc_config *cfg,
                                          const char *section, const char *key);

/* ---- The sections of other components --------------------------------- */

/*
 * One grammar serves every section of the file (weft.conf(5), "Values"):
 * the messaging service's own ([cluster], [node ID], [limits], [tls]) and
 * those of other components ([kv], [weftd], a program's own), which
 * describe their keys in a table of weft_msvc_conf_key, one line per key.
 */
enum weft_msvc_conf_type {
	/* const char *, borrowed from the config. */
	WEFT_MSVC_CONF_STRING = 0,
	/* bool: true/false, yes/no, on/off, 1/0 (any case). */
	WEFT_MSVC_CONF_BOOL = 1,
	/* uint32_t: a decimal number. */
	WEFT_MSVC_CONF_U32 = 2,
	/* size_t: bytes, with an optional unit B, K, KB, KiB, M, MB, MiB, G,
	 * GB, GiB (any case, all powers of 1024; a space may come between):
	 * 4096, 64KiB, 16 MB. */
	WEFT_MSVC_CONF_SIZE = 3,
	/* uint64_t milliseconds: a number with a unit ms, s, m (or min), h;
	 * a bare number is milliseconds: 500ms, 2 s, 5m. */
	WEFT_MSVC_CONF_DURATION = 4,
	/* weft_msvc_conf_address: host:port or [IPv6]:port. */
	WEFT_MSVC_CONF_ADDRESS = 5,
	/* int: the index of the value (any case) in key->choices. */
	WEFT_MSVC_CONF_CHOICE = 6,
	/* Whatever key->parse makes of it. */
	WEFT_MSVC_CONF_CUSTOM = 7,
};

/* A WEFT_MSVC_CONF_ADDRESS value. */
typedef struct weft_msvc_conf_address {
	char host[256]; /* without brackets */
	uint16_t port;  /* 0: any free port, where that makes sense */
} weft_msvc_conf_address;

/*
 * A parser for WEFT_MSVC_CONF_CUSTOM: reads text into field (the key's
 * field in the section's struct); returns 0, or WEFT_ECONFIG with a short
 * reason in why ("want a number, majority, all or one").
 */
typedef int (*weft_msvc_conf_parse_cb)(const char *text, void *field, char *why,
                                       size_t whylen);

/* The longest duration a key of the file takes: a deadline further away
 * guards nothing, and so large a value is a unit left out. */
#define WEFT_MSVC_CONF_DAY_MS (24ull * 3600u * 1000u)
#define WEFT_MSVC_CONF_DAY_WHY                                                 \
	"at most a day: a deadline further away guards nothing (units: "       \
	"500ms, 2s, 5m, 1h)"

/* One key of a section: where its value goes in the section's struct, and
 * what it may be. min and max bound U32, SIZE and DURATION values (max 0:
 * no bound but the type's); with zero_ok, 0 is also accepted (it stands
 * for a default) whatever min is. why says why the bounds are what they
 * are, and ends the message of a value out of them:
 * "[limits] worker_threads: 1000000 is above 1024 (why)". */
typedef struct weft_msvc_conf_key {
	const char *name;
	enum weft_msvc_conf_type type;
	size_t offset; /* offsetof(the section's struct, field) */
	uint64_t min, max;
	const char *const *choices;    /* CHOICE: NULL-terminated */
	weft_msvc_conf_parse_cb parse; /* CUSTOM */
	const char *why;               /* the bounds' reason, or NULL */
	bool zero_ok;                  /* 0 accepted: the default */
} weft_msvc_conf_key;

/* WEFT_MSVC_CONF_KEY(SIZE, "max_value", struct my_settings, max_value,
 * .min = 1) is one row of a key table (C only: designated initialisers). */
#define WEFT_MSVC_CONF_KEY(type_, name_, struct_, field_, ...)                 \
	{                                                                      \
		.name = (name_), .type = WEFT_MSVC_CONF_##type_,               \
		.offset = offsetof(struct_, field_), __VA_ARGS__               \
	}

/*
 * A section a component reads: [name], and with per_node also [name ID]
 * for a member ID, whose keys override [name]'s for that node (so one
 * shared file can give each node its own metrics port). size is the size
 * of the struct the keys fill, so that loading can check the values.
 */
typedef struct weft_msvc_conf_section {
	const char *name;
	const weft_msvc_conf_key *keys;
	size_t nkeys;
	size_t size;
	bool per_node;
} weft_msvc_conf_section;

/* Options for weft_msvc_config_load_opts; zero fields take the defaults. */
typedef struct weft_msvc_config_opts {
	/* The other components' sections the file may hold: each is checked
	 * while loading, an unknown key or a bad value being an error that
	 * names the file and line. Borrowed during the call. */
	const weft_msvc_conf_section *const *sections;
	size_t nsections;
	/* true: a section neither the messaging service nor sections knows
	 * is an error too. false (weft_msvc_config_load): such a section is
	 * kept for weft_msvc_config_get. */
	bool strict;
} weft_msvc_config_opts;

/*
 * weft_msvc_config_load_opts is weft_msvc_config_load checking the
 * sections of opts as well (see weft_msvc_config_opts). Errors name the
 * file and line: "cluster.ini:12: [kv] max_value: not a size: '16 MQ'".
 * Returns 0, WEFT_ECONFIG, WEFT_EIO or WEFT_ENOMEM. Any thread.
 */
WEFT_API int weft_msvc_config_load_opts(const char *path,
                                        const weft_msvc_config_opts *opts,
                                        weft_msvc_config **out, char *err,
                                        size_t errlen);
/* weft_msvc_config_parse_opts is weft_msvc_config_load_opts for INI text
 * in memory; name stands for the file in error messages. */
WEFT_API int weft_msvc_config_parse_opts(const char *text, const char *name,
                                         const weft_msvc_config_opts *opts,
                                         weft_msvc_config **out, char *err,
                                         size_t errlen);

/*
 * weft_msvc_config_read fills dst, a struct of section->size bytes whose
 * defaults the caller has set, from the keys of [section->name] and then,
 * with section->per_node and node_id not NULL, of [section->name node_id].
 * Keys that are absent leave their field alone. Returns 0, or WEFT_ECONFIG
 * with the file, line, key and reason in err (an unknown key or a bad
 * value, when the file was not loaded with this section in opts). Any
 * thread.
 */
WEFT_API int weft_msvc_config_read(const weft_msvc_config *cfg,
                                   const weft_msvc_conf_section *section,
                                   const char *node_id, void *dst, char *err,
                                   size_t errlen);

/*
 * weft_msvc_config_check_change checks that cfg, the configuration read
 * again while node node_id runs with old (NULL: a client, no node of its
 * own), differs from old only in what a running node can take: its
 * members (the [node ID] sections of the others, added, removed, or with
 * another host or port) and the sections other nodes have of their own
 * ([NAME ID], ID not node_id). Anything else (the cluster's name, this
 * node's own address, [limits], [tls], the components' sections, a key
 * added, removed or written differently) needs a restart. Returns 0, or
 * WEFT_ECONFIG with "FILE:LINE: [section] key: ..." about the first such
 * difference in err (just "FILE" for a removed key), or WEFT_EINVAL. Any
 * thread, while no other thread changes old or cfg.
 */
WEFT_API int weft_msvc_config_check_change(const weft_msvc_config *old,
                                           const weft_msvc_config *cfg,
                                           const char *node_id, char *err,
                                           size_t errlen);

/*
 * weft_msvc_config_where writes where key of section was set, "FILE:LINE",
 * into buf (just "FILE" when it was not set; "<config>" for a config built
 * in code), for messages about values that are well-formed but do not fit
 * (a quorum above the member count). Any thread.
 */
WEFT_API void weft_msvc_config_where(const weft_msvc_config *cfg,
                                     const char *section, const char *key,
                                     char *buf, size_t len);

/* Service options; zero fields take the defaults shown. */
typedef struct weft_msvc_opts {
	/* TLS context for both directions, borrowed, must outlive the
	 * service; NULL: plaintext. Used according to the config's [tls]
	 * mode. */
	weft_tls_ctx *tls;
	/* Address to listen on; NULL: the node's configured host, which is
	 * then never resolved by this node (others dial it by that name). */
	const char *listen_host;
	/* Port to listen on; 0: the node's configured port. */
	uint16_t listen_port;
	/* For tests: this node's wall clock runs this many ms ahead of the
	 * system's (behind if negative), for everything the service stamps
	 * and judges and for weft_msvc_wall_ms. 0 in production. */
	int64_t clock_offset_ms;
	/* The share of requests without a trace context (neither in their
	 * call options nor inherited from a handler) that start a sampled
	 * trace, 0 to 1; the others carry none. 0: none start one. */
	double trace_sample_rate;
	/* Whether this node puts its stage times in every answer it sends
	 * (docs/PROTOCOL.md 4.5); false: only in the answers to requests
	 * that carry a trace context. Each costs the node two clock reads
	 * and the answer a params map, and the requester eight histogram
	 * records: about a tenth more per small request. */
	bool stage_times;
} weft_msvc_opts;

/*
 * weft_msvc_new creates a service for node_id on group's loops, with its
 * own copy of cfg. If node_id is a member of cfg, the service listens (at
 * weft_msvc_start) and heartbeats its peers; otherwise it is a non-member
 * client that only dials. group is borrowed and must outlive the service.
 * Register verbs and event callbacks, then call weft_msvc_start().
 * Returns 0, WEFT_EINVAL (bad id), WEFT_ECONFIG (invalid config) or
 * WEFT_ENOMEM. Any thread that is not one of group's loops.
 */
WEFT_API int weft_msvc_new(weft_loop_group *group, const weft_msvc_config *cfg,
                           const char *node_id, const weft_msvc_opts *opts,
                           weft_msvc **out);

/*
 * weft_msvc_start binds the listener (members) and opens the service for
 * traffic. Returns 0, WEFT_EADDRINUSE, WEFT_EADDR, WEFT_EBUSY (started
 * twice), WEFT_ECONFIG ([tls] mode all without a TLS context in the
 * options) or another WEFT_E code. Not from one of the service's loops.
 */
WEFT_API int weft_msvc_start(weft_msvc *svc);

/*
 * weft_msvc_stop shuts the service down gracefully: new send and request
 * calls fail with WEFT_ESHUTDOWN at once, inbound messages are refused
 * with a "shutting down" error, new handshakes are refused with
 * SHUTTING_DOWN (but for members this node waits for answers from),
 * queued messages are written and pending requests may complete until
 * timeout_ms passes; then
 * every request still
 * pending ends with WEFT_ESHUTDOWN, unsent messages are dropped and
 * counted, and all connections close. Returns when every callback has
 * run (it is weft_msvc_stop_async and a wait for its end). Idempotent: a
 * second call waits for the first stop to end. Not from one of the
 * service's loops or workers. Call
 * it before the group's loops are shut down to drain; a group shut down
 * first (weft_loop_group_shutdown) stops the service on each loop from
 * the loop's shutdown hook: API calls fail with WEFT_ESHUTDOWN from then
 * on, pending requests end with WEFT_ESHUTDOWN, queued messages are
 * dropped and the connections close as the loop's do; weft_msvc_stop or
 * weft_msvc_free afterwards frees the rest.
 */
WEFT_API void weft_msvc_stop(weft_msvc *svc, uint64_t timeout_ms);

/* Runs once when a stop begun by weft_msvc_stop_async has ended: every
 * callback of the service has run, its connections are closed and its
 * workers have ended. */
typedef void (*weft_msvc_stop_cb)(weft_msvc *svc, void *arg);

/*
 * weft_msvc_stop_async begins the stop weft_msvc_stop describes and
 * returns at once; cb (if not NULL) runs when it has ended, on the
 * service's first loop (or, when the loops no longer run, on the thread
 * that ended it). No thread waits on another meanwhile: each stage is
 * moved on by what it waits for. From any thread, the service's loops,
 * workers and handlers included. Free the service after cb has run, from
 * a thread that is not one of its loops or workers (weft_msvc_free also
 * waits for the stop to end). Returns 0, or WEFT_EBUSY when a stop has
 * begun already (cb is then not called).
 */
WEFT_API int weft_msvc_stop_async(weft_msvc *svc, uint64_t timeout_ms,
                                  weft_msvc_stop_cb cb, void *arg);

/* weft_msvc_wall_ms is svc's wall clock, ms since the Unix epoch: the
 * clock its deadlines are in (the system's, unless the options' test
 * offset moves it). Any thread. */
WEFT_API uint64_t weft_msvc_wall_ms(const weft_msvc *svc);

/* weft_msvc_cluster_wall_ms is weft_msvc_wall_ms corrected by the median
 * of the measured offsets of the members that are up (this node counting
 * as 0): with one member's clock far off and the others agreeing, every
 * node, that one included, reads about the same time. For timestamps
 * that are compared across nodes (the key-value service's versions).
 * Any thread. */
WEFT_API uint64_t weft_msvc_cluster_wall_ms(const weft_msvc *svc);

/* weft_msvc_watch_members starts watching every member (heartbeats,
 * which dial them and measure their clocks), as a first message to each
 * would: for services that need the cluster's time before they talk to
 * every member. Does nothing for a member already asked for, or before
 * weft_msvc_start. Any thread. */
WEFT_API void weft_msvc_watch_members(weft_msvc *svc);

/* weft_msvc_free stops the service (timeout 0) if needed and frees it.
 * Peers, messages and configs obtained from it become invalid. Not from
 * one of the service's loops or workers. */
WEFT_API void weft_msvc_free(weft_msvc *svc);

/* weft_msvc_node_id is this service's node or client id. Any thread. */
WEFT_API const char *weft_msvc_node_id(const weft_msvc *svc);
/* weft_msvc_is_member is true when the node id is listed in the config.
 * Any thread. */
WEFT_API bool weft_msvc_is_member(const weft_msvc *svc);
/* weft_msvc_port is the bound listening port once started, else 0. Any
 * thread. */
WEFT_API uint16_t weft_msvc_port(const weft_msvc *svc);

/* weft_msvc_peer_count is the number of member entries (this node
 * included): the configured members, then those added at run time, in
 * that order, a member removed keeping its entry (weft_msvc_peer_is_member
 * is false for it, and adding its id again makes it a member again);
 * weft_msvc_peer_at returns entry i. weft_msvc_members lists only the
 * members. Any thread. */
WEFT_API size_t weft_msvc_peer_count(const weft_msvc *svc);
WEFT_API weft_msvc_peer *weft_msvc_peer_at(weft_msvc *svc, size_t i);
/* weft_msvc_peer_find returns the member with that id, or NULL (none, or
 * removed). Any thread. */
WEFT_API weft_msvc_peer *weft_msvc_peer_find(weft_msvc *svc, const char *id);
/* weft_msvc_peer_id returns the member's node id, which lives as long as
 * the service. Any thread. */
WEFT_API const char *weft_msvc_peer_id(const weft_msvc_peer *peer);
/* weft_msvc_peer_is_self is true for this node's own entry. A node does
 * not send to itself: send and request return WEFT_EINVAL for it (a node
 * refuses any dialer that claims its own id, PROTOCOL.md 3.2). Any
 * thread. */
WEFT_API bool weft_msvc_peer_is_self(const weft_msvc_peer *peer);
/* weft_msvc_peer_is_up is the last state announced for peer (false until
 * the first handshake). Any thread. */
WEFT_API bool weft_msvc_peer_is_up(const weft_msvc_peer *peer);
/*
 * weft_msvc_peer_is_down is true while peer is known to be down: marked
 * down (its urgent connection failed, or it missed its heartbeats), or
 * dialed and not reached (refused, unreachable, a refused handshake)
 * since it was last up. Sends to it then fail at once with WEFT_EPEERDOWN,
 * and requests end with it at once (within a few milliseconds, never
 * inside the call); its heartbeats go on, and the first one answered
 * brings it back. False before the first dial. Any thread.
 */
WEFT_API bool weft_msvc_peer_is_down(const weft_msvc_peer *peer);

/*
 * weft_msvc_set_peer_addr changes where peer id is dialed (strings
 * copied); connections open already stay. For peers that bound port 0.
 * Returns 0, WEFT_ENOTFOUND or WEFT_ENOMEM. Any thread.
 */
WEFT_API int weft_msvc_set_peer_addr(weft_msvc *svc, const char *id,
                                     const char *host, uint16_t port);

/* ---- Members added and removed at run time (members.c) ---------------- */

/*
 * weft_msvc_member_add makes id a member, dialed at host:port (strings
 * copied), while the service runs. On the member's loop, its joined event
 * runs first (weft_msvc_on_member_event), then it is dialed and watched by
 * heartbeats at once, without waiting for traffic: it is reported up
 * (weft_msvc_on_peer_event) when it answers, and down if it does not. Its
 * peer is weft_msvc_peer_find(svc, id) as soon as this returns. With TLS
 * it must prove id with its certificate, as a configured member does.
 * An id that was removed and has drained becomes a member again, with the
 * same peer and the new address. Returns 0; WEFT_EEXIST (already a
 * member: weft_msvc_set_peer_addr changes an address); WEFT_EBUSY (removed
 * and still draining, which ends at most request_timeout after the remove
 * and its connections' close: add it again then); WEFT_EINVAL (a
 * bad id, this node's own id, a NULL or empty host, port 0);
 * WEFT_EOVERLOAD (1024 member entries, removed ones included, exist);
 * WEFT_ESHUTDOWN (not started, or stopping); WEFT_ENOMEM. Any thread.
 */
WEFT_API int weft_msvc_member_add(weft_msvc *svc, const char *id,
                                  const char *host, uint16_t port);

/*
 * weft_msvc_member_remove ends id's membership while the service runs.
 * From its return, weft_msvc_peer_find no longer finds it, and sends and
 * requests to its peer (which stays valid until weft_msvc_free) fail at
 * once with WEFT_ENOTMEMBER; those handed over by other threads before
 * and not yet written end with WEFT_ENOTMEMBER too (a request's callback
 * then runs with it, exactly once). On the member's loop it is reported
 * down (if it was up) and then left (weft_msvc_on_member_event); requests
 * already written to it may be answered until request_timeout has passed
 * (its connections stay open, and answers to what it asked still go to
 * it), after which those still pending end with WEFT_ENOTMEMBER; then
 * every connection to and from it is closed, ours writing what they hold
 * first, and it is refused as an unknown node if it dials again. Returns
 * 0, WEFT_ENOTFOUND (not a member, or removed already), WEFT_EINVAL (this
 * node's own id: stop the service instead), WEFT_ESHUTDOWN (not started,
 * or stopping) or WEFT_ENOMEM. Any thread.
 */
WEFT_API int weft_msvc_member_remove(weft_msvc *svc, const char *id);

/*
 * weft_msvc_members stores up to cap of the current members' peers (this
 * node included) in out and returns how many there are (more than cap:
 * call again with more room). A member added or removed meanwhile may or
 * may not be in the list. The peers stay valid until weft_msvc_free. Any
 * thread.
 */
WEFT_API size_t weft_msvc_members(weft_msvc *svc, weft_msvc_peer **out,
                                  size_t cap);

/* weft_msvc_peer_is_member is false for a member removed (and for a
 * client). Any thread. */
WEFT_API bool weft_msvc_peer_is_member(const weft_msvc_peer *peer);

/*
 * A verb handler. msg is borrowed until the handler returns. For a request
 * the handler responds exactly once, with weft_msvc_respond*(), before it
 * returns or, after weft_msvc_msg_detach(), later from any thread; a
 * request left without either gets an error response ("no response") when
 * the handler returns. Inline handlers run on the loop that read the
 * message and must not block; blocking handlers run on a worker thread.
 */
typedef void (*weft_msvc_handler_cb)(weft_msvc *svc, weft_msvc_msg *msg,
                                     void *arg);

/*
 * Verb flags, or-ed together. Where a verb's handler runs: INLINE or
 * BLOCKING. Who may call it (its access class): members of the cluster
 * only, unless CLIENTS is given. The service enforces the class before any
 * handler runs: a request from a client for a members-only verb is
 * answered with WEFT_EPERM (wire code FORBIDDEN), a one-way message is
 * dropped, and both are counted (forbidden_requests).
 */
enum weft_msvc_verb_flags {
	WEFT_MSVC_INLINE = 0,   /* run on the loop thread (default) */
	WEFT_MSVC_BLOCKING = 1, /* run on the worker pool */
	WEFT_MSVC_CLIENTS = 2,  /* clients may call it too */
	/* Its requests and one-way messages sent by this node, and the
	 * answers this node gives to it, travel on the urgent lane (the
	 * connection heartbeats use, never behind bulk traffic on the small
	 * and large lanes), those up to large_message_bytes: a larger one
	 * takes the large lane, so that it cannot hold the heartbeats up.
	 * For votes, leases and the like: register it so on every member.
	 * Members only: a client has one connection for everything. */
	WEFT_MSVC_URGENT_LANE = 4,
};

/*
 * weft_msvc_register binds verb (WEFT_MSVC_VERB_USER_MIN up to
 * WEFT_MSVC_MAX_VERBS-1) and its name (copied, for metrics) to cb, with
 * flags from weft_msvc_verb_flags. Before weft_msvc_start only. Returns
 * 0, WEFT_EINVAL, WEFT_EEXIST, WEFT_EBUSY (already started) or
 * WEFT_ENOMEM.
 */
WEFT_API int weft_msvc_register(weft_msvc *svc, uint32_t verb, const char *name,
                                weft_msvc_handler_cb cb, void *arg,
                                unsigned flags);

/*
 * weft_msvc_verb_limit caps the requests of verb in progress on this node
 * at max (0, the default: no cap): from a request's arrival until it is
 * answered, whether its handler runs, it waits for the worker pool, or it
 * was detached and is not yet answered. Past the cap a new request is
 * answered at once with WEFT_EOVERLOAD (wire code OVERLOADED) and counted
 * (over_limit), so that one hot verb cannot take every worker, or the
 * inbound budget, from the others. One-way messages are not counted.
 * After weft_msvc_register of verb, before weft_msvc_start. Returns 0,
 * WEFT_EINVAL (verb not registered) or WEFT_EBUSY (already started).
 */
WEFT_API int weft_msvc_verb_limit(weft_msvc *svc, uint32_t verb, uint32_t max);

/* What a handler reads from its message. The payload is borrowed until
 * the handler returns (or, when detached, until the message is
 * responded to). weft_msvc_msg_verb returns the verb.
 * weft_msvc_msg_data returns the payload. weft_msvc_msg_len returns its
 * length in bytes. weft_msvc_msg_is_request is true for a request, false
 * for a one-way message. The handler's thread, or, for a detached
 * message, the thread that holds it. */
WEFT_API uint32_t weft_msvc_msg_verb(const weft_msvc_msg *msg);
WEFT_API const void *weft_msvc_msg_data(const weft_msvc_msg *msg);
WEFT_API size_t weft_msvc_msg_len(const weft_msvc_msg *msg);
WEFT_API bool weft_msvc_msg_is_request(const weft_msvc_msg *msg);
/* weft_msvc_msg_sender is the sender's node or client id, borrowed as
 * the payload is. */
WEFT_API const char *weft_msvc_msg_sender(const weft_msvc_msg *msg);
/* weft_msvc_msg_peer is the sending member, or NULL for a client. */
WEFT_API weft_msvc_peer *weft_msvc_msg_peer(const weft_msvc_msg *msg);
/* weft_msvc_msg_created_ms is when the sender made the message and
 * weft_msvc_msg_deadline_ms is its expiry, in ms since the Unix
 * epoch by this node's clock (weft_msvc_wall_ms): the sender's stamps
 * moved by the offset of its clock from ours as this node estimates it
 * (docs/RELIABILITY.md, "Clocks"); expiry 0 means none. Pass the deadline
 * on in weft_msvc_call_opts.deadline_ms for requests made on its behalf. */
WEFT_API uint64_t weft_msvc_msg_created_ms(const weft_msvc_msg *msg);
WEFT_API uint64_t weft_msvc_msg_deadline_ms(const weft_msvc_msg *msg);

/*
 * weft_msvc_msg_detach keeps a request past its handler: call it inside
 * the handler; the returned message (never NULL: the copy is made
 * up front) is the caller's until passed to a respond function, from any
 * thread. Its payload counts as in flight until then. Returns NULL for a
 * one-way message.
 */
WEFT_API weft_msvc_msg *weft_msvc_msg_detach(weft_msvc_msg *msg);
/* weft_msvc_msg_detach_reply is weft_msvc_msg_detach without the payload:
 * the returned message can be answered (and its sender, deadline and
 * verb read) but its data is empty, so a handler that has taken what it
 * needs from a large request keeps no second copy of it while the answer
 * waits. The payload's size still counts as in flight until the answer,
 * as a copy's would (the handler holds the bytes in some form), so
 * reading pauses the same. NULL when it could not be made. */
WEFT_API weft_msvc_msg *weft_msvc_msg_detach_reply(weft_msvc_msg *msg);

/*
 * weft_msvc_respond answers a request with a copy of data. The response
 * carries the request's expiry and travels on this node's own connection
 * to the requester of the class its size calls for (or on the client's
 * connection). Consumes a detached msg on success and failure. Returns 0,
 * WEFT_EINVAL (not a request or already answered), WEFT_EOVERLOAD (the
 * requester's queue is full: the response is dropped and counted),
 * WEFT_ETOOBIG or WEFT_ESHUTDOWN. Any thread (for a detached message).
 */
WEFT_API int weft_msvc_respond(weft_msvc_msg *msg, const void *data,
                               size_t len);
/* weft_msvc_respond_buf is weft_msvc_respond moving payload's bytes out
 * (payload stays the caller's), on success and failure. */
WEFT_API int weft_msvc_respond_buf(weft_msvc_msg *msg,
                                   struct evbuffer *payload);
/*
 * weft_msvc_respond_error answers with an error: status is a negative
 * WEFT_E code (WEFT_ENOTFOUND, WEFT_EINVAL, ...; codes without a wire
 * equivalent become WEFT_EREMOTE) and text (copied, may be NULL) a short
 * explanation. The requester's callback sees status and the text. Returns
 * as weft_msvc_respond does (weft_msvc_respond's errors). The handler's
 * thread, or any thread for a detached message.
 */
WEFT_API int weft_msvc_respond_error(weft_msvc_msg *msg, int status,
                                     const char *text);

/*
 * A W3C trace context (docs/PROTOCOL.md 4.5, TRACEPARENT): the trace, the
 * span of the request that carries it (the parent of whatever its handler
 * does), and the flags, of which bit 0 (WEFT_MSVC_TRACE_SAMPLED) says that
 * the trace is recorded. An all-zero trace id or span id is not valid.
 */
typedef struct weft_msvc_traceparent {
	uint8_t trace_id[16];
	uint8_t span_id[8];
	uint8_t flags;
} weft_msvc_traceparent;
#define WEFT_MSVC_TRACE_SAMPLED 0x01u

/* Per-call options; NULL or zero fields take the defaults shown. */
typedef struct weft_msvc_call_opts {
	/* Request: the config's request_timeout_ms. One-way: no expiry. */
	uint64_t timeout_ms;
	/* Absolute wall-clock deadline (ms since the epoch), e.g. from
	 * weft_msvc_msg_deadline_ms(); the earlier of it and timeout_ms
	 * applies. 0: none. */
	uint64_t deadline_ms;
	/*
	 * Ordering key: messages to one peer in one class with the same key
	 * travel on the same connection, and those sent from one thread
	 * arrive in the order sent. With several connections per class,
	 * different keys spread the load. Default 0.
	 */
	uint64_t key;
	/* Request: where to store, before the call returns 0, a handle
	 * for weft_msvc_cancel (never 0). NULL: none wanted. */
	uint64_t *cancel_handle;
	/* Request: the trace it belongs to, span_id being the caller's
	 * span (copied). NULL: that of the handler running on this thread,
	 * if it has one, or a new trace at the service's
	 * trace_sample_rate. */
	const weft_msvc_traceparent *traceparent;
} weft_msvc_call_opts;

/*
 * A reply callback: status 0 and the response payload, or a negative
 * WEFT_E code: WEFT_ETIMEDOUT (no response in time), WEFT_EPEERDOWN (the
 * connection it went out on died, the peer missed its heartbeats, or it
 * is known down: see weft_msvc_peer_is_down),
 * WEFT_EEXPIRED (its deadline passed before it could be sent),
 * WEFT_EOVERLOAD, WEFT_ESHUTDOWN (this service stopped), or an error the
 * responder sent (WEFT_EUNKNOWNVERB, WEFT_EREMOTE, WEFT_ENOTFOUND, ...),
 * when data and len hold its text. data is borrowed until the callback
 * returns. Runs on one of the service's loops.
 */
typedef void (*weft_msvc_reply_cb)(weft_msvc *svc, int status, const void *data,
                                   size_t len, void *arg);

/*
 * weft_msvc_send sends a one-way message with a copy of data. Returns 0
 * once queued (delivery is not confirmed), WEFT_EPEERDOWN (the peer is
 * known down), WEFT_EOVERLOAD (the peer's outbound queue is full),
 * WEFT_ETOOBIG (over max_message_bytes),
 * WEFT_EEXPIRED (the deadline has passed already), WEFT_EINVAL,
 * WEFT_ESHUTDOWN (stopping, or not started) or WEFT_ENOMEM. Any thread.
 */
WEFT_API int weft_msvc_send(weft_msvc *svc, weft_msvc_peer *peer, uint32_t verb,
                            const void *data, size_t len,
                            const weft_msvc_call_opts *opts);
/* weft_msvc_send_buf is weft_msvc_send moving payload's bytes out
 * (payload stays the caller's), on success and failure. */
WEFT_API int weft_msvc_send_buf(weft_msvc *svc, weft_msvc_peer *peer,
                                uint32_t verb, struct evbuffer *payload,
                                const weft_msvc_call_opts *opts);

/*
 * weft_msvc_request sends a request with a copy of data. Returns 0, and
 * cb then runs exactly once (never inside this call); or fails at once,
 * cb never running, with WEFT_EOVERLOAD (peer queue full, or
 * max_pending_requests reached), WEFT_ETOOBIG, WEFT_EEXPIRED,
 * WEFT_EINVAL, WEFT_ESHUTDOWN or WEFT_ENOMEM. Any thread.
 */
WEFT_API int weft_msvc_request(weft_msvc *svc, weft_msvc_peer *peer,
                               uint32_t verb, const void *data, size_t len,
                               const weft_msvc_call_opts *opts,
                               weft_msvc_reply_cb cb, void *arg);
/* weft_msvc_request_buf is weft_msvc_request moving payload's bytes out
 * (payload stays the caller's), on success and failure. */
WEFT_API int weft_msvc_request_buf(weft_msvc *svc, weft_msvc_peer *peer,
                                   uint32_t verb, struct evbuffer *payload,
                                   const weft_msvc_call_opts *opts,
                                   weft_msvc_reply_cb cb, void *arg);

/*
 * weft_msvc_cancel gives up the request to peer whose handle
 * weft_msvc_call_opts.cancel_handle gave. If the request is still pending
 * when the cancel reaches the peer's loop (soon, never inside this call),
 * its callback runs there with WEFT_ECANCELED, once, in place of its
 * answer; an answer that comes later is dropped and counted
 * (cancelled_responses). A request already written on a connection of
 * protocol version 2 is cancelled at the responder too: a CANCEL goes to
 * it on the urgent lane (docs/PROTOCOL.md 4.6). With a peer of version 1,
 * cancellation stays local: the responder runs the request and its answer
 * is dropped. A handle whose request has ended, or is unknown, is
 * ignored. Call it from the thread that made the request, or after the
 * request call returned on another: a cancel from elsewhere may overtake
 * the request's hand-over to the loop and find nothing. Returns 0, or
 * WEFT_EINVAL (no peer or handle 0), WEFT_ESHUTDOWN or WEFT_ENOMEM. Any
 * thread.
 */
WEFT_API int weft_msvc_cancel(weft_msvc *svc, weft_msvc_peer *peer,
                              uint64_t handle);

/*
 * weft_msvc_msg_is_cancelled is true once the requester has cancelled
 * msg (protocol version 2): a handler that works long may ask, and stop.
 * Its answer, if it still sends one, is not written. Only a request that
 * outlives its read can be told: one run on the worker pool, or detached;
 * an inline handler, which has the loop to itself, always reads false.
 * The handler's thread, or the thread that holds a detached message.
 */
WEFT_API bool weft_msvc_msg_is_cancelled(const weft_msvc_msg *msg);

/* An on-cancel callback (weft_msvc_msg_on_cancel), with its arg. */
typedef void (*weft_msvc_cancel_cb)(void *arg);

/*
 * weft_msvc_msg_on_cancel asks for cb(arg) when the requester cancels
 * msg, rather than polling weft_msvc_msg_is_cancelled: at most once, on
 * the loop that reads the cancel, or at once in this call if msg is
 * cancelled already. It may run while the handler or the holder of msg
 * works on another thread, but never after msg is released: answering a
 * detached message (or a pool handler's return) waits for a callback
 * that is running, unless it answers from inside the callback, which may
 * do so. A later call replaces the callback. msg must be a request that
 * outlives its read, as for weft_msvc_msg_is_cancelled (detached, or run
 * on the pool); from a peer of version 1, which cannot cancel, cb never
 * runs. Returns 0 or WEFT_EINVAL. The handler's thread, or, for a
 * detached message, the thread that holds it.
 */
WEFT_API int weft_msvc_msg_on_cancel(weft_msvc_msg *msg, weft_msvc_cancel_cb cb,
                                     void *arg);

/* ---- Waiting from other threads (sync.c) ------------------------------ */

/*
 * For a thread that is not one of the service's loops (the main thread, a
 * worker of the program's own, a blocking handler): ask and wait, without
 * writing a mutex and a condition variable around the callback. None of
 * these may be called from one of the service's loops, whose thread would
 * wait for the answer it is itself to deliver: they return WEFT_EBUSY
 * there.
 */

/* An answer to come: made by weft_msvc_request_future. */
typedef struct weft_msvc_future weft_msvc_future;

/*
 * weft_msvc_request_future sends a request as weft_msvc_request does and
 * gives a future for its answer in *out, the caller's to free with
 * weft_msvc_future_free. Returns 0, or weft_msvc_request's errors (no
 * future made). Any thread.
 */
WEFT_API int weft_msvc_request_future(weft_msvc *svc, weft_msvc_peer *peer,
                                      uint32_t verb, const void *data,
                                      size_t len,
                                      const weft_msvc_call_opts *opts,
                                      weft_msvc_future **out);

/*
 * weft_msvc_future_wait waits until the request has ended, for at most
 * timeout_ms (UINT64_MAX: as long as it takes, which is bounded: every
 * request ends, at the latest when it times out). Returns 0 once it ended
 * (weft_msvc_future_status says how), WEFT_ETIMEDOUT if it has not yet
 * (wait again, or free the future), or WEFT_EBUSY on one of the service's
 * loops. Any other thread.
 */
WEFT_API int weft_msvc_future_wait(weft_msvc_future *f, uint64_t timeout_ms);

/* weft_msvc_future_is_done is true once the request has ended. Any
 * thread. */
WEFT_API bool weft_msvc_future_is_done(weft_msvc_future *f);

/*
 * weft_msvc_future_status is the ended request's status, as its reply
 * callback would have seen it: 0, or a WEFT_E code (WEFT_ETIMEDOUT when no
 * answer came in time, an error the responder sent, ...). WEFT_EBUSY while
 * it has not ended. Any thread.
 */
WEFT_API int weft_msvc_future_status(weft_msvc_future *f);

/*
 * weft_msvc_future_data is the ended request's payload (the response, or
 * the responder's error text) and its length in *len; borrowed from f
 * until weft_msvc_future_free. NULL with *len 0 before the end. Any
 * thread.
 */
WEFT_API const void *weft_msvc_future_data(weft_msvc_future *f, size_t *len);

/* weft_msvc_future_free frees f; a request still out is cancelled as
 * weft_msvc_cancel does, its answer dropped if it comes. NULL is ignored.
 * Any thread. */
WEFT_API void weft_msvc_future_free(weft_msvc_future *f);

/*
 * weft_msvc_call sends a request and waits for its end: the blocking
 * request. The response payload, or the text of an error the responder
 * sent, is appended to reply (may be NULL). Returns what the reply
 * callback would have seen (0, WEFT_ETIMEDOUT, WEFT_EPEERDOWN, a
 * responder's error, ...), one of weft_msvc_request's immediate errors, or
 * WEFT_EBUSY on one of the service's loops. Any other thread.
 */
WEFT_API int weft_msvc_call(weft_msvc *svc, weft_msvc_peer *peer, uint32_t verb,
                            const void *data, size_t len,
                            const weft_msvc_call_opts *opts,
                            struct evbuffer *reply);

/*
 * weft_msvc_peer_wait_up starts dialing peer if nothing has yet (peers
 * are dialed lazily) and waits at most timeout_ms for it to be up (its
 * urgent connection's handshake done, or a heartbeat answered). Returns 0
 * once it is; WEFT_EPEERDOWN as soon as the peer is known down: a dial of
 * it failed, or it was marked down, during the wait (for a peer known down
 * already, that is its next redial, due within one reconnect back-off);
 * WEFT_ETIMEDOUT; WEFT_ESHUTDOWN (the service is not started, or
 * stopping); WEFT_ENOTMEMBER (the member was removed, before or during
 * the wait); WEFT_EINVAL (this node itself, or not one of svc's members);
 * or WEFT_EBUSY on one of the service's loops. Any other thread.
 */
WEFT_API int weft_msvc_peer_wait_up(weft_msvc *svc, weft_msvc_peer *peer,
                                    uint64_t timeout_ms);

/* ---- Waiting for request capacity (capacity.c) ------------------------ */

/*
 * With max_pending_requests requests out, weft_msvc_request refuses more
 * with WEFT_EOVERLOAD. Rather than retry after a sleep, a caller waits for
 * one of them to end: a thread that may block with weft_msvc_wait_capacity,
 * loop code with a callback from weft_msvc_on_capacity (Netty's
 * channelWritabilityChanged, an nng aio). Capacity is not reserved: a
 * caller on another thread may take it first, and the request then is
 * refused again (wait again). A peer's full outbound queue
 * (outbound_queue_bytes) is a different WEFT_EOVERLOAD, which these do not
 * wait for.
 */

/* A capacity callback: status 0 when there was room for a request as it
 * was posted, or WEFT_ESHUTDOWN when the service stopped first. svc
 * identifies the service; it may be stopping. */
typedef void (*weft_msvc_capacity_cb)(weft_msvc *svc, int status, void *arg);

/*
 * weft_msvc_wait_capacity waits at most timeout_ms (UINT64_MAX: without a
 * limit) until fewer than max_pending_requests requests are pending.
 * Returns 0 then (at once if there is room already), WEFT_ETIMEDOUT,
 * WEFT_ESHUTDOWN (not started, or stopping: a wait under way ends when
 * weft_msvc_stop begins), WEFT_EINVAL, or WEFT_EBUSY on one of the
 * service's loops, where the wait would hold up the answers it waits for.
 * Any other thread.
 */
WEFT_API int weft_msvc_wait_capacity(weft_msvc *svc, uint64_t timeout_ms);

/*
 * weft_msvc_on_capacity has cb run once on loop (the caller's own, which
 * must outlive the wait; one of the service's loops, or any other) as soon
 * as fewer than max_pending_requests requests are pending: soon when there
 * is room already, never inside this call. When the service stops first,
 * cb runs with WEFT_ESHUTDOWN. Returns 0 (cb will run exactly once),
 * WEFT_ESHUTDOWN (not started, or stopping), WEFT_EINVAL or WEFT_ENOMEM;
 * cb never runs then. Any thread.
 */
WEFT_API int weft_msvc_on_capacity(weft_msvc *svc, weft_loop *loop,
                                   weft_msvc_capacity_cb cb, void *arg);

/* A peer state change: up after a handshake or heartbeat answer, down
 * when its urgent connection fails or it misses heartbeat_misses beats in
 * a row. Runs on one of the service's loops. */
typedef void (*weft_msvc_peer_cb)(weft_msvc *svc, weft_msvc_peer *peer, bool up,
                                  void *arg);

/* weft_msvc_on_peer_event adds a peer listener: every one added is
 * called for each event, in the order added (the key-value service adds
 * its own beside an application's). Before weft_msvc_start only. Returns
 * 0, WEFT_EINVAL (cb NULL), WEFT_EBUSY or WEFT_ENOMEM. */
WEFT_API int weft_msvc_on_peer_event(weft_msvc *svc, weft_msvc_peer_cb cb,
                                     void *arg);

/* A membership change, on the member's loop: joined (weft_msvc_member_add;
 * before the member's first up event), or left (weft_msvc_member_remove;
 * after its last down event, if it was up). Runs exactly once per add and
 * per remove that returned 0, even when the service stops meanwhile; the
 * configured members join without an event. */
typedef void (*weft_msvc_member_cb)(weft_msvc *svc, weft_msvc_peer *peer,
                                    bool joined, void *arg);

/* weft_msvc_on_member_event adds a membership listener, as
 * weft_msvc_on_peer_event adds a peer listener. Before weft_msvc_start
 * only. Returns 0, WEFT_EINVAL (cb NULL), WEFT_EBUSY or WEFT_ENOMEM. */
WEFT_API int weft_msvc_on_member_event(weft_msvc *svc, weft_msvc_member_cb cb,
                                       void *arg);

/* Counters for one peer. Read at any time from any thread; each field is
 * exact, the set is not a single snapshot. */
typedef struct weft_msvc_peer_stats {
	uint64_t sent;             /* messages written to this peer */
	uint64_t received;         /* messages read from this peer */
	uint64_t bytes_sent;       /* frame bytes written */
	uint64_t bytes_received;   /* frame bytes read */
	uint64_t dropped_expired;  /* expired in our queue or on arrival */
	uint64_t dropped_overload; /* refused: queue full */
	uint64_t timed_out;        /* requests that timed out */
	uint64_t failed_peer_down; /* requests failed with peer down */
	uint64_t pending;          /* requests awaiting a response */
	uint64_t queued_bytes;     /* outbound bytes queued or unwritten */
	uint64_t connects;         /* outbound handshakes completed */
	uint64_t connect_failures; /* dials or handshakes that failed */
	uint64_t downs;            /* times marked down */
	/* The wire stages of this peer's connections (docs/PROTOCOL.md
	 * 2.1): on those that compress, frame bodies' bytes before
	 * compression and as they travelled, both ways; on every one,
	 * messages that travelled as chunks, both ways. */
	uint64_t body_bytes_out, wire_bytes_out;
	uint64_t body_bytes_in, wire_bytes_in;
	uint64_t chunked_sent, chunked_received;
	/* Request round trips in ns, from a snapshot at most ~1 s old. */
	uint64_t latency_count, latency_p50_ns, latency_p99_ns;
	uint64_t latency_max_ns;
	/* The peer's wall clock minus ours in ms, as last estimated (0 until
	 * clock_known); clock_measured: from heartbeat round trips (of
	 * clock_rtt_ms), else from what it sent alone; clock_skew_exceeded:
	 * the offset is past the limits' max_clock_skew_ms. */
	int64_t clock_offset_ms;
	uint64_t clock_rtt_ms;
	bool clock_known, clock_measured, clock_skew_exceeded;
} weft_msvc_peer_stats;

/* weft_msvc_peer_get_stats copies peer's counters into *out. Any
 * thread. */
WEFT_API void weft_msvc_peer_get_stats(const weft_msvc_peer *peer,
                                       weft_msvc_peer_stats *out);

/* Counters for one verb, handled and sent. */
typedef struct weft_msvc_verb_stats {
	uint64_t received;         /* messages of this verb that arrived */
	uint64_t handled;          /* handler calls */
	uint64_t responded;        /* responses sent (errors included) */
	uint64_t sent;             /* sent or requested by this node */
	uint64_t expired;          /* dropped before its handler ran */
	uint64_t bytes_received;   /* payload bytes */
	uint64_t bytes_sent;       /* payload bytes */
	uint64_t timed_out;        /* this node's requests that timed out */
	uint64_t dropped_overload; /* sends and requests refused: overload */
	uint64_t pending;          /* this node's requests awaiting replies */
	/* Requests in progress here, and those refused past the verb's cap
	 * (weft_msvc_verb_limit; both 0 without one). */
	uint64_t in_progress, over_limit;
	/* Round trips of this node's requests of this verb in ns, from a
	 * snapshot at most ~1 s old. */
	uint64_t latency_count, latency_p50_ns, latency_p99_ns;
	uint64_t latency_max_ns;
} weft_msvc_verb_stats;

/* weft_msvc_verb_get_stats reads verb's counters (zeros for an unknown
 * verb). Any thread. */
WEFT_API void weft_msvc_verb_get_stats(const weft_msvc *svc, uint32_t verb,
                                       weft_msvc_verb_stats *out);

/* Node-wide counters: the reactor's own behaviour and every bad input. */
typedef struct weft_msvc_stats {
	/* Reactor: is batching working? */
	uint64_t read_batches;  /* inbound read events handled */
	uint64_t messages_in;   /* messages decoded */
	uint64_t drain_batches; /* flushes of encoded messages to connections */
	uint64_t messages_out;  /* messages encoded */
	uint64_t handoffs;      /* messages passed between threads */
	uint64_t write_calls;   /* socket writes (bytes left the buffer) */
	uint64_t bytes_written; /* bytes those writes took */
	uint64_t loop_wakeups;  /* sum of the loops' wake-ups */
	/* Expiry, by stage. */
	uint64_t expired_in_queue;
	uint64_t expired_on_arrival;
	uint64_t expired_before_handler;
	/* Limits. */
	uint64_t overloaded;       /* sends refused: queue or pending full */
	uint64_t read_pauses;      /* connections paused for inflight bytes */
	uint64_t inflight_bytes;   /* inbound bytes received, not handled */
	uint64_t pending_requests; /* requests awaiting a response */
	/* Bad input, each closing one connection. */
	uint64_t bad_frames;       /* checksum failures, frames cut short */
	uint64_t oversized_frames; /* length above max_frame_bytes */
	uint64_t bad_envelopes;    /* invalid msgpack or envelope */
	uint64_t bad_compressed;   /* compressed bodies refused: corrupt,
	                              a size that lies, past the ratio */
	uint64_t bad_chunks;       /* chunks out of order, or a message
	                              declared above max_message_bytes */
	/* Messages above max_frame_bytes for a peer of an older release,
	 * which does not assemble chunks: failed (a request with
	 * WEFT_ETOOBIG, a response as an error response saying so). */
	uint64_t oversized_messages;
	uint64_t handshakes_refused; /* wrong magic/cluster/node/version */
	uint64_t unknown_verbs;      /* answered with an error */
	uint64_t forbidden_requests; /* a client asked a members-only verb */
	uint64_t late_responses;     /* responses to no pending request */
	/* Responses from a peer other than the one asked (or from a client,
	 * which is never asked): dropped, connection closed. */
	uint64_t forged_responses;
	/* What untrusted peers were refused or granted (docs/SECURITY.md). */
	uint64_t clients_refused; /* too many clients, in all or per address */
	/* Connections closed before their handshake ended to make room for
	 * newer ones, or refused with every descriptor the node grants taken
	 * (counted each second). */
	uint64_t handshakes_dropped;
	uint64_t client_pauses;   /* clients not read: answers backed up */
	uint64_t stalled_clients; /* closed: not reading their answers */
	uint64_t idle_clients;    /* closed: idle */
	uint64_t frame_timeouts;  /* closed: a frame not completed in time */
	uint64_t clients_open;    /* client connections open now */
	uint64_t client_queued_bytes; /* answer bytes queued for clients now */
	/* Connections. */
	uint64_t connections_accepted;
	uint64_t connections_open;
	uint64_t heartbeats_missed;
	uint64_t peer_downs;
	uint64_t worker_jobs; /* handlers run on the worker pool */
	/* Order across reconnections (docs/RELIABILITY.md): members'
	 * connections closed because a newer one of their class and index
	 * was accepted, and the messages that came on them after it,
	 * dropped. */
	uint64_t superseded_connections;
	uint64_t superseded_messages;
	/* Fairness: turns a connection gave up at its read budget. */
	uint64_t read_yields;
	/* Clients paused for their rate limit (client_rate, address_rate). */
	uint64_t rate_limited;
	/* Cancellation (protocol version 2): this node's requests ended by
	 * weft_msvc_cancel, and their answers that came all the same
	 * (dropped); cancels from peers that found their request, and those
	 * that found none (ignored); requests cancelled while queued for the
	 * worker pool (not run). */
	uint64_t cancelled_requests;
	uint64_t cancelled_responses;
	uint64_t cancels_received;
	uint64_t cancels_unknown;
	uint64_t cancelled_jobs;
	/* Trace contexts from peers not valid by W3C Trace Context
	 * (ignored: the request is handled without one). */
	uint64_t bad_traceparents;
} weft_msvc_stats;

/* weft_msvc_get_stats reads the node counters. Any thread. */
WEFT_API void weft_msvc_get_stats(const weft_msvc *svc, weft_msvc_stats *out);

/* ---- Trace context and stage times (trace.c) ------------------------- */

/*
 * The stages of a request at its responder, in the order of the STAGE_US
 * param (docs/PROTOCOL.md 4.5): from the read that took its frame in to
 * its dispatch (INBOUND), waiting for a worker (QUEUE, 0 for an inline
 * handler), from the handler's start to its answer (HANDLER), and from
 * the answer to its encoding on the connection (SEND). A responder of a
 * later version may report more; WEFT_MSVC_STAGES_MAX bounds them.
 */
enum weft_msvc_stage {
	WEFT_MSVC_STAGE_INBOUND = 0,
	WEFT_MSVC_STAGE_QUEUE = 1,
	WEFT_MSVC_STAGE_HANDLER = 2,
	WEFT_MSVC_STAGE_SEND = 3,
	WEFT_MSVC_STAGES = 4, /* the stages this version reports */
};
#define WEFT_MSVC_STAGES_MAX 8

/* The stage times a response carried: n values in us, microseconds. */
typedef struct weft_msvc_stage_times {
	uint32_t n;
	uint64_t us[WEFT_MSVC_STAGES_MAX];
} weft_msvc_stage_times;

/*
 * weft_msvc_reply_stages points *out at the stage times of the answer
 * whose reply callback is running on this thread, borrowed until the
 * callback returns. Returns 0, or WEFT_ENOTFOUND outside a reply
 * callback, or when the answer carried none (a peer of protocol version
 * 1, or no answer: a timeout, a failed connection). Any thread: it
 * answers for the reply callback running on the calling thread.
 */
WEFT_API int weft_msvc_reply_stages(const weft_msvc_stage_times **out);

/*
 * weft_msvc_msg_traceparent copies msg's trace context to *out: the one
 * its sender put in the request, span_id being the sender's span.
 * Returns 0, or WEFT_ENOTFOUND when it came without one (or with one not
 * valid by W3C Trace Context, which is ignored). A request the handler
 * makes while it runs, on its thread, takes the trace on. The handler's
 * thread, or the thread that holds a detached message.
 */
WEFT_API int weft_msvc_msg_traceparent(const weft_msvc_msg *msg,
                                       weft_msvc_traceparent *out);

/* One request of a sampled trace, made by this node and ended. */
typedef struct weft_msvc_span {
	/* The trace, this request's span and the flags: what went to the
	 * peer in its TRACEPARENT. */
	weft_msvc_traceparent context;
	uint8_t parent_span_id[8];           /* all zero: the trace's root */
	uint64_t start_unix_ns, end_unix_ns; /* this node's wall clock */
	const char *peer;                    /* the peer's id, borrowed */
	uint32_t verb;
	const char *verb_name; /* as registered here, or NULL; borrowed */
	int status;            /* as the reply callback sees it */
	/* The responder's stage times, or NULL when none came. */
	const weft_msvc_stage_times *stages;
} weft_msvc_span;

/* A span hook: span is borrowed until it returns. */
typedef void (*weft_msvc_span_cb)(weft_msvc *svc, const weft_msvc_span *span,
                                  void *arg);

/*
 * weft_msvc_on_span calls cb once for each request of a sampled trace
 * this node made, when it ends (answered, failed or timed out), just
 * before its reply callback, on the loop that runs it. One hook per
 * service; cb NULL removes it. Before weft_msvc_start only. Returns 0,
 * or WEFT_EINVAL or WEFT_EBUSY (already started). Any thread.
 */
WEFT_API int weft_msvc_on_span(weft_msvc *svc, weft_msvc_span_cb cb, void *arg);

/*
 * weft_msvc_metrics_dump appends every counter (node, per peer, per verb),
 * an up gauge per peer and the latency histograms (buckets of
 * <weft/metrics.h>) to out in the Prometheus text exposition format
 * (metric names start with weft_msvc_; label values escaped). The node
 * itself is not among the peers. The build and process metrics are
 * weft_metrics_dump_process's, once per page. Returns 0 or WEFT_ENOMEM.
 * Any thread.
 */
WEFT_API int weft_msvc_metrics_dump(weft_msvc *svc, struct evbuffer *out);

/* ---- What is in flight (debug.c) ----------------------------------------
 *
 * A snapshot of the node's connections and of the requests in flight
 * through it, for a person looking at a live node (Kudu's rpcz, gRPC's
 * channelz, brpc's /connections). Connections and pending requests belong
 * to their loops, so a snapshot posts a task to every loop of the service;
 * each copies what it owns (no lock on the data path, nothing read from
 * another thread), and the last one adds the requests that wait for or run
 * in a worker or were detached (read under the lock that cancellation
 * already takes for them) and hands the whole over. A snapshot is a copy:
 * it owes the service nothing and may outlive it.
 */
typedef struct weft_msvc_snapshot weft_msvc_snapshot;

/* One connection; its strings belong to the snapshot. */
typedef struct weft_msvc_conn_info {
	const char *peer;    /* the peer's id; "" before its handshake */
	const char *address; /* the remote end, "host:port" */
	const char *state;   /* "connecting", "handshake", "up", "closed" */
	int cls;             /* WEFT_MSVC_URGENT, _SMALL or _LARGE */
	uint32_t index;      /* within its class */
	bool outbound;       /* dialled by this node (false: accepted) */
	bool client;         /* the peer is a client, not a member */
	bool tls;
	/* What the handshake agreed (all 0 before it ends): the protocol
	 * version, CRCs on frames, chunks, and the compression algorithm
	 * (WEFT_COMPRESS_NONE, _LZ4 or _ZSTD of <weft/compress.h>). */
	uint32_t version;
	bool crc, chunks;
	int compression;
	uint64_t bytes_in, bytes_out; /* the socket's, both ways */
	uint64_t age_ms;              /* since it connected or was accepted */
} weft_msvc_conn_info;

/* Where a request in flight is. This node's own requests: not yet
 * written (queued for its connection), or written and awaiting the
 * answer. A peer's request handled here: queued for a worker, in a
 * worker's handler, or detached (its handler returned, to be answered
 * later). A request whose handler runs on its loop is never seen: the
 * snapshot's task runs between such handlers. */
enum weft_msvc_req_stage {
	WEFT_MSVC_REQ_UNSENT = 0,
	WEFT_MSVC_REQ_SENT = 1,
	WEFT_MSVC_REQ_QUEUED = 2,
	WEFT_MSVC_REQ_HANDLER = 3,
	WEFT_MSVC_REQ_DETACHED = 4,
};

/* One request in flight; its strings belong to the snapshot. */
typedef struct weft_msvc_req_info {
	const char *peer;      /* who it was sent to, or who sent it */
	const char *verb_name; /* the name registered here, or "" */
	uint32_t verb;
	bool inbound; /* a peer's request handled here */
	int stage;    /* enum weft_msvc_req_stage */
	/* This node's requests: since they were made. A peer's: since its
	 * sender made it, in this node's clock (through the offset measured
	 * for that peer's clock). */
	uint64_t age_ms;
	uint64_t id; /* the envelope's id */
} weft_msvc_req_info;

/* Runs once with the snapshot (taken by cb: free it with
 * weft_msvc_snapshot_free) and status 0, or with NULL and a negative
 * WEFT_E code; on one of the service's loop threads. */
typedef void (*weft_msvc_snapshot_cb)(weft_msvc *svc, int status,
                                      weft_msvc_snapshot *snap, void *arg);

/* weft_msvc_snapshot_async takes a snapshot and hands it to cb; if it
 * returns non-zero (WEFT_EINVAL, WEFT_ESHUTDOWN once the service stops,
 * WEFT_ENOMEM), cb is never called. A stop waits for a snapshot under way.
 * Any thread. */
WEFT_API int weft_msvc_snapshot_async(weft_msvc *svc, weft_msvc_snapshot_cb cb,
                                      void *arg);
/* weft_msvc_snapshot_take takes a snapshot and waits for it, at most
 * timeout_ms (0: no limit); *out is the caller's to free. Returns 0,
 * WEFT_ETIMEDOUT when a loop has not run its task by then (one that
 * blocks), WEFT_EBUSY on one of the service's loop threads (where waiting
 * would never end: use weft_msvc_snapshot_async), or as
 * weft_msvc_snapshot_async. Any other thread. */
WEFT_API int weft_msvc_snapshot_take(weft_msvc *svc, uint64_t timeout_ms,
                                     weft_msvc_snapshot **out);
/* weft_msvc_snapshot_free frees snap and its strings; NULL is ignored.
 * Any thread. */
WEFT_API void weft_msvc_snapshot_free(weft_msvc_snapshot *snap);
/* weft_msvc_snapshot_node returns the id of the node it was taken on,
 * and weft_msvc_snapshot_wall_ms returns when (the node's wall clock,
 * ms); both borrowed from snap. Any thread. */
WEFT_API const char *weft_msvc_snapshot_node(const weft_msvc_snapshot *snap);
WEFT_API uint64_t weft_msvc_snapshot_wall_ms(const weft_msvc_snapshot *snap);
/* weft_msvc_snapshot_conn_count returns the number of connections;
 * weft_msvc_snapshot_conn_at returns the i-th (by loop, then accepted
 * before dialled), borrowed from snap, or NULL past the end. Any
 * thread. */
WEFT_API size_t weft_msvc_snapshot_conn_count(const weft_msvc_snapshot *snap);
WEFT_API const weft_msvc_conn_info *
weft_msvc_snapshot_conn_at(const weft_msvc_snapshot *snap, size_t i);
/* weft_msvc_snapshot_req_count returns the number of requests in
 * flight; weft_msvc_snapshot_req_at returns the i-th (this node's first,
 * each kind oldest first), borrowed from snap, or NULL past the end. Any
 * thread. */
WEFT_API size_t weft_msvc_snapshot_req_count(const weft_msvc_snapshot *snap);
WEFT_API const weft_msvc_req_info *
weft_msvc_snapshot_req_at(const weft_msvc_snapshot *snap, size_t i);

/* What weft_msvc_snapshot_json writes: either or both. */
#define WEFT_MSVC_SNAPSHOT_CONNS 0x1u
#define WEFT_MSVC_SNAPSHOT_REQS 0x2u
/* weft_msvc_snapshot_json appends snap as one JSON object to out: "node",
 * "wall_ms", and "connections" and "requests" as what asks, arrays of
 * objects whose members are the info structs' fields (class, direction,
 * stage and compression as names). docs/WEFTD.md shows it. Returns 0 or
 * WEFT_ENOMEM. Any thread. */
WEFT_API int weft_msvc_snapshot_json(const weft_msvc_snapshot *snap,
                                     unsigned what, struct evbuffer *out);
/* weft_msvc_class_name returns a class's name ("urgent", "small",
 * "large"), a constant string, "?" for anything else. Any thread. */
WEFT_API const char *weft_msvc_class_name(int cls);
/* weft_msvc_req_stage_name returns a stage's name ("unsent", "sent",
 * "queued", "handler", "detached"), a constant string, "?" for anything
 * else. Any thread. */
WEFT_API const char *weft_msvc_req_stage_name(int stage);

#ifdef __cplusplus
}
#endif

#endif
