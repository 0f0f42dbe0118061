/* SPDX-License-Identifier: MIT */
/*
 * test_weftd.c: three weftd processes on loopback, driven by a non-member
 * client service in the test and by the weft-kv binary: requests to every
 * node and between every pair, signals (SIGUSR1, SIGTERM under traffic,
 * SIGKILL and restart under load) and the /metrics endpoint. Bad
 * configurations are test_weftd_config.c's.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include <weft/kv.h>

#include "support/weftd_proc.h"
#include "weftd_proto.h"

#define NODES 3
#define WAIT_MS 10000

static const char *const ids[NODES] = {"n1", "n2", "n3"};

struct fixture {
	char dir[64];
	char config[128];
	uint16_t ports[NODES];
	struct wt_proc p[NODES];
	weft_loop_group *group;
	weft_msvc *client;
};

/* ---- The cluster ------------------------------------------------------ */

static void
write_config(struct fixture *f)
{
	char text[2048];
	int n;

	n = wt_config_begin(text, sizeof(text), "weftd-test", ids, f->ports,
	                    NODES);
	snprintf(text + n, sizeof(text) - (size_t)n,
	         "request_timeout = 2s\nconnect_timeout = 1s\n"
	         "[weftd]\nmetrics_listen = 127.0.0.1:0\n"
	         "shutdown_timeout = 2s\n"
	         "[kv]\nwrite_quorum = all\nreplicate_timeout = 1s\n");
	wt_write_file(f->config, text);
}

static void
node_start(struct fixture *f, int i)
{
	wt_node_start(&f->p[i], f->config, f->dir, ids[i], f->ports[i], NULL);
}

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	int i;

	assert_non_null(f);
	wt_scratch_new("weftd-test", f->dir, sizeof(f->dir), f->config,
	               sizeof(f->config), f->ports, NODES);
	write_config(f);
	for (i = 0; i < NODES; i++)
		node_start(f, i);
	wt_client_start(f->config, "test-client", NULL, &f->group, &f->client);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;
	int bad;

	wt_client_stop(f->group, f->client);
	bad = wt_scratch_remove(f->p, NODES, f->config, f->dir);
	free(f);
	assert_int_equal(bad, 0);
	return 0;
}

/* ---- Requests from the test's client ---------------------------------------
 */

static weft_msvc_peer *
peer(struct fixture *f, int i)
{
	return wt_peer(f->client, ids[i]);
}

/* wait_up waits until the client has node i up again. */
static void
wait_up(struct fixture *f, int i)
{
	uint64_t start = weft_now_ns();

	while (!weft_msvc_peer_is_up(peer(f, i)) &&
	       wt_ms_since(start) < WAIT_MS)
		wt_pause_ms(5);
	assert_true(weft_msvc_peer_is_up(peer(f, i)));
}

static int
echo(struct fixture *f, int i, const char *text)
{
	struct wt_call c = WT_CALL_INIT;
	int status;

	assert_int_equal(weft_msvc_request(f->client, peer(f, i),
	                                   WEFTD_VERB_ECHO, text, strlen(text),
	                                   NULL, wt_call_done, &c),
	                 0);
	status = wt_call_wait(&c, WAIT_MS);
	if (status == 0)
		assert_int_equal(c.len, strlen(text));
	return status;
}

/* ---- Tests ----------------------------------------------------------------
 */

static void
test_every_node_and_every_pair_answers(void **state)
{
	struct fixture *f = *state;
	struct wt_call c;
	char key[32];
	int i;

	for (i = 0; i < NODES; i++) {
		struct wt_call ping = WT_CALL_INIT;

		assert_int_equal(echo(f, i, "hello"), 0);
		assert_int_equal(weft_msvc_request(f->client, peer(f, i),
		                                   WEFTD_VERB_PING, NULL, 0,
		                                   NULL, wt_call_done, &ping),
		                 0);
		assert_int_equal(wt_call_wait(&ping, WAIT_MS), 0);
		assert_int_equal(ping.len, 0);
	}
	/* A put with write_quorum = all through each node is a request and
	 * a response between that node and each of the others: every
	 * ordered pair. */
	for (i = 0; i < NODES; i++) {
		c = (struct wt_call)WT_CALL_INIT;
		snprintf(key, sizeof(key), "pair-%d", i);
		assert_int_equal(weft_kv_client_put(f->client, peer(f, i), key,
		                                    strlen(key), "x", 1, NULL,
		                                    wt_call_done, &c),
		                 0);
		assert_int_equal(wt_call_wait(&c, WAIT_MS), 0);
	}
}

/* Runs weft-kv with args; returns its exit code, its first output line in
 * out. */
