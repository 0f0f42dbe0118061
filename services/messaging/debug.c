/* SPDX-License-Identifier: MIT */
/*
 * debug.c: what is in flight, for a person looking at a live node
 * (weft_msvc_snapshot_async and its accessors, weft/messaging.h), and the
 * slow calls' log lines.
 *
 * A snapshot never reads a loop's data from another thread. It posts a
 * task to every loop; each copies the connections and pending slots that
 * loop owns into a part of its own, and the last to finish merges the
 * parts, adds the requests held past their read (queued for a worker, in
 * a worker's handler, detached), which cancellation already keeps in a
 * table under its lock (cancel.c), and hands the snapshot to the caller's
 * callback on its thread. The snapshot counts as an API call under way
 * from the start to the callback's return, so a stop waits for it and
 * the loops' state is never torn down under its tasks. A request of a
 * peer of protocol version 1 is not in that table, so is not listed at
 * its handler.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include <weft/tls.h>

#include "msvc_int.h"

struct conn_entry {
	weft_msvc_conn_info info;
	char peer[WEFT_MSVC_MAX_ID + 1];
	char address[WEFT_ADDRESS_MAX];
};

struct req_entry {
	weft_msvc_req_info info;
	char peer[WEFT_MSVC_MAX_ID + 1];
	char verb_name[WEFT__MSVC_VERB_NAME_MAX];
	uint64_t started_ns; /* this node's requests: for the order */
};

struct weft_msvc_snapshot {
	char node[WEFT_MSVC_MAX_ID + 1];
	uint64_t wall_ms;
	struct conn_entry *conns;
	size_t nconns, conns_cap;
	struct req_entry *reqs;
	size_t nreqs, reqs_cap;
	bool failed; /* out of memory while filling */
};

struct build;

/* One loop's share: its task, and what it copied. */
struct part {
	weft_task task;
	struct build *b;
	struct weft__msvc_loop *ml;
	weft_msvc_snapshot snap;
};

/* A snapshot under way. */
struct build {
	weft_msvc *svc;
	weft_msvc_snapshot_cb cb;
	void *arg;
	_Atomic uint32_t left; /* loops yet to run their task */
	struct part *parts;    /* one per loop */
};

/* ---- Filling ------------------------------------------------------------ */

static struct conn_entry *
conn_add(weft_msvc_snapshot *s)
{
	struct conn_entry *p =
	    WEFT__ARRAY_ROOM(s->conns, s->conns_cap, s->nconns, 16);

	if (p == NULL) {
		s->failed = true;
		return NULL;
	}
	memset(p, 0, sizeof(*p));
	s->nconns++;
	return p;
}

static struct req_entry *
req_add(weft_msvc_snapshot *s)
{
	struct req_entry *p =
	    WEFT__ARRAY_ROOM(s->reqs, s->reqs_cap, s->nreqs, 16);

	if (p == NULL) {
		s->failed = true;
		return NULL;
	}
	memset(p, 0, sizeof(*p));
	s->nreqs++;
	return p;
}

static const char *
state_name(enum weft__msvc_conn_state state)
{
	switch (state) {
	case WEFT__MSVC_CONNECTING:
		return "connecting";
	case WEFT__MSVC_HANDSHAKE:
		return "handshake";
	case WEFT__MSVC_UP:
		return "up";
	default:
		return "closed";
	}
}

/* Copies c; its loop. */
static void
copy_conn(weft_msvc_snapshot *s, struct weft__msvc_conn *c, uint64_t now_ns)
{
	struct conn_entry *e = conn_add(s);
	weft_msvc_conn_info *in;
	weft_channel_stats st;

	if (e == NULL)
		return;
	in = &e->info;
	if (c->peer != NULL)
		snprintf(e->peer, sizeof(e->peer), "%s", c->peer->id);
	snprintf(e->address, sizeof(e->address), "%s", c->peer_addr);
	in->state = state_name(c->state);
	in->cls = c->cls;
	in->index = c->index;
	in->outbound = c->outbound;
	in->client = c->peer != NULL && c->peer->is_client;
	if (c->state == WEFT__MSVC_UP) {
		in->version = c->version;
		in->crc = c->crc;
		in->chunks = c->chunks;
		in->compression = c->compression;
	}
	if (c->ch != NULL) {
		in->tls = weft_tls_is_active(c->ch);
		weft_channel_get_stats(c->ch, &st);
		in->bytes_in = st.bytes_read;
		in->bytes_out = st.bytes_written;
		if (c->opened_ns != 0 && now_ns > c->opened_ns)
			in->age_ms = (now_ns - c->opened_ns) / 1000000u;
	}
}

