/* SPDX-License-Identifier: MIT */
/*
 * test_burn.c: the message-ledger burn test, on the cluster simulator.
 *
 * Three nodes and a client exchange randomized traffic (payloads from 0
 * bytes to several MiB, so both message classes and two connections per
 * class; one-way messages and requests; inline and blocking handlers;
 * deadlines short and long) while random faults fire from the seed
 * (delays that reorder connections, stalls, holds that release a
 * connection's bytes after its sender redialed, corruption, dropped
 * connections, paused nodes, restarts with other limits). Every message
 * has one ledger entry, and must end in exactly one terminal state:
 *
 *   request   exactly one callback, no later than its timeout + 100 ms
 *             (plus any time its sender was paused): responded (with its
 *             own payload back), expired, overloaded, or failed with a
 *             reason (peer down, shut down, ...);
 *   one-way   delivered at most once; not delivered only if it expired or
 *             a fault broke its path (a connection dropped, or closed on
 *             bytes a fault corrupted; a restart; a peer marked down)
 *             after it was sent;
 *   both      never delivered after its deadline + 100 ms; one-way
 *             messages to the inline sink with one ordering key arrive in
 *             the order they were sent: from a member, always, across
 *             reconnections too (what an older connection brings after a
 *             newer one was accepted is dropped); from the client, unless
 *             a fault broke their path in between (a message written on a
 *             connection it then gave up may arrive after later ones,
 *             sent on the next).
 *
 * The run is split in rounds, each on a fresh simulation whose seed is
 * the run's seed plus the round number; WEFT_BURN_SECONDS (default 6)
 * sets how long, WEFT_SIM_SEED=0x... replays a run. A failure prints the
 * seed. `make soak SOAK_SECONDS=N` runs it for N seconds.
 */
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include <weft/compress.h>
#include <weft/crc32c.h>
#include <weft/sim.h>

#define NODES 3
#define ENDPOINTS (NODES + 1)          /* and one client */
#define SENDERS 2                      /* traffic threads */
#define ROUND_MS 8000                  /* traffic per round, at most */
#define ENTRIES (1u << 18)             /* ledger entries per round, at most */
#define MAX_OUTSTANDING 48             /* per sender thread */
#define MAX_INFLIGHT_BYTES (16u << 20) /* all senders */
#define RATE 1000 /* messages a second per sender thread, at most */
/*
 * How late an end may come past its deadline: 100 ms. A sanitizer slows
 * every loop several times over (TSan most), so its builds check the same
 * ends with a wider slack; WEFT_BURN_SLACK_MS sets it outright.
 */
#if defined(__SANITIZE_THREAD__)
#define SLACK_MS 2000
#elif defined(__SANITIZE_ADDRESS__)
#define SLACK_MS 1000
#else
#define SLACK_MS 100
#endif
#define DRAIN_MS 8000 /* after the traffic: every callback by then */
#define HEADER 24     /* idx, round, seq, key: what a payload starts with */
#define KEYS 3
/*
 * Ordered streams: per sending thread, sender, receiver, size and key.
 * The sizes are three: sent whole (up to the chunk size), sent as chunks
 * in the small class, and the large class (all of it chunks). Smaller
 * messages go out between another's chunks, so a message sent whole may
 * pass one sent as chunks before it (RELIABILITY.md 2): each keeps its
 * order among its own. A body is its payload and an envelope of some tens
 * of bytes, so payloads within BAND of the chunk size may go either way,
 * and their order is not checked.
 */
#define CHUNK_BYTES (32u << 10)
#define BAND 256
#define SIZES 3
#define STREAMS (SENDERS * ENDPOINTS * NODES * SIZES * KEYS)
#define UNORDERED UINT32_MAX
#define MAX_FAILURES 16

enum verb {
	VERB_ECHO = 16,
	VERB_ECHO_BLOCKING = 17,
	VERB_SINK = 18,
	VERB_SINK_BLOCKING = 19,
};

enum state {
	ST_PENDING,
	ST_DELIVERED, /* one-way */
	ST_RESPONDED,
	ST_EXPIRED,
	ST_OVERLOADED,
	ST_FAILED,
	ST_LOST_IN_FAULT, /* one-way whose path a fault broke */
	ST_STATES
};

