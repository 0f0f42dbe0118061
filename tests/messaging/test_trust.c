/* SPDX-License-Identifier: MIT */
/*
 * test_trust.c: the messaging service against peers that speak the
 * protocol correctly but lie or misbehave (docs/SECURITY.md). Every test
 * drives a real socket with rawpeer.c, a client written from
 * docs/PROTOCOL.md alone, and checks that the node closes or refuses only
 * the bad connection while it keeps serving its members.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <event2/buffer.h>
#include <weft/tls.h>

#include "cluster.h"
#include "msvc_int.h"
#include "rawpeer.h"
#include "tls_test.h"

#define WAIT_MS 10000

static struct cluster cl;
static tt_pki pki;

/* Lines about closed connections, counted by the log sink (set while no
 * loop runs, at the start of the group). */
static _Atomic int closing_lines;

static void
count_lines(enum weft_log_level level, const char *line, void *arg)
{
	(void)arg;
	fprintf(stderr, "%s\n", line);
	if (level >= WEFT_LOG_WARN && strstr(line, "closing connection"))
		atomic_fetch_add(&closing_lines, 1);
}

static int
group_setup(void **state)
{
	weft_log_set_sink(count_lines, NULL);
	if (test_setup(state) != 0 || tt_pki_new(&pki) != 0)
		return -1;
	if (tt_node(&pki, "n1", "n1") != 0 || tt_node(&pki, "n2", "n2") != 0 ||
	    tt_node(&pki, "n3", "n3") != 0 ||
	    tt_node(&pki, "rawc", "rawc") != 0)
		return -1;
	return 0;
}

static int
group_teardown(void **state)
{
	weft_log_set_sink(NULL, NULL);
	tt_pki_free(&pki);
	return test_teardown(state);
}

static weft_tls_ctx *
ctx_for(const char *file)
{
	weft_tls_ctx *ctx = NULL;

	assert_int_equal(tt_ctx(&pki, file, NULL, &ctx), 0);
	return ctx;
}

static void
loose_tune(weft_msvc_limits *l)
{
	l->connect_timeout_ms = 8000;
	l->request_timeout_ms = 8000;
	l->heartbeat_misses = 10;
}

/* Starts n plaintext nodes (tls false) or n nodes in mode all. */
static void
start(int n, bool tls, void (*tune)(weft_msvc_limits *l))
{
	struct cluster_opts o = {.tune = tune ? tune : loose_tune};
	int i;

	if (tls) {
		o.tls_mode = WEFT_MSVC_TLS_ALL;
		for (i = 0; i < n; i++) {
			char name[16];

			snprintf(name, sizeof(name), "n%d", i + 1);
			o.tls[i] = ctx_for(name);
		}
	}
	assert_int_equal(cluster_start_with(&cl, n, &o), 0);
}

static void
stop(void)
{
	weft_tls_ctx *tls[CLUSTER_MAX];

	memcpy(tls, cl.tls, sizeof(tls));
	cluster_stop(&cl);
	for (int i = 0; i < CLUSTER_MAX; i++)
		if (tls[i] != NULL)
			weft_tls_ctx_unref(tls[i]);
}

static SSL_CTX *
client_tls(const char *name)
{
	return rp_tls_ctx(pki.dir, name);
}

/* The node still serves its members: a request n2 -> n1 is answered. */
static void
assert_still_serving(void)
{
	struct tally t = {.want = 1};

	assert_int_equal(weft_msvc_request(cl.svc[1], cluster_peer(&cl, 1, 0),
	                                   VERB_ECHO, "ok", 2, NULL, tally_cb,
	                                   &t),
	                 0);
	assert_true(test_wait(tally_complete, &t, WAIT_MS));
	assert_int_equal(atomic_load(&t.ok), 1);
}

/* Connects as client id to node 0 and handshakes; fails the test unless
 * accepted. */
static void
client_in(rawpeer *p, SSL_CTX *tls, const char *id)
{
	rp_connect(p, weft_msvc_port(cl.svc[0]), tls, "n1");
	assert_int_equal(rp_handshake(p, "test", id, RP_CLIENT, 1, 0), 0);
}

