/* SPDX-License-Identifier: MIT */
/*
 * test_envelope.c: the envelope of docs/PROTOCOL.md section 4: its bytes
 * (the documented examples, every alternative msgpack encoding, invalid
 * kinds and values, truncation, trailing bytes), whole frames, and the
 * envelope codec in a pipeline, over a bufferevent pair and over an
 * in-process channel pair with and without CRC.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include <weft/crc32c.h>
#include <weft/envelope.h>
#include <weft/transport.h>

#include "alloc_count.h"
#include "fixture.h"
#include "support/wire.h"

#define HDR WEFT_ENVELOPE_HEADER_BYTES

/* ---- A msgpack writer with a chosen encoding per value ----------------- */

enum form {
	F_FIXINT,
	F_U8,
	F_U16,
	F_U32,
	F_U64,
	F_I8,
	F_I16,
	F_I32,
	F_I64,
	F_FORMS
};

/* The largest value each form holds. */
static const uint64_t form_max[F_FORMS] = {
    0x7f, 0xff,   0xffff,     0xffffffffu,         UINT64_MAX,
    0x7f, 0x7fff, 0x7fffffff, (uint64_t)INT64_MAX,
};
static const unsigned char form_tag[F_FORMS] = {0,    0xcc, 0xcd, 0xce, 0xcf,
                                                0xd0, 0xd1, 0xd2, 0xd3};
static const size_t form_width[F_FORMS] = {0, 1, 2, 4, 8, 1, 2, 4, 8};

static size_t
put_int(unsigned char *p, enum form f, uint64_t v)
{
	if (f == F_FIXINT) {
		p[0] = (unsigned char)v;
		return 1;
	}
	p[0] = form_tag[f];
	return 1 + weft_test_put_be(p + 1, v, form_width[f]);
}

/* Array header forms: fixarray, array 16, array 32. */
static size_t
put_array(unsigned char *p, int form, uint32_t n)
{
	if (form == 0) {
		p[0] = (unsigned char)(0x90 | n);
		return 1;
	}
	p[0] = form == 1 ? 0xdc : 0xdd;
	return 1 + weft_test_put_be(p + 1, n, form == 1 ? 2 : 4);
}

/* Bin header forms: bin 8, 16, 32. */
static size_t
put_bin(unsigned char *p, int form, size_t n)
{
	p[0] = (unsigned char)(0xc4 + form);
	return 1 + weft_test_put_be(p + 1, n, (size_t)1 << form);
}

/* One way to write an envelope: forms of the array, the five integers
 * and the bin. */
struct layout {
	int array;
	enum form ints[5];
	int bin;
};

static size_t
build(unsigned char *p, const struct layout *l, const uint64_t v[5],
      const void *payload, size_t len)
{
	size_t n = put_array(p, l->array, 6), i;

	for (i = 0; i < 5; i++)
		n += put_int(p + n, l->ints[i], v[i]);
	n += put_bin(p + n, l->bin, len);
	memcpy(p + n, payload, len);
	return n + len;
}

static void
check_fields(const weft_envelope *e, const uint64_t v[5], const void *payload,
             size_t len)
{
	assert_int_equal(e->id, v[0]);
	assert_int_equal(e->verb, v[1]);
	assert_int_equal(e->flags, v[2]);
	assert_int_equal(e->created_ms, v[3]);
	assert_int_equal(e->expires_ms, v[4]);
	assert_int_equal(e->payload_len, len);
	assert_null(e->payload_buf);
	if (len > 0)
		assert_memory_equal(e->payload, payload, len);
}

/* ---- The documented examples ------------------------------------------- */

/* docs/PROTOCOL.md 4.3: the request, CRC included. */
static const unsigned char doc_request[] = {
    0x00, 0x00, 0x00, 0x2b, 0x96, 0xcf, 0x00, 0x00, 0x00, 0x01, 0x00,
    0x00, 0x00, 0x05, 0xce, 0x00, 0x00, 0x00, 0x10, 0x01, 0xcf, 0x00,
    0x00, 0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x00, 0xcf, 0x00, 0x00, 0x01,
    0x8b, 0xcf, 0xe5, 0x7b, 0x88, 0xc6, 0x00, 0x00, 0x00, 0x04, 0x70,
    0x69, 0x6e, 0x67, 0x46, 0x04, 0xb1, 0x3e};

/* The response of another encoder, with compact integers. */
static const unsigned char doc_response[] = {
    0x00, 0x00, 0x00, 0x24, 0x96, 0xcf, 0x00, 0x00, 0x00, 0x01, 0x00,
    0x00, 0x00, 0x05, 0x10, 0x02, 0xcf, 0x00, 0x00, 0x01, 0x8b, 0xcf,
    0xe5, 0x68, 0x02, 0xcf, 0x00, 0x00, 0x01, 0x8b, 0xcf, 0xe5, 0x7b,
    0x88, 0xc4, 0x04, 0x70, 0x6f, 0x6e, 0x67, 0x14, 0x6a, 0x5b, 0xb5};

/* The error response to request 7 for verb 99. */
static const unsigned char doc_error[] = {
    0x00, 0x00, 0x00, 0x22, 0x96, 0x07, 0x63, 0x0a, 0xcf, 0x00, 0x00,
    0x01, 0x8b, 0xcf, 0xe5, 0x68, 0x02, 0x00, 0xc4, 0x12, 0x92, 0x01,
    0xaf, 0x75, 0x6e, 0x6b, 0x6e, 0x6f, 0x77, 0x6e, 0x20, 0x76, 0x65,
    0x72, 0x62, 0x20, 0x39, 0x39, 0x3a, 0xf1, 0xdb, 0xa9};

static const weft_envelope doc_request_env = {
    .id = 0x100000005ull,
    .verb = 16,
    .flags = WEFT_ENVELOPE_REQUEST,
    .created_ms = 1700000000000ull,
    .expires_ms = 1700000005000ull,
    .payload = "ping",
    .payload_len = 4,
};

/* Checks a documented frame's length and CRC fields. */
static void
check_doc_frame(const unsigned char *f, size_t n)
{
	uint32_t len = (uint32_t)f[0] << 24 | (uint32_t)f[1] << 16 |
	               (uint32_t)f[2] << 8 | f[3];
	uint32_t crc = (uint32_t)f[n - 4] << 24 | (uint32_t)f[n - 3] << 16 |
	               (uint32_t)f[n - 2] << 8 | f[n - 1];

	assert_int_equal(len, n - 8);
	assert_int_equal(weft_crc32c(0, f, n - 4), crc);
}

static void
test_documented_request_is_encoded_byte_for_byte(void **state)
{
	weft_frame_codec_opts crc = {.crc32c = true};
	unsigned char hdr[HDR], got[sizeof(doc_request)];
	struct evbuffer *out = evbuffer_new();

	(void)state;
	check_doc_frame(doc_request, sizeof(doc_request));
	weft_envelope_encode_header(hdr, &doc_request_env, 4);
	assert_memory_equal(hdr, doc_request + 4, HDR);
	assert_int_equal(
	    weft_envelope_encode_frame(out, &doc_request_env, &crc), 0);
	assert_int_equal(evbuffer_get_length(out), sizeof(doc_request));
	evbuffer_remove(out, got, sizeof(got));
	assert_memory_equal(got, doc_request, sizeof(doc_request));
	/* Without CRC: the same, less the trailer. */
	assert_int_equal(
	    weft_envelope_encode_frame(out, &doc_request_env, NULL), 0);
	assert_int_equal(evbuffer_get_length(out), sizeof(doc_request) - 4);
	evbuffer_remove(out, got, sizeof(doc_request) - 4);
	assert_memory_equal(got, doc_request, sizeof(doc_request) - 4);
	evbuffer_free(out);
}

