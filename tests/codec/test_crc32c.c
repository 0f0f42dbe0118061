/* SPDX-License-Identifier: MIT */
/* test_crc32c.c: CRC-32C against published vectors, both engines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include <weft/crc32c.h>

#include "codec_int.h"

static void
test_check_value(void **state)
{
	(void)state;
	assert_int_equal(weft_crc32c(0, "123456789", 9), 0xE3069283u);
	assert_int_equal(weft_crc32c(0, "", 0), 0);
	assert_int_equal(weft_crc32c(0, NULL, 0), 0);
}

/* The iSCSI test vectors of RFC 3720, appendix B.4. */
static void
test_rfc3720_vectors(void **state)
{
	unsigned char buf[32];
	int i;

	(void)state;
	memset(buf, 0, sizeof(buf));
	assert_int_equal(weft_crc32c(0, buf, 32), 0x8A9136AAu);
	memset(buf, 0xff, sizeof(buf));
	assert_int_equal(weft_crc32c(0, buf, 32), 0x62A8AB43u);
	for (i = 0; i < 32; i++)
		buf[i] = (unsigned char)i;
	assert_int_equal(weft_crc32c(0, buf, 32), 0x46DD794Eu);
	for (i = 0; i < 32; i++)
		buf[i] = (unsigned char)(31 - i);
	assert_int_equal(weft_crc32c(0, buf, 32), 0x113FDB5Cu);
}

static void
test_pieces_equal_whole(void **state)
{
	unsigned char buf[1000];
	uint32_t whole, crc;
	size_t i, cut;

	(void)state;
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 131 + 7);
	whole = weft_crc32c(0, buf, sizeof(buf));
	for (cut = 0; cut <= sizeof(buf); cut += 37) {
		crc = weft_crc32c(0, buf, cut);
		crc = weft_crc32c(crc, buf + cut, sizeof(buf) - cut);
		assert_int_equal(crc, whole);
	}
}

/* Both engines agree at every length and alignment. */
static void
test_engines_agree(void **state)
{
	unsigned char buf[300];
	size_t i, off, len;

	(void)state;
	if (!weft__crc32c_hw_available())
		skip();
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 77 + 3);
	for (off = 0; off < 8; off++)
		for (len = 0; len + off <= 260; len++)
			assert_int_equal(
			    weft__crc32c_hw(~0u, buf + off, len),
			    weft__crc32c_table(~0u, buf + off, len));
	assert_int_equal(~weft__crc32c_table(~0u, "123456789", 9), 0xE3069283u);
}

/* Long buffers take three streams at once: around every block edge. */
static void
test_long_buffers_agree(void **state)
{
	static unsigned char buf[20000];
	static const size_t lens[] = {3071, 3072, 3073, 3080,  4095, 6143,
	                              6144, 6145, 9216, 12345, 19990};
	size_t i, off;

	(void)state;
	if (!weft__crc32c_hw_available())
		skip();
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 2654435761u >> 13);
	for (i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		for (off = 0; off < 9; off += 4)
			assert_int_equal(
			    weft__crc32c_hw(0x12345678u, buf + off, lens[i]),
			    weft__crc32c_table(0x12345678u, buf + off,
			                       lens[i]));
	assert_int_equal(weft_crc32c(0, buf, 12345),
	                 ~weft__crc32c_table(~0u, buf, 12345));
}

static void
test_evbuffer_across_chains(void **state)
{
	struct evbuffer *b = evbuffer_new(), *part = evbuffer_new();
	unsigned char buf[5000];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (unsigned char)(i * 13);
	/* Many chains: add pieces through a buffer whose chains move. */
	for (i = 0; i < sizeof(buf); i += 100) {
		evbuffer_add(part, buf + i, 100);
		evbuffer_add_buffer(b, part);
	}
	assert_true(evbuffer_peek(b, -1, NULL, NULL, 0) > 16);
	assert_int_equal(weft__crc32c_evbuffer(0, b, sizeof(buf)),
	                 weft_crc32c(0, buf, sizeof(buf)));
	assert_int_equal(weft__crc32c_evbuffer(0, b, 1234),
	                 weft_crc32c(0, buf, 1234));
	evbuffer_free(b);
	evbuffer_free(part);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_check_value),
	    cmocka_unit_test(test_rfc3720_vectors),
	    cmocka_unit_test(test_pieces_equal_whole),
	    cmocka_unit_test(test_engines_agree),
	    cmocka_unit_test(test_long_buffers_agree),
	    cmocka_unit_test(test_evbuffer_across_chains),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
