/* SPDX-License-Identifier: MIT */
/* group.c: a fixed set of loops, each on its own thread. */
#include <stdlib.h>
#include <unistd.h>

#include "core_int.h"

struct weft_loop_group {
	size_t len;
	_Atomic size_t next;
	weft_loop *loops[];
};

int
weft_loop_group_new(size_t n, weft_loop_group **out)
{
	weft_loop_group *group;
	long cpus;
	size_t i;
	int rv;

	if (n == 0) {
		cpus = sysconf(_SC_NPROCESSORS_ONLN);
		n = cpus > 0 ? (size_t)cpus : 1;
	}
	group = calloc(1, sizeof(*group) + n * sizeof(group->loops[0]));
	if (group == NULL)
		return WEFT_ENOMEM;
	for (i = 0; i < n; i++) {
		if ((rv = weft_loop_new(&group->loops[i])) != 0)
			goto err_free_loops;
		group->len = i + 1;
		if ((rv = weft_loop_start(group->loops[i])) != 0)
			goto err_free_loops;
	}
	*out = group;
	return 0;

err_free_loops:
	weft_loop_group_free(group);
	return rv;
}

size_t
weft_loop_group_size(const weft_loop_group *group)
{
	return group->len;
}

weft_loop *
weft_loop_group_at(weft_loop_group *group, size_t i)
{
	return group->loops[i % group->len];
}

weft_loop *
weft_loop_group_next(weft_loop_group *group)
{
	size_t i =
	    atomic_fetch_add_explicit(&group->next, 1, memory_order_relaxed);

	return group->loops[i % group->len];
}

weft_loop *
weft_loop_group_by_key(weft_loop_group *group, uint64_t key)
{
	/* A multiplicative hash spreads sequential keys over the loops. */
	key *= UINT64_C(0x9E3779B97F4A7C15);
	return group->loops[(key >> 32) % group->len];
}

void
weft_loop_group_shutdown(weft_loop_group *group, uint64_t timeout_ms)
{
	size_t i;

	for (i = 0; i < group->len; i++)
		weft_loop_shutdown(group->loops[i], timeout_ms);
	for (i = 0; i < group->len; i++)
		weft_loop_join(group->loops[i]);
}

void
weft_loop_group_free(weft_loop_group *group)
{
	size_t i;

	if (group == NULL)
		return;
	for (i = 0; i < group->len; i++)
		weft_loop_stop(group->loops[i]);
	for (i = 0; i < group->len; i++)
		weft_loop_free(group->loops[i]);
	free(group);
}
