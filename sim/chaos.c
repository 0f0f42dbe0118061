/* SPDX-License-Identifier: MIT */
/*
 * chaos.c: random faults. A generator turns the seed into a schedule (each
 * fault's start time, kind, endpoints, length and parameter) that depends
 * on nothing else, so a seed always gives the same schedule; a thread
 * fires it, lifting each fault when its time is up.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim_int.h"

#define MAX_ACTIVE 64
#define NS_PER_MS 1000000ull

static const char *const kind_names[WEFT_SIM_FAULT_KINDS] = {
    "delay", "stall", "corrupt", "drop", "pause", "restart", "hold"};

const char *
weft_sim_fault_name(enum weft_sim_fault_kind kind)
{
	return (unsigned)kind < WEFT_SIM_FAULT_KINDS ? kind_names[kind] : "?";
}

/* The schedule's state: only the seed and the options go in. */
struct gen {
	uint64_t rng;
	uint64_t t_ms;
	uint32_t nodes, endpoints;
	weft_sim_chaos c;
	weft_sim_fault active[MAX_ACTIVE]; /* started, end not yet passed */
	size_t nactive;
};

static void
gen_init(struct gen *g, uint64_t seed, uint32_t nodes, const weft_sim_chaos *c)
{
	memset(g, 0, sizeof(*g));
	g->rng = seed ^ 0x6368616f73ull; /* "chaos" */
	g->nodes = nodes;
	g->c = *c;
	if (g->c.mean_gap_ms == 0)
		g->c.mean_gap_ms = 150;
	if (g->c.max_fault_ms == 0)
		g->c.max_fault_ms = 1500;
	if (g->c.kinds == 0)
		g->c.kinds = (1u << WEFT_SIM_RESTART) - 1;
	g->endpoints = g->c.endpoints ? g->c.endpoints : nodes;
}

static bool
on_nodes_only(enum weft_sim_fault_kind k)
{
	return k == WEFT_SIM_PAUSE || k == WEFT_SIM_RESTART;
}

/* Forgets the faults that are over by now_ms. */
static void
prune(struct gen *g, uint64_t now_ms)
{
	size_t i, j = 0;

	for (i = 0; i < g->nactive; i++)
		if (g->active[i].at_ms + g->active[i].duration_ms >= now_ms)
			g->active[j++] = g->active[i];
	g->nactive = j;
}

/* Whether f would overlap a fault of its kind on its endpoints (the end
 * of one would lift the other early). */
static bool
clashes(const struct gen *g, const weft_sim_fault *f)
{
	size_t i;

	for (i = 0; i < g->nactive; i++) {
		const weft_sim_fault *a = &g->active[i];

		if (a->kind == f->kind && a->a == f->a &&
		    (on_nodes_only(f->kind) || a->b == f->b))
			return true;
	}
	return false;
}

static enum weft_sim_fault_kind
draw_kind(struct gen *g)
{
	enum weft_sim_fault_kind k;
	unsigned n = 0, pick;

	for (k = 0; k < WEFT_SIM_FAULT_KINDS; k++)
		n += (g->c.kinds >> k) & 1;
	pick = (unsigned)(weft__sim_rand(&g->rng) % (n ? n : 1));
	for (k = 0; k < WEFT_SIM_FAULT_KINDS; k++)
		if (((g->c.kinds >> k) & 1) && pick-- == 0)
			return k;
	return WEFT_SIM_DELAY;
}

static void
draw(struct gen *g, weft_sim_fault *f)
{
	uint32_t span;

	memset(f, 0, sizeof(*f));
	f->kind = draw_kind(g);
	span = on_nodes_only(f->kind) ? g->nodes : g->endpoints;
	f->a = (uint32_t)(weft__sim_rand(&g->rng) % span);
	f->b = (uint32_t)(weft__sim_rand(&g->rng) % (g->endpoints - 1));
	if (f->b >= f->a)
		f->b++;
	f->at_ms = g->t_ms;
	if (f->kind != WEFT_SIM_DROP && f->kind != WEFT_SIM_RESTART)
		f->duration_ms =
		    weft__sim_between(&g->rng, 10, g->c.max_fault_ms);
	if (f->kind == WEFT_SIM_DELAY)
		f->param = weft__sim_between(&g->rng, 1, 200);
	else if (f->kind == WEFT_SIM_CORRUPT)
		f->param = weft__sim_between(&g->rng, 20, 2000);
	else if (f->kind == WEFT_SIM_RESTART)
		f->param = weft__sim_rand(&g->rng) & 1;
}