static void
test_documented_examples_decode(void **state)
{
	static const uint64_t req[5] = {0x100000005ull, 16, 1, 1700000000000ull,
	                                1700000005000ull};
	static const uint64_t resp[5] = {0x100000005ull, 16, 2,
	                                 1700000000002ull, 1700000005000ull};
	static const uint64_t err[5] = {7, 99, 0x0a, 1700000000002ull, 0};
	weft_envelope e;

	(void)state;
	check_doc_frame(doc_response, sizeof(doc_response));
	check_doc_frame(doc_error, sizeof(doc_error));
	assert_int_equal(weft_envelope_decode(doc_request + 4, 43, &e), 0);
	check_fields(&e, req, "ping", 4);
	assert_ptr_equal(e.payload, doc_request + 4 + HDR);
	assert_int_equal(weft_envelope_decode(doc_response + 4, 36, &e), 0);
	check_fields(&e, resp, "pong", 4);
	assert_int_equal(weft_envelope_decode(doc_error + 4, 34, &e), 0);
	check_fields(&e, err, "\x92\x01\xafunknown verb 99", 18);
}

/* ---- Every encoding ---------------------------------------------------- */

/* Values at every edge of the integer forms. */
static const uint64_t edges[] = {0,
                                 1,
                                 0x7f,
                                 0x80,
                                 0xff,
                                 0x100,
                                 0x7fff,
                                 0x8000,
                                 0xffff,
                                 0x10000,
                                 0x7fffffff,
                                 0x80000000u,
                                 0xffffffff,
                                 0x100000000,
                                 (uint64_t)INT64_MAX,
                                 (uint64_t)INT64_MAX + 1,
                                 UINT64_MAX};
#define NEDGES (sizeof(edges) / sizeof(edges[0]))

/* Decodes every form of value v in field i (others in their smallest
 * form) and checks that each decodes to the same envelope. */
static void
every_form_of(size_t i, uint64_t v, const void *payload, size_t len)
{
	static unsigned char body[128 + 70000];
	uint64_t vals[5] = {5, 16, WEFT_ENVELOPE_REQUEST, 200, 0};
	struct layout l = {
	    0, {F_FIXINT, F_FIXINT, F_FIXINT, F_U8, F_FIXINT}, 0};
	weft_envelope e;
	size_t n;
	int f, a, b;

	vals[i] = v;
	for (f = 0; f < F_FORMS; f++) {
		if (form_max[f] < v)
			continue;
		l.ints[i] = (enum form)f;
		for (a = 0; a < 3; a++)
			for (b = 0; b < 3; b++) {
				if ((b == 0 && len > 0xff) ||
				    (b == 1 && len > 0xffff))
					continue;
				l.array = a;
				l.bin = b;
				n = build(body, &l, vals, payload, len);
				assert_int_equal(
				    weft_envelope_decode(body, n, &e), 0);
				check_fields(&e, vals, payload, len);
			}
	}
}

static void
test_every_valid_encoding_decodes_the_same(void **state)
{
	static unsigned char big[70000];
	size_t k, i;

	(void)state;
	for (k = 0; k < sizeof(big); k++)
		big[k] = (unsigned char)(k * 13);
	for (k = 0; k < NEDGES; k++) {
		every_form_of(0, edges[k], "abc", 3);
		every_form_of(3, edges[k], "", 0);
		every_form_of(4, edges[k], "x", 1);
		if (edges[k] <= UINT32_MAX) {
			every_form_of(1, edges[k], "abc", 3);
			/* Flags: a valid kind, with reserved bits from the
			 * value above it. */
			every_form_of(2, (edges[k] & ~0xfull) | 0x04, "", 0);
		}
	}
	/* Payloads at the edges of the bin forms. */
	for (i = 0; i < 6; i++) {
		static const size_t lens[] = {0, 255, 256, 65535, 65536, 69999};

		every_form_of(0, 5, big, lens[i]);
	}
}

/* The fixed layout, with a bin 32 that does not take the rest of the
 * body, is read the general way and refused. */
static void
test_fixed_layout_with_the_wrong_length_is_refused(void **state)
{
	unsigned char body[HDR + 8];
	weft_envelope e;

	(void)state;
	weft_envelope_encode_header(body, &doc_request_env, 4);
	memcpy(body + HDR, "pingpong", 8);
	assert_int_equal(weft_envelope_decode(body, HDR + 4, &e), 0);
	assert_int_equal(weft_envelope_decode(body, HDR + 5, &e), WEFT_EPROTO);
	assert_int_equal(weft_envelope_decode(body, HDR + 3, &e), WEFT_EPROTO);
	weft_envelope_encode_header(body, &doc_request_env, 0);
	assert_int_equal(weft_envelope_decode(body, HDR, &e), 0);
	assert_int_equal(e.payload_len, 0);
	assert_int_equal(weft_envelope_decode(body, HDR + 1, &e), WEFT_EPROTO);
	assert_int_equal(weft_envelope_decode(NULL, 0, &e), WEFT_EPROTO);
}

/* ---- What is refused --------------------------------------------------- */

static void
expect_refused(const unsigned char *body, size_t n)
{
	weft_envelope e;

	assert_int_equal(weft_envelope_decode(body, n, &e), WEFT_EPROTO);
}

static void
test_kinds_are_validated_as_the_protocol_says(void **state)
{
	static const uint32_t reserved[] = {0, 0x10, 0x70, 0xfff0, 0xfffffff0u};
	struct layout fix = {
	    0, {F_FIXINT, F_FIXINT, F_FIXINT, F_FIXINT, F_FIXINT}, 0};
	struct layout wide = {
	    0, {F_FIXINT, F_FIXINT, F_U32, F_FIXINT, F_FIXINT}, 2};
	uint64_t vals[5] = {1, 2, 0, 3, 4};
	unsigned char body[64];
	weft_envelope e;
	size_t r, n;
	uint32_t k;

	(void)state;
	for (r = 0; r < 5; r++)
		for (k = 0; k < 16; k++) {
			bool ok = k == 1 || k == 2 || k == 4 || k == 0x0a;

			vals[2] = reserved[r] | k;
			n = build(body, &wide, vals, "", 0);
			assert_int_equal(weft_envelope_decode(body, n, &e),
			                 ok ? 0 : WEFT_EPROTO);
			if (ok)
				assert_int_equal(e.flags, vals[2]);
			if (vals[2] > 0x7f)
				continue;
			/* Weft's own layout, and the smallest. */
			n = build(body, &fix, vals, "", 0);
			assert_int_equal(weft_envelope_decode(body, n, &e),
			                 ok ? 0 : WEFT_EPROTO);
			weft_envelope_encode_header(
			    body, &(weft_envelope){.flags = (uint32_t)vals[2]},
			    0);
			assert_int_equal(weft_envelope_decode(body, HDR, &e),
			                 ok ? 0 : WEFT_EPROTO);
		}
}

