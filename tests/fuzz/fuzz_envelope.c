/* SPDX-License-Identifier: MIT */
/*
 * fuzz_envelope.c: the message envelope (docs/PROTOCOL.md 4) and the
 * error payload of an error response (4.2).
 *
 * The input is one frame body. Whatever the decoder accepts must point
 * inside the input, encode again with weft's own layout, and decode from
 * that to the same envelope: decode -> encode -> decode is the identity on
 * every field a receiver acts on (the reserved flag bits are ignored, as
 * the protocol says). An error response's payload goes through the same
 * round trip as [code, text].
 *
 * The codec's decoder (<weft/envelope.h>, which the service uses) goes
 * through weft_envelope_encode_frame too (with and without CRC), and
 * decoding only the first bytes of a body (as the envelope codec does for
 * a frame in an evbuffer) agrees with decoding all of it. Each input is
 * decoded as protocol version 1 and as version 2, whose params map (4.5)
 * and cancel kind go through the same round trip.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include <weft/crc32c.h>
#include <weft/envelope.h>

#include "codec_int.h"
#include "fuzz.h"
#include "msvc_int.h"

/* The flag bits a receiver reads: the kind. */
#define KIND_BITS 0x0fu

static void
error_round_trip(const weft_envelope *env)
{
	const uint8_t *text, *text2;
	size_t text_len, text2_len, n;
	uint8_t out[300];
	char copy[256];
	int status, status2;

	const uint8_t *p = env->payload;

	if (weft__msvc_error_decode(p, env->payload_len, &status, &text,
	                            &text_len) != 0)
		return;
	if (status >= 0 || text + text_len > p + env->payload_len)
		fuzz_fail("error payload decoded to status %d", status);
	/* The encoder takes a C string of up to 255 bytes. */
	n = text_len < sizeof(copy) - 1 ? text_len : sizeof(copy) - 1;
	memcpy(copy, text, n);
	copy[n] = '\0';
	n = weft__msvc_error_encode(out, sizeof(out), status, copy);
	if (n == 0 ||
	    weft__msvc_error_decode(out, n, &status2, &text2, &text2_len) !=
	        0 ||
	    status2 != status || text2_len != strlen(copy) ||
	    memcmp(text2, copy, text2_len) != 0)
		fuzz_fail("an error payload does not survive encode and "
		          "decode (status %d)",
		          status);
}

static void
check_same_codec(const weft_envelope *a, const weft_envelope *b)
{
	if (a->id != b->id || a->verb != b->verb ||
	    (a->flags & 0x6f) != (b->flags & 0x6f) ||
	    a->params_len != b->params_len ||
	    (a->params_len > 0 &&
	     memcmp(a->params, b->params, a->params_len) != 0) ||
	    a->created_ms != b->created_ms || a->expires_ms != b->expires_ms ||
	    a->payload_len != b->payload_len ||
	    (a->payload_len > 0 &&
	     memcmp(a->payload, b->payload, a->payload_len) != 0))
		fuzz_fail("the codec's envelope does not survive encode and "
		          "decode");
}

/* Encodes env as a whole frame and decodes that frame's body again. */
static void
frame_round_trip(const weft_envelope *env, int version, bool crc)
{
	weft_frame_codec_opts o = {.crc32c = crc,
	                           .max_frame_bytes = WEFT_FRAME_LIMIT};
	struct evbuffer *out = evbuffer_new();
	weft_envelope again;
	const uint8_t *p;
	size_t n, body;

	if (out == NULL)
		abort();
	if (weft_envelope_encode_frame(out, env, &o) != 0)
		fuzz_fail("a decoded envelope cannot be framed");
	n = evbuffer_get_length(out);
	body = n - 4 - (crc ? 4 : 0);
	if ((p = evbuffer_pullup(out, -1)) == NULL)
		abort();
	if (body != WEFT_ENVELOPE_HEADER_BYTES + env->payload_len +
	                env->params_len ||
	    weft__load_be32(p) != body ||
	    (crc &&
	     weft__load_be32(p + 4 + body) != weft_crc32c(0, p, 4 + body)))
		fuzz_fail("a framed envelope has a wrong length or CRC");
	if (weft_envelope_decode_version(p + 4, body, version, &again) != 0)
		fuzz_fail("the codec refuses its own frame");
	check_same_codec(env, &again);
	evbuffer_free(out);
}

