/* SPDX-License-Identifier: MIT */
/*
 * weft/sim.h: a cluster in one process, with a fault layer, for tests.
 *
 * A simulation runs N member nodes of the messaging service ("n1".."nN" of
 * one cluster), each on a loop group of its own and bound to 127.0.0.1
 * port 0, and any number of non-member clients. Between every dialer and
 * every node sits a forwarding proxy built on weft's own transport: each
 * messaging connection is accepted by the proxy, which dials the node and
 * forwards the bytes both ways, so that faults can be put on the way
 * without touching the messaging service itself:
 *
 *   delay      bytes from one endpoint to another wait min..max ms; a
 *              spread reorders traffic across connections (each
 *              connection keeps its own order, as TCP does)
 *   stall      bytes from one endpoint to another stop; the proxy queues
 *              a little, then stops reading: the sender sees a peer that
 *              no longer reads
 *   hold       the bytes from one endpoint to another on the connections
 *              open when it starts stop as in a stall, and go on when it
 *              ends, in order; connections made meanwhile pass freely. A
 *              hold past the heartbeat timeout is a link that stalls,
 *              makes the sender redial, and then delivers what it held
 *              after what the new connection carried (a middlebox that
 *              buffers a dead path)
 *   corrupt    the proxy flips bytes (plaintext connections: their CRC32C
 *              must catch it)
 *   drop       every connection between two endpoints closes now
 *   pause      a node's loops stop running (as if its process were
 *              stopped); its peers' timers go on
 *   restart    a node stops and starts again, with new limits if given
 *
 * A service of your own runs on the simulation through on_start (register
 * its verbs, make its state) and on_stop (free it); the key-value
 * service's tests (tests/kv/test_kv.c) are the example. weft_sim_chaos_
 * start fires random faults from the simulation's seed: the same seed
 * gives the same schedule, so a failure names the seed that reproduces it
 * (WEFT_SIM_SEED=0x... in the environment).
 *
 * Endpoints are numbered: nodes 0..N-1 (ids "n1".."nN"), then clients in
 * the order they were made.
 *
 * Threads: every function may be called from any thread that is not one
 * of the simulation's loops, unless it says otherwise; faults may be set
 * while traffic flows. Installed as a test-support library, libweft_sim
 * (CMake target weft::weft_sim), not part of libweft.
 */
#ifndef WEFT_SIM_H
#define WEFT_SIM_H

#include <weft/messaging.h>

/* The most endpoints (nodes plus clients) a simulation has. */
#define WEFT_SIM_MAX 16

typedef struct weft_sim weft_sim;

/*
 * Called for each endpoint (a node, or a client: weft_msvc_is_member
 * tells) on the thread that starts it, after weft_msvc_new and before
 * weft_msvc_start, also after each restart: register verbs and peer
 * events, make the services that live on svc. Returns 0, or a WEFT_E code
 * to fail the start.
 */
typedef int (*weft_sim_start_cb)(weft_sim *sim, uint32_t endpoint,
                                 weft_msvc *svc, void *arg);
/* Called after an endpoint's service stopped (weft_msvc_stop has
 * returned), and before it is freed: free what on_start made. */
typedef void (*weft_sim_stop_cb)(weft_sim *sim, uint32_t endpoint,
                                 weft_msvc *svc, void *arg);

/*
 * Called on the proxies' loop each time a fault breaks a connection
 * between endpoints a and b (a dialed b): a drop closed it, or it closed
 * after the proxy flipped bytes on it (whichever end closed it, and
 * however late: a paused node finds the damage when it resumes). What was
 * written on that connection and not yet read may be lost.
 */
typedef void (*weft_sim_break_cb)(weft_sim *sim, uint32_t a, uint32_t b,
                                  void *arg);

/* Options; zero fields take the defaults shown. */
typedef struct weft_sim_opts {
	uint32_t nodes;      /* 3: members n1..nN, at most WEFT_SIM_MAX */
	const char *cluster; /* "sim" */
	/* Every node's and client's limits (copied); NULL: the messaging
	 * defaults with heartbeats every 100 ms (3 misses), reconnects
	 * after 10 to 200 ms, connects and requests timing out after 1 s
	 * and 2 s, one loop and one worker per node. */
	const weft_msvc_limits *limits;
	/* The seed of every random choice the simulation makes; 0: the
	 * WEFT_SIM_SEED environment variable (decimal or 0x-hex), else
	 * from the clock. */
	uint64_t seed;
	weft_sim_start_cb on_start; /* may be NULL */
	weft_sim_stop_cb on_stop;   /* may be NULL */
	weft_sim_break_cb on_break; /* may be NULL */
	void *arg;
	/* Endpoint e's wall clock runs clock_offset_ms[e] ms ahead of the
	 * system's (behind if negative), through every start: the
	 * messaging option of that name. 0: the system's. */
	int64_t clock_offset_ms[WEFT_SIM_MAX];
} weft_sim_opts;

