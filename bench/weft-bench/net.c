/* SPDX-License-Identifier: MIT */
/* net.c: plain blocking sockets for the raw reference and the set-up. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <weft/transport.h>

#include "wbench.h"

uint64_t
wbench_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t
wbench_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static struct addrinfo *
resolve(const char *addr, bool passive)
{
	struct addrinfo hints = {.ai_socktype = SOCK_STREAM};
	struct addrinfo *ai = NULL;
	char host[256], port[8];
	uint16_t port_num;
	int rv;

	if (passive)
		hints.ai_flags = AI_PASSIVE;
	if (weft_address_split(addr, host, sizeof(host), &port_num) != 0) {
		fprintf(stderr, "weft-bench: bad address '%s'\n", addr);
		return NULL;
	}
	snprintf(port, sizeof(port), "%u", (unsigned)port_num);
	rv = getaddrinfo(host, port, &hints, &ai);
	if (rv != 0) {
		fprintf(stderr, "weft-bench: %s: %s\n", addr, gai_strerror(rv));
		return NULL;
	}
	return ai;
}

static void
name_addr(const struct sockaddr *sa, socklen_t len, char *out, size_t n)
{
	char host[128], port[16];

	if (getnameinfo(sa, len, host, sizeof(host), port, sizeof(port),
	                NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
		snprintf(out, n, "?");
		return;
	}
	weft_address_join(host, (uint16_t)strtoul(port, NULL, 10), out, n);
}

int
wbench_listen(const char *addr, char *bound, size_t bound_len)
{
	struct addrinfo *ai = resolve(addr, true);
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int fd, one = 1;

	if (ai == NULL)
		return -1;
	fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto err_free;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 16) != 0)
		goto err_close;
	if (getsockname(fd, (struct sockaddr *)&ss, &len) != 0)
		goto err_close;
	name_addr((struct sockaddr *)&ss, len, bound, bound_len);
	freeaddrinfo(ai);
	return fd;

err_close:
	close(fd);
err_free:
	fprintf(stderr, "weft-bench: listen %s: %s\n", addr, strerror(errno));
	freeaddrinfo(ai);
	return -1;
}

static int
connect_once(const struct addrinfo *ai)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, 0);
	int one = 1;

	if (fd < 0)
		return -1;
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
		int saved = errno;

		close(fd);
		errno = saved;
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

int
wbench_connect(const char *addr, uint64_t timeout_ms)
{
	struct addrinfo *ai = resolve(addr, false);
	uint64_t deadline = wbench_now_ns() + timeout_ms * 1000000u;
	int fd;

	if (ai == NULL)
		return -1;
	/* The listener is up before the peer starts, so a refusal is rare;
	 * retry briefly for --connect started by hand before --listen. */
	while ((fd = connect_once(ai)) < 0 && errno == ECONNREFUSED &&
	       wbench_now_ns() < deadline)
		poll(NULL, 0, 50);
	if (fd < 0)
		fprintf(stderr, "weft-bench: connect %s: %s\n", addr,
		        strerror(errno));
	freeaddrinfo(ai);
	return fd;
}

int
wbench_accept(int listen_fd, uint64_t timeout_ms)
{
	struct pollfd pfd = {.fd = listen_fd, .events = POLLIN};
	int fd, one = 1;
	int rv = poll(&pfd, 1, timeout_ms > INT32_MAX ? -1 : (int)timeout_ms);

	if (rv <= 0) {
		fprintf(stderr, "weft-bench: no connection within %llu ms\n",
		        (unsigned long long)timeout_ms);
		return -1;
	}
	fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "weft-bench: accept: %s\n", strerror(errno));
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return fd;
}

int
wbench_write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int
wbench_read_all(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}