/* ---- 1. An answer flushed into a closing connection --------------------- */

enum bad_tail { TAIL_ENVELOPE, TAIL_CRC, TAIL_HUGE, TAIL_KINDS };

/* Appends a frame the node rejects to b. */
static void
bad_tail(struct evbuffer *b, enum bad_tail kind, bool crc)
{
	static const uint8_t junk[16] = {0xc1, 0xc1, 0xc1, 0xc1, 0xc1, 0xc1,
	                                 0xc1, 0xc1, 0xc1, 0xc1, 0xc1, 0xc1,
	                                 0xc1, 0xc1, 0xc1, 0xc1};
	static const uint8_t huge[4] = {0xff, 0xff, 0xff, 0xff};

	switch (kind) {
	case TAIL_ENVELOPE:
		rp_frame(b, junk, sizeof(junk), crc);
		break;
	case TAIL_CRC:
		rp_frame(b, junk, sizeof(junk), false);
		evbuffer_add(b, "\1\2\3\4", 4);
		break;
	default:
		evbuffer_add(b, huge, sizeof(huge));
		break;
	}
}

/*
 * A client sends, in one write, a request the node answers and a frame it
 * rejects: the answer goes into a connection that is already closing.
 * Before the fix its write callback ran after the connection (and the
 * client's peer) had been freed: a use-after-free any client could cause.
 */
static void
answer_then_reject(SSL_CTX *tls)
{
	struct evbuffer *b = evbuffer_new();
	rawpeer p;
	int kind, round;

	for (round = 0; round < 4; round++) {
		for (kind = 0; kind < TAIL_KINDS; kind++) {
			client_in(&p, tls, "rawc");
			rp_envelope(b, p.crc, 1, VERB_ECHO, RP_REQUEST,
			            weft_wall_ms() + 10000, "hello", 5);
			bad_tail(b, (enum bad_tail)kind, p.crc);
			assert_true(rp_send(&p, b));
			assert_true(rp_closed(&p, WAIT_MS));
			rp_close(&p);
		}
	}
	evbuffer_free(b);
	assert_still_serving();
}

static void
test_answer_flushed_into_a_closing_connection(void **state)
{
	(void)state;
	start(2, false, NULL);
	answer_then_reject(NULL);
	stop();
}

static void
test_answer_flushed_into_a_closing_tls_connection(void **state)
{
	SSL_CTX *tls = client_tls("rawc");

	(void)state;
	start(2, true, NULL);
	answer_then_reject(tls);
	SSL_CTX_free(tls);
	stop();
}

/* ---- 2. Responses only from the peer asked ------------------------------ */

static weft_msvc_stats
stats(int i)
{
	weft_msvc_stats st;

	weft_msvc_get_stats(cl.svc[i], &st);
	return st;
}

struct stat_wait {
	int node;
	size_t offset;
	uint64_t want;
};

static bool
stat_reached(void *arg)
{
	struct stat_wait *w = arg;
	weft_msvc_stats st = stats(w->node);

	return *(uint64_t *)((char *)&st + w->offset) >= w->want;
}

#define WAIT_STAT(node_, field, n)                                             \
	do {                                                                   \
		struct stat_wait w_ = {node_,                                  \
		                       offsetof(weft_msvc_stats, field), n};   \
		assert_true(test_wait(stat_reached, &w_, WAIT_MS));            \
	} while (0)

static bool
one_held(void *arg)
{
	(void)arg;
	return atomic_load(&cl.held_count) >= 1 &&
	       atomic_load(&cl.held[0]) != NULL;
}

/* One request's outcome: the status and payload its callback saw. */
struct reply {
	_Atomic int runs;
	int status;
	char payload[32];
};

static void
reply_cb(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	struct reply *r = arg;

	(void)svc;
	r->status = status;
	snprintf(r->payload, sizeof(r->payload), "%.*s", (int)len,
	         (const char *)data);
	atomic_fetch_add(&r->runs, 1);
	test_poke();
}

static bool
replied(void *arg)
{
	return atomic_load(&((struct reply *)arg)->runs) > 0;
}

/* n1 asks n2 for VERB_HOLD, which n2 keeps unanswered; returns the
 * request's id as it travelled. */
