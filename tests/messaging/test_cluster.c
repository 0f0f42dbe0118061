/* SPDX-License-Identifier: MIT */
/* test_cluster.c: a 3-node cluster in one process: requests, one-way
 * ordering, unknown verbs, timeouts, expiry, large messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include <cmocka.h>

#include <event2/buffer.h>

#include "cluster.h"
#include "support/wait.h"

static struct cluster cl;

struct pair_check {
	_Atomic int done;
	_Atomic int bad;
	int want;
};

static void
on_pair_reply(weft_msvc *svc, int status, const void *data, size_t len,
              void *arg)
{
	struct pair_check *pc = arg;
	char want[32];

	snprintf(want, sizeof(want), "from %s", weft_msvc_node_id(svc));
	if (status != 0 || len != strlen(want) || memcmp(data, want, len) != 0)
		atomic_fetch_add(&pc->bad, 1);
	atomic_fetch_add(&pc->done, 1);
	test_poke();
}

static bool
pairs_done(void *arg)
{
	struct pair_check *pc = arg;

	return atomic_load(&pc->done) >= pc->want;
}

static bool
all_up(void *arg)
{
	struct cluster *c = arg;

	return atomic_load(&c->ups) >= c->n * (c->n - 1);
}

static void
test_requests_between_every_pair(void **state)
{
	struct pair_check pc = {.want = 3 * 2 * 50};
	char text[32];
	int i, j, k;

	(void)state;
	assert_int_equal(cluster_start(&cl, 3, NULL), 0);
	for (k = 0; k < 50; k++)
		for (i = 0; i < 3; i++)
			for (j = 0; j < 3; j++) {
				if (i == j)
					continue;
				snprintf(text, sizeof(text), "from n%d", i + 1);
				assert_int_equal(
				    weft_msvc_request(
				        cl.svc[i], cluster_peer(&cl, i, j),
				        k % 2 ? VERB_ECHO : VERB_ECHO_BLOCK,
				        text, strlen(text), NULL, on_pair_reply,
				        &pc),
				    0);
			}
	assert_true(test_wait(pairs_done, &pc, 5000));
	assert_int_equal(atomic_load(&pc.bad), 0);
	assert_true(test_wait(all_up, &cl, 5000));
	for (i = 0; i < 3; i++)
		for (j = 0; j < 3; j++)
			if (i != j)
				assert_true(weft_msvc_peer_is_up(
				    cluster_peer(&cl, i, j)));
	cluster_stop(&cl);
}

/* An echo whose answer must equal what was sent. */
struct echo_check {
	_Atomic int done;
	_Atomic int bad;
	const uint8_t *want;
	size_t want_len;
};

static void
on_echo_check(weft_msvc *svc, int status, const void *data, size_t len,
              void *arg)
{
	struct echo_check *e = arg;

	(void)svc;
	if (status != 0 || len != e->want_len || memcmp(data, e->want, len))
		atomic_fetch_add(&e->bad, 1);
	atomic_fetch_add(&e->done, 1);
	test_poke();
}

static bool
echo_done(void *arg)
{
	return atomic_load(&((struct echo_check *)arg)->done) > 0;
}

/* A payload made of many evbuffer chains (more than one batch of the
 * CRC's 16 vectors) arrives whole, with a good checksum. */
static void
test_request_buf_of_many_chains(void **state)
{
	static uint8_t bytes[40 * 100];
	struct echo_check e = {.want = bytes, .want_len = sizeof(bytes)};
	struct evbuffer *payload = evbuffer_new();
	weft_msvc_stats st;

	(void)state;
	for (size_t i = 0; i < sizeof(bytes); i++)
		bytes[i] = (uint8_t)(i * 7 + 3);
	/* 40 chains of 100 bytes: each referenced piece is a chain. */
	for (size_t i = 0; i < 40; i++)
		evbuffer_add_reference(payload, bytes + 100 * i, 100, NULL,
		                       NULL);
	assert_true(evbuffer_peek(payload, -1, NULL, NULL, 0) >= 40);
	assert_int_equal(cluster_start(&cl, 2, NULL), 0);
	assert_int_equal(
	    weft_msvc_request_buf(cl.svc[0], cluster_peer(&cl, 0, 1), VERB_ECHO,
	                          payload, NULL, on_echo_check, &e),
	    0);
	assert_true(test_wait(echo_done, &e, 5000));
	assert_int_equal(atomic_load(&e.bad), 0);
	weft_msvc_get_stats(cl.svc[1], &st);
	assert_int_equal(st.bad_frames, 0);
	cluster_stop(&cl);
	evbuffer_free(payload);
}