static int
run_kv(struct fixture *f, const char *node, const char *cmd, const char *key,
       const char *value, char *out, size_t cap)
{
	char *argv[] = {WEFT_KV_PATH, "--config",     f->config, "--node",
	                (char *)node, "--timeout-ms", "3000",    (char *)cmd,
	                (char *)key,  (char *)value,  NULL};

	return wt_run_line(argv, out, cap, WAIT_MS);
}

static void
test_weft_kv_across_nodes(void **state)
{
	struct fixture *f = *state;
	char out[256];
	int i;

	assert_int_equal(
	    run_kv(f, "n1", "put", "city", "Lisbon", out, sizeof(out)), 0);
	for (i = 0; i < NODES; i++) {
		assert_int_equal(
		    run_kv(f, ids[i], "get", "city", NULL, out, sizeof(out)),
		    0);
		assert_string_equal(out, "Lisbon");
	}
	assert_int_equal(
	    run_kv(f, "n3", "delete", "city", NULL, out, sizeof(out)), 0);
	assert_int_equal(run_kv(f, "n2", "get", "city", NULL, out, sizeof(out)),
	                 1);
	/* A scan prints the live keys from its start on, in order. */
	assert_int_equal(
	    run_kv(f, "n1", "put", "town-b", "Braga", out, sizeof(out)), 0);
	assert_int_equal(
	    run_kv(f, "n2", "put", "town-a", "Aveiro", out, sizeof(out)), 0);
	assert_int_equal(run_kv(f, "n3", "scan", "town", "5", out, sizeof(out)),
	                 0);
	assert_string_equal(out, "town-a\tAveiro");
	assert_int_equal(run_kv(f, "n3", "scan", "town", "0", out, sizeof(out)),
	                 2);
	/* A usage error exits with 2, a node the configuration does not
	 * list with 78 (a configuration error). */
	assert_int_equal(
	    run_kv(f, "n1", "fetch", "city", NULL, out, sizeof(out)), 2);
	assert_int_equal(run_kv(f, "n9", "get", "city", NULL, out, sizeof(out)),
	                 78);
}

/* Reads key through node until it reads want, or WAIT_MS passes; returns
 * whether it did. put_key, if not NULL, is put through n1 before each
 * read (a write n1 coordinates sends its waiting aborts on). */
static bool
kv_reads(struct fixture *f, const char *node, const char *key, const char *want,
         const char *put_key)
{
	uint64_t start = weft_now_ns();
	char out[256];

	for (;;) {
		if (put_key != NULL)
			run_kv(f, "n1", "put", put_key, "x", out, sizeof(out));
		if (run_kv(f, node, "get", key, NULL, out, sizeof(out)) == 0 &&
		    strcmp(out, want) == 0)
			return true;
		if (wt_ms_since(start) > WAIT_MS)
			return false;
		wt_pause_ms(20);
	}
}

/*
 * A write that failed is read through no node (RELIABILITY.md, "Failed
 * writes in the key-value service"). The cluster needs all three replicas
 * and n3 is stopped (SIGSTOP): a put through n1 fails; n1 never applied
 * it, n2 applied it and takes it back on n1's abort, and n3, continued,
 * ends with the acknowledged value too.
 */
static void
test_a_failed_write_is_not_read_through_any_node(void **state)
{
	struct fixture *f = *state;
	char out[256];

	assert_int_equal(
	    run_kv(f, "n1", "put", "door", "acked", out, sizeof(out)), 0);
	assert_int_equal(kill(f->p[2].pid, SIGSTOP), 0);
	assert_int_equal(
	    run_kv(f, "n1", "put", "door", "failed", out, sizeof(out)), 1);
	assert_int_equal(run_kv(f, "n1", "get", "door", NULL, out, sizeof(out)),
	                 0);
	assert_string_equal(out, "acked");
	assert_true(kv_reads(f, "n2", "door", "acked", NULL));
	assert_int_equal(kill(f->p[2].pid, SIGCONT), 0);
	wait_up(f, 2);
	assert_true(kv_reads(f, "n3", "door", "acked", "other"));
	assert_true(kv_reads(f, "n2", "door", "acked", NULL));
}

static void
test_sigusr1_dumps_metrics_to_stderr(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(kill(f->p[0].pid, SIGUSR1), 0);
	assert_true(
	    wt_file_contains(f->p[0].err_path, "weft_kv_gets_total", WAIT_MS));
	assert_true(wt_file_contains(f->p[0].err_path, "weft_msvc_", WAIT_MS));
	assert_true(wt_file_contains(f->p[0].err_path, "weftd_uptime_seconds",
	                             WAIT_MS));
	/* And the node still serves. */
	assert_int_equal(echo(f, 0, "still here"), 0);
}

static size_t
http_ask(struct fixture *f, int i, const char *method, const char *path,
         char *buf, size_t cap)
{
	return wt_http_ask(f->p[i].metrics_port, method, path, buf, cap);
}

