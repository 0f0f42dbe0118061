/* SPDX-License-Identifier: MIT */
/*
 * ycsb.c: the ycsb workload's coordinator. For each node count and I/O
 * model it starts N key-value members (cnode.c, as for mix) and C YCSB
 * client processes (ycsbclient.c), has the clients load the records once
 * and then run each workload of the list in turn on them, as YCSB runs
 * go, and merges their figures per phase and operation: ycsbout.c prints
 * them in YCSB's own form and writes the reports.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/histogram.h>

#include "ycsb.h"
#include "ycsbout.h"

enum phase { LOAD, RUN };

/* A member or client process, as its lines describe it. */
typedef struct ykid {
	uint16_t port;
	bool addressed, ready, loaded, reported;
	unsigned runs_done, runs_reported; /* a member's window counts once */
	uint64_t ticks;
} ykid;

typedef struct yrun {
	const wbench_opts *o;
	enum wbench_io io;
	ycsb_result *r; /* being filled: the load's, then each run's */
	unsigned members, n;
	unsigned run; /* the workload running: its index in the list */
	wbench_procs g;
	ykid *kids;
	weft_histogram *hist[2][YCSB_OPS];
	uint64_t first_ns[2], last_ns[2];
	int phase; /* -1: neither loading nor running */
	uint64_t last_print_ns, last_ticks;
} yrun;

static void
member_argv(const yrun *y, unsigned i, wbench_argv *a)
{
	const wbench_opts *o = y->o;

	wbench_argv_init(a, o->self_exe, "cluster-node");
	wbench_argv_addf(a, "--node", "%u", i);
	wbench_argv_addf(a, "--peers", "%u", y->members);
	wbench_argv_addf(a, "--io", "%s", wbench_io_name(y->io));
	/* The members only serve: their own window is over at once. */
	wbench_argv_addf(a, "--outstanding", "0");
	wbench_argv_addf(a, "--warmup", "0");
	wbench_argv_addf(a, "--duration", "0.001");
	wbench_argv_addf(a, "--size", "%zu", o->size);
	wbench_argv_add(a, "--kv");
	if (o->tls_dir != NULL)
		wbench_argv_addf(a, "--tls", "%s", o->tls_dir);
}

static void
client_argv(const yrun *y, unsigned i, wbench_argv *a)
{
	const wbench_opts *o = y->o;

	wbench_argv_init(a, o->self_exe, "ycsb-client");
	wbench_argv_addf(a, "--client-index", "%u", i);
	wbench_argv_addf(a, "--nclients", "%u", y->n - y->members);
	wbench_argv_addf(a, "--peers", "%u", y->members);
	if (o->distribution)
		wbench_argv_addf(a, "--distribution", "%s",
		                 wbench_dist_name(o->distribution));
	wbench_argv_addf(a, "--records", "%llu",
	                 (unsigned long long)o->records);
	if (o->operations)
		wbench_argv_addf(a, "--operations", "%llu",
		                 (unsigned long long)o->operations);
	wbench_argv_addf(a, "--threads", "%u", o->threads);
	wbench_argv_addf(a, "--scan-length", "%u", o->scan_length);
	if (o->sessions > 0)
		wbench_argv_addf(a, "--sessions", "%u", o->sessions);
	if (o->consistency != 0)
		wbench_argv_addf(a, "--consistency", "%s",
		                 wbench_consistency_name(o->consistency));
	wbench_argv_addf(a, "--size", "%zu", o->size);
	wbench_argv_addf(a, "--warmup", "%g", o->warmup_s);
	wbench_argv_addf(a, "--duration", "%g", o->duration_s);
	wbench_argv_addf(a, "--seed", "%llu", (unsigned long long)o->seed);
	wbench_argv_addf(a, "--timeout", "%llu",
	                 (unsigned long long)(o->timeout_ms / 1000));
	if (o->tls_dir != NULL)
		wbench_argv_addf(a, "--tls", "%s", o->tls_dir);
}

/* read_figs reads "ycsb PHASE OP n= sum= min= max= s0= ..." into r. */
static void
read_figs(yrun *y, const char *line)
{
	char phase[8];
	int op, at = 0;
	ycsb_figs f = {0};
	unsigned long long n, sum, min, max;

	if (sscanf(line, "ycsb %7s %d n=%llu sum=%llu min=%llu max=%llu%n",
	           phase, &op, &n, &sum, &min, &max, &at) != 6 ||
	    op < 0 || op >= YCSB_OPS)
		return;
	f.n = n;
	f.sum_ns = sum;
	f.min_ns = min;
	f.max_ns = max;
	for (int s = 0; s < YCSB_STATUSES; s++) {
		char key[16];
		const char *p;

		snprintf(key, sizeof(key), " s%d=", s);
		if ((p = strstr(line + at, key)) != NULL)
			f.status[s] = strtoull(p + strlen(key), NULL, 10);
	}
	ycsb_figs_merge(&y->r->figs[strcmp(phase, "load") ? RUN : LOAD][op],
	                &f);
}

