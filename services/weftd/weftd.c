/* SPDX-License-Identifier: MIT */
/*
 * weftd.c: the node daemon. `weftd --config cluster.ini --id n1` runs one
 * member of the cluster: the messaging service on a loop group, the
 * built-in ping and echo verbs and the key-value service. The main thread
 * runs a loop of its own for signals (as libevent signal events, so no
 * work happens in a signal handler) and the optional /metrics endpoint.
 * docs/WEFTD.md is the operator's guide.
 */
#include <getopt.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "weftd_int.h"

static void
usage(FILE *f)
{
	fprintf(f,
	        "usage: weftd --config FILE --id NODE [--tls-cert FILE "
	        "--tls-key FILE]\n"
	        "       weftd --check-config --config FILE [--id NODE]\n"
	        "Runs one node of a weft cluster (weftd(8), docs/WEFTD.md).\n"
	        "  -c, --config FILE  the cluster configuration (INI, "
	        "weft.conf(5))\n"
	        "  -i, --id NODE      this node's id, a [node ID] of FILE\n"
	        "  --check-config     check FILE (and NODE's settings, TLS "
	        "files)\n"
	        "                     and exit: 0 if it is good, 78 if "
	        "not\n"
	        "  --tls-cert FILE    this node's certificate, instead of "
	        "[tls] cert\n"
	        "  --tls-key FILE     its key, instead of [tls] key\n"
	        "  -h, --help         this text\n"
	        "  -V, --version      the version\n");
}

/* Parses the command line; 0, or an exit code. */
static int
parse_args(struct weftd *d, int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"config", required_argument, NULL, 'c'},
	    {"id", required_argument, NULL, 'i'},
	    {"tls-cert", required_argument, NULL, 'C'},
	    {"tls-key", required_argument, NULL, 'K'},
	    {"help", no_argument, NULL, 'h'},
	    {"version", no_argument, NULL, 'V'},
	    {"check-config", no_argument, NULL, 'k'},
	    {NULL, 0, NULL, 0},
	};
	int c;

	while ((c = getopt_long(argc, argv, "c:i:C:K:hV", longopts, NULL)) !=
	       -1) {
		switch (c) {
		case 'c':
			d->config_path = optarg;
			break;
		case 'i':
			d->id = optarg;
			break;
		case 'C':
			d->tls_cert = optarg;
			break;
		case 'K':
			d->tls_key = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case 'V':
			printf("weftd %s\n", weft_version());
			exit(0);
		case 'k':
			d->check_only = true;
			break;
		default:
			usage(stderr);
			return WEFTD_EXIT_USAGE;
		}
	}
	if (optind != argc || d->config_path == NULL ||
	    (d->id == NULL && !d->check_only)) {
		usage(stderr);
		return WEFTD_EXIT_USAGE;
	}
	return 0;
}

static bool
is_member(const weft_msvc_config *cfg, const char *id)
{
	size_t i, n = weft_msvc_config_node_count(cfg);
	const char *nid, *host;
	uint16_t port;

	for (i = 0; i < n; i++) {
		if (weft_msvc_config_node(cfg, i, &nid, &host, &port) == 0 &&
		    strcmp(nid, id) == 0)
			return true;
	}
	return false;
}

/* An error of weft_msvc_host_check as an exit code: one that needs an
 * edit is a configuration error, one the DNS may mend is not (systemd
 * starts the node again). */
static int
host_exit(int rv)
{
	return rv == WEFT_ECONFIG || rv == WEFT_ENOTFOUND ? WEFTD_EXIT_CONFIG
	                                                  : WEFTD_EXIT_FAIL;
}

/* One address key of node id's settings (listen, metrics_listen): for
 * this node, an address of this host; 0 or an exit code. */
