/* SPDX-License-Identifier: MIT */
/*
 * kv_status.c: weft-kv's ping and status: a timed round trip to a node's
 * ping verb, and its status verb's map printed as text or JSON.
 */
#include <msgpack.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

#include "weftd_int.h"

int
weftd_kv_ping(weft_msvc *svc, weft_msvc_peer *node, uint64_t timeout_ms,
              bool json)
{
	weft_msvc_call_opts opts = {.timeout_ms = timeout_ms};
	const char *id = weft_msvc_peer_id(node);
	uint64_t start;
	double ms;
	int rv;

	/* The first call dials the node: time a second one, the round trip
	 * alone. */
	if ((rv = weft_msvc_call(svc, node, WEFTD_VERB_PING, "", 0, &opts,
	                         NULL)) != 0)
		return rv;
	start = weft_now_ns();
	if ((rv = weft_msvc_call(svc, node, WEFTD_VERB_PING, "", 0, &opts,
	                         NULL)) != 0)
		return rv;
	ms = (double)(weft_now_ns() - start) / 1e6;
	if (json) {
		printf("{\"node\":");
		weftd_print_json_string(stdout, id, strlen(id));
		printf(",\"rtt_ms\":%.3f}\n", ms);
	} else {
		printf("%s: %.3f ms\n", id, ms);
	}
	return 0;
}

/* The value of key in map o, or NULL. */
static const msgpack_object *
map_get(const msgpack_object *o, const char *key)
{
	size_t len = strlen(key);
	uint32_t i;

	if (o->type != MSGPACK_OBJECT_MAP)
		return NULL;
	for (i = 0; i < o->via.map.size; i++) {
		const msgpack_object *k = &o->via.map.ptr[i].key;

		if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == len &&
		    memcmp(k->via.str.ptr, key, len) == 0)
			return &o->via.map.ptr[i].val;
	}
	return NULL;
}

/* Prints a msgpack object as JSON (strings as UTF-8, bin as base64). */
static void
print_json(const msgpack_object *o)
{
	uint32_t i;

	switch (o->type) {
	case MSGPACK_OBJECT_POSITIVE_INTEGER:
		printf("%llu", (unsigned long long)o->via.u64);
		break;
	case MSGPACK_OBJECT_NEGATIVE_INTEGER:
		printf("%lld", (long long)o->via.i64);
		break;
	case MSGPACK_OBJECT_BOOLEAN:
		printf("%s", o->via.boolean ? "true" : "false");
		break;
	case MSGPACK_OBJECT_STR:
		weftd_print_json_string(stdout, o->via.str.ptr,
		                        o->via.str.size);
		break;
	case MSGPACK_OBJECT_ARRAY:
		putchar('[');
		for (i = 0; i < o->via.array.size; i++) {
			printf("%s", i ? "," : "");
			print_json(&o->via.array.ptr[i]);
		}
		putchar(']');
		break;
	case MSGPACK_OBJECT_MAP:
		putchar('{');
		for (i = 0; i < o->via.map.size; i++) {
			printf("%s", i ? "," : "");
			print_json(&o->via.map.ptr[i].key);
			putchar(':');
			print_json(&o->via.map.ptr[i].val);
		}
		putchar('}');
		break;
	default:
		printf("null");
	}
}

/* The string at key of map o, "?" when there is none. */
static const char *
str_at(const msgpack_object *o, const char *key, int *len)
{
	const msgpack_object *v = map_get(o, key);

	if (v == NULL || v->type != MSGPACK_OBJECT_STR) {
		*len = 1;
		return "?";
	}
	*len = (int)v->via.str.size;
	return v->via.str.ptr;
}

static uint64_t
u64_at(const msgpack_object *o, const char *key)
{
	const msgpack_object *v = map_get(o, key);

	return v != NULL && v->type == MSGPACK_OBJECT_POSITIVE_INTEGER
	           ? v->via.u64
	           : 0;
}

static bool
bool_at(const msgpack_object *o, const char *key)
{
	const msgpack_object *v = map_get(o, key);

	return v != NULL && v->type == MSGPACK_OBJECT_BOOLEAN && v->via.boolean;
}

/* The array at key of map o, or NULL. */
static const msgpack_object *
array_at(const msgpack_object *o, const char *key)
{
	const msgpack_object *v = map_get(o, key);

	return v != NULL && v->type == MSGPACK_OBJECT_ARRAY ? v : NULL;
}

/* The node's connections, one a line (a node of an older release sends
 * none: nothing is printed). */