static void
test_values_out_of_range_or_of_another_type_are_refused(void **state)
{
	/* Each replaces the field at index 1..5 of a compact envelope
	 * {0x96, id, verb, flags, created, expires, bin}. */
	static const struct {
		size_t field;
		unsigned char bytes[10];
		size_t n;
	} bad[] = {
	    {1, {0xff}, 1},                            /* fixint -1 */
	    {1, {0xd0, 0x80}, 2},                      /* int 8 -128 */
	    {1, {0xd3, 0x80, 0, 0, 0, 0, 0, 0, 0}, 9}, /* int 64 < 0 */
	    {1, {0xc0}, 1},                            /* nil */
	    {1, {0xc3}, 1},                            /* true */
	    {1, {0xca, 0, 0, 0, 0}, 5},                /* float 32 */
	    {1, {0xa1, '1'}, 2},                       /* str */
	    {2, {0xcf, 0, 0, 0, 1, 0, 0, 0, 0}, 9},    /* verb 2^32 */
	    {2, {0xd3, 0, 0, 0, 1, 0, 0, 0, 0}, 9},    /* the same */
	    {3, {0xcf, 0, 0, 0, 1, 0, 0, 0, 1}, 9},    /* flags 2^32+1 */
	    {4, {0xd1, 0xff, 0xff}, 3},                /* created -1 */
	    {5, {0x90}, 1},                            /* an array */
	    {6, {0xa1, 'x'}, 2},                       /* str payload */
	    {6, {0xd9, 1, 'x'}, 3},                    /* str 8 */
	    {6, {0xc0}, 1},                            /* nil payload */
	    {6, {0x91, 0xc4, 0}, 3},                   /* [bin] */
	    {0, {0x95}, 1},                            /* 5 elements */
	    {0, {0x97}, 1},                            /* 7 elements */
	    {0, {0x86}, 1},                            /* a map */
	    {0, {0xdc, 0, 7}, 3},                      /* array 16 of 7 */
	    {0, {0xdd, 0, 0, 0, 5}, 5},                /* array 32 of 5 */
	};
	static const unsigned char good[] = {0x96, 1, 2, 1, 3, 4, 0xc4, 0};
	unsigned char body[32];
	size_t i, n;
	weft_envelope e;

	(void)state;
	assert_int_equal(weft_envelope_decode(good, sizeof(good), &e), 0);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t at = bad[i].field == 6 ? 6 : bad[i].field;
		size_t keep = bad[i].field == 6 ? 8 : at + 1;

		memcpy(body, good, at);
		memcpy(body + at, bad[i].bytes, bad[i].n);
		n = at + bad[i].n;
		memcpy(body + n, good + keep, sizeof(good) - keep);
		n += sizeof(good) - keep;
		expect_refused(body, n);
	}
}

/* Every prefix of a valid body is refused, and so is the body with a byte
 * more (in every encoding of the header). */
static void
truncated_everywhere(const unsigned char *body, size_t n)
{
	unsigned char longer[256];
	weft_envelope e;
	size_t k;

	assert_int_equal(weft_envelope_decode(body, n, &e), 0);
	for (k = 0; k < n; k++)
		expect_refused(body, k);
	assert_true(n < sizeof(longer));
	memcpy(longer, body, n);
	longer[n] = 0;
	expect_refused(longer, n + 1);
}

static void
test_truncation_at_every_byte_and_trailing_bytes_are_refused(void **state)
{
	static const uint64_t vals[5] = {UINT64_MAX, 0xffffffff, 0x0a,
	                                 0x100000000, 0x80};
	struct layout widest = {2, {F_U64, F_U64, F_I64, F_U64, F_I64}, 2};
	struct layout mixed = {1, {F_U64, F_U32, F_U16, F_U64, F_U8}, 1};
	unsigned char body[128];
	size_t n;

	(void)state;
	truncated_everywhere(doc_request + 4, 43);
	truncated_everywhere(doc_response + 4, 36);
	truncated_everywhere(doc_error + 4, 34);
	n = build(body, &widest, vals, "payload", 7);
	assert_int_equal(n, 55 + 7); /* the longest header there is */
	truncated_everywhere(body, n);
	n = build(body, &mixed, vals, "", 0);
	truncated_everywhere(body, n);
}

/* ---- Whole frames ------------------------------------------------------ */

/* Parses the frame at the front of buf: its envelope decodes to want with
 * the given payload, and its CRC (if any) is right. */
static void
take_frame(struct evbuffer *buf, const weft_envelope *want,
           const unsigned char *payload, size_t plen, bool crc)
{
	size_t total = 4 + HDR + plen + (crc ? 4 : 0);
	unsigned char *f = malloc(total);
	uint64_t vals[5] = {want->id, want->verb, want->flags, want->created_ms,
	                    want->expires_ms};
	weft_envelope e;

	assert_non_null(f);
	assert_int_equal(evbuffer_remove(buf, f, total), (int)total);
	assert_int_equal(weft_envelope_decode(f + 4, HDR + plen, &e), 0);
	check_fields(&e, vals, payload, plen);
	if (crc)
		check_doc_frame(f, total);
	free(f);
}

static void
test_frames_are_written_whole(void **state)
{
	static const size_t lens[] = {0, 1, 100, 4096, 4097, 100000};
	weft_frame_codec_opts o = {.crc32c = true};
	struct evbuffer *out = evbuffer_new(), *pb = evbuffer_new();
	static unsigned char payload[100000];
	weft_envelope env = doc_request_env;
	size_t i, k;
	int crc, as_buf;

	(void)state;
	for (k = 0; k < sizeof(payload); k++)
		payload[k] = (unsigned char)(k * 7 + 1);
	for (crc = 0; crc < 2; crc++)
		for (as_buf = 0; as_buf < 2; as_buf++)
			for (i = 0; i < 6; i++) {
				o.crc32c = crc;
				env.payload = as_buf ? NULL : payload;
				env.payload_len = as_buf ? 0 : lens[i];
				env.payload_buf = as_buf ? pb : NULL;
				if (as_buf)
					evbuffer_add(pb, payload, lens[i]);
				assert_int_equal(
				    weft_envelope_encode_frame(out, &env, &o),
				    0);
				assert_int_equal(evbuffer_get_length(pb), 0);
				take_frame(out, &env, payload, lens[i], crc);
				assert_int_equal(evbuffer_get_length(out), 0);
			}
	/* A small frame is one contiguous piece. */
	env.payload = payload;
	env.payload_len = 100;
	env.payload_buf = NULL;
	assert_int_equal(weft_envelope_encode_frame(out, &env, &o), 0);
	assert_int_equal(evbuffer_peek(out, -1, NULL, NULL, 0), 1);
	evbuffer_free(out);
	evbuffer_free(pb);
}

/* put_frame writes into the caller's memory the very bytes encode_frame
 * appends, of WEFT_ENVELOPE_FRAME_BYTES, also from a payload_buf. */
