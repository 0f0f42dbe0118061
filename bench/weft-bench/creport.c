/* SPDX-License-Identifier: MIT */
/*
 * creport.c: the figures of the cluster, rpc and mix workloads: the table
 * on standard output, and the --json, --csv and --md files.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/core.h>
#include <weft/kv.h>

#include "wbench.h"

typedef wbench_cresult cresult;

static void
print_shape(const wbench_opts *o, FILE *out)
{
	if (o->workload == WBENCH_MIX && o->sessions > 0)
		fprintf(out,
		        "weft-bench mix: the replicated key-value service "
		        "on N nodes (--io: weft's service or the\n  "
		        "thread-per-peer baseline's), %u client processes "
		        "x %u sessions (each weft's service,\n  bound to one "
		        "node) x %u requests in flight, %u keys,",
		        o->client_list[0], o->sessions, o->outstanding,
		        o->keys);
	else if (o->workload == WBENCH_MIX)
		fprintf(out,
		        "weft-bench mix: the replicated key-value service "
		        "on N nodes (--io: weft's service or the\n  "
		        "thread-per-peer baseline's), %u client processes "
		        "(weft's service) x %u requests in flight,\n  %u keys,",
		        o->client_list[0], o->outstanding, o->keys);
	else if (o->workload == WBENCH_RPC)
		fprintf(out,
		        "weft-bench rpc: C client processes (weft's "
		        "service as clients; sync: D threads, one blocking\n"
		        "  call each; async: D requests in flight) against "
		        "one server (--io: weft's service, handlers\n  inline "
		        "or on its worker pool, or the thread-per-peer "
		        "baseline%s),",
		        o->rpc_impls & WBENCH_RPC_PIPELINE
		            ? "; or pipeline:\n  clients and a server of "
		              "weft's channels and codecs alone"
		            : "");
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
}

/* shows_wire: the table has the wire's columns (MB/s after ops/s; the
 * compression ratio and CPU per MB at the end) for payloads of 64 KiB
 * or more and when --compression, --payload or --large-share is given. */
static bool
shows_wire(const wbench_opts *o)
{
	return (o->workload == WBENCH_CLUSTER || o->workload == WBENCH_RPC) &&
	       (o->size >= (64u << 10) || o->large_share > 0 || o->wire_given);
}

/* mb_per_s is a row's payload MB/s, one payload per request (rows of
 * --hosts and --netns runs, made elsewhere, have only their op rate). */
static double
mb_per_s(const wbench_opts *o, const cresult *r)
{
	return o->large_share > 0 ? r->mb_per_s
	                          : r->ops_per_s * (double)o->size / 1e6;
}

/* print_wire_shape says what travels: the payload kind, the compression
 * and the large requests. */
static void
print_wire_shape(const wbench_opts *o, FILE *out)
{
	if (o->wire_given)
		fprintf(out, "  payloads %s, compression %s (weft's service)\n",
		        wbench_payload_name(o->payload),
		        wbench_compression_name(o->compression));
	if (o->large_share > 0)
		fprintf(out,
		        "  %g%% of requests carry %zu B; their p50/p99 and the "
		        "small ones' below each row\n",
		        o->large_share * 100, o->large_size);
}

void
wbench_cprint_header(const wbench_opts *o, FILE *out)
{
	print_shape(o, out);
	fprintf(out, " %zu B %s, warm-up %g s, window %g s%s\n", o->size,
	        o->workload == WBENCH_MIX ? "values" : "payloads echoed",
	        o->warmup_s, o->duration_s, o->tls_dir ? ", mutual TLS" : "");
	if (o->workload == WBENCH_MIX && o->consistency != 0)
		fprintf(out,
		        "  gets read at consistency %s: the newest of %s "
		        "replica's answer (weft's service and the\n  "
		        "baseline alike)\n",
		        wbench_consistency_name(o->consistency),
		        o->consistency == WEFT_KV_READ_ALL ? "every"
		                                           : "a majority's");
	if (o->slow_fraction > 0)
		fprintf(out,
		        "  %g%% of requests take %g ms more in the handler\n",
		        o->slow_fraction * 100, o->slow_ms);
	print_wire_shape(o, out);
	fprintf(out, "  %15s %-8s %10s",
	        o->workload == WBENCH_RPC              ? "CxD"
	        : o->workload == WBENCH_MIX            ? "N:get%"
	        : o->hosts != NULL && o->clients_given ? "CxK"
	                                               : "P",
	        "io", "ops/s");
	if (shows_wire(o))
		fprintf(out, " %9s", "MB/s");
	fprintf(out, " %8s %8s %8s %9s %9s %9s %8s %8s %8s %8s %8s %7s %8s %6s",
	        "mean us", "p50 us", "p95 us", "p99 us", "p99.9 us", "max us",
	        "vcsw/op", "ivcs/op", "cpu us/op", "RSS MB", "MB/node",
	        "threads", "msgs/wk", "errors");
	if (o->workload == WBENCH_RPC)
		fprintf(out, " %9s %9s", "srv us/op", "srv msg/wk");
	if (o->workload == WBENCH_MIX)
		fprintf(out, " %9s %9s %9s %9s", "gets/s", "get p99", "puts/s",
		        "put p99");
	if (shows_wire(o))
		fprintf(out, " %6s %9s", "ratio",
		        o->workload == WBENCH_RPC ? "srv us/MB" : "cpu us/MB");
	fputc('\n', out);
}