static uint64_t
pending_request_to_n2(struct reply *r)
{
	weft_msvc_call_opts o = {.timeout_ms = 20000};

	assert_int_equal(weft_msvc_request(cl.svc[0], cluster_peer(&cl, 0, 1),
	                                   VERB_HOLD, "q", 1, &o, reply_cb, r),
	                 0);
	assert_true(test_wait(one_held, NULL, WAIT_MS));
	return atomic_load(&cl.held[0])->id;
}

/* n2 answers the held request for real. */
static void
answer_held(struct reply *r)
{
	weft_msvc_msg *m = atomic_exchange(&cl.held[0], NULL);

	assert_int_equal(atomic_load(&r->runs), 0);
	assert_int_equal(weft_msvc_respond(m, "real", 4), 0);
	assert_true(test_wait(replied, r, WAIT_MS));
	assert_int_equal(atomic_load(&r->runs), 1);
	assert_int_equal(r->status, 0);
	assert_string_equal(r->payload, "real");
}

static void
forge(rawpeer *p, uint64_t id, uint32_t verb, uint32_t flags)
{
	struct evbuffer *b = evbuffer_new();

	rp_envelope(b, p->crc, id, verb, flags, 0, "forged", 6);
	rp_send(p, b);
	evbuffer_free(b);
}

/* A client that knows the exact id of n1's request to n2 answers it. */
static void
test_response_from_a_client_is_refused(void **state)
{
	struct reply r = {0};
	rawpeer p;
	uint64_t id;

	(void)state;
	start(2, false, NULL);
	id = pending_request_to_n2(&r);
	client_in(&p, NULL, "rawc");
	forge(&p, id, VERB_HOLD, RP_RESPONSE);
	assert_true(rp_closed(&p, WAIT_MS));
	rp_close(&p);
	assert_int_equal(stats(0).forged_responses, 1);
	answer_held(&r);
	stop();
}

/* A client sends, in one write, a response (which closes its connection)
 * and then requests: once the node has decided to close the connection,
 * nothing more it sent is handled. */
static void
test_nothing_is_handled_after_the_close(void **state)
{
	struct evbuffer *b = evbuffer_new();
	weft_msvc_verb_stats before, after;
	rawpeer p;
	int i;

	(void)state;
	start(2, false, NULL);
	weft_msvc_verb_get_stats(cl.svc[0], VERB_ECHO, &before);
	client_in(&p, NULL, "rawc");
	rp_envelope(b, p.crc, 7, VERB_ECHO, RP_RESPONSE, 0, "forged", 6);
	for (i = 0; i < 8; i++)
		rp_envelope(b, p.crc, 100 + (uint64_t)i, VERB_ECHO, RP_REQUEST,
		            weft_wall_ms() + 10000, "after", 5);
	assert_true(rp_send(&p, b));
	assert_true(rp_closed(&p, WAIT_MS));
	rp_close(&p);
	weft_msvc_verb_get_stats(cl.svc[0], VERB_ECHO, &after);
	assert_int_equal(stats(0).forged_responses, 1);
	assert_int_equal(after.handled, before.handled);
	evbuffer_free(b);
	assert_still_serving();
	stop();
}

/* PROTOCOL.md lets a peer encode an envelope in any valid msgpack form,
 * not only weft's fixed layout: a request in the smallest forms (fixints,
 * bin 8), and one with every integer as wide as it goes (uint 64, bin 32
 * in a map-free array 16), each from a raw client in one write, are
 * answered like any other; a form msgpack does not allow closes the
 * connection as an invalid envelope. */
