/* SPDX-License-Identifier: MIT */
/*
 * test_trace.c: what requests and answers carry in their params
 * (docs/PROTOCOL.md 4.5): the stage times of every answer, read in the
 * reply callback and counted per peer and per verb, absent with a peer of
 * version 1; the trace context across three nodes, the span hook, the
 * sampling rate; and a malformed traceparent from a raw socket.
 */
#include <inttypes.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include <weft/core.h>
#include <weft/envelope.h>
#include <weft/messaging.h>

#include "cluster.h"
#include "rawpeer.h"

static struct cluster cl;

/* ---- Stage times ------------------------------------------------------- */

/* One request whose reply callback looks at its stage times. */
struct timed {
	uint64_t start_ns;
	_Atomic int done;
	int status;
	int stages_rv; /* weft_msvc_reply_stages's */
	weft_msvc_stage_times stages;
	uint64_t round_trip_ns;
};

static void
on_timed(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	struct timed *t = arg;
	const weft_msvc_stage_times *st;

	(void)svc;
	(void)data;
	(void)len;
	t->round_trip_ns = weft_now_ns() - t->start_ns;
	t->status = status;
	t->stages_rv = weft_msvc_reply_stages(&st);
	if (t->stages_rv == 0)
		t->stages = *st;
	atomic_store(&t->done, 1);
	test_poke();
}

static bool
timed_done(void *arg)
{
	return atomic_load(&((struct timed *)arg)->done) != 0;
}

/* Asks n1's peer n2 verb and waits for its end. */
static void
ask_timed(uint32_t verb, struct timed *t)
{
	memset(t, 0, sizeof(*t));
	t->start_ns = weft_now_ns();
	assert_int_equal(weft_msvc_request(cl.svc[0], cluster_peer(&cl, 0, 1),
	                                   verb, "hi", 2, NULL, on_timed, t),
	                 0);
	assert_true(test_wait(timed_done, t, 5000));
}

static bool
metrics_have(void *arg)
{
	struct evbuffer *b = evbuffer_new();
	const char *want = arg;
	bool has;

	assert_int_equal(weft_msvc_metrics_dump(cl.svc[0], b), 0);
	evbuffer_add(b, "", 1);
	has = strstr((const char *)evbuffer_pullup(b, -1), want) != NULL;
	evbuffer_free(b);
	return has;
}

/* Every answer from a peer of version 2 has its four stage times, inline
 * and on the pool, and they add up to no more than the round trip the
 * caller measured; they are in the node's metrics per peer and verb. */
/* Nodes that put their stage times in every answer. */
static const struct cluster_opts stage_opts = {.stage_times = true};

static void
test_stage_times_add_up_within_the_round_trip(void **state)
{
	static const uint32_t verbs[] = {VERB_ECHO, VERB_ECHO_BLOCK};
	const weft_msvc_stage_times *outside;
	struct timed t;
	uint64_t sum;
	size_t v;
	int i;

	(void)state;
	assert_int_equal(cluster_start_with(&cl, 2, &stage_opts), 0);
	for (v = 0; v < sizeof(verbs) / sizeof(verbs[0]); v++) {
		for (i = 0; i < 20; i++) {
			ask_timed(verbs[v], &t);
			assert_int_equal(t.status, 0);
			assert_int_equal(t.stages_rv, 0);
			assert_int_equal(t.stages.n, WEFT_MSVC_STAGES);
			sum = t.stages.us[0] + t.stages.us[1] + t.stages.us[2] +
			      t.stages.us[3];
			if (sum * 1000 > t.round_trip_ns)
				fail_msg("stages %" PRIu64 " us > round trip "
				         "%" PRIu64 " ns",
				         sum, t.round_trip_ns);
		}
	}
	/* Only inside a reply callback. */
	assert_int_equal(weft_msvc_reply_stages(&outside), WEFT_ENOTFOUND);
	assert_true(test_wait(metrics_have,
	                      "weft_msvc_peer_stage_seconds_count{node=\"n1\","
	                      "peer=\"n2\",stage=\"handler\"} 40",
	                      5000));
	assert_true(test_wait(metrics_have,
	                      "weft_msvc_verb_stage_seconds_count{node=\"n1\","
	                      "number=\"20\",stage=\"queue\"} 20",
	                      5000));
	cluster_stop(&cl);
}

/* An error answer carries them too; a peer of version 1 sends none, nor
 * does a node without stage_times to a request without a trace. */
