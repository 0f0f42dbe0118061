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

#include <assert.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <weft/loop.h>

/* ---- Loop affinity ------------------------------------------------- */

/*
 * WEFT_ASSERT_IN_LOOP checks, in debug builds, that the caller runs on
 * loop's thread (Netty's inEventLoop()): for the functions whose comment
 * says "Loop thread", in every module. A loop no thread drives yet belongs
 * to whoever sets it up (weft_loop_in_thread).
 */
#ifdef NDEBUG
#define WEFT_ASSERT_IN_LOOP(loop) ((void)(loop))
#else
#define WEFT_ASSERT_IN_LOOP(loop) assert(weft_loop_in_thread(loop))
#endif

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

/* ---- Growable arrays ---------------------------------------------- */

/*
 * weft__array_room makes room for the element at index len of the array
 * at *items (cap elements of size bytes), doubling it when full (to first
 * elements when empty). Returns that element's address, not zeroed, or
 * NULL when memory ran out (the array is then as it was). Through
 * WEFT__ARRAY_ROOM, which takes the array's pointer and capacity fields:
 *
 *     if ((h = WEFT__ARRAY_ROOM(loop->hooks, loop->hooks_cap,
 *                               loop->hooks_len, 4)) == NULL)
 *             return WEFT_ENOMEM;
 *     loop->hooks_len++;
 */
static inline void *
weft__array_room(void *items, size_t *cap, size_t len, size_t size,
                 size_t first)
{
	size_t n = *cap ? *cap * 2 : first;
	char *base, *grown;

	/* The array's own pointer type, read and written as bytes. */
	memcpy(&base, items, sizeof(base));
	if (len < *cap)
		return base + len * size;
	if (n < len + 1 || n > SIZE_MAX / size ||
	    (grown = realloc(base, n * size)) == NULL)
		return NULL;
	memcpy(items, &grown, sizeof(grown));
	*cap = n;
	return grown + len * size;
}

#define WEFT__ARRAY_ROOM(items, cap, len, first)                               \
	weft__array_room(&(items), &(cap), (len), sizeof(*(items)), (first))

#endif