static const char *const state_names[ST_STATES] = {
    "pending",    "delivered", "responded",      "expired",
    "overloaded", "failed",    "lost in a fault"};

/* One message. Atomic fields: the handler and the callback run on other
 * threads, ordered with the sender only through sockets. */
struct entry {
	_Atomic uint8_t state;
	_Atomic uint8_t deliveries;
	_Atomic uint8_t callbacks;
	_Atomic uint8_t request;
	_Atomic uint8_t from, to;
	_Atomic uint32_t len;
	_Atomic uint32_t crc;
	_Atomic uint64_t sent_ns;
	_Atomic uint64_t timeout_ms; /* request */
	_Atomic uint64_t expires_ms; /* one-way, wall clock; 0: none */
	_Atomic uint64_t gen;        /* its path's fault count at sending */
	_Atomic uint64_t paused_ns;  /* its sender's pauses, at sending */
	_Atomic int status;
};

struct burn;

struct sender {
	struct burn *b;
	uint32_t index;
	pthread_t thread;
	uint64_t rng;
	_Atomic int outstanding;
	uint32_t seq[STREAMS];
	uint64_t messages, bytes;
};

/* What one round keeps. */
struct burn {
	weft_sim *sim;
	uint64_t seed;
	uint32_t round;
	uint64_t round_ms;
	uint64_t slack_ms;
	_Atomic uint64_t worst_late_ms; /* most past a deadline, any end */
	weft_msvc *client;              /* endpoint NODES */
	struct entry *ledger;
	_Atomic uint32_t used;
	_Atomic bool stop;
	_Atomic uint64_t inflight_bytes;
	struct sender senders[SENDERS];
	/* A fault count per ordered pair of endpoints: a message is excused
	 * for being lost when its path's count moved. */
	_Atomic uint64_t gen[ENDPOINTS][ENDPOINTS];
	/* Pauses per endpoint: since when (0: not paused) and in all. */
	_Atomic uint64_t paused_since[ENDPOINTS];
	_Atomic uint64_t paused_total_ns[ENDPOINTS];
	/* The last sequence number seen per ordered stream (inline sink). */
	_Atomic uint32_t last_seq[STREAMS];
	_Atomic uint64_t reordered_in_fault; /* the client's, after a fault */
	_Atomic uint64_t reordered_members;  /* members': each a failure */
	_Atomic uint64_t faults[WEFT_SIM_FAULT_KINDS];
	/* Failures: the first few, to print. */
	pthread_mutex_t lock;
	char failures[MAX_FAILURES][200];
	_Atomic int nfailures;
};

static void burn_fail(struct burn *b, const char *fmt, ...) WEFT_PRINTF(2, 3);

static void
burn_fail(struct burn *b, const char *fmt, ...)
{
	va_list ap;
	int i;

	pthread_mutex_lock(&b->lock);
	i = atomic_fetch_add(&b->nfailures, 1);
	if (i < MAX_FAILURES) {
		va_start(ap, fmt);
		vsnprintf(b->failures[i], sizeof(b->failures[i]), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&b->lock);
}

static uint64_t
rnd(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t
between(uint64_t *s, uint64_t lo, uint64_t hi)
{
	return lo + rnd(s) % (hi - lo + 1);
}

static void
put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static uint64_t
get64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, 8);
	return v;
}

/* ---- The fault record -------------------------------------------------- */

static void
bump(struct burn *b, uint32_t x, uint32_t y)
{
	if (x < ENDPOINTS && y < ENDPOINTS) {
		atomic_fetch_add(&b->gen[x][y], 1);
		atomic_fetch_add(&b->gen[y][x], 1);
	}
}

static void
bump_endpoint(struct burn *b, uint32_t x)
{
	uint32_t y;

	for (y = 0; y < ENDPOINTS; y++)
		if (y != x)
			bump(b, x, y);
}

static void
on_fault(weft_sim *sim, const weft_sim_fault *f, void *arg)
{
	struct burn *b = arg;
	uint64_t since, now = weft_now_ns();

	(void)sim;
	if (!f->ending)
		atomic_fetch_add(&b->faults[f->kind], 1);
	switch (f->kind) {
	case WEFT_SIM_CORRUPT:
	case WEFT_SIM_DROP:
		bump(b, f->a, f->b);
		break;
	case WEFT_SIM_RESTART:
		bump_endpoint(b, f->a);
		break;
	case WEFT_SIM_PAUSE:
		if (!f->ending) {
			atomic_store(&b->paused_since[f->a], now);
		} else if ((since = atomic_exchange(&b->paused_since[f->a],
		                                    0)) != 0) {
			atomic_fetch_add(&b->paused_total_ns[f->a],
			                 now - since);
		}
		break;
	default:
		break;
	}
}

