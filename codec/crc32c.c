/* SPDX-License-Identifier: MIT */
/*
 * crc32c.c: CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), with the
 * SSE4.2 crc32 instruction when the CPU has it (three streams at once, and
 * PCLMUL to join them, for long buffers) and a byte table otherwise.
 */
#include <stdint.h>
#include <string.h>

#include <event2/buffer.h>

#include <weft/crc32c.h>

#include "codec_int.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#include <wmmintrin.h>
#define HAVE_SSE42_PATH 1
#endif

/* table[i] is the CRC register after shifting byte i through it: for each
 * of 8 bits, shift right and xor the polynomial when the bit shifted out
 * was set. */
static const uint32_t table[256] = {
    0x00000000, 0xf26b8303, 0xe13b70f7, 0x1350f3f4, 0xc79a971f, 0x35f1141c,
    0x26a1e7e8, 0xd4ca64eb, 0x8ad958cf, 0x78b2dbcc, 0x6be22838, 0x9989ab3b,
    0x4d43cfd0, 0xbf284cd3, 0xac78bf27, 0x5e133c24, 0x105ec76f, 0xe235446c,
    0xf165b798, 0x030e349b, 0xd7c45070, 0x25afd373, 0x36ff2087, 0xc494a384,
    0x9a879fa0, 0x68ec1ca3, 0x7bbcef57, 0x89d76c54, 0x5d1d08bf, 0xaf768bbc,
    0xbc267848, 0x4e4dfb4b, 0x20bd8ede, 0xd2d60ddd, 0xc186fe29, 0x33ed7d2a,
    0xe72719c1, 0x154c9ac2, 0x061c6936, 0xf477ea35, 0xaa64d611, 0x580f5512,
    0x4b5fa6e6, 0xb93425e5, 0x6dfe410e, 0x9f95c20d, 0x8cc531f9, 0x7eaeb2fa,
    0x30e349b1, 0xc288cab2, 0xd1d83946, 0x23b3ba45, 0xf779deae, 0x05125dad,
    0x1642ae59, 0xe4292d5a, 0xba3a117e, 0x4851927d, 0x5b016189, 0xa96ae28a,
    0x7da08661, 0x8fcb0562, 0x9c9bf696, 0x6ef07595, 0x417b1dbc, 0xb3109ebf,
    0xa0406d4b, 0x522bee48, 0x86e18aa3, 0x748a09a0, 0x67dafa54, 0x95b17957,
    0xcba24573, 0x39c9c670, 0x2a993584, 0xd8f2b687, 0x0c38d26c, 0xfe53516f,
    0xed03a29b, 0x1f682198, 0x5125dad3, 0xa34e59d0, 0xb01eaa24, 0x42752927,
    0x96bf4dcc, 0x64d4cecf, 0x77843d3b, 0x85efbe38, 0xdbfc821c, 0x2997011f,
    0x3ac7f2eb, 0xc8ac71e8, 0x1c661503, 0xee0d9600, 0xfd5d65f4, 0x0f36e6f7,
    0x61c69362, 0x93ad1061, 0x80fde395, 0x72966096, 0xa65c047d, 0x5437877e,
    0x4767748a, 0xb50cf789, 0xeb1fcbad, 0x197448ae, 0x0a24bb5a, 0xf84f3859,
    0x2c855cb2, 0xdeeedfb1, 0xcdbe2c45, 0x3fd5af46, 0x7198540d, 0x83f3d70e,
    0x90a324fa, 0x62c8a7f9, 0xb602c312, 0x44694011, 0x5739b3e5, 0xa55230e6,
    0xfb410cc2, 0x092a8fc1, 0x1a7a7c35, 0xe811ff36, 0x3cdb9bdd, 0xceb018de,
    0xdde0eb2a, 0x2f8b6829, 0x82f63b78, 0x709db87b, 0x63cd4b8f, 0x91a6c88c,
    0x456cac67, 0xb7072f64, 0xa457dc90, 0x563c5f93, 0x082f63b7, 0xfa44e0b4,
    0xe9141340, 0x1b7f9043, 0xcfb5f4a8, 0x3dde77ab, 0x2e8e845f, 0xdce5075c,
    0x92a8fc17, 0x60c37f14, 0x73938ce0, 0x81f80fe3, 0x55326b08, 0xa759e80b,
    0xb4091bff, 0x466298fc, 0x1871a4d8, 0xea1a27db, 0xf94ad42f, 0x0b21572c,
    0xdfeb33c7, 0x2d80b0c4, 0x3ed04330, 0xccbbc033, 0xa24bb5a6, 0x502036a5,
    0x4370c551, 0xb11b4652, 0x65d122b9, 0x97baa1ba, 0x84ea524e, 0x7681d14d,
    0x2892ed69, 0xdaf96e6a, 0xc9a99d9e, 0x3bc21e9d, 0xef087a76, 0x1d63f975,
    0x0e330a81, 0xfc588982, 0xb21572c9, 0x407ef1ca, 0x532e023e, 0xa145813d,
    0x758fe5d6, 0x87e466d5, 0x94b49521, 0x66df1622, 0x38cc2a06, 0xcaa7a905,
    0xd9f75af1, 0x2b9cd9f2, 0xff56bd19, 0x0d3d3e1a, 0x1e6dcdee, 0xec064eed,
    0xc38d26c4, 0x31e6a5c7, 0x22b65633, 0xd0ddd530, 0x0417b1db, 0xf67c32d8,
    0xe52cc12c, 0x1747422f, 0x49547e0b, 0xbb3ffd08, 0xa86f0efc, 0x5a048dff,
    0x8ecee914, 0x7ca56a17, 0x6ff599e3, 0x9d9e1ae0, 0xd3d3e1ab, 0x21b862a8,
    0x32e8915c, 0xc083125f, 0x144976b4, 0xe622f5b7, 0xf5720643, 0x07198540,
    0x590ab964, 0xab613a67, 0xb831c993, 0x4a5a4a90, 0x9e902e7b, 0x6cfbad78,
    0x7fab5e8c, 0x8dc0dd8f, 0xe330a81a, 0x115b2b19, 0x020bd8ed, 0xf0605bee,
    0x24aa3f05, 0xd6c1bc06, 0xc5914ff2, 0x37faccf1, 0x69e9f0d5, 0x9b8273d6,
    0x88d28022, 0x7ab90321, 0xae7367ca, 0x5c18e4c9, 0x4f48173d, 0xbd23943e,
    0xf36e6f75, 0x0105ec76, 0x12551f82, 0xe03e9c81, 0x34f4f86a, 0xc69f7b69,
    0xd5cf889d, 0x27a40b9e, 0x79b737ba, 0x8bdcb4b9, 0x988c474d, 0x6ae7c44e,
    0xbe2da0a5, 0x4c4623a6, 0x5f16d052, 0xad7d5351,
};

