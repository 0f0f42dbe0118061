/* SPDX-License-Identifier: MIT */
/*
 * cnode.c: one node process of the cluster workload.
 *
 * The node runs weft's messaging service on one loop (--io=loop) or the
 * thread-per-peer baseline (--io=threads), answers the echo verb (and in
 * mix, serves the key-value verbs: weft_kv or the baseline's), and keeps
 * K requests in flight, each slot sending its next request to the next
 * other node in turn. It talks to the coordinator over stdin/stdout:
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
#include <sys/resource.h>
#include <time.h>

#include <weft/histogram.h>
#include <weft/kv.h>
#include <weft/loop.h>
#include <weft/messaging.h>
#include <weft/tls.h>

#include "baseline.h"
#include "wbench.h"
#include "weftd_proto.h"

#define PRIME_WINDOW 4     /* first requests in flight per node */
#define PROGRESS_SAMPLE 16 /* replies per slot for one progress sample */
/* mix: a replica's time to acknowledge a write, both key-value services.
 * Their default, 2 s, is too short for a shared two-core machine running
 * a dozen node processes: a stalled replica would fail writes (and the
 * key load) where it is only slow. */
#define REPLICATE_TIMEOUT_MS 10000

typedef struct cnode cnode;

/* One request kept in flight. Its fields are touched only by the thread
 * that runs its reply, and each reply follows the request it answers. */
