/* SPDX-License-Identifier: MIT */
/*
 * test_dns_srv.c: members discovered from SRV records that a real DNS
 * server (unbound, started here on loopback) serves and the test changes
 * while the cluster runs. n1 knows only itself; n2 and n3 join when
 * their records appear (dialled and reported up without traffic), leave
 * only once missing from the answers for the grace, and stay while the
 * server is down; a record naming n1 itself, an empty target and members
 * beyond max_members are ignored.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <weft/discovery.h>
#include <weft/messaging.h>

#include "discovery_int.h"
#include "support/unbound.h"
#include "support/wait.h"

#define ZONE "weft.test"
#define SRV_NAME "_weft._tcp.weft.test."
#define WAIT_MS 20000
#define NODES 3

/* Lines logged by the provider: failures, and caps of an answer. */
static atomic_int failure_lines, cap_lines;

static void
log_sink(enum weft_log_level level, const char *line, void *arg)
{
	(void)level;
	(void)arg;
	if (strstr(line, "dns discovery") != NULL) {
		if (strstr(line, "members it found stay") != NULL)
			atomic_fetch_add(&failure_lines, 1);
		if (strstr(line, "max_members") != NULL)
			atomic_fetch_add(&cap_lines, 1);
	}
	fprintf(stderr, "%s\n", line);
}

struct fixture {
	struct unbound_server dns;
	weft_loop *loop; /* the test thread's: the provider runs on it */
	weft_loop_group *groups[NODES];
	weft_msvc *svc[NODES];
	weft_dns_discovery *disc;
};

static weft_msvc *
start_node(struct fixture *f, int i, int nodes_known)
{
	weft_msvc_config *cfg;
	char id[16];
	int j;

	assert_int_equal(weft_msvc_config_new("dns", &cfg), 0);
	for (j = 0; j < nodes_known; j++) {
		snprintf(id, sizeof(id), "n%d", j + 1);
		assert_int_equal(
		    weft_msvc_config_add_node(cfg, id, "127.0.0.1", 0), 0);
	}
	if (i >= nodes_known) {
		snprintf(id, sizeof(id), "n%d", i + 1);
		assert_int_equal(
		    weft_msvc_config_add_node(cfg, id, "127.0.0.1", 0), 0);
	}
	weft_msvc_config_limits(cfg)->heartbeat_interval_ms = 100;
	weft_msvc_config_limits(cfg)->request_timeout_ms = 300;
	assert_int_equal(weft_loop_group_new(1, &f->groups[i]), 0);
	snprintf(id, sizeof(id), "n%d", i + 1);
	assert_int_equal(weft_msvc_new(f->groups[i], cfg, id, NULL, &f->svc[i]),
	                 0);
	weft_msvc_config_free(cfg);
	assert_int_equal(weft_msvc_start(f->svc[i]), 0);
	return f->svc[i];
}

static int
setup(void **state)
{
	static const char *const hosts[] = {
	    "n1.weft.test. 60 IN A 127.0.0.1",
	    "n2.weft.test. 60 IN A 127.0.0.1",
	    "n3.weft.test. 60 IN A 127.0.0.1",
	};
	struct fixture *f;

	assert_non_null(f = calloc(1, sizeof(*f)));
	unbound_start(&f->dns, ZONE, hosts, 3);
	/* The members' names are looked up on the same server. */
	assert_int_equal(setenv("WEFT_RESOLV_CONF", f->dns.resolv_conf, 1), 0);
	assert_int_equal(weft_loop_new(&f->loop), 0);
	/* n1 knows only itself; n2 and n3 know all three. */
	start_node(f, 0, 0);
	start_node(f, 1, NODES);
	start_node(f, 2, NODES);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;
	int i;

	weft_dns_discovery_free(f->disc);
	for (i = 0; i < NODES; i++) {
		weft_msvc_stop(f->svc[i], 0);
		weft_msvc_free(f->svc[i]);
		weft_loop_group_free(f->groups[i]);
	}
	weft_loop_free(f->loop);
	unbound_free(&f->dns);
	unsetenv("WEFT_RESOLV_CONF");
	free(f);
	return 0;
}

static void
discover(struct fixture *f, uint64_t grace_ms, uint32_t max_members)
{
	const weft_dns_discovery_opts opts = {
	    .name = ZONE,
	    .servers = f->dns.servers,
	    .grace_ms = grace_ms,
	    .min_interval_ms = 100,
	    .max_interval_ms = 1000,
	    .max_members = max_members,
	};

	assert_int_equal(
	    weft_dns_discovery_new(f->svc[0], f->loop, &opts, &f->disc), 0);
	assert_int_equal(weft_dns_discovery_start(f->disc), 0);
}

