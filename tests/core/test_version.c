/* SPDX-License-Identifier: MIT */
/* SPDX-License-Identifier: MIT */
/* test_version.c: the version macros and weft_version() agree. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include <weft/core.h>

static void
test_version_string_matches_the_macros(void **state)
{
	char text[32];

	(void)state;
	snprintf(text, sizeof(text), "%d.%d.%d", WEFT_VERSION_MAJOR,
	         WEFT_VERSION_MINOR, WEFT_VERSION_PATCH);
	assert_string_equal(WEFT_VERSION_STRING, text);
	assert_string_equal(weft_version(), text);
}

static void
test_version_number_orders_releases(void **state)
{
	(void)state;
	assert_int_equal(weft_version_number(), WEFT_VERSION_NUMBER);
	assert_int_equal(WEFT_VERSION_NUMBER >> 16, WEFT_VERSION_MAJOR);
	assert_int_equal((WEFT_VERSION_NUMBER >> 8) & 0xff, WEFT_VERSION_MINOR);
	assert_int_equal(WEFT_VERSION_NUMBER & 0xff, WEFT_VERSION_PATCH);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_version_string_matches_the_macros),
	    cmocka_unit_test(test_version_number_orders_releases),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
