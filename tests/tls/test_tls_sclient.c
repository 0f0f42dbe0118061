/* SPDX-License-Identifier: MIT */
/*
 * test_tls_sclient.c: a TLS client written by nobody here. `openssl
 * s_client` with a client certificate made by scripts/gen-certs.sh
 * completes the handshake with a weft TLS echo server and gets its line
 * back; without a certificate, or offering only TLS 1.2 to a TLS 1.3
 * server, it is refused. A TLS 1.2 server (min_version) serves it.
 */
#include <errno.h>
#include <fcntl.h>
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

#include "support/wait.h"
#include "tls_test.h"

#define LINE "hello from s_client\n"

static weft_loop *loop;
static tt_pki pki; /* only for its directory */
static char dir[128];

static int
setup(void **state)
{
	char cmd[512];

	(void)state;
	if (system("openssl version >/dev/null 2>&1") != 0)
		return 0; /* each test skips */
	if (tt_setup(&loop, &pki, NULL, NULL) != 0)
		return -1;
	snprintf(dir, sizeof(dir), "%s", pki.dir);
	snprintf(cmd, sizeof(cmd),
	         "sh %s/scripts/gen-certs.sh %s node-a --client probe "
	         ">/dev/null",
	         WEFT_SOURCE_DIR, dir);
	return system(cmd) == 0 ? 0 : -1;
}

static int
teardown(void **state)
{
	(void)state;
	if (loop != NULL)
		weft_loop_free(loop);
	if (dir[0] != '\0')
		tt_pki_free(&pki);
	return 0;
}

/* ---- Running s_client --------------------------------------------------- */

typedef struct sclient {
	pid_t pid;
	int in;  /* its stdin */
	int out; /* its stdout, non-blocking */
	char got[4096];
	size_t len;
	bool exited;
} sclient;

static void
sclient_start(sclient *c, uint16_t port, const char *extra)
{
	char cmd[1024];
	int to[2], from[2];

	memset(c, 0, sizeof(*c));
	snprintf(cmd, sizeof(cmd),
	         "exec openssl s_client -connect 127.0.0.1:%u -CAfile "
	         "%s/ca.crt -verify_return_error -servername node-a "
	         "-verify_hostname node-a -quiet %s 2>%s/s_client.err",
	         port, dir, extra, dir);
	assert_int_equal(pipe(to), 0);
	assert_int_equal(pipe(from), 0);
	c->pid = fork();
	assert_true(c->pid >= 0);
	if (c->pid == 0) {
		dup2(to[0], 0);
		dup2(from[1], 1);
		close(to[0]);
		close(to[1]);
		close(from[0]);
		close(from[1]);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	close(to[0]);
	close(from[1]);
	c->in = to[1];
	c->out = from[0];
	fcntl(c->out, F_SETFL, O_NONBLOCK);
}

/* sclient_poll takes what s_client printed; true once it printed LINE
 * or exited. */
static bool
sclient_poll(void *arg)
{
	sclient *c = arg;
	ssize_t n;
	int status;

	while ((n = read(c->out, c->got + c->len,
	                 sizeof(c->got) - 1 - c->len)) > 0)
		c->len += (size_t)n;
	c->got[c->len] = '\0';
	if (strstr(c->got, LINE) != NULL)
		return true;
	if (!c->exited && waitpid(c->pid, &status, WNOHANG) == c->pid)
		c->exited = true;
	return c->exited && n == 0;
}

static void
sclient_stop(sclient *c)
{
	int status;

	close(c->in);
	if (!c->exited) {
		kill(c->pid, SIGTERM);
		waitpid(c->pid, &status, 0);
	}
	close(c->out);
}

static bool
stderr_says(const char *text)
{
	char path[256], buf[8192];
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/s_client.err", dir);
	if ((f = fopen(path, "r")) == NULL)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, text) != NULL;
}

/* talk runs s_client against s, sends LINE, and tells whether it came
 * back. */
static bool
talk(tt_server *s, const char *extra)
{
	sclient c;
	bool echoed;

	sclient_start(&c, s->port, extra);
	assert_int_equal(write(c.in, LINE, strlen(LINE)),
	                 (ssize_t)strlen(LINE));
	assert_int_equal(weft_test_run_until(loop, sclient_poll, &c, 10000), 0);
	echoed = strstr(c.got, LINE) != NULL;
	sclient_stop(&c);
	return echoed;
}

static weft_tls_ctx *
server_ctx(int min_version)
{
	weft_tls_opts o = {.min_version = min_version};
	weft_tls_ctx *tls;

	/* node-a.crt/.key and ca.crt, made by gen-certs.sh. */
	assert_int_equal(tt_ctx(&pki, "node-a", &o, &tls), 0);
	return tls;
}