static size_t
http_get(struct fixture *f, int i, const char *path, char *buf, size_t cap)
{
	return http_ask(f, i, "GET", path, buf, cap);
}

/* HEAD gets the headers a GET would, and not one byte of body. */
static void
test_head_metrics_sends_no_body(void **state)
{
	struct fixture *f = *state;
	static char buf[1 << 20];
	const char *end, *length;

	assert_true(http_ask(f, 1, "HEAD", "/metrics", buf, sizeof(buf)) > 0);
	assert_non_null(strstr(buf, " 200 OK\r\n"));
	assert_non_null(strstr(buf, "text/plain; version=0.0.4"));
	assert_non_null(length = strstr(buf, "Content-Length: "));
	assert_true(atoi(length + 16) > 1000);
	assert_non_null(end = strstr(buf, "\r\n\r\n"));
	assert_int_equal(strlen(end), 4);
}

static void
test_metrics_endpoint_serves_prometheus_text(void **state)
{
	struct fixture *f = *state;
	static char buf[1 << 20];

	assert_true(http_get(f, 1, "/metrics", buf, sizeof(buf)) > 0);
	assert_true(strncmp(buf, "HTTP/1.", 7) == 0);
	assert_non_null(strstr(buf, " 200 OK\r\n"));
	assert_non_null(strstr(buf, "text/plain; version=0.0.4"));
	assert_non_null(strstr(buf, "# TYPE weft_kv_gets_total counter"));
	assert_non_null(strstr(buf, "weft_msvc_"));
	assert_true(http_get(f, 1, "/nope", buf, sizeof(buf)) > 0);
	assert_non_null(strstr(buf, " 404 Not Found\r\n"));
}

/* ---- Load: closed loops of requests, each tracked to its one end --------- */

#define LOAD_DEPTH 16 /* requests kept outstanding per node */
#define LOAD_SLOTS (LOAD_DEPTH * NODES)
#define LOAD_MAX 20000000 /* a bound on the count; the waits bound time */

struct load;

/*
 * One place in a closed loop: its requests go to one node, one at a time,
 * each reissued from the previous one's callback. The payload is (slot,
 * seq), which the echo sends back.
 */
struct slot {
	struct load *l;
	uint32_t index;
	uint32_t seq;
	int node;
	_Atomic bool in_flight;
};

struct load {
	struct fixture *f;
	struct slot slots[LOAD_SLOTS];
	_Atomic long issued;
	_Atomic long completed;
	_Atomic long twice; /* completions of a request not in flight */
	_Atomic int outstanding;
	_Atomic int ok[NODES];
	_Atomic int failed[NODES];
	_Atomic int ok_since_mark[NODES];
	_Atomic bool stopping;
	_Atomic int bad_status; /* an error no fault explains */
};

static bool
is_fault_status(int status)
{
	return status == WEFT_EPEERDOWN || status == WEFT_ETIMEDOUT ||
	       status == WEFT_EEXPIRED || status == WEFT_ESHUTDOWN ||
	       status == WEFT_EOVERLOAD || status == WEFT_ECONNREFUSED;
}

static void issue(struct slot *s);

/* Accounts for the end of the slot's request; reissue keeps the loop
 * going. */
static void
finish_one(struct slot *s, int status, bool reissue)
{
	struct load *l = s->l;

	if (!atomic_exchange(&s->in_flight, false))
		atomic_fetch_add(&l->twice, 1);
	if (status == 0) {
		atomic_fetch_add(&l->ok[s->node], 1);
		atomic_fetch_add(&l->ok_since_mark[s->node], 1);
	} else {
		atomic_fetch_add(&l->failed[s->node], 1);
		if (!is_fault_status(status))
			atomic_store(&l->bad_status, status);
	}
	atomic_fetch_add(&l->completed, 1);
	if (reissue)
		issue(s);
	atomic_fetch_sub(&l->outstanding, 1);
}

static void
on_load_reply(weft_msvc *svc, int status, const void *data, size_t len,
              void *arg)
{
	struct slot *s = arg;
	uint32_t want[2] = {s->index, s->seq};

	(void)svc;
	if (status == 0 &&
	    (len != sizeof(want) || memcmp(data, want, len) != 0))
		atomic_store(&s->l->bad_status, WEFT_EPROTO); /* mismatched */
	finish_one(s, status, true);
}

/* Issues the slot's next request unless the load is over. */
static void
issue(struct slot *s)
{
	struct load *l = s->l;
	uint32_t payload[2];
	int rv;

	if (atomic_load(&l->stopping) || atomic_load(&l->issued) >= LOAD_MAX)
		return;
	atomic_fetch_add(&l->issued, 1);
	payload[0] = s->index;
	payload[1] = ++s->seq;
	atomic_store(&s->in_flight, true);
	atomic_fetch_add(&l->outstanding, 1);
	rv = weft_msvc_request(l->f->client, peer(l->f, s->node),
	                       WEFTD_VERB_ECHO, payload, sizeof(payload), NULL,
	                       on_load_reply, s);
	if (rv != 0) /* refused at once: it ends here, exactly once */
		finish_one(s, rv, false);
}

