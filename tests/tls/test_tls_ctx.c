/* SPDX-License-Identifier: MIT */
/*
 * test_tls_ctx.c: making TLS contexts. Bad options are refused, files
 * that cannot be used are refused with OpenSSL's reason in the log, an
 * encrypted key fails instead of prompting, and what the API says about
 * channels without TLS.
 */
#include <openssl/pem.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "tls_int.h"
#include "tls_test.h"

static tt_pki pki;
static char cert[256], key[256], ca[256], other_key[256];

static int
setup(void **state)
{
	(void)state;
	tt_log_capture();
	if (tt_pki_new(&pki) != 0 || tt_node(&pki, "node-a", "node-a") != 0 ||
	    tt_node(&pki, "node-b", "node-b") != 0)
		return -1;
	tt_path(&pki, "node-a", "crt", cert, sizeof(cert));
	tt_path(&pki, "node-a", "key", key, sizeof(key));
	tt_path(&pki, "ca", "crt", ca, sizeof(ca));
	tt_path(&pki, "node-b", "key", other_key, sizeof(other_key));
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	tt_pki_free(&pki);
	weft_log_set_sink(NULL, NULL);
	return 0;
}

static int
try_new(const weft_tls_opts *o)
{
	weft_tls_ctx *tls = NULL;
	int rv = weft_tls_ctx_new(o, &tls);

	if (rv == 0)
		weft_tls_ctx_unref(tls);
	return rv;
}

static void
test_bad_options_are_refused(void **state)
{
	weft_tls_opts o = {.cert_file = cert, .key_file = key, .ca_file = ca};

	(void)state;
	assert_int_equal(try_new(NULL), WEFT_EINVAL);
	assert_int_equal(try_new(&o), 0);
	o.key_file = NULL; /* a certificate without its key */
	assert_int_equal(try_new(&o), WEFT_EINVAL);
	o.key_file = key;
	o.ca_file = NULL; /* nothing to verify peers with */
	assert_int_equal(try_new(&o), WEFT_EINVAL);
	o.verify = WEFT_TLS_VERIFY_NONE;
	assert_int_equal(try_new(&o), 0);
	o.ca_file = ca;
	o.verify = WEFT_TLS_VERIFY_OPTIONAL;
	assert_int_equal(try_new(&o), 0);
	o.verify = 7;
	assert_int_equal(try_new(&o), WEFT_EINVAL);
	o.verify = WEFT_TLS_VERIFY_REQUIRED;
	o.min_version = 11;
	assert_int_equal(try_new(&o), WEFT_EINVAL);
	o.min_version = WEFT_TLS_VERSION_1_2;
	assert_int_equal(try_new(&o), 0);
	o.read_buffer_bytes = 1u << 30;
	assert_int_equal(try_new(&o), WEFT_EINVAL);
	o.read_buffer_bytes = 0;
	o.ciphersuites = "NOT_A_SUITE";
	assert_int_equal(try_new(&o), WEFT_ECONFIG);
	o.ciphersuites = "TLS_CHACHA20_POLY1305_SHA256";
	o.ktls = true; /* harmless where the kernel has none */
	o.no_resumption = true;
	assert_int_equal(try_new(&o), 0);
}

static void
test_unusable_files_are_refused_with_the_reason(void **state)
{
	weft_tls_opts o = {.cert_file = cert, .key_file = key, .ca_file = ca};
	char missing[300];

	(void)state;
	snprintf(missing, sizeof(missing), "%s/missing.crt", pki.dir);
	tt_log_clear();
	o.cert_file = missing;
	assert_int_equal(try_new(&o), WEFT_ECONFIG);
	assert_true(tt_log_contains("missing.crt"));
	assert_true(tt_log_contains("No such file"));

	tt_log_clear();
	o.cert_file = cert;
	o.key_file = other_key;
	assert_int_equal(try_new(&o), WEFT_ECONFIG);
	assert_true(tt_log_contains("key values mismatch"));

	tt_log_clear();
	o.key_file = key;
	o.ca_file = missing;
	assert_int_equal(try_new(&o), WEFT_ECONFIG);
	assert_true(tt_log_contains("CA bundle"));
}

static void
test_encrypted_key_fails_without_prompting(void **state)
{
	weft_tls_opts o = {.cert_file = cert, .ca_file = ca};
	char path[300];
	EVP_PKEY *pkey;
	FILE *f;

	(void)state;
	f = fopen(key, "r");
	assert_non_null(f);
	pkey = PEM_read_PrivateKey(f, NULL, NULL, NULL);
	fclose(f);
	assert_non_null(pkey);
	snprintf(path, sizeof(path), "%s/encrypted.key", pki.dir);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(PEM_write_PrivateKey(f, pkey, EVP_aes_128_cbc(),
	                                      (unsigned char *)"secret", 6,
	                                      NULL, NULL),
	                 1);
	fclose(f);
	EVP_PKEY_free(pkey);
	o.key_file = path;
	tt_log_clear();
	assert_int_equal(try_new(&o), WEFT_ECONFIG);
	assert_true(tt_log_contains("encrypted.key"));
}

static void
test_client_only_context_cannot_accept(void **state)
{
	weft_tls_opts o = {.ca_file = ca};
	weft_tls_ctx *tls;
	SSL *ssl;

	(void)state;
	assert_int_equal(weft_tls_ctx_new(&o, &tls), 0);
	assert_int_equal(weft__tls_ssl_new(tls, true, NULL, &ssl), WEFT_EINVAL);
	assert_int_equal(weft__tls_ssl_new(tls, false, "node-a", &ssl), 0);
	SSL_free(ssl);
	/* References: the last unref frees. */
	weft_tls_ctx_ref(tls);
	weft_tls_ctx_unref(tls);
	weft_tls_ctx_unref(tls);
	weft_tls_ctx_unref(NULL);
}

static void
test_versions_parse(void **state)
{
	int v = 0;

	(void)state;
	assert_int_equal(weft_tls_version_parse("1.2", &v), 0);
	assert_int_equal(v, WEFT_TLS_VERSION_1_2);
	assert_int_equal(weft_tls_version_parse("1.3", &v), 0);
	assert_int_equal(v, WEFT_TLS_VERSION_1_3);
	assert_int_equal(weft_tls_version_parse("1.1", &v), WEFT_EINVAL);
	assert_int_equal(weft_tls_version_parse(NULL, &v), WEFT_EINVAL);
}

static void
test_plaintext_channel_has_no_tls(void **state)
{
	weft_channel *a, *b;
	weft_tls_info info;
	weft_loop *loop;
	char buf[64];

	(void)state;
	assert_int_equal(weft_loop_new(&loop), 0);
	assert_int_equal(
	    weft_inproc_pair(loop, NULL, NULL, NULL, NULL, NULL, &a, &b), 0);
	assert_false(weft_tls_is_active(a));
	assert_int_equal(weft_tls_peer_identity(a, buf, sizeof(buf)),
	                 WEFT_EINVAL);
	assert_int_equal(weft_tls_peer_check(a, "x"), WEFT_EINVAL);
	assert_int_equal(weft_tls_get_info(a, &info), WEFT_EINVAL);
	assert_null(weft__tls_stream_ssl(weft_channel_stream(a)));
	weft_loop_free(loop);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_bad_options_are_refused),
	    cmocka_unit_test(test_unusable_files_are_refused_with_the_reason),
	    cmocka_unit_test(test_encrypted_key_fails_without_prompting),
	    cmocka_unit_test(test_client_only_context_cannot_accept),
	    cmocka_unit_test(test_versions_parse),
	    cmocka_unit_test(test_plaintext_channel_has_no_tls),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