/* The outbound connections of the members whose home is ml. */
static void
copy_outbound(struct weft__msvc_loop *ml, weft_msvc_snapshot *s,
              uint64_t now_ns)
{
	weft_msvc *svc = ml->svc;
	uint32_t i, n = atomic_load(&svc->npeers), cls, k;
	struct weft__msvc_conn *c;
	weft_msvc_peer *peer;

	for (i = 0; i < n; i++) {
		peer = svc->peers[i];
		if (peer == NULL || peer->home != ml || peer->is_self ||
		    peer->is_client)
			continue;
		for (cls = 0; cls < WEFT_MSVC_CLASSES; cls++) {
			for (k = 0; peer->conns[cls] != NULL &&
			            k < svc->cfg->limits.connections[cls];
			     k++) {
				c = &peer->conns[cls][k].conn;
				if (c->ch != NULL ||
				    c->state == WEFT__MSVC_CONNECTING)
					copy_conn(s, c, now_ns);
			}
		}
	}
}

/* This node's requests waiting in ml's slots (heartbeats aside). */
static void
copy_slots(struct weft__msvc_loop *ml, weft_msvc_snapshot *s, uint64_t now_ns)
{
	struct weft__msvc_slot *slot;
	struct req_entry *e;
	uint32_t i;

	for (i = 0; i < ml->slots_cap; i++) {
		slot = weft__msvc_slot_at(ml, i);
		if (!slot->live || slot->internal || (e = req_add(s)) == NULL)
			continue;
		snprintf(e->peer, sizeof(e->peer), "%s", slot->peer->id);
		weft__msvc_verb_name(ml->svc, slot->verb, e->verb_name,
		                     sizeof(e->verb_name));
		e->info.verb = slot->verb;
		e->info.stage =
		    slot->sent ? WEFT_MSVC_REQ_SENT : WEFT_MSVC_REQ_UNSENT;
		e->info.id = weft__msvc_slot_id(ml, i);
		e->started_ns = slot->start_ns;
		if (now_ns > slot->start_ns)
			e->info.age_ms = (now_ns - slot->start_ns) / 1000000u;
	}
}

static void finish(struct build *b);

/* A part's task, on its loop's thread (or on the poster's, when the loop
 * takes no more tasks: then it copies nothing). */
static void
on_part(weft_loop *loop, int status, void *arg)
{
	struct part *p = arg;
	struct weft__msvc_inbound *in;
	uint64_t now_ns = weft_now_ns();

	if (loop != NULL && status == 0) {
		LIST_FOREACH(in, &p->ml->inbound, link)
		{
			if (in->conn.state != WEFT__MSVC_CLOSED)
				copy_conn(&p->snap, &in->conn, now_ns);
		}
		copy_outbound(p->ml, &p->snap, now_ns);
		copy_slots(p->ml, &p->snap, now_ns);
	}
	if (atomic_fetch_sub(&p->b->left, 1) == 1)
		finish(p->b);
}

/* ---- Merging -------------------------------------------------------------
 */

/* The requests held past their read, from cancellation's table. */
static void
copy_held(weft_msvc *svc, weft_msvc_snapshot *s)
{
	uint64_t now_ms = weft__msvc_clock_now_ms(svc);
	struct req_entry *e;
	weft_msvc_msg *m;
	size_t i;

	pthread_mutex_lock(&svc->cancels.lock);
	for (i = 0; i < WEFT__MSVC_CANCEL_BUCKETS; i++) {
		for (m = svc->cancels.buckets[i]; m != NULL;
		     m = m->tracked_next) {
			if (!(m->flags & WEFT__MSVC_F_REQUEST) ||
			    (e = req_add(s)) == NULL)
				continue;
			snprintf(e->peer, sizeof(e->peer), "%s", m->peer->id);
			weft__msvc_verb_name(svc, m->verb, e->verb_name,
			                     sizeof(e->verb_name));
			e->info.verb = m->verb;
			e->info.inbound = true;
			e->info.stage = atomic_load_explicit(
			    &m->stage, memory_order_relaxed);
			e->info.id = m->id;
			if (m->created_ms != 0 && now_ms > m->created_ms)
				e->info.age_ms = now_ms - m->created_ms;
		}
	}
	pthread_mutex_unlock(&svc->cancels.lock);
}

/* This node's requests first, oldest first; then the held ones, oldest
 * first, a detached copy after the job whose handler made it. */
