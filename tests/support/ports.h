/* SPDX-License-Identifier: MIT */
/* ports.h: loopback ports for test servers that must know theirs before
 * they start. */
#ifndef WEFT_TEST_PORTS_H
#define WEFT_TEST_PORTS_H

#include <stdint.h>

/*
 * weft_test_free_port returns a port free on 127.0.0.1 a moment ago, picked
 * at random below the kernel's ephemeral range, so that no connect() of a
 * test running beside it can take the port before the server binds it,
 * and none of the last 64 it returned, so that the ports of a cluster
 * picked before any of its nodes binds are distinct. Fails the test when it
 * finds none. One thread.
 */
uint16_t weft_test_free_port(void);

#endif
