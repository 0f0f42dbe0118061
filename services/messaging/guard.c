/* SPDX-License-Identifier: MIT */
/*
 * guard.c: what a node grants the peers it accepts (docs/SECURITY.md).
 *
 * Connections in their handshake (from accept, the TLS handshake
 * included) are capped per node by the server's door (transport/door.c):
 * at the cap, the source address holding the most gives up its oldest, so
 * strangers cannot hold the door shut. A connection leaves the door when
 * it proves who it is: a member's certificate at once, anyone else's
 * HELLO. Client connections are capped per node and per source address.
 * The caps, and the server's on all accepted connections, come from what
 * the file limit leaves once every member's connections are provided
 * for, so that clients can never use up the descriptors a member needs
 * to come back; they are derived again when the file limit changes (read
 * each second on the first loop). Answers queued for
 * clients are bounded per node, and a client whose answers back up is no
 * longer read until it reads them. A frame's bytes count as in flight
 * from its first byte, and each accepted connection has deadlines: its
 * handshake, a frame begun, a client's idleness, a client not reading.
 *
 * Deadlines are kept lazily: activity only stores a time, and one timer
 * per accepted connection fires at the earliest deadline that is armed,
 * looks at each, and re-arms.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/tls.h>

#include "msvc_int.h"

#define NS_PER_MS 1000000ull
/* How often the file limit is read again, and the door's counters. */
#define DOOR_CHECK_MS 1000

static void on_watch(weft_timer *t, void *arg);

/* ---- Caps ----------------------------------------------------------------
 */

/*
 * Derives the caps from the file limit nofile: every member dials us and
 * we dial it, each class on its own, and those descriptors are kept for
 * them; clients and handshakes share the rest (handshakes at most a
 * quarter of it, and never none, or not even a member could say HELLO).
 * The server's cap on accepted connections is theirs plus the members'
 * inbound ones. Returns true when the config's caps had to be lowered.
 */
static bool
derive_caps(weft_msvc *svc, uint64_t nofile)
{
	const weft_msvc_limits *l = &svc->cfg->limits;
	struct weft__msvc_fd_caps caps;
	uint64_t inbound = 0;
	uint32_t hs, c;

	/* One derivation with the configuration check (config.c). */
	weft__msvc_fd_caps(l, svc->npeers, nofile, &caps);
	/* Never no slot, or not even a member could say HELLO. */
	hs = caps.handshakes != 0 ? caps.handshakes : 1;
	atomic_store(&svc->client_cap, caps.clients);
	atomic_store(&svc->handshake_cap, hs);
	for (c = 0; c < WEFT_MSVC_CLASSES; c++)
		inbound += l->connections[c];
	/* Half the slack is what members may hold beyond their configured
	 * connections while old ones are still being found dead. */
	svc->channel_cap =
	    (size_t)((uint64_t)caps.clients + hs + inbound * svc->npeers +
	             WEFT__MSVC_FD_SLACK / 2);
	svc->nofile = nofile;
	return caps.lowered;
}

static void
warn_lowered(weft_msvc *svc)
{
	weft_warn("msvc %s: the file limit (%llu) leaves room for %u clients "
	          "and %u handshakes beside the members' connections; raise "
	          "it (ulimit -n) for max_clients = %u",
	          svc->id, (unsigned long long)svc->nofile,
	          atomic_load(&svc->client_cap),
	          atomic_load(&svc->handshake_cap),
	          svc->cfg->limits.max_clients);
}

void
weft__msvc_guard_init(weft_msvc *svc)
{
	if (derive_caps(svc, weft__msvc_fd_limit()))
		warn_lowered(svc);
}

/* Each second on the first loop: a file limit changed on a running node
 * (prlimit, setrlimit) gives new caps at once, for the next accept; and
 * the door's counters are copied where weft_msvc_get_stats reads them. */
static void
on_door_check(weft_timer *t, void *arg)
{
	weft_msvc *svc = arg;
	uint64_t nofile = weft__msvc_fd_limit(), was = svc->nofile;
	weft_server_stats st;

	(void)t;
	if (nofile != was) {
		if (derive_caps(svc, nofile))
			warn_lowered(svc);
		else
			weft_info("msvc %s: the file limit went from %llu to "
			          "%llu: room for %u clients and %u handshakes",
			          svc->id, (unsigned long long)was,
			          (unsigned long long)nofile,
			          atomic_load(&svc->client_cap),
			          atomic_load(&svc->handshake_cap));
		weft_server_set_limits(svc->server, svc->channel_cap,
		                       atomic_load(&svc->handshake_cap));
	}
	weft_server_get_stats(svc->server, &st);
	atomic_store_explicit(&svc->door_dropped, st.evicted + st.rejected,
	                      memory_order_relaxed);
}