static int
req_order(const void *pa, const void *pb)
{
	const struct req_entry *a = pa, *b = pb;

	if (a->info.inbound != b->info.inbound)
		return a->info.inbound ? 1 : -1;
	if (!a->info.inbound && a->started_ns != b->started_ns)
		return a->started_ns < b->started_ns ? -1 : 1;
	if (a->info.age_ms != b->info.age_ms)
		return a->info.age_ms > b->info.age_ms ? -1 : 1;
	if (a->info.id != b->info.id)
		return a->info.id < b->info.id ? -1 : 1;
	return a->info.stage - b->info.stage;
}

/*
 * A worker's handler that detached its request leaves two messages of
 * one request in the table until it returns: the job (in the handler)
 * and the copy (detached). They are one request, in the handler yet.
 * Sorted, they are neighbours.
 */
static void
drop_twins(weft_msvc_snapshot *s)
{
	size_t i, out = 0;

	for (i = 0; i < s->nreqs; i++) {
		struct req_entry *e = &s->reqs[i], *prev;

		prev = out > 0 ? &s->reqs[out - 1] : NULL;
		if (prev != NULL && e->info.inbound && prev->info.inbound &&
		    e->info.id == prev->info.id &&
		    e->info.verb == prev->info.verb &&
		    strcmp(e->peer, prev->peer) == 0)
			continue;
		s->reqs[out++] = *e;
	}
	s->nreqs = out;
}

static void
point_strings(weft_msvc_snapshot *s)
{
	size_t i;

	for (i = 0; i < s->nconns; i++) {
		s->conns[i].info.peer = s->conns[i].peer;
		s->conns[i].info.address = s->conns[i].address;
	}
	for (i = 0; i < s->nreqs; i++) {
		s->reqs[i].info.peer = s->reqs[i].peer;
		s->reqs[i].info.verb_name = s->reqs[i].verb_name;
	}
}

/* Moves every part's entries into the first part's snapshot. */
static int
merge(struct build *b, weft_msvc_snapshot **out)
{
	weft_msvc_snapshot *s;
	uint32_t i;
	size_t k;

	if ((s = calloc(1, sizeof(*s))) == NULL)
		return WEFT_ENOMEM;
	*out = s;
	snprintf(s->node, sizeof(s->node), "%s", b->svc->id);
	s->wall_ms = weft__msvc_clock_now_ms(b->svc);
	for (i = 0; i < b->svc->nloops; i++) {
		weft_msvc_snapshot *p = &b->parts[i].snap;

		s->failed = s->failed || p->failed;
		for (k = 0; k < p->nconns; k++) {
			struct conn_entry *e = conn_add(s);

			if (e != NULL)
				*e = p->conns[k];
		}
		for (k = 0; k < p->nreqs; k++) {
			struct req_entry *e = req_add(s);

			if (e != NULL)
				*e = p->reqs[k];
		}
	}
	copy_held(b->svc, s);
	if (s->nreqs > 1) /* reqs is NULL with none */
		qsort(s->reqs, s->nreqs, sizeof(*s->reqs), req_order);
	drop_twins(s);
	point_strings(s);
	return s->failed ? WEFT_ENOMEM : 0;
}

static void
build_free(struct build *b)
{
	uint32_t i;

	for (i = 0; b->parts != NULL && i < b->svc->nloops; i++) {
		free(b->parts[i].snap.conns);
		free(b->parts[i].snap.reqs);
	}
	free(b->parts);
	free(b);
}

/* After the last part: the snapshot goes to the callback, and only then
 * may a stop go on. */
static void
finish(struct build *b)
{
	weft_msvc *svc = b->svc;
	weft_msvc_snapshot *snap = NULL;
	int rv = merge(b, &snap);

	if (rv != 0) {
		weft_msvc_snapshot_free(snap);
		snap = NULL;
	}
	b->cb(svc, rv, snap, b->arg);
	build_free(b);
	weft__msvc_leave(svc);
}

int
weft_msvc_snapshot_async(weft_msvc *svc, weft_msvc_snapshot_cb cb, void *arg)
{
	struct build *b;
	uint32_t i;

	if (svc == NULL || cb == NULL)
		return WEFT_EINVAL;
	if (!atomic_load(&svc->started) || !weft__msvc_enter(svc))
		return WEFT_ESHUTDOWN;
	if ((b = calloc(1, sizeof(*b))) == NULL ||
	    (b->parts = calloc(svc->nloops, sizeof(*b->parts))) == NULL) {
		free(b);
		weft__msvc_leave(svc);
		return WEFT_ENOMEM;
	}
	b->svc = svc;
	b->cb = cb;
	b->arg = arg;
	atomic_store(&b->left, svc->nloops);
	for (i = 0; i < svc->nloops; i++) {
		struct part *p = &b->parts[i];

		p->b = b;
		p->ml = &svc->loops[i];
		p->task = (weft_task){.cb = on_part, .arg = p};
		if (weft_loop_post_task(p->ml->loop, &p->task) != 0)
			on_part(NULL, WEFT_ESHUTDOWN, p);
	}
	return 0;
}

