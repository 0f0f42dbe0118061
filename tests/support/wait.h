/* SPDX-License-Identifier: MIT */
/* wait.h: deadlines. Running a loop until a condition holds or a time
 * is up, and the conditions the tests share. */
#ifndef WEFT_TEST_WAIT_H
#define WEFT_TEST_WAIT_H

#include <stdbool.h>
#include <stdint.h>

#include <weft/loop.h>

/*
 * weft_test_run_until is weft_loop_run_until with a 1 ms ticker on loop,
 * for conditions that other threads make true (the loop would otherwise
 * sleep until its own next event). Returns 0, WEFT_ETIMEDOUT, or the
 * ticker's error. The loop's thread.
 */
int weft_test_run_until(weft_loop *loop, bool (*done)(void *), void *arg,
                        uint64_t timeout_ms);

/* Conditions for weft_test_run_until and its kind. */
bool weft_test_never(void *arg);       /* false: wait out the time */
bool weft_test_flag_set(void *flag);   /* *(bool *)flag */
bool weft_test_atomic_set(void *flag); /* atomic_load((atomic_int *)flag) */

#endif
