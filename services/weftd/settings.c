/* SPDX-License-Identifier: MIT */
/*
 * settings.c: the [weftd] section of the cluster configuration, a key table
 * in the file's one grammar, and the loading that weftd and weft-kv share:
 * every section checked, an unknown one or a misspelt key an error naming
 * the file and line.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/transport.h>

#include "weftd_int.h"

#define DEFAULT_SHUTDOWN_TIMEOUT_MS 5000
#define DEFAULT_LOAD_MAX_DURATION_MS (10 * 60 * 1000)
#define DEFAULT_LOAD_MAX_RATE 1000000

static const char *const log_levels[] = {"debug", "info", "warn",
                                         "error", "off",  NULL};
/* weft_log_format_parse's names; auto first, the default. */
static const char *const log_formats[] = {"auto", "text",    "logfmt",
                                          "json", "journal", NULL};

/* trace_sample_rate: a share, 0 to 1 (0.01, 1, 0). */
static int
parse_rate(const char *text, void *field, char *why, size_t whylen)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(text, &end);
	if (end == text || *end != '\0' || errno != 0 || !(v >= 0 && v <= 1)) {
		snprintf(why, whylen,
		         "want a share from 0 to 1 (0.01: one "
		         "request in a hundred)");
		return WEFT_ECONFIG;
	}
	*(double *)field = v;
	return 0;
}

#define WEFTD_KEY(type, name, field, ...)                                      \
	WEFT_MSVC_CONF_KEY(type, name, struct weftd_settings, field,           \
	                   __VA_ARGS__)
/* [weftd] and [weftd ID]: one line per key (docs/WEFTD.md, weftd(8)). */
static const weft_msvc_conf_key weftd_keys[] = {
    WEFTD_KEY(ADDRESS, "listen", listen),
    WEFTD_KEY(ADDRESS, "metrics_listen", metrics),
    WEFTD_KEY(DURATION, "shutdown_timeout", shutdown_timeout_ms,
              .max = WEFT_MSVC_CONF_DAY_MS, .why = WEFT_MSVC_CONF_DAY_WHY),
    WEFTD_KEY(CHOICE, "log_level", log_level, .choices = log_levels),
    WEFTD_KEY(CHOICE, "log_format", log_format, .choices = log_formats),
    WEFTD_KEY(BOOL, "load", load),
    WEFTD_KEY(DURATION, "load_max_duration", load_max_duration_ms, .min = 1,
              .max = WEFT_MSVC_CONF_DAY_MS, .why = WEFT_MSVC_CONF_DAY_WHY),
    WEFTD_KEY(U32, "load_max_rate", load_max_rate, .min = 1, .max = 100000000,
              .why = "requests/s; above what any node sends, a typing "
                     "error"),
    WEFTD_KEY(STRING, "span_file", span_file),
    WEFTD_KEY(CUSTOM, "trace_sample_rate", trace_sample_rate,
              .parse = parse_rate),
};

const weft_msvc_conf_section weftd_config_section = {
    .name = "weftd",
    .keys = weftd_keys,
    .nkeys = sizeof(weftd_keys) / sizeof(weftd_keys[0]),
    .size = sizeof(struct weftd_settings),
    .per_node = true,
};

/* [cluster]'s keys beside the name (docs/WEFTD.md, "Changing the
 * cluster"): where the members come from. */
static const char *const discoveries[] = {"file", "static", "dns-srv", NULL};
#define CLUSTER_KEY(type, name, field, ...)                                    \
	WEFT_MSVC_CONF_KEY(type, name, struct weftd_cluster, field, __VA_ARGS__)
static const weft_msvc_conf_key cluster_keys[] = {
    CLUSTER_KEY(CHOICE, "discovery", discovery, .choices = discoveries),
    CLUSTER_KEY(STRING, "dns_name", dns_name),
    CLUSTER_KEY(STRING, "dns_service", dns_service),
    CLUSTER_KEY(STRING, "dns_servers", dns_servers),
    CLUSTER_KEY(DURATION, "dns_grace", dns_grace_ms, .min = 1,
                .max = WEFT_MSVC_CONF_DAY_MS, .why = WEFT_MSVC_CONF_DAY_WHY),
    CLUSTER_KEY(U32, "dns_max_members", dns_max_members, .min = 1, .max = 1023,
                .why = "a cluster has at most 1024 member entries"),
};

