/* SPDX-License-Identifier: MIT */
/*
 * test_cancel.c: protocol version 2 in the messaging service
 * (docs/PROTOCOL.md 3, 4.5, 4.6): the version the handshake picks with
 * peers of version 1 and 2, params and cancels from raw sockets (good,
 * malformed, unknown, in a storm, from a peer of version 1), and
 * weft_msvc_cancel and freed futures between nodes of version 2, and of
 * version 2 and 1.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include <weft/core.h>
#include <weft/envelope.h>
#include <weft/messaging.h>

#include "cluster.h"
#include "rawpeer.h"

static struct cluster cl;

/* The documented request's params (PROTOCOL.md 4.5): {3: 5, 256: "x"}. */
static const uint8_t doc_params[] = {0x82, 0x03, 0x05, 0xcd,
                                     0x01, 0x00, 0xa1, 0x78};

static uint64_t
stat_of(int node, size_t offset)
{
	weft_msvc_stats st;

	weft_msvc_get_stats(cl.svc[node], &st);
	return *(const uint64_t *)((const char *)&st + offset);
}
#define STAT(node, field) stat_of(node, offsetof(weft_msvc_stats, field))

/* Waiting for a counter of a node, or of the cluster's handlers. */
struct reach {
	int node;
	size_t offset;
	uint64_t want;
	_Atomic int *counter; /* instead of the node's counter */
};

static bool
reached(void *arg)
{
	const struct reach *r = arg;

	if (r->counter != NULL)
		return (uint64_t)atomic_load(r->counter) >= r->want;
	return stat_of(r->node, r->offset) >= r->want;
}

#define WAIT_STAT(n, field, w)                                                 \
	test_wait(reached,                                                     \
	          &(struct reach){.node = (n),                                 \
	                          .offset = offsetof(weft_msvc_stats, field),  \
	                          .want = (w)},                                \
	          5000)
#define WAIT_COUNT(c, w)                                                       \
	test_wait(reached, &(struct reach){.counter = (c), .want = (w)}, 5000)

/* A raw client of n1 that offers versions up to max_version. */
static void
raw_client(rawpeer *p, const char *id, int max_version)
{
	rp_connect(p, weft_msvc_port(cl.svc[0]), NULL, NULL);
	assert_int_equal(rp_handshake_version(p, "test", id, RP_CLIENT,
	                                      WEFT_MSVC_SMALL, 0, max_version),
	                 0);
}

/* An echo through p is answered: the node (and p) still serve. */
static void
echo_answered(rawpeer *p, uint64_t id)
{
	rp_env e;

	assert_true(rp_request(p, id, VERB_ECHO, "hi", 2));
	assert_int_equal(rp_read_env(p, &e, 3000), 0);
	assert_int_equal(e.id, id);
	assert_int_equal(e.flags, RP_RESPONSE);
	assert_memory_equal(e.payload, "hi", 2);
}

static void
tune(weft_msvc_limits *l)
{
	l->allow_clients = true;
}

/* ---- The handshake and the forms of version 2 -------------------------- */

/* A peer of version 1 gets version 1, and what version 2 adds is not
 * its: an array of 7 is malformed (the connection closes), a CANCEL kind
 * alone has no kind (closes), and bit 5 beside a kind is a reserved bit,
 * ignored as before. */