void
weft__msvc_guard_loop_start(struct weft__msvc_loop *ml)
{
	weft_msvc *svc = ml->svc;

	if (ml->index != 0 || svc->server == NULL ||
	    weft_timer_new(ml->loop, on_door_check, svc, &svc->door_check) != 0)
		return;
	weft_timer_start(svc->door_check, DOOR_CHECK_MS, DOOR_CHECK_MS);
}

void
weft__msvc_guard_loop_stop(struct weft__msvc_loop *ml)
{
	weft_msvc *svc = ml->svc;

	if (ml->index != 0 || svc->door_check == NULL)
		return;
	weft_timer_free(svc->door_check);
	svc->door_check = NULL;
}

/* Adds delta (+1 or -1) to the clients from c's address; returns the
 * count before. Requires nothing; takes the address lock. */
static uint32_t
address_count(weft_msvc *svc, const char *host, int delta)
{
	struct weft__msvc_addr *a = NULL;
	uint32_t before = 0;
	size_t i;

	pthread_mutex_lock(&svc->addr_lock);
	for (i = 0; i < svc->naddrs; i++)
		if (strcmp(svc->addrs[i].host, host) == 0) {
			a = &svc->addrs[i];
			break;
		}
	if (a == NULL && delta > 0) {
		a = WEFT__ARRAY_ROOM(svc->addrs, svc->addrs_cap, svc->naddrs,
		                     16);
		if (a == NULL) {
			pthread_mutex_unlock(&svc->addr_lock);
			return UINT32_MAX; /* refuse: out of memory */
		}
		svc->naddrs++;
		snprintf(a->host, sizeof(a->host), "%s", host);
		a->n = 0;
	}
	if (a != NULL) {
		before = a->n;
		a->n = (uint32_t)((int64_t)a->n + delta);
		if (a->n == 0)
			*a = svc->addrs[--svc->naddrs];
	}
	pthread_mutex_unlock(&svc->addr_lock);
	return before;
}

/* ---- Deadlines ------------------------------------------------------------
 */

/* The earliest deadline armed on c, or 0. */
static uint64_t
next_deadline(const struct weft__msvc_inbound *in)
{
	const struct weft__msvc_conn *c = &in->conn;
	const weft_msvc_limits *l = &c->svc->cfg->limits;
	uint64_t d[5] = {0, 0, 0, 0, 0}, best = 0;
	size_t i;

	if (c->state == WEFT__MSVC_HANDSHAKE)
		d[0] = in->handshake_deadline_ns;
	if (c->frame_started_ns != 0)
		d[1] = c->frame_started_ns + l->frame_timeout_ms * NS_PER_MS;
	if (in->counted_client) {
		d[2] =
		    in->last_active_ns + l->client_idle_timeout_ms * NS_PER_MS;
		if (c->blocked)
			d[3] = in->blocked_since_ns +
			       l->client_stall_timeout_ms * NS_PER_MS;
	}
	if (c->assembly_started_ns != 0)
		d[4] = c->assembly_started_ns + l->frame_timeout_ms * NS_PER_MS;
	for (i = 0; i < 5; i++)
		if (d[i] != 0 && (best == 0 || d[i] < best))
			best = d[i];
	return best;
}

/* Arms c's timer for its earliest deadline, unless it fires earlier
 * already. */
static void
watch(struct weft__msvc_inbound *in)
{
	uint64_t at = next_deadline(in), now = weft__msvc_now_ns(in->conn.ml);

	if (at == 0 || in->watch == NULL ||
	    (in->watch_at_ns != 0 && in->watch_at_ns <= at))
		return;
	in->watch_at_ns = at;
	weft_timer_start(in->watch, at > now ? (at - now) / NS_PER_MS + 1 : 0,
	                 0);
}

/* Closes c for a reason of its own doing, counted in *counter. */
static void
expel(struct weft__msvc_conn *c, _Atomic uint64_t *counter, const char *why)
{
	weft__msvc_count(counter, 1);
	weft__msvc_conn_reject(c, why);
}

