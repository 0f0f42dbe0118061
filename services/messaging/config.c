/* SPDX-License-Identifier: MIT */
/* config.c: the cluster configuration, built in code or read from INI. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <weft/compress.h>
#include <weft/frame.h>

#include "msvc_int.h"

#define DEFAULT_MAX_FRAME (32u << 20)
#define DEFAULT_OUTBOUND_QUEUE (64u << 20)
#define DEFAULT_INBOUND_INFLIGHT (64u << 20)
#define DEFAULT_MAX_PENDING 65536
#define DEFAULT_LARGE_MESSAGE (64u << 10)
#define DEFAULT_MAX_MESSAGE (64u << 20)
#define DEFAULT_CHUNK (128u << 10)
#define DEFAULT_COMPRESSION_MIN 512
#define DEFAULT_COMPRESSION_RATIO 255
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
#define DEFAULT_MEMBER_READ_BUDGET 256
#define DEFAULT_CLIENT_READ_BUDGET 32

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

size_t
weft__msvc_max_message(const weft_msvc_limits *l)
{
	size_t frame = l->max_frame_bytes - WEFT_ENVELOPE_HEADER_BYTES;

	return l->max_message_bytes > frame ? l->max_message_bytes : frame;
}

size_t
weft__msvc_chunk_bytes(const weft_msvc_limits *l, size_t peer_max_frame)
{
	size_t frame = l->max_frame_bytes;
	size_t n = l->chunk_bytes;

	if (peer_max_frame != 0 && peer_max_frame < frame)
		frame = peer_max_frame;
	/* A frame too small for a chunk's header and the least chunk (a
	 * peer's lie, or a limit set below any use) gets the least chunk,
	 * not a size that wraps below zero. */
	if (frame < WEFT__MSVC_CHUNK_OVERHEAD + WEFT__MSVC_CHUNK_MIN)
		frame = WEFT__MSVC_CHUNK_OVERHEAD + WEFT__MSVC_CHUNK_MIN;
	if (n + WEFT__MSVC_CHUNK_OVERHEAD > frame)
		n = frame - WEFT__MSVC_CHUNK_OVERHEAD;
	return n;
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
	if (l->member_read_budget == 0)
		l->member_read_budget = DEFAULT_MEMBER_READ_BUDGET;
	if (l->client_read_budget == 0)
		l->client_read_budget = DEFAULT_CLIENT_READ_BUDGET;
	if (l->max_message_bytes == 0)
		l->max_message_bytes = DEFAULT_MAX_MESSAGE;
	if (l->chunk_bytes == 0)
		l->chunk_bytes = DEFAULT_CHUNK;
	if (l->compression_min_bytes == 0)
		l->compression_min_bytes = DEFAULT_COMPRESSION_MIN;
	if (l->max_compression_ratio == 0)
		l->max_compression_ratio = DEFAULT_COMPRESSION_RATIO;
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
	struct weft__msvc_node *n;

	if (!weft__msvc_id_is_valid(id) || host == NULL || host[0] == '\0')
		return WEFT_EINVAL;
	if (weft__msvc_config_find(cfg, id) >= 0)
		return WEFT_EEXIST;
	n = WEFT__ARRAY_ROOM(cfg->nodes, cfg->nodes_cap, cfg->nodes_len, 4);
	if (n == NULL)
		return WEFT_ENOMEM;
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

	kv = WEFT__ARRAY_ROOM(cfg->extra, cfg->extra_cap, cfg->extra_len, 8);
	if (kv == NULL)
		return WEFT_ENOMEM;
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

/* Line of key in section, 0 if it was not set in the file. */
static int
line_of(const weft_msvc_config *cfg, const char *section, const char *key)
{
	size_t i;

	for (i = 0; i < cfg->extra_len; i++)
		if (strcmp(cfg->extra[i].section, section) == 0 &&
		    strcmp(cfg->extra[i].key, key) == 0)
			return cfg->extra[i].line;
	return 0;
}

/* refuse writes "FILE:LINE: what: reason" into err, LINE the first of
 * lines that is not 0 (none: "FILE: what: reason"); returns
 * WEFT_ECONFIG. */
static int refuse(const weft_msvc_config *cfg, int line1, int line2,
                  const char *what, char *err, size_t errlen, const char *fmt,
                  ...) WEFT_PRINTF(7, 8);

static int
refuse(const weft_msvc_config *cfg, int line1, int line2, const char *what,
       char *err, size_t errlen, const char *fmt, ...)
{
	int line = line1 != 0 ? line1 : line2, n;
	va_list ap;

	if (line > 0)
		n = snprintf(err, errlen,
		             "%s:%d: %s: ", weft__msvc_config_source(cfg), line,
		             what);
	else
		n = snprintf(err, errlen,
		             "%s: %s: ", weft__msvc_config_source(cfg), what);
	if (n >= 0 && (size_t)n < errlen) {
		va_start(ap, fmt);
		vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
		va_end(ap);
	}
	return WEFT_ECONFIG;
}

