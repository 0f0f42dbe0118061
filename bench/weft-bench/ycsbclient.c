/* SPDX-License-Identifier: MIT */
/*
 * ycsbclient.c: one YCSB client process: a weft client service of the
 * key-value members, and T slots each keeping one operation in flight, as
 * YCSB's T client threads each run one at a time.
 *
 * The load phase inserts this client's share of the records; then each
 * run phase the coordinator asks for ("run W") draws operations from
 * workload W's mix and keys from its distribution until the window
 * closes or the client's share of --operations is done, on the records
 * loaded and those the workloads before inserted. Every slot runs on the
 * service's one loop thread (started by a task posted there), so the generators
 * need no lock; the main thread only talks to the coordinator and waits for the
 * slots to go idle.
 *
 * Each record's value starts with its key number and the writer's stamp;
 * a read checks that it got its own record's value, and a scan that its
 * entries are in order, from its start key on, each with its own value
 * (UNEXPECTED_STATE otherwise). A key's requests all go to one member,
 * which applies a write before it acknowledges it, so a read always sees
 * the writes acknowledged before it (NOT_FOUND would be a lost write).
 * Inserts take key numbers no other client takes, and a client reads only
 * the records loaded and its own acknowledged inserts.
 *
 * With --sessions S the process holds S client services (sessions), each
 * with its own connections to every member, all on the one loop; slot i
 * sends through session i mod S.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/histogram.h>
#include <weft/kv.h>
#include <weft/loop.h>
#include <weft/messaging.h>
#include <weft/tls.h>

#include "ycsb.h"

#define PROGRESS_SAMPLE 16
#define PRIME_WINDOW 32 /* sessions' first requests in flight */
#define VALUE_HEAD 16   /* key number, then the writer's stamp */

enum phase { LOAD, RUN, PHASES };

typedef struct yclient yclient;

/* A session: a client service of its own and its handles of the members. */
typedef struct ysession {
	weft_msvc *svc;
	weft_msvc_peer **nodes;
} ysession;

/* One operation in flight at a time. Touched on the loop thread only. */
typedef struct yslot {
	yclient *c;
	ysession *ss;
	enum ycsb_op op;
	bool rmw_write;    /* READ-MODIFY-WRITE: its write is in flight */
	bool measured;     /* issued inside the window */
	bool in_flight;    /* a request awaits its reply */
	uint64_t keynum;   /* the record */
	uint64_t insert;   /* INSERT: this client's insert number */
	uint32_t scan_len; /* SCAN: records asked for */
	uint64_t op_ns, req_ns;
	uint64_t sent, replies, duplicates;
} yslot;

struct yclient {
	const wbench_opts *o;
	const ycsb_workload *w;
	weft_msvc_config *cfg;
	weft_loop_group *group;
	weft_tls_ctx *tls;
	ysession *sess;
	unsigned nsess;
	yslot *slots;
	unsigned nslots;
	uint8_t *value;
	uint64_t stamp;
	ycsb_rng rng;
	ycsb_chooser chooser;
	enum phase phase;
	uint64_t load_next, load_end;    /* key numbers to load */
	uint64_t inserts, acked_inserts; /* this client's run inserts */
	uint8_t *acked;                  /* ring of inserts answered */
	uint64_t ring;                   /* its size, a power of two */
	uint64_t window_start_ns, window_end_ns;
	uint64_t ops_left; /* --operations: this client's share to go */
	uint64_t first_ns[PHASES], last_ns[PHASES];
	uint64_t done_ops[PHASES]; /* operations ended, as YCSB counts them */
	uint64_t counted[3];       /* sent, replies, duplicates reported */
	ycsb_figs figs[PHASES][YCSB_OPS];
	weft_histogram *lat[PHASES][YCSB_OPS];
	int first_error;
	/* Read by the main thread. */
	atomic_uint active; /* slots with an operation going */
	atomic_uint_fast64_t completed;
	wbench_sample so_far;
};

static void slot_next(yslot *s);

/* ---- Records --------------------------------------------------------------
 */