static void
test_requests_in_any_valid_encoding_are_answered(void **state)
{
	static const uint8_t smallest[] = {0x96, 0x05, VERB_ECHO, RP_REQUEST,
	                                   0x00, 0x00, 0xc4,      0x02,
	                                   'h',  'i'};
	static const uint8_t widest[] = {
	    0xdc,      0x00, 0x06, 0xcf, 0,  0, 0, 0, 0,    0,
	    0,         0x06, 0xcf, 0,    0,  0, 0, 0, 0,    0,
	    VERB_ECHO, 0xcf, 0,    0,    0,  0, 0, 0, 0,    RP_REQUEST,
	    0xcf,      0,    0,    0,    0,  0, 0, 0, 0,    0xcf,
	    0,         0,    0,    0,    0,  0, 0, 0, 0xc6, 0,
	    0,         0,    0x02, 'h',  'o'};
	/* A negative fixint where the id must be unsigned. */
	static const uint8_t negative[] = {0x96, 0xff, VERB_ECHO, RP_REQUEST,
	                                   0x00, 0x00, 0xc4,      0x00};
	struct evbuffer *b = evbuffer_new();
	rawpeer p;
	rp_env e;

	(void)state;
	start(2, false, NULL);
	client_in(&p, NULL, "rawc");
	rp_frame(b, smallest, sizeof(smallest), p.crc);
	rp_frame(b, widest, sizeof(widest), p.crc);
	assert_true(rp_send(&p, b));
	assert_int_equal(rp_read_env(&p, &e, WAIT_MS), 0);
	assert_int_equal(e.id, 5);
	assert_int_equal(e.flags & RP_RESPONSE, RP_RESPONSE);
	assert_int_equal(e.len, 2);
	assert_memory_equal(e.payload, "hi", 2);
	assert_int_equal(rp_read_env(&p, &e, WAIT_MS), 0);
	assert_int_equal(e.id, 6);
	assert_memory_equal(e.payload, "ho", 2);

	rp_frame(b, negative, sizeof(negative), p.crc);
	assert_true(rp_send(&p, b));
	assert_true(rp_closed(&p, WAIT_MS));
	rp_close(&p);
	assert_int_equal(stats(0).bad_envelopes, 1);
	evbuffer_free(b);
	assert_still_serving();
	stop();
}

/* Another member (n3, here a plaintext impostor of it) answers n1's
 * request to n2, with its exact id, and with an error too. */
static void
test_response_from_another_member_is_refused(void **state)
{
	struct reply r = {0};
	rawpeer p;
	uint64_t id;

	(void)state;
	start(3, false, NULL);
	id = pending_request_to_n2(&r);
	rp_connect(&p, weft_msvc_port(cl.svc[0]), NULL, NULL);
	assert_int_equal(rp_handshake(&p, "test", "n3", RP_MEMBER, 1, 0), 0);
	forge(&p, id, VERB_HOLD, RP_RESPONSE | RP_ERROR);
	assert_true(rp_closed(&p, WAIT_MS));
	rp_close(&p);
	assert_int_equal(stats(0).forged_responses, 1);
	answer_held(&r);
	stop();
}

/*
 * On a node of two loops, a response read on one loop for a request of
 * the other is handed over in a task; the connection it came on may be
 * gone when the task runs (here: closed at once), and must still be there
 * to be closed (the task holds it).
 */
static void
test_forged_response_handed_between_loops(void **state)
{
	struct cluster_opts o = {.tune = loose_tune, .loops = 2};
	struct reply r = {0};
	rawpeer p;
	uint64_t id;
	int i;

	(void)state;
	assert_int_equal(cluster_start_with(&cl, 3, &o), 0);
	id = pending_request_to_n2(&r);
	/* Accepted connections alternate between the two loops. */
	for (i = 0; i < 4; i++) {
		rp_connect(&p, weft_msvc_port(cl.svc[0]), NULL, NULL);
		assert_int_equal(
		    rp_handshake(&p, "test", "n3", RP_MEMBER, 1, i), 0);
		forge(&p, id, VERB_HOLD, RP_RESPONSE);
		rp_close(&p);
	}
	WAIT_STAT(0, forged_responses, 4);
	answer_held(&r);
	stop();
}

/*
 * Posing as n2 itself (plaintext cannot prove it is not), a peer sprays
 * responses over every id layout it could guess: slots 0..63 of every
 * loop, generations 1..8. None may complete the request.
 */