/* refuse_limit: a [limits] key whose value does not fit another's; the
 * line is key's, or other's when key was left to its default. */
#define refuse_limit(cfg, key, other, err, errlen, ...)                        \
	refuse((cfg), line_of((cfg), "limits", (key)),                         \
	       line_of((cfg), "limits", (other)), "[limits] " key, (err),      \
	       (errlen), __VA_ARGS__)

static int
validate_sizes(const weft_msvc_config *cfg, char *err, size_t errlen)
{
	const weft_msvc_limits *l = &cfg->limits;

	/* The frame codec's limit. */
	if (l->max_frame_bytes > WEFT_FRAME_LIMIT)
		return refuse_limit(cfg, "max_frame", "max_frame", err, errlen,
		                    "%zu is above 2 GiB, the frame codec's "
		                    "limit",
		                    l->max_frame_bytes);
	if (l->large_message_bytes > l->max_frame_bytes)
		return refuse_limit(cfg, "large_message", "max_frame", err,
		                    errlen, "%zu is above max_frame (%zu)",
		                    l->large_message_bytes, l->max_frame_bytes);
	/* (chunk_size above a frame is cut to fit one, and max_message
	 * below one frame's payload grows to it: a file of an earlier
	 * release means what it meant.) */
	if (l->max_message_bytes > WEFT__MSVC_MAX_MESSAGE)
		return refuse_limit(cfg, "max_message", "max_message", err,
		                    errlen,
		                    "%zu is above 4 GiB, the most an "
		                    "envelope carries",
		                    l->max_message_bytes);
	if (l->compression < WEFT_COMPRESS_NONE ||
	    l->compression > WEFT_COMPRESS_ZSTD)
		return refuse_limit(cfg, "compression", "compression", err,
		                    errlen, "%d is not none, lz4 or zstd",
		                    l->compression);
	/* A message larger than a queue is refused whole: below one
	 * small-class message, the node could answer (almost) nothing. */
	if (l->outbound_queue_bytes < l->large_message_bytes)
		return refuse_limit(
		    cfg, "outbound_queue", "large_message", err, errlen,
		    "%zu is below large_message (%zu): a message larger than "
		    "the queue is refused, so a member could be sent almost "
		    "nothing",
		    l->outbound_queue_bytes, l->large_message_bytes);
	if (l->client_outbound_bytes < l->large_message_bytes)
		return refuse_limit(
		    cfg, "client_outbound", "large_message", err, errlen,
		    "%zu is below large_message (%zu): an answer larger than "
		    "the clients' budget is refused, so clients would be "
		    "answered almost nothing",
		    l->client_outbound_bytes, l->large_message_bytes);
	return 0;
}

static int
validate_counts(const weft_msvc_config *cfg, char *err, size_t errlen)
{
	const weft_msvc_limits *l = &cfg->limits;
	static const char *const keys[WEFT_MSVC_CLASSES] = {
	    "connections_urgent", "connections_small", "connections_large"};
	const struct weft__msvc_node *first; /* the first past the cap */
	char what[WEFT_MSVC_MAX_ID + 8];
	int c;

	if (cfg->nodes_len > WEFT__MSVC_MAX_NODES) {
		first = &cfg->nodes[WEFT__MSVC_MAX_NODES];
		snprintf(what, sizeof(what), "[node %s]", first->id);
		return refuse(cfg, first->line, 0, what, err, errlen,
		              "more than %d members: %s", WEFT__MSVC_MAX_NODES,
		              WEFT__MSVC_MAX_NODES_WHY);
	}
	if (l->reconnect_min_ms > l->reconnect_max_ms)
		return refuse_limit(cfg, "reconnect_min", "reconnect_max", err,
		                    errlen,
		                    "%llu ms is above reconnect_max (%llu ms)",
		                    (unsigned long long)l->reconnect_min_ms,
		                    (unsigned long long)l->reconnect_max_ms);
	for (c = 0; c < WEFT_MSVC_CLASSES; c++)
		if (l->connections[c] > WEFT__MSVC_MAX_CONNECTIONS_PER_CLASS)
			return refuse(cfg, line_of(cfg, "limits", keys[c]), 0,
			              keys[c], err, errlen,
			              "more than %d connections per class",
			              WEFT__MSVC_MAX_CONNECTIONS_PER_CLASS);
	if (l->loops > WEFT__MSVC_MAX_LOOPS)
		return refuse_limit(cfg, "loops", "loops", err, errlen,
		                    "%u is above %d, the most one service "
		                    "spreads its connections over",
		                    l->loops, WEFT__MSVC_MAX_LOOPS);
	if (l->worker_threads > WEFT__MSVC_MAX_WORKERS)
		return refuse_limit(cfg, "worker_threads", "worker_threads",
		                    err, errlen, "%u is above %d",
		                    l->worker_threads, WEFT__MSVC_MAX_WORKERS);
	return 0;
}

