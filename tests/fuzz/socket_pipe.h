/* SPDX-License-Identifier: MIT */
/*
 * socket_pipe.h: a channel over one end of a Unix socket pair, read as a
 * TCP channel reads; the fuzz target writes the other end, in pieces, and
 * drops what the channel writes back. The codec targets (fuzz_frame,
 * fuzz_chunk, fuzz_decompress) put their pipelines on it.
 */
#ifndef WEFT_TESTS_FUZZ_SOCKET_PIPE_H
#define WEFT_TESTS_FUZZ_SOCKET_PIPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <weft/transport.h>

/* What a socket channel holds whatever it reads: a read chain and a
 * write batch (libevent rounds each 16 KiB request up to a 32 KiB chain),
 * and the chain an echo's small writes are gathered in. */
#define FUZZ_CHANNEL_BUFFERS (3u * 32768)

typedef struct fuzz_pipe {
	weft_loop *loop;
	weft_channel *ch;
	int fd;        /* the channel's end */
	int peer;      /* the target's */
	bool inactive; /* set by the target's inactive handler */
} fuzz_pipe;

/* fuzz_pipe_open makes the loop, the socket pair and the channel (not yet
 * active), whose data is arg. Aborts if it cannot. */
void fuzz_pipe_open(fuzz_pipe *p, void *arg);

/*
 * fuzz_pipe_send writes the len bytes at data to the channel in pieces,
 * running the loop after each until the channel has read it all (or
 * ended); fails the run if the pipeline hangs. mode picks the pieces'
 * sizes: 0 whole, 1 one byte, 2 up to 7 bytes, 3 up to 61, drawn from
 * *rng (a linear congruential generator, so a given input always makes
 * the same pieces).
 */
void fuzz_pipe_send(fuzz_pipe *p, unsigned mode, uint32_t *rng,
                    const void *data, size_t len);

/* fuzz_pipe_finish shuts the target's side, runs the loop until the
 * channel is inactive (fails the run if it never is), ends the memory
 * watch begun by the target with bound bytes (fuzz_alloc_end_within),
 * and frees everything. */
void fuzz_pipe_finish(fuzz_pipe *p, size_t bound, const char *what);

#endif
