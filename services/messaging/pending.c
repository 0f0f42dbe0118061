/* SPDX-License-Identifier: MIT */
/*
 * pending.c: pending requests of one loop. Slots live in an array and are
 * reused through a free list, so a request costs no allocation; the id
 * carries the slot index, the loop index and 32 random bits drawn for
 * each request, so matching a response is an array index and a compare,
 * and nobody who did not see the request can answer it. A response is
 * accepted only from the peer the request went to. Slots are made in
 * chunks that never move, each with a core timer of its own made once and
 * reused by every request the slot carries; core's timers use libevent's
 * common timeouts, so the many requests of one timeout are one queue in
 * the loop's heap, not one heap entry each.
 *
 * A slot's timer is not stopped when its request ends, and the next
 * request of the slot leaves it running when it is due no later than the
 * new deadline: when it fires it finds the deadline still ahead and starts
 * again for the rest. With one timeout for all requests, a busy slot's
 * timer is started once per timeout, not once per request: each start or
 * stop is an event_add or event_del under the event base's lock, and they
 * were the largest cost the service's private timer wheel did not have. A
 * timer that fires for a slot no longer in use does nothing.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msvc_int.h"

#define NONE UINT32_MAX
#define SLOT_BITS 24
#define LOOP_BITS 8
#define MAX_SLOTS (1u << SLOT_BITS)

#define CHUNK_BITS 8
#define CHUNK (1u << CHUNK_BITS)

static inline struct weft__msvc_slot *
slot(struct weft__msvc_loop *ml, uint32_t i)
{
	return &ml->chunks[i >> CHUNK_BITS][i & (CHUNK - 1)];
}

struct weft__msvc_slot *
weft__msvc_slot_at(struct weft__msvc_loop *ml, uint32_t i)
{
	return slot(ml, i);
}

static void on_deadline(weft_timer *t, void *arg);

uint64_t
weft__msvc_slot_id(struct weft__msvc_loop *ml, uint32_t i)
{
	return ((uint64_t)slot(ml, i)->tag << 32) |
	       ((uint64_t)ml->index << SLOT_BITS) | i;
}

/* Counts a round trip in verb's live histogram on this loop, making it on
 * first use (no histogram, no failure: the figure is only skipped). */
static void
record_verb_latency(struct weft__msvc_loop *ml, uint32_t verb, uint64_t ns)
{
	if (verb >= WEFT_MSVC_MAX_VERBS || ml->verb_lat == NULL)
		return;
	if (ml->verb_lat[verb] == NULL &&
	    weft_histogram_new(&ml->verb_lat[verb]) != 0)
		return;
	weft_histogram_record(ml->verb_lat[verb], ns);
}

/* Adds a chunk of slots, each with its timer, to the free list. */
static int
grow(struct weft__msvc_loop *ml)
{
	uint32_t n = ml->slots_cap / CHUNK, i;
	struct weft__msvc_slot **chunks, *c;

	if (ml->slots_cap >= MAX_SLOTS)
		return WEFT_EOVERLOAD;
	chunks = realloc(ml->chunks, (n + 1) * sizeof(*chunks));
	if (chunks == NULL)
		return WEFT_ENOMEM;
	ml->chunks = chunks;
	if ((c = calloc(CHUNK, sizeof(*c))) == NULL)
		return WEFT_ENOMEM;
	for (i = 0; i < CHUNK; i++) {
		c[i].ml = ml;
		c[i].index = ml->slots_cap + i;
		if (weft_timer_new(ml->loop, on_deadline, &c[i], &c[i].timer) !=
		    0) {
			while (i-- > 0)
				weft_timer_free(c[i].timer);
			free(c);
			return WEFT_ENOMEM;
		}
	}
	for (i = 0; i < CHUNK; i++)
		c[i].next =
		    i + 1 < CHUNK ? ml->slots_cap + i + 1 : ml->free_head;
	chunks[n] = c;
	ml->free_head = ml->slots_cap;
	ml->slots_cap += CHUNK;
	return 0;
}

int
weft__msvc_slot_new(struct weft__msvc_loop *ml, uint32_t *out)
{
	struct weft__msvc_slot *s;
	uint32_t i;
	int rv;

	if (ml->free_head == NONE && (rv = grow(ml)) != 0)
		return rv;
	i = ml->free_head;
	s = slot(ml, i);
	ml->free_head = s->next;
	s->tag = weft__msvc_random32(ml);
	s->traced = false;
	s->live = true;
	s->sent = false;
	s->internal = false;
	s->fail_status = 0;
	s->conn = NULL;
	s->out = NULL;
	s->handle = 0;
	s->next = s->c_next = s->c_prev = NONE;
	*out = i;
	return 0;
}

