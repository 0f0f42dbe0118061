/* SPDX-License-Identifier: MIT */
/*
 * msvc_bench.c: request/response rate of the messaging service between
 * two nodes in two processes on loopback, in the shape of a reactor RPC
 * benchmark: C connections x D outstanding requests of S bytes, the full
 * envelope, id matching and a callback per request.
 *
 *   msvc-bench [-c conns] [-d depth] [-s size] [-t seconds] [-b] [-S] [-T]
 *
 * -b runs the server's handler on the worker pool instead of inline. -S
 * has the server put its stage times in every answer
 * (weft_msvc_opts.stage_times). -T gives every request a sampled trace
 * context, whose spans a hook of the client's counts (the cost of tracing,
 * with the stage times the answers to traced requests carry). The
 * program forks: the child is the server node, the parent the client node,
 * each on one loop (one core each on a 2-core machine). Both print their
 * reactor counters (messages per read, bytes per write, wake-ups).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <weft/core.h>
#include <weft/loop.h>
#include <weft/messaging.h>

#define VERB_ECHO 16

struct bench {
	weft_msvc *svc;
	weft_msvc_peer *server;
	uint32_t conns, depth;
	size_t size;
	uint8_t *payload;
	_Atomic uint64_t done;
	bool traced;              /* -T */
	bool stage_times;         /* -S: the server's weft_msvc_opts */
	weft_msvc_traceparent tp; /* -T: the trace every request is of */
	_Atomic uint64_t spans;   /* -T: spans the hook saw */
	_Atomic uint64_t errors;
	_Atomic bool stop;
	_Atomic uint32_t outstanding;
};

static struct bench bench;

static uint16_t
free_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	uint16_t port;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	getsockname(fd, (struct sockaddr *)&sa, &len);
	port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

static weft_msvc_config *
make_config(uint16_t srv_port, uint16_t cli_port, uint32_t conns)
{
	weft_msvc_config *cfg;
	weft_msvc_limits *l;

	if (weft_msvc_config_new("bench", &cfg) != 0)
		exit(1);
	weft_msvc_config_add_node(cfg, "srv", "127.0.0.1", srv_port);
	weft_msvc_config_add_node(cfg, "cli", "127.0.0.1", cli_port);
	l = weft_msvc_config_limits(cfg);
	l->connections[WEFT_MSVC_SMALL] = conns;
	l->max_pending_requests = 1u << 20;
	l->worker_threads = 1;
	l->request_timeout_ms = 10000;
	return cfg;
}

static void
on_echo(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	(void)svc;
	(void)arg;
	weft_msvc_respond(msg, weft_msvc_msg_data(msg), weft_msvc_msg_len(msg));
}

/* CPU seconds (user + system) this process used so far. */
static double
cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static void
print_reactor(const char *who, weft_msvc *svc)
{
	weft_msvc_stats st;

	weft_msvc_get_stats(svc, &st);
	fprintf(stderr,
	        "%s: in %llu msgs in %llu reads (%.1f/read), out %llu msgs, "
	        "%llu writes (%.0f B/write), loop wake-ups %llu "
	        "(%.1f msgs/wake-up), hand-offs %llu\n",
	        who, (unsigned long long)st.messages_in,
	        (unsigned long long)st.read_batches,
	        st.read_batches ? (double)st.messages_in / st.read_batches : 0,
	        (unsigned long long)st.messages_out,
	        (unsigned long long)st.write_calls,
	        st.write_calls ? (double)st.bytes_written / st.write_calls : 0,
	        (unsigned long long)st.loop_wakeups,
	        st.loop_wakeups ? (double)(st.messages_in + st.messages_out) /
	                              st.loop_wakeups
	                        : 0,
	        (unsigned long long)st.handoffs);
}

static volatile sig_atomic_t server_quit;

static void
on_term(int sig)
{
	(void)sig;
	server_quit = 1;
}

