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
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "msvc_int.h"

/* The flag bits a receiver reads: the kind. */
#define KIND_BITS 0x0fu

static void
error_round_trip(const struct weft__msvc_env *env)
{
	const uint8_t *text, *text2;
	size_t text_len, text2_len, n;
	uint8_t out[300];
	char copy[256];
	int status, status2;

	if (weft__msvc_error_decode(env->payload, env->len, &status, &text,
	                            &text_len) != 0)
		return;
	if (status >= 0 || text + text_len > env->payload + env->len)
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
check_same(const struct weft__msvc_env *a, const struct weft__msvc_env *b)
{
	if (a->id != b->id || a->verb != b->verb ||
	    (a->flags & KIND_BITS) != (b->flags & KIND_BITS) ||
	    a->created_ms != b->created_ms || a->expires_ms != b->expires_ms ||
	    a->len != b->len || memcmp(a->payload, b->payload, a->len) != 0)
		fuzz_fail("an envelope does not survive encode and decode");
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct weft__msvc_env env, again;
	uint8_t *frame;

	fuzz_alloc_begin();
	if (weft__msvc_env_decode(data, size, &env) != 0) {
		fuzz_alloc_end(size, "envelope");
		return 0;
	}
	if (env.payload < data || env.len > size ||
	    env.payload + env.len > data + size)
		fuzz_fail("the payload lies outside the frame");
	if (env.len > UINT32_MAX ||
	    (frame = malloc(WEFT__MSVC_ENV_HEADER + env.len)) == NULL)
		abort();
	weft__msvc_env_header(frame, env.id, env.verb, env.flags,
	                      env.created_ms, env.expires_ms,
	                      (uint32_t)env.len);
	memcpy(frame + WEFT__MSVC_ENV_HEADER, env.payload, env.len);
	if (weft__msvc_env_decode(frame, WEFT__MSVC_ENV_HEADER + env.len,
	                          &again) != 0)
		fuzz_fail("weft's own encoding of an envelope is refused");
	check_same(&env, &again);
	if ((env.flags & KIND_BITS) ==
	    (WEFT__MSVC_F_RESPONSE | WEFT__MSVC_F_ERROR))
		error_round_trip(&env);
	free(frame);
	fuzz_alloc_end(size, "envelope");
	return 0;
}
