/* SPDX-License-Identifier: MIT */
/*
 * config_change.c: what a configuration read again may change while a
 * node runs (weft_msvc_config_check_change). The members may change; the
 * rest is what the node was built with (its limits, TLS, the components'
 * sections), which it cannot take without a restart.
 */
#include <stdio.h>
#include <string.h>

#include "msvc_int.h"

/* Sections that may change: the members' ([node ID]), and other nodes'
 * own ([NAME ID], ID not node_id). */
static bool
may_change(const char *section, const char *node_id)
{
	const char *space = strchr(section, ' ');

	if (space == NULL)
		return false;
	if (strncmp(section, "node ", 5) == 0)
		return true;
	return node_id == NULL || strcmp(space + 1, node_id) != 0;
}

static const struct weft__msvc_kv *
find_kv(const weft_msvc_config *cfg, const struct weft__msvc_kv *kv)
{
	size_t i;

	for (i = 0; i < cfg->extra_len; i++)
		if (strcmp(cfg->extra[i].section, kv->section) == 0 &&
		    strcmp(cfg->extra[i].key, kv->key) == 0)
			return &cfg->extra[i];
	return NULL;
}

/* "FILE:LINE" of cfg, or "FILE" for line 0. */
static void
at_line(const weft_msvc_config *cfg, int line, char *buf, size_t len)
{
	if (line > 0)
		snprintf(buf, len, "%s:%d", weft__msvc_config_source(cfg),
		         line);
	else
		snprintf(buf, len, "%s", weft__msvc_config_source(cfg));
}

#define NEEDS_RESTART "cannot change while the node runs (restart it)"

/* The first key of old that cfg changed or lacks; 0 or WEFT_ECONFIG. */
static int
check_kept(const weft_msvc_config *old, const weft_msvc_config *cfg,
           const char *node_id, char *err, size_t errlen)
{
	const struct weft__msvc_kv *a, *b;
	char at[300];
	size_t i;

	for (i = 0; i < old->extra_len; i++) {
		a = &old->extra[i];
		if (may_change(a->section, node_id))
			continue;
		if ((b = find_kv(cfg, a)) == NULL) {
			at_line(cfg, 0, at, sizeof(at));
			snprintf(err, errlen,
			         "%s: [%s] %s: removed (it was "
			         "'%s'); " NEEDS_RESTART,
			         at, a->section, a->key, a->value);
			return WEFT_ECONFIG;
		}
		if (strcmp(a->value, b->value) != 0) {
			at_line(cfg, b->line, at, sizeof(at));
			snprintf(
			    err, errlen,
			    "%s: [%s] %s: '%s' (it is '%s'); " NEEDS_RESTART,
			    at, b->section, b->key, b->value, a->value);
			return WEFT_ECONFIG;
		}
	}
	return 0;
}

/* The first key cfg adds to what old had; 0 or WEFT_ECONFIG. */
static int
check_added(const weft_msvc_config *old, const weft_msvc_config *cfg,
            const char *node_id, char *err, size_t errlen)
{
	const struct weft__msvc_kv *b;
	char at[300];
	size_t i;

	for (i = 0; i < cfg->extra_len; i++) {
		b = &cfg->extra[i];
		if (may_change(b->section, node_id) || find_kv(old, b) != NULL)
			continue;
		at_line(cfg, b->line, at, sizeof(at));
		snprintf(err, errlen, "%s: [%s] %s: added; " NEEDS_RESTART, at,
		         b->section, b->key);
		return WEFT_ECONFIG;
	}
	return 0;
}

/* This node's own entry: its address is bound. */
static int
check_self(const weft_msvc_config *old, const weft_msvc_config *cfg,
           const char *node_id, char *err, size_t errlen)
{
	ssize_t i = weft__msvc_config_find(old, node_id);
	ssize_t j = weft__msvc_config_find(cfg, node_id);
	char at[300];

	if (i < 0)
		return 0;
	if (j < 0) {
		at_line(cfg, 0, at, sizeof(at));
		snprintf(err, errlen,
		         "%s: [node %s]: removed, but it is this node; stop "
		         "it instead",
		         at, node_id);
		return WEFT_ECONFIG;
	}
	if (strcmp(old->nodes[i].host, cfg->nodes[j].host) != 0 ||
	    old->nodes[i].port != cfg->nodes[j].port) {
		at_line(cfg, cfg->nodes[j].line, at, sizeof(at));
		snprintf(
		    err, errlen,
		    "%s: [node %s]: this node's own address " NEEDS_RESTART, at,
		    node_id);
		return WEFT_ECONFIG;
	}
	return 0;
}

int
weft_msvc_config_check_change(const weft_msvc_config *old,
                              const weft_msvc_config *cfg, const char *node_id,
                              char *err, size_t errlen)
{
	char at[300];
	int rv;

	if (old == NULL || cfg == NULL)
		return WEFT_EINVAL;
	if (strcmp(old->cluster, cfg->cluster) != 0) {
		at_line(cfg, 0, at, sizeof(at));
		snprintf(
		    err, errlen,
		    "%s: [cluster] name: '%s' (it is '%s'); " NEEDS_RESTART, at,
		    cfg->cluster, old->cluster);
		return WEFT_ECONFIG;
	}
	if (node_id != NULL &&
	    (rv = check_self(old, cfg, node_id, err, errlen)) != 0)
		return rv;
	if ((rv = check_kept(old, cfg, node_id, err, errlen)) != 0)
		return rv;
	return check_added(old, cfg, node_id, err, errlen);
}