static void
test_unknown_verb_gets_error_response(void **state)
{
	struct tally t = {.want = 1};
	weft_msvc_stats st;

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, NULL), 0);
	assert_int_equal(weft_msvc_request(cl.svc[0], cluster_peer(&cl, 0, 1),
	                                   99, "x", 1, NULL, tally_cb, &t),
	                 0);
	assert_true(test_wait(tally_complete, &t, 5000));
	assert_int_equal(atomic_load(&t.status_counts[-WEFT_EUNKNOWNVERB]), 1);
	weft_msvc_get_stats(cl.svc[1], &st);
	assert_int_equal(st.unknown_verbs, 1);
	/* Verbs out of range are refused locally. */
	assert_int_equal(weft_msvc_request(cl.svc[0], cluster_peer(&cl, 0, 1),
	                                   5, "x", 1, NULL, tally_cb, &t),
	                 WEFT_EINVAL);
	cluster_stop(&cl);
}

static bool
sink_has(void *arg)
{
	return atomic_load(&cl.sink_count[1]) >= (uint64_t)(uintptr_t)arg;
}

static void
test_oneway_messages_keep_their_order(void **state)
{
	uint64_t seq;

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, NULL), 0);
	for (seq = 0; seq < 2000; seq++)
		assert_int_equal(
		    weft_msvc_send(cl.svc[0], cluster_peer(&cl, 0, 1),
		                   VERB_SINK, &seq, sizeof(seq), NULL),
		    0);
	assert_true(test_wait(sink_has, (void *)(uintptr_t)2000, 5000));
	assert_int_equal(atomic_load(&cl.sink_disorder[1]), 0);
	cluster_stop(&cl);
}

struct stat_wait {
	weft_msvc *svc;
	size_t offset;
	uint64_t want;
};

static bool
stat_reached(void *arg)
{
	struct stat_wait *w = arg;
	weft_msvc_stats st;

	weft_msvc_get_stats(w->svc, &st);
	return *(uint64_t *)((char *)&st + w->offset) >= w->want;
}

#define WAIT_STAT(svc_, field, n)                                              \
	do {                                                                   \
		struct stat_wait w_ = {svc_, offsetof(weft_msvc_stats, field), \
		                       n};                                     \
		assert_true(test_wait(stat_reached, &w_, 5000));               \
	} while (0)

static bool
held_one(void *arg)
{
	(void)arg;
	return atomic_load(&cl.held_count) >= 1;
}

static void
test_request_times_out_and_late_answer_is_dropped(void **state)
{
	weft_msvc_call_opts o = {.timeout_ms = 100};
	struct tally t = {.want = 1};
	weft_msvc_peer_stats ps;
	weft_msvc_verb_stats vs;
	weft_msvc_msg *m;
	uint64_t t0;

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, NULL), 0);
	t0 = weft_now_ns();
	assert_int_equal(weft_msvc_request(cl.svc[0], cluster_peer(&cl, 0, 1),
	                                   VERB_HOLD, "?", 1, &o, tally_cb, &t),
	                 0);
	assert_true(test_wait(tally_complete, &t, 5000));
	assert_int_equal(atomic_load(&t.status_counts[-WEFT_ETIMEDOUT]), 1);
	/* Not before the timeout; the bound above it is loose for loaded
	 * machines and sanitizers. */
	assert_true(weft_now_ns() - t0 >= 95 * 1000000ull);
	assert_true(weft_now_ns() - t0 < 4000 * 1000000ull);
	weft_msvc_peer_get_stats(cluster_peer(&cl, 0, 1), &ps);
	assert_int_equal(ps.timed_out, 1);
	assert_int_equal(ps.pending, 0);
	weft_msvc_verb_get_stats(cl.svc[0], VERB_HOLD, &vs);
	assert_int_equal(vs.timed_out, 1);
	assert_int_equal(vs.pending, 0);
	assert_int_equal(vs.sent, 1);
	assert_true(test_wait(held_one, NULL, 5000));
	m = atomic_exchange(&cl.held[0], NULL);
	/* The deadline passed: the responder's own send queue drops it. */
	assert_int_equal(weft_msvc_respond(m, "late", 4), 0);
	cluster_stop(&cl);
}

