/* SPDX-License-Identifier: MIT */
/* random.c: a loop's pool of random bits, for request ids and trace ids. */
#include <sys/random.h>

#include "msvc_int.h"

/*
 * 32 unpredictable bits for a request id, from a pool refilled with
 * getrandom (one system call per 256 requests). Should the kernel refuse,
 * a splitmix64 step over the monotonic clock keeps ids unique, if not
 * secret; that is logged once.
 */
uint32_t
weft__msvc_random32(struct weft__msvc_loop *ml)
{
	static const size_t want = sizeof(ml->random);
	uint64_t z;

	if (ml->random_left == 0) {
		if (getrandom(ml->random, want, GRND_NONBLOCK) ==
		    (ssize_t)want) {
			ml->random_left = want / sizeof(ml->random[0]);
		} else {
			if (ml->random[0] == 0 && ml->random[1] == 0)
				weft_warn("msvc %s: no random bits from the "
				          "kernel; request ids are guessable",
				          ml->svc->id);
			z = weft_now_ns() + 0x9e3779b97f4a7c15ull;
			z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
			z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
			ml->random[1] = 1;
			return (uint32_t)(z ^ (z >> 31));
		}
	}
	return ml->random[--ml->random_left];
}