static void
read_hist(yrun *y, const char *line)
{
	int ph = strncmp(line, "hist-load-", 10) == 0 ? LOAD : RUN;
	int op = atoi(line + (ph == LOAD ? 10 : 9));

	if (op >= 0 && op < YCSB_OPS)
		wbench_hist_parse(line, y->hist[ph][op]);
}

static void
read_time(yrun *y, const char *line)
{
	unsigned long long first, last, ops;
	char phase[8];
	int ph;

	if (sscanf(line, "time %7s %llu %llu %llu", phase, &first, &last,
	           &ops) != 4)
		return;
	ph = strcmp(phase, "load") ? RUN : LOAD;
	y->r->ops[ph] += ops;
	if (y->first_ns[ph] == 0 || first < y->first_ns[ph])
		y->first_ns[ph] = first;
	if (last > y->last_ns[ph])
		y->last_ns[ph] = last;
}

static uint64_t
field(const char *line, const char *key)
{
	const char *p = strstr(line, key);

	return p != NULL ? strtoull(p + strlen(key), NULL, 10) : 0;
}

/* read_counts keeps a client's requests of the phase (each must be
 * answered once). */
static void
read_counts(yrun *y, const char *line)
{
	const char *p = strstr(line, " first_error=");

	y->r->sent += field(line, " sent=");
	y->r->replies += field(line, " replies=");
	y->r->duplicates += field(line, " duplicates=");
	if (p != NULL && y->r->first_error == 0)
		y->r->first_error = atoi(p + 13);
}

static void
on_line(wbench_procs *g, unsigned i, const char *line)
{
	yrun *y = g->arg;
	ykid *k = &y->kids[i];
	bool member = i < y->members;

	if (strncmp(line, "port ", 5) == 0)
		k->port = (uint16_t)atoi(line + 5);
	else if (strcmp(line, "addressed") == 0)
		k->addressed = true;
	else if (strcmp(line, "ready") == 0)
		k->ready = true;
	else if (strcmp(line, "loaded") == 0)
		k->loaded = true;
	else if (strcmp(line, "done") == 0)
		k->runs_done++;
	else if (strncmp(line, "tick ", 5) == 0)
		k->ticks = strtoull(line + 5, NULL, 10);
	else if (member && strncmp(line, "hist", 4) == 0)
		k->reported = true; /* a member's last line */
	else if (member)
		return;
	else if (strncmp(line, "ycsb ", 5) == 0)
		read_figs(y, line);
	else if (strncmp(line, "hist-", 5) == 0)
		read_hist(y, line);
	else if (strncmp(line, "time ", 5) == 0)
		read_time(y, line);
	else if (strncmp(line, "counts ", 7) == 0)
		read_counts(y, line);
	else if (strcmp(line, "end") == 0)
		k->runs_reported++;
}

enum stage { LISTENING, ADDRESSED, READY, LOADED, DONE, REPORTED, GONE };

static bool
reached(const wbench_procs *g, unsigned i, int stage)
{
	const yrun *y = g->arg;
	const ykid *k = &y->kids[i];

	switch (stage) {
	case LISTENING:
		return k->port != 0;
	case ADDRESSED:
		return k->addressed;
	case READY:
		return k->ready;
	case LOADED:
		return k->loaded;
	case DONE: /* a member's window, or a client's current run */
		return i < y->members ? k->runs_done > 0
		                      : k->runs_done > y->run;
	case REPORTED: /* a member's figures, or the current run's */
		return i < y->members ? k->reported : k->runs_reported > y->run;
	default: /* GONE: its output has ended */
		return g->p[i].dead;
	}
}

static void
progress(wbench_procs *g)
{
	yrun *y = g->arg;
	uint64_t now = wbench_now_ns(), ticks = 0;

	if (y->phase < 0)
		return;
	for (unsigned i = y->members; i < y->n; i++)
		ticks += y->kids[i].ticks;
	if (y->last_print_ns == 0)
		y->last_print_ns = now;
	if (now - y->last_print_ns < 1000000000u)
		return;
	if (!y->o->quiet && ticks != y->last_ticks)
		fprintf(stderr, "ycsb %c %s %u nodes, %s: %.0f ops/s\n",
		        y->r->workload, wbench_io_name(y->io), y->members,
		        y->phase == LOAD ? "load" : "run",
		        (double)(ticks - y->last_ticks) * 1e9 /
		            (double)(now - y->last_print_ns));
	y->last_print_ns = now;
	y->last_ticks = ticks;
}

