/* SPDX-License-Identifier: MIT */
/*
 * test_weftd_health.c: what weftd tells an orchestrator, on three weftd
 * processes with no traffic: weft_msvc_peer_up for idle members, /livez
 * and /readyz (the write quorum's members, bad requests on raw sockets),
 * and the service manager's notifications on a unix datagram socket.
 */
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "support/weftd_proc.h"

#define NODES 3
#define WAIT_MS 10000
/* Idle members are up within a few heartbeats (200 ms) of the last
 * start, and a killed one down as soon as its connections close; the
 * rest is room for a loaded machine. */
#define STATE_MS 3000

static const char *const ids[NODES] = {"n1", "n2", "n3"};

struct fixture {
	char dir[64];
	char config[128];
	uint16_t ports[NODES];
	struct wt_proc p[NODES];
};

/* slow: redial as a node down for long does, after seconds (the default
 * reconnect_min and reconnect_max are 50 ms and 5 s); quorum: [kv]
 * write_quorum. */
static void
write_config(struct fixture *f, bool slow, const char *quorum)
{
	static const char fast[] =
	    "reconnect_min = 10ms\nreconnect_max = 200ms\n";
	char text[2048], *at;
	int n;

	n = wt_config_begin(text, sizeof(text), "weftd-health", ids, f->ports,
	                    NODES);
	if (slow) {
		assert_non_null(at = strstr(text, fast));
		n = (int)(at - text);
		n += snprintf(at, sizeof(text) - (size_t)n,
		              "reconnect_min = 1s\nreconnect_max = 5s\n");
	}
	snprintf(text + n, sizeof(text) - (size_t)n,
	         "[weftd]\nmetrics_listen = 127.0.0.1:0\n"
	         "shutdown_timeout = 1s\n"
	         "[kv]\nwrite_quorum = %s\n",
	         quorum);
	wt_write_file(f->config, text);
}

/* Node i has exited and been waited for. */
static void
gone(struct fixture *f, int i)
{
	close(f->p[i].out_fd);
	f->p[i].pid = 0;
}

static void
node_start(struct fixture *f, int i)
{
	wt_node_start(&f->p[i], f->config, f->dir, ids[i], f->ports[i], NULL);
}

/* Writes the configuration and starts the first started nodes. */
static struct fixture *
cluster_start(bool slow, int started, const char *quorum)
{
	struct fixture *f = calloc(1, sizeof(*f));
	int i;

	assert_non_null(f);
	wt_scratch_new("weftd-health", f->dir, sizeof(f->dir), f->config,
	               sizeof(f->config), f->ports, NODES);
	write_config(f, slow, quorum);
	for (i = 0; i < started; i++)
		node_start(f, i);
	return f;
}

static int
setup(void **state)
{
	*state = cluster_start(false, NODES, "all");
	return 0;
}

/* n1 and n2 only, redialing slowly. */
static int
setup_late(void **state)
{
	*state = cluster_start(true, 2, "all");
	return 0;
}

/* n1 only, writing to one replica: its quorum is met alone. */
static int
setup_alone(void **state)
{
	*state = cluster_start(false, 1, "1");
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;
	int bad = wt_scratch_remove(f->p, NODES, f->config, f->dir);

	free(f);
	assert_int_equal(bad, 0);
	return 0;
}

/* Asks node i for path until the answer holds needle, at most
 * timeout_ms; returns whether it did. buf keeps the last answer. */
static bool
answer_holds(struct fixture *f, int i, const char *path, const char *needle,
             char *buf, size_t cap, uint64_t timeout_ms)
{
	uint64_t start = weft_now_ns();

	do {
		wt_http_ask(f->p[i].metrics_port, "GET", path, buf, cap);
		if (strstr(buf, needle) != NULL)
			return true;
		wt_pause_ms(50);
	} while (wt_ms_since(start) < timeout_ms);
	return false;
}

