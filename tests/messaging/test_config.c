/* SPDX-License-Identifier: MIT */
/* test_config.c: the cluster configuration, from code and from INI. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cmocka.h>

#include <weft/messaging.h>

#include "msvc_int.h"

static const char good_ini[] = "# a cluster of two\n"
                               "[cluster]\n"
                               "name = demo\n"
                               "\n"
                               "[node n1]\n"
                               "host = 127.0.0.1\n"
                               "port = 7001\n"
                               "[node n2]\n"
                               "host = 127.0.0.1\n"
                               "port = 0\n"
                               "[limits]\n"
                               "max_frame = 16MiB\n"
                               "outbound_queue = 1M\n"
                               "inbound_inflight = 4096\n"
                               "large_message = 32 KiB\n"
                               "connect_timeout = 3s\n"
                               "heartbeat_interval = 250ms\n"
                               "heartbeat_misses = 5\n"
                               "reconnect_min = 10\n"
                               "reconnect_max = 2s\n"
                               "request_timeout = 1500ms\n"
                               "loops = 2\n"
                               "worker_threads = 3\n"
                               "connections_small = 4\n"
                               "allow_clients = no\n"
                               "max_protocol_version = 1\n"
                               "[tls]\n"
                               "mode = optional\n"
                               "cert = /tmp/n.crt\n"
                               "key = /tmp/n.key\n"
                               "ca = /tmp/ca.crt\n"
                               "min_version = 1.3\n"
                               "[kv]\n"
                               "replicas = 3\n";

static void
test_parse_reads_every_field(void **state)
{
	const weft_msvc_limits *l;
	const weft_msvc_tls_config *t;
	weft_msvc_config *cfg;
	const char *id, *host;
	uint16_t port;
	char err[256];

	(void)state;
	assert_int_equal(weft_msvc_config_parse(good_ini, "good.ini", &cfg, err,
	                                        sizeof(err)),
	                 0);
	assert_string_equal(weft_msvc_config_cluster(cfg), "demo");
	assert_int_equal(weft_msvc_config_node_count(cfg), 2);
	assert_int_equal(weft_msvc_config_node(cfg, 1, &id, &host, &port), 0);
	assert_string_equal(id, "n2");
	assert_string_equal(host, "127.0.0.1");
	assert_int_equal(port, 0);
	assert_int_equal(weft_msvc_config_node(cfg, 2, &id, &host, &port),
	                 WEFT_EINVAL);
	l = weft_msvc_config_limits_const(cfg);
	assert_int_equal(l->max_frame_bytes, 16 << 20);
	assert_int_equal(l->outbound_queue_bytes, 1 << 20);
	assert_int_equal(l->inbound_inflight_bytes, 4096);
	assert_int_equal(l->large_message_bytes, 32 << 10);
	assert_int_equal(l->connect_timeout_ms, 3000);
	assert_int_equal(l->heartbeat_interval_ms, 250);
	assert_int_equal(l->heartbeat_misses, 5);
	assert_int_equal(l->reconnect_min_ms, 10);
	assert_int_equal(l->reconnect_max_ms, 2000);
	assert_int_equal(l->request_timeout_ms, 1500);
	assert_int_equal(l->loops, 2);
	assert_int_equal(l->worker_threads, 3);
	assert_int_equal(l->max_protocol_version, 1);
	assert_int_equal(l->connections[WEFT_MSVC_SMALL], 4);
	assert_int_equal(l->connections[WEFT_MSVC_URGENT], 1);
	assert_false(l->allow_clients);
	assert_int_equal(l->max_pending_requests, 65536); /* default */
	t = weft_msvc_config_tls(cfg);
	assert_int_equal(t->mode, WEFT_MSVC_TLS_OPTIONAL);
	assert_string_equal(t->cert_file, "/tmp/n.crt");
	assert_string_equal(t->key_file, "/tmp/n.key");
	assert_string_equal(t->ca_file, "/tmp/ca.crt");
	assert_string_equal(t->min_version, "1.3");
	assert_string_equal(weft_msvc_config_get(cfg, "kv", "replicas"), "3");
	assert_null(weft_msvc_config_get(cfg, "kv", "acks"));
	weft_msvc_config_free(cfg);
}

struct bad_case {
	const char *text;
	const char *expect; /* substring of the error */
};

