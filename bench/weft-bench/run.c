/* SPDX-License-Identifier: MIT */
/* run.c: one invocation of weft-bench: its runs, their peers, the report. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "wbench.h"

extern char **environ;

/* The load half of one run, in a child process or a thread. */
typedef struct peer {
	wbench_opts opts; /* the measuring half's, read by its loop */
	wbench_opts load; /* the load half's, made from them at start */
	char addr[160];
	pid_t pid;
	pthread_t thread;
	bool started;
	int rv;
} peer;

static int
load_half(const wbench_opts *o)
{
	if (o->impl == WBENCH_IMPL_RAW)
		return wbench_raw_load(o);
	return wbench_weft_load(o);
}

static void *
peer_thread(void *arg)
{
	peer *p = arg;

	p->rv = load_half(&p->load);
	return NULL;
}

/* spawn_peer execs weft-bench --connect with the run's options. */
static int
spawn_peer(peer *p)
{
	const wbench_opts *o = &p->load;
	char size[32], seed[32], batch[32], tmo[32], poll[32];
	char *argv[26];
	int i = 0, rv;

	/* The load half runs until the measuring half closes: it needs no
	 * counts. */
	snprintf(size, sizeof(size), "%zu", o->size);
	snprintf(seed, sizeof(seed), "%" PRIu64, o->seed);
	snprintf(batch, sizeof(batch), "%zu", o->batch);
	snprintf(poll, sizeof(poll), "%" PRIu32, o->busy_poll_us);
	snprintf(tmo, sizeof(tmo), "%" PRIu64, (o->timeout_ms + 999) / 1000);
	argv[i++] = (char *)o->self_exe;
	argv[i++] = (char *)wbench_workload_name(o->workload);
	argv[i++] = "--impl";
	argv[i++] = (char *)wbench_impl_name(o->impl);
	argv[i++] = "--connect";
	argv[i++] = p->addr;
	argv[i++] = "--size";
	argv[i++] = size;
	argv[i++] = "--seed";
	argv[i++] = seed;
	argv[i++] = "--batch";
	argv[i++] = batch;
	argv[i++] = "--busy-poll";
	argv[i++] = poll;
	argv[i++] = "--timeout";
	argv[i++] = tmo;
	argv[i++] = "--quiet";
	if (o->tls_dir != NULL) {
		argv[i++] = "--tls";
		argv[i++] = (char *)o->tls_dir;
	}
	argv[i] = NULL;
	rv = posix_spawn(&p->pid, o->self_exe, NULL, NULL, argv, environ);
	if (rv != 0) {
		fprintf(stderr, "weft-bench: cannot start %s: %s\n",
		        o->self_exe, strerror(rv));
		return -1;
	}
	return 0;
}

/* start_peer is the measuring half's ready callback. */
static int
start_peer(const char *bound, void *arg)
{
	peer *p = arg;

	/* The load half's options are a copy: the measuring half's loop
	 * reads its own meanwhile (and would have gone quiet). */
	snprintf(p->addr, sizeof(p->addr), "%s", bound);
	p->load = p->opts;
	p->load.addr = p->addr;
	p->load.role = WBENCH_ROLE_CONNECT;
	p->load.quiet = true;
	if (p->load.peer == WBENCH_PEER_THREAD) {
		if (pthread_create(&p->thread, NULL, peer_thread, p) != 0)
			return -1;
	} else if (spawn_peer(p) != 0) {
		return -1;
	}
	p->started = true;
	return 0;
}

/* wait_child reaps the peer process; one that outlives its run by ten
 * seconds is killed. */