static int
check_address(struct weftd *d, const char *id, const char *key,
              const char *host)
{
	char why[384], where[300], section[WEFT_MSVC_MAX_ID + 8];
	bool self = d->id != NULL && strcmp(id, d->id) == 0;
	int rv;

	if (host[0] == '\0')
		return 0;
	if ((rv = weft_msvc_host_check(host, self, why, sizeof(why))) == 0)
		return 0;
	weftd_settings_where(d->cfg, id, key, section, sizeof(section), where,
	                     sizeof(where));
	if (rv == WEFT_EADDR && !self) {
		weft_warn("%s: [%s] %s: %s", where, section, key, why);
		return 0;
	}
	fprintf(stderr, "weftd: %s: [%s] %s: %s\n", where, section, key, why);
	return host_exit(rv);
}

/* The addresses node id binds (s, its settings); 0 or an exit code. */
static int
check_hosts(struct weftd *d, const struct weftd_settings *s, const char *id)
{
	int rv = check_address(d, id, "listen", s->listen.host);

	return rv != 0
	           ? rv
	           : check_address(d, id, "metrics_listen", s->metrics.host);
}

/* Reads and checks the configuration; 0, or an exit code. */
static int
load_config(struct weftd *d)
{
	char err[512];
	int rv;

	rv = weftd_config_load(d->config_path, &d->cfg, err, sizeof(err));
	if (rv != 0) {
		fprintf(stderr, "weftd: %s\n", err);
		return rv == WEFT_ENOMEM ? WEFTD_EXIT_FAIL : WEFTD_EXIT_CONFIG;
	}
	if (d->id != NULL && !is_member(d->cfg, d->id)) {
		fprintf(stderr,
		        "weftd: %s: unknown node id '%s' (no [node %s] "
		        "section)\n",
		        d->config_path, d->id, d->id);
		return WEFTD_EXIT_CONFIG;
	}
	/* What depends on this host too (CPUs, the file limit), and the TLS
	 * files: starting and --check-config run the same checks, so that a
	 * configuration the check passes cannot be refused at start. */
	if (weftd_settings_load(d, err, sizeof(err)) != 0 ||
	    weftd_cluster_read(d->cfg, &d->cluster, err, sizeof(err)) != 0 ||
	    weft_kv_config_check(d->cfg, err, sizeof(err)) != 0 ||
	    weft_msvc_config_check(d->cfg, err, sizeof(err)) != 0 ||
	    weftd_tls_open(d, err, sizeof(err)) != 0) {
		fprintf(stderr, "weftd: %s\n", err);
		return WEFTD_EXIT_CONFIG;
	}
	/* Last: names are looked up, which may take the resolver's time. A
	 * node that binds a listen address of its own never resolves the
	 * host it advertises (its record may not exist yet): that host is
	 * checked as another member's. Another member's name without a
	 * record fails the check of the file, and is a warning at start. */
	if ((rv = weft_msvc_config_check_hosts(
	         d->cfg, d->set.listen.host[0] != '\0' ? NULL : d->id,
	         d->check_only, err, sizeof(err))) != 0) {
		fprintf(stderr, "weftd: %s\n", err);
		return host_exit(rv);
	}
	return d->id != NULL ? check_hosts(d, &d->set, d->id) : 0;
}

/* --check-config: what starting would refuse, without starting (see
 * load_config). With --id, that node's settings; without, every node's.
 * 0 or an exit code. */
static int
check_config(struct weftd *d)
{
	struct weftd_settings s;
	const char *id, *host;
	char err[512];
	uint16_t port;
	size_t i, n = weft_msvc_config_node_count(d->cfg);
	int rv;

	for (i = 0; d->id == NULL && i < n; i++) {
		weft_msvc_config_node(d->cfg, i, &id, &host, &port);
		if (weftd_settings_read(d->cfg, id, &s, err, sizeof(err))) {
			fprintf(stderr, "weftd: %s\n", err);
			return WEFTD_EXIT_CONFIG;
		}
		if ((rv = check_hosts(d, &s, id)) != 0)
			return rv;
	}
	printf("weftd: %s: configuration OK (cluster %s, %zu node%s%s%s)\n",
	       d->config_path, weft_msvc_config_cluster(d->cfg), n,
	       n == 1 ? "" : "s", d->id ? ", this one " : "",
	       d->id ? d->id : "");
	return 0;
}

