/* SPDX-License-Identifier: MIT */
/*
 * sim.c: the simulation's endpoints (nodes and clients), their starts and
 * stops, and the faults that are state: link faults and pauses.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_int.h"

#define STOP_TIMEOUT_MS 500

static void
default_limits(weft_msvc_limits *l)
{
	weft_msvc_config *cfg;

	/* The messaging defaults, from a config made for the purpose. */
	if (weft_msvc_config_new("defaults", &cfg) == 0) {
		*l = *weft_msvc_config_limits(cfg);
		weft_msvc_config_free(cfg);
	}
	l->heartbeat_interval_ms = 100;
	l->heartbeat_misses = 3;
	l->reconnect_min_ms = 10;
	l->reconnect_max_ms = 200;
	l->connect_timeout_ms = 1000;
	l->request_timeout_ms = 2000;
	l->loops = 1;
	l->worker_threads = 1;
	l->allow_clients = true;
}

static uint64_t
seed_from(uint64_t seed)
{
	const char *env = getenv("WEFT_SIM_SEED");

	if (seed != 0)
		return seed;
	if (env != NULL && (seed = strtoull(env, NULL, 0)) != 0)
		return seed;
	return weft_now_ns() ^ ((uint64_t)weft_wall_ms() << 20) ^ 1;
}

static bool
valid(const weft_sim *sim, uint32_t e)
{
	return e < atomic_load(&sim->endpoints) && sim->ep[e].in_use;
}

static bool
is_node(const weft_sim *sim, uint32_t e)
{
	return e < sim->nodes;
}

void
weft__sim_link_get(weft_sim *sim, uint32_t from, uint32_t to,
                   struct weft__sim_link *out)
{
	pthread_mutex_lock(&sim->lock);
	*out = sim->links[from][to];
	pthread_mutex_unlock(&sim->lock);
}

/* ---- Starting and stopping an endpoint -------------------------------- */

/* Tells e's service to dial every node through e's own proxies. */
static int
route_peers(weft_sim *sim, uint32_t e)
{
	struct weft__sim_endpoint *ep = &sim->ep[e];
	uint32_t b;
	int rv;

	for (b = 0; b < sim->nodes; b++) {
		if (b == e)
			continue;
		rv =
		    weft_msvc_set_peer_addr(ep->svc, sim->ep[b].id, "127.0.0.1",
		                            sim->routes[e][b].port);
		if (rv != 0)
			return rv;
	}
	return 0;
}

static weft_msvc_config *
config_for(weft_sim *sim, const weft_msvc_limits *limits)
{
	weft_msvc_config *cfg;
	uint32_t i;

	if (weft_msvc_config_new(sim->cluster, &cfg) != 0)
		return NULL;
	for (i = 0; i < sim->nodes; i++) {
		if (weft_msvc_config_add_node(cfg, sim->ep[i].id, "127.0.0.1",
		                              0) != 0) {
			weft_msvc_config_free(cfg);
			return NULL;
		}
	}
	*weft_msvc_config_limits(cfg) = *limits;
	return cfg;
}

/* Starts endpoint e with its limits. Holds e's use lock for writing. */
static int
start_locked(weft_sim *sim, uint32_t e)
{
	struct weft__sim_endpoint *ep = &sim->ep[e];
	weft_msvc_opts o = {.listen_host = "127.0.0.1",
	                    .clock_offset_ms = sim->opts.clock_offset_ms[e]};
	weft_msvc_config *cfg = config_for(sim, &ep->limits);
	int rv = WEFT_ENOMEM;

	if (cfg == NULL)
		return WEFT_ENOMEM;
	if ((rv = weft_loop_group_new(ep->limits.loops ? ep->limits.loops : 1,
	                              &ep->group)) != 0)
		goto err_cfg;
	if ((rv = weft_msvc_new(ep->group, cfg, ep->id, &o, &ep->svc)) != 0)
		goto err_group;
	if ((rv = route_peers(sim, e)) != 0 ||
	    (sim->opts.on_start != NULL &&
	     (rv = sim->opts.on_start(sim, e, ep->svc, sim->opts.arg)) != 0))
		goto err_svc;
	if ((rv = weft_msvc_start(ep->svc)) != 0) {
		if (sim->opts.on_stop != NULL)
			sim->opts.on_stop(sim, e, ep->svc, sim->opts.arg);
		goto err_svc;
	}
	atomic_store(&ep->port, weft_msvc_port(ep->svc));
	weft_msvc_config_free(cfg);
	return 0;

err_svc:
	weft_msvc_free(ep->svc);
	ep->svc = NULL;
err_group:
	weft_loop_group_free(ep->group);
	ep->group = NULL;
err_cfg:
	weft_msvc_config_free(cfg);
	return rv;
}

