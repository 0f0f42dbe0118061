/* SPDX-License-Identifier: MIT */
/*
 * cnode.c: one node process of the cluster workload.
 *
 * The node runs weft's messaging service on one loop (--io=loop) or the
 * thread-per-peer baseline (--io=threads), answers the echo verb (and in
 * mix, serves the key-value verbs: weft_kv or the baseline's), and keeps
 * K requests in flight, each slot sending its next request to the next
 * other node in turn: the load generator weftd's load verb runs too
 * (services/loadgen). It talks to the coordinator over stdin/stdout:
 *
 *   node -> "port N"            once listening
 *   coord -> "ports P0 P1 ..."  every node's port
 *   node -> "addressed"         it knows where everybody is
 *   coord -> "prime"            everybody knows
 *   node -> "ready"             it asked every other node once, so every
 *                               connection (and TLS session) is up
 *   coord -> "go"               the clock starts
 *   node -> "tick OPS P99"      each second: completions so far, and
 *                               the p99 (ns) of the round trips so far
 *   node -> "done"              its window closed and its slots are idle
 *   coord -> "exit"             everybody is done: report and stop
 *   node -> "result k=v ...", "hist ..."
 *   coord -> "quit"             everybody reported: stop
 */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <loadgen.h>
#include <weft/histogram.h>
#include <weft/kv.h>
#include <weft/loop.h>
#include <weft/messaging.h>
#include <weft/tls.h>

#include "baseline.h"
#include "wbench.h"
#include "weftd_proto.h"

#define PRIME_WINDOW 4 /* first requests in flight per node */
/* mix --sessions: first requests in flight per client process, each
 * dialing a session's two connections (small and urgent); well under
 * the nodes' handshake slots with a few such processes at once. */
#define PRIME_SESSIONS 32
/* What a node grants clients: connections, and handshakes at once. */
#define WBENCH_NODE_MAX_CLIENTS 4096
#define WBENCH_NODE_MAX_HANDSHAKES 512
#define PROGRESS_SAMPLE 16 /* replies per slot for one progress sample */
/* mix: a replica's time to acknowledge a write, both key-value services.
 * Their default, 2 s, is too short for a shared two-core machine running
 * a dozen node processes: a stalled replica would fail writes (and the
 * key load) where it is only slow. */
#define REPLICATE_TIMEOUT_MS 10000

typedef struct cnode cnode;

/* mix --sessions: one client service per session, all on the process's
 * one loop, each bound to one member (as a ZooKeeper client session is
 * to its server). Slot i belongs to session i / --outstanding. */
typedef struct session {
	weft_msvc *svc;
	weft_msvc_peer *peer; /* its member */
	size_t member;
} session;

/* What a mix slot keeps beside its wload_slot (of the same index). Its
 * fields are touched only by the thread that runs the slot's reply, and
 * each reply follows the request it answers. */
typedef struct mix_slot {
	uint64_t rng;     /* picks the operation and the key */
	bool put;         /* the request in flight is a put */
	uint64_t puts_ok; /* of the slot's ok, the puts */
	/* cluster --large-share: the request in flight carries
	 * --large-size bytes; of the slot's ok, the large ones */
	bool large;
	uint64_t large_ok;
} mix_slot;

/*
 * The round trips, in one pair of histograms per thread that runs replies
 * (a loop thread, or one of the baseline's readers) rather than one per
 * slot: 64 slots' histograms kept a node process that shares two cores
 * with fifteen others missing the cache on every reply, which the
 * cluster figures then showed as the service's cost.
 */
typedef struct thread_lat {
	weft_histogram *lat;     /* round trips (mix: of gets) */
	weft_histogram *lat_put; /* mix: of puts; NULL otherwise */
	/* --large-share: of the large requests; NULL otherwise */
	weft_histogram *lat_large;
	struct thread_lat *next;
} thread_lat;

struct cnode {
	const wbench_opts *o;
	weft_msvc_config *cfg;
	weft_loop_group *group;
	weft_msvc *svc;
	weft_tls_ctx *tls;
	weft_kv *kv;            /* mix: this member's replica */
	weft_msvc_peer **peers; /* by node index, for svc */
	session *sess;          /* mix --sessions; NULL otherwise */
	unsigned nsess;
	wbase_node *base;
	wbase_kv *base_kv; /* mix, --io threads: this member's replica */
	size_t self;
	uint8_t *payload;
	uint8_t *large_payload; /* --large-share: --large-size bytes */
	wload *load;            /* the slots, the pacer and the window */
	mix_slot *mix;          /* by slot index */
	atomic_uint_fast64_t completed; /* replies, any time */
	/* A sample of the round trips so far (one reply in PROGRESS_SAMPLE
	 * of each slot), for the progress lines: counted by the threads
	 * that run replies (the baseline's many readers too, so kept off
	 * most replies: it takes a lock), read by the main thread each
	 * second. */
	wbench_sample so_far;
	atomic_uint_fast64_t handled; /* requests answered, for --slow */
	uint64_t slow_every;          /* every Nth is slow; 0: none */
	/* Answers to the first requests; the main thread sleeps on
	 * primed_cond for them (polling here, in P processes at once, took
	 * CPU from the handshakes it waited for). */
	atomic_uint primed;
	pthread_mutex_t primed_lock;
	pthread_cond_t primed_cond;
	atomic_uint loaded, load_failed; /* mix: keys put before the run */
	pthread_key_t lat_key;           /* this thread's thread_lat */
	pthread_mutex_t lat_lock;
	thread_lat *lats; /* every thread's, under lat_lock */
	bool lat_key_made;
	/* Start-up ("prime" to "ready"): CPU of this process, and its TLS
	 * handshakes, both ends counted (weft's context; 0 without TLS). */
	uint64_t up_cpu_us, up_handshakes, up_resumed;
};