/*
 * weft_sim_new starts a simulation: the proxy loop, every node (on_start,
 * then weft_msvc_start) and a proxy for each way one endpoint dials
 * another. *out is the caller's, for weft_sim_free. Returns 0,
 * WEFT_EINVAL (bad options), the first error of a node's start, or
 * another WEFT_E code.
 */
WEFT_API int weft_sim_new(const weft_sim_opts *opts, weft_sim **out);

/* weft_sim_free stops random faults, heals everything, stops every client
 * and node (on_stop) and frees the simulation. NULL is ignored. */
WEFT_API void weft_sim_free(weft_sim *sim);

/* weft_sim_seed is the seed in use (print it with a failure). */
WEFT_API uint64_t weft_sim_seed(const weft_sim *sim);
/* weft_sim_node_count is N. */
WEFT_API uint32_t weft_sim_node_count(const weft_sim *sim);

/*
 * weft_sim_node returns node's service, NULL while the node is stopped.
 * The service changes when the node restarts: a thread that uses it while
 * faults may restart the node takes it with weft_sim_node_acquire, which
 * holds a restart off until weft_sim_node_release. weft_sim_node_acquire
 * returns what weft_sim_node does (NULL for a bad node, with nothing
 * held).
 */
WEFT_API weft_msvc *weft_sim_node(weft_sim *sim, uint32_t node);
WEFT_API weft_msvc *weft_sim_node_acquire(weft_sim *sim, uint32_t node);
WEFT_API void weft_sim_node_release(weft_sim *sim, uint32_t node);

/*
 * weft_sim_client_new starts a non-member client service with id (which
 * must not be a member's), dialing every node through the proxies;
 * *endpoint receives its endpoint number and *out its service, which the
 * simulation owns. Returns 0, WEFT_EINVAL, WEFT_EBUSY (WEFT_SIM_MAX
 * endpoints already) or the service's error.
 */
WEFT_API int weft_sim_client_new(weft_sim *sim, const char *id,
                                 uint32_t *endpoint, weft_msvc **out);

/* weft_sim_node_stop stops node (on_stop) and leaves it down; its
 * proxies refuse connections meanwhile. Returns 0 or WEFT_EINVAL. */
WEFT_API int weft_sim_node_stop(weft_sim *sim, uint32_t node);
/* weft_sim_node_start starts a stopped node again, with limits (copied;
 * NULL: the ones it had). Returns 0, WEFT_EINVAL, WEFT_EBUSY (running) or
 * the start's error. */
WEFT_API int weft_sim_node_start(weft_sim *sim, uint32_t node,
                                 const weft_msvc_limits *limits);
/* weft_sim_restart is stop then start: a new process for that node, with
 * new limits if not NULL. Returns 0, WEFT_EINVAL or the start's error
 * (the errors of weft_sim_node_start). */
WEFT_API int weft_sim_restart(weft_sim *sim, uint32_t node,
                              const weft_msvc_limits *limits);

/* ---- Faults ------------------------------------------------------------ */

/*
 * weft_sim_delay makes each read's worth of bytes from endpoint from to
 * endpoint to wait a random min_ms..max_ms before it goes on (0, 0: none).
 * Returns 0 or WEFT_EINVAL. The other link faults work the same way and
 * apply to every connection between the two, whoever dialed it.
 */
WEFT_API int weft_sim_delay(weft_sim *sim, uint32_t from, uint32_t to,
                            uint64_t min_ms, uint64_t max_ms);
/* weft_sim_stall stops (on) or resumes the bytes from from to to. Returns
 * 0 or WEFT_EINVAL. */
WEFT_API int weft_sim_stall(weft_sim *sim, uint32_t from, uint32_t to, bool on);
/* weft_sim_hold holds (on) the bytes from from to to on the connections
 * open now, or releases (off) what every hold of that direction held.
 * Returns 0 or WEFT_EINVAL. */
