/* SPDX-License-Identifier: MIT */
/*
 * cluster.c: the cluster workload's coordinator. It starts P node
 * processes (cnode.c) on loopback, tells each the others' ports, relays
 * their progress once a second, and merges their figures: op rate,
 * latency percentiles, context switches and CPU per op, memory, threads.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <weft/histogram.h>

#include "wbench.h"

extern char **environ;

#define LINE_MAX_BYTES (1u << 16)

/* A node process, seen from the coordinator. */
typedef struct child {
	pid_t pid;
	int in_fd, out_fd;
	char *buf; /* what it printed, not yet split into lines */
	size_t have;
	uint16_t port;
	uint64_t ticks, tick_p99_ns; /* the last progress line */
	bool addressed, ready, done, reported, hist, dead;
	uint64_t ops, errors, vcsw, ivcsw, cpu_us, rss_kb, threads;
	uint64_t wakeups, msgs_in, sent, replies, duplicates;
	int first_error;
} child;

typedef wbench_cresult cresult;

typedef struct cluster {
	const wbench_opts *o;
	enum wbench_io io;
	unsigned n;       /* processes */
	unsigned members; /* the first ones are nodes; rpc: the rest clients */
	unsigned depth;   /* rpc: requests in flight per client */
	int read_pct;     /* mix: percent of gets; -1: not a mix run */
	child *kids;
	weft_histogram *lat;
	uint64_t last_print_ns, last_ticks;
} cluster;

static const char *
io_name(enum wbench_io io)
{
	return io == WBENCH_IO_THREADS ? "threads" : "loop";
}

