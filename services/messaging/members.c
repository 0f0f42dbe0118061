/* SPDX-License-Identifier: MIT */
/*
 * members.c: members added and removed while the service runs.
 *
 * A member's peer is never freed before the service: callers on other
 * threads hold its pointer, and a send may be under way on one of them
 * while another removes the member. A removed member's peer stays in
 * svc->peers, marked LEAVING, then GONE once it has drained; adding its
 * id again brings the same peer back. svc->peers has room for the most
 * members a cluster may have, so it never moves: a new peer is written
 * into its slot, then published by the count (npeers), and readers on
 * any thread see either the old count or the new member whole.
 *
 * Leaving, on the member's home loop: its heartbeats stop, it is
 * reported down (if it was up) and then left; what waits unwritten in its
 * backlogs ends with WEFT_ENOTMEMBER; the requests already written to it
 * have until they are answered, or for at most request_timeout, to end
 * (its connections stay open for their answers), and those still pending
 * then end with WEFT_ENOTMEMBER. Then its connections are closed, ours
 * (which write what they hold before they close) and its own to us (on
 * every loop), and it is GONE.
 */
#include <stdlib.h>
#include <string.h>

#include "msvc_int.h"

/* How often a leaving member's drain is looked at. */
#define DRAIN_TICK_MS 10

/* ---- Finding members (any thread) -------------------------------------- */

/* A slot of svc->peers by id, whatever its state; NULL: none. */
static weft_msvc_peer *
find_any(weft_msvc *svc, const char *id)
{
	uint32_t i, n = atomic_load(&svc->npeers);

	for (i = 0; i < n; i++)
		if (strcmp(svc->peers[i]->id, id) == 0)
			return svc->peers[i];
	return NULL;
}

size_t
weft_msvc_members(weft_msvc *svc, weft_msvc_peer **out, size_t cap)
{
	uint32_t i, n = atomic_load(&svc->npeers);
	size_t found = 0;

	for (i = 0; i < n; i++) {
		if (weft__msvc_peer_left(svc->peers[i]))
			continue;
		if (found < cap)
			out[found] = svc->peers[i];
		found++;
	}
	return found;
}

bool
weft_msvc_peer_is_member(const weft_msvc_peer *peer)
{
	return !peer->is_client && !weft__msvc_peer_left(peer);
}

int
weft_msvc_on_member_event(weft_msvc *svc, weft_msvc_member_cb cb, void *arg)
{
	struct weft__msvc_member_listener *grown;

	if (cb == NULL)
		return WEFT_EINVAL;
	if (atomic_load(&svc->started))
		return WEFT_EBUSY;
	grown = realloc(svc->member_cbs,
	                (svc->member_cb_count + 1) * sizeof(*grown));
	if (grown == NULL)
		return WEFT_ENOMEM;
	grown[svc->member_cb_count++] =
	    (struct weft__msvc_member_listener){cb, arg};
	svc->member_cbs = grown;
	return 0;
}

/* Enters svc for a change of its members: false before it starts and
 * from its stop on (then nothing is entered). */
static bool
enter_running(weft_msvc *svc)
{
	if (!weft__msvc_enter(svc))
		return false;
	if (!atomic_load(&svc->started)) {
		weft__msvc_leave(svc);
		return false;
	}
	return true;
}

static void
tell(weft_msvc_peer *peer, bool joined)
{
	weft_msvc *svc = peer->svc;
	size_t i;

	weft_info("msvc %s: member %s %s", svc->id, peer->id,
	          joined ? "joined" : "left");
	for (i = 0; i < svc->member_cb_count && !atomic_load(&svc->stopped);
	     i++)
		svc->member_cbs[i].cb(svc, peer, joined,
		                      svc->member_cbs[i].arg);
	weft__msvc_sync_notify(svc);
}

/* ---- Joining ----------------------------------------------------------- */

/* Makes member index of svc; *out is set (to be freed) even when this
 * fails. */
