/* SPDX-License-Identifier: MIT */
/*
 * proxy.c: the fault layer. For each way an endpoint dials a node, a
 * server on 127.0.0.1 port 0 accepts the dialer's connection, dials the
 * node and forwards bytes both ways, each read's worth as one chunk that
 * may wait (delay), stop (stall, or hold for the connections a hold
 * found open) or change (corrupt) on its way, by the faults of its
 * direction. A connection whose bytes a fault changed, or
 * that a drop closed, is reported as a break when it closes (on_break).
 * Everything runs on the simulation's proxy loop, through weft's public
 * transport and channel API only.
 *
 * Back-pressure: a direction holds at most QUEUE_MAX bytes; past that it
 * stops reading its source until half of them have gone, and it writes
 * its destination only while that channel is writable. A stalled sender's
 * peer therefore sees what a peer that stopped reading looks like.
 */
#include <stdio.h>
#include <stdlib.h>

#include <event2/buffer.h>

#include "sim_int.h"

#define QUEUE_MAX (1u << 20)
#define CONNECT_TIMEOUT_MS 1000
#define NS_PER_MS 1000000ull

struct chunk {
	TAILQ_ENTRY(chunk) link;
	uint64_t release_ns;
	struct evbuffer *buf;
};
TAILQ_HEAD(chunkq, chunk);

struct pconn;

/* One side of a proxied connection: 0 the dialer's, 1 the node's. */
struct pside {
	struct pconn *pc;
	int index;
	weft_channel *ch; /* NULL once gone */
	bool reading;     /* false: paused for back-pressure */
};

/* Bytes read on side d, on their way to side 1 - d. */
struct pdir {
	struct chunkq chunks;
	size_t queued;
	uint64_t last_release_ns;
	weft_timer *timer;
	bool eof; /* the source ended: close the destination when empty */
};

struct pconn {
	weft_sim *sim;
	uint32_t end[2]; /* endpoints: end[0] dialed end[1] */
	struct pside side[2];
	struct pdir dir[2];
	uint64_t rng;
	uint64_t number; /* made after number - 1 others (a hold's mark) */
	int refs;        /* sides attached, plus the pending connect */
	/* A fault damaged it (bytes flipped) or is closing it (a drop):
	 * its close is reported as a break, once. */
	bool damaged, broken;
	LIST_ENTRY(pconn) link;
};

struct weft__sim_proxy {
	LIST_HEAD(, pconn) conns;
	uint64_t rng;
	weft_task kick;
	atomic_bool kick_posted;
};

static void pump(struct pconn *pc, int d);

/* ---- Connections ------------------------------------------------------ */

static void
dir_clear(struct pdir *dir)
{
	struct chunk *c;

	while ((c = TAILQ_FIRST(&dir->chunks)) != NULL) {
		TAILQ_REMOVE(&dir->chunks, c, link);
		evbuffer_free(c->buf);
		free(c);
	}
	dir->queued = 0;
}

static void
pconn_unref(struct pconn *pc)
{
	int d;

	if (--pc->refs > 0)
		return;
	LIST_REMOVE(pc, link);
	for (d = 0; d < 2; d++) {
		dir_clear(&pc->dir[d]);
		if (pc->dir[d].timer != NULL)
			weft_timer_free(pc->dir[d].timer);
	}
	free(pc);
}

static void
pconn_close(struct pconn *pc)
{
	int i;

	for (i = 0; i < 2; i++) {
		dir_clear(&pc->dir[i]);
		if (pc->side[i].ch != NULL)
			weft_channel_close(pc->side[i].ch);
	}
}

/* ---- Forwarding ------------------------------------------------------- */

/* The faults of direction d: bytes from end[d] to end[1 - d]. A hold
 * that started after pc was made stalls it. */
static void
dir_link(struct pconn *pc, int d, struct weft__sim_link *l)
{
	weft__sim_link_get(pc->sim, pc->end[d], pc->end[1 - d], l);
	if (pc->number < l->held_below)
		l->stalled = true;
}

