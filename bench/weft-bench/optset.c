/* SPDX-License-Identifier: MIT */
/*
 * optset.c: what each option of weft-bench sets (opts.c lists them), and
 * after the command line, each workload's defaults and the checks that
 * options make sense together.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/kv.h>

#include "optcodes.h"

/* A setter's answer for an option it does not set. */
#define NOT_MINE 1

static const char *const client_words[] = {"async", "sync", NULL};
static const char *const handler_words[] = {"inline", "pool", NULL};
static const char *const rpc_impl_words[] = {"msvc", "pipeline", NULL};

static int
parse_impl(const char *s, enum wbench_impl *out)
{
	if (strcmp(s, "weft") == 0)
		*out = WBENCH_IMPL_WEFT;
	else if (strcmp(s, "raw") == 0)
		*out = WBENCH_IMPL_RAW;
	else if (strcmp(s, "both") == 0)
		*out = WBENCH_IMPL_BOTH;
	else
		return -1;
	return 0;
}

static int
parse_io(const char *s, enum wbench_io *io)
{
	if (strcmp(s, "loop") == 0)
		*io = WBENCH_IO_LOOP;
	else if (strcmp(s, "threads") == 0)
		*io = WBENCH_IO_THREADS;
	else if (strcmp(s, "both") == 0)
		*io = WBENCH_IO_BOTH;
	else
		return -1;
	return 0;
}

static int
parse_dist(const char *s, int *out)
{
	static const char *const names[] = {"zipfian", "uniform", "latest"};

	for (int i = 0; i < 3; i++)
		if (strcmp(s, names[i]) == 0) {
			*out = WBENCH_DIST_ZIPFIAN + i;
			return 0;
		}
	return -1;
}

/* parse_ycsb reads workload letters: "a", "a,b,f". */
static int
parse_ycsb(wbench_opts *o, const char *s)
{
	o->nycsb_list = 0;
	for (const char *p = s; *p; p++) {
		if (*p < 'a' || *p > 'f' || o->nycsb_list == 8 ||
		    (p[1] != ',' && p[1] != '\0') || (p[1] == ',' && !p[2]))
			return -1;
		o->ycsb_list[o->nycsb_list++] = *p;
		p += p[1] == ',';
	}
	return o->nycsb_list ? 0 : -1;
}

/* parse_hosts checks a --hosts list; the nodes are its entries. */
static int
parse_hosts(wbench_opts *o, const char *arg)
{
	char id[64], host[256];
	uint16_t port;
	unsigned n = 1;

	for (const char *p = arg; *p; p++)
		n += *p == ',';
	if (n > 1024)
		return -1;
	for (unsigned i = 0; i < n; i++)
		if (wbench_host_at(arg, i, id, host, &port) != 0)
			return -1;
	o->hosts = arg;
	o->peers = n;
	o->peer_list[0] = n;
	o->npeer_list = 1;
	return 0;
}

