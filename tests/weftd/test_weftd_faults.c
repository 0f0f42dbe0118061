/* SPDX-License-Identifier: MIT */
/*
 * test_weftd_faults.c: process faults under steady key-value load. Three
 * weftd processes (write_quorum = all) serve a closed loop of puts and
 * gets from the test's own client service while the test
 *
 *   - SIGKILLs and restarts n2 and n3 in turn, WEFT_FAULT_CYCLES times
 *     (20 here; the test_weftd_faults_long run, label "slow", does 100);
 *   - SIGSTOPs n3 for longer than the heartbeat timeout while large writes
 *     pile up towards it, then resumes it;
 *   - (as root, where network namespaces may be made) runs the nodes in
 *     namespaces of their own and partitions n3 from everyone with an
 *     nftables rule, then heals it; skipped with a message elsewhere.
 *
 * Then, from the client's own records: every callback ran exactly once
 * and no later than its timeout + 100 ms; no acknowledged write is
 * missing on a node that stayed up since; while n3 was stopped, the
 * senders' RSS stayed within their configured queue caps + 32 MiB;
 * traffic came back to its rate within 2 s of each heal; n1's file
 * descriptors came back to their count before the faults; and no node's
 * log holds a sanitizer report.
 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include <weft/kv.h>

#include "support/ports.h"
#include "support/weftd_proc.h"

#define NODES 3
#define SLOTS 24         /* requests kept in flight */
#define TIMEOUT_MS 1500  /* each request's */
#define MAX_ACKED 200000 /* acknowledged writes remembered */
#define VALUE_BYTES 256  /* a steady write */
#define BIG_BYTES 65536  /* the writes that pile up towards a stopped n3 */
#define QUEUE_BYTES (8u << 20)
#define INFLIGHT_BYTES (8u << 20)
#define WAIT_MS 15000
#define RATE_WINDOW_MS 250
#define HEAL_MS 2000

#if defined(__SANITIZE_THREAD__)
#define SLACK_MS 2000 /* the loops run several times slower */
#elif defined(__SANITIZE_ADDRESS__)
#define SLACK_MS 1000
#else
#define SLACK_MS 100
#endif

static const char *const ids[NODES] = {"n1", "n2", "n3"};

struct acked {
	uint32_t slot, seq;
	uint64_t at_ns;
};

struct load;

struct slot {
	struct load *l;
	uint32_t index, seq;
	_Atomic bool in_flight;
	_Atomic bool big;       /* the next writes are large */
	_Atomic uint32_t avoid; /* a node not to ask (NODES: none) */
	uint64_t sent_ns;
	uint32_t node;
	bool put;
	char key[32];
};

struct load {
	weft_msvc *client;
	struct slot slots[SLOTS];
	_Atomic bool stopping;
	_Atomic int outstanding;
	_Atomic uint64_t completed, ok, twice, late, worst_late_ms;
	_Atomic uint64_t ok_to[NODES];
	_Atomic int bad_status;
	_Atomic uint32_t nacked;
	struct acked *acked;
	/* When each node last started: what it acknowledged before is gone
	 * from it. */
	_Atomic uint64_t started_ns[NODES];
};

struct fixture {
	char dir[64];
	char config[128];
	uint16_t ports[NODES];
	struct wt_proc p[NODES];
	int ns_fd[NODES]; /* -1: the test's own namespace */
	char ns_prefix[32];
	weft_loop_group *group;
	weft_msvc *client;
	struct load *load;
};

/* ---- The load ------------------------------------------------------------ */

static bool
is_fault_status(int status)
{
	return status == WEFT_EPEERDOWN || status == WEFT_ETIMEDOUT ||
	       status == WEFT_EEXPIRED || status == WEFT_ESHUTDOWN ||
	       status == WEFT_EOVERLOAD || status == WEFT_ECONNREFUSED ||
	       status == WEFT_EREMOTE; /* the quorum's error, from a node */
}

static void issue(struct slot *s);

