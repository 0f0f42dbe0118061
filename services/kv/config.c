/* SPDX-License-Identifier: MIT */
/* config.c: the values of the [kv] section. */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "kv_int.h"

/* Splits text into a decimal number and a unit; 0 or WEFT_EINVAL. */
static int
number_unit(const char *text, uint64_t *num, const char **unit)
{
	char *end;

	while (isspace((unsigned char)*text))
		text++;
	if (!isdigit((unsigned char)*text))
		return WEFT_EINVAL;
	errno = 0;
	*num = strtoull(text, &end, 10);
	if (errno != 0)
		return WEFT_EINVAL;
	while (isspace((unsigned char)*end))
		end++;
	*unit = end;
	return 0;
}

/* Multiplies num by mult, failing on overflow. */
static int
scale(uint64_t num, uint64_t mult, uint64_t *out)
{
	if (num > UINT64_MAX / mult)
		return WEFT_EINVAL;
	*out = num * mult;
	return 0;
}

int
weft__kv_parse_quorum(const char *text, uint32_t members, uint32_t *out)
{
	const char *unit;
	uint64_t n;

	if (strcasecmp(text, "majority") == 0)
		n = members / 2 + 1;
	else if (strcasecmp(text, "all") == 0)
		n = members;
	else if (strcasecmp(text, "one") == 0)
		n = 1;
	else if (number_unit(text, &n, &unit) != 0 || *unit != '\0')
		return WEFT_EINVAL;
	if (n < 1 || n > members)
		return WEFT_EINVAL;
	*out = (uint32_t)n;
	return 0;
}

int
weft__kv_parse_duration_ms(const char *text, uint64_t *out)
{
	const char *unit;
	uint64_t n;

	if (number_unit(text, &n, &unit) != 0)
		return WEFT_EINVAL;
	if (*unit == '\0' || strcmp(unit, "ms") == 0)
		*out = n;
	else if (strcmp(unit, "s") == 0)
		return scale(n, 1000, out);
	else
		return WEFT_EINVAL;
	return 0;
}

int
weft__kv_parse_size(const char *text, size_t *out)
{
	static const struct {
		const char *name;
		uint64_t mult;
	} units[] = {
	    {"", 1},           {"B", 1},
	    {"K", 1024},       {"KiB", 1024},
	    {"M", 1u << 20},   {"MiB", 1u << 20},
	    {"G", 1ull << 30}, {"GiB", 1ull << 30},
	};
	const char *unit;
	uint64_t n, v;
	size_t i;

	if (number_unit(text, &n, &unit) != 0)
		return WEFT_EINVAL;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(unit, units[i].name) != 0)
			continue;
		if (scale(n, units[i].mult, &v) != 0 || v > SIZE_MAX)
			return WEFT_EINVAL;
		*out = (size_t)v;
		return 0;
	}
	return WEFT_EINVAL;
}
