/* SPDX-License-Identifier: MIT */
/* address.c: address text, name resolution and socket errors. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "transport_int.h"

#define UNIX_PREFIX "unix:"

bool
weft__addr_is_tcp(int family)
{
	return family == AF_INET || family == AF_INET6;
}

static int
parse_unix(const char *path, weft__addr *out)
{
	struct sockaddr_un *sun = (struct sockaddr_un *)&out->sa;
	size_t len = strlen(path);

	/* An abstract name keeps its leading NUL ('@' in text) and has no
	 * terminator; a path needs room for its NUL. */
	if (len == 0 || len >= sizeof(sun->sun_path))
		return WEFT_EADDR;
	sun->sun_family = AF_UNIX;
	memcpy(sun->sun_path, path, len);
	if (path[0] == '@') {
		if (len < 2)
			return WEFT_EADDR;
		sun->sun_path[0] = '\0';
		out->sa_len =
		    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
	} else {
		sun->sun_path[len] = '\0';
		out->sa_len =
		    (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len +
		                1);
	}
	out->family = AF_UNIX;
	return 0;
}

static int
parse_port(const char *text, uint16_t *port)
{
	char *end;
	unsigned long v;

	if (*text < '0' || *text > '9')
		return WEFT_EADDR;
	errno = 0;
	v = strtoul(text, &end, 10);
	if (errno != 0 || *end != '\0' || v > 65535)
		return WEFT_EADDR;
	*port = (uint16_t)v;
	return 0;
}

/* Splits "host:port" or "[v6]:port" into out->host and out->port. */
static int
split_host_port(const char *text, weft__addr *out)
{
	const char *colon, *host = text;
	size_t host_len;

	if (text[0] == '[') {
		const char *close = strchr(text, ']');

		if (close == NULL || close[1] != ':')
			return WEFT_EADDR;
		host = text + 1;
		host_len = (size_t)(close - host);
		colon = close + 1;
	} else {
		colon = strrchr(text, ':');
		if (colon == NULL)
			return WEFT_EADDR;
		host_len = (size_t)(colon - text);
		/* An unbracketed IPv6 address is ambiguous: refuse it. */
		if (memchr(text, ':', host_len) != NULL)
			return WEFT_EADDR;
	}
	if (host_len == 0 || host_len >= sizeof(out->host))
		return WEFT_EADDR;
	memcpy(out->host, host, host_len);
	out->host[host_len] = '\0';
	return parse_port(colon + 1, &out->port);
}

static bool
parse_numeric(weft__addr *out, bool bracketed)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)&out->sa;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&out->sa;

	if (!bracketed && inet_pton(AF_INET, out->host, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons(out->port);
		out->family = AF_INET;
		out->sa_len = sizeof(*sin);
		return true;
	}
	if (bracketed &&
	    inet_pton(AF_INET6, out->host, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(out->port);
		out->family = AF_INET6;
		out->sa_len = sizeof(*sin6);
		return true;
	}
	return false;
}

static bool
valid_host_name(const char *host)
{
	for (const char *p = host; *p != '\0'; p++) {
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		      (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' ||
		      *p == '_'))
			return false;
	}
	return true;
}

int
weft__addr_parse(const char *text, weft__addr *out)
{
	int rv;

	if (text == NULL || out == NULL)
		return WEFT_EADDR;
	memset(out, 0, sizeof(*out));
	if (strncmp(text, UNIX_PREFIX, strlen(UNIX_PREFIX)) == 0)
		return parse_unix(text + strlen(UNIX_PREFIX), out);
	if ((rv = split_host_port(text, out)) != 0)
		return rv;
	if (parse_numeric(out, text[0] == '['))
		return 0;
	/* A bracketed host must be an IPv6 literal. */
	if (text[0] == '[' || !valid_host_name(out->host))
		return WEFT_EADDR;
	out->family = AF_UNSPEC;
	return 0;
}

int
weft_address_check(const char *address)
{
	weft__addr addr;

	return weft__addr_parse(address, &addr);
}

size_t
weft_address_join(const char *host, uint16_t port, char *buf, size_t len)
{
	int n = snprintf(buf, len, strchr(host, ':') ? "[%s]:%u" : "%s:%u",
	                 host, (unsigned)port);

	return n > 0 ? (size_t)n : 0;
}

int
weft_address_split(const char *address, char *host, size_t host_len,
                   uint16_t *port)
{
	weft__addr addr;
	size_t n;
	int rv;

	if ((rv = weft__addr_parse(address, &addr)) != 0)
		return rv;
	n = strlen(addr.host);
	if (addr.family == AF_UNIX || n >= host_len)
		return WEFT_EADDR;
	memcpy(host, addr.host, n + 1);
	*port = addr.port;
	return 0;
}

int
weft__addr_list_from_ai(const weft__addr *addr, const struct addrinfo *res,
                        weft__addr **list, size_t *n)
{
	const struct addrinfo *ai;
	size_t count = 0;
	weft__addr *out;

	for (ai = res; ai != NULL; ai = ai->ai_next)
		count++;
	if ((out = calloc(count ? count : 1, sizeof(*out))) == NULL)
		return WEFT_ENOMEM;
	count = 0;
	for (ai = res; ai != NULL; ai = ai->ai_next) {
		if (!weft__addr_is_tcp(ai->ai_family) ||
		    ai->ai_addrlen > sizeof(out[count].sa))
			continue;
		out[count] = *addr;
		out[count].family = ai->ai_family;
		out[count].sa_len = ai->ai_addrlen;
		memcpy(&out[count].sa, ai->ai_addr, ai->ai_addrlen);
		count++;
	}
	if (count == 0) {
		free(out);
		return WEFT_EADDR;
	}
	*list = out;
	*n = count;
	return 0;
}