static void
test_frames_put_in_place_match_the_encoded_ones(void **state)
{
	static const size_t lens[] = {0, 1, 100, 5000};
	static unsigned char payload[5000], put[5100], enc[5100];
	weft_frame_codec_opts o = {0};
	struct evbuffer *out = evbuffer_new(), *pb = evbuffer_new();
	weft_envelope env = doc_request_env;
	size_t i, k, n;
	int crc, as_buf;

	(void)state;
	for (k = 0; k < sizeof(payload); k++)
		payload[k] = (unsigned char)(k * 13 + 5);
	/* The documented request, byte for byte. */
	o.crc32c = true;
	env.payload = "ping";
	env.payload_len = 4;
	n = weft_envelope_put_frame(put, &env, true);
	assert_int_equal(n, sizeof(doc_request));
	assert_int_equal(n, WEFT_ENVELOPE_FRAME_BYTES(4, true));
	assert_memory_equal(put, doc_request, n);
	for (crc = 0; crc < 2; crc++)
		for (as_buf = 0; as_buf < 2; as_buf++)
			for (i = 0; i < 4; i++) {
				o.crc32c = crc;
				env.payload = as_buf ? NULL : payload;
				env.payload_len = as_buf ? 0 : lens[i];
				env.payload_buf = as_buf ? pb : NULL;
				if (as_buf)
					evbuffer_add(pb, payload, lens[i]);
				n = weft_envelope_put_frame(put, &env, crc);
				assert_int_equal(
				    n, WEFT_ENVELOPE_FRAME_BYTES(lens[i], crc));
				assert_int_equal(evbuffer_get_length(pb), 0);
				if (as_buf)
					evbuffer_add(pb, payload, lens[i]);
				assert_int_equal(
				    weft_envelope_encode_frame(out, &env, &o),
				    0);
				assert_int_equal(evbuffer_get_length(out), n);
				evbuffer_remove(out, enc, n);
				assert_memory_equal(put, enc, n);
			}
	evbuffer_free(out);
	evbuffer_free(pb);
}

static void
test_frames_outside_the_limits_are_refused(void **state)
{
	weft_frame_codec_opts o = {.max_frame_bytes = HDR + 10,
	                           .min_frame_bytes = HDR + 2};
	struct evbuffer *out = evbuffer_new(), *pb = evbuffer_new();
	weft_envelope env = {.flags = WEFT_ENVELOPE_ONEWAY};

	(void)state;
	env.payload_buf = pb;
	evbuffer_add(pb, "12345678901", 11);
	assert_int_equal(weft_envelope_encode_frame(out, &env, &o),
	                 WEFT_ETOOBIG);
	assert_int_equal(evbuffer_get_length(pb), 11);
	evbuffer_drain(pb, 10);
	assert_int_equal(weft_envelope_encode_frame(out, &env, &o),
	                 WEFT_EINVAL);
	assert_int_equal(evbuffer_get_length(pb), 1);
	evbuffer_add(pb, "2", 1);
	assert_int_equal(weft_envelope_encode_frame(out, &env, &o), 0);
	assert_int_equal(evbuffer_get_length(out), 4 + HDR + 2);
	/* A payload pointer missing, or no envelope at all. */
	env.payload_buf = NULL;
	env.payload_len = 3;
	assert_int_equal(weft_envelope_encode_frame(out, &env, &o),
	                 WEFT_EINVAL);
	assert_int_equal(weft_envelope_encode_frame(out, NULL, &o),
	                 WEFT_EINVAL);
	o.min_frame_bytes = o.max_frame_bytes + 1;
	env.payload_len = 0;
	assert_int_equal(weft_envelope_encode_frame(out, &env, &o),
	                 WEFT_EINVAL);
	evbuffer_free(out);
	evbuffer_free(pb);
}

/* ---- The codec in a pipeline ------------------------------------------- */

/* Records the envelopes that reach it: their fields and payloads, and
 * whether each came as bytes or in an evbuffer. */
#define REC_MAX 64

struct rec {
	size_t n;
	weft_envelope env[REC_MAX];
	unsigned char *payload[REC_MAX];
	unsigned char params[REC_MAX][WEFT_ENVELOPE_PARAMS_MAX];
	size_t as_buf;  /* how many came with payload_buf */
	size_t count;   /* with keep false: envelopes seen */
	uint64_t bytes; /* with keep false: payload bytes seen */
	bool keep;      /* copy each envelope (allocates) */
	int errors, last_error;
	bool inactive;
};

static void
rec_read(weft_ctx *ctx, const weft_msg_type *type, void *msg)
{
	struct rec *r = weft_ctx_state(ctx);
	weft_envelope *e = msg;
	size_t len;

	assert_ptr_equal(type, &weft_msg_envelope);
	r->count++;
	r->bytes += e->payload_len;
	if (e->payload_buf != NULL) {
		r->as_buf++;
		assert_null(e->payload);
		assert_int_equal(evbuffer_get_length(e->payload_buf),
		                 e->payload_len);
	}
	if (!r->keep)
		return;
	assert_true(r->n < REC_MAX);
	len = e->payload_len;
	r->env[r->n] = *e;
	/* The params are borrowed too: keep a copy. */
	if (e->params_len > 0) {
		memcpy(r->params[r->n], e->params, e->params_len);
		r->env[r->n].params = r->params[r->n];
	}
	r->payload[r->n] = malloc(len + 1);
	assert_non_null(r->payload[r->n]);
	/* Keep a large payload as a handler would: by moving it out. */
	if (e->payload_buf != NULL)
		evbuffer_remove(e->payload_buf, r->payload[r->n], len);
	else if (len > 0)
		memcpy(r->payload[r->n], e->payload, len);
	r->n++;
}

static void
rec_error(weft_ctx *ctx, int status)
{
	struct rec *r = weft_ctx_state(ctx);

	r->errors++;
	r->last_error = status;
	weft_ctx_fire_error(ctx, status);
}

static void
rec_inactive(weft_ctx *ctx)
{
	((struct rec *)weft_ctx_state(ctx))->inactive = true;
	weft_ctx_fire_inactive(ctx);
}

static const weft_handler rec_handler = {
    .read = rec_read,
    .error = rec_error,
    .inactive = rec_inactive,
};

static void
rec_clear(struct rec *r)
{
	size_t i;

	for (i = 0; i < r->n; i++)
		free(r->payload[i]);
	r->n = 0;
}

static fx *
codec_fixture(const weft_frame_codec_opts *fo,
              const weft_envelope_codec_opts *eo, struct rec *r)
{
	fx *f = fx_new();

	assert_int_equal(weft_frame_codec_add(f->ch, "frame", fo), 0);
	assert_int_equal(weft_envelope_codec_add(f->ch, "env", eo), 0);
	assert_int_equal(weft_pipeline_add_last(f->ch, "rec", &rec_handler, r),
	                 0);
	f->stats_name = "env";
	fx_start(f);
	return f;
}

static void
test_codec_decodes_the_documented_frames(void **state)
{
	static const uint64_t err[5] = {7, 99, 0x0a, 1700000000002ull, 0};
	weft_frame_codec_opts fo = {.crc32c = true};
	struct rec r = {.keep = true};
	weft_codec_stats st;
	int emit;
	fx *f;

	(void)state;
	for (emit = 0; emit < 2; emit++) {
		fo.emit_bytes = emit;
		f = codec_fixture(&fo, NULL, &r);
		fx_send(f, doc_request, sizeof(doc_request));
		fx_send(f, doc_response, sizeof(doc_response));
		fx_send(f, doc_error, sizeof(doc_error));
		assert_int_equal(r.n, 3);
		assert_int_equal(r.env[0].id, 0x100000005ull);
		assert_int_equal(r.env[0].expires_ms, 1700000005000ull);
		assert_memory_equal(r.payload[0], "ping", 4);
		assert_int_equal(r.env[1].flags, WEFT_ENVELOPE_RESPONSE);
		assert_int_equal(r.env[1].created_ms, 1700000000002ull);
		assert_memory_equal(r.payload[1], "pong", 4);
		assert_int_equal(r.env[2].id, err[0]);
		assert_int_equal(r.env[2].verb, err[1]);
		assert_int_equal(r.env[2].flags, err[2]);
		assert_int_equal(r.env[2].payload_len, 18);
		assert_int_equal(r.errors, 0);
		assert_int_equal(weft_codec_get_stats(f->ch, "env", &st), 0);
		assert_int_equal(st.msgs_in, 3);
		assert_int_equal(st.bytes_in, 4 + 4 + 18);
		rec_clear(&r);
		fx_free(f);
	}
}