/* Decodes the body as the codec does, whole and from its first bytes;
 * an envelope accepted goes through a frame both ways. Returns 0 or the
 * decoder's error. */
static int
codec_round_trip(const uint8_t *data, size_t size, int version,
                 weft_envelope *env)
{
	weft_envelope head_only;
	size_t head = 0, tail = 0, avail;
	const char *why;
	int rv = weft_envelope_decode_version(data, size, version, env);
	bool head_ok;

	avail = size < WEFT__ENVELOPE_HEAD_MAX ? size : WEFT__ENVELOPE_HEAD_MAX;
	head_ok = size > 0 && weft__envelope_decode_head(
	                          data, avail, size, version, &head_only, &head,
	                          &tail, &why) == 0;
	/* The head alone cannot see a bad params map: it may pass where the
	 * whole does not, never the other way round. */
	if (rv == 0 && !head_ok)
		fuzz_fail("decoding the first bytes disagrees with the whole");
	if (head_ok && rv != 0 &&
	    (tail == 0 ||
	     weft_envelope_params_check(data + size - tail, tail, NULL) == 0))
		fuzz_fail("decoding the first bytes disagrees with the whole");
	if (rv != 0)
		return rv;
	if (env->payload != data + head ||
	    env->payload_len != size - head - tail || env->params_len != tail ||
	    head_only.id != env->id || head_only.flags != env->flags ||
	    head_only.verb != env->verb ||
	    head_only.created_ms != env->created_ms ||
	    head_only.expires_ms != env->expires_ms)
		fuzz_fail("decoding the first bytes disagrees with the whole");
	frame_round_trip(env, version, false);
	frame_round_trip(env, version, true);
	return 0;
}

/* One version's decode -> encode -> decode of the input. */
static void
one_version(const uint8_t *data, size_t size, int version)
{
	weft_envelope env, again;
	const uint8_t *payload;
	uint8_t *frame;
	size_t n;

	if (codec_round_trip(data, size, version, &env) != 0)
		return;
	payload = env.payload;
	if (payload < data || env.payload_len > size ||
	    payload + env.payload_len > data + size)
		fuzz_fail("the payload lies outside the frame");
	if (version < WEFT_ENVELOPE_V2 &&
	    (env.params_len > 0 || (env.flags & 0x0f) == 0))
		fuzz_fail("version 1 accepted a form of version 2");
	n = WEFT_ENVELOPE_HEADER_BYTES + env.payload_len + env.params_len;
	if (env.payload_len > UINT32_MAX || (frame = malloc(n)) == NULL)
		abort();
	weft_envelope_encode_header(frame, &env, (uint32_t)env.payload_len);
	memcpy(frame + WEFT_ENVELOPE_HEADER_BYTES, payload, env.payload_len);
	if (env.params_len > 0)
		memcpy(frame + n - env.params_len, env.params, env.params_len);
	if (weft_envelope_decode_version(frame, n, version, &again) != 0)
		fuzz_fail("weft's own encoding of an envelope is refused");
	check_same_codec(&env, &again);
	if ((env.flags & KIND_BITS) ==
	    (WEFT__MSVC_F_RESPONSE | WEFT__MSVC_F_ERROR))
		error_round_trip(&env);
	free(frame);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_alloc_begin();
	one_version(data, size, WEFT_ENVELOPE_V1);
	one_version(data, size, WEFT_ENVELOPE_V2);
	fuzz_alloc_end(size, "envelope");
	return 0;
}
