/* SPDX-License-Identifier: MIT */
/*
 * trace.c: what a request carries in its params (docs/PROTOCOL.md 4.5)
 * besides its payload. A request of a trace carries its W3C trace
 * context (TRACEPARENT), whose parent span is the request's own: a span
 * per request, made by its caller, reported to the span hook when the
 * request ends. An answer carries the time its request spent in each of
 * the responder's stages (STAGE_US), which the caller's reply callback
 * may read and which are counted per peer and per verb.
 *
 * Two things are per thread, as errno is: the handler running on it, so
 * that the requests it makes take its trace on without an argument for
 * it in every call, and the stage times of the reply callback running on
 * it, so that the callback's signature stays as it was. Each is set
 * around the call it is for, the previous value put back after it.
 */
#include <stdlib.h>
#include <string.h>

#include <weft/mp.h>

#include "msvc_int.h"

/* The handler running on this thread, or NULL. */
static _Thread_local const weft_msvc_msg *running_handler;
/* The stage times of the reply callback running on this thread. */
static _Thread_local const weft_msvc_stage_times *running_reply_stages;

const weft_msvc_msg *
weft__msvc_handler_enter(const weft_msvc_msg *msg)
{
	const weft_msvc_msg *prev = running_handler;

	running_handler = msg;
	return prev;
}

void
weft__msvc_handler_leave(const weft_msvc_msg *prev)
{
	running_handler = prev;
}

const weft_msvc_stage_times *
weft__msvc_reply_enter(const weft_msvc_stage_times *stages)
{
	const weft_msvc_stage_times *prev = running_reply_stages;

	running_reply_stages = stages;
	return prev;
}

void
weft__msvc_reply_leave(const weft_msvc_stage_times *prev)
{
	running_reply_stages = prev;
}

int
weft_msvc_reply_stages(const weft_msvc_stage_times **out)
{
	if (running_reply_stages == NULL)
		return WEFT_ENOTFOUND;
	*out = running_reply_stages;
	return 0;
}

int
weft_msvc_msg_traceparent(const weft_msvc_msg *msg, weft_msvc_traceparent *out)
{
	if (msg == NULL || !msg->traced)
		return WEFT_ENOTFOUND;
	*out = msg->tp;
	return 0;
}

int
weft_msvc_on_span(weft_msvc *svc, weft_msvc_span_cb cb, void *arg)
{
	if (svc == NULL)
		return WEFT_EINVAL;
	if (atomic_load(&svc->started))
		return WEFT_EBUSY;
	svc->span_cb = cb;
	svc->span_arg = arg;
	return 0;
}

/* ---- Trace context ----------------------------------------------------- */

static bool
all_zero(const uint8_t *p, size_t n)
{
	while (n-- > 0)
		if (*p++ != 0)
			return false;
	return true;
}

/* Whether one in 1/rate of the requests that could start a trace is this
 * one: evenly spread, without a random draw on the caller's thread. */
static bool
starts_trace(weft_msvc *svc)
{
	double rate = svc->opts.trace_sample_rate;
	uint64_t k;

	if (!(rate > 0))
		return false;
	if (rate >= 1)
		return true;
	k = atomic_fetch_add_explicit(&svc->trace_roots, 1,
	                              memory_order_relaxed);
	return (uint64_t)((double)(k + 1) * rate) >
	       (uint64_t)((double)k * rate);
}

void
weft__msvc_trace_request(weft_msvc *svc, const weft_msvc_call_opts *opts,
                         struct weft__msvc_out *out)
{
	const weft_msvc_traceparent *tp = NULL;

	if (opts != NULL && opts->traceparent != NULL)
		tp = opts->traceparent;
	else if (running_handler != NULL && running_handler->traced)
		tp = &running_handler->tp;
	if (tp != NULL && !all_zero(tp->trace_id, sizeof(tp->trace_id))) {
		out->params.traced = true;
		out->params.tp = *tp;
	} else if (starts_trace(svc)) {
		out->params.new_trace = true;
	}
}