static void
unreachable_tune(weft_msvc_limits *l)
{
	l->reconnect_min_ms = 10;
	l->reconnect_max_ms = 20;
	l->connect_timeout_ms = 200;
}

static bool
is_up(void *arg)
{
	return weft_msvc_peer_is_up(arg);
}

static bool
is_down(void *arg)
{
	return weft_msvc_peer_is_down(arg);
}

static void
test_expired_in_send_queue(void **state)
{
	weft_msvc_call_opts o = {.timeout_ms = 60};
	struct tally t = {.want = 1};
	weft_msvc_peer *p;
	uint16_t port;
	int hole;

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, unreachable_tune), 0);
	/* n1 believes n2 is where its handshake goes unanswered: what is
	 * sent waits for the connection, and expires first. */
	hole = cluster_black_hole(&port);
	assert_int_equal(
	    weft_msvc_set_peer_addr(cl.svc[0], "n2", "127.0.0.1", port), 0);
	p = cluster_peer(&cl, 0, 1);
	assert_int_equal(weft_msvc_send(cl.svc[0], p, VERB_SINK, "a", 1, &o),
	                 0);
	assert_int_equal(weft_msvc_request(cl.svc[0], p, VERB_ECHO, "b", 1, &o,
	                                   tally_cb, &t),
	                 0);
	assert_true(test_wait(tally_complete, &t, 5000));
	assert_int_equal(atomic_load(&t.status_counts[-WEFT_EEXPIRED]), 1);
	WAIT_STAT(cl.svc[0], expired_in_queue, 2);
	assert_false(weft_msvc_peer_is_up(p));
	close(hole);
	/* A deadline already past is refused at once. */
	o.timeout_ms = 0;
	o.deadline_ms = weft_wall_ms() - 1;
	assert_int_equal(weft_msvc_send(cl.svc[0], p, VERB_SINK, "a", 1, &o),
	                 WEFT_EEXPIRED);
	cluster_stop(&cl);
}

/* Warning lines about refused connections, counted by the log sink
 * while counting is on (the sink itself is set while no loop runs). */
static _Atomic int refused_lines;
static _Atomic bool counting;

static void
count_refused(enum weft_log_level level, const char *line, void *arg)
{
	(void)arg;
	fprintf(stderr, "%s\n", line);
	if (atomic_load(&counting) && level >= WEFT_LOG_WARN &&
	    strstr(line, "efused") != NULL)
		atomic_fetch_add(&refused_lines, 1);
}

/*
 * Where nobody listens, the dial is refused: what waited for it ends with
 * "peer down" at once, not when it expires, and so does what is sent
 * while the peer is known down. Once it can be reached, it is up again.
 */
static void
test_unreachable_peer_fails_fast(void **state)
{
	weft_msvc_call_opts o = {.timeout_ms = 8000};
	struct tally t = {.want = 2};
	weft_msvc_peer *p;

	(void)state;
	weft_log_set_sink(count_refused, NULL);
	assert_int_equal(cluster_start(&cl, 2, unreachable_tune), 0);
	assert_int_equal(
	    weft_msvc_set_peer_addr(cl.svc[0], "n2", "127.0.0.1", 1), 0);
	p = cluster_peer(&cl, 0, 1);
	assert_int_equal(weft_msvc_request(cl.svc[0], p, VERB_ECHO, "b", 1, &o,
	                                   tally_cb, &t),
	                 0);
	/* Well before the 8 s the request could have waited. */
	assert_true(test_wait(is_down, p, 4000));
	assert_int_equal(weft_msvc_send(cl.svc[0], p, VERB_SINK, "a", 1, &o),
	                 WEFT_EPEERDOWN);
	assert_int_equal(weft_msvc_request(cl.svc[0], p, VERB_ECHO, "c", 1, &o,
	                                   tally_cb, &t),
	                 0);
	assert_true(test_wait(tally_complete, &t, 4000));
	assert_int_equal(atomic_load(&t.status_counts[-WEFT_EPEERDOWN]), 2);
	/* Redials every 10-20 ms: the log says so once, not every time. */
	atomic_store(&refused_lines, 0);
	atomic_store(&counting, true);
	test_wait(weft_test_never, NULL, 300);
	atomic_store(&counting, false);
	assert_int_equal(atomic_load(&refused_lines), 0);
	/* The real address: it comes back by itself, and answers. */
	assert_int_equal(weft_msvc_set_peer_addr(cl.svc[0], "n2", "127.0.0.1",
	                                         weft_msvc_port(cl.svc[1])),
	                 0);
	assert_true(test_wait(is_up, p, 5000));
	assert_false(weft_msvc_peer_is_down(p));
	t = (struct tally){.want = 1};
	assert_int_equal(weft_msvc_request(cl.svc[0], p, VERB_ECHO, "d", 1, &o,
	                                   tally_cb, &t),
	                 0);
	assert_true(test_wait(tally_complete, &t, 5000));
	assert_int_equal(atomic_load(&t.ok), 1);
	cluster_stop(&cl);
	weft_log_set_sink(NULL, NULL);
}

