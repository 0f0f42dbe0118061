/* SPDX-License-Identifier: MIT */
/*
 * fuzz.h: what the fuzz targets share.
 *
 * A target is one LLVMFuzzerTestOneInput: deterministic (the same input
 * does the same things), with no state kept from one input to the next,
 * freeing everything it made. Built with -DWEFT_FUZZ=ON it is a libFuzzer
 * program; otherwise standalone.c gives it a main() that runs the files it
 * is given, so ctest replays the seed corpus in every build.
 *
 * Memory: fuzz_alloc_begin() notes how many heap bytes the process holds,
 * and fuzz_alloc_end(n) aborts if, at any moment since, it held more than
 * FUZZ_ALLOC_PER_BYTE * n + FUZZ_ALLOC_SLACK bytes above that: no input of
 * n bytes may make a decoder hold memory out of proportion to it. The
 * count covers every thread of the process (a service's loops too).
 *
 * Reading the input: a fuzz_input hands out bytes from the front; once it
 * is empty every read gives zeros, so any input is a complete script.
 */
#ifndef WEFT_TESTS_FUZZ_H
#define WEFT_TESTS_FUZZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_ALLOC_PER_BYTE 16u
#define FUZZ_ALLOC_SLACK (64u << 10)

/* fuzz_alloc_begin starts watching the heap. Not nested. */
void fuzz_alloc_begin(void);
/* fuzz_alloc_peak is the most bytes held above the start since then. */
size_t fuzz_alloc_peak(void);
/* fuzz_alloc_end stops watching and aborts (naming what) when the peak
 * was above FUZZ_ALLOC_PER_BYTE * n + FUZZ_ALLOC_SLACK. */
void fuzz_alloc_end(size_t n, const char *what);
/* fuzz_alloc_end_within is fuzz_alloc_end with a bound of bytes bytes,
 * for targets whose memory the configured limits bound, not the input. */
void fuzz_alloc_end_within(size_t bytes, const char *what);

/* fuzz_fail prints why and aborts: libFuzzer then keeps the input. */
_Noreturn void fuzz_fail(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

/* A cursor over the input. */
typedef struct fuzz_input {
	const uint8_t *p;
	size_t left;
} fuzz_input;

static inline fuzz_input
fuzz_input_of(const uint8_t *data, size_t size)
{
	return (fuzz_input){data, size};
}

static inline uint8_t
fuzz_u8(fuzz_input *in)
{
	if (in->left == 0)
		return 0;
	in->left--;
	return *in->p++;
}

static inline uint16_t
fuzz_u16(fuzz_input *in)
{
	return (uint16_t)(fuzz_u8(in) << 8 | fuzz_u8(in));
}

static inline uint32_t
fuzz_u32(fuzz_input *in)
{
	return (uint32_t)fuzz_u16(in) << 16 | fuzz_u16(in);
}

/* fuzz_bytes takes up to n bytes (fewer at the end); returns how many and
 * points *out at them. */
static inline size_t
fuzz_bytes(fuzz_input *in, size_t n, const uint8_t **out)
{
	if (n > in->left)
		n = in->left;
	*out = in->p;
	in->p += n;
	in->left -= n;
	return n;
}

#endif