uint32_t
weft__crc32c_table(uint32_t reg, const void *data, size_t len)
{
	const unsigned char *p = data;

	while (len-- > 0)
		reg = table[(reg ^ *p++) & 0xff] ^ (reg >> 8);
	return reg;
}

#ifdef HAVE_SSE42_PATH
/*
 * x86 loads need no alignment, so this steps 8 bytes at a time from the
 * start, then 4, 2 and 1. Aligning first would cost a short frame up to
 * seven single-byte steps of 3 cycles each, more than the rest of a
 * 64-byte frame takes.
 */
__attribute__((target("sse4.2"))) static uint32_t
crc_sse42(uint32_t reg, const unsigned char *p, size_t len)
{
	uint64_t reg64 = reg, word;
	uint32_t word32;
	uint16_t word16;

	for (; len >= 8; p += 8, len -= 8) {
		memcpy(&word, p, sizeof(word));
		reg64 = _mm_crc32_u64(reg64, word);
	}
	reg = (uint32_t)reg64;
	if (len & 4) {
		memcpy(&word32, p, sizeof(word32));
		reg = _mm_crc32_u32(reg, word32);
		p += 4;
	}
	if (len & 2) {
		memcpy(&word16, p, sizeof(word16));
		reg = _mm_crc32_u16(reg, word16);
		p += 2;
	}
	if (len & 1)
		reg = _mm_crc32_u8(reg, *p);
	return reg;
}

