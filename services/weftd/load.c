/* SPDX-License-Identifier: MIT */
/*
 * load.c: the load verb (docs/WEFTD.md), with which `weft-bench cluster
 * --hosts` runs the cluster workload on weftd nodes started elsewhere.
 *
 * A "start" request makes this node keep K echo requests in flight,
 * each slot asking the next other member in turn (closed loop), or send
 * them at a fixed rate timed from each request's intended send time (open
 * loop), through a warm-up and a measured window; the answer carries the
 * node's figures and latency histogram once every slot is idle. A
 * "status" request reads the completions and p99 so far; a "stop"
 * request ends the run in progress early (its start is then answered
 * with what was measured).
 *
 * The verb is for members only (a client is refused before it gets
 * here), the member that asks is not one of the run's targets, and a run
 * is capped by [weftd] load_max_duration and load_max_rate.
 *
 * The slots, the pacing, the window and the process's figures are the
 * load generator's (services/loadgen), which weft-bench's cluster nodes
 * run too; this file holds the verb: its requests, its limits, the run's
 * thread and what the answer carries.
 *
 * Threads: the run is driven by a thread of its own (it sleeps between
 * ticks, paces an open loop, and waits for the slots to go idle); the
 * replies arrive on the service's loops. The histogram is under the
 * run's lock.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <loadgen.h>
#include <msgpack.h>
#include <weft/histogram.h>
#include <weft/msgpack_codec.h>

#include "weftd_int.h"

#define NS_PER_MS 1000000u
#define NS_PER_S 1000000000u
#define MAX_OUTSTANDING 100000u
#define MAX_PHASE_MS (24u * 3600u * 1000u)
#define PRIME_TIMEOUT_NS (30ull * NS_PER_S)

struct weftd_load {
	weft_msvc *svc;
	uint64_t request_timeout_ms; /* the config's limits */
	size_t max_frame_bytes;
	pthread_mutex_t lock; /* hist, busy, gen's life */
	bool busy;            /* a run is in progress */
	bool joinable;        /* thread ran and is not joined */
	pthread_t thread;
	atomic_bool stop; /* weftd is stopping: refuse new runs */
	uint64_t max_duration_ms;
	double max_rate;
	const weft_msvc_peer *requester; /* not a target */
	/* The run in progress. */
	weft_msvc_msg *req; /* the detached start request */
	wload *gen;         /* its slots, kept while replies may come */
	uint64_t warmup_ms, duration_ms;
	unsigned outstanding;
	size_t size;
	double rate; /* requests/s; 0: closed loop */
	uint8_t *payload;
	weft_msvc_peer **targets;
	size_t ntargets;
	weft_histogram *hist;
	atomic_uint primed;             /* targets that answered */
	atomic_uint_fast64_t completed; /* successes in the window */
};

static void
on_reply(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	(void)svc;
	(void)data;
	(void)len;
	wload_reply(arg, status);
}

static int
send_echo(wload_slot *s, void *arg)
{
	struct weftd_load *run = arg;

	return weft_msvc_request(run->svc, run->targets[s->target],
	                         WEFTD_VERB_ECHO, run->payload, run->size, NULL,
	                         on_reply, s);
}

static size_t
next_target(size_t t, void *arg)
{
	const struct weftd_load *run = arg;

	return (t + 1) % run->ntargets;
}

/* booked keeps the round trips of the window's successes. */
static void
booked(wload_slot *s, int status, uint64_t latency_ns, bool in_window,
       void *arg)
{
	struct weftd_load *run = arg;

	(void)s;
	if (!in_window || status != 0)
		return;
	pthread_mutex_lock(&run->lock);
	weft_histogram_record(run->hist, latency_ns);
	pthread_mutex_unlock(&run->lock);
	atomic_fetch_add_explicit(&run->completed, 1, memory_order_relaxed);
}

static void
read_stats(wload_usage *u, void *arg)
{
	const struct weftd_load *run = arg;
	weft_msvc_stats st;

	weft_msvc_get_stats(run->svc, &st);
	u->wakeups = st.read_batches;
	u->msgs_in = st.messages_in;
}

static void
on_primed(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	struct weftd_load *run = arg;

	(void)svc;
	(void)data;
	(void)len;
	if (status == 0)
		atomic_fetch_add(&run->primed, 1);
	else
		wload_note_error(run->gen, status);
}

