/* SPDX-License-Identifier: MIT */
/* echo_verb.h: the echo handler the messaging, key-value, simulator and
 * benchmark tests register on their services. */
#ifndef WEFT_TEST_ECHO_VERB_H
#define WEFT_TEST_ECHO_VERB_H

#include <weft/messaging.h>

/* weft_test_on_echo is a weft_msvc_handler_cb that responds to a request
 * with its own payload; arg is not used. */
void weft_test_on_echo(weft_msvc *svc, weft_msvc_msg *msg, void *arg);

#endif