static int
spawn_node(cluster *c, unsigned i)
{
	const wbench_opts *o = c->o;
	char idx[16], peers[16], k[16], size[32], warm[32], dur[32];
	char rate[32], slowf[32], slowms[32], pct[16], keys[16];
	char *argv[] = {(char *)o->self_exe,
	                "cluster-node",
	                "--node",
	                idx,
	                "--peers",
	                peers,
	                "--io",
	                (char *)io_name(c->io),
	                "--outstanding",
	                k,
	                "--size",
	                size,
	                "--warmup",
	                warm,
	                "--duration",
	                dur,
	                "--rate",
	                rate,
	                "--slow-fraction",
	                slowf,
	                "--slow-ms",
	                slowms,
	                o->tls_dir ? "--tls" : NULL,
	                (char *)o->tls_dir,
	                NULL,
	                NULL,
	                NULL,
	                NULL,
	                NULL,
	                NULL};
	posix_spawn_file_actions_t fa;
	int in[2], out[2], rv;

	snprintf(idx, sizeof(idx), "%u", i < c->members ? i : i - c->members);
	snprintf(peers, sizeof(peers), "%u", o->hosts ? o->peers : c->members);
	snprintf(k, sizeof(k), "%u", o->outstanding);
	if (c->read_pct >= 0) { /* mix: key-value members and clients */
		int a = o->tls_dir ? 24 : 22; /* after the last option */

		snprintf(pct, sizeof(pct), "%d", c->read_pct);
		snprintf(keys, sizeof(keys), "%u", o->keys);
		argv[a] = "--kv";
		argv[a + 1] = "--read-pct";
		argv[a + 2] = pct;
		argv[a + 3] = "--keys";
		argv[a + 4] = keys;
	}
	if (o->hosts != NULL) { /* nodes elsewhere: clients only */
		int a = o->tls_dir ? 24 : 22;

		argv[a] = "--hosts";
		argv[a + 1] = (char *)o->hosts;
		argv[a + 2] = o->cluster_name ? "--cluster-name" : NULL;
		argv[a + 3] = (char *)o->cluster_name;
	}
	if (c->members < c->n) { /* rpc: a server and its clients */
		snprintf(k, sizeof(k), "%u", i < c->members ? 0 : c->depth);
		if (i >= c->members) {
			argv[2] = "--client";
			argv[7] = "loop";
		}
	}
	snprintf(size, sizeof(size), "%zu", o->size);
	snprintf(warm, sizeof(warm), "%g", o->warmup_s);
	snprintf(dur, sizeof(dur), "%g", o->duration_s);
	snprintf(rate, sizeof(rate), "%.17g", o->rate);
	snprintf(slowf, sizeof(slowf), "%.17g", o->slow_fraction);
	snprintf(slowms, sizeof(slowms), "%.17g", o->slow_ms);
	if (pipe2(in, O_CLOEXEC) != 0)
		return -1;
	if (pipe2(out, O_CLOEXEC) != 0) {
		close(in[0]);
		close(in[1]);
		return -1;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, in[0], 0);
	posix_spawn_file_actions_adddup2(&fa, out[1], 1);
	rv =
	    posix_spawn(&c->kids[i].pid, o->self_exe, &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(in[0]);
	close(out[1]);
	c->kids[i].in_fd = in[1];
	c->kids[i].out_fd = out[0];
	if (rv != 0) {
		c->kids[i].pid = -1;
		fprintf(stderr, "weft-bench: cannot start a node: %s\n",
		        strerror(rv));
		return -1;
	}
	return 0;
}

/* parse_result reads "result k=v ..." into the child. */
static void
parse_result(child *k, const char *line)
{
	const struct {
		const char *key;
		uint64_t *val;
	} keys[] = {
	    {"ops=", &k->ops},         {"errors=", &k->errors},
	    {"vcsw=", &k->vcsw},       {"ivcsw=", &k->ivcsw},
	    {"cpu_us=", &k->cpu_us},   {"rss_kb=", &k->rss_kb},
	    {"threads=", &k->threads}, {"wakeups=", &k->wakeups},
	    {"msgs_in=", &k->msgs_in}, {"sent=", &k->sent},
	    {"replies=", &k->replies}, {"duplicates=", &k->duplicates},
	};
	const char *p;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if ((p = strstr(line, keys[i].key)) != NULL)
			*keys[i].val =
			    strtoull(p + strlen(keys[i].key), NULL, 10);
	if ((p = strstr(line, "first_error=")) != NULL)
		k->first_error = atoi(p + 12);
	k->reported = true;
}

/* read_tick reads "OPS P99" of a progress line. */
static void
read_tick(child *k, const char *text)
{
	char *end;

	k->ticks = strtoull(text, &end, 10);
	k->tick_p99_ns = strtoull(end, NULL, 10);
}

static void
on_line(cluster *c, child *k, const char *line)
{
	if (strncmp(line, "port ", 5) == 0)
		k->port = (uint16_t)atoi(line + 5);
	else if (strncmp(line, "tick ", 5) == 0)
		read_tick(k, line + 5);
	else if (strcmp(line, "addressed") == 0)
		k->addressed = true;
	else if (strcmp(line, "ready") == 0)
		k->ready = true;
	else if (strcmp(line, "done") == 0)
		k->done = true;
	else if (strncmp(line, "result ", 7) == 0)
		parse_result(k, line);
	else if (strncmp(line, "hist", 4) == 0)
		k->hist = wbench_lat_parse(line, c->lat) == 0;
}

/* read_child takes what a node printed and handles its whole lines. */
static void
read_child(cluster *c, child *k)
{
	ssize_t n =
	    read(k->out_fd, k->buf + k->have, LINE_MAX_BYTES - 1 - k->have);
	char *nl, *p;

	if (n <= 0) {
		if (n == 0 || errno != EINTR)
			k->dead = true;
		return;
	}
	k->have += (size_t)n;
	k->buf[k->have] = '\0';
	p = k->buf;
	while ((nl = strchr(p, '\n')) != NULL) {
		*nl = '\0';
		on_line(c, k, p);
		p = nl + 1;
	}
	k->have -= (size_t)(p - k->buf);
	memmove(k->buf, p, k->have);
	if (k->have == LINE_MAX_BYTES - 1)
		k->dead = true; /* a line longer than anything we print */
}

static void
progress(cluster *c)
{
	uint64_t now = wbench_now_ns(), ticks = 0, p99 = 0;

	for (unsigned i = 0; i < c->n; i++) {
		ticks += c->kids[i].ticks;
		if (c->kids[i].tick_p99_ns > p99)
			p99 = c->kids[i].tick_p99_ns;
	}
	if (now - c->last_print_ns < 1000000000u)
		return;
	if (!c->o->quiet && c->last_print_ns != 0)
		fprintf(stderr,
		        "cluster %s P=%u: %.0f ops/s, p99 so far %.3f ms "
		        "(worst process)\n",
		        io_name(c->io), c->n,
		        (double)(ticks - c->last_ticks) * 1e9 /
		            (double)(now - c->last_print_ns),
		        (double)p99 / 1e6);
	c->last_print_ns = now;
	c->last_ticks = ticks;
}

enum phase { LISTENING, ADDRESSED, READY, DONE, REPORTED };

static bool
reached(const child *k, enum phase ph)
{
	switch (ph) {
	case LISTENING:
		return k->port != 0;
	case ADDRESSED:
		return k->addressed;
	case READY:
		return k->ready;
	case DONE:
		return k->done;
	default:
		return k->reported && k->hist;
	}
}

/* pump reads the nodes until every one has reached phase, or one died,
 * or the time is up; returns 0 or -1. */
static int
pump(cluster *c, enum phase ph, uint64_t timeout_ms)
{
	uint64_t deadline = wbench_now_ns() + timeout_ms * 1000000u;
	struct pollfd *pfd = calloc(c->n, sizeof(*pfd));
	int rv = -1;

	while (pfd != NULL && wbench_now_ns() < deadline) {
		unsigned waiting = 0;

		for (unsigned i = 0; i < c->n; i++) {
			child *k = &c->kids[i];

			if (k->dead && !reached(k, ph))
				goto out;
			waiting += !reached(k, ph);
			pfd[i].fd = k->dead ? -1 : k->out_fd;
			pfd[i].events = POLLIN;
		}
		if (waiting == 0) {
			rv = 0;
			break;
		}
		if (poll(pfd, c->n, 200) > 0)
			for (unsigned i = 0; i < c->n; i++)
				if (pfd[i].revents)
					read_child(c, &c->kids[i]);
		progress(c);
	}
out:
	free(pfd);
	return rv;
}

static int
tell_all(cluster *c, const char *line)
{
	size_t len = strlen(line);

	for (unsigned i = 0; i < c->n; i++)
		if (wbench_write_all(c->kids[i].in_fd, line, len) != 0)
			return -1;
	return 0;
}

/* send_ports sends every node the list of every node's port. */
static int
send_ports(cluster *c)
{
	char *line = malloc(16 + 7 * (size_t)c->n);
	size_t off;
	int rv;

	if (line == NULL)
		return -1;
	off = (size_t)sprintf(line, "ports");
	for (unsigned i = 0; i < c->members; i++)
		off += (size_t)sprintf(line + off, " %u", c->kids[i].port);
	sprintf(line + off, "\n");
	rv = tell_all(c, line);
	free(line);
	return rv;
}

void
wbench_cresult_latency(wbench_cresult *r, const weft_histogram *lat)
{
	r->mean_us = weft_histogram_mean(lat) / 1e3;
	r->p50_us = (double)weft_histogram_percentile(lat, 50) / 1e3;
	r->p95_us = (double)weft_histogram_percentile(lat, 95) / 1e3;
	r->p99_us = (double)weft_histogram_percentile(lat, 99) / 1e3;
	r->p999_us = (double)weft_histogram_percentile(lat, 99.9) / 1e3;
	r->max_us = (double)weft_histogram_max(lat) / 1e3;
}

static void
merge(cluster *c, cresult *r)
{
	uint64_t vcsw = 0, ivcsw = 0, cpu = 0, rss = 0, wakeups = 0, in = 0;
	double ops;

	memset(r, 0, sizeof(*r));
	r->io = c->io;
	r->peers = c->n;
	for (unsigned i = 0; i < c->n; i++) {
		const child *k = &c->kids[i];

		r->ops += k->ops;
		r->errors += k->errors;
		r->sent += k->sent;
		r->replies += k->replies;
		r->duplicates += k->duplicates;
		vcsw += k->vcsw;
		ivcsw += k->ivcsw;
		cpu += k->cpu_us;
		rss += k->rss_kb;
		r->threads += k->threads;
		wakeups += k->wakeups;
		in += k->msgs_in;
		if (r->first_error == 0)
			r->first_error = k->first_error;
	}
	/* Every request sent must have been answered exactly once. */
	r->lost = r->sent - r->replies;
	r->errors += r->lost + r->duplicates;
	ops = r->ops ? (double)r->ops : 1;
	r->ops_per_s = (double)r->ops / c->o->duration_s;
	wbench_cresult_latency(r, c->lat);
	r->vcsw_per_op = (double)vcsw / ops;
	r->ivcsw_per_op = (double)ivcsw / ops;
	r->cpu_us_per_op = (double)cpu / ops;
	r->rss_mb = (double)rss / 1024;
	r->rss_mb_per_node = r->rss_mb / c->n;
	r->msgs_per_wakeup = wakeups ? (double)in / (double)wakeups : 0;
}

static void
reap(cluster *c, bool failed)
{
	for (unsigned i = 0; i < c->n; i++) {
		child *k = &c->kids[i];

		if (k->in_fd > 0)
			close(k->in_fd);
		if (k->out_fd > 0)
			close(k->out_fd);
		if (k->pid > 0) {
			if (failed)
				kill(k->pid, SIGKILL);
			waitpid(k->pid, NULL, 0);
		}
		free(k->buf);
	}
}

/* run_phases drives one run from spawning to the nodes' reports. */
static int
run_phases(cluster *c)
{
	uint64_t run_ms =
	    (uint64_t)((c->o->warmup_s + c->o->duration_s) * 1000) + 60000;

	for (unsigned i = 0; i < c->n; i++) {
		if ((c->kids[i].buf = malloc(LINE_MAX_BYTES)) == NULL ||
		    spawn_node(c, i) != 0)
			return -1;
	}
	if (pump(c, LISTENING, 30000 + 500 * (uint64_t)c->n) != 0) {
		fprintf(stderr, "weft-bench: the nodes did not all start\n");
		return -1;
	}
	if (send_ports(c) != 0 || pump(c, ADDRESSED, 30000) != 0 ||
	    tell_all(c, "prime\n") != 0 || pump(c, READY, 150000) != 0) {
		fprintf(stderr,
		        "weft-bench: the nodes did not all get ready\n");
		return -1;
	}
	if (tell_all(c, "go\n") != 0 || pump(c, DONE, run_ms) != 0) {
		fprintf(stderr, "weft-bench: the nodes did not all finish\n");
		return -1;
	}
	if (tell_all(c, "exit\n") != 0 || pump(c, REPORTED, 30000) != 0) {
		fprintf(stderr, "weft-bench: the nodes did not all report\n");
		return -1;
	}
	return tell_all(c, "quit\n");
}

/* run_cluster runs members nodes and, for rpc, clients clients of node
 * 0 with depth requests in flight each. */
static int
run_cluster(const wbench_opts *o, enum wbench_io io, unsigned members,
            unsigned clients, unsigned depth, int read_pct, cresult *r)
{
	cluster c = {.o = o,
	             .io = io,
	             .n = members + clients,
	             .members = members,
	             .depth = depth,
	             .read_pct = read_pct};
	int rv = -1;

	c.kids = calloc(c.n, sizeof(*c.kids));
	if (c.kids == NULL || weft_histogram_new(&c.lat) != 0)
		goto out;
	rv = run_phases(&c);
	if (rv == 0) {
		merge(&c, r);
		r->peers = members;
		r->clients = clients;
		r->depth = depth;
		r->read_pct = read_pct;
	}
out:
	if (c.kids != NULL)
		reap(&c, rv != 0);
	weft_histogram_free(c.lat);
	free(c.kids);
	return rv;
}

static void
print_header(const wbench_opts *o, FILE *out)
{
	if (o->workload == WBENCH_MIX)
		fprintf(out,
		        "weft-bench mix: the replicated key-value service "
		        "on N nodes (--io: weft's service or the\n  "
		        "thread-per-peer baseline's), %u client processes "
		        "(weft's service) x %u requests in flight,\n  %u keys,",
		        o->client_list[0], o->outstanding, o->keys);
	else if (o->workload == WBENCH_RPC)
		fprintf(out,
		        "weft-bench rpc: C client processes (weft's "
		        "service as clients) x D requests in flight each,\n"
		        "  against one server (--io: weft's service or the "
		        "thread-per-peer baseline),");
	else if (o->hosts != NULL && o->clients_given)
		fprintf(out,
		        "weft-bench cluster --hosts: %u local clients x K=%u "
		        "requests in flight, round-robin over %u weftd nodes "
		        "(verb echo),\n  figures of the local clients only;",
		        o->client_list[0], o->outstanding, o->peers);
	else if (o->hosts != NULL)
		fprintf(out,
		        "weft-bench cluster --hosts: %u weftd nodes, each "
		        "keeping K=%u requests in flight to the others (load "
		        "verb),",
		        o->peers, o->outstanding);
	else if (o->netns)
		fprintf(out,
		        "weft-bench cluster --netns: P weftd nodes, each in a "
		        "network namespace of its own\n  (veth pairs to one "
		        "bridge), each keeping K=%u requests in flight to the "
		        "others,",
		        o->outstanding);
	else if (o->rate > 0)
		fprintf(out,
		        "weft-bench cluster: open loop, %g requests/s per node "
		        "(at most K=%u in flight),",
		        o->rate, o->outstanding);
	else
		fprintf(out,
		        "weft-bench cluster: K=%u requests in flight per node,",
		        o->outstanding);
	fprintf(out, " %zu B %s, warm-up %g s, window %g s%s\n", o->size,
	        o->workload == WBENCH_MIX ? "values" : "payloads echoed",
	        o->warmup_s, o->duration_s, o->tls_dir ? ", mutual TLS" : "");
	if (o->slow_fraction > 0)
		fprintf(out,
		        "  %g%% of requests take %g ms more in the handler\n",
		        o->slow_fraction * 100, o->slow_ms);
	fprintf(out,
	        "  %6s %-8s %10s %8s %8s %8s %9s %9s %9s %8s %8s %8s %8s "
	        "%8s %7s %8s %6s\n",
	        o->workload == WBENCH_RPC              ? "CxD"
	        : o->workload == WBENCH_MIX            ? "N:get%"
	        : o->hosts != NULL && o->clients_given ? "CxK"
	                                               : "P",
	        "io", "ops/s", "mean us", "p50 us", "p95 us", "p99 us",
	        "p99.9 us", "max us", "vcsw/op", "ivcs/op", "cpu us/op",
	        "RSS MB", "MB/node", "threads", "msgs/wk", "errors");
}

static void
print_row(const cresult *r, FILE *out)
{
	char label[32];

	if (r->read_pct >= 0)
		snprintf(label, sizeof(label), "%u:%d%%", r->peers,
		         r->read_pct);
	else if (r->clients > 0)
		snprintf(label, sizeof(label), "%ux%u", r->clients, r->depth);
	else
		snprintf(label, sizeof(label), "%u", r->peers);
	fprintf(out,
	        "  %6s %-8s %10.0f %8.1f %8.1f %8.1f %9.1f %9.1f %9.1f %8.3f "
	        "%8.3f %8.2f %8.1f %8.2f %7llu %8.2f %6llu\n",
	        label, io_name(r->io), r->ops_per_s, r->mean_us, r->p50_us,
	        r->p95_us, r->p99_us, r->p999_us, r->max_us, r->vcsw_per_op,
	        r->ivcsw_per_op, r->cpu_us_per_op, r->rss_mb,
	        r->rss_mb_per_node, (unsigned long long)r->threads,
	        r->msgs_per_wakeup, (unsigned long long)r->errors);
	if (r->first_error != 0)
		fprintf(out, "       first error: %s\n",
		        weft_strerror(r->first_error));
}

static void
print_ratio(const cresult *loop, const cresult *thr, FILE *out)
{
	if (thr->ops_per_s <= 0 || loop->p99_us <= 0)
		return;
	fprintf(out,
	        "  %4u loop/threads: %.2fx the op rate, p99 %.2fx lower, "
	        "%.2fx the memory\n",
	        loop->peers, loop->ops_per_s / thr->ops_per_s,
	        thr->p99_us / loop->p99_us,
	        thr->rss_mb > 0 ? loop->rss_mb / thr->rss_mb : 0);
}

static void
json_row(FILE *f, const cresult *r, bool first)
{
	fprintf(f,
	        "%s\n    {\"peers\": %u, \"clients\": %u, \"depth\": %u, "
	        "\"read_pct\": %d, "
	        "\"io\": \"%s\", \"ops\": %llu, "
	        "\"errors\": %llu, \"ops_per_s\": %.1f, \"mean_us\": %.2f, "
	        "\"p50_us\": %.2f, \"p95_us\": %.2f, \"p99_us\": %.2f, "
	        "\"p999_us\": %.2f, \"max_us\": %.2f, \"vcsw_per_op\": %.4f, "
	        "\"ivcsw_per_op\": %.4f, \"cpu_us_per_op\": %.3f, "
	        "\"rss_mb\": %.2f, \"rss_mb_per_node\": %.3f, "
	        "\"threads\": %llu, \"msgs_per_wakeup\": %.3f, "
	        "\"sent\": %llu, \"replies\": %llu, \"lost\": %llu, "
	        "\"duplicates\": %llu}",
	        first ? "" : ",", r->peers, r->clients, r->depth, r->read_pct,
	        io_name(r->io), (unsigned long long)r->ops,
	        (unsigned long long)r->errors, r->ops_per_s, r->mean_us,
	        r->p50_us, r->p95_us, r->p99_us, r->p999_us, r->max_us,
	        r->vcsw_per_op, r->ivcsw_per_op, r->cpu_us_per_op, r->rss_mb,
	        r->rss_mb_per_node, (unsigned long long)r->threads,
	        r->msgs_per_wakeup, (unsigned long long)r->sent,
	        (unsigned long long)r->replies, (unsigned long long)r->lost,
	        (unsigned long long)r->duplicates);
}

static int
write_json(const wbench_opts *o, const cresult *rows, unsigned n)
{
	FILE *f = fopen(o->json_path, "w");

	if (f == NULL) {
		perror(o->json_path);
		return -1;
	}
	fprintf(f,
	        "{\n  \"workload\": \"%s\",\n  \"outstanding\": %u,\n"
	        "  \"size\": %zu,\n  \"warmup_s\": %g,\n  \"duration_s\": %g,"
	        "\n  \"tls\": %s,\n  \"rate\": %g,\n"
	        "  \"slow_fraction\": %g,\n  \"slow_ms\": %g,\n  \"runs\": [",
	        wbench_workload_name(o->workload), o->outstanding, o->size,
	        o->warmup_s, o->duration_s, o->tls_dir ? "true" : "false",
	        o->rate, o->slow_fraction, o->slow_ms);
	for (unsigned i = 0; i < n; i++)
		json_row(f, &rows[i], i == 0);
	fprintf(f, "\n  ]\n}\n");
	return fclose(f) == 0 ? 0 : -1;
}

/* write_csv writes one CSV row per point of the series. */
static int
write_csv(const wbench_opts *o, const cresult *rows, unsigned n)
{
	wbench_csv_row *out = calloc(n ? n : 1, sizeof(*out));
	int rv;

	if (out == NULL)
		return -1;
	for (unsigned i = 0; i < n; i++) {
		const cresult *r = &rows[i];
		wbench_csv_row *c = &out[i];

		wbench_csv_row_init(c, o);
		c->impl = io_name(r->io);
		c->peers = r->peers;
		c->clients = r->clients;
		c->depth =
		    o->workload == WBENCH_CLUSTER ? o->outstanding : r->depth;
		c->read_pct = r->read_pct;
		c->ops_per_s = r->ops_per_s;
		c->mb_per_s = r->ops_per_s * (double)o->size / 1e6;
		c->p50_us = r->p50_us;
		c->p99_us = r->p99_us;
		c->p999_us = r->p999_us;
		c->max_us = r->max_us;
		c->ctxsw_per_op = r->vcsw_per_op + r->ivcsw_per_op;
		c->cpu_us_per_op = r->cpu_us_per_op;
		c->rss_mb = r->rss_mb;
		c->errors = r->errors + r->lost + r->duplicates;
	}
	rv = wbench_csv_write(o->csv_path, out, n);
	free(out);
	return rv;
}

/* md_label is a row's first cell(s): P, C x D, or nodes | gets. */
static void
md_label(const cresult *r, char *label, size_t len)
{
	if (r->read_pct >= 0)
		snprintf(label, len, "%u | %d%%", r->peers, r->read_pct);
	else if (r->clients > 0)
		snprintf(label, len, "%u x %u", r->clients, r->depth);
	else
		snprintf(label, len, "%u", r->peers);
}

/* write_md writes the rows as a Markdown table (docs/BENCHMARKS.md). */
static int
write_md(const wbench_opts *o, const cresult *rows, unsigned n)
{
	FILE *f = fopen(o->md_path, "w");

	if (f == NULL) {
		perror(o->md_path);
		return -1;
	}
	fprintf(f,
	        "| %s | io | ops/s | p50 ms | p99 ms | p99.9 ms | "
	        "ctx-sw/op | CPU us/op | RSS MB (per node) | threads | "
	        "msgs/wake-up | errors |\n",
	        o->workload == WBENCH_RPC   ? "C x D"
	        : o->workload == WBENCH_MIX ? "nodes | gets"
	                                    : "P");
	fprintf(f, "|---|%s---|---|---|---|---|---|---|---|---|---|---|\n",
	        o->workload == WBENCH_MIX ? "---|" : "");
	for (unsigned i = 0; i < n; i++) {
		const cresult *r = &rows[i];
		char label[32];

		md_label(r, label, sizeof(label));
		fprintf(f,
		        "| %s | %s | %.0f | %.2f | %.2f | %.2f | %.3f | %.2f | "
		        "%.1f (%.2f) | %llu | %.1f | %llu |\n",
		        label, io_name(r->io), r->ops_per_s, r->p50_us / 1e3,
		        r->p99_us / 1e3, r->p999_us / 1e3,
		        r->vcsw_per_op + r->ivcsw_per_op, r->cpu_us_per_op,
		        r->rss_mb, r->rss_mb_per_node,
		        (unsigned long long)r->threads, r->msgs_per_wakeup,
		        (unsigned long long)r->errors);
	}
	return fclose(f) == 0 ? 0 : -1;
}

/* write_reports writes the --json, --csv and --md files asked for. */
static int
write_reports(const wbench_opts *o, const cresult *rows, unsigned n)
{
	int rv = 0;

	if (o->json_path && write_json(o, rows, n) != 0)
		rv = -1;
	if (o->csv_path && write_csv(o, rows, n) != 0)
		rv = -1;
	if (o->md_path && write_md(o, rows, n) != 0)
		rv = -1;
	return rv;
}

/* plot_series writes one I/O model's points as gnuplot inline data. */
static void
plot_series(FILE *gp, const char *name, const cresult *rows, unsigned n,
            enum wbench_io io)
{
	fprintf(gp, "$%s << EOD\n", name);
	for (unsigned i = 0; i < n; i++)
		if (rows[i].io == io)
			fprintf(gp, "%u %.1f %.3f\n", rows[i].peers,
			        rows[i].ops_per_s, rows[i].p99_us / 1e3);
	fprintf(gp, "EOD\n");
}

/* on_path is true when an executable called name is on $PATH. */
static bool
on_path(const char *name)
{
	const char *path = getenv("PATH"), *end;
	char file[4096];

	for (; path != NULL && *path != '\0'; path = *end ? end + 1 : end) {
		end = strchrnul(path, ':');
		if (snprintf(file, sizeof(file), "%.*s/%s", (int)(end - path),
		             path, name) < (int)sizeof(file) &&
		    access(file, X_OK) == 0)
			return true;
	}
	return false;
}

/* plot draws op rate and p99 against the number of nodes, both I/O
 * models, with gnuplot. gnuplot is optional: without it the figures are
 * still printed and written, and no plot is made. */
static int
plot(const wbench_opts *o, const cresult *rows, unsigned n)
{
	FILE *gp;

	if (!on_path("gnuplot")) {
		fprintf(stderr,
		        "weft-bench: --plot %s: gnuplot is not "
		        "installed (Debian package gnuplot-nox, or "
		        "scripts/install-deps.sh --all): no plot made\n",
		        o->plot_path);
		return 0;
	}
	if ((gp = popen("gnuplot", "w")) == NULL) {
		fprintf(stderr, "weft-bench: cannot run gnuplot\n");
		return -1;
	}
	plot_series(gp, "loop", rows, n, WBENCH_IO_LOOP);
	plot_series(gp, "threads", rows, n, WBENCH_IO_THREADS);
	fprintf(gp,
	        "set terminal pngcairo size 1100,450 font ',10'\n"
	        "set output '%s'\n"
	        "set multiplot layout 1,2 title 'weft-bench cluster: K=%u in "
	        "flight per node, %zu B%s'\n"
	        "set logscale x 2\nset xlabel 'nodes (P)'\nset grid\n"
	        "set key top right\nset ylabel 'ops/s'\nset yrange [0:*]\n"
	        "set format y '%%.1s%%c'\n"
	        "plot $loop using 1:2 with linespoints lw 2 title "
	        "'weft (event loops)', $threads using 1:2 with linespoints "
	        "lw 2 title 'thread-per-peer'\n"
	        "set logscale y\nset ylabel 'p99 latency (ms)'\n"
	        "set format y '%%g'\n"
	        "set yrange [*:*]\nset key top left\n"
	        "plot $loop using 1:3 with linespoints lw 2 title "
	        "'weft (event loops)', $threads using 1:3 with linespoints "
	        "lw 2 title 'thread-per-peer'\n"
	        "unset multiplot\n",
	        o->plot_path, o->outstanding, o->size,
	        o->tls_dir ? ", TLS" : "");
	if (pclose(gp) != 0) {
		fprintf(stderr, "weft-bench: gnuplot failed\n");
		return -1;
	}
	return 0;
}

/* The most rows one invocation reports. */
#define MAX_ROWS 128

/* One point of a series, run on each I/O model of --io. */
typedef struct point {
	unsigned members, clients, depth;
	int read_pct; /* mix, or -1 */
} point;

/* run_series runs every point on each I/O model of --io, printing a row
 * per run (and for cluster the loop/threads ratio), then writes the
 * reports. Returns the exit status. */
static int
run_series(const wbench_opts *o, const point *pts, unsigned npts)
{
	cresult rows[MAX_ROWS];
	unsigned n = 0;
	int failed = 0;

	print_header(o, stdout);
	for (unsigned i = 0; i < npts; i++)
		for (int io = WBENCH_IO_LOOP; io <= WBENCH_IO_THREADS; io++) {
			cresult *r = &rows[n];

			if (!(o->io & io) || n == MAX_ROWS)
				continue;
			if (run_cluster(o, (enum wbench_io)io, pts[i].members,
			                pts[i].clients, pts[i].depth,
			                pts[i].read_pct, r) != 0) {
				failed = 1;
				continue;
			}
			/* Failed requests are a result; a request answered
			 * twice or never is a broken run. */
			failed |= r->lost != 0 || r->duplicates != 0;
			print_row(r, stdout);
			if (o->workload == WBENCH_CLUSTER &&
			    io == WBENCH_IO_THREADS && n > 0 &&
			    rows[n - 1].peers == r->peers &&
			    rows[n - 1].io == WBENCH_IO_LOOP)
				print_ratio(&rows[n - 1], r, stdout);
			fflush(stdout);
			n++;
		}
	if (write_reports(o, rows, n) != 0 ||
	    (o->plot_path && o->workload == WBENCH_CLUSTER &&
	     plot(o, rows, n) != 0))
		failed = 1;
	return failed;
}

/* netns_run: cluster --netns, weftd nodes in network namespaces. */
static int
netns_run(const wbench_opts *o)
{
	cresult rows[16];
	unsigned n = 0;
	int rv, failed = 0;

	print_header(o, stdout);
	rv = wbench_netns_run(o, rows, &n);
	for (unsigned i = 0; i < n; i++) {
		failed |= rows[i].lost != 0 || rows[i].duplicates != 0;
		print_row(&rows[i], stdout);
	}
	if (rv != 0)
		return rv == WBENCH_SKIPPED ? rv : 1;
	if (write_reports(o, rows, n) != 0 ||
	    (o->plot_path && plot(o, rows, n) != 0))
		failed = 1;
	return failed;
}

/* hosts_run: the cluster workload on the --hosts nodes (weftd), or with
 * --clients, C local clients against them. */
static int
hosts_run(const wbench_opts *o)
{
	cresult r;
	int failed = 0;

	print_header(o, stdout);
	if (o->clients_given) {
		if (run_cluster(o, WBENCH_IO_LOOP, 0, o->client_list[0],
		                o->outstanding, -1, &r) != 0)
			return 1;
		r.peers = o->peers;
	} else if (wbench_mesh_run(o, &r) != 0) {
		return 1;
	}
	failed |= r.lost != 0 || r.duplicates != 0;
	print_row(&r, stdout);
	fflush(stdout);
	if (write_reports(o, &r, 1) != 0)
		failed = 1;
	return failed;
}

int
wbench_cluster_run(const wbench_opts *o)
{
	point pts[MAX_ROWS];
	unsigned n = 0;

	if (o->hosts != NULL)
		return hosts_run(o);
	if (o->netns)
		return netns_run(o);
	if (o->workload == WBENCH_RPC) /* one server, C clients x D */
		for (unsigned c = 0; c < o->nclient_list; c++)
			for (unsigned d = 0; d < o->ndepth_list; d++)
				pts[n++] = (point){1, o->client_list[c],
				                   o->depth_list[d], -1};
	else if (o->workload == WBENCH_MIX) /* N members, C clients */
		for (unsigned p = 0; p < o->npeer_list; p++)
			for (unsigned m = 0; m < o->nmix_list; m++)
				pts[n++] = (point){
				    o->peer_list[p], o->client_list[0],
				    o->outstanding, (int)o->mix_list[m]};
	else /* P nodes asking each other */
		for (unsigned p = 0; p < o->npeer_list; p++)
			pts[n++] = (point){o->peer_list[p], 0, 0, -1};
	return run_series(o, pts, n);
}