int
weft__msvc_member_new(weft_msvc *svc, uint32_t index, const char *id,
                      const char *host, uint16_t port, weft_msvc_peer **out)
{
	weft_msvc_peer *peer;
	uint32_t cls, i, n;
	int rv;

	*out = NULL;
	if ((peer = calloc(1, sizeof(*peer))) == NULL)
		return WEFT_ENOMEM;
	*out = peer;
	if ((rv = weft__msvc_peer_init(svc, peer, id)) != 0)
		return rv;
	peer->index = index;
	peer->is_self = svc->member && index == svc->self_index;
	peer->home = &svc->loops[index % svc->nloops];
	peer->port = port;
	if ((peer->host = strdup(host)) == NULL)
		return WEFT_ENOMEM;
	for (cls = 0; cls < WEFT_MSVC_CLASSES; cls++) {
		n = svc->cfg->limits.connections[cls];
		if ((peer->conns[cls] = calloc(n, sizeof(**peer->conns))) ==
		    NULL)
			return WEFT_ENOMEM;
		for (i = 0; i < n; i++) {
			rv = weft__msvc_conn_init_outbound(
			    peer, (int)cls, i, &peer->conns[cls][i]);
			if (rv != 0)
				return rv;
		}
	}
	return 0;
}

/* On the new member's home loop: it joined, and is watched from now on
 * (heartbeats dial it), so it is reported up as soon as it answers. */
static void
join_task(weft_loop *loop, int status, void *arg)
{
	weft_msvc_peer *peer = arg;

	(void)loop;
	(void)status;
	/* Told whatever happens next: the add returned 0. The task holds
	 * stop at its first stage (it entered), so it runs before stopped
	 * silences events. */
	peer->awaiting_join = false;
	tell(peer, true);
	weft__msvc_peer_touch(peer); /* not once stopping */
	weft__msvc_leave(peer->svc);
}

/* Posts the join; the caller entered, and join_task leaves. */
static int
post_join(weft_msvc_peer *peer)
{
	peer->join_task = (weft_task){.cb = join_task, .arg = peer};
	if (weft_loop_post_task(peer->home->loop, &peer->join_task) != 0)
		return WEFT_ESHUTDOWN;
	return 0;
}

static int
set_addr(weft_msvc_peer *peer, const char *host, uint16_t port)
{
	char *h;

	if ((h = strdup(host)) == NULL)
		return WEFT_ENOMEM;
	pthread_mutex_lock(&peer->addr_lock);
	free(peer->host);
	peer->host = h;
	peer->port = port;
	pthread_mutex_unlock(&peer->addr_lock);
	return 0;
}

/* A member that left and drained comes back: same peer, new address. */
static int
rejoin(weft_msvc_peer *peer, const char *host, uint16_t port)
{
	int rv;

	if ((rv = set_addr(peer, host, port)) != 0)
		return rv;
	atomic_store(&peer->down, false);
	atomic_store(&peer->watch_requested, false);
	/* The join is posted before the state says member: whatever a
	 * sender hands the home loop after it sees the member comes after
	 * the joined event. */
	if ((rv = post_join(peer)) != 0)
		return rv;
	atomic_store(&peer->member_state, WEFT__MSVC_MEMBER_ACTIVE);
	return 0;
}

static int
join_new(weft_msvc *svc, const char *id, const char *host, uint16_t port)
{
	uint32_t n = atomic_load(&svc->npeers);
	weft_msvc_peer *peer;
	int rv;

	if (n >= WEFT__MSVC_MAX_NODES)
		return WEFT_EOVERLOAD;
	if ((rv = weft__msvc_member_new(svc, n, id, host, port, &peer)) != 0) {
		weft__msvc_peer_free(peer);
		return rv;
	}
	peer->awaiting_join = true;
	if ((rv = post_join(peer)) != 0) {
		weft__msvc_peer_free(peer);
		return rv;
	}
	/* Published after the join is posted (see rejoin). */
	svc->peers[n] = peer;
	atomic_store(&svc->npeers, n + 1);
	return 0;
}

int
weft_msvc_member_add(weft_msvc *svc, const char *id, const char *host,
                     uint16_t port)
{
	weft_msvc_peer *peer;
	int rv;

	if (svc == NULL || id == NULL || !weft__msvc_id_is_valid(id) ||
	    host == NULL || host[0] == '\0' || port == 0 ||
	    strcmp(id, svc->id) == 0)
		return WEFT_EINVAL;
	if (!enter_running(svc))
		return WEFT_ESHUTDOWN;
	pthread_mutex_lock(&svc->members_lock);
	if ((peer = find_any(svc, id)) == NULL)
		rv = join_new(svc, id, host, port);
	else if (!weft__msvc_peer_left(peer))
		rv = WEFT_EEXIST;
	else if (atomic_load(&peer->member_state) == WEFT__MSVC_MEMBER_LEAVING)
		rv = WEFT_EBUSY;
	else
		rv = rejoin(peer, host, port);
	pthread_mutex_unlock(&svc->members_lock);
	/* On success join_task leaves, once the member joined. */
	if (rv != 0)
		weft__msvc_leave(svc);
	return rv;
}

