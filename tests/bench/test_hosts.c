/* SPDX-License-Identifier: MIT */
/*
 * weft-bench cluster --hosts against weftd nodes started here: the cluster
 * workload run by the nodes themselves (weftd's load verb), its bad
 * requests, local clients' load (--clients), and the same across network
 * namespaces (--netns, skipped where not allowed). Every request must be
 * answered exactly once. No speed is asserted.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>
#include <msgpack.h>
#include <weft/loop.h>
#include <weft/messaging.h>

#include "bench_exec.h"
#include "support/ports.h"
#include "support/weftd_proc.h"

typedef struct node {
	pid_t pid;
	int out_fd; /* the read end of its standard output */
	unsigned port;
} node;

/* The weftd processes running, so that a failed test leaves none. */
static pid_t live[8];

static void
track(pid_t pid, bool on)
{
	for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++)
		if (on ? live[i] == 0 : live[i] == pid) {
			live[i] = on ? pid : 0;
			return;
		}
}

static int
kill_live(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(live) / sizeof(live[0]); i++)
		if (live[i] > 0) {
			kill(live[i], SIGKILL);
			waitpid(live[i], NULL, 0);
			live[i] = 0;
		}
	return 0;
}

/* start_weftd starts node id of config (its stderr the test's) and reads
 * the port from its ready line. */
static void
start_weftd(node *n, const char *config, const char *id)
{
	char *argv[] = {WEFTD_PATH, "--config", (char *)config,
	                "--id",     (char *)id, NULL};
	char line[256];

	n->pid = wt_spawn(argv, "/dev/stderr", &n->out_fd);
	track(n->pid, true);
	/* "weftd ready node=ID port=P metrics=..." */
	assert_true(wt_read_line(n->out_fd, line, sizeof(line), WT_READY_MS) >
	            0);
	assert_non_null(strstr(line, "port="));
	n->port = (unsigned)atoi(strstr(line, "port=") + 5);
	assert_true(n->port > 0);
}

static void
stop_weftd(node *n)
{
	kill(n->pid, SIGTERM);
	assert_true(wt_wait_exit(n->pid, WT_EXIT_MS) != -1);
	track(n->pid, false);
	close(n->out_fd);
}

/* Reads the CSV report at path into text (NUL-terminated), removes the
 * file, and returns its length. */
static size_t
take_csv(const char *path, char *text, size_t cap)
{
	FILE *f = fopen(path, "r");
	size_t n;

	assert_non_null(f);
	n = fread(text, 1, cap - 1, f);
	text[n] = '\0';
	fclose(f);
	unlink(path);
	return n;
}

/* --clients: local clients' load on two weftd nodes. */
static void
test_hosts_drives_weftd_nodes(void **state)
{
	char config[] = "/tmp/wbench-hosts-XXXXXX";
	char csv[] = "/tmp/wbench-csv-XXXXXX", hosts[128], text[1024];
	char *argv[] = {"cluster", "--hosts",   hosts,   "--cluster-name",
	                "wbtest",  "--clients", "2",     "--outstanding",
	                "8",       "--warmup",  "0.1",   "--duration",
	                "0.3",     "--quiet",   "--csv", csv,
	                NULL};
	node a, b;
	FILE *f;
	size_t n;
	int fd = mkstemp(config);

	(void)state;
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	fputs("[cluster]\nname = wbtest\n[node n0]\nhost = 127.0.0.1\n"
	      "port = 0\n[node x1]\nhost = 127.0.0.1\nport = 0\n"
	      "[weftd]\nlog_level = warn\n",
	      f);
	fclose(f);
	close(mkstemp(csv));
	start_weftd(&a, config, "n0");
	start_weftd(&b, config, "x1");
	snprintf(hosts, sizeof(hosts), "127.0.0.1:%u,x1@127.0.0.1:%u", a.port,
	         b.port);
	assert_int_equal(run_bench(argv), 0);
	stop_weftd(&a);
	stop_weftd(&b);
	unlink(config);
	n = take_csv(csv, text, sizeof(text));
	/* One row: 2 nodes, 2 clients x 8, no failed, lost or repeated
	 * request. */
	assert_non_null(strstr(text, "\ncluster,loop,0,64,2,2,8,,"));
	assert_int_equal(strcmp(text + n - 3, ",0\n"), 0);
}

/* A cluster of three weftd nodes on fixed loopback ports, and (if asked
 * for) a member c0 (the coordinator: weft-bench or the test) that they
 * list. */