/* Resumes a paused endpoint (its loops must run for it to stop). */
static void
resume(weft_sim *sim, uint32_t e)
{
	pthread_mutex_lock(&sim->lock);
	sim->ep[e].paused = false;
	pthread_cond_broadcast(&sim->resumed);
	pthread_mutex_unlock(&sim->lock);
}

static void
stop_locked(weft_sim *sim, uint32_t e)
{
	struct weft__sim_endpoint *ep = &sim->ep[e];

	if (ep->svc == NULL)
		return;
	resume(sim, e);
	atomic_store(&ep->port, 0);
	weft_msvc_stop(ep->svc, STOP_TIMEOUT_MS);
	if (sim->opts.on_stop != NULL)
		sim->opts.on_stop(sim, e, ep->svc, sim->opts.arg);
	weft_msvc_free(ep->svc);
	weft_loop_group_free(ep->group);
	ep->svc = NULL;
	ep->group = NULL;
}

int
weft_sim_node_stop(weft_sim *sim, uint32_t node)
{
	struct weft__sim_endpoint *ep = &sim->ep[node];

	if (!valid(sim, node) || !is_node(sim, node))
		return WEFT_EINVAL;
	pthread_rwlock_wrlock(&ep->use);
	stop_locked(sim, node);
	pthread_rwlock_unlock(&ep->use);
	return 0;
}

int
weft_sim_node_start(weft_sim *sim, uint32_t node,
                    const weft_msvc_limits *limits)
{
	struct weft__sim_endpoint *ep = &sim->ep[node];
	int rv = WEFT_EBUSY;

	if (!valid(sim, node) || !is_node(sim, node))
		return WEFT_EINVAL;
	pthread_rwlock_wrlock(&ep->use);
	if (ep->svc == NULL) {
		if (limits != NULL)
			ep->limits = *limits;
		rv = start_locked(sim, node);
	}
	pthread_rwlock_unlock(&ep->use);
	return rv;
}

int
weft_sim_restart(weft_sim *sim, uint32_t node, const weft_msvc_limits *limits)
{
	int rv;

	if ((rv = weft_sim_node_stop(sim, node)) != 0)
		return rv;
	return weft_sim_node_start(sim, node, limits);
}

weft_msvc *
weft_sim_node(weft_sim *sim, uint32_t node)
{
	return valid(sim, node) ? sim->ep[node].svc : NULL;
}

weft_msvc *
weft_sim_node_acquire(weft_sim *sim, uint32_t node)
{
	if (!valid(sim, node))
		return NULL;
	pthread_rwlock_rdlock(&sim->ep[node].use);
	return sim->ep[node].svc;
}

void
weft_sim_node_release(weft_sim *sim, uint32_t node)
{
	if (valid(sim, node))
		pthread_rwlock_unlock(&sim->ep[node].use);
}

/* ---- The simulation --------------------------------------------------- */

static int
endpoint_init(weft_sim *sim, uint32_t e, const char *id, bool member)
{
	struct weft__sim_endpoint *ep = &sim->ep[e];
	uint32_t b;
	int rv;

	snprintf(ep->id, sizeof(ep->id), "%s", id);
	ep->member = member;
	ep->limits = sim->opts.limits != NULL ? *sim->opts.limits
	                                      : (weft_msvc_limits){0};
	if (sim->opts.limits == NULL)
		default_limits(&ep->limits);
	pthread_rwlockattr_t attr;

	/* A restart must not wait behind a stream of senders. */
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(
	    &attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&ep->use, &attr);
	pthread_rwlockattr_destroy(&attr);
	ep->in_use = true;
	for (b = 0; b < sim->nodes; b++)
		if (b != e && (rv = weft__sim_route_open(sim, e, b)) != 0)
			return rv;
	return 0;
}