static void
random_bytes(struct weft__msvc_loop *ml, uint8_t *p, size_t n)
{
	uint32_t r;
	size_t i;

	/* A span id or trace id of all zeros is not valid: draw again. */
	do {
		for (i = 0; i < n; i += 4) {
			r = weft__msvc_random32(ml);
			memcpy(p + i, &r, n - i < 4 ? n - i : 4);
		}
	} while (all_zero(p, n));
}

void
weft__msvc_trace_open(struct weft__msvc_loop *ml, struct weft__msvc_slot *s,
                      struct weft__msvc_out *out)
{
	struct weft__msvc_out_params *pa = &out->params;

	s->traced = pa->traced || pa->new_trace;
	if (!s->traced)
		return;
	if (pa->new_trace) {
		random_bytes(ml, pa->tp.trace_id, sizeof(pa->tp.trace_id));
		memset(s->parent_span_id, 0, sizeof(s->parent_span_id));
		pa->tp.flags = WEFT_MSVC_TRACE_SAMPLED;
		pa->new_trace = false;
		pa->traced = true;
	} else {
		memcpy(s->parent_span_id, pa->tp.span_id,
		       sizeof(s->parent_span_id));
	}
	random_bytes(ml, pa->tp.span_id, sizeof(pa->tp.span_id));
	s->tp = pa->tp;
}

/* Reads a TRACEPARENT value (its type already checked by the codec):
 * false for one W3C Trace Context says to ignore (version 255, an
 * all-zero trace id or parent span id). */
static bool
traceparent_decode(const void *value, size_t len, weft_msvc_traceparent *tp)
{
	weft_mp_reader r;
	const uint8_t *b;
	const void *bin;
	size_t n;

	weft_mp_reader_init(&r, value, len);
	if (weft_mp_read_bin(&r, &bin, &n) != 0 || n != 26)
		return false;
	b = bin;
	if (b[0] == 0xff)
		return false;
	memcpy(tp->trace_id, b + 1, 16);
	memcpy(tp->span_id, b + 17, 8);
	tp->flags = b[25];
	return !all_zero(tp->trace_id, 16) && !all_zero(tp->span_id, 8);
}

void
weft__msvc_trace_arrived(struct weft__msvc_conn *c, weft_msvc_msg *msg,
                         const weft_envelope *env)
{
	const void *value;
	size_t len;

	if (c->version < 2 || !(env->flags & WEFT__MSVC_F_REQUEST))
		return;
	if (env->params_len != 0 &&
	    weft_envelope_param_find(env->params, env->params_len,
	                             WEFT_PARAM_TRACEPARENT, &value,
	                             &len) == 0) {
		if (traceparent_decode(value, len, &msg->tp))
			msg->traced = true;
		else
			weft__msvc_count(&c->svc->st.bad_traceparents, 1);
	}
	/* Stage times for every answer where the node says so, else for
	 * traced requests only: they cost clock reads here and a params map
	 * on the answer. The read's time is the batch's (the gate's
	 * reading); the dispatch's is read now, after the frames before
	 * it. */
	if (!msg->traced && !c->svc->opts.stage_times)
		return;
	msg->read_ns = weft__msvc_now_ns(c->ml);
	msg->dispatch_ns = msg->run_ns = weft_now_ns();
}

/* ---- Stage times ------------------------------------------------------- */

static uint32_t
us_between(uint64_t from_ns, uint64_t to_ns)
{
	uint64_t us = to_ns > from_ns ? (to_ns - from_ns) / 1000 : 0;

	return us > UINT32_MAX ? UINT32_MAX : (uint32_t)us;
}

void
weft__msvc_stages_answered(const weft_msvc_msg *msg, struct weft__msvc_out *out)
{
	uint64_t now;

	if (msg->read_ns == 0 || msg->verb == WEFT__MSVC_VERB_HEARTBEAT)
		return;
	now = weft_now_ns();
	out->params.stage_us[WEFT_MSVC_STAGE_INBOUND] =
	    us_between(msg->read_ns, msg->dispatch_ns);
	out->params.stage_us[WEFT_MSVC_STAGE_QUEUE] =
	    us_between(msg->dispatch_ns, msg->run_ns);
	out->params.stage_us[WEFT_MSVC_STAGE_HANDLER] =
	    us_between(msg->run_ns, now);
	out->params.answered_ns = now;
}