typedef struct slot {
	cnode *node;
	unsigned index;
	size_t target;    /* peer index of the request in flight */
	uint64_t rng;     /* mix: picks the operation and the key */
	uint64_t sent_ns; /* when it left */
	uint64_t ok, errors;
	uint64_t sent, replies,
	    duplicates; /* all the time, not just the window */
	bool in_flight;
	bool put;         /* mix: the request in flight is a put */
	uint64_t puts_ok; /* mix: of ok, the puts */
} slot;

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
	wbase_node *base;
	wbase_kv *base_kv; /* mix, --io threads: this member's replica */
	size_t self;
	uint8_t *payload;
	slot *slots;
	uint64_t window_start_ns, window_end_ns;
	atomic_uint_fast64_t completed; /* replies, any time */
	/* A sample of the round trips so far (one reply in PROGRESS_SAMPLE
	 * of each slot), for the progress lines: counted by the threads
	 * that run replies (the baseline's many readers too, so kept off
	 * most replies: it takes a lock), read by the main thread each
	 * second. */
	wbench_sample so_far;
	atomic_uint active; /* slots with a request in flight */
	/* Open loop (--rate): idle slots, taken by the pacer. */
	pthread_mutex_t free_lock;
	unsigned *free_ids, nfree;
	atomic_uint_fast64_t handled; /* requests answered, for --slow */
	uint64_t slow_every;          /* every Nth is slow; 0: none */
	/* Answers to the first requests; the main thread sleeps on
	 * primed_cond for them (polling here, in P processes at once, took
	 * CPU from the handshakes it waited for). */
	atomic_uint primed;
	pthread_mutex_t primed_lock;
	pthread_cond_t primed_cond;
	atomic_uint loaded, load_failed; /* mix: keys put before the run */
	atomic_int first_error;
	pthread_key_t lat_key; /* this thread's thread_lat */
	pthread_mutex_t lat_lock;
	thread_lat *lats; /* every thread's, under lat_lock */
	bool lat_key_made;
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
	    (n->o->kv && wbench_hist_new(&t->lat_put) != 0)) {
		weft_histogram_free(t->lat);
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

static uint64_t
now_ns(void)
{
	return weft_now_ns();
}

static uint16_t
echo_verb(const cnode *n)
{
	return n->o->hosts ? WEFTD_VERB_ECHO : WBENCH_VERB_ECHO;
}

/* next_target picks the next other node after t. */
static size_t
next_target(const cnode *n, size_t t)
{
	if (n->o->client && (n->o->kv || n->o->hosts))
		return (t + 1) % n->o->peers; /* spread over the members */
	if (n->o->client)
		return 0; /* a client asks its server, node 0 */
	t = (t + 1) % n->o->peers;
	return t == n->self ? (t + 1) % n->o->peers : t;
}

static void slot_send(slot *s);
static void sleep_until(uint64_t t_ns);

/* slot_free gives an open-loop slot back to the pacer. */
static void
slot_free(slot *s)
{
	cnode *n = s->node;

	pthread_mutex_lock(&n->free_lock);
	n->free_ids[n->nfree++] = s->index;
	pthread_mutex_unlock(&n->free_lock);
	atomic_fetch_sub_explicit(&n->active, 1, memory_order_release);
}

static slot *
slot_take(cnode *n)
{
	slot *s = NULL;

	pthread_mutex_lock(&n->free_lock);
	if (n->nfree > 0)
		s = &n->slots[n->free_ids[--n->nfree]];
	pthread_mutex_unlock(&n->free_lock);
	return s;
}

/* slot_done books one reply and sends the next request, until the window
 * closes. */
static void
slot_done(slot *s, int status)
{
	cnode *n = s->node;
	uint64_t now = now_ns();

	/* Every request is answered exactly once: a second reply to a slot
	 * would find nothing in flight. */
	if (!s->in_flight) {
		s->duplicates++;
		return;
	}
	s->in_flight = false;
	s->replies++;
	/* A put that lost to a concurrent put of the same key (CONFLICT) is
	 * an answer, not a failure: clients writing the same keys race. */
	if (status == WEFT_ECONFLICT)
		status = 0;
	/* sent_ns is when the request left or, in an open loop, when it was
	 * meant to: a stall then shows in the latency instead of hiding. */
	if (now >= n->window_start_ns && now < n->window_end_ns) {
		if (status == 0) {
			s->ok++;
			s->puts_ok += s->put;
			thread_lat *t = my_lat(n);

			if (t != NULL)
				weft_histogram_record(s->put ? t->lat_put
				                             : t->lat,
				                      now - s->sent_ns);
		} else {
			s->errors++;
		}
	}
	if (status != 0) {
		int zero = 0;

		atomic_compare_exchange_strong(&n->first_error, &zero, status);
	}
	atomic_fetch_add_explicit(&n->completed, 1, memory_order_relaxed);
	if (status == 0 && s->replies % PROGRESS_SAMPLE == 0)
		wbench_sample_record(&n->so_far, now - s->sent_ns);
	if (n->o->rate > 0)
		slot_free(s);
	else if (now < n->window_end_ns)
		slot_send(s);
	else
		atomic_fetch_sub_explicit(&n->active, 1, memory_order_release);
}

static void
msvc_reply(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	(void)svc;
	(void)data;
	(void)len;
	slot_done(arg, status);
}

static void
base_reply(wbase_node *b, int status, const void *data, size_t len, void *arg)
{
	(void)b;
	(void)data;
	(void)len;
	slot_done(arg, status);
}

/* kv_key names key i. */
static size_t
kv_key(char key[16], uint64_t i)
{
	return (size_t)snprintf(key, 16, "k%07llu", (unsigned long long)i);
}

/* kv_send sends a get or a put of a random key, by the run's mix. */
static int
kv_send(cnode *n, slot *s)
{
	char key[16];
	size_t len;
	uint64_t r;

	s->rng ^= s->rng << 13;
	s->rng ^= s->rng >> 7;
	s->rng ^= s->rng << 17;
	r = s->rng;
	len = kv_key(key, (r >> 8) % n->o->keys);
	s->put = r % 100 >= n->o->read_pct;
	if (!s->put)
		return weft_kv_client_get(n->svc, n->peers[s->target], key, len,
		                          NULL, msvc_reply, s);
	return weft_kv_client_put(n->svc, n->peers[s->target], key, len,
	                          n->payload, n->o->size, NULL, msvc_reply, s);
}

static void
slot_send(slot *s)
{
	cnode *n = s->node;
	int rv;

	s->target = next_target(n, s->target);
	if (n->o->rate <= 0)
		s->sent_ns = now_ns();
	s->in_flight = true;
	s->sent++;
	if (n->o->kv)
		rv = kv_send(n, s);
	else if (n->svc != NULL)
		rv = weft_msvc_request(n->svc, n->peers[s->target],
		                       echo_verb(n), n->payload, n->o->size,
		                       NULL, msvc_reply, s);
	else
		rv = wbase_request(n->base, s->target, WBENCH_VERB_ECHO,
		                   n->payload, n->o->size, 0, base_reply, s);
	if (rv != 0) {
		/* Refused at once (overload): count it, then keep going
		 * from a later reply of another slot. */
		int zero = 0;

		s->errors++;
		s->sent--;
		s->in_flight = false;
		atomic_compare_exchange_strong(&n->first_error, &zero, rv);
		if (n->o->rate > 0)
			slot_free(s);
		else
			atomic_fetch_sub_explicit(&n->active, 1,
			                          memory_order_release);
	}
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
		int zero = 0;

		atomic_compare_exchange_strong(&n->first_error, &zero, status);
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

		while (i - atomic_load(&n->loaded) -
		               atomic_load(&n->load_failed) >=
		           64 &&
		       weft_now_ns() < deadline)
			sleep_until(weft_now_ns() + 100000u);
		if (weft_kv_client_put(n->svc, n->peers[i % n->o->peers], key,
		                       len, n->payload, n->o->size, NULL,
		                       loaded_cb, n) != 0)
			return -1;
	}
	while (atomic_load(&n->loaded) + atomic_load(&n->load_failed) <
	           n->o->keys &&
	       weft_now_ns() < deadline)
		sleep_until(weft_now_ns() + 1000000u);
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
	return wait_primed(n, want, deadline);
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
	lim->loops = 1;
	lim->connect_timeout_ms = 30000;
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

/* start_service starts the node's service; returns its port or 0. */
static uint16_t
start_service(cnode *n)
{
	weft_msvc_opts mo = {0};
	char id[16];

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
	                       WEFT_MSVC_CLIENTS |
	                           (n->slow_every || n->o->handlers_pool
	                                ? WEFT_MSVC_BLOCKING
	                                : WEFT_MSVC_INLINE)) != 0 ||
	    weft_msvc_start(n->svc) != 0)
		return 0;
	return n->o->client ? 1 : weft_msvc_port(n->svc);
}