static void
be64_put(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint64_t
be64_get(const uint8_t *p)
{
	uint64_t v = 0;

	for (int i = 0; i < 8; i++)
		v = v << 8 | p[i];
	return v;
}

/* record_value writes keynum's value, stamped as this client's next. */
static const uint8_t *
record_value(yclient *c, uint64_t keynum)
{
	be64_put(c->value, keynum);
	be64_put(c->value + 8, (uint64_t)c->o->node_index << 40 | c->stamp++);
	return c->value;
}

static bool
value_is_of(const yclient *c, const void *v, size_t len, uint64_t keynum)
{
	return len == c->o->size && be64_get(v) == keynum;
}

/* keynum_of maps an index into the records this client may use (those
 * loaded, then its own inserts) to its key number. */
static uint64_t
keynum_of(const yclient *c, uint64_t i)
{
	uint64_t r = c->o->records;

	return i < r ? i : r + (i - r) * c->o->nclients + c->o->node_index;
}

static weft_msvc_peer *
node_of(const yslot *s, uint64_t keynum)
{
	return s->ss->nodes[ycsb_fnvhash64(keynum) % s->c->o->peers];
}

/* ---- A scan's answer ------------------------------------------------------
 */

typedef struct scan_check {
	const yclient *c;
	char prev[WEFT_KV_MAX_KEY];
	size_t prev_len;
	int n;
	bool ok;
} scan_check;

static void
check_entry(const void *key, size_t key_len, const void *value,
            size_t value_len, void *arg)
{
	scan_check *sc = arg;
	char want[32];

	sc->ok = sc->ok && value_len >= 8 && key_len < sizeof(sc->prev) &&
	         ycsb_key(want, be64_get(value)) == key_len &&
	         memcmp(want, key, key_len) == 0 &&
	         value_is_of(sc->c, value, value_len, be64_get(value));
	/* Ascending, from the start key on (prev holds it first). */
	if (sc->ok) {
		int cmp =
		    memcmp(sc->prev, key,
		           sc->prev_len < key_len ? sc->prev_len : key_len);

		sc->ok = cmp < 0 || (cmp == 0 &&
		                     (sc->prev_len < key_len ||
		                      (sc->n == 0 && sc->prev_len == key_len)));
		memcpy(sc->prev, key, key_len);
		sc->prev_len = key_len;
	}
	sc->n++;
}

static int
check_scan(const yslot *s, const void *data, size_t len)
{
	scan_check sc = {.c = s->c, .ok = true};

	sc.prev_len = ycsb_key(sc.prev, s->keynum);
	if (weft_kv_scan_parse(data, len, check_entry, &sc, NULL, NULL) < 0 ||
	    !sc.ok || sc.n > (int)s->scan_len || sc.n == 0)
		return WBENCH_EUNEXPECTED;
	return 0;
}

/* ---- Operations ------------------------------------------------------------
 */

static void on_reply(weft_msvc *svc, int status, const void *data, size_t len,
                     void *arg);

/* send_op sends the slot's request; 0 or the code of a refusal. */
static int
send_op(yslot *s)
{
	yclient *c = s->c;
	char key[32];
	size_t klen = ycsb_key(key, s->keynum);
	weft_msvc *svc = s->ss->svc;
	weft_msvc_peer *node = node_of(s, s->keynum);

	s->req_ns = wbench_now_ns();
	s->in_flight = true;
	s->sent++;
	switch (s->op) {
	case YCSB_SCAN:
		return weft_kv_client_scan(svc, node, key, klen, s->scan_len,
		                           NULL, on_reply, s);
	case YCSB_UPDATE:
	case YCSB_INSERT:
		break;
	default: /* a read, or a read-modify-write's read */
		if (s->op == YCSB_READ || !s->rmw_write)
			return weft_kv_client_get_at(svc, node, key, klen,
			                             c->o->consistency, NULL,
			                             on_reply, s);
	}
	return weft_kv_client_put(svc, node, key, klen,
	                          record_value(c, s->keynum), c->o->size, NULL,
	                          on_reply, s);
}

/* pick_op draws the next run-phase operation from the workload's mix. */
static enum ycsb_op
pick_op(yclient *c)
{
	unsigned r = (unsigned)(ycsb_rng_next(&c->rng) % 100), sum = 0;

	for (int op = 0; op < YCSB_OPS; op++)
		if (r < (sum += c->w->pct[op]))
			return (enum ycsb_op)op;
	return YCSB_READ;
}

/* start_run_op fills the slot with the next run-phase operation. */
static void
start_run_op(yslot *s, uint64_t now)
{
	yclient *c = s->c;
	uint64_t count = c->o->records + c->acked_inserts;

	s->op = pick_op(c);
	s->rmw_write = false;
	s->measured = now >= c->window_start_ns;
	if (s->measured && c->o->operations)
		c->ops_left--;
	if (s->op == YCSB_INSERT) {
		s->insert = c->inserts++;
		s->keynum = keynum_of(c, c->o->records + s->insert);
		return;
	}
	s->keynum =
	    keynum_of(c, ycsb_chooser_next(&c->chooser, &c->rng, count));
	if (s->op == YCSB_SCAN)
		s->scan_len =
		    1 + (uint32_t)(ycsb_rng_next(&c->rng) % c->o->scan_length);
}

/* ack_insert marks insert k answered; the records a client may read grow
 * by the inserts answered without a gap (YCSB's acknowledged counter). */
static void
ack_insert(yclient *c, uint64_t k)
{
	c->acked[k & (c->ring - 1)] = 1;
	while (c->acked[c->acked_inserts & (c->ring - 1)]) {
		c->acked[c->acked_inserts & (c->ring - 1)] = 0;
		c->acked_inserts++;
	}
}

/* record books what the slot's request returned. */
static void
record(yslot *s, int status, uint64_t now)
{
	yclient *c = s->c;
	enum phase ph = c->phase;
	enum ycsb_status st = ycsb_status_of(status);
	enum ycsb_op op = s->op == YCSB_RMW
	                      ? (s->rmw_write ? YCSB_UPDATE : YCSB_READ)
	                      : s->op;

	if (status != 0 && c->first_error == 0)
		c->first_error = status;
	if (ph == LOAD || s->measured) {
		ycsb_figs_record(&c->figs[ph][op], now - s->req_ns, st);
		weft_histogram_record(c->lat[ph][op], now - s->req_ns);
		c->last_ns[ph] = now;
	}
	/* The whole read-modify-write, once its write is back, or once
	 * its read failed. */
	if (s->op == YCSB_RMW && (s->rmw_write || status != 0) && s->measured) {
		ycsb_figs_record(&c->figs[RUN][YCSB_RMW], now - s->op_ns, st);
		weft_histogram_record(c->lat[RUN][YCSB_RMW], now - s->op_ns);
	}
}

/* op_done counts an operation that ended (a read-modify-write once). */
static void
op_done(yslot *s)
{
	yclient *c = s->c;

	if (c->phase == LOAD || s->measured)
		c->done_ops[c->phase]++;
}

/* judge checks an answer: the status the operation returns. */
static int
judge(yslot *s, int status, const void *data, size_t len)
{
	/* An update that lost to a concurrent update of the same record
	 * (CONFLICT) was answered, as YCSB's stores answer OK to each of two
	 * racing last-writer-wins updates. */
	if (status == WEFT_ECONFLICT)
		return 0;
	if (status != 0)
		return status;
	if (s->op == YCSB_SCAN)
		return check_scan(s, data, len);
	if ((s->op == YCSB_READ || (s->op == YCSB_RMW && !s->rmw_write)) &&
	    !value_is_of(s->c, data, len, s->keynum))
		return WBENCH_EUNEXPECTED;
	return 0;
}

static void
on_reply(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	yslot *s = arg;
	yclient *c = s->c;
	uint64_t now = wbench_now_ns();

	(void)svc;
	if (!s->in_flight) { /* a second answer to one request */
		s->duplicates++;
		return;
	}
	s->in_flight = false;
	s->replies++;
	status = judge(s, status, data, len);
	record(s, status, now);
	if (atomic_fetch_add_explicit(&c->completed, 1, memory_order_relaxed) %
	        PROGRESS_SAMPLE ==
	    0)
		wbench_sample_record(&c->so_far, now - s->req_ns);
	if (s->op == YCSB_INSERT && c->phase == RUN && status == 0)
		ack_insert(c, s->insert);
	if (s->op == YCSB_RMW && !s->rmw_write && status == 0) {
		s->rmw_write = true;
		if ((status = send_op(s)) == 0)
			return;
		s->in_flight = false;
		s->sent--;
		record(s, status, now);
	}
	op_done(s);
	slot_next(s);
}

/* slot_next starts the slot's next operation, or parks it for good. */
static void
slot_next(yslot *s)
{
	yclient *c = s->c;
	uint64_t now = wbench_now_ns();
	int rv;

	for (;;) {
		if (c->phase == LOAD && c->load_next < c->load_end) {
			s->op = YCSB_INSERT;
			s->keynum = c->load_next++;
		} else if (c->phase == RUN && now < c->window_end_ns &&
		           (!c->o->operations || c->ops_left > 0)) {
			start_run_op(s, now);
		} else {
			atomic_fetch_sub_explicit(&c->active, 1,
			                          memory_order_release);
			return;
		}
		s->op_ns = now;
		if ((rv = send_op(s)) == 0)
			return;
		/* Refused at once (overload): a result, then the next. */
		s->in_flight = false;
		s->sent--;
		record(s, rv, now);
		op_done(s);
	}
}

static void
start_task(weft_loop *loop, int status, void *arg)
{
	yclient *c = arg;

	(void)loop;
	(void)status;
	for (unsigned i = 0; i < c->nslots; i++)
		slot_next(&c->slots[i]);
}

/* ---- The process ------------------------------------------------------------
 */

/* make_hists makes the per-operation histograms and the ticks' sample. */
static int
make_hists(yclient *c)
{
	for (int ph = 0; ph < PHASES; ph++)
		for (int op = 0; op < YCSB_OPS; op++)
			if (wbench_hist_new(&c->lat[ph][op]) != 0)
				return -1;
	return wbench_sample_init(&c->so_far);
}

/* start_sessions starts the process's sessions on its one loop: ids cI
 * alone, or cIsK with --sessions (a worker thread each then: they run no
 * handler). */
static int
start_sessions(yclient *c)
{
	const wbench_opts *o = c->o;
	weft_msvc_opts mo = {.tls = c->tls};
	char id[32];

	if (o->sessions > 0)
		weft_msvc_config_limits(c->cfg)->worker_threads = 1;
	if (weft_loop_group_new(1, &c->group) != 0)
		return -1;
	for (unsigned k = 0; k < c->nsess; k++) {
		ysession *ss = &c->sess[k];

		if (o->sessions > 0)
			snprintf(id, sizeof(id), "c%us%u", o->node_index, k);
		else
			snprintf(id, sizeof(id), "c%u", o->node_index);
		if ((ss->nodes = calloc(o->peers, sizeof(*ss->nodes))) ==
		        NULL ||
		    weft_msvc_new(c->group, c->cfg, id, &mo, &ss->svc) != 0 ||
		    weft_msvc_start(ss->svc) != 0)
			return -1;
	}
	return 0;
}

static int
client_start(yclient *c, const wbench_opts *o)
{
	unsigned share = o->threads / o->nclients +
	                 (o->node_index < o->threads % o->nclients);
	char id[16];

	c->o = o;
	c->nslots = share ? share : 1;
	c->nsess = o->sessions > 0 ? o->sessions : 1;
	if (c->nsess > c->nslots)
		c->nsess = c->nslots;
	for (c->ring = 64; c->ring < 2 * (uint64_t)c->nslots; c->ring <<= 1)
		;
	c->slots = calloc(c->nslots, sizeof(*c->slots));
	c->value = calloc(1, o->size);
	c->acked = calloc(c->ring, 1);
	c->sess = calloc(c->nsess, sizeof(*c->sess));
	snprintf(id, sizeof(id), "c%u", o->node_index);
	if (o->size < VALUE_HEAD || c->slots == NULL || c->value == NULL ||
	    c->acked == NULL || c->sess == NULL || make_hists(c) != 0 ||
	    wbench_client_config(o, &c->cfg) != 0 ||
	    wbench_client_tls(o, c->cfg, id, &c->tls) != 0)
		return -1;
	wbench_pattern_fill(c->value, o->size, o->seed);
	ycsb_rng_seed(&c->rng, o->seed * 1000003u + o->node_index);
	for (unsigned i = 0; i < c->nslots; i++) {
		c->slots[i].c = c;
		c->slots[i].ss = &c->sess[i % c->nsess];
	}
	return start_sessions(c);
}

static void
client_stop(yclient *c)
{
	for (unsigned k = 0; c->sess != NULL && k < c->nsess; k++)
		if (c->sess[k].svc != NULL)
			weft_msvc_stop(c->sess[k].svc, 1000);
	if (c->group != NULL)
		weft_loop_group_shutdown(c->group, 1000);
	for (unsigned k = 0; c->sess != NULL && k < c->nsess; k++) {
		weft_msvc_free(c->sess[k].svc);
		free(c->sess[k].nodes);
	}
	if (c->group != NULL)
		weft_loop_group_free(c->group);
	if (c->tls != NULL)
		weft_tls_ctx_unref(c->tls);
	weft_msvc_config_free(c->cfg);
	free(c->sess);
	free(c->acked);
	free(c->value);
	free(c->slots);
	for (int ph = 0; ph < PHASES; ph++)
		for (int op = 0; op < YCSB_OPS; op++)
			weft_histogram_free(c->lat[ph][op]);
	wbench_sample_fini(&c->so_far);
}

/* prime asks every member once through every session, PRIME_WINDOW at
 * a time, so that every connection is up. */
static int
prime(yclient *c)
{
	wbench_primer p;

	wbench_primer_init(&p, PRIME_WINDOW, 60000);
	for (unsigned k = 0; k < c->nsess; k++)
		for (unsigned i = 0; i < c->o->peers; i++)
			if (wbench_primer_ask(&p, c->sess[k].svc,
			                      c->sess[k].nodes[i],
			                      WBENCH_VERB_ECHO) != 0)
				return -1;
	return wbench_primer_wait(&p);
}

/* address points every session at the members of the "ports" line. */
static int
address(yclient *c, const char *line)
{
	for (unsigned k = 0; k < c->nsess; k++)
		if (wbench_client_set_ports(c->sess[k].svc, line, c->o->peers,
		                            c->sess[k].nodes) != 0)
			return -1;
	return 0;
}

static void
print_tick(yclient *c)
{
	wbench_child_say(
	    "tick %llu %llu", (unsigned long long)atomic_load(&c->completed),
	    (unsigned long long)wbench_sample_percentile(&c->so_far, 99));
}

/* run_phase starts every slot on the loop and waits, ticking, until they
 * are all idle (bounded by --timeout). */
static int
run_phase(yclient *c, enum phase ph)
{
	uint64_t tick = wbench_now_ns() + 1000000000u;
	uint64_t deadline = wbench_now_ns() + c->o->timeout_ms * 1000000u;

	c->phase = ph;
	c->first_ns[ph] = wbench_now_ns();
	atomic_store(&c->active, c->nslots);
	if (weft_loop_post(weft_loop_group_at(c->group, 0), start_task, c) != 0)
		return -1;
	while (atomic_load_explicit(&c->active, memory_order_acquire) > 0) {
		if (wbench_now_ns() > deadline)
			return -1;
		if (wbench_now_ns() >= tick) {
			print_tick(c);
			tick += 1000000000u;
		}
		wload_sleep_until(wbench_now_ns() + 1000000u);
	}
	return 0;
}

/* print_phase prints one phase's figures: its times and count, and for
 * each operation its figures and histogram. */
static void
print_phase(yclient *c, enum phase ph)
{
	static const char *const names[PHASES] = {"load", "run"};

	wbench_child_say("time %s %llu %llu %llu", names[ph],
	                 (unsigned long long)c->first_ns[ph],
	                 (unsigned long long)c->last_ns[ph],
	                 (unsigned long long)c->done_ops[ph]);
	for (int op = 0; op < YCSB_OPS; op++) {
		const ycsb_figs *g = &c->figs[ph][op];
		char name[40];

		if (g->n == 0)
			continue;
		printf("ycsb %s %d n=%llu sum=%llu min=%llu max=%llu",
		       names[ph], op, (unsigned long long)g->n,
		       (unsigned long long)g->sum_ns,
		       (unsigned long long)g->min_ns,
		       (unsigned long long)g->max_ns);
		for (int s = 0; s < YCSB_STATUSES; s++)
			printf(" s%d=%llu", s,
			       (unsigned long long)g->status[s]);
		putchar('\n');
		snprintf(name, sizeof(name), "hist-%s-%d", names[ph], op);
		wbench_hist_print(c->lat[ph][op], name, stdout);
	}
	fflush(stdout);
}

/* print_counts prints the requests sent and answered since the last
 * counts, so that each workload's add up on their own. */
static void
print_counts(yclient *c)
{
	uint64_t sent = 0, replies = 0, dups = 0;

	for (unsigned i = 0; i < c->nslots; i++) {
		sent += c->slots[i].sent;
		replies += c->slots[i].replies;
		dups += c->slots[i].duplicates;
	}
	wbench_child_say("counts sent=%llu replies=%llu duplicates=%llu "
	                 "first_error=%d",
	                 (unsigned long long)(sent - c->counted[0]),
	                 (unsigned long long)(replies - c->counted[1]),
	                 (unsigned long long)(dups - c->counted[2]),
	                 c->first_error);
	c->counted[0] = sent;
	c->counted[1] = replies;
	c->counted[2] = dups;
	c->first_error = 0;
}

/* load inserts this client's share of the records and reports it. */
static int
load(yclient *c)
{
	uint64_t r = c->o->records, n = c->o->nclients, i = c->o->node_index;

	c->load_next = r * i / n;
	c->load_end = r * (i + 1) / n;
	if (run_phase(c, LOAD) != 0)
		return -1;
	print_phase(c, LOAD);
	print_counts(c);
	wbench_child_say("loaded");
	return 0;
}

/* run runs workload w on the records loaded (and inserted by the
 * workloads before). */
static int
run(yclient *c, char w)
{
	const wbench_opts *o = c->o;
	uint64_t share = o->operations / o->nclients +
	                 (o->node_index < o->operations % o->nclients);

	if ((c->w = ycsb_workload_of(w)) == NULL)
		return -1;
	ycsb_chooser_init(&c->chooser,
	                  o->distribution ? (enum wbench_dist)o->distribution
	                                  : c->w->dist,
	                  o->records + c->acked_inserts);
	memset(c->figs[RUN], 0, sizeof(c->figs[RUN]));
	for (int op = 0; op < YCSB_OPS; op++)
		weft_histogram_reset(c->lat[RUN][op]);
	c->done_ops[RUN] = c->last_ns[RUN] = 0;
	c->ops_left = share;
	c->window_start_ns = wbench_now_ns() + (uint64_t)(o->warmup_s * 1e9);
	c->window_end_ns = c->window_start_ns + (uint64_t)(o->duration_s * 1e9);
	if (run_phase(c, RUN) != 0)
		return -1;
	if (c->first_ns[RUN] < c->window_start_ns)
		c->first_ns[RUN] = c->window_start_ns;
	wbench_child_say("done");
	return 0;
}

/* serve runs what the coordinator asks for after the load: "run W",
 * "report" (the last run's figures), until "quit". */
static int
serve(yclient *c)
{
	char line[256];

	while (fgets(line, sizeof(line), stdin) != NULL) {
		if (strncmp(line, "run ", 4) == 0 && run(c, line[4]) != 0)
			return -1;
		if (strncmp(line, "report", 6) == 0) {
			print_phase(c, RUN);
			print_counts(c);
			wbench_child_say("end");
		}
		if (strncmp(line, "quit", 4) == 0)
			return 0;
	}
	return -1;
}

int
wbench_ycsb_client(const wbench_opts *o)
{
	char line[65536];
	yclient *c = calloc(1, sizeof(*c));
	int rv = -1;

	if (!WEFT_LOG_ENABLED(WEFT_LOG_DEBUG))
		weft_log_set_level(WEFT_LOG_WARN);
	if (c == NULL || client_start(c, o) != 0)
		goto out;
	wbench_child_say("port 1");
	if (wbench_child_expect("ports", line, sizeof(line)) != 0 ||
	    address(c, line) != 0)
		goto out;
	wbench_child_say("addressed");
	if (wbench_child_expect("prime", line, sizeof(line)) != 0 ||
	    prime(c) != 0)
		goto out;
	wbench_child_say("ready");
	if (wbench_child_expect("load", line, sizeof(line)) != 0 ||
	    load(c) != 0)
		goto out;
	rv = serve(c);
out:
	/* The members go away after this: no news then. */
	weft_log_set_level(WEFT_LOG_ERROR);
	if (c != NULL)
		client_stop(c);
	free(c);
	return rv;
}
