/* SPDX-License-Identifier: MIT */
/*
 * weftd_proto.h: what a program that talks to weftd relies on, in one
 * place for weftd, weft-kv, weft-bench (which drives weftd's load verb)
 * and the tests: the built-in verbs and the exit codes.
 */
#ifndef WEFTD_PROTO_H
#define WEFTD_PROTO_H

/* The built-in verbs (docs/WEFTD.md). */
#define WEFTD_VERB_PING 16u
#define WEFTD_VERB_ECHO 17u
#define WEFTD_VERB_LOAD 18u /* with [weftd] load = on */
/* The node's view, for weft-kv status: a msgpack map of node, cluster,
 * version (strings), uptime_ms, keys (tombstones included), value_bytes,
 * clients (open client connections) and members, an array of maps of id
 * and state ("self", "up", "down" or "unknown": not reached yet). Clients
 * skip keys they do not know. */
#define WEFTD_VERB_STATUS 19u

/* Exit codes of weftd and weft-kv: 0 success, 1 a runtime failure, 2 bad
 * usage, 78 (EX_CONFIG of sysexits.h) anything wrong with the
 * configuration: the file, a value, a node id it does not list, TLS files
 * that do not load. weftd.service does not restart on 78. */
#define WEFTD_EXIT_FAIL 1
#define WEFTD_EXIT_USAGE 2
#define WEFTD_EXIT_CONFIG 78

#endif