/* A request whose answer never comes hears "timed out" no sooner than its
 * deadline: the node that holds it judges the same deadline by the same
 * clock, so a caller told "timed out" may count on the handler seeing the
 * request as expired. A loop's cached coarse clock must not make the
 * timer fire a tick early. */
struct deadline_probe {
	uint64_t deadline_ms;
	_Atomic uint64_t done_ms;
	_Atomic int status;
};

static void
deadline_cb(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	struct deadline_probe *d = arg;

	(void)svc;
	(void)data;
	(void)len;
	atomic_store(&d->status, status);
	atomic_store(&d->done_ms, weft_wall_ms());
	test_poke();
}

#define DEADLINE_PROBES 48

static bool
deadlines_done(void *arg)
{
	struct deadline_probe *d = arg;
	int i;

	for (i = 0; i < DEADLINE_PROBES; i++)
		if (atomic_load(&d[i].done_ms) == 0)
			return false;
	return true;
}

static void
test_timeout_never_reported_before_deadline(void **state)
{
	struct deadline_probe d[DEADLINE_PROBES];
	weft_msvc_call_opts o;
	struct tally t = {.want = 1};
	weft_msvc_peer *p;
	int i, early = 0;

	(void)state;
	memset(d, 0, sizeof(d));
	assert_int_equal(cluster_start(&cl, 2, NULL), 0);
	p = cluster_peer(&cl, 0, 1);
	/* The connection is up: the probes are sent, not held back. */
	assert_int_equal(weft_msvc_request(cl.svc[0], p, VERB_ECHO, "e", 1,
	                                   NULL, tally_cb, &t),
	                 0);
	assert_true(test_wait(tally_complete, &t, 5000));
	assert_int_equal(atomic_load(&t.ok), 1);
	for (i = 0; i < DEADLINE_PROBES; i++) {
		o = (weft_msvc_call_opts){.timeout_ms = 5 + (uint32_t)i};
		d[i].deadline_ms = weft_wall_ms() + o.timeout_ms;
		assert_int_equal(weft_msvc_request(cl.svc[0], p, VERB_HOLD, "h",
		                                   1, &o, deadline_cb, &d[i]),
		                 0);
	}
	assert_true(test_wait(deadlines_done, d, 5000));
	for (i = 0; i < DEADLINE_PROBES; i++) {
		assert_int_equal(atomic_load(&d[i].status), WEFT_ETIMEDOUT);
		if (atomic_load(&d[i].done_ms) < d[i].deadline_ms) {
			print_message(
			    "request %d: timed out at %llu, deadline "
			    "%llu\n",
			    i, (unsigned long long)atomic_load(&d[i].done_ms),
			    (unsigned long long)d[i].deadline_ms);
			early++;
		}
	}
	assert_int_equal(early, 0);
	cluster_stop(&cl);
}

static bool
slow_started(void *arg)
{
	(void)arg;
	return atomic_load(&cl.slow_running) >= 1;
}