static int
run_server(uint16_t srv_port, uint16_t cli_port, uint32_t conns, bool blocking,
           int ready_fd)
{
	weft_msvc_config *cfg = make_config(srv_port, cli_port, conns);
	weft_loop_group *group;
	weft_msvc *svc;
	char c = 'r';

	signal(SIGTERM, on_term);
	if (weft_loop_group_new(1, &group) != 0 ||
	    weft_msvc_new(group, cfg, "srv",
	                  &(weft_msvc_opts){.stage_times = bench.stage_times},
	                  &svc) != 0 ||
	    weft_msvc_register(svc, VERB_ECHO, "echo", on_echo, NULL,
	                       WEFT_MSVC_CLIENTS |
	                           (blocking ? WEFT_MSVC_BLOCKING : 0)) != 0 ||
	    weft_msvc_start(svc) != 0)
		return 1;
	if (write(ready_fd, &c, 1) != 1)
		return 1;
	while (!server_quit)
		pause();
	print_reactor("server", svc);
	{
		weft_msvc_stats st;

		weft_msvc_get_stats(svc, &st);
		fprintf(stderr, "server: %.2f us CPU per request\n",
		        cpu_seconds() * 1e6 /
		            (double)(st.messages_in ? st.messages_in : 1));
	}
	weft_msvc_stop(svc, 100);
	weft_msvc_free(svc);
	weft_loop_group_free(group);
	weft_msvc_config_free(cfg);
	return 0;
}

static void on_reply(weft_msvc *svc, int status, const void *data, size_t len,
                     void *arg);

static void
issue(struct bench *b, uint32_t slot)
{
	weft_msvc_call_opts o = {.key = slot % b->conns};

	if (b->traced)
		o.traceparent = &b->tp;

	if (weft_msvc_request(b->svc, b->server, VERB_ECHO, b->payload, b->size,
	                      &o, on_reply, (void *)(uintptr_t)slot) != 0) {
		atomic_fetch_add(&b->errors, 1);
		atomic_fetch_sub(&b->outstanding, 1);
	}
}

static void
on_reply(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	uint32_t slot = (uint32_t)(uintptr_t)arg;

	(void)svc;
	(void)data;
	(void)len;
	if (status != 0)
		atomic_fetch_add(&bench.errors, 1);
	atomic_fetch_add_explicit(&bench.done, 1, memory_order_relaxed);
	if (atomic_load_explicit(&bench.stop, memory_order_relaxed))
		atomic_fetch_sub(&bench.outstanding, 1);
	else
		issue(&bench, slot);
}

static void
start_load(weft_loop *loop, int status, void *arg)
{
	struct bench *b = arg;
	uint32_t i, n = b->conns * b->depth;

	(void)loop;
	(void)status;
	atomic_store(&b->outstanding, n);
	for (i = 0; i < n; i++)
		issue(b, i);
}

static void
on_span(weft_msvc *svc, const weft_msvc_span *span, void *arg)
{
	struct bench *b = arg;

	(void)svc;
	(void)span;
	atomic_fetch_add_explicit(&b->spans, 1, memory_order_relaxed);
}

static void
sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

	nanosleep(&ts, NULL);
}

