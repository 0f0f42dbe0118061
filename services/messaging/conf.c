/* SPDX-License-Identifier: MIT */
/*
 * conf.c: the one grammar of the configuration file's values (sizes,
 * durations, booleans, numbers, addresses, choices), and the key tables
 * that put them into a section's struct. Every section uses it: the
 * messaging service's own (config_ini.c) and other components' through
 * weft_msvc_config_read.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <weft/transport.h>

#include "msvc_int.h"

/* Reads an unsigned decimal number; *end gets the rest. */
static bool
parse_number(const char *s, uint64_t *out, const char **end)
{
	uint64_t v = 0;

	if (*s < '0' || *s > '9')
		return false;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	*end = s;
	return true;
}

struct unit {
	const char *name;
	uint64_t mult;
};

/* number, optional spaces, one of units (any case). */
static bool
parse_with_unit(const char *s, const struct unit *units, size_t n,
                uint64_t *out)
{
	const char *rest;
	uint64_t v;
	size_t i;

	if (!parse_number(s, &v, &rest))
		return false;
	while (*rest == ' ' || *rest == '\t')
		rest++;
	for (i = 0; i < n; i++) {
		if (strcasecmp(rest, units[i].name) != 0)
			continue;
		if (v > UINT64_MAX / units[i].mult)
			return false;
		*out = v * units[i].mult;
		return true;
	}
	return false;
}

bool
weft__conf_parse_size(const char *s, uint64_t *out)
{
	static const struct unit units[] = {
	    {"", 1},
	    {"b", 1},
	    {"k", 1u << 10},
	    {"kb", 1u << 10},
	    {"kib", 1u << 10},
	    {"m", 1u << 20},
	    {"mb", 1u << 20},
	    {"mib", 1u << 20},
	    {"g", 1ull << 30},
	    {"gb", 1ull << 30},
	    {"gib", 1ull << 30},
	};

	return parse_with_unit(s, units, sizeof(units) / sizeof(units[0]), out);
}

bool
weft__conf_parse_duration(const char *s, uint64_t *out)
{
	static const struct unit units[] = {
	    {"", 1},      {"ms", 1},      {"s", 1000},
	    {"m", 60000}, {"min", 60000}, {"h", 3600000},
	};

	return parse_with_unit(s, units, sizeof(units) / sizeof(units[0]), out);
}

bool
weft__conf_parse_bool(const char *s, bool *out)
{
	static const char *const yes[] = {"true", "yes", "on", "1"};
	static const char *const no[] = {"false", "no", "off", "0"};
	size_t i;

	for (i = 0; i < 4; i++) {
		if (strcasecmp(s, yes[i]) == 0 || strcasecmp(s, no[i]) == 0) {
			*out = strcasecmp(s, yes[i]) == 0;
			return true;
		}
	}
	return false;
}

/* host:port or [v6]:port; the host is checked as weft_connect would. */
bool
weft__conf_parse_address(const char *s, weft_msvc_conf_address *out)
{
	return weft_address_split(s, out->host, sizeof(out->host),
	                          &out->port) == 0;
}

static int
why_fail(char *why, size_t whylen, const char *fmt, const char *value,
         const char *hint)
{
	snprintf(why, whylen, fmt, value, hint);
	return WEFT_ECONFIG;
}

static int
check_range(const weft_msvc_conf_key *k, uint64_t v, uint64_t type_max,
            char *why, size_t whylen)
{
	uint64_t max = k->max != 0 && k->max < type_max ? k->max : type_max;
	const char *sep = k->why ? ": " : "", *reason = k->why ? k->why : "";

	if (v == 0 && k->zero_ok)
		return 0;
	if (v < k->min && k->min == 1) {
		snprintf(why, whylen, "must not be 0%s%s", sep, reason);
		return WEFT_ECONFIG;
	}
	if (v < k->min || v > max) {
		snprintf(why, whylen, "%llu is out of range (%llu to %llu)%s%s",
		         (unsigned long long)v, (unsigned long long)k->min,
		         (unsigned long long)max, sep, reason);
		return WEFT_ECONFIG;
	}
	return 0;
}

static int
set_choice(const weft_msvc_conf_key *k, const char *value, int *field,
           char *why, size_t whylen)
{
	size_t i, used;
	int n;

	for (i = 0; k->choices[i] != NULL; i++) {
		if (strcasecmp(value, k->choices[i]) == 0) {
			*field = (int)i;
			return 0;
		}
	}
	n = snprintf(why, whylen, "'%s' is not one of", value);
	for (i = 0; n >= 0 && (size_t)n < whylen && k->choices[i]; i++) {
		used = (size_t)n;
		n += snprintf(why + used, whylen - used, "%s %s",
		              i == 0 ? "" : ",", k->choices[i]);
	}
	return WEFT_ECONFIG;
}