static int
wait_child(pid_t pid, bool failed)
{
	uint64_t deadline = wbench_now_ns() + 10000000000u;
	int status = 0;
	pid_t r;

	if (failed)
		kill(pid, SIGTERM);
	while ((r = waitpid(pid, &status, WNOHANG)) == 0) {
		if (wbench_now_ns() > deadline) {
			kill(pid, SIGKILL);
			deadline = UINT64_MAX;
		}
		poll(NULL, 0, 5);
	}
	if (r < 0)
		return -1;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static int
wait_peer(peer *p, bool failed)
{
	if (!p->started)
		return -1;
	if (p->opts.peer == WBENCH_PEER_THREAD) {
		pthread_join(p->thread, NULL);
		return p->rv;
	}
	return wait_child(p->pid, failed);
}

int
wbench_run_impl(const wbench_opts *o, enum wbench_impl impl, wbench_result *res)
{
	peer p = {.opts = *o, .pid = -1};
	int rv, peer_rv;

	p.opts.impl = impl;
	if (impl == WBENCH_IMPL_RAW)
		p.opts.tls_dir = NULL; /* the reference stays plaintext */
	if (p.opts.self_exe == NULL)
		p.opts.self_exe = "/proc/self/exe";
	if (impl == WBENCH_IMPL_RAW)
		rv = wbench_raw_measure(&p.opts, start_peer, &p, res);
	else
		rv = wbench_weft_measure(&p.opts, start_peer, &p, res);
	peer_rv = wait_peer(&p, rv != 0);
	if (rv == 0 && peer_rv != 0)
		fprintf(stderr, "weft-bench: the %s load half failed\n",
		        wbench_impl_name(impl));
	return rv == 0 && peer_rv == 0 && wbench_result_ok(o, res) ? 0 : -1;
}

static int
announce(const char *bound, void *arg)
{
	(void)arg;
	fprintf(stderr, "weft-bench: listening on %s\n", bound);
	return 0;
}

/* run_split runs one half only, --repeat times (--listen, --connect). */
static int
run_split(const wbench_opts *o, wbench_report *rep)
{
	int idx = o->impl == WBENCH_IMPL_RAW;
	int failed = 0;

	for (unsigned r = 0; r < o->repeat; r++) {
		wbench_result *res = &rep->runs[idx][r];

		if (o->role == WBENCH_ROLE_CONNECT)
			failed |= load_half(o) != 0;
		else if (o->impl == WBENCH_IMPL_RAW)
			failed |= wbench_raw_measure(o, announce, NULL, res);
		else
			failed |= wbench_weft_measure(o, announce, NULL, res);
		rep->nruns[idx] += o->role == WBENCH_ROLE_LISTEN;
	}
	return failed ? -1 : 0;
}

/* run_pair runs slot i of repetition r: weft and raw, or with
 * --tls-compare weft in plaintext and weft over TLS. */
static int
run_pair(const wbench_opts *o, wbench_report *rep, unsigned r, int i)
{
	wbench_opts c = *o;
	enum wbench_impl impl = i ? WBENCH_IMPL_RAW : WBENCH_IMPL_WEFT;

	if (o->tls_compare) {
		impl = WBENCH_IMPL_WEFT;
		c.tls_dir = i ? o->tls_dir : NULL;
	} else if (!(o->impl & impl)) {
		return 0;
	}
	rep->nruns[i]++;
	return wbench_run_impl(&c, impl, &rep->runs[i][r]);
}

/* run_both alternates the implementations, so that a drift of the machine
 * during the runs weighs on both alike. */
static int
run_both(const wbench_opts *o, wbench_report *rep)
{
	int failed = 0;

	for (unsigned r = 0; r < o->repeat; r++)
		for (int i = 0; i < 2; i++)
			failed |= run_pair(o, rep, r, i) != 0;
	return failed ? -1 : 0;
}

/* write_csv writes one row per run of each slot. */
static int
write_csv(const wbench_opts *o, const wbench_report *rep)
{
	unsigned n = rep->nruns[0] + rep->nruns[1], k = 0;
	wbench_csv_row *rows = calloc(n ? n : 1, sizeof(*rows));
	int rv;

	if (rows == NULL)
		return -1;
	for (int i = 0; i < 2; i++)
		for (unsigned j = 0; j < rep->nruns[i]; j++, k++) {
			const wbench_result *r = &rep->runs[i][j];
			wbench_csv_row *c = &rows[k];

			wbench_csv_row_init(c, o);
			c->impl = wbench_slot_name(o, i);
			c->tls = strcmp(c->impl, "weft-tls") == 0;
			c->ops_per_s = r->msgs_per_s;
			c->mb_per_s = r->mb_per_s;
			c->errors = r->errors;
			if (o->workload != WBENCH_LATENCY)
				continue;
			c->p50_us = (double)r->p50_ns / 1e3;
			c->p99_us = (double)r->p99_ns / 1e3;
			c->p999_us = (double)r->p999_ns / 1e3;
			c->max_us = (double)r->max_ns / 1e3;
		}
	rv = wbench_csv_write(o->csv_path, rows, n);
	free(rows);
	return rv;
}

static int
finish(const wbench_opts *o, wbench_report *rep)
{
	int rv = 0;

	for (int i = 0; i < 2; i++)
		wbench_result_median(rep->runs[i], rep->nruns[i],
		                     &rep->median[i]);
	if (rep->nruns[0] + rep->nruns[1] == 0)
		return 0;
	wbench_report_print(rep, stdout);
	fflush(stdout);
	if (o->json_path && wbench_report_json(rep, o->json_path) != 0)
		rv = -1;
	if (o->csv_path && write_csv(o, rep) != 0)
		rv = -1;
	return rv;
}

int
wbench_run(const wbench_opts *o)
{
	wbench_report rep = {.opts = o};
	int rv = -1;

	/* The commands a user runs look at the machine first; the
	 * processes they start for their nodes and clients do not. */
	if (o->role == WBENCH_ROLE_BOTH && o->workload != WBENCH_CLUSTER_NODE &&
	    o->workload != WBENCH_RPC_CLIENT &&
	    o->workload != WBENCH_YCSB_CLIENT &&
	    o->workload != WBENCH_SMOKE_CLIENT)
		wbench_machine_check();
	if (o->workload == WBENCH_CLUSTER || o->workload == WBENCH_RPC ||
	    o->workload == WBENCH_MIX) {
		wbench_opts c = *o;

		c.self_exe = c.self_exe ? c.self_exe : "/proc/self/exe";
		rv = wbench_cluster_run(&c);
		return rv == 0 || rv == WBENCH_SKIPPED ? rv : 1;
	}
	if (o->workload == WBENCH_CLUSTER_NODE &&
	    o->rpc_impls == WBENCH_RPC_PIPELINE && o->client)
		return wbench_pipe_client(o) == 0 ? 0 : 1;
	if (o->workload == WBENCH_CLUSTER_NODE &&
	    o->rpc_impls == WBENCH_RPC_PIPELINE)
		return wbench_pipe_server(o) == 0 ? 0 : 1;
	if (o->workload == WBENCH_CLUSTER_NODE)
		return wbench_cluster_node(o) == 0 ? 0 : 1;
	if (o->workload == WBENCH_RPC_CLIENT)
		return wbench_rpc_client(o) == 0 ? 0 : 1;
	if (o->workload == WBENCH_YCSB_CLIENT)
		return wbench_ycsb_client(o) == 0 ? 0 : 1;
	if (o->workload == WBENCH_SMOKE_CLIENT)
		return wbench_smoke_client(o) == 0 ? 0 : 1;
	if (o->workload == WBENCH_YCSB || o->workload == WBENCH_SMOKE) {
		wbench_opts c = *o;

		c.self_exe = c.self_exe ? c.self_exe : "/proc/self/exe";
		rv = o->workload == WBENCH_YCSB ? wbench_ycsb_run(&c)
		                                : wbench_smoke_run(&c);
		return rv == 0 ? 0 : 1;
	}
	if (o->role != WBENCH_ROLE_BOTH && o->impl == WBENCH_IMPL_BOTH) {
		fprintf(stderr, "weft-bench: --listen and --connect need "
		                "--impl weft or raw\n");
		return 2;
	}
	rep.runs[0] = calloc(o->repeat, sizeof(wbench_result));
	rep.runs[1] = calloc(o->repeat, sizeof(wbench_result));
	if (rep.runs[0] == NULL || rep.runs[1] == NULL)
		goto out;
	if (o->role == WBENCH_ROLE_BOTH)
		rv = run_both(o, &rep);
	else
		rv = run_split(o, &rep);
	if (finish(o, &rep) != 0)
		rv = -1;
out:
	free(rep.runs[1]);
	free(rep.runs[0]);
	return rv == 0 ? 0 : 1;
}
