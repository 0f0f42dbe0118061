/* SPDX-License-Identifier: MIT */
/* config.c: the cluster configuration, built in code or read from INI. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <weft/frame.h>

#include "msvc_int.h"

#define DEFAULT_MAX_FRAME (32u << 20)
#define DEFAULT_OUTBOUND_QUEUE (64u << 20)
#define DEFAULT_INBOUND_INFLIGHT (64u << 20)
#define DEFAULT_MAX_PENDING 65536
#define DEFAULT_LARGE_MESSAGE (64u << 10)
#define DEFAULT_CONNECT_TIMEOUT_MS 2000
#define DEFAULT_HEARTBEAT_MS 1000
#define DEFAULT_HEARTBEAT_MISSES 3
#define DEFAULT_MAX_CLOCK_SKEW_MS 1000
#define DEFAULT_RECONNECT_MIN_MS 50
#define DEFAULT_RECONNECT_MAX_MS 5000
#define DEFAULT_REQUEST_TIMEOUT_MS 5000
#define DEFAULT_WORKERS 2
#define DEFAULT_CLIENT_OUTBOUND (64u << 20)
#define DEFAULT_CLIENT_PAUSE (1u << 20)
#define DEFAULT_CLIENT_STALL_MS 30000
#define DEFAULT_CLIENT_IDLE_MS 60000
#define DEFAULT_FRAME_TIMEOUT_MS 30000
#define DEFAULT_MAX_CLIENTS 1024
#define DEFAULT_MAX_CLIENTS_PER_ADDRESS 64
#define DEFAULT_MAX_HANDSHAKES 128
#define MAX_CONNECTIONS_PER_CLASS 64

bool
weft__msvc_id_is_valid(const char *id)
{
	size_t n = 0;

	if (id == NULL)
		return false;
	for (; id[n] != '\0'; n++) {
		char c = id[n];

		if (n >= WEFT_MSVC_MAX_ID)
			return false;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '.' ||
		      c == '-'))
			return false;
	}
	return n > 0;
}

void
weft__msvc_limits_defaults(weft_msvc_limits *l)
{
	int c;

	if (l->max_frame_bytes == 0)
		l->max_frame_bytes = DEFAULT_MAX_FRAME;
	if (l->outbound_queue_bytes == 0)
		l->outbound_queue_bytes = DEFAULT_OUTBOUND_QUEUE;
	if (l->inbound_inflight_bytes == 0)
		l->inbound_inflight_bytes = DEFAULT_INBOUND_INFLIGHT;
	if (l->max_pending_requests == 0)
		l->max_pending_requests = DEFAULT_MAX_PENDING;
	if (l->large_message_bytes == 0)
		l->large_message_bytes = DEFAULT_LARGE_MESSAGE;
	if (l->connect_timeout_ms == 0)
		l->connect_timeout_ms = DEFAULT_CONNECT_TIMEOUT_MS;
	if (l->heartbeat_interval_ms == 0)
		l->heartbeat_interval_ms = DEFAULT_HEARTBEAT_MS;
	if (l->heartbeat_misses == 0)
		l->heartbeat_misses = DEFAULT_HEARTBEAT_MISSES;
	if (l->max_clock_skew_ms == 0)
		l->max_clock_skew_ms = DEFAULT_MAX_CLOCK_SKEW_MS;
	if (l->reconnect_min_ms == 0)
		l->reconnect_min_ms = DEFAULT_RECONNECT_MIN_MS;
	if (l->reconnect_max_ms == 0)
		l->reconnect_max_ms = DEFAULT_RECONNECT_MAX_MS;
	if (l->request_timeout_ms == 0)
		l->request_timeout_ms = DEFAULT_REQUEST_TIMEOUT_MS;
	if (l->worker_threads == 0)
		l->worker_threads = DEFAULT_WORKERS;
	if (l->client_outbound_bytes == 0)
		l->client_outbound_bytes = DEFAULT_CLIENT_OUTBOUND;
	if (l->client_pause_bytes == 0)
		l->client_pause_bytes = DEFAULT_CLIENT_PAUSE;
	if (l->client_stall_timeout_ms == 0)
		l->client_stall_timeout_ms = DEFAULT_CLIENT_STALL_MS;
	if (l->client_idle_timeout_ms == 0)
		l->client_idle_timeout_ms = DEFAULT_CLIENT_IDLE_MS;
	if (l->frame_timeout_ms == 0)
		l->frame_timeout_ms = DEFAULT_FRAME_TIMEOUT_MS;
	if (l->max_clients == 0)
		l->max_clients = DEFAULT_MAX_CLIENTS;
	if (l->max_clients_per_address == 0)
		l->max_clients_per_address = DEFAULT_MAX_CLIENTS_PER_ADDRESS;
	if (l->max_handshakes == 0)
		l->max_handshakes = DEFAULT_MAX_HANDSHAKES;
	for (c = 0; c < WEFT_MSVC_CLASSES; c++)
		if (l->connections[c] == 0)
			l->connections[c] = 1;
}

int
weft_msvc_config_new(const char *cluster, weft_msvc_config **out)
{
	weft_msvc_config *cfg;

	if (!weft__msvc_id_is_valid(cluster))
		return WEFT_EINVAL;
	if ((cfg = calloc(1, sizeof(*cfg))) == NULL)
		return WEFT_ENOMEM;
	strcpy(cfg->cluster, cluster);
	weft__msvc_limits_defaults(&cfg->limits);
	cfg->limits.allow_clients = true;
	*out = cfg;
	return 0;
}

static void
free_tls(weft_msvc_tls_config *t)
{
	free((char *)t->cert_file);
	free((char *)t->key_file);
	free((char *)t->ca_file);
	free((char *)t->min_version);
	memset(t, 0, sizeof(*t));
}

void
weft_msvc_config_free(weft_msvc_config *cfg)
{
	size_t i;

	if (cfg == NULL)
		return;
	for (i = 0; i < cfg->nodes_len; i++)
		free(cfg->nodes[i].host);
	free(cfg->nodes);
	for (i = 0; i < cfg->extra_len; i++) {
		free(cfg->extra[i].section);
		free(cfg->extra[i].key);
		free(cfg->extra[i].value);
	}
	free(cfg->extra);
	free_tls(&cfg->tls);
	free(cfg->source);
	free(cfg);
}

/* Returns the index of node id, or -1. */
ssize_t
weft__msvc_config_find(const weft_msvc_config *cfg, const char *id)
{
	size_t i;

	for (i = 0; i < cfg->nodes_len; i++)
		if (strcmp(cfg->nodes[i].id, id) == 0)
			return (ssize_t)i;
	return -1;
}

