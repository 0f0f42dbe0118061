/* SPDX-License-Identifier: MIT */
/*
 * hello --config FILE --id NODE [--ask PEER]: the guide's fourth step
 * (docs/GUIDE.md), the messaging service between two nodes. Every node
 * serves the verb "hello"; with --ask, the node asks PEER once, prints the
 * answer and exits, otherwise it serves until SIGINT or SIGTERM.
 *
 * The service runs on a loop group of its own; this thread only waits.
 * weft_msvc_peer_wait_up and weft_msvc_call are the blocking calls for a
 * thread that is not one of the loops: no callback, mutex or condition
 * variable of our own.
 */
#define _POSIX_C_SOURCE 200809L /* sigwait, pthread_sigmask */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <weft/messaging.h>

/* Verb numbers are the application's to choose, from
 * WEFT_MSVC_VERB_USER_MIN (16) up; the name only labels the metrics. */
#define VERB_HELLO 16

/* Runs on a loop thread, for every request of the verb: answer it before
 * returning (or detach it and answer later, from any thread). */
static void
on_hello(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	char text[160];
	int n;

	(void)arg;
	n = snprintf(text, sizeof(text), "hello, %s, from %s",
	             weft_msvc_msg_sender(msg), weft_msvc_node_id(svc));
	weft_msvc_respond(msg, text, (size_t)n);
}

/* Asks peer once; 0 or a WEFT_E code. */
static int
ask(weft_msvc *svc, const char *peer_id)
{
	weft_msvc_peer *peer = weft_msvc_peer_find(svc, peer_id);
	struct evbuffer *reply;
	int rv;

	if (peer == NULL)
		return WEFT_ENOTFOUND;
	/* Peers are dialed when first used; this dials and waits. */
	if ((rv = weft_msvc_peer_wait_up(svc, peer, 10000)) != 0)
		return rv;
	if ((reply = evbuffer_new()) == NULL)
		return WEFT_ENOMEM;
	rv = weft_msvc_call(svc, peer, VERB_HELLO, "", 0, NULL, reply);
	if (rv == 0)
		printf("%s answered: %.*s\n", peer_id,
		       (int)evbuffer_get_length(reply),
		       (const char *)evbuffer_pullup(reply, -1));
	evbuffer_free(reply);
	return rv;
}

static void
wait_for_signal(void)
{
	sigset_t sigs;
	int sig;

	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigwait(&sigs, &sig);
}

int
main(int argc, char **argv)
{
	const char *config = NULL, *id = NULL, *peer = NULL;
	weft_msvc_config *cfg;
	weft_loop_group *group;
	weft_msvc *svc;
	char err[512];
	sigset_t sigs;
	int i, rv;

	for (i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--config") == 0)
			config = argv[i + 1];
		else if (strcmp(argv[i], "--id") == 0)
			id = argv[i + 1];
		else if (strcmp(argv[i], "--ask") == 0)
			peer = argv[i + 1];
	}
	if (config == NULL || id == NULL || i != argc) {
		fprintf(stderr, "usage: hello --config FILE --id NODE "
		                "[--ask PEER]\n");
		return 2;
	}
	if ((rv = weft_msvc_config_load(config, &cfg, err, sizeof(err)))) {
		fprintf(stderr, "hello: %s\n", err);
		return 78;
	}
	/* The loops inherit this mask: only sigwait sees the signals. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	if ((rv = weft_loop_group_new(1, &group)) != 0)
		goto out_cfg;
	/* The service keeps its own copy of the configuration. */
	if ((rv = weft_msvc_new(group, cfg, id, NULL, &svc)) != 0)
		goto out_group;
	if ((rv = weft_msvc_register(svc, VERB_HELLO, "hello", on_hello, NULL,
	                             WEFT_MSVC_INLINE)) != 0 ||
	    (rv = weft_msvc_start(svc)) != 0)
		goto out_svc;
	printf("node %s listening on port %u\n", id, weft_msvc_port(svc));
	fflush(stdout);
	if (peer != NULL)
		rv = ask(svc, peer);
	else
		wait_for_signal();
	weft_msvc_stop(svc, 1000); /* let queued messages go first */
out_svc:
	weft_msvc_free(svc);
out_group:
	weft_loop_group_free(group);
out_cfg:
	weft_msvc_config_free(cfg);
	if (rv != 0) {
		fprintf(stderr, "hello: %s\n", weft_strerror(rv));
		return 1;
	}
	return 0;
}
