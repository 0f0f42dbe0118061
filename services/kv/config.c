/* SPDX-License-Identifier: MIT */
/*
 * config.c: the [kv] section, in the configuration file's one grammar
 * (weft_msvc_conf_section): its key table, and the checks that need the
 * cluster (a quorum no larger than the members, a value that fits a frame).
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "kv_int.h"

#define DEFAULT_REPLICATE_TIMEOUT_MS 2000
#define DEFAULT_MAX_VALUE (16u << 20)
#define DEFAULT_MAX_CLOCK_SKEW_MS 30000
#define DEFAULT_REPAIR_INTERVAL_MS 10000
/* What a put carries besides its value: the key and the msgpack around. */
#define PUT_OVERHEAD (WEFT_KV_MAX_KEY + 64u)

int
weft__kv_parse_quorum(const char *text, uint32_t members, uint32_t *out)
{
	struct weft__kv_quorum q;
	char why[8];

	if (weft__kv_quorum_parse(text, &q, why, sizeof(why)) != 0)
		return WEFT_EINVAL;
	return weft__kv_quorum_resolve(&q, members, out);
}

int
weft__kv_quorum_resolve(const struct weft__kv_quorum *q, uint32_t members,
                        uint32_t *out)
{
	uint64_t n = q->count;

	if (q->kind == WEFT__KV_QUORUM_MAJORITY)
		n = members / 2 + 1;
	else if (q->kind == WEFT__KV_QUORUM_ALL)
		n = members;
	else if (q->kind == WEFT__KV_QUORUM_ONE)
		n = 1;
	if (n < 1 || n > members)
		return WEFT_EINVAL;
	*out = (uint32_t)n;
	return 0;
}

uint32_t
weft__kv_quorum_now(const struct weft__kv_quorum *q, uint32_t members)
{
	switch (q->kind) {
	case WEFT__KV_QUORUM_MAJORITY:
		return members / 2 + 1;
	case WEFT__KV_QUORUM_ALL:
		return members > 0 ? members : 1;
	case WEFT__KV_QUORUM_ONE:
		return 1;
	default:
		return q->count;
	}
}

/* A weft_msvc_conf_parse_cb: "majority", "all", "one" or a count. */
int
weft__kv_quorum_parse(const char *text, void *field, char *why, size_t whylen)
{
	static const char *const names[] = {"majority", "all", "one"};
	struct weft__kv_quorum *q = field;
	unsigned long long n = 0;
	size_t i;

	for (i = 0; i < 3; i++) {
		if (strcasecmp(text, names[i]) == 0) {
			q->kind = (int)i + WEFT__KV_QUORUM_MAJORITY;
			q->count = 0;
			return 0;
		}
	}
	for (i = 0; text[i] >= '0' && text[i] <= '9' && n <= UINT32_MAX; i++)
		n = n * 10 + (unsigned)(text[i] - '0');
	if (i == 0 || text[i] != '\0' || n < 1 || n > UINT32_MAX) {
		snprintf(why, whylen,
		         "'%s': want a number of replicas, "
		         "majority, all or one",
		         text);
		return WEFT_ECONFIG;
	}
	q->kind = WEFT__KV_QUORUM_COUNT;
	q->count = (uint32_t)n;
	return 0;
}

/* A weft_msvc_conf_parse_cb: "one", "quorum" or "all". */
static int
consistency_parse(const char *text, void *field, char *why, size_t whylen)
{
	weft_kv_consistency cl;

	if (weft_kv_consistency_parse(text, &cl) != 0) {
		snprintf(why, whylen, "'%s': want one, quorum or all", text);
		return WEFT_ECONFIG;
	}
	*(uint32_t *)field = (uint32_t)cl;
	return 0;
}

#define KV_KEY(type, name, field, ...)                                         \
	WEFT_MSVC_CONF_KEY(type, name, struct weft__kv_settings, field,        \
	                   __VA_ARGS__)