static void
test_a_version_1_peer_is_served_as_before(void **state)
{
	struct evbuffer *b = evbuffer_new();
	rawpeer p, q;
	rp_env e;

	(void)state;
	assert_int_equal(cluster_start(&cl, 1, tune), 0);
	raw_client(&p, "old-client", 1);
	assert_int_equal(p.version, 1);
	rp_envelope(b, p.crc, 7, VERB_ECHO, RP_REQUEST | RP_CANCEL, 0, "hi", 2);
	assert_true(rp_send(&p, b));
	assert_int_equal(rp_read_env(&p, &e, 3000), 0);
	assert_int_equal(e.id, 7);
	assert_int_equal(e.flags, RP_RESPONSE);
	assert_int_equal(STAT(0, cancels_unknown), 0);
	rp_envelope_params(b, p.crc, 8, VERB_ECHO, RP_REQUEST | RP_PARAMS, "hi",
	                   2, doc_params, sizeof(doc_params));
	assert_true(rp_send(&p, b));
	assert_true(rp_closed(&p, 3000));
	rp_close(&p);
	assert_int_equal(STAT(0, bad_envelopes), 1);

	raw_client(&q, "old-client-2", 1);
	rp_envelope(b, q.crc, 9, VERB_ECHO, RP_CANCEL, 0, NULL, 0);
	assert_true(rp_send(&q, b));
	assert_true(rp_closed(&q, 3000));
	rp_close(&q);
	assert_int_equal(STAT(0, bad_envelopes), 2);

	/* A peer of version 2 gets version 2. */
	raw_client(&p, "new-client", 2);
	assert_int_equal(p.version, 2);
	echo_answered(&p, 10);
	rp_close(&p);
	/* One of a version to come gets the newest this node speaks. */
	raw_client(&p, "future-client", 9);
	assert_int_equal(p.version, 2);
	echo_answered(&p, 11);
	rp_close(&p);
	evbuffer_free(b);
	cluster_stop(&cl);
}

/* Params with known and unknown keys are read past; the request is
 * served as one without. */
static void
test_params_are_skipped(void **state)
{
	static const uint8_t nested[] = {0x83, 0x02, 0x92, 0x01, 0x02,
	                                 0xcd, 0x12, 0x34, 0x81, 0x01,
	                                 0x91, 0xc0, 0x03, 0x00};
	struct evbuffer *b = evbuffer_new();
	rawpeer p;
	rp_env e;

	(void)state;
	assert_int_equal(cluster_start(&cl, 1, tune), 0);
	raw_client(&p, "params-client", 2);
	rp_envelope_params(b, p.crc, 1, VERB_ECHO, RP_REQUEST | RP_PARAMS, "hi",
	                   2, doc_params, sizeof(doc_params));
	rp_envelope_params(b, p.crc, 2, VERB_ECHO, RP_REQUEST | RP_PARAMS, "hi",
	                   2, nested, sizeof(nested));
	assert_true(rp_send(&p, b));
	assert_int_equal(rp_read_env(&p, &e, 3000), 0);
	assert_int_equal(e.id, 1);
	assert_memory_equal(e.payload, "hi", 2);
	assert_int_equal(rp_read_env(&p, &e, 3000), 0);
	assert_int_equal(e.id, 2);
	assert_int_equal(STAT(0, bad_envelopes), 0);
	rp_close(&p);
	evbuffer_free(b);
	cluster_stop(&cl);
}

/* Each malformed params map closes its connection and is counted; the
 * node keeps serving another. */