static void
test_request_ids_cannot_be_guessed(void **state)
{
	struct evbuffer *b = evbuffer_new();
	struct reply r = {0};
	uint64_t gen, slot, loop;
	rawpeer p;

	(void)state;
	start(2, false, NULL);
	(void)pending_request_to_n2(&r);
	rp_connect(&p, weft_msvc_port(cl.svc[0]), NULL, NULL);
	assert_int_equal(rp_handshake(&p, "test", "n2", RP_MEMBER, 1, 1), 0);
	for (gen = 0; gen <= 8; gen++) {
		for (loop = 0; loop < 4; loop++)
			for (slot = 0; slot < 64; slot++)
				rp_envelope(
				    b, p.crc, gen << 32 | loop << 24 | slot,
				    VERB_HOLD, RP_RESPONSE, 0, "forged", 6);
		assert_true(rp_send(&p, b));
	}
	/* All but (before the fix) the one that matched are late. */
	WAIT_STAT(0, late_responses, 9 * 4 * 64 - 1);
	rp_close(&p);
	evbuffer_free(b);
	answer_held(&r);
	stop();
}

/* ---- 4. Identities ------------------------------------------------------ */

/* Under TLS a client must be the client its certificate names. */
static void
test_tls_client_id_must_match_its_certificate(void **state)
{
	SSL_CTX *tls = client_tls("rawc");
	rawpeer p;

	(void)state;
	start(2, true, NULL);
	rp_connect(&p, weft_msvc_port(cl.svc[0]), tls, "n1");
	assert_int_equal(
	    rp_handshake(&p, "test", "someone-else", RP_CLIENT, 1, 0),
	    6); /* AUTH */
	rp_close(&p);
	client_in(&p, tls, "rawc");
	assert_true(rp_request(&p, 5, VERB_ECHO, "me", 2));
	rp_close(&p);
	SSL_CTX_free(tls);
	assert_still_serving();
	stop();
}

/* A dialer that claims to be the node it dials is refused. */
static void
test_dialer_claiming_the_acceptors_id_is_refused(void **state)
{
	rawpeer p;

	(void)state;
	start(2, false, NULL);
	rp_connect(&p, weft_msvc_port(cl.svc[0]), NULL, NULL);
	assert_int_equal(rp_handshake(&p, "test", "n1", RP_MEMBER, 1, 0),
	                 4); /* UNKNOWN_NODE */
	rp_close(&p);
	/* Nor can a node send to itself. */
	assert_int_equal(weft_msvc_send(cl.svc[0], cluster_peer(&cl, 0, 0),
	                                VERB_SINK, "x", 1, NULL),
	                 WEFT_EINVAL);
	assert_still_serving();
	stop();
}

/* Optional mode, n1 and n2 with certificates, n3 without. */
static void
start_optional(bool allow_plaintext_members)
{
	struct cluster_opts o = {
	    .tune = loose_tune,
	    .tls_mode = WEFT_MSVC_TLS_OPTIONAL,
	    .allow_plaintext_members = allow_plaintext_members,
	};

	o.tls[0] = ctx_for("n1");
	o.tls[1] = ctx_for("n2");
	assert_int_equal(cluster_start_with(&cl, 3, &o), 0);
	/* n2 dials n1 with TLS: n1 has seen n2's certificate. */
	assert_still_serving();
}

static int
plaintext_claim(const char *id)
{
	rawpeer p;
	int status;

	rp_connect(&p, weft_msvc_port(cl.svc[0]), NULL, NULL);
	status = rp_handshake(&p, "test", id, RP_MEMBER, 1, 3);
	rp_close(&p);
	return status;
}

/*
 * Once n1 has seen n2 over TLS, a plaintext claim to be n2 is refused;
 * n3, which has no certificate yet (a rolling change), still gets in, as
 * do plaintext claims of n2 with allow_plaintext_members.
 */
static void
test_optional_mode_refuses_plaintext_claims_of_tls_members(void **state)
{
	(void)state;
	start_optional(false);
	assert_int_equal(plaintext_claim("n2"), 6); /* AUTH */
	assert_int_equal(plaintext_claim("n3"), 0);
	assert_still_serving();
	stop();
	start_optional(true);
	assert_int_equal(plaintext_claim("n2"), 0);
	stop();
}

/* ---- 5-7. What the node grants: budgets, deadlines, caps --------------- */

/* Waits until node 0's counter (a weft_msvc_stats field) is at most
 * want. */
