/* SPDX-License-Identifier: MIT */
/*
 * cluster.h: helpers for the messaging tests: an in-process cluster of
 * services, each on a loop group of its own, bound to 127.0.0.1 port 0,
 * and a waiter that lets the test thread sleep on its own loop until a
 * condition holds (callbacks on other threads poke it).
 */
#ifndef WEFT_TEST_CLUSTER_H
#define WEFT_TEST_CLUSTER_H

#include <stdatomic.h>
#include <stdint.h>

#include <weft/loop.h>
#include <weft/messaging.h>

#define CLUSTER_MAX 4

/* Verbs every test cluster registers. */
#define VERB_ECHO 16       /* responds with the request's payload */
#define VERB_SINK 17       /* one-way: counts and checks order */
#define VERB_HOLD 18       /* detaches requests and never answers */
#define VERB_SLOW 19       /* blocking: waits for the test to release it */
#define VERB_ECHO_BLOCK 20 /* echo on the worker pool */
/* The same echo, for members only (the verbs above allow clients). */
#define VERB_MEMBERS 21
#define VERB_MEMBERS_BLOCK 22
/* Echo on the urgent lane (WEFT_MSVC_URGENT_LANE). */
#define VERB_URGENT 23
/* Hold and slow with at most CAPPED_MAX requests in progress
 * (weft_msvc_verb_limit). */
#define VERB_HOLD_CAPPED 24
#define VERB_SLOW_CAPPED 25
#define CAPPED_MAX 3
/* Detaches requests and answers each from its on-cancel callback. */
#define VERB_HOLD_NOTIFY 26
/* Holds as VERB_HOLD does, with an on-cancel callback that takes 100 ms
 * and leaves the answer to the test. */
#define VERB_HOLD_SLOW_NOTIFY 27
/* Answers with as many bytes as its request names (a 4-byte big-endian
 * size), filled by cluster_fill with seed 0. */
#define VERB_GROW 28
/* Records the trace context it came with (relay_tp), and when its payload
 * names nodes (one byte each, 0 for n1), asks the first one's relay, with
 * the rest, while its handler runs, and answers with that answer. */
#define VERB_RELAY 29

struct cluster {
	weft_msvc_config *cfg;
	weft_loop_group *groups[CLUSTER_MAX];
	weft_msvc *svc[CLUSTER_MAX];
	/* Each node's TLS context (borrowed, NULL: none), kept for
	 * restarts by cluster_start_node. */
	weft_tls_ctx *tls[CLUSTER_MAX];
	/* Each node's clock offset (weft_msvc_opts), kept for restarts. */
	int64_t clock_offset_ms[CLUSTER_MAX];
	uint32_t max_version[CLUSTER_MAX]; /* kept for restarts too */
	void (*tune_node)(int i, weft_msvc_limits *l); /* and this */
	int loops;                                     /* per node */
	int n;
	/* State the handlers update. */
	_Atomic uint64_t sink_count[CLUSTER_MAX];
	_Atomic uint64_t sink_disorder[CLUSTER_MAX];
	uint64_t sink_next[CLUSTER_MAX]; /* loop thread of each node */
	weft_msvc_msg *_Atomic held[64];
	_Atomic int held_count;
	_Atomic bool slow_release;
	_Atomic int slow_running;
	_Atomic int slow_cancelled; /* slow handlers that saw a cancel */
	/* On-cancel callbacks run: the hold-notify verb's, and the slow
	 * handlers' (registered once they saw the cancel: run at once). */
	_Atomic int notify_held, cancel_notified, cancel_notified_late;
	_Atomic int slow_notify_started, slow_notify_done;
	_Atomic int ups, downs;    /* peer events seen */
	_Atomic int joins, leaves; /* member events seen */
	/* The same events, seen by a second listener of each kind (an
	 * application's beside the key-value service's). */
	_Atomic int also_ups, also_joins, also_leaves;
	/* The order of events: each takes the next number. */
	_Atomic int event_seq;
	_Atomic int last_up, last_down, last_join, last_leave;
	/* The relay verb's requests seen by each node, and the trace
	 * context of the last (valid when relay_traced). */
	_Atomic int relay_seen[CLUSTER_MAX];
	_Atomic bool relay_traced[CLUSTER_MAX];
	weft_msvc_traceparent relay_tp[CLUSTER_MAX];
	/* Kept for restarts, as cluster_opts has them. */
	double trace_sample_rate;
	bool stage_times;
	void (*setup_node)(int i, weft_msvc *svc);
};