static void
test_malformed_envelope_fails_the_channel(void **state)
{
	/* A valid frame, then one whose flags hold kind 3, then a valid
	 * one again, in one read. */
	unsigned char buf[3 * sizeof(doc_request)];
	weft_frame_codec_opts fo = {.crc32c = true};
	weft_codec_stats before, after;
	struct rec r = {.keep = true};
	int warnings = fx_warnings();
	fx *f;

	(void)state;
	memcpy(buf, doc_request, sizeof(doc_request));
	memcpy(buf + sizeof(doc_request), doc_request, sizeof(doc_request));
	buf[sizeof(doc_request) + 4 + 15] = 3;
	{
		unsigned char *p = buf + sizeof(doc_request);
		uint32_t c = weft_crc32c(0, p, sizeof(doc_request) - 4);

		p[sizeof(doc_request) - 4] = (unsigned char)(c >> 24);
		p[sizeof(doc_request) - 3] = (unsigned char)(c >> 16);
		p[sizeof(doc_request) - 2] = (unsigned char)(c >> 8);
		p[sizeof(doc_request) - 1] = (unsigned char)c;
	}
	memcpy(buf + 2 * sizeof(doc_request), doc_request, sizeof(doc_request));
	weft_codec_get_totals(WEFT_CODEC_ENVELOPE, &before);
	f = codec_fixture(&fo, NULL, &r);
	fx_send(f, buf, sizeof(buf));
	assert_int_equal(r.n, 1);
	assert_int_equal(r.errors, 1);
	assert_int_equal(r.last_error, WEFT_EPROTO);
	assert_int_equal(f->err_stats.malformed, 1);
	assert_int_equal(fx_warnings(), warnings + 1);
	assert_non_null(strstr(fx_last_warning(), "test-peer"));
	assert_non_null(strstr(fx_last_warning(), "envelope"));
	fx_run_until_inactive(f);
	weft_codec_get_totals(WEFT_CODEC_ENVELOPE, &after);
	assert_int_equal(after.malformed, before.malformed + 1);
	assert_int_equal(after.msgs_in, before.msgs_in + 1);
	rec_clear(&r);
	fx_free(f);
}

/* quiet: a refused frame closes, counts and fires its error as ever, and
 * logs nothing, for a receiver that reports it in its own words. */
static void
test_quiet_codec_fails_without_logging(void **state)
{
	weft_frame_codec_opts fo = {.crc32c = true, .emit_bytes = true};
	weft_envelope_codec_opts eo = {.quiet = true};
	unsigned char bad[sizeof(doc_request)];
	struct rec r = {.keep = true};
	int warnings = fx_warnings();
	uint32_t c;
	fx *f;

	(void)state;
	/* The documented request with kind 3 in its flags, CRC made good. */
	memcpy(bad, doc_request, sizeof(bad));
	bad[4 + 15] = 3;
	c = weft_crc32c(0, bad, sizeof(bad) - 4);
	bad[sizeof(bad) - 4] = (unsigned char)(c >> 24);
	bad[sizeof(bad) - 3] = (unsigned char)(c >> 16);
	bad[sizeof(bad) - 2] = (unsigned char)(c >> 8);
	bad[sizeof(bad) - 1] = (unsigned char)c;
	f = codec_fixture(&fo, &eo, &r);
	fx_send(f, bad, sizeof(bad));
	assert_int_equal(r.n, 0);
	assert_int_equal(r.errors, 1);
	assert_int_equal(r.last_error, WEFT_EPROTO);
	assert_int_equal(f->err_stats.malformed, 1);
	assert_int_equal(fx_warnings(), warnings);
	fx_run_until_inactive(f);
	rec_clear(&r);
	fx_free(f);
}

static void
test_payload_above_the_limit_fails_the_channel(void **state)
{
	weft_envelope_codec_opts eo = {.max_payload_bytes = 3};
	struct rec r = {.keep = true};
	fx *f = codec_fixture(NULL, &eo, &r);

	(void)state;
	fx_send(f, doc_request, sizeof(doc_request) - 4);
	assert_int_equal(r.n, 0);
	assert_int_equal(r.last_error, WEFT_ETOOBIG);
	assert_int_equal(f->err_stats.too_big, 1);
	fx_run_until_inactive(f);
	fx_free(f);
}

static void
test_writes_become_frames_and_refused_ones_fail(void **state)
{
	weft_envelope_codec_opts eo = {.max_payload_bytes = 5000};
	weft_frame_codec_opts fo = {.crc32c = true};
	struct evbuffer *pb = evbuffer_new();
	static unsigned char big[6000];
	weft_envelope env = doc_request_env;
	struct rec r = {.keep = true};
	weft_codec_stats st;
	fx *f = codec_fixture(&fo, &eo, &r);
	size_t k;

	(void)state;
	for (k = 0; k < sizeof(big); k++)
		big[k] = (unsigned char)k;
	assert_int_equal(weft_channel_write_msg(f->ch, &weft_msg_envelope, &env,
	                                        fx_write_cb, f),
	                 0);
	env.payload = NULL;
	env.payload_len = 0;
	env.payload_buf = pb;
	evbuffer_add(pb, big, 5000);
	assert_int_equal(weft_channel_write_msg(f->ch, &weft_msg_envelope, &env,
	                                        fx_write_cb, f),
	                 0);
	assert_int_equal(evbuffer_get_length(pb), 0);
	/* Above the limit: refused, and consumed all the same. */
	evbuffer_add(pb, big, 5001);
	assert_int_equal(weft_channel_write_msg(f->ch, &weft_msg_envelope, &env,
	                                        fx_write_cb, f),
	                 0);
	assert_int_equal(evbuffer_get_length(pb), 0);
	fx_run_until_write_cbs(f, 3);
	assert_int_equal(f->write_status, WEFT_ETOOBIG);
	fx_run_until_peer_has(f, sizeof(doc_request) + 4 + HDR + 5000 + 4);
	take_frame(fx_peer_input(f), &doc_request_env,
	           (const unsigned char *)"ping", 4, true);
	take_frame(fx_peer_input(f), &env, big, 5000, true);
	assert_int_equal(evbuffer_get_length(fx_peer_input(f)), 0);
	assert_int_equal(weft_codec_get_stats(f->ch, "env", &st), 0);
	assert_int_equal(st.msgs_out, 2);
	assert_int_equal(st.bytes_out, 5004);
	evbuffer_free(pb);
	fx_free(f);
}

/* ---- Round trip over an in-process pair -------------------------------- */

struct side {
	weft_frame_codec_opts fo;
	struct rec *r;
};

static int
side_init(weft_channel *ch, void *arg)
{
	struct side *s = arg;
	int rv;

	if ((rv = weft_frame_codec_add(ch, "frame", &s->fo)) != 0 ||
	    (rv = weft_envelope_codec_add(ch, "env", NULL)) != 0)
		return rv;
	return s->r == NULL
	           ? 0
	           : weft_pipeline_add_last(ch, "rec", &rec_handler, s->r);
}

