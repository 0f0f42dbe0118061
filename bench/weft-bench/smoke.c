/* SPDX-License-Identifier: MIT */
/*
 * smoke.c: the smoke workload, zk-smoketest's zk-latencies.py on the
 * key-value service: for each node count (a standalone node and a
 * cluster by default) and I/O model, N members (cnode.c) and one client
 * process (smokeclient.c) that runs each client count in turn: create,
 * set, get and delete the keys, one phase after another. Printed as
 * zk-latencies prints it, per phase "created 10000 keys in 1219 ms
 * (0.121911 ms/op 8202.68/sec)", then the total and the client
 * process's CPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/core.h>

#include "wbench.h"

#define PHASES 4
#define MAX_RUNS 64

static const char *const phase_words[PHASES] = {"create", "set", "get",
                                                "delete"};
static const char *const phase_done[PHASES] = {"created", "set", "got",
                                               "deleted"};

/* One client count on one cluster. */
typedef struct smoke_result {
	unsigned nodes, clients;
	enum wbench_io io;
	uint64_t keys; /* per phase, all clients */
	uint64_t ns[PHASES], errors[PHASES], unexpected;
	uint64_t user_us, sys_us;
	uint64_t sent, replies, duplicates;
	int first_error;
} smoke_result;

typedef struct sproc {
	uint16_t port;
	bool addressed, ready, done, reported;
	unsigned ends; /* client: runs reported */
} sproc;

typedef struct srun {
	const wbench_opts *o;
	unsigned members, n; /* n = members + the client */
	enum wbench_io io;
	wbench_procs g;
	sproc *kids;
	smoke_result *cur; /* the run being reported */
} srun;

static void
read_phase(srun *s, const char *line)
{
	char word[16];
	unsigned long long ns, errors, unexpected;

	if (sscanf(line, "phase %15s ns=%llu errors=%llu unexpected=%llu", word,
	           &ns, &errors, &unexpected) != 4)
		return;
	for (int ph = 0; ph < PHASES; ph++)
		if (strcmp(word, phase_words[ph]) == 0) {
			s->cur->ns[ph] = ns;
			s->cur->errors[ph] = errors;
			s->cur->unexpected += unexpected;
		}
}

static void
read_counts(srun *s, const char *line)
{
	unsigned long long sent, replies, dups;
	int first;

	if (sscanf(line,
	           "counts sent=%llu replies=%llu duplicates=%llu "
	           "first_error=%d",
	           &sent, &replies, &dups, &first) == 4) {
		s->cur->sent = sent;
		s->cur->replies = replies;
		s->cur->duplicates = dups;
		s->cur->first_error = first;
	}
}

static void
on_line(wbench_procs *g, unsigned i, const char *line)
{
	srun *s = g->arg;
	sproc *k = &s->kids[i];
	unsigned long long user, sys;

	if (strncmp(line, "port ", 5) == 0)
		k->port = (uint16_t)atoi(line + 5);
	else if (strcmp(line, "addressed") == 0)
		k->addressed = true;
	else if (strcmp(line, "ready") == 0)
		k->ready = true;
	else if (strcmp(line, "done") == 0)
		k->done = true;
	else if (i < s->members && strncmp(line, "hist", 4) == 0)
		k->reported = true;
	else if (i < s->members)
		return;
	else if (strncmp(line, "phase ", 6) == 0)
		read_phase(s, line);
	else if (sscanf(line, "cpu user_us=%llu sys_us=%llu", &user, &sys) ==
	         2) {
		s->cur->user_us = user;
		s->cur->sys_us = sys;
	} else if (strncmp(line, "counts ", 7) == 0)
		read_counts(s, line);
	else if (strcmp(line, "end") == 0)
		k->ends++;
}

enum stage { LISTENING, ADDRESSED, READY, DONE, REPORTED, GONE, ENDED };

static bool
reached(const wbench_procs *g, unsigned i, int stage)
{
	const srun *s = g->arg;
	const sproc *k = &s->kids[i];

	switch (stage) {
	case LISTENING:
		return k->port != 0;
	case ADDRESSED:
		return k->addressed;
	case READY:
		return k->ready;
	case DONE:
		return k->done;
	case REPORTED:
		return k->reported;
	case GONE: /* its output has ended: it exited */
		return g->p[i].dead;
	default: /* ENDED + r: the client has reported r + 1 runs */
		return k->ends > (unsigned)(stage - ENDED);
	}
}