static void
peer_up_line(char *buf, size_t cap, int node, int peer, int value)
{
	snprintf(buf, cap, "weft_msvc_peer_up{node=\"%s\",peer=\"%s\"} %d\n",
	         ids[node], ids[peer], value);
}

/* ---- peer_up -------------------------------------------------------- */

/* No node has sent a message: every member is still dialed at start and
 * watched by heartbeats, so every node reports every other up, and a
 * killed one down. */
static void
test_idle_members_are_up_and_a_dead_one_down(void **state)
{
	struct fixture *f = *state;
	static char buf[1 << 20];
	char line[128];
	int i, j;

	for (i = 0; i < NODES; i++) {
		for (j = 0; j < NODES; j++) {
			if (i == j)
				continue;
			peer_up_line(line, sizeof(line), i, j, 1);
			assert_true(answer_holds(f, i, "/metrics", line, buf,
			                         sizeof(buf), STATE_MS));
		}
	}
	assert_int_equal(kill(f->p[2].pid, SIGKILL), 0);
	assert_true(wt_wait_exit(f->p[2].pid, WAIT_MS) != -1);
	gone(f, 2);
	for (i = 0; i < 2; i++) {
		peer_up_line(line, sizeof(line), i, 2, 0);
		assert_true(answer_holds(f, i, "/metrics", line, buf,
		                         sizeof(buf), STATE_MS));
	}
}

/* n3 starts after n1 and n2 have found it unreachable and backed off:
 * once its ready line is out, a write that needs every member succeeds
 * through each of them, at once. The node started last has dialed them
 * before its ready line, and a member known down that dials a node is
 * no longer known down there. */
static void
test_a_node_started_last_is_written_to_at_once(void **state)
{
	struct fixture *f = *state;
	static char buf[1 << 20];
	char line[128], out[256];
	char *argv[] = {
	    WEFT_KV_PATH, "--config", f->config, "--node", NULL, "--timeout-ms",
	    "3000",       "put",      "late",    "1",      NULL};
	int i;

	peer_up_line(line, sizeof(line), 0, 2, 0);
	assert_true(
	    answer_holds(f, 0, "/metrics", line, buf, sizeof(buf), STATE_MS));
	/* Long enough for a few failed dials: the back-off has grown. */
	wt_pause_ms(1500);
	node_start(f, 2);
	for (i = 0; i < NODES; i++) {
		argv[4] = (char *)ids[i];
		assert_int_equal(wt_run_line(argv, out, sizeof(out), WAIT_MS),
		                 0);
	}
}

/* ---- [weftd] listen ---------------------------------------------------- */

/* n1 advertises a name that does not resolve (a pod's DNS record before it
 * exists) and binds 127.0.0.1 by [weftd n1] listen. It starts without
 * resolving its name, and serves: the others reach it by their own file's
 * address for it, 127.0.0.1, as they would once the record exists. */
static void
test_listen_apart_from_the_advertised_host(void **state)
{
	struct fixture *f = *state;
	static char buf[1 << 20];
	static const char local[] = "[node n1]\nhost = 127.0.0.1\n";
	char own[160], text[2048], rest[2048], *at, line[128], out[256];
	char *argv[] = {
	    WEFT_KV_PATH, "--config", f->config, "--node", "n1", "--timeout-ms",
	    "3000",       "put",      "listen",  "1",      NULL};
	int i;

	assert_int_equal(wt_node_signal_exit(&f->p[0], SIGTERM), 0);
	gone(f, 0);
	/* n1's file: its host a name, its listen address the others' idea
	 * of it. */
	wt_config_begin(text, sizeof(text), "weftd-health", ids, f->ports,
	                NODES);
	assert_non_null(at = strstr(text, local));
	snprintf(rest, sizeof(rest), "%s", at + strlen(local));
	snprintf(at, sizeof(text) - (size_t)(at - text),
	         "[node n1]\nhost = n1.weft.invalid\n%s"
	         "[weftd]\nmetrics_listen = 127.0.0.1:0\n"
	         "[weftd n1]\nlisten = 127.0.0.1:%u\n"
	         "[kv]\nwrite_quorum = all\n",
	         rest, f->ports[0]);
	snprintf(own, sizeof(own), "%s/n1.ini", f->dir);
	wt_write_file(own, text);
	wt_node_start(&f->p[0], own, f->dir, "n1", f->ports[0], NULL);
	/* Every member up on every node, and a write through n1 that needs
	 * them all. */
	for (i = 1; i < NODES; i++) {
		peer_up_line(line, sizeof(line), 0, i, 1);
		assert_true(answer_holds(f, 0, "/metrics", line, buf,
		                         sizeof(buf), STATE_MS));
		peer_up_line(line, sizeof(line), i, 0, 1);
		assert_true(answer_holds(f, i, "/metrics", line, buf,
		                         sizeof(buf), STATE_MS));
	}
	assert_int_equal(wt_run_line(argv, out, sizeof(out), WAIT_MS), 0);
	unlink(own);
}

