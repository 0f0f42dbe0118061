/* SPDX-License-Identifier: MIT */
/* srv_ttl.c: the TTL of an SRV answer, read from the message (RFC 1035
 * 4.1): a header, the questions, then the answer records. */
#include "discovery_int.h"

#define HEADER_LEN 12
#define TYPE_SRV 33

/* The offset after the name at off, or 0 when it runs past the end. A
 * compression pointer ends the name (two bytes). */
static size_t
skip_name(const unsigned char *p, size_t n, size_t off)
{
	while (off < n) {
		unsigned len = p[off];

		if ((len & 0xc0) == 0xc0)
			return off + 2 <= n ? off + 2 : 0;
		if (len > 63)
			return 0;
		off += 1 + len;
		if (len == 0)
			return off <= n ? off : 0;
	}
	return 0;
}

int
weft__srv_min_ttl(const unsigned char *abuf, size_t alen, uint32_t *ttl_s)
{
	size_t off = HEADER_LEN;
	unsigned qd, an, i;
	uint32_t best = UINT32_MAX;

	if (alen < HEADER_LEN)
		return -1;
	qd = (unsigned)abuf[4] << 8 | abuf[5];
	an = (unsigned)abuf[6] << 8 | abuf[7];
	for (i = 0; i < qd; i++)
		if ((off = skip_name(abuf, alen, off)) == 0 ||
		    (off += 4) > alen)
			return -1;
	for (i = 0; i < an; i++) {
		unsigned type, rdlen;
		uint32_t ttl;

		if ((off = skip_name(abuf, alen, off)) == 0 || off + 10 > alen)
			return -1;
		type = (unsigned)abuf[off] << 8 | abuf[off + 1];
		ttl = (uint32_t)abuf[off + 4] << 24 |
		      (uint32_t)abuf[off + 5] << 16 |
		      (uint32_t)abuf[off + 6] << 8 | abuf[off + 7];
		rdlen = (unsigned)abuf[off + 8] << 8 | abuf[off + 9];
		off += 10 + rdlen;
		if (off > alen)
			return -1;
		if (type == TYPE_SRV && ttl < best)
			best = ttl;
	}
	if (best == UINT32_MAX)
		return -1;
	*ttl_s = best;
	return 0;
}
