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
weft__envelope_encode_fixed(void *out, const weft_envelope *env,
                            uint32_t payload_len)
{
	unsigned char *p = out;

	p[0] = 0x96;
	p[1] = 0xcf;
	weft__store_be64(p + 2, env->id);
	p[10] = 0xce;
	weft__store_be32(p + 11, env->verb);
	p[15] = (unsigned char)(env->flags & 0x6f);
	p[16] = 0xcf;
	weft__store_be64(p + 17, env->created_ms);
	p[25] = 0xcf;
	weft__store_be64(p + 26, env->expires_ms);
	p[34] = 0xc6;
	weft__store_be32(p + 35, payload_len);
}

void
weft__envelope_mark_params(void *out)
{
	unsigned char *p = out;

	p[0] = 0x97;
	p[15] |= WEFT_ENVELOPE_PARAMS;
}

void
weft_envelope_encode_header(void *out, const weft_envelope *env,
                            uint32_t payload_len)
{
	weft__envelope_encode_fixed(out, env, payload_len);
	if (env->params_len != 0)
		weft__envelope_mark_params(out);
}

bool
weft__envelope_kind_is_valid(uint32_t flags, int version)
{
	uint32_t kind = flags & WEFT_ENVELOPE_KIND_BITS;

	if (version >= WEFT_ENVELOPE_V2 && (flags & WEFT_ENVELOPE_CANCEL))
		return kind == 0;
	return kind == WEFT_ENVELOPE_REQUEST ||
	       kind == WEFT_ENVELOPE_RESPONSE || kind == WEFT_ENVELOPE_ONEWAY ||
	       kind == (WEFT_ENVELOPE_RESPONSE | WEFT_ENVELOPE_ERROR);
}

/* The fields of weft's own layout after its array header, with a bin 32
 * whose length is checked by the caller. */