/* A connection a fault broke loses what was on it, however late the
 * break: a paused node finds bytes corrupted before it paused only when
 * it resumes, after the corruption's end. */
static void
on_break(weft_sim *sim, uint32_t x, uint32_t y, void *arg)
{
	(void)sim;
	bump(arg, x, y);
}

/* A peer marked down fails what was on its connections. */
static void
on_peer(weft_msvc *svc, weft_msvc_peer *peer, bool up, void *arg)
{
	struct burn *b = arg;
	const char *me = weft_msvc_node_id(svc), *it = weft_msvc_peer_id(peer);
	uint32_t x = me[0] == 'n' ? (uint32_t)(me[1] - '1') : NODES;
	uint32_t y = (uint32_t)(it[1] - '1');

	if (!up)
		bump(b, x, y);
}

/* How long endpoint e has been paused in all, up to now. */
static uint64_t
paused_ns(struct burn *b, uint32_t e)
{
	uint64_t since = atomic_load(&b->paused_since[e]);

	return atomic_load(&b->paused_total_ns[e]) +
	       (since != 0 ? weft_now_ns() - since : 0);
}

/* Keeps the worst lateness: at ms, for a deadline at deadline_ms. */
static void
note_late(struct burn *b, uint64_t at_ms, uint64_t deadline_ms)
{
	uint64_t late = at_ms > deadline_ms ? at_ms - deadline_ms : 0;
	uint64_t worst = atomic_load(&b->worst_late_ms);

	while (late > worst &&
	       !atomic_compare_exchange_weak(&b->worst_late_ms, &worst, late))
		;
}

/* ---- Payloads ---------------------------------------------------------- */

static void
fill(uint8_t *p, size_t len, uint64_t idx)
{
	size_t i;

	for (i = HEADER; i < len; i++)
		p[i] = (uint8_t)(idx * 131 + i * 7 + (i >> 9));
}

static uint32_t
stream_of(uint32_t thread, uint32_t from, uint32_t to, size_t len, uint32_t key)
{
	uint32_t size;

	if (len + BAND > CHUNK_BYTES && len <= CHUNK_BYTES)
		return UNORDERED;
	size = len <= CHUNK_BYTES ? 0 : len <= (64u << 10) ? 1 : 2;
	return (((thread * ENDPOINTS + from) * NODES + to) * SIZES + size) *
	           KEYS +
	       key;
}

/* The entry a payload names, if it is this round's. */
static struct entry *
entry_of(struct burn *b, const uint8_t *p, size_t len)
{
	uint64_t idx;

	if (len < HEADER || (uint32_t)get64(p + 8) != b->round)
		return NULL;
	idx = get64(p);
	return idx < atomic_load(&b->used) ? &b->ledger[idx] : NULL;
}

/* ---- Handlers ---------------------------------------------------------- */