/* prime asks every other member once, so that every connection (and TLS
 * session) is up before the clock starts. Returns 0 or WEFT_EPEERDOWN. */
static int
prime(struct weftd_load *run)
{
	uint64_t deadline = weft_now_ns() + PRIME_TIMEOUT_NS;
	unsigned sent = 0;

	for (size_t i = 0; i < run->ntargets; i++)
		if (weft_msvc_request(run->svc, run->targets[i],
		                      WEFTD_VERB_ECHO, "", 0, NULL, on_primed,
		                      run) == 0)
			sent++;
	while (atomic_load(&run->primed) < sent && weft_now_ns() < deadline &&
	       !wload_is_stopped(run->gen))
		wload_sleep_until(weft_now_ns() + NS_PER_MS);
	if (atomic_load(&run->primed) == run->ntargets)
		return 0;
	return WEFT_EPEERDOWN;
}

#define PACK_KV(pk, key, value)                                                \
	(msgpack_pack_str_with_body((pk), (key), strlen(key)) == 0 &&          \
	 msgpack_pack_uint64((pk), (value)) == 0)

/* pack_result packs the run's figures: a map of 16 entries. */
static int
pack_result(struct weftd_load *run, const wload_usage *b, const wload_usage *a,
            struct evbuffer *out)
{
	uint64_t value, count, nbuckets = 0;
	msgpack_packer pk;
	size_t cursor = 0;
	wload_totals t;
	bool good;

	wload_get_totals(run->gen, &t);
	while (weft_histogram_next(run->hist, &cursor, &value, &count))
		nbuckets++;
	weft_msgpack_packer_init(&pk, out);
	good = msgpack_pack_map(&pk, 16) == 0 && PACK_KV(&pk, "ops", t.ok) &&
	       PACK_KV(&pk, "errors", t.errors) &&
	       PACK_KV(&pk, "sent", t.sent) &&
	       PACK_KV(&pk, "replies", t.replies) &&
	       PACK_KV(&pk, "duplicates", t.duplicates) &&
	       PACK_KV(&pk, "window_ns", run->duration_ms * NS_PER_MS) &&
	       PACK_KV(&pk, "vcsw", a->vcsw - b->vcsw) &&
	       PACK_KV(&pk, "ivcsw", a->ivcsw - b->ivcsw) &&
	       PACK_KV(&pk, "cpu_us", a->cpu_us - b->cpu_us) &&
	       PACK_KV(&pk, "rss_kb", a->rss_kb) &&
	       PACK_KV(&pk, "threads", a->threads) &&
	       PACK_KV(&pk, "wakeups", a->wakeups - b->wakeups) &&
	       PACK_KV(&pk, "msgs_in", a->msgs_in - b->msgs_in) &&
	       msgpack_pack_str_with_body(&pk, "first_error", 11) == 0 &&
	       msgpack_pack_int(&pk, wload_first_error(run->gen)) == 0 &&
	       PACK_KV(&pk, "peers", run->ntargets + 1) &&
	       msgpack_pack_str_with_body(&pk, "hist", 4) == 0 &&
	       msgpack_pack_array(&pk, (size_t)(2 * nbuckets)) == 0;
	cursor = 0;
	while (good && weft_histogram_next(run->hist, &cursor, &value, &count))
		good = msgpack_pack_uint64(&pk, value) == 0 &&
		       msgpack_pack_uint64(&pk, count) == 0;
	return good ? 0 : WEFT_ENOMEM;
}

static void
run_free(struct weftd_load *run)
{
	wload_free(run->gen);
	weft_histogram_free(run->hist);
	free(run->payload);
	free(run->targets);
	run->gen = NULL;
	run->hist = NULL;
	run->payload = NULL;
	run->targets = NULL;
}

