/* SPDX-License-Identifier: MIT */
/* test_store.c: the key-value replica, its payloads and its settings
 * (white-box: services/kv/kv_int.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kv_int.h"

static struct weft__kv_version
ver(uint64_t ts, const char *origin)
{
	return (struct weft__kv_version){ts, origin};
}

/* Applies a put of a string value. */
static int
put(struct weft__kv_store *s, const char *key, const char *value, uint64_t ts,
    const char *origin)
{
	struct weft__kv_blob *b = weft__kv_blob_new(value, strlen(value));
	struct weft__kv_version v = ver(ts, origin);
	int rv;

	assert_non_null(b);
	rv = weft__kv_store_apply(s, key, strlen(key), b, &v);
	weft__kv_blob_unref(b);
	return rv;
}

static int
del(struct weft__kv_store *s, const char *key, uint64_t ts, const char *origin)
{
	struct weft__kv_version v = ver(ts, origin);

	return weft__kv_store_apply(s, key, strlen(key), NULL, &v);
}

/* Asserts the key holds value (NULL: absent or deleted). */
static void
expect(struct weft__kv_store *s, const char *key, const char *value)
{
	struct weft__kv_blob *b = weft__kv_store_get(s, key, strlen(key), NULL);

	if (value == NULL) {
		assert_null(b);
		return;
	}
	assert_non_null(b);
	assert_int_equal(b->len, strlen(value));
	assert_memory_equal(b->data, value, b->len);
	weft__kv_blob_unref(b);
}

static void
test_siphash_matches_the_reference_vector(void **state)
{
	/* SipHash-2-4 paper, appendix A: key 00..0f, message 00..0e. */
	const uint64_t key[2] = {0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
	uint8_t msg[15];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(msg); i++)
		msg[i] = (uint8_t)i;
	assert_true(weft__kv_siphash(key, msg, sizeof(msg)) ==
	            0xa129ca6149be45e5ull);
	assert_true(weft__kv_siphash(key, "", 0) == 0x726fdb47dd0e0e31ull);
}

static void
test_newer_version_wins_in_any_order(void **state)
{
	struct weft__kv_store a, b;

	(void)state;
	assert_int_equal(weft__kv_store_init(&a), 0);
	assert_int_equal(weft__kv_store_init(&b), 0);
	/* The same three writes, in opposite orders. */
	assert_int_equal(put(&a, "k", "one", 10, "n1"), WEFT__KV_APPLIED);
	assert_int_equal(put(&a, "k", "two", 20, "n1"), WEFT__KV_APPLIED);
	assert_int_equal(put(&a, "k", "tie", 20, "n2"), WEFT__KV_APPLIED);
	assert_int_equal(put(&b, "k", "tie", 20, "n2"), WEFT__KV_APPLIED);
	assert_int_equal(put(&b, "k", "two", 20, "n1"), WEFT__KV_SUPERSEDED);
	assert_int_equal(put(&b, "k", "one", 10, "n1"), WEFT__KV_SUPERSEDED);
	expect(&a, "k", "tie");
	expect(&b, "k", "tie");
	/* A duplicate is held already, not applied twice. */
	assert_int_equal(put(&a, "k", "tie", 20, "n2"), WEFT__KV_HELD);
	weft__kv_store_fini(&a);
	weft__kv_store_fini(&b);
}

/*
 * The hybrid clock takes versions from other members only within the
 * skew, so a forged 2^64-1 cannot pin the clock, and it never wraps to a
 * small timestamp (which would lose every later write to an existing
 * key).
 */
static void
test_clock_refuses_far_future_versions_and_never_wraps(void **state)
{
	weft_kv kv;
	uint64_t now = weft_wall_ms() << 16, t1, t2;

	(void)state;
	memset(&kv, 0, sizeof(kv));
	kv.max_skew_ms = 30000;
	assert_int_equal(weft__kv_clock_observe(&kv, UINT64_MAX), WEFT_EINVAL);
	assert_int_equal(weft__kv_clock_observe(&kv, now + (60000ull << 16)),
	                 WEFT_EINVAL);
	assert_true(atomic_load(&kv.clock) == 0);
	/* Within the skew: taken, and the next stamp is above it. */
	assert_int_equal(weft__kv_clock_observe(&kv, now + (10000ull << 16)),
	                 0);
	t1 = weft__kv_clock_next(&kv);
	assert_true(t1 > now + (10000ull << 16));
	t2 = weft__kv_clock_next(&kv);
	assert_true(t2 > t1);
	/* At its end the clock says so instead of starting again at 0. */
	atomic_store(&kv.clock, UINT64_MAX);
	assert_true(weft__kv_clock_next(&kv) == 0);
	assert_true(atomic_load(&kv.clock) == UINT64_MAX);
}