static void
test_expired_before_handler(void **state)
{
	weft_msvc_call_opts o = {.timeout_ms = 80};
	struct tally slow = {.want = 1}, t = {.want = 1};
	weft_msvc_peer *p;

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, NULL), 0);
	p = cluster_peer(&cl, 0, 1);
	/* The only worker is busy with a slow job... */
	assert_int_equal(weft_msvc_request(cl.svc[0], p, VERB_SLOW, "s", 1,
	                                   NULL, tally_cb, &slow),
	                 0);
	assert_true(test_wait(slow_started, NULL, 5000));
	/* ...so this one waits for a worker past its deadline. */
	assert_int_equal(weft_msvc_request(cl.svc[0], p, VERB_ECHO_BLOCK, "e",
	                                   1, &o, tally_cb, &t),
	                 0);
	assert_true(test_wait(tally_complete, &t, 5000));
	assert_int_equal(atomic_load(&t.status_counts[-WEFT_ETIMEDOUT]), 1);
	atomic_store(&cl.slow_release, true);
	assert_true(test_wait(tally_complete, &slow, 5000));
	assert_int_equal(atomic_load(&slow.ok), 1);
	WAIT_STAT(cl.svc[1], expired_before_handler, 1);
	cluster_stop(&cl);
}

struct timed {
	_Atomic uint64_t done_ns;
	_Atomic int status;
	_Atomic size_t len;
	_Atomic int count;
};

static void
on_timed(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	struct timed *t = arg;

	(void)svc;
	(void)data;
	atomic_store(&t->status, status);
	atomic_store(&t->len, len);
	atomic_store(&t->done_ns, weft_now_ns());
	atomic_fetch_add(&t->count, 1);
	test_poke();
}

static bool
timed_done(void *arg)
{
	struct timed *t = arg;

	return atomic_load(&t->count) >= 1;
}

static bool
smalls_done(void *arg)
{
	struct timed *t = arg;
	int i;

	for (i = 0; i < 20; i++)
		if (atomic_load(&t[i].count) < 1)
			return false;
	return true;
}

static void
test_large_message_does_not_delay_small_ones(void **state)
{
	const size_t big = 16u << 20;
	struct timed large = {0}, small[20] = {{0}};
	uint64_t t0, small_last = 0, small_max = 0;
	weft_msvc_call_opts o = {.timeout_ms = 20000};
	weft_msvc_peer *p;
	uint8_t *payload;
	int i;

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, NULL), 0);
	p = cluster_peer(&cl, 0, 1);
	/* Warm the small connections up first. */
	assert_int_equal(weft_msvc_request(cl.svc[0], p, VERB_ECHO, "w", 1,
	                                   NULL, on_timed, &small[0]),
	                 0);
	assert_true(test_wait(timed_done, &small[0], 5000));
	memset(small, 0, sizeof(small));
	payload = malloc(big);
	assert_non_null(payload);
	memset(payload, 0xab, big);
	t0 = weft_now_ns();
	assert_int_equal(weft_msvc_request(cl.svc[0], p, VERB_ECHO, payload,
	                                   big, &o, on_timed, &large),
	                 0);
	free(payload);
	for (i = 0; i < 20; i++)
		assert_int_equal(weft_msvc_request(cl.svc[0], p, VERB_ECHO,
		                                   "small", 5, NULL, on_timed,
		                                   &small[i]),
		                 0);
	assert_true(test_wait(smalls_done, small, 10000));
	assert_true(test_wait(timed_done, &large, 20000));
	assert_int_equal(atomic_load(&large.status), 0);
	assert_int_equal(atomic_load(&large.len), big);
	for (i = 0; i < 20; i++) {
		uint64_t d = atomic_load(&small[i].done_ns) - t0;

		assert_int_equal(atomic_load(&small[i].status), 0);
		small_last = d > small_last ? d : small_last;
		small_max = d > small_max ? d : small_max;
	}
	print_message("16 MiB echo: %.1f ms; 20 small echoes sent right "
	              "after it all done by %.2f ms\n",
	              (double)(atomic_load(&large.done_ns) - t0) / 1e6,
	              (double)small_last / 1e6);
	/* The small ones finish long before the large round trip. */
	assert_true(small_last < atomic_load(&large.done_ns) - t0);
	cluster_stop(&cl);
}

static bool
echo_latency_known(void *arg)
{
	weft_msvc_verb_stats vs;

	(void)arg;
	weft_msvc_verb_get_stats(cl.svc[0], VERB_ECHO, &vs);
	return vs.latency_count == 1 && vs.latency_p50_ns > 0 &&
	       vs.latency_p50_ns <= vs.latency_p99_ns &&
	       vs.latency_p99_ns <= vs.latency_max_ns;
}