static void
on_reply(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	struct slot *s = arg;
	struct load *l = s->l;
	uint64_t took = (weft_now_ns() - s->sent_ns) / 1000000, worst;
	uint32_t i;

	(void)svc;
	(void)data;
	(void)len;
	if (!atomic_exchange(&s->in_flight, false))
		atomic_fetch_add(&l->twice, 1);
	if (took > TIMEOUT_MS + SLACK_MS)
		atomic_fetch_add(&l->late, 1);
	worst = atomic_load(&l->worst_late_ms);
	while (took > TIMEOUT_MS + worst &&
	       !atomic_compare_exchange_weak(&l->worst_late_ms, &worst,
	                                     took - TIMEOUT_MS))
		;
	if (status == 0) {
		atomic_fetch_add(&l->ok, 1);
		atomic_fetch_add(&l->ok_to[s->node], 1);
		if (s->put && (i = atomic_fetch_add(&l->nacked, 1)) < MAX_ACKED)
			l->acked[i] =
			    (struct acked){s->index, s->seq, weft_now_ns()};
	} else if (!is_fault_status(status) && status != WEFT_ENOTFOUND) {
		atomic_store(&l->bad_status, status);
	}
	atomic_fetch_add(&l->completed, 1);
	issue(s);
	atomic_fetch_sub(&l->outstanding, 1);
}

/* The next operation of a slot: a write of a new key, or a read of the
 * slot's last one, to the next node in turn. */
static void
issue(struct slot *s)
{
	static char value[BIG_BYTES];
	struct load *l = s->l;
	weft_msvc_call_opts o = {.timeout_ms = TIMEOUT_MS};
	weft_msvc_peer *peer;
	size_t len;
	int rv;

	if (atomic_load(&l->stopping))
		return;
	s->node = (s->node + 1) % NODES;
	if (s->node == atomic_load(&s->avoid))
		s->node = (s->node + 1) % NODES;
	s->put = s->seq == 0 || s->seq % 4 != 0;
	if (s->put)
		snprintf(s->key, sizeof(s->key), "s%u-%u", s->index, ++s->seq);
	else
		s->seq++;
	peer = weft_msvc_peer_find(l->client, ids[s->node]);
	len = atomic_load(&s->big) ? BIG_BYTES : VALUE_BYTES;
	atomic_store(&s->in_flight, true);
	atomic_fetch_add(&l->outstanding, 1);
	s->sent_ns = weft_now_ns();
	rv = s->put
	         ? weft_kv_client_put(l->client, peer, s->key, strlen(s->key),
	                              value, len, &o, on_reply, s)
	         : weft_kv_client_get(l->client, peer, s->key, strlen(s->key),
	                              &o, on_reply, s);
	if (rv != 0) { /* refused at once: it ends here */
		atomic_store(&s->in_flight, false);
		atomic_fetch_sub(&l->outstanding, 1);
		atomic_fetch_add(&l->completed, 1);
	}
}

static struct load *
load_start(weft_msvc *client)
{
	struct load *l = calloc(1, sizeof(*l));
	uint32_t i;

	assert_non_null(l);
	l->acked = calloc(MAX_ACKED, sizeof(*l->acked));
	assert_non_null(l->acked);
	l->client = client;
	for (i = 0; i < NODES; i++)
		atomic_store(&l->started_ns[i], weft_now_ns());
	for (i = 0; i < SLOTS; i++) {
		l->slots[i].l = l;
		l->slots[i].index = i;
		l->slots[i].node = i % NODES;
		l->slots[i].avoid = NODES;
	}
	for (i = 0; i < SLOTS; i++)
		issue(&l->slots[i]);
	return l;
}

static void
wait_until(bool (*cond)(struct fixture *, int), struct fixture *f, int arg,
           uint64_t timeout_ms)
{
	uint64_t start = weft_now_ns();

	while (!cond(f, arg) && wt_ms_since(start) < timeout_ms)
		wt_pause_ms(2);
	assert_true(cond(f, arg));
}

static bool
none_outstanding(struct fixture *f, int unused)
{
	(void)unused;
	return atomic_load(&f->load->outstanding) == 0;
}