static void
test_delete_is_a_versioned_tombstone(void **state)
{
	struct weft__kv_store s;
	struct weft__kv_version v;
	struct weft__kv_blob *b;

	(void)state;
	assert_int_equal(weft__kv_store_init(&s), 0);
	assert_int_equal(put(&s, "k", "v", 10, "n1"), 1);
	assert_int_equal(del(&s, "k", 20, "n2"), 1);
	expect(&s, "k", NULL);
	/* A late put older than the delete does not bring the key back. */
	assert_int_equal(put(&s, "k", "late", 15, "n3"), WEFT__KV_SUPERSEDED);
	expect(&s, "k", NULL);
	b = weft__kv_store_get(&s, "k", 1, &v);
	assert_null(b);
	assert_true(v.ts == 20);
	/* A delete of a key never seen still leaves its version behind. */
	assert_int_equal(del(&s, "never", 5, "n1"), 1);
	assert_int_equal(put(&s, "never", "old", 4, "n1"), WEFT__KV_SUPERSEDED);
	expect(&s, "never", NULL);
	assert_int_equal(put(&s, "never", "new", 6, "n1"), 1);
	expect(&s, "never", "new");
	assert_int_equal(atomic_load(&s.keys), 2);
	assert_int_equal(atomic_load(&s.value_bytes), 3);
	weft__kv_store_fini(&s);
}

static void
test_table_grows_and_keeps_every_key(void **state)
{
	struct weft__kv_store s;
	char key[32], value[32];
	int i;

	(void)state;
	assert_int_equal(weft__kv_store_init(&s), 0);
	for (i = 0; i < 20000; i++) {
		snprintf(key, sizeof(key), "key-%d", i);
		snprintf(value, sizeof(value), "value-%d", i);
		assert_int_equal(put(&s, key, value, 1, "n1"), 1);
	}
	for (i = 0; i < 20000; i++) {
		snprintf(key, sizeof(key), "key-%d", i);
		snprintf(value, sizeof(value), "value-%d", i);
		expect(&s, key, value);
	}
	expect(&s, "key-20000", NULL);
	assert_int_equal(atomic_load(&s.keys), 20000);
	weft__kv_store_fini(&s);
}

static void
test_a_reader_keeps_its_value_across_an_update(void **state)
{
	struct weft__kv_store s;
	struct weft__kv_blob *b;

	(void)state;
	assert_int_equal(weft__kv_store_init(&s), 0);
	assert_int_equal(put(&s, "k", "first", 1, "n1"), 1);
	b = weft__kv_store_get(&s, "k", 1, NULL);
	assert_int_equal(put(&s, "k", "second", 2, "n1"), 1);
	assert_memory_equal(b->data, "first", 5);
	weft__kv_blob_unref(b);
	expect(&s, "k", "second");
	weft__kv_store_fini(&s);
}

/* Takes back the write at (ts, "n1") with the coordinator's state
 * (value at rts, or none when value is NULL). */
static int
abort_write(struct weft__kv_store *s, const char *key, uint64_t ts,
            const char *value, uint64_t rts)
{
	struct weft__kv_blob *b =
	    value ? weft__kv_blob_new(value, strlen(value)) : NULL;
	struct weft__kv_version failed = ver(ts, "n1"),
	                        restore = ver(rts, "n2");
	int rv;

	rv = weft__kv_store_abort(s, key, strlen(key), &failed, b, &restore);
	weft__kv_blob_unref(b);
	return rv;
}

