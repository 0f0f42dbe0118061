/* SPDX-License-Identifier: MIT */
/*
 * weft_int.h: what weft's modules share and users must not see. It is not
 * installed; every module links the weft_internal target PRIVATE to reach
 * it (as libuv's uv-common.h or nng's nng_impl.h). Only what several
 * modules need belongs here: one module's own helpers stay in its own
 * *_int.h.
 */
#ifndef WEFT_INT_H
#define WEFT_INT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- The big-endian integers of weft's wire formats ---------------- */

/* weft__load_be reads an n-byte (n <= 8) big-endian integer at p. */
static inline uint64_t
weft__load_be(const void *p, size_t n)
{
	const uint8_t *b = p;
	uint64_t v = 0;

	while (n-- > 0)
		v = v << 8 | *b++;
	return v;
}

static inline uint32_t
weft__load_be32(const void *p)
{
	const uint8_t *b = p;

	return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 |
	       (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

/* One unaligned load and a byte swap: on the hot path of every envelope. */
static inline uint64_t
weft__load_be64(const void *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	v = __builtin_bswap64(v);
#endif
	return v;
}

static inline void
weft__store_be32(void *p, uint32_t v)
{
	uint8_t *b = p;

	b[0] = (uint8_t)(v >> 24);
	b[1] = (uint8_t)(v >> 16);
	b[2] = (uint8_t)(v >> 8);
	b[3] = (uint8_t)v;
}

static inline void
weft__store_be64(void *p, uint64_t v)
{
	weft__store_be32(p, (uint32_t)(v >> 32));
	weft__store_be32((uint8_t *)p + 4, (uint32_t)v);
}

#endif