static const struct bad_case bad_cases[] = {
    {"[cluster]\nname = a\n[node n1]\nhost = h\nport = 1\nbogus = 2\n",
     "bad.ini:6: [node n1]: unknown key 'bogus'"},
    {"[cluster]\nname = a\n[node n1]\nhost = h\nport = 70000\n",
     "bad.ini:5: [node n1] port: 70000 is out of range (0 to 65535)"},
    {"[cluster]\nname = a\n[node n1]\nhost = h\n[limits]\n",
     "bad.ini:3: [node n1] needs host and port"},
    {"[cluster]\nname = a\n[node n1]\nhost = h\nport = 1\n"
     "[limits]\nmax_frame = 12 parsecs\n",
     "bad.ini:7: [limits] max_frame: not a size: '12 parsecs'"},
    {"[cluster]\nname = a\n[node n1]\nhost = h\nport = 1\n"
     "[limits]\nrequest_timeout = 0\n",
     "bad.ini:7: [limits] request_timeout: must not be 0"},
    {"[cluster]\nname = a\n[node n1]\nhost = h\nport = 1\n"
     "[node n1]\nhost = h\nport = 2\n",
     "bad.ini:6: duplicate section [node n1] (first at line 3)"},
    {"[cluster]\nname = a b\n",
     "bad.ini:2: [cluster] name: bad cluster name 'a b'"},
    {"[node n1]\nhost = h\nport = 1\n", "bad.ini: no [cluster] name"},
    {"[cluster]\nname = a\n", "bad.ini: no [node ...] section"},
    {"[cluster]\nname = a\n[node n1]\nhost = h\nport = 1\n"
     "[limits]\nreconnect_min = 5s\nreconnect_max = 1s\n",
     "bad.ini:7: [limits] reconnect_min: 5000 ms is above reconnect_max "
     "(1000 ms)"},
    {"[cluster]\nname = a\n[node n1]\nhost = h\nport = 1\n[limits]\n"
     "worker_threads = 1000000\n",
     "bad.ini:7: [limits] worker_threads: 1000000 is out of range (1 to "
     "1024): 0 is the default"},
    {"[cluster]\nname = a\n[node n1]\nhost = h\nport = 1\n[limits]\n"
     "max_pending_requests = 0\n",
     "bad.ini:7: [limits] max_pending_requests: must not be 0: "},
    {"[cluster]\nname = a\n[node n1]\nhost = h\nport = 1\n[limits]\n"
     "large_message = 4KiB\noutbound_queue = 1\n",
     "bad.ini:8: [limits] outbound_queue: 1 is below large_message (4096)"},
    {"[cluster]\nname = a\n[node n1]\nhost = h\nport = 1\n[tls]\n"
     "mode = sometimes\n",
     "bad.ini:7: [tls] mode: 'sometimes' is not one of none, all, optional"},
    {"[cluster]\nname = a\nthis line is not ini\n", "bad.ini:3: syntax"},
    {"name = a\n", "bad.ini:1: 'name' outside of any section"},
    {"[cluster]\nname = a\n[node bad/id]\nhost = h\nport = 1\n",
     "bad.ini:3: bad node id 'bad/id'"},
    {"[cluster]\nname = a\n[node n1]\nhost = h\nport = 1\n[limits]\n"
     "max_protocol_version = 3\n",
     "bad.ini:7: [limits] max_protocol_version: 3 is out of range (1 to 2)"},
    {"[cluster]\nname = a\n[node n1]\nhost = h\nport = 1\n[limits]\n"
     "connections_small = 1000\n",
     "bad.ini:7: [limits] connections_small: 1000 is out of range (1 to 64)"},
    {"[cluster]\nname = a\n[node n1]\nhost = h\nport = 1\n[limits]\n"
     "max_frame = 99999999999999999999999\n",
     "bad.ini:7: [limits] max_frame: not a size"},
    /* A header without its "]": inih keeps the lines after it in the
     * section before, which once read as that section's duplicate. */
    {"[cluster]\nname = a\n[node n1]\nhost = h\nport = 1\n"
     "[node n2\nhost = h\nport = 2\n",
     "bad.ini:6: unclosed section header '[node n2' (no ']')"},
    {"[cluster]\nname = a\n[node n1]\nhost = h\nport = 1\n"
     "[node n2 ; ]\nhost = h\nport = 2\n",
     "bad.ini:6: unclosed section header '[node n2 ; ]' (no ']')"},
};

