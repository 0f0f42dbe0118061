/* SPDX-License-Identifier: MIT */
/*
 * notify.c: the service manager's notification protocol (sd_notify(3)):
 * one datagram of "KEY=value" lines to the unix socket named by
 * $NOTIFY_SOCKET. systemd documents the protocol as a stable interface and
 * it is this one sendto(), so weftd speaks it itself rather than link
 * libsystemd for it: the same binary then tells systemd, or any other
 * supervisor that sets NOTIFY_SOCKET, with no build option. Without the
 * variable nothing is sent.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "weftd_int.h"

/* Fills sa from $NOTIFY_SOCKET: a path, or "@name" in the abstract
 * namespace. Returns the address's length, or 0 if there is none. */
static socklen_t
notify_address(struct sockaddr_un *sa)
{
	const char *path = getenv("NOTIFY_SOCKET");
	size_t len;

	if (path == NULL || (path[0] != '/' && path[0] != '@'))
		return 0;
	if ((len = strlen(path)) < 2 || len >= sizeof(sa->sun_path))
		return 0;
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	memcpy(sa->sun_path, path, len);
	if (path[0] == '@')
		sa->sun_path[0] = '\0';
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
}

void
weftd_notify(const char *fmt, ...)
{
	struct sockaddr_un sa;
	socklen_t salen = notify_address(&sa);
	char msg[512];
	va_list ap;
	int fd, n;

	if (salen == 0)
		return;
	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(msg))
		n = (int)sizeof(msg) - 1;
	if ((fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0) {
		weft_warn("weftd: NOTIFY_SOCKET: socket: %s", strerror(errno));
		return;
	}
	/* Never blocks: a manager that does not read loses a status line,
	 * the node keeps serving. */
	if (sendto(fd, msg, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL,
	           (struct sockaddr *)&sa, salen) < 0)
		weft_warn("weftd: NOTIFY_SOCKET %s: %s",
		          getenv("NOTIFY_SOCKET"), strerror(errno));
	close(fd);
}