static void
on_ping(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	(void)svc;
	(void)arg;
	if (weft_msvc_msg_is_request(msg))
		weft_msvc_respond(msg, "", 0);
}

static void
on_echo(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	(void)svc;
	(void)arg;
	if (weft_msvc_msg_is_request(msg))
		weft_msvc_respond(msg, weft_msvc_msg_data(msg),
		                  weft_msvc_msg_len(msg));
}

/* Tells the service manager how ready the node is (its first line).
 * Peer events and the replica's catch-up call it from different threads:
 * each says what it found in the order it found it, so the last word is
 * the newest. */
static void
notify_status(struct weftd *d)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	struct evbuffer *buf = evbuffer_new();
	char line[256];
	size_t n;

	if (buf == NULL)
		return;
	pthread_mutex_lock(&lock);
	weftd_readyz(d, buf, false);
	n = evbuffer_remove(buf, line, sizeof(line) - 1);
	line[n] = '\0';
	line[strcspn(line, "\n")] = '\0';
	weftd_notify("STATUS=%s", line);
	pthread_mutex_unlock(&lock);
	evbuffer_free(buf);
}

static void
on_peer(weft_msvc *svc, weft_msvc_peer *peer, bool up, void *arg)
{
	struct weftd *d = arg;

	(void)svc;
	weft_info("weftd: peer %s is %s", weft_msvc_peer_id(peer),
	          up ? "up" : "down");
	if (atomic_load(&d->ready))
		notify_status(d);
}

/* The replica answers reads from now on: /readyz's replica check passes. */
static void
on_caught_up(weft_kv *kv, void *arg)
{
	struct weftd *d = arg;

	(void)kv;
	if (atomic_load(&d->ready))
		notify_status(d);
}

static bool
first_dials_ended(struct weftd *d)
{
	size_t i, n = weft_msvc_peer_count(d->svc);

	for (i = 0; i < n; i++) {
		weft_msvc_peer *p = weft_msvc_peer_at(d->svc, i);

		if (!weft_msvc_peer_is_self(p) && !weft_msvc_peer_is_up(p) &&
		    !weft_msvc_peer_is_down(p))
			return false;
	}
	return true;
}

/*
 * Waits until the first dial to each member has ended, up or failed, for
 * at most connect_timeout. A member that is up has then been dialed by
 * this node, and is no longer known down to it (peer.c): a write through
 * it right after the ready line does not fail for a node it thought down
 * when it started before this one.
 */
static void
wait_first_dials(struct weftd *d)
{
	const weft_msvc_limits *l = weft_msvc_config_limits_const(d->cfg);
	uint64_t start = weft_now_ns();

	while (!first_dials_ended(d) &&
	       weft_now_ns() - start < l->connect_timeout_ms * 1000000)
		usleep(2000);
}