typedef struct trio {
	char config[32];
	unsigned ports[3];
	unsigned coordinator_port;
	char coordinator[64]; /* c0@127.0.0.1:PORT */
	node nodes[3];
} trio;

static void
trio_start_as(trio *t, const char *weftd_section, bool coordinator)
{
	FILE *f;
	int fd;

	snprintf(t->config, sizeof(t->config), "/tmp/wbench-mesh-XXXXXX");
	fd = mkstemp(t->config);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	fputs("[cluster]\nname = wbmesh\n", f);
	for (unsigned i = 0; i < 3; i++) {
		t->ports[i] = weft_test_free_port();
		fprintf(f, "[node n%u]\nhost = 127.0.0.1\nport = %u\n", i,
		        t->ports[i]);
	}
	t->coordinator_port = weft_test_free_port();
	snprintf(t->coordinator, sizeof(t->coordinator), "c0@127.0.0.1:%u",
	         t->coordinator_port);
	if (coordinator)
		fprintf(f, "[node c0]\nhost = 127.0.0.1\nport = %u\n",
		        t->coordinator_port);
	fprintf(f, "[limits]\nloops = 1\n[weftd]\nlog_level = error\n%s",
	        weftd_section);
	fclose(f);
	for (unsigned i = 0; i < 3; i++) {
		char id[8];

		snprintf(id, sizeof(id), "n%u", i);
		start_weftd(&t->nodes[i], t->config, id);
	}
}

static void
trio_start(trio *t, const char *weftd_section)
{
	trio_start_as(t, weftd_section, true);
}

static void
trio_stop(trio *t)
{
	for (unsigned i = 0; i < 3; i++)
		if (t->nodes[i].pid > 0)
			stop_weftd(&t->nodes[i]);
	unlink(t->config);
}

/* The cluster workload on three weftd nodes: each node keeps K requests
 * in flight to the other two and answers theirs; the merged report holds
 * every node's figures, every request answered exactly once. */
static void
test_hosts_mesh_runs_on_the_nodes(void **state)
{
	char json[] = "/tmp/wbench-mesh-json-XXXXXX", hosts[128];
	char text[4096];
	char *args[] = {"cluster",
	                "--hosts",
	                hosts,
	                "--cluster-name",
	                "wbmesh",
	                "--outstanding",
	                "8",
	                "--warmup",
	                "0.1",
	                "--duration",
	                "0.3",
	                "--quiet",
	                "--json",
	                json,
	                "--coordinator",
	                NULL,
	                NULL};
	trio t;

	(void)state;
	close(mkstemp(json));
	trio_start(&t, "load = on\n");
	args[15] = t.coordinator;
	snprintf(hosts, sizeof(hosts), "127.0.0.1:%u,127.0.0.1:%u,127.0.0.1:%u",
	         t.ports[0], t.ports[1], t.ports[2]);
	assert_int_equal(run_bench(args), 0);
	/* Runs one after another on the same nodes are fine. */
	assert_int_equal(run_bench(args), 0);
	trio_stop(&t);
	read_json(json, text, sizeof(text));
	assert_non_null(strstr(text, "\"peers\": 3, \"clients\": null"));
	check_cluster_run(strstr(text, "\"io\": \"loop\""));
	assert_true(bench_json_value(text, "\"ops\": ") > 0);
	assert_true(bench_json_value(text, "\"errors\": ") == 0);
	/* Three weftd processes, each with a main thread, a loop and the
	 * load run's thread at least. */
	assert_true(bench_json_value(text, "\"threads\": ") >= 9);
}

/* SIGKILLs a trio's node a moment into a run. */
typedef struct killer {
	node *victim;
	pthread_t thread;
} killer;

static void *
kill_later(void *arg)
{
	killer *k = arg;
	struct timespec ts = {0, 800000000};

	nanosleep(&ts, NULL);
	kill(k->victim->pid, SIGKILL);
	waitpid(k->victim->pid, NULL, 0);
	track(k->victim->pid, false);
	close(k->victim->out_fd);
	k->victim->pid = 0;
	return NULL;
}

/* A node that dies during the run: the report keeps the others' figures
 * and counts the loss as errors, instead of failing the run. */
