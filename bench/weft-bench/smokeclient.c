/* SPDX-License-Identifier: MIT */
/*
 * smokeclient.c: the smoke test's client process, in the shape of
 * zk-smoketest's zk-latencies.py: C sessions (each a weft client service
 * of its own, with its own connections, all on one loop thread), session
 * i talking to member i mod N. For each "run C" the coordinator sends, the
 * first C sessions go through four phases one after another, all
 * sessions at once in each: create N keys, set them, get them, delete
 * them, each session keeping W requests in flight. A phase ends when
 * every session's last answer is in.
 *
 * Checks: every request answered exactly once; every get returns the
 * value its own set wrote (a session's requests all go to one member,
 * which applies a write before it acknowledges it).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/kv.h>
#include <weft/loop.h>
#include <weft/messaging.h>
#include <weft/tls.h>

#include "wbench.h"

#define PRIME_WINDOW 32 /* sessions' first requests in flight */

enum smoke_phase { CREATE, SET, GET, DELETE, SMOKE_PHASES };

static const char *const phase_words[SMOKE_PHASES] = {"create", "set", "get",
                                                      "delete"};

typedef struct smoke smoke;
typedef struct session session;

/* One request kept in flight by a session. Loop thread only. */
typedef struct sslot {
	session *ss;
	uint64_t key; /* index of the key in flight */
	bool in_flight;
} sslot;

struct session {
	smoke *sm;
	unsigned index;
	weft_tls_ctx *tls;
	weft_msvc *svc;
	weft_msvc_peer *node;
	weft_msvc_peer **nodes;
	sslot *slots;
	uint64_t next; /* the next key to ask for */
	unsigned idle; /* slots with nothing more to do */
};

struct smoke {
	const wbench_opts *o;
	weft_msvc_config *cfg;
	weft_loop_group *group;
	session *sessions;
	unsigned nsessions, running; /* made, and in this run */
	enum smoke_phase phase;
	uint8_t *value;
	/* Counted on the loop thread, read after active is back to 0. */
	uint64_t errors, unexpected, sent, replies, duplicates;
	int first_error;
	atomic_uint active; /* sessions with work left in this phase */
};

static void slot_next(sslot *s);

/* key_name names key k of session ss in run C. */
static size_t
key_name(const session *ss, uint64_t k, char out[64])
{
	return (size_t)snprintf(out, 64, "smoke/%u/c%u/%llu", ss->sm->running,
	                        ss->index, (unsigned long long)k);
}

/* fill_value writes key k's value for a phase: k, then the phase's
 * letter over the rest. */
static const uint8_t *
fill_value(smoke *sm, uint64_t k, enum smoke_phase ph)
{
	size_t n = sm->o->size;

	memset(sm->value, ph == CREATE ? 'c' : 's', n);
	for (size_t i = 0; i < 8 && i < n; i++)
		sm->value[i] = (uint8_t)(k >> (8 * (7 - i)));
	return sm->value;
}

static bool
is_set_value(smoke *sm, uint64_t k, const void *data, size_t len)
{
	return len == sm->o->size &&
	       memcmp(data, fill_value(sm, k, SET), len) == 0;
}

static void
on_reply(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	sslot *s = arg;
	smoke *sm = s->ss->sm;

	(void)svc;
	if (!s->in_flight) {
		sm->duplicates++;
		return;
	}
	s->in_flight = false;
	sm->replies++;
	if (status == 0 && sm->phase == GET &&
	    !is_set_value(sm, s->key, data, len)) {
		sm->unexpected++;
		status = WBENCH_EUNEXPECTED;
	}
	if (status != 0) {
		sm->errors++;
		sm->first_error = sm->first_error ? sm->first_error : status;
	}
	slot_next(s);
}

static int
send_one(sslot *s)
{
	session *ss = s->ss;
	smoke *sm = ss->sm;
	char key[64];
	size_t klen = key_name(ss, s->key, key);

	switch (sm->phase) {
	case GET:
		return weft_kv_client_get(ss->svc, ss->node, key, klen, NULL,
		                          on_reply, s);
	case DELETE:
		return weft_kv_client_delete(ss->svc, ss->node, key, klen, NULL,
		                             on_reply, s);
	default:
		return weft_kv_client_put(ss->svc, ss->node, key, klen,
		                          fill_value(sm, s->key, sm->phase),
		                          sm->o->size, NULL, on_reply, s);
	}
}

