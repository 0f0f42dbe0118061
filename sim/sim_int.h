/* SPDX-License-Identifier: MIT */
/* sim_int.h: what the files of sim/ share. */
#ifndef WEFT_SIM_INT_H
#define WEFT_SIM_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/queue.h>

#include <weft/sim.h>
#include <weft/transport.h>

/* A direction's faults: bytes from one endpoint to another. */
struct weft__sim_link {
	uint64_t delay_min_ms, delay_max_ms;
	uint32_t corrupt_ppm;
	bool stalled;
	/* A hold: connections made before the one numbered held_below (see
	 * weft_sim's connections) hold their bytes; 0: none. */
	uint64_t held_below;
};

/* Where endpoint a dials node b: a proxy listening for a. */
struct weft__sim_route {
	weft_sim *sim;
	uint32_t a, b;
	weft_server *server;
	uint16_t port;
};

/* A node or a client. */
struct weft__sim_endpoint {
	char id[WEFT_MSVC_MAX_ID + 1];
	bool member;
	bool in_use;
	weft_msvc_limits limits;
	/* Readers use svc (weft_sim_node_acquire); a stop or start writes. */
	pthread_rwlock_t use;
	weft_loop_group *group; /* NULL while stopped */
	weft_msvc *svc;
	_Atomic uint16_t port; /* a node's listening port; 0: down */
	/* Under the simulation's lock. */
	bool paused;
};

struct weft__sim_chaos_run;

struct weft_sim {
	weft_sim_opts opts;
	char cluster[WEFT_MSVC_MAX_ID + 1];
	weft_msvc_config *cfg;
	uint64_t seed;
	uint32_t nodes;
	_Atomic uint32_t endpoints;
	struct weft__sim_endpoint ep[WEFT_SIM_MAX];
	struct weft__sim_route routes[WEFT_SIM_MAX][WEFT_SIM_MAX];
	/* lock guards links, pauses and the endpoint count's growth. */
	pthread_mutex_t lock;
	pthread_cond_t resumed; /* a pause ended */
	struct weft__sim_link links[WEFT_SIM_MAX][WEFT_SIM_MAX];
	/* The proxies' loop and what lives on it; connections counts the
	 * proxied connections made, which a hold tells apart by. */
	weft_loop *loop;
	_Atomic uint64_t connections;
	struct weft__sim_proxy *proxy;
	/* Random faults, while they run. */
	pthread_mutex_t chaos_lock;
	struct weft__sim_chaos_run *chaos;
};

/* splitmix64: the simulation's random numbers. */
static inline uint64_t
weft__sim_rand(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* A random number in lo..hi. */
static inline uint64_t
weft__sim_between(uint64_t *state, uint64_t lo, uint64_t hi)
{
	return hi <= lo ? lo : lo + weft__sim_rand(state) % (hi - lo + 1);
}

/* weft__sim_link_get copies the faults from -> to. Any thread. */
void weft__sim_link_get(weft_sim *sim, uint32_t from, uint32_t to,
                        struct weft__sim_link *out);

/* ---- proxy.c --------------------------------------------------------- */

/* weft__sim_proxy_new makes the proxies' state on sim->loop. */
int weft__sim_proxy_new(weft_sim *sim);
/* weft__sim_proxy_close_all closes every proxied connection; freeing the
 * loop then frees what is left (and sim->proxy may go after it). */
void weft__sim_proxy_close_all(weft_sim *sim);
/* weft__sim_route_open starts the proxy where a dials node b. */
int weft__sim_route_open(weft_sim *sim, uint32_t a, uint32_t b);
void weft__sim_route_close(weft_sim *sim, uint32_t a, uint32_t b);
/* weft__sim_proxy_kick makes every connection look at its faults again
 * (after one was lifted). Any thread. */
void weft__sim_proxy_kick(weft_sim *sim);
/* weft__sim_proxy_drop closes every connection between a and b. Any
 * thread. */
int weft__sim_proxy_drop(weft_sim *sim, uint32_t a, uint32_t b);

/* ---- chaos.c --------------------------------------------------------- */

void weft__sim_chaos_free(weft_sim *sim);

#endif