/* Starts s's timer, due timeout_ms from now. */
static void
start_timer(struct weft__msvc_slot *s, uint64_t timeout_ms)
{
	s->armed = true;
	s->due_ms = weft__msvc_wall_ms(s->ml) + timeout_ms;
	weft_timer_start(s->timer, timeout_ms, 0);
}

void
weft__msvc_slot_arm(struct weft__msvc_loop *ml, uint32_t i, uint64_t timeout_ms,
                    uint64_t expires_ms)
{
	struct weft__msvc_slot *s = slot(ml, i);

	s->start_ns = weft__msvc_now_ns(ml);
	s->expires_ms = expires_ms;
	s->timeout_ms = timeout_ms;
	if (s->armed && expires_ms != 0 && s->due_ms <= expires_ms)
		return;
	start_timer(s, timeout_ms);
}

static void
conn_unlink(struct weft__msvc_loop *ml, uint32_t i)
{
	struct weft__msvc_slot *s = slot(ml, i);
	struct weft__msvc_conn *c = s->conn;

	if (c == NULL)
		return;
	if (s->c_prev != NONE)
		slot(ml, s->c_prev)->c_next = s->c_next;
	else
		c->pending_head = s->c_next;
	if (s->c_next != NONE)
		slot(ml, s->c_next)->c_prev = s->c_prev;
	s->conn = NULL;
}

void
weft__msvc_slot_sent(struct weft__msvc_loop *ml, uint32_t i,
                     struct weft__msvc_conn *c)
{
	struct weft__msvc_slot *s = slot(ml, i);

	s->sent = true;
	s->out = NULL;
	s->conn = c;
	s->c_prev = NONE;
	s->c_next = c->pending_head;
	if (s->c_next != NONE)
		slot(ml, s->c_next)->c_prev = i;
	c->pending_head = i;
}

/* Frees a slot whose request never went anywhere, without its callback:
 * the caller reports the error. */
void
weft__msvc_slot_cancel(struct weft__msvc_loop *ml, uint32_t i)
{
	struct weft__msvc_slot *s = slot(ml, i);

	conn_unlink(ml, i);
	weft__msvc_count1(&s->peer->st.pending, (uint64_t)-1);
	s->out = NULL;
	s->live = false;
	s->next = ml->free_head;
	ml->free_head = i;
}

/* Ends a request of a trace: its span goes to the hook, from a copy of
 * its slot, which is free again by then. */
static void
end_span(struct weft__msvc_loop *ml, const struct weft__msvc_slot *s,
         int status, const weft_msvc_stage_times *stages)
{
	struct weft__msvc_slot copy = *s;

	weft__msvc_span_end(ml, &copy, status, stages);
}

/* Runs a reply callback, with stages for weft_msvc_reply_stages. */
static void
run_reply(weft_msvc *svc, weft_msvc_reply_cb cb, void *arg, int status,
          const void *data, size_t len, const weft_msvc_stage_times *stages)
{
	const weft_msvc_stage_times *prev;

	if (stages == NULL) {
		cb(svc, status, data, len, arg);
		return;
	}
	prev = weft__msvc_reply_enter(stages);
	cb(svc, status, data, len, arg);
	weft__msvc_reply_leave(prev);
}

void
weft__msvc_slot_complete(struct weft__msvc_loop *ml, uint32_t i, int status,
                         const void *data, size_t len)
{
	weft__msvc_slot_complete_stages(ml, i, status, data, len, NULL);
}

/* Frees the slot and runs its callback: the callback may make new
 * requests, so the slot is released first. */
void
weft__msvc_slot_complete_stages(struct weft__msvc_loop *ml, uint32_t i,
                                int status, const void *data, size_t len,
                                const weft_msvc_stage_times *stages)
{
	struct weft__msvc_slot *s = slot(ml, i);
	weft_msvc_peer *peer = s->peer;
	weft_msvc_reply_cb cb = s->cb;
	void *arg = s->arg;
	weft_msvc *svc = ml->svc;
	uint64_t took;

	conn_unlink(ml, i);
	if (s->out != NULL) {
		/* Still in a backlog: it will never be written. */
		struct weft__msvc_out *out = s->out;

		TAILQ_REMOVE(&out->conn->backlog, out, link);
		weft__msvc_release_queued(peer, out->accounted);
		weft__msvc_out_free(out);
		s->out = NULL;
	}
	if (status == 0 && !s->internal) {
		took = weft__msvc_now_ns(ml) - s->start_ns;
		if (peer->lat != NULL ||
		    weft__msvc_peer_lat_new(&peer->lat) == 0)
			weft_histogram_record(peer->lat, took);
		record_verb_latency(ml, s->verb, took);
		if (svc->cfg->limits.slow_call_ms != 0)
			weft__msvc_slow_call(ml, s, took);
	}
	if (stages != NULL && !s->internal)
		weft__msvc_stages_record(ml, peer, s->verb, stages);
	s->live = false;
	s->next = ml->free_head;
	ml->free_head = i;
	if (s->internal)
		atomic_fetch_sub(&svc->pending_internal, 1);
	weft__msvc_pending_sub(svc);
	weft__msvc_count1(&peer->st.pending, (uint64_t)-1);
	if (s->verb < WEFT_MSVC_MAX_VERBS)
		atomic_fetch_sub_explicit(&svc->verbs[s->verb].pending, 1,
		                          memory_order_relaxed);
	if (s->traced)
		end_span(ml, s, status, stages);
	run_reply(svc, cb, arg, status, data, len, stages);
}