/* send_ports sends every process the list of the members' ports. */
static int
send_ports(yrun *y)
{
	char *line = malloc(16 + 7 * (size_t)y->members);
	size_t off;
	int rv;

	if (line == NULL)
		return -1;
	off = (size_t)sprintf(line, "ports");
	for (unsigned i = 0; i < y->members; i++)
		off += (size_t)sprintf(line + off, " %u", y->kids[i].port);
	sprintf(line + off, "\n");
	rv = wbench_procs_tell(&y->g, 0, y->n, line);
	free(line);
	return rv;
}

static int
fail(const char *why)
{
	fprintf(stderr, "weft-bench: ycsb: %s\n", why);
	return -1;
}

/* start starts, addresses and primes the members and the clients. */
static int
start(yrun *y)
{
	wbench_procs *g = &y->g;
	wbench_argv a;

	for (unsigned i = 0; i < y->n; i++) {
		if (i < y->members)
			member_argv(y, i, &a);
		else
			client_argv(y, i - y->members, &a);
		if (wbench_procs_spawn(g, i, &a) != 0)
			return -1;
	}
	if (wbench_procs_pump(g, LISTENING, 0, y->n, 30000) != 0 ||
	    send_ports(y) != 0 ||
	    wbench_procs_pump(g, ADDRESSED, 0, y->n, 30000) != 0 ||
	    wbench_procs_tell(g, 0, y->n, "prime\n") != 0 ||
	    wbench_procs_pump(g, READY, 0, y->n, 150000) != 0 ||
	    wbench_procs_tell(g, 0, y->members, "go\n") != 0)
		return fail("the nodes and clients did not all get ready");
	return 0;
}

/* merge turns a phase's merged histograms and times into the result's
 * figures. */
static void
merge(yrun *y, int ph)
{
	ycsb_result *r = y->r;
	uint64_t ns = y->last_ns[ph] > y->first_ns[ph]
	                  ? y->last_ns[ph] - y->first_ns[ph]
	                  : 0;

	for (int op = 0; op < YCSB_OPS; op++) {
		const weft_histogram *h = y->hist[ph][op];

		r->p95_us[ph][op] =
		    (double)weft_histogram_percentile(h, 95) / 1e3;
		r->p99_us[ph][op] =
		    (double)weft_histogram_percentile(h, 99) / 1e3;
	}
	/* As YCSB: operations (a read-modify-write is one; its read and
	 * update also show under READ and UPDATE) per second of the phase's
	 * run time. */
	r->runtime_ms[ph] = (double)ns / 1e6;
	r->throughput[ph] = ns ? (double)r->ops[ph] * 1e9 / (double)ns : 0;
	r->lost = r->sent > r->replies ? r->sent - r->replies : 0;
}

/* begin_phase empties the merged figures before a phase. */
static void
begin_phase(yrun *y, int ph, ycsb_result *r)
{
	for (int op = 0; op < YCSB_OPS; op++)
		weft_histogram_reset(y->hist[ph][op]);
	y->first_ns[ph] = y->last_ns[ph] = 0;
	y->last_ticks = y->last_print_ns = 0;
	for (unsigned i = y->members; i < y->n; i++)
		y->kids[i].ticks = 0;
	y->r = r;
	y->phase = ph;
}

/* load has the clients load the records; their figures go to r. */
static int
load(yrun *y, ycsb_result *r)
{
	begin_phase(y, LOAD, r);
	if (wbench_procs_tell(&y->g, y->members, y->n, "load\n") != 0 ||
	    wbench_procs_pump(&y->g, LOADED, y->members, y->n,
	                      y->o->timeout_ms) != 0)
		return fail("the clients did not load the records");
	y->phase = -1;
	merge(y, LOAD);
	if (r->lost || r->duplicates)
		return fail("a request of the load was not answered exactly "
		            "once");
	return 0;
}

/* run_workload runs the run-th workload of the list into r. */
static int
run_workload(yrun *y, unsigned run, ycsb_result *r)
{
	char line[16];

	y->run = run;
	begin_phase(y, RUN, r);
	snprintf(line, sizeof(line), "run %c\n", r->workload);
	if (wbench_procs_tell(&y->g, y->members, y->n, line) != 0 ||
	    wbench_procs_pump(&y->g, DONE, y->members, y->n,
	                      y->o->timeout_ms) != 0)
		return fail("the clients did not finish");
	y->phase = -1;
	if (wbench_procs_tell(&y->g, y->members, y->n, "report\n") != 0 ||
	    wbench_procs_pump(&y->g, REPORTED, y->members, y->n, 30000) != 0)
		return fail("the clients did not report");
	merge(y, RUN);
	return 0;
}