/* label names a row: P, CxD (and the rpc modes), or N:get%. */
static void
label(const cresult *r, char *out, size_t len)
{
	if (r->read_pct >= 0)
		snprintf(out, len, "%u:%d%%", r->peers, r->read_pct);
	else if (r->clients > 0)
		snprintf(out, len, "%ux%u%s%s", r->clients, r->depth,
		         r->sync ? " sync" : "", r->pool ? " pool" : "");
	else
		snprintf(out, len, "%u", r->peers);
}

/* print_wire_figs ends a row with the compression ratio ("-": nothing
 * compressed) and CPU per MB, and adds the line of the small and the
 * large requests. */
static void
print_wire_figs(const wbench_opts *o, const cresult *r, FILE *out)
{
	if (shows_wire(o) && r->wire_ratio > 0)
		fprintf(out, " %6.2f %9.1f", r->wire_ratio, r->cpu_us_per_mb);
	else if (shows_wire(o))
		fprintf(out, " %6s %9.1f", "-", r->cpu_us_per_mb);
	fputc('\n', out);
	if (o->large_share > 0)
		fprintf(out,
		        "       small %zu B: p50 %.1f us, p99 %.1f us (%llu); "
		        "large %zu B: p50 %.1f us, p99 %.1f us (%llu)\n",
		        o->size, r->small_p50_us, r->small_p99_us,
		        (unsigned long long)(r->ops - r->large_ops),
		        o->large_size, r->large_p50_us, r->large_p99_us,
		        (unsigned long long)r->large_ops);
}

/*
 * print_stress_summary: mix --consistency, the row as cassandra-stress
 * prints its summary (CASSANDRA-8457's form): latencies in milliseconds,
 * the measured window as the total operation time (the warm-up before it
 * is not counted), the reads' own rate in brackets.
 */
static void
print_stress_summary(const wbench_opts *o, const cresult *r, FILE *out)
{
	unsigned secs = (unsigned)(o->duration_s + 0.5);

	fprintf(out,
	        "       Results (%s, %u nodes, %u x %u clients, cl=%s):\n"
	        "       Op rate                   : %10.0f op/s  [READ: "
	        "%.0f op/s]\n"
	        "       Latency mean              : %10.1f ms\n"
	        "       Latency median            : %10.1f ms\n"
	        "       Latency 95th percentile   : %10.1f ms\n"
	        "       Latency 99th percentile   : %10.1f ms\n"
	        "       Latency 99.9th percentile : %10.1f ms\n"
	        "       Latency max               : %10.1f ms\n"
	        "       Total operations          : %10llu  [READ: %llu]\n"
	        "       Total errors              : %10llu  (reads coordinated "
	        "by the members: %llu)\n"
	        "       Total operation time      :   %02u:%02u:%02u\n",
	        wbench_server_name(r->io, r->pipeline), r->peers,
	        o->client_list[0], o->sessions > 0 ? o->sessions : 1,
	        wbench_consistency_name(o->consistency), r->ops_per_s,
	        r->get_ops_per_s, r->mean_us / 1000, r->p50_us / 1000,
	        r->p95_us / 1000, r->p99_us / 1000, r->p999_us / 1000,
	        r->max_us / 1000, (unsigned long long)r->ops,
	        (unsigned long long)r->gets, (unsigned long long)r->errors,
	        (unsigned long long)r->reads_coordinated, secs / 3600,
	        secs / 60 % 60, secs % 60);
}