static void
test_an_aborted_write_goes_back_and_stays_out(void **state)
{
	struct weft__kv_store s;

	(void)state;
	assert_int_equal(weft__kv_store_init(&s), 0);
	/* Applied, then aborted: back to the coordinator's older state. */
	assert_int_equal(put(&s, "a", "acked", 10, "n2"), WEFT__KV_APPLIED);
	assert_int_equal(put(&s, "a", "failed", 20, "n1"), WEFT__KV_APPLIED);
	assert_int_equal(abort_write(&s, "a", 20, "acked", 10),
	                 WEFT__KV_APPLIED);
	expect(&s, "a", "acked");
	/* The same version again (a duplicate) is refused; newer ones win. */
	assert_int_equal(put(&s, "a", "failed", 20, "n1"), WEFT__KV_ABORTED);
	expect(&s, "a", "acked");
	assert_int_equal(put(&s, "a", "newer", 15, "n3"), WEFT__KV_APPLIED);
	expect(&s, "a", "newer");
	/* The abort first, the write after it: refused when it comes. */
	assert_int_equal(put(&s, "b", "acked", 10, "n2"), WEFT__KV_APPLIED);
	assert_int_equal(abort_write(&s, "b", 20, "acked", 10), WEFT__KV_HELD);
	assert_int_equal(put(&s, "b", "failed", 20, "n1"), WEFT__KV_ABORTED);
	expect(&s, "b", "acked");
	/* A key the coordinator never held: absent again. */
	assert_int_equal(put(&s, "c", "failed", 20, "n1"), WEFT__KV_APPLIED);
	assert_int_equal(abort_write(&s, "c", 20, NULL, 0), WEFT__KV_APPLIED);
	expect(&s, "c", NULL);
	assert_int_equal(put(&s, "c", "later", 1, "n2"), WEFT__KV_APPLIED);
	expect(&s, "c", "later");
	/* A newer write than the failed one is never taken back. */
	assert_int_equal(put(&s, "d", "failed", 20, "n1"), WEFT__KV_APPLIED);
	assert_int_equal(put(&s, "d", "newest", 30, "n3"), WEFT__KV_APPLIED);
	assert_int_equal(abort_write(&s, "d", 20, "acked", 10),
	                 WEFT__KV_SUPERSEDED);
	expect(&s, "d", "newest");
	/* The coordinator's state, newer than the replica's, is applied. */
	assert_int_equal(put(&s, "e", "old", 5, "n2"), WEFT__KV_APPLIED);
	assert_int_equal(abort_write(&s, "e", 20, "acked", 10),
	                 WEFT__KV_APPLIED);
	expect(&s, "e", "acked");
	weft__kv_store_fini(&s);
}

static void
test_an_abort_round_trips(void **state)
{
	static const struct weft__kv_version failed = {0x1234, "n1"},
	                                     restore = {0x1200, "n2"};
	uint8_t buf[256];
	struct weft__kv_req req;
	size_t n = 0;

	(void)state;
	n += weft__kv_enc_array(buf + n, 8);
	n += weft__kv_enc_uint(buf + n, WEFT__KV_OP_ABORT);
	n += weft__kv_enc_bin(buf + n, 1);
	buf[n++] = 'k';
	n += weft__kv_enc_bin(buf + n, 1);
	buf[n++] = 'v';
	n += weft__kv_enc_version(buf + n, &failed);
	n += weft__kv_enc_uint(buf + n, WEFT__KV_OP_PUT);
	n += weft__kv_enc_version(buf + n, &restore);
	assert_int_equal(weft__kv_decode_replicate(buf, n, &req), 0);
	assert_int_equal(req.op, WEFT__KV_OP_ABORT);
	assert_true(req.ts == 0x1234 && req.restore_ts == 0x1200);
	assert_int_equal(req.restore_op, WEFT__KV_OP_PUT);
	assert_int_equal(req.restore_origin_len, 2);
	assert_memory_equal(req.restore_origin, "n2", 2);
	while (n-- > 0)
		assert_int_equal(weft__kv_decode_replicate(buf, n, &req),
		                 WEFT_EINVAL);
	/* Eight fields with a put's op, or five with an abort's: refused. */
	n = weft__kv_enc_array(buf, 8);
	n += weft__kv_enc_uint(buf + n, WEFT__KV_OP_PUT);
	assert_int_equal(weft__kv_decode_replicate(buf, sizeof(buf), &req),
	                 WEFT_EINVAL);
}

static void
test_payloads_round_trip(void **state)
{
	uint8_t buf[256];
	struct weft__kv_req req;
	size_t n = 0;

	(void)state;
	n += weft__kv_enc_array(buf + n, 5);
	n += weft__kv_enc_uint(buf + n, WEFT__KV_OP_PUT);
	n += weft__kv_enc_bin(buf + n, 3);
	memcpy(buf + n, "key", 3);
	n += 3;
	n += weft__kv_enc_bin(buf + n, 2);
	memcpy(buf + n, "vv", 2);
	n += 2;
	n += weft__kv_enc_uint(buf + n, 0x123456789abcull);
	n += weft__kv_enc_str(buf + n, 2);
	memcpy(buf + n, "n7", 2);
	n += 2;
	assert_int_equal(weft__kv_decode_replicate(buf, n, &req), 0);
	assert_int_equal(req.op, WEFT__KV_OP_PUT);
	assert_int_equal(req.key_len, 3);
	assert_memory_equal(req.key, "key", 3);
	assert_int_equal(req.value_len, 2);
	assert_true(req.ts == 0x123456789abcull);
	assert_int_equal(req.origin_len, 2);
	assert_memory_equal(req.origin, "n7", 2);
	/* Every truncation is refused. */
	while (n-- > 0)
		assert_int_equal(weft__kv_decode_replicate(buf, n, &req),
		                 WEFT_EINVAL);
}

