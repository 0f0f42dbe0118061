/* SPDX-License-Identifier: MIT */
/*
 * envelope.c: the bytes of the message envelope (weft/envelope.h): the
 * fixed header weft writes, a decoder of every valid encoding, and whole
 * frames. The decoder reads the fixed layout directly and any other
 * through the bounded msgpack reader (weft/mp.h).
 */
#include <string.h>

#include <event2/buffer.h>

#include <weft/crc32c.h>
#include <weft/envelope.h>
#include <weft/mp.h>

#include "codec_int.h"

#define HDR WEFT_ENVELOPE_HEADER_BYTES

void
weft_envelope_encode_header(void *out, const weft_envelope *env,
                            uint32_t payload_len)
{
	unsigned char *p = out;

	p[0] = 0x96;
	p[1] = 0xcf;
	weft__store_be64(p + 2, env->id);
	p[10] = 0xce;
	weft__store_be32(p + 11, env->verb);
	p[15] = (unsigned char)(env->flags & 0x7f);
	p[16] = 0xcf;
	weft__store_be64(p + 17, env->created_ms);
	p[25] = 0xcf;
	weft__store_be64(p + 26, env->expires_ms);
	p[34] = 0xc6;
	weft__store_be32(p + 35, payload_len);
}

bool
weft__envelope_kind_is_valid(uint32_t flags)
{
	uint32_t kind = flags & WEFT_ENVELOPE_KIND_BITS;

	return kind == WEFT_ENVELOPE_REQUEST ||
	       kind == WEFT_ENVELOPE_RESPONSE || kind == WEFT_ENVELOPE_ONEWAY ||
	       kind == (WEFT_ENVELOPE_RESPONSE | WEFT_ENVELOPE_ERROR);
}

/* Weft's own layout, with a bin 32 that takes the rest of the body. */
static bool
is_fixed_layout(const unsigned char *p, size_t avail, size_t len)
{
	return avail >= HDR && p[0] == 0x96 && p[1] == 0xcf && p[10] == 0xce &&
	       p[15] <= 0x7f && p[16] == 0xcf && p[25] == 0xcf &&
	       p[34] == 0xc6 && weft__load_be32(p + 35) == len - HDR;
}

static void
decode_fixed(const unsigned char *p, weft_envelope *out)
{
	out->id = weft__load_be64(p + 2);
	out->verb = weft__load_be32(p + 11);
	out->flags = p[15];
	out->created_ms = weft__load_be64(p + 17);
	out->expires_ms = weft__load_be64(p + 26);
}

/* Any valid encoding of the five fields and the bin header. */
static int
decode_general(weft_mp_reader *r, weft_envelope *out, uint32_t *bin_len,
               const char **why)
{
	uint64_t verb, flags;
	uint32_t n;

	if (weft_mp_read_array(r, &n) != 0 || n != 6)
		*why = "not an array of 6";
	else if (weft_mp_read_uint(r, UINT64_MAX, &out->id) != 0)
		*why = "the id is not an unsigned integer";
	else if (weft_mp_read_uint(r, UINT32_MAX, &verb) != 0)
		*why = "the verb is not an unsigned 32-bit integer";
	else if (weft_mp_read_uint(r, UINT32_MAX, &flags) != 0)
		*why = "the flags are not an unsigned 32-bit integer";
	else if (weft_mp_read_uint(r, UINT64_MAX, &out->created_ms) != 0)
		*why = "created_at is not an unsigned integer";
	else if (weft_mp_read_uint(r, UINT64_MAX, &out->expires_ms) != 0)
		*why = "expires_at is not an unsigned integer";
	else if (weft_mp_read_bin_header(r, bin_len) != 0)
		*why = "the payload is not a bin";
	else {
		out->verb = (uint32_t)verb;
		out->flags = (uint32_t)flags;
		return 0;
	}
	return WEFT_EPROTO;
}

int
weft__envelope_decode_head(const unsigned char *p, size_t avail, size_t len,
                           weft_envelope *out, size_t *head, const char **why)
{
	weft_mp_reader r;
	uint32_t bin_len;

	if (avail == 0) {
		*why = "the frame is empty";
		return WEFT_EPROTO;
	}
	if (is_fixed_layout(p, avail, len)) {
		decode_fixed(p, out);
		*head = HDR;
	} else {
		weft_mp_reader_init(&r, p, avail);
		if (decode_general(&r, out, &bin_len, why) != 0)
			return WEFT_EPROTO;
		*head = (size_t)(r.p - p);
		if (bin_len != len - *head) {
			*why = bin_len > len - *head
			           ? "the payload is truncated"
			           : "bytes follow the payload";
			return WEFT_EPROTO;
		}
	}
	if (!weft__envelope_kind_is_valid(out->flags)) {
		*why = "the flags hold no valid kind";
		return WEFT_EPROTO;
	}
	return 0;
}