static void
proc_argv(const srun *s, unsigned i, wbench_argv *a)
{
	const wbench_opts *o = s->o;
	unsigned max = 0;

	if (i < s->members) {
		wbench_argv_init(a, o->self_exe, "cluster-node");
		wbench_argv_addf(a, "--node", "%u", i);
		wbench_argv_addf(a, "--io", "%s", wbench_io_name(s->io));
		wbench_argv_addf(a, "--outstanding", "0");
		wbench_argv_addf(a, "--warmup", "0");
		wbench_argv_addf(a, "--duration", "0.001");
		wbench_argv_add(a, "--kv");
	} else {
		for (unsigned c = 0; c < o->nclient_list; c++)
			max = o->client_list[c] > max ? o->client_list[c] : max;
		wbench_argv_init(a, o->self_exe, "smoke-client");
		wbench_argv_addf(a, "--nclients", "%u", max);
		wbench_argv_addf(a, "--outstanding", "%u", o->outstanding);
		wbench_argv_addf(a, "--keys", "%u", o->keys);
		wbench_argv_addf(a, "--timeout", "%llu",
		                 (unsigned long long)(o->timeout_ms / 1000));
	}
	wbench_argv_addf(a, "--peers", "%u", s->members);
	wbench_argv_addf(a, "--size", "%zu", o->size);
	if (o->tls_dir != NULL)
		wbench_argv_addf(a, "--tls", "%s", o->tls_dir);
}

static int
send_ports(srun *s)
{
	char line[16 + 7 * 1024];
	size_t off = (size_t)snprintf(line, sizeof(line), "ports");

	for (unsigned i = 0; i < s->members && off < sizeof(line) - 8; i++)
		off += (size_t)snprintf(line + off, sizeof(line) - off, " %u",
		                        s->kids[i].port);
	snprintf(line + off, sizeof(line) - off, "\n");
	return wbench_procs_tell(&s->g, 0, s->n, line);
}

/* start starts the members and the client and gets them ready. */
static int
start(srun *s)
{
	wbench_procs *g = &s->g;
	wbench_argv a;

	for (unsigned i = 0; i < s->n; i++) {
		proc_argv(s, i, &a);
		if (wbench_procs_spawn(g, i, &a) != 0)
			return -1;
	}
	if (wbench_procs_pump(g, LISTENING, 0, s->n, 30000) != 0 ||
	    send_ports(s) != 0 ||
	    wbench_procs_pump(g, ADDRESSED, 0, s->n, 30000) != 0 ||
	    wbench_procs_tell(g, 0, s->n, "prime\n") != 0 ||
	    wbench_procs_pump(g, READY, 0, s->n, 150000) != 0 ||
	    wbench_procs_tell(g, 0, s->members, "go\n") != 0) {
		fprintf(stderr, "weft-bench: smoke: the nodes and the client "
		                "did not all get ready\n");
		return -1;
	}
	return 0;
}

/* run_clients runs each client count in turn into rows. */
static int
run_clients(srun *s, smoke_result *rows)
{
	char line[32];

	for (unsigned c = 0; c < s->o->nclient_list; c++) {
		smoke_result *r = &rows[c];

		r->nodes = s->members;
		r->io = s->io;
		r->clients = s->o->client_list[c];
		r->keys = (uint64_t)r->clients * s->o->keys;
		s->cur = r;
		snprintf(line, sizeof(line), "run %u\n", r->clients);
		if (wbench_procs_tell(&s->g, s->members, s->n, line) != 0 ||
		    wbench_procs_pump(&s->g, ENDED + (int)c, s->members, s->n,
		                      s->o->timeout_ms) != 0) {
			fprintf(stderr,
			        "weft-bench: smoke: %u clients did not "
			        "finish\n",
			        r->clients);
			return -1;
		}
	}
	return 0;
}

