/* SPDX-License-Identifier: MIT */
/*
 * ycsbout.c: a ycsb run's figures in YCSB's own output form ([OVERALL],
 * RunTime(ms), ...; per operation Operations, AverageLatency(us), ...,
 * Return=OK), and the --json, --md and --plot files.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/core.h>

#include "ycsbout.h"

static const char *const phase_names[2] = {"load", "run"};

static void
print_op(const ycsb_result *r, int ph, int op, FILE *out)
{
	const ycsb_figs *f = &r->figs[ph][op];
	const char *name = ycsb_op_name((enum ycsb_op)op);

	fprintf(out, "[%s], Operations, %llu\n", name,
	        (unsigned long long)f->n);
	fprintf(out, "[%s], AverageLatency(us), %.3f\n", name,
	        (double)f->sum_ns / (double)f->n / 1e3);
	fprintf(out, "[%s], MinLatency(us), %llu\n", name,
	        (unsigned long long)(f->min_ns / 1000));
	fprintf(out, "[%s], MaxLatency(us), %llu\n", name,
	        (unsigned long long)(f->max_ns / 1000));
	fprintf(out, "[%s], 95thPercentileLatency(us), %.0f\n", name,
	        r->p95_us[ph][op]);
	fprintf(out, "[%s], 99thPercentileLatency(us), %.0f\n", name,
	        r->p99_us[ph][op]);
	for (int s = 0; s < YCSB_STATUSES; s++)
		if (f->status[s] || s == YCSB_OK)
			fprintf(out, "[%s], Return=%s, %llu\n", name,
			        ycsb_status_name((enum ycsb_status)s),
			        (unsigned long long)f->status[s]);
}

static void
print_phase(const ycsb_result *r, int ph, FILE *out)
{
	fprintf(out, "[OVERALL], RunTime(ms), %.0f\n", r->runtime_ms[ph]);
	fprintf(out, "[OVERALL], Throughput(ops/sec), %.2f\n",
	        r->throughput[ph]);
	for (int op = 0; op < YCSB_OPS; op++)
		if (r->figs[ph][op].n > 0)
			print_op(r, ph, op, out);
}

/* mix_text describes a workload's operations: "READ 50%, UPDATE 50%". */
static void
mix_text(const ycsb_workload *w, char *out, size_t len)
{
	size_t n = 0;

	out[0] = '\0';
	for (int op = 0; op < YCSB_OPS && n < len; op++)
		if (w->pct[op])
			n += (size_t)snprintf(
			    out + n, len - n, "%s%s %u%%", n ? ", " : "",
			    ycsb_op_name((enum ycsb_op)op), w->pct[op]);
}

static const char *
dist_of(const wbench_opts *o, const ycsb_workload *w)
{
	return wbench_dist_name(o->distribution ? o->distribution
	                                        : (int)w->dist);
}

int
ycsb_result_cmp(const void *a, const void *b)
{
	const ycsb_result *x = a, *y = b;

	if (x->workload != y->workload)
		return x->workload < y->workload ? -1 : 1;
	if (x->nodes != y->nodes)
		return x->nodes < y->nodes ? -1 : 1;
	return (x->io > y->io) - (x->io < y->io);
}

void
ycsb_print(const wbench_opts *o, const ycsb_result *r, bool with_load,
           FILE *out)
{
	const ycsb_workload *w = ycsb_workload_of(r->workload);
	char mix[96];

	mix_text(w, mix, sizeof(mix));
	fprintf(out,
	        "# weft-bench ycsb: workload %c (%s), %s, %u nodes (%s), "
	        "%llu records of %zu B,\n#   %u threads in %u client "
	        "processes of %u sessions%s\n",
	        r->workload, mix, dist_of(o, w), r->nodes,
	        r->io == WBENCH_IO_THREADS ? "threads: the thread-per-peer "
	                                     "baseline"
	                                   : "loop: weft's service",
	        (unsigned long long)o->records, o->size, o->threads,
	        o->client_list[0], o->sessions ? o->sessions : 1,
	        o->tls_dir ? ", mutual TLS" : "");
	if (with_load) {
		fprintf(out, "# load phase\n");
		print_phase(r, 0, out);
	} else {
		fprintf(out, "# load phase: the records as loaded and left by "
		             "the workloads before, on these nodes\n");
	}
	if (o->operations)
		fprintf(out, "# run phase: %llu operations after %g s\n",
		        (unsigned long long)o->operations, o->warmup_s);
	else
		fprintf(out, "# run phase: %g s after %g s\n", o->duration_s,
		        o->warmup_s);
	print_phase(r, 1, out);
	fprintf(out,
	        "# exactly once: %llu requests sent, %llu answered, %llu "
	        "lost, %llu answered twice%s%s\n\n",
	        (unsigned long long)r->sent, (unsigned long long)r->replies,
	        (unsigned long long)r->lost, (unsigned long long)r->duplicates,
	        r->first_error ? "; first error: " : "",
	        r->first_error ? weft_strerror(r->first_error) : "");
	fflush(out);
}