static void
test_bad_config_names_the_line(void **state)
{
	weft_msvc_config *cfg = NULL;
	char err[256];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		err[0] = '\0';
		assert_int_equal(weft_msvc_config_parse(bad_cases[i].text,
		                                        "bad.ini", &cfg, err,
		                                        sizeof(err)),
		                 WEFT_ECONFIG);
		if (strstr(err, bad_cases[i].expect) == NULL)
			fail_msg("case %zu: got '%s', want '%s'", i, err,
			         bad_cases[i].expect);
		assert_null(cfg);
	}
}

/* A component's section, as [kv] or [weftd] use them. */
struct app_settings {
	size_t buffer;
	uint64_t timeout_ms;
	bool verbose;
	uint32_t count;
	weft_msvc_conf_address listen;
	int mode;
	const char *label;
};
static const char *const app_modes[] = {"fast", "safe", NULL};
#define APP_KEY(type, name, field, ...)                                        \
	WEFT_MSVC_CONF_KEY(type, name, struct app_settings, field, __VA_ARGS__)
static const weft_msvc_conf_key app_keys[] = {
    APP_KEY(SIZE, "buffer", buffer, .min = 1),
    APP_KEY(DURATION, "timeout", timeout_ms),
    APP_KEY(BOOL, "verbose", verbose),
    APP_KEY(U32, "count", count, .max = 10),
    APP_KEY(ADDRESS, "listen", listen),
    APP_KEY(CHOICE, "mode", mode, .choices = app_modes),
    APP_KEY(STRING, "label", label),
};
static const weft_msvc_conf_section app_section = {
    .name = "app",
    .keys = app_keys,
    .nkeys = sizeof(app_keys) / sizeof(app_keys[0]),
    .size = sizeof(struct app_settings),
    .per_node = true,
};
static const weft_msvc_conf_section *const app_sections[] = {&app_section};
static const weft_msvc_config_opts app_opts = {
    .sections = app_sections, .nsections = 1, .strict = true};

#define CLUSTER_AB                                                             \
	"[cluster]\nname = c\n[node a]\nhost = 127.0.0.1\nport = 1\n"          \
	"[node b]\nhost = 127.0.0.1\nport = 2\n"

/* [cluster] takes the keys of a component section named "cluster" (as
 * weftd's discovery), checked against it; without one, only name. */
struct cluster_extra {
	const char *discovery;
	uint64_t grace_ms;
};
static const weft_msvc_conf_key cluster_extra_keys[] = {
    WEFT_MSVC_CONF_KEY(STRING, "discovery", struct cluster_extra, discovery),
    WEFT_MSVC_CONF_KEY(DURATION, "grace", struct cluster_extra, grace_ms),
};
static const weft_msvc_conf_section cluster_extra_section = {
    .name = "cluster",
    .keys = cluster_extra_keys,
    .nkeys = 2,
    .size = sizeof(struct cluster_extra),
};

static void
test_cluster_section_takes_a_component_keys(void **state)
{
	static const weft_msvc_conf_section *const sections[] = {
	    &cluster_extra_section};
	static const weft_msvc_config_opts opts = {
	    .sections = sections, .nsections = 1, .strict = true};
	struct cluster_extra c = {NULL, 0};
	weft_msvc_config *cfg;
	char err[256] = "";

	(void)state;
	assert_int_equal(weft_msvc_config_parse_opts(
	                     "[cluster]\ndiscovery = dns\n"
	                     "name = c\ngrace = 2s\n"
	                     "[node a]\nhost = 127.0.0.1\nport = 1\n",
	                     "x.ini", &opts, &cfg, err, sizeof(err)),
	                 0);
	assert_string_equal(weft_msvc_config_cluster(cfg), "c");
	assert_int_equal(weft_msvc_config_read(cfg, &cluster_extra_section,
	                                       NULL, &c, err, sizeof(err)),
	                 0);
	assert_string_equal(c.discovery, "dns");
	assert_int_equal(c.grace_ms, 2000);
	weft_msvc_config_free(cfg);
	/* A key neither knows, at its line. */
	assert_int_equal(
	    weft_msvc_config_parse_opts("[cluster]\nname = c\ngrase = 2s\n",
	                                "x.ini", &opts, &cfg, err, sizeof(err)),
	    WEFT_ECONFIG);
	assert_non_null(strstr(err, "x.ini:3:"));
	/* Without the component, its keys are unknown. */
	assert_int_equal(
	    weft_msvc_config_parse_opts("[cluster]\nname = c\ngrace = 2s\n",
	                                "x.ini", NULL, &cfg, err, sizeof(err)),
	    WEFT_ECONFIG);
	assert_non_null(strstr(err, "x.ini:3:"));
}

