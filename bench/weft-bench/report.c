/* SPDX-License-Identifier: MIT */
/* report.c: progress lines, medians, the summary and the JSON output. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/histogram.h>

#include "wbench.h"

#define NS_PER_S 1000000000u

void
wbench_progress_init(wbench_progress *p, const wbench_opts *o, const char *impl)
{
	p->opts = o;
	p->impl = impl;
	p->start_ns = p->last_ns = wbench_now_ns();
	p->last_count = 0;
}

void
wbench_progress_tick(wbench_progress *p, uint64_t now_ns, uint64_t count,
                     const struct weft_histogram *h)
{
	double dt = (double)(now_ns - p->last_ns) / 1e9;
	double rate;

	if (now_ns - p->last_ns < NS_PER_S)
		return;
	rate = (double)(count - p->last_count) / dt;
	if (!p->opts->quiet && h != NULL)
		fprintf(stderr,
		        "%s latency %zu B: %llu round trips, %.0f/s, "
		        "p50 %.1f us, p99 %.1f us so far\n",
		        p->impl, p->opts->size, (unsigned long long)count, rate,
		        weft_histogram_percentile(h, 50) / 1e3,
		        weft_histogram_percentile(h, 99) / 1e3);
	else if (!p->opts->quiet)
		fprintf(stderr,
		        "%s throughput %zu B: %llu msgs, %.3f M msgs/s, "
		        "%.1f MB/s in the last second\n",
		        p->impl, p->opts->size, (unsigned long long)count,
		        rate / 1e6, rate * (double)p->opts->size / 1e6);
	p->last_ns = now_ns;
	p->last_count = count;
}

void
wbench_result_rates(wbench_result *r, size_t size)
{
	if (r->seconds > 0) {
		r->msgs_per_s = (double)r->measured / r->seconds;
		r->mb_per_s = r->msgs_per_s * (double)size / 1e6;
	} else {
		r->msgs_per_s = r->mb_per_s = 0;
	}
}

void
wbench_result_latency(wbench_result *r, const struct weft_histogram *h)
{
	r->mean_ns = weft_histogram_mean(h);
	r->min_ns = weft_histogram_min(h);
	r->p50_ns = weft_histogram_percentile(h, 50);
	r->p90_ns = weft_histogram_percentile(h, 90);
	r->p99_ns = weft_histogram_percentile(h, 99);
	r->p999_ns = weft_histogram_percentile(h, 99.9);
	r->max_ns = weft_histogram_max(h);
}

bool
wbench_result_ok(const wbench_opts *o, const wbench_result *r)
{
	/* The last read may hold messages past the run's end: checked,
	 * not measured. */
	return r->errors == 0 && r->received >= r->warmup + o->count &&
	       r->measured > 0;
}

