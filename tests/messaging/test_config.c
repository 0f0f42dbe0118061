/* SPDX-License-Identifier: MIT */
/* test_config.c: the cluster configuration, from code and from INI. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <weft/messaging.h>

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
     "bad.ini:6: unknown key 'bogus' in [node n1]"},
    {"[cluster]\nname = a\n[node n1]\nhost = h\nport = 70000\n",
     "bad.ini:5: bad port '70000'"},
    {"[cluster]\nname = a\n[node n1]\nhost = h\n[limits]\n",
     "bad.ini:3: [node n1] needs host and port"},
    {"[cluster]\nname = a\n[node n1]\nhost = h\nport = 1\n"
     "[limits]\nmax_frame = 12 parsecs\n",
     "bad.ini:7: max_frame: not a size: '12 parsecs'"},
    {"[cluster]\nname = a\n[node n1]\nhost = h\nport = 1\n"
     "[limits]\nrequest_timeout = 0\n",
     "bad.ini:7: request_timeout: must not be 0"},
    {"[cluster]\nname = a\n[node n1]\nhost = h\nport = 1\n"
     "[node n1]\nhost = h\nport = 2\n",
     "bad.ini:7: duplicate key 'host'"},
    {"[cluster]\nname = a b\n", "bad.ini:2: bad cluster name 'a b'"},
    {"[node n1]\nhost = h\nport = 1\n", "bad.ini: no [cluster] name"},
    {"[cluster]\nname = a\n", "bad.ini: no [node ...] section"},
    {"[cluster]\nname = a\n[node n1]\nhost = h\nport = 1\n"
     "[limits]\nreconnect_min = 5s\nreconnect_max = 1s\n",
     "reconnect_min is above reconnect_max"},
    {"[cluster]\nname = a\n[node n1]\nhost = h\nport = 1\n[tls]\n"
     "mode = sometimes\n",
     "bad.ini:7: tls mode 'sometimes'"},
    {"[cluster]\nname = a\nthis line is not ini\n", "bad.ini:3: syntax"},
    {"name = a\n", "bad.ini:1: 'name' outside of any section"},
    {"[cluster]\nname = a\n[node bad/id]\nhost = h\nport = 1\n",
     "bad.ini:3: bad node id 'bad/id'"},
    {"[cluster]\nname = a\n[node n1]\nhost = h\nport = 1\n[limits]\n"
     "connections_small = 1000\n",
     "more than 64 connections per class"},
    {"[cluster]\nname = a\n[node n1]\nhost = h\nport = 1\n[limits]\n"
     "max_frame = 99999999999999999999999\n",
     "bad.ini:7: max_frame: not a size"},
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

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_reads_every_field),
	    cmocka_unit_test(test_bad_config_names_the_line),
	    cmocka_unit_test(test_load_file_and_missing_file),
	    cmocka_unit_test(test_build_in_code),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
