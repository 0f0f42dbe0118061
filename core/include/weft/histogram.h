/* SPDX-License-Identifier: MIT */
/*
 * weft/histogram.h: a latency histogram with log-linear buckets (HdrHistogram
 * style): values below 2^(sub_bits+1) are exact, above that each power of
 * two is split into 2^sub_bits buckets, so every recorded value is kept
 * within 1/2^sub_bits of its true value (under 1% with the default 7
 * bits). Recording is a few instructions and never allocates. Not
 * thread-safe: keep one per thread and merge them.
 *
 * Threads: any thread, while no other thread changes the histogram.
 *
 * Memory is fixed when the histogram is made, by its precision and range
 * (weft_histogram_bytes tells it):
 *
 *   sub_bits  precision  bytes: values to 2^64 - 1   to 2^40 - 1 (18 min)
 *   1         1/2                          1 080           704
 *   2         1/4                          2 072         1 312
 *   3         1/8                          4 024         2 496
 *   4         1/16                         7 864         4 800
 *   5         1/32                        15 416         9 280
 *   6         1/64                        30 264        17 984
 *   7         1/128                       59 448        34 880
 *   8         1/256                      116 792        67 648
 *   9         1/512                      229 432       131 136
 *   10        1/1024                     450 616       254 016
 *
 * Each power of two left out of the range saves 2^sub_bits counters of 8
 * bytes.
 */
#ifndef WEFT_HISTOGRAM_H
#define WEFT_HISTOGRAM_H

#include <weft/core.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_histogram weft_histogram;

/* The precisions a histogram can have, in sub_bits. */
#define WEFT_HISTOGRAM_MIN_SUB_BITS 1
#define WEFT_HISTOGRAM_MAX_SUB_BITS 10

/* What weft_histogram_new_opts makes; zero fields take the defaults. */
typedef struct weft_histogram_opts {
	/* Values are kept within 1/2^sub_bits: 1..10; 0 for 7 (1/128). */
	unsigned sub_bits;
	/* Values up to max_value, rounded up to a power of two less one, are
	 * kept within that precision; larger ones share one bucket, where
	 * only their maximum is known (percentiles falling there report the
	 * largest value recorded). 0 for no limit (2^64 - 1). */
	uint64_t max_value;
} weft_histogram_opts;

/*
 * weft_histogram_new_opts makes an empty histogram with the precision and
 * range of opts (NULL: the defaults), owned by the caller, who frees it
 * with weft_histogram_free. Returns 0, WEFT_EINVAL (out NULL, sub_bits out
 * of range) or WEFT_ENOMEM. Any thread.
 */
WEFT_API int weft_histogram_new_opts(const weft_histogram_opts *opts,
                                     weft_histogram **out);
/* weft_histogram_new is weft_histogram_new_opts with the defaults: values
 * 0..2^64 - 1 within 1/128, in 59 KB. */
WEFT_API int weft_histogram_new(weft_histogram **out);
/* weft_histogram_bytes returns the memory a histogram made with opts (NULL:
 * the defaults) takes, or 0 when weft_histogram_new_opts would refuse
 * opts. Any thread. */
WEFT_API size_t weft_histogram_bytes(const weft_histogram_opts *opts);
/* weft_histogram_free frees h; NULL is ignored. */
WEFT_API void weft_histogram_free(weft_histogram *h);
/* weft_histogram_reset forgets every value recorded; h keeps its precision
 * and range. */
WEFT_API void weft_histogram_reset(weft_histogram *h);

/* weft_histogram_record counts one value (nanoseconds, say). */
WEFT_API void weft_histogram_record(weft_histogram *h, uint64_t value);
/* weft_histogram_record_n counts value n times. */
WEFT_API void weft_histogram_record_n(weft_histogram *h, uint64_t value,
                                      uint64_t n);
/*
 * weft_histogram_merge adds every count of src into dst. The two may differ
 * in precision or range: then each of src's buckets is counted in dst at
 * the value weft_histogram_next gives for it, so the merged values keep
 * the coarser precision of the two (both errors add), and the count,
 * minimum, maximum and sum stay exact.
 */
WEFT_API void weft_histogram_merge(weft_histogram *dst,
                                   const weft_histogram *src);

/* weft_histogram_count returns the number of values recorded.
 * weft_histogram_min returns the smallest value recorded (0 when empty).
 * weft_histogram_max returns the largest (0 when empty).
 * weft_histogram_mean returns their mean (0 when empty). */
WEFT_API uint64_t weft_histogram_count(const weft_histogram *h);
WEFT_API uint64_t weft_histogram_min(const weft_histogram *h);
WEFT_API uint64_t weft_histogram_max(const weft_histogram *h);
WEFT_API double weft_histogram_mean(const weft_histogram *h);
/* weft_histogram_sum returns the sum of every value recorded (exact below
 * 2^53). */
WEFT_API double weft_histogram_sum(const weft_histogram *h);
/*
 * weft_histogram_count_at_most returns how many recorded values are at
 * most value, counting whole buckets: exact when value is below the
 * minimum, at least the maximum, or the upper edge of a bucket (as every
 * value below 2^(sub_bits+1) is). Otherwise the values of value's own
 * bucket count as above it: the result never includes a larger value, and
 * misses at most values within 1/2^sub_bits below value (above max_value,
 * any value below the maximum). It grows with value.
 */
WEFT_API uint64_t weft_histogram_count_at_most(const weft_histogram *h,
                                               uint64_t value);
/*
 * weft_histogram_percentile returns the value at or below which p percent
 * (0..100) of the recorded values lie, as the upper edge of its bucket
 * capped at the maximum recorded; 0 when empty. Percentiles are ordered:
 * p <= q implies percentile(p) <= percentile(q).
 */
WEFT_API uint64_t weft_histogram_percentile(const weft_histogram *h, double p);

/*
 * weft_histogram_next walks the non-empty buckets, to send a histogram to
 * another process: start with *cursor = 0 and call until it returns false.
 * Each true return gives one bucket's count and a value inside that bucket,
 * so weft_histogram_record_n(value, count) on the other side rebuilds the
 * same buckets, percentiles and maximum (the mean within a bucket width).
 */
WEFT_API bool weft_histogram_next(const weft_histogram *h, size_t *cursor,
                                  uint64_t *value, uint64_t *count);

/*
 * weft_histogram_format writes the buckets weft_histogram_next walks into
 * buf as text, for a line-based protocol to carry: "value:count" pairs in
 * decimal, separated by one space, with no newline ("" when h is empty).
 * Like snprintf, it writes at most len bytes, the last of them a NUL when
 * len > 0 (buf may be NULL when len is 0), and returns the length of the
 * whole text without its NUL: a return of len or more means the text was
 * cut short (after its last whole pair), and len = the return + 1 holds
 * it all. Any thread, while no other thread changes h.
 */
WEFT_API size_t weft_histogram_format(const weft_histogram *h, char *buf,
                                      size_t len);
/*
 * weft_histogram_parse adds the pairs of text, as weft_histogram_format
 * writes them, into h, each as weft_histogram_record_n(value, count):
 * a histogram of any precision or range rebuilds what
 * weft_histogram_next gave. Spaces may lead, and the text ends at its NUL
 * or at a newline. Returns 0, or WEFT_EINVAL, with h left unchanged, when
 * h or text is NULL or text is not that form.
 */
WEFT_API int weft_histogram_parse(weft_histogram *h, const char *text);

#ifdef __cplusplus
}
#endif

#endif
