/* SPDX-License-Identifier: MIT */
/*
 * status.c: the status verb: the node's view of the cluster for `weft-kv
 * status` (docs/WEFTD.md, "Built-in verbs"). The answer is a msgpack map
 * (weftd_int.h), read by clients as they read any map: by key, skipping
 * keys they do not know, so that fields can be added.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "weftd_int.h"

static int
pack_str(msgpack_packer *pk, const char *s)
{
	return msgpack_pack_str_with_body(pk, s, strlen(s));
}

static int
pack_u64(msgpack_packer *pk, const char *key, uint64_t value)
{
	return pack_str(pk, key) == 0 && msgpack_pack_uint64(pk, value) == 0
	           ? 0
	           : -1;
}

/* A member's state as this node sees it. */
static const char *
member_state(weft_msvc_peer *peer)
{
	if (weft_msvc_peer_is_self(peer))
		return "self";
	if (!weft_msvc_peer_is_member(peer))
		return "removed";
	if (weft_msvc_peer_is_up(peer))
		return "up";
	/* Neither: not dialed yet, or dialed and not answered yet. */
	return weft_msvc_peer_is_down(peer) ? "down" : "unknown";
}

static int
pack_members(msgpack_packer *pk, weft_msvc *svc)
{
	size_t i, n = weft_msvc_peer_count(svc);
	weft_msvc_peer *peer;

	if (pack_str(pk, "members") != 0 || msgpack_pack_array(pk, n) != 0)
		return -1;
	for (i = 0; i < n; i++) {
		peer = weft_msvc_peer_at(svc, i);
		if (msgpack_pack_map(pk, 2) != 0 || pack_str(pk, "id") != 0 ||
		    pack_str(pk, weft_msvc_peer_id(peer)) != 0 ||
		    pack_str(pk, "state") != 0 ||
		    pack_str(pk, member_state(peer)) != 0)
			return -1;
	}
	return 0;
}

/* Packs the answer; with snap, the connections and requests in flight
 * too (weft-kv status shows them). */
static int
pack_status(struct weftd *d, const weft_msvc_snapshot *snap,
            struct evbuffer *out)
{
	weft_msvc_stats ms;
	weft_kv_stats ks;
	msgpack_packer pk;

	weft_msvc_get_stats(d->svc, &ms);
	weft_kv_get_stats(d->kv, &ks);
	weft_msgpack_packer_init(&pk, out);
	if (msgpack_pack_map(&pk, snap != NULL ? 10 : 8) != 0 ||
	    pack_str(&pk, "node") != 0 ||
	    pack_str(&pk, weft_msvc_node_id(d->svc)) != 0 ||
	    pack_str(&pk, "cluster") != 0 ||
	    pack_str(&pk, weft_msvc_config_cluster(d->cfg)) != 0 ||
	    pack_str(&pk, "version") != 0 || pack_str(&pk, weft_version()) ||
	    pack_u64(&pk, "uptime_ms",
	             (weft_now_ns() - d->started_ns) / 1000000u) != 0 ||
	    pack_u64(&pk, "keys", ks.keys) != 0 ||
	    pack_u64(&pk, "value_bytes", ks.value_bytes) != 0 ||
	    pack_u64(&pk, "clients", ms.clients_open) != 0 ||
	    pack_members(&pk, d->svc) != 0)
		return WEFT_ENOMEM;
	return snap != NULL ? weftd_debug_pack(snap, &pk) : 0;
}

static void
answer(struct weftd *d, weft_msvc_msg *msg, const weft_msvc_snapshot *snap)
{
	struct evbuffer *out;

	if ((out = evbuffer_new()) == NULL || pack_status(d, snap, out) != 0)
		weft_msvc_respond_error(msg, WEFT_ENOMEM, "out of memory");
	else
		weft_msvc_respond_buf(msg, out);
	if (out != NULL)
		evbuffer_free(out);
}

/* A status request waiting for its snapshot. */
struct status_call {
	struct weftd *d;
	weft_msvc_msg *msg; /* detached */
};

static void
on_snapshot(weft_msvc *svc, int status, weft_msvc_snapshot *snap, void *arg)
{
	struct status_call *sc = arg;

	(void)svc;
	(void)status; /* without a snapshot, the answer has the rest */
	answer(sc->d, sc->msg, snap);
	weft_msvc_snapshot_free(snap);
	free(sc);
}

/* The snapshot's tasks run on every loop, this one included, after the
 * handler returns: the request is detached and answered from the
 * snapshot's callback. */
static void
on_status(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	struct status_call *sc;

	if (!weft_msvc_msg_is_request(msg))
		return;
	if ((sc = malloc(sizeof(*sc))) == NULL ||
	    (sc->msg = weft_msvc_msg_detach_reply(msg)) == NULL) {
		free(sc);
		answer(arg, msg, NULL);
		return;
	}
	sc->d = arg;
	if (weft_msvc_snapshot_async(svc, on_snapshot, sc) != 0) {
		answer(arg, sc->msg, NULL);
		free(sc);
	}
}

int
weftd_status_register(struct weftd *d)
{
	return weft_msvc_register(d->svc, WEFTD_VERB_STATUS, "status",
	                          on_status, d, WEFT_MSVC_CLIENTS);
}
