/* SPDX-License-Identifier: MIT */
/*
 * config_ini.c: reading the cluster configuration from an INI file.
 *
 * libinih splits the text into sections and keys; every entry is kept with
 * its line. The sections are then read through key tables (conf.c), the
 * same for all: [cluster], [node ID], [limits] and [tls] into the config,
 * the sections of other components (opts->sections) checked and kept for
 * weft_msvc_config_read. The first error by line is reported, as
 * "FILE:LINE: what".
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <ini.h>

#include <weft/frame.h>

#include "msvc_int.h"

/* A configuration file is small; refuse anything absurd. */
#define MAX_FILE_BYTES (1u << 20)

/* ---- The messaging service's own sections ---------------------------- */

#define LIMIT(type, name, field, ...)                                          \
	WEFT_MSVC_CONF_KEY(type, name, weft_msvc_limits, field, __VA_ARGS__)
/* A duration's bound and its reason, as two fields of a key's row. */
#define UP_TO_A_DAY .max = WEFT_MSVC_CONF_DAY_MS, .why = WEFT_MSVC_CONF_DAY_WHY
/* Past this many, a count is a typing error: the kernel's default ceiling
 * on a process's descriptors (fs.nr_open). */
#define NR_OPEN (1u << 20)
#define CONN_WHY "each is a descriptor per member, twice (dialled and accepted)"
/* [limits]: one line per key, with its bounds and why (PROTOCOL.md section
 * 8, weft.conf(5), docs/WEFTD.md "Bounds"); what one value means for
 * another is checked in config.c. */