static void *
run_main(void *arg)
{
	struct weftd_load *run = arg;
	struct evbuffer *out = evbuffer_new();
	wload_usage before, after;
	int rv;

	weft_info("weftd: load run: K=%u, %zu B, %s, warm-up %llu ms, "
	          "window %llu ms, %zu peers",
	          run->outstanding, run->size,
	          run->rate > 0 ? "open loop" : "closed loop",
	          (unsigned long long)run->warmup_ms,
	          (unsigned long long)run->duration_ms, run->ntargets);
	if ((rv = prime(run)) != 0) {
		weft_warn("weftd: load run: %u of %zu peers answered",
		          atomic_load(&run->primed), run->ntargets);
		weft_msvc_respond_error(run->req, rv,
		                        "not every member answered");
	} else {
		wload_run(run->gen, &before, &after);
		if (out == NULL || pack_result(run, &before, &after, out) != 0)
			weft_msvc_respond_error(run->req, WEFT_ENOMEM, NULL);
		else
			weft_msvc_respond_buf(run->req, out);
	}
	if (out != NULL)
		evbuffer_free(out);
	run->req = NULL;
	pthread_mutex_lock(&run->lock);
	/* Slots still out past the wait keep their memory until the next
	 * run or weftd_load_free: a late reply must find them. */
	if (wload_active(run->gen) == 0)
		run_free(run);
	run->busy = false;
	pthread_mutex_unlock(&run->lock);
	return NULL;
}

typedef struct weftd_load_params params;

static int
read_number(const msgpack_object *v, uint64_t *u, double *d)
{
	if (v->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
		*u = v->via.u64;
		*d = (double)v->via.u64;
		return 0;
	}
	if (v->type == MSGPACK_OBJECT_FLOAT64 ||
	    v->type == MSGPACK_OBJECT_FLOAT32) {
		if (!(v->via.f64 >= 0) || v->via.f64 > 1e12)
			return -1;
		*d = v->via.f64;
		*u = (uint64_t)v->via.f64;
		return 0;
	}
	return -1;
}

/* parse_params reads the request map; unknown keys are ignored. Returns 0
 * or -1 (malformed). */
static int
parse_params(const msgpack_object *o, params *p)
{
	static const char *const keys[] = {"warmup_ms", "duration_ms",
	                                   "outstanding", "size", "rate"};

	memset(p, 0, sizeof(*p));
	if (o->type != MSGPACK_OBJECT_MAP)
		return -1;
	for (uint32_t i = 0; i < o->via.map.size; i++) {
		const msgpack_object *k = &o->via.map.ptr[i].key;
		const msgpack_object *v = &o->via.map.ptr[i].val;
		uint64_t *fields[] = {&p->warmup_ms, &p->duration_ms,
		                      &p->outstanding, &p->size, NULL};
		double d;

		if (k->type != MSGPACK_OBJECT_STR)
			return -1;
		if (k->via.str.size == 2 &&
		    memcmp(k->via.str.ptr, "op", 2) == 0) {
			if (v->type != MSGPACK_OBJECT_STR)
				return -1;
			p->op = v->via.str.ptr;
			p->op_len = v->via.str.size;
			continue;
		}
		for (size_t f = 0; f < sizeof(keys) / sizeof(keys[0]); f++) {
			uint64_t u;

			if (k->via.str.size != strlen(keys[f]) ||
			    memcmp(k->via.str.ptr, keys[f], k->via.str.size))
				continue;
			if (read_number(v, &u, &d) != 0)
				return -1;
			if (fields[f] != NULL)
				*fields[f] = u;
			else
				p->rate = d;
		}
	}
	return p->op == NULL ? -1 : 0;
}

static bool
op_is(const params *p, const char *name)
{
	return p->op_len == strlen(name) && memcmp(p->op, name, p->op_len) == 0;
}

/* check_params returns NULL, or why the start request is refused. */
static const char *
check_params(const struct weftd_load *run, const params *p)
{
	if (p->outstanding < 1 || p->outstanding > MAX_OUTSTANDING)
		return "outstanding must be 1 to 100000";
	if (p->duration_ms < 1 || p->duration_ms > MAX_PHASE_MS ||
	    p->warmup_ms > MAX_PHASE_MS)
		return "duration_ms must be 1 ms to 24 h, warmup_ms at most 24 "
		       "h";
	if (p->warmup_ms + p->duration_ms > run->max_duration_ms)
		return "warmup_ms + duration_ms above [weftd] "
		       "load_max_duration";
	if (p->rate > run->max_rate)
		return "rate above [weftd] load_max_rate";
	if (p->size + 1024 > run->max_frame_bytes)
		return "size does not fit max_frame";
	if (weft_msvc_peer_count(run->svc) < 2)
		return "no other member to ask";
	return NULL;
}

