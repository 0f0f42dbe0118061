/* SPDX-License-Identifier: MIT */
/* dns_server.c: see dns_server.h. Just enough of RFC 1035 for evdns. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "dns_server.h"

#define TYPE_A 1
#define TYPE_AAAA 28
#define MAX_PACKET 512 /* a query longer than an answer is refused */

/* Reads the question's name as dotted text; returns the offset after the
 * question (name, type, class) or 0. */
static size_t
read_question(const uint8_t *p, size_t n, char *name, size_t cap, int *qtype)
{
	size_t off = 12, len = 0;

	while (off < n && p[off] != 0) {
		size_t l = p[off++];

		if (l > 63 || off + l > n || len + l + 2 > cap)
			return 0;
		if (len > 0)
			name[len++] = '.';
		memcpy(name + len, p + off, l);
		len += l;
		off += l;
	}
	if (off + 5 > n)
		return 0;
	name[len] = '\0';
	*qtype = p[off + 1] << 8 | p[off + 2];
	return off + 5;
}

/* Builds the answer to query q (qlen bytes, the question ending at qend)
 * in out; returns its length. */
static size_t
answer(struct dns_server *s, const uint8_t *q, size_t qend, const char *name,
       int qtype, uint8_t *out)
{
	bool ours = strcasecmp(name, s->name) == 0;
	size_t n = qend;

	memcpy(out, q, qend);
	out[2] = 0x81;               /* QR, RD */
	out[3] = ours ? 0x80 : 0x83; /* RA; NXDOMAIN if not ours */
	out[4] = 0, out[5] = 1;      /* one question */
	out[6] = 0, out[7] = 0;      /* answers, set below */
	memset(out + 8, 0, 4);       /* no authority, no additional */
	if (ours && qtype == TYPE_A) {
		static const uint8_t rr[] = {0xc0, 12, 0, TYPE_A, 0, 1,
		                             0,    0,  0, 0,      0, 4};

		out[7] = 1;
		memcpy(out + n, rr, sizeof(rr));
		n += sizeof(rr);
		memcpy(out + n, &s->ipv4, 4);
		n += 4;
	}
	return n;
}

static void
serve_one(struct dns_server *s)
{
	uint8_t q[MAX_PACKET], out[sizeof(s->held[0].bytes)];
	struct sockaddr_in from;
	socklen_t fromlen = sizeof(from);
	char name[256];
	size_t qend, n;
	ssize_t got;
	int qtype = 0;

	got = recvfrom(s->fd, q, sizeof(q), 0, (struct sockaddr *)&from,
	               &fromlen);
	if (got < 12)
		return;
	if ((qend = read_question(q, (size_t)got, name, sizeof(name),
	                          &qtype)) == 0)
		return;
	pthread_mutex_lock(&s->lock);
	if (strcasecmp(name, s->name) == 0 && qtype == TYPE_A)
		s->a_queries++;
	else
		s->other_queries++;
	n = answer(s, q, qend, name, qtype, out);
	if (s->hold) {
		if (s->nheld < DNS_SERVER_HELD && n <= sizeof(out)) {
			struct dns_held *h = &s->held[s->nheld++];

			memcpy(h->bytes, out, n);
			h->len = n;
			memcpy(&h->to, &from, fromlen);
			h->to_len = fromlen;
		}
		pthread_mutex_unlock(&s->lock);
		return;
	}
	pthread_mutex_unlock(&s->lock);
	sendto(s->fd, out, n, 0, (struct sockaddr *)&from, fromlen);
}

/* Sends the answers held, once the server no longer holds. Locked. */
static void
flush_held(struct dns_server *s)
{
	int i;

	for (i = 0; i < s->nheld; i++)
		sendto(s->fd, s->held[i].bytes, s->held[i].len, 0,
		       (struct sockaddr *)&s->held[i].to, s->held[i].to_len);
	s->nheld = 0;
}

static void *
serve(void *arg)
{
	struct dns_server *s = arg;
	struct pollfd pfd = {.fd = s->fd, .events = POLLIN};
	bool stop = false;

	while (!stop) {
		if (poll(&pfd, 1, 50) > 0)
			serve_one(s);
		pthread_mutex_lock(&s->lock);
		stop = s->stop;
		if (!s->hold)
			flush_held(s);
		pthread_mutex_unlock(&s->lock);
	}
	return NULL;
}

void
dns_server_start(struct dns_server *s, const char *name, const char *ipv4)
{
	struct sockaddr_in sin = {.sin_family = AF_INET};
	socklen_t len = sizeof(sin);
	FILE *f;
	int fd;

	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	snprintf(s->name, sizeof(s->name), "%s", name);
	assert_int_equal(inet_pton(AF_INET, ipv4, &s->ipv4), 1);
	s->fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	assert_true(s->fd >= 0);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(s->fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(getsockname(s->fd, (struct sockaddr *)&sin, &len), 0);
	s->port = ntohs(sin.sin_port);
	snprintf(s->resolv_conf, sizeof(s->resolv_conf),
	         "/tmp/weft-resolv-XXXXXX");
	assert_true((fd = mkstemp(s->resolv_conf)) >= 0);
	assert_non_null(f = fdopen(fd, "w"));
	fprintf(f, "nameserver 127.0.0.1:%u\noptions timeout:5 attempts:1\n",
	        (unsigned)s->port);
	fclose(f);
	assert_int_equal(pthread_create(&s->thread, NULL, serve, s), 0);
}

void
dns_server_set_address(struct dns_server *s, const char *ipv4)
{
	pthread_mutex_lock(&s->lock);
	assert_int_equal(inet_pton(AF_INET, ipv4, &s->ipv4), 1);
	pthread_mutex_unlock(&s->lock);
}

void
dns_server_hold(struct dns_server *s, bool hold)
{
	pthread_mutex_lock(&s->lock);
	s->hold = hold;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
}

int
dns_server_a_queries(struct dns_server *s)
{
	int n;

	pthread_mutex_lock(&s->lock);
	n = s->a_queries;
	pthread_mutex_unlock(&s->lock);
	return n;
}

void
dns_server_stop(struct dns_server *s)
{
	pthread_mutex_lock(&s->lock);
	s->stop = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->thread, NULL);
	close(s->fd);
	unlink(s->resolv_conf);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->lock);
}