/* my_lat is the calling thread's histograms, made on its first reply;
 * NULL when memory is short (the reply then goes uncounted there). */
static thread_lat *
my_lat(cnode *n)
{
	thread_lat *t = pthread_getspecific(n->lat_key);

	if (t != NULL)
		return t;
	if ((t = calloc(1, sizeof(*t))) == NULL)
		return NULL;
	if (wbench_hist_new(&t->lat) != 0 ||
	    (n->o->kv && wbench_hist_new(&t->lat_put) != 0) ||
	    (n->o->large_share > 0 && wbench_hist_new(&t->lat_large) != 0)) {
		weft_histogram_free(t->lat);
		weft_histogram_free(t->lat_put);
		free(t);
		return NULL;
	}
	pthread_setspecific(n->lat_key, t);
	pthread_mutex_lock(&n->lat_lock);
	t->next = n->lats;
	n->lats = t;
	pthread_mutex_unlock(&n->lat_lock);
	return t;
}

/* The echo's flags: on the pool for --handlers pool or slow requests. */
static unsigned
echo_flags(const cnode *n)
{
	return WEFT_MSVC_CLIENTS |
	       (n->slow_every || n->o->handlers_pool ? WEFT_MSVC_BLOCKING
	                                             : WEFT_MSVC_INLINE);
}

static void msvc_echo(weft_msvc *svc, weft_msvc_msg *msg, void *arg);

/* rpc --probe --flood-cap: a member serves the flood's verb, the echo's
 * twin, with its cap. */
static int
register_flood(cnode *n)
{
	int rv;

	if (n->o->client || n->o->flood_cap < 0)
		return 0;
	rv = weft_msvc_register(n->svc, WBENCH_VERB_FLOOD, "flood", msvc_echo,
	                        n, echo_flags(n));
	if (rv == 0 && n->o->flood_cap > 0)
		rv = weft_msvc_verb_limit(n->svc, WBENCH_VERB_FLOOD,
		                          (uint32_t)n->o->flood_cap);
	return rv;
}

static uint16_t
echo_verb(const cnode *n)
{
	return n->o->hosts ? WEFTD_VERB_ECHO : WBENCH_VERB_ECHO;
}

/* next_target picks the next other node after t. */
static size_t
next_target(size_t t, void *arg)
{
	const cnode *n = arg;

	if (n->nsess > 0)
		return t; /* a session asks its own member */
	if (n->o->client && (n->o->kv || n->o->hosts))
		return (t + 1) % n->o->peers; /* spread over the members */
	if (n->o->client)
		return 0; /* a client asks its server, node 0 */
	t = (t + 1) % n->o->peers;
	return t == n->self ? (t + 1) % n->o->peers : t;
}

/* booked keeps a reply's round trip (sent_ns is when the request left
 * or, in an open loop, when it was meant to) and the progress figures. */
static void
booked(wload_slot *s, int status, uint64_t latency_ns, bool in_window,
       void *arg)
{
	cnode *n = arg;
	mix_slot *m = &n->mix[s->index];

	if (in_window && status == 0) {
		thread_lat *t = my_lat(n);

		m->puts_ok += m->put;
		m->large_ok += m->large;
		if (t != NULL)
			weft_histogram_record(m->put     ? t->lat_put
			                      : m->large ? t->lat_large
			                                 : t->lat,
			                      latency_ns);
	}
	atomic_fetch_add_explicit(&n->completed, 1, memory_order_relaxed);
	if (status == 0 && s->replies % PROGRESS_SAMPLE == 0)
		wbench_sample_record(&n->so_far, latency_ns);
}

/* reply books one answer. A put that lost to a concurrent put of the same
 * key (CONFLICT) is an answer, not a failure: clients writing the same
 * keys race. */
static void
reply(wload_slot *s, int status)
{
	wload_reply(s, status == WEFT_ECONFLICT ? 0 : status);
}

static void
msvc_reply(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	(void)svc;
	(void)data;
	(void)len;
	reply(arg, status);
}

static void
base_reply(wbase_node *b, int status, const void *data, size_t len, void *arg)
{
	(void)b;
	(void)data;
	(void)len;
	reply(arg, status);
}

/* kv_key names key i. */
static size_t
kv_key(char key[16], uint64_t i)
{
	return (size_t)snprintf(key, 16, "k%07llu", (unsigned long long)i);
}

/* slot_count is the number of slots: --outstanding per session. */
static unsigned
slot_count(const cnode *n)
{
	return n->o->outstanding * (n->nsess > 0 ? n->nsess : 1);
}

/* slot_rand is the slot's next random number. */
static uint64_t
slot_rand(mix_slot *m)
{
	m->rng ^= m->rng << 13;
	m->rng ^= m->rng >> 7;
	m->rng ^= m->rng << 17;
	return m->rng;
}