static void
corrupt(struct pconn *pc, struct evbuffer *buf, uint32_t ppm)
{
	size_t len = evbuffer_get_length(buf), flips, i;
	uint64_t expect = (uint64_t)len * ppm;
	unsigned char *p;

	flips = (size_t)(expect / 1000000u);
	if (weft__sim_rand(&pc->rng) % 1000000u < expect % 1000000u)
		flips++;
	if (flips == 0 || (p = evbuffer_pullup(buf, -1)) == NULL)
		return;
	pc->damaged = true;
	for (i = 0; i < flips; i++)
		p[weft__sim_rand(&pc->rng) % len] ^=
		    (unsigned char)(1u << (weft__sim_rand(&pc->rng) % 8));
}

static void
set_reading(struct pside *s, bool on)
{
	if (s->ch == NULL || s->reading == on)
		return;
	s->reading = on;
	weft_channel_set_auto_read(s->ch, on);
}

/* Moves what is due from direction d's queue to its destination. */
static void
pump(struct pconn *pc, int d)
{
	struct pdir *dir = &pc->dir[d];
	struct pside *dst = &pc->side[1 - d], *src = &pc->side[d];
	uint64_t now = weft_now_ns();
	struct weft__sim_link l;
	struct chunk *c;

	dir_link(pc, d, &l);
	while (!l.stalled && dst->ch != NULL &&
	       (c = TAILQ_FIRST(&dir->chunks)) != NULL &&
	       c->release_ns <= now && weft_channel_is_writable(dst->ch)) {
		TAILQ_REMOVE(&dir->chunks, c, link);
		dir->queued -= evbuffer_get_length(c->buf);
		weft_channel_write(dst->ch, c->buf, NULL, NULL);
		evbuffer_free(c->buf);
		free(c);
	}
	if (dir->queued <= QUEUE_MAX / 2)
		set_reading(src, true);
	c = TAILQ_FIRST(&dir->chunks);
	if (c == NULL && dir->eof && dst->ch != NULL)
		weft_channel_close(dst->ch);
	else if (c != NULL && !l.stalled && c->release_ns > now)
		weft_timer_start(
		    dir->timer,
		    (c->release_ns - now + NS_PER_MS - 1) / NS_PER_MS, 0);
}

static void
on_due(weft_timer *t, void *arg)
{
	struct pside *s = arg; /* the source side of the direction */

	(void)t;
	pump(s->pc, s->index);
}

static void
h_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct pside *s = weft_ctx_state(ctx);
	struct pconn *pc = s->pc;
	struct pdir *dir = &pc->dir[s->index];
	struct weft__sim_link l;
	struct chunk *c;
	uint64_t release;

	if (type != &weft_msg_evbuffer) {
		weft_msg_free(type, msg);
		return;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL ||
	    (c->buf = evbuffer_new()) == NULL) {
		free(c);
		pconn_close(pc);
		return;
	}
	evbuffer_add_buffer(c->buf, msg);
	dir_link(pc, s->index, &l);
	if (l.corrupt_ppm > 0)
		corrupt(pc, c->buf, l.corrupt_ppm);
	/* Each connection keeps its order; connections overtake each
	 * other. */
	release = weft_now_ns() +
	          weft__sim_between(&pc->rng, l.delay_min_ms, l.delay_max_ms) *
	              NS_PER_MS;
	if (release < dir->last_release_ns)
		release = dir->last_release_ns;
	c->release_ns = dir->last_release_ns = release;
	dir->queued += evbuffer_get_length(c->buf);
	TAILQ_INSERT_TAIL(&dir->chunks, c, link);
	if (dir->queued > QUEUE_MAX)
		set_reading(s, false);
	pump(pc, s->index);
}

static void
h_writability_changed(weft_ctx *ctx, bool writable)
{
	struct pside *s = weft_ctx_state(ctx);

	if (writable)
		pump(s->pc, 1 - s->index);
}