/* The same grammar in every section: what [limits] takes, [app] takes. */
static void
test_one_grammar_for_every_section(void **state)
{
	static const char text[] =
	    CLUSTER_AB "[limits]\nmax_frame = 16MB\nrequest_timeout = 5 s\n"
	               "allow_clients = off\n"
	               "[app]\nbuffer = 16MB\ntimeout = 5 s\nverbose = yes\n"
	               "count = 7\nlisten = [::1]:9100\nmode = SAFE\n"
	               "label = hello world\n"
	               "[app b]\ntimeout = 2m\nlisten = 127.0.0.1:0\n";
	struct app_settings a = {.count = 1}, b = {.count = 1};
	weft_msvc_config *cfg;
	char err[256] = "";

	(void)state;
	assert_int_equal(weft_msvc_config_parse_opts(text, "g.ini", &app_opts,
	                                             &cfg, err, sizeof(err)),
	                 0);
	assert_int_equal(weft_msvc_config_limits(cfg)->max_frame_bytes,
	                 16u << 20);
	assert_int_equal(weft_msvc_config_limits(cfg)->request_timeout_ms,
	                 5000);
	assert_false(weft_msvc_config_limits(cfg)->allow_clients);
	assert_int_equal(
	    weft_msvc_config_read(cfg, &app_section, "a", &a, err, sizeof(err)),
	    0);
	assert_int_equal(a.buffer, 16u << 20);
	assert_int_equal(a.timeout_ms, 5000);
	assert_true(a.verbose);
	assert_int_equal(a.count, 7);
	assert_string_equal(a.listen.host, "::1");
	assert_int_equal(a.listen.port, 9100);
	assert_int_equal(a.mode, 1);
	assert_string_equal(a.label, "hello world");
	/* [app b] overrides [app] for node b only. */
	assert_int_equal(
	    weft_msvc_config_read(cfg, &app_section, "b", &b, err, sizeof(err)),
	    0);
	assert_int_equal(b.timeout_ms, 120000);
	assert_string_equal(b.listen.host, "127.0.0.1");
	assert_int_equal(b.listen.port, 0);
	assert_int_equal(b.buffer, 16u << 20);
	weft_msvc_config_where(cfg, "app", "count", err, sizeof(err));
	assert_string_equal(err, "g.ini:17");
	weft_msvc_config_where(cfg, "app", "nothing", err, sizeof(err));
	assert_string_equal(err, "g.ini");
	weft_msvc_config_free(cfg);
}

static const struct bad_case bad_app_cases[] = {
    {CLUSTER_AB "[app]\nbufer = 1\n", "bad.ini:10: [app]: unknown key 'bufer'"},
    {CLUSTER_AB "[app]\nbuffer = 16 MQ\n",
     "bad.ini:10: [app] buffer: not a size: '16 MQ'"},
    {CLUSTER_AB "[app]\nbuffer = 0\n",
     "bad.ini:10: [app] buffer: must not be 0"},
    {CLUSTER_AB "[app]\ntimeout = soon\n",
     "bad.ini:10: [app] timeout: not a duration: 'soon'"},
    {CLUSTER_AB "[app]\nverbose = maybe\n",
     "bad.ini:10: [app] verbose: not a boolean: 'maybe'"},
    {CLUSTER_AB "[app]\ncount = 11\n",
     "bad.ini:10: [app] count: 11 is out of range (0 to 10)"},
    {CLUSTER_AB "[app]\ncount = -1\n", "bad.ini:10: [app] count: not a number"},
    {CLUSTER_AB "[app]\nlisten = nowhere\n",
     "bad.ini:10: [app] listen: not an address: 'nowhere'"},
    {CLUSTER_AB "[app]\nlisten = ::1:80\n",
     "bad.ini:10: [app] listen: not an address"},
    {CLUSTER_AB "[app]\nlisten = h:70000\n",
     "bad.ini:10: [app] listen: not an address"},
    {CLUSTER_AB "[app]\nmode = slow\n",
     "bad.ini:10: [app] mode: 'slow' is not one of fast, safe"},
    {CLUSTER_AB "[app]\ncount = 1\ncount = 2\n",
     "bad.ini:11: [app]: duplicate key 'count' (first at line 10)"},
    {CLUSTER_AB "[app z]\ncount = 1\n",
     "bad.ini:9: [app z]: no such node (no [node z] section)"},
    {CLUSTER_AB "[ap]\ncount = 1\n", "bad.ini:9: unknown section [ap]"},
    /* The first error by line, whichever section it is in. */
    {CLUSTER_AB "[app]\ncount = 99\n[limits]\nloops = x\n",
     "bad.ini:10: [app] count"},
    {"[app]\ncount = 99\n" CLUSTER_AB "[limits]\nloops = x\n",
     "bad.ini:2: [app] count"},
};

