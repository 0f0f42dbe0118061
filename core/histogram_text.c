/* SPDX-License-Identifier: MIT */
/* histogram_text.c: a histogram's buckets as text, and read back. */
#include <stdio.h>
#include <string.h>

#include <weft/histogram.h>

/* The longest pair: two 20-digit numbers, a colon and a space. */
#define PAIR_MAX 42

size_t
weft_histogram_format(const weft_histogram *h, char *buf, size_t len)
{
	size_t cursor = 0, total = 0;
	uint64_t value, count;
	char pair[PAIR_MAX + 1];
	bool full = false;

	if (len > 0)
		buf[0] = '\0';
	while (weft_histogram_next(h, &cursor, &value, &count)) {
		size_t n = (size_t)snprintf(
		    pair, sizeof(pair), "%s%llu:%llu", total > 0 ? " " : "",
		    (unsigned long long)value, (unsigned long long)count);

		/* Only whole pairs go in, so that a cut text still parses. */
		if (!full && total + n < len)
			memcpy(buf + total, pair, n + 1);
		else
			full = true;
		total += n;
	}
	return total;
}

/* parse_u64 reads a decimal number without sign or leading spaces;
 * returns what follows it, or NULL when there is none or it overflows. */
static const char *
parse_u64(const char *p, uint64_t *out)
{
	uint64_t v = 0;

	if (*p < '0' || *p > '9')
		return NULL;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');

		if (v > (UINT64_MAX - d) / 10)
			return NULL;
		v = v * 10 + d;
	}
	*out = v;
	return p;
}

static bool
at_end(const char *p)
{
	return *p == '\0' || *p == '\n';
}

/* walk checks text and, when h is not NULL, records its pairs into h;
 * false at the first thing that is not a pair. */
static bool
walk(const char *text, weft_histogram *h)
{
	const char *p = text;
	uint64_t value, count;

	while (*p == ' ')
		p++;
	while (!at_end(p)) {
		if ((p = parse_u64(p, &value)) == NULL || *p != ':' ||
		    (p = parse_u64(p + 1, &count)) == NULL)
			return false;
		if (!at_end(p) && *p != ' ')
			return false;
		while (*p == ' ')
			p++;
		if (h != NULL)
			weft_histogram_record_n(h, value, count);
	}
	return true;
}

int
weft_histogram_parse(weft_histogram *h, const char *text)
{
	/* Checked whole first, so that bad text changes nothing. */
	if (h == NULL || text == NULL || !walk(text, NULL))
		return WEFT_EINVAL;
	walk(text, h);
	return 0;
}