bool
wbench_warmup_over(const wbench_opts *o, uint64_t done, uint64_t first_ns,
                   uint64_t now_ns)
{
	if (!o->warmup_by_time)
		return done >= o->warmup_count;
	return first_ns != 0 &&
	       (double)(now_ns - first_ns) >= o->warmup_s * 1e9;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* median_of takes the median of the double at byte offset off of each run. */
static double
median_of(const wbench_result *runs, unsigned n, size_t off, double *tmp)
{
	for (unsigned i = 0; i < n; i++)
		memcpy(&tmp[i], (const char *)&runs[i] + off, sizeof(double));
	qsort(tmp, n, sizeof(*tmp), cmp_double);
	return n % 2 ? tmp[n / 2] : (tmp[n / 2 - 1] + tmp[n / 2]) / 2;
}

static uint64_t
median_u64(const wbench_result *runs, unsigned n, size_t off, double *tmp)
{
	for (unsigned i = 0; i < n; i++) {
		uint64_t v;

		memcpy(&v, (const char *)&runs[i] + off, sizeof(v));
		tmp[i] = (double)v;
	}
	qsort(tmp, n, sizeof(*tmp), cmp_double);
	return (uint64_t)(n % 2 ? tmp[n / 2]
	                        : (tmp[n / 2 - 1] + tmp[n / 2]) / 2);
}

void
wbench_result_median(const wbench_result *runs, unsigned n, wbench_result *out)
{
	double tmp[64];

	memset(out, 0, sizeof(*out));
	if (n == 0 || n > 64)
		return;
#define MED_D(f) out->f = median_of(runs, n, offsetof(wbench_result, f), tmp)
#define MED_U(f) out->f = median_u64(runs, n, offsetof(wbench_result, f), tmp)
	MED_U(received);
	MED_U(warmup);
	MED_U(measured);
	MED_D(seconds);
	MED_D(msgs_per_s);
	MED_D(mb_per_s);
	MED_D(mean_ns);
	MED_U(min_ns);
	MED_U(p50_ns);
	MED_U(p90_ns);
	MED_U(p99_ns);
	MED_U(p999_ns);
	MED_U(max_ns);
	MED_D(cpu_us);
#undef MED_D
#undef MED_U
	for (unsigned i = 0; i < n; i++)
		out->errors += runs[i].errors;
}

/* slot_name names slot i of a report: weft and raw, or with --tls-compare
 * weft in plaintext and weft over TLS. */
const char *
wbench_slot_name(const wbench_opts *o, int i)
{
	if (o->tls_compare)
		return i ? "weft-tls" : "weft";
	if (i == 0 && o->tls_dir != NULL)
		return "weft-tls";
	return i ? "raw" : "weft";
}

/* ratio_name labels the ratio of slot 0 to slot 1 (or 1 to 0 for TLS). */
static const char *
ratio_name(const wbench_opts *o)
{
	return o->tls_compare ? "tls/plain" : "weft/raw";
}

static void
print_throughput(const wbench_report *rep, FILE *out)
{
	const wbench_opts *o = rep->opts;
	const wbench_result *a = &rep->median[0], *b = &rep->median[1];

	fprintf(out, "  %-9s %14s %12s %10s %12s\n", "impl", "msgs/s", "MB/s",
	        "seconds", "messages");
	for (int i = 0; i < 2; i++) {
		const wbench_result *r = &rep->median[i];

		if (rep->nruns[i] == 0)
			continue;
		fprintf(out, "  %-9s %12.3f M %12.1f %10.3f %12llu\n",
		        wbench_slot_name(o, i), r->msgs_per_s / 1e6,
		        r->mb_per_s, r->seconds,
		        (unsigned long long)r->measured);
	}
	if (o->tls_compare) { /* TLS over plaintext */
		a = &rep->median[1];
		b = &rep->median[0];
	}
	if (rep->nruns[0] && rep->nruns[1] && b->msgs_per_s > 0 &&
	    b->mb_per_s > 0)
		fprintf(out, "  %-9s %14.3f %12.3f\n", ratio_name(o),
		        a->msgs_per_s / b->msgs_per_s,
		        a->mb_per_s / b->mb_per_s);
}

static double
ratio(uint64_t a, uint64_t b)
{
	return b ? (double)a / (double)b : 0;
}

static void
print_latency(const wbench_report *rep, FILE *out)
{
	const wbench_opts *o = rep->opts;
	const wbench_result *w = &rep->median[0], *r = &rep->median[1];

	fprintf(out, "  %-9s %9s %9s %9s %9s %9s %9s %10s %10s\n", "impl",
	        "p50 us", "p90 us", "p99 us", "p99.9 us", "max us", "mean us",
	        "rt/s", "cpu us/rt");
	for (int i = 0; i < 2; i++) {
		const wbench_result *m = &rep->median[i];

		if (rep->nruns[i] == 0)
			continue;
		fprintf(out,
		        "  %-9s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %10.0f "
		        "%10.1f\n",
		        wbench_slot_name(o, i), m->p50_ns / 1e3,
		        m->p90_ns / 1e3, m->p99_ns / 1e3, m->p999_ns / 1e3,
		        m->max_ns / 1e3, m->mean_ns / 1e3, m->msgs_per_s,
		        m->cpu_us);
	}
	if (o->tls_compare) { /* TLS over plaintext */
		w = &rep->median[1];
		r = &rep->median[0];
	}
	if (rep->nruns[0] && rep->nruns[1])
		fprintf(
		    out,
		    "  %-9s %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %10.3f "
		    "%10.3f\n",
		    ratio_name(o), ratio(w->p50_ns, r->p50_ns),
		    ratio(w->p90_ns, r->p90_ns), ratio(w->p99_ns, r->p99_ns),
		    ratio(w->p999_ns, r->p999_ns), ratio(w->max_ns, r->max_ns),
		    r->mean_ns > 0 ? w->mean_ns / r->mean_ns : 0,
		    r->msgs_per_s > 0 ? w->msgs_per_s / r->msgs_per_s : 0,
		    r->cpu_us > 0 ? w->cpu_us / r->cpu_us : 0);
}

/* print_spread prints the lowest and highest of each slot's runs: the
 * message rate of a throughput run, the p50 of a latency run. */
static void
print_spread(const wbench_report *rep, FILE *out)
{
	bool tput = rep->opts->workload == WBENCH_THROUGHPUT;
	/* Shown as M msgs/s, or as the p50 in us. */
	double scale = tput ? 1e6 : 1e3;

	for (int i = 0; i < 2; i++) {
		double lo = 0, hi = 0, v, med;
		char what[64];

		if (rep->nruns[i] < 2)
			continue;
		for (unsigned k = 0; k < rep->nruns[i]; k++) {
			v = tput ? rep->runs[i][k].msgs_per_s
			         : (double)rep->runs[i][k].p50_ns;
			lo = k == 0 || v < lo ? v : lo;
			hi = k == 0 || v > hi ? v : hi;
		}
		med = tput ? rep->median[i].msgs_per_s
		           : (double)rep->median[i].p50_ns;
		fprintf(out,
		        "  %-9s %u runs: %s%.*f to %.*f %s (spread %.0f%%)\n",
		        wbench_slot_name(rep->opts, i), rep->nruns[i],
		        tput ? "" : "p50 ", tput ? 3 : 1, lo / scale,
		        tput ? 3 : 1, hi / scale, tput ? "M msgs/s" : "us",
		        med > 0 ? (hi - lo) / med * 100 : 0);
		snprintf(what, sizeof(what), "%s %s %zu B",
		         wbench_slot_name(rep->opts, i),
		         wbench_workload_name(rep->opts->workload),
		         rep->opts->size);
		wbench_spread_warn(what, lo, hi, med);
	}
}

void
wbench_report_print(const wbench_report *rep, FILE *out)
{
	const wbench_opts *o = rep->opts;
	unsigned runs = rep->nruns[0] ? rep->nruns[0] : rep->nruns[1];

	char warm[48];

	if (o->warmup_by_time)
		snprintf(warm, sizeof(warm), "%g s", o->warmup_s);
	else
		snprintf(warm, sizeof(warm), "%llu",
		         (unsigned long long)o->warmup_count);
	fprintf(out,
	        "weft-bench %s: %zu B x %llu %s (warm-up %s), %s%u run%s\n",
	        wbench_workload_name(o->workload), o->size,
	        (unsigned long long)o->count,
	        o->workload == WBENCH_THROUGHPUT ? "msgs" : "round trips", warm,
	        runs > 1 ? "median of " : "", runs, runs > 1 ? "s" : "");
	if (o->workload == WBENCH_THROUGHPUT)
		print_throughput(rep, out);
	else
		print_latency(rep, out);
	print_spread(rep, out);
	for (int i = 0; i < 2; i++)
		if (rep->nruns[i] && rep->median[i].errors)
			fprintf(out,
			        "  %s: %llu ERRORS (lost, reordered or "
			        "corrupt messages)\n",
			        wbench_slot_name(o, i),
			        (unsigned long long)rep->median[i].errors);
}

static void
json_result(FILE *f, const wbench_result *r, const char *indent)
{
	const struct {
		const char *name;
		double v;
	} lat[] = {
	    {"mean_ns", r->mean_ns},       {"min_ns", (double)r->min_ns},
	    {"p50_ns", (double)r->p50_ns}, {"p90_ns", (double)r->p90_ns},
	    {"p99_ns", (double)r->p99_ns}, {"p999_ns", (double)r->p999_ns},
	    {"max_ns", (double)r->max_ns}, {"cpu_us", r->cpu_us},
	};
	/* A throughput run measures no round trips. */
	bool timed = r->max_ns > 0;

	fprintf(f,
	        "{\n%s  \"received\": %llu,\n%s  \"warmup\": %llu,\n"
	        "%s  \"errors\": %llu,\n%s  \"measured\": %llu,\n"
	        "%s  \"seconds\": %.9f,\n%s  \"msgs_per_s\": ",
	        indent, (unsigned long long)r->received, indent,
	        (unsigned long long)r->warmup, indent,
	        (unsigned long long)r->errors, indent,
	        (unsigned long long)r->measured, indent, r->seconds, indent);
	wbench_json_num(f, "%.3f", r->msgs_per_s, r->measured > 0);
	fprintf(f, ",\n%s  \"mb_per_s\": ", indent);
	wbench_json_num(f, "%.3f", r->mb_per_s, r->measured > 0);
	for (size_t i = 0; i < sizeof(lat) / sizeof(lat[0]); i++) {
		fprintf(f, ",\n%s  \"%s\": ", indent, lat[i].name);
		wbench_json_num(f, "%.1f", lat[i].v, timed);
	}
	fprintf(f, "\n%s}", indent);
}

static void
json_impl(FILE *f, const wbench_report *rep, int i)
{
	fprintf(f, "    \"%s\": {\n      \"median\": ",
	        wbench_slot_name(rep->opts, i));
	json_result(f, &rep->median[i], "      ");
	fprintf(f, ",\n      \"runs\": [");
	for (unsigned k = 0; k < rep->nruns[i]; k++) {
		fprintf(f, "%s\n        ", k ? "," : "");
		json_result(f, &rep->runs[i][k], "        ");
	}
	fprintf(f, "\n      ]\n    }");
}

/* json_quotient writes a/b, or null where b was not measured. */
static void
json_quotient(FILE *f, const char *name, double a, double b)
{
	fprintf(f, "%s\"%s\": ", strcmp(name, "msgs_per_s") ? ", " : "", name);
	wbench_json_num(f, "%.4f", b > 0 ? a / b : 0, a > 0 && b > 0);
}

static void
json_ratio(FILE *f, const wbench_report *rep)
{
	const wbench_result *w = &rep->median[0], *r = &rep->median[1];

	if (rep->opts->tls_compare) {
		w = &rep->median[1];
		r = &rep->median[0];
	}
	fprintf(f, ",\n  \"%s\": {",
	        rep->opts->tls_compare ? "tls_over_plain" : "weft_over_raw");
	json_quotient(f, "msgs_per_s", w->msgs_per_s, r->msgs_per_s);
	json_quotient(f, "mb_per_s", w->mb_per_s, r->mb_per_s);
	if (rep->opts->workload == WBENCH_LATENCY) {
		json_quotient(f, "p50", (double)w->p50_ns, (double)r->p50_ns);
		json_quotient(f, "p99", (double)w->p99_ns, (double)r->p99_ns);
		json_quotient(f, "p999", (double)w->p999_ns,
		              (double)r->p999_ns);
	}
	fprintf(f, "}");
}

int
wbench_report_json(const wbench_report *rep, const char *path)
{
	const wbench_opts *o = rep->opts;
	FILE *f = fopen(path, "w");
	bool first = true;

	if (f == NULL) {
		perror(path);
		return -1;
	}
	fputs("{\n", f);
	wbench_json_env(f, o);
	fprintf(f,
	        "  \"workload\": \"%s\",\n  \"size\": %zu,\n"
	        "  \"count\": %llu,\n  \"warmup_count\": ",
	        wbench_workload_name(o->workload), o->size,
	        (unsigned long long)o->count);
	wbench_json_num(f, "%.0f", (double)o->warmup_count, !o->warmup_by_time);
	fputs(",\n  \"warmup_s\": ", f);
	wbench_json_num(f, "%g", o->warmup_s, o->warmup_by_time);
	fprintf(f,
	        ",\n  \"seed\": %llu,\n"
	        "  \"batch\": %zu,\n  \"busy_poll_us\": %u,\n"
	        "  \"verify\": %s,\n  \"tls\": %s,\n"
	        "  \"impls\": {\n",
	        (unsigned long long)o->seed, o->batch,
	        (unsigned)o->busy_poll_us, o->verify ? "true" : "false",
	        o->tls_dir != NULL ? "true" : "false");
	for (int i = 0; i < 2; i++) {
		if (rep->nruns[i] == 0)
			continue;
		fprintf(f, "%s", first ? "" : ",\n");
		json_impl(f, rep, i);
		first = false;
	}
	fprintf(f, "\n  }");
	if (rep->nruns[0] && rep->nruns[1])
		json_ratio(f, rep);
	fprintf(f, "\n}\n");
	return fclose(f) == 0 ? 0 : -1;
}
