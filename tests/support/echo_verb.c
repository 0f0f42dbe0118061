/* SPDX-License-Identifier: MIT */
/* echo_verb.c: the tests' echo handler (see echo_verb.h). */
#include "echo_verb.h"

void
weft_test_on_echo(weft_msvc *svc, weft_msvc_msg *msg, void *arg)
{
	(void)svc;
	(void)arg;
	weft_msvc_respond(msg, weft_msvc_msg_data(msg), weft_msvc_msg_len(msg));
}