/* finish stops the clients, then, once they are gone, the members. */
static int
finish(yrun *y)
{
	wbench_procs *g = &y->g;

	if (wbench_procs_tell(g, y->members, y->n, "quit\n") != 0 ||
	    wbench_procs_pump(g, GONE, y->members, y->n, 30000) != 0 ||
	    wbench_procs_pump(g, DONE, 0, y->members, 30000) != 0 ||
	    wbench_procs_tell(g, 0, y->members, "exit\n") != 0 ||
	    wbench_procs_pump(g, REPORTED, 0, y->members, 30000) != 0)
		return fail("the nodes did not all stop");
	return wbench_procs_tell(g, 0, y->members, "quit\n");
}

static int
yrun_init(yrun *y)
{
	y->kids = calloc(y->n, sizeof(*y->kids));
	if (y->kids == NULL || wbench_procs_init(&y->g, y->n) != 0)
		return -1;
	for (int ph = LOAD; ph <= RUN; ph++)
		for (int op = 0; op < YCSB_OPS; op++)
			if (weft_histogram_new(&y->hist[ph][op]) != 0)
				return -1;
	y->g.on_line = on_line;
	y->g.reached = reached;
	y->g.progress = progress;
	y->g.arg = y;
	y->phase = -1;
	return 0;
}

/* run_cluster loads one cluster and runs each workload of the list on
 * it: rows gets one result per workload, each with the load's figures.
 * Returns the rows filled. */
static unsigned
run_cluster(const wbench_opts *o, unsigned nodes, enum wbench_io io,
            ycsb_result *rows)
{
	yrun y = {.o = o, .io = io, .members = nodes};
	ycsb_result loaded = {.nodes = nodes, .io = io};
	unsigned done = 0;
	bool ok;

	y.n = nodes + o->client_list[0];
	loaded.workload = o->ycsb_list[0];
	ok = yrun_init(&y) == 0 && start(&y) == 0 && load(&y, &loaded) == 0;
	for (unsigned w = 0; ok && w < o->nycsb_list; w++) {
		ycsb_result *r = &rows[done];

		/* The load's figures, then this run's: its own requests. */
		*r = loaded;
		r->workload = o->ycsb_list[w];
		r->sent = r->replies = r->duplicates = r->lost = 0;
		r->first_error = 0;
		if ((ok = run_workload(&y, w, r) == 0))
			done++;
	}
	ok = ok && finish(&y) == 0;
	wbench_procs_reap(&y.g, !ok);
	for (int ph = LOAD; ph <= RUN; ph++)
		for (int op = 0; op < YCSB_OPS; op++)
			weft_histogram_free(y.hist[ph][op]);
	free(y.kids);
	return ok ? done : 0;
}

/* broken tells a run whose answers do not add up: a request answered
 * twice or never, an answer that does not match, or nothing measured. */
static bool
broken(const ycsb_result *r)
{
	uint64_t unexpected = 0;

	for (int ph = LOAD; ph <= RUN; ph++)
		for (int op = 0; op < YCSB_OPS; op++)
			unexpected +=
			    r->figs[ph][op].status[YCSB_UNEXPECTED_STATE];
	return r->lost || r->duplicates || unexpected || r->ops[RUN] == 0;
}

int
wbench_ycsb_run(const wbench_opts *o)
{
	unsigned max = o->nycsb_list * o->npeer_list * 2, n = 0;
	ycsb_result *rows = calloc(max ? max : 1, sizeof(*rows));
	int failed = 0;

	if (rows == NULL)
		return 1;
	for (unsigned p = 0; p < o->npeer_list; p++)
		for (int io = WBENCH_IO_LOOP; io <= WBENCH_IO_THREADS; io++) {
			unsigned got;

			if (!(o->io & io))
				continue;
			got = run_cluster(o, o->peer_list[p],
			                  (enum wbench_io)io, &rows[n]);
			failed |= got != o->nycsb_list;
			for (unsigned i = n; i < n + got; i++) {
				ycsb_print(o, &rows[i], i == n, stdout);
				failed |= broken(&rows[i]);
			}
			n += got;
		}
	/* The tables put each workload's rows side by side. */
	qsort(rows, n, sizeof(*rows), ycsb_result_cmp);
	if (ycsb_write_reports(o, rows, n) != 0)
		failed = 1;
	free(rows);
	return failed;
}
