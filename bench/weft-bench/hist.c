/* SPDX-License-Identifier: MIT */
/* hist.c: the node processes' latency histograms, as lines, and samples. */
#include <stdlib.h>
#include <string.h>

#include <weft/histogram.h>

#include "wbench.h"

/* Within 1/32 (about 3%) up to 2^41 ns (36 minutes): longer than any
 * request may wait, in 9 KB. */
#define HIST_SUB_BITS 5
#define HIST_MAX_NS ((UINT64_C(1) << 41) - 1)

int
wbench_hist_new(weft_histogram **out)
{
	weft_histogram_opts ho = {.sub_bits = HIST_SUB_BITS,
	                          .max_value = HIST_MAX_NS};

	return weft_histogram_new_opts(&ho, out) == 0 ? 0 : -1;
}

void
wbench_hist_print(const weft_histogram *h, const char *name, FILE *out)
{
	size_t len = h != NULL ? weft_histogram_format(h, NULL, 0) : 0;
	char *text = len > 0 ? malloc(len + 1) : NULL;

	fputs(name, out);
	if (text != NULL) {
		weft_histogram_format(h, text, len + 1);
		fprintf(out, " %s", text);
	}
	fputc('\n', out);
	free(text);
}

int
wbench_hist_parse(const char *line, weft_histogram *h)
{
	if (strncmp(line, "hist", 4) != 0)
		return -1;
	/* Past the name: "hist", or one such as "hist-get". */
	line += strcspn(line, " \n");
	return weft_histogram_parse(h, line) == 0 ? 0 : -1;
}

int
wbench_sample_init(wbench_sample *s)
{
	if (wbench_hist_new(&s->h) != 0) {
		s->h = NULL;
		return -1;
	}
	pthread_mutex_init(&s->lock, NULL);
	return 0;
}

void
wbench_sample_fini(wbench_sample *s)
{
	if (s->h == NULL)
		return;
	pthread_mutex_destroy(&s->lock);
	weft_histogram_free(s->h);
	s->h = NULL;
}

void
wbench_sample_record(wbench_sample *s, uint64_t ns)
{
	pthread_mutex_lock(&s->lock);
	weft_histogram_record(s->h, ns);
	pthread_mutex_unlock(&s->lock);
}

uint64_t
wbench_sample_percentile(wbench_sample *s, double p)
{
	uint64_t v;

	pthread_mutex_lock(&s->lock);
	v = weft_histogram_percentile(s->h, p);
	pthread_mutex_unlock(&s->lock);
	return v;
}