void
wbench_cprint_row(const wbench_opts *o, const cresult *r, FILE *out)
{
	char name[48];

	label(r, name, sizeof(name));
	fprintf(out, "  %15s %-8s %10.0f", name,
	        wbench_server_name(r->io, r->pipeline), r->ops_per_s);
	if (shows_wire(o))
		fprintf(out, " %9.1f", mb_per_s(o, r));
	fprintf(out,
	        " %8.1f %8.1f %8.1f %9.1f %9.1f %9.1f %8.3f "
	        "%8.3f %8.2f %8.1f %8.2f %7llu %8.2f %6llu",
	        r->mean_us, r->p50_us, r->p95_us, r->p99_us, r->p999_us,
	        r->max_us, r->vcsw_per_op, r->ivcsw_per_op, r->cpu_us_per_op,
	        r->rss_mb, r->rss_mb_per_node, (unsigned long long)r->threads,
	        r->msgs_per_wakeup, (unsigned long long)r->errors);
	if (o->workload == WBENCH_RPC)
		fprintf(out, " %9.2f %9.2f", r->srv_cpu_us_per_op,
		        r->srv_msgs_per_wakeup);
	if (o->workload == WBENCH_MIX)
		fprintf(out, " %9.0f %9.1f %9.0f %9.1f", r->get_ops_per_s,
		        r->get_p99_us, r->put_ops_per_s, r->put_p99_us);
	print_wire_figs(o, r, out);
	if (o->workload == WBENCH_MIX && o->sessions > 0)
		fprintf(out,
		        "       members %.1f MB and %llu threads each, "
		        "clients %.1f MB (%.0f KB per session)\n",
		        r->member_rss_mb,
		        (unsigned long long)r->member_threads / r->peers,
		        r->client_rss_mb,
		        r->client_rss_mb * 1024 /
		            ((double)o->sessions * o->client_list[0]));
	if (r->runs > 1) {
		char what[64];

		fprintf(out,
		        "       %u runs: %.0f to %.0f ops/s (spread %.0f%%), "
		        "p99 %.1f to %.1f us\n",
		        r->runs, r->ops_lo, r->ops_hi,
		        r->ops_per_s > 0
		            ? (r->ops_hi - r->ops_lo) / r->ops_per_s * 100
		            : 0,
		        r->p99_lo, r->p99_hi);
		label(r, what, sizeof(what) - 12);
		snprintf(what + strlen(what), 12, " %s",
		         wbench_server_name(r->io, r->pipeline));
		wbench_spread_warn(what, r->ops_lo, r->ops_hi, r->ops_per_s);
	}
	if (o->workload == WBENCH_MIX && o->consistency != 0)
		print_stress_summary(o, r, out);
	if (r->up_ms > 0)
		fprintf(out, "       all up in %.0f ms (%.0f ms of CPU)\n",
		        r->up_ms, r->up_cpu_ms);
	if (r->up_handshakes > 0)
		fprintf(out,
		        "       TLS handshakes by then %llu (both ends "
		        "counted), %llu resumed; %.0f us of CPU per "
		        "connection\n",
		        (unsigned long long)r->up_handshakes,
		        (unsigned long long)r->up_resumed,
		        r->up_cpu_ms * 1e3 / (double)r->up_handshakes * 2);
	if (r->first_error != 0)
		fprintf(out, "       first error: %s\n",
		        weft_strerror(r->first_error));
}

void
wbench_cprint_ratio(const cresult *loop, const cresult *thr, FILE *out)
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

/* ---- --json ------------------------------------------------------------- */

/* json_fig writes ", "name": v" (null when not measured). */
static void
json_fig(FILE *f, const char *name, const char *fmt, double v, bool measured)
{
	fprintf(f, ", \"%s\": ", name);
	wbench_json_num(f, fmt, v, measured);
}

/* json_modes writes an rpc row's client and handler modes. */
static void
json_modes(FILE *f, const wbench_opts *o, const cresult *r)
{
	bool rpc = o->workload == WBENCH_RPC;

	fputs(", \"client\": ", f);
	if (rpc)
		wbench_json_str(f, r->sync ? "sync" : "async");
	else
		fputs("null", f);
	fputs(", \"handlers\": ", f);
	if (rpc)
		wbench_json_str(f, r->io == WBENCH_IO_THREADS ? "reader threads"
		                   : r->pool                  ? "pool"
		                                              : "inline");
	else
		fputs("null", f);
	json_fig(f, "srv_cpu_us_per_op", "%.3f", r->srv_cpu_us_per_op,
	         rpc && r->srv_cpu_us_per_op > 0);
	json_fig(f, "srv_msgs_per_wakeup", "%.3f", r->srv_msgs_per_wakeup,
	         rpc && r->srv_msgs_per_wakeup > 0);
}