/* A connection a fault damaged or dropped has closed: reported once. */
static void
report_break(struct pconn *pc)
{
	weft_sim *sim = pc->sim;

	if (!pc->damaged || pc->broken)
		return;
	pc->broken = true;
	if (sim->opts.on_break != NULL)
		sim->opts.on_break(sim, pc->end[0], pc->end[1], sim->opts.arg);
}

/* One side went away: what it sent still goes on, then the other side
 * closes too; what was on its way to it is dropped. */
static void
h_inactive(weft_ctx *ctx)
{
	struct pside *s = weft_ctx_state(ctx);
	struct pconn *pc = s->pc;

	report_break(pc);
	s->ch = NULL;
	dir_clear(&pc->dir[1 - s->index]);
	pc->dir[s->index].eof = true;
	pump(pc, s->index);
}

static void
h_removed(weft_ctx *ctx)
{
	struct pside *s = weft_ctx_state(ctx);

	s->ch = NULL;
	pconn_unref(s->pc);
}

static const weft_handler proxy_handler = {
    .read = h_read,
    .writability_changed = h_writability_changed,
    .inactive = h_inactive,
    .removed = h_removed,
};

static int
attach(struct pconn *pc, int i, weft_channel *ch)
{
	struct pside *s = &pc->side[i];
	int rv;

	if ((rv = weft_pipeline_add_last(ch, "sim.proxy", &proxy_handler, s)) !=
	    0)
		return rv;
	s->ch = ch;
	s->reading = true;
	pc->refs++;
	return 0;
}

/* ---- Dialing the node ------------------------------------------------- */

static int
node_side_init(weft_channel *ch, void *arg)
{
	return attach(arg, 1, ch);
}

static void
on_node_connected(weft_channel *ch, int status, void *arg)
{
	struct pconn *pc = arg;

	(void)ch;
	if (status != 0 && pc->side[0].ch != NULL)
		weft_channel_close(pc->side[0].ch);
	else if (status == 0)
		pump(pc, 0); /* what the dialer sent meanwhile */
	pconn_unref(pc);
}

static struct pconn *
pconn_new(struct weft__sim_route *r)
{
	struct weft__sim_proxy *px = r->sim->proxy;
	struct pconn *pc = calloc(1, sizeof(*pc));
	int d;

	if (pc == NULL)
		return NULL;
	pc->sim = r->sim;
	pc->end[0] = r->a;
	pc->end[1] = r->b;
	pc->rng = weft__sim_rand(&px->rng);
	pc->number = atomic_fetch_add(&r->sim->connections, 1) + 1;
	for (d = 0; d < 2; d++) {
		pc->side[d].pc = pc;
		pc->side[d].index = d;
		TAILQ_INIT(&pc->dir[d].chunks);
		if (weft_timer_new(r->sim->loop, on_due, &pc->side[d],
		                   &pc->dir[d].timer) != 0) {
			pc->refs = 1;
			LIST_INSERT_HEAD(&px->conns, pc, link);
			pconn_unref(pc);
			return NULL;
		}
	}
	LIST_INSERT_HEAD(&px->conns, pc, link);
	return pc;
}

/* A dialer's connection: the proxy dials the node for it. */
static int
dialer_side_init(weft_channel *ch, void *arg)
{
	struct weft__sim_route *r = arg;
	weft_connect_opts o = {.timeout_ms = CONNECT_TIMEOUT_MS};
	uint16_t port = atomic_load(&r->sim->ep[r->b].port);
	char addr[64];
	struct pconn *pc;
	int rv;

	if (port == 0)
		return WEFT_ECONNREFUSED; /* the node is down */
	if ((pc = pconn_new(r)) == NULL)
		return WEFT_ENOMEM;
	if ((rv = attach(pc, 0, ch)) != 0) {
		pc->refs = 1;
		pconn_unref(pc);
		return rv;
	}
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", (unsigned)port);
	o.init = node_side_init;
	o.init_arg = pc;
	pc->refs++; /* the connect */
	if (weft_connect(r->sim->loop, addr, &o, on_node_connected, pc) != 0)
		pc->refs--;
	return 0;
}

