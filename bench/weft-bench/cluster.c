/* SPDX-License-Identifier: MIT */
/*
 * cluster.c: the coordinator of the cluster, rpc and mix workloads. It
 * starts the node and client processes (cnode.c, rpcclient.c for
 * synchronous rpc clients, pipeserver.c and pipeclient.c for rpc --impl
 * pipeline) on loopback, tells each the others' ports,
 * relays their progress once a second while they run, and merges their
 * figures: op rate, latency percentiles, context switches and CPU per
 * op, memory, threads. creport.c prints and writes them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/histogram.h>
#include <weft/kv.h>

#include "wbench.h"

/* A node or client process, as its lines describe it. */
typedef struct child {
	uint16_t port;
	uint64_t ticks, tick_p99_ns; /* the last progress line */
	bool addressed, ready, done, reported, hist;
	uint64_t ops, errors, vcsw, ivcsw, cpu_us, rss_kb, threads;
	uint64_t wakeups, msgs_in, sent, replies, duplicates;
	uint64_t gets, puts; /* mix: replies in the window, by verb */
	/* mix: a member's quorum and all gets coordinated, whole run */
	uint64_t coordinated;
	uint64_t large;      /* --large-share: large replies in the window */
	uint64_t body, wire; /* compressed bodies, both ways, whole run */
	uint64_t up_cpu_us, up_hs, up_resumed; /* start-up */
	bool hist_get, hist_put;
	int first_error;
} child;

typedef wbench_cresult cresult;

/* One point of a series, run on each I/O model of --io. */
typedef struct point {
	unsigned members, clients, depth;
	int read_pct; /* mix, or -1 */
	bool sync;    /* rpc --client sync */
	bool pool;    /* rpc --handlers pool */
} point;

/* What serves a run: an I/O model of --io on weft's messaging service,
 * or for rpc --impl pipeline the server of pipeserver.c. */
typedef struct server_kind {
	enum wbench_io io;
	bool pipeline;
} server_kind;

typedef struct cluster {
	const wbench_opts *o;
	enum wbench_io io;
	bool pipeline; /* rpc --impl pipeline */
	point pt;
	unsigned n;       /* processes */
	unsigned members; /* the first ones are nodes; the rest clients */
	child *kids;
	wbench_procs g;
	weft_histogram *lat, *lat_get, *lat_put;
	weft_histogram *lat_large; /* --large-share: the large requests' */
	uint64_t in_flight;        /* requests the processes keep in all */
	char label[64];            /* the point, for progress lines */
	bool running;              /* between "go" and every "done" */
	uint64_t last_print_ns, last_ticks;
	double up_ms; /* from "prime" to every node "ready" */
	/* rpc --probe: the last process is the probe client, and the
	 * members' and the probe's round trips are kept apart from the
	 * flooding clients' (lat). */
	unsigned probes;
	weft_histogram *lat_probe, *lat_members;
} cluster;

/* What rpc --probe measures in one run. */
typedef struct probe_figs {
	double p50_us, p99_us;               /* the probe client's */
	double member_p50_us, member_p99_us; /* the members' requests */
	uint64_t probe_ops, member_ops, member_errors, flood_ops;
	uint64_t flood_errors;     /* refused past --flood-cap, mostly */
	uint64_t lost, duplicates; /* every process's */
} probe_figs;

const char *
wbench_io_name(enum wbench_io io)
{
	return io == WBENCH_IO_THREADS ? "threads" : "loop";
}

const char *
wbench_consistency_name(unsigned cl)
{
	return cl == WEFT_KV_READ_ALL      ? "all"
	       : cl == WEFT_KV_READ_QUORUM ? "quorum"
	                                   : "one";
}

const char *
wbench_server_name(enum wbench_io io, bool pipeline)
{
	return pipeline ? "pipeline" : wbench_io_name(io);
}

/* node_depth is the requests member or client i keeps in flight. */
static unsigned
node_depth(const cluster *c, unsigned i)
{
	bool client = i >= c->members;
	bool probe = c->probes > 0 && i == c->n - 1;

	/* A probe run: the probe and each member keep one request in
	 * flight, the members' traffic standing for replication. */
	if (c->probes > 0 && (probe || !client))
		return 1;
	return c->members == c->n ? c->o->outstanding
	       : client           ? c->pt.depth
	                          : 0;
}