/* kv_send sends a get or a put of a random key, by the run's mix. */
static int
kv_send(cnode *n, wload_slot *s)
{
	mix_slot *m = &n->mix[s->index];
	weft_msvc *svc = n->svc;
	weft_msvc_peer *peer = n->peers[s->target];
	char key[16];
	size_t len;
	uint64_t r;

	if (n->nsess > 0) {
		const session *ss = &n->sess[s->index / n->o->outstanding];

		svc = ss->svc;
		peer = ss->peer;
	}

	r = slot_rand(m);
	len = kv_key(key, (r >> 8) % n->o->keys);
	m->put = r % 100 >= n->o->read_pct;
	if (!m->put)
		return weft_kv_client_get_at(svc, peer, key, len,
		                             n->o->consistency, NULL,
		                             msvc_reply, s);
	return weft_kv_client_put(svc, peer, key, len, n->payload, n->o->size,
	                          NULL, msvc_reply, s);
}

/* pick_large decides whether s's next echo carries --large-size bytes,
 * a --large-share of them at random. */
static bool
pick_large(cnode *n, wload_slot *s)
{
	mix_slot *m = &n->mix[s->index];

	m->large = n->o->large_share > 0 &&
	           (double)(slot_rand(m) >> 11) * 0x1p-53 < n->o->large_share;
	return m->large;
}

/* slot_send sends s's request by the run's kind. A refusal is counted by
 * the generator, which keeps going from a later reply of another slot. */
static int
slot_send(wload_slot *s, void *arg)
{
	cnode *n = arg;
	const uint8_t *payload = n->payload;
	size_t len = n->o->size;

	if (n->o->kv)
		return kv_send(n, s);
	if (pick_large(n, s)) {
		payload = n->large_payload;
		len = n->o->large_size;
	}
	if (n->svc != NULL)
		return weft_msvc_request(n->svc, n->peers[s->target],
		                         n->o->client && n->o->flood_cap >= 0
		                             ? WBENCH_VERB_FLOOD
		                             : echo_verb(n),
		                         payload, len, NULL, msvc_reply, s);
	return wbase_request(n->base, s->target, WBENCH_VERB_ECHO, payload, len,
	                     0, base_reply, s);
}

/* maybe_slow makes every slow_every-th request take slow_ms longer. */
static void
maybe_slow(cnode *n)
{
	uint64_t k;
	struct timespec ts;

	if (n->slow_every == 0)
		return;
	k = atomic_fetch_add_explicit(&n->handled, 1, memory_order_relaxed);
	if (k % n->slow_every != 0)
		return;
	ts.tv_sec = (time_t)(n->o->slow_ms / 1000);
	ts.tv_nsec = (long)((n->o->slow_ms - (double)ts.tv_sec * 1000) * 1e6);
	nanosleep(&ts, NULL);
}

static void
count_primed(cnode *n)
{
	pthread_mutex_lock(&n->primed_lock);
	atomic_fetch_add(&n->primed, 1);
	pthread_cond_broadcast(&n->primed_cond);
	pthread_mutex_unlock(&n->primed_lock);
}

static void
msvc_primed(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	cnode *n = arg;

	(void)svc;
	(void)data;
	(void)len;
	if (status == 0)
		count_primed(n);
}

static void
base_primed(wbase_node *b, int status, const void *data, size_t len, void *arg)
{
	cnode *n = arg;

	(void)b;
	(void)data;
	(void)len;
	if (status == 0)
		count_primed(n);
}

static void
loaded_cb(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	cnode *n = arg;

	(void)svc;
	if (status != 0) {
		wload_note_error(n->load, status);
		fprintf(stderr, "weft-bench: loading a key: %s: %.*s\n",
		        weft_strerror(status), (int)(len < 200 ? len : 200),
		        data != NULL ? (const char *)data : "");
	}
	atomic_fetch_add(status == 0 ? &n->loaded : &n->load_failed, 1);
}

/* preload puts every key once, 64 at a time, before the clock starts. */
static int
preload(cnode *n)
{
	uint64_t deadline = weft_now_ns() + 120000000000u;
	char key[16];

	for (unsigned i = 0; i < n->o->keys; i++) {
		size_t len = kv_key(key, i);
		weft_msvc *svc = n->svc;
		weft_msvc_peer *peer = n->peers[i % n->o->peers];

		if (n->nsess > 0) {
			svc = n->sess[i % n->nsess].svc;
			peer = n->sess[i % n->nsess].peer;
		}
		while (i - atomic_load(&n->loaded) -
		               atomic_load(&n->load_failed) >=
		           64 &&
		       weft_now_ns() < deadline)
			wload_sleep_until(weft_now_ns() + 100000u);
		if (weft_kv_client_put(svc, peer, key, len, n->payload,
		                       n->o->size, NULL, loaded_cb, n) != 0)
			return -1;
	}
	while (atomic_load(&n->loaded) + atomic_load(&n->load_failed) <
	           n->o->keys &&
	       weft_now_ns() < deadline)
		wload_sleep_until(weft_now_ns() + 1000000u);
	return atomic_load(&n->loaded) == n->o->keys ? 0 : -1;
}

/* wait_primed waits until at least want first requests were answered. */
static int
wait_primed(cnode *n, unsigned want, uint64_t deadline)
{
	uint64_t now;
	struct timespec ts;

	pthread_mutex_lock(&n->primed_lock);
	while (atomic_load(&n->primed) < want &&
	       (now = weft_now_ns()) < deadline) {
		wbench_timespec_in(CLOCK_REALTIME, deadline - now, &ts);
		pthread_cond_timedwait(&n->primed_cond, &n->primed_lock, &ts);
	}
	pthread_mutex_unlock(&n->primed_lock);
	return atomic_load(&n->primed) >= want ? 0 : -1;
}

