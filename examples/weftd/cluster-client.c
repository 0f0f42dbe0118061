/* SPDX-License-Identifier: MIT */
/*
 * cluster-client --config FILE: the guide's last step (docs/GUIDE.md), a
 * program of one's own against a running weftd cluster. It joins as a
 * client (an id the file does not list as a node), waits for every member,
 * and asks each one weftd's built-in ping and echo, with the blocking
 * calls. weftd's verbs are numbered in docs/WEFTD.md: 16 ping, 17 echo
 * (64 to 67 are the key-value service's).
 */
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <weft/messaging.h>

#define WEFTD_PING 16
#define WEFTD_ECHO 17

/* Pings and echoes one member; 0 or a WEFT_E code. */
static int
ask(weft_msvc *svc, weft_msvc_peer *node, struct evbuffer *reply)
{
	const char *id = weft_msvc_peer_id(node);
	uint64_t start;
	int rv;

	if ((rv = weft_msvc_peer_wait_up(svc, node, 10000)) != 0)
		return rv;
	start = weft_now_ns();
	if ((rv = weft_msvc_call(svc, node, WEFTD_PING, "", 0, NULL, NULL)))
		return rv;
	printf("%s: ping %.3f ms", id, (double)(weft_now_ns() - start) / 1e6);
	evbuffer_drain(reply, evbuffer_get_length(reply));
	rv = weft_msvc_call(svc, node, WEFTD_ECHO, id, strlen(id), NULL, reply);
	if (rv == 0)
		printf(", echo '%.*s'\n", (int)evbuffer_get_length(reply),
		       (const char *)evbuffer_pullup(reply, -1));
	return rv;
}

int
main(int argc, char **argv)
{
	weft_msvc_config *cfg;
	weft_loop_group *group;
	struct evbuffer *reply;
	weft_msvc *svc = NULL;
	char err[512];
	size_t i;
	int rv;

	if (argc != 3 || strcmp(argv[1], "--config") != 0) {
		fprintf(stderr, "usage: cluster-client --config FILE\n");
		return 2;
	}
	if (weft_msvc_config_load(argv[2], &cfg, err, sizeof(err)) != 0) {
		fprintf(stderr, "cluster-client: %s\n", err);
		return 78;
	}
	if ((reply = evbuffer_new()) == NULL ||
	    (rv = weft_loop_group_new(1, &group)) != 0) {
		fprintf(stderr, "cluster-client: out of memory\n");
		return 1;
	}
	/* Not a member's id: the service only dials, and the nodes answer
	 * on the connections it opened ([limits] allow_clients). */
	rv = weft_msvc_new(group, cfg, "guide-client", NULL, &svc);
	weft_msvc_config_free(cfg);
	if (rv == 0 && (rv = weft_msvc_start(svc)) == 0) {
		for (i = 0; rv == 0 && i < weft_msvc_peer_count(svc); i++)
			rv = ask(svc, weft_msvc_peer_at(svc, i), reply);
		weft_msvc_stop(svc, 1000);
	}
	weft_msvc_free(svc); /* NULL is fine */
	weft_loop_group_free(group);
	evbuffer_free(reply);
	if (rv != 0) {
		fprintf(stderr, "cluster-client: %s\n", weft_strerror(rv));
		return 1;
	}
	return 0;
}