static void
test_component_sections_are_checked_while_loading(void **state)
{
	weft_msvc_config *cfg = NULL;
	char err[256];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad_app_cases) / sizeof(bad_app_cases[0]); i++) {
		err[0] = '\0';
		assert_int_equal(weft_msvc_config_parse_opts(
		                     bad_app_cases[i].text, "bad.ini",
		                     &app_opts, &cfg, err, sizeof(err)),
		                 WEFT_ECONFIG);
		if (strstr(err, bad_app_cases[i].expect) == NULL)
			fail_msg("case %zu: got '%s', want '%s'", i, err,
			         bad_app_cases[i].expect);
		assert_null(cfg);
	}
}

/* Without the section's table at load, weft_msvc_config_read still names
 * the file and line of a bad value; unknown sections are kept. */
static void
test_read_reports_file_and_line(void **state)
{
	static const char text[] = CLUSTER_AB "[app]\nverbose = perhaps\n"
	                                      "[other]\nx = 1\n";
	struct app_settings a = {0};
	weft_msvc_config *cfg;
	char err[256] = "";

	(void)state;
	assert_int_equal(
	    weft_msvc_config_parse(text, "r.ini", &cfg, err, sizeof(err)), 0);
	assert_string_equal(weft_msvc_config_get(cfg, "other", "x"), "1");
	assert_int_equal(weft_msvc_config_read(cfg, &app_section, NULL, &a, err,
	                                       sizeof(err)),
	                 WEFT_ECONFIG);
	assert_non_null(strstr(err, "r.ini:10: [app] verbose: not a boolean"));
	weft_msvc_config_free(cfg);
}

static void
test_load_file_and_missing_file(void **state)
{
	char path[] = "/tmp/weft-msvc-cfg-XXXXXX";
	weft_msvc_config *cfg = NULL;
	char err[256];
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, good_ini, strlen(good_ini)),
	                 (ssize_t)strlen(good_ini));
	close(fd);
	assert_int_equal(weft_msvc_config_load(path, &cfg, err, sizeof(err)),
	                 0);
	assert_string_equal(weft_msvc_config_cluster(cfg), "demo");
	weft_msvc_config_free(cfg);
	unlink(path);
	cfg = NULL;
	assert_int_equal(weft_msvc_config_load(path, &cfg, err, sizeof(err)),
	                 WEFT_EIO);
	assert_non_null(strstr(err, path));
	assert_null(cfg);
}

static void
test_build_in_code(void **state)
{
	weft_msvc_tls_config tls = {.mode = WEFT_MSVC_TLS_ALL,
	                            .cert_file = "c.pem"};
	weft_msvc_config *cfg;

	(void)state;
	assert_int_equal(weft_msvc_config_new("bad name", &cfg), WEFT_EINVAL);
	assert_int_equal(weft_msvc_config_new("c1", &cfg), 0);
	assert_int_equal(weft_msvc_config_add_node(cfg, "a", "127.0.0.1", 0),
	                 0);
	assert_int_equal(weft_msvc_config_add_node(cfg, "a", "127.0.0.1", 1),
	                 WEFT_EEXIST);
	assert_int_equal(weft_msvc_config_add_node(cfg, "", "h", 1),
	                 WEFT_EINVAL);
	weft_msvc_config_limits(cfg)->large_message_bytes = 1000;
	assert_int_equal(
	    weft_msvc_config_limits_const(cfg)->large_message_bytes, 1000);
	assert_int_equal(weft_msvc_config_set_tls(cfg, &tls), 0);
	assert_string_equal(weft_msvc_config_tls(cfg)->cert_file, "c.pem");
	assert_null(weft_msvc_config_tls(cfg)->key_file);
	weft_msvc_config_free(cfg);
	weft_msvc_config_free(NULL);
}