/* Successes per second over the next window. */
static double
rate_now(struct load *l)
{
	uint64_t before = atomic_load(&l->ok);

	wt_pause_ms(RATE_WINDOW_MS);
	return (double)(atomic_load(&l->ok) - before) * 1000 / RATE_WINDOW_MS;
}

/* Within HEAL_MS of a heal, one window must see half the rate of before. */
static void
expect_rate_back(struct load *l, double before, const char *after)
{
	uint64_t start = weft_now_ns();
	double now = 0;

	while (wt_ms_since(start) < HEAL_MS && (now = rate_now(l)) < before / 2)
		;
	print_message("rate: %.0f/s before, %.0f/s within %" PRIu64
	              " ms of %s\n",
	              before, now, wt_ms_since(start), after);
	assert_true(now >= before / 2);
}

static int run(const char *fmt, ...) WEFT_PRINTF(1, 2);

/* ---- Checks ----------------------------------------------------------------
 */

static void
on_check(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	struct wt_call *c = arg;

	(void)data;
	wt_call_done(svc, status, NULL, len, c);
}

/* Every acknowledged write is on each node that has not restarted since;
 * checks up to max of them, spread over the run. */
static void
check_acked(struct fixture *f, uint32_t max)
{
	struct load *l = f->load;
	uint32_t n = atomic_load(&l->nacked), step, i, node, checked = 0;
	weft_msvc_call_opts o = {.timeout_ms = 5000};
	int rv;
	char key[32];

	if (n > MAX_ACKED)
		n = MAX_ACKED;
	/* A node the client still knows down (its redial waits out a
	 * back-off after a heal) fails reads at once: wait until it is up,
	 * so that a read fails only for a write that is not there. */
	for (node = 0; node < NODES; node++)
		(void)weft_msvc_peer_wait_up(
		    f->client, wt_peer(f->client, ids[node]), 5000);
	step = n > max ? n / max : 1;
	for (i = 0; i < n; i += step) {
		for (node = 0; node < NODES; node++) {
			struct wt_call c = WT_CALL_INIT;

			if (atomic_load(&l->started_ns[node]) >=
			    l->acked[i].at_ns)
				continue;
			snprintf(key, sizeof(key), "s%u-%u", l->acked[i].slot,
			         l->acked[i].seq);
			assert_int_equal(weft_kv_client_get(
			                     f->client,
			                     wt_peer(f->client, ids[node]), key,
			                     strlen(key), &o, on_check, &c),
			                 0);
			if ((rv = wt_call_wait(&c, 6000)) != 0)
				fail_msg(
				    "acknowledged write %s missing on %s: %s",
				    key, ids[node], weft_strerror(rv));
			checked++;
		}
	}
	print_message("%u acknowledged writes, %u reads of them on nodes "
	              "that stayed up\n",
	              n, checked);
}

static void
load_finish(struct fixture *f, uint32_t check)
{
	struct load *l = f->load;
	uint32_t i;

	atomic_store(&l->stopping, true);
	wait_until(none_outstanding, f, 0, WAIT_MS);
	for (i = 0; i < SLOTS; i++)
		assert_false(atomic_load(&l->slots[i].in_flight));
	print_message("%" PRIu64 " requests, %" PRIu64 " ok; latest callback "
	              "%" PRIu64 " ms past its timeout (allowed %d)\n",
	              atomic_load(&l->completed), atomic_load(&l->ok),
	              atomic_load(&l->worst_late_ms), SLACK_MS);
	assert_int_equal(atomic_load(&l->twice), 0);
	assert_int_equal(atomic_load(&l->late), 0);
	assert_int_equal(atomic_load(&l->bad_status), 0);
	check_acked(f, check);
	free(l->acked);
	free(l);
	f->load = NULL;
}