WEFT_API int weft_sim_hold(weft_sim *sim, uint32_t from, uint32_t to, bool on);
/* weft_sim_corrupt flips one random bit in about one byte of every
 * per_million bytes from from to to (0: none). Returns 0 or
 * WEFT_EINVAL. */
WEFT_API int weft_sim_corrupt(weft_sim *sim, uint32_t from, uint32_t to,
                              uint32_t per_million);
/* weft_sim_drop closes every connection between a and b at once (the
 * dialer redials). Returns 0, WEFT_EINVAL, WEFT_ENOMEM or WEFT_ESHUTDOWN
 * (the proxies' loop is stopping). */
WEFT_API int weft_sim_drop(weft_sim *sim, uint32_t a, uint32_t b);
/* weft_sim_pause stops (on) or resumes every loop of node: its handlers,
 * timers and I/O wait; its worker threads do not. Returns 0 or
 * WEFT_EINVAL. */
WEFT_API int weft_sim_pause(weft_sim *sim, uint32_t node, bool on);
/* weft_sim_heal ends every delay, stall, hold, corruption and pause. */
WEFT_API void weft_sim_heal(weft_sim *sim);

/* ---- Random faults --------------------------------------------------- */

enum weft_sim_fault_kind {
	WEFT_SIM_DELAY = 0,
	WEFT_SIM_STALL = 1,
	WEFT_SIM_CORRUPT = 2,
	WEFT_SIM_DROP = 3,
	WEFT_SIM_PAUSE = 4,
	WEFT_SIM_RESTART = 5,
	WEFT_SIM_HOLD = 6,
	WEFT_SIM_FAULT_KINDS = 7,
};

/* One fault of a schedule: kind between endpoints a and b (b unused for
 * pause and restart), starting at_ms after the chaos started, lasting
 * duration_ms (0 for a drop or a restart), with a parameter (delay: the
 * most milliseconds; corrupt: per million). */
typedef struct weft_sim_fault {
	enum weft_sim_fault_kind kind;
	uint32_t a, b;
	uint64_t at_ms;
	uint64_t duration_ms;
	uint64_t param;
	bool ending; /* this is the fault's end, not its start */
} weft_sim_fault;

/* Told of each fault as it starts and as it ends, on the chaos thread,
 * before it is applied (start) or after it is lifted (end). The restart
 * weft_sim_chaos_stop makes to give a node back the limits it had (param
 * 0) is told too, before it is applied, on the thread that stops. */
typedef void (*weft_sim_fault_cb)(weft_sim *sim, const weft_sim_fault *f,
                                  void *arg);

/* Random faults; zero fields take the defaults shown. */
typedef struct weft_sim_chaos {
	uint64_t mean_gap_ms;  /* 150: between one fault's start and the next */
	uint64_t max_fault_ms; /* 1500: longest a fault lasts */
	/* The kinds to draw, a bit (1u << kind) each; 0: delay, stall,
	 * corrupt, drop and pause. */
	unsigned kinds;
	/* The endpoints faults may hit: 0..endpoints-1; 0: every node. */
	uint32_t endpoints;
	weft_sim_fault_cb on_fault; /* may be NULL */
	void *arg;
} weft_sim_chaos;

/*
 * weft_sim_chaos_start fires faults at random, from the simulation's seed,
 * on a thread of its own, until weft_sim_chaos_stop. Returns 0,
 * WEFT_EBUSY (already running) or WEFT_ENOMEM.
 */
WEFT_API int weft_sim_chaos_start(weft_sim *sim, const weft_sim_chaos *c);
/* weft_sim_chaos_stop ends the random faults and heals everything: a
 * node a restart left down is started again, and one a restart left with
 * other limits is restarted with the limits it had, a restart told to
 * on_fault and counted. Returns how many faults started. */
WEFT_API uint64_t weft_sim_chaos_stop(weft_sim *sim);

/*
 * weft_sim_schedule writes the first n faults the seed gives for c (as
 * weft_sim_chaos_start would fire them, on a simulation of nodes nodes)
 * into out: to print a schedule, or to check that a seed reproduces it.
 */
WEFT_API void weft_sim_schedule(uint64_t seed, uint32_t nodes,
                                const weft_sim_chaos *c, weft_sim_fault *out,
                                size_t n);

/* weft_sim_fault_name returns the name of a kind ("delay", ...), a
 * constant string. Any thread. */
WEFT_API const char *weft_sim_fault_name(enum weft_sim_fault_kind kind);

#endif