static bool
got_all(void *arg)
{
	struct rec *r = arg;

	return r->n >= 10 || r->errors > 0;
}

static bool
ended(void *arg)
{
	return ((struct rec *)arg)->inactive;
}

static void
round_trip(bool crc, bool emit_bytes)
{
	static const size_t lens[] = {0,    1,     100,    4096,    4097,
	                              5000, 70000, 100000, 1 << 20, 7};
	static unsigned char payload[(1 << 20) + 16];
	struct evbuffer *pb = evbuffer_new();
	struct rec r = {.keep = true};
	struct side a = {{.crc32c = crc}, NULL},
	            b = {{.crc32c = crc, .emit_bytes = emit_bytes}, &r};
	weft_channel *ca, *cb;
	weft_envelope env;
	weft_loop *loop;
	size_t i, k, large = 0;

	for (k = 0; k < sizeof(payload); k++)
		payload[k] = (unsigned char)(k * 31 + 7);
	assert_int_equal(weft_loop_new(&loop), 0);
	assert_int_equal(weft_inproc_pair(loop, NULL, side_init, &a, side_init,
	                                  &b, &ca, &cb),
	                 0);
	for (i = 0; i < 10; i++) {
		env = (weft_envelope){.id = i << 40 | i,
		                      .verb = (uint32_t)(i * 1000),
		                      .flags = i % 2 ? WEFT_ENVELOPE_ONEWAY
		                                     : WEFT_ENVELOPE_REQUEST,
		                      .created_ms = 1700000000000ull + i,
		                      .expires_ms = i * 3};
		/* Odd ones carry their payload in an evbuffer. */
		if (i % 2) {
			evbuffer_add(pb, payload + i, lens[i]);
			env.payload_buf = pb;
		} else {
			env.payload = payload + i;
			env.payload_len = lens[i];
		}
		assert_int_equal(weft_channel_write_msg(ca, &weft_msg_envelope,
		                                        &env, NULL, NULL),
		                 0);
		assert_int_equal(evbuffer_get_length(pb), 0);
		/* Frames of more than 4096 bytes come in an evbuffer. */
		large += HDR + lens[i] > 4096;
	}
	assert_int_equal(weft_loop_run_until(loop, got_all, &r, 10000), 0);
	assert_int_equal(r.errors, 0);
	assert_int_equal(r.n, 10);
	assert_int_equal(r.as_buf, large);
	for (i = 0; i < 10; i++) {
		assert_int_equal(r.env[i].id, i << 40 | i);
		assert_int_equal(r.env[i].verb, i * 1000);
		assert_int_equal(r.env[i].flags, i % 2 ? WEFT_ENVELOPE_ONEWAY
		                                       : WEFT_ENVELOPE_REQUEST);
		assert_int_equal(r.env[i].created_ms, 1700000000000ull + i);
		assert_int_equal(r.env[i].expires_ms, i * 3);
		assert_int_equal(r.env[i].payload_len, lens[i]);
		if (lens[i] > 0)
			assert_memory_equal(r.payload[i], payload + i, lens[i]);
	}
	rec_clear(&r);
	weft_channel_close(ca);
	assert_int_equal(weft_loop_run_until(loop, ended, &r, 5000), 0);
	evbuffer_free(pb);
	weft_loop_free(loop);
}

static void
test_round_trip_over_an_inproc_pair(void **state)
{
	(void)state;
	round_trip(false, false);
	round_trip(true, false);
	round_trip(true, true);
	round_trip(false, true);
}

/* ---- No allocation per small message ----------------------------------- */

static bool
got_1000(void *arg)
{
	return ((struct rec *)arg)->count >= 1000;
}

static void
test_small_envelopes_allocate_nothing_per_message(void **state)
{
	static unsigned char stream[1000 * (4 + HDR + 20 + 4)];
	weft_frame_codec_opts fo = {.crc32c = true, .emit_bytes = true};
	weft_envelope env = doc_request_env;
	struct evbuffer *enc = evbuffer_new();
	struct rec r = {.keep = false};
	size_t i, n, calls;
	fx *f = codec_fixture(&fo, NULL, &r);

	(void)state;
	alloc_count_setup();
	env.payload = "twenty bytes payload";
	env.payload_len = 20;
	for (i = 0; i < 1000; i++) {
		env.id = i;
		assert_int_equal(weft_envelope_encode_frame(enc, &env, &fo), 0);
	}
	n = evbuffer_get_length(enc);
	assert_int_equal(n, sizeof(stream));
	evbuffer_remove(enc, stream, n);
	/* Inbound: decoded in place. */
	assert_int_equal(bufferevent_write(f->peer, stream, n), 0);
	alloc_count_start();
	assert_int_equal(weft_loop_run_until(f->loop, got_1000, &r, 5000), 0);
	alloc_count_stop();
	calls = alloc_calls;
	print_message("1000 envelopes in: %zu allocations\n", calls);
	assert_true(calls < 20);
	assert_int_equal(r.bytes, 20000);
	/* Outbound: built on the stack, copied once into the channel's
	 * output (which grows a chain at a time). */
	alloc_count_start();
	for (i = 0; i < 1000; i++)
		weft_ctx_write(weft_pipeline_get(f->ch, "rec"),
		               &weft_msg_envelope, &env, NULL, NULL);
	alloc_count_stop();
	calls = alloc_calls;
	print_message("1000 envelopes out: %zu allocations\n", calls);
	assert_true(calls < 100);
	evbuffer_free(enc);
	fx_free(f);
}

/* ---- Version 2 --------------------------------------------------------- */

/* docs/PROTOCOL.md 4.5: the request with params {3: 5, 256: "x"}. */
static const unsigned char doc_request_v2[] = {
    0x00, 0x00, 0x00, 0x33, 0x97, 0xcf, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
    0x00, 0x05, 0xce, 0x00, 0x00, 0x00, 0x10, 0x11, 0xcf, 0x00, 0x00, 0x01,
    0x8b, 0xcf, 0xe5, 0x68, 0x00, 0xcf, 0x00, 0x00, 0x01, 0x8b, 0xcf, 0xe5,
    0x7b, 0x88, 0xc6, 0x00, 0x00, 0x00, 0x04, 0x70, 0x69, 0x6e, 0x67, 0x82,
    0x03, 0x05, 0xcd, 0x01, 0x00, 0xa1, 0x78, 0x33, 0x90, 0xc0, 0x27};

/* docs/PROTOCOL.md 4.6: the cancel of that request. */
static const unsigned char doc_cancel[] = {
    0x00, 0x00, 0x00, 0x27, 0x96, 0xcf, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
    0x00, 0x05, 0xce, 0x00, 0x00, 0x00, 0x10, 0x20, 0xcf, 0x00, 0x00, 0x01,
    0x8b, 0xcf, 0xe5, 0x68, 0x03, 0xcf, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0xc6, 0x00, 0x00, 0x00, 0x00, 0xa5, 0xe4, 0xa4, 0x7d};

static const unsigned char doc_params[] = {0x82, 0x03, 0x05, 0xcd,
                                           0x01, 0x00, 0xa1, 0x78};