size_t
weft__msvc_params_encode(const struct weft__msvc_out *out, uint64_t now_ns,
                         uint8_t *buf)
{
	const struct weft__msvc_out_params *pa = &out->params;
	bool tp = pa->traced && (out->flags & WEFT__MSVC_F_REQUEST);
	bool st = pa->answered_ns != 0 && (out->flags & WEFT__MSVC_F_RESPONSE);
	uint8_t raw[26];
	weft_mp_writer w;
	int i;

	if (!tp && !st)
		return 0;
	weft_mp_writer_init(&w, buf, WEFT__MSVC_PARAMS_MAX);
	weft_mp_write_map(&w, (uint32_t)tp + (uint32_t)st);
	if (tp) {
		raw[0] = 0;
		memcpy(raw + 1, pa->tp.trace_id, 16);
		memcpy(raw + 17, pa->tp.span_id, 8);
		raw[25] = pa->tp.flags;
		weft_mp_write_uint(&w, WEFT_PARAM_TRACEPARENT);
		weft_mp_write_bin(&w, raw, sizeof(raw));
	}
	if (st) {
		weft_mp_write_uint(&w, WEFT_PARAM_STAGE_US);
		weft_mp_write_array(&w, WEFT_MSVC_STAGES);
		for (i = 0; i < WEFT_MSVC_STAGE_SEND; i++)
			weft_mp_write_uint(&w, pa->stage_us[i]);
		weft_mp_write_uint(&w, us_between(pa->answered_ns, now_ns));
	}
	return weft_mp_writer_status(&w) == 0 ? weft_mp_writer_length(&w) : 0;
}

bool
weft__msvc_stages_decode(const weft_envelope *env, weft_msvc_stage_times *out)
{
	weft_mp_reader r;
	const void *value;
	size_t len;
	uint32_t n, i;

	if (env->params_len == 0 ||
	    weft_envelope_param_find(env->params, env->params_len,
	                             WEFT_PARAM_STAGE_US, &value, &len) != 0)
		return false;
	weft_mp_reader_init(&r, value, len);
	if (weft_mp_read_array(&r, &n) != 0 || n > WEFT_MSVC_STAGES_MAX)
		return false;
	for (i = 0; i < n; i++)
		if (weft_mp_read_uint(&r, UINT64_MAX, &out->us[i]) != 0)
			return false;
	out->n = n;
	return true;
}

/* Histograms of stage times: microseconds recorded as nanoseconds, as
 * the round trips are, within 1/16 up to 18 minutes. */
static void
record(struct weft__msvc_stage_hists *sh, const weft_msvc_stage_times *st)
{
	uint32_t i;

	for (i = 0; i < st->n && i < WEFT_MSVC_STAGES; i++) {
		if (sh->h[i] == NULL && weft__msvc_peer_lat_new(&sh->h[i]) != 0)
			continue;
		weft_histogram_record(sh->h[i], st->us[i] * 1000);
	}
}

void
weft__msvc_stages_record(struct weft__msvc_loop *ml, weft_msvc_peer *peer,
                         uint32_t verb, const weft_msvc_stage_times *st)
{
	record(&peer->stages, st);
	if (verb >= WEFT_MSVC_MAX_VERBS)
		return;
	if (ml->verb_stages == NULL &&
	    (ml->verb_stages =
	         calloc(WEFT_MSVC_MAX_VERBS, sizeof(*ml->verb_stages))) == NULL)
		return;
	if (ml->verb_stages[verb] == NULL &&
	    (ml->verb_stages[verb] = calloc(1, sizeof(**ml->verb_stages))) ==
	        NULL)
		return;
	record(ml->verb_stages[verb], st);
}

/* Copies src's histograms into dst's, making those dst lacks. */
static void
copy_hists(struct weft__msvc_stage_hists *dst,
           const struct weft__msvc_stage_hists *src)
{
	int i;

	for (i = 0; i < WEFT_MSVC_STAGES; i++) {
		if (src->h[i] == NULL)
			continue;
		if (dst->h[i] == NULL &&
		    weft__msvc_peer_lat_new(&dst->h[i]) != 0)
			continue;
		weft_histogram_reset(dst->h[i]);
		weft_histogram_merge(dst->h[i], src->h[i]);
	}
}

