/* SPDX-License-Identifier: MIT */
/* json_check.h: whether a text is one valid JSON value (RFC 8259), for
 * tests of what weft writes as JSON. */
#ifndef WEFT_TEST_JSON_CHECK_H
#define WEFT_TEST_JSON_CHECK_H

#include <stdbool.h>
#include <stddef.h>

/* json_is_valid is true when the len bytes at text are one JSON value,
 * with white space around it at most. Nesting deeper than 64 fails. */
bool json_is_valid(const char *text, size_t len);

#endif
