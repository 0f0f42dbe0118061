/* SPDX-License-Identifier: MIT */
/* test_wire.c: the envelope and handshake encodings of docs/PROTOCOL.md. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <event2/buffer.h>

#include <weft/crc32c.h>
#include <weft/frame.h>

#include "msvc_int.h"

static void
test_envelope_round_trip(void **state)
{
	uint8_t buf[WEFT_ENVELOPE_HEADER_BYTES + 5];
	weft_envelope e = {.id = 0x100000005ull,
	                   .verb = 16,
	                   .flags = WEFT__MSVC_F_REQUEST,
	                   .created_ms = 1700000000000ull,
	                   .expires_ms = 1700000005000ull};

	(void)state;
	weft_envelope_encode_header(buf, &e, 5);
	memcpy(buf + WEFT_ENVELOPE_HEADER_BYTES, "hello", 5);
	memset(&e, 0, sizeof(e));
	assert_int_equal(weft_envelope_decode(buf, sizeof(buf), &e), 0);
	assert_int_equal(e.id, 0x100000005ull);
	assert_int_equal(e.verb, 16);
	assert_int_equal(e.flags, WEFT__MSVC_F_REQUEST);
	assert_int_equal(e.created_ms, 1700000000000ull);
	assert_int_equal(e.expires_ms, 1700000005000ull);
	assert_int_equal(e.payload_len, 5);
	assert_memory_equal(e.payload, "hello", 5);
	/* One byte short, one byte too many. */
	assert_int_equal(weft_envelope_decode(buf, sizeof(buf) - 1, &e),
	                 WEFT_EPROTO);
}

/* The compact response from PROTOCOL.md 4.3, as another encoder would
 * write it. */
static const uint8_t doc_response[] = {
    0x96, 0xcf, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x05, 0x10, 0x02,
    0xcf, 0x00, 0x00, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x02, 0xcf, 0x00, 0x00,
    0x01, 0x8b, 0xcf, 0xe5, 0x7b, 0x88, 0xc4, 0x04, 0x70, 0x6f, 0x6e, 0x67};

/* The whole documented error frame, CRC included. */
static const uint8_t doc_error_frame[] = {
    0x00, 0x00, 0x00, 0x22, 0x96, 0x07, 0x63, 0x0a, 0xcf, 0x00, 0x00,
    0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x02, 0x00, 0xc4, 0x12, 0x92, 0x01,
    0xaf, 0x75, 0x6e, 0x6b, 0x6e, 0x6f, 0x77, 0x6e, 0x20, 0x76, 0x65,
    0x72, 0x62, 0x20, 0x39, 0x39, 0x3a, 0xf1, 0xdb, 0xa9};

static void
test_documented_examples_decode(void **state)
{
	weft_envelope e;
	const uint8_t *text;
	size_t text_len;
	int status;

	(void)state;
	assert_int_equal(
	    weft_envelope_decode(doc_response, sizeof(doc_response), &e), 0);
	assert_int_equal(e.id, 0x100000005ull);
	assert_int_equal(e.verb, 16);
	assert_int_equal(e.flags, WEFT__MSVC_F_RESPONSE);
	assert_int_equal(e.payload_len, 4);
	assert_int_equal(weft_crc32c(0, doc_error_frame, 38), 0x3af1dba9);
	assert_int_equal(weft_envelope_decode(doc_error_frame + 4, 34, &e), 0);
	assert_int_equal(e.flags, WEFT__MSVC_F_RESPONSE | WEFT__MSVC_F_ERROR);
	assert_int_equal(weft__msvc_error_decode(e.payload, e.payload_len,
	                                         &status, &text, &text_len),
	                 0);
	assert_int_equal(status, WEFT_EUNKNOWNVERB);
	assert_int_equal(text_len, 15);
	assert_memory_equal(text, "unknown verb 99", 15);
}

static void
test_bad_envelopes_are_rejected(void **state)
{
	static const uint8_t cases[][12] = {
	    {0x95, 1, 1, 1, 1, 0xc4, 0},             /* 5 elements */
	    {0x96, 1, 1, 3, 1, 1, 0xc4, 0},          /* kind 3 */
	    {0x96, 0xff, 1, 1, 1, 1, 0xc4, 0},       /* negative id */
	    {0x96, 1, 1, 1, 1, 1, 0xa1, 'x'},        /* str payload */
	    {0x96, 1, 1, 1, 1, 1, 0xc4, 5, 'x'},     /* bin too short */
	    {0x96, 1, 1, 1, 1, 1, 0xc4, 0, 0},       /* trailing byte */
	    {0x96, 1, 0xcf, 1, 1, 1, 1, 1, 1, 1, 1}, /* verb > 32 bit */
	};
	static const size_t lens[] = {7, 8, 8, 8, 9, 9, 11};
	weft_envelope e;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		assert_int_equal(weft_envelope_decode(cases[i], lens[i], &e),
		                 WEFT_EPROTO);
	/* Compact but valid: one-way, empty payload. */
	{
		static const uint8_t ok[] = {0x96, 0, 0x11, 4, 0, 0, 0xc4, 0};

		assert_int_equal(weft_envelope_decode(ok, sizeof(ok), &e), 0);
		assert_int_equal(e.verb, 17);
		assert_int_equal(e.flags, WEFT__MSVC_F_ONEWAY);
	}
}