/* [kv]: one line per key (weft.conf(5)). */
static const weft_msvc_conf_key kv_keys[] = {
    KV_KEY(CUSTOM, "write_quorum", quorum, .parse = weft__kv_quorum_parse),
    KV_KEY(DURATION, "replicate_timeout", replicate_timeout_ms, .min = 1,
           .max = WEFT_MSVC_CONF_DAY_MS, .why = WEFT_MSVC_CONF_DAY_WHY),
    KV_KEY(SIZE, "max_value", max_value, .min = 1, .max = UINT32_MAX / 2,
           .why = "a value and its key must fit one frame, at most 2 GiB"),
    KV_KEY(DURATION, "max_clock_skew", max_clock_skew_ms, .min = 1,
           .max = WEFT_MSVC_CONF_DAY_MS, .why = WEFT_MSVC_CONF_DAY_WHY),
    KV_KEY(DURATION, "repair_interval", repair_interval_ms, .min = 1,
           .max = WEFT_MSVC_CONF_DAY_MS, .why = WEFT_MSVC_CONF_DAY_WHY),
    KV_KEY(CUSTOM, "read_consistency", read_consistency,
           .parse = consistency_parse),
};

const weft_msvc_conf_section weft_kv_config_section = {
    .name = "kv",
    .keys = kv_keys,
    .nkeys = sizeof(kv_keys) / sizeof(kv_keys[0]),
    .size = sizeof(struct weft__kv_settings),
};

int
weft__kv_settings_read(const weft_msvc_config *cfg, uint32_t members,
                       struct weft__kv_settings *s, char *err, size_t errlen)
{
	const weft_msvc_limits *l;
	size_t message;
	char where[256];
	int rv;

	memset(s, 0, sizeof(*s));
	s->quorum.kind = WEFT__KV_QUORUM_MAJORITY;
	s->replicate_timeout_ms = DEFAULT_REPLICATE_TIMEOUT_MS;
	s->max_value = DEFAULT_MAX_VALUE;
	s->max_clock_skew_ms = DEFAULT_MAX_CLOCK_SKEW_MS;
	s->repair_interval_ms = DEFAULT_REPAIR_INTERVAL_MS;
	s->read_consistency = WEFT_KV_READ_ONE;
	if (cfg == NULL)
		return weft__kv_quorum_resolve(&s->quorum, members,
		                               &s->write_quorum);
	rv = weft_msvc_config_read(cfg, &weft_kv_config_section, NULL, s, err,
	                           errlen);
	if (rv != 0)
		return rv;
	if (weft__kv_quorum_resolve(&s->quorum, members, &s->write_quorum)) {
		weft_msvc_config_where(cfg, "kv", "write_quorum", where,
		                       sizeof(where));
		snprintf(
		    err, errlen,
		    "%s: [kv] write_quorum: %u is more than the %u members",
		    where, s->quorum.count, members);
		return WEFT_ECONFIG;
	}
	/* A value travels in chunks where it is larger than a frame
	 * (docs/PROTOCOL.md 2.1): it and its key must fit a message. */
	l = weft_msvc_config_limits_const(cfg);
	message = l->max_message_bytes > l->max_frame_bytes
	              ? l->max_message_bytes
	              : l->max_frame_bytes;
	if (message < PUT_OVERHEAD || s->max_value > message - PUT_OVERHEAD) {
		weft_msvc_config_where(cfg, "kv", "max_value", where,
		                       sizeof(where));
		snprintf(err, errlen,
		         "%s: [kv] max_value: %zu bytes and a key do not fit "
		         "[limits] max_message (%zu bytes)",
		         where, s->max_value, message);
		return WEFT_ECONFIG;
	}
	return 0;
}

int
weft_kv_config_check(const weft_msvc_config *cfg, char *err, size_t errlen)
{
	struct weft__kv_settings s;

	if (cfg == NULL)
		return WEFT_EINVAL;
	return weft__kv_settings_read(
	    cfg, (uint32_t)weft_msvc_config_node_count(cfg), &s, err, errlen);
}