const weft_msvc_conf_section weftd_cluster_section = {
    .name = "cluster",
    .keys = cluster_keys,
    .nkeys = sizeof(cluster_keys) / sizeof(cluster_keys[0]),
    .size = sizeof(struct weftd_cluster),
};

int
weftd_cluster_read(const weft_msvc_config *cfg, struct weftd_cluster *c,
                   char *err, size_t errlen)
{
	char where[300];
	int rv;

	memset(c, 0, sizeof(*c));
	c->discovery = WEFTD_DISCOVERY_FILE;
	if ((rv = weft_msvc_config_read(cfg, &weftd_cluster_section, NULL, c,
	                                err, errlen)) != 0)
		return rv;
	if (c->discovery == WEFTD_DISCOVERY_DNS_SRV &&
	    (c->dns_name == NULL || c->dns_name[0] == '\0')) {
		weft_msvc_config_where(cfg, "cluster", "discovery", where,
		                       sizeof(where));
		snprintf(err, errlen,
		         "%s: [cluster] discovery: dns-srv needs dns_name",
		         where);
		return WEFT_ECONFIG;
	}
	return 0;
}

int
weftd_config_load(const char *path, weft_msvc_config **out, char *err,
                  size_t errlen)
{
	static const weft_msvc_conf_section *const sections[] = {
	    &weftd_config_section, &weft_kv_config_section,
	    &weftd_cluster_section};
	const weft_msvc_config_opts opts = {
	    .sections = sections,
	    .nsections = sizeof(sections) / sizeof(sections[0]),
	    .strict = true,
	};

	return weft_msvc_config_load_opts(path, &opts, out, err, errlen);
}

int
weftd_settings_read(const weft_msvc_config *cfg, const char *id,
                    struct weftd_settings *s, char *err, size_t errlen)
{
	memset(s, 0, sizeof(*s));
	s->shutdown_timeout_ms = DEFAULT_SHUTDOWN_TIMEOUT_MS;
	s->load_max_duration_ms = DEFAULT_LOAD_MAX_DURATION_MS;
	s->load_max_rate = DEFAULT_LOAD_MAX_RATE;
	/* The library logs only warnings by default; a daemon's operator
	 * wants its info lines (peers up and down, ready, draining). */
	s->log_level = WEFT_LOG_INFO;
	return weft_msvc_config_read(cfg, &weftd_config_section, id, s, err,
	                             errlen);
}

void
weftd_settings_where(const weft_msvc_config *cfg, const char *id,
                     const char *key, char *section, size_t seclen, char *where,
                     size_t wherelen)
{
	char file[300];

	/* Only the file's name, when the key is in no such section. */
	weft_msvc_config_where(cfg, "", "", file, sizeof(file));
	snprintf(section, seclen, "weftd %s", id ? id : "");
	weft_msvc_config_where(cfg, section, key, where, wherelen);
	if (id != NULL && strcmp(where, file) != 0)
		return;
	snprintf(section, seclen, "weftd");
	weft_msvc_config_where(cfg, section, key, where, wherelen);
}

int
weftd_settings_load(struct weftd *d, char *err, size_t errlen)
{
	enum weft_log_format format;
	char where[300], section[WEFT_MSVC_MAX_ID + 8];
	int rv;

	if ((rv = weftd_settings_read(d->cfg, d->id, &d->set, err, errlen)))
		return rv;
	/* The WEFT_LOG environment variable wins over the file. */
	if (getenv("WEFT_LOG") == NULL)
		weft_log_set_level((enum weft_log_level)d->set.log_level);
	/* And WEFT_LOG_FORMAT too, read by the library. */
	if (getenv("WEFT_LOG_FORMAT") != NULL)
		return 0;
	weft_log_format_parse(log_formats[d->set.log_format], &format);
	if (weft_log_set_format(format) == 0)
		return 0;
	weftd_settings_where(d->cfg, d->id, "log_format", section,
	                     sizeof(section), where, sizeof(where));
	snprintf(err, errlen,
	         "%s: [%s] log_format: journal needs weft built with "
	         "libsystemd and a running journald",
	         where, section);
	return WEFT_ECONFIG;
}

void
weftd_format_address(const weft_msvc_conf_address *a, uint16_t port, char *buf,
                     size_t len)
{
	weft_address_join(a->host, port, buf, len);
}
