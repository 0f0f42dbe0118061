/* SPDX-License-Identifier: MIT */
/* metrics.c: counters, latency snapshots and the Prometheus text dump. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "msvc_int.h"

#define LOAD(x) weft__msvc_relaxed(&(x))

/*
 * weft_loop_get_stats is only race-free on the loop's own thread, so each
 * loop copies its wake-up count into an atomic of ours (every second, and
 * when a reader asks from that thread).
 */
void
weft__msvc_cache_wakeups(struct weft__msvc_loop *ml)
{
	weft_loop_stats ls;

	weft_loop_get_stats(ml->loop, &ls);
	atomic_store_explicit(&ml->wakeups, ls.wakeups, memory_order_relaxed);
}

/* Publishes this loop's per-verb round trips (see weft__msvc_loop). */
static void
snapshot_verbs(struct weft__msvc_loop *ml)
{
	uint32_t v;

	if (ml->verb_lat == NULL)
		return;
	pthread_mutex_lock(&ml->snap_lock);
	for (v = 0; v < WEFT_MSVC_MAX_VERBS; v++) {
		if (ml->verb_lat[v] == NULL)
			continue;
		if (ml->verb_snap[v] == NULL &&
		    weft_histogram_new(&ml->verb_snap[v]) != 0)
			continue;
		weft_histogram_reset(ml->verb_snap[v]);
		weft_histogram_merge(ml->verb_snap[v], ml->verb_lat[v]);
	}
	pthread_mutex_unlock(&ml->snap_lock);
}

/* Merges every loop's snapshot of verb's round trips into a histogram of
 * the caller's; NULL when out of memory. */
static weft_histogram *
verb_merged(const weft_msvc *svc, uint32_t verb)
{
	weft_histogram *sum;
	uint32_t i;

	if (weft_histogram_new(&sum) != 0)
		return NULL;
	for (i = 0; i < svc->nloops; i++) {
		struct weft__msvc_loop *ml = &svc->loops[i];

		if (ml->verb_snap == NULL)
			continue;
		pthread_mutex_lock(&ml->snap_lock);
		if (ml->verb_snap[verb] != NULL)
			weft_histogram_merge(sum, ml->verb_snap[verb]);
		pthread_mutex_unlock(&ml->snap_lock);
	}
	return sum;
}

static void
verb_latency(const weft_msvc *svc, uint32_t verb, weft_msvc_verb_stats *out)
{
	weft_histogram *sum = verb_merged(svc, verb);

	if (sum == NULL)
		return;
	out->latency_count = weft_histogram_count(sum);
	out->latency_p50_ns = weft_histogram_percentile(sum, 50);
	out->latency_p99_ns = weft_histogram_percentile(sum, 99);
	out->latency_max_ns = weft_histogram_max(sum);
	weft_histogram_free(sum);
}

/* Every second, each loop publishes the latency of the peers it is home
 * for, so readers on other threads never touch a live histogram. */
void
weft__msvc_stats_tick(weft_timer *t, void *arg)
{
	struct weft__msvc_loop *ml = arg;
	weft_msvc *svc = ml->svc;
	uint32_t i;

	(void)t;
	weft__msvc_cache_wakeups(ml);
	snapshot_verbs(ml);
	weft__msvc_stages_snapshot(ml);
	for (i = 0; i < svc->npeers; i++) {
		weft_msvc_peer *peer = svc->peers[i];

		if (peer->home != ml)
			continue;
		if (peer->lat == NULL)
			continue;
		pthread_mutex_lock(&peer->snap_lock);
		peer->snap_count = weft_histogram_count(peer->lat);
		peer->snap_p50_ns = weft_histogram_percentile(peer->lat, 50);
		peer->snap_p99_ns = weft_histogram_percentile(peer->lat, 99);
		peer->snap_max_ns = weft_histogram_max(peer->lat);
		weft_metrics_latency_counts(peer->lat, peer->snap_buckets);
		peer->snap_sum_ns = weft_histogram_sum(peer->lat);
		pthread_mutex_unlock(&peer->snap_lock);
	}
}