/* ---- --json ------------------------------------------------------------- */

static void
json_op(FILE *f, const ycsb_result *r, int ph, int op, bool first)
{
	const ycsb_figs *g = &r->figs[ph][op];
	bool any = false;

	fprintf(f,
	        "%s\"%s\": {\"operations\": %llu, \"avg_us\": %.3f, "
	        "\"min_us\": %.3f, \"max_us\": %.3f, \"p95_us\": %.0f, "
	        "\"p99_us\": %.0f, \"returns\": {",
	        first ? "" : ", ", ycsb_op_name((enum ycsb_op)op),
	        (unsigned long long)g->n,
	        (double)g->sum_ns / (double)g->n / 1e3, (double)g->min_ns / 1e3,
	        (double)g->max_ns / 1e3, r->p95_us[ph][op], r->p99_us[ph][op]);
	for (int s = 0; s < YCSB_STATUSES; s++)
		if (g->status[s]) {
			fprintf(f, "%s\"%s\": %llu", any ? ", " : "",
			        ycsb_status_name((enum ycsb_status)s),
			        (unsigned long long)g->status[s]);
			any = true;
		}
	fputs("}}", f);
}

static void
json_phase(FILE *f, const ycsb_result *r, int ph)
{
	bool first = true;

	fprintf(f, "\"%s\": {\"runtime_ms\": ", phase_names[ph]);
	wbench_json_num(f, "%.3f", r->runtime_ms[ph], r->ops[ph] > 0);
	fputs(", \"throughput\": ", f);
	wbench_json_num(f, "%.2f", r->throughput[ph], r->ops[ph] > 0);
	fputs(", \"ops\": {", f);
	for (int op = 0; op < YCSB_OPS; op++)
		if (r->figs[ph][op].n > 0) {
			json_op(f, r, ph, op, first);
			first = false;
		}
	fputs("}}", f);
}

static int
write_json(const wbench_opts *o, const ycsb_result *rows, unsigned n)
{
	FILE *f = fopen(o->json_path, "w");

	if (f == NULL) {
		perror(o->json_path);
		return -1;
	}
	fputs("{\n", f);
	wbench_json_env(f, o);
	fprintf(f,
	        "  \"workload\": \"ycsb\",\n  \"records\": %llu,\n"
	        "  \"size\": %zu,\n  \"threads\": %u,\n  \"clients\": %u,\n"
	        "  \"distribution\": ",
	        (unsigned long long)o->records, o->size, o->threads,
	        o->client_list[0]);
	if (o->distribution) /* null: each workload's own */
		wbench_json_str(f, wbench_dist_name(o->distribution));
	else
		fputs("null", f);
	fputs(",\n  \"operations\": ", f);
	wbench_json_num(f, "%.0f", (double)o->operations, o->operations > 0);
	fprintf(f,
	        ",\n  \"warmup_s\": %g,\n  \"duration_s\": %g,\n"
	        "  \"scan_length\": %u,\n  \"tls\": %s,\n  \"runs\": [",
	        o->warmup_s, o->duration_s, o->scan_length,
	        o->tls_dir ? "true" : "false");
	for (unsigned i = 0; i < n; i++) {
		const ycsb_result *r = &rows[i];

		fprintf(f,
		        "%s\n    {\"workload\": \"%c\", \"nodes\": %u, "
		        "\"io\": \"%s\", ",
		        i ? "," : "", r->workload, r->nodes,
		        wbench_io_name(r->io));
		json_phase(f, r, 0);
		fputs(", ", f);
		json_phase(f, r, 1);
		fprintf(f,
		        ", \"sent\": %llu, \"replies\": %llu, \"lost\": %llu, "
		        "\"duplicates\": %llu}",
		        (unsigned long long)r->sent,
		        (unsigned long long)r->replies,
		        (unsigned long long)r->lost,
		        (unsigned long long)r->duplicates);
	}
	fputs("\n  ]\n}\n", f);
	return fclose(f) == 0 ? 0 : -1;
}