int
weft_msvc_config_add_node(weft_msvc_config *cfg, const char *id,
                          const char *host, uint16_t port)
{
	struct weft__msvc_node *nodes, *n;
	size_t cap;

	if (!weft__msvc_id_is_valid(id) || host == NULL || host[0] == '\0')
		return WEFT_EINVAL;
	if (weft__msvc_config_find(cfg, id) >= 0)
		return WEFT_EEXIST;
	if (cfg->nodes_len == cfg->nodes_cap) {
		cap = cfg->nodes_cap ? cfg->nodes_cap * 2 : 4;
		nodes = realloc(cfg->nodes, cap * sizeof(*nodes));
		if (nodes == NULL)
			return WEFT_ENOMEM;
		cfg->nodes = nodes;
		cfg->nodes_cap = cap;
	}
	n = &cfg->nodes[cfg->nodes_len];
	memset(n, 0, sizeof(*n));
	if ((n->host = strdup(host)) == NULL)
		return WEFT_ENOMEM;
	strcpy(n->id, id);
	n->port = port;
	cfg->nodes_len++;
	return 0;
}

weft_msvc_limits *
weft_msvc_config_limits(weft_msvc_config *cfg)
{
	return &cfg->limits;
}

const weft_msvc_limits *
weft_msvc_config_limits_const(const weft_msvc_config *cfg)
{
	return &cfg->limits;
}

static int
dup_opt(const char **dst, const char *src)
{
	char *s = NULL;

	if (src != NULL && (s = strdup(src)) == NULL)
		return WEFT_ENOMEM;
	free((char *)*dst);
	*dst = s;
	return 0;
}

int
weft_msvc_config_set_tls(weft_msvc_config *cfg, const weft_msvc_tls_config *tls)
{
	weft_msvc_tls_config t = {
	    .mode = tls->mode,
	    .allow_plaintext_members = tls->allow_plaintext_members,
	};

	if (tls->mode > WEFT_MSVC_TLS_OPTIONAL)
		return WEFT_EINVAL;
	if (dup_opt(&t.cert_file, tls->cert_file) != 0 ||
	    dup_opt(&t.key_file, tls->key_file) != 0 ||
	    dup_opt(&t.ca_file, tls->ca_file) != 0 ||
	    dup_opt(&t.min_version, tls->min_version) != 0) {
		free_tls(&t);
		return WEFT_ENOMEM;
	}
	free_tls(&cfg->tls);
	cfg->tls = t;
	return 0;
}

const weft_msvc_tls_config *
weft_msvc_config_tls(const weft_msvc_config *cfg)
{
	return &cfg->tls;
}

const char *
weft_msvc_config_cluster(const weft_msvc_config *cfg)
{
	return cfg->cluster;
}

size_t
weft_msvc_config_node_count(const weft_msvc_config *cfg)
{
	return cfg->nodes_len;
}