int
weft__msvc_config_validate(const weft_msvc_config *cfg, char *err,
                           size_t errlen)
{
	int rv;

	if (cfg->nodes_len == 0) {
		snprintf(err, errlen, "%s: no [node ...] section",
		         weft__msvc_config_source(cfg));
		return WEFT_ECONFIG;
	}
	if ((rv = validate_counts(cfg, err, errlen)) != 0)
		return rv;
	return validate_sizes(cfg, err, errlen);
}

void
weft__msvc_fd_caps(const weft_msvc_limits *l, size_t members, uint64_t fd_limit,
                   struct weft__msvc_fd_caps *out)
{
	uint64_t per_peer = 0, avail;
	uint32_t c;

	/* Every member dials us and we dial it, each class on its own. */
	for (c = 0; c < WEFT_MSVC_CLASSES; c++)
		per_peer += 2u * l->connections[c];
	out->reserve = per_peer * members + WEFT__MSVC_FD_SLACK;
	out->clients = l->max_clients;
	out->handshakes = l->max_handshakes;
	out->lowered = false;
	avail = fd_limit > out->reserve ? fd_limit - out->reserve : 0;
	if ((uint64_t)out->clients + out->handshakes <= avail)
		return;
	out->lowered = true;
	if (out->handshakes > avail / 4)
		out->handshakes = (uint32_t)(avail / 4);
	if (out->clients > avail - out->handshakes)
		out->clients = (uint32_t)(avail - out->handshakes);
}

uint64_t
weft__msvc_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return UINT64_MAX;
	return (uint64_t)rl.rlim_cur;
}

static uint32_t
cpus_online(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n > 0 ? (uint32_t)n : 1;
}

/* The file limit must leave a returning member room to handshake all the
 * connections it dials at once (or max_handshakes, if lower). */
static int
check_fd_limit(const weft_msvc_config *cfg, uint64_t fd_limit, char *err,
               size_t errlen)
{
	const weft_msvc_limits *l = &cfg->limits;
	const struct weft__msvc_node *last = &cfg->nodes[cfg->nodes_len - 1];
	struct weft__msvc_fd_caps caps;
	char what[WEFT_MSVC_MAX_ID + 8];
	uint32_t need = 0, c;

	for (c = 0; c < WEFT_MSVC_CLASSES; c++)
		need += l->connections[c];
	if (need > l->max_handshakes)
		need = l->max_handshakes;
	weft__msvc_fd_caps(l, cfg->nodes_len, fd_limit, &caps);
	if (caps.handshakes >= need)
		return 0;
	snprintf(what, sizeof(what), "[node %s]", last->id);
	return refuse(cfg, last->line, 0, what, err, errlen,
	              "%zu members need %llu descriptors for their "
	              "connections (and the spare), and the file limit is "
	              "%llu (ulimit -n, LimitNOFILE=): that leaves %u "
	              "handshake slot(s) where a returning member needs %u; "
	              "raise the limit to at least %llu, or list fewer "
	              "members or connections",
	              cfg->nodes_len, (unsigned long long)caps.reserve,
	              (unsigned long long)fd_limit, caps.handshakes, need,
	              (unsigned long long)(caps.reserve + 4ull * need));
}

int
weft_msvc_config_check(const weft_msvc_config *cfg, char *err, size_t errlen)
{
	const weft_msvc_limits *l;
	uint32_t cpus = cpus_online();
	int rv;

	if (cfg == NULL)
		return WEFT_EINVAL;
	l = &cfg->limits;
	if ((rv = weft__msvc_config_validate(cfg, err, errlen)) != 0)
		return rv;
	/* More loops than CPUs only adds switches between them. */
	if (l->loops > WEFT__MSVC_LOOPS_PER_CPU * cpus)
		return refuse_limit(cfg, "loops", "loops", err, errlen,
		                    "%u is above %u, %d per CPU of the %u here",
		                    l->loops, WEFT__MSVC_LOOPS_PER_CPU * cpus,
		                    WEFT__MSVC_LOOPS_PER_CPU, cpus);
	/* Workers run blocking handlers and mostly wait, so there may be
	 * more than CPUs; past this many they compete for the CPUs more than
	 * they wait, each with its stack and a thread id of the host's. */
	if (l->worker_threads > WEFT__MSVC_WORKERS_PER_CPU * cpus)
		return refuse_limit(
		    cfg, "worker_threads", "worker_threads", err, errlen,
		    "%u is above %u, %d per CPU of the %u here",
		    l->worker_threads, WEFT__MSVC_WORKERS_PER_CPU * cpus,
		    WEFT__MSVC_WORKERS_PER_CPU, cpus);
	return check_fd_limit(cfg, weft__msvc_fd_limit(), err, errlen);
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
		cfg->nodes[i].line = src->nodes[i].line;
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