static void
snapshot_verbs(struct weft__msvc_loop *ml)
{
	uint32_t v;

	if (ml->verb_stages == NULL)
		return;
	pthread_mutex_lock(&ml->snap_lock);
	if (ml->verb_stages_snap == NULL)
		ml->verb_stages_snap =
		    calloc(WEFT_MSVC_MAX_VERBS, sizeof(*ml->verb_stages_snap));
	for (v = 0; ml->verb_stages_snap != NULL && v < WEFT_MSVC_MAX_VERBS;
	     v++) {
		if (ml->verb_stages[v] == NULL)
			continue;
		if (ml->verb_stages_snap[v] == NULL &&
		    (ml->verb_stages_snap[v] =
		         calloc(1, sizeof(**ml->verb_stages_snap))) == NULL)
			continue;
		copy_hists(ml->verb_stages_snap[v], ml->verb_stages[v]);
	}
	pthread_mutex_unlock(&ml->snap_lock);
}

void
weft__msvc_stages_snapshot(struct weft__msvc_loop *ml)
{
	weft_msvc *svc = ml->svc;
	uint32_t i;

	snapshot_verbs(ml);
	for (i = 0; i < svc->npeers; i++) {
		weft_msvc_peer *peer = svc->peers[i];

		if (peer->home != ml || peer->stages.h[0] == NULL)
			continue;
		pthread_mutex_lock(&peer->snap_lock);
		copy_hists(&peer->stages_snap, &peer->stages);
		pthread_mutex_unlock(&peer->snap_lock);
	}
}

void
weft__msvc_stages_free(struct weft__msvc_stage_hists *sh)
{
	int i;

	if (sh == NULL)
		return;
	for (i = 0; i < WEFT_MSVC_STAGES; i++) {
		weft_histogram_free(sh->h[i]);
		sh->h[i] = NULL;
	}
}

static void
free_verb_hists(struct weft__msvc_stage_hists **a)
{
	uint32_t v;

	if (a == NULL)
		return;
	for (v = 0; v < WEFT_MSVC_MAX_VERBS; v++) {
		weft__msvc_stages_free(a[v]);
		free(a[v]);
	}
	free(a);
}

void
weft__msvc_stages_loop_fini(struct weft__msvc_loop *ml)
{
	free_verb_hists(ml->verb_stages);
	free_verb_hists(ml->verb_stages_snap);
	ml->verb_stages = ml->verb_stages_snap = NULL;
}

/* ---- Spans ------------------------------------------------------------- */

static uint64_t
wall_ns(const weft_msvc *svc)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec +
	       (uint64_t)(svc->opts.clock_offset_ms * 1000000);
}

void
weft__msvc_span_end(struct weft__msvc_loop *ml, const struct weft__msvc_slot *s,
                    int status, const weft_msvc_stage_times *stages)
{
	weft_msvc *svc = ml->svc;
	weft_msvc_span span;
	uint64_t took;

	if (!s->traced || s->internal || svc->span_cb == NULL ||
	    !(s->tp.flags & WEFT_MSVC_TRACE_SAMPLED))
		return;
	took = weft_now_ns() - s->start_ns;
	memset(&span, 0, sizeof(span));
	span.context = s->tp;
	memcpy(span.parent_span_id, s->parent_span_id,
	       sizeof(span.parent_span_id));
	span.end_unix_ns = wall_ns(svc);
	span.start_unix_ns = span.end_unix_ns - took;
	span.peer = s->peer->id;
	span.verb = s->verb;
	if (s->verb < WEFT_MSVC_MAX_VERBS)
		span.verb_name = svc->verbs[s->verb].name;
	span.status = status;
	span.stages = stages;
	svc->span_cb(svc, &span, svc->span_arg);
}

int
weft__msvc_peer_lat_new(weft_histogram **out)
{
	const weft_histogram_opts o = {
	    .sub_bits = WEFT__MSVC_PEER_LAT_SUB_BITS,
	    .max_value = WEFT__MSVC_PEER_LAT_MAX_NS,
	};

	return weft_histogram_new_opts(&o, out);
}