/* The next fault of the schedule. */
static void
gen_next(struct gen *g, weft_sim_fault *f)
{
	int tries;

	for (;;) {
		g->t_ms += weft__sim_between(&g->rng, g->c.mean_gap_ms / 2,
		                             g->c.mean_gap_ms * 3 / 2);
		prune(g, g->t_ms);
		for (tries = 0; tries < 8; tries++) {
			draw(g, f);
			if (!clashes(g, f))
				break;
		}
		if (tries == 8)
			continue;
		if (f->duration_ms > 0 && g->nactive < MAX_ACTIVE)
			g->active[g->nactive++] = *f;
		return;
	}
}

void
weft_sim_schedule(uint64_t seed, uint32_t nodes, const weft_sim_chaos *c,
                  weft_sim_fault *out, size_t n)
{
	static const weft_sim_chaos none;
	struct gen g;
	size_t i;

	gen_init(&g, seed, nodes, c != NULL ? c : &none);
	for (i = 0; i < n; i++)
		gen_next(&g, &out[i]);
}

/* ---- Firing the schedule ---------------------------------------------- */

struct weft__sim_chaos_run {
	weft_sim *sim;
	struct gen gen;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	uint64_t t0_ns;
	uint64_t started;
	weft_sim_fault ends[MAX_ACTIVE]; /* faults to lift */
	size_t nends;
	weft_msvc_limits base[WEFT_SIM_MAX];
};

/* The limits a restart changes to: a quarter of the queues and no
 * compression (the node's connections then talk plainly with peers that
 * compress), or back. */
static void
restart_limits(struct weft__sim_chaos_run *run, uint32_t node, bool tight,
               weft_msvc_limits *l)
{
	*l = run->base[node];
	if (!tight)
		return;
	l->outbound_queue_bytes /= 4;
	l->inbound_inflight_bytes /= 4;
	l->compression = 0;
	l->max_pending_requests /= 4;
	if (l->outbound_queue_bytes < (64u << 10))
		l->outbound_queue_bytes = 64u << 10;
	if (l->inbound_inflight_bytes < (64u << 10))
		l->inbound_inflight_bytes = 64u << 10;
	if (l->max_pending_requests < 16)
		l->max_pending_requests = 16;
}

static void
apply(struct weft__sim_chaos_run *run, const weft_sim_fault *f, bool on)
{
	weft_sim *sim = run->sim;
	weft_msvc_limits l;

	switch (f->kind) {
	case WEFT_SIM_DELAY:
		weft_sim_delay(sim, f->a, f->b, 0, on ? f->param : 0);
		break;
	case WEFT_SIM_STALL:
		weft_sim_stall(sim, f->a, f->b, on);
		break;
	case WEFT_SIM_HOLD:
		weft_sim_hold(sim, f->a, f->b, on);
		break;
	case WEFT_SIM_CORRUPT:
		weft_sim_corrupt(sim, f->a, f->b, on ? (uint32_t)f->param : 0);
		break;
	case WEFT_SIM_DROP:
		weft_sim_drop(sim, f->a, f->b);
		break;
	case WEFT_SIM_PAUSE:
		weft_sim_pause(sim, f->a, on);
		break;
	case WEFT_SIM_RESTART:
		restart_limits(run, f->a, f->param & 1, &l);
		weft_sim_restart(sim, f->a, &l);
		break;
	case WEFT_SIM_FAULT_KINDS:
		break;
	}
}

static void
notify(struct weft__sim_chaos_run *run, const weft_sim_fault *f, bool ending)
{
	weft_sim_fault copy = *f;

	copy.ending = ending;
	if (run->gen.c.on_fault != NULL)
		run->gen.c.on_fault(run->sim, &copy, run->gen.c.arg);
}

/* The index of the fault to lift first, or nends if none. */
static size_t
first_end(const struct weft__sim_chaos_run *run)
{
	size_t i, best = run->nends;

	for (i = 0; i < run->nends; i++)
		if (best == run->nends ||
		    run->ends[i].at_ms + run->ends[i].duration_ms <
		        run->ends[best].at_ms + run->ends[best].duration_ms)
			best = i;
	return best;
}

static void
lift(struct weft__sim_chaos_run *run, size_t i)
{
	weft_sim_fault f = run->ends[i];

	run->ends[i] = run->ends[--run->nends];
	apply(run, &f, false);
	notify(run, &f, true);
}