static char *
with_cert(char *buf, size_t len, const char *more)
{
	snprintf(buf, len, "-cert %s/probe.crt -key %s/probe.key %s", dir, dir,
	         more);
	return buf;
}

/* ---- Tests -------------------------------------------------------------- */

static void
test_s_client_with_certificate_gets_its_echo(void **state)
{
	weft_tls_ctx *tls;
	tt_server s;
	char opts[512];

	(void)state;
	if (loop == NULL)
		skip();
	tls = server_ctx(0);
	assert_int_equal(tt_server_start(loop, tls, WEFT_TLS_MODE_REQUIRED, &s),
	                 0);
	assert_true(talk(&s, with_cert(opts, sizeof(opts), "")));
	assert_int_equal(s.channels, 1);
	assert_int_equal(s.identity_rv, 0);
	assert_string_equal(s.identity, "probe");
	tt_server_stop(loop, &s);
	weft_tls_ctx_unref(tls);
}

static void
test_s_client_without_certificate_is_refused(void **state)
{
	weft_tls_ctx *tls;
	tt_server s;

	(void)state;
	if (loop == NULL)
		skip();
	tls = server_ctx(0);
	assert_int_equal(tt_server_start(loop, tls, WEFT_TLS_MODE_REQUIRED, &s),
	                 0);
	assert_false(talk(&s, ""));
	assert_true(stderr_says("certificate required"));
	assert_int_equal(s.channels, 0);
	tt_server_stop(loop, &s);
	weft_tls_ctx_unref(tls);
}

static void
test_tls12_only_if_the_server_allows_it(void **state)
{
	weft_tls_ctx *tls;
	tt_server s;
	char opts[512];

	(void)state;
	if (loop == NULL)
		skip();
	with_cert(opts, sizeof(opts), "-tls1_2");
	tls = server_ctx(0);
	assert_int_equal(tt_server_start(loop, tls, WEFT_TLS_MODE_REQUIRED, &s),
	                 0);
	assert_false(talk(&s, opts));
	assert_int_equal(s.channels, 0);
	tt_server_stop(loop, &s);
	weft_tls_ctx_unref(tls);

	tls = server_ctx(WEFT_TLS_VERSION_1_2);
	assert_int_equal(tt_server_start(loop, tls, WEFT_TLS_MODE_REQUIRED, &s),
	                 0);
	assert_true(talk(&s, opts));
	assert_int_equal(s.channels, 1);
	assert_string_equal(s.identity, "probe");
	tt_server_stop(loop, &s);
	weft_tls_ctx_unref(tls);
}

/* msgs_say looks for text in s_client's message trace. */
static bool
msgs_say(const char *text)
{
	char path[256], buf[65536];
	size_t n;
	FILE *f;

	snprintf(path, sizeof(path), "%s/s_client.msg", dir);
	if ((f = fopen(path, "r")) == NULL)
		return false;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return strstr(buf, text) != NULL;
}

/* sclient_closed takes what s_client printed; true once it printed the
 * echo and traced the server's close_notify, or exited. s_client writes
 * the two to different files, so either may be seen first. */
static bool
sclient_closed(void *arg)
{
	sclient *c = arg;

	return sclient_poll(c) && (msgs_say("close_notify") || c->exited);
}

static void
test_s_client_sees_close_notify_when_the_server_closes(void **state)
{
	weft_tls_ctx *tls;
	tt_server s;
	char opts[1024], more[256];
	sclient c;

	(void)state;
	if (loop == NULL)
		skip();
	tls = server_ctx(0);
	assert_int_equal(tt_server_start(loop, tls, WEFT_TLS_MODE_REQUIRED, &s),
	                 0);
	s.close_after = strlen(LINE); /* echo the line, then close */
	/* -msg traces every message, alerts decrypted. */
	snprintf(more, sizeof(more), "-msg -msgfile %s/s_client.msg", dir);
	sclient_start(&c, s.port, with_cert(opts, sizeof(opts), more));
	assert_int_equal(write(c.in, LINE, strlen(LINE)),
	                 (ssize_t)strlen(LINE));
	assert_int_equal(weft_test_run_until(loop, sclient_closed, &c, 10000),
	                 0);
	assert_non_null(strstr(c.got, LINE));
	assert_true(msgs_say("<<< TLS 1.3, Alert"));
	assert_true(msgs_say("warning close_notify"));
	sclient_stop(&c);
	assert_int_equal(s.error, 0);
	tt_server_stop(loop, &s);
	weft_tls_ctx_unref(tls);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_s_client_with_certificate_gets_its_echo),
	    cmocka_unit_test(test_s_client_without_certificate_is_refused),
	    cmocka_unit_test(test_tls12_only_if_the_server_allows_it),
	    cmocka_unit_test(
	        test_s_client_sees_close_notify_when_the_server_closes),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