/* setup_run allocates the run; 0 or WEFT_ENOMEM. */
static int
setup_run(struct weftd_load *run, const params *p)
{
	static const wload_ops ops = {.send = send_echo,
	                              .next_target = next_target,
	                              .booked = booked,
	                              .read_stats = read_stats};
	size_t npeers = weft_msvc_peer_count(run->svc);
	wload_opts lo = {.outstanding = (unsigned)p->outstanding,
	                 .rate = p->rate,
	                 .warmup_ns = p->warmup_ms * NS_PER_MS,
	                 .duration_ns = p->duration_ms * NS_PER_MS,
	                 .idle_wait_ns =
	                     (run->request_timeout_ms + 5000) * NS_PER_MS};

	run->warmup_ms = p->warmup_ms;
	run->duration_ms = p->duration_ms;
	run->outstanding = (unsigned)p->outstanding;
	run->size = (size_t)p->size;
	run->rate = p->rate;
	run->ntargets = 0;
	atomic_store(&run->primed, 0);
	atomic_store(&run->completed, 0);
	run->payload = calloc(1, run->size ? run->size : 1);
	run->targets = calloc(npeers, sizeof(*run->targets));
	if (wload_new(&lo, &ops, run, &run->gen) != 0 ||
	    weft_histogram_new(&run->hist) != 0 || run->payload == NULL ||
	    run->targets == NULL)
		return WEFT_ENOMEM;
	for (size_t i = 0; i < npeers; i++) {
		weft_msvc_peer *peer = weft_msvc_peer_at(run->svc, i);

		if (!weft_msvc_peer_is_self(peer) && peer != run->requester)
			run->targets[run->ntargets++] = peer;
	}
	if (run->ntargets == 0)
		return WEFT_EINVAL;
	/* Spread the first requests over the members. */
	for (unsigned i = 0; i < run->outstanding; i++)
		wload_slot_at(run->gen, i)->target =
		    (i + run->ntargets - 1) % run->ntargets;
	return 0;
}

static void
start(struct weftd_load *run, weft_msvc_msg *msg, const params *p)
{
	const char *why = check_params(run, p);
	int rv;

	if (why != NULL) {
		weft_msvc_respond_error(msg, WEFT_EINVAL, why);
		return;
	}
	pthread_mutex_lock(&run->lock);
	if (run->busy || atomic_load(&run->stop)) {
		pthread_mutex_unlock(&run->lock);
		weft_msvc_respond_error(
		    msg, run->busy ? WEFT_EBUSY : WEFT_ESHUTDOWN,
		    run->busy ? "a load run is in progress" : "stopping");
		return;
	}
	if (run->joinable) { /* the last run's thread has ended, or nearly */
		pthread_join(run->thread, NULL);
		run->joinable = false;
	}
	if (run->gen != NULL &&
	    wload_active(run->gen) > 0) { /* its late replies may come */
		pthread_mutex_unlock(&run->lock);
		weft_msvc_respond_error(
		    msg, WEFT_EBUSY, "the last run's requests are still out");
		return;
	}
	run_free(run);
	run->requester = weft_msvc_msg_peer(msg);
	if ((rv = setup_run(run, p)) == 0) {
		run->req = weft_msvc_msg_detach(msg);
		/* Made under the lock, so weftd_load_stop either refuses this
		 * run or joins its thread. */
		if (pthread_create(&run->thread, NULL, run_main, run) == 0) {
			run->busy = run->joinable = true;
			pthread_mutex_unlock(&run->lock);
			return;
		}
		msg = run->req;
		rv = WEFT_ENOMEM;
	}
	run_free(run);
	pthread_mutex_unlock(&run->lock);
	weft_msvc_respond_error(msg, rv,
	                        rv == WEFT_EINVAL ? "no other member to ask"
	                                          : "cannot start a load run");
}

/* stop_run ends the run in progress; answers {"stopped": was_running}. */
static void
stop_run(struct weftd_load *run, weft_msvc_msg *msg)
{
	uint8_t answer[10] = {0x81, 0xa7, 's', 't', 'o', 'p', 'p', 'e', 'd'};
	bool busy;

	pthread_mutex_lock(&run->lock);
	busy = run->busy;
	if (busy)
		wload_stop(run->gen);
	pthread_mutex_unlock(&run->lock);
	if (busy)
		weft_info("weftd: load run stopped by %s",
		          weft_msvc_msg_sender(msg));
	answer[9] = busy ? 0xc3 : 0xc2;
	weft_msvc_respond(msg, answer, sizeof(answer));
}