/* set_ports reads "ports P0 P1 ..." and points the service at every
 * node. */
static int
set_ports(cnode *n, char *line)
{
	char *p = line + 5, *end, id[16];

	if (strncmp(line, "ports", 5) != 0)
		return -1;
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

static void
sleep_until(uint64_t t_ns)
{
	uint64_t now = now_ns();
	struct timespec ts;

	if (now >= t_ns)
		return;
	ts.tv_sec = (time_t)((t_ns - now) / 1000000000u);
	ts.tv_nsec = (long)((t_ns - now) % 1000000000u);
	nanosleep(&ts, NULL);
}

/* Process figures: rusage and /proc/self/status. */
typedef struct usage {
	uint64_t vcsw, ivcsw, cpu_us;
	uint64_t rss_kb, threads;
} usage;

static void
read_usage(usage *u)
{
	struct rusage ru;
	char line[256];
	FILE *f;

	getrusage(RUSAGE_SELF, &ru);
	u->vcsw = (uint64_t)ru.ru_nvcsw;
	u->ivcsw = (uint64_t)ru.ru_nivcsw;
	u->cpu_us =
	    (uint64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000u +
	    (uint64_t)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
	u->rss_kb = (uint64_t)ru.ru_maxrss;
	u->threads = 0;
	if ((f = fopen("/proc/self/status", "r")) == NULL)
		return;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "Threads:", 8) == 0)
			u->threads = strtoull(line + 8, NULL, 10);
	fclose(f);
}

/* run_window starts the slots, ticks each second, reads the process
 * figures when the window opens and closes, and waits for the slots to
 * go idle. */