static void
print_connections(const msgpack_object *o)
{
	const msgpack_object *conns = array_at(o, "connections"), *c;
	const char *peer, *cls, *dir, *state;
	int pl, cl, dl, sl;
	uint32_t i;

	if (conns == NULL)
		return;
	printf("\nconnections: %u\n", conns->via.array.size);
	printf("%-20s %-4s %-7s %3s %-10s %-4s %3s %12s %12s %10s\n", "PEER",
	       "DIR", "CLASS", "IDX", "STATE", "TLS", "VER", "BYTES_IN",
	       "BYTES_OUT", "AGE_S");
	for (i = 0; i < conns->via.array.size; i++) {
		c = &conns->via.array.ptr[i];
		peer = str_at(c, "peer", &pl);
		dir = str_at(c, "direction", &dl);
		cls = str_at(c, "class", &cl);
		state = str_at(c, "state", &sl);
		printf("%-20.*s %-4.*s %-7.*s %3llu %-10.*s %-4s %3llu %12llu "
		       "%12llu %10.1f\n",
		       pl ? pl : 1, pl ? peer : "-", dl, dir, cl, cls,
		       (unsigned long long)u64_at(c, "index"), sl, state,
		       bool_at(c, "tls") ? "yes" : "no",
		       (unsigned long long)u64_at(c, "version"),
		       (unsigned long long)u64_at(c, "bytes_in"),
		       (unsigned long long)u64_at(c, "bytes_out"),
		       (double)u64_at(c, "age_ms") / 1000.0);
	}
}

/* The requests in flight through the node, one a line. */
static void
print_requests(const msgpack_object *o)
{
	const msgpack_object *reqs = array_at(o, "requests"), *r;
	const char *peer, *dir, *name, *stage;
	int pl, dl, nl, sl;
	uint32_t i;

	if (reqs == NULL)
		return;
	printf("\nrequests in flight: %u\n", reqs->via.array.size);
	printf("%-4s %-20s %6s %-16s %-9s %10s\n", "DIR", "PEER", "VERB",
	       "NAME", "STAGE", "AGE_MS");
	for (i = 0; i < reqs->via.array.size; i++) {
		r = &reqs->via.array.ptr[i];
		dir = str_at(r, "direction", &dl);
		peer = str_at(r, "peer", &pl);
		name = str_at(r, "verb_name", &nl);
		stage = str_at(r, "stage", &sl);
		printf("%-4.*s %-20.*s %6llu %-16.*s %-9.*s %10llu\n", dl, dir,
		       pl, peer, (unsigned long long)u64_at(r, "verb"),
		       nl ? nl : 1, nl ? name : "-", sl, stage,
		       (unsigned long long)u64_at(r, "age_ms"));
	}
}

static void
print_status_text(const msgpack_object *o)
{
	const msgpack_object *members = map_get(o, "members");
	const char *node, *cluster, *version, *id, *state;
	int nl, cl, vl, il, sl;
	uint32_t i;

	node = str_at(o, "node", &nl);
	cluster = str_at(o, "cluster", &cl);
	version = str_at(o, "version", &vl);
	printf("node %.*s, cluster %.*s, weftd %.*s, up %.1f s\n", nl, node, cl,
	       cluster, vl, version, (double)u64_at(o, "uptime_ms") / 1000.0);
	printf("keys %llu (deleted ones included), %llu value bytes, "
	       "%llu clients\n",
	       (unsigned long long)u64_at(o, "keys"),
	       (unsigned long long)u64_at(o, "value_bytes"),
	       (unsigned long long)u64_at(o, "clients"));
	for (i = 0; members != NULL && members->type == MSGPACK_OBJECT_ARRAY &&
	            i < members->via.array.size;
	     i++) {
		id = str_at(&members->via.array.ptr[i], "id", &il);
		state = str_at(&members->via.array.ptr[i], "state", &sl);
		printf("%.*s\t%.*s\n", il, id, sl, state);
	}
	print_connections(o);
	print_requests(o);
}

int
weftd_kv_status(weft_msvc *svc, weft_msvc_peer *node, uint64_t timeout_ms,
                bool json)
{
	weft_msvc_call_opts opts = {.timeout_ms = timeout_ms};
	struct evbuffer *reply = evbuffer_new();
	msgpack_unpacked msg;
	size_t off = 0;
	int rv;

	if (reply == NULL)
		return WEFT_ENOMEM;
	rv = weft_msvc_call(svc, node, WEFTD_VERB_STATUS, "", 0, &opts, reply);
	msgpack_unpacked_init(&msg);
	if (rv != 0)
		goto out;
	if (msgpack_unpack_next(&msg, (const char *)evbuffer_pullup(reply, -1),
	                        evbuffer_get_length(reply),
	                        &off) != MSGPACK_UNPACK_SUCCESS ||
	    msg.data.type != MSGPACK_OBJECT_MAP) {
		rv = WEFT_EPROTO;
	} else if (json) {
		print_json(&msg.data);
		putchar('\n');
	} else {
		print_status_text(&msg.data);
	}
out:
	msgpack_unpacked_destroy(&msg);
	evbuffer_free(reply);
	return rv;
}