int
weft_envelope_decode(const void *body, size_t len, weft_envelope *out)
{
	const char *why;
	size_t head;

	if (body == NULL)
		return WEFT_EPROTO;
	if (weft__envelope_decode_head(body, len, len, out, &head, &why) != 0)
		return WEFT_EPROTO;
	out->payload = (const unsigned char *)body + head;
	out->payload_len = len - head;
	out->payload_buf = NULL;
	return 0;
}

size_t
weft__envelope_payload_length(const weft_envelope *env)
{
	return env->payload_buf != NULL ? evbuffer_get_length(env->payload_buf)
	                                : env->payload_len;
}

/* Copies env's payload of len bytes to dst and drains payload_buf. */
void
weft__envelope_take_payload(const weft_envelope *env, void *dst, size_t len)
{
	if (len == 0)
		return;
	if (env->payload_buf == NULL) {
		memcpy(dst, env->payload, len);
		return;
	}
	evbuffer_copyout(env->payload_buf, dst, len);
	evbuffer_drain(env->payload_buf, len);
}

size_t
weft_envelope_put_frame(void *out, const weft_envelope *env, bool crc32c)
{
	size_t plen = weft__envelope_payload_length(env), body = HDR + plen;
	unsigned char *p = out;

	weft__store_be32(p, (uint32_t)body);
	weft_envelope_encode_header(p + 4, env, (uint32_t)plen);
	weft__envelope_take_payload(env, p + 4 + HDR, plen);
	if (!crc32c)
		return 4 + body;
	weft__store_be32(p + 4 + body, weft_crc32c(0, p, 4 + body));
	return 4 + body + 4;
}

/* The whole frame in one reserved piece of out. */
static int
frame_copy(struct evbuffer *out, const weft_envelope *env, size_t plen,
           bool crc)
{
	struct evbuffer_iovec v;

	if (evbuffer_reserve_space(
	        out, (ev_ssize_t)WEFT_ENVELOPE_FRAME_BYTES(plen, crc), &v, 1) <
	    1)
		return WEFT_ENOMEM;
	v.iov_len = weft_envelope_put_frame(v.iov_base, env, crc);
	return evbuffer_commit_space(out, &v, 1) == 0 ? 0 : WEFT_ENOMEM;
}

/* Length and header, then payload_buf's chains moved (or the bytes
 * copied), then the CRC. */
static int
frame_move(struct evbuffer *out, const weft_envelope *env, size_t plen,
           bool crc)
{
	unsigned char hdr[4 + HDR], trailer[4];
	uint32_t sum = 0;

	weft__store_be32(hdr, (uint32_t)(HDR + plen));
	weft_envelope_encode_header(hdr + 4, env, (uint32_t)plen);
	if (crc) {
		sum = weft_crc32c(0, hdr, sizeof(hdr));
		sum = env->payload_buf != NULL
		          ? weft__crc32c_evbuffer(sum, env->payload_buf, plen)
		          : weft_crc32c(sum, env->payload, plen);
	}
	if (evbuffer_add(out, hdr, sizeof(hdr)) != 0)
		return WEFT_ENOMEM;
	if ((env->payload_buf != NULL
	         ? evbuffer_add_buffer(out, env->payload_buf)
	         : evbuffer_add(out, env->payload, plen)) != 0)
		return WEFT_ENOMEM;
	if (!crc)
		return 0;
	weft__store_be32(trailer, sum);
	return evbuffer_add(out, trailer, 4) == 0 ? 0 : WEFT_ENOMEM;
}

int
weft_envelope_encode_frame(struct evbuffer *out, const weft_envelope *env,
                           const weft_frame_codec_opts *opts)
{
	size_t min, max, plen;
	bool crc;
	int rv;

	if (out == NULL || env == NULL ||
	    (env->payload_buf == NULL && env->payload == NULL &&
	     env->payload_len > 0))
		return WEFT_EINVAL;
	if ((rv = weft__frame_opts_resolve(opts, &min, &max, &crc)) != 0)
		return rv;
	plen = weft__envelope_payload_length(env);
	if (plen > max || HDR + plen > max)
		return WEFT_ETOOBIG;
	if (HDR + plen < min)
		return WEFT_EINVAL;
	if (HDR + plen <= WEFT__CODEC_COPY_MAX)
		return frame_copy(out, env, plen, crc);
	return frame_move(out, env, plen, crc);
}