/* ---- Leaving (the member's home loop) ---------------------------------- */

static void
for_each_conn(weft_msvc_peer *peer, void (*fn)(struct weft__msvc_outbound *o))
{
	uint32_t cls, i;

	for (cls = 0; cls < WEFT_MSVC_CLASSES; cls++)
		for (i = 0; i < peer->svc->cfg->limits.connections[cls]; i++)
			fn(&peer->conns[cls][i]);
}

static void
fail_backlog(struct weft__msvc_outbound *o)
{
	weft__msvc_conn_fail_backlog(&o->conn, WEFT_ENOTMEMBER);
}

/* A connection not yet up is of no use to the drain: it goes now. */
static void
close_unless_up(struct weft__msvc_outbound *o)
{
	if (o->conn.state == WEFT__MSVC_BACKOFF) {
		weft_timer_stop(o->backoff);
		o->conn.state = WEFT__MSVC_IDLE;
	} else if (o->conn.state != WEFT__MSVC_UP) {
		weft__msvc_conn_close(&o->conn, "member removed");
	}
}

static void
close_conn(struct weft__msvc_outbound *o)
{
	if (o->conn.state == WEFT__MSVC_UP)
		weft__msvc_conn_close(&o->conn, "member removed");
	else
		close_unless_up(o);
}

static bool
conn_is_closed(const struct weft__msvc_outbound *o)
{
	return o->conn.ch == NULL && o->connecting == NULL &&
	       (o->conn.state == WEFT__MSVC_IDLE ||
	        o->conn.state == WEFT__MSVC_BACKOFF);
}

static bool
conns_closed(weft_msvc_peer *peer)
{
	uint32_t cls, i;

	for (cls = 0; cls < WEFT_MSVC_CLASSES; cls++)
		for (i = 0; i < peer->svc->cfg->limits.connections[cls]; i++)
			if (!conn_is_closed(&peer->conns[cls][i]))
				return false;
	return true;
}

/* Ends the requests to peer still pending on its home loop. */
static void
fail_pending(weft_msvc_peer *peer)
{
	struct weft__msvc_loop *ml = peer->home;
	struct weft__msvc_slot *s;
	uint32_t i;

	for (i = 0; i < ml->slots_cap; i++) {
		s = weft__msvc_slot_at(ml, i);
		if (s->live && s->peer == peer)
			weft__msvc_slot_complete(ml, i, WEFT_ENOTMEMBER, NULL,
			                         0);
	}
}

/* On each loop: the member's connections to us close. */
static void
close_inbound_task(weft_loop *loop, int status, void *arg)
{
	struct weft__msvc_close_task *ct = arg;
	weft_msvc_peer *peer = ct->peer;
	struct weft__msvc_inbound *in;

	(void)loop;
	(void)status;
	LIST_FOREACH(in, &ct->ml->inbound, link)
	{
		if (in->conn.peer == peer)
			weft__msvc_conn_close(&in->conn, "member removed");
	}
	atomic_fetch_sub(&peer->close_left, 1);
}

/* The drain is over: everything of the member's closes. */
static void
close_all(weft_msvc_peer *peer)
{
	weft_msvc *svc = peer->svc;
	struct weft__msvc_close_task *ct;
	uint32_t i;

	fail_pending(peer);
	for_each_conn(peer, fail_backlog);
	for_each_conn(peer, close_conn);
	atomic_store(&peer->close_left, svc->nloops);
	for (i = 0; i < svc->nloops; i++) {
		ct = &peer->close_tasks[i];
		ct->peer = peer;
		ct->ml = &svc->loops[i];
		ct->task = (weft_task){.cb = close_inbound_task, .arg = ct};
		if (weft_loop_post_task(ct->ml->loop, &ct->task) != 0)
			close_inbound_task(NULL, 0, ct);
	}
}