/* [limits] compression, in the order of enum weft_compress_alg. */
static const char *const compression_names[] = {"none", "lz4", "zstd", NULL};
static const weft_msvc_conf_key limit_keys[] = {
    LIMIT(SIZE, "max_frame", max_frame_bytes, .min = WEFT__MSVC_HELLO_MAX,
          .max = WEFT_FRAME_LIMIT,
          .why = "a handshake (up to 4 KiB) must fit, and 2 GiB is the "
                 "frame codec's limit"),
    LIMIT(SIZE, "outbound_queue", outbound_queue_bytes, .min = 1),
    LIMIT(SIZE, "inbound_inflight", inbound_inflight_bytes, .min = 1),
    LIMIT(U32, "max_pending_requests", max_pending_requests, .min = 1,
          .max = 1u << 24,
          .why = "0 would refuse every request; each one waiting holds "
                 "memory and a timer"),
    LIMIT(SIZE, "large_message", large_message_bytes, .min = 1),
    LIMIT(DURATION, "connect_timeout", connect_timeout_ms, .min = 1,
          UP_TO_A_DAY),
    LIMIT(DURATION, "heartbeat_interval", heartbeat_interval_ms, .min = 10,
          .max = 60000,
          .why = "faster floods every link with heartbeats, slower "
                 "leaves a dead member undetected for minutes"),
    LIMIT(U32, "heartbeat_misses", heartbeat_misses, .min = 1, .max = 100,
          .zero_ok = true,
          .why = "0 is the default, 3; past 100 a dead member is "
                 "noticed too late"),
    LIMIT(DURATION, "max_clock_skew", max_clock_skew_ms, .min = 1, UP_TO_A_DAY),
    LIMIT(DURATION, "reconnect_min", reconnect_min_ms, .min = 1, UP_TO_A_DAY),
    LIMIT(DURATION, "reconnect_max", reconnect_max_ms, .min = 1, UP_TO_A_DAY),
    LIMIT(DURATION, "request_timeout", request_timeout_ms, .min = 1,
          UP_TO_A_DAY),
    LIMIT(U32, "loops", loops, .min = 1, .max = WEFT__MSVC_MAX_LOOPS,
          .zero_ok = true,
          .why = "0 is one per CPU; each loop is a thread, at most 4 per "
                 "CPU and 256"),
    LIMIT(U32, "worker_threads", worker_threads, .min = 1,
          .max = WEFT__MSVC_MAX_WORKERS, .zero_ok = true,
          .why = "0 is the default, 2; each worker is a thread, at most "
                 "32 per CPU and 1024"),
    LIMIT(BOOL, "allow_clients", allow_clients),
    LIMIT(SIZE, "client_outbound", client_outbound_bytes, .min = 1),
    LIMIT(SIZE, "client_pause", client_pause_bytes, .min = 1),
    LIMIT(DURATION, "client_stall_timeout", client_stall_timeout_ms, .min = 1,
          UP_TO_A_DAY),
    LIMIT(DURATION, "client_idle_timeout", client_idle_timeout_ms, .min = 1,
          UP_TO_A_DAY),
    LIMIT(DURATION, "frame_timeout", frame_timeout_ms, .min = 1, UP_TO_A_DAY),
    LIMIT(U32, "max_clients", max_clients, .min = 1, .max = NR_OPEN,
          .why = "each client holds a descriptor; above the kernel's "
                 "ceiling on them it is a typing error"),
    LIMIT(U32, "max_clients_per_address", max_clients_per_address, .min = 1,
          .max = NR_OPEN,
          .why = "each client holds a descriptor; above the kernel's "
                 "ceiling on them it is a typing error"),
    LIMIT(U32, "max_handshakes", max_handshakes, .min = 1, .max = NR_OPEN,
          .why = "each connection in its handshake holds a descriptor; "
                 "above the kernel's ceiling on them it is a typing "
                 "error"),
    LIMIT(U32, "member_read_budget", member_read_budget, .min = 1, .max = 65536,
          .why = "messages a member's connection is read per turn before "
                 "the loop serves the others"),
    LIMIT(U32, "client_read_budget", client_read_budget, .min = 1, .max = 65536,
          .why = "messages a client's connection is read per turn before "
                 "the loop serves the others"),
    LIMIT(U32, "max_protocol_version", max_protocol_version, .min = 1,
          .max = WEFT__MSVC_VERSION_MAX, .zero_ok = true,
          .why = "0 is the newest this node speaks; there is no version 0 "
                 "nor one above the newest"),
    LIMIT(U32, "client_rate", client_rate, .max = 10000000,
          .why = "messages per second; 0 is off, and above ten million "
                 "is more than any node answers"),
    LIMIT(U32, "address_rate", address_rate, .max = 10000000,
          .why = "messages per second; 0 is off, and above ten million "
                 "is more than any node answers"),
    LIMIT(SIZE, "max_message", max_message_bytes, .min = 4096,
          .max = WEFT__MSVC_MAX_MESSAGE,
          .why = "a handshake-sized message must fit, and an envelope's "
                 "payload is at most 4 GiB"),
    LIMIT(SIZE, "chunk_size", chunk_bytes, .min = 4096, .max = WEFT_FRAME_LIMIT,
          .why = "smaller chunks cost a frame header each for little "
                 "gain; 2 GiB is the frame codec's limit"),
    LIMIT(CHOICE, "compression", compression, .choices = compression_names),
    LIMIT(SIZE, "compression_min", compression_min_bytes, .min = 64,
          .max = WEFT_FRAME_LIMIT,
          .why = "a body below 64 bytes never gains from compression"),
    LIMIT(U32, "max_compression_ratio", max_compression_ratio, .min = 2,
          .max = 1u << 16,
          .why = "what one compressed byte may grow to: below 2 nothing "
                 "is worth compressing, past 65536 a compression bomb "
                 "gets through"),
    LIMIT(U32, "connections_urgent", connections[WEFT_MSVC_URGENT], .min = 1,
          .max = WEFT__MSVC_MAX_CONNECTIONS_PER_CLASS, .why = CONN_WHY),
    LIMIT(U32, "connections_small", connections[WEFT_MSVC_SMALL], .min = 1,
          .max = WEFT__MSVC_MAX_CONNECTIONS_PER_CLASS, .why = CONN_WHY),
    LIMIT(U32, "connections_large", connections[WEFT_MSVC_LARGE], .min = 1,
          .max = WEFT__MSVC_MAX_CONNECTIONS_PER_CLASS, .why = CONN_WHY),
    LIMIT(DURATION, "slow_call", slow_call_ms, .min = 1, .zero_ok = true,
          .max = WEFT_MSVC_CONF_DAY_MS,
          .why = "0 is off; at most a day, longer than any request waits "
                 "(units: 500ms, 2s, 5m)"),
};

