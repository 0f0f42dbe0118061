/* SPDX-License-Identifier: MIT */
/* csv.c: --csv FILE, one row per run (throughput, latency) or per series
 * point (cluster, rpc, mix), with the same columns for every workload. */
#include <stdio.h>

#include "wbench.h"

static const char csv_header[] =
    "workload,impl,tls,size,peers,clients,depth,read_pct,ops_per_s,"
    "mb_per_s,p50_us,p99_us,p999_us,max_us,ctxsw_per_op,cpu_us_per_op,"
    "rss_mb,errors\n";

/* put_opt writes ",v", or "," alone for a figure not measured (< 0). */
static void
put_opt(FILE *f, const char *fmt, double v)
{
	fputc(',', f);
	if (v >= 0)
		fprintf(f, fmt, v);
}

static void
put_row(FILE *f, const wbench_csv_row *r)
{
	fprintf(f, "%s,%s,%d,%zu", r->workload, r->impl, r->tls ? 1 : 0,
	        r->size);
	put_opt(f, "%.0f", r->peers);
	put_opt(f, "%.0f", r->clients);
	put_opt(f, "%.0f", r->depth);
	put_opt(f, "%.0f", r->read_pct);
	put_opt(f, "%.1f", r->ops_per_s);
	put_opt(f, "%.3f", r->mb_per_s);
	put_opt(f, "%.2f", r->p50_us);
	put_opt(f, "%.2f", r->p99_us);
	put_opt(f, "%.2f", r->p999_us);
	put_opt(f, "%.2f", r->max_us);
	put_opt(f, "%.4f", r->ctxsw_per_op);
	put_opt(f, "%.3f", r->cpu_us_per_op);
	put_opt(f, "%.2f", r->rss_mb);
	fprintf(f, ",%llu\n", (unsigned long long)r->errors);
}

void
wbench_csv_row_init(wbench_csv_row *r, const wbench_opts *o)
{
	r->workload = wbench_workload_name(o->workload);
	r->impl = "";
	r->tls = o->tls_dir != NULL;
	r->size = o->size;
	r->peers = r->clients = r->depth = r->read_pct = -1;
	r->ops_per_s = r->mb_per_s = -1;
	r->p50_us = r->p99_us = r->p999_us = r->max_us = -1;
	r->ctxsw_per_op = r->cpu_us_per_op = r->rss_mb = -1;
	r->errors = 0;
}

int
wbench_csv_write(const char *path, const wbench_csv_row *rows, unsigned n)
{
	FILE *f = fopen(path, "w");

	if (f == NULL) {
		perror(path);
		return -1;
	}
	fputs(csv_header, f);
	for (unsigned i = 0; i < n; i++)
		put_row(f, &rows[i]);
	return fclose(f) == 0 ? 0 : -1;
}