static size_t
fd_count(pid_t pid)
{
	char path[64];
	struct dirent *e;
	size_t n = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	if ((d = opendir(path)) == NULL)
		return 0;
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

/* The node's descriptors settle back to baseline after the faults. */
static void
expect_fds_back(struct wt_proc *p, size_t baseline)
{
	uint64_t start = weft_now_ns();
	size_t n;

	while ((n = fd_count(p->pid)) > baseline && wt_ms_since(start) < 5000)
		wt_pause_ms(20);
	print_message("descriptors: %zu before the faults, %zu after\n",
	              baseline, n);
	if (n > baseline) /* which ones, to read in the log */
		run("ss -tanp 2>/dev/null | grep 'pid=%d,' >&2", (int)p->pid);
	assert_true(n <= baseline);
}

static uint64_t
rss_kb(pid_t pid)
{
	char path[64], line[128];
	unsigned long kb = 0;
	FILE *fp;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((fp = fopen(path, "r")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), fp) != NULL)
		if (sscanf(line, "VmRSS: %lu kB", &kb) == 1)
			break;
	fclose(fp);
	return kb;
}

/* No sanitizer spoke in any node's log. */
static void
expect_clean_logs(struct fixture *f)
{
	int i;

	for (i = 0; i < NODES; i++) {
		assert_false(
		    wt_file_contains(f->p[i].err_path, "Sanitizer", 0));
		assert_false(
		    wt_file_contains(f->p[i].err_path, "runtime error:", 0));
	}
}

/* ---- The cluster ------------------------------------------------------------
 */

static void
write_config(struct fixture *f, const char *const hosts[NODES])
{
	char text[2048];
	int n = 0, i;

	n += snprintf(text + n, sizeof(text) - (size_t)n,
	              "[cluster]\nname = weftd-faults\n");
	for (i = 0; i < NODES; i++)
		n += snprintf(text + n, sizeof(text) - (size_t)n,
		              "[node %s]\nhost = %s\nport = %u\n", ids[i],
		              hosts[i], (unsigned)f->ports[i]);
	snprintf(text + n, sizeof(text) - (size_t)n,
	         "[limits]\nloops = 1\nheartbeat_interval = 200ms\n"
	         "reconnect_min = 10ms\nreconnect_max = 200ms\n"
	         "request_timeout = 2s\nconnect_timeout = 1s\n"
	         "outbound_queue = %u\ninbound_inflight = %u\n"
	         "[weftd]\nmetrics_listen = 127.0.0.1:0\n"
	         "shutdown_timeout = 2s\n"
	         "[kv]\nwrite_quorum = all\nreplicate_timeout = 1s\n",
	         QUEUE_BYTES, INFLIGHT_BYTES);
	wt_write_file(f->config, text);
}

/* Under AddressSanitizer a node's freed memory waits in a quarantine
 * (256 MiB by default) before it can be reused, so its RSS grows with
 * the bytes it has freed, not with what it holds. The nodes of this test
 * get a small quarantine, and the memory bound below counts it. */
#if defined(__SANITIZE_ADDRESS__)
#define QUARANTINE_KB (16u * 1024)
#else
#define QUARANTINE_KB 0u
#endif

static void
bound_quarantine(void)
{
	static bool done;
	char opts[512];
	const char *old;

	if (QUARANTINE_KB == 0 || done)
		return;
	done = true;
	old = getenv("ASAN_OPTIONS");
	snprintf(opts, sizeof(opts), "%s%squarantine_size_mb=%u",
	         old != NULL ? old : "", old != NULL && *old ? ":" : "",
	         QUARANTINE_KB / 1024);
	setenv("ASAN_OPTIONS", opts, 1);
}

static void
node_start(struct fixture *f, int i)
{
	bound_quarantine();
	wt_node_start_in(&f->p[i], f->config, f->dir, ids[i], f->ports[i], NULL,
	                 f->ns_fd[i]);
	if (f->load != NULL)
		atomic_store(&f->load->started_ns[i], weft_now_ns());
}

static struct fixture *
fixture_new(void)
{
	struct fixture *f = calloc(1, sizeof(*f));
	int i;

	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/weftd-faults-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->config, sizeof(f->config), "%s/cluster.ini", f->dir);
	for (i = 0; i < NODES; i++)
		f->ns_fd[i] = -1;
	return f;
}

