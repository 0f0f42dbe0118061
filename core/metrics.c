/* SPDX-License-Identifier: MIT */
/*
 * metrics.c: the Prometheus text format's pieces that every dump shares:
 * escaped label values, latency histograms with fixed buckets, and the
 * build and process metrics (from Linux's /proc).
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <event2/buffer.h>

#include <weft/metrics.h>

/* Seconds, as Prometheus wants them: 100 us to 10 s, then +Inf. */
static const uint64_t latency_bounds_ns[WEFT_METRICS_LATENCY_BUCKETS] = {
    100000,     250000,     500000,     1000000,     2500000,   5000000,
    10000000,   25000000,   50000000,   100000000,   250000000, 500000000,
    1000000000, 2500000000, 5000000000, 10000000000,
};

uint64_t
weft_metrics_latency_bound(unsigned i)
{
	return i < WEFT_METRICS_LATENCY_BUCKETS ? latency_bounds_ns[i]
	                                        : UINT64_MAX;
}

size_t
weft_metrics_escape(char *dst, size_t cap, const char *value)
{
	size_t need = 0, used = 0;
	const char *p;

	for (p = value; *p != '\0'; p++) {
		const char *esc = *p == '\\'   ? "\\\\"
		                  : *p == '"'  ? "\\\""
		                  : *p == '\n' ? "\\n"
		                               : NULL;
		size_t n = esc ? 2 : 1;

		/* Keep room for the NUL; stop before a sequence that does
		 * not fit, so no escape is ever cut in half. */
		if (cap > 0 && used == need && used + n < cap) {
			memcpy(dst + used, esc ? esc : p, n);
			used += n;
		}
		need += n;
	}
	if (cap > 0)
		dst[used] = '\0';
	return need;
}

static int
bucket_line(struct evbuffer *out, const char *name, const char *labels,
            const char *le, uint64_t cumulative)
{
	return evbuffer_add_printf(out, "%s_bucket{%s%sle=\"%s\"} %llu\n", name,
	                           labels, labels[0] ? "," : "", le,
	                           (unsigned long long)cumulative) < 0;
}

int
weft_metrics_histogram_counts(
    struct evbuffer *out, const char *name, const char *labels,
    const uint64_t counts[WEFT_METRICS_LATENCY_BUCKETS + 1], double sum_seconds)
{
	uint64_t total = 0;
	char le[32];
	unsigned i;
	int bad = 0;

	for (i = 0; i < WEFT_METRICS_LATENCY_BUCKETS; i++) {
		total += counts[i];
		snprintf(le, sizeof(le), "%g",
		         (double)latency_bounds_ns[i] / 1e9);
		bad |= bucket_line(out, name, labels, le, total);
	}
	total += counts[WEFT_METRICS_LATENCY_BUCKETS];
	bad |= bucket_line(out, name, labels, "+Inf", total);
	bad |= evbuffer_add_printf(
	           out, "%s_sum%s%s%s %.9f\n%s_count%s%s%s %llu\n", name,
	           labels[0] ? "{" : "", labels, labels[0] ? "}" : "",
	           sum_seconds, name, labels[0] ? "{" : "", labels,
	           labels[0] ? "}" : "", (unsigned long long)total) < 0;
	return bad ? WEFT_ENOMEM : 0;
}

void
weft_metrics_latency_counts(const weft_histogram *h,
                            uint64_t counts[WEFT_METRICS_LATENCY_BUCKETS + 1])
{
	uint64_t below = 0, at_most;
	unsigned i;

	for (i = 0; i < WEFT_METRICS_LATENCY_BUCKETS; i++) {
		at_most = weft_histogram_count_at_most(h, latency_bounds_ns[i]);
		counts[i] = at_most - below;
		below = at_most;
	}
	counts[i] = weft_histogram_count(h) - below;
}

int
weft_metrics_histogram(struct evbuffer *out, const char *name,
                       const char *labels, const weft_histogram *h)
{
	uint64_t counts[WEFT_METRICS_LATENCY_BUCKETS + 1] = {0};

	if (h != NULL)
		weft_metrics_latency_counts(h, counts);
	return weft_metrics_histogram_counts(
	    out, name, labels, counts, h ? weft_histogram_sum(h) / 1e9 : 0.0);
}