static int
run_client(uint16_t srv_port, uint16_t cli_port, struct bench *b, int seconds)
{
	weft_msvc_config *cfg = make_config(srv_port, cli_port, b->conns);
	weft_msvc_peer_stats ps;
	weft_loop_group *group;
	uint64_t t0, t1, d0, d1;
	double c0, c1;
	weft_loop *loop;
	int i;

	if (weft_loop_group_new(1, &group) != 0 ||
	    weft_msvc_new(group, cfg, "cli", NULL, &b->svc) != 0 ||
	    (b->traced && weft_msvc_on_span(b->svc, on_span, b) != 0) ||
	    weft_msvc_start(b->svc) != 0)
		return 1;
	b->server = weft_msvc_peer_find(b->svc, "srv");
	b->payload = calloc(1, b->size ? b->size : 1);
	loop = weft_loop_group_at(group, 0);
	weft_loop_post(loop, start_load, b);
	sleep_ms(1000); /* warm-up: connections, caches */
	d0 = atomic_load(&b->done);
	t0 = weft_now_ns();
	c0 = cpu_seconds();
	for (i = 0; i < seconds * 10; i++)
		sleep_ms(100);
	d1 = atomic_load(&b->done);
	t1 = weft_now_ns();
	c1 = cpu_seconds();
	atomic_store(&b->stop, true);
	for (i = 0; i < 1000 && atomic_load(&b->outstanding) > 0; i++)
		sleep_ms(10);
	sleep_ms(1100); /* one more latency snapshot */
	weft_msvc_peer_get_stats(b->server, &ps);
	printf("conns=%u depth=%u size=%zu: %.0f requests/s, p50 %.1f us, "
	       "p99 %.1f us (service's own histogram), errors %llu\n",
	       b->conns, b->depth, b->size,
	       (double)(d1 - d0) * 1e9 / (double)(t1 - t0),
	       (double)ps.latency_p50_ns / 1e3, (double)ps.latency_p99_ns / 1e3,
	       (unsigned long long)atomic_load(&b->errors));
	printf("client: %.2f us CPU per request (1 core per side would "
	       "allow %.0f requests/s on this side)\n",
	       (c1 - c0) * 1e6 / (double)(d1 - d0),
	       (double)(d1 - d0) / (c1 - c0));
	if (b->traced)
		printf("client: %llu spans\n",
		       (unsigned long long)atomic_load(&b->spans));
	fflush(stdout);
	print_reactor("client", b->svc);
	weft_msvc_stop(b->svc, 100);
	weft_msvc_free(b->svc);
	weft_loop_group_free(group);
	weft_msvc_config_free(cfg);
	free(b->payload);
	return 0;
}

int
main(int argc, char **argv)
{
	uint16_t srv_port = free_port(), cli_port = free_port();
	bool blocking = false;
	int opt, seconds = 3, pipefd[2], status = 0;
	pid_t child;
	char c;

	if (argc == 2 && strcmp(argv[1], "--version") == 0) {
		printf("msvc-bench %s\n", weft_version());
		return 0;
	}
	bench.conns = 4;
	bench.depth = 32;
	bench.size = 64;
	while ((opt = getopt(argc, argv, "c:d:s:t:bST")) != -1) {
		switch (opt) {
		case 'S':
			bench.stage_times = true;
			break;
		case 'c':
			bench.conns = (uint32_t)atoi(optarg);
			break;
		case 'd':
			bench.depth = (uint32_t)atoi(optarg);
			break;
		case 's':
			bench.size = (size_t)atol(optarg);
			break;
		case 't':
			seconds = atoi(optarg);
			break;
		case 'b':
			blocking = true;
			break;
		case 'T':
			bench.traced = true;
			memset(bench.tp.trace_id, 0x4b,
			       sizeof(bench.tp.trace_id));
			memset(bench.tp.span_id, 0x5a,
			       sizeof(bench.tp.span_id));
			bench.tp.flags = WEFT_MSVC_TRACE_SAMPLED;
			break;
		default:
			fprintf(stderr,
			        "usage: %s [-c conns] [-d depth] "
			        "[-s size] [-t seconds] [-b] [-S] [-T]\n",
			        argv[0]);
			return 2;
		}
	}
	if (bench.conns == 0 || bench.conns > 64 || bench.depth == 0)
		return 2;
	weft_log_set_level(WEFT_LOG_WARN);
	signal(SIGPIPE, SIG_IGN);
	if (pipe(pipefd) != 0 || (child = fork()) < 0)
		return 1;
	if (child == 0) {
		close(pipefd[0]);
		_exit(run_server(srv_port, cli_port, bench.conns, blocking,
		                 pipefd[1]));
	}
	close(pipefd[1]);
	if (read(pipefd[0], &c, 1) != 1) {
		fprintf(stderr, "server did not start\n");
		return 1;
	}
	if (blocking)
		printf("(server handler on the worker pool)\n");
	if (run_client(srv_port, cli_port, &bench, seconds) != 0)
		status = 1;
	kill(child, SIGTERM);
	waitpid(child, NULL, 0);
	return status;
}