/*
 * The crc32 instruction takes 3 cycles but can start every cycle, so three
 * independent streams over three consecutive blocks go three times as fast.
 * The block CRCs are then joined: the CRC of A then B is the CRC of A
 * shifted over B's length, xor the CRC of B from a zero register. Shifting
 * r over n bytes multiplies it by x^(8n) mod P, which is one carry-less
 * multiply by K(n) = x^(8n-33) mod P (33: 32 for the crc32 instruction's
 * own shift, 1 for the bit-reflected product) and one crc32 to reduce.
 */
#define BLOCK 1024
#define K_BLOCK 0x170076fau   /* x^(8 * 1024 - 33) mod P, reflected */
#define K_2BLOCKS 0xa51b6135u /* x^(8 * 2048 - 33) mod P, reflected */

__attribute__((target("sse4.2,pclmul"))) static uint32_t
shift(uint64_t reg, uint32_t k)
{
	__m128i prod = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)reg),
	                                    _mm_cvtsi32_si128((int)k), 0);

	return (uint32_t)_mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(prod));
}

__attribute__((target("sse4.2,pclmul"))) static uint32_t
crc_sse42_3way(uint32_t reg, const unsigned char *p, size_t len)
{
	uint64_t a, b, c, word;
	const unsigned char *end;

	for (; len >= 3 * BLOCK; len -= 3 * BLOCK, p += 2 * BLOCK) {
		a = reg;
		b = c = 0;
		for (end = p + BLOCK; p < end; p += 8) {
			memcpy(&word, p, sizeof(word));
			a = _mm_crc32_u64(a, word);
			memcpy(&word, p + BLOCK, sizeof(word));
			b = _mm_crc32_u64(b, word);
			memcpy(&word, p + 2 * BLOCK, sizeof(word));
			c = _mm_crc32_u64(c, word);
		}
		reg = shift(a, K_2BLOCKS) ^ shift(b, K_BLOCK) ^ (uint32_t)c;
	}
	return crc_sse42(reg, p, len);
}

static bool
has_pclmul(void)
{
	return __builtin_cpu_supports("pclmul");
}

bool
weft__crc32c_hw_available(void)
{
	return __builtin_cpu_supports("sse4.2");
}

uint32_t
weft__crc32c_hw(uint32_t reg, const void *data, size_t len)
{
	if (len >= 3 * BLOCK && has_pclmul())
		return crc_sse42_3way(reg, data, len);
	return crc_sse42(reg, data, len);
}
#else
bool
weft__crc32c_hw_available(void)
{
	return false;
}

uint32_t
weft__crc32c_hw(uint32_t reg, const void *data, size_t len)
{
	return weft__crc32c_table(reg, data, len);
}
#endif

uint32_t
weft_crc32c(uint32_t crc, const void *data, size_t len)
{
	uint32_t reg = ~crc;

#ifdef HAVE_SSE42_PATH
	if (__builtin_cpu_supports("sse4.2"))
		return ~weft__crc32c_hw(reg, data, len);
#endif
	return ~weft__crc32c_table(reg, data, len);
}

uint32_t
weft__crc32c_evbuffer(uint32_t crc, struct evbuffer *buf, size_t len)
{
	struct evbuffer_iovec vec[16];
	struct evbuffer_ptr pos;
	size_t take, step;
	int i, n;

	if (evbuffer_ptr_set(buf, &pos, 0, EVBUFFER_PTR_SET) != 0)
		return crc;
	while (len > 0) {
		n = evbuffer_peek(buf, (ev_ssize_t)len, &pos, vec, 16);
		if (n <= 0)
			break;
		step = 0;
		for (i = 0; i < n && i < 16 && len > 0; i++) {
			take = vec[i].iov_len < len ? vec[i].iov_len : len;
			crc = weft_crc32c(crc, vec[i].iov_base, take);
			len -= take;
			step += take;
		}
		if (len > 0 &&
		    evbuffer_ptr_set(buf, &pos, step, EVBUFFER_PTR_ADD) != 0)
			break;
	}
	return crc;
}