static void
on_watch(weft_timer *t, void *arg)
{
	struct weft__msvc_inbound *in = arg;
	struct weft__msvc_conn *c = &in->conn;
	weft_msvc *svc = c->svc;
	const weft_msvc_limits *l = &svc->cfg->limits;
	uint64_t now = weft_now_ns();
	char why[160];

	(void)t;
	in->watch_at_ns = 0;
	if (c->ch == NULL || c->state == WEFT__MSVC_CLOSED)
		return;
	if (c->state == WEFT__MSVC_HANDSHAKE &&
	    now >= in->handshake_deadline_ns) {
		expel(c, &svc->st.handshakes_refused, "no handshake in time");
	} else if (c->frame_started_ns != 0 &&
	           now >=
	               c->frame_started_ns + l->frame_timeout_ms * NS_PER_MS) {
		snprintf(why, sizeof(why),
		         "a frame not completed within %llu ms",
		         (unsigned long long)l->frame_timeout_ms);
		expel(c, &svc->st.frame_timeouts, why);
	} else if (c->assembly_started_ns != 0 &&
	           now >= c->assembly_started_ns +
	                      l->frame_timeout_ms * NS_PER_MS) {
		snprintf(why, sizeof(why),
		         "a chunked message not completed within %llu ms",
		         (unsigned long long)l->frame_timeout_ms);
		expel(c, &svc->st.frame_timeouts, why);
	} else if (in->counted_client && c->blocked &&
	           now >= in->blocked_since_ns +
	                      l->client_stall_timeout_ms * NS_PER_MS) {
		snprintf(why, sizeof(why),
		         "not reading its answers for %llu ms",
		         (unsigned long long)l->client_stall_timeout_ms);
		expel(c, &svc->st.stalled_clients, why);
	} else if (in->counted_client &&
	           now >= in->last_active_ns +
	                      l->client_idle_timeout_ms * NS_PER_MS) {
		snprintf(why, sizeof(why), "idle for %llu ms",
		         (unsigned long long)l->client_idle_timeout_ms);
		expel(c, &svc->st.idle_clients, why);
	} else {
		watch(in);
	}
}

ssize_t
weft__msvc_member_admitted(weft_msvc *svc, const char *id)
{
	uint32_t i, n = atomic_load(&svc->npeers);

	for (i = 0; i < n; i++) {
		weft_msvc_peer *peer = svc->peers[i];

		if (strcmp(peer->id, id) != 0)
			continue;
		if (!weft__msvc_peer_left(peer))
			return (ssize_t)i;
		/* Leaving, it answers what we asked on connections of its
		 * own, which it may not have opened yet. */
		if (atomic_load(&peer->member_state) ==
		        WEFT__MSVC_MEMBER_LEAVING &&
		    weft__msvc_relaxed(&peer->st.pending) != 0)
			return (ssize_t)i;
		return -1;
	}
	return -1;
}

/* ---- An accepted connection's life ----------------------------------------
 */

/* Whether c's TLS certificate names a member other than this node: then
 * it is that member, whatever it says next. */
static bool
proven_member(struct weft__msvc_conn *c)
{
	weft_msvc *svc = c->svc;
	char id[WEFT_MSVC_MAX_ID + 1];
	ssize_t m;

	if (!weft_tls_is_active(c->ch) ||
	    weft_tls_peer_identity(c->ch, id, sizeof(id)) != 0)
		return false;
	m = weft__msvc_member_admitted(svc, id);
	return m >= 0 && !(svc->member && (uint32_t)m == svc->self_index);
}

int
weft__msvc_guard_accept(struct weft__msvc_conn *c)
{
	struct weft__msvc_inbound *in = weft__msvc_inbound_of(c);
	weft_msvc *svc = c->svc;
	int rv;

	/* The door counts c until it proves who it is; a member proven by
	 * its certificate is out of it at once, never to be evicted. */
	in->counted_handshake = true;
	if (proven_member(c))
		weft__msvc_guard_handshake_done(c);
	if ((rv = weft_timer_new(c->ml->loop, on_watch, in, &in->watch)) != 0)
		return rv;
	in->last_active_ns = weft_now_ns();
	in->handshake_deadline_ns =
	    in->last_active_ns +
	    svc->cfg->limits.connect_timeout_ms * NS_PER_MS;
	watch(in);
	return 0;
}

void
weft__msvc_guard_handshake_done(struct weft__msvc_conn *c)
{
	struct weft__msvc_inbound *in = weft__msvc_inbound_of(c);

	if (in->counted_handshake && c->ch != NULL)
		weft_server_establish(c->ch);
	in->counted_handshake = false;
}