/* json_verbs writes a mix row's gets and puts. */
static void
json_verbs(FILE *f, const cresult *r)
{
	bool mix = r->read_pct >= 0;

	json_fig(f, "gets", "%.0f", (double)r->gets, mix);
	json_fig(f, "puts", "%.0f", (double)r->puts, mix);
	json_fig(f, "get_ops_per_s", "%.1f", r->get_ops_per_s, mix);
	json_fig(f, "put_ops_per_s", "%.1f", r->put_ops_per_s, mix);
	json_fig(f, "get_p50_us", "%.2f", r->get_p50_us, mix && r->gets);
	json_fig(f, "get_p99_us", "%.2f", r->get_p99_us, mix && r->gets);
	json_fig(f, "put_p50_us", "%.2f", r->put_p50_us, mix && r->puts);
	json_fig(f, "put_p99_us", "%.2f", r->put_p99_us, mix && r->puts);
}

/* json_wire writes a cluster or rpc row's wire figures. */
static void
json_wire(FILE *f, const wbench_opts *o, const cresult *r)
{
	bool wire = o->workload == WBENCH_CLUSTER || o->workload == WBENCH_RPC;
	bool large = o->large_share > 0;

	json_fig(f, "mb_per_s", "%.3f", mb_per_s(o, r), wire && r->ops > 0);
	json_fig(f, "cpu_us_per_mb", "%.2f", r->cpu_us_per_mb,
	         wire && r->cpu_us_per_mb > 0);
	json_fig(f, "wire_ratio", "%.3f", r->wire_ratio, r->wire_ratio > 0);
	json_fig(f, "large_ops", "%.0f", (double)r->large_ops, large);
	json_fig(f, "small_p50_us", "%.2f", r->small_p50_us, large);
	json_fig(f, "small_p99_us", "%.2f", r->small_p99_us, large);
	json_fig(f, "large_p50_us", "%.2f", r->large_p50_us,
	         large && r->large_ops);
	json_fig(f, "large_p99_us", "%.2f", r->large_p99_us,
	         large && r->large_ops);
}

static void
json_row(FILE *f, const wbench_opts *o, const cresult *r, bool first)
{
	bool timed = r->ops > 0;

	fprintf(f, "%s\n    {\"peers\": %u", first ? "" : ",", r->peers);
	json_fig(f, "clients", "%.0f", r->clients, r->clients > 0);
	json_fig(f, "depth", "%.0f", r->depth, r->clients > 0);
	json_fig(f, "read_pct", "%.0f", r->read_pct, r->read_pct >= 0);
	fprintf(f, ", \"io\": \"%s\", \"ops\": %llu, \"errors\": %llu",
	        wbench_server_name(r->io, r->pipeline),
	        (unsigned long long)r->ops, (unsigned long long)r->errors);
	json_fig(f, "ops_per_s", "%.1f", r->ops_per_s, timed);
	json_fig(f, "mean_us", "%.2f", r->mean_us, timed);
	json_fig(f, "p50_us", "%.2f", r->p50_us, timed);
	json_fig(f, "p95_us", "%.2f", r->p95_us, timed);
	json_fig(f, "p99_us", "%.2f", r->p99_us, timed);
	json_fig(f, "p999_us", "%.2f", r->p999_us, timed);
	json_fig(f, "max_us", "%.2f", r->max_us, timed);
	json_fig(f, "vcsw_per_op", "%.4f", r->vcsw_per_op, timed);
	json_fig(f, "ivcsw_per_op", "%.4f", r->ivcsw_per_op, timed);
	json_fig(f, "cpu_us_per_op", "%.3f", r->cpu_us_per_op, timed);
	fprintf(f,
	        ", \"rss_mb\": %.2f, \"rss_mb_per_node\": %.3f, "
	        "\"threads\": %llu",
	        r->rss_mb, r->rss_mb_per_node, (unsigned long long)r->threads);
	if (o->sessions > 0)
		fprintf(f,
		        ", \"sessions\": %u, \"member_rss_mb\": %.1f, "
		        "\"client_rss_mb\": %.1f, \"member_threads\": %llu",
		        o->sessions, r->member_rss_mb, r->client_rss_mb,
		        (unsigned long long)r->member_threads);
	if (o->workload == WBENCH_MIX && o->consistency != 0)
		fprintf(f,
		        ", \"consistency\": \"%s\", \"gets\": %llu, "
		        "\"reads_coordinated\": %llu",
		        wbench_consistency_name(o->consistency),
		        (unsigned long long)r->gets,
		        (unsigned long long)r->reads_coordinated);
	json_fig(f, "msgs_per_wakeup", "%.3f", r->msgs_per_wakeup,
	         r->msgs_per_wakeup > 0);
	json_fig(f, "up_ms", "%.1f", r->up_ms, r->up_ms > 0);
	json_fig(f, "up_cpu_ms", "%.1f", r->up_cpu_ms, r->up_ms > 0);
	json_fig(f, "up_handshakes", "%.0f", (double)r->up_handshakes,
	         r->up_handshakes > 0);
	json_fig(f, "up_resumed", "%.0f", (double)r->up_resumed,
	         r->up_handshakes > 0);
	json_fig(f, "repeat", "%.0f", r->runs, r->runs > 1);
	json_fig(f, "ops_per_s_lo", "%.1f", r->ops_lo, r->runs > 1);
	json_fig(f, "ops_per_s_hi", "%.1f", r->ops_hi, r->runs > 1);
	json_fig(f, "p99_us_lo", "%.2f", r->p99_lo, r->runs > 1);
	json_fig(f, "p99_us_hi", "%.2f", r->p99_hi, r->runs > 1);
	json_modes(f, o, r);
	json_verbs(f, r);
	json_wire(f, o, r);
	fprintf(f,
	        ", \"sent\": %llu, \"replies\": %llu, \"lost\": %llu, "
	        "\"duplicates\": %llu}",
	        (unsigned long long)r->sent, (unsigned long long)r->replies,
	        (unsigned long long)r->lost, (unsigned long long)r->duplicates);
}