/* finish stops the client, then, once it is gone, the members. */
static int
finish(srun *s)
{
	wbench_procs *g = &s->g;

	if (wbench_procs_tell(g, s->members, s->n, "quit\n") != 0 ||
	    wbench_procs_pump(g, GONE, s->members, s->n, 30000) != 0 ||
	    wbench_procs_pump(g, DONE, 0, s->members, 30000) != 0 ||
	    wbench_procs_tell(g, 0, s->members, "exit\n") != 0 ||
	    wbench_procs_pump(g, REPORTED, 0, s->members, 30000) != 0)
		return -1;
	return wbench_procs_tell(g, 0, s->members, "quit\n");
}

static int
run_cluster(const wbench_opts *o, unsigned nodes, enum wbench_io io,
            smoke_result *rows)
{
	srun s = {.o = o, .members = nodes, .n = nodes + 1, .io = io};
	int rv = -1;

	s.kids = calloc(s.n, sizeof(*s.kids));
	if (s.kids != NULL && wbench_procs_init(&s.g, s.n) == 0) {
		s.g.on_line = on_line;
		s.g.reached = reached;
		s.g.arg = &s;
		rv = start(&s);
		if (rv == 0)
			rv = run_clients(&s, rows);
		if (rv == 0)
			rv = finish(&s);
	}
	wbench_procs_reap(&s.g, rv != 0);
	free(s.kids);
	return rv;
}

/* ---- Output ------------------------------------------------------------- */

static void
print_line(FILE *out, const char *what, uint64_t n, const char *unit,
           uint64_t ns)
{
	double ms = (double)ns / 1e6;

	fprintf(out, "%s %llu %s in %.0f ms (%f ms/op %.2f/sec)", what,
	        (unsigned long long)n, unit, ms, n ? ms / (double)n : 0,
	        ms > 0 ? (double)n * 1e3 / ms : 0);
}

static uint64_t
total_ns(const smoke_result *r)
{
	uint64_t ns = 0;

	for (int ph = 0; ph < PHASES; ph++)
		ns += r->ns[ph];
	return ns;
}

static uint64_t
total_errors(const smoke_result *r)
{
	uint64_t n = 0;

	for (int ph = 0; ph < PHASES; ph++)
		n += r->errors[ph];
	return n;
}

static void
print_result(const wbench_opts *o, const smoke_result *r, FILE *out)
{
	fprintf(out,
	        "weft-bench smoke: %u node%s (%s), %u client%s, %u keys of "
	        "%zu B each, %u in flight per client%s\n",
	        r->nodes, r->nodes == 1 ? "" : "s",
	        r->io == WBENCH_IO_THREADS ? "the thread-per-peer baseline"
	                                   : "weft's service",
	        r->clients, r->clients == 1 ? "" : "s", o->keys, o->size,
	        o->outstanding, o->tls_dir ? ", mutual TLS" : "");
	for (int ph = 0; ph < PHASES; ph++) {
		print_line(out, phase_done[ph], r->keys, "keys", r->ns[ph]);
		if (r->errors[ph])
			fprintf(out, ", %llu errors",
			        (unsigned long long)r->errors[ph]);
		fputc('\n', out);
	}
	print_line(out, "total", r->keys * PHASES, "ops", total_ns(r));
	fprintf(out, ", client CPU user %.3f s, system %.3f s\n",
	        (double)r->user_us / 1e6, (double)r->sys_us / 1e6);
	if (r->unexpected || r->first_error)
		fprintf(out, "  %llu gets of a wrong value; first error: %s\n",
		        (unsigned long long)r->unexpected,
		        r->first_error ? weft_strerror(r->first_error)
		                       : "none");
	fputc('\n', out);
	fflush(out);
}

static double
rate(uint64_t n, uint64_t ns)
{
	return ns ? (double)n * 1e9 / (double)ns : 0;
}