static void
test_no_stage_times_from_a_version_1_peer(void **state)
{
	struct cluster_opts o = {.max_version = {0, 1}, .stage_times = true};
	struct timed t;

	(void)state;
	assert_int_equal(cluster_start_with(&cl, 2, &o), 0);
	ask_timed(VERB_ECHO, &t);
	assert_int_equal(t.status, 0);
	assert_int_equal(t.stages_rv, WEFT_ENOTFOUND);
	cluster_stop(&cl);

	assert_int_equal(cluster_start(&cl, 2, NULL), 0);
	ask_timed(VERB_ECHO, &t);
	assert_int_equal(t.status, 0);
	assert_int_equal(t.stages_rv, WEFT_ENOTFOUND);
	cluster_stop(&cl);

	assert_int_equal(cluster_start_with(&cl, 2, &stage_opts), 0);
	ask_timed(WEFT_MSVC_VERB_USER_MIN + 200, &t);
	assert_int_equal(t.status, WEFT_EUNKNOWNVERB);
	assert_int_equal(t.stages_rv, 0);
	assert_int_equal(t.stages.n, WEFT_MSVC_STAGES);
	cluster_stop(&cl);
}

/* ---- Trace context and spans ------------------------------------------- */

#define MAX_SPANS 16

/* The spans each node's hook saw. */
static struct {
	pthread_mutex_t lock;
	int n[CLUSTER_MAX];
	weft_msvc_span span[CLUSTER_MAX][MAX_SPANS];
	char peer[CLUSTER_MAX][MAX_SPANS][16];
	bool had_stages[CLUSTER_MAX][MAX_SPANS];
} spans = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void
on_span(weft_msvc *svc, const weft_msvc_span *span, void *arg)
{
	int node = (int)(intptr_t)arg, k;

	(void)svc;
	pthread_mutex_lock(&spans.lock);
	if ((k = spans.n[node]++) < MAX_SPANS) {
		spans.span[node][k] = *span;
		snprintf(spans.peer[node][k], sizeof(spans.peer[node][k]), "%s",
		         span->peer);
		spans.had_stages[node][k] =
		    span->stages != NULL && span->stages->n == WEFT_MSVC_STAGES;
		spans.span[node][k].peer = NULL;
		spans.span[node][k].stages = NULL;
	}
	pthread_mutex_unlock(&spans.lock);
}

static void
hook_spans(int i, weft_msvc *svc)
{
	assert_int_equal(weft_msvc_on_span(svc, on_span, (void *)(intptr_t)i),
	                 0);
}

static int
span_count(int node)
{
	int n;

	pthread_mutex_lock(&spans.lock);
	n = spans.n[node];
	pthread_mutex_unlock(&spans.lock);
	return n;
}

static void
spans_reset(void)
{
	pthread_mutex_lock(&spans.lock);
	memset(spans.n, 0, sizeof(spans.n));
	pthread_mutex_unlock(&spans.lock);
}

/* Checks what a node's hook said of its one request to peer. */
static const weft_msvc_span *
the_span(int node, const char *peer)
{
	const weft_msvc_span *s = &spans.span[node][0];

	assert_int_equal(span_count(node), 1);
	assert_string_equal(spans.peer[node][0], peer);
	assert_true(spans.had_stages[node][0]);
	assert_int_equal(s->verb, VERB_RELAY);
	assert_string_equal(s->verb_name, "relay");
	assert_int_equal(s->status, 0);
	assert_true(s->start_unix_ns <= s->end_unix_ns);
	assert_true(s->end_unix_ns - s->start_unix_ns < 5000000000ull);
	assert_true(s->start_unix_ns / 1000000 + 60000 > weft_wall_ms());
	assert_true(s->context.flags & WEFT_MSVC_TRACE_SAMPLED);
	return s;
}

/* n1 asks n2's relay, whose handler asks n3's: n3 sees n1's trace, whose
 * parent span is n2's request, whose own parent is n1's request, whose
 * parent is the span the caller gave. Each node that asked reports one
 * span, with its stage times. */