/* ---- --md --------------------------------------------------------------- */

/* errors counts a phase's answers other than OK. */
static uint64_t
errors(const ycsb_result *r, int ph)
{
	uint64_t n = 0;

	for (int op = 0; op < YCSB_OPS; op++)
		n += r->figs[ph][op].n - r->figs[ph][op].status[YCSB_OK];
	return n;
}

/* The lines of HBASE-11297's comparison of two builds, per operation. */
enum md_line { MD_OPS, MD_AVG, MD_MIN, MD_MAX, MD_P95, MD_P99, MD_LINES };

static const char *const md_line_names[MD_LINES] = {
    "Operations",     "AverageLatency(us)",        "MinLatency(us)",
    "MaxLatency(us)", "95thPercentileLatency(us)", "99thPercentileLatency(us)"};

/* md_cell is one figure of the run phase: line l of operation op. */
static double
md_cell(const ycsb_result *r, int op, enum md_line l)
{
	const ycsb_figs *g = &r->figs[1][op];

	switch (l) {
	case MD_OPS:
		return (double)g->n;
	case MD_AVG:
		return (double)g->sum_ns / (double)g->n / 1e3;
	case MD_MIN:
		return (double)(g->min_ns / 1000);
	case MD_MAX:
		return (double)(g->max_ns / 1000);
	case MD_P95:
		return r->p95_us[1][op];
	default:
		return r->p99_us[1][op];
	}
}

/* md_side_by_side writes one workload on one node count in the form of
 * HBASE-11297's table: YCSB's run-phase lines down, one column per I/O
 * model (rows[0..n), sorted by ycsb_result_cmp). */
static void
md_side_by_side(FILE *f, const ycsb_result *rows, unsigned n)
{
	fprintf(f, "\n**Workload %c, %u nodes**\n\n|  |", rows[0].workload - 32,
	        rows[0].nodes);
	for (unsigned i = 0; i < n; i++)
		fprintf(f, " %s |",
		        rows[i].io == WBENCH_IO_LOOP ? "weft (loop)"
		                                     : "baseline (threads)");
	fputs("\n|---|", f);
	for (unsigned i = 0; i < n; i++)
		fputs("---:|", f);
	fputs("\n| [OVERALL] RunTime(ms) |", f);
	for (unsigned i = 0; i < n; i++)
		fprintf(f, " %.0f |", rows[i].runtime_ms[1]);
	fputs("\n| [OVERALL] Throughput(ops/sec) |", f);
	for (unsigned i = 0; i < n; i++)
		fprintf(f, " %.2f |", rows[i].throughput[1]);
	fputc('\n', f);
	for (int op = 0; op < YCSB_OPS; op++) {
		uint64_t any = 0;

		for (unsigned i = 0; i < n; i++)
			any += rows[i].figs[1][op].n;
		if (any == 0)
			continue;
		for (int l = 0; l < MD_LINES; l++) {
			fprintf(f, "| [%s] %s |",
			        ycsb_op_name((enum ycsb_op)op),
			        md_line_names[l]);
			for (unsigned i = 0; i < n; i++)
				if (rows[i].figs[1][op].n == 0)
					fputs(" - |", f);
				else
					fprintf(f,
					        l == MD_AVG ? " %.3f |"
					                    : " %.0f |",
					        md_cell(&rows[i], op, l));
			fputc('\n', f);
		}
	}
}

