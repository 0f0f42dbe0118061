/* SPDX-License-Identifier: MIT */
/* socket_pipe.c: see socket_pipe.h. */
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "socket_pipe.h"

#define WAIT_MS 5000

void
fuzz_pipe_open(fuzz_pipe *p, void *arg)
{
	int fds[2];

	*p = (fuzz_pipe){.fd = -1, .peer = -1};
	if (weft_loop_new(&p->loop) != 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) != 0 ||
	    weft_channel_new_socket(p->loop, fds[0], NULL, &p->ch) != 0)
		abort();
	p->fd = fds[0];
	p->peer = fds[1];
	weft_channel_set_data(p->ch, arg);
}

/* Drops what the channel echoed, so that its writes never back up. */
static void
drain_peer(fuzz_pipe *p)
{
	char buf[4096];

	while (recv(p->peer, buf, sizeof(buf), MSG_DONTWAIT) > 0)
		;
}

/* The channel has read every byte sent so far (or is gone). */
static bool
settled(void *arg)
{
	fuzz_pipe *p = arg;
	int unread = 0;

	drain_peer(p);
	return p->inactive || ioctl(p->fd, FIONREAD, &unread) != 0 ||
	       unread == 0;
}

static bool
is_inactive(void *arg)
{
	fuzz_pipe *p = arg;

	drain_peer(p);
	return p->inactive;
}

static size_t
piece_size(unsigned mode, uint32_t *rng, size_t left)
{
	size_t n;

	*rng = *rng * 1103515245u + 12345u;
	switch (mode & 3) {
	case 0:
		n = left;
		break;
	case 1:
		n = 1;
		break;
	case 2:
		n = 1 + (*rng >> 16) % 7;
		break;
	default:
		n = 1 + (*rng >> 16) % 61;
		break;
	}
	return n < left ? n : left;
}

void
fuzz_pipe_send(fuzz_pipe *p, unsigned mode, uint32_t *rng, const void *data,
               size_t len)
{
	const uint8_t *at = data;
	ssize_t sent;

	while (len > 0 && !p->inactive) {
		sent =
		    send(p->peer, at, piece_size(mode, rng, len), MSG_NOSIGNAL);
		if (sent <= 0)
			return; /* the channel closed its end */
		if (weft_loop_run_until(p->loop, settled, p, WAIT_MS) != 0)
			fuzz_fail("the pipeline hangs");
		at += sent;
		len -= (size_t)sent;
	}
}

void
fuzz_pipe_finish(fuzz_pipe *p, size_t bound, const char *what)
{
	shutdown(p->peer, SHUT_WR);
	if (weft_loop_run_until(p->loop, is_inactive, p, WAIT_MS) != 0)
		fuzz_fail("the channel did not end after the input");
	fuzz_alloc_end_within(bound, what);
	close(p->peer);
	weft_loop_free(p->loop);
}