static void
deliver(struct burn *b, weft_msvc_msg *msg, bool ordered)
{
	const uint8_t *p = weft_msvc_msg_data(msg);
	size_t len = weft_msvc_msg_len(msg);
	uint64_t deadline = weft_msvc_msg_deadline_ms(msg), idx;
	struct entry *e = entry_of(b, p, len);
	uint32_t stream, seq, last;

	if (deadline != 0 && weft_wall_ms() > deadline)
		note_late(b, weft_wall_ms(), deadline);
	if (deadline != 0 && weft_wall_ms() > deadline + b->slack_ms)
		burn_fail(b, "delivered %" PRIu64 " ms after its deadline",
		          weft_wall_ms() - deadline);
	if (e == NULL) {
		if (len >= HEADER && (uint32_t)get64(p + 8) == b->round)
			burn_fail(b, "a message names no entry");
		return;
	}
	idx = (uint64_t)(e - b->ledger);
	if (atomic_load(&e->len) != len ||
	    weft_crc32c(0, p, len) != atomic_load(&e->crc))
		burn_fail(b, "message %" PRIu64 " arrived changed", idx);
	if (atomic_fetch_add(&e->deliveries, 1) != 0)
		burn_fail(b, "message %" PRIu64 " delivered twice", idx);
	if (!atomic_load(&e->request)) {
		uint8_t pending = ST_PENDING;

		atomic_compare_exchange_strong(&e->state, &pending,
		                               ST_DELIVERED);
	}
	if (!ordered)
		return;
	/* The stream and its sequence number travel in the payload. */
	stream = (uint32_t)(get64(p + 16) >> 32);
	seq = (uint32_t)get64(p + 16);
	if (stream >= STREAMS)
		return;
	/* Order holds on a connection, and from a member across its
	 * reconnections. A message the client wrote on a connection it then
	 * gave up (a fault on the path: the peer marked down, the connection
	 * dropped) may still be on its way when later ones arrive on the new
	 * connection: excused then, as loss is. */
	last = atomic_load(&b->last_seq[stream]);
	if (seq <= last && last != 0 &&
	    (atomic_load(&e->from) < NODES ||
	     atomic_load(&b->gen[atomic_load(&e->from)][atomic_load(&e->to)]) ==
	         atomic_load(&e->gen)))
		burn_fail(b, "stream %u: message %u (%zu bytes) after %u",
		          stream, seq, len, last);
	if (seq > last)
		atomic_store(&b->last_seq[stream], seq);
	else if (atomic_load(&e->from) < NODES)
		atomic_fetch_add(&b->reordered_members, 1);
	else
		atomic_fetch_add(&b->reordered_in_fault, 1);
}

static void
on_echo(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	(void)svc;
	deliver(arg, msg, false);
	weft_msvc_respond(msg, weft_msvc_msg_data(msg), weft_msvc_msg_len(msg));
}

static void
on_sink(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	(void)svc;
	deliver(arg, msg, weft_msvc_msg_verb(msg) == VERB_SINK);
}

static int
on_start(weft_sim *sim, uint32_t node, weft_msvc *svc, void *arg)
{
	static const struct {
		uint32_t verb;
		weft_msvc_handler_cb cb;
		unsigned flags;
	} verbs[] = {{VERB_ECHO, on_echo, WEFT_MSVC_INLINE | WEFT_MSVC_CLIENTS},
	             {VERB_ECHO_BLOCKING, on_echo,
	              WEFT_MSVC_BLOCKING | WEFT_MSVC_CLIENTS},
	             {VERB_SINK, on_sink, WEFT_MSVC_INLINE | WEFT_MSVC_CLIENTS},
	             {VERB_SINK_BLOCKING, on_sink,
	              WEFT_MSVC_BLOCKING | WEFT_MSVC_CLIENTS}};
	size_t i;
	int rv;

	(void)sim;
	(void)node;
	for (i = 0;
	     weft_msvc_is_member(svc) && i < sizeof(verbs) / sizeof(verbs[0]);
	     i++)
		if ((rv = weft_msvc_register(svc, verbs[i].verb, "burn",
		                             verbs[i].cb, arg,
		                             verbs[i].flags)) != 0)
			return rv;
	return weft_msvc_on_peer_event(svc, on_peer, arg);
}

/* ---- Requests' ends ---------------------------------------------------- */

static enum state
state_of(int status)
{
	switch (status) {
	case 0:
		return ST_RESPONDED;
	case WEFT_ETIMEDOUT:
	case WEFT_EEXPIRED:
		return ST_EXPIRED;
	case WEFT_EOVERLOAD:
		return ST_OVERLOADED;
	default:
		return ST_FAILED;
	}
}

struct call {
	struct burn *b;
	struct sender *s;
	uint32_t idx;
};