void
weft_msvc_peer_get_stats(const weft_msvc_peer *cpeer, weft_msvc_peer_stats *out)
{
	weft_msvc_peer *peer = (weft_msvc_peer *)cpeer;
	struct weft__msvc_pstats *s = &peer->st;

	memset(out, 0, sizeof(*out));
	out->sent = LOAD(s->sent);
	out->received = LOAD(s->received);
	out->bytes_sent = LOAD(s->bytes_sent);
	out->bytes_received = LOAD(s->bytes_received);
	out->dropped_expired = LOAD(s->dropped_expired);
	out->dropped_overload = LOAD(s->dropped_overload);
	out->timed_out = LOAD(s->timed_out);
	out->failed_peer_down = LOAD(s->failed_peer_down);
	out->pending = LOAD(s->pending);
	out->queued_bytes = atomic_load(&peer->queued_bytes);
	out->connects = LOAD(s->connects);
	out->connect_failures = LOAD(s->connect_failures);
	out->downs = LOAD(s->downs);
	out->body_bytes_out = LOAD(s->body_bytes_out);
	out->wire_bytes_out = LOAD(s->wire_bytes_out);
	out->body_bytes_in = LOAD(s->body_bytes_in);
	out->wire_bytes_in = LOAD(s->wire_bytes_in);
	out->chunked_sent = LOAD(s->chunked_sent);
	out->chunked_received = LOAD(s->chunked_received);
	pthread_mutex_lock(&peer->snap_lock);
	out->latency_count = peer->snap_count;
	out->latency_p50_ns = peer->snap_p50_ns;
	out->latency_p99_ns = peer->snap_p99_ns;
	out->latency_max_ns = peer->snap_max_ns;
	pthread_mutex_unlock(&peer->snap_lock);
	out->clock_known = atomic_load(&peer->clock.known);
	out->clock_measured = atomic_load(&peer->clock.measured);
	out->clock_offset_ms =
	    out->clock_known ? atomic_load(&peer->clock.offset_ms) : 0;
	out->clock_rtt_ms = out->clock_measured
	                        ? (uint64_t)atomic_load(&peer->clock.rtt_ms)
	                        : 0;
	out->clock_skew_exceeded = atomic_load(&peer->clock.flagged);
}

void
weft_msvc_verb_get_stats(const weft_msvc *svc, uint32_t verb,
                         weft_msvc_verb_stats *out)
{
	struct weft__msvc_verb *v;

	memset(out, 0, sizeof(*out));
	if (verb >= WEFT_MSVC_MAX_VERBS)
		return;
	v = &svc->verbs[verb];
	out->received = LOAD(v->received);
	out->handled = LOAD(v->handled);
	out->responded = LOAD(v->responded);
	out->sent = LOAD(v->sent);
	out->expired = LOAD(v->expired);
	out->bytes_received = LOAD(v->bytes_received);
	out->bytes_sent = LOAD(v->bytes_sent);
	out->timed_out = LOAD(v->timed_out);
	out->dropped_overload = LOAD(v->dropped_overload);
	out->pending = LOAD(v->pending);
	out->in_progress =
	    atomic_load_explicit(&v->in_progress, memory_order_relaxed);
	out->over_limit = LOAD(v->over_limit);
	verb_latency(svc, verb, out);
}