static void
wait_idle(cnode *n)
{
	uint64_t deadline = now_ns() + 30000000000u;

	while (atomic_load_explicit(&n->active, memory_order_acquire) > 0 &&
	       now_ns() < deadline)
		sleep_until(now_ns() + 1000000u);
}

/* print_tick tells the coordinator the completions and p99 so far. */
static void
print_tick(cnode *n)
{
	printf("tick %llu %llu\n",
	       (unsigned long long)atomic_load(&n->completed),
	       (unsigned long long)wbench_sample_percentile(&n->so_far, 99));
	fflush(stdout);
}

/* pace runs an open loop: request k is due at t0 + k / rate and carries
 * that time, even when no slot is free to send it yet. */
static void
pace(cnode *n, uint64_t t0, usage *before)
{
	double gap_ns = 1e9 / n->o->rate;
	uint64_t k = 0, tick = t0 + 1000000000u, now;
	bool opened = false;
	slot *s;

	while ((now = now_ns()) < n->window_end_ns) {
		while ((uint64_t)((double)k * gap_ns) <= now - t0 &&
		       (s = slot_take(n)) != NULL) {
			s->sent_ns = t0 + (uint64_t)((double)k * gap_ns);
			atomic_fetch_add(&n->active, 1);
			slot_send(s);
			k++;
		}
		if (!opened && now >= n->window_start_ns) {
			read_usage(before);
			opened = true;
		}
		if (now >= tick) {
			print_tick(n);
			tick += 1000000000u;
		}
		sleep_until(now + 100000u);
	}
	if (!opened)
		read_usage(before);
}

static void
run_window(cnode *n, usage *before, usage *after)
{
	uint64_t t0 = now_ns(), tick = t0 + 1000000000u;
	bool opened = false;

	n->window_start_ns = t0 + (uint64_t)(n->o->warmup_s * 1e9);
	n->window_end_ns =
	    n->window_start_ns + (uint64_t)(n->o->duration_s * 1e9);
	if (n->o->rate > 0) {
		pace(n, t0, before);
		read_usage(after);
		wait_idle(n);
		return;
	}
	atomic_store(&n->active, n->o->outstanding);
	for (unsigned i = 0; i < n->o->outstanding; i++)
		slot_send(&n->slots[i]);
	while (tick < n->window_end_ns || !opened) {
		if (!opened && n->window_start_ns <= tick) {
			sleep_until(n->window_start_ns);
			read_usage(before);
			opened = true;
			continue;
		}
		sleep_until(tick);
		print_tick(n);
		tick += 1000000000u;
	}
	sleep_until(n->window_end_ns);
	read_usage(after);
	wait_idle(n);
}

/* print_verbs prints a mix client's gets and puts apart: their count
 * and their round trips, before the merged histogram. */
