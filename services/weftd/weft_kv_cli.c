/* SPDX-License-Identifier: MIT */
/*
 * weft_kv_cli.c: weft-kv, the key-value service's command-line client. It
 * joins the cluster as a non-member client (its answers come back on the
 * connection it opens), sends one request and prints the result.
 *
 *   weft-kv --config FILE [--node ID] [--timeout-ms N]
 *           [--consistency one|quorum|all] get KEY
 *   weft-kv --config FILE [--node ID] [--timeout-ms N] put KEY VALUE|-
 *   weft-kv --config FILE [--node ID] [--timeout-ms N] delete KEY
 *   weft-kv --config FILE [--node ID] [--timeout-ms N] scan START [COUNT]
 *   weft-kv --config FILE [--node ID] [--timeout-ms N] scan --prefix P [COUNT]
 *   weft-kv --config FILE [--node ID] [--timeout-ms N] ping | status
 *
 * --output json prints get, scan, ping and status as JSON; text output
 * escapes keys and values (kv_format.c) unless --raw.
 *
 * Exit codes: 0 success, 1 the request failed (not found, timeout, ...),
 * 2 bad usage, 78 configuration.
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
	const char *key;        /* scan: the start key */
	const char *prefix;     /* scan --prefix */
	bool json;              /* --output json */
	bool raw;               /* --raw: get prints the value's bytes */
	weft_kv_consistency cl; /* --consistency; DEFAULT: the node's */
	struct evbuffer *value;
	unsigned long scan_count;
	const weft_msvc_config *cfg;
	char id[WEFT_MSVC_MAX_ID + 1];
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
	        "               [--consistency one|quorum|all]\n"
	        "               get KEY | put KEY VALUE | put KEY - | "
	        "delete KEY |\n"
	        "               scan START [COUNT] | scan --prefix P [COUNT] "
	        "|\n"
	        "               ping | status\n"
	        "               [--output text|json] [--raw]\n"
	        "  put KEY - reads the value from standard input.\n"
	        "  --consistency: how many replicas a get reads (default: "
	        "the\n  node's [kv] read_consistency).\n"
	        "  scan prints up to COUNT (default 10) live keys from START "
	        "on\n  (or those that start with P), KEY<tab>VALUE a line, in "
	        "order.\n"
	        "  Text output escapes keys and values (\\n, \\t, \\\\, "
	        "\\xHH);\n  --raw prints get's value as it is. JSON gives "
	        "UTF-8 as strings,\n  other bytes as base64 (KEY_base64, "
	        "VALUE_base64).\n"
	        "  ping times a round trip to the node; status prints its view "
	        "of\n  the cluster.\n"
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

/* Reads the arguments after the options, the command's; 0 if they fit
 * it. */
