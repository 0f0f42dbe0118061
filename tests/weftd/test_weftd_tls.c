/* SPDX-License-Identifier: MIT */
/*
 * test_weftd_tls.c: three weftd processes with mutual TLS ([tls] mode =
 * all), certificates made at test time with the openssl command line:
 * requests to every node and between every pair, weft-kv over TLS, a
 * plaintext client refused, and SIGHUP reloading the certificate (a
 * broken file keeps the old one).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include <weft/kv.h>
#include <weft/tls.h>

#include "support/ports.h"
#include "support/weftd_proc.h"
#include "weftd_proto.h"

#define NODES 3
#define WAIT_MS 10000
#define CLIENT "tls-client"

static const char *const ids[NODES] = {"n1", "n2", "n3"};

struct fixture {
	char dir[64];
	char config[128];
	uint16_t ports[NODES];
	struct wt_proc p[NODES];
	weft_tls_ctx *tls;
	weft_loop_group *group;
	weft_msvc *client;
};

/* Runs a shell command in dir; asserts that it succeeded. */
static void
shell(const char *dir, const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	int n;

	n = snprintf(cmd, sizeof(cmd), "cd '%s' && ", dir);
	va_start(ap, fmt);
	vsnprintf(cmd + n, sizeof(cmd) - (size_t)n, fmt, ap);
	va_end(ap);
	assert_int_equal(system(cmd), 0);
}

/* A key and a certificate for name (subjectAltName DNS:name), signed by
 * the test CA. */
static void
make_cert(const char *dir, const char *name)
{
	shell(dir,
	      "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
	      "-nodes -keyout %s.key -out %s.csr -subj /CN=%s 2>/dev/null && "
	      "printf 'subjectAltName=DNS:%s\\n' > %s.ext && "
	      "openssl x509 -req -in %s.csr -CA ca.crt -CAkey ca.key "
	      "-CAcreateserial -days 2 -extfile %s.ext -out %s.crt "
	      "2>/dev/null && rm %s.csr %s.ext",
	      name, name, name, name, name, name, name, name, name, name);
}

static void
make_certs(struct fixture *f)
{
	int i;

	shell(f->dir, "openssl req -x509 -newkey ec -pkeyopt "
	              "ec_paramgen_curve:prime256v1 -nodes -keyout ca.key "
	              "-out ca.crt -subj /CN=weft-test-ca -days 2 2>/dev/null");
	for (i = 0; i < NODES; i++)
		make_cert(f->dir, ids[i]);
	make_cert(f->dir, CLIENT);
}

static void
write_config(struct fixture *f)
{
	char text[2048];
	int n;

	n = wt_config_begin(text, sizeof(text), "weftd-tls", ids, f->ports,
	                    NODES);
	snprintf(text + n, sizeof(text) - (size_t)n,
	         "request_timeout = 3s\n"
	         "[tls]\nmode = all\nca = %s/ca.crt\n"
	         "cert = %s/n1.crt\nkey = %s/n1.key\n"
	         "[weftd]\nmetrics_listen = 127.0.0.1:0\n"
	         "[kv]\nwrite_quorum = all\n",
	         f->dir, f->dir, f->dir);
	wt_write_file(f->config, text);
}