int
weft__msvc_guard_admit_client(struct weft__msvc_conn *c, const char **why)
{
	struct weft__msvc_inbound *in = weft__msvc_inbound_of(c);
	weft_msvc *svc = c->svc;
	char host[WEFT_ADDRESS_MAX];

	weft__msvc_host_of(c->peer_addr, host, sizeof(host));
	if (atomic_fetch_add(&svc->clients, 1) >=
	    atomic_load_explicit(&svc->client_cap, memory_order_relaxed)) {
		atomic_fetch_sub(&svc->clients, 1);
		weft__msvc_count(&svc->st.clients_refused, 1);
		return *why = "too many clients", WEFT__MSVC_R_NO_CLIENTS;
	}
	if (address_count(svc, host, 1) >=
	    svc->cfg->limits.max_clients_per_address) {
		address_count(svc, host, -1);
		atomic_fetch_sub(&svc->clients, 1);
		weft__msvc_count(&svc->st.clients_refused, 1);
		return *why = "too many clients from this address",
		       WEFT__MSVC_R_NO_CLIENTS;
	}
	in->counted_client = true;
	in->last_active_ns = weft__msvc_now_ns(c->ml);
	watch(in);
	return WEFT__MSVC_OK;
}

void
weft__msvc_guard_release(struct weft__msvc_conn *c)
{
	struct weft__msvc_inbound *in = weft__msvc_inbound_of(c);
	char host[WEFT_ADDRESS_MAX];

	/* The channel leaving its server takes it out of the door. */
	in->counted_handshake = false;
	if (in->counted_client) {
		weft__msvc_host_of(c->peer_addr, host, sizeof(host));
		address_count(c->svc, host, -1);
		atomic_fetch_sub(&c->svc->clients, 1);
		in->counted_client = false;
	}
	weft__msvc_guard_frame_done(c);
	weft__msvc_guard_assembly_done(c);
	c->frame_started_ns = 0;
	if (in->watch != NULL)
		weft_timer_stop(in->watch);
	in->watch_at_ns = 0;
}

void
weft__msvc_guard_fini(struct weft__msvc_conn *c)
{
	struct weft__msvc_inbound *in = weft__msvc_inbound_of(c);

	if (in->watch != NULL)
		weft_timer_free(in->watch);
	in->watch = NULL;
}

/* ---- Frames ---------------------------------------------------------------
 */

bool
weft__msvc_guard_frame_wait(struct weft__msvc_conn *c, size_t total)
{
	weft_msvc *svc = c->svc;
	uint64_t limit;
	_Atomic uint64_t *budget = weft__msvc_conn_budget(c, &limit);
	uint64_t before;

	if (c->frame_started_ns == 0) {
		c->frame_started_ns = weft__msvc_now_ns(c->ml);
		if (!c->outbound)
			watch(weft__msvc_inbound_of(c));
	}
	/* A chunk of a message in assembly: its bytes are held already. */
	if (c->frame_reserved != 0 || c->assembly_reserved != 0)
		return true;
	/* The frame's bytes count as in flight from now, so unfinished
	 * frames cannot hold more than the node's budget, nor clients' more
	 * than their part of it: partial frames of clients cannot take the
	 * members' room, nor pause every other client. One frame is always
	 * let in, however large, or nothing could ever move. */
	before = atomic_fetch_add(budget, total);
	if (before != 0 && before + total > limit) {
		if (atomic_fetch_sub(budget, total) == total)
			weft__msvc_drained(svc);
		c->frame_wanted = total;
		return false;
	}
	c->frame_reserved = total;
	c->frame_wanted = 0;
	return true;
}

bool
weft__msvc_guard_may_resume(struct weft__msvc_conn *c)
{
	uint64_t limit;
	_Atomic uint64_t *budget = weft__msvc_conn_budget(c, &limit);
	uint64_t now = atomic_load(budget);
	size_t wanted =
	    c->frame_wanted != 0 ? c->frame_wanted : c->assembly_wanted;

	if (wanted == 0)
		return now < limit;
	if (now != 0 && now + wanted > limit)
		return false;
	/* A message whose first chunk waited takes its room now. */
	if (c->assembly_wanted != 0) {
		atomic_fetch_add(budget, c->assembly_wanted);
		c->assembly_reserved = c->assembly_wanted;
		c->assembly_wanted = 0;
	}
	return true;
}