static void
test_other_encodings_are_accepted(void **state)
{
	/* [bin8 "k", bin16 "xy"] and a uint16 and str8 in a replicate. */
	static const uint8_t put[] = {0x92, 0xc4, 1, 'k', 0xc5, 0, 2, 'x', 'y'};
	static const uint8_t rep[] = {0x95, 0xd0, 2, 0xc4, 1, 'k', 0xc4, 0,
	                              0xcd, 1,    0, 0xd9, 2, 'n', '1'};
	struct weft__kv_req req;

	(void)state;
	assert_int_equal(weft__kv_decode_put(put, sizeof(put), &req), 0);
	assert_int_equal(req.value_len, 2);
	assert_int_equal(weft__kv_decode_replicate(rep, sizeof(rep), &req), 0);
	assert_int_equal(req.op, WEFT__KV_OP_DELETE);
	assert_true(req.ts == 256);
}

static void
test_bad_payloads_are_refused(void **state)
{
	static const uint8_t empty_key[] = {0x91, 0xc4, 0};
	static const uint8_t not_array[] = {0xc4, 1, 'k'};
	static const uint8_t trailing[] = {0x91, 0xc4, 1, 'k', 0};
	static const uint8_t str_key[] = {0x91, 0xa1, 'k'};
	static const uint8_t huge_bin[] = {0x91, 0xc6, 0xff, 0xff,
	                                   0xff, 0xff, 'k'};
	static const uint8_t bad_op[] = {0x95, 3, 0xc4, 1,   'k', 0xc4,
	                                 0,    1, 0xa2, 'n', '1'};
	static const uint8_t neg_ts[] = {0x95, 1,    0xc4, 1,   'k', 0xc4,
	                                 0,    0xff, 0xa2, 'n', '1'};
	uint8_t long_key[8 + WEFT_KV_MAX_KEY + 1];
	struct weft__kv_req req;
	size_t n;

	(void)state;
	assert_int_equal(
	    weft__kv_decode_key(empty_key, sizeof(empty_key), &req),
	    WEFT_EINVAL);
	assert_int_equal(
	    weft__kv_decode_key(not_array, sizeof(not_array), &req),
	    WEFT_EINVAL);
	assert_int_equal(weft__kv_decode_key(trailing, sizeof(trailing), &req),
	                 WEFT_EINVAL);
	assert_int_equal(weft__kv_decode_key(str_key, sizeof(str_key), &req),
	                 WEFT_EINVAL);
	assert_int_equal(weft__kv_decode_key(huge_bin, sizeof(huge_bin), &req),
	                 WEFT_EINVAL);
	assert_int_equal(weft__kv_decode_key(NULL, 0, &req), WEFT_EINVAL);
	assert_int_equal(
	    weft__kv_decode_replicate(bad_op, sizeof(bad_op), &req),
	    WEFT_EINVAL);
	assert_int_equal(
	    weft__kv_decode_replicate(neg_ts, sizeof(neg_ts), &req),
	    WEFT_EINVAL);
	n = weft__kv_enc_array(long_key, 1);
	n += weft__kv_enc_bin(long_key + n, WEFT_KV_MAX_KEY + 1);
	memset(long_key + n, 'k', WEFT_KV_MAX_KEY + 1);
	n += WEFT_KV_MAX_KEY + 1;
	assert_int_equal(weft__kv_decode_key(long_key, n, &req), WEFT_EINVAL);
}

static void
test_settings_parse(void **state)
{
	uint32_t q;

	(void)state;
	assert_int_equal(weft__kv_parse_quorum("majority", 5, &q), 0);
	assert_int_equal(q, 3);
	assert_int_equal(weft__kv_parse_quorum("all", 5, &q), 0);
	assert_int_equal(q, 5);
	assert_int_equal(weft__kv_parse_quorum("one", 5, &q), 0);
	assert_int_equal(q, 1);
	assert_int_equal(weft__kv_parse_quorum("2", 3, &q), 0);
	assert_int_equal(q, 2);
	assert_int_equal(weft__kv_parse_quorum("4", 3, &q), WEFT_EINVAL);
	assert_int_equal(weft__kv_parse_quorum("0", 3, &q), WEFT_EINVAL);
	assert_int_equal(weft__kv_parse_quorum("2x", 3, &q), WEFT_EINVAL);
}

