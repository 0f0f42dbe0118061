/* SPDX-License-Identifier: MIT */
/*
 * weft/histogram.h: a latency histogram with log-linear buckets (HdrHistogram
 * style): values up to 2^(sub_bits) are exact, above that each power of two
 * is split into 2^sub_bits buckets, so every recorded value is kept within
 * 1/2^sub_bits (under 1% with the default 7 bits) of its true value.
 * Recording is a few instructions and never allocates. Not thread-safe:
 * keep one per thread and merge them.
 */
#ifndef WEFT_HISTOGRAM_H
#define WEFT_HISTOGRAM_H

#include <weft/core.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct weft_histogram weft_histogram;

/* weft_histogram_new makes an empty histogram for values 0..2^63. */
WEFT_API int weft_histogram_new(weft_histogram **out);
WEFT_API void weft_histogram_free(weft_histogram *h);
WEFT_API void weft_histogram_reset(weft_histogram *h);

/* weft_histogram_record counts one value (nanoseconds, say). */
WEFT_API void weft_histogram_record(weft_histogram *h, uint64_t value);
/* weft_histogram_record_n counts value n times. */
WEFT_API void weft_histogram_record_n(weft_histogram *h, uint64_t value,
                                      uint64_t n);
/* weft_histogram_merge adds every count of src into dst. */
WEFT_API void weft_histogram_merge(weft_histogram *dst,
                                   const weft_histogram *src);

WEFT_API uint64_t weft_histogram_count(const weft_histogram *h);
WEFT_API uint64_t weft_histogram_min(const weft_histogram *h);
WEFT_API uint64_t weft_histogram_max(const weft_histogram *h);
WEFT_API double weft_histogram_mean(const weft_histogram *h);
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

#ifdef __cplusplus
}
#endif

#endif