int
weft_sim_new(const weft_sim_opts *opts, weft_sim **out)
{
	weft_sim *sim;
	char id[16];
	uint32_t i;
	int rv;

	if (opts == NULL || opts->nodes > WEFT_SIM_MAX ||
	    (opts->cluster != NULL && strlen(opts->cluster) > WEFT_MSVC_MAX_ID))
		return WEFT_EINVAL;
	if ((sim = calloc(1, sizeof(*sim))) == NULL)
		return WEFT_ENOMEM;
	sim->opts = *opts;
	sim->nodes = opts->nodes ? opts->nodes : 3;
	sim->seed = seed_from(opts->seed);
	snprintf(sim->cluster, sizeof(sim->cluster), "%s",
	         opts->cluster ? opts->cluster : "sim");
	pthread_mutex_init(&sim->lock, NULL);
	pthread_mutex_init(&sim->chaos_lock, NULL);
	pthread_cond_init(&sim->resumed, NULL);
	atomic_store(&sim->endpoints, sim->nodes);
	if ((rv = weft_loop_new(&sim->loop)) != 0 ||
	    (rv = weft__sim_proxy_new(sim)) != 0 ||
	    (rv = weft_loop_start(sim->loop)) != 0)
		goto err;
	for (i = 0; i < sim->nodes; i++) {
		snprintf(id, sizeof(id), "n%u", i + 1);
		if ((rv = endpoint_init(sim, i, id, true)) != 0)
			goto err;
	}
	for (i = 0; i < sim->nodes; i++) {
		pthread_rwlock_wrlock(&sim->ep[i].use);
		rv = start_locked(sim, i);
		pthread_rwlock_unlock(&sim->ep[i].use);
		if (rv != 0)
			goto err;
	}
	*out = sim;
	return 0;

err:
	weft_sim_free(sim);
	return rv;
}

int
weft_sim_client_new(weft_sim *sim, const char *id, uint32_t *endpoint,
                    weft_msvc **out)
{
	uint32_t e, i;
	int rv;

	if (id == NULL || strlen(id) > WEFT_MSVC_MAX_ID)
		return WEFT_EINVAL;
	for (i = 0; i < sim->nodes; i++)
		if (strcmp(sim->ep[i].id, id) == 0)
			return WEFT_EINVAL;
	pthread_mutex_lock(&sim->lock);
	e = atomic_load(&sim->endpoints);
	if (e >= WEFT_SIM_MAX) {
		pthread_mutex_unlock(&sim->lock);
		return WEFT_EBUSY;
	}
	rv = endpoint_init(sim, e, id, false);
	atomic_store(&sim->endpoints, e + 1);
	pthread_mutex_unlock(&sim->lock);
	if (rv == 0) {
		pthread_rwlock_wrlock(&sim->ep[e].use);
		rv = start_locked(sim, e);
		pthread_rwlock_unlock(&sim->ep[e].use);
	}
	if (rv != 0)
		return rv;
	*endpoint = e;
	*out = sim->ep[e].svc;
	return 0;
}

void
weft_sim_free(weft_sim *sim)
{
	uint32_t n, e, b;

	if (sim == NULL)
		return;
	weft_sim_chaos_stop(sim);
	weft_sim_heal(sim);
	n = atomic_load(&sim->endpoints);
	/* Clients first, so that nodes see them go. */
	for (e = n; e-- > 0;) {
		if (!sim->ep[e].in_use)
			continue;
		pthread_rwlock_wrlock(&sim->ep[e].use);
		stop_locked(sim, e);
		pthread_rwlock_unlock(&sim->ep[e].use);
	}
	if (sim->loop != NULL) {
		for (e = 0; e < n; e++)
			for (b = 0; b < sim->nodes; b++)
				weft__sim_route_close(sim, e, b);
		weft__sim_proxy_close_all(sim);
		weft_loop_free(sim->loop);
	}
	for (e = 0; e < n; e++)
		if (sim->ep[e].in_use)
			pthread_rwlock_destroy(&sim->ep[e].use);
	weft__sim_chaos_free(sim);
	free(sim->proxy);
	pthread_cond_destroy(&sim->resumed);
	pthread_mutex_destroy(&sim->chaos_lock);
	pthread_mutex_destroy(&sim->lock);
	free(sim);
}

uint64_t
weft_sim_seed(const weft_sim *sim)
{
	return sim->seed;
}

uint32_t
weft_sim_node_count(const weft_sim *sim)
{
	return sim->nodes;
}

/* ---- Link faults and pauses ------------------------------------------- */

/* Applies change to the link from -> to under the lock, then has the
 * proxies look again. */