static int
set_number(const weft_msvc_conf_key *k, const char *value, void *field,
           char *why, size_t whylen)
{
	uint64_t v = 0;
	const char *end;
	int rv;

	switch (k->type) {
	case WEFT_MSVC_CONF_U32:
		if (!parse_number(value, &v, &end) || *end != '\0')
			return why_fail(why, whylen, "not a number: '%s'%s",
			                value, "");
		if ((rv = check_range(k, v, UINT32_MAX, why, whylen)) != 0)
			return rv;
		*(uint32_t *)field = (uint32_t)v;
		return 0;
	case WEFT_MSVC_CONF_SIZE:
		if (!weft__conf_parse_size(value, &v))
			return why_fail(why, whylen, "not a size: '%s' (%s)",
			                value, "4096, 64KiB, 16MB, 1G");
		if ((rv = check_range(k, v, SIZE_MAX, why, whylen)) != 0)
			return rv;
		*(size_t *)field = (size_t)v;
		return 0;
	default: /* WEFT_MSVC_CONF_DURATION */
		if (!weft__conf_parse_duration(value, &v))
			return why_fail(
			    why, whylen, "not a duration: '%s' (%s)", value,
			    "500ms, 2s, 5m, 1h; a bare number is ms");
		if ((rv = check_range(k, v, UINT64_MAX, why, whylen)) != 0)
			return rv;
		*(uint64_t *)field = v;
		return 0;
	}
}

int
weft__conf_set(const weft_msvc_conf_key *k, const char *value, void *dst,
               char *why, size_t whylen)
{
	void *field = (char *)dst + k->offset;
	bool b;

	switch (k->type) {
	case WEFT_MSVC_CONF_STRING:
		*(const char **)field = value;
		return 0;
	case WEFT_MSVC_CONF_BOOL:
		if (!weft__conf_parse_bool(value, &b))
			return why_fail(why, whylen, "not a boolean: '%s' (%s)",
			                value,
			                "true or false, yes or no, on "
			                "or off, 1 or 0");
		*(bool *)field = b;
		return 0;
	case WEFT_MSVC_CONF_U32:
	case WEFT_MSVC_CONF_SIZE:
	case WEFT_MSVC_CONF_DURATION:
		return set_number(k, value, field, why, whylen);
	case WEFT_MSVC_CONF_ADDRESS:
		if (!weft__conf_parse_address(value, field))
			return why_fail(why, whylen,
			                "not an address: '%s' (%s)", value,
			                "host:port or [IPv6]:port");
		return 0;
	case WEFT_MSVC_CONF_CHOICE:
		return set_choice(k, value, field, why, whylen);
	case WEFT_MSVC_CONF_CUSTOM:
		return k->parse(value, field, why, whylen);
	}
	return why_fail(why, whylen, "bad key table%s%s", "", "");
}

const weft_msvc_conf_key *
weft__conf_find(const weft_msvc_conf_key *keys, size_t n, const char *name)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(keys[i].name, name) == 0)
			return &keys[i];
	return NULL;
}

int
weft__conf_apply(const char *section, const weft_msvc_conf_key *keys, size_t n,
                 const char *key, const char *value, void *dst, char *msg,
                 size_t msglen)
{
	const weft_msvc_conf_key *k = weft__conf_find(keys, n, key);
	char why[200];

	if (k == NULL) {
		snprintf(msg, msglen, "[%s]: unknown key '%s'", section, key);
		return WEFT_ECONFIG;
	}
	if (weft__conf_set(k, value, dst, why, sizeof(why)) != 0) {
		snprintf(msg, msglen, "[%s] %s: %s", section, key, why);
		return WEFT_ECONFIG;
	}
	return 0;
}

/* Applies every entry of section name (exactly) to dst. */
static int
read_one(const weft_msvc_config *cfg, const char *name,
         const weft_msvc_conf_section *s, void *dst, char *err, size_t errlen)
{
	char msg[400];
	size_t i;

	for (i = 0; i < cfg->extra_len; i++) {
		const struct weft__msvc_kv *kv = &cfg->extra[i];

		if (strcmp(kv->section, name) != 0)
			continue;
		if (weft__conf_apply(kv->section, s->keys, s->nkeys, kv->key,
		                     kv->value, dst, msg, sizeof(msg)) == 0)
			continue;
		if (kv->line > 0)
			snprintf(err, errlen, "%s:%d: %s",
			         weft__msvc_config_source(cfg), kv->line, msg);
		else
			snprintf(err, errlen, "%s: %s",
			         weft__msvc_config_source(cfg), msg);
		return WEFT_ECONFIG;
	}
	return 0;
}

int
weft_msvc_config_read(const weft_msvc_config *cfg,
                      const weft_msvc_conf_section *section,
                      const char *node_id, void *dst, char *err, size_t errlen)
{
	char name[192];
	int rv;

	if (cfg == NULL || section == NULL || dst == NULL)
		return WEFT_EINVAL;
	if ((rv = read_one(cfg, section->name, section, dst, err, errlen)))
		return rv;
	if (!section->per_node || node_id == NULL)
		return 0;
	snprintf(name, sizeof(name), "%s %s", section->name, node_id);
	return read_one(cfg, name, section, dst, err, errlen);
}

void
weft_msvc_config_where(const weft_msvc_config *cfg, const char *section,
                       const char *key, char *buf, size_t len)
{
	size_t i;

	for (i = 0; i < cfg->extra_len; i++) {
		const struct weft__msvc_kv *kv = &cfg->extra[i];

		if (strcmp(kv->section, section) == 0 &&
		    strcmp(kv->key, key) == 0 && kv->line > 0) {
			snprintf(buf, len, "%s:%d",
			         weft__msvc_config_source(cfg), kv->line);
			return;
		}
	}
	snprintf(buf, len, "%s", weft__msvc_config_source(cfg));
}
