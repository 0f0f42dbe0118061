/* SPDX-License-Identifier: MIT */
/* config_ini.c: reading the cluster configuration from an INI file. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <ini.h>

#include "msvc_int.h"

/* A configuration file is small; refuse anything absurd. */
#define MAX_FILE_BYTES (1u << 20)

enum value_kind { V_SIZE, V_DURATION, V_U32, V_BOOL, V_CONNS };

struct limit_key {
	const char *name;
	enum value_kind kind;
	size_t offset;
	int cls; /* V_CONNS: which class */
};

#define LIMIT(name, kind, field)                                               \
	{                                                                      \
		name, kind, offsetof(weft_msvc_limits, field), 0               \
	}
static const struct limit_key limit_keys[] = {
    LIMIT("max_frame", V_SIZE, max_frame_bytes),
    LIMIT("outbound_queue", V_SIZE, outbound_queue_bytes),
    LIMIT("inbound_inflight", V_SIZE, inbound_inflight_bytes),
    LIMIT("max_pending_requests", V_U32, max_pending_requests),
    LIMIT("large_message", V_SIZE, large_message_bytes),
    LIMIT("connect_timeout", V_DURATION, connect_timeout_ms),
    LIMIT("heartbeat_interval", V_DURATION, heartbeat_interval_ms),
    LIMIT("heartbeat_misses", V_U32, heartbeat_misses),
    LIMIT("reconnect_min", V_DURATION, reconnect_min_ms),
    LIMIT("reconnect_max", V_DURATION, reconnect_max_ms),
    LIMIT("request_timeout", V_DURATION, request_timeout_ms),
    LIMIT("loops", V_U32, loops),
    LIMIT("worker_threads", V_U32, worker_threads),
    LIMIT("allow_clients", V_BOOL, allow_clients),
    {"connections_urgent", V_CONNS, 0, WEFT_MSVC_URGENT},
    {"connections_small", V_CONNS, 0, WEFT_MSVC_SMALL},
    {"connections_large", V_CONNS, 0, WEFT_MSVC_LARGE},
};
#define N_LIMIT_KEYS (sizeof(limit_keys) / sizeof(limit_keys[0]))

enum section_kind { S_NONE, S_CLUSTER, S_NODE, S_LIMITS, S_TLS, S_EXTRA };

/* Parser state: the text being read, where we are, what was seen. */
struct parse {
	weft_msvc_config *cfg;
	const char *name;
	const char *text, *pos;
	int line;      /* the line the reader last returned */
	int err_line;  /* first error's line, 0 if none */
	int rv;        /* first error's code */
	char msg[200]; /* first error's message */
	char section[128];
	int section_line;
	int header_line; /* the last "[...]" line the reader returned */
	enum section_kind kind;
	ssize_t node;  /* S_NODE: index in cfg->nodes */
	uint32_t seen; /* keys seen in this section, a bit per key */
	bool have_name;
	uint32_t limits_seen;
};

static int
fail(struct parse *p, int rv, const char *fmt, const char *a, const char *b)
{
	if (p->err_line == 0) {
		p->err_line = p->line;
		p->rv = rv;
		snprintf(p->msg, sizeof(p->msg), fmt, a, b);
	}
	return 0;
}

/* The ini_reader: hands out one line at a time and counts lines. */
static char *
read_line(char *buf, int size, void *stream)
{
	struct parse *p = stream;
	const char *nl;
	size_t n;

	if (*p->pos == '\0' || size < 2)
		return NULL;
	nl = strchr(p->pos, '\n');
	n = nl != NULL ? (size_t)(nl - p->pos) + 1 : strlen(p->pos);
	if (n > (size_t)size - 1)
		n = (size_t)size - 1;
	if (p->pos == p->text || p->pos[-1] == '\n')
		p->line++;
	memcpy(buf, p->pos, n);
	buf[n] = '\0';
	if (buf[strspn(buf, " \t")] == '[')
		p->header_line = p->line;
	p->pos += n;
	return buf;
}