static void
test_handshake_round_trip(void **state)
{
	struct weft__msvc_hello h = {.min_version = 1,
	                             .max_version = 1,
	                             .role = 0,
	                             .cls = 1,
	                             .index = 0};
	struct weft__msvc_hello h2;
	struct weft__msvc_reply r = {
	    .status = 0, .version = 1, .flags = 1, .max_frame = 33554432};
	struct weft__msvc_reply r2;
	struct evbuffer *b = evbuffer_new(), *body = evbuffer_new();
	weft_frame_codec_opts framed = {.crc32c = true};
	static const uint8_t doc_hello[] = {
	    0x00, 0x00, 0x00, 0x13, 0x57, 0x45, 0x46, 0x54, 0x98,
	    0x01, 0x01, 0xa4, 0x64, 0x65, 0x6d, 0x6f, 0xa2, 0x6e,
	    0x31, 0x00, 0x01, 0x00, 0x00, 0xc4, 0x95, 0xb2, 0x09};
	static const uint8_t doc_reply[] = {
	    0x00, 0x00, 0x00, 0x11, 0x57, 0x45, 0x46, 0x54, 0x96,
	    0x00, 0x01, 0xa2, 0x6e, 0x32, 0x01, 0xce, 0x02, 0x00,
	    0x00, 0x00, 0xa0, 0xc9, 0xaa, 0x49, 0x2d};
	uint8_t *p;

	(void)state;
	strcpy(h.cluster, "demo");
	strcpy(h.id, "n1");
	/* The body, framed by the frame codec's encoder (CRC on, as the
	 * handshake's frames are): byte for byte the example of PROTOCOL.md
	 * 3.3. */
	assert_int_equal(weft__msvc_hello_encode(body, &h), 0);
	assert_int_equal(weft_frame_encode(b, body, &framed), 0);
	assert_int_equal(evbuffer_get_length(b), sizeof(doc_hello));
	p = evbuffer_pullup(b, -1);
	assert_memory_equal(p, doc_hello, sizeof(doc_hello));
	assert_int_equal(weft__msvc_hello_decode(p + 4, 19, &h2), 0);
	assert_string_equal(h2.cluster, "demo");
	assert_string_equal(h2.id, "n1");
	assert_int_equal(h2.cls, 1);
	evbuffer_drain(b, evbuffer_get_length(b));
	strcpy(r.id, "n2");
	assert_int_equal(weft__msvc_reply_encode(body, &r), 0);
	assert_int_equal(weft_frame_encode(b, body, &framed), 0);
	p = evbuffer_pullup(b, -1);
	assert_int_equal(evbuffer_get_length(b), sizeof(doc_reply));
	assert_memory_equal(p, doc_reply, sizeof(doc_reply));
	assert_int_equal(weft__msvc_reply_decode(p + 4, 17, &r2), 0);
	assert_int_equal(r2.max_frame, 33554432);
	assert_string_equal(r2.id, "n2");
	/* Wrong magic. */
	p[4] = 'X';
	assert_int_equal(weft__msvc_reply_decode(p + 4, 17, &r2), WEFT_EPROTO);
	evbuffer_free(body);
	evbuffer_free(b);
}

static void
test_error_payloads(void **state)
{
	uint8_t p[64];
	const uint8_t *text;
	size_t n, len;
	int status;

	(void)state;
	n = weft__msvc_error_encode(p, sizeof(p), WEFT_ENOTFOUND, "no key");
	assert_true(n > 0);
	assert_int_equal(weft__msvc_error_decode(p, n, &status, &text, &len),
	                 0);
	assert_int_equal(status, WEFT_ENOTFOUND);
	assert_memory_equal(text, "no key", 6);
	/* Codes without a wire name travel as APPLICATION. */
	n = weft__msvc_error_encode(p, sizeof(p), WEFT_ETLS, "x");
	weft__msvc_error_decode(p, n, &status, &text, &len);
	assert_int_equal(status, WEFT_EREMOTE);
	/* Garbage: still an error, never a crash. */
	assert_int_equal(weft__msvc_error_decode((const uint8_t *)"\xc1", 1,
	                                         &status, &text, &len),
	                 WEFT_EPROTO);
	assert_int_equal(status, WEFT_EREMOTE);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_envelope_round_trip),
	    cmocka_unit_test(test_documented_examples_decode),
	    cmocka_unit_test(test_bad_envelopes_are_rejected),
	    cmocka_unit_test(test_handshake_round_trip),
	    cmocka_unit_test(test_error_payloads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