static uint64_t
print_verbs(cnode *n, weft_histogram *lat)
{
	weft_histogram *put_lat;
	uint64_t nputs = 0;

	for (unsigned i = 0; i < n->o->outstanding; i++)
		nputs += n->slots[i].puts_ok;
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

static void
report(cnode *n, const usage *before, const usage *after)
{
	uint64_t ok = 0, errors = 0, wakeups = 0, msgs_in = 0, nputs;
	uint64_t sent = 0, replies = 0, dups = 0;
	weft_histogram *lat = NULL;

	if (wbench_hist_new(&lat) != 0)
		lat = NULL; /* then an empty "hist" */

	for (unsigned i = 0; i < n->o->outstanding; i++) {
		ok += n->slots[i].ok;
		errors += n->slots[i].errors;
		sent += n->slots[i].sent;
		replies += n->slots[i].replies;
		dups += n->slots[i].duplicates;
	}
	pthread_mutex_lock(&n->lat_lock);
	for (thread_lat *t = n->lats; t != NULL && lat != NULL; t = t->next)
		weft_histogram_merge(lat, t->lat);
	pthread_mutex_unlock(&n->lat_lock);
	nputs = print_verbs(n, lat);
	if (n->svc != NULL) {
		weft_msvc_stats st;

		weft_msvc_get_stats(n->svc, &st);
		wakeups = st.read_batches;
		msgs_in = st.messages_in;
	} else {
		wbase_stats st;

		wbase_node_get_stats(n->base, &st);
		msgs_in = st.frames_in;
	}
	printf("result ops=%llu errors=%llu vcsw=%llu ivcsw=%llu cpu_us=%llu "
	       "rss_kb=%llu threads=%llu wakeups=%llu msgs_in=%llu "
	       "first_error=%d sent=%llu replies=%llu duplicates=%llu "
	       "gets=%llu puts=%llu\n",
	       (unsigned long long)ok, (unsigned long long)errors,
	       (unsigned long long)(after->vcsw - before->vcsw),
	       (unsigned long long)(after->ivcsw - before->ivcsw),
	       (unsigned long long)(after->cpu_us - before->cpu_us),
	       (unsigned long long)after->rss_kb,
	       (unsigned long long)after->threads, (unsigned long long)wakeups,
	       (unsigned long long)msgs_in, atomic_load(&n->first_error),
	       (unsigned long long)sent, (unsigned long long)replies,
	       (unsigned long long)dups, (unsigned long long)(ok - nputs),
	       (unsigned long long)nputs);
	wbench_hist_print(lat, "hist", stdout);
	fflush(stdout);
	weft_histogram_free(lat);
}

static int
node_init(cnode *n, const wbench_opts *o)
{
	memset(n, 0, sizeof(*n));
	n->o = o;
	n->self = o->client ? SIZE_MAX : o->node_index;
	n->payload = calloc(1, o->size ? o->size : 1);
	n->slots = calloc(o->outstanding + 1, sizeof(*n->slots));
	n->peers = calloc(o->peers, sizeof(*n->peers));
	n->free_ids = calloc(o->outstanding + 1, sizeof(*n->free_ids));
	pthread_mutex_init(&n->free_lock, NULL);
	pthread_mutex_init(&n->lat_lock, NULL);
	pthread_mutex_init(&n->primed_lock, NULL);
	pthread_cond_init(&n->primed_cond, NULL);
	if (n->payload == NULL || n->slots == NULL || n->peers == NULL ||
	    n->free_ids == NULL || wbench_sample_init(&n->so_far) != 0 ||
	    pthread_key_create(&n->lat_key, NULL) != 0)
		return -1;
	n->lat_key_made = true;
	if (o->slow_fraction > 0)
		n->slow_every = (uint64_t)(1 / o->slow_fraction + 0.5);
	for (unsigned i = 0; i < o->outstanding; i++)
		n->free_ids[n->nfree++] = o->outstanding - 1 - i;
	wbench_pattern_fill(n->payload, o->size, o->seed);
	for (unsigned i = 0; i < o->outstanding; i++) {
		n->slots[i].node = n;
		n->slots[i].index = i;
		/* Slots start spread over the other nodes. */
		n->slots[i].target = (o->node_index + i) % o->peers;
		n->slots[i].rng = (o->seed + 1) * 0x9e3779b97f4a7c15ull ^
		                  ((uint64_t)o->node_index << 32) ^ (i + 1);
	}
	return make_config(n);
}

static void
node_fini(cnode *n)
{
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
		free(t);
	}
	if (n->lat_key_made)
		pthread_key_delete(n->lat_key);
	pthread_mutex_destroy(&n->lat_lock);
	pthread_mutex_destroy(&n->primed_lock);
	pthread_cond_destroy(&n->primed_cond);
	free(n->slots);
	wbench_sample_fini(&n->so_far);
	free(n->payload);
	if (n->free_ids != NULL)
		pthread_mutex_destroy(&n->free_lock);
	free(n->free_ids);
}

int
wbench_cluster_node(const wbench_opts *o)
{
	usage before = {0}, after = {0};
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
	printf("addressed\n");
	fflush(stdout);
	if (fgets(line, sizeof(line), stdin) == NULL ||
	    strncmp(line, "prime", 5) != 0)
		goto out;
	if (prime(&n) != 0) {
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
	run_window(&n, &before, &after);
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