/* ---- The process -------------------------------------------------------- */

struct proc_stat {
	double cpu_seconds;
	double start_time; /* since the epoch */
	unsigned long long vsize, rss_bytes;
};

/* The boot time, from /proc/stat's btime; 0 if unknown. */
static unsigned long long
boot_time(void)
{
	unsigned long long btime = 0;
	char line[256];
	FILE *f;

	if ((f = fopen("/proc/stat", "r")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "btime %llu", &btime) == 1)
			break;
	fclose(f);
	return btime;
}

static bool
read_proc_stat(struct proc_stat *ps)
{
	unsigned long long utime, stime, start, vsize, rss;
	long ticks = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
	char buf[1024], *p;
	size_t n;
	FILE *f;

	if ((f = fopen("/proc/self/stat", "r")) == NULL)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	/* The command name may hold spaces and parentheses: the fields go
	 * on after its last ')'. utime is field 14, then stime, ...,
	 * starttime 22, vsize 23, rss 24. */
	if ((p = strrchr(buf, ')')) == NULL || ticks <= 0 || page <= 0)
		return false;
	if (sscanf(p + 2,
	           "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu "
	           "%*d %*d %*d %*d %*d %*d %llu %llu %llu",
	           &utime, &stime, &start, &vsize, &rss) != 5)
		return false;
	ps->cpu_seconds = (double)(utime + stime) / (double)ticks;
	ps->start_time = (double)boot_time() + (double)start / (double)ticks;
	ps->vsize = vsize;
	ps->rss_bytes = rss * (unsigned long long)page;
	return true;
}

static unsigned long
open_fds(void)
{
	unsigned long n = 0;
	struct dirent *e;
	DIR *d;

	if ((d = opendir("/proc/self/fd")) == NULL)
		return 0;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n > 0 ? n - 1 : 0; /* not the one opendir holds */
}

int
weft_metrics_dump_process(struct evbuffer *out)
{
	struct proc_stat ps = {0};
	struct rlimit rl = {0};
	int bad;

	bad = evbuffer_add_printf(
	          out,
	          "# HELP weft_build_info The weft library this process runs.\n"
	          "# TYPE weft_build_info gauge\n"
	          "weft_build_info{version=\"%s\"} 1\n",
	          weft_version()) < 0;
	if (!read_proc_stat(&ps))
		return bad ? WEFT_ENOMEM : 0;
	getrlimit(RLIMIT_NOFILE, &rl);
	bad |= evbuffer_add_printf(
	           out,
	           "# HELP process_cpu_seconds_total User and system CPU time "
	           "spent in seconds.\n"
	           "# TYPE process_cpu_seconds_total counter\n"
	           "process_cpu_seconds_total %.2f\n"
	           "# HELP process_resident_memory_bytes Resident memory size "
	           "in bytes.\n"
	           "# TYPE process_resident_memory_bytes gauge\n"
	           "process_resident_memory_bytes %llu\n"
	           "# HELP process_virtual_memory_bytes Virtual memory size in "
	           "bytes.\n"
	           "# TYPE process_virtual_memory_bytes gauge\n"
	           "process_virtual_memory_bytes %llu\n"
	           "# HELP process_open_fds Number of open file descriptors.\n"
	           "# TYPE process_open_fds gauge\n"
	           "process_open_fds %lu\n"
	           "# HELP process_max_fds Maximum number of open file "
	           "descriptors.\n"
	           "# TYPE process_max_fds gauge\n"
	           "process_max_fds %llu\n"
	           "# HELP process_start_time_seconds Start time of the "
	           "process since the Unix epoch in seconds.\n"
	           "# TYPE process_start_time_seconds gauge\n"
	           "process_start_time_seconds %.2f\n",
	           ps.cpu_seconds, ps.rss_bytes, ps.vsize, open_fds(),
	           (unsigned long long)rl.rlim_cur, ps.start_time) < 0;
	return bad ? WEFT_ENOMEM : 0;
}