void
weft__msvc_slot_fail_soon(struct weft__msvc_loop *ml, uint32_t i, int status)
{
	struct weft__msvc_slot *s = slot(ml, i);

	/* On the loop within a millisecond, never inside the caller's call:
	 * a caller that asks again from its callback (a client retrying a
	 * peer known down) then goes round once per millisecond, not as
	 * fast as the loop can turn, which starved a node's other work. */
	s->fail_status = status;
	start_timer(s, 1);
}

static void
expire(struct weft__msvc_loop *ml, uint32_t i)
{
	struct weft__msvc_slot *s = slot(ml, i);
	int status = WEFT_ETIMEDOUT;

	if (s->fail_status != 0) {
		weft__msvc_slot_complete(ml, i, s->fail_status, NULL, 0);
		return;
	}
	if (!s->sent) {
		status = WEFT_EEXPIRED;
		weft__msvc_count(&ml->svc->st.expired_in_queue, 1);
		weft__msvc_count(&s->peer->st.dropped_expired, 1);
	} else if (!s->internal) {
		weft__msvc_count(&s->peer->st.timed_out, 1);
		if (s->verb < WEFT_MSVC_MAX_VERBS)
			weft__msvc_count(&ml->svc->verbs[s->verb].timed_out, 1);
	}
	weft__msvc_slot_complete(ml, i, status, NULL, 0);
}

/* The largest power of two not above n (n > 0). The rest of a deadline
 * is waited out in such steps, so that these timers share a few durations
 * (libevent's common timeouts, at most one per power of two) rather than
 * each make one of their own; each step ends early and takes the next. */
static uint64_t
pow2_floor(uint64_t n)
{
	return (uint64_t)1 << (63 - __builtin_clzll(n));
}

/* A loop's timers run on libevent's cached coarse clock and may fire a
 * tick (up to 4 ms) before the deadline the envelope carries, which the
 * answering node judges by the wall clock. Telling the caller "timed out"
 * while the handler may still see the request as live would break the
 * promise that a timed-out request is not run late, so a deadline that
 * fires early waits out the rest; so does a timer left running for an
 * earlier request of the slot. A deadline further off than the request
 * lasts means the wall clock was set back: it fires then and there. */
static bool
too_soon(struct weft__msvc_slot *s)
{
	uint64_t now = weft__msvc_clock_now_ms(s->ml->svc);

	if (s->expires_ms == 0 || now >= s->expires_ms ||
	    s->expires_ms - now > s->timeout_ms)
		return false;
	start_timer(s, pow2_floor(s->expires_ms - now));
	return true;
}

static void
on_deadline(weft_timer *t, void *arg)
{
	struct weft__msvc_slot *s = arg;
	struct weft__msvc_loop *ml = s->ml;

	(void)t;
	s->armed = false;
	if (!s->live)
		return;
	if (s->fail_status == 0 && too_soon(s))
		return;
	weft__msvc_batch_begin(ml);
	expire(ml, s->index);
	weft__msvc_batch_end(ml);
}

/* A response arrived: complete the matching slot if from is the peer it
 * asked; otherwise count it, late or forged. */