/* wire_argv adds the wire and payload options, those not at their
 * defaults: every process of weft's service takes them (the baseline
 * ignores the compression). */
static void
wire_argv(const cluster *c, unsigned i, wbench_argv *a)
{
	const wbench_opts *o = c->o;

	if (o->compression != 0)
		wbench_argv_addf(a, "--compression", "%s",
		                 wbench_compression_name(o->compression));
	if (o->payload != WBENCH_PAYLOAD_PATTERN)
		wbench_argv_addf(a, "--payload", "%s",
		                 wbench_payload_name(o->payload));
	if (o->large_share > 0 && i < c->members) {
		wbench_argv_addf(a, "--large-share", "%.17g", o->large_share);
		wbench_argv_addf(a, "--large-size", "%zu", o->large_size);
	}
	wbench_argv_addf(a, "--in-flight", "%llu",
	                 (unsigned long long)c->in_flight);
}

/* node_argv builds the arguments of member or client i. */
static void
node_argv(const cluster *c, unsigned i, wbench_argv *a)
{
	const wbench_opts *o = c->o;
	bool client = i >= c->members;
	bool sync = client && c->pt.sync;
	bool probe = c->probes > 0 && i == c->n - 1;

	wbench_argv_init(a, o->self_exe, sync ? "rpc-client" : "cluster-node");
	if (client)
		wbench_argv_addf(a, "--client-index", "%u", i - c->members);
	else
		wbench_argv_addf(a, "--node", "%u", i);
	wbench_argv_addf(a, "--peers", "%u", o->hosts ? o->peers : c->members);
	/* Clients are always weft's service: only the members' I/O model
	 * changes between runs. */
	wbench_argv_addf(a, "--io", "%s",
	                 wbench_io_name(client ? WBENCH_IO_LOOP : c->io));
	wbench_argv_addf(a, "--outstanding", "%u", node_depth(c, i));
	wbench_argv_addf(a, "--size", "%zu", o->size);
	wbench_argv_addf(a, "--warmup", "%g", o->warmup_s);
	wbench_argv_addf(a, "--duration", "%g", o->duration_s);
	wbench_argv_addf(a, "--seed", "%llu", (unsigned long long)o->seed);
	if (!sync) {
		wbench_argv_addf(a, "--rate", "%.17g", o->rate);
		wbench_argv_addf(a, "--slow-fraction", "%.17g",
		                 o->slow_fraction);
		wbench_argv_addf(a, "--slow-ms", "%.17g", o->slow_ms);
	}
	if (c->probes > 0 && !client)
		wbench_argv_add(a, "--probe");
	if (c->probes > 0 && client && !probe && o->flood_idle)
		wbench_argv_add(a, "--flood-idle");
	/* The members serve the flood's verb; the flooding clients call it. */
	if (c->probes > 0 && !probe && o->flood_cap >= 0)
		wbench_argv_addf(a, "--flood-cap", "%d", o->flood_cap);
	if (c->pt.pool && !client)
		wbench_argv_addf(a, "--handlers", "pool");
	if (c->pipeline)
		wbench_argv_addf(a, "--impl", "pipeline");
	if (o->tls_dir != NULL)
		wbench_argv_addf(a, "--tls", "%s", o->tls_dir);
	if (c->pt.read_pct < 0)
		wire_argv(c, i, a);
	if (c->pt.read_pct >= 0) { /* mix: key-value members and clients */
		wbench_argv_add(a, "--kv");
		wbench_argv_addf(a, "--read-pct", "%d", c->pt.read_pct);
		wbench_argv_addf(a, "--keys", "%u", o->keys);
		if (client && o->sessions > 0)
			wbench_argv_addf(a, "--sessions", "%u", o->sessions);
		if (client && o->consistency != 0)
			wbench_argv_addf(
			    a, "--consistency", "%s",
			    wbench_consistency_name(o->consistency));
	}
	if (o->hosts != NULL) { /* nodes elsewhere: clients only */
		wbench_argv_addf(a, "--hosts", "%s", o->hosts);
		if (o->cluster_name != NULL)
			wbench_argv_addf(a, "--cluster-name", "%s",
			                 o->cluster_name);
	}
}

