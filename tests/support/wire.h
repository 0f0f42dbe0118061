/* SPDX-License-Identifier: MIT */
/* wire.h: raw wire bytes written and read by hand, so that a test checks
 * the codecs against an encoding of its own: big-endian integers and
 * weft's length-prefixed frames (docs/PROTOCOL.md). */
#ifndef WEFT_TEST_WIRE_H
#define WEFT_TEST_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* weft_test_put_be writes the n low bytes of v at p, big-endian; returns
 * n. */
size_t weft_test_put_be(uint8_t *p, uint64_t v, size_t n);
void weft_test_put_be32(uint8_t *p, uint32_t v);
void weft_test_put_be64(uint8_t *p, uint64_t v);
uint32_t weft_test_get_be32(const uint8_t *p);

/* weft_test_frame_byte is byte j of test frame i's payload. */
uint8_t weft_test_frame_byte(size_t i, size_t j);
/* weft_test_put_frame writes frame i, len payload bytes of
 * weft_test_frame_byte behind a 4-byte length and, with crc, followed by
 * the CRC32C of both, at buf; returns its size (len + 4 or len + 8). */
size_t weft_test_put_frame(uint8_t *buf, size_t i, size_t len, bool crc);

#endif