static int
parse_id(const char *text, void *field, char *why, size_t whylen)
{
	if (!weft__msvc_id_is_valid(text)) {
		snprintf(why, whylen,
		         "bad cluster name '%s' (1-63 of A-Z a-z "
		         "0-9 _ . -)",
		         text);
		return WEFT_ECONFIG;
	}
	*(const char **)field = text;
	return 0;
}

static int
parse_host(const char *text, void *field, char *why, size_t whylen)
{
	if (text[0] == '\0') {
		snprintf(why, whylen, "empty host");
		return WEFT_ECONFIG;
	}
	*(const char **)field = text;
	return 0;
}

struct cluster_text {
	const char *name;
};
static const weft_msvc_conf_key cluster_keys[] = {
    WEFT_MSVC_CONF_KEY(CUSTOM, "name", struct cluster_text, name,
                       .parse = parse_id),
};

struct node_text {
	const char *host;
	uint32_t port;
};
static const weft_msvc_conf_key node_keys[] = {
    WEFT_MSVC_CONF_KEY(CUSTOM, "host", struct node_text, host,
                       .parse = parse_host),
    WEFT_MSVC_CONF_KEY(U32, "port", struct node_text, port, .max = 65535),
};

static const char *const tls_modes[] = {"none", "all", "optional", NULL};
static const char *const tls_versions[] = {"1.2", "1.3", NULL};
struct tls_text {
	int mode; /* enum weft_msvc_tls_mode, in tls_modes order */
	const char *cert, *key, *ca;
	int min_version; /* index in tls_versions, -1: not set */
	bool allow_plaintext_members;
};
static const weft_msvc_conf_key tls_keys[] = {
    WEFT_MSVC_CONF_KEY(CHOICE, "mode", struct tls_text, mode,
                       .choices = tls_modes),
    WEFT_MSVC_CONF_KEY(STRING, "cert", struct tls_text, cert),
    WEFT_MSVC_CONF_KEY(STRING, "key", struct tls_text, key),
    WEFT_MSVC_CONF_KEY(STRING, "ca", struct tls_text, ca),
    WEFT_MSVC_CONF_KEY(CHOICE, "min_version", struct tls_text, min_version,
                       .choices = tls_versions),
    WEFT_MSVC_CONF_KEY(BOOL, "allow_plaintext_members", struct tls_text,
                       allow_plaintext_members),
};

#define N(a) (sizeof(a) / sizeof((a)[0]))

/* ---- Reading the text -------------------------------------------------- */

struct entry {
	char *key, *value;
	int line;
};

struct section {
	char *name;
	int line; /* of its [header]; 0 for keys before any header */
	struct entry *entries;
	size_t n, cap;
};

/* Parser state: the text being read, where we are, what was seen. */
struct parse {
	weft_msvc_config *cfg;
	const weft_msvc_config_opts *opts;
	const char *name;
	const char *text, *pos;
	int line;        /* the line the reader last returned */
	int header_line; /* the last "[...]" line the reader returned */
	int err_line;    /* first error's line, 0 if none or no line */
	int rv;          /* first error's code */
	char msg[512];   /* first error's message, without FILE:LINE */
	struct section *secs;
	size_t nsecs, capsecs;
	bool have_name;
};

/* Keeps the error with the lowest line (line 0: one of the whole file,
 * kept only if there is no other). Returns 0 for inih (stop). */
static int fail(struct parse *p, int line, int rv, const char *fmt, ...)
    WEFT_PRINTF(4, 5);