void
weft_msvc_get_stats(const weft_msvc *csvc, weft_msvc_stats *out)
{
	weft_msvc *svc = (weft_msvc *)csvc;
	struct weft__msvc_nstats *s = &svc->st;
	uint32_t i;

	memset(out, 0, sizeof(*out));
	for (i = 0; i < svc->nloops; i++) {
		struct weft__msvc_rstats *r = &svc->loops[i].rs;

		out->read_batches += LOAD(r->read_batches);
		out->messages_in += LOAD(r->messages_in);
		out->drain_batches += LOAD(r->drain_batches);
		out->messages_out += LOAD(r->messages_out);
		out->handoffs += LOAD(r->handoffs);
		out->write_calls += LOAD(r->write_calls);
		out->bytes_written += LOAD(r->bytes_written);
		out->read_yields += LOAD(r->read_yields);
		if (weft_loop_in_thread(svc->loops[i].loop))
			weft__msvc_cache_wakeups(&svc->loops[i]);
		out->loop_wakeups += LOAD(svc->loops[i].wakeups);
	}
	out->expired_in_queue = LOAD(s->expired_in_queue);
	out->expired_on_arrival = LOAD(s->expired_on_arrival);
	out->expired_before_handler = LOAD(s->expired_before_handler);
	out->overloaded = LOAD(s->overloaded);
	out->read_pauses = LOAD(s->read_pauses);
	out->rate_limited = LOAD(s->rate_limited);
	out->inflight_bytes =
	    atomic_load(&svc->inflight) + atomic_load(&svc->urgent_inflight);
	out->pending_requests = atomic_load(&svc->pending);
	out->bad_frames = LOAD(s->bad_frames);
	out->oversized_frames = LOAD(s->oversized_frames);
	out->bad_envelopes = LOAD(s->bad_envelopes);
	out->bad_compressed = LOAD(s->bad_compressed);
	out->bad_chunks = LOAD(s->bad_chunks);
	out->oversized_messages = LOAD(s->oversized_messages);
	out->handshakes_refused = LOAD(s->handshakes_refused);
	out->unknown_verbs = LOAD(s->unknown_verbs);
	out->forbidden_requests = LOAD(s->forbidden_requests);
	out->late_responses = LOAD(s->late_responses);
	out->forged_responses = LOAD(s->forged_responses);
	out->clients_refused = LOAD(s->clients_refused);
	out->handshakes_dropped =
	    LOAD(s->handshakes_dropped) + LOAD(svc->door_dropped);
	out->client_pauses = LOAD(s->client_pauses);
	out->stalled_clients = LOAD(s->stalled_clients);
	out->idle_clients = LOAD(s->idle_clients);
	out->frame_timeouts = LOAD(s->frame_timeouts);
	out->superseded_connections = LOAD(s->superseded_connections);
	out->superseded_messages = LOAD(s->superseded_messages);
	out->clients_open = atomic_load(&svc->clients);
	out->client_queued_bytes = atomic_load(&svc->client_queued);
	out->connections_accepted = LOAD(s->connections_accepted);
	out->connections_open = LOAD(s->connections_open);
	out->heartbeats_missed = LOAD(s->heartbeats_missed);
	out->peer_downs = LOAD(s->peer_downs);
	out->worker_jobs = LOAD(s->worker_jobs);
	out->cancelled_requests = LOAD(s->cancelled_requests);
	out->cancelled_responses = LOAD(s->cancelled_responses);
	out->cancels_received = LOAD(s->cancels_received);
	out->cancels_unknown = LOAD(s->cancels_unknown);
	out->cancelled_jobs = LOAD(s->cancelled_jobs);
	out->bad_traceparents = LOAD(s->bad_traceparents);
}

/* ---- Prometheus text --------------------------------------------------- */

struct metric {
	const char *name;
	const char *type;
	const char *help;
	size_t offset; /* in weft_msvc_stats / peer / verb stats */
};

#define NODE_METRIC(field, type, help)                                         \
	{                                                                      \
#field, type, help, offsetof(weft_msvc_stats, field)           \
	}