/* Parses an unsigned decimal number; *end gets the rest. */
static bool
parse_number(const char *s, uint64_t *out, const char **end)
{
	uint64_t v = 0;

	if (*s < '0' || *s > '9')
		return false;
	for (; *s >= '0' && *s <= '9'; s++) {
		if (v > (UINT64_MAX - 9) / 10)
			return false;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	*end = s;
	return true;
}

static bool
mul_checked(uint64_t v, uint64_t m, uint64_t *out)
{
	if (m != 0 && v > UINT64_MAX / m)
		return false;
	*out = v * m;
	return true;
}

static bool
parse_size(const char *s, uint64_t *out)
{
	static const struct {
		const char *suffix;
		uint64_t mult;
	} units[] = {{"", 1},           {"b", 1},        {"k", 1 << 10},
	             {"kib", 1 << 10},  {"kb", 1 << 10}, {"m", 1 << 20},
	             {"mib", 1 << 20},  {"mb", 1 << 20}, {"g", 1u << 30},
	             {"gib", 1u << 30}, {"gb", 1u << 30}};
	const char *rest;
	uint64_t v;
	size_t i;

	if (!parse_number(s, &v, &rest))
		return false;
	while (*rest == ' ')
		rest++;
	for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (strcasecmp(rest, units[i].suffix) == 0)
			return mul_checked(v, units[i].mult, out);
	return false;
}

static bool
parse_duration(const char *s, uint64_t *out)
{
	const char *rest;
	uint64_t v;

	if (!parse_number(s, &v, &rest))
		return false;
	while (*rest == ' ')
		rest++;
	if (*rest == '\0' || strcasecmp(rest, "ms") == 0) {
		*out = v;
		return true;
	}
	if (strcasecmp(rest, "s") == 0)
		return mul_checked(v, 1000, out);
	return false;
}

static bool
parse_bool(const char *s, bool *out)
{
	if (strcasecmp(s, "true") == 0 || strcasecmp(s, "yes") == 0 ||
	    strcmp(s, "1") == 0 || strcasecmp(s, "on") == 0)
		*out = true;
	else if (strcasecmp(s, "false") == 0 || strcasecmp(s, "no") == 0 ||
	         strcmp(s, "0") == 0 || strcasecmp(s, "off") == 0)
		*out = false;
	else
		return false;
	return true;
}

static int
set_limit(struct parse *p, const struct limit_key *k, const char *value)
{
	char *base = (char *)&p->cfg->limits + k->offset;
	uint64_t v = 0;
	bool b;

	switch (k->kind) {
	case V_BOOL:
		if (!parse_bool(value, &b))
			return fail(p, WEFT_ECONFIG, "%s: not a boolean: '%s'",
			            k->name, value);
		*(bool *)base = b;
		return 1;
	case V_SIZE:
		if (!parse_size(value, &v) || v > SIZE_MAX)
			return fail(p, WEFT_ECONFIG, "%s: not a size: '%s'",
			            k->name, value);
		break;
	case V_DURATION:
		if (!parse_duration(value, &v))
			return fail(p, WEFT_ECONFIG, "%s: not a duration: '%s'",
			            k->name, value);
		break;
	case V_U32:
	case V_CONNS:
		if (!parse_number(value, &v, &(const char *){NULL}) ||
		    strspn(value, "0123456789") != strlen(value) ||
		    v > UINT32_MAX)
			return fail(p, WEFT_ECONFIG, "%s: not a number: '%s'",
			            k->name, value);
		break;
	}
	if (v == 0 && k->kind != V_U32)
		return fail(p, WEFT_ECONFIG, "%s: must not be 0%s", k->name,
		            "");
	if (k->kind == V_SIZE)
		*(size_t *)base = (size_t)v;
	else if (k->kind == V_DURATION)
		*(uint64_t *)base = v;
	else if (k->kind == V_CONNS)
		p->cfg->limits.connections[k->cls] = (uint32_t)v;
	else
		*(uint32_t *)base = (uint32_t)v;
	return 1;
}

static int
on_limits(struct parse *p, const char *key, const char *value)
{
	size_t i;

	for (i = 0; i < N_LIMIT_KEYS; i++) {
		if (strcmp(key, limit_keys[i].name) != 0)
			continue;
		if (p->seen & (1u << i))
			return fail(p, WEFT_ECONFIG, "duplicate key '%s'%s",
			            key, "");
		p->seen |= 1u << i;
		return set_limit(p, &limit_keys[i], value);
	}
	return fail(p, WEFT_ECONFIG, "unknown key '%s' in [%s]", key,
	            p->section);
}

static int
on_cluster(struct parse *p, const char *key, const char *value)
{
	if (strcmp(key, "name") != 0)
		return fail(p, WEFT_ECONFIG, "unknown key '%s' in [%s]", key,
		            p->section);
	if (p->have_name)
		return fail(p, WEFT_ECONFIG, "duplicate key '%s'%s", key, "");
	if (!weft__msvc_id_is_valid(value))
		return fail(
		    p, WEFT_ECONFIG,
		    "bad cluster name '%s'%s (1-63 of A-Z a-z 0-9 _ . -)",
		    value, "");
	strcpy(p->cfg->cluster, value);
	p->have_name = true;
	return 1;
}

static int
on_node(struct parse *p, const char *key, const char *value)
{
	struct weft__msvc_node *n = &p->cfg->nodes[p->node];
	uint64_t port;
	const char *end;
	char *host;

	if (strcmp(key, "host") == 0) {
		if (p->seen & 1)
			return fail(p, WEFT_ECONFIG, "duplicate key '%s'%s",
			            key, "");
		if (value[0] == '\0')
			return fail(p, WEFT_ECONFIG, "empty host%s%s", "", "");
		if ((host = strdup(value)) == NULL)
			return fail(p, WEFT_ENOMEM, "out of memory%s%s", "",
			            "");
		free(n->host);
		n->host = host;
		p->seen |= 1;
		return 1;
	}
	if (strcmp(key, "port") == 0) {
		if (p->seen & 2)
			return fail(p, WEFT_ECONFIG, "duplicate key '%s'%s",
			            key, "");
		if (!parse_number(value, &port, &end) || *end != '\0' ||
		    port > 65535)
			return fail(p, WEFT_ECONFIG, "bad port '%s'%s", value,
			            "");
		n->port = (uint16_t)port;
		p->seen |= 2;
		return 1;
	}
	return fail(p, WEFT_ECONFIG, "unknown key '%s' in [%s]", key,
	            p->section);
}

static int
on_tls(struct parse *p, const char *key, const char *value)
{
	weft_msvc_tls_config *t = &p->cfg->tls;
	const char **slot = NULL;

	if (strcmp(key, "mode") == 0) {
		if (strcmp(value, "none") == 0)
			t->mode = WEFT_MSVC_TLS_NONE;
		else if (strcmp(value, "all") == 0)
			t->mode = WEFT_MSVC_TLS_ALL;
		else if (strcmp(value, "optional") == 0)
			t->mode = WEFT_MSVC_TLS_OPTIONAL;
		else
			return fail(p, WEFT_ECONFIG,
			            "tls mode '%s'%s: none, all or optional",
			            value, "");
		return 1;
	}
	if (strcmp(key, "cert") == 0)
		slot = &t->cert_file;
	else if (strcmp(key, "key") == 0)
		slot = &t->key_file;
	else if (strcmp(key, "ca") == 0)
		slot = &t->ca_file;
	else if (strcmp(key, "min_version") == 0) {
		if (strcmp(value, "1.2") != 0 && strcmp(value, "1.3") != 0)
			return fail(p, WEFT_ECONFIG,
			            "tls min_version '%s'%s: 1.2 or 1.3", value,
			            "");
		slot = &t->min_version;
	} else
		return fail(p, WEFT_ECONFIG, "unknown key '%s' in [%s]", key,
		            p->section);
	free((char *)*slot);
	if ((*slot = strdup(value)) == NULL)
		return fail(p, WEFT_ENOMEM, "out of memory%s%s", "", "");
	return 1;
}

/* Ends the previous section: checks what it must have had. */
static int
end_section(struct parse *p)
{
	int line = p->line;

	if (p->kind == S_NODE && (p->seen & 3) != 3) {
		p->line = p->section_line;
		fail(p, WEFT_ECONFIG, "[%s] needs host and port%s", p->section,
		     "");
		p->line = line;
		return 0;
	}
	return 1;
}

static int
begin_node(struct parse *p, const char *id)
{
	int rv;

	if (!weft__msvc_id_is_valid(id))
		return fail(p, WEFT_ECONFIG,
		            "bad node id '%s'%s (1-63 of A-Z a-z 0-9 _ . -)",
		            id, "");
	rv = weft_msvc_config_add_node(p->cfg, id, "-", 0);
	if (rv == WEFT_EEXIST)
		return fail(p, WEFT_ECONFIG, "duplicate node '%s'%s", id, "");
	if (rv != 0)
		return fail(p, rv, "out of memory%s%s", "", "");
	p->node = weft__msvc_config_find(p->cfg, id);
	p->kind = S_NODE;
	return 1;
}

static int
begin_section(struct parse *p, const char *section)
{
	snprintf(p->section, sizeof(p->section), "%s", section);
	p->section_line = p->header_line;
	p->seen = 0;
	if (strncmp(section, "node ", 5) == 0)
		return begin_node(p, section + 5);
	if (strcmp(section, "cluster") == 0)
		p->kind = S_CLUSTER;
	else if (strcmp(section, "limits") == 0)
		p->kind = S_LIMITS;
	else if (strcmp(section, "tls") == 0)
		p->kind = S_TLS;
	else if (strcmp(section, "node") == 0)
		return fail(p, WEFT_ECONFIG,
		            "[node] needs an id: [node ID]%s%s", "", "");
	else
		p->kind = S_EXTRA;
	if (p->kind == S_LIMITS && p->limits_seen++ > 0)
		return fail(p, WEFT_ECONFIG, "duplicate section [%s]%s",
		            section, "");
	return 1;
}

static int
on_entry(void *user, const char *section, const char *key, const char *value)
{
	struct parse *p = user;

	if (p->err_line != 0)
		return 1; /* only the first error is reported */
	if (strcmp(section, p->section) != 0) {
		int line = p->line;
		int ok;

		/* Errors about the section name belong to its header line. */
		if (!end_section(p))
			return 0;
		p->line = p->header_line;
		ok = begin_section(p, section);
		p->line = line;
		if (!ok)
			return 0;
	}
	if (key == NULL)
		return 1; /* an empty section */
	switch (p->kind) {
	case S_NONE:
		return fail(p, WEFT_ECONFIG, "'%s' outside of any section%s",
		            key, "");
	case S_CLUSTER:
		return on_cluster(p, key, value);
	case S_NODE:
		return on_node(p, key, value);
	case S_LIMITS:
		return on_limits(p, key, value);
	case S_TLS:
		return on_tls(p, key, value);
	case S_EXTRA:
		if (weft__msvc_config_add_extra(p->cfg, section, key, value))
			return fail(p, WEFT_ENOMEM, "out of memory%s%s", "",
			            "");
		return 1;
	}
	return 1;
}

static int
finish(struct parse *p, int ini_rv, char *err, size_t errlen)
{
	char msg[sizeof(p->msg)];

	if (p->err_line == 0 && ini_rv > 0) {
		p->err_line = ini_rv;
		p->rv = WEFT_ECONFIG;
		snprintf(p->msg, sizeof(p->msg), "syntax error");
	} else if (p->err_line == 0 && ini_rv < 0) {
		p->rv = WEFT_ENOMEM;
		snprintf(p->msg, sizeof(p->msg), "out of memory");
	}
	if (p->err_line == 0 && end_section(p) && !p->have_name) {
		p->rv = WEFT_ECONFIG;
		snprintf(p->msg, sizeof(p->msg), "no [cluster] name");
	}
	if (p->rv == 0 &&
	    weft__msvc_config_validate(p->cfg, msg, sizeof(msg)) != 0) {
		p->rv = WEFT_ECONFIG;
		snprintf(p->msg, sizeof(p->msg), "%s", msg);
	}
	if (p->rv == 0)
		return 0;
	if (errlen > 0 && p->err_line > 0)
		snprintf(err, errlen, "%s:%d: %s", p->name, p->err_line,
		         p->msg);
	else if (errlen > 0)
		snprintf(err, errlen, "%s: %s", p->name, p->msg);
	return p->rv;
}

int
weft_msvc_config_parse(const char *text, const char *name,
                       weft_msvc_config **out, char *err, size_t errlen)
{
	struct parse p = {.name = name ? name : "<config>", .text = text};
	int rv;

	if (text == NULL || out == NULL)
		return WEFT_EINVAL;
	p.pos = text;
	/* A placeholder name, replaced by [cluster] name. */
	if ((rv = weft_msvc_config_new("unnamed", &p.cfg)) != 0)
		return rv;
	rv = ini_parse_stream(read_line, &p, on_entry, &p);
	if ((rv = finish(&p, rv, err, errlen)) != 0) {
		weft_msvc_config_free(p.cfg);
		return rv;
	}
	*out = p.cfg;
	return 0;
}

int
weft_msvc_config_load(const char *path, weft_msvc_config **out, char *err,
                      size_t errlen)
{
	char *text;
	size_t n;
	FILE *f;
	int rv;

	if ((f = fopen(path, "r")) == NULL) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return WEFT_EIO;
	}
	if ((text = malloc(MAX_FILE_BYTES + 1)) == NULL) {
		fclose(f);
		return WEFT_ENOMEM;
	}
	n = fread(text, 1, MAX_FILE_BYTES + 1, f);
	rv = ferror(f) ? WEFT_EIO : 0;
	fclose(f);
	if (rv == 0 && n > MAX_FILE_BYTES) {
		snprintf(err, errlen, "%s: larger than %u bytes", path,
		         MAX_FILE_BYTES);
		rv = WEFT_ECONFIG;
	} else if (rv != 0) {
		snprintf(err, errlen, "%s: read error", path);
	} else {
		text[n] = '\0';
		if (strlen(text) != n) {
			snprintf(err, errlen, "%s: contains a NUL byte", path);
			rv = WEFT_ECONFIG;
		} else {
			rv = weft_msvc_config_parse(text, path, out, err,
			                            errlen);
		}
	}
	free(text);
	return rv;
}