/* Starts node i with its own certificate. */
static void
node_start(struct fixture *f, int i)
{
	char cert[128], key[128];
	char *extra[] = {"--tls-cert", cert, "--tls-key", key, NULL};

	snprintf(cert, sizeof(cert), "%s/%s.crt", f->dir, ids[i]);
	snprintf(key, sizeof(key), "%s/%s.key", f->dir, ids[i]);
	wt_node_start(&f->p[i], f->config, f->dir, ids[i], f->ports[i], extra);
}

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	weft_tls_opts opts = {0};
	weft_msvc_opts client_opts = {0};
	char cert[128], key[128], ca[128];
	int i;

	assert_non_null(f);
	if (system("openssl version >/dev/null 2>&1") != 0) {
		free(f);
		return -1; /* no openssl command: nothing here can run */
	}
	snprintf(f->dir, sizeof(f->dir), "/tmp/weftd-tls-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->config, sizeof(f->config), "%s/cluster.ini", f->dir);
	make_certs(f);
	for (i = 0; i < NODES; i++)
		f->ports[i] = weft_test_free_port();
	write_config(f);
	for (i = 0; i < NODES; i++)
		node_start(f, i);
	snprintf(cert, sizeof(cert), "%s/%s.crt", f->dir, CLIENT);
	snprintf(key, sizeof(key), "%s/%s.key", f->dir, CLIENT);
	snprintf(ca, sizeof(ca), "%s/ca.crt", f->dir);
	opts.cert_file = cert;
	opts.key_file = key;
	opts.ca_file = ca;
	assert_int_equal(weft_tls_ctx_new(&opts, &f->tls), 0);
	client_opts.tls = f->tls;
	wt_client_start(f->config, CLIENT, &client_opts, &f->group, &f->client);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;
	int bad;

	wt_client_stop(f->group, f->client);
	weft_tls_ctx_unref(f->tls);
	bad = wt_nodes_stop(f->p, NODES);
	shell(f->dir, "rm -f *.crt *.key *.srl *.err cluster.ini");
	rmdir(f->dir);
	free(f);
	assert_int_equal(bad, 0);
	return 0;
}

/* ---- Requests ----------------------------------------------------------- */

static weft_msvc_peer *
peer(weft_msvc *svc, int i)
{
	return wt_peer(svc, ids[i]);
}

static int
echo(weft_msvc *svc, int i)
{
	struct wt_call c = WT_CALL_INIT;

	assert_int_equal(weft_msvc_request(svc, peer(svc, i), WEFTD_VERB_ECHO,
	                                   "hi", 2, NULL, wt_call_done, &c),
	                 0);
	return wt_call_wait(&c, WAIT_MS);
}

static int
put(weft_msvc *svc, int i, const char *key, const char *value)
{
	struct wt_call c = WT_CALL_INIT;

	assert_int_equal(weft_kv_client_put(svc, peer(svc, i), key, strlen(key),
	                                    value, strlen(value), NULL,
	                                    wt_call_done, &c),
	                 0);
	return wt_call_wait(&c, WAIT_MS);
}

/* Runs weft-kv over TLS as the client; returns its exit code and its
 * first output line in out. */
static int
run_kv(struct fixture *f, const char *node, const char *cmd, const char *key,
       char *out, size_t cap)
{
	char cert[128], key_file[128];
	char *argv[] = {WEFT_KV_PATH, "--config",  f->config, "--node",
	                (char *)node, "--id",      CLIENT,    "--tls-cert",
	                cert,         "--tls-key", key_file,  (char *)cmd,
	                (char *)key,  NULL};

	snprintf(cert, sizeof(cert), "%s/%s.crt", f->dir, CLIENT);
	snprintf(key_file, sizeof(key_file), "%s/%s.key", f->dir, CLIENT);
	return wt_run_line(argv, out, cap, WAIT_MS);
}

/* ---- Tests --------------------------------------------------------------- */

static void
test_tls_cluster_answers_every_node_and_pair(void **state)
{
	struct fixture *f = *state;
	char key[32], out[64];
	int i;

	for (i = 0; i < NODES; i++)
		assert_int_equal(echo(f->client, i), 0);
	/* write_quorum = all: each put crosses from its node to the two
	 * others and back, over TLS connections. */
	for (i = 0; i < NODES; i++) {
		snprintf(key, sizeof(key), "tls-%d", i);
		assert_int_equal(put(f->client, i, key, "secret"), 0);
	}
	assert_int_equal(run_kv(f, "n3", "get", "tls-0", out, sizeof(out)), 0);
	assert_string_equal(out, "secret");
}

/* Without --id and --tls-cert, weft-kv dials with the configuration's
 * certificate, a node's, under an id of its own: the node refuses it, and
 * weft-kv says which certificate and id it used and how to pass its own
 * rather than only "peer down". */