static const struct metric node_metrics[] = {
    NODE_METRIC(read_batches, "counter", "Inbound read events handled."),
    NODE_METRIC(messages_in, "counter", "Messages decoded."),
    NODE_METRIC(drain_batches, "counter",
                "Flushes of encoded messages to connections."),
    NODE_METRIC(messages_out, "counter", "Messages encoded."),
    NODE_METRIC(handoffs, "counter", "Messages passed between threads."),
    NODE_METRIC(write_calls, "counter", "Socket writes."),
    NODE_METRIC(bytes_written, "counter", "Bytes taken by socket writes."),
    NODE_METRIC(loop_wakeups, "counter", "Cross-thread loop wake-ups."),
    NODE_METRIC(expired_in_queue, "counter", "Expired before sending."),
    NODE_METRIC(expired_on_arrival, "counter", "Expired on arrival."),
    NODE_METRIC(expired_before_handler, "counter",
                "Expired waiting for a worker."),
    NODE_METRIC(overloaded, "counter", "Sends refused by a limit."),
    NODE_METRIC(read_pauses, "counter", "Reads paused for inflight bytes."),
    NODE_METRIC(read_yields, "counter",
                "Read turns given up at the read budget (fairness)."),
    NODE_METRIC(rate_limited, "counter",
                "Clients paused for their rate limit."),
    NODE_METRIC(inflight_bytes, "gauge", "Inbound bytes being handled."),
    NODE_METRIC(pending_requests, "gauge", "Requests awaiting answers."),
    NODE_METRIC(bad_frames, "counter", "Frames with a bad checksum."),
    NODE_METRIC(oversized_frames, "counter", "Frames over the limit."),
    NODE_METRIC(bad_envelopes, "counter", "Invalid envelopes."),
    NODE_METRIC(bad_compressed, "counter",
                "Compressed frames refused: corrupt, or past a bound."),
    NODE_METRIC(bad_chunks, "counter",
                "Chunks refused: out of order, or past max_message."),
    NODE_METRIC(oversized_messages, "counter",
                "Messages above max_frame for a peer that takes no chunks: "
                "failed."),
    NODE_METRIC(handshakes_refused, "counter", "Handshakes refused."),
    NODE_METRIC(unknown_verbs, "counter", "Messages for unknown verbs."),
    NODE_METRIC(forbidden_requests, "counter",
                "Messages from clients for members-only verbs."),
    NODE_METRIC(late_responses, "counter", "Responses nobody waited for."),
    NODE_METRIC(forged_responses, "counter",
                "Responses from a peer that was not asked: connection closed."),
    NODE_METRIC(clients_refused, "counter",
                "Client handshakes refused: too many clients."),
    NODE_METRIC(
        handshakes_dropped, "counter",
        "Connections closed in their handshake to make room, or refused."),
    NODE_METRIC(client_pauses, "counter",
                "Clients no longer read: their answers backed up."),
    NODE_METRIC(stalled_clients, "counter",
                "Clients closed: not reading their answers."),
    NODE_METRIC(idle_clients, "counter", "Clients closed: idle."),
    NODE_METRIC(frame_timeouts, "counter",
                "Connections closed: a frame not completed in time."),
    NODE_METRIC(superseded_connections, "counter",
                "Member connections closed: a newer one of their class and "
                "index was accepted."),
    NODE_METRIC(superseded_messages, "counter",
                "Messages dropped: they came on a superseded connection."),
    NODE_METRIC(clients_open, "gauge", "Client connections open."),
    NODE_METRIC(client_queued_bytes, "gauge",
                "Answer bytes queued for clients."),
    NODE_METRIC(connections_accepted, "counter", "Connections accepted."),
    NODE_METRIC(connections_open, "gauge", "Connections open."),
    NODE_METRIC(heartbeats_missed, "counter", "Heartbeats missed."),
    NODE_METRIC(peer_downs, "counter", "Peers marked down."),
    NODE_METRIC(cancelled_requests, "counter",
                "Requests of this node ended by a cancel."),
    NODE_METRIC(cancelled_responses, "counter",
                "Answers to cancelled requests: dropped."),
    NODE_METRIC(cancels_received, "counter",
                "Cancels from peers that found their request."),
    NODE_METRIC(cancels_unknown, "counter",
                "Cancels from peers for no request in progress: ignored."),
    NODE_METRIC(cancelled_jobs, "counter",
                "Cancelled requests not run: still queued for a worker."),
    NODE_METRIC(bad_traceparents, "counter",
                "Trace contexts from peers not valid by W3C: ignored."),
    NODE_METRIC(worker_jobs, "counter", "Handlers run on workers."),
};

#define PEER_METRIC(field, type, help)                                         \
	{                                                                      \
#field, type, help, offsetof(weft_msvc_peer_stats, field)      \
	}