static bool
fixed_fields(const unsigned char *p)
{
	return p[1] == 0xcf && p[10] == 0xce && p[15] <= 0x7f &&
	       p[16] == 0xcf && p[25] == 0xcf && p[34] == 0xc6;
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

/* Any valid encoding of the five fields and the bin header; *n is the
 * array's element count, 6 or (from version 2) 7. */
static int
decode_general(weft_mp_reader *r, int version, weft_envelope *out, uint32_t *n,
               uint32_t *bin_len, const char **why)
{
	uint64_t verb, flags;

	if (weft_mp_read_array(r, n) != 0 ||
	    (*n != 6 && (*n != 7 || version < WEFT_ENVELOPE_V2)))
		*why = version < WEFT_ENVELOPE_V2 ? "not an array of 6"
		                                  : "not an array of 6 or 7";
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

/* What follows the payload: nothing in an array of 6; in one of 7, a
 * params map that the flags announce, within its size limit. */
static int
check_tail(uint32_t n, uint32_t flags, int version, size_t tail,
           const char **why)
{
	bool announced =
	    version >= WEFT_ENVELOPE_V2 && (flags & WEFT_ENVELOPE_PARAMS) != 0;

	if (n == 6 && tail > 0)
		*why = "bytes follow the payload";
	else if (announced != (n == 7))
		*why = n == 7 ? "params without the PARAMS flag"
		              : "the PARAMS flag without params";
	else if (n == 7 && tail == 0)
		*why = "the params map is missing";
	else if (tail > WEFT_ENVELOPE_PARAMS_MAX)
		*why = "the params map is too large";
	else
		return 0;
	return WEFT_EPROTO;
}

int
weft__envelope_decode_head(const unsigned char *p, size_t avail, size_t len,
                           int version, weft_envelope *out, size_t *head,
                           size_t *tail, const char **why)
{
	weft_mp_reader r;
	uint32_t bin_len, n = 6;

	if (avail == 0) {
		*why = "the frame is empty";
		return WEFT_EPROTO;
	}
	/* Weft's own layout: a bin 32 that takes the rest of the body, or
	 * (version 2) all but the params after it. */
	if (avail >= HDR && p[0] == 0x96 && fixed_fields(p) &&
	    weft__load_be32(p + 35) == len - HDR) {
		decode_fixed(p, out);
		*head = HDR;
		bin_len = (uint32_t)(len - HDR);
	} else if (version >= WEFT_ENVELOPE_V2 && avail >= HDR &&
	           p[0] == 0x97 && fixed_fields(p) &&
	           weft__load_be32(p + 35) <= len - HDR) {
		decode_fixed(p, out);
		*head = HDR;
		bin_len = weft__load_be32(p + 35);
		n = 7;
	} else {
		weft_mp_reader_init(&r, p, avail);
		if (decode_general(&r, version, out, &n, &bin_len, why) != 0)
			return WEFT_EPROTO;
		*head = (size_t)(r.p - p);
		if (bin_len > len - *head) {
			*why = "the payload is truncated";
			return WEFT_EPROTO;
		}
	}
	*tail = len - *head - bin_len;
	if (n != 6 || *tail > 0 || (out->flags & WEFT_ENVELOPE_PARAMS)) {
		if (check_tail(n, out->flags, version, *tail, why) != 0)
			return WEFT_EPROTO;
	}
	if (!weft__envelope_kind_is_valid(out->flags, version)) {
		*why = "the flags hold no valid kind";
		return WEFT_EPROTO;
	}
	return 0;
}

/* ---- Params ------------------------------------------------------------- */

/* Checks the value of a known key; any value of another key is skipped. */
static int
check_value(weft_mp_reader *r, uint64_t key, const char **why)
{
	const void *bin;
	uint64_t v;
	uint32_t n;
	size_t len;

	switch (key) {
	case WEFT_PARAM_TRACEPARENT:
		if (weft_mp_read_bin(r, &bin, &len) != 0 || len != 26)
			return *why = "traceparent is not a bin of 26",
			       WEFT_EPROTO;
		return 0;
	case WEFT_PARAM_STAGE_US:
		if (weft_mp_read_array(r, &n) != 0 || n > 8)
			return *why = "stage times are not an array of at "
			              "most 8",
			       WEFT_EPROTO;
		while (n-- > 0)
			if (weft_mp_read_uint(r, UINT64_MAX, &v) != 0)
				return *why = "a stage time is not an "
				              "unsigned integer",
				       WEFT_EPROTO;
		return 0;
	case WEFT_PARAM_PRIORITY:
		if (weft_mp_read_uint(r, 255, &v) != 0)
			return *why = "priority is not an unsigned integer up "
			              "to 255",
			       WEFT_EPROTO;
		return 0;
	default:
		if (weft_mp_skip(r, WEFT_ENVELOPE_PARAMS_MAX) != 0)
			return *why = "a param's value is not msgpack",
			       WEFT_EPROTO;
		return 0;
	}
}

int
weft_envelope_params_check(const void *params, size_t len, const char **why)
{
	uint64_t keys[WEFT_ENVELOPE_PARAMS_MAX_KEYS];
	const char *ignored;
	weft_mp_reader r;
	uint32_t n, i, j;

	if (why == NULL)
		why = &ignored;
	if (len > WEFT_ENVELOPE_PARAMS_MAX)
		return *why = "the params map is too large", WEFT_EPROTO;
	weft_mp_reader_init(&r, params, len);
	if (weft_mp_read_map(&r, &n) != 0)
		return *why = "the params are not a map", WEFT_EPROTO;
	if (n > WEFT_ENVELOPE_PARAMS_MAX_KEYS)
		return *why = "the params map has too many keys", WEFT_EPROTO;
	for (i = 0; i < n; i++) {
		if (weft_mp_read_uint(&r, WEFT_ENVELOPE_PARAM_KEY_MAX,
		                      &keys[i]) != 0)
			return *why = "a param key is not a small unsigned "
			              "integer",
			       WEFT_EPROTO;
		for (j = 0; j < i; j++)
			if (keys[j] == keys[i])
				return *why = "a param key appears twice",
				       WEFT_EPROTO;
		if (check_value(&r, keys[i], why) != 0)
			return WEFT_EPROTO;
	}
	if (weft_mp_reader_end(&r) != 0)
		return *why = "bytes follow the params map", WEFT_EPROTO;
	return 0;
}

int
weft_envelope_param_find(const void *params, size_t len, uint32_t key,
                         const void **value, size_t *value_len)
{
	weft_mp_reader r;
	const unsigned char *at;
	uint64_t k;
	uint32_t n;

	weft_mp_reader_init(&r, params, len);
	if (len == 0 || weft_mp_read_map(&r, &n) != 0)
		return WEFT_ENOTFOUND;
	while (n-- > 0) {
		if (weft_mp_read_uint(&r, UINT64_MAX, &k) != 0)
			return WEFT_ENOTFOUND;
		at = r.p;
		if (weft_mp_skip(&r, WEFT_ENVELOPE_PARAMS_MAX) != 0)
			return WEFT_ENOTFOUND;
		if (k == key) {
			*value = at;
			*value_len = (size_t)(r.p - at);
			return 0;
		}
	}
	return WEFT_ENOTFOUND;
}

int
weft_envelope_decode_version(const void *body, size_t len, int version,
                             weft_envelope *out)
{
	const unsigned char *p = body;
	const char *why;
	size_t head, tail;

	if (body == NULL)
		return WEFT_EPROTO;
	if (weft__envelope_decode_head(p, len, len, version, out, &head, &tail,
	                               &why) != 0)
		return WEFT_EPROTO;
	out->payload = p + head;
	out->payload_len = len - head - tail;
	out->payload_buf = NULL;
	out->params = tail > 0 ? p + len - tail : NULL;
	out->params_len = tail;
	if (tail > 0 && weft_envelope_params_check(out->params, tail, &why))
		return WEFT_EPROTO;
	return 0;
}

int
weft_envelope_decode(const void *body, size_t len, weft_envelope *out)
{
	return weft_envelope_decode_version(body, len, WEFT_ENVELOPE_V1, out);
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
	size_t plen = weft__envelope_payload_length(env);
	size_t body = HDR + plen + env->params_len;
	unsigned char *p = out;

	weft__store_be32(p, (uint32_t)body);
	weft_envelope_encode_header(p + 4, env, (uint32_t)plen);
	weft__envelope_take_payload(env, p + 4 + HDR, plen);
	if (env->params_len > 0)
		memcpy(p + 4 + HDR + plen, env->params, env->params_len);
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
	        out,
	        (ev_ssize_t)(WEFT_ENVELOPE_FRAME_BYTES(plen, crc) +
	                     env->params_len),
	        &v, 1) < 1)
		return WEFT_ENOMEM;
	v.iov_len = weft_envelope_put_frame(v.iov_base, env, crc);
	return evbuffer_commit_space(out, &v, 1) == 0 ? 0 : WEFT_ENOMEM;
}