static int
fail(struct parse *p, int line, int rv, const char *fmt, ...)
{
	va_list ap;

	if (p->rv != 0 &&
	    (line == 0 || (p->err_line != 0 && p->err_line <= line)))
		return 0;
	p->rv = rv;
	p->err_line = line;
	va_start(ap, fmt);
	vsnprintf(p->msg, sizeof(p->msg), fmt, ap);
	va_end(ap);
	return 0;
}

/* Whether the header line at h ("[...") has its "]" where libinih looks
 * for it: before an inline comment (";" after white space). */
static bool
header_is_closed(const char *h)
{
	const char *c;

	for (c = h + 1; *c != '\0' && *c != ']'; c++)
		if (*c == ';' && (c[-1] == ' ' || c[-1] == '\t'))
			return false;
	return *c == ']';
}

/* A "[" line is a header only when closed. libinih reports an unclosed
 * one as an error at its line but keeps reading into the section before,
 * which then looked like a second section of the same name; say what it
 * is instead. */
static void
note_header(struct parse *p, const char *line)
{
	const char *h = line + strspn(line, " \t");
	int len;

	if (*h != '[')
		return;
	if (header_is_closed(h)) {
		p->header_line = p->line;
		return;
	}
	len = (int)strcspn(h, "\r\n");
	fail(p, p->line, WEFT_ECONFIG,
	     "unclosed section header '%.*s' (no ']')", len, h);
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
	note_header(p, buf);
	p->pos += n;
	return buf;
}

static struct section *
section_begin(struct parse *p, const char *name)
{
	struct section *s;
	size_t i;

	for (i = 0; i < p->nsecs; i++) {
		if (strcmp(p->secs[i].name, name) == 0) {
			fail(p, p->header_line, WEFT_ECONFIG,
			     "duplicate section [%s] (first at line %d)", name,
			     p->secs[i].line);
			return NULL;
		}
	}
	if ((s = WEFT__ARRAY_ROOM(p->secs, p->capsecs, p->nsecs, 8)) == NULL)
		return NULL;
	memset(s, 0, sizeof(*s));
	if ((s->name = strdup(name)) == NULL)
		return NULL;
	s->line = name[0] == '\0' ? 0 : p->header_line;
	p->nsecs++;
	return s;
}

static int
section_add(struct parse *p, struct section *s, const char *key,
            const char *value)
{
	struct entry *e;
	size_t i;

	for (i = 0; i < s->n; i++)
		if (strcmp(s->entries[i].key, key) == 0)
			return fail(p, p->line, WEFT_ECONFIG,
			            "[%s]: duplicate key '%s' (first at line "
			            "%d)",
			            s->name, key, s->entries[i].line);
	if ((e = WEFT__ARRAY_ROOM(s->entries, s->cap, s->n, 8)) == NULL)
		return fail(p, 0, WEFT_ENOMEM, "out of memory");
	e->key = strdup(key);
	e->value = strdup(value);
	e->line = p->line;
	if (e->key == NULL || e->value == NULL) {
		free(e->key);
		free(e->value);
		return fail(p, 0, WEFT_ENOMEM, "out of memory");
	}
	s->n++;
	return 1;
}

static int
on_entry(void *user, const char *section, const char *key, const char *value)
{
	struct parse *p = user;
	struct section *s = p->nsecs ? &p->secs[p->nsecs - 1] : NULL;

	if (p->rv != 0)
		return 1; /* only the first error is reported */
	if (section[0] == '\0')
		return fail(p, p->line, WEFT_ECONFIG,
		            "'%s' outside of any section", key);
	/* A new header, even one that repeats the last section's name,
	 * begins a section. */
	if (s == NULL || strcmp(s->name, section) != 0 ||
	    p->header_line != s->line) {
		if ((s = section_begin(p, section)) == NULL)
			return p->rv ? 0
			             : fail(p, 0, WEFT_ENOMEM, "out of memory");
	}
	return section_add(p, s, key, value);
}

static void
free_sections(struct parse *p)
{
	size_t i, j;

	for (i = 0; i < p->nsecs; i++) {
		for (j = 0; j < p->secs[i].n; j++) {
			free(p->secs[i].entries[j].key);
			free(p->secs[i].entries[j].value);
		}
		free(p->secs[i].entries);
		free(p->secs[i].name);
	}
	free(p->secs);
}