/* ---- /readyz and /livez --------------------------------------------- */

/* Ready: listening, and the members up (this one included) reach the
 * write quorum, here all three. */
static void
test_readyz_follows_the_write_quorum(void **state)
{
	struct fixture *f = *state;
	static char buf[8192];

	assert_true(answer_holds(f, 0, "/readyz", " 200 OK\r\n", buf,
	                         sizeof(buf), STATE_MS));
	assert_non_null(strstr(buf, "\r\n\r\nok\n"));
	assert_true(answer_holds(f, 0, "/readyz?verbose", "[+]quorum ok", buf,
	                         sizeof(buf), STATE_MS));
	assert_non_null(strstr(buf, "[+]listening ok\n"));
	assert_non_null(strstr(buf, "3 of 3 members up, 3 needed"));

	assert_int_equal(wt_node_signal_exit(&f->p[2], SIGTERM), 0);
	gone(f, 2);
	assert_true(answer_holds(f, 0, "/readyz",
	                         " 503 Service Unavailable\r\n", buf,
	                         sizeof(buf), STATE_MS));
	assert_non_null(strstr(buf, "not ready: 2 of 3 members up, 3 needed "
	                            "for the write quorum (down: n3)\n"));
	wt_http_ask(f->p[1].metrics_port, "GET", "/readyz?x=1&verbose", buf,
	            sizeof(buf));
	assert_non_null(strstr(buf, " 503 "));
	assert_non_null(strstr(buf, "[+]listening ok\n"));
	assert_non_null(strstr(buf, "[-]quorum failed: 2 of 3"));
	/* The dead node is no reason to restart the live ones. */
	wt_http_ask(f->p[0].metrics_port, "GET", "/livez", buf, sizeof(buf));
	assert_non_null(strstr(buf, " 200 OK\r\n"));

	node_start(f, 2);
	assert_true(answer_holds(f, 0, "/readyz", " 200 OK\r\n", buf,
	                         sizeof(buf), STATE_MS));
	assert_true(answer_holds(f, 2, "/readyz", " 200 OK\r\n", buf,
	                         sizeof(buf), STATE_MS));
}

/* With a write quorum of one, a write may have reached only one replica:
 * a node started alone meets its quorum but cannot know what was written
 * until it has copied the other two, and is not ready until then. */
static void
test_readyz_waits_for_the_replica_to_catch_up(void **state)
{
	struct fixture *f = *state;
	static char buf[8192];

	assert_true(answer_holds(f, 0, "/readyz?verbose", "[+]quorum ok", buf,
	                         sizeof(buf), STATE_MS));
	assert_non_null(strstr(buf, " 503 Service Unavailable\r\n"));
	assert_non_null(strstr(buf, "[-]replica failed: the key-value "
	                            "replica is catching up"));
	assert_non_null(strstr(buf, "not ready: the key-value replica"));
	node_start(f, 1);
	wt_pause_ms(500);
	wt_http_ask(f->p[0].metrics_port, "GET", "/readyz", buf, sizeof(buf));
	assert_non_null(strstr(buf, " 503 "));
	node_start(f, 2);
	assert_true(answer_holds(f, 0, "/readyz", " 200 OK\r\n", buf,
	                         sizeof(buf), STATE_MS));
	assert_true(answer_holds(f, 1, "/readyz?verbose", "[+]replica ok", buf,
	                         sizeof(buf), STATE_MS));
	assert_true(answer_holds(f, 2, "/readyz", " 200 OK\r\n", buf,
	                         sizeof(buf), STATE_MS));
}