/* slot_next sends the session's next key from this slot, or parks it;
 * the session's last slot to park ends its phase. */
static void
slot_next(sslot *s)
{
	session *ss = s->ss;
	smoke *sm = ss->sm;
	int rv;

	while (ss->next < sm->o->keys) {
		s->key = ss->next++;
		s->in_flight = true;
		sm->sent++;
		if ((rv = send_one(s)) == 0)
			return;
		/* Refused at once: an answer, of a sort. */
		s->in_flight = false;
		sm->sent--;
		sm->errors++;
		sm->first_error = sm->first_error ? sm->first_error : rv;
	}
	if (++ss->idle == sm->o->outstanding)
		atomic_fetch_sub_explicit(&sm->active, 1, memory_order_release);
}

static void
start_task(weft_loop *loop, int status, void *arg)
{
	smoke *sm = arg;

	(void)loop;
	(void)status;
	for (unsigned i = 0; i < sm->running; i++) {
		session *ss = &sm->sessions[i];

		ss->next = 0;
		ss->idle = 0;
		for (unsigned j = 0; j < sm->o->outstanding; j++)
			slot_next(&ss->slots[j]);
	}
}

/* run_phase runs one phase on the first C sessions; returns its time in
 * nanoseconds, or 0 when it did not end by --timeout. */
static uint64_t
run_phase(smoke *sm, enum smoke_phase ph)
{
	uint64_t t0 = wbench_now_ns(), deadline;

	deadline = t0 + sm->o->timeout_ms * 1000000u;
	sm->phase = ph;
	atomic_store(&sm->active, sm->running);
	if (weft_loop_post(weft_loop_group_at(sm->group, 0), start_task, sm) !=
	    0)
		return 0;
	while (atomic_load_explicit(&sm->active, memory_order_acquire) > 0) {
		if (wbench_now_ns() > deadline)
			return 0;
		wload_sleep_until(wbench_now_ns() + 200000u);
	}
	return wbench_now_ns() - t0;
}

/* run_clients runs the four phases with C sessions and reports them. */
static int
run_clients(smoke *sm, unsigned c)
{
	wbench_rusage before, after;

	if (c == 0 || c > sm->nsessions)
		return -1;
	sm->running = c;
	sm->errors = sm->unexpected = 0;
	sm->sent = sm->replies = sm->duplicates = 0;
	wbench_rusage_read(&before);
	for (int ph = 0; ph < SMOKE_PHASES; ph++) {
		uint64_t errors = sm->errors, unexpected = sm->unexpected;
		uint64_t ns = run_phase(sm, (enum smoke_phase)ph);

		if (ns == 0)
			return -1;
		wbench_child_say(
		    "phase %s ns=%llu errors=%llu unexpected=%llu",
		    phase_words[ph], (unsigned long long)ns,
		    (unsigned long long)(sm->errors - errors),
		    (unsigned long long)(sm->unexpected - unexpected));
	}
	wbench_rusage_read(&after);
	wbench_child_say("cpu user_us=%llu sys_us=%llu",
	                 (unsigned long long)(after.user_us - before.user_us),
	                 (unsigned long long)(after.sys_us - before.sys_us));
	wbench_child_say("counts sent=%llu replies=%llu duplicates=%llu "
	                 "first_error=%d",
	                 (unsigned long long)sm->sent,
	                 (unsigned long long)sm->replies,
	                 (unsigned long long)sm->duplicates, sm->first_error);
	wbench_child_say("end");
	return 0;
}

/* session_start makes session i, a client service of its own. */
static int
session_start(smoke *sm, unsigned i)
{
	session *ss = &sm->sessions[i];
	weft_msvc_opts mo = {0};
	char id[16];

	ss->sm = sm;
	ss->index = i;
	snprintf(id, sizeof(id), "c%u", i);
	ss->slots = calloc(sm->o->outstanding, sizeof(*ss->slots));
	ss->nodes = calloc(sm->o->peers, sizeof(*ss->nodes));
	if (ss->slots == NULL || ss->nodes == NULL ||
	    wbench_client_tls(sm->o, sm->cfg, id, &ss->tls) != 0)
		return -1;
	for (unsigned j = 0; j < sm->o->outstanding; j++)
		ss->slots[j].ss = ss;
	mo.tls = ss->tls;
	if (weft_msvc_new(sm->group, sm->cfg, id, &mo, &ss->svc) != 0 ||
	    weft_msvc_start(ss->svc) != 0)
		return -1;
	return 0;
}