/* ---- Reading the sections ---------------------------------------------- */

/* Applies every entry of s to dst through keys; false on an error. */
static bool
apply(struct parse *p, const struct section *s, const weft_msvc_conf_key *keys,
      size_t nkeys, void *dst)
{
	char msg[sizeof(p->msg)];
	size_t i;

	for (i = 0; i < s->n; i++) {
		if (weft__conf_apply(s->name, keys, nkeys, s->entries[i].key,
		                     s->entries[i].value, dst, msg,
		                     sizeof(msg)) == 0)
			continue;
		fail(p, s->entries[i].line, WEFT_ECONFIG, "%s", msg);
		return false;
	}
	return true;
}

static bool
has_key(const struct section *s, const char *key)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (strcmp(s->entries[i].key, key) == 0)
			return true;
	return false;
}

static const weft_msvc_conf_section *
find_component(const struct parse *p, const char *name, const char **node);

/* [cluster]: its name, and the keys of a component section also named
 * "cluster" (weftd's discovery), kept for weft_msvc_config_read. */
static void
read_cluster(struct parse *p, const struct section *s)
{
	struct cluster_text c = {NULL};
	const weft_msvc_conf_section *cs;
	const char *node = NULL;
	char msg[sizeof(p->msg)];
	void *scratch;
	size_t i;
	int rv = 0;

	cs = find_component(p, "cluster", &node);
	if ((scratch = calloc(1, cs && cs->size ? cs->size : 1)) == NULL) {
		fail(p, 0, WEFT_ENOMEM, "out of memory");
		return;
	}
	for (i = 0; i < s->n && rv == 0; i++) {
		const struct entry *e = &s->entries[i];

		if (cs == NULL || strcmp(e->key, "name") == 0)
			rv = weft__conf_apply(s->name, cluster_keys,
			                      N(cluster_keys), e->key, e->value,
			                      &c, msg, sizeof(msg));
		else
			rv = weft__conf_apply(s->name, cs->keys, cs->nkeys,
			                      e->key, e->value, scratch, msg,
			                      sizeof(msg));
		if (rv != 0)
			fail(p, e->line, WEFT_ECONFIG, "%s", msg);
		else if (cs != NULL && strcmp(e->key, "name") != 0 &&
		         weft__msvc_config_add_extra(p->cfg, s->name, e->key,
		                                     e->value, e->line) != 0) {
			fail(p, 0, WEFT_ENOMEM, "out of memory");
			rv = WEFT_ENOMEM;
		}
	}
	free(scratch);
	if (rv != 0 || c.name == NULL)
		return;
	strcpy(p->cfg->cluster, c.name);
	p->have_name = true;
}

static void
read_node(struct parse *p, const struct section *s, const char *id)
{
	struct node_text n = {NULL, 0};
	int rv;

	if (!weft__msvc_id_is_valid(id)) {
		fail(p, s->line, WEFT_ECONFIG,
		     "bad node id '%s' (1-63 of A-Z a-z 0-9 _ . -)", id);
		return;
	}
	if (!apply(p, s, node_keys, N(node_keys), &n))
		return;
	/* Refused here, before adding the rest costs a search each. */
	if (p->cfg->nodes_len == WEFT__MSVC_MAX_NODES) {
		fail(p, s->line, WEFT_ECONFIG, "[%s]: more than %d members: %s",
		     s->name, WEFT__MSVC_MAX_NODES, WEFT__MSVC_MAX_NODES_WHY);
		return;
	}
	if (n.host == NULL || !has_key(s, "port")) {
		fail(p, s->line, WEFT_ECONFIG, "[%s] needs host and port",
		     s->name);
		return;
	}
	rv = weft_msvc_config_add_node(p->cfg, id, n.host, (uint16_t)n.port);
	if (rv != 0)
		fail(p, s->line, rv, "[%s]: %s", s->name, weft_strerror(rv));
	else
		p->cfg->nodes[p->cfg->nodes_len - 1].line = s->line;
}