static const struct metric peer_metrics[] = {
    PEER_METRIC(sent, "counter", "Messages written to the peer."),
    PEER_METRIC(received, "counter", "Messages read from the peer."),
    PEER_METRIC(bytes_sent, "counter", "Frame bytes written."),
    PEER_METRIC(bytes_received, "counter", "Frame bytes read."),
    PEER_METRIC(dropped_expired, "counter", "Messages dropped expired."),
    PEER_METRIC(dropped_overload, "counter", "Sends refused: queue full."),
    PEER_METRIC(timed_out, "counter", "Requests timed out."),
    PEER_METRIC(failed_peer_down, "counter", "Requests failed: peer down."),
    PEER_METRIC(pending, "gauge", "Requests awaiting answers."),
    PEER_METRIC(queued_bytes, "gauge", "Outbound bytes not yet written."),
    PEER_METRIC(connects, "counter", "Handshakes completed."),
    PEER_METRIC(connect_failures, "counter", "Dials that failed."),
    PEER_METRIC(downs, "counter", "Times marked down."),
    PEER_METRIC(body_bytes_out, "counter",
                "Frame body bytes sent, before compression."),
    PEER_METRIC(wire_bytes_out, "counter",
                "Frame body bytes sent, as they travelled."),
    PEER_METRIC(body_bytes_in, "counter",
                "Frame body bytes received, after decompression."),
    PEER_METRIC(wire_bytes_in, "counter",
                "Frame body bytes received, as they travelled."),
    PEER_METRIC(chunked_sent, "counter", "Messages sent as chunks."),
    PEER_METRIC(chunked_received, "counter", "Messages received as chunks."),
};

#define VERB_METRIC(field, help)                                               \
	{                                                                      \
#field, "counter", help, offsetof(weft_msvc_verb_stats, field) \
	}