static struct load *
load_start(struct fixture *f)
{
	struct load *l = calloc(1, sizeof(*l));
	uint32_t i;

	assert_non_null(l);
	l->f = f;
	for (i = 0; i < LOAD_SLOTS; i++)
		l->slots[i] = (struct slot){l, i, 0, (int)(i % NODES), false};
	for (i = 0; i < LOAD_SLOTS; i++)
		issue(&l->slots[i]);
	return l;
}

/* Waits until cond(l, arg) holds; returns whether it did in time. */
static bool
load_wait(struct load *l, bool (*cond)(struct load *, int), int arg,
          uint64_t timeout_ms)
{
	uint64_t start = weft_now_ns();

	while (!cond(l, arg)) {
		if (wt_ms_since(start) >= timeout_ms)
			return false;
		wt_pause_ms(2);
	}
	return true;
}

static bool
completed_at_least(struct load *l, int n)
{
	return atomic_load(&l->completed) >= n;
}

static bool
node_ok_since_mark(struct load *l, int node)
{
	return atomic_load(&l->ok_since_mark[node]) >= 100;
}

static bool
none_outstanding(struct load *l, int unused)
{
	(void)unused;
	return atomic_load(&l->outstanding) == 0;
}

/* Stops the load and checks that every request ended exactly once. */
static void
load_finish(struct load *l)
{
	long issued;
	int i;

	atomic_store(&l->stopping, true);
	assert_true(load_wait(l, none_outstanding, 0, WAIT_MS));
	issued = atomic_load(&l->issued);
	assert_true(atomic_load(&l->completed) == issued);
	assert_int_equal(atomic_load(&l->twice), 0);
	for (i = 0; i < LOAD_SLOTS; i++)
		assert_false(atomic_load(&l->slots[i].in_flight));
	assert_int_equal(atomic_load(&l->bad_status), 0);
	free(l);
}

static void
test_sigkill_and_restart_under_load(void **state)
{
	struct fixture *f = *state;
	struct load *l = load_start(f);

	assert_true(load_wait(l, completed_at_least, 2000, WAIT_MS));
	/* n2 dies with requests in flight... */
	assert_int_equal(kill(f->p[1].pid, SIGKILL), 0);
	assert_int_not_equal(wt_wait_exit(f->p[1].pid, WT_EXIT_MS), -1);
	close(f->p[1].out_fd);
	f->p[1].pid = 0;
	/* ...the others keep serving while it is away... */
	atomic_store(&l->ok_since_mark[0], 0);
	assert_true(load_wait(l, node_ok_since_mark, 0, WAIT_MS));
	/* ...and once it is back, traffic to it resumes by itself. */
	node_start(f, 1);
	atomic_store(&l->ok_since_mark[1], 0);
	assert_true(load_wait(l, node_ok_since_mark, 1, WAIT_MS));
	load_finish(l);
}

static void
test_sigterm_drains_and_exits_zero_under_traffic(void **state)
{
	struct fixture *f = *state;
	struct load *l = load_start(f);
	uint64_t start;
	int status;

	assert_true(load_wait(l, completed_at_least, 2000, WAIT_MS));
	start = weft_now_ns();
	status = wt_node_signal_exit(&f->p[2], SIGTERM);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* Within the drain timeout (2 s), with room for a sanitizer's exit
	 * checks on a busy machine (it is usually done in tens of ms). */
	assert_true(wt_ms_since(start) < 7000);
	atomic_store(&l->ok_since_mark[0], 0);
	assert_true(load_wait(l, node_ok_since_mark, 0, WAIT_MS));
	load_finish(l);
	node_start(f, 2);
	/* Known down until the client's next dial reaches it. */
	wait_up(f, 2);
	assert_int_equal(echo(f, 2, "back"), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_node_and_every_pair_answers),
	    cmocka_unit_test(test_weft_kv_across_nodes),
	    cmocka_unit_test(test_a_failed_write_is_not_read_through_any_node),
	    cmocka_unit_test(test_sigusr1_dumps_metrics_to_stderr),
	    cmocka_unit_test(test_metrics_endpoint_serves_prometheus_text),
	    cmocka_unit_test(test_head_metrics_sends_no_body),
	    cmocka_unit_test(test_sigkill_and_restart_under_load),
	    cmocka_unit_test(test_sigterm_drains_and_exits_zero_under_traffic),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, setup, teardown);
}
