/* SPDX-License-Identifier: MIT */
/* certs.c: certificates and scratch directories (see certs.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "certs.h"

#ifndef WEFT_SOURCE_DIR
#error "WEFT_SOURCE_DIR must name the repository's root"
#endif

void
weft_test_remove_dir(const char *dir)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

bool
weft_test_gen_certs(char *dir, const char *args)
{
	char cmd[1024];

	assert_non_null(mkdtemp(dir));
	snprintf(cmd, sizeof(cmd),
	         "sh %s/scripts/gen-certs.sh %s %s >/dev/null 2>&1",
	         WEFT_SOURCE_DIR, dir, args);
	if (system("openssl version >/dev/null 2>&1") == 0 && system(cmd) == 0)
		return true;
	weft_test_remove_dir(dir);
	return false;
}