static int
parse_command(struct cli *c, int args, char **argv)
{
	const char *count = NULL;
	char *end;

	c->cmd = argv[0];
	if (strcmp(c->cmd, "ping") == 0 || strcmp(c->cmd, "status") == 0)
		return args == 1 ? 0 : -1;
	if (strcmp(c->cmd, "scan") == 0) {
		/* With --prefix the start is the prefix. */
		if (c->prefix != NULL && args <= 2) {
			c->key = c->prefix;
			count = args == 2 ? argv[1] : NULL;
		} else if (c->prefix == NULL && (args == 2 || args == 3)) {
			c->key = argv[1];
			count = args == 3 ? argv[2] : NULL;
		} else {
			return -1;
		}
		c->scan_count = count ? strtoul(count, &end, 10) : 10;
		return (count == NULL || *end == '\0') && c->scan_count > 0 &&
		               (c->prefix != NULL ||
		                c->scan_count <= WEFT_KV_MAX_SCAN)
		           ? 0
		           : -1;
	}
	if (args < 2 || c->prefix != NULL)
		return -1;
	c->key = argv[1];
	if ((strcmp(c->cmd, "get") == 0 || strcmp(c->cmd, "delete") == 0) &&
	    args == 2)
		return 0;
	if (strcmp(c->cmd, "put") == 0 && args == 3)
		return read_value(c, argv[2]) ? -1 : 0;
	return -1;
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
	    {"prefix", required_argument, NULL, 'p'},
	    {"output", required_argument, NULL, 'o'},
	    {"raw", no_argument, NULL, 'r'},
	    {"consistency", required_argument, NULL, 'L'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {NULL, 0, NULL, 0},
	};
	int opt;
	char *end;

	while ((opt = getopt_long(argc, argv, "c:n:t:i:C:K:p:o:rL:hV", longopts,
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
		case 'p':
			c->prefix = optarg;
			break;
		case 'o':
			if (strcmp(optarg, "json") != 0 &&
			    strcmp(optarg, "text") != 0)
				goto bad;
			c->json = strcmp(optarg, "json") == 0;
			break;
		case 'r':
			c->raw = true;
			break;
		case 'L':
			if (weft_kv_consistency_parse(optarg, &c->cl) != 0)
				goto bad;
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
	if (c->config_path != NULL && argc > optind &&
	    parse_command(c, argc - optind, argv + optind) == 0)
		return 0;
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

/* Sends c's get, put, delete or one page of a scan from start. */
static int
send_request(struct cli *c, weft_msvc *svc, weft_msvc_peer *node,
             const void *start, size_t start_len, uint32_t count)
{
	weft_msvc_call_opts opts = {.timeout_ms = c->timeout_ms};
	size_t klen = strlen(c->key);

	pthread_mutex_lock(&c->lock);
	c->done = false;
	c->status = 0;
	evbuffer_drain(c->reply, evbuffer_get_length(c->reply));
	pthread_mutex_unlock(&c->lock);
	if (strcmp(c->cmd, "get") == 0)
		return weft_kv_client_get_at(svc, node, c->key, klen, c->cl,
		                             &opts, on_reply, c);
	if (strcmp(c->cmd, "delete") == 0)
		return weft_kv_client_delete(svc, node, c->key, klen, &opts,
		                             on_reply, c);
	if (strcmp(c->cmd, "scan") == 0)
		return weft_kv_client_scan(svc, node, start, start_len, count,
		                           &opts, on_reply, c);
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

/* ---- Scans -------------------------------------------------------------- */

/* A scan printing as it goes, over one or more pages. */
struct scan_print {
	struct cli *c;
	unsigned long left; /* entries still wanted */
	bool first;         /* no entry printed yet (JSON commas) */
	bool past_prefix;   /* an entry without the prefix came: done */
};

static bool
has_prefix(const struct cli *c, const void *key, size_t len)
{
	size_t plen = c->prefix != NULL ? strlen(c->prefix) : 0;

	return plen == 0 || (len >= plen && memcmp(key, c->prefix, plen) == 0);
}

static void
print_entry(const void *key, size_t key_len, const void *value,
            size_t value_len, void *arg)
{
	struct scan_print *sp = arg;

	if (sp->left == 0 || sp->past_prefix)
		return;
	if (!has_prefix(sp->c, key, key_len)) {
		sp->past_prefix = true;
		return;
	}
	sp->left--;
	if (sp->c->json) {
		printf("%s{", sp->first ? "" : ",");
		weftd_print_json_bytes(stdout, "key", key, key_len);
		putchar(',');
		weftd_print_json_bytes(stdout, "value", value, value_len);
		putchar('}');
	} else {
		weftd_print_escaped(stdout, key, key_len);
		putchar('\t');
		weftd_print_escaped(stdout, value, value_len);
		putchar('\n');
	}
	sp->first = false;
}

/* Ends a scan's output: where the rest starts, if it is wanted. */
static void
print_scan_end(struct scan_print *sp, const void *next, size_t next_len)
{
	if (next != NULL && !has_prefix(sp->c, next, next_len))
		next = NULL;
	if (sp->c->json) {
		printf("],");
		if (next != NULL)
			weftd_print_json_bytes(stdout, "next", next, next_len);
		else
			printf("\"next\":null");
		printf("}\n");
	} else if (next != NULL) {
		fprintf(stderr, "weft-kv: more from ");
		weftd_print_escaped(stderr, next, next_len);
		fputc('\n', stderr);
	}
}

/* Scans page by page until count entries, the end of the prefix or the
 * end of the keys; 0 or the failed page's status (c->status). */
static int
run_scan(struct cli *c, weft_msvc *svc, weft_msvc_peer *node)
{
	struct scan_print sp = {.c = c, .left = c->scan_count, .first = true};
	struct evbuffer *start = evbuffer_new();
	const void *next = NULL;
	size_t next_len = 0;
	uint32_t count;
	int rv = WEFT_ENOMEM;

	if (start == NULL || evbuffer_add(start, c->key, strlen(c->key)) != 0)
		goto out;
	if (c->json)
		printf("{\"entries\":[");
	do {
		count = sp.left < WEFT_KV_MAX_SCAN ? (uint32_t)sp.left
		                                   : WEFT_KV_MAX_SCAN;
		rv = send_request(c, svc, node, evbuffer_pullup(start, -1),
		                  evbuffer_get_length(start), count);
		if (rv != 0 || (wait_reply(c), rv = c->status) != 0)
			break;
		if (weft_kv_scan_parse(evbuffer_pullup(c->reply, -1),
		                       evbuffer_get_length(c->reply),
		                       print_entry, &sp, &next,
		                       &next_len) < 0) {
			rv = c->status = WEFT_EPROTO;
			break;
		}
		evbuffer_drain(start, evbuffer_get_length(start));
		if (next != NULL && evbuffer_add(start, next, next_len) != 0)
			rv = WEFT_ENOMEM;
	} while (rv == 0 && sp.left > 0 && !sp.past_prefix && next != NULL &&
	         c->prefix != NULL && has_prefix(c, next, next_len));
	if (rv == 0)
		print_scan_end(&sp, sp.past_prefix ? NULL : next, next_len);
	else if (c->json)
		printf("]}\n");
out:
	if (start != NULL)
		evbuffer_free(start);
	return rv;
}

/* ---- Outcomes ----------------------------------------------------------- */

static void
print_get(struct cli *c)
{
	size_t len = evbuffer_get_length(c->reply);
	const void *value = evbuffer_pullup(c->reply, -1);

	if (c->json) {
		putchar('{');
		weftd_print_json_bytes(stdout, "key", c->key, strlen(c->key));
		putchar(',');
		weftd_print_json_bytes(stdout, "value", value, len);
		printf("}\n");
		return;
	}
	if (c->raw)
		fwrite(value, 1, len, stdout);
	else
		weftd_print_escaped(stdout, value, len);
	putchar('\n');
}

/*
 * With TLS and no identity of its own (no --id or no --tls-cert), a node
 * that refuses this client is most likely refusing the identity: the
 * certificate of [tls] cert, a node's, claimed as an id it does not
 * name. Says so, rather than only "peer down". True if it did.
 */
static bool
explain_identity(const struct cli *c, int status)
{
	const weft_msvc_tls_config *tls = weft_msvc_config_tls(c->cfg);
	const char *cert = c->tls_cert ? c->tls_cert : tls->cert_file;

	if (tls->mode == WEFT_MSVC_TLS_NONE ||
	    (c->client_id != NULL && c->tls_cert != NULL) ||
	    (status != WEFT_EPEERDOWN && status != WEFT_EAUTH &&
	     status != WEFT_ETLS))
		return false;
	fprintf(stderr,
	        "weft-kv: %s %s: node %s refused this client (%s): under TLS "
	        "a client's id must be the name its certificate carries, and "
	        "this one claimed id '%s' with the certificate %s%s. Pass "
	        "--tls-cert FILE --tls-key FILE with a client certificate and "
	        "--id with the name it carries (docs/SECURITY.md).\n",
	        c->cmd, c->key ? c->key : "", c->node, weft_strerror(status),
	        c->id, cert ? cert : "(none)",
	        c->tls_cert ? "" : " (the [tls] cert of the configuration)");
	return true;
}

/* Prints the outcome of a command that ran with status; returns the exit
 * code. */
static int
report(struct cli *c, int status)
{
	size_t len = evbuffer_get_length(c->reply);
	const char *what = c->key != NULL ? c->key : c->node;

	if (status == 0) {
		if (strcmp(c->cmd, "get") == 0)
			print_get(c);
		return fflush(stdout) == 0 ? 0 : EXIT_FAILURE;
	}
	if (explain_identity(c, status))
		return EXIT_FAILURE;
	fprintf(stderr, "weft-kv: %s %s: %s%s", c->cmd, what,
	        weft_strerror(status), len ? ": " : "");
	weftd_print_escaped(stderr, evbuffer_pullup(c->reply, -1), len);
	fputc('\n', stderr);
	return EXIT_FAILURE;
}

/* Runs the command on node; its status. */
static int
run_command(struct cli *c, weft_msvc *svc, weft_msvc_peer *node)
{
	int rv;

	if (strcmp(c->cmd, "ping") == 0)
		return weftd_kv_ping(svc, node, c->timeout_ms, c->json);
	if (strcmp(c->cmd, "status") == 0)
		return weftd_kv_status(svc, node, c->timeout_ms, c->json);
	if (strcmp(c->cmd, "scan") == 0)
		return run_scan(c, svc, node);
	if ((rv = send_request(c, svc, node, NULL, 0, 0)) != 0)
		return rv;
	wait_reply(c);
	return c->status;
}

/* Connects, asks and prints; returns the exit code. */
static int
run(struct cli *c, weft_msvc_config *cfg)
{
	char err[512];
	weft_msvc_opts opts = {0};
	weft_loop_group *group;
	weft_msvc_peer *node;
	weft_msvc *svc;
	int rv, code = EXIT_FAILURE;

	c->cfg = cfg;
	if (c->client_id == NULL)
		snprintf(c->id, sizeof(c->id), "weft-kv-%ld", (long)getpid());
	else
		snprintf(c->id, sizeof(c->id), "%s", c->client_id);
	if (weftd_tls_ctx_from_config(cfg, c->tls_cert, c->tls_key, &opts.tls,
	                              err, sizeof(err)) != 0) {
		fprintf(stderr, "weft-kv: %s\n", err);
		return WEFTD_EXIT_CONFIG;
	}
	if (weft_loop_group_new(1, &group) != 0)
		goto out_tls;
	if ((rv = weft_msvc_new(group, cfg, c->id, &opts, &svc)) != 0) {
		fprintf(stderr, "weft-kv: %s\n", weft_strerror(rv));
		goto out_group;
	}
	if (weft_msvc_is_member(svc)) {
		fprintf(stderr, "weft-kv: client id '%s' is a node's id\n",
		        c->id);
		code = EXIT_USAGE;
	} else if ((node = weft_msvc_peer_find(svc, c->node)) == NULL) {
		fprintf(stderr, "weft-kv: %s: no node '%s'\n", c->config_path,
		        c->node);
		code = WEFTD_EXIT_CONFIG;
	} else if ((rv = weft_msvc_start(svc)) != 0) {
		fprintf(stderr, "weft-kv: %s: %s\n", c->cmd, weft_strerror(rv));
	} else {
		code = report(c, run_command(c, svc, node));
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