static int
smoke_start(smoke *sm, const wbench_opts *o)
{
	sm->o = o;
	sm->nsessions = o->nclients;
	sm->sessions = calloc(sm->nsessions, sizeof(*sm->sessions));
	sm->value = calloc(1, o->size ? o->size : 1);
	if (sm->sessions == NULL || sm->value == NULL || o->outstanding == 0 ||
	    wbench_client_config(o, &sm->cfg) != 0 ||
	    weft_loop_group_new(1, &sm->group) != 0)
		return -1;
	/* One worker thread a session: they run no handler. */
	weft_msvc_config_limits(sm->cfg)->worker_threads = 1;
	for (unsigned i = 0; i < sm->nsessions; i++)
		if (session_start(sm, i) != 0)
			return -1;
	return 0;
}

static void
smoke_stop(smoke *sm)
{
	for (unsigned i = 0; sm->sessions != NULL && i < sm->nsessions; i++)
		if (sm->sessions[i].svc != NULL)
			weft_msvc_stop(sm->sessions[i].svc, 1000);
	if (sm->group != NULL)
		weft_loop_group_shutdown(sm->group, 1000);
	for (unsigned i = 0; sm->sessions != NULL && i < sm->nsessions; i++) {
		session *ss = &sm->sessions[i];

		weft_msvc_free(ss->svc);
		if (ss->tls != NULL)
			weft_tls_ctx_unref(ss->tls);
		free(ss->slots);
		free(ss->nodes);
	}
	if (sm->group != NULL)
		weft_loop_group_free(sm->group);
	weft_msvc_config_free(sm->cfg);
	free(sm->sessions);
	free(sm->value);
}

/* address reads the members' ports into every session, and asks each
 * session's member once, so that its connections are up. */
static int
address(smoke *sm, const char *ports)
{
	for (unsigned i = 0; i < sm->nsessions; i++) {
		session *ss = &sm->sessions[i];

		if (wbench_client_set_ports(ss->svc, ports, sm->o->peers,
		                            ss->nodes) != 0)
			return -1;
		ss->node = ss->nodes[i % sm->o->peers];
	}
	return 0;
}

/* prime asks each session's member once, PRIME_WINDOW sessions at a
 * time. */
static int
prime(smoke *sm)
{
	wbench_primer p;

	wbench_primer_init(&p, PRIME_WINDOW, 60000);
	for (unsigned i = 0; i < sm->nsessions; i++)
		if (wbench_primer_ask(&p, sm->sessions[i].svc,
		                      sm->sessions[i].node,
		                      WBENCH_VERB_ECHO) != 0)
			return -1;
	return wbench_primer_wait(&p);
}

int
wbench_smoke_client(const wbench_opts *o)
{
	char line[65536];
	smoke sm = {0};
	int rv = -1;

	if (!WEFT_LOG_ENABLED(WEFT_LOG_DEBUG))
		weft_log_set_level(WEFT_LOG_WARN);
	if (smoke_start(&sm, o) != 0)
		goto out;
	wbench_child_say("port 1");
	if (wbench_child_expect("ports", line, sizeof(line)) != 0 ||
	    address(&sm, line) != 0)
		goto out;
	wbench_child_say("addressed");
	if (wbench_child_expect("prime", line, sizeof(line)) != 0 ||
	    prime(&sm) != 0)
		goto out;
	wbench_child_say("ready");
	while (wbench_child_expect("run ", line, sizeof(line)) == 0)
		if (run_clients(&sm, (unsigned)atoi(line + 4)) != 0)
			goto out;
	if (strncmp(line, "quit", 4) != 0)
		goto out;
	rv = 0;
out:
	/* The members go away after this: no news then. */
	weft_log_set_level(WEFT_LOG_ERROR);
	smoke_stop(&sm);
	return rv;
}
