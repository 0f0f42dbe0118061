/* SPDX-License-Identifier: MIT */
/*
 * weft_kv_cli.c: weft-kv, the key-value service's command-line client. It
 * joins the cluster as a non-member client (its answers come back on the
 * connection it opens), sends one request and prints the result.
 *
 *   weft-kv --config FILE [--node ID] [--timeout-ms N] get KEY
 *   weft-kv --config FILE [--node ID] [--timeout-ms N] put KEY VALUE|-
 *   weft-kv --config FILE [--node ID] [--timeout-ms N] delete KEY
 *   weft-kv --config FILE [--node ID] [--timeout-ms N] scan START [COUNT]
 *
 * Exit codes: 0 success, 1 the request failed (not found, timeout, ...),
 * 2 bad usage or configuration.
 */
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>

#include <weft/kv.h>
#include <weft/tls.h>

#include "weftd_int.h"

#define EXIT_USAGE WEFTD_EXIT_USAGE
#define DEFAULT_TIMEOUT_MS 5000

struct cli {
	const char *config_path;
	const char *node;
	const char *client_id;
	const char *tls_cert; /* override [tls] cert and key */
	const char *tls_key;
	uint64_t timeout_ms;
	const char *cmd;
	const char *key; /* scan: the start key */
	struct evbuffer *value;
	unsigned long scan_count;
	/* The answer, from a loop thread. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int status;
	struct evbuffer *reply;
};

static void
usage(FILE *f)
{
	fprintf(f,
	        "usage: weft-kv --config FILE [--node ID] [--timeout-ms N] "
	        "[--id CLIENT]\n"
	        "               [--tls-cert FILE --tls-key FILE]\n"
	        "               get KEY | put KEY VALUE | put KEY - | "
	        "delete KEY |\n"
	        "               scan START [COUNT]\n"
	        "  put KEY - reads the value from standard input.\n"
	        "  scan prints up to COUNT (default 10) live keys from START "
	        "on,\n  KEY<tab>VALUE a line, in order.\n"
	        "  With TLS, the certificate must name the client id "
	        "(--id).\n"
	        "  weft-kv --help | --version\n");
}

static int
read_value(struct cli *c, const char *arg)
{
	if ((c->value = evbuffer_new()) == NULL)
		return WEFT_ENOMEM;
	if (strcmp(arg, "-") != 0)
		return evbuffer_add(c->value, arg, strlen(arg)) ? WEFT_ENOMEM
		                                                : 0;
	while (evbuffer_read(c->value, STDIN_FILENO, 65536) > 0)
		;
	return 0;
}

/* Parses the command line; 0 or an exit code. */
static int
parse_args(struct cli *c, int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"node", required_argument, NULL, 'n'},
	    {"timeout-ms", required_argument, NULL, 't'},
	    {"id", required_argument, NULL, 'i'},
	    {"tls-cert", required_argument, NULL, 'C'},
	    {"tls-key", required_argument, NULL, 'K'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	int opt, args;
	char *end;

	while ((opt = getopt_long(argc, argv, "c:n:t:i:C:K:hV", longopts,
	                          NULL)) != -1) {
		switch (opt) {
		case 'c':
			c->config_path = optarg;
			break;
		case 'n':
			c->node = optarg;
			break;
		case 't':
			c->timeout_ms = strtoull(optarg, &end, 10);
			if (*end != '\0' || c->timeout_ms == 0)
				goto bad;
			break;
		case 'i':
			c->client_id = optarg;
			break;
		case 'C':
			c->tls_cert = optarg;
			break;
		case 'K':
			c->tls_key = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("weft-kv %s\n", weft_version());
			exit(0);
		default:
			goto bad;
		}
	}
	args = argc - optind;
	if (c->config_path == NULL || args < 2)
		goto bad;
	c->cmd = argv[optind];
	c->key = argv[optind + 1];
	if ((strcmp(c->cmd, "get") == 0 || strcmp(c->cmd, "delete") == 0) &&
	    args == 2)
		return 0;
	if (strcmp(c->cmd, "put") == 0 && args == 3)
		return read_value(c, argv[optind + 2]) ? EXIT_FAILURE : 0;
	if (strcmp(c->cmd, "scan") == 0 && (args == 2 || args == 3)) {
		c->scan_count = 10;
		if (args == 3)
			c->scan_count = strtoul(argv[optind + 2], &end, 10);
		if ((args == 2 || *end == '\0') && c->scan_count > 0 &&
		    c->scan_count <= WEFT_KV_MAX_SCAN)
			return 0;
	}
bad:
	usage(stderr);
	return EXIT_USAGE;
}

static void
on_reply(weft_msvc *svc, int status, const void *data, size_t len, void *arg)
{
	struct cli *c = arg;

	(void)svc;
	pthread_mutex_lock(&c->lock);
	if (c->done) { /* given up on already */
		pthread_mutex_unlock(&c->lock);
		return;
	}
	c->status = status;
	if (evbuffer_add(c->reply, data, len) != 0 && status == 0)
		c->status = WEFT_ENOMEM;
	c->done = true;
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

static int
send_request(struct cli *c, weft_msvc *svc, weft_msvc_peer *node)
{
	weft_msvc_call_opts opts = {.timeout_ms = c->timeout_ms};
	size_t klen = strlen(c->key);

	if (strcmp(c->cmd, "get") == 0)
		return weft_kv_client_get(svc, node, c->key, klen, &opts,
		                          on_reply, c);
	if (strcmp(c->cmd, "delete") == 0)
		return weft_kv_client_delete(svc, node, c->key, klen, &opts,
		                             on_reply, c);
	if (strcmp(c->cmd, "scan") == 0)
		return weft_kv_client_scan(svc, node, c->key, klen,
		                           (uint32_t)c->scan_count, &opts,
		                           on_reply, c);
	return weft_kv_client_put(
	    svc, node, c->key, klen, evbuffer_pullup(c->value, -1),
	    evbuffer_get_length(c->value), &opts, on_reply, c);
}

/* Waits for the reply: the request's own timeout ends it, the extra
 * second only guards against a callback that never comes. */
static void
wait_reply(struct cli *c)
{
	struct timespec ts;
	uint64_t ms = c->timeout_ms + 1000;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&c->lock);
	while (!c->done && pthread_cond_timedwait(&c->cond, &c->lock, &ts) == 0)
		;
	if (!c->done) {
		c->status = WEFT_ETIMEDOUT;
		c->done = true;
	}
	pthread_mutex_unlock(&c->lock);
}

static void
print_entry(const void *key, size_t key_len, const void *value,
            size_t value_len, void *arg)
{
	(void)arg;
	printf("%.*s\t%.*s\n", (int)key_len, (const char *)key, (int)value_len,
	       (const char *)value);
}

/* Prints a scan's entries; 0, or WEFT_EINVAL for a malformed answer. */
static int
print_scan(struct cli *c)
{
	size_t len = evbuffer_get_length(c->reply), next_len;
	const void *next;

	if (weft_kv_scan_parse(evbuffer_pullup(c->reply, -1), len, print_entry,
	                       NULL, &next, &next_len) < 0)
		return WEFT_EINVAL;
	if (next != NULL)
		fprintf(stderr, "weft-kv: more from %.*s\n", (int)next_len,
		        (const char *)next);
	return 0;
}

/* Prints the outcome; returns the exit code. */
static int
report(struct cli *c)
{
	size_t len = evbuffer_get_length(c->reply);

	if (c->status == 0 && strcmp(c->cmd, "scan") == 0 &&
	    print_scan(c) != 0) {
		fprintf(stderr, "weft-kv: scan: malformed answer\n");
		return EXIT_FAILURE;
	}
	if (c->status == 0) {
		if (strcmp(c->cmd, "get") == 0) {
			fwrite(evbuffer_pullup(c->reply, -1), 1, len, stdout);
			fputc('\n', stdout);
		}
		return fflush(stdout) == 0 ? 0 : EXIT_FAILURE;
	}
	fprintf(stderr, "weft-kv: %s %s: %s%s%.*s\n", c->cmd, c->key,
	        weft_strerror(c->status), len ? ": " : "", (int)len,
	        (const char *)evbuffer_pullup(c->reply, -1));
	return EXIT_FAILURE;
}

/* Connects, asks and prints; returns the exit code. */
static int
run(struct cli *c, weft_msvc_config *cfg)
{
	char id[WEFT_MSVC_MAX_ID + 1], err[512];
	weft_msvc_opts opts = {0};
	weft_loop_group *group;
	weft_msvc_peer *node;
	weft_msvc *svc;
	int rv, code = EXIT_FAILURE;

	if (c->client_id == NULL)
		snprintf(id, sizeof(id), "weft-kv-%ld", (long)getpid());
	else
		snprintf(id, sizeof(id), "%s", c->client_id);
	if (weftd_tls_ctx_from_config(cfg, c->tls_cert, c->tls_key, &opts.tls,
	                              err, sizeof(err)) != 0) {
		fprintf(stderr, "weft-kv: %s\n", err);
		return WEFTD_EXIT_CONFIG;
	}
	if (weft_loop_group_new(1, &group) != 0)
		goto out_tls;
	if ((rv = weft_msvc_new(group, cfg, id, &opts, &svc)) != 0) {
		fprintf(stderr, "weft-kv: %s\n", weft_strerror(rv));
		goto out_group;
	}
	if (weft_msvc_is_member(svc)) {
		fprintf(stderr, "weft-kv: client id '%s' is a node's id\n", id);
		code = EXIT_USAGE;
	} else if ((node = weft_msvc_peer_find(svc, c->node)) == NULL) {
		fprintf(stderr, "weft-kv: %s: no node '%s'\n", c->config_path,
		        c->node);
		code = WEFTD_EXIT_CONFIG;
	} else if ((rv = weft_msvc_start(svc)) != 0 ||
	           (rv = send_request(c, svc, node)) != 0) {
		fprintf(stderr, "weft-kv: %s %s: %s\n", c->cmd, c->key,
		        weft_strerror(rv));
	} else {
		wait_reply(c);
		code = report(c);
	}
	weft_msvc_stop(svc, 0);
	weft_msvc_free(svc);
out_group:
	weft_loop_group_free(group);
out_tls:
	if (opts.tls != NULL)
		weft_tls_ctx_unref(opts.tls);
	return code;
}

int
main(int argc, char **argv)
{
	struct cli c = {.timeout_ms = DEFAULT_TIMEOUT_MS};
	const char *host;
	weft_msvc_config *cfg;
	char err[512];
	uint16_t port;
	int code;

	if (getenv("WEFT_LOG") == NULL)
		weft_log_set_level(WEFT_LOG_WARN);
	if ((code = parse_args(&c, argc, argv)) != 0)
		return code;
	if ((code = weftd_config_load(c.config_path, &cfg, err, sizeof(err))) !=
	    0) {
		fprintf(stderr, "weft-kv: %s\n", err);
		return code == WEFT_ENOMEM ? EXIT_FAILURE : WEFTD_EXIT_CONFIG;
	}
	if (c.node == NULL &&
	    weft_msvc_config_node(cfg, 0, &c.node, &host, &port) != 0) {
		weft_msvc_config_free(cfg);
		return WEFTD_EXIT_CONFIG;
	}
	pthread_mutex_init(&c.lock, NULL);
	pthread_cond_init(&c.cond, NULL);
	code = EXIT_FAILURE;
	if ((c.reply = evbuffer_new()) != NULL)
		code = run(&c, cfg);
	if (c.reply != NULL)
		evbuffer_free(c.reply);
	if (c.value != NULL)
		evbuffer_free(c.value);
	pthread_cond_destroy(&c.cond);
	pthread_mutex_destroy(&c.lock);
	weft_msvc_config_free(cfg);
	return code;
}
