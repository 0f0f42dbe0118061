/* SPDX-License-Identifier: MIT */
/* wire.c: raw wire bytes (see wire.h). */
#include <weft/crc32c.h>

#include "wire.h"

size_t
weft_test_put_be(uint8_t *p, uint64_t v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
	return n;
}

void
weft_test_put_be32(uint8_t *p, uint32_t v)
{
	weft_test_put_be(p, v, 4);
}

void
weft_test_put_be64(uint8_t *p, uint64_t v)
{
	weft_test_put_be(p, v, 8);
}

uint32_t
weft_test_get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | p[3];
}

uint8_t
weft_test_frame_byte(size_t i, size_t j)
{
	return (uint8_t)(i * 31 + j * 7 + 1);
}

size_t
weft_test_put_frame(uint8_t *buf, size_t i, size_t len, bool crc)
{
	size_t j;

	weft_test_put_be32(buf, (uint32_t)len);
	for (j = 0; j < len; j++)
		buf[4 + j] = weft_test_frame_byte(i, j);
	if (!crc)
		return 4 + len;
	weft_test_put_be32(buf + 4 + len, weft_crc32c(0, buf, 4 + len));
	return 8 + len;
}
