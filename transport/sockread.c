/* SPDX-License-Identifier: MIT */
/*
 * sockread.c: plain sockets read and write through the channel itself.
 *
 * libevent 2.1 reads at most 4096 bytes per read event (EVBUFFER_MAX_READ
 * in buffer.c), after an ioctl(FIONREAD), whatever
 * bufferevent_set_max_single_read says. On a plain TCP or Unix socket the
 * channel therefore reads the socket itself, up to max_read_bytes per
 * event, and writes a flush straight to it when nothing is queued
 * (weft_channel_enable_direct_writes). TLS channels keep libevent's
 * OpenSSL bufferevent, with the "weft.tls" handler; pairs are untouched.
 */
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>

#include "transport_int.h"

int
weft__sock_read_install(weft_channel *ch, size_t max_read_bytes)
{
	struct bufferevent *bev = weft_channel_bev(ch);

	(void)max_read_bytes; /* the channel's own max_read_bytes applies */
	if (bev == NULL || bufferevent_getfd(bev) < 0 ||
	    bufferevent_openssl_get_ssl(bev) != NULL)
		return 0;
	weft_channel_enable_direct_writes(ch);
	return 0;
}

int
weft__channel_install_readers(weft_channel *ch, size_t max_read_bytes)
{
	int rv;

	if ((rv = weft__sock_read_install(ch, max_read_bytes)) != 0)
		return rv;
	return weft__tls_channel_install(ch, max_read_bytes);
}