static void
test_bad_params_close_their_connection(void **state)
{
	static uint8_t big[WEFT_ENVELOPE_PARAMS_MAX + 1] = {0x81, 0x09, 0xc5};
	static const struct {
		const char *what;
		const uint8_t *p;
		size_t n;
	} bad[] = {
	    {"truncated", (const uint8_t *)"\x82\x03\x05\xcd\x01", 5},
	    {"duplicate keys", (const uint8_t *)"\x82\x03\x01\x03\x02", 5},
	    {"wrong type", (const uint8_t *)"\x81\x03\xa1x", 4},
	    {"string key", (const uint8_t *)"\x81\xa1k\x01", 4},
	    {"oversized", big, sizeof(big)},
	};
	struct evbuffer *b = evbuffer_new();
	rawpeer p;
	size_t i;

	(void)state;
	big[3] = (uint8_t)((sizeof(big) - 5) >> 8);
	big[4] = (uint8_t)(sizeof(big) - 5);
	assert_int_equal(cluster_start(&cl, 1, tune), 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		uint8_t *frame;
		size_t n;

		raw_client(&p, "bad-params", 2);
		if (bad[i].n > 200) {
			/* Too large for put_v2's buffer: build it here. */
			frame =
			    calloc(1, WEFT_ENVELOPE_HEADER_BYTES + bad[i].n);
			assert_non_null(frame);
			rp_envelope_params(b, false, 1, VERB_ECHO,
			                   RP_REQUEST | RP_PARAMS, "", 0, "",
			                   0);
			n = evbuffer_get_length(b) - 4;
			evbuffer_drain(b, 4);
			evbuffer_remove(b, frame, n);
			memcpy(frame + n, bad[i].p, bad[i].n);
			rp_frame(b, frame, n + bad[i].n, p.crc);
			free(frame);
		} else {
			rp_envelope_params(b, p.crc, 1, VERB_ECHO,
			                   RP_REQUEST | RP_PARAMS, "hi", 2,
			                   bad[i].p, bad[i].n);
		}
		assert_true(rp_send(&p, b));
		if (!rp_closed(&p, 3000))
			fail_msg("params %s: the connection stays",
			         bad[i].what);
		rp_close(&p);
		assert_int_equal(STAT(0, bad_envelopes), i + 1);
	}
	raw_client(&p, "good-client", 2);
	echo_answered(&p, 1);
	rp_close(&p);
	evbuffer_free(b);
	cluster_stop(&cl);
}

/* ---- Cancels from raw sockets ------------------------------------------ */

/* Cancels for ids nobody asked, for another client's request, and a
 * storm of them: counted, ignored, and the connection serves on. */
static void
test_unknown_cancels_are_ignored(void **state)
{
	struct evbuffer *b = evbuffer_new();
	rawpeer p, other;
	rp_env e;
	int i;

	(void)state;
	assert_int_equal(cluster_start(&cl, 1, tune), 0);
	raw_client(&p, "canceller", 2);
	raw_client(&other, "victim", 2);
	/* The victim's slow request, which the canceller names. */
	assert_true(rp_request(&other, 77, VERB_SLOW, "s", 1));
	assert_true(WAIT_COUNT(&cl.slow_running, 1));
	for (i = 0; i < 1000; i++)
		rp_envelope(b, p.crc, 77 + (uint64_t)(i % 2) * 1000,
		            i % 2 ? VERB_ECHO : VERB_SLOW, RP_CANCEL, 0, NULL,
		            0);
	assert_true(rp_send(&p, b));
	echo_answered(&p, 5);
	assert_int_equal(STAT(0, cancels_unknown), 1000);
	assert_int_equal(STAT(0, cancels_received), 0);
	assert_int_equal(atomic_load(&cl.slow_cancelled), 0);
	/* The victim's own cancel finds it. */
	rp_envelope(b, other.crc, 77, VERB_SLOW, RP_CANCEL, 0, NULL, 0);
	assert_true(rp_send(&other, b));
	assert_true(WAIT_COUNT(&cl.slow_cancelled, 1));
	assert_int_equal(STAT(0, cancels_received), 1);
	/* Its answer is not written: the echo's is the only frame. */
	echo_answered(&other, 78);
	assert_int_equal(rp_read_env(&other, &e, 300), -2);
	rp_close(&p);
	rp_close(&other);
	evbuffer_free(b);
	cluster_stop(&cl);
}