/* Builds the service with its verbs; 0 or a WEFT_E code (logged). */
static int
start_service(struct weftd *d)
{
	const weft_msvc_limits *l = weft_msvc_config_limits_const(d->cfg);
	weft_msvc_opts opts = {.tls = d->tls,
	                       .trace_sample_rate = d->set.trace_sample_rate};
	weft_kv_opts kv_opts = {.config = d->cfg,
	                        .on_caught_up = on_caught_up,
	                        .on_caught_up_arg = d,
	                        .await_members = d->cluster.discovery ==
	                                         WEFTD_DISCOVERY_DNS_SRV};
	int rv;

	/* [weftd] listen: bound here, while the node's host is only what
	 * others dial (a name that may not resolve yet). */
	if (d->set.listen.host[0] != '\0') {
		opts.listen_host = d->set.listen.host;
		opts.listen_port = d->set.listen.port;
	}
	if ((rv = weft_loop_group_new(l->loops, &d->group)) != 0 ||
	    (rv = weft_msvc_new(d->group, d->cfg, d->id, &opts, &d->svc)) !=
	        0 ||
	    (rv = weft_msvc_register(d->svc, WEFTD_VERB_PING, "ping", on_ping,
	                             d, WEFT_MSVC_CLIENTS)) != 0 ||
	    (rv = weft_msvc_register(d->svc, WEFTD_VERB_ECHO, "echo", on_echo,
	                             d, WEFT_MSVC_CLIENTS)) != 0 ||
	    (rv = weft_msvc_on_peer_event(d->svc, on_peer, d)) != 0 ||
	    (d->set.load && (rv = weftd_load_register(d)) != 0) ||
	    (rv = weft_kv_new(d->svc, &kv_opts, &d->kv)) != 0 ||
	    (rv = weftd_status_register(d)) != 0 ||
	    (rv = weftd_spans_start(d)) != 0) {
		weft_error("weftd: %s: cannot set up the service: %s", d->id,
		           weft_strerror(rv));
		return rv;
	}
	if ((rv = weft_msvc_start(d->svc)) != 0) {
		weft_error("weftd: %s: cannot start: %s", d->id,
		           weft_strerror(rv));
		return rv;
	}
	/* Every member is dialed now and watched by heartbeats from here on,
	 * not at its first message: an idle member is reported up (peer_up,
	 * /readyz) as soon as it answers, and a dead one down. */
	weft_msvc_watch_members(d->svc);
	wait_first_dials(d);
	return 0;
}

static void
dump_metrics_to_stderr(struct weftd *d)
{
	struct evbuffer *buf = evbuffer_new();

	if (buf == NULL || weftd_metrics_dump(d, buf) != 0) {
		weft_warn("weftd: SIGUSR1: out of memory for the metrics");
	} else {
		/* One write, so the dump is not interleaved with log lines
		 * from the loops (stderr is unbuffered). */
		fflush(stderr);
		evbuffer_write(buf, STDERR_FILENO);
		while (evbuffer_get_length(buf) > 0 &&
		       evbuffer_write(buf, STDERR_FILENO) > 0)
			;
	}
	if (buf != NULL)
		evbuffer_free(buf);
}

/* Runs on the main loop, never in a signal handler. */
static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct weftd *d = arg;

	(void)what;
	switch (sig) {
	case SIGUSR1:
		dump_metrics_to_stderr(d);
		break;
	case SIGHUP:
		weftd_tls_reload(d);
		weftd_spans_reopen(d);
		if (d->cluster.discovery == WEFTD_DISCOVERY_FILE)
			weftd_reload(d, "SIGHUP", true);
		break;
	default:
		d->stop_signal = (int)sig;
		weft_loop_stop(d->main_loop);
		break;
	}
}

static int
add_signals(struct weftd *d)
{
	static const int sigs[WEFTD_SIGNALS] = {SIGTERM, SIGINT, SIGUSR1,
	                                        SIGHUP};
	struct event_base *base = weft_loop_base(d->main_loop);
	size_t i;

	/* A write to a closed pipe (a client gone) must not kill us. */
	signal(SIGPIPE, SIG_IGN);
	for (i = 0; i < WEFTD_SIGNALS; i++) {
		d->signals[i] = evsignal_new(base, sigs[i], on_signal, d);
		if (d->signals[i] == NULL || evsignal_add(d->signals[i], NULL))
			return WEFT_ENOMEM;
	}
	return 0;
}

/* Freeing the events restores the default actions: a second SIGTERM
 * while draining ends the process at once. */
static void
remove_signals(struct weftd *d)
{
	size_t i;

	for (i = 0; i < WEFTD_SIGNALS; i++) {
		if (d->signals[i] != NULL)
			event_free(d->signals[i]);
		d->signals[i] = NULL;
	}
}