bool
weft__msvc_guard_assembling(struct weft__msvc_conn *c,
                            const weft_chunk_assembling *a)
{
	uint64_t limit;
	_Atomic uint64_t *budget = weft__msvc_conn_budget(c, &limit);
	size_t held = c->assembly_reserved, want = a->total_bytes;
	uint64_t before;

	if (a->messages < c->assembly_messages && c->peer != NULL)
		weft__msvc_count(&c->peer->st.chunked_received,
		                 c->assembly_messages - a->messages);
	/* The deadline runs from the start of the oldest message in
	 * assembly (from when one ended, for those left). */
	if (a->messages == 0)
		c->assembly_started_ns = 0;
	else if (c->assembly_started_ns == 0 ||
	         a->messages < c->assembly_messages)
		c->assembly_started_ns = weft__msvc_now_ns(c->ml);
	c->assembly_messages = a->messages;
	if (!c->outbound && c->assembly_started_ns != 0)
		watch(weft__msvc_inbound_of(c));
	if (want <= held) {
		c->assembly_reserved = want;
		if (held > want)
			weft__msvc_inflight_release(c->svc, held - want,
			                            weft__msvc_conn_urgent(c));
		return true;
	}
	/* A message's whole size counts as in flight from its first chunk,
	 * as a frame's does from its first bytes. With nothing in assembly
	 * here, a message waits for room (one is always let in, however
	 * large); one beside another in assembly (a member's) goes in at
	 * once, or the two could wait for each other. */
	before = atomic_fetch_add(budget, want - held);
	if (held == 0 && before != 0 && before + want > limit) {
		if (atomic_fetch_sub(budget, want) == want)
			weft__msvc_drained(c->svc);
		c->assembly_wanted = want;
		return false;
	}
	c->assembly_reserved = want;
	return true;
}

void
weft__msvc_guard_assembly_done(struct weft__msvc_conn *c)
{
	size_t n = c->assembly_reserved;

	c->assembly_reserved = 0;
	c->assembly_wanted = 0;
	c->assembly_started_ns = 0;
	c->assembly_messages = 0;
	if (n != 0)
		weft__msvc_inflight_release(c->svc, n,
		                            weft__msvc_conn_urgent(c));
}

void
weft__msvc_guard_frame_begun(struct weft__msvc_conn *c)
{
	if (c->frame_started_ns != 0)
		return;
	c->frame_started_ns = weft__msvc_now_ns(c->ml);
	if (!c->outbound)
		watch(weft__msvc_inbound_of(c));
}

void
weft__msvc_guard_frame_done(struct weft__msvc_conn *c)
{
	size_t n = c->frame_reserved;

	c->frame_started_ns = 0;
	c->frame_wanted = 0;
	if (n == 0)
		return;
	c->frame_reserved = 0;
	weft__msvc_inflight_release(c->svc, n, weft__msvc_conn_urgent(c));
}

/* ---- Clients that do not read ---------------------------------------------
 */

bool
weft__msvc_guard_backlogged(struct weft__msvc_conn *c)
{
	struct weft__msvc_inbound *in = weft__msvc_inbound_of(c);
	weft_msvc_peer *peer = c->peer;

	if (in == NULL || !in->counted_client || c->blocked ||
	    atomic_load_explicit(&peer->queued_bytes, memory_order_relaxed) <=
	        c->svc->cfg->limits.client_pause_bytes)
		return c->blocked;
	c->blocked = true;
	in->blocked_since_ns = weft__msvc_now_ns(c->ml);
	weft__msvc_count(&c->svc->st.client_pauses, 1);
	weft_channel_set_auto_read(c->ch, false);
	watch(in);
	return true;
}

void
weft__msvc_guard_drained(struct weft__msvc_conn *c)
{
	if (!c->blocked || c->ch == NULL ||
	    atomic_load_explicit(&c->peer->queued_bytes, memory_order_relaxed) >
	        c->svc->cfg->limits.client_pause_bytes / 2)
		return;
	c->blocked = false;
	if (!c->paused) {
		weft_channel_set_auto_read(c->ch, true);
	}
}

void
weft__msvc_guard_active(struct weft__msvc_conn *c)
{
	struct weft__msvc_inbound *in = weft__msvc_inbound_of(c);

	if (in != NULL)
		in->last_active_ns = weft__msvc_now_ns(c->ml);
}

void
weft__msvc_inflight_release(weft_msvc *svc, size_t n, bool urgent)
{
	uint64_t limit = urgent ? weft__msvc_urgent_limit(svc)
	                        : svc->cfg->limits.inbound_inflight_bytes;
	uint64_t left;
	uint32_t i;

	left = atomic_fetch_sub(urgent ? &svc->urgent_inflight : &svc->inflight,
	                        n) -
	       n;
	if (left == 0)
		weft__msvc_drained(svc);
	if (left >= limit || atomic_load(&svc->paused_conns) == 0)
		return;
	for (i = 0; i < svc->nloops; i++) {
		struct weft__msvc_loop *ml = &svc->loops[i];

		if (atomic_exchange(&ml->resume_posted, true))
			continue;
		if (weft_loop_post_task(ml->loop, &ml->resume_task) != 0)
			atomic_store(&ml->resume_posted, false);
	}
}