/* 170 members under a file limit of 1024: their connections took every
 * descriptor and the node refused even its members. The check says so,
 * and a member's service refuses to start, reading the limit again. */
static void
test_check_holds_the_members_within_the_file_limit(void **state)
{
	weft_msvc_config *cfg;
	weft_loop_group *group;
	struct rlimit saved, low;
	weft_msvc *svc;
	char err[512], id[16];
	unsigned k;

	(void)state;
	assert_int_equal(weft_msvc_config_new("c", &cfg), 0);
	for (k = 0; k < 170; k++) {
		snprintf(id, sizeof(id), "m%u", k);
		assert_int_equal(weft_msvc_config_add_node(cfg, id, "127.0.0.1",
		                                           k == 0 ? 0 : 1),
		                 0);
	}
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
	low = saved;
	low.rlim_cur = 1024;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	assert_int_equal(weft_msvc_config_check(cfg, err, sizeof(err)),
	                 WEFT_ECONFIG);
	assert_non_null(strstr(err, "<config>: [node m169]: 170 members need "
	                            "1084 descriptors"));
	assert_int_equal(weft_loop_group_new(1, &group), 0);
	assert_int_equal(weft_msvc_new(group, cfg, "m0", NULL, &svc), 0);
	assert_int_equal(weft_msvc_start(svc), WEFT_ECONFIG);
	weft_msvc_free(svc);
	low.rlim_cur = 1096; /* the least the message names */
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
	assert_int_equal(weft_msvc_config_check(cfg, err, sizeof(err)), 0);
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
	weft_loop_group_free(group);
	/* Built in code, a service refuses what would exhaust the host. */
	weft_msvc_config_limits(cfg)->worker_threads = 1000000;
	assert_int_equal(weft_msvc_config_check(cfg, err, sizeof(err)),
	                 WEFT_ECONFIG);
	assert_non_null(strstr(err, "worker_threads: 1000000 is above 1024"));
	weft_msvc_config_free(cfg);
}

/* The configuration in force for the change tests, and what it may
 * become: each "then" with whether a running n1 takes it and, if not, what
 * the message must say. */
static const char change_base[] = "[cluster]\nname = c\n"
                                  "[node n1]\nhost = 10.0.0.1\nport = 7001\n"
                                  "[node n2]\nhost = 10.0.0.2\nport = 7002\n"
                                  "[limits]\nrequest_timeout = 2s\n"
                                  "[weftd n2]\nshutdown_timeout = 1s\n";