static void
test_metrics_dump_is_prometheus_text(void **state)
{
	struct tally t = {.want = 1};
	struct evbuffer *out = evbuffer_new();
	char *text;

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, NULL), 0);
	assert_int_equal(weft_msvc_request(cl.svc[0], cluster_peer(&cl, 0, 1),
	                                   VERB_ECHO, "m", 1, NULL, tally_cb,
	                                   &t),
	                 0);
	assert_true(test_wait(tally_complete, &t, 5000));
	assert_int_equal(weft_msvc_metrics_dump(cl.svc[1], out), 0);
	evbuffer_add(out, "", 1);
	text = (char *)evbuffer_pullup(out, -1);
	assert_non_null(strstr(text, "# TYPE weft_msvc_node_messages_in_total "
	                             "counter\n"));
	assert_non_null(strstr(text, "weft_msvc_peer_received_total{node=\"n2\""
	                             ",peer=\"n1\"} "));
	assert_non_null(strstr(text,
	                       "weft_msvc_verb_received_total{node="
	                       "\"n2\",verb=\"echo\",number=\"16\"} 1\n"));
	/* Latencies are histograms (test_metrics.c checks them whole). */
	assert_non_null(strstr(text, "# TYPE weft_msvc_peer_latency_seconds "
	                             "histogram\n"));
	/* The requester's round trips by verb appear with the next
	 * once-a-second snapshot. */
	assert_true(test_wait(echo_latency_known, NULL, 5000));
	evbuffer_drain(out, evbuffer_get_length(out));
	assert_int_equal(weft_msvc_metrics_dump(cl.svc[0], out), 0);
	evbuffer_add(out, "", 1);
	text = (char *)evbuffer_pullup(out, -1);
	assert_non_null(strstr(text, "weft_msvc_verb_latency_seconds_count{"
	                             "node=\"n1\",number=\"16\"} 1\n"));
	evbuffer_free(out);
	cluster_stop(&cl);
}

static void
test_non_member_client_service(void **state)
{
	struct tally t = {.want = 40};
	weft_loop_group *group;
	weft_msvc *client;
	weft_msvc_peer *n1, *n2;
	int i;

	(void)state;
	assert_int_equal(cluster_start(&cl, 2, NULL), 0);
	assert_int_equal(weft_loop_group_new(1, &group), 0);
	/* An id the config does not list: a client that only dials. */
	assert_int_equal(weft_msvc_new(group, cl.cfg, "kv-tool", NULL, &client),
	                 0);
	assert_false(weft_msvc_is_member(client));
	assert_int_equal(weft_msvc_start(client), 0);
	assert_int_equal(weft_msvc_port(client), 0);
	weft_msvc_set_peer_addr(client, "n1", "127.0.0.1",
	                        weft_msvc_port(cl.svc[0]));
	weft_msvc_set_peer_addr(client, "n2", "127.0.0.1",
	                        weft_msvc_port(cl.svc[1]));
	n1 = weft_msvc_peer_find(client, "n1");
	n2 = weft_msvc_peer_find(client, "n2");
	for (i = 0; i < 20; i++) {
		assert_int_equal(weft_msvc_request(client, n1, VERB_ECHO, "a",
		                                   1, NULL, tally_cb, &t),
		                 0);
		assert_int_equal(weft_msvc_request(client, n2, VERB_ECHO_BLOCK,
		                                   "b", 1, NULL, tally_cb, &t),
		                 0);
	}
	assert_true(test_wait(tally_complete, &t, 5000));
	assert_int_equal(atomic_load(&t.ok), 40);
	weft_msvc_stop(client, 1000);
	weft_msvc_free(client);
	weft_loop_group_free(group);
	cluster_stop(&cl);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_requests_between_every_pair),
	    cmocka_unit_test(test_unknown_verb_gets_error_response),
	    cmocka_unit_test(test_oneway_messages_keep_their_order),
	    cmocka_unit_test(test_request_times_out_and_late_answer_is_dropped),
	    cmocka_unit_test(test_expired_in_send_queue),
	    cmocka_unit_test(test_unreachable_peer_fails_fast),
	    cmocka_unit_test(test_timeout_never_reported_before_deadline),
	    cmocka_unit_test(test_expired_before_handler),
	    cmocka_unit_test(test_large_message_does_not_delay_small_ones),
	    cmocka_unit_test(test_metrics_dump_is_prometheus_text),
	    cmocka_unit_test(test_non_member_client_service),
	    cmocka_unit_test(test_request_buf_of_many_chains),
	};

	return cmocka_run_group_tests(tests, test_setup, test_teardown);
}