/* Encodes env as a frame with CRC and checks it against doc. */
static void
check_encodes_to(const weft_envelope *env, const unsigned char *doc, size_t n)
{
	weft_frame_codec_opts crc = {.crc32c = true};
	struct evbuffer *out = evbuffer_new();
	unsigned char got[64];

	check_doc_frame(doc, n);
	assert_true(n <= sizeof(got));
	assert_int_equal(weft_envelope_encode_frame(out, env, &crc), 0);
	assert_int_equal(evbuffer_get_length(out), n);
	evbuffer_remove(out, got, n);
	assert_memory_equal(got, doc, n);
	assert_int_equal(WEFT_ENVELOPE_FRAME_BYTES(env->payload_len, true) +
	                     env->params_len,
	                 n);
	assert_int_equal(weft_envelope_put_frame(got, env, true), n);
	assert_memory_equal(got, doc, n);
	evbuffer_free(out);
}

static void
test_documented_v2_forms_byte_for_byte(void **state)
{
	weft_envelope req = doc_request_env, cancel = doc_request_env, e;
	const void *v;
	size_t vlen;

	(void)state;
	req.params = doc_params;
	req.params_len = sizeof(doc_params);
	check_encodes_to(&req, doc_request_v2, sizeof(doc_request_v2));
	cancel.flags = WEFT_ENVELOPE_CANCEL;
	cancel.created_ms = 1700000000003ull;
	cancel.expires_ms = 0;
	cancel.payload = NULL;
	cancel.payload_len = 0;
	check_encodes_to(&cancel, doc_cancel, sizeof(doc_cancel));

	assert_int_equal(weft_envelope_decode_version(
	                     doc_request_v2 + 4, sizeof(doc_request_v2) - 8,
	                     WEFT_ENVELOPE_V2, &e),
	                 0);
	assert_int_equal(e.flags, WEFT_ENVELOPE_REQUEST | WEFT_ENVELOPE_PARAMS);
	assert_int_equal(e.payload_len, 4);
	assert_memory_equal(e.payload, "ping", 4);
	assert_int_equal(e.params_len, sizeof(doc_params));
	assert_memory_equal(e.params, doc_params, sizeof(doc_params));
	assert_int_equal(weft_envelope_param_find(e.params, e.params_len,
	                                          WEFT_PARAM_PRIORITY, &v,
	                                          &vlen),
	                 0);
	assert_int_equal(vlen, 1);
	assert_int_equal(*(const unsigned char *)v, 5);
	assert_int_equal(
	    weft_envelope_param_find(e.params, e.params_len, 256, &v, &vlen),
	    0);
	assert_int_equal(vlen, 2);
	assert_int_equal(weft_envelope_param_find(e.params, e.params_len,
	                                          WEFT_PARAM_TRACEPARENT, &v,
	                                          &vlen),
	                 WEFT_ENOTFOUND);
	assert_int_equal(weft_envelope_decode_version(doc_cancel + 4,
	                                              sizeof(doc_cancel) - 8,
	                                              WEFT_ENVELOPE_V2, &e),
	                 0);
	assert_int_equal(e.flags, WEFT_ENVELOPE_CANCEL);
	assert_int_equal(e.params_len, 0);
	assert_null(e.params);
	/* Version 1 knows neither form. */
	assert_int_equal(weft_envelope_decode(doc_request_v2 + 4,
	                                      sizeof(doc_request_v2) - 8, &e),
	                 WEFT_EPROTO);
	assert_int_equal(
	    weft_envelope_decode(doc_cancel + 4, sizeof(doc_cancel) - 8, &e),
	    WEFT_EPROTO);
}

/* A version 2 body: the documented request's fields with params p (n
 * bytes) after "ping", as an array of `elements` with flags. */
static size_t
v2_body(unsigned char *out, int elements, uint32_t flags,
        const unsigned char *p, size_t n)
{
	memcpy(out, doc_request_v2 + 4, HDR + 4);
	out[0] = (unsigned char)(0x90 | elements);
	out[15] = (unsigned char)flags;
	if (n > 0)
		memcpy(out + HDR + 4, p, n);
	return HDR + 4 + n;
}

struct bad_params {
	const char *what;
	const unsigned char *p;
	size_t n;
};

static void
test_params_are_checked_as_the_protocol_says(void **state)
{
	static unsigned char big[WEFT_ENVELOPE_PARAMS_MAX + 1];
	static unsigned char many[3 + 2 * 17] = {0xde, 0x00, 17};
	static const unsigned char tp25[] = {0x81, 0x01, 0xc4, 25};
	static const struct bad_params bad[] = {
	    {"truncated", (const unsigned char *)"\x82\x03\x05\xcd\x01", 5},
	    {"cut value", (const unsigned char *)"\x81\x09\xa3xy", 5},
	    {"not a map", (const unsigned char *)"\x91\x03", 2},
	    {"duplicate key", (const unsigned char *)"\x82\x03\x01\x03\x02", 5},
	    {"string key", (const unsigned char *)"\x81\xa1k\x01", 4},
	    {"negative key", (const unsigned char *)"\x81\xff\x01", 3},
	    {"key too large",
	     (const unsigned char *)"\x81\xce\x00\x01\x00\x00\x01", 7},
	    {"priority a string", (const unsigned char *)"\x81\x03\xa1x", 4},
	    {"priority above 255",
	     (const unsigned char *)"\x81\x03\xcd\x01\x00", 5},
	    {"stage times not an array", (const unsigned char *)"\x81\x02\x05",
	     3},
	    {"a stage time negative",
	     (const unsigned char *)"\x81\x02\x92\x01\xff", 5},
	    {"nine stage times",
	     (const unsigned char *)"\x81\x02\x99\x00\x00\x00\x00\x00\x00\x00"
	                            "\x00\x00",
	     12},
	    {"traceparent of 25", tp25, sizeof(tp25)},
	    {"bytes after the map", (const unsigned char *)"\x80\x00", 2},
	    {"too many keys", many, sizeof(many)},
	    {"too large", big, sizeof(big)},
	};
	static const unsigned char good[] = {
	    0x84, 0x02, 0x92, 0x00, 0xcf, 0, 0, 0, 0, 0, 0, 0, 1, /* stages */
	    0x07, 0x81, 0x01, 0x91, 0xc0, /* unknown: {1: [nil]} */
	    0xcd, 0xff, 0xff, 0xc3,       /* unknown 65535: true */
	    0x03, 0xcc, 0xff,             /* priority 255 */
	};
	unsigned char body[HDR + 4 + sizeof(big)];
	weft_envelope e;
	const char *why;
	size_t i, n;

	(void)state;
	/* A bin 16 of the rest: a well-formed map, one byte too large. */
	big[0] = 0x81;
	big[1] = 0x09;
	big[2] = 0xc5;
	big[3] = (unsigned char)((sizeof(big) - 5) >> 8);
	big[4] = (unsigned char)(sizeof(big) - 5);
	for (i = 0; i < 17; i++)
		many[3 + 2 * i] = (unsigned char)(10 + i);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		why = NULL;
		assert_int_equal(
		    weft_envelope_params_check(bad[i].p, bad[i].n, &why),
		    WEFT_EPROTO);
		assert_non_null(why);
		n = v2_body(body, 7, 0x11, bad[i].p, bad[i].n);
		if (weft_envelope_decode_version(body, n, WEFT_ENVELOPE_V2,
		                                 &e) != WEFT_EPROTO)
			fail_msg("accepted params: %s", bad[i].what);
	}
	assert_int_equal(weft_envelope_params_check(good, sizeof(good), NULL),
	                 0);
	n = v2_body(body, 7, 0x11, good, sizeof(good));
	assert_int_equal(
	    weft_envelope_decode_version(body, n, WEFT_ENVELOPE_V2, &e), 0);
	assert_int_equal(e.params_len, sizeof(good));
	assert_int_equal(weft_envelope_params_check("\x80", 1, NULL), 0);
	/* The flag and the element count must agree. */
	n = v2_body(body, 7, 0x01, good, sizeof(good));
	assert_int_equal(
	    weft_envelope_decode_version(body, n, WEFT_ENVELOPE_V2, &e),
	    WEFT_EPROTO);
	n = v2_body(body, 6, 0x11, NULL, 0);
	assert_int_equal(
	    weft_envelope_decode_version(body, n, WEFT_ENVELOPE_V2, &e),
	    WEFT_EPROTO);
	n = v2_body(body, 7, 0x11, NULL, 0);
	assert_int_equal(
	    weft_envelope_decode_version(body, n, WEFT_ENVELOPE_V2, &e),
	    WEFT_EPROTO);
	/* In version 1 bit 4 is reserved, and ignored. */
	assert_int_equal(
	    weft_envelope_decode_version(body, n, WEFT_ENVELOPE_V1, &e),
	    WEFT_EPROTO);
	n = v2_body(body, 6, 0x11, NULL, 0);
	assert_int_equal(
	    weft_envelope_decode_version(body, n, WEFT_ENVELOPE_V1, &e), 0);
	/* A cancel is a kind alone. */
	n = v2_body(body, 6, 0x21, NULL, 0);
	assert_int_equal(
	    weft_envelope_decode_version(body, n, WEFT_ENVELOPE_V2, &e),
	    WEFT_EPROTO);
	assert_int_equal(
	    weft_envelope_decode_version(body, n, WEFT_ENVELOPE_V1, &e), 0);
}