/* The test thread's waiter. */
extern weft_loop *test_loop;

/* test_setup creates test_loop; test_teardown frees it. */
int test_setup(void **state);
int test_teardown(void **state);

/* test_poke wakes the test thread to look at its condition again. Any
 * thread. */
void test_poke(void);

/* test_wait runs test_loop until done(arg) or timeout_ms; returns true
 * if done. */
bool test_wait(bool (*done)(void *arg), void *arg, uint64_t timeout_ms);

/* Counting completions of requests. */
struct tally {
	_Atomic int done;
	_Atomic int ok;
	_Atomic int status_counts[32]; /* by -status */
	_Atomic int wrong_payload;
	int want;
};
void tally_cb(weft_msvc *svc, int status, const void *data, size_t len,
              void *arg);
bool tally_complete(void *arg);

/*
 * cluster_start builds n nodes n1..nN of cluster "test" with limits
 * tuned by tune (may be NULL), starts them, and tells each the others'
 * ports. Returns 0 or a WEFT_E code.
 */
int cluster_start(struct cluster *cl, int n, void (*tune)(weft_msvc_limits *l));

/* What cluster_start_with adds to cluster_start. */
struct cluster_opts {
	void (*tune)(weft_msvc_limits *l); /* may be NULL */
	enum weft_msvc_tls_mode tls_mode;  /* the config's [tls] mode */
	bool allow_plaintext_members;      /* and allow_plaintext_members */
	int loops;                         /* per node; 0: 1 */
	/* Node i's limits.max_protocol_version (0: the newest). */
	uint32_t max_version[CLUSTER_MAX];
	/* Node i's context, NULL: none. Borrowed: keep each alive until
	 * cluster_stop has returned. */
	weft_tls_ctx *tls[CLUSTER_MAX];
	/* Node i's wall clock runs this far from the system's (ms). */
	int64_t clock_offset_ms[CLUSTER_MAX];
	/* Tunes node i's limits after tune (may be NULL): a node that
	 * differs from the others. */
	void (*tune_node)(int i, weft_msvc_limits *l);
	/* Every node's weft_msvc_opts.trace_sample_rate and stage_times. */
	double trace_sample_rate;
	bool stage_times;
	/* Called for node i after its verbs are registered, before it
	 * starts (may be NULL): hooks that must be set before the start. */
	void (*setup_node)(int i, weft_msvc *svc);
};

/* cluster_start_with is cluster_start with TLS: n nodes (at most
 * CLUSTER_MAX) in mode o->tls_mode, node i with context o->tls[i]. */
int cluster_start_with(struct cluster *cl, int n, const struct cluster_opts *o);
/* cluster_start_node (re)starts node i after cluster_stop_node. */
int cluster_start_node(struct cluster *cl, int i);
void cluster_stop_node(struct cluster *cl, int i, uint64_t timeout_ms);
void cluster_stop(struct cluster *cl);
/* cluster_new is test_setup and cluster_start of a cluster of its own
 * (asserting both), for a cmocka setup; cluster_free undoes it. */
struct cluster *cluster_new(int n, void (*tune)(weft_msvc_limits *l));
void cluster_free(struct cluster *cl);
/* cluster_peer returns node from's peer entry for node to. */
weft_msvc_peer *cluster_peer(struct cluster *cl, int from, int to);

/* cluster_fill fills n bytes at buf with a pattern of seed's, one that
 * compresses to about a third. */
void cluster_fill(uint8_t *buf, size_t n, uint32_t seed);

/* cluster_black_hole listens on 127.0.0.1 and never accepts: the kernel
 * completes the TCP handshake, and a HELLO gets no answer. Returns the
 * socket, the caller's to close, and its port in *port. */
int cluster_black_hole(uint16_t *port);

#endif