/* set_count sets a count option in [lo, hi]. */
static int
set_count(const char *arg, bool binary, uint64_t lo, uint64_t hi, uint64_t *out)
{
	uint64_t v;

	if (wbench_parse_num(arg, binary, &v) != 0 || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

static int
set_unsigned(const char *arg, uint64_t lo, uint64_t hi, unsigned *out)
{
	uint64_t v;

	if (set_count(arg, false, lo, hi, &v) != 0)
		return -1;
	*out = (unsigned)v;
	return 0;
}

/* pipeline_opt sets the throughput and latency options. */
static int
pipeline_opt(wbench_opts *o, int code, const char *arg)
{
	uint64_t v;

	switch (code) {
	case O_COUNT:
		return set_count(arg, false, 1, UINT64_MAX / 4, &o->count);
	case O_WARMUP_COUNT:
		return set_count(arg, false, 0, UINT64_MAX / 4,
		                 &o->warmup_count);
	case O_IMPL:
		/* rpc's servers, and the one a node process is. */
		if (o->workload == WBENCH_RPC ||
		    o->workload == WBENCH_CLUSTER_NODE)
			return wbench_parse_words(arg, rpc_impl_words,
			                          &o->rpc_impls);
		return parse_impl(arg, &o->impl);
	case O_REPEAT:
		return set_unsigned(arg, 1, 64, &o->repeat);
	case O_BATCH:
		if (set_count(arg, false, 1, 1000000, &v) != 0)
			return -1;
		o->batch = (size_t)v;
		return 0;
	case O_BUSY_POLL:
		if (set_count(arg, false, 0, 1000000, &v) != 0)
			return -1;
		o->busy_poll_us = (uint32_t)v;
		return 0;
	case O_VERIFY:
		o->verify = true;
		return 0;
	case O_TLS_COMPARE:
		o->tls_compare = true;
		return 0;
	case O_LISTEN:
	case O_CONNECT:
		if (o->role != WBENCH_ROLE_BOTH)
			return -1;
		o->role =
		    code == O_LISTEN ? WBENCH_ROLE_LISTEN : WBENCH_ROLE_CONNECT;
		o->addr = arg;
		return 0;
	case O_PEER:
		if (strcmp(arg, "thread") == 0)
			o->peer = WBENCH_PEER_THREAD;
		else if (strcmp(arg, "process") == 0)
			o->peer = WBENCH_PEER_PROCESS;
		else
			return -1;
		return 0;
	}
	return NOT_MINE;
}

/* series_opt sets the options that list the points of a series. */
static int
series_opt(wbench_opts *o, int code, const char *arg)
{
	switch (code) {
	case O_PEERS:
		o->peers_given = true;
		if (wbench_parse_list(arg, 1, 1024, o->peer_list, 16,
		                      &o->npeer_list) != 0)
			return -1;
		o->peers = o->peer_list[0];
		return 0;
	case O_OUTSTANDING:
		if (wbench_parse_list(arg, 0, 100000, o->depth_list, 8,
		                      &o->ndepth_list) != 0)
			return -1;
		o->depth_given = true;
		o->outstanding = o->depth_list[0];
		return 0;
	case O_CLIENTS:
		o->clients_given = true;
		return wbench_parse_list(arg, 1, 1000, o->client_list, 8,
		                         &o->nclient_list);
	case O_MIXES:
		return wbench_parse_list(arg, 0, 100, o->mix_list, 8,
		                         &o->nmix_list);
	case O_SESSIONS:
		return set_unsigned(arg, 1, 100000, &o->sessions);
	case O_KEYS:
		o->keys_given = true;
		return set_unsigned(arg, 1, 100000000, &o->keys);
	case O_CLIENT:
		return wbench_parse_words(arg, client_words, &o->client_modes);
	case O_HANDLERS:
		if (wbench_parse_words(arg, handler_words, &o->handler_modes))
			return -1;
		o->handlers_pool = o->handler_modes == WBENCH_HANDLERS_POOL;
		return 0;
	}
	return NOT_MINE;
}

/* ycsb_opt sets the YCSB options. */
static int
ycsb_opt(wbench_opts *o, int code, const char *arg)
{
	switch (code) {
	case O_WORKLOAD:
		return parse_ycsb(o, arg);
	case O_DISTRIBUTION:
		return parse_dist(arg, &o->distribution);
	case O_RECORDS:
		return set_count(arg, false, 1, 100000000, &o->records);
	case O_OPERATIONS:
		return set_count(arg, false, 1, UINT64_MAX / 4, &o->operations);
	case O_THREADS:
		return set_unsigned(arg, 1, 10000, &o->threads);
	case O_SCAN_LENGTH:
		return set_unsigned(arg, 1, 1000, &o->scan_length);
	}
	return series_opt(o, code, arg);
}

/* wire_opt sets the options of the messaging service's wire and of the
 * payloads. */
static int
wire_opt(wbench_opts *o, int code, const char *arg)
{
	uint64_t v;

	switch (code) {
	case O_COMPRESSION:
		o->wire_given = true;
		return wbench_parse_compression(arg, &o->compression);
	case O_PAYLOAD:
		o->wire_given = true;
		return wbench_payload_parse(arg, &o->payload);
	case O_LARGE_SHARE:
		return wbench_parse_double(arg, 0, 1, &o->large_share) != 0 ||
		               o->large_share <= 0
		           ? -1
		           : 0;
	case O_LARGE_SIZE:
		if (set_count(arg, true, 1, WBENCH_MAX_MESSAGE, &v) != 0)
			return -1;
		o->large_size = (size_t)v;
		return 0;
	case O_IN_FLIGHT:
		return set_count(arg, false, 0, 1000000000, &o->in_flight);
	}
	return ycsb_opt(o, code, arg);
}

/* node_opt sets the options of the nodes and of the node workloads. */
static int
node_opt(wbench_opts *o, int code, const char *arg)
{
	switch (code) {
	case O_DURATION:
		o->duration_given = true;
		return wbench_parse_seconds(arg, &o->duration_s) ||
		               o->duration_s <= 0
		           ? -1
		           : 0;
	case O_IO:
		return parse_io(arg, &o->io);
	case O_HOSTS:
		return parse_hosts(o, arg);
	case O_CLUSTER_NAME:
		o->cluster_name = arg;
		return 0;
	case O_COORDINATOR: {
		char id[64], host[256];
		uint16_t port;

		if (strchr(arg, '@') == NULL || strchr(arg, ',') != NULL ||
		    wbench_host_at(arg, 0, id, host, &port) != 0)
			return -1;
		o->coordinator = arg;
		return 0;
	}
	case O_NETNS:
		o->netns = true;
		return 0;
	case O_PROBE:
		o->probe = true;
		return 0;
	case O_FLOOD_IDLE:
		o->flood_idle = true;
		return 0;
	case O_FLOOD_CAP: {
		unsigned cap;

		if (set_unsigned(arg, 0, 1000000, &cap) != 0)
			return -1;
		o->flood_cap = (int)cap;
		return 0;
	}
	case O_WEFTD:
		o->weftd_path = arg;
		return 0;
	case O_PLOT:
		o->plot_path = arg;
		return 0;
	case O_RATE:
		return wbench_parse_double(arg, 0, 1e8, &o->rate);
	case O_SLOW_FRACTION:
		return wbench_parse_double(arg, 0, 1, &o->slow_fraction);
	case O_SLOW_MS:
		return wbench_parse_double(arg, 0, 60000, &o->slow_ms);
	case O_NODE:
		return set_unsigned(arg, 0, 1024, &o->node_index);
	case O_CLIENT_INDEX:
		o->client = true;
		return set_unsigned(arg, 0, 1000, &o->node_index);
	case O_KV:
		o->kv = true;
		return 0;
	case O_CONSISTENCY: {
		weft_kv_consistency cl;

		if (weft_kv_consistency_parse(arg, &cl) != 0)
			return -1;
		o->consistency = (unsigned)cl;
		return 0;
	}
	case O_READ_PCT:
		return set_unsigned(arg, 0, 100, &o->read_pct);
	case O_NCLIENTS:
		return set_unsigned(arg, 1, 1000, &o->nclients);
	}
	return wire_opt(o, code, arg);
}

/* max_size is the largest --size of o's workload: messages of weft's
 * messaging service may be chunked, a frame may not. */
static uint64_t
max_size(const wbench_opts *o)
{
	switch (o->workload) {
	case WBENCH_CLUSTER:
	case WBENCH_RPC:
	case WBENCH_CLUSTER_NODE:
	case WBENCH_RPC_CLIENT:
		return WBENCH_MAX_MESSAGE;
	default:
		return WBENCH_MAX_SIZE;
	}
}

int
wbench__opt_apply(wbench_opts *o, int code, const char *arg)
{
	uint64_t v;
	int rv;

	switch (code) {
	case O_SIZE:
		if (set_count(arg, true, 0, max_size(o), &v) != 0)
			return -1;
		o->size = (size_t)v;
		o->size_given = true;
		return 0;
	case O_WARMUP:
		o->warmup_given = true;
		o->warmup_by_time = o->workload <= WBENCH_LATENCY;
		return wbench_parse_seconds(arg, &o->warmup_s);
	case O_SEED:
		return set_count(arg, false, 0, UINT64_MAX, &o->seed);
	case O_JSON:
		o->json_path = arg;
		return 0;
	case O_CSV:
		o->csv_path = arg;
		return 0;
	case O_MD:
		o->md_path = arg;
		return 0;
	case O_TLS:
		o->tls_dir = arg;
		return 0;
	case O_QUIET:
		o->quiet = true;
		return 0;
	case O_TIMEOUT:
		if (set_count(arg, false, 1, 86400, &v) != 0)
			return -1;
		o->timeout_ms = v * 1000;
		return 0;
	}
	if ((rv = pipeline_opt(o, code, arg)) == NOT_MINE)
		rv = node_opt(o, code, arg);
	return rv == 0 ? 0 : -1;
}

/* ---- After the command line --------------------------------------------- */

static int
fail(const wbench_opts *o, const char *why)
{
	fprintf(stderr, "weft-bench %s: %s\n",
	        wbench_workload_name(o->workload), why);
	return -1;
}

/* pipeline_defaults picks the counts of throughput and latency. */
static int
pipeline_defaults(wbench_opts *o)
{
	if (o->warmup_by_time && o->warmup_count != UINT64_MAX)
		return fail(o, "--warmup (seconds) or --warmup-count "
		               "(messages), not both");
	if (o->count == 0 && o->workload == WBENCH_LATENCY)
		o->count = 50000;
	if (o->count == 0) {
		uint64_t by_bytes =
		    (UINT64_C(4) << 30) / (o->size ? o->size : 1);

		o->count = by_bytes < 10000000 ? by_bytes : 10000000;
	}
	if (o->warmup_by_time)
		o->warmup_count = 0;
	else if (o->warmup_count == UINT64_MAX)
		o->warmup_count =
		    o->count / 10 < 1000000 ? o->count / 10 : 1000000;
	if (o->tls_compare &&
	    (o->tls_dir == NULL || o->role != WBENCH_ROLE_BOTH))
		return fail(o, "--tls-compare needs --tls DIR, and no "
		               "--listen or --connect");
	if (o->tls_compare)
		o->impl = WBENCH_IMPL_WEFT;
	if (o->role != WBENCH_ROLE_BOTH && o->impl == WBENCH_IMPL_BOTH)
		return fail(o,
		            "--listen and --connect need --impl weft or raw");
	return 0;
}

/* check_wire checks the wire and payload options of cluster and rpc:
 * local nodes of weft's service only, and messages above a frame only
 * where they may be chunked. */
static int
check_wire(wbench_opts *o)
{
	size_t largest = o->size > o->large_size ? o->size : o->large_size;
	bool msvc =
	    o->workload == WBENCH_CLUSTER || (o->rpc_impls & WBENCH_RPC_MSVC);

	if (o->large_size > 0 && o->large_share == 0)
		return fail(o, "--large-size: with --large-share");
	if (o->large_share > 0 && o->large_size == 0)
		o->large_size = largest = (size_t)4 << 20;
	if ((o->wire_given || o->large_share > 0) &&
	    (o->hosts != NULL || o->netns))
		return fail(o,
		            "--compression, --payload, --large-share: "
		            "weft-bench's own nodes, not --hosts or --netns");
	if (o->compression != 0 && (o->rpc_impls & WBENCH_RPC_PIPELINE))
		return fail(o, "--compression is the messaging service's: "
		               "not with --impl pipeline");
	if (largest > WBENCH_MAX_SIZE && msvc && (o->io & WBENCH_IO_THREADS))
		return fail(o, "payloads above 16M: --io loop (the "
		               "thread-per-peer baseline reads one frame of at "
		               "most 32 MiB)");
	return 0;
}

/* check_cluster: P nodes of 2 or more; --clients, --netns and --plot
 * with --hosts as they fit. */
static int
check_cluster(wbench_opts *o)
{
	for (unsigned i = 0; o->hosts == NULL && i < o->npeer_list; i++)
		if (o->peer_list[i] < 2)
			return fail(o, "a cluster has 2 nodes or more");
	if (o->clients_given && o->hosts == NULL)
		return fail(o, "--clients needs --hosts (local clients of "
		               "weftd nodes)");
	if (o->coordinator != NULL && o->hosts == NULL)
		return fail(o, "--coordinator is for --hosts");
	if (o->plot_path != NULL && o->hosts != NULL)
		return fail(o, "--plot draws local and --netns series, not "
		               "--hosts");
	if (o->netns && (o->hosts != NULL || o->io == WBENCH_IO_THREADS))
		return fail(o, "--netns runs weftd nodes: not with --hosts or "
		               "--io threads");
	if (o->netns)
		o->io = WBENCH_IO_LOOP;
	if (o->hosts != NULL) {
		if (!o->clients_given) {
			o->client_list[0] = 1;
			o->nclient_list = 1;
		}
		o->io = WBENCH_IO_LOOP;
	}
	return check_wire(o);
}

static int
check_rpc(wbench_opts *o)
{
	if (!o->depth_given) {
		o->depth_list[0] = 1;
		o->depth_list[1] = 32;
		o->ndepth_list = 2;
	}
	if ((o->client_modes & WBENCH_CLIENT_SYNC) && o->rate > 0)
		return fail(o, "--rate is an open loop of asynchronous "
		               "clients: not with --client sync");
	for (unsigned i = 0; i < o->ndepth_list; i++)
		if (o->depth_list[i] == 0)
			return fail(o, "--outstanding: 1 or more");
	if ((o->handler_modes & WBENCH_HANDLERS_POOL) &&
	    (o->io & WBENCH_IO_THREADS))
		return fail(o, "--handlers pool is weft's worker pool: the "
		               "baseline runs handlers on its reader threads; "
		               "add --io loop");
	if ((o->rpc_impls & WBENCH_RPC_PIPELINE) &&
	    (o->client_modes != WBENCH_CLIENT_ASYNC ||
	     o->handler_modes != WBENCH_HANDLERS_INLINE || o->rate > 0 ||
	     o->slow_fraction > 0 || o->tls_dir != NULL))
		return fail(o, "--impl pipeline: asynchronous clients, "
		               "inline handlers, a closed loop in plaintext "
		               "(not --client sync, --handlers pool, --rate, "
		               "--slow-fraction, --tls)");
	/* The fairness run is about weft's loop: the baseline has none. */
	if (o->probe && o->io == WBENCH_IO_BOTH)
		o->io = WBENCH_IO_LOOP;
	if (o->flood_cap >= 0 && !o->probe && o->workload == WBENCH_RPC)
		return fail(o, "--flood-cap: with --probe");
	if (o->probe &&
	    (o->client_modes != WBENCH_CLIENT_ASYNC ||
	     (o->handler_modes != WBENCH_HANDLERS_INLINE &&
	      o->handler_modes != WBENCH_HANDLERS_POOL) ||
	     o->io != WBENCH_IO_LOOP || o->rpc_impls != WBENCH_RPC_MSVC ||
	     o->rate > 0 || o->json_path != NULL || o->csv_path != NULL ||
	     o->md_path != NULL || o->plot_path != NULL))
		return fail(o,
		            "--probe: asynchronous clients, inline or "
		            "pool handlers, --io loop on weft's service, a "
		            "closed loop; its table only (not --json, --csv, "
		            "--md, --plot)");
	return check_wire(o);
}

/* mix_defaults: 3 and 5 nodes, 8 clients x 32, 1 KiB values, unless
 * given. */
static void
mix_defaults(wbench_opts *o)
{
	if (!o->peers_given && o->hosts == NULL) {
		o->peer_list[0] = 3;
		o->peer_list[1] = 5;
		o->npeer_list = 2;
	}
	if (!o->clients_given) {
		o->client_list[0] = 8;
		o->nclient_list = 1;
	}
	if (!o->depth_given) {
		o->depth_list[0] = 32;
		o->ndepth_list = 1;
		o->outstanding = 32;
	}
	if (!o->size_given)
		o->size = 1024;
}

static int
check_ycsb(wbench_opts *o)
{
	mix_defaults(o);
	if (!o->clients_given)
		o->client_list[0] = 2;
	if (o->nclient_list > 1)
		return fail(o, "--clients: one count");
	if (o->client_list[0] > o->threads)
		o->client_list[0] = o->threads;
	if (o->records < o->client_list[0])
		return fail(o, "--records: at least one per client");
	if (o->sessions > 0 &&
	    o->threads < (uint64_t)o->sessions * o->client_list[0])
		return fail(o, "--threads: at least one per session");
	if (o->sessions > 0 && o->tls_dir != NULL)
		return fail(o, "--sessions: not with --tls");
	if (o->size < 16)
		return fail(o, "--size: 16 bytes or more (a record starts "
		               "with its key number and its writer's stamp)");
	if (!o->duration_given)
		o->duration_s = o->operations ? o->timeout_ms / 1000.0 : 10;
	if (!o->warmup_given)
		o->warmup_s = 0;
	return 0;
}

static int
check_smoke(wbench_opts *o)
{
	if (!o->peers_given) {
		o->peer_list[0] = 1;
		o->peer_list[1] = 3;
		o->npeer_list = 2;
	}
	if (o->sessions > 0 && o->clients_given)
		return fail(o, "--sessions: the same as one --clients count, "
		               "not both");
	if (o->sessions > 0) {
		o->client_list[0] = o->sessions;
		o->nclient_list = 1;
	} else if (!o->clients_given) {
		o->client_list[0] = 1;
		o->client_list[1] = 10;
		o->client_list[2] = 20;
		o->nclient_list = 3;
	}
	if (!o->keys_given)
		o->keys = 10000;
	if (!o->size_given)
		o->size = 100;
	if (!o->depth_given)
		o->outstanding = 1000;
	if (o->ndepth_list > 1 || o->outstanding == 0)
		return fail(o, "--outstanding: one count, 1 or more");
	return 0;
}

int
wbench__opts_finish(wbench_opts *o)
{
	switch (o->workload) {
	case WBENCH_THROUGHPUT:
	case WBENCH_LATENCY:
		return pipeline_defaults(o);
	case WBENCH_CLUSTER:
		return check_cluster(o);
	case WBENCH_RPC:
		return check_rpc(o);
	case WBENCH_MIX:
		mix_defaults(o);
		/* A session's id is its own (cIsK); the test certificates
		 * name clients cI only. */
		if (o->sessions > 0 && o->tls_dir != NULL)
			return fail(o, "--sessions: not with --tls");
		if (o->hosts != NULL && (o->nmix_list != 1 || o->peers_given))
			return fail(o, "--hosts: one --mixes value, and the "
			               "nodes are its entries (no --peers)");
		return 0;
	case WBENCH_YCSB:
		return check_ycsb(o);
	case WBENCH_SMOKE:
		return check_smoke(o);
	default: /* the processes started by the others */
		return 0;
	}
}