static const struct metric verb_metrics[] = {
    VERB_METRIC(received, "Messages that arrived."),
    VERB_METRIC(handled, "Handler calls."),
    VERB_METRIC(responded, "Responses sent."),
    VERB_METRIC(sent, "Messages sent."),
    VERB_METRIC(expired, "Dropped before the handler."),
    VERB_METRIC(bytes_received, "Payload bytes received."),
    VERB_METRIC(bytes_sent, "Payload bytes sent."),
    VERB_METRIC(timed_out, "Requests that timed out."),
    VERB_METRIC(dropped_overload, "Sends refused: queue full."),
    {"pending", "gauge", "Requests awaiting a response.",
     offsetof(weft_msvc_verb_stats, pending)},
    {"in_progress", "gauge", "Requests in progress here (with a cap).",
     offsetof(weft_msvc_verb_stats, in_progress)},
    VERB_METRIC(over_limit, "Requests refused: the verb's cap."),
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

static void
header(struct evbuffer *out, const char *group, const struct metric *m)
{
	const char *suffix = strcmp(m->type, "counter") == 0 ? "_total" : "";

	evbuffer_add_printf(out, "# HELP weft_msvc_%s_%s%s %s\n", group,
	                    m->name, suffix, m->help);
	evbuffer_add_printf(out, "# TYPE weft_msvc_%s_%s%s %s\n", group,
	                    m->name, suffix, m->type);
}

/* The labels of a sample, key="value" pairs (values escaped: a verb's
 * name is anything its registrant chose), up to three. */
static void
labels(char *buf, size_t cap, const char *k1, const char *v1, const char *k2,
       const char *v2, const char *k3, const char *v3)
{
	const char *keys[3] = {k1, k2, k3}, *values[3] = {v1, v2, v3};
	size_t len = 0;
	int i, n;

	buf[0] = '\0';
	for (i = 0; i < 3 && keys[i] != NULL && len + 4 < cap; i++) {
		n = snprintf(buf + len, cap - len, "%s%s=\"", i ? "," : "",
		             keys[i]);
		if (n < 0 || (size_t)n + 2 >= cap - len)
			break;
		len += (size_t)n;
		weft_metrics_escape(buf + len, cap - len - 1, values[i]);
		len += strlen(buf + len);
		buf[len++] = '"';
		buf[len] = '\0';
	}
}

static const char *
suffix_of(const struct metric *m)
{
	return strcmp(m->type, "counter") == 0 ? "_total" : "";
}

static void
dump_node(weft_msvc *svc, struct evbuffer *out)
{
	char lb[160];
	weft_msvc_stats s;
	size_t i;

	weft_msvc_get_stats(svc, &s);
	labels(lb, sizeof(lb), "node", svc->id, NULL, NULL, NULL, NULL);
	for (i = 0; i < N(node_metrics); i++) {
		const struct metric *m = &node_metrics[i];
		uint64_t v = *(const uint64_t *)((const char *)&s + m->offset);

		header(out, "node", m);
		evbuffer_add_printf(out,
		                    "weft_msvc_node_%s%s{%s} %" PRIu64 "\n",
		                    m->name, suffix_of(m), lb, v);
	}
}

/* The members this node talks to: not itself (its entry would be all
 * zeros). */
static bool
is_remote(const weft_msvc_peer *peer)
{
	return !peer->is_self && !weft__msvc_peer_left(peer);
}

static void
dump_peer_up(weft_msvc *svc, struct evbuffer *out)
{
	char lb[320];
	size_t p;

	evbuffer_add_printf(out, "# HELP weft_msvc_peer_up Whether the peer is "
	                         "up (1) or down (0).\n"
	                         "# TYPE weft_msvc_peer_up gauge\n");
	for (p = 0; p < svc->npeers; p++) {
		if (!is_remote(svc->peers[p]))
			continue;
		labels(lb, sizeof(lb), "node", svc->id, "peer",
		       svc->peers[p]->id, NULL, NULL);
		evbuffer_add_printf(out, "weft_msvc_peer_up{%s} %d\n", lb,
		                    weft_msvc_peer_is_up(svc->peers[p]) ? 1
		                                                        : 0);
	}
}

/* Round trips per peer, from the last second's snapshot: a Prometheus
 * histogram, cumulative over the node's life. */
static void
dump_peer_latency(weft_msvc *svc, struct evbuffer *out)
{
	uint64_t counts[WEFT_METRICS_LATENCY_BUCKETS + 1];
	char lb[320];
	double sum;
	size_t p;

	evbuffer_add_printf(out, "# HELP weft_msvc_peer_latency_seconds "
	                         "Request round trips to the peer.\n"
	                         "# TYPE weft_msvc_peer_latency_seconds "
	                         "histogram\n");
	for (p = 0; p < svc->npeers; p++) {
		weft_msvc_peer *peer = svc->peers[p];

		if (!is_remote(peer))
			continue;
		pthread_mutex_lock(&peer->snap_lock);
		memcpy(counts, peer->snap_buckets, sizeof(counts));
		sum = peer->snap_sum_ns;
		pthread_mutex_unlock(&peer->snap_lock);
		labels(lb, sizeof(lb), "node", svc->id, "peer", peer->id, NULL,
		       NULL);
		weft_metrics_histogram_counts(out,
		                              "weft_msvc_peer_latency_seconds",
		                              lb, counts, sum / 1e9);
	}
}

/* The stages of weft_msvc_stage, as metric labels. */
static const char *const stage_names[WEFT_MSVC_STAGES] = {
    "inbound",
    "queue",
    "handler",
    "send",
};

/* The peers' stage times from their answers (trace.c), from the last
 * second's copy. */
static void
dump_peer_stages(weft_msvc *svc, struct evbuffer *out)
{
	char lb[320];
	size_t p;
	int s;

	evbuffer_add_printf(out, "# HELP weft_msvc_peer_stage_seconds "
	                         "Time this node's requests spent in each "
	                         "stage at the peer, as its answers say.\n"
	                         "# TYPE weft_msvc_peer_stage_seconds "
	                         "histogram\n");
	for (p = 0; p < svc->npeers; p++) {
		weft_msvc_peer *peer = svc->peers[p];

		if (!is_remote(peer))
			continue;
		pthread_mutex_lock(&peer->snap_lock);
		for (s = 0; s < WEFT_MSVC_STAGES; s++) {
			if (peer->stages_snap.h[s] == NULL)
				continue;
			labels(lb, sizeof(lb), "node", svc->id, "peer",
			       peer->id, "stage", stage_names[s]);
			weft_metrics_histogram(out,
			                       "weft_msvc_peer_stage_seconds",
			                       lb, peer->stages_snap.h[s]);
		}
		pthread_mutex_unlock(&peer->snap_lock);
	}
}

/* One gauge per remote peer, value(ps[p]) for each: what the table of
 * counters above cannot hold (signed, or not a count). */
static void
dump_peer_gauge(weft_msvc *svc, const weft_msvc_peer_stats *ps, size_t n,
                struct evbuffer *out, const char *name, const char *help,
                double (*value)(const weft_msvc_peer_stats *))
{
	char lb[320];
	size_t p;

	evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s gauge\n", name, help,
	                    name);
	for (p = 0; p < n; p++) {
		if (!is_remote(svc->peers[p]))
			continue;
		labels(lb, sizeof(lb), "node", svc->id, "peer",
		       svc->peers[p]->id, NULL, NULL);
		evbuffer_add_printf(out, "%s{%s} %.3f\n", name, lb,
		                    value(&ps[p]));
	}
}