static void
test_hosts_mesh_keeps_measuring_when_a_node_dies(void **state)
{
	char json[] = "/tmp/wbench-mesh-json-XXXXXX", hosts[128];
	char text[4096];
	char *args[] = {"cluster",
	                "--hosts",
	                hosts,
	                "--cluster-name",
	                "wbmesh",
	                "--outstanding",
	                "8",
	                "--warmup",
	                "0.2",
	                "--duration",
	                "2",
	                "--quiet",
	                "--json",
	                json,
	                "--coordinator",
	                NULL,
	                NULL};
	killer k;
	trio t;

	(void)state;
	close(mkstemp(json));
	trio_start(&t, "load = on\n");
	args[15] = t.coordinator;
	snprintf(hosts, sizeof(hosts), "127.0.0.1:%u,127.0.0.1:%u,127.0.0.1:%u",
	         t.ports[0], t.ports[1], t.ports[2]);
	k.victim = &t.nodes[2];
	assert_int_equal(pthread_create(&k.thread, NULL, kill_later, &k), 0);
	assert_int_equal(run_bench(args), 0);
	pthread_join(k.thread, NULL);
	trio_stop(&t);
	read_json(json, text, sizeof(text));
	/* The survivors' figures are there (how many ops they made depends
	 * on how soon their requests to the dead node end) and the loss is
	 * counted. */
	assert_true(bench_json_value(text, "\"ops\": ") >= 0);
	assert_true(bench_json_value(text, "\"errors\": ") > 0);
}

/* Without [weftd] load = on, the nodes refuse: the run fails cleanly. */
static void
test_hosts_mesh_needs_the_load_verb(void **state)
{
	char hosts[128];
	char *args[] = {"cluster",
	                "--hosts",
	                hosts,
	                "--cluster-name",
	                "wbmesh",
	                "--warmup",
	                "0",
	                "--duration",
	                "0.1",
	                "--quiet",
	                "--coordinator",
	                NULL,
	                NULL};
	trio t;

	(void)state;
	trio_start(&t, "");
	args[11] = t.coordinator;
	snprintf(hosts, sizeof(hosts), "127.0.0.1:%u,127.0.0.1:%u,127.0.0.1:%u",
	         t.ports[0], t.ports[1], t.ports[2]);
	assert_int_equal(run_bench(args), 1);
	trio_stop(&t);
	/* Joining as a client (whose id the nodes list as a member, so its
	 * handshakes are refused): every start fails at once. */
	trio_start(&t, "load = on\n");
	args[10] = NULL;
	snprintf(hosts, sizeof(hosts), "127.0.0.1:%u,127.0.0.1:%u,127.0.0.1:%u",
	         t.ports[0], t.ports[1], t.ports[2]);
	assert_int_equal(run_bench(args), 1);
	trio_stop(&t);
}

typedef struct answer {
	int status;
	char text[160];
	bool done;
} answer;

static void
on_answer(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	answer *a = arg;

	(void)svc;
	a->status = status;
	snprintf(a->text, sizeof(a->text), "%.*s", (int)(len < 150 ? len : 150),
	         (const char *)data);
	__atomic_store_n(&a->done, true, __ATOMIC_RELEASE);
}

/* ask sends one load request and waits for its answer. */
static answer
ask(weft_msvc *svc, weft_msvc_peer *peer, const void *req, size_t len)
{
	answer a = {0};
	uint64_t deadline = weft_now_ns() + 10000000000ull;

	assert_int_equal(
	    weft_msvc_request(svc, peer, 18, req, len, NULL, on_answer, &a), 0);
	while (!__atomic_load_n(&a.done, __ATOMIC_ACQUIRE) &&
	       weft_now_ns() < deadline)
		usleep(1000);
	assert_true(a.done);
	return a;
}

/* pack_start_request packs {"op": "start", "duration_ms": D,
 * "outstanding": K, "rate": R}. */
static void
pack_start_request(msgpack_sbuffer *sb, uint64_t duration_ms,
                   uint64_t outstanding, double rate)
{
	msgpack_packer pk;

	msgpack_sbuffer_init(sb);
	msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
	msgpack_pack_map(&pk, 4);
	msgpack_pack_str_with_body(&pk, "op", 2);
	msgpack_pack_str_with_body(&pk, "start", 5);
	msgpack_pack_str_with_body(&pk, "duration_ms", 11);
	msgpack_pack_uint64(&pk, duration_ms);
	msgpack_pack_str_with_body(&pk, "outstanding", 11);
	msgpack_pack_uint64(&pk, outstanding);
	msgpack_pack_str_with_body(&pk, "rate", 4);
	msgpack_pack_double(&pk, rate);
}

