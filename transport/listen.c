/* SPDX-License-Identifier: MIT */
/*
 * listen.c: listening sockets for TCP and Unix-domain servers: the listen
 * operation of the socket backends.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "transport_int.h"

/*
 * is_stale_unix_socket is true when path names a socket file that nobody
 * listens on any more (a server died without removing it): connecting to
 * it is refused. Anything else (no file, not a socket, a live listener) is
 * left alone.
 */
static bool
is_stale_unix_socket(const weft__addr *addr)
{
	const struct sockaddr_un *sun = (const void *)&addr->sa;
	struct stat st;
	int fd, rc, err;

	if (sun->sun_path[0] == '\0' || lstat(sun->sun_path, &st) != 0 ||
	    !S_ISSOCK(st.st_mode))
		return false;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return false;
	rc = connect(fd, (const struct sockaddr *)&addr->sa, addr->sa_len);
	err = errno;
	close(fd);
	return rc != 0 && err == ECONNREFUSED;
}

static int
bind_unix(evutil_socket_t fd, const weft__addr *addr, const char *text)
{
	const struct sockaddr_un *sun = (const void *)&addr->sa;

	if (bind(fd, (const struct sockaddr *)&addr->sa, addr->sa_len) == 0)
		return 0;
	if (errno != EADDRINUSE || !is_stale_unix_socket(addr))
		return weft__sock_error(errno, "bind", text);
	weft_info("bind %s: removing stale socket file", text);
	if (unlink(sun->sun_path) != 0 && errno != ENOENT)
		return weft__sock_error(errno, "unlink stale", text);
	if (bind(fd, (const struct sockaddr *)&addr->sa, addr->sa_len) != 0)
		return weft__sock_error(errno, "bind", text);
	return 0;
}

static int
bind_tcp(evutil_socket_t fd, const weft__addr *addr, const char *text)
{
	int one = 1;

	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0)
		return weft__sock_error(errno, "setsockopt SO_REUSEADDR", text);
	if (bind(fd, (const struct sockaddr *)&addr->sa, addr->sa_len) != 0)
		return weft__sock_error(errno, "bind", text);
	return 0;
}

int
weft__listen_open(const weft__addr *addr, int backlog, evutil_socket_t *out)
{
	char text[WEFT_ADDRESS_MAX];
	evutil_socket_t fd;
	int rv;

	weft__addr_format((const struct sockaddr *)&addr->sa, addr->sa_len,
	                  text, sizeof(text));
	fd =
	    socket(addr->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return weft__sock_error(errno, "socket", text);
	if (addr->family == AF_UNIX)
		rv = bind_unix(fd, addr, text);
	else
		rv = bind_tcp(fd, addr, text);
	if (rv != 0)
		goto err_close;
	if (listen(fd, backlog) != 0) {
		rv = weft__sock_error(errno, "listen", text);
		goto err_unlink;
	}
	*out = fd;
	return 0;

err_unlink:
	if (addr->family == AF_UNIX) {
		const struct sockaddr_un *sun = (const void *)&addr->sa;

		if (sun->sun_path[0] != '\0')
			unlink(sun->sun_path);
	}
err_close:
	close(fd);
	return rv;
}

/* record_bound fills what l tells about its bound socket. */
static void
record_bound(weft__listener *l)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	const struct sockaddr_un *sun = (const void *)&ss;
	struct stat st;
	char eb[128];

	memset(&ss, 0, sizeof(ss));
	if (getsockname(l->fd, (struct sockaddr *)&ss, &len) != 0)
		weft_warn("getsockname: %s",
		          weft__errstr(errno, eb, sizeof(eb)));
	weft__addr_format((struct sockaddr *)&ss, len, l->address,
	                  sizeof(l->address));
	if (ss.ss_family == AF_INET)
		l->port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
	else if (ss.ss_family == AF_INET6)
		l->port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	/* Abstract names have no file to remove. */
	if (ss.ss_family == AF_UNIX && sun->sun_path[0] != '\0' &&
	    lstat(sun->sun_path, &st) == 0) {
		memcpy(l->unix_path, sun->sun_path, sizeof(l->unix_path));
		l->unix_path[sizeof(l->unix_path) - 1] = '\0';
		l->unix_dev = st.st_dev;
		l->unix_ino = st.st_ino;
	}
}

int
weft__listen(const weft__backend *b, const char *address, int backlog,
             weft__listener *out)
{
	weft__addr addr, *list;
	size_t n, i;
	int rv;

	(void)b; /* every socket backend listens alike */
	memset(out, 0, sizeof(*out));
	out->fd = -1;
	if ((rv = weft__addr_parse(address, &addr)) != 0) {
		weft_warn("server: bad address '%s'", address);
		return rv;
	}
	if ((rv = weft__addr_resolve(&addr, true, &list, &n)) != 0)
		return rv;
	for (i = 0; i < n; i++) {
		if ((rv = weft__listen_open(&list[i], backlog, &out->fd)) == 0)
			break;
	}
	free(list);
	if (rv == 0)
		record_bound(out);
	return rv;
}

void
weft__listener_unlink(const weft__listener *l)
{
	struct stat st;
	char eb[128];

	if (l->unix_path[0] == '\0' || lstat(l->unix_path, &st) != 0 ||
	    st.st_dev != l->unix_dev || st.st_ino != l->unix_ino)
		return;
	if (unlink(l->unix_path) != 0)
		weft_warn("server %s: unlink: %s", l->address,
		          weft__errstr(errno, eb, sizeof(eb)));
}