int
weft_msvc_config_node(const weft_msvc_config *cfg, size_t i, const char **id,
                      const char **host, uint16_t *port)
{
	if (i >= cfg->nodes_len)
		return WEFT_EINVAL;
	if (id != NULL)
		*id = cfg->nodes[i].id;
	if (host != NULL)
		*host = cfg->nodes[i].host;
	if (port != NULL)
		*port = cfg->nodes[i].port;
	return 0;
}

const char *
weft_msvc_config_get(const weft_msvc_config *cfg, const char *section,
                     const char *key)
{
	size_t i;

	for (i = 0; i < cfg->extra_len; i++)
		if (strcmp(cfg->extra[i].section, section) == 0 &&
		    strcmp(cfg->extra[i].key, key) == 0)
			return cfg->extra[i].value;
	return NULL;
}

int
weft__msvc_config_set_source(weft_msvc_config *cfg, const char *source)
{
	char *s = NULL;

	if (source != NULL && (s = strdup(source)) == NULL)
		return WEFT_ENOMEM;
	free(cfg->source);
	cfg->source = s;
	return 0;
}

const char *
weft__msvc_config_source(const weft_msvc_config *cfg)
{
	return cfg->source != NULL ? cfg->source : "<config>";
}

int
weft__msvc_config_add_extra(weft_msvc_config *cfg, const char *section,
                            const char *key, const char *value, int line)
{
	struct weft__msvc_kv *kv;
	size_t cap;

	if (cfg->extra_len == cfg->extra_cap) {
		cap = cfg->extra_cap ? cfg->extra_cap * 2 : 8;
		kv = realloc(cfg->extra, cap * sizeof(*kv));
		if (kv == NULL)
			return WEFT_ENOMEM;
		cfg->extra = kv;
		cfg->extra_cap = cap;
	}
	kv = &cfg->extra[cfg->extra_len];
	kv->section = strdup(section);
	kv->key = strdup(key);
	kv->value = strdup(value);
	kv->line = line;
	if (kv->section == NULL || kv->key == NULL || kv->value == NULL) {
		free(kv->section);
		free(kv->key);
		free(kv->value);
		return WEFT_ENOMEM;
	}
	cfg->extra_len++;
	return 0;
}

int
weft__msvc_config_validate(const weft_msvc_config *cfg, char *err,
                           size_t errlen)
{
	const weft_msvc_limits *l = &cfg->limits;
	int c;

	if (cfg->nodes_len == 0) {
		snprintf(err, errlen, "no [node ...] section");
		return WEFT_ECONFIG;
	}
	if (l->reconnect_min_ms > l->reconnect_max_ms) {
		snprintf(err, errlen, "reconnect_min is above reconnect_max");
		return WEFT_ECONFIG;
	}
	if (l->large_message_bytes > l->max_frame_bytes) {
		snprintf(err, errlen, "large_message is above max_frame");
		return WEFT_ECONFIG;
	}
	/* The frame codec's limit. */
	if (l->max_frame_bytes > WEFT_FRAME_LIMIT) {
		snprintf(err, errlen, "max_frame is above 2 GiB");
		return WEFT_ECONFIG;
	}
	for (c = 0; c < WEFT_MSVC_CLASSES; c++) {
		if (l->connections[c] > MAX_CONNECTIONS_PER_CLASS) {
			snprintf(err, errlen,
			         "more than %d connections per class",
			         MAX_CONNECTIONS_PER_CLASS);
			return WEFT_ECONFIG;
		}
	}
	return 0;
}

int
weft__msvc_config_copy(const weft_msvc_config *src, weft_msvc_config **out)
{
	weft_msvc_config *cfg;
	size_t i;
	int rv;

	if ((rv = weft_msvc_config_new(src->cluster, &cfg)) != 0)
		return rv;
	cfg->limits = src->limits;
	weft__msvc_limits_defaults(&cfg->limits);
	if ((rv = weft_msvc_config_set_tls(cfg, &src->tls)) != 0 ||
	    (rv = weft__msvc_config_set_source(cfg, src->source)) != 0)
		goto err_free;
	for (i = 0; i < src->nodes_len; i++) {
		rv = weft_msvc_config_add_node(cfg, src->nodes[i].id,
		                               src->nodes[i].host,
		                               src->nodes[i].port);
		if (rv != 0)
			goto err_free;
	}
	for (i = 0; i < src->extra_len; i++) {
		rv = weft__msvc_config_add_extra(
		    cfg, src->extra[i].section, src->extra[i].key,
		    src->extra[i].value, src->extra[i].line);
		if (rv != 0)
			goto err_free;
	}
	*out = cfg;
	return 0;

err_free:
	weft_msvc_config_free(cfg);
	return rv;
}