/* prime_sessions asks every session's member once through the session,
 * PRIME_SESSIONS at a time, so that each session's connections are up
 * before the clock starts. */
static int
prime_sessions(cnode *n)
{
	wbench_primer p;

	wbench_primer_init(&p, PRIME_SESSIONS, 120000);
	for (unsigned k = 0; k < n->nsess; k++)
		if (wbench_primer_ask(&p, n->sess[k].svc, n->sess[k].peer,
		                      echo_verb(n)) != 0)
			return -1;
	return wbench_primer_wait(&p);
}

/* wait_up waits for node i to be up: a member's key-value replica dials
 * the others as it starts, to catch up, before their addresses are known,
 * and a request while that failed dial's back-off runs would fail at
 * once. */
static int
wait_up(cnode *n, size_t i, uint64_t deadline)
{
	uint64_t now;
	int rv = WEFT_ETIMEDOUT;

	while ((now = weft_now_ns()) < deadline) {
		rv = weft_msvc_peer_wait_up(n->svc, n->peers[i],
		                            (deadline - now) / 1000000);
		if (rv != WEFT_EPEERDOWN)
			break;
		wload_sleep_until(weft_now_ns() + 10000000u);
	}
	if (rv != 0)
		fprintf(stderr, "weft-bench: node %zu not up: %s\n", i,
		        weft_strerror(rv));
	return rv;
}

/* members_up waits, on a member with a key-value replica, for every
 * other member to be up, once their addresses are known: before anyone
 * writes, none of them is then known down from the dials of the catch-up
 * (a write would find its quorum impossible). */
static int
members_up(cnode *n)
{
	uint64_t deadline = weft_now_ns() + 120000000000u;

	for (size_t i = 0; n->kv != NULL && i < n->o->peers; i++)
		if (i != n->self && wait_up(n, i, deadline) != 0)
			return -1;
	return 0;
}

/* wait_caught_up waits for this member's replica to have caught up with
 * the others (weft_kv_is_caught_up): until then it refuses reads. */
static int
wait_caught_up(cnode *n, uint64_t deadline)
{
	while (n->kv != NULL && !weft_kv_is_caught_up(n->kv))
		if (weft_now_ns() >= deadline)
			return -1;
		else
			wload_sleep_until(weft_now_ns() + 1000000u);
	return 0;
}

/* prime asks every other node once and waits for the answers, so that
 * connection set-up (dials, handshakes) stays out of the measurement. A
 * few at a time: P nodes dialing everyone at once over TLS would pile up
 * P² handshakes on the CPUs, past their time limits. Each node starts
 * with the one after itself, so that the handshakes spread over every
 * node instead of all landing on the first few (whose single loops then
 * took more than the transport's 10 s TLS handshake deadline at P = 64
 * on two busy cores). */
static int
prime(cnode *n)
{
	uint64_t deadline = weft_now_ns() + 120000000000u;
	unsigned want = n->o->peers - 1, asked = 0;

	if (n->nsess > 0)
		return prime_sessions(n);

	for (unsigned k = 0; k < n->o->peers; k++) {
		size_t i =
		    n->self == SIZE_MAX ? k : (n->self + 1 + k) % n->o->peers;
		int rv;

		if (i == n->self)
			continue;
		if (asked >= PRIME_WINDOW &&
		    wait_primed(n, asked - PRIME_WINDOW + 1, deadline) != 0)
			return -1;
		asked++;
		if (n->svc != NULL)
			rv =
			    weft_msvc_request(n->svc, n->peers[i], echo_verb(n),
			                      "", 0, NULL, msvc_primed, n);
		else
			rv = wbase_request(n->base, i, WBENCH_VERB_ECHO, "", 0,
			                   0, base_primed, n);
		if (rv != 0)
			return -1;
	}
	if (wait_primed(n, want, deadline) != 0)
		return -1;
	return wait_caught_up(n, deadline);
}

static void
msvc_echo(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	(void)svc;
	maybe_slow(arg);
	weft_msvc_respond(msg, weft_msvc_msg_data(msg), weft_msvc_msg_len(msg));
}

static void
base_echo(wbase_node *b, wbase_msg *msg, void *arg)
{
	(void)b;
	maybe_slow(arg);
	wbase_respond(msg, wbase_msg_data(msg), wbase_msg_len(msg));
}