static bool
stat_at_most(void *arg)
{
	struct stat_wait *w = arg;
	weft_msvc_stats st = stats(w->node);

	return *(uint64_t *)((char *)&st + w->offset) <= w->want;
}

#define WAIT_STAT_DOWN(node_, field, n)                                        \
	do {                                                                   \
		struct stat_wait w_ = {node_,                                  \
		                       offsetof(weft_msvc_stats, field), n};   \
		assert_true(test_wait(stat_at_most, &w_, WAIT_MS));            \
	} while (0)

/* Nothing is held for clients once they are gone. */
static void
assert_clients_gone(void)
{
	WAIT_STAT_DOWN(0, clients_open, 0);
	WAIT_STAT_DOWN(0, client_queued_bytes, 0);
	WAIT_STAT_DOWN(0, inflight_bytes, 0);
}

static void
stall_tune(weft_msvc_limits *l)
{
	loose_tune(l);
	l->client_pause_bytes = 256 << 10;
	l->client_stall_timeout_ms = 1500;
}

/* A client that sends requests as fast as it can and never reads. */
struct flood {
	rawpeer p;
	int sent;
};

static void *
flood_main(void *arg)
{
	struct flood *f = arg;
	static uint8_t payload[16384];
	struct evbuffer *b = evbuffer_new();

	for (f->sent = 0; f->sent < 4000; f->sent++) {
		rp_envelope(b, f->p.crc, (uint64_t)f->sent + 1, VERB_ECHO,
		            RP_REQUEST, weft_wall_ms() + 60000, payload,
		            sizeof(payload));
		if (!rp_send(&f->p, b))
			break; /* the node closed it, or stopped reading */
	}
	evbuffer_free(b);
	return NULL;
}

/*
 * 5. A client that never reads its answers stops being read once they
 * back up, holds no more than that, and is closed past the stall
 * deadline; members are served meanwhile, and nothing is left held.
 */
static void
test_client_that_never_reads_is_stopped_and_closed(void **state)
{
	struct flood f;
	pthread_t thread;
	weft_msvc_stats st;

	(void)state;
	start(2, false, stall_tune);
	assert_true(
	    rp_connect_from(&f.p, weft_msvc_port(cl.svc[0]), NULL, 4096));
	assert_int_equal(rp_handshake(&f.p, "test", "reader", RP_CLIENT, 1, 0),
	                 0);
	pthread_create(&thread, NULL, flood_main, &f);
	WAIT_STAT(0, client_pauses, 1);
	assert_still_serving();
	st = stats(0);
	/* Paused at 256 KiB, plus what one read of requests answers. */
	assert_true(st.client_queued_bytes < (4u << 20));
	WAIT_STAT(0, stalled_clients, 1);
	pthread_join(thread, NULL);
	assert_true(f.sent < 4000);
	rp_close(&f.p);
	assert_clients_gone();
	assert_still_serving();
	stop();
}

static void
frame_tune(weft_msvc_limits *l)
{
	loose_tune(l);
	l->inbound_inflight_bytes = 16 << 20;
	l->frame_timeout_ms = 1000;
}

/* Sends the header of a frame of n bytes and its first have bytes. */
static void
partial_frame(rawpeer *p, uint32_t n, size_t have)
{
	uint8_t h[4] = {(uint8_t)(n >> 24), (uint8_t)(n >> 16),
	                (uint8_t)(n >> 8), (uint8_t)n};
	uint8_t *body = calloc(1, have);

	assert_true(rp_send_bytes(p, h, 4));
	assert_true(rp_send_bytes(p, body, have));
	free(body);
}

/*
 * 6. Frames that never finish: their bytes count in the inbound budget
 * from the start (one 8 MiB frame holds 8 MiB of it), a frame the budget
 * has no room for is not read at all, and each connection is closed at
 * its frame deadline. Members are served meanwhile.
 */
