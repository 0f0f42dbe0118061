/* SPDX-License-Identifier: MIT */
/*
 * hosts.c: whether the hosts of a configuration can work here: a member's
 * host resolves, and this node's own is an address of this machine. A
 * check that passes only what a start would not refuse: an address that
 * is not local makes the listener fail, and a member whose name has no
 * record is never reached.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "msvc_int.h"

/* A host of only digits and dots is meant as an IPv4 literal: no name is
 * all numeric (RFC 1123 2.1), so one inet_pton refuses never resolves. */
static bool
looks_numeric(const char *host)
{
	return host[strspn(host, "0123456789.")] == '\0';
}

static bool
is_literal(const char *host, int *family)
{
	struct in6_addr buf;

	if (inet_pton(AF_INET, host, &buf) == 1)
		*family = AF_INET;
	else if (inet_pton(AF_INET6, host, &buf) == 1)
		*family = AF_INET6;
	else
		return false;
	return true;
}

/* Binds a socket to ai's address with port 0, so that a node running
 * already on its port does not make its own check fail. */
static int
try_bind(const struct addrinfo *ai, char *why, size_t whylen)
{
	struct sockaddr_storage ss;
	int fd, err = 0;

	if (ai->ai_addrlen > sizeof(ss))
		return 0;
	memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
	if (ss.ss_family == AF_INET)
		((struct sockaddr_in *)&ss)->sin_port = 0;
	else
		((struct sockaddr_in6 *)&ss)->sin6_port = 0;
	if ((fd = socket(ss.ss_family, SOCK_STREAM, 0)) < 0)
		return 0; /* no such family here: the listener says why */
	if (bind(fd, (struct sockaddr *)&ss, ai->ai_addrlen) != 0)
		err = errno;
	close(fd);
	if (err != EADDRNOTAVAIL)
		return 0;
	snprintf(why, whylen, "not an address of this host (%s)",
	         strerror(err));
	return WEFT_ECONFIG;
}

int
weft_msvc_host_check(const char *host, bool local, char *why, size_t whylen)
{
	struct addrinfo hints, *res = NULL, *ai;
	int family, rc, rv = 0;

	if (host == NULL || host[0] == '\0') {
		snprintf(why, whylen, "empty host");
		return WEFT_ECONFIG;
	}
	if (!is_literal(host, &family) &&
	    (looks_numeric(host) || strchr(host, ':') != NULL)) {
		snprintf(why, whylen, "'%s' is not an IP address", host);
		return WEFT_ECONFIG;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = local ? AI_PASSIVE : 0;
	rc = getaddrinfo(host, NULL, &hints, &res);
	if (rc == EAI_AGAIN || rc == EAI_FAIL || rc == EAI_SYSTEM ||
	    rc == EAI_MEMORY) {
		/* The DNS may come back; the name may be good. */
		snprintf(why, whylen, "cannot resolve '%s' now: %s", host,
		         gai_strerror(rc));
		return WEFT_EADDR;
	}
	if (rc != 0) {
		snprintf(why, whylen, "'%s' does not resolve: %s", host,
		         gai_strerror(rc));
		return WEFT_ENOTFOUND;
	}
	for (ai = res; local && rv == 0 && ai != NULL; ai = ai->ai_next)
		if (ai->ai_family == AF_INET || ai->ai_family == AF_INET6)
			rv = try_bind(ai, why, whylen);
	freeaddrinfo(res);
	return rv;
}

int
weft_msvc_config_check_hosts(const weft_msvc_config *cfg, const char *self,
                             bool strict, char *err, size_t errlen)
{
	const char *id, *host;
	char why[384], section[WEFT_MSVC_MAX_ID + 8], where[300];
	uint16_t port;
	size_t i, n;
	int rv, worst = 0;

	if (cfg == NULL)
		return WEFT_EINVAL;
	n = weft_msvc_config_node_count(cfg);
	for (i = 0; i < n; i++) {
		bool other;

		if (weft_msvc_config_node(cfg, i, &id, &host, &port) != 0)
			continue;
		other = self == NULL || strcmp(id, self) != 0;
		rv = weft_msvc_host_check(host, !other, why, sizeof(why));
		if (rv == 0)
			continue;
		snprintf(section, sizeof(section), "node %s", id);
		weft_msvc_config_where(cfg, section, "host", where,
		                       sizeof(where));
		/* A name that cannot be looked up now is a warning for the
		 * others (they are dialled again and again), and so is one
		 * without a record but in a strict check (it may get one
		 * when its member starts); this node cannot listen without
		 * its own. */
		if (other &&
		    (rv == WEFT_EADDR || (rv == WEFT_ENOTFOUND && !strict))) {
			weft_warn("%s: [%s] host: %s", where, section, why);
			continue;
		}
		if (rv == WEFT_ENOTFOUND)
			rv = WEFT_ECONFIG;
		snprintf(err, errlen, "%s: [%s] host: %s", where, section, why);
		if (rv == WEFT_ECONFIG)
			return rv;
		worst = rv;
	}
	return worst;
}