static int
make_config(cnode *n)
{
	weft_msvc_limits *lim;
	int rv;

	if ((rv = weft_msvc_config_new(n->o->cluster_name ? n->o->cluster_name
	                                                  : "weft-bench",
	                               &n->cfg)) != 0)
		return rv;
	for (unsigned i = 0; i < n->o->peers; i++) {
		char hid[64], host[256];
		uint16_t port = 0;

		snprintf(hid, sizeof(hid), "n%u", i);
		snprintf(host, sizeof(host), "127.0.0.1");
		if (n->o->hosts != NULL &&
		    wbench_host_at(n->o->hosts, i, hid, host, &port) != 0)
			return WEFT_EINVAL;
		rv = weft_msvc_config_add_node(n->cfg, hid, host, port);
		if (rv != 0)
			return rv;
	}
	lim = weft_msvc_config_limits(n->cfg);
	wbench_wire_limits(n->o, lim);
	lim->loops = 1;
	lim->connect_timeout_ms = 30000;
	/* Every client dials from 127.0.0.1, two connections (small and
	 * urgent) per mix session: the defaults (1024 clients, 64 per
	 * address, 128 handshakes at once) refuse 900 sessions. Below the
	 * file limit weft-bench raises to its hard limit (20,000 here), so
	 * the service need not lower them. */
	lim->max_clients = WBENCH_NODE_MAX_CLIENTS;
	lim->max_clients_per_address = WBENCH_NODE_MAX_CLIENTS;
	lim->max_handshakes = WBENCH_NODE_MAX_HANDSHAKES;
	if (n->o->probe) {
		/* rpc --probe: the members keep the default heartbeats and
		 * request timeout, whose misses the run counts, and take
		 * every flooding client from the one address. */
		lim->max_clients_per_address = 1024;
		return 0;
	}
	lim->request_timeout_ms = 30000;
	/* A node's own heartbeats would time out under a 128-process load
	 * on two cores and take peers down mid-run. */
	lim->heartbeat_interval_ms = 10000;
	lim->heartbeat_misses = 30;
	return 0;
}

/* tls_files names this node's certificate, key and CA under --tls. */
static void
tls_files(const cnode *n, char cert[256], char key[256], char ca[256])
{
	const char *kind = n->o->client ? "c" : "n";

	snprintf(cert, 256, "%s/%s%u.crt", n->o->tls_dir, kind,
	         n->o->node_index);
	snprintf(key, 256, "%s/%s%u.key", n->o->tls_dir, kind,
	         n->o->node_index);
	snprintf(ca, 256, "%s/ca.crt", n->o->tls_dir);
}

/* setup_tls prepares the weft service's TLS: the config's [tls] section
 * and a context. Returns 0 or -1. */
static int
setup_tls(cnode *n, weft_msvc_opts *mo)
{
	char cert[256], key[256], ca[256];
	weft_msvc_tls_config tc = {.mode = WEFT_MSVC_TLS_ALL};
	weft_tls_opts to = {0};

	tls_files(n, cert, key, ca);
	tc.cert_file = to.cert_file = cert;
	tc.key_file = to.key_file = key;
	tc.ca_file = to.ca_file = ca;
	if (weft_msvc_config_set_tls(n->cfg, &tc) != 0 ||
	    weft_tls_ctx_new(&to, &n->tls) != 0)
		return -1;
	mo->tls = n->tls;
	return 0;
}

static uint16_t
start_baseline(cnode *n, const char *id)
{
	char cert[256], key[256], ca[256];

	if (wbase_node_new(n->cfg, id, &n->base) != 0 ||
	    wbase_register(n->base, WBENCH_VERB_ECHO, base_echo, n) != 0 ||
	    (n->o->kv &&
	     wbase_kv_new(
	         n->base,
	         &(wbase_kv_opts){.replicate_timeout_ms = REPLICATE_TIMEOUT_MS},
	         &n->base_kv) != 0))
		return 0;
	tls_files(n, cert, key, ca);
	if (n->o->tls_dir != NULL &&
	    wbase_node_set_tls(n->base, cert, key, ca) != 0)
		return 0;
	if (wbase_node_start(n->base) != 0)
		return 0;
	return wbase_node_port(n->base);
}

/* start_sessions starts a client's sessions, a client service each on
 * the one loop, with ids cIsK and one worker thread (they run no
 * handler). Session K of client I is bound to member (I * S + K) mod N,
 * so that the sessions of all clients spread evenly over the members.
 * Returns 0 or -1. */
static int
start_sessions(cnode *n)
{
	const wbench_opts *o = n->o;
	char id[32];

	weft_msvc_config_limits(n->cfg)->worker_threads = 1;
	if ((n->sess = calloc(n->nsess, sizeof(*n->sess))) == NULL ||
	    weft_loop_group_new(1, &n->group) != 0)
		return -1;
	for (unsigned k = 0; k < n->nsess; k++) {
		session *ss = &n->sess[k];

		snprintf(id, sizeof(id), "c%us%u", o->node_index, k);
		ss->member = ((size_t)o->node_index * n->nsess + k) % o->peers;
		if (weft_msvc_new(n->group, n->cfg, id, &(weft_msvc_opts){0},
		                  &ss->svc) != 0 ||
		    weft_msvc_start(ss->svc) != 0)
			return -1;
	}
	n->svc = n->sess[0].svc;
	return 0;
}

/* start_service starts the node's service; returns its port or 0. */
static uint16_t
start_service(cnode *n)
{
	weft_msvc_opts mo = {0};
	char id[16];

	if (n->nsess > 0)
		return start_sessions(n) == 0 ? 1 : 0;

	snprintf(id, sizeof(id), "%s%u", n->o->client ? "c" : "n",
	         n->o->node_index);
	/* Clients are always weft's service: only the server's I/O model
	 * changes between rpc runs. */
	if (n->o->io == WBENCH_IO_THREADS && !n->o->client)
		return start_baseline(n, id);
	if (n->o->tls_dir != NULL && setup_tls(n, &mo) != 0)
		return 0;
	if (weft_loop_group_new(1, &n->group) != 0 ||
	    weft_msvc_new(n->group, n->cfg, id, &mo, &n->svc) != 0 ||
	    (n->o->kv && !n->o->client &&
	     weft_kv_new(
	         n->svc,
	         &(weft_kv_opts){.replicate_timeout_ms = REPLICATE_TIMEOUT_MS},
	         &n->kv) != 0) ||
	    weft_msvc_register(n->svc, WBENCH_VERB_ECHO, "echo", msvc_echo, n,
	                       echo_flags(n)) != 0 ||
	    register_flood(n) != 0 || weft_msvc_start(n->svc) != 0)
		return 0;
	return n->o->client ? 1 : weft_msvc_port(n->svc);
}

