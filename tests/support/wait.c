/* SPDX-License-Identifier: MIT */
/* wait.c: deadlines (see wait.h). */
#include <stdatomic.h>

#include "wait.h"

static void
tick(weft_timer *timer, void *arg)
{
	(void)timer;
	(void)arg;
}

int
weft_test_run_until(weft_loop *loop, bool (*done)(void *), void *arg,
                    uint64_t timeout_ms)
{
	weft_timer *ticker;
	int rv;

	if ((rv = weft_timer_new(loop, tick, NULL, &ticker)) != 0)
		return rv;
	weft_timer_start(ticker, 1, 1);
	rv = weft_loop_run_until(loop, done, arg, timeout_ms);
	weft_timer_free(ticker);
	return rv;
}

bool
weft_test_never(void *arg)
{
	(void)arg;
	return false;
}

bool
weft_test_flag_set(void *flag)
{
	return *(const bool *)flag;
}

bool
weft_test_atomic_set(void *flag)
{
	return atomic_load((atomic_int *)flag) != 0;
}