static void
read_tls(struct parse *p, const struct section *s)
{
	struct tls_text t = {.min_version = -1};
	weft_msvc_tls_config tls;
	int rv;

	if (!apply(p, s, tls_keys, N(tls_keys), &t))
		return;
	tls.mode = (enum weft_msvc_tls_mode)t.mode;
	tls.cert_file = t.cert;
	tls.key_file = t.key;
	tls.ca_file = t.ca;
	tls.min_version =
	    t.min_version >= 0 ? tls_versions[t.min_version] : NULL;
	tls.allow_plaintext_members = t.allow_plaintext_members;
	if ((rv = weft_msvc_config_set_tls(p->cfg, &tls)) != 0)
		fail(p, 0, rv, "out of memory");
}

/* The component section that s is (or an instance of, [name ID]), or
 * NULL; *node gets the ID part of a per-node section. */
static const weft_msvc_conf_section *
find_component(const struct parse *p, const char *name, const char **node)
{
	const weft_msvc_config_opts *o = p->opts;
	size_t i, len;

	for (i = 0; o != NULL && i < o->nsections; i++) {
		const weft_msvc_conf_section *cs = o->sections[i];

		len = strlen(cs->name);
		*node = NULL;
		if (strcmp(name, cs->name) == 0)
			return cs;
		if (cs->per_node && strncmp(name, cs->name, len) == 0 &&
		    name[len] == ' ') {
			*node = name + len + 1;
			return cs;
		}
	}
	return NULL;
}

/* Keeps s for weft_msvc_config_get and _read. */
static void
keep(struct parse *p, const struct section *s)
{
	size_t i;

	for (i = 0; i < s->n; i++) {
		if (weft__msvc_config_add_extra(
		        p->cfg, s->name, s->entries[i].key, s->entries[i].value,
		        s->entries[i].line) != 0) {
			fail(p, 0, WEFT_ENOMEM, "out of memory");
			return;
		}
	}
}

/* A section of another component: checked against its table if known. */
static void
read_component(struct parse *p, const struct section *s)
{
	const weft_msvc_conf_section *cs;
	const char *node = NULL;
	void *scratch;

	cs = find_component(p, s->name, &node);
	if (cs == NULL && p->opts != NULL && p->opts->strict) {
		fail(p, s->line, WEFT_ECONFIG, "unknown section [%s]", s->name);
		return;
	}
	if (cs != NULL && node != NULL &&
	    weft__msvc_config_find(p->cfg, node) < 0) {
		fail(p, s->line, WEFT_ECONFIG,
		     "[%s]: no such node (no [node %s] section)", s->name,
		     node);
		return;
	}
	if (cs != NULL) {
		if ((scratch = calloc(1, cs->size ? cs->size : 1)) == NULL) {
			fail(p, 0, WEFT_ENOMEM, "out of memory");
			return;
		}
		apply(p, s, cs->keys, cs->nkeys, scratch);
		free(scratch);
	}
	keep(p, s);
}

/* Nodes first, so that a [name ID] section can be checked against them;
 * fail() keeps the error of the lowest line whatever the order. */
static void
read_sections(struct parse *p)
{
	size_t i;

	for (i = 0; i < p->nsecs; i++) {
		const struct section *s = &p->secs[i];

		/* Kept too, for the lines of what is checked on the host
		 * (weft_msvc_config_check_hosts). */
		if (strncmp(s->name, "node ", 5) == 0) {
			read_node(p, s, s->name + 5);
			keep(p, s);
		} else if (strcmp(s->name, "node") == 0)
			fail(p, s->line, WEFT_ECONFIG,
			     "[node] needs an id: [node ID]");
	}
	for (i = 0; i < p->nsecs; i++) {
		const struct section *s = &p->secs[i];

		if (strncmp(s->name, "node", 4) == 0 &&
		    (s->name[4] == '\0' || s->name[4] == ' '))
			continue;
		if (strcmp(s->name, "cluster") == 0)
			read_cluster(p, s);
		else if (strcmp(s->name, "limits") == 0)
			apply(p, s, limit_keys, N(limit_keys), &p->cfg->limits);
		else if (strcmp(s->name, "tls") == 0)
			read_tls(p, s);
		else
			read_component(p, s);
		/* Its lines, for what is checked across sections later
		 * (weft_msvc_config_where). */
		if (strcmp(s->name, "limits") == 0 ||
		    strcmp(s->name, "tls") == 0)
			keep(p, s);
	}
}