static void
on_reply(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	struct call *c = arg;
	struct burn *b = c->b;
	struct entry *e = &b->ledger[c->idx];
	uint64_t took_ms, allowed_ms, from = atomic_load(&e->from);

	(void)svc;
	if (atomic_fetch_add(&e->callbacks, 1) != 0)
		burn_fail(b, "request %u: a second callback (%s)", c->idx,
		          weft_strerror(status));
	took_ms = (weft_now_ns() - atomic_load(&e->sent_ns)) / 1000000;
	allowed_ms =
	    atomic_load(&e->timeout_ms) + b->slack_ms +
	    (paused_ns(b, (uint32_t)from) - atomic_load(&e->paused_ns)) /
	        1000000;
	note_late(b, took_ms + b->slack_ms, allowed_ms);
	if (took_ms > allowed_ms)
		burn_fail(b,
		          "request %u (%u bytes, n%u to n%u): callback after "
		          "%" PRIu64 " ms (%s), allowed %" PRIu64,
		          c->idx, atomic_load(&e->len), (unsigned)from + 1,
		          atomic_load(&e->to) + 1, took_ms,
		          weft_strerror(status), allowed_ms);
	if (status == 0 && (len != atomic_load(&e->len) ||
	                    weft_crc32c(0, data, len) != atomic_load(&e->crc)))
		burn_fail(b,
		          "request %u (%u bytes, n%u to n%u): answered with "
		          "%zu bytes%s%" PRIu64 " of round %" PRIu64,
		          c->idx, atomic_load(&e->len), (unsigned)from + 1,
		          atomic_load(&e->to) + 1, len,
		          len >= HEADER ? ", the answer to request " : ", ",
		          len >= HEADER ? get64(data) : 0,
		          len >= HEADER ? get64((const uint8_t *)data + 8) : 0);
	atomic_store(&e->status, status);
	atomic_store(&e->state, (uint8_t)state_of(status));
	atomic_fetch_sub(&b->inflight_bytes, atomic_load(&e->len));
	atomic_fetch_sub(&c->s->outstanding, 1);
	free(c);
}

/* ---- Traffic ------------------------------------------------------------ */

/* A size up to 4 MiB, mostly small. */
static size_t
draw_size(uint64_t *r)
{
	uint64_t p = rnd(r) % 1000;

	if (p < 600)
		return between(r, HEADER, 256);
	if (p < 900)
		return between(r, 256, 16 << 10);
	if (p < 990)
		return between(r, 16 << 10, 256 << 10);
	if (p < 998)
		return between(r, 256 << 10, 2 << 20);
	return between(r, 2 << 20, 4 << 20);
}

/* Short deadlines (20-200 ms) now and then, long ones (1-3 s) mostly. */
static uint64_t
draw_timeout(uint64_t *r)
{
	return rnd(r) % 10 < 3 ? between(r, 20, 200) : between(r, 1000, 3000);
}

struct plan {
	uint32_t from, to, key;
	bool request, blocking;
	size_t len;
	uint64_t timeout_ms;
};

static weft_msvc *
take(struct burn *b, uint32_t from)
{
	return from < NODES ? weft_sim_node_acquire(b->sim, from) : b->client;
}

static void
give_back(struct burn *b, uint32_t from)
{
	if (from < NODES)
		weft_sim_node_release(b->sim, from);
}

/* Makes the entry and the payload, and sends it. */
static void
send_one(struct sender *s, const struct plan *pl, uint8_t *buf)
{
	struct burn *b = s->b;
	uint32_t idx = atomic_fetch_add(&b->used, 1), stream;
	weft_msvc_call_opts o = {.key = pl->key};
	struct entry *e = &b->ledger[idx];
	char to_id[8];
	weft_msvc *svc;
	struct call *c;
	int rv;

	stream = stream_of(s->index, pl->from, pl->to, pl->len, pl->key);
	put64(buf, idx);
	put64(buf + 8, b->round);
	put64(buf + 16, (uint64_t)stream << 32 |
	                    (stream == UNORDERED ? 0 : ++s->seq[stream]));
	fill(buf, pl->len, idx);
	atomic_store(&e->request, pl->request);
	atomic_store(&e->from, (uint8_t)pl->from);
	atomic_store(&e->to, (uint8_t)pl->to);
	atomic_store(&e->len, (uint32_t)pl->len);
	atomic_store(&e->crc, weft_crc32c(0, buf, pl->len));
	atomic_store(&e->timeout_ms, pl->timeout_ms);
	atomic_store(&e->gen, atomic_load(&b->gen[pl->from][pl->to]));
	atomic_store(&e->paused_ns, paused_ns(b, pl->from));
	atomic_store(&e->sent_ns, weft_now_ns());
	snprintf(to_id, sizeof(to_id), "n%u", pl->to + 1);
	if ((svc = take(b, pl->from)) == NULL) {
		atomic_store(&e->state, ST_FAILED); /* its node is down */
		give_back(b, pl->from);
		return;
	}
	if (pl->request) {
		o.timeout_ms = pl->timeout_ms;
		if ((c = malloc(sizeof(*c))) == NULL)
			abort();
		*c = (struct call){b, s, idx};
		atomic_fetch_add(&s->outstanding, 1);
		atomic_fetch_add(&b->inflight_bytes, pl->len);
		rv = weft_msvc_request(svc, weft_msvc_peer_find(svc, to_id),
		                       pl->blocking ? VERB_ECHO_BLOCKING
		                                    : VERB_ECHO,
		                       buf, pl->len, &o, on_reply, c);
		if (rv != 0) {
			atomic_fetch_sub(&s->outstanding, 1);
			atomic_fetch_sub(&b->inflight_bytes, pl->len);
			free(c);
		}
	} else {
		if (rnd(&s->rng) % 2)
			o.deadline_ms = weft_wall_ms() + pl->timeout_ms;
		atomic_store(&e->expires_ms, o.deadline_ms);
		rv = weft_msvc_send(svc, weft_msvc_peer_find(svc, to_id),
		                    pl->blocking ? VERB_SINK_BLOCKING
		                                 : VERB_SINK,
		                    buf, pl->len, &o);
	}
	give_back(b, pl->from);
	if (rv != 0) /* it never left */
		atomic_store(&e->state,
		             (uint8_t)(rv == WEFT_EOVERLOAD  ? ST_OVERLOADED
		                       : rv == WEFT_EEXPIRED ? ST_EXPIRED
		                                             : ST_FAILED));
	s->messages++;
	s->bytes += pl->len;
}