/* The SRV records become exactly those of ids (n2 -> n2.weft.test at n2's
 * port); "": none. */
static void
set_records(struct fixture *f, const char *ids)
{
	char rec[256];
	const char *p;

	assert_int_equal(unbound_remove(&f->dns, SRV_NAME), 0);
	for (p = ids; *p != '\0'; p += strcspn(p, " "), p += *p == ' ') {
		int i = p[1] - '1';

		snprintf(rec, sizeof(rec), "%s 1 IN SRV 0 0 %u n%d.weft.test.",
		         SRV_NAME, weft_msvc_port(f->svc[i]), i + 1);
		assert_int_equal(unbound_add(&f->dns, rec), 0);
	}
}

struct until {
	struct fixture *f;
	const char *id;
	uint64_t answers;
};

static weft_dns_discovery_stats
stats(struct fixture *f)
{
	weft_dns_discovery_stats st;

	weft_dns_discovery_stats_get(f->disc, &st);
	return st;
}

static bool
member_up(void *arg)
{
	struct until *u = arg;
	weft_msvc_peer *p = weft_msvc_peer_find(u->f->svc[0], u->id);

	return p != NULL && weft_msvc_peer_is_up(p);
}

static bool
member_gone(void *arg)
{
	struct until *u = arg;

	return weft_msvc_peer_find(u->f->svc[0], u->id) == NULL;
}

static bool
answered(void *arg)
{
	struct until *u = arg;

	return stats(u->f).answers >= u->answers;
}

static void
wait_member_up(struct fixture *f, const char *id)
{
	struct until u = {f, id, 0};

	assert_int_equal(weft_test_run_until(f->loop, member_up, &u, WAIT_MS),
	                 0);
}

/* Two more answers: the second was asked for after the change. */
static void
wait_two_answers(struct fixture *f)
{
	struct until u = {f, NULL, stats(f).answers + 2};

	assert_int_equal(weft_test_run_until(f->loop, answered, &u, WAIT_MS),
	                 0);
}

static void
test_records_added_and_removed(void **state)
{
	struct fixture *f = *state;
	struct until gone = {f, "n3", 0};

	set_records(f, "n2");
	discover(f, 8000, 0);
	wait_member_up(f, "n2");

	/* A record added while it runs: n3 joins, dialled and up. */
	set_records(f, "n2 n3");
	wait_member_up(f, "n3");
	assert_int_equal(stats(f).added, 2);

	/* n2 flaps: gone from two answers, then back. It stays. */
	set_records(f, "n3");
	wait_two_answers(f);
	assert_non_null(weft_msvc_peer_find(f->svc[0], "n2"));
	set_records(f, "n2");
	wait_two_answers(f);

	/* n3, gone since, leaves once the grace is over; n2 stays. */
	assert_int_equal(stats(f).removed, 0);
	assert_int_equal(
	    weft_test_run_until(f->loop, member_gone, &gone, WAIT_MS), 0);
	assert_non_null(weft_msvc_peer_find(f->svc[0], "n2"));
	assert_int_equal(stats(f).removed, 1);
	assert_int_equal(stats(f).members, 1);
}

static void
test_server_down_removes_nobody(void **state)
{
	struct fixture *f = *state;
	weft_dns_discovery_stats st;
	int lines;

	set_records(f, "n2 n3");
	discover(f, 1000, 0);
	wait_member_up(f, "n2");
	wait_member_up(f, "n3");
	atomic_store(&failure_lines, 0);

	/* Failing for three times the grace: nothing is removed, and the
	 * failures are one line (a line per 10 s). */
	unbound_stop(&f->dns);
	assert_int_equal(
	    weft_test_run_until(f->loop, weft_test_never, NULL, 3000),
	    WEFT_ETIMEDOUT);
	st = stats(f);
	assert_true(st.failures >= 2);
	assert_int_equal(st.removed, 0);
	assert_non_null(weft_msvc_peer_find(f->svc[0], "n2"));
	assert_non_null(weft_msvc_peer_find(f->svc[0], "n3"));
	lines = atomic_load(&failure_lines);
	assert_int_equal(lines, 1);
}