static int
write_json(const wbench_opts *o, const smoke_result *rows, unsigned n)
{
	FILE *f = fopen(o->json_path, "w");

	if (f == NULL) {
		perror(o->json_path);
		return -1;
	}
	fputs("{\n", f);
	wbench_json_env(f, o);
	fprintf(f,
	        "  \"workload\": \"smoke\",\n  \"keys_per_client\": %u,\n"
	        "  \"size\": %zu,\n  \"outstanding\": %u,\n  \"tls\": %s,\n"
	        "  \"runs\": [",
	        o->keys, o->size, o->outstanding,
	        o->tls_dir ? "true" : "false");
	for (unsigned i = 0; i < n; i++) {
		const smoke_result *r = &rows[i];

		fprintf(
		    f,
		    "%s\n    {\"nodes\": %u, \"io\": \"%s\", \"clients\": %u, "
		    "\"keys\": %llu, \"phases\": {",
		    i ? "," : "", r->nodes, wbench_io_name(r->io), r->clients,
		    (unsigned long long)r->keys);
		for (int ph = 0; ph < PHASES; ph++)
			fprintf(f,
			        "%s\"%s\": {\"ms\": %.3f, \"ms_per_op\": %.6f, "
			        "\"ops_per_s\": %.1f, \"errors\": %llu}",
			        ph ? ", " : "", phase_words[ph],
			        (double)r->ns[ph] / 1e6,
			        (double)r->ns[ph] / 1e6 / (double)r->keys,
			        rate(r->keys, r->ns[ph]),
			        (unsigned long long)r->errors[ph]);
		fprintf(
		    f,
		    "}, \"total_ms\": %.3f, \"cpu_user_s\": %.3f, "
		    "\"cpu_sys_s\": %.3f, \"unexpected\": %llu, "
		    "\"sent\": %llu, \"replies\": %llu, \"duplicates\": %llu}",
		    (double)total_ns(r) / 1e6, (double)r->user_us / 1e6,
		    (double)r->sys_us / 1e6, (unsigned long long)r->unexpected,
		    (unsigned long long)r->sent, (unsigned long long)r->replies,
		    (unsigned long long)r->duplicates);
	}
	fputs("\n  ]\n}\n", f);
	return fclose(f) == 0 ? 0 : -1;
}

static int
write_md(const wbench_opts *o, const smoke_result *rows, unsigned n)
{
	FILE *f = fopen(o->md_path, "w");

	if (f == NULL) {
		perror(o->md_path);
		return -1;
	}
	fputs("| nodes | io | clients | keys | create ops/s | set ops/s | "
	      "get ops/s | delete ops/s | total ms | client CPU user s | "
	      "client CPU system s | errors |\n"
	      "|---|---|---|---|---|---|---|---|---|---|---|---|\n",
	      f);
	for (unsigned i = 0; i < n; i++) {
		const smoke_result *r = &rows[i];

		fprintf(f, "| %u | %s | %u | %llu |", r->nodes,
		        wbench_io_name(r->io), r->clients,
		        (unsigned long long)r->keys);
		for (int ph = 0; ph < PHASES; ph++)
			fprintf(f, " %.0f |", rate(r->keys, r->ns[ph]));
		fprintf(f, " %.0f | %.2f | %.2f | %llu |\n",
		        (double)total_ns(r) / 1e6, (double)r->user_us / 1e6,
		        (double)r->sys_us / 1e6,
		        (unsigned long long)total_errors(r));
	}
	return fclose(f) == 0 ? 0 : -1;
}

/* broken: a request answered twice or never, or a get of a wrong
 * value. */
static bool
broken(const smoke_result *r)
{
	return r->sent != r->replies || r->duplicates || r->unexpected ||
	       total_ns(r) == 0;
}

int
wbench_smoke_run(const wbench_opts *o)
{
	smoke_result rows[MAX_RUNS];
	unsigned n = 0;
	int failed = 0;

	memset(rows, 0, sizeof(rows));
	for (unsigned p = 0; p < o->npeer_list; p++)
		for (int io = WBENCH_IO_LOOP; io <= WBENCH_IO_THREADS; io++) {
			if (!(o->io & io) || n + o->nclient_list > MAX_RUNS)
				continue;
			if (run_cluster(o, o->peer_list[p], (enum wbench_io)io,
			                &rows[n]) != 0) {
				failed = 1;
				continue;
			}
			for (unsigned c = 0; c < o->nclient_list; c++) {
				print_result(o, &rows[n + c], stdout);
				failed |= broken(&rows[n + c]);
			}
			n += o->nclient_list;
		}
	if ((o->json_path && write_json(o, rows, n) != 0) ||
	    (o->md_path && write_md(o, rows, n) != 0))
		failed = 1;
	return failed;
}