/* pack_start asks peer to start such a run and waits for the answer. */
static void
pack_start(answer *a, weft_msvc *svc, weft_msvc_peer *peer,
           uint64_t duration_ms, uint64_t outstanding, double rate)
{
	msgpack_sbuffer sb;

	pack_start_request(&sb, duration_ms, outstanding, rate);
	*a = ask(svc, peer, sb.data, sb.size);
	msgpack_sbuffer_destroy(&sb);
}

/* The load verb faces the network: malformed, truncated and out-of-range
 * requests get an error answer, a second start while one runs is refused,
 * and the node keeps working. */
static void
test_load_verb_refuses_bad_requests(void **state)
{
	/* msgpack: {"op": "start", "duration_ms": 500, "outstanding": 2} */
	static const uint8_t good[] = {
	    0x83, 0xa2, 'o',  'p',  0xa5, 's',  't', 'a', 'r', 't',
	    0xab, 'd',  'u',  'r',  'a',  't',  'i', 'o', 'n', '_',
	    'm',  's',  0xcd, 0x01, 0xf4, 0xab, 'o', 'u', 't', 's',
	    't',  'a',  'n',  'd',  'i',  'n',  'g', 0x02};
	static const uint8_t no_op[] = {0x80};
	static const uint8_t bad_op[] = {0x81, 0xa2, 'o', 'p',
	                                 0xa3, 'r',  'u', 'n'};
	static const uint8_t op_not_str[] = {0x81, 0xa2, 'o', 'p', 0x07};
	/* {"op": "start"}: outstanding and duration missing (0) */
	static const uint8_t zero[] = {0x81, 0xa2, 'o', 'p', 0xa5,
	                               's',  't',  'a', 'r', 't'};
	/* {"op": "start", "outstanding": -1} */
	static const uint8_t negative[] = {
	    0x82, 0xa2, 'o', 'p', 0xa5, 's', 't', 'a', 'r', 't', 0xab, 'o',
	    'u',  't',  's', 't', 'a',  'n', 'd', 'i', 'n', 'g', 0xff};
	static const uint8_t array[] = {0x92, 0x01, 0x02};
	static const uint8_t huge_map[] = {0xdf, 0xff, 0xff, 0xff, 0xff};
	weft_msvc_config *cfg;
	weft_loop_group *group;
	weft_msvc *svc, *client;
	weft_msvc_peer *peer;
	answer a;
	trio t;

	(void)state;
	trio_start(&t, "load = on\nload_max_duration = 30s\n"
	               "load_max_rate = 1000\n");
	assert_int_equal(weft_msvc_config_new("wbmesh", &cfg), 0);
	for (unsigned i = 0; i < 3; i++) {
		char id[8];

		snprintf(id, sizeof(id), "n%u", i);
		assert_int_equal(
		    weft_msvc_config_add_node(cfg, id, "127.0.0.1",
		                              (uint16_t)t.ports[i]),
		    0);
	}
	assert_int_equal(
	    weft_msvc_config_add_node(cfg, "c0", "127.0.0.1",
	                              (uint16_t)t.coordinator_port),
	    0);
	assert_int_equal(weft_loop_group_new(1, &group), 0);
	assert_int_equal(weft_msvc_new(group, cfg, "c0", NULL, &svc), 0);
	assert_int_equal(weft_msvc_start(svc), 0);
	peer = weft_msvc_peer_find(svc, "n1");
	assert_non_null(peer);

	/* A client may not start a run, nor ask for its status. */
	assert_int_equal(weft_msvc_new(group, cfg, "stranger", NULL, &client),
	                 0);
	assert_int_equal(weft_msvc_start(client), 0);
	a = ask(client, weft_msvc_peer_find(client, "n1"), good, sizeof(good));
	assert_int_equal(a.status, WEFT_EPERM);
	weft_msvc_stop(client, 1000);
	weft_msvc_free(client);

	/* Runs are capped in length and rate. */
	pack_start(&a, svc, peer, 31000, 2, 0);
	assert_int_equal(a.status, WEFT_EINVAL);
	assert_non_null(strstr(a.text, "load_max_duration"));
	pack_start(&a, svc, peer, 500, 2, 5000);
	assert_int_equal(a.status, WEFT_EINVAL);
	assert_non_null(strstr(a.text, "load_max_rate"));

	assert_int_equal(ask(svc, peer, "", 0).status, WEFT_EINVAL);
	assert_int_equal(ask(svc, peer, good, 5).status, WEFT_EINVAL);
	assert_int_equal(ask(svc, peer, huge_map, sizeof(huge_map)).status,
	                 WEFT_EINVAL);
	assert_int_equal(ask(svc, peer, no_op, sizeof(no_op)).status,
	                 WEFT_EINVAL);
	a = ask(svc, peer, bad_op, sizeof(bad_op));
	assert_int_equal(a.status, WEFT_EINVAL);
	assert_non_null(strstr(a.text, "start or status"));
	assert_int_equal(ask(svc, peer, op_not_str, sizeof(op_not_str)).status,
	                 WEFT_EINVAL);
	a = ask(svc, peer, zero, sizeof(zero));
	assert_non_null(strstr(a.text, "outstanding"));
	assert_int_equal(ask(svc, peer, negative, sizeof(negative)).status,
	                 WEFT_EINVAL);
	assert_int_equal(ask(svc, peer, array, sizeof(array)).status,
	                 WEFT_EINVAL);

	/* A good run, and a second start while it runs: refused. */
	{
		answer first = {0};
		uint64_t deadline = weft_now_ns() + 20000000000ull;

		assert_int_equal(weft_msvc_request(svc, peer, 18, good,
		                                   sizeof(good), NULL,
		                                   on_answer, &first),
		                 0);
		usleep(100000);
		a = ask(svc, peer, good, sizeof(good));
		assert_non_null(strstr(a.text, "in progress"));
		while (!__atomic_load_n(&first.done, __ATOMIC_ACQUIRE) &&
		       weft_now_ns() < deadline)
			usleep(1000);
		assert_int_equal(first.status, 0);
	}

	/* A stop ends a long run at once; its start is answered. */
	{
		static const uint8_t stop[] = {0x81, 0xa2, 'o', 'p', 0xa4,
		                               's',  't',  'o', 'p'};
		answer first = {0};
		msgpack_sbuffer sb;
		uint64_t t0 = weft_now_ns(), deadline = t0 + 20000000000ull;

		pack_start_request(&sb, 25000, 2, 0);
		assert_int_equal(weft_msvc_request(svc, peer, 18, sb.data,
		                                   sb.size, NULL, on_answer,
		                                   &first),
		                 0);
		msgpack_sbuffer_destroy(&sb);
		usleep(200000);
		a = ask(svc, peer, stop, sizeof(stop));
		assert_int_equal(a.status, 0);
		while (!__atomic_load_n(&first.done, __ATOMIC_ACQUIRE) &&
		       weft_now_ns() < deadline)
			usleep(1000);
		assert_true(first.done);
		assert_int_equal(first.status, 0);
		/* Nowhere near the 25 s asked for. */
		assert_true(weft_now_ns() - t0 < 15000000000ull);
	}
	weft_msvc_stop(svc, 1000);
	weft_loop_group_shutdown(group, 1000);
	weft_msvc_free(svc);
	weft_loop_group_free(group);
	weft_msvc_config_free(cfg);
	trio_stop(&t);
}