/* A huge answer (more than fits UDP: it comes again over TCP), with a
 * record naming n1 itself and one of "." among them. */
#define HUGE_ANSWER 1000

/* Adds n SRV records for m0000, m0001 ... at one go. */
static void
add_many(struct fixture *f, int n)
{
	char **recs = calloc((size_t)n, sizeof(*recs));
	int i;

	assert_non_null(recs);
	for (i = 0; i < n; i++) {
		assert_non_null(recs[i] = malloc(96));
		snprintf(recs[i], 96, "%s 1 IN SRV 0 0 %d m%04d.weft.test.",
		         SRV_NAME, 1000 + i % 1000, i);
	}
	assert_int_equal(
	    unbound_add_many(&f->dns, (const char *const *)recs, (size_t)n), 0);
	for (i = 0; i < n; i++)
		free(recs[i]);
	free(recs);
}

static void
test_self_empty_and_too_many_ignored(void **state)
{
	struct fixture *f = *state;
	weft_dns_discovery_stats st;
	char rec[256];

	set_records(f, "n1");
	snprintf(rec, sizeof(rec), "%s 1 IN SRV 0 0 1 .", SRV_NAME);
	assert_int_equal(unbound_add(&f->dns, rec), 0);
	add_many(f, HUGE_ANSWER);
	atomic_store(&cap_lines, 0);
	discover(f, 8000, 8);
	wait_two_answers(f);
	st = stats(f);
	/* n1 and "." in each answer. */
	assert_true(st.ignored >= 4);
	assert_int_equal(st.added, 8);
	assert_int_equal(st.members, 8);
	assert_int_equal(weft_msvc_members(f->svc[0], NULL, 0), 9);
	/* The first 8 by name, whatever order the answer had. */
	assert_non_null(weft_msvc_peer_find(f->svc[0], "m0000"));
	assert_non_null(weft_msvc_peer_find(f->svc[0], "m0007"));
	assert_null(weft_msvc_peer_find(f->svc[0], "m0008"));
	assert_int_equal(atomic_load(&cap_lines), 1);
}

/* 10,000 records: more than a DNS message holds, truncated even over
 * TCP. That is no answer, not an empty one: nobody leaves. */
static void
test_truncated_answer_removes_nobody(void **state)
{
	struct fixture *f = *state;
	weft_dns_discovery_stats st;
	uint64_t failures;

	set_records(f, "n2");
	discover(f, 500, 0);
	wait_member_up(f, "n2");
	failures = stats(f).failures;
	add_many(f, 10000);
	assert_int_equal(
	    weft_test_run_until(f->loop, weft_test_never, NULL, 2000),
	    WEFT_ETIMEDOUT);
	st = stats(f);
	assert_true(st.failures > failures);
	assert_int_equal(st.removed, 0);
	assert_int_equal(st.added, 1);
	assert_non_null(weft_msvc_peer_find(f->svc[0], "n2"));
}

/* Malformed messages: cut anywhere, the TTL reader refuses them. */
static void
test_ttl_of_malformed_answers(void **state)
{
	/* One question (a.b, SRV) and one SRV answer (a pointer to it), TTL
	 * 7. */
	static const unsigned char msg[] = {
	    0,    1,   0x81, 0x80, 0,    1,    0,  1, 0, 0, 0, 0, /* header */
	    1,    'a', 1,    'b',  0,    0,    33, 0, 1,          /* question */
	    0xc0, 12,  0,    33,   0,    1,    0,  0, 0, 7, 0, 8, /* answer */
	    0,    0,   0,    0,    0x1f, 0x90, 0,  0};            /* rdata */
	uint32_t ttl = 0;
	size_t n;

	(void)state;
	assert_int_equal(weft__srv_min_ttl(msg, sizeof(msg), &ttl), 0);
	assert_int_equal(ttl, 7);
	for (n = 0; n < sizeof(msg); n++)
		assert_int_equal(weft__srv_min_ttl(msg, n, &ttl), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_records_added_and_removed,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_server_down_removes_nobody,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_self_empty_and_too_many_ignored, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_truncated_answer_removes_nobody, setup, teardown),
	    cmocka_unit_test(test_ttl_of_malformed_answers),
	};

	if (!unbound_available()) {
		fprintf(stderr, "unbound is not installed "
		                "(scripts/install-deps.sh): skipped\n");
		return 77;
	}
	weft_init();
	weft_log_set_sink(log_sink, NULL);
	weft_log_set_level(WEFT_LOG_INFO);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
