/* SPDX-License-Identifier: MIT */
/*
 * weft/metrics.h: metrics in the Prometheus text exposition format (0.0.4),
 * as weft's own dumps write them (weft_msvc_metrics_dump, weftd's
 * /metrics), for programs that add metrics of their own to the same page.
 */
#ifndef WEFT_METRICS_H
#define WEFT_METRICS_H

#include <weft/core.h>
#include <weft/histogram.h>

#ifdef __cplusplus
extern "C" {
#endif

struct evbuffer;

/*
 * weft_metrics_escape writes value into dst (cap bytes, NUL-terminated when
 * cap > 0) escaped for the inside of a label value: backslash, double
 * quote and newline become \\, \" and \n. A value that does not fit is cut
 * before an escape, never inside one. Returns the length the whole escaped
 * value needs, without the NUL (as snprintf does). Any thread.
 */
WEFT_API size_t weft_metrics_escape(char *dst, size_t cap, const char *value);

/* The buckets weft's latency histograms have: these upper bounds in
 * seconds (100 us to 10 s), then +Inf. */
#define WEFT_METRICS_LATENCY_BUCKETS 16
/* weft_metrics_latency_bound returns bound i (i < WEFT_METRICS_LATENCY_
 * BUCKETS) in nanoseconds. Any thread. */
WEFT_API uint64_t weft_metrics_latency_bound(unsigned i);

/*
 * weft_metrics_histogram_counts appends one histogram's samples:
 * NAME_bucket{LABELS,le="…"} for each latency bound and +Inf (cumulative),
 * NAME_sum (seconds) and NAME_count. counts[i] is the number of values at
 * most bound i and above bound i-1; counts[WEFT_METRICS_LATENCY_BUCKETS]
 * those above the last bound. labels is the text between the braces,
 * already escaped ("node=\"a\",peer=\"b\""), or "". No HELP or TYPE line:
 * write those once per metric family. Returns 0 or WEFT_ENOMEM. Any
 * thread.
 */
WEFT_API int weft_metrics_histogram_counts(
    struct evbuffer *out, const char *name, const char *labels,
    const uint64_t counts[WEFT_METRICS_LATENCY_BUCKETS + 1],
    double sum_seconds);

/*
 * weft_metrics_latency_counts fills counts, as weft_metrics_histogram_counts
 * takes them, from a weft_histogram of nanoseconds, with
 * weft_histogram_count_at_most at each bound: a value is never counted at
 * or below a bound it exceeds, and only values within the histogram's
 * precision below a bound can be counted above it. Any thread that may
 * read h.
 */
WEFT_API void
weft_metrics_latency_counts(const weft_histogram *h,
                            uint64_t counts[WEFT_METRICS_LATENCY_BUCKETS + 1]);

/* weft_metrics_histogram is weft_metrics_histogram_counts for a
 * weft_histogram of nanoseconds, its counts from
 * weft_metrics_latency_counts; h may be NULL (no values). Any thread that
 * may read h. */
WEFT_API int weft_metrics_histogram(struct evbuffer *out, const char *name,
                                    const char *labels,
                                    const weft_histogram *h);

/*
 * weft_metrics_dump_process appends, with their HELP and TYPE lines,
 * weft_build_info{version="…"} 1 and the standard process metrics of the
 * calling process (Linux, from /proc): process_cpu_seconds_total,
 * process_resident_memory_bytes, process_virtual_memory_bytes,
 * process_open_fds, process_max_fds and process_start_time_seconds. Write
 * it once per page. Returns 0 or WEFT_ENOMEM. Any thread.
 */
WEFT_API int weft_metrics_dump_process(struct evbuffer *out);

#ifdef __cplusplus
}
#endif

#endif
