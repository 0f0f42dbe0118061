/* SPDX-License-Identifier: MIT */
/*
 * dns_server.h: a tiny DNS server on 127.0.0.1 for the resolver tests. It
 * answers A queries for one name with an address the test sets (AAAA with
 * no address, anything else with NXDOMAIN), counts the queries, and can
 * hold its answers until the test releases them. It writes a resolv.conf
 * naming itself, for WEFT_RESOLV_CONF. One thread; every wait is bounded.
 */
#ifndef WEFT_TESTS_DNS_SERVER_H
#define WEFT_TESTS_DNS_SERVER_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define DNS_SERVER_HELD 16

/* An answer kept while the server holds. */
struct dns_held {
	uint8_t bytes[600];
	size_t len;
	struct sockaddr_storage to;
	unsigned to_len;
};

struct dns_server {
	int fd;
	uint16_t port;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	char name[128]; /* the one name answered */
	uint32_t ipv4;  /* its address, network order */
	bool hold;      /* keep answers until dns_server_release */
	bool stop;
	int a_queries;     /* A queries for name */
	int other_queries; /* every other query */
	struct dns_held held[DNS_SERVER_HELD];
	int nheld; /* answers held (more are dropped: evdns retries) */
	char resolv_conf[64];
};

/* dns_server_start binds 127.0.0.1:0, answers name with ipv4 (text), and
 * writes s->resolv_conf. Asserts with cmocka on failure. */
void dns_server_start(struct dns_server *s, const char *name, const char *ipv4);
/* dns_server_set_address changes the answer for later queries. */
void dns_server_set_address(struct dns_server *s, const char *ipv4);
/* dns_server_hold makes the server keep its answers until released. */
void dns_server_hold(struct dns_server *s, bool hold);
/* dns_server_a_queries is the number of A queries for the name so far. */
int dns_server_a_queries(struct dns_server *s);
/* dns_server_stop ends the thread, closes the socket, removes the file. */
void dns_server_stop(struct dns_server *s);

#endif
