/* SPDX-License-Identifier: MIT */
/* ports.c: loopback ports for test servers that must know theirs before
 * they start (see ports.h). */
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <weft/core.h>

#include "ports.h"

/*
 * The lowest port the kernel hands out for outgoing connections: a port
 * picked below it cannot be taken by another test's connect() between the
 * pick and the node's bind, as one from the ephemeral range can.
 */
static unsigned
ephemeral_low(void)
{
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	unsigned low = 32768, high;

	if (f != NULL) {
		if (fscanf(f, "%u %u", &low, &high) != 2)
			low = 32768;
		fclose(f);
	}
	return low;
}

/* bindable tells whether 127.0.0.1:port is free now. */
static bool
bindable(uint16_t port)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	bool ok;

	assert_true(fd >= 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons(port);
	ok = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

/* GLOBAL (test): the ports handed out lately. A test picks all of a
 * cluster's ports before it starts any node, so a port still free when it
 * was picked twice would reach two nodes (the second failing with
 * "address in use"). */
#define RECENT_PORTS 64
static uint16_t recent[RECENT_PORTS];
static unsigned nrecent;

static bool
handed_out(uint16_t port)
{
	for (unsigned i = 0; i < RECENT_PORTS; i++)
		if (recent[i] == port)
			return true;
	return false;
}

uint16_t
weft_test_free_port(void)
{
	static unsigned seed;
	unsigned low = ephemeral_low(), span, i;
	uint16_t port;

	if (seed == 0)
		seed = (unsigned)getpid() ^ (unsigned)weft_now_ns();
	/* Up to 12000 ports below the ephemeral range, above 1024. */
	span = low > 13024 ? 12000 : (low > 2048 ? low - 1025 : 0);
	for (i = 0; span > 0 && i < 1000; i++) {
		port = (uint16_t)(low - 1 - (unsigned)rand_r(&seed) % span);
		if (!handed_out(port) && bindable(port)) {
			recent[nrecent++ % RECENT_PORTS] = port;
			return port;
		}
	}
	fail_msg("no free port below %u", low);
	return 0;
}