static void
draw_plan(struct sender *s, struct plan *pl)
{
	pl->from = (uint32_t)(rnd(&s->rng) % ENDPOINTS);
	pl->to = (uint32_t)(rnd(&s->rng) % (NODES - (pl->from < NODES)));
	if (pl->from < NODES && pl->to >= pl->from)
		pl->to++;
	pl->key = (uint32_t)(rnd(&s->rng) % KEYS);
	pl->request = rnd(&s->rng) % 10 < 6;
	pl->blocking = rnd(&s->rng) % 4 == 0;
	pl->len = draw_size(&s->rng);
	/* A request may be empty (its callback names it); one-way messages
	 * carry their entry in the payload. */
	if (pl->request && rnd(&s->rng) % 100 == 0)
		pl->len = 0;
	pl->timeout_ms = draw_timeout(&s->rng);
}

static void *
sender_main(void *arg)
{
	struct sender *s = arg;
	struct burn *b = s->b;
	uint8_t *buf = malloc(4u << 20);
	uint64_t start = weft_now_ns(), end = start + b->round_ms * 1000000ull;
	uint64_t sent = 0, due;
	struct plan pl;

	if (buf == NULL)
		abort();
	while (!atomic_load(&b->stop) && weft_now_ns() < end &&
	       atomic_load(&b->used) < ENTRIES - SENDERS) {
		draw_plan(s, &pl);
		while ((atomic_load(&s->outstanding) >= MAX_OUTSTANDING ||
		        atomic_load(&b->inflight_bytes) + pl.len >
		            MAX_INFLIGHT_BYTES) &&
		       !atomic_load(&b->stop))
			nanosleep(&(struct timespec){0, 200000}, NULL);
		if (pl.len == 0 && !pl.request)
			pl.len = HEADER;
		send_one(s, &pl, buf);
		/* Paced, so that the loops are not starved of the CPU (their
		 * timers would be late for that alone). */
		due = start + ++sent * (1000000000ull / RATE);
		if (due > weft_now_ns())
			nanosleep(
			    &(struct timespec){0, (long)(due - weft_now_ns())},
			    NULL);
	}
	free(buf);
	return NULL;
}

/* ---- A round ------------------------------------------------------------ */

static bool
all_answered(struct burn *b)
{
	int i;

	for (i = 0; i < SENDERS; i++)
		if (atomic_load(&b->senders[i].outstanding) > 0)
			return false;
	return true;
}

/* Judges every one-way entry once the traffic has drained; counts the
 * terminal states. */