/* Length and header, then payload_buf's chains moved (or the bytes
 * copied), then the params and the CRC. */
static int
frame_move(struct evbuffer *out, const weft_envelope *env, size_t plen,
           bool crc)
{
	unsigned char hdr[4 + HDR], trailer[4];
	uint32_t sum = 0;

	weft__store_be32(hdr, (uint32_t)(HDR + plen + env->params_len));
	weft_envelope_encode_header(hdr + 4, env, (uint32_t)plen);
	if (crc) {
		sum = weft_crc32c(0, hdr, sizeof(hdr));
		sum = env->payload_buf != NULL
		          ? weft__crc32c_evbuffer(sum, env->payload_buf, plen)
		          : weft_crc32c(sum, env->payload, plen);
		sum = weft_crc32c(sum, env->params, env->params_len);
	}
	if (evbuffer_add(out, hdr, sizeof(hdr)) != 0)
		return WEFT_ENOMEM;
	if ((env->payload_buf != NULL
	         ? evbuffer_add_buffer(out, env->payload_buf)
	         : evbuffer_add(out, env->payload, plen)) != 0)
		return WEFT_ENOMEM;
	if (env->params_len > 0 &&
	    evbuffer_add(out, env->params, env->params_len) != 0)
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
	size_t min, max, plen, body;
	bool crc;
	int rv;

	if (out == NULL || env == NULL ||
	    (env->payload_buf == NULL && env->payload == NULL &&
	     env->payload_len > 0) ||
	    (env->params == NULL && env->params_len > 0))
		return WEFT_EINVAL;
	if ((rv = weft__frame_opts_resolve(opts, &min, &max, &crc)) != 0)
		return rv;
	plen = weft__envelope_payload_length(env);
	if (plen > max || env->params_len > WEFT_ENVELOPE_PARAMS_MAX)
		return WEFT_ETOOBIG;
	body = HDR + plen + env->params_len;
	if (body > max)
		return WEFT_ETOOBIG;
	if (body < min)
		return WEFT_EINVAL;
	if (body <= WEFT__CODEC_COPY_MAX)
		return frame_copy(out, env, plen, crc);
	return frame_move(out, env, plen, crc);
}