int
weft__addr_resolve(const weft__addr *addr, bool passive, weft__addr **list,
                   size_t *n)
{
	struct addrinfo hints, *res = NULL;
	char port[8], eb[128];
	int rc, rv;

	if (addr->family != AF_UNSPEC) {
		if ((*list = malloc(sizeof(**list))) == NULL)
			return WEFT_ENOMEM;
		**list = *addr;
		*n = 1;
		return 0;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
	snprintf(port, sizeof(port), "%u", (unsigned)addr->port);
	rc = getaddrinfo(addr->host, port, &hints, &res);
	if (rc != 0) {
		weft_warn("resolve %s: %s", addr->host,
		          rc == EAI_SYSTEM ? weft__errstr(errno, eb, sizeof(eb))
		                           : gai_strerror(rc));
		return rc == EAI_MEMORY ? WEFT_ENOMEM : WEFT_EADDR;
	}
	rv = weft__addr_list_from_ai(addr, res, list, n);
	freeaddrinfo(res);
	if (rv == WEFT_EADDR)
		weft_warn("resolve %s: no IPv4 or IPv6 address", addr->host);
	return rv;
}

static void
format_unix(const struct sockaddr_un *sun, socklen_t len, char *buf,
            size_t size)
{
	size_t path_len;

	if (len <= offsetof(struct sockaddr_un, sun_path)) {
		snprintf(buf, size, UNIX_PREFIX);
		return;
	}
	path_len = len - offsetof(struct sockaddr_un, sun_path);
	if (sun->sun_path[0] == '\0') {
		/* Abstract: the name may hold any byte; show it as is. */
		snprintf(buf, size, UNIX_PREFIX "@%.*s", (int)(path_len - 1),
		         sun->sun_path + 1);
		return;
	}
	snprintf(buf, size, UNIX_PREFIX "%.*s", (int)path_len, sun->sun_path);
}

int
weft__addr_of_fd(int fd, bool peer, char *buf, size_t size)
{
	struct sockaddr_storage sa;
	socklen_t salen = sizeof(sa);
	int rv;

	if (fd < 0)
		return WEFT_ENOTSUP;
	rv = peer ? getpeername(fd, (struct sockaddr *)&sa, &salen)
	          : getsockname(fd, (struct sockaddr *)&sa, &salen);
	if (rv != 0)
		return WEFT_ENOTSUP;
	weft__addr_format((struct sockaddr *)&sa, salen, buf, size);
	return 0;
}

void
weft__addr_format(const struct sockaddr *sa, socklen_t len, char *buf,
                  size_t size)
{
	char host[INET6_ADDRSTRLEN];

	if (sa == NULL || size == 0) {
		if (size > 0)
			buf[0] = '\0';
		return;
	}
	switch (sa->sa_family) {
	case AF_INET: {
		const struct sockaddr_in *sin = (const void *)sa;

		inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
		weft_address_join(host, ntohs(sin->sin_port), buf, size);
		break;
	}
	case AF_INET6: {
		const struct sockaddr_in6 *sin6 = (const void *)sa;

		inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof(host));
		weft_address_join(host, ntohs(sin6->sin6_port), buf, size);
		break;
	}
	case AF_UNIX:
		format_unix((const struct sockaddr_un *)(const void *)sa, len,
		            buf, size);
		break;
	default:
		snprintf(buf, size, "unknown");
		break;
	}
}

int
weft__sock_error(int errnum, const char *what, const char *address)
{
	char eb[128];
	int rv;

	switch (errnum) {
	case ECONNREFUSED:
	case ENOENT: /* a Unix socket file that is not there */
		rv = WEFT_ECONNREFUSED;
		break;
	case ETIMEDOUT:
		rv = WEFT_ETIMEDOUT;
		break;
	case EADDRINUSE:
		rv = WEFT_EADDRINUSE;
		break;
	case EADDRNOTAVAIL:
	case EAFNOSUPPORT:
	case ENETUNREACH:
	case EHOSTUNREACH:
		rv = WEFT_EADDR;
		break;
	case ENOMEM:
	case ENOBUFS:
		rv = WEFT_ENOMEM;
		break;
	case ECONNRESET:
	case EPIPE:
	case ECONNABORTED:
		rv = WEFT_ECLOSED;
		break;
	default:
		rv = weft_from_errno(errnum);
		if (rv == 0 || rv == WEFT_EINVAL)
			rv = WEFT_EIO;
		break;
	}
	/* A peer that refuses, resets or cannot be reached is the caller's
	 * to report (the status says so), once, not on every retry. */
	if (strcmp(what, "connect") == 0 &&
	    (rv == WEFT_ECONNREFUSED || rv == WEFT_ETIMEDOUT ||
	     rv == WEFT_ECLOSED || rv == WEFT_EADDR))
		weft_debug("%s %s: %s", what, address ? address : "",
		           weft__errstr(errnum, eb, sizeof(eb)));
	else
		weft_warn("%s %s: %s", what, address ? address : "",
		          weft__errstr(errnum, eb, sizeof(eb)));
	return rv;
}

void
weft__sock_nodelay(evutil_socket_t fd)
{
	char eb[128];
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
		weft_warn("setsockopt TCP_NODELAY: %s",
		          weft__errstr(errno, eb, sizeof(eb)));
}

const char *
weft__errstr(int errnum, char *buf, size_t size)
{
	/* The GNU strerror_r: returns the text, in buf or a constant. */
	return strerror_r(errnum, buf, size);
}