static void
judge(struct burn *b, uint64_t counts[ST_STATES])
{
	uint32_t i, n = atomic_load(&b->used);
	uint64_t now = weft_wall_ms();

	for (i = 0; i < n; i++) {
		struct entry *e = &b->ledger[i];
		uint8_t st = atomic_load(&e->state);
		uint64_t exp = atomic_load(&e->expires_ms);

		if (st == ST_PENDING && atomic_load(&e->request))
			burn_fail(b, "request %u: no callback", i);
		if (st == ST_PENDING && !atomic_load(&e->request)) {
			if (exp != 0 && exp <= now)
				st = ST_EXPIRED;
			else if (atomic_load(&b->gen[atomic_load(&e->from)]
			                            [atomic_load(&e->to)]) !=
			         atomic_load(&e->gen))
				st = ST_LOST_IN_FAULT;
			else
				burn_fail(
				    b, "one-way %u (%u bytes, n%u to n%u) lost",
				    i, atomic_load(&e->len),
				    atomic_load(&e->from) + 1,
				    atomic_load(&e->to) + 1);
		}
		counts[st]++;
	}
}

static void
wait_ms(long ms)
{
	nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL);
}

/* WEFT_BURN_FAULTS: the fault kinds to draw, by name ("delay,drop"), or
 * "all"; unset: all. */
static unsigned
fault_kinds(void)
{
	const char *env = getenv("WEFT_BURN_FAULTS");
	unsigned kinds = 0, k;

	if (env == NULL || strcmp(env, "all") == 0)
		return (1u << WEFT_SIM_FAULT_KINDS) - 1;
	for (k = 0; k < WEFT_SIM_FAULT_KINDS; k++)
		if (strstr(env, weft_sim_fault_name(k)) != NULL)
			kinds |= 1u << k;
	return kinds;
}

static uint64_t
env_u64(const char *name, uint64_t dflt)
{
	const char *v = getenv(name);

	return v != NULL && *v != '\0' ? strtoull(v, NULL, 0) : dflt;
}