/* Home-loop state back as it was before the member's first use, for a
 * join of the same id. */
static void
reset_home_state(weft_msvc_peer *peer)
{
	peer->used = false;
	peer->hb_sent = false;
	peer->hb_acked = false;
	peer->hb_misses = 0;
	peer->awaiting_join = true;
	peer->drain_closing = false;
}

static void
drain_tick(weft_timer *t, void *arg)
{
	weft_msvc_peer *peer = arg;

	(void)t;
	if (atomic_load(&peer->svc->stopping))
		return;
	if (!peer->drain_closing) {
		if (weft__msvc_relaxed(&peer->st.pending) != 0 &&
		    weft_now_ns() < peer->drain_deadline_ns)
			return;
		close_all(peer);
		peer->drain_closing = true;
	}
	if (atomic_load(&peer->close_left) != 0 || !conns_closed(peer))
		return;
	weft_timer_stop(peer->drain_timer);
	reset_home_state(peer);
	weft_info("msvc %s: member %s drained and closed", peer->svc->id,
	          peer->id);
	atomic_store(&peer->member_state, WEFT__MSVC_MEMBER_GONE);
	weft__msvc_sync_notify(peer->svc);
}

static void
leave_task(weft_loop *loop, int status, void *arg)
{
	weft_msvc_peer *peer = arg;
	weft_msvc *svc = peer->svc;
	uint64_t ms = svc->cfg->limits.request_timeout_ms;

	(void)loop;
	(void)status;
	if (peer->hb_timer != NULL)
		weft_timer_stop(peer->hb_timer);
	weft__msvc_peer_set_up(peer, false); /* and known down */
	tell(peer, false);
	/* A stopping service closes everything itself. */
	if (atomic_load(&svc->stopping))
		goto out;
	for_each_conn(peer, fail_backlog);
	for_each_conn(peer, close_unless_up);
	peer->drain_deadline_ns = weft_now_ns() + ms * 1000000;
	if (peer->drain_timer == NULL &&
	    weft_timer_new(peer->home->loop, drain_tick, peer,
	                   &peer->drain_timer) != 0) {
		/* Without a timer, no drain: everything ends now. */
		peer->drain_deadline_ns = 0;
		drain_tick(NULL, peer);
		goto out;
	}
	weft_timer_start(peer->drain_timer, DRAIN_TICK_MS, DRAIN_TICK_MS);
out:
	weft__msvc_leave(svc);
}

int
weft_msvc_member_remove(weft_msvc *svc, const char *id)
{
	weft_msvc_peer *peer;
	ssize_t i;
	int rv = 0;

	if (svc == NULL || id == NULL)
		return WEFT_EINVAL;
	if (!enter_running(svc))
		return WEFT_ESHUTDOWN;
	pthread_mutex_lock(&svc->members_lock);
	if ((i = weft__msvc_member_index(svc, id)) < 0) {
		rv = WEFT_ENOTFOUND;
	} else if ((peer = svc->peers[i])->is_self) {
		rv = WEFT_EINVAL;
	} else if (peer->close_tasks == NULL &&
	           (peer->close_tasks = calloc(
	                svc->nloops, sizeof(*peer->close_tasks))) == NULL) {
		rv = WEFT_ENOMEM;
	} else {
		/* From here on nothing new is sent to it (prepare, and
		 * emit for what was on its way). */
		atomic_store(&peer->member_state, WEFT__MSVC_MEMBER_LEAVING);
		peer->leave_task = (weft_task){.cb = leave_task, .arg = peer};
		if (weft_loop_post_task(peer->home->loop, &peer->leave_task) !=
		    0)
			rv = WEFT_ESHUTDOWN; /* torn down: nothing to drain */
	}
	pthread_mutex_unlock(&svc->members_lock);
	/* On success leave_task leaves. */
	if (rv != 0)
		weft__msvc_leave(svc);
	return rv;
}

/* ---- Stopping ---------------------------------------------------------- */

void
weft__msvc_member_stop(weft_msvc_peer *peer)
{
	if (peer->drain_timer != NULL)
		weft_timer_stop(peer->drain_timer);
}

void
weft__msvc_member_free_timers(weft_msvc_peer *peer)
{
	if (peer->drain_timer != NULL)
		weft_timer_free(peer->drain_timer);
	peer->drain_timer = NULL;
}