static void
cluster_start(struct fixture *f)
{
	int i;

	for (i = 0; i < NODES; i++)
		node_start(f, i);
	wt_client_start(f->config, "fault-client", NULL, &f->group, &f->client);
}

static int
setup(void **state)
{
	static const char *const local[NODES] = {"127.0.0.1", "127.0.0.1",
	                                         "127.0.0.1"};
	struct fixture *f = fixture_new();
	int i;

	for (i = 0; i < NODES; i++)
		f->ports[i] = weft_test_free_port();
	write_config(f, local);
	cluster_start(f);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;
	int i, bad;

	if (f->load != NULL)
		atomic_store(&f->load->stopping, true);
	wt_client_stop(f->group, f->client);
	bad = wt_nodes_stop(f->p, NODES);
	if (f->load != NULL) {
		free(f->load->acked);
		free(f->load);
	}
	for (i = 0; i < NODES; i++) {
		unlink(f->p[i].err_path);
		if (f->ns_fd[i] >= 0)
			close(f->ns_fd[i]);
	}
	unlink(f->config);
	rmdir(f->dir);
	free(f);
	assert_int_equal(bad, 0);
	return 0;
}

/* ---- SIGKILL, SIGSTOP ------------------------------------------------------
 */

static bool
node_serves(struct fixture *f, int node)
{
	return atomic_load(&f->load->ok_to[node]) >= 10;
}

static void
kill_and_restart(struct fixture *f, int node)
{
	assert_int_equal(kill(f->p[node].pid, SIGKILL), 0);
	assert_int_not_equal(wt_wait_exit(f->p[node].pid, WT_EXIT_MS), -1);
	close(f->p[node].out_fd);
	f->p[node].pid = 0;
	node_start(f, node);
	atomic_store(&f->load->ok_to[node], 0);
	wait_until(node_serves, f, node, WAIT_MS);
}

/* From now on the slots write large values to the nodes but avoid. */
static void
set_big(struct load *l, bool on, uint32_t avoid)
{
	uint32_t i;

	for (i = 0; i < SLOTS; i++) {
		atomic_store(&l->slots[i].big, on);
		atomic_store(&l->slots[i].avoid, on ? avoid : NODES);
	}
}

/* Lets the load run, with large writes a moment so that every connection
 * class is dialed (they are dialed lazily and then stay), before the
 * descriptors and the rate are taken as the baseline. */
static bool
ok_at_least(struct fixture *f, int n)
{
	return atomic_load(&f->load->ok) >= (uint64_t)n;
}

static void
warm_up(struct fixture *f)
{
	/* Each slot goes round the nodes: a few rounds of large writes
	 * reach every node from every node. */
	set_big(f->load, true, NODES);
	wait_until(ok_at_least, f, (int)atomic_load(&f->load->ok) + 4 * SLOTS,
	           WAIT_MS);
	set_big(f->load, false, NODES);
	wt_pause_ms(500);
}

static void
test_sigkill_restart_cycles_under_load(void **state)
{
	struct fixture *f = *state;
	const char *env = getenv("WEFT_FAULT_CYCLES");
	int cycles = env != NULL ? atoi(env) : 20, i;
	size_t fds;
	double before;

	f->load = load_start(f->client);
	/* Every class dialed first: a restarted node's key-value catch-up
	 * is answered on the large class. */
	warm_up(f);
	fds = fd_count(f->p[0].pid);
	before = rate_now(f->load);
	for (i = 0; i < cycles; i++)
		kill_and_restart(f, 1 + i % 2);
	expect_rate_back(f->load, before, "the last restart");
	print_message("%d SIGKILL and restart cycles survived\n", cycles);
	load_finish(f, 2000);
	expect_fds_back(&f->p[0], fds);
	expect_clean_logs(f);
}

