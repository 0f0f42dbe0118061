/* SPDX-License-Identifier: MIT */
/* discovery_int.h: what the discovery module's files share. */
#ifndef WEFT_DISCOVERY_INT_H
#define WEFT_DISCOVERY_INT_H

#include <stddef.h>
#include <stdint.h>

/*
 * weft__srv_min_ttl reads the DNS message abuf (alen bytes) and stores in
 * *ttl_s the smallest TTL of its SRV answer records. Returns 0, or -1 when
 * the message is malformed or holds no SRV answer (c-ares 1.18 parses the
 * records but drops their TTLs).
 */
int weft__srv_min_ttl(const unsigned char *abuf, size_t alen, uint32_t *ttl_s);

#endif