static int
write_json(const wbench_opts *o, const cresult *rows, unsigned n)
{
	FILE *f = fopen(o->json_path, "w");

	if (f == NULL) {
		perror(o->json_path);
		return -1;
	}
	fputs("{\n", f);
	wbench_json_env(f, o);
	fprintf(f,
	        "  \"workload\": \"%s\",\n  \"outstanding\": %u,\n"
	        "  \"size\": %zu,\n  \"warmup_s\": %g,\n  \"duration_s\": %g,"
	        "\n  \"tls\": %s,\n  \"rate\": ",
	        wbench_workload_name(o->workload), o->outstanding, o->size,
	        o->warmup_s, o->duration_s, o->tls_dir ? "true" : "false");
	wbench_json_num(f, "%g", o->rate, o->rate > 0); /* null: closed */
	fprintf(f,
	        ",\n  \"slow_fraction\": %g,\n  \"slow_ms\": %g,\n"
	        "  \"payload\": \"%s\",\n  \"compression\": \"%s\",\n"
	        "  \"large_share\": %g,\n  \"large_size\": %zu,\n"
	        "  \"runs\": [",
	        o->slow_fraction, o->slow_ms, wbench_payload_name(o->payload),
	        wbench_compression_name(o->compression), o->large_share,
	        o->large_size);
	for (unsigned i = 0; i < n; i++)
		json_row(f, o, &rows[i], i == 0);
	fprintf(f, "\n  ]\n}\n");
	return fclose(f) == 0 ? 0 : -1;
}

/* ---- --csv -------------------------------------------------------------- */

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
		bool timed = r->ops > 0;

		wbench_csv_row_init(c, o);
		c->impl = wbench_server_name(r->io, r->pipeline);
		c->peers = r->peers;
		c->clients = r->clients;
		c->depth =
		    o->workload == WBENCH_CLUSTER ? o->outstanding : r->depth;
		c->read_pct = r->read_pct;
		c->ops_per_s = r->ops_per_s;
		c->mb_per_s = mb_per_s(o, r);
		c->p50_us = timed ? r->p50_us : -1;
		c->p99_us = timed ? r->p99_us : -1;
		c->p999_us = timed ? r->p999_us : -1;
		c->max_us = timed ? r->max_us : -1;
		c->ctxsw_per_op = r->vcsw_per_op + r->ivcsw_per_op;
		c->cpu_us_per_op = r->cpu_us_per_op;
		c->rss_mb = r->rss_mb;
		c->errors = r->errors + r->lost + r->duplicates;
	}
	rv = wbench_csv_write(o->csv_path, out, n);
	free(out);
	return rv;
}