/* With one worker busy, a cancelled request still queued is not run. */
static void
test_a_cancelled_job_is_not_run(void **state)
{
	struct evbuffer *b = evbuffer_new();
	rawpeer p;

	(void)state;
	assert_int_equal(cluster_start(&cl, 1, tune), 0);
	raw_client(&p, "jobs", 2);
	assert_true(rp_request(&p, 1, VERB_SLOW, "a", 1));
	assert_true(WAIT_COUNT(&cl.slow_running, 1));
	assert_true(rp_request(&p, 2, VERB_SLOW, "b", 1));
	echo_answered(&p, 3); /* 2 has been read and queued by now */
	rp_envelope(b, p.crc, 2, VERB_SLOW, RP_CANCEL, 0, NULL, 0);
	rp_envelope(b, p.crc, 1, VERB_SLOW, RP_CANCEL, 0, NULL, 0);
	assert_true(rp_send(&p, b));
	assert_true(WAIT_STAT(0, cancelled_jobs, 1));
	assert_int_equal(STAT(0, cancels_received), 2);
	assert_int_equal(atomic_load(&cl.slow_running), 1);
	assert_int_equal(atomic_load(&cl.slow_cancelled), 1);
	echo_answered(&p, 4);
	rp_close(&p);
	evbuffer_free(b);
	cluster_stop(&cl);
}

/* ---- weft_msvc_cancel between nodes ------------------------------------ */

struct once {
	_Atomic int calls;
	_Atomic int status;
};

static void
once_cb(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	struct once *o = arg;

	(void)svc;
	(void)data;
	(void)len;
	atomic_store(&o->status, status);
	atomic_fetch_add(&o->calls, 1);
	test_poke();
}

static bool
once_called(void *arg)
{
	return atomic_load(&((struct once *)arg)->calls) > 0;
}

/* Cancels n1's slow request to n2; returns with its callback called. */
static void
cancel_slow(struct once *o)
{
	uint64_t handle = 0;
	weft_msvc_call_opts opts = {.cancel_handle = &handle};
	int one = atomic_load(&cl.slow_running) + 1;

	assert_int_equal(weft_msvc_request(cl.svc[0], cluster_peer(&cl, 0, 1),
	                                   VERB_SLOW, "s", 1, &opts, once_cb,
	                                   o),
	                 0);
	assert_int_not_equal(handle, 0);
	assert_true(WAIT_COUNT(&cl.slow_running, (uint64_t)one));
	assert_int_equal(
	    weft_msvc_cancel(cl.svc[0], cluster_peer(&cl, 0, 1), handle), 0);
	assert_true(test_wait(once_called, o, 5000));
	assert_int_equal(atomic_load(&o->status), WEFT_ECANCELED);
	/* Again, and for a handle never given: nothing more happens. */
	assert_int_equal(
	    weft_msvc_cancel(cl.svc[0], cluster_peer(&cl, 0, 1), handle), 0);
	assert_int_equal(
	    weft_msvc_cancel(cl.svc[0], cluster_peer(&cl, 0, 1), handle + 1000),
	    0);
	assert_int_equal(
	    weft_msvc_cancel(cl.svc[0], cluster_peer(&cl, 0, 1), 0),
	    WEFT_EINVAL);
}

/* Between nodes of version 2: the callback ends at once, once; the
 * handler learns of it and stops; nothing else comes. */
static void
test_cancel_reaches_the_handler(void **state)
{
	struct once o = {0};
	weft_msvc_future *f;
	struct tally t = {.want = 1};

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, NULL), 0);
	cancel_slow(&o);
	assert_true(WAIT_COUNT(&cl.slow_cancelled, 1));
	assert_true(WAIT_STAT(1, cancels_received, 1));
	/* Registered once cancelled, an on-cancel callback runs at once. */
	assert_int_equal(atomic_load(&cl.cancel_notified_late), 1);
	assert_int_equal(STAT(0, cancelled_requests), 1);
	/* The pair still answers, and the callback was not run again. */
	assert_int_equal(weft_msvc_request(cl.svc[0], cluster_peer(&cl, 0, 1),
	                                   VERB_ECHO, "x", 1, NULL, tally_cb,
	                                   &t),
	                 0);
	assert_true(test_wait(tally_complete, &t, 5000));
	assert_int_equal(atomic_load(&t.ok), 1);
	assert_int_equal(atomic_load(&o.calls), 1);
	assert_int_equal(STAT(0, cancelled_responses), 0);

	/* A future freed unfinished cancels its request too. */
	assert_int_equal(weft_msvc_request_future(cl.svc[0],
	                                          cluster_peer(&cl, 0, 1),
	                                          VERB_SLOW, "f", 1, NULL, &f),
	                 0);
	assert_true(WAIT_COUNT(&cl.slow_running, 2));
	weft_msvc_future_free(f);
	assert_true(WAIT_STAT(1, cancels_received, 2));
	assert_true(WAIT_COUNT(&cl.slow_cancelled, 2));
	assert_int_equal(atomic_load(&cl.slow_cancelled), 2);
	assert_int_equal(STAT(0, cancelled_requests), 2);
	cluster_stop(&cl);
}