static void
test_check_change_takes_members_and_refuses_the_rest(void **state)
{
	static const struct {
		const char *then;
		const char *refused; /* NULL: taken */
	} cases[] = {
	    /* A member added, moved, removed; another node's own section. */
	    {"[cluster]\nname = c\n[node n1]\nhost = 10.0.0.1\nport = 7001\n"
	     "[node n2]\nhost = 10.0.0.9\nport = 7002\n"
	     "[node n3]\nhost = 10.0.0.3\nport = 7003\n"
	     "[limits]\nrequest_timeout = 2s\n"
	     "[weftd n2]\nshutdown_timeout = 3s\n",
	     NULL},
	    {"[cluster]\nname = c\n[node n1]\nhost = 10.0.0.1\nport = 7001\n"
	     "[limits]\nrequest_timeout = 2s\n",
	     NULL},
	    /* A limit changed: its line in the new file. */
	    {"[cluster]\nname = c\n[node n1]\nhost = 10.0.0.1\nport = 7001\n"
	     "[node n2]\nhost = 10.0.0.2\nport = 7002\n"
	     "[limits]\nrequest_timeout = 3s\n",
	     "new.ini:10: [limits] request_timeout: '3s' (it is '2s')"},
	    /* Written differently is a change too. */
	    {"[cluster]\nname = c\n[node n1]\nhost = 10.0.0.1\nport = 7001\n"
	     "[limits]\nrequest_timeout = 2000ms\n",
	     "new.ini:7: [limits] request_timeout"},
	    {"[cluster]\nname = c\n[node n1]\nhost = 10.0.0.1\nport = 7001\n",
	     "new.ini: [limits] request_timeout: removed"},
	    {"[cluster]\nname = c\n[node n1]\nhost = 10.0.0.1\nport = 7001\n"
	     "[limits]\nrequest_timeout = 2s\nloops = 2\n",
	     "new.ini:8: [limits] loops: added"},
	    /* This node's own: its address, its removal, its section. */
	    {"[cluster]\nname = c\n[node n1]\nhost = 10.0.0.1\nport = 7009\n"
	     "[limits]\nrequest_timeout = 2s\n",
	     "new.ini:3: [node n1]: this node's own address"},
	    {"[cluster]\nname = c\n[node n2]\nhost = 10.0.0.2\nport = 7002\n"
	     "[limits]\nrequest_timeout = 2s\n",
	     "[node n1]: removed, but it is this node"},
	    {"[cluster]\nname = c\n[node n1]\nhost = 10.0.0.1\nport = 7001\n"
	     "[limits]\nrequest_timeout = 2s\n"
	     "[weftd n1]\nshutdown_timeout = 3s\n",
	     "new.ini:9: [weftd n1] shutdown_timeout: added"},
	    {"[cluster]\nname = d\n[node n1]\nhost = 10.0.0.1\nport = 7001\n"
	     "[limits]\nrequest_timeout = 2s\n",
	     "[cluster] name: 'd' (it is 'c')"},
	};
	weft_msvc_config *old, *cfg;
	char err[512];
	size_t i;
	int rv;

	(void)state;
	assert_int_equal(weft_msvc_config_parse(change_base, "old.ini", &old,
	                                        err, sizeof(err)),
	                 0);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(weft_msvc_config_parse(cases[i].then,
		                                        "new.ini", &cfg, err,
		                                        sizeof(err)),
		                 0);
		err[0] = '\0';
		rv = weft_msvc_config_check_change(old, cfg, "n1", err,
		                                   sizeof(err));
		if (cases[i].refused == NULL) {
			assert_int_equal(rv, 0);
		} else {
			assert_int_equal(rv, WEFT_ECONFIG);
			if (strstr(err, cases[i].refused) == NULL)
				fail_msg("case %zu: '%s' lacks '%s'", i, err,
				         cases[i].refused);
		}
		weft_msvc_config_free(cfg);
	}
	weft_msvc_config_free(old);
}

/* The chunk size fits this node's frames and the peer's announced ones,
 * with the chunk's header; a peer announcing frames too small for a
 * chunk (a lie) gets the least chunk, never a size that wraps below
 * zero. */
static void
test_chunk_size_fits_the_frames_of_both_ends(void **state)
{
	weft_msvc_limits l = {.max_frame_bytes = 32u << 20,
	                      .chunk_bytes = 128u << 10};

	(void)state;
	assert_int_equal(weft__msvc_chunk_bytes(&l, 0), 128u << 10);
	assert_int_equal(weft__msvc_chunk_bytes(&l, 64u << 10),
	                 (64u << 10) - WEFT__MSVC_CHUNK_OVERHEAD);
	l.max_frame_bytes = 16u << 10;
	assert_int_equal(weft__msvc_chunk_bytes(&l, 0),
	                 (16u << 10) - WEFT__MSVC_CHUNK_OVERHEAD);
	/* Frames of 2 KiB (below a configuration file's least, possible
	 * through the API) still take chunks. */
	assert_int_equal(weft__msvc_chunk_bytes(&l, 2048),
	                 2048 - WEFT__MSVC_CHUNK_OVERHEAD);
	assert_int_equal(weft__msvc_chunk_bytes(&l, 10), WEFT__MSVC_CHUNK_MIN);
	assert_int_equal(weft__msvc_chunk_bytes(&l, 1), WEFT__MSVC_CHUNK_MIN);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_reads_every_field),
	    cmocka_unit_test(test_bad_config_names_the_line),
	    cmocka_unit_test(test_one_grammar_for_every_section),
	    cmocka_unit_test(test_component_sections_are_checked_while_loading),
	    cmocka_unit_test(test_read_reports_file_and_line),
	    cmocka_unit_test(test_load_file_and_missing_file),
	    cmocka_unit_test(test_build_in_code),
	    cmocka_unit_test(test_cluster_section_takes_a_component_keys),
	    cmocka_unit_test(test_chunk_size_fits_the_frames_of_both_ends),
	    cmocka_unit_test(
	        test_check_holds_the_members_within_the_file_limit),
	    cmocka_unit_test(
	        test_check_change_takes_members_and_refuses_the_rest),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
