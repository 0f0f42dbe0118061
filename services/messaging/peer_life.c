/* SPDX-License-Identifier: MIT */
/*
 * peer_life.c: a peer's life and what the API tells of it. Every peer
 * starts here (a member's is then given its outbound connections by
 * members.c); a client's is made at its HELLO and counted by the
 * connections and messages that hold it; each is freed here. Members are
 * found by id, and the peer accessors of <weft/messaging.h> read them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "msvc_int.h"

int
weft__msvc_peer_init(weft_msvc *svc, weft_msvc_peer *peer, const char *id)
{
	snprintf(peer->id, sizeof(peer->id), "%s", id);
	peer->svc = svc;
	pthread_mutex_init(&peer->addr_lock, NULL);
	pthread_mutex_init(&peer->snap_lock, NULL);
	weft__msvc_clock_init(&peer->clock);
	return 0;
}

void
weft__msvc_peer_free(weft_msvc_peer *peer)
{
	uint32_t cls, i;

	if (peer == NULL)
		return;
	for (cls = 0; cls < WEFT_MSVC_CLASSES; cls++) {
		if (peer->conns[cls] == NULL)
			continue;
		for (i = 0; i < peer->svc->cfg->limits.connections[cls]; i++)
			weft__msvc_conn_fini(&peer->conns[cls][i].conn);
		free(peer->conns[cls]);
	}
	weft_histogram_free(peer->lat);
	weft__msvc_stages_free(&peer->stages);
	weft__msvc_stages_free(&peer->stages_snap);
	free(atomic_load(&peer->newest_inbound));
	pthread_mutex_destroy(&peer->addr_lock);
	pthread_mutex_destroy(&peer->snap_lock);
	free(peer->host);
	free(peer->close_tasks);
	free(peer);
}

int
weft__msvc_peer_client_new(weft_msvc *svc, struct weft__msvc_conn *c,
                           const char *id, weft_msvc_peer **out)
{
	weft_msvc_peer *peer;

	if ((peer = calloc(1, sizeof(*peer))) == NULL)
		return WEFT_ENOMEM;
	if (weft__msvc_peer_init(svc, peer, id) != 0) {
		weft__msvc_peer_free(peer);
		return WEFT_ENOMEM;
	}
	peer->index = UINT32_MAX;
	peer->is_client = true;
	peer->home = c->ml;
	peer->client_conn = c;
	atomic_store(&peer->refs, 1);
	*out = peer;
	return 0;
}

void
weft__msvc_peer_unref(weft_msvc_peer *peer)
{
	if (atomic_fetch_sub(&peer->refs, 1) == 1)
		weft__msvc_peer_free(peer);
}

ssize_t
weft__msvc_member_index(weft_msvc *svc, const char *id)
{
	uint32_t i, n = atomic_load(&svc->npeers);

	for (i = 0; i < n; i++) {
		weft_msvc_peer *peer = svc->peers[i];

		if (strcmp(peer->id, id) == 0)
			return weft__msvc_peer_left(peer) ? -1 : (ssize_t)i;
	}
	return -1;
}

size_t
weft_msvc_peer_count(const weft_msvc *svc)
{
	return svc->npeers;
}

weft_msvc_peer *
weft_msvc_peer_at(weft_msvc *svc, size_t i)
{
	return i < svc->npeers ? svc->peers[i] : NULL;
}

weft_msvc_peer *
weft_msvc_peer_find(weft_msvc *svc, const char *id)
{
	ssize_t i = weft__msvc_member_index(svc, id);

	return i >= 0 ? svc->peers[i] : NULL;
}

const char *
weft_msvc_peer_id(const weft_msvc_peer *peer)
{
	return peer->id;
}

bool
weft_msvc_peer_is_self(const weft_msvc_peer *peer)
{
	return peer->is_self;
}

bool
weft_msvc_peer_is_up(const weft_msvc_peer *peer)
{
	return atomic_load(&((weft_msvc_peer *)peer)->up);
}

bool
weft_msvc_peer_is_down(const weft_msvc_peer *peer)
{
	return atomic_load(&((weft_msvc_peer *)peer)->down);
}

int
weft_msvc_set_peer_addr(weft_msvc *svc, const char *id, const char *host,
                        uint16_t port)
{
	weft_msvc_peer *peer = weft_msvc_peer_find(svc, id);
	char *h;

	if (peer == NULL)
		return WEFT_ENOTFOUND;
	if (host == NULL || (h = strdup(host)) == NULL)
		return host == NULL ? WEFT_EINVAL : WEFT_ENOMEM;
	pthread_mutex_lock(&peer->addr_lock);
	free(peer->host);
	peer->host = h;
	peer->port = port;
	pthread_mutex_unlock(&peer->addr_lock);
	return 0;
}