/* A detached request's on-cancel callback runs once, on the loop that
 * read the cancel, and answers the request from inside (the answer is
 * not written); the requester's callback ended at once. */
static void
test_an_on_cancel_callback_runs_once(void **state)
{
	struct once o = {0};
	uint64_t handle = 0;
	weft_msvc_call_opts opts = {.cancel_handle = &handle};
	weft_msvc_peer *p;
	struct tally t = {.want = 1};

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, NULL), 0);
	p = cluster_peer(&cl, 0, 1);
	assert_int_equal(weft_msvc_request(cl.svc[0], p, VERB_HOLD_NOTIFY, "h",
	                                   1, &opts, once_cb, &o),
	                 0);
	assert_true(WAIT_COUNT(&cl.notify_held, 1));
	assert_int_equal(atomic_load(&cl.cancel_notified), 0);
	assert_int_equal(weft_msvc_cancel(cl.svc[0], p, handle), 0);
	assert_true(test_wait(once_called, &o, 5000));
	assert_int_equal(atomic_load(&o.status), WEFT_ECANCELED);
	assert_true(WAIT_COUNT(&cl.cancel_notified, 1));
	assert_true(WAIT_STAT(1, cancels_received, 1));
	/* A second cancel finds it answered: nothing runs again. */
	assert_int_equal(weft_msvc_cancel(cl.svc[0], p, handle), 0);
	assert_int_equal(weft_msvc_request(cl.svc[0], p, VERB_ECHO, "x", 1,
	                                   NULL, tally_cb, &t),
	                 0);
	assert_true(test_wait(tally_complete, &t, 5000));
	assert_int_equal(atomic_load(&cl.cancel_notified), 1);
	assert_int_equal(atomic_load(&o.calls), 1);
	/* Its answer was not written: none came back to be dropped. */
	assert_int_equal(STAT(0, cancelled_responses), 0);
	cluster_stop(&cl);
}

/* The holder of a detached request answers it on another thread while
 * its on-cancel callback runs: the answer waits for the callback to
 * return, so the callback never outlives the message. */
static void
test_an_answer_waits_for_a_running_on_cancel_callback(void **state)
{
	struct once o = {0};
	uint64_t handle = 0;
	weft_msvc_call_opts opts = {.cancel_handle = &handle};
	weft_msvc_peer *p;
	weft_msvc_msg *held;

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, NULL), 0);
	p = cluster_peer(&cl, 0, 1);
	assert_int_equal(weft_msvc_request(cl.svc[0], p, VERB_HOLD_SLOW_NOTIFY,
	                                   "h", 1, &opts, once_cb, &o),
	                 0);
	assert_true(WAIT_COUNT(&cl.held_count, 1));
	assert_int_equal(weft_msvc_cancel(cl.svc[0], p, handle), 0);
	assert_true(WAIT_COUNT(&cl.slow_notify_started, 1));
	held = atomic_exchange(&cl.held[0], NULL);
	assert_non_null(held);
	assert_int_equal(weft_msvc_respond(held, "", 0), 0);
	assert_int_equal(atomic_load(&cl.slow_notify_done), 1);
	assert_true(test_wait(once_called, &o, 5000));
	assert_int_equal(atomic_load(&o.status), WEFT_ECANCELED);
	cluster_stop(&cl);
}