static int
set_link(weft_sim *sim, uint32_t from, uint32_t to,
         void (*change)(struct weft__sim_link *l, uint64_t x, uint64_t y),
         uint64_t x, uint64_t y)
{
	if (!valid(sim, from) || !valid(sim, to) || from == to)
		return WEFT_EINVAL;
	pthread_mutex_lock(&sim->lock);
	change(&sim->links[from][to], x, y);
	pthread_mutex_unlock(&sim->lock);
	weft__sim_proxy_kick(sim);
	return 0;
}

static void
change_delay(struct weft__sim_link *l, uint64_t min_ms, uint64_t max_ms)
{
	l->delay_min_ms = min_ms;
	l->delay_max_ms = max_ms > min_ms ? max_ms : min_ms;
}

static void
change_stall(struct weft__sim_link *l, uint64_t on, uint64_t unused)
{
	(void)unused;
	l->stalled = on != 0;
}

/* A second hold of a direction holds the connections the first one did
 * too: the fault is lifted for them all at once. */
static void
change_hold(struct weft__sim_link *l, uint64_t on, uint64_t below)
{
	l->held_below = on != 0 ? below : 0;
}

static void
change_corrupt(struct weft__sim_link *l, uint64_t ppm, uint64_t unused)
{
	(void)unused;
	l->corrupt_ppm = (uint32_t)(ppm > 1000000 ? 1000000 : ppm);
}

int
weft_sim_delay(weft_sim *sim, uint32_t from, uint32_t to, uint64_t min_ms,
               uint64_t max_ms)
{
	return set_link(sim, from, to, change_delay, min_ms, max_ms);
}

int
weft_sim_stall(weft_sim *sim, uint32_t from, uint32_t to, bool on)
{
	return set_link(sim, from, to, change_stall, on, 0);
}

int
weft_sim_hold(weft_sim *sim, uint32_t from, uint32_t to, bool on)
{
	/* Connections are numbered from 1 as the proxy makes them. */
	return set_link(sim, from, to, change_hold, on,
	                atomic_load(&sim->connections) + 1);
}

int
weft_sim_corrupt(weft_sim *sim, uint32_t from, uint32_t to,
                 uint32_t per_million)
{
	return set_link(sim, from, to, change_corrupt, per_million, 0);
}

int
weft_sim_drop(weft_sim *sim, uint32_t a, uint32_t b)
{
	if (!valid(sim, a) || !valid(sim, b) || a == b)
		return WEFT_EINVAL;
	return weft__sim_proxy_drop(sim, a, b);
}

struct pause_job {
	weft_sim *sim;
	uint32_t e;
};

/* Runs on one of a paused endpoint's loops and holds it until resumed. */
static void
pause_task(weft_loop *loop, int status, void *arg)
{
	struct pause_job *job = arg;
	weft_sim *sim = job->sim;

	(void)loop;
	pthread_mutex_lock(&sim->lock);
	while (status == 0 && sim->ep[job->e].paused)
		pthread_cond_wait(&sim->resumed, &sim->lock);
	pthread_mutex_unlock(&sim->lock);
	free(job);
}

int
weft_sim_pause(weft_sim *sim, uint32_t node, bool on)
{
	struct weft__sim_endpoint *ep = &sim->ep[node];
	struct pause_job *job;
	size_t i, n;
	bool was;

	if (!valid(sim, node))
		return WEFT_EINVAL;
	if (!on) {
		resume(sim, node);
		return 0;
	}
	pthread_rwlock_rdlock(&ep->use);
	pthread_mutex_lock(&sim->lock);
	was = ep->paused;
	ep->paused = ep->group != NULL;
	pthread_mutex_unlock(&sim->lock);
	n = ep->group != NULL && !was ? weft_loop_group_size(ep->group) : 0;
	for (i = 0; i < n; i++) {
		if ((job = malloc(sizeof(*job))) == NULL)
			break;
		*job = (struct pause_job){sim, node};
		if (weft_loop_post(weft_loop_group_at(ep->group, i), pause_task,
		                   job) != 0)
			free(job);
	}
	pthread_rwlock_unlock(&ep->use);
	return 0;
}

void
weft_sim_heal(weft_sim *sim)
{
	uint32_t e, n = atomic_load(&sim->endpoints);

	pthread_mutex_lock(&sim->lock);
	memset(sim->links, 0, sizeof(sim->links));
	for (e = 0; e < n; e++)
		sim->ep[e].paused = false;
	pthread_cond_broadcast(&sim->resumed);
	pthread_mutex_unlock(&sim->lock);
	if (sim->proxy != NULL && sim->loop != NULL)
		weft__sim_proxy_kick(sim);
}