/* ---- --md --------------------------------------------------------------- */

/* md_label is a row's first cell(s): P, C x D, or nodes | gets. */
static void
md_label(const wbench_opts *o, const cresult *r, char *out, size_t len)
{
	if (r->read_pct >= 0)
		snprintf(out, len, "%u | %d%%", r->peers, r->read_pct);
	else if (o->workload == WBENCH_RPC)
		snprintf(out, len, "%s | %s | %u x %u",
		         r->sync ? "sync" : "async",
		         r->io == WBENCH_IO_THREADS ? "reader threads"
		         : r->pool                  ? "pool"
		                                    : "inline",
		         r->clients, r->depth);
	else if (r->clients > 0)
		snprintf(out, len, "%u x %u", r->clients, r->depth);
	else
		snprintf(out, len, "%u", r->peers);
}

static void
md_header(const wbench_opts *o, FILE *f)
{
	if (o->workload == WBENCH_RPC)
		fputs("| client | handlers | C x D | io | ops/s | p50 ms | "
		      "p99 ms | p99.9 ms | server CPU us/op | server "
		      "msgs/wake-up | CPU us/op (all) | ctx-sw/op | threads | "
		      "errors |\n"
		      "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
		      "---|\n",
		      f);
	else if (o->workload == WBENCH_MIX)
		fprintf(f,
		        "| nodes | gets | io | ops/s | gets/s | get p99 ms | "
		        "puts/s | put p99 ms | p50 ms | p99 ms | p99.9 ms | "
		        "ctx-sw/op | CPU us/op | RSS MB (per node) | threads | "
		        "msgs/wake-up | errors |%s\n"
		        "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
		        "---|---|---|---|%s\n",
		        o->sessions > 0
		            ? " RSS MB per member | threads per member | "
		              "client RSS MB |"
		            : "",
		        o->sessions > 0 ? "---|---|---|" : "");
	else
		fputs("| P | io | ops/s | p50 ms | p99 ms | p99.9 ms | "
		      "ctx-sw/op | CPU us/op | RSS MB (per node) | threads | "
		      "msgs/wake-up | errors |\n"
		      "|---|---|---|---|---|---|---|---|---|---|---|---|\n",
		      f);
}

static void
md_row(const wbench_opts *o, const cresult *r, FILE *f)
{
	char name[64];

	md_label(o, r, name, sizeof(name));
	fprintf(f, "| %s | %s | %.0f | ", name,
	        wbench_server_name(r->io, r->pipeline), r->ops_per_s);
	if (o->workload == WBENCH_RPC) {
		fprintf(f,
		        "%.2f | %.2f | %.2f | %.2f | %.1f | %.2f | %.3f | "
		        "%llu | %llu |\n",
		        r->p50_us / 1e3, r->p99_us / 1e3, r->p999_us / 1e3,
		        r->srv_cpu_us_per_op, r->srv_msgs_per_wakeup,
		        r->cpu_us_per_op, r->vcsw_per_op + r->ivcsw_per_op,
		        (unsigned long long)r->threads,
		        (unsigned long long)r->errors);
		return;
	}
	if (o->workload == WBENCH_MIX)
		fprintf(f, "%.0f | %.2f | %.0f | %.2f | ", r->get_ops_per_s,
		        r->get_p99_us / 1e3, r->put_ops_per_s,
		        r->put_p99_us / 1e3);
	fprintf(f,
	        "%.2f | %.2f | %.2f | %.3f | %.2f | %.1f (%.2f) | %llu | "
	        "%.1f | %llu |",
	        r->p50_us / 1e3, r->p99_us / 1e3, r->p999_us / 1e3,
	        r->vcsw_per_op + r->ivcsw_per_op, r->cpu_us_per_op, r->rss_mb,
	        r->rss_mb_per_node, (unsigned long long)r->threads,
	        r->msgs_per_wakeup, (unsigned long long)r->errors);
	if (o->workload == WBENCH_MIX && o->sessions > 0)
		fprintf(f, " %.1f | %llu | %.1f |", r->member_rss_mb,
		        (unsigned long long)r->member_threads / r->peers,
		        r->client_rss_mb);
	fputc('\n', f);
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
	md_header(o, f);
	for (unsigned i = 0; i < n; i++)
		md_row(o, &rows[i], f);
	return fclose(f) == 0 ? 0 : -1;
}

int
wbench_cwrite_reports(const wbench_opts *o, const cresult *rows, unsigned n)
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