/* set_session_ports points every session at its member: port, from
 * the "ports" line, or the member's --hosts entry. */
static int
set_session_ports(cnode *n, const uint16_t *ports)
{
	char id[64], host[256];
	uint16_t hport;

	for (unsigned k = 0; k < n->nsess; k++) {
		session *ss = &n->sess[k];

		snprintf(id, sizeof(id), "n%zu", ss->member);
		if (n->o->hosts != NULL) {
			if (wbench_host_at(n->o->hosts, (unsigned)ss->member,
			                   id, host, &hport) != 0)
				return -1;
		} else
			weft_msvc_set_peer_addr(ss->svc, id, "127.0.0.1",
			                        ports[ss->member]);
		if ((ss->peer = weft_msvc_peer_find(ss->svc, id)) == NULL)
			return -1;
	}
	return 0;
}

/* set_ports reads "ports P0 P1 ..." and points the service at every
 * node. */
static int
set_ports(cnode *n, char *line)
{
	char *p = line + 5, *end, id[16];
	uint16_t *ports;
	int rv;

	if (strncmp(line, "ports", 5) != 0)
		return -1;
	if (n->nsess > 0) {
		if ((ports = calloc(n->o->peers, sizeof(*ports))) == NULL)
			return -1;
		for (unsigned i = 0; n->o->hosts == NULL && i < n->o->peers;
		     i++) {
			unsigned long port = strtoul(p, &end, 10);

			if (end == p || port == 0 || port > 65535) {
				free(ports);
				return -1;
			}
			p = end;
			ports[i] = (uint16_t)port;
		}
		rv = set_session_ports(n, ports);
		free(ports);
		return rv;
	}
	for (unsigned i = 0; n->o->hosts != NULL && i < n->o->peers; i++) {
		char hid[64], host[256];
		uint16_t hport;

		if (wbench_host_at(n->o->hosts, i, hid, host, &hport) != 0 ||
		    (n->peers[i] = weft_msvc_peer_find(n->svc, hid)) == NULL)
			return -1;
	}
	for (unsigned i = 0; n->o->hosts == NULL && i < n->o->peers; i++) {
		unsigned long port = strtoul(p, &end, 10);

		if (end == p || port == 0 || port > 65535)
			return -1;
		p = end;
		snprintf(id, sizeof(id), "n%u", i);
		if (n->base != NULL)
			wbase_set_peer_addr(n->base, id, "127.0.0.1",
			                    (uint16_t)port);
		else {
			weft_msvc_set_peer_addr(n->svc, id, "127.0.0.1",
			                        (uint16_t)port);
			n->peers[i] = weft_msvc_peer_find(n->svc, id);
		}
	}
	return 0;
}

/* print_tick tells the coordinator the completions and p99 so far. */
static void
print_tick(void *arg)
{
	cnode *n = arg;

	printf("tick %llu %llu\n",
	       (unsigned long long)atomic_load(&n->completed),
	       (unsigned long long)wbench_sample_percentile(&n->so_far, 99));
	fflush(stdout);
}

/* print_large prints the large requests' round trips ("hist-large",
 * before "hist", which has the others) and returns their count. */
static uint64_t
print_large(cnode *n)
{
	weft_histogram *large_lat;
	uint64_t nlarge = 0;

	for (unsigned i = 0; i < slot_count(n); i++)
		nlarge += n->mix[i].large_ok;
	if (n->o->large_share <= 0 || wbench_hist_new(&large_lat) != 0)
		return nlarge;
	pthread_mutex_lock(&n->lat_lock);
	for (thread_lat *t = n->lats; t != NULL; t = t->next)
		weft_histogram_merge(large_lat, t->lat_large);
	pthread_mutex_unlock(&n->lat_lock);
	wbench_hist_print(large_lat, "hist-large", stdout);
	weft_histogram_free(large_lat);
	return nlarge;
}

/* print_verbs prints a mix client's gets and puts apart: their count
 * and their round trips, before the merged histogram. */
static uint64_t
print_verbs(cnode *n, weft_histogram *lat)
{
	weft_histogram *put_lat;
	uint64_t nputs = 0;

	for (unsigned i = 0; i < slot_count(n); i++)
		nputs += n->mix[i].puts_ok;
	if (!n->o->kv || wbench_hist_new(&put_lat) != 0)
		return nputs;
	pthread_mutex_lock(&n->lat_lock);
	for (thread_lat *t = n->lats; t != NULL; t = t->next)
		weft_histogram_merge(put_lat, t->lat_put);
	pthread_mutex_unlock(&n->lat_lock);
	if (lat != NULL && n->o->client) {
		wbench_hist_print(lat, "hist-get", stdout);
		wbench_hist_print(put_lat, "hist-put", stdout);
	}
	if (lat != NULL)
		weft_histogram_merge(lat, put_lat);
	weft_histogram_free(put_lat);
	return nputs;
}

/* reads_coordinated is a member's quorum and all gets, either I/O
 * model's; 0 for a client. */