static void
test_kv_without_an_identity_says_why_it_is_refused(void **state)
{
	struct fixture *f = *state;
	char err_path[128], cert[128], out[256];
	char *argv[] = {WEFT_KV_PATH, "--config", f->config, "--node",
	                "n2",         "get",      "k",       NULL};

	snprintf(err_path, sizeof(err_path), "%s/weft-kv.err", f->dir);
	snprintf(cert, sizeof(cert), "%s/n1.crt", f->dir);
	assert_int_equal(
	    wt_run_output(argv, err_path, out, sizeof(out), WAIT_MS), 1);
	assert_true(
	    wt_file_contains(err_path, "node n2 refused this client", WAIT_MS));
	assert_true(wt_file_contains(err_path, cert, WAIT_MS));
	assert_true(
	    wt_file_contains(err_path, "claimed id 'weft-kv-", WAIT_MS));
	assert_true(wt_file_contains(err_path, "--tls-cert FILE", WAIT_MS));
	assert_true(wt_file_contains(err_path, "--id", WAIT_MS));
	unlink(err_path);
}

static void
test_plaintext_client_is_refused(void **state)
{
	struct fixture *f = *state;
	weft_loop_group *group;
	weft_msvc *plain;
	weft_msvc_config *cfg;
	weft_msvc_opts opts = {0};
	char err[256];
	int status;

	/* The same cluster, but a client that speaks plaintext. */
	assert_int_equal(
	    weft_msvc_config_load(f->config, &cfg, err, sizeof(err)), 0);
	weft_msvc_config_set_tls(cfg, &(weft_msvc_tls_config){0});
	assert_int_equal(weft_loop_group_new(1, &group), 0);
	assert_int_equal(weft_msvc_new(group, cfg, "plain", &opts, &plain), 0);
	weft_msvc_config_free(cfg);
	assert_int_equal(weft_msvc_start(plain), 0);
	{
		struct wt_call c = WT_CALL_INIT;
		weft_msvc_call_opts co = {.timeout_ms = 1000};

		assert_int_equal(weft_msvc_request(plain, peer(plain, 0),
		                                   WEFTD_VERB_ECHO, "x", 1, &co,
		                                   wt_call_done, &c),
		                 0);
		status = wt_call_wait(&c, WAIT_MS);
	}
	assert_int_not_equal(status, 0);
	wt_client_stop(group, plain);
	/* The node is unharmed. */
	assert_int_equal(echo(f->client, 0), 0);
}

static void
test_sighup_reloads_the_certificate(void **state)
{
	struct fixture *f = *state;
	char out[64];

	/* A new key and certificate for n1, in the same files. */
	make_cert(f->dir, "n1");
	assert_int_equal(kill(f->p[0].pid, SIGHUP), 0);
	assert_true(wt_file_contains(f->p[0].err_path,
	                             "TLS certificate reloaded", WAIT_MS));
	/* New connections use it. */
	assert_int_equal(run_kv(f, "n1", "get", "tls-1", out, sizeof(out)), 0);
	assert_string_equal(out, "secret");
	/* A broken file is refused and the node keeps the last good one. */
	shell(f->dir, "echo garbage > n1.crt");
	assert_int_equal(kill(f->p[0].pid, SIGHUP), 0);
	assert_true(
	    wt_file_contains(f->p[0].err_path, "TLS reload failed", WAIT_MS));
	assert_int_equal(run_kv(f, "n1", "get", "tls-2", out, sizeof(out)), 0);
	assert_string_equal(out, "secret");
	assert_int_equal(echo(f->client, 0), 0);
}

static void
test_metrics_say_how_tls_runs(void **state)
{
	struct fixture *f = *state;

	/* The cluster test above made TLS connections to every node. */
	assert_int_equal(echo(f->client, 0), 0);
	assert_int_equal(kill(f->p[0].pid, SIGUSR1), 0);
	assert_true(wt_file_contains(
	    f->p[0].err_path,
	    "weftd_tls_handshakes_total{node=\"n1\",kind=\"completed\"}",
	    WAIT_MS));
	assert_true(wt_file_contains(
	    f->p[0].err_path,
	    "weftd_tls_ktls_total{node=\"n1\",direction=", WAIT_MS));
	assert_true(wt_file_contains(
	    f->p[0].err_path, "weftd_tls_ktls_offered{node=\"n1\"}", WAIT_MS));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tls_cluster_answers_every_node_and_pair),
	    cmocka_unit_test(test_metrics_say_how_tls_runs),
	    cmocka_unit_test(test_plaintext_client_is_refused),
	    cmocka_unit_test(
	        test_kv_without_an_identity_says_why_it_is_refused),
	    cmocka_unit_test(test_sighup_reloads_the_certificate),
	};

	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, setup, teardown);
}