static void
test_frames_that_never_finish_are_counted_and_closed(void **state)
{
	rawpeer p[3];
	int i;

	(void)state;
	start(2, false, frame_tune);
	/* With its length field and CRC, two such frames fill 16 MiB. */
	for (i = 0; i < 3; i++) {
		client_in(&p[i], NULL, "partial");
		partial_frame(&p[i], (8u << 20) - 8, 1u << 20);
	}
	/* Two reservations fit in 16 MiB; the third waits, unread. */
	WAIT_STAT(0, inflight_bytes, 16u << 20);
	WAIT_STAT(0, read_pauses, 1);
	assert_true(stats(0).inflight_bytes <= (16u << 20) + 64);
	WAIT_STAT(0, frame_timeouts, 2);
	for (i = 0; i < 3; i++)
		assert_true(rp_closed(&p[i], WAIT_MS));
	WAIT_STAT(0, frame_timeouts, 3);
	for (i = 0; i < 3; i++)
		rp_close(&p[i]);
	assert_clients_gone();
	assert_still_serving();
	/* A header cut short is a frame begun, too. */
	client_in(&p[0], NULL, "partial");
	assert_true(rp_send_bytes(&p[0], "\0\0", 2));
	assert_true(rp_closed(&p[0], WAIT_MS));
	rp_close(&p[0]);
	WAIT_STAT(0, frame_timeouts, 4);
	stop();
}

static void
idle_tune(weft_msvc_limits *l)
{
	loose_tune(l);
	l->client_idle_timeout_ms = 600;
}

/* 7a. A client that sends and receives nothing is closed; one that keeps
 * asking is not. */
static void
test_idle_clients_are_closed(void **state)
{
	rawpeer idle, busy;
	rp_env e;
	int i;

	(void)state;
	start(2, false, idle_tune);
	client_in(&idle, NULL, "idle");
	client_in(&busy, NULL, "busy");
	for (i = 0; i < 8; i++) {
		assert_true(
		    rp_request(&busy, (uint64_t)i + 1, VERB_ECHO, "x", 1));
		assert_int_equal(rp_read_env(&busy, &e, WAIT_MS), 0);
		test_wait(one_held, NULL,
		          200); /* 200 ms, nothing to wait for */
	}
	assert_true(rp_closed(&idle, 100));
	assert_int_equal(stats(0).idle_clients, 1);
	assert_true(rp_request(&busy, 99, VERB_ECHO, "x", 1));
	assert_int_equal(rp_read_env(&busy, &e, WAIT_MS), 0);
	rp_close(&idle);
	rp_close(&busy);
	stop();
}

static void
cap_tune(weft_msvc_limits *l)
{
	loose_tune(l);
	l->max_clients = 5;
	l->max_clients_per_address = 3;
	l->max_handshakes = 4;
}

static int
client_from(rawpeer *p, const char *src)
{
	assert_true(rp_connect_from(p, weft_msvc_port(cl.svc[0]), src, 0));
	return rp_handshake(p, "test", "capped", RP_CLIENT, 1, 0);
}

/*
 * 7b. Client connections are capped per address and in all, and
 * connections in their handshake too; members still get in: n2, stopped
 * and started again, is reached and answers.
 */
static void
test_clients_are_capped_and_members_still_get_in(void **state)
{
	static const char *const from[] = {
	    "127.0.0.1", "127.0.0.1", "127.0.0.1", "127.0.0.2", "127.0.0.2"};
	rawpeer c[7];
	struct tally t = {.want = 1};
	int i;

	(void)state;
	start(2, false, cap_tune);
	for (i = 0; i < 5; i++)
		assert_int_equal(client_from(&c[i], from[i]), 0);
	assert_int_equal(client_from(&c[5], "127.0.0.1"), 5); /* NO_CLIENTS */
	rp_close(&c[5]);
	assert_int_equal(client_from(&c[5], "127.0.0.3"), 5);
	rp_close(&c[5]);
	WAIT_STAT(0, clients_refused, 2);
	/* A member that comes back is let in with every client slot taken. */
	cluster_stop_node(&cl, 1, 1000);
	assert_int_equal(cluster_start_node(&cl, 1), 0);
	assert_int_equal(weft_msvc_request(cl.svc[1], cluster_peer(&cl, 1, 0),
	                                   VERB_ECHO, "m", 1, NULL, tally_cb,
	                                   &t),
	                 0);
	assert_true(test_wait(tally_complete, &t, WAIT_MS));
	assert_int_equal(atomic_load(&t.ok), 1);
	/* Silent connections beyond the handshake cap make room: the
	 * oldest are closed (test_door.c tries the door harder). */
	for (i = 0; i < 5; i++)
		rp_close(&c[i]);
	for (i = 0; i < 6; i++)
		assert_true(
		    rp_connect_from(&c[i], weft_msvc_port(cl.svc[0]), NULL, 0));
	WAIT_STAT(0, handshakes_dropped, 2);
	for (i = 0; i < 6; i++)
		rp_close(&c[i]);
	stop();
}