/* parse_result reads "result k=v ..." into the child. */
static void
parse_result(child *k, const char *line)
{
	const struct {
		const char *key;
		uint64_t *val;
	} keys[] = {
	    {" ops=", &k->ops},
	    {" errors=", &k->errors},
	    {" vcsw=", &k->vcsw},
	    {" ivcsw=", &k->ivcsw},
	    {" cpu_us=", &k->cpu_us},
	    {" rss_kb=", &k->rss_kb},
	    {" threads=", &k->threads},
	    {" wakeups=", &k->wakeups},
	    {" msgs_in=", &k->msgs_in},
	    {" sent=", &k->sent},
	    {" replies=", &k->replies},
	    {" duplicates=", &k->duplicates},
	    {" gets=", &k->gets},
	    {" puts=", &k->puts},
	    {" large=", &k->large},
	    {" body=", &k->body},
	    {" wire=", &k->wire},
	    {" coordinated=", &k->coordinated},
	    {" up_cpu_us=", &k->up_cpu_us},
	    {" up_hs=", &k->up_hs},
	    {" up_resumed=", &k->up_resumed},
	};
	const char *p;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if ((p = strstr(line, keys[i].key)) != NULL)
			*keys[i].val =
			    strtoull(p + strlen(keys[i].key), NULL, 10);
	if ((p = strstr(line, " first_error=")) != NULL)
		k->first_error = atoi(p + 13);
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

/* read_hist reads a histogram line: "hist", or "hist-get"/"hist-put" of
 * a mix client's gets and puts. */
static void
read_hist(cluster *c, child *k, const char *line)
{
	unsigned i = (unsigned)(k - c->kids);

	if (c->probes > 0 && (i == c->n - 1 || i < c->members)) {
		k->hist =
		    wbench_hist_parse(line, i < c->members ? c->lat_members
		                                           : c->lat_probe) == 0;
		return;
	}
	if (strncmp(line, "hist-large", 10) == 0)
		wbench_hist_parse(line, c->lat_large);
	else if (strncmp(line, "hist-get", 8) == 0)
		k->hist_get = wbench_hist_parse(line, c->lat_get) == 0;
	else if (strncmp(line, "hist-put", 8) == 0)
		k->hist_put = wbench_hist_parse(line, c->lat_put) == 0;
	else
		k->hist = wbench_hist_parse(line, c->lat) == 0;
}

static void
on_line(wbench_procs *g, unsigned i, const char *line)
{
	cluster *c = g->arg;
	child *k = &c->kids[i];

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
		read_hist(c, k, line);
}

enum phase { LISTENING, ADDRESSED, READY, DONE, REPORTED };

static bool
reached(const wbench_procs *g, unsigned i, int ph)
{
	const cluster *c = g->arg;
	const child *k = &c->kids[i];

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

/* progress prints, once a second while the processes run, the op rate
 * since the last line and the worst process's p99 so far. */
static void
progress(wbench_procs *g)
{
	cluster *c = g->arg;
	uint64_t now = wbench_now_ns(), ticks = 0, p99 = 0;

	if (!c->running)
		return;
	for (unsigned i = 0; i < c->n; i++) {
		ticks += c->kids[i].ticks;
		if (c->kids[i].tick_p99_ns > p99)
			p99 = c->kids[i].tick_p99_ns;
	}
	if (c->last_print_ns == 0)
		c->last_print_ns = now;
	if (now - c->last_print_ns < 1000000000u)
		return;
	/* No new tick: the processes are past their window. */
	if (!c->o->quiet && ticks != c->last_ticks)
		fprintf(stderr,
		        "%s %s %s: %.0f ops/s, p99 so far %.3f ms (worst "
		        "process)\n",
		        wbench_workload_name(c->o->workload),
		        wbench_server_name(c->io, c->pipeline), c->label,
		        (double)(ticks - c->last_ticks) * 1e9 /
		            (double)(now - c->last_print_ns),
		        (double)p99 / 1e6);
	c->last_print_ns = now;
	c->last_ticks = ticks;
}

/* send_ports sends every process the list of every member's port. */
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
	rv = wbench_procs_tell(&c->g, 0, c->n, line);
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

/* merge_server keeps, for rpc, the server's own batching and CPU. */
static void
merge_server(const cluster *c, cresult *r)
{
	const child *s = &c->kids[0];

	if (c->members != 1 || c->n == 1 || r->ops == 0)
		return;
	r->srv_cpu_us_per_op = (double)s->cpu_us / (double)r->ops;
	r->srv_msgs_per_wakeup =
	    s->wakeups ? (double)s->msgs_in / (double)s->wakeups : 0;
}

/* merge_verbs splits a mix run's figures into gets and puts. */
static void
merge_verbs(const cluster *c, cresult *r)
{
	for (unsigned i = c->members; i < c->n; i++) {
		r->gets += c->kids[i].gets;
		r->puts += c->kids[i].puts;
	}
	for (unsigned i = 0; i < c->members; i++)
		r->reads_coordinated += c->kids[i].coordinated;
	r->get_ops_per_s = (double)r->gets / c->o->duration_s;
	r->put_ops_per_s = (double)r->puts / c->o->duration_s;
	r->get_p99_us = (double)weft_histogram_percentile(c->lat_get, 99) / 1e3;
	r->put_p99_us = (double)weft_histogram_percentile(c->lat_put, 99) / 1e3;
	r->get_p50_us = (double)weft_histogram_percentile(c->lat_get, 50) / 1e3;
	r->put_p50_us = (double)weft_histogram_percentile(c->lat_put, 50) / 1e3;
}

/* merge_wire fills the figures of the wire: the payload bytes moved
 * (one payload per request, as the CSV's MB/s counts them), the
 * members' CPU per MB of them (the server's, in rpc), the compression
 * ratio, and with --large-share the small and large requests' apart;
 * then lat takes in the large requests' round trips too. */
static void
merge_wire(cluster *c, cresult *r)
{
	const wbench_opts *o = c->o;
	uint64_t cpu = 0, body = 0, wire = 0;
	double mb;

	for (unsigned i = 0; i < c->n; i++) {
		r->large_ops += c->kids[i].large;
		body += c->kids[i].body;
		wire += c->kids[i].wire;
		if (i < c->members)
			cpu += c->kids[i].cpu_us;
	}
	mb = ((double)(r->ops - r->large_ops) * (double)o->size +
	      (double)r->large_ops * (double)o->large_size) /
	     1e6;
	r->mb_per_s = mb / o->duration_s;
	r->cpu_us_per_mb = mb > 0 ? (double)cpu / mb : 0;
	r->wire_ratio = wire > 0 ? (double)body / (double)wire : 0;
	if (o->large_share <= 0)
		return;
	r->small_p50_us = (double)weft_histogram_percentile(c->lat, 50) / 1e3;
	r->small_p99_us = (double)weft_histogram_percentile(c->lat, 99) / 1e3;
	r->large_p50_us =
	    (double)weft_histogram_percentile(c->lat_large, 50) / 1e3;
	r->large_p99_us =
	    (double)weft_histogram_percentile(c->lat_large, 99) / 1e3;
	weft_histogram_merge(c->lat, c->lat_large);
}

static void
merge(cluster *c, cresult *r)
{
	uint64_t vcsw = 0, ivcsw = 0, cpu = 0, rss = 0, wakeups = 0, in = 0;
	uint64_t member_rss = 0;
	double ops;

	memset(r, 0, sizeof(*r));
	r->io = c->io;
	r->pipeline = c->pipeline;
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
		if (i < c->members) {
			member_rss += k->rss_kb;
			r->member_threads += k->threads;
		}
		r->threads += k->threads;
		wakeups += k->wakeups;
		in += k->msgs_in;
		r->up_cpu_ms += (double)k->up_cpu_us / 1e3;
		r->up_handshakes += k->up_hs;
		r->up_resumed += k->up_resumed;
		if (r->first_error == 0)
			r->first_error = k->first_error;
	}
	/* Every request sent must have been answered exactly once. */
	r->lost = r->sent - r->replies;
	r->errors += r->lost + r->duplicates;
	ops = r->ops ? (double)r->ops : 1;
	r->ops_per_s = (double)r->ops / c->o->duration_s;
	merge_wire(c, r);
	wbench_cresult_latency(r, c->lat);
	r->vcsw_per_op = (double)vcsw / ops;
	r->ivcsw_per_op = (double)ivcsw / ops;
	r->cpu_us_per_op = (double)cpu / ops;
	r->rss_mb = (double)rss / 1024;
	r->rss_mb_per_node = r->rss_mb / c->n;
	r->member_rss_mb = (double)member_rss / 1024 / c->members;
	r->client_rss_mb = (double)(rss - member_rss) / 1024;
	r->msgs_per_wakeup = wakeups ? (double)in / (double)wakeups : 0;
	merge_server(c, r);
	if (c->pt.read_pct >= 0)
		merge_verbs(c, r);
}

/* run_phases drives one run from spawning to the nodes' reports. */
static int
run_phases(cluster *c)
{
	uint64_t run_ms =
	    (uint64_t)((c->o->warmup_s + c->o->duration_s) * 1000) + 60000;
	wbench_procs *g = &c->g;
	uint64_t start_ns;
	wbench_argv a;

	for (unsigned i = 0; i < c->n; i++) {
		node_argv(c, i, &a);
		if (wbench_procs_spawn(g, i, &a) != 0)
			return -1;
	}
	if (wbench_procs_pump(g, LISTENING, 0, c->n,
	                      30000 + 500 * (uint64_t)c->n) != 0) {
		fprintf(stderr, "weft-bench: the nodes did not all start\n");
		return -1;
	}
	if (send_ports(c) != 0 ||
	    wbench_procs_pump(g, ADDRESSED, 0, c->n, 30000) != 0) {
		fprintf(stderr,
		        "weft-bench: the nodes did not all get ready\n");
		return -1;
	}
	/* Start to all up: every node dials every other one (a TLS
	 * handshake each, with --tls) and hears back once. */
	start_ns = weft_now_ns();
	if (wbench_procs_tell(g, 0, c->n, "prime\n") != 0 ||
	    wbench_procs_pump(g, READY, 0, c->n, 150000) != 0) {
		fprintf(stderr,
		        "weft-bench: the nodes did not all get ready\n");
		return -1;
	}
	c->up_ms = (double)(weft_now_ns() - start_ns) / 1e6;
	c->running = true;
	if (wbench_procs_tell(g, 0, c->n, "go\n") != 0 ||
	    wbench_procs_pump(g, DONE, 0, c->n, run_ms) != 0) {
		fprintf(stderr, "weft-bench: the nodes did not all finish\n");
		return -1;
	}
	c->running = false;
	if (wbench_procs_tell(g, 0, c->n, "exit\n") != 0 ||
	    wbench_procs_pump(g, REPORTED, 0, c->n, 30000) != 0) {
		fprintf(stderr, "weft-bench: the nodes did not all report\n");
		return -1;
	}
	return wbench_procs_tell(g, 0, c->n, "quit\n");
}

/* point_label names a point as its row does: P, CxD or N:get%. */
static void
point_label(const point *p, char *out, size_t len)
{
	if (p->read_pct >= 0)
		snprintf(out, len, "%u:%d%%", p->members, p->read_pct);
	else if (p->clients > 0)
		snprintf(out, len, "%ux%u%s%s", p->clients, p->depth,
		         p->sync ? " sync" : "", p->pool ? " pool" : "");
	else
		snprintf(out, len, "P=%u", p->members);
}

static int
cluster_init(cluster *c)
{
	c->kids = calloc(c->n, sizeof(*c->kids));
	if (c->kids == NULL || wbench_procs_init(&c->g, c->n) != 0 ||
	    weft_histogram_new(&c->lat) != 0 ||
	    weft_histogram_new(&c->lat_get) != 0 ||
	    weft_histogram_new(&c->lat_put) != 0 ||
	    weft_histogram_new(&c->lat_large) != 0 ||
	    weft_histogram_new(&c->lat_probe) != 0 ||
	    weft_histogram_new(&c->lat_members) != 0)
		return -1;
	c->g.on_line = on_line;
	c->g.reached = reached;
	c->g.progress = progress;
	c->g.arg = c;
	point_label(&c->pt, c->label, sizeof(c->label));
	return 0;
}

/* probe_merge fills pf from a probe run. */
static void
probe_merge(const cluster *c, const cresult *r, probe_figs *pf)
{
	memset(pf, 0, sizeof(*pf));
	pf->p50_us = (double)weft_histogram_percentile(c->lat_probe, 50) / 1e3;
	pf->p99_us = (double)weft_histogram_percentile(c->lat_probe, 99) / 1e3;
	pf->member_p50_us =
	    (double)weft_histogram_percentile(c->lat_members, 50) / 1e3;
	pf->member_p99_us =
	    (double)weft_histogram_percentile(c->lat_members, 99) / 1e3;
	pf->probe_ops = c->kids[c->n - 1].ops;
	for (unsigned i = 0; i < c->members; i++) {
		pf->member_ops += c->kids[i].ops;
		pf->member_errors += c->kids[i].errors;
	}
	for (unsigned i = c->members; i + 1 < c->n; i++) {
		pf->flood_ops += c->kids[i].ops;
		pf->flood_errors += c->kids[i].errors;
	}
	pf->lost = r->lost;
	pf->duplicates = r->duplicates;
}

/* run_point runs one point on one kind of server into r; with pf, a
 * probe run into pf too. */
static int
run_point(const wbench_opts *o, server_kind kind, const point *pt, cresult *r,
          probe_figs *pf)
{
	cluster c = {
	    .o = o, .io = kind.io, .pipeline = kind.pipeline, .pt = *pt};
	int rv = -1;

	c.probes = pf != NULL ? 1 : 0;
	c.n = pt->members + pt->clients + c.probes;
	c.members = pt->members;
	for (unsigned i = 0; i < c.n; i++)
		c.in_flight += node_depth(&c, i);
	if (cluster_init(&c) == 0)
		rv = run_phases(&c);
	if (rv == 0) {
		merge(&c, r);
		r->up_ms = c.up_ms;
		r->peers = pt->members;
		r->clients = pt->clients;
		r->depth = pt->depth;
		r->read_pct = pt->read_pct;
		r->sync = pt->sync;
		r->pool = pt->pool;
		if (pf != NULL)
			probe_merge(&c, r, pf);
	}
	wbench_procs_reap(&c.g, rv != 0);
	weft_histogram_free(c.lat_probe);
	weft_histogram_free(c.lat_members);
	weft_histogram_free(c.lat);
	weft_histogram_free(c.lat_get);
	weft_histogram_free(c.lat_put);
	weft_histogram_free(c.lat_large);
	free(c.kids);
	return rv;
}

/* The most rows one invocation reports. */
#define MAX_ROWS 128

/* server_kinds lists what serves each point, in order: the I/O models
 * of --io on weft's service, then rpc's pipeline server. */
static unsigned
server_kinds(const wbench_opts *o, server_kind kinds[3])
{
	bool rpc = o->workload == WBENCH_RPC;
	unsigned n = 0;

	for (int io = WBENCH_IO_LOOP; io <= WBENCH_IO_THREADS; io++)
		if ((o->io & io) && (!rpc || (o->rpc_impls & WBENCH_RPC_MSVC)))
			kinds[n++] = (server_kind){(enum wbench_io)io, false};
	if (rpc && (o->rpc_impls & WBENCH_RPC_PIPELINE))
		kinds[n++] = (server_kind){WBENCH_IO_LOOP, true};
	return n;
}

static int
cmp_ops(const void *a, const void *b)
{
	double x = ((const cresult *)a)->ops_per_s;
	double y = ((const cresult *)b)->ops_per_s;

	return (x > y) - (x < y);
}

/* run_repeated runs one point --repeat times into r: the run of the
 * median op rate, with the spread of all. A failed run fails the point;
 * lost or duplicated answers in any run are kept in r. */
static int
run_repeated(const wbench_opts *o, server_kind kind, const point *pt,
             cresult *r)
{
	cresult runs[64];
	unsigned n = o->repeat < 64 ? o->repeat : 64;
	uint64_t lost = 0, dups = 0;

	if (n <= 1)
		return run_point(o, kind, pt, r, NULL);
	for (unsigned i = 0; i < n; i++) {
		if (run_point(o, kind, pt, &runs[i], NULL) != 0)
			return -1;
		lost += runs[i].lost;
		dups += runs[i].duplicates;
	}
	qsort(runs, n, sizeof(runs[0]), cmp_ops);
	*r = runs[n / 2];
	r->runs = n;
	r->lost = lost;
	r->duplicates = dups;
	r->ops_lo = runs[0].ops_per_s;
	r->ops_hi = runs[n - 1].ops_per_s;
	r->p99_lo = r->p99_hi = runs[0].p99_us;
	for (unsigned i = 1; i < n; i++) {
		if (runs[i].p99_us < r->p99_lo)
			r->p99_lo = runs[i].p99_us;
		if (runs[i].p99_us > r->p99_hi)
			r->p99_hi = runs[i].p99_us;
	}
	return 0;
}

/* run_series runs every point on each kind of server, printing a row
 * per point (and for cluster the loop/threads ratio), then writes the
 * reports. Returns the exit status. */
static int
run_series(const wbench_opts *o, const point *pts, unsigned npts)
{
	cresult rows[MAX_ROWS];
	server_kind kinds[3];
	unsigned n = 0, nkinds = server_kinds(o, kinds);
	int failed = 0;

	wbench_cprint_header(o, stdout);
	for (unsigned i = 0; i < npts; i++)
		for (unsigned k = 0; k < nkinds; k++) {
			cresult *r = &rows[n];
			enum wbench_io io = kinds[k].io;

			if (n == MAX_ROWS)
				continue;
			if (run_repeated(o, kinds[k], &pts[i], r) != 0) {
				failed = 1;
				continue;
			}
			/* Failed requests are a result; a request answered
			 * twice or never, or no answer at all, is a broken
			 * run. */
			failed |=
			    r->lost != 0 || r->duplicates != 0 || r->ops == 0;
			/* mix --consistency quorum or all: every get of the
			 * window was read so (the members count the warm-up's
			 * too). */
			failed |= o->consistency >= WEFT_KV_READ_QUORUM &&
			          r->reads_coordinated < r->gets;
			wbench_cprint_row(o, r, stdout);
			if (o->workload == WBENCH_CLUSTER &&
			    io == WBENCH_IO_THREADS && n > 0 &&
			    rows[n - 1].peers == r->peers &&
			    rows[n - 1].io == WBENCH_IO_LOOP)
				wbench_cprint_ratio(&rows[n - 1], r, stdout);
			fflush(stdout);
			n++;
		}
	if (wbench_cwrite_reports(o, rows, n) != 0 ||
	    (o->plot_path && wbench_cplot(o, rows, n) != 0))
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

	wbench_cprint_header(o, stdout);
	rv = wbench_netns_run(o, rows, &n);
	for (unsigned i = 0; i < n; i++) {
		failed |= rows[i].lost != 0 || rows[i].duplicates != 0 ||
		          rows[i].ops == 0;
		wbench_cprint_row(o, &rows[i], stdout);
	}
	if (rv != 0)
		return rv == WBENCH_SKIPPED ? rv : 1;
	if (wbench_cwrite_reports(o, rows, n) != 0 ||
	    (o->plot_path && wbench_cplot(o, rows, n) != 0))
		failed = 1;
	return failed;
}

/* hosts_run: the cluster workload on the --hosts nodes (weftd), or with
 * --clients, C local clients against them; mix: C local clients of the
 * nodes' key-value service. */
static int
hosts_run(const wbench_opts *o)
{
	cresult r;
	int failed = 0;

	wbench_cprint_header(o, stdout);
	if (o->clients_given || o->workload == WBENCH_MIX) {
		point pt = {0,
		            o->client_list[0],
		            o->outstanding,
		            o->workload == WBENCH_MIX ? (int)o->mix_list[0]
		                                      : -1,
		            false,
		            false};

		if (run_point(o, (server_kind){WBENCH_IO_LOOP, false}, &pt, &r,
		              NULL) != 0)
			return 1;
		r.peers = o->peers;
	} else if (wbench_mesh_run(o, &r) != 0) {
		return 1;
	}
	failed |= r.lost != 0 || r.duplicates != 0 || r.ops == 0;
	wbench_cprint_row(o, &r, stdout);
	fflush(stdout);
	if (wbench_cwrite_reports(o, &r, 1) != 0)
		failed = 1;
	return failed;
}

/* rpc_points: C clients x D in flight, for each client and handler
 * mode asked for. */
static unsigned
rpc_points(const wbench_opts *o, point *pts)
{
	unsigned n = 0;

	for (unsigned m = WBENCH_CLIENT_ASYNC; m <= WBENCH_CLIENT_SYNC; m <<= 1)
		for (unsigned h = WBENCH_HANDLERS_INLINE;
		     h <= WBENCH_HANDLERS_POOL; h <<= 1)
			for (unsigned c = 0; c < o->nclient_list; c++)
				for (unsigned d = 0; d < o->ndepth_list; d++)
					if ((o->client_modes & m) &&
					    (o->handler_modes & h) &&
					    n < MAX_ROWS)
						pts[n++] = (point){
						    1,
						    o->client_list[c],
						    o->depth_list[d],
						    -1,
						    m == WBENCH_CLIENT_SYNC,
						    h == WBENCH_HANDLERS_POOL};
	return n;
}

static void
probe_print_row(const char *name, const probe_figs *pf)
{
	printf("%-8s %12.3f %12.3f %13.3f %13.3f %13llu %12.0f\n", name,
	       pf->p50_us / 1e3, pf->p99_us / 1e3, pf->member_p50_us / 1e3,
	       pf->member_p99_us / 1e3, (unsigned long long)pf->member_errors,
	       (double)pf->flood_ops);
}

/* probe_point runs one C x D point of rpc --probe: the probe and the
 * members alone, then beside the flood. Returns 0, or 1 for a failed
 * or broken run. */
static int
probe_point(const wbench_opts *o, unsigned clients, unsigned depth)
{
	const server_kind loop = {WBENCH_IO_LOOP, false};
	bool pool = o->handler_modes == WBENCH_HANDLERS_POOL;
	point alone = {2, 0, depth, -1, false, pool};
	point flood = {2, clients, depth, -1, false, pool};
	probe_figs a, f;
	cresult r;

	if (run_point(o, loop, &alone, &r, &a) != 0 ||
	    run_point(o, loop, &flood, &r, &f) != 0)
		return 1;
	f.flood_ops = (uint64_t)((double)f.flood_ops / o->duration_s);
	printf("rpc --probe: members n0 and n1, a probe client, then %u "
	       "clients x %u flooding n0\n",
	       clients, depth);
	printf("%-8s %12s %12s %13s %13s %13s %12s\n", "", "probe p50 ms",
	       "probe p99 ms", "member p50 ms", "member p99 ms",
	       "member errors", "flood ops/s");
	probe_print_row("alone", &a);
	probe_print_row("flooded", &f);
	printf("probe p99 flooded/alone: %.1fx; member p99: %.1fx\n",
	       a.p99_us > 0 ? f.p99_us / a.p99_us : 0,
	       a.member_p99_us > 0 ? f.member_p99_us / a.member_p99_us : 0);
	if (o->flood_cap >= 0)
		printf("flood verb capped at %d in progress (0: no cap): %.0f "
		       "answered/s, %.0f refused/s\n",
		       o->flood_cap, (double)f.flood_ops,
		       (double)f.flood_errors / o->duration_s);
	fflush(stdout);
	return a.probe_ops == 0 || f.probe_ops == 0 || a.lost != 0 ||
	       f.lost != 0 || a.duplicates != 0 || f.duplicates != 0;
}

/* probe_run: rpc --probe, for each C and D asked for. */
static int
probe_run(const wbench_opts *o)
{
	int failed = 0;

	for (unsigned c = 0; c < o->nclient_list; c++)
		for (unsigned d = 0; d < o->ndepth_list; d++)
			failed |=
			    probe_point(o, o->client_list[c], o->depth_list[d]);
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
	if (o->workload == WBENCH_RPC && o->probe)
		return probe_run(o);
	if (o->workload == WBENCH_RPC)
		n = rpc_points(o, pts);
	else if (o->workload == WBENCH_MIX) /* N members, C clients */
		for (unsigned p = 0; p < o->npeer_list; p++)
			for (unsigned m = 0; m < o->nmix_list; m++)
				pts[n++] = (point){
				    o->peer_list[p], o->client_list[0],
				    o->outstanding,  (int)o->mix_list[m],
				    false,           false};
	else /* P nodes asking each other */
		for (unsigned p = 0; p < o->npeer_list; p++)
			pts[n++] =
			    (point){o->peer_list[p], 0, 0, -1, false, false};
	return run_series(o, pts, n);
}