static void
status(struct weftd_load *run, weft_msvc_msg *msg)
{
	struct evbuffer *out = evbuffer_new();
	uint64_t p99 = 0;
	msgpack_packer pk;
	bool busy;

	pthread_mutex_lock(&run->lock);
	busy = run->busy;
	if (busy && run->hist != NULL)
		p99 = weft_histogram_percentile(run->hist, 99);
	pthread_mutex_unlock(&run->lock);
	if (out == NULL) {
		weft_msvc_respond_error(msg, WEFT_ENOMEM, NULL);
		return;
	}
	weft_msgpack_packer_init(&pk, out);
	if (msgpack_pack_map(&pk, 3) == 0 && PACK_KV(&pk, "busy", busy) &&
	    PACK_KV(&pk, "completed",
	            busy ? (uint64_t)atomic_load(&run->completed) : 0) &&
	    PACK_KV(&pk, "p99_ns", p99))
		weft_msvc_respond_buf(msg, out);
	else
		weft_msvc_respond_error(msg, WEFT_ENOMEM, NULL);
	evbuffer_free(out);
}

const char *
weftd_load_decode(const void *data, size_t len, weft_msgpack_msg **m,
                  struct weftd_load_params *p)
{
	*m = NULL;
	if (weft_msgpack_decode(data, len, 4, m) != 0)
		return "not msgpack";
	if (parse_params(weft_msgpack_msg_object(*m), p) != 0) {
		weft_msgpack_msg_free(*m);
		*m = NULL;
		return "expected a map with a string op";
	}
	return NULL;
}

static void
on_load(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	struct weftd_load *run = arg;
	weft_msgpack_msg *m;
	const char *why;
	params p;

	(void)svc;
	if (!weft_msvc_msg_is_request(msg))
		return;
	why = weftd_load_decode(weft_msvc_msg_data(msg), weft_msvc_msg_len(msg),
	                        &m, &p);
	if (why != NULL)
		weft_msvc_respond_error(msg, WEFT_EINVAL, why);
	else if (op_is(&p, "start"))
		start(run, msg, &p);
	else if (op_is(&p, "status"))
		status(run, msg);
	else if (op_is(&p, "stop"))
		stop_run(run, msg);
	else
		weft_msvc_respond_error(msg, WEFT_EINVAL,
		                        "op must be start or status (or stop)");
	weft_msgpack_msg_free(m);
}

int
weftd_load_register(struct weftd *d)
{
	struct weftd_load *run = calloc(1, sizeof(*run));
	int rv;

	if (run == NULL)
		return WEFT_ENOMEM;
	pthread_mutex_init(&run->lock, NULL);
	run->svc = d->svc;
	run->request_timeout_ms =
	    weft_msvc_config_limits_const(d->cfg)->request_timeout_ms;
	run->max_frame_bytes =
	    weft_msvc_config_limits_const(d->cfg)->max_frame_bytes;
	run->max_duration_ms = d->set.load_max_duration_ms;
	run->max_rate = d->set.load_max_rate;
	/* Members only: the verb makes this node load the whole cluster. */
	rv = weft_msvc_register(d->svc, WEFTD_VERB_LOAD, "load", on_load, run,
	                        WEFT_MSVC_INLINE);
	if (rv != 0) {
		pthread_mutex_destroy(&run->lock);
		free(run);
		return rv;
	}
	d->load = run;
	return 0;
}

void
weftd_load_stop(struct weftd *d)
{
	struct weftd_load *run = d->load;
	bool join;

	if (run == NULL)
		return;
	pthread_mutex_lock(&run->lock);
	atomic_store(&run->stop, true);
	if (run->busy)
		wload_stop(run->gen);
	join = run->joinable;
	run->joinable = false;
	pthread_mutex_unlock(&run->lock);
	if (join)
		pthread_join(run->thread, NULL);
}

void
weftd_load_free(struct weftd *d)
{
	struct weftd_load *run = d->load;

	if (run == NULL)
		return;
	weftd_load_stop(d);
	run_free(run);
	pthread_mutex_destroy(&run->lock);
	free(run);
	d->load = NULL;
}