static int
finish(struct parse *p, int ini_rv, char *err, size_t errlen)
{
	char msg[sizeof(p->msg)];

	if (p->rv == 0 && ini_rv > 0)
		fail(p, ini_rv, WEFT_ECONFIG, "syntax error");
	else if (p->rv == 0 && ini_rv < 0)
		fail(p, 0, WEFT_ENOMEM, "out of memory");
	if (p->rv == 0)
		read_sections(p);
	if (p->rv == 0 && !p->have_name)
		fail(p, 0, WEFT_ECONFIG, "no [cluster] name");
	if (p->rv == 0 &&
	    weft__msvc_config_validate(p->cfg, msg, sizeof(msg)) != 0) {
		/* Its message names the file and line already. */
		snprintf(err, errlen, "%s", msg);
		return WEFT_ECONFIG;
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
weft_msvc_config_parse_opts(const char *text, const char *name,
                            const weft_msvc_config_opts *opts,
                            weft_msvc_config **out, char *err, size_t errlen)
{
	struct parse p = {.name = name ? name : "<config>", .text = text};
	int rv;

	if (text == NULL || out == NULL)
		return WEFT_EINVAL;
	p.pos = text;
	p.opts = opts;
	/* A placeholder name, replaced by [cluster] name. */
	if ((rv = weft_msvc_config_new("unnamed", &p.cfg)) != 0)
		return rv;
	if ((rv = weft__msvc_config_set_source(p.cfg, p.name)) == 0) {
		/* libinih's own error is a line number (or -1, -2). */
		rv = ini_parse_stream(read_line, &p, on_entry, &p);
		rv = finish(&p, rv, err, errlen);
	}
	free_sections(&p);
	if (rv != 0) {
		weft_msvc_config_free(p.cfg);
		return rv;
	}
	*out = p.cfg;
	return 0;
}

int
weft_msvc_config_parse(const char *text, const char *name,
                       weft_msvc_config **out, char *err, size_t errlen)
{
	return weft_msvc_config_parse_opts(text, name, NULL, out, err, errlen);
}

/* Reads path into a NUL-terminated malloc'd string; 0 or an error (in
 * err). */
static int
read_file(const char *path, char **out, char *err, size_t errlen)
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
	if (rv != 0) {
		snprintf(err, errlen, "%s: read error", path);
	} else if (n > MAX_FILE_BYTES) {
		snprintf(err, errlen, "%s: larger than %u bytes", path,
		         MAX_FILE_BYTES);
		rv = WEFT_ECONFIG;
	} else {
		text[n] = '\0';
		if (strlen(text) != n) {
			snprintf(err, errlen, "%s: contains a NUL byte", path);
			rv = WEFT_ECONFIG;
		}
	}
	if (rv != 0) {
		free(text);
		return rv;
	}
	*out = text;
	return 0;
}

int
weft_msvc_config_load_opts(const char *path, const weft_msvc_config_opts *opts,
                           weft_msvc_config **out, char *err, size_t errlen)
{
	char *text;
	int rv;

	if (path == NULL || out == NULL)
		return WEFT_EINVAL;
	if ((rv = read_file(path, &text, err, errlen)) != 0)
		return rv;
	rv = weft_msvc_config_parse_opts(text, path, opts, out, err, errlen);
	free(text);
	return rv;
}

int
weft_msvc_config_load(const char *path, weft_msvc_config **out, char *err,
                      size_t errlen)
{
	return weft_msvc_config_load_opts(path, NULL, out, err, errlen);
}