static double
clock_offset_s(const weft_msvc_peer_stats *ps)
{
	return (double)ps->clock_offset_ms / 1e3;
}

static double
clock_skew_exceeded(const weft_msvc_peer_stats *ps)
{
	return ps->clock_skew_exceeded ? 1 : 0;
}

/* Each peer's clock as this node estimates it. */
static void
dump_peer_clock(weft_msvc *svc, const weft_msvc_peer_stats *ps, size_t n,
                struct evbuffer *out)
{
	dump_peer_gauge(svc, ps, n, out, "weft_msvc_peer_clock_offset_seconds",
	                "The peer's wall clock minus this node's, as "
	                "estimated (0 until known).",
	                clock_offset_s);
	dump_peer_gauge(svc, ps, n, out, "weft_msvc_peer_clock_skew_exceeded",
	                "Whether the peer's clock is further off than "
	                "max_clock_skew (1) or not (0).",
	                clock_skew_exceeded);
}

static void
dump_peers(weft_msvc *svc, struct evbuffer *out)
{
	weft_msvc_peer_stats *ps;
	char lb[320];
	/* Members added meanwhile are in the next dump. */
	size_t i, p, n = atomic_load(&svc->npeers);

	if ((ps = calloc(n ? n : 1, sizeof(*ps))) == NULL)
		return;
	for (p = 0; p < n; p++)
		weft_msvc_peer_get_stats(svc->peers[p], &ps[p]);
	dump_peer_up(svc, out);
	for (i = 0; i < N(peer_metrics); i++) {
		const struct metric *m = &peer_metrics[i];

		header(out, "peer", m);
		for (p = 0; p < n; p++) {
			if (!is_remote(svc->peers[p]))
				continue;
			labels(lb, sizeof(lb), "node", svc->id, "peer",
			       svc->peers[p]->id, NULL, NULL);
			evbuffer_add_printf(
			    out, "weft_msvc_peer_%s%s{%s} %" PRIu64 "\n",
			    m->name, suffix_of(m), lb,
			    *(const uint64_t *)((const char *)&ps[p] +
			                        m->offset));
		}
	}
	dump_peer_latency(svc, out);
	dump_peer_stages(svc, out);
	dump_peer_clock(svc, ps, n, out);
	free(ps);
}

/* True when some loop has a snapshot of verb's round trips. */
static bool
verb_has_latency(weft_msvc *svc, uint32_t verb)
{
	bool has = false;
	uint32_t i;

	for (i = 0; i < svc->nloops && !has; i++) {
		struct weft__msvc_loop *ml = &svc->loops[i];

		if (ml->verb_snap == NULL)
			continue;
		pthread_mutex_lock(&ml->snap_lock);
		has = ml->verb_snap[verb] != NULL;
		pthread_mutex_unlock(&ml->snap_lock);
	}
	return has;
}

/* The round trips of this node's requests, by verb (also verbs that only
 * peers serve, which have a number but no name here). */
