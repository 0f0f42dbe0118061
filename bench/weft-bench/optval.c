/* SPDX-License-Identifier: MIT */
/* optval.c: the values of weft-bench's options: counts, sizes, seconds,
 * lists, --hosts entries, and compression algorithms. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/compress.h>
#include <weft/transport.h>

#include "wbench.h"

int
wbench_parse_seconds(const char *s, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || v < 0 || v > 86400 || (*end && strcmp(end, "s")))
		return -1;
	*out = v;
	return 0;
}

int
wbench_parse_double(const char *s, double lo, double hi, double *out)
{
	char *end;
	double v = strtod(s, &end);

	if (end == s || *end != '\0' || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/* suffix reads a k/M/G suffix at *end; returns its multiplier. */
static uint64_t
suffix(char **end, bool binary)
{
	uint64_t mul = 1;

	if (**end == 'k' || **end == 'K')
		mul = binary ? 1024 : 1000;
	else if (**end == 'M' || **end == 'm')
		mul = binary ? 1024 * 1024 : 1000000;
	else if (**end == 'G' || **end == 'g')
		mul = binary ? 1024 * 1024 * 1024 : 1000000000;
	if (mul > 1)
		(*end)++;
	if (**end == 'i')
		(*end)++;
	if (**end == 'B' && binary)
		(*end)++;
	return mul;
}

int
wbench_parse_num(const char *s, bool binary, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mul;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || s[0] == '-')
		return -1;
	mul = suffix(&end, binary);
	if (*end != '\0' || (v && mul > UINT64_MAX / v))
		return -1;
	*out = v * mul;
	return 0;
}

int
wbench_parse_list(const char *s, unsigned long lo, unsigned long hi,
                  unsigned *out, unsigned max, unsigned *n)
{
	char *end;

	*n = 0;
	do {
		unsigned long v;

		if (*s < '0' || *s > '9')
			return -1;
		v = strtoul(s, &end, 10);
		if (end == s || v < lo || v > hi || *n >= max)
			return -1;
		out[(*n)++] = (unsigned)v;
		s = end + (*end == ',');
	} while (*end == ',');
	return *end == '\0' ? 0 : -1;
}

int
wbench_parse_words(const char *s, const char *const *names, unsigned *set)
{
	const char *p = s;

	*set = 0;
	if (strcmp(s, "both") == 0) {
		for (unsigned i = 0; names[i] != NULL; i++)
			*set |= 1u << i;
		return 0;
	}
	while (*p) {
		size_t len = strcspn(p, ",");
		unsigned i;

		for (i = 0; names[i] != NULL; i++)
			if (strlen(names[i]) == len &&
			    strncmp(names[i], p, len) == 0)
				break;
		if (names[i] == NULL)
			return -1;
		*set |= 1u << i;
		p += len + (p[len] == ',');
	}
	return *set ? 0 : -1;
}

int
wbench_host_at(const char *list, unsigned i, char id[64], char host[256],
               uint16_t *port)
{
	const char *p = list, *end, *at;
	char addr[300];

	for (unsigned k = 0; k < i && p != NULL; k++)
		if ((p = strchr(p, ',')) != NULL)
			p++;
	if (p == NULL || *p == '\0')
		return -1;
	end = strchr(p, ',');
	end = end ? end : p + strlen(p);
	at = memchr(p, '@', (size_t)(end - p));
	if (at != NULL && (at == p || at - p >= 64))
		return -1;
	if (at != NULL)
		snprintf(id, 64, "%.*s", (int)(at - p), p);
	else
		snprintf(id, 64, "n%u", i);
	p = at ? at + 1 : p;
	if (end - p >= (ptrdiff_t)sizeof(addr))
		return -1;
	snprintf(addr, sizeof(addr), "%.*s", (int)(end - p), p);
	if (weft_address_split(addr, host, 256, port) != 0 || *port == 0)
		return -1;
	return 0;
}

/* The names of WEFT_COMPRESS_NONE, _LZ4 and _ZSTD, in their order. */
static const char *const compression_names[] = {"none", "lz4", "zstd"};

int
wbench_parse_compression(const char *s, int *out)
{
	for (int i = WEFT_COMPRESS_NONE; i <= WEFT_COMPRESS_ZSTD; i++)
		if (strcmp(s, compression_names[i]) == 0) {
			*out = i;
			return 0;
		}
	return -1;
}

const char *
wbench_compression_name(int alg)
{
	return alg >= WEFT_COMPRESS_NONE && alg <= WEFT_COMPRESS_ZSTD
	           ? compression_names[alg]
	           : "?";
}