/* check_netns_run runs three weftd nodes in network namespaces of their
 * own (over mutual TLS with the certificates in tls_dir, unless NULL) and
 * checks that every request was answered; false where namespaces cannot
 * be made (not root, or a container without CAP_SYS_ADMIN). */
static bool
check_netns_run(char *tls_dir)
{
	char json[] = "/tmp/wbench-netns-json-XXXXXX", text[4096];
	char *args[] = {"cluster",
	                "--netns",
	                "--weftd",
	                WEFTD_PATH,
	                "--peers",
	                "3",
	                "--outstanding",
	                "8",
	                "--warmup",
	                "0.1",
	                "--duration",
	                "0.3",
	                "--quiet",
	                "--json",
	                json,
	                NULL,
	                NULL,
	                NULL};
	int rv;

	if (tls_dir != NULL) {
		args[15] = "--tls";
		args[16] = tls_dir;
	}
	close(mkstemp(json));
	rv = run_bench(args);
	if (rv == 77) {
		unlink(json);
		return false;
	}
	assert_int_equal(rv, 0);
	read_json(json, text, sizeof(text));
	unlink(json);
	assert_non_null(strstr(text, "\"peers\": 3, \"clients\": null"));
	check_cluster_run(strstr(text, "\"io\": \"loop\""));
	assert_true(bench_json_value(text, "\"ops\": ") > 0);
	return true;
}