static void
dump_verb_latency(weft_msvc *svc, struct evbuffer *out)
{
	char lb[600], number[16];
	weft_histogram *h;
	uint32_t v;

	evbuffer_add_printf(out, "# HELP weft_msvc_verb_latency_seconds "
	                         "Request round trips by verb.\n"
	                         "# TYPE weft_msvc_verb_latency_seconds "
	                         "histogram\n");
	for (v = 0; v < WEFT_MSVC_MAX_VERBS; v++) {
		if (!verb_has_latency(svc, v) ||
		    (h = verb_merged(svc, v)) == NULL)
			continue;
		snprintf(number, sizeof(number), "%u", (unsigned)v);
		labels(lb, sizeof(lb), "node", svc->id, "number", number, NULL,
		       NULL);
		weft_metrics_histogram(out, "weft_msvc_verb_latency_seconds",
		                       lb, h);
		weft_histogram_free(h);
	}
}

/* Merges every loop's copy of verb's stage s into sum; false if none
 * has one. */
static bool
verb_stage_merged(weft_msvc *svc, uint32_t verb, int s, weft_histogram *sum)
{
	bool has = false;
	uint32_t i;

	weft_histogram_reset(sum);
	for (i = 0; i < svc->nloops; i++) {
		struct weft__msvc_loop *ml = &svc->loops[i];

		pthread_mutex_lock(&ml->snap_lock);
		if (ml->verb_stages_snap != NULL &&
		    ml->verb_stages_snap[verb] != NULL &&
		    ml->verb_stages_snap[verb]->h[s] != NULL) {
			weft_histogram_merge(sum,
			                     ml->verb_stages_snap[verb]->h[s]);
			has = true;
		}
		pthread_mutex_unlock(&ml->snap_lock);
	}
	return has;
}

/* The stage times of this node's requests at their responders, by verb. */
static void
dump_verb_stages(weft_msvc *svc, struct evbuffer *out)
{
	char lb[600], number[16];
	weft_histogram *h;
	uint32_t v;
	int s;

	if (weft__msvc_peer_lat_new(&h) != 0)
		return;
	evbuffer_add_printf(out, "# HELP weft_msvc_verb_stage_seconds "
	                         "Time this node's requests spent in each "
	                         "stage at their responders, by verb.\n"
	                         "# TYPE weft_msvc_verb_stage_seconds "
	                         "histogram\n");
	for (v = 0; v < WEFT_MSVC_MAX_VERBS; v++) {
		for (s = 0; s < WEFT_MSVC_STAGES; s++) {
			if (!verb_stage_merged(svc, v, s, h))
				continue;
			snprintf(number, sizeof(number), "%u", (unsigned)v);
			labels(lb, sizeof(lb), "node", svc->id, "number",
			       number, "stage", stage_names[s]);
			weft_metrics_histogram(
			    out, "weft_msvc_verb_stage_seconds", lb, h);
		}
	}
	weft_histogram_free(h);
}

static void
dump_verbs(weft_msvc *svc, struct evbuffer *out)
{
	char lb[600], number[16];
	weft_msvc_verb_stats vs;
	size_t i;
	uint32_t v;

	for (i = 0; i < N(verb_metrics); i++) {
		const struct metric *m = &verb_metrics[i];

		header(out, "verb", m);
		for (v = 0; v < WEFT_MSVC_MAX_VERBS; v++) {
			if (svc->verbs[v].name == NULL)
				continue;
			weft_msvc_verb_get_stats(svc, v, &vs);
			snprintf(number, sizeof(number), "%u", (unsigned)v);
			labels(lb, sizeof(lb), "node", svc->id, "verb",
			       svc->verbs[v].name, "number", number);
			evbuffer_add_printf(
			    out, "weft_msvc_verb_%s%s{%s} %" PRIu64 "\n",
			    m->name, suffix_of(m), lb,
			    *(const uint64_t *)((const char *)&vs + m->offset));
		}
	}
	dump_verb_latency(svc, out);
	dump_verb_stages(svc, out);
}

int
weft_msvc_metrics_dump(weft_msvc *svc, struct evbuffer *out)
{
	size_t before = evbuffer_get_length(out);

	dump_node(svc, out);
	dump_peers(svc, out);
	dump_verbs(svc, out);
	return evbuffer_get_length(out) > before ? 0 : WEFT_ENOMEM;
}
