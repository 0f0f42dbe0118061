/* SPDX-License-Identifier: MIT */
/* settings.c: the [weftd] section of the cluster configuration. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "weftd_int.h"

#define DEFAULT_SHUTDOWN_TIMEOUT_MS 5000

int
weftd_parse_duration_ms(const char *text, uint64_t *out)
{
	unsigned long long n;
	char *end;

	if (!isdigit((unsigned char)*text))
		return WEFT_EINVAL;
	errno = 0;
	n = strtoull(text, &end, 10);
	if (errno != 0)
		return WEFT_EINVAL;
	if (*end == '\0' || strcmp(end, "ms") == 0) {
		*out = n;
		return 0;
	}
	if (strcmp(end, "s") != 0 || n > UINT64_MAX / 1000)
		return WEFT_EINVAL;
	*out = n * 1000;
	return 0;
}

/* Accepts "host:port" and "[v6-host]:port"; port 0 binds any free port. */
int
weftd_parse_hostport(const char *text, char *host, size_t host_len,
                     uint16_t *port)
{
	const char *colon = strrchr(text, ':'), *h = text;
	unsigned long p;
	size_t n;
	char *end;

	if (colon == NULL || colon == text || !isdigit((unsigned char)colon[1]))
		return WEFT_EINVAL;
	n = (size_t)(colon - text);
	if (text[0] == '[') {
		if (n < 3 || text[n - 1] != ']')
			return WEFT_EINVAL;
		h = text + 1;
		n -= 2;
	}
	errno = 0;
	p = strtoul(colon + 1, &end, 10);
	if (errno != 0 || *end != '\0' || p > 65535 || n >= host_len)
		return WEFT_EINVAL;
	memcpy(host, h, n);
	host[n] = '\0';
	*port = (uint16_t)p;
	return 0;
}

static int
parse_log_level(const char *text, enum weft_log_level *out)
{
	static const char *const names[] = {"debug", "info", "warn", "error",
	                                    "off"};
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (strcasecmp(text, names[i]) == 0) {
			*out = (enum weft_log_level)i;
			return 0;
		}
	}
	return WEFT_EINVAL;
}

int
weftd_settings_load(struct weftd *d, char *err, size_t errlen)
{
	enum weft_log_level level;
	const char *v;

	d->shutdown_timeout_ms = DEFAULT_SHUTDOWN_TIMEOUT_MS;
	v = weft_msvc_config_get(d->cfg, "weftd", "metrics_listen");
	if (v != NULL) {
		if (weftd_parse_hostport(v, d->metrics_host,
		                         sizeof(d->metrics_host),
		                         &d->metrics_port) != 0)
			goto bad;
		d->metrics_on = true;
	}
	v = weft_msvc_config_get(d->cfg, "weftd", "shutdown_timeout");
	if (v != NULL && weftd_parse_duration_ms(v, &d->shutdown_timeout_ms))
		goto bad;
	v = weft_msvc_config_get(d->cfg, "weftd", "load");
	if (v != NULL) {
		if (strcmp(v, "on") != 0 && strcmp(v, "off") != 0)
			goto bad;
		d->load_on = strcmp(v, "on") == 0;
	}
	/* The library logs only warnings by default; a daemon's operator
	 * wants its info lines (peers up and down, ready, draining). */
	level = WEFT_LOG_INFO;
	v = weft_msvc_config_get(d->cfg, "weftd", "log_level");
	if (v != NULL && parse_log_level(v, &level) != 0)
		goto bad;
	/* The WEFT_LOG environment variable wins over the file. */
	if (getenv("WEFT_LOG") == NULL)
		weft_log_set_level(level);
	return 0;

bad:
	snprintf(err, errlen, "%s: [weftd]: invalid value '%s'", d->config_path,
	         v);
	return WEFT_ECONFIG;
}