static int
write_md(const wbench_opts *o, const ycsb_result *rows, unsigned n)
{
	FILE *f = fopen(o->md_path, "w");

	if (f == NULL) {
		perror(o->md_path);
		return -1;
	}
	fputs("| workload | nodes | io | load ops/s | run ops/s |", f);
	for (int op = 0; op < YCSB_OPS; op++)
		fprintf(f, " %s avg / p99 us |",
		        ycsb_op_name((enum ycsb_op)op));
	fputs(" errors |\n|---|---|---|---|---|---|---|---|---|---|---|\n", f);
	for (unsigned i = 0; i < n; i++) {
		const ycsb_result *r = &rows[i];

		fprintf(f, "| %c | %u | %s | %.0f | %.0f |", r->workload - 32,
		        r->nodes, wbench_io_name(r->io), r->throughput[0],
		        r->throughput[1]);
		for (int op = 0; op < YCSB_OPS; op++) {
			const ycsb_figs *g = &r->figs[1][op];

			if (g->n == 0)
				fputs(" - |", f);
			else
				fprintf(f, " %.0f / %.0f |",
				        (double)g->sum_ns / (double)g->n / 1e3,
				        r->p99_us[1][op]);
		}
		fprintf(f, " %llu |\n", (unsigned long long)errors(r, 1));
	}
	for (unsigned i = 0, j; i < n; i = j) {
		for (j = i + 1; j < n && rows[j].workload == rows[i].workload &&
		                rows[j].nodes == rows[i].nodes;
		     j++)
			;
		md_side_by_side(f, &rows[i], j - i);
	}
	return fclose(f) == 0 ? 0 : -1;
}

/* ---- --plot ------------------------------------------------------------- */

/* plot draws the run phase's throughput per workload, and for each node
 * count the p99 of every operation per workload. */
static int
plot(const wbench_opts *o, const ycsb_result *rows, unsigned n)
{
	unsigned np = 1 + (o->npeer_list < 3 ? o->npeer_list : 3);
	wbench_plot_panel *p = calloc(np, sizeof(*p));
	char xtics[160] = "", t[64], ylabel[3][40];
	int rv;

	if (p == NULL)
		return -1;
	for (unsigned w = 0; w < o->nycsb_list; w++)
		snprintf(xtics + strlen(xtics), sizeof(xtics) - strlen(xtics),
		         "%s'%c' %d", w ? ", " : "", o->ycsb_list[w] - 32,
		         o->ycsb_list[w] - 'a' + 1);
	for (unsigned k = 0; k < np; k++) {
		p[k].xlabel = "workload";
		p[k].xtics = xtics;
		p[k].logy = k > 0;
		p[k].points = true;
	}
	p[0].ylabel = "run phase ops/s";
	for (unsigned k = 1; k < np; k++) {
		snprintf(ylabel[k - 1], sizeof(ylabel[0]),
		         "p99 latency (ms), %u nodes", o->peer_list[k - 1]);
		p[k].ylabel = ylabel[k - 1];
	}
	for (unsigned i = 0; i < n; i++) {
		const ycsb_result *r = &rows[i];
		double x = r->workload - 'a' + 1;

		snprintf(t, sizeof(t), "%u nodes, %s", r->nodes,
		         wbench_io_name(r->io));
		wbench_plot_add(&p[0], t, x, r->throughput[1]);
		for (unsigned k = 1; k < np; k++) {
			if (o->peer_list[k - 1] != r->nodes)
				continue;
			for (int op = 0; op < YCSB_OPS; op++) {
				if (r->figs[1][op].n == 0)
					continue;
				snprintf(t, sizeof(t), "%s, %s",
				         wbench_io_name(r->io),
				         ycsb_op_name((enum ycsb_op)op));
				wbench_plot_add(&p[k], t, x,
				                r->p99_us[1][op] / 1e3);
			}
		}
	}
	snprintf(t, sizeof(t),
	         "weft-bench ycsb: %llu records of %zu B, %u "
	         "threads",
	         (unsigned long long)o->records, o->size, o->threads);
	rv = wbench_plot_draw(o->plot_path, t, p, np);
	free(p);
	return rv;
}

int
ycsb_write_reports(const wbench_opts *o, const ycsb_result *rows, unsigned n)
{
	int rv = 0;

	if (o->json_path && write_json(o, rows, n) != 0)
		rv = -1;
	if (o->md_path && write_md(o, rows, n) != 0)
		rv = -1;
	if (o->plot_path && plot(o, rows, n) != 0)
		rv = -1;
	return rv;
}
