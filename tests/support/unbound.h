/* SPDX-License-Identifier: MIT */
/*
 * unbound.h: Debian's unbound as a test DNS server, started by the test on
 * 127.0.0.1 and a free port, authoritative for one local zone whose
 * records the test changes while it runs (unbound-control local_data and
 * local_data_remove over a control socket in its own directory). Every
 * wait is bounded.
 */
#ifndef WEFT_TESTS_UNBOUND_H
#define WEFT_TESTS_UNBOUND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct unbound_server {
	char dir[64];          /* its configuration, logs, control socket */
	char conf[128];        /* unbound.conf */
	char resolv_conf[128]; /* "nameserver 127.0.0.1:PORT" */
	char servers[32];      /* "127.0.0.1:PORT" */
	uint16_t port;
	pid_t pid; /* 0: stopped */
};

/* unbound_available is true when unbound and unbound-control are
 * installed (tests skip otherwise, saying so). */
bool unbound_available(void);
/* unbound_start runs unbound for zone ("weft.test") with the records
 * (zone file lines, "n2.weft.test. 1 IN A 127.0.0.1") and waits until it
 * answers its control socket. Asserts with cmocka on failure. */
void unbound_start(struct unbound_server *u, const char *zone,
                   const char *const *records, size_t n);
/* unbound_add adds a record; unbound_remove removes every record of
 * name. 0, or -1 when unbound-control failed. */
int unbound_add(struct unbound_server *u, const char *record);
int unbound_remove(struct unbound_server *u, const char *name);
/* unbound_add_many adds n records at once (unbound-control local_datas);
 * 0 or -1. */
int unbound_add_many(struct unbound_server *u, const char *const *records,
                     size_t n);
/* unbound_stop ends the server (SIGTERM, waited for) and keeps its
 * directory for unbound_free; idempotent. */
void unbound_stop(struct unbound_server *u);
/* unbound_free stops it if needed and removes its directory. */
void unbound_free(struct unbound_server *u);

#endif