enum weft__msvc_match
weft__msvc_response(struct weft__msvc_loop *ml, const weft_msvc_peer *from,
                    const weft_envelope *env)
{
	uint32_t i = (uint32_t)(env->id & (MAX_SLOTS - 1));
	uint32_t tag = (uint32_t)(env->id >> 32);
	const uint8_t *text = NULL;
	weft_msvc_stage_times st, *stages = NULL;
	size_t text_len = 0;
	int status = 0;

	if (i >= ml->slots_cap || !slot(ml, i)->live ||
	    slot(ml, i)->tag != tag || slot(ml, i)->verb != env->verb) {
		if (i < ml->slots_cap &&
		    weft__msvc_answer_was_cancelled(ml, i, tag, from))
			return WEFT__MSVC_LATE;
		weft__msvc_count(&ml->svc->st.late_responses, 1);
		return WEFT__MSVC_LATE;
	}
	if (slot(ml, i)->peer != from) {
		weft__msvc_count(&ml->svc->st.forged_responses, 1);
		return WEFT__MSVC_FORGED;
	}
	if (env->params_len > 0 && weft__msvc_stages_decode(env, &st))
		stages = &st;
	if (env->flags & WEFT__MSVC_F_ERROR) {
		weft__msvc_error_decode(env->payload, env->payload_len, &status,
		                        &text, &text_len);
		weft__msvc_slot_complete_stages(ml, i, status, text, text_len,
		                                stages);
		return WEFT__MSVC_MATCHED;
	}
	if (env->verb == WEFT__MSVC_VERB_HEARTBEAT && slot(ml, i)->internal &&
	    slot(ml, i)->peer->home == ml)
		weft__msvc_clock_round_trip(slot(ml, i)->peer, env->created_ms,
		                            weft__msvc_now_ns(ml) -
		                                slot(ml, i)->start_ns,
		                            weft__msvc_wall_ms(ml));
	weft__msvc_slot_complete_stages(ml, i, 0, env->payload,
	                                env->payload_len, stages);
	return WEFT__MSVC_MATCHED;
}

void
weft__msvc_fail_conn_pending(struct weft__msvc_conn *c, int status)
{
	struct weft__msvc_loop *ml = c->ml;
	uint32_t i;

	while ((i = c->pending_head) != NONE) {
		if (!slot(ml, i)->internal)
			weft__msvc_count(
			    &slot(ml, i)->peer->st.failed_peer_down, 1);
		weft__msvc_slot_complete(ml, i, status, NULL, 0);
	}
}

void
weft__msvc_fail_all_pending(struct weft__msvc_loop *ml, int status)
{
	uint32_t i;

	for (i = 0; i < ml->slots_cap; i++)
		if (slot(ml, i)->live)
			weft__msvc_slot_complete(ml, i, status, NULL, 0);
}

/* Ends the loop's own requests in flight (heartbeats) with status:
 * nobody waits for their answers. */
void
weft__msvc_fail_internal_pending(struct weft__msvc_loop *ml, int status)
{
	uint32_t i;

	for (i = 0; i < ml->slots_cap; i++)
		if (slot(ml, i)->live && slot(ml, i)->internal)
			weft__msvc_slot_complete(ml, i, status, NULL, 0);
}

void
weft__msvc_verb_name(const weft_msvc *svc, uint32_t verb, char *out, size_t len)
{
	const char *name = NULL;

	if (verb < WEFT_MSVC_MAX_VERBS)
		name = svc->verbs[verb].name;
	snprintf(out, len, "%s", name != NULL ? name : "");
}

void
weft__msvc_slow_call(struct weft__msvc_loop *ml,
                     const struct weft__msvc_slot *s, uint64_t took_ns)
{
	weft_msvc *svc = ml->svc;
	uint64_t limit_ms = svc->cfg->limits.slow_call_ms;
	char verb[WEFT__MSVC_VERB_NAME_MAX];

	if (limit_ms == 0 || took_ns <= limit_ms * 1000000u)
		return;
	weft__msvc_verb_name(svc, s->verb, verb, sizeof(verb));
	weft_log_limited(&svc->log_slow_call, WEFT_LOG_WARN,
	                 "msvc %s: slow call to %s: verb %" PRIu32
	                 "%s%s%s took %.3f ms (slow_call %" PRIu64 " ms)",
	                 svc->id, s->peer->id, s->verb, verb[0] ? " (" : "",
	                 verb, verb[0] ? ")" : "", (double)took_ns / 1e6,
	                 limit_ms);
}

void
weft__msvc_slots_fini(struct weft__msvc_loop *ml)
{
	uint32_t i;

	for (i = 0; i < ml->slots_cap; i++)
		weft_timer_free(slot(ml, i)->timer);
	for (i = 0; i < ml->slots_cap / CHUNK; i++)
		free(ml->chunks[i]);
	free(ml->chunks);
	ml->chunks = NULL;
	ml->slots_cap = 0;
}

void
weft__msvc_slots_init(struct weft__msvc_loop *ml)
{
	ml->free_head = NONE;
}

bool
weft__msvc_answer_was_cancelled(struct weft__msvc_loop *ml, uint32_t i,
                                uint32_t tag, const weft_msvc_peer *from)
{
	struct weft__msvc_slot *s = weft__msvc_slot_at(ml, i);

	if (s->cancelled_tag == 0 || s->cancelled_tag != tag || s->peer != from)
		return false;
	weft__msvc_count(&ml->svc->st.cancelled_responses, 1);
	return true;
}