static uint64_t
reads_coordinated(const cnode *n)
{
	weft_kv_stats ks;
	wbase_kv_stats bs;

	if (n->kv != NULL) {
		weft_kv_get_stats(n->kv, &ks);
		return ks.reads_coordinated;
	}
	if (n->base_kv != NULL) {
		wbase_kv_get_stats(n->base_kv, &bs);
		return bs.reads_coordinated;
	}
	return 0;
}

static void
report(cnode *n, const wload_usage *before, const wload_usage *after)
{
	uint64_t wakeups = 0, msgs_in = 0, nputs, nlarge, body = 0, wire = 0;
	weft_histogram *lat = NULL;
	wload_totals t;

	if (wbench_hist_new(&lat) != 0)
		lat = NULL; /* then an empty "hist" */

	wload_get_totals(n->load, &t);
	pthread_mutex_lock(&n->lat_lock);
	for (thread_lat *l = n->lats; l != NULL && lat != NULL; l = l->next)
		weft_histogram_merge(lat, l->lat);
	pthread_mutex_unlock(&n->lat_lock);
	nputs = print_verbs(n, lat);
	nlarge = print_large(n);
	for (unsigned k = 0; k < n->nsess; k++) {
		weft_msvc_stats st;

		weft_msvc_get_stats(n->sess[k].svc, &st);
		wakeups += st.read_batches;
		msgs_in += st.messages_in;
	}
	if (n->svc != NULL && n->nsess == 0) {
		weft_msvc_stats st;

		weft_msvc_get_stats(n->svc, &st);
		wakeups = st.read_batches;
		msgs_in = st.messages_in;
		wbench_wire_bytes(n->svc, &body, &wire);
	} else if (n->svc == NULL) {
		wbase_stats st;

		wbase_node_get_stats(n->base, &st);
		msgs_in = st.frames_in;
	}
	printf("result ops=%llu errors=%llu vcsw=%llu ivcsw=%llu cpu_us=%llu "
	       "rss_kb=%llu threads=%llu wakeups=%llu msgs_in=%llu "
	       "first_error=%d sent=%llu replies=%llu duplicates=%llu "
	       "gets=%llu puts=%llu large=%llu body=%llu wire=%llu "
	       "coordinated=%llu up_cpu_us=%llu up_hs=%llu up_resumed=%llu\n",
	       (unsigned long long)t.ok, (unsigned long long)t.errors,
	       (unsigned long long)(after->vcsw - before->vcsw),
	       (unsigned long long)(after->ivcsw - before->ivcsw),
	       (unsigned long long)(after->cpu_us - before->cpu_us),
	       (unsigned long long)after->rss_kb,
	       (unsigned long long)after->threads, (unsigned long long)wakeups,
	       (unsigned long long)msgs_in, wload_first_error(n->load),
	       (unsigned long long)t.sent, (unsigned long long)t.replies,
	       (unsigned long long)t.duplicates,
	       (unsigned long long)(t.ok - nputs), (unsigned long long)nputs,
	       (unsigned long long)nlarge, (unsigned long long)body,
	       (unsigned long long)wire,
	       (unsigned long long)reads_coordinated(n),
	       (unsigned long long)n->up_cpu_us,
	       (unsigned long long)n->up_handshakes,
	       (unsigned long long)n->up_resumed);
	wbench_hist_print(lat, "hist", stdout);
	fflush(stdout);
	weft_histogram_free(lat);
}

/* primed runs prime and notes what the start-up cost this node. */
static int
primed(cnode *n)
{
	wbench_rusage before, after;
	weft_tls_stats st;
	int rv;

	wbench_rusage_read(&before);
	rv = prime(n);
	wbench_rusage_read(&after);
	n->up_cpu_us =
	    after.user_us + after.sys_us - before.user_us - before.sys_us;
	if (n->tls != NULL) {
		weft_tls_ctx_get_stats(n->tls, &st);
		n->up_handshakes = st.handshakes_completed;
		n->up_resumed = st.handshakes_resumed;
	}
	return rv;
}

/* start_load makes the slots: they start spread over the other nodes,
 * and a mix slot's generator is seeded by the node and the slot. */
static int
start_load(cnode *n)
{
	static const wload_ops ops = {.send = slot_send,
	                              .next_target = next_target,
	                              .booked = booked,
	                              .tick = print_tick};
	const wbench_opts *o = n->o;
	wload_opts lo = {.outstanding = slot_count(n),
	                 .rate = o->rate,
	                 .warmup_ns = (uint64_t)(o->warmup_s * 1e9),
	                 .duration_ns = (uint64_t)(o->duration_s * 1e9),
	                 .idle_wait_ns = 30000000000u,
	                 .count_warmup_refusals = true};

	if ((n->mix = calloc(slot_count(n) + 1, sizeof(*n->mix))) == NULL ||
	    wload_new(&lo, &ops, n, &n->load) != 0)
		return -1;
	for (unsigned i = 0; i < slot_count(n); i++) {
		wload_slot_at(n->load, i)->target =
		    (o->node_index + i) % o->peers;
		n->mix[i].rng = (o->seed + 1) * 0x9e3779b97f4a7c15ull ^
		                ((uint64_t)o->node_index << 32) ^ (i + 1);
	}
	return 0;
}