/* Sleeps until at_ms after the start; false if told to stop. */
static bool
wait_until(struct weft__sim_chaos_run *run, uint64_t at_ms)
{
	uint64_t due = run->t0_ns + at_ms * NS_PER_MS, now, left;
	struct timespec ts;
	bool stop;

	pthread_mutex_lock(&run->lock);
	while (!run->stop && (now = weft_now_ns()) < due) {
		left = due - now;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += (time_t)(left / 1000000000u);
		ts.tv_nsec += (long)(left % 1000000000u);
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&run->cond, &run->lock, &ts);
	}
	stop = run->stop;
	pthread_mutex_unlock(&run->lock);
	return !stop;
}

static void *
chaos_main(void *arg)
{
	struct weft__sim_chaos_run *run = arg;
	weft_sim_fault f;
	size_t e;

	gen_next(&run->gen, &f);
	for (;;) {
		e = first_end(run);
		if (e < run->nends &&
		    run->ends[e].at_ms + run->ends[e].duration_ms <= f.at_ms) {
			if (!wait_until(run, run->ends[e].at_ms +
			                         run->ends[e].duration_ms))
				break;
			lift(run, e);
			continue;
		}
		if (!wait_until(run, f.at_ms))
			break;
		notify(run, &f, false);
		apply(run, &f, true);
		run->started++;
		if (f.duration_ms > 0 && run->nends < MAX_ACTIVE)
			run->ends[run->nends++] = f;
		gen_next(&run->gen, &f);
	}
	while (run->nends > 0)
		lift(run, 0);
	return NULL;
}

int
weft_sim_chaos_start(weft_sim *sim, const weft_sim_chaos *c)
{
	static const weft_sim_chaos none;
	struct weft__sim_chaos_run *run;
	uint32_t i;

	pthread_mutex_lock(&sim->chaos_lock);
	if (sim->chaos != NULL) {
		pthread_mutex_unlock(&sim->chaos_lock);
		return WEFT_EBUSY;
	}
	if ((run = calloc(1, sizeof(*run))) == NULL) {
		pthread_mutex_unlock(&sim->chaos_lock);
		return WEFT_ENOMEM;
	}
	run->sim = sim;
	gen_init(&run->gen, sim->seed, sim->nodes, c != NULL ? c : &none);
	if (run->gen.endpoints > atomic_load(&sim->endpoints))
		run->gen.endpoints = atomic_load(&sim->endpoints);
	for (i = 0; i < sim->nodes; i++)
		run->base[i] = sim->ep[i].limits;
	pthread_mutex_init(&run->lock, NULL);
	pthread_cond_init(&run->cond, NULL);
	run->t0_ns = weft_now_ns();
	if (pthread_create(&run->thread, NULL, chaos_main, run) != 0) {
		pthread_cond_destroy(&run->cond);
		pthread_mutex_destroy(&run->lock);
		free(run);
		pthread_mutex_unlock(&sim->chaos_lock);
		return WEFT_ENOMEM;
	}
	sim->chaos = run;
	pthread_mutex_unlock(&sim->chaos_lock);
	return 0;
}

uint64_t
weft_sim_chaos_stop(weft_sim *sim)
{
	struct weft__sim_chaos_run *run;
	uint64_t started;
	uint32_t i;

	pthread_mutex_lock(&sim->chaos_lock);
	run = sim->chaos;
	sim->chaos = NULL;
	pthread_mutex_unlock(&sim->chaos_lock);
	if (run == NULL)
		return 0;
	pthread_mutex_lock(&run->lock);
	run->stop = true;
	pthread_cond_signal(&run->cond);
	pthread_mutex_unlock(&run->lock);
	pthread_join(run->thread, NULL);
	weft_sim_heal(sim);
	/* A restart puts its node back with the limits it had. It is a
	 * restart like the others, told as one: what was on its way to or
	 * from the node is lost with it, and a ledger that did not hear of
	 * it would count that as lost without a fault. */
	for (i = 0; i < sim->nodes; i++)
		if (memcmp(&sim->ep[i].limits, &run->base[i],
		           sizeof(run->base[i])) != 0) {
			weft_sim_fault f = {
			    .kind = WEFT_SIM_RESTART,
			    .a = i,
			    .at_ms = (weft_now_ns() - run->t0_ns) / NS_PER_MS};

			notify(run, &f, false);
			weft_sim_restart(sim, i, &run->base[i]);
			run->started++;
		}
	started = run->started;
	pthread_cond_destroy(&run->cond);
	pthread_mutex_destroy(&run->lock);
	free(run);
	return started;
}

void
weft__sim_chaos_free(weft_sim *sim)
{
	weft_sim_chaos_stop(sim);
}