/* A version 2 codec reads and writes params and cancels, small and
 * large; a version 1 codec refuses to write either. */
static void
test_codec_versions(void **state)
{
	weft_envelope_codec_opts v2 = {.version = WEFT_ENVELOPE_V2};
	weft_frame_codec_opts fo = {.crc32c = true};
	static unsigned char big[6000];
	weft_envelope env = doc_request_env;
	struct rec r = {.keep = true};
	fx *f = codec_fixture(&fo, &v2, &r);

	(void)state;
	fx_send(f, doc_request_v2, sizeof(doc_request_v2));
	fx_send(f, doc_cancel, sizeof(doc_cancel));
	assert_int_equal(r.n, 2);
	assert_int_equal(r.env[0].params_len, sizeof(doc_params));
	assert_memory_equal(r.env[0].params, doc_params, sizeof(doc_params));
	assert_memory_equal(r.payload[0], "ping", 4);
	assert_int_equal(r.env[1].flags, WEFT_ENVELOPE_CANCEL);
	/* Written and read back, the large one through its evbuffer. */
	env.params = doc_params;
	env.params_len = sizeof(doc_params);
	assert_int_equal(weft_channel_write_msg(f->ch, &weft_msg_envelope, &env,
	                                        fx_write_cb, f),
	                 0);
	memset(big, 0x5a, sizeof(big));
	env.payload = big;
	env.payload_len = sizeof(big);
	assert_int_equal(weft_channel_write_msg(f->ch, &weft_msg_envelope, &env,
	                                        fx_write_cb, f),
	                 0);
	fx_run_until_write_cbs(f, 2);
	assert_int_equal(f->write_status, 0);
	fx_run_until_peer_has(f, sizeof(doc_request_v2) + 8 + HDR +
	                             sizeof(big) + sizeof(doc_params));
	{
		size_t n = evbuffer_get_length(fx_peer_input(f));
		unsigned char *all = malloc(n);

		evbuffer_remove(fx_peer_input(f), all, n);
		assert_memory_equal(all, doc_request_v2,
		                    sizeof(doc_request_v2));
		fx_send(f, all, n);
		free(all);
	}
	assert_int_equal(r.n, 4);
	assert_int_equal(r.env[3].payload_len, sizeof(big));
	assert_int_equal(r.as_buf, 1);
	assert_memory_equal(r.payload[3], big, sizeof(big));
	assert_int_equal(r.env[3].params_len, sizeof(doc_params));
	assert_memory_equal(r.env[3].params, doc_params, sizeof(doc_params));
	assert_int_equal(r.errors, 0);
	rec_clear(&r);
	fx_free(f);

	/* Version 1: nothing of version 2 leaves, and its forms are
	 * malformed. */
	f = codec_fixture(&fo, NULL, &r);
	env = doc_request_env;
	env.params = doc_params;
	env.params_len = sizeof(doc_params);
	assert_int_equal(weft_channel_write_msg(f->ch, &weft_msg_envelope, &env,
	                                        fx_write_cb, f),
	                 0);
	fx_run_until_write_cbs(f, 1);
	assert_int_equal(f->write_status, WEFT_ENOTSUP);
	env = doc_request_env;
	env.flags = WEFT_ENVELOPE_CANCEL;
	assert_int_equal(weft_channel_write_msg(f->ch, &weft_msg_envelope, &env,
	                                        fx_write_cb, f),
	                 0);
	fx_run_until_write_cbs(f, 2);
	assert_int_equal(f->write_status, WEFT_ENOTSUP);
	assert_int_equal(evbuffer_get_length(fx_peer_input(f)), 0);
	fx_send(f, doc_cancel, sizeof(doc_cancel));
	assert_int_equal(r.n, 0);
	assert_int_equal(r.last_error, WEFT_EPROTO);
	fx_run_until_inactive(f);
	rec_clear(&r);
	fx_free(f);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_documented_request_is_encoded_byte_for_byte),
	    cmocka_unit_test(test_documented_examples_decode),
	    cmocka_unit_test(test_every_valid_encoding_decodes_the_same),
	    cmocka_unit_test(
	        test_fixed_layout_with_the_wrong_length_is_refused),
	    cmocka_unit_test(test_kinds_are_validated_as_the_protocol_says),
	    cmocka_unit_test(
	        test_values_out_of_range_or_of_another_type_are_refused),
	    cmocka_unit_test(
	        test_truncation_at_every_byte_and_trailing_bytes_are_refused),
	    cmocka_unit_test(test_frames_are_written_whole),
	    cmocka_unit_test(test_frames_put_in_place_match_the_encoded_ones),
	    cmocka_unit_test(test_frames_outside_the_limits_are_refused),
	    cmocka_unit_test(test_codec_decodes_the_documented_frames),
	    cmocka_unit_test(test_malformed_envelope_fails_the_channel),
	    cmocka_unit_test(test_quiet_codec_fails_without_logging),
	    cmocka_unit_test(test_payload_above_the_limit_fails_the_channel),
	    cmocka_unit_test(test_writes_become_frames_and_refused_ones_fail),
	    cmocka_unit_test(test_round_trip_over_an_inproc_pair),
	    cmocka_unit_test(test_small_envelopes_allocate_nothing_per_message),
	    cmocka_unit_test(test_documented_v2_forms_byte_for_byte),
	    cmocka_unit_test(test_params_are_checked_as_the_protocol_says),
	    cmocka_unit_test(test_codec_versions),
	};

	fx_log_capture();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