static void
test_sigstop_past_the_heartbeat_timeout(void **state)
{
	struct fixture *f = *state;
	/* Per sender: a queue to each of two peers, and what it reads. */
	uint64_t caps_kb =
	    (2ull * QUEUE_BYTES + INFLIGHT_BYTES) / 1024 + QUARANTINE_KB;
	uint64_t rss0[2], peak[2] = {0, 0}, start;
	double before;
	size_t fds;
	int i;

	f->load = load_start(f->client);
	warm_up(f);
	fds = fd_count(f->p[0].pid);
	before = rate_now(f->load);
	for (i = 0; i < 2; i++)
		rss0[i] = rss_kb(f->p[i].pid);
	/* n3 stops answering anything, heartbeats too, while large writes
	 * (replicated to it) pile up on n1 and n2. */
	set_big(f->load, true, 2);
	assert_int_equal(kill(f->p[2].pid, SIGSTOP), 0);
	start = weft_now_ns();
	while (wt_ms_since(start) < 1500) {
		for (i = 0; i < 2; i++) {
			uint64_t kb = rss_kb(f->p[i].pid);

			if (kb > peak[i])
				peak[i] = kb;
		}
		wt_pause_ms(20);
	}
	set_big(f->load, false, NODES);
	assert_int_equal(kill(f->p[2].pid, SIGCONT), 0);
	for (i = 0; i < 2; i++) {
		print_message("%s RSS: %" PRIu64 " KiB before, %" PRIu64
		              " KiB at most while n3 was stopped (caps %" PRIu64
		              " KiB + 32 MiB)\n",
		              ids[i], rss0[i], peak[i], caps_kb);
		assert_true(peak[i] <= rss0[i] + caps_kb + 32 * 1024);
	}
	expect_rate_back(f->load, before, "SIGCONT");
	load_finish(f, 2000);
	expect_fds_back(&f->p[0], fds);
	expect_clean_logs(f);
}

/* ---- Partitions in network namespaces -------------------------------------
 */

/* Runs a shell command line; returns its exit status. */
static int
run(const char *fmt, ...)
{
	char cmd[512];
	va_list ap;
	int status;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	status = system(cmd);
	return status == -1 ? -1 : WEXITSTATUS(status);
}

/* Makes a hub with a bridge and a namespace per node on it; false (and
 * nothing left behind) where that is not allowed. */