/* ---- The proxies' state ------------------------------------------------- */

static void
kick_task(weft_loop *loop, int status, void *arg)
{
	weft_sim *sim = arg;
	struct pconn *pc, *next;

	(void)loop;
	atomic_store(&sim->proxy->kick_posted, false);
	if (status != 0)
		return;
	for (pc = LIST_FIRST(&sim->proxy->conns); pc != NULL; pc = next) {
		next = LIST_NEXT(pc, link);
		pc->refs++;
		pump(pc, 0);
		pump(pc, 1);
		pconn_unref(pc);
	}
}

int
weft__sim_proxy_new(weft_sim *sim)
{
	struct weft__sim_proxy *px = calloc(1, sizeof(*px));

	if (px == NULL)
		return WEFT_ENOMEM;
	LIST_INIT(&px->conns);
	px->rng = sim->seed ^ 0x70726f7879ull; /* "proxy" */
	px->kick.cb = kick_task;
	px->kick.arg = sim;
	sim->proxy = px;
	return 0;
}

void
weft__sim_proxy_kick(weft_sim *sim)
{
	if (atomic_exchange(&sim->proxy->kick_posted, true))
		return;
	if (weft_loop_post_task(sim->loop, &sim->proxy->kick) != 0)
		atomic_store(&sim->proxy->kick_posted, false);
}

struct drop {
	weft_sim *sim;
	uint32_t a, b;
};

static void
drop_task(weft_loop *loop, int status, void *arg)
{
	struct drop *d = arg;
	struct pconn *pc, *next;

	(void)loop;
	for (pc = LIST_FIRST(&d->sim->proxy->conns); status == 0 && pc != NULL;
	     pc = next) {
		next = LIST_NEXT(pc, link);
		if ((pc->end[0] == d->a && pc->end[1] == d->b) ||
		    (pc->end[0] == d->b && pc->end[1] == d->a)) {
			pc->damaged = true;
			pconn_close(pc);
		}
	}
	free(d);
}

int
weft__sim_proxy_drop(weft_sim *sim, uint32_t a, uint32_t b)
{
	struct drop *d = malloc(sizeof(*d));

	if (d == NULL)
		return WEFT_ENOMEM;
	*d = (struct drop){sim, a, b};
	if (weft_loop_post(sim->loop, drop_task, d) != 0) {
		free(d);
		return WEFT_ESHUTDOWN;
	}
	return 0;
}

static void
close_all_task(weft_loop *loop, int status, void *arg)
{
	weft_sim *sim = arg;
	struct pconn *pc;

	(void)loop;
	(void)status;
	LIST_FOREACH(pc, &sim->proxy->conns, link)
	pconn_close(pc);
}

void
weft__sim_proxy_close_all(weft_sim *sim)
{
	if (sim->proxy != NULL)
		weft_loop_post(sim->loop, close_all_task, sim);
}

int
weft__sim_route_open(weft_sim *sim, uint32_t a, uint32_t b)
{
	struct weft__sim_route *r = &sim->routes[a][b];
	weft_server_opts o = {.address = "127.0.0.1:0"};
	int rv;

	r->sim = sim;
	r->a = a;
	r->b = b;
	o.init = dialer_side_init;
	o.init_arg = r;
	if ((rv = weft_server_new_on_loop(sim->loop, &o, &r->server)) != 0)
		return rv;
	r->port = weft_server_port(r->server);
	return 0;
}

void
weft__sim_route_close(weft_sim *sim, uint32_t a, uint32_t b)
{
	struct weft__sim_route *r = &sim->routes[a][b];

	if (r->server != NULL)
		weft_server_close(r->server, NULL, NULL);
	r->server = NULL;
}