static void
print_ready(struct weftd *d)
{
	char metrics[300] = "off";

	if (d->http != NULL)
		weftd_format_address(&d->set.metrics, d->metrics_bound_port,
		                     metrics, sizeof(metrics));
	weft_info("weftd: node %s of cluster %s ready on port %u, metrics %s",
	          d->id, weft_msvc_config_cluster(d->cfg),
	          weft_msvc_port(d->svc), metrics);
	printf("weftd ready node=%s port=%u metrics=%s\n", d->id,
	       weft_msvc_port(d->svc), metrics);
	fflush(stdout);
	/* Ready for systemd is started: listening and serving. Whether
	 * enough members are up for writes is the status line's and
	 * /readyz's to say, and changes as they come and go. */
	weftd_notify("READY=1\nSTATUS=serving on port %u",
	             weft_msvc_port(d->svc));
	atomic_store(&d->ready, true);
	notify_status(d);
}

/* Drains the service and frees everything, in reverse order of making. */
static void
teardown(struct weftd *d)
{
	remove_signals(d);
	weftd_discovery_stop(d);
	weftd_reload_stop(d);
	weftd_http_stop(d);
	weftd_health_stop(d);
	weftd_load_stop(d);
	if (d->svc != NULL) {
		weft_info("weftd: %s: draining (up to %llu ms)", d->id,
		          (unsigned long long)d->set.shutdown_timeout_ms);
		weft_msvc_stop(d->svc, d->set.shutdown_timeout_ms);
	}
	weftd_load_free(d);
	weft_kv_free(d->kv);
	weft_msvc_free(d->svc);
	weftd_spans_free(d);
	/* The loops close what is still open (the metrics and health
	 * listeners' connections) after its writes drain, run their
	 * shutdown hooks and end. */
	if (d->group != NULL) {
		weft_loop_group_shutdown(d->group, d->set.shutdown_timeout_ms);
		weft_loop_group_free(d->group);
	}
	weftd_health_free(d);
	weftd_tls_close(d);
	if (d->main_loop != NULL)
		weft_loop_free(d->main_loop);
	weft_msvc_config_free(d->cfg);
}

int
main(int argc, char **argv)
{
	struct weftd d;
	int rv, err;

	memset(&d, 0, sizeof(d));
	d.started_ns = weft_now_ns();
#ifdef M_MMAP_THRESHOLD
	/* Blocks of 1 MiB and more (large frames, large values) are mapped
	 * and unmapped on their own: glibc would otherwise raise its
	 * threshold to the largest block freed (up to 32 MiB) and keep what
	 * a burst of maximum-size writes used in its arenas. */
	mallopt(M_MMAP_THRESHOLD, 1024 * 1024);
#endif
	if ((rv = parse_args(&d, argc, argv)) != 0 ||
	    (rv = load_config(&d)) != 0)
		goto out;
	if (d.check_only) {
		rv = check_config(&d);
		goto out;
	}
	rv = WEFTD_EXIT_FAIL;
	if (weft_loop_new(&d.main_loop) != 0 || add_signals(&d) != 0)
		goto out;
	if ((err = start_service(&d)) != 0) {
		/* A [kv] value the service refused is a configuration error. */
		if (err == WEFT_ECONFIG)
			rv = WEFTD_EXIT_CONFIG;
		goto out;
	}
	if (weftd_http_start(&d) != 0 || weftd_health_start(&d) != 0 ||
	    (d.cluster.discovery == WEFTD_DISCOVERY_FILE &&
	     weftd_reload_start(&d) != 0) ||
	    weftd_discovery_start(&d) != 0)
		goto out;
	print_ready(&d);
	weft_loop_run(d.main_loop);
	weft_info("weftd: %s: signal %d, stopping", d.id, d.stop_signal);
	atomic_store(&d.ready, false);
	weftd_notify("STOPPING=1\nSTATUS=draining (signal %d)", d.stop_signal);
	rv = 0;
out:
	teardown(&d);
	if (rv == 0 && !d.check_only)
		weft_info("weftd: %s: stopped", d.id);
	return rv;
}