static void
test_livez_and_the_other_paths(void **state)
{
	struct fixture *f = *state;
	uint16_t port = f->p[1].metrics_port;
	static char buf[8192];
	const char *end;

	wt_http_ask(port, "GET", "/livez", buf, sizeof(buf));
	assert_non_null(strstr(buf, " 200 OK\r\n"));
	assert_non_null(strstr(buf, "Content-Type: text/plain; charset=utf-8"));
	assert_non_null(strstr(buf, "\r\n\r\nok\n"));
	wt_http_ask(port, "GET", "/livez?verbose", buf, sizeof(buf));
	assert_non_null(strstr(buf, "[+]loops ok\n"));
	/* HEAD: the headers only. */
	wt_http_ask(port, "HEAD", "/readyz", buf, sizeof(buf));
	assert_non_null(strstr(buf, "Content-Length: "));
	assert_non_null(end = strstr(buf, "\r\n\r\n"));
	assert_int_equal(strlen(end), 4);
	/* Other methods: 405 naming the allowed ones. */
	wt_http_ask(port, "POST", "/readyz", buf, sizeof(buf));
	assert_non_null(strstr(buf, " 405 Method Not Allowed\r\n"));
	assert_non_null(strstr(buf, "Allow: GET, HEAD\r\n"));
	/* Everything else is not found, near names included. */
	wt_http_ask(port, "GET", "/healthz", buf, sizeof(buf));
	assert_non_null(strstr(buf, " 404 Not Found\r\n"));
	wt_http_ask(port, "GET", "/readyz/", buf, sizeof(buf));
	assert_non_null(strstr(buf, " 404 Not Found\r\n"));
}

static bool
is_live(struct fixture *f, int i)
{
	char buf[4096];

	wt_http_ask(f->p[i].metrics_port, "GET", "/livez", buf, sizeof(buf));
	return strstr(buf, " 200 OK\r\n") != NULL && kill(f->p[i].pid, 0) == 0;
}

/* Requests cut short, too large, or never finished: each costs only its
 * own connection; the node answers the next one at once. */
