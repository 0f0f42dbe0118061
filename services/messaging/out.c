/* SPDX-License-Identifier: MIT */
/*
 * out.c: a message waiting to be encoded (struct weft__msvc_out), and the
 * bytes a peer has queued: counted against its queue limit (and for a
 * client, the node's budget for all clients) when a message is accepted,
 * given back when it has left or failed.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "msvc_int.h"

struct weft__msvc_out *
weft__msvc_out_new(size_t inline_len)
{
	struct weft__msvc_out *out;

	if ((out = malloc(sizeof(*out) + inline_len)) == NULL)
		return NULL;
	memset(out, 0, sizeof(*out));
	out->ptr = out->data;
	return out;
}

void
weft__msvc_out_free(struct weft__msvc_out *out)
{
	if (out == NULL)
		return;
	if (out->buf != NULL)
		evbuffer_free(out->buf);
	free(out);
}

void
weft__msvc_release_queued(weft_msvc_peer *peer, size_t n)
{
	if (n == 0)
		return;
	if (peer->is_client)
		atomic_fetch_sub_explicit(&peer->svc->client_queued, n,
		                          memory_order_relaxed);
	if (atomic_fetch_sub(&peer->queued_bytes, n) == n)
		weft__msvc_drained(peer->svc);
}

bool
weft__msvc_take_queued(weft_msvc_peer *peer, size_t n, bool internal)
{
	weft_msvc *svc = peer->svc;
	const weft_msvc_limits *l = &svc->cfg->limits;

	/* Heartbeats and their answers are exempt from the limits. */
	if (internal) {
		atomic_fetch_add(&peer->queued_bytes, n);
		if (peer->is_client)
			atomic_fetch_add(&svc->client_queued, n);
		return true;
	}
	if (atomic_fetch_add(&peer->queued_bytes, n) + n >
	    l->outbound_queue_bytes) {
		if (atomic_fetch_sub(&peer->queued_bytes, n) == n)
			weft__msvc_drained(svc);
		return false;
	}
	/* Answers to clients also count against the node's budget for all
	 * of them, so many clients that do not read cannot add up. */
	if (peer->is_client && atomic_fetch_add(&svc->client_queued, n) + n >
	                           l->client_outbound_bytes) {
		atomic_fetch_sub(&svc->client_queued, n);
		if (atomic_fetch_sub(&peer->queued_bytes, n) == n)
			weft__msvc_drained(svc);
		return false;
	}
	return true;
}

/* Ends a message that will never be written: a request's callback runs
 * with status (we are on the loop, never inside the API call). */
void
weft__msvc_out_drop(weft_msvc_peer *peer, struct weft__msvc_out *out,
                    int status)
{
	weft_msvc *svc = peer->svc;

	weft__msvc_release_queued(peer, out->accounted);
	if (out->flags & WEFT__MSVC_F_RESPONSE)
		weft__msvc_count(&svc->st.responses_dropped, 1);
	if (out->flags & WEFT__MSVC_F_REQUEST) {
		if (out->internal)
			atomic_fetch_sub(&svc->pending_internal, 1);
		weft__msvc_pending_sub(svc);
		out->cb(svc, status, NULL, 0, out->arg);
	}
	weft__msvc_out_free(out);
}