/* 9. Thirty bad connections in a burst are one warning, with a count. */
static void
test_a_burst_of_bad_connections_is_one_line(void **state)
{
	struct evbuffer *b = evbuffer_new();
	rawpeer p;
	int i;

	(void)state;
	start(2, false, NULL);
	atomic_store(&closing_lines, 0);
	for (i = 0; i < 30; i++) {
		client_in(&p, NULL, "noisy");
		bad_tail(b, TAIL_ENVELOPE, p.crc);
		assert_true(rp_send(&p, b));
		assert_true(rp_closed(&p, WAIT_MS));
		rp_close(&p);
	}
	WAIT_STAT(0, bad_envelopes, 30);
	assert_int_equal(atomic_load(&closing_lines), 1);
	evbuffer_free(b);
	stop();
}

/* 11. A node that is draining answers new handshakes SHUTTING_DOWN,
 * while what it still waits for arrives on the connections it has. */
struct stopper {
	weft_msvc *svc;
	pthread_t thread;
};

static void *
stop_main(void *arg)
{
	struct stopper *s = arg;

	weft_msvc_stop(s->svc, 10000);
	return NULL;
}

static void
test_draining_node_refuses_new_handshakes(void **state)
{
	struct stopper s;
	struct reply r = {0};
	rawpeer p;
	int status = 0;
	uint64_t deadline;

	(void)state;
	start(2, false, NULL);
	(void)pending_request_to_n2(&r);
	s.svc = cl.svc[0];
	pthread_create(&s.thread, NULL, stop_main, &s);
	/* The drain waits for n1's request to n2; ask until it refuses. */
	deadline = weft_now_ns() + WAIT_MS * 1000000ull;
	while (status != 7 && weft_now_ns() < deadline) {
		rp_connect(&p, weft_msvc_port(cl.svc[0]), NULL, NULL);
		status = rp_handshake(&p, "test", "late", RP_CLIENT, 1, 0);
		rp_close(&p);
	}
	assert_int_equal(status, 7); /* SHUTTING_DOWN */
	/* n2's answer still reaches n1 during the drain. */
	answer_held(&r);
	pthread_join(s.thread, NULL);
	stop();
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_answer_flushed_into_a_closing_connection),
	    cmocka_unit_test(test_answer_flushed_into_a_closing_tls_connection),
	    cmocka_unit_test(test_response_from_a_client_is_refused),
	    cmocka_unit_test(test_nothing_is_handled_after_the_close),
	    cmocka_unit_test(test_requests_in_any_valid_encoding_are_answered),
	    cmocka_unit_test(test_response_from_another_member_is_refused),
	    cmocka_unit_test(test_request_ids_cannot_be_guessed),
	    cmocka_unit_test(test_forged_response_handed_between_loops),
	    cmocka_unit_test(test_tls_client_id_must_match_its_certificate),
	    cmocka_unit_test(test_dialer_claiming_the_acceptors_id_is_refused),
	    cmocka_unit_test(
	        test_optional_mode_refuses_plaintext_claims_of_tls_members),
	    cmocka_unit_test(
	        test_client_that_never_reads_is_stopped_and_closed),
	    cmocka_unit_test(
	        test_frames_that_never_finish_are_counted_and_closed),
	    cmocka_unit_test(test_idle_clients_are_closed),
	    cmocka_unit_test(test_clients_are_capped_and_members_still_get_in),
	    cmocka_unit_test(test_a_burst_of_bad_connections_is_one_line),
	    cmocka_unit_test(test_draining_node_refuses_new_handshakes),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