static void
test_bad_requests_leave_the_endpoint_serving(void **state)
{
	struct fixture *f = *state;
	uint16_t port = f->p[0].metrics_port;
	static char huge[256 * 1024], buf[8192];
	static const char cut[] = "GET /readyz HT";
	static const char slow[] = "GET /readyz HTTP/1.1\r\nHost: x\r\nX-A: ";
	uint64_t start;
	int fd;

	/* Truncated, then closed: no answer is owed, the node lives. */
	wt_http_send(port, cut, strlen(cut), true, buf, sizeof(buf), WAIT_MS);
	assert_true(is_live(f, 0));
	/* A request line of 256 KiB: refused, not read to the end. */
	memset(huge, 'a', sizeof(huge));
	memcpy(huge, "GET /", 5);
	memcpy(huge + sizeof(huge) - 14, " HTTP/1.0\r\n\r\n", 13);
	wt_http_send(port, huge, sizeof(huge) - 1, false, buf, sizeof(buf),
	             WAIT_MS);
	assert_null(strstr(buf, " 200 OK"));
	assert_true(is_live(f, 0));
	/* Headers that never end, held open: others are answered meanwhile,
	 * each at once. */
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	{
		struct sockaddr_in sa = {.sin_family = AF_INET,
		                         .sin_port = htons(port)};

		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		assert_int_equal(
		    connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	}
	assert_int_equal(write(fd, slow, strlen(slow)), (ssize_t)strlen(slow));
	start = weft_now_ns();
	assert_true(is_live(f, 0));
	wt_http_ask(port, "GET", "/metrics", buf, sizeof(buf));
	assert_non_null(strstr(buf, " 200 OK\r\n"));
	assert_true(wt_ms_since(start) < 2000);
	close(fd);
	assert_true(is_live(f, 0));
}

/* ---- The service manager's notifications ---------------------------- */

/* Reads datagrams from fd until one holds needle, at most timeout_ms. */
static bool
notified(int fd, const char *needle, uint64_t timeout_ms)
{
	struct pollfd pfd = {.fd = fd, .events = POLLIN};
	uint64_t start = weft_now_ns();
	char msg[1024];
	ssize_t n;

	while (wt_ms_since(start) < timeout_ms) {
		if (poll(&pfd, 1, (int)(timeout_ms - wt_ms_since(start))) <= 0)
			return false;
		if ((n = recv(fd, msg, sizeof(msg) - 1, 0)) < 0)
			return false;
		msg[n] = '\0';
		if (strstr(msg, needle) != NULL)
			return true;
	}
	return false;
}

/* Binds a datagram socket at name (a path, or "@name": the abstract
 * namespace) and returns it. */
static int
notify_socket(const char *name)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t len = strlen(name);
	int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0 && len < sizeof(sa.sun_path));
	memcpy(sa.sun_path, name, len);
	if (name[0] == '@')
		sa.sun_path[0] = '\0';
	assert_int_equal(
	    bind(fd, (struct sockaddr *)&sa,
	         (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len)),
	    0);
	return fd;
}

/* A node started with NOTIFY_SOCKET (as systemd starts a Type=notify
 * unit) says READY=1 once it serves and STOPPING=1 when SIGTERM starts
 * its drain; status lines follow the members. */
static void
check_notify(struct fixture *f, const char *name)
{
	int fd = notify_socket(name);

	assert_int_equal(wt_node_signal_exit(&f->p[0], SIGTERM), 0);
	gone(f, 0);
	assert_int_equal(setenv("NOTIFY_SOCKET", name, 1), 0);
	node_start(f, 0);
	unsetenv("NOTIFY_SOCKET");
	assert_true(notified(fd, "READY=1\n", WAIT_MS));
	assert_true(notified(fd, "STATUS=ok", STATE_MS));
	assert_int_equal(kill(f->p[0].pid, SIGTERM), 0);
	assert_true(notified(fd, "STOPPING=1\n", WAIT_MS));
	assert_int_equal(wt_wait_exit(f->p[0].pid, WAIT_MS), 0);
	gone(f, 0);
	close(fd);
}

static void
test_notify_ready_and_stopping(void **state)
{
	struct fixture *f = *state;
	char path[128];

	snprintf(path, sizeof(path), "%s/notify", f->dir);
	check_notify(f, path);
	unlink(path);
}

static void
test_notify_to_an_abstract_socket(void **state)
{
	struct fixture *f = *state;
	char name[64];

	snprintf(name, sizeof(name), "@weftd-health-%d", (int)getpid());
	check_notify(f, name);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(
	        test_idle_members_are_up_and_a_dead_one_down, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_a_node_started_last_is_written_to_at_once, setup_late,
	        teardown),
	    cmocka_unit_test_setup_teardown(
	        test_listen_apart_from_the_advertised_host, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_readyz_follows_the_write_quorum, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_readyz_waits_for_the_replica_to_catch_up, setup_alone,
	        teardown),
	    cmocka_unit_test_setup_teardown(test_livez_and_the_other_paths,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_bad_requests_leave_the_endpoint_serving, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_notify_ready_and_stopping,
	                                    setup, teardown),
	    cmocka_unit_test_setup_teardown(test_notify_to_an_abstract_socket,
	                                    setup, teardown),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
