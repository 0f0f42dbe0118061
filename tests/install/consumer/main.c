/* SPDX-License-Identifier: MIT */
/* main.c: a program built against an installed weft, as a user would. */
#include <stdio.h>
#include <string.h>

#include <weft/core.h>
#include <weft/loop.h>

int
main(void)
{
	weft_loop *loop;
	int rv;

	if ((rv = weft_init()) != 0) {
		fprintf(stderr, "weft_init: %s\n", weft_strerror(rv));
		return 1;
	}
	if ((rv = weft_loop_new(&loop)) != 0) {
		fprintf(stderr, "weft_loop_new: %s\n", weft_strerror(rv));
		return 1;
	}
	weft_loop_free(loop);
	if (strcmp(weft_version(), WEFT_VERSION_STRING) != 0) {
		fprintf(stderr, "running weft %s, built against %s\n",
		        weft_version(), WEFT_VERSION_STRING);
		return 1;
	}
	printf("%s\n", weft_strerror(WEFT_EPROTO));
	return 0;
}