#define THREE_NODES                                                            \
	"[cluster]\nname = c\n[node a]\nhost = h\nport = 1\n"                  \
	"[node b]\nhost = h\nport = 2\n[node c]\nhost = h\nport = 3\n"

/* Reads [kv] from text the way weft_kv_new does; returns its settings'
 * check, with the message in err. */
static int
kv_settings(const char *text, struct weft__kv_settings *s, char *err,
            size_t errlen)
{
	static const weft_msvc_conf_section *const sections[] = {
	    &weft_kv_config_section};
	weft_msvc_config_opts opts = {.sections = sections, .nsections = 1};
	weft_msvc_config *cfg;
	int rv;

	rv = weft_msvc_config_parse_opts(text, "kv.ini", &opts, &cfg, err,
	                                 errlen);
	if (rv != 0)
		return rv;
	rv = weft__kv_settings_read(cfg, 3, s, err, errlen);
	if (rv == 0)
		rv = weft_kv_config_check(cfg, err, errlen);
	weft_msvc_config_free(cfg);
	return rv;
}

/* [kv] takes the file's one grammar: 16MB and "5 s" as [limits] does
 * (both were refused here before), and refuses a misspelt key. */
static void
test_kv_section_uses_the_common_grammar(void **state)
{
	struct weft__kv_settings s;
	char err[256] = "";

	(void)state;
	assert_int_equal(kv_settings(THREE_NODES "[kv]\nmax_value = 16MB\n"
	                                         "replicate_timeout = 5 s\n"
	                                         "write_quorum = all\n",
	                             &s, err, sizeof(err)),
	                 0);
	assert_int_equal(s.max_value, 16u << 20);
	assert_true(s.replicate_timeout_ms == 5000);
	assert_int_equal(s.write_quorum, 3);
	assert_int_equal(kv_settings(THREE_NODES, &s, err, sizeof(err)), 0);
	assert_int_equal(s.write_quorum, 2);
	assert_true(s.replicate_timeout_ms == 2000);
	assert_int_equal(s.max_value, 16u << 20);
	assert_int_equal(kv_settings(THREE_NODES "[kv]\nwrite_qorum = all\n",
	                             &s, err, sizeof(err)),
	                 WEFT_ECONFIG);
	assert_non_null(strstr(err, "kv.ini:13: [kv]: unknown key"));
	assert_int_equal(kv_settings(THREE_NODES "[kv]\nmax_value = 1T\n", &s,
	                             err, sizeof(err)),
	                 WEFT_ECONFIG);
	assert_non_null(strstr(err, "kv.ini:13: [kv] max_value: not a size"));
	assert_int_equal(kv_settings(THREE_NODES "[kv]\nwrite_quorum = 4\n", &s,
	                             err, sizeof(err)),
	                 WEFT_ECONFIG);
	assert_non_null(strstr(err, "kv.ini:13: [kv] write_quorum: 4 is more "
	                            "than the 3 members"));
	/* A value larger than a frame travels in chunks: it and its key
	 * must fit a message. */
	assert_int_equal(kv_settings(THREE_NODES "[limits]\nmax_frame = 1MiB\n"
	                                         "[kv]\nmax_value = 48MiB\n",
	                             &s, err, sizeof(err)),
	                 0);
	assert_int_equal(s.max_value, 48u << 20);
	assert_int_equal(kv_settings(THREE_NODES "[limits]\nmax_frame = 1MiB\n"
	                                         "max_message = 2MiB\n"
	                                         "[kv]\nmax_value = 2MiB\n",
	                             &s, err, sizeof(err)),
	                 WEFT_ECONFIG);
	assert_non_null(strstr(err, "kv.ini:16: [kv] max_value: "));
	assert_non_null(strstr(err, "max_message (2097152 bytes)"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_siphash_matches_the_reference_vector),
	    cmocka_unit_test(test_newer_version_wins_in_any_order),
	    cmocka_unit_test(
	        test_clock_refuses_far_future_versions_and_never_wraps),
	    cmocka_unit_test(test_delete_is_a_versioned_tombstone),
	    cmocka_unit_test(test_table_grows_and_keeps_every_key),
	    cmocka_unit_test(test_a_reader_keeps_its_value_across_an_update),
	    cmocka_unit_test(test_an_aborted_write_goes_back_and_stays_out),
	    cmocka_unit_test(test_an_abort_round_trips),
	    cmocka_unit_test(test_payloads_round_trip),
	    cmocka_unit_test(test_other_encodings_are_accepted),
	    cmocka_unit_test(test_bad_payloads_are_refused),
	    cmocka_unit_test(test_settings_parse),
	    cmocka_unit_test(test_kv_section_uses_the_common_grammar),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
