/* SPDX-License-Identifier: MIT */
/*
 * fuzz_handshake.c: the messaging handshake's two frame bodies, HELLO
 * (dialer to acceptor) and the acceptor's reply (docs/PROTOCOL.md 3).
 *
 * The first input byte picks which decoder reads the rest. Whatever one
 * accepts must be sane (NUL-free strings that fit their fields) and must
 * encode back to a frame whose body decodes to the same fields.
 */
#include <string.h>

#include <event2/buffer.h>

#include "fuzz.h"
#include "msvc_int.h"

/* The body weft__msvc_*_encode put into buf (the frame codec frames it). */
static const uint8_t *
body_of(struct evbuffer *buf, size_t *n)
{
	*n = evbuffer_get_length(buf);
	return evbuffer_pullup(buf, -1);
}

static void
check_str(const char *s, size_t cap)
{
	if (strnlen(s, cap) >= cap)
		fuzz_fail("a decoded string overflows its field");
}

static void
hello_round_trip(const uint8_t *p, size_t n)
{
	struct weft__msvc_hello h, again;
	struct evbuffer *buf;
	const uint8_t *body;
	size_t len;

	if (weft__msvc_hello_decode(p, n, &h) != 0)
		return;
	check_str(h.cluster, sizeof(h.cluster));
	check_str(h.id, sizeof(h.id));
	if ((buf = evbuffer_new()) == NULL ||
	    weft__msvc_hello_encode(buf, &h) != 0)
		fuzz_fail("an accepted hello does not encode");
	body = body_of(buf, &len);
	memset(&again, 0xa5, sizeof(again));
	if (weft__msvc_hello_decode(body, len, &again) != 0 ||
	    again.min_version != h.min_version ||
	    again.max_version != h.max_version || again.role != h.role ||
	    again.cls != h.cls || again.index != h.index ||
	    again.flags != h.flags || strcmp(again.cluster, h.cluster) != 0 ||
	    strcmp(again.id, h.id) != 0)
		fuzz_fail("a hello does not survive encode and decode");
	evbuffer_free(buf);
}

static void
reply_round_trip(const uint8_t *p, size_t n)
{
	struct weft__msvc_reply r, again;
	struct evbuffer *buf;
	const uint8_t *body;
	size_t len;

	if (weft__msvc_reply_decode(p, n, &r) != 0)
		return;
	check_str(r.id, sizeof(r.id));
	check_str(r.reason, sizeof(r.reason));
	if ((buf = evbuffer_new()) == NULL ||
	    weft__msvc_reply_encode(buf, &r) != 0)
		fuzz_fail("an accepted reply does not encode");
	body = body_of(buf, &len);
	memset(&again, 0xa5, sizeof(again));
	if (weft__msvc_reply_decode(body, len, &again) != 0 ||
	    again.status != r.status || again.version != r.version ||
	    again.flags != r.flags || again.max_frame != r.max_frame ||
	    strcmp(again.id, r.id) != 0 || strcmp(again.reason, r.reason) != 0)
		fuzz_fail("a reply does not survive encode and decode");
	evbuffer_free(buf);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	/* The body runs to the end of the input, so that ASan sees any read
	 * past it. */
	fuzz_alloc_begin();
	if (data[0] & 1)
		reply_round_trip(data + 1, size - 1);
	else
		hello_round_trip(data + 1, size - 1);
	fuzz_alloc_end(size, "handshake");
	return 0;
}
