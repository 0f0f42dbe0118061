/* SPDX-License-Identifier: MIT */
/* test_log.c: error codes and the log sink. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <weft/core.h>

static void
test_every_code_has_a_distinct_name_and_message(void **state)
{
	static const int codes[] = {
#define CODE(name, value, msg) WEFT_##name,
	    WEFT_ERRNO_MAP(CODE)
#undef CODE
	};
	size_t i, j, n = sizeof(codes) / sizeof(codes[0]);

	(void)state;
	for (i = 0; i < n; i++) {
		assert_true(codes[i] < 0);
		assert_string_not_equal(weft_strerror(codes[i]),
		                        "unknown error");
		for (j = i + 1; j < n; j++) {
			assert_int_not_equal(codes[i], codes[j]);
			assert_string_not_equal(weft_errname(codes[i]),
			                        weft_errname(codes[j]));
		}
	}
	assert_string_equal(weft_strerror(0), "success");
	assert_string_equal(weft_strerror(12345), "unknown error");
	assert_string_equal(weft_errname(WEFT_EPROTO), "EPROTO");
	assert_int_equal(weft_from_errno(ECONNREFUSED), WEFT_ECONNREFUSED);
	assert_int_equal(weft_from_errno(ENOMEM), WEFT_ENOMEM);
	assert_int_equal(weft_from_errno(EPIPE), WEFT_ECLOSED);
	assert_int_equal(weft_from_errno(0), 0);
}

struct captured {
	int calls;
	enum weft_log_level level;
	char line[256];
};

static void
capture(enum weft_log_level level, const char *line, void *arg)
{
	struct captured *c = arg;

	c->calls++;
	c->level = level;
	strncpy(c->line, line, sizeof(c->line) - 1);
}

static void
test_sink_receives_lines_at_or_above_the_level(void **state)
{
	struct captured c;

	(void)state;
	memset(&c, 0, sizeof(c));
	weft_log_set_sink(capture, &c);
	weft_log_set_level(WEFT_LOG_WARN);
	weft_info("dropped %d", 1);
	weft_debug("dropped %d", 2);
	assert_int_equal(c.calls, 0);
	weft_warn("kept %d", 3);
	assert_int_equal(c.calls, 1);
	assert_int_equal(c.level, WEFT_LOG_WARN);
	assert_string_equal(c.line, "kept 3");
	weft_log_set_level(WEFT_LOG_OFF);
	weft_error("dropped");
	assert_int_equal(c.calls, 1);
	weft_log_set_level(WEFT_LOG_INFO);
	weft_log_set_sink(NULL, NULL);
}

/* A burst of the same line is one line; the next one that gets through
 * says how many were dropped. */
static void
test_limited_lines_are_counted_not_repeated(void **state)
{
	weft_log_limit lim = WEFT_LOG_LIMIT_INIT(60000);
	struct captured c = {0};
	int i, emitted = 0;

	(void)state;
	weft_log_set_sink(capture, &c);
	weft_log_set_level(WEFT_LOG_INFO);
	for (i = 0; i < 100; i++)
		emitted +=
		    weft_log_limited(&lim, WEFT_LOG_WARN, "bad peer %d", i);
	assert_int_equal(emitted, 1);
	assert_int_equal(c.calls, 1);
	assert_string_equal(c.line, "bad peer 0");
	/* The interval is over (as if a minute had passed). */
	lim.last_ns = 0;
	assert_true(weft_log_limited(&lim, WEFT_LOG_WARN, "bad peer %d", 100));
	assert_int_equal(c.calls, 2);
	assert_non_null(strstr(c.line, "bad peer 100 (and 99 more like it"));
	/* Nothing dropped since: a plain line. */
	lim.last_ns = 0;
	assert_true(weft_log_limited(&lim, WEFT_LOG_WARN, "calm"));
	assert_string_equal(c.line, "calm");
	weft_log_set_sink(NULL, NULL);
}

/* Runs first, before anything has read the level: a library must not
 * print INFO lines into the stderr of the program that uses it. */
static void
test_default_level_is_warn_without_weft_log(void **state)
{
	(void)state;
	assert_int_equal(weft_log_get_level(), WEFT_LOG_WARN);
	assert_false(WEFT_LOG_ENABLED(WEFT_LOG_INFO));
	assert_true(WEFT_LOG_ENABLED(WEFT_LOG_WARN));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_default_level_is_warn_without_weft_log),
	    cmocka_unit_test(test_every_code_has_a_distinct_name_and_message),
	    cmocka_unit_test(test_sink_receives_lines_at_or_above_the_level),
	    cmocka_unit_test(test_limited_lines_are_counted_not_repeated),
	};

	unsetenv("WEFT_LOG");
	return cmocka_run_group_tests(tests, NULL, NULL);
}