/* --netns: three weftd nodes in network namespaces of their own. Skipped
 * where namespaces cannot be made (not root, or a container without
 * CAP_SYS_ADMIN). */
static void
test_netns_cluster(void **state)
{
	(void)state;
	if (!check_netns_run(NULL))
		skip();
}

/*
 * The same over mutual TLS, with the certificates make run uses
 * (scripts/bench-certs.sh). weft-bench joins the cluster as the member c0
 * here, and the nodes dial it: a certificate for client use only fails
 * every node's handshake to c0, and the run ends in an error.
 */
static void
test_netns_cluster_over_tls(void **state)
{
	char dir[] = "/tmp/wbench-netns-tls-XXXXXX", cmd[1024];
	bool ran;

	(void)state;
	if (system("openssl version >/dev/null 2>&1") != 0)
		skip();
	assert_non_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd),
	         "sh %s/scripts/bench-certs.sh %s 3 >/dev/null 2>&1",
	         WEFT_SOURCE_DIR, dir);
	assert_int_equal(system(cmd), 0);
	ran = check_netns_run(dir);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
	if (!ran)
		skip();
}

/* mix --hosts: local clients load the keys into three weftd nodes'
 * key-value service and run gets and puts on it; every request answered
 * exactly once, none failed. One mix only, and no --peers. */
static void
test_hosts_mix_on_the_kv_of_weftd_nodes(void **state)
{
	char csv[] = "/tmp/wbench-mix-csv-XXXXXX", hosts[192], text[4096];
	char *argv[] = {"mix",    "--hosts",   hosts,   "--cluster-name",
	                "wbmesh", "--clients", "2",     "--outstanding",
	                "4",      "--mixes",   "50",    "--keys",
	                "300",    "--warmup",  "0.1",   "--duration",
	                "0.5",    "--quiet",   "--csv", csv,
	                NULL};
	char *two_mixes[] = {"mix", "--hosts", hosts, "--mixes", "90,50", NULL};
	char *with_peers[] = {"mix", "--hosts", hosts, "--mixes",
	                      "90",  "--peers", "3",   NULL};
	trio t;
	size_t n;

	(void)state;
	/* No member c0: weft-bench's clients are c0 and c1. */
	trio_start_as(&t, "", false);
	snprintf(hosts, sizeof(hosts),
	         "n0@127.0.0.1:%u,n1@127.0.0.1:%u,n2@127.0.0.1:%u", t.ports[0],
	         t.ports[1], t.ports[2]);
	assert_int_equal(run_bench(two_mixes), 2);
	assert_int_equal(run_bench(with_peers), 2);
	close(mkstemp(csv));
	assert_int_equal(run_bench(argv), 0);
	trio_stop(&t);
	n = take_csv(csv, text, sizeof(text));
	/* One row: 3 nodes at 50 % gets, 2 clients x 4; no failed, lost or
	 * repeated request. */
	assert_non_null(strstr(text, "\nmix,loop,"));
	assert_int_equal(strcmp(text + n - 3, ",0\n"), 0);
}

/* Malformed lists are refused. */
static void
test_hosts_bad_lists(void **state)
{
	char *lists[] = {"127.0.0.1", "127.0.0.1:0", "h:1,",
	                 "@h:1",      "h:70000",     "h:1,h2"};
	char *argv[] = {"cluster", "--hosts", NULL, NULL};

	(void)state;
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		argv[2] = lists[i];
		assert_int_equal(run_bench(argv), 2);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(test_hosts_drives_weftd_nodes, kill_live),
	    cmocka_unit_test_teardown(test_hosts_bad_lists, kill_live),
	    cmocka_unit_test_teardown(test_hosts_mix_on_the_kv_of_weftd_nodes,
	                              kill_live),
	    cmocka_unit_test_teardown(test_hosts_mesh_runs_on_the_nodes,
	                              kill_live),
	    cmocka_unit_test_teardown(
	        test_hosts_mesh_keeps_measuring_when_a_node_dies, kill_live),
	    cmocka_unit_test_teardown(test_hosts_mesh_needs_the_load_verb,
	                              kill_live),
	    cmocka_unit_test_teardown(test_load_verb_refuses_bad_requests,
	                              kill_live),
	    cmocka_unit_test_teardown(test_netns_cluster, kill_live),
	    cmocka_unit_test_teardown(test_netns_cluster_over_tls, kill_live),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
