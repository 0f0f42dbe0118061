/* SPDX-License-Identifier: MIT */
/*
 * handshake.c: building a new channel's pipeline, for every transport.
 * (A TLS stream runs its own handshake: tls_stream.c.)
 */
#include "transport_int.h"

int
weft__channel_init(weft_channel *ch, weft_channel_init_cb init, void *arg)
{
	return init != NULL ? init(ch, arg) : 0;
}
