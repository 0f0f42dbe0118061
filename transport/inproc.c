/* SPDX-License-Identifier: MIT */
/*
 * inproc.c: two channels joined by a libevent bufferevent pair.
 *
 * A pair moves bytes between the two ends' buffers without system calls
 * and honours disabled reading, so back-pressure works as on a socket.
 * EOF: when a channel is torn down, core flushes its bufferevent with
 * BEV_FINISHED, which a pair delivers to the other end as BEV_EVENT_EOF.
 */
#include <event2/bufferevent.h>

#include "transport_int.h"

static int
run_init(weft_channel *ch, weft_channel_init_cb init, void *arg)
{
	int rv;

	if (init == NULL || (rv = init(ch, arg)) == 0)
		return 0;
	weft_warn("inproc pair: init failed: %s", weft_strerror(rv));
	return rv;
}

int
weft_inproc_pair(weft_loop *loop, const weft_channel_opts *opts,
                 weft_channel_init_cb init_a, void *arg_a,
                 weft_channel_init_cb init_b, void *arg_b, weft_channel **a,
                 weft_channel **b)
{
	struct bufferevent *pair[2];
	weft_channel *ch_a, *ch_b;
	int rv;

	if (loop == NULL || a == NULL || b == NULL)
		return WEFT_EINVAL;
	WEFT_ASSERT_IN_LOOP(loop);
	if ((rv = weft_init()) != 0)
		return rv;
	/* Deferred callbacks: a write must not run the other end's read
	 * handler inside it (an echo would recurse without bound). */
	if (bufferevent_pair_new(
	        weft_loop_base(loop),
	        BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS, pair) != 0)
		return WEFT_ENOMEM;
	if ((rv = weft_channel_new(loop, pair[0], opts, &ch_a)) != 0) {
		bufferevent_free(pair[1]);
		return rv;
	}
	if ((rv = weft_channel_new(loop, pair[1], opts, &ch_b)) != 0)
		goto err_close_a;
	weft_channel_set_peer(ch_a, "inproc");
	weft_channel_set_peer(ch_b, "inproc");
	if ((rv = run_init(ch_a, init_a, arg_a)) != 0 ||
	    (rv = run_init(ch_b, init_b, arg_b)) != 0)
		goto err_close_b;
	*a = ch_a;
	*b = ch_b;
	weft_channel_activate(ch_a);
	weft_channel_activate(ch_b);
	return 0;

err_close_b:
	weft_channel_close(ch_b);
err_close_a:
	weft_channel_close(ch_a);
	return rv;
}