static int
node_init(cnode *n, const wbench_opts *o)
{
	memset(n, 0, sizeof(*n));
	n->o = o;
	n->self = o->client ? SIZE_MAX : o->node_index;
	n->nsess = o->client && o->kv ? o->sessions : 0;
	n->payload = calloc(1, o->size ? o->size : 1);
	if (o->large_share > 0 &&
	    (n->large_payload = malloc(o->large_size)) == NULL)
		return -1;
	n->peers = calloc(o->peers, sizeof(*n->peers));
	pthread_mutex_init(&n->lat_lock, NULL);
	pthread_mutex_init(&n->primed_lock, NULL);
	pthread_cond_init(&n->primed_cond, NULL);
	if (n->payload == NULL || n->peers == NULL || start_load(n) != 0 ||
	    wbench_sample_init(&n->so_far) != 0 ||
	    pthread_key_create(&n->lat_key, NULL) != 0)
		return -1;
	n->lat_key_made = true;
	if (o->slow_fraction > 0)
		n->slow_every = (uint64_t)(1 / o->slow_fraction + 0.5);
	wbench_payload_fill(n->payload, o->size, o->payload, o->seed);
	if (n->large_payload != NULL)
		wbench_payload_fill(n->large_payload, o->large_size, o->payload,
		                    o->seed);
	return make_config(n);
}

static void
node_fini(cnode *n)
{
	if (n->sess != NULL) {
		for (unsigned k = 0; k < n->nsess; k++)
			if (n->sess[k].svc != NULL)
				weft_msvc_stop(n->sess[k].svc, 1000);
		if (n->group != NULL)
			weft_loop_group_shutdown(n->group, 1000);
		for (unsigned k = 0; k < n->nsess; k++)
			weft_msvc_free(n->sess[k].svc);
		free(n->sess);
		n->svc = NULL;
	}
	if (n->svc != NULL) {
		weft_msvc_stop(n->svc, 1000);
		/* Its connections are freed with their loops stopped. */
		weft_loop_group_shutdown(n->group, 1000);
		weft_kv_free(n->kv);
		weft_msvc_free(n->svc);
	}
	if (n->group != NULL)
		weft_loop_group_free(n->group);
	if (n->tls != NULL)
		weft_tls_ctx_unref(n->tls);
	if (n->base != NULL)
		wbase_node_stop(n->base); /* every write has ended then */
	wbase_kv_free(n->base_kv);
	wbase_node_free(n->base);
	weft_msvc_config_free(n->cfg);
	free(n->peers);
	while (n->lats != NULL) {
		thread_lat *t = n->lats;

		n->lats = t->next;
		weft_histogram_free(t->lat);
		weft_histogram_free(t->lat_put);
		weft_histogram_free(t->lat_large);
		free(t);
	}
	if (n->lat_key_made)
		pthread_key_delete(n->lat_key);
	pthread_mutex_destroy(&n->lat_lock);
	pthread_mutex_destroy(&n->primed_lock);
	pthread_cond_destroy(&n->primed_cond);
	wload_free(n->load);
	free(n->mix);
	wbench_sample_fini(&n->so_far);
	free(n->payload);
	free(n->large_payload);
}

int
wbench_cluster_node(const wbench_opts *o)
{
	wload_usage before = {0}, after = {0};
	char line[65536];
	uint16_t port;
	cnode n = {0};
	int rv = -1;

	/* One line per node is plenty: warnings and errors only. */
	if (!WEFT_LOG_ENABLED(WEFT_LOG_DEBUG))
		weft_log_set_level(WEFT_LOG_WARN);
	if ((!o->client && o->node_index >= o->peers) || node_init(&n, o) != 0)
		goto out;
	/* rpc --probe --flood-idle: a flooding client runs only when the
	 * server and the probe leave a core idle. */
	if (o->flood_idle &&
	    sched_setscheduler(0, SCHED_IDLE, &(struct sched_param){0}) != 0)
		perror("weft-bench: sched_setscheduler(SCHED_IDLE)");
	if ((port = start_service(&n)) == 0) {
		fprintf(stderr, "weft-bench: node %u: cannot start\n",
		        o->node_index);
		goto out;
	}
	printf("port %u\n", port);
	fflush(stdout);
	if (fgets(line, sizeof(line), stdin) == NULL ||
	    set_ports(&n, line) != 0)
		goto out;
	if (members_up(&n) != 0)
		goto out;
	printf("addressed\n");
	fflush(stdout);
	if (fgets(line, sizeof(line), stdin) == NULL ||
	    strncmp(line, "prime", 5) != 0)
		goto out;
	if (primed(&n) != 0) {
		fprintf(stderr, "weft-bench: node %u: could not reach all\n",
		        o->node_index);
		goto out;
	}
	if (o->kv && o->client && o->node_index == 0 && preload(&n) != 0) {
		fprintf(stderr, "weft-bench: could not load the keys\n");
		goto out;
	}
	printf("ready\n");
	fflush(stdout);
	if (fgets(line, sizeof(line), stdin) == NULL ||
	    strncmp(line, "go", 2) != 0)
		goto out;
	wload_run(n.load, &before, &after);
	printf("done\n");
	fflush(stdout);
	/* Keep answering the others until everyone is done. */
	if (fgets(line, sizeof(line), stdin) == NULL ||
	    strncmp(line, "exit", 4) != 0)
		goto out;
	/* Once everyone has reported, the others go away: no news then. */
	weft_log_set_level(WEFT_LOG_ERROR);
	report(&n, &before, &after);
	if (fgets(line, sizeof(line), stdin) != NULL &&
	    strncmp(line, "quit", 4) != 0)
		goto out;
	rv = 0;
out:
	node_fini(&n);
	return rv;
}