/* n2 speaks version 1 only: n1 and n2 use version 1 both ways, and a
 * cancel stays with n1; n2 runs the request, and its answer, when it
 * comes, is dropped and counted. */
static void
test_cancel_stays_local_with_a_version_1_node(void **state)
{
	struct cluster_opts co = {.max_version = {0, 1}};
	struct tally t = {.want = 2};
	struct once o = {0};

	(void)state;
	assert_int_equal(cluster_start_with(&cl, 2, &co), 0);
	assert_int_equal(weft_msvc_request(cl.svc[0], cluster_peer(&cl, 0, 1),
	                                   VERB_ECHO, "x", 1, NULL, tally_cb,
	                                   &t),
	                 0);
	assert_int_equal(weft_msvc_request(cl.svc[1], cluster_peer(&cl, 1, 0),
	                                   VERB_ECHO, "x", 1, NULL, tally_cb,
	                                   &t),
	                 0);
	assert_true(test_wait(tally_complete, &t, 5000));
	assert_int_equal(atomic_load(&t.ok), 2);
	cancel_slow(&o);
	assert_int_equal(STAT(0, cancelled_requests), 1);
	/* n2 never heard of it: its handler runs on until released. */
	assert_int_equal(atomic_load(&cl.slow_cancelled), 0);
	atomic_store(&cl.slow_release, true);
	assert_true(WAIT_STAT(0, cancelled_responses, 1));
	assert_int_equal(STAT(1, cancels_received), 0);
	assert_int_equal(STAT(1, cancels_unknown), 0);
	assert_int_equal(STAT(1, bad_envelopes), 0);
	assert_int_equal(STAT(0, late_responses), 0);
	assert_int_equal(atomic_load(&o.calls), 1);
	cluster_stop(&cl);
}

/* A request still waiting for its connection (n1 dials where no
 * handshake is answered) is cancelled before it was ever written: its
 * callback ends once, and nothing reaches n2. */
static void
test_cancel_before_the_request_left(void **state)
{
	uint64_t handle = 0;
	weft_msvc_call_opts opts = {.cancel_handle = &handle};
	struct once o = {0};
	weft_msvc_peer *p;
	uint16_t port;
	int hole;

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, NULL), 0);
	hole = cluster_black_hole(&port);
	assert_int_equal(
	    weft_msvc_set_peer_addr(cl.svc[0], "n2", "127.0.0.1", port), 0);
	p = cluster_peer(&cl, 0, 1);
	assert_int_equal(weft_msvc_request(cl.svc[0], p, VERB_ECHO, "b", 1,
	                                   &opts, once_cb, &o),
	                 0);
	assert_int_equal(weft_msvc_cancel(cl.svc[0], p, handle), 0);
	assert_true(test_wait(once_called, &o, 5000));
	assert_int_equal(atomic_load(&o.status), WEFT_ECANCELED);
	assert_int_equal(STAT(0, cancelled_requests), 1);
	close(hole);
	cluster_stop(&cl);
	assert_int_equal(atomic_load(&o.calls), 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_a_version_1_peer_is_served_as_before),
	    cmocka_unit_test(test_params_are_skipped),
	    cmocka_unit_test(test_bad_params_close_their_connection),
	    cmocka_unit_test(test_unknown_cancels_are_ignored),
	    cmocka_unit_test(test_a_cancelled_job_is_not_run),
	    cmocka_unit_test(test_cancel_reaches_the_handler),
	    cmocka_unit_test(test_an_on_cancel_callback_runs_once),
	    cmocka_unit_test(
	        test_an_answer_waits_for_a_running_on_cancel_callback),
	    cmocka_unit_test(test_cancel_stays_local_with_a_version_1_node),
	    cmocka_unit_test(test_cancel_before_the_request_left),
	};

	return cmocka_run_group_tests(tests, test_setup, test_teardown);
}
