/* SPDX-License-Identifier: MIT */
/*
 * debug.c: what is in flight through the node, on the HTTP endpoint
 * (/debug/connections, /debug/requests; docs/WEFTD.md, "What is in
 * flight") and in the status verb's answer (status.c): a snapshot of the
 * messaging service (weft_msvc_snapshot_async), rendered as JSON by the
 * service or packed as msgpack for weft-kv.
 */
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "weftd_int.h"

/* The main loop waits this long for every loop to copy its part: a loop
 * that takes longer is stuck (which /livez reports), and the endpoint's
 * other answers must not wait behind it. */
#define SNAPSHOT_WAIT_MS 1000

bool
weftd_debug_is_path(const char *path)
{
	return strcmp(path, "/debug/connections") == 0 ||
	       strcmp(path, "/debug/requests") == 0;
}

int
weftd_debug_answer(struct weftd *d, const char *path, struct evbuffer *body)
{
	unsigned what = strcmp(path, "/debug/connections") == 0
	                    ? WEFT_MSVC_SNAPSHOT_CONNS
	                    : WEFT_MSVC_SNAPSHOT_REQS;
	weft_msvc_snapshot *snap;
	int rv;

	if (d->svc == NULL) {
		evbuffer_add_printf(body, "not started\n");
		return HTTP_SERVUNAVAIL;
	}
	rv = weft_msvc_snapshot_take(d->svc, SNAPSHOT_WAIT_MS, &snap);
	if (rv == 0)
		rv = weft_msvc_snapshot_json(snap, what, body);
	weft_msvc_snapshot_free(snap);
	if (rv == 0)
		return HTTP_OK;
	evbuffer_drain(body, evbuffer_get_length(body));
	evbuffer_add_printf(body, "no snapshot: %s\n", weft_strerror(rv));
	return rv == WEFT_ENOMEM ? HTTP_INTERNAL : HTTP_SERVUNAVAIL;
}

/* ---- msgpack, for the status verb -------------------------------------- */

static int
pack_str(msgpack_packer *pk, const char *s)
{
	return msgpack_pack_str_with_body(pk, s, strlen(s));
}

static int
pack_kv_str(msgpack_packer *pk, const char *key, const char *value)
{
	return pack_str(pk, key) == 0 && pack_str(pk, value) == 0 ? 0 : -1;
}

static int
pack_kv_u64(msgpack_packer *pk, const char *key, uint64_t value)
{
	return pack_str(pk, key) == 0 && msgpack_pack_uint64(pk, value) == 0
	           ? 0
	           : -1;
}

static int
pack_kv_bool(msgpack_packer *pk, const char *key, bool value)
{
	return pack_str(pk, key) == 0 && (value ? msgpack_pack_true(pk)
	                                        : msgpack_pack_false(pk)) == 0
	           ? 0
	           : -1;
}

static int
pack_conn(msgpack_packer *pk, const weft_msvc_conn_info *c)
{
	return msgpack_pack_map(pk, 12) != 0 ||
	               pack_kv_str(pk, "peer", c->peer) != 0 ||
	               pack_kv_str(pk, "address", c->address) != 0 ||
	               pack_kv_bool(pk, "client", c->client) != 0 ||
	               pack_kv_str(pk, "class", weft_msvc_class_name(c->cls)) !=
	                   0 ||
	               pack_kv_u64(pk, "index", c->index) != 0 ||
	               pack_kv_str(pk, "direction",
	                           c->outbound ? "out" : "in") != 0 ||
	               pack_kv_str(pk, "state", c->state) != 0 ||
	               pack_kv_bool(pk, "tls", c->tls) != 0 ||
	               pack_kv_u64(pk, "version", c->version) != 0 ||
	               pack_kv_u64(pk, "bytes_in", c->bytes_in) != 0 ||
	               pack_kv_u64(pk, "bytes_out", c->bytes_out) != 0 ||
	               pack_kv_u64(pk, "age_ms", c->age_ms) != 0
	           ? -1
	           : 0;
}

static int
pack_req(msgpack_packer *pk, const weft_msvc_req_info *r)
{
	return msgpack_pack_map(pk, 7) != 0 ||
	               pack_kv_str(pk, "direction",
	                           r->inbound ? "in" : "out") != 0 ||
	               pack_kv_str(pk, "peer", r->peer) != 0 ||
	               pack_kv_u64(pk, "verb", r->verb) != 0 ||
	               pack_kv_str(pk, "verb_name", r->verb_name) != 0 ||
	               pack_kv_str(pk, "stage",
	                           weft_msvc_req_stage_name(r->stage)) != 0 ||
	               pack_kv_u64(pk, "age_ms", r->age_ms) != 0 ||
	               pack_kv_u64(pk, "id", r->id) != 0
	           ? -1
	           : 0;
}

int
weftd_debug_pack(const weft_msvc_snapshot *snap, msgpack_packer *pk)
{
	size_t i, n = weft_msvc_snapshot_conn_count(snap);

	if (pack_str(pk, "connections") != 0 || msgpack_pack_array(pk, n) != 0)
		return WEFT_ENOMEM;
	for (i = 0; i < n; i++)
		if (pack_conn(pk, weft_msvc_snapshot_conn_at(snap, i)) != 0)
			return WEFT_ENOMEM;
	n = weft_msvc_snapshot_req_count(snap);
	if (pack_str(pk, "requests") != 0 || msgpack_pack_array(pk, n) != 0)
		return WEFT_ENOMEM;
	for (i = 0; i < n; i++)
		if (pack_req(pk, weft_msvc_snapshot_req_at(snap, i)) != 0)
			return WEFT_ENOMEM;
	return 0;
}