static int
run_round(uint64_t seed, uint32_t round, uint64_t round_ms)
{
	struct burn *b = calloc(1, sizeof(*b));
	weft_sim_chaos chaos = {.mean_gap_ms = 120,
	                        .max_fault_ms = 1200,
	                        .kinds = fault_kinds(),
	                        .endpoints = ENDPOINTS,
	                        .on_fault = on_fault};
	weft_sim_opts o = {.nodes = NODES,
	                   .seed = seed,
	                   .on_start = on_start,
	                   .on_break = on_break};
	uint64_t counts[ST_STATES] = {0}, messages = 0, bytes = 0, faults;
	weft_msvc_config *cfg;
	weft_msvc_limits l;
	uint32_t endpoint;
	uint64_t deadline;
	int i, failures;

	assert_non_null(b);
	b->seed = seed;
	b->round = round;
	b->round_ms = round_ms;
	b->slack_ms = env_u64("WEFT_BURN_SLACK_MS", SLACK_MS);
	pthread_mutex_init(&b->lock, NULL);
	b->ledger = calloc(ENTRIES, sizeof(*b->ledger));
	assert_non_null(b->ledger);
	assert_int_equal(weft_msvc_config_new("burn", &cfg), 0);
	l = *weft_msvc_config_limits(cfg);
	weft_msvc_config_free(cfg);
	l.heartbeat_interval_ms = 100;
	l.reconnect_min_ms = 10;
	l.reconnect_max_ms = 200;
	l.connect_timeout_ms = 1000;
	l.outbound_queue_bytes = 32u << 20;
	l.inbound_inflight_bytes = 32u << 20;
	l.connections[WEFT_MSVC_SMALL] = 2;
	l.connections[WEFT_MSVC_LARGE] = 2;
	l.loops = 1;
	l.worker_threads = 1; /* in order, so blocking sinks could be too */
	l.allow_clients = true;
	/* The wire stages: messages above 32 KiB (one in ten) travel in
	 * chunks, and bodies are compressed, but on a node that a restart
	 * brought back tight (chaos.c), which has compression off. */
	l.chunk_bytes = CHUNK_BYTES;
	l.compression = WEFT_COMPRESS_LZ4;
	o.limits = &l;
	o.arg = b;
	chaos.arg = b;
	print_message("burn: round %u, seed 0x%" PRIx64
	              " (WEFT_SIM_SEED=0x%" PRIx64 " replays it)\n",
	              round, seed, seed);
	assert_int_equal(weft_sim_new(&o, &b->sim), 0);
	assert_int_equal(
	    weft_sim_client_new(b->sim, "client", &endpoint, &b->client), 0);
	assert_int_equal(weft_sim_chaos_start(b->sim, &chaos), 0);
	for (i = 0; i < SENDERS; i++) {
		b->senders[i].b = b;
		b->senders[i].index = (uint32_t)i;
		b->senders[i].rng = seed * 7919 + (uint64_t)i;
		assert_int_equal(pthread_create(&b->senders[i].thread, NULL,
		                                sender_main, &b->senders[i]),
		                 0);
	}
	for (i = 0; i < SENDERS; i++)
		pthread_join(b->senders[i].thread, NULL);
	faults = weft_sim_chaos_stop(b->sim);
	deadline = weft_now_ns() + DRAIN_MS * 1000000ull;
	while (!all_answered(b) && weft_now_ns() < deadline)
		wait_ms(5);
	/* One-way messages queued behind a lifted fault: a moment more. */
	wait_ms(1000);
	judge(b, counts);
	for (i = 0; i < SENDERS; i++) {
		messages += b->senders[i].messages;
		bytes += b->senders[i].bytes;
	}
	print_message("burn: round %u: %" PRIu64 " messages (%" PRIu64
	              " MiB), %" PRIu64 " faults (delay %" PRIu64
	              ", stall %" PRIu64 ", corrupt %" PRIu64 ", drop %" PRIu64
	              ", pause %" PRIu64 ", restart %" PRIu64 ", hold %" PRIu64
	              ")\n",
	              round, messages, bytes >> 20, faults,
	              atomic_load(&b->faults[WEFT_SIM_DELAY]),
	              atomic_load(&b->faults[WEFT_SIM_STALL]),
	              atomic_load(&b->faults[WEFT_SIM_CORRUPT]),
	              atomic_load(&b->faults[WEFT_SIM_DROP]),
	              atomic_load(&b->faults[WEFT_SIM_PAUSE]),
	              atomic_load(&b->faults[WEFT_SIM_RESTART]),
	              atomic_load(&b->faults[WEFT_SIM_HOLD]));
	for (i = 1; i < ST_STATES; i++)
		print_message("burn:   %-16s %" PRIu64 "\n", state_names[i],
		              counts[i]);
	print_message("burn:   members' reordered %" PRIu64 "\n",
	              atomic_load(&b->reordered_members));
	print_message("burn:   client's reordered after a fault %" PRIu64 "\n",
	              atomic_load(&b->reordered_in_fault));
	print_message("burn:   latest end   %" PRIu64 " ms past a deadline "
	              "(allowed %" PRIu64 ")\n",
	              atomic_load(&b->worst_late_ms), b->slack_ms);
	weft_sim_free(b->sim);
	failures = atomic_load(&b->nfailures);
	for (i = 0; i < failures && i < MAX_FAILURES; i++)
		print_message("burn: FAILED (seed 0x%" PRIx64 "): %s\n", seed,
		              b->failures[i]);
	free(b->ledger);
	pthread_mutex_destroy(&b->lock);
	free(b);
	return failures;
}

static void
test_every_message_ends_exactly_once(void **state)
{
	uint64_t seconds = env_u64("WEFT_BURN_SECONDS", 6);
	uint64_t seed = env_u64("WEFT_SIM_SEED", 0), start = weft_now_ns();
	uint32_t round = 0;
	int failures = 0;

	(void)state;
	if (seed == 0)
		seed = weft_now_ns() ^ weft_wall_ms() << 16;
	do {
		failures += run_round(seed + round, round,
		                      seconds * 1000 < ROUND_MS ? seconds * 1000
		                                                : ROUND_MS);
		round++;
	} while (failures == 0 &&
	         weft_now_ns() - start < seconds * 1000000000ull);
	assert_int_equal(failures, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_message_ends_exactly_once),
	};

	weft_log_set_level(getenv("WEFT_LOG") ? weft_log_get_level()
	                                      : WEFT_LOG_ERROR);
	/* Multi-MiB messages come and go all the time: keep their memory in
	 * the heap, as a long-running node's allocator ends up doing, rather
	 * than mapping and faulting in fresh pages for each (glibc). */
	mallopt(M_MMAP_THRESHOLD, 64 << 20);
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