static bool
netns_make(struct fixture *f)
{
	char path[128];
	int i;

	snprintf(f->ns_prefix, sizeof(f->ns_prefix), "wtf%d", (int)getpid());
	if (geteuid() != 0 ||
	    run("ip netns add %s-hub 2>/dev/null", f->ns_prefix) != 0)
		return false;
	if (run("ip -n %s-hub link add br0 type bridge && "
	        "ip -n %s-hub link set br0 up",
	        f->ns_prefix, f->ns_prefix) != 0)
		return false;
	for (i = 0; i < NODES; i++) {
		if (run("ip netns add %s-%s && "
		        "ip -n %s-hub link add v%d type veth peer name eth0 "
		        "netns %s-%s && "
		        "ip -n %s-hub link set v%d master br0 up && "
		        "ip -n %s-%s link set lo up && "
		        "ip -n %s-%s addr add 10.78.0.%d/24 dev eth0 && "
		        "ip -n %s-%s link set eth0 up",
		        f->ns_prefix, ids[i], f->ns_prefix, i, f->ns_prefix,
		        ids[i], f->ns_prefix, i, f->ns_prefix, ids[i],
		        f->ns_prefix, ids[i], i + 1, f->ns_prefix, ids[i]) != 0)
			return false;
		snprintf(path, sizeof(path), "/run/netns/%s-%s", f->ns_prefix,
		         ids[i]);
		if ((f->ns_fd[i] = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			return false;
	}
	return true;
}

static void
netns_remove(struct fixture *f)
{
	int i;

	for (i = 0; i < NODES; i++)
		run("ip netns del %s-%s 2>/dev/null", f->ns_prefix, ids[i]);
	run("ip netns del %s-hub 2>/dev/null", f->ns_prefix);
}

/* Cuts node's namespace off (or lets it talk again) with nftables. */
static void
partition(struct fixture *f, int node, bool on)
{
	if (on)
		assert_int_equal(
		    run("ip netns exec %s-%s nft -f - <<'EOF'\n"
		        "table inet weftpart {\n"
		        " chain in { type filter hook input priority 0; "
		        "iifname != \"lo\" drop; }\n"
		        " chain out { type filter hook output priority 0; "
		        "oifname != \"lo\" drop; }\n"
		        "}\nEOF",
		        f->ns_prefix, ids[node]),
		    0);
	else
		assert_int_equal(run("ip netns exec %s-%s nft delete table "
		                     "inet weftpart",
		                     f->ns_prefix, ids[node]),
		                 0);
}

/* The client lives in the hub (its loop threads inherit the namespace of
 * the thread that makes them). */
struct hub_client {
	struct fixture *f;
	int ns_fd;
	int rv;
};

static void *
start_in_hub(void *arg)
{
	struct hub_client *h = arg;

	if ((h->rv = setns(h->ns_fd, CLONE_NEWNET)) == 0)
		wt_client_start(h->f->config, "fault-client", NULL,
		                &h->f->group, &h->f->client);
	return NULL;
}

static void
test_partition_and_heal_with_nftables(void **state)
{
	static const char *const hosts[NODES] = {"10.78.0.1", "10.78.0.2",
	                                         "10.78.0.3"};
	struct fixture *f = fixture_new();
	struct hub_client h = {.f = f};
	char path[128];
	double before;
	pthread_t t;
	size_t fds;
	int i;

	(void)state;
	if (run("command -v nft >/dev/null") != 0 || !netns_make(f)) {
		netns_remove(f);
		rmdir(f->dir);
		free(f);
		print_message("SKIPPED: partitions need root, network "
		              "namespaces and nftables (nft)\n");
		skip();
	}
	*state = f;
	for (i = 0; i < NODES; i++)
		f->ports[i] = (uint16_t)(7300 + i);
	write_config(f, hosts);
	for (i = 0; i < NODES; i++)
		node_start(f, i);
	snprintf(path, sizeof(path), "/run/netns/%s-hub", f->ns_prefix);
	assert_int_equal(
	    run("ip -n %s-hub addr add 10.78.0.254/24 dev br0", f->ns_prefix),
	    0);
	assert_true((h.ns_fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0);
	assert_int_equal(pthread_create(&t, NULL, start_in_hub, &h), 0);
	pthread_join(t, NULL);
	close(h.ns_fd);
	assert_int_equal(h.rv, 0);
	f->load = load_start(f->client);
	wt_pause_ms(500);
	fds = fd_count(f->p[0].pid);
	before = rate_now(f->load);
	for (i = 0; i < 3; i++) {
		partition(f, 2, true);
		wt_pause_ms(1500); /* past the heartbeat timeout */
		partition(f, 2, false);
		expect_rate_back(f->load, before, "healing the partition");
	}
	load_finish(f, 1000);
	expect_fds_back(&f->p[0], fds);
	expect_clean_logs(f);
	wt_client_stop(f->group, f->client);
	f->client = NULL;
	assert_int_equal(wt_nodes_stop(f->p, NODES), 0);
	netns_remove(f);
}

static int
teardown_partition(void **state)
{
	struct fixture *f = *state;
	int i;

	if (f == NULL)
		return 0;
	if (f->client != NULL)
		wt_client_stop(f->group, f->client);
	wt_nodes_stop(f->p, NODES);
	netns_remove(f);
	for (i = 0; i < NODES; i++) {
		unlink(f->p[i].err_path);
		if (f->ns_fd[i] >= 0)
			close(f->ns_fd[i]);
	}
	if (f->load != NULL) {
		free(f->load->acked);
		free(f->load);
	}
	unlink(f->config);
	rmdir(f->dir);
	free(f);
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(
	        test_sigkill_restart_cycles_under_load, setup, teardown),
	    cmocka_unit_test_setup_teardown(
	        test_sigstop_past_the_heartbeat_timeout, setup, teardown),
	    cmocka_unit_test_teardown(test_partition_and_heal_with_nftables,
	                              teardown_partition),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