/* ---- Waiting for one ---------------------------------------------------- */

/* A thread waiting for a snapshot; the last of the waiter and the
 * callback frees it (the waiter may give up first). */
struct waiter {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done, abandoned;
	int status;
	weft_msvc_snapshot *snap;
};

static void
waiter_free(struct waiter *w)
{
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

static void
on_taken(weft_msvc *svc, int status, weft_msvc_snapshot *snap, void *arg)
{
	struct waiter *w = arg;
	bool abandoned;

	(void)svc;
	pthread_mutex_lock(&w->lock);
	abandoned = w->abandoned;
	w->done = true;
	w->status = status;
	w->snap = snap;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	if (abandoned) {
		weft_msvc_snapshot_free(snap);
		waiter_free(w);
	}
}

/* Waits for w until the monotonic time at (or for ever); true if done. */
static bool
wait_for(struct waiter *w, uint64_t timeout_ms)
{
	struct timespec at;
	bool bounded =
	    timeout_ms != 0 && weft__msvc_deadline_in(timeout_ms, &at);
	int rc = 0;

	while (!w->done && rc != ETIMEDOUT) {
		if (bounded)
			rc = pthread_cond_timedwait(&w->cond, &w->lock, &at);
		else
			pthread_cond_wait(&w->cond, &w->lock);
	}
	return w->done;
}

int
weft_msvc_snapshot_take(weft_msvc *svc, uint64_t timeout_ms,
                        weft_msvc_snapshot **out)
{
	pthread_condattr_t attr;
	struct waiter *w;
	int rv;

	if (svc == NULL || out == NULL)
		return WEFT_EINVAL;
	*out = NULL;
	if (weft__msvc_on_own_loop(svc))
		return WEFT_EBUSY;
	if ((w = calloc(1, sizeof(*w))) == NULL)
		return WEFT_ENOMEM;
	pthread_mutex_init(&w->lock, NULL);
	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &attr);
	pthread_condattr_destroy(&attr);
	if ((rv = weft_msvc_snapshot_async(svc, on_taken, w)) != 0) {
		waiter_free(w);
		return rv;
	}
	pthread_mutex_lock(&w->lock);
	if (!wait_for(w, timeout_ms)) {
		/* The callback frees w when it comes. */
		w->abandoned = true;
		pthread_mutex_unlock(&w->lock);
		return WEFT_ETIMEDOUT;
	}
	pthread_mutex_unlock(&w->lock);
	rv = w->status;
	*out = w->snap;
	waiter_free(w);
	return rv;
}

/* ---- Reading ------------------------------------------------------------ */

void
weft_msvc_snapshot_free(weft_msvc_snapshot *snap)
{
	if (snap == NULL)
		return;
	free(snap->conns);
	free(snap->reqs);
	free(snap);
}

const char *
weft_msvc_snapshot_node(const weft_msvc_snapshot *snap)
{
	return snap->node;
}

uint64_t
weft_msvc_snapshot_wall_ms(const weft_msvc_snapshot *snap)
{
	return snap->wall_ms;
}

size_t
weft_msvc_snapshot_conn_count(const weft_msvc_snapshot *snap)
{
	return snap->nconns;
}

const weft_msvc_conn_info *
weft_msvc_snapshot_conn_at(const weft_msvc_snapshot *snap, size_t i)
{
	return i < snap->nconns ? &snap->conns[i].info : NULL;
}

size_t
weft_msvc_snapshot_req_count(const weft_msvc_snapshot *snap)
{
	return snap->nreqs;
}

const weft_msvc_req_info *
weft_msvc_snapshot_req_at(const weft_msvc_snapshot *snap, size_t i)
{
	return i < snap->nreqs ? &snap->reqs[i].info : NULL;
}

const char *
weft_msvc_class_name(int cls)
{
	static const char *const names[] = {"urgent", "small", "large"};

	return cls >= 0 && cls < WEFT_MSVC_CLASSES ? names[cls] : "?";
}

const char *
weft_msvc_req_stage_name(int stage)
{
	static const char *const names[] = {"unsent", "sent", "queued",
	                                    "handler", "detached"};

	return stage >= 0 && stage <= WEFT_MSVC_REQ_DETACHED ? names[stage]
	                                                     : "?";
}

/* ---- JSON --------------------------------------------------------------- */

/* Appends s as a JSON string: quote, backslash and control characters
 * escaped, other bytes as they are (ids and names are UTF-8). */
