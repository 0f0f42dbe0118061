/* SPDX-License-Identifier: MIT */
/* certs.h: certificates made at test time with the repository's
 * scripts/gen-certs.sh, and scratch directories. Helpers assert with
 * cmocka: the test's thread. */
#ifndef WEFT_TEST_CERTS_H
#define WEFT_TEST_CERTS_H

#include <stdbool.h>

/*
 * weft_test_gen_certs makes dir from its mkdtemp template ("/tmp/x-XXXXXX")
 * and runs `scripts/gen-certs.sh dir args` there (args: node ids, then
 * options such as --client NAME). Returns true; or false, with dir removed,
 * where openssl is missing or the script fails.
 */
bool weft_test_gen_certs(char *dir, const char *args);

/* weft_test_remove_dir removes dir and everything in it; asserts that it
 * could. */
void weft_test_remove_dir(const char *dir);

#endif