static void
test_trace_context_crosses_three_nodes(void **state)
{
	static const uint8_t path[] = {2};
	weft_msvc_traceparent tp = {
	    .trace_id = {0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3,
	                 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
	    .span_id = {0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
	    .flags = WEFT_MSVC_TRACE_SAMPLED,
	};
	weft_msvc_call_opts co = {.traceparent = &tp};
	struct cluster_opts o = {.setup_node = hook_spans};
	const weft_msvc_span *s1, *s2;
	struct tally t = {.want = 1};

	(void)state;
	spans_reset();
	assert_int_equal(cluster_start_with(&cl, 3, &o), 0);
	assert_int_equal(weft_msvc_request(cl.svc[0], cluster_peer(&cl, 0, 1),
	                                   VERB_RELAY, path, sizeof(path), &co,
	                                   tally_cb, &t),
	                 0);
	assert_true(test_wait(tally_complete, &t, 5000));
	assert_int_equal(atomic_load(&t.ok), 1);

	s1 = the_span(0, "n2");
	assert_memory_equal(s1->context.trace_id, tp.trace_id, 16);
	assert_memory_equal(s1->parent_span_id, tp.span_id, 8);
	s2 = the_span(1, "n3");
	assert_memory_equal(s2->context.trace_id, tp.trace_id, 16);
	assert_memory_equal(s2->parent_span_id, s1->context.span_id, 8);
	assert_int_equal(span_count(2), 0);

	assert_true(atomic_load(&cl.relay_traced[1]));
	assert_memory_equal(cl.relay_tp[1].trace_id, tp.trace_id, 16);
	assert_memory_equal(cl.relay_tp[1].span_id, s1->context.span_id, 8);
	assert_true(atomic_load(&cl.relay_traced[2]));
	assert_memory_equal(cl.relay_tp[2].trace_id, tp.trace_id, 16);
	assert_memory_equal(cl.relay_tp[2].span_id, s2->context.span_id, 8);
	assert_int_equal(cl.relay_tp[2].flags, WEFT_MSVC_TRACE_SAMPLED);
	cluster_stop(&cl);
}

/* A request without a trace context starts none at rate 0, and one each
 * at rate 1, which the handler it reaches sees as a root's. An unsampled
 * context goes on, without spans. */
static void
test_sampling_starts_traces(void **state)
{
	static const uint8_t none[1] = {0};
	weft_msvc_traceparent tp = {.trace_id = {1}, .span_id = {2}};
	weft_msvc_call_opts co = {.traceparent = &tp};
	struct cluster_opts o = {.setup_node = hook_spans};
	struct tally t = {.want = 1};

	(void)state;
	spans_reset();
	assert_int_equal(cluster_start_with(&cl, 2, &o), 0);
	assert_int_equal(weft_msvc_request(cl.svc[0], cluster_peer(&cl, 0, 1),
	                                   VERB_RELAY, none, 0, NULL, tally_cb,
	                                   &t),
	                 0);
	assert_true(test_wait(tally_complete, &t, 5000));
	assert_false(atomic_load(&cl.relay_traced[1]));
	t.want = 2;
	assert_int_equal(weft_msvc_request(cl.svc[0], cluster_peer(&cl, 0, 1),
	                                   VERB_RELAY, none, 0, &co, tally_cb,
	                                   &t),
	                 0);
	assert_true(test_wait(tally_complete, &t, 5000));
	assert_true(atomic_load(&cl.relay_traced[1]));
	assert_int_equal(cl.relay_tp[1].flags, 0);
	assert_int_equal(span_count(0), 0);
	cluster_stop(&cl);

	spans_reset();
	o.trace_sample_rate = 1;
	t = (struct tally){.want = 1};
	assert_int_equal(cluster_start_with(&cl, 2, &o), 0);
	assert_int_equal(weft_msvc_request(cl.svc[0], cluster_peer(&cl, 0, 1),
	                                   VERB_RELAY, none, 0, NULL, tally_cb,
	                                   &t),
	                 0);
	assert_true(test_wait(tally_complete, &t, 5000));
	assert_true(atomic_load(&cl.relay_traced[1]));
	assert_int_equal(span_count(0), 1);
	assert_memory_equal(cl.relay_tp[1].trace_id,
	                    spans.span[0][0].context.trace_id, 16);
	assert_memory_equal(cl.relay_tp[1].span_id,
	                    spans.span[0][0].context.span_id, 8);
	assert_memory_equal(spans.span[0][0].parent_span_id, "\0\0\0\0\0\0\0",
	                    8);
	cluster_stop(&cl);
}

/* ---- A malformed traceparent from a raw socket ------------------------- */

static uint64_t
stat_of(int node, size_t offset)
{
	weft_msvc_stats st;

	weft_msvc_get_stats(cl.svc[node], &st);
	return *(const uint64_t *)((const char *)&st + offset);
}
#define STAT(node, field) stat_of(node, offsetof(weft_msvc_stats, field))

static void
allow_clients(weft_msvc_limits *l)
{
	l->allow_clients = true;
}

static void
raw_client(rawpeer *p, const char *id)
{
	rp_connect(p, weft_msvc_port(cl.svc[0]), NULL, NULL);
	assert_int_equal(rp_handshake_version(p, "test", id, RP_CLIENT,
	                                      WEFT_MSVC_SMALL, 0, 2),
	                 0);
	assert_int_equal(p->version, 2);
}

/* {1: traceparent} with the 26 bytes of value (n of them). */
static size_t
traceparent_params(uint8_t *out, const uint8_t *value, size_t n)
{
	out[0] = 0x81;
	out[1] = 0x01;
	out[2] = 0xc4;
	out[3] = (uint8_t)n;
	memcpy(out + 4, value, n);
	return 4 + n;
}

/* A traceparent of the wrong type (a bin of 25, a string) makes an
 * invalid envelope: the connection closes and it is counted. One of the
 * right type that W3C calls invalid (an all-zero trace id, version 255)
 * is ignored: the request is served, without a trace, and counted. A
 * valid one is served. Responses to a raw client carry stage times. */
static void
test_a_malformed_traceparent_from_a_raw_peer(void **state)
{
	static const uint8_t as_str[] = {0x81, 0x01, 0xa2, 'h', 'i'};
	uint8_t value[26], params[40];
	struct evbuffer *b = evbuffer_new();
	rawpeer p;
	rp_env e;
	size_t n;

	(void)state;
	assert_int_equal(cluster_start(&cl, 1, allow_clients), 0);
	memset(value, 0x11, sizeof(value));
	value[0] = 0;

	raw_client(&p, "short-traceparent");
	n = traceparent_params(params, value, 25);
	rp_envelope_params(b, p.crc, 1, VERB_ECHO, RP_REQUEST | RP_PARAMS, "hi",
	                   2, params, n);
	assert_true(rp_send(&p, b));
	assert_true(rp_closed(&p, 3000));
	rp_close(&p);
	assert_int_equal(STAT(0, bad_envelopes), 1);

	raw_client(&p, "string-traceparent");
	rp_envelope_params(b, p.crc, 1, VERB_ECHO, RP_REQUEST | RP_PARAMS, "hi",
	                   2, as_str, sizeof(as_str));
	assert_true(rp_send(&p, b));
	assert_true(rp_closed(&p, 3000));
	rp_close(&p);
	assert_int_equal(STAT(0, bad_envelopes), 2);

	raw_client(&p, "zero-traceparent");
	memset(value + 1, 0, 16);
	n = traceparent_params(params, value, 26);
	rp_envelope_params(b, p.crc, 2, VERB_RELAY, RP_REQUEST | RP_PARAMS, "",
	                   0, params, n);
	value[0] = 0xff;
	memset(value + 1, 0x22, 16);
	n = traceparent_params(params, value, 26);
	rp_envelope_params(b, p.crc, 3, VERB_RELAY, RP_REQUEST | RP_PARAMS, "",
	                   0, params, n);
	assert_true(rp_send(&p, b));
	assert_int_equal(rp_read_env(&p, &e, 3000), 0);
	assert_int_equal(e.id, 2);
	assert_int_equal(e.flags & (RP_RESPONSE | RP_ERROR), RP_RESPONSE);
	assert_int_equal(rp_read_env(&p, &e, 3000), 0);
	assert_int_equal(e.id, 3);
	assert_false(atomic_load(&cl.relay_traced[0]));
	assert_int_equal(STAT(0, bad_traceparents), 2);

	value[0] = 0;
	n = traceparent_params(params, value, 26);
	rp_envelope_params(b, p.crc, 4, VERB_RELAY, RP_REQUEST | RP_PARAMS, "",
	                   0, params, n);
	assert_true(rp_send(&p, b));
	assert_int_equal(rp_read_env(&p, &e, 3000), 0);
	assert_int_equal(e.id, 4);
	/* Its stage times. */
	assert_true(e.has_params);
	assert_int_equal(e.params_count, 1);
	assert_true(atomic_load(&cl.relay_traced[0]));
	assert_memory_equal(cl.relay_tp[0].trace_id, value + 1, 16);
	assert_memory_equal(cl.relay_tp[0].span_id, value + 17, 8);
	assert_int_equal(STAT(0, bad_envelopes), 2);
	rp_close(&p);
	evbuffer_free(b);
	cluster_stop(&cl);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_stage_times_add_up_within_the_round_trip),
	    cmocka_unit_test(test_no_stage_times_from_a_version_1_peer),
	    cmocka_unit_test(test_trace_context_crosses_three_nodes),
	    cmocka_unit_test(test_sampling_starts_traces),
	    cmocka_unit_test(test_a_malformed_traceparent_from_a_raw_peer),
	};

	weft_init();
	return cmocka_run_group_tests(tests, test_setup, test_teardown);
}