static int
json_string(struct evbuffer *out, const char *s)
{
	int rv = evbuffer_add(out, "\"", 1);

	for (; rv == 0 && *s != '\0'; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			rv = evbuffer_add_printf(out, "\\%c", ch) < 0;
		else if (ch < 0x20 || ch == 0x7f)
			rv = evbuffer_add_printf(out, "\\u%04x", ch) < 0;
		else
			rv = evbuffer_add(out, s, 1);
	}
	return rv == 0 ? evbuffer_add(out, "\"", 1) : -1;
}

static const char *
compression_name(int alg)
{
	switch (alg) {
	case WEFT_COMPRESS_NONE:
		return "none";
	case WEFT_COMPRESS_LZ4:
		return "lz4";
	case WEFT_COMPRESS_ZSTD:
		return "zstd";
	default:
		return "?";
	}
}

#define TF(b) ((b) ? "true" : "false")

static int
json_conn(struct evbuffer *out, const weft_msvc_conn_info *c)
{
	if (evbuffer_add_printf(out, "{\"peer\":") < 0 ||
	    json_string(out, c->peer) != 0 ||
	    evbuffer_add_printf(out, ",\"address\":") < 0 ||
	    json_string(out, c->address) != 0)
		return -1;
	return evbuffer_add_printf(
	           out,
	           ",\"client\":%s,\"class\":\"%s\",\"index\":%" PRIu32
	           ",\"direction\":\"%s\",\"state\":\"%s\",\"tls\":%s,"
	           "\"version\":%" PRIu32 ",\"crc\":%s,\"chunks\":%s,"
	           "\"compression\":\"%s\",\"bytes_in\":%" PRIu64
	           ",\"bytes_out\":%" PRIu64 ",\"age_ms\":%" PRIu64 "}",
	           TF(c->client), weft_msvc_class_name(c->cls), c->index,
	           c->outbound ? "out" : "in", c->state, TF(c->tls), c->version,
	           TF(c->crc), TF(c->chunks), compression_name(c->compression),
	           c->bytes_in, c->bytes_out, c->age_ms) < 0
	           ? -1
	           : 0;
}

static int
json_req(struct evbuffer *out, const weft_msvc_req_info *r)
{
	if (evbuffer_add_printf(out, "{\"direction\":\"%s\",\"peer\":",
	                        r->inbound ? "in" : "out") < 0 ||
	    json_string(out, r->peer) != 0 ||
	    evbuffer_add_printf(
	        out, ",\"verb\":%" PRIu32 ",\"verb_name\":", r->verb) < 0 ||
	    json_string(out, r->verb_name) != 0)
		return -1;
	return evbuffer_add_printf(out,
	                           ",\"stage\":\"%s\",\"age_ms\":%" PRIu64
	                           ",\"id\":\"%016" PRIx64 "\"}",
	                           weft_msvc_req_stage_name(r->stage),
	                           r->age_ms, r->id) < 0
	           ? -1
	           : 0;
}

int
weft_msvc_snapshot_json(const weft_msvc_snapshot *snap, unsigned what,
                        struct evbuffer *out)
{
	size_t i;

	if (evbuffer_add_printf(out, "{\"node\":") < 0 ||
	    json_string(out, snap->node) != 0 ||
	    evbuffer_add_printf(out, ",\"wall_ms\":%" PRIu64, snap->wall_ms) <
	        0)
		return WEFT_ENOMEM;
	if (what & WEFT_MSVC_SNAPSHOT_CONNS) {
		if (evbuffer_add_printf(out, ",\"connections\":[") < 0)
			return WEFT_ENOMEM;
		for (i = 0; i < snap->nconns; i++)
			if ((i > 0 && evbuffer_add(out, ",", 1) != 0) ||
			    json_conn(out, &snap->conns[i].info) != 0)
				return WEFT_ENOMEM;
		if (evbuffer_add(out, "]", 1) != 0)
			return WEFT_ENOMEM;
	}
	if (what & WEFT_MSVC_SNAPSHOT_REQS) {
		if (evbuffer_add_printf(out, ",\"requests\":[") < 0)
			return WEFT_ENOMEM;
		for (i = 0; i < snap->nreqs; i++)
			if ((i > 0 && evbuffer_add(out, ",", 1) != 0) ||
			    json_req(out, &snap->reqs[i].info) != 0)
				return WEFT_ENOMEM;
		if (evbuffer_add(out, "]", 1) != 0)
			return WEFT_ENOMEM;
	}
	return evbuffer_add(out, "}\n", 2) == 0 ? 0 : WEFT_ENOMEM;
}
